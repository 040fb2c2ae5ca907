/* src/worker.c - the worker loop and the API a remote function sees.
 *
 * A worker is the user's own executable re-executed with RAYDIST_WORKER_ID
 * set: rd_init() lands here and never returns.  Owners push tasks over the
 * socketpairs the node daemon hands out with each lease; tasks run one at a
 * time in arrival order, replies are batched.  The worker dies with its node
 * daemon (PR_SET_PDEATHSIG) so no process is ever left behind. */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <signal.h>
#include <unistd.h>

#include "internal.h"
#include "log.h"

#define G rd__g

/* One return of a call, as the task set it. */
typedef struct rd__ret_slot {
  int set, in_store, exists;
  uint8_t *ptr;
  size_t size;
  uint64_t *refs;           /* rd_return_refs: the refs it contains, held until the reply */
  size_t nrefs;
} rd__ret_slot;

/* Arguments and returns a call holds in itself; more are allocated. */
#define CALL_ARGS_IN 8
#define CALL_RETS_IN 4

struct rd_call {
  Rd__Task *msg;
  rd__serve *from;
  const rd__serve *grant;   /* the GPUs this call may use */
  const char *func;
  size_t nargs;
  rd_buf *args;                  /* nargs of them: args_in, or malloc'd when more */
  uint8_t *pinned;               /* store pins held for by-ref arguments (the same) */
  uint64_t lost_arg;             /* an argument lost with its node or store (the owner may rebuild it) */
  rd_ref *fetched;               /* arguments asked of the sender (Arg.fetch), held until the call ends */
  rd_buf *fetched_bufs;
  size_t nfetched;
  int nret;
  rd__ret_slot *ret;             /* nret of them: ret_in, or malloc'd when more */
  size_t ret_inline;             /* bytes of its returns travelling in the reply (RD_MSG_INLINE_BUDGET) */
  rd_buf args_in[CALL_ARGS_IN];
  uint8_t pinned_in[CALL_ARGS_IN];
  rd__ret_slot ret_in[CALL_RETS_IN];
  char err[2048];
  int failed;
  int cancelled;            /* the owner cancelled it (TaskCancel); atomic */
  uint64_t polled_ns;       /* rd_call_cancelled last looked for frames */
  /* a streaming call (RD_STREAMING): ids granted for its next items (G.mu) */
  rd__idq sids;
  uint64_t yielded;         /* items yielded, the skipped ones of earlier attempts included */
  int yielding;             /* an item is being made (rd_yield, or rd_yield_alloc until its commit) */
  struct {
    uint64_t id;
    uint8_t *ptr;           /* in the store (in_store), or malloc'd */
    size_t size;
    int in_store, skip;
    Rd__RetRef **refs;      /* rd_yield_refs: the refs it contains, described for the owner */
    size_t nrefs;
  } y;                      /* that item */
  uint64_t flushed_ns;      /* when rd_yield last wrote its items out */
  struct rd_call *next_running;
};

static rd_call *running;    /* calls in user code now (G.mu): TaskCancel finds them here */
static __thread uint64_t cur_task;   /* the call this thread runs (rd__worker_current_task) */

static __thread uint32_t cur_owner_node;   /* ... and its owner's node and pid (Task.owner_node, owner_pid) */
static __thread int cur_owner_pid;
static __thread const char *cur_func;      /* ... its function (or method) and attempt: a crash report's */
static __thread uint32_t cur_attempt;
uint64_t rd__worker_current_task(void) { return cur_task; }

void rd__worker_current_owner(uint32_t *node, int *pid) {
  *node = cur_owner_node;
  *pid = cur_owner_pid;
}

/* Task marks (RAYDIST_WORKER_TASK_MARKS, set by the node whose pipes read
 * this worker's stdout and stderr): before each task a line
 * RD_TASK_MARK "task ID ATTEMPT NAME\n" on both streams, which the node
 * takes out of the output and keeps as where the task's lines begin in
 * the worker's files (raydist logs task) and as the name that prefixes
 * the lines the driver prints, as Ray's; an actor names itself once
 * ("name CLASS"), and marks its calls only with
 * RAYDIST_RECORD_ACTOR_TASK_LOGGING=1 (as Ray's, off by default: an actor
 * call is cheaper than a task, and a threaded actor's calls overlap). */
static int marks = -1;      /* 0 none, 1 tasks, 2 tasks and actor calls */

static int marks_on(void) {
  if (marks < 0) {
    const char *v = getenv("RAYDIST_WORKER_TASK_MARKS"), *a = getenv("RAYDIST_RECORD_ACTOR_TASK_LOGGING");
    marks = v && atoi(v) > 0 ? (a && atoi(a) > 0 ? 2 : 1) : 0;
  }
  return marks;
}

static void mark_write(const char *line, size_t n) {
  fflush(stdout);   /* what the last task left in the buffers goes before the mark */
  fflush(stderr);
  for (int fd = 1; fd <= 2; fd++) {
    for (size_t k = 0; k < n;) {
      ssize_t w = write(fd, line + k, n - k);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) break;
      k += (size_t)w;
    }
  }
}

/* v as n hex digits at p. */
static char *put_hex(char *p, uint64_t v, int n) {
  static const char hex[] = "0123456789abcdef";
  for (int i = n - 1; i >= 0; i--, v >>= 4) p[i] = hex[v & 15];
  return p + n;
}

/* The words of a crash report (stack.c) for the call this thread runs:
 * " while running task 'NAME' (ID, attempt N)", or "" when it runs none.
 * Async-signal-safe: the fatal signal's handler asks. */
size_t rd__worker_crash_task(char *out, size_t len) {
  if (!cur_task || !cur_func || len < 120) return 0;
  static const char head[] = " while running task '";
  char *p = out, *end = out + len - 64;   /* room for the id and attempt */
  memcpy(p, head, sizeof(head) - 1);
  p += sizeof(head) - 1;
  for (const char *f = cur_func; *f && p < end; f++) *p++ = *f;
  memcpy(p, "' (", 3);
  p = put_hex(p + 3, cur_owner_node & 0xffffu, 4);
  *p++ = '-';
  p = put_hex(p, (uint32_t)cur_owner_pid, 8);
  *p++ = '-';
  p = put_hex(p, cur_task, 16);
  memcpy(p, ", attempt ", 10);
  p += 10;
  char digits[10];
  int nd = 0;
  for (uint32_t a = cur_attempt + 1; nd == 0 || a; a /= 10) digits[nd++] = (char)('0' + a % 10);
  while (nd) *p++ = digits[--nd];
  *p++ = ')';
  *p = 0;
  return (size_t)(p - out);
}

/* This worker dies while it runs tasks: their owners are told why (`why`,
 * as "died of SIGSEGV (Segmentation fault)"), in an Error frame with
 * RD_EWORKER_DIED on the connection of each lease (or actor caller) with a
 * call running, which the owner takes for its word "died" (lease_lost,
 * actor_conn_lost).  Only where nothing is half written on the connection
 * (the frame must start on a frame's edge), in one write.  Returns how
 * many were told.  Async-signal-safe: the fatal signal's handler calls it
 * (the lists are read unlocked: the process is ending). */
int rd__worker_crash_tell(const char *why) {
  uint8_t frame[RD_FRAME_HDR + 600];
  Rd__Error e = RD__ERROR__INIT;
  e.status = RD_EWORKER_DIED;
  e.message = (char *)why;
  e.own = 1;
  size_t n = rd__error__get_packed_size(&e);
  if (n > sizeof(frame) - RD_FRAME_HDR) return 0;
  uint32_t len = (uint32_t)rd__error__pack(&e, frame + RD_FRAME_HDR);
  rd__frame_header(frame, len, RD__MSG_TYPE__MSG_ERROR, 0);
  int told = 0;
  for (rd__serve *s = G.serves; s; s = s->next) {
    if (s->busy <= 0 || s->closed || rd__conn_want_write(&s->conn) || s->conn.fd < 0) continue;
    told += write(s->conn.fd, frame, RD_FRAME_HDR + len) == (ssize_t)(RD_FRAME_HDR + len);
  }
  return told;
}

/* By hand, as rd__task_id_text words the id: it comes before every task. */
static void task_mark(const Rd__Task *m, const char *name) {
  if (!marks_on() || (m->actor_id && marks < 2)) return;
  char line[RD_TASK_MARK_MAX], *p = line;
  memcpy(p, RD_TASK_MARK "task ", RD_TASK_MARK_LEN + 5);
  p += RD_TASK_MARK_LEN + 5;
  p = put_hex(p, m->owner_node & 0xffffu, 4);
  *p++ = '-';
  p = put_hex(p, (uint32_t)m->owner_pid, 8);
  *p++ = '-';
  p = put_hex(p, m->task_id, 16);
  *p++ = ' ';
  char digits[10];
  int nd = 0;
  for (uint32_t a = m->attempt; nd == 0 || a; a /= 10) digits[nd++] = (char)('0' + a % 10);
  while (nd) *p++ = digits[--nd];
  *p++ = ' ';
  size_t nl = strnlen(name, RD_TASK_MARK_NAME_MAX);
  memcpy(p, name, nl);
  p += nl;
  *p++ = '\n';
  mark_write(line, (size_t)(p - line));
}

static void name_mark(const char *name) {
  if (!marks_on()) return;
  char line[RD_TASK_MARK_MAX];
  int n = snprintf(line, sizeof(line), RD_TASK_MARK "name %.*s\n", RD_TASK_MARK_NAME_MAX, name);
  if (n > 0 && (size_t)n < sizeof(line)) mark_write(line, (size_t)n);
}

/* rd_task_opts.max_calls: how many times each function ran in this process
 * (G.mu), and whether one reached its limit: the reply that says so is the
 * last it sends; it then waits for its node to kill it once the lease is
 * back (worker_loop). */
static struct fn_runs {
  const rd_function *fn;
  uint32_t n;
} *fn_runs;
static size_t nfn_runs;
static int retiring;        /* 1: the reply now being made says so; 2: waiting for the owner to let go */
static uint64_t retire_by;  /* then exit anyway */

/* Count one run of fn; 1 when that reaches max_calls (0: no limit). */
static int count_run(const rd_function *fn, uint32_t max_calls) {
  size_t i = 0;
  while (i < nfn_runs && fn_runs[i].fn != fn) i++;
  if (i == nfn_runs) {
    struct fn_runs *p = realloc(fn_runs, (nfn_runs + 1) * sizeof(*p));
    if (!p) return max_calls > 0;   /* cannot count: retire rather than run past the limit */
    fn_runs = p;
    fn_runs[nfn_runs++] = (struct fn_runs){fn, 0};
  }
  fn_runs[i].n++;
  return max_calls > 0 && fn_runs[i].n >= max_calls;
}


static char *orig_visible;   /* CUDA_VISIBLE_DEVICES the worker started with */
static int have_orig_visible;

/* RAYDIST_GPU_MEMORY_BYTES: the budget of the GPU share held now (unset
 * without one), read by the inference engine as its limit. */
static void set_gpu_memory_env(uint64_t bytes) {
  if (!bytes) {
    unsetenv("RAYDIST_GPU_MEMORY_BYTES");
    return;
  }
  char v[32];
  snprintf(v, sizeof(v), "%llu", (unsigned long long)bytes);
  setenv("RAYDIST_GPU_MEMORY_BYTES", v, 1);
}

/* The actor this worker hosts, once its constructor succeeded. */
static struct {
  uint64_t id;
  const rd_actor_class *cls;
  void *state;
  int alive;
  int restarts;
  int concurrency;
  int exiting;       /* rd_actor_exit in a method: no more calls; the node is asked to end it */
  int ending;        /* an executor runs the destructor and exits: the others wait for the end */
  uint64_t exit_by;  /* rd__now_ns() after which it exits without the node's answer */
  rd__serve grant;   /* only the GPU fields are used */
  const char *ns;    /* its namespace (ActorStart.ns, interned): its constructor's and methods' */
  rd__cgroup groups[RD_CGROUPS_MAX];   /* its named concurrency groups (ActorStart.concurrency_groups) */
  int ngroups;
  int grouped_methods;   /* a method of its class names a group: calls need a look at their method */
} A;

/* The concurrency group whose queued calls this executing thread takes
 * (0: the default group; plain tasks are all in it). */
static __thread int my_group;

/* The group an actor call runs in: the one it names, else its method's;
 * 0 for the default, i + 1 for A.groups[i], -1 (why filled) for one the
 * actor does not have. */
static int call_group(const Rd__Task *m, char *why, size_t whylen) {
  const char *g = m->concurrency_group && *m->concurrency_group ? m->concurrency_group : NULL;
  if (!g) {
    const rd_actor_method *meth = rd_actor_method_lookup(m->func);
    g = meth ? meth->concurrency_group : NULL;   /* an unknown method fails when it runs */
  }
  if (!g || !*g || !strcmp(g, "default")) return 0;
  for (int i = 0; i < A.ngroups; i++)
    if (!strcmp(A.groups[i].name, g)) return i + 1;
  snprintf(why, whylen, "actor %s has no concurrency group '%.63s' (rd_actor_opts.concurrency_groups)",
           A.cls ? A.cls->name : "?", g);
  return -1;
}

void rd__worker_on_assign(Rd__LeaseAssign *m, int fd) {
  if (fd < 0) {
    rd__log(RD_LOG_ERROR, "lease %llu arrived without its socket", (unsigned long long)m->lease_id);
    return;
  }
  rd__serve *s = calloc(1, sizeof(*s));
  if (!s) {
    close(fd);
    return;
  }
  rd__conn_init(&s->conn, fd);
  rd__pump_watch(&s->conn, 2, s);
  s->lease_id = m->lease_id;
  s->ngpus = (int)(m->n_gpu_ids < RD_RES_MAX_GPUS ? m->n_gpu_ids : RD_RES_MAX_GPUS);
  for (int i = 0; i < s->ngpus; i++) {
    s->gpu_ids[i] = m->gpu_ids[i];
    s->gpu_share[i] = i < (int)m->n_gpu_shares ? m->gpu_shares[i] : 0;
  }
  s->gpu_memory = s->ngpus > 0 ? m->gpu_memory : 0;
  if (s->ngpus > 0) setenv("CUDA_VISIBLE_DEVICES", m->visible_devices, 1);
  else if (have_orig_visible) setenv("CUDA_VISIBLE_DEVICES", orig_visible, 1);
  else unsetenv("CUDA_VISIBLE_DEVICES");
  set_gpu_memory_env(s->gpu_memory);
  s->next = G.serves;
  G.serves = s;
}

void rd__worker_on_attach(Rd__ActorAttach *m, int fd) {
  if (fd < 0) return;
  rd__serve *s = calloc(1, sizeof(*s));
  if (!s) {
    close(fd);
    return;
  }
  rd__conn_init(&s->conn, fd);
  rd__pump_watch(&s->conn, 2, s);
  s->actor_id = m->actor_id;
  s->next = G.serves;
  G.serves = s;
}

static void reply_fail(rd__serve *s, uint64_t task_id, int status, const char *err, uint64_t lost_arg);
static void reply_unrun(rd__serve *s, uint64_t task_id);

static void wtask_free(rd__wtask *w) {
  protobuf_c_message_free_unpacked(&w->msg->base, NULL);
  free(w);
}

void rd__worker_on_task(rd__serve *s, Rd__Task *m) {
  if (G.nblocked > 0) {   /* the task ahead waits: back at once (rd__worker_hand_back) */
    reply_unrun(s, m->task_id);
    protobuf_c_message_free_unpacked(&m->base, NULL);
    return;
  }
  rd__wtask *w = malloc(sizeof(*w));
  if (!w) {
    protobuf_c_message_free_unpacked(&m->base, NULL);
    s->closed = 1;
    return;
  }
  w->msg = m;
  w->from = s;
  w->group = 0;
  w->next = NULL;
  /* an actor with no groups, whose class names none, runs every call not
   * naming one in the default group: no lookup on that path */
  if (m->actor_id && (A.ngroups || A.grouped_methods || (m->concurrency_group && *m->concurrency_group))) {
    char why[200];
    if ((w->group = call_group(m, why, sizeof(why))) < 0) {
      reply_fail(s, m->task_id, RD_EINVAL, why, 0);
      protobuf_c_message_free_unpacked(&m->base, NULL);
      free(w);
      return;
    }
  }
  if (G.wq_tail) G.wq_tail->next = w;
  else G.wq_head = w;
  G.wq_tail = w;
}


/* The owner of a task sent here cancelled it (G.mu held): one still queued is
 * dropped and answered RD_ECANCELED (the owner has failed its returns
 * already and only needs its slot back); one running is flagged for
 * rd_call_cancelled.  A task already answered is not found: nothing to do. */
void rd__worker_on_cancel(rd__serve *s, uint64_t task_id) {
  for (rd__wtask **pp = &G.wq_head, *prev = NULL; *pp; prev = *pp, pp = &(*pp)->next) {
    rd__wtask *w = *pp;
    if (w->from != s || w->msg->task_id != task_id) continue;
    *pp = w->next;
    if (G.wq_tail == w) G.wq_tail = prev;
    rd__log(RD_LOG_DEBUG, "task %llx cancelled by its owner before it started", (unsigned long long)task_id);
    reply_fail(s, task_id, RD_ECANCELED, "cancelled before it started", 0);
    wtask_free(w);
    return;
  }
  for (rd_call *c = running; c; c = c->next_running)
    if (c->from == s && c->msg->task_id == task_id) {
      rd__log(RD_LOG_DEBUG, "task %llx (%s) cancelled by its owner while running", (unsigned long long)task_id, c->func);
      __atomic_store_n(&c->cancelled, 1, __ATOMIC_RELAXED);
      rd__cancel_children(task_id);   /* what it submitted is cancelled too (Ray's recursive=True) */
    }
}

/* Take the tasks that came from `from` (NULL: from anyone) off the queue,
 * unrun, and return them as a list in queue order. */
static rd__wtask *queue_take(const rd__serve *from) {
  rd__wtask *taken = NULL, **tail = &taken;
  for (rd__wtask **pp = &G.wq_head, *prev = NULL; *pp;) {
    rd__wtask *w = *pp;
    if (from && w->from != from) {
      prev = w;
      pp = &w->next;
      continue;
    }
    *pp = w->next;
    if (G.wq_tail == w) G.wq_tail = prev;
    w->next = NULL;
    *tail = w;
    tail = &w->next;
  }
  return taken;
}

/* The task running here has waited in rd_get or rd_wait for over 1 ms
 * (client.c, wait_block_round; its node lends its CPU meanwhile): the tasks
 * its owner pipelined behind it go back unrun (TaskReply.unrun), and so
 * does one that comes while it waits.  What it waits for may be one of
 * them (a retry of a task whose result it reads, sent to this worker behind
 * it, after the first attempt's worker died): each would wait for the
 * other until the wait timed out.  They are answered last first, since the
 * owner puts each back at the front of its queue: in their order.  The
 * owner sends the lease nothing more until its next reply.  Only task
 * workers get here: actors keep their calls (they run in order) and their
 * CPUs, and wait_block_round says nothing for them. */
void rd__worker_hand_back(void) {
  rd__wtask *back = NULL;
  for (rd__wtask *w, *taken = queue_take(NULL); (w = taken);) {   /* last first */
    taken = w->next;
    w->next = back;
    back = w;
  }
  for (rd__wtask *w; (w = back);) {
    back = w->next;
    rd__log(RD_LOG_DEBUG, "task %llx handed back unrun: the task ahead of it waits", (unsigned long long)w->msg->task_id);
    reply_unrun(w->from, w->msg->task_id);
    wtask_free(w);
  }
}

/* Take the tasks that came from `from` (NULL: from anyone) off the queue
 * unrun; with why, each is answered RD_EACTOR_DIED with it. */
static void drop_queued(const rd__serve *from, const char *why) {
  for (rd__wtask *w, *taken = queue_take(from); (w = taken);) {
    taken = w->next;
    rd__log(RD_LOG_DEBUG, "task %llx dropped unrun", (unsigned long long)w->msg->task_id);
    if (why) reply_fail(w->from, w->msg->task_id, RD_EACTOR_DIED, why, 0);
    wtask_free(w);
  }
}

void rd__worker_serve_gone(rd__serve *s) {
  if (s->actor_id) return;   /* an actor's caller left: its calls still run, as in Ray */
  drop_queued(s, NULL);      /* its calls not started never will: nobody takes their replies */
  /* the running ones are cancelled as by their owner: rd_call_cancelled
   * tells them, and what they submitted is cancelled */
  for (rd_call *c = running; c; c = c->next_running)
    if (c->from == s && !__atomic_exchange_n(&c->cancelled, 1, __ATOMIC_RELAXED)) {
      rd__log(RD_LOG_DEBUG, "task %llx (%s): its owner is gone; cancelled", (unsigned long long)c->msg->task_id, c->func);
      rd__cancel_children(c->msg->task_id);
    }
}

/* More ids for the items of a streaming call running here (G.mu held); a
 * call that has ended meanwhile needs none. */
void rd__worker_on_grant(rd__serve *s, const Rd__StreamGrant *m) {
  for (rd_call *c = running; c; c = c->next_running) {
    if (c->from != s || c->msg->task_id != m->task_id || !c->msg->streaming) continue;
    for (size_t i = 0; i < m->n_ids; i++)
      if (rd__idq_push(&c->sids, m->ids[i]) != 0) {
        s->closed = 1;   /* ids lost: the owner would wait for items under them forever */
        break;
      }
    pthread_cond_broadcast(&G.cv);
    return;
  }
}

/* Task run times for the node's metrics, sent as WorkerStats deltas: at most
 * every 100 ms while work flows, and within 200 ms of the last task once the
 * worker is idle (worker_loop's pump timeout). */
/* With RAYDIST_TIMELINE=1 each task also becomes a TaskEvent (name,
 * wall-clock start, length, status) sent with the stats, at once when TL_MAX
 * are waiting; the node serves them at /timeline. */
/* The same figures by function name go in FuncStats entries, one per
 * function that ran since the last send (at once when RD_FNSTATS_MAX have). */
#define TL_MAX 512
static int tl_on = -1;
static struct {
  uint64_t buckets[RD_HIST_BUCKETS], sum_ns, failed, stream_items, last_sent_ns;
  int dirty;
  size_t nev;
  Rd__TaskEvent ev[TL_MAX];
  Rd__TaskEvent *evp[TL_MAX];
  char names[TL_MAX][64];
  rd__fnstats fns;
} S;

static uint64_t wall_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void stats_send(uint64_t now);

static int timeline_on(void) {
  if (tl_on < 0) {
    const char *e = getenv("RAYDIST_TIMELINE");
    tl_on = e && atoi(e) > 0;
  }
  return tl_on;
}


/* A task ran for ns (from start_us, wall clock, when the timeline is on). */
static void stats_add(uint64_t task_id, const char *func, uint64_t start_us, uint64_t ns, int status) {
  if (rd__fnstats_add(&S.fns, func ? func : "", ns, status) != 0) {   /* a send first when the table is full */
    stats_send(rd__now_ns());
    (void)rd__fnstats_add(&S.fns, func ? func : "", ns, status);   /* if that failed, only the totals count it */
  }
  S.buckets[rd__hist_bucket(ns)]++;
  S.sum_ns += ns;
  S.failed += status != 0;
  S.dirty = 1;
  if (!timeline_on() || S.nev >= TL_MAX) return;   /* full only if the last send failed */
  Rd__TaskEvent *ev = &S.ev[S.nev];
  rd__task_event__init(ev);
  ev->task_id = task_id;
  snprintf(S.names[S.nev], sizeof(S.names[0]), "%s", func ? func : "");
  ev->func = S.names[S.nev];
  ev->start_us = start_us;
  ev->dur_us = ns / 1000u;
  ev->status = status;
  S.evp[S.nev] = ev;
  if (++S.nev == TL_MAX) stats_send(rd__now_ns());
}

static void stats_send(uint64_t now) {
  Rd__WorkerStats m = RD__WORKER_STATS__INIT;
  m.n_buckets = RD_HIST_BUCKETS;
  m.buckets = S.buckets;
  m.sum_ns = S.sum_ns;
  m.failed = S.failed;
  m.stream_items = S.stream_items;
  m.n_events = S.nev;
  m.events = S.evp;
  Rd__FuncStats fs[RD_FNSTATS_MAX], *fsp[RD_FNSTATS_MAX];
  m.n_funcs = rd__fnstats_pack(&S.fns, fs, fsp);
  m.funcs = fsp;
  if (rd__conn_send(&G.daemon, RD__MSG_TYPE__MSG_WORKER_STATS, &m.base, -1) != 0) return;
  memset(S.buckets, 0, sizeof(S.buckets));
  S.sum_ns = S.failed = S.stream_items = 0;
  S.nev = 0;
  S.fns.n = S.fns.last = 0;
  S.dirty = 0;
  S.last_sent_ns = now;
}

static void stats_maybe_send(void) {
  uint64_t now = rd__now_ns();
  if (S.dirty && now - S.last_sent_ns >= 100000000ull) stats_send(now);
}

/* Send a task's reply on the connection it came on (unless that closed). */
static void reply_send(rd__serve *s, Rd__TaskReply *r) {
  if (s->closed) return;
  r->node = G.node_index;
  r->retire = retiring;
  if (rd__conn_send(&s->conn, RD__MSG_TYPE__MSG_TASK_REPLY, &r->base, -1) != 0) s->closed = 1;
}

/* A task that succeeded: its returns, and a streaming task's item count. */
static void reply_ok(rd__serve *s, uint64_t task_id, Rd__Ret **rets, size_t nrets, uint64_t stream_items) {
  Rd__TaskReply r = RD__TASK_REPLY__INIT;
  r.task_id = task_id;
  r.n_returns = nrets;
  r.returns = rets;
  r.stream_items = stream_items;
  reply_send(s, &r);
}

/* A task not run: back to its owner's queue (rd__worker_hand_back). */
static void reply_unrun(rd__serve *s, uint64_t task_id) {
  Rd__TaskReply r = RD__TASK_REPLY__INIT;
  r.task_id = task_id;
  r.unrun = 1;
  reply_send(s, &r);
}

/* A task that failed or never ran: its code and message, and the argument
 * that could not be fetched (lost_arg, 0: none) for the owner to rebuild. */
static void reply_fail(rd__serve *s, uint64_t task_id, int status, const char *err, uint64_t lost_arg) {
  Rd__TaskReply r = RD__TASK_REPLY__INIT;
  r.task_id = task_id;
  r.status = status;
  r.error = (char *)(err ? err : "");
  r.lost_arg = lost_arg;
  reply_send(s, &r);
}

/* Room for call's nargs arguments and nret returns (call zeroed, nargs and
 * nret set): its own arrays, or allocated ones.  RD_ENOMEM. */
static int call_arrays(rd_call *call) {
  call->args = call->args_in;
  call->pinned = call->pinned_in;
  call->ret = call->ret_in;
  if (call->nargs > CALL_ARGS_IN) {
    call->args = calloc(call->nargs, sizeof(*call->args));
    call->pinned = calloc(call->nargs, 1);
  }
  if (call->nret > CALL_RETS_IN) call->ret = calloc((size_t)call->nret, sizeof(*call->ret));
  return call->args && call->pinned && call->ret ? 0 : RD_ENOMEM;
}

static void call_arrays_free(rd_call *call) {
  if (call->args != call->args_in) free(call->args);
  if (call->pinned != call->pinned_in) free(call->pinned);
  if (call->ret != call->ret_in) free(call->ret);
  call->args = NULL, call->pinned = NULL, call->ret = NULL;
}

static int resolve_refs(rd_call *call, const uint64_t *ids, const uint32_t *nodes, const size_t *idx, size_t n);
static int fetch_args(rd_call *call);

/* Resolve by-reference arguments with one store request.  0 or an error with
 * a message in call->err. */
static int resolve_args(rd_call *call) {
  Rd__Task *m = call->msg;
  uint64_t ids_in[CALL_ARGS_IN];
  uint32_t nodes_in[CALL_ARGS_IN];
  size_t idx_in[CALL_ARGS_IN], n = 0;
  uint64_t *ids = ids_in;
  uint32_t *nodes = nodes_in;
  size_t *idx = idx_in;
  if (m->n_args > CALL_ARGS_IN) {
    ids = malloc(m->n_args * sizeof(*ids));
    nodes = malloc(m->n_args * sizeof(*nodes));
    idx = malloc(m->n_args * sizeof(*idx));
    if (!ids || !nodes || !idx) {
      snprintf(call->err, sizeof(call->err), "out of memory taking the %zu arguments of '%s'", m->n_args, call->func);
      n = (size_t)-1;
    }
  }
  for (size_t i = 0; n != (size_t)-1 && i < m->n_args; i++) {
    Rd__Arg *a = m->args[i];
    if (a->borrow || a->borrow_list) continue;   /* the task asks, if it wants (rd_call_arg_ref[s]) */
    if (a->by_ref) {
      nodes[n] = a->node;
      ids[n] = a->object_id;
      idx[n++] = i;
    } else {
      call->args[i].data = a->data.data;
      call->args[i].size = a->data.len;
    }
  }
  int r = resolve_refs(call, ids, nodes, idx, n);
  if (ids != ids_in) {
    free(ids);
    free(nodes);
    free(idx);
  }
  return r ? r : fetch_args(call);
}

/* A value its sender left out of the message, to be asked for (a borrowed
 * ref is the task's to ask for, if it wants). */
static int arg_fetched(const Rd__Arg *a) { return a->fetch && !a->borrow && !a->borrow_list; }

/* The arguments the sender left out of a full message (Arg.fetch): asked
 * for on its socket, as borrowed refs are, all at once, and held (bufs and
 * proxies) until the call ends (fetch_release).  0 or an error with a
 * message in call->err.  G.mu held; dropped while it waits. */
static int fetch_args(rd_call *call) {
  Rd__Task *m = call->msg;
  size_t n = 0;
  for (size_t i = 0; i < m->n_args; i++) n += arg_fetched(m->args[i]);
  if (n == 0) return 0;
  call->fetched = calloc(n, sizeof(*call->fetched));
  call->fetched_bufs = calloc(n, sizeof(*call->fetched_bufs));
  if (!call->fetched || !call->fetched_bufs) {
    snprintf(call->err, sizeof(call->err), "out of memory taking the %zu arguments of '%s'", m->n_args, call->func);
    return RD_ENOMEM;
  }
  int r = 0;
  for (size_t i = 0; r == 0 && i < m->n_args; i++) {
    const Rd__Arg *a = m->args[i];
    if (!arg_fetched(a)) continue;
    r = rd__borrow_ref(call->from, a->object_id, NULL);
    if (r == 0) call->fetched[call->nfetched++].id = a->object_id;
  }
  rd__flush_soon();   /* the questions, together */
  if (r != 0) {
    snprintf(call->err, sizeof(call->err), "cannot ask for the arguments of '%s': %s", call->func, rd_strerror(r));
    return r;
  }
  pthread_mutex_unlock(&G.mu);
  r = rd_get(call->fetched, n, call->fetched_bufs, 60000);
  pthread_mutex_lock(&G.mu);
  if (r != 0) {
    const rd_buf *bad = NULL;   /* the first that says why */
    for (size_t k = 0; k < n && !bad; k++)
      if (call->fetched_bufs[k].error) bad = &call->fetched_bufs[k];
    snprintf(call->err, sizeof(call->err), "cannot fetch the arguments of '%s' from its caller: %s%s%.*s", call->func,
             rd_strerror(r), bad ? ": " : "", bad ? (int)bad->size : 0, bad ? (const char *)bad->data : "");
    return r;
  }
  for (size_t i = 0, k = 0; i < m->n_args; i++) {
    if (!arg_fetched(m->args[i])) continue;
    call->args[i].data = call->fetched_bufs[k].data;
    call->args[i].size = call->fetched_bufs[k++].size;
  }
  return 0;
}

/* fetch_args' holds go.  G.mu held; dropped meanwhile. */
static void fetch_release(rd_call *call) {
  if (!call->fetched) return;
  pthread_mutex_unlock(&G.mu);
  for (size_t k = 0; k < call->nfetched; k++) {
    rd_buf_release(&call->fetched_bufs[k]);
    rd_ref_release(call->fetched[k]);
  }
  pthread_mutex_lock(&G.mu);
  free(call->fetched);
  free(call->fetched_bufs);
  call->fetched = NULL;
  call->fetched_bufs = NULL;
  call->nfetched = 0;
}

/* resolve_args' store request for the n by-reference arguments idx[]
 * (object ids[], held on nodes[]); n (size_t)-1: out of memory already. */
static int resolve_refs(rd_call *call, const uint64_t *ids, const uint32_t *nodes, const size_t *idx, size_t n) {
  if (n == (size_t)-1) return RD_ENOMEM;
  if (n == 0) return 0;
  Rd__ObjGet g = RD__OBJ_GET__INIT;
  g.req_id = ++G.next_req;
  g.n_object_ids = n;
  g.object_ids = (uint64_t *)ids;
  g.timeout_ms = 60000;
  if (G.cluster) {   /* arguments held on another node are pulled by ours */
    g.n_nodes = n;
    g.nodes = (uint32_t *)nodes;
  }
  ProtobufCMessage *rep = NULL;
  int r = rd__daemon_call(RD__MSG_TYPE__MSG_OBJ_GET, &g.base, g.req_id, RD__MSG_TYPE__MSG_OBJ_GET_REPLY, &rep, -1);
  if (r != 0) {
    snprintf(call->err, sizeof(call->err), "cannot fetch the arguments of '%s': %s", call->func, rd_strerror(r));
    return r;
  }
  Rd__ObjGetReply *gr = (Rd__ObjGetReply *)rep;
  if (gr->n_locs != n) {
    r = gr->status ? gr->status : RD_EPROTO;
    snprintf(call->err, sizeof(call->err), "cannot fetch the arguments of '%s': %s", call->func,
             gr->error && *gr->error ? gr->error : rd_strerror(r));
  }
  /* every location the daemon pinned is recorded, whatever happens next */
  for (size_t k = 0; k < gr->n_locs && k < n; k++)
    if (gr->locs[k]->status == 0) call->pinned[idx[k]] = 1;
  for (size_t k = 0; r == 0 && k < n; k++) {
    Rd__ObjLoc *l = gr->locs[k];
    if (l->status != 0) {
      r = l->status == RD_ENOENT ? RD_EOBJECT_LOST : l->status;
      if (r == RD_EOBJECT_LOST || r == RD_ENODE_DIED) call->lost_arg = ids[k];
      snprintf(call->err, sizeof(call->err), "argument %zu of '%s' (object %llx) is not in the store: %s", idx[k],
               call->func, (unsigned long long)ids[k], rd_strerror(l->status));
    } else if (l->offset > G.store_cap || l->size > G.store_cap - l->offset) {
      r = RD_EPROTO;
    } else {
      call->args[idx[k]].data = G.ro_base + l->offset;
      call->args[idx[k]].size = l->size;
    }
  }
  protobuf_c_message_free_unpacked(rep, NULL);
  if (r == RD_EPROTO && !call->err[0]) snprintf(call->err, sizeof(call->err), "bad store reply");
  return r;   /* pins in call->pinned are dropped when the task ends */
}

static void yield_discard(rd_call *call);

/* Run one task and reply; returns the status it replied with. */
static int run_call(rd__wtask *w) {
  Rd__Task *m = w->msg;
  rd_call call;
  memset(&call, 0, sizeof(call));
  call.msg = m;
  call.from = w->from;
  call.func = m->func ? m->func : "";
  call.nargs = m->n_args;
  call.nret = (int)m->n_return_ids;
  if (m->n_args > RD_MAX_ARGS || m->n_return_ids > RD_MAX_RETURNS || (m->n_return_ids == 0) != m->streaming) {
    reply_fail(w->from, m->task_id, RD_EPROTO, "task has too many arguments or returns", 0);
    return RD_EPROTO;
  }
  rd_function *fn = NULL;
  rd_actor_method *meth = NULL;
  char msg[400];
  call.grant = w->from;
  if (m->actor_id) {
    meth = rd_actor_method_lookup(call.func);
    if (!A.alive || m->actor_id != A.id || m->actor_id != w->from->actor_id) {
      snprintf(msg, sizeof(msg), "call '%s' reached a worker that does not host actor %016llx", call.func,
               (unsigned long long)m->actor_id);
      reply_fail(w->from, m->task_id, RD_EPROTO, msg, 0);
      return RD_EPROTO;
    }
    if (!meth || strcmp(meth->class_name, A.cls->name) != 0) {
      snprintf(msg, sizeof(msg), "actor class %s has no method '%s'", A.cls->name, call.func);
      reply_fail(w->from, m->task_id, RD_ENOFUNC, msg, 0);
      return RD_ENOFUNC;
    }
    call.grant = &A.grant;
  } else {
    fn = rd_function_lookup(call.func);
    if (!fn) {
      snprintf(msg, sizeof(msg), "remote function '%s' is not registered in the worker's executable", call.func);
      reply_fail(w->from, m->task_id, RD_ENOFUNC, msg, 0);
      return RD_ENOFUNC;
    }
  }
  for (size_t i = 0; i < m->n_stream_ids; i++)
    if (rd__idq_push(&call.sids, m->stream_ids[i]) != 0) {
      free(call.sids.v);
      reply_fail(w->from, m->task_id, RD_ENOMEM, "out of memory taking the ids of a streaming task", 0);
      return RD_ENOMEM;
    }
  if (call_arrays(&call) != 0) {
    call_arrays_free(&call);
    free(call.sids.v);
    snprintf(msg, sizeof(msg), "out of memory taking the %zu arguments and %d returns of '%s'", call.nargs, call.nret,
             call.func);
    reply_fail(w->from, m->task_id, RD_ENOMEM, msg, 0);
    return RD_ENOMEM;
  }
  int status = resolve_args(&call);
  if (status == 0) {
    w->from->busy++;
    call.next_running = running;
    running = &call;
    pthread_mutex_unlock(&G.mu);
    cur_task = m->task_id;
    cur_owner_node = m->owner_node;
    cur_owner_pid = m->owner_pid;
    cur_func = call.func;
    cur_attempt = m->attempt;
    rd__ns_set_thread(meth ? A.ns : m->ns);   /* an actor's calls run in its namespace, a task in its submitter's */
    task_mark(m, meth ? A.cls->name : call.func);
    int rc = meth ? meth->fn(&call, A.state) : fn->fn(&call);
    if (marks > 0) {   /* its lines reach the node before its reply reaches its owner */
      fflush(stdout);
      fflush(stderr);
    }
    rd__ns_set_thread(NULL);
    cur_task = 0;
    cur_owner_node = 0, cur_owner_pid = 0;
    cur_func = NULL;
    pthread_mutex_lock(&G.mu);
    if (fn && count_run(fn, m->max_calls)) {
      /* the node first, so that it never makes this worker idle again (the
       * reply below may reach the owner, and its lease come back, first) */
      retiring = 1;
      Rd__WorkerRetire wr = RD__WORKER_RETIRE__INIT;
      wr.func = (char *)call.func;
      wr.max_calls = m->max_calls;
      if (!G.dead && (rd__conn_send(&G.daemon, RD__MSG_TYPE__MSG_WORKER_RETIRE, &wr.base, -1) != 0 ||
                      rd__conn_flush_blocking(&G.daemon, 10000) != 0))
        rd__log(RD_LOG_WARN, "cannot tell the node this worker retires");
    }
    for (rd_call **pp = &running; *pp; pp = &(*pp)->next_running)
      if (*pp == &call) {
        *pp = call.next_running;
        break;
      }
    w->from->busy--;
    if (m->actor_id)   /* refs the actor keeps past the call: told before the reply */
      for (size_t i = 0; i < m->n_args; i++) {
        const Rd__Arg *a = m->args[i];
        if (a->borrow) rd__borrow_keep(a->object_id);
        for (size_t k = 0; a->borrow_list && k < a->n_borrow_ids; k++) rd__borrow_keep(a->borrow_ids[k]);
        for (size_t k = 0; !a->borrow && k < a->n_inner_ids; k++) rd__borrow_keep(a->inner_ids[k]);
      }
    if (rc != 0 || call.failed) {
      status = rc < 0 ? rc : RD_ETASK;
      if (!call.err[0])
        snprintf(call.err, sizeof(call.err), "task '%s' returned %d (%s)", call.func, rc, rc < 0 ? rd_strerror(rc) : "failure");
    }
  }
  /* the reply's returns: here, or allocated when many */
  Rd__Ret rets_in[CALL_RETS_IN], *retp_in[CALL_RETS_IN];
  Rd__RetRef *xrefs_in[CALL_RETS_IN] = {0};
  Rd__RetRef **xrefp_in[CALL_RETS_IN] = {0};
  Rd__Ret *rets = rets_in, **retp = retp_in;
  Rd__RetRef **xrefs = xrefs_in, ***xrefp = xrefp_in;
  if (call.nret > CALL_RETS_IN) {
    size_t n = (size_t)call.nret;
    rets = malloc(n * sizeof(*rets));
    retp = malloc(n * sizeof(*retp));
    xrefs = calloc(n, sizeof(*xrefs));
    xrefp = calloc(n, sizeof(*xrefp));
    if (!rets || !retp || !xrefs || !xrefp) {
      free(rets), free(retp), free(xrefs), free(xrefp);
      rets = rets_in, retp = retp_in, xrefs = xrefs_in, xrefp = xrefp_in;
      status = RD_ENOMEM;
      snprintf(call.err, sizeof(call.err), "task '%s': out of memory replying with %d returns", call.func, call.nret);
    }
  }
  int nrets = rets == rets_in && call.nret > CALL_RETS_IN ? 0 : call.nret;   /* entries in rets[] */
  for (int i = 0; i < nrets; i++) {
    rd__ret__init(&rets[i]);
    retp[i] = &rets[i];
    if (status == 0 && call.ret[i].nrefs) {   /* handed over with the reply */
      size_t n = call.ret[i].nrefs;
      xrefs[i] = malloc(n * sizeof(Rd__RetRef));
      xrefp[i] = malloc(n * sizeof(Rd__RetRef *));
      if (!xrefs[i] || !xrefp[i]) {
        status = RD_ENOMEM;
        snprintf(call.err, sizeof(call.err), "task '%s': out of memory handing over %zu returned refs", call.func, n);
        break;
      }
    }
  }
  if (status == 0 && call.nret > 0) {   /* the store objects first: the caller must find them its own */
    uint64_t *ids_in[CALL_RETS_IN], **ids = ids_in;
    size_t nids_in[CALL_RETS_IN], *nids = nids_in;
    if (call.nret > CALL_RETS_IN) {
      ids = malloc((size_t)call.nret * sizeof(*ids));
      nids = malloc((size_t)call.nret * sizeof(*nids));
    }
    if (!ids || !nids) {
      status = RD_ENOMEM;
      snprintf(call.err, sizeof(call.err), "task '%s': out of memory replying with %d returns", call.func, call.nret);
    }
    for (int i = 0; status == 0 && i < call.nret; i++) {
      ids[i] = call.ret[i].refs;
      nids[i] = call.ret[i].nrefs;
    }
    if (status == 0)
      status = rd__ret_refs_hand_over(w->from, rd__oid_client(m->return_ids[0]), ids, nids, call.nret, call.err,
                                      sizeof(call.err));
    if (ids != ids_in) free(ids);
    if (nids != nids_in) free(nids);
  }
  for (int i = 0; status == 0 && i < call.nret; i++) {
    if (!call.ret[i].nrefs) continue;
    rd__ret_refs_describe(w->from, call.ret[i].refs, call.ret[i].nrefs, xrefs[i]);
    for (size_t k = 0; k < call.ret[i].nrefs; k++) xrefp[i][k] = &xrefs[i][k];
    rets[i].n_refs = call.ret[i].nrefs;
    rets[i].refs = xrefp[i];
  }
  for (int i = 0; i < call.nret; i++) {
    if (status == 0 && call.ret[i].in_store) {   /* status 0: rets[] has nret entries */
      rets[i].in_store = 1;
      if (!call.ret[i].exists) rd__store_seal(m->return_ids[i]);
    } else if (status == 0 && call.ret[i].set) {
      rets[i].data.data = call.ret[i].ptr;
      rets[i].data.len = call.ret[i].size;
    } else if (call.ret[i].in_store && !call.ret[i].exists) {
      /* failed task: drop the unsealed result and our pin on it */
      Rd__ObjIds d = RD__OBJ_IDS__INIT;
      d.n_object_ids = 1;
      d.object_ids = &m->return_ids[i];
      rd__conn_send(&G.daemon, RD__MSG_TYPE__MSG_OBJ_DELETE, &d.base, -1);
      rd__store_release(m->return_ids[i]);
    }
  }
  if (status == 0) reply_ok(w->from, m->task_id, retp, (size_t)call.nret, call.yielded);
  else reply_fail(w->from, m->task_id, status, call.err, call.lost_arg);
  for (int i = 0; i < call.nret; i++) {
    if (!call.ret[i].in_store || call.ret[i].exists) free(call.ret[i].ptr);
    rd__ret_refs_unhold(call.ret[i].refs, call.ret[i].nrefs);
    free(call.ret[i].refs);
    if (i < nrets) {
      free(xrefs[i]);
      free(xrefp[i]);
    }
  }
  if (rets != rets_in) {
    free(rets), free(retp), free(xrefs), free(xrefp);
  }
  for (size_t i = 0; i < m->n_args; i++)
    if (call.pinned[i]) rd__store_release(m->args[i]->object_id);
  fetch_release(&call);
  yield_discard(&call);
  free(call.sids.v);
  call_arrays_free(&call);
  return status;
}

/* Run one task, timed for the node's metrics (and timeline). */
static void run_task(rd__wtask *w) {
  uint64_t t0 = rd__now_ns(), start_us = timeline_on() ? wall_us() : 0;
  int status = run_call(w);
  stats_add(w->msg->task_id, w->msg->func, start_us, rd__now_ns() - t0, status);
}

/* Become the actor the node asked for: run its constructor, tell the node. */
static void actor_start(Rd__ActorStart *m) {
  Rd__ActorReady r = RD__ACTOR_READY__INIT;
  r.actor_id = m->actor_id;
  char err[2048] = "";
  const rd_actor_class *cls = rd_actor_class_lookup(m->class_name);
  if (A.id) {
    r.status = RD_ESTATE;
    snprintf(err, sizeof(err), "this worker already hosts an actor");
  } else if (!cls) {
    r.status = RD_ENOFUNC;
    snprintf(err, sizeof(err), "actor class '%s' is not registered in the worker's executable", m->class_name);
  } else if (m->n_args > RD_MAX_ARGS) {
    r.status = RD_EINVAL;
    snprintf(err, sizeof(err), "too many constructor arguments");
  } else if ((A.ngroups = rd__cgroups_parse(m->concurrency_groups, A.groups, err, sizeof(err))) < 0) {
    A.ngroups = 0;
    r.status = RD_EINVAL;
  } else {
    A.grouped_methods = rd__class_has_grouped_methods(cls->name);
    A.grant.ngpus = (int)(m->n_gpu_ids < RD_RES_MAX_GPUS ? m->n_gpu_ids : RD_RES_MAX_GPUS);
    for (int i = 0; i < A.grant.ngpus; i++) {
      A.grant.gpu_ids[i] = m->gpu_ids[i];
      A.grant.gpu_share[i] = i < (int)m->n_gpu_shares ? m->gpu_shares[i] : 0;
    }
    if (A.grant.ngpus > 0) setenv("CUDA_VISIBLE_DEVICES", m->visible_devices, 1);
    A.grant.gpu_memory = A.grant.ngpus > 0 ? m->gpu_memory : 0;
    set_gpu_memory_env(A.grant.gpu_memory);
    A.id = m->actor_id;
    A.cls = cls;
    A.restarts = (int)m->restarts;
    A.concurrency = m->max_concurrency > 0 ? m->max_concurrency : 1;
    rd_call call;
    memset(&call, 0, sizeof(call));
    Rd__Task fake = RD__TASK__INIT;
    fake.actor_id = m->actor_id;
    call.msg = &fake;
    call.func = cls->name;
    call.grant = &A.grant;
    call.nargs = m->n_args;
    if (call_arrays(&call) != 0) {
      call_arrays_free(&call);
      r.status = RD_ENOMEM;
      snprintf(err, sizeof(err), "out of memory taking %zu constructor arguments", m->n_args);
      goto told;
    }
    for (size_t i = 0; i < m->n_args; i++) {
      call.args[i].data = m->args[i].data;
      call.args[i].size = m->args[i].len;
    }
    A.ns = rd__ns_intern(m->ns);
    pthread_mutex_unlock(&G.mu);
    name_mark(cls->name);
    void *state = NULL;
    rd__ns_set_thread(A.ns);
    int rc = cls->init(&call, &state);
    rd__ns_set_thread(NULL);
    pthread_mutex_lock(&G.mu);
    call_arrays_free(&call);
    if (rc != 0 || call.failed) {
      r.status = rc < 0 ? rc : RD_ETASK;
      snprintf(err, sizeof(err), "%s", call.err[0] ? call.err : rd_strerror(r.status));
    } else {
      A.state = state;
      A.alive = 1;
    }
  }
told:
  r.error = err;
  rd__conn_send(&G.daemon, RD__MSG_TYPE__MSG_ACTOR_READY, &r.base, -1);
  rd__flush_all();
}

/* Everything this process owes the node and its owners goes out before it
 * exits (a reply bigger than a socket buffer would not with rd__flush_all
 * alone), then it exits. */
static void __attribute__((noreturn)) flush_and_exit(void) {
  if (S.dirty) stats_send(rd__now_ns());   /* the last runs' times, for the metrics */
  rd__ost_flush();   /* and what it owned and counted (rd_metric_*) since its last report */
  rd__flush_all();
  for (rd__serve *s = G.serves; s; s = s->next)
    if (!s->closed && rd__conn_flush_blocking(&s->conn, 10000) != 0) s->closed = 1;
  if (!G.dead) (void)rd__conn_flush_blocking(&G.daemon, 10000);
  _exit(0);
}

/* The actor ends for good: every call that came and has not started fails
 * with why (the node's own reason, which later callers get too). */
static void fail_queued_calls(void) {
  (void)rd__pump(0);   /* what is in the sockets already */
  char why[300];
  snprintf(why, sizeof(why), A.exiting ? "actor %s exited (rd_actor_exit) before this call ran"
                                       : "actor %s was killed by rd_actor_kill before this call ran",
           A.cls ? A.cls->name : "?");
  drop_queued(NULL, why);
}

static void *worker_loop(void *arg);

int rd__worker_is_actor(void) { return A.cls != NULL || G.actor_start != NULL; }

void rd__worker_main(void) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  const char *np = getenv("RAYDIST_NODE_PID");
  if (np && getppid() != (pid_t)atoi(np)) _exit(0);   /* the daemon died before we got here */
  const char *v = getenv("CUDA_VISIBLE_DEVICES");
  if (v) {
    orig_visible = strdup(v);
    have_orig_visible = 1;
  }
  pthread_mutex_lock(&G.mu);
  worker_loop((void *)1);
  __builtin_unreachable();
}

/* The loop every executing thread of a worker runs (more than one only for
 * an actor with max_concurrency > 1).  Holds the mutex except while user
 * code runs and while it sits in poll(). */
static void *worker_loop(void *arg) {
  /* arg: (void *)1 the process's main thread, NULL another executor of the
   * default group, -(g + 1) an executor of concurrency group g */
  int is_main = arg == (void *)1;
  if ((intptr_t)arg < 0) my_group = (int)-(intptr_t)arg;
  if (!is_main) (void)rd__crash_altstack();   /* an actor's executor: its overflow reported as the main one's */
  if (!is_main) pthread_mutex_lock(&G.mu);
  int since_flush = 0;
  for (;;) {
    if (is_main && G.actor_start) {
      Rd__ActorStart *m = G.actor_start;
      actor_start(m);
      G.actor_start = NULL;
      protobuf_c_message_free_unpacked(&m->base, NULL);
      /* extra executors for a concurrent actor, and each concurrency
       * group's own (it owns its queue: none of them may be missing) */
      for (int i = 1; A.alive && i < A.concurrency; i++) {
        pthread_t th;
        if (pthread_create(&th, NULL, worker_loop, NULL) == 0) pthread_detach(th);
      }
      for (int g = 0; A.alive && g < A.ngroups; g++)
        for (int i = 0; i < A.groups[g].threads; i++) {
          pthread_t th;
          if (pthread_create(&th, NULL, worker_loop, (void *)(intptr_t)(-(g + 1))) != 0) {
            rd__log(RD_LOG_ERROR, "actor %s: cannot start a thread of concurrency group %s: %s", A.cls->name,
                    A.groups[g].name, strerror(errno));
            if (i == 0) exit(1);   /* its calls would never run: the node restarts it or says it died */
            break;
          }
          pthread_detach(th);
        }
      continue;
    }
    if (G.actor_kill) {
      /* graceful kill: finish nothing more, run the destructor, go; calls
       * that came and will never run are told why (a restart would run
       * them again: then they go with the process, as after a crash) */
      if (A.ending) {   /* another executor (max_concurrency > 1) ends the process */
        pthread_mutex_unlock(&G.mu);
        for (;;) pause();
      }
      A.ending = 1;
      if (G.actor_kill == 2 || A.exiting) fail_queued_calls();
      /* calls running on other executors finish first: the destructor frees
       * what they use (the node's SIGKILL comes 2 s after its kill) */
      for (int i = 0; running && i < 1500; i++) {
        pthread_mutex_unlock(&G.mu);
        usleep(1000);
        pthread_mutex_lock(&G.mu);
      }
      if (A.alive && A.cls && A.cls->fini) {
        A.alive = 0;
        pthread_mutex_unlock(&G.mu);
        A.cls->fini(A.state);
        pthread_mutex_lock(&G.mu);
      }
      flush_and_exit();
    }
    if (A.exiting) {
      /* rd_actor_exit: start nothing more.  The node is told first, so that
       * it knows the exit is meant (no restart) before it sees it; its
       * graceful kill (G.actor_kill) then ends the process above.  Without
       * an answer in 10 s it exits anyway. */
      if (A.exiting == 1) {
        A.exiting = 2;
        A.exit_by = rd__now_ns() + 10000000000ull;
        Rd__ActorKill k = RD__ACTOR_KILL__INIT;
        k.actor_id = A.id;
        k.no_restart = 1;
        k.exiting = 1;
        rd__log(RD_LOG_INFO, "actor %016llx (%s) calls rd_actor_exit: it ends", (unsigned long long)A.id,
                A.cls ? A.cls->name : "?");
        if (!G.dead) rd__conn_send(&G.daemon, RD__MSG_TYPE__MSG_ACTOR_KILL, &k.base, -1);
        rd__flush_all();
      }
      if (rd__now_ns() >= A.exit_by) G.actor_kill = 1;
      else if (rd__pump(100) < 0 && G.dead) _exit(0);
      continue;
    }
    if (retiring) {
      /* a function ran its max_calls times: run nothing more (the owner
       * sends what it pushed after elsewhere once the reply that said so
       * reaches it) and exit once the owner has let go of the lease, so
       * that no task it pushed is left unread in the socket (an exit with
       * unread bytes resets the socket, and a node relaying it for an
       * owner elsewhere would drop the reply with it); 10 s at most */
      if (retiring == 1) {
        retiring = 2;
        retire_by = rd__now_ns() + 10000000000ull;
        rd__log(RD_LOG_DEBUG, "a function ran its max_calls times: this worker ends");
        if (S.dirty) stats_send(rd__now_ns());   /* its node kills it once the lease is back */
      }
      drop_queued(NULL, NULL);
      int open = 0;
      for (rd__serve *s = G.serves; s; s = s->next) open += !s->closed;
      if (!open || rd__now_ns() >= retire_by) flush_and_exit();
      rd__flush_all();
      if (rd__pump(100) < 0 && G.dead) _exit(0);
      continue;
    }
    rd__wtask *w = G.wq_head, *wprev = NULL;   /* the first queued call of this thread's group */
    while (w && w->group != my_group) {
      wprev = w;
      w = w->next;
    }
    if (w) {
      if (wprev) wprev->next = w->next;
      else G.wq_head = w->next;
      if (G.wq_tail == w) G.wq_tail = wprev;
      run_task(w);
      wtask_free(w);
      stats_maybe_send();
      if (++since_flush >= 16 || !G.wq_head) {
        rd__flush_all();
        since_flush = 0;
      }
      continue;
    }
    if (rd__pump(S.dirty ? 200 : -1) < 0 && G.dead) _exit(0);
    if (S.dirty && !G.wq_head) {
      stats_maybe_send();
      rd__flush_all();
    }
  }
  return NULL;
}

/* ---------------------------------------------------- the call API */

size_t rd_call_nargs(const rd_call *call) { return call ? call->nargs : 0; }
size_t rd_call_nreturns(const rd_call *call) { return call ? (size_t)call->nret : 0; }
const char *rd_call_function_name(const rd_call *call) { return call ? call->func : ""; }
int rd_call_attempt(const rd_call *call) { return call ? (int)call->msg->attempt : 0; }

int rd_call_task_id(const rd_call *call, char *buf, size_t len) {
  if (!call || !buf || len < RD_TASK_ID_LEN) {
    if (buf && len) buf[0] = 0;
    return RD_EINVAL;
  }
  rd__task_id_text(buf, len, call->msg->owner_node, (int)call->msg->owner_pid, call->msg->task_id);
  return 0;
}

int rd_call_cancelled(rd_call *call) {
  if (!call) return 0;
  if (__atomic_load_n(&call->cancelled, __ATOMIC_RELAXED)) return 1;
  uint64_t now = rd__now_ns();
  if (now - call->polled_ns < 1000000u) return 0;
  call->polled_ns = now;
  /* nobody reads the owner's socket while this thread runs user code: look */
  pthread_mutex_lock(&G.mu);
  if (!G.pumping) (void)rd__pump(0);
  pthread_mutex_unlock(&G.mu);
  return __atomic_load_n(&call->cancelled, __ATOMIC_RELAXED);
}

/* Argument i as the task message has it; NULL for a constructor's call,
 * which has no task message (its arguments are values). */
static const Rd__Arg *call_arg_msg(const rd_call *call, size_t i) {
  return call->msg && i < call->msg->n_args ? call->msg->args[i] : NULL;
}

int rd_arg(rd_call *call, size_t i, rd_buf *out) {
  if (!call || !out || i >= call->nargs) return RD_EINVAL;
  const Rd__Arg *a = call_arg_msg(call, i);
  if (a && (a->borrow || a->borrow_list)) {
    rd__log(RD_LOG_WARN, "'%s': argument %zu is a borrowed ref: take it with rd_call_arg_ref%s", call->func, i,
            a->borrow_list ? "s" : "");
    return RD_EINVAL;
  }
  *out = call->args[i];
  out->priv_[0] = out->priv_[1] = 0;   /* owned by the call: release is a no-op */
  return 0;
}

int rd_arg_copy(rd_call *call, size_t i, void *dst, size_t size) {
  rd_buf b;
  int r = dst || !size ? rd_arg(call, i, &b) : RD_EINVAL;
  if (r != 0) return r;
  if (b.size != size) {
    rd__log(RD_LOG_WARN, "'%s': argument %zu is %zu bytes, not the %zu expected", call->func, i, b.size, size);
    return RD_EINVAL;
  }
  if (size) memcpy(dst, b.data, size);
  return 0;
}

int rd_call_arg_ref(rd_call *call, size_t i, rd_ref *out) {
  if (!call || !out || i >= call->nargs) return RD_EINVAL;
  const Rd__Arg *a = call_arg_msg(call, i);
  if (!a || !a->borrow) {
    rd__log(RD_LOG_WARN, "'%s': argument %zu is a value, not a borrowed ref (rd_arg_borrow)", call->func, i);
    return RD_EINVAL;
  }
  pthread_mutex_lock(&G.mu);
  int r = rd__borrow_ref(call->from, a->object_id, a);
  rd__flush_soon();
  pthread_mutex_unlock(&G.mu);
  if (r == 0) out->id = a->object_id;
  return r;
}

int rd_call_arg_refs(rd_call *call, size_t i, rd_ref *out, size_t max, size_t *n_out) {
  if (!call || !n_out || i >= call->nargs) return RD_EINVAL;
  const Rd__Arg *a = call_arg_msg(call, i);
  if (!a || a->borrow) {
    rd__log(RD_LOG_WARN, "'%s': argument %zu is a borrowed ref, not a list of refs (rd_arg_borrow_refs) or an "
            "object containing refs (rd_put_refs): take it with rd_call_arg_ref", call->func, i);
    return RD_EINVAL;
  }
  /* a list lent with rd_arg_borrow_refs, or the refs a value contains */
  size_t n = a->borrow_list ? a->n_borrow_ids : a->n_inner_ids;
  const uint64_t *ids = a->borrow_list ? a->borrow_ids : a->inner_ids;
  *n_out = n;
  if (!out) return 0;
  if (max < n) return RD_EINVAL;
  int r = 0;
  size_t k = 0;
  pthread_mutex_lock(&G.mu);
  for (; k < n && r == 0; k++) {
    r = rd__borrow_ref(call->from, ids[k], NULL);
    out[k].id = ids[k];
  }
  rd__flush_soon();
  if (r != 0) {   /* all or nothing: drop those taken */
    pthread_mutex_unlock(&G.mu);
    for (size_t j = 0; j + 1 < k; j++) rd_ref_release(out[j]);
    return r;
  }
  pthread_mutex_unlock(&G.mu);
  return 0;
}

void *rd_return_alloc(rd_call *call, size_t i, size_t size) {
  if (!call || i >= (size_t)call->nret || call->ret[i].set) return NULL;
  /* small ones travel in the reply, up to RD_MSG_INLINE_BUDGET of them: a
   * task with thousands of returns puts the rest in the store */
  if (size <= G.inline_max && size <= RD_MSG_INLINE_BUDGET - call->ret_inline) {
    call->ret[i].ptr = malloc(size ? size : 1);
    if (!call->ret[i].ptr) return NULL;
    call->ret[i].size = size;
    call->ret[i].set = 1;
    call->ret_inline += size;
    return call->ret[i].ptr;
  }
  pthread_mutex_lock(&G.mu);
  uint8_t *p = NULL;
  char err[256];
  int r = rd__store_create(call->msg->return_ids[i], size, &p, err, sizeof(err));
  pthread_mutex_unlock(&G.mu);
  if (r == RD_EEXIST) {
    /* an earlier attempt of this task already sealed this result */
    call->ret[i].ptr = malloc(size);
    if (!call->ret[i].ptr) return NULL;
    call->ret[i].exists = 1;
    p = call->ret[i].ptr;
  } else if (r != 0) {
    snprintf(call->err, sizeof(call->err), "return %zu of '%s': %s", i, call->func, err);
    call->failed = 1;
    return NULL;
  }
  if (!call->ret[i].exists) call->ret[i].ptr = p;
  call->ret[i].size = size;
  call->ret[i].set = 1;
  call->ret[i].in_store = 1;
  return p;
}

int rd_return_bytes(rd_call *call, size_t i, const void *data, size_t size) {
  if (!call || i >= (size_t)call->nret || (size && !data)) return RD_EINVAL;
  if (call->ret[i].set) return RD_EEXIST;
  void *p = rd_return_alloc(call, i, size);
  if (!p) return call->failed ? RD_ESTORE_FULL : RD_ENOMEM;
  if (size) rd__copy(p, data, size);
  return 0;
}

int rd_return_refs(rd_call *call, size_t i, const void *data, size_t size, const rd_ref *refs, size_t n) {
  if (!call || i >= (size_t)call->nret || (size && !data) || (n && !refs)) return RD_EINVAL;
  if (call->ret[i].set) return RD_EEXIST;
  if (call->msg->streaming || n > (4u << 20)) {
    rd__log(RD_LOG_WARN, "rd_return_refs in '%s': %s", call->func,
            call->msg->streaming ? "a streaming task yields its items (rd_yield), it returns no refs"
                                 : "more than 4,194,304 refs");
    return RD_EINVAL;
  }
  uint64_t *ids = n ? malloc(n * sizeof(*ids)) : NULL;
  if (n && !ids) return RD_ENOMEM;
  for (size_t k = 0; k < n; k++) ids[k] = refs[k].id;
  int r = rd__ret_refs_hold(call->from, "rd_return_refs", call->func, refs, n);
  if (r == 0 && (r = rd_return_bytes(call, i, data, size)) != 0) {
    pthread_mutex_lock(&G.mu);
    rd__ret_refs_unhold(ids, n);
    pthread_mutex_unlock(&G.mu);
  }
  if (r != 0) {
    free(ids);
    return r;
  }
  call->ret[i].refs = ids;
  call->ret[i].nrefs = n;
  return 0;
}

/* Items yielded within this time of the last write out wait for the next
 * one, at most this long (rd__flush_within). */
#define STREAM_FLUSH_NS 100000u

/* The item being made (rd_yield_alloc, or inside rd_yield): G.mu held
 * while it is set up and sent, not while its bytes are written.  `skip`:
 * an earlier attempt delivered it, so its bytes go to scratch memory, when
 * `scratch` asks for any (rd_yield_alloc: the task writes them somewhere;
 * rd_yield has nothing to copy). */
static int yield_begin(rd_call *call, size_t size, int scratch) {
  if (call->yielding) {
    rd__log(RD_LOG_WARN, "rd_yield in '%s': another rd_yield on this call is under way (another thread's, or an "
            "rd_yield_alloc not committed)", call->func);
    return RD_ESTATE;
  }
  call->yielding = 1;   /* from here: while this thread waits in the pump, no other takes the id */
  memset(&call->y, 0, sizeof(call->y));
  call->y.size = size;
  call->y.skip = call->yielded < call->msg->stream_skip;
  int r = 0;
  if (!call->y.skip) {
    /* the owner grants ids as its caller takes items: wait for one */
    while (!rd__idq_count(&call->sids) && r == 0) {
      if (call->from->closed || __atomic_load_n(&call->cancelled, __ATOMIC_RELAXED)) r = RD_ECANCELED;
      else if (G.dead) r = RD_ENODE_DIED;
      else (void)rd__pump(100);
    }
    if (r == 0) call->y.id = call->sids.v[call->sids.head];   /* taken once the item is sent */
  }
  if (r == 0 && size > G.inline_max && !call->y.skip) {
    char err[256];
    r = rd__store_create(call->y.id, size, &call->y.ptr, err, sizeof(err));
    if (r != 0)
      rd__log(RD_LOG_WARN, "rd_yield in '%s': item %llu: %s", call->func, (unsigned long long)call->yielded, err);
    call->y.in_store = r == 0;
  } else if (r == 0 && (!call->y.skip || scratch) && !(call->y.ptr = malloc(size ? size : 1))) {
    r = RD_ENOMEM;
  }
  if (r != 0) call->yielding = 0;
  return r;
}

/* Send the item yield_begin set up (or, skipped, drop it). */
static void yield_end(rd_call *call) {
  call->yielding = 0;
  if (call->y.skip) {
    free(call->y.ptr);
    call->yielded++;
    return;
  }
  Rd__Ret ret = RD__RET__INIT;
  if (call->y.in_store) {
    rd__store_seal(call->y.id);
    ret.in_store = 1;
  } else {
    ret.data.data = call->y.ptr;
    ret.data.len = call->y.size;
  }
  ret.n_refs = call->y.nrefs;
  ret.refs = call->y.refs;
  (void)rd__idq_pop(&call->sids);
  Rd__StreamItem it = RD__STREAM_ITEM__INIT;
  it.task_id = call->msg->task_id;
  it.index = call->yielded++;
  S.stream_items++;   /* reported with the task run times */
  S.dirty = 1;
  it.object_id = call->y.id;
  it.ret = &ret;
  it.node = G.node_index;
  if (rd__conn_send(&call->from->conn, RD__MSG_TYPE__MSG_STREAM_ITEM, &it.base, -1) != 0) call->from->closed = 1;
  if (!call->y.in_store) free(call->y.ptr);
  /* an item after a pause goes at once; items that follow each other
   * closely go together, within STREAM_FLUSH_NS (one write and one wake-up
   * of the taker per batch, not per item) */
  uint64_t now = rd__now_ns();
  if (now - call->flushed_ns >= STREAM_FLUSH_NS) {
    rd__flush_all();
    call->flushed_ns = now;
  } else {
    rd__flush_within(STREAM_FLUSH_NS);
  }
}

/* A call ends with an item allocated and not committed: it is not sent. */
static void yield_discard(rd_call *call) {
  if (!call->yielding) return;
  call->yielding = 0;
  if (!call->y.in_store) {
    free(call->y.ptr);
    return;
  }
  Rd__ObjIds d = RD__OBJ_IDS__INIT;   /* the unsealed object and our pin on it */
  d.n_object_ids = 1;
  d.object_ids = &call->y.id;
  rd__conn_send(&G.daemon, RD__MSG_TYPE__MSG_OBJ_DELETE, &d.base, -1);
  rd__store_release(call->y.id);
}

int rd_yield(rd_call *call, const void *data, size_t size) {
  if (!call || !call->msg->streaming || (size && !data)) return RD_EINVAL;
  pthread_mutex_lock(&G.mu);
  int r = yield_begin(call, size, 0);
  if (r == 0) {
    if (!call->y.skip && size) {
      pthread_mutex_unlock(&G.mu);
      rd__copy(call->y.ptr, data, size);
      pthread_mutex_lock(&G.mu);
    }
    yield_end(call);
  }
  pthread_mutex_unlock(&G.mu);
  return r;
}

int rd_yield_refs(rd_call *call, const void *data, size_t size, const rd_ref *refs, size_t n) {
  if (!call || !call->msg->streaming || (size && !data) || (n && !refs)) return RD_EINVAL;
  if (n > (4u << 20)) {
    rd__log(RD_LOG_WARN, "rd_yield_refs in '%s': more than 4,194,304 refs", call->func);
    return RD_EINVAL;
  }
  uint64_t *ids = malloc((n ? n : 1) * sizeof(*ids));
  Rd__RetRef *x = malloc((n ? n : 1) * sizeof(*x));
  Rd__RetRef **xp = malloc((n ? n : 1) * sizeof(*xp));
  int r = ids && x && xp ? 0 : RD_ENOMEM;
  for (size_t k = 0; r == 0 && k < n; k++) ids[k] = refs[k].id;
  /* as rd_return_refs: checked and held, the caller's others waited for */
  if (r == 0) r = rd__ret_refs_hold(call->from, "rd_yield_refs", call->func, refs, n);
  int held = r == 0;
  pthread_mutex_lock(&G.mu);
  if (r == 0) r = yield_begin(call, size, 0);
  if (r == 0) {
    if (!call->y.skip && size) {
      pthread_mutex_unlock(&G.mu);
      rd__copy(call->y.ptr, data, size);
      pthread_mutex_lock(&G.mu);
    }
    if (!call->y.skip && n) {   /* the store objects first: the owner must find them its own */
      uint64_t *idv[1] = {ids};
      size_t nv[1] = {n};
      char herr[256];
      r = rd__ret_refs_hand_over(call->from, rd__oid_client(call->y.id), idv, nv, 1, herr, sizeof(herr));
      if (r != 0) {
        rd__log(RD_LOG_WARN, "rd_yield_refs in '%s': %s", call->func, herr);
        yield_discard(call);
      } else {
        rd__ret_refs_describe(call->from, ids, n, x);
        for (size_t k = 0; k < n; k++) xp[k] = &x[k];
        call->y.refs = xp;
        call->y.nrefs = n;
      }
    }
    if (r == 0) yield_end(call);
    call->y.refs = NULL;
    call->y.nrefs = 0;
  }
  if (held) rd__ret_refs_unhold(ids, n);
  pthread_mutex_unlock(&G.mu);
  free(ids);
  free(x);
  free(xp);
  return r;
}

void *rd_yield_alloc(rd_call *call, size_t size) {
  if (!call || !call->msg->streaming) return NULL;
  pthread_mutex_lock(&G.mu);
  int r = yield_begin(call, size, 1);
  void *p = r == 0 ? call->y.ptr : NULL;
  pthread_mutex_unlock(&G.mu);
  return p;
}

int rd_yield_commit(rd_call *call) {
  if (!call || !call->msg->streaming) return RD_EINVAL;
  pthread_mutex_lock(&G.mu);
  int r = call->yielding ? 0 : RD_EINVAL;
  if (r == 0) yield_end(call);
  pthread_mutex_unlock(&G.mu);
  return r;
}

int rd_call_fail(rd_call *call, const char *fmt, ...) {
  if (!call) return RD_ETASK;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(call->err, sizeof(call->err), fmt, ap);
  va_end(ap);
  call->failed = 1;
  return RD_ETASK;
}

uint64_t rd_call_gpu_memory(const rd_call *call) { return call && call->grant ? call->grant->gpu_memory : 0; }

int rd_call_gpu_ids(const rd_call *call, int *ids, double *fractions, int max) {
  if (!call || !call->grant) return 0;
  int n = call->grant->ngpus < max ? call->grant->ngpus : max;
  for (int i = 0; i < n; i++) {
    if (ids) ids[i] = call->grant->gpu_ids[i];
    if (fractions) fractions[i] = rd_res_to_double(call->grant->gpu_share[i]);
  }
  return n;
}

int rd_call_arg_actor(rd_call *call, size_t i, rd_actor *out) {
  rd_buf b;
  int r = rd_arg(call, i, &b);
  if (r != 0) return r;
  if (b.size != sizeof(rd_actor) || !out) return RD_EINVAL;
  memcpy(out, b.data, sizeof(*out));
  return 0;
}

rd_actor rd_call_actor(const rd_call *call) {
  rd_actor a = {call && call->msg ? call->msg->actor_id : 0};
  return a;
}

int rd_call_actor_restarts(const rd_call *call) { return call && call->msg && call->msg->actor_id ? A.restarts : 0; }

int rd_actor_exit(rd_call *call) {
  if (!call || !call->msg || !call->msg->actor_id) return RD_EINVAL;
  pthread_mutex_lock(&G.mu);
  int r = A.alive && call->msg->actor_id == A.id ? 0 : RD_EINVAL;
  if (r == 0) A.exiting = 1;   /* acted on once this call has replied (worker_loop) */
  pthread_mutex_unlock(&G.mu);
  return r;
}
