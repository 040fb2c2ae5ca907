// gpu_emu.h - CUDA's execution model emulated on the CPU, for tests that run
// a kernel body written against gpu/cuda/portable.cuh.  Every GPU thread of
// a block is a host thread; __syncthreads is a barrier over the block,
// __shfl_xor_sync and the tensor-core mma (rd__fa_mma, m16n8k16 with fp32
// accumulation) are barriers over the 32 lanes of a warp with the exchange
// in between.  The mma follows PTX's definition of the fragments (which lane
// holds which rows and columns of A, B and C), independently of how a kernel
// uses them.  Every lane of a warp must reach each collective together, as
// the full mask promises: a lane that is in another collective, has done a
// different number of them, or has returned makes the test abort with what
// each lane was doing (a thread that returns leaves its warp's and block's
// barriers, as an exited GPU thread counts as arrived, so nothing hangs).  emu_grid runs a grid block after block, each block's shared
// memory starting as NaN bit patterns (0xff bytes) so that reading what was
// never written shows.  Built with -std=c++20 (std::barrier) and -pthread.
#pragma once

#define RD_GPU_EMU 1

#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

struct emu_dim3 {
  unsigned x = 0, y = 0, z = 0;
};
static thread_local emu_dim3 threadIdx, blockIdx;
static emu_dim3 blockDim;  // set before a block's threads start

struct emu_warp {
  std::barrier<> bar{32};
  float f[32];
  uint32_t a[32][4], b[32][2];
  uint64_t tag[32];   // each lane's current collective: sequence, kind, shuffle offset
};
struct emu_block {
  std::barrier<> bar;
  std::vector<std::unique_ptr<emu_warp>> warps;
  explicit emu_block(int nthreads) : bar(nthreads) {
    for (int w = 0; w < (nthreads + 31) / 32; w++) warps.emplace_back(new emu_warp);
  }
};
static thread_local emu_block *emu_cur;
static thread_local uint64_t emu_seq;   // collectives this thread has entered

// Enters a collective (kind 1: shuffle with offset o, 2: mma): publishes this
// lane's tag, waits for the warp, and aborts unless all 32 agree.
static emu_warp &emu_enter(int kind, int o) {
  emu_warp &w = *emu_cur->warps[threadIdx.x / 32];
  const int lane = (int)threadIdx.x % 32;
  const uint64_t tag = (++emu_seq << 16) | ((uint64_t)kind << 8) | (uint64_t)(o & 255);
  w.tag[lane] = tag;
  w.bar.arrive_and_wait();
  for (int l = 0; l < 32; l++)
    if (w.tag[l] != tag) {
      fprintf(stderr, "divergent collective in block (%u,%u,%u) warp %u: lane %d is at #%llu %s(%d), lane %d at #%llu "
              "%s(%d) (or has returned)\n", blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x / 32, lane,
              (unsigned long long)(tag >> 16), kind == 1 ? "shfl_xor" : "mma", o, l,
              (unsigned long long)(w.tag[l] >> 16), ((w.tag[l] >> 8) & 255) == 1 ? "shfl_xor" : "mma",
              (int)(w.tag[l] & 255));
      abort();
    }
  return w;
}

static inline void __syncthreads() { emu_cur->bar.arrive_and_wait(); }

static inline float __shfl_xor_sync(unsigned mask, float v, int o) {
  (void)mask;
  const int lane = (int)threadIdx.x % 32;
  emu_warp &w = emu_enter(1, o);
  w.f[lane] = v;
  w.bar.arrive_and_wait();
  const float r = w.f[lane ^ o];
  w.bar.arrive_and_wait();  // nobody overwrites f before every lane has read
  return r;
}

static inline float emu_to(__half x) { return __half2float(x); }
static inline float emu_to(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T>
static float emu_half_of(uint32_t u, int hi) {
  T v[2];
  memcpy((void *)v, &u, 4);
  return emu_to(v[hi]);
}

// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}: groupID g = lane / 4,
// t = lane % 4.  A: a[0] = (g, 2t..2t+1), a[1] = (g+8, 2t..), a[2] = (g,
// 2t+8..), a[3] = (g+8, 2t+8..).  B: b0 = rows 2t..2t+1 of column g, b1 =
// rows 2t+8..2t+9.  C/D: c0, c1 = (g, 2t..2t+1), c2, c3 = (g+8, 2t..).
template <typename T>
static void rd__fa_mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  const int lane = (int)threadIdx.x % 32;
  emu_warp &w = emu_enter(2, 0);
  memcpy(w.a[lane], a, sizeof a);
  w.b[lane][0] = b0;
  w.b[lane][1] = b1;
  w.bar.arrive_and_wait();
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; l++) {
    const int g = l / 4, t = l % 4;
    for (int hi = 0; hi < 2; hi++) {
      A[g][2 * t + hi] = emu_half_of<T>(w.a[l][0], hi);
      A[g + 8][2 * t + hi] = emu_half_of<T>(w.a[l][1], hi);
      A[g][2 * t + 8 + hi] = emu_half_of<T>(w.a[l][2], hi);
      A[g + 8][2 * t + 8 + hi] = emu_half_of<T>(w.a[l][3], hi);
      B[2 * t + hi][g] = emu_half_of<T>(w.b[l][0], hi);
      B[2 * t + 8 + hi][g] = emu_half_of<T>(w.b[l][1], hi);
    }
  }
  w.bar.arrive_and_wait();  // every lane has read the operands
  const int g = lane / 4, t = lane % 4;
  for (int i = 0; i < 4; i++) {
    const int row = g + (i >> 1) * 8, col = 2 * t + (i & 1);
    float acc = c[i];
    for (int k = 0; k < 16; k++) acc += A[row][k] * B[k][col];
    c[i] = acc;
  }
}

// Runs body(shared memory) for every block of a gx x gy x gz grid of
// nthreads-thread blocks, one block at a time.
static void emu_grid(unsigned gx, unsigned gy, unsigned gz, int nthreads, size_t smem,
                     const std::function<void(unsigned char *)> &body) {
  blockDim = emu_dim3{(unsigned)nthreads, 1, 1};
  for (unsigned z = 0; z < gz; z++)
    for (unsigned y = 0; y < gy; y++)
      for (unsigned x = 0; x < gx; x++) {
        emu_block blk(nthreads);
        std::vector<unsigned char> sm(smem ? smem : 1, 0xff);  // NaN in both fp16 and bf16
        std::vector<std::thread> th;
        for (int i = 0; i < nthreads; i++)
          th.emplace_back([&, i] {
            emu_cur = &blk;
            emu_seq = 0;
            threadIdx = emu_dim3{(unsigned)i, 0, 0};
            blockIdx = emu_dim3{x, y, z};
            body(sm.data());
            blk.warps[i / 32]->bar.arrive_and_drop();   // returned: counts as arrived from now on
            blk.bar.arrive_and_drop();
          });
        for (auto &t : th) t.join();
      }
}
