/* runtime/state_api.c - Ray's state API on the node's metrics port, so
 * that `ray list nodes|actors|tasks|placement-groups|jobs`, `ray get ...` and
 * `ray summary tasks|actors`, pointed at any node (`--address
 * http://IP:PORT`), show the whole cluster.
 *
 * A request is read on the loop (its query: limit, detail, timeout and
 * Ray's filter triples), then gathered on the thread pool: the GCS's node,
 * placement-group and job tables, or every live node's own /api/actors,
 * /api/tasks (what `raydist list` shows) or /api/jobs/ (its submitted
 * jobs) over HTTP, one node after the other within the request's
 * timeout.  The rows get Ray's columns
 * (ray.util.state.common: ActorState, TaskState, NodeState,
 * PlacementGroupState, JobDetails), are filtered as Ray's server filters them
 * (case-insensitive text, whole numbers, booleans; = and !=), cut to the
 * limit, and sent in Ray's envelope:
 *
 *   {"result": true, "msg": "", "data": {"result": {"total", "num_after_truncation",
 *    "num_filtered", "result": [row, ...], "partial_failure_warning", "warnings"}}}
 *
 * A node that does not answer is named in partial_failure_warning and
 * the others are listed all the same.  Bad input (an unknown column, a
 * predicate other than = and !=, a filter value of the wrong type, a
 * limit past 10000) is a 400 with {"result": false, "msg": why}.
 * Workers, objects, runtime envs (the env sets workers start with) and logs
 * come from every live node's own endpoints, cluster events from the GCS's
 * event table.  An embedded node (no GCS) serves it too, as its cluster's
 * one node, with its own token; the GCS's tables are then empty, with a
 * warning that says so. */
#include "state_api.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cluster.h"
#include "common.h"
#include "conn.h"   /* rd__wall_ms */
#include "gcs_client.h"
#include "json.h"
#include "log_files.h"
#include "metrics.h"
#include "pg.h"
#include "raydist/error.h"

#define SA_MAX_LIMIT 10000             /* Ray's RAY_MAX_LIMIT_FROM_API_SERVER */
#define SA_DEFAULT_LIMIT 100
#define SA_MAX_FILTERS 16
#define SA_NODE_MAX_BYTES ((size_t)64 << 20)

enum { K_NODES, K_ACTORS, K_TASKS, K_PGS, K_JOBS, K_OBJECTS, K_WORKERS, K_EVENTS, K_ENVS, K_LOGS, K_LOG_FILE };
enum { T_STR, T_INT, T_BOOL, T_JSON };          /* a column's type, as Ray's schema has it */
enum { V_NULL, V_STR, V_INT, V_BOOL, V_JSON };  /* a cell's value (V_JSON: s is JSON text) */

typedef struct col {
  const char *name;
  int type, filterable, detail;
} col;

/* ------------------------------------------------------------- columns */

static const col node_cols[] = {
    {"node_id", T_STR, 1, 0},      {"node_ip", T_STR, 1, 0},       {"is_head_node", T_BOOL, 1, 0},
    {"state", T_STR, 1, 0},        {"state_message", T_STR, 0, 0}, {"node_name", T_STR, 1, 0},
    {"resources_total", T_JSON, 0, 0}, {"labels", T_JSON, 0, 0},   {"start_time_ms", T_INT, 0, 1},
    {"end_time_ms", T_INT, 0, 1}};
enum { N_ID, N_IP, N_HEAD, N_STATE, N_MSG, N_NAME, N_RES, N_LABELS, N_START, N_END };

static const col actor_cols[] = {
    {"actor_id", T_STR, 1, 0},
    {"class_name", T_STR, 1, 0},
    {"state", T_STR, 1, 0},
    {"job_id", T_STR, 1, 0},
    {"name", T_STR, 1, 0},
    {"node_id", T_STR, 1, 0},
    {"pid", T_INT, 1, 0},
    {"ray_namespace", T_STR, 1, 0},
    {"serialized_runtime_env", T_STR, 0, 1},
    {"required_resources", T_JSON, 0, 1},
    {"death_cause", T_JSON, 0, 1},
    {"is_detached", T_BOOL, 0, 1},
    {"placement_group_id", T_STR, 1, 1},
    {"repr_name", T_STR, 1, 1},
    {"num_restarts", T_INT, 0, 1},
    {"num_restarts_due_to_lineage_reconstruction", T_INT, 0, 1},
    {"num_restarts_due_to_node_preemption", T_INT, 0, 1},
    {"call_site", T_STR, 0, 1},
    {"label_selector", T_JSON, 0, 1},
    {"fallback_strategy", T_JSON, 0, 1}};
enum { A_ID, A_CLASS, A_STATE, A_JOB, A_NAME, A_NODE, A_PID, A_NS, A_ENV, A_RES, A_DEATH, A_DETACHED, A_PG, A_REPR,
       A_RESTARTS, A_RESTARTS_LINEAGE, A_RESTARTS_PREEMPT };

static const col pg_cols[] = {{"placement_group_id", T_STR, 1, 0}, {"name", T_STR, 1, 0},
                              {"creator_job_id", T_STR, 1, 0},     {"state", T_STR, 1, 0},
                              {"bundles", T_JSON, 0, 1},           {"is_detached", T_BOOL, 1, 1},
                              {"stats", T_JSON, 0, 1},             {"topology_strategy", T_JSON, 0, 1},
                              {"topology_assignments", T_JSON, 0, 1}};
enum { P_ID, P_NAME, P_JOB, P_STATE, P_BUNDLES, P_DETACHED, P_STATS };

static const col task_cols[] = {
    {"task_id", T_STR, 1, 0},           {"attempt_number", T_INT, 1, 0},   {"name", T_STR, 1, 0},
    {"state", T_STR, 1, 0},             {"job_id", T_STR, 1, 0},           {"actor_id", T_STR, 1, 0},
    {"type", T_STR, 1, 0},              {"func_or_class_name", T_STR, 1, 0}, {"parent_task_id", T_STR, 1, 0},
    {"node_id", T_STR, 1, 0},           {"worker_id", T_STR, 1, 0},        {"worker_pid", T_INT, 1, 0},
    {"error_type", T_STR, 1, 0},        {"language", T_STR, 1, 1},         {"required_resources", T_JSON, 0, 1},
    {"runtime_env_info", T_JSON, 0, 1}, {"placement_group_id", T_STR, 1, 1}, {"events", T_JSON, 0, 1},
    {"profiling_data", T_JSON, 0, 1},   {"creation_time_ms", T_INT, 0, 1}, {"start_time_ms", T_INT, 0, 1},
    {"end_time_ms", T_INT, 0, 1},       {"task_log_info", T_JSON, 0, 1},   {"error_message", T_STR, 0, 1},
    {"is_debugger_paused", T_BOOL, 1, 1}, {"call_site", T_STR, 0, 1},      {"label_selector", T_JSON, 0, 1},
    {"fallback_strategy", T_JSON, 0, 1}};
enum { TK_ID, TK_ATTEMPT, TK_NAME, TK_STATE, TK_JOB, TK_ACTOR, TK_TYPE, TK_FUNC, TK_PARENT, TK_NODE, TK_WORKER,
       TK_WORKER_PID, TK_ERR_TYPE, TK_LANG, TK_RES, TK_ENV, TK_PG, TK_EVENTS, TK_PROF, TK_CREATED, TK_STARTED, TK_ENDED,
       TK_LOG, TK_ERR_MSG };

/* Ray's JobDetails, in its order; ray list jobs shows the first eight. */
static const col job_cols[] = {
    {"type", T_STR, 1, 0},         {"job_id", T_STR, 1, 0},   {"submission_id", T_STR, 1, 0},
    {"driver_info", T_JSON, 0, 0}, {"status", T_STR, 1, 0},   {"entrypoint", T_STR, 0, 0},
    {"message", T_STR, 0, 0},      {"error_type", T_STR, 0, 0}, {"start_time", T_INT, 0, 1},
    {"end_time", T_INT, 0, 1},     {"metadata", T_JSON, 0, 1}, {"runtime_env", T_JSON, 0, 1},
    {"driver_agent_http_address", T_STR, 0, 1}, {"driver_node_id", T_STR, 0, 1}, {"driver_exit_code", T_INT, 0, 1}};
enum { J_TYPE, J_ID, J_SUB, J_DRIVER, J_STATUS, J_ENTRY, J_MSG, J_ERR, J_START, J_END, J_META, J_ENV, J_AGENT, J_NODE,
       J_EXIT };

/* Ray's ObjectState; a row here is a copy in a node's store. */
static const col object_cols[] = {{"object_id", T_STR, 1, 0},    {"object_size", T_INT, 1, 0},
                                  {"task_status", T_STR, 1, 0},  {"attempt_number", T_INT, 1, 0},
                                  {"reference_type", T_STR, 1, 0}, {"call_site", T_STR, 1, 0},
                                  {"type", T_STR, 1, 0},         {"pid", T_INT, 1, 0},
                                  {"ip", T_STR, 1, 0}};
enum { O_ID, O_SIZE, O_STATUS, O_ATTEMPT, O_REF, O_SITE, O_TYPE, O_PID, O_IP };

/* Ray's WorkerState: the worker processes and drivers each node has now. */
static const col worker_cols[] = {
    {"worker_id", T_STR, 1, 0},   {"is_alive", T_BOOL, 1, 0},   {"worker_type", T_STR, 1, 0},
    {"exit_type", T_STR, 1, 0},   {"node_id", T_STR, 1, 0},     {"ip", T_STR, 1, 0},
    {"pid", T_INT, 1, 0},         {"exit_detail", T_STR, 0, 1}, {"worker_launch_time_ms", T_INT, 0, 1},
    {"worker_launched_time_ms", T_INT, 0, 1}, {"start_time_ms", T_INT, 0, 1}, {"end_time_ms", T_INT, 0, 1},
    {"debugger_port", T_INT, 1, 1}, {"num_paused_threads", T_INT, 1, 1}};
enum { W_ID, W_ALIVE, W_TYPE, W_EXIT, W_NODE, W_IP, W_PID, W_DETAIL, W_LAUNCH, W_LAUNCHED, W_START, W_END };

/* Ray's RuntimeEnvState: an env set (rd_task_opts.env) workers start with
 * on a node. */
static const col env_cols[] = {{"runtime_env", T_JSON, 0, 0}, {"success", T_BOOL, 1, 0}, {"creation_time_ms", T_INT, 0, 0},
                               {"node_id", T_STR, 1, 0},      {"ref_cnt", T_INT, 0, 1},  {"error", T_STR, 1, 1}};
enum { RE_ENV, RE_OK, RE_CREATED, RE_NODE, RE_REFS, RE_ERR };

/* Ray's ClusterEventState */
static const col event_cols[] = {{"severity", T_STR, 1, 0},    {"time", T_STR, 0, 0},     {"source_type", T_STR, 1, 0},
                                 {"message", T_STR, 0, 0},     {"event_id", T_STR, 1, 0}, {"custom_fields", T_JSON, 0, 1}};
enum { E_SEVERITY, E_TIME, E_SOURCE, E_MSG, E_ID, E_FIELDS };

#define NCOLS(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------- requests */

typedef struct cell {
  int t;
  const char *s;            /* V_STR, V_JSON */
  long long i;              /* V_INT, V_BOOL */
} cell;

typedef struct filt {
  size_t col;
  int neg;                  /* != */
  char *val;
  long long i;              /* the value as a whole number (T_INT) or a boolean (T_BOOL) */
} filt;

typedef struct sa_req {
  uv_work_t work;
  int kind, summary, detail, ms;
  size_t limit;
  filt f[SA_MAX_FILTERS];
  size_t nf;
  rd__http_reply reply;
  void *arg;
  int embedded;             /* an embedded node's: no GCS, itself the one node */
  rd_gcs_node self;         /* ... as the GCS would describe it (taken on the loop) */
  const char *token;        /* for the node's own APIs that want one (the cluster's, or its own) */
  rd_gcs_pg *pgs;           /* an embedded node's groups (placement_groups; taken on the loop) */
  size_t npgs;
  /* built on the pool */
  const col *cols;
  size_t ncols;
  cell *cells;              /* nrows rows of ncols */
  size_t nrows, caprows;
  char **strs;              /* what cells point at */
  size_t nstrs, capstrs;
  uint64_t total;           /* rows the sources have (some may not have been sent) */
  rd__mbuf warn;            /* nodes that did not answer */
  rd__mbuf summ;            /* a summary's "summary" object members */
  struct sum_group {        /* a summary's groups (a class, a function), merged over the nodes */
    const char *name;       /* kept */
    int method;             /* a function group that is an actor's method */
    size_t n;
    const char *state[16];  /* Ray's names (static) */
    double count[16];
  } *groups;
  size_t ngroups, capgroups;
  uint64_t obj_bytes, obj_nodes, obj_owners, obj_unsealed, obj_pinned;   /* the objects' summary */
  struct actor_node {
    char id[24];
    uint32_t node;
  } *anodes;                /* where the actors run, for their calls' rows (sorted by id) */
  size_t nanodes, capanodes;
  struct wfile {            /* the workers' files, for the tasks' task_log_info (sorted by node and pid) */
    const char *node_id;    /* the GCS's node table's (alive while the request works) */
    int pid;
    const char *log;        /* kept */
  } *wfiles;
  size_t nwfiles, capwfiles;
  struct trange {           /* the tasks' ranges in those files (sorted by node, task and attempt) */
    const char *node_id;
    const char *id;         /* kept */
    uint32_t attempt;
    const char *file[2];    /* kept: stdout's and stderr's (NULL: no range) */
    long long start[2], end[2];   /* -1: not known */
  } *tranges;
  size_t ntranges, captranges;
  uint32_t *subjobs;        /* GCS jobs a submitted job's driver started: no DRIVER row of their own */
  size_t nsubjobs, capsubjobs;
  struct {                  /* K_LOGS, K_LOG_FILE: which node's logs, which file */
    char node_id[80], node_ip[64], glob[256], filename[256], actor[80], task[80], sub[128], suffix[8];
    long long pid, lines;
    int stat;               /* stat=true: where the file is and how long, not its text */
    char range[96];         /* offset=, end=, stat= passed on as they came */
  } lg;
  int oom, code;
  char err[600];
  rd__mbuf out;
} sa_req;

/* Ray's envelope around an error: {"result": false, "msg": why, "data": {}}. */
static void put_error(rd__mbuf *b, const char *why) {
  rd__mbuf_printf(b, "{\"result\": false, \"msg\": ");
  rd__mbuf_json_cstr(b, why);
  rd__mbuf_printf(b, ", \"data\": {}}\n");
}

static void refuse(rd__http_reply reply, void *arg, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void refuse(rd__http_reply reply, void *arg, int code, const char *fmt, ...) {
  char msg[800];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  rd__mbuf b = {0};
  put_error(&b, msg);
  static const char oom[] = "{\"result\": false, \"msg\": \"node out of memory\", \"data\": {}}\n";
  if (b.oom) reply(arg, 500, oom, sizeof(oom) - 1);
  else reply(arg, code, b.p, b.len);
  free(b.p);
}

/* The same as one line of text (a log's errors). */
static void refuse_line(rd__http_reply reply, void *arg, int code, const char *why) {
  char line[700];
  int n = snprintf(line, sizeof(line), "%s\n", why);
  reply(arg, code, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

static void req_free(sa_req *q) {
  for (size_t i = 0; i < q->nf; i++) free(q->f[i].val);
  for (size_t i = 0; i < q->nstrs; i++) free(q->strs[i]);
  free(q->strs);
  free(q->cells);
  free(q->warn.p);
  free(q->summ.p);
  free(q->out.p);
  free(q->anodes);
  free(q->wfiles);
  free(q->pgs);
  free(q->tranges);
  free(q->subjobs);
  free(q->groups);
  free(q);
}

/* A copy of s kept until the request ends (NULL: out of memory). */
static const char *keep(sa_req *q, const char *s, size_t n) {
  if (q->nstrs == q->capstrs) {
    size_t cap = q->capstrs ? 2 * q->capstrs : 256;
    char **v = realloc(q->strs, cap * sizeof(*v));
    if (!v) return q->oom = 1, NULL;
    q->strs = v;
    q->capstrs = cap;
  }
  char *c = malloc(n + 1);
  if (!c) return q->oom = 1, NULL;
  memcpy(c, s, n);
  c[n] = 0;
  q->strs[q->nstrs++] = c;
  return c;
}

/* A new row, every cell null; NULL when out of memory. */
static cell *row_new(sa_req *q) {
  if (q->nrows == q->caprows) {
    size_t cap = q->caprows ? 2 * q->caprows : 64;
    cell *v = realloc(q->cells, cap * q->ncols * sizeof(*v));
    if (!v) return q->oom = 1, NULL;
    q->cells = v;
    q->caprows = cap;
  }
  cell *r = q->cells + q->nrows++ * q->ncols;
  memset(r, 0, q->ncols * sizeof(*r));
  return r;
}

static void set_str(sa_req *q, cell *c, const char *s) {
  if (s && (c->s = keep(q, s, strlen(s)))) c->t = V_STR;
}
static void set_fmt(sa_req *q, cell *c, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_fmt(sa_req *q, cell *c, const char *fmt, ...) {
  char s[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s, sizeof(s), fmt, ap);
  va_end(ap);
  set_str(q, c, s);
}
static void set_int(cell *c, long long v) { c->t = V_INT, c->i = v; }
static void set_bool(cell *c, int v) { c->t = V_BOOL, c->i = !!v; }
/* b's text as the cell's JSON; b is freed. */
static void set_json(sa_req *q, cell *c, rd__mbuf *b) {
  if (b->oom) q->oom = 1;
  else if (b->p && (c->s = keep(q, b->p, b->len))) c->t = V_JSON;
  free(b->p);
  *b = (rd__mbuf){0};
}

/* ---------------------------------------------------------- JSON helpers */

/* v written back as JSON. */
static void json_put(rd__mbuf *b, const rd_json *v) {
  switch (v->type) {
    case RD_JSON_NULL: rd__mbuf_printf(b, "null"); break;
    case RD_JSON_FALSE: rd__mbuf_printf(b, "false"); break;
    case RD_JSON_TRUE: rd__mbuf_printf(b, "true"); break;
    case RD_JSON_NUMBER: rd__mbuf_printf(b, "%.15g", v->num); break;   /* 0.1, not 0.10000000000000001 */
    case RD_JSON_STRING: rd__mbuf_json_cstr(b, v->str); break;
    default: {
      int obj = v->type == RD_JSON_OBJECT;
      rd__mbuf_printf(b, "%c", obj ? '{' : '[');
      for (const rd_json *c = v->child; c; c = c->next) {
        if (c != v->child) rd__mbuf_printf(b, ",");
        if (obj) {
          rd__mbuf_json_cstr(b, c->key);
          rd__mbuf_printf(b, ":");
        }
        json_put(b, c);
      }
      rd__mbuf_printf(b, "%c", obj ? '}' : ']');
    }
  }
}

static const char *jstr(const rd_json *o, const char *key) {
  const rd_json *v = rd_json_get(o, key);
  return v && v->type == RD_JSON_STRING ? v->str : NULL;
}
static double jnum(const rd_json *o, const char *key) {
  const rd_json *v = rd_json_get(o, key);
  return v && v->type == RD_JSON_NUMBER ? v->num : 0;
}

/* A resource text as an owner words it ("{CPU: 1, GPU: 0, only_b: 1}" or
 * "CPU=1 GPU=0.5") as a JSON object of the amounts above zero. */
static void res_text_json(rd__mbuf *b, const char *s) {
  int k = 0;
  rd__mbuf_printf(b, "{");
  while (s && *s) {
    while (*s == '{' || *s == '}' || *s == ',' || *s == ' ') s++;
    const char *name = s;
    while (*s && *s != ':' && *s != '=' && *s != ',' && *s != '}') s++;
    size_t nl = (size_t)(s - name);
    while (nl && name[nl - 1] == ' ') nl--;
    if (*s != ':' && *s != '=') continue;
    char *end;
    double v = strtod(s + 1, &end);
    s = end == s + 1 ? s + 1 : end;
    if (!nl || !(v > 0)) continue;
    char nm[128];
    snprintf(nm, sizeof(nm), "%.*s", (int)(nl < sizeof(nm) ? nl : sizeof(nm) - 1), name);
    rd__mbuf_printf(b, "%s", k++ ? "," : "");
    rd__mbuf_json_cstr(b, nm);
    rd__mbuf_printf(b, ":%g", v);
  }
  rd__mbuf_printf(b, "}");
}

/* ------------------------------------------------------------- sources */

/* Node index among the GCS's nodes, or NULL. */
static const rd_gcs_node *node_of(const rd_gcs_node *nodes, size_t n, uint32_t index) {
  for (size_t i = 0; (index || !rd__cluster_on()) && i < n; i++)   /* an embedded node is 0 */
    if (nodes[i].index == index) return &nodes[i];
  return NULL;
}

/* Its hex id, or NULL. */
static const char *node_id_of(const rd_gcs_node *nodes, size_t n, uint32_t index) {
  const rd_gcs_node *x = node_of(nodes, n, index);
  return x ? x->node_id : NULL;
}

static void res_total_json(rd__mbuf *b, const rd_gcs_node *x) {
  rd__mbuf_printf(b, "{\"CPU\":%g", rd_res_to_double(x->total.cpu));
  if (x->total.gpu) rd__mbuf_printf(b, ",\"GPU\":%g", rd_res_to_double(x->total.gpu));
  if (x->total.memory) rd__mbuf_printf(b, ",\"memory\":%lld", (long long)x->total.memory);
  if (x->store_capacity) rd__mbuf_printf(b, ",\"object_store_memory\":%llu", (unsigned long long)x->store_capacity);
  for (int i = 0; i < x->total.ncustom; i++) {
    rd__mbuf_printf(b, ",");
    rd__mbuf_json_cstr(b, x->total.custom[i].name);
    rd__mbuf_printf(b, ":%g", rd_res_to_double(rd_res_get_custom(&x->total, x->total.custom[i].name)));
  }
  rd__mbuf_printf(b, "}");
}

/* "key=value,..." as a JSON object. */
static void labels_json(rd__mbuf *b, const char *labels) {
  rd__mbuf_printf(b, "{");
  for (const char *p = labels; p && *p;) {
    size_t n = strcspn(p, ",");
    const char *eq = memchr(p, '=', n);
    if (eq) {
      char k[RD_LABELS_LEN], v[RD_LABELS_LEN];
      snprintf(k, sizeof(k), "%.*s", (int)(eq - p), p);
      snprintf(v, sizeof(v), "%.*s", (int)(n - (size_t)(eq - p) - 1), eq + 1);
      rd__mbuf_printf(b, "%s", p == labels ? "" : ",");
      rd__mbuf_json_cstr(b, k);
      rd__mbuf_printf(b, ":");
      rd__mbuf_json_cstr(b, v);
    }
    p += n + (p[n] == ',');
  }
  rd__mbuf_printf(b, "}");
}

static void nodes_rows(sa_req *q, const rd_gcs_node *nodes, size_t n) {
  q->total = n;
  for (size_t i = 0; i < n && !q->oom; i++) {
    const rd_gcs_node *x = &nodes[i];
    cell *r = row_new(q);
    if (!r) return;
    rd__mbuf b = {0};
    set_str(q, &r[N_ID], x->node_id);
    set_str(q, &r[N_IP], x->ip);
    set_bool(&r[N_HEAD], x->is_head);
    set_str(q, &r[N_STATE], x->state == RD_GCS_NODE_ALIVE ? "ALIVE" : "DEAD");
    if (x->state != RD_GCS_NODE_ALIVE && x->death_reason[0]) set_str(q, &r[N_MSG], x->death_reason);
    set_str(q, &r[N_NAME], x->ip);
    res_total_json(&b, x);
    set_json(q, &r[N_RES], &b);
    labels_json(&b, x->labels);
    set_json(q, &r[N_LABELS], &b);
    if (x->start_ms) set_int(&r[N_START], (long long)x->start_ms);   /* 0: a record from before 2026-12-05 */
    if (x->end_ms) set_int(&r[N_END], (long long)x->end_ms);
  }
}

static void pgs_rows(sa_req *q, const rd_gcs_pg *pgs, size_t n, const rd_gcs_node *nodes, size_t nn) {
  static const char *strategies[] = {"PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"};
  q->total = n;
  for (size_t i = 0; i < n && !q->oom; i++) {
    const rd_gcs_pg *g = &pgs[i];
    cell *r = row_new(q);
    if (!r) return;
    char st[32];
    snprintf(st, sizeof(st), "%s", rd_gcs_pg_state_name(g->state));
    for (char *c = st; *c; c++) *c = (char)(*c >= 'a' && *c <= 'z' ? *c - 32 : *c);
    set_fmt(q, &r[P_ID], "%016llx", (unsigned long long)g->pg_id);
    set_str(q, &r[P_NAME], g->name);
    if (g->creator_job) set_fmt(q, &r[P_JOB], "%u", g->creator_job);
    else set_str(q, &r[P_JOB], "");   /* not known (a group recorded before 2026-12-05): a str in Ray's schema */
    set_str(q, &r[P_STATE], st);
    rd__mbuf b = {0};
    rd__mbuf_printf(&b, "[");
    for (size_t k = 0; k < g->nbundles; k++) {
      const char *nid = !q->embedded                ? node_id_of(nodes, nn, g->bundle_nodes[k])
                        : g->bundle_nodes[k] && nn ? nodes[0].node_id   /* placed: on the one node */
                                                   : NULL;
      rd__mbuf_printf(&b, "%s{\"bundle_id\":\"%016llx:%zu\",\"node_id\":", k ? "," : "", (unsigned long long)g->pg_id, k);
      if (nid) rd__mbuf_json_cstr(&b, nid);
      else rd__mbuf_printf(&b, "null");
      rd__mbuf_printf(&b, ",\"unit_resources\":");
      rd__mbuf_res_asked(&b, &g->bundles[k]);
      rd__mbuf_printf(&b, "}");
    }
    rd__mbuf_printf(&b, "]");
    set_json(q, &r[P_BUNDLES], &b);
    rd__mbuf_printf(&b, "{\"scheduling_state\":\"%s\",\"strategy\":\"%s\",\"reason\":", st,
                    g->strategy >= 0 && g->strategy < 4 ? strategies[g->strategy] : "?");
    rd__mbuf_json_cstr(&b, g->reason);
    rd__mbuf_printf(&b, "}");
    set_json(q, &r[P_STATS], &b);
  }
}

/* GET path from every live node (token: sent as a bearer token, or NULL),
 * all at once within the request's timeout: each answer parsed, given to each(); a node that does not
 * answer in time (it does not hold up the others), or answers what is not
 * JSON, is named in q->warn. */
static void each_node(sa_req *q, const rd_gcs_node *nodes, size_t n, const char *path, const char *token, int type,
                      void (*each)(sa_req *, const rd_gcs_node *, const rd_json *, const rd_gcs_node *, size_t)) {
  rd__http_fetch *v = calloc(n ? n : 1, sizeof(*v));
  size_t *at = calloc(n ? n : 1, sizeof(*at));
  if (!v || !at) {
    free(v);
    free(at);
    q->oom = 1;
    return;
  }
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    const rd_gcs_node *x = &nodes[i];
    if (x->state != RD_GCS_NODE_ALIVE) continue;
    if (x->metrics_port <= 0) {
      rd__mbuf_printf(&q->warn, "%snode %u (%s): no metrics endpoint (started with --metrics-port -1)",
                      q->warn.len ? "; " : "", x->index, x->ip);
      continue;
    }
    v[k] = (rd__http_fetch){.ip = x->ip, .port = x->metrics_port, .path = path};
    at[k++] = i;
  }
  rd__http_get_all(v, k, token, q->ms, SA_NODE_MAX_BYTES);
  for (size_t f = 0; f < k; f++) {
    const rd_gcs_node *x = &nodes[at[f]];
    char why[400];
    snprintf(why, sizeof(why), "%s", v[f].why);
    rd_json *root = NULL;
    if (v[f].rc == 0 && !q->oom) {
      char jwhy[200] = "";
      root = rd_json_parse(v[f].body, v[f].len, jwhy, sizeof(jwhy));
      if (!root || root->type != type)
        snprintf(why, sizeof(why), "its answer is not a JSON %s%s%s", type == RD_JSON_ARRAY ? "array" : "object",
                 jwhy[0] ? ": " : "", jwhy);
    }
    free(v[f].body);
    if (root && root->type == type) each(q, x, root, nodes, n);
    else if (!q->oom) rd__mbuf_printf(&q->warn, "%snode %u (%s): %s", q->warn.len ? "; " : "", x->index, x->ip, why);
    free(root);
  }
  free(v);
  free(at);
}

static const char *ray_task_state(const char *s);
static const char *node_state(int kind, const char *ray_state);

/* The summary's group of name (made when new; NULL: out of memory). */
static struct sum_group *group(sa_req *q, const char *name) {
  for (size_t i = 0; i < q->ngroups; i++)
    if (!strcmp(q->groups[i].name, name)) return &q->groups[i];
  if (q->ngroups == q->capgroups) {
    size_t cap = q->capgroups ? 2 * q->capgroups : 64;
    struct sum_group *v = realloc(q->groups, cap * sizeof(*v));
    if (!v) return q->oom = 1, NULL;
    q->groups = v;
    q->capgroups = cap;
  }
  const char *k = keep(q, name, strlen(name));
  if (!k) return NULL;
  q->groups[q->ngroups] = (struct sum_group){.name = k};
  return &q->groups[q->ngroups++];
}

/* n more in state (a static name) of group g. */
static void group_add(struct sum_group *g, const char *state, double n) {
  size_t j = 0;
  while (j < g->n && strcmp(g->state[j], state) != 0) j++;
  if (j == g->n && g->n < 16) g->state[g->n] = state, g->count[g->n++] = 0;
  if (j < g->n) g->count[j] += n;
}

/* The groups as the members of Ray's "summary" object. */
static void groups_put(sa_req *q) {
  for (size_t i = 0; i < q->ngroups; i++) {
    const struct sum_group *g = &q->groups[i];
    rd__mbuf_printf(&q->summ, "%s", i ? ", " : "");
    rd__mbuf_json_cstr(&q->summ, g->name);
    rd__mbuf_printf(&q->summ, q->kind == K_ACTORS ? ": {\"class_name\": " : ": {\"func_or_class_name\": ");
    rd__mbuf_json_cstr(&q->summ, g->name);
    if (q->kind == K_TASKS) rd__mbuf_printf(&q->summ, ", \"type\": \"%s\"", g->method ? "ACTOR_TASK" : "NORMAL_TASK");
    rd__mbuf_printf(&q->summ, ", \"state_counts\": {");
    for (size_t j = 0; j < g->n; j++) rd__mbuf_printf(&q->summ, "%s\"%s\": %.0f", j ? ", " : "", g->state[j], g->count[j]);
    rd__mbuf_printf(&q->summ, "}}");
  }
}

static void actors_of(sa_req *q, const rd_gcs_node *x, const rd_json *root, const rd_gcs_node *nodes, size_t n) {
  (void)x;
  q->total += (uint64_t)jnum(root, "actors");
  const rd_json *list = rd_json_get(root, "list");
  for (const rd_json *a = list && list->type == RD_JSON_ARRAY ? list->child : NULL; a && !q->oom; a = a->next) {
    cell *r = row_new(q);
    if (!r) return;
    const char *state = jstr(a, "state");
    int job = (int)jnum(a, "job"), pid = (int)jnum(a, "pid");
    set_str(q, &r[A_ID], jstr(a, "id"));
    set_str(q, &r[A_CLASS], jstr(a, "class"));
    set_str(q, &r[A_STATE], state);
    if (job > 0) set_fmt(q, &r[A_JOB], "%d", job);
    else set_str(q, &r[A_JOB], "");   /* a str in Ray's schema: none known (a detached actor's) */
    set_str(q, &r[A_NAME], jstr(a, "name") ? jstr(a, "name") : "");
    set_str(q, &r[A_NODE], node_id_of(nodes, n, (uint32_t)jnum(a, "node")));
    if (pid > 0) set_int(&r[A_PID], pid);
    set_str(q, &r[A_NS], jstr(a, "namespace"));
    const rd_json *req = rd_json_get(a, "required");
    rd__mbuf b = {0};
    if (req && req->type == RD_JSON_OBJECT) {
      json_put(&b, req);
      set_json(q, &r[A_RES], &b);
    }
    if (state && !strcmp(state, "DEAD")) {
      rd__mbuf_printf(&b, "{\"actor_died_error_context\":{\"error_message\":");
      rd__mbuf_json_cstr(&b, jstr(a, "detail") ? jstr(a, "detail") : "dead");
      rd__mbuf_printf(&b, "}}");
      set_json(q, &r[A_DEATH], &b);
    }
    const rd_json *det = rd_json_get(a, "detached");
    set_bool(&r[A_DETACHED], det && det->type == RD_JSON_TRUE);
    set_str(q, &r[A_PG], jstr(a, "pg_id"));
    set_str(q, &r[A_REPR], "");
    set_int(&r[A_RESTARTS], (long long)jnum(a, "restarts"));
    set_int(&r[A_RESTARTS_LINEAGE], 0);
    set_int(&r[A_RESTARTS_PREEMPT], 0);
  }
  /* the summary: by class */
  const rd_json *cls = rd_json_get(root, "by_class");
  for (const rd_json *c = cls && cls->type == RD_JSON_ARRAY ? cls->child : NULL; c; c = c->next) {
    const rd_json *counts = rd_json_get(c, "counts");
    struct sum_group *g = jstr(c, "class") && counts && counts->type == RD_JSON_OBJECT ? group(q, jstr(c, "class")) : NULL;
    for (const rd_json *st = g ? counts->child : NULL; st; st = st->next) {
      const char *name = node_state(K_ACTORS, st->key);
      if (st->type == RD_JSON_NUMBER && st->num > 0 && name) group_add(g, name, st->num);
    }
  }
}

/* Ray's name for a task state the node's owners report. */
static const char *ray_task_state(const char *s) {
  static const char *map[][2] = {{"PENDING_ARGS", "PENDING_ARGS_AVAIL"},
                                 {"PENDING_LEASE", "PENDING_NODE_ASSIGNMENT"},
                                 {"RETRY_BACKOFF", "PENDING_NODE_ASSIGNMENT"},
                                 {"PENDING_ACTOR", "PENDING_ACTOR_TASK_ORDERING_OR_CONCURRENCY"},
                                 {"SUBMITTED", "SUBMITTED_TO_WORKER"},
                                 {"RUNNING", "RUNNING"},
                                 {"FAILED", "FAILED"},
                                 {"FINISHED", "FINISHED"}};
  for (size_t i = 0; s && i < sizeof(map) / sizeof(map[0]); i++)
    if (!strcmp(s, map[i][0])) return map[i][1];
  return "NIL";
}

/* The node's name for the state Ray calls ray_state (any case), when it is
 * exactly one of the node's (an actor's states have Ray's names; two task
 * states are Ray's PENDING_NODE_ASSIGNMENT); NULL else. */
static const char *node_state(int kind, const char *ray_state) {
  if (kind == K_ACTORS) {
    int s = rd__actor_list_state_parse(ray_state);
    return s >= 0 ? rd__actor_list_state_name(s) : NULL;
  }
  const char *found = NULL;
  for (int s = 0; s <= RD_TS_FINISHED; s++)
    if (!strcasecmp(ray_task_state(rd__task_state_name(s)), ray_state)) {
      if (found) return NULL;
      found = rd__task_state_name(s);
    }
  return found;
}

/* An actor id as the node's JSON has it, or NULL for none ("000...0"). */
static const char *actor_or_null(const char *id) { return id && strspn(id, "0") != strlen(id) ? id : NULL; }

/* A method of an actor ("Class.method") rather than a function. */
static int is_method(const char *func) { return func && strchr(func, '.') != NULL; }

static void task_common(sa_req *q, cell *r, const rd_gcs_node *x, const rd_json *t) {
  const char *func = jstr(t, "func");
  const char *actor = actor_or_null(jstr(t, "actor_id"));
  int job = (int)jnum(t, "job");
  char id[RD_TASK_ID_TEXT];
  rd__task_id_text(id, sizeof(id), x->index, (int)jnum(t, "owner_pid"), (uint64_t)jnum(t, "task_id"));
  set_str(q, &r[TK_ID], id);
  set_int(&r[TK_ATTEMPT], (long long)jnum(t, "attempt"));
  set_str(q, &r[TK_NAME], func);
  if (job > 0) set_fmt(q, &r[TK_JOB], "%d", job);
  else set_str(q, &r[TK_JOB], "");
  const char *parent = jstr(t, "parent");   /* the task whose run submitted it ("" none, or a failure's) */
  set_str(q, &r[TK_PARENT], parent ? parent : "");
  set_str(q, &r[TK_ACTOR], actor);
  set_str(q, &r[TK_TYPE], actor || is_method(func) ? "ACTOR_TASK" : "NORMAL_TASK");
  set_str(q, &r[TK_FUNC], func);
  set_str(q, &r[TK_LANG], "C");
}

static void tasks_of(sa_req *q, const rd_gcs_node *x, const rd_json *root, const rd_gcs_node *nodes, size_t n) {
  uint64_t now = rd__wall_ms();
  q->total += (uint64_t)jnum(root, "unfinished") + (uint64_t)jnum(root, "failed_kept") + (uint64_t)jnum(root, "finished_kept");
  const rd_json *list = rd_json_get(root, "tasks");
  for (const rd_json *t = list && list->type == RD_JSON_ARRAY ? list->child : NULL; t && !q->oom; t = t->next) {
    cell *r = row_new(q);
    if (!r) return;
    task_common(q, r, x, t);
    set_str(q, &r[TK_STATE], ray_task_state(jstr(t, "state")));
    int wpid = (int)jnum(t, "worker_pid");
    if (wpid > 0) set_int(&r[TK_WORKER_PID], wpid);
    set_str(q, &r[TK_NODE], node_id_of(nodes, n, (uint32_t)jnum(t, "worker_node")));
    const char *res = jstr(t, "resources");
    rd__mbuf b = {0};
    if (res && *res) {
      res_text_json(&b, res);
      set_json(q, &r[TK_RES], &b);
    }
    long long created = (long long)jnum(t, "created_ms");   /* the owner's clock, as start and end */
    set_int(&r[TK_CREATED], created > 0 ? created : (long long)now - (long long)(jnum(t, "age_s") * 1000));
    long long started = (long long)jnum(t, "start_ms"), ended = (long long)jnum(t, "end_ms");
    if (started > 0) set_int(&r[TK_STARTED], started);
    if (ended > 0) set_int(&r[TK_ENDED], ended);
  }
  const rd_json *fails = rd_json_get(root, "failures");
  for (const rd_json *t = fails && fails->type == RD_JSON_ARRAY ? fails->child : NULL; t && !q->oom; t = t->next) {
    cell *r = row_new(q);
    if (!r) return;
    task_common(q, r, x, t);
    set_str(q, &r[TK_STATE], "FAILED");
    int wpid = (int)jnum(t, "worker_pid");   /* the worker it ran on last, if any */
    if (wpid > 0) {
      set_int(&r[TK_WORKER_PID], wpid);
      set_str(q, &r[TK_NODE], node_id_of(nodes, n, (uint32_t)jnum(t, "worker_node")));
    }
    set_str(q, &r[TK_ERR_TYPE], jstr(t, "status"));
    set_str(q, &r[TK_ERR_MSG], jstr(t, "error"));
    long long ended = (long long)now - (long long)(jnum(t, "ago_s") * 1000);
    set_int(&r[TK_ENDED], ended);
    set_int(&r[TK_CREATED], ended - (long long)(jnum(t, "age_s") * 1000));
  }
  /* the summary: by function, the node's states in Ray's names (two of
   * theirs are one of Ray's: added up) */
  const rd_json *fns = rd_json_get(root, "by_function");
  for (const rd_json *f = fns && fns->type == RD_JSON_ARRAY ? fns->child : NULL; f; f = f->next) {
    const rd_json *counts = rd_json_get(f, "counts");
    const char *func = jstr(f, "func");
    struct sum_group *g = func && counts && counts->type == RD_JSON_OBJECT ? group(q, func) : NULL;
    if (!g) continue;
    g->method = is_method(func);
    for (const rd_json *st = counts->child; st; st = st->next)
      if (st->type == RD_JSON_NUMBER && st->num > 0) group_add(g, ray_task_state(st->key), st->num);
  }
  /* owners that did not answer */
  const rd_json *owners = rd_json_get(root, "owners");
  for (const rd_json *o = owners && owners->type == RD_JSON_ARRAY ? owners->child : NULL; o; o = o->next) {
    const rd_json *ans = rd_json_get(o, "answered");
    if (ans && ans->type == RD_JSON_FALSE)
      rd__mbuf_printf(&q->warn, "%snode %u (%s): %s did not answer", q->warn.len ? "; " : "", x->index, x->ip,
                      jstr(o, "who") ? jstr(o, "who") : "an owner");
  }
}

/* A JSON value as a cell: text, a whole number, a boolean, null, or (an
 * object, an array, a fraction) its JSON. */
static void set_from_json(sa_req *q, cell *c, const rd_json *v) {
  if (!v || v->type == RD_JSON_NULL) return;
  if (v->type == RD_JSON_STRING) set_str(q, c, v->str);
  else if (v->type == RD_JSON_TRUE || v->type == RD_JSON_FALSE) set_bool(c, v->type == RD_JSON_TRUE);
  else if (v->type == RD_JSON_NUMBER && v->num == (double)(long long)v->num) set_int(c, (long long)v->num);
  else {
    rd__mbuf b = {0};
    json_put(&b, v);
    set_json(q, c, &b);
  }
}

/* The GCS's job table: each driver's run, as Ray lists a driver job. */
static void drivers_rows(sa_req *q, const rd_gcs_job *js, size_t n, const rd_gcs_node *nodes, size_t nn) {
  q->total += n;
  for (size_t i = 0; i < n && !q->oom; i++) {
    const rd_gcs_job *j = &js[i];
    cell *r = row_new(q);
    if (!r) return;
    const rd_gcs_node *x = node_of(nodes, nn, j->node_index);
    const char *ip = x ? x->ip : "";
    int ok = j->end_ms && !strcmp(j->end_reason, "its drivers exited");
    set_str(q, &r[J_TYPE], "DRIVER");
    set_fmt(q, &r[J_ID], "%u", j->job_id);
    rd__mbuf b = {0};
    rd__mbuf_printf(&b, "{\"id\":\"%u\",\"node_ip_address\":", j->job_id);
    rd__mbuf_json_cstr(&b, ip);
    rd__mbuf_printf(&b, ",\"pid\":\"%d\"}", j->driver_pid);
    set_json(q, &r[J_DRIVER], &b);
    set_str(q, &r[J_STATUS], !j->end_ms ? "RUNNING" : ok ? "SUCCEEDED" : "FAILED");
    set_str(q, &r[J_ENTRY], "");
    if (j->end_ms) set_str(q, &r[J_MSG], j->end_reason);
    set_int(&r[J_START], (long long)j->start_ms);
    if (j->end_ms) set_int(&r[J_END], (long long)j->end_ms);
    set_str(q, &r[J_NODE], x ? x->node_id : NULL);
  }
}

/* A node's jobs API list: its submitted jobs, their JobDetails as Ray's
 * SDK reads them, with the node in driver_info.  Their job_id is null
 * here: the jobs API's is the node's own number, which the GCS's driver
 * runs (DRIVER rows) would be taken for. */
static void submissions_of(sa_req *q, const rd_gcs_node *x, const rd_json *root, const rd_gcs_node *nodes, size_t n) {
  for (const rd_json *j = root->child; j && !q->oom; j = j->next) {
    if (j->type != RD_JSON_OBJECT) continue;
    q->total++;
    cell *r = row_new(q);
    if (!r) return;
    for (size_t k = 0; k < q->ncols; k++) set_from_json(q, &r[k], rd_json_get(j, q->cols[k].name));
    const char *gj = jstr(j, "gcs_job_id");   /* the GCS job its driver runs in, once it has joined */
    const rd_json *started = rd_json_get(j, "gcs_job_started");
    if (gj && *gj && started && started->type == RD_JSON_TRUE && q->nsubjobs < 100000) {
      if (q->nsubjobs == q->capsubjobs) {
        size_t cap = q->capsubjobs ? 2 * q->capsubjobs : 16;
        uint32_t *v = realloc(q->subjobs, cap * sizeof(*v));
        if (!v) return (void)(q->oom = 1);
        q->subjobs = v;
        q->capsubjobs = cap;
      }
      q->subjobs[q->nsubjobs++] = (uint32_t)strtoul(gj, NULL, 10);
    }
    const rd_json *pid = rd_json_get(j, "driver_pid");
    if (pid && pid->type == RD_JSON_NUMBER) {
      rd__mbuf b = {0};
      rd__mbuf_printf(&b, "{\"id\":");
      rd__mbuf_json_cstr(&b, gj && *gj ? gj : "");
      rd__mbuf_printf(&b, ",\"node_ip_address\":");
      rd__mbuf_json_cstr(&b, x->ip);
      rd__mbuf_printf(&b, ",\"pid\":\"%.0f\"}", pid->num);
      set_json(q, &r[J_DRIVER], &b);
    }
    set_str(q, &r[J_NODE], x->node_id);
    r[J_ID].t = V_NULL;   /* not the jobs API's job_id (the node's own number): the GCS job, once known */
    if (gj && *gj) set_str(q, &r[J_ID], gj);
  }
}

/* The DRIVER rows of GCS jobs a submission's driver started go: the
 * SUBMISSION row stands for them, with their job id (Ray lists a submitted
 * job once). */
static void drivers_of_submissions_drop(sa_req *q) {
  size_t w = 0;
  for (size_t i = 0; i < q->nrows; i++) {
    cell *r = q->cells + i * q->ncols;
    int drop = 0;
    if (r[J_TYPE].t == V_STR && !strcmp(r[J_TYPE].s, "DRIVER") && r[J_ID].t == V_STR) {
      uint32_t id = (uint32_t)strtoul(r[J_ID].s, NULL, 10);
      for (size_t k = 0; k < q->nsubjobs && !drop; k++) drop = q->subjobs[k] == id;
    }
    if (drop) {
      q->total--;
      continue;
    }
    if (w != i) memmove(q->cells + w * q->ncols, r, q->ncols * sizeof(*r));
    w++;
  }
  q->nrows = w;
}

/* A node's store (/api/objects): its largest objects as rows, its totals
 * for the summary. */
static void objects_of(sa_req *q, const rd_gcs_node *x, const rd_json *root, const rd_gcs_node *nodes, size_t n) {
  (void)nodes, (void)n;
  uint64_t objs = (uint64_t)jnum(root, "objects");
  q->total += objs;
  q->obj_bytes += (uint64_t)jnum(root, "bytes_in_memory") + (uint64_t)jnum(root, "bytes_spilled");
  q->obj_nodes += objs > 0;
  q->obj_unsealed += (uint64_t)jnum(root, "unsealed");
  const rd_json *own = rd_json_get(root, "by_owner");
  for (const rd_json *o = own && own->type == RD_JSON_ARRAY ? own->child : NULL; o; o = o->next) q->obj_owners++;
  const rd_json *list = rd_json_get(root, "largest");
  for (const rd_json *o = list && list->type == RD_JSON_ARRAY ? list->child : NULL; o && !q->oom; o = o->next) {
    const char *state = jstr(o, "state"), *role = jstr(o, "owner_role");
    int pinned = jnum(o, "pins") > 0;
    q->obj_pinned += pinned;
    if (q->summary) continue;
    cell *r = row_new(q);
    if (!r) return;
    set_str(q, &r[O_ID], jstr(o, "id"));
    set_int(&r[O_SIZE], (long long)jnum(o, "size"));
    set_str(q, &r[O_STATUS], state && !strcmp(state, "unsealed") ? "NIL" : "FINISHED");
    set_int(&r[O_ATTEMPT], 0);
    set_str(q, &r[O_REF], pinned ? "PINNED_IN_MEMORY" : "LOCAL_REFERENCE");
    set_str(q, &r[O_SITE], "disabled");
    set_str(q, &r[O_TYPE], role && !strcmp(role, "driver") ? "DRIVER" : "WORKER");
    set_int(&r[O_PID], (long long)jnum(o, "owner_pid"));
    set_str(q, &r[O_IP], x->ip);
  }
}

/* A worker's times (ms; 0: not known) into its row. */
static void worker_times(cell *r, const rd_json *w) {
  long long launch = (long long)jnum(w, "launch_ms"), joined = (long long)jnum(w, "joined_ms");
  long long end = (long long)jnum(w, "end_ms");
  if (launch > 0) set_int(&r[W_LAUNCH], launch);
  if (joined > 0) set_int(&r[W_LAUNCHED], joined), set_int(&r[W_START], joined);
  if (end > 0) set_int(&r[W_END], end);
}

/* A node's /api/workers: its workers (worker_id NODE-w-ID), alive and the
 * last that exited (with Ray's exit type and why), and the drivers
 * connected to it (NODE-d-ID). */
static void workers_of(sa_req *q, const rd_gcs_node *x, const rd_json *root, const rd_gcs_node *nodes, size_t n) {
  static const char *kinds[] = {"workers", "drivers", "exited"};
  for (int k = 0; k < 3; k++) {
    const rd_json *list = rd_json_get(root, kinds[k]);
    for (const rd_json *w = list && list->type == RD_JSON_ARRAY ? list->child : NULL; w && !q->oom; w = w->next) {
      q->total++;
      cell *r = row_new(q);
      if (!r) return;
      const char *state = jstr(w, "state");
      set_fmt(q, &r[W_ID], "%04x-%c-%08x", x->index & 0xffffu, k == 1 ? 'd' : 'w', (unsigned)jnum(w, "id"));
      set_bool(&r[W_ALIVE], k != 2 && (!state || strcmp(state, "dying") != 0));
      set_str(q, &r[W_TYPE], k == 1 ? "DRIVER" : "WORKER");
      set_str(q, &r[W_NODE], x->node_id);
      set_str(q, &r[W_IP], x->ip);
      set_int(&r[W_PID], (long long)jnum(w, "pid"));
      set_str(q, &r[W_EXIT], jstr(w, "exit_type"));
      set_str(q, &r[W_DETAIL], jstr(w, "exit_detail"));
      worker_times(r, w);
    }
  }
}

/* A node's /api/runtime_envs: its env sets, {"env_vars": {...}} each. */
static void envs_of(sa_req *q, const rd_gcs_node *x, const rd_json *root, const rd_gcs_node *nodes, size_t n) {
  (void)nodes, (void)n;
  const rd_json *list = rd_json_get(root, "envs");
  for (const rd_json *e = list && list->type == RD_JSON_ARRAY ? list->child : NULL; e && !q->oom; e = e->next) {
    q->total++;
    cell *r = row_new(q);
    if (!r) return;
    rd__mbuf b = {0};
    rd__mbuf_printf(&b, "{\"env_vars\": {");
    const rd_json *vars = rd_json_get(e, "vars");
    int k = 0;
    for (const rd_json *v = vars && vars->type == RD_JSON_ARRAY ? vars->child : NULL; v; v = v->next) {
      const char *eq = v->type == RD_JSON_STRING ? strchr(v->str, '=') : NULL;
      if (!eq) continue;
      char name[256];
      snprintf(name, sizeof(name), "%.*s", (int)(eq - v->str), v->str);
      rd__mbuf_printf(&b, "%s", k++ ? ", " : "");
      rd__mbuf_json_cstr(&b, name);
      rd__mbuf_printf(&b, ": ");
      rd__mbuf_json_cstr(&b, eq + 1);
    }
    rd__mbuf_printf(&b, "}}");
    set_json(q, &r[RE_ENV], &b);
    const char *err = jstr(e, "error");
    set_bool(&r[RE_OK], !err);
    const rd_json *cm = rd_json_get(e, "create_ms");
    if (cm && cm->type == RD_JSON_NUMBER) set_int(&r[RE_CREATED], (long long)cm->num);
    set_str(q, &r[RE_NODE], x->node_id);
    set_int(&r[RE_REFS], (long long)jnum(e, "refs"));
    set_str(q, &r[RE_ERR], err);
  }
}

/* Where a node's actors run (its /api/actors), for the actor calls' rows. */
static void actor_nodes_of(sa_req *q, const rd_gcs_node *x, const rd_json *root, const rd_gcs_node *nodes, size_t n) {
  (void)x, (void)nodes, (void)n;
  const rd_json *list = rd_json_get(root, "list");
  for (const rd_json *a = list && list->type == RD_JSON_ARRAY ? list->child : NULL; a && !q->oom; a = a->next) {
    const char *id = jstr(a, "id");
    uint32_t node = (uint32_t)jnum(a, "node");
    if (!id || !node) continue;
    if (q->nanodes == q->capanodes) {
      size_t cap = q->capanodes ? 2 * q->capanodes : 64;
      struct actor_node *v = realloc(q->anodes, cap * sizeof(*v));
      if (!v) return (void)(q->oom = 1);
      q->anodes = v;
      q->capanodes = cap;
    }
    snprintf(q->anodes[q->nanodes].id, sizeof(q->anodes[0].id), "%s", id);
    q->anodes[q->nanodes++].node = node;
  }
}

static int anode_cmp(const void *a, const void *b) {
  return strcmp(((const struct actor_node *)a)->id, ((const struct actor_node *)b)->id);
}

/* The actor calls' rows get their actor's node: the owner's connection to
 * an actor does not say where it runs, the actor's record does. */
static void actor_calls_nodes(sa_req *q, const rd_gcs_node *nodes, size_t n) {
  size_t calls = 0;
  for (size_t i = 0; i < q->nrows; i++) {
    const cell *r = q->cells + i * q->ncols;
    calls += r[TK_ACTOR].t == V_STR && r[TK_NODE].t == V_NULL;
  }
  if (!calls) return;
  each_node(q, nodes, n, "/api/actors?limit=10000", NULL, RD_JSON_OBJECT, actor_nodes_of);
  if (!q->nanodes) return;
  qsort(q->anodes, q->nanodes, sizeof(*q->anodes), anode_cmp);
  for (size_t i = 0; i < q->nrows; i++) {
    cell *r = q->cells + i * q->ncols;
    if (r[TK_ACTOR].t != V_STR || r[TK_NODE].t != V_NULL) continue;
    struct actor_node key;
    snprintf(key.id, sizeof(key.id), "%s", r[TK_ACTOR].s);
    const struct actor_node *f = bsearch(&key, q->anodes, q->nanodes, sizeof(*q->anodes), anode_cmp);
    if (f) set_str(q, &r[TK_NODE], node_id_of(nodes, n, f->node));
  }
}

/* A node's workers' files (its /api/workers' "log" of each live and
 * exited worker). */
static void wfiles_of(sa_req *q, const rd_gcs_node *x, const rd_json *root, const rd_gcs_node *nodes, size_t n) {
  (void)nodes, (void)n;
  static const char *kinds[] = {"workers", "exited"};
  for (int k = 0; k < 2; k++) {
    const rd_json *list = rd_json_get(root, kinds[k]);
    for (const rd_json *w = list && list->type == RD_JSON_ARRAY ? list->child : NULL; w && !q->oom; w = w->next) {
      const char *log = jstr(w, "log");
      if (!log) continue;
      if (q->nwfiles == q->capwfiles) {
        size_t cap = q->capwfiles ? 2 * q->capwfiles : 64;
        struct wfile *v = realloc(q->wfiles, cap * sizeof(*v));
        if (!v) return (void)(q->oom = 1);
        q->wfiles = v;
        q->capwfiles = cap;
      }
      const char *kept = keep(q, log, strlen(log));
      if (kept) q->wfiles[q->nwfiles++] = (struct wfile){x->node_id, (int)jnum(w, "pid"), kept};
    }
  }
}

static int wfile_cmp(const void *a, const void *b) {
  const struct wfile *x = a, *y = b;
  int c = strcmp(x->node_id, y->node_id);
  return c ? c : (x->pid > y->pid) - (x->pid < y->pid);
}

/* A node's tasks' ranges (its /api/task_lines), kept as they came: only
 * the rows' ones become task_log_info texts (trange_info). */
static void tranges_of(sa_req *q, const rd_gcs_node *x, const rd_json *root, const rd_gcs_node *nodes, size_t n) {
  (void)nodes, (void)n;
  static const char *const keys[2][3] = {{"out_file", "out_start", "out_end"}, {"err_file", "err_start", "err_end"}};
  const rd_json *list = rd_json_get(root, "tasks");
  for (const rd_json *t = list && list->type == RD_JSON_ARRAY ? list->child : NULL; t && !q->oom; t = t->next) {
    const char *id = jstr(t, "task_id");
    if (!id) continue;
    if (q->ntranges == q->captranges) {
      size_t cap = q->captranges ? 2 * q->captranges : 256;
      struct trange *v = realloc(q->tranges, cap * sizeof(*v));
      if (!v) return (void)(q->oom = 1);
      q->tranges = v;
      q->captranges = cap;
    }
    struct trange r = {x->node_id, keep(q, id, strlen(id)), (uint32_t)jnum(t, "attempt"), {NULL, NULL}, {-1, -1},
                       {-1, -1}};
    if (!r.id) return (void)(q->oom = 1);
    for (int i = 0; i < 2; i++) {
      const char *file = jstr(t, keys[i][0]);
      const rd_json *st = rd_json_get(t, keys[i][1]), *en = rd_json_get(t, keys[i][2]);
      if (!file || !st || st->type != RD_JSON_NUMBER) continue;
      if (!(r.file[i] = keep(q, file, strlen(file)))) return (void)(q->oom = 1);
      r.start[i] = (long long)st->num;
      if (en && en->type == RD_JSON_NUMBER) r.end[i] = (long long)en->num;
    }
    q->tranges[q->ntranges++] = r;
  }
}

/* Range t as Ray's task_log_info: each stream's file, start and end (null where not known). */
static void trange_info(rd__mbuf *b, const struct trange *t) {
  static const char *const ray[2] = {"stdout", "stderr"};
  rd__mbuf_printf(b, "{");
  for (int i = 0; i < 2; i++) {
    rd__mbuf_printf(b, "%s\"%s_file\": ", i ? ", " : "", ray[i]);
    if (t->file[i]) rd__mbuf_json_cstr(b, t->file[i]);
    else rd__mbuf_printf(b, "null");
    if (t->file[i]) rd__mbuf_printf(b, ", \"%s_start\": %lld", ray[i], t->start[i]);
    else rd__mbuf_printf(b, ", \"%s_start\": null", ray[i]);
    if (t->file[i] && t->end[i] >= 0) rd__mbuf_printf(b, ", \"%s_end\": %lld", ray[i], t->end[i]);
    else rd__mbuf_printf(b, ", \"%s_end\": null", ray[i]);
  }
  rd__mbuf_printf(b, "}");
}

static int trange_cmp(const void *a, const void *b) {
  const struct trange *x = a, *y = b;
  int c = strcmp(x->node_id, y->node_id);
  if (!c) c = strcasecmp(x->id, y->id);
  return c ? c : (x->attempt > y->attempt) - (x->attempt < y->attempt);
}

/* The detail rows' task_log_info (Ray's): the files of the worker each
 * task ran on and where in them the task's lines are, from its node's
 * /api/task_lines (the ranges its workers' marks gave); for a task the
 * node has no range of (an actor's call, unless recorded), the files
 * alone, from its /api/workers (the offsets null). */
static void task_log_files(sa_req *q, const rd_gcs_node *nodes, size_t n) {
  size_t with = 0;
  for (size_t i = 0; i < q->nrows; i++) {
    const cell *r = q->cells + i * q->ncols;
    with += r[TK_WORKER_PID].t == V_INT && r[TK_NODE].t == V_STR;
  }
  if (!with) return;
  each_node(q, nodes, n, "/api/workers?limit=10000", NULL, RD_JSON_OBJECT, wfiles_of);
  each_node(q, nodes, n, "/api/task_lines", NULL, RD_JSON_OBJECT, tranges_of);
  if (q->nwfiles) qsort(q->wfiles, q->nwfiles, sizeof(*q->wfiles), wfile_cmp);
  if (q->ntranges) qsort(q->tranges, q->ntranges, sizeof(*q->tranges), trange_cmp);
  for (size_t i = 0; i < q->nrows && !q->oom; i++) {
    cell *r = q->cells + i * q->ncols;
    if (r[TK_WORKER_PID].t != V_INT || r[TK_NODE].t != V_STR) continue;
    if (q->ntranges && r[TK_ID].t == V_STR && r[TK_ATTEMPT].t == V_INT) {
      struct trange tk = {.node_id = r[TK_NODE].s, .id = r[TK_ID].s, .attempt = (uint32_t)r[TK_ATTEMPT].i};
      const struct trange *t = bsearch(&tk, q->tranges, q->ntranges, sizeof(*q->tranges), trange_cmp);
      if (t) {
        rd__mbuf b = {0};
        trange_info(&b, t);
        set_json(q, &r[TK_LOG], &b);
        continue;
      }
    }
    struct wfile key = {r[TK_NODE].s, (int)r[TK_WORKER_PID].i, NULL};
    const struct wfile *f = q->nwfiles ? bsearch(&key, q->wfiles, q->nwfiles, sizeof(*q->wfiles), wfile_cmp) : NULL;
    if (!f) continue;
    rd__mbuf b = {0};
    rd__mbuf_printf(&b, "{\"stdout_file\": \"%s.out\", \"stdout_start\": null, \"stdout_end\": null, "
                        "\"stderr_file\": \"%s.err\", \"stderr_start\": null, \"stderr_end\": null}", f->log, f->log);
    set_json(q, &r[TK_LOG], &b);
  }
}

/* The GCS's cluster events, oldest first: the newest `limit` of them, or
 * every one kept when filters pick (render keeps the newest that match). */
static void events_rows(sa_req *q, rd_gcs *g) {
  rd_gcs_events ev;
  int rc = rd_gcs_event_list(g, 0, q->nf ? 0 : (uint32_t)q->limit, &ev);
  if (rc != 0) {
    q->code = 500;
    snprintf(q->err, sizeof(q->err), "cannot read the GCS's cluster events: %s", rd_gcs_last_error());
    return;
  }
  q->total = ev.last >= ev.first_kept ? ev.last - ev.first_kept + 1 : 0;
  if (ev.omitted)
    rd__mbuf_printf(&q->warn, "%llu older events were left out to keep the GCS's answer under %u MiB",
                    (unsigned long long)ev.omitted, RD_GCS_EVENTS_REPLY_MAX >> 20);
  for (size_t i = 0; i < ev.n && !q->oom; i++) {
    const rd_gcs_cluster_event *e = &ev.ev[i];
    cell *r = row_new(q);
    if (!r) break;
    set_str(q, &r[E_SEVERITY], e->severity);
    time_t t = (time_t)(e->time_ms / 1000);
    struct tm tm;
    char when[32] = "";
    if (localtime_r(&t, &tm)) strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);   /* Ray's str(datetime) */
    set_str(q, &r[E_TIME], when);
    set_str(q, &r[E_SOURCE], e->source);
    set_str(q, &r[E_MSG], e->message);
    set_fmt(q, &r[E_ID], "%llu", (unsigned long long)e->event_id);
    rd__mbuf b = {0};
    rd__mbuf_printf(&b, "{");
    for (size_t k = 0; k < e->nfields; k++) {
      rd__mbuf_printf(&b, "%s", k ? ", " : "");
      rd__mbuf_json_cstr(&b, e->fields[k].key);
      rd__mbuf_printf(&b, ": ");
      rd__mbuf_json_cstr(&b, e->fields[k].value);
    }
    if (e->pid) rd__mbuf_printf(&b, "%s\"pid\": %d", e->nfields ? ", " : "", e->pid);
    if (e->node_index) rd__mbuf_printf(&b, "%s\"node_index\": %u", e->nfields || e->pid ? ", " : "", e->node_index);
    rd__mbuf_printf(&b, "}");
    set_json(q, &r[E_FIELDS], &b);
  }
  rd_gcs_events_free(&ev);
}

/* ------------------------------------------------------- filter, render */

static int row_matches(const sa_req *q, const cell *r) {
  for (size_t i = 0; i < q->nf; i++) {
    const filt *f = &q->f[i];
    const cell *c = &r[f->col];
    int eq;
    if (c->t == V_NULL) eq = 0;
    else if (c->t == V_STR) eq = strcasecmp(c->s, f->val) == 0;
    else if (c->t == V_INT || c->t == V_BOOL) eq = c->i == f->i;
    else eq = 0;
    if (eq == f->neg) return 0;
  }
  return 1;
}

static void put_cell(rd__mbuf *b, const cell *c) {
  switch (c->t) {
    case V_STR: rd__mbuf_json_cstr(b, c->s); break;
    case V_INT: rd__mbuf_printf(b, "%lld", c->i); break;
    case V_BOOL: rd__mbuf_printf(b, "%s", c->i ? "true" : "false"); break;
    case V_JSON: rd__mbuf_printf(b, "%s", c->s); break;
    default: rd__mbuf_printf(b, "null");
  }
}

/* Rows by their first cell (an id): qsort of row pointers. */
static int by_first_col(const void *a, const void *b) {
  const cell *x = *(const cell *const *)a, *y = *(const cell *const *)b;
  return strcmp(x->t == V_STR ? x->s : "", y->t == V_STR ? y->s : "");
}

static void sort_rows(sa_req *q) {
  const cell **p = malloc(q->nrows * sizeof(*p));
  cell *v = malloc(q->nrows * q->ncols * sizeof(*v));
  if (p && v) {
    for (size_t i = 0; i < q->nrows; i++) p[i] = q->cells + i * q->ncols;
    qsort(p, q->nrows, sizeof(*p), by_first_col);
    for (size_t i = 0; i < q->nrows; i++) memcpy(v + i * q->ncols, p[i], q->ncols * sizeof(*v));
    free(q->cells);
    q->cells = v;
    q->caprows = q->nrows;
    v = NULL;
  }   /* out of memory: left as the nodes gave them */
  free(p);
  free(v);
}

static void render(sa_req *q) {
  rd__mbuf *b = &q->out;
  rd__mbuf_printf(b, "{\"result\": true, \"msg\": \"\", \"data\": {\"result\": {");
  if (q->summary) {
    uint64_t sums[2] = {0, 0};   /* actors, or normal tasks and actor calls: the groups' counts */
    for (size_t i = 0; i < q->ngroups; i++)
      for (size_t j = 0; j < q->groups[i].n; j++) sums[q->groups[i].method] += (uint64_t)q->groups[i].count[j];
    rd__mbuf_printf(b, "\"total\": %llu, \"num_after_truncation\": %llu, \"num_filtered\": %llu, ",
                    (unsigned long long)q->total, (unsigned long long)q->total, (unsigned long long)q->total);
    rd__mbuf_printf(b, "\"result\": {\"node_id_to_summary\": {\"cluster\": {\"summary\": {%s}, ", q->summ.p ? q->summ.p : "");
    if (q->kind == K_OBJECTS)
      rd__mbuf_printf(b, "\"total_objects\": %llu, \"total_size_mb\": %.3f, \"callsite_enabled\": false, "
                         "\"summary_by\": \"callsite\"}}}, ",
                      (unsigned long long)q->total, (double)q->obj_bytes / 1048576.0);
    else if (q->kind == K_TASKS)
      rd__mbuf_printf(b, "\"total_tasks\": %llu, \"total_actor_tasks\": %llu, \"total_actor_scheduled\": 0, "
                         "\"summary_by\": \"func_name\"}}}, ",
                      (unsigned long long)sums[0], (unsigned long long)sums[1]);
    else
      rd__mbuf_printf(b, "\"total_actors\": %llu, \"summary_by\": \"class\"}}}, ", (unsigned long long)sums[0]);
  } else {
    size_t shown = 0, matched = 0, skip = 0;
    rd__mbuf rows = {0};
    if (q->kind == K_EVENTS) {   /* the newest that match, oldest first */
      for (size_t i = 0; i < q->nrows; i++) skip += row_matches(q, q->cells + i * q->ncols);
      skip = skip > q->limit ? skip - q->limit : 0;
    }
    for (size_t i = 0; i < q->nrows; i++) {
      const cell *r = q->cells + i * q->ncols;
      if (!row_matches(q, r)) continue;
      if (matched++ < skip || matched - skip > q->limit) continue;
      rd__mbuf_printf(&rows, "%s{", shown++ ? ", " : "");
      for (size_t k = 0, sep = 0; k < q->ncols; k++) {
        if (q->cols[k].detail && !q->detail) continue;
        rd__mbuf_printf(&rows, "%s\"%s\": ", sep++ ? ", " : "", q->cols[k].name);
        put_cell(&rows, &r[k]);
      }
      rd__mbuf_printf(&rows, "}");
    }
    if (rows.oom) b->oom = 1;
    rd__mbuf_printf(b, "\"total\": %llu, \"num_after_truncation\": %zu, \"num_filtered\": %zu, \"result\": [%s], ",
                    (unsigned long long)(q->total > q->nrows ? q->total : q->nrows), q->nrows, matched,
                    rows.p ? rows.p : "");
    free(rows.p);
  }
  rd__mbuf_printf(b, "\"partial_failure_warning\": ");
  rd__mbuf_json_cstr(b, q->warn.p ? q->warn.p : "");
  rd__mbuf_printf(b, ", \"warnings\": null}}}\n");
}

/* --------------------------------------------------------------- logs
 *
 * GET /api/v0/logs?node_id=ID|node_ip=IP[&glob=G]: the node's log files
 * by Ray's categories; GET /api/v0/logs/file?...: one file's text, named
 * by filename (with the node), pid (with the node), actor_id or task_id
 * (their worker's file, found among the actors' and tasks' rows: the
 * worker's whole file, not the task's part of it), its last `lines`
 * lines (Ray's default 1000; -1 all).  Both are asked of the node that
 * has the files (log_files.c's /api/logs), whichever node is asked. */

/* The node the request names (node_id, else node_ip), or NULL with
 * q->code and q->err set. */
static const rd_gcs_node *logs_node(sa_req *q, const rd_gcs_node *nodes, size_t n, const char *id, const char *ip) {
  const rd_gcs_node *dead = NULL;
  for (size_t i = 0; i < n; i++) {
    if (id[0] ? strcasecmp(nodes[i].node_id, id) != 0 : strcmp(nodes[i].ip, ip) != 0) continue;
    if (nodes[i].state == RD_GCS_NODE_ALIVE) return &nodes[i];
    dead = &nodes[i];
  }
  q->code = 404;
  if (dead)
    snprintf(q->err, sizeof(q->err), "node %s (%s) is dead: its logs stay in its session directory on its machine",
             dead->node_id, dead->ip);
  else if (id[0]) snprintf(q->err, sizeof(q->err), "no node with node_id %.80s in the cluster", id);
  else snprintf(q->err, sizeof(q->err), "Cannot find matching node_id for a given node ip %.60s", ip);
  return NULL;
}

/* Ray's categories of a node's log files (log_manager's), as JSON members. */
static void logs_categorized(sa_req *q, const rd_json *files) {
  static const struct {
    const char *cat, *has, *ends;
  } cats[] = {{"worker_out", "worker", ".out"}, {"worker_err", "worker", ".err"}, {"raylet", "node.log", NULL},
              {"gcs_server", "gcs.log", NULL},  {"autoscaler", "autoscaler.log", NULL}};
  size_t ncat = sizeof(cats) / sizeof(cats[0]);
  rd__mbuf_printf(&q->out, "{\"result\": true, \"msg\": \"\", \"data\": {\"result\": {");
  int any = 0;
  for (size_t c = 0; c <= ncat; c++) {   /* the last round: what no category took ("internal") */
    int k = 0;
    for (const rd_json *f = files->child; f; f = f->next) {
      if (f->type != RD_JSON_STRING) continue;
      size_t l = strlen(f->str), m = 0;
      while (m < ncat && !(strstr(f->str, cats[m].has) &&
                           (!cats[m].ends || (l >= 4 && !strcmp(f->str + l - 4, cats[m].ends)))))
        m++;
      if (m != c) continue;
      if (!k++) rd__mbuf_printf(&q->out, "%s\"%s\": [", any++ ? ", " : "", c < ncat ? cats[c].cat : "internal");
      else rd__mbuf_printf(&q->out, ", ");
      rd__mbuf_json_cstr(&q->out, f->str);
    }
    if (k) rd__mbuf_printf(&q->out, "]");
  }
  rd__mbuf_printf(&q->out, "}}}\n");
}

/* The worker an actor or task ran on, from their rows: its node's id and
 * pid into node/pid; 0, or -1 with q->code and q->err set. */
static int logs_worker(sa_req *q, const rd_gcs_node *nodes, size_t n, char *node, size_t nlen, long long *pid) {
  int actor = q->lg.actor[0] != 0;
  const char *id = actor ? q->lg.actor : q->lg.task;
  q->cols = actor ? actor_cols : task_cols;
  q->ncols = actor ? NCOLS(actor_cols) : NCOLS(task_cols);
  each_node(q, nodes, n, actor ? "/api/actors?limit=10000" : "/api/tasks?limit=10000&finished=1", NULL,
            RD_JSON_OBJECT, actor ? actors_of : tasks_of);
  if (!actor) actor_calls_nodes(q, nodes, n);
  size_t cid = actor ? A_ID : TK_ID, cnode = actor ? A_NODE : TK_NODE, cpid = actor ? A_PID : TK_WORKER_PID;
  size_t cstate = actor ? A_STATE : TK_STATE;
  for (size_t i = 0; i < q->nrows; i++) {
    const cell *r = q->cells + i * q->ncols;
    if (r[cid].t != V_STR || strcasecmp(r[cid].s, id) != 0) continue;
    if (r[cnode].t != V_STR || r[cpid].t != V_INT || r[cpid].i <= 0) {
      q->code = 404;
      snprintf(q->err, sizeof(q->err), "%s %s has no worker process to read (it is %s)", actor ? "actor" : "task",
               id, r[cstate].t == V_STR ? r[cstate].s : "not placed");
      return -1;
    }
    snprintf(node, nlen, "%s", r[cnode].s);
    *pid = r[cpid].i;
    return 0;
  }
  q->code = 404;
  if (q->oom) snprintf(q->err, sizeof(q->err), "node out of memory");
  else if (actor) snprintf(q->err, sizeof(q->err), "no actor %.80s in the cluster%s%s", id, q->warn.len ? " (" : "",
                           q->warn.len ? q->warn.p : "");
  else snprintf(q->err, sizeof(q->err), "no task %.80s among the cluster's unfinished, failed and kept finished "
                                        "tasks%s%s", id, q->warn.len ? " (" : "", q->warn.len ? q->warn.p : "");
  if (q->warn.len) snprintf(q->err + strlen(q->err), sizeof(q->err) - strlen(q->err), ")");
  return -1;
}

static void logs_work(sa_req *q, const rd_gcs_node *nodes, size_t n) {
  char node_id[80];
  snprintf(node_id, sizeof(node_id), "%s", q->lg.node_id);
  long long pid = q->lg.pid;
  if ((q->lg.actor[0] || q->lg.task[0]) && logs_worker(q, nodes, n, node_id, sizeof(node_id), &pid) != 0) return;
  const rd_gcs_node *x = logs_node(q, nodes, n, node_id, q->lg.node_ip);
  if (!x) return;
  if (x->metrics_port <= 0) {
    q->code = 404;
    snprintf(q->err, sizeof(q->err), "node %s (%s) has no HTTP endpoint (started with --metrics-port -1)", x->node_id,
             x->ip);
    return;
  }
  rd__mbuf path = {0};
  if (q->kind == K_LOGS) {
    char g[3 * sizeof(q->lg.glob) + 1];
    rd__url_encode(g, sizeof(g), q->lg.glob);
    rd__mbuf_printf(&path, "/api/logs?glob=%s", g);
  } else {
    rd__mbuf_printf(&path, "/api/logs/file?suffix=%s&lines=%lld%s", q->lg.suffix, q->lg.lines, q->lg.range);
    char fn[3 * sizeof(q->lg.filename) + 1];
    rd__url_encode(fn, sizeof(fn), q->lg.filename);
    if (q->lg.filename[0]) rd__mbuf_printf(&path, "&filename=%s", fn);
    else rd__mbuf_printf(&path, "&pid=%lld", pid);
    if (q->lg.task[0]) {   /* the node has the task's range in that worker's files */
      char t[3 * sizeof(q->lg.task) + 1];
      rd__url_encode(t, sizeof(t), q->lg.task);
      rd__mbuf_printf(&path, "&task=%s", t);
    }
  }
  char *body = NULL;
  size_t len = 0;
  rd__http_fetch f = {.ip = x->ip, .port = x->metrics_port, .path = path.p};
  if (!path.oom) rd__http_get_all(&f, 1, q->token, q->ms, RD_LOGS_MAX_BYTES + 4096);
  free(path.p);
  body = f.body;
  len = f.len;
  if (path.oom || f.rc != 0) {
    q->code = path.oom ? 500 : f.status == 400 || f.status == 404 || f.status == 413 ? f.status : 502;
    snprintf(q->err, sizeof(q->err), "%s", path.oom ? "node out of memory" : f.why);
    free(body);
    return;
  }
  if (q->kind == K_LOG_FILE && !q->lg.stat) {   /* the text as it is */
    q->out = (rd__mbuf){.p = body, .len = len, .cap = len + 1};
    q->code = 200;
    return;
  }
  char jwhy[200] = "";
  rd_json *root = rd_json_parse(body, len, jwhy, sizeof(jwhy));
  if (q->kind == K_LOG_FILE) {   /* a stat: where the file is, for the next asks (raydist logs --follow) */
    const char *name = root ? jstr(root, "filename") : NULL;
    if (name) {
      rd__mbuf_printf(&q->out, "{\"node_id\": \"%s\", \"node_ip\": \"%s\", \"filename\": ", x->node_id, x->ip);
      rd__mbuf_json_cstr(&q->out, name);
      rd__mbuf_printf(&q->out, ", \"size\": %.0f, \"inode\": %.0f}\n", jnum(root, "size"), jnum(root, "inode"));
    }
    q->code = !name ? 502 : q->out.oom ? 500 : 200;
    if (q->code != 200) snprintf(q->err, sizeof(q->err), "%s", name ? "node out of memory" : "a bad stat answer");
    free(root);
    free(body);
    return;
  }
  const rd_json *files = root ? rd_json_get(root, "files") : NULL;
  if (files && files->type == RD_JSON_ARRAY) {
    logs_categorized(q, files);
    q->code = q->out.oom ? 500 : 200;
    if (q->out.oom) snprintf(q->err, sizeof(q->err), "node out of memory");
  } else {
    q->code = 502;
    snprintf(q->err, sizeof(q->err), "node %s (%s) answered no list of files%s%s", x->node_id, x->ip,
             jwhy[0] ? ": " : "", jwhy);
  }
  free(root);
  free(body);
}

/* Whose the request is (on the loop): a cluster's node's, or an embedded
 * node's, which is the cluster's one node. */
static void sa_whose(sa_req *q) {
  q->embedded = !rd__cluster_on();
  q->token = q->embedded ? rd__node_local_token() : rd__cluster_token();
  if (q->embedded) rd__node_self(&q->self);
  if (q->embedded && q->kind == K_PGS && !(q->pgs = rd__pg_records(&q->npgs, 0))) q->oom = 1;
}

/* --------------------------------------------------------------- work */

static void sa_work(uv_work_t *w) {
  sa_req *q = w->data;
  rd_gcs *g = q->embedded ? NULL : rd__cluster_gcs();
  rd_gcs_node *nodes = NULL;
  size_t n = 0;
  uint64_t ver = 0;
  int rc = g ? rd_gcs_get_nodes(g, &nodes, &n, &ver) : RD_ESTATE;
  if (q->embedded && (nodes = malloc(sizeof(*nodes)))) {   /* itself alone */
    *nodes = q->self;
    n = 1;
    rc = 0;
  }
  if (rc != 0) {
    q->code = 500;
    snprintf(q->err, sizeof(q->err), "cannot read the GCS's node table: %s", g ? rd_gcs_last_error() : "no GCS");
    return;
  }
  if (q->kind == K_LOGS || q->kind == K_LOG_FILE) {
    logs_work(q, nodes, n);
    free(nodes);
    return;
  }
  if (q->kind == K_NODES) {
    nodes_rows(q, nodes, n);
  } else if (q->embedded && (q->kind == K_JOBS || q->kind == K_EVENTS)) {   /* the GCS's tables: none */
    rd__mbuf_printf(&q->warn, "an embedded cluster keeps no %s table: none listed",
                    q->kind == K_JOBS ? "job" : "cluster event");
  } else if (q->embedded && q->kind == K_PGS) {
    pgs_rows(q, q->pgs, q->npgs, nodes, n);   /* its own records */
  } else if (q->kind == K_PGS) {
    rd_gcs_pg *pgs = NULL;
    size_t np = 0;
    if ((rc = rd_gcs_pg_list(g, &pgs, &np)) == 0) pgs_rows(q, pgs, np, nodes, n);
    else {
      q->code = 500;
      snprintf(q->err, sizeof(q->err), "cannot read the GCS's placement groups: %s", rd_gcs_last_error());
    }
    free(pgs);
  } else if (q->kind == K_JOBS) {
    rd_gcs_job *js = NULL;
    size_t nj = 0;
    if ((rc = rd_gcs_job_list(g, &js, &nj)) == 0) drivers_rows(q, js, nj, nodes, n);
    else {
      q->code = 500;
      snprintf(q->err, sizeof(q->err), "cannot read the GCS's jobs: %s", rd_gcs_last_error());
    }
    free(js);
    if (!q->code) each_node(q, nodes, n, "/api/jobs/", q->token, RD_JSON_ARRAY, submissions_of);
    if (!q->code && q->nsubjobs) drivers_of_submissions_drop(q);
  } else if (q->kind == K_WORKERS) {
    each_node(q, nodes, n, "/api/workers?limit=10000", NULL, RD_JSON_OBJECT, workers_of);
  } else if (q->kind == K_EVENTS) {
    events_rows(q, g);
  } else if (q->kind == K_ENVS) {
    each_node(q, nodes, n, "/api/runtime_envs?limit=10000", q->token, RD_JSON_OBJECT, envs_of);
  } else if (q->kind == K_OBJECTS) {
    char path[64];   /* a summary counts what it can from the rows too: all of them */
    snprintf(path, sizeof(path), "/api/objects?top=%zu", q->summary || q->nf ? (size_t)SA_MAX_LIMIT : q->limit);
    each_node(q, nodes, n, path, NULL, RD_JSON_OBJECT, objects_of);
    if (q->summary) {   /* one group: no call sites are kept (Ray's "disabled") */
      uint64_t t = q->total, sealed = t - (q->obj_unsealed < t ? q->obj_unsealed : t);
      rd__mbuf_printf(&q->summ, "\"disabled\": {\"total_objects\": %llu, \"total_size_mb\": %.3f, "
                                "\"total_num_workers\": %llu, \"total_num_nodes\": %llu, \"task_state_counts\": {",
                      (unsigned long long)t, (double)q->obj_bytes / 1048576.0, (unsigned long long)q->obj_owners,
                      (unsigned long long)q->obj_nodes);
      rd__mbuf_printf(&q->summ, "\"FINISHED\": %llu%s", (unsigned long long)sealed, q->obj_unsealed ? ", " : "");
      if (q->obj_unsealed) rd__mbuf_printf(&q->summ, "\"NIL\": %llu", (unsigned long long)q->obj_unsealed);
      /* references: pinned or not, as far as the rows (10000 a node) tell */
      rd__mbuf_printf(&q->summ, "}, \"task_attempt_number_counts\": {\"0\": %llu}, \"ref_type_counts\": "
                                "{\"PINNED_IN_MEMORY\": %llu, \"LOCAL_REFERENCE\": %llu}}",
                      (unsigned long long)t, (unsigned long long)q->obj_pinned,
                      (unsigned long long)(t > q->obj_pinned ? t - q->obj_pinned : 0));
    }
  } else {
    /* each node's rows: none for a summary (its counts suffice), the
     * limit when every row is taken, else all it gives (the filters pick,
     * and count what matched); a state asked for is asked of the nodes
     * too, when it is one of theirs, so that they send only those rows */
    const char *only = NULL;
    for (size_t i = 0; i < q->nf && !only; i++)
      if (!q->f[i].neg && !strcmp(q->cols[q->f[i].col].name, "state")) only = node_state(q->kind, q->f[i].val);
    size_t want = q->summary ? 0 : q->nf ? SA_MAX_LIMIT : q->limit;
    char path[96];
    snprintf(path, sizeof(path), "/api/%s?limit=%zu%s%s%s", q->kind == K_ACTORS ? "actors" : "tasks", want,
             only ? "&state=" : "", only ? only : "", q->kind == K_TASKS ? "&finished=1" : "");
    each_node(q, nodes, n, path, NULL, RD_JSON_OBJECT, q->kind == K_ACTORS ? actors_of : tasks_of);
    if (q->kind == K_ACTORS && q->nrows > 1) sort_rows(q);   /* by actor_id, as Ray lists them */
    if (q->kind == K_TASKS && !q->summary) actor_calls_nodes(q, nodes, n);
    if (q->kind == K_TASKS && !q->summary && q->detail) task_log_files(q, nodes, n);
    if (q->summary) groups_put(q);
  }
  free(nodes);
  if (q->code) return;
  if (q->oom || q->warn.oom || q->summ.oom) {
    q->code = 500;
    snprintf(q->err, sizeof(q->err), "node out of memory");
    return;
  }
  render(q);
  q->code = q->out.oom ? 500 : 200;
  if (q->out.oom) snprintf(q->err, sizeof(q->err), "node out of memory");
}

static void sa_done(uv_work_t *w, int status) {
  sa_req *q = w->data;
  if (q->kind == K_LOG_FILE && (status != 0 || q->code != 200))   /* a log's errors are text, as Ray's */
    refuse_line(q->reply, q->arg, status != 0 ? 503 : q->code, status != 0 ? "the node is stopping" : q->err);
  else if (status != 0) refuse(q->reply, q->arg, 503, "the node is stopping");
  else if (q->code != 200) refuse(q->reply, q->arg, q->code, "%s", q->err);
  else q->reply(q->arg, 200, q->out.p, q->out.len);
  req_free(q);
}

/* ---------------------------------------------------------------- query */

/* Ray's booleans in a query: True, true, 1, False, false, 0; -1 else. */
static int parse_bool(const char *s) {
  if (!strcmp(s, "True") || !strcmp(s, "true") || !strcmp(s, "1")) return 1;
  if (!strcmp(s, "False") || !strcmp(s, "false") || !strcmp(s, "0")) return 0;
  return -1;
}

static int parse_count(const char *s, long long max, long long *out) {
  char *end;
  long long v = strtoll(s, &end, 10);
  if (!*s || *end || v < 0 || v > max) return -1;
  *out = v;
  return 0;
}

/* The filterable columns of q's table, for an error's words. */
static void filterable_names(const sa_req *q, char *out, size_t len) {
  size_t n = 0;
  *out = 0;
  for (size_t k = 0; k < q->ncols && n < len; k++)
    if (q->cols[k].filterable) n += (size_t)snprintf(out + n, len - n, "%s%s", n ? ", " : "", q->cols[k].name);
}

/* Reads the query into q: 0, or -1 with why. */
static int parse_query(sa_req *q, const char *query, char *why, size_t wl) {
  char *keys[SA_MAX_FILTERS], *preds[SA_MAX_FILTERS], *vals[SA_MAX_FILTERS];
  size_t nk = 0, np = 0, nv = 0;
  int rc = 0, more;
  rd__query it;
  char *p, *v;
  if (rd__query_open(&it, query) != 0) return snprintf(why, wl, "node out of memory"), -1;
  while (rc == 0 && (more = rd__query_next(&it, &p, &v)) != 0) {
    if (more < 0) {
      snprintf(why, wl, "a bad %%-escape in the query");
      rc = -1;
    } else if (!strcmp(p, "limit")) {
      long long l;
      if (parse_count(v, 1LL << 40, &l) != 0) snprintf(why, wl, "limit must be a whole number, not '%.40s'", v), rc = -1;
      else if (l > SA_MAX_LIMIT)
        snprintf(why, wl, "Given limit %lld exceeds the supported limit %d. Use a lower limit.", l, SA_MAX_LIMIT), rc = -1;
      else q->limit = (size_t)l;
    } else if (!strcmp(p, "timeout")) {
      long long t;
      if (parse_count(v, 3600, &t) != 0 || t == 0)
        snprintf(why, wl, "timeout must be whole seconds (1..3600), not '%.40s'", v), rc = -1;
      else q->ms = t > 60 ? 60000 : (int)t * 1000;
    } else if (!strcmp(p, "detail")) {
      int d = parse_bool(v);
      if (d < 0) snprintf(why, wl, "detail must be True or False, not '%.40s'", v), rc = -1;
      else q->detail = d;
    } else if (!strcmp(p, "filter_keys") || !strcmp(p, "filter_predicates") || !strcmp(p, "filter_values")) {
      char **to = p[7] == 'k' ? keys : p[7] == 'p' ? preds : vals;
      size_t *cnt = p[7] == 'k' ? &nk : p[7] == 'p' ? &np : &nv;
      if (*cnt == SA_MAX_FILTERS) snprintf(why, wl, "at most %d filters", SA_MAX_FILTERS), rc = -1;
      else to[(*cnt)++] = v;
    }   /* anything else (exclude_driver, summary_by) is taken as Ray takes it: not needed here */
  }
  if (rc == 0 && (nk != np || nk != nv)) {
    snprintf(why, wl, "filter_keys, filter_predicates and filter_values must come in threes (got %zu, %zu, %zu)", nk,
             np, nv);
    rc = -1;
  }
  for (size_t i = 0; i < nk && rc == 0; i++) {
    size_t k = 0;
    while (k < q->ncols && strcasecmp(q->cols[k].name, keys[i]) != 0) k++;
    if (k == q->ncols || !q->cols[k].filterable) {
      char names[700];
      filterable_names(q, names, sizeof(names));
      snprintf(why, wl, "The given filter column %.60s is not supported. Supported filter columns: %s", keys[i], names);
      rc = -1;
      break;
    }
    filt *f = &q->f[q->nf];
    f->col = k;
    if (!strcmp(preds[i], "=")) f->neg = 0;
    else if (!strcmp(preds[i], "!=")) f->neg = 1;
    else {
      snprintf(why, wl, "Unsupported filter predicate %.20s is given. Available predicates: =, !=.", preds[i]);
      rc = -1;
      break;
    }
    if (q->cols[k].type == T_INT && parse_count(vals[i], 1LL << 62, &f->i) != 0) {
      snprintf(why, wl, "Invalid filter `--filter %s %.60s` for a int type column. Please provide an integer filter",
               q->cols[k].name, vals[i]);
      rc = -1;
      break;
    }
    if (q->cols[k].type == T_BOOL && (f->i = parse_bool(vals[i])) < 0) {
      snprintf(why, wl, "Invalid filter `--filter %s %.60s` for a boolean type column: True, true or 1, False, false or 0",
               q->cols[k].name, vals[i]);
      rc = -1;
      break;
    }
    if (!(f->val = strdup(vals[i]))) {
      snprintf(why, wl, "node out of memory");
      rc = -1;
      break;
    }
    q->nf++;
  }
  rd__query_close(&it);
  return rc;
}

/* q to the thread pool (sa_work, then sa_done answers and frees it). */
static void sa_queue(uv_loop_t *loop, sa_req *q) {
  q->work.data = q;
  if (uv_queue_work(loop, &q->work, sa_work, sa_done) != 0) {
    refuse(q->reply, q->arg, 500, "cannot queue the state request");
    req_free(q);
  }
}

/* The query of a logs request into q->lg: 0, or -1 with why. */
static int parse_logs_query(sa_req *q, const char *query, char *why, size_t wl) {
  rd__query it;
  if (rd__query_open(&it, query) != 0) return snprintf(why, wl, "node out of memory"), -1;
  int rc = 0, more;
  size_t rl = 0;
  char *p, *v;
  while (rc == 0 && (more = rd__query_next(&it, &p, &v)) != 0) {
    static const struct {
      const char *key;
      size_t off, cap;
    } strs[] = {{"node_id", offsetof(sa_req, lg.node_id), sizeof(((sa_req *)0)->lg.node_id)},
                {"node_ip", offsetof(sa_req, lg.node_ip), sizeof(((sa_req *)0)->lg.node_ip)},
                {"glob", offsetof(sa_req, lg.glob), sizeof(((sa_req *)0)->lg.glob)},
                {"filename", offsetof(sa_req, lg.filename), sizeof(((sa_req *)0)->lg.filename)},
                {"actor_id", offsetof(sa_req, lg.actor), sizeof(((sa_req *)0)->lg.actor)},
                {"task_id", offsetof(sa_req, lg.task), sizeof(((sa_req *)0)->lg.task)},
                {"submission_id", offsetof(sa_req, lg.sub), sizeof(((sa_req *)0)->lg.sub)}};
    size_t k = 0;
    while (more > 0 && k < sizeof(strs) / sizeof(strs[0]) && strcmp(strs[k].key, p) != 0) k++;
    long long num;
    if (more < 0) {
      snprintf(why, wl, "a bad %%-escape in the query");
      rc = -1;
    } else if (k < sizeof(strs) / sizeof(strs[0])) {
      if (strlen(v) >= strs[k].cap) snprintf(why, wl, "%s is too long", p), rc = -1;
      else snprintf((char *)q + strs[k].off, strs[k].cap, "%s", v);
    } else if (!strcmp(p, "suffix")) {
      if (strcmp(v, "out") != 0 && strcmp(v, "err") != 0)
        snprintf(why, wl, "Suffix %.20s is not supported: out or err", v), rc = -1;
      else snprintf(q->lg.suffix, sizeof(q->lg.suffix), "%s", v);
    } else if (!strcmp(p, "pid")) {
      if (parse_count(v, 1 << 30, &num) != 0 || num == 0) snprintf(why, wl, "pid must be a process id, not '%.40s'", v), rc = -1;
      else q->lg.pid = num;
    } else if (!strcmp(p, "lines")) {
      if (!strcmp(v, "-1")) q->lg.lines = -1;
      else if (parse_count(v, 1LL << 40, &num) != 0)
        snprintf(why, wl, "lines must be -1 (all) or a count, not '%.40s'", v), rc = -1;
      else q->lg.lines = num;
    } else if (!strcmp(p, "timeout")) {
      if (parse_count(v, 3600, &num) != 0 || num == 0)
        snprintf(why, wl, "timeout must be whole seconds (1..3600), not '%.40s'", v), rc = -1;
      else q->ms = num > 60 ? 60000 : (int)num * 1000;
    } else if (!strcmp(p, "offset") || !strcmp(p, "end") || !strcmp(p, "stat")) {
      int stat = !strcmp(p, "stat");
      if (stat ? parse_bool(v) < 0 : parse_count(v, 1LL << 62, &num) != 0)
        snprintf(why, wl, "%s must be %s, not '%.40s'", p, stat ? "true or false" : "a byte offset", v), rc = -1;
      else if (stat) {
        q->lg.stat = parse_bool(v);
        rl += (size_t)snprintf(q->lg.range + rl, sizeof(q->lg.range) - rl, "&stat=%d", q->lg.stat);
      }
      else rl += (size_t)snprintf(q->lg.range + rl, sizeof(q->lg.range) - rl, "&%s=%lld", p, num);
    }   /* the others Ray's CLI sends (attempt_number, interval, media_type, filter_ansi_code) change nothing here */
  }
  rd__query_close(&it);
  if (rc != 0) return rc;
  if (q->lg.sub[0])
    return snprintf(why, wl, "a submitted job's log is `raydist job logs %.60s` (GET /api/jobs/ID/logs on its node)",
                    q->lg.sub), -1;
  int who = (q->lg.filename[0] != 0) + (q->lg.pid != 0) + (q->lg.actor[0] != 0) + (q->lg.task[0] != 0);
  int node = q->lg.node_id[0] || q->lg.node_ip[0];
  if (q->kind == K_LOGS && !node)
    return snprintf(why, wl, "Both node id and node ip are not provided. Please provide at least one of them."), -1;
  if (q->kind == K_LOG_FILE && who != 1)
    return snprintf(why, wl, "name one of filename, pid, actor_id and task_id (got %d)", who), -1;
  if (q->kind == K_LOG_FILE && (q->lg.filename[0] || q->lg.pid) && !node)
    return snprintf(why, wl, "name the node (node_id or node_ip) of %s", q->lg.pid ? "the pid" : "the file"), -1;
  return 0;
}

/* GET /api/v0/logs, /api/v0/logs/file and /api/v0/logs/stream (rest:
 * after /logs). */
static void logs_request(uv_loop_t *loop, const char *rest, const char *query, rd__http_reply reply, void *arg) {
  int file = !strcmp(rest, "/file");
  if (!strcmp(rest, "/stream")) {
    static const char m[] = "following a log (media type stream) is not served: `raydist logs ... --follow` polls "
                            "/api/v0/logs/file with offset= for what was added\n";
    reply(arg, 501, m, sizeof(m) - 1);
    return;
  }
  if (*rest && !file && strcmp(rest, "/") != 0) {
    refuse(reply, arg, 404, "no such path: /api/v0/logs lists a node's log files, /api/v0/logs/file gives one");
    return;
  }
  sa_req *q = calloc(1, sizeof(*q));
  if (!q) {
    refuse(reply, arg, 500, "node out of memory");
    return;
  }
  q->kind = file ? K_LOG_FILE : K_LOGS;
  q->ms = 30000;
  q->lg.lines = 1000;   /* Ray's DEFAULT_LOG_LIMIT */
  snprintf(q->lg.glob, sizeof(q->lg.glob), "*");
  snprintf(q->lg.suffix, sizeof(q->lg.suffix), "out");
  q->reply = reply;
  q->arg = arg;
  sa_whose(q);
  char why[400];
  if (parse_logs_query(q, query, why, sizeof(why)) != 0) {
    if (file) refuse_line(reply, arg, 400, why);
    else refuse(reply, arg, 400, "%s", why);
    req_free(q);
    return;
  }
  sa_queue(loop, q);
}

/* -------------------------------------------------------------- routing */

int rd__state_api_path(const char *path) { return !strncmp(path, "/api/v0/", 8); }

void rd__state_api(uv_loop_t *loop, const char *method, const char *path, const char *query, const char *auth,
                   rd__http_reply reply, void *arg) {
  if (strcmp(method, "GET") != 0) {
    refuse(reply, arg, 405, "the state API (/api/v0/) takes GET");
    return;
  }
  int embedded = !rd__cluster_on();   /* an embedded node: its own token (SESSION/token) guards it */
  const char *own = rd__node_local_token();
  if (embedded ? !own || !*own : !rd__cluster_token()) {
    refuse(reply, arg, 403, "the state API needs a node's token: a cluster's node, or an embedded node with its "
                            "metrics port");
    return;
  }
  if (!auth || strncmp(auth, "Bearer ", 7) != 0 || (embedded ? strcmp(auth + 7, own) != 0 : !rd__cluster_token_ok(auth + 7))) {
    refuse(reply, arg, 401, "send the cluster token as \"Authorization: Bearer TOKEN\" (the file `token` in a node's "
                            "session directory; an embedded node's own), or set RAY_AUTH_MODE=token and "
                            "RAY_AUTH_TOKEN for Ray's CLI");
    return;
  }
  const char *what = path + 8;
  char res[64];
  size_t n = strcspn(what, "/");
  snprintf(res, sizeof(res), "%.*s", (int)(n < sizeof(res) ? n : sizeof(res) - 1), what);
  const char *rest = what + n;
  if (!strcmp(res, "logs")) {
    logs_request(loop, rest, query, reply, arg);
    return;
  }
  int summary = !strcmp(rest, "/summarize");
  if (*rest && !summary && strcmp(rest, "/") != 0) {
    refuse(reply, arg, 404, "no such path: /api/v0/RESOURCE and /api/v0/RESOURCE/summarize");
    return;
  }
  static const struct {
    const char *name;
    int kind, summarized;
    const col *cols;
    size_t ncols;
  } kinds[] = {{"nodes", K_NODES, 0, node_cols, NCOLS(node_cols)},
               {"actors", K_ACTORS, 1, actor_cols, NCOLS(actor_cols)},
               {"tasks", K_TASKS, 1, task_cols, NCOLS(task_cols)},
               {"placement_groups", K_PGS, 0, pg_cols, NCOLS(pg_cols)},
               {"jobs", K_JOBS, 0, job_cols, NCOLS(job_cols)},
               {"objects", K_OBJECTS, 1, object_cols, NCOLS(object_cols)},
               {"workers", K_WORKERS, 0, worker_cols, NCOLS(worker_cols)},
               {"cluster_events", K_EVENTS, 0, event_cols, NCOLS(event_cols)},
               {"runtime_envs", K_ENVS, 0, env_cols, NCOLS(env_cols)}};
  size_t k = 0;
  while (k < sizeof(kinds) / sizeof(kinds[0]) && strcmp(kinds[k].name, res) != 0) k++;
  if (k == sizeof(kinds) / sizeof(kinds[0])) {
    refuse(reply, arg, 404,
           "no such resource '%.40s': the state API lists nodes, actors, tasks, placement_groups, jobs, objects, "
           "workers, cluster_events, runtime_envs and logs",
           res);
    return;
  }
  if (summary && !kinds[k].summarized) {
    refuse(reply, arg, 404, "no summary of %s: /api/v0/tasks/summarize, /api/v0/actors/summarize and "
                            "/api/v0/objects/summarize", res);
    return;
  }
  sa_req *q = calloc(1, sizeof(*q));
  if (!q) {
    refuse(reply, arg, 500, "node out of memory");
    return;
  }
  q->kind = kinds[k].kind;
  q->cols = kinds[k].cols;
  q->ncols = kinds[k].ncols;
  q->summary = summary;
  q->limit = SA_DEFAULT_LIMIT;
  q->ms = 30000;
  q->reply = reply;
  q->arg = arg;
  sa_whose(q);
  char why[900];
  if (parse_query(q, query, why, sizeof(why)) != 0) {
    refuse(reply, arg, 400, "%s", why);
    req_free(q);
    return;
  }
  sa_queue(loop, q);
}
