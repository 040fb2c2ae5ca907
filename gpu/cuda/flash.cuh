// flash.cuh - register-resident ("flash") multi-head attention for the fused
// QKV projection rows: one block per (sequence, head, 16 x warps query rows);
// K and V of the (sequence, head) go to shared memory once, everything else
// stays in registers.  Each warp owns 16 query rows and walks the keys 64 at
// a time: S = Q K^T with mma.sync m16n8k16 (fp32 accumulation) into
// registers, an online softmax (running max and sum per row, reduced over
// the 4 lanes that share a row with two shuffles), then O += P V with P
// taken straight from the S accumulators (the C fragment of two 8-key tiles
// is the A fragment of one 16-key step).  Nothing goes back to shared
// memory, and there is one block barrier (after the loads).
//
// The kernel body is plain C++ over a few names (portable.cuh), so that a
// test can run it on the CPU (tests/engine/test_flash_emu.cc) under an
// emulation of a warp (tests/engine/gpu_emu.h): threadIdx/blockIdx/blockDim,
// __syncthreads, __shfl_xor_sync and rd__fa_mma<T>, the one tensor-core
// instruction.  Built with nvcc they are CUDA's own and the PTX mma.
//
// Numerics are those of the other two attention paths: Q (with bias, times
// 1/sqrt(dh)), K, V (with bias) and P are rounded to T once, products
// accumulate in fp32, the softmax is fp32 (in base 2: scores times log2 e).
// Keys j >= lens[b] are masked; query rows up to the padded length L are
// computed (as the other paths do) and rows past it are not written.
#pragma once

#include "portable.cuh"

#define RD_FA_KEYS 64       // keys per step of a warp's loop (8 mma n-tiles)
#define RD_FA_MAX_KEYS 512  // longest sequence (the model's positions); smem grows with it
#define RD_FA_MAX_WARPS 8

// Shapes, shared by the launcher and the emulation test.  Shared memory: K as
// rows [Lk][dh + 8] and V transposed, [dh][Lk + 8], both T; Lk is the padded
// length rounded up to the key step.  The 8-element pads put the 8 rows a
// fragment load touches in 8 different bank groups.
struct rd__fa_layout {
  int Lk, ldk, ldv;
  RD_PHD rd__fa_layout(int L, int dh)
      : Lk((L + RD_FA_KEYS - 1) / RD_FA_KEYS * RD_FA_KEYS), ldk(dh + 8), ldv(Lk + 8) {}
  RD_PHD size_t elems(int dh) const { return (size_t)Lk * ldk + (size_t)dh * ldv; }
};
// warps per block for padded length L: one per 16 query rows, at most 8
static RD_PHD int rd__fa_warps(int L) {
  const int w = (L + 15) / 16;
  return w < RD_FA_MAX_WARPS ? (w < 1 ? 1 : w) : RD_FA_MAX_WARPS;
}

#ifndef RD_GPU_EMU
// D = A B + C for one 16 x 8 x 16 tile: A row-major (4 registers of 2 T),
// B column-major (2 registers), C and D fp32 (4 registers): lane l holds
// rows l/4 and l/4 + 8, columns 2(l%4) and 2(l%4) + 1 of C.
template <typename T>
RD_PFN void rd__fa_mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <>
RD_PFN void rd__fa_mma<__half>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
RD_PFN void rd__fa_mma<__nv_bfloat16>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#endif

// max and sum over the 4 lanes of a quad (the lanes that hold one row)
RD_PFN float rd__fa_quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
RD_PFN float rd__fa_quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// The kernel body.  qkv: rows [B * L][3H] (sequence b's token i at row b L +
// i; H = heads * DH), bias [3H] fp32, lens [B], out rows [B * L][H]; grid
// (ceil(L / (16 w)), heads, B) with w = rd__fa_warps(L) warps per block and
// rd__fa_layout(L, DH).elems(DH) T of shared memory at sm.
template <typename T, int DH>
RD_PFN void rd__fa_body(const T *__restrict__ qkv, const float *__restrict__ bias,
                          const int32_t *__restrict__ lens, T *__restrict__ out, int L, int heads,
                          float qscale, T *sm) {
  static_assert(DH % 16 == 0, "head size must be a multiple of 16");
  using ty = rd__pty<T>;
  constexpr int DV = DH / 8;  // 16-byte pieces of a head row
  const rd__fa_layout ly(L, DH);
  T *Ks = sm, *Vt = sm + (size_t)ly.Lk * ly.ldk;
  const int nthr = (int)blockDim.x, h = (int)blockIdx.y, b = (int)blockIdx.z;
  const int H = heads * DH, H3 = 3 * H, len = lens[b];
  const T *seq = qkv + (size_t)b * L * H3 + (size_t)h * DH;
  const float *bq = bias + h * DH, *bk = bq + H, *bv = bq + 2 * H;

  // K rows and V columns with their bias, zero for keys j >= len (a masked
  // key's P is 0, and 0 times a finite V stays 0)
  for (int e = (int)threadIdx.x; e < ly.Lk * DV; e += nthr) {
    const int j = e / DV, d = (e - j * DV) * 8;
    alignas(16) T kv[8], vv[8];
    if (j < len) {
      rd__pld<8>(seq + (size_t)j * H3 + H + d, kv);
      rd__pld<8>(seq + (size_t)j * H3 + 2 * H + d, vv);
#pragma unroll
      for (int q = 0; q < 8; q++) {
        kv[q] = ty::from(ty::to(kv[q]) + bk[d + q]);
        vv[q] = ty::from(ty::to(vv[q]) + bv[d + q]);
      }
    } else {
#pragma unroll
      for (int q = 0; q < 8; q++) kv[q] = vv[q] = ty::from(0.0f);
    }
    rd__pst<8>(Ks + (size_t)j * ly.ldk + d, kv);
#pragma unroll
    for (int q = 0; q < 8; q++) Vt[(size_t)(d + q) * ly.ldv + j] = vv[q];
  }
  __syncthreads();

  const int w = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const int q0 = (int)blockIdx.x * (nthr / 32) * 16 + w * 16;
  if (q0 >= L) return;  // warp-uniform, and no barrier follows

  // Q as A fragments: register r holds row g + 8 (r & 1), columns
  // 2t + 8 (r >> 1) and the next, of each 16-wide step ks
  uint32_t qa[DH / 16][4];
#pragma unroll
  for (int ks = 0; ks < DH / 16; ks++)
#pragma unroll
    for (int r = 0; r < 4; r++) {
      const int row = q0 + g + (r & 1) * 8, col = ks * 16 + 2 * t + (r >> 1) * 8;
      float x0 = 0.0f, x1 = 0.0f;
      if (row < L) {
        const T *p = seq + (size_t)row * H3 + col;
        x0 = (ty::to(p[0]) + bq[col]) * qscale;
        x1 = (ty::to(p[1]) + bq[col + 1]) * qscale;
      }
      qa[ks][r] = rd__ppack<T>(x0, x1);
    }

  const float log2e = 1.4426950408889634f;
  float o[DV][4];
#pragma unroll
  for (int n = 0; n < DV; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;  // rows g and g + 8

  for (int k0 = 0; k0 < len; k0 += RD_FA_KEYS) {
    // S (16 x 64) = Q K^T: B[k][n] = K[key n][k], two consecutive k per
    // register.  8-key tiles wholly past the sequence are skipped (the mask
    // below makes them -inf): the test is the same for the whole block.
    float s[RD_FA_KEYS / 8][4];
#pragma unroll
    for (int nt = 0; nt < RD_FA_KEYS / 8; nt++) {
      s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
      if (k0 + nt * 8 >= len) continue;
      const T *kr = Ks + (size_t)(k0 + nt * 8 + g) * ly.ldk + 2 * t;
#pragma unroll
      for (int ks = 0; ks < DH / 16; ks++)
        rd__fa_mma<T>(s[nt], qa[ks], rd__pld32(kr + ks * 16), rd__pld32(kr + ks * 16 + 8));
    }
    // mask, base-2 scores, the rows' new maxima
    float tm0 = -INFINITY, tm1 = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < RD_FA_KEYS / 8; nt++)
#pragma unroll
      for (int c = 0; c < 2; c++) {
        const bool in = k0 + nt * 8 + 2 * t + c < len;
        s[nt][c] = in ? s[nt][c] * log2e : -INFINITY;
        s[nt][2 + c] = in ? s[nt][2 + c] * log2e : -INFINITY;
        tm0 = fmaxf(tm0, s[nt][c]);
        tm1 = fmaxf(tm1, s[nt][2 + c]);
      }
    // every step has a key < len, so the maxima are finite from the first on
    const float mn0 = fmaxf(m0, rd__fa_quad_max(tm0)), mn1 = fmaxf(m1, rd__fa_quad_max(tm1));
    const float al0 = exp2f(m0 - mn0), al1 = exp2f(m1 - mn1);  // 0 on the first step
    m0 = mn0;
    m1 = mn1;
    float ps0 = 0.0f, ps1 = 0.0f;
#pragma unroll
    for (int nt = 0; nt < RD_FA_KEYS / 8; nt++)
#pragma unroll
      for (int c = 0; c < 2; c++) {
        s[nt][c] = exp2f(s[nt][c] - mn0);
        s[nt][2 + c] = exp2f(s[nt][2 + c] - mn1);
        ps0 += s[nt][c];
        ps1 += s[nt][2 + c];
      }
    l0 = l0 * al0 + ps0;  // this lane's share of the row sums
    l1 = l1 * al1 + ps1;
#pragma unroll
    for (int n = 0; n < DV; n++) {
      o[n][0] *= al0;
      o[n][1] *= al0;
      o[n][2] *= al1;
      o[n][3] *= al1;
    }
    // O += P V, 16 keys a step: P's A fragment is the S accumulators of
    // n-tiles 2kk and 2kk + 1; B[k][n] = V[key k][n] = Vt[n][key k]
#pragma unroll
    for (int kk = 0; kk < RD_FA_KEYS / 16; kk++) {
      if (k0 + kk * 16 >= len) break;  // P is 0 from here on
      const uint32_t pa[4] = {rd__ppack<T>(s[2 * kk][0], s[2 * kk][1]),
                              rd__ppack<T>(s[2 * kk][2], s[2 * kk][3]),
                              rd__ppack<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              rd__ppack<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int n = 0; n < DV; n++) {
        const T *vr = Vt + (size_t)(n * 8 + g) * ly.ldv + k0 + kk * 16 + 2 * t;
        rd__fa_mma<T>(o[n], pa, rd__pld32(vr), rd__pld32(vr + 8));
      }
    }
  }

  l0 = rd__fa_quad_sum(l0);
  l1 = rd__fa_quad_sum(l1);
  const float i0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, i1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;  // len 0: zeros
  T *dst = out + (size_t)b * L * H + (size_t)h * DH + 2 * t;
  const int r0 = q0 + g, r1 = r0 + 8;
#pragma unroll
  for (int n = 0; n < DV; n++) {
    if (r0 < L) rd__pst32(dst + (size_t)r0 * H + n * 8, rd__ppack<T>(o[n][0] * i0, o[n][1] * i0));
    if (r1 < L) rd__pst32(dst + (size_t)r1 * H + n * 8, rd__ppack<T>(o[n][2] * i1, o[n][3] * i1));
  }
}
