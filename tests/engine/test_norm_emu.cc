// test_norm_emu.cc - the T-residual LayerNorm's body (gpu/cuda/norm_t.cuh,
// RD_GPU_T_RESIDUAL) run on the CPU under the emulation of gpu_emu.h against
// a double-precision reference: xh = T(LayerNorm(xh + t + bias)) per row.
// Hidden sizes that fill every lane, leave lanes idle and end inside a
// lane's chunks; row counts that leave the last block's warps idle.  A
// sentinel row after the last must stay untouched.
#include "gpu_emu.h"

#include "../../gpu/cuda/norm_t.cuh"

static unsigned rng_state = 777;
static float urand() {  // [-1, 1)
  rng_state = rng_state * 1103515245u + 12345u;
  return (float)((rng_state >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static int failures;

template <typename T>
static void run_case(const char *tname, int H, int rows, double tol) {
  using ty = rd__pty<T>;
  const float eps = 1e-12f;
  std::vector<T> xh((size_t)(rows + 1) * H), t((size_t)rows * H), x0;
  std::vector<float> bias(H), g(H), b(H);
  for (auto &v : xh) v = ty::from(3.0f * urand());
  for (auto &v : t) v = ty::from(2.0f * urand() + 0.5f);
  for (int c = 0; c < H; c++) {
    bias[c] = 0.2f * urand();
    g[c] = 1.0f + 0.3f * urand();
    b[c] = 0.1f * urand();
  }
  const T sentinel = ty::from(-4321.0f);
  for (int c = 0; c < H; c++) xh[(size_t)rows * H + c] = sentinel;
  x0 = xh;

  emu_grid((unsigned)((rows + RD_LNT_ROWS - 1) / RD_LNT_ROWS), 1, 1, RD_LNT_ROWS * 32, 0,
           [&](unsigned char *) { rd__lnt_body<T>(xh.data(), t.data(), bias.data(), g.data(), b.data(), eps, H, rows); });

  double worst = 0.0;
  int bad = 0;
  std::vector<double> v(H);
  for (int r = 0; r < rows; r++) {
    double mean = 0.0, var = 0.0;
    for (int c = 0; c < H; c++) {
      v[c] = (double)ty::to(x0[(size_t)r * H + c]) + (double)ty::to(t[(size_t)r * H + c]) + bias[c];
      mean += v[c];
    }
    mean /= H;
    for (int c = 0; c < H; c++) var += (v[c] - mean) * (v[c] - mean);
    const double rstd = 1.0 / sqrt(var / H + eps);
    for (int c = 0; c < H; c++) {
      const double want = (v[c] - mean) * rstd * g[c] + b[c], got = ty::to(xh[(size_t)r * H + c]);
      const double d = fabs(got - want);
      if (!(d <= tol) && bad++ < 5)
        fprintf(stderr, "  %s H %d: row %d col %d: got %g, want %g\n", tname, H, r, c, got, want);
      worst = d > worst || d != d ? d : worst;
    }
  }
  for (int c = 0; c < H; c++)
    if (memcmp(&xh[(size_t)rows * H + c], &sentinel, sizeof sentinel) && bad++ < 5)
      fprintf(stderr, "  %s H %d: the row after the last was written (col %d)\n", tname, H, c);
  printf("%-4s H %4d rows %2d: worst |diff| %.3g (tol %.3g)%s\n", tname, H, rows, worst, tol, bad ? "  FAIL" : "");
  if (bad) failures++;
}

template <typename T>
static void run_all(const char *tname, double tol) {
  run_case<T>(tname, 384, 9, tol);   // MiniLM: 3 chunks per lane; a partial last block
  run_case<T>(tname, 100, 4, tol);   // 25 chunks: lanes 25-31 idle
  run_case<T>(tname, 1024, 3, tol);  // the widest: 8 chunks per lane
  run_case<T>(tname, 4, 1, tol);     // one chunk, one lane
}

int main() {
  run_all<__half>("fp16", 4e-3);
  run_all<__nv_bfloat16>("bf16", 3e-2);
  if (failures) {
    fprintf(stderr, "FAIL: %d case(s) differ from the reference\n", failures);
    return 1;
  }
  printf("OK: T-residual LayerNorm body matches the reference in every case\n");
  return 0;
}
