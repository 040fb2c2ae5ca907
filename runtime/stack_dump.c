/* runtime/stack_dump.c - GET /api/stack[?pid=P] (`raydist stack`): the
 * stacks of this node's drivers and workers, each thread's.
 *
 * The node sends each process rd__stack_signal(); the process writes its
 * own threads' stacks to SESSION/logs/stack-PID.txt (src/stack.c).  The
 * node looks for the files every 20 ms and answers once all are there or
 * STACK_WAIT_MS passed (a process that did not answer is named so), one
 * request at a time (a second is told to come back).  Guarded by the
 * cluster token: it interrupts every process it names. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#include "cluster.h"
#include "common.h"
#include "metrics.h"
#include "node_internal.h"
#include "stack_dump.h"

#define STACK_WAIT_MS 3000           /* a process's leader waits 1 s for each of its threads */
#define STACK_FILE_MAX (1u << 20)    /* what is read of one process's dump */

typedef struct stack_target {
  int pid, role, answered;
  uint32_t wid;             /* a worker's id (0: a driver) */
  uint64_t actor;           /* the actor it hosts (0: none) */
  uint32_t job;             /* its GCS job (0: not known) */
  char exe[512];            /* its executable (/proc/PID/exe): frames of a module named relatively are in it */
  size_t from, to;          /* its dump in the answer's text (build_text) */
} stack_target;

typedef struct stack_req {
  uv_timer_t timer;
  uv_work_t work;
  rd__mbuf text;            /* the answer, made in the thread pool */
  int sig;
  char dir[512];            /* SESSION/logs */
  rd__http_reply reply;
  void *arg;
  stack_target *t;
  size_t n, waiting;
  uint64_t deadline_ns;
} stack_req;

static stack_req *busy;

static void answer(rd__http_reply reply, void *arg, int code, const char *msg) { reply(arg, code, msg, strlen(msg)); }

static void target_path(const stack_req *q, int pid, char *out, size_t len) {
  snprintf(out, len, "%s/stack-%d.txt", q->dir, pid);
}

static void req_free(uv_handle_t *h) {
  stack_req *q = h->data;
  free(q->t);
  free(q);
}

/* ---- naming the frames a program's dump left as FILE(+0xOFFSET) ----
 *
 * backtrace_symbols_fd names only exported functions; a program built
 * without -rdynamic (or with hidden visibility) leaves the rest as module
 * and offset.  addr2line (binutils) turns those into a function and a
 * file:line when it is installed, run once per module without a shell (the
 * paths come from the processes' own dumps), in the loop's thread pool. */
#define SYM_MAX 2048        /* frames named per answer */
#define SYM_MODULES 32

typedef struct sym_frame {
  size_t line_end;          /* where its line ends in the text */
  const char *mod;          /* the module's path, in the text (not NUL-terminated) */
  size_t mod_len;
  unsigned long long off;
  char name[160];           /* " func at file:line" once found */
} sym_frame;

/* The frames that need a name in t[from, to): lines "PATH(+0xHEX)[0x...]";
 * a relative PATH (the program, named as its argv[0] was) is exe.  Into
 * f[n..max); returns the new n. */
static size_t sym_frames(const char *t, size_t from, size_t to, const char *exe, sym_frame *f, size_t n, size_t max) {
  for (size_t at = from; at < to && n < max;) {
    const char *l = t + at, *e = memchr(l, '\n', to - at);
    size_t ll = e ? (size_t)(e - l) : to - at;
    const char *p = memmem(l, ll, "(+0x", 4);
    if (p && p > l && (l[0] == '/' || exe[0])) {
      char *end = NULL;
      unsigned long long off = strtoull(p + 4, &end, 16);
      if (end && *end == ')' && l[0] == '/') f[n++] = (sym_frame){at + ll, l, (size_t)(p - l), off, ""};
      else if (end && *end == ')') f[n++] = (sym_frame){at + ll, exe, strlen(exe), off, ""};
    }
    at += ll + 1;
  }
  return n;
}

/* addr2line -f -e MOD for the frames of one module (their index in idx):
 * names written into each frame's name. */
static void sym_module(sym_frame *f, const size_t *idx, size_t n) {
  char mod[512];
  if (f[idx[0]].mod_len >= sizeof(mod)) return;
  memcpy(mod, f[idx[0]].mod, f[idx[0]].mod_len);
  mod[f[idx[0]].mod_len] = 0;
  char **argv = calloc(n + 5, sizeof(*argv)), *addrs = malloc(n * 20);
  int p[2] = {-1, -1};
  if (!argv || !addrs || pipe2(p, O_CLOEXEC) != 0) goto out;
  argv[0] = (char *)"addr2line", argv[1] = (char *)"-f", argv[2] = (char *)"-e", argv[3] = mod;
  for (size_t i = 0; i < n; i++) {
    /* a return address: the call is the byte before it (the dump's first
     * frame of a thread is exact, and one byte back is still inside it) */
    unsigned long long off = f[idx[i]].off ? f[idx[i]].off - 1 : 0;
    snprintf(addrs + i * 20, 20, "0x%llx", off);
    argv[4 + i] = addrs + i * 20;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p[1], 1);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  int r = posix_spawnp(&pid, "addr2line", &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(p[1]);
  p[1] = -1;
  if (r != 0) goto out;
  FILE *in = fdopen(p[0], "r");
  if (in) {
    p[0] = -1;
    char fn[256], where[512];
    for (size_t i = 0; i < n && fgets(fn, sizeof(fn), in) && fgets(where, sizeof(where), in); i++) {
      fn[strcspn(fn, "\n")] = 0;
      where[strcspn(where, "\n")] = 0;
      const char *base = strrchr(where, '/');
      base = base ? base + 1 : where;
      if (strcmp(fn, "??") != 0 && strncmp(base, "??", 2) != 0)
        snprintf(f[idx[i]].name, sizeof(f[idx[i]].name), " %.100s at %.50s", fn, base);
      else if (strcmp(fn, "??") != 0)
        snprintf(f[idx[i]].name, sizeof(f[idx[i]].name), " %.150s", fn);
    }
    fclose(in);
  }
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
out:
  if (p[0] >= 0) close(p[0]);
  if (p[1] >= 0) close(p[1]);
  free(argv);
  free(addrs);
}

/* text (the processes' dumps, q->t[i].from..to each) with their
 * module-and-offset frames named, into out: one addr2line per module,
 * whichever processes' frames are in it. */
static void symbolize(const stack_req *q, const rd__mbuf *text, rd__mbuf *out) {
  sym_frame *f = malloc(SYM_MAX * sizeof(*f));
  size_t *idx = malloc(SYM_MAX * sizeof(*idx));
  size_t n = 0;
  for (size_t i = 0; f && idx && i < q->n; i++)
    if (q->t[i].to > q->t[i].from) n = sym_frames(text->p, q->t[i].from, q->t[i].to, q->t[i].exe, f, n, SYM_MAX);
  int *done = calloc(n ? n : 1, sizeof(*done));
  for (size_t i = 0, mods = 0; done && i < n && mods < SYM_MODULES; i++) {
    if (done[i]) continue;
    size_t k = 0;
    for (size_t j = i; j < n; j++)
      if (!done[j] && f[j].mod_len == f[i].mod_len && !memcmp(f[j].mod, f[i].mod, f[i].mod_len)) idx[k++] = j, done[j] = 1;
    sym_module(f, idx, k);
    mods++;
  }
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    rd__mbuf_put(out, text->p + at, f[i].line_end - at);
    rd__mbuf_printf(out, "%s", f[i].name);
    at = f[i].line_end;
  }
  rd__mbuf_put(out, text->p + at, text->len - at);
  free(done);
  free(f);
  free(idx);
}

/* In the thread pool: the files read (and removed), the frames named. */
static void build_text(uv_work_t *w) {
  stack_req *q = w->data;
  rd__mbuf raw = {0};   /* the headers and the dumps, named once all are in */
  char path[600];
  for (size_t i = 0; i < q->n && !raw.oom; i++) {
    stack_target *t = &q->t[i];
    rd__mbuf_printf(&raw, "%s pid %d", t->role == ROLE_DRIVER ? "driver" : "worker", t->pid);
    if (t->wid) rd__mbuf_printf(&raw, " (worker %08x", t->wid);
    if (t->wid && t->actor) rd__mbuf_printf(&raw, ", actor %016llx", (unsigned long long)t->actor);
    if (t->wid) rd__mbuf_printf(&raw, ")");
    if (t->job) rd__mbuf_printf(&raw, ", job %u", t->job);
    rd__mbuf_printf(&raw, ":\n");
    target_path(q, t->pid, path, sizeof(path));
    int fd = t->answered ? open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
    if (fd < 0) {
      rd__mbuf_printf(&raw, "  did not answer within %d s (it blocks signal %d, is stopped, or has a handler of its "
                            "own for it)\n\n", STACK_WAIT_MS / 1000, q->sig);
      continue;
    }
    char buf[65536];
    size_t total = 0;
    ssize_t got;
    t->from = raw.len;
    while (total < STACK_FILE_MAX && (got = read(fd, buf, sizeof(buf))) > 0) {
      rd__mbuf_put(&raw, buf, (size_t)got);
      total += (size_t)got;
    }
    t->to = raw.len;
    close(fd);
    (void)unlink(path);
    if (total >= STACK_FILE_MAX) rd__mbuf_printf(&raw, "... (cut at %u bytes)\n", STACK_FILE_MAX);
  }
  if (raw.oom) q->text.oom = 1;
  else if (raw.len) symbolize(q, &raw, &q->text);
  free(raw.p);
}

static void after_text(uv_work_t *w, int status) {
  stack_req *q = w->data;
  (void)status;
  if (q->text.oom) answer(q->reply, q->arg, 500, "node out of memory\n");
  else q->reply(q->arg, 200, q->text.p ? q->text.p : "", q->text.len);
  free(q->text.p);
  busy = NULL;
  uv_close((uv_handle_t *)&q->timer, req_free);
}

static void finish(stack_req *q) {
  uv_timer_stop(&q->timer);
  q->work.data = q;
  if (uv_queue_work(q->timer.loop, &q->work, build_text, after_text) != 0) {
    build_text(&q->work);
    after_text(&q->work, 0);
  }
}

static void on_tick(uv_timer_t *h) {
  stack_req *q = h->data;
  char path[600];
  struct stat st;
  for (size_t i = 0; i < q->n; i++) {
    if (q->t[i].answered) continue;
    target_path(q, q->t[i].pid, path, sizeof(path));
    if (stat(path, &st) == 0) q->t[i].answered = 1, q->waiting--;
  }
  if (!q->waiting || rd__now_ns() >= q->deadline_ns) finish(q);
}

/* ?pid=P (0: every process); -1 when the query says anything else, or
 * out of memory. */
static int parse_pid(const char *query) {
  rd__query it;
  char *k, *v, *end;
  long pid = 0;
  int more = 0;
  if (rd__query_open(&it, query) != 0) return -1;
  while (pid >= 0 && (more = rd__query_next(&it, &k, &v)) > 0) {
    long p = strcmp(k, "pid") != 0 ? -1 : strtol(v, &end, 10);
    pid = p > 0 && p <= 0x7fffffff && !*end ? p : -1;
  }
  rd__query_close(&it);
  return more < 0 ? -1 : (int)pid;
}

int rd__stack_path(const char *path) { return !strcmp(path, "/api/stack"); }

void rd__stack_http(uv_loop_t *loop, const char *session, const char *query, const char *auth, rd__http_reply reply,
                    void *arg) {
  if (!rd__cluster_http_gate("stack API", N.local_token, auth, reply, arg)) return;   /* an embedded node: its own */
  int pid = parse_pid(query);
  if (pid < 0) {
    answer(reply, arg, 400, "the stack API takes pid=P (a driver's or worker's process id) or nothing\n");
    return;
  }
  if (busy) {
    answer(reply, arg, 503, "a stack dump is under way on this node: ask again in a few seconds\n");
    return;
  }
  size_t n = 0;
  for (node_client *c = N.clients; c; c = c->next) n++;
  stack_req *q = calloc(1, sizeof(*q));
  if (!q || !(q->t = calloc(n ? n : 1, sizeof(*q->t)))) {
    free(q);
    answer(reply, arg, 500, "node out of memory\n");
    return;
  }
  snprintf(q->dir, sizeof(q->dir), "%s/logs", session);
  char path[600];
  for (node_client *c = N.clients; c; c = c->next) {
    if (c->dead || c->pid <= 0 || (c->role != ROLE_DRIVER && c->role != ROLE_WORKER)) continue;
    if (pid && c->pid != pid) continue;
    stack_target *t = &q->t[q->n];
    *t = (stack_target){c->pid, c->role, 0, c->worker ? c->worker->id : 0,
                        c->worker && c->worker->actor ? c->worker->actor->id : 0, rd__node_client_gcs_job(c)};
    char proc[64];
    snprintf(proc, sizeof(proc), "/proc/%d/exe", c->pid);
    ssize_t el = readlink(proc, t->exe, sizeof(t->exe) - 1);
    t->exe[el > 0 ? el : 0] = 0;
    target_path(q, c->pid, path, sizeof(path));
    (void)unlink(path);   /* one an earlier request left (a late answer) */
    if (kill(c->pid, rd__stack_signal()) != 0) continue;   /* gone meanwhile */
    q->n++;
  }
  if (!q->n) {
    free(q->t);
    free(q);
    if (pid) answer(reply, arg, 404, "no driver or worker of this node has that pid\n");
    else reply(arg, 200, "", 0);
    return;
  }
  q->waiting = q->n;
  q->sig = rd__stack_signal();
  q->reply = reply;
  q->arg = arg;
  q->deadline_ns = rd__now_ns() + (uint64_t)STACK_WAIT_MS * 1000000u;
  uv_timer_init(loop, &q->timer);
  q->timer.data = q;
  uv_timer_start(&q->timer, on_tick, 20, 20);
  busy = q;
}
