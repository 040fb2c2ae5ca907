/* bench/harness.h - the timing harness of the runtime benchmark programs
 * (microbench, vs_ray/vs_ray_extra): each metric is one untimed warm-up
 * trial, then --trials timed trials of --duration seconds, printed in Ray's
 * shape ("NAME per second MEAN +- SD [unit]") and optionally as JSON.
 * Benchmarks only: included once per program; a program may use only part
 * of it (the functions are static inline). */
#ifndef RD_BENCH_HARNESS_H
#define RD_BENCH_HARNESS_H

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

static inline double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef double (*trial_fn)(void);   /* returns ops/s for one trial */

static inline int selected(const char *name) { return !g_filter || strstr(name, g_filter); }

/* --duration S --trials N --filter SUBSTR --json FILE; opens the JSON file. */
static inline void harness_args(int argc, char **argv) {
  const char *json = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--duration") && i + 1 < argc) g_duration = atof(argv[++i]);
    else if (!strcmp(argv[i], "--trials") && i + 1 < argc) g_trials = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--filter") && i + 1 < argc) g_filter = argv[++i];
    else if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
  }
  if (json && !(g_json = fopen(json, "w"))) DIE("cannot write %s", json);
  if (g_json) fprintf(g_json, "[");
}

static inline void harness_done(void) {
  if (g_json) {
    fprintf(g_json, "\n]\n");
    fclose(g_json);
    g_json = NULL;
  }
}

static inline void report(const char *name, const char *unit, trial_fn fn) {
  if (!selected(name)) return;
  (void)fn();   /* warm-up */
  double v[32], mean = 0, sd = 0;
  int n = g_trials < 1 ? 1 : g_trials > 32 ? 32 : g_trials;
  for (int i = 0; i < n; i++) mean += v[i] = fn();
  mean /= n;
  for (int i = 0; i < n; i++) sd += (v[i] - mean) * (v[i] - mean);
  sd = n > 1 ? sqrt(sd / (n - 1)) : 0;
  printf("%s per second %.2f +- %.2f%s%s\n", name, mean, sd, unit[0] ? " " : "", unit);
  fflush(stdout);
  if (g_json) {
    fprintf(g_json, "%s\n  {\"name\": \"%s\", \"per_second\": %.3f, \"sd\": %.3f, \"unit\": \"%s\"}",
            g_first_json ? "" : ",", name, mean, sd, unit);
    g_first_json = 0;
  }
}

#endif
