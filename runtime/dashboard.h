/* runtime/dashboard.h - the node's dashboard (dashboard.c): an HTML page
 * and its JSON twin, served on the metrics port by metrics.c. */
#ifndef RD_RUNTIME_DASHBOARD_H
#define RD_RUNTIME_DASHBOARD_H

#include <uv.h>

#include "metrics.h"

/* Called on the loop with the page (b; the caller frees it after) and its
 * content type. */
typedef void (*rd__dashboard_done)(void *arg, rd__mbuf *b, const char *ctype);

/* Builds the page (json: /api/cluster, else the HTML of /): at once on an
 * embedded cluster, after reading the GCS's tables on the thread pool on a
 * multi-node one.  done is called exactly once, also when the GCS fails
 * (the page then says so).  0 or RD_ENOMEM (done not called). */
int rd__dashboard_request(uv_loop_t *loop, int json, rd__dashboard_done done, void *arg);

/* The objects in this node's store (`raydist memory`, /objects and
 * /api/objects): totals, bytes by owner (the client an object's id names),
 * and the `top` largest with their state, pins and owner.  Text, or JSON. */
void rd__dashboard_objects(rd__mbuf *b, int json, size_t top);

/* Unfinished tasks of the owners on this node (`raydist list tasks`,
 * /tasks and /api/tasks): the `limit` oldest (only those in `state`, or
 * all with -1), with every state's count and each owner's; with
 * `finished` (or `state` RD_TS_FINISHED) the tasks that finished well
 * that the owners keep too, counted, and as rows after the unfinished
 * ones, the last to end first.  done is called
 * once, on the loop: at once when no owner here has tasks live, else when
 * all asked have answered or left, or after 2 s.  0 or RD_ENOMEM (done not
 * called). */
int rd__dashboard_tasks(uv_loop_t *loop, int json, size_t limit, int state, int finished, rd__dashboard_done done,
                        void *arg);

/* The actor records this node keeps (`raydist list actors`, /actors and
 * /api/actors): every state's count and each class's, and the `limit`
 * first (only those in `state`, an RD_AS_* or -1 for all): live ones
 * oldest first, then the dead, most recent first.  Text, or JSON. */
void rd__dashboard_actors(rd__mbuf *b, int json, size_t limit, int state);

/* /api/workers (JSON): this node's worker processes, the last that exited
 * and the drivers connected to it, for the state API's `ray list
 * workers`: {"node", "workers": [{"id", "pid", "state", "job",
 * "launch_ms", "joined_ms", "actor"}], "exited_kept", "exited": [{"id",
 * "pid", "job", "launch_ms", "joined_ms", "end_ms", "exit_type",
 * "exit_detail", "actor"}], "drivers": [{"id", "pid", "job"}]}, at most
 * limit of each. */
void rd__dashboard_workers(rd__mbuf *b, size_t limit);
/* The env sets this node's workers start with (ray list runtime-envs), as
 * JSON for the state API (/api/runtime_envs) and as text (/runtime_envs),
 * at most limit. */
void rd__dashboard_runtime_envs(rd__mbuf *b, size_t limit);
void rd__dashboard_runtime_envs_text(rd__mbuf *b, size_t limit);
/* The same as text (`raydist list workers`): which 0 all, RD_WL_ALIVE the
 * live ones, RD_WL_EXITED those that exited; at most limit of each. */
enum { RD_WL_ALIVE = 1, RD_WL_EXITED = 2 };
void rd__dashboard_workers_text(rd__mbuf *b, size_t limit, int which);
/* ALIVE or EXITED (any case): RD_WL_*, or -1. */
int rd__worker_list_state_parse(const char *s);

#endif
