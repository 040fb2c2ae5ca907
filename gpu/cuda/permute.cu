// permute.cu - layout changes around attention: split the fused QKV projection
// into per-head Q (pre-scaled by 1/sqrt(dh)), K, V for strided-batched GEMMs,
// adding the bias on the way; and merge per-head outputs back into token rows.
// 32-bit indexing: the engine bounds a pass's activations below 2^31 elements.
#include "ops.cuh"

template <typename T>
__global__ void rd__qkv_split_kernel(const T *__restrict__ qkv, const float *__restrict__ bias,
                                     T *__restrict__ q, T *__restrict__ k, T *__restrict__ v,
                                     int L, int heads, int dh, float qscale, unsigned total) {
  const unsigned idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= total) return;
  const unsigned H = heads * dh, H3 = 3 * H;
  const unsigned r = idx / H3, c = idx - r * H3, which = c / H, hc = c - which * H, h = hc / dh,
                 d = hc - h * dh, b = r / L, i = r - b * L;
  float val = rd__ty<T>::to(qkv[idx]) + bias[c];
  const unsigned dst = ((b * heads + h) * L + i) * dh + d;
  if (which == 0) q[dst] = rd__ty<T>::from(val * qscale);
  else if (which == 1) k[dst] = rd__ty<T>::from(val);
  else v[dst] = rd__ty<T>::from(val);
}

template <typename T>
void rd__cuda_qkv_split(const T *qkv, const float *bias, T *q, T *k, T *v, int B, int L, int heads,
                        int dh, float qscale, cudaStream_t s) {
  const unsigned total = (unsigned)B * L * 3 * heads * dh;
  if (total)
    rd__qkv_split_kernel<T><<<rd__blocks(total, 256), 256, 0, s>>>(qkv, bias, q, k, v, L, heads, dh,
                                                                  qscale, total);
}

template <typename T>
__global__ void rd__merge_heads_kernel(const T *__restrict__ ctx, T *__restrict__ out, int L,
                                       int heads, int dh, unsigned total) {
  const unsigned idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= total) return;
  const unsigned H = heads * dh, r = idx / H, b = r / L, i = r - b * L, c = idx - r * H, h = c / dh,
                 d = c - h * dh;
  out[idx] = ctx[((b * heads + h) * L + i) * dh + d];
}

template <typename T>
void rd__cuda_merge_heads(const T *ctx, T *out, int B, int L, int heads, int dh, cudaStream_t s) {
  const unsigned total = (unsigned)B * L * heads * dh;
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
