/* runtime/common.h - small helpers shared by the daemon and the client library:
 * resource strings and resource messages, session paths, object-id layout.
 * Nothing here does I/O beyond what its name says. */
#ifndef RD_RUNTIME_COMMON_H
#define RD_RUNTIME_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "resources.h"
#include "raydist.pb-c.h"

#define RD_PROTO_VERSION 1u
#define RD_INLINE_MAX (100u * 1024u)   /* results and puts up to this stay inline */
/* Bytes of inline values one task message or reply carries at most (its
 * by-value arguments, its returns): the rest go through the store, so that
 * thousands of them stay well inside RD_FRAME_MAX. */
#define RD_MSG_INLINE_BUDGET ((size_t)16 << 20)
/* ... and with the small objects its sender holds that it names (ready ref
 * arguments: copied in, as before fetching existed, while the message stays
 * this far inside RD_FRAME_MAX); past it the worker asks for them
 * (Arg.fetch).  Fetching 440 of 600 values of 100 KiB cost ~25%. */
#define RD_MSG_REF_BUDGET ((size_t)56 << 20)
#define RD_NODE_SOCK "node.sock"

/* Object ids: the owner's client id in the top 32 bits, a per-owner sequence
 * below.  A client id is the node's index in the cluster (12 bits, 0 on an
 * embedded cluster) above a per-node counter (20 bits), so ids are unique in
 * the cluster and name the owner's node. */
#define RD_OID_SEQ_BITS 32
#define RD_CLIENT_NODE_SHIFT 20
static inline uint32_t rd__client_node(uint32_t client) { return client >> RD_CLIENT_NODE_SHIFT; }
static inline uint64_t rd__oid_make(uint32_t client, uint64_t seq) {
  return ((uint64_t)client << RD_OID_SEQ_BITS) | (seq & ((1ull << RD_OID_SEQ_BITS) - 1));
}
static inline uint32_t rd__oid_client(uint64_t oid) { return (uint32_t)(oid >> RD_OID_SEQ_BITS); }

/* Actor and placement-group ids: the index of the node that keeps the record
 * (0 on an embedded cluster) above a per-node sequence of 40 bits. */
#define RD_REC_SEQ_BITS 40
static inline uint64_t rd__rec_id_make(uint32_t node, uint64_t seq) { return ((uint64_t)node << RD_REC_SEQ_BITS) | seq; }
static inline uint32_t rd__rec_id_node(uint64_t id) { return (uint32_t)(id >> RD_REC_SEQ_BITS); }
static inline uint64_t rd__rec_id_seq(uint64_t id) { return id & ((1ull << RD_REC_SEQ_BITS) - 1); }

/* Latency histograms (metrics): bucket i counts values up to 10 us * 10^i,
 * the last one everything above (+Inf).  Shared by the daemon and the
 * workers that report task run times to it (WorkerStats). */
#define RD_HIST_BUCKETS 9
static inline int rd__hist_bucket(uint64_t ns) {
  uint64_t bound = 10000;
  for (int i = 0; i < RD_HIST_BUCKETS - 1; i++, bound *= 10)
    if (ns <= bound) return i;
  return RD_HIST_BUCKETS - 1;
}

/* Where an unfinished task is, as its owner sees it (TaskInfo.state,
 * `raydist list tasks`).  The numbers are on the wire. */
enum {
  RD_TS_PENDING_ARGS,       /* an argument is not ready yet */
  RD_TS_PENDING_LEASE,      /* ready, queued for a worker (lease) of its class */
  RD_TS_RETRY_BACKOFF,      /* a retry waiting out its backoff */
  RD_TS_PENDING_ACTOR,      /* an actor call waiting for its actor or for earlier calls */
  RD_TS_SUBMITTED,          /* sent to a worker, behind another task there */
  RD_TS_RUNNING,            /* the oldest task sent to its worker and not finished */
  RD_TS_NSTATES
};
/* Not an owner's state, never in TaskInfo: a task that failed for good,
 * as its node keeps the last of them (TaskFailure). */
#define RD_TS_FAILED RD_TS_NSTATES
/* Not an unfinished state: a task that finished well, as its node keeps
 * the last of them (OwnerStats.finished; TaskInfo rows of an owner's
 * unreported ones when TaskListAsk.finished). */
#define RD_TS_FINISHED (RD_TS_NSTATES + 1)
/* Tasks that finished well, told to the node (OwnerStats.finished) at most
 * RD_OST_FINISHED_MAX a report (all of them at shutdown); the node keeps
 * them (RAYDIST_TASK_HISTORY) for `ray list tasks`.  An owner holds at most
 * RD_OWNER_FINISHED_MAX unreported. */
#define RD_OST_FINISHED_MAX 200   /* 2000 a second: ~1-3% of a single client's 780k tasks/s (6% at 1000) */
#define RD_OWNER_FINISHED_MAX 10000
/* "PENDING_ARGS" .. "RUNNING", "FAILED", "FINISHED"; "?" for a number out
 * of range. */
const char *rd__task_state_name(int state);

/* The signal a node sends a driver or worker for `raydist stack` (a
 * real-time one: SIGRTMIN + 7); the process writes its threads' stacks to
 * SESSION/logs/stack-PID.txt (src/stack.c, runtime/stack_dump.c). */
int rd__stack_signal(void);
/* The state named s (any case), or -1. */
int rd__task_state_parse(const char *s);
/* A task's id as `ray list tasks` names it, NODE-OWNERPID-TASK in hex (its
 * owner's node index and pid, and its owner's task number), into out (at
 * least RD_TASK_ID_TEXT bytes): a row's task_id and another's
 * parent_task_id must match. */
#define RD_TASK_ID_TEXT 32
void rd__task_id_text(char *out, size_t len, uint32_t node, int pid, uint64_t task);

/* A worker's task mark (src/worker.c writes it, the node's pipe reader
 * takes it out: runtime/node.c): RD_TASK_MARK "task ID ATTEMPT NAME\n"
 * before a task's lines, or RD_TASK_MARK "name NAME\n" (an actor's class)
 * on its stdout and stderr; at most RD_TASK_MARK_MAX bytes, the name cut
 * to RD_TASK_MARK_NAME_MAX. */
#define RD_TASK_MARK "\x1e\x1frd:"
#define RD_TASK_MARK_LEN 5
#define RD_TASK_MARK_NAME_MAX 100
#define RD_TASK_MARK_MAX 160

/* An actor record's state as `raydist list actors` names it (Ray's names):
 * waiting to be placed or for its first start, restarting after its
 * process was lost, alive, dead.  Never on the wire. */
enum { RD_AS_PENDING_CREATION, RD_AS_RESTARTING, RD_AS_ALIVE, RD_AS_DEAD, RD_AS_NSTATES };
/* "PENDING_CREATION" .. "DEAD"; "?" for a number out of range. */
const char *rd__actor_list_state_name(int state);
/* The state named s (any case), or -1. */
int rd__actor_list_state_parse(const char *s);

/* Application metrics (rd_metric_*), checked alike by the process that
 * defines them and by the node that serves them. */
#define RD_METRIC_NAME_MAX 100
#define RD_METRIC_HELP_MAX 200
#define RD_METRIC_TAGS_MAX 8
#define RD_METRIC_TAG_VALUE_MAX 64
#define RD_METRIC_TAGS_LEN 1400   /* room for the longest canonical tag string */
#define RD_METRIC_BOUNDS_MAX 32
enum { RD_METRIC_COUNTER = 1, RD_METRIC_GAUGE = 2, RD_METRIC_HISTOGRAM = 3 };
/* "counter", "gauge", "histogram" (Prometheus's TYPE words); "?" else. */
const char *rd__metric_kind_name(int kind);
/* A Prometheus metric name of ours to give: 0, or RD_EINVAL with why. */
int rd__metric_name_check(const char *name, char *err, size_t errlen);
/* tags ("k=v,k2=v2"; NULL or "": none) in canonical form, keys sorted, in
 * out (RD_METRIC_TAGS_LEN): 0, or RD_EINVAL with why. */
int rd__metric_tags_canon(const char *tags, char *out, size_t outlen, char *err, size_t errlen);
/* Histogram bounds: 1..RD_METRIC_BOUNDS_MAX, finite, strictly ascending. */
int rd__metric_bounds_check(const double *b, size_t n, char *err, size_t errlen);

/* Parse "name=amount,name=amount" into r's custom resources (amounts as in
 * rd_res_from_double).  RD_EINVAL with a reason in err (if non-NULL). */
int rd__res_parse_custom(rd_resources *r, const char *spec, char *err, int errlen);
/* "CPU=4,GPU=1,memory=BYTES,name=amount,..." (spaces around each part
 * allowed) into r, zeroed first: 0, or RD_EINVAL with a reason in err. */
int rd__res_parse_spec(const char *spec, rd_resources *r, char *err, size_t errlen);

/* rd_resources <-> message.  The message form points into `r` (no copies)
 * and is valid while r and storage live. */
typedef struct rd__res_msg {
  Rd__Resources msg;
  Rd__Custom custom[RD_RES_MAX_CUSTOM];
  Rd__Custom *customp[RD_RES_MAX_CUSTOM];
} rd__res_msg;
void rd__res_to_msg(const rd_resources *r, rd__res_msg *out);
/* RD_EINVAL when the message is out of range. */
int rd__res_from_msg(const Rd__Resources *m, rd_resources *out);
/* The same for amounts rather than requests (a node's total or free
 * resources): only non-negative, no whole-number rule above one unit. */
int rd__res_amounts_from_msg(const Rd__Resources *m, rd_resources *out);

/* Environment variables of a task's or an actor's worker process
 * (rd_task_opts.env, rd_actor_opts.env, rd_config.env): "NAME=VALUE"
 * entries.  The
 * canonical form is the entries sorted by name, each ended by a NUL, so that
 * equal sets compare equal with memcmp.  rd__env_canon checks vars[0..n)
 * (n at most RD_ENV_MAX_VARS, RD_ENV_MAX_BYTES in all; names [A-Za-z_]
 * [A-Za-z0-9_]*, each once; not RAYDIST_*, which the runtime sets, nor
 * CUDA_VISIBLE_DEVICES, which the GPU grant sets) and sets *out (malloc'd;
 * NULL when n is 0) and *len: 0, or RD_EINVAL / RD_ENOMEM with a reason in
 * err.  rd__env_split points out[0..) at the entries of a canonical form
 * and returns how many (at most max). */
#define RD_ENV_MAX_VARS 256
#define RD_ENV_MAX_BYTES 65536
int rd__env_canon(const char *const *vars, size_t n, char **out, size_t *len, char *err, size_t errlen);
/* Is entry v ("NAME=VALUE") one a set may hold (its name as above, not
 * the runtime's own)? */
int rd__env_settable(const char *v);
/* Do entries a and b ("NAME=VALUE") name the same variable? */
int rd__env_same_name(const char *a, const char *b);
/* prefix, then the names of vars[0..n) a set may hold, each once, joined
 * by ',' (RAYDIST_ENV_VARS's form); malloc'd, NULL without memory. */
char *rd__env_names(const char *prefix, const char *const *vars, size_t n);
size_t rd__env_split(const char *canon, size_t len, char **out, size_t max);

/* An intrusive hash table with chained buckets: entries are the callers'
 * structs holding an rd__hlink (at their start, so a link is its entry).
 * A lookup walks rd__htab_bucket(t, hash), comparing hash and key itself.
 * Buckets double past one entry each; the first add makes 64.  An add also
 * halves them while under 1/8 are used (not below RD_HTAB_KEEP), so a table
 * gives back what a burst took; only adds move entries, never a del or a
 * sweep, so those may run while the buckets are walked. */
#define RD_HTAB_KEEP 1024
typedef struct rd__hlink {
  struct rd__hlink *next;   /* in its bucket */
  uint64_t hash;
} rd__hlink;
typedef struct rd__htab {
  rd__hlink **b;            /* NULL until the first add */
  size_t mask, count;
} rd__htab;
/* FNV-1a over p[0..n), going on from h (start with RD_HASH_INIT). */
#define RD_HASH_INIT 1469598103934665603ull
uint64_t rd__hash_bytes(uint64_t h, const void *p, size_t n);
static inline rd__hlink *rd__htab_bucket(const rd__htab *t, uint64_t hash) {
  return t->b ? t->b[hash & t->mask] : NULL;
}
/* 0, or RD_ENOMEM (e not added); e->hash must be set. */
int rd__htab_add(rd__htab *t, rd__hlink *e);
void rd__htab_del(rd__htab *t, rd__hlink *e);
/* Removes each entry keep(e, arg) refuses (every one when keep is NULL)
 * and hands it to drop; returns how many. */
size_t rd__htab_sweep(rd__htab *t, int (*keep)(rd__hlink *, void *), void (*drop)(rd__hlink *, void *), void *arg);
/* Sweeps every entry, then frees the buckets. */
void rd__htab_free(rd__htab *t, void (*drop)(rd__hlink *, void *), void *arg);

/* An actor's concurrency groups (rd_actor_opts.concurrency_groups,
 * "name=threads,..."): rd__cgroups_parse fills out[0..n) and returns n
 * (0 for NULL or ""), or RD_EINVAL with a reason in err (a name not 1..63
 * bytes of [A-Za-z0-9_-], "default", a name twice, threads not 1..256, more
 * than RD_CGROUPS_MAX groups). */
#define RD_CGROUPS_MAX 16
#define RD_CGROUP_THREADS_MAX 256
typedef struct rd__cgroup {
  char name[64];
  int threads;
} rd__cgroup;
int rd__cgroups_parse(const char *spec, rd__cgroup *out, char *err, size_t errlen);

/* Each line of data[0..len) (the last may lack its newline) on f with
 * prefix before it and a newline after; then fflush (workers' output, on
 * the node's log and on the driver). */
void rd__print_lines(FILE *f, const char *prefix, const char *data, size_t len);

/* s[0..n) copied into one malloc'ed block (free() it once): n pointers, a
 * NULL, then the strings; NULL when out of memory. */
char **rd__strv_pack(char *const *s, size_t n);

/* Connect the non-blocking socket `fd` to `sa`, waiting at most `ms`.  A
 * signal (SIGCHLD when a worker exits) does not end the wait early: a
 * blocking connect with a send timeout fails with EINTR then.  0, or -1
 * with errno set (ETIMEDOUT when the time ran out).  `ms` < 0: no limit. */
struct sockaddr;
int rd__connect_within(int fd, const struct sockaddr *sa, unsigned salen, int ms);

/* GET path from ip:port over HTTP/1.0 (token: sent as a bearer token, or
 * NULL), all of it within ms: 0 with the body of a 200 answer in *body
 * (malloc'd, NUL-terminated, *len bytes), or -1 with why (no connection, no
 * whole answer in time, another status, an answer past max bytes). */
int rd__http_get(const char *ip, int port, const char *path, const char *token, int ms, size_t max, char **body,
                 size_t *len, char *why, size_t whylen);
/* Many GETs at once (each v[i].ip, port, path; token as for rd__http_get),
 * all of them within ms: each v[i].rc 0 with body and len as
 * rd__http_get's, or -1 with why (for an answer other than 200: its
 * status line and the first line of its body; its status in status).  One
 * that does not answer does not hold up the others. */
typedef struct rd__http_fetch {
  const char *ip, *path;
  int port;
  int rc;
  int status;               /* the answer's HTTP status (0: none came) */
  char *body;
  size_t len;
  char why[300];
} rd__http_fetch;
void rd__http_get_all(rd__http_fetch *v, size_t n, const char *token, int ms, size_t max);

/* A query's key or value, %XX and '+' decoded in place: 0, or -1 for a
 * bad escape or a NUL. */
int rd__url_decode(char *s);
/* s as a query's value into out (len bytes; 3 a byte of s and 1 suffice):
 * all but letters, digits and -_.~ %-escaped; cut short when out is. */
void rd__url_encode(char *out, size_t len, const char *s);
/* A URL query's key=value pairs, each %-decoded, in a copy of it:
 *   rd__query it;
 *   if (rd__query_open(&it, query) != 0) ... out of memory
 *   while ((rc = rd__query_next(&it, &key, &val)) > 0) ...
 *   rd__query_close(&it);
 * next gives 1 and a pair (val "" for a bare key), 0 at the end, -1 for a
 * bad %-escape.  The strings live until close. */
typedef struct rd__query {
  char *copy, *save;
  int started;
} rd__query;
int rd__query_open(rd__query *it, const char *query);
int rd__query_next(rd__query *it, char **key, char **val);
void rd__query_close(rd__query *it);

/* Where session directories live: $RAYDIST_TMPDIR (default /tmp)/raydist-<uid>. */
void rd__session_root(char *root, size_t len);
/* The first line of a small file (a token, a port) without its newline: 0,
 * or -1 with errno when the file cannot be read; out may be empty. */
int rd__read_line(const char *path, char *out, size_t len);
/* Writes "v\n" to path through path.tmp and a rename, so that a reader
 * never sees a partial number (a port, a pid): 0, or -1. */
int rd__write_num_file(const char *path, int v);
/* Writes n bytes to path (created 0600, or truncated): 0, or -1 with
 * errno when it cannot be opened or written whole. */
int rd__write_file(const char *path, const void *p, size_t n);
/* A token of nbytes random bytes (at most 32), in hex, written to path
 * (0600, a line) and, out not NULL, into out (2 * nbytes + 1 bytes at
 * least): the cluster's (raydist start --head) and an embedded node's.
 * 0, or -1 with errno. */
int rd__make_token(const char *path, size_t nbytes, char *out, size_t outlen);
/* Read "key=value" from a small text file into out; 0 when found. */
int rd__read_kv(const char *path, const char *key, char *out, size_t len);

/* The session root made ready (rd__session_root): RAYDIST_TMPDIR made
 * with its missing parents as `mkdir -p` does, then raydist-UID (0700),
 * which must be a directory of this user's; `room` bytes must fit after
 * it in a Unix socket's path (the longest socket path under it, e.g.
 * "/session-XXXXXX/node.sock").  0, or -1 with why in err (RD_EINVAL in
 * *code for a path too long, RD_ESYS otherwise). */
int rd__session_root_make(char *root, size_t len, size_t room, int *code, char *err, size_t errlen);

/* Remove a directory tree (session directories); errors are ignored. */
void rd__rm_rf(const char *path);

/* The soft limit on open files raised toward the hard one (at most 65536),
 * as Ray raises its processes' own: a node holds a socket, two pipes and
 * two log files per worker, a driver a socket per actor it calls.  Once
 * per process. */
void rd__raise_nofile(void);
/* How many files this process holds open (-1: unknown). */
int rd__open_fds(void);
/* "what: strerror(err)" into out, with the limit to raise when err is
 * EMFILE or ENFILE ("this process holds N open files; its limit is L:
 * raise it with ulimit -n", whose is `who`) or EAGAIN (processes). */
void rd__sys_error(char *out, size_t len, const char *what, int err, const char *who);
/* Is err a shortage that may pass (out of files, memory or buffers), not a
 * fault that asking again cannot mend? */
int rd__errno_passing(int err);

#endif
