// softmax.cu - attention softmax with the key padding mask: one warp per score
// row, fp32 in, probabilities out as the GEMM element type.  Masked keys get
// probability 0; a row never divides by zero (every sequence has >= 1 token).
#include "ops.cuh"

#define RD__SM_ROWS_PER_BLOCK 4

template <typename T>
__global__ void rd__softmax_mask_kernel(const float *__restrict__ scores, T *__restrict__ probs,
                                        const int32_t *__restrict__ lens, int heads, int L,
                                        size_t rows) {
  const size_t row = (size_t)blockIdx.x * RD__SM_ROWS_PER_BLOCK + threadIdx.x / RD__WARP;
  const int lane = threadIdx.x % RD__WARP;
  if (row >= rows) return;
  const int len = lens[row / ((size_t)L * heads)];
  const float *src = scores + row * L;
  T *dst = probs + row * L;
  float mx = -INFINITY;
  for (int j = lane; j < len; j += RD__WARP) mx = fmaxf(mx, src[j]);
  mx = rd__warp_max(mx);
  float sum = 0.0f;
  for (int j = lane; j < len; j += RD__WARP) sum += __expf(src[j] - mx);
  sum = rd__warp_sum(sum);
  const float inv = 1.0f / sum;
  for (int j = lane; j < L; j += RD__WARP)
    dst[j] = rd__ty<T>::from(j < len ? __expf(src[j] - mx) * inv : 0.0f);
}

template <typename T>
void rd__cuda_softmax_mask(const float *scores, T *probs, const int32_t *lens, int B, int heads,
                           int L, cudaStream_t s) {
  size_t rows = (size_t)B * heads * L;
  if (rows)
    rd__softmax_mask_kernel<T><<<rd__blocks(rows, RD__SM_ROWS_PER_BLOCK),
                                 RD__SM_ROWS_PER_BLOCK * RD__WARP, 0, s>>>(scores, probs, lens,
                                                                          heads, L, rows);
}

template void rd__cuda_softmax_mask<__half>(const float *, __half *, const int32_t *, int, int, int,
                                            cudaStream_t);
template void rd__cuda_softmax_mask<__nv_bfloat16>(const float *, __nv_bfloat16 *, const int32_t *,
                                                   int, int, int, cudaStream_t);
