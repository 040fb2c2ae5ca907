/* scheduler/pg_place.h - where the bundles of a placement group go.
 *
 * Pure policy over a snapshot of the cluster (each node's total and free
 * resources): no I/O; its scratch, kept per thread, grows to the largest
 * snapshot and group it has seen.  The caller reserves what this proposes
 * (two-phase, on the nodes' own ledgers); a proposal made from a stale
 * snapshot simply fails there and is made again. */
#ifndef RD_SCHEDULER_PG_PLACE_H
#define RD_SCHEDULER_PG_PLACE_H

#include <stddef.h>
#include <stdint.h>

#include "resources.h"

#define RD_PG_PLACE_MAX_BUNDLES 4096   /* RD_PG_MAX_BUNDLES */

/* The same numbers as RD_PG_* in raydist.h. */
enum { RD_PG_PLACE_PACK = 0, RD_PG_PLACE_SPREAD = 1, RD_PG_PLACE_STRICT_PACK = 2, RD_PG_PLACE_STRICT_SPREAD = 3 };

typedef struct rd_pg_node {
  uint32_t index;            /* non-zero */
  rd_resources total, avail;
  const char *labels;        /* canonical (labels.h); NULL: none */
} rd_pg_node;

/* Assign each bundle b[i] (i < nb <= RD_PG_PLACE_MAX_BUNDLES) a node index
 * in assign[i].  On entry a non-zero assign[i] is a bundle already reserved
 * there (it keeps its node, and its resources are not in that node's avail
 * any more); zero ones are placed.  Nodes earlier in `nodes` are preferred
 * (callers put their own node first):
 *   PACK          all on one node if one has room, else as few nodes as fit;
 *   SPREAD        each bundle on the node holding fewest of the group's;
 *   STRICT_PACK   all on one node, or not at all;
 *   STRICT_SPREAD each bundle on a different node, or not at all.
 * Returns 0 (assign filled), RD_EAGAIN when the bundles would fit these
 * nodes empty but not now (assign unchanged), RD_EINFEASIBLE when they never
 * can (why says which bundle, and why), RD_EINVAL for bad arguments,
 * RD_ENOMEM when its scratch cannot grow.  Any number of nodes. */
int rd_pg_place(const rd_pg_node *nodes, size_t nn, const rd_resources *b, size_t nb, int strategy,
                uint32_t *assign, char *why, size_t whylen);
/* The same, bundle i going only to a node whose labels match sels[i]
 * (labels.h; checked; NULL or "": any node).  sels NULL: no selectors.
 * A selector may hold alternatives, "primary;fallback;..." (Ray's
 * placement-group fallback_strategy): the group is placed by its first
 * alternative, each bundle's first selector; failing that by its second,
 * each bundle's second (or its last, for a bundle with fewer), and so on.
 * RD_EINFEASIBLE only when no alternative could ever place it; RD_EAGAIN
 * when none places it now. */
int rd_pg_place_sel(const rd_pg_node *nodes, size_t nn, const rd_resources *b, const char *const *sels, size_t nb,
                    int strategy, uint32_t *assign, char *why, size_t whylen);
/* rd_pg_place_sel trying alternative *alt first (then the others in
 * order): a group re-reserved around the bundles it still holds stays
 * with the alternative it was placed by while that fits.  On success the
 * alternative that placed it is in *alt.  alt NULL: from the first. */
int rd_pg_place_alt(const rd_pg_node *nodes, size_t nn, const rd_resources *b, const char *const *sels, size_t nb,
                    int strategy, uint32_t *assign, int *alt, char *why, size_t whylen);

#endif
