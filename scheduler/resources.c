/* scheduler/resources.c - fixed-point resource quantities and the node ledger.
 *
 * Grants and returns resource requests all-or-nothing and packs fractional
 * GPU requests best-fit so one GPU fills before the next is touched.  It must
 * never over-commit a resource or let a grant change the ledger twice; a
 * broken invariant aborts rather than corrupting the books.  No I/O, no
 * threads, no allocation. */
#include "resources.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "raydist/error.h"

/* Invariant checks stay compiled in release builds (STYLE.md, Do 8). */
#define RES_CHECK(cond)                                                       \
  do {                                                                        \
    if (!(cond)) {                                                            \
      fprintf(stderr, "%s:%d: resource ledger invariant failed: %s\n",        \
              __FILE__, __LINE__, #cond);                                     \
      abort();                                                                \
    }                                                                         \
  } while (0)

/* Largest fixed-point value that a double converts to without overflow. */
#define RES_MAX_WHOLE ((double)(INT64_MAX / RD_RES_UNIT))

/* A fixed-point amount: non-negative and whole above one unit. */
static int res_amount_ok(int64_t a) {
  return a >= 0 && (a <= RD_RES_UNIT || a % RD_RES_UNIT == 0);
}

static int res_name_ok(const char *name) {
  return name[0] != '\0' && memchr(name, '\0', RD_RES_NAME_MAX) != NULL;
}

/* Index of name in r->custom, or -1. */
static int res_custom_find(const rd_resources *r, const char *name) {
  for (int i = 0; i < r->ncustom; i++)
    if (strncmp(r->custom[i].name, name, RD_RES_NAME_MAX) == 0) return i;
  return -1;
}

int rd_res_from_double(double q, int64_t *out) {
  if (out == NULL || !isfinite(q) || q < 0 || q > RES_MAX_WHOLE) return RD_EINVAL;
  if (q > 1 && q != floor(q)) return RD_EINVAL;
  int64_t f = (int64_t)llround(q * RD_RES_UNIT);
  if (f == 0 && q > 0) return RD_EINVAL;   /* would silently become nothing */
  *out = f;
  return 0;
}

double rd_res_to_double(int64_t fixed) {
  return (double)fixed / RD_RES_UNIT;
}

void rd_res_format(const rd_resources *r, char *buf, size_t len) {
  if (!len) return;
  int off = snprintf(buf, len, "{CPU: %g, GPU: %g", rd_res_to_double(r->cpu), rd_res_to_double(r->gpu));
  if (r->memory && off < (int)len) off += snprintf(buf + off, len - (size_t)off, ", memory: %lld", (long long)r->memory);
  for (int i = 0; i < r->ncustom && off < (int)len; i++)
    off += snprintf(buf + off, len - (size_t)off, ", %s: %g", r->custom[i].name, rd_res_to_double(r->custom[i].amount));
  if (off < (int)len) snprintf(buf + off, len - (size_t)off, "}");
}

int rd_res_is_empty(const rd_resources *r) {
  if (r->cpu || r->gpu || r->memory) return 0;
  for (int i = 0; i < r->ncustom; i++)
    if (r->custom[i].amount) return 0;
  return 1;
}

int rd_res_validate(const rd_resources *r) {
  if (r == NULL) return RD_EINVAL;
  if (!res_amount_ok(r->cpu) || !res_amount_ok(r->gpu) || r->memory < 0) return RD_EINVAL;
  if (r->ncustom < 0 || r->ncustom > RD_RES_MAX_CUSTOM) return RD_EINVAL;
  for (int i = 0; i < r->ncustom; i++) {
    if (!res_name_ok(r->custom[i].name) || !res_amount_ok(r->custom[i].amount))
      return RD_EINVAL;
    for (int j = 0; j < i; j++)
      if (strcmp(r->custom[i].name, r->custom[j].name) == 0) return RD_EINVAL;
  }
  return 0;
}

int rd_res_set_custom(rd_resources *r, const char *name, int64_t amount) {
  if (r == NULL || name == NULL || r->ncustom < 0 || r->ncustom > RD_RES_MAX_CUSTOM)
    return RD_EINVAL;
  if (!res_name_ok(name) || !res_amount_ok(amount)) return RD_EINVAL;
  int i = res_custom_find(r, name);
  if (i < 0) {
    if (r->ncustom == RD_RES_MAX_CUSTOM) return RD_ENOMEM;
    i = r->ncustom++;
    memset(r->custom[i].name, 0, RD_RES_NAME_MAX);
    strcpy(r->custom[i].name, name);   /* fits: res_name_ok */
  }
  r->custom[i].amount = amount;
  return 0;
}

int64_t rd_res_get_custom(const rd_resources *r, const char *name) {
  if (r == NULL || name == NULL || r->ncustom < 0 || r->ncustom > RD_RES_MAX_CUSTOM)
    return 0;
  int i = res_custom_find(r, name);
  return i < 0 ? 0 : r->custom[i].amount;
}

int rd_res_add(rd_resources *acc, const rd_resources *r) {
  acc->cpu += r->cpu;
  acc->gpu += r->gpu;
  acc->memory += r->memory;
  for (int i = 0; i < r->ncustom; i++) {
    if (r->custom[i].amount == 0) continue;
    int64_t have = rd_res_get_custom(acc, r->custom[i].name);
    int rc = rd_res_set_custom(acc, r->custom[i].name, have + r->custom[i].amount);
    if (rc != 0) return rc;
  }
  return 0;
}

int rd_res_fits(const rd_resources *room, const rd_resources *r) {
  if (r->cpu > room->cpu || r->gpu > room->gpu || r->memory > room->memory) return 0;
  for (int i = 0; i < r->ncustom; i++)
    if (r->custom[i].amount > rd_res_get_custom(room, r->custom[i].name)) return 0;
  return 1;
}

void rd_res_take(rd_resources *room, const rd_resources *r) {
  room->cpu -= r->cpu;
  room->gpu -= r->gpu;
  room->memory -= r->memory;
  for (int i = 0; i < r->ncustom; i++) {
    if (r->custom[i].amount == 0) continue;
    int64_t have = rd_res_get_custom(room, r->custom[i].name);
    (void)rd_res_set_custom(room, r->custom[i].name, have - r->custom[i].amount);
  }
}

void rd_res_ledger_init(rd_res_ledger *l, const rd_resources *total) {
  memset(l, 0, sizeof(*l));
  l->total = *total;
  rd_resources *t = &l->total;
  if (t->cpu < 0) t->cpu = 0;
  if (t->memory < 0) t->memory = 0;
  if (t->ncustom < 0) t->ncustom = 0;
  if (t->ncustom > RD_RES_MAX_CUSTOM) t->ncustom = RD_RES_MAX_CUSTOM;
  for (int i = 0; i < t->ncustom; i++) {
    t->custom[i].name[RD_RES_NAME_MAX - 1] = '\0';
    if (t->custom[i].amount < 0) t->custom[i].amount = 0;
  }
  int64_t n = t->gpu < 0 ? 0 : t->gpu / RD_RES_UNIT;
  if (n > RD_RES_MAX_GPUS) n = RD_RES_MAX_GPUS;
  l->ngpus = (int)n;
  t->gpu = n * RD_RES_UNIT;
  for (int i = 0; i < l->ngpus; i++) {
    l->gpu_dev[i] = i;
    l->gpu_cap[i] = l->gpu_avail[i] = RD_RES_UNIT;
  }
  l->avail = l->total;
}

void rd_res_ledger_init_grant(rd_res_ledger *l, const rd_res_grant *g) {
  memset(l, 0, sizeof(*l));
  l->total = g->req;
  int n = g->ngpus < 0 ? 0 : g->ngpus > RD_RES_MAX_GPUS ? RD_RES_MAX_GPUS : g->ngpus;
  l->ngpus = n;
  for (int i = 0; i < n; i++) {
    l->gpu_dev[i] = g->gpu_ids[i];
    l->gpu_cap[i] = l->gpu_avail[i] = g->gpu_share[i];
  }
  l->avail = l->total;
}

/* The slot of device dev, or -1. */
static int res_gpu_slot(const rd_res_ledger *l, int dev) {
  for (int i = 0; i < l->ngpus; i++)
    if (l->gpu_dev[i] == dev) return i;
  return -1;
}

int rd_res_feasible(const rd_res_ledger *l, const rd_resources *req) {
  if (l == NULL || rd_res_validate(req) != 0) return 0;
  const rd_resources *t = &l->total;
  if (req->cpu > t->cpu || req->memory > t->memory) return 0;
  if (req->gpu > 0) {
    /* enough slots with the room a share or whole GPUs need */
    int64_t need = req->gpu < RD_RES_UNIT ? req->gpu : RD_RES_UNIT;
    int64_t want = req->gpu < RD_RES_UNIT ? 1 : req->gpu / RD_RES_UNIT, have = 0;
    if (req->gpu > t->gpu) return 0;
    for (int i = 0; i < l->ngpus; i++) have += l->gpu_cap[i] >= need;
    if (have < want) return 0;
  }
  for (int i = 0; i < req->ncustom; i++) {
    if (req->custom[i].amount == 0) continue;
    int j = res_custom_find(t, req->custom[i].name);
    if (j < 0 || req->custom[i].amount > t->custom[j].amount) return 0;
  }
  return 1;
}

/* Where a GPU request of g would go now: fills slots/shares and returns the
 * number of GPUs used (0 for g == 0), or -1 when it does not fit. */
static int res_gpu_place(const rd_res_ledger *l, int64_t g, int *ids, int64_t *shares) {
  if (g == 0) return 0;
  if (g < RD_RES_UNIT) {
    int best = -1;   /* least room that still fits; ties to the lowest id */
    for (int i = 0; i < l->ngpus; i++)
      if (l->gpu_avail[i] >= g && (best < 0 || l->gpu_avail[i] < l->gpu_avail[best]))
        best = i;
    if (best < 0) return -1;
    ids[0] = best;
    shares[0] = g;
    return 1;
  }
  int64_t want = g / RD_RES_UNIT, got = 0;
  if (want > l->ngpus) return -1;
  for (int i = 0; i < l->ngpus && got < want; i++) {
    if (l->gpu_avail[i] != RD_RES_UNIT) continue;   /* skip partly used GPUs */
    ids[got] = i;
    shares[got] = RD_RES_UNIT;
    got++;
  }
  return got == want ? (int)got : -1;
}

uint32_t rd_res_kinds_wanted(const rd_res_ledger *l, const rd_resources *req) {
  uint32_t k = 0;
  if (req->cpu > 0) k |= RD_RES_KIND_CPU;
  if (req->gpu > 0) k |= RD_RES_KIND_GPU;
  if (req->memory > 0) k |= RD_RES_KIND_MEMORY;
  int n = req->ncustom < 0 ? 0 : req->ncustom > RD_RES_MAX_CUSTOM ? RD_RES_MAX_CUSTOM : req->ncustom;
  for (int i = 0; i < n; i++) {
    if (req->custom[i].amount <= 0) continue;
    int j = res_custom_find(&l->total, req->custom[i].name);
    if (j >= 0) k |= RD_RES_KIND_CUSTOM(j);
  }
  return k;
}

uint32_t rd_res_kinds_short(const rd_res_ledger *l, const rd_resources *req) {
  uint32_t k = 0;
  int ids[RD_RES_MAX_GPUS];
  int64_t shares[RD_RES_MAX_GPUS];
  if (req->cpu > l->avail.cpu) k |= RD_RES_KIND_CPU;
  if (req->memory > l->avail.memory) k |= RD_RES_KIND_MEMORY;
  if (req->gpu > 0 && (req->gpu > l->avail.gpu || res_gpu_place(l, req->gpu, ids, shares) < 0))
    k |= RD_RES_KIND_GPU;
  int n = req->ncustom < 0 ? 0 : req->ncustom > RD_RES_MAX_CUSTOM ? RD_RES_MAX_CUSTOM : req->ncustom;
  for (int i = 0; i < n; i++) {
    if (req->custom[i].amount <= 0) continue;
    int j = res_custom_find(&l->total, req->custom[i].name);
    if (j >= 0 && req->custom[i].amount > l->avail.custom[j].amount) k |= RD_RES_KIND_CUSTOM(j);
  }
  return k;
}

int rd_res_acquire(rd_res_ledger *l, const rd_resources *req, rd_res_grant *g) {
  if (l == NULL || g == NULL || rd_res_validate(req) != 0) return RD_EINVAL;
  if (!rd_res_feasible(l, req)) return RD_EINFEASIBLE;
  if (rd_res_kinds_short(l, req) != 0) return RD_EAGAIN;

  int ids[RD_RES_MAX_GPUS];
  int64_t shares[RD_RES_MAX_GPUS];
  int n = res_gpu_place(l, req->gpu, ids, shares);
  RES_CHECK(n >= 0);   /* kinds_short said the GPU fits */

  l->avail.cpu -= req->cpu;
  l->avail.memory -= req->memory;
  l->avail.gpu -= req->gpu;
  for (int i = 0; i < n; i++) l->gpu_avail[ids[i]] -= shares[i];
  for (int i = 0; i < req->ncustom; i++) {
    if (req->custom[i].amount == 0) continue;
    int j = res_custom_find(&l->total, req->custom[i].name);
    l->avail.custom[j].amount -= req->custom[i].amount;
  }

  memset(g, 0, sizeof(*g));
  g->req = *req;
  g->ngpus = n;
  for (int i = 0; i < n; i++) {
    g->gpu_ids[i] = l->gpu_dev[ids[i]];
    g->gpu_share[i] = shares[i];
  }
  return 0;
}

void rd_res_lend_cpu(rd_res_ledger *l, const rd_res_grant *g) {
  RES_CHECK(g->req.cpu >= 0 && l->avail.cpu + g->req.cpu <= l->total.cpu);
  l->avail.cpu += g->req.cpu;
}

void rd_res_retake_cpu(rd_res_ledger *l, const rd_res_grant *g) { l->avail.cpu -= g->req.cpu; }

void rd_res_release(rd_res_ledger *l, const rd_res_grant *g) {
  const rd_resources *r = &g->req;
  RES_CHECK(rd_res_validate(r) == 0);
  RES_CHECK(g->ngpus >= 0 && g->ngpus <= l->ngpus);
  int64_t gpu_sum = 0, back[RD_RES_MAX_GPUS] = {0};
  int slot[RD_RES_MAX_GPUS];
  for (int i = 0; i < g->ngpus; i++) {
    int id = slot[i] = res_gpu_slot(l, g->gpu_ids[i]);
    RES_CHECK(id >= 0);
    RES_CHECK(g->gpu_share[i] > 0 && g->gpu_share[i] <= RD_RES_UNIT);
    back[id] += g->gpu_share[i];
    RES_CHECK(l->gpu_avail[id] + back[id] <= l->gpu_cap[id]);
    gpu_sum += g->gpu_share[i];
  }
  RES_CHECK(gpu_sum == r->gpu);
  RES_CHECK(l->avail.cpu + r->cpu <= l->total.cpu);
  RES_CHECK(l->avail.memory + r->memory <= l->total.memory);
  RES_CHECK(l->avail.gpu + r->gpu <= l->total.gpu);
  for (int i = 0; i < r->ncustom; i++) {
    if (r->custom[i].amount == 0) continue;
    int j = res_custom_find(&l->total, r->custom[i].name);
    RES_CHECK(j >= 0);
    RES_CHECK(l->avail.custom[j].amount + r->custom[i].amount <= l->total.custom[j].amount);
  }

  /* Checked in full above, so the ledger is never left half-restored. */
  l->avail.cpu += r->cpu;
  l->avail.memory += r->memory;
  l->avail.gpu += r->gpu;
  for (int i = 0; i < g->ngpus; i++) l->gpu_avail[slot[i]] += g->gpu_share[i];
  for (int i = 0; i < r->ncustom; i++) {
    if (r->custom[i].amount == 0) continue;
    int j = res_custom_find(&l->total, r->custom[i].name);
    l->avail.custom[j].amount += r->custom[i].amount;
  }
}

void rd_res_grant_visible_devices(const rd_res_grant *g, char *buf, int len) {
  if (buf == NULL || len <= 0) return;
  buf[0] = '\0';
  if (g == NULL) return;
  int off = 0;
  for (int i = 0; i < g->ngpus && i < RD_RES_MAX_GPUS; i++) {
    int w = snprintf(buf + off, (size_t)(len - off), "%s%d", i ? "," : "", g->gpu_ids[i]);
    if (w < 0 || w >= len - off) {   /* never hand out a truncated id list */
      buf[0] = '\0';
      return;
    }
    off += w;
  }
}
