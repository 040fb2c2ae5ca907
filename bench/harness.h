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

/* Waits for r's value and lets it and r go. */
static inline void get_and_drop(rd_ref r) {
  rd_buf b;
  OK(rd_get(&r, 1, &b, RD_TIMEOUT_INF));
  rd_buf_release(&b);
  rd_ref_release(r);
}

/* Calls m (no arguments) on actor a one at a time, each waited for, for
 * g_duration seconds: round trips per second. */
static inline double actor_round_trips(rd_actor a, const rd_actor_method *m) {
  long ops = 0;
  double t0 = now();
  while (now() - t0 < g_duration) {
    rd_ref r;
    OK(rd_actor_call(a, m, RD_NO_ARGS, NULL, &r));
    get_and_drop(r);
    ops++;
  }
  return ops / (now() - t0);
}

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

#ifdef HARNESS_BENCH_ACTOR
/* An actor class whose noop method returns nothing at once, for programs
 * that define HARNESS_BENCH_ACTOR before including this file. */
static int bench_init(rd_call *call, void **state) {
  (void)call;
  *state = NULL;
  return 0;
}
RD_ACTOR_CLASS(Bench, bench_init, NULL)
RD_ACTOR_METHOD(Bench, noop) {
  (void)state;
  return rd_return_bytes(call, 0, "", 0);
}

/* Calls noop `total` times (at most 1000) over n actors (round robin), then
 * gets them all; with an optional argument (a ref). */
static inline void actor_batch(const rd_actor *actors, int n, int total, const rd_ref *arg) {
  static rd_ref refs[1000];
  static rd_buf out[1000];
  for (int i = 0; i < total; i++) {
    if (arg) OK(rd_actor_call(actors[i % n], Bench_noop, RD_ARGS(rd_arg_ref(*arg)), NULL, &refs[i]));
    else OK(rd_actor_call(actors[i % n], Bench_noop, RD_NO_ARGS, NULL, &refs[i]));
  }
  OK(rd_get(refs, (size_t)total, out, RD_TIMEOUT_INF));
  for (int i = 0; i < total; i++) {
    rd_buf_release(&out[i]);
    rd_ref_release(refs[i]);
  }
}

/* actor_batch of 1000 calls over n actors, again and again for g_duration
 * seconds: calls per second. */
static inline double actor_async(const rd_actor *a, int n) {
  long ops = 0;
  double t0 = now();
  while (now() - t0 < g_duration) {
    actor_batch(a, n, 1000, NULL);
    ops += 1000;
  }
  return ops / (now() - t0);
}
#endif

#endif
