/* bench/store/bench_store.c - figures for the object store and its allocator.
 *
 * Prints alloc+free latency, store operation throughput for 1 KiB objects,
 * fragmentation after a random churn in a 1 GiB store, and prefault time for a
 * 1 GiB segment.  It measures and prints; it never fails on a slow figure. */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <time.h>

#include "alloc.h"
#include "raydist/error.h"
#include "store.h"

#define KiB (1024ull)
#define MiB (1024ull * 1024ull)
#define GiB (1024ull * MiB)

static uint64_t rng_state = 0x243f6a8885a308d3ull;
static uint64_t rnd(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 2685821657736338717ull;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* log-uniform in [lo, hi] */
static uint64_t log_size(uint64_t lo, uint64_t hi) {
  double u = (double)(rnd() >> 11) / 9007199254740992.0;
  return (uint64_t)exp(log((double)lo) + u * (log((double)hi) - log((double)lo)));
}

#define LIVE 10000
static uint64_t live_off[LIVE];

/* Steady-state churn: each iteration frees a random live extent and
 * allocates a new one in its place, with LIVE extents live throughout. */
static void bench_alloc(const char *label, uint64_t lo, uint64_t hi, int log_dist) {
  rd_alloc *a;
  uint64_t cap = 64 * GiB; /* metadata only: the allocator never touches memory */
  if (rd_alloc_new(&a, cap) != 0) {
    printf("alloc: rd_alloc_new failed\n");
    return;
  }
  for (int i = 0; i < LIVE; i++) {
    uint64_t sz = log_dist ? log_size(lo, hi) : lo + rnd() % (hi - lo + 1);
    if (rd_alloc_alloc(a, sz, &live_off[i]) != 0)
      abort();
  }
  const int iters = 2000000;
  /* pre-draw sizes and victims so the timed loop measures the allocator */
  uint64_t *sizes = malloc(sizeof(uint64_t) * iters);
  uint32_t *victims = malloc(sizeof(uint32_t) * iters);
  if (sizes == NULL || victims == NULL)
    abort();
  for (int i = 0; i < iters; i++) {
    sizes[i] = log_dist ? log_size(lo, hi) : lo + rnd() % (hi - lo + 1);
    victims[i] = (uint32_t)(rnd() % LIVE);
  }
  double t0 = now_s();
  for (int i = 0; i < iters; i++) {
    uint32_t k = victims[i];
    if (rd_alloc_free(a, live_off[k]) != 0 || rd_alloc_alloc(a, sizes[i], &live_off[k]) != 0)
      abort();
  }
  double dt = now_s() - t0;
  /* and the LIFO case: allocate and free the same extent right away */
  t0 = now_s();
  for (int i = 0; i < iters; i++) {
    uint64_t off;
    if (rd_alloc_alloc(a, sizes[i], &off) != 0 || rd_alloc_free(a, off) != 0)
      abort();
  }
  double dt_lifo = now_s() - t0;
  rd_alloc_stats st;
  rd_alloc_get_stats(a, &st);
  printf("alloc+free pair, %-34s %7.1f ns random victim, %6.1f ns LIFO  "
         "(%d live, %llu free extents)\n", label, dt * 1e9 / iters, dt_lifo * 1e9 / iters,
         LIVE, (unsigned long long)st.num_free_extents);
  free(sizes);
  free(victims);
  rd_alloc_destroy(a);
}

static void bench_store_ops(void) {
  rd_store *s;
  rd_store_config cfg = {.capacity = 64 * MiB};
  if (rd_store_open(&s, &cfg) != 0) {
    printf("store: open failed\n");
    return;
  }
  /* some resident objects so the table is not trivially empty */
  uint64_t off, size;
  for (uint64_t id = 1; id <= 10000; id++) {
    if (rd_store_create(s, id << 32, 1024, 1, &off) != 0 || rd_store_seal(s, id << 32) != 0 ||
        rd_store_release(s, id << 32) != 0)
      abort();
  }
  const int iters = 1000000;
  double t0 = now_s();
  for (int i = 0; i < iters; i++) {
    uint64_t id = (uint64_t)i + 1;
    if (rd_store_create(s, id, 1024, 1, &off) != 0 || rd_store_seal(s, id) != 0 ||
        rd_store_get(s, id, &off, &size) != 0 || rd_store_release(s, id) != 0 ||
        rd_store_release(s, id) != 0 || rd_store_delete(s, id) != 0)
      abort();
  }
  double dt = now_s() - t0;
  printf("store create+seal+get+release+delete, 1 KiB: %.2f M cycles/s (%.0f ns per cycle, "
         "10k resident objects)\n", iters / dt / 1e6, dt * 1e9 / iters);
  rd_store_close(s);
}

#define MAXOBJ 4096
static uint64_t obj_off[MAXOBJ], obj_size[MAXOBJ], obj_id[MAXOBJ];

/* Random churn of 1 KiB - 4 MiB objects in a 1 GiB store: create until the
 * live bytes reach the target, then delete a random object, and so on.  Then
 * report live bytes against the span of the segment in use and how much of
 * the free space is one contiguous extent. */
static void bench_fragmentation(const char *label, int log_dist, double fill) {
  rd_store *s;
  rd_store_config cfg = {.capacity = 1 * GiB};
  if (rd_store_open(&s, &cfg) != 0) {
    printf("fragmentation: open failed\n");
    return;
  }
  int n = 0;
  uint64_t live = 0, next_id = 1, failures = 0;
  const uint64_t target = (uint64_t)(fill * (double)GiB);
  const int ops = 200000;
  for (int op = 0; op < ops; op++) {
    if (n == 0 || (live < target && n < MAXOBJ)) { /* fill to target, then free one */
      uint64_t sz = log_dist ? log_size(KiB, 4 * MiB) : KiB + rnd() % (4 * MiB - KiB + 1);
      uint64_t off;
      int rc = rd_store_create(s, next_id, sz, 1, &off);
      if (rc == RD_ESTORE_FULL) {
        failures++;
        continue;
      }
      if (rc != 0 || rd_store_seal(s, next_id) != 0 || rd_store_release(s, next_id) != 0)
        abort();
      obj_off[n] = off;
      obj_size[n] = sz;
      obj_id[n] = next_id++;
      live += sz;
      n++;
    } else {
      int k = (int)(rnd() % (uint64_t)n);
      if (rd_store_delete(s, obj_id[k]) != 0)
        abort();
      live -= obj_size[k];
      n--;
      obj_off[k] = obj_off[n];
      obj_size[k] = obj_size[n];
      obj_id[k] = obj_id[n];
    }
  }
  uint64_t span = 0;
  for (int i = 0; i < n; i++)
    if (obj_off[i] + obj_size[i] > span)
      span = obj_off[i] + obj_size[i];
  rd_store_stats st;
  rd_store_get_stats(s, &st);
  uint64_t free_b = st.capacity - st.used;
  printf("fragmentation, %s sizes 1 KiB-4 MiB, target %.0f%% live, %d ops "
         "(%llu creates):\n", label, fill * 100, ops, (unsigned long long)(next_id - 1 + failures));
  printf("    live %.1f MiB in %d objects, allocated %.1f MiB, span %.1f MiB "
         "(span/live %.3f), largest free %.1f MiB of %.1f MiB free (%.1f%%), "
         "%llu creates refused\n",
         live / (double)MiB, n, st.used / (double)MiB, span / (double)MiB,
         (double)span / (double)live, st.largest_free / (double)MiB, free_b / (double)MiB,
         100.0 * (double)st.largest_free / (double)free_b, (unsigned long long)failures);
  rd_store_close(s);
}

static void bench_prefault(void) {
  rd_store *s;
  rd_store_config cfg = {.capacity = 1 * GiB, .prefault = 1};
  double t0 = now_s();
  if (rd_store_open(&s, &cfg) != 0) {
    printf("prefault: open failed\n");
    return;
  }
  double t1 = now_s();
  int rc = rd_store_prefault_wait(s);
  double t2 = now_s();
  printf("prefault 1 GiB segment: open %.2f ms, populate %.1f ms (%.1f GiB/s)%s\n",
         (t1 - t0) * 1e3, (t2 - t1) * 1e3, 1.0 / (t2 - t1), rc == 0 ? "" : " [populate failed]");
  rd_store_close(s);
}

/* What an object costs in the fallback region against the segment: create,
 * write every byte, seal, release and delete, for a few sizes.  The
 * segment is prefaulted (as the node's is); a fallback object's pages are
 * committed at create and punched out at delete, every time. */
static void bench_fallback(void) {
  rd_store *s;
  rd_store_config cfg = {.capacity = 300 * MiB, .prefault = 1, .fallback_bytes = 1 * GiB};
  if (rd_store_open(&s, &cfg) != 0) {
    printf("fallback: open failed\n");
    return;
  }
  rd_store_prefault_wait(s);
  static const uint64_t sizes[] = {64 * KiB, 1 * MiB, 16 * MiB, 256 * MiB};
  double rate[2][4];
  uint64_t id = 1, off, fill_off;
  for (int where = 0; where < 2; where++) {
    if (where == 1) {   /* the segment full of a pinned object: every create goes past it */
      if (rd_store_create(s, UINT64_MAX, 300 * MiB, 1, &fill_off) != 0) {
        printf("fallback: fill failed\n");
        break;
      }
    }
    for (int k = 0; k < 4; k++) {
      uint64_t n = sizes[k], bytes = 0;
      double t0 = now_s(), t;
      do {
        if (rd_store_create(s, id, n, 1, &off) != 0) {
          printf("fallback: create of %llu failed (%s)\n", (unsigned long long)n, where ? "past the segment" : "segment");
          rd_store_close(s);
          return;
        }
        memset(rd_store_base(s) + off, (int)id, n);
        rd_store_seal(s, id);
        rd_store_release(s, id);
        rd_store_delete(s, id);
        id++;
        bytes += n;
      } while ((t = now_s() - t0) < 0.5);
      rate[where][k] = (double)bytes / t / (double)GiB;
    }
  }
  rd_store_stats st;
  rd_store_get_stats(s, &st);
  for (int k = 0; k < 4; k++)
    printf("create+write+delete %6llu KiB: segment %6.2f GiB/s, fallback region %6.2f GiB/s (%.2fx)\n",
           (unsigned long long)(sizes[k] / KiB), rate[0][k], rate[1][k], rate[1][k] / rate[0][k]);
  printf("    (%llu fallback allocations)\n", (unsigned long long)st.fallback_count);
  rd_store_close(s);
}

int main(void) {
  bench_alloc("small sizes 64 B-4 KiB:", 64, 4 * KiB, 0);
  bench_alloc("random sizes 64 B-64 MiB (log):", 64, 64 * MiB, 1);
  bench_store_ops();
  bench_fragmentation("log-uniform", 1, 0.70);
  bench_fragmentation("uniform", 0, 0.70);
  bench_fragmentation("log-uniform", 1, 0.90);
  bench_prefault();
  bench_fallback();
  return 0;
}
