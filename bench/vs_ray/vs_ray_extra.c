/* bench/vs_ray/vs_ray_extra.c - the libraydist side of the Ray-shaped
 * workloads that microbench does not run, with microbench's timing method
 * (one untimed warm-up trial, then --trials trials of --duration seconds;
 * mean +- sample SD) and line format:
 *   single_client_wait_1k_refs_one_at_a_time  Ray's own shape of "wait 1k
 *     refs": submit 1000 no-op tasks, then wait with num_ready = 1 and drop
 *     one ready ref per call, 1000 calls (per 1000).
 *   single_client_get_object_containing_10k_refs  Ray's shape: a task puts
 *     10,000 small objects and returns their refs inside its result
 *     (rd_return_refs); each call gets that result and takes the refs it
 *     contains (rd_get + rd_get_refs), then drops them (per call).
 *   single_client_get_10k_refs  one rd_get of 10,000 refs to small put
 *     objects (per call).
 * A benchmark: it checks nothing.
 *   vs_ray_extra [--duration S] [--trials N] [--filter SUBSTR] [--json FILE] */
#include <raydist.h>

#include "../harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

RD_REMOTE(extra_noop) { return rd_return_bytes(call, 0, "", 0); }


static double t_wait_one_at_a_time(void) {
  enum { N = 1000 };
  static rd_ref refs[N];
  static uint8_t ready[N];
  long ops = 0;
  double t0 = now();
  while (now() - t0 < g_duration) {
    for (int i = 0; i < N; i++) OK(rd_submit(extra_noop, RD_NO_ARGS, NULL, &refs[i]));
    size_t left = N;
    while (left > 0) {   /* like ray.wait(not_ready) with num_returns = 1 */
      if (rd_wait(refs, left, 1, RD_TIMEOUT_INF, ready) < 1) DIE("rd_wait");
      size_t k = 0;
      while (!ready[k]) k++;
      rd_ref_release(refs[k]);
      refs[k] = refs[--left];
    }
    ops++;
  }
  return ops / (now() - t0);
}

/* Puts 10,000 longs and returns them as refs inside its result. */
RD_REMOTE(extra_make_10k) {
  static rd_ref refs[10000];
  long one = 1;
  for (int i = 0; i < 10000; i++)
    if (rd_put(&one, sizeof(one), &refs[i]) != 0) return rd_call_fail(call, "rd_put");
  int r = rd_return_refs(call, 0, NULL, 0, refs, 10000);
  for (int i = 0; i < 10000; i++) rd_ref_release(refs[i]);
  return r;
}

static rd_ref g_holder;

static double t_get_containing_10k(void) {
  static rd_ref inner[10000];
  long ops = 0;
  double t0 = now();
  while (now() - t0 < g_duration) {
    rd_buf b;
    size_t n = 0;
    OK(rd_get(&g_holder, 1, &b, RD_TIMEOUT_INF));
    OK(rd_get_refs(g_holder, inner, 10000, &n, RD_TIMEOUT_INF));
    if (n != 10000) DIE("the holder contains %zu refs", n);
    rd_buf_release(&b);
    for (int i = 0; i < 10000; i++) rd_ref_release(inner[i]);
    ops++;
  }
  return ops / (now() - t0);
}

static rd_ref g_small[10000];

static double t_get_10k(void) {
  static rd_buf out[10000];
  long ops = 0;
  double t0 = now();
  while (now() - t0 < g_duration) {
    OK(rd_get(g_small, 10000, out, RD_TIMEOUT_INF));
    for (int i = 0; i < 10000; i++) rd_buf_release(&out[i]);
    ops++;
  }
  return ops / (now() - t0);
}

int main(int argc, char **argv) {
  harness_args(argc, argv);
  rd_config cfg;
  rd_config_init(&cfg);
  cfg.object_store_bytes = 2ull << 30;
  int r = rd_init(&cfg);
  if (r != 0) DIE("rd_init: %s", rd_strerror(r));
  report("single_client_wait_1k_refs_one_at_a_time", "", t_wait_one_at_a_time);
  OK(rd_submit(extra_make_10k, RD_NO_ARGS, NULL, &g_holder));
  report("single_client_get_object_containing_10k_refs", "", t_get_containing_10k);
  rd_ref_release(g_holder);
  long one = 1;
  for (int i = 0; i < 10000; i++) OK(rd_put(&one, sizeof(one), &g_small[i]));
  report("single_client_get_10k_refs", "", t_get_10k);
  for (int i = 0; i < 10000; i++) rd_ref_release(g_small[i]);
  harness_done();
  rd_shutdown();
  return 0;
}
