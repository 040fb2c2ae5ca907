// common.cuh - helpers shared by every CUDA file of the engine: the checking
// macros that turn CUDA and cuBLAS failures into RD_EGPU with a message (never
// an abort), element-type traits for fp16/bf16, block reductions and launch
// shapes.  Nothing here may leak into a C header.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cublasLt.h>
#include <cublas_v2.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "raydist/error.h"

// Where a failure message goes: the caller's buffer.
struct rd__gpu_errctx {
  char *buf;
  size_t len;
};

static inline void rd__gpu_report(rd__gpu_errctx *ctx, const char *call, const char *msg,
                                  const char *func, const char *file, int line) {
  if (ctx && ctx->buf && ctx->len)
    snprintf(ctx->buf, ctx->len, "%s failed: %s (in %s at %s:%d)", call, msg, func, file, line);
}

// Generic form (ggml's CUDA_CHECK_GEN): evaluate, compare with success, and on
// failure record the call, the library's message and the place, then return
// RD_EGPU from the enclosing function.
#define RD_CUDA_CHECK_GEN(ctx, call, success, strfn)                                 \
  do {                                                                               \
    auto rd__e = (call);                                                             \
    if (rd__e != (success)) {                                                        \
      rd__gpu_report((ctx), #call, strfn(rd__e), __func__, __FILE__, __LINE__);      \
      return RD_EGPU;                                                                \
    }                                                                                \
  } while (0)
#define RD_CUDA_CHECK(ctx, call) RD_CUDA_CHECK_GEN(ctx, call, cudaSuccess, cudaGetErrorString)
#define RD_CUBLAS_CHECK(ctx, call) \
  RD_CUDA_CHECK_GEN(ctx, call, CUBLAS_STATUS_SUCCESS, cublasGetStatusString)

// Element types for activations and GEMM weights (fp32 accumulation always).
template <typename T> struct rd__ty;
template <> struct rd__ty<__half> {
  static __device__ __forceinline__ float to(__half x) { return __half2float(x); }
  static __device__ __forceinline__ __half from(float x) { return __float2half_rn(x); }
  static constexpr cudaDataType_t cuda = CUDA_R_16F;
};
template <> struct rd__ty<__nv_bfloat16> {
  static __device__ __forceinline__ float to(__nv_bfloat16 x) { return __bfloat162float(x); }
  static __device__ __forceinline__ __nv_bfloat16 from(float x) { return __float2bfloat16_rn(x); }
  static constexpr cudaDataType_t cuda = CUDA_R_16BF;
};

#define RD__WARP 32
#define RD__ROW_BLOCK 128  // threads per block for row-wise kernels (LayerNorm, pooling)
#define RD__ROW_MAX_PER_THREAD 8  // hidden sizes up to 1024

static __device__ __forceinline__ float rd__warp_sum(float v) {
#pragma unroll
  for (int o = RD__WARP / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

static __device__ __forceinline__ float rd__warp_max(float v) {
#pragma unroll
  for (int o = RD__WARP / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over a block of RD__ROW_BLOCK threads; every thread gets the result.
static __device__ __forceinline__ float rd__block_sum(float v) {
  __shared__ float part[RD__ROW_BLOCK / RD__WARP];
  int lane = threadIdx.x % RD__WARP, w = threadIdx.x / RD__WARP;
  v = rd__warp_sum(v);
  __syncthreads();  // part[] may still be read by a previous call
  if (lane == 0) part[w] = v;
  __syncthreads();
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < RD__ROW_BLOCK / RD__WARP; i++) s += part[i];
  return s;
}

static inline unsigned rd__blocks(size_t n, unsigned per_block) {
  return (unsigned)((n + per_block - 1) / per_block);
}
