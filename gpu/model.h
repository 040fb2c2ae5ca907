/* model.h - in-memory description of a BERT-family encoder, shared by the CPU
 * and GPU paths of the engine (internal to gpu/, no CUDA types).
 *
 * Weights stay in the read-only safetensors mapping; only the fused Q/K/V
 * projection is copied (so one GEMM computes all three).  Nothing here runs
 * the model: cpu_bert.c and cuda/bert.cu do. */
#ifndef RD_GPU_MODEL_H
#define RD_GPU_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RD__BERT_MAX_LAYERS 48

typedef struct rd__bert_config {
  int vocab, hidden, heads, head_dim, layers, inter, max_pos, type_vocab;
  float ln_eps;
} rd__bert_config;

/* All matrices row-major [out x in], as stored by PyTorch nn.Linear. */
typedef struct rd__bert_layer {
  const float *wqkv, *bqkv;   /* [3H x H], [3H]: query, key, value stacked (owned copy) */
  const float *wo, *bo;       /* attention output projection [H x H], [H] */
  const float *ln1_g, *ln1_b; /* attention output LayerNorm */
  const float *wi, *bi;       /* intermediate [I x H], [I] */
  const float *wo2, *bo2;     /* output [H x I], [H] */
  const float *ln2_g, *ln2_b; /* output LayerNorm */
} rd__bert_layer;

typedef struct rd__bert {
  rd__bert_config c;
  const float *word, *pos, *type;   /* embeddings [V x H], [P x H], [T x H] */
  const float *emb_ln_g, *emb_ln_b;
  rd__bert_layer layer[RD__BERT_MAX_LAYERS];
  float *owned;                     /* fused QKV weights and biases */
  size_t owned_bytes;
  rd_safetensors *st;
} rd__bert;

/* Reads dir/config.json and dir/model.safetensors into m (zeroed by caller).
 * Accepts tensor names with or without a "bert." prefix.  Errors: RD_ENOENT,
 * RD_EINVAL, RD_ENOMEM with a message in err.  Release with rd__bert_unload. */
int rd__bert_load(const char *dir, rd__bert *m, char *err, size_t errlen);
void rd__bert_unload(rd__bert *m);

/* One forward pass: nseq token sequences, ids[s][0..len[s]), all <= max_len. */
typedef struct rd__pass {
  size_t nseq;
  size_t max_len;
  size_t tokens;              /* sum of len */
  const int32_t *const *ids;
  const size_t *len;
} rd__pass;

/* GEMM floating-point operations of a pass with sequences padded to pad_len
 * (pad_len 0: packed, no padding). */
double rd__bert_gemm_flops(const rd__bert_config *c, const rd__pass *p, size_t pad_len);

#ifdef __cplusplus
}
#endif
#endif
