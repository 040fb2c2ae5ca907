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
 * as it frees.
 *
 * A seeker (JobHold.seek) takes nothing here: it is the mirror of a job
 * submitted through the jobs API whose entrypoint resources no live node
 * has in all but a kind of node the autoscaler can start has (job_http.c).
 * It waits, as part of this node's demand (cluster.c's demand_fill), until
 * a node of the view can hold them, and is then told that node's address,
 * where the mirror runs the job.  That node's room is claimed in this
 * node's view (rd__cluster_claim_at) until its report counts the job, so
 * that jobs sought or placed meanwhile go elsewhere.  A seeker that no node
 * has room for now, and no kind of node the autoscaler can start would
 * hold, is told the node with the fewest jobs waiting on it (the seekers
 * answered with it whose jobs have not started, and here the holds
 * waiting too), so that jobs queued behind busy nodes spread over them
 * rather than all waiting on the first. */
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
  int seek;                 /* JobHold.seek: waits for a node, not for room here */
  char sel[RD_LABEL_SEL_LEN];   /* a seek's label selector ("" none) */
  uint64_t claim;           /* a seek answered with another node: its room claimed in the view */
  char ip[64];              /* a seek answered: the node named */
  int busy;                 /* ... which had no room free for it then: its job waits there, unless moved */
  struct node_hold *next;   /* waiting ones (or seekers, or answered seekers), oldest first */
};

static node_hold *waiting;
static node_hold *seeking;
/* Seekers answered whose mirrors have not let go: each one's job is on
 * its way to, or waits on, the node named (a mirror keeps the seek's
 * connection while its job is PENDING there). */
static node_hold *answered;
static uint64_t nheld;

/* Jobs the jobs API placed here because their resources were free now,
 * whose keepers have not asked for them yet (a moment: the job's keeper
 * starts, connects and sends its JobHold): taken off what
 * rd__job_hold_free_now finds free, so that the next job submitted
 * meanwhile goes where there is room rather than waiting here behind it.
 * A keeper's JobHold ends the oldest promise of the same resources; one
 * whose keeper never asks lapses after PROMISE_NS. */
typedef struct promise {
  rd_resources res;
  uint64_t made_ns;
  struct promise *next;
} promise;
static promise *promised;
#define PROMISE_NS 10000000000ull
/* A seek's claim on the node it names is held until that node's report is
 * this much later than the mirror's submit there (its keeper's JobHold
 * comes a moment after; rd__cluster_claim_held_from). */
#define SEEK_HOLD_SLACK_NS 500000000ull

static void reply(node_client *c, int status, const char *err, const rd_res_grant *g, const char *node_ip) {
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
  r.node_ip = (char *)(node_ip ? node_ip : "");
  rd__node_send(c, RD__MSG_TYPE__MSG_JOB_HOLD_REPLY, &r.base, -1);
}

static int try_take(node_hold *h) {
  if (rd_res_acquire(&N.ledger, &h->res, &h->grant) != 0) return 0;
  char what[256];
  rd_res_format(&h->res, what, sizeof(what));
  h->held = 1;
  nheld++;
  rd__log(RD_LOG_INFO, "job %u (keeper pid %d) holds %s", h->job, h->client->pid, what);
  reply(h->client, RD_OK, NULL, &h->grant, NULL);
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

/* What a seeker asks for, for people: "{CPU: 0, GPU: 1}", and " with
 * labels 'zone=west'" when it has a selector. */
static void seek_what(const rd_resources *res, const char *sel, char *out, size_t len) {
  char r[256];
  rd_res_format(res, r, sizeof(r));
  snprintf(out, len, "%s%s%.300s%s", r, sel[0] ? " with labels '" : "", sel, sel[0] ? "'" : "");
}

/* Does this node have res in all and labels that satisfy sel ("": any)? */
static int fits_here(const rd_resources *res, const char *sel) {
  return rd_res_feasible(&N.ledger, res) && rd_labels_match(N.labels, sel[0] ? sel : NULL);
}

/* Jobs waiting on the node at ip, or on their way there, that this node
 * knows of: seekers it answered with ip whose jobs have not started, and
 * for itself also the holds waiting here (a mirror's job waiting here is
 * counted twice: this node is taken only when it has fewer). */
static int waits_at(const char *ip, void *arg) {
  (void)arg;
  int n = 0;
  for (const node_hold *h = answered; h; h = h->next) n += !strcmp(h->ip, ip);
  if (!strcmp(ip, rd__cluster_ip()))
    for (const node_hold *h = waiting; h; h = h->next) n++;
  return n;
}

/* Where a job needing res (labels sel) that no node has room for now
 * waits: of this node and the other live nodes whose totals hold res, the
 * one with the fewest jobs waiting (waits_at), this one of equals, else the
 * first in the view.  1: another node (its address in ip), 0: this one, -1:
 * none. */
static int wait_where(const rd_resources *res, const char *sel, char *ip, size_t len) {
  int least = 0, other = rd__cluster_node_least(res, sel, waits_at, NULL, ip, len, &least);
  if (fits_here(res, sel) && (!other || waits_at(rd__cluster_ip(), NULL) <= least)) return 0;
  return other ? 1 : -1;
}

int rd__job_hold_wait_here(const rd_resources *res, const char *sel) {
  char ip[64];
  return wait_where(res, sel ? sel : "", ip, sizeof(ip)) == 0;
}

/* Where h's resources are free now: 1 on another node of the view (its
 * address in ip), 2 here (and no hold waits before it), 0 nowhere. */
static int free_now_at(const node_hold *h, char *ip, size_t len) {
  if (rd__cluster_node_free_for(&h->res, h->sel, ip, len)) return 1;
  if (!fits_here(&h->res, h->sel) || !rd__job_hold_free_now(&h->res)) return 0;
  snprintf(ip, len, "%s", rd__cluster_ip());
  return 2;
}

/* h's job goes where free_now_at found room (at): that node's room claimed
 * in the view, or this node's promised. */
static void take_free(node_hold *h, int at, const char *ip) {
  if (at == 1) h->claim = rd__cluster_claim_at(ip, &h->res);
  else rd__job_hold_promise(&h->res);
}

/* A seeker told the node to run its job on, one whose labels satisfy its
 * selector: another live node of the view with its resources free now,
 * else this one if it has them free now; else, while a kind of node the
 * autoscaler can start would hold them, none yet (it waits as demand, as
 * Ray's pending job does, for room on any node or a node started for it);
 * else of the live nodes whose totals hold them, the one with the fewest
 * jobs waiting (waits_at; of equals this one, else the first in the view),
 * where it waits (a mirror whose node went away asks again).  0 when none
 * yet.  The room on another node is claimed in the view, and here
 * promised, so that the next seek or placement before that node reports
 * the job goes elsewhere. */
static int seek_found(node_hold *h) {
  char ip[64], what[600], type[64];
  int at = free_now_at(h, ip, sizeof(ip)), wait;
  if (at) {
    take_free(h, at, ip);
  } else if (rd__cluster_launchable(&h->res, h->sel, type, sizeof(type))) {
    return 0;
  } else if ((wait = wait_where(&h->res, h->sel, ip, sizeof(ip))) == 1) {
    h->claim = rd__cluster_claim_at(ip, &h->res);
    h->busy = 1;
  } else if (wait == 0) {
    snprintf(ip, sizeof(ip), "%s", rd__cluster_ip());
    h->busy = 1;
  } else {
    return 0;
  }
  snprintf(h->ip, sizeof(h->ip), "%s", ip);
  h->next = answered;
  answered = h;
  seek_what(&h->res, h->sel, what, sizeof(what));
  rd__log(RD_LOG_INFO, "job %u (mirror pid %d): node %s can hold its %s", h->job, h->client->pid, ip, what);
  reply(h->client, RD_OK, NULL, NULL, ip);
  return 1;
}

/* A seek that cannot be: neither a live node (this one too) nor a kind
 * the autoscaler can start has res and satisfies sel (c is told why); else
 * 0, and the kind in type. */
static int seek_refused(node_client *c, const rd_resources *res, const char *sel, char *type, size_t tlen) {
  char what[600], ip[64], why[900];
  type[0] = 0;
  if (fits_here(res, sel)) return 0;
  if (!rd__cluster_node_for(res, sel, ip, sizeof(ip)) && !rd__cluster_launchable(res, sel, type, tlen)) {
    seek_what(res, sel, what, sizeof(what));
    snprintf(why, sizeof(why), "no live node, and no kind of node the autoscaler can start, has the job's %s", what);
    reply(c, RD_EINFEASIBLE, why, NULL, NULL);
    return 1;
  }
  return 0;
}

/* Seeker h is answered now, or waits for a view with a node for it. */
static void seek_start(node_hold *h, const char *type) {
  if (seek_found(h)) return;
  node_hold **pp = &seeking;
  while (*pp) pp = &(*pp)->next;
  *pp = h;
  char what[600], why[900], ip[64], kind[64];
  if (!rd__cluster_launchable(&h->res, h->sel, kind, sizeof(kind))) snprintf(kind, sizeof(kind), "%s", type);
  type = kind;
  seek_what(&h->res, h->sel, what, sizeof(what));
  if (fits_here(&h->res, h->sel) || rd__cluster_node_for(&h->res, h->sel, ip, sizeof(ip)))   /* busy, not missing */
    snprintf(why, sizeof(why), "waiting for a node with %s free (live ones are busy), or for the autoscaler to start "
             "a node of type '%s'", what, type);
  else
    snprintf(why, sizeof(why), "waiting for the autoscaler to start a node of type '%s': no live node has %s", type,
             what);
  reply(h->client, RD_EAGAIN, why, NULL, NULL);
  rd__log(RD_LOG_INFO, "job %u (mirror pid %d) %s", h->job, h->client->pid, why);
}

int rd__job_hold_free_now(const rd_resources *res) {
  if (waiting) return 0;
  rd_resources room = N.ledger.avail;
  uint64_t now = rd__now_ns();
  for (promise **pp = &promised; *pp;) {
    promise *p = *pp;
    if (now - p->made_ns > PROMISE_NS) {   /* its keeper never asked */
      *pp = p->next;
      free(p);
      continue;
    }
    if (!rd_res_fits(&room, &p->res)) return 0;
    rd_res_take(&room, &p->res);
    pp = &p->next;
  }
  return rd_res_fits(&room, res);
}

void rd__job_hold_promise(const rd_resources *res) {
  promise *p = malloc(sizeof(*p)), **pp = &promised;
  if (!p) return;   /* the next job may wait here behind it, as without */
  p->res = *res;
  p->made_ns = rd__now_ns();
  p->next = NULL;
  while (*pp) pp = &(*pp)->next;
  *pp = p;
}

void rd__job_hold_free(void) {
  while (promised) {
    promise *p = promised;
    promised = p->next;
    free(p);
  }
}

/* A keeper asks for res: the oldest promise of just that is kept. */
static void promise_kept(const rd_resources *res) {
  for (promise **pp = &promised; *pp; pp = &(*pp)->next) {
    promise *p = *pp;
    if (rd_res_fits(&p->res, res) && rd_res_fits(res, &p->res)) {
      *pp = p->next;
      free(p);
      return;
    }
  }
}

/* Seekers whose jobs wait on a busy node: when room for one comes free
 * first on another node (or here), its mirror is told that node instead
 * (a second answer on its connection), withdraws the job where it waits
 * unless it has started there meanwhile, and runs it there, as a Ray job
 * waiting for its entrypoint resources goes to whichever node frees them
 * first.  Once at most: the node it is told has room now.  The node named
 * first keeps the job's claim in the view, so its own room coming free
 * does not look free to another job (nor make this one move). */
static void seek_move(void) {
  for (node_hold *h = answered; h; h = h->next) {
    char ip[64], what[600];
    int at = h->busy ? free_now_at(h, ip, sizeof(ip)) : 0;
    if (!at || !strcmp(ip, h->ip)) continue;   /* (free where it waits: it starts there) */
    rd__cluster_claim_cancel(h->claim);
    h->claim = 0;
    take_free(h, at, ip);
    h->busy = 0;
    seek_what(&h->res, h->sel, what, sizeof(what));
    rd__log(RD_LOG_INFO, "job %u (mirror pid %d): %s came free on node %s first: told to move there from %s", h->job,
            h->client->pid, what, ip, h->ip);
    snprintf(h->ip, sizeof(h->ip), "%s", ip);
    reply(h->client, RD_OK, NULL, NULL, ip);
  }
}

void rd__job_hold_view_changed(void) {
  for (node_hold **pp = &seeking; *pp;) {
    node_hold *h = *pp, *next = h->next;
    if (seek_found(h)) *pp = next;   /* answered now: its connection (c->hold) keeps it until it ends */
    else pp = &h->next;
  }
  seek_move();
}

void rd__job_hold_seek_each(void (*cb)(void *arg, const rd_resources *res, const char *sel), void *arg) {
  for (const node_hold *h = seeking; h; h = h->next) cb(arg, &h->res, h->sel);
}

void rd__job_hold_on_request(node_client *c, const Rd__JobHold *m) {
  char why[1300];
  if (c->role != ROLE_KEEPER) {
    rd__node_client_drop(c, "JobHold from a client that is not a job's keeper");
    return;
  }
  if (c->hold) {
    reply(c, RD_ESTATE, "this connection holds resources for a job already (one hold a connection)", NULL, NULL);
    return;
  }
  rd_resources res;
  if (!m->res || rd__res_from_msg(m->res, &res) != 0 || rd_res_validate(&res) != 0) {
    reply(c, RD_EINVAL, "invalid resource amounts", NULL, NULL);
    return;
  }
  char type[64], err[300];
  const char *sel = m->label_selector ? m->label_selector : "";
  if (*sel && (!m->seek || strlen(sel) >= RD_LABEL_SEL_LEN || strchr(sel, ';') ||
               rd_label_sel_check(sel, err, sizeof(err)) != 0)) {
    snprintf(why, sizeof(why), "label selector: %s",
             !m->seek ? "only with seek" : strlen(sel) >= RD_LABEL_SEL_LEN ? "too long" : strchr(sel, ';') ? "no fallbacks" : err);
    reply(c, RD_EINVAL, why, NULL, NULL);
    return;
  }
  if (m->seek && seek_refused(c, &res, sel, type, sizeof(type))) return;
  if (!m->seek && rd__job_hold_infeasible(&res, why, sizeof(why))) {
    reply(c, RD_EINFEASIBLE, why, NULL, NULL);
    return;
  }
  node_hold *h = calloc(1, sizeof(*h));
  if (!h) {
    reply(c, RD_ENOMEM, "node out of memory", NULL, NULL);
    return;
  }
  h->client = c;
  h->job = m->job;
  h->res = res;
  h->seek = m->seek;
  snprintf(h->sel, sizeof(h->sel), "%s", sel);
  c->hold = h;
  if (h->seek) {
    seek_start(h, type);
    return;
  }
  promise_kept(&res);
  if (try_take(h)) return;   /* now if it fits (what waits before it does not fit now) */
  node_hold **pp = &waiting;
  while (*pp) pp = &(*pp)->next;
  *pp = h;
  reply(c, RD_EAGAIN, "waiting for the node's resources to be free", NULL, NULL);
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
  /* a mirror keeps its seek's connection until its submit to the node
   * named was answered: that node's keeper holds the room a moment later */
  if (h->claim) rd__cluster_claim_held_from(h->claim, rd__now_ns() + SEEK_HOLD_SLACK_NS);
  if (h->held) {
    rd_res_release(&N.ledger, &h->grant);
    nheld--;
    rd__log(RD_LOG_INFO, "job %u (keeper pid %d) let go of its resources", h->job, c->pid);
    rd__pg_kick();   /* a group waiting for room may fit now; the caller dispatches */
  } else {
    for (node_hold **pp = !h->seek ? &waiting : h->ip[0] ? &answered : &seeking; *pp; pp = &(*pp)->next)
      if (*pp == h) {
        *pp = h->next;
        break;
      }
  }
  free(h);
}

void rd__job_hold_counts(uint64_t *held, uint64_t *waits, uint64_t *seekers) {
  uint64_t w = 0, s = 0;
  for (node_hold *h = waiting; h; h = h->next) w++;
  for (node_hold *h = seeking; h; h = h->next) s++;
  *held = nheld;
  *waits = w;
  *seekers = s;
}
