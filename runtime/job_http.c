/* runtime/job_http.c - the jobs HTTP API (see job_http.h): Ray's job REST
 * API on the node's metrics port, for this node's jobs.
 *
 *   POST   /api/jobs/               {"entrypoint": "...", "submission_id": ..., "runtime_env": {"env_vars": {...}},
 *                                    "metadata": {...}}  ->  {"job_id": "N", "submission_id": "..."}
 *   GET    /api/jobs/               [job, ...]
 *   GET    /api/jobs/ID             job: {"job_id", "submission_id", "status", "message", "entrypoint", ...}
 *                                   (?wait_s=S: once it has ended, or after S seconds, at most 30)
 *   GET    /api/jobs/ID/logs        {"logs": "...", "offset", "dropped", "more", "ended"}
 *                                   (?offset=N; ?wait_s=S: once there is output past N or the end)
 *   GET    /api/jobs/ID/logs/tail   a WebSocket: the log as it comes, closed once the job has ended
 *   POST   /api/jobs/ID/stop        {"stopped": true | false}
 *   DELETE /api/jobs/ID             {"deleted": true}
 *   GET    /api/version             {"version": "4", "ray_version", ...} (no token needed)
 *   GET    /api/packages/gcs/NAME   200 when this node has the package, else 404
 *   PUT    /api/packages/gcs/NAME   the package (a zip, up to 512 MiB), kept in <session>/packages/;
 *                                   a submit's runtime_env.working_dir "gcs://NAME" is unpacked for its job
 *
 * ID is the job's number on this node or its submission id (its name).
 * Every request needs "Authorization: Bearer <cluster token>": the API
 * runs commands on the node, and the metrics port is open to the network.
 * A submit, stop or delete runs the same `raydist job` command a tool
 * link's request runs (rd__job_cmd, job_link.c), so an API job is a job of
 * the node like any other; reads (list, one job, logs) read the job's
 * files here on the loop.  Errors are {"error": "..."} with 400 (bad
 * request), 401 (no or a wrong token), 403 (no cluster token: an embedded
 * node), 404, 405, 500 or 503 (16 commands run already). */
#include "job_http.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli_cluster.h"
#include "cluster.h"
#include "job_log.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "node_internal.h"
#include "raydist/error.h"

#define JH_LOG_MAX (4u << 20)   /* log bytes in one answer (?offset=N) */
#define JH_LOG_ALL_MAX (16u << 20) /* log bytes in a plain GET's (Ray's SDK: the whole log) */
#define JH_ENV_MAX 256          /* env_vars entries */
#define JH_STOP_S 10            /* a stop's SIGTERM, then SIGKILL */
#define JH_IDS_MAX 4096         /* jobs listed */
#define JH_WAITING 8            /* ?wait_s requests held at once; more are answered at once */
#define JH_FILE_MAX (128u << 10) /* an entrypoint or metadata file read (both come from a 64 KiB body) */
#define JH_PKG_MAX (512ull << 20) /* a package upload (what Ray's GCS takes) */
#define JH_PKG_TTL_S 3600       /* a package neither asked for nor used this long is removed (the SDK uploads it again) */
#define JH_TAIL_CHUNK (256u << 10) /* log bytes in one WebSocket frame */
#define JH_TAIL_WAIT_MS 5000    /* a tail looks again at least this often (its connection may have gone) */
#define JH_RAY_VERSION "2.60.0" /* the Ray whose job API this speaks (/api/version) */

/* ---- JSON out ---- */

static void answer(rd__http_reply reply, void *arg, int code, rd__mbuf *b) {
  if (b->oom) reply(arg, 500, "{\"error\": \"node out of memory\"}", 31);
  else reply(arg, code, b->p ? b->p : "", b->len);
  free(b->p);
}

static void fail(rd__http_reply reply, void *arg, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void fail(rd__http_reply reply, void *arg, int code, const char *fmt, ...) {
  char msg[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  rd__mbuf b = {0};
  rd__mbuf_printf(&b, "{\"error\": ");
  rd__mbuf_json_cstr(&b, msg);
  rd__mbuf_printf(&b, "}\n");
  answer(reply, arg, code, &b);
}

/* ---- the job's files ---- */

static void job_dir(int id, char *out, size_t len) { snprintf(out, len, "%s/jobs/%d", N.opts.session_dir, id); }

/* File name of job id (the API's own: entrypoint, metadata) into a new
 * string, NULL when it is not there. */
static char *job_file(int id, const char *name) {
  char f[900];
  snprintf(f, sizeof(f), "%s/jobs/%d/%s", N.opts.session_dir, id, name);
  int fd = open(f, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  char *s = malloc(JH_FILE_MAX + 1);
  ssize_t n = s ? read(fd, s, JH_FILE_MAX) : -1;
  close(fd);
  if (n < 0) {
    free(s);
    return NULL;
  }
  s[n] = 0;
  return s;
}

static int job_file_put(int id, const char *name, const char *text) {
  char f[900];
  snprintf(f, sizeof(f), "%s/jobs/%d/%s", N.opts.session_dir, id, name);
  return rd__write_file(f, text, strlen(text));
}

/* A job as Ray's JobDetails. */
static void put_job(rd__mbuf *b, const rd_cli_job *j) {
  char status[16];
  snprintf(status, sizeof(status), "%.*s", (int)strcspn(j->state, " "), j->state);   /* "FAILED (exit 3)" -> FAILED */
  rd__mbuf_printf(b, "{\"type\": \"SUBMISSION\", \"job_id\": \"%d\", \"submission_id\": ", j->id);
  if (j->name[0]) rd__mbuf_json_cstr(b, j->name);
  else rd__mbuf_printf(b, "\"%d\"", j->id);
  rd__mbuf_printf(b, ", \"status\": \"%s\", \"message\": ", status);
  rd__mbuf_json_cstr(b, j->state);
  rd__mbuf_printf(b, ", \"entrypoint\": ");
  char *entry = job_file(j->id, "entrypoint");
  rd__mbuf_json_cstr(b, entry ? entry : j->cmd);
  free(entry);
  if (j->pid > 0) rd__mbuf_printf(b, ", \"driver_pid\": %d", j->pid);
  else rd__mbuf_printf(b, ", \"driver_pid\": null");   /* PENDING: not started */
  rd__mbuf_printf(b, ", \"start_time\": %.0f, \"end_time\": ", j->start * 1000);
  if (j->ended && j->end > 0) rd__mbuf_printf(b, "%.0f", j->end * 1000);
  else rd__mbuf_printf(b, "null");
  rd__mbuf_printf(b, ", \"driver_exit_code\": ");
  if (j->ended && !j->sig) rd__mbuf_printf(b, "%d", j->status);
  else rd__mbuf_printf(b, "null");
  rd_resources res;   /* its entrypoint resources, as Ray's details give them (null: none asked) */
  char err[200];
  const double u = RD_RES_UNIT;
  char *there = j->resources[0] ? NULL : job_file(j->id, "resources_there");   /* held by the node it runs on */
  const char *spec = there ? there : j->resources;
  if (spec[0] && rd__res_parse_spec(spec, &res, err, sizeof(err)) == 0) {
    rd__mbuf_printf(b, ", \"entrypoint_num_cpus\": %.17g, \"entrypoint_num_gpus\": %.17g, \"entrypoint_memory\": %lld, "
                    "\"entrypoint_resources\": {", res.cpu / u, res.gpu / u, (long long)res.memory);
    for (int i = 0; i < res.ncustom; i++) {
      rd__mbuf_json_cstr(b, res.custom[i].name);
      rd__mbuf_printf(b, ": %.17g%s", res.custom[i].amount / u, i + 1 < res.ncustom ? ", " : "");
    }
    rd__mbuf_printf(b, "}");
  } else {
    rd__mbuf_printf(b, ", \"entrypoint_num_cpus\": null, \"entrypoint_num_gpus\": null, \"entrypoint_memory\": null, "
                    "\"entrypoint_resources\": null");
  }
  free(there);
  /* the GCS job its driver runs in (cluster.c's note_submission), and
   * whether its driver started it: the state API's ray list jobs shows the
   * submission with that id instead of a DRIVER row of its own */
  char *gj = job_file(j->id, "gcs_job"), how[16] = "";
  unsigned gcs = 0;
  if (gj && sscanf(gj, "%u %15s", &gcs, how) == 2 && gcs)
    rd__mbuf_printf(b, ", \"gcs_job_id\": \"%u\", \"gcs_job_started\": %s", gcs, strcmp(how, "started") ? "false" : "true");
  else
    rd__mbuf_printf(b, ", \"gcs_job_id\": null, \"gcs_job_started\": false");
  free(gj);
  char *meta = job_file(j->id, "metadata");   /* written by submit below: JSON it made */
  rd__mbuf_printf(b, ", \"metadata\": %s}", meta ? meta : "{}");
  free(meta);
}

/* The job an ID names: its number, or the newest job whose name it is. */
static int resolve(const char *idpart, rd_cli_job *out) {
  char *end;
  long v = strtol(idpart, &end, 10);
  if (*idpart >= '0' && *idpart <= '9' && !*end) return v > 0 && v <= 1000000 ? rd__cli_job_get(N.opts.session_dir, (int)v, out) : -1;
  static int ids[JH_IDS_MAX];
  int n = rd__cli_job_ids(N.opts.session_dir, ids, JH_IDS_MAX);
  for (int i = n - 1; i >= 0; i--)
    if (rd__cli_job_get(N.opts.session_dir, ids[i], out) == 0 && !strcmp(out->name, idpart)) return 0;
  return -1;
}

/* %XX in s decoded in place: 0, or -1 for a bad escape or a NUL. */
static int unescape(char *s) {
  char *w = s;
  for (char *r = s; *r; r++) {
    if (*r != '%') {
      *w++ = *r;
      continue;
    }
    unsigned v;
    if (!r[1] || !r[2] || sscanf(r + 1, "%2x", &v) != 1 || v == 0) return -1;
    *w++ = (char)v;
    r += 2;
  }
  *w = 0;
  return 0;
}

/* ---- reads ---- */

static void list(rd__http_reply reply, void *arg) {
  static int ids[JH_IDS_MAX];
  int n = rd__cli_job_ids(N.opts.session_dir, ids, JH_IDS_MAX), k = 0;
  rd__mbuf b = {0};
  rd__mbuf_printf(&b, "[");
  for (int i = 0; i < n; i++) {
    rd_cli_job j;
    if (rd__cli_job_get(N.opts.session_dir, ids[i], &j) != 0) continue;   /* deleted meanwhile */
    rd__mbuf_printf(&b, "%s", k++ ? ",\n " : "");
    put_job(&b, &j);
  }
  rd__mbuf_printf(&b, "]\n");
  answer(reply, arg, 200, &b);
}

/* The value of the last ?name=... in query, NULL when there is none. */
static const char *query_val(const char *query, const char *name) {
  size_t k = strlen(name);
  const char *o = NULL;
  for (const char *p = query; p && *p; p += strcspn(p, "&"), p += *p == '&')
    if (!strncmp(p, name, k) && p[k] == '=') o = p + k + 1;
  return o;
}

/* ?name=N in query: a whole number (at most max) into *out, def when
 * absent: 0, or -1 when malformed. */
static int query_u64(const char *query, const char *name, uint64_t def, uint64_t max, uint64_t *out) {
  const char *o = query_val(query, name);
  *out = def;
  if (!o) return 0;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(o, &end, 10);
  if (*o < '0' || *o > '9' || errno || (*end && *end != '&') || v > max) return -1;
  *out = v;
  return 0;
}

/* The log of job id from off, up to JH_LOG_MAX bytes with where it got
 * to; or (whole: a plain GET, as Ray's SDK sends it) Ray's JobLogsResponse,
 * {"logs"} alone (its SDK refuses any other field), from the start, up to
 * JH_LOG_ALL_MAX bytes and a line saying how to read the rest. */
static void logs_now(int id, uint64_t off, int whole, rd__http_reply reply, void *arg) {
  rd_cli_job j;   /* read before the log: ended, all it wrote is there */
  if (rd__cli_job_get(N.opts.session_dir, id, &j) != 0) {
    fail(reply, arg, 404, "no job %d on this node", id);
    return;
  }
  char jd[900];
  job_dir(id, jd, sizeof(jd));
  size_t max = whole ? JH_LOG_ALL_MAX : JH_LOG_MAX;
  char *buf = malloc(max);
  if (!buf) {
    fail(reply, arg, 500, "node out of memory");
    return;
  }
  uint64_t dropped = 0;
  size_t got = 0, n;
  while (got < max && (n = rd__job_log_read(jd, &off, buf + got, max - got, &dropped)) > 0) got += n;
  rd__mbuf b = {0};
  rd__mbuf_printf(&b, "{\"logs\": ");
  if (whole && got == max) {   /* the rest by offset: said in the log's text, the one field Ray's SDK takes */
    char more[200];
    snprintf(more, sizeof(more), "\n[raydist: the log goes on past %zu MiB; the rest: GET ?offset=%" PRIu64
             " or `raydist job logs %d`]\n", max >> 20, off, id);
    memcpy(buf + got - strlen(more), more, strlen(more));
  }
  rd__mbuf_json_str(&b, buf, got);
  if (whole)
    rd__mbuf_printf(&b, "}\n");
  else
    rd__mbuf_printf(&b, ", \"offset\": %" PRIu64 ", \"dropped\": %" PRIu64 ", \"more\": %s, \"ended\": %s}\n", off,
                    dropped, got == max ? "true" : "false", j.ended ? "true" : "false");
  free(buf);
  answer(reply, arg, 200, &b);
}

static void details_now(int id, rd__http_reply reply, void *arg) {
  rd_cli_job j;
  if (rd__cli_job_get(N.opts.session_dir, id, &j) != 0) {
    fail(reply, arg, 404, "no job %d on this node", id);
    return;
  }
  rd__mbuf b = {0};
  put_job(&b, &j);
  rd__mbuf_printf(&b, "\n");
  answer(reply, arg, 200, &b);
}

/* ?wait_s=S: answered once there is news (output past the offset, or the
 * end) or S seconds passed (rd__job_wait) */
typedef struct jh_wait {
  rd__http_reply reply;
  void *arg;
  int id, logs;
  uint64_t off;
} jh_wait;

static int nwaiting;   /* held requests: each holds one of the port's 16 connections */

static void wait_fire(void *p) {
  jh_wait *w = p;
  nwaiting--;
  if (w->logs) logs_now(w->id, w->off, 0, w->reply, w->arg);
  else details_now(w->id, w->reply, w->arg);
  free(w);
}

/* logs: off the offset; details: off UINT64_MAX */
static void read_job(const rd_cli_job *j, const char *query, int logs, rd__http_reply reply, void *arg) {
  uint64_t off = logs ? 0 : UINT64_MAX, wait_s;
  if (logs && query_u64(query, "offset", 0, UINT64_MAX - 1, &off) != 0) {
    fail(reply, arg, 400, "offset must be a whole number of bytes");
    return;
  }
  if (query_u64(query, "wait_s", 0, 30, &wait_s) != 0) {
    fail(reply, arg, 400, "wait_s must be a whole number of seconds from 0 to 30");
    return;
  }
  /* at most JH_WAITING held, so that scrapes of /metrics always find a connection */
  jh_wait *w = wait_s && !j->ended && nwaiting < JH_WAITING ? malloc(sizeof(*w)) : NULL;
  if (w) {
    *w = (jh_wait){reply, arg, j->id, logs, off};
    nwaiting++;
    if (rd__job_wait(j->id, off, wait_s * 1000, wait_fire, w) == 0) return;
    nwaiting--;
    free(w);   /* 256 wait already: answered now */
  }
  if (logs) logs_now(j->id, off, !query_val(query, "offset") && !query_val(query, "wait_s"), reply, arg);
  else details_now(j->id, reply, arg);
}

/* ---- packages (Ray's working_dir uploads) ---- */

static int authorized(const char *auth, rd__http_reply reply, void *arg) {
  if (!rd__cluster_token()) {
    fail(reply, arg, 403, "the jobs API needs a node of a cluster started by `raydist start` (its token guards it)");
    return 0;
  }
  if (!auth || strncmp(auth, "Bearer ", 7) != 0 || !rd__cluster_token_ok(auth + 7)) {
    fail(reply, arg, 401, "send the cluster token as \"Authorization: Bearer TOKEN\" (the file `token` in a node's "
                          "session directory)");
    return 0;
  }
  return 1;
}

static void pkg_dir(char *out, size_t len) { snprintf(out, len, "%s/packages", N.opts.session_dir); }

/* The file of package name into out; 0 when it is there (marked used: kept
 * another JH_PKG_TTL_S), else -1. */
static int pkg_file(const char *name, char *out, size_t len) {
  char d[700];
  pkg_dir(d, sizeof(d));
  snprintf(out, len, "%s/%s", d, name);
  return utimensat(AT_FDCWD, out, NULL, 0) == 0 ? 0 : -1;
}

/* NAME of a package (what follows gcs:// or /api/packages/gcs/) checked:
 * 0, or -1 with why. */
static int pkg_name_ok(const char *name, char *why, size_t len) {
  size_t k = strlen(name);
  if (k && k <= 200 && name[0] != '.' &&
      strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == k)
    return 0;
  snprintf(why, len, "a package name is 1 to 200 letters, digits, '_', '.' and '-', not starting with '.'");
  return -1;
}

/* Removes what was neither asked for nor used for JH_PKG_TTL_S (and
 * uploads cut off): a client that asks for it later is told 404 and
 * uploads it again, as Ray's SDK does. */
static void pkg_gc(void) {
  char d[700], f[1000];
  pkg_dir(d, sizeof(d));
  DIR *dir = opendir(d);
  struct dirent *e;
  time_t now = time(NULL);
  while (dir && (e = readdir(dir))) {
    struct stat st;
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(f, sizeof(f), "%s/%s", d, e->d_name);
    if (stat(f, &st) == 0 && S_ISREG(st.st_mode) && now - st.st_mtime > JH_PKG_TTL_S) unlink(f);
  }
  if (dir) closedir(dir);
}

/* The file of package uri ("gcs://NAME.zip", as a submit's working_dir
 * names it) into path, marked used: 0, or -1 with why. */
static int pkg_find(const char *uri, char *path, size_t len, char *why, size_t wlen) {
  const char *name = !strncmp(uri, "gcs://", 6) ? uri + 6 : NULL;
  size_t k = name ? strlen(name) : 0;
  if (!name || k < 5 || strcmp(name + k - 4, ".zip") != 0 || pkg_name_ok(name, why, wlen) != 0) {
    snprintf(why, wlen, "runtime_env.working_dir must name an uploaded zip package, gcs://NAME.zip (Ray's SDK "
             "uploads a local directory as one): not '%.100s'", uri);
    return -1;
  }
  if (pkg_file(name, path, len) != 0) {
    snprintf(why, wlen, "no package %.100s on this node (upload it with PUT /api/packages/gcs/%.100s)", uri, name);
    return -1;
  }
  return 0;
}

/* NAME in /api/packages/gcs/NAME, or NULL for another path. */
static const char *pkg_of(const char *path) {
  static const char pre[] = "/api/packages/gcs/";
  return strncmp(path, pre, sizeof(pre) - 1) ? NULL : path + sizeof(pre) - 1;
}

/* GET /api/packages/gcs/NAME: whether this node has it (then kept for
 * another JH_PKG_TTL_S: Ray's SDK asks, then submits). */
static void pkg_get(const char *path, rd__http_reply reply, void *arg) {
  char why[300], file[900];
  const char *name = pkg_of(path);
  if (!name || pkg_name_ok(name, why, sizeof(why)) != 0) {
    fail(reply, arg, 404, "no such package: /api/packages/gcs/NAME");
    return;
  }
  char uri[256];
  snprintf(uri, sizeof(uri), "gcs://%s", name);
  if (pkg_file(name, file, sizeof(file)) != 0) {
    fail(reply, arg, 404, "no package %s on this node", uri);
    return;
  }
  rd__mbuf b = {0};
  rd__mbuf_printf(&b, "{\"package\": ");
  rd__mbuf_json_cstr(&b, uri);
  rd__mbuf_printf(&b, "}\n");
  answer(reply, arg, 200, &b);
}

struct rd__pkg_put {
  int fd;
  uint64_t len, got;
  char tmp[900], path[900];
};

rd__pkg_put *rd__job_http_pkg_begin(const char *path, const char *auth, uint64_t len, rd__http_reply reply,
                                    void *arg) {
  if (!authorized(auth, reply, arg)) return NULL;
  char why[300];
  const char *name = pkg_of(path);
  if (!name) {
    fail(reply, arg, 400, "only gcs packages are uploaded here: PUT /api/packages/gcs/NAME, as Ray's SDK does");
    return NULL;
  }
  if (pkg_name_ok(name, why, sizeof(why)) != 0) {
    fail(reply, arg, 400, "%s", why);
    return NULL;
  }
  if (len > JH_PKG_MAX) {
    fail(reply, arg, 413, "a package of %" PRIu64 " bytes: at most %llu", len, (unsigned long long)JH_PKG_MAX);
    return NULL;
  }
  pkg_gc();
  rd__pkg_put *p = calloc(1, sizeof(*p));
  if (!p) {
    fail(reply, arg, 500, "node out of memory");
    return NULL;
  }
  char d[700];
  pkg_dir(d, sizeof(d));
  (void)mkdir(d, 0700);
  snprintf(p->path, sizeof(p->path), "%s/%s", d, name);
  snprintf(p->tmp, sizeof(p->tmp), "%s/.put-XXXXXX", d);   /* renamed once whole: never read half-written */
  p->len = len;
  if ((p->fd = mkostemp(p->tmp, O_CLOEXEC)) < 0) {
    fail(reply, arg, 500, "cannot make a file in %s: %s", d, strerror(errno));
    free(p);
    return NULL;
  }
  return p;
}

int rd__job_http_pkg_write(rd__pkg_put *p, const char *data, size_t n) {
  if (n > p->len - p->got) {
    errno = EFBIG;
    return -1;
  }
  while (n) {
    ssize_t w = write(p->fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    data += w;
    n -= (size_t)w;
    p->got += (uint64_t)w;
  }
  return 0;
}

void rd__job_http_pkg_end(rd__pkg_put *p, int whole, const char *why, rd__http_reply reply, void *arg) {
  char err[300] = "";
  if (whole && p->got != p->len) snprintf(err, sizeof(err), "%" PRIu64 " of %" PRIu64 " bytes came", p->got, p->len);
  else if (close(p->fd) != 0 && whole) snprintf(err, sizeof(err), "cannot write the package: %s", strerror(errno));
  else if (whole && rename(p->tmp, p->path) != 0) snprintf(err, sizeof(err), "cannot keep the package: %s", strerror(errno));
  if (whole && !err[0]) {
    rd__log(RD_LOG_INFO, "jobs API: package %s uploaded (%" PRIu64 " bytes)", strrchr(p->path, '/') + 1, p->len);
    rd__mbuf b = {0};
    rd__mbuf_printf(&b, "{\"uploaded\": ");
    rd__mbuf_json_cstr(&b, strrchr(p->path, '/') + 1);
    rd__mbuf_printf(&b, ", \"bytes\": %" PRIu64 "}\n", p->len);
    answer(reply, arg, 200, &b);
  } else {
    unlink(p->tmp);
    if (reply) fail(reply, arg, 500, "%s", err[0] ? err : why ? why : "the upload was cut off");
  }
  free(p);
}

/* ---- a tail: the log over a WebSocket ---- */

struct rd__job_tail {
  int id;
  uint64_t off;
  rd__tail_chunk chunk;
  void *arg;
  int waiting, cancelled;
  int arming, fired;   /* in rd__job_wait; its wait fired in there */
};

int rd__job_http_tail_path(const char *path) {
  size_t n = strlen(path);
  return rd__job_http_path(path) && !strncmp(path, "/api/jobs/", 10) && n > 20 && !strcmp(path + n - 10, "/logs/tail");
}

/* Bytes at the end of p[0..n) that begin a UTF-8 sequence the next read
 * completes (0 to 3): held back, so that a frame never splits a character. */
static size_t utf8_cut(const unsigned char *p, size_t n) {
  for (size_t back = 1; back <= 3 && back <= n; back++) {
    unsigned char c = p[n - back];
    if ((c & 0xc0) == 0x80) continue;   /* a continuation: look further back */
    size_t k = rd_json_utf8_need(c);
    return k > back ? back : 0;
  }
  return 0;
}

static void tail_free(rd__job_tail *t) {
  nwaiting--;
  free(t);
}

/* The tail's wait fired: inside rd__job_wait (news already there: the
 * caller looks again), or later. */
static void tail_fire(void *p) {
  rd__job_tail *t = p;
  t->waiting = 0;
  if (t->arming) t->fired = 1;
  else if (t->cancelled) tail_free(t);
  else rd__job_tail_more(t);
}

/* Ends the tail: a close frame, and t freed. */
static void tail_end(rd__job_tail *t) {
  t->chunk(t->arg, NULL, 0);
  tail_free(t);
}

void rd__job_tail_more(rd__job_tail *t) {
  char jd[900];
  job_dir(t->id, jd, sizeof(jd));
  for (int looks = 0; looks < 8; looks++) {   /* a wait that fires at once means news: look again */
    rd_cli_job j;   /* read before the log: ended, all it wrote is there */
    int ended = rd__cli_job_get(N.opts.session_dir, t->id, &j) != 0 || j.ended;
    char *buf = malloc(JH_TAIL_CHUNK);
    uint64_t dropped = 0;
    size_t got = 0, n;
    while (buf && got < JH_TAIL_CHUNK &&
           (n = rd__job_log_read(jd, &t->off, buf + got, JH_TAIL_CHUNK - got, &dropped)) > 0)
      got += n;
    if (!buf) {
      tail_end(t);
      return;
    }
    uint64_t seen = t->off;   /* a character begun at the end waits for its next bytes */
    size_t cut = ended && got < JH_TAIL_CHUNK ? 0 : utf8_cut((unsigned char *)buf, got);
    got -= cut;
    t->off -= cut;
    if (got) {
      rd__mbuf b = {0};
      rd__mbuf_utf8(&b, buf, got);   /* text frames are UTF-8: a byte that is not comes as U+FFFD */
      free(buf);
      if (b.oom) tail_end(t);
      else t->chunk(t->arg, b.p, b.len);   /* the callee copies it, and calls rd__job_tail_more once it is sent */
      free(b.p);
      return;
    }
    free(buf);
    if (ended) {
      tail_end(t);
      return;
    }
    t->waiting = t->arming = 1;
    t->fired = 0;
    int r = rd__job_wait(t->id, seen, JH_TAIL_WAIT_MS, tail_fire, t);
    t->arming = 0;
    if (r != 0) {   /* 256 waits, or the node stops */
      t->waiting = 0;
      tail_end(t);
      return;
    }
    if (!t->fired) return;   /* tail_fire comes later */
    if (t->cancelled) {
      tail_free(t);
      return;
    }
  }
  rd__log(RD_LOG_WARN, "jobs API: job %d's log tail finds news it cannot read; closing it", t->id);
  tail_end(t);
}

void rd__job_tail_cancel(rd__job_tail *t) {
  if (t->waiting) t->cancelled = 1;   /* freed when its wait fires */
  else tail_free(t);
}

rd__job_tail *rd__job_http_tail(const char *path, const char *auth, rd__http_reply reply, rd__tail_chunk chunk,
                                void *arg) {
  if (!authorized(auth, reply, arg)) return NULL;
  char idpart[256];
  size_t n = strlen(path) - 10 - 10;   /* between /api/jobs/ and /logs/tail */
  rd_cli_job j;
  if (n >= sizeof(idpart)) {
    fail(reply, arg, 404, "no such job");
    return NULL;
  }
  memcpy(idpart, path + 10, n);
  idpart[n] = 0;
  if (unescape(idpart) != 0 || resolve(idpart, &j) != 0) {
    fail(reply, arg, 404, "no job '%.100s' on this node", idpart);
    return NULL;
  }
  if (nwaiting >= JH_WAITING) {   /* each holds one of the port's 16 connections */
    fail(reply, arg, 503, "%d requests wait on jobs already; try again later", JH_WAITING);
    return NULL;
  }
  rd__job_tail *t = calloc(1, sizeof(*t));
  if (!t) {
    fail(reply, arg, 500, "node out of memory");
    return NULL;
  }
  *t = (rd__job_tail){.id = j.id, .chunk = chunk, .arg = arg};
  nwaiting++;
  return t;
}

/* GET /api/version, as Ray's dashboard answers it: the jobs API version
 * (4: with DELETE) and the Ray whose API this one speaks, which Ray's SDK
 * checks before anything else. */
static void version(rd__http_reply reply, void *arg) {
  rd__mbuf b = {0};
  const char *s = strrchr(N.opts.session_dir, '/');
  rd__mbuf_printf(&b, "{\"version\": \"4\", \"ray_version\": \"%s\", \"ray_commit\": \"libraydist\", "
                      "\"session_name\": ", JH_RAY_VERSION);
  rd__mbuf_json_cstr(&b, s ? s + 1 : N.opts.session_dir);
  rd__mbuf_printf(&b, ", \"server\": \"libraydist\"}\n");
  answer(reply, arg, 200, &b);
}

/* ---- commands: submit, stop, delete ---- */

typedef struct jh_cmd {
  rd__http_reply reply;
  void *arg;
  int kind;                 /* 's' submit, 't' stop, 'd' delete */
  int id;
  char *entry, *meta;       /* submit: kept beside the job */
  char sid[128];            /* submit: its submission id, or "" */
  char fwd_res[1100];       /* submit run on another node: its entrypoint resources, kept beside it ("" none) */
} jh_cmd;

static void cmd_free(jh_cmd *c) {
  free(c->entry);
  free(c->meta);
  free(c);
}

static void cmd_done(void *p, int status, const char *why, int exit_code, const char *out, const char *err) {
  jh_cmd *c = p;
  if (status != 0) {
    fail(c->reply, c->arg, status == RD_EAGAIN ? 503 : 500, "%s", why);
  } else if (exit_code != 0) {   /* its last words: the reason comes last, after what a tool it ran said */
    size_t n = strlen(err);
    fail(c->reply, c->arg, 500, "`raydist job` on the node failed (exit %d): %s%s", exit_code, n > 400 ? "..." : "",
         err + (n > 400 ? n - 400 : 0));
  } else if (c->kind == 's') {
    int id = 0;
    if (sscanf(out, "job %d submitted", &id) != 1 || id <= 0) {
      fail(c->reply, c->arg, 500, "`raydist job submit` said no job id: %.200s", out);
    } else {
      /* beside the job's own record; a GET after this answer shows them */
      if (job_file_put(id, "entrypoint", c->entry) != 0 || (c->meta && job_file_put(id, "metadata", c->meta) != 0) ||
          (c->fwd_res[0] && job_file_put(id, "resources_there", c->fwd_res) != 0))
        rd__log(RD_LOG_WARN, "jobs API: cannot keep job %d's entrypoint or metadata: %s", id, strerror(errno));
      rd__mbuf b = {0};
      rd__mbuf_printf(&b, "{\"job_id\": \"%d\", \"submission_id\": ", id);
      if (c->sid[0]) rd__mbuf_json_cstr(&b, c->sid);
      else rd__mbuf_printf(&b, "\"%d\"", id);
      rd__mbuf_printf(&b, "}\n");
      answer(c->reply, c->arg, 200, &b);
    }
  } else {
    char body[64];
    int n = snprintf(body, sizeof(body), "{\"%s\": true}\n", c->kind == 't' ? "stopped" : "deleted");
    c->reply(c->arg, 200, body, (size_t)n);
  }
  cmd_free(c);
}

static void run(jh_cmd *c, const char *const *argv, uint64_t limit_ms) {
  char why[300];
  int r = rd__job_cmd(argv, limit_ms, cmd_done, c, why, sizeof(why));
  if (r != 0) {
    fail(c->reply, c->arg, r == RD_EAGAIN ? 503 : 500, "%s", why);
    cmd_free(c);
  }
}

static jh_cmd *cmd_new(rd__http_reply reply, void *arg, int kind, int id) {
  jh_cmd *c = calloc(1, sizeof(*c));
  if (!c) {
    fail(reply, arg, 500, "node out of memory");
    return NULL;
  }
  c->reply = reply;
  c->arg = arg;
  c->kind = kind;
  c->id = id;
  return c;
}

static void stop(const rd_cli_job *j, rd__http_reply reply, void *arg) {
  if (j->ended) {   /* Ray answers false for a job already ended */
    reply(arg, 200, "{\"stopped\": false}\n", 19);
    return;
  }
  jh_cmd *c = cmd_new(reply, arg, 't', j->id);
  if (!c) return;
  char id[16], tmo[16];
  snprintf(id, sizeof(id), "%d", j->id);
  snprintf(tmo, sizeof(tmo), "%d", JH_STOP_S);
  const char *argv[] = {"raydist", "job", "stop", id, "--session", N.opts.session_dir, "--timeout", tmo, NULL};
  run(c, argv, (JH_STOP_S + 15) * 1000);
}

static void delete_job(const rd_cli_job *j, rd__http_reply reply, void *arg) {
  if (!j->ended) {
    fail(reply, arg, 400, "job %d is %s: stop it first", j->id, j->state);
    return;
  }
  jh_cmd *c = cmd_new(reply, arg, 'd', j->id);
  if (!c) return;
  char id[16];
  snprintf(id, sizeof(id), "%d", j->id);
  const char *argv[] = {"raydist", "job", "delete", id, "--session", N.opts.session_dir, NULL};
  run(c, argv, 60000);
}

static int env_name_ok(const char *k) {
  if (!*k || (*k >= '0' && *k <= '9')) return 0;
  for (; *k; k++)
    if (!((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') || (*k >= '0' && *k <= '9') || *k == '_')) return 0;
  return 1;
}

/* A field Ray's SDK sends that this API does not do: null (or 0, {}) is
 * taken as unset, anything else refused. */
static int unset(const rd_json *v) {
  return v->type == RD_JSON_NULL || (v->type == RD_JSON_NUMBER && v->num == 0) ||
         (v->type == RD_JSON_OBJECT && !v->child);
}

/* entrypoint_label_selector ({"zone": "west", "gpu": "in(A100,H100)"},
 * scheduler/labels.h's terms as values) as one selector in sel (slen:
 * RD_LABEL_SEL_LEN): the job runs on a node whose labels satisfy it
 * (entry_place).  0, or -1 with why. */
static int entry_labels(const rd_json *m, char *sel, size_t slen, char *why, size_t wlen) {
  sel[0] = 0;
  if (m->type == RD_JSON_NULL) return 0;
  if (m->type != RD_JSON_OBJECT) {
    snprintf(why, wlen, "entrypoint_label_selector must be an object of strings");
    return -1;
  }
  char err[300];
  for (const rd_json *v = m->child; v; v = v->next) {
    size_t n = strlen(sel);
    if (v->type != RD_JSON_STRING) {
      snprintf(why, wlen, "entrypoint_label_selector.%.100s must be a string", v->key);
      return -1;
    }
    if (strpbrk(v->key, ",;=") || strchr(v->str, ';') ||
        snprintf(sel + n, slen - n, "%s%s=%s", n ? "," : "", v->key, v->str) >= (int)(slen - n)) {
      snprintf(why, wlen, "entrypoint_label_selector: '%.100s' is not a label key, or the selector is too long", v->key);
      return -1;
    }
  }
  if (rd_label_sel_check(sel, err, sizeof(err)) != 0) {
    snprintf(why, wlen, "entrypoint_label_selector: %s", err);
    return -1;
  }
  return 0;
}

/* Ray's entrypoint_num_cpus, _num_gpus, _memory (numbers or null) and
 * _resources (an object of numbers) appended to spec as "CPU=1,GPU=0.5,
 * memory=N,name=2" (zeros left out: nothing held); _label_selector into
 * sel (RD_LABEL_SEL_LEN).  0, or -1 with why. */
static int entry_res(const rd_json *m, char *spec, size_t len, char *sel, char *why, size_t wlen) {
  const char *k = m->key + 11;
  const char *name = !strcmp(k, "num_cpus") ? "CPU" : !strcmp(k, "num_gpus") ? "GPU" : !strcmp(k, "memory") ? "memory"
                                                                                                        : NULL;
  if (name || !strcmp(k, "resources")) {
    if (!name && m->type != RD_JSON_OBJECT && m->type != RD_JSON_NULL) {
      snprintf(why, wlen, "entrypoint_resources must be an object of numbers");
      return -1;
    }
    for (const rd_json *v = name ? m : m->type == RD_JSON_OBJECT ? m->child : NULL; v; v = name ? NULL : v->next) {
      if (v->type == RD_JSON_NULL) continue;
      if (v->type != RD_JSON_NUMBER || !(v->num >= 0) || v->num > 1e15) {
        snprintf(why, wlen, "%.100s%s%.100s must be a number >= 0", m->key, name ? "" : ".", name ? "" : v->key);
        return -1;
      }
      if (v->num == 0) continue;
      if (!name && (!v->key[0] || strpbrk(v->key, ",= ") || !strcmp(v->key, "CPU") || !strcmp(v->key, "GPU") ||
                    !strcmp(v->key, "memory"))) {
        snprintf(why, wlen, "entrypoint_resources: '%.100s' is not a custom resource's name (CPU, GPU and memory have "
                 "fields of their own)", v->key);
        return -1;
      }
      size_t n = strlen(spec);
      int w = snprintf(spec + n, len - n, "%s%s=%.17g", n ? "," : "", name ? name : v->key, v->num);
      if (w < 0 || (size_t)w >= len - n) {
        snprintf(why, wlen, "entrypoint resources: too many");
        return -1;
      }
    }
    return 0;
  }
  if (!strcmp(k, "label_selector")) return entry_labels(m, sel, RD_LABEL_SEL_LEN, why, wlen);
  if (!unset(m)) {   /* what Ray adds later */
    snprintf(why, wlen, "%.100s is not supported", m->key);
    return -1;
  }
  return 0;
}

/* Where a job runs, given the spec entry_res made (amounts the node takes,
 * rd__res_parse_spec) and its label selector sel, as Ray places a job's
 * driver on a node with room: here when this node's labels satisfy sel and
 * it has them free now (*now: promised to it until its keeper asks); else
 * on another live node that does (*away: the job runs on another node,
 * this node's job following it, the node its mirror's seek names, which
 * claims its room in the view meanwhile); else, when a kind of node the
 * autoscaler can start would hold them, wherever room comes first (*away
 * too: the mirror's seek waits as this node's demand, as Ray's pending job
 * does, so a node may be started for it); else here, waiting, when this
 * node has them in all and no other live node that could hold them has
 * fewer jobs waiting (rd__job_hold_wait_here); else on the other live node
 * with the fewest (*away too: the mirror's seek picks it, job_hold.c's
 * seek_found, and moves it should room come free first elsewhere); else
 * 400 now, rather than a job waiting for ever.  The amounts parsed into
 * *res. */
static int entry_place(const char *spec, const char *sel, rd_resources *res, int *away, int *now, char *why,
                       size_t wlen) {
  char err[300], type[64], ip[64];
  if (rd__res_parse_spec(spec, res, err, sizeof(err)) != 0) {
    snprintf(why, wlen, "entrypoint %s", err);
    return -1;
  }
  int labels_here = rd_labels_match(N.labels, sel[0] ? sel : NULL);
  if (labels_here && rd_res_feasible(&N.ledger, res)) {   /* here, unless busy here and free there */
    if (rd__job_hold_free_now(res)) *now = 1;
    else   /* busy everywhere: demand, or wait on the node with the fewest waiting, this one of equals */
      *away = rd__cluster_node_free_for(res, sel, ip, sizeof(ip)) || rd__cluster_launchable(res, sel, type, sizeof(type)) ||
              !rd__job_hold_wait_here(res, sel);
    return 0;
  }
  /* there now; where room comes first, on a node the autoscaler starts for
   * it perhaps; there, waiting */
  *away = rd__cluster_node_free_for(res, sel, ip, sizeof(ip)) || rd__cluster_launchable(res, sel, type, sizeof(type)) ||
          rd__cluster_node_for(res, sel, ip, sizeof(ip));
  if (*away) return 0;
  if (labels_here) return rd__job_hold_infeasible(res, why, wlen) ? -1 : 0;
  char what[256];
  rd_res_format(res, what, sizeof(what));
  snprintf(why, wlen, "no live node whose labels satisfy the job's entrypoint_label_selector (%s) has its %s, and no "
           "kind of node the autoscaler can start would (this node's labels: %s)", sel, what,
           N.labels[0] ? N.labels : "none");
  return -1;
}

static void submit(const char *body, size_t blen, rd__http_reply reply, void *arg) {
  char why[300];
  rd_json *root = rd_json_parse(body, blen, why, sizeof(why));
  if (!root) {
    fail(reply, arg, 400, "%s", why);
    return;
  }
  const char *entry = NULL, *sid = NULL, *bad = NULL, *wdir = NULL;
  const rd_json *env = NULL, *meta = NULL;
  char badbuf[1300], spec[1100] = "", sel[RD_LABEL_SEL_LEN] = "";
  if (root->type != RD_JSON_OBJECT) bad = "the body must be a JSON object";
  const char *dup = rd_json_dup_key(root);
  for (const rd_json *m = root->type == RD_JSON_OBJECT ? root->child : NULL; m && !dup; m = m->next) {
    dup = rd_json_dup_key(m);   /* runtime_env, metadata */
    for (const rd_json *r = m->type == RD_JSON_OBJECT ? m->child : NULL; r && !dup; r = r->next) dup = rd_json_dup_key(r);
  }
  if (!bad && dup) {   /* another reader may take the other one: ambiguous, so refused */
    snprintf(badbuf, sizeof(badbuf), "the field '%.100s' is given twice", dup);
    bad = badbuf;
  }
  for (const rd_json *m = root->type == RD_JSON_OBJECT ? root->child : NULL; m && !bad; m = m->next) {
    if (!strcmp(m->key, "entrypoint")) {
      if (m->type != RD_JSON_STRING || !m->str[0]) bad = "entrypoint must be a non-empty string";
      else entry = m->str;
    } else if (!strcmp(m->key, "submission_id") || !strcmp(m->key, "job_id")) {
      if (m->type == RD_JSON_NULL) continue;
      if (m->type != RD_JSON_STRING) bad = "submission_id must be a string";
      else sid = m->str;
    } else if (!strcmp(m->key, "runtime_env")) {
      if (m->type == RD_JSON_NULL) continue;
      if (m->type != RD_JSON_OBJECT) bad = "runtime_env must be an object";
      for (const rd_json *r = m->type == RD_JSON_OBJECT ? m->child : NULL; r && !bad; r = r->next) {
        if (!strcmp(r->key, "env_vars") && (r->type == RD_JSON_OBJECT || r->type == RD_JSON_NULL)) {
          env = r;
        } else if (!strcmp(r->key, "working_dir") && r->type == RD_JSON_STRING) {
          wdir = r->str;
        } else if (!strcmp(r->key, "excludes")) {
          continue;   /* the SDK applied them when it made the package */
        } else if (!unset(r)) {
          snprintf(badbuf, sizeof(badbuf), "runtime_env.%.100s is not supported (only env_vars and working_dir)",
                   r->key);
          bad = badbuf;
        }
      }
    } else if (!strcmp(m->key, "metadata")) {
      if (m->type != RD_JSON_OBJECT && m->type != RD_JSON_NULL) bad = "metadata must be an object of strings";
      for (const rd_json *r = m->type == RD_JSON_OBJECT ? m->child : NULL; r && !bad; r = r->next)
        if (r->type != RD_JSON_STRING) bad = "metadata must be an object of strings";
      meta = m;
    } else if (!strncmp(m->key, "entrypoint_", 11)) {
      if (entry_res(m, spec, sizeof(spec), sel, badbuf, sizeof(badbuf)) != 0) bad = badbuf;
    } else {
      snprintf(badbuf, sizeof(badbuf), "unknown field '%.100s'", m->key);
      bad = badbuf;
    }
  }
  if (!bad && !entry) bad = "entrypoint is missing";
  if (!bad && sid) {
    char *end;
    (void)strtol(sid, &end, 10);
    rd_cli_job dup;
    if (!sid[0] || strlen(sid) > 127 || strpbrk(sid, "\n/?#%"))
      bad = "submission_id: 1 to 127 characters, none of newline / ? # %";
    else if (!*end)
      bad = "submission_id must not be a number (job numbers are the node's)";
    else if (resolve(sid, &dup) == 0) {
      snprintf(badbuf, sizeof(badbuf), "a job with submission_id '%.100s' exists (job %d)", sid, dup.id);
      bad = badbuf;
    }
  }
  int away = 0;        /* on another node, the one its mirror's seek names */
  int now = 0;         /* here, free now */
  rd_resources res;
  if (!bad && (spec[0] || sel[0]) && entry_place(spec, sel, &res, &away, &now, badbuf, sizeof(badbuf)) != 0)
    bad = badbuf;
  char self_exe[600] = "", gcs[256] = "", cfile[700];
  if (!bad && away) {   /* this very program runs the mirror; the cluster's GCS names the node */
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
    self_exe[n > 0 ? n : 0] = 0;
    snprintf(cfile, sizeof(cfile), "%s/cluster", N.opts.session_dir);
    if (!self_exe[0] || rd__read_kv(cfile, "gcs", gcs, sizeof(gcs)) != 0 || !gcs[0])
      bad = "the job would run on another node, but this node cannot name its own program or the cluster's GCS";
  }
  char wd_zip[900] = "";
  if (!bad && wdir && pkg_find(wdir, wd_zip, sizeof(wd_zip), badbuf, sizeof(badbuf)) != 0) bad = badbuf;
  size_t nenv = 0;
  for (const rd_json *e = env ? env->child : NULL; e && !bad; e = e->next, nenv++) {
    if (e->type != RD_JSON_STRING) bad = "env_vars values must be strings";
    else if (!env_name_ok(e->key)) bad = "env_vars names are letters, digits and _, not starting with a digit";
    else if (strchr(e->str, '\n')) bad = "env_vars values are one line each";
    else if (nenv >= JH_ENV_MAX) bad = "more than 256 env_vars";
  }
  if (bad) {
    fail(reply, arg, 400, "%s", bad);
    free(root);
    return;
  }
  jh_cmd *c = cmd_new(reply, arg, 's', 0);
  if (!c) {
    free(root);
    return;
  }
  rd__mbuf mb = {0};
  if (meta && meta->child) {   /* kept as JSON made here, so that reading it back needs no parse */
    rd__mbuf_printf(&mb, "{");
    for (const rd_json *r = meta->child; r; r = r->next) {
      rd__mbuf_json_cstr(&mb, r->key);
      rd__mbuf_printf(&mb, ": ");
      rd__mbuf_json_cstr(&mb, r->str);
      if (r->next) rd__mbuf_printf(&mb, ", ");
    }
    rd__mbuf_printf(&mb, "}");
  }
  const char **argv = calloc(40 + 4 * nenv, sizeof(*argv));
  char **envs = calloc(nenv + 1, sizeof(*envs));
  c->entry = strdup(entry);
  c->meta = mb.p;   /* NULL: none */
  snprintf(c->sid, sizeof(c->sid), "%s", sid ? sid : "");
  if (away) snprintf(c->fwd_res, sizeof(c->fwd_res), "%s", spec);
  int oom = !argv || !envs || !c->entry || mb.oom;
  size_t k = 0, i = 0;
  if (!oom) {
    const char *fixed[] = {"raydist", "job", "submit", "--session", N.opts.session_dir, "--in-job-dir"};
    for (size_t f = 0; f < sizeof(fixed) / sizeof(fixed[0]); f++) argv[k++] = fixed[f];
    if (sid) {
      argv[k++] = "--name";
      argv[k++] = sid;
    }
    if (spec[0] && !away) {   /* what its driver holds while it runs */
      argv[k++] = "--entrypoint-resources";
      argv[k++] = spec;
    }
    if (wd_zip[0]) {   /* its working directory: the package unpacked */
      argv[k++] = "--working-dir-zip";
      argv[k++] = wd_zip;
    }
    for (const rd_json *e = env ? env->child : NULL; e && !oom; e = e->next, i++) {
      size_t n = strlen(e->key) + strlen(e->str) + 2;
      if (!(envs[i] = malloc(n))) oom = 1;
      else snprintf(envs[i], n, "%s=%s", e->key, e->str);
      argv[k++] = "--env";
      argv[k++] = envs[i];
    }
    if (away) {   /* its program: `raydist job submit --mirror` of it to the node sought, followed to its end */
      argv[k++] = "--exe";
      argv[k++] = self_exe;
      const char *mirror[] = {"--", "raydist", "job", "submit", "--address", gcs, "--follow", "--mirror"};
      for (size_t f = 0; f < sizeof(mirror) / sizeof(mirror[0]); f++) argv[k++] = mirror[f];
      if (spec[0]) {
        argv[k++] = "--entrypoint-resources";
        argv[k++] = spec;
      }
      /* the node this node names (free now first) once one can hold
       * them, its room claimed in the view until it reports the job: jobs
       * submitted together go to different nodes (and again should that
       * one have gone meanwhile) */
      argv[k++] = "--seek-node";
      if (sel[0]) {
        argv[k++] = "--entrypoint-label-selector";
        argv[k++] = sel;
      }
      for (size_t e = 0; e < i; e++) {
        argv[k++] = "--env";
        argv[k++] = envs[e];
      }
      if (wd_zip[0]) {   /* the unpacked copy it runs in, shipped */
        argv[k++] = "--working-dir";
        argv[k++] = ".";
      }
    }
    const char *tail[] = {"--", "/bin/sh", "-c", entry, NULL};
    for (size_t f = 0; f < sizeof(tail) / sizeof(tail[0]); f++) argv[k++] = tail[f];
  }
  if (oom) {
    fail(reply, arg, 500, "node out of memory");
    cmd_free(c);
  } else {
    if (now) rd__job_hold_promise(&res);   /* until its keeper asks for them, the next job finds them taken */
    run(c, argv, 60000);
  }
  for (size_t e = 0; envs && e < nenv; e++) free(envs[e]);
  free(envs);
  free(argv);
  free(root);
}

/* ---- routing ---- */

int rd__job_http_path(const char *path) {
  return (!strncmp(path, "/api/jobs", 9) && (path[9] == 0 || path[9] == '/')) || !strcmp(path, "/api/version") ||
         !strncmp(path, "/api/packages/", 14);
}

void rd__job_http(const char *method, const char *path, const char *query, const char *auth, const char *body,
                  size_t blen, rd__http_reply reply, void *arg) {
  int get = !strcmp(method, "GET"), post = !strcmp(method, "POST"), del = !strcmp(method, "DELETE");
  if (!strcmp(path, "/api/version")) {
    if (get) version(reply, arg);
    else fail(reply, arg, 405, "/api/version takes GET");
    return;
  }
  if (!authorized(auth, reply, arg)) return;
  if (!strncmp(path, "/api/packages/", 14)) {   /* PUT is streamed: rd__job_http_pkg_begin */
    if (get) pkg_get(path, reply, arg);
    else if (!strcmp(method, "PUT")) fail(reply, arg, 411, "a package's PUT needs a Content-Length");
    else fail(reply, arg, 405, "/api/packages/gcs/NAME takes GET and PUT");
    return;
  }
  const char *rest = path + 9;
  if (*rest == '/') rest++;
  if (!*rest) {
    if (get) list(reply, arg);
    else if (post) submit(body, blen, reply, arg);
    else fail(reply, arg, 405, "/api/jobs/ takes GET (list) and POST (submit)");
    return;
  }
  char idpart[256], tail[64] = "";
  size_t n = strcspn(rest, "/");
  if (n >= sizeof(idpart) || strlen(rest + n) >= sizeof(tail)) {
    fail(reply, arg, 404, "no such job or path");
    return;
  }
  memcpy(idpart, rest, n);
  idpart[n] = 0;
  snprintf(tail, sizeof(tail), "%s", rest[n] ? rest + n + 1 : "");
  if (tail[0] && tail[strlen(tail) - 1] == '/') tail[strlen(tail) - 1] = 0;
  rd_cli_job j;
  if (unescape(idpart) != 0 || resolve(idpart, &j) != 0) {
    fail(reply, arg, 404, "no job '%.100s' on this node", idpart);
    return;
  }
  if (!tail[0] && get) {
    read_job(&j, query, 0, reply, arg);
  } else if (!tail[0] && del) {
    delete_job(&j, reply, arg);
  } else if (!tail[0]) {
    fail(reply, arg, 405, "/api/jobs/ID takes GET and DELETE");
  } else if (!strcmp(tail, "logs")) {
    if (get) read_job(&j, query, 1, reply, arg);
    else fail(reply, arg, 405, "/api/jobs/ID/logs takes GET");
  } else if (!strcmp(tail, "logs/tail")) {
    fail(reply, arg, 400, "/api/jobs/ID/logs/tail is a WebSocket: GET with Upgrade: websocket");
  } else if (!strcmp(tail, "stop")) {
    if (post) stop(&j, reply, arg);
    else fail(reply, arg, 405, "/api/jobs/ID/stop takes POST");
  } else {
    fail(reply, arg, 404, "no such path: /api/jobs/ID, /api/jobs/ID/logs and /api/jobs/ID/stop");
  }
}
