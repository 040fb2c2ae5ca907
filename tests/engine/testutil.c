/* testutil.c - fixture reader and helpers for the engine tests (testutil.h). */
#include "testutil.h"

#include <math.h>
#include <string.h>
#include <sys/stat.h>

static int exists(const char *dir, const char *name) {
  char p[4096];
  struct stat sb;
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return stat(p, &sb) == 0;
}

const char *rd_test_model_dir(void) {
  const char *d = getenv("RD_MODEL_DIR");
  if (!d || !*d) d = RD_TEST_MODEL_DIR;
  if (!exists(d, "model.safetensors") || !exists(d, "vocab.txt") || !exists(d, "config.json")) {
    fprintf(stderr,
            "FAIL: model files not found in %s\n"
            "      run scripts/fetch_model.sh (or set RD_MODEL_DIR) before the engine tests\n",
            d);
    exit(1);
  }
  return d;
}

static char *slurp(const char *name, size_t *len) {
  char p[4096];
  snprintf(p, sizeof p, "%s/%s", RD_TEST_FIXTURE_DIR, name);
  FILE *f = fopen(p, "rb");
  if (!f) { fprintf(stderr, "FAIL: cannot open fixture %s\n", p); exit(1); }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  CHECK(b && fread(b, 1, (size_t)n, f) == (size_t)n);
  fclose(f);
  b[n] = 0;
  *len = (size_t)n;
  return b;
}

static int hexv(char c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c - 'A' + 10;
}

void rd_test_fixture_load(rd_fixture *fx) {
  memset(fx, 0, sizeof *fx);
  size_t sl, il, el;
  char *s = slurp("minilm_sentences.txt", &sl), *ids = slurp("minilm_ids.txt", &il);
  char *emb = slurp("minilm_emb.f32", &el);
  CHECK(el >= 16 && memcmp(emb, "RDEMB001", 8) == 0);
  uint32_t n, dim;
  memcpy(&n, emb + 8, 4);
  memcpy(&dim, emb + 12, 4);
  CHECK(el == 16 + (size_t)n * dim * 4);
  fx->n = n;
  fx->dim = dim;
  fx->emb = malloc((size_t)n * dim * sizeof(float));
  memcpy(fx->emb, emb + 16, (size_t)n * dim * sizeof(float));
  free(emb);
  fx->text = calloc(n, sizeof *fx->text);
  fx->text_len = calloc(n, sizeof *fx->text_len);
  fx->ids = calloc(n, sizeof *fx->ids);
  fx->n_ids = calloc(n, sizeof *fx->n_ids);
  char *p = s, *end = s + sl;
  for (size_t i = 0; i < n; i++) {
    CHECK(p < end);
    char *nl = memchr(p, '\n', (size_t)(end - p));
    CHECK(nl);
    char *t = malloc((size_t)(nl - p) + 1);
    size_t k = 0;
    for (char *q = p; q < nl; q++) {
      if (*q == '\\' && q + 3 < nl + 1 && q[1] == 'x') {
        t[k++] = (char)(hexv(q[2]) * 16 + hexv(q[3]));
        q += 3;
      } else {
        t[k++] = *q;
      }
    }
    t[k] = 0;
    fx->text[i] = t;
    fx->text_len[i] = k;
    p = nl + 1;
  }
  char *q = ids;
  for (size_t i = 0; i < n; i++) {
    char *nl = strchr(q, '\n');
    CHECK(nl);
    *nl = 0;
    size_t cnt = 0;
    for (char *r = q; *r; r++) cnt += (*r == ' ');
    fx->ids[i] = malloc((cnt + 1) * sizeof(int32_t));
    char *r = q;
    while (*r) {
      char *e2;
      long v = strtol(r, &e2, 10);
      if (e2 == r) break;
      fx->ids[i][fx->n_ids[i]++] = (int32_t)v;
      r = e2;
    }
    q = nl + 1;
  }
  free(s);
  free(ids);
}

void rd_test_fixture_free(rd_fixture *fx) {
  for (size_t i = 0; i < fx->n; i++) {
    free(fx->text[i]);
    free(fx->ids[i]);
  }
  free(fx->text);
  free(fx->text_len);
  free(fx->ids);
  free(fx->n_ids);
  free(fx->emb);
}

double rd_test_cosine(const float *a, const float *b, size_t n) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < n; i++) {
    ab += (double)a[i] * b[i];
    aa += (double)a[i] * a[i];
    bb += (double)b[i] * b[i];
  }
  return ab / (sqrt(aa) * sqrt(bb) + 1e-30);
}

double rd_test_max_abs(const float *a, const float *b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - b[i]);
    if (d > m) m = d;
  }
  return m;
}

int rd_test_staged_embed(rd_engine *e, const int32_t *const *ids, const size_t *n_ids, size_t n, int a, int b,
                         float *out) {
  size_t seq = 1;
  for (size_t i = 0; i < n; i++)
    if (n_ids[i] > seq) seq = n_ids[i];
  size_t size = rd_engine_hidden_size(e, n, seq);
  void *s1 = malloc(size), *s2 = malloc(size);
  CHECK(s1 && s2);
  int rc = rd_engine_stage_embed(e, ids, n_ids, n, a, s1, size);
  if (!rc) rc = rd_engine_stage_layers(e, s1, size, b, s2, size);
  if (!rc) rc = rd_engine_stage_pool(e, s2, size, out);
  free(s1);
  free(s2);
  return rc;
}
