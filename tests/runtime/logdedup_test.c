/* tests/runtime/logdedup_test.c - the driver's deduplication of workers'
 * lines (src/logdedup.c) on a clock of its own: what is printed at once,
 * what is held and printed when its window ends, and the settings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../check.h"
#include "logdedup.h"

#define S 1000000000ull

static FILE *out;

/* What was printed since the last call (NUL-terminated, static). */
static const char *printed(void) {
  static char buf[1 << 20];
  fflush(out);
  long n = ftell(out);
  rewind(out);
  size_t got = fread(buf, 1, n > 0 ? (size_t)n : 0, out);
  buf[got] = 0;
  rewind(out);
  CHECK(ftruncate(fileno(out), 0) == 0);
  return buf;
}

static size_t count_of(const char *hay, const char *needle) {
  size_t n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

static void line(rd__dedup *d, int pid, const char *ip, const char *s, uint64_t now) {
  rd__dedup_line(d, out, pid, ip, NULL, s, strlen(s), now);
}

static rd__dedup *make(const char *window, const char *allow, const char *skip) {
  setenv("RAYDIST_DEDUP_LOGS_AGG_WINDOW_S", window, 1);
  if (allow) setenv("RAYDIST_DEDUP_LOGS_ALLOW_REGEX", allow, 1);
  else unsetenv("RAYDIST_DEDUP_LOGS_ALLOW_REGEX");
  if (skip) setenv("RAYDIST_DEDUP_LOGS_SKIP_REGEX", skip, 1);
  else unsetenv("RAYDIST_DEDUP_LOGS_SKIP_REGEX");
  rd__dedup *d = NULL;
  char why[300] = "";
  CHECK(rd__dedup_from_env(&d, why, sizeof(why)) == 0 && d != NULL);
  return d;
}

int main(void) {
  out = tmpfile();
  CHECK(out != NULL);
  rd__dedup *d = make("1", NULL, NULL);

  /* three workers, one line (their pids differ): the first printed, two held */
  line(d, 11, "10.0.0.2", "loaded model in 3.2 s on worker 11", 0);
  line(d, 12, "10.0.0.2", "loaded model in 2.9 s on worker 12", 1000);
  line(d, 13, "10.0.0.3", "loaded model in 3.0 s on worker 13", 2000);
  const char *p = printed();
  CHECK(!strcmp(p, "(pid=11, ip=10.0.0.2) loaded model in 3.2 s on worker 11\n"));
  CHECK(rd__dedup_tick(d, S / 2) == S / 2);   /* half the window left */
  CHECK(!strcmp(printed(), ""));
  /* the window ends: the last held line with how many, and how to turn it off, once */
  CHECK(rd__dedup_tick(d, S) == S);   /* still repeated: a new window */
  p = printed();
  CHECK(strstr(p, "(pid=13, ip=10.0.0.3) loaded model in 3.0 s on worker 13 [repeated 2x across cluster] "
                  "(raydist deduplicates") == p);
  CHECK(count_of(p, "\n") == 1);
  /* one more in the new window (from a worker already seen): printed alone at its end */
  line(d, 12, "10.0.0.2", "loaded model in 9.9 s on worker 12", S + 10);
  CHECK(!strcmp(printed(), ""));
  CHECK(rd__dedup_tick(d, 2 * S) == UINT64_MAX);   /* nothing held after */
  CHECK(!strcmp(printed(), "(pid=12, ip=10.0.0.2) loaded model in 9.9 s on worker 12\n"));
  /* a later window: the same line again is printed at once, the note not again */
  line(d, 11, "10.0.0.2", "loaded model in 1 s on worker 11", 3 * S);
  line(d, 12, "10.0.0.2", "loaded model in 1 s on worker 12", 3 * S);
  line(d, 13, "10.0.0.2", "loaded model in 1 s on worker 13", 3 * S);
  CHECK(!strcmp(printed(), "(pid=11, ip=10.0.0.2) loaded model in 1 s on worker 11\n"));
  (void)rd__dedup_tick(d, 4 * S);
  p = printed();
  CHECK(strstr(p, "[repeated 2x across cluster]\n") != NULL && !strstr(p, "raydist deduplicates"));

  /* one worker's own repeats are printed; so are lines of digits only */
  for (int i = 0; i < 3; i++) line(d, 21, "10.0.0.2", "step done", 5 * S);
  line(d, 22, "10.0.0.2", "42 1.5 0x1f", 5 * S);
  line(d, 23, "10.0.0.2", "42 1.5 0x1f", 5 * S);
  p = printed();
  CHECK(count_of(p, "(pid=21, ip=10.0.0.2) step done\n") == 3);
  CHECK(count_of(p, "42 1.5 0x1f\n") == 2);
  /* stdout and stderr are apart: the same text on the other stream is new */
  rd__dedup_line(d, stderr == out ? stdout : stderr, 24, "10.0.0.2", NULL, "step done", 9, 5 * S);
  line(d, 25, "10.0.0.3", "step done", 5 * S);   /* held: a second worker on this stream */
  CHECK(!strcmp(printed(), ""));
  rd__dedup_free(d);   /* what is held is printed */
  CHECK(!strcmp(printed(), "(pid=25, ip=10.0.0.3) step done\n"));

  /* the task (or actor) a line came from leads its prefix, as Ray's; the
   * held line keeps the name of the last worker that printed it */
  d = make("1", NULL, NULL);
  rd__dedup_line(d, out, 31, "10.0.0.2", "embed_batch", "batch done in 12 ms", 19, 0);
  rd__dedup_line(d, out, 32, "10.0.0.3", "Embedder", "batch done in 13 ms", 19, 10);
  CHECK(!strcmp(printed(), "(embed_batch pid=31, ip=10.0.0.2) batch done in 12 ms\n"));
  rd__dedup_free(d);
  CHECK(!strcmp(printed(), "(Embedder pid=32, ip=10.0.0.3) batch done in 13 ms\n"));
  char prefix[RD_WORKER_PREFIX_MAX];
  rd__worker_prefix(prefix, sizeof(prefix), 7, NULL, "");
  CHECK(!strcmp(prefix, "(pid=7, ip=?) "));

  /* allowed lines always print, skipped ones never */
  d = make("5", "^progress", "^noise");
  for (int i = 0; i < 3; i++) {
    char s[64];
    snprintf(s, sizeof(s), "progress of worker %d", i);
    line(d, 30 + i, "10.0.0.2", s, 0);
    line(d, 30 + i, "10.0.0.2", "noise noise", 0);
  }
  p = printed();
  CHECK(count_of(p, "progress of worker") == 3 && !strstr(p, "noise"));
  /* a line longer than 16 KiB is printed as it is */
  char *big = malloc(20000);
  CHECK(big != NULL);
  memset(big, 'x', 19999);
  big[19999] = 0;
  line(d, 40, "10.0.0.2", big, 0);
  line(d, 41, "10.0.0.3", big, 0);
  CHECK(count_of(printed(), "xxxx\n") == 2);
  free(big);
  /* more forms than are followed at once: each printed, none lost */
  for (int i = 0; i < 5000; i++) {
    char s[64];
    snprintf(s, sizeof(s), "form %c%c%c", 'a' + i % 26, 'a' + i / 26 % 26, 'a' + i / 676 % 26);
    line(d, 50, "10.0.0.2", s, 0);
    line(d, 51, "10.0.0.3", s, 0);
  }
  rd__dedup_free(d);
  CHECK(count_of(printed(), "form ") == 10000);

  /* the settings */
  setenv("RAYDIST_DEDUP_LOGS", "0", 1);
  char why[300] = "";
  d = (rd__dedup *)1;
  CHECK(rd__dedup_from_env(&d, why, sizeof(why)) == 0 && d == NULL);
  unsetenv("RAYDIST_DEDUP_LOGS");
  static const char *bad[] = {"soon", "0", "-1", "5000", "1s"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    setenv("RAYDIST_DEDUP_LOGS_AGG_WINDOW_S", bad[i], 1);
    CHECK(rd__dedup_from_env(&d, why, sizeof(why)) == -1 && d == NULL);
    CHECK(strstr(why, "RAYDIST_DEDUP_LOGS_AGG_WINDOW_S must be seconds") != NULL);
  }
  setenv("RAYDIST_DEDUP_LOGS_AGG_WINDOW_S", "0.5", 1);
  setenv("RAYDIST_DEDUP_LOGS_SKIP_REGEX", "([", 1);
  CHECK(rd__dedup_from_env(&d, why, sizeof(why)) == -1 && d == NULL);
  CHECK(strstr(why, "RAYDIST_DEDUP_LOGS_SKIP_REGEX is not a regular expression") != NULL);
  fclose(out);
  printf("logdedup: ok\n");
  return 0;
}
