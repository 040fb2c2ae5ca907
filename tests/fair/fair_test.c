/* tests/fair/fair_test.c - one job of the fair-share test (fair_test.sh), and
 * the judge of what two such jobs did.
 *
 *   fair_test run N MS OUT [WEIGHT]   join the cluster (RAYDIST_ADDRESS) with
 *       job_weight WEIGHT, run N tasks that each sleep MS ms, write each
 *       task's start and end (CLOCK_MONOTONIC ns, the same clock in every
 *       process of the machine) to OUT; OUT.started appears once the first
 *       result is back, so the script can start the second job while this
 *       one holds the node, and OUT.begin holds the time it started.
 *   fair_test expect A B WHAT [RATIO]  read two such files and check:
 *       b_first   B's last task ended before A's last (B was not starved)
 *       b_starved B's first task started only after A's last had (the
 *                 control without fair share)
 *       ratio R   while both ran, B held R times the workers A did
 *                 (0.6R..1.6R)
 *       turns N   taken in order of start, the tasks change from one job
 *                 to the other at least N times (A A B B A B: 3)
 *       It prints both jobs' spans and concurrency either way.
 *
 * The script runs a copy of this binary as the second job: a node tells jobs
 * apart by executable. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "raydist.h"

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

RD_REMOTE(span) {
  rd_buf a;
  uint32_t ms = 0;
  if (rd_arg(call, 0, &a) != 0 || a.size != 4) return rd_call_fail(call, "want a 4-byte sleep time");
  memcpy(&ms, a.data, 4);
  uint64_t out[2];
  out[0] = mono_ns();
  usleep(ms * 1000u);
  out[1] = mono_ns();
  return rd_return_bytes(call, 0, out, sizeof(out));
}

#define MAX_TASKS 1000

static int run(int n, uint32_t ms, const char *out, double weight) {
  if (n < 1 || n > MAX_TASKS) {
    fprintf(stderr, "run: N must be 1..%d\n", MAX_TASKS);
    return 2;
  }
  char path[600];
  if (!getenv("RAYDIST_WORKER_ID")) {
    snprintf(path, sizeof(path), "%s.begin", out);
    FILE *bf = fopen(path, "w");
    if (bf) {
      fprintf(bf, "%llu\n", (unsigned long long)mono_ns());
      fclose(bf);
    }
  }
  rd_config cfg;
  rd_config_init(&cfg);
  cfg.job_weight = weight;
  int r = rd_init(&cfg);
  if (r != 0) {
    fprintf(stderr, "rd_init: %s\n", rd_err_name(r));
    return 1;
  }
  static rd_ref refs[MAX_TASKS];
  static uint64_t spans[MAX_TASKS][2];
  for (int i = 0; i < n; i++) {
    r = rd_submit(span, RD_ARGS(rd_arg_bytes(&ms, 4)), NULL, &refs[i]);
    if (r != 0) {
      fprintf(stderr, "rd_submit: %s\n", rd_err_name(r));
      return 1;
    }
  }
  for (int i = 0; i < n; i++) {
    rd_buf b;
    r = rd_get(&refs[i], 1, &b, 120000);
    if (r != 0 || b.size != sizeof(spans[i])) {
      fprintf(stderr, "task %d: %s\n", i, rd_err_name(r));
      return 1;
    }
    memcpy(spans[i], b.data, sizeof(spans[i]));
    rd_buf_release(&b);
    rd_ref_release(refs[i]);
    if (i == 0) {
      snprintf(path, sizeof(path), "%s.started", out);
      FILE *f = fopen(path, "w");
      if (f) fclose(f);
    }
  }
  rd_shutdown();
  snprintf(path, sizeof(path), "%s.tmp", out);
  FILE *f = fopen(path, "w");
  if (!f) return 1;
  for (int i = 0; i < n; i++) fprintf(f, "%llu %llu\n", (unsigned long long)spans[i][0], (unsigned long long)spans[i][1]);
  if (fclose(f) != 0 || rename(path, out) != 0) return 1;
  return 0;
}

typedef struct job {
  uint64_t s[MAX_TASKS][2];
  int n;
  uint64_t first_start, last_start, last_end;
} job;

static int load(const char *path, job *j) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "cannot read %s\n", path);
    return -1;
  }
  unsigned long long a, b;
  j->n = 0;
  j->first_start = UINT64_MAX;
  j->last_start = j->last_end = 0;
  while (j->n < MAX_TASKS && fscanf(f, "%llu %llu", &a, &b) == 2) {
    j->s[j->n][0] = a;
    j->s[j->n][1] = b;
    if (a < j->first_start) j->first_start = a;
    if (a > j->last_start) j->last_start = a;
    if (b > j->last_end) j->last_end = b;
    j->n++;
  }
  fclose(f);
  return j->n > 0 ? 0 : -1;
}

/* How often the job changes along all tasks of a and b in order of start. */
static int changes(const job *a, const job *b) {
  int ia = 0, ib = 0, last = -1, n = 0;
  uint64_t sa[MAX_TASKS], sb[MAX_TASKS];
  for (int i = 0; i < a->n; i++) sa[i] = a->s[i][0];
  for (int i = 0; i < b->n; i++) sb[i] = b->s[i][0];
  /* each job's own tasks may come back out of order: sort their starts */
  for (int pass = 0; pass < 2; pass++) {
    uint64_t *v = pass ? sb : sa;
    int m = pass ? b->n : a->n;
    for (int i = 1; i < m; i++)
      for (int k = i; k > 0 && v[k - 1] > v[k]; k--) {
        uint64_t t = v[k];
        v[k] = v[k - 1];
        v[k - 1] = t;
      }
  }
  while (ia < a->n || ib < b->n) {
    int who = ib >= b->n || (ia < a->n && sa[ia] <= sb[ib]) ? 0 : 1;
    if (who) ib++;
    else ia++;
    if (last >= 0 && who != last) n++;
    last = who;
  }
  return n;
}

/* The mean number of j's tasks running during [t0, t1). */
static double concurrency(const job *j, uint64_t t0, uint64_t t1) {
  double busy = 0;
  for (int i = 0; i < j->n; i++) {
    uint64_t a = j->s[i][0] > t0 ? j->s[i][0] : t0, b = j->s[i][1] < t1 ? j->s[i][1] : t1;
    if (b > a) busy += (double)(b - a);
  }
  return t1 > t0 ? busy / (double)(t1 - t0) : 0;
}

static int expect(const char *pa, const char *pb, const char *what, double ratio) {
  static job a, b;
  if (load(pa, &a) != 0 || load(pb, &b) != 0) return 1;
  uint64_t t0 = a.first_start;
  /* while both had work: from B's first task to whichever ended first */
  uint64_t w0 = b.first_start, w1 = a.last_end < b.last_end ? a.last_end : b.last_end;
  double ca = concurrency(&a, w0, w1), cb = concurrency(&b, w0, w1);
  printf("A: %d tasks, %.3f..%.3f s; B: %d tasks, %.3f..%.3f s (first task %.3f s after A's first)\n", a.n, 0.0,
         (a.last_end - t0) / 1e9, b.n, (b.first_start - t0) / 1e9, (b.last_end - t0) / 1e9,
         (b.first_start - t0) / 1e9);
  int turns = changes(&a, &b);
  char bp[600];
  snprintf(bp, sizeof(bp), "%s.begin", pb);
  FILE *bf = fopen(bp, "r");
  unsigned long long begin = 0;
  if (bf && fscanf(bf, "%llu", &begin) == 1 && begin && begin <= b.first_start)
    printf("B: first task %.3f s after its driver started, all %d done after %.3f s; A done after %.3f s\n",
           (b.first_start - begin) / 1e9, b.n, (b.last_end - begin) / 1e9, (a.last_end - a.first_start) / 1e9);
  if (bf) fclose(bf);
  printf("while both had work (%.3f s): A ran %.2f tasks at a time, B %.2f; the job changed %d times\n",
         w1 > w0 ? (w1 - w0) / 1e9 : 0.0, ca, cb, turns);
  if (!strcmp(what, "b_first")) {
    if (b.last_end < a.last_end) return 0;
    fprintf(stderr, "FAIL: B ended %.3f s after A: it waited for A\n", (b.last_end - a.last_end) / 1e9);
  } else if (!strcmp(what, "b_starved")) {
    if (b.first_start > a.last_start) return 0;
    fprintf(stderr, "FAIL: B started before A's last task without fair share\n");
  } else if (!strcmp(what, "ratio")) {
    if (w1 < w0 + 300000000ull) {   /* a share needs a while to show */
      fprintf(stderr, "FAIL: the jobs overlapped for %.3f s, too short to measure a share (give A more tasks)\n",
              w1 > w0 ? (w1 - w0) / 1e9 : 0.0);
      return 1;
    }
    if (ca > 0 && cb / ca >= 0.6 * ratio && cb / ca <= 1.6 * ratio) return 0;
    fprintf(stderr, "FAIL: B/A = %.2f, want %.2f (0.6x..1.6x)\n", ca > 0 ? cb / ca : 0.0, ratio);
  } else if (!strcmp(what, "turns")) {
    if (turns >= (int)ratio) return 0;
    fprintf(stderr, "FAIL: the job changed %d times, want at least %d\n", turns, (int)ratio);
  } else {
    fprintf(stderr, "unknown expectation %s\n", what);
    return 2;
  }
  return 1;
}

int main(int argc, char **argv) {
  if (argc >= 5 && !strcmp(argv[1], "run"))
    return run(atoi(argv[2]), (uint32_t)atoi(argv[3]), argv[4], argc > 5 ? atof(argv[5]) : 0);
  if (argc >= 5 && !strcmp(argv[1], "expect")) return expect(argv[2], argv[3], argv[4], argc > 5 ? atof(argv[5]) : 1);
  fprintf(stderr, "usage: %s run N MS OUT [WEIGHT] | expect A B b_first|b_starved|ratio R|turns N\n", argv[0]);
  return 2;
}
