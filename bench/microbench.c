/* bench/microbench.c - libraydist's counterpart of `ray microbenchmark`.
 *
 * Prints one line per metric in Ray's shape ("name per second MEAN +- SD"),
 * each the mean of several timed trials after a warm-up, plus the machine's
 * single-thread memcpy bandwidth measured in the same run as the reference
 * for put bandwidth.  A benchmark, not a test: it checks nothing.
 *   microbench [--duration S] [--trials N] [--filter SUBSTR] [--json FILE] */
#include <raydist.h>

#include <pthread.h>
#include <unistd.h>

#define HARNESS_BENCH_ACTOR   /* the Bench actor class and actor_batch */
#include "harness.h"

RD_REMOTE(noop) { return rd_return_bytes(call, 0, "", 0); }

/* Wait for r, then drop the view and the ref. */
/* Reads argument 0, a value resolved before the task ran. */
RD_REMOTE(read_arg) {
  rd_buf b;
  if (rd_arg(call, 0, &b) != 0) return rd_call_fail(call, "no argument");
  return rd_return_bytes(call, 0, "", 0);
}

/* Reads argument 0, a borrowed ref: one round trip to the caller. */
RD_REMOTE(read_borrowed) {
  rd_ref r;
  if (rd_call_arg_ref(call, 0, &r) != 0) return rd_call_fail(call, "no borrowed argument");
  rd_buf b;
  int e = rd_get(&r, 1, &b, RD_TIMEOUT_INF);
  if (e == 0) rd_buf_release(&b);
  rd_ref_release(r);
  return e ? rd_call_fail(call, "rd_get: %s", rd_err_name(e)) : rd_return_bytes(call, 0, "", 0);
}

/* ------------------------------------------------------------- actors */

static rd_actor make_actor(int concurrency) {
  rd_actor_opts o;
  rd_actor_opts_init(&o);
  o.max_concurrency = concurrency;
  rd_actor a;
  OK(rd_actor_create(Bench, RD_NO_ARGS, &o, &a));
  return a;
}

/* args: seconds, with_arg (long); a client with its own actor (n:n) */
RD_REMOTE(client_actor_calls) {
  rd_buf a, w;
  if (rd_arg(call, 0, &a) || rd_arg(call, 1, &w)) return rd_call_fail(call, "args");
  double secs;
  long with_arg;
  memcpy(&secs, a.data, sizeof(secs));
  memcpy(&with_arg, w.data, sizeof(with_arg));
  rd_actor act = make_actor(1);
  rd_ref argref;
  long zero = 0;
  if (with_arg) OK(rd_put(&zero, sizeof(zero), &argref));
  actor_batch(&act, 1, 100, with_arg ? &argref : NULL);   /* warm: constructor done */
  long ops = 0;
  double t0 = now();
  while (now() - t0 < secs) {
    actor_batch(&act, 1, 1000, with_arg ? &argref : NULL);
    ops += 1000;
  }
  if (with_arg) rd_ref_release(argref);
  OK(rd_actor_kill(act, 1));
  return rd_return_bytes(call, 0, &ops, sizeof(ops));
}

/* ---- client tasks for the multi-client metrics (they hold no CPU) ---- */

static void async_batch(int n) {
  static rd_ref refs[1000];
  for (int i = 0; i < n; i++) OK(rd_submit(noop, RD_NO_ARGS, NULL, &refs[i]));
  static rd_buf out[1000];
  OK(rd_get(refs, (size_t)n, out, RD_TIMEOUT_INF));
  for (int i = 0; i < n; i++) {
    rd_buf_release(&out[i]);
    rd_ref_release(refs[i]);
  }
}

/* args: seconds (double); returns the number of operations done */
RD_REMOTE(client_tasks_async) {
  rd_buf a;
  if (rd_arg(call, 0, &a)) return rd_call_fail(call, "args");
  double secs;
  memcpy(&secs, a.data, sizeof(secs));
  long ops = 0;
  double t0 = now();
  while (now() - t0 < secs) {
    async_batch(1000);
    ops += 1000;
  }
  return rd_return_bytes(call, 0, &ops, sizeof(ops));
}

RD_REMOTE(client_put_calls) {
  rd_buf a;
  if (rd_arg(call, 0, &a)) return rd_call_fail(call, "args");
  double secs;
  memcpy(&secs, a.data, sizeof(secs));
  long ops = 0, v = 0;
  double t0 = now();
  while (now() - t0 < secs) {
    for (int i = 0; i < 1000; i++) {
      rd_ref r;
      OK(rd_put(&v, sizeof(v), &r));
      rd_ref_release(r);
    }
    ops += 1000;
  }
  return rd_return_bytes(call, 0, &ops, sizeof(ops));
}

RD_REMOTE(client_put_gigabytes) {
  rd_buf a;
  if (rd_arg(call, 0, &a)) return rd_call_fail(call, "args");
  double secs;
  memcpy(&secs, a.data, sizeof(secs));
  size_t n = 100u << 20;
  void *buf = malloc(n);
  memset(buf, 1, n);
  long bytes = 0;
  double t0 = now();
  while (now() - t0 < secs) {
    rd_ref r;
    OK(rd_put(buf, n, &r));
    rd_ref_release(r);
    bytes += (long)n;
  }
  free(buf);
  return rd_return_bytes(call, 0, &bytes, sizeof(bytes));
}

/* ------------------------------------------------------------ harness */

static double lat_samples[2000000];

static double t_tasks_sync(void) {
  long ops = 0;
  double t0 = now(), t;
  while ((t = now()) - t0 < g_duration) {
    rd_ref r;
    OK(rd_submit(noop, RD_NO_ARGS, NULL, &r));
    get_and_drop(r);
    if (ops < 2000000) lat_samples[ops] = now() - t;
    ops++;
  }
  return ops / (now() - t0);
}

/* Tasks that read a small put passed by value (rd_arg_ref) or borrowed
 * (rd_arg_borrow), one at a time or 1000 in flight: the difference is what
 * resolving a borrowed ref through the caller costs. */
static rd_ref g_small;

static rd_value small_arg(int borrowed) { return borrowed ? rd_arg_borrow(g_small) : rd_arg_ref(g_small); }

static double ref_tasks_sync(int borrowed) {
  long ops = 0;
  double t0 = now();
  while (now() - t0 < g_duration) {
    rd_ref r;
    OK(rd_submit(borrowed ? read_borrowed : read_arg, RD_ARGS(small_arg(borrowed)), NULL, &r));
    get_and_drop(r);
    ops++;
  }
  return ops / (now() - t0);
}

static double ref_tasks_async(int borrowed) {
  static rd_ref refs[1000];
  static rd_buf out[1000];
  long ops = 0;
  double t0 = now();
  while (now() - t0 < g_duration) {
    for (int i = 0; i < 1000; i++)
      OK(rd_submit(borrowed ? read_borrowed : read_arg, RD_ARGS(small_arg(borrowed)), NULL, &refs[i]));
    OK(rd_get(refs, 1000, out, RD_TIMEOUT_INF));
    for (int i = 0; i < 1000; i++) {
      rd_buf_release(&out[i]);
      rd_ref_release(refs[i]);
    }
    ops += 1000;
  }
  return ops / (now() - t0);
}

static double t_ref_arg_sync(void) { return ref_tasks_sync(0); }
static double t_borrowed_sync(void) { return ref_tasks_sync(1); }
static double t_ref_arg_async(void) { return ref_tasks_async(0); }
static double t_borrowed_async(void) { return ref_tasks_async(1); }

static double t_tasks_async(void) {
  long ops = 0;
  double t0 = now();
  while (now() - t0 < g_duration) {
    async_batch(1000);
    ops += 1000;
  }
  return ops / (now() - t0);
}

/* Tasks in flight together, each of a scheduling class of its own (a label
 * selector that matches every node: "bench=!cN"), so each needs a lease of
 * its own: what a driver that gives every task its own selector, env set or
 * resources pays.  The selectors go on from one batch to the next. */
static double t_tasks_distinct_classes(void) {
  enum { BATCH = 500 };
  static long next;
  static char sel[BATCH][32];
  rd_ref r[BATCH];
  long ops = 0;
  double t0 = now();
  while (now() - t0 < g_duration) {
    for (int i = 0; i < BATCH; i++) {
      rd_task_opts o;
      rd_task_opts_init(&o);
      snprintf(sel[i], sizeof(sel[i]), "bench=!c%ld", next++);
      o.label_selector = sel[i];
      OK(rd_submit(noop, RD_NO_ARGS, &o, &r[i]));
    }
    for (int i = 0; i < BATCH; i++) get_and_drop(r[i]);
    ops += BATCH;
  }
  return ops / (now() - t0);
}

/* Wait for n client tasks that each return a count (a long); their sum. */
static long sum_counts(rd_ref *refs, int n) {
  long total = 0;
  for (int i = 0; i < n; i++) {
    rd_buf b;
    OK(rd_get(&refs[i], 1, &b, RD_TIMEOUT_INF));
    long v;
    memcpy(&v, b.data, sizeof(v));
    total += v;
    rd_buf_release(&b);
    rd_ref_release(refs[i]);
  }
  return total;
}

static double multi_client(rd_function *fn, int nclients) {
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.num_cpus = 0;
  rd_ref refs[8];
  double secs = g_duration;
  double t0 = now();
  for (int i = 0; i < nclients; i++) OK(rd_submit(fn, RD_ARGS(rd_arg_bytes(&secs, sizeof(secs))), &o, &refs[i]));
  return sum_counts(refs, nclients) / (now() - t0);
}

static double t_multi_tasks_async(void) { return multi_client(client_tasks_async, 2); }
static double t_multi_put_calls(void) { return multi_client(client_put_calls, 2); }
static double t_multi_put_gb(void) { return multi_client(client_put_gigabytes, 2) / 1e9; }

static rd_actor g_actor, g_actor_conc, g_actors[4];

static double t_actor_sync(void) { return actor_round_trips(g_actor, Bench_noop); }

static double t_actor_async(void) { return actor_async(&g_actor, 1); }

/* 1_1_actor_calls_async once this process has made 500 other actors,
 * called each once and killed it (made at the first run, the warm-up): a
 * caller's records of actors it is done with must not slow its calls
 * (kept in a list walked on every call, 2,000 of them cut this rate 5x). */
static double t_actor_async_after_killed(void) {
  static int made;
  if (!made) {
    for (; made < 500; made++) {
      rd_actor a = make_actor(1);
      rd_ref r;
      OK(rd_actor_call(a, Bench_noop, RD_NO_ARGS, NULL, &r));
      get_and_drop(r);
      OK(rd_actor_kill(a, 1));
    }
    sleep(2);   /* the node reaps the processes and starts its spare workers again meanwhile */
  }
  return actor_async(&g_actor, 1);
}
/* Calls to one actor while 500 others live, idle: each called once
 * (connected), or never called (handles only).  The caller's pump must not
 * pay for actors it is not calling. */
static rd_actor g_idle[500];
static double t_actor_async_beside_idle(int called) {
  static int made;
  for (; made < 500; made++) g_idle[made] = make_actor(1);
  static int calls_done;
  if (called && !calls_done) {
    static rd_ref r[500];
    for (int i = 0; i < 500; i++) OK(rd_actor_call(g_idle[i], Bench_noop, RD_NO_ARGS, NULL, &r[i]));
    for (int i = 0; i < 500; i++) get_and_drop(r[i]);
    calls_done = 1;
  }
  return actor_async(&g_actor, 1);
}
static double t_actor_async_beside_uncalled(void) { return t_actor_async_beside_idle(0); }
static double t_actor_async_beside_connected(void) { return t_actor_async_beside_idle(1); }
static double t_actor_concurrent(void) { return actor_async(&g_actor_conc, 1); }
static double t_1_n_actor_async(void) { return actor_async(g_actors, 4); }

static double n_n_actors(long with_arg) {
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.num_cpus = 0;
  enum { NC = 2 };
  rd_ref refs[NC];
  double secs = g_duration;
  double t0 = now();
  for (int i = 0; i < NC; i++)
    OK(rd_submit(client_actor_calls, RD_ARGS(rd_arg_bytes(&secs, sizeof(secs)), rd_arg_bytes(&with_arg, sizeof(with_arg))),
                 &o, &refs[i]));
  return sum_counts(refs, NC) / (now() - t0);
}

static double t_n_n_actor_async(void) { return n_n_actors(0); }
static double t_n_n_actor_with_arg(void) { return n_n_actors(1); }

/* Create 200 actors and make one call on each; actors ready per second. */
static double t_actor_creation(void) {
  enum { NA = 200 };
  static rd_actor a[NA];
  static rd_ref refs[NA];
  static rd_buf out[NA];
  double t0 = now();
  for (int i = 0; i < NA; i++) a[i] = make_actor(1);
  for (int i = 0; i < NA; i++) OK(rd_actor_call(a[i], Bench_noop, RD_NO_ARGS, NULL, &refs[i]));
  OK(rd_get(refs, NA, out, RD_TIMEOUT_INF));
  double dt = now() - t0;
  for (int i = 0; i < NA; i++) {
    rd_buf_release(&out[i]);
    rd_ref_release(refs[i]);
    OK(rd_actor_kill(a[i], 1));
  }
  return NA / dt;
}

/* Ray's placement_group_create_removal: 100 groups of one small bundle
 * (a custom resource, as ray_perf.py does), each waited for, then all
 * removed; groups per second. */
static double t_pg_create_removal(void) {
  enum { NPG = 100 };
  static rd_pg pg[NPG];
  rd_bundle b = {.resources = "custom=0.001"};
  double t0 = now();
  for (int i = 0; i < NPG; i++) OK(rd_pg_create(&b, 1, RD_PG_PACK, NULL, &pg[i]));
  for (int i = 0; i < NPG; i++) OK(rd_pg_wait(pg[i], RD_TIMEOUT_INF));
  for (int i = 0; i < NPG; i++) OK(rd_pg_remove(pg[i]));
  return NPG / (now() - t0);
}

/* A group waiting for room that another group holds: the holder is
 * removed and the waiter is reserved (rd_pg_wait returns); then roles swap.
 * Handovers per second: the node reserves a waiting group when room comes
 * back, not at its next periodic retry. */
static double t_pg_handover(void) {
  enum { N = 20 };
  rd_bundle all = {.resources = "custom=100"};
  rd_pg held, waiting;
  OK(rd_pg_create(&all, 1, RD_PG_PACK, NULL, &held));
  OK(rd_pg_wait(held, RD_TIMEOUT_INF));
  double busy = 0;
  for (int i = 0; i < N; i++) {
    OK(rd_pg_create(&all, 1, RD_PG_PACK, NULL, &waiting));
    rd_pg_info in;
    OK(rd_pg_info_get(waiting, &in));
    if (in.state != RD_PG_STATE_PENDING) DIE("placement_group_handover: the second group did not wait");
    double t0 = now();
    OK(rd_pg_remove(held));
    OK(rd_pg_wait(waiting, RD_TIMEOUT_INF));
    busy += now() - t0;
    held = waiting;
  }
  OK(rd_pg_remove(held));
  return N / busy;
}

static double t_put_calls(void) {
  long ops = 0, v = 0;
  double t0 = now();
  while (now() - t0 < g_duration) {
    for (int i = 0; i < 1000; i++) {
      rd_ref r;
      OK(rd_put(&v, sizeof(v), &r));
      rd_ref_release(r);
    }
    ops += 1000;
  }
  return ops / (now() - t0);
}

/* Application metric updates (rd_metric_inc) with tags, one thread or
 * two, and a histogram's rd_metric_observe without. */
static rd_metric *g_mcount, *g_mhist;
static double metric_incs(void) {
  long ops = 0;
  double t0 = now();
  while (now() - t0 < g_duration) {
    for (int i = 0; i < 1000; i++) OK(rd_metric_inc(g_mcount, 1, i & 1 ? "route=a,code=200" : "route=b,code=200"));
    ops += 1000;
  }
  return ops / (now() - t0);
}
static void *metric_incs_thread(void *out) {
  *(double *)out = metric_incs();
  return NULL;
}
static double t_metric_inc(void) { return metric_incs(); }
static double t_metric_inc_2_threads(void) {
  pthread_t th;
  double other = 0;
  OK(pthread_create(&th, NULL, metric_incs_thread, &other));
  double mine = metric_incs();
  pthread_join(th, NULL);
  return mine + other;
}
static double t_metric_observe(void) {
  long ops = 0;
  double t0 = now();
  while (now() - t0 < g_duration) {
    for (int i = 0; i < 1000; i++) OK(rd_metric_observe(g_mhist, (i % 7) * 0.3, NULL));
    ops += 1000;
  }
  return ops / (now() - t0);
}

static double t_get_calls(void) {
  long v = 7;
  rd_ref r;
  OK(rd_put(&v, sizeof(v), &r));
  long ops = 0;
  double t0 = now();
  while (now() - t0 < g_duration) {
    for (int i = 0; i < 1000; i++) {
      rd_buf b;
      OK(rd_get(&r, 1, &b, RD_TIMEOUT_INF));
      rd_buf_release(&b);
    }
    ops += 1000;
  }
  rd_ref_release(r);
  return ops / (now() - t0);
}

static void *g_big;
static size_t g_big_n = 100u << 20;

static double t_put_gigabytes(void) {
  long bytes = 0;
  double t0 = now();
  while (now() - t0 < g_duration) {
    for (int i = 0; i < 8; i++) {   /* 800 MiB per round */
      rd_ref r;
      OK(rd_put(g_big, g_big_n, &r));
      rd_ref_release(r);
      bytes += (long)g_big_n;
    }
  }
  return bytes / (now() - t0) / 1e9;
}

static double t_memcpy(void) {
  void *dst = malloc(g_big_n);
  memset(dst, 0, g_big_n);
  long bytes = 0;
  double t0 = now();
  while (now() - t0 < g_duration) {
    memcpy(dst, g_big, g_big_n);
    bytes += (long)g_big_n;
  }
  double r = bytes / (now() - t0) / 1e9;
  ((volatile char *)dst)[0] = ((char *)dst)[g_big_n - 1];
  free(dst);
  return r;
}

/* Submit 100k no-op tasks, then wait for all with one call (rd_get, or
 * rd_wait then rd_get): tasks per second.  The shape of a batch job that
 * submits a large slice of its items before collecting them. */
static double tasks_100k(int wait_first) {
  enum { N = 100000 };
  static rd_ref refs[N];
  static rd_buf bufs[N];
  long ops = 0;
  double t0 = now();
  while (now() - t0 < g_duration) {
    for (int i = 0; i < N; i++) OK(rd_submit(noop, RD_NO_ARGS, NULL, &refs[i]));
    if (wait_first && rd_wait(refs, N, N, RD_TIMEOUT_INF, NULL) != N) DIE("wait");
    OK(rd_get(refs, N, bufs, RD_TIMEOUT_INF));
    for (int i = 0; i < N; i++) {
      rd_buf_release(&bufs[i]);
      rd_ref_release(refs[i]);
    }
    ops += N;
  }
  return ops / (now() - t0);
}

/* A streaming task yields 8-byte items without end; the driver takes them
 * one by one (rd_stream_next, rd_get, release) for the duration, then
 * cancels it: items per second through one stream. */
RD_REMOTE(stream_forever) {
  for (long i = 0;; i++) {
    int r = rd_yield(call, &i, sizeof(i));
    if (r == RD_ECANCELED) return 0;
    if (r != 0) return r;
  }
}

/* Submit fn(args) as a streaming task with this window, take and get its
 * items for the duration, then cancel it.  Items per second, checking that
 * item i is the long i; or with bytes, GB/s. */
static double stream_measure(const rd_function *fn, const rd_value *args, size_t nargs, int window, int bytes) {
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.num_returns = RD_STREAMING;
  o.stream_window = window;
  rd_ref s, it;
  OK(rd_submit(fn, args, nargs, &o, &s));
  long ops = 0, total = 0;
  double t0 = now();
  while (now() - t0 < g_duration) {
    OK(rd_stream_next(s, &it, RD_TIMEOUT_INF));
    rd_buf b;
    OK(rd_get(&it, 1, &b, RD_TIMEOUT_INF));
    if (!bytes && (b.size != sizeof(long) || *(const long *)b.data != ops)) DIE("stream item %ld out of order", ops);
    total += (long)b.size;
    rd_buf_release(&b);
    rd_ref_release(it);
    ops++;
  }
  double rate = (bytes ? total / 1e9 : ops) / (now() - t0);
  OK(rd_cancel(s, 0));
  while (rd_stream_next(s, &it, RD_TIMEOUT_INF) == 0) rd_ref_release(it);
  rd_ref_release(s);
  return rate;
}

static double stream_items(int window) { return stream_measure(stream_forever, RD_NO_ARGS, window, 0); }

/* 8 MiB items without end, copied in by rd_yield (in_place 0) or written
 * in place (rd_yield_alloc + rd_yield_commit); the driver takes and gets
 * each: GB/s through one stream. */
RD_REMOTE(stream_big_forever) {
  rd_buf a;
  long in_place = 0;
  if (rd_arg(call, 0, &a) == 0 && a.size == sizeof(in_place)) memcpy(&in_place, a.data, sizeof(in_place));
  size_t n = 8u << 20;
  unsigned char *src = in_place ? NULL : malloc(n);
  if (src) memset(src, 5, n);
  for (;;) {
    int r;
    if (in_place) {
      unsigned char *p = rd_yield_alloc(call, n);
      if (!p) break;
      memset(p, 5, n);   /* the producer writes its item: once, in place */
      r = rd_yield_commit(call);
    } else {
      memset(src, 5, n);   /* the same write, into its own buffer, then copied */
      r = rd_yield(call, src, n);
    }
    if (r != 0) break;
  }
  free(src);
  return 0;
}

static double stream_gb(long in_place) {
  return stream_measure(stream_big_forever, RD_ARGS(rd_arg_bytes(&in_place, sizeof(in_place))), 4, 1);
}

static double t_stream_gb(void) { return stream_gb(0); }
static double t_stream_gb_in_place(void) { return stream_gb(1); }

static double t_stream(void) { return stream_items(0); }
static double t_stream_unlimited(void) { return stream_items(-1); }

static double t_get_100k(void) { return tasks_100k(0); }
static double t_wait_100k(void) { return tasks_100k(1); }

static double t_wait_1k(void) {
  long ops = 0;
  static rd_ref refs[1000];
  double t0 = now();
  while (now() - t0 < g_duration) {
    for (int i = 0; i < 1000; i++) OK(rd_submit(noop, RD_NO_ARGS, NULL, &refs[i]));
    if (rd_wait(refs, 1000, 1000, RD_TIMEOUT_INF, NULL) != 1000) DIE("wait");
    for (int i = 0; i < 1000; i++) rd_ref_release(refs[i]);
    ops++;
  }
  return ops / (now() - t0);
}

/* An inference service's loop: W tasks in flight, each completion taken
 * as it comes and replaced by a new task.  Tasks completed per second. */
enum { AS_COMPLETED_MAX = 4096 };

/* ... with rd_wait (Ray's ray.wait(pending, num_returns=1) loop), taking
 * every ready one of each wait. */
static double as_completed_wait(int w) {
  static rd_ref refs[AS_COMPLETED_MAX];
  static uint8_t rdy[AS_COMPLETED_MAX];
  for (int i = 0; i < w; i++) OK(rd_submit(noop, RD_NO_ARGS, NULL, &refs[i]));
  long ops = 0;
  double t0 = now();
  while (now() - t0 < g_duration) {
    if (rd_wait(refs, (size_t)w, 1, RD_TIMEOUT_INF, rdy) < 1) DIE("wait");
    for (int i = 0; i < w; i++) {
      if (!rdy[i]) continue;
      rd_ref_release(refs[i]);
      OK(rd_submit(noop, RD_NO_ARGS, NULL, &refs[i]));
      ops++;
    }
  }
  double dt = now() - t0;
  if (rd_wait(refs, (size_t)w, (size_t)w, RD_TIMEOUT_INF, NULL) != w) DIE("wait");
  for (int i = 0; i < w; i++) rd_ref_release(refs[i]);
  return ops / dt;
}

/* ... with a completion queue (rd_cq_take), up to 256 events a take. */
static double as_completed_cq(int w) {
  rd_cq *cq;
  OK(rd_cq_create(&cq));
  rd_ref r;
  for (int i = 0; i < w; i++) {
    OK(rd_submit(noop, RD_NO_ARGS, NULL, &r));
    OK(rd_cq_add(cq, r, (uint64_t)i));
    rd_ref_release(r);
  }
  static rd_cq_event ev[256];
  long ops = 0;
  double t0 = now();
  while (now() - t0 < g_duration) {
    int k = rd_cq_take(cq, ev, 256, RD_TIMEOUT_INF);
    if (k < 1) DIE("rd_cq_take: %s", rd_err_name(k));
    for (int i = 0; i < k; i++) {
      rd_ref_release(ev[i].ref);
      OK(rd_submit(noop, RD_NO_ARGS, NULL, &r));
      OK(rd_cq_add(cq, r, ev[i].tag));
      rd_ref_release(r);
    }
    ops += k;
  }
  double dt = now() - t0;
  int k;
  while ((k = rd_cq_take(cq, ev, 256, RD_TIMEOUT_INF)) > 0)
    for (int i = 0; i < k; i++) rd_ref_release(ev[i].ref);
  rd_cq_destroy(cq);
  return ops / dt;
}

static double t_as_completed_wait(void) { return as_completed_wait(256); }
static double t_as_completed_cq(void) { return as_completed_cq(256); }
static double t_as_completed_wait_4k(void) { return as_completed_wait(4096); }
static double t_as_completed_cq_4k(void) { return as_completed_cq(4096); }

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  harness_args(argc, argv);
  rd_config cfg;
  rd_config_init(&cfg);
  cfg.object_store_bytes = 2ull << 30;
  cfg.custom_resources = "custom=100";   /* for the placement groups, as ray_perf.py */
  int r = rd_init(&cfg);
  if (r != 0) DIE("rd_init: %s", rd_strerror(r));
  g_big = malloc(g_big_n);
  memset(g_big, 3, g_big_n);
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  printf("# libraydist microbenchmark: %ld CPUs, %d trials of %.1f s after a warm-up\n", ncpu, g_trials, g_duration);
  sleep(1);   /* let the store's background pre-fault finish before put figures */
  report("memcpy_gigabytes_single_thread", "GB/s", t_memcpy);
  report("single_client_tasks_sync", "", t_tasks_sync);
  report("single_client_tasks_async", "", t_tasks_async);
  report("multi_client_tasks_async", "", t_multi_tasks_async);
  report("single_client_tasks_distinct_classes", "(500 in flight, each with a label selector of its own)",
         t_tasks_distinct_classes);
  long small = 42;
  OK(rd_put(&small, sizeof(small), &g_small));
  report("single_client_tasks_ref_arg_sync", "(8-byte put by value)", t_ref_arg_sync);
  report("single_client_tasks_borrowed_sync", "(the same put borrowed, read in the task)", t_borrowed_sync);
  report("single_client_tasks_ref_arg_async", "(8-byte put by value)", t_ref_arg_async);
  report("single_client_tasks_borrowed_async", "(the same put borrowed, read in the task)", t_borrowed_async);
  report("single_client_put_calls", "", t_put_calls);
  report("multi_client_put_calls", "", t_multi_put_calls);
  report("single_client_get_calls", "", t_get_calls);
  static const double mb[8] = {0.1, 0.2, 0.5, 1, 1.5, 2, 5, 10};
  OK(rd_metric_counter("bench_requests_total", "microbench", &g_mcount));
  OK(rd_metric_histogram("bench_latency_seconds", "microbench", mb, 8, &g_mhist));
  report("app_metric_inc", "(rd_metric_inc, two tags)", t_metric_inc);
  report("app_metric_inc_2_threads", "(the same from two threads)", t_metric_inc_2_threads);
  report("app_metric_observe", "(rd_metric_observe, 8 buckets, no tags)", t_metric_observe);
  report("single_client_put_gigabytes", "GB/s", t_put_gigabytes);
  report("multi_client_put_gigabytes", "GB/s", t_multi_put_gb);
  report("single_client_wait_1k_refs", "", t_wait_1k);
  report("single_client_tasks_as_completed_wait", "(256 in flight, each replaced once rd_wait sees it)",
         t_as_completed_wait);
  report("single_client_tasks_as_completed_cq", "(the same through a completion queue: rd_cq_take)",
         t_as_completed_cq);
  report("single_client_tasks_as_completed_wait_4k", "(4096 in flight, rd_wait)", t_as_completed_wait_4k);
  report("single_client_tasks_as_completed_cq_4k", "(4096 in flight, rd_cq_take)", t_as_completed_cq_4k);
  report("single_client_tasks_100k_get", "(100k tasks, then one rd_get)", t_get_100k);
  report("single_client_tasks_100k_wait_get", "(100k tasks, one rd_wait for all, one rd_get)", t_wait_100k);
  report("single_client_stream_items", "(8-byte items of one streaming task, window 64)", t_stream);
  report("single_client_stream_items_unlimited", "(the same, stream_window -1)", t_stream_unlimited);
  report("single_client_stream_gigabytes", "GB/s (8 MiB items written, copied in by rd_yield)", t_stream_gb);
  report("single_client_stream_gigabytes_in_place", "GB/s (8 MiB items written in place: rd_yield_alloc)",
         t_stream_gb_in_place);
  if (!g_filter || strstr(g_filter, "actor")) {
    g_actor = make_actor(1);
    g_actor_conc = make_actor(16);
    for (int i = 0; i < 4; i++) g_actors[i] = make_actor(1);
  }
  report("1_1_actor_calls_sync", "", t_actor_sync);
  report("1_1_actor_calls_async", "", t_actor_async);
  report("1_1_actor_calls_concurrent", "", t_actor_concurrent);
  report("1_n_actor_calls_async", "", t_1_n_actor_async);
  report("n_n_actor_calls_async", "", t_n_n_actor_async);
  report("n_n_actor_calls_with_arg_async", "", t_n_n_actor_with_arg);
  report("actor_creation_per_second", "(200 actors, one call each)", t_actor_creation);
  report("placement_group_create_removal", "(100 groups of 1 bundle)", t_pg_create_removal);
  report("placement_group_handover", "(remove a group, the one waiting for its room reserved)", t_pg_handover);
  report("1_1_actor_calls_async_after_500_killed", "(500 other actors made, called and killed first)",
         t_actor_async_after_killed);
  report("1_1_actor_calls_async_beside_500_uncalled", "(500 other actors alive, never called)",
         t_actor_async_beside_uncalled);
  report("1_1_actor_calls_async_beside_500_connected", "(the same 500, each called once, idle)",
         t_actor_async_beside_connected);
  if (selected("1_1_actor_calls_sync")) {
    long ops = 0;
    double t0 = now();
    while (now() - t0 < g_duration && ops < 2000000) {
      double t = now();
      rd_ref rr;
      OK(rd_actor_call(g_actor, Bench_noop, RD_NO_ARGS, NULL, &rr));
      get_and_drop(rr);
      lat_samples[ops++] = now() - t;
    }
    qsort(lat_samples, (size_t)ops, sizeof(double), cmp_d);
    printf("1_1_actor_calls_sync latency p50 %.1f us p99 %.1f us (%ld samples)\n", lat_samples[ops / 2] * 1e6,
           lat_samples[(long)(ops * 0.99)] * 1e6, ops);
  }
  if (selected("single_client_tasks_sync")) {
    /* latency distribution of one more trial */
    long ops = 0;
    double t0 = now();
    while (now() - t0 < g_duration && ops < 2000000) {
      double t = now();
      rd_ref rr;
      OK(rd_submit(noop, RD_NO_ARGS, NULL, &rr));
      get_and_drop(rr);
      lat_samples[ops++] = now() - t;
    }
    qsort(lat_samples, (size_t)ops, sizeof(double), cmp_d);
    printf("single_client_tasks_sync latency p50 %.1f us p99 %.1f us (%ld samples)\n", lat_samples[ops / 2] * 1e6,
           lat_samples[(long)(ops * 0.99)] * 1e6, ops);
  }
  harness_done();
  free(g_big);
  rd_shutdown();
  return 0;
}
