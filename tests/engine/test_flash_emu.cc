// test_flash_emu.cc - the flash attention kernel's body (gpu/cuda/flash.cuh)
// run on the CPU under an emulation of the GPU's execution model, against a
// double-precision reference.  Every GPU thread of a block is a host thread;
// __syncthreads is a barrier over the block, __shfl_xor_sync and the
// tensor-core mma are barriers over the 32 lanes of a warp with the
// exchange in between.  The mma is emulated from PTX's definition of the
// m16n8k16 fragments (which lane holds which rows and columns of A, B and
// C), independently of how the kernel uses them, so a wrong fragment index,
// mask, online-softmax step or store in the kernel shows up here as a wrong
// number, without a GPU.  Shared memory starts filled with NaN bit patterns,
// the output with a sentinel: a read of something never written, or a row
// or column never stored, fails the test.
//
// What it cannot show: speed, bank conflicts, register spills, and anything
// about the real instruction (its existence on the device, PTX syntax); the
// GPU test (engine_gpu_embed) covers those where a device exists.
#define RD_FA_EMU 1

#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

// ---- the emulated execution model ----

struct emu_dim3 {
  unsigned x = 0, y = 0, z = 0;
};
static thread_local emu_dim3 threadIdx, blockIdx;
static emu_dim3 blockDim;  // set before a block's threads start

struct emu_warp {
  std::barrier<> bar{32};
  float f[32];
  uint32_t a[32][4], b[32][2];
};
struct emu_block {
  std::barrier<> bar;
  std::vector<std::unique_ptr<emu_warp>> warps;
  explicit emu_block(int nthreads) : bar(nthreads) {
    for (int w = 0; w < (nthreads + 31) / 32; w++) warps.emplace_back(new emu_warp);
  }
};
static thread_local emu_block *emu_cur;

static void __syncthreads() { emu_cur->bar.arrive_and_wait(); }

static float __shfl_xor_sync(unsigned mask, float v, int o) {
  (void)mask;
  emu_warp &w = *emu_cur->warps[threadIdx.x / 32];
  const int lane = (int)threadIdx.x % 32;
  w.f[lane] = v;
  w.bar.arrive_and_wait();
  const float r = w.f[lane ^ o];
  w.bar.arrive_and_wait();  // nobody overwrites f before every lane has read
  return r;
}

static float emu_to(__half x) { return __half2float(x); }
static float emu_to(__nv_bfloat16 x) { return __bfloat162float(x); }
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
  emu_warp &w = *emu_cur->warps[threadIdx.x / 32];
  const int lane = (int)threadIdx.x % 32;
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

#include "../../gpu/cuda/flash.cuh"

// Runs the kernel body on a grid like the launcher's (rd__cuda_flash).
template <typename T, int DH>
static void emu_launch(const T *qkv, const float *bias, const int32_t *lens, T *out, int B, int L,
                       int heads, float qscale) {
  const int nw = rd__fa_warps(L), rows = 16 * nw, nthr = 32 * nw;
  const size_t smem = rd__fa_layout(L, DH).elems(DH) * sizeof(T);
  blockDim = emu_dim3{(unsigned)nthr, 1, 1};
  for (int z = 0; z < B; z++)
    for (int y = 0; y < heads; y++)
      for (int x = 0; x < (L + rows - 1) / rows; x++) {
        emu_block blk(nthr);
        std::vector<unsigned char> sm(smem, 0xff);  // NaN in both fp16 and bf16
        std::vector<std::thread> th;
        for (int i = 0; i < nthr; i++)
          th.emplace_back([&, i] {
            emu_cur = &blk;
            threadIdx = emu_dim3{(unsigned)i, 0, 0};
            blockIdx = emu_dim3{(unsigned)x, (unsigned)y, (unsigned)z};
            rd__fa_body<T, DH>(qkv, bias, lens, out, L, heads, qscale, (T *)sm.data());
          });
        for (auto &t : th) t.join();
      }
}

static unsigned rng_state = 12345;
static float urand() {  // [-1, 1)
  rng_state = rng_state * 1103515245u + 12345u;
  return (float)((rng_state >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static int failures;

// One case: B sequences padded to L with lengths lens, heads of DH.
template <typename T, int DH>
static void run_case(const char *tname, int L, int heads, std::vector<int32_t> lens, float tol) {
  using ty = rd__fa_ty<T>;
  const int B = (int)lens.size(), H = heads * DH, H3 = 3 * H;
  const float qscale = 1.0f / sqrtf((float)DH);
  std::vector<T> qkv((size_t)B * L * H3), out((size_t)B * L * H);
  std::vector<float> bias(H3);
  for (auto &v : qkv) v = ty::from(2.0f * urand());
  for (auto &v : bias) v = 0.5f * urand();
  const T sentinel = ty::from(-12345.0f);
  for (auto &v : out) v = sentinel;

  emu_launch<T, DH>(qkv.data(), bias.data(), lens.data(), out.data(), B, L, heads, qscale);

  // reference: the same roundings (Q, K, V to T), then double precision
  double worst = 0.0;
  int bad = 0;
  std::vector<double> s(L);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < heads; h++)
      for (int i = 0; i < L; i++) {
        auto at = [&](int row, int part, int d) {
          return (double)ty::to(qkv[((size_t)b * L + row) * H3 + part * H + h * DH + d]) +
                 bias[part * H + h * DH + d];
        };
        auto rnd = [&](double x) { return (double)ty::to(ty::from((float)x)); };
        double mx = -INFINITY, sum = 0.0;
        for (int j = 0; j < lens[b]; j++) {
          double dot = 0.0;
          for (int d = 0; d < DH; d++) dot += rnd(at(i, 0, d) * qscale) * rnd(at(j, 1, d));
          s[j] = dot;
          mx = s[j] > mx ? s[j] : mx;
        }
        for (int j = 0; j < lens[b]; j++) sum += (s[j] = exp(s[j] - mx));
        double vmax = 0.0;
        for (int d = 0; d < DH; d++) {
          double ref = 0.0;
          for (int j = 0; j < lens[b]; j++) {
            const double v = rnd(at(j, 2, d));
            ref += s[j] / sum * v;
            vmax = fabs(v) > vmax ? fabs(v) : vmax;
          }
          const T got = out[((size_t)b * L + i) * H + h * DH + d];
          const double diff = fabs((double)ty::to(got) - ref);
          if (!(diff <= tol) || memcmp(&got, &sentinel, sizeof got) == 0) {
            if (bad++ < 5)
              fprintf(stderr, "  %s dh %d L %d: seq %d (len %d) head %d row %d col %d: got %g, want %g\n",
                      tname, DH, L, b, lens[b], h, i, d, (double)ty::to(got), ref);
          }
          worst = diff > worst || diff != diff ? diff : worst;
        }
      }
  printf("%-4s dh %3d L %3d lens", tname, DH, L);
  for (int l : lens) printf(" %d", l);
  printf(": worst |diff| %.3g (tol %.3g)%s\n", worst, tol, bad ? "  FAIL" : "");
  if (bad) failures++;
}

template <typename T>
static void run_all(const char *tname, float tol) {
  // short, one step with most keys masked; several steps with a partial last
  // one; more rows than one block (two blocks of 8 warps); len 1 and lengths
  // on and off the step boundary
  run_case<T, 32>(tname, 8, 2, {5, 8, 2}, tol);
  run_case<T, 32>(tname, 40, 2, {40, 17, 1}, tol);
  run_case<T, 32>(tname, 128, 2, {128, 100, 65}, tol);
  run_case<T, 32>(tname, 200, 1, {200, 64, 129}, tol);
  run_case<T, 64>(tname, 72, 2, {72, 33}, tol);
  // the longest sequence the kernel takes: 8 key steps, 4 query blocks
  run_case<T, 32>(tname, RD_FA_MAX_KEYS, 1, {RD_FA_MAX_KEYS, 301}, tol);
}

int main() {
  run_all<__half>("fp16", 4e-3f);
  run_all<__nv_bfloat16>("bf16", 3e-2f);
  if (failures) {
    fprintf(stderr, "FAIL: %d case(s) differ from the reference\n", failures);
    return 1;
  }
  printf("OK: flash attention body matches the reference in every case\n");
  return 0;
}
