// norm.cu - fused bias + residual add + LayerNorm after each attention and FFN
// block.  The residual stream stays fp32 (x32); the GEMM input copy (xh) is
// rounded once per layer.  One block per token row.
#include "ops.cuh"

template <typename T>
__global__ void rd__residual_ln_kernel(float *__restrict__ x32, T *__restrict__ xh,
                                       const T *__restrict__ t, const float *__restrict__ bias,
                                       const float *__restrict__ g, const float *__restrict__ b,
                                       float eps, int H) {
  const size_t r = blockIdx.x;
  float v[RD__ROW_MAX_PER_THREAD];
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < RD__ROW_MAX_PER_THREAD; k++) {
    int c = threadIdx.x + k * RD__ROW_BLOCK;
    v[k] = c < H ? x32[r * H + c] + rd__ty<T>::to(t[r * H + c]) + bias[c] : 0.0f;
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
      x32[r * H + c] = y;
      xh[r * H + c] = rd__ty<T>::from(y);
    }
  }
}

template <typename T>
void rd__cuda_residual_ln(float *x32, T *xh, const T *t, const float *bias, const float *g,
                          const float *b, float eps, int rows, int H, cudaStream_t s) {
  rd__residual_ln_kernel<T><<<rows, RD__ROW_BLOCK, 0, s>>>(x32, xh, t, bias, g, b, eps, H);
}

template void rd__cuda_residual_ln<__half>(float *, __half *, const __half *, const float *,
                                           const float *, const float *, float, int, int,
                                           cudaStream_t);
template void rd__cuda_residual_ln<__nv_bfloat16>(float *, __nv_bfloat16 *, const __nv_bfloat16 *,
                                                  const float *, const float *, const float *,
                                                  float, int, int, cudaStream_t);
