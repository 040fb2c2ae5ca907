// unary.cu - fused bias + GELU (exact erf form, as the reference) on the FFN
// intermediate, in place: 8 elements (16 bytes) per thread, 32-bit indexing
// (the engine bounds a pass's activations below 2^31 elements at open).
#include "ops.cuh"

static __device__ __forceinline__ float rd__gelu(float v) {
  return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
}

template <typename T>
__global__ void rd__bias_gelu8_kernel(T *__restrict__ y, const float *__restrict__ bias,
                                      unsigned total8, unsigned n8) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= total8) return;
  const float *bp = bias + (i % n8) * 8;
  const float4 b0 = *reinterpret_cast<const float4 *>(bp), b1 = *reinterpret_cast<const float4 *>(bp + 4);
  const float bb[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
  uint4 *p = reinterpret_cast<uint4 *>(y) + i;
  __align__(16) T t[8];
  *reinterpret_cast<uint4 *>(t) = *p;
#pragma unroll
  for (int q = 0; q < 8; q++) t[q] = rd__ty<T>::from(rd__gelu(rd__ty<T>::to(t[q]) + bb[q]));
  *p = *reinterpret_cast<uint4 *>(t);
}

// any n: one element per thread
template <typename T>
__global__ void rd__bias_gelu_kernel(T *__restrict__ y, const float *__restrict__ bias, unsigned total,
                                     unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= total) return;
  y[i] = rd__ty<T>::from(rd__gelu(rd__ty<T>::to(y[i]) + bias[i % n]));
}

template <typename T>
void rd__cuda_bias_gelu(T *y, const float *bias, int rows, int n, cudaStream_t s) {
  const unsigned total = (unsigned)rows * (unsigned)n;
  if (!total) return;
  if (n % 8 == 0)  // rows of n T are 16-byte aligned (the pool aligns y to 256)
    rd__bias_gelu8_kernel<T><<<rd__blocks(total / 8, 256), 256, 0, s>>>(y, bias, total / 8, n / 8);
  else
    rd__bias_gelu_kernel<T><<<rd__blocks(total, 256), 256, 0, s>>>(y, bias, total, n);
}

template void rd__cuda_bias_gelu<__half>(__half *, const float *, int, int, cudaStream_t);
template void rd__cuda_bias_gelu<__nv_bfloat16>(__nv_bfloat16 *, const float *, int, int, cudaStream_t);
