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
 *   cli        `raydist logs --local` while the driver runs: a worker's
 *              stdout and stderr by its pid, a task's lines by its id, an
 *              actor's by its id, the session's files listed
 *   kept       an ended session's workers' files kept, read with `raydist
 *              logs`, pruned to RAYDIST_SESSIONS_KEPT
 *   noise      lines of every byte (NULs, the marks' bytes, what looks like
 *              a mark) written in pieces of random sizes: each printed
 *              once, whole, byte for byte
 */
#include <raydist.h>

#include <dirent.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
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

/* Three lines on stdout and one on stderr, as shout's; its worker's pid
 * and its own id (rd_call_task_id). */
typedef struct told {
  long pid;
  char id[RD_TASK_ID_LEN];
} told;
RD_REMOTE(tell) {
  for (int k = 0; k < 3; k++) printf("line %d of task f\n", k);
  fprintf(stderr, "err of task f\n");
  told t = {.pid = getpid()};
  char small[8];
  if (rd_call_task_id(call, small, sizeof(small)) != RD_EINVAL || small[0]) return rd_call_fail(call, "a small buffer");
  if (rd_call_task_id(call, t.id, sizeof(t.id)) != 0) return rd_call_fail(call, "rd_call_task_id");
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

/* Noise of seed: NOISE_LINES lines "S<seed>L<i>:" and then 0 to 12,000
 * bytes of every value but '\n' (NULs, the marks' first bytes, and
 * RD_TASK_MARK followed by what no mark is among them), each with its
 * newline, into out (NOISE_MAX bytes); its length.  The same in the task
 * that writes it and in the test that reads it back. */
enum { NOISES = 8, NOISE_LINES = 40, NOISE_MAX = NOISE_LINES * 12100 };
static uint32_t noise_rand(uint32_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 17;
  *x ^= *x << 5;
  return *x;
}
static size_t noise(uint32_t seed, char *out) {
  static const char *const fakes[] = {"\x1e\x1frd:", "\x1e\x1frd:nam", "\x1e\x1frd:task", "\x1e\x1f", "\x1e", "\x1e\x1frd",
                                      "\x1e\x1frd:name"};
  uint32_t x = seed * 2654435761u + 1;
  size_t n = 0;
  for (int i = 0; i < NOISE_LINES; i++) {
    n += (size_t)sprintf(out + n, "S%uL%d:", seed, i);
    uint32_t r = noise_rand(&x) % 10, len = r < 6 ? noise_rand(&x) % 80 : r < 9 ? noise_rand(&x) % 2000 : noise_rand(&x) % 12000;
    for (uint32_t k = 0; k < len; k++) {
      if (noise_rand(&x) % 40 == 0) {   /* what only looks like a mark, then a byte no mark has there */
        const char *f = fakes[noise_rand(&x) % (sizeof(fakes) / sizeof(fakes[0]))];
        memcpy(out + n, f, strlen(f));
        n += strlen(f);
        out[n++] = '!';
        continue;
      }
      char c = (char)(noise_rand(&x) & 0xff);
      out[n++] = c == '\n' ? 0 : c;
    }
    out[n++] = '\n';
  }
  return n;
}

/* Writes noise(seed) to stdout in pieces of 1 to 5,000 bytes, now and then
 * resting up to 1.5 ms, so that the node's reads end anywhere. */
RD_REMOTE(noisy) {
  long seed = arg_long(call, 0);
  char *buf = malloc(NOISE_MAX);
  if (!buf) return rd_call_fail(call, "out of memory");
  size_t n = noise((uint32_t)seed, buf);
  uint32_t x = (uint32_t)seed + 7;
  fflush(stdout);
  for (size_t k = 0; k < n;) {
    size_t piece = 1 + noise_rand(&x) % 5000;
    if (piece > n - k) piece = n - k;
    ssize_t w = write(1, buf + k, piece);
    if (w <= 0) break;
    k += (size_t)w;
    if (noise_rand(&x) % 4 == 0) usleep(noise_rand(&x) % 1500);
  }
  free(buf);
  return rd_return_bytes(call, 0, &seed, sizeof(seed));
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
/* This driver's embedded node: its child process named raydist; 0 when none. */
static pid_t node_child(void) {
  DIR *d = opendir("/proc");
  pid_t found = 0;
  for (struct dirent *e; d && !found && (e = readdir(d));) {
    char p[300], buf[512];
    snprintf(p, sizeof(p), "/proc/%s/stat", e->d_name);
    FILE *f = fopen(p, "r");
    if (!f) continue;
    int ppid = 0;
    if (fgets(buf, sizeof(buf), f)) {
      const char *rp = strrchr(buf, ')');
      if (rp && sscanf(rp + 2, "%*c %d", &ppid) == 1 && ppid == getpid() && strstr(buf, "(raydist)"))
        found = (pid_t)atol(e->d_name);
    }
    fclose(f);
  }
  if (d) closedir(d);
  return found;
}

/* tell run to its end: what it told. */
static told run_tell(void) {
  rd_ref gp;
  rd_buf pb;
  CHECK_EQ(rd_submit(tell, RD_NO_ARGS, NULL, &gp), 0);
  CHECK_EQ(rd_get(&gp, 1, &pb, 60000), 0);
  told t;
  CHECK_EQ(pb.size, sizeof(t));
  memcpy(&t, pb.data, sizeof(t));
  rd_buf_release(&pb);
  rd_ref_release(gp);
  return t;
}

static int t_driver(void) {
  const char *which = getenv("OUTPUT_CASE");
  CHECK(which != NULL);
  init_or_die(LOADERS);
  if (!strcmp(which, "noise")) {   /* the noisy tasks alone, two at a time */
    rd_ref nr[NOISES];
    for (long seed = 1; seed <= NOISES; seed++)
      CHECK_EQ(rd_submit(noisy, RD_ARGS(rd_arg_bytes(&seed, sizeof(seed))), NULL, &nr[seed - 1]), 0);
    rd_buf nb[NOISES];
    CHECK_EQ(rd_get(nr, NOISES, nb, 120000), 0);
    for (int i = 0; i < NOISES; i++) {
      rd_buf_release(&nb[i]);
      rd_ref_release(nr[i]);
    }
    printf("driver done\n");
    fflush(stdout);
    rd_shutdown();
    return 0;
  }
  if (!strcmp(which, "kept")) {   /* one task that tells; gone without rd_shutdown when asked */
    told t = run_tell();
    printf("session %s worker %ld task %s driver %ld\n", rd_session_dir(), t.pid, t.id, (long)getpid());
    fflush(stdout);
    if (getenv("OUTPUT_NO_SHUTDOWN")) _exit(0);
    if (getenv("OUTPUT_KILL_NODE")) {   /* its node SIGKILLed (as the OOM killer would): no end of its own */
      for (int i = 0; i < 500; i++) {   /* its files hold the task's lines first (the node reads within ms) */
        char *o = worker_files(".out");
        int there = strstr(o, "line 2 of task f\n") != NULL;
        free(o);
        if (there) break;
        usleep(10000);
      }
      pid_t node = node_child();
      CHECK(node > 0 && kill(node, SIGKILL) == 0 && waitpid(node, NULL, 0) == node);
      _exit(0);
    }
    rd_shutdown();
    return 0;
  }
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
  if (!strcmp(which, "cli")) {   /* raydist logs --local, while this driver runs */
    const char *bin = getenv("RAYDIST_BIN");
    CHECK(bin != NULL);
    told t = run_tell();
    long wpid = t.pid, apid = 0;
    rd_actor la;   /* an actor's file by its id: the id as raydist list actors gives it */
    CHECK_EQ(rd_actor_create(Loader, RD_NO_ARGS, NULL, &la), 0);
    call_or_die(la, Loader_pid, RD_NO_ARGS, &apid, sizeof(long));
    char cmd[2400];
    snprintf(cmd, sizeof(cmd), "'%s' logs worker --pid %ld --local > cli.out 2>&1; '%s' logs worker --pid %ld --err --local "
             "> cli.err 2>&1; '%s' logs 'worker-*' --local > cli.list 2>&1; '%s' logs worker --pid 1 --local > cli.none 2>&1; "
             "echo $? > cli.none.rc; '%s' logs actor --id 00 --local > cli.actor 2>&1; echo $? > cli.actor.rc; "
             "timeout 2 '%s' logs worker --pid %ld --local --follow --tail 2 > cli.follow 2>&1; "
             "'%s' logs task --id %s --local > cli.task 2>&1; '%s' logs task --id %s --local --err > cli.task.err 2>&1; "
             "ID=$('%s' list actors --local | awk -v p=%ld '$6 == p {print $1}'); "
             "'%s' logs actor --id \"$ID\" --local > cli.actor_ok 2>&1; true",
             bin, wpid, bin, wpid, bin, bin, bin, bin, wpid, bin, t.id, bin, t.id, bin, apid, bin);
    CHECK_EQ(system(cmd), 0);
    printf("session %s worker %ld actor %ld\n", rd_session_dir(), wpid, apid);
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

/* The file's bytes (NUL-terminated, *len of them); malloc'd. */
static size_t slurp_len;
static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  CHECK(f != NULL);
  size_t cap = 16 << 20;
  char *s = malloc(cap);
  CHECK(s != NULL);
  size_t n = fread(s, 1, cap - 1, f);
  fclose(f);
  s[n] = 0;
  slurp_len = n;
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
static size_t out_len;   /* the last run_driver's stdout, in bytes (it may hold NULs) */
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
  out_len = slurp_len;
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

/* Eight tasks' noise, two at a time: every line printed once, whole, byte
 * for byte, after "(noisy pid=N) ". */
static int t_noise(void) {
  char *out, *err;
  run_driver("noise", "RAYDIST_DEDUP_LOGS=0", &out, &err);
  char *want = malloc(NOISE_MAX);
  CHECK(want != NULL);
  int got[NOISES + 1][NOISE_LINES];
  memset(got, 0, sizeof(got));
  int lines = 0, other = 0;
  for (size_t k = 0; k < out_len;) {
    const char *p = out + k, *nl = memchr(p, '\n', out_len - k);
    size_t len = nl ? (size_t)(nl - p) : out_len - k;
    k += len + 1;
    const char *q = p + 12;   /* "(noisy pid=" N ") " */
    if (len < 12 || memcmp(p, "(noisy pid=", 11) != 0) {   /* the driver's own: "driver done", "driver: ok" */
      CHECK((len == 11 && !memcmp(p, "driver done", 11)) || (len == 10 && !memcmp(p, "driver: ok", 10)));
      other++;
      continue;
    }
    while (q < p + len && *q >= '0' && *q <= '9') q++;
    CHECK(q + 2 <= p + len && q[0] == ')' && q[1] == ' ');
    q += 2;
    unsigned seed;
    int i, hl = 0;
    if (sscanf(q, "S%uL%d:%n", &seed, &i, &hl) != 2 || hl == 0 || seed < 1 || seed > NOISES || i < 0 || i >= NOISE_LINES) {
      fprintf(stderr, "a line not as written: %.60s\n", q);
      exit(1);
    }
    size_t wl = noise(seed, want), at = 0;   /* line i of it */
    for (int j = 0; j < i; j++) at = (size_t)((char *)memchr(want + at, '\n', wl - at) - want) + 1;
    size_t il = (size_t)((char *)memchr(want + at, '\n', wl - at) - (want + at));
    if (il != (size_t)(p + len - q) || memcmp(want + at, q, il) != 0) {
      fprintf(stderr, "line %d of seed %u: %zu bytes printed, %zu written\n", i, seed, (size_t)(p + len - q), il);
      exit(1);
    }
    got[seed][i]++;
    lines++;
  }
  for (int seed = 1; seed <= NOISES; seed++)
    for (int i = 0; i < NOISE_LINES; i++) CHECK_EQ(got[seed][i], 1);
  printf("noise: %d lines (%zu bytes printed) whole and in place; %d lines of the driver's\n", lines, out_len, other);
  CHECK_EQ(other, 2);
  free(want);
  free(out);
  free(err);
  return 0;
}

/* raydist logs --local while the driver runs (the driver runs it, in a
 * directory of its own): a worker's stdout and stderr by its pid alone,
 * its last lines with --follow, a task's own lines by its id
 * (rd_call_task_id), the session's files listed, a pid no worker has and
 * an actor refused. */
static int t_cli(void) {
  char dir[] = "/tmp/rd-output-cli.XXXXXX", tmp[] = "/tmp/rd-output-root.XXXXXX";
  CHECK(mkdtemp(dir) != NULL && mkdtemp(tmp) != NULL);
  setenv("RAYDIST_TMPDIR", tmp, 1);   /* its embedded node alone: other tests' number their actors from 1 too */
  char cwd[1024];
  CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
  CHECK_EQ(chdir(dir), 0);
  char *out, *err;
  run_driver("cli", NULL, &out, &err);
  char sess[600] = "";
  long wpid = 0, apid = 0;
  const char *at = strstr(out, "session ");
  CHECK(at && sscanf(at, "session %599s worker %ld actor %ld", sess, &wpid, &apid) == 3);
  char *o = slurp("cli.out"), *e = slurp("cli.err"), *list = slurp("cli.list"), *none = slurp("cli.none");
  char *none_rc = slurp("cli.none.rc"), *actor = slurp("cli.actor"), *actor_rc = slurp("cli.actor.rc");
  char *follow = slurp("cli.follow");   /* its last 2 lines, then it waits for more until killed */
  CHECK(!strcmp(follow, "line 1 of task f\nline 2 of task f\n"));
  char *task = slurp("cli.task"), *task_err = slurp("cli.task.err");   /* the task's own lines, not its worker's file */
  printf("the task's stdout:\n%s--- its stderr:\n%s", task, task_err);
  CHECK(!strcmp(task, "line 0 of task f\nline 1 of task f\nline 2 of task f\n"));
  CHECK(!strcmp(task_err, "err of task f\n"));
  printf("worker %ld's stdout:\n%s--- its stderr:\n%s--- the listing:\n%s--- pid 1: %s--- an actor: %s", wpid, o, e, list,
         none, actor);
  CHECK(strstr(o, "line 0 of task f\nline 1 of task f\nline 2 of task f\n") != NULL);
  CHECK(strstr(o, "err of task") == NULL && strchr(o, '\x1e') == NULL);
  CHECK(strstr(e, "err of task f\n") != NULL && strstr(e, "line 0") == NULL);
  char name[700];
  snprintf(name, sizeof(name), "embedded node %s:\n", sess);
  CHECK(strstr(list, name) != NULL);
  snprintf(name, sizeof(name), "-%ld.out\n", wpid);
  CHECK(strstr(list, name) != NULL);
  CHECK(strstr(none, "no embedded node on this machine, running or ended, has pid=1") != NULL && atoi(none_rc) == 1);
  CHECK(strstr(actor, "no running embedded node on this machine has actor 00") != NULL && atoi(actor_rc) == 1);
  char *actor_ok = slurp("cli.actor_ok"), line[96];
  snprintf(line, sizeof(line), "model loaded by worker %ld\n", apid);
  printf("--- the actor's stdout by its id:\n%s", actor_ok);
  CHECK(strstr(actor_ok, line) != NULL);
  free(actor_ok);
  unlink("cli.actor_ok");
  const char *names[] = {"cli.out",   "cli.err",      "cli.list",  "cli.none",
                         "cli.none.rc", "cli.actor", "cli.actor.rc", "cli.follow", "cli.task", "cli.task.err"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) unlink(names[i]);
  CHECK_EQ(chdir(cwd), 0);
  rmdir(dir);
  char rm[200];
  snprintf(rm, sizeof(rm), "rm -rf '%s'", tmp);
  CHECK_EQ(system(rm), 0);
  unsetenv("RAYDIST_TMPDIR");
  free(o), free(e), free(list), free(none), free(none_rc), free(actor), free(actor_rc), free(follow), free(task), free(task_err), free(out), free(err);
  return 0;
}

/* `$RAYDIST_BIN ARGS` run to its end: its stdout and stderr (malloc'd);
 * its exit status. */
static int cli(const char *args, char **out) {
  char cmd[1600], f[] = "/tmp/rd-output-cli.XXXXXX";
  int fd = mkstemp(f);
  CHECK(fd >= 0);
  close(fd);
  snprintf(cmd, sizeof(cmd), "'%s' %s > %s 2>&1", getenv("RAYDIST_BIN"), args, f);
  int st = system(cmd);
  *out = slurp(f);
  unlink(f);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* cli(args) exits 0 having printed exactly want. */
static int cli_is(const char *args, const char *want) {
  char *o;
  int rc = cli(args, &o);
  if (rc != 0 || strcmp(o, want) != 0) fprintf(stderr, "raydist %s: exit %d:\n%s--- not:\n%s", args, rc, o, want);
  int ok = rc == 0 && !strcmp(o, want);
  free(o);
  return ok;
}

/* A kept session's entries, sorted, one line each (malloc'd). */
static char *entries(const char *dir) {
  char cmd[2048], *out;
  snprintf(cmd, sizeof(cmd), "ls -A '%s' > /tmp/rd-output-ls.%d", dir, (int)getpid());
  CHECK_EQ(system(cmd), 0);
  snprintf(cmd, sizeof(cmd), "/tmp/rd-output-ls.%d", (int)getpid());
  out = slurp(cmd);
  unlink(cmd);
  return out;
}

/* How many ended sessions dir (a RAYDIST_TMPDIR) keeps. */
static int ended_count(const char *dir) {
  char root[600];
  snprintf(root, sizeof(root), "%s/raydist-%d", dir, (int)getuid());
  DIR *d = opendir(root);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));) {
    char p[1200];
    snprintf(p, sizeof(p), "%s/%s/ended", root, e->d_name);
    n += access(p, F_OK) == 0;
  }
  if (d) closedir(d);
  return n;
}

/* An ended session keeps its workers' files: after its driver's
 * rd_shutdown, and after a driver that exited without it, the session
 * directory holds only logs/, task_lines.json and ended; `raydist logs`
 * (no cluster here: --local by itself) lists it as ended, gives a worker's
 * file by its pid and a task's own lines by its id; RAYDIST_SESSIONS_KEPT=2
 * keeps the newest two; a session whose node was SIGKILLed is ended by
 * the next session's end, or by `raydist logs` (its files kept); 0 keeps
 * none.  Its own RAYDIST_TMPDIR: other tests'
 * sessions are not pruned by its drivers (nor its by theirs). */
static int t_kept(void) {
  char tmp[] = "/tmp/rd-output-kept.XXXXXX";
  CHECK(mkdtemp(tmp) != NULL);
  setenv("RAYDIST_TMPDIR", tmp, 1);
  unsetenv("RAYDIST_ADDRESS");
  unsetenv("RAYDIST_SESSIONS_KEPT");
  char sess[3][600], id[3][RD_TASK_ID_LEN + 8], *out, *err, *o, args[300], want[900];
  long wpid[3], dpid[3];
  for (int i = 0; i < 3; i++) {   /* ended with rd_shutdown, without it, and with it again */
    run_driver("kept", i == 1 ? "OUTPUT_NO_SHUTDOWN=1" : NULL, &out, &err);
    const char *at = strstr(out, "session ");
    CHECK(at && sscanf(at, "session %599s worker %ld task %39s driver %ld", sess[i], &wpid[i], id[i], &dpid[i]) == 4);
    free(out), free(err);
    char ended[2048];
    snprintf(ended, sizeof(ended), "%s/ended", sess[i]);
    for (int k = 0; k < 500 && access(ended, F_OK) != 0; k++) usleep(20000);   /* its node ends it as it goes */
    char *ls = entries(sess[i]);
    printf("session %d: %s\n%s", i, sess[i], ls);
    CHECK(!strcmp(ls, "ended\nlogs\ntask_lines.json\n"));
    free(ls);
    char *e = slurp(ended);
    snprintf(want, sizeof(want), "driver_pid=%ld\n", dpid[i]);
    CHECK(strstr(e, want) != NULL && strstr(e, "/output_test\nstart_ms=") != NULL && strstr(e, "\nend_ms=") != NULL);
    free(e);
    if (i == 1) {
      CHECK_EQ(cli("logs", &o), 0);   /* no cluster, no embedded node runs here: the ended ones */
      printf("%s", o);
      snprintf(want, sizeof(want), "ended session %s (driver pid %ld, ", sess[0], dpid[0]);
      CHECK(strstr(o, want) != NULL);
      snprintf(want, sizeof(want), "ended session %s (driver pid %ld, ", sess[1], dpid[1]);
      CHECK(strstr(o, want) != NULL && strstr(o, "/output_test; ended ") != NULL);
      CHECK(strstr(o, want) < strstr(o, sess[0]));   /* newest first, the older in a line */
      CHECK(strstr(o, " s ago): ") && strstr(o, " files\n") != NULL);
      snprintf(want, sizeof(want), "-%ld.out\n", wpid[1]);
      CHECK(strstr(o, want) != NULL);
      free(o);
      snprintf(args, sizeof(args), "logs worker --pid %ld", wpid[0]);
      CHECK(cli_is(args, "line 0 of task f\nline 1 of task f\nline 2 of task f\n"));
      snprintf(args, sizeof(args), "logs worker --pid %ld --local --tail 1", wpid[1]);
      CHECK(cli_is(args, "line 2 of task f\n"));
      snprintf(args, sizeof(args), "logs task --id %s --local", id[1]);
      CHECK(cli_is(args, "line 0 of task f\nline 1 of task f\nline 2 of task f\n"));
      snprintf(args, sizeof(args), "logs task --id %s --err", id[0]);
      CHECK(cli_is(args, "err of task f\n"));
      snprintf(args, sizeof(args), "logs 'worker-*-%ld.err'", wpid[1]);   /* one match: the file itself */
      CHECK_EQ(cli(args, &o), 0);
      CHECK(!strcmp(o, "err of task f\n"));
      free(o);
      CHECK_EQ(cli("logs task --id 0000-00000000-0000000000000001 --local", &o), 1);
      CHECK(strstr(o, "no embedded node on this machine, running or ended, has task=") != NULL);
      free(o);
      setenv("RAYDIST_SESSIONS_KEPT", "2", 1);   /* the third's end leaves the newest two */
    }
  }
  CHECK_EQ(ended_count(tmp), 2);
  CHECK(access(sess[0], F_OK) != 0 && access(sess[1], F_OK) == 0 && access(sess[2], F_OK) == 0);
  /* a node SIGKILLed: its session stays as it was (its lock free) until the next session's end ends it */
  char orphan[600], lock[700], ended[700], fresh[600];
  long owpid = 0;
  run_driver("kept", "OUTPUT_KILL_NODE=1", &out, &err);
  const char *at = strstr(out, "session ");
  CHECK(at && sscanf(at, "session %599s worker %ld", orphan, &owpid) == 2);
  free(out), free(err);
  snprintf(lock, sizeof(lock), "%s/node.lock", orphan);
  snprintf(ended, sizeof(ended), "%s/ended", orphan);
  CHECK(access(lock, F_OK) == 0 && access(ended, F_OK) != 0);
  run_driver("kept", NULL, &out, &err);
  at = strstr(out, "session ");
  CHECK(at && sscanf(at, "session %599s", fresh) == 1);
  free(out), free(err);
  char *ls = entries(orphan);
  printf("the orphan %s, ended by %s:\n%s", orphan, fresh, ls);
  CHECK(!strcmp(ls, "ended\nlogs\ntask_lines.json\n"));
  free(ls);
  char *e = slurp(ended);
  CHECK(strstr(e, "driver_pid=0\n") != NULL);
  free(e);
  snprintf(args, sizeof(args), "logs worker --pid %ld", owpid);
  CHECK(cli_is(args, "line 0 of task f\nline 1 of task f\nline 2 of task f\n"));
  CHECK_EQ(ended_count(tmp), 2);   /* the newest two: the orphan, ended last, and the fresh one */
  CHECK(access(fresh, F_OK) == 0 && access(sess[1], F_OK) != 0 && access(sess[2], F_OK) != 0);
  /* another node killed: raydist logs ends its session itself, and finds its worker */
  run_driver("kept", "OUTPUT_KILL_NODE=1", &out, &err);
  at = strstr(out, "session ");
  CHECK(at && sscanf(at, "session %599s worker %ld", orphan, &owpid) == 2);
  free(out), free(err);
  snprintf(ended, sizeof(ended), "%s/ended", orphan);
  CHECK(access(ended, F_OK) != 0);
  snprintf(args, sizeof(args), "logs worker --pid %ld --local", owpid);
  CHECK(cli_is(args, "line 0 of task f\nline 1 of task f\nline 2 of task f\n"));
  CHECK(access(ended, F_OK) == 0 && ended_count(tmp) == 2);   /* the two orphans: the first ended after fresh */
  CHECK(access(fresh, F_OK) != 0);
  setenv("RAYDIST_SESSIONS_KEPT", "0", 1);   /* none: the session goes with its driver, and the others */
  run_driver("kept", NULL, &out, &err);
  at = strstr(out, "session ");
  CHECK(at && sscanf(at, "session %599s", sess[0]) == 1);
  free(out), free(err);
  CHECK(access(sess[0], F_OK) != 0);
  CHECK_EQ(ended_count(tmp), 0);
  char cmd[700];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
  CHECK_EQ(system(cmd), 0);
  unsetenv("RAYDIST_SESSIONS_KEPT");
  unsetenv("RAYDIST_TMPDIR");
  return 0;
}

static const rd_test_case tests[] = {
    {"driver", t_driver}, {"lines", t_lines}, {"off", t_off}, {"no_marks", t_no_marks}, {"noise", t_noise},
    {"cli", t_cli}, {"kept", t_kept},
};

RD_TEST_MAIN(tests)
