/* runtime/fair.c - fair share of a node between the jobs that use it.
 *
 * An owner keeps a lease for as long as it has tasks of that class queued,
 * so without this a job with a deep queue holds the node's CPUs until its
 * queue drains and a second job waits the whole time (Ray's "one job starves
 * another").  Two things keep the node fair, both at task boundaries only
 * (nothing is killed):
 *
 *  - order: before each dispatch, requests of one priority are ordered by
 *    their job's weighted dominant share (scheduler/fair.h), lowest first,
 *    so what frees up goes to the job that holds least;
 *  - yield: after it, a request that waits for resources another job holds
 *    asks one of that job's lease owners to give a lease back
 *    (MSG_LEASE_YIELD) when the move does not overshoot
 *    (rd_fair_should_yield), or, for a grant both want whole (the node's
 *    only GPU, the one CPU), when the holder has had it for the time slice
 *    times its weight and holds a larger share.  The owner pushes no more
 *    tasks to that lease and returns it once those in flight are done; its
 *    class queues for a new lease like any other request.
 *
 * A job is what node.c calls one: the executable drivers run.  Held means
 * the grants of its workers from the node's own ledger (task leases and
 * actors; placement-group bundles are not counted, and their queues are
 * not reordered).  Actors never yield.  A lease held by an owner on another
 * node (spillback) is asked back through that node (MSG_LINK_LEASE_YIELD).
 * RAYDIST_FAIR_SHARE=0 turns it off;
 * RAYDIST_FAIR_SLICE_MS (default 2000) sets the slice. */
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "fair.h"
#include "log.h"
#include "node_internal.h"

void rd__fair_init(void) {
  const char *e = getenv("RAYDIST_FAIR_SHARE");
  N.fair_off = e && !strcmp(e, "0");
  e = getenv("RAYDIST_FAIR_SLICE_MS");
  long ms = e && *e ? atol(e) : 2000;
  N.fair_slice_ns = (uint64_t)(ms > 0 ? ms : 2000) * 1000000ull;
}

/* Env variants (node.c) share their job's account: FJ(j) is it. */
#define FJ(j) rd__job_base(j)

int rd__fair_active(void) {   /* two jobs or more, not counting variants */
  if (N.fair_off) return 0;
  int n = 0;
  for (node_job *j = N.jobs; j && n < 2; j = j->next) n += !j->base;
  return n > 1;
}

/* j holds r more (sign 1) or less (-1): its share follows. */
static void job_add(node_job *j, const rd_resources *r, int sign) {
  rd_fair_res_add(&j->held, r, sign);
  j->share = rd_fair_share(&N.ledger.total, &j->held, j->weight);
}

/* What a worker's grant holds of the node's ledger now (a task waiting in
 * rd_get has lent its CPUs back). */
static rd_resources worker_holds(const node_worker *w) {
  rd_resources h = {0};
  if (w->bundle || (w->state != W_LEASED && !w->actor)) return h;
  h.cpu = w->blocked ? 0 : w->grant.req.cpu;
  h.gpu = w->grant.req.gpu;
  h.memory = w->grant.req.memory;
  return h;
}

/* Each job's holdings, share and requests waiting in N.queue; returns how
 * many jobs wait there. */
int rd__fair_tally(void) {
  for (node_job *j = N.jobs; j; j = j->next) {
    memset(&j->held, 0, sizeof(j->held));
    j->waiting = 0;
  }
  for (node_worker *w = N.workers; w; w = w->next) {
    rd_resources h = worker_holds(w);
    rd_fair_res_add(&FJ(w->job)->held, &h, +1);
  }
  int waiting_jobs = 0;
  for (rd_sched_item *it = N.queue.head; it; it = it->next) {
    lease_req *r = it->data;
    if (FJ(r->job)->waiting++ == 0) waiting_jobs++;
  }
  for (node_job *j = N.jobs; j; j = j->next) j->share = rd_fair_share(&N.ledger.total, &j->held, j->weight);
  return waiting_jobs;
}

static double job_rank(const rd_sched_item *it, void *ctx) {
  (void)ctx;
  return FJ(((const lease_req *)it->data)->job)->share;
}

void rd__fair_order(void) {
  if (!rd__fair_active() || N.queue.head == NULL || N.queue.head == N.queue.tail) return;
  if (rd__fair_tally() > 1) rd_sched_queue_order(&N.queue, job_rank, NULL);
}

static node_worker *worker_by_id(uint32_t id) {
  for (node_worker *w = N.workers; w; w = w->next)
    if (w->id == id) return w;
  return NULL;
}

/* Would giving w's lease back help request r, short of `kinds`? */
static int frees_what_is_short(const node_worker *w, uint32_t kinds) {
  return ((kinds & RD_RES_KIND_CPU) && w->grant.req.cpu > 0 && !w->blocked) ||
         ((kinds & RD_RES_KIND_GPU) && w->grant.req.gpu > 0) ||
         ((kinds & RD_RES_KIND_MEMORY) && w->grant.req.memory > 0);
}

/* The lease to ask back for r (short of kinds), or NULL. */
static node_worker *pick_victim(const lease_req *r, uint32_t kinds, uint64_t now) {
  node_job *b = FJ(r->job);
  node_worker *best = NULL;
  for (node_worker *w = N.workers; w; w = w->next) {
    node_job *a = FJ(w->job);
    if (w->state != W_LEASED || w->actor || w->bundle || w->yield_asked || a == b) continue;
    if (!w->lease_owner || w->lease_owner->dead) continue;
    if (w->lease_priority > r->item.priority || !frees_what_is_short(w, kinds)) continue;
    rd_resources give = worker_holds(w);
    int ok = rd_fair_should_yield(&N.ledger.total, &a->held, a->weight, &give, &b->held, b->weight, &r->item.req);
    if (!ok)   /* a grant both want whole: take turns */
      ok = a->share > b->share && now - w->granted_ns >= (uint64_t)((double)N.fair_slice_ns * a->weight);
    if (!ok) continue;
    if (!best || a->share > FJ(best->job)->share ||
        (a->share == FJ(best->job)->share && w->granted_ns < best->granted_ns))
      best = w;
  }
  return best;
}

void rd__fair_yield(void) {
  if (!rd__fair_active() || N.queue.head == NULL) return;
  rd__fair_tally();
  uint64_t now = rd__now_ns();
  for (rd_sched_item *it = N.queue.head; it; it = it->next) {
    lease_req *r = it->data;
    uint32_t kinds = rd_res_kinds_short(&N.ledger, &it->req);
    if (!kinds) continue;   /* it waits for a worker, or behind a request that does */
    if (r->yield_worker) {
      node_worker *w = worker_by_id(r->yield_worker);
      if (w && w->state == W_LEASED && w->yield_asked) {
        job_add(FJ(r->job), &it->req, +1);   /* on its way: count it as r's */
        continue;
      }
      r->yield_worker = 0;   /* given back and taken by someone else: ask again */
    }
    node_worker *w = pick_victim(r, kinds, now);
    if (!w) continue;
    if (w->lease_owner->role == ROLE_LINK) {   /* an owner on another node: through its node */
      rd__cluster_lease_yield(w->lease_owner, w);
    } else {
      Rd__LeaseYield m = RD__LEASE_YIELD__INIT;
      m.lease_id = w->lease_id;
      rd__node_send(w->lease_owner, RD__MSG_TYPE__MSG_LEASE_YIELD, &m.base, -1);
    }
    w->yield_asked = 1;
    r->yield_worker = w->id;
    N.fair_yields++;
    FJ(w->job)->yields++;
    rd__log(RD_LOG_DEBUG, "fair share: job %u (share %.3f) gives worker %u's lease back for job %u (share %.3f)",
            FJ(w->job)->id, FJ(w->job)->share, w->id, FJ(r->job)->id, FJ(r->job)->share);
    /* count the move now, so the next request is judged on what will be */
    rd_resources give = worker_holds(w);
    job_add(FJ(w->job), &give, -1);
    job_add(FJ(r->job), &it->req, +1);
    /* a job with no worker here starts one now, so it is ready when the
     * lease comes back (can_run grows a pool only when resources are free) */
    if (r->job->nidle == 0 && r->job->nstarting == 0 && r->job->want == 0) r->job->want = 1;
  }
}
