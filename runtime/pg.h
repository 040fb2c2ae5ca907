/* runtime/pg.h - placement groups in the node daemon.
 *
 * The node where a group is created keeps its record: it proposes where each
 * bundle goes (scheduler/pg_place.c) from its cluster view, reserves them
 * two-phase on the nodes' ledgers (prepare on every node, then commit, or
 * abort everywhere and try again later), publishes the record in the GCS
 * placement-group table, re-reserves bundles lost with a node, and removes
 * the group when asked or when the driver that made it exits.  Any node
 * routes a lease request that names a bundle to the node holding it, using
 * its own records or a copy fetched from the GCS.  Loop thread only. */
#ifndef RD_RUNTIME_PG_H
#define RD_RUNTIME_PG_H

#include <stddef.h>
#include <stdint.h>

#include "conn.h"
#include "gcs_client.h"
#include "metrics.h"
#include "node_internal.h"
#include "raydist.pb-c.h"

/* client messages (node.c) */
void rd__pg_on_create(node_client *c, const Rd__PgCreate *m);
void rd__pg_on_query(node_client *c, const Rd__PgQuery *m);
void rd__pg_on_remove(node_client *c, const Rd__PgRemove *m);
/* A lease request naming a group: queued in its bundle here, forwarded to
 * the bundle's node, parked until the group is reserved, or refused. */
void rd__pg_lease_request(node_client *c, const Rd__LeaseRequest *m, const rd_resources *res, const node_env *env);
/* 1 when req_id of c was parked here (and is now dropped). */
int rd__pg_lease_cancel(node_client *c, uint64_t req_id);
/* Where actor a (a->pg_id set) goes: *b its bundle when that is on this node,
 * else *host the node holding it.  RD_EAGAIN: the group is not reserved yet
 * (a is scheduled again when it is); RD_EPG_REMOVED, RD_ENOENT,
 * RD_EINFEASIBLE, RD_EINVAL with why. */
int rd__pg_actor_bundle(node_actor *a, node_bundle **b, uint32_t *host, char *why, size_t whylen);
/* c is going away (before cluster.c forgets which peer a link was). */
void rd__pg_client_dropped(node_client *c);
/* Every 50 ms: retries reservations, times out waits, refreshes copies. */
void rd__pg_tick(void);
/* Resources came back to this node's ledger, or a new view of the cluster
 * arrived: groups recorded here that wait for room are tried again on the
 * loop's next turn (at most once a millisecond), not at their next retry. */
void rd__pg_kick(void);

/* cluster.c */
int rd__pg_link_frame(node_client *link, const rd__frame *f);
void rd__pg_view_changed(void);
/* The autoscaler's demand from groups recorded here that wait for room:
 * fn(arg, shape, selector, spread_group, avoid, navoid) once per bundle not
 * reserved (a STRICT_PACK group's bundles once, together; a STRICT_SPREAD
 * group's with its id as spread_group, else 0, and the nodes that hold its
 * reserved bundles as avoid). */
void rd__pg_demand_each(void (*fn)(void *arg, const rd_resources *shape, const char *sel, uint64_t spread_group,
                                   const uint32_t *avoid, size_t navoid),
                        void *arg);
/* Bundle `index` of pg reserved here and usable, or NULL. */
node_bundle *rd__pg_bundle_here(uint64_t pg_id, int index);
/* A request forwarded to a bundle's node was refused there as stale:
 * forget the copy so the next request fetches the record again. */
void rd__pg_forget(uint64_t pg_id);
void rd__pg_free(void);
/* The groups recorded here (all of an embedded node's), REMOVED ones kept
 * included, as the GCS's records (bundle nodes 0 when not placed; as_shown:
 * as rd_nodes shows them, 0 for an embedded node's own); malloc'd, *n of
 * them; NULL without memory. */
rd_gcs_pg *rd__pg_records(size_t *n, int as_shown);
/* The groups as `raydist list placement-groups` and `raydist status` print
 * them, into b: "placement groups: N live, M removed" and a row for each
 * in state `only` (0: all; -1: all but REMOVED), at most limit rows. */
void rd__pgs_describe(rd__mbuf *b, const rd_gcs_pg *pgs, size_t n, int only, size_t limit);
/* A group state by name, any case (PENDING, CREATED, RESCHEDULING,
 * REMOVED): RD_GCS_PG_*, or -1. */
int rd__pg_state_parse(const char *s);
/* rd__node_gc: the selectors, jobs and env sets its groups and parked
 * requests hold. */
void rd__pg_held(rd__held *h);

#endif
