/* src/pool.c - elastic pools of identical actors (include/raydist/pool.h).
 *
 * A pool is bookkeeping over the public actor API: it creates, calls and
 * kills actors with rd_actor_*, and keeps a watch (src/watch.h) on every
 * call in flight, which it looks at with rd_wait/rd_get.  A watch, not a
 * reference: a stream the caller drops must not be held open by the pool.
 * It must never reach further into client.c's internals, start threads, or
 * retry a caller's call: every decision (reap, route, scale, replace)
 * happens inside a pool call. */
#include "raydist.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "watch.h"

/* One actor of the pool.  `refs` holds the calls sent to it and not yet seen
 * finished (at most max_inflight_per_replica), each with the pool's watch.
 * A retiring replica takes no new calls and is killed once its calls have
 * finished (shrinking, or replaced after it died). */
typedef struct pool_replica {
  rd_actor actor;
  rd_ref *refs;
  int ninflight;
  int retiring;
  uint64_t idle_since_ms;   /* when the pool last saw it become idle */
  uint64_t last_pick;       /* pick sequence of its latest call: ties go to the oldest */
} pool_replica;

struct rd_pool {
  const rd_actor_class *cls;
  rd_value *args;           /* constructor arguments, copied to bytes */
  size_t nargs;
  rd_actor_opts aopts;      /* its strings and env list point at our own copies (pool_copy_aopts) */
  rd_pool_opts opts;        /* validated; max_replicas resolved */
  pool_replica *reps;       /* active and retiring replicas */
  int nreps, capreps;
  int nactive;              /* of which not retiring */
  rd_ref *scratch;          /* all refs in flight, for one rd_wait */
  uint8_t *ready;
  size_t capscratch;
  uint64_t pick_seq;
  uint64_t saturated_since; /* every submit since then found the pool full (0: not saturated) */
  uint64_t add_retry_ms;    /* after a failed rd_actor_create, no new try before this */
  int add_err;              /* the code of that failure */
  int closing;              /* in rd_pool_destroy: replace nothing */
  rd_pool_stats st;
};

static uint64_t pool_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void rd_pool_opts_init(rd_pool_opts *o) {
  if (!o) return;
  memset(o, 0, sizeof(*o));
  o->min_replicas = 1;
  o->max_replicas = 0;   /* 0: the same as min_replicas */
  o->max_inflight_per_replica = 2;
  o->scale_up_wait_ms = 100;
  o->scale_down_idle_ms = 5000;
}

/* ------------------------------------------------------------ replicas */

/* Start one more replica (active).  Nothing changes on error. */
static int pool_add_replica(rd_pool *p) {
  if (p->nreps == p->capreps) {
    int cap = p->capreps ? p->capreps * 2 : 4;
    pool_replica *n = realloc(p->reps, (size_t)cap * sizeof(*n));
    if (!n) return RD_ENOMEM;
    p->reps = n;
    p->capreps = cap;
  }
  rd_ref *refs = malloc((size_t)p->opts.max_inflight_per_replica * sizeof(*refs));
  if (!refs) return RD_ENOMEM;
  rd_actor a;
  int r = rd_actor_create(p->cls, p->args, p->nargs, &p->aopts, &a);
  if (r != 0) {
    free(refs);
    return r;
  }
  pool_replica *rep = &p->reps[p->nreps++];
  memset(rep, 0, sizeof(*rep));
  rep->actor = a;
  rep->refs = refs;
  rep->idle_since_ms = pool_now_ms();
  p->nactive++;
  return 0;
}

/* Add a replica for growth or replacement; after a failure, wait
 * scale_up_wait_ms (at least 100 ms) before trying again. */
static int pool_try_add(rd_pool *p, const char *why) {
  uint64_t now = pool_now_ms();
  if (now < p->add_retry_ms) return RD_EAGAIN;
  int r = pool_add_replica(p);
  if (r != 0) {
    int backoff = p->opts.scale_up_wait_ms > 100 ? p->opts.scale_up_wait_ms : 100;
    p->add_retry_ms = now + (uint64_t)backoff;
    p->add_err = r;
    rd__log(RD_LOG_WARN, "rd_pool (%s): cannot add a replica (%s): %s", p->cls->name, why, rd_err_name(r));
  }
  return r;
}

/* Kill replica i (its calls must have finished) and forget it. */
static void pool_remove_replica(rd_pool *p, int i) {
  pool_replica *rep = &p->reps[i];
  int r = rd_actor_kill(rep->actor, 1);
  if (r != 0 && r != RD_EINVAL && r != RD_ESTATE)   /* gone already, or after rd_shutdown */
    rd__log(RD_LOG_WARN, "rd_pool (%s): killing replica actor %016llx: %s", p->cls->name,
            (unsigned long long)rep->actor.id, rd_err_name(r));
  for (int k = 0; k < rep->ninflight; k++) rd__watch_drop(rep->refs[k]);
  free(rep->refs);
  if (!rep->retiring) p->nactive--;
  p->reps[i] = p->reps[--p->nreps];
}

static void pool_retire(rd_pool *p, int i) {
  if (p->reps[i].retiring) return;
  p->reps[i].retiring = 1;
  p->nactive--;
}

/* ------------------------------------------------------------ watching */

/* Gather every ref in flight into p->scratch; the count, or RD_ENOMEM. */
static int pool_gather(rd_pool *p) {
  size_t n = 0;
  for (int i = 0; i < p->nreps; i++) n += (size_t)p->reps[i].ninflight;
  if (n > p->capscratch) {
    size_t cap = n * 2;
    rd_ref *s = malloc(cap * sizeof(*s));
    uint8_t *rd = malloc(cap);
    if (!s || !rd) {
      free(s);
      free(rd);
      return RD_ENOMEM;
    }
    free(p->scratch);
    free(p->ready);
    p->scratch = s;
    p->ready = rd;
    p->capscratch = cap;
  }
  n = 0;
  for (int i = 0; i < p->nreps; i++)
    for (int k = 0; k < p->reps[i].ninflight; k++) p->scratch[n++] = p->reps[i].refs[k];
  return (int)n;
}

/* Drop the calls that have finished (as far as the runtime has read
 * replies), replace replicas whose calls report RD_EACTOR_DIED, and kill
 * retiring replicas that have drained.  Does not wait. */
static void pool_reap(rd_pool *p) {
  int n = pool_gather(p);
  if (n < 0) return;
  if (n > 0 && rd_wait(p->scratch, (size_t)n, 0, 0, p->ready) < 0)
    return;   /* not initialised any more, or a ref is not ours: nothing to learn */
  uint64_t now = pool_now_ms();
  int died = 0;
  size_t off = 0;
  for (int i = 0; i < p->nreps; i++) {
    pool_replica *rep = &p->reps[i];
    int keep = 0, had = rep->ninflight;
    for (int k = 0; k < had; k++) {
      if (!p->ready[off + (size_t)k]) {
        rep->refs[keep++] = rep->refs[k];
        continue;
      }
      rd_buf b;
      memset(&b, 0, sizeof(b));
      int r = rd_get(&rep->refs[k], 1, &b, 0);
      if (r != RD_ETIMEDOUT) rd_buf_release(&b);
      if (r == RD_EACTOR_DIED && !rep->retiring) {
        rd__log(RD_LOG_WARN, "rd_pool (%s): replica actor %016llx died; replacing it", p->cls->name,
                (unsigned long long)rep->actor.id);
        pool_retire(p, i);
        died++;
      }
      rd__watch_drop(rep->refs[k]);
      p->st.completed++;
    }
    off += (size_t)had;
    rep->ninflight = keep;
    if (had > 0 && keep == 0) rep->idle_since_ms = now;
  }
  for (int i = 0; i < p->nreps;) {
    if (p->reps[i].retiring && p->reps[i].ninflight == 0) pool_remove_replica(p, i);
    else i++;
  }
  for (; died > 0 && !p->closing; died--)
    if (pool_try_add(p, "replacing a dead one") == 0) p->st.replaced++;
}

/* Remove replicas idle for scale_down_idle_ms, longest idle first, while
 * more than min_replicas are active. */
static void pool_scale_down(rd_pool *p) {
  uint64_t now = pool_now_ms();
  while (p->nactive > p->opts.min_replicas) {
    int best = -1;
    for (int i = 0; i < p->nreps; i++) {
      pool_replica *rep = &p->reps[i];
      if (rep->retiring || rep->ninflight > 0) continue;
      if (now - rep->idle_since_ms < (uint64_t)p->opts.scale_down_idle_ms) continue;
      if (best < 0 || rep->idle_since_ms < p->reps[best].idle_since_ms) best = i;
    }
    if (best < 0) break;
    pool_remove_replica(p, best);
    p->st.scale_downs++;
  }
}

/* One round of upkeep, done at the start of every pool call. */
static void pool_tend(rd_pool *p) {
  pool_reap(p);
  pool_scale_down(p);
  while (p->nactive < p->opts.min_replicas && pool_try_add(p, "below min_replicas") == 0) {
  }
}

/* Wait up to timeout_ms (<0: for ever) until one more call in flight
 * finishes.  Call right after pool_reap, so every ref gathered is
 * unfinished and "one ready" means "one new". */
static int pool_wait_any(rd_pool *p, int64_t timeout_ms) {
  int n = pool_gather(p);
  if (n <= 0) return n;
  int r = rd_wait(p->scratch, (size_t)n, 1, timeout_ms, NULL);
  return r < 0 ? r : 0;
}

/* The active replica with room and the fewest calls in flight; ties to the
 * one that got a call most recently, so light load stays on few replicas and
 * the others can go idle and be removed.  -1 when every replica is full. */
static int pool_pick(const rd_pool *p) {
  int best = -1;
  for (int i = 0; i < p->nreps; i++) {
    const pool_replica *rep = &p->reps[i];
    if (rep->retiring || rep->ninflight >= p->opts.max_inflight_per_replica) continue;
    if (best < 0 || rep->ninflight < p->reps[best].ninflight ||
        (rep->ninflight == p->reps[best].ninflight && rep->last_pick > p->reps[best].last_pick))
      best = i;
  }
  return best;
}

/* When a caller that has waited for room since `since` may add a replica:
 * scale_up_wait_ms after the pool became saturated (every submit since found
 * it full), so calls shorter than the wait still make it grow. */
static uint64_t pool_grow_at(const rd_pool *p, uint64_t since) {
  if (p->saturated_since && p->saturated_since < since) since = p->saturated_since;
  uint64_t at = since + (uint64_t)p->opts.scale_up_wait_ms;
  return at > p->add_retry_ms ? at : p->add_retry_ms;
}

/* A replica to send the next call to.  `since` is when the caller started
 * waiting for room (for scale_up_wait_ms).  With `block` it waits until
 * deadline_ms (0: for ever) and returns RD_ETIMEDOUT; without, it returns
 * RD_EAGAIN at once when there is no room. */
static int pool_acquire(rd_pool *p, uint64_t since, uint64_t deadline_ms, int block, int *out) {
  for (int first = 1;; first = 0) {
    pool_tend(p);
    int i = pool_pick(p);
    if (i >= 0) {
      if (first) p->saturated_since = 0;   /* room at once: not saturated */
      *out = i;
      return 0;
    }
    uint64_t now = pool_now_ms();
    if (!p->saturated_since) p->saturated_since = now;
    int can_grow = p->nactive < p->opts.max_replicas;
    uint64_t grow_at = pool_grow_at(p, since);
    if (can_grow && now >= grow_at) {
      if (pool_try_add(p, "scaling up") == 0) {
        p->st.scale_ups++;
        p->saturated_since = 0;
        *out = p->nreps - 1;
        return 0;
      }
      continue;   /* pool_try_add set add_retry_ms: grow_at moves on */
    }
    if (p->nactive == 0 && pool_gather(p) == 0)   /* no replica, and none coming: say why */
      return p->add_err ? p->add_err : RD_ENOMEM;
    if (!block) return RD_EAGAIN;
    if (deadline_ms && now >= deadline_ms) return RD_ETIMEDOUT;
    int64_t wait = -1;
    if (deadline_ms) wait = (int64_t)(deadline_ms - now);
    if (can_grow && (wait < 0 || (int64_t)(grow_at - now) < wait)) wait = (int64_t)(grow_at - now);
    int r = pool_wait_any(p, wait);
    if (r < 0) return r;
  }
}

/* Send the call to replica i (topts: NULL, or a streaming call's options);
 * the pool watches it until it ends. */
static int pool_send(rd_pool *p, int i, const rd_actor_method *method, const rd_value *args, size_t nargs,
                     const rd_task_opts *topts, rd_ref *out) {
  pool_replica *rep = &p->reps[i];
  int r = rd_actor_call(rep->actor, method, args, nargs, topts, out);
  if (r != 0) return r;
  r = rd__watch_add(*out);
  if (r != 0) {   /* cannot happen: the ref was just made, and is the caller's */
    rd_ref_release(*out);
    return r;
  }
  rep->refs[rep->ninflight++] = *out;
  rep->last_pick = ++p->pick_seq;
  p->st.submitted++;
  return 0;
}

/* Wait until no call of the pool is in flight (or the runtime is gone). */
static void pool_drain(rd_pool *p) {
  for (;;) {
    pool_reap(p);
    int inflight = 0;
    for (int i = 0; i < p->nreps; i++) inflight += p->reps[i].ninflight;
    if (inflight == 0 || pool_wait_any(p, RD_TIMEOUT_INF) < 0) return;
  }
}

/* --------------------------------------------------------------- API */

/* The pool's own copies of what p->aopts points at, so that replicas added
 * later do not read the caller's memory: 0 or RD_ENOMEM (what was copied is
 * freed by pool_free; a copy that failed is NULL, the env list ends early). */
static int pool_copy_aopts(rd_pool *p) {
  const char **s[] = {&p->aopts.resources, &p->aopts.label_selector, &p->aopts.fallback_label_selectors,
                      &p->aopts.concurrency_groups, &p->aopts.namespace_name};
  int r = 0;
  for (size_t i = 0; i < sizeof(s) / sizeof(*s); i++)
    if (*s[i] && !(*s[i] = strdup(*s[i]))) r = RD_ENOMEM;
  const char *const *env = p->aopts.env;
  p->aopts.env = NULL;
  if (env && r == 0) {
    size_t n = 0, k = 0;
    while (env[n]) n++;
    char **copy = calloc(n + 1, sizeof(char *));
    if (!copy) return RD_ENOMEM;
    while (k < n && (copy[k] = strdup(env[k]))) k++;
    p->aopts.env = (const char *const *)copy;
    if (k < n) r = RD_ENOMEM;
  }
  return r;
}

static void pool_free(rd_pool *p) {
  for (size_t i = 0; i < p->nargs; i++) free((void *)p->args[i].data);
  free(p->args);
  free((void *)p->aopts.resources);
  free((void *)p->aopts.label_selector);
  free((void *)p->aopts.fallback_label_selectors);
  free((void *)p->aopts.concurrency_groups);
  free((void *)p->aopts.namespace_name);
  if (p->aopts.env) {
    for (size_t i = 0; p->aopts.env[i]; i++) free((void *)p->aopts.env[i]);
    free((void *)p->aopts.env);
  }
  free(p->reps);
  free(p->scratch);
  free(p->ready);
  free(p);
}

/* Copy constructor arguments to bytes the pool owns (refs are resolved
 * once, as rd_actor_create would resolve them for every replica). */
static int pool_copy_args(rd_pool *p, const rd_value *args, size_t nargs) {
  if (nargs == 0) return 0;
  p->args = calloc(nargs, sizeof(*p->args));
  if (!p->args) return RD_ENOMEM;
  for (size_t i = 0; i < nargs; i++) {
    const void *src = args[i].data;
    size_t size = args[i].size;
    rd_buf b;
    memset(&b, 0, sizeof(b));
    int held = 0;
    if (args[i].kind == RD_VALUE_REF) {
      int r = rd_get(&args[i].ref, 1, &b, RD_TIMEOUT_INF);
      if (r != 0) {
        rd__log(RD_LOG_WARN, "rd_pool_create: constructor argument %zu failed: %s", i, rd_err_name(r));
        if (r != RD_ETIMEDOUT) rd_buf_release(&b);
        return r;
      }
      src = b.data;
      size = b.size;
      held = 1;
    } else if (args[i].kind != RD_VALUE_BYTES || (size && !src)) {
      rd__log(RD_LOG_WARN, "rd_pool_create: bad constructor argument %zu", i);
      return RD_EINVAL;
    }
    void *copy = malloc(size ? size : 1);
    if (copy && size) memcpy(copy, src, size);
    if (held) rd_buf_release(&b);
    if (!copy) return RD_ENOMEM;
    p->args[i] = rd_arg_bytes(copy, size);
    p->nargs = i + 1;
  }
  return 0;
}

int rd_pool_create(const rd_actor_class *cls, const rd_value *args, size_t nargs, const rd_actor_opts *actor_opts,
                   const rd_pool_opts *opts, rd_pool **out) {
  rd_pool_opts o;
  if (opts) o = *opts;
  else rd_pool_opts_init(&o);
  if (o.max_replicas == 0) o.max_replicas = o.min_replicas;
  if (!cls || !out || (nargs && !args) || nargs > RD_MAX_ARGS) {
    rd__log(RD_LOG_WARN, "rd_pool_create: NULL class, output or arguments");
    return RD_EINVAL;
  }
  const char *bad = o.min_replicas < 1                ? "min_replicas must be at least 1"
                    : o.max_replicas < o.min_replicas   ? "max_replicas must not be below min_replicas"
                    : o.max_inflight_per_replica < 1    ? "max_inflight_per_replica must be at least 1"
                    : o.scale_up_wait_ms < 0            ? "scale_up_wait_ms must not be negative"
                    : o.scale_down_idle_ms < 0          ? "scale_down_idle_ms must not be negative"
                    : actor_opts && actor_opts->name    ? "actor_opts->name must be NULL: replicas are anonymous"
                    : actor_opts && actor_opts->max_pending_calls > 0 &&
                            actor_opts->max_pending_calls < o.max_inflight_per_replica
                        ? "actor_opts->max_pending_calls is below max_inflight_per_replica: the pool keeps that many "
                          "calls on each replica (leave it 0: the pool limits them itself)"
                        : NULL;
  if (bad) {
    rd__log(RD_LOG_WARN, "rd_pool_create: %s (min %d, max %d, inflight %d, scale_up_wait %d ms, scale_down_idle %d ms)",
            bad, o.min_replicas, o.max_replicas, o.max_inflight_per_replica, o.scale_up_wait_ms,
            o.scale_down_idle_ms);
    return RD_EINVAL;
  }
  rd_pool *p = calloc(1, sizeof(*p));
  if (!p) return RD_ENOMEM;
  p->cls = cls;
  p->opts = o;
  if (actor_opts) p->aopts = *actor_opts;
  else rd_actor_opts_init(&p->aopts);
  int r = pool_copy_aopts(p);
  if (r == 0) r = pool_copy_args(p, args, nargs);
  for (int i = 0; i < o.min_replicas && r == 0; i++) r = pool_add_replica(p);
  if (r != 0) {
    while (p->nreps > 0) pool_remove_replica(p, p->nreps - 1);
    pool_free(p);
    return r;
  }
  *out = p;
  return 0;
}

/* rd_pool_submit and rd_pool_submit_stream (topts: NULL, or the stream's). */
static int pool_submit(rd_pool *p, const rd_actor_method *method, const rd_value *args, size_t nargs,
                       const rd_task_opts *topts, int64_t timeout_ms, rd_ref *out) {
  uint64_t start = pool_now_ms();
  uint64_t deadline = timeout_ms >= 0 ? start + (uint64_t)timeout_ms : 0;
  if (timeout_ms == 0) deadline = start;   /* "no waiting", not "for ever" */
  int i;
  int r = pool_acquire(p, start, deadline, 1, &i);
  if (r != 0) return r;
  return pool_send(p, i, method, args, nargs, topts, out);
}

int rd_pool_submit(rd_pool *p, const rd_actor_method *method, const rd_value *args, size_t nargs,
                   int64_t timeout_ms, rd_ref *out) {
  if (!p || !method || !out || (nargs && !args)) {
    rd__log(RD_LOG_WARN, "rd_pool_submit: NULL pool, method, output or arguments");
    return RD_EINVAL;
  }
  return pool_submit(p, method, args, nargs, NULL, timeout_ms, out);
}

int rd_pool_submit_stream(rd_pool *p, const rd_actor_method *method, const rd_value *args, size_t nargs,
                          int stream_window, int64_t timeout_ms, rd_ref *out) {
  if (!p || !method || !out || (nargs && !args) || stream_window < -1) {
    rd__log(RD_LOG_WARN, "rd_pool_submit_stream: NULL pool, method, output or arguments, or stream_window %d "
            "(-1, 0 for the default, or more)", stream_window);
    return RD_EINVAL;
  }
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.num_returns = RD_STREAMING;
  o.stream_window = stream_window;
  return pool_submit(p, method, args, nargs, &o, timeout_ms, out);
}

/* ------------------------------------------------------------------ map */

typedef struct map_state {
  rd_ref *refs;      /* per input: the caller-side reference while outstanding */
  uint8_t *live;     /* 1 while refs[i] is held */
  size_t *window;    /* unordered: indices outstanding */
  size_t nwindow;
  rd_ref *wrefs;
  uint8_t *wready;
} map_state;

/* Hand result i to fn and drop it. */
static int map_deliver(map_state *m, size_t i, rd_pool_result_fn fn, void *ctx) {
  rd_buf b;
  memset(&b, 0, sizeof(b));
  int r = rd_get(&m->refs[i], 1, &b, RD_TIMEOUT_INF);
  if (r != 0 && !b.data && !b.error) {   /* the runtime filled nothing: report its code */
    b.error = r;
    b.data = rd_strerror(r);
    b.size = strlen(rd_strerror(r));
  }
  int stop = fn(ctx, i, &b);
  rd_buf_release(&b);
  rd_ref_release(m->refs[i]);
  m->live[i] = 0;
  return stop;
}

static int map_is_ready(const rd_ref *ref) {
  uint8_t rdy = 0;
  return rd_wait(ref, 1, 0, 0, &rdy) >= 0 && rdy;
}

/* Deliver what may be delivered now; *stop gets fn's non-zero return.
 * Returns how many were delivered. */
static size_t map_deliver_ready(map_state *m, int ordered, size_t *next_deliver, size_t submitted,
                                rd_pool_result_fn fn, void *ctx, int *stop) {
  size_t done = 0;
  if (ordered) {
    while (!*stop && *next_deliver < submitted && map_is_ready(&m->refs[*next_deliver])) {
      *stop = map_deliver(m, (*next_deliver)++, fn, ctx);
      done++;
    }
    return done;
  }
  if (m->nwindow == 0) return 0;
  for (size_t k = 0; k < m->nwindow; k++) m->wrefs[k] = m->refs[m->window[k]];
  if (rd_wait(m->wrefs, m->nwindow, 0, 0, m->wready) < 0) return 0;
  size_t keep = 0;
  for (size_t k = 0; k < m->nwindow; k++) {
    if (m->wready[k] && !*stop) {
      *stop = map_deliver(m, m->window[k], fn, ctx);
      done++;
    } else {
      m->window[keep++] = m->window[k];
    }
  }
  m->nwindow = keep;
  return done;
}

int rd_pool_map(rd_pool *p, const rd_actor_method *method, const rd_value *inputs, size_t n, int ordered,
                rd_pool_result_fn fn, void *ctx) {
  if (!p || !method || !fn || (n && !inputs)) {
    rd__log(RD_LOG_WARN, "rd_pool_map: NULL pool, method, callback or inputs");
    return RD_EINVAL;
  }
  if (n == 0) return 0;
  map_state m;
  memset(&m, 0, sizeof(m));
  m.refs = calloc(n, sizeof(*m.refs));
  m.live = calloc(n, 1);
  if (!ordered) {
    m.window = calloc(n, sizeof(*m.window));
    m.wrefs = calloc(n, sizeof(*m.wrefs));
    m.wready = calloc(n, 1);
  }
  int ret = 0;
  if (!m.refs || !m.live || (!ordered && (!m.window || !m.wrefs || !m.wready))) {
    ret = RD_ENOMEM;
    goto out;
  }
  size_t next_submit = 0, next_deliver = 0, delivered = 0;
  int stop = 0;
  uint64_t since = pool_now_ms();   /* when the map last found room */
  while (!stop && ret == 0 && delivered < n) {
    size_t progress = 0;
    while (next_submit < n && !stop && ret == 0) {
      int i;
      int r = pool_acquire(p, since, 0, 0, &i);
      if (r == RD_EAGAIN) break;
      if (r == 0) r = pool_send(p, i, method, &inputs[next_submit], 1, NULL, &m.refs[next_submit]);
      if (r != 0) {
        ret = r;
        break;
      }
      m.live[next_submit] = 1;
      if (!ordered) m.window[m.nwindow++] = next_submit;
      next_submit++;
      progress++;
      since = pool_now_ms();
    }
    size_t d = map_deliver_ready(&m, ordered, &next_deliver, next_submit, fn, ctx, &stop);
    delivered += d;
    progress += d;
    if (stop || ret != 0 || delivered == n || progress) continue;
    /* nothing to send or deliver: wait for a call to finish, or until the
     * pool may grow */
    int64_t wait = -1;
    if (next_submit < n && p->nactive < p->opts.max_replicas) {
      uint64_t now = pool_now_ms(), at = pool_grow_at(p, since);
      wait = at > now ? (int64_t)(at - now) : 0;
    }
    pool_reap(p);
    int r = pool_wait_any(p, wait);
    if (r < 0) ret = r;
  }
  if (stop) ret = stop;
out:
  /* stopped early or failed: let what is in flight finish, then drop it */
  if (m.live) {
    for (size_t i = 0; i < n; i++) {
      if (!m.live[i]) continue;
      uint8_t rdy;
      (void)rd_wait(&m.refs[i], 1, 1, RD_TIMEOUT_INF, &rdy);
      rd_ref_release(m.refs[i]);
    }
  }
  free(m.refs);
  free(m.live);
  free(m.window);
  free(m.wrefs);
  free(m.wready);
  return ret;
}

/* ------------------------------------------------------- size, stats, end */

int rd_pool_resize(rd_pool *p, int replicas) {
  if (!p) {
    rd__log(RD_LOG_WARN, "rd_pool_resize: NULL pool");
    return RD_EINVAL;
  }
  if (replicas < 1) replicas = 1;
  if (replicas > p->opts.max_replicas) p->opts.max_replicas = replicas;
  if (replicas < p->opts.min_replicas) p->opts.min_replicas = replicas;
  pool_reap(p);
  while (p->nactive < replicas) {
    int r = pool_add_replica(p);
    if (r != 0) {
      rd__log(RD_LOG_WARN, "rd_pool_resize (%s): cannot add a replica: %s", p->cls->name, rd_err_name(r));
      return r;
    }
  }
  /* shrink: idle replicas go at once (longest idle first), then the least
   * busy ones retire and go when their calls have finished */
  while (p->nactive > replicas) {
    int best = -1;
    for (int i = 0; i < p->nreps; i++) {
      const pool_replica *rep = &p->reps[i];
      if (rep->retiring) continue;
      if (best < 0 || rep->ninflight < p->reps[best].ninflight ||
          (rep->ninflight == p->reps[best].ninflight && rep->idle_since_ms < p->reps[best].idle_since_ms))
        best = i;
    }
    if (p->reps[best].ninflight == 0) pool_remove_replica(p, best);
    else pool_retire(p, best);
  }
  for (;;) {
    pool_reap(p);
    int retiring = 0;
    for (int i = 0; i < p->nreps; i++) retiring += p->reps[i].retiring;
    if (retiring == 0) return 0;
    int r = pool_wait_any(p, RD_TIMEOUT_INF);
    if (r < 0) return r;
  }
}

void rd_pool_get_stats(rd_pool *p, rd_pool_stats *out) {
  if (!out) return;
  memset(out, 0, sizeof(*out));
  if (!p) return;
  pool_tend(p);
  p->st.replicas = p->nactive;
  p->st.inflight = 0;
  for (int i = 0; i < p->nreps; i++) p->st.inflight += p->reps[i].ninflight;
  *out = p->st;
}

void rd_pool_destroy(rd_pool *p) {
  if (!p) return;
  p->closing = 1;
  pool_drain(p);
  while (p->nreps > 0) pool_remove_replica(p, p->nreps - 1);
  pool_free(p);
}
