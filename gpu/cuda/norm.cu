// norm.cu - fused bias + residual add + LayerNorm after each attention and FFN
// block.  The residual stream stays fp32 (x32); the GEMM input copy (xh) is
// rounded once per layer.  One warp per token row (no block barriers), up to
// RD__LN_PER_LANE * 32 = 1024 wide.
#include "norm_t.cuh"
#include "ops.cuh"

#define RD__LN_ROWS 4       // rows (warps) per block
#define RD__LN_PER_LANE 32  // hidden sizes up to 1024

template <typename T>
__global__ void rd__residual_ln_kernel(float *__restrict__ x32, T *__restrict__ xh,
                                       const T *__restrict__ t, const float *__restrict__ bias,
                                       const float *__restrict__ g, const float *__restrict__ b,
                                       float eps, int H, int rows) {
  const int r = blockIdx.x * RD__LN_ROWS + threadIdx.x / RD__WARP, lane = threadIdx.x % RD__WARP;
  if (r >= rows) return;  // warp-uniform
  float *x = x32 + (size_t)r * H;
  const T *tr = t + (size_t)r * H;
  float v[RD__LN_PER_LANE];
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < RD__LN_PER_LANE; k++) {
    const int c = lane + k * RD__WARP;
    v[k] = c < H ? x[c] + rd__ty<T>::to(tr[c]) + bias[c] : 0.0f;
    sum += v[k];
  }
  const float mean = rd__warp_sum(sum) / (float)H;
  float var = 0.0f;
#pragma unroll
  for (int k = 0; k < RD__LN_PER_LANE; k++) {
    const int c = lane + k * RD__WARP;
    const float d = c < H ? v[k] - mean : 0.0f;
    var += d * d;
  }
  const float rstd = rsqrtf(rd__warp_sum(var) / (float)H + eps);
  T *xo = xh + (size_t)r * H;
#pragma unroll
  for (int k = 0; k < RD__LN_PER_LANE; k++) {
    const int c = lane + k * RD__WARP;
    if (c < H) {
      const float y = (v[k] - mean) * rstd * g[c] + b[c];
      x[c] = y;
      xo[c] = rd__ty<T>::from(y);
    }
  }
}

template <typename T>
void rd__cuda_residual_ln(float *x32, T *xh, const T *t, const float *bias, const float *g,
                          const float *b, float eps, int rows, int H, cudaStream_t s) {
  if (rows)
    rd__residual_ln_kernel<T><<<rd__blocks((size_t)rows, RD__LN_ROWS), RD__LN_ROWS * RD__WARP, 0, s>>>(
        x32, xh, t, bias, g, b, eps, H, rows);
}

template void rd__cuda_residual_ln<__half>(float *, __half *, const __half *, const float *,
                                           const float *, const float *, float, int, int,
                                           cudaStream_t);
template void rd__cuda_residual_ln<__nv_bfloat16>(float *, __nv_bfloat16 *, const __nv_bfloat16 *,
                                                  const float *, const float *, const float *,
                                                  float, int, int, cudaStream_t);

// the residual stream in T (norm_t.cuh)
template <typename T>
__global__ void __launch_bounds__(RD_LNT_ROWS * RD__WARP)
    rd__residual_ln_t_kernel(T *__restrict__ xh, const T *__restrict__ t, const float *__restrict__ bias,
                             const float *__restrict__ g, const float *__restrict__ b, float eps, int H,
                             int rows) {
  rd__lnt_body<T>(xh, t, bias, g, b, eps, H, rows);
}

template <typename T>
void rd__cuda_residual_ln_t(T *xh, const T *t, const float *bias, const float *g, const float *b, float eps,
                            int rows, int H, cudaStream_t s) {
  if (rows)
    rd__residual_ln_t_kernel<T><<<rd__blocks((size_t)rows, RD_LNT_ROWS), RD_LNT_ROWS * RD__WARP, 0, s>>>(
        xh, t, bias, g, b, eps, H, rows);
}

template void rd__cuda_residual_ln_t<__half>(__half *, const __half *, const float *, const float *,
                                             const float *, float, int, int, cudaStream_t);
template void rd__cuda_residual_ln_t<__nv_bfloat16>(__nv_bfloat16 *, const __nv_bfloat16 *, const float *,
                                                    const float *, const float *, float, int, int,
                                                    cudaStream_t);
