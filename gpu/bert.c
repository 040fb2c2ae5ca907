/* bert.c - load a BERT-family encoder from config.json + model.safetensors.
 *
 * Checks every tensor's presence, dtype and shape against config.json before
 * the engine may use it, so a wrong or corrupt file is refused at open with a
 * message naming the tensor, never discovered mid-inference. */
#include "model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "raydist/error.h"

static int read_file(const char *path, char **buf, size_t *len, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    int e = errno;
    snprintf(err, errlen, "%s: cannot open: %s", path, strerror(e));
    return e == ENOENT ? RD_ENOENT : RD_EIO;
  }
  char *b = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n == cap) {
      cap = cap ? cap * 2 : 4096;
      if (cap > (16u << 20)) { free(b); fclose(f); snprintf(err, errlen, "%s: too large", path); return RD_EINVAL; }
      char *nb = realloc(b, cap);
      if (!nb) { free(b); fclose(f); return RD_ENOMEM; }
      b = nb;
    }
    size_t got = fread(b + n, 1, cap - n, f);
    n += got;
    if (got == 0) break;
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) { free(b); snprintf(err, errlen, "%s: read error", path); return RD_EIO; }
  *buf = b;
  *len = n;
  return 0;
}

static int parse_config(const char *dir, rd__bert_config *c, char *err, size_t errlen) {
  char path[4096];
  snprintf(path, sizeof path, "%s/config.json", dir);
  char *buf;
  size_t len;
  int rc = read_file(path, &buf, &len, err, errlen);
  if (rc) return rc;
  rd__json *j = NULL;
  char jerr[160];
  rc = rd__json_parse(buf, len, &j, jerr, sizeof jerr);
  free(buf);
  if (rc) { snprintf(err, errlen, "%s: %s", path, jerr); return rc; }
  const rd__json *mt = rd__json_get(j, "model_type");
  if (!mt || mt->type != RD__JSON_STR || strcmp(mt->str, "bert") != 0) {
    snprintf(err, errlen, "%s: model_type '%s' is not supported (only 'bert')", path,
             mt && mt->type == RD__JSON_STR ? mt->str : "?");
    rd__json_free(j);
    return RD_ENOTSUP;
  }
  int64_t v[7];
  const char *keys[7] = {"vocab_size", "hidden_size", "num_attention_heads", "num_hidden_layers",
                         "intermediate_size", "max_position_embeddings", "type_vocab_size"};
  for (int k = 0; k < 7; k++) {
    if (rd__json_get_int(j, keys[k], &v[k]) || v[k] <= 0 || v[k] > (1 << 20)) {
      snprintf(err, errlen, "%s: missing or bad integer '%s'", path, keys[k]);
      rd__json_free(j);
      return RD_EINVAL;
    }
  }
  c->vocab = (int)v[0]; c->hidden = (int)v[1]; c->heads = (int)v[2]; c->layers = (int)v[3];
  c->inter = (int)v[4]; c->max_pos = (int)v[5]; c->type_vocab = (int)v[6];
  const rd__json *eps = rd__json_get(j, "layer_norm_eps");
  c->ln_eps = eps && eps->type == RD__JSON_NUM ? (float)eps->num : 1e-12f;
  const rd__json *act = rd__json_get(j, "hidden_act");
  int gelu = !act || (act->type == RD__JSON_STR && strcmp(act->str, "gelu") == 0);
  const rd__json *pe = rd__json_get(j, "position_embedding_type");
  int abs_pos = !pe || (pe->type == RD__JSON_STR && strcmp(pe->str, "absolute") == 0);
  rd__json_free(j);
  if (!gelu || !abs_pos) {
    snprintf(err, errlen, "%s: only hidden_act 'gelu' and absolute positions are supported", path);
    return RD_ENOTSUP;
  }
  if (c->hidden % c->heads || c->layers > RD__BERT_MAX_LAYERS || c->hidden / c->heads > 256) {
    snprintf(err, errlen, "%s: unsupported shape (hidden %d, heads %d, layers %d)", path,
             c->hidden, c->heads, c->layers);
    return RD_ENOTSUP;
  }
  c->head_dim = c->hidden / c->heads;
  return 0;
}

typedef struct {
  const rd__bert *m;
  const char *prefix;
  char *err;
  size_t errlen;
} getter;

static int get(getter *g, const char *name, int64_t d0, int64_t d1, const float **out) {
  char full[256];
  snprintf(full, sizeof full, "%s%s", g->prefix, name);
  int64_t shape[2] = {d0, d1};
  return rd_safetensors_get_f32(g->m->st, full, d1 ? 2 : 1, shape, out, g->err, g->errlen);
}

int rd__bert_load(const char *dir, rd__bert *m, char *err, size_t errlen) {
  int rc = parse_config(dir, &m->c, err, errlen);
  if (rc) return rc;
  char path[4096];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  rc = rd_safetensors_open(path, &m->st, err, errlen);
  if (rc) return rc;
  const rd__bert_config *c = &m->c;
  int64_t H = c->hidden, I = c->inter;
  getter g = {m, "", err, errlen};
  if (!rd_safetensors_find(m->st, "embeddings.word_embeddings.weight") &&
      rd_safetensors_find(m->st, "bert.embeddings.word_embeddings.weight"))
    g.prefix = "bert.";
  if ((rc = get(&g, "embeddings.word_embeddings.weight", c->vocab, H, &m->word)) ||
      (rc = get(&g, "embeddings.position_embeddings.weight", c->max_pos, H, &m->pos)) ||
      (rc = get(&g, "embeddings.token_type_embeddings.weight", c->type_vocab, H, &m->type)) ||
      (rc = get(&g, "embeddings.LayerNorm.weight", H, 0, &m->emb_ln_g)) ||
      (rc = get(&g, "embeddings.LayerNorm.bias", H, 0, &m->emb_ln_b)))
    goto fail;
  size_t per_layer = (size_t)(3 * H * H + 3 * H);
  m->owned_bytes = per_layer * (size_t)c->layers * sizeof(float);
  m->owned = malloc(m->owned_bytes);
  if (!m->owned) { rc = RD_ENOMEM; goto fail; }
  for (int l = 0; l < c->layers; l++) {
    rd__bert_layer *L = &m->layer[l];
    char n[128];
    const float *wq, *wk, *wv, *bq, *bk, *bv;
#define LAYER(suffix, d0, d1, dst) \
  (snprintf(n, sizeof n, "encoder.layer.%d.%s", l, suffix), get(&g, n, d0, d1, dst))
    if ((rc = LAYER("attention.self.query.weight", H, H, &wq)) ||
        (rc = LAYER("attention.self.key.weight", H, H, &wk)) ||
        (rc = LAYER("attention.self.value.weight", H, H, &wv)) ||
        (rc = LAYER("attention.self.query.bias", H, 0, &bq)) ||
        (rc = LAYER("attention.self.key.bias", H, 0, &bk)) ||
        (rc = LAYER("attention.self.value.bias", H, 0, &bv)) ||
        (rc = LAYER("attention.output.dense.weight", H, H, &L->wo)) ||
        (rc = LAYER("attention.output.dense.bias", H, 0, &L->bo)) ||
        (rc = LAYER("attention.output.LayerNorm.weight", H, 0, &L->ln1_g)) ||
        (rc = LAYER("attention.output.LayerNorm.bias", H, 0, &L->ln1_b)) ||
        (rc = LAYER("intermediate.dense.weight", I, H, &L->wi)) ||
        (rc = LAYER("intermediate.dense.bias", I, 0, &L->bi)) ||
        (rc = LAYER("output.dense.weight", H, I, &L->wo2)) ||
        (rc = LAYER("output.dense.bias", H, 0, &L->bo2)) ||
        (rc = LAYER("output.LayerNorm.weight", H, 0, &L->ln2_g)) ||
        (rc = LAYER("output.LayerNorm.bias", H, 0, &L->ln2_b)))
      goto fail;
#undef LAYER
    float *w = m->owned + (size_t)l * per_layer, *b = w + 3 * H * H;
    memcpy(w, wq, (size_t)(H * H) * sizeof(float));
    memcpy(w + H * H, wk, (size_t)(H * H) * sizeof(float));
    memcpy(w + 2 * H * H, wv, (size_t)(H * H) * sizeof(float));
    memcpy(b, bq, (size_t)H * sizeof(float));
    memcpy(b + H, bk, (size_t)H * sizeof(float));
    memcpy(b + 2 * H, bv, (size_t)H * sizeof(float));
    L->wqkv = w;
    L->bqkv = b;
  }
  return 0;
fail:
  rd__bert_unload(m);
  return rc;
}

void rd__bert_unload(rd__bert *m) {
  free(m->owned);
  rd_safetensors_close(m->st);
  memset(m, 0, sizeof *m);
}

double rd__bert_gemm_flops(const rd__bert_config *c, const rd__pass *p, size_t pad_len) {
  double H = c->hidden, I = c->inter, T = 0, attn = 0;
  for (size_t s = 0; s < p->nseq; s++) {
    double L = pad_len ? (double)pad_len : (double)p->len[s];
    T += L;
    attn += 2.0 * 2.0 * L * L * H; /* QK^T and PV over all heads */
  }
  double proj = 2.0 * T * (4.0 * H * H + 2.0 * H * I);
  return (proj + attn) * c->layers;
}
