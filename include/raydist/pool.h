/* raydist/pool.h - elastic pools of identical actors (included by raydist.h).
 *
 * A pool keeps between min_replicas and max_replicas actors of one class,
 * routes each call to the least-loaded replica, bounds the calls in flight per
 * replica (a submit waits when every replica is full: backpressure), adds a
 * replica when callers keep waiting, and removes replicas that stay idle.
 * It is the engine of the batch-inference and serving drivers.  A pool
 * belongs to the thread that created it; it is not thread-safe. */
#ifndef RAYDIST_POOL_H
#define RAYDIST_POOL_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rd_pool rd_pool;

typedef struct rd_pool_opts {
  int min_replicas;              /* default 1 */
  int max_replicas;              /* default: min_replicas */
  int max_inflight_per_replica;  /* backpressure bound, default 2 */
  int scale_up_wait_ms;          /* a submit that waited this long for room adds a replica; default 100 */
  int scale_down_idle_ms;        /* a replica idle this long is removed (down to min); default 5000 */
} rd_pool_opts;

typedef struct rd_pool_stats {
  int replicas;                  /* live replicas now */
  int inflight;                  /* calls sent and not finished */
  uint64_t submitted, completed;
  int scale_ups, scale_downs;    /* since creation */
  int replaced;                  /* replicas found dead and replaced */
} rd_pool_stats;

RD_EXTERN void rd_pool_opts_init(rd_pool_opts *o);

/* Create min_replicas actors of cls with the given constructor arguments and
 * actor options (opts->name must be NULL: replicas are anonymous).
 * *out is released with rd_pool_destroy().  Errors as rd_actor_create, and
 * RD_EINVAL for bad pool options. */
RD_EXTERN int rd_pool_create(const rd_actor_class *cls, const rd_value *args, size_t nargs,
                             const rd_actor_opts *actor_opts, const rd_pool_opts *opts,
                             rd_pool **out) RD_MUST_CHECK;

/* Call `method` on the least-loaded replica with room, waiting (up to
 * timeout_ms, RD_TIMEOUT_INF for ever) while every replica is full; *out is
 * the call's single result, owned by the caller.  RD_ETIMEDOUT when no room
 * came in time. */
RD_EXTERN int rd_pool_submit(rd_pool *p, const rd_actor_method *method, const rd_value *args,
                             size_t nargs, int64_t timeout_ms, rd_ref *out) RD_MUST_CHECK;

/* rd_pool_submit for a streaming method (one that calls rd_yield): *out is
 * the call's stream ref (as rd_actor_call with num_returns = RD_STREAMING),
 * whose items the caller takes with rd_stream_next while the replica yields
 * them; stream_window as rd_task_opts.stream_window (0: the default, 64;
 * -1: no limit).  The call counts as in flight on its replica until the
 * method returns.  Releasing the stream ref early drops the items not taken
 * and lets the method run to its end, which frees the replica: the pool
 * does not hold a stream open.  RD_EINVAL for stream_window below -1;
 * otherwise as rd_pool_submit. */
RD_EXTERN int rd_pool_submit_stream(rd_pool *p, const rd_actor_method *method, const rd_value *args,
                                    size_t nargs, int stream_window, int64_t timeout_ms,
                                    rd_ref *out) RD_MUST_CHECK;

/* Result callback of rd_pool_map: index of the input, its result (or error
 * in result->error).  The buffer is released after the callback returns.
 * A non-zero return stops the map (rd_pool_map then returns it). */
typedef int (*rd_pool_result_fn)(void *ctx, size_t index, const rd_buf *result);

/* Apply `method` to each input (one argument each) with at most
 * replicas * max_inflight_per_replica calls in flight, calling `fn` for each
 * result: in input order when `ordered`, as they finish otherwise.  Returns 0
 * when every call was made and reported (failed calls are reported through
 * result->error, not as a map failure). */
RD_EXTERN int rd_pool_map(rd_pool *p, const rd_actor_method *method, const rd_value *inputs,
                          size_t n, int ordered, rd_pool_result_fn fn, void *ctx) RD_MUST_CHECK;

/* Set the number of replicas by hand (clamped to [1, max_replicas] after
 * raising max_replicas if needed); removed replicas finish their calls first. */
RD_EXTERN int rd_pool_resize(rd_pool *p, int replicas) RD_MUST_CHECK;
RD_EXTERN void rd_pool_get_stats(rd_pool *p, rd_pool_stats *out);
/* Wait for calls in flight, kill every replica, free the pool. */
RD_EXTERN void rd_pool_destroy(rd_pool *p);

#ifdef __cplusplus
}
#endif
#endif /* RAYDIST_POOL_H */
