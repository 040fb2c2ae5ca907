// permute.cu - layout changes around attention: split the fused QKV projection
// into per-head Q (pre-scaled by 1/sqrt(dh)), K, V for strided-batched GEMMs,
// adding the bias on the way; and merge per-head outputs back into token rows.
#include "ops.cuh"

template <typename T>
__global__ void rd__qkv_split_kernel(const T *__restrict__ qkv, const float *__restrict__ bias,
                                     T *__restrict__ q, T *__restrict__ k, T *__restrict__ v,
                                     int L, int heads, int dh, float qscale, size_t total) {
  size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= total) return;
  const int H = heads * dh, H3 = 3 * H;
  const size_t r = idx / H3;
  const int c = (int)(idx % H3), which = c / H, h = (c % H) / dh, d = c % dh;
  const size_t b = r / L, i = r % L;
  float val = rd__ty<T>::to(qkv[idx]) + bias[c];
  const size_t dst = ((b * heads + h) * L + i) * dh + d;
  if (which == 0) q[dst] = rd__ty<T>::from(val * qscale);
  else if (which == 1) k[dst] = rd__ty<T>::from(val);
  else v[dst] = rd__ty<T>::from(val);
}

template <typename T>
void rd__cuda_qkv_split(const T *qkv, const float *bias, T *q, T *k, T *v, int B, int L, int heads,
                        int dh, float qscale, cudaStream_t s) {
  size_t total = (size_t)B * L * 3 * heads * dh;
  if (total)
    rd__qkv_split_kernel<T><<<rd__blocks(total, 256), 256, 0, s>>>(qkv, bias, q, k, v, L, heads, dh,
                                                                  qscale, total);
}

template <typename T>
__global__ void rd__merge_heads_kernel(const T *__restrict__ ctx, T *__restrict__ out, int L,
                                       int heads, int dh, size_t total) {
  size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= total) return;
  const int H = heads * dh;
  const size_t r = idx / H, b = r / L, i = r % L;
  const int c = (int)(idx % H), h = c / dh, d = c % dh;
  out[idx] = ctx[((b * heads + h) * L + i) * dh + d];
}

template <typename T>
void rd__cuda_merge_heads(const T *ctx, T *out, int B, int L, int heads, int dh, cudaStream_t s) {
  size_t total = (size_t)B * L * heads * dh;
  if (total)
    rd__merge_heads_kernel<T><<<rd__blocks(total, 256), 256, 0, s>>>(ctx, out, L, heads, dh, total);
}

template void rd__cuda_qkv_split<__half>(const __half *, const float *, __half *, __half *,
                                         __half *, int, int, int, int, float, cudaStream_t);
template void rd__cuda_qkv_split<__nv_bfloat16>(const __nv_bfloat16 *, const float *,
                                                __nv_bfloat16 *, __nv_bfloat16 *,
                                                __nv_bfloat16 *, int, int, int, int, float,
                                                cudaStream_t);
template void rd__cuda_merge_heads<__half>(const __half *, __half *, int, int, int, int, cudaStream_t);
template void rd__cuda_merge_heads<__nv_bfloat16>(const __nv_bfloat16 *, __nv_bfloat16 *, int, int,
                                                  int, int, cudaStream_t);
