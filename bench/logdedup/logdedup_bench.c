/* bench/logdedup/logdedup_bench.c - what deduplicating workers' lines
 * costs the driver (src/logdedup.c), side by side with printing them
 * plainly, into /dev/null: ns a line for 1,000,000 lines of ~50 bytes
 * from 8 workers, (a) every line printed with its prefix (as with
 * RAYDIST_DEDUP_LOGS=0), (b) deduplicated, 676 forms cycling (most lines
 * held as copies of a form), (c) deduplicated, one form (every copy but
 * the first of each window held).  Usage: logdedup_bench [--lines N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "logdedup.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  long n = 1000000;
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], "--lines")) n = atol(argv[++i]);
  FILE *f = fopen("/dev/null", "w");
  if (!f || n < 1) return 1;
  static const char *what[] = {"printed plainly", "deduplicated, 676 forms", "deduplicated, one form"};
  for (int mode = 0; mode < 3; mode++) {
    rd__dedup *d = NULL;
    char why[200];
    if (mode && (rd__dedup_from_env(&d, why, sizeof(why)) != 0 || !d)) {
      fprintf(stderr, "logdedup_bench: %s\n", d ? why : "RAYDIST_DEDUP_LOGS=0: nothing to measure");
      return 1;
    }
    char line[128];
    double t0 = now();
    for (long i = 0; i < n; i++) {
      int l = mode == 1 ? snprintf(line, sizeof(line), "processed batch %c%c of the shard, items %ld", 'a' + (int)(i % 26),
                                   'a' + (int)(i / 26 % 26), i)
                        : snprintf(line, sizeof(line), "processed batch %ld of the shard, items %ld", i, i * 7);
      uint64_t ns = (uint64_t)(t0 * 1e9) + (uint64_t)i * 1000;   /* a line a microsecond: windows close as they go */
      if (!d) fprintf(f, "(process_shard pid=%d, ip=%s) %.*s\n", 100 + (int)(i % 8), "10.0.0.2", l, line);
      else rd__dedup_line(d, f, 100 + (int)(i % 8), "10.0.0.2", "process_shard", line, (size_t)l, ns);
      if (d && i % 1024 == 0) (void)rd__dedup_tick(d, ns);
    }
    rd__dedup_free(d);
    double el = now() - t0;
    printf("logdedup %-26s %ld lines: %6.0f ns a line (%.2f M lines/s)\n", what[mode], n, el / (double)n * 1e9,
           (double)n / el / 1e6);
  }
  fclose(f);
  return 0;
}
