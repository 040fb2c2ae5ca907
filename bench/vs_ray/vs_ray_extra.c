/* bench/vs_ray/vs_ray_extra.c - the libraydist side of the Ray-shaped
 * workloads that microbench does not run, with microbench's timing method
 * (one untimed warm-up trial, then --trials trials of --duration seconds;
 * mean +- sample SD) and line format:
 *   single_client_wait_1k_refs_one_at_a_time  Ray's own shape of "wait 1k
 *     refs": submit 1000 no-op tasks, then wait with num_ready = 1 and drop
 *     one ready ref per call, 1000 calls (per 1000).
 *   single_client_get_10k_refs  one rd_get of 10,000 refs to small put
 *     objects (per call): the closest libraydist has to Ray's "get object
 *     containing 10k refs", which it cannot express (no refs inside objects).
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
  long one = 1;
  for (int i = 0; i < 10000; i++) OK(rd_put(&one, sizeof(one), &g_small[i]));
  report("single_client_get_10k_refs", "", t_get_10k);
  for (int i = 0; i < 10000; i++) rd_ref_release(g_small[i]);
  harness_done();
  rd_shutdown();
  return 0;
}
