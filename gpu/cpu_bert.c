/* cpu_bert.c - CPU back end: BERT encoder forward pass with OpenBLAS sgemm and
 * vectorised C loops.
 *
 * Tokens of a pass are packed without padding: every projection is one sgemm
 * over all tokens of the pass, attention runs per (sequence, head) on exactly
 * that sequence's tokens, so padding costs nothing here.  The workspace is
 * allocated once at open; a pass allocates nothing.  A pass runs one
 * rd__stage (backend.h): the embedding layer or hidden rows copied in, a
 * range of encoder layers, then pooling or the hidden rows copied out.  Hot
 * loops are compiled for several x86-64 levels and picked at load time (no
 * -march=native). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backend.h"
#include "raydist/error.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define RD__CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define RD__CLONES
#endif
#define RD__INLINE static inline __attribute__((always_inline))

/* How a projection's GEMM is split over the engine's threads
 * (RD_ENGINE_CPU_SPLIT, read at open; see linear()). */
enum { SPLIT_ROWS, SPLIT_TILES, SPLIT_BLAS };

struct rd__cpu {
  int threads;
  int split;
  size_t max_tokens, max_seq, bytes;
  float *x, *qkv, *ctx, *ffn;   /* activations, max_tokens rows each */
  float *scratch;               /* per thread: attention scores, max_seq^2 */
  size_t scratch_stride;
  int32_t *tok_id, *tok_pos;
  size_t *seq_off;
};

static int nthreads_of(const rd__cpu *c) { return c->threads; }

/* ---- numerics: vectorisable, no libm calls in the hot loops ---- */

/* exp for |x| <= ~87 (Cephes expf: range reduction by ln 2 and a degree-6
 * polynomial, ~1 ulp).  Needs round-to-nearest and no -ffast-math. */
RD__INLINE float rd__expf(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  /* round to nearest by the 1.5 * 2^23 trick: vectorises, unlike floorf */
  float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * r * r + r + 1.0f;
  int32_t e = ((int32_t)n + 127) << 23;
  float s;
  memcpy(&s, &e, sizeof s);
  return y * s;
}

/* erf as a rational function on [-4, 4] (the float erf of Eigen/XLA; abs.
 * error ~1e-7), so that GELU is the exact erf GELU of the reference. */
RD__INLINE float rd__erff(float a) {
  float x = a > 4.0f ? 4.0f : a;
  x = x < -4.0f ? -4.0f : x;
  float x2 = x * x;
  float p = x2 * -2.72614225801306e-10f + 2.77068142495902e-08f;
  p = x2 * p + -2.10102402082508e-06f;
  p = x2 * p + -5.69250639462346e-05f;
  p = x2 * p + -7.34990630326855e-04f;
  p = x2 * p + -2.95459980854025e-03f;
  p = x2 * p + -1.60960333262415e-02f;
  p = x * p;
  float q = x2 * -1.45660718464996e-05f + -2.13374055278905e-04f;
  q = x2 * q + -1.68282697438203e-03f;
  q = x2 * q + -7.37332916720468e-03f;
  q = x2 * q + -1.42647390514189e-02f;
  return p / q;
}

/* y = LayerNorm(y) in place */
RD__INLINE void ln_inplace(float *restrict y, const float *restrict g, const float *restrict b, int n,
                           float eps) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int i = 0; i < n; i++) sum += y[i];
  float mean = sum / (float)n, var = 0.0f;
#pragma omp simd reduction(+ : var)
  for (int i = 0; i < n; i++) var += (y[i] - mean) * (y[i] - mean);
  float rstd = 1.0f / sqrtf(var / (float)n + eps);
#pragma omp simd
  for (int i = 0; i < n; i++) y[i] = (y[i] - mean) * rstd * g[i] + b[i];
}

RD__CLONES static void embed_row(float *restrict y, const float *restrict w, const float *restrict p,
                                 const float *restrict t, const float *g, const float *b, int n,
                                 float eps) {
#pragma omp simd
  for (int i = 0; i < n; i++) y[i] = w[i] + p[i] + t[i];
  ln_inplace(y, g, b, n, eps);
}

/* x = LayerNorm(x + t + bias) */
RD__CLONES static void residual_ln_row(float *restrict x, const float *restrict t,
                                       const float *restrict bias, const float *g, const float *b,
                                       int n, float eps) {
#pragma omp simd
  for (int i = 0; i < n; i++) x[i] += t[i] + bias[i];
  ln_inplace(x, g, b, n, eps);
}

RD__CLONES static void bias_gelu_row(float *restrict y, const float *restrict bias, int n) {
#pragma omp simd
  for (int i = 0; i < n; i++) {
    float v = y[i] + bias[i];
    y[i] = 0.5f * v * (1.0f + rd__erff(v * 0.70710678118654752f));
  }
}

RD__CLONES static void bias_row(float *restrict y, const float *restrict bias, int n) {
#pragma omp simd
  for (int i = 0; i < n; i++) y[i] += bias[i];
}

/* Softmax of each of the L rows of s (row stride L), in place. */
RD__CLONES static void softmax_rows(float *restrict s, int L) {
  for (int i = 0; i < L; i++) {
    float *r = s + (size_t)i * L;
    float mx = r[0];
#pragma omp simd reduction(max : mx)
    for (int j = 1; j < L; j++) mx = r[j] > mx ? r[j] : mx;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < L; j++) {
      float e = rd__expf(r[j] - mx);
      r[j] = e;
      sum += e;
    }
    float inv = 1.0f / sum;
#pragma omp simd
    for (int j = 0; j < L; j++) r[j] *= inv;
  }
}

/* Attention for one head of one sequence of L tokens: q, k, v point at the
 * head's columns of the first token's fused QKV row (row stride ld); the
 * result goes to o (row stride ldo); s is L*L floats of scratch.  Runs on one
 * thread (OpenBLAS single-threaded). */
static void attn_head(const float *q, const float *k, const float *v, size_t ld, float *o, size_t ldo,
                      int L, int dh, float scale, float *s) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, L, L, dh, scale, q, (blasint)ld, k,
              (blasint)ld, 0.0f, s, L);
  softmax_rows(s, L);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, L, dh, L, 1.0f, s, L, v, (blasint)ld, 0.0f,
              o, (blasint)ldo);
}

RD__CLONES static void mean_pool_l2(const float *restrict x, size_t L, int n, float *restrict out) {
#pragma omp simd
  for (int i = 0; i < n; i++) out[i] = 0.0f;
  for (size_t t = 0; t < L; t++) {
    const float *xt = x + t * (size_t)n;
#pragma omp simd
    for (int i = 0; i < n; i++) out[i] += xt[i];
  }
  float inv = 1.0f / (float)L, ss = 0.0f;
#pragma omp simd reduction(+ : ss)
  for (int i = 0; i < n; i++) {
    out[i] *= inv;
    ss += out[i] * out[i];
  }
  float nrm = sqrtf(ss);
  float s = 1.0f / (nrm > 1e-12f ? nrm : 1e-12f);
#pragma omp simd
  for (int i = 0; i < n; i++) out[i] *= s;
}

/* ---- back end ---- */

int rd__cpu_open(const rd__bert *m, int threads, size_t max_tokens, size_t max_seq, rd__cpu **out,
                 char *err, size_t errlen) {
  *out = NULL;
  rd__cpu *c = calloc(1, sizeof *c);
  if (!c) return RD_ENOMEM;
  c->threads = threads > 0 ? threads : 1;
  const char *sp = getenv("RD_ENGINE_CPU_SPLIT");
  if (!sp || !*sp || !strcmp(sp, "rows")) c->split = SPLIT_ROWS;
  else if (!strcmp(sp, "tiles")) c->split = SPLIT_TILES;
  else if (!strcmp(sp, "blas")) c->split = SPLIT_BLAS;
  else {
    snprintf(err, errlen, "RD_ENGINE_CPU_SPLIT='%.40s': not rows, tiles or blas", sp);
    free(c);
    return RD_EINVAL;
  }
  c->max_tokens = max_tokens;
  c->max_seq = max_seq;
  size_t H = (size_t)m->c.hidden, NI = (size_t)m->c.inter, T = max_tokens;
  size_t acts = T * (H + 3 * H + H + NI);
  c->scratch_stride = (max_seq * max_seq + 15) & ~(size_t)15;
  size_t scratch = c->scratch_stride * (size_t)c->threads;
  c->bytes = (acts + scratch) * sizeof(float) + T * 2 * sizeof(int32_t) + (T + 1) * sizeof(size_t);
  float *a = aligned_alloc(64, ((acts + scratch) * sizeof(float) + 63) & ~(size_t)63);
  c->tok_id = malloc(T * sizeof(int32_t));
  c->tok_pos = malloc(T * sizeof(int32_t));
  c->seq_off = malloc((T + 1) * sizeof(size_t));
  if (!a || !c->tok_id || !c->tok_pos || !c->seq_off) {
    snprintf(err, errlen, "cannot allocate a %zu-byte CPU workspace", c->bytes);
    free(a);
    c->x = NULL;
    rd__cpu_close(c);
    return RD_ENOMEM;
  }
  c->x = a;
  c->qkv = c->x + T * H;
  c->ctx = c->qkv + T * 3 * H;
  c->ffn = c->ctx + T * H;
  c->scratch = c->ffn + T * NI;
  *out = c;
  return 0;
}

void rd__cpu_close(rd__cpu *c) {
  if (!c) return;
  free(c->x);
  free(c->tok_id);
  free(c->tok_pos);
  free(c->seq_off);
  free(c);
}

size_t rd__cpu_bytes(const rd__cpu *c) { return c->bytes; }

/* The grid of tiles a GEMM of T rows and n_out columns is split into over
 * nt threads: *nr row blocks x *nc column blocks (nr * nc = nt).  SPLIT_ROWS:
 * rows only, unless there are too few (then columns only).  SPLIT_TILES:
 * columns are halved until each thread has 256 rows or more, while blocks
 * keep 64 columns or more, so that on many threads each GEMM reads 1/nc of
 * the weights instead of all of them (each thread's OpenBLAS call packs
 * what it reads). */
static void tile_grid(int split, size_t T, int n_out, int nt, int *nr, int *nc) {
  int c = 1;
  if (split == SPLIT_TILES) {
    while (c < nt && nt % (c * 2) == 0 && T / (size_t)(nt / c) < 256 && n_out / (c * 2) >= 64) c *= 2;
  } else if (T < (size_t)32 * nt) {
    c = nt;
  }
  *nc = c;
  *nr = nt / c;
}

/* Y[T x n_out] = X[T x n_in] W^T.  By default on nt threads of the engine's
 * own pool, OpenBLAS single-threaded inside each, each on one tile of Y
 * (tile_grid).  One pool for everything avoids two thread pools spinning
 * against each other on a small machine.  SPLIT_BLAS instead makes one
 * call with OpenBLAS's own nt threads. */
static void linear(const float *x, const float *w, float *y, size_t T, int n_out, int n_in, int nt, int split) {
  if (nt <= 1 || split == SPLIT_BLAS) {
    if (nt > 1) openblas_set_num_threads(nt);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)T, n_out, n_in, 1.0f, x, n_in, w,
                n_in, 0.0f, y, n_out);
    if (nt > 1) openblas_set_num_threads(1);   /* attention's small GEMMs run inside the engine's threads */
    return;
  }
#pragma omp parallel num_threads(nt)
  {
#ifdef _OPENMP
    int id = omp_get_thread_num(), n = omp_get_num_threads();
#else
    int id = 0, n = 1;
#endif
    int nr, nc;   /* on the threads OpenMP gave, which may be fewer than nt */
    tile_grid(split, T, n_out, n, &nr, &nc);
    int ri = id / nc, ci = id % nc;
    size_t per = ((T + nr - 1) / nr + 7) & ~(size_t)7, r0 = per * ri, r1 = r0 + per > T ? T : r0 + per;
    int cper = ((n_out + nc - 1) / nc + 15) & ~15, c0 = cper * ci, c1 = c0 + cper > n_out ? n_out : c0 + cper;
    if (r0 < r1 && c0 < c1)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)(r1 - r0), c1 - c0, n_in, 1.0f,
                  x + r0 * n_in, n_in, w + (size_t)c0 * n_in, n_in, 0.0f, y + r0 * n_out + c0, n_out);
  }
}

/* Encoder layer l on the T packed tokens of the pass in c->x (in place). */
static void layer_forward(rd__cpu *c, const rd__bert *m, const rd__pass *p, int l, size_t T) {
  const rd__bert_config *cf = &m->c;
  const int H = cf->hidden, NI = cf->inter, NH = cf->heads, DH = cf->head_dim;
  const float eps = cf->ln_eps, scale = 1.0f / sqrtf((float)DH);
  const int nt = nthreads_of(c);
  const long nseq = (long)p->nseq, lT = (long)T;
  const rd__bert_layer *L = &m->layer[l];
  linear(c->x, L->wqkv, c->qkv, T, 3 * H, H, nt, c->split);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (long t = 0; t < lT; t++) bias_row(c->qkv + (size_t)t * 3 * H, L->bqkv, 3 * H);
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
  for (long sh = 0; sh < nseq * NH; sh++) {
    long s = sh / NH, h = sh % NH;
#ifdef _OPENMP
    int tid = omp_get_thread_num();
#else
    int tid = 0;
#endif
    float *sc = c->scratch + (size_t)tid * c->scratch_stride;
    const float *q = c->qkv + c->seq_off[s] * 3 * H + (size_t)h * DH;
    attn_head(q, q + H, q + 2 * H, 3 * (size_t)H, c->ctx + c->seq_off[s] * H + (size_t)h * DH,
              (size_t)H, (int)p->len[s], DH, scale, sc);
  }
  float *tmp = c->qkv; /* QKV is dead after attention */
  linear(c->ctx, L->wo, tmp, T, H, H, nt, c->split);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (long t = 0; t < lT; t++)
    residual_ln_row(c->x + (size_t)t * H, tmp + (size_t)t * H, L->bo, L->ln1_g, L->ln1_b, H, eps);
  linear(c->x, L->wi, c->ffn, T, NI, H, nt, c->split);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (long t = 0; t < lT; t++) bias_gelu_row(c->ffn + (size_t)t * NI, L->bi, NI);
  linear(c->ffn, L->wo2, tmp, T, H, NI, nt, c->split);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (long t = 0; t < lT; t++)
    residual_ln_row(c->x + (size_t)t * H, tmp + (size_t)t * H, L->bo2, L->ln2_g, L->ln2_b, H, eps);
}

int rd__cpu_forward(rd__cpu *c, const rd__bert *m, const rd__pass *p, const rd__stage *st) {
  const rd__bert_config *cf = &m->c;
  const int H = cf->hidden;
  const float eps = cf->ln_eps;
  const int nt = nthreads_of(c);
  if (st->first < 0 || st->last > cf->layers || st->first > st->last) return RD_EINVAL;
  size_t T = 0;
  for (size_t s = 0; s < p->nseq; s++) T += p->len[s];
  if (T > c->max_tokens) return RD_EINVAL;
  T = 0;
  for (size_t s = 0; s < p->nseq; s++) {
    c->seq_off[s] = T;
    for (size_t i = 0; i < p->len[s]; i++) {
      if (!st->in_rows) c->tok_id[T] = p->ids[s][i];
      c->tok_pos[T] = (int32_t)i;
      T++;
    }
  }
  c->seq_off[p->nseq] = T;
  openblas_set_num_threads(1); /* parallelism comes from the engine's threads */
  const long nseq = (long)p->nseq, lT = (long)T;

  if (st->in_rows) {
#pragma omp parallel for num_threads(nt) schedule(static)
    for (long s = 0; s < nseq; s++)
      memcpy(c->x + c->seq_off[s] * H, st->in_rows[s], p->len[s] * (size_t)H * sizeof(float));
  } else {
#pragma omp parallel for num_threads(nt) schedule(static)
    for (long t = 0; t < lT; t++)
      embed_row(c->x + (size_t)t * H, m->word + (size_t)c->tok_id[t] * H,
                m->pos + (size_t)c->tok_pos[t] * H, m->type, m->emb_ln_g, m->emb_ln_b, H, eps);
  }
  for (int l = st->first; l < st->last; l++) layer_forward(c, m, p, l, T);
  if (st->pool) {
#pragma omp parallel for num_threads(nt) schedule(static)
    for (long s = 0; s < nseq; s++)
      mean_pool_l2(c->x + c->seq_off[s] * H, p->len[s], H, st->out_rows[s]);
  } else {
#pragma omp parallel for num_threads(nt) schedule(static)
    for (long s = 0; s < nseq; s++)
      memcpy(st->out_rows[s], c->x + c->seq_off[s] * H, p->len[s] * (size_t)H * sizeof(float));
  }
  return 0;
}
