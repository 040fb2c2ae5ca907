/* tests/store/test_tables.c - the two hash tables under the runtime:
 * objectstore/u64map.h (open addressing: objects, extents, requests) and
 * rd__htab in runtime/common.c (chained: clients, envs, the GCS store).
 *
 * Random puts and deletes are checked against a plain array after every
 * step; then a burst of a million entries is made and let go, and the
 * tables must give back their slots at the next add (a process that served
 * one burst must not keep its table for good) and still hold every entry
 * that stayed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../check.h"
#include "common.h"
#include "u64map.h"

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

#define KEYS 4096

/* u64map against a reference: present[k] says whether key k is in. */
static void u64map_random(void) {
  rd__u64map m;
  CHECK(rd__u64map_init(&m, 64) == 0);
  static char present[KEYS];
  static uint64_t vals[KEYS];
  size_t count = 0;
  for (int step = 0; step < 400000; step++) {
    uint64_t k = next_rand() % KEYS;
    /* phases: fill up, drain, fill, ... so the table grows and shrinks */
    int adding = (step / 50000) % 2 == 0 ? next_rand() % 4 != 0 : next_rand() % 4 == 0;
    if (adding && !present[k]) {
      CHECK(rd__u64map_reserve(&m, m.count + 1) == 0);
      rd__u64map_put(&m, k * 0x10001ull, &vals[k]);
      present[k] = 1;
      count++;
    } else if (!adding && present[k]) {
      CHECK(rd__u64map_del(&m, k * 0x10001ull) == &vals[k]);
      present[k] = 0;
      count--;
    } else if (!adding) {
      CHECK(rd__u64map_del(&m, k * 0x10001ull) == NULL);
    }
    CHECK_EQ(m.count, count);
    CHECK(m.count <= (m.mask + 1) / 2);
    if (step % 997 == 0)
      for (uint64_t j = 0; j < KEYS; j++) CHECK(rd__u64map_get(&m, j * 0x10001ull) == (present[j] ? &vals[j] : NULL));
  }
  rd__u64map_free(&m);
}

static void u64map_burst(void) {
  rd__u64map m;
  CHECK(rd__u64map_init(&m, 1024) == 0);
  const uint64_t n = 1000000;
  static char v;
  for (uint64_t i = 1; i <= n; i++) {
    CHECK(rd__u64map_reserve(&m, m.count + 1) == 0);
    rd__u64map_put(&m, i, &v);
  }
  uint64_t big = m.mask + 1;
  CHECK(big >= 2 * n);
  for (uint64_t i = 1; i <= n; i++)
    if (i % 1000) CHECK(rd__u64map_del(&m, i) == &v);   /* 1000 stay */
  CHECK_EQ(m.mask + 1, big);                             /* del never moves entries */
  CHECK(rd__u64map_reserve(&m, m.count + 1) == 0);       /* the next add gives back */
  uint64_t small = m.mask + 1;
  printf("u64map: %llu slots for 1M entries, %llu for the 1000 left\n", (unsigned long long)big,
         (unsigned long long)small);
  CHECK(small <= 8192 && small >= 4 * (m.count + 1));
  for (uint64_t i = 1; i <= n; i++) CHECK(rd__u64map_get(&m, i) == (i % 1000 ? NULL : &v));
  /* a map at its floor stays there */
  for (uint64_t i = 1000; i <= n; i += 1000) CHECK(rd__u64map_del(&m, i) == &v);
  CHECK(rd__u64map_reserve(&m, 1) == 0);
  CHECK_EQ(m.mask + 1, RD_U64MAP_KEEP);
  CHECK(rd__u64map_reserve(&m, 1) == 0);
  CHECK_EQ(m.mask + 1, RD_U64MAP_KEEP);
  rd__u64map_free(&m);
}

typedef struct ent {
  rd__hlink link;
  uint64_t key;
} ent;

static ent *htab_find(const rd__htab *t, uint64_t key) {
  uint64_t h = rd__hash_bytes(RD_HASH_INIT, &key, sizeof(key));
  for (rd__hlink *l = rd__htab_bucket(t, h); l; l = l->next)
    if (l->hash == h && ((ent *)l)->key == key) return (ent *)l;
  return NULL;
}

static int keep_odd(rd__hlink *l, void *arg) {
  (void)arg;
  return ((ent *)l)->key % 2;
}
static void drop_none(rd__hlink *l, void *arg) {
  (void)l;
  (void)arg;
}

static void htab_random_and_burst(void) {
  static ent es[KEYS];
  static char present[KEYS];
  rd__htab t = {0};
  size_t count = 0;
  for (int step = 0; step < 200000; step++) {
    uint64_t k = next_rand() % KEYS;
    int adding = (step / 25000) % 2 == 0 ? next_rand() % 4 != 0 : next_rand() % 4 == 0;
    if (adding && !present[k]) {
      es[k].key = k;
      es[k].link.hash = rd__hash_bytes(RD_HASH_INIT, &k, sizeof(k));
      CHECK(rd__htab_add(&t, &es[k].link) == 0);
      present[k] = 1;
      count++;
    } else if (!adding && present[k]) {
      rd__htab_del(&t, &es[k].link);
      present[k] = 0;
      count--;
    }
    CHECK_EQ(t.count, count);
    if (step % 499 == 0)
      for (uint64_t j = 0; j < KEYS; j++) CHECK(htab_find(&t, j) == (present[j] ? &es[j] : NULL));
  }
  rd__htab_free(&t, drop_none, NULL);
  memset(present, 0, sizeof(present));

  /* a burst, then most of it swept */
  const size_t n = 1000000;
  ent *many = calloc(n, sizeof(*many));
  CHECK(many != NULL);
  for (size_t i = 0; i < n; i++) {
    many[i].key = i;
    many[i].link.hash = rd__hash_bytes(RD_HASH_INIT, &many[i].key, sizeof(uint64_t));
    CHECK(rd__htab_add(&t, &many[i].link) == 0);
  }
  size_t big = t.mask + 1;
  CHECK(big >= n);
  for (size_t i = 0; i < n; i++)
    if (i % 2 == 0 && i >= 2000) rd__htab_del(&t, &many[i].link);
  CHECK(rd__htab_sweep(&t, keep_odd, drop_none, NULL) == 1000);   /* the even ones under 2000 */
  CHECK_EQ(t.count, n / 2);
  CHECK_EQ(t.mask + 1, big);                                       /* neither moves entries */
  for (size_t i = 1; i < n; i += 2)
    if (i >= 2000) rd__htab_del(&t, &many[i].link);               /* 1000 odd ones under 2000 stay */
  ent extra = {.key = n};
  extra.link.hash = rd__hash_bytes(RD_HASH_INIT, &extra.key, sizeof(uint64_t));
  CHECK(rd__htab_add(&t, &extra.link) == 0);
  size_t small = t.mask + 1;
  printf("htab: %zu buckets for 1M entries, %zu for the 1001 left\n", big, small);
  CHECK(small <= 8192 && small >= 4 * t.count);
  for (size_t i = 0; i < n; i++) CHECK(htab_find(&t, i) == (i % 2 && i < 2000 ? &many[i] : NULL));
  CHECK(htab_find(&t, n) == &extra);
  rd__htab_free(&t, drop_none, NULL);
  CHECK(t.b == NULL && t.count == 0);
  free(many);
}

int main(void) {
  u64map_random();
  u64map_burst();
  htab_random_and_burst();
  printf("ok\n");
  return 0;
}
