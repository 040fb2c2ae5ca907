/* raydist.h - the public C API of libraydist.
 *
 * A program registers remote functions with RD_REMOTE, calls rd_init(), and
 * submits tasks whose results come back as references (rd_ref) resolved with
 * rd_get().  The same executable is re-executed as the worker processes: in a
 * worker, rd_init() runs the worker loop and never returns, so keep work done
 * before rd_init() cheap and free of side effects.
 *
 * Ownership: every rd_ref an API call gives you holds one reference that you
 * drop with rd_ref_release(); every rd_buf filled by rd_get() holds a view
 * that you drop with rd_buf_release().  Nothing here is freed behind your back.
 * All calls return 0 or a negative RD_E* code (see raydist/error.h). */
#ifndef RAYDIST_H
#define RAYDIST_H

#include <stddef.h>
#include <stdint.h>

#include "raydist/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RD_EXTERN __attribute__((visibility("default")))
#define RD_MUST_CHECK __attribute__((warn_unused_result))

#define RD_VERSION_MAJOR 0
#define RD_VERSION_MINOR 1
#define RD_VERSION_PATCH 0

/* Wait forever in rd_get / rd_wait. */
#define RD_TIMEOUT_INF (-1)

/* ------------------------------------------------------------------ errors */

/* Static text for a code ("remote task failed"); never NULL. */
RD_EXTERN const char *rd_strerror(int err);
/* The code's name ("RD_ETASK"); never NULL. */
RD_EXTERN const char *rd_err_name(int err);

/* ------------------------------------------------------------ start/stop */

typedef struct rd_config {
  /* NULL or "" starts an embedded single-node cluster (node daemon + workers
   * as child processes), torn down by rd_shutdown().  "IP:PORT" (or "auto")
   * joins the cluster whose node `raydist start` runs on this machine (env
   * RAYDIST_ADDRESS when NULL). */
  const char *address;
  double num_cpus;              /* 0: number of online CPUs */
  double num_gpus;              /* <0 (default via rd_config_init): detect with CUDA; >=0: simulate that many */
  /* Bytes of memory of each GPU, from which a task's or actor's GPU share
   * gets its memory budget (rd_call_gpu_memory); 0: asked of CUDA, and no
   * budget without a driver (simulated GPUs). */
  uint64_t gpu_memory_bytes;
  uint64_t object_store_bytes;  /* 0: 512 MiB (env RAYDIST_OBJECT_STORE_BYTES) */
  const char *spill_dir;        /* NULL: <session>/spill; "" disables spilling */
  const char *custom_resources; /* "name=amount,name=amount" or NULL */
  int num_prestart_workers;     /* <0: one per CPU; workers also start on demand */
  int max_workers;              /* 0: 64 */
  int log_level;                /* 0 error .. 3 debug; env RAYDIST_LOG_LEVEL */
  /* This program's weight in the fair share of a node between the jobs that
   * run there (docs/scheduler.md): a job of weight 2 is entitled to twice
   * the CPUs/GPUs/memory of a job of weight 1 when both wait.  0: env
   * RAYDIST_JOB_WEIGHT, else 1.  At most 1000. */
  double job_weight;
  /* Lines that the workers doing this driver's work (its tasks, their
   * tasks, its actors) write to stdout and stderr are printed on the
   * driver's stdout and stderr, prefixed with "(NAME pid=N, ip=A) "
   * ("(NAME pid=N) " on an embedded cluster; Ray's log_to_driver); they are
   * in the workers' files on their nodes too.  1 (rd_config_init): print
   * them; 0, or env RAYDIST_LOG_TO_DRIVER=0: do not. */
  int log_to_driver;
  /* The namespace of this driver's names (Ray's namespace): named actors
   * and placement groups it (and its tasks and actors, on any node) makes
   * or looks up are in it, so jobs in different namespaces may use the
   * same names.  NULL or "": env RAYDIST_NAMESPACE, else the default
   * namespace, which every driver without one shares.  At most 127 bytes,
   * no ':' and no control characters (RD_EINVAL).  See docs/actors.md. */
  const char *namespace_name;
  /* The embedded node's labels, "key=value,..." (Ray's node labels), which
   * label selectors match; NULL: env RAYDIST_NODE_LABELS, else none.  A
   * cluster's nodes get theirs from `raydist start --labels`.  Syntax and
   * limits in docs/scheduler.md#node-labels (RD_EINVAL when malformed). */
  const char *node_labels;
  /* The job's environment variables (Ray's job-level runtime_env
   * {"env_vars": ...}): a NULL-terminated list of "NAME=VALUE", as
   * rd_task_opts.env, that every task and actor this driver makes runs
   * with (in workers started with them), and theirs in turn: a task or
   * actor whose own env names a variable of the job's has its own value,
   * the job's others beside it.  NULL: the variables that env
   * RAYDIST_ENV_VARS names ("NAME,NAME,..."; `raydist job submit --env`
   * and the jobs API's runtime_env env_vars set it for a job's driver),
   * else none.  The driver's own environment is not changed.  Checked as
   * rd_task_opts.env (RD_EINVAL from rd_init). */
  const char *const *env;
  /* Fallback allocation (Ray's): bytes past object_store_bytes that the
   * embedded node's store may take for objects that cannot be placed in
   * it even by spilling (one larger than the store, a store full of
   * objects being read, spilling failing); such objects stay in memory
   * until released (or spilled when the region is full), then their
   * memory goes back to the system
   * (docs/objectstore.md#fallback-allocation).  0: env
   * RAYDIST_OBJECT_STORE_FALLBACK_BYTES, else half the machine's memory;
   * <0: none (those creates fail with RD_E2BIG or RD_ESTORE_FULL).  A
   * cluster's nodes get theirs from `raydist start --object-store-fallback`. */
  int64_t object_store_fallback_bytes;
} rd_config;

/* Fill *cfg with the defaults described above. */
RD_EXTERN void rd_config_init(rd_config *cfg);

/* Start (cfg NULL = defaults).  In a worker process this never returns.
 * Errors: RD_ESTATE (already initialised), RD_EINVAL (bad config),
 * RD_ECONN/RD_ESYS (the node daemon could not be started). */
RD_EXTERN int rd_init(const rd_config *cfg) RD_MUST_CHECK;
/* Stop: return leases, stop the embedded cluster (its daemon, workers, socket,
 * segment and session directory).  Outstanding refs become invalid. */
RD_EXTERN void rd_shutdown(void);
/* 1 inside a worker process (in a remote function), else 0. */
RD_EXTERN int rd_is_worker(void);

/* ---------------------------------------------------------------- objects */

/* A reference to an object, owned by the process that created it.  A plain
 * value: copying it does not add a reference (use rd_ref_retain). */
typedef struct rd_ref {
  uint64_t id;
} rd_ref;

/* A read-only view of an object's bytes.  For objects in the shared-memory
 * store `data` points into a read-only mapping of the segment (zero copy);
 * for small objects it points into the owner's memory.  Valid until
 * rd_buf_release().  When a rd_get() slot failed, `error` is its code and
 * `data`/`size` hold a NUL-terminated message describing the failure. */
typedef struct rd_buf {
  const void *data;
  size_t size;
  int error;
  uint64_t priv_[2];
} rd_buf;

/* Copy `size` bytes into a new object.  Small objects stay in this process;
 * large ones are copied once into the node's shared-memory store.
 * Errors: RD_E2BIG, RD_ESTORE_FULL, RD_ENOSPC, RD_ESTATE (not initialised). */
RD_EXTERN int rd_put(const void *data, size_t size, rd_ref *out) RD_MUST_CHECK;
/* Zero-copy put: reserve `size` bytes in the store (or in memory when small),
 * write them through *data_out, then rd_put_seal().  The ref is not usable
 * (rd_get blocks on it) before the seal. */
RD_EXTERN int rd_put_begin(size_t size, void **data_out, rd_ref *out) RD_MUST_CHECK;
RD_EXTERN int rd_put_seal(rd_ref ref) RD_MUST_CHECK;
/* An object that contains refs (Ray's list of ObjectRefs put as one object):
 * `size` bytes as rd_put, and the n refs, which the new object holds (one
 * reference each, dropped when it goes) so that whoever reads it can take
 * them with rd_get_refs, or in a task it is passed to, rd_call_arg_refs.
 * The refs must be live references of the caller; at most 4,194,304.
 * Errors: those of rd_put, RD_EINVAL. */
RD_EXTERN int rd_put_refs(const void *data, size_t size, const rd_ref *refs, size_t n,
                          rd_ref *out) RD_MUST_CHECK;
/* The refs contained in the object `ref` (rd_put_refs, rd_return_refs):
 * waits for it as rd_get does, sets *n_out to how many, and with `out`
 * (room for max) fills it with them, each one new reference to release.
 * An object made by rd_put has none.  RD_EINVAL when ref is not live or max
 * is too small (nothing is taken), RD_ETIMEDOUT, or the object's error. */
RD_EXTERN int rd_get_refs(rd_ref ref, rd_ref *out, size_t max, size_t *n_out,
                          int64_t timeout_ms) RD_MUST_CHECK;

/* Wait until all `n` refs are ready (or timeout_ms passes; RD_TIMEOUT_INF to
 * wait forever) and fill out[0..n).  Returns 0 when every slot succeeded,
 * the first slot's error code otherwise (each slot has its own `error`), or
 * RD_ETIMEDOUT with no slot filled.  Release every filled slot. */
RD_EXTERN int rd_get(const rd_ref *refs, size_t n, rd_buf *out, int64_t timeout_ms) RD_MUST_CHECK;
/* Wait until at least `num_ready` of the refs are ready (finished or
 * failed) or the timeout passes; ready_out[i] (optional) is set to 1 for
 * ready refs.  Returns the number ready (may be < num_ready on timeout). */
RD_EXTERN int rd_wait(const rd_ref *refs, size_t n, size_t num_ready,
                      int64_t timeout_ms, uint8_t *ready_out);
RD_EXTERN void rd_buf_release(rd_buf *buf);

/* Completion queues: readiness of refs delivered to an event loop (Ray's
 * ObjectRef.future() and `await ref`).  rd_cq_add(cq, ref, tag) asks that
 * `tag` be queued in cq once ref is ready (finished or failed);
 * rd_cq_fd(cq) is a file descriptor that is readable while tags wait in cq,
 * for epoll, poll or uv_poll; rd_cq_take takes them.  Each pending add holds
 * its own reference to the object, which the event hands to the taker, so
 * a program may release its ref right after adding it.  A queue is safe to
 * use from several threads; the library notices completions while any of
 * the process's threads is inside it, and otherwise on its progress thread,
 * within about 2 ms (RAYDIST_PROGRESS_GRACE_US).  rd_shutdown closes every
 * queue: its fd becomes readable and rd_cq_take returns RD_ESTATE. */
typedef struct rd_cq rd_cq;
typedef struct rd_cq_event {
  uint64_t tag;          /* as given to rd_cq_add */
  rd_ref ref;            /* a reference of the caller's now: release it */
  int status;            /* 0: finished with a value; else its error code (rd_get gives the message) */
} rd_cq_event;
/* RD_ESTATE before rd_init, RD_ENOMEM, RD_ESYS (no eventfd). */
RD_EXTERN int rd_cq_create(rd_cq **out) RD_MUST_CHECK;
/* The queue's file descriptor: readable while events wait.  Do not read,
 * write or close it.  -1 for NULL. */
RD_EXTERN int rd_cq_fd(const rd_cq *cq);
/* Queue `tag` once `ref` (a live ref of the caller) is ready; at once when
 * it already is.  The same ref may be added any number of times, to one
 * queue or several.  RD_EINVAL (cq NULL, ref not live), RD_ENOMEM,
 * RD_ESTATE (closed by rd_shutdown). */
RD_EXTERN int rd_cq_add(rd_cq *cq, rd_ref ref, uint64_t tag) RD_MUST_CHECK;
/* For a streaming call's ref (RD_STREAMING): queue `tag` once the stream
 * has an item to take or has ended (at once when it has or did), then
 * rd_stream_next(stream, item, 0) until it returns RD_ETIMEDOUT, and add
 * again to hear of the next item: one event per add, as EPOLLONESHOT.  The
 * event's status is 0 (an item, or the end: rd_stream_next says which) or
 * the stream's failure.  RD_EINVAL when stream is not a live stream ref of
 * the caller; otherwise as rd_cq_add. */
RD_EXTERN int rd_cq_add_stream(rd_cq *cq, rd_ref stream, uint64_t tag) RD_MUST_CHECK;
/* Take up to max events, in the order their refs became ready, waiting up
 * to timeout_ms (RD_TIMEOUT_INF: no limit; 0: only what is there) for the
 * first.  The number taken (0 on timeout); RD_EEND at once when nothing is
 * queued or awaited (no add is pending); RD_EINVAL, RD_ESTATE (closed). */
RD_EXTERN int rd_cq_take(rd_cq *cq, rd_cq_event *out, size_t max, int64_t timeout_ms) RD_MUST_CHECK;
/* Adds not yet fired plus events not yet taken. */
RD_EXTERN size_t rd_cq_size(const rd_cq *cq);
/* Free the queue: the references its pending adds and untaken events hold
 * are dropped.  No thread may be using it.  Also after rd_shutdown. */
RD_EXTERN void rd_cq_destroy(rd_cq *cq);

RD_EXTERN void rd_ref_retain(rd_ref ref);
/* Drop a reference; the object is freed when no reference and no pending
 * task uses it. */
RD_EXTERN void rd_ref_release(rd_ref ref);

/* ------------------------------------------------------- remote functions */

typedef struct rd_call rd_call;
typedef int (*rd_remote_fn)(rd_call *call);

/* Descriptor of a remote function.  Created by RD_REMOTE; do not fill by hand. */
typedef struct rd_function {
  const char *name;
  rd_remote_fn fn;
  struct rd_function *next_;
} rd_function;

RD_EXTERN void rd_function_register_(rd_function *f);

/* RD_REMOTE(name) { ... } defines `int name_impl(rd_call *call)` and a global
 * descriptor `rd_function *const name`.  Only appends to a list before main;
 * duplicates are reported by rd_init().  Use RD_REMOTE_DECLARE(name) in
 * other files. */
#define RD_REMOTE(name)                                                      \
  static int name##_impl(rd_call *call);                                     \
  static rd_function name##_desc_ = {#name, name##_impl, NULL};              \
  rd_function *const name = &name##_desc_;                                   \
  __attribute__((constructor)) static void name##_register_(void) {          \
    rd_function_register_(&name##_desc_);                                    \
  }                                                                          \
  static int name##_impl(rd_call *call)
#define RD_REMOTE_DECLARE(name) extern rd_function *const name

/* Find a registered function by name (NULL when unknown). */
RD_EXTERN rd_function *rd_function_lookup(const char *name);

/* An argument of a task: bytes by value, a reference resolved (waited
 * for) before the task runs, or a reference passed as itself (borrowed). */
typedef struct rd_value {
  int kind;              /* RD_VALUE_BYTES, RD_VALUE_REF, RD_VALUE_BORROW or _BORROW_LIST */
  const void *data;
  size_t size;
  rd_ref ref;
} rd_value;
enum { RD_VALUE_BYTES = 1, RD_VALUE_REF = 2, RD_VALUE_BORROW = 3, RD_VALUE_BORROW_LIST = 4 };

static inline rd_value rd_arg_bytes(const void *data, size_t size) {
  rd_value v = {RD_VALUE_BYTES, data, size, {0}};
  return v;
}
static inline rd_value rd_arg_ref(rd_ref ref) {
  rd_value v = {RD_VALUE_REF, NULL, 0, ref};
  return v;
}
/* The reference itself, not its value (Ray's ObjectRef nested in an
 * argument): the task is not held back until it is ready, and gets it with
 * rd_call_arg_ref() to rd_get, rd_wait on or pass on (rd_arg_ref or
 * rd_arg_borrow again) when it wants.  The caller keeps the object while the
 * task is pending; the ref is valid in the task until it returns.  Tasks and
 * actor calls only (not constructors). */
static inline rd_value rd_arg_borrow(rd_ref ref) {
  rd_value v = {RD_VALUE_BORROW, NULL, 0, ref};
  return v;
}
/* n refs as one argument, each borrowed as with rd_arg_borrow (Ray's list
 * of ObjectRefs): a task can be handed any number of them and read those it
 * wants; rd_call_arg_refs() in the task.  The refs are copied at submit. */
static inline rd_value rd_arg_borrow_refs(const rd_ref *refs, size_t n) {
  rd_value v = {RD_VALUE_BORROW_LIST, refs, n, {0}};
  return v;
}
/* RD_ARGS(a, b, c) expands to "array, count". */
#define RD_ARGS(...) (const rd_value[]){__VA_ARGS__}, \
  (sizeof((const rd_value[]){__VA_ARGS__}) / sizeof(rd_value))
#define RD_NO_ARGS NULL, 0

/* Arguments of one task or call, and its num_returns.  Small values travel
 * inside the task message and its reply, up to 16 MiB of them per message;
 * past that they go through the object store. */
#define RD_MAX_ARGS 65536
#define RD_MAX_RETURNS 65536

/* A placement group (see "placement groups" below); id 0 means none. */
typedef struct rd_pg {
  uint64_t id;
} rd_pg;

typedef struct rd_task_opts {
  double num_cpus;        /* default 1 (use rd_task_opts_init); 0 allowed */
  double num_gpus;        /* default 0; fractions below 1 are packed onto one GPU */
  uint64_t memory;        /* bytes of memory budget, default 0 */
  const char *resources;  /* custom resources "name=amount,...", or NULL */
  int num_returns;        /* default 1, at most RD_MAX_RETURNS; or RD_STREAMING */
  int max_retries;        /* re-runs if the worker dies; default 3, -1 = default */
  int priority;           /* larger runs first; default 0 */
  /* Where it runs on a multi-node cluster (ignored on an embedded one):
   * RD_STRATEGY_DEFAULT runs where the task's first store argument kept on
   * another node lives if that node has room, else packs onto the submitting
   * node until it is half busy, then spreads to the least loaded node that
   * fits; RD_STRATEGY_SPREAD round-robins across the nodes
   * that fit; RD_STRATEGY_NODE_AFFINITY runs on node `node` (an index from
   * rd_node_info or `raydist status`), or fails with RD_EINFEASIBLE /
   * RD_ENODE_DIED unless `soft`, which falls back to the default. */
  int strategy;
  uint32_t node;
  int soft;
  /* Run inside a placement group (placement_group.id != 0): granted from
   * its bundle bundle_index (-1, the default: any bundle that can run it,
   * preferring ones on the submitting node); strategy is then ignored.  The
   * task waits while the group is being reserved; in a removed group it
   * fails with RD_EPG_REMOVED. */
  rd_pg placement_group;
  int bundle_index;
  /* RD_STREAMING only: items the task may yield ahead of the caller's
   * rd_stream_next (it waits in rd_yield beyond that); 0: the default, 64;
   * -1: no limit. */
  int stream_window;
  /* Environment variables of the worker process that runs it (Ray's
   * runtime_env={"env_vars": ...}): a NULL-terminated list of "NAME=VALUE"
   * strings, or NULL.  Tasks with a set run only in workers started with
   * exactly that set (on top of the node's environment), so variables
   * read once at process start (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS,
   * MALLOC_CONF, LD_LIBRARY_PATH, ...) take effect; each distinct set has
   * its own pool of workers on each node.  The list is copied at submit.
   * With the driver's rd_config.env (or the task's parent's set), the
   * merge of the two, this list's values first.
   * At most 256 variables and 64 KiB; names [A-Za-z_][A-Za-z0-9_]*, each
   * once, not RAYDIST_* nor CUDA_VISIBLE_DEVICES (the runtime sets those):
   * RD_EINVAL otherwise. */
  const char *const *env;
  /* 1: a run that fails (the function returned non-zero: RD_ETASK) is run
   * again too, on the same max_retries as worker deaths (Ray's
   * retry_exceptions=True); the error of the last run is what rd_get
   * reports.  Not for streaming tasks (RD_EINVAL). */
  int retry_failures;
  /* > 0: a worker process runs this function at most this many times, then
   * exits and a fresh one takes its place (Ray's max_calls), for code that
   * leaks memory or holds what only an exit gives back (a GPU context, a
   * library's global state).  Runs that failed count; tasks pipelined to
   * the worker after its last run go to another worker without using a
   * retry.  0 (default): no limit.  Negative: RD_EINVAL. */
  int max_calls;
  /* Run only on a node whose labels satisfy every term (Ray's
   * label_selector): "key=v", "key=!v", "key=in(a,b)", "key=!in(a,b)",
   * joined by ','; NULL or "": any node.  With any strategy (a hard
   * affinity to a node that does not match is RD_EINFEASIBLE); not with a
   * placement group (give its bundle the selector).  No live node
   * matching: RD_EINFEASIBLE, as for resources no node has.  RD_EINVAL
   * when malformed (docs/scheduler.md#node-labels). */
  const char *label_selector;
  /* Ray's fallback_strategy: selectors to use, in order, when no node
   * matching label_selector can run the task now, separated by ';' (at
   * most 7, e.g. "zone=east; market=on-demand").  A node matching an
   * earlier selector with room is taken first; when none has room, the
   * task waits for the first selector some live node could run.  Needs
   * label_selector; NULL or "": none.  RD_EINVAL when malformed. */
  const char *fallback_label_selectors;
  /* An actor call only: run it in this concurrency group of the actor
   * (rd_actor_opts.concurrency_groups; "default": the default group)
   * instead of its method's.  A group the actor does not have fails the
   * call with RD_EINVAL.  NULL: the method's. */
  const char *concurrency_group;
  /* An actor call only (Ray's max_task_retries of one method or call): how
   * many times this call may run again (re-sent after its actor's process
   * died while it ran, run to rebuild a result lost with a node, or for
   * retry_failures) instead of the actor's rd_actor_opts.max_task_retries:
   * -1 no limit, 0 never, N at most N times.  RD_ACTOR_DEFAULT (what
   * rd_task_opts_init sets): the actor's.  Below -2 RD_EINVAL; so is
   * anything but RD_ACTOR_DEFAULT for a task (its own is max_retries). */
  int max_task_retries;
} rd_task_opts;

/* rd_task_opts.max_task_retries: the actor's own setting. */
#define RD_ACTOR_DEFAULT (-2)

/* num_returns for a streaming task or actor call (Ray's generators with
 * num_returns="streaming"): it calls rd_yield for each item, any number of
 * them, and its caller takes each as it comes with rd_stream_next(), while
 * the task still runs.  The one ref rd_submit fills (the stream's) is ready
 * once the task has ended: rd_get gives the item count (uint64_t, host
 * order), or the task's error.  A retried task (its worker died) runs again
 * from the start and its first items, delivered already, are skipped: the
 * task must yield the same items in the same order each time. */
#define RD_STREAMING (-1)

enum { RD_STRATEGY_DEFAULT = 0, RD_STRATEGY_SPREAD = 1, RD_STRATEGY_NODE_AFFINITY = 2 };

RD_EXTERN void rd_task_opts_init(rd_task_opts *o);

/* Submit fn(args) to run in a worker.  refs_out must have room for
 * opts->num_returns refs (1 when opts is NULL); each holds one reference.
 * Errors (nothing submitted, no ref filled): RD_EINVAL (bad options or
 * arguments), RD_EINFEASIBLE (no node can ever satisfy the request),
 * RD_ESTATE (not initialised). */
RD_EXTERN int rd_submit(const rd_function *fn, const rd_value *args, size_t nargs,
                        const rd_task_opts *opts, rd_ref *refs_out) RD_MUST_CHECK;
/* The same by registered name; RD_ENOFUNC when the name is unknown here. */
RD_EXTERN int rd_submit_by_name(const char *name, const rd_value *args, size_t nargs,
                                const rd_task_opts *opts, rd_ref *refs_out) RD_MUST_CHECK;

/* Cancels the task (or actor call) whose return is ref, as Ray's
 * ray.cancel: rd_get on its returns then fails with RD_ECANCELED at once,
 * and tasks that take them as arguments fail too.  A task still queued or
 * waiting for its arguments never runs.  One already sent to a worker runs
 * to its end and its results are dropped, unless force is set: then its
 * worker process is killed (other tasks queued on that worker go back to the
 * queue without using a retry).  Recursive, as Ray's default: what the task
 * submitted while it ran (tasks and actor calls, and theirs in turn) is
 * cancelled without force once it is cancelled or its worker killed.
 * 0, or RD_ENOENT when no unfinished task of
 * this process returns ref (already done, a put, another process's),
 * RD_EINVAL for force on an actor call (killing the actor is rd_actor_kill),
 * RD_ESTATE before rd_init. */
RD_EXTERN int rd_cancel(rd_ref ref, int force) RD_MUST_CHECK;

/* The next item of a streaming task (stream: the ref its rd_submit or
 * rd_actor_call filled), in the order it yielded them: 0 with *item holding
 * one reference.  Once every item is taken: RD_EEND when the task succeeded,
 * else its error (rd_get on stream has the message), RD_ECANCELED after
 * rd_cancel.  RD_ETIMEDOUT when none came within timeout_ms (-1: no limit);
 * RD_EINVAL when stream is not a live stream ref of this process.
 * Releasing the stream ref drops the items not yet taken (and the ones that
 * come later); the task runs on to its end. */
RD_EXTERN int rd_stream_next(rd_ref stream, rd_ref *item, int64_t timeout_ms) RD_MUST_CHECK;
/* The next item of whichever of n streams has one first (Ray's ray.wait on
 * generators): 0 with *index the stream's place in the array and *item its
 * next item.  The streams are looked at in array order, so rotate it for
 * fairness.  A stream that failed, with no items left, returns its error
 * with *index set (drop it from the array before the next call); RD_EEND
 * once every stream has ended well with every item taken.  Timeouts and
 * RD_EINVAL as rd_stream_next. */
RD_EXTERN int rd_stream_next_any(const rd_ref *streams, size_t n, size_t *index, rd_ref *item,
                                 int64_t timeout_ms) RD_MUST_CHECK;

/* ------------------------------------------------ inside a remote function */

RD_EXTERN size_t rd_call_nargs(const rd_call *call);
/* Zero-copy view of argument i, valid until the function returns.
 * RD_EINVAL when i is out of range or argument i is a borrowed ref. */
RD_EXTERN int rd_arg(rd_call *call, size_t i, rd_buf *out) RD_MUST_CHECK;
/* Copy argument i, which must be exactly size bytes, into dst: the way to
 * read a struct passed with rd_arg_bytes(&s, sizeof(s)).  0, or RD_EINVAL
 * when i is out of range, argument i is a borrowed ref or has another size
 * (the call is not failed: return rd_call_fail(call, ...) then). */
RD_EXTERN int rd_arg_copy(rd_call *call, size_t i, void *dst, size_t size) RD_MUST_CHECK;
/* The ref passed as argument i with rd_arg_borrow(): one reference, dropped
 * with rd_ref_release().  rd_get / rd_wait on it ask the process the call
 * came from (at most one round trip per ref; store objects are then read or
 * pulled like any other).  Valid until the function returns: afterwards its
 * owner may free the object (rd_get then fails with RD_EOBJECT_LOST).
 * RD_EINVAL when i is out of range or not a borrowed ref. */
RD_EXTERN int rd_call_arg_ref(rd_call *call, size_t i, rd_ref *out) RD_MUST_CHECK;
/* The refs passed as argument i with rd_arg_borrow_refs(), or those
 * contained in the object passed by value as argument i (rd_put_refs; none
 * for other values): their number in *n_out, and with out (room for max)
 * the refs themselves, each holding one reference, valid as
 * rd_call_arg_ref's.  out NULL: only the number.  RD_EINVAL when i is out
 * of range or a borrowed ref, or max is short. */
RD_EXTERN int rd_call_arg_refs(rd_call *call, size_t i, rd_ref *out, size_t max, size_t *n_out) RD_MUST_CHECK;
RD_EXTERN size_t rd_call_nreturns(const rd_call *call);
/* Memory for return value i (size bytes) to write the result into; for
 * large results it is in the shared-memory store already.  NULL on error
 * (bad index, store full); call rd_call_fail then. */
RD_EXTERN void *rd_return_alloc(rd_call *call, size_t i, size_t size);
/* Copy `size` bytes as return value i. */
RD_EXTERN int rd_return_bytes(rd_call *call, size_t i, const void *data, size_t size) RD_MUST_CHECK;
/* A streaming call (RD_STREAMING) yields its next item: size bytes, copied
 * (inline when small, into the store when large).  Waits while the caller
 * has stream_window items not yet taken.  0; RD_EINVAL (not a streaming
 * call, NULL data); RD_ESTORE_FULL / RD_E2BIG; RD_ECANCELED when the caller
 * cancelled the task or went away (return then: nothing more reaches it). */
RD_EXTERN int rd_yield(rd_call *call, const void *data, size_t size) RD_MUST_CHECK;
/* rd_yield of an item that also contains n refs (as rd_return_refs for a
 * result): the taker reads them with rd_get_refs.  The refs are those
 * rd_return_refs accepts (made here, lent by the caller, or lent by a third
 * process; the last two waited for until ready).  Errors: those of
 * rd_yield, RD_EINVAL (a ref not live here, a stream or an object that
 * contains refs of another process), or the hand-over's (the item is then
 * not sent). */
RD_EXTERN int rd_yield_refs(rd_call *call, const void *data, size_t size, const rd_ref *refs,
                            size_t n) RD_MUST_CHECK;
/* rd_yield without the copy: memory for the next item, size bytes (in the
 * store already when large, as rd_return_alloc), to write it into; it is
 * sent by rd_yield_commit.  NULL on the same errors as rd_yield (see the
 * log), or when an item is already allocated and not committed.  An item
 * not committed when the call returns is dropped. */
RD_EXTERN void *rd_yield_alloc(rd_call *call, size_t size);
/* Send the item rd_yield_alloc gave; RD_EINVAL when there is none. */
RD_EXTERN int rd_yield_commit(rd_call *call) RD_MUST_CHECK;
/* Return value i as `size` bytes (rd_return_bytes) that contain the n refs
 * (Ray's task returning ObjectRefs): the caller takes them with
 * rd_get_refs on the result.  Any ref this process holds: one it made (a
 * put, a result of a task it submitted), one the caller lent it, or one
 * another process lent it; those not the caller's own are waited for here
 * until ready.  From the reply on the caller holds them as well as their
 * other owners do: each side keeps them as long as it wants, whichever
 * lets go or exits first, so an actor may return an object it keeps to many
 * calls.  RD_EINVAL (with a log line) for a ref not live, not sealed, a
 * stream, or one that itself contains refs (unless the caller's own), or
 * in a streaming task; RD_EEXIST when return i is set; those of
 * rd_return_bytes. */
RD_EXTERN int rd_return_refs(rd_call *call, size_t i, const void *data, size_t size, const rd_ref *refs,
                             size_t n) RD_MUST_CHECK;
/* Record a failure message; returns RD_ETASK so `return rd_call_fail(...)`
 * reads naturally.  The caller's rd_get returns RD_ETASK with this message. */
RD_EXTERN int rd_call_fail(rd_call *call, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* GPUs granted to this task: up to `max` ids and fractions of each (1.0 for
 * a whole GPU).  Returns the count.  CUDA_VISIBLE_DEVICES is set to them. */
RD_EXTERN int rd_call_gpu_ids(const rd_call *call, int *ids, double *fractions, int max);
/* Bytes of GPU memory this call's GPU share entitles it to: the sum over its
 * GPUs of fraction x that GPU's memory (0.25 of an 80 GiB GPU: 20 GiB).
 * 0 without GPUs, or when the node does not know its GPUs' memory.  The
 * same number is in the environment as RAYDIST_GPU_MEMORY_BYTES while the
 * call runs, where the inference engine takes it as its limit
 * (docs/engine.md); user code that allocates GPU memory itself should keep
 * within it. */
RD_EXTERN uint64_t rd_call_gpu_memory(const rd_call *call);
RD_EXTERN const char *rd_call_function_name(const rd_call *call);
/* 0 on the first run, 1.. on retries after a worker died. */
RD_EXTERN int rd_call_attempt(const rd_call *call);
/* The id of this task (or actor call) as `raydist list tasks` and
 * `raydist logs task --id` word it (Ray's get_runtime_context()
 * .get_task_id()), "NNNN-PPPPPPPP-TTTTTTTTTTTTTTTT", into buf of at least
 * RD_TASK_ID_LEN bytes: 0, or RD_EINVAL (buf too small: "" in it). */
#define RD_TASK_ID_LEN 32
RD_EXTERN int rd_call_task_id(const rd_call *call, char *buf, size_t len);
/* 1 once the task's owner cancelled it (rd_cancel without force): a long
 * task polls this and returns early.  Looks for the owner's word at most
 * once a millisecond; 0 otherwise, and for a NULL call. */
RD_EXTERN int rd_call_cancelled(rd_call *call);

/* ----------------------------------------------------------------- actors */

/* An actor is a worker process holding state built by its class's
 * constructor; its methods run there one call at a time, and calls from one
 * caller run in the order they were made.  The handle is a plain value that
 * can be copied, and passed to tasks and other actors (rd_arg_actor). */
typedef struct rd_actor {
  uint64_t id;
} rd_actor;

/* Constructor: read its arguments with rd_arg(), set *state.  Non-zero (use
 * rd_call_fail for a message) means the actor could not start: every call to
 * it then fails with RD_EACTOR_DIED carrying that message. */
typedef int (*rd_actor_init_fn)(rd_call *call, void **state);
/* Destructor, run when the actor is killed gracefully (may be NULL). */
typedef void (*rd_actor_fini_fn)(void *state);
typedef int (*rd_actor_method_fn)(rd_call *call, void *state);

typedef struct rd_actor_class {
  const char *name;
  rd_actor_init_fn init;
  rd_actor_fini_fn fini;
  struct rd_actor_class *next_;
} rd_actor_class;

typedef struct rd_actor_method {
  const char *name;           /* "Class.method" */
  const char *class_name;
  rd_actor_method_fn fn;
  struct rd_actor_method *next_;
  const char *concurrency_group;  /* RD_ACTOR_METHOD_IN's group; NULL: the default one */
} rd_actor_method;

RD_EXTERN void rd_actor_class_register_(rd_actor_class *c);
RD_EXTERN void rd_actor_method_register_(rd_actor_method *m);

/* RD_ACTOR_CLASS(Counter, counter_init, counter_fini) defines the global
 * descriptor `rd_actor_class *const Counter`. */
#define RD_ACTOR_CLASS(cls, init_fn, fini_fn)                                    \
  static rd_actor_class cls##_class_desc_ = {#cls, init_fn, fini_fn, NULL};      \
  rd_actor_class *const cls = &cls##_class_desc_;                                \
  __attribute__((constructor)) static void cls##_class_register_(void) {         \
    rd_actor_class_register_(&cls##_class_desc_);                                \
  }
/* RD_ACTOR_METHOD(Counter, incr) { ... } defines a method whose body sees
 * `rd_call *call` and `void *state`, and the global descriptor
 * `rd_actor_method *const Counter_incr`. */
#define RD_ACTOR_METHOD(cls, method)                                             \
  static int cls##_##method##_impl(rd_call *call, void *state);                 \
  static rd_actor_method cls##_##method##_desc_ = {#cls "." #method, #cls,       \
                                                   cls##_##method##_impl, NULL}; \
  rd_actor_method *const cls##_##method = &cls##_##method##_desc_;               \
  __attribute__((constructor)) static void cls##_##method##_register_(void) {    \
    rd_actor_method_register_(&cls##_##method##_desc_);                          \
  }                                                                              \
  static int cls##_##method##_impl(rd_call *call, void *state)
/* RD_ACTOR_METHOD_IN(Server, health, "io") { ... }: the same, its calls run
 * in the actor's concurrency group "io" (rd_actor_opts.concurrency_groups)
 * unless a call names another (rd_task_opts.concurrency_group). */
#define RD_ACTOR_METHOD_IN(cls, method, group)                                   \
  static int cls##_##method##_impl(rd_call *call, void *state);                 \
  static rd_actor_method cls##_##method##_desc_ = {#cls "." #method, #cls,       \
                                                   cls##_##method##_impl, NULL,  \
                                                   group};                       \
  rd_actor_method *const cls##_##method = &cls##_##method##_desc_;               \
  __attribute__((constructor)) static void cls##_##method##_register_(void) {    \
    rd_actor_method_register_(&cls##_##method##_desc_);                          \
  }                                                                              \
  static int cls##_##method##_impl(rd_call *call, void *state)

RD_EXTERN rd_actor_class *rd_actor_class_lookup(const char *name);
/* Find "Class.method" (NULL when unknown). */
RD_EXTERN rd_actor_method *rd_actor_method_lookup(const char *name);

typedef struct rd_actor_opts {
  double num_cpus;            /* held for the actor's life; default 0 */
  double num_gpus;            /* default 0; fractions are packed onto one GPU */
  uint64_t memory;            /* bytes, default 0 */
  const char *resources;      /* custom resources "name=amount,..." */
  const char *name;           /* register under this name (rd_actor_get); NULL = anonymous */
  int max_restarts;           /* restarts after the process dies; default 0, -1 = unlimited */
  int max_task_retries;       /* re-sends of calls in flight when it died; default 0 */
  int max_concurrency;        /* 1 (default): one call at a time */
  /* Named concurrency groups (Ray's concurrency_groups), "io=2,compute=4":
   * each group has its own threads (that many) and its own queue, so its
   * calls neither wait behind nor hold up the other groups'.  Calls of
   * methods defined with RD_ACTOR_METHOD_IN(cls, m, "io") go to "io",
   * others to the default group (max_concurrency threads), unless the call
   * names one (rd_task_opts.concurrency_group).  Calls are in order within
   * a group; the actor's state is shared between the groups' threads.
   * Names 1..63 bytes of [A-Za-z0-9_-], not "default", each once; 1..256
   * threads; at most 16 groups (RD_EINVAL otherwise).  NULL: none. */
  const char *concurrency_groups;
  int priority;               /* placement priority, as for tasks */
  /* Placement on a multi-node cluster, as for tasks (rd_task_opts): also
   * used for every restart, so a hard affinity to a node that died ends the
   * actor (rd_actor_create fails with RD_ENODE_DIED; a restart's calls with
   * RD_EACTOR_DIED and "node affinity: node 3 is dead", or "cannot be
   * reached" when its link broke just before). */
  int strategy;
  uint32_t node;
  int soft;
  /* Placed in a placement group's bundle, as for tasks; restarts go back to
   * the same bundle (re-reserved elsewhere if its node died).  Removing the
   * group kills the actor for good. */
  rd_pg placement_group;
  int bundle_index;
  /* 1: the actor outlives the process that created it (Ray's
   * lifetime="detached"): it lives on, restarts included, until
   * rd_actor_kill(a, 1), its restarts run out, or the node holding its
   * record stops (in a cluster the head, so it outlives its creator's
   * node too); other drivers find it with rd_actor_get when it has a
   * name.  0 (default): it dies when its creator exits.  An embedded node
   * (rd_init without an address) stops with its first driver, and a group
   * removed with its creator still takes its actors along. */
  int detached;
  /* Environment variables of the actor's process, as rd_task_opts.env
   * (kept for its restarts). */
  const char *const *env;
  /* With a name: if a live actor has it, rd_actor_create gives that one
   * (its class and options are not compared, the constructor arguments go
   * unused) instead of RD_EEXIST, else creates it (Ray's get_if_exists).
   * Several processes may race: each gets the same actor. */
  int get_if_exists;
  /* The actor's namespace, where its name is taken and where its methods'
   * lookups go: NULL (default) the creator's (rd_namespace()); "" the
   * default namespace. */
  const char *namespace_name;
  /* Placed (and placed again at each restart) only on a node whose labels
   * satisfy it, as rd_task_opts.label_selector. */
  const char *label_selector;
  /* Its fallbacks, as rd_task_opts.fallback_label_selectors; every
   * restart tries them again in order. */
  const char *fallback_label_selectors;
  /* Calls a handle may have pending (queued or running, not yet answered)
   * at once, counted per handle in each process (Ray's max_pending_calls):
   * past it rd_actor_call returns RD_EAGAIN and queues nothing, so a
   * caller that calls faster than the actor answers sees it at once.  A
   * handle got with rd_actor_get or rd_call_arg_actor learns it when it
   * first connects to the actor (calls made before that are not refused).
   * 0 (default) or -1: no limit. */
  int max_pending_calls;
} rd_actor_opts;

RD_EXTERN void rd_actor_opts_init(rd_actor_opts *o);

/* Create an actor; returns as soon as the node has accepted it (the
 * constructor runs in the background and calls wait for it).  args are the
 * constructor's arguments (refs are waited for and copied in, since they are
 * kept for restarts).  Errors: RD_EINVAL, RD_EINFEASIBLE, RD_EEXIST (name
 * taken), RD_ENOFUNC (class not registered), RD_ESTATE. */
RD_EXTERN int rd_actor_create(const rd_actor_class *cls, const rd_value *args, size_t nargs,
                              const rd_actor_opts *opts, rd_actor *out) RD_MUST_CHECK;
/* Call a method.  refs_out needs num_returns refs (1 when opts is NULL;
 * only num_returns of opts is used).  A call to a dead actor still returns
 * refs: rd_get on them gives RD_EACTOR_DIED with the reason. */
RD_EXTERN int rd_actor_call(rd_actor actor, const rd_actor_method *method, const rd_value *args,
                            size_t nargs, const rd_task_opts *opts, rd_ref *refs_out) RD_MUST_CHECK;
RD_EXTERN int rd_actor_call_by_name(rd_actor actor, const char *method, const rd_value *args,
                                    size_t nargs, const rd_task_opts *opts, rd_ref *refs_out) RD_MUST_CHECK;
/* Find a named actor in the caller's namespace.  RD_ENOENT when no live
 * actor has that name there. */
RD_EXTERN int rd_actor_get(const char *name, rd_actor *out) RD_MUST_CHECK;
/* The same in namespace ns ("": the default one). */
RD_EXTERN int rd_actor_get_in(const char *ns, const char *name, rd_actor *out) RD_MUST_CHECK;
/* The live named actors (Ray's ray.util.list_named_actors): those of the
 * caller's namespace, or of every namespace with all_namespaces; on a
 * cluster every node's (from the GCS).  *out: *n_out {namespace, name}
 * pairs ("" is the default namespace), sorted, in one block to free with
 * rd_actor_names_free (NULL when none).  Errors: RD_EINVAL, RD_ESTATE,
 * RD_ENOMEM, or the GCS's (RD_ECONN). */
typedef struct rd_actor_name {
  const char *ns;
  const char *name;
} rd_actor_name;
RD_EXTERN int rd_actor_list_named(int all_namespaces, rd_actor_name **out, size_t *n_out) RD_MUST_CHECK;
RD_EXTERN void rd_actor_names_free(rd_actor_name *names);
/* The caller's namespace: the driver's (rd_config.namespace_name), or in a
 * task or actor method the one of the driver whose work it is; "" for the
 * default namespace.  Valid until rd_shutdown. */
RD_EXTERN const char *rd_namespace(void);
/* Kill the actor's process.  With no_restart (or no restarts left) it is dead
 * for good; otherwise it restarts like after a crash. */
RD_EXTERN int rd_actor_kill(rd_actor actor, int no_restart) RD_MUST_CHECK;
/* Pass a handle as a task or method argument, and read it back inside. */
static inline rd_value rd_arg_actor(const rd_actor *a) {
  rd_value v = {RD_VALUE_BYTES, a, sizeof(*a), {0}};
  return v;
}
RD_EXTERN int rd_call_arg_actor(rd_call *call, size_t i, rd_actor *out) RD_MUST_CHECK;
/* Inside a method or constructor: which actor this is, and how many times
 * it has been restarted. */
RD_EXTERN rd_actor rd_call_actor(const rd_call *call);
RD_EXTERN int rd_call_actor_restarts(const rd_call *call);
/* Inside an actor method (Ray's ray.actor.exit_actor()): end the actor once
 * this call returns.  Its reply goes out, no other call starts, the
 * destructor runs and the process exits; the actor is dead for good,
 * whatever max_restarts says.  Calls queued behind it and later ones fail
 * with RD_EACTOR_DIED, "actor C exited (rd_actor_exit)".  0, or RD_EINVAL
 * outside an actor method. */
RD_EXTERN int rd_actor_exit(rd_call *call);

#include "raydist/pool.h"
#include "raydist/collective.h"

/* ------------------------------------------------------- placement groups */

/* A placement group reserves bundles of resources across the cluster's
 * nodes atomically (all bundles or none), so that tasks and actors
 * scheduled into it later find their resources waiting, where the strategy
 * put them:
 *   RD_PG_PACK          as few nodes as possible (one if it fits);
 *   RD_PG_SPREAD        as many nodes as possible;
 *   RD_PG_STRICT_PACK   all bundles on one node, or wait;
 *   RD_PG_STRICT_SPREAD every bundle on a different node, or wait.
 * A group lives until rd_pg_remove or until the driver that created it
 * exits (one created by a task: until that run of its job ends, wherever
 * the task ran), or, detached (rd_pg_opts), until rd_pg_remove alone; a
 * bundle whose node dies is reserved again elsewhere. */
enum { RD_PG_PACK = 0, RD_PG_SPREAD = 1, RD_PG_STRICT_PACK = 2, RD_PG_STRICT_SPREAD = 3 };
#define RD_PG_MAX_BUNDLES 4096
#define RD_PG_INFO_NODES 64   /* bundle nodes rd_pg_info carries (rd_pg_bundle_nodes: all) */

typedef struct rd_bundle {
  double num_cpus, num_gpus;  /* as in rd_task_opts (default 0 here) */
  uint64_t memory;            /* bytes */
  const char *resources;      /* custom "name=amount,..." or NULL */
  /* Reserved only on a node whose labels satisfy it (Ray's
   * bundle_label_selector), as rd_task_opts.label_selector; NULL: any. */
  const char *label_selector;
  /* Ray's placement-group fallback_strategy: this bundle's selectors to
   * use, in order, when the group cannot be reserved now with its
   * label_selectors, separated by ';' (at most 7).  The group is reserved
   * by its first alternative that fits now: every bundle's label_selector,
   * else every bundle's first fallback (a bundle with fewer fallbacks
   * keeps its last selector, one with none its label_selector), and so
   * on; it waits when none fits now and is RD_EINFEASIBLE only when none
   * ever could.  Needs label_selector; NULL or "": none.
   * docs/scheduler.md#fallback-selectors. */
  const char *fallback_label_selectors;
} rd_bundle;

enum { RD_PG_STATE_PENDING = 1, RD_PG_STATE_CREATED = 2, RD_PG_STATE_RESCHEDULING = 3, RD_PG_STATE_REMOVED = 4 };
typedef struct rd_pg_info {
  int state;                  /* RD_PG_STATE_* */
  int strategy;
  size_t num_bundles;         /* all of them */
  /* node index of each of the first RD_PG_INFO_NODES bundles (0: not
   * reserved now, or embedded); rd_pg_bundle_nodes gives every bundle's */
  uint32_t bundle_nodes[RD_PG_INFO_NODES];
} rd_pg_info;

/* Create a group of n (1..RD_PG_MAX_BUNDLES) bundles; returns once it is
 * recorded, while the bundles are reserved in the background (rd_pg_wait).
 * name: NULL, or unique in the cluster among groups not removed.  Errors:
 * RD_EINVAL (bad bundle or strategy), RD_EINFEASIBLE (no node, or no set of
 * nodes the strategy allows, could ever hold the bundles), RD_EEXIST. */
RD_EXTERN int rd_pg_create(const rd_bundle *bundles, size_t n, int strategy, const char *name,
                           rd_pg *out) RD_MUST_CHECK;
/* rd_pg_create with options (rd_pg_opts_init first). */
typedef struct rd_pg_opts {
  int strategy;               /* RD_PG_*, default RD_PG_PACK */
  const char *name;           /* NULL or "": anonymous */
  /* 1: the group outlives the driver or job that created it, until
   * rd_pg_remove from any driver of the cluster (Ray's lifetime="detached");
   * in a cluster it is recorded on the head, so it outlives its creator's
   * node and goes only when the head does. */
  int detached;
} rd_pg_opts;
RD_EXTERN void rd_pg_opts_init(rd_pg_opts *o);
RD_EXTERN int rd_pg_create_with(const rd_bundle *bundles, size_t n, const rd_pg_opts *o, rd_pg *out) RD_MUST_CHECK;
/* Wait until every bundle is reserved: 0, RD_ETIMEDOUT, RD_EPG_REMOVED,
 * RD_ENOENT (no such group). */
RD_EXTERN int rd_pg_wait(rd_pg pg, int64_t timeout_ms) RD_MUST_CHECK;
/* The group's state and where its bundles are, without waiting. */
RD_EXTERN int rd_pg_info_get(rd_pg pg, rd_pg_info *out) RD_MUST_CHECK;
/* Where every bundle is, without waiting (Ray's bundles_to_node_id):
 * nodes[i] for the first min(cap, *n) bundles, as in rd_pg_info, and *n
 * the group's bundle count.  Errors as rd_pg_info_get. */
RD_EXTERN int rd_pg_bundle_nodes(rd_pg pg, uint32_t *nodes, size_t cap, size_t *n) RD_MUST_CHECK;
/* Find a named group (RD_ENOENT). */
RD_EXTERN int rd_pg_get(const char *name, rd_pg *out) RD_MUST_CHECK;
/* Give its bundles back: tasks and actors running in it are killed, ones
 * waiting for it fail with RD_EPG_REMOVED.  RD_ENOENT when unknown. */
RD_EXTERN int rd_pg_remove(rd_pg pg) RD_MUST_CHECK;

/* Ask the cluster's autoscaler for room (Ray's
 * ray.autoscaler.sdk.request_resources): it keeps enough nodes to hold
 * these n bundles at once (packed onto the nodes' total resources, however
 * busy), starting nodes for what does not fit, within each node type's
 * max_workers and without waiting for demand, until the next call
 * replaces the request; n 0 withdraws it.  The request is the cluster's,
 * not the caller's: it outlives this process.  At most RD_REQUEST_MAX
 * bundles, each as rd_pg_create's (resources only: a label_selector is
 * RD_EINVAL).  On a cluster without an autoscaler, or an embedded one,
 * nothing reads it.  docs/autoscaler.md#requesting-room. */
#define RD_REQUEST_MAX 1000
RD_EXTERN int rd_request_resources(const rd_bundle *bundles, size_t n) RD_MUST_CHECK;

/* ----------------------------------------------------------------- status */

typedef struct rd_node_info {
  double num_cpus, num_gpus;
  double avail_cpus, avail_gpus;
  uint64_t store_capacity, store_used;
  uint64_t store_spilled_bytes, store_spill_count, store_restore_count;
  int num_workers, num_idle_workers;
  uint64_t tasks_leased;            /* leases granted since start */
  uint32_t node_index;              /* this node in the cluster; 0 on an embedded cluster */
  int cluster_nodes;                /* live nodes in the cluster (1 when embedded) */
  uint64_t memory_kills;            /* workers the memory monitor killed since the node started */
  /* the store's fallback region (rd_config.object_store_fallback_bytes):
   * its limit, the bytes of objects there now, allocations there since
   * the node started */
  uint64_t store_fallback_limit, store_fallback_used, store_fallback_count;
} rd_node_info;

/* A snapshot of the local node (round trip to the node daemon). */
RD_EXTERN int rd_node_info_get(rd_node_info *out) RD_MUST_CHECK;

/* One node of the cluster (Ray's ray.nodes()).  The caller's own node is
 * described as it is now; the others as of their last heartbeat, at most
 * about a second old. */
#define RD_NODE_MAX_CUSTOM 8
#define RD_NODE_LABELS_LEN 512   /* a node's labels, NUL included */
typedef struct rd_node_resource {
  char name[32];
  double total, avail;
} rd_node_resource;
typedef struct rd_node_desc {
  uint32_t index;                   /* for RD_STRATEGY_NODE_AFFINITY; 0 on an embedded cluster */
  int alive;                        /* 0: dead, death_reason says why (the GCS keeps dead nodes) */
  int is_head;
  int is_self;                      /* the node the caller is connected to */
  char ip[64];                      /* "" on an embedded cluster */
  char hostname[64];
  double num_cpus, avail_cpus;
  double num_gpus, avail_gpus;
  uint64_t memory, avail_memory;    /* the "memory" resource, bytes (0: not accounted) */
  uint64_t store_capacity, store_used;
  int64_t pending_leases;           /* lease requests queued on it */
  uint64_t ms_since_heartbeat;      /* 0 for the caller's node */
  char death_reason[128];
  int num_custom;                   /* custom resources (--resources), at most RD_NODE_MAX_CUSTOM */
  rd_node_resource custom[RD_NODE_MAX_CUSTOM];
  char labels[RD_NODE_LABELS_LEN];  /* "key=value,..." sorted by key ("" when none) */
} rd_node_desc;
/* Every node of the cluster, alive and dead, in the order the GCS admitted
 * them (an embedded cluster has one).  Sets *n_out to how many; with `out`
 * (room for max) fills it.  RD_EINVAL when n_out is NULL or max is too
 * small (nothing is filled; *n_out says how many are needed), RD_ESTATE
 * before rd_init, and the errors of rd_node_info_get (RD_ENODE_DIED when the
 * node daemon is gone, RD_ETIMEDOUT). */
RD_EXTERN int rd_nodes(rd_node_desc *out, size_t max, size_t *n_out) RD_MUST_CHECK;
/* Ray's ray.cluster_resources()[name] and ray.available_resources()[name]:
 * the sum over the alive nodes of resource `name` ("CPU", "GPU", "memory"
 * in bytes, or a custom resource), total and free now (either pointer may
 * be NULL).  RD_ENOENT, with both 0, when no alive node has it; RD_EINVAL
 * for a NULL, empty or over-long name. */
RD_EXTERN int rd_cluster_resources(const char *name, double *total, double *avail) RD_MUST_CHECK;
/* The session directory of the embedded cluster ("" when none). */
RD_EXTERN const char *rd_session_dir(void);

/* ---------------------------------------------------- key-value store
 *
 * A small key-value store shared by every process of the cluster (Ray's
 * internal_kv): drivers, tasks and actors on any node see the same keys.
 * On a multi-node cluster it lives in the GCS (and so survives a GCS
 * restart when the GCS has a file store), on an embedded cluster in the
 * node daemon (gone at rd_shutdown).  For configuration, rendezvous and
 * small results between jobs, not for bulk data (use objects).  Keys are
 * 1..RD_KV_MAX_KEY bytes without NUL; values up to RD_KV_MAX_VALUE bytes.
 * Errors: RD_EINVAL (bad key or size), RD_ESTATE (not initialised), the
 * GCS's (RD_ETIMEDOUT, RD_ECONN) on a cluster. */
#define RD_KV_MAX_KEY 512
#define RD_KV_MAX_VALUE (1u << 20)
/* Store value under key; with overwrite 0, RD_EEXIST if the key exists. */
RD_EXTERN int rd_kv_put(const char *key, const void *value, size_t size, int overwrite) RD_MUST_CHECK;
/* The value of key in *value (malloc'ed, free() it; not NUL-terminated)
 * and *size: 0, or RD_ENOENT. */
RD_EXTERN int rd_kv_get(const char *key, void **value, size_t *size) RD_MUST_CHECK;
/* Remove key: 0, or RD_ENOENT. */
RD_EXTERN int rd_kv_del(const char *key) RD_MUST_CHECK;
/* The keys that start with prefix ("" or NULL: all), sorted: *keys is one
 * malloc'ed block (free() it once) of *n NUL-terminated strings followed
 * by a NULL pointer.  RD_E2BIG when they would not fit one reply (4 MiB of
 * keys): ask with longer prefixes. */
RD_EXTERN int rd_kv_keys(const char *prefix, char ***keys, size_t *n) RD_MUST_CHECK;

/* ----------------------------------------------------- application metrics
 *
 * Counters, gauges and histograms a program defines and updates from its
 * driver, tasks and actors (Ray's ray.util.metrics): each process sends
 * what changed to its node with its next report (every 100 ms while
 * something changed), and the node adds them up and serves them on its
 * Prometheus endpoint (/metrics) beside its own families.  A counter's
 * series is summed over every process that added to it (and keeps its
 * total after they exit), a gauge's is the sum of the last value each live
 * process set (so replicas' queue depths add up; a process's part goes when
 * it exits, the series with the last part), a histogram's buckets are
 * summed.
 *
 * Names follow Prometheus ([a-zA-Z_:][a-zA-Z0-9_:]*, at most 100 bytes)
 * and must not start with "raydist_" (the node's own).  Tags are
 * "key=value,key2=value2" (NULL or "": none): at most 8, keys as names
 * (not "le", not starting "__"), values of at most 64 bytes without ',',
 * '=' or control characters; their order does not matter.  A process
 * defines at most 256 metrics, each with at most 1000 tag sets.
 * Defining a name again in the same process gives the same metric when
 * the kind (and a histogram's bounds) match, else RD_EEXIST; processes
 * that disagree are refused by the node (logged and counted in
 * raydist_app_metric_rejected_total).  Errors: RD_EINVAL (bad name, tags,
 * value or bounds, or the wrong call for the kind, with the reason in the
 * log), RD_ENOMEM (past the limits), RD_ESTATE (not initialised).
 * Updates are thread-safe. */
typedef struct rd_metric rd_metric;
/* A counter: only ever goes up (rd_metric_inc). */
RD_EXTERN int rd_metric_counter(const char *name, const char *help, rd_metric **out) RD_MUST_CHECK;
/* A gauge: a value set now and then (rd_metric_set). */
RD_EXTERN int rd_metric_gauge(const char *name, const char *help, rd_metric **out) RD_MUST_CHECK;
/* A histogram with these bucket upper bounds (1..32, strictly ascending,
 * finite; +Inf is added): rd_metric_observe. */
RD_EXTERN int rd_metric_histogram(const char *name, const char *help, const double *bounds, size_t nbounds,
                                  rd_metric **out) RD_MUST_CHECK;
/* The updates may be called without looking at what they return (figures
 * are best-effort: a refused update is logged and changes nothing). */
/* Adds v (finite, >= 0) to a counter's series for tags. */
RD_EXTERN int rd_metric_inc(rd_metric *m, double v, const char *tags);
/* Sets a gauge's series for tags to v (finite). */
RD_EXTERN int rd_metric_set(rd_metric *m, double v, const char *tags);
/* Counts v (finite) in a histogram's series for tags. */
RD_EXTERN int rd_metric_observe(rd_metric *m, double v, const char *tags);

#ifdef __cplusplus
}
#endif
#endif /* RAYDIST_H */
