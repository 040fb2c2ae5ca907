/* engine.c - rd_engine: open a model, tokenize, bucket by length, run passes on
 * the CPU or CUDA back end, and account for the work (see engine.h).
 *
 * Everything a call needs is allocated at open and sized by the config, so
 * rd_engine_embed allocates nothing; bad input yields RD_EINVAL and a message,
 * never a crash. */
#include "engine.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "model.h"
#include "raydist/error.h"
#include "wordpiece.h"

#define RD__ENGINE_ERRLEN 512

struct rd_engine {
  rd__bert model;
  rd_wordpiece *wp;
  int device, threads;
  size_t max_batch, max_seq, max_tokens, dim;
  rd__cpu *cpu;
  rd__gpu *gpu;
  int32_t *ids;            /* max_batch x max_seq token ids */
  size_t *lens;            /* max_batch */
  size_t *order;           /* max_batch: indices sorted by length */
  const int32_t **pass_ids;
  size_t *pass_len;
  float **pass_out;
  const float **pass_in;   /* max_batch: hidden rows in, for stage passes */
  const int32_t **all_ids; /* max_batch: per-text id pointers */
  rd_engine_stats st;
  char err[RD__ENGINE_ERRLEN];
};

static int seterr(rd_engine *e, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int seterr(rd_engine *e, int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->err, sizeof e->err, fmt, ap);
  va_end(ap);
  return rc;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void rd_engine_config_init(rd_engine_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->device = -1;
  cfg->threads = 1;
  cfg->max_batch = 256;
  cfg->max_seq_len = 256;
}

int rd_engine_device_count(void) {
#ifdef RD_ENGINE_CUDA
  return rd__gpu_device_count();
#else
  return 0;
#endif
}

static int open_fail(const rd_engine_config *cfg, rd_engine *e, int rc) {
  if (cfg->errbuf && cfg->errbuf_len) snprintf(cfg->errbuf, cfg->errbuf_len, "%s", e->err);
  rd_engine_close(e);
  return rc;
}

int rd_engine_open(const rd_engine_config *cfg, rd_engine **out) {
  if (!out) return RD_EINVAL;
  *out = NULL;
  if (!cfg) return RD_EINVAL;
  rd_engine *e = calloc(1, sizeof *e);
  if (!e) return RD_ENOMEM;
  const char *dir = cfg->model_dir ? cfg->model_dir : getenv("RD_MODEL_DIR");
  if (!dir || !*dir)
    return open_fail(cfg, e, seterr(e, RD_EINVAL, "no model directory: set model_dir or RD_MODEL_DIR "
                                                  "(scripts/fetch_model.sh downloads all-MiniLM-L6-v2)"));
  e->device = cfg->device;
  e->threads = cfg->threads > 0 ? cfg->threads : 1;
  e->max_batch = cfg->max_batch ? cfg->max_batch : 256;
  e->max_seq = cfg->max_seq_len ? cfg->max_seq_len : 256;
  if (cfg->device < -1)
    return open_fail(cfg, e, seterr(e, RD_EINVAL, "device %d: use -1 for the CPU or a CUDA ordinal", cfg->device));
  if (e->max_seq < 2 || e->max_batch > (1u << 20))
    return open_fail(cfg, e, seterr(e, RD_EINVAL, "max_seq_len must be >= 2 and max_batch <= 2^20"));
  if ((unsigned)cfg->precision > RD_ENGINE_BF16 || (unsigned)cfg->attention > RD_ENGINE_ATTN_FLASH)
    return open_fail(cfg, e, seterr(e, RD_EINVAL, "unknown precision %d or attention %d", (int)cfg->precision,
                                    (int)cfg->attention));
#ifndef RD_ENGINE_CUDA
  if (cfg->device >= 0)
    return open_fail(cfg, e, seterr(e, RD_ENOTSUP, "device %d requested but this build has no CUDA path "
                                                   "(configure with nvcc and -DRD_WITH_CUDA=ON)", cfg->device));
#endif

  char path[4096], err[RD__ENGINE_ERRLEN - 64];
  snprintf(path, sizeof path, "%s/vocab.txt", dir);
  int rc = rd_wordpiece_load(path, &e->wp, err, sizeof err);
  if (rc)
    return open_fail(cfg, e, seterr(e, rc, "%s%s", err, rc == RD_ENOENT ? " (run scripts/fetch_model.sh)" : ""));
  rc = rd__bert_load(dir, &e->model, err, sizeof err);
  if (rc)
    return open_fail(cfg, e, seterr(e, rc, "%s%s", err, rc == RD_ENOENT ? " (run scripts/fetch_model.sh)" : ""));
  const rd__bert_config *mc = &e->model.c;
  if ((size_t)mc->vocab < rd_wordpiece_vocab_size(e->wp))
    return open_fail(cfg, e, seterr(e, RD_EINVAL, "vocab.txt has %zu tokens but the model only %d embeddings",
                                    rd_wordpiece_vocab_size(e->wp), mc->vocab));
  if (e->max_seq > (size_t)mc->max_pos)
    return open_fail(cfg, e, seterr(e, RD_EINVAL, "max_seq_len %zu exceeds the model's %d positions", e->max_seq, mc->max_pos));
  e->dim = (size_t)mc->hidden;
  e->max_tokens = cfg->max_tokens_per_pass ? cfg->max_tokens_per_pass : (cfg->device >= 0 ? 32768 : 2048);
  if (e->max_tokens < ((e->max_seq + 7) & ~(size_t)7)) e->max_tokens = (e->max_seq + 7) & ~(size_t)7;

  size_t nb = e->max_batch ? e->max_batch : 1;
  e->ids = malloc(nb * e->max_seq * sizeof *e->ids);
  e->lens = malloc(nb * sizeof *e->lens);
  e->order = malloc(nb * sizeof *e->order);
  e->pass_ids = malloc(nb * sizeof *e->pass_ids);
  e->pass_len = malloc(nb * sizeof *e->pass_len);
  e->pass_out = malloc(nb * sizeof *e->pass_out);
  e->pass_in = malloc(nb * sizeof *e->pass_in);
  e->all_ids = malloc(nb * sizeof *e->all_ids);
  if (!e->ids || !e->lens || !e->order || !e->pass_ids || !e->pass_len || !e->pass_out || !e->pass_in || !e->all_ids)
    return open_fail(cfg, e, seterr(e, RD_ENOMEM, "cannot allocate buffers for max_batch %zu", e->max_batch));

  if (cfg->device < 0) {
    rc = rd__cpu_open(&e->model, e->threads, e->max_tokens, e->max_seq, &e->cpu, err, sizeof err);
    if (rc) return open_fail(cfg, e, seterr(e, rc, "%s", err));
  } else {
#ifdef RD_ENGINE_CUDA
    /* in a raydist worker holding a GPU share, the share's memory budget is
     * a limit too (the smaller wins) */
    size_t limit = cfg->gpu_mem_limit;
    int from_share = 0;
    const char *budget = getenv("RAYDIST_GPU_MEMORY_BYTES");
    if (budget && *budget) {
      unsigned long long b = strtoull(budget, NULL, 10);
      if (b && (!limit || b < limit)) {
        limit = (size_t)b;
        from_share = 1;
      }
    }
    rd__gpu_params prm = {.device = cfg->device,
                          .bf16 = cfg->precision == RD_ENGINE_BF16,
                          .max_tokens = e->max_tokens,
                          .max_seq = e->max_seq,
                          .max_batch = nb < e->max_tokens ? nb : e->max_tokens,
                          .mem_limit = limit,
                          .mem_limit_from_share = from_share,
                          .attention = (int)cfg->attention};
    rc = rd__gpu_open(&e->model, &prm, &e->gpu, err, sizeof err);
    if (rc) return open_fail(cfg, e, seterr(e, rc, "%s", err));
#endif
  }
  e->err[0] = 0;
  *out = e;
  return 0;
}

void rd_engine_close(rd_engine *e) {
  if (!e) return;
#ifdef RD_ENGINE_CUDA
  rd__gpu_close(e->gpu);
#endif
  rd__cpu_close(e->cpu);
  rd__bert_unload(&e->model);
  rd_wordpiece_free(e->wp);
  free(e->ids);
  free(e->lens);
  free(e->order);
  free(e->pass_ids);
  free(e->pass_len);
  free(e->pass_out);
  free(e->pass_in);
  free(e->all_ids);
  free(e);
}

const char *rd_engine_last_error(const rd_engine *e) { return e ? e->err : "no engine"; }
size_t rd_engine_dim(const rd_engine *e) { return e ? e->dim : 0; }
size_t rd_engine_max_seq_len(const rd_engine *e) { return e ? e->max_seq : 0; }

int rd_engine_tokenize(rd_engine *e, const char *text, size_t len, int32_t *ids, size_t cap, size_t *n_out) {
  if (!e) return RD_EINVAL;
  e->err[0] = 0;
  if (!ids || !n_out || (!text && len)) return seterr(e, RD_EINVAL, "tokenize: NULL argument");
  size_t lim = cap < e->max_seq ? cap : e->max_seq;
  if (lim < 2) return seterr(e, RD_EINVAL, "tokenize: room for %zu ids, need at least 2", cap);
  int rc = rd_wordpiece_encode(e->wp, text ? text : "", len, lim, ids, n_out);
  if (rc) return seterr(e, rc, "tokenize failed");
  if (lim < e->max_seq && *n_out == lim) {
    /* may have been cut short by cap rather than by max_seq: check */
    size_t full;
    int32_t *tmp = e->ids; /* engine scratch, not in use between calls */
    rc = rd_wordpiece_encode(e->wp, text ? text : "", len, e->max_seq, tmp, &full);
    if (!rc && full > cap) return seterr(e, RD_EINVAL, "tokenize: %zu ids do not fit in %zu", full, cap);
  }
  return 0;
}

/* Length class of a sequence for GPU bucketing: padding within a bucket stays
 * under about a third. */
static size_t len_class(size_t L) {
  static const size_t b[] = {16, 32, 48, 64, 96, 128, 160, 192, 256, 320, 384, 448, 512};
  for (size_t i = 0; i < sizeof b / sizeof b[0]; i++)
    if (L <= b[i]) return b[i];
  return (L + 63) & ~(size_t)63;
}

static int cmp_len_desc(const void *a, const void *b, void *arg) {
  const size_t *lens = arg, x = *(const size_t *)a, y = *(const size_t *)b;
  if (lens[x] != lens[y]) return lens[x] < lens[y] ? 1 : -1;
  return (x > y) - (x < y);
}

/* What run() computes: the part of the encoder (rd__stage), where each
 * sequence's input rows come from and where its result goes. */
typedef struct run_io {
  const float *in;       /* NULL: from token ids; else sequence i's hidden rows at in + i * in_stride */
  size_t in_stride;
  int first, last, pool; /* encoder layers [first, last), then pool or not */
  float *out;            /* sequence i's embedding (pool) or hidden rows at out + i * out_stride */
  size_t out_stride;
} run_io;

/* The one path every call takes: sort the n sequences by length, cut them
 * into passes and run io's stage on each, on the CPU or the GPU.  ids is only
 * read when io->in is NULL. */
static int run(rd_engine *e, const int32_t *const *ids, const size_t *lens, size_t n, const run_io *io) {
  double t0 = now_s();
  for (size_t i = 0; i < n; i++) e->order[i] = i;
  qsort_r(e->order, n, sizeof *e->order, cmp_len_desc, (void *)lens);
  const int gpu = e->gpu != NULL;
  const double layer_share = (double)(io->last - io->first) / (double)e->model.c.layers;
  size_t i = 0;
  int rc = 0;
  while (i < n && !rc) {
    size_t first = e->order[i], Lmax = lens[first], cls = len_class(Lmax), cnt = 0, tok = 0;
    if (gpu) Lmax = (Lmax + 7) & ~(size_t)7; /* tensor-core friendly leading dimensions */
    while (i < n) {
      size_t s = e->order[i], L = lens[s];
      if (gpu) {
        if (len_class(L) != cls || (cnt + 1) * Lmax > e->max_tokens) break;
      } else if (tok + L > e->max_tokens) {
        break;
      }
      e->pass_ids[cnt] = io->in ? NULL : ids[s];
      e->pass_in[cnt] = io->in ? io->in + s * io->in_stride : NULL;
      e->pass_len[cnt] = L;
      e->pass_out[cnt] = io->out + s * io->out_stride;
      cnt++;
      tok += L;
      i++;
    }
    rd__pass p = {.nseq = cnt, .max_len = Lmax, .tokens = tok, .ids = e->pass_ids, .len = e->pass_len};
    rd__stage st = {.in_rows = io->in ? e->pass_in : NULL, .first = io->first, .last = io->last,
                    .pool = io->pool, .out_rows = e->pass_out};
    if (gpu) {
#ifdef RD_ENGINE_CUDA
      char err[RD__ENGINE_ERRLEN - 32];
      rc = rd__gpu_submit(e->gpu, &p, &st, err, sizeof err);
      if (rc) seterr(e, rc, "GPU: %s", err);
#endif
    } else {
      rc = rd__cpu_forward(e->cpu, &e->model, &p, &st);
      if (rc) seterr(e, rc, "CPU forward pass failed");
    }
    e->st.passes++;
    e->st.tokens += tok;
    e->st.padded_tokens += gpu ? cnt * Lmax : tok;
    e->st.gemm_flops += layer_share * rd__bert_gemm_flops(&e->model.c, &p, gpu ? Lmax : 0);
  }
#ifdef RD_ENGINE_CUDA
  if (gpu) {
    char err[RD__ENGINE_ERRLEN - 32];
    int rc2 = rd__gpu_finish(e->gpu, err, sizeof err);
    if (rc2 && !rc) rc = seterr(e, rc2, "GPU: %s", err);
  }
#endif
  if (!rc && io->pool) e->st.sentences += n;
  e->st.seconds += now_s() - t0;
  return rc;
}

/* The whole encoder: embedding layer, every layer, pooling. */
static int run_full(rd_engine *e, const int32_t *const *ids, const size_t *lens, size_t n, float *out) {
  run_io io = {.first = 0, .last = e->model.c.layers, .pool = 1, .out = out, .out_stride = e->dim};
  return run(e, ids, lens, n, &io);
}

int rd_engine_embed(rd_engine *e, const char *const *texts, const size_t *lens, size_t n, float *out) {
  if (!e) return RD_EINVAL;
  e->err[0] = 0;
  if (n == 0) return 0;
  if (!texts || !out) return seterr(e, RD_EINVAL, "embed: NULL texts or output");
  if (n > e->max_batch)
    return seterr(e, RD_EINVAL, "embed: batch of %zu texts exceeds max_batch %zu", n, e->max_batch);
  double t0 = now_s();
  for (size_t i = 0; i < n; i++) {
    if (!texts[i]) return seterr(e, RD_EINVAL, "embed: text %zu is NULL", i);
    size_t len = lens ? lens[i] : strlen(texts[i]);
    int32_t *dst = e->ids + i * e->max_seq;
    int rc = rd_wordpiece_encode(e->wp, texts[i], len, e->max_seq, dst, &e->lens[i]);
    if (rc) return seterr(e, rc, "embed: tokenizing text %zu failed", i);
    e->all_ids[i] = dst;
  }
  double t1 = now_s();
  int rc = run_full(e, e->all_ids, e->lens, n, out);
  e->st.seconds += t1 - t0;
  return rc;
}

/* Validates caller-given token sequences (what, for messages); the longest
 * goes to *longest. */
static int check_ids(rd_engine *e, const char *what, const int32_t *const *ids, const size_t *n_ids, size_t n,
                     size_t *longest) {
  if (n > e->max_batch) return seterr(e, RD_EINVAL, "%s: batch of %zu exceeds max_batch %zu", what, n, e->max_batch);
  *longest = 0;
  for (size_t i = 0; i < n; i++) {
    if (!ids[i] || n_ids[i] < 1 || n_ids[i] > e->max_seq)
      return seterr(e, RD_EINVAL, "%s: sequence %zu has %zu ids (1..%zu allowed)", what, i, n_ids[i], e->max_seq);
    for (size_t k = 0; k < n_ids[i]; k++)
      if (ids[i][k] < 0 || ids[i][k] >= e->model.c.vocab)
        return seterr(e, RD_EINVAL, "%s: id %d out of range in sequence %zu", what, ids[i][k], i);
    if (n_ids[i] > *longest) *longest = n_ids[i];
  }
  return 0;
}

int rd_engine_embed_ids(rd_engine *e, const int32_t *const *ids, const size_t *n_ids, size_t n, float *out) {
  if (!e) return RD_EINVAL;
  e->err[0] = 0;
  if (n == 0) return 0;
  if (!ids || !n_ids || !out) return seterr(e, RD_EINVAL, "embed_ids: NULL argument");
  size_t longest;
  int rc = check_ids(e, "embed_ids", ids, n_ids, n, &longest);
  return rc ? rc : run_full(e, ids, n_ids, n, out);
}

/* ------------------------------------------------------------- stages */

#define RD__HIDDEN_MAGIC "RDHS"
#define RD__HIDDEN_VERSION 1u

static size_t hidden_data_offset(size_t n) { return (sizeof(rd_engine_hidden_hdr) + 4 * n + 63) & ~(size_t)63; }

int rd_engine_num_layers(const rd_engine *e) { return e ? e->model.c.layers : 0; }

size_t rd_engine_hidden_size(const rd_engine *e, size_t n, size_t seq) {
  return e ? hidden_data_offset(n) + n * seq * e->dim * sizeof(float) : 0;
}

int rd_engine_hidden_check(rd_engine *e, const void *buf, size_t size, rd_engine_hidden_hdr *out) {
  if (!e) return RD_EINVAL;
  e->err[0] = 0;
  rd_engine_hidden_hdr h;
  if (!buf) return seterr(e, RD_EINVAL, "hidden state: NULL buffer");
  if (size < sizeof h) return seterr(e, RD_EINVAL, "hidden state: %zu bytes, shorter than its header", size);
  if ((uintptr_t)buf % 4) return seterr(e, RD_EINVAL, "hidden state: buffer not 4-byte aligned");
  memcpy(&h, buf, sizeof h);
  if (memcmp(h.magic, RD__HIDDEN_MAGIC, 4) != 0 || h.version != RD__HIDDEN_VERSION)
    return seterr(e, RD_EINVAL, "hidden state: bad magic or version (not an RDHS v1 buffer)");
  if (h.dim != e->dim || h.layers_total != (uint32_t)e->model.c.layers || h.layers_done > h.layers_total)
    return seterr(e, RD_EINVAL, "hidden state: dim %u with %u of %u layers done, this model has dim %zu and %d layers",
                  h.dim, h.layers_done, h.layers_total, e->dim, e->model.c.layers);
  if (h.n > e->max_batch || h.seq < 1 || h.seq > e->max_seq)
    return seterr(e, RD_EINVAL, "hidden state: %u sequences of %u rows (at most %zu of %zu allowed)", h.n, h.seq,
                  e->max_batch, e->max_seq);
  if (h.data_offset != hidden_data_offset(h.n) || size != rd_engine_hidden_size(e, h.n, h.seq))
    return seterr(e, RD_EINVAL, "hidden state: %zu bytes with data at %u, expected %zu at %zu", size, h.data_offset,
                  rd_engine_hidden_size(e, h.n, h.seq), hidden_data_offset(h.n));
  const uint8_t *lp = (const uint8_t *)buf + sizeof h;
  for (uint32_t i = 0; i < h.n; i++) {
    uint32_t l;
    memcpy(&l, lp + 4 * (size_t)i, 4);
    if (l < 1 || l > h.seq) return seterr(e, RD_EINVAL, "hidden state: sequence %u has %u rows of %u", i, l, h.seq);
  }
  if (out) *out = h;
  return 0;
}

/* Writes header and lens of a state and zeroes its rows (padding rows stay 0). */
static void hidden_init(rd_engine *e, void *out, size_t n, size_t seq, int layers_done, const size_t *lens) {
  rd_engine_hidden_hdr h = {.version = RD__HIDDEN_VERSION, .n = (uint32_t)n, .seq = (uint32_t)seq,
                            .dim = (uint32_t)e->dim, .layers_done = (uint32_t)layers_done,
                            .layers_total = (uint32_t)e->model.c.layers,
                            .data_offset = (uint32_t)hidden_data_offset(n)};
  memcpy(h.magic, RD__HIDDEN_MAGIC, 4);
  uint8_t *p = out;
  memcpy(p, &h, sizeof h);
  memset(p + sizeof h, 0, h.data_offset - sizeof h);
  for (size_t i = 0; i < n; i++) {
    uint32_t l = (uint32_t)lens[i];
    memcpy(p + sizeof h + 4 * i, &l, 4);
  }
  memset(p + h.data_offset, 0, n * seq * e->dim * sizeof(float));
}

int rd_engine_stage_embed(rd_engine *e, const int32_t *const *ids, const size_t *n_ids, size_t n, int last_layer,
                          void *out, size_t cap) {
  if (!e) return RD_EINVAL;
  e->err[0] = 0;
  if ((n && (!ids || !n_ids)) || !out) return seterr(e, RD_EINVAL, "stage_embed: NULL argument");
  if ((uintptr_t)out % 4) return seterr(e, RD_EINVAL, "stage_embed: output not 4-byte aligned");
  if (last_layer < 0 || last_layer > e->model.c.layers)
    return seterr(e, RD_EINVAL, "stage_embed: last layer %d outside 0..%d", last_layer, e->model.c.layers);
  size_t seq = 0;
  int rc = check_ids(e, "stage_embed", ids, n_ids, n, &seq);
  if (rc) return rc;
  if (!n) seq = 1;
  size_t need = rd_engine_hidden_size(e, n, seq);
  if (cap < need) return seterr(e, RD_EINVAL, "stage_embed: output of %zu bytes, the state needs %zu", cap, need);
  hidden_init(e, out, n, seq, last_layer, n_ids);
  run_io io = {.first = 0, .last = last_layer, .pool = 0,
               .out = (float *)((uint8_t *)out + hidden_data_offset(n)), .out_stride = seq * e->dim};
  return n ? run(e, ids, n_ids, n, &io) : 0;
}

/* Reads the state's lens into e->lens and sets *io's input from it. */
static int stage_input(rd_engine *e, const char *what, const void *in, size_t in_size, rd_engine_hidden_hdr *h,
                       run_io *io) {
  int rc = rd_engine_hidden_check(e, in, in_size, h);
  if (rc) {
    char why[RD__ENGINE_ERRLEN];
    memcpy(why, e->err, sizeof why);
    return seterr(e, rc, "%s: %.400s", what, why);
  }
  const uint8_t *lp = (const uint8_t *)in + sizeof *h;
  for (uint32_t i = 0; i < h->n; i++) {
    uint32_t l;
    memcpy(&l, lp + 4 * (size_t)i, 4);
    e->lens[i] = l;
  }
  io->in = (const float *)((const uint8_t *)in + h->data_offset);
  io->in_stride = (size_t)h->seq * e->dim;
  io->first = (int)h->layers_done;
  return 0;
}

int rd_engine_stage_layers(rd_engine *e, const void *in, size_t in_size, int last_layer, void *out, size_t cap) {
  if (!e) return RD_EINVAL;
  e->err[0] = 0;
  if (!out) return seterr(e, RD_EINVAL, "stage_layers: NULL output");
  if ((uintptr_t)out % 4) return seterr(e, RD_EINVAL, "stage_layers: output not 4-byte aligned");
  rd_engine_hidden_hdr h;
  run_io io = {0};
  int rc = stage_input(e, "stage_layers", in, in_size, &h, &io);
  if (rc) return rc;
  if (last_layer < (int)h.layers_done || last_layer > e->model.c.layers)
    return seterr(e, RD_EINVAL, "stage_layers: last layer %d outside %u..%d", last_layer, h.layers_done,
                  e->model.c.layers);
  if (cap < in_size) return seterr(e, RD_EINVAL, "stage_layers: output of %zu bytes, the state needs %zu", cap, in_size);
  if (out != in) hidden_init(e, out, h.n, h.seq, (int)h.layers_done, e->lens);
  io.last = last_layer;
  io.pool = 0;
  io.out = (float *)((uint8_t *)out + h.data_offset);
  io.out_stride = io.in_stride;
  rc = h.n ? run(e, NULL, e->lens, h.n, &io) : 0;
  if (!rc) {
    uint32_t done = (uint32_t)last_layer;
    memcpy((uint8_t *)out + offsetof(rd_engine_hidden_hdr, layers_done), &done, sizeof done);
  }
  return rc;
}

int rd_engine_stage_pool(rd_engine *e, const void *in, size_t in_size, float *out) {
  if (!e) return RD_EINVAL;
  e->err[0] = 0;
  if (!out) return seterr(e, RD_EINVAL, "stage_pool: NULL output");
  rd_engine_hidden_hdr h;
  run_io io = {0};
  int rc = stage_input(e, "stage_pool", in, in_size, &h, &io);
  if (rc) return rc;
  io.last = e->model.c.layers;
  io.pool = 1;
  io.out = out;
  io.out_stride = e->dim;
  return h.n ? run(e, NULL, e->lens, h.n, &io) : 0;
}

int rd_engine_stats_get(const rd_engine *e, rd_engine_stats *out) {
  if (!e || !out) return RD_EINVAL;
  *out = e->st;
  out->host_bytes = e->model.owned_bytes + (e->cpu ? rd__cpu_bytes(e->cpu) : 0) +
                    e->max_batch * (e->max_seq * sizeof(int32_t) + 3 * sizeof(size_t) + 4 * sizeof(void *));
#ifdef RD_ENGINE_CUDA
  if (e->gpu) {
    out->device_bytes = rd__gpu_device_bytes(e->gpu);
    out->host_bytes += rd__gpu_host_bytes(e->gpu);
    out->attention = rd__gpu_attention(e->gpu);
    out->fused_attention = out->attention != RD_ENGINE_ATTN_GEMM;
  }
#endif
  return 0;
}

void rd_engine_stats_reset(rd_engine *e) {
  if (e) memset(&e->st, 0, sizeof e->st);
}
