/* tests/store/test_alloc.c - unit tests of the store's extent allocator.
 *
 * Covers alignment, best fit, coalescing, exhaustion and bad frees, a 200k-op
 * randomized run against a brute-force unit bitmap that predicts every offset
 * exactly, and the two fragmentation concerns from the store design. */

#include <stdint.h>
#include <string.h>

#include "alloc.h"
#include "check.h"
#include "raydist/error.h"

#define KiB (1024ull)
#define MiB (1024ull * 1024ull)
#define U RD_ALLOC_ALIGN

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) { /* xorshift64* */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 2685821657736338717ull;
}

static void stats(rd_alloc *a, rd_alloc_stats *st) {
  rd_alloc_get_stats(a, st);
  CHECK(st->used + st->free == st->capacity);
}

static void test_basic(void) {
  rd_alloc *a;
  rd_alloc_stats st;
  uint64_t o1, o2, o3, o4;
  CHECK_EQ(rd_alloc_new(&a, 1 * MiB), 0);
  stats(a, &st);
  CHECK_EQ(st.capacity, 1 * MiB);
  CHECK_EQ(st.free, 1 * MiB);
  CHECK_EQ(st.largest_free, 1 * MiB);
  CHECK_EQ(st.num_free_extents, 1);

  CHECK_EQ(rd_alloc_alloc(a, 100, &o1), 0);
  CHECK_EQ(o1, 0);
  CHECK_EQ(rd_alloc_alloc(a, 0, &o2), 0); /* size 0 -> one unit */
  CHECK_EQ(o2, 128);
  CHECK_EQ(rd_alloc_alloc(a, 1, &o3), 0);
  CHECK_EQ(o3, 192);
  CHECK_EQ(rd_alloc_alloc(a, 64, &o4), 0);
  CHECK_EQ(o4, 256);
  CHECK(o1 % U == 0 && o2 % U == 0 && o3 % U == 0 && o4 % U == 0);
  stats(a, &st);
  CHECK_EQ(st.used, 128 + 64 + 64 + 64);
  CHECK_EQ(st.num_allocs, 4);

  /* bad frees */
  CHECK_EQ(rd_alloc_free(a, 1), RD_EINVAL);
  CHECK_EQ(rd_alloc_free(a, 64), RD_EINVAL);       /* inside an allocation */
  CHECK_EQ(rd_alloc_free(a, 512 * KiB), RD_EINVAL); /* in free space */
  CHECK_EQ(rd_alloc_free(a, 4 * MiB), RD_EINVAL);   /* out of range */
  CHECK_EQ(rd_alloc_free(a, o2), 0);
  CHECK_EQ(rd_alloc_free(a, o2), RD_EINVAL);        /* double free */
  CHECK_EQ(rd__alloc_check(a), 0);

  /* three-way coalescing: free o1 and o3 around the hole at o2 */
  CHECK_EQ(rd_alloc_free(a, o1), 0);
  CHECK_EQ(rd_alloc_free(a, o3), 0);
  stats(a, &st);
  CHECK_EQ(st.num_free_extents, 2); /* [0,256) and the tail */
  CHECK_EQ(rd_alloc_free(a, o4), 0);
  stats(a, &st);
  CHECK_EQ(st.num_free_extents, 1);
  CHECK_EQ(st.largest_free, 1 * MiB);
  CHECK_EQ(st.used, 0);
  CHECK_EQ(rd__alloc_check(a), 0);
  rd_alloc_destroy(a);

  /* capacity rounds down to the alignment; capacity 0 is an empty range */
  CHECK_EQ(rd_alloc_new(&a, 1000), 0);
  stats(a, &st);
  CHECK_EQ(st.capacity, 960);
  rd_alloc_destroy(a);
  CHECK_EQ(rd_alloc_new(&a, 0), 0);
  CHECK_EQ(rd_alloc_alloc(a, 0, &o1), RD_ESTORE_FULL);
  CHECK_EQ(rd_alloc_free(a, 0), RD_EINVAL);
  CHECK_EQ(rd__alloc_check(a), 0);
  rd_alloc_destroy(a);
  CHECK_EQ(rd_alloc_new(NULL, 10), RD_EINVAL);
}

static void test_exhaustion(void) {
  rd_alloc *a;
  uint64_t o, big;
  CHECK_EQ(rd_alloc_new(&a, 4096), 0);
  CHECK_EQ(rd_alloc_alloc(a, 4097, &o), RD_ESTORE_FULL);
  CHECK_EQ(rd_alloc_alloc(a, UINT64_MAX, &o), RD_ESTORE_FULL);
  CHECK_EQ(rd_alloc_alloc(a, 4096, &big), 0);
  CHECK_EQ(rd_alloc_alloc(a, 1, &o), RD_ESTORE_FULL);
  CHECK_EQ(rd_alloc_free(a, big), 0);
  /* fill with units, then nothing fits */
  for (int i = 0; i < 64; i++) {
    CHECK_EQ(rd_alloc_alloc(a, 64, &o), 0);
    CHECK_EQ(o, (uint64_t)i * 64);
  }
  CHECK_EQ(rd_alloc_alloc(a, 1, &o), RD_ESTORE_FULL);
  /* free every other unit: 2 KiB free, but no 128-byte extent */
  for (int i = 0; i < 64; i += 2)
    CHECK_EQ(rd_alloc_free(a, (uint64_t)i * 64), 0);
  CHECK_EQ(rd_alloc_alloc(a, 65, &o), RD_ESTORE_FULL);
  rd_alloc_stats st;
  stats(a, &st);
  CHECK_EQ(st.free, 2048);
  CHECK_EQ(st.largest_free, 64);
  CHECK_EQ(st.num_free_extents, 32);
  for (int i = 1; i < 64; i += 2)
    CHECK_EQ(rd_alloc_free(a, (uint64_t)i * 64), 0);
  stats(a, &st);
  CHECK_EQ(st.num_free_extents, 1);
  CHECK_EQ(st.largest_free, 4096);
  CHECK_EQ(rd__alloc_check(a), 0);
  rd_alloc_destroy(a);
}

static void test_best_fit(void) {
  rd_alloc *a;
  uint64_t o[16], x;
  CHECK_EQ(rd_alloc_new(&a, 64 * KiB), 0);
  /* layout of units: holes of 3, 1, 2, 1 units separated by live units */
  static const int sizes[] = {3, 1, 1, 1, 2, 1, 1, 1};
  for (int i = 0; i < 8; i++)
    CHECK_EQ(rd_alloc_alloc(a, (uint64_t)sizes[i] * U, &o[i]), 0);
  CHECK_EQ(rd_alloc_free(a, o[0]), 0); /* hole of 3 at 0 */
  CHECK_EQ(rd_alloc_free(a, o[2]), 0); /* hole of 1 at unit 4 */
  CHECK_EQ(rd_alloc_free(a, o[4]), 0); /* hole of 2 at unit 6 */
  CHECK_EQ(rd_alloc_free(a, o[6]), 0); /* hole of 1 at unit 9 */
  CHECK_EQ(rd__alloc_check(a), 0);
  CHECK_EQ(rd_alloc_alloc(a, 2 * U, &x), 0);
  CHECK_EQ(x, 6 * U);                  /* exact fit */
  CHECK_EQ(rd_alloc_alloc(a, U, &x), 0);
  CHECK_EQ(x, 4 * U);                  /* tie between units 4 and 9: lower */
  CHECK_EQ(rd_alloc_alloc(a, U, &x), 0);
  CHECK_EQ(x, 9 * U);
  CHECK_EQ(rd_alloc_alloc(a, 2 * U, &x), 0);
  CHECK_EQ(x, 0);                      /* 3-unit hole beats the tail */
  CHECK_EQ(rd_alloc_alloc(a, 2 * U, &x), 0);
  CHECK_EQ(x, 11 * U);                 /* only the tail is left */
  CHECK_EQ(rd__alloc_check(a), 0);
  rd_alloc_destroy(a);
}

/* Randomized run against a model of one byte per unit.  Because free space
 * is coalesced immediately, the free extents are exactly the maximal runs of
 * free units, so the model predicts every offset best fit must choose. */
#define MODEL_UNITS 2048
static uint8_t model[MODEL_UNITS];
static uint64_t live_off[MODEL_UNITS], live_len[MODEL_UNITS];

static void test_random_model(void) {
  rd_alloc *a;
  rd_alloc_stats st;
  int nlive = 0;
  uint64_t used_units = 0;
  memset(model, 0, sizeof(model));
  CHECK_EQ(rd_alloc_new(&a, MODEL_UNITS * U), 0);
  for (int op = 0; op < 200000; op++) {
    uint64_t r = rnd();
    int do_alloc = nlive == 0 || (r % 100) < (used_units < MODEL_UNITS * 3 / 4 ? 55 : 40);
    if (r % 997 == 0) {
      /* a bad free: an offset that does not start a live allocation */
      uint64_t u = rnd() % MODEL_UNITS;
      int starts = 0;
      for (int i = 0; i < nlive; i++)
        starts |= live_off[i] == u;
      if (!starts)
        CHECK_EQ(rd_alloc_free(a, u * U + (rnd() % 2 ? 0 : 8)), RD_EINVAL);
    } else if (do_alloc) {
      uint64_t bytes = (r >> 8) % 8 == 0 ? (r >> 16) % (256 * U) : (r >> 16) % (16 * U);
      uint64_t units = bytes == 0 ? 1 : (bytes + U - 1) / U;
      /* expected: smallest free run >= units, lowest offset among ties */
      uint64_t best_start = UINT64_MAX, best_len = UINT64_MAX, runs = 0, largest = 0;
      for (uint64_t i = 0; i < MODEL_UNITS;) {
        if (model[i]) {
          i++;
          continue;
        }
        uint64_t j = i;
        while (j < MODEL_UNITS && !model[j])
          j++;
        uint64_t len = j - i;
        runs++;
        if (len > largest)
          largest = len;
        if (len >= units && len < best_len) {
          best_len = len;
          best_start = i;
        }
        i = j;
      }
      rd_alloc_get_stats(a, &st);
      CHECK_EQ(st.num_free_extents, runs);
      CHECK_EQ(st.largest_free, largest * U);
      uint64_t off;
      int rc = rd_alloc_alloc(a, bytes, &off);
      if (best_start == UINT64_MAX) {
        CHECK_EQ(rc, RD_ESTORE_FULL);
        continue;
      }
      CHECK_EQ(rc, 0);
      CHECK_EQ(off, best_start * U);
      for (uint64_t u = 0; u < units; u++) {
        CHECK(!model[best_start + u]); /* no overlap */
        model[best_start + u] = 1;
      }
      live_off[nlive] = best_start;
      live_len[nlive] = units;
      nlive++;
      used_units += units;
    } else {
      int k = (int)(rnd() % (uint64_t)nlive);
      CHECK_EQ(rd_alloc_free(a, live_off[k] * U), 0);
      for (uint64_t u = 0; u < live_len[k]; u++) {
        CHECK(model[live_off[k] + u]);
        model[live_off[k] + u] = 0;
      }
      used_units -= live_len[k];
      nlive--;
      live_off[k] = live_off[nlive];
      live_len[k] = live_len[nlive];
    }
    rd_alloc_get_stats(a, &st);
    CHECK_EQ(st.used, used_units * U);
    CHECK_EQ(st.free, (MODEL_UNITS - used_units) * U);
    CHECK_EQ(st.num_allocs, nlive);
    if (op % 1000 == 0)
      CHECK_EQ(rd__alloc_check(a), 0);
  }
  CHECK_EQ(rd__alloc_check(a), 0);
  while (nlive > 0) {
    nlive--;
    CHECK_EQ(rd_alloc_free(a, live_off[nlive] * U), 0);
  }
  rd_alloc_get_stats(a, &st);
  CHECK_EQ(st.used, 0);
  CHECK_EQ(st.num_free_extents, 1);
  CHECK_EQ(st.largest_free, MODEL_UNITS * U);
  CHECK_EQ(rd__alloc_check(a), 0);
  rd_alloc_destroy(a);
}

/* "3.5 MiB of live small objects must not consume much more than 3.5 MiB" and
 * "a freed 512 MiB extent is reused for the next 512 MiB request". */
#define MAX_SMALL 8192
static uint64_t small_off[MAX_SMALL], small_size[MAX_SMALL];

static void test_fragmentation(void) {
  rd_alloc *a;
  rd_alloc_stats st;
  uint64_t big, big2, off;
  int n = 0;
  uint64_t live = 0;
  const uint64_t target = 3 * MiB + 512 * KiB;
  CHECK_EQ(rd_alloc_new(&a, 1024 * MiB), 0);
  CHECK_EQ(rd_alloc_alloc(a, 512 * MiB, &big), 0);
  CHECK_EQ(big, 0);
  /* churn small objects (64 B .. 16 KiB, odd sizes) around 3.5 MiB live */
  for (int op = 0; op < 100000; op++) {
    if (live < target || n == 0 || (live < target + 256 * KiB && rnd() % 2)) {
      uint64_t sz = 64 + rnd() % (16 * KiB - 64);
      CHECK(n < MAX_SMALL);
      CHECK_EQ(rd_alloc_alloc(a, sz, &off), 0);
      small_off[n] = off;
      small_size[n] = sz;
      n++;
      live += sz;
    } else {
      int k = (int)(rnd() % (uint64_t)n);
      CHECK_EQ(rd_alloc_free(a, small_off[k]), 0);
      live -= small_size[k];
      n--;
      small_off[k] = small_off[n];
      small_size[k] = small_size[n];
    }
  }
  /* trim back to exactly <= 3.5 MiB live */
  while (live > target) {
    n--;
    CHECK_EQ(rd_alloc_free(a, small_off[n]), 0);
    live -= small_size[n];
  }
  uint64_t span_end = 0;
  for (int i = 0; i < n; i++)
    if (small_off[i] + small_size[i] > span_end)
      span_end = small_off[i] + small_size[i];
  rd_alloc_get_stats(a, &st);
  uint64_t small_used = st.used - 512 * MiB;
  uint64_t span = span_end - 512 * MiB;
  printf("fragmentation: %d small objects, live %llu B, allocated %llu B, span %llu B (%.3fx)\n",
         n, (unsigned long long)live, (unsigned long long)small_used,
         (unsigned long long)span, (double)span / (double)live);
  CHECK(small_used <= live + (uint64_t)n * 63);   /* only alignment padding */
  CHECK(span <= live + live / 4);                 /* holes stay under 25% */

  /* Free the 512 MiB extent, churn more small objects, then ask for 512 MiB
   * again: best fit keeps the small ones out of the big hole. */
  CHECK_EQ(rd_alloc_free(a, big), 0);
  for (int op = 0; op < 20000; op++) {
    if (n < MAX_SMALL && (n == 0 || rnd() % 2)) {
      uint64_t sz = 64 + rnd() % (16 * KiB - 64);
      CHECK_EQ(rd_alloc_alloc(a, sz, &off), 0);
      CHECK(off >= 512 * MiB);
      small_off[n] = off;
      small_size[n] = sz;
      n++;
    } else {
      int k = (int)(rnd() % (uint64_t)n);
      CHECK_EQ(rd_alloc_free(a, small_off[k]), 0);
      n--;
      small_off[k] = small_off[n];
      small_size[k] = small_size[n];
    }
  }
  CHECK_EQ(rd_alloc_alloc(a, 512 * MiB, &big2), 0);
  CHECK_EQ(big2, big);
  CHECK_EQ(rd__alloc_check(a), 0);
  rd_alloc_destroy(a);
}

/* A range that grows and gives back its free end (the store's fallback
 * region): grow joins a free last extent or adds one, trim stops at the last
 * allocation or at its floor, and random churn keeps every invariant. */
static void test_grow_trim(void) {
  rd_alloc *a;
  rd_alloc_stats st;
  uint64_t o1, o2, o3;
  CHECK_EQ(rd_alloc_new(&a, 0), 0);
  CHECK_EQ(rd_alloc_alloc(a, 1, &o1), RD_ESTORE_FULL);
  CHECK_EQ(rd_alloc_trim(a, 0), 0);
  CHECK_EQ(rd_alloc_grow(a, 1 * MiB), 0);
  CHECK_EQ(rd__alloc_check(a), 0);
  CHECK_EQ(rd_alloc_grow(a, 512 * KiB), RD_EINVAL);   /* smaller */
  CHECK_EQ(rd_alloc_alloc(a, 1 * MiB, &o1), 0);
  CHECK_EQ(o1, 0);
  CHECK_EQ(rd_alloc_grow(a, 3 * MiB), 0);   /* last extent used: a new free one */
  stats(a, &st);
  CHECK_EQ(st.num_free_extents, 1);
  CHECK_EQ(st.largest_free, 2 * MiB);
  CHECK_EQ(rd_alloc_alloc(a, 1 * MiB, &o2), 0);
  CHECK_EQ(o2, 1 * MiB);
  CHECK_EQ(rd_alloc_grow(a, 4 * MiB), 0);   /* joins the free last extent */
  stats(a, &st);
  CHECK_EQ(st.num_free_extents, 1);
  CHECK_EQ(st.largest_free, 2 * MiB);
  CHECK_EQ(rd_alloc_alloc(a, 2 * MiB, &o3), 0);
  CHECK_EQ(o3, 2 * MiB);
  CHECK_EQ(rd_alloc_trim(a, 0), 4 * MiB);   /* nothing free at the end */
  CHECK_EQ(rd_alloc_free(a, o3), 0);
  CHECK_EQ(rd_alloc_trim(a, 3 * MiB + 1), 3 * MiB + U);   /* the floor, aligned up */
  CHECK_EQ(rd__alloc_check(a), 0);
  CHECK_EQ(rd_alloc_trim(a, 0), 2 * MiB);
  CHECK_EQ(rd_alloc_free(a, o1), 0);   /* a hole before o2: trim keeps it */
  CHECK_EQ(rd_alloc_trim(a, 0), 2 * MiB);
  CHECK_EQ(rd_alloc_free(a, o2), 0);
  CHECK_EQ(rd_alloc_trim(a, 0), 0);
  stats(a, &st);
  CHECK_EQ(st.capacity, 0);
  CHECK_EQ(st.num_free_extents, 0);
  CHECK_EQ(rd__alloc_check(a), 0);

  /* churn: grow on demand, free at random, trim after each free */
  enum { N = 400 };
  uint64_t off[N], cap = 0;
  int live[N] = {0};
  for (int round = 0; round < 20000; round++) {
    int k = (int)(rnd() % N);
    if (live[k]) {
      CHECK_EQ(rd_alloc_free(a, off[k]), 0);
      live[k] = 0;
      cap = rd_alloc_trim(a, 0);
    } else {
      uint64_t size = 1 + rnd() % (64 * KiB);
      if (rd_alloc_alloc(a, size, &off[k]) != 0) {
        CHECK_EQ(rd_alloc_grow(a, cap + ((size + U - 1) & ~(U - 1))), 0);
        CHECK_EQ(rd_alloc_alloc(a, size, &off[k]), 0);
      }
      live[k] = 1;
      stats(a, &st);
      cap = st.capacity;
      CHECK(off[k] + size <= cap);
    }
    if (round % 1000 == 0)
      CHECK_EQ(rd__alloc_check(a), 0);
  }
  for (int k = 0; k < N; k++)
    if (live[k])
      CHECK_EQ(rd_alloc_free(a, off[k]), 0);
  CHECK_EQ(rd_alloc_trim(a, 0), 0);
  CHECK_EQ(rd__alloc_check(a), 0);
  rd_alloc_destroy(a);
}

int main(void) {
  test_basic();
  test_exhaustion();
  test_best_fit();
  test_random_model();
  test_fragmentation();
  test_grow_trim();
  printf("test_alloc: ok\n");
  return 0;
}
