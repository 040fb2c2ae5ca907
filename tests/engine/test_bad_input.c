/* test_bad_input.c - bad input gets a defined result or a clear error, never a
 * crash: empty texts, whitespace-only, a very long text (10 MB), invalid UTF-8,
 * embedded NULs, a batch larger than max_batch, NULL arguments, bad ids, a
 * missing model directory, a device request on a machine or build without one. */
#include <math.h>
#include <string.h>

#include "engine.h"
#include "raydist/error.h"
#include "testutil.h"

static void expect_unit(const float *v, size_t n) {
  double ss = 0;
  for (size_t i = 0; i < n; i++) {
    CHECK(isfinite(v[i]));
    ss += (double)v[i] * v[i];
  }
  CHECK(fabs(ss - 1.0) < 1e-4);
}

int main(void) {
  const char *dir = rd_test_model_dir();
  char err[512] = "";
  rd_engine_config cfg;
  rd_engine *e = NULL;

  /* missing model directory */
  rd_engine_config_init(&cfg);
  cfg.model_dir = "/nonexistent/model/dir";
  cfg.errbuf = err;
  cfg.errbuf_len = sizeof err;
  int rc = rd_engine_open(&cfg, &e);
  printf("missing model dir -> %d: %s\n", rc, err);
  CHECK(rc == RD_ENOENT && e == NULL && strstr(err, "fetch_model.sh"));
  CHECK(rd_engine_open(NULL, &e) == RD_EINVAL);
  CHECK(rd_engine_open(&cfg, NULL) == RD_EINVAL);

  /* bad config */
  rd_engine_config_init(&cfg);
  cfg.model_dir = dir;
  cfg.errbuf = err;
  cfg.errbuf_len = sizeof err;
  cfg.max_seq_len = 1000;
  rc = rd_engine_open(&cfg, &e);
  printf("max_seq_len 1000 -> %d: %s\n", rc, err);
  CHECK(rc == RD_EINVAL && e == NULL);
  cfg.max_seq_len = 1;
  CHECK(rd_engine_open(&cfg, &e) == RD_EINVAL);
  cfg.max_seq_len = 0;
  cfg.device = -7;
  CHECK(rd_engine_open(&cfg, &e) == RD_EINVAL);
  cfg.device = -1; /* unknown GPU options are refused even for a CPU engine */
  cfg.attention = (rd_engine_attention)(RD_ENGINE_ATTN_FLASH + 1);
  rc = rd_engine_open(&cfg, &e);
  printf("attention %d -> %d: %s\n", (int)cfg.attention, rc, err);
  CHECK(rc == RD_EINVAL && e == NULL && strstr(err, "attention"));
  cfg.attention = RD_ENGINE_ATTN_AUTO;
  cfg.precision = (rd_engine_precision)2;
  CHECK(rd_engine_open(&cfg, &e) == RD_EINVAL && e == NULL);
  cfg.precision = RD_ENGINE_FP16;
  cfg.attention = RD_ENGINE_ATTN_FLASH; /* known: the CPU path has one attention */
  CHECK(rd_engine_open(&cfg, &e) == 0);
  rd_engine_close(e);
  e = NULL;
  cfg.attention = RD_ENGINE_ATTN_AUTO;

  /* a device engine where there is no device (or no CUDA in the build) */
  cfg.device = 0;
  rc = rd_engine_open(&cfg, &e);
  printf("device 0 (%d devices) -> %d: %s\n", rd_engine_device_count(), rc, err);
  if (rd_engine_device_count() == 0) CHECK((rc == RD_EGPU || rc == RD_ENOTSUP) && e == NULL && *err);
  else { CHECK(rc == 0); rd_engine_close(e); e = NULL; }
  cfg.device = 1000;
  rc = rd_engine_open(&cfg, &e);
  printf("device 1000 -> %d: %s\n", rc, err);
  CHECK((rc == RD_EGPU || rc == RD_ENOTSUP) && e == NULL);

  /* a CPU engine with small limits */
  rd_engine_config_init(&cfg);
  cfg.model_dir = dir;
  cfg.threads = 2;
  cfg.max_batch = 8;
  cfg.max_seq_len = 128;
  cfg.errbuf = err;
  cfg.errbuf_len = sizeof err;
  rc = rd_engine_open(&cfg, &e);
  if (rc) { fprintf(stderr, "open: %s\n", err); return 1; }
  const size_t D = rd_engine_dim(e);
  float out[9 * 384];

  /* empty, whitespace-only and control-only texts embed [CLS][SEP] */
  const char *empties[3] = {"", "   \t\n", "\x01\x02"};
  CHECK(rd_engine_embed(e, empties, NULL, 3, out) == 0);
  for (int k = 0; k < 3; k++) expect_unit(out + k * D, D);
  /* the same [CLS][SEP] at three places of one pass: equal up to the
   * summation order BLAS kernels use at different row positions (bit-equal
   * with Intel's kernels, ~2e-7 apart with AMD Zen 4's) */
  double d1 = rd_test_max_abs(out, out + D, D), d2 = rd_test_max_abs(out, out + 2 * D, D);
  printf("empty texts: max abs differences %.3g %.3g\n", d1, d2);
  CHECK(d1 < 1e-6 && d2 < 1e-6);
  int32_t ids[128];
  size_t n;
  CHECK(rd_engine_tokenize(e, "", 0, ids, 128, &n) == 0 && n == 2 && ids[0] == 101 && ids[1] == 102);
  CHECK(rd_engine_tokenize(e, NULL, 0, ids, 128, &n) == 0 && n == 2);

  /* a 10 MB text: truncated to max_seq_len tokens, fast */
  size_t big = 10u << 20;
  char *longtext = malloc(big);
  for (size_t i = 0; i < big; i++) longtext[i] = "lorem ipsum dolor "[i % 18];
  const char *lt[1] = {longtext};
  size_t ll[1] = {big};
  CHECK(rd_engine_embed(e, lt, ll, 1, out) == 0);
  expect_unit(out, D);
  CHECK(rd_engine_tokenize(e, longtext, big, ids, 128, &n) == 0 && n == 128 && ids[127] == 102);
  /* a too-small id buffer is an error, not an overflow */
  rc = rd_engine_tokenize(e, longtext, big, ids, 16, &n);
  printf("tokenize into 16 slots -> %d: %s\n", rc, rd_engine_last_error(e));
  CHECK(rc == RD_EINVAL);
  CHECK(rd_engine_tokenize(e, "hi", 2, ids, 1, &n) == RD_EINVAL);
  /* one giant word: [UNK] */
  memset(longtext, 'x', 5000);
  CHECK(rd_engine_tokenize(e, longtext, 5000, ids, 128, &n) == 0 && n == 3 && ids[1] == 100);
  free(longtext);

  /* invalid UTF-8: defined (replacement chars are dropped), same as the text
   * without the bad bytes */
  const char *inv[2] = {"caf\xc3 ok \xff\xfe\xed\xa0\x80 end\xe2\x82", "caf ok  end"};
  CHECK(rd_engine_embed(e, inv, NULL, 2, out) == 0);
  expect_unit(out, D);
  CHECK(rd_test_max_abs(out, out + D, D) < 1e-6);
  /* embedded NUL with an explicit length is a removed control char */
  const char nul[] = "ab\0cd";
  const char *nt[1] = {nul};
  size_t nl[1] = {5};
  CHECK(rd_engine_embed(e, nt, nl, 1, out) == 0);
  expect_unit(out, D);

  /* batch larger than max_batch */
  const char *many[9];
  for (int k = 0; k < 9; k++) many[k] = "a sentence";
  rc = rd_engine_embed(e, many, NULL, 9, out);
  printf("batch 9 > max 8 -> %d: %s\n", rc, rd_engine_last_error(e));
  CHECK(rc == RD_EINVAL && strstr(rd_engine_last_error(e), "max_batch"));
  CHECK(rd_engine_embed(e, many, NULL, 8, out) == 0);
  CHECK(rd_engine_embed(e, many, NULL, 0, out) == 0);
  /* NULL arguments */
  CHECK(rd_engine_embed(e, NULL, NULL, 1, out) == RD_EINVAL);
  CHECK(rd_engine_embed(e, many, NULL, 1, NULL) == RD_EINVAL);
  const char *withnull[2] = {"x", NULL};
  CHECK(rd_engine_embed(e, withnull, NULL, 2, out) == RD_EINVAL);
  CHECK(rd_engine_embed(NULL, many, NULL, 1, out) == RD_EINVAL);
  /* bad pre-tokenized input */
  int32_t badids[3] = {101, 999999, 102};
  const int32_t *bi[1] = {badids};
  size_t bn[1] = {3};
  CHECK(rd_engine_embed_ids(e, bi, bn, 1, out) == RD_EINVAL);
  bn[0] = 500;
  CHECK(rd_engine_embed_ids(e, bi, bn, 1, out) == RD_EINVAL);
  rd_engine_stats st;
  CHECK(rd_engine_stats_get(e, &st) == 0 && st.sentences > 0);
  rd_engine_close(e);
  rd_engine_close(NULL);
  printf("bad input: all checks passed\n");
  return 0;
}
