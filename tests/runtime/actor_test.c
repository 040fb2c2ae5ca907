/* tests/runtime/actor_test.c - actors through the public API, in real worker
 * processes: ordering, state, callers, names, kill/restart, the restart
 * budget, retried calls, fractional GPUs, concurrency and bad input.
 * `actor_test NAME` runs one test; the binary is re-executed as workers. */
#include <raydist.h>

#include <fcntl.h>
#include <signal.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../check.h"
#include "../memhog.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static long get_long_err(rd_ref r, int *err, char *msg, size_t msglen) {
  rd_buf b;
  *err = rd_get(&r, 1, &b, 60000);
  long v = 0;
  if (*err == 0 && b.size == sizeof(long)) memcpy(&v, b.data, sizeof(v));
  if (*err != 0 && msg) snprintf(msg, msglen, "%.*s", (int)b.size, (const char *)b.data);
  if (*err != RD_ETIMEDOUT) rd_buf_release(&b);
  rd_ref_release(r);
  return v;
}

static long get_long(rd_ref r) {
  int err;
  char msg[512];
  long v = get_long_err(r, &err, msg, sizeof(msg));
  if (err != 0) {
    fprintf(stderr, "get failed: %s: %s\n", rd_err_name(err), msg);
    exit(1);
  }
  return v;
}

/* ------------------------------------------------------------ Counter */

typedef struct counter {
  long value;
} counter;

static int counter_init(rd_call *call, void **state) {
  counter *c = calloc(1, sizeof(*c));
  if (!c) return rd_call_fail(call, "out of memory");
  rd_buf b;
  if (rd_call_nargs(call) > 0 && rd_arg(call, 0, &b) == 0 && b.size == sizeof(long)) memcpy(&c->value, b.data, sizeof(long));
  long init_ms = 0;   /* a second argument: a constructor that takes that long */
  if (rd_call_nargs(call) > 1 && rd_arg(call, 1, &b) == 0 && b.size == sizeof(long)) memcpy(&init_ms, b.data, sizeof(long));
  if (init_ms > 0) usleep((useconds_t)init_ms * 1000);
  *state = c;
  return 0;
}

static void counter_fini(void *state) { free(state); }

RD_ACTOR_CLASS(Counter, counter_init, counter_fini)

RD_ACTOR_METHOD(Counter, incr) {
  counter *c = state;
  c->value++;
  return rd_return_bytes(call, 0, &c->value, sizeof(c->value));
}

RD_ACTOR_METHOD(Counter, get) {
  counter *c = state;
  return rd_return_bytes(call, 0, &c->value, sizeof(c->value));
}

RD_ACTOR_METHOD(Counter, restarts) {
  (void)state;
  long r = rd_call_actor_restarts(call);
  return rd_return_bytes(call, 0, &r, sizeof(r));
}

RD_ACTOR_METHOD(Counter, pid) {
  (void)state;
  long p = getpid();
  return rd_return_bytes(call, 0, &p, sizeof(p));
}

/* Concurrency group "io" (t_concurrency_groups): the value, at once. */
RD_ACTOR_METHOD_IN(Counter, peek_io, "io") {
  counter *c = state;
  long v = __atomic_load_n(&c->value, __ATOMIC_RELAXED);
  return rd_return_bytes(call, 0, &v, sizeof(v));
}

/* Sleeps arg0 ms in group "io"; returns arg0. */
RD_ACTOR_METHOD_IN(Counter, sleep_io, "io") {
  (void)state;
  rd_buf b;
  long ms = 0;
  if (rd_arg(call, 0, &b) == 0 && b.size == sizeof(ms)) memcpy(&ms, b.data, sizeof(ms));
  usleep((useconds_t)ms * 1000);
  return rd_return_bytes(call, 0, &ms, sizeof(ms));
}

/* Crashes the process unless the actor has been restarted already. */
RD_ACTOR_METHOD(Counter, crash_first) {
  counter *c = state;
  if (rd_call_actor_restarts(call) == 0) kill(getpid(), SIGKILL);
  c->value += 100;
  return rd_return_bytes(call, 0, &c->value, sizeof(c->value));
}

/* "<its namespace>:<value of the actor named svc there>", or ":-" when none */
static int ns_report(rd_call *call) {
  char out[300];
  rd_actor svc;
  long v = -1;
  if (rd_actor_get("svc", &svc) == 0) {
    rd_ref r;
    if (rd_actor_call(svc, Counter_get, RD_NO_ARGS, NULL, &r) != 0) return rd_call_fail(call, "call svc");
    rd_buf b;
    if (rd_get(&r, 1, &b, 60000) != 0) return rd_call_fail(call, "get svc");
    memcpy(&v, b.data, sizeof(v));
    rd_buf_release(&b);
    rd_ref_release(r);
  }
  int n = v >= 0 ? snprintf(out, sizeof(out), "%s:%ld", rd_namespace(), v) : snprintf(out, sizeof(out), "%s:-", rd_namespace());
  return rd_return_bytes(call, 0, out, (size_t)n);
}

RD_ACTOR_METHOD(Counter, ns_probe) {
  (void)state;
  return ns_report(call);
}

RD_ACTOR_METHOD(Counter, fail) {
  (void)state;
  return rd_call_fail(call, "method failed on purpose");
}

/* Fails its first two attempts; then counts, and returns the attempt. */
RD_ACTOR_METHOD(Counter, flaky) {
  counter *c = state;
  c->value++;
  long at = rd_call_attempt(call);
  if (at < 2) return rd_call_fail(call, "flaky attempt %ld", at);
  return rd_return_bytes(call, 0, &at, sizeof(at));
}


RD_ACTOR_METHOD(Counter, sleep_ms) {
  (void)state;
  rd_buf b;
  if (rd_arg(call, 0, &b) != 0) return rd_call_fail(call, "args");
  long ms;
  memcpy(&ms, b.data, sizeof(ms));
  usleep((useconds_t)ms * 1000);
  return rd_return_bytes(call, 0, &ms, sizeof(ms));
}

/* Sleeps up to argument 0 ms in steps, stopping early once cancelled. */
RD_ACTOR_METHOD(Counter, until_cancelled) {
  counter *c = state;
  rd_buf b;
  if (rd_arg(call, 0, &b) != 0 || b.size != sizeof(long)) return rd_call_fail(call, "args");
  long ms;
  memcpy(&ms, b.data, sizeof(ms));
  for (long i = 0; i < ms; i++) {
    if (rd_call_cancelled(call)) {
      c->value += 1000;   /* the state shows it stopped early */
      return rd_call_fail(call, "stopped early");
    }
    usleep(1000);
  }
  return rd_return_bytes(call, 0, &ms, sizeof(ms));
}

/* Takes argument 0 (a long) MiB for a while. */
RD_ACTOR_METHOD(Counter, hog) {
  (void)state;
  return hog_fn(call);
}

/* Reports {gpu id, fraction * 10000, visible devices as a number}. */
RD_ACTOR_METHOD(Counter, gpu) {
  (void)state;
  int ids[4];
  double fr[4];
  long out[5] = {-1, 0, -1, 0, -1};   /* id, share, visible, budget, budget in the environment */
  if (rd_call_gpu_ids(call, ids, fr, 4) == 1) {
    out[0] = ids[0];
    out[1] = (long)(fr[0] * 10000 + 0.5);
  }
  const char *v = getenv("CUDA_VISIBLE_DEVICES");
  if (v && *v) out[2] = atol(v);
  out[3] = (long)rd_call_gpu_memory(call);
  v = getenv("RAYDIST_GPU_MEMORY_BYTES");
  if (v && *v) out[4] = atol(v);
  return rd_return_bytes(call, 0, out, sizeof(out));
}

static int bad_init(rd_call *call, void **state) {
  (void)state;
  return rd_call_fail(call, "constructor refuses to start");
}
RD_ACTOR_CLASS(Broken, bad_init, NULL)

/* A 16 MiB result (through the store). */
static int big_result(rd_call *call) {
  size_t n = 16u << 20;
  uint8_t *p = rd_return_alloc(call, 0, n);
  if (!p) return rd_call_fail(call, "no room");
  memset(p, 1, n);
  return 0;
}

/* big_result 300 ms after the call. */
RD_ACTOR_METHOD(Counter, big_later) {
  (void)state;
  usleep(300000);
  return big_result(call);
}

/* big_result once the file named by argument 0 exists (up to 60 s). */
RD_ACTOR_METHOD(Counter, big_when) {
  (void)state;
  rd_buf b;
  char path[256];
  if (rd_arg(call, 0, &b) != 0 || b.size == 0 || b.size >= sizeof(path)) return rd_call_fail(call, "args");
  memcpy(path, b.data, b.size);
  path[b.size] = 0;
  for (int i = 0; i < 6000 && access(path, F_OK) != 0; i++) usleep(10000);
  return big_result(call);
}

/* Calls big_later on the actor it is given (big_when with argument 1 when
 * there is one), then dies before the result. */
RD_REMOTE(call_big_then_die) {
  rd_actor a;
  rd_buf path;
  if (rd_call_arg_actor(call, 0, &a) != 0) return rd_call_fail(call, "args");
  int when = rd_call_nargs(call) > 1 && rd_arg(call, 1, &path) == 0;
  rd_ref r;
  if ((when ? rd_actor_call(a, Counter_big_when, RD_ARGS(rd_arg_bytes(path.data, path.size)), NULL, &r)
            : rd_actor_call(a, Counter_big_later, RD_NO_ARGS, NULL, &r)) != 0)
    return rd_call_fail(call, "call");
  usleep(50000);   /* the call is on its way */
  kill(getpid(), SIGKILL);
  return 0;
}

/* A worker process that runs it once and goes (max_calls 1). */
RD_REMOTE(once) { return rd_return_bytes(call, 0, "", 0); }

/* A task that calls an actor whose handle it got as an argument. */
RD_REMOTE(call_counter_n) {
  rd_actor a;
  rd_buf nb;
  if (rd_call_arg_actor(call, 0, &a) != 0 || rd_arg(call, 1, &nb) != 0) return rd_call_fail(call, "args");
  long n;
  memcpy(&n, nb.data, sizeof(n));
  long last = 0;
  for (long i = 0; i < n; i++) {
    rd_ref r;
    if (rd_actor_call(a, Counter_incr, RD_NO_ARGS, NULL, &r) != 0) return rd_call_fail(call, "call");
    rd_buf b;
    if (rd_get(&r, 1, &b, 30000) != 0) return rd_call_fail(call, "get");
    memcpy(&last, b.data, sizeof(last));
    rd_buf_release(&b);
    rd_ref_release(r);
  }
  return rd_return_bytes(call, 0, &last, sizeof(last));
}

RD_REMOTE(plain_task) {
  long v = 7;
  return rd_return_bytes(call, 0, &v, sizeof(v));
}

static void init_or_die(const rd_config *cfg) {
  int r = rd_init(cfg);
  if (r != 0) {
    fprintf(stderr, "rd_init: %s\n", rd_strerror(r));
    exit(1);
  }
}

/* ------------------------------------------------------------- Leaver */

/* An actor that can end itself (rd_actor_exit); its destructor appends
 * "fini" to the file named by the constructor's argument. */
typedef struct leaver {
  char path[256];
  long n;
} leaver;

static int leaver_init(rd_call *call, void **state) {
  leaver *l = calloc(1, sizeof(*l));
  rd_buf b;
  if (!l || rd_arg(call, 0, &b) != 0 || b.size >= sizeof(l->path)) {
    free(l);
    return rd_call_fail(call, "bad constructor argument");
  }
  memcpy(l->path, b.data, b.size);
  *state = l;
  return 0;
}

static void leaver_fini(void *state) {
  leaver *l = state;
  FILE *f = fopen(l->path, "a");
  if (f) {
    fprintf(f, "fini after %ld\n", l->n);
    fclose(f);
  }
  free(l);
}

RD_ACTOR_CLASS(Leaver, leaver_init, leaver_fini)

RD_ACTOR_METHOD(Leaver, incr) {
  leaver *l = state;
  l->n++;
  return rd_return_bytes(call, 0, &l->n, sizeof(l->n));
}

/* 400 ms, then counts: still running when another executor ends the actor. */
RD_ACTOR_METHOD(Leaver, slow) {
  leaver *l = state;
  usleep(400000);
  long n = __atomic_add_fetch(&l->n, 1, __ATOMIC_SEQ_CST);
  return rd_return_bytes(call, 0, &n, sizeof(n));
}

/* Ends the actor after this call, which still returns (slowly, so that
 * calls queue behind it). */
RD_ACTOR_METHOD(Leaver, bye) {
  leaver *l = state;
  __atomic_add_fetch(&l->n, 1, __ATOMIC_SEQ_CST);
  long r = rd_actor_exit(call);
  usleep(200000);
  return rd_return_bytes(call, 0, &r, sizeof(r));
}

/* rd_actor_exit from a plain task: refused. */
RD_REMOTE(exit_from_task) {
  long r = rd_actor_exit(call);
  return rd_return_bytes(call, 0, &r, sizeof(r));
}

static rd_actor make_counter(long start, const rd_actor_opts *o) {
  rd_actor a;
  CHECK_EQ(rd_actor_create(Counter, RD_ARGS(rd_arg_bytes(&start, sizeof(start))), o, &a), 0);
  return a;
}

/* -------------------------------------------------------------- Relay */

/* Holds a handle to another actor (its constructor's argument); poke
 * calls that actor's incr and returns what it answered. */
static int relay_init(rd_call *call, void **state) {
  rd_actor *t = calloc(1, sizeof(*t));
  if (!t) return rd_call_fail(call, "out of memory");
  if (rd_call_arg_actor(call, 0, t) != 0) {
    free(t);
    return rd_call_fail(call, "expected an actor handle");
  }
  *state = t;
  return 0;
}

RD_ACTOR_CLASS(Relay, relay_init, counter_fini)

RD_ACTOR_METHOD(Relay, poke) {
  rd_actor *t = state;
  rd_ref r;
  int e = rd_actor_call(*t, Counter_incr, RD_NO_ARGS, NULL, &r);
  if (e != 0) return rd_call_fail(call, "call: %s", rd_err_name(e));
  rd_buf b;
  e = rd_get(&r, 1, &b, 60000);
  rd_ref_release(r);
  if (e != 0) return rd_call_fail(call, "get: %s", rd_err_name(e));
  long v = 0;
  if (b.size == sizeof(v)) memcpy(&v, b.data, sizeof(v));
  rd_buf_release(&b);
  return rd_return_bytes(call, 0, &v, sizeof(v));
}

/* ------------------------------------------------------------------ tests */

static int t_order(void) {
  init_or_die(NULL);
  rd_actor a = make_counter(0, NULL);
  enum { N = 10000 };
  static rd_ref refs[N];
  for (int i = 0; i < N; i++) CHECK_EQ(rd_actor_call(a, Counter_incr, RD_NO_ARGS, NULL, &refs[i]), 0);
  static rd_buf out[N];
  CHECK_EQ(rd_get(refs, N, out, 60000), 0);
  for (long i = 0; i < N; i++) {
    long v;
    memcpy(&v, out[i].data, sizeof(v));
    CHECK_EQ(v, i + 1);   /* executed in submission order, state kept */
    rd_buf_release(&out[i]);
    rd_ref_release(refs[i]);
  }
  /* a constructor argument is honoured, and actors are separate processes */
  rd_actor b = make_counter(1000, NULL);
  rd_ref r;
  CHECK_EQ(rd_actor_call(b, Counter_incr, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(get_long(r), 1001);
  rd_ref pa, pb;
  CHECK_EQ(rd_actor_call(a, Counter_pid, RD_NO_ARGS, NULL, &pa), 0);
  CHECK_EQ(rd_actor_call(b, Counter_pid, RD_NO_ARGS, NULL, &pb), 0);
  CHECK(get_long(pa) != get_long(pb));
  rd_shutdown();
  return 0;
}

/* rd_cancel on actor calls: one still queued here never runs; one already
 * sent fails at once with RD_ECANCELED, and the actor drops it if it reads
 * the cancel before starting it, else runs it (its state moves on); a
 * running one that polls rd_call_cancelled stops early; force is refused for
 * actor calls. */
static int t_cancel(void) {
  init_or_die(NULL);
  rd_actor a = make_counter(0, NULL);
  /* not connected yet: the call waits in this process's queue and is dropped */
  rd_ref early;
  CHECK_EQ(rd_actor_call(a, Counter_incr, RD_NO_ARGS, NULL, &early), 0);
  CHECK_EQ(rd_cancel(early, 0), 0);
  rd_buf eb;
  CHECK_EQ(rd_get(&early, 1, &eb, 5000), RD_ECANCELED);
  rd_buf_release(&eb);
  rd_ref first;
  CHECK_EQ(rd_actor_call(a, Counter_incr, RD_NO_ARGS, NULL, &first), 0);
  CHECK_EQ(get_long(first), 1);   /* the dropped call never ran; connected now */
  long ms = 600;
  rd_ref slow, next;
  CHECK_EQ(rd_actor_call(a, Counter_sleep_ms, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms))), NULL, &slow), 0);
  CHECK_EQ(rd_actor_call(a, Counter_incr, RD_NO_ARGS, NULL, &next), 0);
  CHECK_EQ(rd_cancel(next, 1), RD_EINVAL);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  CHECK_EQ(rd_cancel(next, 0), 0);
  rd_buf b;
  CHECK_EQ(rd_get(&next, 1, &b, 5000), RD_ECANCELED);
  rd_buf_release(&b);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  CHECK((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 < 300);
  CHECK_EQ(get_long(slow), 600);
  rd_ref again;
  CHECK_EQ(rd_actor_call(a, Counter_incr, RD_NO_ARGS, NULL, &again), 0);
  /* the cancelled incr, sent already, ran (3) unless the actor read the
   * cancel before starting it (2): it reads its socket only between calls */
  long v = get_long(again);
  printf("the cancelled call sent to the actor %s\n", v == 3 ? "ran" : "was dropped there");
  CHECK(v == 2 || v == 3);
  CHECK_EQ(rd_cancel(again, 0), RD_ENOENT);
  /* a running call that polls rd_call_cancelled stops early */
  long long_ms = 20000;
  rd_ref coop;
  CHECK_EQ(rd_actor_call(a, Counter_until_cancelled, RD_ARGS(rd_arg_bytes(&long_ms, sizeof(long_ms))), NULL, &coop), 0);
  usleep(200000);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  CHECK_EQ(rd_cancel(coop, 0), 0);
  CHECK_EQ(rd_get(&coop, 1, &b, 5000), RD_ECANCELED);
  rd_buf_release(&b);
  CHECK_EQ(rd_actor_call(a, Counter_get, RD_NO_ARGS, NULL, &again), 0);
  CHECK_EQ(get_long(again), v + 1000);   /* it saw the cancel and the actor is free again */
  clock_gettime(CLOCK_MONOTONIC, &t1);
  CHECK((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 < 3000);
  rd_shutdown();
  return 0;
}

static int t_two_callers(void) {
  init_or_die(NULL);
  rd_actor a = make_counter(0, NULL);
  /* a task calls the actor through a handle passed as an argument, while
   * the driver calls it too */
  long n = 300;
  rd_ref t;
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.num_cpus = 0;
  CHECK_EQ(rd_submit(call_counter_n, RD_ARGS(rd_arg_actor(&a), rd_arg_bytes(&n, sizeof(n))), &o, &t), 0);
  long prev = 0;
  for (int i = 0; i < 300; i++) {
    rd_ref r;
    CHECK_EQ(rd_actor_call(a, Counter_incr, RD_NO_ARGS, NULL, &r), 0);
    long v = get_long(r);
    CHECK(v > prev);   /* this caller's calls are ordered */
    prev = v;
  }
  (void)get_long(t);
  rd_ref g;
  CHECK_EQ(rd_actor_call(a, Counter_get, RD_NO_ARGS, NULL, &g), 0);
  CHECK_EQ(get_long(g), 600);
  rd_shutdown();
  return 0;
}

/* More connections than a poll set once held (256): the driver connected
 * to 300 actors and an actor called by all 300 read every one of them,
 * the first made (the last in each list) included. */
static int t_many_connections(void) {
  init_or_die(NULL);
  enum { N = 300 };
  rd_actor target = make_counter(0, NULL);
  static rd_actor relay[N];
  static rd_ref r[N];
  rd_actor_opts o;
  rd_actor_opts_init(&o);   /* num_cpus 0: all of them at once on 2 CPUs */
  for (int i = 0; i < N; i++) CHECK_EQ(rd_actor_create(Relay, RD_ARGS(rd_arg_actor(&target)), &o, &relay[i]), 0);
  for (int i = 0; i < N; i++) CHECK_EQ(rd_actor_call(relay[i], Relay_poke, RD_NO_ARGS, NULL, &r[i]), 0);
  long sum = 0;
  for (int i = 0; i < N; i++) sum += get_long(r[i]);
  CHECK_EQ(sum, (long)N * (N + 1) / 2);   /* each of 1..N once */
  /* every connection open now: the first of each again, then all */
  CHECK_EQ(rd_actor_call(relay[0], Relay_poke, RD_NO_ARGS, NULL, &r[0]), 0);
  CHECK_EQ(get_long(r[0]), N + 1);
  for (int i = 0; i < N; i++) CHECK_EQ(rd_actor_call(relay[i], Relay_poke, RD_NO_ARGS, NULL, &r[i]), 0);
  sum = 0;
  for (int i = 0; i < N; i++) sum += get_long(r[i]);
  CHECK_EQ(sum, (long)N * (N + 1) / 2 + (long)N * (N + 1));   /* N + 2 .. 2N + 1 */
  rd_shutdown();
  return 0;
}

/* The result of a call whose caller died before it came is deleted when it
 * comes: nobody can name it.  late: with 100 other clients gone (workers
 * of max_calls 1) between the caller's death and its result, as in a run
 * that loses workers often: the node judges its own clients by whether
 * they are connected, not by its list of the last ones gone (64 long
 * before: the result was kept for ever). */
static int caller_gone(int late) {
  rd_config cfg;
  rd_config_init(&cfg);
  cfg.object_store_bytes = 64u << 20;
  init_or_die(&cfg);
  rd_actor a = make_counter(0, NULL);
  char path[] = "/tmp/rd_caller_gone.XXXXXX";   /* late: the call answers once it exists */
  if (late) {
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    unlink(path);
  }
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.max_retries = 0;
  rd_ref t;
  if (late) CHECK_EQ(rd_submit(call_big_then_die, RD_ARGS(rd_arg_actor(&a), rd_arg_bytes(path, strlen(path))), &o, &t), 0);
  else CHECK_EQ(rd_submit(call_big_then_die, RD_ARGS(rd_arg_actor(&a)), &o, &t), 0);
  rd_buf b;
  CHECK(rd_get(&t, 1, &b, 30000) != 0);   /* its worker died */
  rd_buf_release(&b);   /* the error message */
  rd_ref_release(t);
  enum { N = 100 };
  if (late) {
    rd_task_opts_init(&o);
    o.max_calls = 1;
    rd_ref q[N];
    for (int i = 0; i < N; i++) CHECK_EQ(rd_submit(once, RD_NO_ARGS, &o, &q[i]), 0);
    rd_buf qb[N];
    CHECK_EQ(rd_get(q, N, qb, 120000), 0);
    for (int i = 0; i < N; i++) {
      rd_buf_release(&qb[i]);
      rd_ref_release(q[i]);
    }
    int fd = open(path, O_CREAT | O_WRONLY, 0600);
    CHECK(fd >= 0);
    close(fd);
  }
  /* one call at a time: this one runs after the big result has come */
  rd_ref r;
  CHECK_EQ(rd_actor_call(a, Counter_incr, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(get_long(r), 1);
  rd_node_info ni;
  for (int i = 0; i < 50; i++) {
    CHECK_EQ(rd_node_info_get(&ni), 0);
    if (ni.store_used == 0) break;
    usleep(20000);
  }
  printf("store after the late result (%d clients gone since its caller): %llu bytes\n", late ? N : 0,
         (unsigned long long)ni.store_used);
  if (late) unlink(path);
  CHECK_EQ(ni.store_used, 0);
  rd_shutdown();
  return 0;
}

static int t_caller_gone(void) { return caller_gone(0); }
static int t_caller_gone_late(void) { return caller_gone(1); }

static int t_named(void) {
  init_or_die(NULL);
  rd_actor_opts o;
  rd_actor_opts_init(&o);
  o.name = "the_counter";
  rd_actor a = make_counter(41, &o);
  rd_actor b;
  CHECK_EQ(rd_actor_get("the_counter", &b), 0);
  CHECK_EQ(b.id, a.id);
  rd_ref r;
  CHECK_EQ(rd_actor_call(b, Counter_incr, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(get_long(r), 42);
  long zero = 0;
  rd_actor c;
  CHECK_EQ(rd_actor_create(Counter, RD_ARGS(rd_arg_bytes(&zero, sizeof(zero))), &o, &c), RD_EEXIST);
  CHECK_EQ(rd_actor_get("nobody", &c), RD_ENOENT);
  /* the name is free again once the actor is dead for good */
  CHECK_EQ(rd_actor_kill(a, 1), 0);
  for (int i = 0; i < 200 && rd_actor_get("the_counter", &c) == 0; i++) usleep(10000);
  CHECK_EQ(rd_actor_get("the_counter", &c), RD_ENOENT);
  CHECK_EQ(rd_actor_create(Counter, RD_ARGS(rd_arg_bytes(&zero, sizeof(zero))), &o, &c), 0);
  rd_shutdown();
  return 0;
}

/* rd_actor_opts.get_if_exists: the live actor of that name, or a new one;
 * threads racing all get the same one; right after that one is killed for
 * good, the next call makes a new one (the name is freed asynchronously). */
typedef struct gie_arg {
  long start;
  rd_actor out;
  int rc;
} gie_arg;

static void *gie_thread(void *p) {
  gie_arg *g = p;
  rd_actor_opts o;
  rd_actor_opts_init(&o);
  o.name = "shared";
  o.get_if_exists = 1;
  g->rc = rd_actor_create(Counter, RD_ARGS(rd_arg_bytes(&g->start, sizeof(g->start))), &o, &g->out);
  return NULL;
}

static int t_get_if_exists(void) {
  init_or_die(NULL);
  rd_actor_opts o;
  rd_actor_opts_init(&o);
  o.get_if_exists = 1;
  rd_actor x;
  CHECK_EQ(rd_actor_create(Counter, RD_NO_ARGS, &o, &x), RD_EINVAL);   /* no name */
  /* eight threads at once: one creates, all get it */
  enum { NT = 8 };
  pthread_t th[NT];
  gie_arg g[NT];
  for (int i = 0; i < NT; i++) {
    g[i].start = 100 * (i + 1);
    CHECK_EQ(pthread_create(&th[i], NULL, gie_thread, &g[i]), 0);
  }
  for (int i = 0; i < NT; i++) CHECK_EQ(pthread_join(th[i], NULL), 0);
  for (int i = 0; i < NT; i++) {
    if (g[i].rc) fprintf(stderr, "thread %d: %s\n", i, rd_err_name(g[i].rc));
    CHECK_EQ(g[i].rc, 0);
    CHECK_EQ(g[i].out.id, g[0].out.id);
  }
  rd_ref r;
  CHECK_EQ(rd_actor_call(g[0].out, Counter_incr, RD_NO_ARGS, NULL, &r), 0);
  long v = get_long(r);
  CHECK(v % 100 == 1 && v >= 101 && v <= 801);   /* one constructor ran, with one thread's start */
  /* again, with other arguments: the same actor, its state kept */
  long zero = 0;
  o.name = "shared";
  CHECK_EQ(rd_actor_create(Counter, RD_ARGS(rd_arg_bytes(&zero, sizeof(zero))), &o, &x), 0);
  CHECK_EQ(x.id, g[0].out.id);
  CHECK_EQ(rd_actor_call(x, Counter_incr, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(get_long(r), v + 1);
  /* killed for good: the next one is new, at once */
  CHECK_EQ(rd_actor_kill(x, 1), 0);
  rd_actor y;
  CHECK_EQ(rd_actor_create(Counter, RD_ARGS(rd_arg_bytes(&zero, sizeof(zero))), &o, &y), 0);
  CHECK(y.id != x.id);
  CHECK_EQ(rd_actor_call(y, Counter_incr, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(get_long(r), 1);
  rd_shutdown();
  return 0;
}

/* A named actor that crashes with no restarts left frees its name for the
 * caller that saw it die: a supervisor re-creates it under the same name at
 * once, and a lookup right after the death never finds the dead one (the
 * caller's socket to the actor closes before the node reads the worker's
 * end; the node reads it when the name is asked for). */
static int t_crash_rename(void) {
  init_or_die(NULL);
  rd_actor_opts o;
  rd_actor_opts_init(&o);
  o.name = "phoenix";
  o.max_restarts = 0;
  rd_actor a = make_counter(0, &o);
  for (int round = 0; round < 20; round++) {
    rd_ref r;
    CHECK_EQ(rd_actor_call(a, Counter_crash_first, RD_NO_ARGS, NULL, &r), 0);
    int err;
    char msg[512];
    (void)get_long_err(r, &err, msg, sizeof(msg));
    CHECK_EQ(err, RD_EACTOR_DIED);
    rd_actor g;
    if (round % 2) {   /* looked up first: gone */
      int e = rd_actor_get("phoenix", &g);
      if (e == 0) fprintf(stderr, "round %d: the dead actor %llu is still found (%llu)\n", round,
                          (unsigned long long)a.id, (unsigned long long)g.id);
      CHECK_EQ(e, RD_ENOENT);
    }
    long start = round;
    int e = rd_actor_create(Counter, RD_ARGS(rd_arg_bytes(&start, sizeof(start))), &o, &a);
    if (e != 0) fprintf(stderr, "round %d: re-creating 'phoenix': %s\n", round, rd_err_name(e));
    CHECK_EQ(e, 0);
    CHECK_EQ(rd_actor_get("phoenix", &g), 0);
    CHECK_EQ(g.id, a.id);
    CHECK_EQ(rd_actor_call(g, Counter_get, RD_NO_ARGS, NULL, &r), 0);
    CHECK_EQ(get_long(r), round);
  }
  rd_shutdown();
  return 0;
}

static int t_restart(void) {
  init_or_die(NULL);
  rd_actor_opts o;
  rd_actor_opts_init(&o);
  o.max_restarts = 1;
  rd_actor a = make_counter(0, &o);
  rd_ref r;
  for (int i = 0; i < 5; i++) {
    CHECK_EQ(rd_actor_call(a, Counter_incr, RD_NO_ARGS, NULL, &r), 0);
    CHECK_EQ(get_long(r), i + 1);
  }
  CHECK_EQ(rd_actor_kill(a, 0), 0);   /* restartable kill: state starts over */
  CHECK_EQ(rd_actor_call(a, Counter_incr, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(get_long(r), 1);
  CHECK_EQ(rd_actor_call(a, Counter_restarts, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(get_long(r), 1);
  /* the budget is spent: the next death is final */
  CHECK_EQ(rd_actor_kill(a, 0), 0);
  int err;
  char msg[512];
  CHECK_EQ(rd_actor_call(a, Counter_incr, RD_NO_ARGS, NULL, &r), 0);
  (void)get_long_err(r, &err, msg, sizeof(msg));
  CHECK_EQ(err, RD_EACTOR_DIED);
  CHECK(strstr(msg, "no restarts left") != NULL || strstr(msg, "killed") != NULL);
  /* every later call fails the same way */
  CHECK_EQ(rd_actor_call(a, Counter_get, RD_NO_ARGS, NULL, &r), 0);
  (void)get_long_err(r, &err, NULL, 0);
  CHECK_EQ(err, RD_EACTOR_DIED);
  /* a crash with restarts left and max_task_retries re-runs the call */
  o.max_task_retries = 1;
  rd_actor b = make_counter(0, &o);
  CHECK_EQ(rd_actor_call(b, Counter_crash_first, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(get_long(r), 100);
  /* without retries the call in flight fails, and the actor lives on */
  o.max_task_retries = 0;
  rd_actor c = make_counter(0, &o);
  CHECK_EQ(rd_actor_call(c, Counter_crash_first, RD_NO_ARGS, NULL, &r), 0);
  (void)get_long_err(r, &err, msg, sizeof(msg));
  CHECK_EQ(err, RD_EACTOR_DIED);
  CHECK(strstr(msg, "crash_first") != NULL);
  CHECK_EQ(rd_actor_call(c, Counter_incr, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(get_long(r), 1);
  rd_shutdown();
  return 0;
}

/* rd_task_opts.retry_failures on actor calls (Ray's retry_exceptions on an
 * actor method): a failed call runs again on the same process, within the
 * actor's max_task_retries; without the flag, or without retries, it fails
 * at once; the last failure says how many runs it had. */
static int t_retry_failures(void) {
  init_or_die(NULL);
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.max_task_retries = 2;
  rd_actor a = make_counter(0, &ao);
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.retry_failures = 1;
  rd_ref r;
  CHECK_EQ(rd_actor_call(a, Counter_flaky, RD_NO_ARGS, &o, &r), 0);
  CHECK_EQ(get_long(r), 2);   /* the third run */
  CHECK_EQ(rd_actor_call(a, Counter_get, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(get_long(r), 3);   /* on the same process: its state saw all three */
  int err;
  char msg[512];
  CHECK_EQ(rd_actor_call(a, Counter_fail, RD_NO_ARGS, &o, &r), 0);
  (void)get_long_err(r, &err, msg, sizeof(msg));
  printf("always failing, 2 retries: %s: %s\n", rd_err_name(err), msg);
  CHECK_EQ(err, RD_ETASK);
  CHECK(strstr(msg, "method failed on purpose (attempt 3 of 3)") != NULL);
  /* without the flag: the first failure is the answer */
  CHECK_EQ(rd_actor_call(a, Counter_flaky, RD_NO_ARGS, NULL, &r), 0);
  (void)get_long_err(r, &err, msg, sizeof(msg));
  CHECK_EQ(err, RD_ETASK);
  CHECK(strstr(msg, "flaky attempt 0") != NULL);
  /* an actor without max_task_retries: the flag alone runs nothing again */
  rd_actor_opts_init(&ao);
  rd_actor b = make_counter(0, &ao);
  CHECK_EQ(rd_actor_call(b, Counter_flaky, RD_NO_ARGS, &o, &r), 0);
  (void)get_long_err(r, &err, msg, sizeof(msg));
  CHECK_EQ(err, RD_ETASK);
  CHECK(strstr(msg, "flaky attempt 0 (attempt 1 of 1)") != NULL);
  /* calls queued behind a retried one all run, and all answer */
  ao.max_task_retries = -1;
  rd_actor c = make_counter(0, &ao);
  rd_ref q[6];
  for (int i = 0; i < 6; i++) CHECK_EQ(rd_actor_call(c, i == 2 ? Counter_flaky : Counter_incr, RD_NO_ARGS, &o, &q[i]), 0);
  CHECK_EQ(get_long(q[2]), 2);
  long sum = 0;
  for (int i = 0; i < 6; i++)
    if (i != 2) sum += get_long(q[i]);
  /* five incrs and three flaky runs counted 8 in some order: the incrs
   * returned five distinct values from 1..8 */
  CHECK(sum >= 1 + 2 + 3 + 4 + 5 && sum <= 4 + 5 + 6 + 7 + 8);
  CHECK_EQ(rd_actor_call(c, Counter_get, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(get_long(r), 8);
  rd_shutdown();
  return 0;
}

/* rd_task_opts.max_task_retries (Ray's per-method max_task_retries): one
 * call's own budget over its actor's, both ways; for a call in flight when
 * the process dies and for retry_failures; bad values refused. */
static int t_call_retries(void) {
  init_or_die(NULL);
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.max_restarts = -1;   /* max_task_retries 0: the actor's calls are not run again */
  rd_actor a = make_counter(0, &ao);
  rd_task_opts o;
  rd_task_opts_init(&o);
  CHECK_EQ(o.max_task_retries, RD_ACTOR_DEFAULT);
  rd_ref r;
  int err;
  char msg[512];
  /* the call's 1 over the actor's 0: re-sent after the restart */
  o.max_task_retries = 1;
  CHECK_EQ(rd_actor_call(a, Counter_crash_first, RD_NO_ARGS, &o, &r), 0);
  CHECK_EQ(get_long(r), 100);
  /* the actor's 0 for a call that says nothing: the death is its answer */
  rd_actor b = make_counter(0, &ao);
  CHECK_EQ(rd_actor_call(b, Counter_crash_first, RD_NO_ARGS, NULL, &r), 0);
  (void)get_long_err(r, &err, msg, sizeof(msg));
  printf("actor's max_task_retries 0: %s: %s\n", rd_err_name(err), msg);
  CHECK_EQ(err, RD_EACTOR_DIED);
  CHECK(strstr(msg, "(max_task_retries=0)") != NULL);
  /* the call's 0 under an actor that retries without limit: not re-sent */
  ao.max_task_retries = -1;
  rd_actor c = make_counter(0, &ao);
  o.max_task_retries = 0;
  CHECK_EQ(rd_actor_call(c, Counter_crash_first, RD_NO_ARGS, &o, &r), 0);
  (void)get_long_err(r, &err, msg, sizeof(msg));
  printf("the call's max_task_retries 0: %s: %s\n", rd_err_name(err), msg);
  CHECK_EQ(err, RD_EACTOR_DIED);
  CHECK(strstr(msg, "(max_task_retries=0, the call's)") != NULL);
  CHECK_EQ(rd_actor_call(c, Counter_crash_first, RD_NO_ARGS, NULL, &r), 0);   /* restarted: lives on */
  CHECK_EQ(get_long(r), 100);
  /* retry_failures within the call's budget: 2 of the actor's unlimited */
  o.retry_failures = 1;
  o.max_task_retries = 1;
  CHECK_EQ(rd_actor_call(c, Counter_flaky, RD_NO_ARGS, &o, &r), 0);
  (void)get_long_err(r, &err, msg, sizeof(msg));
  CHECK_EQ(err, RD_ETASK);
  CHECK(strstr(msg, "flaky attempt 1 (attempt 2 of 2)") != NULL);
  o.max_task_retries = 2;
  CHECK_EQ(rd_actor_call(c, Counter_flaky, RD_NO_ARGS, &o, &r), 0);
  CHECK_EQ(get_long(r), 2);
  /* and over an actor's 0 */
  CHECK_EQ(rd_actor_call(b, Counter_flaky, RD_NO_ARGS, &o, &r), 0);
  CHECK_EQ(get_long(r), 2);
  /* bad values: below RD_ACTOR_DEFAULT; any for a task */
  o.max_task_retries = -3;
  CHECK_EQ(rd_actor_call(c, Counter_incr, RD_NO_ARGS, &o, &r), RD_EINVAL);
  rd_task_opts_init(&o);
  o.max_task_retries = 1;
  CHECK_EQ(rd_submit(plain_task, RD_NO_ARGS, &o, &r), RD_EINVAL);
  rd_shutdown();
  return 0;
}

/* Two 300 ms sleeps and an incr on a handle of an actor with
 * max_pending_calls 2, after a first call answered when warm; their return
 * codes as the call's return. */
static int capped_calls(rd_call *call, rd_actor a, int warm) {
  rd_ref r, q[3];
  rd_buf b;
  if (warm) {
    if (rd_actor_call(a, Counter_get, RD_NO_ARGS, NULL, &r) != 0 || rd_get(&r, 1, &b, 30000) != 0)
      return rd_call_fail(call, "first call");
    rd_buf_release(&b);
    rd_ref_release(r);
  }
  long ms = 300, rc[3];
  for (int i = 0; i < 3; i++)
    rc[i] = rd_actor_call(a, i < 2 ? Counter_sleep_ms : Counter_incr, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms))), NULL,
                          &q[i]);
  for (int i = 0; i < 3; i++) {
    if (rc[i] != 0) continue;
    if (rd_get(&q[i], 1, &b, 30000) == 0) rd_buf_release(&b);
    rd_ref_release(q[i]);
  }
  return rd_return_bytes(call, 0, rc, sizeof(rc));
}

/* Those calls on the actor named "capped" from this process's own handle,
 * got by name, once it is connected (a first call answered). */
RD_REMOTE(capped_probe) {
  rd_actor a;
  if (rd_actor_get("capped", &a) != 0) return rd_call_fail(call, "rd_actor_get");
  return capped_calls(call, a, 1);
}

/* The same calls at once, from a handle got by name (argument 0) and not
 * used yet: the node's answer to the lookup says the limit, so the incr is
 * refused before any connection.  Until 2026-12-07 it was learnt at the
 * first connect, which waits for an actor still starting: calls to one
 * were all queued. */
RD_REMOTE(capped_probe_cold) {
  rd_actor a;
  char name[64];
  rd_buf nb;
  if (rd_arg(call, 0, &nb) != 0 || nb.size >= sizeof(name)) return rd_call_fail(call, "name");
  memcpy(name, nb.data, nb.size);
  name[nb.size] = 0;
  if (rd_actor_get(name, &a) != 0) return rd_call_fail(call, "rd_actor_get");
  return capped_calls(call, a, 0);
}

/* rd_actor_opts.max_pending_calls (Ray's): a handle with that many calls
 * not yet answered refuses the next (RD_EAGAIN, nothing queued, nothing
 * run) until one is answered; counted per handle, in each process. */
static int t_max_pending(void) {
  init_or_die(NULL);
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.max_pending_calls = -2;
  rd_actor bad;
  CHECK_EQ(rd_actor_create(Counter, RD_NO_ARGS, &ao, &bad), RD_EINVAL);
  ao.max_pending_calls = 2;
  ao.name = "capped";
  rd_actor a = make_counter(0, &ao);
  long ms = 300;
  rd_ref r1, r2, r3;
  CHECK_EQ(rd_actor_call(a, Counter_sleep_ms, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms))), NULL, &r1), 0);
  CHECK_EQ(rd_actor_call(a, Counter_sleep_ms, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms))), NULL, &r2), 0);
  for (int i = 0; i < 100; i++) CHECK_EQ(rd_actor_call(a, Counter_incr, RD_NO_ARGS, NULL, &r3), RD_EAGAIN);
  CHECK_EQ(get_long(r1), 300);
  CHECK_EQ(rd_actor_call(a, Counter_incr, RD_NO_ARGS, NULL, &r3), 0);   /* one pending: room for one */
  CHECK_EQ(get_long(r2), 300);
  CHECK_EQ(get_long(r3), 1);   /* the refused calls never ran */
  /* another process's handle, got by name, counts its own calls: once
   * connected, from the start, and from the start while the actor is still
   * being made (its constructor takes 1.5 s) */
  ao.name = "capped_slow";
  long zero = 0, init_ms = 1500;
  rd_actor slow;
  CHECK_EQ(rd_actor_create(Counter, RD_ARGS(rd_arg_bytes(&zero, sizeof(zero)), rd_arg_bytes(&init_ms, sizeof(init_ms))),
                           &ao, &slow), 0);
  for (int cold = 0; cold < 3; cold++) {
    rd_ref p;
    const char *nm = cold == 2 ? "capped_slow" : "capped";
    if (cold) CHECK_EQ(rd_submit(capped_probe_cold, RD_ARGS(rd_arg_bytes(nm, strlen(nm))), NULL, &p), 0);
    else CHECK_EQ(rd_submit(capped_probe, RD_NO_ARGS, NULL, &p), 0);
    rd_buf b;
    CHECK_EQ(rd_get(&p, 1, &b, 60000), 0);
    long rc[3];
    CHECK_EQ(b.size, sizeof(rc));
    memcpy(rc, b.data, sizeof(rc));
    const char *how = cold == 2 ? " (not used before, actor starting)" : cold ? " (not used before)" : "";
    printf("a task's handle%s: %s %s %s\n", how, rd_err_name((int)rc[0]),
           rd_err_name((int)rc[1]), rd_err_name((int)rc[2]));
    CHECK(rc[0] == 0 && rc[1] == 0 && rc[2] == RD_EAGAIN);
    rd_buf_release(&b);
    rd_ref_release(p);
  }
  CHECK_EQ(rd_actor_call(a, Counter_get, RD_NO_ARGS, NULL, &r3), 0);
  CHECK_EQ(get_long(r3), 1);   /* the task's refused incr did not run either */
  /* without the option: no limit */
  rd_actor_opts_init(&ao);
  rd_actor free_ = make_counter(0, &ao);
  rd_ref many[300];
  for (int i = 0; i < 300; i++) CHECK_EQ(rd_actor_call(free_, Counter_incr, RD_NO_ARGS, NULL, &many[i]), 0);
  CHECK_EQ(get_long(many[299]), 300);
  for (int i = 0; i < 299; i++) rd_ref_release(many[i]);
  rd_shutdown();
  return 0;
}

/* rd_actor_list_named (Ray's list_named_actors): the caller's namespace's
 * live named actors, or every namespace's; anonymous and dead ones are not
 * listed; sorted. */
static int t_list_named(void) {
  init_or_die(NULL);
  rd_actor_name *v;
  size_t n = 99;
  CHECK_EQ(rd_actor_list_named(0, &v, &n), 0);
  CHECK_EQ(n, 0);
  CHECK(v == NULL);
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.name = "ln_b";
  rd_actor b = make_counter(0, &ao);
  ao.name = "ln_a";
  (void)make_counter(0, &ao);
  ao.name = "ln_c";
  ao.namespace_name = "team";
  (void)make_counter(0, &ao);
  (void)make_counter(0, NULL);   /* anonymous */
  /* a name holding ':' in the default namespace: neither namespace team's
   * "ln_c" (its name is free beside it) nor listed as team's */
  ao.name = "team:ln_c";
  ao.namespace_name = NULL;
  rd_actor colon = make_counter(7, &ao);
  rd_actor got;
  CHECK_EQ(rd_actor_get_in("", "team:ln_c", &got), 0);
  CHECK_EQ(got.id, colon.id);
  CHECK_EQ(rd_actor_get_in("team", "ln_c", &got), 0);
  CHECK(got.id != colon.id);
  CHECK_EQ(rd_actor_list_named(0, &v, &n), 0);
  CHECK_EQ(n, 3);
  CHECK(!strcmp(v[0].ns, "") && !strcmp(v[0].name, "ln_a"));
  CHECK(!strcmp(v[1].ns, "") && !strcmp(v[1].name, "ln_b"));
  CHECK(!strcmp(v[2].ns, "") && !strcmp(v[2].name, "team:ln_c"));
  rd_actor_names_free(v);
  CHECK_EQ(rd_actor_list_named(1, &v, &n), 0);
  CHECK_EQ(n, 4);
  CHECK(!strcmp(v[3].ns, "team") && !strcmp(v[3].name, "ln_c"));
  rd_actor_names_free(v);
  CHECK_EQ(rd_actor_kill(b, 1), 0);   /* dead: no longer listed */
  CHECK_EQ(rd_actor_kill(colon, 1), 0);
  CHECK_EQ(rd_actor_list_named(0, &v, &n), 0);
  CHECK_EQ(n, 1);
  CHECK(!strcmp(v[0].name, "ln_a"));
  rd_actor_names_free(v);
  CHECK_EQ(rd_actor_list_named(0, NULL, &n), RD_EINVAL);
  rd_shutdown();
  CHECK_EQ(rd_actor_list_named(0, &v, &n), RD_ESTATE);
  return 0;
}

/* An actor's process killed from outside while no call was in flight and
 * its driver idle (an owner with nothing live does not pump, so it has not
 * seen the socket close): the next call waits for the restart rather than
 * failing as if it had been sent to the dead process. */
static int t_idle_restart(void) {
  init_or_die(NULL);
  rd_actor_opts o;
  rd_actor_opts_init(&o);
  o.max_restarts = 1;
  rd_actor d = make_counter(0, &o);
  rd_ref r;
  CHECK_EQ(rd_actor_call(d, Counter_pid, RD_NO_ARGS, NULL, &r), 0);
  long pid = get_long(r);
  CHECK(pid > 0);
  /* the owner's report after that call is sent and its progress thread's
   * last poll (up to 1 s) is over: nothing left to pump for */
  usleep(1500000);
  CHECK_EQ(kill((pid_t)pid, SIGKILL), 0);
  usleep(500000);
  CHECK_EQ(rd_actor_call(d, Counter_incr, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(get_long(r), 1);
  CHECK_EQ(rd_actor_call(d, Counter_restarts, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(get_long(r), 1);
  rd_shutdown();
  return 0;
}

/* The memory monitor stops an actor that takes too much memory when no
 * task runs on the node; the call it ran and its death reason, given to
 * later calls, say so. */
static int t_memory_monitor(void) {
  setenv("RAYDIST_MEMORY_LIMIT_BYTES", "419430400", 1);   /* 400 MiB, inherited by the node */
  setenv("RAYDIST_MEMORY_MONITOR_MS", "50", 1);
  init_or_die(NULL);
  rd_actor a = make_counter(0, NULL);
  rd_ref r;
  long mb = 1536;
  int err;
  char msg[512];
  CHECK_EQ(rd_actor_call(a, Counter_hog, RD_ARGS(rd_arg_bytes(&mb, sizeof(mb))), NULL, &r), 0);
  (void)get_long_err(r, &err, msg, sizeof(msg));
  printf("the call: %s: %s\n", rd_err_name(err), msg);
  CHECK_EQ(err, RD_EACTOR_DIED);
  CHECK(strstr(msg, ") was killed by the memory monitor: ") != NULL);
  CHECK(strstr(msg, " while running 'Counter.hog'") != NULL);
  CHECK_EQ(rd_actor_call(a, Counter_get, RD_NO_ARGS, NULL, &r), 0);
  (void)get_long_err(r, &err, msg, sizeof(msg));
  printf("after: %s: %s\n", rd_err_name(err), msg);
  CHECK_EQ(err, RD_EACTOR_DIED);
  CHECK(strstr(msg, "memory monitor") != NULL);
  rd_actor b = make_counter(5, NULL);   /* the node goes on serving */
  CHECK_EQ(rd_actor_call(b, Counter_get, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(get_long(r), 5);
  rd_shutdown();
  return 0;
}

/* The node keeps the records of its last RAYDIST_DEAD_ACTORS_KEPT dead
 * actors (3 here): a call on an older one says its record was dropped, a
 * call on a recent one still gets the reason it died. */
static int t_dead_records(void) {
  setenv("RAYDIST_DEAD_ACTORS_KEPT", "3", 1);   /* inherited by the node */
  init_or_die(NULL);
  enum { N = 6 };
  rd_actor a[N];
  rd_ref r;
  for (int i = 0; i < N; i++) {
    a[i] = make_counter(i, NULL);
    CHECK_EQ(rd_actor_call(a[i], Counter_get, RD_NO_ARGS, NULL, &r), 0);
    CHECK_EQ(get_long(r), i);
    CHECK_EQ(rd_actor_kill(a[i], 1), 0);
  }
  usleep(300000);   /* the node trims on its 50 ms tick */
  int err;
  char msg[512];
  CHECK_EQ(rd_actor_call(a[0], Counter_get, RD_NO_ARGS, NULL, &r), 0);
  (void)get_long_err(r, &err, msg, sizeof(msg));
  printf("oldest: %s: %s\n", rd_err_name(err), msg);
  CHECK_EQ(err, RD_EACTOR_DIED);
  CHECK(strstr(msg, "ended long ago") != NULL);
  CHECK_EQ(rd_actor_call(a[N - 1], Counter_get, RD_NO_ARGS, NULL, &r), 0);
  (void)get_long_err(r, &err, msg, sizeof(msg));
  printf("newest: %s: %s\n", rd_err_name(err), msg);
  CHECK_EQ(err, RD_EACTOR_DIED);
  CHECK(strstr(msg, "ended long ago") == NULL && strstr(msg, "kill") != NULL);
  rd_actor b = make_counter(7, NULL);   /* the node still makes actors */
  CHECK_EQ(rd_actor_call(b, Counter_get, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(get_long(r), 7);
  rd_shutdown();
  unsetenv("RAYDIST_DEAD_ACTORS_KEPT");
  return 0;
}

static int t_gpu_actors(void) {
  rd_config cfg;
  rd_config_init(&cfg);
  cfg.num_gpus = 1;
  cfg.gpu_memory_bytes = 1ull << 32;   /* 4 GiB: each quarter may use 1 GiB */
  init_or_die(&cfg);
  rd_actor_opts o;
  rd_actor_opts_init(&o);
  o.num_gpus = 0.25;
  rd_actor a[5];
  for (int i = 0; i < 5; i++) a[i] = make_counter(0, &o);
  rd_ref r[5];
  for (int i = 0; i < 5; i++) CHECK_EQ(rd_actor_call(a[i], Counter_gpu, RD_NO_ARGS, NULL, &r[i]), 0);
  /* four of them share GPU 0; the fifth waits for a quarter to free up */
  uint8_t ready[5];
  CHECK_EQ(rd_wait(r, 5, 4, 30000, ready), 4);
  usleep(300000);
  CHECK_EQ(rd_wait(r, 5, 5, 0, ready), 4);
  int waiting = -1;
  for (int i = 0; i < 5; i++) {
    if (!ready[i]) { waiting = i; continue; }
    rd_buf b;
    CHECK_EQ(rd_get(&r[i], 1, &b, 0), 0);
    long g[5];
    memcpy(g, b.data, sizeof(g));
    rd_buf_release(&b);
    CHECK_EQ(g[0], 0);
    CHECK_EQ(g[1], 2500);
    CHECK_EQ(g[2], 0);
    CHECK_EQ(g[3], 1l << 30);
    CHECK_EQ(g[4], 1l << 30);
  }
  CHECK(waiting >= 0);
  int victim = waiting == 0 ? 1 : 0;
  CHECK_EQ(rd_actor_kill(a[victim], 1), 0);
  rd_buf b;
  CHECK_EQ(rd_get(&r[waiting], 1, &b, 30000), 0);
  long g[5];
  memcpy(g, b.data, sizeof(g));
  rd_buf_release(&b);
  CHECK_EQ(g[0], 0);
  CHECK_EQ(g[1], 2500);
  CHECK_EQ(g[3], 1l << 30);
  rd_shutdown();
  return 0;
}

static int t_bad_input(void) {
  init_or_die(NULL);
  rd_actor a = make_counter(0, NULL);
  rd_ref r;
  int err;
  char msg[512];
  CHECK_EQ(rd_actor_call_by_name(a, "Counter.nope", RD_NO_ARGS, NULL, &r), 0);
  (void)get_long_err(r, &err, msg, sizeof(msg));
  CHECK_EQ(err, RD_ENOFUNC);
  CHECK(strstr(msg, "Counter.nope") != NULL);
  CHECK_EQ(rd_actor_call(a, Counter_fail, RD_NO_ARGS, NULL, &r), 0);
  (void)get_long_err(r, &err, msg, sizeof(msg));
  CHECK_EQ(err, RD_ETASK);
  CHECK(strstr(msg, "on purpose") != NULL);
  CHECK_EQ(rd_actor_call(a, Counter_incr, RD_NO_ARGS, NULL, &r), 0);   /* the actor lives on */
  CHECK_EQ(get_long(r), 1);
  /* a constructor that fails */
  rd_actor bad;
  CHECK_EQ(rd_actor_create(Broken, RD_NO_ARGS, NULL, &bad), 0);
  CHECK_EQ(rd_actor_call(bad, Counter_incr, RD_NO_ARGS, NULL, &r), 0);
  (void)get_long_err(r, &err, msg, sizeof(msg));
  CHECK_EQ(err, RD_EACTOR_DIED);
  CHECK(strstr(msg, "constructor refuses to start") != NULL);
  /* an unregistered class, an unknown handle, a killed actor */
  static rd_actor_class ghost = {"Ghost", NULL, NULL, NULL};
  rd_actor g;
  CHECK_EQ(rd_actor_create(&ghost, RD_NO_ARGS, NULL, &g), RD_ENOFUNC);
  rd_actor unknown = {987654};
  CHECK_EQ(rd_actor_call(unknown, Counter_incr, RD_NO_ARGS, NULL, &r), 0);
  (void)get_long_err(r, &err, NULL, 0);
  CHECK_EQ(err, RD_EACTOR_DIED);
  CHECK_EQ(rd_actor_kill(a, 1), 0);
  CHECK_EQ(rd_actor_call(a, Counter_incr, RD_NO_ARGS, NULL, &r), 0);
  (void)get_long_err(r, &err, msg, sizeof(msg));
  CHECK_EQ(err, RD_EACTOR_DIED);
  /* calls on the dead actor that wait for each other, or for a result still
   * being computed elsewhere, all fail cleanly once their arguments arrive */
  {
    rd_actor live = make_counter(0, NULL);
    long ms = 300;
    rd_ref slow, c1, c2, c3;
    CHECK_EQ(rd_actor_call(live, Counter_sleep_ms, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms))), NULL, &slow), 0);
    CHECK_EQ(rd_actor_call(a, Counter_sleep_ms, RD_ARGS(rd_arg_ref(slow)), NULL, &c1), 0);
    CHECK_EQ(rd_actor_call(a, Counter_incr, RD_NO_ARGS, NULL, &c2), 0);
    CHECK_EQ(rd_actor_call(a, Counter_sleep_ms, RD_ARGS(rd_arg_ref(c2)), NULL, &c3), 0);
    rd_ref_release(slow);
    usleep(100000);   /* the pump runs meanwhile: the dead actor must not be forgotten */
    (void)get_long_err(c2, &err, NULL, 0);
    CHECK_EQ(err, RD_EACTOR_DIED);
    (void)get_long_err(c3, &err, NULL, 0);
    CHECK_EQ(err, RD_EACTOR_DIED);
    (void)get_long_err(c1, &err, NULL, 0);
    CHECK_EQ(err, RD_EACTOR_DIED);
  }
  rd_actor_opts o;
  rd_actor_opts_init(&o);
  o.num_gpus = 3;
  long zero = 0;
  CHECK_EQ(rd_actor_create(Counter, RD_ARGS(rd_arg_bytes(&zero, sizeof(zero))), &o, &g), RD_EINFEASIBLE);
  o.num_gpus = 0;
  o.max_restarts = -2;
  CHECK_EQ(rd_actor_create(Counter, RD_ARGS(rd_arg_bytes(&zero, sizeof(zero))), &o, &g), RD_EINVAL);
  /* the node is healthy */
  CHECK_EQ(rd_submit(plain_task, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(get_long(r), 7);
  rd_shutdown();
  return 0;
}

static int t_concurrency(void) {
  init_or_die(NULL);
  rd_actor_opts o;
  rd_actor_opts_init(&o);
  o.max_concurrency = 4;
  rd_actor a = make_counter(0, &o);
  rd_actor s = make_counter(0, NULL);
  long ms = 300;
  rd_ref r[4];
  /* warm up both (constructors) */
  rd_ref w;
  CHECK_EQ(rd_actor_call(a, Counter_get, RD_NO_ARGS, NULL, &w), 0);
  (void)get_long(w);
  CHECK_EQ(rd_actor_call(s, Counter_get, RD_NO_ARGS, NULL, &w), 0);
  (void)get_long(w);
  double t0 = now_s();
  for (int i = 0; i < 4; i++) CHECK_EQ(rd_actor_call(a, Counter_sleep_ms, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms))), NULL, &r[i]), 0);
  for (int i = 0; i < 4; i++) CHECK_EQ(get_long(r[i]), 300);
  double conc = now_s() - t0;
  t0 = now_s();
  for (int i = 0; i < 4; i++) CHECK_EQ(rd_actor_call(s, Counter_sleep_ms, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms))), NULL, &r[i]), 0);
  for (int i = 0; i < 4; i++) CHECK_EQ(get_long(r[i]), 300);
  double serial = now_s() - t0;
  CHECK(conc < 0.9);      /* four at once */
  CHECK(serial >= 1.19);  /* one at a time */
  rd_shutdown();
  return 0;
}

/* 200 KB of the call's argument (a long), after 20 ms: what a threaded
 * actor's call returns through the store. */
RD_ACTOR_METHOD(Counter, fill_big) {
  (void)state;
  rd_buf b;
  long v = 0;
  if (rd_arg(call, 0, &b) == 0 && b.size == sizeof(v)) memcpy(&v, b.data, sizeof(v));
  usleep(20000);
  enum { N = 200000 / sizeof(long) };
  long *p = malloc(N * sizeof(long));
  if (!p) return rd_call_fail(call, "out of memory");
  for (size_t i = 0; i < N; i++) p[i] = v;
  int e = rd_return_bytes(call, 0, p, N * sizeof(long));
  free(p);
  return e;
}

/* An actor running 200 calls at once, each returning an object through the
 * store: every call's allocation is a request to the node, 200 of them
 * waiting at once in one process (a table of 64 failed the rest with
 * RD_EAGAIN, reported as RD_ESTORE_FULL). */
static int t_concurrent_returns(void) {
  init_or_die(NULL);
  rd_actor_opts o;
  rd_actor_opts_init(&o);
  o.max_concurrency = 200;
  rd_actor a = make_counter(0, &o);
  enum { N = 400 };
  static rd_ref r[N];
  for (long i = 0; i < N; i++) CHECK_EQ(rd_actor_call(a, Counter_fill_big, RD_ARGS(rd_arg_bytes(&i, sizeof(i))), NULL, &r[i]), 0);
  for (long i = 0; i < N; i++) {
    rd_buf b;
    int e = rd_get(&r[i], 1, &b, 60000);
    if (e) fprintf(stderr, "call %ld: %s: %.*s\n", i, rd_err_name(e), (int)b.size, (const char *)b.data);
    CHECK_EQ(e, 0);
    CHECK_EQ(b.size, 200000 / sizeof(long) * sizeof(long));
    const long *p = b.data;
    CHECK_EQ(p[0], i);
    CHECK_EQ(p[b.size / sizeof(long) - 1], i);
    rd_buf_release(&b);
    rd_ref_release(r[i]);
  }
  rd_shutdown();
  return 0;
}

/* Seconds until r's value is ready (it must succeed). */
static double ready_after(rd_ref r, double t0) {
  (void)get_long(r);
  return now_s() - t0;
}

/* The status of r, its message in msg. */
static int status_of(rd_ref r, char *msg, size_t cap) {
  int err;
  (void)get_long_err(r, &err, msg, cap);
  return err;
}

/* Concurrency groups: a call of group "io" (declared with
 * RD_ACTOR_METHOD_IN, or named at the call) runs while the default group's
 * only thread is busy, where an actor without the group makes it wait; calls
 * in one group keep their order and its thread count; groups survive a
 * restart; a group the actor lacks and malformed groups are RD_EINVAL. */
static int t_concurrency_groups(void) {
  init_or_die(NULL);
  rd_actor_opts o;
  rd_actor_opts_init(&o);
  o.concurrency_groups = "io=1";
  o.max_restarts = 1;
  o.max_task_retries = 1;   /* the call that crashes it runs again after the restart */
  rd_actor a = make_counter(5, &o);
  rd_actor s = make_counter(5, NULL);   /* no groups: the control */
  rd_ref w, r;
  CHECK_EQ(rd_actor_call(a, Counter_get, RD_NO_ARGS, NULL, &w), 0);
  CHECK_EQ(get_long(w), 5);
  CHECK_EQ(rd_actor_call(s, Counter_get, RD_NO_ARGS, NULL, &w), 0);
  CHECK_EQ(get_long(w), 5);
  long ms = 1500;
  rd_task_opts io;
  rd_task_opts_init(&io);
  io.concurrency_group = "io";
  for (int round = 0; round < 2; round++) {
    /* the default group busy for 1.5 s: "io" answers at once, by its
     * method's group and by the call's */
    double t0 = now_s();
    CHECK_EQ(rd_actor_call(a, Counter_sleep_ms, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms))), NULL, &w), 0);
    usleep(100000);
    CHECK_EQ(rd_actor_call(a, Counter_peek_io, RD_NO_ARGS, NULL, &r), 0);
    double by_method = ready_after(r, t0);
    CHECK_EQ(rd_actor_call(a, Counter_get, RD_NO_ARGS, &io, &r), 0);
    double by_call = ready_after(r, t0);
    double slow = ready_after(w, t0);
    printf("round %d: io by method %.3f s, by call %.3f s, the default group's sleep %.3f s\n", round, by_method,
           by_call, slow);
    CHECK(by_method < 1.0 && by_call < 1.0 && slow >= 1.45);
    if (round == 0) {   /* crash it: the restarted process has the group too */
      CHECK_EQ(rd_actor_call(a, Counter_crash_first, RD_NO_ARGS, NULL, &r), 0);
      CHECK_EQ(get_long(r), 105);   /* its state starts over: 5 + 100 */
    }
  }
  /* the control: without the group, a call waits behind the sleep */
  double t0 = now_s();
  CHECK_EQ(rd_actor_call(s, Counter_sleep_ms, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms))), NULL, &w), 0);
  usleep(100000);
  CHECK_EQ(rd_actor_call(s, Counter_get, RD_NO_ARGS, NULL, &r), 0);
  double waited = ready_after(r, t0);
  (void)get_long(w);
  printf("no groups: a call behind the sleep took %.3f s\n", waited);
  CHECK(waited >= 1.45);
  /* "default" named at the call is the default group: it waits too */
  rd_task_opts dflt;
  rd_task_opts_init(&dflt);
  dflt.concurrency_group = "default";
  t0 = now_s();
  CHECK_EQ(rd_actor_call(a, Counter_sleep_ms, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms))), NULL, &w), 0);
  usleep(100000);
  CHECK_EQ(rd_actor_call(a, Counter_peek_io, RD_NO_ARGS, &dflt, &r), 0);
  CHECK(ready_after(r, t0) >= 1.45);
  (void)get_long(w);
  /* one thread in "io": its calls one at a time, in order; two: together */
  long half = 500;
  rd_ref two[2];
  t0 = now_s();
  for (int i = 0; i < 2; i++)
    CHECK_EQ(rd_actor_call(a, Counter_sleep_io, RD_ARGS(rd_arg_bytes(&half, sizeof(half))), NULL, &two[i]), 0);
  for (int i = 0; i < 2; i++) (void)get_long(two[i]);
  double one_thread = now_s() - t0;
  o.concurrency_groups = "io=2, compute=3";
  o.max_restarts = 0;
  rd_actor b = make_counter(0, &o);
  CHECK_EQ(rd_actor_call(b, Counter_get, RD_NO_ARGS, NULL, &w), 0);
  (void)get_long(w);
  t0 = now_s();
  for (int i = 0; i < 2; i++)
    CHECK_EQ(rd_actor_call(b, Counter_sleep_io, RD_ARGS(rd_arg_bytes(&half, sizeof(half))), NULL, &two[i]), 0);
  for (int i = 0; i < 2; i++) (void)get_long(two[i]);
  double two_threads = now_s() - t0;
  printf("two 0.5 s calls in io: one thread %.3f s, two threads %.3f s\n", one_thread, two_threads);
  CHECK(one_thread >= 0.99 && two_threads < 0.9);

  /* a group the actor does not have: the call fails, the actor goes on */
  char msg[512];
  CHECK_EQ(rd_actor_call(s, Counter_peek_io, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(status_of(r, msg, sizeof(msg)), RD_EINVAL);
  printf("no io group: %s\n", msg);
  CHECK(strstr(msg, "no concurrency group 'io'") != NULL);
  io.concurrency_group = "nope";
  CHECK_EQ(rd_actor_call(a, Counter_get, RD_NO_ARGS, &io, &r), 0);
  CHECK_EQ(status_of(r, msg, sizeof(msg)), RD_EINVAL);
  CHECK_EQ(rd_actor_call(s, Counter_get, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(get_long(r), 5);
  io.concurrency_group = "not a name";
  CHECK_EQ(rd_actor_call(a, Counter_get, RD_NO_ARGS, &io, &r), RD_EINVAL);
  static const char *bad[] = {"io=0", "io", "io=257", "default=2", "io=1,io=2", "a b=1", "io=1x", "=3"};
  rd_actor x;
  long zero = 0;
  for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
    o.concurrency_groups = bad[i];
    CHECK_EQ(rd_actor_create(Counter, RD_ARGS(rd_arg_bytes(&zero, sizeof(zero))), &o, &x), RD_EINVAL);
  }
  rd_shutdown();
  return 0;
}

/* rd_actor_exit: the call that asks returns, the destructor runs, calls
 * queued behind it and later ones fail with the reason, no restart despite
 * max_restarts -1, its name is free again; outside a method it is
 * RD_EINVAL. */
static int t_exit(void) {
  CHECK_EQ(rd_actor_exit(NULL), RD_EINVAL);
  init_or_die(NULL);
  rd_ref r;
  CHECK_EQ(rd_submit(exit_from_task, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(get_long(r), RD_EINVAL);
  char path[] = "/tmp/rd_actor_exit.XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  close(fd);
  rd_actor_opts o;
  rd_actor_opts_init(&o);
  o.max_restarts = -1;
  o.name = "leaver";
  rd_actor a;
  CHECK_EQ(rd_actor_create(Leaver, RD_ARGS(rd_arg_bytes(path, strlen(path))), &o, &a), 0);
  for (long i = 1; i <= 2; i++) {
    CHECK_EQ(rd_actor_call(a, Leaver_incr, RD_NO_ARGS, NULL, &r), 0);
    CHECK_EQ(get_long(r), i);
  }
  rd_ref bye, behind[5];
  CHECK_EQ(rd_actor_call(a, Leaver_bye, RD_NO_ARGS, NULL, &bye), 0);
  for (int i = 0; i < 5; i++) CHECK_EQ(rd_actor_call(a, Leaver_incr, RD_NO_ARGS, NULL, &behind[i]), 0);
  CHECK_EQ(get_long(bye), 0);
  int err;
  char msg[512];
  for (int i = 0; i < 5; i++) {
    (void)get_long_err(behind[i], &err, msg, sizeof(msg));
    CHECK_EQ(err, RD_EACTOR_DIED);
  }
  printf("a call queued behind rd_actor_exit: %s\n", msg);
  CHECK(strstr(msg, "exited (rd_actor_exit)") != NULL);
  /* not restarted: later calls fail too, with the reason once this caller
   * has seen the process go (one sent before may only see it die) */
  int told = 0;
  for (int i = 0; i < 100 && !told; i++) {
    CHECK_EQ(rd_actor_call(a, Leaver_incr, RD_NO_ARGS, NULL, &r), 0);
    (void)get_long_err(r, &err, msg, sizeof(msg));
    CHECK_EQ(err, RD_EACTOR_DIED);
    told = strstr(msg, "exited (rd_actor_exit)") != NULL;
    if (!told) usleep(20000);
  }
  printf("a later call: %s\n", msg);
  CHECK(told);
  /* the destructor ran once, after the third call */
  char line[64] = "";
  for (int i = 0; i < 100 && !line[0]; i++) {
    FILE *f = fopen(path, "r");
    if (f && !fgets(line, sizeof(line), f)) line[0] = 0;
    if (f) fclose(f);
    if (!line[0]) usleep(20000);
  }
  CHECK(!strcmp(line, "fini after 3\n"));
  /* the name is free for a new actor */
  rd_actor found;
  CHECK_EQ(rd_actor_get("leaver", &found), RD_ENOENT);
  rd_actor b;
  CHECK_EQ(rd_actor_create(Leaver, RD_ARGS(rd_arg_bytes(path, strlen(path))), &o, &b), 0);
  CHECK_EQ(rd_actor_call(b, Leaver_incr, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(get_long(r), 1);
  CHECK_EQ(rd_actor_kill(b, 1), 0);
  /* with max_concurrency 4, a call running on another executor ends before
   * the destructor runs, and its reply comes */
  CHECK_EQ(truncate(path, 0), 0);
  o.name = NULL;
  o.max_concurrency = 4;
  rd_actor c;
  CHECK_EQ(rd_actor_create(Leaver, RD_ARGS(rd_arg_bytes(path, strlen(path))), &o, &c), 0);
  rd_ref slow;
  CHECK_EQ(rd_actor_call(c, Leaver_slow, RD_NO_ARGS, NULL, &slow), 0);
  usleep(50000);
  CHECK_EQ(rd_actor_call(c, Leaver_bye, RD_NO_ARGS, NULL, &bye), 0);
  CHECK_EQ(get_long(bye), 0);
  CHECK_EQ(get_long(slow), 2);
  line[0] = 0;
  for (int i = 0; i < 100 && !line[0]; i++) {
    FILE *f = fopen(path, "r");
    if (f && !fgets(line, sizeof(line), f)) line[0] = 0;
    if (f) fclose(f);
    if (!line[0]) usleep(20000);
  }
  CHECK(!strcmp(line, "fini after 2\n"));
  unlink(path);
  rd_shutdown();
  return 0;
}

/* ------------------------------------------------------------ namespaces */

RD_REMOTE(ns_task) { return ns_report(call); }

RD_REMOTE(ns_nested) {   /* a task's tasks are in its namespace */
  rd_ref r;
  if (rd_submit(ns_task, RD_NO_ARGS, NULL, &r) != 0) return rd_call_fail(call, "submit");
  rd_buf b;
  if (rd_get(&r, 1, &b, 60000) != 0) return rd_call_fail(call, "get");
  int rc = rd_return_bytes(call, 0, b.data, b.size);
  rd_buf_release(&b);
  rd_ref_release(r);
  return rc;
}

static void check_text(rd_ref r, const char *want) {
  rd_buf b;
  int rc = rd_get(&r, 1, &b, 60000);
  if (rc != 0) fprintf(stderr, "want '%s': %s: %.*s\n", want, rd_err_name(rc), rc == RD_ETIMEDOUT ? 0 : (int)b.size,
                       rc == RD_ETIMEDOUT ? "" : (const char *)b.data);
  CHECK_EQ(rc, 0);
  if (b.size != strlen(want) || memcmp(b.data, want, b.size)) {
    fprintf(stderr, "got '%.*s', want '%s'\n", (int)b.size, (const char *)b.data, want);
    CHECK(0);
  }
  rd_buf_release(&b);
  rd_ref_release(r);
}

static rd_actor counter_in(const char *ns, long start, int expect) {
  rd_actor_opts o;
  rd_actor_opts_init(&o);
  o.name = "svc";
  o.namespace_name = ns;
  rd_actor a = {0};
  CHECK_EQ(rd_actor_create(Counter, RD_ARGS(rd_arg_bytes(&start, sizeof(start))), &o, &a), expect);
  return a;
}

/* Names in namespaces: the same name in three, each found from its own
 * (the driver, its tasks and their tasks, an actor's methods) and from
 * outside with rd_actor_get_in; bad namespaces refused. */
static int t_namespaces(void) {
  rd_config cfg;
  rd_config_init(&cfg);
  cfg.namespace_name = "bad:ns";
  CHECK_EQ(rd_init(&cfg), RD_EINVAL);
  cfg.namespace_name = "team_a";
  init_or_die(&cfg);
  CHECK(!strcmp(rd_namespace(), "team_a"));
  rd_actor a = counter_in(NULL, 1, 0);   /* the creator's: team_a */
  rd_actor b = counter_in("team_b", 2, 0);
  rd_actor d = counter_in("", 3, 0);     /* the default namespace */
  counter_in("team_a", 9, RD_EEXIST);
  counter_in("x:y", 9, RD_EINVAL);
  rd_actor f;
  CHECK_EQ(rd_actor_get("svc", &f), 0);
  CHECK_EQ(f.id, a.id);
  CHECK_EQ(rd_actor_get_in("team_b", "svc", &f), 0);
  CHECK_EQ(f.id, b.id);
  CHECK_EQ(rd_actor_get_in("", "svc", &f), 0);
  CHECK_EQ(f.id, d.id);
  CHECK_EQ(rd_actor_get_in("team_c", "svc", &f), RD_ENOENT);
  CHECK_EQ(rd_actor_get_in("a:b", "svc", &f), RD_EINVAL);
  rd_ref r;
  CHECK_EQ(rd_submit(ns_task, RD_NO_ARGS, NULL, &r), 0);
  check_text(r, "team_a:1");
  CHECK_EQ(rd_submit(ns_nested, RD_NO_ARGS, NULL, &r), 0);
  check_text(r, "team_a:1");
  /* an actor's methods look up in its namespace: anonymous probes in each
   * (calling a named svc would call itself) */
  const char *probe_ns[] = {"team_b", "", NULL};
  const char *want[] = {"team_b:2", ":3", "team_a:1"};
  long zero = 0;
  rd_actor_opts o;
  for (int i = 0; i < 3; i++) {
    rd_actor_opts_init(&o);
    o.namespace_name = probe_ns[i];   /* NULL: the creator's */
    rd_actor probe;
    CHECK_EQ(rd_actor_create(Counter, RD_ARGS(rd_arg_bytes(&zero, sizeof(zero))), &o, &probe), 0);
    CHECK_EQ(rd_actor_call(probe, Counter_ns_probe, RD_NO_ARGS, NULL, &r), 0);
    check_text(r, want[i]);
  }
  /* get_if_exists looks in the actor's namespace */
  rd_actor_opts_init(&o);
  o.name = "svc";
  o.namespace_name = "team_b";
  o.get_if_exists = 1;
  CHECK_EQ(rd_actor_create(Counter, RD_ARGS(rd_arg_bytes(&zero, sizeof(zero))), &o, &f), 0);
  CHECK_EQ(f.id, b.id);
  /* placement group names too */
  rd_bundle bu = {.num_cpus = 0.1};
  rd_pg pg, pg2;
  CHECK_EQ(rd_pg_create(&bu, 1, RD_PG_PACK, "grp", &pg), 0);
  CHECK_EQ(rd_pg_get("grp", &pg2), 0);
  CHECK_EQ(pg2.id, pg.id);
  CHECK_EQ(rd_pg_remove(pg), 0);
  rd_shutdown();
  /* the next session, in the default namespace: names are not team_a's */
  init_or_die(NULL);
  CHECK(!strcmp(rd_namespace(), ""));
  CHECK_EQ(rd_submit(ns_task, RD_NO_ARGS, NULL, &r), 0);
  check_text(r, ":-");
  rd_shutdown();
  return 0;
}

static const rd_test_case tests[] = {
    {"order", t_order}, {"caller_gone", t_caller_gone},       {"two_callers", t_two_callers}, {"named", t_named}, {"get_if_exists", t_get_if_exists},
    {"restart", t_restart},   {"gpu_actors", t_gpu_actors},   {"bad_input", t_bad_input},
    {"concurrency", t_concurrency}, {"concurrency_groups", t_concurrency_groups}, {"cancel", t_cancel}, {"memory_monitor", t_memory_monitor},
    {"dead_records", t_dead_records}, {"caller_gone_late", t_caller_gone_late}, {"crash_rename", t_crash_rename}, {"exit", t_exit},
    {"namespaces", t_namespaces}, {"idle_restart", t_idle_restart}, {"retry_failures", t_retry_failures}, {"call_retries", t_call_retries},
    {"max_pending", t_max_pending}, {"list_named", t_list_named}, {"many_connections", t_many_connections},
    {"concurrent_returns", t_concurrent_returns},
};

RD_TEST_MAIN(tests)
