/* examples/pipeline_parallel.c - pipeline-parallel batch inference: the
 * all-MiniLM-L6-v2 encoder split into stages, one actor per stage, with
 * several batches flowing through the stages at once.
 *
 * Stage 0 tokenizes a batch and runs the embedding layer and the first
 * encoder layers; each later stage runs the next layers on the hidden state
 * the previous one returned; the last stage also pools and normalises.  The
 * driver passes each stage's result to the next stage's call as an object
 * reference, without fetching it, so while stage 1 works on batch k, stage 0
 * already works on batch k+1 (up to --inflight batches in the pipe).  The
 * embeddings are written in corpus order into a .npy file (float32, N x 384)
 * and a .rows.tsv file, as examples/batch_embed writes them, and they are bit
 * for bit what one Embedder actor gives for the same batches.  --bench then
 * runs the same batches through one Embedder actor and prints both rates.
 * Nothing here may run before rd_init(): this program is also its own workers.
 *
 *   pipeline_parallel --corpus wordnet|fortunes|PATH --out OUT.npy [--split K[,K2...]]
 *                     [--batch N] [--inflight N] [--limit N] [--threads-per-stage N]
 *                     [--cpus-per-stage F] [--gpus-per-stage F] [--model DIR] [--bench] */
#include <raydist.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "corpus.h"
#include "embedder.h"
#include "engine.h"

#define MAX_STAGES 8
#define MAX_BATCH 256    /* texts per batch: a hidden state of 256 x 256 tokens is 100 MB */
#define MAX_LOG 65536    /* calls whose start and end a stage remembers */

/* ------------------------------------------------------------ the stages */

/* Constructor argument 1 (argument 0 is the model directory). */
typedef struct stage_cfg {
  int32_t first, last;   /* encoder layers [first, last); last == model layers: also pool */
  int32_t threads, use_gpu;
} stage_cfg;

typedef struct stage {
  rd_engine *engine;
  stage_cfg cfg;
  int layers;
  size_t max_seq;
  int32_t *ids;          /* MAX_BATCH x max_seq */
  size_t n_ids[MAX_BATCH];
  const int32_t *idp[MAX_BATCH];
  double *log;           /* start, end of each call, monotonic seconds (one clock for all processes) */
  size_t ncalls;
  double busy;
} stage;

static void stage_fini(void *state) {
  stage *s = state;
  if (!s) return;
  rd_engine_close(s->engine);
  free(s->ids);
  free(s->log);
  free(s);
}

static int stage_init(rd_call *call, void **state) {
  rd_buf a0, a1;
  if (rd_call_nargs(call) != 2 || rd_arg(call, 0, &a0) || rd_arg(call, 1, &a1) || a1.size != sizeof(stage_cfg))
    return rd_call_fail(call, "Stage takes (model_dir, stage_cfg)");
  stage *s = calloc(1, sizeof(*s));
  if (!s) return rd_call_fail(call, "out of memory");
  memcpy(&s->cfg, a1.data, sizeof(stage_cfg));
  char dir[1024], err[512] = "";
  snprintf(dir, sizeof(dir), "%.*s", (int)a0.size, (const char *)a0.data);
  rd_engine_config cfg;
  rd_engine_config_init(&cfg);
  cfg.model_dir = dir;
  cfg.threads = s->cfg.threads;
  cfg.device = s->cfg.use_gpu ? 0 : -1;   /* CUDA_VISIBLE_DEVICES holds the granted GPU */
  cfg.max_batch = EX_MAX_TEXTS;           /* as the Embedder: the same passes, the same bits */
  cfg.errbuf = err;
  cfg.errbuf_len = sizeof(err);
  int r = rd_engine_open(&cfg, &s->engine);
  if (r != 0) {
    free(s);
    return rd_call_fail(call, "cannot open the engine: %s (%s)", err, rd_strerror(r));
  }
  s->layers = rd_engine_num_layers(s->engine);
  s->max_seq = rd_engine_max_seq_len(s->engine);
  if (s->cfg.first < 0 || s->cfg.first >= s->cfg.last || s->cfg.last > s->layers) {
    int first = s->cfg.first, last = s->cfg.last, layers = s->layers;
    stage_fini(s);
    return rd_call_fail(call, "stage layers [%d, %d) do not fit the model's %d layers", first, last, layers);
  }
  s->ids = s->cfg.first == 0 ? malloc(MAX_BATCH * s->max_seq * sizeof(int32_t)) : NULL;
  s->log = malloc(2 * MAX_LOG * sizeof(double));
  if ((s->cfg.first == 0 && !s->ids) || !s->log) {
    stage_fini(s);
    return rd_call_fail(call, "out of memory");
  }
  *state = s;
  return 0;
}

RD_ACTOR_CLASS(Stage, stage_init, stage_fini)

/* Stage 0: texts -> hidden state after layers [0, last). */
static int stage_first(rd_call *call, stage *s, const rd_buf *in) {
  const char *texts[MAX_BATCH];
  size_t lens[MAX_BATCH], n, seq = 1;
  if (ex_texts_decode(in->data, in->size, texts, lens, MAX_BATCH, &n) != 0)
    return rd_call_fail(call, "malformed list of texts (at most %d)", MAX_BATCH);
  for (size_t i = 0; i < n; i++) {
    s->idp[i] = s->ids + i * s->max_seq;
    if (rd_engine_tokenize(s->engine, texts[i], lens[i], s->ids + i * s->max_seq, s->max_seq, &s->n_ids[i]) != 0)
      return rd_call_fail(call, "tokenizing text %zu failed: %s", i, rd_engine_last_error(s->engine));
    if (s->n_ids[i] > seq) seq = s->n_ids[i];
  }
  size_t size = rd_engine_hidden_size(s->engine, n, seq);
  void *out = rd_return_alloc(call, 0, size);
  if (!out) return rd_call_fail(call, "cannot allocate a %zu-byte hidden state", size);
  if (rd_engine_stage_embed(s->engine, s->idp, s->n_ids, n, s->cfg.last, out, size) != 0)
    return rd_call_fail(call, "stage [0, %d) failed: %s", s->cfg.last, rd_engine_last_error(s->engine));
  return 0;
}

/* Later stages: hidden state after `first` layers -> after `last`, or, in the
 * last stage, embeddings (ex_result_hdr + n x dim floats, as Embedder.embed). */
static int stage_next(rd_call *call, stage *s, const rd_buf *in) {
  rd_engine_hidden_hdr h;
  if (rd_engine_hidden_check(s->engine, in->data, in->size, &h) != 0)
    return rd_call_fail(call, "bad hidden state: %s", rd_engine_last_error(s->engine));
  if ((int)h.layers_done != s->cfg.first)
    return rd_call_fail(call, "stage [%d, %d) got a state after %u layers", s->cfg.first, s->cfg.last, h.layers_done);
  if (s->cfg.last < s->layers) {
    void *out = rd_return_alloc(call, 0, in->size);
    if (!out) return rd_call_fail(call, "cannot allocate a %zu-byte hidden state", in->size);
    if (rd_engine_stage_layers(s->engine, in->data, in->size, s->cfg.last, out, in->size) != 0)
      return rd_call_fail(call, "stage [%d, %d) failed: %s", s->cfg.first, s->cfg.last, rd_engine_last_error(s->engine));
    return 0;
  }
  size_t dim = rd_engine_dim(s->engine);
  uint8_t *out = rd_return_alloc(call, 0, sizeof(ex_result_hdr) + h.n * dim * sizeof(float));
  if (!out) return rd_call_fail(call, "cannot allocate the result");
  ex_result_hdr rh = {h.n, (uint32_t)dim, (int32_t)getpid(), 0, 0};
  if (rd_engine_stage_pool(s->engine, in->data, in->size, (float *)(out + sizeof(rh))) != 0)
    return rd_call_fail(call, "stage [%d, %d) failed: %s", s->cfg.first, s->cfg.last, rd_engine_last_error(s->engine));
  memcpy(out, &rh, sizeof(rh));
  return 0;
}

RD_ACTOR_METHOD(Stage, run) {
  stage *s = state;
  rd_buf in;
  if (rd_arg(call, 0, &in) != 0) return rd_call_fail(call, "no input");
  double t0 = ex_now();
  int r = s->cfg.first == 0 ? stage_first(call, s, &in) : stage_next(call, s, &in);
  double t1 = ex_now();
  s->busy += t1 - t0;
  if (s->ncalls < MAX_LOG) s->log[2 * s->ncalls] = t0, s->log[2 * s->ncalls + 1] = t1;
  s->ncalls++;
  return r;
}

/* The stats of a stage: this header, then min(calls, MAX_LOG) (start, end)
 * pairs, call k of this stage being batch k of the run. */
typedef struct stage_stats {
  int32_t pid, first, last, pad;
  uint64_t calls;
  double busy;
} stage_stats;

RD_ACTOR_METHOD(Stage, stats) {
  stage *s = state;
  size_t logged = s->ncalls < MAX_LOG ? s->ncalls : MAX_LOG;
  uint8_t *out = rd_return_alloc(call, 0, sizeof(stage_stats) + 2 * logged * sizeof(double));
  if (!out) return rd_call_fail(call, "cannot allocate the result");
  stage_stats st = {(int32_t)getpid(), s->cfg.first, s->cfg.last, 0, s->ncalls, s->busy};
  memcpy(out, &st, sizeof(st));
  memcpy(out + sizeof(st), s->log, 2 * logged * sizeof(double));
  return 0;
}

/* ------------------------------------------------------------- the driver */

typedef struct opts {
  const char *corpus, *out, *model, *split;
  int batch, inflight, threads, bench;
  double cpus, gpus;
  size_t limit;
} opts;

static void usage(void) {
  fprintf(stderr,
          "usage: pipeline_parallel --corpus wordnet|fortunes|PATH --out OUT.npy [--split K[,K2...]] [--batch N]\n"
          "                         [--inflight N] [--limit N] [--threads-per-stage N] [--cpus-per-stage F]\n"
          "                         [--gpus-per-stage F] [--model DIR] [--bench]\n");
  exit(2);
}

static void parse(int argc, char **argv, opts *o) {
  memset(o, 0, sizeof(*o));
  o->split = "3";
  o->batch = 64;
  o->inflight = 4;
  o->threads = 1;
  o->cpus = 1;
  o->model = ex_model_dir();
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define OPT(name) (!strcmp(a, name) && v && ++i)
    if (OPT("--corpus")) o->corpus = v;
    else if (OPT("--out")) o->out = v;
    else if (OPT("--model")) o->model = v;
    else if (OPT("--split")) o->split = v;
    else if (OPT("--batch")) o->batch = atoi(v);
    else if (OPT("--inflight")) o->inflight = atoi(v);
    else if (OPT("--limit")) o->limit = strtoull(v, NULL, 10);
    else if (OPT("--threads-per-stage")) o->threads = atoi(v);
    else if (OPT("--cpus-per-stage")) o->cpus = atof(v);
    else if (OPT("--gpus-per-stage")) o->gpus = atof(v);
    else if (!strcmp(a, "--bench")) o->bench = 1;
    else usage();
#undef OPT
  }
  if (!o->corpus || !o->out) usage();
  if (o->batch < 1 || o->batch > MAX_BATCH || o->inflight < 1 || o->threads < 1 || o->cpus < 0 || o->gpus < 0)
    ex_die(2, "bad option value (batch 1..%d; inflight and threads positive; cpus and gpus not negative)", MAX_BATCH);
}

/* "3" or "2,4": the split points, strictly increasing in 1..layers-1. */
static int parse_split(const char *spec, int layers, int *cut) {
  int n = 0;
  const char *p = spec;
  for (;;) {
    char *end;
    long k = strtol(p, &end, 10);
    if (end == p || k < 1 || k >= layers || (n && k <= cut[n - 1]) || n == MAX_STAGES - 1)
      ex_die(2, "--split %s: give increasing layer numbers in 1..%d, at most %d of them", spec, layers - 1,
             MAX_STAGES - 1);
    cut[n++] = (int)k;
    if (*end == 0) break;
    if (*end != ',') ex_die(2, "--split %s: give layer numbers separated by commas", spec);
    p = end + 1;
  }
  return n;
}

/* The model's layer count, opening the model once here: a missing or broken
 * model is reported before any actor starts. */
static int model_layers(const char *dir) {
  rd_engine_config cfg;
  rd_engine_config_init(&cfg);
  char err[512] = "";
  cfg.model_dir = dir;
  cfg.max_batch = 1;
  cfg.errbuf = err;
  cfg.errbuf_len = sizeof(err);
  rd_engine *e;
  int r = rd_engine_open(&cfg, &e);
  if (r != 0) ex_die(2, "cannot open the model: %s", err);
  int layers = rd_engine_num_layers(e);
  rd_engine_close(e);
  return layers;
}

typedef struct output {
  int fd;
  const char *path;
  size_t header, dim;
} output;

static void output_open(output *o, const char *path, size_t rows, size_t dim) {
  char hdr[256];
  o->path = path;
  o->dim = dim;
  o->header = ex_npy_header(hdr, rows, dim);
  o->fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (o->fd < 0) ex_die(2, "cannot write the output %s: %s", path, strerror(errno));
  if (ex_pwrite_all(o->fd, hdr, o->header, 0) != 0 || ftruncate(o->fd, (off_t)(o->header + rows * dim * 4)) != 0)
    ex_die(2, "cannot write the output %s: %s", path, strerror(errno));
}

static void output_rows(output *o, size_t first, const float *rows, size_t n) {
  if (ex_pwrite_all(o->fd, rows, n * o->dim * 4, (off_t)(o->header + first * o->dim * 4)) != 0)
    ex_die(1, "writing %s failed: %s", o->path, strerror(errno));
}

/* One batch in the pipe: the last stage's result and where it goes. */
typedef struct inflight {
  rd_ref ref;
  size_t first, n;
} inflight;

/* Stream every batch through the stages; returns the wall seconds. */
static double run_pipeline(const opts *o, const ex_corpus *c, size_t total, const rd_actor *st, int nst, output *out) {
  size_t window = (size_t)o->inflight;
  inflight *fifo = calloc(window, sizeof(inflight));
  if (!fifo) ex_die(1, "out of memory");
  size_t head = 0, count = 0, next = 0;
  double t0 = ex_now();
  while (next < total || count) {
    if (next < total && count < window) {
      size_t n = total - next < (size_t)o->batch ? total - next : (size_t)o->batch, bytes;
      uint8_t *b = ex_corpus_encode(c, next, n, &bytes);
      rd_ref prev;
      if (rd_actor_call(st[0], Stage_run, RD_ARGS(rd_arg_bytes(b, bytes)), NULL, &prev) != 0)
        ex_die(1, "cannot call stage 0");
      free(b);
      for (int k = 1; k < nst; k++) {   /* the state goes on by reference, never through the driver */
        rd_ref ref;
        if (rd_actor_call(st[k], Stage_run, RD_ARGS(rd_arg_ref(prev)), NULL, &ref) != 0)
          ex_die(1, "cannot call stage %d", k);
        rd_ref_release(prev);   /* the pending call keeps the object alive */
        prev = ref;
      }
      fifo[(head + count) % window] = (inflight){prev, next, n};
      count++;
      next += n;
      continue;
    }
    inflight *f = &fifo[head];
    rd_buf res;
    int r = rd_get(&f->ref, 1, &res, RD_TIMEOUT_INF);
    output_rows(out, f->first, ex_result_rows(&res, r, f->n, out->dim, NULL, "a pipeline batch"), f->n);
    rd_buf_release(&res);
    rd_ref_release(f->ref);
    head = (head + 1) % window;
    count--;
  }
  free(fifo);
  return ex_now() - t0;
}

/* How the stages overlapped: batches k for which stage s+1 of batch k ran
 * while stage s of batch k+1 ran, and the time at least two stages were busy. */
static void report_stages(const rd_actor *st, int nst, double wall) {
  rd_ref refs[MAX_STAGES];
  rd_buf bufs[MAX_STAGES];
  for (int k = 0; k < nst; k++)
    if (rd_actor_call(st[k], Stage_stats, RD_NO_ARGS, NULL, &refs[k]) != 0) ex_die(1, "cannot call Stage.stats");
  if (rd_get(refs, (size_t)nst, bufs, RD_TIMEOUT_INF) != 0) ex_die(1, "Stage.stats failed");
  const double *log[MAX_STAGES];
  size_t nlog[MAX_STAGES];
  for (int k = 0; k < nst; k++) {
    stage_stats s;
    memcpy(&s, bufs[k].data, sizeof(s));
    log[k] = (const double *)((const uint8_t *)bufs[k].data + sizeof(s));
    nlog[k] = (bufs[k].size - sizeof(s)) / (2 * sizeof(double));
    printf("stage %d: layers=[%d,%d)%s pid=%d calls=%llu busy=%.3fs utilisation=%.0f%%\n", k, s.first, s.last,
           k == 0 ? "+embeddings" : (k == nst - 1 ? "+pool" : ""), s.pid, (unsigned long long)s.calls, s.busy,
           100.0 * s.busy / (wall > 0 ? wall : 1));
  }
  size_t overlapped = 0, pairs = 0;
  for (int k = 0; k + 1 < nst; k++)
    for (size_t b = 0; b + 1 < nlog[k] && b < nlog[k + 1]; b++) {
      const double *late = log[k + 1] + 2 * b, *early = log[k] + 2 * (b + 1);   /* stage k+1 of b, stage k of b+1 */
      pairs++;
      if (late[0] < early[1] && early[0] < late[1]) overlapped++;
    }
  /* time with two or more stages busy: sweep over every start and end */
  size_t ev_n = 0;
  for (int k = 0; k < nst; k++) ev_n += 2 * nlog[k];
  double (*ev)[2] = malloc((ev_n ? ev_n : 1) * sizeof(*ev));
  if (!ev) ex_die(1, "out of memory");
  size_t e = 0;
  for (int k = 0; k < nst; k++)
    for (size_t b = 0; b < nlog[k]; b++) {
      ev[e][0] = log[k][2 * b], ev[e++][1] = 1;
      ev[e][0] = log[k][2 * b + 1], ev[e++][1] = -1;
    }
  for (size_t i = 1; i < ev_n; i++)   /* insertion sort by time, ends first on ties */
    for (size_t j = i; j > 0 && (ev[j][0] < ev[j - 1][0] || (ev[j][0] == ev[j - 1][0] && ev[j][1] < ev[j - 1][1])); j--) {
      double t0 = ev[j][0], t1 = ev[j][1];
      ev[j][0] = ev[j - 1][0], ev[j][1] = ev[j - 1][1];
      ev[j - 1][0] = t0, ev[j - 1][1] = t1;
    }
  double both = 0;
  int busy = 0;
  for (size_t i = 0; i < ev_n; i++) {
    if (busy >= 2 && i) both += ev[i][0] - ev[i - 1][0];
    busy += (int)ev[i][1];
  }
  free(ev);
  printf("overlap: batches_overlapped=%zu of %zu (stage s+1 of batch k ran while stage s of batch k+1 ran) "
         "two_or_more_stages_busy_s=%.3f of wall %.3f\n", overlapped, pairs, both, wall);
  for (int k = 0; k < nst; k++) {
    rd_buf_release(&bufs[k]);
    rd_ref_release(refs[k]);
  }
}

/* --bench: the same batches through one Embedder actor (what batch_embed
 * does with --replicas 1), compared row by row with the pipeline's output. */
static void bench_single(const opts *o, const ex_corpus *c, size_t total, const output *out, double pipe_wall,
                         int nst) {
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.num_cpus = o->cpus;
  ao.num_gpus = o->gpus;
  rd_pool_opts po;
  rd_pool_opts_init(&po);
  po.min_replicas = po.max_replicas = 1;
  int use_gpu = o->gpus > 0;
  rd_pool *pool;
  int r = rd_pool_create(Embedder,
                         RD_ARGS(rd_arg_bytes(o->model, strlen(o->model)), rd_arg_bytes(&o->threads, sizeof(int)),
                                 rd_arg_bytes(&use_gpu, sizeof(int))),
                         &ao, &po, &pool);
  if (r != 0) ex_die(1, "cannot create the Embedder: %s", rd_strerror(r));
  size_t bytes, dim = out->dim;
  uint8_t *b = ex_corpus_encode(c, 0, 1, &bytes);   /* warm up: the constructor opens the engine */
  rd_ref ref;
  rd_buf res;
  if (rd_pool_submit(pool, Embedder_embed, RD_ARGS(rd_arg_bytes(b, bytes)), RD_TIMEOUT_INF, &ref) != 0)
    ex_die(1, "cannot call the Embedder");
  free(b);
  r = rd_get(&ref, 1, &res, RD_TIMEOUT_INF);
  ex_result_rows(&res, r, 1, dim, NULL, "the Embedder");
  rd_buf_release(&res);
  rd_ref_release(ref);

  size_t window = 3, head = 0, count = 0, next = 0;   /* batch_embed: replicas x inflight(2) + 1 */
  inflight fifo[3];
  float *mine = malloc((size_t)o->batch * dim * sizeof(float));
  if (!mine) ex_die(1, "out of memory");
  double worst = 0, t0 = ex_now(), wall = 0;
  size_t differ = 0;
  while (next < total || count) {
    if (next < total && count < window) {
      size_t n = total - next < (size_t)o->batch ? total - next : (size_t)o->batch;
      b = ex_corpus_encode(c, next, n, &bytes);
      if (rd_pool_submit(pool, Embedder_embed, RD_ARGS(rd_arg_bytes(b, bytes)), RD_TIMEOUT_INF, &ref) != 0)
        ex_die(1, "cannot call the Embedder");
      free(b);
      fifo[(head + count) % window] = (inflight){ref, next, n};
      count++;
      next += n;
      continue;
    }
    inflight *f = &fifo[head];
    r = rd_get(&f->ref, 1, &res, RD_TIMEOUT_INF);
    const float *rows = ex_result_rows(&res, r, f->n, dim, NULL, "the Embedder");
    if (pread(out->fd, mine, f->n * dim * 4, (off_t)(out->header + f->first * dim * 4)) != (ssize_t)(f->n * dim * 4))
      ex_die(1, "cannot read back %s", out->path);
    for (size_t i = 0; i < f->n * dim; i++) {
      double d = rows[i] > mine[i] ? (double)rows[i] - mine[i] : (double)mine[i] - rows[i];
      if (d > worst) worst = d;
    }
    differ += memcmp(rows, mine, f->n * dim * 4) != 0;
    rd_buf_release(&res);
    rd_ref_release(f->ref);
    head = (head + 1) % window;
    count--;
  }
  wall = ex_now() - t0;
  free(mine);
  rd_pool_destroy(pool);
  printf("bench: items=%zu batch=%d pipeline_items_per_s=%.1f (%d stages x %.2g CPUs) "
         "single_actor_items_per_s=%.1f (1 Embedder x %.2g CPUs) speedup=%.2f\n",
         total, o->batch, (double)total / pipe_wall, nst, o->cpus, (double)total / wall, o->cpus, wall / pipe_wall);
  printf("bench: single actor vs pipeline max_abs_diff=%.3g batches_differing=%zu identical=%s\n", worst, differ,
         differ ? "no" : "yes");
}

int main(int argc, char **argv) {
  ex_set_prog("pipeline_parallel");
  opts o;
  parse(argc, argv, &o);
  rd_config cfg;
  rd_config_init(&cfg);
  if (o.gpus > 0) cfg.num_gpus = rd_engine_device_count() > 0 ? -1 : 0;
  /* in a worker this never returns: workers serve the Stage and Embedder actors */
  int r = rd_init(&cfg);
  if (r != 0) ex_die(1, "rd_init: %s", rd_strerror(r));

  int layers = model_layers(o.model);
  int cut[MAX_STAGES];
  int ncut = parse_split(o.split, layers, cut), nst = ncut + 1;
  ex_corpus c = {0};
  ex_corpus_load(&c, o.corpus, NULL);
  size_t total = o.limit && o.limit < c.n ? o.limit : c.n, dim = 384;

  rd_node_info ni;
  if ((r = rd_node_info_get(&ni)) != 0) ex_die(1, "rd_node_info_get: %s", rd_strerror(r));
  if (o.cpus * nst > ni.num_cpus + 1e-9 || o.gpus * nst > ni.num_gpus + 1e-9)
    ex_die(2, "%d stages x (%.2g CPUs, %.2g GPUs) do not fit the node's %.0f CPUs and %.0f GPUs "
           "(lower --cpus-per-stage or --gpus-per-stage)", nst, o.cpus, o.gpus, ni.num_cpus, ni.num_gpus);

  output out;
  output_open(&out, o.out, total, dim);
  char rows_path[1100];
  snprintf(rows_path, sizeof(rows_path), "%.1000s.rows.tsv", o.out);
  FILE *rf = fopen(rows_path, "w");
  if (!rf) ex_die(2, "cannot write %s: %s", rows_path, strerror(errno));
  fprintf(rf, "row\titem\n");
  for (size_t i = 0; i < total; i++) fprintf(rf, "%zu\t%s\n", i, c.items[i].id);
  if (fclose(rf) != 0) ex_die(2, "cannot write %s", rows_path);

  rd_actor st[MAX_STAGES];
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.num_cpus = o.cpus;
  ao.num_gpus = o.gpus;
  for (int k = 0; k < nst; k++) {
    stage_cfg sc = {k ? cut[k - 1] : 0, k < ncut ? cut[k] : layers, o.threads, o.gpus > 0};
    r = rd_actor_create(Stage, RD_ARGS(rd_arg_bytes(o.model, strlen(o.model)), rd_arg_bytes(&sc, sizeof(sc))), &ao,
                        &st[k]);
    if (r != 0) ex_die(1, "cannot create stage %d: %s", k, rd_strerror(r));
  }
  /* wait for the constructors (each opens its engine) before the clock starts */
  for (int k = 0; k < nst; k++) {
    rd_ref ref;
    rd_buf b;
    if (rd_actor_call(st[k], Stage_stats, RD_NO_ARGS, NULL, &ref) != 0) ex_die(1, "cannot call stage %d", k);
    if (rd_get(&ref, 1, &b, RD_TIMEOUT_INF) != 0) ex_die(1, "stage %d cannot start: %.*s", k, (int)b.size, (const char *)b.data);
    rd_buf_release(&b);
    rd_ref_release(ref);
  }
  printf("pipeline: stages=%d split=%s batch=%d inflight=%d items=%zu\n", nst, o.split, o.batch, o.inflight, total);
  fflush(stdout);
  double wall = run_pipeline(&o, &c, total, st, nst, &out);
  if (fdatasync(out.fd) != 0) ex_die(1, "cannot sync %s: %s", out.path, strerror(errno));
  report_stages(st, nst, wall);
  printf("summary: items=%zu seconds=%.3f items_per_s=%.1f mode=pipeline stages=%d batch=%d\n", total, wall,
         (double)total / (wall > 0 ? wall : 1), nst, o.batch);
  fflush(stdout);
  for (int k = 0; k < nst; k++)
    if (rd_actor_kill(st[k], 1) != 0) fprintf(stderr, "pipeline_parallel: could not stop stage %d\n", k);
  if (o.bench) bench_single(&o, &c, total, &out, wall, nst);
  close(out.fd);
  ex_corpus_free(&c);
  rd_shutdown();
  return 0;
}
