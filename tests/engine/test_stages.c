/* test_stages.c - the stage API of engine.h on the CPU: the encoder split
 * anywhere (embedding + layers [0, a) | layers [a, b) | layers [b, 6) + pool)
 * gives bit for bit what rd_engine_embed_ids gives, on fixture sentences of
 * mixed lengths spread over several passes; the hidden state has the
 * documented layout; malformed states and bad arguments are refused with
 * RD_EINVAL and a message, never a crash. */
#include <stddef.h>
#include <string.h>

#include "engine.h"
#include "raydist/error.h"
#include "testutil.h"

#define NB 96 /* sentences per batch: about 3 passes of 2048 tokens */

static void expect_einval(rd_engine *e, int rc, const char *what) {
  printf("%-40s -> %d: %s\n", what, rc, rd_engine_last_error(e));
  CHECK(rc == RD_EINVAL && rd_engine_last_error(e)[0]);
}

int main(void) {
  const char *dir = rd_test_model_dir();
  rd_fixture fx;
  rd_test_fixture_load(&fx);
  rd_engine_config cfg;
  rd_engine_config_init(&cfg);
  char err[512] = "";
  cfg.model_dir = dir;
  cfg.threads = 2;
  cfg.max_batch = NB;
  cfg.max_tokens_per_pass = 2048;
  cfg.errbuf = err;
  cfg.errbuf_len = sizeof err;
  rd_engine *e = NULL;
  int rc = rd_engine_open(&cfg, &e);
  if (rc) { fprintf(stderr, "open: %d %s\n", rc, err); return 1; }
  const int layers = rd_engine_num_layers(e);
  CHECK(layers == 6 && rd_engine_dim(e) == fx.dim);
  size_t n = fx.n < NB ? fx.n : NB;
  const int32_t *const *ids = (const int32_t *const *)fx.ids;

  /* the reference: the unsplit encoder */
  float *want = malloc(n * fx.dim * sizeof(float)), *got = malloc(n * fx.dim * sizeof(float));
  CHECK(want && got);
  CHECK(rd_engine_embed_ids(e, ids, fx.n_ids, n, want) == 0);

  /* splits: embedding only first, pooling only last, and interior ones */
  static const int split[][2] = {{0, 0}, {0, 6}, {6, 6}, {1, 4}, {3, 3}, {2, 5}, {5, 6}};
  for (size_t k = 0; k < sizeof split / sizeof split[0]; k++) {
    memset(got, 0xff, n * fx.dim * sizeof(float));
    rc = rd_test_staged_embed(e, ids, fx.n_ids, n, split[k][0], split[k][1], got);
    if (rc) { fprintf(stderr, "staged %d/%d: %d %s\n", split[k][0], split[k][1], rc, rd_engine_last_error(e)); return 1; }
    double d = rd_test_max_abs(got, want, n * fx.dim);
    int same = memcmp(got, want, n * fx.dim * sizeof(float)) == 0;
    printf("split at layers %d and %d: max abs diff %.3g, bitwise %s\n", split[k][0], split[k][1], d,
           same ? "equal" : "DIFFERENT");
    CHECK(same);
  }
  /* the rest of the fixture (longer texts, the 256-token ones) at one split */
  for (size_t i = n; i < fx.n; i += NB) {
    size_t m = fx.n - i < NB ? fx.n - i : NB;
    CHECK(rd_engine_embed_ids(e, ids + i, fx.n_ids + i, m, want) == 0);
    CHECK(rd_test_staged_embed(e, ids + i, fx.n_ids + i, m, 3, 3, got) == 0);
    CHECK(memcmp(got, want, m * fx.dim * sizeof(float)) == 0);
  }
  printf("all %zu fixture sentences: staged == direct\n", fx.n);

  /* the layout: header, lens, zero padding rows, embedding-layer rows */
  size_t seq = 0;
  for (size_t i = 0; i < 4; i++) seq = fx.n_ids[i] > seq ? fx.n_ids[i] : seq;
  size_t size = rd_engine_hidden_size(e, 4, seq);
  CHECK(size == 64 + 4 * seq * fx.dim * sizeof(float));
  uint8_t *hs = malloc(size), *h2 = malloc(size + 64);
  CHECK(hs && h2);
  CHECK(rd_engine_stage_embed(e, ids, fx.n_ids, 4, 0, hs, size) == 0);
  rd_engine_hidden_hdr h;
  CHECK(rd_engine_hidden_check(e, hs, size, &h) == 0);
  CHECK(!memcmp(h.magic, "RDHS", 4) && h.version == 1 && h.n == 4 && h.seq == seq && h.dim == fx.dim &&
        h.layers_done == 0 && h.layers_total == 6 && h.data_offset == 64);
  for (size_t i = 0; i < 4; i++) {
    uint32_t l;
    memcpy(&l, hs + 32 + 4 * i, 4);
    CHECK(l == fx.n_ids[i]);
    const float *x = (const float *)(hs + 64) + i * seq * fx.dim;
    for (size_t r = l; r < seq; r++)
      for (size_t c = 0; c < fx.dim; c++) CHECK(x[r * fx.dim + c] == 0.0f);
    double ss = 0;   /* real rows hold the embedding layer's output */
    for (size_t c = 0; c < fx.dim; c++) ss += (double)x[c] * x[c];
    CHECK(ss > 1.0);
  }
  /* in place: out == in */
  memcpy(h2, hs, size);
  CHECK(rd_engine_stage_layers(e, h2, size, 6, h2, size) == 0);
  float four[4 * 384], four_ref[4 * 384];
  CHECK(rd_engine_stage_pool(e, h2, size, four) == 0);
  CHECK(rd_engine_embed_ids(e, ids, fx.n_ids, 4, four_ref) == 0);
  CHECK(memcmp(four, four_ref, sizeof four) == 0);
  rd_engine_stats st;
  CHECK(rd_engine_stats_get(e, &st) == 0 && st.passes > 0);

  /* bad input */
  expect_einval(e, rd_engine_stage_embed(e, ids, fx.n_ids, 4, 7, hs, size), "stage_embed last layer 7");
  expect_einval(e, rd_engine_stage_embed(e, ids, fx.n_ids, 4, -1, hs, size), "stage_embed last layer -1");
  expect_einval(e, rd_engine_stage_embed(e, ids, fx.n_ids, 4, 2, hs, size - 1), "stage_embed cap too small");
  expect_einval(e, rd_engine_stage_embed(e, ids, fx.n_ids, NB + 1, 2, hs, size), "stage_embed n > max_batch");
  int32_t bad_id[3] = {101, 1 << 30, 102};
  const int32_t *bad_ids[1] = {bad_id};
  size_t bad_n[1] = {3};
  expect_einval(e, rd_engine_stage_embed(e, bad_ids, bad_n, 1, 2, hs, size), "stage_embed id out of range");
  CHECK(rd_engine_stage_embed(e, ids, fx.n_ids, 4, 3, hs, size) == 0);
  expect_einval(e, rd_engine_stage_layers(e, hs, size, 2, h2, size), "stage_layers going backwards");
  expect_einval(e, rd_engine_stage_layers(e, hs, size, 7, h2, size), "stage_layers past the last layer");
  expect_einval(e, rd_engine_stage_layers(e, hs, size, 5, h2, size - 4), "stage_layers cap too small");
  expect_einval(e, rd_engine_stage_layers(e, hs, size - 4, 5, h2, size), "stage_layers truncated state");
  expect_einval(e, rd_engine_stage_pool(e, hs, 16, four), "stage_pool 16-byte state");
  expect_einval(e, rd_engine_stage_pool(e, NULL, size, four), "stage_pool NULL state");
  expect_einval(e, rd_engine_stage_pool(e, h2 + 2, size, four), "stage_pool misaligned state");
  struct { size_t off; uint32_t val; const char *what; } corrupt[] = {
      {0, 0x53484452u + 1, "bad magic"},
      {offsetof(rd_engine_hidden_hdr, version), 2, "version 2"},
      {offsetof(rd_engine_hidden_hdr, n), 5, "n larger than the data"},
      {offsetof(rd_engine_hidden_hdr, n), 0xffffffffu, "n = 2^32-1"},
      {offsetof(rd_engine_hidden_hdr, seq), 0, "seq 0"},
      {offsetof(rd_engine_hidden_hdr, seq), 100000, "seq over max_seq_len"},
      {offsetof(rd_engine_hidden_hdr, dim), 768, "dim 768"},
      {offsetof(rd_engine_hidden_hdr, layers_done), 7, "7 of 6 layers done"},
      {offsetof(rd_engine_hidden_hdr, layers_total), 12, "a 12-layer model's state"},
      {offsetof(rd_engine_hidden_hdr, data_offset), 32, "data offset 32"},
      {32, 0, "a sequence of 0 rows"},
      {36, (uint32_t)seq + 1, "a sequence longer than seq"},
  };
  for (size_t k = 0; k < sizeof corrupt / sizeof corrupt[0]; k++) {
    memcpy(h2, hs, size);
    memcpy(h2 + corrupt[k].off, &corrupt[k].val, 4);
    expect_einval(e, rd_engine_stage_pool(e, h2, size, four), corrupt[k].what);
    expect_einval(e, rd_engine_stage_layers(e, h2, size, 6, hs, size), corrupt[k].what);
  }
  /* the engine still works after all that */
  CHECK(rd_engine_stage_pool(e, hs, size, four) == 0);
  CHECK(memcmp(four, four_ref, sizeof four) == 0);
  rd_engine_close(e);
  free(hs);
  free(h2);
  free(want);
  free(got);
  rd_test_fixture_free(&fx);
  return 0;
}
