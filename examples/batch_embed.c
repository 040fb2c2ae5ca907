/* examples/batch_embed.c - offline batch inference: embed every item of a
 * text corpus with all-MiniLM-L6-v2 through an actor pool of engine replicas.
 *
 * The corpus is cut into batches that stream through the pool with a bounded
 * number in flight (rd_pool_submit waits when every replica is busy), so
 * memory stays flat whatever the corpus size.  Results are written in corpus
 * order into a .npy file (float32, N x 384) next to a .rows.tsv file naming
 * each row's item; a .progress file makes an interrupted run resume where it
 * stopped.  --direct runs the same batches through one engine in this
 * process, with no runtime, to measure what the runtime costs.
 *
 *   batch_embed --corpus wordnet|fortunes|PATH --out OUT.npy [--replicas N]
 *               [--cpus-per-replica N] [--gpus-per-replica F] [--threads-per-replica N]
 *               [--batch N] [--inflight N] [--limit N] [--model DIR] [--direct] [--force]
 *               [--classify HEAD.bin]
 * --classify applies a classifier head saved by examples/train_allreduce to
 * every row once the embeddings are complete, into OUT.npy.labels.tsv. */
#include <math.h>
#include <raydist.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "corpus.h"
#include "embedder.h"
#include "engine.h"

/* ------------------------------------------------------ the replicas */

/* The replicas are Embedder actors (examples/embedder.c). */

/* ------------------------------------------------------------ output */

typedef struct output {
  int fd;
  char path[1024], progress[1100];
  size_t rows, dim, header;
  size_t done;   /* rows known to be on disk */
} output;

/* Progress: "rows_done total corpus_key\n", replaced atomically. */
static void progress_save(output *o, const char *key) {
  char tmp[1200];
  snprintf(tmp, sizeof(tmp), "%s.tmp", o->progress);
  FILE *f = fopen(tmp, "w");
  if (!f) ex_die(1, "cannot write %s: %s", tmp, strerror(errno));
  fprintf(f, "%zu %zu %s\n", o->done, o->rows, key);
  if (fflush(f) != 0 || fdatasync(fileno(f)) != 0 || fclose(f) != 0) ex_die(1, "cannot write %s", tmp);
  if (rename(tmp, o->progress) != 0) ex_die(1, "cannot replace %s: %s", o->progress, strerror(errno));
}

/* Open (or resume) the output; returns the first row still to compute. */
static size_t output_open(output *o, const char *path, size_t rows, size_t dim, const char *key, int force) {
  snprintf(o->path, sizeof(o->path), "%s", path);
  snprintf(o->progress, sizeof(o->progress), "%s.progress", path);
  o->rows = rows;
  o->dim = dim;
  char hdr[256];
  o->header = ex_npy_header(hdr, rows, dim);
  size_t start = 0;
  FILE *pf = force ? NULL : fopen(o->progress, "r");
  struct stat st;
  int exists = stat(path, &st) == 0;
  if (pf) {
    size_t done = 0, total = 0;
    char k[512] = "";
    if (fscanf(pf, "%zu %zu %511s", &done, &total, k) == 3 && total == rows && !strcmp(k, key) && done <= rows &&
        exists && (size_t)st.st_size == o->header + rows * dim * 4) {
      start = done;
      fprintf(stderr, "batch_embed: resuming %s at row %zu of %zu\n", path, done, rows);
    } else {
      fprintf(stderr, "batch_embed: %s does not match this run (other corpus, limit or batch); starting over\n",
              o->progress);
    }
    fclose(pf);
  } else if (exists && !force) {
    ex_die(3, "%s exists and has no progress file (a finished run?); use --force to overwrite it", path);
  }
  o->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (o->fd < 0) ex_die(2, "cannot write the output %s: %s", path, strerror(errno));
  if (start == 0) {
    if (ftruncate(o->fd, 0) != 0 || ftruncate(o->fd, (off_t)(o->header + rows * dim * 4)) != 0 ||
        ex_pwrite_all(o->fd, hdr, o->header, 0) != 0)
      ex_die(2, "cannot size the output %s: %s", path, strerror(errno));
  }
  o->done = start;
  progress_save(o, key);
  return start;
}

static void output_rows(output *o, size_t first, const float *rows, size_t n) {
  if (ex_pwrite_all(o->fd, rows, n * o->dim * 4, (off_t)(o->header + first * o->dim * 4)) != 0)
    ex_die(1, "writing %s failed: %s (rows before %zu are kept; rerun to resume)", o->path, strerror(errno), o->done);
}

/* ---------------------------------------------------------- classify */

/* A head saved by train_allreduce (docs/examples.md): "RDHEAD1\0", u32
 * version 1, dim, classes, flags; classes x 32-byte names; W[C][D]; b[C]. */
typedef struct head {
  uint32_t dim, classes;
  char (*names)[32];
  float *w, *b;
} head;

static void head_load(head *h, const char *path, size_t dim) {
  FILE *f = fopen(path, "rb");
  if (!f) ex_die(2, "cannot read the classifier head %s: %s", path, strerror(errno));
  char magic[8];
  uint32_t hdr[4];
  if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "RDHEAD1", 8) != 0 || fread(hdr, 4, 4, f) != 4 || hdr[0] != 1 ||
      hdr[1] != dim || hdr[2] < 2 || hdr[2] > 4096)
    ex_die(2, "%s is not a classifier head for %zu-d embeddings (bad magic, version or shape)", path, dim);
  h->dim = hdr[1];
  h->classes = hdr[2];
  h->names = calloc(h->classes, 32);
  h->w = malloc((size_t)h->classes * h->dim * sizeof(float));
  h->b = malloc(h->classes * sizeof(float));
  if (!h->names || !h->w || !h->b) ex_die(1, "out of memory");
  if (fread(h->names, 32, h->classes, f) != h->classes ||
      fread(h->w, sizeof(float), (size_t)h->classes * h->dim, f) != (size_t)h->classes * h->dim ||
      fread(h->b, sizeof(float), h->classes, f) != h->classes || fgetc(f) != EOF)
    ex_die(2, "%s is truncated or has trailing bytes", path);
  for (uint32_t c = 0; c < h->classes; c++) h->names[c][31] = 0;
  fclose(f);
}

/* Label every row of the finished output; returns rows labelled. */
static size_t classify_output(const head *h, const output *o, const ex_corpus *c, const char *path) {
  FILE *out = fopen(path, "w");
  if (!out) ex_die(2, "cannot write %s: %s", path, strerror(errno));
  fprintf(out, "row\titem\tlabel\tprob\n");
  int fd = open(o->path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) ex_die(1, "cannot read back %s: %s", o->path, strerror(errno));
  float row[1024];
  double *logit = malloc(h->classes * sizeof(double));
  size_t *count = calloc(h->classes, sizeof(size_t));
  if (!logit || !count || o->dim > 1024) ex_die(1, "out of memory");
  for (size_t r = 0; r < o->rows; r++) {
    if (pread(fd, row, o->dim * 4, (off_t)(o->header + r * o->dim * 4)) != (ssize_t)(o->dim * 4))
      ex_die(1, "cannot read row %zu of %s", r, o->path);
    uint32_t best = 0;
    double mx = -INFINITY, z = 0;
    for (uint32_t k = 0; k < h->classes; k++) {
      double v = h->b[k];
      for (size_t d = 0; d < o->dim; d++) v += (double)h->w[(size_t)k * h->dim + d] * row[d];
      logit[k] = v;
      if (v > mx) mx = v, best = k;
    }
    for (uint32_t k = 0; k < h->classes; k++) z += exp(logit[k] - mx);
    count[best]++;
    fprintf(out, "%zu\t%s\t%s\t%.4f\n", r, c->items[r].id, h->names[best], 1.0 / z);
  }
  close(fd);
  if (fclose(out) != 0) ex_die(1, "cannot write %s", path);
  printf("classified: rows=%zu classes=%u into %s:", o->rows, h->classes, path);
  for (uint32_t k = 0; k < h->classes; k++) printf(" %s=%zu", h->names[k], count[k]);
  printf("\n");
  free(logit);
  free(count);
  return o->rows;
}

/* ------------------------------------------------------------ driver */

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig) {
  (void)sig;
  interrupted = 1;
}

typedef struct opts {
  const char *corpus, *out, *model, *classify, *address;
  int replicas, cpus, threads, batch, inflight, direct, force;
  double gpus;
  size_t limit, stop_after;
} opts;

static void usage(void) {
  fprintf(stderr,
          "usage: batch_embed --corpus wordnet|fortunes|PATH --out OUT.npy [--replicas N] [--cpus-per-replica N]\n"
          "                   [--gpus-per-replica F] [--threads-per-replica N] [--batch N] [--inflight N]\n"
          "                   [--limit N] [--model DIR] [--direct] [--force] [--classify HEAD.bin]\n"
          "                   [--address IP:PORT|auto]   (a running cluster; default: an embedded one)\n");
  exit(2);
}

static void parse(int argc, char **argv, opts *o) {
  memset(o, 0, sizeof(*o));
  o->replicas = 2;
  o->cpus = 1;
  o->threads = 1;
  o->batch = 64;
  o->inflight = 2;
  o->model = ex_model_dir();
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define OPT(name) (!strcmp(a, name) && v && ++i)
    if (OPT("--corpus")) o->corpus = v;
    else if (OPT("--out")) o->out = v;
    else if (OPT("--model")) o->model = v;
    else if (OPT("--classify")) o->classify = v;
    else if (OPT("--replicas")) o->replicas = atoi(v);
    else if (OPT("--cpus-per-replica")) o->cpus = atoi(v);
    else if (OPT("--gpus-per-replica")) o->gpus = atof(v);
    else if (OPT("--threads-per-replica")) o->threads = atoi(v);
    else if (OPT("--batch")) o->batch = atoi(v);
    else if (OPT("--inflight")) o->inflight = atoi(v);
    else if (OPT("--limit")) o->limit = strtoull(v, NULL, 10);
    else if (OPT("--stop-after")) o->stop_after = strtoull(v, NULL, 10);   /* tests: simulate an interrupt */
    else if (!strcmp(a, "--direct")) o->direct = 1;
    else if (!strcmp(a, "--force")) o->force = 1;
    else if (OPT("--address")) o->address = v;
    else usage();
#undef OPT
  }
  if (!o->corpus || !o->out) usage();
  if (o->replicas < 1 || o->cpus < 0 || o->threads < 1 || o->batch < 1 || o->batch > EX_MAX_TEXTS || o->inflight < 1 ||
      o->gpus < 0)
    ex_die(2, "bad option value (replicas, batch 1..%d, threads and inflight must be positive)", EX_MAX_TEXTS);
}

typedef struct progress {
  int tty;
  double start, last;
  size_t total, base;
} progress;

static void progress_show(progress *p, size_t done, int final) {
  double t = ex_now();
  if (!final && t - p->last < (p->tty ? 0.2 : 5.0)) return;
  p->last = t;
  double rate = (double)(done - p->base) / (t - p->start + 1e-9);
  double eta = rate > 0 ? (double)(p->total - done) / rate : 0;
  if (p->tty) {
    int w = 30, fill = (int)((double)w * (double)done / (double)(p->total ? p->total : 1));
    char bar[40];
    for (int i = 0; i < w; i++) bar[i] = i < fill ? '=' : (i == fill ? '>' : ' ');
    bar[w] = 0;
    fprintf(stderr, "\r[%s] %5.1f%% %zu/%zu  %.0f items/s  ETA %.0fs ", bar, 100.0 * (double)done / (double)(p->total ? p->total : 1), done,
            p->total, rate, eta);
    if (final) fprintf(stderr, "\n");
  } else {
    fprintf(stderr, "progress: %zu/%zu items, %.0f items/s, ETA %.0f s\n", done, p->total, rate, eta);
  }
}

int main(int argc, char **argv) {
  ex_set_prog("batch_embed");
  opts o;
  parse(argc, argv, &o);
  /* in a worker this never returns: workers only serve the Embedder actor */
  rd_config cfg;
  rd_config_init(&cfg);
  cfg.address = o.address;   /* NULL: $RAYDIST_ADDRESS, else an embedded cluster */
  if (o.gpus > 0) cfg.num_gpus = rd_engine_device_count() > 0 ? -1 : 0;
  int r = o.direct ? 0 : rd_init(&cfg);
  if (r != 0) ex_die(1, "rd_init: %s", rd_strerror(r));

  head hd = {0};
  if (o.classify) head_load(&hd, o.classify, 384);   /* refuse a bad head before any work */
  ex_corpus c = {0};
  ex_corpus_load(&c, o.corpus, NULL);
  size_t total = o.limit && o.limit < c.n ? o.limit : c.n;
  size_t dim = 384;
  char key[600];
  snprintf(key, sizeof(key), "%s,limit=%zu,batch=%d", o.corpus, total, o.batch);
  for (char *k = key; *k; k++)
    if (*k == ' ') *k = '_';

  /* the rows file names each row; written once, small */
  char rows_path[1100];
  snprintf(rows_path, sizeof(rows_path), "%.1000s.rows.tsv", o.out);
  output out;
  size_t start = output_open(&out, o.out, total, dim, key, o.force);
  FILE *rf = fopen(rows_path, "w");
  if (!rf) ex_die(2, "cannot write %s: %s", rows_path, strerror(errno));
  fprintf(rf, "row\titem\n");
  for (size_t i = 0; i < total; i++) fprintf(rf, "%zu\t%s\n", i, c.items[i].id);
  if (fclose(rf) != 0) ex_die(2, "cannot write %s", rows_path);

  signal(SIGINT, on_sigint);
  signal(SIGTERM, on_sigint);
  progress pg = {isatty(2), ex_now(), 0, total, start};
  double t0 = ex_now();
  size_t nbatches_done = 0;
  double engine_seconds = 0;
  struct { int pid; double busy; size_t items; } rep[64];
  int nrep = 0;

  if (o.direct) {
    /* the same batches through one engine in this process */
    rd_engine_config ec;
    rd_engine_config_init(&ec);
    char err[512] = "";
    ec.model_dir = o.model;
    ec.threads = o.threads;
    ec.max_batch = EX_MAX_TEXTS;
    ec.errbuf = err;
    ec.errbuf_len = sizeof(err);
    rd_engine *e;
    if ((r = rd_engine_open(&ec, &e)) != 0) ex_die(2, "cannot open the engine: %s", err);
    float *buf = malloc((size_t)o.batch * dim * sizeof(float));
    const char *texts[EX_MAX_TEXTS];
    size_t lens[EX_MAX_TEXTS];
    for (size_t first = start; first < total && !interrupted; first += (size_t)o.batch) {
      size_t n = total - first < (size_t)o.batch ? total - first : (size_t)o.batch;
      for (size_t i = 0; i < n; i++) texts[i] = c.items[first + i].text, lens[i] = c.items[first + i].len;
      double s = ex_now();
      if (rd_engine_embed(e, texts, lens, n, buf) != 0) ex_die(1, "embedding failed: %s", rd_engine_last_error(e));
      engine_seconds += ex_now() - s;
      output_rows(&out, first, buf, n);
      out.done = first + n;
      if (++nbatches_done % 16 == 0) progress_save(&out, key);
      progress_show(&pg, out.done, 0);
      if (o.stop_after && nbatches_done >= o.stop_after) interrupted = 1;
    }
    free(buf);
    rd_engine_close(e);
  } else {
    rd_actor_opts ao;
    rd_actor_opts_init(&ao);
    ao.num_cpus = o.cpus;
    ao.num_gpus = o.gpus;
    rd_pool_opts po;
    rd_pool_opts_init(&po);
    po.min_replicas = po.max_replicas = o.replicas;
    po.max_inflight_per_replica = o.inflight;
    int use_gpu = o.gpus > 0;
    rd_pool *pool;
    r = rd_pool_create(Embedder,
                       RD_ARGS(rd_arg_bytes(o.model, strlen(o.model)), rd_arg_bytes(&o.threads, sizeof(int)),
                               rd_arg_bytes(&use_gpu, sizeof(int))),
                       &ao, &po, &pool);
    if (r != 0) ex_die(1, "cannot create the replicas: %s", rd_strerror(r));
    /* results are written strictly in order: a FIFO of the batches in flight */
    size_t window = (size_t)o.replicas * (size_t)o.inflight + 1;
    rd_ref *fifo = calloc(window, sizeof(rd_ref));
    size_t *fifo_first = calloc(window, sizeof(size_t));
    size_t head = 0, count = 0, next = start;
    while ((next < total && !interrupted) || count > 0) {
      if (next < total && !interrupted && count < window) {
        size_t n = total - next < (size_t)o.batch ? total - next : (size_t)o.batch;
        size_t bytes;
        uint8_t *b = ex_corpus_encode(&c, next, n, &bytes);
        rd_ref ref;
        r = rd_pool_submit(pool, Embedder_embed, RD_ARGS(rd_arg_bytes(b, bytes)), RD_TIMEOUT_INF, &ref);
        free(b);
        if (r != 0) ex_die(1, "submit failed: %s (rows before %zu are kept; rerun to resume)", rd_strerror(r), out.done);
        fifo[(head + count) % window] = ref;
        fifo_first[(head + count) % window] = next;
        count++;
        next += n;
        /* keep submitting while the oldest result is not ready yet */
        if (count < window && next < total && rd_wait(&fifo[head], 1, 1, 0, NULL) == 0) continue;
      }
      rd_buf res;
      r = rd_get(&fifo[head], 1, &res, RD_TIMEOUT_INF);
      if (r != 0)
        ex_die(1, "a batch failed: %.*s (rows before %zu are kept; rerun to resume)", (int)res.size,
            (const char *)res.data, out.done);
      ex_result_hdr h;
      const float *rows = ex_result_rows(&res, 0, 0, dim, &h, "a replica");
      output_rows(&out, fifo_first[head], rows, h.n);
      out.done = fifo_first[head] + h.n;
      engine_seconds += h.seconds;
      int k = 0;
      while (k < nrep && rep[k].pid != h.pid) k++;
      if (k == nrep && nrep < 64) rep[nrep++].pid = h.pid, rep[k].busy = 0, rep[k].items = 0;
      if (k < 64) rep[k].busy += h.seconds, rep[k].items += h.n;
      rd_buf_release(&res);
      rd_ref_release(fifo[head]);
      head = (head + 1) % window;
      count--;
      if (++nbatches_done % 16 == 0) progress_save(&out, key);
      progress_show(&pg, out.done, 0);
      if (o.stop_after && nbatches_done >= o.stop_after) interrupted = 1;
    }
    free(fifo);
    free(fifo_first);
    rd_pool_destroy(pool);
  }
  double wall = ex_now() - t0;
  if (fdatasync(out.fd) != 0) ex_die(1, "cannot sync %s: %s", out.path, strerror(errno));
  close(out.fd);
  progress_show(&pg, out.done, 1);
  size_t items = out.done - start;
  if (out.done < total) {
    progress_save(&out, key);
    fprintf(stderr, "batch_embed: interrupted after %zu of %zu rows; run the same command again to resume\n", out.done,
            total);
  } else {
    unlink(out.progress);
    if (o.classify) {
      char lp[1100];
      snprintf(lp, sizeof(lp), "%.1000s.labels.tsv", o.out);
      classify_output(&hd, &out, &c, lp);
    }
  }
  printf("summary: items=%zu seconds=%.3f items_per_s=%.1f per_replica_engine_items_per_s=%.1f mode=%s replicas=%d batch=%d\n",
         items, wall, (double)items / (wall > 0 ? wall : 1), engine_seconds > 0 ? (double)items / engine_seconds : 0,
         o.direct ? "direct" : "pool", o.direct ? 1 : o.replicas, o.batch);
  for (int k = 0; k < nrep; k++)
    printf("replica pid=%d items=%zu busy=%.3fs utilisation=%.0f%%\n", rep[k].pid, rep[k].items, rep[k].busy,
           100.0 * rep[k].busy / (wall > 0 ? wall : 1));
  ex_corpus_free(&c);
  free(hd.names), free(hd.w), free(hd.b);
  if (!o.direct) rd_shutdown();
  return out.done < total ? 130 : 0;
}
