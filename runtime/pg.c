/* runtime/pg.c - placement groups in the node daemon (see pg.h).
 *
 * A group's id carries its record node in the top bits, like an actor's.
 * Records made here are authoritative; records of groups made elsewhere are
 * copies fetched from the GCS, refreshed while something waits on them and
 * forgotten whenever the view loses a node or a bundle's node says the copy
 * is stale.  Bundles themselves (node_bundle) live on N.bundles and are
 * granted from by node.c's dispatch. */
#include "pg.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cluster.h"
#include "common.h"
#include "gcs_client.h"
#include "log.h"
#include "metrics.h"
#include "pg_place.h"
#include "queue.h"
#include "raydist.h"
#include "resources.h"

#define PG_MAX RD_PG_PLACE_MAX_BUNDLES
#define PG_RETRY_NS 200000000ull      /* a reservation that did not fit is tried again after this */
#define PG_KICK_GAP_NS 1000000ull     /* kicks (rd__pg_kick) at most this often */
#define PG_REFRESH_NS 200000000ull    /* a copy something waits on is fetched again after this */
#define PG_KEEP_REMOVED 256           /* removed records kept for status answers */
#define PG_GRACE_NS 2000000000ull     /* an unknown id is looked up again this long */
#define PG_GCS_LATE_MS 1000           /* a record's look is answered after this even if the GCS is late */
#define PG_GCS_REMOVE_MS 10000        /* and a removal after this: a caller that looks next must not find it */

enum { PG_PENDING = 1, PG_CREATED = 2, PG_RESCHEDULING = 3, PG_REMOVED = 4 };
static const char *state_name[] = {"none", "pending", "created", "rescheduling", "removed"};

typedef struct pg_rec {
  uint64_t id;
  int mine;                       /* recorded here; else a copy from the GCS */
  char name[128];
  int strategy, state;
  char reason[300];
  size_t n, cap;                  /* bundles, and room for them in the arrays (rec_new) */
  rd_resources *b;
  const char **sel;               /* each bundle's label selector (interned, rd__node_sel), NULL: any node */
  int alt;                        /* the alternative of the selectors it was last placed by (fallbacks) */
  uint32_t *node;                 /* where each bundle is reserved (0: not now) */
  uint32_t creator;               /* the driver (client id) whose exit removes it; 0: none */
  node_job *job;                  /* made by a task (creator 0): the job whose end removes it */
  uint32_t gcs_job;               /* ... that task's GCS job, when known: its end in the GCS removes it */
  uint32_t creator_job;           /* the GCS job of whoever created it, detached or not (0: not known) */
  /* a reservation in flight (records) */
  uint64_t txn;
  uint32_t *want;                 /* its proposal (and placement's scratch between reservations) */
  uint32_t *asked;                /* other nodes asked to prepare (at most one per bundle) */
  uint64_t *claim;                /* ... their bundles' room claimed in the view (rd__cluster_view_claim) */
  uint8_t *answered;
  size_t nasked;
  int failed;
  uint64_t retry_ns;
  int kickable;                   /* it did not fit the last snapshot: room coming back may let it */
  /* its GCS record: one write in flight at a time, so they land in order */
  int putting, dirty;
  /* a creation that fitted no node of the view it came in: the next view
   * says (P.creating), then it is answered on this request */
  uint32_t wait_client;
  uint64_t wait_req;
  int wait_detached;
  /* copies */
  uint64_t fetched_ns;
  uint64_t fetch_asked_ns;        /* when the fetch that made this copy was sent */
  int fetching;
  struct pg_rec *next;
} pg_rec;

/* Something parked on a group (deadline 0: forever). A group recorded here
 * answers waits, looks and removals only once the GCS holds what they
 * report, so whoever they wake reads the same from any node. */
enum {
  PARK_LEASE,    /* a lease request for one of its bundles */
  PARK_WAIT,     /* rd_pg_wait: answered when reserved or removed */
  PARK_LOOK,     /* rd_pg_info_get/rd_pg_get of a copy: answered by a fetch sent after it */
  PARK_REMOVE,   /* rd_pg_remove: answered when the removal is in the GCS */
};

typedef struct pg_park {
  int kind;
  node_client *c;
  uint64_t req_id;
  uint64_t pg_id;
  char name[128];                 /* queries by name whose copy is being fetched */
  rd_resources res;
  int priority, bundle;
  const node_env *env;      /* a lease's workers' variables (node.c interns them) */
  uint64_t deadline_ns;
  uint64_t since_ns;
  uint64_t asked_ns;        /* when it last had its group fetched (unknown ids) */
  struct pg_park *next;
} pg_park;

/* A removal forwarded to the record node, waiting for its answer. */
typedef struct pg_fwd {
  uint64_t fwd_id;
  node_client *c;
  uint64_t req_id;
  node_client *link;
  struct pg_fwd *next;
} pg_fwd;

static struct {
  pg_rec *recs;
  pg_rec *creating;         /* creations waiting for the next view (pg_never) */
  pg_park *parked;
  pg_fwd *fwds;
  uint64_t next_seq, next_txn, next_fwd;
  int sweeping;             /* a read of the GCS job table is in flight (sweep_maybe) */
  uint64_t swept_ns;
  uv_timer_t kick;          /* rd__pg_kick: waiting groups tried on the next turn */
  int kick_init, kick_armed;
  int kickable;             /* some group may be kickable (cleared by kick_fire) */
  uint64_t kicked_ns;
  uint64_t retry_ns;        /* PG_RETRY_NS, or RAYDIST_PG_RETRY_MS */
} P;

static void pg_changed(pg_rec *p);
static void reserve(pg_rec *p);
static int pg_never(pg_rec *p, char *why, size_t whylen);
static void create_commit(pg_rec *p, node_client *c, uint64_t req_id, int detached);

/* How long a group that did not fit waits before it is tried again without
 * a kick (RAYDIST_PG_RETRY_MS: tests set it long to see kicks alone work). */
static uint64_t retry_gap(void) {
  if (!P.retry_ns) {
    const char *e = getenv("RAYDIST_PG_RETRY_MS");
    long ms = e && *e ? strtol(e, NULL, 10) : 0;
    P.retry_ns = ms > 0 && ms <= 3600000 ? (uint64_t)ms * 1000000ull : PG_RETRY_NS;
  }
  return P.retry_ns;
}

/* A group recorded here that waits for room, with no reservation in flight. */
static int waits_for_room(const pg_rec *p) {
  return p->mine && !p->txn && (p->state == PG_PENDING || p->state == PG_RESCHEDULING);
}

static void gcs_put(pg_rec *p);
static void gcs_fetch(uint64_t id, const char *name);

static uint32_t self_index(void) { return rd__cluster_on() ? rd__cluster_index() : 1; }
static uint32_t record_of(uint64_t pg_id) { return rd__cluster_on() ? rd__rec_id_node(pg_id) : 1; }
/* A node index as clients see it (0 on an embedded cluster). */
static uint32_t shown(uint32_t node) { return rd__cluster_on() ? node : 0; }

/* A zeroed record with room for n bundles, its arrays in the same
 * allocation (free() releases it); NULL when out of memory. */
static pg_rec *rec_new(size_t n) {
  size_t c = n ? n : 1;
  /* largest alignment first: each array's size is a multiple of the next's */
  size_t sz = sizeof(pg_rec) + c * (sizeof(rd_resources) + sizeof(uint64_t) + sizeof(const char *) +
                                    3 * sizeof(uint32_t) + sizeof(uint8_t));
  char *m = calloc(1, sz);
  if (!m) return NULL;
  pg_rec *p = (pg_rec *)m;
  m += sizeof(*p);
  p->b = (rd_resources *)m;
  m += c * sizeof(*p->b);
  p->claim = (uint64_t *)m;
  m += c * sizeof(*p->claim);
  p->sel = (const char **)m;
  m += c * sizeof(*p->sel);
  p->node = (uint32_t *)m;
  p->want = p->node + c;
  p->asked = p->want + c;
  p->answered = (uint8_t *)(p->asked + c);
  p->cap = c;
  return p;
}

static pg_rec *rec_find(uint64_t id) {
  for (pg_rec *p = P.recs; p; p = p->next)
    if (p->id == id) return p;
  return NULL;
}

static pg_rec *rec_by_name(const char *name) {
  for (pg_rec *p = P.recs; p; p = p->next)
    if (p->state != PG_REMOVED && p->name[0] && !strcmp(p->name, name)) return p;
  return NULL;
}

static void rec_free(pg_rec *p) {
  for (pg_rec **pp = &P.recs; *pp; pp = &(*pp)->next)
    if (*pp == p) { *pp = p->next; break; }
  free(p);
}

/* Could a request `res` ever be granted from a bundle holding `b`? */
static int bundle_can_run(const rd_resources *b, const rd_resources *res) {
  rd_res_grant g;
  memset(&g, 0, sizeof(g));
  g.req = *b;
  if (b->gpu > 0 && b->gpu < RD_RES_UNIT) {
    g.ngpus = 1;
    g.gpu_share[0] = b->gpu;
  } else {
    g.ngpus = (int)(b->gpu / RD_RES_UNIT);
    if (g.ngpus > RD_RES_MAX_GPUS) g.ngpus = RD_RES_MAX_GPUS;
    for (int i = 0; i < g.ngpus; i++) {
      g.gpu_ids[i] = i;
      g.gpu_share[i] = RD_RES_UNIT;
    }
  }
  rd_res_ledger l;
  rd_res_ledger_init_grant(&l, &g);
  return rd_res_feasible(&l, res);
}

/* ------------------------------------------------------------ replies */

static void reply(node_client *c, uint64_t req_id, int status, const char *err, const pg_rec *p) {
  Rd__PgReply r = RD__PG_REPLY__INIT;
  uint32_t *nodes = p ? malloc((p->n ? p->n : 1) * sizeof(*nodes)) : NULL;
  if (p && !nodes) {
    status = RD_ENOMEM;
    err = "node out of memory";
    p = NULL;
  }
  r.req_id = req_id;
  r.status = status;
  r.error = (char *)(err ? err : "");
  if (p) {
    r.pg_id = p->id;
    r.state = p->state;
    r.strategy = p->strategy;
    for (size_t i = 0; i < p->n; i++) nodes[i] = shown(p->node[i]);
    r.n_bundle_nodes = p->n;
    r.bundle_nodes = nodes;
  }
  rd__node_send(c, c->role == ROLE_LINK ? RD__MSG_TYPE__MSG_LINK_PG_REMOVED : RD__MSG_TYPE__MSG_PG_REPLY, &r.base,
                -1);
  free(nodes);
}

static void park_free(pg_park **pp) {
  pg_park *k = *pp;
  *pp = k->next;
  free(k);
}

static int park(int kind, node_client *c, uint64_t req_id, uint64_t pg_id, const char *name,
                const rd_resources *res, int priority, int bundle, int64_t timeout_ms) {
  pg_park *k = calloc(1, sizeof(*k));
  if (!k) return RD_ENOMEM;
  k->kind = kind;
  k->c = c;
  k->req_id = req_id;
  k->pg_id = pg_id;
  if (name) snprintf(k->name, sizeof(k->name), "%s", name);
  if (res) k->res = *res;
  k->priority = priority;
  k->bundle = bundle;
  k->deadline_ns = timeout_ms > 0 ? rd__now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
  k->since_ns = k->asked_ns = rd__now_ns();
  k->next = P.parked;
  P.parked = k;
  return 0;
}

/* ------------------------------------------------------------ the GCS table */

typedef struct gcs_op {
  uv_work_t work;
  int put;                  /* else get */
  rd_gcs_pg pg;             /* put: the record; get: the answer (its arrays its own: rd_gcs_pg_clear) */
  uint64_t pg_id;           /* get: by id, or by name */
  char name[128];
  int status;
  char err[200];
  /* a create waits for the name to be ours */
  node_client *c;
  uint32_t client_id;
  uint64_t req_id;
  uint64_t retry_since;
  uint64_t asked_ns;        /* get: when it was sent */
} gcs_op;

/* p as a GCS record into g, whose arrays have room for p's bundles. */
static void to_gcs(const pg_rec *p, rd_gcs_pg *g) {
  rd_gcs_pg_reset(g);
  g->pg_id = p->id;
  snprintf(g->name, sizeof(g->name), "%s", p->name);
  g->strategy = p->strategy;
  g->state = p->state;
  g->record_node = record_of(p->id);
  g->nbundles = p->n;
  for (size_t i = 0; i < p->n; i++) {
    g->bundles[i] = p->b[i];
    g->bundle_nodes[i] = p->node[i];
  }
  snprintf(g->reason, sizeof(g->reason), "%.127s", p->reason);
  g->creator_job = p->creator_job;
}

static void gcs_work(uv_work_t *w) {
  gcs_op *op = w->data;
  rd_gcs *g = rd__cluster_gcs();
  if (!g) {
    op->status = RD_ESTATE;
    return;
  }
  if (op->put) op->status = rd_gcs_pg_put(g, &op->pg);
  else op->status = rd_gcs_pg_get(g, op->pg_id, op->pg_id ? NULL : op->name, &op->pg);
  if (op->status) snprintf(op->err, sizeof(op->err), "%s", rd_gcs_last_error());
}

static node_client *client_alive(uint32_t id) {
  for (node_client *c = N.clients; c; c = c->next)
    if (c->id == id && !c->dead) return c;
  return NULL;
}

static void rec_from_gcs(pg_rec *p, const rd_gcs_pg *g) {
  snprintf(p->name, sizeof(p->name), "%.127s", g->name);
  p->strategy = g->strategy;
  p->state = g->state;
  p->n = g->nbundles > p->cap ? p->cap : g->nbundles;
  for (size_t i = 0; i < p->n; i++) {
    p->b[i] = g->bundles[i];
    p->node[i] = g->bundle_nodes[i];
  }
  snprintf(p->reason, sizeof(p->reason), "%s", g->reason);
}

static void gcs_done(uv_work_t *w, int status) {
  gcs_op *op = w->data;
  if (status == 0 && rd__cluster_gcs_retry(w, gcs_work, gcs_done, op->status, &op->retry_since)) return;
  if (status != 0 && op->status == 0) op->status = RD_ECANCELED;
  if (op->put) {
    pg_rec *w = rec_find(op->pg.pg_id);
    if (w) w->putting = 0;
    if (op->client_id) {   /* a create: the name is ours, or it is taken */
      pg_rec *p = w;
      node_client *c = client_alive(op->client_id);
      if (op->status == 0) {
        if (c) reply(c, op->req_id, 0, NULL, p);
        if (p && p->state == PG_PENDING) reserve(p);
      } else {
        char err[300];
        if (op->status == RD_EEXIST) snprintf(err, sizeof(err), "a placement group named '%.127s' already exists in the cluster", op->pg.name);
        else snprintf(err, sizeof(err), "cannot record the placement group in the GCS: %s", op->err);
        if (c) reply(c, op->req_id, op->status, err, NULL);
        if (p) rec_free(p);
        w = NULL;
      }
    } else if (op->status) {
      rd__log(RD_LOG_WARN, "placement group %016" PRIx64 ": GCS update failed: %s", op->pg.pg_id, op->err);
    }
    if (w && w->dirty) {   /* changed meanwhile: write the latest */
      w->dirty = 0;
      gcs_put(w);
    }
    if (w && !w->putting) pg_changed(w);   /* what waited for the GCS to agree */
  } else {
    /* a fetched copy: update or make it, then serve what waits on it */
    uint64_t id = op->status == 0 ? op->pg.pg_id : op->pg_id;
    pg_rec *p = id ? rec_find(id) : NULL;
    if (p && p->mine) p = NULL;   /* never overwrite a record with a copy */
    else if (op->status == 0) {
      if (p && p->cap < op->pg.nbundles) {   /* not the group it was: made again */
        rec_free(p);
        p = NULL;
      }
      if (!p && (p = rec_new(op->pg.nbundles))) {
        p->id = id;
        p->next = P.recs;
        P.recs = p;
      }
      if (p) {
        rec_from_gcs(p, &op->pg);
        p->fetching = 0;
        p->fetched_ns = rd__now_ns();
        p->fetch_asked_ns = op->asked_ns;
      }
    } else if (p) {
      p->fetching = 0;
      p->fetched_ns = rd__now_ns();
    }
    /* waiters on this id (or name) that the answer settles */
    for (pg_park **pp = &P.parked; *pp;) {
      pg_park *k = *pp;
      int mine_id = op->pg_id ? k->pg_id == op->pg_id : (!k->pg_id && !strcmp(k->name, op->name));
      if (!mine_id) {
        pp = &k->next;
        continue;
      }
      /* an anonymous group's record is written just after its creator is
       * answered: an id not there yet is looked up again for a moment */
      if (op->status == RD_ENOENT && op->pg_id && rd__cluster_node_alive(record_of(op->pg_id)) &&
          rd__now_ns() - k->since_ns < PG_GRACE_NS) {
        pp = &k->next;
        continue;
      }
      if (op->status != 0) {
        char err[300];
        if (op->status == RD_ENOENT)
          snprintf(err, sizeof(err), "no placement group %s%s%s in the cluster", op->pg_id ? "" : "named '",
                   op->pg_id ? "with that id" : op->name, op->pg_id ? "" : "'");
        else
          snprintf(err, sizeof(err), "cannot read the placement group from the GCS: %s", op->err);
        if (k->kind != PARK_LEASE) reply(k->c, k->req_id, op->status, err, NULL);
        else rd__node_reply_grant(k->c, k->req_id, op->status, err);
        park_free(pp);
        continue;
      }
      if (!k->pg_id) k->pg_id = id;   /* a query by name now waits on the id */
      pp = &k->next;
    }
    if (p) {
      pg_changed(p);
      /* looks that came while an older fetch was out need a newer one */
      for (pg_park *k = P.parked; k && !p->mine; k = k->next)
        if (k->kind == PARK_LOOK && k->pg_id == p->id) {
          gcs_fetch(p->id, NULL);
          break;
        }
    }
  }
  rd_gcs_pg_clear(&op->pg);
  free(op);
  rd__node_flush_all();
}

static void gcs_queue(gcs_op *op) {
  op->work.data = op;
  uv_queue_work(N.loop, &op->work, gcs_work, gcs_done);
}

static void gcs_put(pg_rec *p) {
  if (!rd__cluster_on()) return;
  if (p->putting) {
    p->dirty = 1;
    return;
  }
  gcs_op *op = calloc(1, sizeof(*op));
  if (!op) return;
  if (rd_gcs_pg_reserve(&op->pg, p->n) != 0) {
    free(op);
    rd__log(RD_LOG_WARN, "placement group %016" PRIx64 ": no memory to write its GCS record", p->id);
    return;
  }
  op->put = 1;
  to_gcs(p, &op->pg);
  p->putting = 1;
  gcs_queue(op);
}

/* Fetch the record of id (or of name when id is 0) from the GCS. */
static void gcs_fetch(uint64_t id, const char *name) {
  pg_rec *p = id ? rec_find(id) : NULL;
  if (p && p->fetching) return;
  gcs_op *op = calloc(1, sizeof(*op));
  if (!op) return;
  op->asked_ns = rd__now_ns();
  op->pg_id = id;
  if (name) snprintf(op->name, sizeof(op->name), "%s", name);
  if (p) p->fetching = 1;
  gcs_queue(op);
}

/* ------------------------------------------------------------ bundles here */

static node_bundle *bundle_find(uint64_t pg_id, int index) {
  for (node_bundle *b = N.bundles; b; b = b->next)
    if (b->pg_id == pg_id && b->index == index && b->removed == 0) return b;
  return NULL;
}

node_bundle *rd__pg_bundle_here(uint64_t pg_id, int index) {
  node_bundle *b = bundle_find(pg_id, index);
  return b && b->committed ? b : NULL;
}

/* Reserve bundles idx[0..n) of a group on this node's ledger, not usable
 * until committed.  All or none. */
static int prepare_here(uint64_t pg_id, uint32_t record, uint64_t txn, const int32_t *idx, const rd_resources *res,
                        size_t n, char *why, size_t whylen) {
  node_bundle **made = malloc(n * sizeof(*made));
  size_t k = 0;
  int rc = 0;
  if (!made) {
    snprintf(why, whylen, "node out of memory");
    return RD_ENOMEM;
  }
  for (size_t i = 0; i < n && rc == 0; i++) {
    rd_resources r = res[i];
    if (bundle_find(pg_id, idx[i])) {
      snprintf(why, whylen, "bundle %d is already reserved on node %u", idx[i], self_index());
      rc = RD_EEXIST;
      break;
    }
    node_bundle *b = calloc(1, sizeof(*b));
    if (!b) {
      snprintf(why, whylen, "node out of memory");
      rc = RD_ENOMEM;
      break;
    }
    rc = rd_res_acquire(&N.ledger, &r, &b->grant);
    if (rc != 0) {
      char t[200];
      rd_res_format(&r, t, sizeof(t));
      snprintf(why, whylen, "node %u has no room for bundle %d %s now", self_index(), idx[i], t);
      free(b);
      break;
    }
    b->pg_id = pg_id;
    b->index = idx[i];
    b->record = record;
    b->txn = txn;
    rd_res_ledger_init_grant(&b->ledger, &b->grant);
    rd_sched_queue_init(&b->queue);
    b->next = N.bundles;
    N.bundles = b;
    made[k++] = b;
  }
  if (rc != 0)
    for (size_t i = 0; i < k; i++) rd__node_bundle_drop(made[i], NULL);
  free(made);
  return rc;
}

static void commit_here(uint64_t pg_id, uint64_t txn) {
  for (node_bundle *b = N.bundles; b; b = b->next)
    if (b->pg_id == pg_id && b->txn == txn && !b->removed) b->committed = 1;
  rd__node_dispatch();
}

/* Give back this node's bundles of pg_id: all, or only those of txn still
 * uncommitted. */
static void drop_here(uint64_t pg_id, uint64_t txn, const char *why) {
  for (node_bundle *b = N.bundles, *next; b; b = next) {
    next = b->next;
    if (b->pg_id != pg_id || b->removed) continue;
    if (txn && (b->txn != txn || b->committed)) continue;
    rd__node_bundle_drop(b, why);
  }
  rd__node_dispatch();
}

/* ------------------------------------------------------------ reservation */

static void send_commit(uint32_t node, Rd__MsgType t, uint64_t pg_id, uint64_t txn) {
  node_client *l = rd__cluster_link(node);
  if (!l) return;
  Rd__LinkPgCommit m = RD__LINK_PG_COMMIT__INIT;
  m.pg_id = pg_id;
  m.txn = txn;
  rd__node_send(l, t, &m.base, -1);
}

/* Every node asked has answered: commit everywhere, or abort everywhere. */
static void finish(pg_rec *p) {
  uint64_t txn = p->txn;
  if (p->failed) {
    for (size_t i = 0; i < p->nasked; i++) {
      send_commit(p->asked[i], RD__MSG_TYPE__MSG_LINK_PG_ABORT, p->id, txn);
      rd__cluster_claim_cancel(p->claim[i]);
      p->claim[i] = 0;
    }
    drop_here(p->id, txn, NULL);
    p->txn = 0;
    p->retry_ns = rd__now_ns() + retry_gap();
    return;
  }
  for (size_t i = 0; i < p->nasked; i++) send_commit(p->asked[i], RD__MSG_TYPE__MSG_LINK_PG_COMMIT, p->id, txn);
  commit_here(p->id, txn);
  for (size_t i = 0; i < p->n; i++)
    if (!p->node[i]) p->node[i] = p->want[i];
  p->txn = 0;
  p->state = PG_CREATED;
  p->reason[0] = '\0';
  rd__log(RD_LOG_INFO, "placement group %016" PRIx64 " reserved (%zu bundles, strategy %d)", p->id, p->n, p->strategy);
  gcs_put(p);
  pg_changed(p);
}

/* A snapshot of the cluster for rd_pg_place: this node first, exactly,
 * then the others of the view; with potential, then the nodes the
 * autoscaler could start (*np of them).  In a buffer kept between calls,
 * grown to the cluster; NULL when it cannot grow. */
static rd_pg_node *snapshot(size_t *nn, int potential, size_t *np) {
  static rd_pg_node *v;
  static size_t cap;
  for (;;) {
    if (cap < 64) {
      rd_pg_node *w = realloc(v, 64 * sizeof(*v));
      if (!w) return NULL;
      v = w;
      cap = 64;
    }
    size_t n = 0, k = 0;
    v[n].index = self_index();
    v[n].total = N.ledger.total;
    v[n].avail = N.ledger.avail;
    v[n].labels = N.labels;
    n++;
    if (rd__cluster_on()) n += rd__cluster_pg_nodes(v + n, cap - n);
    if (potential && n < cap && rd__cluster_on()) k = rd__cluster_pg_potential(v + n, cap - n);
    if (n + k < cap) {   /* all of them fitted */
      *nn = n;
      if (np) *np = k;
      return v;
    }
    rd_pg_node *w = realloc(v, 2 * cap * sizeof(*v));
    if (!w) return NULL;
    v = w;
    cap *= 2;
  }
}

/* Propose and start reserving the bundles of p not reserved now. */
static void reserve(pg_rec *p) {
  if (!p->mine || p->txn || p->state == PG_REMOVED || p->state == PG_CREATED) return;
  size_t nn;
  const rd_pg_node *nodes = snapshot(&nn, 0, NULL);
  uint32_t *want = p->want;   /* no reservation in flight: free to propose into */
  memcpy(want, p->node, p->n * sizeof(*want));
  char why[300];
  int alt = p->alt;   /* re-reserving lost bundles: the alternative the others hold first */
  int rc = nodes ? rd_pg_place_alt(nodes, nn, p->b, p->sel, p->n, p->strategy, want, &alt, why, sizeof(why))
                 : RD_ENOMEM;
  if (!nodes) snprintf(why, sizeof(why), "node out of memory taking a snapshot of the cluster");
  if (rc == 0 && alt > 0)
    rd__log(RD_LOG_INFO, "placement group %016" PRIx64 " reserved by its fallback selectors %d", p->id, alt);
  if (rc == 0) p->alt = alt;
  if (rc != 0) {
    if (strcmp(p->reason, why)) {
      snprintf(p->reason, sizeof(p->reason), "%s", why);
      rd__log(RD_LOG_INFO, "placement group %016" PRIx64 " waits: %s", p->id, why);
      gcs_put(p);
    }
    p->retry_ns = rd__now_ns() + retry_gap();
    p->kickable = P.kickable = 1;
    return;
  }
  p->kickable = 0;   /* a reservation refused by a node waits for its retry: the view was stale */
  p->txn = ++P.next_txn;
  p->nasked = 0;
  p->failed = 0;
  memset(p->answered, 0, p->n * sizeof(*p->answered));
  uint32_t self = self_index();
  /* per bundle this node (or, below, one other node) holds: its index and
   * what it asks, as messages */
  int32_t *idx = malloc(p->n * sizeof(*idx));
  rd_resources *res = malloc(p->n * sizeof(*res));
  rd__res_msg *rm = malloc(p->n * sizeof(*rm));
  Rd__Resources **rp = malloc(p->n * sizeof(*rp));
  if (!idx || !res || !rm || !rp) {
    p->failed = 1;
    snprintf(p->reason, sizeof(p->reason), "node out of memory reserving %zu bundles", p->n);
  }
  size_t k = 0;
  for (size_t i = 0; i < p->n && !p->failed; i++)
    if (!p->node[i] && want[i] == self) {
      idx[k] = (int32_t)i;
      res[k++] = p->b[i];
    }
  if (k && !p->failed && prepare_here(p->id, self, p->txn, idx, res, k, why, sizeof(why)) != 0) {
    p->failed = 1;
    snprintf(p->reason, sizeof(p->reason), "%s", why);
  }
  /* the other nodes, each once, with its bundles */
  for (size_t i = 0; i < p->n && !p->failed; i++) {
    uint32_t t = want[i];
    if (p->node[i] || t == self) continue;
    int seen = 0;
    for (size_t j = 0; j < p->nasked; j++) seen |= p->asked[j] == t;
    if (seen) continue;
    node_client *l = rd__cluster_link(t);
    if (!l) {
      p->failed = 1;
      snprintf(p->reason, sizeof(p->reason), "node %u is unreachable", t);
      break;
    }
    Rd__LinkPgPrepare m = RD__LINK_PG_PREPARE__INIT;
    int32_t *bi = idx;
    size_t nb = 0;
    for (size_t j = 0; j < p->n; j++) {
      if (p->node[j] || want[j] != t) continue;
      rd__res_to_msg(&p->b[j], &rm[nb]);
      rp[nb] = &rm[nb].msg;
      bi[nb++] = (int32_t)j;
    }
    m.pg_id = p->id;
    m.txn = p->txn;
    m.n_indexes = nb;
    m.indexes = bi;
    m.n_bundles = nb;
    m.bundles = rp;
    rd__node_send(l, RD__MSG_TYPE__MSG_LINK_PG_PREPARE, &m.base, -1);
    /* the next group placed before t's next report must not count on it */
    rd_resources sum = p->b[bi[0]];
    for (size_t j = 1; j < nb; j++) (void)rd_res_add(&sum, &p->b[bi[j]]);
    p->claim[p->nasked] = rd__cluster_view_claim(t, &sum);
    p->asked[p->nasked++] = t;
  }
  free(idx);
  free(res);
  free(rm);
  free(rp);
  if (p->failed) {
    /* nodes asked already answer; their reservations are aborted */
    for (size_t j = 0; j < p->nasked; j++) p->answered[j] = 1;
  }
  int all = 1;
  for (size_t j = 0; j < p->nasked; j++) all &= p->answered[j];
  if (all) finish(p);
}

static void on_prepared(uint32_t peer, const Rd__LinkPgPrepared *m) {
  pg_rec *p = rec_find(m->pg_id);
  if (!p || !p->mine || p->txn != m->txn) {   /* stale: whatever it holds goes back */
    if (m->status == 0) send_commit(peer, RD__MSG_TYPE__MSG_LINK_PG_ABORT, m->pg_id, m->txn);
    return;
  }
  int all = 1;
  for (size_t j = 0; j < p->nasked; j++) {
    if (p->asked[j] == peer && !p->answered[j]) {
      p->answered[j] = 1;
      if (m->status == 0) rd__cluster_claim_ack(p->claim[j]);   /* held there now */
      if (m->status != 0) {
        p->failed = 1;
        snprintf(p->reason, sizeof(p->reason), "%s", m->error && *m->error ? m->error : rd_strerror(m->status));
      }
    }
    all &= p->answered[j];
  }
  if (all) finish(p);
}

/* ------------------------------------------------------------ removal */

static void remove_pg(pg_rec *p, const char *why) {
  if (p->state == PG_REMOVED) return;
  rd__log(RD_LOG_INFO, "placement group %016" PRIx64 " removed: %s", p->id, why);
  p->state = PG_REMOVED;
  snprintf(p->reason, sizeof(p->reason), "%s", why);
  char buf[400];
  snprintf(buf, sizeof(buf), "placement group %016" PRIx64 "%s%s%s was removed: %s", p->id, p->name[0] ? " ('" : "",
           p->name, p->name[0] ? "')" : "", why);
  if (p->mine) {
    uint32_t self = self_index();
    uint32_t *told = malloc((p->n + p->nasked) * sizeof(*told));   /* NULL: each told once per bundle */
    size_t nt = 0;
    for (size_t i = 0; i < p->n + p->nasked; i++) {
      uint32_t t = i < p->n ? p->node[i] : p->asked[i - p->n];
      if (!t || t == self) continue;
      int seen = 0;
      for (size_t j = 0; j < nt; j++) seen |= told[j] == t;
      if (seen) continue;
      if (told) told[nt++] = t;
      node_client *l = rd__cluster_link(t);
      if (!l) continue;
      Rd__PgRemove m = RD__PG_REMOVE__INIT;
      m.pg_id = p->id;
      rd__node_send(l, RD__MSG_TYPE__MSG_LINK_PG_REMOVE, &m.base, -1);
    }
    free(told);
    p->txn = 0;
    drop_here(p->id, 0, buf);
    gcs_put(p);
  }
  pg_changed(p);
  /* keep a bounded number of removed records */
  size_t nremoved = 0;
  pg_rec *oldest = NULL;
  for (pg_rec *q = P.recs; q; q = q->next)
    if (q->state == PG_REMOVED) {
      nremoved++;
      if (!oldest || q->id < oldest->id) oldest = q;
    }
  if (nremoved > PG_KEEP_REMOVED && oldest && oldest != p) rec_free(oldest);
}

/* ------------------------------------------------------------ routing */

/* Which bundle of p a request for `bundle` (-1: any) runs in: 0 and *out,
 * RD_EAGAIN (not reserved now), or an error with why. */
static int pick_bundle(const pg_rec *p, int bundle, const rd_resources *res, int *out, char *why, size_t whylen) {
  char t[200], u[200];
  if (p->state == PG_REMOVED) {
    snprintf(why, whylen, "placement group %016" PRIx64 " was removed: %s", p->id, p->reason);
    return RD_EPG_REMOVED;
  }
  if (bundle >= (int)p->n || bundle < -1) {
    snprintf(why, whylen, "bundle index %d is out of range: placement group %016" PRIx64 " has %zu bundles", bundle,
             p->id, p->n);
    return RD_EINVAL;
  }
  if (bundle >= 0) {
    if (!bundle_can_run(&p->b[bundle], res)) {
      rd_res_format(res, t, sizeof(t));
      rd_res_format(&p->b[bundle], u, sizeof(u));
      snprintf(why, whylen, "request %s can never run in bundle %d %s", t, bundle, u);
      return RD_EINFEASIBLE;
    }
    if (p->state != PG_CREATED || !p->node[bundle]) return RD_EAGAIN;
    *out = bundle;
    return 0;
  }
  int best = -1, any = 0;
  uint32_t self = self_index();
  for (size_t i = 0; i < p->n; i++) {
    if (!bundle_can_run(&p->b[i], res)) continue;
    any = 1;
    if (!p->node[i] || p->state != PG_CREATED) continue;
    if (best < 0 || (p->node[i] == self && p->node[best] != self)) best = (int)i;
  }
  if (!any) {
    rd_res_format(res, t, sizeof(t));
    snprintf(why, whylen, "request %s fits no bundle of placement group %016" PRIx64, t, p->id);
    return RD_EINFEASIBLE;
  }
  if (best < 0) return RD_EAGAIN;
  *out = best;
  return 0;
}

/* Route a lease request of c for group p: 1 when it was answered, queued
 * or forwarded; 0 when it must wait. */
static int route(pg_rec *p, node_client *c, uint64_t req_id, const rd_resources *res, int priority, int bundle,
                 const node_env *env) {
  char why[400];
  int idx = -1;
  int rc = pick_bundle(p, bundle, res, &idx, why, sizeof(why));
  if (rc == RD_EAGAIN) return 0;
  if (rc != 0) {
    rd__node_reply_grant(c, req_id, rc, why);
    return 1;
  }
  uint32_t t = p->node[idx];
  if (t == self_index()) {
    node_bundle *b = rd__pg_bundle_here(p->id, idx);
    if (!b) {   /* a stale copy (the bundle moved): ask the GCS again */
      if (!p->mine) {
        p->fetched_ns = 0;
        return 0;
      }
      snprintf(why, sizeof(why), "bundle %d of placement group %016" PRIx64 " is missing on this node", idx, p->id);
      rd__node_reply_grant(c, req_id, RD_EAGAIN, why);
      return 1;
    }
    rd__node_lease_queue(c, req_id, res, priority, b, NULL, env, 0, 0, 0, NULL);
    return 1;
  }
  if (!rd__cluster_node_usable(t)) return 0;   /* waits: the node is dying or its link just failed */
  rd__cluster_lease_to(c, req_id, res, priority, t, p->id, idx, env);
  return 1;
}

void rd__pg_lease_request(node_client *c, const Rd__LeaseRequest *m, const rd_resources *res, const node_env *env) {
  pg_rec *p = rec_find(m->pg_id);
  if (p && !p->mine && !p->fetched_ns) p = NULL;   /* forgotten: fetch it again */
  if (!p && record_of(m->pg_id) == self_index()) {
    char why[120];
    snprintf(why, sizeof(why), "no placement group %016" PRIx64, m->pg_id);
    rd__node_reply_grant(c, m->req_id, RD_ENOENT, why);
    return;
  }
  if (p && route(p, c, m->req_id, res, m->priority, m->bundle_index, env)) return;
  if (park(PARK_LEASE, c, m->req_id, m->pg_id, NULL, res, m->priority, m->bundle_index, 0) != 0) {
    rd__node_reply_grant(c, m->req_id, RD_ENOMEM, "node out of memory");
    return;
  }
  P.parked->env = env;   /* park put it first */
  if (!p) gcs_fetch(m->pg_id, NULL);
}


int rd__pg_lease_cancel(node_client *c, uint64_t req_id) {
  for (pg_park **pp = &P.parked; *pp; pp = &(*pp)->next)
    if ((*pp)->kind == PARK_LEASE && (*pp)->c == c && (*pp)->req_id == req_id) {
      park_free(pp);
      return 1;
    }
  return 0;
}

int rd__pg_actor_bundle(node_actor *a, node_bundle **b, uint32_t *host, char *why, size_t whylen) {
  *b = NULL;
  *host = 0;
  if (rd__node_actor_hosted(a)) {   /* hosting for a peer: its bundle must be here */
    *b = rd__pg_bundle_here(a->pg_id, a->bundle_index);
    if (*b) return 0;
    snprintf(why, whylen, "bundle %d of placement group %016" PRIx64 " is not reserved on node %u", a->bundle_index,
             a->pg_id, self_index());
    return RD_EPG_REMOVED;
  }
  pg_rec *p = rec_find(a->pg_id);
  if (p && !p->mine && !p->fetched_ns) p = NULL;
  if (!p) {
    if (record_of(a->pg_id) == self_index()) {
      snprintf(why, whylen, "no placement group %016" PRIx64, a->pg_id);
      return RD_ENOENT;
    }
    gcs_fetch(a->pg_id, NULL);
    return RD_EAGAIN;
  }
  int idx = -1;
  /* a restart goes back to the bundle it had */
  int rc = pick_bundle(p, a->bundle_index, &a->res, &idx, why, whylen);
  if (rc == RD_EAGAIN && !p->mine) p->fetched_ns = 0;
  if (rc) return rc;
  a->bundle_index = idx;
  if (p->node[idx] == self_index()) {
    *b = rd__pg_bundle_here(p->id, idx);
    if (*b) return 0;
    if (!p->mine) p->fetched_ns = 0;
    return RD_EAGAIN;
  }
  if (!rd__cluster_node_usable(p->node[idx])) return RD_EAGAIN;   /* tried again by the tick */
  *host = p->node[idx];
  return 0;
}

/* p changed (reserved, removed, fetched): serve what waits on it. */
/* Lease requests parked on p that can go now. */
static void route_parked(pg_rec *p) {
  for (pg_park **pp = &P.parked; *pp;) {
    pg_park *k = *pp;
    if (k->kind == PARK_LEASE && k->pg_id == p->id && route(p, k->c, k->req_id, &k->res, k->priority, k->bundle, k->env))
      park_free(pp);
    else
      pp = &k->next;
  }
}

/* Actors recorded here that wait for group pg_id (0: any group) to be
 * reserved or reachable: placed again. */
static void schedule_waiting(uint64_t pg_id) {
  for (node_actor *a = N.actors; a; a = a->next)
    if (a->pg_id && (!pg_id || a->pg_id == pg_id) && a->state == A_PENDING && !a->req && !a->host && !a->worker &&
        a->creator && a->creator->role != ROLE_LINK)
      rd__node_actor_schedule(a);
}

static int settled(const pg_rec *p) { return p->state == PG_CREATED || p->state == PG_REMOVED; }

/* Answer a wait, look or removal parked on p with what p says now. */
static void answer(const pg_park *k, const pg_rec *p) {
  char buf[400];
  int removed = k->kind == PARK_WAIT && p->state == PG_REMOVED;
  if (removed) snprintf(buf, sizeof(buf), "placement group %016" PRIx64 " was removed: %s", p->id, p->reason);
  reply(k->c, k->req_id, removed ? RD_EPG_REMOVED : 0, removed ? buf : NULL, p);
}

/* Whether k can be answered from p now: a record's state must have reached
 * the GCS, a copy must come from a fetch sent after the look arrived. */
static int answerable(const pg_park *k, const pg_rec *p) {
  if (k->kind == PARK_LEASE || k->pg_id != p->id || (p->mine && p->putting)) return 0;
  if (k->kind == PARK_WAIT) return settled(p);
  if (k->kind == PARK_LOOK) return p->mine || (p->fetched_ns && k->since_ns <= p->fetch_asked_ns);
  return 1;
}

static void pg_changed(pg_rec *p) {
  for (pg_park **pp = &P.parked; *pp;) {
    if (answerable(*pp, p)) {
      answer(*pp, p);
      park_free(pp);
    } else {
      pp = &(*pp)->next;
    }
  }
  route_parked(p);
  schedule_waiting(p->id);
  rd__node_dispatch();
}

/* ------------------------------------------------------------ client API */

/* A request of c's sent over link l, whose answer (MSG_LINK_PG_REMOVED)
 * goes to c as req_id; NULL without a link or memory. */
static pg_fwd *fwd_new(node_client *c, uint64_t req_id, node_client *l) {
  pg_fwd *f = l ? calloc(1, sizeof(*f)) : NULL;
  if (!f) return NULL;
  f->fwd_id = ++P.next_fwd;
  f->c = c;
  f->req_id = req_id;
  f->link = l;
  f->next = P.fwds;
  P.fwds = f;
  return f;
}

/* A detached group a client of this node creates is recorded on the head
 * (as its detached actors are), so it outlives this node: sent there, and
 * the head's answer relayed to c (1); 0 to record it here. */
static int create_at_head(node_client *c, const Rd__PgCreate *m) {
  uint32_t head = rd__cluster_on() && m->detached ? rd__cluster_head() : 0;
  if (!head || head == self_index()) return 0;
  pg_fwd *f = fwd_new(c, m->req_id, rd__cluster_link(head));
  if (!f) {
    char why[160];
    snprintf(why, sizeof(why), "node %u, the head, which records detached placement groups, is unreachable", head);
    reply(c, m->req_id, RD_ENODE_DIED, why, NULL);
    return 1;
  }
  Rd__PgCreate fm = *m;
  fm.req_id = f->fwd_id;
  rd__node_send(f->link, RD__MSG_TYPE__MSG_LINK_PG_CREATE, &fm.base, -1);
  return 1;
}

void rd__pg_on_create(node_client *c, const Rd__PgCreate *m) {
  char why[400];
  if (c->role == ROLE_LINK && !m->detached) {
    reply(c, m->req_id, RD_EINVAL, "only detached placement groups are recorded for another node", NULL);
    return;
  }
  if (c->role != ROLE_LINK && create_at_head(c, m)) return;
  if (m->n_bundles == 0 || m->n_bundles > PG_MAX) {
    snprintf(why, sizeof(why), "a placement group needs 1 to %d bundles, got %zu", PG_MAX, m->n_bundles);
    reply(c, m->req_id, RD_EINVAL, why, NULL);
    return;
  }
  if (m->strategy < RD_PG_PLACE_PACK || m->strategy > RD_PG_PLACE_STRICT_SPREAD) {
    snprintf(why, sizeof(why), "unknown placement strategy %d", m->strategy);
    reply(c, m->req_id, RD_EINVAL, why, NULL);
    return;
  }
  if (m->name && strlen(m->name) >= 128) {
    reply(c, m->req_id, RD_EINVAL, "placement group names are shorter than 128 bytes", NULL);
    return;
  }
  pg_rec *p = rec_new(m->n_bundles);
  if (!p) {
    reply(c, m->req_id, RD_ENOMEM, "node out of memory", NULL);
    return;
  }
  for (size_t i = 0; i < m->n_bundles; i++) {
    if (rd__res_from_msg(m->bundles[i], &p->b[i]) != 0 || rd_res_is_empty(&p->b[i])) {
      snprintf(why, sizeof(why), "bundle %zu is invalid or asks for nothing", i);
      reply(c, m->req_id, RD_EINVAL, why, NULL);
      free(p);
      return;
    }
    char swhy[300];
    const char *bs = i < m->n_label_selectors ? m->label_selectors[i] : NULL;
    int er = rd__node_sel(bs, &p->sel[i], swhy, sizeof(swhy));   /* with its fallbacks: "sel;sel;..." */
    if (er != 0) {
      snprintf(why, sizeof(why), "bundle %zu: %s", i, swhy);
      reply(c, m->req_id, er, why, NULL);
      free(p);
      return;
    }
  }
  if (m->n_label_selectors > m->n_bundles) {
    reply(c, m->req_id, RD_EINVAL, "more label selectors than bundles", NULL);
    free(p);
    return;
  }
  if (m->name && m->name[0] && rec_by_name(m->name)) {
    snprintf(why, sizeof(why), "a placement group named '%s' already exists", m->name);
    reply(c, m->req_id, RD_EEXIST, why, NULL);
    free(p);
    return;
  }
  p->n = m->n_bundles;
  p->strategy = m->strategy;
  snprintf(p->name, sizeof(p->name), "%s", m->name ? m->name : "");
  if (pg_never(p, why, sizeof(why))) {
    if (rd__cluster_on()) {
      /* a node that has just joined may not be in this view yet (a
       * driver that asks as soon as its `raydist start` returned): the
       * next view decides (rd__pg_view_changed) */
      p->wait_client = c->id;
      p->wait_req = m->req_id;
      p->wait_detached = m->detached;
      p->next = P.creating;
      P.creating = p;
      return;
    }
    reply(c, m->req_id, RD_EINFEASIBLE, why, NULL);
    free(p);
    return;
  }
  create_commit(p, c, m->req_id, m->detached);
}

/* Can group p never be placed on the nodes of this view (nor on those the
 * autoscaler can start)?  1, and why. */
static int pg_never(pg_rec *p, char *why, size_t whylen) {
  size_t nn, np;
  const rd_pg_node *nodes = snapshot(&nn, 1, &np);
  if (!nodes) {
    snprintf(why, whylen, "node out of memory taking a snapshot of the cluster");
    return 1;
  }
  uint32_t *want = p->want;   /* not reserving yet: scratch */
  memset(want, 0, p->n * sizeof(*want));
  int never = rd_pg_place_sel(nodes, nn, p->b, p->sel, p->n, p->strategy, want, why, whylen) == RD_EINFEASIBLE;
  if (never && rd__cluster_on()) {   /* nodes the autoscaler can start would hold it: it waits for them */
    char why2[300];
    memset(want, 0, p->n * sizeof(*want));
    if (np && rd_pg_place_sel(nodes, nn + np, p->b, p->sel, p->n, p->strategy, want, why2, sizeof(why2)) !=
                  RD_EINFEASIBLE) {
      never = 0;
      rd__log(RD_LOG_INFO, "placement group '%s' waits for the autoscaler: %s", p->name, why);
    }
    nn += np;
  }
  if (never) {
    for (size_t i = 0; i < nn; i++) {
      char t[200];
      rd_res_format(&nodes[i].total, t, sizeof(t));
      rd__log(RD_LOG_DEBUG, "placement group refused: node %u has %s", nodes[i].index, t);
    }
  }
  return never;
}

/* Record group p, made by client c (request req_id), and reserve it. */
static void create_commit(pg_rec *p, node_client *c, uint64_t req_id, int detached) {
  p->id = rd__rec_id_make(rd__cluster_on() ? rd__cluster_index() : 0, ++P.next_seq);
  p->mine = 1;
  p->state = PG_PENDING;
  /* what ends it with its creator; a detached group has none of it */
  p->creator = c->role == ROLE_DRIVER && !detached ? c->id : 0;
  p->job = c->role == ROLE_DRIVER || detached ? NULL : rd__node_client_job(c);
  p->gcs_job = c->role != ROLE_DRIVER && c->worker && !detached ? c->worker->gcs_job : 0;
  p->creator_job = rd__node_client_gcs_job(c);
  p->next = P.recs;
  P.recs = p;
  if (rd__cluster_on() && p->name[0]) {   /* answered once the GCS has it and the name is ours */
    gcs_op *op = calloc(1, sizeof(*op));
    if (!op || rd_gcs_pg_reserve(&op->pg, p->n) != 0) {
      free(op);
      rec_free(p);
      reply(c, req_id, RD_ENOMEM, "node out of memory", NULL);
      return;
    }
    op->put = 1;
    to_gcs(p, &op->pg);
    op->client_id = c->id;
    op->req_id = req_id;
    p->putting = 1;
    gcs_queue(op);
    return;
  }
  gcs_put(p);   /* anonymous: nothing to claim, so the record is written behind */
  reply(c, req_id, 0, NULL, p);
  reserve(p);
}

/* The creations that fitted no node of the last view: placed, or refused
 * (RD_EINFEASIBLE), by this one. */
static void creating_decide(void) {
  pg_rec *w = P.creating;
  P.creating = NULL;
  for (pg_rec *p; (p = w);) {
    w = p->next;
    p->next = NULL;
    node_client *c = rd__node_client_by_id(p->wait_client);
    char why[400];
    if (!c) {
      free(p);   /* its creator left meanwhile */
    } else if (pg_never(p, why, sizeof(why))) {
      reply(c, p->wait_req, RD_EINFEASIBLE, why, NULL);
      free(p);
    } else if (p->name[0] && rec_by_name(p->name)) {
      snprintf(why, sizeof(why), "a placement group named '%s' already exists", p->name);
      reply(c, p->wait_req, RD_EEXIST, why, NULL);
      free(p);
    } else {
      create_commit(p, c, p->wait_req, p->wait_detached);
    }
  }
}

void rd__pg_on_query(node_client *c, const Rd__PgQuery *m) {
  pg_rec *p = m->pg_id ? rec_find(m->pg_id) : (m->name && m->name[0] ? rec_by_name(m->name) : NULL);
  if (!m->pg_id && !(m->name && m->name[0])) {
    reply(c, m->req_id, RD_EINVAL, "a placement group query needs an id or a name", NULL);
    return;
  }
  int local = p && p->mine;
  if (!p && (!rd__cluster_on() || (m->pg_id && record_of(m->pg_id) == self_index()))) {
    char why[200];
    if (m->pg_id) snprintf(why, sizeof(why), "no placement group %016" PRIx64, m->pg_id);
    else snprintf(why, sizeof(why), "no placement group named '%s'", m->name);
    reply(c, m->req_id, RD_ENOENT, why, NULL);
    return;
  }
  /* a look (timeout 0) is answered with the state as it is, a wait when
   * the group is reserved or removed */
  pg_park q = {.kind = m->timeout_ms == 0 ? PARK_LOOK : PARK_WAIT, .c = c, .req_id = m->req_id,
               .pg_id = p ? p->id : m->pg_id, .since_ns = rd__now_ns()};
  if (local && answerable(&q, p)) {
    answer(&q, p);
    return;
  }
  /* park; a copy is fetched again (now, then while it waits) */
  int64_t t = m->timeout_ms != 0 ? m->timeout_ms : local ? PG_GCS_LATE_MS : 10000;
  if (park(q.kind, c, m->req_id, q.pg_id, m->name, NULL, 0, -1, t) != 0) {
    reply(c, m->req_id, RD_ENOMEM, "node out of memory", NULL);
    return;
  }
  if (!local) gcs_fetch(q.pg_id, q.pg_id ? NULL : m->name);
}

void rd__pg_on_remove(node_client *c, const Rd__PgRemove *m) {
  pg_rec *p = rec_find(m->pg_id);
  if (p && p->mine) {
    remove_pg(p, "removed by rd_pg_remove");
    /* answered once the GCS says so too (or at once, when it does already) */
    if (!p->putting || park(PARK_REMOVE, c, m->req_id, p->id, NULL, NULL, 0, -1, PG_GCS_REMOVE_MS) != 0)
      reply(c, m->req_id, 0, NULL, p);
    return;
  }
  uint32_t rec = record_of(m->pg_id);
  if (!m->pg_id || rec == self_index() || !rd__cluster_on()) {
    char why[120];
    snprintf(why, sizeof(why), "no placement group %016" PRIx64, m->pg_id);
    reply(c, m->req_id, RD_ENOENT, why, NULL);
    return;
  }
  pg_fwd *f = fwd_new(c, m->req_id, rd__cluster_link(rec));
  if (!f) {
    char why[200];
    snprintf(why, sizeof(why), "node %u, which records placement group %016" PRIx64 ", is unreachable or dead", rec,
             m->pg_id);
    reply(c, m->req_id, RD_ENODE_DIED, why, NULL);
    return;
  }
  Rd__PgRemove fm = RD__PG_REMOVE__INIT;
  fm.req_id = f->fwd_id;
  fm.pg_id = m->pg_id;
  rd__node_send(f->link, RD__MSG_TYPE__MSG_LINK_PG_REMOVE, &fm.base, -1);
  if (p) p->fetched_ns = 0;
}

void rd__pg_client_dropped(node_client *c) {
  for (pg_park **pp = &P.parked; *pp;) {
    if ((*pp)->c == c) park_free(pp);
    else pp = &(*pp)->next;
  }
  for (pg_fwd **pp = &P.fwds; *pp;) {
    pg_fwd *f = *pp;
    if (f->c == c) {
      *pp = f->next;
      free(f);
    } else if (f->link == c) {
      *pp = f->next;
      reply(f->c, f->req_id, RD_ENODE_DIED, "the record node of the placement group died or its link broke", NULL);
      free(f);
    } else {
      pp = &f->next;
    }
  }
  if (c->role == ROLE_LINK) {   /* reservations waiting on that peer fail */
    uint32_t peer = rd__cluster_link_peer(c);
    for (pg_rec *p = P.recs; p; p = p->next) {
      if (!p->mine || !p->txn) continue;
      int all = 1, hit = 0;
      for (size_t j = 0; j < p->nasked; j++) {
        if (p->asked[j] == peer && !p->answered[j]) {
          p->answered[j] = 1;
          hit = 1;
        }
        all &= p->answered[j];
      }
      if (hit) {
        p->failed = 1;
        snprintf(p->reason, sizeof(p->reason), "node %u died or its link broke while reserving", peer);
      }
      if (hit && all) finish(p);
    }
    return;
  }
  if (c->role != ROLE_DRIVER) return;
  for (pg_rec *p = P.recs; p; p = p->next)
    if (p->mine && p->creator == c->id && p->state != PG_REMOVED) {
      char why[160];
      snprintf(why, sizeof(why), "the driver that created it (pid %d) exited", c->pid);
      remove_pg(p, why);
    }
  /* the job's last driver here: what its tasks created here goes with the job */
  if (!c->job) return;
  for (node_client *o = N.clients; o; o = o->next)
    if (o != c && o->role == ROLE_DRIVER && !o->dead && o->job == c->job) return;
  for (pg_rec *p = P.recs; p; p = p->next)
    if (p->mine && !p->creator && p->job == c->job && p->state != PG_REMOVED)
      remove_pg(p, "the job that created it ended (its driver exited)");
}

/* ------------------------------------------------------------ links */

int rd__pg_link_frame(node_client *link, const rd__frame *f) {
  const ProtobufCMessageDescriptor *d;
  switch (f->type) {
    case RD__MSG_TYPE__MSG_LINK_PG_PREPARE: d = &rd__link_pg_prepare__descriptor; break;
    case RD__MSG_TYPE__MSG_LINK_PG_PREPARED: d = &rd__link_pg_prepared__descriptor; break;
    case RD__MSG_TYPE__MSG_LINK_PG_COMMIT:
    case RD__MSG_TYPE__MSG_LINK_PG_ABORT: d = &rd__link_pg_commit__descriptor; break;
    case RD__MSG_TYPE__MSG_LINK_PG_REMOVE: d = &rd__pg_remove__descriptor; break;
    case RD__MSG_TYPE__MSG_LINK_PG_REMOVED: d = &rd__pg_reply__descriptor; break;
    case RD__MSG_TYPE__MSG_LINK_PG_CREATE: d = &rd__pg_create__descriptor; break;
    default: return 0;
  }
  ProtobufCMessage *m = rd__frame_unpack(f, d);
  if (!m) {
    rd__node_client_drop(link, "malformed placement-group link frame");
    return 1;
  }
  uint32_t peer = rd__cluster_link_peer(link);
  switch (f->type) {
    case RD__MSG_TYPE__MSG_LINK_PG_PREPARE: {
      Rd__LinkPgPrepare *q = (Rd__LinkPgPrepare *)m;
      Rd__LinkPgPrepared r = RD__LINK_PG_PREPARED__INIT;
      char why[300] = "";
      r.pg_id = q->pg_id;
      r.txn = q->txn;
      rd_resources *res = NULL;
      if (q->n_indexes != q->n_bundles || q->n_bundles == 0 || record_of(q->pg_id) != peer) {
        r.status = RD_EINVAL;
        snprintf(why, sizeof(why), "malformed bundle reservation");
      } else if (q->n_bundles > PG_MAX) {
        r.status = RD_EINVAL;
        snprintf(why, sizeof(why), "too many bundles");
      } else if (!(res = malloc(q->n_bundles * sizeof(*res)))) {
        r.status = RD_ENOMEM;
        snprintf(why, sizeof(why), "node %u out of memory", self_index());
      }
      for (size_t i = 0; r.status == 0 && i < q->n_bundles; i++) {
        if (rd__res_from_msg(q->bundles[i], &res[i]) != 0 || q->indexes[i] < 0 || q->indexes[i] >= PG_MAX) {
          r.status = RD_EINVAL;
          snprintf(why, sizeof(why), "invalid bundle in a prepare");
        }
      }
      if (r.status == 0)
        r.status = prepare_here(q->pg_id, peer, q->txn, q->indexes, res, q->n_bundles, why, sizeof(why));
      free(res);
      r.error = why;
      rd__node_send(link, RD__MSG_TYPE__MSG_LINK_PG_PREPARED, &r.base, -1);
      break;
    }
    case RD__MSG_TYPE__MSG_LINK_PG_PREPARED:
      on_prepared(peer, (Rd__LinkPgPrepared *)m);
      break;
    case RD__MSG_TYPE__MSG_LINK_PG_CREATE:   /* the head: a detached group of a client of the peer */
      rd__pg_on_create(link, (Rd__PgCreate *)m);
      break;
    case RD__MSG_TYPE__MSG_LINK_PG_COMMIT: {
      Rd__LinkPgCommit *q = (Rd__LinkPgCommit *)m;
      if (record_of(q->pg_id) == peer) commit_here(q->pg_id, q->txn);
      break;
    }
    case RD__MSG_TYPE__MSG_LINK_PG_ABORT: {
      Rd__LinkPgCommit *q = (Rd__LinkPgCommit *)m;
      if (record_of(q->pg_id) == peer) drop_here(q->pg_id, q->txn, NULL);
      break;
    }
    case RD__MSG_TYPE__MSG_LINK_PG_REMOVE: {
      Rd__PgRemove *q = (Rd__PgRemove *)m;
      pg_rec *p = rec_find(q->pg_id);
      if (p && p->mine) {   /* a removal forwarded by a caller's node */
        remove_pg(p, "removed by rd_pg_remove");
        /* answered once the GCS holds the removal, as a local caller is:
         * the caller may look the name up in the GCS right after */
        if (q->req_id &&
            (!p->putting || park(PARK_REMOVE, link, q->req_id, p->id, NULL, NULL, 0, -1, PG_GCS_REMOVE_MS) != 0))
          reply(link, q->req_id, 0, NULL, p);
      } else {
        char why[200];
        snprintf(why, sizeof(why), "placement group %016" PRIx64 " was removed", q->pg_id);
        if (record_of(q->pg_id) == peer) drop_here(q->pg_id, 0, why);
        if (q->req_id) reply(link, q->req_id, RD_ENOENT, "no such placement group", NULL);
      }
      break;
    }
    case RD__MSG_TYPE__MSG_LINK_PG_REMOVED: {
      Rd__PgReply *q = (Rd__PgReply *)m;
      for (pg_fwd **pp = &P.fwds; *pp; pp = &(*pp)->next) {
        pg_fwd *f2 = *pp;
        if (f2->link != link || f2->fwd_id != q->req_id) continue;
        q->req_id = f2->req_id;
        rd__node_send(f2->c, RD__MSG_TYPE__MSG_PG_REPLY, &q->base, -1);
        *pp = f2->next;
        free(f2);
        break;
      }
      break;
    }
  }
  protobuf_c_message_free_unpacked(m, NULL);
  rd__node_flush_all();
  return 1;
}

void rd__pg_demand_each(void (*fn)(void *arg, const rd_resources *shape, const char *sel, uint64_t spread_group,
                                   const uint32_t *avoid, size_t navoid),
                        void *arg) {
  for (pg_rec *p = P.recs; p; p = p->next) {
    /* waiting: it did not fit the last snapshot (kickable), no reservation in flight */
    if (!p->mine || p->txn || !p->kickable || (p->state != PG_PENDING && p->state != PG_RESCHEDULING)) continue;
    rd_resources sum;
    memset(&sum, 0, sizeof(sum));
    const char *sel = NULL;
    uint32_t *held = p->want;   /* STRICT_SPREAD: the nodes its reserved bundles hold, where the rest may not go
                                   (no reservation in flight: want is scratch) */
    size_t nheld = 0;
    for (size_t i = 0; p->strategy == RD_PG_STRICT_SPREAD && i < p->n; i++)
      if (p->node[i]) held[nheld++] = p->node[i];
    for (size_t i = 0; i < p->n; i++) {
      if (p->node[i]) continue;
      if (p->strategy != RD_PG_STRICT_PACK) {   /* STRICT_SPREAD: each on a node of its own */
        fn(arg, &p->b[i], p->sel[i], p->strategy == RD_PG_STRICT_SPREAD ? p->id : 0, held, nheld);
        continue;
      }
      (void)rd_res_add(&sum, &p->b[i]);
      if (!sel) sel = p->sel[i];
    }
    if (p->strategy == RD_PG_STRICT_PACK && (sum.cpu || sum.gpu || sum.memory || sum.ncustom)) fn(arg, &sum, sel, 0, NULL, 0);
  }
}

void rd__pg_view_changed(void) {
  char why[200];
  creating_decide();
  /* bundles whose record node died: nobody can use or remove them now */
  for (node_bundle *b = N.bundles, *next; b; b = next) {
    next = b->next;
    if (b->removed || rd__cluster_node_alive(b->record)) continue;
    snprintf(why, sizeof(why), "placement group %016" PRIx64 " was removed: its record node %u died", b->pg_id,
             b->record);
    rd__node_bundle_drop(b, why);
  }
  for (pg_rec *p = P.recs, *next; p; p = next) {
    next = p->next;
    if (!p->mine) {   /* copies may name dead nodes: fetch again when needed */
      p->fetched_ns = 0;
      continue;
    }
    if (p->state == PG_REMOVED) continue;
    int lost = 0;
    for (size_t i = 0; i < p->n; i++)
      if (p->node[i] && p->node[i] != self_index() && !rd__cluster_node_alive(p->node[i])) {
        lost++;
        snprintf(p->reason, sizeof(p->reason), "node %u, which held bundle %zu, died", p->node[i], i);
        p->node[i] = 0;
      }
    if (!lost) continue;
    rd__log(RD_LOG_WARN, "placement group %016" PRIx64 ": %s; reserving %d bundles again", p->id, p->reason, lost);
    p->state = PG_RESCHEDULING;
    gcs_put(p);
    reserve(p);
  }
  rd__node_dispatch();
}

void rd__pg_forget(uint64_t pg_id) {
  pg_rec *p = rec_find(pg_id);
  if (p && !p->mine) p->fetched_ns = 0;
}

/* Actors and leases waiting on a reserved group whose bundle's node could
 * not be reached: try them again now and then. */
static void retry_waiting(void) {
  for (pg_rec *p = P.recs; p; p = p->next)
    if (p->state == PG_CREATED) route_parked(p);
  schedule_waiting(0);
}

/* Groups that tasks of a job made here, when no driver of that job runs
 * here: no driver's exit removes them, so every PG_SWEEP_NS the GCS job
 * table says whether their jobs ended (the job's last driver left, or its
 * node died), and the groups of ended jobs go. */
#define PG_SWEEP_NS 1000000000ull

typedef struct job_sweep {
  uv_work_t work;
  rd_gcs_job *jobs;
  size_t n;
  int status;
} job_sweep;

static int sweep_wanted(void) {
  for (pg_rec *p = P.recs; p; p = p->next)
    if (p->mine && !p->creator && p->gcs_job && p->state != PG_REMOVED) return 1;
  return 0;
}

static void sweep_work(uv_work_t *w) {
  job_sweep *s = w->data;
  rd_gcs *g = rd__cluster_gcs();
  s->status = g ? rd_gcs_job_list(g, &s->jobs, &s->n) : RD_ESTATE;
}

static void sweep_done(uv_work_t *w, int status) {
  job_sweep *s = w->data;
  P.sweeping = 0;
  if (status == 0 && s->status == 0) {
    /* a job missing from the table ended long ago (trimmed), but only when
     * the table was trimmed past it; else it is kept (a GCS that lost its
     * tables must not end running jobs' groups) */
    size_t ended = 0;
    uint32_t oldest_ended = UINT32_MAX;
    for (size_t i = 0; i < s->n; i++)
      if (s->jobs[i].end_ms) {
        ended++;
        if (s->jobs[i].job_id < oldest_ended) oldest_ended = s->jobs[i].job_id;
      }
    for (pg_rec *p = P.recs, *next; p; p = next) {
      next = p->next;
      if (!p->mine || p->creator || !p->gcs_job || p->state == PG_REMOVED) continue;
      const rd_gcs_job *j = NULL;
      for (size_t i = 0; i < s->n && !j; i++)
        if (s->jobs[i].job_id == p->gcs_job) j = &s->jobs[i];
      if (j ? !j->end_ms : !(ended >= 1000 && p->gcs_job < oldest_ended)) continue;
      char why[240];
      snprintf(why, sizeof(why), "the job that created it (job %u) ended%s%.128s", p->gcs_job, j ? ": " : "",
               j ? j->end_reason : "");
      remove_pg(p, why);
    }
    rd__node_flush_all();   /* removals to the bundles' nodes go now */
  } else if (status == 0) {
    rd__log(RD_LOG_DEBUG, "placement groups: cannot read the GCS job table: %s", rd_strerror(s->status));
  }
  free(s->jobs);
  free(s);
}

static void sweep_maybe(uint64_t now) {
  if (P.sweeping || !rd__cluster_on() || now - P.swept_ns < PG_SWEEP_NS || !sweep_wanted()) return;
  job_sweep *s = calloc(1, sizeof(*s));
  if (!s) return;
  P.sweeping = 1;
  P.swept_ns = now;
  s->work.data = s;
  uv_queue_work(N.loop, &s->work, sweep_work, sweep_done);
}

void rd__pg_tick(void) {
  uint64_t now = rd__now_ns();
  static unsigned ticks;
  if (++ticks % 4 == 0) retry_waiting();
  sweep_maybe(now);
  for (pg_rec *p = P.recs; p; p = p->next)
    if (waits_for_room(p) && now >= p->retry_ns) reserve(p);
  /* waits that timed out, and copies to fetch again for those still waiting */
  for (pg_park **pp = &P.parked; *pp;) {
    pg_park *k = *pp;
    if (k->deadline_ns && now >= k->deadline_ns) {
      pg_rec *p = k->pg_id ? rec_find(k->pg_id) : NULL;
      if (k->kind != PARK_LEASE && p && p->mine && (k->kind != PARK_WAIT || settled(p))) {
        answer(k, p);   /* the GCS is late: this record is what is true */
      } else if (k->kind != PARK_LEASE) {
        char why[400];
        snprintf(why, sizeof(why), "placement group %016" PRIx64 " is still %s%s%s", k->pg_id,
                 p ? state_name[p->state] : "unknown", p && p->reason[0] ? ": " : "", p ? p->reason : "");
        reply(k->c, k->req_id, k->kind == PARK_LOOK && p ? 0 : RD_ETIMEDOUT, why, p);
      } else {
        rd__node_reply_grant(k->c, k->req_id, RD_ETIMEDOUT, "placement group lookup timed out");
      }
      park_free(pp);
      continue;
    }
    pg_rec *p = k->pg_id ? rec_find(k->pg_id) : NULL;
    if (k->pg_id && !p && now - k->asked_ns > PG_REFRESH_NS) {   /* not known here yet */
      k->asked_ns = now;
      gcs_fetch(k->pg_id, NULL);
    } else if (p && !p->mine && !p->fetching && now - p->fetched_ns > PG_REFRESH_NS) {
      gcs_fetch(k->pg_id, NULL);
    }
    pp = &k->next;
  }
}

static void kick_fire(uv_timer_t *t) {
  (void)t;
  P.kick_armed = 0;
  P.kicked_ns = rd__now_ns();
  P.kickable = 0;
  for (pg_rec *p = P.recs, *next; p; p = next) {
    next = p->next;
    if (waits_for_room(p) && p->kickable) reserve(p);   /* sets P.kickable again if it still does not fit */
  }
  rd__node_flush_all();   /* answers to waits go now, not with the next tick's flush */
}

void rd__pg_kick(void) {
  if (!P.kickable || P.kick_armed || N.shutting_down) return;
  if (!P.kick_init) {
    if (uv_timer_init(N.loop, &P.kick) != 0) return;   /* the periodic retry still runs */
    P.kick_init = 1;
  }
  uint64_t now = rd__now_ns(), due = P.kicked_ns + PG_KICK_GAP_NS;
  uv_timer_start(&P.kick, kick_fire, due > now ? (due - now + 999999) / 1000000 : 0, 0);
  P.kick_armed = 1;
}

void rd__pg_held(rd__held *h) {
  for (const pg_rec *p = P.recs; p; p = p->next) {
    rd__held_add(h, RD_HELD_JOB, p->job);
    for (size_t i = 0; i < p->n; i++) rd__held_add(h, RD_HELD_SEL, p->sel[i]);
  }
  for (const pg_park *k = P.parked; k; k = k->next) rd__held_add(h, RD_HELD_ENV, k->env);
}

void rd__pg_free(void) {
  P.kick_init = P.kick_armed = 0;   /* the node's walk closed the timer */
  while (P.parked) park_free(&P.parked);
  while (P.fwds) {
    pg_fwd *f = P.fwds;
    P.fwds = f->next;
    free(f);
  }
  while (P.recs) rec_free(P.recs);
  while (P.creating) {
    pg_rec *p = P.creating;
    P.creating = p->next;
    free(p);
  }
}

void rd__pgs_describe(rd__mbuf *b, const rd_gcs_pg *pgs, size_t n, int only, size_t limit) {
  size_t live = 0, shown = 0;
  for (size_t i = 0; i < n; i++) live += pgs[i].state != RD_GCS_PG_REMOVED;
  rd__mbuf_printf(b, "placement groups: %zu live, %zu removed\n", live, n - live);
  for (size_t i = 0; i < n && shown < limit; i++) {
    const rd_gcs_pg *p = &pgs[i];
    if (only == -1 ? p->state == RD_GCS_PG_REMOVED : only && p->state != only) continue;
    if (!shown++)
      rd__mbuf_printf(b, "%-16s %-16s %-13s %-12s %s\n", "id", "name", "strategy", "state", "bundles (node: CPU/GPU)");
    char bs[512];
    size_t off = 0, k = 0;
    for (; k < p->nbundles && off < sizeof(bs) - 80; k++)
      off += (size_t)snprintf(bs + off, sizeof(bs) - off, "%s%u: %g/%g", k ? ", " : "", p->bundle_nodes[k],
                              rd_res_to_double(p->bundles[k].cpu), rd_res_to_double(p->bundles[k].gpu));
    if (k < p->nbundles)   /* a large group: the first ones, and how many in all */
      snprintf(bs + off, sizeof(bs) - off, ", ... (%zu bundles)", p->nbundles);
    rd__mbuf_printf(b, "%016llx %-16s %-13s %-12s %s%s%s\n", (unsigned long long)p->pg_id, p->name[0] ? p->name : "-",
                    rd_gcs_pg_strategy_name(p->strategy), rd_gcs_pg_state_name(p->state), bs, p->reason[0] ? "; " : "",
                    p->reason);
  }
}

rd_gcs_pg *rd__pg_records(size_t *n, int as_shown) {
  size_t k = 0;
  for (pg_rec *p = P.recs; p; p = p->next) k += p->mine;
  size_t *nb = calloc(k ? k : 1, sizeof(*nb)), j = 0;
  *n = 0;
  if (!nb) return NULL;
  for (pg_rec *p = P.recs; p && j < k; p = p->next)
    if (p->mine) nb[j++] = p->n;
  /* none: one empty record, so that NULL means out of memory */
  rd_gcs_pg *v = rd_gcs_pg_block(k ? k : 1, nb);
  free(nb);
  if (!v) return NULL;
  for (pg_rec *p = P.recs; p && *n < k; p = p->next) {
    if (!p->mine) continue;
    rd_gcs_pg *g = &v[(*n)++];
    to_gcs(p, g);
    for (size_t i = 0; as_shown && i < g->nbundles; i++) g->bundle_nodes[i] = shown(g->bundle_nodes[i]);
  }
  return v;
}

int rd__pg_state_parse(const char *s) {
  for (int k = RD_GCS_PG_PENDING; k <= RD_GCS_PG_REMOVED; k++)
    if (!strcasecmp(s, rd_gcs_pg_state_name(k))) return k;
  return -1;
}
