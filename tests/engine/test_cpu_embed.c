/* test_cpu_embed.c - CPU path against the reference embeddings of the fixture:
 * max abs difference <= 1e-4 and cosine >= 0.99999 for every sentence, through
 * rd_engine_embed (mixed lengths, bucketed) with 2 threads (RD_ENGINE_TEST_THREADS
 * for another count: the engine_cpu_embed_tiles/_blas cases split the GEMMs
 * otherwise, RD_ENGINE_CPU_SPLIT); the engine's own tokenizer must give the
 * fixture's ids; results must not depend on batching. */
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "raydist/error.h"
#include "testutil.h"

int main(void) {
  const char *dir = rd_test_model_dir();
  rd_fixture fx;
  rd_test_fixture_load(&fx);
  rd_engine_config cfg;
  rd_engine_config_init(&cfg);
  char err[512] = "";
  cfg.model_dir = dir;
  const char *th = getenv("RD_ENGINE_TEST_THREADS");
  cfg.threads = th && *th ? atoi(th) : 2;
  cfg.max_batch = 128;
  cfg.max_tokens_per_pass = 2048; /* several passes per call */
  cfg.errbuf = err;
  cfg.errbuf_len = sizeof err;
  rd_engine *e = NULL;
  int rc = rd_engine_open(&cfg, &e);
  if (rc) { fprintf(stderr, "open: %d %s\n", rc, err); return 1; }
  CHECK(rd_engine_dim(e) == fx.dim);

  /* engine tokenizer == fixture ids */
  int32_t ids[256];
  for (size_t i = 0; i < fx.n; i++) {
    size_t n;
    CHECK(rd_engine_tokenize(e, fx.text[i], fx.text_len[i], ids, 256, &n) == 0);
    CHECK(n == fx.n_ids[i] && memcmp(ids, fx.ids[i], n * sizeof *ids) == 0);
  }

  float *out = malloc(fx.n * fx.dim * sizeof(float));
  for (size_t i = 0; i < fx.n; i += cfg.max_batch) {
    size_t m = fx.n - i < cfg.max_batch ? fx.n - i : cfg.max_batch;
    rc = rd_engine_embed(e, (const char *const *)fx.text + i, fx.text_len + i, m, out + i * fx.dim);
    if (rc) { fprintf(stderr, "embed: %d %s\n", rc, rd_engine_last_error(e)); return 1; }
  }
  double worst_abs = 0, worst_cos = 1;
  size_t bad = 0;
  for (size_t i = 0; i < fx.n; i++) {
    double ma = rd_test_max_abs(out + i * fx.dim, fx.emb + i * fx.dim, fx.dim);
    double cs = rd_test_cosine(out + i * fx.dim, fx.emb + i * fx.dim, fx.dim);
    if (ma > worst_abs) worst_abs = ma;
    if (cs < worst_cos) worst_cos = cs;
    if (ma > 1e-4 || cs < 0.99999) {
      bad++;
      fprintf(stderr, "sentence %zu (%zu tokens): max abs %.3g cosine %.8f\n", i, fx.n_ids[i], ma, cs);
    }
  }
  printf("cpu embed: %zu sentences, worst max-abs %.3g, worst cosine %.9f, %zu out of tolerance\n",
         fx.n, worst_abs, worst_cos, bad);

  /* one at a time gives the same result as in a bucketed batch */
  float one[1024];
  for (size_t i = 0; i < fx.n; i += 37) {
    CHECK(rd_engine_embed(e, (const char *const *)&fx.text[i], &fx.text_len[i], 1, one) == 0);
    CHECK(rd_test_max_abs(one, out + i * fx.dim, fx.dim) < 1e-5);
  }
  /* pre-tokenized input gives the same result */
  const int32_t *pid[4];
  size_t pn[4];
  for (int k = 0; k < 4; k++) { pid[k] = fx.ids[k * 50]; pn[k] = fx.n_ids[k * 50]; }
  float four[4 * 1024];
  CHECK(rd_engine_embed_ids(e, pid, pn, 4, four) == 0);
  for (int k = 0; k < 4; k++) CHECK(rd_test_max_abs(four + k * fx.dim, out + k * 50 * fx.dim, fx.dim) < 1e-5);

  rd_engine_stats st;
  CHECK(rd_engine_stats_get(e, &st) == 0);
  CHECK(st.sentences >= fx.n && st.tokens > 0 && st.seconds > 0);
  printf("stats: %llu sentences, %llu tokens, %llu passes, %.3f s, %.1f sentences/s, %.0f tokens/s, "
         "host bytes %zu\n", (unsigned long long)st.sentences, (unsigned long long)st.tokens,
         (unsigned long long)st.passes, st.seconds, st.sentences / st.seconds, st.tokens / st.seconds,
         st.host_bytes);
  rd_engine_close(e);
  free(out);
  rd_test_fixture_free(&fx);
  return bad ? 1 : 0;
}
