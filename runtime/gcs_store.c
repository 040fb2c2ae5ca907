/* runtime/gcs_store.c - the in-memory GCS store: one chained hash table
 * (rd__htab, common.h) over (table, key).  Scans sort the matching keys so every
 * back end answers in the same (key) order. */
#include "gcs_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "raydist/error.h"

typedef struct mem_entry {
  rd__hlink link;    /* in mem_store.t (first: a link is its entry) */
  size_t tlen, klen, vlen;
  char *tk;          /* table '\0' key, then the value right after */
} mem_entry;

typedef struct mem_store {
  rd_gcs_store base;
  rd__htab t;
} mem_store;

static uint64_t mem_hash(const char *table, const char *key, size_t klen) {
  uint64_t h = rd__hash_bytes(RD_HASH_INIT, table, strlen(table) + 1);
  return rd__hash_bytes(h, key, klen);
}

static mem_entry *mem_find(mem_store *m, const char *table, const char *key, size_t klen, uint64_t h) {
  size_t tlen = strlen(table);
  for (rd__hlink *l = rd__htab_bucket(&m->t, h); l; l = l->next) {
    mem_entry *e = (mem_entry *)l;
    if (l->hash == h && e->tlen == tlen && e->klen == klen && !memcmp(e->tk, table, tlen) &&
        !memcmp(e->tk + tlen + 1, key, klen))
      return e;
  }
  return NULL;
}

static int mem_put(rd_gcs_store *s, const char *table, const char *key, size_t klen,
                   const void *val, size_t vlen) {
  mem_store *m = (mem_store *)s;
  uint64_t h = mem_hash(table, key, klen);
  size_t tlen = strlen(table);
  char *tk = malloc(tlen + 1 + klen + vlen + 1);
  if (!tk) return RD_ENOMEM;
  memcpy(tk, table, tlen + 1);
  memcpy(tk + tlen + 1, key, klen);
  if (vlen) memcpy(tk + tlen + 1 + klen, val, vlen);
  mem_entry *e = mem_find(m, table, key, klen, h);
  if (e) {   /* replace in place */
    free(e->tk);
    e->tk = tk;
    e->vlen = vlen;
    return 0;
  }
  if (!(e = malloc(sizeof(*e)))) {
    free(tk);
    return RD_ENOMEM;
  }
  *e = (mem_entry){{NULL, h}, tlen, klen, vlen, tk};
  if (rd__htab_add(&m->t, &e->link) != 0) {
    free(tk);
    free(e);
    return RD_ENOMEM;
  }
  return 0;
}

static const char *val_of(const mem_entry *e) { return e->tk + e->tlen + 1 + e->klen; }

static int mem_get(rd_gcs_store *s, const char *table, const char *key, size_t klen, void **val,
                   size_t *vlen) {
  mem_store *m = (mem_store *)s;
  mem_entry *e = mem_find(m, table, key, klen, mem_hash(table, key, klen));
  if (!e) return RD_ENOENT;
  void *p = malloc(e->vlen ? e->vlen : 1);
  if (!p) return RD_ENOMEM;
  memcpy(p, val_of(e), e->vlen);
  *val = p;
  *vlen = e->vlen;
  return 0;
}

static int mem_read(rd_gcs_store *s, const char *table, const char *key, size_t klen,
                    uint64_t offset, void *buf, size_t len, size_t *n, uint64_t *total) {
  mem_store *m = (mem_store *)s;
  mem_entry *e = mem_find(m, table, key, klen, mem_hash(table, key, klen));
  if (!e) return RD_ENOENT;
  *total = e->vlen;
  if (offset > e->vlen) return RD_EINVAL;
  size_t take = e->vlen - offset < len ? (size_t)(e->vlen - offset) : len;
  memcpy(buf, val_of(e) + offset, take);
  *n = take;
  return 0;
}

static int mem_del(rd_gcs_store *s, const char *table, const char *key, size_t klen) {
  mem_store *m = (mem_store *)s;
  mem_entry *e = mem_find(m, table, key, klen, mem_hash(table, key, klen));
  if (!e) return RD_ENOENT;
  rd__htab_del(&m->t, &e->link);
  free(e->tk);
  free(e);
  return 0;
}

static int key_cmp(const void *a, const void *b) {
  const mem_entry *x = *(mem_entry *const *)a, *y = *(mem_entry *const *)b;
  size_t n = x->klen < y->klen ? x->klen : y->klen;
  int c = memcmp(x->tk + x->tlen + 1, y->tk + y->tlen + 1, n);
  return c ? c : (x->klen > y->klen) - (x->klen < y->klen);
}

static int mem_scan(rd_gcs_store *s, const char *table, const char *prefix, size_t plen,
                    rd_gcs_store_scan_cb cb, void *arg) {
  mem_store *m = (mem_store *)s;
  size_t tlen = strlen(table), n = 0, cap = 16;
  mem_entry **hits = malloc(cap * sizeof(*hits));
  if (!hits) return RD_ENOMEM;
  for (size_t i = 0; m->t.b && i <= m->t.mask; i++) {
    for (rd__hlink *l = m->t.b[i]; l; l = l->next) {
      mem_entry *e = (mem_entry *)l;
      if (e->tlen != tlen || memcmp(e->tk, table, tlen) || e->klen < plen ||
          memcmp(e->tk + tlen + 1, prefix, plen))
        continue;
      if (n == cap) {
        mem_entry **h2 = realloc(hits, 2 * cap * sizeof(*hits));
        if (!h2) {
          free(hits);
          return RD_ENOMEM;
        }
        hits = h2;
        cap *= 2;
      }
      hits[n++] = e;
    }
  }
  qsort(hits, n, sizeof(*hits), key_cmp);
  for (size_t i = 0; i < n; i++)
    if (cb(arg, hits[i]->tk + tlen + 1, hits[i]->klen, val_of(hits[i]), hits[i]->vlen)) break;
  free(hits);
  return 0;
}

static void mem_drop(rd__hlink *l, void *arg) {
  (void)arg;
  free(((mem_entry *)l)->tk);
  free(l);
}

static void mem_destroy(rd_gcs_store *s) {
  mem_store *m = (mem_store *)s;
  rd__htab_free(&m->t, mem_drop, NULL);
  free(m);
}

static const rd_gcs_store_ops mem_ops = {"memory", mem_put,  mem_get, mem_read,
                                         mem_del,  mem_scan, NULL,    mem_destroy};

int rd__gcs_mem_vlen(rd_gcs_store *s, const char *table, const char *key, size_t klen,
                     size_t *vlen) {
  mem_store *m = (mem_store *)s;
  mem_entry *e = mem_find(m, table, key, klen, mem_hash(table, key, klen));
  if (!e) return RD_ENOENT;
  *vlen = e->vlen;
  return 0;
}

void rd__gcs_mem_each(rd_gcs_store *s, rd__gcs_mem_each_cb cb, void *arg) {
  mem_store *m = (mem_store *)s;
  for (size_t i = 0; m->t.b && i <= m->t.mask; i++)
    for (rd__hlink *l = m->t.b[i]; l; l = l->next) {
      const mem_entry *e = (const mem_entry *)l;
      if (cb(arg, e->tk, e->tk + e->tlen + 1, e->klen, val_of(e), e->vlen)) return;
    }
}

rd_gcs_store *rd_gcs_store_memory_create(void) {
  mem_store *m = calloc(1, sizeof(*m));
  if (!m) return NULL;
  m->base.ops = &mem_ops;
  return &m->base;
}

static rd_gcs_store *memory_open(const char *arg, char *err, size_t errlen) {
  (void)arg;
  rd_gcs_store *s = rd_gcs_store_memory_create();
  if (!s) snprintf(err, errlen, "out of memory");
  return s;
}

/* The registry of back ends, by the spec's prefix: add new ones here. */
static const struct {
  const char *prefix;   /* "name" alone, or "name:" followed by an argument */
  rd_gcs_store *(*open)(const char *arg, char *err, size_t errlen);
} backends[] = {{"memory", memory_open}, {"file:", rd_gcs_store_file_open}};

rd_gcs_store *rd_gcs_store_open(const char *spec, char *err, size_t errlen) {
  for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
    const char *p = backends[i].prefix;
    size_t n = strlen(p);
    if (p[n - 1] == ':' ? !strncmp(spec, p, n) && spec[n] : !strcmp(spec, p))
      return backends[i].open(spec + n, err, errlen);
  }
  snprintf(err, errlen, "unknown GCS storage '%s' (memory, file:PATH)", spec);
  return NULL;
}
