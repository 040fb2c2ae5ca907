/* runtime/node_internal.h - the node daemon's tables, shared by node.c (the
 * single-node daemon: clients, leases, actors, objects) and cluster.c (what a
 * node adds in a cluster: the GCS, links to other nodes, spillback, pulls).
 * Everything here runs on the daemon's libuv loop thread. */
#ifndef RD_RUNTIME_NODE_INTERNAL_H
#define RD_RUNTIME_NODE_INTERNAL_H

#include <stdint.h>
#include <uv.h>

#include "common.h"
#include "conn.h"
#include "node.h"
#include "queue.h"
#include "labels.h"
#include "resources.h"
#include "store.h"

enum { ROLE_NONE = -1, ROLE_DRIVER = 0, ROLE_WORKER = 1, ROLE_LINK = 2, ROLE_KEEPER = 3 };   /* KEEPER: a job's (JobHold) */
enum { W_STARTING, W_IDLE, W_LEASED, W_DYING, W_DEAD };  /* DYING: killed, not yet reaped */

typedef struct node_worker node_worker;

/* A job: the executable (and argv) this node starts workers from for the
 * drivers that run it, here or elsewhere in the cluster.  A node serves any
 * number of jobs at once; each request is granted only a worker of its own
 * job.  A job's record lives as long as the node (a few hundred bytes); a
 * variant's (its workers for one env set) until it has no workers and
 * nothing names it (rd__node_gc).  A job's idle workers are stopped once it
 * has been quiet for a while, or to make room for another job's. */
/* Interned byte strings (env sets, label selectors), so that requests,
 * actors and job variants compare them by pointer: one copy of each
 * distinct string in a table (common.h), kept while something points at
 * it (rd__node_gc); a table holds at most RD_NODE_INTERN_MAX_BYTES of
 * strings at once. */
typedef struct rd__istr {
  rd__hlink link;
  const char *key;          /* the string, in the entry */
  size_t len;
} rd__istr;
typedef struct rd__itab {
  rd__htab t;
  size_t bytes;
} rd__itab;
#define RD_NODE_INTERN_MAX_BYTES ((size_t)64 << 20)

/* A set of environment variables for workers (rd_task_opts.env), in
 * canonical form (common.h), interned in N.envs. */
typedef struct node_env {
  rd__istr is;              /* key: the canonical form (malloc'ed), is.len bytes */
  size_t n;
  char **vars;              /* the n entries, pointing into is.key */
} node_env;

/* An interned label selector (rd__node_sel), in N.sels, so requests and
 * actors point at it.  A task's or actor's may list fallbacks
 * ("sel;sel", scheduler/labels.h); a bundle's may not. */
typedef struct node_sel {
  rd__istr is;              /* key: s */
  char s[];
} node_sel;

typedef struct node_job {
  uint32_t id;              /* this node's sequence, for logs */
  /* A job's workers for one env set are a job of their own (a variant):
   * the same executable, started with those variables, and granted only
   * to requests with that set; base is the job itself, which its drivers,
   * code, avoided nodes and fair share belong to (rd__job_base). */
  struct node_job *base;    /* NULL: not a variant */
  const node_env *env;      /* a variant's set */
  char *exe;
  uint64_t identity[4];     /* the file's device, inode, size and mtime when first seen */
  char **argv;              /* NULL-terminated; argv[0] = exe when none was given */
  size_t argc;
  int drivers;              /* local drivers of this job connected */
  int prestarted;
  int nworkers, nidle, nstarting;   /* its workers (alive), idle, starting */
  int want;                 /* dispatch: requests that fit but found no idle worker */
  int want_actors;          /* ... of which actor placements */
  int spawn_failures;       /* in a row: 3 with no worker to take a task fail its requests */
  char spawn_error[400];
  int spawn_short;          /* ... the last was a shortage that may pass (files, processes, memory) */
  uint64_t spawn_fail_ns;   /* ... when (the tick tries again each second while requests wait) */
  uint64_t spawn_said_ns;   /* its failure was last logged (every 5 s at most) */
  int ready_seen;           /* a worker of it joined: ready_ms is its launch-to-join time */
  uint64_t ready_ms;
  uint64_t quiet_since;     /* no driver, and every worker idle, since (ns; 0: busy) */
  /* cluster.c: its code in the GCS */
  char code_hash[65];
  int code_state;           /* 0 none, 1 uploading, 2 stored, -1 failed */
  char code_err[200];
  uint32_t gcs_job_id;      /* its entry in the GCS job table while a driver runs it, else 0 */
  /* fair share (fair.c) */
  double weight;            /* from its latest driver's hello (rd_config.job_weight); 1 by default */
  rd_resources held;        /* what its workers hold of N.ledger (tallied at each dispatch) */
  double share;             /* held's weighted dominant share */
  int waiting;              /* its requests in N.queue */
  uint64_t yields;          /* leases its owners were asked to give back */
  int gcs_job_adding;       /* that entry is being made */
  uint32_t joined_subs[16]; /* submitted jobs whose drivers said hello while it was being made (their
                               gcs_job is written once it is, connected or not by then) */
  int njoined_subs;
  /* metrics: its workers' task runs (WorkerStats), and the tasks its
   * processes here submitted that settled (OwnerStats) */
  uint64_t runs, runs_failed, run_ns;
  uint64_t owned_settled, owned_failed, owned_ns;
  struct node_job *next;
} node_job;
typedef struct node_client node_client;
typedef struct node_actor node_actor;
typedef struct node_hold node_hold;

/* A placement-group bundle reserved on this node (runtime/pg.c): a share of
 * the node's ledger that only requests naming the bundle are granted from. */
typedef struct node_bundle {
  uint64_t pg_id;
  int index;
  uint32_t record;          /* the group's record node (C.index or 0: this one) */
  uint64_t txn;             /* the reservation that made it */
  int committed;            /* the whole group is reserved: usable */
  int removed;              /* given back once no worker holds a grant from it */
  rd_res_grant grant;       /* what it holds of N.ledger */
  rd_res_ledger ledger;     /* what requests in it are granted from */
  rd_sched_queue queue;     /* those requests */
  int users;                /* workers holding a grant from ledger */
  struct node_bundle *next;
} node_bundle;

#define RD_TIMELINE_MAX 65536
/* Times reported by workers or owners: counts per rd__hist_bucket, their
 * number, their sum, and how many of those failed. */
typedef struct rd__hist_acc {
  uint64_t buckets[RD_HIST_BUCKETS], n, sum_ns, failed;
} rd__hist_acc;
/* Adds a report's buckets, sum and failures; returns how many it counted. */
static inline uint64_t rd__hist_acc_add(rd__hist_acc *h, const uint64_t *buckets, uint64_t sum_ns, uint64_t failed) {
  uint64_t n = 0;
  for (size_t i = 0; i < RD_HIST_BUCKETS; i++) {
    h->buckets[i] += buckets[i];
    n += buckets[i];
  }
  h->n += n;
  h->sum_ns += sum_ns;
  h->failed += failed;
  return n;
}
/* A function's (or "Class.method"'s) figures on this node.  At most
 * RD_FN_METRICS_MAX names; later ones are counted under "(other)". */
#define RD_FN_METRICS_MAX 1024
typedef struct rd__fn_metric {
  char name[128];
  rd__hist_acc run;         /* run in workers here (WorkerStats) */
  rd__hist_acc lat;         /* submitted here: submit to result (OwnerStats) */
} rd__fn_metric;

typedef struct rd__tl_event {
  uint64_t task_id, start_us, dur_us;
  int32_t status, pid;
  char func[64];
} rd__tl_event;

typedef struct lease_req {
  rd_sched_item item;
  node_client *owner;
  uint64_t req_id;
  node_bundle *bundle;      /* queued in this bundle's queue (NULL: N.queue) */
  uint32_t yield_worker;    /* fair.c: the worker whose lease was asked back for it (0: none) */
  uint32_t gcs_job;         /* the GCS job (a run) it is for, when known (0: not) */
  uint32_t driver;          /* the client id of the driver whose work it is (0: none): its worker's output goes there */
  int replaceable;          /* placed here by the default policy (a local owner's, or a peer's LinkLease.movable): respill may move it */
  node_actor *actor;        /* placing this actor rather than leasing a worker */
  node_job *job;            /* only a worker of this job may take it */
  const char *sel;          /* its label selector (interned), NULL: none; respill keeps to it */
  uint64_t queued_ns;       /* when it was queued (metrics: lease wait) */
  struct lease_req *next;   /* in owner's list */
} lease_req;

enum { A_PENDING, A_STARTING, A_ALIVE, A_DEAD };
#define RD_NODE_MAX_PROCS 4096   /* workers of all kinds on one node */

typedef struct parked_connect {
  node_client *client;
  uint64_t req_id;
  int no_redirect;          /* a third node's link asked to be bridged (LinkActorConnect.no_redirect) */
  struct parked_connect *next;
} parked_connect;

/* The actor table: what is needed to place, start and restart an actor. */
struct node_actor {
  uint64_t id;              /* the record node's index above a per-node sequence */
  uint32_t host;            /* a record whose actor runs on that node (0: here) */
  uint64_t view_claim;      /* its room claimed in the cluster view until host answers (rd__cluster_view_claim) */
  int strategy, soft;       /* placement in a cluster (rd_actor_opts) */
  int place_err;            /* why placement failed (RD_EINFEASIBLE, RD_ENODE_DIED) */
  int launch_wait;          /* placed again with each view: only a node the autoscaler can start could run it, or (infeasible_view) none in the last view */
  uint64_t infeasible_view; /* 1 + the view in which no node could run it first (0: none): refused by a later one */
  uint32_t create_client;   /* its creation waits for that verdict: the request to answer (create_req 0: none) */
  uint64_t create_req;
  uint32_t affinity;
  uint32_t prefer_node;     /* default strategy: this node first when it has room (a detached actor's creator's; 0: none) */
  const char *sel;          /* its label selector (interned, rd__node_sel), NULL: none */
  char *cgroups;            /* its concurrency groups ("name=threads,..."), NULL: none */
  uint64_t pg_id;           /* placed in this placement group (0: none) */
  int bundle_index;         /* its bundle (-1: any); resolved when placed */
  int host_pid;             /* its worker's pid there */
  node_job *job;            /* its code */
  const node_env *env;      /* its worker's environment (rd_actor_opts.env), or NULL */
  char *cls;
  char *name;               /* NULL = anonymous; "ns:name" in a namespace */
  char *ns;                 /* its namespace (ActorCreate.ns), NULL: the default one */
  rd_resources res;
  int priority;
  ProtobufCBinaryData *args;
  size_t nargs;
  int max_restarts, restarts, max_task_retries, max_concurrency;
  int max_pending_calls;     /* rd_actor_opts.max_pending_calls, told to callers at connect */
  int state;
  int no_restart;           /* killed for good: do not restart */
  int exited;               /* its own worker asked to end it (rd_actor_exit) */
  char *death;              /* why it is dead */
  node_worker *worker;
  node_client *creator;     /* &N.orphans once a detached actor's creator left; NULL once a dead one's left */
  int hosted;               /* run here for a peer's record (its creator was that peer's link) */
  int detached;             /* outlives its creator */
  int given_back;           /* hosted here, given back before it started (respill): dropped at the next tick */
  uint32_t gcs_job;         /* the GCS job of its creator, when known: groups it makes end with it */
  uint32_t driver;          /* its creator's driver (client id, 0: none): its worker's output goes there */
  lease_req *req;           /* while waiting for placement */
  parked_connect *connects; /* callers waiting for it to be alive */
  parked_connect *killers;  /* rd_actor_kill callers waiting for the old process to go */
  uint64_t unnaming;        /* dead, and since then (ns) the GCS write that frees its name is in flight:
                               killers wait for it (UNNAMING_LATE_NS at most) */
  uint64_t pending_since;   /* when it last started waiting for placement */
  uint64_t created_ns, ended_ns;   /* made; dead (0: not), on rd__now_ns's clock */
  uint32_t last_node;       /* where its last process ran (rd__cluster_index; last_pid 0: none ran yet) */
  int last_pid;
  int warned;               /* said once that it waits for resources */
  node_actor *next;
};

/* A create that waits: for room, while the store's spill thread writes other
 * objects out; or behind an unsealed object of the same id (in practice the
 * result of an attempt whose worker just died, not yet reaped), until that
 * object is sealed (then EEXIST) or aborted (then the create goes ahead).
 * After deadline_ns it spills inline or answers as it stands. */
#define RD_NODE_POOL_THREADS "12"   /* libuv's pool: RD_CL_MAX_PULLS (8) pulls, the rest for the GCS */
#define RD_CREATE_WAIT_NS 10000000000ull   /* how long a create waits (pulled copies too) */
typedef struct parked_create {
  node_client *client;
  uint64_t req_id, object_id, size;
  uint64_t deadline_ns;
  struct parked_create *next;
} parked_create;

typedef struct parked_get {
  node_client *client;
  uint64_t req_id;
  uint64_t *ids;
  uint32_t *nodes;          /* where each lives (cluster), or NULL; the same allocation as ids */
  uint8_t *held;            /* held[i]: this get pins ids[i] already (same allocation) */
  size_t n;
  size_t missing;           /* ids not held yet */
  uint64_t deadline_ns;     /* 0 = none */
  struct parked_get *next;
} parked_get;

struct node_client {
  uint32_t id;
  int role;
  int pid;
  rd__conn conn;
  uv_poll_t poll;
  int poll_events;
  int dead;                 /* closing: ignore further input */
  int draining;             /* lost: reading what it sent before the drop (client_lost) */
  node_worker *worker;
  node_job *job;            /* a driver's job (a worker's is worker->job) */
  int no_output;            /* a driver that asked not to get its workers' output (Hello.no_worker_output) */
  uint32_t submission;      /* a driver of a job submitted here: its number (Hello.submission; 0: none) */
  uint64_t output_dropped;  /* bytes of worker output not sent to it: its socket was too far behind */
  uint64_t *pins;           /* multiset of object ids this client has pinned */
  size_t npins, cappins;
  lease_req *reqs;
  void *link;               /* ROLE_LINK: cluster.c's state of a link to another node */
  node_hold *hold;          /* ROLE_KEEPER: its job's resources, held or waited for (job_hold.c) */
  uint64_t own_waiting, own_sent;   /* its owned tasks now, as its last OwnerStats said */
  uint64_t own_unsent;              /* ... and how many that finished well it has not reported yet */
  uint64_t own_classes;             /* and its scheduling classes */
  struct node_backlog *backlog;     /* ... and its backlog (OwnerStats.backlog; NULL: none) */
  size_t nbacklog;
  node_client *next;
};

/* Tasks of one class an owner has queued behind a lease request that has
 * waited a while (OwnerStats.backlog): the autoscaler's demand. */
typedef struct node_backlog {
  rd_resources shape;
  const char *sel;          /* interned (rd__node_sel), NULL: any node */
  uint32_t count;
} node_backlog;
#define RD_NODE_BACKLOG_MAX 8

/* A copy hosted here for a peer's record (its creator is that peer's
 * link): the record node decides about restarts, names and placement. */
static inline int rd__node_actor_hosted(const node_actor *a) { return a->hosted; }
/* Tasks that owners connected here submitted and have no result for:
 * waiting, and sent to workers (their last OwnerStats). */
/* What the owners of job j (NULL: all jobs) connected here said last: tasks
 * waiting and sent, and (classes not NULL) their scheduling classes. */
void rd__node_owned(const node_job *j, uint64_t *waiting, uint64_t *sent, uint64_t *classes);

struct node_worker {
  uint32_t id;
  node_job *job;            /* the executable it runs */
  int evicted;              /* stopped to make room for another job's worker */
  int retiring;             /* ran a task's max_calls: killed when its lease ends (MSG_WORKER_RETIRE) */
  uv_process_t proc;
  int pid;
  int state;
  node_client *client;
  uint64_t lease_id;
  node_client *lease_owner;
  rd_res_grant grant;
  node_bundle *bundle;      /* the bundle grant came from (NULL: N.ledger) */
  char visible[64];
  node_actor *actor;        /* the actor this worker hosts */
  int blocked;              /* its task waits in rd_get/rd_wait: grant's CPUs lent back */
  int32_t lease_priority;   /* the priority of the request its lease was granted for */
  uint64_t granted_ns;      /* when it was last leased */
  int yield_asked;          /* its lease owner was asked to give the lease back (fair.c) */
  uint32_t gcs_job;         /* the GCS job its lease is for (0: not known); what its tasks make belongs to it */
  uint32_t driver;          /* the driver its lease or actor works for (client id, 0: none): gets its output */
  struct worker_out *out[2];   /* its stdout and stderr read by the node (cluster), or NULL */
  char kill_why[360];       /* killed by the memory monitor: why (its actor's death reason) */
  uint64_t kill_deadline;   /* graceful actor exit: SIGKILL after this */
  uint64_t idle_since;      /* when it last became idle */
  uint64_t launch_ms, joined_ms;   /* wall clock: started, first ready (0: not yet) */
  uint64_t oom_base;        /* the kernel's OOM kills (/proc/vmstat oom_kill) when it started */
  int told_exit;            /* its lease's owner or its actor's callers were told how it ended (worker_tell) */
  int node_kill;            /* the node killed its actor (a restart, a graceful kill's deadline) */
  uint32_t *callers;        /* clients here given a socket to its actor: told how it ended */
  uint32_t ncallers, callers_cap;
  const char *stop_why;     /* why the node stopped it (static text), NULL: it did not */
  int stop_user;            /* ... at its user's word (rd_actor_kill) */
  uint64_t last_actor;      /* the actor it hosts or hosted last (0: none) */
  node_worker *next;
};

#define RD_STOP_MAX_CALLS "stopped by the node: it ran its function's max_calls times"   /* a stop_why */

/* A worker that exited, kept for `ray list workers` (node.c's exited_keep). */
typedef struct node_exited {
  uint32_t id, job, gcs_job;
  int pid;
  uint64_t actor;           /* the actor it hosted (0: none) */
  uint64_t launch_ms, joined_ms, end_ms;
  const char *type;         /* Ray's WorkerExitType: INTENDED_SYSTEM_EXIT, ... (static) */
  char detail[400];
} node_exited;

typedef struct rd__node_state {
  uv_loop_t *loop;
  rd_node_opts opts;
  rd_store *store;
  rd_res_ledger ledger;
  char labels[RD_LABELS_LEN];   /* this node's, canonical (--labels) */
  rd_sched_queue queue;
  uv_poll_t listen_poll;
  uv_poll_t spill_poll;     /* the store's spill thread finished jobs */
  int listen_fd;
  int reserve_fd;           /* /dev/null, held to make room for refusing a connection when out of files (on_accept) */
  uint64_t refused_ms;      /* when a connection was last refused so (a starting worker's, likely) */
  char sock_path[512];
  node_client *clients;
  node_worker *workers;
  int nworkers, nstarting, nidle;
  int nactor_workers;             /* workers hosting an actor */
  int nblocked;                   /* leased task workers waiting in rd_get/rd_wait: not counted in max_workers */
  int nevicting;                  /* idle workers killed for another job, not yet reaped */
  node_job *jobs;
  uint32_t next_job_id;
  rd__itab envs;            /* interned env sets (rd__node_env), node_env entries */
  rd__itab sels;            /* interned label selectors (rd__node_sel), node_sel entries */
  struct rd_gcs_store *kv;  /* rd_kv_* on an embedded node (created at first use) */
  uint64_t kv_bytes;        /* what it holds, about */
  uint32_t next_client_id, next_worker_id;
  uint64_t next_lease_seq;
  uint64_t leases_granted;
  parked_get *parked;
  parked_create *parked_creates;
  /* the last RD_GONE_KEPT clients (any node's) known to be gone: a result
   * sealed for one of them later (an actor call still running) goes too
   * (this node's own are judged by its live clients: client_is_gone).  64
   * were a few seconds of a run that kills workers often: a call that
   * outlived that was kept for ever */
#define RD_GONE_KEPT 1024
  uint32_t gone[RD_GONE_KEPT];
  unsigned ngone;
  uint64_t idle_trim_ns;    /* idle task workers over the soft limit stop after this (0: never) */
  uint64_t job_quiet_ns;    /* a job without drivers here stops its workers once all idle this long (jobs_tick) */
  /* memory monitor (node.c): checked every mem_period_ns (0: off) */
  uint64_t mem_period_ns, mem_last_ns, mem_warned_ns;
  double mem_threshold;     /* of the node's memory (or cgroup limit) in use; 0: not checked */
  uint64_t mem_limit;       /* bytes the node's workers may hold together (RSS); 0: none */
  uint64_t mem_kills;
  uint64_t exits[5];            /* workers that exited, by Ray's exit type (exit_types in node.c) */
  /* metrics (metrics.c serves them): histograms per rd__hist_bucket */
  uint64_t start_ns;
  uint64_t lease_wait[RD_HIST_BUCKETS], lease_wait_n, lease_wait_ns;
  rd__hist_acc task_run;    /* run times in workers here, and failures (WorkerStats) */
  uint64_t stream_items;
  struct rd__fn_metric *fns;   /* the same by function (FuncStats), in order of first report */
  size_t nfns, fns_cap;
  /* owners here (drivers, workers that submit): submit-to-result latency (OwnerStats) */
  rd__hist_acc task_lat;
  /* timeline (RAYDIST_TIMELINE=1): the last RD_TIMELINE_MAX task events */
  int timeline_on;
  int worker_files;         /* workers' output in logs/worker-*.out|err (0: RAYDIST_LOG_TO_STDERR=1, the node's log) */
  char local_token[33];     /* an embedded node's own token (SESSION/token), for its stack API ("": none) */
  struct rd__tl_event *tl;
  size_t tl_next, tl_count;
  node_actor *actors;
  /* Stands in as the creator of detached actors whose creator left: never
   * connected (dead, so nothing is ever sent to it), it owns their
   * placement requests. */
  node_client orphans;
  uint64_t next_actor_id;
  node_exited *exited;      /* the last exited_max workers that exited, a ring (exited_next: the next slot) */
  size_t nexited, exited_next, exited_max;
  size_t tasks_done_max;    /* tasks finished well kept for ray list tasks (RAYDIST_TASK_HISTORY; dashboard.c) */
  size_t dead_actors_kept;  /* dead actor records kept for late callers (dead_actors_trim) */
  uint64_t dead_actors_dropped;
  node_bundle *bundles;           /* placement-group bundles reserved here */
  uv_timer_t tick;
  uv_signal_t sigterm, sigint;
  node_client *owner;             /* embedded: the driver whose exit stops the node */
  uint64_t gpu_mem[RD_RES_MAX_GPUS];  /* bytes of GPU i (--gpu-memory, else CUDA; 0: unknown) */
  /* fair share between jobs (fair.c) */
  int fair_off;                   /* RAYDIST_FAIR_SHARE=0 */
  uint64_t fair_slice_ns;         /* a whole grant several jobs want changes hands after this x weight */
  uint64_t fair_yields;           /* leases asked back */
  int shutting_down;
} rd__node_state;

extern rd__node_state N;


/* node.c services used by cluster.c */
void rd__node_send(node_client *c, Rd__MsgType t, const ProtobufCMessage *m, int fd);
/* dashboard.c: */
/* An owner's answer (MSG_TASK_LIST): 1 kept (the request owns m now), 0
 * not wanted (the caller frees m), -1 malformed (the caller drops c). */
int rd__dashboard_on_task_list(node_client *c, Rd__TaskList *m);
/* How many calls actor a runs at once: its max_concurrency plus its
 * concurrency groups' threads (ActorConnectReply.concurrency). */
uint32_t rd__node_actor_concurrency(const node_actor *a);
/* c is going: requests stop waiting for its answer. */
void rd__dashboard_client_gone(const node_client *c);
/* An owner's report: the tasks in it that failed for good are kept (the
 * last 1000), for `raydist list tasks --state FAILED`, and those that
 * finished well (the last N.tasks_done_max), for `--state FINISHED`. */
void rd__dashboard_failures_add(const node_client *c, const Rd__OwnerStats *m);
void rd__dashboard_finished_add(const node_client *c, const Rd__OwnerStats *m);
/* Node job njob's GCS entry was made (gcs_job): the tasks its drivers
 * reported before it, kept above, get its id. */
void rd__dashboard_job_known(uint32_t njob, uint32_t gcs_job);
void rd__node_client_drop(node_client *c, const char *why);
void rd__node_dispatch(void);
/* job_hold.c: a job's entrypoint resources, held while its keeper's
 * connection lasts.  on_request answers c; dispatch grants waiting holds
 * (first in the node's dispatch); client_gone gives c's back (the caller
 * dispatches); counts: held now, and waiting. */
void rd__job_hold_on_request(node_client *c, const Rd__JobHold *m);
void rd__job_hold_dispatch(void);
void rd__job_hold_client_gone(node_client *c);
void rd__job_hold_counts(uint64_t *held, uint64_t *waits, uint64_t *seeking);
/* 1 when a hold of res would be granted now: free in the ledger, and no
 * hold waits before it. */
int rd__job_hold_free_now(const rd_resources *res);
/* The jobs API placed a job needing res here because it was free now: it
 * counts as taken for rd__job_hold_free_now until the job's keeper asks
 * for it (at most 10 s). */
void rd__job_hold_promise(const rd_resources *res);
/* 1 when a job needing res (labels sel) that no node has room for now
 * would wait here: this node has them in all and no other node that
 * could hold them has fewer jobs waiting (job_hold.c's seek_found).  The
 * jobs API then lets it wait here rather than through a mirror. */
int rd__job_hold_wait_here(const rd_resources *res, const char *sel);
/* At the node's end (every client dropped): the promises. */
void rd__job_hold_free(void);
/* Seekers (JobHold.seek: a job's mirror waiting for a live node that can
 * hold its entrypoint resources, with labels that satisfy its selector):
 * view_changed answers those a node of the new view can hold; seek_each
 * calls cb with each one's resources and selector (the node's demand for
 * the autoscaler). */
void rd__job_hold_view_changed(void);
void rd__job_hold_seek_each(void (*cb)(void *arg, const rd_resources *res, const char *sel), void *arg);
/* 1 when this node has less than res in all (a hold could never be
 * granted), saying so in why with the live nodes that have them. */
int rd__job_hold_infeasible(const rd_resources *res, char *why, size_t len);
void rd__node_flush_all(void);
const char *rd__node_grant_error(int status, const node_worker *w);
int rd__node_grant_passing(int status, const node_worker *w);
/* "what: strerror(err)", with the limit to raise when err is EMFILE or
 * ENFILE (open files, and how many the node holds) or EAGAIN (processes);
 * a static buffer, valid until the next call (the loop's thread). */
const char *rd__node_sys_error(const char *what, int err);
void rd__node_retry_parked(void);
/* A pulled copy of oid was sealed here: the waiting gets that want it pin
 * it, and those that now have everything are answered. */
void rd__node_parked_arrived(uint64_t oid);
/* Actors (cluster.c: hosting for a peer, records of actors hosted elsewhere) */
node_actor *rd__node_actor_find(uint64_t id);
void rd__node_actor_serve_connects(node_actor *a);
void rd__node_actor_host_lost(node_actor *a, const char *why);
/* Respill of a pending actor queued here (cluster.c), and its record
 * node's answer when it was hosted for it. */
void rd__node_actor_respill(node_actor *a, uint32_t t, const char *why);
void rd__node_actor_place_again(node_actor *a);
void rd__node_actor_host_gone(node_actor *a, const char *why);
/* The head: record a detached actor a client of link's node creates (cluster.c,
 * MSG_LINK_ACTOR_RECORD), owned by no client here, placed on prefer_node
 * first when it has room (default strategy); answer req_id over link. */
void rd__node_actor_record_for(node_client *link, node_job *job, const Rd__ActorCreate *m, uint32_t driver,
                               uint32_t prefer_node, uint64_t req_id);
int rd__node_actor_host_for(node_client *link, node_job *job, const Rd__ActorCreate *spec, uint64_t id,
                            uint32_t restarts, uint32_t gcs_job, uint32_t driver, char *err, size_t errlen);
/* The GCS job an actor's groups end with: 0 for a detached actor. */
uint32_t rd__node_actor_gcs_job(const node_actor *a);
void rd__node_actor_connect(node_client *c, const Rd__ActorConnect *m);
void rd__node_actor_kill(node_client *c, const Rd__ActorKill *m);
void rd__node_actor_registered(uint64_t id, uint32_t client_id, uint64_t req_id, int status, const char *err);
void rd__node_reply_actor_id(uint32_t client_id, uint64_t req_id, int status, const char *err, uint64_t id);
/* A lookup by name answered: the actor and its max_pending_calls. */
void rd__node_reply_actor_found(uint32_t client_id, uint64_t req_id, uint64_t id, int32_t max_pending);
/* Answer rd_actor_list_named with these qualified names. */
void rd__node_reply_actor_names(uint32_t client_id, uint64_t req_id, int status, const char *err, char **names,
                                size_t n);
/* Whether qualified actor name qname ("ns:name", or "name" in the default
 * namespace) is in namespace ns ("" or NULL: the default), or any (all). */
int rd__node_name_in_ns(const char *qname, const char *ns, int all);
void rd__node_reply_connect(node_client *c, uint64_t req_id, node_actor *a, int status, const char *err, int fd);
node_client *rd__node_client_new(int fd, int role);
/* Placement groups (pg.c) */
void rd__node_worker_release(node_worker *w);
/* The node's free resources as reported (node info, heartbeats): CPUs taken
 * back by resumed blocked tasks may leave the ledger below zero; reported
 * as none free. */
rd_resources rd__node_avail(void);
void rd__node_bundle_drop(node_bundle *b, const char *why);
/* job NULL: the client's own (a driver's, or its worker's); gcs_job 0: the
 * GCS job of a local owner (a driver's run, or its worker's lease) */
/* sel: its label selector (interned), kept for respill; NULL: none */
void rd__node_lease_queue(node_client *c, uint64_t req_id, const rd_resources *res, int priority, node_bundle *b,
                          node_job *job, const node_env *env, uint32_t gcs_job, uint32_t driver, int replaceable,
                          const char *sel);
/* rd_kv_*: the answer to client_id's request req_id (val, or keys). */
#define RD_KV_LIST_BYTES (4u << 20)      /* keys in one rd_kv_keys reply */
#define RD_KV_LOCAL_BYTES (256u << 20)   /* an embedded node's store */
void rd__node_kv_reply(uint32_t client_id, uint64_t req_id, int status, const char *err, const void *val, size_t len,
                       char **keys, size_t nkeys);
/* The live client with that id, or NULL. */
node_client *rd__node_client_by_id(uint32_t id);
/* The driver whose work client c does, for its workers' output (client
 * id): c itself, a worker's lease's or actor's driver; 0 for a link, when
 * none, or for a driver that asked for no output (Hello.no_worker_output). */
uint32_t rd__node_client_driver(const node_client *c);
/* The GCS job a driver or worker works for: a worker's lease's, else its
 * job's entry while a driver runs it (0: not known). */
uint32_t rd__node_client_gcs_job(const node_client *c);
/* Deliver worker output (MSG_WORKER_OUTPUT) to local driver m->driver: 1 when
 * it is here and takes output. */
int rd__node_output_deliver(const Rd__WorkerOutput *m);
int rd__node_lease_drop(node_client *c, uint64_t req_id);
void rd__node_actor_schedule(node_actor *a);
void rd__node_actor_die(node_actor *a, const char *why);
void rd__node_actor_unnamed(uint64_t actor_id);
node_actor *rd__node_actor_dead_named(const char *name);
/* Worker pid of this node, when it is exiting (PF_EXITING, or a zombie):
 * its end is read now (waiting up to 200 ms for the kernel to close its
 * socket), so that what its death does here (an actor restarts or dies, and
 * tells its record node) comes before what a peer of it saw first. */
void rd__node_worker_settle(int pid);
/* How worker process pid ended, for its lease's owner or its actor's
 * callers ("was killed by SIGKILL, ...", "exited with status 3 ..."): 1
 * with buf filled when it has ended (waited for briefly when it is
 * exiting), 0 when it has not or is not known here. */
int rd__node_worker_exit_word(int pid, char *buf, size_t len);
void rd__node_reply_grant(node_client *c, uint64_t req_id, int status, const char *err);
void rd__node_reply_grant_passing(node_client *c, uint64_t req_id, int status, const char *err);
/* Jobs: the record for exe (made, with argv, when there is none; NULL when
 * out of memory); the job of a client (NULL: a link, or a driver whose
 * hello named no executable); a worker's change of state (keeps the
 * node's and its job's idle and starting counts). */
node_job *rd__node_job_get(const char *exe, char *const *argv, size_t argc);
/* base's variant for env (base itself when env is NULL); NULL when out of
 * memory. */
node_job *rd__node_job_variant(node_job *base, const node_env *env);
static inline node_job *rd__job_base(const node_job *j) { return (node_job *)(j && j->base ? j->base : j); }
/* The interned set of a message's env entries: 0 (*out NULL when there are
 * none), or RD_EINVAL / RD_ENOMEM with a reason in err. */
int rd__node_env(char *const *vars, size_t n, const node_env **out, char *err, size_t errlen);
/* The interned copy of label selector s, with its fallbacks if any: 0
 * (*out NULL for NULL or ""), or RD_EINVAL (malformed, or too many
 * distinct ones) / RD_ENOMEM with err. */
int rd__node_sel(const char *s, const char **out, char *err, size_t errlen);
/* Interned env sets and selectors, job variants and jobs that nothing
 * points at any more are freed by a sweep (rd__node_gc, every
 * RAYDIST_NODE_GC_MS, 10 s by default): each part of the node tells it
 * what it holds, by rd__held_add for every pointer (NULL is ignored). */
enum { RD_HELD_ENV, RD_HELD_SEL, RD_HELD_JOB };
typedef struct rd__held rd__held;
void rd__held_add(rd__held *h, int kind, const void *p);
/* One sweep now; how many it freed of each kind (any may be NULL).  Not
 * while code fetches are in flight (their requests hold sets unlisted). */
void rd__node_gc(size_t *envs, size_t *sels, size_t *jobs);
/* Places again the actors that wait for a node the autoscaler can start
 * (launch_wait): with each new view. */
void rd__node_actors_place_waiting(void);
/* What runs on this node now, counted once for the metrics and the
 * dashboard; the names of the states they print (W_STARTING..W_DYING,
 * A_PENDING..A_DEAD). */
typedef struct rd__node_census {
  int workers[W_DEAD + 1];  /* by state */
  int blocked;              /* leased workers waiting in rd_get/rd_wait */
  int actors[A_DEAD + 1];   /* by state */
  int drivers;
} rd__node_census;
void rd__node_census_take(rd__node_census *c);
extern const char *const rd__worker_state_names[];
extern const char *const rd__actor_state_names[];

/* rd_store_get that also pins a pulled copy still held by another reader
 * after it was let go (rd_store_reuse): a second task reading the same
 * remote object must not pull it again into an id that is taken. */
int rd__node_store_get(uint64_t id, uint64_t *off, uint64_t *size);
/* Client id (of this node or another) is gone: delete the objects it owned here. */
void rd__node_owner_gone(uint32_t id);
/* rd_return_refs: the store object id is client owner's from now on (it
 * goes when owner does; deleted at once if owner is gone already). */
int rd__node_hand_over(uint64_t id, uint32_t owner);
/* client lets go of the store object id: its maker, or a co-owner (one
 * hand-over); it goes when no owner holds it.  Others are refused (logged). */
void rd__node_let_go(uint64_t id, uint32_t client);
node_job *rd__node_client_job(const node_client *c);
/* Fair share between jobs (fair.c): read the settings; before a dispatch of
 * N.queue, order it by each job's share; after it, ask over-share jobs'
 * lease owners to give back what waiting jobs are short of. */
void rd__fair_init(void);
/* Fair share has work to do: it is on and the node has seen two jobs. */
int rd__fair_active(void);
/* Fills each job's held, share and waiting now (the dashboard shows them);
 * returns how many jobs have requests waiting in N.queue. */
int rd__fair_tally(void);
void rd__fair_order(void);
void rd__fair_yield(void);
void rd__node_worker_state(node_worker *w, int state);

#endif
