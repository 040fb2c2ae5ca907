/* src/internal.h - state shared by the client side of libraydist (client.c:
 * owner of objects and tasks, worker.c: the worker loop, registry.c).
 *
 * One process-wide context guarded by one mutex.  Only these three files
 * include this header; the daemon never does. */
#ifndef RD_SRC_INTERNAL_H
#define RD_SRC_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "common.h"
#include "conn.h"
#include "raydist.h"
#include "labels.h"
#include "resources.h"
#include "u64map.h"

typedef struct rd__blob {
  int refs;
  size_t size;
  uint8_t data[];
} rd__blob;

enum { OBJ_PENDING, OBJ_PUT_OPEN, OBJ_INLINE, OBJ_STORE, OBJ_FAILED };

typedef struct rd__task rd__task;

/* A FIFO of ids: v[head..len); room is made by moving down when full. */
typedef struct rd__idq {
  uint64_t *v;
  size_t head, len, cap;
} rd__idq;

static inline size_t rd__idq_count(const rd__idq *q) { return q->len - q->head; }
static inline uint64_t rd__idq_pop(rd__idq *q) { return q->v[q->head++]; }
static inline int rd__idq_push(rd__idq *q, uint64_t id) {
  if (q->len == q->cap && q->head > 0) {
    memmove(q->v, q->v + q->head, (q->len - q->head) * sizeof(*q->v));
    q->len -= q->head;
    q->head = 0;
  }
  if (q->len == q->cap) {
    size_t nc = q->cap ? 2 * q->cap : 16;
    uint64_t *p = (uint64_t *)realloc(q->v, nc * sizeof(*p));
    if (!p) return -1;
    q->v = p;
    q->cap = nc;
  }
  q->v[q->len++] = id;
  return 0;
}

/* A streaming task's items (RD_STREAMING), kept by its owner: those come and
 * not yet taken by rd_stream_next, and the ids granted to the running
 * attempt for the next ones (item i is made under the i-th id granted).
 * Lives while its stream object is referenced or its task is alive. */
typedef struct rd__stream {
  uint64_t gen;             /* the stream object: rd_get gives the item count */
  rd__task *task;           /* NULL once the task has ended */
  int window;               /* items it may yield ahead of rd_stream_next; -1: no limit */
  int abandoned;            /* the stream ref was released: items are dropped as they come */
  rd__idq items;            /* come, not taken */
  uint64_t received, taken; /* items come (all attempts), taken by rd_stream_next */
  rd__idq grants;           /* ids granted to the attempt and not used yet, in order */
  uint64_t limit;           /* items the attempt may make (received + its unused grants) */
  uint32_t node;            /* where its last store item was made (unused ids deleted there) */
} rd__stream;

typedef struct rd__obj {
  uint64_t id;
  int state;
  int refs;            /* user references */
  int uses;            /* queued or running tasks that take it as an argument */
  int err;
  uint32_t node;       /* OBJ_STORE: the node whose store holds it (0 on an embedded cluster) */
  rd__blob *blob;      /* OBJ_INLINE value, OBJ_FAILED message, OBJ_PUT_OPEN buffer */
  rd__task *lineage;   /* OBJ_STORE on another node: the finished task that made it,
                        * kept to run again if that node is lost */
  rd__task **deps;     /* tasks waiting for this object */
  int ndeps, capdeps;
  int deps_want;            /* submit_task: dependents it is about to take (0 between calls) */
  uint64_t ready_ns;   /* when it last became ready (a rebuilt result: when the rebuild ended) */
  /* Borrowed refs (rd_arg_borrow).  In a worker, a ref it was given is a
   * proxy: `borrowed`, never deleted from a store by this process, resolved
   * by asking `from` (the connection the task came on) with MSG_BORROW_GET
   * while PENDING.  In whoever was asked (owner or a borrower passing it on),
   * `bwait` lists the connections whose MSG_BORROW_GET waits for it. */
  int borrowed;
  struct rd__serve *from;
  struct rd__lease **bwait;
  int nbwait, capbwait;
  /* Kept borrows: an actor that still holds a borrowed ref when its call
   * returns tells `origin` (the connection the ref came on) that it keeps
   * it (MSG_BORROW_HOLD, `kept`), and when it lets go (MSG_BORROW_DROP).
   * The process told lists the connection in `holds` (one entry per hold)
   * and keeps the object while any is there. */
  struct rd__serve *origin;
  int kept;
  struct rd__lease **holds;
  int nholds, capholds;
  /* Contained refs (rd_put_refs, rd_return_refs): ids of the objects this
   * one holds.  `inner_held`: each is one reference here, dropped when this
   * object goes (an owner's object always; a proxy once it lends them on
   * or rd_get_refs takes them, since it must then answer for them). */
  uint64_t *inner;
  uint32_t ninner;
  int inner_held;
  rd__stream *stream;  /* a streaming task's stream object */
  int watchers;        /* rd__watch_add: kept for rd_wait/rd_get, but not a taker of its items */
  struct rd__cqw *cqw; /* completion-queue watches (rd_cq_add) fired when it becomes ready */
} rd__obj;

typedef struct rd__targ {
  int by_ref;
  int borrow;           /* by_ref passed as the ref itself (rd_arg_borrow): not a dependency */
  uint64_t *list;       /* rd_arg_borrow_refs: nlist borrowed ids (by_ref 0), in the task's allocation */
  size_t nlist;
  uint64_t oid;
  const uint8_t *data;  /* by value: inside the task's own allocation */
  size_t size;
} rd__targ;

typedef struct rd__sclass rd__sclass;
typedef struct rd__lease rd__lease;
typedef struct rd__actor rd__actor;

/* Asking again for a worker after a failure that may pass (this process or
 * its node out of files or memory): not before after_ns (50 ms doubled per
 * failure up to 1 s); what waits fails once the failures have gone on for
 * RAYDIST_LEASE_RETRY_MS since since_ns with nothing else to run it
 * (client.c, ask_backoff). */
typedef struct {
  uint64_t after_ns;        /* 0: ask when needed */
  uint64_t since_ns;        /* the first failure of this run (0: none) */
  int n;                    /* failures in a row */
} rd__ask_backoff;

struct rd__task {
  uint64_t task_id;
  const char *func;
  rd__sclass *cls;
  int nargs, nret;
  int deps_pending;
  int retries_left, max_retries, attempt;
  int retry_failures;       /* rd_task_opts.retry_failures: RD_ETASK uses a retry too */
  int call_retries;         /* an actor call's rd_task_opts.max_task_retries (RD_ACTOR_DEFAULT: its actor's) */
  int max_calls;            /* rd_task_opts.max_calls, sent with the task */
  uint64_t parent;          /* in a worker: the task whose run submitted it (0: none), cancelled with it */
  uint32_t parent_node;     /* ... its owner's node index and pid (ray list tasks' parent_task_id) */
  int parent_pid;
  const char *ns;           /* the submitter's namespace (interned), Task.ns */
  const char *cgroup;       /* an actor call's rd_task_opts.concurrency_group (interned; "": its method's) */
  int cancelled;            /* rd_cancel while in flight: its returns already failed */
  int oom_kills;            /* times the memory monitor killed its worker */
  uint64_t not_before_ns;   /* on its class's delayed list: not sent before this */
  uint64_t *ret_ids;         /* nret of them, in its own allocation (after args) */
  uint64_t pushed_ns;
  uint64_t submit_ns;       /* rd_submit / rd_actor_call: its latency counts from here */
  uint64_t queued_ns;       /* put in its class's queue (waiting for a worker) */
  int settled;              /* its returns were set (or failed) once: counted in G.ost */
  rd__lease *lease;
  int ran_pid;              /* the worker it was sent to last, and that worker's node (its failure's row) */
  uint32_t ran_node;
  rd__actor *actor;         /* an actor call (cls is NULL) */
  uint64_t actor_id;
  int lineage_refs;         /* finished, kept as lineage by this many return objects */
  int lin_linked;           /* on G.lineage */
  size_t bytes;             /* its allocation (lineage accounting) */
  rd__task *lin_prev, *lin_next;   /* G.lineage while kept */
  rd__stream *stream;       /* RD_STREAMING: nret is 1, its stream object */
  rd__task *next;
  rd__targ args[];
};

/* A scheduling class: tasks with the same resources, options, env set and
 * label selector share a queue and leases.  Found through G.ctab by its
 * key; freed by class_sweep once nothing uses it (no task points at it,
 * no lease, no request). */
#define RD_CLASS_FN_TIMES 4
struct rd__sclass {
  rd__hlink link;           /* in G.ctab (first: a link is its class) */
  rd_resources res;
  int priority;
  int strategy, soft;       /* rd_task_opts scheduling strategy */
  uint32_t node;
  uint64_t pg_id;           /* placement group and bundle (rd_task_opts) */
  int bundle;
  rd__task *qhead, *qtail;
  size_t qlen;
  rd__task *delayed;        /* retries waiting out a backoff (OOM kills), unordered */
  rd__lease *leases;
  int nleases;
  uint64_t req_id;          /* outstanding lease request, 0 = none */
  rd__ask_backoff ask;      /* lease requests after a failure that may pass */
  struct {                  /* service time per task of the class's last functions (the pipeline depth) */
    const char *func;
    uint64_t ewma_ns;       /* 0 = unknown */
  } fn_time[RD_CLASS_FN_TIMES];
  char *env;                /* rd_task_opts.env in canonical form (common.h), or NULL */
  size_t env_len;
  char *sel;                /* rd_task_opts.label_selector, or NULL (none, or "") */
  size_t ntasks;            /* tasks whose cls this is (queued, waiting, running, kept as lineage) */
  uint64_t unused_ns;       /* class_sweep found it unused since then; 0 in use */
  rd__sclass *next;         /* G.classes */
  rd__sclass *lprev, *lnext;   /* G.leased while it holds a lease */
};

struct rd__lease {
  uint64_t lease_id;
  int worker_pid;
  uint32_t node;            /* its worker's node (cluster index; 0: not known) */
  rd__conn conn;
  rd__sclass *cls;
  rd__task *inhead, *intail;
  int ninflight;
  int nstream;              /* streaming tasks among them (nothing is queued behind one) */
  uint64_t idle_since;      /* 0 = busy */
  uint64_t last_reply_ns;
  int broken;               /* sent a malformed frame */
  int retired;              /* its worker reached a task's max_calls: no new tasks, given back as lost */
  int stop;                 /* stop reading its frames: broken or retired */
  int yielding;             /* its node asked for it back (fair share): no new tasks, return when idle */
  int blocked;              /* its worker handed back tasks (TaskReply.unrun): none until its next reply */
  int host_dead;            /* an actor connection whose node the GCS declared dead: no new calls (they wait
                               for the next process), its socket's close brings the node's word */
  int lost_err;             /* why its worker went away: its own crash report, or its node's word */
  char lost_why[400];
  int lost_node;            /* ... that word is a node's (LeaseLost, or a remote worker's node's Error), not its own report */
  uint64_t gone_ns;         /* its socket broke mid-task with no word yet: waiting for the node's (gone_due) */
  rd__actor *actor;         /* a connection to an actor, not a lease */
  size_t nbw;               /* MSG_BORROW_GETs from this worker waiting (objects' bwait lists) */
  size_t nholds;            /* kept borrows of objects here by this actor (objects' holds lists) */
  rd__lease *next;
};

enum { AH_IDLE, AH_CONNECTING, AH_CONNECTED, AH_DEAD };

/* A caller's view of one actor: calls wait here in order until sent. */
struct rd__actor {
  uint64_t id;
  int state;
  rd__lease *conn;
  rd__task *qhead, *qtail;
  size_t qlen;
  uint64_t connect_req;
  rd__ask_backoff ask;      /* connects after a failure that may pass */
  int max_task_retries;
  int max_pending;          /* calls pending on this handle past which rd_actor_call refuses (0: none) */
  uint32_t concurrency;     /* calls it runs at once (ActorConnectReply; 0: not told, 1) */
  int lost_pid;             /* the incarnation whose socket broke last */
  int dead_err;
  rd__blob *dead_msg;
  size_t nlineage;          /* its finished calls kept as lineage (they point here: not freed before 0) */
  rd__actor *next, *prev;   /* G.actors */
};

/* A connection this process serves as a worker (an owner pushes tasks). */
typedef struct rd__serve {
  uint64_t lease_id;
  rd__conn conn;
  int ngpus;
  int gpu_ids[RD_RES_MAX_GPUS];
  int64_t gpu_share[RD_RES_MAX_GPUS];
  uint64_t gpu_memory;      /* bytes the shares entitle it to (0: unknown) */
  int closed;
  int gone;                 /* closed, and rd__worker_serve_gone has run for it */
  int busy;                 /* tasks from it running now: not freed before 0 */
  uint64_t actor_id;        /* a caller's connection to the actor hosted here */
  int nborrows;             /* proxies whose MSG_BORROW_GET to it is unanswered (their `from`) */
  int norigin;              /* proxies whose ref came on it (their `origin`) */
  struct rd__serve *next;
} rd__serve;

/* A decoded task waiting to run in this worker. */
typedef struct rd__wtask {
  Rd__Task *msg;
  rd__serve *from;
  int group;                /* an actor's concurrency group that runs it: 0 the default, i + 1 its i-th */
  struct rd__wtask *next;
} rd__wtask;

typedef struct rd__reply_slot {
  uint64_t req_id;
  int type;
  ProtobufCMessage *msg;    /* set when it arrived */
} rd__reply_slot;


/* Figures by function name between two reports to the node (FuncStats in
 * WorkerStats and OwnerStats): at most RD_FNSTATS_MAX names, each cut to
 * 127 bytes. */
#define RD_FNSTATS_MAX 32
typedef struct rd__fnstat {
  char name[128];
  uint64_t buckets[RD_HIST_BUCKETS], sum_ns, failed;
} rd__fnstat;
typedef struct rd__fnstats {
  rd__fnstat fn[RD_FNSTATS_MAX];
  size_t n, last;               /* last: where the previous lookup found its name */
} rd__fnstats;

/* A task that failed for good, told to the node with the next OwnerStats
 * (`raydist list tasks --state FAILED`): at most RD_OST_FAILS_MAX between
 * two reports, the rest only counted. */
#define RD_OST_FAILS_MAX 16
typedef struct rd__ost_fail {
  uint64_t task_id, ret_id, age_ns, actor_id;
  uint64_t parent_task;     /* the task whose run submitted it (0: none), its owner's node and pid */
  uint32_t parent_node;
  int parent_pid;
  int status, attempt;
  int worker_pid;           /* the worker it was sent to last, and that worker's node (0: none) */
  uint32_t node;
  char func[128];
  char err[512];
} rd__ost_fail;

/* The pump's poll set, rebuilt each round, grown to hold every connection:
 * the daemon's, the wake fd, each lease, each actor connection and each
 * caller served.  The round takes it out of G while it uses it. */
typedef struct rd__pollset {
  struct pollfd *pf;
  void **who;
  int *kind;
  size_t n, cap;
} rd__pollset;

typedef struct rd__ctx {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int inited, dead, is_worker;
  int pumping;
  int wakefd;
  rd__conn daemon;
  uint32_t client_id;
  uint32_t node_index;          /* 0 on an embedded cluster */
  int cluster;                  /* joined a cluster: feasibility is the cluster's to decide */
  int attached;                 /* rd_init(address): the session belongs to `raydist start` */
  char token[160];
  double job_weight;        /* driver: its job's fair-share weight (rd_config.job_weight) */
  int log_to_driver;        /* driver: print its workers' output (rd_config.log_to_driver) */
  struct rd__dedup *dedup;  /* ... deduplicated across workers (logdedup.h; NULL: RAYDIST_DEDUP_LOGS=0) */
  const char *ns;           /* the process's namespace (interned; "" the default); a worker's calls bring theirs */
  /* The process's own env set (canonical, rd__env_canon; NULL none): a
   * driver's rd_config.env or $RAYDIST_ENV_VARS, a worker's the set it was
   * started with.  Tasks and actors it makes take it, under their own. */
  char *job_env;
  size_t job_env_len;
  uint64_t next_seq, next_task, next_req;
  pid_t daemon_pid;
  char session[256];
  int pid;                      /* this process's, as its node knows it (Task.owner_pid) */
  uint8_t *rw_base;
  const uint8_t *ro_base;
  uint64_t store_cap;
  uint32_t inline_max;
  rd_res_ledger totals;      /* the node's totals: feasibility at submit */
  rd__u64map objs;
  rd__sclass *classes;       /* all of them, also in ctab */
  rd__htab ctab;             /* classes by key (class_get) */
  rd__sclass *last_class;    /* the one class_get found last */
  rd__sclass *leased;        /* the classes holding a lease (lprev/lnext) */
  rd__u64map reqs;           /* classes by their outstanding lease request's id */
  size_t nreq;               /* classes with one */
  struct { int prio; size_t n; } reqprio[8];   /* outstanding requests by priority */
  int reqprio_over;          /* more priorities than that: higher_priority_waiting walks */
  uint64_t class_sweep_ns;   /* class_sweep last ran */
  int class_dirty;           /* a class may have become unused since */
  size_t classes_unused;     /* unused ones it kept (not for long enough yet) */
  int any_delayed;           /* a class may have delayed retries (the pump looks while set) */
  int any_gone;              /* a lease or actor connection may wait for its worker's end (gone_ns): the pump looks */
  int any_backoff;           /* a class or actor may wait to ask again (ask.after_ns): the pump looks */
  rd__actor *actors;
  rd__u64map actor_ids;      /* the same entries by actor id (actor_get) */
  int any_dead_actor;        /* an entry may be dead with nothing left to fail: the pump forgets it */
  int ninflight;             /* tasks and calls pushed and not answered, over every lease and actor
                                connection (the sum of their ninflight: the pump's spin choice) */
  rd__serve *serves;
  Rd__ActorStart *actor_start;   /* worker: become this actor (run the constructor) */
  int actor_kill;                /* worker: run the destructor and exit (2: for good, no restart) */
  rd__wtask *wq_head, *wq_tail;
  /* one per thread waiting in rd__daemon_call (grows: an actor with
   * max_concurrency 200 may have 200 results being allocated at once);
   * kept for the process's life, as a thread may still wait at shutdown */
  rd__reply_slot *replies;
  size_t nreplies;
  int pipeline_depth;
  uint64_t lease_idle_ns;
  int oom_retries;              /* RAYDIST_TASK_OOM_RETRIES: OOM retries beyond max_retries, -1 no limit */
  uint64_t oom_delay_ns;        /* RAYDIST_TASK_OOM_RETRY_DELAY_MS: the first backoff, doubled per kill */
  uint64_t ask_retry_ns;        /* RAYDIST_LEASE_RETRY_MS: how long failures that may pass are asked past */
  uint64_t spin_ns;             /* busy-poll this long before sleeping in poll() */
  uint64_t last_wait_ns;        /* how long the last pump waited for something */
  /* the progress thread (client.c): pumps for a process that is busy
   * outside the library, so its queued tasks are sent and leases returned */
  pthread_t progress;
  pthread_cond_t progress_cv;   /* it naps here; kicked when work arrives */
  int progress_on, progress_off, progress_stop, progress_idle, progress_pumping;
  /* rd_shutdown under way: other threads' pumps return RD_ESTATE at once,
   * and it waits for those inside one (in_pump) to leave before freeing */
  int closing;
  int in_pump;
  uint64_t progress_grace_ns;   /* no caller entered the library for this long: take over */
  uint64_t user_calls;          /* bumped when a caller enters the library or pumps */
  int nblocked;                 /* task worker: threads waiting long in rd_get/rd_wait */
  uint64_t flush_due_ns;        /* rd__flush_within: the progress thread flushes then (0: nothing due) */
  uint64_t conn_gen;            /* bumped when a lease or actor connection is freed: a
                                 * pump that polled across it skips its stale pointers */
  rd__pollset pollset;          /* the pump's, kept between rounds (rd__pump) */
  /* The pump's epoll set: every lease, actor and served connection joins it
   * when made (rd__pump_watch), the daemon's and the wake fd at the first
   * round, so a round costs what is ready, not every connection.  ep_off
   * (RAYDIST_EPOLL=0, or a connection it could not take): poll() on the
   * whole list each round instead. */
  int epfd;
  int ep_off;
  int ep_base;                  /* the wake fd is in it (the daemon's conn: G.daemon.ep_on) */
  rd__conn_list wdirty;         /* lease, actor and served conns with bytes to write (rd__flush_all) */
  struct rd__done *done;        /* tasks finished well not yet reported, a ring (done_n of done_max) */
  size_t done_next, done_n, done_max;
  uint64_t done_dropped;        /* ... and those the ring overwrote unreported since the last report */
  uint64_t done_reported;       /* how many were ever reported (OwnerStats.finished_first) */
  rd__task *lineage;            /* finished tasks kept to rebuild lost results */
  size_t lineage_bytes, lineage_max;   /* RAYDIST_MAX_LINEAGE_BYTES; 0: keep none */
  struct rd_cq *cqs;            /* live completion queues (rd_cq_create), closed by rd_shutdown */
  size_t cq_nwatch;             /* their watches not fired yet: the progress thread pumps for them */
  uint64_t *pending_release;  /* store pins to drop, sent with the next flush */
  size_t npending_release, cappending_release;
  /* what this process's owned tasks did, for its node's metrics (OwnerStats):
   * submit-to-result latency since the last report, and how many tasks live */
  struct {
    uint64_t buckets[RD_HIST_BUCKETS], sum_ns, done, failed;
    uint64_t live;              /* submitted, not settled */
    rd__ost_fail fails[RD_OST_FAILS_MAX];   /* tasks that failed for good since the last report */
    size_t nfails;
    uint64_t fails_dropped;     /* ... beyond those */
    rd__fnstats fns;            /* the latency by function */
    uint64_t last_sent_ns;
    int changed;                /* submitted, sent or settled since the last report */
    uint64_t backlog_sig;       /* the backlog the last report carried (ost_backlog) */
  } ost;
} rd__ctx;

extern rd__ctx rd__g;

/* client.c */
/* A new connection the pump writes (G.wdirty) and reads (its epoll set):
 * kind 1 a lease or actor connection (who: its rd__lease), 2 a served
 * caller (rd__serve). */
void rd__pump_watch(rd__conn *c, int kind, void *who);
int rd__pump(int64_t timeout_ms);       /* mu held; may drop it while polling */
/* A task of `name` took ns (failed: it failed): counted in t.  0, or -1 when
 * t holds RD_FNSTATS_MAX other names (report, reset, then count again). */
int rd__fnstats_add(rd__fnstats *t, const char *name, uint64_t ns, int failed);
/* t's entries as FuncStats in fs, pointed to by fsp (RD_FNSTATS_MAX each); their number. */
size_t rd__fnstats_pack(rd__fnstats *t, Rd__FuncStats *fs, Rd__FuncStats **fsp);
/* appmetrics.c, G.mu held: the application metrics' series changed since
 * the last report, as messages pointing into the table (valid until
 * rd__appm_done).  rd__appm_done follows every pack: it frees v and p and,
 * when the report was sent, starts the deltas over. */
size_t rd__appm_pack(Rd__AppMetric **v, Rd__AppMetric ***p);
void rd__appm_done(Rd__AppMetric *v, Rd__AppMetric **p, int sent);
/* client.c, G.mu held: something for the next owner report changed (its
 * progress thread sends it when this thread stays out of the library). */
void rd__ost_touch(void);
/* ... and the report goes now, whatever the 100 ms gap says (a worker about
 * to exit: what its last calls counted is not lost). */
void rd__ost_flush(void);
int rd__daemon_call(Rd__MsgType type, const ProtobufCMessage *m, uint64_t req_id,
                    Rd__MsgType reply_type, ProtobufCMessage **reply, int64_t timeout_ms);
int rd__store_create(uint64_t oid, uint64_t size, uint8_t **ptr, char *err, size_t errlen);
void rd__store_seal(uint64_t oid);
void rd__store_release(uint64_t oid);
void rd__flush_all(void);
int rd__connect_daemon(const char *session, int role, uint32_t worker_id);
/* stack.c: this process answers `raydist stack` (rd__stack_signal) by
 * writing its threads' stacks to SESSION/logs/stack-PID.txt; once, unless
 * the program has its own handler for that signal. */
void rd__stack_install(const char *session);
/* stack.c: a worker that dies of a fatal signal, or calls exit() in a task,
 * writes a report (the signal, its task, its stack) on stderr and tells
 * its tasks' owners why (rd__worker_crash_tell), then dies as it would
 * have.  Only on signals the program has no handler for. */
void rd__crash_install(void);
/* An alternate signal stack for the calling thread (a worker's executor
 * threads), so that its stack overflow is reported too; 0 when none. */
int rd__crash_altstack(void);
/* symbolize.c: where the program and libraydist are loaded, noted before
 * the crash handler may name frames (rd__crash_install). */
void rd__sym_prepare(void);
/* The function of the program or of libraydist holding pc, from the file's
 * full symbol table (its static functions, and a program's linked without
 * -rdynamic): 1 with the file, the name and pc's offset in it; 0 where
 * backtrace_symbols_fd is left to name it.  is_return: pc is a return
 * address (the call is looked up).  Async-signal-safe once prepared. */
int rd__sym_name(const void *pc, int is_return, const char **obj, const char **name, uintptr_t *off);

/* worker.c */
/* A crash report's words for the call this thread runs (" while running
 * task 'NAME' (ID, attempt N)"; 0 and nothing when none), and its tasks'
 * owners told why the worker dies (how many).  Async-signal-safe. */
size_t rd__worker_crash_task(char *out, size_t len);
int rd__worker_crash_tell(const char *why);
void rd__worker_on_assign(Rd__LeaseAssign *m, int fd);
void rd__worker_on_attach(Rd__ActorAttach *m, int fd);
void rd__worker_on_task(rd__serve *s, Rd__Task *m);
void rd__worker_on_cancel(rd__serve *s, uint64_t task_id);
/* The task running in this worker waits long in rd_get/rd_wait: the tasks
 * pipelined behind it go back to their owner unrun (G.mu held). */
void rd__worker_hand_back(void);
/* The task (or actor call) this thread runs now in a worker; 0 elsewhere. */
uint64_t rd__worker_current_task(void);
/* The owner (node index, pid) of the call this thread runs (0, 0: none). */
void rd__worker_current_owner(uint32_t *node, int *pid);
/* Namespaces (client.c).  rd__ns_intern: a copy of ns that lives until the
 * process ends (a few distinct ones), "" for NULL; NULL when out of memory.
 * rd__ns_set_thread: a worker's thread runs a call of namespace ns (NULL:
 * the process's).  rd__ns_current: the caller's.  rd__ns_name: "ns:name"
 * (in the default namespace name, or ":name" when name holds a ':') into
 * buf; RD_EINVAL when name is empty or it does not fit. */
#define RD_NS_MAX 128
const char *rd__ns_intern(const char *ns);
void rd__ns_set_thread(const char *ns);
const char *rd__ns_current(void);
int rd__ns_valid(const char *ns);
int rd__ns_name(const char *ns, const char *name, char *buf, size_t len);
/* Cancel (without force) every unfinished task and actor call this process
 * submitted while running task `parent` (G.mu held): rd_cancel's recursion. */
void rd__cancel_children(uint64_t parent);
/* s closed while calls from it run or wait here: the owner is gone. */
void rd__worker_serve_gone(rd__serve *s);
void rd__worker_on_grant(rd__serve *s, const Rd__StreamGrant *m);
/* A reference to object oid, borrowed by a task that came on s: one more
 * reference to the proxy, made the first time (from the answer in `ready`,
 * the task's argument, when it has one, else asked of s).  mu held. */
int rd__borrow_ref(rd__serve *s, uint64_t oid, const Rd__Arg *ready);
/* An actor call that was lent oid has returned: if this process still holds
 * the proxy, tell its origin it keeps it (MSG_BORROW_HOLD).  mu held. */
void rd__borrow_keep(uint64_t oid);
/* rd_return_refs, rd_yield_refs (api): check that the task that came on s may hand refs over
 * (live, sealed, not a stream, none but s's own containing refs), hold
 * each, and wait for those not s's own to be ready (mu not held).  0, or
 * RD_EINVAL with a log line naming api and func. */
int rd__ret_refs_hold(rd__serve *s, const char *api, const char *func, const rd_ref *refs, size_t n);
/* At the reply (mu held, may be dropped meanwhile): client owner becomes a
 * co-owner of the store objects among the refs of returns 0..nret
 * (ids[i][0..n[i])) that are not its own (lent on s), in the stores holding
 * them.  0, or an error described in err (the task then fails). */
int rd__ret_refs_hand_over(rd__serve *s, uint32_t owner, uint64_t *const *ids, const size_t *n, int nret, char *err,
                           size_t errlen);
/* Then (mu held): describe each held ref for the caller in out[]. */
void rd__ret_refs_describe(rd__serve *s, const uint64_t *ids, size_t n, Rd__RetRef *out);
/* Drop the references rd__ret_refs_hold took (mu held). */
void rd__ret_refs_unhold(const uint64_t *ids, size_t n);
/* Write what is buffered now, or have the thread in poll() do it.  mu held. */
void rd__flush_soon(void);
/* Have what is buffered written at the latest `ns` from now (the progress
 * thread does it, unless something flushes sooner).  mu held. */
void rd__flush_within(uint64_t ns);
void rd__worker_main(void) __attribute__((noreturn));
int rd__worker_is_actor(void);          /* hosts an actor, or is becoming one */

/* copy.c: memcpy, split across helper threads when large */
void rd__copy(void *dst, const void *src, size_t n);

/* registry.c */
int rd__registry_build(void);
void rd__registry_free(void);
/* Does a method of class cls name a concurrency group (RD_ACTOR_METHOD_IN)? */
int rd__class_has_grouped_methods(const char *cls);

#endif
