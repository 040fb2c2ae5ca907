/* objectstore/u64map.h - a small open-addressing hash map from uint64 to pointer.
 *
 * Shared by the allocator (live extents by offset) and the store (objects by
 * id).  Linear probing with backward-shift deletion, so there are no tombstones
 * and lookups stay short.  It is resized only by rd__u64map_reserve(): grown
 * past a load of 1/2, and shrunk again once a burst has gone (below a load
 * of 1/8, to RD_U64MAP_KEEP slots at least), so put and del never allocate
 * or move entries to another table, and a long-lived process does not keep
 * the table of its busiest moment.  Values must not be NULL. */
#ifndef RD_OBJECTSTORE_U64MAP_H
#define RD_OBJECTSTORE_U64MAP_H

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct rd__u64slot {
  uint64_t key;
  void *val; /* NULL = empty slot */
} rd__u64slot;

typedef struct rd__u64map {
  rd__u64slot *slots;
  uint64_t mask;  /* number of slots - 1 (a power of two minus one) */
  uint64_t count;
} rd__u64map;

static inline uint64_t rd__u64map_hash(uint64_t x) {
  /* splitmix64 finalizer: ids and offsets are often sequential or aligned. */
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

/* nslots must be a power of two.  Returns 0 or -1 (out of memory). */
static inline int rd__u64map_init(rd__u64map *m, uint64_t nslots) {
  assert(nslots >= 2 && (nslots & (nslots - 1)) == 0);
  m->slots = (rd__u64slot *)calloc(nslots, sizeof(*m->slots));
  if (m->slots == NULL)
    return -1;
  m->mask = nslots - 1;
  m->count = 0;
  return 0;
}

static inline void rd__u64map_free(rd__u64map *m) {
  free(m->slots);
  m->slots = NULL;
  m->mask = 0;
  m->count = 0;
}

static inline void *rd__u64map_get(const rd__u64map *m, uint64_t key) {
  uint64_t i = rd__u64map_hash(key) & m->mask;
  while (m->slots[i].val != NULL) {
    if (m->slots[i].key == key)
      return m->slots[i].val;
    i = (i + 1) & m->mask;
  }
  return NULL;
}

static inline void rd__u64map_insert_slot(rd__u64slot *slots, uint64_t mask,
                                          uint64_t key, void *val) {
  uint64_t i = rd__u64map_hash(key) & mask;
  while (slots[i].val != NULL)
    i = (i + 1) & mask;
  slots[i].key = key;
  slots[i].val = val;
}

/* Tables of at most this many slots are never shrunk (16 KiB). */
#define RD_U64MAP_KEEP 1024

static inline int rd__u64map_rehash(rd__u64map *m, uint64_t nslots) {
  rd__u64slot *slots = (rd__u64slot *)calloc(nslots, sizeof(*slots));
  if (slots == NULL)
    return -1;
  for (uint64_t i = 0; i <= m->mask; i++)
    if (m->slots[i].val != NULL)
      rd__u64map_insert_slot(slots, nslots - 1, m->slots[i].key, m->slots[i].val);
  free(m->slots);
  m->slots = slots;
  m->mask = nslots - 1;
  return 0;
}

/* Make room for `n` entries in total at a load factor of at most 1/2, and
 * give back room when n is under 1/8 of the slots (to a load of at most
 * 1/4, so that growing again takes as many puts as it shrank by).
 * Returns 0 or -1 (out of memory when growing; the map is unchanged).
 * It moves entries, so no one may be walking the slots meanwhile. */
static inline int rd__u64map_reserve(rd__u64map *m, uint64_t n) {
  uint64_t nslots = m->mask + 1;
  if (n <= nslots / 2) {
    if (nslots <= RD_U64MAP_KEEP || n >= nslots / 8)
      return 0;
    while (nslots > RD_U64MAP_KEEP && n < nslots / 8)
      nslots /= 2;
    (void)rd__u64map_rehash(m, nslots);   /* no memory for the smaller one: keep the big one */
    return 0;
  }
  while (n > nslots / 2) {
    if (nslots > (UINT64_MAX >> 2))
      return -1;
    nslots *= 2;
  }
  return rd__u64map_rehash(m, nslots);
}

/* `key` must be absent and room reserved for it. */
static inline void rd__u64map_put(rd__u64map *m, uint64_t key, void *val) {
  assert(val != NULL);
  assert(m->count + 1 <= (m->mask + 1) / 2);
  rd__u64map_insert_slot(m->slots, m->mask, key, val);
  m->count++;
}

/* Remove `key` if present; returns its value or NULL. */
static inline void *rd__u64map_del(rd__u64map *m, uint64_t key) {
  uint64_t i = rd__u64map_hash(key) & m->mask;
  while (m->slots[i].val != NULL && m->slots[i].key != key)
    i = (i + 1) & m->mask;
  void *val = m->slots[i].val;
  if (val == NULL)
    return NULL;
  /* Backward shift: pull later members of the probe run into the hole when
   * their home slot does not lie cyclically in (hole, j]. */
  uint64_t j = i;
  for (;;) {
    j = (j + 1) & m->mask;
    if (m->slots[j].val == NULL)
      break;
    uint64_t k = rd__u64map_hash(m->slots[j].key) & m->mask;
    int home_between = (i <= j) ? (i < k && k <= j) : (i < k || k <= j);
    if (!home_between) {
      m->slots[i] = m->slots[j];
      i = j;
    }
  }
  m->slots[i].val = NULL;
  m->count--;
  return val;
}

#endif
