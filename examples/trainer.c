/* examples/trainer.c - data-parallel training with actors, shared by
 * train_allreduce (CPU workers) and seed_trainer (a worker per GPU): a
 * softmax classifier head (dim -> C classes) over all-MiniLM-L6-v2
 * embeddings, trained by N Trainer actors that each hold a shard of the data.
 *
 * The data set is fortunes-min: a cookie's label is the fortune file it came
 * from.  The driver shuffles it with a fixed seed, holds out 20% for testing
 * and deals both splits round-robin to the workers, which embed their shards
 * with the engine in their constructors.  Each step every worker returns the
 * gradient of the cross-entropy summed over its minibatch, the driver
 * averages them (the all-reduce) and sends the same update to every worker,
 * which applies it with Adam: the workers' weights must stay bit-identical,
 * and the driver checks a checksum of them every epoch.  With --allreduce
 * ring the workers sum their gradients among themselves instead, in a
 * collective group (rd_allreduce), each applies the mean itself, and the
 * driver only sends each epoch's steps and reads the losses.  The trained head is
 * saved in the format documented in docs/examples.md. */
#include "trainer.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "embedder.h"
#include "engine.h"

static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void shuffle(uint32_t *a, size_t n, uint64_t seed) {
  uint64_t s = seed;
  for (size_t i = n; i > 1; i--) {
    size_t j = (size_t)(rng_next(&s) % i);
    uint32_t t = a[i - 1];
    a[i - 1] = a[j];
    a[j] = t;
  }
}

/* ------------------------------------------------------------ wire formats */

/* Texts travel as in examples/batch_embed.c: u32 count, count x u32
 * lengths, then the texts back to back. */
static int texts_decode(const uint8_t *p, size_t size, const char ***texts, size_t **lens, size_t *n) {
  size_t cnt = ex_texts_count(p, size);
  *texts = calloc(cnt ? cnt : 1, sizeof(char *));
  *lens = calloc(cnt ? cnt : 1, sizeof(size_t));
  if (!*texts || !*lens) return -1;
  return ex_texts_decode(p, size, *texts, *lens, cnt, n);
}

/* Hyperparameters: a constructor argument, the same for every worker but
 * its rank. */
typedef struct train_cfg {
  uint32_t classes, rank, batch, threads, use_gpu, pad;
  uint64_t seed;
  double lr, beta1, beta2, eps, weight_decay;
} train_cfg;

/* grad's argument and result (the result header is followed by
 * classes*dim + classes floats: the gradient summed over the minibatch). */
typedef struct grad_arg {
  uint32_t epoch, step;
} grad_arg;
typedef struct grad_hdr {
  uint32_t count, dim, classes, correct;
  double loss_sum;
} grad_hdr;

/* info's result. */
typedef struct worker_info {
  int32_t pid;
  uint32_t ntrain, ntest, dim;
  double embed_seconds;
} worker_info;

/* evaluate's result. */
typedef struct eval_result {
  uint32_t count, correct;
  double loss_sum;
} eval_result;

/* checksum's result. */
typedef struct checksum_result {
  uint64_t fnv;     /* FNV-1a 64 of the parameter bytes */
  uint64_t steps;   /* updates applied */
} checksum_result;

/* ------------------------------------------------------------ the workers */

typedef struct trainer {
  train_cfg cfg;
  size_t dim, classes, nparams;   /* nparams = classes*dim (W, row per class) + classes (b) */
  float *xtr, *xte;               /* embeddings, row-major */
  uint32_t *ytr, *yte;
  size_t ntr, nte;
  float *w, *m, *v;               /* parameters and Adam moments */
  uint64_t steps;
  uint32_t *perm;                 /* this epoch's order of the training shard */
  uint32_t perm_epoch;
  double embed_seconds;
  rd_collective *group;           /* --allreduce ring: the workers' group */
  double *ring;                   /* its all-reduce buffer: the gradient, then count, correct, loss */
  float *mean;                    /* the step's mean gradient, from ring */
} trainer;

/* A ring step's result: the global minibatch's figures (the same in every
 * worker). */
typedef struct step_result {
  double count, correct, loss_sum;
} step_result;

static void trainer_free(trainer *t) {
  if (!t) return;
  rd_collective_leave(t->group);
  free(t->ring), free(t->mean);
  free(t->xtr), free(t->xte), free(t->ytr), free(t->yte);
  free(t->w), free(t->m), free(t->v), free(t->perm);
  free(t);
}

/* Embed the texts of one wire-format argument into *x (n x dim). */
static int embed_all(rd_call *call, rd_engine *e, const rd_buf *b, float **x, size_t *n) {
  const char **texts = NULL;
  size_t *lens = NULL;
  if (texts_decode(b->data, b->size, &texts, &lens, n) != 0) {
    free(texts), free(lens);
    return rd_call_fail(call, "malformed texts argument");
  }
  size_t dim = rd_engine_dim(e);
  *x = malloc((*n ? *n : 1) * dim * sizeof(float));
  if (!*x) return rd_call_fail(call, "out of memory");
  for (size_t i = 0; i < *n; i += 64) {
    size_t k = *n - i < 64 ? *n - i : 64;
    if (rd_engine_embed(e, texts + i, lens + i, k, *x + i * dim) != 0) {
      free(texts), free(lens);
      return rd_call_fail(call, "embedding failed: %s", rd_engine_last_error(e));
    }
  }
  free(texts), free(lens);
  return 0;
}

static int labels_copy(rd_call *call, const rd_buf *b, size_t n, uint32_t classes, uint32_t **y) {
  if (b->size != n * sizeof(uint32_t)) return rd_call_fail(call, "labels and texts differ in number");
  *y = malloc((n ? n : 1) * sizeof(uint32_t));
  if (!*y) return rd_call_fail(call, "out of memory");
  memcpy(*y, b->data, b->size);
  for (size_t i = 0; i < n; i++)
    if ((*y)[i] >= classes) return rd_call_fail(call, "label %u out of range", (*y)[i]);
  return 0;
}

/* Constructor arguments: model dir, train_cfg, train texts, train labels
 * (u32 each), test texts, test labels.  Embeds both shards, then closes the
 * engine: training needs only the embeddings. */
static int trainer_init(rd_call *call, void **state) {
  rd_buf a[6];
  if (rd_call_nargs(call) != 6) return rd_call_fail(call, "Trainer takes 6 arguments");
  for (size_t i = 0; i < 6; i++)
    if (rd_arg(call, i, &a[i]) != 0) return rd_call_fail(call, "Trainer: bad argument %zu", i);
  if (a[1].size != sizeof(train_cfg)) return rd_call_fail(call, "Trainer: bad configuration");
  trainer *t = calloc(1, sizeof(*t));
  if (!t) return rd_call_fail(call, "out of memory");
  memcpy(&t->cfg, a[1].data, sizeof(train_cfg));
  char dir[1024];
  snprintf(dir, sizeof(dir), "%.*s", (int)a[0].size, (const char *)a[0].data);
  rd_engine_config ec;
  rd_engine_config_init(&ec);
  char err[512] = "";
  ec.model_dir = dir;
  ec.threads = (int)t->cfg.threads;
  ec.device = t->cfg.use_gpu ? 0 : -1;   /* CUDA_VISIBLE_DEVICES holds the granted GPU */
  ec.max_batch = 64;
  ec.errbuf = err;
  ec.errbuf_len = sizeof(err);
  rd_engine *e;
  int r = rd_engine_open(&ec, &e);
  if (r != 0) {
    trainer_free(t);
    return rd_call_fail(call, "cannot open the engine: %s (%s)", err, rd_strerror(r));
  }
  double t0 = ex_now();
  r = embed_all(call, e, &a[2], &t->xtr, &t->ntr);
  if (r == 0) r = embed_all(call, e, &a[4], &t->xte, &t->nte);
  t->embed_seconds = ex_now() - t0;
  t->dim = rd_engine_dim(e);
  rd_engine_close(e);
  if (r == 0) r = labels_copy(call, &a[3], t->ntr, t->cfg.classes, &t->ytr);
  if (r == 0) r = labels_copy(call, &a[5], t->nte, t->cfg.classes, &t->yte);
  if (r != 0) {
    trainer_free(t);
    return r;
  }
  t->classes = t->cfg.classes;
  t->nparams = t->classes * t->dim + t->classes;
  t->w = calloc(t->nparams, sizeof(float));   /* zero start: the same on every worker */
  t->m = calloc(t->nparams, sizeof(float));
  t->v = calloc(t->nparams, sizeof(float));
  t->perm = malloc((t->ntr ? t->ntr : 1) * sizeof(uint32_t));
  if (!t->w || !t->m || !t->v || !t->perm) {
    trainer_free(t);
    return rd_call_fail(call, "out of memory");
  }
  t->perm_epoch = UINT32_MAX;
  *state = t;
  return 0;
}

static void trainer_fini(void *state) { trainer_free(state); }

RD_ACTOR_CLASS(Trainer, trainer_init, trainer_fini)

/* Softmax probabilities of example x into p (classes); returns the logit
 * argmax. */
static size_t forward(const trainer *t, const float *x, double *p) {
  size_t best = 0;
  double mx = -INFINITY;
  for (size_t c = 0; c < t->classes; c++) {
    const float *wc = t->w + c * t->dim;
    double z = t->w[t->classes * t->dim + c];
    for (size_t d = 0; d < t->dim; d++) z += (double)wc[d] * x[d];
    p[c] = z;
    if (z > mx) mx = z, best = c;
  }
  double sum = 0;
  for (size_t c = 0; c < t->classes; c++) sum += (p[c] = exp(p[c] - mx));
  for (size_t c = 0; c < t->classes; c++) p[c] /= sum;
  return best;
}

RD_ACTOR_METHOD(Trainer, info) {
  trainer *t = state;
  worker_info wi = {(int32_t)getpid(), (uint32_t)t->ntr, (uint32_t)t->nte, (uint32_t)t->dim, t->embed_seconds};
  return rd_return_bytes(call, 0, &wi, sizeof(wi));
}

/* The gradient of the cross-entropy summed over this worker's minibatch
 * `step` of epoch `epoch` (an empty one when the shard has fewer steps)
 * into g (nparams, zeroed here), and the minibatch's figures into *h. */
static void grad_compute(trainer *t, grad_arg ga, double *g, grad_hdr *h) {
  if (t->perm_epoch != ga.epoch) {   /* a fresh order each epoch, fixed by seed, epoch and rank */
    for (size_t i = 0; i < t->ntr; i++) t->perm[i] = (uint32_t)i;
    shuffle(t->perm, t->ntr, t->cfg.seed ^ (0x100000001b3ull * (ga.epoch + 1)) ^ ((uint64_t)t->cfg.rank << 40));
    t->perm_epoch = ga.epoch;
  }
  size_t first = (size_t)ga.step * t->cfg.batch;
  size_t n = first >= t->ntr ? 0 : (t->ntr - first < t->cfg.batch ? t->ntr - first : t->cfg.batch);
  double p[256];
  memset(g, 0, t->nparams * sizeof(double));
  grad_hdr hh = {(uint32_t)n, (uint32_t)t->dim, (uint32_t)t->classes, 0, 0};
  *h = hh;
  for (size_t i = 0; i < n; i++) {
    uint32_t k = t->perm[first + i];
    const float *x = t->xtr + (size_t)k * t->dim;
    uint32_t y = t->ytr[k];
    if (forward(t, x, p) == y) h->correct++;
    h->loss_sum += -log(p[y] > 1e-300 ? p[y] : 1e-300);
    for (size_t c = 0; c < t->classes; c++) {
      double d = p[c] - (c == y ? 1.0 : 0.0);
      double *gc = g + c * t->dim;
      for (size_t j = 0; j < t->dim; j++) gc[j] += d * x[j];
      g[t->classes * t->dim + c] += d;
    }
  }
}

RD_ACTOR_METHOD(Trainer, grad) {
  trainer *t = state;
  grad_arg ga;
  if (rd_arg_copy(call, 0, &ga, sizeof(ga)) != 0) return rd_call_fail(call, "grad takes (epoch, step)");
  uint8_t *out = rd_return_alloc(call, 0, sizeof(grad_hdr) + t->nparams * sizeof(float));
  if (!out) return rd_call_fail(call, "cannot allocate the result");
  double *g = malloc(t->nparams * sizeof(double));
  if (!g) return rd_call_fail(call, "out of memory");
  grad_hdr h;
  grad_compute(t, ga, g, &h);
  memcpy(out, &h, sizeof(h));
  float *gf = (float *)(out + sizeof(h));
  for (size_t j = 0; j < t->nparams; j++) gf[j] = (float)g[j];
  free(g);
  return 0;
}

/* One Adam step with the averaged gradient u (plus L2 weight decay on W);
 * every worker gets the same update and so holds the same weights. */
static void adam_apply(trainer *t, const float *u) {
  const train_cfg *c = &t->cfg;
  t->steps++;
  double bc1 = 1.0 - pow(c->beta1, (double)t->steps), bc2 = 1.0 - pow(c->beta2, (double)t->steps);
  for (size_t j = 0; j < t->nparams; j++) {
    double g = u[j] + (j < t->classes * t->dim ? c->weight_decay * t->w[j] : 0.0);
    t->m[j] = (float)(c->beta1 * t->m[j] + (1 - c->beta1) * g);
    t->v[j] = (float)(c->beta2 * t->v[j] + (1 - c->beta2) * g * g);
    t->w[j] -= (float)(c->lr * (t->m[j] / bc1) / (sqrt(t->v[j] / bc2) + c->eps));
  }
}

RD_ACTOR_METHOD(Trainer, apply) {
  trainer *t = state;
  rd_buf b;
  if (rd_arg(call, 0, &b) != 0 || b.size != t->nparams * sizeof(float))
    return rd_call_fail(call, "apply takes %zu floats", t->nparams);
  adam_apply(t, b.data);
  return rd_return_bytes(call, 0, &t->steps, sizeof(t->steps));
}

/* --allreduce ring: join the workers' collective group (argument 0: its
 * name, 1: the number of workers) as this worker's rank. */
RD_ACTOR_METHOD(Trainer, ring_join) {
  trainer *t = state;
  rd_buf nb;
  int32_t world;
  char name[RD_COLLECTIVE_MAX_NAME + 1];
  if (rd_arg(call, 0, &nb) != 0 || nb.size == 0 || nb.size > RD_COLLECTIVE_MAX_NAME ||
      rd_arg_copy(call, 1, &world, sizeof(world)) != 0)
    return rd_call_fail(call, "ring_join takes (name, world)");
  memcpy(name, nb.data, nb.size);
  name[nb.size] = 0;
  if (t->group) return rd_call_fail(call, "worker %u is already in a group", t->cfg.rank);
  t->ring = malloc((t->nparams + 3) * sizeof(double));
  t->mean = malloc(t->nparams * sizeof(float));
  if (!t->ring || !t->mean) return rd_call_fail(call, "out of memory");
  int r = rd_collective_join(name, world, (int)t->cfg.rank, 120000, &t->group);
  if (r != 0) return rd_call_fail(call, "worker %u cannot join group '%s': %s", t->cfg.rank, name, rd_err_name(r));
  return rd_return_bytes(call, 0, "", 0);
}

/* --allreduce ring: this worker's gradient for the step, summed with the
 * others' in the group (as the float32 the driver path sends, summed in
 * float64), then the mean applied here; the global minibatch's figures. */
RD_ACTOR_METHOD(Trainer, step) {
  trainer *t = state;
  grad_arg ga;
  if (rd_arg_copy(call, 0, &ga, sizeof(ga)) != 0) return rd_call_fail(call, "step takes (epoch, step)");
  if (!t->group) return rd_call_fail(call, "step before ring_join");
  grad_hdr h;
  grad_compute(t, ga, t->ring, &h);
  for (size_t j = 0; j < t->nparams; j++) t->ring[j] = (float)t->ring[j];
  t->ring[t->nparams] = h.count;
  t->ring[t->nparams + 1] = h.correct;
  t->ring[t->nparams + 2] = h.loss_sum;
  int r = rd_allreduce(t->group, t->ring, t->nparams + 3, RD_FLOAT64, RD_SUM);
  if (r != 0) return rd_call_fail(call, "all-reduce of step %u.%u: %s", ga.epoch, ga.step, rd_err_name(r));
  step_result sr = {t->ring[t->nparams], t->ring[t->nparams + 1], t->ring[t->nparams + 2]};
  if (sr.count > 0) {
    for (size_t j = 0; j < t->nparams; j++) t->mean[j] = (float)(t->ring[j] / sr.count);
    adam_apply(t, t->mean);
  }
  return rd_return_bytes(call, 0, &sr, sizeof(sr));
}

RD_ACTOR_METHOD(Trainer, checksum) {
  trainer *t = state;
  checksum_result cr = {0xcbf29ce484222325ull, t->steps};
  const uint8_t *p = (const uint8_t *)t->w;
  for (size_t i = 0; i < t->nparams * sizeof(float); i++) cr.fnv = (cr.fnv ^ p[i]) * 0x100000001b3ull;
  return rd_return_bytes(call, 0, &cr, sizeof(cr));
}

/* Loss and accuracy on the held-out shard (argument 0) or the training
 * shard (1). */
RD_ACTOR_METHOD(Trainer, evaluate) {
  trainer *t = state;
  uint32_t which;
  if (rd_arg_copy(call, 0, &which, sizeof(which)) != 0) return rd_call_fail(call, "evaluate takes (which)");
  const float *x = which ? t->xtr : t->xte;
  const uint32_t *y = which ? t->ytr : t->yte;
  size_t n = which ? t->ntr : t->nte;
  eval_result er = {(uint32_t)n, 0, 0};
  double p[256];
  for (size_t i = 0; i < n; i++) {
    if (forward(t, x + i * t->dim, p) == y[i]) er.correct++;
    er.loss_sum += -log(p[y[i]] > 1e-300 ? p[y[i]] : 1e-300);
  }
  return rd_return_bytes(call, 0, &er, sizeof(er));
}

RD_ACTOR_METHOD(Trainer, weights) {
  trainer *t = state;
  return rd_return_bytes(call, 0, t->w, t->nparams * sizeof(float));
}

/* ------------------------------------------------------------- the data */

typedef struct example {
  char *text;
  size_t len;
  uint32_t label;
} example;

typedef struct dataset {
  example *ex;
  size_t n, cap;
  char names[256][32];   /* class names: the fortune files */
  size_t count[256];
  uint32_t classes;
} dataset;

/* An attribution line ("\t\t-- Mark Twain"): a giveaway of the file, not
 * part of the text. */
typedef struct cookie_ctx {
  dataset *ds;
  uint32_t label;
  int keep;
  size_t count;   /* non-empty cookies */
} cookie_ctx;

static void add_cookie(void *ctx, int k, const char *s, size_t len) {
  (void)k;
  cookie_ctx *cc = ctx;
  while (len && (s[len - 1] == '\n' || s[len - 1] == ' ')) len--;
  while (len && (*s == '\n' || *s == ' ')) s++, len--;
  if (!len) return;
  cc->count++;
  if (!cc->keep) return;
  dataset *ds = cc->ds;
  if (ds->n == ds->cap) {
    ds->cap = ds->cap ? ds->cap * 2 : 1024;
    ds->ex = realloc(ds->ex, ds->cap * sizeof(example));
    if (!ds->ex) ex_die(1, "out of memory");
  }
  ds->ex[ds->n] = (example){strndup(s, len), len, cc->label};
  if (!ds->ex[ds->n++].text) ex_die(1, "out of memory");
}

/* One fortune file's non-empty cookies (kept in ds when `keep`), without
 * attribution lines when `strip`. */
static size_t read_cookies(const char *path, dataset *ds, uint32_t label, int keep, int strip) {
  cookie_ctx cc = {ds, label, keep, 0};
  ex_fortune_cookies(path, strip, add_cookie, &cc);
  return cc.count;
}

/* The classes are the fortune files with at least min_size cookies, the
 * max_classes largest of them (ties by name); smaller files are left out.
 * Attribution lines are dropped unless !strip: nearly every literature
 * cookie has one, which would make that class a formatting test. */
static void load_dataset(dataset *ds, const char *dir, int max_classes, int min_size, int strip) {
  char **names;
  int total = ex_fortune_files(dir, &names);
  int nn = total < 512 ? total : 512;   /* the picking below uses fixed arrays */
  size_t counts[512];
  for (int i = 0; i < nn; i++) {
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
    counts[i] = read_cookies(path, ds, 0, 0, strip);
  }
  /* pick: largest first (a stable selection over the sorted names) */
  int picked[512], np = 0;
  while (np < max_classes) {
    int best = -1;
    for (int i = 0; i < nn; i++) {
      int taken = 0;
      for (int k = 0; k < np; k++) taken |= picked[k] == i;
      if (taken || counts[i] < (size_t)min_size) continue;
      if (best < 0 || counts[i] > counts[best]) best = i;
    }
    if (best < 0) break;
    picked[np++] = best;
  }
  if (np < 2)
    ex_die(2, "need at least 2 fortune files with %d or more cookies in %s (found %d)", min_size, dir, np);
  for (int k = 0; k < np; k++) {
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, names[picked[k]]);
    snprintf(ds->names[k], sizeof(ds->names[k]), "%s", names[picked[k]]);
    ds->count[k] = read_cookies(path, ds, (uint32_t)k, 1, strip);
  }
  ds->classes = (uint32_t)np;
  for (int i = 0; i < total; i++) free(names[i]);
  free(names);
}

/* Wire-format texts of the examples idx[0..n). */
static uint8_t *texts_encode(const dataset *ds, const uint32_t *idx, size_t n, size_t *size) {
  const char **ts = malloc((n ? n : 1) * sizeof(char *));
  size_t *ls = malloc((n ? n : 1) * sizeof(size_t));
  if (!ts || !ls) ex_die(1, "out of memory");
  for (size_t i = 0; i < n; i++) {
    ts[i] = ds->ex[idx[i]].text;
    ls[i] = ds->ex[idx[i]].len;
  }
  uint8_t *p = ex_texts_encode(ts, ls, n, size);
  free(ts);
  free(ls);
  return p;
}

/* ------------------------------------------------------------ the head file */

/* HEAD.bin, little-endian (docs/examples.md):
 *   char magic[8] "RDHEAD1\0"; u32 version = 1; u32 dim; u32 classes; u32 flags = 0;
 *   classes x char name[32] (NUL-padded);
 *   float32 W[classes][dim]; float32 b[classes]
 * Logits of a unit-norm embedding x: W x + b; the prediction is the argmax. */
#define HEAD_MAGIC "RDHEAD1"
#define HEAD_NAME_LEN 32

static void head_save(const char *path, const dataset *ds, uint32_t dim, const float *w, size_t nparams, size_t *bytes) {
  FILE *f = fopen(path, "wb");
  if (!f) ex_die(2, "cannot write %s: %s", path, strerror(errno));
  char magic[8] = HEAD_MAGIC;
  uint32_t hdr[4] = {1, dim, ds->classes, 0};
  fwrite(magic, 1, 8, f);
  fwrite(hdr, sizeof(uint32_t), 4, f);
  for (uint32_t c = 0; c < ds->classes; c++) {
    char name[HEAD_NAME_LEN] = {0};
    strncpy(name, ds->names[c], HEAD_NAME_LEN - 1);
    fwrite(name, 1, HEAD_NAME_LEN, f);
  }
  fwrite(w, sizeof(float), nparams, f);
  if (ferror(f) | (fclose(f) != 0)) ex_die(2, "cannot write %s", path);
  *bytes = 8 + 16 + (size_t)HEAD_NAME_LEN * ds->classes + nparams * sizeof(float);
}

/* ------------------------------------------------------------- the driver */

void ex_train_opts_init(ex_train_opts *o) {
  memset(o, 0, sizeof(*o));
  o->workers = 2;
  o->epochs = 30;
  o->batch = 32;
  o->lr = 0.01;
  o->weight_decay = 1e-4;
  o->seed = 42;
  o->test_fraction = 0.2;
  o->max_classes = 8;
  o->min_class_size = 50;
  o->threads = 1;
  o->cpus = -1;
  o->fortunes = "/usr/share/games/fortunes";
  o->model = ex_model_dir();
}

int ex_train_option(ex_train_opts *o, const char *a, const char *v) {
#define OPT(name) (!strcmp(a, name) && v)
  if (OPT("--workers")) o->workers = atoi(v);
  else if (OPT("--epochs")) o->epochs = atoi(v);
  else if (OPT("--batch")) o->batch = atoi(v);
  else if (OPT("--lr")) o->lr = atof(v);
  else if (OPT("--weight-decay")) o->weight_decay = atof(v);
  else if (OPT("--seed")) o->seed = strtoull(v, NULL, 10);
  else if (OPT("--test-fraction")) o->test_fraction = atof(v);
  else if (OPT("--max-classes")) o->max_classes = atoi(v);
  else if (OPT("--min-class-size")) o->min_class_size = atoi(v);
  else if (OPT("--save")) o->save = v;
  else if (OPT("--cpus-per-worker")) o->cpus = atof(v);
  else if (OPT("--threads-per-worker")) o->threads = atoi(v);
  else if (OPT("--model")) o->model = v;
  else if (OPT("--fortunes")) o->fortunes = v;
  else if (OPT("--allreduce")) {
    if (strcmp(v, "ring") && strcmp(v, "driver")) ex_die(2, "--allreduce takes ring or driver, not %s", v);
    o->ring = !strcmp(v, "ring");
  }
  else if (!strcmp(a, "--keep-attribution")) {
    o->keep_attribution = 1;
    return 1;
  } else {
    return 0;
  }
#undef OPT
  return 2;
}

void ex_train_opts_check(const ex_train_opts *o) {
  if (o->workers < 1 || o->workers > 64 || o->epochs < 1 || o->batch < 1 || o->lr <= 0 || o->weight_decay < 0 ||
      o->test_fraction <= 0 || o->test_fraction >= 1 || o->max_classes < 2 || o->max_classes > 256 ||
      o->min_class_size < 1 || o->threads < 1)
    ex_die(2, "bad option value (workers 1..64, classes 2..256, test fraction in (0,1), counts and rates positive)");
}

/* Call `method` on every worker with the same arguments. */
static void call_all(const rd_actor *w, int n, const rd_actor_method *m, const rd_value *args, size_t nargs,
                     rd_ref *refs) {
  for (int i = 0; i < n; i++)
    if (rd_actor_call(w[i], m, args, nargs, NULL, &refs[i]) != 0) ex_die(1, "cannot call %s", m->name);
}

/* Get n results; a failed one ends the run with the worker's message. */
static void get_all(rd_ref *refs, int n, rd_buf *out, const char *what) {
  int r = rd_get(refs, (size_t)n, out, RD_TIMEOUT_INF);
  if (r != 0) {
    for (int i = 0; i < n; i++)
      if (out[i].error) ex_die(1, "%s failed on worker %d: %.*s", what, i, (int)out[i].size, (const char *)out[i].data);
    ex_die(1, "%s failed: %s", what, rd_strerror(r));
  }
}

static void release_all(rd_ref *refs, rd_buf *bufs, int n) {
  for (int i = 0; i < n; i++) {
    if (bufs) rd_buf_release(&bufs[i]);
    rd_ref_release(refs[i]);
  }
}

int ex_train(const ex_train_opts *o, const rd_actor_opts *ao) {
  double t_start = ex_now();
  int r;

  dataset ds;
  memset(&ds, 0, sizeof(ds));
  load_dataset(&ds, o->fortunes, o->max_classes, o->min_class_size, !o->keep_attribution);
  for (uint32_t c = 0; c < ds.classes; c++) printf("class %u: %s cookies=%zu\n", c, ds.names[c], ds.count[c]);

  /* a fixed shuffle, then the last test_fraction held out */
  uint32_t *order = malloc(ds.n * sizeof(uint32_t));
  if (!order) ex_die(1, "out of memory");
  for (size_t i = 0; i < ds.n; i++) order[i] = (uint32_t)i;
  shuffle(order, ds.n, o->seed);
  size_t ntest = (size_t)((double)ds.n * o->test_fraction + 0.5);
  size_t ntrain = ds.n - ntest;
  if (ntrain < (size_t)o->workers || ntest < 1) ex_die(2, "too few examples (%zu) for %d workers", ds.n, o->workers);
  const uint32_t *train = order, *test = order + ntrain;

  /* the majority-class baseline: always answer the commonest training label */
  size_t tcount[256] = {0}, hits = 0;
  for (size_t i = 0; i < ntrain; i++) tcount[ds.ex[train[i]].label]++;
  uint32_t major = 0;
  for (uint32_t c = 1; c < ds.classes; c++)
    if (tcount[c] > tcount[major]) major = c;
  for (size_t i = 0; i < ntest; i++) hits += ds.ex[test[i]].label == major;
  double baseline = (double)hits / (double)ntest;
  printf("data: examples=%zu train=%zu test=%zu classes=%u baseline=%.3f (always \"%s\")\n", ds.n, ntrain, ntest,
         ds.classes, baseline, ds.names[major]);
  fflush(stdout);

  /* the workers: shard i gets examples i, i+N, i+2N, ... of each split */
  rd_actor *w = calloc((size_t)o->workers, sizeof(rd_actor));
  rd_ref *refs = calloc((size_t)o->workers, sizeof(rd_ref));
  rd_ref *applied = calloc((size_t)o->workers, sizeof(rd_ref));
  rd_buf *bufs = calloc((size_t)o->workers, sizeof(rd_buf));
  uint32_t *idx = malloc(ds.n * sizeof(uint32_t)), *lab = malloc(ds.n * sizeof(uint32_t));
  if (!w || !refs || !applied || !bufs || !idx || !lab) ex_die(1, "out of memory");
  for (int k = 0; k < o->workers; k++) {
    train_cfg tc = {ds.classes, (uint32_t)k, (uint32_t)o->batch, (uint32_t)o->threads, (uint32_t)o->use_gpu, 0, o->seed, o->lr,
                    0.9, 0.999, 1e-8, o->weight_decay};
    size_t ntr = 0, nte = 0, trb, teb;
    for (size_t i = (size_t)k; i < ntrain; i += (size_t)o->workers) idx[ntr++] = train[i];
    uint8_t *trt = texts_encode(&ds, idx, ntr, &trb);
    for (size_t i = 0; i < ntr; i++) lab[i] = ds.ex[idx[i]].label;
    uint32_t *trl = malloc((ntr ? ntr : 1) * sizeof(uint32_t));
    memcpy(trl, lab, ntr * sizeof(uint32_t));
    for (size_t i = (size_t)k; i < ntest; i += (size_t)o->workers) idx[nte++] = test[i];
    uint8_t *tet = texts_encode(&ds, idx, nte, &teb);
    for (size_t i = 0; i < nte; i++) lab[i] = ds.ex[idx[i]].label;
    r = rd_actor_create(Trainer,
                        RD_ARGS(rd_arg_bytes(o->model, strlen(o->model)), rd_arg_bytes(&tc, sizeof(tc)),
                                rd_arg_bytes(trt, trb), rd_arg_bytes(trl, ntr * sizeof(uint32_t)),
                                rd_arg_bytes(tet, teb), rd_arg_bytes(lab, nte * sizeof(uint32_t))),
                        ao, &w[k]);
    free(trt), free(trl), free(tet);
    if (r != 0) ex_die(1, "cannot create worker %d: %s", k, rd_strerror(r));
  }
  /* info waits for the constructors: the embedding happens there */
  call_all(w, o->workers, Trainer_info, RD_NO_ARGS, refs);
  get_all(refs, o->workers, bufs, "embedding the shards");
  size_t max_shard = 0;
  uint32_t dim = 0;
  for (int k = 0; k < o->workers; k++) {
    worker_info wi;
    memcpy(&wi, bufs[k].data, sizeof(wi));
    printf("worker %d: pid=%d train=%u test=%u dim=%u embed_seconds=%.2f\n", k, wi.pid, wi.ntrain, wi.ntest, wi.dim,
           wi.embed_seconds);
    if (wi.ntrain > max_shard) max_shard = wi.ntrain;
    dim = wi.dim;
  }
  release_all(refs, bufs, o->workers);
  fflush(stdout);
  size_t nparams = (size_t)ds.classes * dim + ds.classes;
  float *avg = malloc(nparams * sizeof(float));
  double *sum = malloc(nparams * sizeof(double));
  if (!avg || !sum) ex_die(1, "out of memory");
  int steps_per_epoch = (int)((max_shard + (size_t)o->batch - 1) / (size_t)o->batch);
  rd_ref *steps = NULL;
  if (o->ring) {   /* the workers' group: they join together, each as its rank */
    char group[64];
    snprintf(group, sizeof(group), "train-%d", (int)getpid());
    int32_t world = o->workers;
    call_all(w, o->workers, Trainer_ring_join,
             RD_ARGS(rd_arg_bytes(group, strlen(group)), rd_arg_bytes(&world, sizeof(world))), refs);
    get_all(refs, o->workers, bufs, "joining the group");
    release_all(refs, bufs, o->workers);
    steps = calloc((size_t)steps_per_epoch * (size_t)o->workers, sizeof(rd_ref));
    if (!steps) ex_die(1, "out of memory");
    printf("allreduce: ring (collective group %s of %d workers)\n", group, o->workers);
  }

  double t_train = ex_now(), train_loss = 0, test_acc = 0;
  int identical = 1, have_applied = 0;
  for (int epoch = 0; epoch < o->epochs; epoch++) {
    double loss_sum = 0;
    size_t seen = 0, correct = 0;
    if (o->ring) {
      /* every step of the epoch at once: each worker runs them in order, and
       * the ring keeps them in step; the driver only reads the figures */
      for (int step = 0; step < steps_per_epoch; step++) {
        grad_arg ga = {(uint32_t)epoch, (uint32_t)step};
        call_all(w, o->workers, Trainer_step, RD_ARGS(rd_arg_bytes(&ga, sizeof(ga))), steps + (size_t)step * o->workers);
      }
      for (int step = 0; step < steps_per_epoch; step++) {
        rd_ref *sr = steps + (size_t)step * o->workers;
        get_all(sr, o->workers, bufs, "step");
        step_result r0;
        if (bufs[0].size != sizeof(r0)) ex_die(1, "worker 0 sent a malformed step result");
        memcpy(&r0, bufs[0].data, sizeof(r0));
        seen += (size_t)r0.count;
        correct += (size_t)r0.correct;
        loss_sum += r0.loss_sum;
        release_all(sr, bufs, o->workers);
      }
    }
    for (int step = 0; !o->ring && step < steps_per_epoch; step++) {
      grad_arg ga = {(uint32_t)epoch, (uint32_t)step};
      call_all(w, o->workers, Trainer_grad, RD_ARGS(rd_arg_bytes(&ga, sizeof(ga))), refs);
      if (have_applied) {   /* the previous update ran before this grad (calls keep their order) */
        get_all(applied, o->workers, bufs, "apply");
        release_all(applied, bufs, o->workers);
        have_applied = 0;
      }
      get_all(refs, o->workers, bufs, "grad");
      /* the all-reduce: sum the workers' gradients, divide by the examples */
      memset(sum, 0, nparams * sizeof(double));
      size_t count = 0;
      for (int k = 0; k < o->workers; k++) {
        grad_hdr h;
        if (bufs[k].size != sizeof(h) + nparams * sizeof(float)) ex_die(1, "worker %d sent a malformed gradient", k);
        memcpy(&h, bufs[k].data, sizeof(h));
        const float *g = (const float *)((const uint8_t *)bufs[k].data + sizeof(h));
        for (size_t j = 0; j < nparams; j++) sum[j] += g[j];
        count += h.count;
        correct += h.correct;
        loss_sum += h.loss_sum;
      }
      release_all(refs, bufs, o->workers);
      if (!count) continue;
      seen += count;
      for (size_t j = 0; j < nparams; j++) avg[j] = (float)(sum[j] / (double)count);
      call_all(w, o->workers, Trainer_apply, RD_ARGS(rd_arg_bytes(avg, nparams * sizeof(float))), applied);
      have_applied = 1;
    }
    /* every worker must hold the same weights after the same updates */
    call_all(w, o->workers, Trainer_checksum, RD_NO_ARGS, refs);
    if (have_applied) {
      get_all(applied, o->workers, bufs, "apply");
      release_all(applied, bufs, o->workers);
      have_applied = 0;
    }
    get_all(refs, o->workers, bufs, "checksum");
    checksum_result c0, ck;
    memcpy(&c0, bufs[0].data, sizeof(c0));
    int same = 1;
    for (int k = 1; k < o->workers; k++) {
      memcpy(&ck, bufs[k].data, sizeof(ck));
      if (ck.fnv != c0.fnv || ck.steps != c0.steps) {
        same = 0;
        fprintf(stderr, "worker %d differs from worker 0 (checksum %016llx vs %016llx, steps %llu vs %llu)\n",
                k, (unsigned long long)ck.fnv, (unsigned long long)c0.fnv, (unsigned long long)ck.steps,
                (unsigned long long)c0.steps);
      }
    }
    release_all(refs, bufs, o->workers);
    identical &= same;
    /* held-out loss and accuracy, each worker on its test shard */
    uint32_t which = 0;
    call_all(w, o->workers, Trainer_evaluate, RD_ARGS(rd_arg_bytes(&which, sizeof(which))), refs);
    get_all(refs, o->workers, bufs, "evaluate");
    size_t tn = 0, tc = 0;
    double tl = 0;
    for (int k = 0; k < o->workers; k++) {
      eval_result er;
      memcpy(&er, bufs[k].data, sizeof(er));
      tn += er.count, tc += er.correct, tl += er.loss_sum;
    }
    release_all(refs, bufs, o->workers);
    train_loss = loss_sum / (double)(seen ? seen : 1);
    test_acc = (double)tc / (double)(tn ? tn : 1);
    printf("epoch=%d train_loss=%.4f train_acc=%.3f test_loss=%.4f test_acc=%.3f steps=%llu checksum=%016llx "
           "identical=%s\n",
           epoch + 1, train_loss, (double)correct / (double)(seen ? seen : 1), tl / (double)(tn ? tn : 1), test_acc,
           (unsigned long long)c0.steps, (unsigned long long)c0.fnv, same ? "yes" : "no");
    fflush(stdout);
  }
  double train_seconds = ex_now() - t_train;

  /* the trained head, from worker 0 (they are all the same) */
  call_all(w, 1, Trainer_weights, RD_NO_ARGS, refs);
  get_all(refs, 1, bufs, "weights");
  if (bufs[0].size != nparams * sizeof(float)) ex_die(1, "worker 0 sent malformed weights");
  size_t bytes = 0;
  if (o->save) head_save(o->save, &ds, dim, bufs[0].data, nparams, &bytes);
  release_all(refs, bufs, 1);
  if (o->save) printf("saved: %s bytes=%zu classes=%u dim=%u\n", o->save, bytes, ds.classes, dim);

  printf("summary: workers=%d allreduce=%s classes=%u train=%zu test=%zu epochs=%d steps_per_epoch=%d "
         "train_loss=%.4f test_acc=%.3f baseline=%.3f weights_identical=%s train_seconds=%.1f seconds=%.1f\n",
         o->workers, o->ring ? "ring" : "driver", ds.classes, ntrain, ntest, o->epochs, steps_per_epoch, train_loss,
         test_acc, baseline, identical ? "yes" : "no", train_seconds, ex_now() - t_start);
  for (int k = 0; k < o->workers; k++)
    if (rd_actor_kill(w[k], 1) != 0) fprintf(stderr, "could not stop worker %d\n", k);
  for (size_t i = 0; i < ds.n; i++) free(ds.ex[i].text);
  free(ds.ex), free(order), free(w), free(refs), free(applied), free(bufs), free(idx), free(lab), free(avg), free(sum);
  free(steps);
  return identical;
}
