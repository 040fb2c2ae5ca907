/* tests/runtime/output_test.c - the workers' output on the driver of an
 * embedded cluster (Ray's log_to_driver), through the public API in real
 * processes: `output_test CASE` runs this program again as a driver
 * (`driver`), its stdout and stderr in files, and reads them.
 *
 *   lines      every line of every task once, on its own stream, prefixed
 *              "(shout pid=N) " (no address: one machine); the lines of the
 *              task that ran just before rd_shutdown (300, and a last one
 *              without its newline) all printed; no mark bytes; the
 *              workers' files in the session directory hold the lines; the
 *              same line from three actors' workers printed once, then
 *              "[repeated 2x across cluster]"; a mark across the end of
 *              the node's read of a stream kept whole
 *   off        RAYDIST_LOG_TO_DRIVER=0: none on the driver, all in the files
 *   no_marks   RAYDIST_RECORD_TASK_LOGGING=0: the prefix has no name
 */
#include <raydist.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "embedded.h"

enum { TASKS = 4, LINES = 50, LAST = 9, LAST_LINES = 300, LOADERS = 3 };

RD_REMOTE(shout) {
  long t = arg_long(call, 0), n = arg_long(call, 1);
  char name = (char)('a' + t);   /* a word without digits: deduplication tells the tasks' lines apart */
  for (long k = 0; k < n; k++) printf("line %ld of task %c\n", k, name);
  fprintf(stderr, "err of task %c\n", name);
  if (t == LAST) printf("tail of task %c without newline", name);
  return rd_return_bytes(call, 0, &t, sizeof(t));
}

/* One write of a line of STRADDLE_Y bytes, then two marks spelt out by
 * hand (the bytes a worker writes before a task, RD_TASK_MARK in
 * runtime/common.h: "\x1e\x1frd:name NAME\n" renames the stream), then a
 * line: the second mark's first two bytes are the last of the node's
 * 16 KiB read, which must keep them for the next read (until 2026-12-06 it
 * printed them as a line, and the rest of the mark as another). */
#define STRADDLE_A "\x1e\x1frd:name Alpha\n"
#define STRADDLE_B "\x1e\x1frd:name Beta\n"
enum { STRADDLE_Y = 16384 - 2 - (sizeof(STRADDLE_A) - 1) - 1 };
RD_REMOTE(straddle) {
  static char buf[20000];
  usleep(50000);   /* the node has read this task's own mark: its next read begins at the line */
  size_t n = 0;
  memset(buf, 'y', STRADDLE_Y);
  n += STRADDLE_Y;
  buf[n++] = '\n';
  memcpy(buf + n, STRADDLE_A STRADDLE_B "after the marks\n", sizeof(STRADDLE_A STRADDLE_B "after the marks\n") - 1);
  n += sizeof(STRADDLE_A STRADDLE_B "after the marks\n") - 1;
  fflush(stdout);
  CHECK(write(1, buf, n) == (ssize_t)n);
  return rd_return_bytes(call, 0, "", 0);
}

/* An actor that prints the same line (less its digits) as the others of
 * its class when it starts: each actor is a worker of its own. */
static int loader_init(rd_call *call, void **state) {
  (void)call;
  *state = NULL;
  printf("model loaded by worker %d\n", (int)getpid());
  return 0;
}
RD_ACTOR_CLASS(Loader, loader_init, NULL)
RD_ACTOR_METHOD(Loader, pid) {
  (void)state;
  long pid = getpid();
  return rd_return_bytes(call, 0, &pid, sizeof(pid));
}

/* Every worker file's bytes of this session with the suffix (".out",
 * ".err"), one after the other; malloc'd. */
static char *worker_files(const char *suffix) {
  char dir[512];
  snprintf(dir, sizeof(dir), "%s/logs", rd_session_dir());
  DIR *d = opendir(dir);
  CHECK(d != NULL);
  size_t cap = 1 << 20, len = 0;
  char *all = malloc(cap);
  CHECK(all != NULL);
  for (struct dirent *e; (e = readdir(d));) {
    size_t nl = strlen(e->d_name), sl = strlen(suffix);
    if (strncmp(e->d_name, "worker-", 7) != 0 || nl < sl || strcmp(e->d_name + nl - sl, suffix) != 0) continue;
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    len += fread(all + len, 1, cap - 1 - len, f);
    fclose(f);
  }
  closedir(d);
  all[len] = 0;
  return all;
}

static void submit_shout(long t, long n, rd_ref *r) {
  CHECK_EQ(rd_submit(shout, RD_ARGS(rd_arg_bytes(&t, sizeof(t)), rd_arg_bytes(&n, sizeof(n))), NULL, r), 0);
}

/* The driver: OUTPUT_CASE in its environment says which. */
static int t_driver(void) {
  const char *which = getenv("OUTPUT_CASE");
  CHECK(which != NULL);
  init_or_die(LOADERS);
  rd_ref r[TASKS];
  for (long t = 0; t < TASKS; t++) submit_shout(t, LINES, &r[t]);
  rd_buf b[TASKS];
  CHECK_EQ(rd_get(r, TASKS, b, 60000), 0);
  for (int t = 0; t < TASKS; t++) {
    rd_buf_release(&b[t]);
    rd_ref_release(r[t]);
  }
  /* the node keeps them in the workers' files, as they were written, marks taken out */
  char *out = NULL, *err = NULL;
  for (int i = 0;; i++) {   /* the node reads them within a few ms */
    free(out);
    free(err);
    out = worker_files(".out");
    err = worker_files(".err");
    long t = 0;
    for (; t < TASKS; t++) {
      char want_out[64], want_err[64];
      snprintf(want_out, sizeof(want_out), "line %d of task %c\n", LINES - 1, (char)('a' + t));
      snprintf(want_err, sizeof(want_err), "err of task %c\n", (char)('a' + t));
      if (!strstr(out, want_out) || !strstr(err, want_err)) break;
    }
    if (t == TASKS) break;
    if (i == 250) {
      fprintf(stderr, "task %ld's lines are not in the workers' files\n", t);
      exit(1);
    }
    usleep(20000);
  }
  CHECK(strchr(out, '\x1e') == NULL && strchr(err, '\x1e') == NULL);
  free(out);
  free(err);
  if (!strcmp(which, "lines")) {
    rd_actor l[LOADERS];
    long pids[LOADERS];
    for (int i = 0; i < LOADERS; i++) CHECK_EQ(rd_actor_create(Loader, RD_NO_ARGS, NULL, &l[i]), 0);
    for (int i = 0; i < LOADERS; i++) call_or_die(l[i], Loader_pid, RD_NO_ARGS, &pids[i], sizeof(long));
    CHECK(pids[0] != pids[1] && pids[1] != pids[2] && pids[0] != pids[2]);
  }
  if (!strcmp(which, "lines")) {
    rd_ref st;
    CHECK_EQ(rd_submit(straddle, RD_NO_ARGS, NULL, &st), 0);
    rd_buf sb;
    CHECK_EQ(rd_get(&st, 1, &sb, 60000), 0);
    rd_buf_release(&sb);
    rd_ref_release(st);
  }
  /* the last task's lines may still be in its pipe as its result comes:
   * rd_shutdown has them read and printed first */
  rd_ref last;
  submit_shout(LAST, LAST_LINES, &last);
  rd_buf lb;
  CHECK_EQ(rd_get(&last, 1, &lb, 60000), 0);
  long got = -1;
  memcpy(&got, lb.data, sizeof(got));
  CHECK_EQ(got, LAST);
  rd_buf_release(&lb);
  rd_ref_release(last);
  printf("driver done\n");
  fflush(stdout);
  rd_shutdown();
  return 0;
}

/* The file's bytes; malloc'd. */
static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  CHECK(f != NULL);
  size_t cap = 1 << 20;
  char *s = malloc(cap);
  CHECK(s != NULL);
  size_t n = fread(s, 1, cap - 1, f);
  fclose(f);
  s[n] = 0;
  return s;
}

/* How many lines of text end with tail, and begin with prefix (NULL: any)
 * up to its pid's digits and ") ". */
static int count_lines(const char *text, const char *prefix, const char *tail) {
  int n = 0;
  size_t tl = strlen(tail);
  for (const char *p = text; *p;) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    if (len >= tl && !memcmp(p + len - tl, tail, tl)) {
      int ok = 1;
      if (prefix) {
        size_t pl = strlen(prefix);
        const char *q = p + pl;
        ok = len > pl && !memcmp(p, prefix, pl);
        while (ok && *q >= '0' && *q <= '9') q++;
        ok = ok && q > p + pl && q[0] == ')' && q[1] == ' ' && q + 2 + tl == p + len;
      }
      n += ok;
    }
    p += len + (nl != NULL);
  }
  return n;
}

/* Runs the driver with case c and extra environment (NAME=VALUE or NULL);
 * its stdout and stderr, malloc'd. */
static void run_driver(const char *c, const char *env, char **out, char **err) {
  char fo[] = "/tmp/rd-output-out.XXXXXX", fe[] = "/tmp/rd-output-err.XXXXXX";
  int o = mkstemp(fo), e = mkstemp(fe);
  CHECK(o >= 0 && e >= 0);
  pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) {
    dup2(o, 1);
    dup2(e, 2);
    setenv("OUTPUT_CASE", c, 1);
    if (env) putenv((char *)env);
    execl("/proc/self/exe", "output_test", "driver", (char *)NULL);
    _exit(127);
  }
  close(o);
  close(e);
  int st;
  CHECK_EQ(waitpid(child, &st, 0), child);
  *out = slurp(fo);
  *err = slurp(fe);
  unlink(fo);
  unlink(fe);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fprintf(stderr, "driver failed:\n--- stdout\n%s\n--- stderr\n%s\n", *out, *err);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static int t_lines(void) {
  char *out, *err;
  run_driver("lines", NULL, &out, &err);
  for (long t = 0; t < TASKS; t++) {
    for (int k = 0; k < LINES; k++) {
      char line[64];
      snprintf(line, sizeof(line), "line %d of task %c", k, (char)('a' + t));
      CHECK_EQ(count_lines(out, "(shout pid=", line), 1);
    }
    char line[64];
    snprintf(line, sizeof(line), "err of task %c", (char)('a' + t));
    CHECK_EQ(count_lines(err, "(shout pid=", line), 1);
  }
  for (int k = 0; k < LAST_LINES; k++) {
    char line[64];
    snprintf(line, sizeof(line), "line %d of task j", k);
    CHECK_EQ(count_lines(out, "(shout pid=", line), 1);
  }
  CHECK_EQ(count_lines(out, "(shout pid=", "tail of task j without newline"), 1);
  CHECK_EQ(count_lines(out, NULL, "driver done"), 1);
  /* the line and the marks of one write, the second mark across the end of a read */
  char *y = malloc(STRADDLE_Y + 1);
  CHECK(y != NULL);
  memset(y, 'y', STRADDLE_Y);
  y[STRADDLE_Y] = 0;
  CHECK_EQ(count_lines(out, "(straddle pid=", y), 1);
  free(y);
  CHECK_EQ(count_lines(out, "(Beta pid=", "after the marks"), 1);
  CHECK(strstr(out, ", ip=") == NULL && strchr(out, '\x1e') == NULL && strchr(err, '\x1e') == NULL);
  /* three actors' "model loaded by worker PID": the first, then the last with the count of the held copies */
  int first = 0, repeated = 0;
  for (const char *p = out; (p = strstr(p, "model loaded by worker ")); p++) {
    const char *nl = strchr(p, '\n');
    CHECK(nl != NULL);
    const char *tag = strstr(p, " [repeated 2x across cluster]");   /* the first such line says how to turn it off */
    if (tag && tag < nl) repeated++;
    else first++;
  }
  printf("lines: %d + %d + 1 of the driver's; 'model loaded' printed %d, then %d with [repeated 2x]\n",
         TASKS * LINES, LAST_LINES, first, repeated);
  CHECK_EQ(first, 1);
  CHECK_EQ(repeated, 1);
  free(out);
  free(err);
  return 0;
}

static int t_off(void) {
  char *out, *err;
  run_driver("off", "RAYDIST_LOG_TO_DRIVER=0", &out, &err);
  CHECK(strstr(out, "of task") == NULL && strstr(err, "of task") == NULL && strstr(out, "model loaded") == NULL);
  CHECK(strstr(out, "driver done\n") != NULL);
  free(out);
  free(err);
  return 0;
}

static int t_no_marks(void) {
  char *out, *err;
  run_driver("no_marks", "RAYDIST_RECORD_TASK_LOGGING=0", &out, &err);
  CHECK_EQ(count_lines(out, "(pid=", "line 0 of task a"), 1);
  CHECK_EQ(count_lines(out, "(pid=", "line 299 of task j"), 1);
  CHECK(strstr(out, "(shout ") == NULL);
  free(out);
  free(err);
  return 0;
}

static const rd_test_case tests[] = {
    {"driver", t_driver}, {"lines", t_lines}, {"off", t_off}, {"no_marks", t_no_marks},
};

RD_TEST_MAIN(tests)
