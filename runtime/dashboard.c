/* runtime/dashboard.c - the node's dashboard: `GET /` on the metrics port is
 * an HTML page (refreshing itself every 2 s), `GET /api/cluster` the same
 * facts as JSON: this node (resources, workers, tasks, actors, store), the
 * cluster's nodes as this node sees them, and the GCS's named actors,
 * placement groups and jobs.  Any node serves it; each lists the others'
 * dashboards.
 *
 * The GCS tables are read on the thread pool, never on the loop, and a
 * request whose GCS does not answer still gets the node's own part with
 * the error.  Every string from a table is escaped for HTML or JSON: names
 * come from users. */
#include "dashboard.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_cluster.h"
#include "cluster.h"
#include "gcs_client.h"
#include "log_files.h"
#include "node_internal.h"
#include "raydist.h"
#include "raydist/error.h"

typedef struct dash_req {
  uv_work_t work;
  int json;
  rd__dashboard_done done;
  void *arg;
  rd_gcs_actor *actors;
  rd_gcs_pg *pgs;
  rd_gcs_job *jobs;
  size_t nactors, npgs, njobs;
  rd_gcs_code_table code;
  int code_rc;              /* the code table's read (the page goes on without it) */
  int gcs_rc;
  char gcs_err[256];
} dash_req;

/* ------------------------------------------------------------ escaping */

static void put_html(rd__mbuf *b, const char *s) {
  for (; *s; s++) {
    switch (*s) {
      case '<': rd__mbuf_printf(b, "&lt;"); break;
      case '>': rd__mbuf_printf(b, "&gt;"); break;
      case '&': rd__mbuf_printf(b, "&amp;"); break;
      case '"': rd__mbuf_printf(b, "&quot;"); break;
      case '\'': rd__mbuf_printf(b, "&#39;"); break;
      default: rd__mbuf_printf(b, "%c", *s);
    }
  }
}

/* ---------------------------------------------------------- the facts */


typedef struct node_facts {
  rd_resources avail;
  rd__node_census cs;
  rd_store_stats store;
  double uptime_s, run_mean_s, run_p50_s, run_p99_s;
  uint64_t tasks_run;
  uint64_t own_waiting, own_sent;   /* owned by processes here, no result yet */
  double lat_mean_s, lat_p50_s, lat_p99_s;   /* their submit-to-result latency */
} node_facts;

/* The upper bound of the histogram bucket holding quantile q (decades from
 * 10 us, rd__hist_bucket); 0 without samples. */
static double hist_quantile(const rd__hist_acc *h, double q) {
  const uint64_t *buckets = h->buckets, n = h->n;
  if (!n) return 0;
  uint64_t want = (uint64_t)(q * (double)n + 0.5), cum = 0;
  if (want < 1) want = 1;
  double bound = 1e-5;
  for (int i = 0; i < RD_HIST_BUCKETS; i++, bound *= 10) {
    cum += buckets[i];
    if (cum >= want) return bound;
  }
  return bound;
}

static double hist_mean_s(const rd__hist_acc *h) { return h->n ? (double)h->sum_ns / 1e9 / (double)h->n : 0; }

static void gather(node_facts *f) {
  memset(f, 0, sizeof(*f));
  f->avail = rd__node_avail();
  rd__node_census_take(&f->cs);
  rd_store_get_stats(N.store, &f->store);
  f->uptime_s = (double)(rd__now_ns() - N.start_ns) / 1e9;
  f->tasks_run = N.task_run.n;
  f->run_mean_s = hist_mean_s(&N.task_run);
  f->run_p50_s = hist_quantile(&N.task_run, 0.5);
  f->run_p99_s = hist_quantile(&N.task_run, 0.99);
  rd__node_owned(NULL, &f->own_waiting, &f->own_sent, NULL);
  f->lat_mean_s = hist_mean_s(&N.task_lat);
  f->lat_p50_s = hist_quantile(&N.task_lat, 0.5);
  f->lat_p99_s = hist_quantile(&N.task_lat, 0.99);
  rd__fair_tally();
}

/* Indices of N.fns by total run time, longest first (the caller frees). */
static int by_time_desc(const void *a, const void *b) {
  uint64_t x = N.fns[*(const size_t *)a].run.sum_ns, y = N.fns[*(const size_t *)b].run.sum_ns;
  return x < y ? 1 : x > y ? -1 : 0;
}

static size_t *fns_by_time(void) {
  size_t *o = malloc((N.nfns ? N.nfns : 1) * sizeof(*o));
  if (!o) return NULL;
  for (size_t i = 0; i < N.nfns; i++) o[i] = i;
  qsort(o, N.nfns, sizeof(*o), by_time_desc);
  return o;
}


/* The node's submitted jobs (`raydist job`, /api/jobs/), newest first,
 * the last max: JSON objects, or HTML rows. */
static void submitted_jobs(rd__mbuf *b, int json, int max) {
  static int ids[4096];
  int n = rd__cli_job_ids(N.opts.session_dir, ids, 4096), shown = 0;
  for (int i = n - 1; i >= 0 && shown < max; i--) {
    rd_cli_job j;
    if (rd__cli_job_get(N.opts.session_dir, ids[i], &j) != 0) continue;   /* deleted meanwhile */
    double secs = (j.ended && j.end > 0 ? j.end : (double)time(NULL)) - j.start;
    if (json) {
      rd__mbuf_printf(b, "%s{\"id\":%d,\"name\":", shown ? "," : "", j.id);
      rd__mbuf_json_cstr(b, j.name);
      rd__mbuf_printf(b, ",\"state\":");
      rd__mbuf_json_cstr(b, j.state);
      rd__mbuf_printf(b, ",\"pid\":%d,\"start\":%.3f,\"seconds\":%.1f,\"command\":", j.pid, j.start, secs);
      rd__mbuf_json_cstr(b, j.cmd);
      rd__mbuf_printf(b, "}");
    } else {
      rd__mbuf_printf(b, "<tr%s><td>%d</td><td>", j.ended ? " class=\"dead\"" : "", j.id);
      put_html(b, j.name[0] ? j.name : "-");
      rd__mbuf_printf(b, "</td><td>");
      put_html(b, j.state);
      rd__mbuf_printf(b, "</td><td>%d</td><td>%.1f</td><td>", j.pid, secs);
      put_html(b, j.cmd);
      rd__mbuf_printf(b, "</td></tr>\n");
    }
    shown++;
  }
}

/* The mean submit-to-result latency of what a job's processes here submitted. */
static double job_lat_mean_s(const node_job *j) {
  return j->owned_settled ? (double)j->owned_ns / 1e9 / (double)j->owned_settled : 0.0;
}

/* A job worth showing: it has drivers, workers or requests here. */
static int job_shown(const node_job *j) { return j->drivers || j->nworkers || j->waiting || j->held.cpu || j->held.gpu; }

static double u(int64_t v) { return rd_res_to_double(v); }

/* ---------------------------------------------------------------- JSON */

static void json_res(rd__mbuf *b, const rd_resources *r, const rd_resources *names) {
  rd__mbuf_printf(b, "{\"CPU\":%g,\"GPU\":%g,\"memory\":%lld", u(r->cpu), u(r->gpu), (long long)r->memory);
  for (int i = 0; i < names->ncustom; i++) {
    rd__mbuf_printf(b, ",");
    rd__mbuf_json_cstr(b, names->custom[i].name);
    rd__mbuf_printf(b, ":%g", u(rd_res_get_custom(r, names->custom[i].name)));
  }
  rd__mbuf_printf(b, "}");
}

static void render_json(rd__mbuf *b, const dash_req *q, const node_facts *f) {
  const rd_resources *tot = &N.ledger.total;
  rd__mbuf_printf(b, "{\"node\":{\"index\":%u,\"ip\":", rd__cluster_index());
  rd__mbuf_json_cstr(b, N.opts.node_ip && *N.opts.node_ip ? N.opts.node_ip : "127.0.0.1");
  rd__mbuf_printf(b, ",\"uptime_s\":%.3f,\"resources\":{\"total\":", f->uptime_s);
  json_res(b, tot, tot);
  rd__mbuf_printf(b, ",\"available\":");
  json_res(b, &f->avail, tot);
  rd__mbuf_printf(b, "},\"workers\":{");
  for (int s = W_STARTING; s <= W_DYING; s++) rd__mbuf_printf(b, "\"%s\":%d,", rd__worker_state_names[s], f->cs.workers[s]);
  rd__mbuf_printf(b, "\"blocked\":%d},\"drivers\":%d,\"actors\":{", f->cs.blocked, f->cs.drivers);
  for (int s = A_PENDING; s <= A_DEAD; s++) rd__mbuf_printf(b, "%s\"%s\":%d", s ? "," : "", rd__actor_state_names[s], f->cs.actors[s]);
  rd__mbuf_printf(b, "},\"tasks\":{\"run\":%llu,\"failed\":%llu,\"run_mean_s\":%.6f,\"run_p50_s_at_most\":%g,"
                     "\"run_p99_s_at_most\":%g},",
                  (unsigned long long)f->tasks_run, (unsigned long long)N.task_run.failed, f->run_mean_s, f->run_p50_s,
                  f->run_p99_s);
  rd__mbuf_printf(b, "\"owned_tasks\":{\"waiting\":%llu,\"sent\":%llu,\"settled\":%llu,\"failed\":%llu,"
                     "\"latency_mean_s\":%.6f,\"latency_p50_s_at_most\":%g,\"latency_p99_s_at_most\":%g},",
                  (unsigned long long)f->own_waiting, (unsigned long long)f->own_sent,
                  (unsigned long long)N.task_lat.n, (unsigned long long)N.task_lat.failed, f->lat_mean_s, f->lat_p50_s,
                  f->lat_p99_s);
  rd__mbuf_printf(b, "\"store\":{\"capacity\":%llu,\"used\":%llu,\"objects\":%llu,\"spilled_objects\":%llu,"
                     "\"spilled_bytes\":%llu,\"fallback_used\":%llu,\"fallback_objects\":%llu,\"fallback_limit\":%llu},"
                     "\"leases_granted\":%llu,\"fair_share_yields\":%llu,\"memory_kills\":%llu}",
                  (unsigned long long)f->store.capacity, (unsigned long long)f->store.used,
                  (unsigned long long)f->store.num_in_memory, (unsigned long long)f->store.num_spilled,
                  (unsigned long long)f->store.bytes_spilled, (unsigned long long)f->store.fallback_used,
                  (unsigned long long)f->store.num_fallback, (unsigned long long)f->store.fallback_limit,
                  (unsigned long long)N.leases_granted,
                  (unsigned long long)N.fair_yields, (unsigned long long)N.mem_kills);
  /* the jobs that use this node, with their fair share (docs/scheduler.md) */
  rd__mbuf_printf(b, ",\"node_jobs\":[");
  int first = 1;
  for (const node_job *j = N.jobs; j; j = j->next) {
    if (!job_shown(j)) continue;
    rd__mbuf_printf(b, "%s{\"id\":%u,\"gcs_job\":%u,\"exe\":", first ? "" : ",", j->id, j->gcs_job_id);
    rd__mbuf_json_cstr(b, j->exe);
    /* a variant: the workers of job env_of with env_vars variables (rd_task_opts.env) */
    if (j->base) rd__mbuf_printf(b, ",\"env_of\":%u,\"env_vars\":%zu", j->base->id, j->env->n);
    rd__mbuf_printf(b, ",\"drivers\":%d,\"workers\":%d,\"weight\":%g,\"held\":", j->drivers, j->nworkers, j->weight);
    json_res(b, &j->held, &j->held);
    uint64_t ow, os;
    rd__node_owned(j, &ow, &os, NULL);
    rd__mbuf_printf(b, ",\"share\":%.4f,\"waiting\":%d,\"yields\":%llu,\"tasks_run\":%llu,\"tasks_failed\":%llu,"
                       "\"run_s\":%.6f,\"owned_waiting\":%llu,\"owned_sent\":%llu,\"owned_settled\":%llu,"
                       "\"owned_failed\":%llu,\"latency_mean_s\":%.6f}",
                    j->share, j->waiting, (unsigned long long)j->yields, (unsigned long long)j->runs,
                    (unsigned long long)j->runs_failed, (double)j->run_ns / 1e9, (unsigned long long)ow,
                    (unsigned long long)os, (unsigned long long)j->owned_settled, (unsigned long long)j->owned_failed,
                    job_lat_mean_s(j));
    first = 0;
  }
  rd__mbuf_printf(b, "]");
  /* the jobs submitted to this node (raydist job, /api/jobs/), the last 100 */
  rd__mbuf_printf(b, ",\"submitted_jobs\":[");
  submitted_jobs(b, 1, 100);
  rd__mbuf_printf(b, "]");
  /* run times by function, longest total first */
  rd__mbuf_printf(b, ",\"functions\":[");
  size_t *order = fns_by_time();
  for (size_t k = 0; order && k < N.nfns; k++) {
    const rd__fn_metric *fn = &N.fns[order[k]];
    rd__mbuf_printf(b, "%s{\"name\":", k ? "," : "");
    rd__mbuf_json_cstr(b, fn->name);
    rd__mbuf_printf(b, ",\"calls\":%llu,\"failed\":%llu,\"total_s\":%.6f,\"mean_s\":%.6f,\"p50_s_at_most\":%g,"
                       "\"p99_s_at_most\":%g,\"submitted\":%llu,\"submitted_failed\":%llu,\"latency_mean_s\":%.6f,"
                       "\"latency_p99_s_at_most\":%g}",
                    (unsigned long long)fn->run.n, (unsigned long long)fn->run.failed, (double)fn->run.sum_ns / 1e9,
                    hist_mean_s(&fn->run), hist_quantile(&fn->run, 0.5), hist_quantile(&fn->run, 0.99),
                    (unsigned long long)fn->lat.n, (unsigned long long)fn->lat.failed, hist_mean_s(&fn->lat),
                    hist_quantile(&fn->lat, 0.99));
  }
  free(order);
  rd__mbuf_printf(b, "]");
  if (!rd__cluster_on()) {
    rd__mbuf_printf(b, ",\"cluster\":null}\n");
    return;
  }
  size_t nn = 0;
  const rd_gcs_node *nodes = rd__cluster_view(&nn);
  rd__mbuf_printf(b, ",\"cluster\":{\"nodes\":[");
  for (size_t i = 0; i < nn; i++) {
    const rd_gcs_node *x = &nodes[i];
    rd__mbuf_printf(b, "%s{\"index\":%u,\"ip\":", i ? "," : "", x->index);
    rd__mbuf_json_cstr(b, x->ip);
    rd__mbuf_printf(b, ",\"head\":%s,\"state\":\"%s\",\"death_reason\":", x->is_head ? "true" : "false",
                    x->state == RD_GCS_NODE_ALIVE ? "alive" : "dead");
    rd__mbuf_json_cstr(b, x->death_reason);
    rd__mbuf_printf(b, ",\"total\":");
    json_res(b, &x->total, &x->total);
    rd__mbuf_printf(b, ",\"available\":");
    json_res(b, &x->avail, &x->total);
    rd__mbuf_printf(b, ",\"store_used\":%llu,\"store_capacity\":%llu,\"pending\":%lld,\"ms_since_heartbeat\":%llu",
                    (unsigned long long)x->store_used, (unsigned long long)x->store_capacity, (long long)x->pending,
                    (unsigned long long)x->ms_since_heartbeat);
    if (x->metrics_port > 0) rd__mbuf_printf(b, ",\"dashboard\":\"http://%s:%d/\"", x->ip, x->metrics_port);
    rd__mbuf_printf(b, ",\"labels\":");
    rd__mbuf_json_cstr(b, x->labels);
    rd__mbuf_printf(b, "}");
  }
  rd__mbuf_printf(b, "],\"gcs_error\":");
  if (q->gcs_rc) rd__mbuf_json_cstr(b, q->gcs_err);
  else rd__mbuf_printf(b, "null");
  rd__mbuf_printf(b, ",\"actors\":[");
  for (size_t i = 0; i < q->nactors; i++) {
    const rd_gcs_actor *a = &q->actors[i];
    rd__mbuf_printf(b, "%s{\"id\":\"%016" PRIx64 "\",\"name\":", i ? "," : "", a->actor_id);
    rd__mbuf_json_cstr(b, a->name);
    rd__mbuf_printf(b, ",\"class\":");
    rd__mbuf_json_cstr(b, a->class_name);
    rd__mbuf_printf(b, ",\"node\":%u,\"state\":\"%s\",\"reason\":", a->node_index,
                    rd_gcs_actor_state_name(a->state));
    rd__mbuf_json_cstr(b, a->reason);
    rd__mbuf_printf(b, "}");
  }
  rd__mbuf_printf(b, "],\"placement_groups\":[");
  for (size_t i = 0; i < q->npgs; i++) {
    const rd_gcs_pg *p = &q->pgs[i];
    rd__mbuf_printf(b, "%s{\"id\":\"%016" PRIx64 "\",\"name\":", i ? "," : "", p->pg_id);
    rd__mbuf_json_cstr(b, p->name);
    rd__mbuf_printf(b, ",\"strategy\":\"%s\",\"state\":\"%s\",\"bundle_nodes\":[",
                    rd_gcs_pg_strategy_name(p->strategy),
                    rd_gcs_pg_state_name(p->state));
    for (size_t k = 0; k < p->nbundles; k++) rd__mbuf_printf(b, "%s%u", k ? "," : "", p->bundle_nodes[k]);
    rd__mbuf_printf(b, "],\"reason\":");
    rd__mbuf_json_cstr(b, p->reason);
    rd__mbuf_printf(b, "}");
  }
  rd__mbuf_printf(b, "],\"jobs\":[");
  for (size_t i = 0; i < q->njobs; i++) {
    const rd_gcs_job *j = &q->jobs[i];
    rd__mbuf_printf(b, "%s{\"id\":%u,\"node\":%u,\"driver_pid\":%d,\"code\":", i ? "," : "", j->job_id, j->node_index,
                    j->driver_pid);
    rd__mbuf_json_cstr(b, j->code_hash);
    rd__mbuf_printf(b, ",\"start_ms\":%llu,\"end_ms\":%llu,\"end_reason\":", (unsigned long long)j->start_ms,
                    (unsigned long long)j->end_ms);
    rd__mbuf_json_cstr(b, j->end_reason);
    rd__mbuf_printf(b, "}");
  }
  rd__mbuf_printf(b, "],\"code\":");
  if (q->code_rc) {
    rd__mbuf_printf(b, "null");
  } else {   /* the GCS code table (docs/gcs.md#code) */
    uint64_t bytes;
    size_t used;
    rd_gcs_code_sum(&q->code, &bytes, &used);
    rd__mbuf_printf(b, "{\"blobs\":%zu,\"bytes\":%llu,\"in_use\":%zu,\"collected\":%llu,\"collected_bytes\":%llu,"
                       "\"ttl_s\":%g}",
                    q->code.n, (unsigned long long)bytes, used, (unsigned long long)q->code.collected,
                    (unsigned long long)q->code.collected_bytes, q->code.ttl_ms / 1000.0);
  }
  rd__mbuf_printf(b, "}}\n");
}

/* ---------------------------------------------------------------- HTML */

static void html_res(rd__mbuf *b, const rd_resources *tot, const rd_resources *av) {
  rd__mbuf_printf(b, "CPU %g/%g, GPU %g/%g", u(tot->cpu - av->cpu), u(tot->cpu), u(tot->gpu - av->gpu), u(tot->gpu));
  for (int i = 0; i < tot->ncustom; i++) {
    rd__mbuf_printf(b, ", ");
    put_html(b, tot->custom[i].name);
    int64_t t = tot->custom[i].amount;
    rd__mbuf_printf(b, " %g/%g", u(t - rd_res_get_custom(av, tot->custom[i].name)), u(t));
  }
}

static void render_html(rd__mbuf *b, const dash_req *q, const node_facts *f) {
  const rd_resources *tot = &N.ledger.total;
  const char *ip = N.opts.node_ip && *N.opts.node_ip ? N.opts.node_ip : "127.0.0.1";
  rd__mbuf_printf(b, "<!doctype html>\n<html><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"2\">"
                     "<title>raydist node %u</title><style>body{font-family:sans-serif;margin:1.5em}"
                     "table{border-collapse:collapse;margin-bottom:1em}td,th{border:1px solid #ccc;padding:2px 8px;"
                     "text-align:left}th{background:#eee}.dead{color:#999}</style></head><body>\n",
                  rd__cluster_index());
  rd__mbuf_printf(b, "<h1>raydist node %u (", rd__cluster_index());
  put_html(b, ip);
  rd__mbuf_printf(b, ")</h1>\n<p>up %.0f s &middot; <a href=\"/metrics\">metrics</a> &middot; "
                     "<a href=\"/timeline\">timeline</a> &middot; <a href=\"/tasks\">tasks</a> &middot; "
                     "<a href=\"/actors\">actors</a> &middot; <a href=\"/objects\">objects</a> &middot; "
                     "<a href=\"/api/cluster\">JSON</a></p>\n",
                  f->uptime_s);
  rd__mbuf_printf(b, "<h2>This node</h2>\n<table id=\"node\">\n<tr><th>resources used/total</th><td>");
  html_res(b, tot, &f->avail);
  rd__mbuf_printf(b, ", memory %lld/%lld MiB</td></tr>\n<tr><th>workers</th><td>",
                  (long long)((tot->memory - f->avail.memory) >> 20), (long long)(tot->memory >> 20));
  for (int s = W_STARTING; s <= W_DYING; s++) rd__mbuf_printf(b, "%s %d, ", rd__worker_state_names[s], f->cs.workers[s]);
  rd__mbuf_printf(b, "blocked %d; drivers %d</td></tr>\n<tr><th>tasks and actor calls run</th><td>%llu (failed %llu); "
                     "mean %.3g s, p50 &le; %g s, p99 &le; %g s</td></tr>\n"
                     "<tr><th>tasks and actor calls submitted here</th><td>%llu waiting, %llu sent to workers; "
                     "%llu done (failed %llu), submit to result: mean %.3g s, p50 &le; %g s, p99 &le; %g s</td></tr>\n"
                     "<tr><th>actors</th><td>",
                  f->cs.blocked, f->cs.drivers, (unsigned long long)f->tasks_run, (unsigned long long)N.task_run.failed,
                  f->run_mean_s, f->run_p50_s, f->run_p99_s, (unsigned long long)f->own_waiting,
                  (unsigned long long)f->own_sent, (unsigned long long)N.task_lat.n, (unsigned long long)N.task_lat.failed,
                  f->lat_mean_s, f->lat_p50_s, f->lat_p99_s);
  for (int s = A_PENDING; s <= A_DEAD; s++) rd__mbuf_printf(b, "%s%s %d", s ? ", " : "", rd__actor_state_names[s], f->cs.actors[s]);
  rd__mbuf_printf(b, "</td></tr>\n<tr><th>object store</th><td>%.1f/%.1f MiB, %llu objects in memory, %llu spilled "
                     "(%.1f MiB)</td></tr>\n<tr><th>memory monitor kills</th><td>%llu</td></tr>\n</table>\n",
                  f->store.used / 1048576.0, f->store.capacity / 1048576.0, (unsigned long long)f->store.num_in_memory,
                  (unsigned long long)f->store.num_spilled, f->store.bytes_spilled / 1048576.0,
                  (unsigned long long)N.mem_kills);
  rd__mbuf_printf(b, "<h2>Jobs on this node</h2>\n<table id=\"node_jobs\">\n<tr><th>job</th><th>executable</th>"
                     "<th>drivers</th><th>workers</th><th>weight</th><th>holds</th><th>fair share</th>"
                     "<th>requests waiting</th><th>leases asked back</th><th>tasks run here (failed), s</th>"
                     "<th>submitted here: waiting, sent, done (failed), mean latency s</th></tr>\n");
  for (const node_job *j = N.jobs; j; j = j->next) {
    if (!job_shown(j)) continue;
    rd__mbuf_printf(b, "<tr><td>%u</td><td>", j->id);
    put_html(b, j->exe);
    if (j->base) rd__mbuf_printf(b, " (workers of job %u with %zu environment variables)", j->base->id, j->env->n);
    uint64_t ow, os;
    rd__node_owned(j, &ow, &os, NULL);
    rd__mbuf_printf(b, "</td><td>%d</td><td>%d</td><td>%g</td><td>CPU %g, GPU %g</td><td>%.3f</td><td>%d</td>"
                       "<td>%llu</td><td>%llu (%llu), %.3f</td><td>%llu, %llu, %llu (%llu), %.3g</td></tr>\n",
                    j->drivers, j->nworkers, j->weight, u(j->held.cpu), u(j->held.gpu), j->share, j->waiting,
                    (unsigned long long)j->yields, (unsigned long long)j->runs, (unsigned long long)j->runs_failed,
                    (double)j->run_ns / 1e9, (unsigned long long)ow, (unsigned long long)os,
                    (unsigned long long)j->owned_settled, (unsigned long long)j->owned_failed,
                    job_lat_mean_s(j));
  }
  rd__mbuf_printf(b, "</table>\n");
  rd__mbuf_printf(b, "<h2>Jobs submitted here (raydist job, /api/jobs/)</h2>\n<table id=\"submitted_jobs\">\n"
                     "<tr><th>id</th><th>name</th><th>state</th><th>pid</th><th>seconds</th><th>command</th></tr>\n");
  submitted_jobs(b, 0, 20);   /* the last 20 */
  rd__mbuf_printf(b, "</table>\n");
  /* the functions that took the most time here (all of them in the JSON) */
  enum { FN_ROWS = 50 };
  rd__mbuf_printf(b, "<h2>Functions on this node</h2>\n<table id=\"functions\">\n<tr><th>function</th><th>calls</th>"
                     "<th>failed</th><th>total s</th><th>mean s</th><th>p50 &le; s</th><th>p99 &le; s</th>"
                     "<th>submitted here</th><th>submit to result: mean s</th><th>p99 &le; s</th></tr>\n");
  size_t *order = fns_by_time();
  for (size_t k = 0; order && k < N.nfns && k < FN_ROWS; k++) {
    const rd__fn_metric *fn = &N.fns[order[k]];
    rd__mbuf_printf(b, "<tr><td>");
    put_html(b, fn->name);
    rd__mbuf_printf(b, "</td><td>%llu</td><td>%llu</td><td>%.3f</td><td>%.3g</td><td>%g</td><td>%g</td><td>%llu</td>"
                       "<td>%.3g</td><td>%g</td></tr>\n",
                    (unsigned long long)fn->run.n, (unsigned long long)fn->run.failed, (double)fn->run.sum_ns / 1e9,
                    hist_mean_s(&fn->run), hist_quantile(&fn->run, 0.5), hist_quantile(&fn->run, 0.99),
                    (unsigned long long)fn->lat.n, hist_mean_s(&fn->lat), hist_quantile(&fn->lat, 0.99));
  }
  if (N.nfns > FN_ROWS) rd__mbuf_printf(b, "<tr><td colspan=\"10\">%zu more in the JSON</td></tr>\n", N.nfns - FN_ROWS);
  free(order);
  rd__mbuf_printf(b, "</table>\n");
  if (!rd__cluster_on()) {
    rd__mbuf_printf(b, "<p>An embedded single-node cluster.</p>\n</body></html>\n");
    return;
  }
  size_t nn = 0, alive = 0;
  const rd_gcs_node *nodes = rd__cluster_view(&nn);
  for (size_t i = 0; i < nn; i++) alive += nodes[i].state == RD_GCS_NODE_ALIVE;
  rd__mbuf_printf(b, "<h2>Cluster: %zu nodes alive, %zu dead</h2>\n<table id=\"nodes\">\n<tr><th>node</th><th>ip</th>"
                     "<th>head</th><th>state</th><th>resources used/total</th><th>store MiB</th><th>pending</th>"
                     "<th>heartbeat</th><th>labels</th></tr>\n", alive, nn - alive);
  for (size_t i = 0; i < nn; i++) {
    const rd_gcs_node *x = &nodes[i];
    int up = x->state == RD_GCS_NODE_ALIVE;
    rd__mbuf_printf(b, "<tr%s><td>", up ? "" : " class=\"dead\"");
    if (up && x->metrics_port > 0) {
      rd__mbuf_printf(b, "<a href=\"http://");
      put_html(b, x->ip);
      rd__mbuf_printf(b, ":%d/\">%u</a>", x->metrics_port, x->index);
    } else {
      rd__mbuf_printf(b, "%u", x->index);
    }
    rd__mbuf_printf(b, "</td><td>");
    put_html(b, x->ip);
    rd__mbuf_printf(b, "</td><td>%s</td><td>%s", x->is_head ? "yes" : "", up ? "alive" : "dead: ");
    if (!up) put_html(b, x->death_reason);
    rd__mbuf_printf(b, "</td><td>");
    html_res(b, &x->total, &x->avail);
    rd__mbuf_printf(b, "</td><td>%.0f/%.0f</td><td>%lld</td><td>%.1f s ago</td><td>", x->store_used / 1048576.0,
                    x->store_capacity / 1048576.0, (long long)x->pending, x->ms_since_heartbeat / 1000.0);
    put_html(b, x->labels);
    rd__mbuf_printf(b, "</td></tr>\n");
  }
  rd__mbuf_printf(b, "</table>\n");
  if (q->gcs_rc) {
    rd__mbuf_printf(b, "<p><b>The GCS did not answer:</b> ");
    put_html(b, q->gcs_err);
    rd__mbuf_printf(b, "</p>\n");
  }
  size_t live = 0;
  for (size_t i = 0; i < q->nactors; i++) live += q->actors[i].state != RD_GCS_ACTOR_DEAD;
  rd__mbuf_printf(b, "<h2>Named actors: %zu live, %zu dead</h2>\n<table id=\"actors\">\n<tr><th>id</th><th>name</th>"
                     "<th>class</th><th>node</th><th>state</th></tr>\n", live, q->nactors - live);
  for (size_t i = 0; i < q->nactors; i++) {
    const rd_gcs_actor *a = &q->actors[i];
    if (a->state == RD_GCS_ACTOR_DEAD) continue;
    rd__mbuf_printf(b, "<tr><td>%016" PRIx64 "</td><td>", a->actor_id);
    put_html(b, a->name);
    rd__mbuf_printf(b, "</td><td>");
    put_html(b, a->class_name);
    rd__mbuf_printf(b, "</td><td>%u</td><td>%s</td></tr>\n", a->node_index,
                    rd_gcs_actor_state_name(a->state));
  }
  live = 0;
  for (size_t i = 0; i < q->npgs; i++) live += q->pgs[i].state != RD_GCS_PG_REMOVED;
  rd__mbuf_printf(b, "</table>\n<h2>Placement groups: %zu live, %zu removed</h2>\n<table id=\"pgs\">\n<tr><th>id</th>"
                     "<th>name</th><th>strategy</th><th>state</th><th>bundle nodes</th></tr>\n", live, q->npgs - live);
  for (size_t i = 0; i < q->npgs; i++) {
    const rd_gcs_pg *p = &q->pgs[i];
    if (p->state == RD_GCS_PG_REMOVED) continue;
    rd__mbuf_printf(b, "<tr><td>%016" PRIx64 "</td><td>", p->pg_id);
    put_html(b, p->name[0] ? p->name : "-");
    rd__mbuf_printf(b, "</td><td>%s</td><td>%s</td><td>", rd_gcs_pg_strategy_name(p->strategy),
                    rd_gcs_pg_state_name(p->state));
    for (size_t k = 0; k < p->nbundles; k++) rd__mbuf_printf(b, "%s%u", k ? " " : "", p->bundle_nodes[k]);
    rd__mbuf_printf(b, "</td></tr>\n");
  }
  live = 0;
  for (size_t i = 0; i < q->njobs; i++) live += q->jobs[i].end_ms == 0;
  rd__mbuf_printf(b, "</table>\n<h2>Jobs: %zu running, %zu ended</h2>\n<table id=\"jobs\">\n<tr><th>job</th>"
                     "<th>node</th><th>driver pid</th><th>code</th><th>state</th></tr>\n", live, q->njobs - live);
  for (size_t i = q->njobs; i-- > 0;) {   /* newest first, the last 20 */
    const rd_gcs_job *j = &q->jobs[i];
    if (q->njobs - i > 20) break;
    rd__mbuf_printf(b, "<tr%s><td>%u</td><td>%u</td><td>%d</td><td>%.16s</td><td>", j->end_ms ? " class=\"dead\"" : "",
                    j->job_id, j->node_index, j->driver_pid, j->code_hash[0] ? j->code_hash : "-");
    if (j->end_ms) {
      rd__mbuf_printf(b, "ended after %.1f s: ", (j->end_ms - j->start_ms) / 1000.0);
      put_html(b, j->end_reason);
    } else {
      rd__mbuf_printf(b, "running");
    }
    rd__mbuf_printf(b, "</td></tr>\n");
  }
  rd__mbuf_printf(b, "</table>\n");
  if (!q->code_rc) {
    char line[300];
    rd_gcs_code_describe(&q->code, line, sizeof(line));
    rd__mbuf_printf(b, "<p id=\"code\">GCS code table: ");
    put_html(b, line);
    rd__mbuf_printf(b, "</p>\n");
  }
  rd__mbuf_printf(b, "</body></html>\n");
}

/* ------------------------------------------------------------- requests */

static void gcs_work(uv_work_t *w) {
  dash_req *q = w->data;
  rd_gcs *g = rd__cluster_gcs();
  if (!g) {
    q->gcs_rc = RD_ESTATE;
    snprintf(q->gcs_err, sizeof(q->gcs_err), "not connected to a GCS");
    return;
  }
  q->gcs_rc = rd_gcs_actor_list(g, &q->actors, &q->nactors);
  if (!q->gcs_rc) q->gcs_rc = rd_gcs_pg_list(g, &q->pgs, &q->npgs);
  if (!q->gcs_rc) q->gcs_rc = rd_gcs_job_list(g, &q->jobs, &q->njobs);
  q->code_rc = q->gcs_rc ? q->gcs_rc : rd_gcs_code_list(g, &q->code);
  if (q->gcs_rc) snprintf(q->gcs_err, sizeof(q->gcs_err), "%s (%s)", rd_gcs_last_error(), rd_err_name(q->gcs_rc));
}

static void finish(dash_req *q) {
  node_facts f;
  gather(&f);
  rd__mbuf b = {0};
  if (q->json) render_json(&b, q, &f);
  else render_html(&b, q, &f);
  q->done(q->arg, &b, q->json ? "application/json" : "text/html; charset=utf-8");
  free(b.p);
  free(q->actors);
  free(q->pgs);
  free(q->jobs);
  free(q->code.code);
  free(q);
}

static void gcs_done(uv_work_t *w, int status) {
  dash_req *q = w->data;
  if (status != 0 && !q->gcs_rc) {
    q->gcs_rc = RD_ECANCELED;
    snprintf(q->gcs_err, sizeof(q->gcs_err), "cancelled");
  }
  finish(q);
}

int rd__dashboard_request(uv_loop_t *loop, int json, rd__dashboard_done done, void *arg) {
  dash_req *q = calloc(1, sizeof(*q));
  if (!q) return RD_ENOMEM;
  q->json = json;
  q->done = done;
  q->arg = arg;
  q->code_rc = RD_ESTATE;
  if (!rd__cluster_on()) {
    finish(q);
    return 0;
  }
  q->work.data = q;
  if (uv_queue_work(loop, &q->work, gcs_work, gcs_done) != 0) {
    q->gcs_rc = RD_ESYS;
    snprintf(q->gcs_err, sizeof(q->gcs_err), "cannot queue the GCS reads");
    finish(q);
  }
  return 0;
}

/* ------------------------------------------------------- store objects */

/* Who client id is, seen from this node. */
/* "driver pid N", "worker pid N" or "node link pid N": a client of this node. */
static const char *role_name(int role) {
  return role == ROLE_DRIVER ? "driver" : role == ROLE_WORKER ? "worker" : "node link";
}

static void client_text(int role, int pid, char *out, size_t len) { snprintf(out, len, "%s pid %d", role_name(role), pid); }

static void owner_text(uint32_t client, char *out, size_t len) {
  uint32_t node = rd__client_node(client);
  if (node != rd__cluster_index()) {
    snprintf(out, len, "a client of node %u", node);
    return;
  }
  node_client *c = rd__node_client_by_id(client);
  if (!c) snprintf(out, len, "client %u (gone)", client & ((1u << RD_CLIENT_NODE_SHIFT) - 1));
  else client_text(c->role, c->pid, out, len);
}

static int by_size_desc(const void *a, const void *b) {
  const rd_store_obj_info *x = a, *y = b;
  return x->size < y->size ? 1 : x->size > y->size ? -1 : x->id < y->id ? -1 : x->id > y->id;
}

typedef struct owner_sum {
  uint32_t client;
  uint64_t objects, bytes;
} owner_sum;

static int owner_desc(const void *a, const void *b) {
  const owner_sum *x = a, *y = b;
  return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : (x->client > y->client) - (x->client < y->client);
}

#define OBJ_OWNERS_MAX 256

static const char *obj_state(const rd_store_obj_info *o) {
  return !o->sealed ? "unsealed" : o->spilled ? "spilled" : o->fallback ? "fallback" : "memory";
}

void rd__dashboard_objects(rd__mbuf *b, int json, size_t top) {
  size_t n = rd_store_list(N.store, NULL, 0);
  rd_store_obj_info *v = n ? malloc(n * sizeof(*v)) : NULL;
  if (n && !v) {
    b->oom = 1;
    return;
  }
  n = v ? rd_store_list(N.store, v, n) : 0;   /* the table does not change in between: one thread */
  if (n) qsort(v, n, sizeof(*v), by_size_desc);
  owner_sum own[OBJ_OWNERS_MAX + 1];   /* [nown]: every owner past the first OBJ_OWNERS_MAX, when others */
  size_t nown = 0;
  int others = 0;
  uint64_t mem = 0, spilled = 0, nspilled = 0, unsealed = 0;
  for (size_t i = 0; i < n; i++) {
    if (v[i].spilled) {
      spilled += v[i].size;
      nspilled++;
    } else {
      mem += v[i].size;
    }
    unsealed += !v[i].sealed;
    uint32_t o = rd__oid_client(v[i].id);
    size_t k = 0;
    while (k < nown && own[k].client != o) k++;
    if (k == nown && nown < OBJ_OWNERS_MAX) {
      own[nown++] = (owner_sum){o, 0, 0};
    } else if (k == nown) {
      if (!others) own[OBJ_OWNERS_MAX] = (owner_sum){UINT32_MAX, 0, 0};
      others = 1;
      k = OBJ_OWNERS_MAX;
    }
    own[k].objects++;
    own[k].bytes += v[i].size;
  }
  qsort(own, nown, sizeof(*own), owner_desc);
  rd_store_stats st;
  rd_store_get_stats(N.store, &st);
  size_t shown = n < top ? n : top;
  char who[96];
  if (json) {
    rd__mbuf_printf(b, "{\"node\":%u,\"objects\":%zu,\"bytes_in_memory\":%llu,\"spilled\":%llu,\"bytes_spilled\":%llu,"
                       "\"unsealed\":%llu,\"store_used\":%llu,\"store_capacity\":%llu,\"by_owner\":[",
                    rd__cluster_index(), n, (unsigned long long)mem, (unsigned long long)nspilled,
                    (unsigned long long)spilled, (unsigned long long)unsealed, (unsigned long long)st.used,
                    (unsigned long long)st.capacity);
    for (size_t k = 0; k < nown + (size_t)others; k++) {
      const owner_sum *o = k < nown ? &own[k] : &own[OBJ_OWNERS_MAX];
      if (o->client == UINT32_MAX) snprintf(who, sizeof(who), "(others)");
      else owner_text(o->client, who, sizeof(who));
      rd__mbuf_printf(b, "%s{\"owner\":%u,\"who\":", k ? "," : "", o->client);
      rd__mbuf_json_cstr(b, who);
      rd__mbuf_printf(b, ",\"objects\":%llu,\"bytes\":%llu}", (unsigned long long)o->objects,
                      (unsigned long long)o->bytes);
    }
    rd__mbuf_printf(b, "],\"largest\":[");
    for (size_t i = 0; i < shown; i++) {
      uint32_t oc = rd__oid_client(v[i].id);
      const node_client *c = rd__client_node(oc) == rd__cluster_index() ? rd__node_client_by_id(oc) : NULL;
      owner_text(oc, who, sizeof(who));
      rd__mbuf_printf(b, "%s{\"id\":\"%016llx\",\"size\":%llu,\"state\":\"%s\",\"pins\":%u,\"handed_over\":%u,\"owner\":",
                      i ? "," : "", (unsigned long long)v[i].id, (unsigned long long)v[i].size,
                      obj_state(&v[i]), v[i].pins, v[i].co_owners);
      rd__mbuf_json_cstr(b, who);
      rd__mbuf_printf(b, ",\"owner_node\":%u,\"owner_pid\":%d,\"owner_role\":\"%s\"}", rd__client_node(oc),
                      c ? c->pid : 0, c ? role_name(c->role) : "");
    }
    rd__mbuf_printf(b, "]}\n");
  } else {
    rd__mbuf_printf(b, "node %u: %zu objects, %.1f MiB in memory, %llu spilled (%.1f MiB), %llu unsealed; store %.1f/%.1f MiB\n",
                    rd__cluster_index(), n, mem / 1048576.0, (unsigned long long)nspilled, spilled / 1048576.0,
                    (unsigned long long)unsealed, st.used / 1048576.0, st.capacity / 1048576.0);
    if (st.num_fallback)
      rd__mbuf_printf(b, "  fallback region: %.1f MiB in %llu objects past the store (of %.1f MiB)\n",
                      st.fallback_used / 1048576.0, (unsigned long long)st.num_fallback, st.fallback_limit / 1048576.0);
    if (nown) rd__mbuf_printf(b, "  by owner:\n");
    for (size_t k = 0; k < nown + (size_t)others; k++) {
      const owner_sum *o = k < nown ? &own[k] : &own[OBJ_OWNERS_MAX];
      if (o->client == UINT32_MAX) snprintf(who, sizeof(who), "(others)");
      else owner_text(o->client, who, sizeof(who));
      rd__mbuf_printf(b, "    %-28s %8llu objects %12.3f MiB\n", who, (unsigned long long)o->objects,
                      o->bytes / 1048576.0);
    }
    if (shown) rd__mbuf_printf(b, "  largest %zu:\n", shown);
    for (size_t i = 0; i < shown; i++) {
      owner_text(rd__oid_client(v[i].id), who, sizeof(who));
      rd__mbuf_printf(b, "    %016llx %12.3f MiB  %-8s pins %-3u %s%s\n", (unsigned long long)v[i].id,
                      v[i].size / 1048576.0, obj_state(&v[i]), v[i].pins, who, v[i].co_owners ? " (handed over)" : "");
    }
  }
  free(v);
}

/* ------------------------------------------------------ unfinished tasks
 *
 * `raydist list tasks`, /tasks and /api/tasks: the node asks each local
 * owner (driver or worker) whose last OwnerStats had tasks live for its
 * unfinished ones (MSG_TASK_LIST_ASK) and answers once all have answered,
 * left, or TL_WAIT_MS passed.  An owner whose tasks all settled since its
 * last report answers with none; one that never answers (a process stuck
 * outside the library with its progress thread off) is named as such. */
#define TL_WAIT_MS 2000

/* The last TF_KEEP tasks that failed for good, as their owners here told
 * (OwnerStats.failures): a ring, allocated at the first. */
#define TF_KEEP 1000
typedef struct tf_entry {
  uint64_t task_id, ret_id, actor_id, age_ns, at_ns;   /* at_ns: when the node heard (rd__now_ns) */
  uint64_t parent_task;     /* the task whose run submitted it (0: none), its owner's node and pid */
  uint32_t parent_node;
  int parent_pid;
  int status, attempt;
  int worker_pid;           /* the worker it ran on last, and its node (0: none) */
  uint32_t worker_node;
  uint32_t job;             /* its owner's GCS job (0: not known) */
  uint32_t njob;            /* a driver owner's job on this node (its number: its GCS job may come later) */
  int pid;                  /* its owner's */
  char who[48];             /* its owner, then */
  char func[128];
  char err[512];
} tf_entry;

static tf_entry *tf_ring;
static size_t tf_next, tf_count;          /* the next slot; how many are kept */
static uint64_t tf_total, tf_undetailed;  /* every failure heard of; those the owners only counted */

/* A driver owner's job on this node while its GCS entry is not made (0:
 * made, or a worker: its tasks carry the GCS job of its lease's driver),
 * so that a task it reported meanwhile gets the entry's id once it is
 * (rd__dashboard_job_known). */
static uint32_t owner_njob(const node_client *c) {
  return !c->worker && c->job && !c->job->gcs_job_id ? c->job->id : 0;
}

void rd__dashboard_failures_add(const node_client *c, const Rd__OwnerStats *m) {
  tf_undetailed += m->failures_dropped;
  tf_total += m->failures_dropped + m->n_failures;
  if (!m->n_failures) return;
  if (!tf_ring && !(tf_ring = calloc(TF_KEEP, sizeof(*tf_ring)))) {
    tf_undetailed += m->n_failures;
    return;
  }
  uint64_t now = rd__now_ns();
  for (size_t i = 0; i < m->n_failures; i++) {
    const Rd__TaskFailure *f = m->failures[i];
    tf_entry *e = &tf_ring[tf_next];
    tf_next = (tf_next + 1) % TF_KEEP;
    if (tf_count < TF_KEEP) tf_count++;
    e->task_id = f->task_id;
    e->ret_id = f->ret_id;
    e->actor_id = f->actor_id;
    e->parent_task = f->parent_task;
    e->parent_node = f->parent_node;
    e->parent_pid = f->parent_pid;
    e->age_ns = f->age_ns;
    e->at_ns = now;
    e->status = f->status;
    e->attempt = f->attempt;
    e->worker_pid = f->worker_pid;
    e->worker_node = f->worker_node;
    client_text(c->role, c->pid, e->who, sizeof(e->who));
    e->job = rd__node_client_gcs_job(c);
    e->njob = owner_njob(c);
    e->pid = c->pid;
    snprintf(e->func, sizeof(e->func), "%s", f->func ? f->func : "");
    snprintf(e->err, sizeof(e->err), "%s", f->error ? f->error : "");
  }
}

/* The k-th most recent failure kept (k < tf_count). */
static const tf_entry *tf_recent(size_t k) { return &tf_ring[(tf_next + TF_KEEP - 1 - k) % TF_KEEP]; }

/* The last N.tasks_done_max tasks that finished well, as their owners here
 * reported them (OwnerStats.finished), kept past their owners' exit (Ray
 * keeps task events in its GCS): a ring, allocated at the first (~150 bytes
 * a task: 15 MB for the default 100,000). */
typedef struct td_entry {
  uint64_t task_id, ret_id, actor_id, created_ms, start_ms, end_ms;
  int attempt, worker_pid;
  int pid, role;            /* its owner's */
  uint32_t node;            /* where it ran (0: not known) */
  uint32_t job;             /* its owner's GCS job (0: not known) */
  uint32_t njob;            /* as tf_entry's */
  uint32_t client;          /* its owner's client id */
  uint64_t oseq;            /* its number among what its owner reported (OwnerStats.finished_first + i) */
  uint64_t parent_task;     /* the task whose run submitted it (0: none), its owner's node and pid */
  uint32_t parent_node;
  int parent_pid;
  char func[64];
} td_entry;

static td_entry *td_ring;
static size_t td_next, td_count;   /* the next slot; how many are kept */
static uint64_t td_total;          /* every one reported, kept or not (its owner's ring full, pushed out here) */

void rd__dashboard_finished_add(const node_client *c, const Rd__OwnerStats *m) {
  td_total += m->finished_dropped + m->n_finished;
  if (!m->n_finished || !N.tasks_done_max) return;
  if (!td_ring && !(td_ring = malloc(N.tasks_done_max * sizeof(*td_ring)))) return;   /* none kept */
  uint32_t job = rd__node_client_gcs_job(c);
  for (size_t i = 0; i < m->n_finished; i++) {
    const Rd__TaskInfo *f = m->finished[i];
    td_entry *e = &td_ring[td_next];
    td_next = (td_next + 1) % N.tasks_done_max;
    if (td_count < N.tasks_done_max) td_count++;
    *e = (td_entry){f->task_id, f->ret_id, f->actor_id, f->created_ms, f->start_ms, f->end_ms, f->attempt,
                    f->worker_pid, c->pid, c->role, f->node, job, owner_njob(c), c->id,
                    m->finished_first + i, f->parent_task, f->parent_node, f->parent_pid, ""};
    snprintf(e->func, sizeof(e->func), "%s", f->func ? f->func : "");
  }
}

void rd__dashboard_job_known(uint32_t njob, uint32_t gcs_job) {
  for (size_t i = 0; i < tf_count; i++)
    if (!tf_ring[i].job && tf_ring[i].njob == njob) tf_ring[i].job = gcs_job, tf_ring[i].njob = 0;
  for (size_t i = 0; i < td_count; i++)
    if (!td_ring[i].job && td_ring[i].njob == njob) td_ring[i].job = gcs_job, td_ring[i].njob = 0;
}

/* The k-th most recent finished task kept (k < td_count). */
static const td_entry *td_recent(size_t k) {
  return &td_ring[(td_next + N.tasks_done_max - 1 - k) % N.tasks_done_max];
}

typedef struct tl_ask {
  uint32_t client, job;     /* job: the owner's GCS job (0: not known) */
  int pid, role;
  int answered;             /* 1 answered, 2 left before answering */
  Rd__TaskList *m;
} tl_ask;

typedef struct tl_req {
  uint64_t req_id;
  int json, state;          /* state: only these (-1: all) */
  int finished;             /* the tasks finished well too */
  size_t limit;
  rd__dashboard_done done;
  void *arg;
  uv_timer_t timer;
  tl_ask *asks;
  size_t nasks, waiting;
  struct tl_req *next;
} tl_req;

static tl_req *tl_reqs;
static uint64_t tl_next_id;

/* Whether a finished task kept, e, is in an answer to q already: its owner
 * answered q, and reported e after that (a report that lands between an
 * owner's answer and the listing's end is not counted twice; one it sent
 * before it saw the question is not in its answer, and counts). */
static int td_answered(const tl_req *q, const td_entry *e) {
  for (size_t i = 0; i < q->nasks; i++)
    if (q->asks[i].client == e->client && q->asks[i].answered == 1)
      return e->oseq >= q->asks[i].m->finished_reported;
  return 0;
}

typedef struct tl_row {
  const Rd__TaskInfo *t;
  const tl_ask *owner;
} tl_row;

/* The unfinished oldest first, then the finished, the last to end first. */
static int tl_row_older(const void *a, const void *b) {
  const tl_row *x = a, *y = b;
  int fx = x->t->state == RD_TS_FINISHED, fy = y->t->state == RD_TS_FINISHED;
  if (fx != fy) return fx - fy;
  if (fx && x->t->end_ms != y->t->end_ms) return x->t->end_ms < y->t->end_ms ? 1 : -1;
  if (x->t->age_ns != y->t->age_ns) return x->t->age_ns < y->t->age_ns ? 1 : -1;
  return x->t->task_id < y->t->task_id ? -1 : x->t->task_id > y->t->task_id;
}

static void tl_who(const tl_ask *a, char *out, size_t len) { client_text(a->role, a->pid, out, len); }

/* What a task waits for, in words (text form). */
static void tl_detail(const Rd__TaskInfo *t, char *out, size_t len) {
  switch (t->state) {
    case RD_TS_RUNNING:
    case RD_TS_SUBMITTED: snprintf(out, len, "worker pid %d", t->worker_pid); break;
    case RD_TS_PENDING_ARGS: snprintf(out, len, "%d argument%s not ready", t->args_pending, t->args_pending == 1 ? "" : "s"); break;
    case RD_TS_PENDING_LEASE: snprintf(out, len, "wants %s", t->resources); break;
    case RD_TS_RETRY_BACKOFF: snprintf(out, len, "retry in %.1f s, wants %s", (double)t->retry_in_ns / 1e9, t->resources); break;
    case RD_TS_FINISHED:
      snprintf(out, len, "ran %.3f s on worker pid %d", (double)(t->end_ms - t->start_ms) / 1e3, t->worker_pid);
      break;
    default: *out = 0;
  }
  if (t->actor_id) {
    size_t n = strlen(out);
    snprintf(out + n, len - n, "%sactor %016llx", n ? ", " : "", (unsigned long long)t->actor_id);
  }
}

/* Counts by state for each of at most TALLY_MAX names (functions of the
 * task listing, classes of the actor listing); past that, the last slot
 * counts the rest as "(other)". */
#define TALLY_MAX 256
typedef struct tally {
  const char *name;
  uint64_t counts[RD_TS_FINISHED + 1], total;   /* room for the task and the actor states */
} tally;
_Static_assert(RD_AS_NSTATES <= RD_TS_FINISHED + 1, "a tally holds every actor state");

/* Most first, then by name. */
static int tally_more(const void *a, const void *b) {
  const tally *x = a, *y = b;
  if (x->total != y->total) return x->total < y->total ? 1 : -1;
  return strcmp(x->name, y->name);
}

/* t's slot for name among n (n grows). */
static tally *tally_slot(tally *t, size_t *n, const char *name) {
  size_t k = 0;
  while (k < *n && strcmp(t[k].name, name) != 0) k++;
  if (k == *n && *n < TALLY_MAX) t[(*n)++] = (tally){name, {0}, 0};
  else if (k == *n) {
    k = *n - 1;   /* the last slot becomes the rest */
    t[k].name = "(other)";
  }
  return &t[k];
}

/* The counts by function over every answer, the failures kept and (asked
 * for) the finished tasks kept (owners' own "(other)" joins the rest);
 * how many of those kept are in no answer in *kept. */
static size_t tl_funcs(const tl_req *q, tally *f, size_t *kept) {
  size_t n = 0;
  tally *x = NULL;
  const char *last = NULL;
  *kept = 0;
  for (size_t k = 0; q->finished && k < td_count; k++) {   /* runs of one function: one lookup */
    const td_entry *e = td_recent(k);
    if (td_answered(q, e)) continue;
    ++*kept;
    if (!last || strcmp(last, e->func) != 0) x = tally_slot(f, &n, last = e->func);
    x->counts[RD_TS_FINISHED]++;
    x->total++;
  }
  for (size_t i = 0; i < q->nasks; i++)
    for (size_t j = 0; q->asks[i].m && j < q->asks[i].m->n_by_func; j++) {
      const Rd__FuncTaskCounts *c = q->asks[i].m->by_func[j];
      x = tally_slot(f, &n, c->func);
      for (int s = 0; s < RD_TS_NSTATES; s++) {
        x->counts[s] += c->counts[s];
        x->total += c->counts[s];
      }
      x->counts[RD_TS_FINISHED] += c->finished;
      x->total += c->finished;
    }
  for (size_t k = 0; k < tf_count; k++) {
    x = tally_slot(f, &n, tf_recent(k)->func);
    x->counts[RD_TS_FAILED]++;
    x->total++;
  }
  if (n) qsort(f, n, sizeof(*f), tally_more);
  return n;
}

/* {"PENDING_ARGS":3,...,"RUNNING":2,"FAILED":0,"FINISHED":0}: every
 * state's count. */
static void tl_put_counts_json(rd__mbuf *b, const uint64_t *counts) {
  rd__mbuf_printf(b, "{");
  for (int k = 0; k <= RD_TS_FINISHED; k++)
    rd__mbuf_printf(b, "%s\"%s\":%llu", k ? "," : "", rd__task_state_name(k), (unsigned long long)counts[k]);
  rd__mbuf_printf(b, "}");
}

/* "RUNNING 2, PENDING_ARGS 3, FAILED 1, FINISHED 5": the states with a
 * count, running first, then (with ended) failed and finished. */
static void tl_put_counts(rd__mbuf *b, const uint64_t *counts, int ended) {
  int sep = 0;
  for (int k = RD_TS_NSTATES - 1; k >= 0; k--)
    if (counts[k]) rd__mbuf_printf(b, "%s%s %llu", sep++ ? ", " : "", rd__task_state_name(k), (unsigned long long)counts[k]);
  for (int k = RD_TS_FAILED; ended && k <= RD_TS_FINISHED; k++)
    if (counts[k]) rd__mbuf_printf(b, "%s%s %llu", sep++ ? ", " : "", rd__task_state_name(k), (unsigned long long)counts[k]);
}

/* The failures kept that a listing shows: with `state` FAILED or all, the
 * most recent `limit`. */
static size_t tf_shown(int state, size_t limit) {
  if (state >= 0 && state != RD_TS_FAILED) return 0;
  return tf_count < limit ? tf_count : limit;
}

static void tf_detail(const tf_entry *e, char *out, size_t len) {
  snprintf(out, len, "%s: %s", rd_err_name(e->status), e->err);
  if (e->actor_id) {
    size_t n = strlen(out);
    snprintf(out + n, len - n, ", actor %016llx", (unsigned long long)e->actor_id);
  }
}

/* ,"parent":"NODE-OWNERPID-TASK"} (as the state API names tasks; "" for
 * none), closing a task's JSON row. */
static void put_parent(rd__mbuf *b, uint64_t task, uint32_t node, int pid) {
  char id[RD_TASK_ID_TEXT] = "";
  if (task) rd__task_id_text(id, sizeof(id), node, pid, task);
  rd__mbuf_printf(b, ",\"parent\":\"%s\"}", id);
}

static void tl_render(const tl_req *q, rd__mbuf *b) {
  uint64_t counts[RD_TS_FINISHED + 1] = {0}, total = 0;
  size_t nrows = 0;
  for (size_t i = 0; i < q->nasks; i++) {
    const Rd__TaskList *m = q->asks[i].m;
    if (!m) continue;
    for (size_t k = 0; k < RD_TS_NSTATES; k++) counts[k] += m->counts[k];
    counts[RD_TS_FINISHED] += m->finished;
    nrows += m->n_tasks;
  }
  for (size_t k = 0; k < RD_TS_NSTATES; k++) total += counts[k];
  counts[RD_TS_FAILED] = tf_count;
  tally *fns = malloc(TALLY_MAX * sizeof(*fns));
  size_t kept = 0, nfns = fns ? tl_funcs(q, fns, &kept) : 0;   /* kept: those also in an answer aside */
  counts[RD_TS_FINISHED] += kept;
  size_t nfail = tf_shown(q->state, q->limit);
  /* the most recent finished kept here, as rows (their owners may be gone) */
  size_t nkept = q->state < 0 || q->state == RD_TS_FINISHED ? kept : 0;
  if (nkept > q->limit) nkept = q->limit;
  uint64_t now = rd__now_ns(), wall = rd__wall_ms();
  tl_row *rows = nrows + nkept ? malloc((nrows + nkept) * sizeof(*rows)) : NULL;
  Rd__TaskInfo *kv = nkept ? malloc(nkept * sizeof(*kv)) : NULL;
  tl_ask *ko = nkept ? malloc(nkept * sizeof(*ko)) : NULL;
  if ((nrows + nkept && !rows) || !fns || (nkept && (!kv || !ko))) {
    free(rows);
    free(fns);
    free(kv);
    free(ko);
    b->oom = 1;
    return;
  }
  size_t n = 0;
  for (size_t k = 0, i = 0; i < nkept && k < td_count; k++) {
    const td_entry *e = td_recent(k);
    if (td_answered(q, e)) continue;
    Rd__TaskInfo *x = &kv[i];
    rd__task_info__init(x);
    x->task_id = e->task_id;
    x->func = (char *)e->func;
    x->state = RD_TS_FINISHED;
    x->age_ns = wall > e->created_ms ? (wall - e->created_ms) * 1000000 : 0;
    x->attempt = e->attempt;
    x->worker_pid = e->worker_pid;
    x->actor_id = e->actor_id;
    x->resources = (char *)"";
    x->ret_id = e->ret_id;
    x->node = e->node;
    x->created_ms = e->created_ms;
    x->start_ms = e->start_ms;
    x->end_ms = e->end_ms;
    x->parent_task = e->parent_task;
    x->parent_node = e->parent_node;
    x->parent_pid = e->parent_pid;
    ko[i] = (tl_ask){0, e->job, e->pid, e->role, 1, NULL};
    rows[n++] = (tl_row){x, &ko[i++]};
  }
  for (size_t i = 0; i < q->nasks; i++)
    for (size_t k = 0; q->asks[i].m && k < q->asks[i].m->n_tasks; k++) {
      const Rd__TaskInfo *t = q->asks[i].m->tasks[k];
      if (q->state < 0 || t->state == q->state) rows[n++] = (tl_row){t, &q->asks[i]};
    }
  if (n) qsort(rows, n, sizeof(*rows), tl_row_older);
  if (n > q->limit) n = q->limit;
  char who[64], det[800];
  if (q->json) {
    rd__mbuf_printf(b, "{\"node\":%u,\"unfinished\":%llu,\"failed_kept\":%zu,\"failed_total\":%llu,"
                       "\"failed_undetailed\":%llu,\"finished_kept\":%llu,\"finished_unkept\":%llu,\"counts\":",
                    rd__cluster_index(), (unsigned long long)total, tf_count, (unsigned long long)tf_total,
                    (unsigned long long)tf_undetailed, (unsigned long long)counts[RD_TS_FINISHED],
                    (unsigned long long)(q->finished ? (td_total - td_count) : 0));
    tl_put_counts_json(b, counts);
    rd__mbuf_printf(b, ",\"by_function\":[");
    for (size_t i = 0; i < nfns; i++) {
      rd__mbuf_printf(b, "%s{\"func\":", i ? "," : "");
      rd__mbuf_json_cstr(b, fns[i].name);
      rd__mbuf_printf(b, ",\"unfinished\":%llu,\"counts\":",
                      (unsigned long long)(fns[i].total - fns[i].counts[RD_TS_FAILED] - fns[i].counts[RD_TS_FINISHED]));
      tl_put_counts_json(b, fns[i].counts);
      rd__mbuf_printf(b, "}");
    }
    rd__mbuf_printf(b, "],\"owners\":[");
    for (size_t i = 0; i < q->nasks; i++) {
      const tl_ask *a = &q->asks[i];
      uint64_t mine = 0;
      for (size_t k = 0; a->m && k < RD_TS_NSTATES; k++) mine += a->m->counts[k];
      tl_who(a, who, sizeof(who));
      rd__mbuf_printf(b, "%s{\"who\":", i ? "," : "");
      rd__mbuf_json_cstr(b, who);
      rd__mbuf_printf(b, ",\"pid\":%d,\"answered\":%s,\"unfinished\":%llu}", a->pid,
                      a->answered == 1 ? "true" : "false", (unsigned long long)mine);
    }
    rd__mbuf_printf(b, "],\"tasks\":[");
    for (size_t i = 0; i < n; i++) {
      const Rd__TaskInfo *t = rows[i].t;
      tl_who(rows[i].owner, who, sizeof(who));
      rd__mbuf_printf(b, "%s{\"task_id\":%llu,\"ret\":\"%016llx\",\"func\":", i ? "," : "",
                      (unsigned long long)t->task_id, (unsigned long long)t->ret_id);
      rd__mbuf_json_cstr(b, t->func);
      rd__mbuf_printf(b, ",\"state\":\"%s\",\"age_s\":%.3f,\"attempt\":%d,\"owner\":", rd__task_state_name(t->state),
                      (double)t->age_ns / 1e9, t->attempt);
      rd__mbuf_json_cstr(b, who);
      rd__mbuf_printf(b, ",\"worker_pid\":%d,\"actor_id\":\"%016llx\",\"args_pending\":%d,\"resources\":", t->worker_pid,
                      (unsigned long long)t->actor_id, t->args_pending);
      rd__mbuf_json_cstr(b, t->resources);
      rd__mbuf_printf(b, ",\"retry_in_s\":%.3f,\"owner_pid\":%d,\"job\":%u,\"worker_node\":%u,\"created_ms\":%llu,"
                         "\"start_ms\":%llu,\"end_ms\":%llu",
                      (double)t->retry_in_ns / 1e9, rows[i].owner->pid, rows[i].owner->job, t->node,
                      (unsigned long long)t->created_ms, (unsigned long long)t->start_ms, (unsigned long long)t->end_ms);
      put_parent(b, t->parent_task, t->parent_node, t->parent_pid);
    }
    rd__mbuf_printf(b, "],\"failures\":[");
    for (size_t i = 0; i < nfail; i++) {
      const tf_entry *e = tf_recent(i);
      rd__mbuf_printf(b, "%s{\"task_id\":%llu,\"ret\":\"%016llx\",\"func\":", i ? "," : "",
                      (unsigned long long)e->task_id, (unsigned long long)e->ret_id);
      rd__mbuf_json_cstr(b, e->func);
      rd__mbuf_printf(b, ",\"status\":\"%s\",\"error\":", rd_err_name(e->status));
      rd__mbuf_json_cstr(b, e->err);
      rd__mbuf_printf(b, ",\"attempt\":%d,\"age_s\":%.3f,\"ago_s\":%.3f,\"owner\":", e->attempt,
                      (double)e->age_ns / 1e9, (double)(now - e->at_ns) / 1e9);
      rd__mbuf_json_cstr(b, e->who);
      rd__mbuf_printf(b, ",\"actor_id\":\"%016llx\",\"owner_pid\":%d,\"job\":%u,\"worker_pid\":%d,\"worker_node\":%u",
                      (unsigned long long)e->actor_id, e->pid, e->job, e->worker_pid, e->worker_node);
      put_parent(b, e->parent_task, e->parent_node, e->parent_pid);
    }
    rd__mbuf_printf(b, "]}\n");
  } else {
    rd__mbuf_printf(b, "node %u: %llu unfinished tasks", rd__cluster_index(), (unsigned long long)total);
    if (total) {   /* failed and finished are said on lines of their own */
      rd__mbuf_printf(b, " (");
      tl_put_counts(b, counts, 0);
      rd__mbuf_printf(b, ")");
    }
    rd__mbuf_printf(b, "\n");
    if (q->finished && (td_total - td_count))
      rd__mbuf_printf(b, "  finished well: the last %llu kept (%llu more not kept)\n",
                      (unsigned long long)counts[RD_TS_FINISHED], (unsigned long long)(td_total - td_count));
    else if (q->finished)
      rd__mbuf_printf(b, "  finished well: the last %llu kept\n", (unsigned long long)counts[RD_TS_FINISHED]);
    if (tf_total)
      rd__mbuf_printf(b, "  failed for good: %llu here, the last %zu kept (%llu not detailed by their owners)\n",
                      (unsigned long long)tf_total, tf_count, (unsigned long long)tf_undetailed);
    if (nfns) rd__mbuf_printf(b, "  by function:\n");
    for (size_t i = 0; i < nfns; i++) {
      rd__mbuf_printf(b, "    %-24s %8llu  ", fns[i].name, (unsigned long long)fns[i].total);
      tl_put_counts(b, fns[i].counts, 1);
      rd__mbuf_printf(b, "\n");
    }
    for (size_t i = 0; i < q->nasks; i++) {
      const tl_ask *a = &q->asks[i];
      if (a->answered == 1) continue;
      tl_who(a, who, sizeof(who));
      if (a->answered) rd__mbuf_printf(b, "  %s left before it answered\n", who);
      else rd__mbuf_printf(b, "  %s did not answer within %d s\n", who, TL_WAIT_MS / 1000);
    }
    if (n) rd__mbuf_printf(b, "  %-16s %-13s %8s %-24s %-18s %s\n", "RESULT", "STATE", "AGE", "FUNCTION", "OWNER", "DETAIL");
    for (size_t i = 0; i < n; i++) {
      const Rd__TaskInfo *t = rows[i].t;
      char id[24];
      if (t->ret_id) snprintf(id, sizeof(id), "%016llx", (unsigned long long)t->ret_id);
      else snprintf(id, sizeof(id), "-");
      tl_who(rows[i].owner, who, sizeof(who));
      tl_detail(t, det, sizeof(det));
      rd__mbuf_printf(b, "  %-16s %-13s %7.1fs %-24s %-18s %s%s\n", id, rd__task_state_name(t->state),
                      (double)t->age_ns / 1e9, t->func, who, det, t->attempt ? " (a retry)" : "");
    }
    if (nfail) rd__mbuf_printf(b, "  %-16s %-13s %8s %-24s %-18s %s\n", "RESULT", "STATE", "AGO", "FUNCTION", "OWNER", "ERROR");
    for (size_t i = 0; i < nfail; i++) {
      const tf_entry *e = tf_recent(i);
      char id[24];
      if (e->ret_id) snprintf(id, sizeof(id), "%016llx", (unsigned long long)e->ret_id);
      else snprintf(id, sizeof(id), "-");
      tf_detail(e, det, sizeof(det));
      rd__mbuf_printf(b, "  %-16s %-13s %7.1fs %-24s %-18s %s\n", id, "FAILED", (double)(now - e->at_ns) / 1e9, e->func,
                      e->who, det);
    }
  }
  free(rows);
  free(fns);
  free(kv);
  free(ko);
}

static void tl_free_cb(uv_handle_t *h) {
  tl_req *q = h->data;
  for (size_t i = 0; i < q->nasks; i++)
    if (q->asks[i].m) protobuf_c_message_free_unpacked(&q->asks[i].m->base, NULL);
  free(q->asks);
  free(q);
}

static void tl_finish(tl_req *q) {
  for (tl_req **pp = &tl_reqs; *pp; pp = &(*pp)->next)
    if (*pp == q) {
      *pp = q->next;
      break;
    }
  rd__mbuf b = {0};
  tl_render(q, &b);
  q->done(q->arg, &b, q->json ? "application/json" : "text/plain; charset=utf-8");
  free(b.p);
  uv_timer_stop(&q->timer);
  uv_close((uv_handle_t *)&q->timer, tl_free_cb);
}

static void tl_timeout(uv_timer_t *t) { tl_finish(t->data); }

int rd__dashboard_tasks(uv_loop_t *loop, int json, size_t limit, int state, int finished, rd__dashboard_done done,
                        void *arg) {
  tl_req *q = calloc(1, sizeof(*q));
  size_t n = 0;
  for (node_client *c = N.clients; c; c = c->next) n++;
  if (!q || !(q->asks = calloc(n ? n : 1, sizeof(*q->asks)))) {
    free(q);
    return RD_ENOMEM;
  }
  q->req_id = ++tl_next_id;
  q->json = json;
  q->limit = limit;
  q->state = state;
  q->finished = finished = finished || state == RD_TS_FINISHED;
  q->done = done;
  q->arg = arg;
  Rd__TaskListAsk m = RD__TASK_LIST_ASK__INIT;
  m.req_id = q->req_id;
  m.limit = (uint32_t)limit;
  m.only = state >= 0 ? (uint32_t)state + 1 : 0;
  m.finished = finished;
  for (node_client *c = N.clients; c && state != RD_TS_FAILED; c = c->next) {   /* failures are kept here */
    if (c->dead || (c->role != ROLE_DRIVER && c->role != ROLE_WORKER)) continue;
    int live = c->own_waiting + c->own_sent > 0, kept = finished && c->own_unsent;
    if (state == RD_TS_FINISHED ? !kept : !live && !kept) continue;
    q->asks[q->nasks++] = (tl_ask){c->id, rd__node_client_gcs_job(c), c->pid, c->role, 0, NULL};
    rd__node_send(c, RD__MSG_TYPE__MSG_TASK_LIST_ASK, &m.base, -1);
  }
  /* sent now: an HTTP request is no client frame, after which the loop
   * flushes, and the asks waited for the next flush (up to ~50 ms) */
  if (q->nasks) rd__node_flush_all();
  q->waiting = q->nasks;
  uv_timer_init(loop, &q->timer);
  q->timer.data = q;
  q->next = tl_reqs;
  tl_reqs = q;
  if (!q->waiting) tl_finish(q);
  else uv_timer_start(&q->timer, tl_timeout, TL_WAIT_MS, 0);
  return 0;
}

static tl_ask *tl_find(tl_req *q, uint32_t client) {
  for (size_t i = 0; i < q->nasks; i++)
    if (q->asks[i].client == client && !q->asks[i].answered) return &q->asks[i];
  return NULL;
}

int rd__dashboard_on_task_list(node_client *c, Rd__TaskList *m) {
  if (m->n_counts != RD_TS_NSTATES) return -1;
  for (size_t i = 0; i < m->n_by_func; i++)
    if (m->by_func[i]->n_counts != RD_TS_NSTATES || !m->by_func[i]->func) return -1;
  for (size_t i = 0; i < m->n_tasks; i++)
    if (m->tasks[i]->state < 0 || (m->tasks[i]->state >= RD_TS_NSTATES && m->tasks[i]->state != RD_TS_FINISHED))
      return -1;
  tl_req *q = tl_reqs;
  while (q && q->req_id != m->req_id) q = q->next;
  tl_ask *a = q ? tl_find(q, c->id) : NULL;
  if (!a) return 0;   /* too late, or not asked: dropped */
  if (m->n_tasks > q->limit) return -1;
  for (size_t i = 0; i < m->n_tasks && !q->finished; i++)
    if (m->tasks[i]->state == RD_TS_FINISHED) return -1;   /* not asked for */
  a->answered = 1;
  a->m = m;
  if (--q->waiting == 0) tl_finish(q);
  return 1;
}

void rd__dashboard_client_gone(const node_client *c) {
  for (tl_req *q = tl_reqs, *next; q; q = next) {
    next = q->next;
    tl_ask *a = tl_find(q, c->id);
    if (!a) continue;
    a->answered = 2;
    if (--q->waiting == 0) tl_finish(q);
  }
}

/* ------------------------------------------------------------- actors
 *
 * `raydist list actors`, /actors and /api/actors: the actor records this
 * node keeps (those its drivers and workers made, wherever they run; not
 * the copies it hosts for a peer's record), live ones oldest first, then
 * the dead, most recent first.  All of it is the node's own table: no
 * owner is asked. */

static int al_state(const node_actor *a) {
  if (a->state == A_DEAD) return RD_AS_DEAD;
  if (a->state == A_ALIVE) return RD_AS_ALIVE;
  return a->restarts ? RD_AS_RESTARTING : RD_AS_PENDING_CREATION;
}

static int al_order(const void *x, const void *y) {
  const node_actor *a = *(node_actor *const *)x, *b = *(node_actor *const *)y;
  int da = a->state == A_DEAD, db = b->state == A_DEAD;
  if (da != db) return da - db;
  if (da && a->ended_ns != b->ended_ns) return a->ended_ns < b->ended_ns ? 1 : -1;
  if (!da && a->created_ns != b->created_ns) return a->created_ns < b->created_ns ? -1 : 1;
  return a->id < b->id ? -1 : a->id > b->id;
}

static void al_owner(const node_actor *a, char *out, size_t len) {
  if (!a->creator) snprintf(out, len, "- (left)");
  else if (a->creator == &N.orphans) snprintf(out, len, "detached");
  else client_text(a->creator->role, a->creator->pid, out, len);
}

/* Where it runs (or ran, or is starting) and its pid; 0 pid: none. */
static void al_where(const node_actor *a, uint32_t *node, int *pid) {
  *node = 0;
  *pid = 0;
  if (a->worker) *node = rd__cluster_index(), *pid = a->worker->pid;
  else if (a->host && a->state != A_DEAD) *node = a->host, *pid = a->host_pid;
  else if (a->state == A_DEAD) *node = a->last_node, *pid = a->last_pid;
}

/* What it waits for, or why it died, in words. */
static void al_detail(const node_actor *a, uint64_t now, char *out, size_t len) {
  char res[200];
  size_t n = 0;
  *out = 0;
  if (a->state == A_DEAD) {
    snprintf(out, len, "%s", a->death ? a->death : "dead");
    return;
  }
  if (a->state == A_PENDING && a->host) n = (size_t)snprintf(out, len, "sent to node %u, not alive yet", a->host);
  else if (a->state == A_STARTING) n = (size_t)snprintf(out, len, "constructor running");
  else if (a->state == A_PENDING) {
    rd_res_format(&a->res, res, sizeof(res));
    n = (size_t)snprintf(out, len, "wants %s", res);
    if (a->pending_since && n < len)
      n += (size_t)snprintf(out + n, len - n, " for %.1f s", (double)(now - a->pending_since) / 1e9);
    if (a->sel && n < len) n += (size_t)snprintf(out + n, len - n, ", labels %s", a->sel);
  }
  if (a->pg_id && n < len)
    n += (size_t)snprintf(out + n, len - n, "%sgroup %016llx bundle %d", n ? ", " : "", (unsigned long long)a->pg_id,
                          a->bundle_index);
  if (a->detached && n < len) snprintf(out + n, len - n, "%sdetached", n ? ", " : "");
}

/* The name a user gave it, without its namespace ("ns:name" is stored). */
static const char *al_name(const node_actor *a) {
  if (!a->name) return NULL;
  size_t k = a->ns ? strlen(a->ns) : 0;   /* "ns:name"; ":name" for a default-namespace name holding ':' */
  return (!k || !strncmp(a->name, a->ns, k)) && a->name[k] == ':' ? a->name + k + 1 : a->name;
}

static void al_put_counts(rd__mbuf *b, const uint64_t *counts, int json) {
  if (json) rd__mbuf_printf(b, "{");
  for (int k = 0, sep = 0; k < RD_AS_NSTATES; k++) {
    if (json) rd__mbuf_printf(b, "%s\"%s\":%llu", k ? "," : "", rd__actor_list_state_name(k), (unsigned long long)counts[k]);
    else if (counts[k])
      rd__mbuf_printf(b, "%s%s %llu", sep++ ? ", " : "", rd__actor_list_state_name(k), (unsigned long long)counts[k]);
  }
  if (json) rd__mbuf_printf(b, "}");
}

void rd__dashboard_actors(rd__mbuf *b, int json, size_t limit, int state) {
  size_t total = 0;
  for (node_actor *a = N.actors; a; a = a->next) total += !rd__node_actor_hosted(a);
  node_actor **rows = total ? malloc(total * sizeof(*rows)) : NULL;
  tally *cls = malloc(TALLY_MAX * sizeof(*cls));
  if ((total && !rows) || !cls) {
    free(rows);
    free(cls);
    b->oom = 1;
    return;
  }
  uint64_t counts[RD_AS_NSTATES] = {0};
  size_t n = 0, ncls = 0;
  for (node_actor *a = N.actors; a; a = a->next) {
    if (rd__node_actor_hosted(a)) continue;
    int s = al_state(a);
    counts[s]++;
    tally *c = tally_slot(cls, &ncls, a->cls);
    c->counts[s]++;
    c->total++;
    if (state < 0 || s == state) rows[n++] = a;
  }
  if (ncls) qsort(cls, ncls, sizeof(*cls), tally_more);
  if (n) qsort(rows, n, sizeof(*rows), al_order);
  if (n > limit) n = limit;
  uint64_t now = rd__now_ns();
  char owner[64], det[600], most[16];
  uint32_t node;
  int pid;
  if (json) {
    rd__mbuf_printf(b, "{\"node\":%u,\"actors\":%zu,\"counts\":", rd__cluster_index(), total);
    al_put_counts(b, counts, 1);
    rd__mbuf_printf(b, ",\"by_class\":[");
    for (size_t i = 0; i < ncls; i++) {
      rd__mbuf_printf(b, "%s{\"class\":", i ? "," : "");
      rd__mbuf_json_cstr(b, cls[i].name);
      rd__mbuf_printf(b, ",\"actors\":%llu,\"counts\":", (unsigned long long)cls[i].total);
      al_put_counts(b, cls[i].counts, 1);
      rd__mbuf_printf(b, "}");
    }
    rd__mbuf_printf(b, "],\"list\":[");
    for (size_t i = 0; i < n; i++) {
      const node_actor *a = rows[i];
      char res[200];
      al_owner(a, owner, sizeof(owner));
      al_where(a, &node, &pid);
      al_detail(a, now, det, sizeof(det));
      rd_res_format(&a->res, res, sizeof(res));
      rd__mbuf_printf(b, "%s{\"id\":\"%016llx\",\"class\":", i ? "," : "", (unsigned long long)a->id);
      rd__mbuf_json_cstr(b, a->cls);
      rd__mbuf_printf(b, ",\"name\":");
      if (a->name) rd__mbuf_json_cstr(b, al_name(a));
      else rd__mbuf_printf(b, "null");
      rd__mbuf_printf(b, ",\"namespace\":");
      if (a->ns) rd__mbuf_json_cstr(b, a->ns);
      else rd__mbuf_printf(b, "null");
      rd__mbuf_printf(b, ",\"state\":\"%s\",\"node\":%u,\"pid\":%d,\"restarts\":%d,\"max_restarts\":%d,\"owner\":",
                      rd__actor_list_state_name(al_state(a)), node, pid, a->restarts, a->max_restarts);
      rd__mbuf_json_cstr(b, owner);
      rd__mbuf_printf(b, ",\"detached\":%s,\"job\":%u,\"pg_id\":", a->detached ? "true" : "false",
                      rd__node_actor_gcs_job(a));
      if (a->pg_id) rd__mbuf_printf(b, "\"%016llx\"", (unsigned long long)a->pg_id);
      else rd__mbuf_printf(b, "null");
      rd__mbuf_printf(b, ",\"required\":");
      rd__mbuf_res_asked(b, &a->res);
      rd__mbuf_printf(b, ",\"resources\":");
      rd__mbuf_json_cstr(b, res);
      rd__mbuf_printf(b, ",\"age_s\":%.3f,\"dead_for_s\":%.3f,\"detail\":", (double)(now - a->created_ns) / 1e9,
                      a->ended_ns ? (double)(now - a->ended_ns) / 1e9 : 0.0);
      rd__mbuf_json_cstr(b, det);
      rd__mbuf_printf(b, "}");
    }
    rd__mbuf_printf(b, "]}\n");
  } else {
    rd__mbuf_printf(b, "node %u: %zu actors", rd__cluster_index(), total);
    if (total) {
      rd__mbuf_printf(b, " (");
      al_put_counts(b, counts, 0);
      rd__mbuf_printf(b, ")");
    }
    rd__mbuf_printf(b, "\n");
    if (ncls) rd__mbuf_printf(b, "  by class:\n");
    for (size_t i = 0; i < ncls; i++) {
      rd__mbuf_printf(b, "    %-24s %8llu  ", cls[i].name, (unsigned long long)cls[i].total);
      al_put_counts(b, cls[i].counts, 0);
      rd__mbuf_printf(b, "\n");
    }
    if (n)
      rd__mbuf_printf(b, "  %-16s %-16s %-16s %-16s %4s %7s %8s %8s %-18s %s\n", "ID", "CLASS", "NAME", "STATE", "NODE",
                      "PID", "RESTARTS", "AGE", "OWNER", "DETAIL");
    for (size_t i = 0; i < n; i++) {
      const node_actor *a = rows[i];
      char where[16], pids[16], restarts[32];
      al_owner(a, owner, sizeof(owner));
      al_where(a, &node, &pid);
      al_detail(a, now, det, sizeof(det));
      if (pid || a->host) snprintf(where, sizeof(where), "%u", node);
      else snprintf(where, sizeof(where), "-");
      if (pid) snprintf(pids, sizeof(pids), "%d", pid);
      else snprintf(pids, sizeof(pids), "-");
      if (a->max_restarts < 0) snprintf(most, sizeof(most), "inf");
      else snprintf(most, sizeof(most), "%d", a->max_restarts);
      snprintf(restarts, sizeof(restarts), "%d/%s", a->restarts, most);
      rd__mbuf_printf(b, "  %016llx %-16s %-16s %-16s %4s %7s %8s %7.1fs %-18s %s\n", (unsigned long long)a->id, a->cls,
                      a->name ? al_name(a) : "-", rd__actor_list_state_name(al_state(a)), where, pids, restarts,
                      (double)(now - a->created_ns) / 1e9, owner, det);
    }
  }
  free(rows);
  free(cls);
}

/* ------------------------------------------------------------- workers */

/* ,"log":"worker-WID-JOB-PID" (its files' name, less .out and .err) when
 * the node keeps its workers' output in files. */
static void workers_files(rd__mbuf *b, uint32_t wid, uint32_t job, int pid) {
  if (!N.worker_files) return;
  char name[64];
  rd__wlog_name(name, sizeof(name), wid, job, pid);
  rd__mbuf_printf(b, ",\"log\":\"%s\"", name);
}

/* The i-th newest of the exited workers kept (i < N.nexited). */
static const node_exited *exited_nth(size_t i) {
  return &N.exited[(N.exited_next + N.exited_max - 1 - i) % N.exited_max];
}

int rd__worker_list_state_parse(const char *s) {
  return !strcasecmp(s, "ALIVE") ? RD_WL_ALIVE : !strcasecmp(s, "EXITED") ? RD_WL_EXITED : -1;
}

void rd__dashboard_workers_text(rd__mbuf *b, size_t limit, int which) {
  int counts[W_DEAD + 1] = {0}, alive = 0;
  for (const node_worker *w = N.workers; w; w = w->next)
    if (w->state != W_DEAD) counts[w->state]++, alive++;
  rd__mbuf_printf(b, "node %u: %d workers alive (", rd__cluster_index(), alive);
  for (int s = W_STARTING; s <= W_DYING; s++)
    rd__mbuf_printf(b, "%s%s %d", s > W_STARTING ? ", " : "", rd__worker_state_names[s], counts[s]);
  rd__mbuf_printf(b, "), %zu exited kept\n", N.nexited);
  uint64_t now = rd__wall_ms();
  size_t k = 0;
  for (const node_worker *w = N.workers; which != RD_WL_EXITED && w && k < limit; w = w->next) {
    if (w->state == W_DEAD) continue;
    if (!k++) rd__mbuf_printf(b, "  %-8s %7s %-8s %5s %-16s %8s\n", "WORKER", "PID", "STATE", "JOB", "ACTOR", "AGE");
    char actor[20] = "-";
    if (w->actor) snprintf(actor, sizeof(actor), "%016llx", (unsigned long long)w->actor->id);
    rd__mbuf_printf(b, "  %08x %7d %-8s %5u %-16s %7.1fs\n", w->id, w->pid, rd__worker_state_names[w->state], w->gcs_job,
                    actor, w->launch_ms && now > w->launch_ms ? (double)(now - w->launch_ms) / 1e3 : 0.0);
  }
  for (size_t i = 0; which != RD_WL_ALIVE && i < N.nexited && i < limit; i++) {   /* the last to exit first */
    const node_exited *e = exited_nth(i);
    if (!i)
      rd__mbuf_printf(b, "  exited, the last first:\n  %-8s %7s %-20s %9s %8s %-16s %s\n", "WORKER", "PID", "EXIT",
                      "ENDED", "RAN", "ACTOR", "DETAIL");
    char actor[20] = "-";
    if (e->actor) snprintf(actor, sizeof(actor), "%016llx", (unsigned long long)e->actor);
    rd__mbuf_printf(b, "  %08x %7d %-20s %8.1fs %7.1fs %-16s %s\n", e->id, e->pid, e->type,
                    now > e->end_ms ? (double)(now - e->end_ms) / 1e3 : 0.0,
                    e->end_ms > e->launch_ms && e->launch_ms ? (double)(e->end_ms - e->launch_ms) / 1e3 : 0.0, actor,
                    e->detail);
  }
}

/* ray list runtime-envs: each env set (rd_task_opts.env, rd_actor_opts.env)
 * this node's job variants start workers with, once however many jobs use
 * it: those jobs, their live workers (Ray's ref_cnt: the tasks and actors
 * that use it), the first worker's launch-to-join time (Ray's
 * creation_time_ms; -1 none yet) and what keeps workers from starting with
 * it (NULL: nothing). */
typedef struct env_row {
  const node_env *env;
  int jobs, refs;
  long long create_ms;
  const char *error;
} env_row;

static size_t env_rows(env_row **out) {
  size_t n = 0, cap = 0;
  env_row *v = NULL;
  for (const node_job *j = N.jobs; j; j = j->next) {
    if (!j->env) continue;
    size_t i = 0;
    while (i < n && v[i].env != j->env) i++;
    if (i == n) {
      if (n == cap) {
        size_t nc = cap ? 2 * cap : 16;
        env_row *g = realloc(v, nc * sizeof(*g));
        if (!g) break;   /* what fits is listed */
        v = g;
        cap = nc;
      }
      v[n++] = (env_row){.env = j->env, .create_ms = -1};
    }
    env_row *r = &v[i];
    r->jobs++;
    r->refs += j->nworkers;
    if (j->ready_seen && (r->create_ms < 0 || (long long)j->ready_ms < r->create_ms)) r->create_ms = (long long)j->ready_ms;
    /* its workers do not start (the last ones died before joining), and none runs */
    if (j->spawn_error[0] && j->nworkers == 0 && (j->spawn_failures > 0 || !j->ready_seen)) r->error = j->spawn_error;
  }
  *out = v;
  return n;
}

void rd__dashboard_runtime_envs(rd__mbuf *b, size_t limit) {
  env_row *v;
  size_t n = env_rows(&v);
  rd__mbuf_printf(b, "{\"node\":%u,\"envs\":[", rd__cluster_index());
  for (size_t i = 0; i < n && i < limit; i++) {
    rd__mbuf_printf(b, "%s{\"vars\":[", i ? "," : "");
    for (size_t k = 0; k < v[i].env->n; k++) {
      if (k) rd__mbuf_printf(b, ",");
      rd__mbuf_json_cstr(b, v[i].env->vars[k]);
    }
    rd__mbuf_printf(b, "],\"jobs\":%d,\"refs\":%d,\"create_ms\":", v[i].jobs, v[i].refs);
    if (v[i].create_ms >= 0) rd__mbuf_printf(b, "%lld", v[i].create_ms);
    else rd__mbuf_printf(b, "null");
    rd__mbuf_printf(b, ",\"error\":");
    if (v[i].error) rd__mbuf_json_cstr(b, v[i].error);
    else rd__mbuf_printf(b, "null");
    rd__mbuf_printf(b, "}");
  }
  rd__mbuf_printf(b, "]}\n");
  free(v);
}

void rd__dashboard_runtime_envs_text(rd__mbuf *b, size_t limit) {
  env_row *v;
  size_t n = env_rows(&v);
  rd__mbuf_printf(b, "node %u: %zu runtime env%s (env sets workers start with)\n", rd__cluster_index(), n,
                  n == 1 ? "" : "s");
  for (size_t i = 0; i < n && i < limit; i++) {
    if (!i) rd__mbuf_printf(b, "  %5s %5s %9s %-7s %s\n", "JOBS", "REFS", "STARTED", "STATE", "ENV");
    char started[24] = "-";
    if (v[i].create_ms >= 0) snprintf(started, sizeof(started), "%lld ms", v[i].create_ms);
    rd__mbuf_printf(b, "  %5d %5d %9s %-7s ", v[i].jobs, v[i].refs, started, v[i].error ? "FAILED" : "ok");
    for (size_t k = 0; k < v[i].env->n && k < 8; k++) rd__mbuf_printf(b, "%s%s", k ? " " : "", v[i].env->vars[k]);
    if (v[i].env->n > 8) rd__mbuf_printf(b, " ... (%zu variables)", v[i].env->n);
    if (v[i].error) rd__mbuf_printf(b, "\n        %s", v[i].error);
    rd__mbuf_printf(b, "\n");
  }
  free(v);
}

void rd__dashboard_workers(rd__mbuf *b, size_t limit) {
  size_t k = 0;
  rd__mbuf_printf(b, "{\"node\":%u,\"workers\":[", rd__cluster_index());
  for (const node_worker *w = N.workers; w && k < limit; w = w->next) {
    if (w->state == W_DEAD) continue;
    rd__mbuf_printf(b, "%s{\"id\":%u,\"pid\":%d,\"state\":\"%s\",\"job\":%u,\"launch_ms\":%llu,\"joined_ms\":%llu,"
                       "\"actor\":", k++ ? "," : "", w->id, w->pid, rd__worker_state_names[w->state], w->gcs_job,
                    (unsigned long long)w->launch_ms, (unsigned long long)w->joined_ms);
    if (w->actor) rd__mbuf_printf(b, "\"%016llx\"", (unsigned long long)w->actor->id);
    else rd__mbuf_printf(b, "null");
    workers_files(b, w->id, w->job->id, w->pid);
    rd__mbuf_printf(b, "}");
  }
  rd__mbuf_printf(b, "],\"exited_kept\":%zu,\"exited\":[", N.nexited);
  for (size_t i = 0; i < N.nexited && i < limit; i++) {   /* the last to exit first */
    const node_exited *e = exited_nth(i);
    rd__mbuf_printf(b, "%s{\"id\":%u,\"pid\":%d,\"job\":%u,\"launch_ms\":%llu,\"joined_ms\":%llu,\"end_ms\":%llu,"
                       "\"exit_type\":\"%s\",\"exit_detail\":", i ? "," : "", e->id, e->pid, e->gcs_job,
                    (unsigned long long)e->launch_ms, (unsigned long long)e->joined_ms, (unsigned long long)e->end_ms,
                    e->type);
    rd__mbuf_json_cstr(b, e->detail);
    if (e->actor) rd__mbuf_printf(b, ",\"actor\":\"%016llx\"", (unsigned long long)e->actor);
    else rd__mbuf_printf(b, ",\"actor\":null");
    workers_files(b, e->id, e->job, e->pid);
    rd__mbuf_printf(b, "}");
  }
  rd__mbuf_printf(b, "],\"drivers\":[");
  k = 0;
  for (const node_client *c = N.clients; c && k < limit; c = c->next) {
    if (c->dead || c->role != ROLE_DRIVER) continue;
    rd__mbuf_printf(b, "%s{\"id\":%u,\"pid\":%d,\"job\":%u}", k++ ? "," : "", c->id, c->pid, rd__node_client_gcs_job(c));
  }
  rd__mbuf_printf(b, "]}\n");
}
