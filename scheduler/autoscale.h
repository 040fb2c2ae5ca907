/* scheduler/autoscale.h - the autoscaler's policy (Ray's resource demand
 * scheduler): which nodes to start and which to let go, given the kinds
 * of node it may start, the nodes there are and the requests that wait.
 * Pure: no I/O, no clock, no allocation; runtime/autoscaler.c feeds it
 * from the GCS and carries out its plan.
 *
 * Requested room (rd_request_resources) is packed first, onto the nodes'
 * totals (however busy) and then onto new nodes, outside the launch
 * budget; nodes that hold some of it are kept.
 * Demand is packed onto what the cluster has free now and what the
 * nodes already starting will have (first fit, labels matched, a STRICT_SPREAD
 * group's bundles onto distinct nodes, RD_AS_MAX_SPREAD of them a round); what is
 * left starts nodes of the first kind, in the order given, that could run
 * it and is under its max_workers, at most max_launch nodes a round and,
 * with an upscaling speed, at most max(5, speed x the nodes there) starting
 * at once (Ray's upscaling_speed).  Each kind is kept at min_workers.  A
 * node the autoscaler started that has been idle its kind's idle timeout
 * (else idle_timeout_ms), that no waiting request was packed onto, and
 * whose kind stays at min_workers without it, is let go. */
#ifndef RD_SCHEDULER_AUTOSCALE_H
#define RD_SCHEDULER_AUTOSCALE_H

#include <stddef.h>
#include <stdint.h>

#include "resources.h"

#define RD_AS_MAX_TYPES 16
#define RD_AS_MAX_UNITS 10000   /* requests packed in one round; more wait for the next */
#define RD_AS_MAX_SPREAD 512    /* STRICT_SPREAD bundles kept apart in one round; more are packed as others */

typedef struct rd_as_type {
  const char *name;
  rd_resources res;          /* what a node of the kind has */
  const char *labels;        /* its labels, canonical (selectors are matched against them) */
  int min_workers, max_workers;
  uint64_t idle_timeout_ms;  /* its nodes go after this long idle (0: rd_as_opts.idle_timeout_ms) */
} rd_as_type;

typedef struct rd_as_node {
  uint32_t index;            /* a live node's index in the cluster (0: not known, or starting) */
  int type;                  /* index into the kinds; -1: not the autoscaler's */
  int starting;              /* launched, not in the cluster yet: all of its type's resources will be free */
  rd_resources avail;        /* a live node's free resources (its last heartbeat) */
  rd_resources total;        /* a live node's resources */
  const char *labels;        /* a live node's labels */
  uint64_t idle_ms;          /* a live node's idle time (0: busy) */
  int draining;              /* asked to leave already */
} rd_as_node;

typedef struct rd_as_demand {
  rd_resources shape;
  const char *sel;           /* label selector with fallbacks; NULL or "": any node */
  uint32_t count;
  uint64_t spread_group;     /* not 0: a STRICT_SPREAD group's bundles: no two of the same group on one node */
  const uint32_t *avoid;     /* with spread_group: the nodes (rd_as_node.index) holding its other bundles */
  size_t navoid;
} rd_as_demand;

typedef struct rd_as_opts {
  uint64_t idle_timeout_ms;
  int max_launch;            /* nodes started in one round, all kinds together */
  double upscaling_speed;    /* nodes starting at once at most max(5, this x the nodes there); 0: no limit */
} rd_as_opts;

typedef struct rd_as_plan {
  int launch[RD_AS_MAX_TYPES];   /* nodes of each kind to start now */
  int nlaunch;
  uint32_t packed;           /* waiting requests that fit what is free or starting */
  uint32_t capped;           /* ... that a kind could run, but every such kind is at max_workers
                                (or this round started max_launch nodes) */
  uint32_t infeasible;       /* ... that no kind could ever run */
  int infeasible_example;    /* a demand index among those (-1: none) */
  uint32_t req_unmet;        /* requested bundles no node there or startable could hold */
} rd_as_plan;

/* The plan for one round, with req (nreq bundles) the requested room.
 * drain (nn entries) gets 1 for each node to let go.  work (2 * nn entries
 * of rd_resources, the caller's scratch) holds each node's room as demand
 * and the request are packed. */
void rd_as_plan_round(const rd_as_type *types, size_t nt, const rd_as_node *nodes, size_t nn,
                      const rd_as_demand *demand, size_t nd, const rd_resources *req, size_t nreq,
                      const rd_as_opts *o, rd_resources *work, unsigned char *drain, rd_as_plan *out);

#endif /* RD_SCHEDULER_AUTOSCALE_H */
