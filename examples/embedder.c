/* examples/embedder.c - the Embedder actor and the helpers the engine
 * examples share (see embedder.h). */
#include "embedder.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"

static const char *prog = "example";

void ex_set_prog(const char *name) { prog = name; }

const char *ex_model_dir(void) {
  const char *d = getenv("RD_MODEL_DIR");
  return d && *d ? d : RD_DEFAULT_MODEL_DIR;
}

double ex_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void ex_die(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", prog);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(code);
}

uint8_t *ex_texts_encode(const char *const *texts, const size_t *lens, size_t n, size_t *size) {
  size_t bytes = 4 + 4 * n;
  for (size_t i = 0; i < n; i++) bytes += lens[i];
  uint8_t *p = malloc(bytes);
  if (!p) ex_die(1, "out of memory");
  uint32_t cnt = (uint32_t)n;
  memcpy(p, &cnt, 4);
  size_t off = 4 + 4 * n;
  for (size_t i = 0; i < n; i++) {
    uint32_t l = (uint32_t)lens[i];
    memcpy(p + 4 + 4 * i, &l, 4);
    memcpy(p + off, texts[i], l);
    off += l;
  }
  *size = bytes;
  return p;
}

size_t ex_texts_count(const uint8_t *p, size_t size) {
  uint32_t cnt = 0;
  if (size >= 4) memcpy(&cnt, p, 4);
  return cnt;
}

int ex_texts_decode(const uint8_t *p, size_t size, const char **texts, size_t *lens, size_t max, size_t *n) {
  uint32_t cnt;
  if (size < 4) return -1;
  memcpy(&cnt, p, 4);
  if (cnt > max || size < 4 + 4ull * cnt) return -1;
  size_t off = 4 + 4ull * cnt;
  for (uint32_t i = 0; i < cnt; i++) {
    uint32_t l;
    memcpy(&l, p + 4 + 4ull * i, 4);
    if (l > size - off) return -1;
    texts[i] = (const char *)p + off;
    lens[i] = l;
    off += l;
  }
  *n = cnt;
  return 0;
}

/* ------------------------------------------------------------ fortunes */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int ex_fortune_files(const char *dir, char ***names) {
  DIR *d = opendir(dir);
  if (!d) ex_die(2, "fortunes are not installed (%s): apt-get install fortunes-min", dir);
  size_t cap = 64, n = 0;
  char **v = malloc(cap * sizeof(char *));
  if (!v) ex_die(1, "out of memory");
  struct dirent *e;
  while ((e = readdir(d))) {
    const char *dot = strrchr(e->d_name, '.');
    if (e->d_name[0] == '.' || (dot && (!strcmp(dot, ".dat") || !strcmp(dot, ".u8")))) continue;
    if (n == cap && !(v = realloc(v, (cap *= 2) * sizeof(char *)))) ex_die(1, "out of memory");
    if (!(v[n++] = strdup(e->d_name))) ex_die(1, "out of memory");
  }
  closedir(d);
  qsort(v, n, sizeof(char *), cmp_str);
  *names = v;
  return (int)n;
}

static int attribution(const char *line) {
  while (*line == ' ' || *line == '\t') line++;
  return line[0] == '-' && line[1] == '-';
}

long ex_fortune_cookies(const char *path, int strip, void (*fn)(void *ctx, int k, const char *text, size_t len),
                        void *ctx) {
  struct stat st;
  FILE *f = stat(path, &st) == 0 && S_ISREG(st.st_mode) ? fopen(path, "r") : NULL;
  if (!f) return -1;
  char *buf = NULL, *line = NULL;
  size_t blen = 0, cap = 0;
  ssize_t n;
  long k = 0;
  for (;;) {
    n = getline(&line, &cap, f);
    if (n <= 0 || !strcmp(line, "%\n")) {
      if (blen) fn(ctx, (int)k, buf, blen);
      k++;
      blen = 0;
      if (n <= 0) break;
      continue;
    }
    if (strip && attribution(line)) continue;
    if (!(buf = realloc(buf, blen + (size_t)n + 1))) ex_die(1, "out of memory");
    memcpy(buf + blen, line, (size_t)n);
    blen += (size_t)n;
  }
  free(buf);
  free(line);
  fclose(f);
  return k;
}

/* ------------------------------------------------------------ output */

size_t ex_npy_header(char *buf, size_t rows, size_t dim) {
  char dict[200];
  int n = snprintf(dict, sizeof(dict), "{'descr': '<f4', 'fortran_order': False, 'shape': (%zu, %zu), }", rows, dim);
  size_t total = 10 + (size_t)n + 1;
  size_t padded = (total + 63) / 64 * 64;
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  uint16_t hl = (uint16_t)(padded - 10);
  memcpy(buf + 8, &hl, 2);
  memcpy(buf + 10, dict, (size_t)n);
  memset(buf + 10 + n, ' ', padded - 10 - (size_t)n - 1);
  buf[padded - 1] = '\n';
  return padded;
}

int ex_pwrite_all(int fd, const void *p, size_t n, off_t off) {
  const char *c = p;
  while (n) {
    ssize_t w = pwrite(fd, c, n, off);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    c += w;
    n -= (size_t)w;
    off += w;
  }
  return 0;
}

/* ------------------------------------------------------------ statistics */

void ex_series_add(ex_series *s, double x) {
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 256;
    s->v = realloc(s->v, s->cap * sizeof(double));
    if (!s->v) ex_die(1, "out of memory");
  }
  s->v[s->n++] = x;
}

static int cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double ex_percentile(ex_series *s, double p) {
  if (!s->n) return 0;
  qsort(s->v, s->n, sizeof(double), cmp_dbl);
  size_t rank = (size_t)(p * (double)s->n + 0.999999);
  if (rank < 1) rank = 1;
  if (rank > s->n) rank = s->n;
  return s->v[rank - 1];
}

/* ------------------------------------------------------------ the actor */

const float *ex_result_rows(const rd_buf *r, int rc, size_t n, size_t dim, ex_result_hdr *out, const char *what) {
  if (rc != 0) ex_die(1, "%s failed: %.*s", what, (int)r->size, (const char *)r->data);
  ex_result_hdr h;
  if (r->size < sizeof(h)) ex_die(1, "%s returned a malformed result", what);
  memcpy(&h, r->data, sizeof(h));
  if ((n && h.n != n) || h.dim != dim || r->size != sizeof(h) + (size_t)h.n * dim * sizeof(float))
    ex_die(1, "%s returned a malformed result", what);
  if (out) *out = h;
  return (const float *)((const uint8_t *)r->data + sizeof(h));
}

typedef struct embedder {
  rd_engine *engine;
  /* the node's /metrics shows them (rd_metric_*; NULL: not kept) */
  rd_metric *sentences, *batch_seconds;
  const char *device;   /* their tag: "device=cpu" or "device=gpu" */
} embedder;

static int embedder_init(rd_call *call, void **state) {
  rd_buf a0, a1, a2;
  if (rd_call_nargs(call) != 3 || rd_arg(call, 0, &a0) || rd_arg(call, 1, &a1) || rd_arg(call, 2, &a2) ||
      a1.size != sizeof(int) || a2.size != sizeof(int))
    return rd_call_fail(call, "Embedder takes (model_dir, threads, use_gpu)");
  char dir[1024];
  snprintf(dir, sizeof(dir), "%.*s", (int)a0.size, (const char *)a0.data);
  int threads, gpu;
  memcpy(&threads, a1.data, sizeof(int));
  memcpy(&gpu, a2.data, sizeof(int));
  embedder *e = calloc(1, sizeof(*e));
  if (!e) return rd_call_fail(call, "out of memory");
  rd_engine_config cfg;
  rd_engine_config_init(&cfg);
  char err[512] = "";
  cfg.model_dir = dir;
  cfg.threads = threads;
  cfg.device = gpu ? 0 : -1;   /* CUDA_VISIBLE_DEVICES holds the granted GPU */
  cfg.max_batch = EX_MAX_TEXTS;
  cfg.errbuf = err;
  cfg.errbuf_len = sizeof(err);
  int r = rd_engine_open(&cfg, &e->engine);
  if (r != 0) {
    free(e);
    return rd_call_fail(call, "cannot open the engine on %s: %s (%s)", gpu ? "the GPU" : "the CPU", err,
                        rd_strerror(r));
  }
  static const double bounds[] = {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5};
  if (rd_metric_counter("embedder_sentences_total", "Sentences the Embedder actors embedded.", &e->sentences) != 0)
    e->sentences = NULL;
  if (rd_metric_histogram("embedder_batch_seconds", "Time of one Embedder.embed batch in the engine.", bounds, 8,
                          &e->batch_seconds) != 0)
    e->batch_seconds = NULL;
  e->device = gpu ? "device=gpu" : "device=cpu";
  *state = e;
  return 0;
}

static void embedder_fini(void *state) {
  embedder *e = state;
  if (!e) return;
  rd_engine_close(e->engine);
  free(e);
}

RD_ACTOR_CLASS(Embedder, embedder_init, embedder_fini)

RD_ACTOR_METHOD(Embedder, embed) {
  embedder *e = state;
  rd_buf in;
  if (rd_arg(call, 0, &in) != 0) return rd_call_fail(call, "no texts");
  const char *texts[EX_MAX_TEXTS];
  size_t lens[EX_MAX_TEXTS];
  size_t n;
  if (ex_texts_decode(in.data, in.size, texts, lens, EX_MAX_TEXTS, &n) != 0)
    return rd_call_fail(call, "malformed list of texts");
  size_t dim = rd_engine_dim(e->engine);
  uint8_t *out = rd_return_alloc(call, 0, sizeof(ex_result_hdr) + n * dim * sizeof(float));
  if (!out) return rd_call_fail(call, "cannot allocate the result");
  ex_result_hdr h = {(uint32_t)n, (uint32_t)dim, (int32_t)getpid(), 0, 0};
  double t0 = ex_now();
  int r = rd_engine_embed(e->engine, texts, lens, n, (float *)(out + sizeof(h)));
  h.seconds = ex_now() - t0;
  if (r != 0) return rd_call_fail(call, "embedding failed: %s", rd_engine_last_error(e->engine));
  if (e->sentences) rd_metric_inc(e->sentences, (double)n, e->device);   /* figures only: never fail the call */
  if (e->batch_seconds) rd_metric_observe(e->batch_seconds, h.seconds, e->device);
  memcpy(out, &h, sizeof(h));
  return 0;
}
