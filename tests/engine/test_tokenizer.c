/* test_tokenizer.c - the C WordPiece tokenizer must reproduce every reference
 * token id of the fixture (sentence-transformers' tokenizer), including the
 * edge cases (accents, CJK, control characters, invalid UTF-8, truncation). */
#include <string.h>

#include "engine.h"
#include "raydist/error.h"
#include "testutil.h"
#include "wordpiece.h"

int main(void) {
  const char *dir = rd_test_model_dir();
  rd_fixture fx;
  rd_test_fixture_load(&fx);
  char path[4096], err[256];
  snprintf(path, sizeof path, "%s/vocab.txt", dir);
  rd_wordpiece *wp = NULL;
  int rc = rd_wordpiece_load(path, &wp, err, sizeof err);
  if (rc) { fprintf(stderr, "load: %s\n", err); return 1; }
  CHECK(rd_wordpiece_vocab_size(wp) == 30522);
  CHECK(rd_wordpiece_token_id(wp, "[CLS]", 5) == 101);
  int32_t ids[256];
  size_t bad = 0, total = 0;
  for (size_t i = 0; i < fx.n; i++) {
    size_t n = 0;
    CHECK(rd_wordpiece_encode(wp, fx.text[i], fx.text_len[i], 256, ids, &n) == 0);
    total += fx.n_ids[i];
    if (n != fx.n_ids[i] || memcmp(ids, fx.ids[i], n * sizeof *ids) != 0) {
      bad++;
      fprintf(stderr, "sentence %zu: got %zu ids, want %zu\n  got :", i, n, fx.n_ids[i]);
      for (size_t k = 0; k < n && k < 40; k++) fprintf(stderr, " %d", ids[k]);
      fprintf(stderr, "\n  want:");
      for (size_t k = 0; k < fx.n_ids[i] && k < 40; k++) fprintf(stderr, " %d", fx.ids[i][k]);
      fprintf(stderr, "\n");
    }
  }
  /* truncation to smaller limits keeps [CLS] ... [SEP] */
  size_t n = 0;
  const char *t = "one two three four five";
  CHECK(rd_wordpiece_encode(wp, t, strlen(t), 4, ids, &n) == 0);
  CHECK(n == 4 && ids[0] == 101 && ids[3] == 102);
  CHECK(rd_wordpiece_encode(wp, t, strlen(t), 2, ids, &n) == 0);
  CHECK(n == 2 && ids[0] == 101 && ids[1] == 102);
  CHECK(rd_wordpiece_encode(wp, t, strlen(t), 1, ids, &n) == RD_EINVAL);
  rd_wordpiece_free(wp);
  printf("tokenizer: %zu sentences, %zu ids, %zu mismatching sentences\n", fx.n, total, bad);
  rd_test_fixture_free(&fx);
  return bad ? 1 : 0;
}
