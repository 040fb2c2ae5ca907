// test_flash_emu.cc - the flash attention kernel's body (gpu/cuda/flash.cuh)
// run on the CPU under the emulation of gpu_emu.h, against a
// double-precision reference.  A wrong fragment index, mask, online-softmax
// step or store in the kernel shows up as a wrong number, without a GPU;
// shared memory starts as NaN and the output as a sentinel, so a read of
// something never written, or a row or column never stored, fails the test.
//
// What it cannot show: speed, bank conflicts, register spills, and anything
// about the real instruction (its existence on the device, PTX syntax); the
// GPU test (engine_gpu_embed) covers those where a device exists.
#include "gpu_emu.h"

#include "../../gpu/cuda/flash.cuh"

// Runs the kernel body on a grid like the launcher's (rd__cuda_flash).
template <typename T, int DH>
static void emu_launch(const T *qkv, const float *bias, const int32_t *lens, T *out, int B, int L,
                       int heads, float qscale) {
  const int nw = rd__fa_warps(L), rows = 16 * nw;
  emu_grid((unsigned)((L + rows - 1) / rows), (unsigned)heads, (unsigned)B, 32 * nw,
           rd__fa_layout(L, DH).elems(DH) * sizeof(T), [&](unsigned char *sm) {
             rd__fa_body<T, DH>(qkv, bias, lens, out, L, heads, qscale, (T *)sm);
           });
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
  using ty = rd__pty<T>;
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
