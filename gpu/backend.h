/* backend.h - the two compute back ends behind rd_engine (internal).
 *
 * The engine tokenizes, buckets and schedules; a back end runs passes of a
 * loaded rd__bert.  A pass is one rd__pass of sequences plus an rd__stage
 * saying which part of the encoder to run on them: from token ids (the
 * embedding layer first) or from hidden rows, encoder layers [first, last),
 * then either mean pooling + L2 norm or the hidden rows themselves.  The
 * whole forward pass is the stage {ids, 0, layers, pool}: there is one code
 * path for full and split runs.  The CPU back end (cpu_bert.c) is always
 * built; the CUDA back end (the .cu files in cuda/) only when RD_ENGINE_CUDA
 * is defined, and this header keeps CUDA types out of everything that
 * includes it. */
#ifndef RD_GPU_BACKEND_H
#define RD_GPU_BACKEND_H

#include <stddef.h>

#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The part of the encoder a pass runs.  Rows are hidden vectors of `hidden`
 * floats; sequence s of the pass has p->len[s] of them, back to back. */
typedef struct rd__stage {
  const float *const *in_rows; /* NULL: start from p->ids with the embedding layer;
                                * else in_rows[s] holds sequence s's hidden rows */
  int first, last;             /* encoder layers [first, last) */
  int pool;                    /* 1: out_rows[s] gets the pooled, L2-normalised
                                * embedding; 0: out_rows[s] gets its hidden rows */
  float *const *out_rows;
} rd__stage;

typedef struct rd__cpu rd__cpu;

/* Workspace for passes of up to max_tokens packed tokens, sequences up to
 * max_seq long, using threads threads. */
int rd__cpu_open(const rd__bert *m, int threads, size_t max_tokens, size_t max_seq, rd__cpu **out,
                 char *err, size_t errlen);
void rd__cpu_close(rd__cpu *c);
size_t rd__cpu_bytes(const rd__cpu *c);
/* Runs stage st of one pass (synchronously). */
int rd__cpu_forward(rd__cpu *c, const rd__bert *m, const rd__pass *p, const rd__stage *st);

typedef struct rd__gpu rd__gpu;

typedef struct rd__gpu_params {
  int device;
  int bf16;
  size_t max_tokens;   /* padded tokens per pass */
  size_t max_seq;
  size_t max_batch;    /* sequences per pass (<= max_tokens) */
  size_t mem_limit;    /* 0 = none */
  int mem_limit_from_share;   /* mem_limit is the GPU share's budget (RAYDIST_GPU_MEMORY_BYTES): say so */
  int attention;       /* rd_engine_attention */
} rd__gpu_params;

int rd__gpu_device_count(void);
int rd__gpu_open(const rd__bert *m, const rd__gpu_params *prm, rd__gpu **out, char *err, size_t errlen);
void rd__gpu_close(rd__gpu *g);
size_t rd__gpu_device_bytes(const rd__gpu *g);
size_t rd__gpu_host_bytes(const rd__gpu *g);
int rd__gpu_attention(const rd__gpu *g); /* the rd_engine_attention in use (never AUTO) */
/* Queues stage st of one pass (sequences padded to p->max_len) on the
 * engine's stream and returns without waiting; results land in st->out_rows
 * by rd__gpu_finish at the latest.  The ids/len/in_rows arrays and the rows
 * they point to may be reused as soon as it returns. */
int rd__gpu_submit(rd__gpu *g, const rd__pass *p, const rd__stage *st, char *err, size_t errlen);
/* Waits for all submitted passes and copies their results out. */
int rd__gpu_finish(rd__gpu *g, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
