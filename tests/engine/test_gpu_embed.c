/* test_gpu_embed.c - GPU path against the reference embeddings of the fixture
 * (cosine >= 0.999 per sentence), in fp16 and bf16, with each attention
 * path: the fused kernel, the flash kernel and the GEMM path (which must
 * agree closely, up to 512 tokens);
 * two engines on the same device at once (fractional GPU) must agree; the
 * stage API (encoder split at layers 2 and 4) must match the unsplit pass
 * (the state between stages is the fp32 residual stream, so it is expected
 * bit for bit; asserted to 1e-6).  Exits
 * 77 (skipped) when there is no CUDA device or the build has no CUDA path. */
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "raydist/error.h"
#include "testutil.h"

static int try_open_gpu(const char *dir, rd_engine_precision prec, rd_engine_attention attn,
                        size_t max_seq, rd_engine **out, char *err, size_t errlen) {
  rd_engine_config cfg;
  rd_engine_config_init(&cfg);
  cfg.model_dir = dir;
  cfg.device = 0;
  cfg.max_batch = 128;
  cfg.max_seq_len = max_seq;
  cfg.max_tokens_per_pass = 4096;
  cfg.precision = prec;
  cfg.attention = attn;
  cfg.errbuf = err;
  cfg.errbuf_len = errlen;
  *out = NULL;
  return rd_engine_open(&cfg, out);
}

static rd_engine *open_gpu(const char *dir, rd_engine_precision prec, size_t mem_limit) {
  rd_engine_config cfg;
  rd_engine_config_init(&cfg);
  char err[512] = "";
  cfg.model_dir = dir;
  cfg.device = 0;
  cfg.max_batch = 128;
  cfg.max_tokens_per_pass = 4096;
  cfg.precision = prec;
  cfg.gpu_mem_limit = mem_limit;
  cfg.errbuf = err;
  cfg.errbuf_len = sizeof err;
  rd_engine *e = NULL;
  int rc = rd_engine_open(&cfg, &e);
  if (rc) { fprintf(stderr, "GPU open: %d %s\n", rc, err); exit(1); }
  return e;
}

static double check(rd_engine *e, const rd_fixture *fx, float *out, const char *what) {
  for (size_t i = 0; i < fx->n; i += 128) {
    size_t m = fx->n - i < 128 ? fx->n - i : 128;
    int rc = rd_engine_embed(e, (const char *const *)fx->text + i, fx->text_len + i, m, out + i * fx->dim);
    if (rc) { fprintf(stderr, "%s embed: %d %s\n", what, rc, rd_engine_last_error(e)); exit(1); }
  }
  double worst = 1;
  size_t bad = 0;
  for (size_t i = 0; i < fx->n; i++) {
    double c = rd_test_cosine(out + i * fx->dim, fx->emb + i * fx->dim, fx->dim);
    if (c < worst) worst = c;
    if (c < 0.999) {
      bad++;
      fprintf(stderr, "%s: sentence %zu cosine %.6f\n", what, i, c);
    }
  }
  printf("%s: worst cosine %.6f, %zu below 0.999\n", what, worst, bad);
  CHECK(bad == 0);
  return worst;
}

int main(void) {
  if (rd_engine_device_count() <= 0) {
    printf("no CUDA device (or no CUDA path in this build): skipped\n");
    return 77;
  }
  const char *dir = rd_test_model_dir();
  rd_fixture fx;
  rd_test_fixture_load(&fx);
  float *out = malloc(fx.n * fx.dim * sizeof(float)), *out2 = malloc(fx.n * fx.dim * sizeof(float));

  rd_engine *a = open_gpu(dir, RD_ENGINE_FP16, 0);
  rd_engine *b = open_gpu(dir, RD_ENGINE_BF16, 0); /* two engines share device 0 */
  check(a, &fx, out, "gpu fp16");
  check(b, &fx, out2, "gpu bf16");
  rd_engine_stats st;
  CHECK(rd_engine_stats_get(a, &st) == 0);
  printf("default attention on this device: %s\n", st.fused_attention ? "fused" : "gemm");
  CHECK(st.attention == (st.fused_attention ? RD_ENGINE_ATTN_FUSED : RD_ENGINE_ATTN_GEMM));
  /* the two one-kernel paths (fused: WMMA through shared memory; flash:
   * registers, mma.sync) and the GEMM path, each against the fixture and the
   * one-kernel paths against GEMM */
  static const rd_engine_attention kern[2] = {RD_ENGINE_ATTN_FUSED, RD_ENGINE_ATTN_FLASH};
  static const char *const kname[2] = {"fused", "flash"};
  {
    float *fu = malloc(fx.n * fx.dim * sizeof(float)), *ge = malloc(fx.n * fx.dim * sizeof(float));
    char err[512] = "";
    for (int prec = 0; prec < 2; prec++) {
      const char *pn = prec ? "bf16" : "fp16";
      rd_engine *m = NULL;
      int rc = try_open_gpu(dir, (rd_engine_precision)prec, RD_ENGINE_ATTN_GEMM, 256, &m, err, sizeof err);
      if (rc) { fprintf(stderr, "gemm open: %d %s\n", rc, err); return 1; }
      CHECK(rd_engine_stats_get(m, &st) == 0 && st.fused_attention == 0 &&
            st.attention == RD_ENGINE_ATTN_GEMM);
      char what[64];
      snprintf(what, sizeof what, "gpu %s gemm attention", pn);
      check(m, &fx, ge, what);
      for (int k = 0; k < 2; k++) {
        rd_engine *f = NULL;
        rc = try_open_gpu(dir, (rd_engine_precision)prec, kern[k], 256, &f, err, sizeof err);
        if (rc == RD_ENOTSUP) {
          printf("%s attention does not fit this device at 256 tokens: %s\n", kname[k], err);
          CHECK(f == NULL && err[0]);
          continue;
        }
        if (rc) { fprintf(stderr, "%s open: %d %s\n", kname[k], rc, err); return 1; }
        CHECK(rd_engine_stats_get(f, &st) == 0 && st.fused_attention == 1 && st.attention == (int)kern[k]);
        snprintf(what, sizeof what, "gpu %s %s attention", pn, kname[k]);
        check(f, &fx, fu, what);
        double d = rd_test_max_abs(fu, ge, fx.n * fx.dim);
        printf("gpu %s %s vs gemm attention: max abs diff %.3g\n", pn, kname[k], d);
        CHECK(d < (prec ? 2e-2 : 5e-3));
        rd_engine_close(f);
      }
      rd_engine_close(m);
    }
    /* the model's longest sequences (512 tokens): each one-kernel path where
     * the device's shared memory holds its tiles (else refused, not crashed),
     * against the GEMM path on texts of 40 to 512+ tokens (several query
     * tiles and key steps, partial last ones) */
    enum { NLONG = 16 };
    char *longt[NLONG];
    for (int t = 0; t < NLONG; t++) { /* t + 1 .. 3 * t + 3 fixture sentences */
      size_t cap = 1, k0 = (size_t)t * 7 % fx.n;
      for (int k = 0; k < 3 * t + 3; k++) cap += fx.text_len[(k0 + k) % fx.n] + 1;
      longt[t] = calloc(cap, 1);
      for (int k = 0; k < 3 * t + 3; k++) {
        strncat(longt[t], fx.text[(k0 + k) % fx.n], fx.text_len[(k0 + k) % fx.n]);
        strcat(longt[t], " ");
      }
    }
    rd_engine *bigm = NULL;
    CHECK(try_open_gpu(dir, RD_ENGINE_FP16, RD_ENGINE_ATTN_GEMM, 512, &bigm, err, sizeof err) == 0);
    CHECK(rd_engine_embed(bigm, (const char *const *)longt, NULL, NLONG, ge) == 0);
    for (int k = 0; k < 2; k++) {
      rd_engine *big = NULL;
      int rc = try_open_gpu(dir, RD_ENGINE_FP16, kern[k], 512, &big, err, sizeof err);
      printf("%s attention at 512 tokens -> %d: %s\n", kname[k], rc, rc ? err : "fits");
      CHECK(rc == 0 || (rc == RD_ENOTSUP && big == NULL && err[0]));
      if (!big) continue;
      CHECK(rd_engine_embed(big, (const char *const *)longt, NULL, NLONG, fu) == 0);
      double worst = 1;
      for (int t = 0; t < NLONG; t++) {
        double c = rd_test_cosine(fu + t * fx.dim, ge + t * fx.dim, fx.dim);
        worst = c < worst ? c : worst;
      }
      printf("long texts, %s vs gemm attention at 512 tokens: worst cosine %.7f\n", kname[k], worst);
      CHECK(worst >= 0.9999);
      rd_engine_close(big);
    }
    for (int t = 0; t < NLONG; t++) free(longt[t]);
    rd_engine_close(bigm);
    free(fu);
    free(ge);
  }
  /* the opt-in experiments, alone and together, in fp16 and bf16: bias +
   * GELU in cublasLt's epilogue of the FFN-in GEMM (tanh GELU;
   * RD_GPU_GELU_EPILOGUE), the residual stream in T (RD_GPU_T_RESIDUAL), both
   * with flash attention; each against the fixture (or a clean RD_ENOTSUP),
   * and a split pass still equal to the unsplit one */
  {
    static const struct { const char *name; int gelu, tres; rd_engine_attention attn; } xp[] = {
        {"GELU epilogue", 1, 0, RD_ENGINE_ATTN_AUTO},
        {"T residual", 0, 1, RD_ENGINE_ATTN_AUTO},
        {"flash + GELU epilogue + T residual", 1, 1, RD_ENGINE_ATTN_FLASH}};
    float *ep = malloc(fx.n * fx.dim * sizeof(float)), *sp = malloc(fx.n * fx.dim * sizeof(float));
    char err[512] = "", what[96];
    for (size_t x = 0; x < sizeof xp / sizeof xp[0]; x++)
      for (int prec = 0; prec < 2; prec++) {
        if (xp[x].gelu) setenv("RD_GPU_GELU_EPILOGUE", "1", 1);
        if (xp[x].tres) setenv("RD_GPU_T_RESIDUAL", "1", 1);
        rd_engine *f = NULL;
        int rc = try_open_gpu(dir, (rd_engine_precision)prec, xp[x].attn, 256, &f, err, sizeof err);
        unsetenv("RD_GPU_GELU_EPILOGUE");
        unsetenv("RD_GPU_T_RESIDUAL");
        snprintf(what, sizeof what, "gpu %s %s", prec ? "bf16" : "fp16", xp[x].name);
        printf("%s -> %d: %s\n", what, rc, rc ? err : "opened");
        CHECK(rc == 0 || (rc == RD_ENOTSUP && f == NULL && err[0]));
        if (!f) continue;
        check(f, &fx, ep, what);
        for (size_t i = 0; i < fx.n; i += 128) {
          size_t m = fx.n - i < 128 ? fx.n - i : 128;
          CHECK(rd_test_staged_embed(f, (const int32_t *const *)fx.ids + i, fx.n_ids + i, m, 2, 4,
                                     sp + i * fx.dim) == 0);
        }
        double d = rd_test_max_abs(ep, sp, fx.n * fx.dim);
        printf("%s staged (2, 4) vs unsplit: max abs diff %.3g\n", what, d);
        CHECK(d <= 1e-6);
        rd_engine_close(f);
      }
    free(ep);
    free(sp);
  }
  /* again on the first engine after the second ran: same results */
  float *again = malloc(fx.n * fx.dim * sizeof(float));
  check(a, &fx, again, "gpu fp16 again");
  CHECK(rd_test_max_abs(out, again, fx.n * fx.dim) < 1e-6);
  /* split into stages on the GPU: the same as the unsplit pass */
  for (size_t i = 0; i < fx.n; i += 128) {
    size_t m = fx.n - i < 128 ? fx.n - i : 128;
    int rc = rd_test_staged_embed(a, (const int32_t *const *)fx.ids + i, fx.n_ids + i, m, 2, 4, again + i * fx.dim);
    if (rc) { fprintf(stderr, "staged: %d %s\n", rc, rd_engine_last_error(a)); return 1; }
  }
  double sd = rd_test_max_abs(out, again, fx.n * fx.dim);
  printf("gpu fp16 staged (2, 4) vs unsplit: max abs diff %.3g, bitwise %s\n", sd,
         memcmp(out, again, fx.n * fx.dim * sizeof(float)) ? "different" : "equal");
  CHECK(sd <= 1e-6);
  CHECK(rd_engine_stats_get(a, &st) == 0 && st.device_bytes > 0);
  printf("fp16 engine: device bytes %zu, host bytes %zu, padded/real tokens %.3f\n", st.device_bytes,
         st.host_bytes, (double)st.padded_tokens / (double)st.tokens);
  /* a memory limit below the engine's needs is refused cleanly */
  rd_engine_config cfg;
  rd_engine_config_init(&cfg);
  char err[512] = "";
  cfg.model_dir = dir;
  cfg.device = 0;
  cfg.gpu_mem_limit = 1 << 20;
  cfg.errbuf = err;
  cfg.errbuf_len = sizeof err;
  rd_engine *c = NULL;
  int rc = rd_engine_open(&cfg, &c);
  printf("1 MiB memory limit -> %d: %s\n", rc, err);
  CHECK(rc == RD_ENOMEM && c == NULL);
  /* so is one a raydist worker's GPU share sets (the smaller limit wins) */
  cfg.gpu_mem_limit = 0;
  setenv("RAYDIST_GPU_MEMORY_BYTES", "1048576", 1);
  rc = rd_engine_open(&cfg, &c);
  printf("GPU share of 1 MiB -> %d: %s\n", rc, err);
  CHECK(rc == RD_ENOMEM && c == NULL && strstr(err, "GPU share") != NULL);
  setenv("RAYDIST_GPU_MEMORY_BYTES", "1099511627776", 1);   /* 1 TiB: no bound on this engine */
  rc = rd_engine_open(&cfg, &c);
  CHECK(rc == 0 && c != NULL);
  rd_engine_close(c);
  unsetenv("RAYDIST_GPU_MEMORY_BYTES");
  /* a batch over max_batch is refused */
  const char *many[129];
  for (int k = 0; k < 129; k++) many[k] = "x";
  CHECK(rd_engine_embed(a, many, NULL, 129, out) == RD_EINVAL);
  rd_engine_close(a);
  rd_engine_close(b);
  free(out);
  free(out2);
  free(again);
  rd_test_fixture_free(&fx);
  return 0;
}
