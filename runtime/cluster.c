/* runtime/cluster.c - a node daemon's part in a multi-node cluster.
 *
 * Membership: the node registers with the GCS, then a timer posts a heartbeat
 * (its free resources, queued demand, store use) to the libuv thread pool
 * every RD_CL_HEARTBEAT_MS; the answer's node list becomes the loop's cluster
 * view.  gRPC calls never run on the loop thread.
 *
 * Spillback: a lease request that should run elsewhere (policy below) goes to
 * the chosen node over a TCP link (conn.c frames, token in the first frame).
 * That node queues it like a local request; when it grants a worker it keeps
 * the owner's end of the worker's socketpair and relays its frames over the
 * link, and this node relays them to a socketpair whose other end the owner
 * receives in an ordinary LeaseGrant.  The owner cannot tell a remote worker
 * from a local one: tasks, replies, retries and lease returns are unchanged.
 *
 * Objects: the owner knows where each store object lives (TaskReply.node)
 * and names it in ObjGet; a daemon that lacks it pulls it from that node with
 * rd_xfer_pull on a thread-pool thread, writing straight into its own store.
 * Pulled copies are secondary: deleted when their last local pin goes.
 *
 * Code shipping: a driver's executable is stored once in the GCS code table
 * (content hash); a node fetches it before it starts that job's workers. */
#include "cluster.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "cli_cluster.h"
#include "gcs_client.h"
#include "log.h"
#include "metrics.h"
#include "objxfer.h"
#include "pg.h"
#include "autoscaler.h"   /* RD_AS_KV_NS */
#include "raydist.h"
#include "sha256.h"
#include "u64map.h"

#define RD_CL_HEARTBEAT_MS 500
#define RD_CL_PULL_OWNER 0xfffffffeu      /* store creator id of pulled copies */
#define RD_CL_FAIL_KEEP_NS 30000000000ull /* how long a failed pull is remembered */
/* Pulls that run at once.  Each holds a thread of libuv's pool for its
 * length (node.c makes the pool RD_NODE_POOL_THREADS strong); the rest of
 * the pool is for the heartbeat and the GCS calls.  Without a cap, a get of
 * 2000 objects on another node queued 2000 pulls ahead of the heartbeat,
 * and the GCS declared the node dead (3 s without one). */
#define RD_CL_MAX_PULLS 8
/* A waiting get pulls an object again after a transient failure (its
 * holder out of room, a connection refused by a node not known dead yet),
 * up to RD_CL_PULL_TRIES pulls in all, the second RD_CL_PULL_BACKOFF_NS
 * after the first failed and each later one twice as long after (0.05 +
 * 0.1 + 0.2 + 0.4 s); then it is answered with the failure. */
#define RD_CL_PULL_TRIES 5
#define RD_CL_PULL_BACKOFF_NS 50000000ull
#define RD_CL_UNKNOWN_WAIT_NS 5000000000ull   /* a holder not in the view yet (just joined) is waited for */
#define RD_CL_LINK_BACKOFF_NS 5000000000ull
#define RD_CL_PACK_THRESHOLD 0.5          /* hybrid policy: pack here below this utilisation */

enum { SIDE_OWNER = 1, SIDE_WORKER = 2 };
enum { STRAT_DEFAULT = 0, STRAT_SPREAD = 1, STRAT_AFFINITY = 2 };

/* A node that could not start a job's workers (its executable will not run
 * there, or its code could not be fetched), avoided for that job until
 * `until`: requests go to other nodes meanwhile.  Per env set: workers
 * started with one set may fail where the job's others run (a set that
 * breaks the program, or one that mends it: LD_LIBRARY_PATH). */
#define CL_AVOID_MAX 64
#define EVENTS_WINDOW_NS 60000000000ull   /* rd__cluster_event: at most ... */
#define EVENTS_PER_WINDOW 30              /* ... this many events a minute from a node */
typedef struct cl_avoid {
  const node_job *job;      /* this node's record of the job, its base (NULL: a free slot) */
  const node_env *env;      /* the workers' set (interned here), NULL: none */
  uint32_t node;
  uint64_t until;
  char why[240];
} cl_avoid;

/* A lease request of a local owner forwarded to another node. */
typedef struct cl_rreq {
  node_client *owner;
  uint64_t owner_req;       /* the owner's req_id */
  uint64_t link_req;        /* ours on the link */
  node_client *link;        /* NULL while waiting for the job's code hash */
  uint32_t target;          /* 0: no node can run it in the view yet (see recheck) */
  rd_resources res;
  int priority;
  Rd__LeaseRequest req;     /* the placement inputs (strategy, affinity, label_selector interned, ...) */
  uint64_t view_seq;        /* the view it was found infeasible in */
  uint64_t pg_id;           /* for a placement-group bundle on target (pg.c) */
  int bundle;
  node_job *job;            /* the owner's: its code runs there */
  const node_env *env;      /* its workers' variables (LeaseRequest.env), or NULL */
  uint32_t gcs_job;         /* the owner's GCS job when it is a worker here (its lease's) */
  uint32_t driver;          /* the owner's driver (client id): its worker's output goes there */
  int grant_or_reject;      /* placed from the view, could wait here: the target may refuse */
  int launch_wait;          /* waits for a node the autoscaler can start (PLACE_WAITS), said in the log */
  int movable;              /* placed by the default policy: the target may give it back (LinkLease.movable) */
  struct cl_rreq *next;
} cl_rreq;

/* One end of a bridged worker socket. */
typedef struct cl_chan {
  uint64_t id;              /* the granting node's lease id */
  uint64_t lease_id;        /* SIDE_OWNER: the id the local owner knows */
  int side;
  node_client *link;
  node_client *owner;       /* SIDE_OWNER */
  node_worker *worker;      /* SIDE_WORKER */
  int actor_pid;            /* SIDE_WORKER, a caller's socket to an actor whose worker is here */
  char *exit_word;          /* SIDE_WORKER: how its worker ended, said when the socket closes (else "died") */
  rd__conn conn;
  uv_poll_t poll;
  int events;
  int closed;
  int inflight;             /* SIDE_OWNER of a lease: tasks sent, not yet answered */
  uint32_t target;          /* SIDE_OWNER of a task's lease spilled there: res is */
  rd_resources res;         /* claimed in the view, given back at the end */
  uint64_t granted_ns;      /* ... since then (leases_apply) */
  struct cl_chan *next;
} cl_chan;

/* Room this node sent to another (a placement-group bundle, an actor) that
 * the views it gets may not count yet: a view is the peers' last reports,
 * up to a heartbeat old, so one coming just after a bundle went gives its
 * room back, and the next group placed before the target reports again
 * goes there as well, to be refused and wait for its retry (an actor sent
 * there waits for good).  Each new view has it taken off again until the
 * target's report is later than its answer (acked_ns).  Leases spilled
 * to other nodes are accounted for the same way, from their requests and
 * channels and the leases that ended (cl_ended), by leases_apply. */
typedef struct cl_claim {
  uint64_t id;
  uint32_t target;
  rd_resources res;
  uint64_t made_ns;
  uint64_t acked_ns;        /* the target holds it since (0: not answered yet) */
  struct cl_claim *next;
} cl_claim;

#define CLAIM_REPORT_SLACK_NS 50000000ull   /* a report's room is read this much before the GCS has it */
#define CLAIM_UNANSWERED_NS 30000000000ull  /* a claim never answered is dropped after this */

/* A lease spilled from here that ended (chan_unclaim) while the views may
 * still show it held: a view whose target report came between its grant
 * and its end gets its room back (leases_apply). */
typedef struct cl_ended {
  uint32_t target;
  rd_resources res;
  uint64_t granted_ns, ended_ns;
  struct cl_ended *next;
} cl_ended;

#define ENDED_MAX 4096   /* kept at once; past it, a view may show an ended lease held until its target reports */

typedef struct cl_pull {
  uv_work_t work;
  uint64_t oid;
  char peer[96];
  uint32_t node;
  int status;
  int created;
  int tries;          /* pulls of it that failed just before this one */
  int no_room;        /* the copy could not be made here (the create waited already) */
  /* Set by the loop once the peer is known dead (pulls_abandon): its gets
   * were answered, it is out of C.pulls and its turn is given back, and
   * what it brings back, if ever, is dropped.  Read by the pool thread. */
  int abandoned;
  struct cl_pull *wait_next;   /* C.pull_wait: waiting for a turn on the thread pool */
  uint8_t *dst;
  char err[200];
} cl_pull;

/* A connect forwarded to another node, waiting for its answer. */
typedef struct cl_conn {
  int kill;                 /* a forwarded kill rather than a connect */
  int record;               /* a detached actor's creation sent to the head (rd__cluster_actor_record_at_head) */
  Rd__ActorCreate *spec;    /* record: a copy of its spec until sent (the job's code not yet stored) */
  node_job *job;            /* record: the creator's job, whose code the head fetches */
  uint32_t driver;          /* record: the creator's driver */
  int dead_pid;             /* connect: the process the caller saw go (0: none) */
  int direct;               /* connect: asked of the actor's host, as its record node said (redirect) */
  node_client *link;
  uint64_t link_req;
  uint32_t caller_id;       /* the caller (a client or a link), found again by id */
  uint64_t caller_req;
  uint64_t actor_id;
  struct cl_conn *next;
} cl_conn;

typedef struct cl_fail {
  uint64_t oid;
  int status;
  uint64_t at;
  int tries;          /* pulls that failed in a row */
  int transient;      /* the holder may yet serve it (not "no such object", not a dead node) */
  uint64_t unknown_since;   /* the holder has not been in this node's view since then (0: it is) */
  char why[200];
  struct cl_fail *next;
} cl_fail;

/* A call from a gRPC or thread-pool thread that must run on the loop. */
enum { HOP_PIN, HOP_UNPIN, HOP_CREATE };
typedef struct cl_hop {
  int kind;
  uint64_t oid;
  uint64_t size;
  const uint8_t *data;      /* out: pinned or created bytes */
  int status;
  int done;
  int wait;
  struct cl_hop *next;
  uint64_t deadline_ns;     /* a create parked past this spills inline */
} cl_hop;

typedef struct cl_link_state {
  uint32_t peer;            /* its node index (0 until its hello; 0 for a tool) */
  int outbound;
  int authed;
  int tool;                 /* `raydist job --address`, not a node: LINK_JOB only */
} cl_link_state;

static struct {
  int on;
  uint32_t index;
  char *sd_last;            /* the head's Prometheus service-discovery file as last written (sd_write) */
  char token[160];
  char ip[64];
  char gcs_addr[128];
  rd_gcs *gcs;
  rd_xfer_server *xfer;
  rd_xfer_client *xc;
  int xfer_port;
  int link_fd, link_port;
  uv_poll_t link_poll;
  uv_timer_t hb_timer;
  uv_timer_t respill_timer;   /* a respill soon: a spilled lease came back (chan_return) */
  int respill_soon;
  cl_claim *claims;         /* rd__cluster_view_claim: room sent to other nodes that views may not count */
  uint64_t next_claim;
  cl_ended *ended;          /* leases spilled from here that ended since their targets' last reports */
  size_t nended;
  uint64_t hb_view_ns;      /* when the view in hb_nodes was asked for */
  /* The heartbeat's GCS calls run on a thread of their own, not on libuv's
   * pool: pulls stuck on a hung peer (120 s deadline) can hold every pool
   * thread, and a node whose heartbeat waits behind them is declared dead.
   * hb_mu/hb_cv hand it one round at a time (hb_go); hb_async brings the
   * answer back to the loop.  The loop fills hb_avail..hb_store_used and
   * reads hb_status/hb_nodes only while no round runs (hb_busy). */
  pthread_t hb_thread;
  int hb_thread_on;
  pthread_mutex_t hb_mu;
  pthread_cond_t hb_cv;
  int hb_go, hb_quit;
  uv_async_t hb_async;
  int hb_busy;
  rd_resources hb_avail;
  int64_t hb_pending;
  uint64_t hb_store_used;
  char hb_code[RD_GCS_CODE_REFS_MAX][65];   /* code this node needs kept (code_in_use) */
  size_t hb_ncode;
  int hb_status;
  uint64_t hb_failing_since;
  uint64_t gcs_timeout_ns;  /* shut down after failing heartbeats this long */
  rd_gcs_node *hb_nodes;
  size_t hb_n;
  rd_gcs_demand hb_demand[RD_GCS_DEMAND_MAX];   /* requests waiting here (demand_fill) */
  size_t hb_ndemand;
  uint64_t hb_idle_ms;
  char hb_drain[128];       /* the round's answer: the autoscaler asks this node to leave */
  rd_gcs_node_type hb_types[RD_GCS_NODE_TYPES_MAX];
  size_t hb_ntypes;
  rd_gcs_node *view;        /* loop's copy */
  size_t nview;
  rd_gcs_node_type types[RD_GCS_NODE_TYPES_MAX];   /* what the autoscaler can start (the view's) */
  size_t ntypes;
  uint64_t idle_since;      /* idle (node_idle) since (ns; 0: busy) */
  uint64_t ev_window_ns;    /* rd__cluster_event: this minute's start, */
  unsigned ev_sent;         /* the events sent in it */
  uint64_t ev_dropped;      /* and those not */
  char drained[160];        /* leaving for the autoscaler: why ("": not) */
  uint64_t link_failed_at[4096];
  cl_avoid avoid[CL_AVOID_MAX];   /* nodes that could not start a job's workers */
  uint64_t avoid_ns;        /* for this long (RAYDIST_NODE_AVOID_MS) */
  uint64_t code_ttl_ns;     /* copies of fetched code unused this long are dropped (0: kept) */
  uint64_t code_swept_ns;
  int code_fetches;         /* fetches in flight: no sweep meanwhile */
  uint64_t next_link_req, next_chan;
  uint64_t respilled;       /* queued requests sent to another node that had room (respill) */
  uint64_t pull_retries;    /* pulls a waiting get made again after a transient failure */
  uint64_t refused_busy;    /* spilled requests their target refused: its room was gone */
  struct gcs_actor_op *name_waits;   /* actor registers parked until a dead namesake is unnamed */
  uint64_t view_seq;
  unsigned spread_rr;
  cl_rreq *rreqs;
  cl_conn *conns;
  cl_conn *rec_wait;        /* detached actors' creations waiting for their job's code to be stored */
  uint64_t *await_actors;   /* actors to start elsewhere once the code is stored */
  size_t nawait, capawait;
  cl_chan *chans;
  rd__u64map pulls;                       /* object id -> its pull, running or waiting */
  rd__u64map handed;                      /* owner client id -> cl_handed (owner_gone_forward) */
  cl_pull *pull_wait, **pull_wait_tail;   /* not started yet, in order: RD_CL_MAX_PULLS run at once */
  int npulls_running;
  cl_fail *fails;
  struct gcs_retry *retries;  /* GCS calls waiting to run again */
  /* hops */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  cl_hop *hops;
  cl_hop *parked_hops;      /* loop only: waiting for the store's spill thread */
  uv_async_t async;
  int stopping;
} C;

static void link_send(node_client *l, Rd__MsgType t, const ProtobufCMessage *m) { rd__node_send(l, t, m, -1); }

/* ------------------------------------------------------------ the view */

static rd_gcs_node *view_find(uint32_t index) {
  for (size_t i = 0; i < C.nview; i++)
    if (C.view[i].index == index) return &C.view[i];
  return NULL;
}

/* The entry saying node must not be used for job's workers with env (job
 * any of its records; env interned, NULL for none) now, or NULL. */
static const cl_avoid *avoid_find(const node_job *job, const node_env *env, uint32_t node) {
  job = rd__job_base(job);
  if (!job) return NULL;
  uint64_t now = rd__now_ns();
  for (int i = 0; i < CL_AVOID_MAX; i++)
    if (C.avoid[i].job == job && C.avoid[i].env == env && C.avoid[i].node == node && C.avoid[i].until > now)
      return &C.avoid[i];
  return NULL;
}

int rd__cluster_avoid(const node_job *job, const node_env *env, uint32_t node, const char *why) {
  job = rd__job_base(job);
  if (!C.on || !job) return 0;
  if (!node) node = C.index;
  uint64_t now = rd__now_ns();
  cl_avoid *slot = NULL;
  for (int i = 0; i < CL_AVOID_MAX && !slot; i++)
    if (C.avoid[i].job == job && C.avoid[i].env == env && C.avoid[i].node == node) slot = &C.avoid[i];
  for (int i = 0; i < CL_AVOID_MAX && !slot; i++)
    if (!C.avoid[i].job || C.avoid[i].until <= now) slot = &C.avoid[i];
  if (!slot) {   /* full of live entries: the one that ends first goes */
    slot = &C.avoid[0];
    for (int i = 1; i < CL_AVOID_MAX; i++)
      if (C.avoid[i].until < slot->until) slot = &C.avoid[i];
  }
  int fresh = slot->job != job || slot->env != env || slot->node != node || slot->until <= now;
  slot->job = job;
  slot->env = env;
  slot->node = node;
  slot->until = now + C.avoid_ns;
  snprintf(slot->why, sizeof(slot->why), "%s", why ? why : "");
  if (fresh)
    rd__log(RD_LOG_WARN, "node %u cannot start workers of job %u%s (%s): its requests go to other nodes for %llu s",
            node, job->id, env ? " with its env set" : "", slot->why, (unsigned long long)(C.avoid_ns / 1000000000ull));
  return 1;
}

static int node_usable(const rd_gcs_node *n) {
  if (n->state != RD_GCS_NODE_ALIVE) return 0;
  uint64_t t = C.link_failed_at[n->index & 4095];
  return !t || rd__now_ns() - t > RD_CL_LINK_BACKOFF_NS;
}

/* Could a node with these totals ever run `res`? */
static int fits_total(const rd_resources *total, const rd_resources *res) {
  rd_res_ledger l;
  rd_res_ledger_init(&l, total);
  return rd_res_feasible(&l, res);
}

/* This node's free resources minus what its queued requests ask for (never
 * below zero). */
static void local_unclaimed(rd_resources *out) {
  *out = N.ledger.avail;
  for (rd_sched_item *it = N.queue.head; it; it = it->next) {
    out->cpu -= it->req.cpu;
    out->gpu -= it->req.gpu;
    out->memory -= it->req.memory;
    for (int i = 0; i < it->req.ncustom; i++)
      for (int k = 0; k < out->ncustom; k++)
        if (!strcmp(out->custom[k].name, it->req.custom[i].name)) out->custom[k].amount -= it->req.custom[i].amount;
  }
  if (out->cpu < 0) out->cpu = 0;
  if (out->gpu < 0) out->gpu = 0;
  if (out->memory < 0) out->memory = 0;
  for (int k = 0; k < out->ncustom; k++)
    if (out->custom[k].amount < 0) out->custom[k].amount = 0;
}

static double utilisation(const rd_resources *avail, const rd_resources *total) {
  double u = 0;
  if (total->cpu > 0) u = 1.0 - (double)avail->cpu / (double)total->cpu;
  if (total->gpu > 0) {
    double g = 1.0 - (double)avail->gpu / (double)total->gpu;
    if (g > u) u = g;
  }
  return u;
}

/* ------------------------------------------------------------- hops */

/* Run h on the loop; a waiting hop returns its status, a fire-and-forget one
 * (h->wait 0) belongs to the loop once queued, which frees it. */
static int hop_call(cl_hop *h) {
  int wait = h->wait, st = 0;
  pthread_mutex_lock(&C.mu);
  if (C.stopping) {
    pthread_mutex_unlock(&C.mu);
    return RD_ESTATE;
  }
  h->next = C.hops;
  C.hops = h;
  uv_async_send(&C.async);
  if (wait) {
    while (!h->done) pthread_cond_wait(&C.cv, &C.mu);
    st = h->status;
  }
  pthread_mutex_unlock(&C.mu);
  return st;
}

/* 1 when done; 0 when it waits for the store's spill thread (to read a
 * spilled object back, or to make room), asked again after each reap.  With
 * force (the node stopping) the store does that I/O here and now. */
static int hop_run(cl_hop *h, int force) {
  uint64_t off = 0, sz = 0;
  switch (h->kind) {
    case HOP_PIN:
      h->status = force ? rd_store_get(N.store, h->oid, &off, &sz)
                        : rd_store_get_nowait(N.store, h->oid, &off, &sz);
      if (h->status == RD_EAGAIN && !force && rd_store_is_spilled(N.store, h->oid)) return 0;   /* read back */
      if (h->status == 0) {
        h->data = rd_store_base(N.store) + off;
        h->size = sz;
      }
      break;
    case HOP_UNPIN:
      (void)rd_store_release(N.store, h->oid);
      break;
    case HOP_CREATE:
      if (!h->deadline_ns) h->deadline_ns = rd__now_ns() + RD_CREATE_WAIT_NS;
      if (force || rd__now_ns() >= h->deadline_ns) {
        h->status = rd_store_create(N.store, h->oid, h->size, RD_CL_PULL_OWNER, &off);
      } else {
        h->status = rd_store_create_nowait(N.store, h->oid, h->size, RD_CL_PULL_OWNER, &off);
        if (h->status == RD_EAGAIN) return 0;
      }
      if (h->status == 0) h->data = rd_store_base(N.store) + off;
      break;
  }
  return 1;
}

/* Run the hops of `list`: answer the done ones, park the others. */
static void hops_run(cl_hop *list) {
  while (list) {
    cl_hop *h = list;
    list = h->next;
    if (!hop_run(h, C.stopping)) {
      rd__log(RD_LOG_DEBUG, "transfer %s of %llx waits for the store's spill thread",
              h->kind == HOP_PIN ? "pin" : "create", (unsigned long long)h->oid);
      h->next = C.parked_hops;
      C.parked_hops = h;
    } else if (h->wait) {
      pthread_mutex_lock(&C.mu);
      h->done = 1;
      pthread_cond_broadcast(&C.cv);
      pthread_mutex_unlock(&C.mu);
    } else {
      free(h);
    }
  }
}

static void on_async(uv_async_t *a) {
  (void)a;
  pthread_mutex_lock(&C.mu);
  cl_hop *list = C.hops;
  C.hops = NULL;
  pthread_mutex_unlock(&C.mu);
  hops_run(list);
}

void rd__cluster_retry_hops(void) {
  cl_hop *list = C.parked_hops;
  C.parked_hops = NULL;
  hops_run(list);
}

/* Called on transfer-server threads. */
static int xfer_pin(void *arg, uint64_t oid, const uint8_t **data, uint64_t *size) {
  (void)arg;
  cl_hop h = {HOP_PIN, oid, 0, NULL, 0, 0, 1, NULL};
  int r = hop_call(&h);
  if (r == 0) {
    *data = h.data;
    *size = h.size;
  }
  return r;
}

static void xfer_unpin(void *arg, uint64_t oid) {
  (void)arg;
  cl_hop *h = calloc(1, sizeof(*h));
  if (!h) return;
  h->kind = HOP_UNPIN;
  h->oid = oid;
  if (hop_call(h) != 0) free(h);
}

/* ------------------------------------------------------------- links */

static void link_state_free(node_client *c) {
  free(c->link);
  c->link = NULL;
}

static node_client *link_find(uint32_t peer) {
  for (node_client *c = N.clients; c; c = c->next) {
    cl_link_state *ls = c->link;
    if (c->role == ROLE_LINK && !c->dead && ls && ls->outbound && ls->peer == peer) return c;
  }
  return NULL;
}

static node_client *link_open(uint32_t peer) {
  node_client *l = link_find(peer);
  if (l) return l;
  const rd_gcs_node *n = view_find(peer);
  if (!n || n->state != RD_GCS_NODE_ALIVE) return NULL;
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)n->link_port);
  if (inet_pton(AF_INET, n->ip, &a.sin_addr) != 1) return NULL;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return NULL;
  if (rd__connect_within(fd, (const struct sockaddr *)&a, sizeof(a), 2000) != 0) {
    rd__log(RD_LOG_WARN, "cannot reach node %u at %s:%d: %s", peer, n->ip, n->link_port, strerror(errno));
    close(fd);
    C.link_failed_at[peer & 4095] = rd__now_ns();
    return NULL;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  l = rd__node_client_new(fd, ROLE_LINK);
  if (!l) return NULL;
  cl_link_state *ls = calloc(1, sizeof(*ls));
  if (!ls) {
    rd__node_client_drop(l, "out of memory");
    return NULL;
  }
  ls->peer = peer;
  ls->outbound = 1;
  l->link = ls;
  Rd__LinkHello h = RD__LINK_HELLO__INIT;
  h.token = C.token;
  h.node_index = C.index;
  link_send(l, RD__MSG_TYPE__MSG_LINK_HELLO, &h.base);
  rd__log(RD_LOG_INFO, "link to node %u (%s:%d) open", peer, n->ip, n->link_port);
  return l;
}

static void on_link_accept(uv_poll_t *h, int status, int events) {
  (void)h; (void)events;
  if (status < 0) return;
  for (;;) {
    int fd = accept4(C.link_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    node_client *c = rd__node_client_new(fd, ROLE_NONE);
    if (!c) close(fd);
  }
}

/* ------------------------------------------------------------ channels */

static cl_chan *chan_find(node_client *link, uint64_t id) {
  for (cl_chan *ch = C.chans; ch; ch = ch->next)
    if (!ch->closed && ch->link == link && ch->id == id) return ch;
  return NULL;
}

static void chan_free_cb(uv_handle_t *h) {
  cl_chan *ch = h->data;
  rd__conn_close(&ch->conn);
  free(ch->exit_word);
  free(ch);
}

/* End a channel: tell the peer (unless it told us), close the local end. */
static void chan_unclaim(cl_chan *ch);

static void chan_close(cl_chan *ch, int status, const char *why, int tell_peer) {
  if (ch->closed) return;
  ch->closed = 1;
  chan_unclaim(ch);   /* the target ends the lease too (LINK_CLOSE, or its link is gone) */
  if (tell_peer && ch->link && !ch->link->dead) {
    Rd__LinkClose m = RD__LINK_CLOSE__INIT;
    m.chan_id = ch->id;
    m.status = status;
    m.reason = (char *)(why ? why : "");
    link_send(ch->link, RD__MSG_TYPE__MSG_LINK_CLOSE, &m.base);
  }
  if (ch->side == SIDE_OWNER && status != 0) {
    /* the owner reads why its "worker" went away before the socket closes */
    Rd__Error e = RD__ERROR__INIT;
    e.status = status;
    e.message = (char *)(why ? why : "");
    (void)rd__conn_send(&ch->conn, RD__MSG_TYPE__MSG_ERROR, &e.base, -1);
    (void)rd__conn_flush(&ch->conn);
  }
  if (ch->side == SIDE_WORKER && ch->worker) {
    node_worker *w = ch->worker;
    if (w->state == W_LEASED && w->lease_owner == ch->link) {
      /* the remote owner is gone: the worker may be mid-task, so it is not reused */
      rd__node_worker_release(w);
      rd__node_worker_state(w, W_DYING);
      if (status != RD_EWORKER_DIED)   /* else it went on its own (its socket closed as it ended) */
        w->stop_why = w->retiring ? RD_STOP_MAX_CALLS : "stopped by the node: the remote owner of its lease went";
      w->lease_owner = NULL;
      if (w->pid > 0) kill(w->pid, SIGKILL);
    }
  }
  for (cl_chan **pp = &C.chans; *pp; pp = &(*pp)->next)
    if (*pp == ch) { *pp = ch->next; break; }
  uv_poll_stop(&ch->poll);
  ch->poll.data = ch;
  uv_close((uv_handle_t *)&ch->poll, chan_free_cb);
  rd__node_dispatch();
}

static void chan_on_io(uv_poll_t *h, int status, int events);

/* Owner side: the lease behind ch is given back; the peer ends the channel
 * on LINK_RETURN (no LINK_CLOSE) and keeps the worker unless it was lost. */
static void chan_return(cl_chan *ch, int worker_lost) {
  chan_unclaim(ch);
  if (!ch->link->dead) {
    Rd__LinkReturn r = RD__LINK_RETURN__INIT;
    r.chan_id = ch->id;
    r.worker_lost = worker_lost;
    link_send(ch->link, RD__MSG_TYPE__MSG_LINK_RETURN, &r.base);
  }
  ch->closed = 1;
  for (cl_chan **pp = &C.chans; *pp; pp = &(*pp)->next)
    if (*pp == ch) { *pp = ch->next; break; }
  uv_poll_stop(&ch->poll);
  uv_close((uv_handle_t *)&ch->poll, chan_free_cb);
}

/* Owner side: the local owner closed its end or left.  With no task in
 * flight that is a return (it queues its LeaseReturn on another socket, so
 * the close often arrives first) and the worker is kept; with one, the
 * worker may be mid-task, so the peer kills it. */
static void chan_owner_gone(cl_chan *ch, const char *why) {
  if (ch->lease_id && ch->inflight == 0) chan_return(ch, 0);
  else chan_close(ch, 0, why, 1);
}

static void chan_update_poll(cl_chan *ch) {
  int ev = UV_READABLE | (rd__conn_want_write(&ch->conn) ? UV_WRITABLE : 0);
  if (ev != ch->events) {
    ch->events = ev;
    uv_poll_start(&ch->poll, ev, chan_on_io);
  }
}

/* A worker's side of ch broke (its socket closed, or a write to it
 * failed): how the worker ended, for its owner or caller, as its node
 * knows it (the word kept at its exit, or its exit now), else `dflt`. */
static const char *chan_worker_why(cl_chan *ch, char *word, size_t len, const char *dflt) {
  if (ch->side != SIDE_WORKER) return dflt;
  if (ch->actor_pid) rd__node_worker_settle(ch->actor_pid);   /* its death reaches the record node first */
  if (ch->exit_word) return ch->exit_word;
  if (rd__node_worker_exit_word(ch->worker ? ch->worker->pid : ch->actor_pid, word, len)) return word;
  return dflt;
}

static void chan_on_io(uv_poll_t *h, int status, int events) {
  cl_chan *ch = h->data;
  if (ch->closed) return;
  char word[300];
  if (status < 0) {
    chan_close(ch, RD_EWORKER_DIED, chan_worker_why(ch, word, sizeof(word), "died (its bridged socket failed)"), 1);
    return;
  }
  if (events & UV_WRITABLE) {
    if (rd__conn_flush(&ch->conn) < 0) {
      chan_close(ch, RD_EWORKER_DIED, chan_worker_why(ch, word, sizeof(word), "died (its bridged socket closed)"), 1);
      return;
    }
  }
  if (events & UV_READABLE) {
    for (int rounds = 0; rounds < 16 && !ch->closed; rounds++) {
      int r = rd__conn_fill(&ch->conn);
      if (r == RD_EAGAIN) break;
      if (r <= 0) {
        if (ch->side == SIDE_OWNER && r == 0) {
          chan_owner_gone(ch, "owner closed");
          rd__node_flush_all();
          return;
        }
        /* how the worker ended, when it has, for the owner or caller (an
         * actor's death goes to its record node before this close, which
         * its caller sees first) */
        const char *why = chan_worker_why(ch, word, sizeof(word), ch->side == SIDE_WORKER ? "died" : "owner closed");
        chan_close(ch, ch->side == SIDE_WORKER ? RD_EWORKER_DIED : 0, why, 1);
        return;
      }
      rd__frame f;
      int k;
      while ((k = rd__conn_next(&ch->conn, &f)) == 1) {
        if (f.flags != 0) { k = RD_EPROTO; break; }
        if (ch->side == SIDE_OWNER && f.type == RD__MSG_TYPE__MSG_TASK) ch->inflight++;
        Rd__LinkData d = RD__LINK_DATA__INIT;
        d.chan_id = ch->id;
        d.type = f.type;
        d.payload.data = (uint8_t *)f.data;
        d.payload.len = f.len;
        link_send(ch->link, RD__MSG_TYPE__MSG_LINK_DATA, &d.base);
      }
      if (k < 0) {
        chan_close(ch, RD_EPROTO, "malformed frame on a bridged socket", 1);
        return;
      }
    }
  }
  if (!ch->closed) chan_update_poll(ch);
  rd__node_flush_all();
}

static cl_chan *chan_new(int fd, node_client *link, uint64_t id, int side) {
  cl_chan *ch = calloc(1, sizeof(*ch));
  if (!ch) {
    close(fd);
    return NULL;
  }
  ch->id = id;
  ch->link = link;
  ch->side = side;
  rd__conn_init(&ch->conn, fd);
  uv_poll_init(N.loop, &ch->poll, fd);
  ch->poll.data = ch;
  ch->events = UV_READABLE;
  uv_poll_start(&ch->poll, UV_READABLE, chan_on_io);
  ch->next = C.chans;
  C.chans = ch;
  return ch;
}

static void node_shutdown_now(void);

/* ------------------------------------------------------------ autoscaling */

/* Adds count requests of shape res and selector sel (and STRICT_SPREAD
 * group: 0 none) to the demand d (n entries so far, at most
 * RD_GCS_DEMAND_MAX); returns the new n.  Those with a selector too long
 * to report are left out. */
static size_t demand_add(rd_gcs_demand *d, size_t n, const rd_resources *res, const char *sel, uint32_t count,
                         uint64_t group, const uint32_t *avoid, size_t navoid) {
  if (!sel) sel = "";
  if (strlen(sel) >= RD_GCS_DEMAND_SEL_MAX) return n;
  for (size_t i = 0; i < n; i++)
    if (!memcmp(&d[i].shape, res, sizeof(*res)) && !strcmp(d[i].sel, sel) && d[i].spread_group == group) {
      d[i].count = d[i].count + count < d[i].count ? UINT32_MAX : d[i].count + count;
      return n;
    }
  if (n == RD_GCS_DEMAND_MAX) return n;
  memset(&d[n], 0, sizeof(d[n]));
  d[n].shape = *res;
  snprintf(d[n].sel, sizeof(d[n].sel), "%s", sel);
  d[n].count = count;
  d[n].spread_group = group;
  d[n].navoid = navoid < RD_GCS_DEMAND_AVOID_MAX ? (uint32_t)navoid : RD_GCS_DEMAND_AVOID_MAX;
  if (d[n].navoid) memcpy(d[n].avoid, avoid, d[n].navoid * sizeof(*avoid));
  return n + 1;
}

typedef struct demand_acc {
  rd_gcs_demand *d;
  size_t n;
} demand_acc;

/* A job's mirror that waits for a node able to hold its entrypoint
 * resources (rd__job_hold_seek_each). */
static void demand_job(void *arg, const rd_resources *res, const char *sel) {
  demand_acc *a = arg;
  a->n = demand_add(a->d, a->n, res, sel, 1, 0, NULL, 0);
}

/* A placement-group bundle that waits for room (rd__pg_demand_each). */
static void demand_pg(void *arg, const rd_resources *shape, const char *sel, uint64_t spread_group,
                      const uint32_t *avoid, size_t navoid) {
  demand_acc *a = arg;
  a->n = demand_add(a->d, a->n, shape, sel, 1, spread_group, avoid, navoid);
}

/* What this node reports as demand: requests queued here RD_CL_DEMAND_NS
 * or more (no room here, and none elsewhere, or respill would have moved
 * them), requests that wait for a node no live one is (a kind the
 * autoscaler can start), actors placed from here that wait for one, and
 * the tasks its owners have queued behind requests that wait (their
 * backlog: an owner asks for one worker of a class at a time), the
 * bundles of placement groups recorded here that wait for room, and the
 * submitted jobs whose entrypoint resources no live node has (job_hold.c's
 * seekers: a job waiting for room on its own node is not demand, since it
 * runs there). */
#define RD_CL_DEMAND_NS 1000000000ull
static size_t demand_fill(rd_gcs_demand *d, uint64_t now) {
  size_t n = 0;
  for (rd_sched_item *it = N.queue.head; it; it = it->next) {
    const lease_req *r = it->data;
    if (now - r->queued_ns >= RD_CL_DEMAND_NS) n = demand_add(d, n, &it->req, r->sel, 1, 0, NULL, 0);
  }
  for (const cl_rreq *q = C.rreqs; q; q = q->next)
    if (!q->target && !q->pg_id) n = demand_add(d, n, &q->res, q->req.label_selector, 1, 0, NULL, 0);
  for (const node_actor *a = N.actors; a; a = a->next)
    if (a->launch_wait && a->state == A_PENDING) n = demand_add(d, n, &a->res, a->sel, 1, 0, NULL, 0);
  for (const node_client *c = N.clients; c; c = c->next)
    for (size_t i = 0; !c->dead && i < c->nbacklog; i++)
      n = demand_add(d, n, &c->backlog[i].shape, c->backlog[i].sel, c->backlog[i].count, 0, NULL, 0);
  demand_acc acc = {d, n};
  rd__pg_demand_each(demand_pg, &acc);
  rd__job_hold_seek_each(demand_job, &acc);
  return acc.n;
}

static int res_same(const rd_resources *a, const rd_resources *b) {
  if (a->cpu != b->cpu || a->gpu != b->gpu || a->memory != b->memory || a->ncustom != b->ncustom) return 0;
  for (int i = 0; i < a->ncustom; i++)
    if (rd_res_get_custom(b, a->custom[i].name) != a->custom[i].amount) return 0;
  return 1;
}

/* Bytes of objects its store holds in memory: the segment's and its
 * fallback region's (an object larger than the store is only there). */
static uint64_t store_held(void) {
  rd_store_stats s;
  rd_store_get_stats(N.store, &s);
  return s.used + s.fallback_used;
}

/* Could this node leave without losing anything?  Nothing granted from its
 * ledger (no task, actor or bundle holds a share), no actor hosted, nothing
 * queued or forwarded, no driver connected, no object in its store, no
 * pull running.  store_used: its store's bytes in use (store_held). */
static int node_idle(uint64_t store_used) {
  if (N.queue.len || N.nactor_workers || C.rreqs || C.chans || C.npulls_running || store_used) return 0;
  if (!res_same(&N.ledger.avail, &N.ledger.total)) return 0;
  for (const node_client *c = N.clients; c; c = c->next)
    if (c->role == ROLE_DRIVER && !c->dead) return 0;
  /* a job submitted here that is not (or not yet) a driver: a script
   * between its drivers, a job waiting for its resources */
  return N.opts.is_head || rd__cli_jobs_live(N.opts.session_dir) == 0;
}

/* A kind of node the autoscaler can start that could run res with
 * selector sel (a request no live node can run then waits for it). */
static const rd_gcs_node_type *launchable(const rd_resources *res, const char *sel) {
  for (size_t i = 0; i < C.ntypes; i++) {
    const rd_gcs_node_type *t = &C.types[i];
    if (t->max_workers > 0 && fits_total(&t->res, res) && rd_labels_match(t->labels, sel)) return t;
  }
  return NULL;
}

int rd__cluster_launchable(const rd_resources *res, const char *sel, char *name, size_t len) {
  const rd_gcs_node_type *t = launchable(res, sel && *sel ? sel : NULL);
  if (t) snprintf(name, len, "%s", t->name);
  return t != NULL;
}

/* The heartbeat's answer asks this node to leave (hb_done): it does, once
 * idle, unless it is the head. */
static void drain_maybe(void) {
  if (!C.hb_drain[0] || C.drained[0] || N.opts.is_head) return;
  if (!node_idle(store_held())) {
    rd__log(RD_LOG_DEBUG, "the autoscaler asks this node to leave (%s), but it is busy: staying", C.hb_drain);
    return;
  }
  snprintf(C.drained, sizeof(C.drained), "drained: %s", C.hb_drain);
  rd__log(RD_LOG_WARN, "leaving the cluster: %s", C.drained);
  node_shutdown_now();
}

/* ------------------------------------------------------------- placement */

/* Which of a request's label selectors places it, given its candidates
 * and the first selector each matches (rank): the first that a candidate
 * with room now for res matches (here: what this node has unclaimed;
 * *by_room set), else the first any candidate matches (it waits for that
 * one). */
static int fallback_rank(const uint32_t *cand, const uint8_t *rank, size_t nc, const rd_resources *here,
                         const rd_resources *res, int *by_room) {
  int now = RD_LABEL_SEL_MAX_ALTS, ever = RD_LABEL_SEL_MAX_ALTS;
  for (size_t i = 0; i < nc; i++) {
    if (rank[i] < ever) ever = rank[i];
    if (rank[i] >= now) continue;
    const rd_gcs_node *n = cand[i] == C.index ? NULL : view_find(cand[i]);
    if (rd_res_fits(n ? &n->avail : here, res)) now = rank[i];
  }
  if (by_room) *by_room = now < RD_LABEL_SEL_MAX_ALTS;
  return now < RD_LABEL_SEL_MAX_ALTS ? now : ever;
}

/* How place() placed a request (its *how). */
enum {
  PLACED_BY_ROOM = 1,   /* a fallback label selector chose the node for the room the view says it has now:
                           a node that turns out busy may refuse it, so that it is placed again */
  PLACE_WAITS = 2       /* 0 returned: no live node can run it, but a node the autoscaler can start
                           could; it waits for one (err RD_EINFEASIBLE, why says so) */
};

/* The node a request should run on (C.index for here), or 0 with an error;
 * *how (may be NULL) gets PLACED_* flags. */
static uint32_t place(const Rd__LeaseRequest *m, const rd_resources *res, const node_job *job, const node_env *env,
                      unsigned *how, int *err, char *why, size_t whylen) {
  unsigned how_ = 0;
  if (!how) how = &how_;
  *how = 0;
  const cl_avoid *bad = NULL;   /* a node left out because it cannot start job's workers */
  const char *sel = m->label_selector && *m->label_selector ? m->label_selector : NULL;
  int unlabelled = 0;           /* nodes that could run it but for the label selector */
  int local_ok = rd_res_feasible(&N.ledger, res);
  int lrank = rd_labels_match_alt(N.labels, sel);   /* the first of its selectors this node matches */
  if (local_ok && lrank < 0) {
    local_ok = 0;
    unlabelled++;
  }
  if (local_ok && (bad = avoid_find(job, env, C.index)) != NULL) local_ok = 0;
  if (m->strategy == STRAT_AFFINITY) {
    uint32_t t = m->node_affinity;
    if (t == C.index && local_ok) return C.index;
    const rd_gcs_node *n = view_find(t);
    const cl_avoid *ta = avoid_find(job, env, t);
    int tmatch = t == C.index ? rd_labels_match(N.labels, sel) : n && rd_labels_match(n->labels, sel);
    if (n && t != C.index && node_usable(n) && fits_total(&n->total, res) && !ta && tmatch) return t;
    if (!m->soft && ta) {
      *err = RD_ESYS;
      snprintf(why, whylen, "node affinity: node %u cannot start this job's workers: %s", t, ta->why);
      return 0;
    }
    if (!m->soft) {
      /* alive in the view, but its link broke a moment ago: most likely dead */
      const int unreachable = n && t != C.index && n->state == RD_GCS_NODE_ALIVE && !node_usable(n);
      *err = n && n->state == RD_GCS_NODE_ALIVE && !unreachable ? RD_EINFEASIBLE : RD_ENODE_DIED;
      if (!n) snprintf(why, whylen, "node affinity: node %u is not in the cluster", t);
      else if (n->state != RD_GCS_NODE_ALIVE) snprintf(why, whylen, "node affinity: node %u is dead", t);
      else if (unreachable)
        snprintf(why, whylen, "node affinity: node %u cannot be reached (its link broke; it may have died)", t);
      else if (!tmatch)
        snprintf(why, whylen, "node affinity: node %u does not match the label selector '%s'", t, sel);
      else snprintf(why, whylen, "node affinity: node %u cannot satisfy the request", t);
      return 0;
    }
  }
  /* candidates: every usable node that could ever run it, and the first
   * of its selectors each matches */
  uint32_t cand[4096];
  uint8_t rank[4096];
  size_t nc = 0;
  if (local_ok) {
    cand[nc] = C.index;
    rank[nc++] = (uint8_t)lrank;
  }
  for (size_t i = 0; i < C.nview && nc < 4096; i++) {
    const rd_gcs_node *n = &C.view[i];
    if (n->index == C.index || !node_usable(n) || !fits_total(&n->total, res)) continue;
    int k = rd_labels_match_alt(n->labels, sel);
    if (k < 0) {
      unlabelled++;
      continue;
    }
    const cl_avoid *a = avoid_find(job, env, n->index);
    if (a) bad = a;
    else {
      cand[nc] = n->index;
      rank[nc++] = (uint8_t)k;
    }
  }
  if (nc == 0 && bad) {
    *err = RD_ESYS;
    snprintf(why, whylen, "no node can start this job's workers: node %u: %s", bad->node, bad->why);
    return 0;
  }
  const rd_gcs_node_type *lt = nc == 0 ? launchable(res, sel) : NULL;
  if (lt) {
    *err = RD_EINFEASIBLE;
    *how |= PLACE_WAITS;
    snprintf(why, whylen, "waiting for the autoscaler to start a node of type '%s': no live node can run it", lt->name);
    return 0;
  }
  if (nc == 0 && unlabelled) {
    *err = RD_EINFEASIBLE;
    snprintf(why, whylen, "label selector '%s' matches no live node that could run it (%d could but for their labels)",
             sel, unlabelled);
    return 0;
  }
  if (nc == 0) {
    *err = RD_EINFEASIBLE;
    char want[300];
    rd_res_format(res, want, sizeof(want));   /* its custom resources by name */
    snprintf(why, whylen, "request %s can never be satisfied: no live node in the cluster has it", want);
    return 0;
  }
  /* here: what is free once the requests already queued here are served
   * (placements decided a moment ago have not taken their resources yet) */
  rd_resources here;
  int alts = sel && strchr(sel, ';');
  if (alts || m->strategy != STRAT_SPREAD) local_unclaimed(&here);
  if (alts) {
    /* fallbacks: placed by the first selector a node with room now
     * matches, else by the first any candidate does; the policy below
     * chooses among the nodes that match that one first */
    int by_room = 0;
    int use = fallback_rank(cand, rank, nc, &here, res, &by_room);
    if (by_room) *how |= PLACED_BY_ROOM;
    size_t k = 0;
    for (size_t i = 0; i < nc; i++)
      if (rank[i] == use) cand[k++] = cand[i];
    nc = k;
    local_ok = local_ok && lrank == use;
    if (use > 0)
      rd__log(RD_LOG_DEBUG, "request %llu: placed by its fallback label selector %d of '%s'",
              (unsigned long long)m->req_id, use, sel);
  }
  if (m->strategy == STRAT_SPREAD) {
    /* sort for a stable round robin */
    for (size_t i = 1; i < nc; i++)
      for (size_t j = i; j > 0 && cand[j - 1] > cand[j]; j--) {
        uint32_t t = cand[j]; cand[j] = cand[j - 1]; cand[j - 1] = t;
      }
    return cand[C.spread_rr++ % nc];
  }
  /* hybrid: data locality first, then pack here, then the least loaded */
  if (m->prefer_node) {
    for (size_t i = 0; i < nc; i++) {
      if (cand[i] != m->prefer_node) continue;
      if (cand[i] == C.index) return C.index;
      const rd_gcs_node *n = view_find(cand[i]);
      if (n && rd_res_fits(&n->avail, res)) return cand[i];
    }
  }
  if (local_ok) {
    int now = rd_res_fits(&here, res);
    if (now && utilisation(&here, &N.ledger.total) < RD_CL_PACK_THRESHOLD) return C.index;
    if (now && nc == 1) return C.index;
  }
  uint32_t best = 0;
  double bestu = 2.0;
  for (size_t i = 0; i < nc; i++) {
    double u;
    int fits;
    if (cand[i] == C.index) {
      fits = rd_res_fits(&here, res);
      u = utilisation(&here, &N.ledger.total);
    } else {
      const rd_gcs_node *n = view_find(cand[i]);
      fits = rd_res_fits(&n->avail, res);
      u = utilisation(&n->avail, &n->total);
    }
    if (fits && u < bestu) { bestu = u; best = cand[i]; }
  }
  if (best) return best;
  /* nothing fits now: wait here if it ever can, else on the least loaded */
  if (local_ok) return C.index;
  for (size_t i = 0; i < nc; i++) {
    const rd_gcs_node *n = view_find(cand[i]);
    double u = utilisation(&n->avail, &n->total) + (double)n->pending * 0.01;
    if (u < bestu) { bestu = u; best = cand[i]; }
  }
  return best ? best : cand[0];
}

static void rreq_send(cl_rreq *q) {
  Rd__LinkLease m = RD__LINK_LEASE__INIT;
  rd__res_msg rm;
  rd__res_to_msg(&q->res, &rm);
  m.req_id = q->link_req;
  m.res = &rm.msg;
  m.priority = q->priority;
  m.code_hash = q->job->code_hash;
  m.n_argv = q->job->argc;
  m.argv = q->job->argv;
  m.job_id = q->gcs_job ? q->gcs_job : q->job->gcs_job_id;
  m.job_weight = q->job->weight;
  m.pg_id = q->pg_id;
  m.bundle_index = q->bundle;
  m.grant_or_reject = q->grant_or_reject;
  m.n_env = q->env ? q->env->n : 0;
  m.env = q->env ? q->env->vars : NULL;
  m.driver = q->driver;
  m.movable = q->movable;
  m.label_selector = (char *)q->req.label_selector;
  link_send(q->link, RD__MSG_TYPE__MSG_LINK_LEASE, &m.base);
}

static void rreq_unlink(cl_rreq *q) {
  for (cl_rreq **pp = &C.rreqs; *pp; pp = &(*pp)->next)
    if (*pp == q) { *pp = q->next; break; }
}

/* Send a forwarded request on its way: now, or once the code hash is known. */
static void rreq_go(cl_rreq *q) {
  if (!q->job || q->job->code_state == -1) {
    char buf[300];
    if (!q->job) snprintf(buf, sizeof(buf), "cannot run on node %u: this client has no job (its hello named no executable)", q->target);
    else snprintf(buf, sizeof(buf), "cannot run on node %u: the driver's executable could not be shipped: %s",
                  q->target, q->job->code_err);
    rd__node_reply_grant(q->owner, q->owner_req, q->job ? RD_EIO : RD_ESTATE, buf);
    rreq_unlink(q);
    free(q);
    return;
  }
  /* sent when the upload finishes, and for a new run of code stored
   * before, once the GCS has its job entry: it may have dropped the code
   * meanwhile (unused for its TTL), and the target fetches it from there */
  if (q->job->code_state != 2 || q->job->gcs_job_adding) return;
  q->link = link_open(q->target);
  if (!q->link) {
    /* link_open marked it unreachable: the owner asks again and placement
     * skips it (or says no live node can run the request) */
    char buf[200];
    snprintf(buf, sizeof(buf), "node %u is unreachable", q->target);
    rd__node_reply_grant(q->owner, q->owner_req, RD_EAGAIN, buf);
    rreq_unlink(q);
    free(q);
    return;
  }
  rreq_send(q);
}

/* A request goes to node t: until the next view, t has that much less room
 * in this one (Ray's raylet does the same when it spills back).  Without
 * it every request placed before the next heartbeat goes to the same node
 * - the least loaded in the view - and queues there while others idle. */
static void view_take(uint32_t t, const rd_resources *res) {
  rd_gcs_node *n = C.on && t && t != C.index ? view_find(t) : NULL;
  if (n) rd_res_take(&n->avail, res);
}

/* A bundle or an actor goes to node t: view_take, and again in every view
 * until t's report counts it (cl_claim).  Returns the claim's id (0: none,
 * t is this node or not in the view), for rd__cluster_claim_ack / _cancel. */
uint64_t rd__cluster_view_claim(uint32_t t, const rd_resources *res) {
  rd_gcs_node *n = C.on && t && t != C.index ? view_find(t) : NULL;
  if (!n) return 0;
  rd_res_take(&n->avail, res);
  cl_claim *k = malloc(sizeof(*k));
  if (!k) return 0;   /* taken off this view only */
  k->id = ++C.next_claim;
  k->target = t;
  k->res = *res;
  k->made_ns = rd__now_ns();
  k->acked_ns = 0;
  k->next = C.claims;
  C.claims = k;
  return k->id;
}

static cl_claim **claim_slot(uint64_t id) {
  if (!id) return NULL;
  for (cl_claim **pp = &C.claims; *pp; pp = &(*pp)->next)
    if ((*pp)->id == id) return pp;
  return NULL;
}

/* The target answered: it holds the room since now. */
void rd__cluster_claim_ack(uint64_t id) {
  rd__cluster_claim_held_from(id, rd__now_ns());
}

void rd__cluster_claim_held_from(uint64_t id, uint64_t ns) {
  cl_claim **pp = claim_slot(id);
  if (pp) (*pp)->acked_ns = ns;
}

uint64_t rd__cluster_claim_at(const char *ip, const rd_resources *res) {
  for (size_t i = 0; C.on && i < C.nview; i++)
    if (C.view[i].state == RD_GCS_NODE_ALIVE && !strcmp(C.view[i].ip, ip)) return rd__cluster_view_claim(C.view[i].index, res);
  return 0;
}

/* When the GCS had view entry n's report, on this node's clock, at the
 * latest, for a view asked for at asked_ns. */
static uint64_t view_report_ns(const rd_gcs_node *n, uint64_t asked_ns) {
  uint64_t hb_ns = n->ms_since_heartbeat * 1000000ull;
  return asked_ns > hb_ns ? asked_ns - hb_ns : 0;
}

/* View entry n gets res back, unless that is more than its totals: 0 if it
 * did. */
static int view_add(rd_gcs_node *n, const rd_resources *res) {
  rd_resources room = n->avail;
  if (rd_res_add(&room, res) != 0 || !rd_res_fits(&n->total, &room)) return -1;
  n->avail = room;
  return 0;
}

/* A new view (asked for at asked_ns) is the targets' last reports: what
 * this node's spilled leases did since then is done to it again.  Requests
 * sent and not answered are taken off, and leases granted after the
 * target's report; leases granted before it and ended after it give their
 * room back.  Without this, a view that came between a grant and the
 * target's next report showed its room free, and the owner's next request
 * (sent once the first is granted) went to the same node, to queue there
 * while another idled (cluster_view_claim, about one run in thirty).
 * Taking off the live leases alone sent a quarter fewer 20 ms tasks to b
 * and c (cluster_many_classes: 280 each instead of 370, 6.4 s instead of
 * 4.7): the reports still counted the leases that had ended since. */
static void leases_apply(uint64_t asked_ns) {
  for (cl_rreq *q = C.rreqs; q; q = q->next)
    if (q->target && !q->pg_id) view_take(q->target, &q->res);
  for (cl_chan *ch = C.chans; ch; ch = ch->next) {
    rd_gcs_node *n = ch->target && !ch->closed ? view_find(ch->target) : NULL;
    if (n && view_report_ns(n, asked_ns) <= ch->granted_ns) rd_res_take(&n->avail, &ch->res);
  }
  for (cl_ended **pp = &C.ended; *pp;) {
    cl_ended *e = *pp;
    rd_gcs_node *n = view_find(e->target);
    uint64_t report_ns = n ? view_report_ns(n, asked_ns) : 0;
    if (!n || n->state != RD_GCS_NODE_ALIVE || report_ns > e->ended_ns) {   /* the report knows */
      *pp = e->next;
      free(e);
      C.nended--;
      continue;
    }
    if (report_ns > e->granted_ns) (void)view_add(n, &e->res);   /* the report counts it held */
    pp = &e->next;
  }
}

static void ended_free(void) {
  while (C.ended) {
    cl_ended *e = C.ended;
    C.ended = e->next;
    free(e);
  }
  C.nended = 0;
}

/* A new view (asked for at asked_ns): the claims its reports cannot count
 * yet are taken off it again; the rest are done. */
static void claims_apply(uint64_t asked_ns) {
  uint64_t now = rd__now_ns();
  leases_apply(asked_ns);
  for (cl_claim **pp = &C.claims; *pp;) {
    cl_claim *k = *pp;
    rd_gcs_node *n = view_find(k->target);
    int done = !n || n->state != RD_GCS_NODE_ALIVE ||
               (k->acked_ns ? view_report_ns(n, asked_ns) > k->acked_ns + CLAIM_REPORT_SLACK_NS
                            : now - k->made_ns > CLAIM_UNANSWERED_NS);
    if (done) {
      *pp = k->next;
      free(k);
      continue;
    }
    rd_res_take(&n->avail, &k->res);
    pp = &k->next;
  }
}

static void claims_free(void) {
  while (C.claims) {
    cl_claim *k = C.claims;
    C.claims = k->next;
    free(k);
  }
}

static void respill(void);

static void on_respill_timer(uv_timer_t *tm) {
  (void)tm;
  C.respill_soon = 0;
  respill();
}

/* Room taken on t (res) is free there now: a lease spilled to t ended, or
 * t refused or never got what was sent.  The next view may not say
 * so yet (t hears of a return after this node does), so this one gets it
 * back at once, and requests queued here for want of room may go there:
 * without this, a node took only as many spilled requests as it had room
 * for per view (two heartbeats), however soon they finished, while many
 * classes (one lease per task) queued here. */
static void view_give_back(uint32_t t, const rd_resources *res) {
  rd_gcs_node *n = C.on && t != C.index ? view_find(t) : NULL;
  if (!n || view_add(n, res) != 0) return;   /* the view says more already */
  if (!C.respill_soon && N.queue.head) {
    C.respill_soon = 1;
    uv_timer_start(&C.respill_timer, on_respill_timer, 0, 0);
  }
}

/* View entry n says it has at least res free (as far as its totals allow). */
static void view_room_at_least(rd_gcs_node *n, const rd_resources *res) {
  rd_resources *v = &n->avail;
  if (v->cpu < res->cpu) v->cpu = res->cpu < n->total.cpu ? res->cpu : n->total.cpu;
  if (v->gpu < res->gpu) v->gpu = res->gpu < n->total.gpu ? res->gpu : n->total.gpu;
  if (v->memory < res->memory) v->memory = res->memory < n->total.memory ? res->memory : n->total.memory;
  for (int i = 0; i < res->ncustom; i++) {
    int64_t want = res->custom[i].amount, have = rd_res_get_custom(v, res->custom[i].name);
    int64_t most = rd_res_get_custom(&n->total, res->custom[i].name);
    if (have < want) (void)rd_res_set_custom(v, res->custom[i].name, want < most ? want : most);
  }
}

/* Forget claim id, leaving the view as it is: 1 and a copy in *out (may
 * be NULL) when it was still held. */
static int claim_drop(uint64_t id, cl_claim *out) {
  cl_claim **pp = claim_slot(id);
  if (!pp) return 0;
  cl_claim *k = *pp;
  if (out) *out = *k;
  *pp = k->next;
  free(k);
  return 1;
}

/* What claim id took off its target's room never reached it or was
 * refused there: the view gets it back, unless it counts it already. */
void rd__cluster_claim_cancel(uint64_t id) {
  cl_claim k;
  if (claim_drop(id, &k)) view_give_back(k.target, &k.res);
}

/* The lease behind ch ends: its room is free on the target again, whether
 * or not a view has counted it yet. */
static void chan_unclaim(cl_chan *ch) {
  if (!ch->target) return;
  view_give_back(ch->target, &ch->res);
  cl_ended *e = C.nended < ENDED_MAX ? malloc(sizeof(*e)) : NULL;
  if (e) {
    e->target = ch->target;
    e->res = ch->res;
    e->granted_ns = ch->granted_ns;
    e->ended_ns = rd__now_ns();
    e->next = C.ended;
    C.ended = e;
    C.nended++;
  }
  ch->target = 0;
}

/* A forwarded request of owner c for target, on C.rreqs; NULL (c told) when
 * out of memory. */
static cl_rreq *rreq_new(node_client *c, uint64_t req_id, const rd_resources *res, int priority, uint32_t target) {
  cl_rreq *q = calloc(1, sizeof(*q));
  if (!q) {
    rd__node_reply_grant(c, req_id, RD_ENOMEM, "node out of memory");
    return NULL;
  }
  q->owner = c;
  q->job = rd__node_client_job(c);
  q->gcs_job = c->worker ? c->worker->gcs_job : 0;
  q->driver = rd__node_client_driver(c);
  q->owner_req = req_id;
  q->link_req = ++C.next_link_req;
  q->target = target;
  q->res = *res;
  q->priority = priority;
  q->view_seq = C.view_seq;
  q->next = C.rreqs;
  C.rreqs = q;
  return q;
}

int rd__cluster_lease_request(node_client *c, const Rd__LeaseRequest *m, const rd_resources *res,
                              const node_env *env, const char *sel) {
  if (!C.on) return 0;
  int err = 0;
  char why[300] = "";
  unsigned how;
  uint32_t t = place(m, res, rd__node_client_job(c), env, &how, &err, why, sizeof(why));
  if (t == C.index) return 0;
  if (t == 0 && err != RD_EINFEASIBLE) {
    rd__node_reply_grant(c, m->req_id, err, why);
    return 1;
  }
  /* infeasible in this view: a node that just joined may not be in it yet,
   * so the request waits for the next view before it is refused */
  cl_rreq *q = rreq_new(c, m->req_id, res, m->priority, t);
  if (!q) return 1;
  q->req = *m;
  q->req.res = NULL;
  q->req.n_env = 0;   /* the message goes; the interned set stays */
  q->req.env = NULL;
  q->req.label_selector = (char *)sel;   /* interned: outlives the message */
  q->env = env;
  q->movable = m->strategy == STRAT_DEFAULT;
  /* The view that chose t is up to a second old (two heartbeats), so t's
   * room may be gone: if this node can run the request, t grants it only
   * from what it has unclaimed when the request arrives, or refuses it and
   * the owner asks again here, with t's room corrected (on_link_grant).
   * Queued on t instead, it would wait there behind t's work, however long,
   * and this node's fair share would never see it.  Spread and affinity
   * requests named their node: they queue there.  A request that a
   * fallback label selector sent to t for its room is refused as well
   * when that room is gone, to be placed again by the corrected view. */
  q->grant_or_reject = m->strategy != STRAT_SPREAD && m->strategy != STRAT_AFFINITY &&
                       ((rd_res_feasible(&N.ledger, res) && rd_labels_match(N.labels, sel) &&
                         !avoid_find(q->job, q->env, C.index)) || (how & PLACED_BY_ROOM));
  if (t == 0) return 1;   /* rechecked by view_changed */
  rd__log(RD_LOG_DEBUG, "lease request %llu of client %u spills to node %u", (unsigned long long)m->req_id, c->id, t);
  view_take(t, res);
  rreq_go(q);
  return 1;
}

/* Lease for an owner here on node `target`, from bundle `bundle` of placement
 * group pg_id reserved there (pg.c chose it). */
void rd__cluster_lease_to(node_client *c, uint64_t req_id, const rd_resources *res, int priority, uint32_t target,
                          uint64_t pg_id, int bundle, const node_env *env) {
  cl_rreq *q = rreq_new(c, req_id, res, priority, target);
  if (!q) return;
  q->env = env;
  q->pg_id = pg_id;
  q->bundle = bundle;
  rreq_go(q);
}

/* A new view: place the requests no node could run in the previous one,
 * here, there, or refuse them for good. */
static void respill(void);

static void view_changed(void) {
  C.view_seq++;
  respill();
  rd__node_actors_place_waiting();
  for (cl_rreq *q = C.rreqs, *next; q; q = next) {
    next = q->next;
    if (q->target || q->view_seq == C.view_seq || q->pg_id) continue;
    int err = 0;
    char why[300] = "";
    unsigned how;
    uint32_t t = place(&q->req, &q->res, q->job, q->env, &how, &err, why, sizeof(why));
    if (t == 0 && (how & PLACE_WAITS)) {   /* still: the autoscaler has not started it yet */
      if (!q->launch_wait) rd__log(RD_LOG_INFO, "lease request %llu of client %u: %s",
                                   (unsigned long long)q->owner_req, q->owner->id, why);
      q->launch_wait = 1;
    } else if (t == 0) {
      rd__node_reply_grant(q->owner, q->owner_req, err, why);
      rreq_unlink(q);
      free(q);
    } else if (t == C.index) {   /* the owner asks again: now it is placed here */
      rd__node_reply_grant(q->owner, q->owner_req, RD_EAGAIN, "placed again");
      rreq_unlink(q);
      free(q);
    } else {
      q->target = t;
      view_take(t, &q->res);
      rreq_go(q);
    }
  }
}

/* Requests the default policy queued here wait for resources that another
 * node has free now (it finished its work, or joined after they were
 * placed): their owners ask again, and placement sends them there.  Only
 * requests that waited RESPILL_AFTER_NS; at most what the view says each
 * node has free, so one view does not send a node more than it can run.
 * Pending actors too (Ray's raylet spills actor creations back like
 * tasks): one recorded here goes to that node, one hosted for a peer back
 * to its record node, to be placed again; else an actor queued behind
 * another that holds the node waited for as long as that one lived.  Runs
 * with each new view (every heartbeat). */
#define RESPILL_AFTER_NS 200000000ull

/* A pending actor's placement r here that respill may move: the default
 * policy's (as its record node says, for one hosted here), not in a
 * placement group. */
static int actor_movable(const node_actor *a, const lease_req *r) {
  return a->req == r && a->state == A_PENDING && a->strategy == STRAT_DEFAULT && !a->pg_id && !r->bundle;
}

static void respill(void) {
  if (!N.queue.head || C.nview == 0) return;
  uint64_t now = rd__now_ns();
  rd_resources *room = NULL;   /* what each view entry has left in this pass */
  for (rd_sched_item *it = N.queue.head, *next; it; it = next) {
    next = it->next;
    lease_req *r = it->data;
    node_actor *a = r->actor;
    if (a ? !actor_movable(a, r) : !r->replaceable) continue;
    if (r->owner->dead || now - r->queued_ns < RESPILL_AFTER_NS) continue;
    const char *sel = a ? a->sel : r->sel;
    if (!rd_res_kinds_short(&N.ledger, &it->req)) continue;   /* it runs here once a worker is free */
    if (!room) {
      room = malloc(C.nview * sizeof(*room));
      if (!room) return;
      for (size_t i = 0; i < C.nview; i++) room[i] = C.view[i].avail;
    }
    size_t best = C.nview;
    double bestu = 2.0;
    int bestk = RD_LABEL_SEL_MAX_ALTS;   /* the first of its selectors it matches: earlier ones first */
    for (size_t i = 0; i < C.nview; i++) {
      const rd_gcs_node *n = &C.view[i];
      int k;
      if (n->index == C.index || !node_usable(n) || (r->job && avoid_find(r->job, r->job->env, n->index)) ||
          (k = rd_labels_match_alt(n->labels, sel)) < 0 || k > bestk)
        continue;
      if (!rd_res_fits(&room[i], &it->req)) continue;
      double u = utilisation(&room[i], &n->total);
      if (k < bestk || u < bestu) { bestk = k; bestu = u; best = i; }
    }
    if (best == C.nview) continue;
    rd_res_take(&room[best], &it->req);   /* custom resources too: one pass sends no node more than it has */
    C.respilled++;
    char why[120];
    snprintf(why, sizeof(why), "placed again: node %u has room now", C.view[best].index);
    if (a) {
      rd__node_actor_respill(a, C.view[best].index, why);   /* frees r */
      continue;
    }
    node_client *owner = r->owner;
    uint64_t req_id = r->req_id;
    rd__log(RD_LOG_DEBUG, "request %llu of client %u waited here %.0f ms: %s", (unsigned long long)req_id, owner->id,
            (now - r->queued_ns) / 1e6, why);
    if (rd__node_lease_drop(owner, req_id))   /* frees r; next is still queued */
      rd__node_reply_grant(owner, req_id, RD_EAGAIN, why);
  }
  free(room);
}

/* The owner no longer wants q: tell the node it went to, forget it. */
static void rreq_cancel(cl_rreq *q) {
  if (q->link && !q->link->dead) {
    Rd__LinkCancel m = RD__LINK_CANCEL__INIT;
    m.req_id = q->link_req;
    link_send(q->link, RD__MSG_TYPE__MSG_LINK_CANCEL, &m.base);
  }
  rreq_unlink(q);
  free(q);
}

int rd__cluster_lease_cancel(node_client *c, uint64_t req_id) {
  for (cl_rreq *q = C.rreqs; q; q = q->next) {
    if (q->owner == c && q->owner_req == req_id) {
      rreq_cancel(q);
      return 1;
    }
  }
  return 0;
}

int rd__cluster_lease_return(node_client *c, const Rd__LeaseReturn *m) {
  for (cl_chan *ch = C.chans; ch; ch = ch->next) {
    if (ch->closed || ch->side != SIDE_OWNER || ch->owner != c || ch->lease_id != m->lease_id) continue;
    chan_return(ch, m->worker_lost);
    return 1;
  }
  return 0;
}

/* Worker side: a peer's queued request got worker w (status 0, fd the
 * owner's end of its socket), or failed with `status`. */
void rd__cluster_granted(lease_req *r, node_worker *w, int status, int fd) {
  node_client *link = r->owner;
  Rd__LinkGrant lg = RD__LINK_GRANT__INIT;
  lg.req_id = r->req_id;
  lg.status = status;
  if (status != 0) {
    lg.error = (char *)rd__node_grant_error(status, w);
    lg.transient = rd__node_grant_passing(status, w);
  } else {
    cl_chan *ch = chan_new(fd, link, w->lease_id, SIDE_WORKER);
    if (ch) ch->worker = w;
    lg.chan_id = w->lease_id;
    lg.worker_pid = w->pid;
  }
  link_send(link, RD__MSG_TYPE__MSG_LINK_GRANT, &lg.base);
}


/* Worker side: ask the owner of w's lease, an owner on the peer at the other
 * end of `link`, to give it back (fair share). */
void rd__cluster_lease_yield(node_client *link, const node_worker *w) {
  Rd__LinkLeaseYield m = RD__LINK_LEASE_YIELD__INIT;
  m.chan_id = w->lease_id;   /* the channel's id on both nodes (rd__cluster_granted) */
  link_send(link, RD__MSG_TYPE__MSG_LINK_LEASE_YIELD, &m.base);
}

/* ------------------------------------------------------------- link frames */

static void on_link_hello(node_client *c, Rd__LinkHello *m) {
  Rd__LinkHelloReply r = RD__LINK_HELLO_REPLY__INIT;
  r.node_index = C.index;
  if (!C.on || !rd__cluster_token_ok(m->token)) {
    r.status = RD_EAUTH;
    r.error = "cluster token missing or wrong";
    rd__node_send(c, RD__MSG_TYPE__MSG_LINK_HELLO_REPLY, &r.base, -1);
    rd__log(RD_LOG_WARN, "refused a node link from node %u: wrong token", m->node_index);
    rd__node_client_drop(c, "link with a wrong token");
    return;
  }
  cl_link_state *ls = calloc(1, sizeof(*ls));
  if (!ls) {
    rd__node_client_drop(c, "out of memory");
    return;
  }
  ls->tool = m->tool;
  ls->peer = m->tool ? 0 : m->node_index;
  ls->authed = 1;
  c->link = ls;
  c->role = ROLE_LINK;
  rd__node_send(c, RD__MSG_TYPE__MSG_LINK_HELLO_REPLY, &r.base, -1);
  if (m->tool) rd__log(RD_LOG_DEBUG, "job tool connected");
  else rd__log(RD_LOG_INFO, "link from node %u accepted", m->node_index);
}

/* Worker side of LINK_LEASE: make sure this node runs the job's code. */
typedef struct code_fetch {
  uv_work_t work;
  node_client *link;        /* may be dropped meanwhile: checked by id */
  uint32_t link_id;
  Rd__LinkActorCreate *actor;   /* an actor to host, rather than a lease */
  int record;               /* actor: a detached one to record here (the head), answered req_id */
  uint64_t req_id;
  rd_resources res;
  int priority;
  uint64_t pg_id;           /* granted from this bundle here */
  int bundle;
  uint32_t gcs_job;         /* the requester's GCS job (LinkLease.job_id) */
  double weight;            /* its fair-share weight there (LinkLease.job_weight) */
  int grant_or_reject;      /* LinkLease.grant_or_reject */
  const node_env *env;      /* LinkLease.env */
  uint32_t driver;          /* LinkLease.driver */
  int movable;              /* LinkLease.movable */
  const char *sel;          /* LinkLease.label_selector, interned */
  char hash[65];
  char path[600];
  char **argv;
  size_t argc;
  node_job *job;            /* the job that code is, once known */
  int queued;               /* a fetch was queued (counted in C.code_fetches) */
  int status;
  char err[256];
  uint64_t retry_since;
} code_fetch;

/* A grant_or_reject request (f) that does not fit in what is unclaimed here:
 * refuse it with RD_EAGAIN and that figure (1), or 0 to queue it. */
static int refused_busy(node_client *link, const code_fetch *f) {
  rd_resources here;
  local_unclaimed(&here);
  if (rd_res_fits(&here, &f->res)) return 0;
  Rd__LinkGrant lg = RD__LINK_GRANT__INIT;
  rd__res_msg fm;
  rd__res_to_msg(&here, &fm);
  char why[160];
  snprintf(why, sizeof(why), "node %u is busy: its room was taken after the view that placed the request", C.index);
  lg.req_id = f->req_id;
  lg.status = RD_EAGAIN;
  lg.error = why;
  lg.free_now = &fm.msg;
  link_send(link, RD__MSG_TYPE__MSG_LINK_GRANT, &lg.base);
  rd__log(RD_LOG_DEBUG, "lease request %llu from node %u refused: busy", (unsigned long long)f->req_id,
          rd__cluster_link_peer(link));
  return 1;
}

/* A peer's request for a worker here, from a placement-group bundle when
 * pg_id is set: 0, or an error (sent to the peer) when that bundle is not
 * here (removed, or moved after a node died: the peer asks its GCS again). */
static void queue_link_request(node_client *link, const code_fetch *f) {
  node_bundle *b = NULL;
  rd__log(RD_LOG_DEBUG, "lease request %llu from node %u queued%s", (unsigned long long)f->req_id,
          rd__cluster_link_peer(link), f->pg_id ? " in a placement-group bundle" : "");
  if (f->pg_id && !(b = rd__pg_bundle_here(f->pg_id, f->bundle))) {
    char why[200];
    snprintf(why, sizeof(why), "bundle %d of placement group %016llx is not reserved on node %u", f->bundle,
             (unsigned long long)f->pg_id, C.index);
    rd__node_reply_grant(link, f->req_id, RD_EAGAIN, why);
    return;
  }
  if (f->grant_or_reject && !f->pg_id && refused_busy(link, f)) return;
  /* a job driven from elsewhere has its drivers' weight here too (fair.c) */
  if (f->job && f->job->drivers == 0 && f->weight > 0 && f->weight <= 1000) f->job->weight = f->weight;
  rd__node_lease_queue(link, f->req_id, &f->res, f->priority, b, f->job, f->env, f->gcs_job, f->driver, f->movable,
                       f->sel);
}

/* Forwarded requests that waited for the job's code hash go now. */
static void rreqs_flush(void) {
  for (cl_rreq *q = C.rreqs, *next; q; q = next) {
    next = q->next;
    if (!q->link && q->target) rreq_go(q);
  }
}

/* The job whose code is stored in the GCS as `hash` (NULL: none here). */
static node_job *job_by_hash(const char *hash) {
  for (node_job *j = N.jobs; j; j = j->next)
    if (j->code_state == 2 && !strcmp(j->code_hash, hash)) return j;
  return NULL;
}

int rd__cluster_code_ensure(const char *hash, const char *path, char *err, size_t errlen) {
  if (utimensat(AT_FDCWD, path, NULL, 0) == 0) return 0;   /* fetched before; used now (code_sweep) */
  return rd_gcs_code_get(C.gcs, hash, path, err, errlen);
}

static void code_fetch_work(uv_work_t *w) {
  code_fetch *f = w->data;
  f->status = rd__cluster_code_ensure(f->hash, f->path, f->err, sizeof(f->err));
}

static void code_fetch_done(uv_work_t *w, int status) {
  code_fetch *f = w->data;
  if (status == 0 && rd__cluster_gcs_retry(w, code_fetch_work, code_fetch_done, f->status, &f->retry_since)) return;
  if (f->queued) C.code_fetches--;
  node_client *link = rd__node_client_by_id(f->link_id);
  if (status != 0 && f->status == 0) f->status = RD_ECANCELED;
  if (link && link == f->link) {
    char err[400];
    int r = f->status;
    /* a job this node already runs (a local driver's, under its own path), or
     * the shipped copy, which becomes a job whose workers' own remote
     * requests name the same code */
    if (r == 0 && !(f->job = job_by_hash(f->hash))) {
      f->job = rd__node_job_get(f->path, f->argv, f->argc);
      if (f->job) {
        snprintf(f->job->code_hash, sizeof(f->job->code_hash), "%s", f->hash);
        f->job->code_state = 2;
      } else {
        r = RD_ENOMEM;
        snprintf(f->err, sizeof(f->err), "node out of memory");
      }
    }
    if (r != 0) snprintf(err, sizeof(err), "cannot fetch the job's executable %.16s from the GCS: %s", f->hash, f->err);
    if (f->actor && f->record) {
      if (r == 0)
        rd__node_actor_record_for(link, f->job, f->actor->spec, f->actor->driver, f->actor->prefer_node, f->req_id);
      else rd__node_reply_actor_id(link->id, f->req_id, r, err, 0);
    } else if (f->actor) {
      if (r == 0) r = rd__node_actor_host_for(link, f->job, f->actor->spec, f->actor->actor_id, f->actor->restarts,
                                              f->actor->job_id, f->actor->driver, err, sizeof(err));
      if (r != 0) {
        Rd__LinkActorState st = RD__LINK_ACTOR_STATE__INIT;
        st.actor_id = f->actor->actor_id;
        st.error = err;
        link_send(link, RD__MSG_TYPE__MSG_LINK_ACTOR_STATE, &st.base);
      }
    } else if (r == 0) {
      queue_link_request(link, f);
    } else {
      rd__node_reply_grant(link, f->req_id, r, err);
    }
  }
  for (size_t i = 0; i < f->argc; i++) free(f->argv[i]);
  free(f->argv);
  if (f->actor) protobuf_c_message_free_unpacked(&f->actor->base, NULL);
  free(f);
  rd__node_flush_all();
}

/* Run `f` once this node has the job's code (fetched from the GCS if need be). */
static void code_fetch_start(code_fetch *f, node_client *c, const char *hash, char *const *argv, size_t argc) {
  f->argv = calloc(argc + 1, sizeof(char *));
  for (size_t i = 0; f->argv && i < argc; i++) f->argv[i] = strdup(argv[i] ? argv[i] : "");
  f->argc = f->argv ? argc : 0;
  f->link = c;
  f->link_id = c->id;
  snprintf(f->hash, sizeof(f->hash), "%s", hash);
  snprintf(f->path, sizeof(f->path), "%s/code/%s", N.opts.session_dir, hash);
  f->work.data = f;
  if (job_by_hash(hash)) {   /* the common case: nothing to fetch */
    code_fetch_done(&f->work, 0);
    return;
  }
  f->queued = 1;
  C.code_fetches++;
  uv_queue_work(N.loop, &f->work, code_fetch_work, code_fetch_done);
}

static void on_link_lease(node_client *c, Rd__LinkLease *m) {
  rd__log(RD_LOG_DEBUG, "link lease %llu from node %u (code %.16s)", (unsigned long long)m->req_id,
          rd__cluster_link_peer(c), m->code_hash ? m->code_hash : "");
  rd_resources res;
  if (rd__res_from_msg(m->res, &res) != 0 || !rd_sha256_is_hex(m->code_hash)) {
    rd__node_reply_grant(c, m->req_id, RD_EINVAL, "invalid spillback request");
    return;
  }
  if (!rd_res_feasible(&N.ledger, &res)) {
    rd__node_reply_grant(c, m->req_id, RD_EINFEASIBLE, "the node chosen for spillback cannot satisfy the request");
    return;
  }
  if (C.drained[0]) {   /* leaving (the autoscaler): the owner asks again, and is placed elsewhere */
    char buf[200];
    snprintf(buf, sizeof(buf), "node %u is leaving the cluster (%s)", C.index, C.drained);
    rd__node_reply_grant(c, m->req_id, RD_EAGAIN, buf);
    return;
  }
  const node_env *env;
  const char *sel = NULL;
  char why[300];
  int er = rd__node_env(m->env, m->n_env, &env, why, sizeof(why));
  if (er == 0) er = rd__node_sel(m->label_selector, &sel, why, sizeof(why));
  if (er != 0) {
    rd__node_reply_grant(c, m->req_id, er, why);
    return;
  }
  code_fetch *f = calloc(1, sizeof(*f));
  if (!f) {
    rd__node_reply_grant(c, m->req_id, RD_ENOMEM, "node out of memory");
    return;
  }
  f->req_id = m->req_id;
  f->res = res;
  f->priority = m->priority;
  f->pg_id = m->pg_id;
  f->bundle = m->bundle_index;
  f->gcs_job = m->job_id;
  f->weight = m->job_weight;
  f->grant_or_reject = m->grant_or_reject;
  f->env = env;
  f->driver = m->driver;
  f->movable = m->movable && !m->pg_id;
  f->sel = sel;
  code_fetch_start(f, c, m->code_hash, m->argv, m->n_argv);
}

static void on_link_grant(node_client *c, Rd__LinkGrant *m) {
  cl_rreq *q = NULL;
  for (cl_rreq *x = C.rreqs; x; x = x->next)
    if (x->link == c && x->link_req == m->req_id) q = x;
  if (!q) {   /* the owner cancelled or left: give it back */
    if (m->status == 0) {
      Rd__LinkReturn r = RD__LINK_RETURN__INIT;
      r.chan_id = m->chan_id;
      link_send(c, RD__MSG_TYPE__MSG_LINK_RETURN, &r.base);
    }
    return;
  }
  rreq_unlink(q);
  if (m->status == RD_EAGAIN && q->grant_or_reject) {
    /* the target's room was gone: correct the view until the next one, so
     * that the owner's new request is placed without it (here, most often) */
    rd_gcs_node *n = view_find(q->target);
    rd_resources fr;
    if (n && m->free_now && rd__res_from_msg(m->free_now, &fr) == 0) n->avail = fr;
    C.refused_busy++;
    rd__log(RD_LOG_DEBUG, "lease request %llu of client %u: node %u refused it (busy); placing it again",
            (unsigned long long)q->owner_req, q->owner->id, q->target);
    rd__node_reply_grant(q->owner, q->owner_req, RD_EAGAIN, "placed again: the chosen node was busy");
    free(q);
    return;
  }
  if (m->status != 0) {
    if (q->pg_id && m->status == RD_EAGAIN) rd__pg_forget(q->pg_id);   /* the bundle is not there now */
    char buf[400];
    snprintf(buf, sizeof(buf), "node %u: %s", q->target, m->error && *m->error ? m->error : rd_strerror(m->status));
    int status = m->status;
    if (m->transient) {   /* out of files or memory there: the owner asks again later */
      rd__node_reply_grant_passing(q->owner, q->owner_req, status, buf);
      free(q);
      return;
    }
    /* its workers cannot start there (or its code cannot be fetched): not the
     * task's fault, so the node is avoided for this job and the owner asks
     * again, to be placed elsewhere (or told that no node can run it) */
    if ((status == RD_ESYS || status == RD_EIO) && !q->pg_id &&
        rd__cluster_avoid(q->job, q->env, q->target, m->error && *m->error ? m->error : rd_strerror(status)))
      status = RD_EAGAIN;
    rd__node_reply_grant(q->owner, q->owner_req, status, buf);
    free(q);
    return;
  }
  /* out of files or memory here: the peer's worker goes back, and the
   * owner asks again after a backoff (a shortage that may pass) */
  int sv[2] = {-1, -1};
  cl_chan *ch = NULL;
  const char *why = NULL;
  int status = RD_ESYS;
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    why = rd__node_sys_error("socketpair failed on the node", errno);
  } else if (!(ch = chan_new(sv[0], c, m->chan_id, SIDE_OWNER))) {
    close(sv[1]);
    why = "node out of memory";
    status = RD_ENOMEM;
  }
  if (!ch) {
    Rd__LinkReturn r = RD__LINK_RETURN__INIT;
    r.chan_id = m->chan_id;
    link_send(c, RD__MSG_TYPE__MSG_LINK_RETURN, &r.base);
    rd__node_reply_grant_passing(q->owner, q->owner_req, status, why);
    free(q);
    return;
  }
  ch->owner = q->owner;
  ch->lease_id = (1ull << 63) | ++C.next_chan;
  if (!q->pg_id) {   /* a bundle's room is the group's, not the node's */
    ch->target = q->target;
    ch->res = q->res;
    ch->granted_ns = rd__now_ns();
  }
  Rd__LeaseGrant lg = RD__LEASE_GRANT__INIT;
  lg.req_id = q->owner_req;
  lg.lease_id = ch->lease_id;
  lg.worker_pid = m->worker_pid;
  lg.node = rd__cluster_link_peer(c);
  rd__node_send(q->owner, RD__MSG_TYPE__MSG_LEASE_GRANT, &lg.base, sv[1]);
  N.leases_granted++;
  free(q);
}

static void on_link_return(node_client *c, Rd__LinkReturn *m) {
  cl_chan *ch = chan_find(c, m->chan_id);
  node_worker *w = ch ? ch->worker : NULL;
  if (ch) {
    ch->worker = NULL;    /* handled here, not by chan_close */
    chan_close(ch, 0, NULL, 0);
  }
  if (!w) return;
  if (w->state == W_LEASED && w->lease_owner == c) {
    rd__node_worker_release(w);
    w->lease_owner = NULL;
    w->lease_id = 0;
    rd__node_worker_state(w, m->worker_lost ? W_DYING : W_IDLE);
    if (m->worker_lost && !w->stop_why)
      w->stop_why = w->retiring ? RD_STOP_MAX_CALLS : "stopped by the node: its lease's owner gave it back as lost";
    if (m->worker_lost && w->pid > 0) kill(w->pid, SIGKILL);
  }
  rd__node_dispatch();
}

/* ---------------------------------------------- riding out a GCS outage */

/* A GCS call that found the GCS unreachable runs again every
 * GCS_RETRY_MS for as long as the node itself waits for its GCS
 * (RAYDIST_GCS_TIMEOUT_S), so a GCS restart costs time, not actor names,
 * deaths, placement-group states or a job's code. */
#define GCS_RETRY_MS 250

typedef struct gcs_retry {
  uv_timer_t timer;
  uv_work_t *work;
  uv_work_cb run;
  uv_after_work_cb done;
  struct gcs_retry *next;
} gcs_retry;

static void retry_closed(uv_handle_t *h) { free(h->data); }

static void retry_unlink(gcs_retry *r) {
  for (gcs_retry **pp = &C.retries; *pp; pp = &(*pp)->next)
    if (*pp == r) {
      *pp = r->next;
      return;
    }
}

static void retry_fire(uv_timer_t *t) {
  gcs_retry *r = t->data;
  retry_unlink(r);
  if (C.on && !C.stopping) uv_queue_work(N.loop, r->work, r->run, r->done);
  else r->done(r->work, UV_ECANCELED);
  uv_close((uv_handle_t *)&r->timer, retry_closed);
}

int rd__cluster_gcs_retry(uv_work_t *w, uv_work_cb run, uv_after_work_cb done, int rc, uint64_t *since_ns) {
  if ((rc != RD_ECONN && rc != RD_ETIMEDOUT) || !C.on || C.stopping) return 0;
  uint64_t now = rd__now_ns();
  if (!*since_ns) {
    *since_ns = now;
    rd__log(RD_LOG_WARN, "the GCS at %s did not answer (%s); retrying every %d ms", C.gcs_addr, rd_strerror(rc),
            GCS_RETRY_MS);
  }
  if (now - *since_ns > C.gcs_timeout_ns) return 0;
  gcs_retry *r = calloc(1, sizeof(*r));
  if (!r) return 0;
  r->work = w;
  r->run = run;
  r->done = done;
  uv_timer_init(N.loop, &r->timer);
  r->timer.data = r;
  uv_timer_start(&r->timer, retry_fire, GCS_RETRY_MS, 0);
  r->next = C.retries;
  C.retries = r;
  return 1;
}

/* Stopping: calls waiting to be retried end as cancelled. */
static void retries_cancel(void) {
  while (C.retries) {
    gcs_retry *r = C.retries;
    C.retries = r->next;
    uv_timer_stop(&r->timer);
    r->done(r->work, UV_ECANCELED);
    uv_close((uv_handle_t *)&r->timer, retry_closed);
  }
}

/* ------------------------------------------------------------- actors */

/* A GCS actor-table call on a thread-pool thread, with its continuation. */
enum { GA_REGISTER, GA_DEAD, GA_LOOKUP, GA_LIST };
typedef struct gcs_actor_op {
  uv_work_t work;
  int kind;
  uint64_t actor_id;
  uint32_t client_id;
  uint64_t req_id;
  char name[256];
  char cls[256];
  char reason[200];
  int status;
  uint32_t node;
  int32_t max_pending;      /* GA_REGISTER: the actor's max_pending_calls; GA_LOOKUP: the answer's */
  uint64_t retry_since;
  int retried;              /* GA_REGISTER: asked again once, after a dead namesake here was unnamed */
  uint64_t wait_actor;      /* parked on C.name_waits until this actor's name is free */
  int all;                  /* GA_LIST: every namespace (else name holds the one) */
  rd_gcs_actor *list;       /* GA_LIST: the GCS's table */
  size_t nlist;
  struct gcs_actor_op *next;
} gcs_actor_op;

static int gcs_actor_queue(gcs_actor_op *op);

/* A name the GCS refused because a dead actor recorded here still held it:
 * its death is being written (or was, after the register ran), so the
 * register is asked once more when that write is done, instead of telling
 * a supervisor that re-creates a crashed actor that the name is taken. */
static int register_after_unnaming(gcs_actor_op *op) {
  if (op->status != RD_EEXIST || op->retried || !C.on || !C.gcs) return 0;
  node_actor *d = rd__node_actor_dead_named(op->name);
  if (!d) return 0;
  op->retried = 1;
  op->status = 0;
  op->retry_since = 0;
  if (!d->unnaming) return gcs_actor_queue(op);
  op->wait_actor = d->id;
  op->next = C.name_waits;
  C.name_waits = op;
  return 1;
}

void rd__cluster_name_freed(uint64_t actor_id) {
  for (gcs_actor_op **pp = &C.name_waits; *pp;) {
    gcs_actor_op *op = *pp;
    if (op->wait_actor != actor_id) {
      pp = &op->next;
      continue;
    }
    *pp = op->next;
    op->next = NULL;
    op->wait_actor = 0;
    if (C.on && C.gcs) {
      gcs_actor_queue(op);
    } else {
      rd__node_actor_registered(op->actor_id, op->client_id, op->req_id, RD_ECANCELED, "the node is stopping");
      free(op);
    }
  }
}

/* rd_kv_* on a cluster: the GCS's table, namespace "user", on the pool. */
typedef struct kv_op {
  uv_work_t work;
  uint32_t client_id;
  uint64_t req_id;
  uint32_t op;
  int overwrite;
  char *key;
  void *val;
  size_t len;
  char **keys;
  size_t nkeys;
  int status;
  char err[300];
} kv_op;

static void kv_work(uv_work_t *w) {
  kv_op *k = w->data;
  switch (k->op) {
    case 1: k->status = rd_gcs_kv_put(C.gcs, "user", k->key, k->val, k->len, k->overwrite); break;
    case 2: k->status = rd_gcs_kv_get(C.gcs, "user", k->key, &k->val, &k->len); break;
    case 3: k->status = rd_gcs_kv_del(C.gcs, "user", k->key); break;
    case 4: k->status = rd_gcs_kv_list(C.gcs, "user", k->key, &k->keys, &k->nkeys); break;
    case 5: k->status = rd_gcs_kv_put(C.gcs, RD_AS_KV_NS, RD_AS_KV_REQUESTED, k->val, k->len, 1); break;   /* rd_request_resources */
  }
  if (k->status) snprintf(k->err, sizeof(k->err), "%s", rd_gcs_last_error());
}

static void kv_done(uv_work_t *w, int status) {
  kv_op *k = w->data;
  if (status != 0 && !k->status) {
    k->status = RD_ECANCELED;
    snprintf(k->err, sizeof(k->err), "the node is stopping");
  }
  rd__node_kv_reply(k->client_id, k->req_id, k->status, k->err, k->op == 2 && !k->status ? k->val : NULL, k->len,
                    k->status ? NULL : k->keys, k->status ? 0 : k->nkeys);
  rd__node_flush_all();
  free(k->key);
  free(k->val);
  free(k->keys);
  free(k);
}

int rd__cluster_kv(node_client *c, const Rd__KvRequest *m) {
  if (!C.on) return 0;
  kv_op *k = calloc(1, sizeof(*k));
  if (k) {
    k->key = strdup(m->key ? m->key : "");
    if ((m->op == 1 || m->op == 5) && m->value.len) k->val = malloc(m->value.len);
  }
  if (!k || !k->key || ((m->op == 1 || m->op == 5) && m->value.len && !k->val)) {
    if (k) {
      free(k->key);
      free(k->val);
    }
    free(k);
    rd__node_kv_reply(c->id, m->req_id, RD_ENOMEM, "node out of memory", NULL, 0, NULL, 0);
    return 1;
  }
  if ((m->op == 1 || m->op == 5) && m->value.len) memcpy(k->val, m->value.data, m->value.len);
  k->len = m->op == 1 || m->op == 5 ? m->value.len : 0;
  k->client_id = c->id;
  k->req_id = m->req_id;
  k->op = m->op;
  k->overwrite = m->overwrite;
  k->work.data = k;
  uv_queue_work(N.loop, &k->work, kv_work, kv_done);
  return 1;
}

static void gcs_actor_work(uv_work_t *w) {
  gcs_actor_op *op = w->data;
  switch (op->kind) {
    case GA_REGISTER:
      op->status = rd_gcs_actor_register(C.gcs, op->actor_id, op->name, op->cls, C.index, op->max_pending);
      break;
    case GA_DEAD:
      op->status = rd_gcs_actor_update(C.gcs, op->actor_id, RD_GCS_ACTOR_DEAD, 0, op->reason);
      break;
    case GA_LOOKUP:
      op->status = rd_gcs_actor_lookup(C.gcs, op->name, &op->actor_id, &op->node, &op->max_pending);
      break;
    case GA_LIST:
      free(op->list);   /* a retry's */
      op->list = NULL;
      op->nlist = 0;
      op->status = rd_gcs_actor_list(C.gcs, &op->list, &op->nlist);
      break;
  }
}

/* GA_LIST's answer: the live named actors of its namespace, or all. */
static void actor_list_answer(gcs_actor_op *op) {
  char **names = op->nlist ? malloc(op->nlist * sizeof(*names)) : NULL;
  size_t n = 0;
  int st = op->status;
  if (!st && op->nlist && !names) st = RD_ENOMEM;
  for (size_t i = 0; !st && i < op->nlist; i++) {
    rd_gcs_actor *g = &op->list[i];
    if (g->state == RD_GCS_ACTOR_DEAD || !rd__node_name_in_ns(g->name, op->name, op->all)) continue;
    /* the GCS hears of a death after the record node (as in GA_LOOKUP) */
    node_actor *a = rd__node_actor_find(g->actor_id);
    if (a && a->state == A_DEAD && !rd__node_actor_hosted(a)) continue;
    names[n++] = g->name;
  }
  char err[200];
  snprintf(err, sizeof(err), "cannot list the actors in the GCS: %s", rd_strerror(st));
  rd__node_reply_actor_names(op->client_id, op->req_id, st, st ? err : NULL, names, n);
  free(names);
  free(op->list);
  op->list = NULL;
}

static void gcs_actor_done(uv_work_t *w, int status) {
  gcs_actor_op *op = w->data;
  if (status == 0 && rd__cluster_gcs_retry(w, gcs_actor_work, gcs_actor_done, op->status, &op->retry_since)) return;
  if (status != 0 && op->status == 0) op->status = RD_ECANCELED;
  char err[400];
  switch (op->kind) {
    case GA_REGISTER:
      if (register_after_unnaming(op)) return;
      if (op->status == RD_EEXIST) snprintf(err, sizeof(err), "an actor named '%s' already exists in the cluster", op->name);
      else snprintf(err, sizeof(err), "cannot register actor name '%s' with the GCS: %s", op->name, rd_strerror(op->status));
      rd__node_actor_registered(op->actor_id, op->client_id, op->req_id, op->status, err);
      break;
    case GA_LOOKUP:
      if (op->status == 0) {
        /* the GCS ops run on the thread pool, so the name of an actor that
         * died may still be listed: when its record is on this node (not a
         * copy hosted for a peer, which may restart elsewhere), it knows */
        node_actor *a = rd__node_actor_find(op->actor_id);
        if (a && a->state == A_DEAD && !(rd__node_actor_hosted(a))) op->status = RD_ENOENT;
      }
      snprintf(err, sizeof(err), "no live actor is named '%s' in the cluster", op->name);
      if (op->status == 0) rd__node_reply_actor_found(op->client_id, op->req_id, op->actor_id, op->max_pending);
      else rd__node_reply_actor_id(op->client_id, op->req_id, RD_ENOENT, err, 0);
      break;
    case GA_LIST:
      actor_list_answer(op);
      break;
    case GA_DEAD:   /* the name is free cluster-wide (or the GCS gave up): the kill is answered */
      if (op->status != 0)
        rd__log(RD_LOG_WARN, "actor %016llx: the GCS did not take its death (%s); its name may stay taken",
                (unsigned long long)op->actor_id, rd_strerror(op->status));
      rd__node_actor_unnamed(op->actor_id);
      break;
    default:
      break;
  }
  free(op);
  rd__node_flush_all();
}

static int gcs_actor_queue(gcs_actor_op *op) {
  if (!C.on || !C.gcs) {
    free(op);
    return 0;
  }
  op->work.data = op;
  uv_queue_work(N.loop, &op->work, gcs_actor_work, gcs_actor_done);
  return 1;
}

int rd__cluster_actor_register(node_actor *a, node_client *c, uint64_t req_id) {
  if (!C.on) return 0;
  gcs_actor_op *op = calloc(1, sizeof(*op));
  if (!op) return 0;
  op->kind = GA_REGISTER;
  op->actor_id = a->id;
  op->client_id = c->id;
  op->req_id = req_id;
  snprintf(op->name, sizeof(op->name), "%s", a->name);
  snprintf(op->cls, sizeof(op->cls), "%s", a->cls);
  op->max_pending = a->max_pending_calls;
  return gcs_actor_queue(op);
}

int rd__cluster_actor_dead(node_actor *a, const char *why) {
  if (!C.on || (rd__node_actor_hosted(a))) return 0;
  gcs_actor_op *op = calloc(1, sizeof(*op));
  if (!op) return 0;
  op->kind = GA_DEAD;
  op->actor_id = a->id;
  snprintf(op->reason, sizeof(op->reason), "%s", why ? why : "");
  return gcs_actor_queue(op);
}

/* A client's question to the GCS's actor table (GA_LOOKUP of a name,
 * GA_LIST of a namespace's names or all): 1 when on its way. */
static int gcs_actor_ask(int kind, node_client *c, uint64_t req_id, const char *name, int all) {
  if (!C.on) return 0;
  gcs_actor_op *op = calloc(1, sizeof(*op));
  if (!op) return 0;
  op->kind = kind;
  op->client_id = c->id;
  op->req_id = req_id;
  op->all = all;
  snprintf(op->name, sizeof(op->name), "%s", name ? name : "");
  return gcs_actor_queue(op);
}

int rd__cluster_actor_lookup(node_client *c, uint64_t req_id, const char *name) {
  return gcs_actor_ask(GA_LOOKUP, c, req_id, name, 0);
}

int rd__cluster_actor_list_named(node_client *c, uint64_t req_id, const char *ns, int all) {
  return gcs_actor_ask(GA_LIST, c, req_id, ns, all);
}

uint32_t rd__cluster_actor_place(node_actor *a, int *err, char *why, size_t whylen) {
  *err = 0;
  if (!C.on) return 0;
  Rd__LeaseRequest m = RD__LEASE_REQUEST__INIT;   /* placed like a lease of its class */
  m.strategy = a->strategy;
  m.node_affinity = a->affinity;
  m.soft = a->soft;
  m.label_selector = (char *)a->sel;
  m.prefer_node = a->prefer_node;   /* a detached actor's creator's node, first when it has room */
  unsigned how;
  uint32_t t = place(&m, &a->res, a->job, a->env, &how, err, why, whylen);
  if (t == 0 && (how & PLACE_WAITS)) *err = RD_EAGAIN;   /* actor_schedule waits for the node */
  if (t == 0 && *err == RD_EINFEASIBLE) {
    /* as a lease request: a node that just joined may not be in this view
     * yet (a driver started as soon as `raydist start` of the node that
     * has its resource returned), so only a later view refuses it */
    if (!a->infeasible_view || a->infeasible_view == C.view_seq + 1) {
      a->infeasible_view = C.view_seq + 1;
      *err = RD_EAGAIN;
      snprintf(why, whylen, "no node in this view of the cluster can run it: looked at again in the next");
    }
  } else {
    a->infeasible_view = 0;
  }
  rd__cluster_actor_claim(a, t);
  return t == C.index ? 0 : t;
}

/* Actor a is sent to node t now: the next actor placed before t reports it
 * must not count on that room (an actor queued behind another waits there
 * until respill moves it); the claim is answered in on_link_actor_state.
 * An earlier placement's claim is given back. */
void rd__cluster_actor_claim(node_actor *a, uint32_t t) {
  rd__cluster_claim_cancel(a->view_claim);
  a->view_claim = rd__cluster_view_claim(t, &a->res);
}

static void actor_spec(node_actor *a, Rd__ActorCreate *spec, rd__res_msg *rm) {
  rd__res_to_msg(&a->res, rm);
  spec->class_name = a->cls;
  spec->res = &rm->msg;
  spec->max_task_retries = a->max_task_retries;
  spec->max_pending_calls = a->max_pending_calls;
  spec->max_concurrency = a->max_concurrency;
  spec->concurrency_groups = a->cgroups;
  spec->n_args = a->nargs;
  spec->args = a->args;
  spec->priority = a->priority;
  spec->pg_id = a->pg_id;
  spec->bundle_index = a->bundle_index;
  spec->n_env = a->env ? a->env->n : 0;
  spec->env = a->env ? a->env->vars : NULL;
  spec->ns = a->ns;
  spec->strategy = a->strategy;   /* the host respills only what the default policy placed */
  spec->node_affinity = a->affinity;
  spec->soft = a->soft;
  spec->label_selector = (char *)a->sel;
}

static void await_add(uint64_t id) {
  if (C.nawait == C.capawait) {
    size_t nc = C.capawait ? C.capawait * 2 : 16;
    uint64_t *p = realloc(C.await_actors, nc * sizeof(uint64_t));
    if (!p) return;
    C.await_actors = p;
    C.capawait = nc;
  }
  C.await_actors[C.nawait++] = id;
}

void rd__cluster_actor_create(node_actor *a) {
  if (a->job->code_state == -1) {
    char buf[300];
    snprintf(buf, sizeof(buf), "cannot start it on node %u: the driver's executable could not be shipped: %s", a->host,
             a->job->code_err);
    a->host = 0;
    a->no_restart = 1;
    rd__node_actor_host_lost(a, buf);
    return;
  }
  if (a->job->code_state != 2 || a->job->gcs_job_adding) {   /* started when the upload (and job entry) finish */
    await_add(a->id);
    return;
  }
  node_client *l = link_open(a->host);
  if (!l) {   /* unreachable: placed again, without that node, and without counting a restart */
    char buf[200];
    snprintf(buf, sizeof(buf), "node %u is unreachable", a->host);
    rd__node_actor_host_gone(a, buf);
    return;
  }
  Rd__LinkActorCreate m = RD__LINK_ACTOR_CREATE__INIT;
  Rd__ActorCreate spec = RD__ACTOR_CREATE__INIT;
  rd__res_msg rm;
  actor_spec(a, &spec, &rm);
  m.spec = &spec;
  m.actor_id = a->id;
  m.code_hash = a->job->code_hash;
  m.n_argv = a->job->argc;
  m.argv = a->job->argv;
  m.restarts = (uint32_t)a->restarts;
  m.job_id = rd__node_actor_gcs_job(a);
  m.driver = a->driver;
  link_send(l, RD__MSG_TYPE__MSG_LINK_ACTOR_CREATE, &m.base);
  rd__log(RD_LOG_INFO, "actor %016llx (%s) placed on node %u", (unsigned long long)a->id, a->cls, a->host);
}

static void await_flush(void) {
  size_t n = C.nawait;
  C.nawait = 0;
  for (size_t i = 0; i < n; i++) {
    node_actor *a = rd__node_actor_find(C.await_actors[i]);
    if (a && a->host && a->state == A_PENDING) rd__cluster_actor_create(a);
  }
}

/* Ask node `to` for a socket to actor `actor_id`, answering caller c. */
enum { FWD_ASK, FWD_DIRECT, FWD_NO_REDIRECT };

static void connect_forward(uint32_t to, node_client *c, uint64_t caller_req, uint64_t actor_id, int dead_pid,
                            node_actor *rec, int how) {
  node_client *l = link_open(to);
  cl_conn *q = l ? calloc(1, sizeof(*q)) : NULL;
  if (!q && how == FWD_DIRECT) {   /* the host cannot be reached from here: through the record node */
    connect_forward(rd__rec_id_node(actor_id), c, caller_req, actor_id, dead_pid, NULL, FWD_NO_REDIRECT);
    return;
  }
  if (!q) {
    char buf[160];
    snprintf(buf, sizeof(buf), "node %u, which %s the actor, is unreachable", to, rec ? "hosts" : "records");
    if (rec) {   /* its host is gone: restart it (the caller waits for that) */
      parked_connect *p = calloc(1, sizeof(*p));
      if (p) {
        p->client = c;
        p->req_id = caller_req;
        p->next = rec->connects;
        rec->connects = p;
      }
      rd__node_actor_host_lost(rec, buf);
      if (!p) rd__node_reply_connect(c, caller_req, rec, RD_ENOMEM, "node out of memory", -1);
    } else {
      rd__node_reply_connect(c, caller_req, NULL, RD_ENODE_DIED, buf, -1);
    }
    return;
  }
  q->link = l;
  q->link_req = ++C.next_link_req;
  q->caller_id = c->id;
  q->caller_req = caller_req;
  q->actor_id = actor_id;
  q->dead_pid = dead_pid;
  q->direct = how == FWD_DIRECT;
  q->next = C.conns;
  C.conns = q;
  Rd__LinkActorConnect m = RD__LINK_ACTOR_CONNECT__INIT;
  m.req_id = q->link_req;
  m.actor_id = actor_id;
  m.dead_pid = dead_pid;
  m.no_redirect = how == FWD_NO_REDIRECT;
  link_send(l, RD__MSG_TYPE__MSG_LINK_ACTOR_CONNECT, &m.base);
}

void rd__cluster_actor_connect(node_actor *a, node_client *c, uint64_t req_id, int dead_pid, int no_redirect) {
  uint32_t peer = c->role == ROLE_LINK ? rd__cluster_link_peer(c) : 0;
  if (peer && peer != a->host && !rd__node_actor_hosted(a) && !no_redirect && (!dead_pid || dead_pid != a->host_pid)) {
    /* a third node's caller: it asks the host itself, so that its calls
     * cross one link, not two through this node (one that saw the
     * process this node thinks alive go is bridged here, as before) */
    Rd__LinkActorConnected r = RD__LINK_ACTOR_CONNECTED__INIT;
    r.req_id = req_id;
    r.redirect = a->host;
    link_send(c, RD__MSG_TYPE__MSG_LINK_ACTOR_CONNECTED, &r.base);
    return;
  }
  connect_forward(a->host, c, req_id, a->id, dead_pid, a, FWD_ASK);
}

int rd__cluster_actor_elsewhere(node_client *c, const Rd__ActorConnect *m) {
  uint32_t rec = rd__rec_id_node(m->actor_id);
  if (!C.on || rec == 0 || rec == C.index || c->role == ROLE_LINK) return 0;
  connect_forward(rec, c, m->req_id, m->actor_id, m->dead_pid, NULL, FWD_ASK);
  return 1;
}

/* Answer caller (a local client, or a link for a caller further away). */
/* Answer a link's connect: bridge fd over the link as a new channel.  r
 * holds the answer's fields (req_id, status, error, pid, restarts, retries). */
static void link_connected(node_client *link, Rd__LinkActorConnected *r, int fd, int local_pid) {
  if (r->status == 0 && fd >= 0) {
    uint64_t id = (1ull << 62) | ++C.next_chan;
    cl_chan *ch = chan_new(fd, link, id, SIDE_WORKER);
    if (!ch) {
      r->status = RD_ENOMEM;
      r->error = "node out of memory";
    } else {
      r->chan_id = id;
      ch->actor_pid = local_pid;
    }
  } else if (fd >= 0) {
    close(fd);
  }
  link_send(link, RD__MSG_TYPE__MSG_LINK_ACTOR_CONNECTED, &r->base);
}

/* Answer caller (a local client, or a link for a caller further away). */
static void answer_connect(node_client *caller, uint64_t req_id, const Rd__LinkActorConnected *r, uint64_t actor_id,
                           int fd) {
  if (caller->role == ROLE_LINK) {
    Rd__LinkActorConnected fwd = *r;   /* passed on, under the far caller's req_id */
    fwd.req_id = req_id;
    fwd.chan_id = 0;
    link_connected(caller, &fwd, fd, 0);
    return;
  }
  Rd__ActorConnectReply out = RD__ACTOR_CONNECT_REPLY__INIT;
  out.req_id = req_id;
  out.status = r->status;
  out.error = r->error ? r->error : "";
  out.actor_id = actor_id;
  out.max_task_retries = r->max_task_retries;
  out.worker_pid = r->worker_pid;
  out.restarts = r->restarts;
  out.concurrency = r->concurrency;
  out.node = r->node;
  out.max_pending_calls = r->max_pending_calls;
  rd__node_send(caller, RD__MSG_TYPE__MSG_ACTOR_CONNECT_REPLY, &out.base, fd);
}

void rd__cluster_connect_reply(node_client *link, uint64_t req_id, node_actor *a, int status, const char *err, int fd) {
  Rd__LinkActorConnected r = RD__LINK_ACTOR_CONNECTED__INIT;
  r.req_id = req_id;
  r.status = status;
  r.error = (char *)(err ? err : "");
  if (a) {
    r.worker_pid = a->worker ? a->worker->pid : a->host_pid;
    r.restarts = (uint32_t)a->restarts;
    r.max_task_retries = a->max_task_retries;
    r.concurrency = rd__node_actor_concurrency(a);
    r.node = C.index;
    r.max_pending_calls = a->max_pending_calls;
  }
  link_connected(link, &r, fd, a && a->worker ? a->worker->pid : 0);
}

static void on_link_actor_connected(node_client *c, Rd__LinkActorConnected *m) {
  cl_conn *q = NULL;
  for (cl_conn **pp = &C.conns; *pp; pp = &(*pp)->next)
    if (!(*pp)->kill && !(*pp)->record && (*pp)->link == c && (*pp)->link_req == m->req_id) {
      q = *pp;
      *pp = q->next;
      break;
    }
  if (!q) return;
  node_client *caller = rd__node_client_by_id(q->caller_id);
  if (caller && m->status == 0 && m->redirect && !q->direct && !m->chan_id) {
    /* its record node says: ask its host, one link away rather than two */
    connect_forward(m->redirect, caller, q->caller_req, q->actor_id, q->dead_pid, NULL, FWD_DIRECT);
    free(q);
    return;
  }
  if (caller && m->status != 0 && q->direct) {
    /* not (or no longer) running there: its record node knows, and waits for a restart */
    connect_forward(rd__rec_id_node(q->actor_id), caller, q->caller_req, q->actor_id, q->dead_pid, NULL,
                    FWD_NO_REDIRECT);
    free(q);
    return;
  }
  node_actor *rec = rd__node_actor_find(q->actor_id);
  if (caller && m->status == RD_EACTOR_DIED && rec && !rd__node_actor_hosted(rec) && rec->state != A_ALIVE) {
    /* its host's copy died: this record, told of it first on the same
     * link, answers (waits for the restart, or says the death in its own
     * words: "actor A died: on node 2: ...; no restarts left"), not the
     * host's bare "its worker process ... was killed" */
    Rd__ActorConnect ask = RD__ACTOR_CONNECT__INIT;
    ask.req_id = q->caller_req;
    ask.actor_id = q->actor_id;
    ask.dead_pid = q->dead_pid;
    rd__node_actor_connect(caller, &ask);
    free(q);
    return;
  }
  if (rec && rec->host && m->status == 0) rec->host_pid = m->worker_pid;
  int sv[2] = {-1, -1};
  if (m->status == 0 && (!caller || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)) {
    Rd__LinkClose cm = RD__LINK_CLOSE__INIT;   /* nobody to give it to */
    cm.chan_id = m->chan_id;
    cm.reason = "caller gone";
    link_send(c, RD__MSG_TYPE__MSG_LINK_CLOSE, &cm.base);
    if (caller) {
      Rd__LinkActorConnected e = *m;
      e.status = RD_ESYS;
      e.error = "socketpair failed on the node";
      answer_connect(caller, q->caller_req, &e, q->actor_id, -1);
    }
    free(q);
    return;
  }
  if (caller) {
    if (m->status == 0) {
      cl_chan *ch = chan_new(sv[0], c, m->chan_id, SIDE_OWNER);
      if (ch) ch->owner = caller;
    }
    answer_connect(caller, q->caller_req, m, q->actor_id, sv[1]);
  }
  free(q);
}

/* Tell record node link that actor_id never started here and is to be
 * placed again (not a restart), with what is free here and, from respill,
 * the node `to` with room for it (0: none named). */
static void send_placed_again(node_client *link, uint64_t actor_id, const rd_resources *free_now, uint32_t to,
                              const char *why) {
  rd__res_msg fm;
  rd__res_to_msg(free_now, &fm);
  Rd__LinkActorState st = RD__LINK_ACTOR_STATE__INIT;
  st.actor_id = actor_id;
  st.placed_again = 1;
  st.error = (char *)why;
  st.free_now = &fm.msg;
  st.to_node = to;
  link_send(link, RD__MSG_TYPE__MSG_LINK_ACTOR_STATE, &st.base);
}

/* A copy of m that outlives the frame it came in (freed with
 * protobuf_c_message_free_unpacked); NULL when out of memory. */
static void *msg_copy(const ProtobufCMessage *m) {
  size_t n = protobuf_c_message_get_packed_size(m);
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf) return NULL;
  protobuf_c_message_pack(m, buf);
  void *copy = protobuf_c_message_unpack(m->descriptor, NULL, n, buf);
  free(buf);
  return copy;
}

static void on_link_actor_create(node_client *c, Rd__LinkActorCreate *m) {
  if (C.drained[0] && m->spec) {   /* leaving (the autoscaler): not a restart, placed elsewhere */
    char why[200];
    snprintf(why, sizeof(why), "node %u is leaving the cluster (%s)", C.index, C.drained);
    rd_resources none;
    memset(&none, 0, sizeof(none));
    send_placed_again(c, m->actor_id, &none, 0, why);
    return;
  }
  if (!m->spec || !rd_sha256_is_hex(m->code_hash)) {
    Rd__LinkActorState st = RD__LINK_ACTOR_STATE__INIT;
    st.actor_id = m->actor_id;
    st.error = "invalid actor placement";
    link_send(c, RD__MSG_TYPE__MSG_LINK_ACTOR_STATE, &st.base);
    return;
  }
  code_fetch *f = calloc(1, sizeof(*f));
  if (!f) return;
  /* keep the message for the continuation: it goes when this frame does */
  if (!(f->actor = msg_copy(&m->base))) {
    free(f);
    return;
  }
  code_fetch_start(f, c, m->code_hash, m->argv, m->n_argv);
}

/* The head: record (and place) a detached actor that a client of node c
 * creates, once this node has the job's code; answered req_id. */
static void on_link_actor_record(node_client *c, Rd__LinkActorCreate *m) {
  if (!m->spec || !m->req_id || !rd_sha256_is_hex(m->code_hash)) {
    if (m->req_id) rd__node_reply_actor_id(c->id, m->req_id, RD_EINVAL, "invalid detached actor creation", 0);
    return;
  }
  code_fetch *f = calloc(1, sizeof(*f));
  if (f) f->actor = msg_copy(&m->base);
  if (!f || !f->actor) {
    free(f);
    rd__node_reply_actor_id(c->id, m->req_id, RD_ENOMEM, "node out of memory", 0);
    return;
  }
  f->record = 1;
  f->req_id = m->req_id;
  code_fetch_start(f, c, m->code_hash, m->argv, m->n_argv);
}

void rd__cluster_actor_state(node_actor *a, int alive, const char *why) {
  if (!a->creator || a->creator->dead) return;
  Rd__LinkActorState st = RD__LINK_ACTOR_STATE__INIT;
  st.actor_id = a->id;
  st.alive = alive;
  st.error = (char *)(why ? why : "");
  st.worker_pid = a->worker ? a->worker->pid : 0;
  link_send(a->creator, RD__MSG_TYPE__MSG_LINK_ACTOR_STATE, &st.base);
}

/* Hosted actor a is given back to its record node (rd__node_actor_respill),
 * for node `to`, which has room in this node's view. */
void rd__cluster_actor_give_back(node_actor *a, uint32_t to, const char *why) {
  if (!a->creator || a->creator->dead) return;
  rd_resources here;
  local_unclaimed(&here);
  send_placed_again(a->creator, a->id, &here, to, why);
  rd__log(RD_LOG_INFO, "actor %016llx (%s) waited here for resources: back to node %u, %s", (unsigned long long)a->id,
          a->cls, rd__cluster_link_peer(a->creator), why);
}

static void on_link_actor_state(node_client *c, Rd__LinkActorState *m) {
  cl_link_state *ls = c->link;
  node_actor *a = rd__node_actor_find(m->actor_id);
  if (!a || !a->host || a->host != ls->peer || a->state == A_DEAD) return;
  if (m->placed_again && !m->alive) {
    /* its room there is what the host says, the actor not in it */
    rd_gcs_node *n = view_find(ls->peer);
    rd_resources fr;
    if (n && m->free_now && rd__res_from_msg(m->free_now, &fr) == 0) {
      n->avail = fr;
      (void)claim_drop(a->view_claim, NULL);
    } else {
      rd__cluster_claim_cancel(a->view_claim);
    }
    a->view_claim = 0;
    /* the host's view, newer than this one, shows to_node with room for it:
     * this one gets at least that much there, or it may send the actor
     * straight back (each node gives it back only once per view) */
    rd_gcs_node *tn = m->to_node && m->to_node != C.index ? view_find(m->to_node) : NULL;
    if (tn && node_usable(tn)) view_room_at_least(tn, &a->res);
    rd__log(RD_LOG_INFO, "actor %016llx (%s): node %u gave it back (%s): placing it again", (unsigned long long)a->id,
            a->cls, ls->peer, m->error ? m->error : "");
    rd__node_actor_place_again(a);
    return;
  }
  if (m->alive) rd__cluster_claim_ack(a->view_claim);   /* its worker holds the room there */
  else rd__cluster_claim_cancel(a->view_claim);
  a->view_claim = 0;
  if (m->alive) {
    a->state = A_ALIVE;
    a->host_pid = a->last_pid = m->worker_pid;
    a->last_node = a->host;
    rd__log(RD_LOG_INFO, "actor %016llx (%s) is alive on node %u (pid %d)", (unsigned long long)a->id, a->cls, a->host,
            m->worker_pid);
    rd__node_actor_serve_connects(a);
  } else {
    char buf[400];
    snprintf(buf, sizeof(buf), "on node %u: %s", a->host, m->error && *m->error ? m->error : "it died");
    rd__node_actor_host_lost(a, buf);
  }
}

int rd__cluster_actor_kill_elsewhere(node_client *c, const Rd__ActorKill *m) {
  uint32_t rec = rd__rec_id_node(m->actor_id);
  if (!C.on || rec == 0 || rec == C.index || c->role == ROLE_LINK) return 0;
  node_client *l = link_open(rec);
  cl_conn *q = l ? calloc(1, sizeof(*q)) : NULL;
  if (!q) {
    char buf[160];
    snprintf(buf, sizeof(buf), "node %u, which records the actor, is unreachable", rec);
    if (m->req_id) rd__node_reply_actor_id(c->id, m->req_id, RD_ENODE_DIED, buf, m->actor_id);
    return 1;
  }
  q->kill = 1;
  q->link = l;
  q->link_req = ++C.next_link_req;
  q->caller_id = c->id;
  q->caller_req = m->req_id;
  q->actor_id = m->actor_id;
  q->next = C.conns;
  C.conns = q;
  Rd__ActorKill k = *m;
  k.req_id = q->link_req;
  link_send(l, RD__MSG_TYPE__MSG_LINK_ACTOR_KILL, &k.base);
  return 1;
}

/* The answer to a forwarded kill, or to a detached actor's creation sent
 * to the head: to the caller that asked. */
static void on_link_actor_killed(node_client *c, Rd__ActorIdReply *m) {
  for (cl_conn **pp = &C.conns; *pp; pp = &(*pp)->next) {
    cl_conn *q = *pp;
    if (!(q->kill || q->record) || q->link != c || q->link_req != m->req_id) continue;
    *pp = q->next;
    if (q->record && m->status == 0)
      rd__log(RD_LOG_INFO, "detached actor %016llx is recorded on the head, node %u", (unsigned long long)m->actor_id,
              rd__cluster_link_peer(c));
    if (q->caller_req) rd__node_reply_actor_id(q->caller_id, q->caller_req, m->status, m->error, m->actor_id);
    free(q);
    return;
  }
}

/* Another live node of the view whose totals could hold res (a job's
 * entrypoint resources this node has not) and whose labels satisfy sel
 * (NULL: any). */
static int other_could_hold(const rd_gcs_node *x, const rd_resources *res, const char *sel) {
  return x->index != C.index && x->state == RD_GCS_NODE_ALIVE && fits_total(&x->total, res) &&
         rd_labels_match(x->labels, sel && *sel ? sel : NULL);
}

void rd__cluster_nodes_holding(const rd_resources *res, char *out, size_t len) {
  size_t off = 0;
  int n = 0;
  out[0] = 0;
  for (size_t i = 0; i < C.nview && n < 4 && off + 1 < len; i++) {
    const rd_gcs_node *x = &C.view[i];
    if (!other_could_hold(x, res, NULL)) continue;
    int w = x->metrics_port > 0 ? snprintf(out + off, len - off, "%s %s (jobs API http://%s:%d)", n ? "," : "; it fits on",
                                           x->ip, x->ip, x->metrics_port)
                                : snprintf(out + off, len - off, "%s %s", n ? "," : "; it fits on", x->ip);
    if (w < 0 || (size_t)w >= len - off) {
      out[off] = 0;
      break;
    }
    off += (size_t)w;
    n++;
  }
}

/* rd__cluster_node_for, or (free_only) only a node with them free now. */
static int node_for(const rd_resources *res, const char *sel, int free_only, char *ip, size_t len) {
  const rd_gcs_node *best = NULL;
  for (size_t i = 0; i < C.nview; i++) {
    const rd_gcs_node *x = &C.view[i];
    if (!other_could_hold(x, res, sel)) continue;
    if (!best && !free_only) best = x;
    if (rd_res_fits(&x->avail, res)) {
      best = x;
      break;
    }
  }
  if (best) snprintf(ip, len, "%s", best->ip);
  return best != NULL;
}

int rd__cluster_node_for(const rd_resources *res, const char *sel, char *ip, size_t len) {
  return node_for(res, sel, 0, ip, len);
}

int rd__cluster_node_free_for(const rd_resources *res, const char *sel, char *ip, size_t len) {
  return node_for(res, sel, 1, ip, len);
}

int rd__cluster_node_least(const rd_resources *res, const char *sel, int (*load)(const char *ip, void *arg), void *arg,
                           char *ip, size_t len, int *least) {
  const rd_gcs_node *best = NULL;
  for (size_t i = 0; i < C.nview; i++) {
    const rd_gcs_node *x = &C.view[i];
    if (!other_could_hold(x, res, sel)) continue;
    int l = load(x->ip, arg);
    if (!best || l < *least) {
      best = x;
      *least = l;
    }
  }
  if (best) snprintf(ip, len, "%s", best->ip);
  return best != NULL;
}

uint32_t rd__cluster_head(void) {
  for (size_t i = 0; i < C.nview; i++)
    if (C.view[i].is_head && C.view[i].state == RD_GCS_NODE_ALIVE) return C.view[i].index;
  return 0;
}

static void conn_free(cl_conn *q) {
  if (q->spec) protobuf_c_message_free_unpacked(&q->spec->base, NULL);
  free(q);
}

static void record_fail(cl_conn *q, int status, const char *why) {
  if (q->caller_req) rd__node_reply_actor_id(q->caller_id, q->caller_req, status, why, 0);
  conn_free(q);
}

/* Sends the creation of q, whose job's code is stored, to the head. */
static void record_send(cl_conn *q) {
  uint32_t head = rd__cluster_head();
  node_client *l = head && head != C.index ? link_open(head) : NULL;
  if (!l) {
    char why[200];
    snprintf(why, sizeof(why), "the head, which records detached actors, is %s", head ? "unreachable" : "not alive");
    record_fail(q, RD_ENODE_DIED, why);
    return;
  }
  Rd__LinkActorCreate m = RD__LINK_ACTOR_CREATE__INIT;
  m.spec = q->spec;
  m.code_hash = q->job->code_hash;
  m.n_argv = q->job->argc;
  m.argv = q->job->argv;
  m.driver = q->driver;
  m.prefer_node = C.index;   /* near its creator, as it would have been placed here, when there is room */
  q->link = l;
  q->link_req = ++C.next_link_req;
  m.req_id = q->link_req;
  link_send(l, RD__MSG_TYPE__MSG_LINK_ACTOR_RECORD, &m.base);
  protobuf_c_message_free_unpacked(&q->spec->base, NULL);
  q->spec = NULL;
  q->job = NULL;
  q->next = C.conns;
  C.conns = q;
}

/* Creations that waited for their job's code: sent now, or failed. */
static void rec_wait_flush(void) {
  for (cl_conn **pp = &C.rec_wait; *pp;) {
    cl_conn *q = *pp;
    if (q->job->code_state == 1 || (q->job->code_state == 2 && q->job->gcs_job_adding)) {
      pp = &q->next;
      continue;
    }
    *pp = q->next;
    if (q->job->code_state == 2) {
      record_send(q);
    } else {
      char why[300];
      snprintf(why, sizeof(why), "the driver's executable could not be stored in the GCS for the head: %s",
               q->job->code_err);
      record_fail(q, RD_EIO, why);
    }
  }
}

int rd__cluster_actor_record_at_head(node_client *c, const Rd__ActorCreate *m, node_job *job) {
  uint32_t head = rd__cluster_head();
  if (!C.on || !m->detached || N.opts.is_head || !head || head == C.index || !job) return 0;
  if (job->code_state != 1 && job->code_state != 2) return 0;   /* no code the head could run: kept here, as before */
  cl_conn *q = calloc(1, sizeof(*q));
  if (q) q->spec = msg_copy(&m->base);
  if (!q || !q->spec) {
    free(q);
    rd__node_reply_actor_id(c->id, m->req_id, RD_ENOMEM, "node out of memory", 0);
    return 1;
  }
  q->record = 1;
  q->job = job;
  q->driver = rd__node_client_driver(c);
  q->caller_id = c->id;
  q->caller_req = m->req_id;
  q->next = C.rec_wait;
  C.rec_wait = q;
  rec_wait_flush();   /* at once, unless the code is still on its way to the GCS */
  return 1;
}

void rd__cluster_actor_kill(node_actor *a, int no_restart) {
  node_client *l = link_find(a->host);
  if (!l) return;   /* no link: nothing was ever started there */
  Rd__ActorKill k = RD__ACTOR_KILL__INIT;
  k.actor_id = a->id;
  k.no_restart = no_restart;
  k.exiting = a->exited;
  link_send(l, RD__MSG_TYPE__MSG_LINK_ACTOR_KILL, &k.base);
}


static void owner_gone_forward(uint32_t id, uint32_t except);

int rd__cluster_handle_frame(node_client *c, const rd__frame *f) {
  const ProtobufCMessageDescriptor *d = NULL;
  switch (f->type) {
    case RD__MSG_TYPE__MSG_LINK_HELLO: d = &rd__link_hello__descriptor; break;
    case RD__MSG_TYPE__MSG_LINK_HELLO_REPLY: d = &rd__link_hello_reply__descriptor; break;
    case RD__MSG_TYPE__MSG_LINK_LEASE: d = &rd__link_lease__descriptor; break;
    case RD__MSG_TYPE__MSG_LINK_GRANT: d = &rd__link_grant__descriptor; break;
    case RD__MSG_TYPE__MSG_LINK_DATA: d = &rd__link_data__descriptor; break;
    case RD__MSG_TYPE__MSG_LINK_CLOSE: d = &rd__link_close__descriptor; break;
    case RD__MSG_TYPE__MSG_LINK_RETURN: d = &rd__link_return__descriptor; break;
    case RD__MSG_TYPE__MSG_LINK_CANCEL: d = &rd__link_cancel__descriptor; break;
    case RD__MSG_TYPE__MSG_LINK_LEASE_YIELD: d = &rd__link_lease_yield__descriptor; break;
    case RD__MSG_TYPE__MSG_LINK_DELETE: d = &rd__obj_ids__descriptor; break;
    case RD__MSG_TYPE__MSG_LINK_HANDOVER: d = &rd__obj_handover__descriptor; break;
    case RD__MSG_TYPE__MSG_LINK_ACTOR_CREATE: d = &rd__link_actor_create__descriptor; break;
    case RD__MSG_TYPE__MSG_LINK_ACTOR_STATE: d = &rd__link_actor_state__descriptor; break;
    case RD__MSG_TYPE__MSG_LINK_ACTOR_CONNECT: d = &rd__link_actor_connect__descriptor; break;
    case RD__MSG_TYPE__MSG_LINK_ACTOR_CONNECTED: d = &rd__link_actor_connected__descriptor; break;
    case RD__MSG_TYPE__MSG_LINK_ACTOR_KILL: d = &rd__actor_kill__descriptor; break;
    case RD__MSG_TYPE__MSG_LINK_ACTOR_KILLED: d = &rd__actor_id_reply__descriptor; break;
    case RD__MSG_TYPE__MSG_LINK_ACTOR_RECORD: d = &rd__link_actor_create__descriptor; break;
    case RD__MSG_TYPE__MSG_LINK_WORKER_OUTPUT: d = &rd__worker_output__descriptor; break;
    case RD__MSG_TYPE__MSG_LINK_JOB: d = &rd__link_job__descriptor; break;
    case RD__MSG_TYPE__MSG_LINK_PG_PREPARE:
    case RD__MSG_TYPE__MSG_LINK_PG_PREPARED:
    case RD__MSG_TYPE__MSG_LINK_PG_COMMIT:
    case RD__MSG_TYPE__MSG_LINK_PG_ABORT:
    case RD__MSG_TYPE__MSG_LINK_PG_REMOVE:
    case RD__MSG_TYPE__MSG_LINK_PG_REMOVED:
    case RD__MSG_TYPE__MSG_LINK_PG_CREATE: d = NULL; break;   /* pg.c's */
    default: return 0;
  }
  cl_link_state *ls = c->link;
  if (f->type == RD__MSG_TYPE__MSG_LINK_HELLO ? c->role != ROLE_NONE : (c->role != ROLE_LINK || !ls)) {
    rd__node_client_drop(c, "link frame out of place");
    return 1;
  }
  if ((f->type == RD__MSG_TYPE__MSG_LINK_JOB) != (ls && ls->tool)) {   /* tools send jobs; nodes the rest */
    rd__node_client_drop(c, ls && ls->tool ? "a job tool sent a node's frame" : "LINK_JOB from a node");
    return 1;
  }
  if (!d) return rd__pg_link_frame(c, f);
  ProtobufCMessage *m = rd__frame_unpack(f, d);
  if (!m) {
    rd__node_client_drop(c, "malformed link frame");
    return 1;
  }
  switch (f->type) {
    case RD__MSG_TYPE__MSG_LINK_HELLO: on_link_hello(c, (Rd__LinkHello *)m); break;
    case RD__MSG_TYPE__MSG_LINK_HELLO_REPLY: {
      Rd__LinkHelloReply *r = (Rd__LinkHelloReply *)m;
      if (r->status != 0) {
        rd__log(RD_LOG_ERROR, "node %u refused our link: %s", ls->peer, r->error ? r->error : "");
        rd__node_client_drop(c, "link refused");
      } else {
        ls->authed = 1;
      }
      break;
    }
    case RD__MSG_TYPE__MSG_LINK_LEASE: on_link_lease(c, (Rd__LinkLease *)m); break;
    case RD__MSG_TYPE__MSG_LINK_GRANT: on_link_grant(c, (Rd__LinkGrant *)m); break;
    case RD__MSG_TYPE__MSG_LINK_DATA: {
      Rd__LinkData *d2 = (Rd__LinkData *)m;
      cl_chan *ch = chan_find(c, d2->chan_id);
      if (ch && d2->type > 0 && d2->type <= 0xffff) {
        if (ch->side == SIDE_OWNER && d2->type == RD__MSG_TYPE__MSG_TASK_REPLY && ch->inflight > 0) ch->inflight--;
        char word[300];   /* a call sent to a worker that has died: how it ended */
        if (rd__conn_send_raw(&ch->conn, (uint16_t)d2->type, d2->payload.data, d2->payload.len) != 0 ||
            rd__conn_flush(&ch->conn) < 0)
          chan_close(ch, RD_EWORKER_DIED, chan_worker_why(ch, word, sizeof(word), "died (its bridged socket closed)"), 1);
        else
          chan_update_poll(ch);
      }
      break;
    }
    case RD__MSG_TYPE__MSG_LINK_CLOSE: {
      Rd__LinkClose *cm = (Rd__LinkClose *)m;
      cl_chan *ch = chan_find(c, cm->chan_id);
      if (ch) chan_close(ch, cm->status, cm->reason, 0);
      break;
    }
    case RD__MSG_TYPE__MSG_LINK_RETURN: on_link_return(c, (Rd__LinkReturn *)m); break;
    case RD__MSG_TYPE__MSG_LINK_CANCEL: {
      (void)rd__node_lease_drop(c, ((Rd__LinkCancel *)m)->req_id);
      break;
    }
    case RD__MSG_TYPE__MSG_LINK_LEASE_YIELD: {   /* owner side: pass it on to the lease's owner */
      cl_chan *ch = chan_find(c, ((Rd__LinkLeaseYield *)m)->chan_id);
      if (ch && ch->side == SIDE_OWNER && !ch->closed && ch->owner) {
        Rd__LeaseYield y = RD__LEASE_YIELD__INIT;
        y.lease_id = ch->lease_id;
        rd__node_send(ch->owner, RD__MSG_TYPE__MSG_LEASE_YIELD, &y.base, -1);
      }
      break;
    }
    case RD__MSG_TYPE__MSG_LINK_ACTOR_CREATE: on_link_actor_create(c, (Rd__LinkActorCreate *)m); break;
    case RD__MSG_TYPE__MSG_LINK_ACTOR_STATE: on_link_actor_state(c, (Rd__LinkActorState *)m); break;
    case RD__MSG_TYPE__MSG_LINK_ACTOR_CONNECT: {
      Rd__LinkActorConnect *lc = (Rd__LinkActorConnect *)m;
      Rd__ActorConnect ac = RD__ACTOR_CONNECT__INIT;
      ac.req_id = lc->req_id;
      ac.actor_id = lc->actor_id;
      ac.dead_pid = lc->dead_pid;
      ac.no_redirect = lc->no_redirect;
      rd__node_actor_connect(c, &ac);   /* answered through rd__cluster_connect_reply */
      break;
    }
    case RD__MSG_TYPE__MSG_LINK_ACTOR_CONNECTED: on_link_actor_connected(c, (Rd__LinkActorConnected *)m); break;
    case RD__MSG_TYPE__MSG_LINK_ACTOR_KILL: {
      Rd__ActorKill *k = (Rd__ActorKill *)m;
      node_actor *a = rd__node_actor_find(k->actor_id);
      if (a && a->creator == c) {   /* host: the outcome goes back as actor state */
        k->req_id = 0;
        rd__node_actor_kill(c, k);
      } else {                      /* record: a caller on the peer's node, answered LINK_ACTOR_KILLED */
        rd__node_actor_kill(c, k);
      }
      break;
    }
    case RD__MSG_TYPE__MSG_LINK_ACTOR_KILLED: on_link_actor_killed(c, (Rd__ActorIdReply *)m); break;
    case RD__MSG_TYPE__MSG_LINK_ACTOR_RECORD: on_link_actor_record(c, (Rd__LinkActorCreate *)m); break;
    case RD__MSG_TYPE__MSG_LINK_DELETE: {
      Rd__ObjIds *ids = (Rd__ObjIds *)m;
      for (size_t i = 0; i < ids->n_object_ids; i++) rd__node_let_go(ids->object_ids[i], ids->client);
      for (size_t i = 0; i < ids->n_owners_gone; i++) {
        rd__node_owner_gone(ids->owners_gone[i]);
        owner_gone_forward(ids->owners_gone[i], rd__cluster_link_peer(c));
      }
      break;
    }
    case RD__MSG_TYPE__MSG_LINK_HANDOVER: {
      Rd__ObjHandover *h = (Rd__ObjHandover *)m;
      for (size_t i = 0; i < h->n_object_ids; i++) (void)rd__node_hand_over(h->object_ids[i], h->owner);
      break;
    }
    case RD__MSG_TYPE__MSG_LINK_WORKER_OUTPUT:   /* a driver here gone: its worker's node logged it */
      (void)rd__node_output_deliver((Rd__WorkerOutput *)m);
      break;
    case RD__MSG_TYPE__MSG_LINK_JOB: rd__job_link(c, (Rd__LinkJob *)m); break;
  }
  protobuf_c_message_free_unpacked(m, NULL);
  return 1;
}

void rd__cluster_worker_word(node_worker *w, const char *word) {
  for (cl_chan *ch = C.chans; ch; ch = ch->next)
    if (!ch->closed && ch->side == SIDE_WORKER && (ch->worker == w || (ch->actor_pid && ch->actor_pid == w->pid)) &&
        !ch->exit_word)
      ch->exit_word = strdup(word);
}

void rd__cluster_worker_gone(node_worker *w) {
  for (cl_chan *ch = C.chans; ch; ch = ch->next)
    if (ch->worker == w) ch->worker = NULL;
}

int rd__cluster_worker_kill(node_worker *w, int status, const char *why) {
  for (cl_chan *ch = C.chans; ch; ch = ch->next) {
    if (ch->closed || ch->side != SIDE_WORKER || ch->worker != w) continue;
    chan_close(ch, status, why, 1);   /* tells the owner's node, and kills w */
    return 1;
  }
  return 0;
}

/* Nodes this one handed objects over to for an owner (MSG_LINK_HANDOVER:
 * a task here returned refs to objects its subtasks left there).  The
 * owner's node may have no link to them, so when the owner is gone this
 * node tells them (owner_gone_forward); before, the objects stayed there
 * for the cluster's life. */
typedef struct cl_handed {
  uint32_t n, cap;
  uint32_t *nodes;
} cl_handed;

static void handed_add(uint32_t owner, uint32_t node) {
  if (!C.handed.slots && rd__u64map_init(&C.handed, 64) != 0) return;
  cl_handed *h = rd__u64map_get(&C.handed, owner);
  if (!h) {
    if (rd__u64map_reserve(&C.handed, C.handed.count + 1) != 0 || !(h = calloc(1, sizeof(*h)))) return;
    rd__u64map_put(&C.handed, owner, h);
  }
  for (uint32_t i = 0; i < h->n; i++)
    if (h->nodes[i] == node) return;
  if (h->n == h->cap) {
    uint32_t cap = h->cap ? h->cap * 2 : 4;
    uint32_t *p = realloc(h->nodes, cap * sizeof(*p));
    if (!p) return;   /* that node keeps them, as before */
    h->nodes = p;
    h->cap = cap;
  }
  h->nodes[h->n++] = node;
}

/* Owner `id` is gone: the nodes this one handed its objects over to are
 * told (but `except`, which told us). */
static void owner_gone_forward(uint32_t id, uint32_t except) {
  cl_handed *h = C.handed.slots ? rd__u64map_del(&C.handed, id) : NULL;
  if (!h) return;
  Rd__ObjIds m = RD__OBJ_IDS__INIT;
  m.n_owners_gone = 1;
  m.owners_gone = &id;
  for (uint32_t i = 0; i < h->n; i++) {
    if (h->nodes[i] == except || h->nodes[i] == C.index) continue;
    node_client *l = link_open(h->nodes[i]);
    if (l) link_send(l, RD__MSG_TYPE__MSG_LINK_DELETE, &m.base);   /* else: gone, and its store with it */
  }
  free(h->nodes);
  free(h);
}

/* Client `id` of this node is gone: the nodes this one has links to (where
 * its tasks ran) delete the objects it owned there, and so do those it
 * handed objects over to for it. */
static void owner_gone_tell_peers(uint32_t id) {
  Rd__ObjIds m = RD__OBJ_IDS__INIT;
  m.n_owners_gone = 1;
  m.owners_gone = &id;
  uint32_t told[64];   /* outbound peers (a few), not told twice below */
  size_t ntold = 0;
  for (node_client *l = N.clients; l; l = l->next) {
    cl_link_state *ls = l->link;
    if (l->role == ROLE_LINK && !l->dead && ls && ls->outbound && ls->peer) {
      link_send(l, RD__MSG_TYPE__MSG_LINK_DELETE, &m.base);
      if (ntold < 64) told[ntold++] = ls->peer;
    }
  }
  cl_handed *h = C.handed.slots ? rd__u64map_get(&C.handed, id) : NULL;
  for (uint32_t i = 0; h && i < h->n; i++)
    for (size_t k = 0; k < ntold; k++)
      if (h->nodes[i] == told[k]) h->nodes[i] = C.index;   /* skipped by owner_gone_forward */
  owner_gone_forward(id, 0);
}

void rd__cluster_client_dropped(node_client *c) {
  /* also after rd__cluster_stop: shutdown drops every client last */
  int is_link = c->role == ROLE_LINK || c->link;
  uint32_t peer = c->link ? ((cl_link_state *)c->link)->peer : 0;
  if (C.on && !C.stopping && (c->role == ROLE_DRIVER || c->role == ROLE_WORKER)) owner_gone_tell_peers(c->id);
  for (cl_chan *ch = C.chans, *next; ch; ch = next) {
    next = ch->next;
    if (ch->closed) continue;
    if (ch->link == c) {
      char why[160];
      snprintf(why, sizeof(why), "node %u died or its link broke", peer);   /* the owner says what it ran */
      chan_close(ch, RD_ENODE_DIED, why, 0);
    } else if (ch->owner == c) {
      chan_owner_gone(ch, "owner left");
    }
  }
  for (cl_rreq *q = C.rreqs, *next; q; q = next) {
    next = q->next;
    if (q->owner == c) {
      rreq_cancel(q);
    } else if (q->link == c) {
      /* the target went away before granting: try again elsewhere */
      rreq_unlink(q);
      if (peer) C.link_failed_at[peer & 4095] = rd__now_ns();
      char buf[200];
      snprintf(buf, sizeof(buf), "node %u died before granting the lease", q->target);
      rd__node_reply_grant(q->owner, q->owner_req, RD_EAGAIN, buf);
      free(q);
    }
  }
  for (cl_conn **pp = &C.conns; *pp;) {
    cl_conn *q = *pp;
    if (q->link != c && q->caller_id != c->id) {
      pp = &q->next;
      continue;
    }
    *pp = q->next;
    node_client *caller = q->link == c ? rd__node_client_by_id(q->caller_id) : NULL;
    node_actor *rec = caller ? rd__node_actor_find(q->actor_id) : NULL;
    if (q->record) {
      /* the head may have recorded it before it went: the caller learns it was not answered */
      char why[160];
      snprintf(why, sizeof(why), "node %u, the head, which records detached actors, died or its link broke", peer);
      if (caller && q->caller_req) rd__node_reply_actor_id(caller->id, q->caller_req, RD_ENODE_DIED, why, 0);
    } else if (q->kill) {
      char why[120];
      snprintf(why, sizeof(why), "node %u, which records the actor, died or its link broke", peer);
      if (caller && q->caller_req) rd__node_reply_actor_id(caller->id, q->caller_req, RD_ENODE_DIED, why, q->actor_id);
    } else if (caller && q->direct && rd__rec_id_node(q->actor_id) != peer) {
      /* its host went while asked directly: through its record node, which restarts it */
      connect_forward(rd__rec_id_node(q->actor_id), caller, q->caller_req, q->actor_id, q->dead_pid, NULL,
                      FWD_NO_REDIRECT);
    } else if (caller && rec && rec->host == peer) {   /* waits for the restart */
      parked_connect *p = calloc(1, sizeof(*p));
      if (p) {
        p->client = caller;
        p->req_id = q->caller_req;
        p->next = rec->connects;
        rec->connects = p;
      }
    } else if (caller) {
      Rd__LinkActorConnected e = RD__LINK_ACTOR_CONNECTED__INIT;
      char why[120];
      snprintf(why, sizeof(why), "node %u died or its link broke", peer);
      e.status = RD_ENODE_DIED;
      e.error = why;
      answer_connect(caller, q->caller_req, &e, q->actor_id, -1);
    }
    free(q);
  }
  /* not placed there again at once (the view may still show it) */
  if (is_link && peer && ((cl_link_state *)c->link)->outbound) C.link_failed_at[peer & 4095] = rd__now_ns();
  if (is_link && peer) {   /* actors recorded here and hosted there: restart them (or place again) */
    char why[120];
    snprintf(why, sizeof(why), "node %u died or its link broke", peer);
    for (node_actor *a = N.actors; a; a = a->next)
      if (a->host == peer && a->state != A_DEAD) rd__node_actor_host_gone(a, why);
  }
  if (is_link) link_state_free(c);
}

/* ------------------------------------------------------------- objects */

static cl_pull *pull_find(uint64_t oid) { return C.pulls.slots ? rd__u64map_get(&C.pulls, oid) : NULL; }

static cl_fail *fail_find(uint64_t oid) {
  for (cl_fail *f = C.fails; f; f = f->next)
    if (f->oid == oid) return f;
  return NULL;
}

static void fail_forget(uint64_t oid) {
  for (cl_fail **pp = &C.fails; *pp; pp = &(*pp)->next)
    if ((*pp)->oid == oid) {
      cl_fail *f = *pp;
      *pp = f->next;
      free(f);
      return;
    }
}

static cl_fail *fail_record(uint64_t oid, int status, const char *why, int tries, int transient) {
  fail_forget(oid);
  cl_fail *f = calloc(1, sizeof(*f));
  if (!f) return NULL;
  f->oid = oid;
  f->status = status;
  f->at = rd__now_ns();
  f->tries = tries;
  f->transient = transient;
  snprintf(f->why, sizeof(f->why), "%s", why);
  f->next = C.fails;
  C.fails = f;
  return f;
}

/* A waiting get may still pull it again (then it is not answered yet). */
static int fail_retryable(const cl_fail *f) { return f->transient && f->tries < RD_CL_PULL_TRIES; }

static void fails_expire(void) {
  uint64_t now = rd__now_ns();
  for (cl_fail **pp = &C.fails; *pp;) {
    if (now - (*pp)->at > RD_CL_FAIL_KEEP_NS) {
      cl_fail *f = *pp;
      *pp = f->next;
      free(f);
    } else {
      pp = &(*pp)->next;
    }
  }
}

static void *pull_alloc(void *arg, uint64_t size) {
  cl_pull *p = arg;
  if (__atomic_load_n(&p->abandoned, __ATOMIC_ACQUIRE)) return NULL;   /* a new pull may make the object */
  cl_hop h = {HOP_CREATE, p->oid, size, NULL, 0, 0, 1, NULL};
  if (hop_call(&h) != 0) {
    p->no_room = 1;
    return NULL;
  }
  p->created = 1;
  return (void *)h.data;
}

static void pull_work(uv_work_t *w) {
  cl_pull *p = w->data;
  p->status = rd_xfer_pull(C.xc, p->peer, p->oid, pull_alloc, p, 120000, NULL, p->err, sizeof(p->err));
}

static void pull_done(uv_work_t *w, int status);

/* Start pulls waiting for a turn, oldest first, while fewer than
 * RD_CL_MAX_PULLS run. */
static void pulls_start(void) {
  while (C.pull_wait && C.npulls_running < RD_CL_MAX_PULLS && !C.stopping) {
    cl_pull *p = C.pull_wait;
    C.pull_wait = p->wait_next;
    if (!C.pull_wait) C.pull_wait_tail = &C.pull_wait;
    C.npulls_running++;
    uv_queue_work(N.loop, &p->work, pull_work, pull_done);
  }
}

static void pull_done(uv_work_t *w, int status) {
  cl_pull *p = w->data;
  if (__atomic_load_n(&p->abandoned, __ATOMIC_ACQUIRE)) {   /* answered already, turn given back */
    if (p->created) {
      (void)rd_store_release(N.store, p->oid);
      (void)rd_store_delete(N.store, p->oid);
    }
    rd__log(RD_LOG_DEBUG, "abandoned pull of %llx from node %u ended: %s", (unsigned long long)p->oid, p->node,
            rd_err_name(p->status));
    free(p);
    return;
  }
  C.npulls_running--;
  rd__u64map_del(&C.pulls, p->oid);
  if (status != 0 && p->status == 0) p->status = RD_ECANCELED;
  if (p->status == 0) {
    int sst = rd_store_seal(N.store, p->oid);
    if (sst) rd__log(RD_LOG_DEBUG, "seal of pulled %llx: %s", (unsigned long long)p->oid, rd_err_name(sst));
    rd__node_parked_arrived(p->oid);     /* waiting gets pin it first */
    (void)rd_store_release(N.store, p->oid);
    (void)rd_store_delete(N.store, p->oid);   /* secondary copy: gone with its last pin */
    rd__log(RD_LOG_DEBUG, "pulled object %llx from node %u", (unsigned long long)p->oid, p->node);
  } else {
    if (p->created) {
      (void)rd_store_release(N.store, p->oid);
      (void)rd_store_delete(N.store, p->oid);
    }
    char why[300];
    snprintf(why, sizeof(why), "object %llx held on node %u could not be fetched: %s", (unsigned long long)p->oid,
             p->node, p->err[0] ? p->err : rd_strerror(p->status));
    int transient = p->status != RD_ENOENT && p->status != RD_ECANCELED && !p->no_room;
    int last = !transient || p->tries + 1 >= RD_CL_PULL_TRIES;
    rd__log(last ? RD_LOG_WARN : RD_LOG_INFO, "%s (pull %d of at most %d)", why, p->tries + 1, RD_CL_PULL_TRIES);
    int st = p->status == RD_ENOENT ? RD_EOBJECT_LOST : p->status;
    if (st == RD_ECONN || st == RD_ETIMEDOUT) st = RD_ENODE_DIED;
    fail_record(p->oid, st, why, p->tries + 1, transient);
    rd__node_retry_parked();
  }
  free(p);
  pulls_start();
  rd__node_flush_all();
}

void rd__cluster_prefetch(const uint64_t *ids, const uint32_t *nodes, size_t n, int fresh) {
  if (!C.on || !nodes) return;
  for (size_t i = 0; i < n; i++) {
    if (!nodes[i] || nodes[i] == C.index) continue;
    uint64_t off, sz;
    int st = rd__node_store_get(ids[i], &off, &sz);
    if (st == 0) {
      (void)rd_store_release(N.store, ids[i]);
      continue;
    }
    if (st == RD_EAGAIN || pull_find(ids[i])) continue;
    /* After a failed pull, a new request (fresh) tries again at once.  A
     * parked get looked at again tries again only after a transient
     * failure, a few times, backing off (RD_CL_PULL_TRIES); otherwise it is
     * answered with the failure.  Before, every look erased the failure
     * and pulled again, so every failed pull started the next: a tight
     * loop against a dead node until its death was known (70,000 pulls in
     * 2 s). */
    cl_fail *f = fail_find(ids[i]);
    int tries = 0;
    if (f && !fresh) {
      if (!fail_retryable(f) || rd__now_ns() < f->at + (RD_CL_PULL_BACKOFF_NS << (f->tries - 1))) continue;
      tries = f->tries;
      C.pull_retries++;
    }
    uint64_t unknown_since = f ? f->unknown_since : 0;
    if (f) fail_forget(ids[i]);
    const rd_gcs_node *nd = view_find(nodes[i]);
    if (!nd) {
      /* not in this node's view at all: most likely a node that joined
       * since the view came (the owner, whose node placed work there, knows
       * it first), so looked for again each tick (a transient failure that
       * does not count as a try) until RD_CL_UNKNOWN_WAIT_NS have passed.
       * Before, a task here given an object made on a node that had just
       * joined failed with "node died" */
      const uint64_t now = rd__now_ns();
      if (!unknown_since) unknown_since = now;
      const int waiting = now - unknown_since < RD_CL_UNKNOWN_WAIT_NS;
      char why[200];
      snprintf(why, sizeof(why), "object %llx was held on node %u, which is not in the cluster%s",
               (unsigned long long)ids[i], nodes[i], waiting ? " (yet)" : " (not seen for 5 s)");
      cl_fail *nf = fail_record(ids[i], RD_ENODE_DIED, why, 1, waiting);
      if (nf) nf->unknown_since = unknown_since;
      continue;
    }
    if (nd->state != RD_GCS_NODE_ALIVE) {
      char why[200];
      snprintf(why, sizeof(why), "object %llx was held on node %u, which died", (unsigned long long)ids[i], nodes[i]);
      fail_record(ids[i], RD_ENODE_DIED, why, tries + 1, 0);
      continue;
    }
    if (!C.pulls.slots && rd__u64map_init(&C.pulls, 64) != 0) continue;
    cl_pull *p = calloc(1, sizeof(*p));
    if (!p || rd__u64map_reserve(&C.pulls, C.pulls.count + 1) != 0) {   /* tried again at the next look */
      free(p);
      continue;
    }
    p->oid = ids[i];
    p->node = nodes[i];
    p->tries = tries;
    snprintf(p->peer, sizeof(p->peer), "%s:%d", nd->ip, nd->xfer_port);
    p->work.data = p;
    rd__u64map_put(&C.pulls, p->oid, p);
    if (!C.pull_wait_tail) C.pull_wait_tail = &C.pull_wait;
    *C.pull_wait_tail = p;   /* pulling from here on (pull_find), started in turn */
    C.pull_wait_tail = &p->wait_next;
  }
  pulls_start();
}

/* Node `node` is dead: the pulls from it are answered now, with its death,
 * rather than when their calls give up (a hung peer holds them until the
 * 120 s deadline or gRPC's keepalive, 10 s).  Those not started are
 * dropped; those running are abandoned (pull_done drops what they bring
 * back) and give their turn to the next. */
static void pull_fail_dead(const cl_pull *p) {
  char why[200];
  snprintf(why, sizeof(why), "object %llx was held on node %u, which died", (unsigned long long)p->oid, p->node);
  fail_record(p->oid, RD_ENODE_DIED, why, p->tries + 1, 0);
}

static void pulls_abandon(uint32_t node) {
  if (!C.pulls.slots || !C.pulls.count) return;
  size_t dropped = 0, abandoned = 0;
  for (cl_pull **pp = &C.pull_wait; *pp;) {   /* not started */
    cl_pull *p = *pp;
    if (p->node != node) {
      pp = &p->wait_next;
      continue;
    }
    *pp = p->wait_next;
    pull_fail_dead(p);
    rd__u64map_del(&C.pulls, p->oid);
    free(p);
    dropped++;
  }
  C.pull_wait_tail = &C.pull_wait;
  while (*C.pull_wait_tail) C.pull_wait_tail = &(*C.pull_wait_tail)->wait_next;
  /* the rest of C.pulls are running: at most RD_CL_MAX_PULLS */
  cl_pull *run[RD_CL_MAX_PULLS];
  for (uint64_t i = 0; i <= C.pulls.mask && abandoned < RD_CL_MAX_PULLS; i++) {
    cl_pull *p = C.pulls.slots[i].val;
    if (p && p->node == node) run[abandoned++] = p;
  }
  for (size_t i = 0; i < abandoned; i++) {
    cl_pull *p = run[i];
    pull_fail_dead(p);
    rd__u64map_del(&C.pulls, p->oid);
    __atomic_store_n(&p->abandoned, 1, __ATOMIC_RELEASE);
    C.npulls_running--;
  }
  if (dropped + abandoned)
    rd__log(RD_LOG_INFO, "%zu pulls from dead node %u answered with its death (%zu had started)", dropped + abandoned,
            node, abandoned);
}

int rd__cluster_obj_status(uint64_t id, const char **why) {
  if (!C.on) return 0;
  if (pull_find(id)) return RD_EAGAIN;
  cl_fail *f = fail_find(id);
  if (f && fail_retryable(f)) return RD_EAGAIN;   /* pulled again soon */
  if (f && why) *why = f->why;
  return f ? f->status : 0;
}

/* ids[i] held on nodes[i]: one frame of `type` (ObjIds for MSG_LINK_DELETE,
 * of `client`; ObjHandover to `client` for MSG_LINK_HANDOVER) to each other
 * node named, with every id it holds. */
static void forward_by_node(const uint64_t *ids, const uint32_t *nodes, size_t n, int type, uint32_t client) {
  if (!C.on || !nodes) return;
  uint8_t sent[4096 / 8] = {0};   /* node indexes already handled */
  uint64_t *batch = NULL;
  for (size_t i = 0; i < n; i++) {
    uint32_t t = nodes[i];
    if (!t || t > 4095 || t == C.index || (sent[t / 8] & (1u << (t % 8)))) continue;   /* > 4095: no such node */
    sent[t / 8] |= (uint8_t)(1u << (t % 8));
    node_client *l = link_open(t);
    if (!l) continue;   /* the node is gone, and its store with it */
    if (!batch && !(batch = malloc(n * sizeof(uint64_t)))) return;
    size_t k = 0;   /* every id for this node in one frame */
    for (size_t j = i; j < n; j++)
      if (nodes[j] == t) batch[k++] = ids[j];
    if (type == RD__MSG_TYPE__MSG_LINK_HANDOVER) {
      handed_add(client, t);
      Rd__ObjHandover m = RD__OBJ_HANDOVER__INIT;
      m.owner = client;
      m.n_object_ids = k;
      m.object_ids = batch;
      link_send(l, RD__MSG_TYPE__MSG_LINK_HANDOVER, &m.base);
    } else {
      Rd__ObjIds m = RD__OBJ_IDS__INIT;
      m.n_object_ids = k;
      m.object_ids = batch;
      m.client = client;
      link_send(l, RD__MSG_TYPE__MSG_LINK_DELETE, &m.base);
    }
  }
  free(batch);
}

void rd__cluster_forward_deletes(const uint64_t *ids, const uint32_t *nodes, size_t n, uint32_t client) {
  forward_by_node(ids, nodes, n, RD__MSG_TYPE__MSG_LINK_DELETE, client);
}

void rd__cluster_forward_handover(const uint64_t *ids, const uint32_t *nodes, size_t n, uint32_t owner) {
  forward_by_node(ids, nodes, n, RD__MSG_TYPE__MSG_LINK_HANDOVER, owner);
}

/* ------------------------------------------------------------- code */

/* The job's code stored in the GCS (once per executable), then an entry in
 * the GCS job table (once per run: from its first driver here until its
 * last one leaves). */
typedef struct code_put {
  uv_work_t work;
  node_job *job;
  char exe[PATH_MAX];
  int pid;
  int status;
  int stored;               /* the code is in the GCS: only the job entry to make */
  char hash[65];
  uint32_t job_id;
  char err[200];
  uint64_t retry_since;
  uint32_t submission;      /* its driver's submitted job here (0: none) */
} code_put;

/* A driver of job `sub` submitted here runs in GCS job `gcs`, which it
 * `started` (its first driver) or joined: written to the job's directory
 * (jobs/SUB/gcs_job), which the jobs API reads, so that `ray list jobs`
 * shows the submission with its job id and not that job a second time as a
 * DRIVER row.  Nothing when the job's directory is not there. */
static void note_submission(uint32_t sub, uint32_t gcs, int started) {
  char dir[700], path[720], text[64];
  snprintf(dir, sizeof(dir), "%s/jobs/%u", N.opts.session_dir, sub);
  struct stat st;
  if (!sub || !gcs || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return;
  snprintf(path, sizeof(path), "%s/gcs_job", dir);
  int n = snprintf(text, sizeof(text), "%u %s\n", gcs, started ? "started" : "joined");
  if (rd__write_file(path, text, (size_t)n) != 0)
    rd__log(RD_LOG_WARN, "cannot write %s: %s", path, strerror(errno));
}

static void code_put_work(uv_work_t *w) {
  code_put *p = w->data;
  if (!p->stored) {
    p->status = rd_gcs_code_put(C.gcs, p->exe, p->hash, p->err, sizeof(p->err));
    if (p->status) return;
    p->stored = 1;
  }
  p->status = rd_gcs_job_add(C.gcs, p->hash, p->pid, C.index, &p->job_id);
  if (p->status == RD_ENOENT) {   /* stored for an earlier run, collected since: store it again */
    rd__log(RD_LOG_INFO, "the GCS dropped %.200s (%.16s) since its last run: uploading it again", p->exe, p->hash);
    char again[65];
    p->status = rd_gcs_code_put(C.gcs, p->exe, again, p->err, sizeof(p->err));
    if (!p->status && strcmp(again, p->hash)) {   /* the file changed under the same job */
      snprintf(p->err, sizeof(p->err), "%.100s changed since its first run (now %.16s, was %.16s)", p->exe, again,
               p->hash);
      p->status = RD_EINVAL;
    }
    if (!p->status) p->status = rd_gcs_job_add(C.gcs, p->hash, p->pid, C.index, &p->job_id);
  }
}

static void code_put_done(uv_work_t *w, int status) {
  code_put *p = w->data;
  if (status == 0 && rd__cluster_gcs_retry(w, code_put_work, code_put_done, p->status, &p->retry_since)) return;
  if (status != 0 && p->status == 0) p->status = RD_ECANCELED;
  node_job *j = p->job;
  j->gcs_job_adding = 0;
  int njoined = j->njoined_subs;
  j->njoined_subs = 0;   /* noted below, or never (no entry) */
  if (p->stored) {
    snprintf(j->code_hash, sizeof(j->code_hash), "%s", p->hash);
    j->code_state = 2;
    if (p->status == 0) {
      j->gcs_job_id = p->job_id;
      rd__dashboard_job_known(j->id, p->job_id);   /* what its drivers reported meanwhile */
      note_submission(p->submission, p->job_id, 1);
      /* drivers of other submissions that said hello while the entry was
       * on its way joined it, gone since or not */
      for (int i = 0; i < njoined; i++)
        if (j->joined_subs[i] != p->submission) note_submission(j->joined_subs[i], p->job_id, 0);
      rd__log(RD_LOG_INFO, "job %u: executable %s stored in the GCS as %.16s", p->job_id, p->exe, p->hash);
      if (j->drivers == 0) rd__cluster_job_end(j);   /* its driver left meanwhile */
    } else {
      rd__log(RD_LOG_WARN, "job of %s: no entry in the GCS job table: %s", p->exe, rd_strerror(p->status));
    }
  } else {
    j->code_state = -1;
    snprintf(j->code_err, sizeof(j->code_err), "%s", p->err[0] ? p->err : rd_strerror(p->status));
    rd__log(RD_LOG_ERROR, "cannot store the driver's executable in the GCS: %s", j->code_err);
  }
  rreqs_flush();
  await_flush();
  rec_wait_flush();
  free(p);
  rd__node_flush_all();
}

void rd__cluster_on_driver(node_client *c, const char *exe) {
  node_job *j = c->job;
  if (!C.on || !exe || !*exe || !j) return;
  if (j->code_state == 1 || (j->code_state == 2 && (j->gcs_job_id || j->gcs_job_adding))) {
    if (j->gcs_job_id && !j->gcs_job_adding) note_submission(c->submission, j->gcs_job_id, 0);
    else if (c->submission && j->njoined_subs < (int)(sizeof(j->joined_subs) / sizeof(j->joined_subs[0])))
      j->joined_subs[j->njoined_subs++] = c->submission;   /* the entry is on its way: noted at its end */
    return;   /* stored and running (or on its way) for an earlier driver */
  }
  code_put *p = calloc(1, sizeof(*p));
  if (!p) return;
  snprintf(p->exe, sizeof(p->exe), "%s", exe);
  p->pid = c->pid;
  p->submission = c->submission;
  p->job = j;
  p->work.data = p;
  if (j->code_state == 2) {   /* a new run of code stored before */
    p->stored = 1;
    snprintf(p->hash, sizeof(p->hash), "%s", j->code_hash);
  } else {
    j->code_state = 1;
  }
  j->gcs_job_adding = 1;
  uv_queue_work(N.loop, &p->work, code_put_work, code_put_done);
}

typedef struct job_end_op {
  uv_work_t work;
  uint32_t job_id;
  int status;
  uint64_t retry_since;
} job_end_op;

static void job_end_work(uv_work_t *w) {
  job_end_op *op = w->data;
  op->status = rd_gcs_job_finish(C.gcs, op->job_id, "its drivers exited");
}

static void job_end_done(uv_work_t *w, int status) {
  job_end_op *op = w->data;
  if (status == 0 && rd__cluster_gcs_retry(w, job_end_work, job_end_done, op->status, &op->retry_since)) return;
  if (op->status) rd__log(RD_LOG_WARN, "job %u: cannot mark it ended in the GCS: %s", op->job_id, rd_strerror(op->status));
  free(op);
}

void rd__cluster_job_end(node_job *j) {
  if (!C.on || !j->gcs_job_id) return;
  job_end_op *op = calloc(1, sizeof(*op));
  if (!op) return;
  op->job_id = j->gcs_job_id;
  j->gcs_job_id = 0;
  op->work.data = op;
  uv_queue_work(N.loop, &op->work, job_end_work, job_end_done);
}

/* ---------------------------------------------------------- cluster events */

#define EV_FIELDS 6
typedef struct event_op {
  uv_work_t work;
  int status;
  uint64_t retry_since;
  uint64_t time_ms;
  int pid;
  char source[16], severity[8];
  char msg[RD_GCS_EVENT_MSG_MAX];
  char key[EV_FIELDS][32];
  char value[EV_FIELDS][RD_GCS_EVENT_VALUE_MAX];
  size_t nfields;
} event_op;

static void event_work(uv_work_t *w) {
  event_op *op = w->data;
  rd_gcs_field f[EV_FIELDS];
  for (size_t i = 0; i < op->nfields; i++) f[i] = (rd_gcs_field){op->key[i], op->value[i]};
  rd_gcs_cluster_event e = {.time_ms = op->time_ms, .source = op->source, .severity = op->severity,
                            .message = op->msg, .node_index = C.index, .pid = op->pid, .fields = f,
                            .nfields = op->nfields};
  op->status = rd_gcs_event_add(C.gcs, &e, NULL);
}

static void event_done(uv_work_t *w, int status) {
  event_op *op = w->data;
  if (status == 0 && rd__cluster_gcs_retry(w, event_work, event_done, op->status, &op->retry_since)) return;
  if (op->status) rd__log(RD_LOG_WARN, "cannot record a cluster event in the GCS (%s): %s", rd_strerror(op->status), op->msg);
  free(op);
}

static void event_send(const char *source, const char *severity, int pid, const char *const *kv, const char *msg) {
  event_op *op = calloc(1, sizeof(*op));
  if (!op) return;
  snprintf(op->source, sizeof(op->source), "%s", source);
  op->time_ms = rd__wall_ms();
  op->pid = pid;
  snprintf(op->severity, sizeof(op->severity), "%s", severity);
  snprintf(op->msg, sizeof(op->msg), "%s", msg);
  for (size_t i = 0; kv && kv[2 * i] && op->nfields < EV_FIELDS; i++, op->nfields++) {
    snprintf(op->key[i], sizeof(op->key[i]), "%s", kv[2 * i]);
    snprintf(op->value[i], sizeof(op->value[i]), "%s", kv[2 * i + 1] ? kv[2 * i + 1] : "");
  }
  op->work.data = op;
  uv_queue_work(N.loop, &op->work, event_work, event_done);
}

void rd__cluster_event(const char *source, const char *severity, int pid, const char *const *kv, const char *fmt,
                       ...) {
  if (!C.on || C.stopping) return;
  uint64_t now = rd__now_ns();
  if (now - C.ev_window_ns >= EVENTS_WINDOW_NS) {   /* a new minute: say first what the last one dropped */
    if (C.ev_dropped) {
      char m[160];
      snprintf(m, sizeof(m), "%llu more events of this node were not recorded (at most %d a minute are).",
               (unsigned long long)C.ev_dropped, EVENTS_PER_WINDOW);
      event_send("RAYLET", "WARNING", 0, NULL, m);
    }
    C.ev_window_ns = now;
    C.ev_sent = C.ev_dropped = 0;
  }
  if (C.ev_sent >= EVENTS_PER_WINDOW) {
    C.ev_dropped++;
    return;
  }
  C.ev_sent++;
  char msg[RD_GCS_EVENT_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  event_send(source, severity, pid, kv, msg);
}

/* ------------------------------------------------------------- heartbeats */

static void hb_round(void) {
  uint64_t ver = 0;
  rd_gcs_load l = {.avail = &C.hb_avail, .pending = C.hb_pending, .store_used = C.hb_store_used,
                   .code = C.hb_code, .ncode = C.hb_ncode, .demand = C.hb_demand, .ndemand = C.hb_ndemand,
                   .idle_ms = C.hb_idle_ms};
  C.hb_status = rd_gcs_heartbeat_load(C.gcs, C.index, &l, &ver, C.hb_drain, sizeof(C.hb_drain));
  C.hb_nodes = NULL;
  C.hb_n = 0;
  C.hb_view_ns = rd__now_ns();
  if (C.hb_status == 0)
    (void)rd_gcs_get_view(C.gcs, &C.hb_nodes, &C.hb_n, C.hb_types, &C.hb_ntypes, &ver);
}

static void node_shutdown_now(void) { raise(SIGTERM); }

static void *hb_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&C.hb_mu);
  for (;;) {
    while (!C.hb_go && !C.hb_quit) pthread_cond_wait(&C.hb_cv, &C.hb_mu);
    if (C.hb_quit) break;
    C.hb_go = 0;
    pthread_mutex_unlock(&C.hb_mu);
    hb_round();
    uv_async_send(&C.hb_async);
    pthread_mutex_lock(&C.hb_mu);
  }
  pthread_mutex_unlock(&C.hb_mu);
  return NULL;
}

static void sd_write(void);

static void hb_done(uv_async_t *a) {
  (void)a;
  if (!C.hb_busy) return;
  C.hb_busy = 0;
  if (C.stopping) return;
  if (C.hb_status == RD_ENODE_DIED) {
    rd__log(RD_LOG_ERROR, "the GCS declared this node dead (missed heartbeats): shutting down");
    node_shutdown_now();
    return;
  }
  if (C.hb_status != 0) {
    uint64_t now = rd__now_ns();
    if (!C.hb_failing_since) C.hb_failing_since = now;
    rd__log(RD_LOG_WARN, "heartbeat to the GCS failed: %s", rd_strerror(C.hb_status));
    if (now - C.hb_failing_since > C.gcs_timeout_ns) {
      /* a node that cannot reach its GCS is of no use to the cluster */
      rd__log(RD_LOG_ERROR, "the GCS at %s has been unreachable for %llu s: shutting down", C.gcs_addr,
              (unsigned long long)(C.gcs_timeout_ns / 1000000000ull));
      node_shutdown_now();
    }
    return;
  }
  C.hb_failing_since = 0;
  if (!C.hb_nodes) return;
  /* nodes that died since the last view: end everything bridged to them */
  int dead = 0;
  for (size_t i = 0; i < C.hb_n; i++) {
    const rd_gcs_node *n = &C.hb_nodes[i];
    const rd_gcs_node *old = view_find(n->index);
    if (n->state != RD_GCS_NODE_ALIVE && old && old->state == RD_GCS_NODE_ALIVE) {
      rd__log(RD_LOG_WARN, "node %u (%s) is dead: %s", n->index, n->ip, n->death_reason);
      pulls_abandon(n->index);
      dead++;
      /* owners rebuild what they keep lineage for at once (before the
       * links go: dropping a client may cut this walk short) */
      Rd__NodeDead nd = RD__NODE_DEAD__INIT;
      nd.node_index = n->index;
      for (node_client *c = N.clients; c; c = c->next)
        if ((c->role == ROLE_DRIVER || c->role == ROLE_WORKER) && !c->dead)
          rd__node_send(c, RD__MSG_TYPE__MSG_NODE_DEAD, &nd.base, -1);
      for (node_client *c = N.clients; c; c = c->next) {
        cl_link_state *ls = c->link;
        if (c->role == ROLE_LINK && !c->dead && ls && ls->peer == n->index) rd__node_client_drop(c, "peer node died");
      }
    }
  }
  free(C.view);
  C.view = C.hb_nodes;
  C.nview = C.hb_n;
  C.hb_nodes = NULL;
  claims_apply(C.hb_view_ns);
  memcpy(C.types, C.hb_types, C.hb_ntypes * sizeof(*C.types));
  C.ntypes = C.hb_ntypes;
  drain_maybe();
  view_changed();
  sd_write();
  rd__pg_view_changed();
  rd__job_hold_view_changed();   /* a node joined that a waiting job's mirror can run on */
  rd__pg_kick();   /* nodes that joined or freed room since the last view */
  fails_expire();
  if (dead) {   /* gets that waited on pulls from them are answered */
    pulls_start();
    rd__node_retry_parked();
  }
  rd__node_flush_all();
}

/* The head keeps <session>/prom_metrics_service_discovery.json listing
 * every live node's metrics endpoint, in Prometheus's file_sd format (as
 * Ray's head does), so one file_sd_configs entry scrapes the whole cluster
 * as nodes come and go.  Written (tmp + rename) only when it changes. */
#define SD_FILE "prom_metrics_service_discovery.json"

static void sd_write(void) {
  if (!N.opts.is_head) return;
  rd__mbuf b = {0};
  rd__mbuf_printf(&b, "[");
  int k = 0;
  for (size_t i = 0; i < C.nview; i++) {
    const rd_gcs_node *n = &C.view[i];
    if (n->state != RD_GCS_NODE_ALIVE || n->metrics_port <= 0) continue;
    rd__mbuf_printf(&b, "%s\n  {\"targets\": [\"%s:%d\"], \"labels\": {\"raydist_node\": \"%u\", \"raydist_head\": \"%s\"}}",
                    k++ ? "," : "", n->ip, n->metrics_port, n->index, n->is_head ? "true" : "false");
  }
  rd__mbuf_printf(&b, "\n]\n");
  if (b.oom || (C.sd_last && !strcmp(C.sd_last, b.p))) {
    free(b.p);
    return;
  }
  char path[600], tmp[610];
  snprintf(path, sizeof(path), "%s/" SD_FILE, N.opts.session_dir);
  snprintf(tmp, sizeof(tmp), "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  int ok = f && fputs(b.p, f) >= 0;
  if (f && fclose(f) != 0) ok = 0;
  if (!ok || rename(tmp, path) != 0) {
    rd__log(RD_LOG_WARN, "cannot write %s: %s", path, strerror(errno));
    unlink(tmp);
    free(b.p);
    return;
  }
  rd__log(RD_LOG_INFO, "%s: %d node%s", path, k, k == 1 ? "" : "s");
  free(C.sd_last);
  C.sd_last = b.p;
}

/* hash into out[0..n) unless there already; the new n. */
static size_t code_ref_add(char (*out)[65], size_t n, size_t max, const char *hash) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(out[i], hash)) return n;
  if (n == max) {
    static int warned;
    if (!warned++) rd__log(RD_LOG_WARN, "over %zu executables in use here: the GCS may drop the code of some", max);
    return n;
  }
  snprintf(out[n], 65, "%s", hash);
  return n + 1;
}

/* The code the GCS must keep for this node (sent with each heartbeat): that
 * of jobs with drivers here (the job table holds it too, once the job's
 * entry is made), and of live actors recorded or hosted here, since a
 * detached actor outlives its job and a restart on a node that never ran
 * it fetches its code.  Idle workers of an ended job do not hold it: a new
 * run stores it again. */
static size_t code_in_use(char (*out)[65], size_t max) {
  size_t n = 0;
  for (node_job *j = N.jobs; j; j = j->next)
    if (!j->base && j->code_state == 2 && j->drivers) n = code_ref_add(out, n, max, j->code_hash);
  for (node_actor *a = N.actors; a; a = a->next) {
    const node_job *b = rd__job_base(a->job);
    if (a->state != A_DEAD && b && b->code_state == 2) n = code_ref_add(out, n, max, b->code_hash);
  }
  return n;
}

/* ------------------------------------------------------------- code copies
 *
 * The node's copies of fetched code (<session>/code/: the programs of jobs
 * driven from other nodes, the working-directory tars of submitted jobs) go
 * once nothing here has used them for C.code_ttl_ns
 * (RAYDIST_CODE_CACHE_TTL_S, 600 s; 0 keeps them).  A file's mtime is its
 * last use: set when it is fetched, when a fetch finds it there, and at each
 * sweep while a job that runs it is busy.  A program dropped so leaves its
 * job here without code (code_state 0): its idle workers stop as usual, and
 * the next request for that code fetches it again for a new job. */

/* A job (a base) that runs or will run workers here: drivers, a worker not
 * idle, a request queued, a live actor. */
static int job_busy(const node_job *b) {
  if (b->drivers) return 1;
  for (const node_job *j = N.jobs; j; j = j->next)
    if (rd__job_base(j) == b && (j->nstarting || j->nworkers > j->nidle)) return 1;
  for (rd_sched_item *it = N.queue.head; it; it = it->next)
    if (rd__job_base(((lease_req *)it->data)->job) == b) return 1;
  for (node_bundle *x = N.bundles; x; x = x->next)
    for (rd_sched_item *it = x->queue.head; it; it = it->next)
      if (rd__job_base(((lease_req *)it->data)->job) == b) return 1;
  for (const node_actor *a = N.actors; a; a = a->next)
    if (a->state != A_DEAD && rd__job_base(a->job) == b) return 1;
  return 0;
}

static void code_sweep(uint64_t now) {
  uint64_t period = C.code_ttl_ns / 4;
  if (period > 30000000000ull) period = 30000000000ull;
  if (!C.code_ttl_ns || C.code_fetches || now - C.code_swept_ns < period) return;
  C.code_swept_ns = now;
  char dir[PATH_MAX], path[PATH_MAX + 300];
  snprintf(dir, sizeof(dir), "%s/code", N.opts.session_dir);
  DIR *d = opendir(dir);
  if (!d) return;
  struct timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (!rd_sha256_is_hex(e->d_name)) continue;   /* downloads in progress have a suffix */
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    int busy = 0;
    for (node_job *j = N.jobs; j && !busy; j = j->next)
      busy = !j->base && j->code_state == 2 && !strcmp(j->exe, path) && job_busy(j);
    if (busy) {
      (void)utimensat(AT_FDCWD, path, NULL, 0);
      continue;
    }
    struct stat st;
    if (stat(path, &st) != 0) continue;
    double idle_s = (double)(wall.tv_sec - st.st_mtim.tv_sec) + (double)(wall.tv_nsec - st.st_mtim.tv_nsec) / 1e9;
    if (idle_s * 1e9 < (double)C.code_ttl_ns) continue;
    if (unlink(path) != 0) {
      rd__log(RD_LOG_WARN, "cannot drop the unused copy of code %s: %s", path, strerror(errno));
      continue;
    }
    for (node_job *j = N.jobs; j; j = j->next)
      if (!j->base && !strcmp(j->exe, path)) j->code_state = 0;
    rd__log(RD_LOG_INFO, "dropped this node's copy of code %.16s: unused for %.0f s", e->d_name, idle_s);
  }
  closedir(d);
}

static void on_hb_timer(uv_timer_t *t) {
  (void)t;
  if (C.hb_busy || C.stopping) return;
  C.hb_busy = 1;
  /* what a request placed from another node's view could have: free minus
   * what the requests queued here ask for (a CPU given back by a lease and
   * waiting for a worker to start is not free to anyone else), so that views
   * do not send requests here only to be refused (grant_or_reject) */
  local_unclaimed(&C.hb_avail);
  C.hb_pending = (int64_t)N.queue.len;
  C.hb_store_used = store_held();
  C.hb_ncode = code_in_use(C.hb_code, RD_GCS_CODE_REFS_MAX);
  uint64_t now = rd__now_ns();
  C.hb_ndemand = demand_fill(C.hb_demand, now);
  if (!node_idle(C.hb_store_used)) C.idle_since = 0;
  else if (!C.idle_since) C.idle_since = now;
  C.hb_idle_ms = C.idle_since ? (now - C.idle_since) / 1000000 + 1 : 0;
  code_sweep(now);
  pthread_mutex_lock(&C.hb_mu);
  C.hb_go = 1;
  pthread_cond_signal(&C.hb_cv);
  pthread_mutex_unlock(&C.hb_mu);
}

/* Ends the heartbeat thread, after at most one GCS call's deadline. */
static void hb_thread_stop(void) {
  if (!C.hb_thread_on) return;
  pthread_mutex_lock(&C.hb_mu);
  C.hb_quit = 1;
  pthread_cond_signal(&C.hb_cv);
  pthread_mutex_unlock(&C.hb_mu);
  pthread_join(C.hb_thread, NULL);
  C.hb_thread_on = 0;
  free(C.hb_nodes);   /* a round the loop never took */
  C.hb_nodes = NULL;
}

/* ------------------------------------------------------------- lifecycle */

static int read_token(const char *path, char *out, size_t len, char *err, size_t errlen) {
  if (rd__read_line(path, out, len) != 0) {
    snprintf(err, errlen, "cannot read the token file %s: %s", path, strerror(errno));
    return RD_EAUTH;
  }
  if (strlen(out) < 16) {
    snprintf(err, errlen, "the token in %s is missing or too short", path);
    return RD_EAUTH;
  }
  return 0;
}

static int listen_tcp(const char *ip, int *port_out) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) return -1;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  socklen_t sl = sizeof(a);
  if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 128) != 0 ||
      getsockname(fd, (struct sockaddr *)&a, &sl) != 0) {
    close(fd);
    return -1;
  }
  *port_out = ntohs(a.sin_port);
  return fd;
}

int rd__cluster_start(const rd_node_opts *o, char *err, size_t errlen) {
  if (!o->gcs_address || !*o->gcs_address) return 0;
  memset(&C, 0, sizeof(C));
  C.link_fd = -1;
  pthread_mutex_init(&C.mu, NULL);
  pthread_cond_init(&C.cv, NULL);
  snprintf(C.ip, sizeof(C.ip), "%s", o->node_ip && *o->node_ip ? o->node_ip : "127.0.0.1");
  snprintf(C.gcs_addr, sizeof(C.gcs_addr), "%s", o->gcs_address);
  const char *gt = getenv("RAYDIST_GCS_TIMEOUT_S");
  C.gcs_timeout_ns = (uint64_t)(gt && atoi(gt) > 0 ? atoi(gt) : 60) * 1000000000ull;
  const char *av = getenv("RAYDIST_NODE_AVOID_MS");
  C.avoid_ns = (uint64_t)(av && atol(av) > 0 ? atol(av) : 60000) * 1000000ull;
  const char *ct = getenv("RAYDIST_CODE_CACHE_TTL_S");
  double ttl = ct && *ct ? strtod(ct, NULL) : 600;
  C.code_ttl_ns = ttl > 0 && ttl < 1e8 ? (uint64_t)(ttl * 1e9) : 0;
  int r = read_token(o->token_file, C.token, sizeof(C.token), err, errlen);
  if (r != 0) return r;
  setenv("GRPC_ENABLE_FORK_SUPPORT", "false", 1);   /* workers are fork+exec'd by libuv */
  r = rd_gcs_connect(C.gcs_addr, C.token, 10000, &C.gcs, err, errlen);
  if (r != 0) return r;
  uv_async_init(N.loop, &C.async, on_async);
  C.link_fd = listen_tcp(C.ip, &C.link_port);
  if (C.link_fd < 0) {
    snprintf(err, errlen, "cannot listen for node links on %s: %s", C.ip, strerror(errno));
    return RD_ESYS;
  }
  uv_poll_init(N.loop, &C.link_poll, C.link_fd);
  uv_poll_start(&C.link_poll, UV_READABLE, on_link_accept);
  static const rd_xfer_source_ops ops = {xfer_pin, xfer_unpin};
  char bind[96];
  snprintf(bind, sizeof(bind), "%s:0", C.ip);
  r = rd_xfer_server_start(bind, C.token, &ops, NULL, &C.xfer, &C.xfer_port, err, errlen);
  if (r != 0) return r;
  r = rd_xfer_client_create(C.token, &C.xc);
  if (r != 0) {
    snprintf(err, errlen, "cannot create the object-transfer client: %s", rd_strerror(r));
    return r;
  }
  rd_gcs_node self;
  memset(&self, 0, sizeof(self));
  self.is_head = o->is_head;
  snprintf(self.ip, sizeof(self.ip), "%s", C.ip);
  gethostname(self.hostname, sizeof(self.hostname) - 1);
  self.link_port = C.link_port;
  self.xfer_port = C.xfer_port;
  self.metrics_port = rd__metrics_port();
  snprintf(self.labels, sizeof(self.labels), "%s", N.labels);
  snprintf(self.session_dir, sizeof(self.session_dir), "%s", o->session_dir);
  self.total = N.ledger.total;
  self.avail = rd__node_avail();
  self.store_capacity = rd_store_capacity(N.store);
  r = rd_gcs_register_node(C.gcs, &self, &C.index, err, errlen);
  if (r != 0) return r;
  size_t n = 0;
  uint64_t ver = 0;
  if (rd_gcs_get_nodes(C.gcs, &C.view, &n, &ver) == 0) C.nview = n;
  char code_dir[600];
  snprintf(code_dir, sizeof(code_dir), "%s/code", o->session_dir);
  mkdir(code_dir, 0700);
  /* operators and tests find this node's ports next to what `raydist start` wrote */
  snprintf(code_dir, sizeof(code_dir), "%s/cluster", o->session_dir);
  FILE *cf = fopen(code_dir, "a");
  if (cf) {
    fprintf(cf, "node_index=%u\nlink_port=%d\nxfer_port=%d\n", C.index, C.link_port, C.xfer_port);
    fclose(cf);
  }
  pthread_mutex_init(&C.hb_mu, NULL);
  pthread_cond_init(&C.hb_cv, NULL);
  uv_async_init(N.loop, &C.hb_async, hb_done);
  if (pthread_create(&C.hb_thread, NULL, hb_main, NULL) != 0) {
    snprintf(err, errlen, "cannot start the heartbeat thread");
    return RD_ESYS;
  }
  C.hb_thread_on = 1;
  uv_timer_init(N.loop, &C.hb_timer);
  uv_timer_init(N.loop, &C.respill_timer);
  uv_timer_start(&C.hb_timer, on_hb_timer, RD_CL_HEARTBEAT_MS, RD_CL_HEARTBEAT_MS);
  C.on = 1;
  rd__log(RD_LOG_INFO, "joined the cluster at %s as node %u (%s, link port %d, transfer port %d)", C.gcs_addr,
          C.index, C.ip, C.link_port, C.xfer_port);
  return 0;
}

void rd__cluster_stop(void) {
  if (!C.gcs) return;
  pthread_mutex_lock(&C.mu);
  C.stopping = 1;
  pthread_mutex_unlock(&C.mu);
  rd__job_link_stop();
  on_async(&C.async);   /* answer hops already queued */
  rd__cluster_retry_hops();   /* and parked ones, doing their I/O inline */
  retries_cancel();
  if (C.on) {
    uv_timer_stop(&C.hb_timer);
    uv_timer_stop(&C.respill_timer);
    hb_thread_stop();
    (void)rd_gcs_unregister_node(C.gcs, C.index, C.drained[0] ? C.drained : "node stopped");
  }
  if (C.xfer) rd_xfer_server_stop(C.xfer);
  C.xfer = NULL;
  if (C.link_fd >= 0) {
    uv_poll_stop(&C.link_poll);
    close(C.link_fd);
    C.link_fd = -1;
  }
  C.on = 0;
}

/* After the loop has closed every handle: free what is left. */
void rd__cluster_free(void) {
  while (C.conns) {
    cl_conn *q = C.conns;
    C.conns = q->next;
    conn_free(q);
  }
  while (C.rec_wait) {
    cl_conn *q = C.rec_wait;
    C.rec_wait = q->next;
    conn_free(q);
  }
  free(C.await_actors);
  C.await_actors = NULL;
  while (C.name_waits) {
    gcs_actor_op *op = C.name_waits;
    C.name_waits = op->next;
    free(op);
  }
  while (C.rreqs) {
    cl_rreq *q = C.rreqs;
    C.rreqs = q->next;
    free(q);
  }
  claims_free();
  ended_free();
  while (C.fails) {
    cl_fail *f = C.fails;
    C.fails = f->next;
    free(f);
  }
  while (C.pull_wait) {   /* never started: not on the pool, not done by pull_done */
    cl_pull *p = C.pull_wait;
    C.pull_wait = p->wait_next;
    if (C.pulls.slots) rd__u64map_del(&C.pulls, p->oid);
    free(p);
  }
  C.pull_wait_tail = &C.pull_wait;
  rd__u64map_free(&C.pulls);   /* the loop has closed: no pull runs */
  for (uint64_t i = 0; C.handed.slots && i <= C.handed.mask; i++) {
    cl_handed *h = C.handed.slots[i].val;
    if (h) {
      free(h->nodes);
      free(h);
    }
  }
  rd__u64map_free(&C.handed);
  free(C.view);
  free(C.sd_last);
  C.sd_last = NULL;
  if (C.xc) rd_xfer_client_destroy(C.xc);
  if (C.gcs) rd_gcs_close(C.gcs);
  C.xc = NULL;
  C.gcs = NULL;
}

int rd__cluster_on(void) { return C.on; }

void rd__cluster_held(rd__held *h) {
  for (const cl_rreq *q = C.rreqs; q; q = q->next) {
    rd__held_add(h, RD_HELD_JOB, q->job);
    rd__held_add(h, RD_HELD_ENV, q->env);
    rd__held_add(h, RD_HELD_SEL, q->req.label_selector);
  }
  for (size_t i = 0; i < CL_AVOID_MAX; i++) {
    rd__held_add(h, RD_HELD_JOB, C.avoid[i].job);
    rd__held_add(h, RD_HELD_ENV, C.avoid[i].env);
  }
}

int rd__cluster_fetching(void) { return C.on && C.code_fetches > 0; }
uint64_t rd__cluster_respilled(void) { return C.on ? C.respilled : 0; }
uint64_t rd__cluster_pull_retries(void) { return C.on ? C.pull_retries : 0; }

size_t rd__cluster_channels(void) {
  size_t n = 0;
  for (cl_chan *ch = C.on ? C.chans : NULL; ch; ch = ch->next) n += !ch->closed;
  return n;
}
uint64_t rd__cluster_refused_busy(void) { return C.on ? C.refused_busy : 0; }

int rd__cluster_avoided(void) {
  if (!C.on) return 0;
  uint64_t now = rd__now_ns();
  int n = 0;
  for (int i = 0; i < CL_AVOID_MAX; i++) n += C.avoid[i].job && C.avoid[i].until > now;
  return n;
}

const rd_gcs_node *rd__cluster_view(size_t *n) {
  *n = C.on ? C.nview : 0;
  return C.on ? C.view : NULL;
}
rd_gcs *rd__cluster_gcs(void) { return C.on ? C.gcs : NULL; }
node_client *rd__cluster_link(uint32_t peer) { return C.on && peer != C.index ? link_open(peer) : NULL; }
uint32_t rd__cluster_link_peer(const node_client *c) { return c->link ? ((cl_link_state *)c->link)->peer : 0; }

int rd__cluster_node_usable(uint32_t index) {
  if (!C.on || index == C.index) return 1;
  const rd_gcs_node *n = view_find(index);
  return n && node_usable(n);
}

int rd__cluster_node_alive(uint32_t index) {
  if (!C.on || index == C.index) return 1;
  const rd_gcs_node *n = view_find(index);
  return n && n->state == RD_GCS_NODE_ALIVE;
}

/* The other live nodes, for placement-group placement (pg.c puts itself
 * first, from its own ledger). */
size_t rd__cluster_pg_potential(rd_pg_node *out, size_t max) {
  size_t n = 0;
  for (size_t t = 0; t < C.ntypes; t++) {
    const rd_gcs_node_type *ty = &C.types[t];
    for (uint32_t k = ty->workers; k < ty->max_workers && n < max && k - ty->workers < 4096; k++, n++) {
      out[n].index = 5000 + (uint32_t)n;
      out[n].total = out[n].avail = ty->res;
      out[n].labels = ty->labels;
    }
  }
  return n;
}

size_t rd__cluster_pg_nodes(rd_pg_node *out, size_t max) {
  size_t n = 0;
  for (size_t i = 0; i < C.nview && n < max; i++) {
    const rd_gcs_node *v = &C.view[i];
    if (v->index == C.index || !node_usable(v)) continue;
    out[n].index = v->index;
    out[n].total = v->total;
    out[n].avail = v->avail;
    out[n].labels = v->labels;
    n++;
  }
  return n;
}
uint32_t rd__cluster_index(void) { return C.on ? C.index : 0; }
const char *rd__cluster_token(void) { return C.on ? C.token : NULL; }
const char *rd__cluster_ip(void) { return C.on ? C.ip : "127.0.0.1"; }

void rd__cluster_send_output(uint32_t node, const Rd__WorkerOutput *m) {
  node_client *l = C.on ? link_open(node) : NULL;
  if (l) link_send(l, RD__MSG_TYPE__MSG_LINK_WORKER_OUTPUT, &m->base);   /* else: gone with its node */
}

int rd__cluster_token_ok(const char *token) {
  if (!C.on) return 1;
  if (!token) return 0;
  size_t a = strlen(token), b = strlen(C.token);
  unsigned char d = (unsigned char)(a != b);
  for (size_t i = 0; i < b; i++) d |= (unsigned char)(token[i < a ? i : 0] ^ C.token[i]);
  return d == 0;
}

int rd__cluster_http_gate(const char *api, const char *local, const char *auth,
                          void (*reply)(void *, int, const char *, size_t), void *arg) {
  char msg[200];
  int on = C.on && rd__cluster_token(), own = !on && local && *local;
  if (!on && !own) {
    int n = snprintf(msg, sizeof(msg), "the %s needs a node of a cluster started by `raydist start` (its token guards it)\n",
                     api);
    reply(arg, 403, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
    return 0;
  }
  const char *t = auth && !strncmp(auth, "Bearer ", 7) ? auth + 7 : NULL;
  if (!t || (own ? strcmp(t, local) != 0 : !rd__cluster_token_ok(t))) {
    static const char no[] = "send the cluster token as \"Authorization: Bearer TOKEN\"\n",
                      no_own[] = "send the node's token (SESSION/token) as \"Authorization: Bearer TOKEN\"\n";
    reply(arg, 401, own ? no_own : no, own ? sizeof(no_own) - 1 : sizeof(no) - 1);
    return 0;
  }
  return 1;
}

int rd__cluster_alive_nodes(void) {
  if (!C.on) return 1;
  int n = 0;
  for (size_t i = 0; i < C.nview; i++) n += C.view[i].state == RD_GCS_NODE_ALIVE;
  return n;
}
