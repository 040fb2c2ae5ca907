// unary.cu - fused bias + GELU (exact erf form, as the reference) on the FFN
// intermediate, in place, one element per thread.
#include "ops.cuh"

template <typename T>
__global__ void rd__bias_gelu_kernel(T *__restrict__ y, const float *__restrict__ bias, size_t total,
                                     int n) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= total) return;
  float v = rd__ty<T>::to(y[i]) + bias[i % n];
  y[i] = rd__ty<T>::from(0.5f * v * (1.0f + erff(v * 0.70710678118654752f)));
}

template <typename T>
void rd__cuda_bias_gelu(T *y, const float *bias, int rows, int n, cudaStream_t s) {
  size_t total = (size_t)rows * n;
  if (total) rd__bias_gelu_kernel<T><<<rd__blocks(total, 256), 256, 0, s>>>(y, bias, total, n);
}

template void rd__cuda_bias_gelu<__half>(__half *, const float *, int, int, cudaStream_t);
template void rd__cuda_bias_gelu<__nv_bfloat16>(__nv_bfloat16 *, const float *, int, int, cudaStream_t);
