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

/* GPU attention: how softmax(Q K^T) V is computed on a device. */
typedef enum rd_engine_attention {
  /* default: FUSED when max_seq_len fits the device's shared memory per block
   * (about 384 tokens on an A100/H100/H200 for a 32-wide head), else GEMM */
  RD_ENGINE_ATTN_AUTO = 0,
  /* one kernel per (sequence, head, 64 queries) reads Q, K, V from the QKV
   * projection and keeps scores and probabilities in shared memory (tensor
   * cores for both products); rd_engine_open fails with RD_ENOTSUP if
   * max_seq_len does not fit */
  RD_ENGINE_ATTN_FUSED = 1,
  /* cuBLAS strided-batched GEMMs around a softmax kernel; scores and
   * probabilities pass through device memory */
  RD_ENGINE_ATTN_GEMM = 2,
  /* one kernel per (sequence, head, up to 128 queries) that keeps scores and
   * probabilities in registers (mma.sync tensor-core tiles, online softmax
   * over 64 keys at a time); heads 32 or 64 wide, up to 512 tokens, else
   * rd_engine_open fails with RD_ENOTSUP.  Not the default yet: its figures
   * on a GPU are still to be measured (docs/engine.md) */
  RD_ENGINE_ATTN_FLASH = 3
} rd_engine_attention;

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
  rd_engine_attention attention;  /* GPU only */
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
  int fused_attention;     /* GPU engines: 1 if attention runs in one kernel (FUSED or FLASH) */
  int attention;           /* GPU engines: the rd_engine_attention in use (FUSED, GEMM or FLASH) */
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

/* ------------------------------------------------------------- stages
 *
 * The encoder split into stages, for pipeline parallelism (one engine per
 * stage, possibly in different processes): the embedding layer, any range of
 * encoder layers, and mean pooling + L2 normalisation.  A hidden state travels
 * between stages as one contiguous buffer, the "RDHS" wire format:
 *
 *   offset 0            rd_engine_hidden_hdr (32 bytes, little-endian)
 *   offset 32           u32 lens[n]: tokens of sequence i incl. [CLS]/[SEP];
 *                       the attention mask of sequence i is 1 for rows
 *                       < lens[i] and 0 after (right padding)
 *   offset data_offset  float32 x[n][seq][dim]: row r of sequence i is token
 *                       r's hidden vector after `layers_done` encoder layers
 *                       (0: the embedding layer's output); rows >= lens[i]
 *                       are zero and never read
 *
 * data_offset is 32 + 4n rounded up to 64; the total is rd_engine_hidden_size.
 * Sequence i is text/ids i of the call that made the state; seq is the
 * longest of them.  The state is fp32 on both back ends (the GPU keeps its
 * residual stream in fp32 and rounds the GEMM copy from it), so splitting the
 * encoder anywhere gives bit-for-bit the result of rd_engine_embed_ids on an
 * engine with the same configuration: a pass of a stage holds the same
 * sequences in the same order as the unsplit pass would.  Buffers may be at
 * any alignment. */

typedef struct rd_engine_hidden_hdr {
  char magic[4];          /* "RDHS" */
  uint32_t version;       /* 1 */
  uint32_t n;             /* sequences */
  uint32_t seq;           /* rows per sequence (the longest sequence) */
  uint32_t dim;           /* hidden width (384) */
  uint32_t layers_done;   /* encoder layers applied so far, 0..layers_total */
  uint32_t layers_total;  /* the model's encoder layers (6): a state from another model is refused */
  uint32_t data_offset;   /* bytes from the start of the buffer to x */
} rd_engine_hidden_hdr;

/* Encoder layers of the model (6 for all-MiniLM-L6-v2). */
RD_EXTERN int rd_engine_num_layers(const rd_engine *e);

/* Bytes of a hidden state of n sequences of at most seq tokens. */
RD_EXTERN size_t rd_engine_hidden_size(const rd_engine *e, size_t n, size_t seq);

/* Checks that buf (size bytes) is a well-formed hidden state for this engine
 * (magic, version, dim, layers, lens within 1..seq <= max_seq_len,
 * n <= max_batch, exact size) and copies its header to *hdr (may be NULL).
 * RD_EINVAL with a message otherwise. */
RD_EXTERN int rd_engine_hidden_check(rd_engine *e, const void *buf, size_t size, rd_engine_hidden_hdr *hdr)
    __attribute__((warn_unused_result));

/* First stage: the embedding layer then encoder layers [0, last_layer) of n
 * tokenized sequences (as rd_engine_embed_ids takes them) into the hidden
 * state out (cap bytes, at least rd_engine_hidden_size(e, n, longest)).
 * last_layer 0 runs the embedding layer only.  Errors: RD_EINVAL (bad ids,
 * n > max_batch, last_layer out of 0..layers, cap too small), RD_EGPU. */
RD_EXTERN int rd_engine_stage_embed(rd_engine *e, const int32_t *const *ids, const size_t *n_ids, size_t n,
                                    int last_layer, void *out, size_t cap) __attribute__((warn_unused_result));

/* Middle stage: encoder layers [layers_done, last_layer) of the hidden state
 * in (in_size bytes) into out (cap >= in_size; out may equal in), whose
 * layers_done becomes last_layer.  Errors: RD_EINVAL (malformed state,
 * last_layer < layers_done or > layers, cap too small), RD_EGPU. */
RD_EXTERN int rd_engine_stage_layers(rd_engine *e, const void *in, size_t in_size, int last_layer, void *out,
                                     size_t cap) __attribute__((warn_unused_result));

/* Last stage: the remaining encoder layers [layers_done, layers) of the hidden
 * state in, then mean pooling over each sequence's real tokens and L2
 * normalisation, into out (n x rd_engine_dim floats, row i for sequence i).
 * On a state with every layer done it only pools.  Errors as
 * rd_engine_stage_layers. */
RD_EXTERN int rd_engine_stage_pool(rd_engine *e, const void *in, size_t in_size, float *out)
    __attribute__((warn_unused_result));

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
