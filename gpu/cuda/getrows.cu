// getrows.cu - embedding gather + LayerNorm: the first op of the encoder.
// One block per token row; never reads outside the tables (ids were checked
// on the host).
#include "ops.cuh"

template <typename T>
__global__ void rd__embed_ln_kernel(const int32_t *__restrict__ ids, int L,
                                    const float *__restrict__ word, const float *__restrict__ pos,
                                    const float *__restrict__ type, const float *__restrict__ g,
                                    const float *__restrict__ b, float eps, int H,
                                    float *__restrict__ x32, T *__restrict__ xh) {
  const int r = blockIdx.x, i = r % L;
  const float *w = word + (size_t)ids[r] * H, *p = pos + (size_t)i * H;
  float v[RD__ROW_MAX_PER_THREAD];
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < RD__ROW_MAX_PER_THREAD; k++) {
    int c = threadIdx.x + k * RD__ROW_BLOCK;
    v[k] = c < H ? w[c] + p[c] + type[c] : 0.0f;
    sum += v[k];
  }
  const float mean = rd__block_sum(sum) / (float)H;
  float var = 0.0f;
#pragma unroll
  for (int k = 0; k < RD__ROW_MAX_PER_THREAD; k++) {
    int c = threadIdx.x + k * RD__ROW_BLOCK;
    float d = c < H ? v[k] - mean : 0.0f;
    var += d * d;
  }
  const float rstd = rsqrtf(rd__block_sum(var) / (float)H + eps);
#pragma unroll
  for (int k = 0; k < RD__ROW_MAX_PER_THREAD; k++) {
    int c = threadIdx.x + k * RD__ROW_BLOCK;
    if (c < H) {
      float y = (v[k] - mean) * rstd * g[c] + b[c];
      x32[(size_t)r * H + c] = y;
      xh[(size_t)r * H + c] = rd__ty<T>::from(y);
    }
  }
}

template <typename T>
void rd__cuda_embed_ln(const int32_t *ids, int rows, int L, const float *word, const float *pos,
                       const float *type, const float *g, const float *b, float eps, int H,
                       float *x32, T *xh, cudaStream_t s) {
  rd__embed_ln_kernel<T><<<rows, RD__ROW_BLOCK, 0, s>>>(ids, L, word, pos, type, g, b, eps, H, x32, xh);
}

template void rd__cuda_embed_ln<__half>(const int32_t *, int, int, const float *, const float *,
                                        const float *, const float *, const float *, float, int,
                                        float *, __half *, cudaStream_t);
template void rd__cuda_embed_ln<__nv_bfloat16>(const int32_t *, int, int, const float *,
                                               const float *, const float *, const float *,
                                               const float *, float, int, float *,
                                               __nv_bfloat16 *, cudaStream_t);

template <typename T>
__global__ void rd__convert_kernel(const float *__restrict__ src, T *__restrict__ dst, size_t n) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = rd__ty<T>::from(src[i]);
}

template <typename T>
void rd__cuda_convert(const float *src, T *dst, size_t n, cudaStream_t s) {
  if (n) rd__convert_kernel<T><<<rd__blocks(n, 256), 256, 0, s>>>(src, dst, n);
}
template void rd__cuda_convert<__half>(const float *, __half *, size_t, cudaStream_t);
template void rd__cuda_convert<__nv_bfloat16>(const float *, __nv_bfloat16 *, size_t, cudaStream_t);

// T -> fp32 (the residual stream in T, widened for pooling or a stage's rows)
template <typename T>
__global__ void rd__widen_kernel(const T *__restrict__ src, float *__restrict__ dst, size_t n) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = rd__ty<T>::to(src[i]);
}

template <typename T>
void rd__cuda_widen(const T *src, float *dst, size_t n, cudaStream_t s) {
  if (n) rd__widen_kernel<T><<<rd__blocks(n, 256), 256, 0, s>>>(src, dst, n);
}
template void rd__cuda_widen<__half>(const __half *, float *, size_t, cudaStream_t);
template void rd__cuda_widen<__nv_bfloat16>(const __nv_bfloat16 *, float *, size_t, cudaStream_t);
