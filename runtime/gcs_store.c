/* runtime/gcs_store.c - the in-memory GCS store: one chained hash table over
 * (table, key), grown by doubling.  Scans sort the matching keys so every
 * back end answers in the same (key) order. */
#include "gcs_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "raydist/error.h"

typedef struct mem_entry {
  struct mem_entry *next;
  uint64_t hash;
  size_t tlen, klen, vlen;
  char *tk;          /* table '\0' key, then the value right after */
} mem_entry;

typedef struct mem_store {
  rd_gcs_store base;
  mem_entry **slots;
  size_t nslots, count;
} mem_store;

static uint64_t fnv(const char *table, const char *key, size_t klen) {
  uint64_t h = 1469598103934665603ull;
  for (const char *p = table; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
  h = (h ^ 0xff) * 1099511628211ull;
  for (size_t i = 0; i < klen; i++) h = (h ^ (uint8_t)key[i]) * 1099511628211ull;
  return h;
}

static mem_entry **mem_find(mem_store *m, const char *table, const char *key, size_t klen,
                            uint64_t h) {
  size_t tlen = strlen(table);
  mem_entry **pp = &m->slots[h & (m->nslots - 1)];
  for (; *pp; pp = &(*pp)->next) {
    mem_entry *e = *pp;
    if (e->hash == h && e->tlen == tlen && e->klen == klen && !memcmp(e->tk, table, tlen) &&
        !memcmp(e->tk + tlen + 1, key, klen))
      return pp;
  }
  return pp;
}

static int mem_grow(mem_store *m) {
  size_t n = m->nslots * 2;
  mem_entry **slots = calloc(n, sizeof(*slots));
  if (!slots) return RD_ENOMEM;
  for (size_t i = 0; i < m->nslots; i++) {
    for (mem_entry *e = m->slots[i], *next; e; e = next) {
      next = e->next;
      e->next = slots[e->hash & (n - 1)];
      slots[e->hash & (n - 1)] = e;
    }
  }
  free(m->slots);
  m->slots = slots;
  m->nslots = n;
  return 0;
}

static int mem_put(rd_gcs_store *s, const char *table, const char *key, size_t klen,
                   const void *val, size_t vlen) {
  mem_store *m = (mem_store *)s;
  if (m->count >= m->nslots && mem_grow(m) != 0) return RD_ENOMEM;
  uint64_t h = fnv(table, key, klen);
  size_t tlen = strlen(table);
  mem_entry *e = malloc(sizeof(*e));
  char *tk = malloc(tlen + 1 + klen + vlen + 1);
  if (!e || !tk) {
    free(e);
    free(tk);
    return RD_ENOMEM;
  }
  memcpy(tk, table, tlen + 1);
  memcpy(tk + tlen + 1, key, klen);
  if (vlen) memcpy(tk + tlen + 1 + klen, val, vlen);
  *e = (mem_entry){NULL, h, tlen, klen, vlen, tk};
  mem_entry **pp = mem_find(m, table, key, klen, h);
  if (*pp) {   /* replace in place */
    mem_entry *old = *pp;
    e->next = old->next;
    *pp = e;
    free(old->tk);
    free(old);
  } else {
    *pp = e;
    m->count++;
  }
  return 0;
}

static const char *val_of(const mem_entry *e) { return e->tk + e->tlen + 1 + e->klen; }

static int mem_get(rd_gcs_store *s, const char *table, const char *key, size_t klen, void **val,
                   size_t *vlen) {
  mem_store *m = (mem_store *)s;
  mem_entry *e = *mem_find(m, table, key, klen, fnv(table, key, klen));
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
  mem_entry *e = *mem_find(m, table, key, klen, fnv(table, key, klen));
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
  mem_entry **pp = mem_find(m, table, key, klen, fnv(table, key, klen));
  if (!*pp) return RD_ENOENT;
  mem_entry *e = *pp;
  *pp = e->next;
  free(e->tk);
  free(e);
  m->count--;
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
  for (size_t i = 0; i < m->nslots; i++) {
    for (mem_entry *e = m->slots[i]; e; e = e->next) {
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

static void mem_destroy(rd_gcs_store *s) {
  mem_store *m = (mem_store *)s;
  for (size_t i = 0; i < m->nslots; i++) {
    for (mem_entry *e = m->slots[i], *next; e; e = next) {
      next = e->next;
      free(e->tk);
      free(e);
    }
  }
  free(m->slots);
  free(m);
}

static const rd_gcs_store_ops mem_ops = {"memory", mem_put,  mem_get, mem_read,
                                         mem_del,  mem_scan, NULL,    mem_destroy};

int rd__gcs_mem_vlen(rd_gcs_store *s, const char *table, const char *key, size_t klen,
                     size_t *vlen) {
  mem_store *m = (mem_store *)s;
  mem_entry *e = *mem_find(m, table, key, klen, fnv(table, key, klen));
  if (!e) return RD_ENOENT;
  *vlen = e->vlen;
  return 0;
}

void rd__gcs_mem_each(rd_gcs_store *s, rd__gcs_mem_each_cb cb, void *arg) {
  mem_store *m = (mem_store *)s;
  for (size_t i = 0; i < m->nslots; i++)
    for (mem_entry *e = m->slots[i]; e; e = e->next)
      if (cb(arg, e->tk, e->tk + e->tlen + 1, e->klen, val_of(e), e->vlen)) return;
}

rd_gcs_store *rd_gcs_store_memory_create(void) {
  mem_store *m = calloc(1, sizeof(*m));
  if (!m) return NULL;
  m->nslots = 64;
  m->slots = calloc(m->nslots, sizeof(*m->slots));
  if (!m->slots) {
    free(m);
    return NULL;
  }
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
