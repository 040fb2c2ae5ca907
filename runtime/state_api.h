/* runtime/state_api.h - Ray's state API (`ray list`, `ray get`, `ray
 * summary`) on the node's metrics port, beside the jobs API: GET
 * /api/v0/nodes, /api/v0/actors, /api/v0/tasks, /api/v0/placement_groups
 * and /api/v0/jobs, and /api/v0/tasks/summarize and
 * /api/v0/actors/summarize, answered for the whole cluster in Ray's
 * envelope from the GCS's tables and every live node's /api/actors,
 * /api/tasks and /api/jobs/.  The cluster token guards it as it guards the jobs API (on an
 * embedded node, its own token, and it is its one node). */
#ifndef RD_RUNTIME_STATE_API_H
#define RD_RUNTIME_STATE_API_H

#include <uv.h>

#include "gcs_client.h"
#include "job_http.h"

/* 1 when path (without its query) is the state API's: /api/v0/... */
int rd__state_api_path(const char *path);

/* Serves GET path?query (auth: the Authorization header's value, or NULL).
 * The answer, JSON in Ray's envelope ({"result", "msg", "data"}), comes
 * through reply exactly once, on the loop, maybe before this returns; the
 * cluster is read on the loop's thread pool. */
void rd__state_api(uv_loop_t *loop, const char *method, const char *path, const char *query, const char *auth,
                   rd__http_reply reply, void *arg);

/* This node as the GCS's node table would describe it, for an embedded
 * node's state API (it has no GCS: it is its cluster's one node, index 0).
 * The node's (node.c); on the loop. */
void rd__node_self(rd_gcs_node *x);

#endif
