// norm_t.cuh - bias + residual add + LayerNorm with the residual stream kept
// in T (RD_GPU_T_RESIDUAL=1), the body shared by norm.cu and its CPU
// emulation test (tests/engine/test_norm_emu.cc): xh = T(LayerNorm(xh + t +
// bias)), as PyTorch's bf16/fp16 models do.  6 bytes move per element (xh
// and t in, xh out) instead of the fp32 stream's 12 (t, x32 in; x32, xh
// out).  One warp per row; each lane takes 4 consecutive elements at a time
// (8-byte loads and stores), H a multiple of 4 up to RD_LNT_CHUNKS * 128.
#pragma once

#include "portable.cuh"

#define RD_LNT_ROWS 4     // rows (warps) per block
#define RD_LNT_CHUNKS 8   // 4-element chunks per lane: hidden sizes up to 1024

template <typename T>
RD_PFN void rd__lnt_body(T *__restrict__ xh, const T *__restrict__ t, const float *__restrict__ bias,
                         const float *__restrict__ g, const float *__restrict__ b, float eps, int H,
                         int rows) {
  using ty = rd__pty<T>;
  const int r = (int)blockIdx.x * RD_LNT_ROWS + (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
  if (r >= rows) return;  // warp-uniform
  T *x = xh + (size_t)r * H;
  const T *tr = t + (size_t)r * H;
  float v[RD_LNT_CHUNKS][4];
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < RD_LNT_CHUNKS; k++) {
    const int c = (lane + k * 32) * 4;
    if (c < H) {
      alignas(8) T xa[4], ta[4];
      rd__pld<4>(x + c, xa);
      rd__pld<4>(tr + c, ta);
#pragma unroll
      for (int q = 0; q < 4; q++) {
        v[k][q] = ty::to(xa[q]) + ty::to(ta[q]) + bias[c + q];
        sum += v[k][q];
      }
    } else {
      v[k][0] = v[k][1] = v[k][2] = v[k][3] = 0.0f;
    }
  }
  const float mean = rd__pwarp_sum(sum) / (float)H;
  float var = 0.0f;
#pragma unroll
  for (int k = 0; k < RD_LNT_CHUNKS; k++) {
    if ((lane + k * 32) * 4 >= H) continue;
#pragma unroll
    for (int q = 0; q < 4; q++) var += (v[k][q] - mean) * (v[k][q] - mean);
  }
  const float rstd = 1.0f / sqrtf(rd__pwarp_sum(var) / (float)H + eps);
#pragma unroll
  for (int k = 0; k < RD_LNT_CHUNKS; k++) {
    const int c = (lane + k * 32) * 4;
    if (c < H) {
      alignas(8) T y[4];
#pragma unroll
      for (int q = 0; q < 4; q++) y[q] = ty::from((v[k][q] - mean) * rstd * g[c + q] + b[c + q]);
      rd__pst<4>(x + c, y);
    }
  }
}
