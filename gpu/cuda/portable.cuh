// portable.cuh - what a kernel body needs to build both with nvcc and as
// plain C++ for the CPU emulation tests (tests/engine/gpu_emu.h, which
// defines RD_GPU_EMU and the CUDA names a body uses: threadIdx, blockIdx,
// blockDim, __syncthreads, __shfl_xor_sync).  Function qualifiers, fp16/bf16
// conversions and loads and stores of 4, 8 or 16 bytes: one instruction on
// the device (callers keep them aligned), memcpy on the host (no aliasing
// questions for the compiler).
#pragma once

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#ifdef RD_GPU_EMU
#define RD_PFN inline
#define RD_PHD inline
#else
#define RD_PFN __device__ __forceinline__
#define RD_PHD __host__ __device__ __forceinline__
#endif

template <typename T> struct rd__pty;
template <> struct rd__pty<__half> {
  static RD_PFN float to(__half x) { return __half2float(x); }
  static RD_PFN __half from(float x) { return __float2half_rn(x); }
};
template <> struct rd__pty<__nv_bfloat16> {
  static RD_PFN float to(__nv_bfloat16 x) { return __bfloat162float(x); }
  static RD_PFN __nv_bfloat16 from(float x) { return __float2bfloat16_rn(x); }
};

#ifndef RD_GPU_EMU
template <int B> struct rd__pvec;
template <> struct rd__pvec<4> { typedef uint32_t type; };
template <> struct rd__pvec<8> { typedef uint2 type; };
template <> struct rd__pvec<16> { typedef uint4 type; };
#endif

// N consecutive T at p into v (v declared alignas(N * sizeof(T))), and back
template <int N, typename T>
RD_PFN void rd__pld(const T *p, T (&v)[N]) {
#ifdef RD_GPU_EMU
  memcpy((void *)v, (const void *)p, sizeof v);
#else
  typedef typename rd__pvec<N * sizeof(T)>::type V;
  *reinterpret_cast<V *>(v) = *reinterpret_cast<const V *>(p);
#endif
}
template <int N, typename T>
RD_PFN void rd__pst(T *p, const T (&v)[N]) {
#ifdef RD_GPU_EMU
  memcpy((void *)p, (const void *)v, sizeof v);
#else
  typedef typename rd__pvec<N * sizeof(T)>::type V;
  *reinterpret_cast<V *>(p) = *reinterpret_cast<const V *>(v);
#endif
}

// two T as one 32-bit word (the first in the low half) and back
template <typename T>
RD_PFN uint32_t rd__pld32(const T *p) {
#ifdef RD_GPU_EMU
  uint32_t u;
  memcpy(&u, (const void *)p, 4);
  return u;
#else
  return *reinterpret_cast<const uint32_t *>(p);
#endif
}
template <typename T>
RD_PFN void rd__pst32(T *p, uint32_t u) {
#ifdef RD_GPU_EMU
  memcpy((void *)p, &u, 4);
#else
  *reinterpret_cast<uint32_t *>(p) = u;
#endif
}
// two floats rounded to T, packed as above
template <typename T>
RD_PFN uint32_t rd__ppack(float lo, float hi) {
  alignas(4) T v[2] = {rd__pty<T>::from(lo), rd__pty<T>::from(hi)};
  return rd__pld32(v);
}

// sum over the 32 lanes of a warp, every lane gets it
RD_PFN float rd__pwarp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
