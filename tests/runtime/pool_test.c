/* tests/runtime/pool_test.c - elastic actor pools (src/pool.c) through the
 * public API, with real actor processes: growing under a burst and shrinking
 * when idle, routing around a slow replica, backpressure, ordered and
 * unordered map (with failures and early stop), replacing a dead replica,
 * resizing by hand, destroy, bad options, and streaming calls (whole, dropped
 * early, cut by a replica's death).
 * `pool_test NAME` runs one test; the binary is re-executed as workers. */
#include <raydist.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../check.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------ Replica */

typedef struct replica {
  long calls;
  long yielded;    /* items its streaming calls yielded */
} replica;

/* What `work` and `slow_if` return: who served the call. */
typedef struct reply {
  long pid;
  long calls;      /* this replica's calls so far, this one included */
  long actor_id;
} reply;

static int replica_init(rd_call *call, void **state) {
  replica *r = calloc(1, sizeof(*r));
  if (!r) return rd_call_fail(call, "out of memory");
  *state = r;
  return 0;
}

static void replica_fini(void *state) { free(state); }

RD_ACTOR_CLASS(Replica, replica_init, replica_fini)

static long arg_long(rd_call *call, long dflt) {
  rd_buf b;
  long v = dflt;
  if (rd_call_nargs(call) > 0 && rd_arg(call, 0, &b) == 0 && b.size == sizeof(long)) memcpy(&v, b.data, sizeof(v));
  return v;
}

static int send_reply(rd_call *call, replica *r) {
  reply out = {getpid(), ++r->calls, (long)rd_call_actor(call).id};
  return rd_return_bytes(call, 0, &out, sizeof(out));
}

/* Sleep the given number of ms. */
RD_ACTOR_METHOD(Replica, work) {
  usleep((useconds_t)arg_long(call, 0) * 1000);
  return send_reply(call, state);
}

/* Slow (500 ms) in the replica whose pid is the argument, fast (10 ms) elsewhere. */
RD_ACTOR_METHOD(Replica, slow_if) {
  usleep(getpid() == arg_long(call, -1) ? 500000 : 10000);
  return send_reply(call, state);
}

/* x * 2 after a short, input-dependent sleep; negative inputs fail. */
RD_ACTOR_METHOD(Replica, twice) {
  (void)state;
  long x = arg_long(call, 0);
  if (x < 0) return rd_call_fail(call, "negative input %ld", x);
  usleep((useconds_t)((x * 7) % 5) * 1000);
  long y = x * 2;
  return rd_return_bytes(call, 0, &y, sizeof(y));
}

RD_ACTOR_METHOD(Replica, fail) {
  (void)state;
  return rd_call_fail(call, "method failed on purpose");
}

/* The replica's process dies. */
RD_ACTOR_METHOD(Replica, die) {
  (void)state;
  kill(getpid(), SIGKILL);
  return 0;
}

/* A streaming call's argument: yield n items tagged `tag`, ms apart; with
 * die_after >= 0 the process dies (SIGKILL) once that many have gone. */
typedef struct stream_spec {
  long tag, n, ms, die_after;
} stream_spec;

typedef struct stream_item {
  long tag, index, pid;
} stream_item;

/* Streaming: the items of the spec, until the caller cancels. */
RD_ACTOR_METHOD(Replica, count_to) {
  replica *r = state;
  stream_spec sp;
  if (rd_arg_copy(call, 0, &sp, sizeof(sp)) != 0) return rd_call_fail(call, "bad stream spec");
  r->calls++;
  for (long i = 0; i < sp.n; i++) {
    if (i == sp.die_after) {
      usleep(300000);   /* the items before have left (they go within 100 us) */
      kill(getpid(), SIGKILL);
    }
    stream_item it = {sp.tag, i, getpid()};
    int e = rd_yield(call, &it, sizeof(it));
    if (e == RD_ECANCELED) return 0;
    if (e != 0) return rd_call_fail(call, "rd_yield: %s", rd_err_name(e));
    r->yielded++;
    if (sp.ms) usleep((useconds_t)sp.ms * 1000);
  }
  return 0;
}

/* How many items this replica's streaming calls have yielded. */
RD_ACTOR_METHOD(Replica, yielded) {
  replica *r = state;
  return rd_return_bytes(call, 0, &r->yielded, sizeof(r->yielded));
}

/* ------------------------------------------------------------ helpers */

static void init_or_die(void) {
  int r = rd_init(NULL);
  if (r != 0) {
    fprintf(stderr, "rd_init: %s\n", rd_strerror(r));
    exit(1);
  }
}

static rd_pool *make_pool(int min, int max, int inflight, int up_ms, int down_ms) {
  rd_pool_opts o;
  rd_pool_opts_init(&o);
  o.min_replicas = min;
  o.max_replicas = max;
  o.max_inflight_per_replica = inflight;
  o.scale_up_wait_ms = up_ms;
  o.scale_down_idle_ms = down_ms;
  rd_pool *p = NULL;
  CHECK_EQ(rd_pool_create(Replica, RD_NO_ARGS, NULL, &o, &p), 0);
  CHECK(p != NULL);
  return p;
}

static rd_ref submit_long(rd_pool *p, const rd_actor_method *m, long v) {
  rd_ref r;
  CHECK_EQ(rd_pool_submit(p, m, RD_ARGS(rd_arg_bytes(&v, sizeof(v))), RD_TIMEOUT_INF, &r), 0);
  return r;
}

/* The reply of a call; releases the ref. */
static reply get_reply(rd_ref r) {
  rd_buf b;
  int err = rd_get(&r, 1, &b, 60000);
  if (err != 0) {
    fprintf(stderr, "get failed: %s: %.*s\n", rd_err_name(err), err == RD_ETIMEDOUT ? 0 : (int)b.size,
            err == RD_ETIMEDOUT ? "" : (const char *)b.data);
    exit(1);
  }
  reply out;
  CHECK_EQ(b.size, sizeof(out));
  memcpy(&out, b.data, sizeof(out));
  rd_buf_release(&b);
  rd_ref_release(r);
  return out;
}

/* The error of a call (0 on success); msg gets its message. */
static int get_err(rd_ref r, char *msg, size_t msglen) {
  rd_buf b;
  int err = rd_get(&r, 1, &b, 60000);
  CHECK(err != RD_ETIMEDOUT);
  if (msg) snprintf(msg, msglen, "%.*s", err ? (int)b.size : 0, err ? (const char *)b.data : "");
  rd_buf_release(&b);
  rd_ref_release(r);
  return err;
}

/* 1 when calls to actor `id` fail with RD_EACTOR_DIED. */
static int actor_is_dead(long id) {
  rd_actor a = {(uint64_t)id};
  rd_ref r;
  long zero = 0;
  CHECK_EQ(rd_actor_call(a, Replica_work, RD_ARGS(rd_arg_bytes(&zero, sizeof(zero))), NULL, &r), 0);
  int err = get_err(r, NULL, 0);
  CHECK(err == 0 || err == RD_EACTOR_DIED);
  return err == RD_EACTOR_DIED;
}

/* Waits up to 10 s for process `pid` to be gone. */
static int process_gone(long pid) {
  for (int i = 0; i < 1000; i++) {
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) return 1;
    usleep(10000);
  }
  return 0;
}

static int count_distinct(const long *v, int n) {
  int d = 0;
  for (int i = 0; i < n; i++) {
    int seen = 0;
    for (int j = 0; j < i; j++) seen |= v[j] == v[i];
    d += !seen;
  }
  return d;
}

/* ------------------------------------------------------------------ tests */

/* A burst from the driver adds replicas; idleness takes them away again. */
static int t_grow_shrink(void) {
  init_or_die();
  rd_pool *p = make_pool(1, 3, 1, 50, 300);
  enum { N = 30 };
  rd_ref refs[N];
  for (int i = 0; i < N; i++) refs[i] = submit_long(p, Replica_work, 100);
  rd_pool_stats s1;
  rd_pool_get_stats(p, &s1);
  CHECK(s1.replicas > 1);
  CHECK(s1.replicas <= 3);
  CHECK(s1.scale_ups >= 1);
  CHECK_EQ(s1.submitted, N);
  long pids[N], ids[N];
  for (int i = 0; i < N; i++) {
    reply r = get_reply(refs[i]);
    pids[i] = r.pid;
    ids[i] = r.actor_id;
  }
  CHECK(count_distinct(pids, N) > 1);
  rd_pool_stats s2;
  rd_pool_get_stats(p, &s2);   /* sees every call finished */
  CHECK_EQ(s2.inflight, 0);
  CHECK_EQ(s2.completed, N);
  usleep(1000000);
  rd_pool_stats s3;
  rd_pool_get_stats(p, &s3);   /* idle for 1 s > 300 ms: back to min_replicas */
  CHECK_EQ(s3.replicas, 1);
  CHECK(s3.scale_downs >= 1);
  CHECK_EQ(s3.scale_downs, s3.scale_ups);
  /* the survivor serves; every other replica that served is dead */
  reply last = get_reply(submit_long(p, Replica_work, 0));
  int dead = 0;
  for (int i = 0; i < N; i++) {
    int first = 1;
    for (int j = 0; j < i; j++) first &= ids[j] != ids[i];
    if (!first) continue;
    if (ids[i] == last.actor_id) {
      CHECK(!actor_is_dead(ids[i]));
    } else {
      CHECK(actor_is_dead(ids[i]));
      dead++;
    }
  }
  CHECK(dead >= 1);
  rd_pool_destroy(p);
  rd_shutdown();
  return 0;
}

/* Least-loaded routing sends most calls to the fast replica. */
static int t_slow_replica(void) {
  init_or_die();
  rd_pool *p = make_pool(2, 2, 2, 50, 60000);
  /* two calls at once land on the two replicas */
  rd_ref a = submit_long(p, Replica_work, 0), b = submit_long(p, Replica_work, 0);
  reply ra = get_reply(a), rb = get_reply(b);
  CHECK(ra.pid != rb.pid);
  long slow = ra.pid;
  enum { N = 40 };
  rd_ref refs[N];
  double t0 = now_s();
  for (int i = 0; i < N; i++) refs[i] = submit_long(p, Replica_slow_if, slow);
  int on_slow = 0, on_fast = 0;
  for (int i = 0; i < N; i++) {
    reply r = get_reply(refs[i]);
    if (r.pid == slow) on_slow++;
    else if (r.pid == rb.pid) on_fast++;
  }
  double took = now_s() - t0;
  fprintf(stderr, "slow replica served %d, fast %d, in %.2f s\n", on_slow, on_fast, took);
  CHECK_EQ(on_slow + on_fast, N);
  CHECK(on_fast > 30);
  rd_pool_stats s;
  rd_pool_get_stats(p, &s);
  CHECK_EQ(s.replicas, 2);
  CHECK_EQ(s.scale_ups, 0);
  rd_pool_destroy(p);
  rd_shutdown();
  return 0;
}

/* Every submit beyond the bound waits; with a timeout it gives up. */
static int t_backpressure(void) {
  init_or_die();
  rd_pool *p = make_pool(1, 1, 1, 10, 60000);
  (void)get_reply(submit_long(p, Replica_work, 0));   /* the replica is up */
  double t0 = now_s();
  rd_ref busy = submit_long(p, Replica_work, 600);
  rd_ref r;
  long zero = 0;
  CHECK_EQ(rd_pool_submit(p, Replica_work, RD_ARGS(rd_arg_bytes(&zero, sizeof(zero))), 0, &r), RD_ETIMEDOUT);
  double t1 = now_s();
  CHECK_EQ(rd_pool_submit(p, Replica_work, RD_ARGS(rd_arg_bytes(&zero, sizeof(zero))), 150, &r), RD_ETIMEDOUT);
  CHECK(now_s() - t1 >= 0.14);
  rd_pool_stats s;
  rd_pool_get_stats(p, &s);
  CHECK_EQ(s.inflight, 1);
  CHECK_EQ(s.replicas, 1);   /* max_replicas 1: no growth */
  /* waiting for ever gets room once the busy call is done */
  r = submit_long(p, Replica_work, 0);
  CHECK(now_s() - t0 >= 0.5);
  CHECK_EQ(get_reply(busy).calls, 2);
  CHECK_EQ(get_reply(r).calls, 3);
  rd_pool_destroy(p);
  rd_shutdown();
  return 0;
}

enum { MAP_N = 200, MAP_BAD = 77 };

typedef struct map_ctx {
  int ordered;
  size_t next;
  int seen[MAP_N];
  int delivered;
  int failed;
  int stop_after;   /* >0: return 42 after this many deliveries */
  long inputs[MAP_N];
} map_ctx;

static int on_result(void *vctx, size_t index, const rd_buf *result) {
  map_ctx *c = vctx;
  CHECK(index < MAP_N);
  if (c->ordered) CHECK_EQ(index, c->next++);
  c->seen[index]++;
  c->delivered++;
  if (c->inputs[index] < 0) {
    CHECK_EQ(result->error, RD_ETASK);
    CHECK(strstr((const char *)result->data, "negative input") != NULL);
    c->failed++;
  } else {
    CHECK_EQ(result->error, 0);
    CHECK_EQ(result->size, sizeof(long));
    long y;
    memcpy(&y, result->data, sizeof(y));
    CHECK_EQ(y, c->inputs[index] * 2);
  }
  return c->stop_after > 0 && c->delivered == c->stop_after ? 42 : 0;
}

/* Maps 0..199 (with input MAP_BAD negated when `bad`) and checks delivery. */
static void run_map(rd_pool *p, int ordered, int bad) {
  static map_ctx c;
  memset(&c, 0, sizeof(c));
  c.ordered = ordered;
  rd_value in[MAP_N];
  for (int i = 0; i < MAP_N; i++) {
    c.inputs[i] = bad && i == MAP_BAD ? -1 : i;
    in[i] = rd_arg_bytes(&c.inputs[i], sizeof(long));
  }
  rd_pool_stats before, after;
  rd_pool_get_stats(p, &before);
  CHECK_EQ(rd_pool_map(p, Replica_twice, in, MAP_N, ordered, on_result, &c), 0);
  CHECK_EQ(c.delivered, MAP_N);
  for (int i = 0; i < MAP_N; i++) CHECK_EQ(c.seen[i], 1);
  if (ordered) CHECK_EQ(c.next, MAP_N);
  CHECK_EQ(c.failed, bad ? 1 : 0);
  rd_pool_get_stats(p, &after);
  CHECK_EQ(after.submitted - before.submitted, MAP_N);
  CHECK_EQ(after.inflight, 0);
}

static int t_map_ordered(void) {
  init_or_die();
  rd_pool *p = make_pool(2, 2, 3, 50, 60000);
  run_map(p, 1, 0);
  rd_pool_destroy(p);
  rd_shutdown();
  return 0;
}

static int t_map_unordered(void) {
  init_or_die();
  rd_pool *p = make_pool(2, 3, 3, 50, 60000);
  run_map(p, 0, 0);
  rd_pool_destroy(p);
  rd_shutdown();
  return 0;
}

static int t_map_errors(void) {
  init_or_die();
  rd_pool *p = make_pool(2, 2, 2, 50, 60000);
  run_map(p, 1, 1);
  run_map(p, 0, 1);
  /* a failing method fails every element, and the map still completes */
  rd_ref r;
  CHECK_EQ(rd_pool_submit(p, Replica_fail, RD_NO_ARGS, RD_TIMEOUT_INF, &r), 0);
  char msg[256];
  CHECK_EQ(get_err(r, msg, sizeof(msg)), RD_ETASK);
  CHECK(strstr(msg, "on purpose") != NULL);
  rd_pool_stats s;
  rd_pool_get_stats(p, &s);
  CHECK_EQ(s.replaced, 0);   /* a failed call is not a dead replica */
  CHECK_EQ(s.replicas, 2);
  rd_pool_destroy(p);
  rd_shutdown();
  return 0;
}

static int t_map_stop(void) {
  init_or_die();
  rd_pool *p = make_pool(2, 2, 2, 50, 60000);
  for (int ordered = 0; ordered < 2; ordered++) {
    static map_ctx c;
    memset(&c, 0, sizeof(c));
    c.ordered = ordered;
    c.stop_after = 10;
    rd_value in[MAP_N];
    for (int i = 0; i < MAP_N; i++) {
      c.inputs[i] = i;
      in[i] = rd_arg_bytes(&c.inputs[i], sizeof(long));
    }
    rd_pool_stats before, after;
    rd_pool_get_stats(p, &before);
    CHECK_EQ(rd_pool_map(p, Replica_twice, in, MAP_N, ordered, on_result, &c), 42);
    CHECK_EQ(c.delivered, 10);
    rd_pool_get_stats(p, &after);
    CHECK_EQ(after.inflight, 0);   /* what was in flight has finished */
    CHECK(after.submitted - before.submitted >= 10);
    CHECK(after.submitted - before.submitted < MAP_N / 2);   /* it stopped sending, too */
  }
  run_map(p, 1, 0);   /* the pool is fine afterwards */
  rd_pool_destroy(p);
  rd_shutdown();
  return 0;
}

/* A replica whose process dies is replaced; the caller sees the error. */
static int t_replace(void) {
  init_or_die();
  rd_pool *p = make_pool(2, 2, 2, 50, 60000);
  rd_ref a = submit_long(p, Replica_work, 0), b = submit_long(p, Replica_work, 0);
  reply ra = get_reply(a), rb = get_reply(b);
  CHECK(ra.pid != rb.pid);
  rd_ref d;
  CHECK_EQ(rd_pool_submit(p, Replica_die, RD_NO_ARGS, RD_TIMEOUT_INF, &d), 0);
  char msg[512];
  CHECK_EQ(get_err(d, msg, sizeof(msg)), RD_EACTOR_DIED);
  enum { N = 12 };
  rd_ref refs[N];
  for (int i = 0; i < N; i++) refs[i] = submit_long(p, Replica_work, 20);
  long pids[N];
  int fresh = 0, saw_a = 0, saw_b = 0;
  for (int i = 0; i < N; i++) {
    pids[i] = get_reply(refs[i]).pid;
    fresh |= pids[i] != ra.pid && pids[i] != rb.pid;
    saw_a |= pids[i] == ra.pid;
    saw_b |= pids[i] == rb.pid;
  }
  CHECK(fresh);                              /* the replacement serves */
  CHECK_EQ(saw_a + saw_b, 1);                /* and the old replica that lived */
  CHECK_EQ(count_distinct(pids, N), 2);
  CHECK(process_gone(saw_a ? rb.pid : ra.pid));
  rd_pool_stats s;
  rd_pool_get_stats(p, &s);
  CHECK_EQ(s.replaced, 1);
  CHECK_EQ(s.replicas, 2);
  CHECK_EQ(s.scale_ups, 0);
  rd_pool_destroy(p);
  rd_shutdown();
  return 0;
}

/* The value of POOL_PROBE in the replica's process ("-" when unset). */
RD_ACTOR_METHOD(Replica, probe_env) {
  (void)state;
  const char *v = getenv("POOL_PROBE");
  if (!v) v = "-";
  return rd_return_bytes(call, 0, v, strlen(v));
}

/* rd_pool_create copies the actor options: their strings and env list
 * freed (and scribbled over first) by the caller right after create,
 * replicas added later still get the label selector and its fallback,
 * concurrency groups, namespace and env. */
static int t_opts_copied(void) {
  rd_config cfg;
  rd_config_init(&cfg);
  cfg.node_labels = "tier=gold";
  CHECK_EQ(rd_init(&cfg), 0);
  char *sel = strdup("tier=silver"), *fb = strdup("tier=gold"), *groups = strdup("io=1"), *ns = strdup("poolns"),
       *var = strdup("POOL_PROBE=42");
  const char **env = calloc(2, sizeof(char *));
  CHECK(sel && fb && groups && ns && var && env);
  env[0] = var;
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.label_selector = sel;
  ao.fallback_label_selectors = fb;
  ao.concurrency_groups = groups;
  ao.namespace_name = ns;
  ao.env = env;
  rd_pool_opts o;
  rd_pool_opts_init(&o);
  rd_pool *p = NULL;
  CHECK_EQ(rd_pool_create(Replica, RD_NO_ARGS, &ao, &o, &p), 0);
  char *all[] = {sel, fb, groups, ns, var};
  for (size_t i = 0; i < 5; i++) {
    memset(all[i], '#', strlen(all[i]));
    free(all[i]);
  }
  env[0] = "POOL_PROBE=scribbled";
  free(env);
  CHECK_EQ(rd_pool_resize(p, 3), 0);   /* two replicas made from the pool's copies */
  rd_pool_stats s;
  rd_pool_get_stats(p, &s);
  CHECK_EQ(s.replicas, 3);
  rd_ref refs[6];
  for (int i = 0; i < 6; i++) CHECK_EQ(rd_pool_submit(p, Replica_probe_env, RD_NO_ARGS, 60000, &refs[i]), 0);
  for (int i = 0; i < 6; i++) {
    rd_buf b;
    CHECK_EQ(rd_get(&refs[i], 1, &b, 60000), 0);
    CHECK(b.size == 2 && !memcmp(b.data, "42", 2));
    rd_buf_release(&b);
    rd_ref_release(refs[i]);
  }
  rd_pool_destroy(p);
  rd_shutdown();
  return 0;
}

static int t_resize(void) {
  init_or_die();
  rd_pool *p = make_pool(1, 1, 1, 50, 60000);
  CHECK_EQ(rd_pool_resize(p, 3), 0);   /* above max_replicas: max is raised */
  rd_pool_stats s;
  rd_pool_get_stats(p, &s);
  CHECK_EQ(s.replicas, 3);
  rd_ref refs[3];
  for (int i = 0; i < 3; i++) refs[i] = submit_long(p, Replica_work, 100);
  long ids[3], pids[3];
  for (int i = 0; i < 3; i++) {
    reply r = get_reply(refs[i]);
    ids[i] = r.actor_id;
    pids[i] = r.pid;
  }
  CHECK_EQ(count_distinct(pids, 3), 3);
  /* shrink while every replica is busy: the call returns once the removed
   * ones have finished their calls, which succeed */
  for (int i = 0; i < 3; i++) refs[i] = submit_long(p, Replica_work, 400);
  double t0 = now_s();
  CHECK_EQ(rd_pool_resize(p, 1), 0);
  CHECK(now_s() - t0 > 0.2);
  for (int i = 0; i < 3; i++) CHECK_EQ(get_reply(refs[i]).calls, 2);
  rd_pool_get_stats(p, &s);
  CHECK_EQ(s.replicas, 1);
  long survivor = get_reply(submit_long(p, Replica_work, 0)).actor_id;
  int dead = 0;
  for (int i = 0; i < 3; i++) {
    if (ids[i] == survivor) continue;
    CHECK(actor_is_dead(ids[i]));
    dead++;
  }
  CHECK_EQ(dead, 2);
  /* idle replicas go at once; 0 is clamped to 1 */
  CHECK_EQ(rd_pool_resize(p, 2), 0);
  rd_pool_get_stats(p, &s);
  CHECK_EQ(s.replicas, 2);
  t0 = now_s();
  CHECK_EQ(rd_pool_resize(p, 0), 0);
  CHECK(now_s() - t0 < 5.0);
  rd_pool_get_stats(p, &s);
  CHECK_EQ(s.replicas, 1);
  CHECK_EQ(get_reply(submit_long(p, Replica_work, 0)).calls >= 1, 1);
  CHECK_EQ(s.scale_ups, 0);
  CHECK_EQ(s.scale_downs, 0);
  rd_pool_destroy(p);
  rd_shutdown();
  return 0;
}

/* Destroy waits for the calls in flight and kills every replica. */
static int t_destroy(void) {
  init_or_die();
  rd_pool *p = make_pool(3, 3, 1, 50, 60000);
  rd_ref refs[3];
  for (int i = 0; i < 3; i++) refs[i] = submit_long(p, Replica_work, 300);
  rd_pool_destroy(p);
  /* the calls finished before the replicas went */
  long ids[3], pids[3];
  for (int i = 0; i < 3; i++) {
    rd_buf b;
    CHECK_EQ(rd_get(&refs[i], 1, &b, 0), 0);
    reply r;
    memcpy(&r, b.data, sizeof(r));
    rd_buf_release(&b);
    rd_ref_release(refs[i]);
    ids[i] = r.actor_id;
    pids[i] = r.pid;
  }
  CHECK_EQ(count_distinct(ids, 3), 3);
  for (int i = 0; i < 3; i++) {
    CHECK(actor_is_dead(ids[i]));
    CHECK(process_gone(pids[i]));
  }
  /* a pool outliving rd_shutdown is freed without waiting for its call */
  rd_pool *q = make_pool(1, 1, 1, 50, 60000);
  rd_ref slow = submit_long(q, Replica_work, 5000);
  rd_shutdown();
  double t0 = now_s();
  rd_pool_destroy(q);
  CHECK(now_s() - t0 < 2.0);
  rd_ref_release(slow);
  return 0;
}

static int t_bad_options(void) {
  init_or_die();
  rd_pool_opts o;
  rd_pool *p = NULL;
  rd_pool_opts_init(&o);
  CHECK_EQ(o.min_replicas, 1);
  CHECK_EQ(o.max_inflight_per_replica, 2);
  o.min_replicas = 0;
  CHECK_EQ(rd_pool_create(Replica, RD_NO_ARGS, NULL, &o, &p), RD_EINVAL);
  rd_pool_opts_init(&o);
  o.min_replicas = 3;
  o.max_replicas = 2;
  CHECK_EQ(rd_pool_create(Replica, RD_NO_ARGS, NULL, &o, &p), RD_EINVAL);
  rd_pool_opts_init(&o);
  o.max_inflight_per_replica = 0;
  CHECK_EQ(rd_pool_create(Replica, RD_NO_ARGS, NULL, &o, &p), RD_EINVAL);
  rd_pool_opts_init(&o);
  o.scale_up_wait_ms = -1;
  CHECK_EQ(rd_pool_create(Replica, RD_NO_ARGS, NULL, &o, &p), RD_EINVAL);
  rd_pool_opts_init(&o);
  o.scale_down_idle_ms = -5;
  CHECK_EQ(rd_pool_create(Replica, RD_NO_ARGS, NULL, &o, &p), RD_EINVAL);
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.name = "named_replica";
  CHECK_EQ(rd_pool_create(Replica, RD_NO_ARGS, &ao, NULL, &p), RD_EINVAL);
  ao.name = NULL;
  ao.max_pending_calls = 1;   /* below the default 2 in flight per replica */
  CHECK_EQ(rd_pool_create(Replica, RD_NO_ARGS, &ao, NULL, &p), RD_EINVAL);
  ao.max_pending_calls = 0;
  CHECK_EQ(rd_pool_create(NULL, RD_NO_ARGS, NULL, NULL, &p), RD_EINVAL);
  CHECK_EQ(rd_pool_create(Replica, RD_NO_ARGS, NULL, NULL, NULL), RD_EINVAL);
  CHECK_EQ(rd_pool_create(Replica, NULL, 1, NULL, NULL, &p), RD_EINVAL);
  static rd_actor_class ghost = {"Ghost", NULL, NULL, NULL};
  CHECK_EQ(rd_pool_create(&ghost, RD_NO_ARGS, NULL, NULL, &p), RD_ENOFUNC);
  ao.name = NULL;
  ao.num_gpus = 64;
  CHECK_EQ(rd_pool_create(Replica, RD_NO_ARGS, &ao, NULL, &p), RD_EINFEASIBLE);
  CHECK(p == NULL);
  /* defaults (NULL options) make a working one-replica pool */
  CHECK_EQ(rd_pool_create(Replica, RD_NO_ARGS, NULL, NULL, &p), 0);
  rd_ref r;
  long zero = 0;
  CHECK_EQ(rd_pool_submit(NULL, Replica_work, RD_NO_ARGS, 0, &r), RD_EINVAL);
  CHECK_EQ(rd_pool_submit(p, NULL, RD_NO_ARGS, 0, &r), RD_EINVAL);
  CHECK_EQ(rd_pool_submit(p, Replica_work, NULL, 1, 0, &r), RD_EINVAL);
  CHECK_EQ(rd_pool_submit(p, Replica_work, RD_ARGS(rd_arg_bytes(&zero, sizeof(zero))), 0, NULL), RD_EINVAL);
  rd_value in = rd_arg_bytes(&zero, sizeof(zero));
  CHECK_EQ(rd_pool_map(p, Replica_twice, &in, 1, 1, NULL, NULL), RD_EINVAL);
  CHECK_EQ(rd_pool_map(NULL, Replica_twice, &in, 1, 1, on_result, NULL), RD_EINVAL);
  CHECK_EQ(rd_pool_map(p, Replica_twice, NULL, 1, 1, on_result, NULL), RD_EINVAL);
  CHECK_EQ(rd_pool_map(p, Replica_twice, NULL, 0, 1, on_result, NULL), 0);
  CHECK_EQ(rd_pool_resize(NULL, 2), RD_EINVAL);
  rd_pool_stats s;
  rd_pool_get_stats(NULL, &s);
  CHECK_EQ(s.replicas, 0);
  rd_pool_get_stats(p, &s);
  CHECK_EQ(s.replicas, 1);
  CHECK_EQ(s.submitted, 0);
  CHECK_EQ(get_reply(submit_long(p, Replica_work, 0)).calls, 1);
  rd_pool_destroy(p);
  rd_pool_destroy(NULL);
  rd_shutdown();
  return 0;
}

/* Calls much shorter than scale_up_wait_ms: no single submit waits that long,
 * but the pool stays saturated, so it must still grow. */
static int t_grow_short_calls(void) {
  init_or_die();
  rd_pool *p = make_pool(1, 3, 1, 150, 60000);
  enum { N = 60 };
  rd_ref refs[N];
  for (int i = 0; i < N; i++) refs[i] = submit_long(p, Replica_work, 20);
  rd_pool_stats s;
  rd_pool_get_stats(p, &s);
  CHECK(s.scale_ups >= 1);
  CHECK(s.replicas > 1);
  for (int i = 0; i < N; i++) (void)get_reply(refs[i]);
  rd_pool_destroy(p);
  rd_shutdown();
  return 0;
}

static rd_ref submit_stream(rd_pool *p, long tag, long n, long ms, long die_after, int window) {
  stream_spec sp = {tag, n, ms, die_after};
  rd_ref s;
  CHECK_EQ(rd_pool_submit_stream(p, Replica_count_to, RD_ARGS(rd_arg_bytes(&sp, sizeof(sp))), window,
                                 RD_TIMEOUT_INF, &s),
           0);
  return s;
}

/* The item `it` holds; releases it. */
static stream_item take_item(rd_ref it) {
  rd_buf b;
  CHECK_EQ(rd_get(&it, 1, &b, 30000), 0);
  stream_item out;
  CHECK_EQ(b.size, sizeof(out));
  memcpy(&out, b.data, sizeof(out));
  rd_buf_release(&b);
  rd_ref_release(it);
  return out;
}

/* Streaming calls through a pool: four streams over two replicas, taken
 * together as they come, each in order and whole; they count as calls in
 * flight (the pool is full while they run) and are reaped when they end. */
static int t_stream(void) {
  init_or_die();
  rd_pool *p = make_pool(2, 2, 2, 50, 60000);
  enum { S = 4, N = 40 };
  rd_ref streams[S], live[S];
  size_t orig[S], nlive = S;
  long next[S], pids[S];
  for (int i = 0; i < S; i++) {
    streams[i] = live[i] = submit_stream(p, i, N, 1, -1, 4);
    orig[i] = (size_t)i;
    next[i] = 0;
    pids[i] = 0;
  }
  rd_ref w;
  long zero = 0;
  CHECK_EQ(rd_pool_submit(p, Replica_work, RD_ARGS(rd_arg_bytes(&zero, sizeof(zero))), 0, &w), RD_ETIMEDOUT);
  for (;;) {
    size_t k;
    rd_ref it;
    int r = rd_stream_next_any(live, nlive, &k, &it, 30000);
    if (r == RD_EEND) break;
    CHECK_EQ(r, 0);
    stream_item x = take_item(it);
    size_t s = orig[k];
    CHECK_EQ(x.tag, (long)s);
    CHECK_EQ(x.index, next[s]);
    next[s]++;
    if (!pids[s]) pids[s] = x.pid;
    CHECK_EQ(x.pid, pids[s]);   /* one stream, one replica */
    /* rotate, so that no stream waits behind another's window */
    rd_ref lr = live[k];
    size_t lo = orig[k];
    for (size_t j = k; j + 1 < nlive; j++) {
      live[j] = live[j + 1];
      orig[j] = orig[j + 1];
    }
    live[nlive - 1] = lr;
    orig[nlive - 1] = lo;
  }
  for (int i = 0; i < S; i++) {
    CHECK_EQ(next[i], N);
    rd_buf b;
    CHECK_EQ(rd_get(&streams[i], 1, &b, 30000), 0);
    uint64_t count;
    CHECK_EQ(b.size, sizeof(count));
    memcpy(&count, b.data, sizeof(count));
    CHECK_EQ(count, (uint64_t)N);
    rd_buf_release(&b);
    rd_ref_release(streams[i]);
  }
  CHECK_EQ(count_distinct(pids, S), 2);
  rd_pool_stats st;
  rd_pool_get_stats(p, &st);
  CHECK_EQ(st.submitted, S);
  CHECK_EQ(st.completed, S);
  CHECK_EQ(st.inflight, 0);
  (void)get_reply(submit_long(p, Replica_work, 0));
  rd_pool_destroy(p);
  rd_shutdown();
  return 0;
}

/* A stream the caller drops after one item, held back by its window of 2:
 * the pool does not hold it open, so the method runs on to its end (all
 * 2000 items) and the only replica takes the next call. */
static int t_stream_dropped(void) {
  init_or_die();
  rd_pool *p = make_pool(1, 1, 1, 50, 60000);
  rd_ref s = submit_stream(p, 7, 2000, 0, -1, 2);
  rd_ref it;
  CHECK_EQ(rd_stream_next(s, &it, 30000), 0);
  stream_item x = take_item(it);
  CHECK_EQ(x.tag, 7);
  CHECK_EQ(x.index, 0);
  usleep(200000);
  rd_ref w;
  long zero = 0;   /* the stream waits for its caller: the pool is full */
  CHECK_EQ(rd_pool_submit(p, Replica_work, RD_ARGS(rd_arg_bytes(&zero, sizeof(zero))), 0, &w), RD_ETIMEDOUT);
  rd_ref_release(s);
  CHECK_EQ(rd_pool_submit(p, Replica_yielded, RD_NO_ARGS, 20000, &w), 0);
  rd_buf b;
  CHECK_EQ(rd_get(&w, 1, &b, 30000), 0);
  long yielded;
  CHECK_EQ(b.size, sizeof(yielded));
  memcpy(&yielded, b.data, sizeof(yielded));
  rd_buf_release(&b);
  rd_ref_release(w);
  CHECK_EQ(yielded, 2000);
  rd_pool_stats st;
  rd_pool_get_stats(p, &st);
  CHECK_EQ(st.completed, 2);
  CHECK_EQ(st.inflight, 0);
  rd_pool_destroy(p);
  rd_shutdown();
  return 0;
}

/* The replica dies in the middle of a stream: the caller has the items
 * that came, then RD_EACTOR_DIED; the pool replaces the replica. */
static int t_stream_replica_dies(void) {
  init_or_die();
  rd_pool *p = make_pool(1, 1, 2, 50, 60000);
  rd_ref s = submit_stream(p, 3, 10, 0, 3, 0);
  rd_ref it;
  for (long i = 0; i < 3; i++) {
    CHECK_EQ(rd_stream_next(s, &it, 30000), 0);
    CHECK_EQ(take_item(it).index, i);
  }
  CHECK_EQ(rd_stream_next(s, &it, 30000), RD_EACTOR_DIED);
  rd_ref_release(s);
  CHECK_EQ(rd_pool_submit_stream(p, Replica_count_to, RD_NO_ARGS, -2, 0, &it), RD_EINVAL);
  reply r = get_reply(submit_long(p, Replica_work, 0));
  CHECK_EQ(r.calls, 1);   /* a fresh replica */
  rd_pool_stats st;
  rd_pool_get_stats(p, &st);
  CHECK_EQ(st.replaced, 1);
  CHECK_EQ(st.replicas, 1);
  rd_pool_destroy(p);
  rd_shutdown();
  return 0;
}

static const rd_test_case tests[] = {
    {"grow_short_calls", t_grow_short_calls},
    {"grow_shrink", t_grow_shrink},     {"slow_replica", t_slow_replica}, {"backpressure", t_backpressure},
    {"map_ordered", t_map_ordered},     {"map_unordered", t_map_unordered}, {"map_errors", t_map_errors},
    {"map_stop", t_map_stop},           {"replace", t_replace},           {"resize", t_resize}, {"opts_copied", t_opts_copied},
    {"destroy", t_destroy},             {"bad_options", t_bad_options},
    {"stream", t_stream},               {"stream_dropped", t_stream_dropped},
    {"stream_replica_dies", t_stream_replica_dies},
};

RD_TEST_MAIN(tests)
