/* bench/store/bench_spill.c - how much a node's spilling and restoring
 * delays its other clients.
 *
 * An embedded cluster with a small store (--store MiB, 256 by default).  A
 * task puts --objects objects of --mib MiB (or --kib KiB) each and keeps them all, so the
 * store must spill most of them ("put" phase), then gets each back in order,
 * so most are read back from disk, each read making room by spilling another
 * ("get" phase).  Meanwhile the driver times, one at a time, small puts
 * (256 KiB, through the store) and node round trips (rd_node_info_get).  It
 * prints their median, p99 and worst latency per phase, the task's bandwidth
 * and the node's spill and restore counts.  Run it with
 * RAYDIST_SPILL_THRESHOLD=0 (spill and read back only inside the request that
 * needs it) and with the default (a thread of the store does that I/O, and
 * spills from 80% full) to compare; bench/store/spill.sh does both,
 * alternating.  Not a test. */
#include <raydist.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../harness.h"   /* now(), DIE, OK */

typedef struct fill_args {
  int objects;
  int kib;   /* each object's size */
} fill_args;

typedef struct fill_result {
  double put_secs, get_secs;
  double switch_at;   /* CLOCK_MONOTONIC when the get phase began */
} fill_result;

/* Put the objects, then get each back, keeping them all until the end. */
RD_REMOTE(filler) {
  rd_buf a;
  if (rd_arg(call, 0, &a) || a.size != sizeof(fill_args)) return rd_call_fail(call, "bad arguments");
  fill_args fa;
  memcpy(&fa, a.data, sizeof(fa));
  size_t n = (size_t)fa.kib << 10;
  unsigned char *buf = malloc(n);
  rd_ref *refs = calloc((size_t)fa.objects, sizeof(*refs));
  if (!buf || !refs) return rd_call_fail(call, "out of memory");
  double t0 = now();
  int k;
  for (k = 0; k < fa.objects; k++) {
    memset(buf, k + 1, n);
    if (rd_put(buf, n, &refs[k]) != 0) break;
  }
  fill_result res = {now() - t0, 0, now()};
  int bad = 0;
  for (int i = 0; i < k && !bad; i++) {
    rd_buf b;
    if (rd_get(&refs[i], 1, &b, 60000) != 0) {
      bad = 1;
      break;
    }
    bad = b.size != n || ((const unsigned char *)b.data)[n / 2] != (unsigned char)(i + 1);
    rd_buf_release(&b);
  }
  res.get_secs = now() - res.switch_at;
  for (int i = 0; i < k; i++) rd_ref_release(refs[i]);
  free(refs);
  free(buf);
  if (k < fa.objects) return rd_call_fail(call, "rd_put failed");
  if (bad) return rd_call_fail(call, "rd_get failed or gave wrong bytes");
  return rd_return_bytes(call, 0, &res, sizeof(res));
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void print_lat(const char *what, double *v, int n) {
  if (n == 0) {
    printf("  %-22s no samples\n", what);
    return;
  }
  qsort(v, (size_t)n, sizeof(*v), cmp_d);
  printf("  %-22s n=%6d  p50 %8.1f us  p99 %8.1f us  max %8.1f us\n", what, n, v[n / 2] * 1e6,
         v[(int)(n * 0.99)] * 1e6, v[n - 1] * 1e6);
}

enum { MAXS = 200000 };
static double put_lat[MAXS], rt_lat[MAXS], when[MAXS];

/* Print the samples taken in [from, to). */
static void print_phase(const char *phase, double from, double to, int n) {
  static double a[MAXS], b[MAXS];
  int m = 0;
  for (int i = 0; i < n; i++)
    if (when[i] >= from && when[i] < to) a[m] = put_lat[i], b[m] = rt_lat[i], m++;
  printf(" %s phase:\n", phase);
  print_lat("small put (256 KiB)", a, m);
  print_lat("node round trip", b, m);
}

int main(int argc, char **argv) {
  int store_mib = 256;
  fill_args fa = {48, 16 << 10};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--store") && i + 1 < argc) store_mib = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--objects") && i + 1 < argc) fa.objects = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--mib") && i + 1 < argc) fa.kib = atoi(argv[++i]) << 10;
    else if (!strcmp(argv[i], "--kib") && i + 1 < argc) fa.kib = atoi(argv[++i]);
    else DIE("usage: bench_spill [--store MiB] [--objects N] [--mib MiB | --kib KiB]");
  }
  /* objects up to 100 KiB stay in the putting process (RD_INLINE_MAX): never spilled */
  if (store_mib < 16 || fa.objects < 1 || fa.kib <= 100 || fa.kib > (store_mib << 10) / 2) DIE("bad sizes");
  rd_config cfg;
  rd_config_init(&cfg);
  cfg.object_store_bytes = (uint64_t)store_mib << 20;
  OK(rd_init(&cfg));
  const char *th = getenv("RAYDIST_SPILL_THRESHOLD");
  printf("# bench_spill: store %d MiB, filler %d x %d KiB, RAYDIST_SPILL_THRESHOLD=%s\n", store_mib, fa.objects,
         fa.kib, th ? th : "(default)");
  sleep(1);   /* the store's background pre-fault */

  size_t small = 256u << 10;
  unsigned char *p = malloc(small);
  memset(p, 7, small);
  rd_ref f;
  OK(rd_submit(filler, RD_ARGS(rd_arg_bytes(&fa, sizeof(fa))), NULL, &f));
  int ns = 0;
  for (;;) {
    if (rd_wait(&f, 1, 1, 0, NULL) == 1) break;
    double t0 = now();
    rd_ref r;
    OK(rd_put(p, small, &r));
    double t1 = now();
    rd_ref_release(r);
    rd_node_info ni;
    OK(rd_node_info_get(&ni));
    double t2 = now();
    if (ns < MAXS) put_lat[ns] = t1 - t0, rt_lat[ns] = t2 - t1, when[ns++] = t0;
  }
  rd_buf b;
  OK(rd_get(&f, 1, &b, 60000));
  fill_result res;
  memcpy(&res, b.data, sizeof(res));
  rd_buf_release(&b);
  rd_ref_release(f);
  rd_node_info ni;
  OK(rd_node_info_get(&ni));
  double mib = fa.objects * (fa.kib / 1024.0);
  printf("  task: put %.2f s (%.0f MiB/s), get %.2f s (%.0f MiB/s); %llu spills, %llu restores\n", res.put_secs,
         mib / res.put_secs, res.get_secs, mib / res.get_secs, (unsigned long long)ni.store_spill_count,
         (unsigned long long)ni.store_restore_count);
  print_phase("put", 0, res.switch_at, ns);
  print_phase("get", res.switch_at, 1e300, ns);
  free(p);
  rd_shutdown();
  return 0;
}
