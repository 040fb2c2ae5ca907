/* testutil.h - shared helpers for the engine tests: locate the model, read the
 * committed fixture (sentences, reference ids, reference embeddings). */
#ifndef RD_TEST_ENGINE_UTIL_H
#define RD_TEST_ENGINE_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine.h"

typedef struct rd_fixture {
  size_t n, dim;
  char **text;        /* raw bytes (may be invalid UTF-8), NUL-terminated */
  size_t *text_len;
  int32_t **ids;
  size_t *n_ids;
  float *emb;         /* n x dim */
} rd_fixture;

/* Model directory; exits 1 with a "run scripts/fetch_model.sh" message when
 * model.safetensors or vocab.txt is missing. */
const char *rd_test_model_dir(void);
/* Loads the fixture or exits 1. */
void rd_test_fixture_load(rd_fixture *fx);
void rd_test_fixture_free(rd_fixture *fx);
double rd_test_cosine(const float *a, const float *b, size_t n);
double rd_test_max_abs(const float *a, const float *b, size_t n);

/* Embeds n token sequences through the stage API split at layers a <= b:
 * rd_engine_stage_embed up to layer a, rd_engine_stage_layers up to b, then
 * rd_engine_stage_pool.  0, or the code of the call that failed. */
int rd_test_staged_embed(rd_engine *e, const int32_t *const *ids, const size_t *n_ids, size_t n, int a, int b,
                         float *out);

#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) {                                                               \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

#endif
