/* engine.h - batched sentence-embedding inference engine (C interface).
 *
 * An engine loads one sentence-encoder model (today: BERT family, e.g.
 * all-MiniLM-L6-v2) from a directory holding model.safetensors, config.json and
 * vocab.txt, and turns batches of UTF-8 texts into L2-normalised embeddings,
 * either on the CPU (OpenBLAS sgemm + vectorised C) or on one CUDA device
 * (cuBLAS tensor-core GEMMs + CUDA kernels).  Both paths share this interface
 * and its tests.  No CUDA type appears here; a build without CUDA still offers
 * the CPU path, and asking it for a device returns RD_ENOTSUP.
 *
 * Errors: every call returns 0 or a negative RD_E* code (raydist/error.h); the
 * engine keeps a message for the last failure (rd_engine_last_error).
 * Threads: one engine serves one call at a time (callers serialise); distinct
 * engines are independent, including several engines on one GPU. */
#ifndef RD_GPU_ENGINE_H
#define RD_GPU_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef RD_EXTERN
#define RD_EXTERN __attribute__((visibility("default")))
#endif

typedef struct rd_engine rd_engine;

/* GPU math precision for the GEMMs (accumulation is always fp32). */
typedef enum rd_engine_precision {
  RD_ENGINE_FP16 = 0, /* default: fp16 storage, more mantissa than bf16 */
  RD_ENGINE_BF16 = 1
} rd_engine_precision;

typedef struct rd_engine_config {
  /* Directory with model.safetensors, config.json and vocab.txt.  NULL: use
   * $RD_MODEL_DIR.  Borrowed only during rd_engine_open. */
  const char *model_dir;
  int device;            /* -1: CPU; >= 0: CUDA device ordinal */
  int threads;           /* CPU path threads (OpenBLAS and the engine's own loops); <= 0: 1 */
  size_t max_batch;      /* most texts per rd_engine_embed call; 0: 256 */
  size_t max_seq_len;    /* tokens per text incl. [CLS]/[SEP], 2..model limit; 0: 256 */
  /* Tokens (padded, on the GPU) processed in one pass; bounds the workspace.
   * 0: 2048 on the CPU (keeps activations in cache), 32768 on a GPU.  Raised
   * to max_seq_len (rounded up to 8) if smaller. */
  size_t max_tokens_per_pass;
  rd_engine_precision precision;  /* GPU only */
  /* GPU only: refuse to open (RD_ENOMEM) when weights + workspace would need
   * more device memory than this; 0 = no limit.  For sharing one GPU between
   * several engines (fractional GPUs). */
  size_t gpu_mem_limit;
  /* Optional caller buffer receiving the reason when rd_engine_open fails. */
  char *errbuf;
  size_t errbuf_len;
} rd_engine_config;

typedef struct rd_engine_stats {
  uint64_t sentences;      /* texts embedded */
  uint64_t tokens;         /* real tokens (incl. [CLS]/[SEP]) */
  uint64_t padded_tokens;  /* tokens computed incl. padding (== tokens on the CPU) */
  uint64_t passes;         /* forward passes (buckets) run */
  double seconds;          /* wall time inside rd_engine_embed */
  double gemm_flops;       /* floating-point operations done in GEMMs */
  size_t host_bytes;       /* workspace + weight copies owned on the host */
  size_t device_bytes;     /* device memory owned (GPU engines) */
} rd_engine_stats;

/* Fills cfg with defaults: CPU, 1 thread, max_batch 256, max_seq_len 256. */
RD_EXTERN void rd_engine_config_init(rd_engine_config *cfg);

/* Opens an engine.  On success *out is a new engine owned by the caller
 * (release with rd_engine_close).  Errors: RD_EINVAL (bad config), RD_ENOENT
 * (model files missing), RD_EINVAL (corrupt/inconsistent weights), RD_EGPU (no
 * such CUDA device or a CUDA/cuBLAS failure), RD_ENOTSUP (device requested in a
 * build without CUDA), RD_ENOMEM; the reason goes to cfg->errbuf. */
RD_EXTERN int rd_engine_open(const rd_engine_config *cfg, rd_engine **out)
    __attribute__((warn_unused_result));
RD_EXTERN void rd_engine_close(rd_engine *e);

/* Message for the engine's last failure ("" if none); owned by the engine,
 * valid until the next call on it. */
RD_EXTERN const char *rd_engine_last_error(const rd_engine *e);

/* Embedding width (384 for all-MiniLM-L6-v2). */
RD_EXTERN size_t rd_engine_dim(const rd_engine *e);
RD_EXTERN size_t rd_engine_max_seq_len(const rd_engine *e);

/* Tokenizes len bytes of text exactly as rd_engine_embed would (at most
 * rd_engine_max_seq_len tokens, [CLS] first, [SEP] last) into ids (cap
 * entries; the caller owns it); *n_out receives the count.  Invalid UTF-8 is
 * replaced, an empty text gives [CLS][SEP].  RD_EINVAL if cap is too small for
 * the result. */
RD_EXTERN int rd_engine_tokenize(rd_engine *e, const char *text, size_t len, int32_t *ids,
                                 size_t cap, size_t *n_out) __attribute__((warn_unused_result));

/* Embeds n texts (texts[i] has lens[i] bytes, need not be NUL-terminated; lens
 * may be NULL for NUL-terminated texts) into out, n x rd_engine_dim floats, row
 * i for texts[i], each row of unit L2 norm.  Texts are bucketed by token length
 * internally.  n == 0 is a no-op.  Errors: RD_EINVAL (n > max_batch, NULL
 * text), RD_EGPU; on error out is unspecified. */
RD_EXTERN int rd_engine_embed(rd_engine *e, const char *const *texts, const size_t *lens, size_t n,
                              float *out) __attribute__((warn_unused_result));

/* Embeds already-tokenized sequences: ids[i] has n_ids[i] tokens (2..max_seq_len,
 * as produced by rd_engine_tokenize).  Used by benchmarks for exact lengths. */
RD_EXTERN int rd_engine_embed_ids(rd_engine *e, const int32_t *const *ids, const size_t *n_ids,
                                  size_t n, float *out) __attribute__((warn_unused_result));

/* Counters since open (or the last reset). */
RD_EXTERN int rd_engine_stats_get(const rd_engine *e, rd_engine_stats *out);
RD_EXTERN void rd_engine_stats_reset(rd_engine *e);

/* Number of CUDA devices usable by this build (0 without CUDA or without a
 * device); never fails. */
RD_EXTERN int rd_engine_device_count(void);

#ifdef __cplusplus
}
#endif
#endif
