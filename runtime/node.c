/* runtime/node.c - the node daemon: one per node, the only owner of the
 * object store, the resource ledger and the worker pool.
 *
 * A libuv loop accepts drivers and workers on a Unix socket, grants worker
 * leases through the scheduler queue (handing each side one end of a fresh
 * socketpair so tasks then flow owner -> worker without this process), and
 * serves object create/seal/get/release.  Handlers decode, call a subsystem
 * and return: the daemon never runs user code and never waits on a client.
 * A malformed frame drops that one client, never the daemon. */
#include "node_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <dlfcn.h>
#include <uv.h>

#include "app_metrics.h"
#include "cluster.h"
#include "gcs_store.h"
#include "pg.h"
#include "common.h"
#include "log.h"
#include "log_files.h"
#include "state_api.h"
#include "metrics.h"
#include "queue.h"
#include "raydist.h"
#include "resources.h"
#include "store.h"

extern char **environ;

rd__node_state N;

static void client_drop(node_client *c, const char *why);
static void client_lost(node_client *c, const char *why);
static void dispatch(void);
static int actor_created_reply(node_actor *a, uint32_t client_id, uint64_t req_id);
static int actor_view_wait(const node_actor *a);
static void worker_spawn(node_job *j);
static void actor_worker_gone(node_actor *a, const char *why);
static void actor_place(node_actor *a, node_worker *w, const rd_res_grant *g);
static void actor_die(node_actor *a, const char *why);
static void fail_queue(rd_sched_queue *q, int status, const char *why);

/* The queue a request waits in: its placement-group bundle's, or the node's. */
static rd_sched_queue *req_queue(const lease_req *r) { return r->bundle ? &r->bundle->queue : &N.queue; }

/* ------------------------------------------------------------- plumbing */

static void client_update_poll(node_client *c) {
  if (c->dead) return;
  int ev = UV_READABLE | (rd__conn_want_write(&c->conn) ? UV_WRITABLE : 0);
  if (ev != c->poll_events) {
    c->poll_events = ev;
    uv_poll_start(&c->poll, ev, c->poll.poll_cb);
  }
}

/* Write what every client has buffered; called at the end of each event. */
static void flush_all(void) {
  for (node_client *c = N.clients; c; c = c->next) {
    if (c->dead || c->draining || !rd__conn_want_write(&c->conn)) continue;
    if (rd__conn_flush(&c->conn) < 0) {
      client_lost(c, "write failed");
      continue;
    }
    client_update_poll(c);
  }
}

static void send_msg(node_client *c, Rd__MsgType t, const ProtobufCMessage *m, int fd) {
  if (c->dead) {
    if (fd >= 0) close(fd);
    return;
  }
  if (rd__conn_send(&c->conn, t, m, fd) != 0) client_drop(c, "cannot buffer a reply");
}

static void send_error(node_client *c, int status, const char *msg) {
  Rd__Error e = RD__ERROR__INIT;
  e.status = status;
  e.message = (char *)msg;
  send_msg(c, RD__MSG_TYPE__MSG_ERROR, &e.base, -1);
}

static void pin_add(node_client *c, uint64_t id) {
  if (c->npins == c->cappins) {
    size_t cap = c->cappins ? c->cappins * 2 : 64;
    uint64_t *p = realloc(c->pins, cap * sizeof(*p));
    if (!p) return; /* pin stays in the store; freed at delete */
    c->pins = p;
    c->cappins = cap;
  }
  c->pins[c->npins++] = id;
}

static int pin_remove(node_client *c, uint64_t id) {
  for (size_t i = c->npins; i-- > 0;) {
    if (c->pins[i] == id) {
      c->pins[i] = c->pins[--c->npins];
      return 1;
    }
  }
  return 0;
}

/* ------------------------------------------------------------ workers */

/* --------------------------------------------------------- worker output
 *
 * A worker's stdout and stderr are pipes the node reads (a cluster's node
 * or an embedded one alike): each whole line goes to the worker's own
 * file, logs/worker-WID-JOB-PID.out or .err (log_files.c; with
 * RAYDIST_LOG_TO_STDERR=1, or when the file cannot be made, to the node's
 * own stdout or stderr, its log, prefixed with the worker's pid), and to
 * the driver whose work the worker is doing (w->driver: that of its lease
 * or actor), on this node or through the link to the driver's node, which
 * prints it prefixed with the task's name, the pid and (in a cluster) the
 * node's address, as Ray's log_to_driver.  A stream outlives its worker
 * until it has read the pipe to its end, routing the last lines by the
 * driver it saw last. */
#define RD_OUT_LINE_MAX 16384               /* longer lines are cut into pieces */
#define RD_OUT_DRIVER_BACKLOG (8u << 20)    /* a driver this far behind loses output, counted */

typedef struct worker_out {
  uv_pipe_t pipe;
  node_worker *w;           /* NULL once the worker record is freed */
  int which;                /* 1 stdout, 2 stderr */
  int pid;
  uint32_t driver;          /* the last driver seen (w->driver) */
  rd__wlog file;            /* logs/worker-WID-JOB-PID.out or .err (fd -1: the node's log instead) */
  uint32_t wid, job;        /* the worker's number and its job's, for its files' names */
  uint32_t gen;             /* file.gen when the task ranges last heard of it */
  uint64_t task;            /* the task_lines seq of the task marked last (0: none) */
  char name[RD_TASK_MARK_NAME_MAX + 1];   /* the name marked last (WorkerOutput.name) */
  struct worker_out *next_paused;         /* in out_paused while its reads rest */
  struct worker_out *next_all, **pprev_all;   /* in out_all until closed */
  int paused;
  uint64_t read_ns;                       /* its last read (rd__now_ns): one soon after rests */
  size_t offered;                         /* room the last read was given (out_alloc) */
  size_t len;
  char buf[RD_OUT_LINE_MAX];
} worker_out;

/* ------------------------------------------------------------ task ranges
 *
 * Where each task's lines are in its worker's files, from the marks the
 * worker writes before each task (src/worker.c, RD_TASK_MARK): the last
 * RAYDIST_TASK_LOGS_KEPT (default 10000) tasks' ranges on this node, in a
 * ring, for `raydist logs task` (GET /api/logs/file?task=ID) and `ray list
 * tasks --detail`'s task_log_info.  A range is (backup, offset): backup 0
 * is the file being written, k its k-th backup (.out.k), so a rotation
 * moves each of the stream's ranges one backup back; a range runs to the
 * next mark in its stream, or to the file's end while none came. */
typedef struct task_lines {
  uint64_t seq;             /* its place in the ring (0: an empty slot) */
  char id[RD_TASK_ID_TEXT];
  uint32_t attempt, wid, job;
  int pid;
  struct {
    uint32_t k0, k1;        /* the backups its start and its end are in */
    uint64_t start, end;
    uint8_t set, ended;     /* its mark came; the next mark came (end is set) */
  } s[2];                   /* stdout, stderr */
} task_lines;

static struct {
  task_lines *v;
  size_t cap;               /* RAYDIST_TASK_LOGS_KEPT; 0 until the first mark */
  uint64_t next;            /* the seq of the next range */
  int off;                  /* RAYDIST_TASK_LOGS_KEPT=0, or no memory: none kept */
} TL;

/* An embedded node's session, for its end (rd__session_end). */
static struct {
  int driver_pid;
  uint64_t start_ms;
  size_t kept;
} emb;

static task_lines *tl_at(uint64_t seq) {
  if (!seq || !TL.cap || seq + TL.cap <= TL.next) return NULL;   /* none, or overwritten */
  task_lines *t = &TL.v[seq % TL.cap];
  return t->seq == seq ? t : NULL;
}

/* The range of (id, attempt) for stream s's mark: the one its worker's
 * other stream's mark made, or a new one.  Both streams mark each task in
 * the same order, so the stream that lags finds its task as the first of
 * its worker's ranges after its own last one that it has no part in yet
 * (the ranges of other workers between them skipped). */
static task_lines *tl_take(worker_out *s, const char *id, size_t idlen, uint32_t attempt) {
  if (TL.off) return NULL;
  if (!TL.cap) {
    const char *v = getenv("RAYDIST_TASK_LOGS_KEPT");
    long n = v && *v ? atol(v) : 10000;
    if (n > 1000000) n = 1000000;   /* ~130 MB */
    if (n <= 0 || !(TL.v = calloc((size_t)n, sizeof(*TL.v)))) return (void)(TL.off = 1), NULL;
    TL.cap = (size_t)n;
    TL.next = 1;
  }
  int i = s->which - 1;
  uint64_t from = tl_at(s->task) ? s->task + 1 : (TL.next > TL.cap ? TL.next - TL.cap : 1);
  for (uint64_t q = from; q < TL.next; q++) {
    task_lines *t = tl_at(q);
    if (!t || t->wid != s->wid || t->s[i].set) continue;
    if (t->attempt == attempt && !memcmp(t->id, id, idlen) && !t->id[idlen]) return t;
    break;   /* not this task's: its other stream's mark has not come */
  }
  task_lines *t = &TL.v[TL.next % TL.cap];
  memset(t, 0, sizeof(*t));
  t->seq = TL.next++;
  memcpy(t->id, id, idlen);
  t->attempt = attempt;
  t->wid = s->wid;
  return t;
}

/* s's file rotated (gen times since the ranges last looked): its ranges
 * move that many backups back; the open one goes on in the new file. */
static void tl_rotated(worker_out *s) {
  uint32_t d = s->file.gen - s->gen;
  s->gen = s->file.gen;
  if (!TL.cap || !d) return;
  int i = s->which - 1;
  for (size_t k = 0; k < TL.cap; k++) {
    task_lines *t = &TL.v[k];
    if (!t->seq || t->wid != s->wid || !t->s[i].set) continue;
    t->s[i].k0 += d;
    if (t->s[i].ended) t->s[i].k1 += d;
  }
}

/* s's name is now p[0..n) (cut to RD_TASK_MARK_NAME_MAX). */
static void out_name(worker_out *s, const char *p, size_t n) {
  if (n > RD_TASK_MARK_NAME_MAX) n = RD_TASK_MARK_NAME_MAX;
  if (!memcmp(s->name, p, n) && !s->name[n]) return;   /* the same task as before: most marks */
  memcpy(s->name, p, n);
  s->name[n] = 0;
}

/* A worker's mark, parsed from its text (after RD_TASK_MARK, without its
 * newline): "name NAME", or "task ID ATTEMPT NAME" (by hand: one comes
 * with each task, on each stream). */
typedef struct out_mark_t {
  const char *id, *name;    /* id NULL: a name alone */
  size_t idlen, namelen;
  uint32_t attempt;
} out_mark_t;

/* 1 when p[0..n) is a mark, into *m; 0: the worker's own bytes. */
static int mark_parse(const char *p, size_t n, out_mark_t *m) {
  const char *e = p + n;
  memset(m, 0, sizeof(*m));
  if (n > 5 && !memcmp(p, "name ", 5)) {
    m->name = p + 5;
    m->namelen = n - 5;
    return 1;
  }
  if (n < 8 || memcmp(p, "task ", 5) != 0) return 0;
  const char *id = p + 5, *sp = memchr(id, ' ', (size_t)(e - id));
  if (!sp || sp == id || sp - id >= RD_TASK_ID_TEXT) return 0;
  const char *d = sp + 1;
  for (; d < e && *d >= '0' && *d <= '9'; d++) m->attempt = m->attempt * 10 + (uint32_t)(*d - '0');
  if (d == sp + 1 || d >= e || *d != ' ') return 0;
  m->id = id;
  m->idlen = (size_t)(sp - id);
  m->name = d + 1;
  m->namelen = (size_t)(e - d - 1);
  return 1;
}

/* Mark m came on s: its name, and where its task's lines begin. */
static void out_mark(worker_out *s, const out_mark_t *m) {
  out_name(s, m->name, m->namelen);
  if (!m->id || s->file.fd < 0) return;   /* a name alone; or no file: no ranges */
  uint64_t here = rd__wlog_here(&s->file);
  tl_rotated(s);
  int i = s->which - 1;
  task_lines *prev = tl_at(s->task);
  if (prev && prev->s[i].set && !prev->s[i].ended) {
    prev->s[i].ended = 1;
    prev->s[i].k1 = 0;
    prev->s[i].end = here;
  }
  task_lines *t = tl_take(s, m->id, m->idlen, m->attempt);
  if (!t) return;
  t->pid = s->pid;
  t->job = s->job;
  t->s[i].set = 1;
  t->s[i].ended = 0;
  t->s[i].k0 = 0;
  t->s[i].start = here;
  s->task = t->seq;
}

/* The file stream i (0 stdout, 1 stderr) of range t begins in, its name
 * into file (its backup's when rotated since), and whether its end is in
 * that file too (else it runs to that file's end).  -1: no mark came on
 * that stream, or the file was rotated out. */
static int tl_file(const task_lines *t, int i, char *file, size_t flen, int *has_end) {
  uint32_t k = t->s[i].k0;
  if (!t->s[i].set || (int)k > rd__wlog_backups()) return -1;
  char name[64];
  rd__wlog_name(name, sizeof(name), t->wid, t->job, t->pid);
  if (k) snprintf(file, flen, "%s.%s.%u", name, i ? "err" : "out", k);
  else snprintf(file, flen, "%s.%s", name, i ? "err" : "out");
  *has_end = t->s[i].ended && t->s[i].k1 == k;
  return 0;
}

/* One stream's part of a range, as members of task_lines_json's rows. */
static void tl_json_stream(rd__mbuf *b, const task_lines *t, int i) {
  const char *sfx = i ? "err" : "out";
  char file[96];
  int has_end;
  if (tl_file(t, i, file, sizeof(file), &has_end) != 0) return;
  rd__mbuf_printf(b, ", \"%s_file\": \"%s\", \"%s_start\": %" PRIu64, sfx, file, sfx, t->s[i].start);
  if (has_end) rd__mbuf_printf(b, ", \"%s_end\": %" PRIu64, sfx, t->s[i].end);
}

void rd__node_task_lines_json(rd__mbuf *b) {
  rd__mbuf_printf(b, "{\"tasks\": [");
  int first = 1;
  for (uint64_t q = TL.next; TL.cap && q-- > 1;) {   /* newest first */
    task_lines *t = tl_at(q);
    if (!t) break;
    rd__mbuf_printf(b, "%s{\"task_id\": \"%s\", \"attempt\": %u, \"pid\": %d", first ? "" : ", ", t->id, t->attempt,
                    t->pid);
    tl_json_stream(b, t, 0);
    tl_json_stream(b, t, 1);
    rd__mbuf_printf(b, "}");
    first = 0;
  }
  rd__mbuf_printf(b, "]}\n");
}

int rd__node_task_lines(const char *id, int pid, int which, char *file, size_t flen, uint64_t *off, uint64_t *end,
                        int *has_end, char *why, size_t wl) {
  task_lines *best = NULL;
  for (uint64_t q = TL.next; TL.cap && q-- > 1;) {
    task_lines *t = tl_at(q);
    if (!t) break;
    if (strcasecmp(t->id, id) != 0 || (pid && t->pid != pid)) continue;
    best = t;
    break;
  }
  int i = which == 2 ? 1 : 0;
  if (!best || !best->s[i].set) {
    snprintf(why, wl, "no lines of task %.40s are recorded on this node (an actor's calls only with "
                      "RAYDIST_RECORD_ACTOR_TASK_LOGGING=1; the last %zu tasks' are kept): its worker's whole "
                      "file is raydist logs worker --pid P", id, TL.cap ? TL.cap : (size_t)10000);
    return -1;
  }
  if (tl_file(best, i, file, flen, has_end) != 0) {
    snprintf(why, wl, "task %.40s's lines were rotated out of its worker's files (RAYDIST_ROTATION_BACKUP_COUNT)", id);
    return -1;
  }
  *off = best->s[i].start;
  *end = *has_end ? best->s[i].end : 0;   /* else to the end of the file it starts in */
  return 0;
}

/* Streams read more than once in RD_OUT_REST_MS rest that long before
 * their next read, so that a worker running many small tasks (a mark each)
 * wakes its node a thousand times a second, not at each task (at 400,000
 * tasks a second, 22 MB/s a stream: 22 KB a rest, in a pipe of 256 KiB),
 * while a line now and then is read at once.  A read that filled the
 * buffer does not rest: the pipe is read to its end first (one 16 KiB read
 * a rest capped a stream at 16 MB/s, ~340,000 marks a second). */
#define RD_OUT_REST_MS 1
static worker_out *out_paused;
static worker_out *out_all;   /* every stream not yet closed, its worker's or not */
static uv_timer_t out_rest_timer;
static int out_rest_init;

static void out_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b);
static void out_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b);

static void out_rest_over(uv_timer_t *t) {
  (void)t;
  worker_out *s = out_paused;
  out_paused = NULL;
  for (worker_out *next; s; s = next) {
    next = s->next_paused;
    s->next_paused = NULL;
    s->paused = 0;
    if (!uv_is_closing((uv_handle_t *)&s->pipe)) (void)uv_read_start((uv_stream_t *)&s->pipe, out_alloc, out_read);
  }
}

static void out_rest(worker_out *s) {
  if (s->paused || N.shutting_down) return;
  if (!out_rest_init) {
    if (uv_timer_init(N.loop, &out_rest_timer) != 0) return;
    out_rest_init = 1;
  }
  if (uv_read_stop((uv_stream_t *)&s->pipe) != 0) return;
  s->paused = 1;
  s->next_paused = out_paused;
  out_paused = s;
  if (!uv_is_active((uv_handle_t *)&out_rest_timer)) uv_timer_start(&out_rest_timer, out_rest_over, RD_OUT_REST_MS, 0);
}

static void out_closed(uv_handle_t *h) {
  worker_out *s = h->data;
  if (s->pprev_all) {
    *s->pprev_all = s->next_all;
    if (s->next_all) s->next_all->pprev_all = s->pprev_all;
  }
  for (worker_out **p = &out_paused; *p; p = &(*p)->next_paused)
    if (*p == s) {
      *p = s->next_paused;
      break;
    }
  rd__wlog_close(&s->file);
  free(s);
}

int rd__node_output_deliver(const Rd__WorkerOutput *m) {
  node_client *c = rd__node_client_by_id(m->driver);
  if (!c || c->role != ROLE_DRIVER) return 0;
  if (c->no_output) return 1;
  if (c->conn.wbuf.len - c->conn.wbuf.off > RD_OUT_DRIVER_BACKLOG) {
    c->output_dropped += m->data.len;
    return 1;
  }
  Rd__WorkerOutput o = *m;
  o.dropped = c->output_dropped;
  c->output_dropped = 0;
  send_msg(c, RD__MSG_TYPE__MSG_WORKER_OUTPUT, &o.base, -1);
  return 1;
}

/* Lines data[0..len) of stream s (the last one may lack its newline): to
 * the node's log and its driver. */
static void out_emit(worker_out *s, const char *data, size_t len) {
  if (s->file.fd >= 0) {
    rd__wlog_write(&s->file, data, len);
    if (s->file.gen != s->gen) tl_rotated(s);
  } else {
    char prefix[32];
    snprintf(prefix, sizeof(prefix), "(pid=%d) ", s->pid);
    rd__print_lines(s->which == 2 ? stderr : stdout, prefix, data, len);
  }
  if (s->w) s->driver = s->w->driver;
  if (!s->driver) return;
  Rd__WorkerOutput m = RD__WORKER_OUTPUT__INIT;
  m.pid = s->pid;
  m.ip = rd__cluster_on() ? (char *)rd__cluster_ip() : "";   /* none on an embedded node: "(NAME pid=N)" */
  m.stream = (uint32_t)s->which;
  m.data.data = (uint8_t *)data;
  m.data.len = len;
  m.driver = s->driver;
  m.name = s->name;
  uint32_t node = rd__client_node(s->driver);
  if (node == rd__cluster_index() || node == 0) (void)rd__node_output_deliver(&m);
  else rd__cluster_send_output(node, &m);
}

static void out_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b) {
  (void)suggested;
  worker_out *s = h->data;
  b->base = s->buf + s->len;
  b->len = sizeof(s->buf) - s->len;
  s->offered = b->len;
}

/* How many of the last bytes of p[0..n) may be the first of a mark (a
 * prefix of RD_TASK_MARK shorter than it, whose rest comes with the next
 * read): 0 to RD_TASK_MARK_LEN - 1. */
static size_t mark_tail(const char *p, size_t n) {
  for (size_t k = RD_TASK_MARK_LEN - 1; k > 0; k--)
    if (n >= k && !memcmp(p + n - k, RD_TASK_MARK, k)) return k;
  return 0;
}

/* Where a mark that may not be whole yet begins at the end of p[0..n)
 * (the last RD_TASK_MARK there with no newline after it, or the first
 * bytes of one): n when none does. */
static size_t mark_pending(const char *p, size_t n) {
  const char *mk = NULL, *q = p + (n > RD_TASK_MARK_MAX ? n - RD_TASK_MARK_MAX : 0);
  for (; (q = memmem(q, (size_t)(p + n - q), RD_TASK_MARK, RD_TASK_MARK_LEN)); q++) mk = q;
  if (mk && !memchr(mk, '\n', (size_t)(p + n - mk))) return (size_t)(mk - p);
  return n - mark_tail(p, n);
}

/* n more bytes came into s->buf: its marks taken, its whole lines out. */
static void out_got(worker_out *s, size_t n) {
  s->len += n;
  size_t used = 0, from = 0;   /* bytes of buf handled; where the next mark is looked for */
  for (;;) {   /* the worker's marks: what came before each is the earlier task's, even a part of a line */
    char *mk = memmem(s->buf + from, s->len - from, RD_TASK_MARK, RD_TASK_MARK_LEN);
    if (!mk) break;
    char *nl = memchr(mk, '\n', (size_t)(s->buf + s->len - mk));
    if (!nl && s->buf + s->len - mk < RD_TASK_MARK_MAX) {   /* the rest of it comes with the next read */
      /* the whole lines before it go now; a part of a line before it waits
       * with it (if it is no mark, it is the middle of that line), unless
       * the buffer would then have no room for the rest of the mark */
      char *cut = mk;
      while (cut > s->buf + used && cut[-1] != '\n') cut--;
      if ((size_t)(s->buf + s->len - cut) > sizeof(s->buf) - RD_TASK_MARK_MAX) cut = mk;
      if (cut > s->buf + used) out_emit(s, s->buf + used, (size_t)(cut - (s->buf + used)));
      used = (size_t)(cut - s->buf);
      goto keep;
    }
    out_mark_t m;
    if (!nl || nl - mk > RD_TASK_MARK_MAX ||
        !mark_parse(mk + RD_TASK_MARK_LEN, (size_t)(nl - mk) - RD_TASK_MARK_LEN, &m)) {
      from = (size_t)(mk + 1 - s->buf);   /* only looks like one: output, with its line */
      continue;
    }
    if (mk > s->buf + used) out_emit(s, s->buf + used, (size_t)(mk - (s->buf + used)));
    out_mark(s, &m);
    used = from = (size_t)(nl + 1 - s->buf);
  }
  {
    char *rest = s->buf + used, *last = NULL;   /* the end of the last whole line */
    for (size_t k = s->len; k > used && !last; k--)
      if (s->buf[k - 1] == '\n') last = s->buf + k;
    if (!last && s->len - used == sizeof(s->buf))   /* a line longer than buf: cut, before a mark's first bytes */
      last = rest + mark_pending(rest, s->len - used);
    if (last) {
      out_emit(s, rest, (size_t)(last - rest));
      used = (size_t)(last - s->buf);
    }
  }
keep:
  memmove(s->buf, s->buf + used, s->len - used);
  s->len -= used;
  if (used) flush_all();
}

static void out_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b) {
  (void)b;
  worker_out *s = st->data;
  if (n < 0) {   /* the end (or an error): what is left, as a line */
    if (s->len) out_emit(s, s->buf, s->len);
    s->len = 0;
    if (s->w) s->w->out[s->which - 1] = NULL;
    uv_close((uv_handle_t *)&s->pipe, out_closed);
    flush_all();
    return;
  }
  int full = (size_t)n == s->offered;   /* the pipe may hold more: read on (libuv does, at once) */
  out_got(s, (size_t)n);
  if (full) return;
  uint64_t now = rd__now_ns();
  if (now - s->read_ns < RD_OUT_REST_MS * 1000000ull) out_rest(s);   /* reads come fast: the next one rests */
  s->read_ns = now;
}

/* What stream s holds now, read (its reads may be resting): at most 64
 * reads, so that a worker writing without end cannot hold the node. */
static void out_drain_stream(worker_out *s) {
  uv_os_fd_t fd;
  if (!s || uv_is_closing((uv_handle_t *)&s->pipe) || uv_fileno((uv_handle_t *)&s->pipe, &fd) != 0) return;
  for (int k = 0; k < 64 && s->len < sizeof(s->buf); k++) {
    ssize_t r = read(fd, s->buf + s->len, sizeof(s->buf) - s->len);
    if (r <= 0) break;   /* nothing more now (or the end, which its reader sees) */
    out_got(s, (size_t)r);
  }
}

/* What w wrote so far, read now: before it works for another driver, its
 * lines go to the one it worked for. */
static void out_drain(node_worker *w) {
  for (int i = 0; i < 2; i++) out_drain_stream(w->out[i]);
}

/* What every worker wrote for driver so far (NodeInfo.drain_output), read
 * and sent to it now: a driver asks before it stops, so that the lines its
 * tasks printed before they returned reach it (they may wait in a pipe
 * while its reads rest). */
static void out_drain_for(uint32_t driver) {
  for (worker_out *s = out_all; s; s = s->next_all) {
    if ((s->w ? s->w->driver : s->driver) != driver) continue;
    out_drain_stream(s);
    /* a last line without its newline: the driver's, as at a worker's end
     * (not what may begin a mark: out_got kept it, whole or in part) */
    size_t line = mark_pending(s->buf, s->len);
    if (line) {
      out_emit(s, s->buf, line);
      memmove(s->buf, s->buf + line, s->len - line);
      s->len -= line;
    }
  }
}

/* w now works for driver: what it wrote for the one before goes to that one first. */
static void worker_set_driver(node_worker *w, uint32_t driver) {
  if (w->driver != driver) out_drain(w);
  w->driver = driver;
}

/* A pipe for stream `which` of a worker about to start; NULL without memory. */
static worker_out *out_new(node_worker *w, int which) {
  worker_out *s = calloc(1, sizeof(*s));
  if (!s) return NULL;
  if (uv_pipe_init(N.loop, &s->pipe, 0) != 0) {
    free(s);
    return NULL;
  }
  s->pipe.data = s;
  s->w = w;
  s->wid = w->id;
  s->job = w->job->id;
  s->which = which;
  s->file.fd = -1;
  s->next_all = out_all;
  if (out_all) out_all->pprev_all = &s->next_all;
  s->pprev_all = &out_all;
  out_all = s;
  return s;
}

static void worker_free(uv_handle_t *h) {
  node_worker *w = h->data;
  for (int i = 0; i < 2; i++)
    if (w->out[i]) {   /* read to its end on its own, for the driver it worked for last */
      if (w->driver) w->out[i]->driver = w->driver;
      w->out[i]->w = NULL;
    }
  free(w->callers);
  free(w);
}

/* The kernel's OOM kills since boot (/proc/vmstat's oom_kill: the whole
 * machine's, a cgroup's kills included); 0 when it cannot be read. */
static uint64_t kernel_oom_kills(void) {
  FILE *f = fopen("/proc/vmstat", "r");
  if (!f) return 0;
  char line[128];
  unsigned long long v = 0;
  while (fgets(line, sizeof(line), f))
    if (sscanf(line, "oom_kill %llu", &v) == 1) break;
  fclose(f);
  return v;
}

/* Killed by SIGKILL while the kernel's OOM killer was at work (it killed
 * processes since w started): most likely by it, said so into buf ("most
 * likely by the kernel's OOM killer (...)"), for the owner's word and the
 * node's record alike.  Its victims are not named anywhere a process can
 * read but the kernel's log. */
static int oom_killed(const node_worker *w, int sig, char *buf, size_t len) {
  if (sig != SIGKILL) return 0;
  uint64_t k = kernel_oom_kills(), n = k > w->oom_base ? k - w->oom_base : 0;
  if (!n) return 0;
  snprintf(buf, len, "most likely by the kernel's OOM killer (it killed %llu process%s for memory while this "
           "worker ran; dmesg names them)", (unsigned long long)n, n == 1 ? "" : "es");
  return 1;
}

/* How w ended (status, sig), for its lease's owner and its actor's
 * callers, who say it in place of "died" ("worker process (pid 7) was
 * killed by SIGKILL, ... while running task 'f'"): the memory monitor's
 * kill and the node's own stops say so, a SIGKILL from outside names the
 * kernel's OOM killer when it was at work.  A crash the worker reported
 * itself ("died of SIGSEGV ...", src/stack.c) reaches its owner first and
 * stands. */
static void exit_word(const node_worker *w, int64_t status, int sig, char *buf, size_t len) {
  char oom[200];
  const char *abbrev = sig ? sigabbrev_np(sig) : NULL;
  const char *stop = w->stop_why;
  if (stop && !strncmp(stop, "stopped by the node: ", 21)) stop += 21;
  if (w->kill_why[0])
    snprintf(buf, len, "was %s", w->kill_why);
  else if ((w->node_kill || w->stop_why) && (sig == SIGKILL || (!sig && !status)))
    snprintf(buf, len, "was stopped by its node%s%s", stop ? ": " : "", stop ? stop : "");
  else if (oom_killed(w, sig, oom, sizeof(oom)))
    snprintf(buf, len, "was killed by SIGKILL, %s", oom);
  else if (sig == SIGKILL)
    snprintf(buf, len, "was killed by SIGKILL, not by raydist (a kill -9, or the kernel)");
  else if (sig)
    snprintf(buf, len, "was killed by SIG%s (%s; its stderr may say why)", abbrev ? abbrev : "?", strsignal(sig));
  else
    snprintf(buf, len, "exited with status %lld (its stderr may say why)", (long long)status);
}

/* w's lease's owner is told why w goes (LeaseLost, or the bridged
 * socket's close for an owner on another node): it waits for that word
 * when the lease's socket breaks mid-task (client.c).  worker_tell: `word`
 * to its lease's owner, and to the callers of the actor it ran, once;
 * not to the owner of a lease the node ended (told by whoever stopped it,
 * or given back) or the memory monitor's (told first). */
static void lease_owner_tell(node_worker *w, int status, const char *why) {
  node_client *o = w->lease_owner;
  if (!o || o->dead) return;
  if (o->role == ROLE_LINK) {
    rd__cluster_worker_word(w, why);
    return;
  }
  Rd__LeaseLost m = RD__LEASE_LOST__INIT;
  m.lease_id = w->lease_id;
  m.status = status;
  m.error = (char *)why;
  send_msg(o, RD__MSG_TYPE__MSG_LEASE_LOST, &m.base, -1);
}

static void worker_tell(node_worker *w, const char *word) {
  if (w->told_exit || N.shutting_down) return;
  if (w->state == W_LEASED && !w->actor && !w->kill_why[0]) {
    w->told_exit = 1;
    lease_owner_tell(w, RD_EWORKER_DIED, word);
  }
  if (w->last_actor) rd__cluster_worker_word(w, word);   /* its callers on other nodes */
  if (!w->ncallers) return;
  /* the callers here of the actor it ran: those with a call running say
   * how it ended in place of "died" */
  w->told_exit = 1;
  Rd__LeaseLost m = RD__LEASE_LOST__INIT;
  m.status = RD_EWORKER_DIED;
  m.error = (char *)word;
  m.actor_id = w->last_actor;
  m.worker_pid = w->pid;
  for (uint32_t i = 0; i < w->ncallers; i++) {
    node_client *c = rd__node_client_by_id(w->callers[i]);
    if (c && !c->dead) send_msg(c, RD__MSG_TYPE__MSG_LEASE_LOST, &m.base, -1);
  }
}

/* c was given a socket to the actor w runs (a link's bridged callers are
 * told by the socket's close). */
static void worker_add_caller(node_worker *w, const node_client *c) {
  if (c->role == ROLE_LINK) return;
  for (uint32_t i = 0; i < w->ncallers; i++)
    if (w->callers[i] == c->id) return;
  if (w->ncallers == w->callers_cap) {
    uint32_t cap = w->callers_cap ? 2 * w->callers_cap : 8;
    uint32_t *p = realloc(w->callers, cap * sizeof(*p));
    if (!p) return;   /* that caller says "died" */
    w->callers = p;
    w->callers_cap = cap;
  }
  w->callers[w->ncallers++] = c->id;
}

/* Ray's WorkerExitType names, as raydist_workers_exited_total counts them. */
static const char *const exit_types[5] = {"INTENDED_USER_EXIT", "INTENDED_SYSTEM_EXIT", "USER_ERROR", "SYSTEM_ERROR",
                                          "NODE_OUT_OF_MEMORY"};

/* A worker that crashed or that the memory monitor killed is a cluster
 * event (the others exited as they or the node meant to). */
static void exited_event(const node_exited *e) {
  int oom = !strcmp(e->type, "NODE_OUT_OF_MEMORY");
  if (N.shutting_down || (!oom && strcmp(e->type, "SYSTEM_ERROR") != 0)) return;
  char job[16], actor[20], worker[16];
  snprintf(job, sizeof(job), "%u", e->gcs_job);
  snprintf(actor, sizeof(actor), "%016" PRIx64, e->actor);
  snprintf(worker, sizeof(worker), "%08x", e->id);
  const char *kv[] = {"exit_type", e->type, "worker_id", worker, "job_id", e->gcs_job ? job : "",
                      e->actor ? "actor_id" : NULL, actor, NULL};
  rd__cluster_event("RAYLET", "ERROR", e->pid, kv, "Worker %u (pid %d%s%s%s%s) %s%s.", e->id, e->pid,
                    e->gcs_job ? ", job " : "", e->gcs_job ? job : "", e->actor ? ", actor " : "",
                    e->actor ? actor : "", oom ? "was " : "died unexpectedly: ", e->detail);
}
/* A worker of j failed to start (short: for want of files, processes or
 * memory, which may pass): counted in a row, and said in the log at most
 * every 5 s (spawn_said_ns equals spawn_fail_ns when it is to be said). */
static void spawn_failed(node_job *j, int short_) {
  const uint64_t now = rd__now_ns();
  j->spawn_failures++;
  j->spawn_short = short_;
  j->spawn_fail_ns = now;
  if (!j->spawn_said_ns || now - j->spawn_said_ns >= 5000000000ull) j->spawn_said_ns = now;
}

/* w exited: kept among the last N.exited_max, with Ray's exit type and why
 * (and a cluster event when it crashed). */
static void exited_keep(const node_worker *w, int64_t status, int sig) {
  node_exited x, *e = &x;
  *e = (node_exited){.id = w->id, .job = w->job->id, .gcs_job = w->gcs_job, .pid = w->pid,
                     .actor = w->last_actor, .launch_ms = w->launch_ms, .joined_ms = w->joined_ms,
                     .end_ms = rd__wall_ms()};
  if (w->kill_why[0]) {
    e->type = "NODE_OUT_OF_MEMORY";
    snprintf(e->detail, sizeof(e->detail), "%s", w->kill_why);
  } else if (sig && (sig != SIGKILL || !(w->stop_why || N.shutting_down))) {
    e->type = "SYSTEM_ERROR";   /* a crash, or a kill from outside the node: what Ray calls a system error */
    char oom[200];
    if (oom_killed(w, sig, oom, sizeof(oom)))
      snprintf(e->detail, sizeof(e->detail), "killed by signal 9 (Killed), %s", oom);
    else
      snprintf(e->detail, sizeof(e->detail), "killed by signal %d (%s)%s", sig, strsignal(sig),
               w->stop_why ? "" : "; the last lines of its stderr may say why (raydist logs worker --err)");
  } else if (w->stop_why || N.shutting_down) {
    e->type = w->stop_user ? "INTENDED_USER_EXIT" : "INTENDED_SYSTEM_EXIT";
    snprintf(e->detail, sizeof(e->detail), "%s", w->stop_why ? w->stop_why : "stopped with its node");
  } else if (status != 0) {
    e->type = "USER_ERROR";
    snprintf(e->detail, sizeof(e->detail), "exited with status %lld%s", (long long)status,
             w->state == W_STARTING ? " before it joined the node" : "");
  } else {
    e->type = "INTENDED_USER_EXIT";
    snprintf(e->detail, sizeof(e->detail), "exited with status 0%s", w->last_actor ? " (its actor exited)" : "");
  }
  for (int k = 0; k < 5; k++) N.exits[k] += !strcmp(e->type, exit_types[k]);
  exited_event(e);
  if (!N.exited_max) return;
  if (!N.exited && !(N.exited = calloc(N.exited_max, sizeof(*N.exited)))) return;
  e = &N.exited[N.exited_next];
  /* the oldest makes room: its files go with it, so that a node whose
   * workers come and go (max_calls, idle ones stopped) keeps the files of
   * its live workers and of its last exited_max exited ones, no more */
  if (N.nexited == N.exited_max && N.worker_files) rd__wlog_remove(N.opts.session_dir, e->id, e->job, e->pid);
  N.exited_next = (N.exited_next + 1) % N.exited_max;
  if (N.nexited < N.exited_max) N.nexited++;
  *e = x;
}

static void worker_on_exit(uv_process_t *p, int64_t status, int sig) {
  node_worker *w = p->data;
  node_job *j = w->job;
  exited_keep(w, status, sig);
  /* expected exits (shutdown, a kill we asked for, a clean exit) are not warnings */
  int expected = N.shutting_down || w->state == W_DYING || (status == 0 && sig == 0);
  rd__log(expected ? RD_LOG_INFO : RD_LOG_WARN, "worker %u (pid %d) exited status %lld signal %d", w->id, w->pid,
          (long long)status, sig);
  char word[400];   /* how it ended, for its owner and its actor's callers */
  exit_word(w, status, sig, word, sizeof(word));
  worker_tell(w, word);
  if (w->state == W_LEASED) rd__node_worker_release(w);
  if (w->state == W_STARTING && !N.shutting_down) {
    /* it never joined: the job's executable does not run as a worker here
     * (it crashes or exits first); 3 in a row stop the respawning */
    const int refused = rd__wall_ms() - N.refused_ms < 15000;   /* its connection refused, likely: out of files */
    spawn_failed(j, refused);
    if (refused)
      snprintf(j->spawn_error, sizeof(j->spawn_error), "%s",
               rd__node_sys_error("the node cannot take its workers' connections", EMFILE));
    else if (sig)
      snprintf(j->spawn_error, sizeof(j->spawn_error), "workers started from %s die before joining the node "
               "(the last one was killed by signal %d)", j->exe, sig);
    else
      snprintf(j->spawn_error, sizeof(j->spawn_error), "workers started from %s exit before joining the node "
               "(the last one with status %lld)", j->exe, (long long)status);
  }
  rd__node_worker_state(w, W_DEAD);
  if (w->evicted) N.nevicting--;
  if (w->actor) {
    char why[460];
    if (sig || status)   /* a memory monitor's kill among them */
      snprintf(why, sizeof(why), "its worker process (pid %d) %s", w->pid, word);
    else
      snprintf(why, sizeof(why), "its worker process (pid %d) exited with status 0", w->pid);
    actor_worker_gone(w->actor, why);
  }
  if (w->client) {
    w->client->worker = NULL;
    client_drop(w->client, "worker exited");
  }
  for (node_worker **pp = &N.workers; *pp; pp = &(*pp)->next) {
    if (*pp == w) { *pp = w->next; break; }
  }
  N.nworkers--;
  j->nworkers--;
  rd__cluster_worker_gone(w);
  uv_close((uv_handle_t *)p, worker_free);
  if (!N.shutting_down) {
    if (j->drivers > 0 && j->nworkers < N.opts.prestart && j->spawn_failures == 0) worker_spawn(j);
    dispatch();
    flush_all();
  }
}

/* Does `set` (a job variant's variables) set the variable of entry v? */
static int env_sets(const node_env *set, const char *v) {
  for (size_t i = 0; set && i < set->n; i++)
    if (rd__env_same_name(set->vars[i], v)) return 1;
  return 0;
}

/* The worker's environment: the node's, less what the runtime sets for each
 * worker, with the job variant's variables (jenv) in place of the node's
 * and their names in RAYDIST_ENV_VARS.  The strings it made are in
 * owned[] (NULL-ended), for env_free. */
#define WORKER_ENV_OWNED 5
static char **build_worker_env(uint32_t wid, const node_env *jenv, int marks, char *owned[WORKER_ENV_OWNED + 1]) {
  size_t n = 0;
  while (environ[n]) n++;
  char **env = calloc(n + (jenv ? jenv->n : 0) + 8, sizeof(char *));
  if (!env) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "RAYDIST_WORKER", 14) != 0 && strncmp(environ[i], "RAYDIST_SESSION=", 16) != 0 &&
        strncmp(environ[i], "RAYDIST_NODE_PID=", 17) != 0 && strncmp(environ[i], "RAYDIST_CLUSTER_TOKEN=", 22) != 0 &&
        strncmp(environ[i], "RAYDIST_ENV_VARS=", 17) != 0 && !env_sets(jenv, environ[i]))
      env[k++] = environ[i];
  for (size_t i = 0; jenv && i < jenv->n; i++) env[k++] = jenv->vars[i];
  /* its names, which the worker's library takes as its own set, inherited
   * by the tasks and actors it makes (src/client.c's own_env_load) */
  char *names = jenv && jenv->n ? rd__env_names("RAYDIST_ENV_VARS=", (const char *const *)jenv->vars, jenv->n) : NULL;
  if (jenv && jenv->n && !names) {
    free(env);
    return NULL;
  }
  if (names) env[k++] = names;
  char *a = NULL, *b = NULL, *c = NULL, *d = NULL;   /* with names, the WORKER_ENV_OWNED strings made here */
  const char *tok = rd__cluster_token();
  if (asprintf(&a, "RAYDIST_WORKER_ID=%u", wid) < 0) a = NULL;
  if (asprintf(&b, "RAYDIST_SESSION=%s", N.opts.session_dir) < 0) b = NULL;
  if (asprintf(&c, "RAYDIST_NODE_PID=%d", (int)getpid()) < 0) c = NULL;
  if (asprintf(&d, "RAYDIST_CLUSTER_TOKEN=%s", tok ? tok : "") < 0) d = NULL;
  env[k++] = a;
  env[k++] = b;
  env[k++] = c;
  env[k++] = d;
  if (marks) env[k++] = "RAYDIST_WORKER_TASK_MARKS=1";   /* its output comes through the node's pipes */
  env[k] = NULL;
  if (!a || !b || !c || !d) {
    free(a); free(b); free(c); free(d); free(names); free(env);
    return NULL;
  }
  size_t o = 0;
  char *made[] = {a, b, c, d, names};
  for (size_t i = 0; i < WORKER_ENV_OWNED; i++)
    if (made[i]) owned[o++] = made[i];
  owned[o] = NULL;
  return env;
}

/* At the pool's limit, stop one idle worker of another job to make room for
 * job j's (its exit lets dispatch start j's), unless one is already on its
 * way out. */
static void evict_for(node_job *j) {
  if (N.nevicting > 0) return;
  node_worker *victim = NULL;
  for (node_worker *w = N.workers; w; w = w->next) {
    if (w->state != W_IDLE || w->job == j) continue;
    /* a job nobody here drives goes first */
    if (!victim || (rd__job_base(victim->job)->drivers > 0 && rd__job_base(w->job)->drivers == 0)) victim = w;
  }
  if (!victim) return;
  rd__log(RD_LOG_INFO, "stopping idle worker %u of job %u to make room for job %u", victim->id, victim->job->id, j->id);
  rd__node_worker_state(victim, W_DYING);
  victim->stop_why = "stopped by the node to make room for another job's workers";
  victim->evicted = 1;
  N.nevicting++;
  if (victim->pid > 0) kill(victim->pid, SIGKILL);
}

const char *rd__node_sys_error(const char *what, int err) {
  static char buf[300];   /* the loop's thread alone */
  rd__sys_error(buf, sizeof(buf), what, err, "the node");
  return buf;
}

static void worker_spawn(node_job *j) {
  /* max_workers bounds the task pool; each actor is a process of its own
   * on top, and so is each task worker waiting for its own tasks (blocked):
   * a tree of nested tasks with more parents waiting at once than
   * max_workers runs rather than waiting for ever, as in Ray (a worker is
   * started for the children; the extra workers go once idle) */
  int want_actors = 0;
  for (node_job *x = N.jobs; x; x = x->next) want_actors += x->want_actors;
  int limit = N.opts.max_workers + N.nactor_workers + want_actors + N.nblocked;
  if (limit > RD_NODE_MAX_PROCS) limit = RD_NODE_MAX_PROCS;
  if (!j || N.shutting_down) return;
  if (N.nworkers >= limit) {
    evict_for(j);
    return;
  }
  node_worker *w = calloc(1, sizeof(*w));
  if (!w) return;
  w->id = ++N.next_worker_id;
  w->job = j;
  w->launch_ms = rd__wall_ms();
  w->oom_base = kernel_oom_kills();
  char *owned[WORKER_ENV_OWNED + 1];
  static int marks = -1;   /* RAYDIST_RECORD_TASK_LOGGING=0: the workers mark no task (see task ranges) */
  if (marks < 0) {
    const char *v = getenv("RAYDIST_RECORD_TASK_LOGGING");
    marks = !(v && !strcmp(v, "0"));
  }
  char **env = build_worker_env(w->id, j->env, marks, owned);
  if (!env) { free(w); return; }
  uv_process_options_t o;
  memset(&o, 0, sizeof(o));
  uv_stdio_container_t stdio[3];
  stdio[0].flags = UV_IGNORE;
  stdio[1].flags = UV_INHERIT_FD;
  stdio[1].data.fd = 1;
  stdio[2].flags = UV_INHERIT_FD;
  stdio[2].data.fd = 2;
  /* read by the node (its files, and the driver's terminal) through pipes
   * of its own making: libuv's UV_CREATE_PIPE is a socketpair, whose every
   * write costs the worker a socket buffer (a task mark each task: 3x the
   * cost of a small task, against a pipe's plain copy) */
  int rd_end[2] = {-1, -1}, wr_end[2] = {-1, -1};
  for (int i = 0; i < 2; i++) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) continue;   /* inherited: it writes to the node's own stream */
    if (!(w->out[i] = out_new(w, i + 1))) {
      close(p[0]);
      close(p[1]);
      continue;
    }
    (void)fcntl(p[1], F_SETPIPE_SZ, 256 << 10);   /* room for a worker's burst while the node's reads rest */
    rd_end[i] = p[0];
    wr_end[i] = p[1];
    stdio[i + 1].flags = UV_INHERIT_FD;
    stdio[i + 1].data.fd = p[1];
  }
  o.file = j->exe;
  o.args = j->argv;
  o.env = env;
  o.stdio = stdio;
  o.stdio_count = 3;
  o.exit_cb = worker_on_exit;
  w->proc.data = w;
  int r = uv_spawn(N.loop, &w->proc, &o);
  for (char **e = owned; *e; e++) free(*e);
  free(env);
  for (int i = 0; i < 2; i++) {
    if (!w->out[i]) continue;
    close(wr_end[i]);   /* the worker's now */
    int opened = uv_pipe_open(&w->out[i]->pipe, rd_end[i]) == 0;
    if (!opened) close(rd_end[i]);
    if (r == 0 && opened && uv_read_start((uv_stream_t *)&w->out[i]->pipe, out_alloc, out_read) == 0) {
      worker_out *s = w->out[i];
      s->pid = w->proc.pid;
      if (N.worker_files && rd__wlog_open(&s->file, N.opts.session_dir, w->id, j->id, s->pid, s->which) != 0)
        rd__log(RD_LOG_WARN, "cannot keep worker %u's %s in %s: %s (its lines go to the node's log)", w->id,
                s->which == 2 ? "stderr" : "stdout", s->file.path, strerror(errno));
      continue;
    }
    uv_close((uv_handle_t *)&w->out[i]->pipe, out_closed);
    w->out[i] = NULL;
  }
  if (r != 0) {
    char what[300];
    snprintf(what, sizeof(what), "the node cannot start workers from %s", j->exe);
    snprintf(j->spawn_error, sizeof(j->spawn_error), "%s", rd__node_sys_error(what, -r));   /* and the limit to raise */
    spawn_failed(j, rd__errno_passing(-r) || -r == EAGAIN);
    if (j->spawn_said_ns == j->spawn_fail_ns) rd__log(RD_LOG_ERROR, "%s", j->spawn_error);
    uv_close((uv_handle_t *)&w->proc, worker_free);   /* libuv keeps a failed handle until closed */
    return;
  }
  w->pid = w->proc.pid;
  w->state = W_DEAD;   /* counted from here on */
  rd__node_worker_state(w, W_STARTING);
  w->next = N.workers;
  N.workers = w;
  N.nworkers++;
  j->nworkers++;
  rd__log(RD_LOG_INFO, "started worker %u pid %d (job %u)", w->id, w->pid, j->id);
}

/* ------------------------------------------------------------- leases */

static node_worker *pick_idle_worker(const rd_res_grant *g, const node_job *j) {
  char vis[64];
  rd_res_grant_visible_devices(g, vis, sizeof(vis));
  node_worker *fallback = NULL, *fresh = NULL;
  for (node_worker *w = N.workers; w; w = w->next) {
    if (w->state != W_IDLE || !w->client || w->job != j) continue;
    if (strcmp(w->visible, vis) == 0) return w;   /* same GPUs as last time */
    if (!w->visible[0] && !fresh) fresh = w;
    if (!fallback) fallback = w;
  }
  return fresh ? fresh : fallback;
}

/* What one dispatch pass over a queue would leave of its ledger: a copy,
 * from which can_run takes the requests that wait for a worker and granted
 * the grants, so that `want` counts the requests that fit together, not
 * each one that fits alone (a burst of 1000 one-CPU requests on a 2-CPU
 * node with no worker started max_workers workers, for two CPUs). */
static rd_res_ledger pass_room;

/* A request may be granted only with an idle worker; one that would fit the
 * resources now but finds no worker counts toward growing the pool. */
static int can_run(rd_sched_item *it, void *ctx) {
  lease_req *r = it->data;
  (void)ctx;
  if (r->job->nidle > 0) return 1;
  rd_res_grant g;
  if (rd_res_acquire(&pass_room, &it->req, &g) == 0) {
    r->job->want++;
    if (r->actor) r->job->want_actors++;
  }
  return 0;
}

/* An idle worker takes a grant (for a lease or an actor). */
static void worker_take(node_worker *w, const rd_res_grant *g) {
  rd__node_worker_state(w, W_LEASED);
  w->grant = *g;
  w->yield_asked = 0;
  rd_res_grant_visible_devices(g, w->visible, sizeof(w->visible));
}


/* A grant's GPUs in message form; valid while *gm lives. */
typedef struct grant_msg {
  int32_t ids[RD_RES_MAX_GPUS];
  int64_t shares[RD_RES_MAX_GPUS];
  size_t n;
  uint64_t memory;          /* the GPU memory budget of the shares (0: unknown) */
} grant_msg;

static void grant_to_msg(const rd_res_grant *g, grant_msg *gm) {
  gm->n = (size_t)g->ngpus;
  gm->memory = 0;
  int known = 1;
  for (int i = 0; i < g->ngpus; i++) {
    gm->ids[i] = g->gpu_ids[i];
    gm->shares[i] = g->gpu_share[i];
    uint64_t mem = g->gpu_ids[i] >= 0 && g->gpu_ids[i] < RD_RES_MAX_GPUS ? N.gpu_mem[g->gpu_ids[i]] : 0;
    if (!mem) known = 0;
    gm->memory += (uint64_t)((double)mem * (double)g->gpu_share[i] / RD_RES_UNIT);
  }
  if (!known) gm->memory = 0;   /* a budget for part of the grant would mislead */
}

static int sockpair_errno;   /* why lease_assign's last socketpair failed */

/* Lease idle worker w to `owner`: the worker gets one end of a fresh
 * socketpair with LeaseAssign, *owner_fd the other.  RD_ESYS when no
 * socketpair could be made (nothing changed then). */
static int lease_assign(node_worker *w, const rd_res_grant *g, node_client *owner, int *owner_fd) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    sockpair_errno = errno;   /* for the grant's error (rd__node_grant_error) */
    return RD_ESYS;
  }
  worker_take(w, g);
  w->lease_owner = owner;
  w->lease_id = ((uint64_t)w->id << 32) | (++N.next_lease_seq & 0xffffffffu);
  N.leases_granted++;
  Rd__LeaseAssign la = RD__LEASE_ASSIGN__INIT;
  grant_msg gm;
  grant_to_msg(g, &gm);
  la.lease_id = w->lease_id;
  la.owner = owner->id;
  la.n_gpu_ids = la.n_gpu_shares = gm.n;
  la.gpu_ids = gm.ids;
  la.gpu_shares = gm.shares;
  la.visible_devices = w->visible;
  la.gpu_memory = gm.memory;
  send_msg(w->client, RD__MSG_TYPE__MSG_LEASE_ASSIGN, &la.base, sv[0]);
  *owner_fd = sv[1];
  return 0;
}

/* The ledger w's grant came from: its bundle's, or the node's. */
static rd_res_ledger *worker_ledger(const node_worker *w) { return w->bundle ? &w->bundle->ledger : &N.ledger; }

/* What w's grant holds goes back to the ledger it came from; a bundle being
 * removed is given back to the node once its last user is gone. */
void rd__node_worker_release(node_worker *w) {
  node_bundle *b = w->bundle;
  if (w->blocked) {
    rd_res_retake_cpu(worker_ledger(w), &w->grant);
    N.nblocked--;
  }
  w->blocked = 0;
  rd_res_release(worker_ledger(w), &w->grant);
  memset(&w->grant, 0, sizeof(w->grant));
  w->bundle = NULL;
  if (b) {
    b->users--;
    if (b->removed == 2 && b->users == 0) rd__node_bundle_drop(b, NULL);
  } else {
    rd__pg_kick();   /* a group waiting for room may fit now */
  }
}

/* Remove bundle b: what waits in it fails with RD_EPG_REMOVED (why), what
 * runs in it is killed (actors for good), and its share of the node's
 * ledger comes back once the last of those workers is gone.  b is freed
 * then, possibly before this returns.  Callers dispatch afterwards. */
void rd__node_bundle_drop(node_bundle *b, const char *why) {
  if (!b->removed) {
    b->removed = 1;   /* draining: releases below must not free b yet */
    fail_queue(&b->queue, RD_EPG_REMOVED, why);
    for (node_worker *w = N.workers; w; w = w->next) {
      if (w->bundle != b) continue;
      if (w->actor) {
        w->actor->no_restart = 1;
        actor_die(w->actor, why);
      } else if (w->state == W_LEASED) {
        lease_owner_tell(w, RD_EWORKER_DIED, "was stopped by its node: its placement group was removed");
        rd__node_worker_release(w);
        rd__node_worker_state(w, W_DYING);
        w->stop_why = "stopped by the node: its placement group was removed";
        w->lease_owner = NULL;
        if (w->pid > 0) kill(w->pid, SIGKILL);
      }
    }
    b->removed = 2;
  }
  if (b->users > 0) return;
  for (node_bundle **pp = &N.bundles; *pp; pp = &(*pp)->next)
    if (*pp == b) { *pp = b->next; break; }
  rd_res_release(&N.ledger, &b->grant);
  free(b);
  rd__pg_kick();
}

static void worker_bind_bundle(node_worker *w, node_bundle *b) {
  w->bundle = b;
  if (b) b->users++;
}

/* Takes r off its owner's list of requests (not off its queue). */
static void req_unlink(lease_req *r) {
  for (lease_req **pp = &r->owner->reqs; *pp; pp = &(*pp)->next)
    if (*pp == r) { *pp = r->next; break; }
}

/* ctx: the bundle whose queue is dispatched (NULL: the node's own). */
static void granted(rd_sched_item *it, const rd_res_grant *g, void *ctx) {
  rd_res_grant pg;
  (void)rd_res_acquire(&pass_room, &g->req, &pg);   /* may be taken by waiting ones already */
  node_bundle *b = ctx;
  rd_res_ledger *l = b ? &b->ledger : &N.ledger;
  lease_req *r = it->data;
  node_client *owner = r->owner;
  rd__log(RD_LOG_DEBUG, "grant request %llu of client %u", (unsigned long long)r->req_id, owner->id);
  req_unlink(r);
  node_worker *w = pick_idle_worker(g, r->job);
  if (r->actor) {
    node_actor *a = r->actor;
    a->req = NULL;
    free(r);
    if (!w) {   /* cannot happen (can_run saw an idle worker); place it again later */
      rd_res_release(l, g);
      return;
    }
    actor_place(a, w, g);
    worker_bind_bundle(w, b);
    return;
  }
  int fd = -1;
  int st = w ? lease_assign(w, g, owner, &fd) : RD_EAGAIN;
  if (st != 0) {
    rd_res_release(l, g);
  } else {
    worker_bind_bundle(w, b);
    w->lease_priority = r->item.priority;
    w->gcs_job = r->gcs_job;
    worker_set_driver(w, r->driver);
    w->granted_ns = rd__now_ns();
    uint64_t waited = w->granted_ns - r->queued_ns;
    N.lease_wait[rd__hist_bucket(waited)]++;
    N.lease_wait_n++;
    N.lease_wait_ns += waited;
  }
  if (owner->role == ROLE_LINK) {   /* a peer node's spillback request */
    rd__cluster_granted(r, w, st, fd);
    free(r);
    return;
  }
  Rd__LeaseGrant lg = RD__LEASE_GRANT__INIT;
  lg.req_id = r->req_id;
  lg.status = st;
  if (st != 0) {
    lg.error = (char *)rd__node_grant_error(st, w);
    lg.transient = rd__node_grant_passing(st, w);
  } else {
    lg.lease_id = w->lease_id;
    lg.worker_id = w->id;
    lg.worker_pid = w->pid;
    lg.node = rd__cluster_index();
  }
  send_msg(owner, RD__MSG_TYPE__MSG_LEASE_GRANT, &lg.base, fd);
  free(r);
}

/* Why a grant to worker w failed with status (w NULL: no worker at all). */
const char *rd__node_grant_error(int status, const node_worker *w) {
  if (status == RD_EAGAIN) return "no idle worker";
  return w ? rd__node_sys_error("socketpair failed on the node", sockpair_errno) : "no worker";
}

/* Is that failure one that may pass (the node out of files or memory)? */
int rd__node_grant_passing(int status, const node_worker *w) {
  return w && status == RD_ESYS && rd__errno_passing(sockpair_errno);
}

/* Fail what waits in q (only job j's requests when j is set): its bundle is
 * gone, or workers of the job cannot be started at all (its executable will
 * not run), so they fail with the reason instead of waiting forever. */
static void fail_queue_job(rd_sched_queue *q, int status, const char *why, const node_job *j, int elsewhere,
                           int passing) {
  for (rd_sched_item *it = q->head, *next; it; it = next) {
    next = it->next;
    lease_req *r = it->data;
    if (j && r->job != j) continue;
    rd_sched_queue_remove(q, &r->item);
    req_unlink(r);
    if (r->actor) {
      r->actor->req = NULL;
      actor_die(r->actor, why);
    } else if (elsewhere && !r->bundle && r->owner->role != ROLE_LINK) {
      /* a local owner asks again and is placed on another node (a peer's
       * request fails back to its node, which does the same) */
      char buf[460];
      snprintf(buf, sizeof(buf), "placed again: %s", why);
      rd__node_reply_grant(r->owner, r->req_id, RD_EAGAIN, buf);
    } else if (passing) {
      rd__node_reply_grant_passing(r->owner, r->req_id, status, why);
    } else {
      rd__node_reply_grant(r->owner, r->req_id, status, why);
    }
    free(r);
    next = q->head;   /* actor_die may have taken others out of q too */
  }
}

static void fail_queue(rd_sched_queue *q, int status, const char *why) { fail_queue_job(q, status, why, NULL, 0, 0); }

/* elsewhere: local owners' task leases are told to ask again instead;
 * passing: a shortage that may pass, so owners ask again after a backoff */
static void fail_job_queued(node_job *j, int status, const char *why, int elsewhere, int passing) {
  fail_queue_job(&N.queue, status, why, j, elsewhere, passing);
  for (node_bundle *b = N.bundles; b; b = b->next) fail_queue_job(&b->queue, status, why, j, 0, passing);
}

/* Workers of j that can take a task: alive or starting, and not an actor's. */
static int task_workers(const node_job *j) {
  int n = 0;
  for (const node_worker *w = N.workers; w; w = w->next)
    n += w->job == j && !w->actor && w->state != W_DYING && w->state != W_DEAD;
  return n;
}

/* A request of c (a client, or a peer node's link) failed before it was
 * queued, or while it waited. */
static void reply_grant(node_client *c, uint64_t req_id, int status, const char *err, int passing) {
  if (c->role == ROLE_LINK) {
    Rd__LinkGrant lg = RD__LINK_GRANT__INIT;
    lg.req_id = req_id;
    lg.status = status;
    lg.error = (char *)err;
    lg.transient = passing;
    send_msg(c, RD__MSG_TYPE__MSG_LINK_GRANT, &lg.base, -1);
    return;
  }
  Rd__LeaseGrant lg = RD__LEASE_GRANT__INIT;
  lg.req_id = req_id;
  lg.status = status;
  lg.error = (char *)err;
  lg.transient = passing;
  send_msg(c, RD__MSG_TYPE__MSG_LEASE_GRANT, &lg.base, -1);
}

void rd__node_reply_grant(node_client *c, uint64_t req_id, int status, const char *err) {
  reply_grant(c, req_id, status, err, 0);
}

/* ... with a failure that may pass (out of files or memory): the owner asks
 * again after a backoff instead of failing what waits */
void rd__node_reply_grant_passing(node_client *c, uint64_t req_id, int status, const char *err) {
  reply_grant(c, req_id, status, err, 1);
}

/* Queue a lease request of c (a client, or a peer's link) for the node's
 * own resources, or for bundle b's. */
void rd__node_lease_queue(node_client *c, uint64_t req_id, const rd_resources *res, int priority, node_bundle *b,
                          node_job *job, const node_env *env, uint32_t gcs_job, uint32_t driver, int replaceable,
                          const char *sel) {
  if (!job) job = rd__node_client_job(c);
  if (!job) {
    rd__node_reply_grant(c, req_id, RD_ESTATE, "this client has no job: its hello named no executable to run");
    return;
  }
  if (!(job = rd__node_job_variant(job, env))) {   /* its own workers, started with env */
    rd__node_reply_grant(c, req_id, RD_ENOMEM, "node out of memory");
    return;
  }
  lease_req *r = calloc(1, sizeof(*r));
  if (!r) {
    rd__node_reply_grant(c, req_id, RD_ENOMEM, "node out of memory");
    return;
  }
  r->job = job;
  r->gcs_job = gcs_job ? gcs_job : rd__node_client_gcs_job(c);
  r->driver = driver ? driver : rd__node_client_driver(c);
  r->item.req = *res;
  r->item.priority = priority;
  r->item.data = r;
  r->owner = c;
  r->req_id = req_id;
  r->bundle = b;
  r->replaceable = replaceable && !b;   /* a peer's request: LinkLease.movable */
  r->sel = sel;
  r->queued_ns = rd__now_ns();
  r->next = c->reqs;
  c->reqs = r;
  rd_sched_queue_push(req_queue(r), &r->item);
  dispatch();
}

/* Fail job j's actors queued in q that fit room (the ones that wait for a
 * worker, not for resources: can_run's count): no worker can be started
 * for them. */
static void fail_unstartable_in(rd_sched_queue *q, rd_res_ledger room, const node_job *j, const char *why) {
  for (rd_sched_item *it = q->head, *next; it; it = next) {
    next = it->next;
    lease_req *r = it->data;
    rd_res_grant g;
    if (!r->actor || r->job != j || rd_res_acquire(&room, &it->req, &g) != 0) continue;
    rd__log(RD_LOG_WARN, "actor %016llx (%s) fails: %s", (unsigned long long)r->actor->id, r->actor->cls, why);
    rd_sched_queue_remove(q, &r->item);
    req_unlink(r);
    r->actor->req = NULL;
    actor_die(r->actor, why);
    free(r);
    /* actor_die may have taken others out of q too: from the head again
     * (those passed over fit no better in what room is left) */
    next = q->head;
  }
}

static void fail_actors_unstartable(const node_job *j, const char *why) {
  fail_unstartable_in(&N.queue, N.ledger, j, why);
  for (node_bundle *b = N.bundles; b; b = b->next)
    if (b->committed && !b->removed) fail_unstartable_in(&b->queue, b->ledger, j, why);
}

static void dispatch(void) {
  if (N.shutting_down) return;
  for (node_job *j = N.jobs; j; j = j->next) j->want = j->want_actors = 0;
  rd__job_hold_dispatch();   /* jobs' drivers waiting for their resources first: they came earlier */
  rd__fair_order();
  pass_room = N.ledger;
  rd_sched_queue_dispatch(&N.queue, &N.ledger, can_run, granted, NULL);
  for (node_bundle *b = N.bundles; b; b = b->next)
    if (b->committed && !b->removed && b->queue.head) {
      pass_room = b->ledger;
      rd_sched_queue_dispatch(&b->queue, &b->ledger, can_run, granted, b);
    }
  rd__fair_yield();   /* before growing pools: it may want a worker for a job it makes room for */
  /* grow a job's pool when its requests wait for a worker rather than for resources */
  for (node_job *j = N.jobs; j; j = j->next) {
    while (j->spawn_failures < 3 && j->want > j->nstarting) {
      int before = N.nworkers;
      worker_spawn(j);
      if (N.nworkers == before) break;
    }
    /* its workers cannot be started (3 failures in a row) and none it has
     * can take a task (its actors' hold the node's files, say): what waits
     * fails, or, for a shortage that may pass, its owner asks again later */
    if (j->spawn_failures >= 3 && j->want > 0 && !task_workers(j)) {
      char why[400];
      snprintf(why, sizeof(why), "%s", j->spawn_error);
      j->spawn_failures = 0;   /* a later request tries again */
      if (j->spawn_said_ns == j->spawn_fail_ns)
        rd__cluster_event("RAYLET", "ERROR", 0, NULL, "Workers for %s cannot start on this node: %s; what waits for one "
                          "here fails, or goes to another node.", j->exe, why);
      /* in a cluster, other nodes may run it: this one is avoided for the job */
      fail_job_queued(j, RD_ESYS, why, rd__cluster_avoid(j, j->env, 0, why), j->spawn_short);
    } else if (j->spawn_failures >= 3 && j->want_actors > 0) {
      /* the job's workers run, but no more start (the node's open files,
       * processes or memory are spent, or they die before joining): a task
       * waits for one of those, but an actor needs a process of its own and
       * would wait for ever, so the actors that fit fail with why */
      char why[400];
      snprintf(why, sizeof(why), "%s", j->spawn_error);
      j->spawn_failures = 0;   /* a later request tries again */
      fail_actors_unstartable(j, why);
    }
  }
}

static void on_lease_request(node_client *c, Rd__LeaseRequest *m) {
  rd__log(RD_LOG_DEBUG, "lease request %llu from client %u (idle %d, starting %d)", (unsigned long long)m->req_id,
          c->id, N.nidle, N.nstarting);
  Rd__LeaseGrant lg = RD__LEASE_GRANT__INIT;
  lg.req_id = m->req_id;
  rd_resources res;
  if (rd__res_from_msg(m->res, &res) != 0) {
    lg.status = RD_EINVAL;
    lg.error = "invalid resource request";
    send_msg(c, RD__MSG_TYPE__MSG_LEASE_GRANT, &lg.base, -1);
    return;
  }
  const node_env *env;
  const char *sel = NULL;
  char why[300];
  int er = rd__node_env(m->env, m->n_env, &env, why, sizeof(why));
  if (er == 0) er = rd__node_sel(m->label_selector, &sel, why, sizeof(why));
  if (er == 0 && sel && m->pg_id) {
    er = RD_EINVAL;
    snprintf(why, sizeof(why), "a task in a placement group runs on its bundle's node: give the bundle the label selector");
  }
  if (er != 0) {
    lg.status = er;
    lg.error = why;
    send_msg(c, RD__MSG_TYPE__MSG_LEASE_GRANT, &lg.base, -1);
    return;
  }
  if (m->pg_id) {   /* pg.c routes it to its bundle: here, there, or later */
    rd__pg_lease_request(c, m, &res, env);
    return;
  }
  if (rd__cluster_lease_request(c, m, &res, env, sel)) return;
  if (!rd_labels_match(N.labels, sel)) {   /* alone: this node is every node there is */
    snprintf(why, sizeof(why), "label selector '%.120s' does not match this node's labels '%.120s'", sel, N.labels);
    lg.status = RD_EINFEASIBLE;
    lg.error = why;
    send_msg(c, RD__MSG_TYPE__MSG_LEASE_GRANT, &lg.base, -1);
    return;
  }
  if (!rd_res_feasible(&N.ledger, &res)) {
    char buf[700], want[300], has[300];
    rd_res_format(&res, want, sizeof(want));   /* custom resources by name */
    rd_res_format(&N.ledger.total, has, sizeof(has));
    snprintf(buf, sizeof(buf), "request %s can never be satisfied: the node has %s", want, has);
    lg.status = RD_EINFEASIBLE;
    lg.error = buf;
    send_msg(c, RD__MSG_TYPE__MSG_LEASE_GRANT, &lg.base, -1);
    return;
  }
  /* placed here by the cluster's default policy: may go to another node
   * that has room while it waits (rd__cluster_respill) */
  rd__node_lease_queue(c, m->req_id, &res, m->priority, NULL, NULL, env, 0, 0, m->strategy == 0, sel);
}

/* Forget request req_id that c (a client, or a peer's link) has queued
 * here: 1, or 0 when it is not queued here. */
int rd__node_lease_drop(node_client *c, uint64_t req_id) {
  for (lease_req **pp = &c->reqs; *pp; pp = &(*pp)->next) {
    if ((*pp)->req_id == req_id) {
      lease_req *r = *pp;
      *pp = r->next;
      rd_sched_queue_remove(req_queue(r), &r->item);
      free(r);
      return 1;
    }
  }
  return 0;
}

static void on_lease_cancel(node_client *c, Rd__LeaseCancel *m) {
  if (rd__node_lease_drop(c, m->req_id)) return;
  if (rd__pg_lease_cancel(c, m->req_id)) return;
  (void)rd__cluster_lease_cancel(c, m->req_id);
}

static void lease_end(node_worker *w) {
  rd__node_worker_release(w);
  rd__node_worker_state(w, W_IDLE);
  w->lease_owner = NULL;
  w->lease_id = 0;
}

/* A leased worker that must never be granted again: its grant goes back now,
 * the process is killed and reaped by worker_on_exit. */
static void worker_kill_leased(node_worker *w) {
  rd__node_worker_release(w);
  rd__node_worker_state(w, W_DYING);
  if (!w->stop_why) w->stop_why = "stopped by the node: its lease ended mid-task (cancelled, or its owner went)";
  w->lease_owner = NULL;
  if (w->pid > 0) kill(w->pid, SIGKILL);
}

static void on_lease_return(node_client *c, Rd__LeaseReturn *m) {
  for (node_worker *w = N.workers; w; w = w->next) {
    if (w->state == W_LEASED && w->lease_id == m->lease_id && w->lease_owner == c) {
      if (m->worker_lost) {
        /* its owner saw the socket break: the worker is dead or broken, so it
         * must never be granted again; reaped by worker_on_exit */
        worker_kill_leased(w);
      } else {
        lease_end(w);
      }
      dispatch();
      return;
    }
  }
  /* a bridged lease on another node, or already gone (the worker died) */
  (void)rd__cluster_lease_return(c, m);
}

rd_resources rd__node_avail(void) {
  rd_resources a = N.ledger.avail;
  if (a.cpu < 0) a.cpu = 0;
  return a;
}

/* A leased task worker waits in rd_get/rd_wait (Ray's blocked worker): its
 * CPUs go back to the ledger meanwhile, so the tasks it waits for can run
 * even when every CPU is held by a waiting parent, and are taken back when it
 * resumes, over the total if need be.  Actors keep theirs, like Ray's. */
static void on_worker_blocked(node_client *c, Rd__WorkerBlocked *m) {
  node_worker *w = c->worker;
  if (!w || w->state != W_LEASED || w->actor || m->blocked == w->blocked) return;
  rd_res_ledger *l = worker_ledger(w);
  if (m->blocked) {
    rd_res_lend_cpu(l, &w->grant);
    w->blocked = 1;
    N.nblocked++;
    dispatch();
  } else {
    rd_res_retake_cpu(l, &w->grant);
    w->blocked = 0;
    N.nblocked--;
  }
}

/* A task worker ran a function its max_calls times (rd_task_opts.max_calls):
 * when its lease ends it is killed rather than made idle
 * (rd__node_worker_state), whichever way the lease comes back. */
static void on_worker_retire(node_client *c, Rd__WorkerRetire *m) {
  node_worker *w = c->worker;
  if (!w || w->actor) return;
  w->retiring = 1;
  rd__log(RD_LOG_INFO, "worker %u (pid %d) ran '%s' %u times (max_calls): it goes when its lease ends", w->id, w->pid,
          m->func ? m->func : "", m->max_calls);
}

/* FuncStats from a worker or an owner: a name and one count per bucket each. */
static int funcs_ok(Rd__FuncStats *const *f, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (f[i]->n_buckets != RD_HIST_BUCKETS || !f[i]->func) return 0;
  return 1;
}

static rd__fn_metric *fn_metric(const char *name);

/* FuncStats into N.fns: run times (from a worker) or latencies (from an owner). */
static void funcs_add(Rd__FuncStats *const *fss, size_t n, int latency) {
  for (size_t i = 0; i < n; i++) {
    rd__fn_metric *f = fn_metric(fss[i]->func);
    if (!f) return;   /* out of memory: the totals still count */
    (void)rd__hist_acc_add(latency ? &f->lat : &f->run, fss[i]->buckets, fss[i]->sum_ns, fss[i]->failed);
  }
}

/* name's entry in N.fns, made on first sight (NULL: out of memory). */
static rd__fn_metric *fn_metric(const char *name) {
  for (size_t i = 0; i < N.nfns; i++)
    if (!strcmp(N.fns[i].name, name)) return &N.fns[i];
  if (N.nfns == RD_FN_METRICS_MAX - 1 && strcmp(name, "(other)")) {   /* the last slot: the rest together */
    rd__log(RD_LOG_WARN, "metrics: over %d function names; '%.100s' and later ones count as '(other)'",
            RD_FN_METRICS_MAX - 1, name);
    return fn_metric("(other)");
  }
  if (N.nfns == N.fns_cap) {
    size_t cap = N.fns_cap ? N.fns_cap * 2 : 16;
    rd__fn_metric *f = realloc(N.fns, cap * sizeof(*f));
    if (!f) return NULL;
    N.fns = f;
    N.fns_cap = cap;
  }
  rd__fn_metric *f = &N.fns[N.nfns++];
  memset(f, 0, sizeof(*f));
  snprintf(f->name, sizeof(f->name), "%s", name);
  return f;
}

/* A histogram family with a series per function: run times or latencies. */
static void fn_histograms(rd__mbuf *b, const char *name, const char *help, int latency) {
  rd__mbuf_family(b, name, "histogram", help);
  for (size_t i = 0; i < N.nfns; i++) {
    const rd__hist_acc *h = latency ? &N.fns[i].lat : &N.fns[i].run;
    rd__mbuf_histogram_series(b, name, "function", N.fns[i].name, h->buckets, h->n, (double)h->sum_ns / 1e9);
  }
}

/* Whether a job has figures for the per-job families. */
static int job_counted(const node_job *j) { return j->runs || j->owned_settled || j->drivers || j->nworkers; }

/* The per-job families: counters of its workers' runs and of what its
 * processes here submitted, by this node's job number (node_job, as the
 * dashboard's "Jobs on this node"), and raydist_job_info to map the number
 * to its program and GCS job. */
static void job_metrics(rd__mbuf *b) {
  static const struct {
    const char *name, *type, *help;
  } fam[] = {
      {"raydist_job_info", "gauge", "1 for each job of this node: its program and its entry in the GCS job table (0: none)."},
      {"raydist_job_tasks_run_total", "counter", "Tasks and actor calls run by the job's workers here."},
      {"raydist_job_task_run_seconds_total", "counter", "Their run time together."},
      {"raydist_job_tasks_failed_total", "counter", "Of them, the ones that returned an error."},
      {"raydist_job_owned_tasks_settled_total", "counter",
       "Tasks and actor calls the job's processes here submitted that have a result or failed."},
      {"raydist_job_task_latency_seconds_total", "counter", "Their submit-to-result latency together."},
      {"raydist_job_owned_tasks_failed_total", "counter", "Of them, the ones that failed."},
      {"raydist_job_owned_tasks", "gauge", "Tasks and actor calls the job's processes here have no result for yet."},
  };
  int any = 0;
  for (const node_job *j = N.jobs; j && !any; j = j->next) any = job_counted(j);
  if (!any) return;   /* no family without a series */
  for (size_t f = 0; f < sizeof(fam) / sizeof(fam[0]); f++) {
    rd__mbuf_family(b, fam[f].name, fam[f].type, fam[f].help);
    for (const node_job *j = N.jobs; j; j = j->next) {
      if (!job_counted(j)) continue;
      const char *n = fam[f].name;
      switch (f) {
        case 0:
          rd__mbuf_printf(b, "%s{node_job=\"%u\",gcs_job=\"%u\",program=\"", n, j->id, rd__job_base(j)->gcs_job_id);
          rd__mbuf_label_value(b, j->exe);
          rd__mbuf_printf(b, "\"} 1\n");
          break;
        case 1: rd__mbuf_printf(b, "%s{node_job=\"%u\"} %llu\n", n, j->id, (unsigned long long)j->runs); break;
        case 2: rd__mbuf_printf(b, "%s{node_job=\"%u\"} %.9g\n", n, j->id, (double)j->run_ns / 1e9); break;
        case 3: rd__mbuf_printf(b, "%s{node_job=\"%u\"} %llu\n", n, j->id, (unsigned long long)j->runs_failed); break;
        case 4: rd__mbuf_printf(b, "%s{node_job=\"%u\"} %llu\n", n, j->id, (unsigned long long)j->owned_settled); break;
        case 5: rd__mbuf_printf(b, "%s{node_job=\"%u\"} %.9g\n", n, j->id, (double)j->owned_ns / 1e9); break;
        case 6: rd__mbuf_printf(b, "%s{node_job=\"%u\"} %llu\n", n, j->id, (unsigned long long)j->owned_failed); break;
        default: {
          uint64_t w, s;
          rd__node_owned(j, &w, &s, NULL);
          rd__mbuf_printf(b, "%s{node_job=\"%u\",state=\"waiting\"} %llu\n%s{node_job=\"%u\",state=\"sent\"} %llu\n",
                          n, j->id, (unsigned long long)w, n, j->id, (unsigned long long)s);
        }
      }
    }
  }
}

void rd__node_owned(const node_job *j, uint64_t *waiting, uint64_t *sent, uint64_t *classes) {
  uint64_t k = 0;
  *waiting = *sent = 0;
  for (node_client *c = N.clients; c; c = c->next) {
    if (c->dead || (j && rd__node_client_job(c) != j)) continue;
    *waiting += c->own_waiting;
    *sent += c->own_sent;
    k += c->own_classes;
  }
  if (classes) *classes = k;
}

/* An owner's (driver's or worker's) tasks: latency since its last report,
 * and how many wait or are sent now. */
/* An owner's backlog replaces what it said before; entries that are not
 * valid (a bad shape or selector, a zero count, past the first
 * RD_NODE_BACKLOG_MAX) are left out. */
static void owner_backlog(node_client *c, Rd__ClassBacklog *const *b, size_t n) {
  free(c->backlog);
  c->backlog = NULL;
  c->nbacklog = 0;
  if (!n) return;
  if (n > RD_NODE_BACKLOG_MAX) n = RD_NODE_BACKLOG_MAX;
  if (!(c->backlog = calloc(n, sizeof(*c->backlog)))) return;
  for (size_t i = 0; i < n; i++) {
    node_backlog *x = &c->backlog[c->nbacklog];
    char why[200];
    if (!b[i]->count || rd__res_from_msg(b[i]->shape, &x->shape) != 0 ||
        rd__node_sel(b[i]->label_selector, &x->sel, why, sizeof(why)) != 0)
      continue;
    x->count = b[i]->count;
    c->nbacklog++;
  }
}

static void on_owner_stats(node_client *c, Rd__OwnerStats *m) {
  uint64_t n = 0;
  for (size_t i = 0; i < m->n_buckets; i++) n += m->buckets[i];
  int fin_ok = m->n_finished <= RD_OWNER_FINISHED_MAX;
  for (size_t i = 0; fin_ok && i < m->n_finished; i++) fin_ok = m->finished[i]->state == RD_TS_FINISHED;
  if (m->n_buckets != RD_HIST_BUCKETS || n != m->done + m->failed || !funcs_ok(m->funcs, m->n_funcs) || !fin_ok) {
    send_error(c, RD_EPROTO, "OwnerStats needs one count per histogram bucket, adding up to done + failed, "
                             "a name and one count per bucket for each function, and at most 10000 finished tasks, "
                             "each FINISHED");
    client_drop(c, "malformed owner stats");
    return;
  }
  funcs_add(m->funcs, m->n_funcs, 1);
  rd__dashboard_failures_add(c, m);
  rd__dashboard_finished_add(c, m);
  rd__app_metrics_add(m->app_metrics, m->n_app_metrics, c->id);
  (void)rd__hist_acc_add(&N.task_lat, m->buckets, m->sum_ns, m->failed);
  node_job *j = rd__node_client_job(c);
  if (j) {
    j->owned_settled += n;
    j->owned_failed += m->failed;
    j->owned_ns += m->sum_ns;
  }
  c->own_waiting = m->waiting;
  c->own_sent = m->sent;
  c->own_unsent = m->finished_unsent;
  c->own_classes = m->classes;
  owner_backlog(c, m->backlog, m->n_backlog);
}

/* A worker's task run times since its last report, for the metrics. */
static void on_worker_stats(node_client *c, Rd__WorkerStats *m) {
  if (!c->worker) return;
  if (m->n_buckets != RD_HIST_BUCKETS || !funcs_ok(m->funcs, m->n_funcs)) {
    send_error(c, RD_EPROTO, "WorkerStats needs exactly one count per histogram bucket, and a name per function");
    client_drop(c, "malformed worker stats");
    return;
  }
  funcs_add(m->funcs, m->n_funcs, 0);
  uint64_t runs = rd__hist_acc_add(&N.task_run, m->buckets, m->sum_ns, m->failed);
  node_job *j = c->worker->job;
  if (j) {
    j->runs += runs;
    j->runs_failed += m->failed;
    j->run_ns += m->sum_ns;
  }
  N.stream_items += m->stream_items;
  if (!N.timeline_on || !m->n_events) return;
  if (!N.tl && !(N.tl = calloc(RD_TIMELINE_MAX, sizeof(*N.tl)))) return;
  for (size_t i = 0; i < m->n_events; i++) {
    const Rd__TaskEvent *e = m->events[i];
    rd__tl_event *t = &N.tl[N.tl_next];
    t->task_id = e->task_id;
    t->start_us = e->start_us;
    t->dur_us = e->dur_us;
    t->status = e->status;
    t->pid = c->worker->pid;
    snprintf(t->func, sizeof(t->func), "%s", e->func ? e->func : "");
    N.tl_next = (N.tl_next + 1) % RD_TIMELINE_MAX;
    if (N.tl_count < RD_TIMELINE_MAX) N.tl_count++;
  }
}

/* The timeline as Chrome trace JSON (chrome://tracing, Perfetto): one
 * complete event per task, a row per worker process.  RD_ENOENT when the
 * node keeps none. */
int rd__node_timeline(rd__mbuf *b) {
  if (!N.timeline_on) return RD_ENOENT;
  rd__mbuf_printf(b, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[");
  size_t first = (N.tl_next + RD_TIMELINE_MAX - N.tl_count) % RD_TIMELINE_MAX;
  for (size_t k = 0; k < N.tl_count; k++) {
    const rd__tl_event *t = &N.tl[(first + k) % RD_TIMELINE_MAX];
    rd__mbuf_printf(b, "%s\n{\"name\":", k ? "," : "");
    rd__mbuf_json_cstr(b, t->func);
    rd__mbuf_printf(b, ",\"cat\":\"task\",\"ph\":\"X\",\"ts\":%llu,\"dur\":%llu,\"pid\":%d,"
                    "\"tid\":%d,\"args\":{\"task_id\":\"%llx\",\"status\":%d}}",
                    (unsigned long long)t->start_us, (unsigned long long)t->dur_us, t->pid, t->pid,
                    (unsigned long long)t->task_id, t->status);
  }
  rd__mbuf_printf(b, "\n]}\n");
  return 0;
}

/* -------------------------------------------------------------- actors */

static node_actor *actor_find(uint64_t id) {
  for (node_actor *a = N.actors; a; a = a->next)
    if (a->id == id) return a;
  return NULL;
}

/* max_pending: a lookup's answer, the actor's max_pending_calls (0 else). */
static void reply_actor_id_mp(node_client *c, uint64_t req_id, int status, const char *err, uint64_t id,
                              int32_t max_pending) {
  Rd__ActorIdReply r = RD__ACTOR_ID_REPLY__INIT;
  r.req_id = req_id;
  r.status = status;
  r.error = (char *)(err ? err : "");
  r.actor_id = id;
  r.max_pending_calls = max_pending > 0 ? max_pending : 0;
  /* a link asked on behalf of a caller on its node (a forwarded kill) */
  send_msg(c, c->role == ROLE_LINK ? RD__MSG_TYPE__MSG_LINK_ACTOR_KILLED : RD__MSG_TYPE__MSG_ACTOR_ID_REPLY, &r.base, -1);
}

static void reply_actor_id(node_client *c, uint64_t req_id, int status, const char *err, uint64_t id) {
  reply_actor_id_mp(c, req_id, status, err, id, 0);
}

uint32_t rd__node_actor_concurrency(const node_actor *a) {
  rd__cgroup g[RD_CGROUPS_MAX];
  char err[200];
  int n = rd__cgroups_parse(a->cgroups, g, err, sizeof(err));   /* checked when it was made */
  uint32_t c = a->max_concurrency > 0 ? (uint32_t)a->max_concurrency : 1;
  for (int i = 0; i < n; i++) c += (uint32_t)g[i].threads;
  return c;
}

static void reply_connect(node_client *c, uint64_t req_id, node_actor *a, int status, const char *err, int fd) {
  if (c->role == ROLE_LINK) {   /* a caller on another node: bridge the socket */
    rd__cluster_connect_reply(c, req_id, a, status, err, fd);
    return;
  }
  Rd__ActorConnectReply r = RD__ACTOR_CONNECT_REPLY__INIT;
  r.req_id = req_id;
  r.status = status;
  r.error = (char *)(err ? err : "");
  r.actor_id = a ? a->id : 0;
  r.max_task_retries = a ? a->max_task_retries : 0;
  r.worker_pid = a && a->worker ? a->worker->pid : a ? a->host_pid : 0;
  r.restarts = a ? (uint32_t)a->restarts : 0;
  r.concurrency = a ? rd__node_actor_concurrency(a) : 0;
  r.node = a && rd__cluster_on() ? rd__cluster_index() : 0;
  r.max_pending_calls = a ? a->max_pending_calls : 0;
  send_msg(c, RD__MSG_TYPE__MSG_ACTOR_CONNECT_REPLY, &r.base, fd);
}

/* Give caller c its own socket to the actor's worker. */
static void actor_connect_now(node_actor *a, node_client *c, uint64_t req_id, int no_redirect) {
  if (a->host) {   /* hosted on another node: its node bridges a socket */
    rd__cluster_actor_connect(a, c, req_id, 0, no_redirect);
    return;
  }
  int sv[2];
  if (!a->worker || !a->worker->client) {
    reply_connect(c, req_id, a, RD_ESYS, "cannot make a socket to the actor: its worker is not connected", -1);
    return;
  }
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    reply_connect(c, req_id, a, RD_ESYS, rd__node_sys_error("cannot make a socket to the actor", errno), -1);
    return;
  }
  Rd__ActorAttach at = RD__ACTOR_ATTACH__INIT;
  at.actor_id = a->id;
  send_msg(a->worker->client, RD__MSG_TYPE__MSG_ACTOR_ATTACH, &at.base, sv[0]);
  worker_add_caller(a->worker, c);
  reply_connect(c, req_id, a, 0, NULL, sv[1]);
}

static void actor_serve_connects(node_actor *a) {
  while (a->connects) {
    parked_connect *p = a->connects;
    a->connects = p->next;
    if (!p->client->dead && a->state == A_ALIVE) {
      actor_connect_now(a, p->client, p->req_id, p->no_redirect);
    } else if (!p->client->dead) {
      /* a copy hosted here died: its record node restarts it, maybe elsewhere */
      Rd__ActorConnect ask = RD__ACTOR_CONNECT__INIT;
      ask.req_id = p->req_id;
      ask.actor_id = a->id;
      if (!(rd__node_actor_hosted(a) && rd__cluster_actor_elsewhere(p->client, &ask)))
        reply_connect(p->client, p->req_id, a, RD_EACTOR_DIED, a->death, -1);
    }
    free(p);
  }
}

/* The actor and its worker part ways (the worker died or is being killed). */
static void actor_unbind(node_actor *a) {
  if (!a->worker) return;
  a->worker->actor = NULL;
  a->worker = NULL;
  N.nactor_workers--;
}

/* Answer rd_actor_kill's callers; for a named actor that died, only once
 * the GCS has freed its name (rd__node_actor_unnamed), so that when
 * rd_actor_kill returns, no node finds the name or is refused it. */
static void actor_answer_killers(node_actor *a) {
  if (a->unnaming) return;
  while (a->killers) {
    parked_connect *p = a->killers;
    a->killers = p->next;
    if (!p->client->dead) reply_actor_id(p->client, p->req_id, 0, NULL, a->id);
    free(p);
  }
}

/* Marks a dead, why and since when (the caller does the rest). */
static void actor_set_dead(node_actor *a, const char *why) {
  a->state = A_DEAD;
  a->ended_ns = rd__now_ns();
  free(a->death);
  a->death = strdup(why);
}

/* A dead actor's record stays (late callers learn why it died; a restart
 * of a hosted one reuses it), but the constructor arguments were kept only
 * for restarts: up to 64 MiB each, so they go. */
static void actor_drop_args(node_actor *a) {
  for (size_t i = 0; i < a->nargs; i++) free(a->args[i].data);
  a->nargs = 0;
}

/* a's placement waiting in a queue here, if any, goes. */
static void actor_unqueue(node_actor *a) {
  if (!a->req) return;
  req_unlink(a->req);
  rd_sched_queue_remove(req_queue(a->req), &a->req->item);
  free(a->req);
  a->req = NULL;
}

/* Recorded here, a is sent to node host to run there. */
static void actor_to_host(node_actor *a, uint32_t host) {
  a->host = host;
  a->state = A_PENDING;
  a->pending_since = 0;   /* not waiting here: no "waited for resources" warning */
  a->host_pid = 0;
  rd__cluster_actor_create(a);
}

static void actor_schedule(node_actor *a) {
  node_bundle *b = NULL;   /* its placement-group bundle, when that is here */
  uint32_t host = 0;
  char why[300] = "";
  int err = 0;
  if (a->pg_id) {
    err = rd__pg_actor_bundle(a, &b, &host, why, sizeof(why));
    if (err == RD_EAGAIN) {   /* the group is being reserved: pg.c schedules it again */
      if (a->state != A_PENDING || !a->pending_since) {
        a->pending_since = rd__now_ns();
        a->warned = 0;
      }
      a->state = A_PENDING;
      if (!rd__node_actor_hosted(a)) a->host = 0;
      return;
    }
  } else if (!rd__node_actor_hosted(a)) {
    host = rd__cluster_actor_place(a, &err, why, sizeof(why));
    if (err == RD_EAGAIN) {   /* placed again with the next view: none in this one can host it, or only a node the autoscaler can start */
      if (!a->launch_wait) rd__log(RD_LOG_INFO, "actor %016llx (%s): %s", (unsigned long long)a->id, a->cls, why);
      if (a->state != A_PENDING || !a->pending_since) {
        a->pending_since = rd__now_ns();
        a->warned = 0;
      }
      a->state = A_PENDING;
      a->host = 0;
      a->launch_wait = 1;
      return;
    }
  }
  a->launch_wait = 0;
  if (err && rd__node_actor_hosted(a)) {   /* hosted for a peer: tell its record node */
    actor_die(a, why);
    return;
  }
  if (err) {
    actor_set_dead(a, why);
    a->place_err = err;
    if (a->name && rd__cluster_actor_dead(a, why)) a->unnaming = rd__now_ns();   /* frees the name cluster-wide */
    actor_serve_connects(a);
    actor_answer_killers(a);
    return;
  }
  if (!rd__node_actor_hosted(a)) {
    if (host) {   /* the record stays here; the actor runs there */
      actor_to_host(a, host);
      return;
    }
    a->host = 0;
  }
  node_job *vj = rd__node_job_variant(a->job, a->env);   /* its worker starts with its env */
  lease_req *r = vj ? calloc(1, sizeof(*r)) : NULL;
  if (!r) {
    actor_set_dead(a, "the node ran out of memory placing it");
    actor_serve_connects(a);
    return;
  }
  a->state = A_PENDING;
  a->pending_since = rd__now_ns();
  a->warned = 0;
  r->item.req = a->res;
  r->item.priority = a->priority;
  r->item.data = r;
  r->owner = a->creator;
  r->actor = a;
  r->job = vj;
  r->bundle = b;
  r->next = a->creator->reqs;
  a->creator->reqs = r;
  a->req = r;
  rd_sched_queue_push(req_queue(r), &r->item);
}

void rd__node_actor_schedule(node_actor *a) {
  actor_schedule(a);
  dispatch();
}

/* respill (cluster.c): pending actor a waited here for room that node t
 * has now.  Recorded here, it goes to t; hosted for a peer, it goes back to
 * its record node, which places it again (with its view: most often on t).
 * Not a restart: it never started. */
void rd__node_actor_respill(node_actor *a, uint32_t t, const char *why) {
  actor_unqueue(a);
  if (rd__node_actor_hosted(a)) {
    rd__cluster_actor_give_back(a, t, why);
    actor_drop_args(a);
    actor_set_dead(a, "given back to its record node to be placed again");
    a->given_back = 1;   /* not a death: no dead record is kept (a placement here again makes a new one) */
    return;
  }
  rd__log(RD_LOG_INFO, "actor %016llx (%s) waited here for resources: %s", (unsigned long long)a->id, a->cls, why);
  rd__cluster_actor_claim(a, t);
  actor_to_host(a, t);
}

/* Its host gave pending actor a (recorded here) back: placed again. */
void rd__node_actor_place_again(node_actor *a) {
  a->host = 0;
  a->host_pid = 0;
  actor_schedule(a);
  dispatch();
}

/* a's host went (died, its link broke, unreachable): a restart, as
 * rd__node_actor_host_lost, unless a had not started there yet.  Then it
 * is placed again without counting one: it never ran, and its node's end
 * is not its fault (Ray does not count restarts for preempted nodes
 * either); before, an actor with max_restarts 0 sent to a node that died
 * or left before it started died with it. */
void rd__node_actor_host_gone(node_actor *a, const char *why) {
  if (a->state != A_PENDING || a->no_restart) {
    rd__node_actor_host_lost(a, why);
    return;
  }
  rd__cluster_claim_cancel(a->view_claim);
  a->view_claim = 0;
  rd__log(RD_LOG_WARN, "actor %016llx (%s) had not started on node %u: %s; placing it again", (unsigned long long)a->id,
          a->cls, a->host, why);
  rd__node_actor_place_again(a);
}
void rd__node_actor_die(node_actor *a, const char *why) { actor_die(a, why); }

static void actor_die(node_actor *a, const char *why) {
  if (a->state == A_DEAD) return;
  rd__log(RD_LOG_INFO, "actor %016llx (%s) is dead: %s", (unsigned long long)a->id, a->cls, why);
  actor_set_dead(a, why);
  actor_drop_args(a);
  if (rd__node_actor_hosted(a)) rd__cluster_actor_state(a, 0, why);   /* hosted for a peer */
  if (a->host) rd__cluster_actor_kill(a, 1);   /* recorded here, running there: end it there too */
  if (a->name && rd__cluster_actor_dead(a, why)) a->unnaming = rd__now_ns();   /* frees the name cluster-wide */
  actor_unqueue(a);
  if (a->worker) {
    node_worker *w = a->worker;
    actor_unbind(a);
    if (w->state == W_LEASED) {
      rd__node_worker_release(w);
      rd__node_worker_state(w, W_DYING);
      if (!w->stop_why) w->stop_why = "stopped by the node: its actor was killed or exited";
    }
    if (w->pid > 0) kill(w->pid, SIGKILL);
  }
  actor_serve_connects(a);
  actor_answer_killers(a);
}

/* A detached actor's creator c left: the node owns it from now on, and its
 * placement request if it is still waiting for one. */
static void actor_adopt(node_actor *a, node_client *c) {
  if (a->req) {
    req_unlink(a->req);
    a->req->owner = &N.orphans;
    a->req->next = N.orphans.reqs;
    N.orphans.reqs = a->req;
  }
  a->creator = &N.orphans;
  rd__log(RD_LOG_INFO, "actor %016llx (%s%s%s) is detached: it outlives its creator (pid %d)",
          (unsigned long long)a->id, a->cls, a->name ? " " : "", a->name ? a->name : "", c->pid);
}

/* Why an actor killed for good is dead. */
static void actor_killed_why(const node_actor *a, char *buf, size_t len) {
  if (a->exited) snprintf(buf, len, "actor %s exited (rd_actor_exit)", a->cls);
  else snprintf(buf, len, "actor %s was killed by rd_actor_kill", a->cls);
}

/* The actor's process is gone (crash, kill, its host node): restart it or
 * declare it dead. */
static void actor_lost(node_actor *a, const char *why) {
  if (a->state == A_DEAD) {
    actor_answer_killers(a);
    return;
  }
  char buf[400];
  if (a->no_restart) {
    actor_killed_why(a, buf, sizeof(buf));
    actor_die(a, buf);
  } else if (rd__node_actor_hosted(a)) {
    actor_die(a, why);   /* hosted for a peer: its record node decides about restarts */
  } else if (a->max_restarts < 0 || a->restarts < a->max_restarts) {
    a->restarts++;
    char most[16] = "unlimited";
    if (a->max_restarts >= 0) snprintf(most, sizeof(most), "%d", a->max_restarts);
    rd__log(RD_LOG_WARN, "actor %016llx (%s): %s; restarting (restart %d of %s)", (unsigned long long)a->id, a->cls,
            why, a->restarts, most);
    actor_schedule(a);
    dispatch();
  } else {
    snprintf(buf, sizeof(buf), "actor %s died: %s; no restarts left (max_restarts=%d)", a->cls, why,
             a->max_restarts);
    actor_die(a, buf);
  }
  actor_answer_killers(a);   /* the old process is gone (a named one that died: once its name is free) */
}

void rd__node_actor_unnamed(uint64_t actor_id) {
  rd__cluster_name_freed(actor_id);
  node_actor *a = actor_find(actor_id);
  if (!a) return;
  a->unnaming = 0;
  actor_answer_killers(a);
}

static void actor_worker_gone(node_actor *a, const char *why) {
  actor_unbind(a);
  actor_lost(a, why);
}

static void actor_place(node_actor *a, node_worker *w, const rd_res_grant *g) {
  worker_take(w, g);
  w->lease_owner = NULL;
  w->lease_id = 0;
  w->gcs_job = rd__node_actor_gcs_job(a);   /* the groups it makes end with its job */
  worker_set_driver(w, a->driver);
  w->actor = a;
  w->last_actor = a->id;
  N.nactor_workers++;
  a->worker = w;
  a->state = A_STARTING;
  a->last_node = rd__cluster_index();
  a->last_pid = w->pid;
  Rd__ActorStart st = RD__ACTOR_START__INIT;
  grant_msg gm;
  grant_to_msg(g, &gm);
  st.actor_id = a->id;
  st.class_name = a->cls;
  st.n_args = a->nargs;
  st.args = a->args;
  st.n_gpu_ids = st.n_gpu_shares = gm.n;
  st.gpu_ids = gm.ids;
  st.gpu_shares = gm.shares;
  st.visible_devices = w->visible;
  st.gpu_memory = gm.memory;
  st.restarts = (uint32_t)a->restarts;
  st.max_concurrency = a->max_concurrency;
  st.ns = a->ns;
  st.concurrency_groups = a->cgroups;
  send_msg(w->client, RD__MSG_TYPE__MSG_ACTOR_START, &st.base, -1);
}

/* A table entry with copies of the class, name and constructor arguments;
 * NULL when out of memory. */
static node_actor *actor_new(const char *cls, const char *name, const ProtobufCBinaryData *args, size_t nargs) {
  node_actor *a = calloc(1, sizeof(*a));
  if (a) a->created_ns = rd__now_ns();
  if (a) a->args = calloc(nargs ? nargs : 1, sizeof(*a->args));
  int ok = a && a->args && (a->cls = strdup(cls));
  if (ok && name && *name) ok = (a->name = strdup(name)) != NULL;
  for (size_t i = 0; ok && i < nargs; i++) {
    a->args[i].len = args[i].len;
    a->args[i].data = malloc(args[i].len ? args[i].len : 1);
    ok = a->args[i].data != NULL;
    if (ok && args[i].len) memcpy(a->args[i].data, args[i].data, args[i].len);
    a->nargs = i + 1;
  }
  if (ok) return a;
  if (a) {
    for (size_t i = 0; i < a->nargs; i++) free(a->args[i].data);
    free(a->args); free(a->cls); free(a->name); free(a->ns); free(a);
  }
  return NULL;
}

/* Frees what an actor record owns, not the record. */
static void actor_free_fields(node_actor *a) {
  for (size_t i = 0; i < a->nargs; i++) free(a->args[i].data);
  while (a->connects) {
    parked_connect *p = a->connects;
    a->connects = p->next;
    free(p);
  }
  while (a->killers) {
    parked_connect *p = a->killers;
    a->killers = p->next;
    free(p);
  }
  free(a->args); free(a->cls); free(a->name); free(a->ns); free(a->death); free(a->cgroups);
}

static void client_on_io(uv_poll_t *h, int status, int events);

/* Is process pid exiting (PF_EXITING in /proc/pid/stat, set before the
 * kernel closes its files) or a zombie? */
static int pid_exiting(int pid) {
  char path[64], buf[512];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 1;   /* gone */
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  const char *p = strrchr(buf, ')');   /* after the command name, which may hold anything */
  if (!p) return 0;
  char state;
  unsigned long flags = 0;
  if (sscanf(p + 1, " %c %*d %*d %*d %*d %*d %lu", &state, &flags) != 2) return 0;
  return state == 'Z' || state == 'X' || (flags & 0x4);   /* PF_EXITING */
}

/* Has w's process ended (it is exiting: waited for up to 200 ms)?  Its
 * status then, peeked at (WNOWAIT) and left for libuv's reaping. */
static int worker_exit_peek(const node_worker *w, int64_t *status, int *sig) {
  if (w->pid <= 0 || w->state == W_DEAD || !pid_exiting(w->pid)) return 0;
  for (int i = 0; i < 200; i++) {
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    if (waitid(P_PID, (id_t)w->pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0) return 0;   /* reaped already */
    if (si.si_pid == w->pid) {
      *status = si.si_code == CLD_EXITED ? si.si_status : 0;
      *sig = si.si_code == CLD_EXITED ? 0 : si.si_status;
      return 1;
    }
    usleep(1000);
  }
  return 0;
}

/* The worker record of process pid here, or NULL. */
static node_worker *worker_by_pid(int pid) {
  for (node_worker *w = N.workers; w && pid > 0; w = w->next)
    if (w->pid == pid) return w;
  return NULL;
}

int rd__node_worker_exit_word(int pid, char *buf, size_t len) {
  int64_t status = 0;
  int sig = 0;
  node_worker *w = worker_by_pid(pid);
  if (!w || !worker_exit_peek(w, &status, &sig)) return 0;
  exit_word(w, status, sig, buf, len);
  return 1;
}

/* rd__node_worker_settle for w. */
static void worker_settle(node_worker *w) {
  node_client *wc = w->client;
  if (!wc || wc->dead || w->pid <= 0 || !pid_exiting(w->pid)) return;
  struct pollfd p = {.fd = wc->conn.fd, .events = POLLRDHUP};
  if (poll(&p, 1, 200) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) client_on_io(&wc->poll, 0, UV_READABLE);
}

/* The live actor named `name` recorded here, or NULL.  A caller learns that
 * an actor died when its own socket to the actor closes, which may be before
 * the dying process has closed its socket to this node (the kernel closes a
 * process's files one by one): a supervisor that re-creates a crashed actor
 * under its name, or looks the name up, right after RD_EACTOR_DIED would
 * find it still alive here.  So the actor's worker is settled first
 * (rd__node_worker_settle), and the actor restarts or dies before the name
 * is judged. */
static node_actor *actor_named(const char *name) {
  if (!name || !*name) return NULL;
  for (node_actor *a = N.actors; a; a = a->next) {
    if (a->state == A_DEAD || !a->name || strcmp(a->name, name)) continue;
    if (a->worker) worker_settle(a->worker);
    if (a->state != A_DEAD) return a;
  }
  return NULL;
}

void rd__node_worker_settle(int pid) {
  node_worker *w = worker_by_pid(pid);
  if (w) worker_settle(w);
}

/* A dead actor recorded here (not a copy hosted for a peer) named `name`
 * whose death the GCS may not have written yet: the one still being
 * unnamed if any, else any; NULL when none. */
node_actor *rd__node_actor_dead_named(const char *name) {
  node_actor *any = NULL;
  for (node_actor *a = N.actors; a; a = a->next) {
    if (a->state != A_DEAD || !a->name || strcmp(a->name, name) || rd__node_actor_hosted(a)) continue;
    if (a->unnaming) return a;
    any = a;
  }
  return any;
}

/* Checks an actor's spec, and its name free here: 0 with its resources,
 * env and selector (interned), or an RD_E* code with a reason in buf. */
static int actor_check(const Rd__ActorCreate *m, rd_resources *res, const node_env **env, const char **sel, char *buf,
                       size_t len) {
  if (!m->class_name || !*m->class_name || rd__res_from_msg(m->res, res) != 0 || m->max_restarts < -1 ||
      m->max_task_retries < -1 || m->max_pending_calls < -1) {
    snprintf(buf, len, "invalid actor options");
    return RD_EINVAL;
  }
  *sel = NULL;
  int er = rd__node_env(m->env, m->n_env, env, buf, len);
  if (er == 0) er = rd__node_sel(m->label_selector, sel, buf, len);
  if (er == 0 && *sel && m->pg_id) {
    er = RD_EINVAL;
    snprintf(buf, len, "an actor in a placement group runs on its bundle's node: give the bundle the label selector");
  }
  rd__cgroup cgs[RD_CGROUPS_MAX];
  if (er == 0 && rd__cgroups_parse(m->concurrency_groups, cgs, buf, len) < 0) er = RD_EINVAL;
  if (er != 0) return er;
  if (!rd__cluster_on() && !rd_res_feasible(&N.ledger, res)) {
    snprintf(buf, len, "actor %s asks for {CPU: %g, GPU: %g}, which this node can never give", m->class_name,
             rd_res_to_double(res->cpu), rd_res_to_double(res->gpu));
    return RD_EINFEASIBLE;
  }
  if (!rd__cluster_on() && !rd_labels_match(N.labels, *sel)) {
    snprintf(buf, len, "actor %s: label selector '%.100s' does not match this node's labels '%.100s'", m->class_name,
             *sel, N.labels);
    return RD_EINFEASIBLE;
  }
  if (actor_named(m->name)) {
    snprintf(buf, len, "an actor named '%s' already exists", m->name);
    return RD_EEXIST;
  }
  return 0;
}

/* The record of a new actor here, pending, created by creator (a client,
 * or &N.orphans for none here); NULL when out of memory. */
static node_actor *actor_record(const Rd__ActorCreate *m, node_job *job, const rd_resources *res, const node_env *env,
                                const char *sel, node_client *creator, uint32_t gcs_job, uint32_t driver) {
  char *cgroups = m->concurrency_groups && *m->concurrency_groups ? strdup(m->concurrency_groups) : NULL;
  node_actor *a = (cgroups || !m->concurrency_groups || !*m->concurrency_groups)
                      ? actor_new(m->class_name, m->name, m->args, m->n_args) : NULL;
  if (!a) {
    free(cgroups);
    return NULL;
  }
  a->job = job;
  a->env = env;
  a->id = rd__rec_id_make(rd__cluster_index(), ++N.next_actor_id);
  a->res = *res;
  a->priority = m->priority;
  a->max_restarts = m->max_restarts;
  a->max_task_retries = m->max_task_retries;
  a->max_pending_calls = m->max_pending_calls;
  a->max_concurrency = m->max_concurrency > 0 ? m->max_concurrency : 1;
  if (m->ns && *m->ns && !a->ns) a->ns = strdup(m->ns);   /* lost on no memory: the default one */
  a->strategy = m->strategy;
  a->affinity = m->node_affinity;
  a->soft = m->soft;
  a->sel = sel;
  a->cgroups = cgroups;
  a->pg_id = m->pg_id;
  a->bundle_index = m->pg_id ? m->bundle_index : -1;
  a->detached = m->detached;
  a->creator = creator;
  a->hosted = 0;
  a->gcs_job = gcs_job;
  a->driver = driver;
  a->next = N.actors;
  N.actors = a;
  a->state = A_PENDING;
  return a;
}

static void on_actor_create(node_client *c, Rd__ActorCreate *m) {
  rd_resources res;
  const node_env *env;
  const char *sel;
  char buf[300];
  int er = actor_check(m, &res, &env, &sel, buf, sizeof(buf));
  if (er != 0) {
    reply_actor_id(c, m->req_id, er, buf, 0);
    return;
  }
  node_job *job = rd__node_client_job(c);
  if (!job) {
    reply_actor_id(c, m->req_id, RD_ESTATE, "this client has no job: its hello named no executable to run", 0);
    return;
  }
  if (rd__cluster_actor_record_at_head(c, m, job)) return;   /* detached: answered by the head */
  /* a driver's: its job's, once known */
  node_actor *a = actor_record(m, job, &res, env, sel, c, c->worker ? c->worker->gcs_job : 0, rd__node_client_driver(c));
  if (!a) {
    reply_actor_id(c, m->req_id, RD_ENOMEM, "node out of memory", 0);
    return;
  }
  if (a->name && rd__cluster_actor_register(a, c, m->req_id)) return;   /* placed once the name is ours */
  rd__node_actor_registered(a->id, c->id, m->req_id, 0, NULL);
}

void rd__node_actor_record_for(node_client *link, node_job *job, const Rd__ActorCreate *m, uint32_t driver,
                               uint32_t prefer_node, uint64_t req_id) {
  rd_resources res;
  const node_env *env;
  const char *sel;
  char buf[300];
  int er = m->detached ? actor_check(m, &res, &env, &sel, buf, sizeof(buf)) : RD_EINVAL;
  if (er != 0) {
    if (!m->detached) snprintf(buf, sizeof(buf), "only detached actors are recorded for another node");
    reply_actor_id(link, req_id, er, buf, 0);
    return;
  }
  node_actor *a = actor_record(m, job, &res, env, sel, &N.orphans, 0, driver);
  if (!a) {
    reply_actor_id(link, req_id, RD_ENOMEM, "node out of memory", 0);
    return;
  }
  a->prefer_node = prefer_node;
  rd__log(RD_LOG_INFO, "actor %016llx (%s%s%s) recorded here for node %u: detached, it outlives that node",
          (unsigned long long)a->id, a->cls, a->name ? " " : "", a->name ? a->name : "", rd__cluster_link_peer(link));
  if (a->name && rd__cluster_actor_register(a, link, req_id)) return;
  rd__node_actor_registered(a->id, link->id, req_id, 0, NULL);
}

/* The actor's name is registered (or there was none): place it and answer. */
void rd__node_actor_registered(uint64_t id, uint32_t client_id, uint64_t req_id, int status, const char *err) {
  node_actor *a = actor_find(id);
  if (!a) return;
  if (status != 0) {
    actor_die(a, err);
    rd__node_reply_actor_id(client_id, req_id, status, err, 0);
    return;
  }
  actor_schedule(a);
  if (actor_view_wait(a)) {
    /* no node in this view can host it: the next view says, and so does
     * the answer (rd_actor_create's RD_EINFEASIBLE; actors_place_waiting) */
    a->create_client = client_id;
    a->create_req = req_id;
    return;
  }
  if (actor_created_reply(a, client_id, req_id)) dispatch();
}

/* Does a wait for the next view to say whether a node can host it
 * (rd__cluster_actor_place: none in this one)? */
static int actor_view_wait(const node_actor *a) {
  return a->state == A_PENDING && a->launch_wait && a->infeasible_view;
}

/* Answer the request that created a: its id (1), or why it could not be
 * placed (0). */
static int actor_created_reply(node_actor *a, uint32_t client_id, uint64_t req_id) {
  if (a->state == A_DEAD) {
    rd__node_reply_actor_id(client_id, req_id, a->place_err ? a->place_err : RD_EINFEASIBLE, a->death, 0);
    return 0;
  }
  rd__node_reply_actor_id(client_id, req_id, 0, NULL, a->id);
  return 1;
}

node_client *rd__node_client_by_id(uint32_t id) {
  for (node_client *c = N.clients; c; c = c->next)
    if (c->id == id && !c->dead) return c;
  return NULL;
}

void rd__node_reply_actor_id(uint32_t client_id, uint64_t req_id, int status, const char *err, uint64_t id) {
  node_client *c = rd__node_client_by_id(client_id);
  if (c) reply_actor_id(c, req_id, status, err, id);
}

void rd__node_reply_actor_found(uint32_t client_id, uint64_t req_id, uint64_t id, int32_t max_pending) {
  node_client *c = rd__node_client_by_id(client_id);
  if (c) reply_actor_id_mp(c, req_id, 0, NULL, id, max_pending);
}

uint32_t rd__node_client_driver(const node_client *c) {
  /* a driver that asked for none of its workers' output gets none: its
   * leases and actors carry no driver, so a worker's node (here or over a
   * link) sends it nothing (before 2026-12-05 every line crossed the link
   * to be dropped on the driver's node) */
  if (c->role == ROLE_DRIVER) return c->no_output ? 0 : c->id;
  return c->role == ROLE_WORKER && c->worker ? c->worker->driver : 0;
}

uint32_t rd__node_client_gcs_job(const node_client *c) {
  return c->worker ? c->worker->gcs_job : c->job ? c->job->gcs_job_id : 0;
}

uint32_t rd__node_actor_gcs_job(const node_actor *a) {
  if (a->detached) return 0;
  return a->gcs_job ? a->gcs_job : a->job ? a->job->gcs_job_id : 0;
}

/* Host actor `id` for its record node (link): it restarts there, not here. */
int rd__node_actor_host_for(node_client *link, node_job *job, const Rd__ActorCreate *m, uint64_t id,
                            uint32_t restarts, uint32_t gcs_job, uint32_t driver, char *err, size_t errlen) {
  rd_resources res;
  if (!m->class_name || !*m->class_name || rd__res_from_msg(m->res, &res) != 0) {
    snprintf(err, errlen, "invalid actor spec");
    return RD_EINVAL;
  }
  const node_env *env;
  const char *sel = NULL;
  int er = rd__node_env(m->env, m->n_env, &env, err, errlen);
  if (er == 0) er = rd__node_sel(m->label_selector, &sel, err, errlen);
  if (er != 0) return er;
  if (!rd_res_feasible(&N.ledger, &res)) {
    snprintf(err, errlen, "actor %s cannot fit on the node chosen to host it", m->class_name);
    return RD_EINFEASIBLE;
  }
  node_actor *old = actor_find(id);
  if (old && (old->state != A_DEAD || old->creator != link)) {
    snprintf(err, errlen, "actor %016llx is already hosted here", (unsigned long long)id);
    return RD_EEXIST;
  }
  node_actor *a = actor_new(m->class_name, NULL, m->args, m->n_args);   /* its name lives at the record */
  if (!a) {
    snprintf(err, errlen, "node out of memory");
    return RD_ENOMEM;
  }
  if (old) {
    /* it ran here before and died (killed for a restart, or crashed): its
     * record node restarts it here again.  The old record is reused, since
     * links and callers may still point at it. */
    node_actor *next = old->next;
    actor_free_fields(old);
    *old = *a;
    old->next = next;
    free(a);
    a = old;
  }
  a->id = id;
  a->job = job;
  a->env = env;
  a->gcs_job = gcs_job;
  a->driver = driver;
  a->res = res;
  a->priority = m->priority;
  a->max_restarts = 0;   /* its record node decides restarts, maybe elsewhere */
  a->restarts = (int)restarts;
  a->strategy = m->strategy;   /* its placement, for respill (cluster.c): the record node places it */
  a->affinity = m->node_affinity;
  a->soft = m->soft;
  a->sel = sel;
  a->pg_id = m->pg_id;
  a->bundle_index = m->bundle_index;
  a->max_task_retries = m->max_task_retries;
  a->max_pending_calls = m->max_pending_calls;
  a->max_concurrency = m->max_concurrency > 0 ? m->max_concurrency : 1;
  if (m->ns && *m->ns && !a->ns) a->ns = strdup(m->ns);   /* lost on no memory: the default one */
  if (m->concurrency_groups && *m->concurrency_groups && !a->cgroups)
    a->cgroups = strdup(m->concurrency_groups);   /* lost on no memory: the actor starts without them */
  a->creator = link;
  a->hosted = 1;
  if (!old) {
    a->next = N.actors;
    N.actors = a;
  }
  actor_schedule(a);
  dispatch();
  return 0;
}

/* A record's remote host lost the actor (died there, or the node did). */
void rd__node_actor_host_lost(node_actor *a, const char *why) {
  rd__cluster_claim_cancel(a->view_claim);   /* sent, not running there: its room is free */
  a->view_claim = 0;
  a->host_pid = 0;
  actor_lost(a, why);
}

node_actor *rd__node_actor_find(uint64_t id) { return actor_find(id); }
void rd__node_actor_serve_connects(node_actor *a) { actor_serve_connects(a); }
void rd__node_reply_connect(node_client *c, uint64_t req_id, node_actor *a, int status, const char *err, int fd) {
  reply_connect(c, req_id, a, status, err, fd);
}

static void on_actor_ready(node_client *c, Rd__ActorReady *m) {
  node_worker *w = c->worker;
  node_actor *a = w ? w->actor : NULL;
  if (!a || a->id != m->actor_id || a->state != A_STARTING) {
    rd__log(RD_LOG_WARN, "client %u: unexpected actor-ready for %llu", c->id, (unsigned long long)m->actor_id);
    return;
  }
  if (m->status == 0) {
    a->state = A_ALIVE;
    if (rd__node_actor_hosted(a)) rd__cluster_actor_state(a, 1, NULL);
    actor_serve_connects(a);
    return;
  }
  char buf[600];
  snprintf(buf, sizeof(buf), "the constructor of actor %s failed: %s", a->cls,
           m->error && *m->error ? m->error : rd_strerror(m->status));
  actor_die(a, buf);   /* kills the half-built worker too */
}

static void on_actor_connect(node_client *c, Rd__ActorConnect *m) { rd__node_actor_connect(c, m); }

void rd__node_actor_connect(node_client *c, const Rd__ActorConnect *m) {
  node_actor *a = actor_find(m->actor_id);
  /* recorded on another node: asked there, unless it runs (or starts)
   * here for that node, when the caller is served here, below; a copy
   * that died here waits for its record node's restart, which may be on
   * another node */
  if ((!a || (rd__node_actor_hosted(a) && a->state == A_DEAD)) && rd__cluster_actor_elsewhere(c, m)) return;
  if (!a) {
    /* ids are this node's index above its sequence: a lower one was made here */
    uint64_t seq = rd__rec_id_seq(m->actor_id);
    if (N.dead_actors_dropped && rd__rec_id_node(m->actor_id) == rd__cluster_index() && seq && seq <= N.next_actor_id) {
      char why[200];
      snprintf(why, sizeof(why), "actor %016llx ended long ago: the node keeps the records of its last %zu dead actors "
               "(RAYDIST_DEAD_ACTORS_KEPT)", (unsigned long long)m->actor_id, N.dead_actors_kept);
      reply_connect(c, m->req_id, NULL, RD_EACTOR_DIED, why, -1);
      return;
    }
    reply_connect(c, m->req_id, NULL, RD_ENOENT, "no such actor on this node", -1);
    return;
  }
  if (a->host && a->state == A_ALIVE) {   /* the host checks the dead pid */
    rd__cluster_actor_connect(a, c, m->req_id, m->dead_pid, c->role == ROLE_LINK && m->no_redirect);
    return;
  }
  if (a->state == A_ALIVE && m->dead_pid && a->worker && a->worker->pid == m->dead_pid) {
    /* the caller saw this process's socket break before we saw it exit: it
     * is dead or broken; make sure, and wait for the restart.  One already
     * exiting (killed from outside) is not this node's kill: its reaping
     * says how it ended, not "was stopped by its node" */
    if (!pid_exiting(a->worker->pid)) {
      a->worker->node_kill = 1;
      kill(a->worker->pid, SIGKILL);
    }
    a->state = A_STARTING;
  }
  if (a->state == A_ALIVE) {
    actor_connect_now(a, c, m->req_id, c->role == ROLE_LINK && m->no_redirect);
    return;
  }
  if (a->state == A_DEAD) {
    reply_connect(c, m->req_id, a, RD_EACTOR_DIED, a->death, -1);
    return;
  }
  parked_connect *p = calloc(1, sizeof(*p));
  if (!p) {
    reply_connect(c, m->req_id, a, RD_ENOMEM, "node out of memory", -1);
    return;
  }
  p->client = c;
  p->req_id = m->req_id;
  p->no_redirect = c->role == ROLE_LINK && m->no_redirect;
  p->next = a->connects;
  a->connects = p;
}

static void on_actor_kill(node_client *c, Rd__ActorKill *m) { rd__node_actor_kill(c, m); }

void rd__node_actor_kill(node_client *c, const Rd__ActorKill *m) {
  node_actor *a = actor_find(m->actor_id);
  /* recorded on another node (running here for it, or not known here):
   * killed through its record node, which decides about restarts */
  if ((!a || rd__node_actor_hosted(a)) && rd__cluster_actor_kill_elsewhere(c, m)) return;
  if (!a || a->state == A_DEAD) {
    if (m->req_id) reply_actor_id(c, m->req_id, a ? 0 : RD_ENOENT, a ? NULL : "no such actor", m->actor_id);
    return;
  }
  if (m->req_id) {   /* answered once the old process is gone */
    parked_connect *p = calloc(1, sizeof(*p));
    if (p) {
      p->client = c;
      p->req_id = m->req_id;
      p->next = a->killers;
      a->killers = p;
    } else {
      reply_actor_id(c, m->req_id, RD_ENOMEM, "node out of memory", a->id);
    }
  }
  rd__log(RD_LOG_INFO, "client %u kills actor %016llx (%s)%s", c->id, (unsigned long long)a->id, a->cls,
          m->no_restart ? " for good" : "");
  if (m->no_restart) a->no_restart = 1;
  if (m->exiting) a->exited = 1;
  if (a->host) {   /* answered when its host reports the old process gone */
    if (a->state == A_PENDING && !a->host_pid && m->no_restart) {
      char buf[200];
      actor_killed_why(a, buf, sizeof(buf));
      actor_die(a, buf);
    } else {
      rd__cluster_actor_kill(a, m->no_restart);
    }
    return;
  }
  if (a->worker) {
    a->worker->stop_why = m->no_restart ? "its actor was killed (rd_actor_kill)"
                                        : "its actor was killed to be restarted (rd_actor_kill)";
    a->worker->stop_user = 1;
  }
  if (!m->no_restart && a->worker && a->worker->pid > 0) {
    a->worker->node_kill = 1;
    kill(a->worker->pid, SIGKILL);   /* a restart: no destructor, like a crash */
  } else if (a->worker && a->worker->client) {
    /* graceful: the worker runs the destructor and exits; SIGKILL after 2 s */
    Rd__ActorKill k = RD__ACTOR_KILL__INIT;
    k.actor_id = a->id;
    k.no_restart = m->no_restart;
    send_msg(a->worker->client, RD__MSG_TYPE__MSG_ACTOR_KILL, &k.base, -1);
    a->worker->kill_deadline = rd__now_ns() + 2000000000ull;
  } else if (a->worker && a->worker->pid > 0) {
    a->worker->node_kill = 1;
    kill(a->worker->pid, SIGKILL);
  } else if (m->no_restart) {
    char buf[200];
    actor_killed_why(a, buf, sizeof(buf));
    actor_die(a, buf);
  } else {
    actor_answer_killers(a);   /* not placed yet: nothing to kill */
  }
}

static void on_actor_lookup(node_client *c, Rd__ActorLookup *m) {
  node_actor *a = actor_named(m->name);
  if (a) {
    reply_actor_id_mp(c, m->req_id, 0, NULL, a->id, a->max_pending_calls);
    return;
  }
  if (m->name && *m->name && rd__cluster_actor_lookup(c, m->req_id, m->name)) return;   /* the GCS knows */
  char buf[200];
  snprintf(buf, sizeof(buf), "no live actor is named '%s'", m->name ? m->name : "");
  reply_actor_id(c, m->req_id, RD_ENOENT, buf, 0);
}

int rd__node_name_in_ns(const char *qname, const char *ns, int all) {
  if (!qname || !*qname) return 0;
  if (all) return 1;
  const char *colon = strchr(qname, ':');   /* namespaces have none */
  size_t n = ns ? strlen(ns) : 0;
  if (!n) return colon == NULL || colon == qname;   /* "name", or ":na:me" (rd__ns_name) */
  return colon && (size_t)(colon - qname) == n && !strncmp(qname, ns, n);
}

void rd__node_reply_actor_names(uint32_t client_id, uint64_t req_id, int status, const char *err, char **names,
                                size_t n) {
  node_client *c = rd__node_client_by_id(client_id);
  if (!c) return;
  Rd__ActorNames r = RD__ACTOR_NAMES__INIT;
  r.req_id = req_id;
  r.status = status;
  r.error = (char *)(err ? err : "");
  r.n_names = status == 0 ? n : 0;
  r.names = names;
  send_msg(c, RD__MSG_TYPE__MSG_ACTOR_NAMES, &r.base, -1);
}

/* rd_actor_list_named: in a cluster the GCS's table (every node's named
 * actors), else this node's. */
static void on_actor_list_named(node_client *c, Rd__ActorListNamed *m) {
  if (rd__cluster_actor_list_named(c, m->req_id, m->ns, m->all)) return;
  size_t n = 0, cap = 0;
  char **names = NULL;
  int st = 0;
  for (node_actor *a = N.actors; a && !st; a = a->next) {
    if (a->state == A_DEAD || !rd__node_name_in_ns(a->name, m->ns, m->all)) continue;
    if (a->worker) worker_settle(a->worker);   /* a worker exiting: its end first, as actor_named */
    if (a->state == A_DEAD) continue;
    if (n == cap) {
      char **p = realloc(names, (cap = cap ? 2 * cap : 16) * sizeof(*p));
      if (!p) st = RD_ENOMEM;
      else names = p;
    }
    if (!st) names[n++] = a->name;
  }
  rd__node_reply_actor_names(c->id, m->req_id, st, st ? "node out of memory" : NULL, names, n);
  free(names);
}

/* ------------------------------------------------------------- objects */

/* 1 when answered, 0 when parked: behind an unsealed object of the same id,
 * or until the store's spill thread has made room (may_park 0: the create
 * spills here if it must, and answers). */
static int try_create(node_client *c, uint64_t req_id, uint64_t object_id, uint64_t size, int may_park) {
  Rd__ObjCreateReply r = RD__OBJ_CREATE_REPLY__INIT;
  r.req_id = req_id;
  uint64_t off = 0;
  int st = may_park ? rd_store_create_nowait(N.store, object_id, size, c->id, &off)
                    : rd_store_create(N.store, object_id, size, c->id, &off);
  if (st == RD_EAGAIN) return 0;
  if (st == RD_EEXIST && may_park && !rd_store_contains(N.store, object_id)) return 0;
  r.status = st;
  char buf[200];
  if (st == 0) {
    r.offset = off;
    pin_add(c, object_id);
  } else {
    rd_store_stats s;
    rd_store_get_stats(N.store, &s);
    snprintf(buf, sizeof(buf), "cannot create a %llu-byte object: %s (store %llu/%llu bytes used, %llu objects; "
             "fallback %llu/%llu bytes)", (unsigned long long)size, rd_strerror(st), (unsigned long long)s.used,
             (unsigned long long)s.capacity, (unsigned long long)s.num_in_memory,
             (unsigned long long)s.fallback_used, (unsigned long long)s.fallback_limit);
    r.error = buf;
  }
  send_msg(c, RD__MSG_TYPE__MSG_OBJ_CREATE_REPLY, &r.base, -1);
  return 1;
}

static void on_obj_create(node_client *c, Rd__ObjCreate *m) {
  if (try_create(c, m->req_id, m->object_id, m->size, 1)) return;
  parked_create *p = calloc(1, sizeof(*p));
  if (!p) {
    (void)try_create(c, m->req_id, m->object_id, m->size, 0);
    return;
  }
  p->client = c;
  p->req_id = m->req_id;
  p->object_id = m->object_id;
  p->size = m->size;
  p->deadline_ns = rd__now_ns() + RD_CREATE_WAIT_NS;
  parked_create **pp = &N.parked_creates;   /* first come, first served */
  while (*pp) pp = &(*pp)->next;
  *pp = p;
}

static void retry_parked_creates(void) {
  uint64_t now = rd__now_ns();
  for (parked_create **pp = &N.parked_creates; *pp;) {
    parked_create *p = *pp;
    int done = p->client->dead || try_create(p->client, p->req_id, p->object_id, p->size, now < p->deadline_ns);
    if (done) {
      *pp = p->next;
      free(p);
    } else {
      pp = &p->next;
    }
  }
}

/* Client `id` (of this node or another) is gone: nobody else can name the
 * objects it owned (a ref means something only in its owner), so they go. */
void rd__node_owner_gone(uint32_t id) {
  N.gone[N.ngone++ % RD_GONE_KEPT] = id;
  uint64_t lo = rd__oid_make(id, 0);
  size_t n = rd_store_delete_range(N.store, lo, lo | ((1ull << RD_OID_SEQ_BITS) - 1));
  n += rd_store_owner_gone(N.store, id);   /* what tasks handed over to it (rd_return_refs) */
  if (n) rd__log(RD_LOG_INFO, "deleted %zu objects of client %u, which is gone", n, id);
  if (n && N.parked_creates) retry_parked_creates();
}

int rd__node_store_get(uint64_t id, uint64_t *off, uint64_t *size) {
  int st = rd_store_get_nowait(N.store, id, off, size);   /* RD_EAGAIN while read back */
  if (st == RD_ENOENT && rd_store_reuse(N.store, id, off, size) == 0) st = 0;
  return st;
}

/* Try to answer a get: 1 answered, 0 must wait for a seal, a pull or a
 * read back from disk (every spilled one is asked for at once). */
static int try_get(node_client *c, uint64_t req_id, const uint64_t *ids, size_t n) {
  int wait = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t off, sz;
    int st = rd__node_store_get(ids[i], &off, &sz);
    if (st == 0) {
      rd_store_release(N.store, ids[i]);
    } else if (st == RD_EAGAIN || (st == RD_ENOENT && rd__cluster_obj_status(ids[i], NULL) == RD_EAGAIN)) {
      wait = 1;   /* not sealed yet, being pulled from another node, or read back */
    }
  }
  if (wait) return 0;
  Rd__ObjGetReply r = RD__OBJ_GET_REPLY__INIT;
  Rd__ObjLoc *locs = calloc(n ? n : 1, sizeof(*locs));
  Rd__ObjLoc **lp = calloc(n ? n : 1, sizeof(*lp));
  if (!locs || !lp) {
    free(locs); free(lp);
    client_drop(c, "out of memory");
    return 1;
  }
  r.req_id = req_id;
  r.n_locs = n;
  r.locs = lp;
  for (size_t i = 0; i < n; i++) {
    rd__obj_loc__init(&locs[i]);
    lp[i] = &locs[i];
    uint64_t off = 0, sz = 0;
    int st = rd__node_store_get(ids[i], &off, &sz);
    const char *why = NULL;
    if (st == RD_ENOENT) {
      int cst = rd__cluster_obj_status(ids[i], &why);
      if (cst != 0) st = cst;
      if (why && (!r.error || !*r.error)) r.error = (char *)why;
    }
    locs[i].status = st;
    if (st == 0) {
      locs[i].offset = off;
      locs[i].size = sz;
      pin_add(c, ids[i]);
    } else if (r.status == 0) {
      r.status = st;
    }
  }
  send_msg(c, RD__MSG_TYPE__MSG_OBJ_GET_REPLY, &r.base, -1);
  free(locs);
  free(lp);
  return 1;
}

static void reply_get_error(node_client *c, uint64_t req_id, int status, const char *msg) {
  Rd__ObjGetReply r = RD__OBJ_GET_REPLY__INIT;
  r.req_id = req_id;
  r.status = status;
  r.error = (char *)msg;
  send_msg(c, RD__MSG_TYPE__MSG_OBJ_GET_REPLY, &r.base, -1);
}

/* A parked get pins each object it waits for as soon as that one is here,
 * and keeps it pinned until answered: a pulled copy (deleted with its last
 * pin) must not go while the get still waits for another.  Without the
 * hold, two pulled objects took turns: each arrived, the get missed the
 * other, each copy went and was pulled again, for as long as the get
 * waited (tens of thousands of pulls a minute). */
static void parked_hold(parked_get *p) {
  p->missing = 0;
  for (size_t i = 0; i < p->n; i++) {
    uint64_t off, sz;
    if (!p->held[i] && rd__node_store_get(p->ids[i], &off, &sz) == 0) p->held[i] = 1;
    p->missing += !p->held[i];
  }
}

static void parked_free(parked_get *p) {
  for (size_t i = 0; i < p->n; i++)
    if (p->held[i]) (void)rd_store_release(N.store, p->ids[i]);
  free(p->ids);
  free(p);
}

static void on_obj_get(node_client *c, Rd__ObjGet *m) {
  rd__cluster_prefetch(m->object_ids, m->n_nodes == m->n_object_ids ? m->nodes : NULL, m->n_object_ids, 1);
  if (try_get(c, m->req_id, m->object_ids, m->n_object_ids)) return;
  parked_get *p = calloc(1, sizeof(*p));
  int with_nodes = m->n_nodes == m->n_object_ids;
  size_t n = m->n_object_ids;
  uint64_t *ids = malloc(n * (sizeof(uint64_t) + (with_nodes ? sizeof(uint32_t) : 0) + 1));
  if (!p || !ids) {
    free(p); free(ids);
    reply_get_error(c, m->req_id, RD_ENOMEM, "node out of memory");
    return;
  }
  memcpy(ids, m->object_ids, n * sizeof(uint64_t));
  if (with_nodes) {
    p->nodes = (uint32_t *)(ids + n);
    memcpy(p->nodes, m->nodes, n * sizeof(uint32_t));
  }
  p->held = (uint8_t *)(ids + n) + (with_nodes ? n * sizeof(uint32_t) : 0);
  memset(p->held, 0, n);
  p->client = c;
  p->req_id = m->req_id;
  p->ids = ids;
  p->n = n;
  p->deadline_ns = m->timeout_ms >= 0 ? rd__now_ns() + (uint64_t)m->timeout_ms * 1000000ull : 0;
  parked_hold(p);
  p->next = N.parked;
  N.parked = p;
}

static void retry_parked(int check_deadlines) {
  uint64_t now = rd__now_ns();
  for (parked_get **pp = &N.parked; *pp;) {
    parked_get *p = *pp;
    int done = p->client->dead;
    if (!done) parked_hold(p);
    /* a copy pulled for another get may have gone before this one came:
     * pull it again (not one whose pull failed: the get is answered so) */
    if (!done && p->nodes) rd__cluster_prefetch(p->ids, p->nodes, p->n, 0);
    if (!done) done = try_get(p->client, p->req_id, p->ids, p->n);
    if (!done && check_deadlines && p->deadline_ns && now >= p->deadline_ns) {
      int on_disk = 0;   /* sealed here, but still waiting to be read back */
      for (size_t i = 0; i < p->n && !on_disk; i++) on_disk = rd_store_is_spilled(N.store, p->ids[i]);
      reply_get_error(p->client, p->req_id, RD_ETIMEDOUT,
                      on_disk ? "a spilled object could not be read back in time (no room in the store)"
                              : "object was not sealed in time");
      done = 1;
    }
    if (done) {
      *pp = p->next;
      parked_free(p);
    } else {
      pp = &p->next;
    }
  }
}

/* The store's spill thread finished jobs: room for parked creates, objects
 * read back for parked gets. */
static void on_spill_done(uv_poll_t *h, int status, int events) {
  (void)h; (void)status; (void)events;
  if (rd_store_spill_reap(N.store) == 0) return;
  if (N.parked_creates) retry_parked_creates();
  if (N.parked) retry_parked(0);
  rd__cluster_retry_hops();
}

/* Is client `id` known to be gone?  One of this node's exactly when it is
 * not among its live clients (so however many others went since); another
 * node's when it is among the last RD_GONE_KEPT this node heard of. */
static int client_is_gone(uint32_t id) {
  if (rd__client_node(id) == rd__cluster_index()) return rd__node_client_by_id(id) == NULL;
  unsigned n = N.ngone < RD_GONE_KEPT ? N.ngone : RD_GONE_KEPT;
  for (unsigned i = 0; i < n; i++)
    if (N.gone[i] == id) return 1;
  return 0;
}

/* Is the owner of object `id` known to be gone? */
static int owner_is_gone(uint64_t id) { return client_is_gone(rd__oid_client(id)); }

int rd__node_hand_over(uint64_t id, uint32_t owner) {
  if (rd__oid_client(id) == owner) return rd_store_contains(N.store, id) ? 0 : RD_ENOENT;   /* its maker holds it */
  int st = rd_store_owner_add(N.store, id, owner);
  if (st == 0 && client_is_gone(owner)) {
    rd__log(RD_LOG_INFO, "object %llx was handed over to client %u, which is gone", (unsigned long long)id, owner);
    (void)rd_store_owner_drop(N.store, id, owner, 0);
  }
  return st;
}

void rd__node_let_go(uint64_t id, uint32_t client) {
  if (rd__oid_client(id) == client) (void)rd_store_owner_drop(N.store, id, client, 1);
  else if (rd_store_is_owner(N.store, id, client)) (void)rd_store_owner_drop(N.store, id, client, 0);
  else if (rd_store_contains(N.store, id))
    rd__log(RD_LOG_WARN, "client %u may not delete object %llx", client, (unsigned long long)id);
}

/* A worker hands store objects over to its caller (rd_return_refs): those
 * it made, and those it holds a ref to (lent to it, or handed over to it
 * in turn); here at once, on other nodes over the links.  Answered once
 * done here, so the caller, told after, finds them its own. */
static void on_obj_handover(node_client *c, Rd__ObjHandover *m) {
  Rd__ObjGetReply r = RD__OBJ_GET_REPLY__INIT;
  char err[200] = "";
  r.req_id = m->req_id;
  for (size_t i = 0; i < m->n_object_ids; i++) {
    uint64_t id = m->object_ids[i];
    uint32_t node = i < m->n_nodes ? m->nodes[i] : 0;
    if (node && node != rd__cluster_index()) continue;   /* forwarded below */
    int st = rd__node_hand_over(id, m->owner);
    if (st != 0 && r.status == 0) {
      r.status = st;
      snprintf(err, sizeof(err), "object %llx: %s", (unsigned long long)id, rd_strerror(st));
    }
  }
  if (m->n_nodes == m->n_object_ids) rd__cluster_forward_handover(m->object_ids, m->nodes, m->n_object_ids, m->owner);
  r.error = err;
  send_msg(c, RD__MSG_TYPE__MSG_OBJ_HANDOVER_REPLY, &r.base, -1);
}

static void on_obj_seal(node_client *c, Rd__ObjSeal *m) {
  int st = rd_store_seal(N.store, m->object_id);
  if (st == RD_ENOENT && rd__oid_client(m->object_id) != c->id)
    /* made for another: its owner let go of it while it was written (the
     * items of a stream its caller dropped), a race, not a fault */
    rd__log(RD_LOG_INFO, "client %u: seal of %llx: its owner let go of it first", c->id,
            (unsigned long long)m->object_id);
  else if (st != 0)
    rd__log(RD_LOG_WARN, "client %u: seal of %llx: %s", c->id, (unsigned long long)m->object_id, rd_strerror(st));
  if (st == 0 && N.ngone && owner_is_gone(m->object_id)) {
    rd__log(RD_LOG_INFO, "object %llx was sealed after its owner left: deleted", (unsigned long long)m->object_id);
    (void)rd_store_delete(N.store, m->object_id);   /* freed with the creator's pin */
  }
  if (m->release && pin_remove(c, m->object_id)) rd_store_release(N.store, m->object_id);
  if (N.parked) retry_parked(0);
  if (N.parked_creates) retry_parked_creates();
}

static void on_obj_release(node_client *c, Rd__ObjIds *m) {
  for (size_t i = 0; i < m->n_object_ids; i++)
    if (pin_remove(c, m->object_ids[i])) rd_store_release(N.store, m->object_ids[i]);
}

/* Only an object's owners (the client its id names, and those it was
 * handed over to) or a client that created it and still pins it (a worker
 * dropping the result of a failed task) may delete it; it goes when no owner
 * holds it. */
static int pin_has(const node_client *c, uint64_t id) {
  for (size_t i = 0; i < c->npins; i++)
    if (c->pins[i] == id) return 1;
  return 0;
}

static void on_obj_delete(node_client *c, Rd__ObjIds *m) {
  for (size_t i = 0; i < m->n_object_ids; i++) {
    uint64_t id = m->object_ids[i];
    if (rd__oid_client(id) != c->id && !rd_store_is_owner(N.store, id, c->id) && pin_has(c, id))
      (void)rd_store_delete(N.store, id);
    else
      rd__node_let_go(id, c->id);
  }
  if (m->n_nodes == m->n_object_ids && m->n_nodes) {
    /* the owner's objects held on other nodes (those it made, and those
     * handed over to it there); a worker dropping a failed result deletes
     * here only */
    rd__cluster_forward_deletes(m->object_ids, m->nodes, m->n_object_ids, c->id);
  }
}

/* One NodeDesc per node for rd_nodes: the cluster view, with this node's
 * own entry live (free resources `live` and store `s`, now rather than at
 * the last heartbeat); on an embedded cluster this node alone, index 0.
 * The descriptions point into the view, into live and into res (2 per
 * node): valid while live is and until the loop's next turn.  The count,
 * or -1 without memory (*out NULL). */
static int node_descs(Rd__NodeDesc **out, rd__res_msg **res, const rd_resources *live, const rd_store_stats *s) {
  size_t nv = 0;
  const rd_gcs_node *view = rd__cluster_view(&nv);
  size_t n = rd__cluster_on() ? nv : 1;
  static char host[64];
  *out = calloc(n ? n : 1, sizeof(**out));
  *res = calloc(2 * (n ? n : 1), sizeof(**res));
  if (!*out || !*res) {
    free(*out);
    free(*res);
    *out = NULL;
    *res = NULL;
    return -1;
  }
  if (!host[0] && gethostname(host, sizeof(host) - 1) != 0) snprintf(host, sizeof(host), "localhost");
  uint32_t self = rd__cluster_index();
  for (size_t i = 0; i < n; i++) {
    Rd__NodeDesc *d = &(*out)[i];
    rd__node_desc__init(d);
    const rd_gcs_node *v = rd__cluster_on() ? &view[i] : NULL;
    int me = !v || v->index == self;
    rd__res_to_msg(me ? &N.ledger.total : &v->total, &(*res)[2 * i]);
    rd__res_to_msg(me ? live : &v->avail, &(*res)[2 * i + 1]);
    d->total = &(*res)[2 * i].msg;
    d->avail = &(*res)[2 * i + 1].msg;
    d->index = v ? v->index : 0;
    d->alive = v ? v->state == RD_GCS_NODE_ALIVE : 1;
    d->is_head = v ? v->is_head : 1;
    d->ip = v ? (char *)v->ip : (char *)"";
    d->hostname = v ? (char *)v->hostname : host;
    d->store_capacity = me ? s->capacity : v->store_capacity;
    d->store_used = me ? s->used : v->store_used;
    d->pending = v ? v->pending : 0;
    d->ms_since_heartbeat = v && !me ? v->ms_since_heartbeat : 0;
    d->death_reason = v ? (char *)v->death_reason : (char *)"";
    d->metrics_port = v ? v->metrics_port : 0;
    d->labels = me ? N.labels : (char *)v->labels;
  }
  return (int)n;
}

void rd__node_self(rd_gcs_node *x) {
  memset(x, 0, sizeof(*x));
  rd_store_stats s;
  rd_store_get_stats(N.store, &s);
  x->index = rd__cluster_index();
  snprintf(x->node_id, sizeof(x->node_id), "%08x%024llx", (unsigned)getpid(), (unsigned long long)emb.start_ms);
  x->state = RD_GCS_NODE_ALIVE;
  x->is_head = 1;
  snprintf(x->ip, sizeof(x->ip), "%s", N.opts.node_ip && *N.opts.node_ip ? N.opts.node_ip : "127.0.0.1");
  if (gethostname(x->hostname, sizeof(x->hostname) - 1) != 0) snprintf(x->hostname, sizeof(x->hostname), "localhost");
  x->metrics_port = rd__metrics_port();
  snprintf(x->session_dir, sizeof(x->session_dir), "%s", N.opts.session_dir ? N.opts.session_dir : "");
  x->total = N.ledger.total;
  x->avail = rd__node_avail();
  x->store_capacity = s.capacity;
  x->store_used = s.used;
  snprintf(x->labels, sizeof(x->labels), "%s", N.labels);
  x->start_ms = emb.start_ms;
}

/* ------------------------------------------------------ key-value store */

void rd__node_kv_reply(uint32_t client_id, uint64_t req_id, int status, const char *err, const void *val, size_t len,
                       char **keys, size_t nkeys) {
  node_client *c = rd__node_client_by_id(client_id);
  if (!c) return;   /* gone meanwhile */
  Rd__KvReply r = RD__KV_REPLY__INIT;
  r.req_id = req_id;
  r.status = status;
  r.error = (char *)(err ? err : "");
  r.value.data = (uint8_t *)val;
  r.value.len = val ? len : 0;
  r.n_keys = nkeys;
  r.keys = keys;
  send_msg(c, RD__MSG_TYPE__MSG_KV_REPLY, &r.base, -1);
}

typedef struct kv_keys {
  char **v;
  size_t n, cap, bytes;
  int rc;
} kv_keys;

static int kv_collect(void *arg, const char *key, size_t klen, const void *val, size_t vlen) {
  (void)val;
  (void)vlen;
  kv_keys *l = arg;
  l->bytes += klen + 8;
  if (l->bytes > RD_KV_LIST_BYTES) {   /* as the GCS: keep the reply whole */
    l->rc = RD_E2BIG;
    return 1;
  }
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 64;
    char **p = realloc(l->v, cap * sizeof(*p));
    if (!p) {
      l->rc = RD_ENOMEM;
      return 1;
    }
    l->v = p;
    l->cap = cap;
  }
  if (!(l->v[l->n] = strndup(key, klen))) {
    l->rc = RD_ENOMEM;
    return 1;
  }
  l->n++;
  return 0;
}

/* rd_kv_*: the GCS's table on a cluster, the daemon's own on an embedded
 * node (a memory store of the GCS kind, table "kv"). */
static void on_kv(node_client *c, Rd__KvRequest *m) {
  size_t klen = m->key ? strlen(m->key) : 0;
  if (m->op < 1 || m->op > 5 || klen > RD_KV_MAX_KEY || (m->op != 4 && klen == 0) || m->value.len > RD_KV_MAX_VALUE) {
    rd__node_kv_reply(c->id, m->req_id, RD_EINVAL, "invalid key-value request", NULL, 0, NULL, 0);
    return;
  }
  if (rd__cluster_kv(c, m)) return;
  if (m->op == 5) {   /* rd_request_resources: no autoscaler on an embedded node */
    rd__node_kv_reply(c->id, m->req_id, 0, NULL, NULL, 0, NULL, 0);
    return;
  }
  if (!N.kv && !(N.kv = rd_gcs_store_memory_create())) {
    rd__node_kv_reply(c->id, m->req_id, RD_ENOMEM, "node out of memory", NULL, 0, NULL, 0);
    return;
  }
  char err[RD_KV_MAX_KEY + 64] = "";
  int rc = 0;
  void *v = NULL;
  size_t vlen = 0;
  kv_keys l = {0};
  switch (m->op) {
    case 1:
      if (!m->overwrite && N.kv->ops->get(N.kv, "kv", m->key, klen, &v, &vlen) == 0) {
        rc = RD_EEXIST;
        snprintf(err, sizeof(err), "key '%s' exists", m->key);
        break;
      }
      if (N.kv_bytes + klen + m->value.len > RD_KV_LOCAL_BYTES) {
        rc = RD_ENOMEM;
        snprintf(err, sizeof(err), "the embedded key-value store is full (%u MiB)", RD_KV_LOCAL_BYTES >> 20);
        break;
      }
      rc = N.kv->ops->put(N.kv, "kv", m->key, klen, m->value.data, m->value.len);
      if (rc == 0) N.kv_bytes += klen + m->value.len;   /* replaced values count until removed: an upper bound */
      break;
    case 2:
      rc = N.kv->ops->get(N.kv, "kv", m->key, klen, &v, &vlen);
      if (rc == RD_ENOENT) snprintf(err, sizeof(err), "no key '%s'", m->key);
      break;
    case 3:
      if (N.kv->ops->get(N.kv, "kv", m->key, klen, &v, &vlen) == 0 && N.kv_bytes >= klen + vlen)
        N.kv_bytes -= klen + vlen;
      rc = N.kv->ops->del(N.kv, "kv", m->key, klen);
      if (rc == RD_ENOENT) snprintf(err, sizeof(err), "no key '%s'", m->key);
      break;
    case 4:
      rc = N.kv->ops->scan(N.kv, "kv", m->key, klen, kv_collect, &l);
      if (!rc) rc = l.rc;
      if (rc == RD_E2BIG) snprintf(err, sizeof(err), "too many keys for one reply: use a longer prefix");
      break;
  }
  rd__node_kv_reply(c->id, m->req_id, rc, err, rc == 0 && m->op == 2 ? v : NULL, vlen, rc == 0 ? l.v : NULL,
                    rc == 0 ? l.n : 0);
  free(v);
  for (size_t i = 0; i < l.n; i++) free(l.v[i]);
  free(l.v);
}

static void on_node_info(node_client *c, Rd__NodeInfo *m) {
  Rd__NodeInfoReply r = RD__NODE_INFO_REPLY__INIT;
  rd__res_msg tot, av;
  rd__res_to_msg(&N.ledger.total, &tot);
  rd_resources avail = rd__node_avail();
  rd__res_to_msg(&avail, &av);
  rd_store_stats s;
  rd_store_get_stats(N.store, &s);
  if (m->drain_output && c->role == ROLE_DRIVER) out_drain_for(c->id);   /* its lines go before the reply */
  r.req_id = m->req_id;
  r.total = &tot.msg;
  r.avail = &av.msg;
  r.store_capacity = s.capacity;
  r.store_used = s.used;
  r.spilled_bytes = s.bytes_spilled;
  r.spill_count = s.spill_count;
  r.restore_count = s.restore_count;
  r.num_workers = N.nworkers;
  r.num_idle = N.nidle;
  r.leases_granted = N.leases_granted;
  r.node_index = rd__cluster_index();
  r.cluster_nodes = rd__cluster_alive_nodes();
  r.memory_kills = N.mem_kills;
  r.fallback_used = s.fallback_used;
  r.fallback_count = s.fallback_count;
  r.fallback_limit = s.fallback_limit;
  Rd__NodeDesc *descs = NULL, **descp = NULL;
  rd__res_msg *res = NULL;
  if (m->nodes) {
    int nd = node_descs(&descs, &res, &avail, &s);
    descp = nd >= 0 ? malloc((size_t)(nd ? nd : 1) * sizeof(*descp)) : NULL;
    if (!descp) {   /* the client sees no nodes: RD_ENOMEM there */
      free(descs);
      free(res);
      descs = NULL;
      res = NULL;
    } else {
      for (int i = 0; i < nd; i++) descp[i] = &descs[i];
      r.n_nodes = (size_t)nd;
      r.nodes = descp;
    }
  }
  send_msg(c, RD__MSG_TYPE__MSG_NODE_INFO_REPLY, &r.base, -1);
  free(descp);
  free(descs);
  free(res);
}

/* ------------------------------------------------------------- clients */

static void node_shutdown(void);

static void on_hello(node_client *c, Rd__Hello *m) {
  Rd__HelloReply r = RD__HELLO_REPLY__INIT;
  if (m->version != RD_PROTO_VERSION || (m->role != ROLE_DRIVER && m->role != ROLE_WORKER && m->role != ROLE_KEEPER)) {
    send_error(c, RD_EPROTO, "unsupported protocol version or role");
    client_drop(c, "bad hello");
    return;
  }
  if (!rd__cluster_token_ok(m->token)) {
    send_error(c, RD_EAUTH, "cluster token missing or wrong: a driver joining a cluster reads it from the "
                            "node's session directory (see raydist start)");
    client_drop(c, "hello without the cluster token");
    return;
  }
  if (m->role == ROLE_WORKER) {
    node_worker *w = NULL;
    for (node_worker *x = N.workers; x; x = x->next)
      if (x->id == m->worker_id && x->state == W_STARTING && !x->client) w = x;
    if (!w) {
      send_error(c, RD_EPROTO, "unknown worker id");
      client_drop(c, "hello from an unknown worker");
      return;
    }
    w->client = c;
    c->worker = w;
    w->job->spawn_failures = 0;   /* this executable does run as a worker */
    rd__node_worker_state(w, W_IDLE);
    rd__log(RD_LOG_DEBUG, "worker %u ready (idle %d, queued %llu)", w->id, N.nidle, (unsigned long long)N.queue.len);
  } else if (m->exe && *m->exe) {
    node_job *j = rd__node_job_get(m->exe, m->argv, m->n_argv);
    if (!j) {
      send_error(c, RD_ENOMEM, "node out of memory");
      client_drop(c, "out of memory");
      return;
    }
    c->role = m->role;
    c->pid = m->pid;
    c->job = j;
    c->no_output = m->no_worker_output;
    c->submission = m->submission <= 1u << 30 ? m->submission : 0;
    j->drivers++;
    /* the latest driver's weight; a bad one (only a broken client sends it) counts as 1 */
    j->weight = m->job_weight > 0 && m->job_weight <= 1000 ? m->job_weight : 1;
    rd__cluster_on_driver(c, m->exe);
  }
  c->role = m->role;
  c->pid = m->pid;
  rd__res_msg tot;
  rd__res_to_msg(&N.ledger.total, &tot);
  r.client_id = c->id;
  r.store_capacity = rd_store_capacity(N.store);
  r.store_map_size = rd_store_map_size(N.store);
  r.inline_max = RD_INLINE_MAX;
  r.total = &tot.msg;
  r.node_index = rd__cluster_index();
  r.cluster = rd__cluster_on();
  int fd = dup(rd_store_fd(N.store));
  send_msg(c, RD__MSG_TYPE__MSG_HELLO_REPLY, &r.base, fd);
  node_job *pj = c->job;   /* prestarted: with the driver's own env set, the variant its tasks run in */
  if (pj && m->n_env) {
    const node_env *env = NULL;
    char err[300];
    node_job *v = NULL;
    if (rd__node_env(m->env, m->n_env, &env, err, sizeof(err)) != 0)
      rd__log(RD_LOG_WARN, "driver pid %d: its env set: %s (its workers start with its first tasks)", (int)m->pid, err);
    else if ((v = rd__node_job_variant(pj, env)))
      pj = v;
  }
  if (pj && !pj->prestarted) {   /* the first driver of its job (and env set) here */
    pj->prestarted = 1;
    for (int i = pj->nworkers; i < N.opts.prestart; i++) worker_spawn(pj);
  }
  if (c->role == ROLE_DRIVER && N.opts.embedded && !N.owner) N.owner = c;   /* the driver that started it */
  if (c->role == ROLE_DRIVER) rd__log(RD_LOG_INFO, "driver pid %d connected (client %u)", c->pid, c->id);
  dispatch();
}

/* s into out (len bytes), control characters as '?': text from a client
 * that people read on a terminal. */
static void printable(char *out, size_t len, const char *s) {
  size_t i = 0;
  for (; s[i] && i + 1 < len; i++) out[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
  out[i] = 0;
}

/* A submitted job started or ended (its keeper says so): a cluster event,
 * as Ray's job manager records ("Started a ray job ..."). */
static void on_job_event(const Rd__JobEvent *m) {
  char sub[16], name[80], state[80];
  snprintf(sub, sizeof(sub), "%u", m->job);
  printable(name, sizeof(name), m->name ? m->name : "");
  printable(state, sizeof(state), m->state ? m->state : "");
  const char *kv[] = {"submission_id", sub, "state", state, NULL};
  if (!strcmp(state, "RUNNING"))
    rd__cluster_event("JOBS", "INFO", m->pid, kv, "Started job %u (%s), entrypoint pid %d.", m->job, name, m->pid);
  else
    rd__cluster_event("JOBS", strcmp(state, "SUCCEEDED") && strcmp(state, "STOPPED") ? "ERROR" : "INFO", m->pid, kv,
                      "Completed job %u (%s) with a status %s.", m->job, name, state);
}

static void handle_frame(node_client *c, const rd__frame *f) {
  const ProtobufCMessageDescriptor *d = NULL;
  if (f->type >= RD__MSG_TYPE__MSG_LINK_HELLO && f->flags == 0 && rd__cluster_on()) {
    if (rd__cluster_handle_frame(c, f)) return;
  }
  if (c->role == ROLE_LINK) {
    client_drop(c, "a client message on a node link");
    return;
  }
  int keeper_msg = f->type == RD__MSG_TYPE__MSG_JOB_HOLD || f->type == RD__MSG_TYPE__MSG_JOB_EVENT;
  if ((c->role == ROLE_KEEPER) != keeper_msg) {   /* a keeper sends those alone */
    send_error(c, RD_EPROTO, c->role == ROLE_KEEPER ? "a job's keeper sends JobHold and JobEvent alone"
                                                    : "JobHold and JobEvent come from a job's keeper (Hello.role 3)");
    client_drop(c, "message out of place");
    return;
  }
  switch (f->type) {
    case RD__MSG_TYPE__MSG_HELLO: d = &rd__hello__descriptor; break;
    case RD__MSG_TYPE__MSG_JOB_HOLD: d = &rd__job_hold__descriptor; break;
    case RD__MSG_TYPE__MSG_JOB_EVENT: d = &rd__job_event__descriptor; break;
    case RD__MSG_TYPE__MSG_LEASE_REQUEST: d = &rd__lease_request__descriptor; break;
    case RD__MSG_TYPE__MSG_LEASE_RETURN: d = &rd__lease_return__descriptor; break;
    case RD__MSG_TYPE__MSG_LEASE_CANCEL: d = &rd__lease_cancel__descriptor; break;
    case RD__MSG_TYPE__MSG_OBJ_CREATE: d = &rd__obj_create__descriptor; break;
    case RD__MSG_TYPE__MSG_OBJ_SEAL: d = &rd__obj_seal__descriptor; break;
    case RD__MSG_TYPE__MSG_OBJ_GET: d = &rd__obj_get__descriptor; break;
    case RD__MSG_TYPE__MSG_OBJ_RELEASE:
    case RD__MSG_TYPE__MSG_OBJ_DELETE: d = &rd__obj_ids__descriptor; break;
    case RD__MSG_TYPE__MSG_OBJ_HANDOVER: d = &rd__obj_handover__descriptor; break;
    case RD__MSG_TYPE__MSG_NODE_INFO: d = &rd__node_info__descriptor; break;
    case RD__MSG_TYPE__MSG_KV: d = &rd__kv_request__descriptor; break;
    case RD__MSG_TYPE__MSG_SHUTDOWN: d = &rd__shutdown__descriptor; break;
    case RD__MSG_TYPE__MSG_ACTOR_CREATE: d = &rd__actor_create__descriptor; break;
    case RD__MSG_TYPE__MSG_ACTOR_READY: d = &rd__actor_ready__descriptor; break;
    case RD__MSG_TYPE__MSG_ACTOR_CONNECT: d = &rd__actor_connect__descriptor; break;
    case RD__MSG_TYPE__MSG_ACTOR_KILL: d = &rd__actor_kill__descriptor; break;
    case RD__MSG_TYPE__MSG_ACTOR_LOOKUP: d = &rd__actor_lookup__descriptor; break;
    case RD__MSG_TYPE__MSG_ACTOR_LIST_NAMED: d = &rd__actor_list_named__descriptor; break;
    case RD__MSG_TYPE__MSG_PG_CREATE: d = &rd__pg_create__descriptor; break;
    case RD__MSG_TYPE__MSG_PG_QUERY: d = &rd__pg_query__descriptor; break;
    case RD__MSG_TYPE__MSG_PG_REMOVE: d = &rd__pg_remove__descriptor; break;
    case RD__MSG_TYPE__MSG_WORKER_BLOCKED: d = &rd__worker_blocked__descriptor; break;
    case RD__MSG_TYPE__MSG_WORKER_STATS: d = &rd__worker_stats__descriptor; break;
    case RD__MSG_TYPE__MSG_OWNER_STATS: d = &rd__owner_stats__descriptor; break;
    case RD__MSG_TYPE__MSG_TASK_LIST: d = &rd__task_list__descriptor; break;
    case RD__MSG_TYPE__MSG_WORKER_RETIRE: d = &rd__worker_retire__descriptor; break;
    default: break;
  }
  if (!d || f->flags != 0) {
    send_error(c, RD_EPROTO, "unexpected message type for the node daemon");
    client_drop(c, "unexpected message type");
    return;
  }
  if (c->role == ROLE_NONE && f->type != RD__MSG_TYPE__MSG_HELLO) {
    send_error(c, RD_EPROTO, "the first message must be a hello");
    client_drop(c, "no hello");
    return;
  }
  ProtobufCMessage *m = rd__frame_unpack(f, d);
  if (!m) {
    send_error(c, RD_EPROTO, "malformed message");
    client_drop(c, "malformed message");
    return;
  }
  switch (f->type) {
    case RD__MSG_TYPE__MSG_HELLO: on_hello(c, (Rd__Hello *)m); break;
    case RD__MSG_TYPE__MSG_JOB_HOLD: rd__job_hold_on_request(c, (Rd__JobHold *)m); break;
    case RD__MSG_TYPE__MSG_JOB_EVENT: on_job_event((Rd__JobEvent *)m); break;
    case RD__MSG_TYPE__MSG_LEASE_REQUEST: on_lease_request(c, (Rd__LeaseRequest *)m); break;
    case RD__MSG_TYPE__MSG_LEASE_RETURN: on_lease_return(c, (Rd__LeaseReturn *)m); break;
    case RD__MSG_TYPE__MSG_LEASE_CANCEL: on_lease_cancel(c, (Rd__LeaseCancel *)m); break;
    case RD__MSG_TYPE__MSG_OBJ_CREATE: on_obj_create(c, (Rd__ObjCreate *)m); break;
    case RD__MSG_TYPE__MSG_OBJ_SEAL: on_obj_seal(c, (Rd__ObjSeal *)m); break;
    case RD__MSG_TYPE__MSG_OBJ_GET: on_obj_get(c, (Rd__ObjGet *)m); break;
    case RD__MSG_TYPE__MSG_OBJ_RELEASE: on_obj_release(c, (Rd__ObjIds *)m); break;
    case RD__MSG_TYPE__MSG_OBJ_DELETE: on_obj_delete(c, (Rd__ObjIds *)m); break;
    case RD__MSG_TYPE__MSG_OBJ_HANDOVER: on_obj_handover(c, (Rd__ObjHandover *)m); break;
    case RD__MSG_TYPE__MSG_NODE_INFO: on_node_info(c, (Rd__NodeInfo *)m); break;
    case RD__MSG_TYPE__MSG_KV: on_kv(c, (Rd__KvRequest *)m); break;
    case RD__MSG_TYPE__MSG_ACTOR_CREATE: on_actor_create(c, (Rd__ActorCreate *)m); break;
    case RD__MSG_TYPE__MSG_ACTOR_READY: on_actor_ready(c, (Rd__ActorReady *)m); break;
    case RD__MSG_TYPE__MSG_ACTOR_CONNECT: on_actor_connect(c, (Rd__ActorConnect *)m); break;
    case RD__MSG_TYPE__MSG_ACTOR_KILL: on_actor_kill(c, (Rd__ActorKill *)m); break;
    case RD__MSG_TYPE__MSG_ACTOR_LOOKUP: on_actor_lookup(c, (Rd__ActorLookup *)m); break;
    case RD__MSG_TYPE__MSG_ACTOR_LIST_NAMED: on_actor_list_named(c, (Rd__ActorListNamed *)m); break;
    case RD__MSG_TYPE__MSG_PG_CREATE: rd__pg_on_create(c, (Rd__PgCreate *)m); break;
    case RD__MSG_TYPE__MSG_PG_QUERY: rd__pg_on_query(c, (Rd__PgQuery *)m); break;
    case RD__MSG_TYPE__MSG_PG_REMOVE: rd__pg_on_remove(c, (Rd__PgRemove *)m); break;
    case RD__MSG_TYPE__MSG_WORKER_BLOCKED: on_worker_blocked(c, (Rd__WorkerBlocked *)m); break;
    case RD__MSG_TYPE__MSG_WORKER_STATS: on_worker_stats(c, (Rd__WorkerStats *)m); break;
    case RD__MSG_TYPE__MSG_OWNER_STATS: on_owner_stats(c, (Rd__OwnerStats *)m); break;
    case RD__MSG_TYPE__MSG_TASK_LIST: {
      int kept = rd__dashboard_on_task_list(c, (Rd__TaskList *)m);
      if (kept > 0) return;
      if (kept < 0) {
        send_error(c, RD_EPROTO, "TaskList needs one count per task state, states in range and at most the tasks asked for");
        client_drop(c, "malformed task list");
      }
      break;
    }
    case RD__MSG_TYPE__MSG_WORKER_RETIRE: on_worker_retire(c, (Rd__WorkerRetire *)m); break;
    case RD__MSG_TYPE__MSG_SHUTDOWN:
      /* a cluster's node outlives drivers; an embedded one stops with the driver that started it */
      if (c->role == ROLE_DRIVER && !rd__cluster_on() && (!N.opts.embedded || c == N.owner)) node_shutdown();
      else rd__log(RD_LOG_WARN, "client %u (not the node's driver) asked for shutdown; ignored", c->id);
      break;
    default: break;
  }
  protobuf_c_message_free_unpacked(m, NULL);
}

static void client_free_cb(uv_handle_t *h) {
  node_client *c = h->data;
  rd__conn_close(&c->conn);
  free(c->pins);
  free(c->backlog);
  free(c);
}

static void client_drop(node_client *c, const char *why) {
  if (c->dead) return;
  c->dead = 1;
  int expected = c->role == ROLE_DRIVER || N.shutting_down || !strcmp(why, "end of stream") ||
                 !strcmp(why, "worker exited");
  rd__log(expected ? RD_LOG_INFO : RD_LOG_WARN,
          "dropping client %u (%s pid %d): %s", c->id,
          c->role == ROLE_DRIVER   ? "driver"
          : c->role == ROLE_WORKER ? "worker"
          : c->role == ROLE_LINK   ? "node link"
          : c->role == ROLE_KEEPER ? "job keeper"
                                   : "unknown",
          c->pid, why);
  rd__pg_client_dropped(c);   /* first: it asks cluster.c which peer a link was */
  rd__job_hold_client_gone(c);
  rd__cluster_client_dropped(c);
  rd__dashboard_client_gone(c);
  if (rd__conn_want_write(&c->conn)) (void)rd__conn_flush(&c->conn);  /* best effort: the error frame */
  for (node_client **pp = &N.clients; *pp; pp = &(*pp)->next)
    if (*pp == c) { *pp = c->next; break; }
  /* nothing parked may point at c once it is freed */
  for (parked_get **pp = &N.parked; *pp;) {
    parked_get *p = *pp;
    if (p->client == c) { *pp = p->next; parked_free(p); } else pp = &p->next;
  }
  for (parked_create **pp = &N.parked_creates; *pp;) {
    parked_create *p = *pp;
    if (p->client == c) { *pp = p->next; free(p); } else pp = &p->next;
  }
  for (node_actor *a = N.actors; a; a = a->next) {
    for (parked_connect **pp = &a->connects; *pp;) {
      parked_connect *p = *pp;
      if (p->client == c) { *pp = p->next; free(p); } else pp = &p->next;
    }
    for (parked_connect **pp = &a->killers; *pp;) {
      parked_connect *p = *pp;
      if (p->client == c) { *pp = p->next; free(p); } else pp = &p->next;
    }
  }
  for (node_actor *a = N.actors; a; a = a->next) {
    if (a->creator != c || a->state == A_DEAD) continue;
    if (a->detached) {
      actor_adopt(a, c);
    } else {
      char buf[160];
      snprintf(buf, sizeof(buf), "the process that created it (pid %d) exited", c->pid);
      actor_die(a, buf);
    }
  }
  /* records of dead actors outlive their creator's client: no pointer to it */
  for (node_actor *a = N.actors; a; a = a->next)
    if (a->creator == c) a->creator = NULL;
  while (c->reqs) {
    lease_req *r = c->reqs;
    c->reqs = r->next;
    if (r->actor) r->actor->req = NULL;
    rd_sched_queue_remove(req_queue(r), &r->item);
    free(r);
  }
  /* leases it still held: rd_shutdown gives every lease back first, so
   * this owner ended without it (a crash, Ctrl-C, an _exit).  A worker may
   * still run its task, and this node cannot tell (tasks go over the
   * owner's socket): killed, as Ray kills a dead owner's leased workers,
   * rather than granted to the next owner while busy */
  for (node_worker *w = N.workers; w; w = w->next)
    if (w->state == W_LEASED && w->lease_owner == c) {
      rd__log(RD_LOG_INFO, "worker %u (pid %d) was leased to client %u, which left without giving it back: killed", w->id,
              w->pid, c->id);
      worker_kill_leased(w);
    }
  for (size_t i = 0; i < c->npins; i++) rd_store_release(N.store, c->pins[i]);
  c->npins = 0;
  rd_store_abort_client(N.store, c->id);
  if (c->role == ROLE_DRIVER || c->role == ROLE_WORKER) {
    rd__node_owner_gone(c->id);
    rd__app_metrics_client_gone(c->id);   /* the gauges it set last */
  }
  if (c->worker) {
    node_worker *w = c->worker;
    w->client = NULL;
    c->worker = NULL;
    /* it closed its connection as its process ended (a crash, a kill from
     * outside): that is its exit, said as such, often before its reaping */
    int64_t st = 0;
    int sg = 0;
    const int ended = worker_exit_peek(w, &st, &sg);
    /* ending, though its exit is not to be seen yet (a loaded machine: its
     * threads still exiting after 200 ms): said at its reaping, not as a
     * stop by this node (which a SIGKILL from outside was, under load) */
    const int exiting = ended || w->pid <= 0 || pid_exiting(w->pid);
    char word[400];   /* how it ended (the memory monitor's kill says so, ended or not) */
    if (ended || w->kill_why[0]) exit_word(w, st, sg, word, sizeof(word));
    if (ended) worker_tell(w, word);
    if (w->actor) {
      char why[460];
      if (w->kill_why[0] || (ended && (st || sg)))
        snprintf(why, sizeof(why), "its worker process (pid %d) %s", w->pid, word);
      else if (exiting && !ended)
        snprintf(why, sizeof(why), "its worker process (pid %d) ended", w->pid);
      else
        snprintf(why, sizeof(why), "its worker process closed its connection to the node");
      actor_worker_gone(w->actor, why);
    }
    if (!exiting && w->state != W_DEAD) {   /* a worker without a conn is useless */
      kill(w->pid, SIGKILL);
      worker_tell(w, "was stopped by its node: it closed its connection to the node");
      if (!w->stop_why) w->stop_why = "stopped by the node: it closed its connection to the node";
    }
    if (w->state == W_LEASED) rd__node_worker_release(w);
    if (w->state != W_DEAD) rd__node_worker_state(w, W_DYING);   /* until its exit callback */
  }
  if (c->job && --c->job->drivers == 0) rd__cluster_job_end(c->job);
  uv_poll_stop(&c->poll);
  c->poll.data = c;
  uv_close((uv_handle_t *)&c->poll, client_free_cb);
  if (N.parked_creates) retry_parked_creates();
  if (c == N.owner) {
    N.owner = NULL;
    node_shutdown();
  } else {
    dispatch();
  }
}

/* What c sent, read and handled: at most `rounds` fills of its buffer. */
static void client_read(node_client *c, int rounds) {
  for (int i = 0; i < rounds && !c->dead; i++) {
    int r = rd__conn_fill(&c->conn);
    if (r == RD_EAGAIN) break;
    if (r <= 0) {
      client_drop(c, r == 0 ? "end of stream" : "read error");
      break;
    }
    rd__frame f;
    int k = 0;
    while (!c->dead && (k = rd__conn_next(&c->conn, &f)) == 1) handle_frame(c, &f);
    if (!c->dead && k < 0) {
      send_error(c, RD_EPROTO, "malformed frame header");
      client_drop(c, "malformed frame");
    }
  }
}

/* A peer that closed with frames of ours unread leaves its socket in error
 * (ECONNRESET), and one we write to after it closed fails the write (EPIPE),
 * with what it sent last still queued for us: a driver's last report (its
 * tasks that finished) was lost so.  Read that before the drop; what it
 * handles may flush again, which passes c by (draining). */
static void client_lost(node_client *c, const char *why) {
  if (c->draining) return;
  c->draining = 1;
  client_read(c, 1 << 20);
  if (!c->dead) client_drop(c, why);
}

static void client_on_io(uv_poll_t *h, int status, int events) {
  node_client *c = h->data;
  if (c->dead) return;
  if (status < 0) {
    client_lost(c, "socket error");
    flush_all();
    return;
  }
  if (events & UV_READABLE) client_read(c, 16);
  flush_all();
}

static void on_accept(uv_poll_t *h, int status, int events) {
  (void)h; (void)events;
  if (status < 0) return;
  for (;;) {
    int fd = accept4(N.listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE) && N.reserve_fd >= 0) {
      /* out of files: the connection waiting would make the socket ready
       * for ever (a busy loop); the reserved fd makes room to take it and
       * close it, so its process (a starting worker, likely) sees it refused */
      int err = errno;
      close(N.reserve_fd);
      int c = accept4(N.listen_fd, NULL, NULL, SOCK_CLOEXEC);
      if (c >= 0) close(c);
      N.reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
      uint64_t now = rd__wall_ms();
      if (now - N.refused_ms > 10000)
        rd__log(RD_LOG_WARN, "%s", rd__node_sys_error("a connection to the node was refused", err));
      N.refused_ms = now;
      if (c >= 0) continue;
    }
    if (fd < 0) return;
    if (N.shutting_down) { close(fd); continue; }
    if (!rd__node_client_new(fd, ROLE_NONE)) close(fd);
  }
}

node_client *rd__node_client_new(int fd, int role) {
  node_client *c = calloc(1, sizeof(*c));
  if (!c) return NULL;
  /* the node's index above a per-node counter: object ids name their owner's node */
  c->id = (rd__cluster_index() << RD_CLIENT_NODE_SHIFT) | (++N.next_client_id & ((1u << RD_CLIENT_NODE_SHIFT) - 1));
  c->role = role;
  rd__conn_init(&c->conn, fd);
  uv_poll_init(N.loop, &c->poll, fd);
  c->poll.data = c;
  c->poll_events = UV_READABLE;
  uv_poll_start(&c->poll, UV_READABLE, client_on_io);
  c->next = N.clients;
  N.clients = c;
  return c;
}

void rd__node_send(node_client *c, Rd__MsgType t, const ProtobufCMessage *m, int fd) { send_msg(c, t, m, fd); }
void rd__node_client_drop(node_client *c, const char *why) { client_drop(c, why); }
void rd__node_dispatch(void) { dispatch(); }
void rd__node_flush_all(void) { flush_all(); }
void rd__node_retry_parked(void) {
  if (N.parked) retry_parked(0);
}

/* Only the gets that want oid, and only that id: the whole recheck
 * (retry_parked: every id of every waiting get looked up in the store, and
 * pulled again when missing) on each arrival made a get of n objects held
 * on other nodes O(n^2) store lookups, a quarter of the node's CPU for a
 * get of 10,000 (perf).  Failures, deadlines and copies to pull again still
 * go through retry_parked. */
void rd__node_parked_arrived(uint64_t oid) {
  for (parked_get **pp = &N.parked; *pp;) {
    parked_get *p = *pp;
    int done = p->client->dead;
    for (size_t i = 0; !done && p->missing && i < p->n; i++) {
      uint64_t off, sz;
      if (p->held[i] || p->ids[i] != oid) continue;
      if (rd__node_store_get(oid, &off, &sz) != 0) break;   /* not readable after all: retry_parked sees to it */
      p->held[i] = 1;
      p->missing--;
    }
    if (!done && !p->missing) done = try_get(p->client, p->req_id, p->ids, p->n);
    if (done) {
      *pp = p->next;
      parked_free(p);
    } else {
      pp = &p->next;
    }
  }
}

node_job *rd__node_client_job(const node_client *c) {
  if (c->worker) return c->worker->job;
  return c->job;
}

void rd__node_worker_state(node_worker *w, int st) {
  node_job *j = w->job;
  if (st == W_IDLE && w->retiring) {   /* ran a task's max_calls (on_worker_retire): never granted again */
    st = W_DYING;
    w->stop_why = RD_STOP_MAX_CALLS;
    if (w->pid > 0) kill(w->pid, SIGKILL);
  }
  if (w->state == st) return;
  if (w->state == W_IDLE) { N.nidle--; j->nidle--; }
  if (w->state == W_STARTING) { N.nstarting--; j->nstarting--; }
  if (w->state == W_STARTING && st != W_DYING && st != W_DEAD && !w->joined_ms) {
    w->joined_ms = rd__wall_ms();
    if (!j->ready_seen) {   /* the first: how long a worker with its env set takes to start (ray list runtime-envs) */
      j->ready_seen = 1;
      j->ready_ms = w->joined_ms >= w->launch_ms ? w->joined_ms - w->launch_ms : 0;
    }
  }
  w->state = st;
  if (st == W_IDLE) { N.nidle++; j->nidle++; w->idle_since = rd__now_ns(); }
  if (st == W_STARTING) { N.nstarting++; j->nstarting++; }
}

/* A job is its executable as it is on disk: a driver rebuilt at the same path
 * is a new job, so neither its workers nor its shipped code are the old one's. */
static void exe_identity(const char *exe, uint64_t id[4]) {
  struct stat st;
  memset(id, 0, 4 * sizeof(uint64_t));
  if (stat(exe, &st) != 0) return;
  id[0] = (uint64_t)st.st_dev;
  id[1] = (uint64_t)st.st_ino;
  id[2] = (uint64_t)st.st_size;
  id[3] = (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec;
}

/* A new job entry on N.jobs for that file (identity), whose workers run
 * exe with argv (exe alone when argc is 0); NULL when out of memory. */
static node_job *job_new(const uint64_t identity[4], const char *exe, char *const *argv, size_t argc) {
  node_job *j = calloc(1, sizeof(*j));
  if (!j) return NULL;
  memcpy(j->identity, identity, sizeof(j->identity));
  j->exe = strdup(exe);
  j->argv = calloc(argc + 2, sizeof(char *));
  int ok = j->exe && j->argv;
  if (ok && argc == 0) ok = (j->argv[0] = strdup(exe)) != NULL;
  for (size_t i = 0; ok && i < argc; i++) ok = (j->argv[i] = strdup(argv[i] ? argv[i] : "")) != NULL;
  if (!ok) {
    for (char **a = j->argv; a && *a; a++) free(*a);
    free(j->argv);
    free(j->exe);
    free(j);
    return NULL;
  }
  j->argc = argc ? argc : 1;
  j->weight = 1;
  j->id = ++N.next_job_id;
  j->next = N.jobs;
  N.jobs = j;
  return j;
}

node_job *rd__node_job_get(const char *exe, char *const *argv, size_t argc) {
  uint64_t id[4];
  exe_identity(exe, id);
  for (node_job *j = N.jobs; j; j = j->next)
    if (!j->base && !strcmp(j->exe, exe) && !memcmp(j->identity, id, sizeof(id))) return j;
  node_job *j = job_new(id, exe, argv, argc);
  if (j) rd__log(RD_LOG_INFO, "job %u: workers run %s", j->id, exe);
  return j;
}

void rd__node_actors_place_waiting(void) {
  for (node_actor *a = N.actors, *next; a; a = next) {
    next = a->next;
    if (!a->launch_wait || a->state != A_PENDING) continue;
    actor_schedule(a);
    if (a->create_req && !actor_view_wait(a)) {
      uint64_t req = a->create_req;   /* placed, dead, or waiting for the autoscaler: said now */
      a->create_req = 0;
      (void)actor_created_reply(a, a->create_client, req);
    }
  }
}

/* ------------------------------------------------ interned strings */

static rd__istr *itab_find(const rd__itab *t, const char *key, size_t len, uint64_t hash) {
  for (rd__hlink *l = rd__htab_bucket(&t->t, hash); l; l = l->next) {
    rd__istr *e = (rd__istr *)l;
    if (l->hash == hash && e->len == len && !memcmp(e->key, key, len)) return e;
  }
  return NULL;
}

static int itab_add(rd__itab *t, rd__istr *e) {
  int r = rd__htab_add(&t->t, &e->link);
  if (r == 0) t->bytes += e->len;
  return r;
}

/* What the sweep and the drops are given: the table, and the pointers
 * held (rd__node_gc; NULL when everything goes). */
typedef struct itab_sweep_arg {
  rd__itab *t;
  const struct rd__held *h;
} itab_sweep_arg;

static void env_drop(rd__hlink *l, void *arg) {
  node_env *e = (node_env *)l;
  ((itab_sweep_arg *)arg)->t->bytes -= e->is.len;
  free((char *)e->is.key);
  free(e->vars);
  free(e);
}

static void sel_drop(rd__hlink *l, void *arg) {
  ((itab_sweep_arg *)arg)->t->bytes -= ((rd__istr *)l)->len;
  free(l);
}

static int itab_full(const rd__itab *t, size_t len, const char *what, char *err, size_t errlen) {
  if (t->bytes + len <= RD_NODE_INTERN_MAX_BYTES) return 0;
  snprintf(err, errlen, "%s: this node already keeps %zu distinct ones (%zu MiB), all in use", what, t->t.count,
           t->bytes >> 20);
  return RD_ENOMEM;
}

int rd__node_sel(const char *s, const char **out, char *err, size_t errlen) {
  *out = NULL;
  if (!s || !*s) return 0;
  int r = rd_label_alts_check(s, err, errlen);
  if (r != 0) return r;
  size_t len = strlen(s);
  uint64_t hash = rd__hash_bytes(RD_HASH_INIT, s, len);
  rd__istr *f = itab_find(&N.sels, s, len, hash);
  if (f) {
    *out = f->key;
    return 0;
  }
  if ((r = itab_full(&N.sels, len, "label selector", err, errlen)) != 0) return r;
  node_sel *e = malloc(sizeof(*e) + len + 1);
  if (!e) {
    snprintf(err, errlen, "node out of memory");
    return RD_ENOMEM;
  }
  memcpy(e->s, s, len + 1);
  e->is = (rd__istr){{NULL, hash}, e->s, len};
  if (itab_add(&N.sels, &e->is) != 0) {
    free(e);
    snprintf(err, errlen, "node out of memory");
    return RD_ENOMEM;
  }
  *out = e->s;
  return 0;
}

int rd__node_env(char *const *vars, size_t n, const node_env **out, char *err, size_t errlen) {
  *out = NULL;
  char *canon;
  size_t len;
  int r = rd__env_canon((const char *const *)vars, n, &canon, &len, err, errlen);
  if (r != 0 || !canon) return r;
  uint64_t hash = rd__hash_bytes(RD_HASH_INIT, canon, len);
  rd__istr *f = itab_find(&N.envs, canon, len, hash);
  if (f) {
    free(canon);
    *out = (const node_env *)f;
    return 0;
  }
  if ((r = itab_full(&N.envs, len, "env: sets of variables", err, errlen)) != 0) {
    free(canon);
    return r;
  }
  node_env *e = calloc(1, sizeof(*e));
  char **v = calloc(n, sizeof(char *));
  if (!e || !v) {
    free(e);
    free(v);
    free(canon);
    snprintf(err, errlen, "node out of memory");
    return RD_ENOMEM;
  }
  e->vars = v;
  e->n = rd__env_split(canon, len, v, n);
  e->is = (rd__istr){{NULL, hash}, canon, len};
  if (itab_add(&N.envs, &e->is) != 0) {
    free(canon);
    free(v);
    free(e);
    snprintf(err, errlen, "node out of memory");
    return RD_ENOMEM;
  }
  *out = e;
  return 0;
}

node_job *rd__node_job_variant(node_job *base, const node_env *env) {
  base = rd__job_base(base);
  if (!env || !base) return base;
  for (node_job *j = N.jobs; j; j = j->next)
    if (j->base == base && j->env == env) return j;
  node_job *j = job_new(base->identity, base->exe, base->argv, base->argc);
  if (!j) return NULL;
  j->base = base;
  j->env = env;
  rd__log(RD_LOG_INFO, "job %u: workers of job %u with %zu environment variables (%.200s%s)", j->id, base->id, env->n,
          env->vars[0], env->n > 1 ? ", ..." : "");
  return j;
}

/* ------------------------------------------------ interned sets: the sweep
 *
 * Env sets and selectors are interned so that requests, actors and job
 * variants compare them by pointer.  A node that sees many distinct ones
 * over its life (a variable per task, such as a shard number) must give
 * back those nothing uses any more: it would grow without bound, and at
 * RD_NODE_INTERN_MAX_BYTES refuse every new one.  The sweep asks
 * every holder for its pointers (rd__held_add), frees the job variants
 * without workers that nothing names, then the sets (a kept variant holds
 * its own) and selectors nobody holds. */

struct rd__held {
  const void **p[3];
  size_t n[3], cap[3];
  int oom;
};

void rd__held_add(rd__held *h, int kind, const void *p) {
  if (!p || h->oom) return;
  if (h->n[kind] == h->cap[kind]) {
    size_t nc = h->cap[kind] ? h->cap[kind] * 2 : 256;
    const void **g = realloc(h->p[kind], nc * sizeof(*g));
    if (!g) {
      h->oom = 1;
      return;
    }
    h->p[kind] = g;
    h->cap[kind] = nc;
  }
  h->p[kind][h->n[kind]++] = p;
}

static int ptr_cmp(const void *a, const void *b) {
  uintptr_t x = (uintptr_t)*(const void *const *)a, y = (uintptr_t)*(const void *const *)b;
  return x < y ? -1 : x > y;
}

static int held_has(const rd__held *h, int kind, const void *p) {
  return h->n[kind] && bsearch(&p, h->p[kind], h->n[kind], sizeof(void *), ptr_cmp) != NULL;
}

static void held_sort(rd__held *h, int kind) {
  if (h->n[kind]) qsort(h->p[kind], h->n[kind], sizeof(void *), ptr_cmp);
}

/* What this file's structures hold: every client's requests (queued here
 * or in a bundle, and actors' placements) and backlog, the actors (dead
 * ones kept for late callers too), the workers. */
static void client_held(rd__held *h, const node_client *c) {
  rd__held_add(h, RD_HELD_JOB, c->job);
  for (const lease_req *r = c->reqs; r; r = r->next) {
    rd__held_add(h, RD_HELD_JOB, r->job);
    rd__held_add(h, RD_HELD_SEL, r->sel);
  }
  for (size_t i = 0; i < c->nbacklog; i++) rd__held_add(h, RD_HELD_SEL, c->backlog[i].sel);
}

static void node_held(rd__held *h) {
  for (const node_client *c = N.clients; c; c = c->next) client_held(h, c);
  client_held(h, &N.orphans);   /* detached actors' placements whose creator left */
  for (node_actor *a = N.actors; a; a = a->next) {
    rd__held_add(h, RD_HELD_JOB, a->job);
    rd__held_add(h, RD_HELD_ENV, a->env);
    rd__held_add(h, RD_HELD_SEL, a->sel);
    if (a->req) {
      rd__held_add(h, RD_HELD_JOB, a->req->job);
      rd__held_add(h, RD_HELD_SEL, a->req->sel);
    }
  }
  for (node_worker *w = N.workers; w; w = w->next) rd__held_add(h, RD_HELD_JOB, w->job);
}

static int env_held(rd__hlink *e, void *arg) { return held_has(((itab_sweep_arg *)arg)->h, RD_HELD_ENV, e); }

static int sel_held(rd__hlink *e, void *arg) {
  return held_has(((itab_sweep_arg *)arg)->h, RD_HELD_SEL, ((rd__istr *)e)->key);
}

static void job_free(node_job *j) {
  for (char **a = j->argv; *a; a++) free(*a);
  free(j->argv);
  free(j->exe);
  free(j);
}

/* Base job j may go: nothing here runs, waits for or names it, its code is
 * not being stored in the GCS (code_put holds it), its run there has ended,
 * and no variant of it is left. */
static int job_unused(const node_job *j, const rd__held *h) {
  if (j->drivers || j->nworkers || j->nstarting || j->code_state == 1 || j->gcs_job_adding || j->gcs_job_id ||
      held_has(h, RD_HELD_JOB, j))
    return 0;
  for (const node_job *v = N.jobs; v; v = v->next)
    if (v->base == j) return 0;
  return 1;
}

void rd__node_gc(size_t *envs, size_t *sels, size_t *jobs) {
  size_t fe = 0, fs = 0, fj = 0;
  rd__held h;
  memset(&h, 0, sizeof(h));
  if (rd__cluster_fetching()) goto out;
  node_held(&h);
  rd__cluster_held(&h);
  rd__pg_held(&h);
  if (h.oom) goto out;   /* nothing is known to be free */
  held_sort(&h, RD_HELD_JOB);
  for (node_job **pp = &N.jobs; *pp;) {
    node_job *j = *pp;
    if (!j->base || j->nworkers || j->nstarting || j->drivers || held_has(&h, RD_HELD_JOB, j)) {
      if (j->base) rd__held_add(&h, RD_HELD_ENV, j->env);
      pp = &j->next;
      continue;
    }
    rd__log(RD_LOG_DEBUG, "job %u (workers of job %u with %zu environment variables): unused, freed", j->id,
            j->base->id, j->env ? j->env->n : (size_t)0);
    *pp = j->next;
    job_free(j);
    fj++;
  }
  /* then the programs themselves, once no variant is left either: a node
   * that runs many programs over its life (each rebuild of a driver, each
   * job of another node whose code copy was dropped and fetched again is
   * one) kept them all, and their metrics */
  for (node_job **pp = &N.jobs; *pp;) {
    node_job *j = *pp;
    if (j->base || !job_unused(j, &h)) {
      pp = &j->next;
      continue;
    }
    rd__log(RD_LOG_INFO, "job %u (%s): no driver, worker, request or actor here any more: freed", j->id, j->exe);
    *pp = j->next;
    job_free(j);
    fj++;
  }
  if (h.oom) goto out;
  held_sort(&h, RD_HELD_ENV);
  held_sort(&h, RD_HELD_SEL);
  fe = rd__htab_sweep(&N.envs.t, env_held, env_drop, &(itab_sweep_arg){&N.envs, &h});
  fs = rd__htab_sweep(&N.sels.t, sel_held, sel_drop, &(itab_sweep_arg){&N.sels, &h});
  if (fe || fs || fj)
    rd__log(RD_LOG_INFO, "freed %zu unused env sets, %zu label selectors and %zu jobs", fe, fs, fj);
out:
  for (int k = 0; k < 3; k++) free(h.p[k]);
  if (envs) *envs = fe;
  if (sels) *sels = fs;
  if (jobs) *jobs = fj;
}

/* The sweep every RAYDIST_NODE_GC_MS (default 10 s; 0: never). */
static void gc_tick(uint64_t now) {
  static uint64_t period_ns, last_ns;
  if (!period_ns) {
    const char *e = getenv("RAYDIST_NODE_GC_MS");
    long ms = e && *e ? atol(e) : 10000;
    period_ns = ms > 0 && ms <= 86400000 ? (uint64_t)ms * 1000000ull : UINT64_MAX;
  }
  if (period_ns == UINT64_MAX || now - last_ns < period_ns) return;
  last_ns = now;
  rd__node_gc(NULL, NULL, NULL);
}

/* A job nobody here drives, whose workers have all been idle for
 * N.job_quiet_ns (60 s; RAYDIST_JOB_QUIET_MS, for tests), gives its
 * processes back (a later request starts new). */

static void jobs_tick(uint64_t now) {
  for (node_job *j = N.jobs; j; j = j->next) {
    int quiet = rd__job_base(j)->drivers == 0 && j->nidle + j->nstarting == j->nworkers && j->nworkers > 0;
    if (!quiet) {
      j->quiet_since = 0;
      continue;
    }
    if (!j->quiet_since) j->quiet_since = now;
    if (now - j->quiet_since < N.job_quiet_ns) continue;
    rd__log(RD_LOG_INFO, "job %u (%s) has been idle for %.1f s: stopping its %d workers", j->id, j->exe,
            N.job_quiet_ns / 1e9, j->nworkers);
    for (node_worker *w = N.workers; w; w = w->next) {
      if (w->job != j || (w->state != W_IDLE && w->state != W_STARTING)) continue;
      rd__node_worker_state(w, W_DYING);
      w->stop_why = "stopped by the node: its job had no driver and nothing to run";
      if (w->pid > 0) kill(w->pid, SIGKILL);
    }
    j->quiet_since = 0;
    j->prestarted = 0;
  }
}

/* A job's task workers over the soft limit (--prestart: one per CPU by
 * default, the number its drivers keep started) that have been idle for
 * N.idle_trim_ns stop, as with Ray's soft worker limit: a burst of
 * fractional-CPU tasks can start up to max_workers processes, which then go
 * back instead of idling forever.  Actors' workers are not counted and never
 * stopped here; a job without drivers gives all its workers back in
 * jobs_tick. */
static void workers_trim(uint64_t now) {
  if (!N.idle_trim_ns) return;
  const int soft = N.opts.prestart > 0 ? N.opts.prestart : 1;
  for (node_job *j = N.jobs; j; j = j->next) {
    if (!rd__job_base(j)->drivers || j->nworkers <= soft) continue;
    int ntask = 0;
    for (node_worker *w = N.workers; w; w = w->next)
      if (w->job == j && !w->actor && (w->state == W_IDLE || w->state == W_LEASED || w->state == W_STARTING)) ntask++;
    for (node_worker *w = N.workers; w && ntask > soft; w = w->next) {
      if (w->job != j || w->state != W_IDLE || w->actor || now - w->idle_since < N.idle_trim_ns) continue;
      rd__log(RD_LOG_INFO, "stopping worker %u (pid %d) of job %u: idle for %llu ms with %d task workers, over the "
              "soft limit %d", w->id, w->pid, j->id, (unsigned long long)((now - w->idle_since) / 1000000ull), ntask,
              soft);
      rd__node_worker_state(w, W_DYING);
      w->stop_why = "stopped by the node: idle, with more task workers than the soft limit";
      if (w->pid > 0) kill(w->pid, SIGKILL);
      ntask--;
    }
  }
}

/* Killers waiting for the GCS to free a dead actor's name are answered
 * after UNNAMING_LATE_NS anyway (the GCS is down or slow: it retries for up
 * to a minute, longer than rd_actor_kill's call may wait). */
#define UNNAMING_LATE_NS 1000000000ull

static void unnaming_late(uint64_t now) {
  for (node_actor *a = N.actors; a; a = a->next)
    if (a->unnaming && now - a->unnaming > UNNAMING_LATE_NS) {
      rd__log(RD_LOG_WARN, "actor %016llx (%s): the GCS has not freed its name after %llu ms; answering its killers",
              (unsigned long long)a->id, a->name ? a->name : a->cls,
              (unsigned long long)((now - a->unnaming) / 1000000));
      a->unnaming = 0;
      actor_answer_killers(a);
      rd__cluster_name_freed(a->id);
    }
}

/* Dead actors' records stay so that late callers learn why an actor died,
 * but not forever: beyond the RAYDIST_DEAD_ACTORS_KEPT (default 1000) most
 * recent, the oldest are dropped (as the GCS trims its table).  A call on a
 * dropped one is told so (rd__node_actor_connect).  Run from the tick, when
 * no loop over the table is under way. */
static void dead_actors_trim(void) {
  size_t dead = 0, moved = 0;
  for (node_actor *a = N.actors; a; a = a->next) {
    dead += a->state == A_DEAD && !a->given_back;
    moved += a->given_back;
  }
  if (dead <= N.dead_actors_kept && !moved) return;
  /* the table is newest first: drop from the old end; copies given back
   * to their record node at once (they never ran here) */
  size_t seen = 0;
  for (node_actor **pp = &N.actors; *pp;) {
    node_actor *a = *pp;
    int droppable = a->state == A_DEAD && !a->worker && !a->req && !a->connects && !a->killers;
    int over = a->state == A_DEAD && !a->given_back && ++seen > N.dead_actors_kept;
    if (droppable && (a->given_back || over)) {
      *pp = a->next;
      actor_free_fields(a);
      free(a);
      N.dead_actors_dropped++;
      continue;
    }
    pp = &a->next;
  }
}

/* ------------------------------------------------------ memory monitor
 *
 * Every RAYDIST_MEMORY_MONITOR_MS (default 250; 0: off) the node checks its
 * workers' resident memory against RAYDIST_MEMORY_LIMIT_BYTES (default none)
 * and the node's memory in use (the cgroup's limit when one is set, else
 * /proc/meminfo) against RAYDIST_MEMORY_USAGE_THRESHOLD (default 0.95).  Over
 * either, it kills a leased task worker (an actor's only when no task runs),
 * one at a time, and says why.  As Ray's monitor does, it takes the task
 * from the owner with the most tasks running here (ties: the owner whose
 * biggest task is biggest), the biggest of that owner's: its owner retries
 * it without using max_retries while its other tasks run (client.c), and an
 * owner's lone task is the last to go.  The owner gets
 * LeaseLost first, so a task that runs out of retries fails with RD_EOOM and
 * that reason, and an actor dies (or restarts) with it.  This replaces the
 * kernel's OOM killer, which would pick any process, daemon included, and
 * say nothing to the caller. */

static uint64_t proc_rss(int pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/statm", pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  unsigned long long size = 0, resident = 0;
  int n = fscanf(f, "%llu %llu", &size, &resident);
  fclose(f);
  return n == 2 ? (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

static int read_u64_file(const char *path, uint64_t *out) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  unsigned long long v;
  int n = fscanf(f, "%llu", &v);
  fclose(f);
  if (n != 1) return -1;   /* "max": no limit */
  *out = v;
  return 0;
}

/* Memory in use and the most there is: the cgroup's (v2) when it has a
 * limit, the machine's otherwise.  -1 when neither can be read.  A cgroup's
 * usage counts its page cache, which fills up to the limit on any busy
 * machine: the inactive part (what the kernel reclaims first) is not
 * counted, as Ray does. */
static int node_memory(uint64_t *used, uint64_t *total) {
  if (read_u64_file("/sys/fs/cgroup/memory.max", total) == 0 &&
      read_u64_file("/sys/fs/cgroup/memory.current", used) == 0 && *total > 0) {
    FILE *f = fopen("/sys/fs/cgroup/memory.stat", "r");
    char line[128];
    unsigned long long v;
    while (f && fgets(line, sizeof(line), f))
      if (sscanf(line, "inactive_file %llu", &v) == 1) {
        *used = *used > v ? *used - v : 0;
        break;
      }
    if (f) fclose(f);
    return 0;
  }
  FILE *f = fopen("/proc/meminfo", "r");
  if (!f) return -1;
  char line[256];
  unsigned long long mt = 0, ma = 0, v;
  while (fgets(line, sizeof(line), f)) {
    if (sscanf(line, "MemTotal: %llu kB", &v) == 1) mt = v;
    else if (sscanf(line, "MemAvailable: %llu kB", &v) == 1) ma = v;
  }
  fclose(f);
  if (!mt || ma > mt) return -1;
  *total = (uint64_t)mt * 1024;
  *used = (uint64_t)(mt - ma) * 1024;
  return 0;
}

/* Leased task workers of the same owner on this node. */
static int owner_tasks_here(const node_client *owner) {
  int n = 0;
  for (node_worker *w = N.workers; w; w = w->next)
    if (w->state == W_LEASED && !w->actor && w->lease_owner == owner) n++;
  return n;
}

static void memory_monitor(uint64_t now) {
  if (!N.mem_period_ns || now - N.mem_last_ns < N.mem_period_ns) return;
  N.mem_last_ns = now;
  node_worker *task = NULL, *actor = NULL;
  uint64_t sum = 0, task_rss = 0, actor_rss = 0;
  int task_group = 0;   /* tasks here of the chosen task's owner */
  for (node_worker *w = N.workers; w; w = w->next) {
    if (w->state == W_DYING && w->kill_why[0]) return;   /* the last kill has not freed its memory yet */
    if (w->state == W_DEAD || w->pid <= 0) continue;
    uint64_t r = proc_rss(w->pid);
    sum += r;
    if (w->state != W_LEASED) continue;
    if (w->actor && r > actor_rss) actor = w, actor_rss = r;
    if (w->actor) continue;
    int g = owner_tasks_here(w->lease_owner);
    if (g > task_group || (g == task_group && r > task_rss)) task = w, task_rss = r, task_group = g;
  }
  char why[160];
  uint64_t used = 0, total = 0;
  const double mib = 1048576.0;
  if (N.mem_limit && sum > N.mem_limit) {
    snprintf(why, sizeof(why), "the node's workers hold %.0f MiB, over its limit of %.0f MiB", sum / mib,
             N.mem_limit / mib);
  } else if (N.mem_threshold > 0 && node_memory(&used, &total) == 0 && (double)used > N.mem_threshold * (double)total) {
    snprintf(why, sizeof(why), "node memory %.0f%% used (%.0f of %.0f MiB), over the threshold of %.0f%%",
             100.0 * (double)used / (double)total, used / mib, total / mib, 100.0 * N.mem_threshold);
  } else {
    return;
  }
  node_worker *v = task ? task : actor;
  if (!v) {
    if (now - N.mem_warned_ns > 10000000000ull) {
      N.mem_warned_ns = now;
      rd__log(RD_LOG_WARN, "memory monitor: %s, and no task or actor runs here to stop", why);
    }
    return;
  }
  uint64_t rss = v == task ? task_rss : actor_rss;
  char whose[64];
  if (v == task)
    snprintf(whose, sizeof(whose), "the %d task%s here of the owner with the most", task_group,
             task_group == 1 ? "" : "s");
  snprintf(v->kill_why, sizeof(v->kill_why), "killed by the memory monitor: %s; it held %.0f MiB, the most of %s",
           why, rss / mib, v == task ? whose : "its actors (no task ran)");
  N.mem_kills++;
  rd__log(RD_LOG_WARN, "worker %u (pid %d) %s", v->id, v->pid, v->kill_why);
  if (v->actor) {
    rd__node_worker_state(v, W_DYING);   /* worker_on_exit tells the actor's callers why */
    kill(v->pid, SIGKILL);
    return;
  }
  if (rd__cluster_worker_kill(v, RD_EOOM, v->kill_why)) return;   /* an owner on another node */
  lease_owner_tell(v, RD_EOOM, v->kill_why);
  flush_all();   /* before the kill: the owner reads why before the socket breaks */
  worker_kill_leased(v);
  dispatch();
}

/* ------------------------------------------------------------- metrics */

/* A label value in Prometheus text: backslash, quote and newline escaped. */
static void label_escape(char *out, size_t len, const char *in) {
  size_t k = 0;
  for (; *in && k + 2 < len; in++) {
    if (*in == '\\' || *in == '"') out[k++] = '\\', out[k++] = *in;
    else if (*in == '\n') out[k++] = '\\', out[k++] = 'n';
    else out[k++] = *in;
  }
  out[k] = 0;
}

const char *const rd__worker_state_names[] = {"starting", "idle", "leased", "dying", "dead"};
const char *const rd__actor_state_names[] = {"pending", "starting", "alive", "dead"};

void rd__node_census_take(rd__node_census *c) {
  memset(c, 0, sizeof(*c));
  for (node_worker *w = N.workers; w; w = w->next) {
    if (w->state >= 0 && w->state <= W_DEAD) c->workers[w->state]++;
    c->blocked += w->blocked;
  }
  for (node_actor *a = N.actors; a; a = a->next)
    if (a->state >= 0 && a->state <= A_DEAD && !a->given_back) c->actors[a->state]++;
  for (node_client *k = N.clients; k; k = k->next) c->drivers += !k->dead && k->role == ROLE_DRIVER;
}

void rd__node_metrics(rd__mbuf *b) {
  const double unit = RD_RES_UNIT;
  rd_resources av = rd__node_avail();
  const rd_resources *tot = &N.ledger.total;
  rd__mbuf_family(b, "raydist_uptime_seconds", "gauge", "Seconds since the node daemon started.");
  rd__mbuf_printf(b, "raydist_uptime_seconds %.3f\n", (double)(rd__now_ns() - N.start_ns) / 1e9);
  rd__mbuf_family(b, "raydist_cluster_nodes_alive", "gauge", "Live nodes in this node's view of the cluster (1 alone).");
  rd__mbuf_printf(b, "raydist_cluster_nodes_alive %d\n", rd__cluster_alive_nodes());
  uint64_t held, waits, seekers;
  rd__job_hold_counts(&held, &waits, &seekers);
  rd__mbuf_family(b, "raydist_job_holds", "gauge",
                  "Jobs whose drivers hold their entrypoint resources here, jobs waiting for them (PENDING), and jobs "
                  "waiting for a node that has them (seeking: autoscaler demand).");
  rd__mbuf_printf(b,
                  "raydist_job_holds{state=\"held\"} %llu\nraydist_job_holds{state=\"waiting\"} %llu\n"
                  "raydist_job_holds{state=\"seeking\"} %llu\n",
                  (unsigned long long)held, (unsigned long long)waits, (unsigned long long)seekers);
  const char *res_fam[2] = {"raydist_resources_total", "raydist_resources_available"};
  const char *res_help[2] = {"Resources this node has (CPU and GPU in units, memory in bytes).",
                             "Resources free now (CPUs lent back by blocked tasks count as free; never below 0)."};
  for (int k = 0; k < 2; k++) {
    const rd_resources *r = k ? &av : tot;
    rd__mbuf_family(b, res_fam[k], "gauge", res_help[k]);
    rd__mbuf_printf(b, "%s{resource=\"CPU\"} %g\n%s{resource=\"GPU\"} %g\n%s{resource=\"memory\"} %llu\n",
                    res_fam[k], r->cpu / unit, res_fam[k], r->gpu / unit, res_fam[k], (unsigned long long)r->memory);
    for (int i = 0; i < tot->ncustom; i++) {
      char name[80];
      label_escape(name, sizeof(name), tot->custom[i].name);
      rd__mbuf_printf(b, "%s{resource=\"%s\"} %g\n", res_fam[k], name,
                      rd_res_get_custom(r, tot->custom[i].name) / unit);
    }
  }
  rd__mbuf_family(b, "raydist_gpu_share_used", "gauge", "Fraction of each GPU granted to leases and actors.");
  for (int i = 0; i < N.ledger.ngpus; i++)
    rd__mbuf_printf(b, "raydist_gpu_share_used{gpu=\"%d\"} %g\n", N.ledger.gpu_dev[i],
                    (N.ledger.gpu_cap[i] - N.ledger.gpu_avail[i]) / unit);
  rd__node_census cs;
  rd__node_census_take(&cs);
  uint64_t rss = 0;
  for (node_worker *w = N.workers; w; w = w->next)
    if (w->state != W_DEAD && w->pid > 0) rss += proc_rss(w->pid);
  rd__mbuf_family(b, "raydist_workers", "gauge", "Worker processes of this node by state.");
  for (int s = W_STARTING; s <= W_DYING; s++)
    rd__mbuf_printf(b, "raydist_workers{state=\"%s\"} %d\n", rd__worker_state_names[s], cs.workers[s]);
  rd__mbuf_family(b, "raydist_workers_blocked", "gauge", "Leased task workers waiting in rd_get/rd_wait (CPUs lent).");
  rd__mbuf_printf(b, "raydist_workers_blocked %d\n", cs.blocked);
  rd__mbuf_family(b, "raydist_workers_resident_bytes", "gauge", "Resident memory of all worker processes together.");
  rd__mbuf_printf(b, "raydist_workers_resident_bytes %llu\n", (unsigned long long)rss);
  uint64_t qlen = N.queue.len;
  for (node_bundle *bu = N.bundles; bu; bu = bu->next) qlen += bu->queue.len;
  rd__mbuf_family(b, "raydist_lease_requests_queued", "gauge", "Lease and actor placement requests waiting here.");
  rd__mbuf_printf(b, "raydist_lease_requests_queued %llu\n", (unsigned long long)qlen);
  rd__mbuf_family(b, "raydist_leases_granted_total", "counter", "Worker leases granted since start.");
  rd__mbuf_printf(b, "raydist_leases_granted_total %llu\n", (unsigned long long)N.leases_granted);
  rd__mbuf_family(b, "raydist_fair_share_yields_total", "counter",
                  "Leases asked back from a job over its fair share for another job's waiting request.");
  rd__mbuf_printf(b, "raydist_fair_share_yields_total %llu\n", (unsigned long long)N.fair_yields);
  {
    size_t ne = N.envs.t.count, ns = N.sels.t.count, nv = 0, nj = 0;
    for (const node_job *j = N.jobs; j; j = j->next) {
      nv += j->base != NULL;
      nj += j->base == NULL;
    }
    rd__mbuf_family(b, "raydist_node_interned", "gauge",
                    "Distinct env sets, label selectors, jobs and job variants the node keeps while something uses them.");
    rd__mbuf_printf(b, "raydist_node_interned{kind=\"env_sets\"} %zu\nraydist_node_interned{kind=\"label_selectors\"} "
                    "%zu\nraydist_node_interned{kind=\"job_variants\"} %zu\nraydist_node_interned{kind=\"jobs\"} %zu\n",
                    ne, ns, nv, nj);
  }
  rd__mbuf_family(b, "raydist_requests_respilled_total", "counter",
                  "Requests and pending actors that waited here and were placed again on a node that had room.");
  rd__mbuf_printf(b, "raydist_requests_respilled_total %llu\n", (unsigned long long)rd__cluster_respilled());
  rd__mbuf_family(b, "raydist_object_pull_retries_total", "counter",
                  "Pulls of an object a waiting get made again after a transient failure.");
  rd__mbuf_printf(b, "raydist_object_pull_retries_total %llu\n", (unsigned long long)rd__cluster_pull_retries());
  rd__mbuf_family(b, "raydist_link_channels", "gauge",
                  "Leases and actor connections bridged over this node's links now (a connection this node relays "
                  "between two others counts twice).");
  rd__mbuf_printf(b, "raydist_link_channels %zu\n", rd__cluster_channels());
  rd__mbuf_family(b, "raydist_spills_refused_total", "counter",
                  "Requests placed here on another node that refused them: its room was gone (stale view).");
  rd__mbuf_printf(b, "raydist_spills_refused_total %llu\n", (unsigned long long)rd__cluster_refused_busy());
  rd__mbuf_family(b, "raydist_job_nodes_avoided", "gauge",
                  "(job, env set, node) entries left out of placement now: the node could not start those workers.");
  rd__mbuf_printf(b, "raydist_job_nodes_avoided %d\n", rd__cluster_avoided());
  rd__mbuf_histogram(b, "raydist_lease_wait_seconds", "Time from a lease request reaching this node to its grant.",
                     N.lease_wait, N.lease_wait_n, (double)N.lease_wait_ns / 1e9);
  rd__mbuf_histogram(b, "raydist_task_run_seconds",
                     "Run time of tasks and actor calls in this node's workers (reported within 200 ms).",
                     N.task_run.buckets, N.task_run.n, (double)N.task_run.sum_ns / 1e9);
  rd__mbuf_family(b, "raydist_tasks_failed_total", "counter", "Tasks and actor calls here that returned an error.");
  rd__mbuf_printf(b, "raydist_tasks_failed_total %llu\n", (unsigned long long)N.task_run.failed);
  rd__mbuf_histogram(b, "raydist_task_latency_seconds",
                     "Tasks and actor calls owned by processes of this node (drivers, workers that submit), from "
                     "submit to result or failure as the owner sees it (reported within 100 ms).",
                     N.task_lat.buckets, N.task_lat.n, (double)N.task_lat.sum_ns / 1e9);
  rd__mbuf_family(b, "raydist_owned_tasks_failed_total", "counter",
                  "Of those, the ones that failed (the task's error, a worker or node death, a cancel).");
  rd__mbuf_printf(b, "raydist_owned_tasks_failed_total %llu\n", (unsigned long long)N.task_lat.failed);
  uint64_t own_waiting, own_sent, own_classes;
  rd__node_owned(NULL, &own_waiting, &own_sent, &own_classes);
  rd__mbuf_family(b, "raydist_owned_tasks", "gauge",
                  "Tasks and actor calls that owners connected here submitted and have no result for yet: waiting "
                  "(for arguments, a lease, an actor) or sent to a worker.");
  rd__mbuf_printf(b, "raydist_owned_tasks{state=\"waiting\"} %llu\nraydist_owned_tasks{state=\"sent\"} %llu\n",
                  (unsigned long long)own_waiting, (unsigned long long)own_sent);
  rd__mbuf_family(b, "raydist_owner_classes", "gauge",
                  "Scheduling classes (tasks with distinct resources, options, env sets or label selectors) that "
                  "owners connected here keep; each is given back 5 s after its last use.");
  rd__mbuf_printf(b, "raydist_owner_classes %llu\n", (unsigned long long)own_classes);
  job_metrics(b);
  if (N.nfns) {   /* no family without a series */
    fn_histograms(b, "raydist_function_run_seconds",
                  "Run time of each remote function and actor method (Class.method) in this node's workers.", 0);
    rd__mbuf_family(b, "raydist_function_failed_total", "counter",
                    "Calls of each remote function and actor method here that returned an error.");
    for (size_t i = 0; i < N.nfns; i++) {
      rd__mbuf_printf(b, "raydist_function_failed_total{function=\"");
      rd__mbuf_label_value(b, N.fns[i].name);
      rd__mbuf_printf(b, "\"} %llu\n", (unsigned long long)N.fns[i].run.failed);
    }
    fn_histograms(b, "raydist_function_latency_seconds",
                  "raydist_task_latency_seconds by function: submit to result, for the owners connected here.", 1);
  }
  rd__mbuf_family(b, "raydist_stream_items_total", "counter",
                  "Items yielded by streaming tasks and actor calls here (reported when their calls end).");
  rd__mbuf_printf(b, "raydist_stream_items_total %llu\n", (unsigned long long)N.stream_items);
  rd__mbuf_family(b, "raydist_actors", "gauge", "Actors recorded or hosted on this node by state.");
  for (int s = A_PENDING; s <= A_DEAD; s++)
    rd__mbuf_printf(b, "raydist_actors{state=\"%s\"} %d\n", rd__actor_state_names[s], cs.actors[s]);
  rd__mbuf_family(b, "raydist_drivers", "gauge", "Driver processes connected to this node.");
  rd__mbuf_printf(b, "raydist_drivers %d\n", cs.drivers);
  rd_store_stats ss;
  rd_store_get_stats(N.store, &ss);
  rd__mbuf_family(b, "raydist_object_store_bytes", "gauge",
                  "Object store: capacity, bytes in use, bytes spilled, bytes being spilled or read back, "
                  "bytes of objects in the fallback region past the capacity and its limit.");
  rd__mbuf_printf(b, "raydist_object_store_bytes{kind=\"capacity\"} %llu\n"
                     "raydist_object_store_bytes{kind=\"used\"} %llu\n"
                     "raydist_object_store_bytes{kind=\"spilled\"} %llu\n"
                     "raydist_object_store_bytes{kind=\"spilling\"} %llu\n"
                     "raydist_object_store_bytes{kind=\"restoring\"} %llu\n"
                     "raydist_object_store_bytes{kind=\"fallback\"} %llu\n"
                     "raydist_object_store_bytes{kind=\"fallback_limit\"} %llu\n",
                  (unsigned long long)ss.capacity, (unsigned long long)ss.used, (unsigned long long)ss.bytes_spilled,
                  (unsigned long long)ss.spilling_bytes, (unsigned long long)ss.restoring_bytes,
                  (unsigned long long)ss.fallback_used, (unsigned long long)ss.fallback_limit);
  rd__mbuf_family(b, "raydist_object_store_fallback_allocations_total", "counter",
                  "Objects placed in the fallback region (they did not fit even by spilling) since start.");
  rd__mbuf_printf(b, "raydist_object_store_fallback_allocations_total %llu\n", (unsigned long long)ss.fallback_count);
  rd__mbuf_family(b, "raydist_object_store_objects", "gauge", "Objects in the store, in memory or spilled.");
  rd__mbuf_printf(b, "raydist_object_store_objects{where=\"memory\"} %llu\nraydist_object_store_objects{where=\"spilled\"} %llu\n",
                  (unsigned long long)ss.num_in_memory, (unsigned long long)ss.num_spilled);
  rd__mbuf_family(b, "raydist_object_store_spills_total", "counter", "Objects spilled to disk since start.");
  rd__mbuf_printf(b, "raydist_object_store_spills_total %llu\n", (unsigned long long)ss.spill_count);
  rd__mbuf_family(b, "raydist_object_store_restores_total", "counter", "Spilled objects read back since start.");
  rd__mbuf_printf(b, "raydist_object_store_restores_total %llu\n", (unsigned long long)ss.restore_count);
  rd__mbuf_family(b, "raydist_object_store_spill_failures_total", "counter",
                  "Background spill writes that failed (disk full or I/O error).");
  rd__mbuf_printf(b, "raydist_object_store_spill_failures_total %llu\n", (unsigned long long)ss.spill_failures);
  uint64_t used = 0, total = 0;
  if (node_memory(&used, &total) == 0) {
    rd__mbuf_family(b, "raydist_node_memory_bytes", "gauge", "Memory of the node (its cgroup's when limited).");
    rd__mbuf_printf(b, "raydist_node_memory_bytes{kind=\"used\"} %llu\nraydist_node_memory_bytes{kind=\"total\"} %llu\n",
                    (unsigned long long)used, (unsigned long long)total);
  }
  rd__mbuf_family(b, "raydist_memory_monitor_kills_total", "counter", "Workers the memory monitor killed since start.");
  rd__mbuf_printf(b, "raydist_memory_monitor_kills_total %llu\n", (unsigned long long)N.mem_kills);
  rd__mbuf_family(b, "raydist_workers_exited_total", "counter",
                  "Worker processes that exited since start, by Ray's exit type (SYSTEM_ERROR: crashed or killed from "
                  "outside).");
  for (int k = 0; k < 5; k++)
    rd__mbuf_printf(b, "raydist_workers_exited_total{exit_type=\"%s\"} %llu\n", exit_types[k],
                    (unsigned long long)N.exits[k]);
  rd__app_metrics_print(b);   /* the application's own (rd_metric_*), last */
}

/* ----------------------------------------------------------- lifecycle */

static void on_tick(uv_timer_t *t) {
  (void)t;
  rd__pg_tick();
  if (N.parked) retry_parked(1);
  if (N.parked_creates) retry_parked_creates();
  /* fair share: a slice runs out with time, not with an event */
  if (N.queue.head && rd__fair_active()) dispatch();
  /* a job whose last worker start failed (out of files or processes) tries
   * again each tick while requests wait for a worker: no other event may
   * come to dispatch them, and the third failure in a row settles what
   * waits (dispatch).  After three, while its own task workers are busy
   * and requests wait for more, once a second (files may be free again) */
  uint64_t now = rd__now_ns();
  for (node_job *j = N.jobs; j; j = j->next) {
    if (j->spawn_failures >= 3 && j->want > j->nstarting && now - j->spawn_fail_ns >= 1000000000ull)
      j->spawn_failures = 2;   /* one more try */
    if (j->spawn_failures > 0 && j->spawn_failures < 3 && j->want > j->nstarting) {
      dispatch();
      break;
    }
  }
  /* an actor that fits the node but not what is free now waits, like a task;
   * say so once, with what it asks for and what is free, instead of silence */
  for (node_actor *a = N.actors; a; a = a->next) {
    if (a->state == A_PENDING && a->pending_since && !a->warned && now - a->pending_since > 5000000000ull) {
      a->warned = 1;
      if (a->pg_id) {
        rd__log(RD_LOG_WARN, "actor %016llx (%s) has waited 5 s for bundle %d of placement group %016llx",
                (unsigned long long)a->id, a->cls, a->bundle_index, (unsigned long long)a->pg_id);
        continue;
      }
      rd__log(RD_LOG_WARN,
              "actor %016llx (%s) has waited 5 s for resources: it asks for {CPU: %g, GPU: %g, memory: %lld}; "
              "free now {CPU: %g, GPU: %g, memory: %lld} (other actors and leases hold the rest)",
              (unsigned long long)a->id, a->cls, rd_res_to_double(a->res.cpu), rd_res_to_double(a->res.gpu),
              (long long)a->res.memory, rd_res_to_double(N.ledger.avail.cpu), rd_res_to_double(N.ledger.avail.gpu),
              (long long)N.ledger.avail.memory);
    }
  }
  for (node_worker *w = N.workers; w; w = w->next)
    if (w->kill_deadline && now > w->kill_deadline && w->pid > 0) {
      w->node_kill = 1;
      kill(w->pid, SIGKILL);
      w->kill_deadline = 0;
    }
  jobs_tick(now);
  gc_tick(now);
  workers_trim(now);
  memory_monitor(now);
  dead_actors_trim();
  unnaming_late(now);
  flush_all();
  (void)rd__log_rotate_maybe(now);   /* node.log past RAYDIST_ROTATION_MAX_BYTES: node.log.1 */
}

static void close_walk_cb(uv_handle_t *h, void *arg) {
  (void)arg;
  if (uv_is_closing(h) || h->type == UV_PROCESS) return;
  uv_close(h, h->type == UV_NAMED_PIPE ? out_closed : NULL);   /* the only pipes: workers' output */
}

static void node_shutdown(void) {
  if (N.shutting_down) return;
  N.shutting_down = 1;
  rd__log(RD_LOG_INFO, "shutting down");
  /* the workers first: one still starting, its connection waiting to be
   * accepted, would otherwise see it reset when the socket closes and
   * write why in its file before the signal came, and a session whose
   * workers wrote anything is kept (rd__session_end) for that line alone */
  for (node_worker *w = N.workers; w; w = w->next)
    if (w->pid > 0) kill(w->pid, SIGKILL);
  uv_poll_stop(&N.listen_poll);
  close(N.listen_fd);
  unlink(N.sock_path);
  rd__metrics_stop();
  rd__cluster_stop();
}

static void on_signal(uv_signal_t *s, int sig) {
  (void)s;
  rd__log(RD_LOG_INFO, "signal %d", sig);
  node_shutdown();
}

static int listen_unix(const char *path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  struct sockaddr_un a;
  memset(&a, 0, sizeof(a));
  a.sun_family = AF_UNIX;
  if (strlen(path) >= sizeof(a.sun_path)) { close(fd); errno = ENAMETOOLONG; return -1; }
  strcpy(a.sun_path, path);
  unlink(path);
  mode_t old = umask(077);
  int r = bind(fd, (struct sockaddr *)&a, sizeof(a));
  umask(old);
  if (r != 0 || chmod(path, 0600) != 0 || listen(fd, 128) != 0) { close(fd); return -1; }
  return fd;
}

/* Count GPUs through the CUDA driver API when it is installed (no link-time
 * dependency), and each one's memory into mem[] (left 0 where not known):
 * 0 GPUs when there is no driver or no device. */
static int detect_gpus(uint64_t mem[RD_RES_MAX_GPUS], char *name0, size_t name_len) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return 0;
  int (*init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
  int (*count)(int *) = (int (*)(int *))dlsym(h, "cuDeviceGetCount");
  int (*get)(int *, int) = (int (*)(int *, int))dlsym(h, "cuDeviceGet");
  int (*total)(size_t *, int) = (int (*)(size_t *, int))dlsym(h, "cuDeviceTotalMem_v2");
  int (*getname)(char *, int, int) = (int (*)(char *, int, int))dlsym(h, "cuDeviceGetName");
  int n = 0;
  if (!init || !count || init(0) != 0 || count(&n) != 0) n = 0;
  for (int i = 0; i < n && i < RD_RES_MAX_GPUS && get && total; i++) {
    int dev;
    size_t bytes;
    if (get(&dev, i) == 0 && total(&bytes, dev) == 0) mem[i] = bytes;
    if (i == 0 && getname && get(&dev, 0) == 0 && getname(name0, (int)name_len, dev) != 0) name0[0] = '\0';
  }
  dlclose(h);
  return n;
}


/* Adds the runtime's own label key=value to N.labels: 0, or RD_EINVAL
 * with err (a malformed value, or no room). */
static int sys_label(const char *key, const char *value, char *err, size_t errlen) {
  char all[RD_LABELS_LEN + 256], with[RD_LABELS_LEN];
  snprintf(all, sizeof(all), "%s%s%s=%s", N.labels, N.labels[0] ? "," : "", key, value);
  int r = rd_labels_canon_sys(all, with, sizeof(with), err, errlen);
  if (r == 0) memcpy(N.labels, with, sizeof(N.labels));
  return r;
}

/* An embedded node has no cluster token: it makes one of its own, in
 * SESSION/token (0600), that `raydist stack` on this machine reads to ask
 * its stack API (stack_dump.c).  None when that fails (logged).  One
 * short write: a reader finds it empty (and skips the node) or whole. */
static void local_token_make(const char *session) {
  char path[600];
  snprintf(path, sizeof(path), "%s/token", session);
  if (rd__make_token(path, 16, N.local_token, sizeof(N.local_token)) != 0) {
    rd__log(RD_LOG_WARN, "cannot write %s: %s (raydist stack cannot reach this node)", path, strerror(errno));
    (void)unlink(path);
    N.local_token[0] = 0;
  }
}

const char *rd__node_local_token(void) { return N.local_token; }

int rd__node_main(const rd_node_opts *opts) {
  memset(&N, 0, sizeof(N));
  N.orphans.role = ROLE_DRIVER;
  N.orphans.dead = 1;
  N.orphans.conn.fd = -1;
  N.idle_trim_ns = 10000000000ull;
  N.start_ns = rd__now_ns();
  const char *dk = getenv("RAYDIST_DEAD_ACTORS_KEPT");
  N.dead_actors_kept = dk && *dk ? strtoull(dk, NULL, 10) : 1000;
  const char *ek = getenv("RAYDIST_WORKERS_EXITED_KEPT");   /* for ray list workers; 0: none */
  N.exited_max = ek && *ek ? strtoull(ek, NULL, 10) : 1000;
  if (N.exited_max > 100000) N.exited_max = 100000;
  const char *th = getenv("RAYDIST_TASK_HISTORY");   /* finished tasks kept for ray list tasks; 0: none */
  N.tasks_done_max = th && *th ? strtoull(th, NULL, 10) : 100000;
  if (N.tasks_done_max > 1000000) N.tasks_done_max = 1000000;
  const char *lts = getenv("RAYDIST_LOG_TO_STDERR");   /* Ray's RAY_LOG_TO_STDERR: no files for the workers */
  N.worker_files = !(lts && atoi(lts) > 0);
  const char *tl = getenv("RAYDIST_TIMELINE");
  N.timeline_on = tl && atoi(tl) > 0;
  const char *quiet = getenv("RAYDIST_JOB_QUIET_MS");
  long qms = quiet && *quiet ? atol(quiet) : 0;
  N.job_quiet_ns = (qms > 0 && qms <= 86400000 ? (uint64_t)qms : 60000ull) * 1000000ull;
  const char *trim = getenv("RAYDIST_WORKER_IDLE_MS");   /* tests shorten it; 0 = never */
  if (trim && *trim) N.idle_trim_ns = (uint64_t)strtoull(trim, NULL, 10) * 1000000ull;
  const char *e = getenv("RAYDIST_MEMORY_MONITOR_MS");
  N.mem_period_ns = (e && *e ? strtoull(e, NULL, 10) : 250) * 1000000ull;
  e = getenv("RAYDIST_MEMORY_USAGE_THRESHOLD");
  N.mem_threshold = e && *e ? atof(e) : 0.95;
  if (!(N.mem_threshold > 0 && N.mem_threshold <= 1)) N.mem_threshold = 0;
  e = getenv("RAYDIST_MEMORY_LIMIT_BYTES");
  N.mem_limit = e && *e ? strtoull(e, NULL, 10) : 0;
  N.opts = *opts;
  rd__log_init("node");
  if (opts->log_level >= 0) rd__log_set_level(opts->log_level);
  rd__raise_nofile();   /* the workers inherit it */
  signal(SIGPIPE, SIG_IGN);
  /* libuv's thread pool (4 threads unless set) runs object pulls, up to
   * RD_CL_MAX_PULLS at once, beside the heartbeat and GCS calls: read once,
   * at its first use, so set here, before any */
  setenv("UV_THREADPOOL_SIZE", RD_NODE_POOL_THREADS, 0);
  N.loop = uv_default_loop();

  rd_resources total;
  memset(&total, 0, sizeof(total));
  total.cpu = opts->num_cpus;
  int64_t gpus = opts->num_gpus;
  uint64_t gpu_mem[RD_RES_MAX_GPUS] = {0};
  char gpu_name[256] = "";
  int detected = gpus < 0 || (gpus > 0 && !opts->gpu_memory) ? detect_gpus(gpu_mem, gpu_name, sizeof(gpu_name)) : 0;
  if (gpus < 0) gpus = (int64_t)detected * RD_RES_UNIT;
  if (gpus / RD_RES_UNIT > RD_RES_MAX_GPUS) gpus = (int64_t)RD_RES_MAX_GPUS * RD_RES_UNIT;
  for (int i = 0; i < RD_RES_MAX_GPUS; i++) N.gpu_mem[i] = opts->gpu_memory ? opts->gpu_memory : gpu_mem[i];
  total.gpu = gpus;
  total.memory = (int64_t)opts->memory;
  char err[200] = "";
  if (rd__res_parse_custom(&total, opts->custom_resources, err, sizeof(err)) != 0) {
    rd__log(RD_LOG_ERROR, "--resources: %s", err);
    return 2;
  }
  if (rd_labels_canon(opts->labels, N.labels, sizeof(N.labels), err, sizeof(err)) != 0) {
    rd__log(RD_LOG_ERROR, "--labels: %s", err);
    return 2;
  }
  char accel[64];
  if (detected > 0 && gpus > 0 && rd_accel_type(gpu_name, accel, sizeof(accel)) == 0) {
    /* the runtime's own label, beside the user's (Ray's accelerator type) */
    if (sys_label(RD_LABEL_ACCEL, accel, err, sizeof(err)) != 0)
      rd__log(RD_LOG_WARN, "no %s label for GPU '%s': %s", RD_LABEL_ACCEL, gpu_name, err);
    else rd__log(RD_LOG_INFO, "GPU 0 is '%s': label %s=%s", gpu_name, RD_LABEL_ACCEL, accel);
  }
  /* started by the autoscaler (runtime/autoscaler.c): its kind and launch */
  const char *ntype = getenv("RAYDIST_NODE_TYPE"), *launch = getenv("RAYDIST_LAUNCH_ID");
  if (ntype && *ntype && (sys_label(RD_LABEL_NODE_TYPE, ntype, err, sizeof(err)) != 0 ||
                          (launch && *launch && sys_label(RD_LABEL_LAUNCH_ID, launch, err, sizeof(err)) != 0))) {
    rd__log(RD_LOG_ERROR, "RAYDIST_NODE_TYPE / RAYDIST_LAUNCH_ID: %s", err);
    return 2;
  }
  rd_res_ledger_init(&N.ledger, &total);
  rd_sched_queue_init(&N.queue);
  rd__fair_init();

  rd_store_config sc;
  memset(&sc, 0, sizeof(sc));
  sc.capacity = opts->store_bytes;
  sc.fallback_bytes = opts->store_fallback_bytes;
  if (sc.fallback_bytes == UINT64_MAX) {   /* a container's limit, not its host's memory */
    uint64_t used, total;
    sc.fallback_bytes = node_memory(&used, &total) == 0 ? total / 2
                        : (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE) / 2;
  }
  sc.spill_dir = opts->spill_dir && *opts->spill_dir ? opts->spill_dir : NULL;
  sc.prefault = 1;
  sc.spill_threshold = 0.8;   /* Ray's object_spilling_threshold */
  const char *sth = getenv("RAYDIST_SPILL_THRESHOLD");   /* 0: spill only inside creates */
  if (sth && *sth) {
    char *end;
    double v = strtod(sth, &end);
    if (*end || !(v >= 0 && v <= 1))
      rd__log(RD_LOG_WARN, "RAYDIST_SPILL_THRESHOLD=%s is not a share in [0, 1]; using %g", sth, sc.spill_threshold);
    else
      sc.spill_threshold = v;
  }
  if (sc.spill_dir) mkdir(sc.spill_dir, 0700);
  int st = rd_store_open(&N.store, &sc);
  if (st != 0) {
    rd__log(RD_LOG_ERROR, "cannot create the object store (%llu bytes): %s",
            (unsigned long long)opts->store_bytes, rd_strerror(st));
    return 1;
  }
  snprintf(N.sock_path, sizeof(N.sock_path), "%s/%s", opts->session_dir, RD_NODE_SOCK);
  N.listen_fd = listen_unix(N.sock_path);
  N.reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);   /* on_accept's room when out of files */
  if (N.listen_fd < 0) {
    rd__log(RD_LOG_ERROR, "cannot listen on %s: %s", N.sock_path, strerror(errno));
    rd_store_close(N.store);
    return 1;
  }
  if (opts->metrics_port >= 0) {   /* before joining: the node registers its port */
    char merr[300];
    const char *ip = opts->node_ip && *opts->node_ip ? opts->node_ip : "127.0.0.1";
    if (rd__metrics_start(N.loop, ip, opts->metrics_port, opts->session_dir, merr, sizeof(merr)) != 0)
      rd__log(RD_LOG_ERROR, "no metrics endpoint: %s", merr);   /* the node serves on without it */
    else if (opts->embedded) local_token_make(opts->session_dir);
  }
  if (opts->embedded) {   /* what its session's end needs (rd__session_end) */
    (void)rd__session_lock(opts->session_dir);
    emb.driver_pid = (int)getppid();   /* the driver spawned it */
    emb.start_ms = rd__wall_ms();
    emb.kept = rd__sessions_kept();
  }
  char cerr[300] = "";
  if (rd__cluster_start(opts, cerr, sizeof(cerr)) != 0) {
    rd__log(RD_LOG_ERROR, "cannot join the cluster at %s: %s", opts->gcs_address, cerr);
    fprintf(stderr, "raydist node: cannot join the cluster at %s: %s\n", opts->gcs_address, cerr);
    rd__metrics_stop();
    rd__cluster_stop();
    rd__cluster_free();
    close(N.listen_fd);
    unlink(N.sock_path);
    rd_store_close(N.store);
    return 1;
  }
  uv_poll_init(N.loop, &N.listen_poll, N.listen_fd);
  uv_poll_start(&N.listen_poll, UV_READABLE, on_accept);
  if (rd_store_spill_fd(N.store) >= 0) {
    uv_poll_init(N.loop, &N.spill_poll, rd_store_spill_fd(N.store));
    uv_poll_start(&N.spill_poll, UV_READABLE, on_spill_done);
  }
  uv_timer_init(N.loop, &N.tick);
  uv_timer_start(&N.tick, on_tick, 50, 50);
  uv_signal_init(N.loop, &N.sigterm);
  uv_signal_start(&N.sigterm, on_signal, SIGTERM);
  uv_signal_init(N.loop, &N.sigint);
  uv_signal_start(&N.sigint, on_signal, SIGINT);

  rd__log(RD_LOG_INFO, "node up: %s, %g CPUs, %g GPUs, store %llu bytes", N.sock_path,
          rd_res_to_double(total.cpu), rd_res_to_double(total.gpu), (unsigned long long)opts->store_bytes);
  if (opts->ready_fd >= 0) {
    ssize_t w = write(opts->ready_fd, "R", 1);
    (void)w;
    close(opts->ready_fd);
  }

  while (!N.shutting_down) uv_run(N.loop, UV_RUN_ONCE);
  /* shutting down: drop clients, wait for the workers' exit callbacks */
  while (N.clients) client_drop(N.clients, "node shutting down");
  uint64_t deadline = rd__now_ns() + 3000000000ull;
  while (N.nworkers > 0 && rd__now_ns() < deadline) uv_run(N.loop, UV_RUN_NOWAIT), usleep(1000);
  uv_walk(N.loop, close_walk_cb, NULL);
  uv_run(N.loop, UV_RUN_DEFAULT);
  char *driver_exe = NULL;   /* the driver's job's program (the first job; variants have a base) */
  for (const node_job *j = N.jobs; j; j = j->next)
    if (!j->base && j->exe && (!driver_exe || j->id == 1)) free(driver_exe), driver_exe = strdup(j->exe);
  while (N.parked_creates) {
    parked_create *p = N.parked_creates;
    N.parked_creates = p->next;
    free(p);
  }
  while (N.parked) {
    parked_get *p = N.parked;
    N.parked = p->next;
    parked_free(p);
  }
  free(N.tl);
  N.tl = NULL;
  free(N.exited);
  N.exited = NULL;
  N.nexited = N.exited_next = 0;
  free(N.fns);
  N.fns = NULL;
  N.nfns = N.fns_cap = 0;
  while (N.actors) {
    node_actor *a = N.actors;
    N.actors = a->next;
    actor_free_fields(a);
    free(a);
  }
  rd__cluster_free();
  rd__pg_free();
  rd__job_hold_free();
  if (N.kv) N.kv->ops->destroy(N.kv);
  N.kv = NULL;
  rd__htab_free(&N.sels.t, sel_drop, &(itab_sweep_arg){&N.sels, NULL});
  rd__htab_free(&N.envs.t, env_drop, &(itab_sweep_arg){&N.envs, NULL});
  while (N.bundles) {
    node_bundle *b = N.bundles;
    N.bundles = b->next;
    free(b);
  }
  rd_store_close(N.store);
  if (sc.spill_dir) rmdir(sc.spill_dir);
  while (N.jobs) {
    node_job *j = N.jobs;
    N.jobs = j->next;
    for (char **a = j->argv; *a; a++) free(*a);
    free(j->argv);
    free(j->exe);
    free(j);
  }
  uv_loop_close(N.loop);
  /* an embedded node's session is its driver's alone: it ends with it,
   * whether or not the driver lived to see it (a driver killed or that
   * exited without rd_shutdown left it behind, its metrics file and logs/
   * in it): gone, or kept with only its workers' files when they wrote
   * anything (RAYDIST_SESSIONS_KEPT) */
  if (opts->embedded) {
    rd__mbuf tl = {0};
    rd__node_task_lines_json(&tl);
    rd__session_end(opts->session_dir, tl.oom ? 0 : emb.kept, emb.driver_pid, driver_exe, emb.start_ms,
                    tl.p ? tl.p : "", tl.len);
    free(tl.p);
  }
  free(driver_exe);
  rd__log(RD_LOG_INFO, "node down");
  return 0;
}
