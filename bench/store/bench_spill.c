/* bench/store/bench_spill.c - how much a node's spilling delays its other
 * clients.
 *
 * An embedded cluster with a small store (--store MiB, 256 by default).  A
 * task puts --objects objects of --mib MiB each and keeps them all, so the
 * store must spill most of them; meanwhile the driver times, one at a time,
 * small puts (256 KiB, through the store) and node round trips
 * (rd_node_info_get).  It prints their median, p99 and worst latency, the
 * filler's put bandwidth, and the node's spill count.  Run it with
 * RAYDIST_SPILL_THRESHOLD=1 (spill only when a create does not fit, inside
 * that create) and with the default (spill in the background from 80%) to
 * compare; bench/store/spill.sh does both, alternating.  Not a test. */
#include <raydist.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DIE(...) do { fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); exit(1); } while (0)
#define OK(call) do { int e_ = (call); if (e_ != 0) DIE("%s: %s", #call, rd_err_name(e_)); } while (0)

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct fill_args {
  int objects;
  int mib;
} fill_args;

/* Put the objects, keep them all until the end, return the seconds spent. */
RD_REMOTE(filler) {
  rd_buf a;
  if (rd_arg(call, 0, &a) || a.size != sizeof(fill_args)) return rd_call_fail(call, "bad arguments");
  fill_args fa;
  memcpy(&fa, a.data, sizeof(fa));
  size_t n = (size_t)fa.mib << 20;
  unsigned char *buf = malloc(n);
  rd_ref *refs = calloc((size_t)fa.objects, sizeof(*refs));
  if (!buf || !refs) return rd_call_fail(call, "out of memory");
  double t0 = now();
  int k;
  for (k = 0; k < fa.objects; k++) {
    memset(buf, k + 1, n);
    if (rd_put(buf, n, &refs[k]) != 0) break;
  }
  double secs = now() - t0;
  for (int i = 0; i < k; i++) rd_ref_release(refs[i]);
  free(refs);
  free(buf);
  if (k < fa.objects) return rd_call_fail(call, "rd_put failed");
  return rd_return_bytes(call, 0, &secs, sizeof(secs));
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
static double put_lat[MAXS], rt_lat[MAXS];

int main(int argc, char **argv) {
  int store_mib = 256;
  fill_args fa = {48, 16};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--store") && i + 1 < argc) store_mib = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--objects") && i + 1 < argc) fa.objects = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--mib") && i + 1 < argc) fa.mib = atoi(argv[++i]);
    else DIE("usage: bench_spill [--store MiB] [--objects N] [--mib MiB]");
  }
  if (store_mib < 16 || fa.objects < 1 || fa.mib < 1 || fa.mib > store_mib / 2) DIE("bad sizes");
  rd_config cfg;
  rd_config_init(&cfg);
  cfg.object_store_bytes = (uint64_t)store_mib << 20;
  OK(rd_init(&cfg));
  const char *th = getenv("RAYDIST_SPILL_THRESHOLD");
  printf("# bench_spill: store %d MiB, filler %d x %d MiB, RAYDIST_SPILL_THRESHOLD=%s\n", store_mib, fa.objects,
         fa.mib, th ? th : "(default)");
  sleep(1);   /* the store's background pre-fault */

  size_t small = 256u << 10;
  unsigned char *p = malloc(small);
  memset(p, 7, small);
  rd_ref f;
  OK(rd_submit(filler, RD_ARGS(rd_arg_bytes(&fa, sizeof(fa))), NULL, &f));
  int np = 0, nr = 0;
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
    if (np < MAXS) put_lat[np++] = t1 - t0;
    if (nr < MAXS) rt_lat[nr++] = t2 - t1;
  }
  rd_buf b;
  OK(rd_get(&f, 1, &b, 60000));
  double secs;
  memcpy(&secs, b.data, sizeof(secs));
  rd_buf_release(&b);
  rd_ref_release(f);
  rd_node_info ni;
  OK(rd_node_info_get(&ni));
  printf("  filler: %.2f s for %d MiB (%.0f MiB/s), %llu spills\n", secs, fa.objects * fa.mib,
         fa.objects * fa.mib / secs, (unsigned long long)ni.store_spill_count);
  print_lat("small put (256 KiB)", put_lat, np);
  print_lat("node round trip", rt_lat, nr);
  free(p);
  rd_shutdown();
  return 0;
}
