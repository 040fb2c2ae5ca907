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

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DIE(...) do { fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); exit(1); } while (0)
#define OK(call) do { int e_ = (call); if (e_ != 0) DIE("%s: %s", #call, rd_err_name(e_)); } while (0)

static double g_duration = 2.0;
static int g_trials = 3;
static const char *g_filter = NULL;
static FILE *g_json = NULL;
static int g_first_json = 1;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

RD_REMOTE(extra_noop) { return rd_return_bytes(call, 0, "", 0); }

static void report(const char *name, double (*fn)(void)) {
  if (g_filter && !strstr(name, g_filter)) return;
  (void)fn();   /* warm-up */
  double v[32], mean = 0, sd = 0;
  int n = g_trials < 1 ? 1 : g_trials > 32 ? 32 : g_trials;
  for (int i = 0; i < n; i++) mean += v[i] = fn();
  mean /= n;
  for (int i = 0; i < n; i++) sd += (v[i] - mean) * (v[i] - mean);
  sd = n > 1 ? sqrt(sd / (n - 1)) : 0;
  printf("%s per second %.2f +- %.2f\n", name, mean, sd);
  fflush(stdout);
  if (g_json) {
    fprintf(g_json, "%s\n  {\"name\": \"%s\", \"per_second\": %.3f, \"sd\": %.3f, \"unit\": \"\"}",
            g_first_json ? "" : ",", name, mean, sd);
    g_first_json = 0;
  }
}

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
  const char *json = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--duration") && i + 1 < argc) g_duration = atof(argv[++i]);
    else if (!strcmp(argv[i], "--trials") && i + 1 < argc) g_trials = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--filter") && i + 1 < argc) g_filter = argv[++i];
    else if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
  }
  rd_config cfg;
  rd_config_init(&cfg);
  cfg.object_store_bytes = 2ull << 30;
  int r = rd_init(&cfg);
  if (r != 0) DIE("rd_init: %s", rd_strerror(r));
  if (json && !(g_json = fopen(json, "w"))) DIE("cannot write %s", json);
  if (g_json) fprintf(g_json, "[");
  report("single_client_wait_1k_refs_one_at_a_time", t_wait_one_at_a_time);
  long one = 1;
  for (int i = 0; i < 10000; i++) OK(rd_put(&one, sizeof(one), &g_small[i]));
  report("single_client_get_10k_refs", t_get_10k);
  for (int i = 0; i < 10000; i++) rd_ref_release(g_small[i]);
  if (g_json) {
    fprintf(g_json, "\n]\n");
    fclose(g_json);
  }
  rd_shutdown();
  return 0;
}
