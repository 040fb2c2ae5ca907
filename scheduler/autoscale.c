/* scheduler/autoscale.c - the autoscaler's policy (see autoscale.h). */
#include "autoscale.h"

#include <math.h>
#include <string.h>

#include "labels.h"

#define MAX_NEW 64   /* nodes started in one round, at most */
#define MIN_PENDING 5   /* an upscaling speed always lets this many start at once (Ray's floor) */

/* Where a STRICT_SPREAD bundle went this round: slot i < nn a node there,
 * nn + k the k-th new one. */
typedef struct as_spread {
  uint64_t group;
  size_t slot;
} as_spread;

/* Whether a bundle of STRICT_SPREAD group g (0: none, never) went to slot
 * this round: then the group's next one goes elsewhere. */
static int spread_taken(const as_spread *s, size_t n, uint64_t g, size_t slot) {
  for (size_t i = 0; g && i < n; i++)
    if (s[i].group == g && s[i].slot == slot) return 1;
  return 0;
}

/* Slot is group g's now (*n entries of s, at most RD_AS_MAX_SPREAD). */
static void spread_add(as_spread *s, size_t *n, uint64_t g, size_t slot) {
  if (*n == RD_AS_MAX_SPREAD || spread_taken(s, *n, g, slot)) return;
  s[*n].group = g;
  s[(*n)++].slot = slot;
}

void rd_as_plan_round(const rd_as_type *types, size_t nt, const rd_as_node *nodes, size_t nn,
                      const rd_as_demand *demand, size_t nd, const rd_resources *req, size_t nreq,
                      const rd_as_opts *o, rd_resources *work, unsigned char *drain, rd_as_plan *out) {
  memset(out, 0, sizeof(*out));
  out->infeasible_example = -1;
  if (nt > RD_AS_MAX_TYPES) nt = RD_AS_MAX_TYPES;
  int count[RD_AS_MAX_TYPES] = {0};   /* each kind's nodes, live or starting, not leaving */
  int nlive = 0, nstarting = 0;
  for (size_t i = 0; i < nn; i++) {
    const rd_as_node *n = &nodes[i];
    int mine = n->type >= 0 && (size_t)n->type < nt;
    work[i] = n->starting && mine ? types[n->type].res : n->avail;
    drain[i] = 0;
    if (mine && !n->draining) count[n->type]++;
    if (n->starting) nstarting++;
    else nlive++;
  }
  rd_resources room[MAX_NEW];   /* the nodes this round starts */
  int room_type[MAX_NEW];
  int nnew = 0, budget = o->max_launch < 0 ? 0 : o->max_launch > MAX_NEW ? MAX_NEW : o->max_launch;
  if (o->upscaling_speed > 0) {   /* starting at once: at most max(5, speed x the nodes there) */
    double cap = ceil(o->upscaling_speed * nlive);
    int pending = cap < MIN_PENDING ? MIN_PENDING : cap > MAX_NEW * 16 ? MAX_NEW * 16 : (int)cap;
    if (budget > pending - nstarting) budget = pending - nstarting > 0 ? pending - nstarting : 0;
  }

  for (size_t t = 0; t < nt; t++)
    while (count[t] + out->launch[t] < types[t].min_workers && nnew < budget) {
      out->launch[t]++;
      room[nnew] = types[t].res;
      room_type[nnew++] = (int)t;
    }

  /* the requested room: onto the totals, then onto new nodes (demand gets
   * what it leaves of them), outside the launch budget */
  rd_resources *whole = work + nn;   /* each node's total as the request is packed */
  for (size_t i = 0; i < nn; i++)
    whole[i] = nodes[i].starting && nodes[i].type >= 0 && (size_t)nodes[i].type < nt ? types[nodes[i].type].res
                                                                                      : nodes[i].total;
  int for_req = 0;
  for (size_t r = 0; r < nreq; r++) {
    int placed = 0;
    for (size_t i = 0; i < nn && !placed; i++)
      if (!nodes[i].draining && rd_res_fits(&whole[i], &req[r])) {
        rd_res_take(&whole[i], &req[r]);
        drain[i] = 2;
        placed = 1;
      }
    for (int k = 0; k < nnew && !placed; k++)
      if (rd_res_fits(&room[k], &req[r])) {
        rd_res_take(&room[k], &req[r]);
        placed = 1;
      }
    for (size_t t = 0; t < nt && !placed && nnew < MAX_NEW; t++) {
      if (!rd_res_fits(&types[t].res, &req[r]) || count[t] + out->launch[t] >= types[t].max_workers) continue;
      out->launch[t]++;
      room[nnew] = types[t].res;
      rd_res_take(&room[nnew], &req[r]);
      room_type[nnew++] = (int)t;
      for_req++;
      placed = 1;
    }
    if (!placed) out->req_unmet++;
  }
  budget = budget + for_req > MAX_NEW ? MAX_NEW : budget + for_req;

  as_spread spread[RD_AS_MAX_SPREAD];
  size_t nspread = 0;
  uint32_t units = 0;
  for (size_t d = 0; d < nd; d++) {
    const rd_resources *shape = &demand[d].shape;
    const char *sel = demand[d].sel;
    uint64_t g = demand[d].spread_group;
    for (size_t a = 0; g && a < demand[d].navoid; a++)   /* its other bundles' nodes: taken */
      for (size_t i = 0; i < nn; i++)
        if (nodes[i].index && nodes[i].index == demand[d].avoid[a]) spread_add(spread, &nspread, g, i);
    for (uint32_t c = 0; c < demand[d].count && units < RD_AS_MAX_UNITS; c++, units++) {
      int placed = 0;
      size_t slot = 0;
      for (size_t i = 0; i < nn && !placed; i++) {
        const rd_as_node *n = &nodes[i];
        if (n->draining || spread_taken(spread, nspread, g, i)) continue;
        const char *labels = n->starting && n->type >= 0 && (size_t)n->type < nt ? types[n->type].labels : n->labels;
        if (!rd_labels_match(labels, sel) || !rd_res_fits(&work[i], shape)) continue;
        rd_res_take(&work[i], shape);
        drain[i] = 2;   /* has work coming: not let go this round */
        placed = 1;
        slot = i;
      }
      for (int k = 0; k < nnew && !placed; k++)
        if (!spread_taken(spread, nspread, g, nn + (size_t)k) && rd_labels_match(types[room_type[k]].labels, sel) &&
            rd_res_fits(&room[k], shape)) {
          rd_res_take(&room[k], shape);
          placed = 1;
          slot = nn + (size_t)k;
        }
      int could = 0;
      for (size_t t = 0; t < nt && !placed; t++) {
        if (!rd_labels_match(types[t].labels, sel) || !rd_res_fits(&types[t].res, shape)) continue;
        could = 1;
        if (count[t] + out->launch[t] >= types[t].max_workers || nnew >= budget) continue;
        out->launch[t]++;
        room[nnew] = types[t].res;
        rd_res_take(&room[nnew], shape);
        slot = nn + (size_t)nnew;
        room_type[nnew++] = (int)t;
        placed = 1;
      }
      if (placed && g) spread_add(spread, &nspread, g, slot);
      if (placed) {
        out->packed++;
      } else if (could) {
        out->capped++;
      } else {
        out->infeasible++;
        if (out->infeasible_example < 0) out->infeasible_example = (int)d;
      }
    }
  }
  out->nlaunch = nnew;

  for (size_t i = 0; i < nn; i++) {
    const rd_as_node *n = &nodes[i];
    int busy = drain[i] == 2;
    drain[i] = 0;
    if (n->type < 0 || (size_t)n->type >= nt || n->starting || n->draining || busy) continue;
    uint64_t timeout = types[n->type].idle_timeout_ms ? types[n->type].idle_timeout_ms : o->idle_timeout_ms;
    if (!n->idle_ms || n->idle_ms < timeout) continue;
    if (count[n->type] <= types[n->type].min_workers) continue;
    drain[i] = 1;
    count[n->type]--;
  }
}
