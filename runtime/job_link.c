/* runtime/job_link.c - a node's side of `raydist job --address`: job
 * operations asked over a tool link (MSG_LINK_JOB) by `raydist job` run on
 * a machine without a node of the cluster (Ray's job submission server).
 *
 * The link is a node link opened with LinkHello.tool and the cluster token
 * (cluster.c checks both and lets such a link send LINK_JOB only).  The
 * node answers every request with one LINK_JOB_REPLY:
 *
 *   submit  fetch the program (and its working directory's tar) from the
 *           GCS code table into <session>/code (as for a shipped driver),
 *           then run `raydist job submit` here, the same keeper a local
 *           submit uses; the job runs in its own directory, jobs/<id>/ (or
 *           the working directory unpacked in jobs/<id>/wd/)
 *   list    run `raydist job list`
 *   stop    run `raydist job stop ID --timeout T`
 *   delete  run `raydist job delete ID`
 *   withdraw run `raydist job withdraw ID` (a PENDING job ends unstarted
 *           and its record goes: a job's mirror moving it to a node whose
 *           room came free first)
 *   logs    read the job's log from an offset (1 MiB at most a reply)
 *   state   the job's state, as `job list` shows it
 *
 * The commands run as child processes of the node (uv_spawn: nothing is
 * forked from this threaded daemon but an exec), with the node's session
 * named, their output captured and sent back with their exit status; so a
 * remote job is a local job in every way (`raydist job list` on the node
 * shows it, `raydist stop` ends it).  At most JL_MAX_RUNNING run at once;
 * more are refused RD_EAGAIN. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_cluster.h"
#include "cluster.h"
#include "common.h"
#include "job_log.h"
#include "log.h"
#include "raydist.h"
#include "sha256.h"

#define JL_MAX_RUNNING 16
#define JL_OUT_MAX (1u << 20)        /* a command's stdout or stderr kept, each */
#define JL_LOG_CHUNK (1u << 20)      /* log bytes in one reply */
#define JL_ARGS_MAX 4096             /* argv and env entries of a submit, each */
#define JL_ARG_BYTES (1u << 20)      /* their bytes together */
#define JL_STOP_SLACK_MS 15000       /* a stop command's time beyond its timeout */
#define JL_WAIT_MAX 256              /* logs and state requests waiting at once */
#define JL_WAIT_MAX_MS 30000         /* the longest wait */
#define JL_WAIT_TICK_MS 50           /* how often a wait without an inotify watch is looked at */

enum { JL_SUBMIT = 1, JL_LIST = 2, JL_LOGS = 3, JL_STATE = 4, JL_STOP = 5, JL_DELETE = 6, JL_WITHDRAW = 7 };

typedef struct jl_out {
  uv_pipe_t pipe;           /* data: its jl_op */
  char *buf;
  size_t len;               /* kept; bytes past JL_OUT_MAX are dropped */
} jl_out;

typedef struct jl_op {
  uv_work_t work;           /* submit: the code fetch */
  uv_process_t proc;
  uv_timer_t timer;         /* the command's time limit */
  jl_out out[2];
  int handles;              /* open handles; freed at 0 */
  int spawned, exited, reading;
  int64_t exit_status;
  int term_signal;
  node_client *link;        /* may be dropped meanwhile: checked by id */
  uint32_t link_id;
  uint64_t req_id;
  int op;
  char **args;              /* the command's argv, NULL-terminated */
  char hash[65];
  char path[600];
  char wd_hash[65];         /* submit --working-dir: its tar, or "" */
  char wd_path[600];
  int status;
  char err[256];
  uint64_t retry_since;
  rd__job_cmd_done done;    /* rd__job_cmd: called instead of a reply on a link */
  void *done_arg;
  struct jl_op *next;
} jl_op;

static struct {
  jl_op *ops;
  int running;
  int stopping;
} J;

static void reply(node_client *link, uint32_t link_id, Rd__LinkJobReply *r) {
  node_client *c = rd__node_client_by_id(link_id);
  if (!c || c != link || c->dead) return;   /* the tool left */
  rd__node_send(c, RD__MSG_TYPE__MSG_LINK_JOB_REPLY, &r->base, -1);
  rd__node_flush_all();
}

/* link_id: link's id when the request came (link may be freed since) */
static void reply_error(node_client *link, uint32_t link_id, uint64_t req_id, int status, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void reply_error(node_client *link, uint32_t link_id, uint64_t req_id, int status, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  Rd__LinkJobReply r = RD__LINK_JOB_REPLY__INIT;
  r.req_id = req_id;
  r.status = status;
  r.error = msg;
  reply(link, link_id, &r);
}

/* o cannot run: its link is told, or its caller (rd__job_cmd). */
static void op_error(jl_op *o, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void op_error(jl_op *o, int status, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (o->done) {
    rd__job_cmd_done done = o->done;
    o->done = NULL;   /* once */
    done(o->done_arg, status, msg, -1, "", "");
  } else {
    reply_error(o->link, o->link_id, o->req_id, status, "%s", msg);
  }
}

static void op_free(jl_op *o) {
  for (jl_op **p = &J.ops; *p; p = &(*p)->next)
    if (*p == o) {
      *p = o->next;
      break;
    }
  if (o->args)
    for (char **a = o->args; *a; a++) free(*a);
  free(o->args);
  free(o->out[0].buf);
  free(o->out[1].buf);
  J.running--;
  free(o);
}

static void handle_closed(uv_handle_t *h) {
  jl_op *o = h->data;
  if (--o->handles == 0) op_free(o);
}

static void close_all(jl_op *o) {
  uv_handle_t *hs[] = {(uv_handle_t *)&o->proc, (uv_handle_t *)&o->timer, (uv_handle_t *)&o->out[0].pipe,
                       (uv_handle_t *)&o->out[1].pipe};
  int any = 0;
  for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++)
    if (hs[i]->data == o && !uv_is_closing(hs[i])) {
      uv_close(hs[i], handle_closed);
      any = 1;
    }
  if (!any && o->handles == 0) op_free(o);
}

/* The command ended and both of its outputs are read: answer. */
static void maybe_done(jl_op *o) {
  if (!o->exited || o->reading) return;
  int code = o->term_signal ? 128 + o->term_signal : (int)o->exit_status;
  if (o->done) {
    rd__job_cmd_done done = o->done;
    o->done = NULL;
    done(o->done_arg, 0, NULL, code, o->out[0].buf ? o->out[0].buf : "", o->out[1].buf ? o->out[1].buf : "");
    close_all(o);
    return;
  }
  if (!o->link) {   /* an rd__job_cmd already answered (the node stops) */
    close_all(o);
    return;
  }
  Rd__LinkJobReply r = RD__LINK_JOB_REPLY__INIT;
  r.req_id = o->req_id;
  r.exit_code = code;
  r.out.data = (uint8_t *)o->out[0].buf;
  r.out.len = o->out[0].len;
  r.err.data = (uint8_t *)o->out[1].buf;
  r.err.len = o->out[1].len;
  if (o->op == JL_SUBMIT && r.exit_code == 0) {   /* "job N submitted: ..." */
    unsigned id = 0;
    if (o->out[0].buf && sscanf(o->out[0].buf, "job %u submitted", &id) == 1) r.id = id;
  }
  reply(o->link, o->link_id, &r);
  close_all(o);
}

static void out_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b) {
  (void)suggested;
  jl_out *s = (jl_out *)((char *)h - offsetof(jl_out, pipe));
  static char sink[65536];
  if (!s->buf) s->buf = malloc(JL_OUT_MAX + 1);
  if (!s->buf || s->len >= JL_OUT_MAX) {   /* read and drop */
    b->base = sink;
    b->len = sizeof(sink);
    return;
  }
  b->base = s->buf + s->len;
  b->len = JL_OUT_MAX - s->len;
}

static void out_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b) {
  jl_out *s = (jl_out *)((char *)st - offsetof(jl_out, pipe));
  if (n < 0) {
    jl_op *o = st->data;
    uv_read_stop(st);
    o->reading--;
    if (s->buf) s->buf[s->len] = 0;
    maybe_done(o);
    return;
  }
  if (s->buf && b->base == s->buf + s->len) s->len += (size_t)n;
}

static void on_exit_cb(uv_process_t *p, int64_t status, int sig) {
  jl_op *o = p->data;
  o->exited = 1;
  o->exit_status = status;
  o->term_signal = sig;
  uv_timer_stop(&o->timer);
  maybe_done(o);
}

static void on_time_limit(uv_timer_t *t) {
  jl_op *o = t->data;
  rd__log(RD_LOG_WARN, "job tool: `raydist job` command (op %d) over its time; killing it", o->op);
  uv_process_kill(&o->proc, SIGKILL);
}

/* Run o->args (the raydist binary's `job` command) with its output piped
 * here, for at most limit_ms. */
static void spawn(jl_op *o, uint64_t limit_ms) {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) {
    op_error(o, RD_ESYS, "the node cannot find its own executable: %s", strerror(errno));
    op_free(o);
    return;
  }
  exe[n] = 0;
  uv_stdio_container_t stdio[3];
  stdio[0].flags = UV_IGNORE;
  for (int i = 0; i < 2; i++) {
    uv_pipe_init(N.loop, &o->out[i].pipe, 0);
    o->out[i].pipe.data = o;
    o->handles++;
    stdio[i + 1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    stdio[i + 1].data.stream = (uv_stream_t *)&o->out[i].pipe;
  }
  uv_timer_init(N.loop, &o->timer);
  o->timer.data = o;
  o->handles++;
  uv_process_options_t po;
  memset(&po, 0, sizeof(po));
  po.file = exe;
  po.args = o->args;
  po.stdio = stdio;
  po.stdio_count = 3;
  po.exit_cb = on_exit_cb;
  o->proc.data = o;
  int r = uv_spawn(N.loop, &o->proc, &po);
  o->handles++;   /* a failed spawn's handle is closed too */
  if (r != 0) {
    rd__log(RD_LOG_ERROR, "job tool: cannot run %s: %s", exe, uv_strerror(r));
    op_error(o, RD_ESYS, "the node cannot run %s: %s", exe, uv_strerror(r));
    close_all(o);
    return;
  }
  o->spawned = 1;
  for (int i = 0; i < 2; i++)
    if (uv_read_start((uv_stream_t *)&o->out[i].pipe, out_alloc, out_read) == 0) o->reading++;
  uv_timer_start(&o->timer, on_time_limit, limit_ms, 0);
}

static char **args_new(size_t extra) { return calloc(extra + 1, sizeof(char *)); }

/* Appends a copy of s to a (with room for it, from args_new's count). */
static int args_put(char **a, size_t *k, const char *s) {
  if (!(a[*k] = strdup(s))) return -1;
  (*k)++;
  return 0;
}

/* ---- submit: the code first ---- */

static void fetch_work(uv_work_t *w) {
  jl_op *o = w->data;
  o->status = rd__cluster_code_ensure(o->hash, o->path, o->err, sizeof(o->err));
  if (!o->status && o->wd_hash[0]) o->status = rd__cluster_code_ensure(o->wd_hash, o->wd_path, o->err, sizeof(o->err));
}

static void fetch_done(uv_work_t *w, int status) {
  jl_op *o = w->data;
  if (status == 0 && rd__cluster_gcs_retry(w, fetch_work, fetch_done, o->status, &o->retry_since)) return;
  if (status != 0 || J.stopping) {
    reply_error(o->link, o->link_id, o->req_id, RD_ECANCELED, "the node is stopping");
    op_free(o);
    return;
  }
  if (o->status != 0) {
    reply_error(o->link, o->link_id, o->req_id, o->status, "cannot fetch the program %.16s%s from the GCS: %s", o->hash,
                o->wd_hash[0] ? " or its working directory" : "", o->err);
    op_free(o);
    return;
  }
  spawn(o, 60000);
}

static int env_ok(const char *e) {
  const char *eq = strchr(e, '=');
  return eq && eq != e && !strchr(e, '\n');
}

static void op_submit(jl_op *o, const Rd__LinkJob *m) {
  size_t bytes = 0;
  for (size_t i = 0; i < m->n_argv; i++) bytes += strlen(m->argv[i]) + 1;
  for (size_t i = 0; i < m->n_env; i++) bytes += strlen(m->env[i]) + 1;
  const char *bad = NULL;
  if (!rd_sha256_is_hex(m->code_hash)) bad = "the program's code hash must be 64 lowercase hex digits";
  else if (m->working_dir_hash && m->working_dir_hash[0] && !rd_sha256_is_hex(m->working_dir_hash))
    bad = "the working directory's hash must be 64 lowercase hex digits";
  else if (m->n_argv == 0 || !m->argv[0][0]) bad = "submit needs the program's argv";
  else if (m->n_argv > JL_ARGS_MAX || m->n_env > JL_ARGS_MAX || bytes > JL_ARG_BYTES)
    bad = "too many arguments or environment entries";
  else if (m->name && (strlen(m->name) >= 128 || strchr(m->name, '\n')))
    bad = "a job name of at most 127 characters on one line";
  for (size_t i = 0; !bad && i < m->n_env; i++)
    if (!env_ok(m->env[i])) bad = "environment entries are NAME=VALUE on one line";
  char why[300];
  rd_resources res;
  if (!bad && m->resources && m->resources[0] && rd__res_parse_spec(m->resources, &res, why, sizeof(why)) != 0)
    bad = why;
  if (bad) {
    reply_error(o->link, o->link_id, o->req_id, RD_EINVAL, "%s", bad);
    op_free(o);
    return;
  }
  snprintf(o->hash, sizeof(o->hash), "%s", m->code_hash);
  snprintf(o->path, sizeof(o->path), "%s/code/%s", N.opts.session_dir, o->hash);
  if (m->working_dir_hash && m->working_dir_hash[0]) {
    snprintf(o->wd_hash, sizeof(o->wd_hash), "%s", m->working_dir_hash);
    snprintf(o->wd_path, sizeof(o->wd_path), "%s/code/%s", N.opts.session_dir, o->wd_hash);
  }
  size_t k = 0;
  o->args = args_new(16 + 2 * m->n_env + m->n_argv);
  int fail = !o->args;
  const char *fixed[] = {"raydist", "job", "submit", "--session", N.opts.session_dir, "--in-job-dir", "--exe", o->path};
  for (size_t i = 0; !fail && i < sizeof(fixed) / sizeof(fixed[0]); i++) fail = args_put(o->args, &k, fixed[i]);
  if (!fail && m->name && m->name[0]) fail = args_put(o->args, &k, "--name") || args_put(o->args, &k, m->name);
  if (!fail && o->wd_hash[0]) fail = args_put(o->args, &k, "--working-dir-tar") || args_put(o->args, &k, o->wd_path);
  for (size_t i = 0; !fail && i < m->n_env; i++) fail = args_put(o->args, &k, "--env") || args_put(o->args, &k, m->env[i]);
  if (!fail && m->resources && m->resources[0])
    fail = args_put(o->args, &k, "--entrypoint-resources") || args_put(o->args, &k, m->resources);
  if (!fail) fail = args_put(o->args, &k, "--");
  for (size_t i = 0; !fail && i < m->n_argv; i++) fail = args_put(o->args, &k, m->argv[i]);
  if (fail) {
    reply_error(o->link, o->link_id, o->req_id, RD_ENOMEM, "node out of memory");
    op_free(o);
    return;
  }
  o->work.data = o;
  if (uv_queue_work(N.loop, &o->work, fetch_work, fetch_done) != 0) {
    reply_error(o->link, o->link_id, o->req_id, RD_ESYS, "the node cannot queue the code fetch");
    op_free(o);
  }
}

/* ---- waiting for a job's output or end ---- */

typedef struct jl_wait {
  int id;
  uint64_t off;             /* due once the job has written past it (UINT64_MAX: its end only) */
  uint64_t deadline_ns;
  rd__job_wait_fn fire;
  void *arg;
  uv_fs_event_t ev;         /* on the job's directory (inotify), where its log and status change; w is freed by its close */
  int watching;             /* ev started; else only the timer looks */
  struct jl_wait *next;
} jl_wait;

static struct {
  jl_wait *head;
  int n, timer_init;
  uv_timer_t timer;         /* the nearest deadline, a second at most (JL_WAIT_TICK_MS while one has no watch) */
} W;

static int wait_due(const jl_wait *w, uint64_t now) {
  char state[64], jd[900];
  int ended = 0;
  if (now >= w->deadline_ns || J.stopping) return 1;
  if (rd__cli_job_state(N.opts.session_dir, w->id, state, sizeof(state), &ended) != 0 || ended) return 1;
  if (w->off == UINT64_MAX) return 0;
  snprintf(jd, sizeof(jd), "%s/jobs/%d", N.opts.session_dir, w->id);
  return rd__job_log_end(jd) > w->off;
}

static void wait_free(uv_handle_t *h) { free(h->data); }

/* Not in W's list: answer it, and free it once its watch is closed. */
static void wait_end(jl_wait *w) {
  w->fire(w->arg);
  uv_close((uv_handle_t *)&w->ev, wait_free);
}

static void wait_tick(uv_timer_t *t);

/* The timer for the nearest deadline, at most a second away (the watch
 * sees the news, but a killed keeper writes none), or JL_WAIT_TICK_MS
 * away while a wait has no watch. */
static void wait_arm(void) {
  if (!W.head) {
    uv_timer_stop(&W.timer);
    return;
  }
  uint64_t now = rd__now_ns(), ms = 1000;
  for (jl_wait *w = W.head; w; w = w->next) {
    uint64_t left = w->deadline_ns > now ? (w->deadline_ns - now + 999999) / 1000000 : 0;
    if (left < ms) ms = left;
    if (!w->watching && ms > JL_WAIT_TICK_MS) ms = JL_WAIT_TICK_MS;
  }
  uv_timer_start(&W.timer, wait_tick, ms, 0);
}

static void wait_tick(uv_timer_t *t) {
  (void)t;
  uint64_t now = rd__now_ns();
  for (jl_wait **pp = &W.head; *pp;) {
    jl_wait *w = *pp;
    if (!wait_due(w, now)) {
      pp = &w->next;
      continue;
    }
    *pp = w->next;
    W.n--;
    wait_end(w);
  }
  wait_arm();
}

/* Something changed in the job's directory (its log written, a segment
 * cut, its status written): look at this wait now. */
static void wait_event(uv_fs_event_t *h, const char *file, int events, int status) {
  (void)file;
  (void)events;
  (void)status;   /* an error (the directory went): wait_due finds the job gone */
  jl_wait *w = h->data;
  if (uv_is_closing((uv_handle_t *)h) || !wait_due(w, rd__now_ns())) return;
  for (jl_wait **pp = &W.head; *pp; pp = &(*pp)->next)
    if (*pp == w) {
      *pp = w->next;
      W.n--;
      wait_end(w);
      wait_arm();
      return;
    }
}

int rd__job_wait(int id, uint64_t off, uint64_t wait_ms, rd__job_wait_fn fire, void *arg) {
  if (J.stopping) return RD_ECANCELED;
  if (W.n >= JL_WAIT_MAX) return RD_EAGAIN;
  jl_wait *w = calloc(1, sizeof(*w));
  if (!w) return RD_ENOMEM;
  if (uv_fs_event_init(N.loop, &w->ev) != 0) {
    free(w);
    return RD_ENOMEM;
  }
  uint64_t now = rd__now_ns();
  w->id = id;
  w->off = off;
  w->deadline_ns = now + (wait_ms > JL_WAIT_MAX_MS ? JL_WAIT_MAX_MS : wait_ms) * 1000000ull;
  w->fire = fire;
  w->arg = arg;
  w->ev.data = w;
  /* watched before the first look, so that a change between the two is seen */
  char jd[900];
  snprintf(jd, sizeof(jd), "%s/jobs/%d", N.opts.session_dir, id);
  w->watching = uv_fs_event_start(&w->ev, wait_event, jd, 0) == 0;   /* else (no inotify left): the timer looks */
  if (wait_due(w, now)) {
    wait_end(w);
    return 0;
  }
  if (!W.timer_init) {
    uv_timer_init(N.loop, &W.timer);
    W.timer_init = 1;
  }
  w->next = W.head;
  W.head = w;
  W.n++;
  wait_arm();
  return 0;
}

/* ---- logs and state: read here ---- */

typedef struct jl_read {
  node_client *link;
  uint32_t link_id, id;
  uint64_t req_id, offset;
  int op;
} jl_read;

static void read_reply(const jl_read *q) {
  char state[64];
  int ended = 0;
  if (q->id == 0 || rd__cli_job_state(N.opts.session_dir, (int)q->id, state, sizeof(state), &ended) != 0) {
    reply_error(q->link, q->link_id, q->req_id, RD_ENOENT, "no job %u on this node", q->id);
    return;
  }
  Rd__LinkJobReply r = RD__LINK_JOB_REPLY__INIT;
  r.req_id = q->req_id;
  r.id = q->id;
  r.state = state;
  r.ended = ended;
  r.offset = q->offset;
  char *buf = NULL;
  if (q->op == JL_LOGS && (buf = malloc(JL_LOG_CHUNK))) {
    char jd[900];
    snprintf(jd, sizeof(jd), "%s/jobs/%u", N.opts.session_dir, q->id);
    uint64_t off = q->offset, dropped = 0;
    size_t n = rd__job_log_read(jd, &off, buf, JL_LOG_CHUNK, &dropped);
    r.out.data = (uint8_t *)buf;
    r.out.len = n;
    r.offset = off;
    r.dropped = dropped;
    /* more may come (another segment): not ended for the reader until a
     * read finds nothing */
    if (n > 0) r.ended = 0;
  }
  reply(q->link, q->link_id, &r);
  free(buf);
}

static void read_fire(void *arg) {
  read_reply(arg);
  free(arg);
}

/* logs and state at once, or with a timeout (seconds) once there is
 * output past the offset (logs) or the job has ended, or the time is up */
static void op_read(node_client *c, const Rd__LinkJob *m) {
  jl_read q = {c, c->id, m->id, m->req_id, m->offset, m->op}, *w;
  if (!(m->timeout > 0) || !(w = malloc(sizeof(*w)))) {
    read_reply(&q);
    return;
  }
  *w = q;
  uint64_t ms = m->timeout * 1000 < JL_WAIT_MAX_MS ? (uint64_t)(m->timeout * 1000) : JL_WAIT_MAX_MS;
  if (rd__job_wait((int)m->id, m->op == JL_LOGS ? m->offset : UINT64_MAX, ms, read_fire, w) != 0) read_fire(w);
}

void rd__job_link(node_client *c, const Rd__LinkJob *m) {
  if (m->op == JL_LOGS || m->op == JL_STATE) {
    op_read(c, m);
    return;
  }
  if (m->op != JL_SUBMIT && m->op != JL_LIST && m->op != JL_STOP && m->op != JL_DELETE && m->op != JL_WITHDRAW) {
    reply_error(c, c->id, m->req_id, RD_EINVAL, "unknown job operation %d", m->op);
    return;
  }
  if (J.stopping) {
    reply_error(c, c->id, m->req_id, RD_ECANCELED, "the node is stopping");
    return;
  }
  if (J.running >= JL_MAX_RUNNING) {
    reply_error(c, c->id, m->req_id, RD_EAGAIN, "the node runs %d job commands already; retry later", J.running);
    return;
  }
  if (m->op == JL_STOP && (m->id == 0 || !(m->timeout >= 0 && m->timeout <= 3600))) {
    reply_error(c, c->id, m->req_id, RD_EINVAL, "stop needs a job id and a timeout of 0..3600 s");
    return;
  }
  if ((m->op == JL_DELETE || m->op == JL_WITHDRAW) && m->id == 0) {
    reply_error(c, c->id, m->req_id, RD_EINVAL, "%s needs a job id", m->op == JL_DELETE ? "delete" : "withdraw");
    return;
  }
  jl_op *o = calloc(1, sizeof(*o));
  if (!o) {
    reply_error(c, c->id, m->req_id, RD_ENOMEM, "node out of memory");
    return;
  }
  o->link = c;
  o->link_id = c->id;
  o->req_id = m->req_id;
  o->op = m->op;
  o->next = J.ops;
  J.ops = o;
  J.running++;
  if (m->op == JL_SUBMIT) {
    op_submit(o, m);
    return;
  }
  char id[16], tmo[32];
  snprintf(id, sizeof(id), "%u", m->id);
  snprintf(tmo, sizeof(tmo), "%g", m->timeout);
  const char *list[] = {"raydist", "job", "list", "--session", N.opts.session_dir, NULL};
  const char *stop[] = {"raydist", "job", "stop", id, "--session", N.opts.session_dir, "--timeout", tmo, NULL};
  const char *del[] = {"raydist", "job", "delete", id, "--session", N.opts.session_dir, NULL};
  const char *wd[] = {"raydist", "job", "withdraw", id, "--session", N.opts.session_dir, NULL};
  const char **a = m->op == JL_LIST ? list : m->op == JL_STOP ? stop : m->op == JL_WITHDRAW ? wd : del;
  size_t k = 0, n = 0;
  while (a[n]) n++;
  o->args = args_new(n);
  int fail = !o->args;
  for (size_t i = 0; !fail && i < n; i++) fail = args_put(o->args, &k, a[i]);
  if (fail) {
    reply_error(c, c->id, m->req_id, RD_ENOMEM, "node out of memory");
    op_free(o);
    return;
  }
  spawn(o, m->op == JL_STOP ? (uint64_t)(m->timeout * 1000) + JL_STOP_SLACK_MS : 60000);
}

int rd__job_cmd(const char *const *argv, uint64_t limit_ms, rd__job_cmd_done done, void *arg, char *why,
                size_t whylen) {
  if (J.stopping) {
    snprintf(why, whylen, "the node is stopping");
    return RD_ECANCELED;
  }
  if (J.running >= JL_MAX_RUNNING) {
    snprintf(why, whylen, "the node runs %d job commands already; retry later", J.running);
    return RD_EAGAIN;
  }
  jl_op *o = calloc(1, sizeof(*o));
  size_t n = 0, k = 0;
  while (argv[n]) n++;
  int fail = !o || !(o->args = args_new(n));
  for (size_t i = 0; !fail && i < n; i++) fail = args_put(o->args, &k, argv[i]);
  if (fail) {
    if (o && o->args)
      for (char **a = o->args; *a; a++) free(*a);
    if (o) free(o->args);
    free(o);
    snprintf(why, whylen, "node out of memory");
    return RD_ENOMEM;
  }
  o->done = done;
  o->done_arg = arg;
  o->next = J.ops;
  J.ops = o;
  J.running++;
  spawn(o, limit_ms);
  return 0;
}

void rd__job_link_stop(void) {
  J.stopping = 1;
  while (W.head) {   /* answered now, as they are */
    jl_wait *w = W.head;
    W.head = w->next;
    W.n--;
    wait_end(w);
  }
  if (W.timer_init && !uv_is_closing((uv_handle_t *)&W.timer)) uv_close((uv_handle_t *)&W.timer, NULL);
  for (jl_op *o = J.ops; o; o = o->next) {
    if (o->done) op_error(o, RD_ECANCELED, "the node is stopping");
    if (!o->spawned && o->handles == 0) continue;   /* a fetch: its continuation frees it */
    if (o->spawned && !o->exited) uv_process_kill(&o->proc, SIGKILL);
    close_all(o);
  }
}
