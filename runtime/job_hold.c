/* runtime/job_hold.c - a job's entrypoint resources (Ray's
 * entrypoint_num_cpus, _num_gpus, _memory, _resources).
 *
 * A job submitted with resources has its keeper (cli_job.c) connect to the
 * node as a client of its own kind (Hello.role 3) and send one JobHold.
 * The node takes them from its ledger, as a task's lease would, at once
 * or, when they are in use, once they are free (the keeper's job waits,
 * PENDING, meanwhile); they come back when the connection ends, that is
 * when the keeper ends (the job ended, was stopped, or the keeper was
 * killed).  So the tasks and actors of every driver on the node cannot
 * take what a running job's driver holds, and the GPUs it holds are its
 * own (CUDA_VISIBLE_DEVICES).  A request the node cannot ever grant (more
 * than its total, a resource it has not) is refused at once.
 *
 * Waiting holds are granted in the order they came, before the lease
 * queue at each dispatch, one that does not fit passed over for the next
 * (a CPU job does not wait behind a GPU job); like a wide task's lease, a
 * wide hold may wait while narrower holds and leases take each resource
 * as it frees. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "common.h"
#include "log.h"
#include "node_internal.h"
#include "pg.h"
#include "raydist.h"

struct node_hold {
  node_client *client;
  uint32_t job;
  rd_resources res;
  rd_res_grant grant;
  int held;
  struct node_hold *next;   /* waiting ones, oldest first */
};

static node_hold *waiting;
static uint64_t nheld;

static void reply(node_client *c, int status, const char *err, const rd_res_grant *g) {
  Rd__JobHoldReply r = RD__JOB_HOLD_REPLY__INIT;
  int32_t ids[RD_RES_MAX_GPUS];
  char vis[256] = "";
  r.status = status;
  r.error = (char *)(err ? err : "");
  if (g) {
    for (int i = 0; i < g->ngpus; i++) ids[i] = g->gpu_ids[i];
    r.n_gpu_ids = (size_t)g->ngpus;
    r.gpu_ids = ids;
    rd_res_grant_visible_devices(g, vis, sizeof(vis));
  }
  r.visible_devices = vis;
  rd__node_send(c, RD__MSG_TYPE__MSG_JOB_HOLD_REPLY, &r.base, -1);
}

static int try_take(node_hold *h) {
  if (rd_res_acquire(&N.ledger, &h->res, &h->grant) != 0) return 0;
  char what[256];
  rd_res_format(&h->res, what, sizeof(what));
  h->held = 1;
  nheld++;
  rd__log(RD_LOG_INFO, "job %u (keeper pid %d) holds %s", h->job, h->client->pid, what);
  reply(h->client, RD_OK, NULL, &h->grant);
  return 1;
}

int rd__job_hold_infeasible(const rd_resources *res, char *why, size_t len) {
  if (rd_res_feasible(&N.ledger, res)) return 0;
  char want[256], have[256], where[400];
  rd_res_format(res, want, sizeof(want));
  rd_res_format(&N.ledger.total, have, sizeof(have));
  rd__cluster_nodes_holding(res, where, sizeof(where));
  snprintf(why, len, "this node has %s in all: the job's %s can never be held here (a job runs on the node it is "
           "submitted to%s)", have, want, where[0] ? where : "; no live node has them");
  return 1;
}

void rd__job_hold_on_request(node_client *c, const Rd__JobHold *m) {
  char why[1300];
  if (c->role != ROLE_KEEPER) {
    rd__node_client_drop(c, "JobHold from a client that is not a job's keeper");
    return;
  }
  if (c->hold) {
    reply(c, RD_ESTATE, "this connection holds resources for a job already (one hold a connection)", NULL);
    return;
  }
  rd_resources res;
  if (!m->res || rd__res_from_msg(m->res, &res) != 0 || rd_res_validate(&res) != 0) {
    reply(c, RD_EINVAL, "invalid resource amounts", NULL);
    return;
  }
  if (rd__job_hold_infeasible(&res, why, sizeof(why))) {
    reply(c, RD_EINFEASIBLE, why, NULL);
    return;
  }
  node_hold *h = calloc(1, sizeof(*h));
  if (!h) {
    reply(c, RD_ENOMEM, "node out of memory", NULL);
    return;
  }
  h->client = c;
  h->job = m->job;
  h->res = res;
  c->hold = h;
  if (try_take(h)) return;   /* now if it fits (what waits before it does not fit now) */
  node_hold **pp = &waiting;
  while (*pp) pp = &(*pp)->next;
  *pp = h;
  reply(c, RD_EAGAIN, "waiting for the node's resources to be free", NULL);
  rd__log(RD_LOG_INFO, "job %u (keeper pid %d) waits for its resources", h->job, c->pid);
}

void rd__job_hold_dispatch(void) {
  for (node_hold **pp = &waiting; *pp;) {   /* in order, the oldest first; one that does not fit is passed over */
    node_hold *h = *pp;
    if (try_take(h)) *pp = h->next;
    else pp = &h->next;
  }
}

void rd__job_hold_client_gone(node_client *c) {
  node_hold *h = c->hold;
  if (!h) return;
  c->hold = NULL;
  if (h->held) {
    rd_res_release(&N.ledger, &h->grant);
    nheld--;
    rd__log(RD_LOG_INFO, "job %u (keeper pid %d) let go of its resources", h->job, c->pid);
    rd__pg_kick();   /* a group waiting for room may fit now; the caller dispatches */
  } else {
    for (node_hold **pp = &waiting; *pp; pp = &(*pp)->next)
      if (*pp == h) {
        *pp = h->next;
        break;
      }
  }
  free(h);
}

void rd__job_hold_counts(uint64_t *held, uint64_t *waits) {
  uint64_t w = 0;
  for (node_hold *h = waiting; h; h = h->next) w++;
  *held = nheld;
  *waits = w;
}
