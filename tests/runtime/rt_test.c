/* tests/runtime/rt_test.c - integration tests of the single-node runtime
 * through the public API: real daemon, real worker processes, real sockets,
 * real shared memory.  `rt_test NAME` runs one test; CTest runs each in its
 * own process.  The same binary is re-executed as the workers. */
#include <raydist.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../check.h"
#include "../handback.h"
#include "../memhog.h"
#include "../pidfile.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static long get_long(rd_ref r) {
  rd_buf b;
  int e = rd_get(&r, 1, &b, 60000);
  if (e != 0) {
    fprintf(stderr, "get failed: %s: %.*s\n", rd_err_name(e), (int)b.size, (const char *)b.data);
    exit(1);
  }
  CHECK_EQ(b.size, sizeof(long));
  long v;
  memcpy(&v, b.data, sizeof(v));
  rd_buf_release(&b);
  return v;
}

/* ------------------------------------------------------ remote functions */

RD_REMOTE(add_one) {
  rd_buf in;
  if (rd_call_nargs(call) != 1) return rd_call_fail(call, "add_one takes 1 argument, got %zu", rd_call_nargs(call));
  if (rd_arg(call, 0, &in) != 0 || in.size != sizeof(long)) return rd_call_fail(call, "bad argument size %zu", in.size);
  long v;
  memcpy(&v, in.data, sizeof(v));
  v++;
  return rd_return_bytes(call, 0, &v, sizeof(v));
}

/* add_one(v) run as a task: its result (the node still serves). */
static long add_one_run(long v) {
  rd_ref r;
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&v, sizeof(v))), NULL, &r), 0);
  return get_long(r);
}

RD_REMOTE(get_pid) {
  long p = getpid();
  return rd_return_bytes(call, 0, &p, sizeof(p));
}

RD_REMOTE(fail_always) { return rd_call_fail(call, "deliberate failure %d", 42); }

/* Fills return 0 with `size` bytes of a pattern derived from seed (args: size, seed). */
RD_REMOTE(make_big) {
  rd_buf a, b;
  if (rd_arg(call, 0, &a) || rd_arg(call, 1, &b)) return rd_call_fail(call, "args");
  size_t n;
  long seed;
  memcpy(&n, a.data, sizeof(n));
  memcpy(&seed, b.data, sizeof(seed));
  unsigned char *p = rd_return_alloc(call, 0, n);
  if (!p) return rd_call_fail(call, "return_alloc(%zu) failed", n);
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 31 + (size_t)seed);
  return 0;
}

/* Checksum of argument 0. */
RD_REMOTE(checksum) {
  rd_buf a;
  if (rd_arg(call, 0, &a)) return rd_call_fail(call, "args");
  unsigned long s = 1469598103934665603ul;
  const unsigned char *p = a.data;
  for (size_t i = 0; i < a.size; i += 4096) s = (s ^ p[i]) * 1099511628211ul;
  if (a.size) s = (s ^ p[a.size - 1]) * 1099511628211ul;
  s ^= a.size;
  return rd_return_bytes(call, 0, &s, sizeof(s));
}

/* Sleeps args[0] ms; returns {start, end, pid, ngpus, gpu id, fraction*1e4, visible devices,
 * GPU memory budget from the call and from the environment} */
typedef struct span {
  double start, end;
  long pid;
  int ngpus, gpu0;
  long frac0;
  char visible[32];
  uint64_t gpu_mem;
  char gpu_mem_env[32];
} span;

RD_REMOTE(sleep_span) {
  rd_buf a;
  if (rd_arg(call, 0, &a)) return rd_call_fail(call, "args");
  long ms;
  memcpy(&ms, a.data, sizeof(ms));
  span s;
  memset(&s, 0, sizeof(s));
  s.start = now_s();
  usleep((useconds_t)(ms * 1000));
  s.end = now_s();
  s.pid = getpid();
  int ids[4];
  double fr[4];
  s.ngpus = rd_call_gpu_ids(call, ids, fr, 4);
  s.gpu0 = s.ngpus ? ids[0] : -1;
  s.frac0 = s.ngpus ? (long)(fr[0] * 10000 + 0.5) : 0;
  const char *v = getenv("CUDA_VISIBLE_DEVICES");
  snprintf(s.visible, sizeof(s.visible), "%s", v ? v : "(unset)");
  s.gpu_mem = rd_call_gpu_memory(call);
  v = getenv("RAYDIST_GPU_MEMORY_BYTES");
  snprintf(s.gpu_mem_env, sizeof(s.gpu_mem_env), "%s", v ? v : "(unset)");
  return rd_return_bytes(call, 0, &s, sizeof(s));
}

/* Dies on its first attempt (SIGKILL), succeeds on a retry. */
RD_REMOTE(crash_once) {
  if (rd_call_attempt(call) == 0) kill(getpid(), SIGKILL);
  long a = rd_call_attempt(call);
  return rd_return_bytes(call, 0, &a, sizeof(a));
}

RD_REMOTE(crash_always) {
  abort();
  return 0;
}

/* Puts three 8 MiB objects of its own (never released), then dies. */
RD_REMOTE(put_then_die) {
  size_t n = 8u << 20;
  unsigned char *p = malloc(n);
  if (!p) return rd_call_fail(call, "out of memory");
  memset(p, 5, n);
  for (int i = 0; i < 3; i++) {
    rd_ref r;
    if (rd_put(p, n, &r) != 0) return rd_call_fail(call, "rd_put failed");
  }
  free(p);
  kill(getpid(), SIGKILL);
  return 0;
}

/* Two returns: the argument and its negation. */
RD_REMOTE(two_returns) {
  rd_buf a;
  if (rd_arg(call, 0, &a)) return rd_call_fail(call, "args");
  long v;
  memcpy(&v, a.data, sizeof(v));
  long w = -v;
  int r = rd_return_bytes(call, 0, &v, sizeof(v));
  if (r == 0) r = rd_return_bytes(call, 1, &w, sizeof(w));
  return r;
}

/* Submits `n` add_one tasks from inside a task and sums the results. */
RD_REMOTE(nested_sum) {
  rd_buf a;
  if (rd_arg(call, 0, &a)) return rd_call_fail(call, "args");
  long n;
  memcpy(&n, a.data, sizeof(n));
  long total = 0;
  for (long i = 0; i < n; i++) {
    rd_ref r;
    if (rd_submit(add_one, RD_ARGS(rd_arg_bytes(&i, sizeof(i))), NULL, &r) != 0) return rd_call_fail(call, "submit");
    rd_buf b;
    if (rd_get(&r, 1, &b, 30000) != 0) return rd_call_fail(call, "get");
    long v;
    memcpy(&v, b.data, sizeof(v));
    total += v;
    rd_buf_release(&b);
    rd_ref_release(r);
  }
  return rd_return_bytes(call, 0, &total, sizeof(total));
}

/* Submits `n` sleep_span(100 ms) children, then computes for `ms` without
 * calling the library, then counts (without waiting) the children done. */
RD_REMOTE(spawn_then_spin) {
  rd_buf a;
  if (rd_arg(call, 0, &a) || a.size != 2 * sizeof(long)) return rd_call_fail(call, "args");
  long nm[2];
  memcpy(nm, a.data, sizeof(nm));
  rd_ref r[16];
  long n = nm[0] < 16 ? nm[0] : 16, child_ms = 100;
  for (long i = 0; i < n; i++)
    if (rd_submit(sleep_span, RD_ARGS(rd_arg_bytes(&child_ms, sizeof(child_ms))), NULL, &r[i]) != 0)
      return rd_call_fail(call, "submit");
  volatile double x = 0;
  for (double end = now_s() + nm[1] / 1000.0; now_s() < end;) x += 1.0;
  long done = rd_wait(r, (size_t)n, (size_t)n, 0, NULL);
  for (long i = 0; i < n; i++) rd_ref_release(r[i]);
  return rd_return_bytes(call, 0, &done, sizeof(done));
}

/* fan(d): 1 at depth 0, else the sum of two fan(d - 1) children it waits for. */
RD_REMOTE(fan) {
  rd_buf a;
  if (rd_arg(call, 0, &a) || a.size != sizeof(long)) return rd_call_fail(call, "args");
  long d, sum = 0;
  memcpy(&d, a.data, sizeof(d));
  if (d <= 0) {
    usleep(20000);
    sum = 1;
    return rd_return_bytes(call, 0, &sum, sizeof(sum));
  }
  d--;
  rd_ref r[2];
  for (int i = 0; i < 2; i++)
    if (rd_submit(fan, RD_ARGS(rd_arg_bytes(&d, sizeof(d))), NULL, &r[i]) != 0) return rd_call_fail(call, "submit");
  rd_buf b[2];
  int e = rd_get(r, 2, b, 60000);
  if (e != 0) return rd_call_fail(call, "children: %s", rd_err_name(e));
  for (int i = 0; i < 2; i++) {
    long v;
    memcpy(&v, b[i].data, sizeof(v));
    sum += v;
    rd_buf_release(&b[i]);
    rd_ref_release(r[i]);
  }
  return rd_return_bytes(call, 0, &sum, sizeof(sum));
}

/* ------------------------------------------------------------------ tests */

static void init_or_die(const rd_config *cfg) {
  int r = rd_init(cfg);
  if (r != 0) {
    fprintf(stderr, "rd_init: %s\n", rd_strerror(r));
    exit(1);
  }
}

/* An embedded cluster of `cpus` CPUs, or exit. */
static void init_with_cpus(double cpus) {
  rd_config cfg;
  rd_config_init(&cfg);
  cfg.num_cpus = cpus;
  init_or_die(&cfg);
}

/* An embedded cluster with a store of `bytes`, or exit. */
/* An embedded cluster with a store of `bytes`, its fallback region
 * (rd_config.object_store_fallback_bytes: 0 the default, <0 none) and
 * spill directory (NULL the default, "" none), or exit. */
static void init_store(uint64_t bytes, int64_t fallback, const char *spill_dir) {
  rd_config cfg;
  rd_config_init(&cfg);
  cfg.object_store_bytes = bytes;
  cfg.object_store_fallback_bytes = fallback;
  cfg.spill_dir = spill_dir;
  init_or_die(&cfg);
}

static void init_with_store(uint64_t bytes) { init_store(bytes, 0, NULL); }

static int t_many_tasks(void) {
  init_or_die(NULL);
  enum { N = 5000 };
  static rd_ref refs[N];
  for (long i = 0; i < N; i++) CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&i, sizeof(i))), NULL, &refs[i]), 0);
  static rd_buf out[N];
  CHECK_EQ(rd_get(refs, N, out, 60000), 0);
  for (long i = 0; i < N; i++) {
    long v;
    CHECK_EQ(out[i].size, sizeof(long));
    memcpy(&v, out[i].data, sizeof(v));
    CHECK_EQ(v, i + 1);
    rd_buf_release(&out[i]);
    rd_ref_release(refs[i]);
  }
  /* the work was spread over more than one worker process */
  rd_ref p[64];
  rd_task_opts o;
  rd_task_opts_init(&o);
  for (int i = 0; i < 64; i++) CHECK_EQ(rd_submit(sleep_span, RD_ARGS(rd_arg_bytes(&(long){20}, sizeof(long))), &o, &p[i]), 0);
  long pids[2] = {0, 0};
  for (int i = 0; i < 64; i++) {
    rd_buf b;
    CHECK_EQ(rd_get(&p[i], 1, &b, 60000), 0);
    span s;
    memcpy(&s, b.data, sizeof(s));
    if (!pids[0]) pids[0] = s.pid;
    else if (s.pid != pids[0]) pids[1] = s.pid;
    rd_buf_release(&b);
    rd_ref_release(p[i]);
  }
  CHECK(pids[1] != 0);
  rd_shutdown();
  return 0;
}

static int t_chain(void) {
  init_or_die(NULL);
  long zero = 0;
  rd_ref cur;
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&zero, sizeof(zero))), NULL, &cur), 0);
  rd_ref first = cur;
  rd_ref_retain(first);
  for (int i = 1; i < 100; i++) {
    rd_ref next;
    CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_ref(cur)), NULL, &next), 0);
    rd_ref_release(cur);   /* the pending task keeps the object alive */
    cur = next;
  }
  CHECK_EQ(get_long(cur), 100);
  CHECK_EQ(get_long(first), 1);
  /* a failed task fails its dependents with the original message */
  rd_ref bad, dep;
  CHECK_EQ(rd_submit(fail_always, RD_NO_ARGS, NULL, &bad), 0);
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_ref(bad)), NULL, &dep), 0);
  rd_buf b;
  CHECK_EQ(rd_get(&dep, 1, &b, 30000), RD_ETASK);
  CHECK(strstr((const char *)b.data, "deliberate failure 42") != NULL);
  CHECK(strstr((const char *)b.data, "argument 0") != NULL);
  rd_buf_release(&b);
  /* the same when the failed result's only reference is gone by then: the
   * dependent holds it until it has failed too */
  rd_ref bad2, dep2;
  CHECK_EQ(rd_submit(fail_always, RD_NO_ARGS, NULL, &bad2), 0);
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_ref(bad2)), NULL, &dep2), 0);
  rd_ref_release(bad2);
  CHECK_EQ(rd_get(&dep2, 1, &b, 30000), RD_ETASK);
  rd_buf_release(&b);
  rd_ref_release(dep2);
  /* several returns */
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.num_returns = 2;
  rd_ref two[2];
  long seven = 7;
  CHECK_EQ(rd_submit(two_returns, RD_ARGS(rd_arg_bytes(&seven, sizeof(seven))), &o, two), 0);
  CHECK_EQ(get_long(two[0]), 7);
  CHECK_EQ(get_long(two[1]), -7);
  /* a put object as an argument */
  rd_ref put;
  long forty = 40;
  CHECK_EQ(rd_put(&forty, sizeof(forty), &put), 0);
  rd_ref res;
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_ref(put)), NULL, &res), 0);
  CHECK_EQ(get_long(res), 41);
  /* nested submission from inside a task (the parent holds no CPU) */
  o.num_returns = 1;
  o.num_cpus = 0;
  long n = 20;
  rd_ref nested;
  CHECK_EQ(rd_submit(nested_sum, RD_ARGS(rd_arg_bytes(&n, sizeof(n))), &o, &nested), 0);
  CHECK_EQ(get_long(nested), 210);
  rd_shutdown();
  return 0;
}

/* ------------------------------------------------------ wide tasks */

enum { WIDE_SZ = 100 * 1024 };   /* the largest value that travels inline */

/* The sum of its arguments, each a long (a reduce over many results). */
RD_REMOTE(sum_longs) {
  long sum = 0;
  for (size_t i = 0; i < rd_call_nargs(call); i++) {
    rd_buf b;
    long v;
    if (rd_arg(call, i, &b) != 0 || b.size != sizeof(v)) return rd_call_fail(call, "argument %zu", i);
    memcpy(&v, b.data, sizeof(v));
    sum += v;
  }
  return rd_return_bytes(call, 0, &sum, sizeof(sum));
}

/* base + i as its return i, a long (base: its argument, if any). */
RD_REMOTE(returns_i) {
  rd_buf b;
  long base = 0;
  if (rd_call_nargs(call) > 0 && rd_arg(call, 0, &b) == 0 && b.size == sizeof(base)) memcpy(&base, b.data, sizeof(base));
  for (size_t i = 0; i < rd_call_nreturns(call); i++) {
    long v = base + (long)i;
    int e = rd_return_bytes(call, i, &v, sizeof(v));
    if (e) return e;
  }
  return 0;
}

/* Each return i: WIDE_SZ bytes of (i & 0xff). */
RD_REMOTE(returns_big) {
  for (size_t i = 0; i < rd_call_nreturns(call); i++) {
    unsigned char *p = rd_return_alloc(call, i, WIDE_SZ);
    if (!p) return rd_call_fail(call, "return %zu", i);
    memset(p, (int)(i & 0xff), WIDE_SZ);
  }
  return 0;
}

/* Argument i must be WIDE_SZ bytes of (i & 0xff); returns how many. */
RD_REMOTE(check_big_args) {
  for (size_t i = 0; i < rd_call_nargs(call); i++) {
    rd_buf b;
    if (rd_arg(call, i, &b) != 0 || b.size != WIDE_SZ) return rd_call_fail(call, "argument %zu: size", i);
    const unsigned char *p = b.data;
    if (p[0] != (i & 0xff) || p[WIDE_SZ - 1] != (i & 0xff)) return rd_call_fail(call, "argument %zu: bytes", i);
  }
  long n = (long)rd_call_nargs(call);
  return rd_return_bytes(call, 0, &n, sizeof(n));
}

/* An actor whose method sums the sizes of its arguments and answers that
 * plus i as its return i. */
static int wide_init(rd_call *call, void **state) {
  (void)call;
  *state = NULL;
  return 0;
}
RD_ACTOR_CLASS(Wide, wide_init, NULL)
RD_ACTOR_METHOD(Wide, sizes) {
  (void)state;
  long sum = 0;
  for (size_t i = 0; i < rd_call_nargs(call); i++) {
    rd_buf b;
    if (rd_arg(call, i, &b) != 0) return rd_call_fail(call, "argument %zu", i);
    sum += (long)b.size;
  }
  for (size_t i = 0; i < rd_call_nreturns(call); i++) {
    long v = sum + (long)i;
    int e = rd_return_bytes(call, i, &v, sizeof(v));
    if (e) return e;
  }
  return 0;
}

/* Tasks with many arguments and many returns (a reduce over thousands of
 * results; a shuffle's map with a return per reducer), and values past
 * one message's inline budget, which go through the store.  Until
 * 2026-12-07 a task took at most 64 arguments and 16 returns. */
static int t_wide(void) {
  init_with_store(512ull << 20);
  enum { NA = 5000 };
  static rd_ref r[NA];
  static rd_value v[NA];
  /* a reduce: 5000 results as arguments */
  for (long i = 0; i < NA; i++) {
    CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&i, sizeof(i))), NULL, &r[i]), 0);
    v[i] = rd_arg_ref(r[i]);
  }
  rd_ref sum;
  CHECK_EQ(rd_submit(sum_longs, v, NA, NULL, &sum), 0);
  CHECK_EQ(get_long(sum), (long)NA * (NA + 1) / 2);
  for (int i = 0; i < NA; i++) rd_ref_release(r[i]);
  /* 3000 returns */
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.num_returns = 3000;
  long base = 10;
  CHECK_EQ(rd_submit(returns_i, RD_ARGS(rd_arg_bytes(&base, sizeof(base))), &o, r), 0);
  static rd_buf b[NA];
  CHECK_EQ(rd_get(r, 3000, b, 60000), 0);
  for (int i = 0; i < 3000; i++) {
    long x;
    CHECK_EQ(b[i].size, sizeof(x));
    memcpy(&x, b[i].data, sizeof(x));
    CHECK_EQ(x, 10 + i);
    rd_buf_release(&b[i]);
    rd_ref_release(r[i]);
  }
  /* a shuffle: 4 maps of 50 partitions each, 50 reduces of 4 */
  enum { NM = 4, NR = 50 };
  static rd_ref part[NM][NR];
  o.num_returns = NR;
  for (long m = 0; m < NM; m++) {
    long mb = m * 1000;
    CHECK_EQ(rd_submit(returns_i, RD_ARGS(rd_arg_bytes(&mb, sizeof(mb))), &o, part[m]), 0);
  }
  for (int k = 0; k < NR; k++) {
    rd_value in[NM];
    for (int m = 0; m < NM; m++) in[m] = rd_arg_ref(part[m][k]);
    CHECK_EQ(rd_submit(sum_longs, in, NM, NULL, &r[k]), 0);
  }
  for (int k = 0; k < NR; k++) CHECK_EQ(get_long(r[k]), 6000 + 4 * k);   /* (0 + 1000 + 2000 + 3000) + 4k */
  for (int m = 0; m < NM; m++)
    for (int k = 0; k < NR; k++) rd_ref_release(part[m][k]);
  /* 300 returns of 100 KiB (30 MiB): past the reply's inline budget, the
   * rest through the store; and all 300 back as arguments */
  enum { NB = 300 };
  o.num_returns = NB;
  CHECK_EQ(rd_submit(returns_big, RD_NO_ARGS, &o, r), 0);
  CHECK_EQ(rd_get(r, NB, b, 60000), 0);
  for (int i = 0; i < NB; i++) {
    CHECK_EQ(b[i].size, WIDE_SZ);
    const unsigned char *p = b[i].data;
    CHECK(p[0] == (i & 0xff) && p[WIDE_SZ - 1] == (i & 0xff));
    rd_buf_release(&b[i]);
    v[i] = rd_arg_ref(r[i]);
  }
  rd_ref n;
  CHECK_EQ(rd_submit(check_big_args, v, NB, NULL, &n), 0);
  CHECK_EQ(get_long(n), NB);
  /* 300 values of 100 KiB by value: past the task's inline budget, the
   * rest through the store */
  static unsigned char data[NB][WIDE_SZ];
  for (int i = 0; i < NB; i++) {
    memset(data[i], i & 0xff, WIDE_SZ);
    v[i] = rd_arg_bytes(data[i], WIDE_SZ);
  }
  CHECK_EQ(rd_submit(check_big_args, v, NB, NULL, &n), 0);
  CHECK_EQ(get_long(n), NB);
  /* an actor call with 1000 arguments and 100 returns */
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  rd_actor a;
  CHECK_EQ(rd_actor_create(Wide, RD_NO_ARGS, &ao, &a), 0);
  for (long i = 0; i < 1000; i++) v[i] = rd_arg_bytes(&data[0][0], (size_t)(i % 3) * 8);   /* 0, 8, 16 bytes */
  o.num_returns = 100;
  CHECK_EQ(rd_actor_call(a, Wide_sizes, v, 1000, &o, r), 0);
  for (int i = 0; i < 100; i++) CHECK_EQ(get_long(r[i]), 8 * 333 + 16 * 333 + i);   /* 333 of 8 bytes, 333 of 16 */
  for (int i = 0; i < NB; i++) rd_ref_release(r[i]);
  /* 700 small objects put by this process (inline here) as arguments of a
   * task and of an actor call: 70 MiB cannot travel in one message, so what
   * passes the budget is asked for by the worker (until 2026-12-07 the
   * task failed with RD_E2BIG) */
  static unsigned char one_val[WIDE_SZ];
  for (int i = 0; i < 700; i++) {
    memset(one_val, i & 0xff, WIDE_SZ);
    CHECK_EQ(rd_put(one_val, WIDE_SZ, &r[i]), 0);
    v[i] = rd_arg_ref(r[i]);
  }
  CHECK_EQ(rd_submit(check_big_args, v, 700, NULL, &n), 0);
  CHECK_EQ(get_long(n), 700);
  o.num_returns = 1;
  rd_ref an;
  CHECK_EQ(rd_actor_call(a, Wide_sizes, v, 700, &o, &an), 0);
  CHECK_EQ(get_long(an), 700L * WIDE_SZ);
  rd_ref_release(an);
  rd_ref_release(n);
  for (int i = 0; i < 700; i++) rd_ref_release(r[i]);
  /* the limits */
  o.num_returns = RD_MAX_RETURNS + 1;
  CHECK_EQ(rd_submit(returns_i, RD_NO_ARGS, &o, r), RD_EINVAL);
  static rd_value too_many[RD_MAX_ARGS + 1];
  long one = 1;
  for (int i = 0; i <= RD_MAX_ARGS; i++) too_many[i] = rd_arg_bytes(&one, sizeof(one));
  CHECK_EQ(rd_submit(sum_longs, too_many, RD_MAX_ARGS + 1, NULL, &n), RD_EINVAL);
  CHECK_EQ(rd_submit(sum_longs, too_many, RD_MAX_ARGS, NULL, &n), 0);   /* the most: 65536 by value */
  CHECK_EQ(get_long(n), RD_MAX_ARGS);
  rd_shutdown();
  return 0;
}

/* (below) run `raydist ARGS` into out; this process's embedded node's part
 * of such an answer. */
static int run_cli(const char *args, char *out, size_t cap);
static char *own_node(char *out);

/* The checksum task's sum of p[0..n), computed here. */
static long checksum_of(const unsigned char *p, size_t n) {
  unsigned long s = 1469598103934665603ul;
  for (size_t i = 0; i < n; i += 4096) s = (s ^ p[i]) * 1099511628211ul;
  if (n) s = (s ^ p[n - 1]) * 1099511628211ul;
  return (long)(s ^ n);
}

static int t_big_objects(void) {
  init_with_store(512ull << 20);
  size_t n = 100u << 20;
  unsigned char *p = malloc(n);
  CHECK(p);
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 7);
  rd_ref r;
  CHECK_EQ(rd_put(p, n, &r), 0);
  rd_buf b;
  CHECK_EQ(rd_get(&r, 1, &b, 10000), 0);
  CHECK_EQ(b.size, n);
  CHECK(memcmp(b.data, p, n) == 0);
  /* zero copy: the view is a read-only mapping of the segment, not a copy */
  pid_t child = fork();
  if (child == 0) {
    signal(SIGSEGV, SIG_DFL);
    ((volatile unsigned char *)b.data)[0] = 1;   /* must fault */
    _exit(0);                                    /* reached only if the write succeeded */
  }
  int st;
  waitpid(child, &st, 0);
  /* killed by SIGSEGV (or, under AddressSanitizer, reported and exited non-zero) */
  CHECK(!(WIFEXITED(st) && WEXITSTATUS(st) == 0));
  CHECK(WIFSIGNALED(st) ? WTERMSIG(st) == SIGSEGV : 1);
  rd_buf_release(&b);
  /* a 100 MiB argument read in a worker, and a 100 MiB result made in a worker */
  rd_ref sum;
  CHECK_EQ(rd_submit(checksum, RD_ARGS(rd_arg_ref(r)), NULL, &sum), 0);
  unsigned long s = 1469598103934665603ul;
  for (size_t i = 0; i < n; i += 4096) s = (s ^ p[i]) * 1099511628211ul;
  s = (s ^ p[n - 1]) * 1099511628211ul;
  s ^= n;
  CHECK_EQ(get_long(sum), (long)s);
  long seed = 3;
  rd_ref big;
  CHECK_EQ(rd_submit(make_big, RD_ARGS(rd_arg_bytes(&n, sizeof(n)), rd_arg_bytes(&seed, sizeof(seed))), NULL, &big), 0);
  CHECK_EQ(rd_get(&big, 1, &b, 60000), 0);
  CHECK_EQ(b.size, n);
  for (size_t i = 0; i < n; i += 997) CHECK_EQ(((const unsigned char *)b.data)[i], (unsigned char)(i * 31 + 3));
  rd_buf_release(&b);
  /* a by-value argument above the inline limit travels through the store */
  {
    size_t an = 2u << 20;
    unsigned char *arg = malloc(an);
    for (size_t i = 0; i < an; i++) arg[i] = (unsigned char)(i * 13);
    unsigned long want = 1469598103934665603ul;
    for (size_t i = 0; i < an; i += 4096) want = (want ^ arg[i]) * 1099511628211ul;
    want = (want ^ arg[an - 1]) * 1099511628211ul;
    want ^= an;
    rd_ref cs;
    CHECK_EQ(rd_submit(checksum, RD_ARGS(rd_arg_bytes(arg, an)), NULL, &cs), 0);
    free(arg);   /* the runtime copied it */
    CHECK_EQ(get_long(cs), (long)want);
    rd_ref_release(cs);
    usleep(50000);
    rd_node_info ni;
    CHECK_EQ(rd_node_info_get(&ni), 0);
    /* only r (100 MiB) and big (100 MiB) remain in the store: the argument was freed */
    CHECK_EQ(ni.store_used, 2 * (uint64_t)n);
  }
  /* zero-copy put */
  void *w;
  rd_ref zc;
  CHECK_EQ(rd_put_begin(1u << 20, &w, &zc), 0);
  memset(w, 0xab, 1u << 20);
  CHECK_EQ(rd_put_seal(zc), 0);
  CHECK_EQ(rd_get(&zc, 1, &b, 1000), 0);
  CHECK_EQ(((const unsigned char *)b.data)[12345], 0xab);
  rd_buf_release(&b);
  /* an open put released before its seal, with a task waiting for it (in
   * the store and inline): it can never be sealed, so the task fails
   * saying why, instead of waiting for ever; the store room goes */
  for (int k = 0; k < 2; k++) {
    rd_ref open, dep;
    CHECK_EQ(rd_put_begin(k ? 100 : 8u << 20, &w, &open), 0);
    CHECK_EQ(rd_submit(checksum, RD_ARGS(rd_arg_ref(open)), NULL, &dep), 0);
    rd_ref_release(open);
    CHECK_EQ(rd_get(&dep, 1, &b, 10000), RD_EOBJECT_LOST);
    CHECK(memmem(b.data, b.size, "released before rd_put_seal", 27) != NULL);
    rd_buf_release(&b);
    rd_ref_release(dep);
    CHECK_EQ(rd_put_seal(open), RD_EINVAL);
  }
  /* an object larger than the store and its fallback region (half the
   * machine's memory by default) is refused with E2BIG; one larger than
   * the store alone goes past it (store_fallback) */
  void *huge;
  rd_ref hr, hsum;
  CHECK_EQ(rd_put_begin((uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE), &huge, &hr), RD_E2BIG);
  CHECK_EQ(rd_put_begin(600ull << 20, &huge, &hr), 0);
  memset(huge, 7, 600ull << 20);
  CHECK_EQ(rd_put_seal(hr), 0);
  CHECK_EQ(rd_submit(checksum, RD_ARGS(rd_arg_ref(hr)), NULL, &hsum), 0);
  CHECK_EQ(get_long(hsum), checksum_of(huge, 600ull << 20));
  rd_ref_release(hsum);
  rd_ref_release(hr);
  rd_ref_release(r); rd_ref_release(sum); rd_ref_release(big); rd_ref_release(zc);
  free(p);
  rd_shutdown();
  return 0;
}

/* Put k objects of n bytes, object i filled with i + 1. */
static int put_filled(rd_ref *refs, int k, size_t n) {
  unsigned char *p = malloc(n);
  CHECK(p != NULL);
  for (int i = 0; i < k; i++) {
    memset(p, i + 1, n);
    CHECK_EQ(rd_put(p, n, &refs[i]), 0);
  }
  free(p);
  return 0;
}

/* Every object comes back intact (spilled ones restored transparently). */
static int check_filled(const rd_ref *refs, int k, size_t n) {
  for (int i = 0; i < k; i++) {
    rd_buf b;
    CHECK_EQ(rd_get(&refs[i], 1, &b, 30000), 0);
    CHECK_EQ(b.size, n);
    const unsigned char *q = b.data;
    for (size_t j = 0; j < n; j += 4093) CHECK_EQ(q[j], i + 1);
    rd_buf_release(&b);
  }
  return 0;
}

static int t_spill(void) {
  init_with_store(32u << 20);
  enum { K = 12 };
  size_t n = 6u << 20;   /* 72 MiB of objects in a 32 MiB store */
  rd_ref refs[K];
  CHECK_EQ(put_filled(refs, K, n), 0);
  rd_node_info ni;
  CHECK_EQ(rd_node_info_get(&ni), 0);
  CHECK(ni.store_spill_count >= 6);
  CHECK(ni.store_used <= 32u << 20);
  CHECK_EQ(check_filled(refs, K, n), 0);
  /* a worker reads a spilled object too */
  rd_ref c;
  CHECK_EQ(rd_submit(checksum, RD_ARGS(rd_arg_ref(refs[0])), NULL, &c), 0);
  (void)get_long(c);
  CHECK_EQ(rd_node_info_get(&ni), 0);
  CHECK(ni.store_restore_count >= 1);
  /* releasing refs frees the objects */
  for (int k = 0; k < K; k++) rd_ref_release(refs[k]);
  rd_ref_release(c);
  usleep(100000);
  CHECK_EQ(rd_node_info_get(&ni), 0);
  CHECK_EQ(ni.store_used, 0);
  rd_shutdown();
  return 0;
}

/* Objects that fill more than 80% of the store go to disk in the background,
 * before any create needs the room; RAYDIST_SPILL_THRESHOLD=0 turns that off
 * (spilling then happens only inside a create that does not fit). */
static int spill_background_run(const char *threshold, int *spills, uint64_t *used) {
  if (threshold) setenv("RAYDIST_SPILL_THRESHOLD", threshold, 1);   /* the node inherits it */
  init_with_store(32u << 20);
  unsetenv("RAYDIST_SPILL_THRESHOLD");
  enum { K = 5 };
  size_t n = 6u << 20;   /* 30 MiB of objects: they fit in 32 MiB */
  rd_ref refs[K];
  CHECK_EQ(put_filled(refs, K, n), 0);
  rd_node_info ni;
  for (int i = 0; i < 100; i++) {   /* up to 2 s for the spill thread */
    CHECK_EQ(rd_node_info_get(&ni), 0);
    if (ni.store_used <= (32u << 20) * 8 / 10) break;
    usleep(20000);
  }
  *spills = (int)ni.store_spill_count;
  *used = ni.store_used;
  /* one get of all five: the spilled ones are read back, then all pinned */
  rd_buf bufs[K];
  CHECK_EQ(rd_get(refs, K, bufs, 30000), 0);
  for (int k = 0; k < K; k++) {
    CHECK_EQ(bufs[k].size, n);
    CHECK_EQ(((const unsigned char *)bufs[k].data)[n - 1], k + 1);
    rd_buf_release(&bufs[k]);
  }
  CHECK_EQ(check_filled(refs, K, n), 0);
  for (int k = 0; k < K; k++) rd_ref_release(refs[k]);
  rd_shutdown();
  return 0;
}

static int t_spill_background(void) {
  int spills;
  uint64_t used;
  CHECK_EQ(spill_background_run(NULL, &spills, &used), 0);
  printf("default threshold: %d spills, %llu bytes in memory\n", spills, (unsigned long long)used);
  CHECK(spills >= 1);
  CHECK(used <= (32u << 20) * 8 / 10);
  CHECK_EQ(spill_background_run("0", &spills, &used), 0);
  printf("threshold 0: %d spills, %llu bytes in memory\n", spills, (unsigned long long)used);
  CHECK_EQ(spills, 0);
  CHECK(used >= 30u << 20);
  return 0;
}

/* The objects of a process that is gone are deleted: nobody else can name
 * them.  The driver's own objects stay. */
static int t_owner_gone(void) {
  init_with_store(64u << 20);
  rd_ref mine;
  CHECK_EQ(put_filled(&mine, 1, 8u << 20), 0);
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.max_retries = 0;
  rd_ref r;
  CHECK_EQ(rd_submit(put_then_die, RD_NO_ARGS, &o, &r), 0);
  rd_buf b;
  CHECK(rd_get(&r, 1, &b, 30000) != 0);   /* its worker died */
  rd_buf_release(&b);   /* the error message */
  rd_ref_release(r);
  rd_node_info ni;
  for (int i = 0; i < 100; i++) {
    CHECK_EQ(rd_node_info_get(&ni), 0);
    if (ni.store_used <= 8u << 20) break;
    usleep(20000);
  }
  printf("store after the worker died: %llu bytes\n", (unsigned long long)ni.store_used);
  CHECK_EQ(ni.store_used, 8u << 20);   /* only the driver's object */
  CHECK_EQ(check_filled(&mine, 1, 8u << 20), 0);
  rd_ref_release(mine);
  rd_shutdown();
  return 0;
}

static int t_store_full(void) {
  init_store(16u << 20, -1, "");   /* no spilling: pinned objects cannot move, nor go past the store (store_fallback) */
  size_t n = 6u << 20;
  void *p = calloc(1, n);
  rd_ref a, b, c;
  CHECK_EQ(rd_put(p, n, &a), 0);
  CHECK_EQ(rd_put(p, n, &b), 0);
  CHECK_EQ(rd_put(p, n, &c), RD_ESTORE_FULL);
  rd_ref_release(a);   /* frees room */
  usleep(50000);
  CHECK_EQ(rd_put(p, n, &c), 0);
  free(p);
  rd_shutdown();
  return 0;
}

/* Fallback allocation: objects the store cannot place even by spilling
 * (larger than it; the store full of objects held, with no spilling) go
 * past its capacity, readable by every process of the node, and their
 * memory goes back when they go. */
static int t_store_fallback(void) {
  init_store(16u << 20, 64u << 20, "");
  rd_node_info ni;
  CHECK_EQ(rd_node_info_get(&ni), 0);
  CHECK_EQ(ni.store_fallback_limit, 64u << 20);
  CHECK_EQ(ni.store_fallback_used, 0);
  size_t n = 6u << 20, nbig = 40u << 20;
  unsigned char *p = malloc(nbig);
  CHECK(p);
  for (size_t i = 0; i < nbig; i++) p[i] = (unsigned char)(i * 13 + (i >> 12));
  rd_ref a, b, c, big, x;
  CHECK_EQ(rd_put(p, n, &a), 0);
  CHECK_EQ(rd_put(p + 1, n, &b), 0);
  CHECK_EQ(rd_put(p + 2, n, &c), 0);         /* a and b hold 12 of 16 MiB: past it */
  CHECK_EQ(rd_put(p, nbig, &big), 0);        /* larger than the store */
  CHECK_EQ(rd_node_info_get(&ni), 0);
  CHECK_EQ(ni.store_fallback_count, 2);
  CHECK_EQ(ni.store_fallback_used, n + nbig);
  CHECK(ni.store_used <= 16u << 20);
  /* read in a worker and here */
  rd_ref sums[2];
  CHECK_EQ(rd_submit(checksum, RD_ARGS(rd_arg_ref(c)), NULL, &sums[0]), 0);
  CHECK_EQ(rd_submit(checksum, RD_ARGS(rd_arg_ref(big)), NULL, &sums[1]), 0);
  CHECK_EQ(get_long(sums[0]), checksum_of(p + 2, n));
  CHECK_EQ(get_long(sums[1]), checksum_of(p, nbig));
  rd_buf v;
  CHECK_EQ(rd_get(&big, 1, &v, 10000), 0);
  CHECK_EQ(v.size, nbig);
  CHECK(memcmp(v.data, p, nbig) == 0);
  rd_buf_release(&v);
  /* a worker's result that does not fit in the store either */
  size_t nres = 12u << 20;
  long seed = 5;
  rd_ref made;
  CHECK_EQ(rd_submit(make_big, RD_ARGS(rd_arg_bytes(&nres, sizeof(nres)), rd_arg_bytes(&seed, sizeof(seed))), NULL,
                     &made), 0);
  CHECK_EQ(rd_get(&made, 1, &v, 60000), 0);
  CHECK_EQ(v.size, nres);
  for (size_t i = 0; i < nres; i += 991) CHECK_EQ(((const unsigned char *)v.data)[i], (unsigned char)(i * 31 + 5));
  rd_buf_release(&v);
  CHECK_EQ(rd_node_info_get(&ni), 0);
  CHECK_EQ(ni.store_fallback_used, n + nbig + nres);
  /* what raydist status and raydist memory say of it */
  static char out[1 << 16];
  char *me;
  CHECK_EQ(run_cli("status", out, sizeof(out)), 0);
  CHECK((me = own_node(out)) != NULL && strstr(me, "; fallback region 58.0 MiB in 3 objects") != NULL);
  CHECK_EQ(run_cli("memory", out, sizeof(out)), 0);
  CHECK((me = own_node(out)) != NULL && strstr(me, "fallback region: 58.0 MiB in 3 objects past the store (of 64.0 MiB)"));
  CHECK(strstr(me, "40.000 MiB  fallback ") != NULL);
  /* the region full now (58 of 64 MiB), and more than store and region together */
  CHECK_EQ(rd_put(p, 20u << 20, &x), RD_ESTORE_FULL);
  CHECK_EQ(rd_put(p, 81u << 20, &x), RD_E2BIG);
  /* all released: the region is empty again */
  rd_ref_release(c);
  rd_ref_release(big);
  rd_ref_release(made);
  for (int i = 0; i < 100; i++) {
    CHECK_EQ(rd_node_info_get(&ni), 0);
    if (ni.store_fallback_used == 0) break;
    usleep(50000);
  }
  CHECK_EQ(ni.store_fallback_used, 0);
  CHECK_EQ(ni.store_fallback_count, 3);
  CHECK_EQ(rd_put(p, 20u << 20, &x), 0);   /* past the store again: room now */
  rd_ref_release(x);
  rd_ref_release(a);
  rd_ref_release(b);
  free(p);
  rd_shutdown();
  return 0;
}

/* Objects larger than the store, more of them than its fallback region
 * holds: the region spills its least recently used ones to disk to make
 * room, and each is read back (into the region again) by the task that
 * reads it.  A batch job putting its shards before it works on them. */
static int t_store_fallback_spill(void) {
  init_store(16u << 20, 48u << 20, NULL);
  enum { K = 6 };
  size_t n = 20u << 20;
  unsigned char *p = malloc(n + K);
  CHECK(p);
  for (size_t i = 0; i < n + K; i++) p[i] = (unsigned char)(i * 29 + (i >> 11));
  rd_ref r[K], sums[K];
  for (int k = 0; k < K; k++) CHECK_EQ(rd_put(p + k, n, &r[k]), 0);   /* 120 MiB: past a 48 MiB region */
  rd_node_info ni;
  CHECK_EQ(rd_node_info_get(&ni), 0);
  CHECK(ni.store_spill_count >= 4);
  CHECK(ni.store_fallback_used <= 48u << 20);
  for (int k = 0; k < K; k++) CHECK_EQ(rd_submit(checksum, RD_ARGS(rd_arg_ref(r[k])), NULL, &sums[k]), 0);
  for (int k = 0; k < K; k++) CHECK_EQ(get_long(sums[k]), checksum_of(p + k, n));
  CHECK_EQ(rd_node_info_get(&ni), 0);
  CHECK(ni.store_restore_count >= 4);
  printf("6 x 20 MiB past a 16 MiB store and a 48 MiB region: %llu spills, %llu restores, %llu fallback allocations\n",
         (unsigned long long)ni.store_spill_count, (unsigned long long)ni.store_restore_count,
         (unsigned long long)ni.store_fallback_count);
  for (int k = 0; k < K; k++) rd_ref_release(r[k]);
  free(p);
  rd_shutdown();
  return 0;
}

static int t_gpu_packing(void) {
  rd_config cfg;
  rd_config_init(&cfg);
  cfg.num_gpus = 1;   /* one simulated GPU of 8 GB */
  cfg.gpu_memory_bytes = 8000000000ull;
  init_or_die(&cfg);
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.num_cpus = 0;
  o.num_gpus = 0.25;
  enum { K = 5 };
  rd_ref refs[K];
  long ms = 600;
  for (int i = 0; i < K; i++) CHECK_EQ(rd_submit(sleep_span, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms))), &o, &refs[i]), 0);
  span s[K];
  for (int i = 0; i < K; i++) {
    rd_buf b;
    CHECK_EQ(rd_get(&refs[i], 1, &b, 60000), 0);
    memcpy(&s[i], b.data, sizeof(span));
    rd_buf_release(&b);
    CHECK_EQ(s[i].ngpus, 1);
    CHECK_EQ(s[i].gpu0, 0);
    CHECK_EQ(s[i].frac0, 2500);
    CHECK(strcmp(s[i].visible, "0") == 0);
    CHECK_EQ(s[i].gpu_mem, 2000000000ull);   /* a quarter of the GPU's memory */
    CHECK(strcmp(s[i].gpu_mem_env, "2000000000") == 0);
  }
  /* at most four ran at once, and some task started only after another ended */
  int max_conc = 0, waited = 0;
  for (int i = 0; i < K; i++) {
    int conc = 0;
    for (int j = 0; j < K; j++)
      if (s[j].start <= s[i].start + 1e-6 && s[j].end > s[i].start + 1e-6) conc++;
    if (conc > max_conc) max_conc = conc;
    for (int j = 0; j < K; j++)
      if (j != i && s[i].start >= s[j].end - 0.01) waited = 1;
  }
  CHECK(max_conc <= 4);
  CHECK(max_conc >= 2);
  CHECK(waited);
  /* a CPU task sees no GPU */
  rd_task_opts c;
  rd_task_opts_init(&c);
  rd_ref r;
  ms = 1;
  CHECK_EQ(rd_submit(sleep_span, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms))), &c, &r), 0);
  rd_buf b;
  CHECK_EQ(rd_get(&r, 1, &b, 30000), 0);
  span cs;
  memcpy(&cs, b.data, sizeof(cs));
  rd_buf_release(&b);
  CHECK_EQ(cs.ngpus, 0);
  CHECK_EQ(cs.gpu_mem, 0);
  CHECK(strcmp(cs.gpu_mem_env, "(unset)") == 0);
  /* a whole GPU: all of it (the same workers, so the variable follows each lease) */
  o.num_gpus = 1;
  CHECK_EQ(rd_submit(sleep_span, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms))), &o, &r), 0);
  CHECK_EQ(rd_get(&r, 1, &b, 30000), 0);
  memcpy(&cs, b.data, sizeof(cs));
  rd_buf_release(&b);
  CHECK_EQ(cs.gpu_mem, 8000000000ull);
  CHECK(strcmp(cs.gpu_mem_env, "8000000000") == 0);
  rd_shutdown();
  return 0;
}

static int t_infeasible(void) {
  rd_config cfg;
  rd_config_init(&cfg);
  /* bad configurations are refused before anything starts */
  cfg.num_cpus = 2.5;
  CHECK_EQ(rd_init(&cfg), RD_EINVAL);
  cfg.num_cpus = 0;
  cfg.custom_resources = "accel";
  CHECK_EQ(rd_init(&cfg), RD_EINVAL);
  cfg.custom_resources = NULL;
  cfg.num_gpus = 0.5;
  CHECK_EQ(rd_init(&cfg), RD_EINVAL);
  rd_config_init(&cfg);
  cfg.job_weight = -1;   /* fair-share weights: above 0, at most 1000 */
  CHECK_EQ(rd_init(&cfg), RD_EINVAL);
  cfg.job_weight = 1001;
  CHECK_EQ(rd_init(&cfg), RD_EINVAL);
  cfg.job_weight = 0.0 / 0.0;
  CHECK_EQ(rd_init(&cfg), RD_EINVAL);
  cfg.job_weight = 0;
  setenv("RAYDIST_JOB_WEIGHT", "heavy", 1);
  CHECK_EQ(rd_init(&cfg), RD_EINVAL);
  setenv("RAYDIST_JOB_WEIGHT", "0", 1);
  CHECK_EQ(rd_init(&cfg), RD_EINVAL);
  unsetenv("RAYDIST_JOB_WEIGHT");
  rd_config_init(&cfg);
  cfg.num_gpus = 1;
  cfg.job_weight = 2.5;
  cfg.custom_resources = "accel=2";
  init_or_die(&cfg);
  rd_task_opts o;
  rd_task_opts_init(&o);
  rd_ref r;
  long v = 1;
  o.num_gpus = 2;
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&v, sizeof(v))), &o, &r), RD_EINFEASIBLE);
  o.num_gpus = 0;
  o.num_cpus = 64;
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&v, sizeof(v))), &o, &r), RD_EINFEASIBLE);
  o.num_cpus = 1.5;
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&v, sizeof(v))), &o, &r), RD_EINVAL);
  o.num_cpus = 1;
  o.resources = "tpu=1";
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&v, sizeof(v))), &o, &r), RD_EINFEASIBLE);
  o.resources = "accel=3";
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&v, sizeof(v))), &o, &r), RD_EINFEASIBLE);
  o.resources = "accel=bogus";
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&v, sizeof(v))), &o, &r), RD_EINVAL);
  o.resources = "accel=2";   /* feasible: runs */
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&v, sizeof(v))), &o, &r), 0);
  CHECK_EQ(get_long(r), 2);
  o.resources = NULL;
  o.num_returns = 0;
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&v, sizeof(v))), &o, &r), RD_EINVAL);
  /* unknown names, wrong argument counts, dead refs */
  CHECK_EQ(rd_submit_by_name("no_such_function", RD_NO_ARGS, NULL, &r), RD_ENOFUNC);
  CHECK_EQ(rd_submit(add_one, RD_NO_ARGS, NULL, &r), 0);
  rd_buf b;
  CHECK_EQ(rd_get(&r, 1, &b, 30000), RD_ETASK);
  CHECK(strstr((const char *)b.data, "takes 1 argument") != NULL);
  rd_buf_release(&b);
  rd_ref dead = {0x123456789ull};
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_ref(dead)), NULL, &r), RD_EINVAL);
  CHECK_EQ(rd_get(&dead, 1, &b, 10), RD_EINVAL);
  CHECK_EQ(rd_wait(&dead, 1, 1, 10, NULL), RD_EINVAL);
  CHECK_EQ(rd_init(NULL), RD_ESTATE);
  rd_shutdown();
  CHECK_EQ(rd_submit(add_one, RD_NO_ARGS, NULL, &r), RD_ESTATE);
  /* two functions registered under one name: rd_init reports it */
  static rd_function dup = {"add_one", NULL, NULL};
  dup.fn = get_pid_impl;
  rd_function_register_(&dup);
  CHECK_EQ(rd_init(NULL), RD_EEXIST);
  return 0;
}

static int t_crash_retry(void) {
  init_or_die(NULL);
  rd_ref r;
  CHECK_EQ(rd_submit(crash_once, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(get_long(r), 1);   /* ran again on attempt 1 */
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.max_retries = 1;
  CHECK_EQ(rd_submit(crash_always, RD_NO_ARGS, &o, &r), 0);
  rd_buf b;
  CHECK_EQ(rd_get(&r, 1, &b, 60000), RD_EWORKER_DIED);
  CHECK(strstr((const char *)b.data, "crash_always") != NULL);
  CHECK(strstr((const char *)b.data, "attempt 2 of 2") != NULL);
  rd_buf_release(&b);
  o.max_retries = 0;
  CHECK_EQ(rd_submit(crash_once, RD_NO_ARGS, &o, &r), 0);
  CHECK_EQ(rd_get(&r, 1, &b, 60000), RD_EWORKER_DIED);
  rd_buf_release(&b);
  /* crashed workers are replaced and the node keeps serving */
  for (int i = 0; i < 20; i++) {
    long v = i;
    CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&v, sizeof(v))), NULL, &r), 0);
    CHECK_EQ(get_long(r), i + 1);
  }
  rd_node_info ni;
  CHECK_EQ(rd_node_info_get(&ni), 0);
  CHECK(ni.num_workers >= 2);
  rd_shutdown();
  return 0;
}

/* A worker that crashes in a task says how (src/stack.c's crash
 * report): rd_get's message names the signal (or exit status) in place of
 * "died", and the worker's stderr (its file) has a report with the task and
 * its stack.  Under AddressSanitizer the sanitizer keeps SIGSEGV (and
 * prints its own report): that case is left out there. */
static volatile uintptr_t crash_addr = 16;   /* a fault the compiler does not see coming */

RD_REMOTE(crash_segv) {
  (void)call;
  *(volatile int *)crash_addr = 1;
  return 0;
}

RD_REMOTE(crash_exit) {
  (void)call;
  exit(7);
}

/* f run once (no retry): its failure's message into m, its worker's pid. */
static void crash_message(rd_function *f, int retries, char *m, size_t len, long *pid) {
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.max_retries = retries;
  rd_ref r;
  rd_buf b;
  CHECK_EQ(rd_submit(f, RD_NO_ARGS, &o, &r), 0);
  CHECK_EQ(rd_get(&r, 1, &b, 60000), RD_EWORKER_DIED);
  snprintf(m, len, "%s", (const char *)b.data);
  rd_buf_release(&b);
  rd_ref_release(r);
  printf("%s\n", m);
  const char *p = strstr(m, "(pid ");
  CHECK(p != NULL);
  *pid = atol(p + 5);
}

/* The worker pid's stderr file, once it holds `want` and after it `then`
 * (NULL: anything; 5 s at most: its lines reach the file through the
 * node, a write at a time). */
static int worker_err_has_then(long pid, const char *want, const char *then, char *text, size_t len) {
  char dir[600], suffix[32];
  snprintf(dir, sizeof(dir), "%s/logs", rd_session_dir());
  snprintf(suffix, sizeof(suffix), "-%ld.err", pid);
  for (int i = 0; i < 100; i++) {
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
      size_t n = strlen(e->d_name), k = strlen(suffix);
      if (n < k || strcmp(e->d_name + n - k, suffix) != 0) continue;
      char path[900];
      snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
      FILE *f = fopen(path, "r");
      size_t got = f ? fread(text, 1, len - 1, f) : 0;
      if (f) fclose(f);
      text[got] = 0;
      const char *at = strstr(text, want);
      if (at && (!then || strstr(at, then))) {
        closedir(d);
        return 1;
      }
    }
    if (d) closedir(d);
    usleep(50000);
  }
  return 0;
}

static int worker_err_has(long pid, const char *want, char *text, size_t len) {
  return worker_err_has_then(pid, want, NULL, text, len);
}

RD_REMOTE_DECLARE(crash_in_userlib);   /* rt_userlib.c */

static int t_crash_report(void) {
  init_or_die(NULL);
  char m[600], want[300], text[16384];
  long pid;
  crash_message(crash_always, 0, m, sizeof(m), &pid);   /* abort() */
  CHECK(strstr(m, "died of SIGABRT (Aborted) while running task 'crash_always' (attempt 1 of 1); its stack is on "
                  "its stderr") != NULL);
  snprintf(want, sizeof(want), "*** raydist worker %ld: died of SIGABRT (Aborted) while running task 'crash_always' (",
           pid);
  CHECK(worker_err_has_then(pid, want, "(abort+0x", text, sizeof(text)));   /* libc's exported abort() among its frames */
  const char *stack = strstr(strstr(text, want), "; its stack:\n");
  CHECK(stack != NULL);
  CHECK(strstr(stack, ")[0x") != NULL);   /* a frame, as backtrace_symbols_fd writes it */
  /* the task's own function, static in a program without -rdynamic, named
   * from the program's symbol table (symbolize.c) */
  CHECK(strstr(stack, "rt_test(crash_always_impl+0x") != NULL);
  /* and a function of a user's shared library, static too (its frame may
   * be its cold part: userlib_deep.cold) */
  crash_message(crash_in_userlib, 0, m, sizeof(m), &pid);
  snprintf(want, sizeof(want), "*** raydist worker %ld: died of SIGABRT (Aborted) while running task "
           "'crash_in_userlib' (", pid);
  CHECK(worker_err_has_then(pid, want, "librt_userlib.so(userlib_deep", text, sizeof(text)));
  CHECK(strstr(strstr(text, want), "librt_userlib.so(crash_in_userlib_impl+0x") != NULL);
  crash_message(crash_exit, 0, m, sizeof(m), &pid);
  CHECK(strstr(m, "exited with status 7 (exit() called) while running task 'crash_exit' (attempt 1 of 1)") != NULL);
  snprintf(want, sizeof(want), "*** raydist worker %ld: exited with status 7 (exit() called) while running task "
           "'crash_exit' (", pid);
  CHECK(worker_err_has(pid, want, text, sizeof(text)));
  crash_message(crash_always, 1, m, sizeof(m), &pid);   /* retried: the last attempt's word */
  CHECK(strstr(m, "died of SIGABRT (Aborted) while running task 'crash_always' (attempt 2 of 2)") != NULL);
  snprintf(want, sizeof(want), "'crash_always' (0000-%08x-", (unsigned)getpid());   /* the task's id, attempt 2 */
  CHECK(worker_err_has_then(pid, want, ", attempt 2); its stack:", text, sizeof(text)));
#ifndef __SANITIZE_ADDRESS__
  crash_message(crash_segv, 0, m, sizeof(m), &pid);
  CHECK(strstr(m, "died of SIGSEGV (Segmentation fault) at address 0x10 while running task 'crash_segv'") != NULL);
  snprintf(want, sizeof(want), "*** raydist worker %ld: died of SIGSEGV (Segmentation fault) at address 0x10 while "
           "running task 'crash_segv' (", pid);
  CHECK(worker_err_has(pid, want, text, sizeof(text)));
#endif
  /* the node goes on: the crashed workers are replaced */
  CHECK_EQ(add_one_run(41), 42);
  rd_shutdown();
  return 0;
}

/* A worker that ends without a report of its own (a SIGKILL, a signal it
 * has no handler for, _exit) is said as its node saw it, not "died": the
 * owner waits for the node's word on how it ended.  The kernel's OOM
 * killer is named as the likely killer when it killed while the worker ran
 * (t_kernel_oom). */
RD_REMOTE(end_kill) {
  (void)call;
  raise(SIGKILL);
  return 0;
}

RD_REMOTE(end_term) {
  (void)call;
  raise(SIGTERM);
  return 0;
}

RD_REMOTE(end_status) {
  (void)call;
  _exit(3);
}

/* Closes every file past stderr (its lease's socket, its node's
 * connection), as a careless daemonizing library would, and waits. */
RD_REMOTE(end_closefds) {
  (void)call;
  closefrom(3);
  sleep(30);
  return 0;
}

/* The machine's OOM kills so far (/proc/vmstat). */
static unsigned long long oom_kills_now(void) {
  FILE *f = fopen("/proc/vmstat", "r");
  char line[128];
  unsigned long long v = 0;
  while (f && fgets(line, sizeof(line), f))
    if (sscanf(line, "oom_kill %llu", &v) == 1) break;
  if (f) fclose(f);
  return v;
}

static int t_exit_word(void) {
  init_or_die(NULL);
  char m[600];
  long pid;
  unsigned long long oom0 = oom_kills_now();
  crash_message(end_kill, 0, m, sizeof(m), &pid);
  CHECK(strstr(m, "worker process (pid ") == m);
  if (oom_kills_now() == oom0)   /* else the kernel's OOM killer may be named */
    CHECK(strstr(m, ") was killed by SIGKILL, not by raydist (a kill -9, or the kernel) while running task 'end_kill' "
                    "(attempt 1 of 1)") != NULL);
  /* the node's record: a crash (Ray's SYSTEM_ERROR), not a stop it meant */
  static char out[65536];
  char want[64], *me;
  CHECK_EQ(run_cli("list workers", out, sizeof(out)), 0);
  CHECK((me = own_node(out)) != NULL);
  snprintf(want, sizeof(want), " %ld SYSTEM_ERROR ", pid);
  if (!strstr(me, want)) printf("%s", me);
  CHECK(strstr(me, want) != NULL);
  crash_message(end_term, 0, m, sizeof(m), &pid);
  CHECK(strstr(m, "was killed by SIGTERM (Terminated; its stderr may say why) while running task 'end_term' (attempt "
                  "1 of 1)") != NULL);
  CHECK(strstr(m, "its stack is on its stderr") == NULL);
  crash_message(end_status, 0, m, sizeof(m), &pid);
  CHECK(strstr(m, "exited with status 3 (its stderr may say why) while running task 'end_status' (attempt 1 of 1)") !=
        NULL);
  CHECK(strstr(m, "its stack is on its stderr") == NULL);
  /* alive but cut off: its node stops it and says why */
  crash_message(end_closefds, 0, m, sizeof(m), &pid);
  CHECK(strstr(m, "was stopped by its node: it closed its connection to the node while running task 'end_closefds' "
                  "(attempt 1 of 1)") != NULL);
  /* retried: the last attempt's word */
  crash_message(end_status, 2, m, sizeof(m), &pid);
  CHECK(strstr(m, "exited with status 3 (its stderr may say why) while running task 'end_status' (attempt 3 of 3)") !=
        NULL);
  CHECK_EQ(add_one_run(41), 42);
  rd_shutdown();
  return 0;
}

/* Moves itself into the memory cgroup at its argument (a directory whose
 * limit is 64 MiB) and touches 512 MiB: the kernel's OOM killer kills it. */
RD_REMOTE(end_oom) {
  char dir[512], path[600];
  rd_buf a;
  if (rd_arg(call, 0, &a) != 0 || a.size >= sizeof(dir)) return rd_call_fail(call, "bad argument");
  memcpy(dir, a.data, a.size);
  dir[a.size] = 0;
  snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
  FILE *f = fopen(path, "w");
  if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0)
    return rd_call_fail(call, "cannot join the cgroup %s: %s", dir, strerror(errno));
  for (size_t i = 0; i < 512; i++) {
    char *p = malloc(1u << 20);
    if (!p) return rd_call_fail(call, "malloc failed");
    memset(p, (int)i, 1u << 20);
  }
  return rd_call_fail(call, "the cgroup's limit did not hold");
}

/* A memory cgroup of 64 MiB (no swap) made under this process's own (v1,
 * or v2 where the memory controller can be had there): its directory in
 * dir; 0 when none can be made (not root, no memory controller). */
static int make_small_memcg(char *dir, size_t len) {
  FILE *f = fopen("/proc/self/cgroup", "r");
  char line[600], v1[512] = "", v2[512] = "";
  while (f && fgets(line, sizeof(line), f)) {
    line[strcspn(line, "\n")] = 0;
    char *ctl = strchr(line, ':'), *path = ctl ? strchr(ctl + 1, ':') : NULL;
    if (!path) continue;
    *path++ = 0;
    ctl++;
    if (!strcmp(ctl, "memory")) snprintf(v1, sizeof(v1), "%s", path);
    if (!*ctl && !strcmp(line, "0")) snprintf(v2, sizeof(v2), "%s", path);
  }
  if (f) fclose(f);
  const char *limit_file = NULL, *swap_file = NULL;
  if (*v1) {
    snprintf(dir, len, "/sys/fs/cgroup/memory%s/rd-oom-%d", strcmp(v1, "/") ? v1 : "", (int)getpid());
    limit_file = "memory.limit_in_bytes";
  } else if (*v2) {
    snprintf(dir, len, "/sys/fs/cgroup%s/rd-oom-%d", strcmp(v2, "/") ? v2 : "", (int)getpid());
    limit_file = "memory.max";
    swap_file = "memory.swap.max";
  } else {
    return 0;
  }
  if (mkdir(dir, 0755) != 0) return 0;
  char path[700];
  snprintf(path, sizeof(path), "%s/%s", dir, limit_file);
  FILE *l = fopen(path, "w");
  int ok = l && fprintf(l, "%d\n", 64 << 20) > 0;
  if (l && fclose(l) != 0) ok = 0;
  if (ok && swap_file) {
    snprintf(path, sizeof(path), "%s/%s", dir, swap_file);
    if ((l = fopen(path, "w")) != NULL) {
      fprintf(l, "0\n");
      fclose(l);
    }
  }
  if (!ok) rmdir(dir);
  return ok;
}

static int t_kernel_oom(void) {
  init_or_die(NULL);   /* first: the workers (this program too) stop there */
  char dir[600];
  if (geteuid() != 0 || !make_small_memcg(dir, sizeof(dir))) {
    printf("SKIP: no memory cgroup can be made here\n");
    rd_shutdown();
    return 77;
  }
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.max_retries = 0;
  rd_ref r;
  rd_buf b;
  CHECK_EQ(rd_submit(end_oom, RD_ARGS(rd_arg_bytes(dir, strlen(dir))), &o, &r), 0);
  int rc = rd_get(&r, 1, &b, 60000);
  printf("%s: %s\n", rd_err_name(rc), rc == 0 ? "" : (const char *)b.data);
  CHECK_EQ(rc, RD_EWORKER_DIED);
  CHECK(strstr((const char *)b.data, "was killed by SIGKILL, most likely by the kernel's OOM killer (it killed ") !=
        NULL);
  CHECK(strstr((const char *)b.data, "dmesg names them) while running task 'end_oom' (attempt 1 of 1)") != NULL);
  rd_buf_release(&b);
  rd_ref_release(r);
  CHECK_EQ(add_one_run(41), 42);
  rd_shutdown();
  int gone = 0;
  for (int i = 0; i < 100 && !(gone = rmdir(dir) == 0) && errno == EBUSY; i++) usleep(20000);
  CHECK(gone);
  return 0;
}

/* rd_init under RAYDIST_TMPDIR=dir, its stderr (the error's words) into
 * log; its code. */
static int init_logged(const char *dir, char *log, size_t len) {
  setenv("RAYDIST_TMPDIR", dir, 1);
  char path[] = "/tmp/rd-init-log-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  fflush(stderr);
  int saved = dup(2);
  dup2(fd, 2);
  int r = rd_init(NULL);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  ssize_t n = pread(fd, log, len - 1, 0);
  log[n > 0 ? n : 0] = 0;
  close(fd);
  unlink(path);
  printf("RAYDIST_TMPDIR=%s: %s%s", dir, rd_err_name(r), r ? ": " : "\n");
  if (r) printf("%s", log);
  return r;
}

/* Where sessions go (RAYDIST_TMPDIR): made with its parents when missing;
 * one that cannot be made, or too long for the node's socket path, is an
 * error that says so (rd_init said nothing but "system call failed"). */
static int t_tmpdir(void) {
  char base[] = "/tmp/rd-tmpdir-XXXXXX", dir[700], log[4096], file[600];
  CHECK(mkdtemp(base) != NULL);
  snprintf(file, sizeof(file), "%s/file", base);
  FILE *f = fopen(file, "w");
  CHECK(f != NULL);
  fclose(f);
  snprintf(dir, sizeof(dir), "%s/x", file);   /* under a file */
  CHECK_EQ(init_logged(dir, log, sizeof(log)), RD_ESYS);
  char want[800];
  snprintf(want, sizeof(want), "rd_init: cannot make %s: Not a directory", dir);
  CHECK(strstr(log, want) != NULL);
  snprintf(dir, sizeof(dir), "%s/%0100d", base, 0);   /* too long for SESSION/node.sock */
  CHECK_EQ(init_logged(dir, log, sizeof(log)), RD_EINVAL);
  CHECK(strstr(log, "would hold sockets whose paths pass the 107 bytes a Unix socket's path may have: set "
                    "RAYDIST_TMPDIR to a shorter directory") != NULL);
  struct stat st;
  CHECK(stat(dir, &st) != 0);   /* nothing made */
  snprintf(dir, sizeof(dir), "%s/a/b", base);   /* missing: made */
  CHECK_EQ(init_logged(dir, log, sizeof(log)), 0);
  char root[800];
  snprintf(root, sizeof(root), "%s/raydist-%u/session-", dir, (unsigned)getuid());
  CHECK(strncmp(rd_session_dir(), root, strlen(root)) == 0);
  CHECK_EQ(add_one_run(1), 2);
  rd_shutdown();
  root[strlen(root) - strlen("/session-")] = 0;
  CHECK_EQ(stat(root, &st), 0);
  CHECK((st.st_mode & 0777) == 0700);
  char cmd[700];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
  CHECK_EQ(system(cmd), 0);
  return 0;
}

static int t_timeouts(void) {
  init_or_die(NULL);
  long ms = 1500;
  rd_ref slow, fast;
  CHECK_EQ(rd_submit(sleep_span, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms))), NULL, &slow), 0);
  long one = 1;
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&one, sizeof(one))), NULL, &fast), 0);
  rd_buf b;
  double t0 = now_s();
  CHECK_EQ(rd_get(&slow, 1, &b, 100), RD_ETIMEDOUT);
  double dt = now_s() - t0;
  CHECK(dt >= 0.09 && dt < 1.0);
  rd_ref both[2] = {slow, fast};
  uint8_t ready[2];
  CHECK_EQ(rd_wait(both, 2, 1, 5000, ready), 1);
  CHECK_EQ(ready[0], 0);
  CHECK_EQ(ready[1], 1);
  CHECK_EQ(rd_wait(both, 2, 2, RD_TIMEOUT_INF, ready), 2);
  /* a zero timeout reads the sockets: polling with it sees a task finish */
  rd_ref quick;
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&one, sizeof(one))), NULL, &quick), 0);
  int seen = 0;
  for (int i = 0; i < 2000 && !seen; i++) {
    seen = rd_wait(&quick, 1, 1, 0, NULL) == 1;
    if (!seen) usleep(1000);
  }
  CHECK(seen);
  CHECK_EQ(rd_get(&quick, 1, &b, 0), 0);
  rd_buf_release(&b);
  CHECK_EQ(rd_get(&slow, 1, &b, 0), 0);
  rd_buf_release(&b);
  rd_shutdown();
  return 0;
}

static int t_priority(void) {
  init_with_cpus(1);
  rd_task_opts o;
  rd_task_opts_init(&o);
  long ms = 400;
  rd_ref blocker;
  o.priority = 5;
  CHECK_EQ(rd_submit(sleep_span, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms))), &o, &blocker), 0);
  usleep(100000);
  rd_ref lo[4], hi[4];
  ms = 20;
  o.priority = 0;
  for (int i = 0; i < 4; i++) CHECK_EQ(rd_submit(sleep_span, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms))), &o, &lo[i]), 0);
  o.priority = 10;
  for (int i = 0; i < 4; i++) CHECK_EQ(rd_submit(sleep_span, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms))), &o, &hi[i]), 0);
  double hi_last = 0, lo_first = 1e18;
  for (int i = 0; i < 4; i++) {
    rd_buf b;
    span s;
    CHECK_EQ(rd_get(&hi[i], 1, &b, 30000), 0);
    memcpy(&s, b.data, sizeof(s));
    rd_buf_release(&b);
    if (s.start > hi_last) hi_last = s.start;
    CHECK_EQ(rd_get(&lo[i], 1, &b, 30000), 0);
    memcpy(&s, b.data, sizeof(s));
    rd_buf_release(&b);
    if (s.start < lo_first) lo_first = s.start;
  }
  CHECK(hi_last < lo_first);
  rd_shutdown();
  return 0;
}

/* A burst of fractional-CPU tasks grows the pool past one worker per CPU;
 * once idle for RAYDIST_WORKER_IDLE_MS (set short here) the extra workers
 * stop, down to the soft limit (--prestart, one per CPU), and tasks still
 * run afterwards. */
static int t_workers_trim(void) {
  setenv("RAYDIST_WORKER_IDLE_MS", "300", 1);   /* the node inherits it */
  init_with_cpus(2);
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.num_cpus = 0.05;
  enum { N = 40 };
  rd_ref r[N];
  long ms = 400;
  for (int i = 0; i < N; i++) CHECK_EQ(rd_submit(sleep_span, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms))), &o, &r[i]), 0);
  int most = 0;
  for (int i = 0; i < N; i++) {
    rd_buf b;
    CHECK_EQ(rd_get(&r[i], 1, &b, 60000), 0);
    rd_buf_release(&b);
    rd_ref_release(r[i]);
    rd_node_info ni;
    CHECK_EQ(rd_node_info_get(&ni), 0);
    most = ni.num_workers > most ? ni.num_workers : most;
  }
  rd_node_info ni;
  int left = -1;
  for (int k = 0; k < 100; k++) {   /* up to 10 s */
    CHECK_EQ(rd_node_info_get(&ni), 0);
    left = ni.num_workers;
    if (left <= 2) break;
    usleep(100000);
  }
  printf("workers: %d at most during the burst, %d after idling\n", most, left);
  CHECK(most > 2);
  CHECK(left <= 2 && left >= 1);
  rd_ref one;
  long x = 1;
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&x, sizeof(x))), NULL, &one), 0);
  rd_buf b;
  CHECK_EQ(rd_get(&one, 1, &b, 30000), 0);
  rd_buf_release(&b);
  rd_shutdown();
  return 0;
}

static rd_ref submit_sleep(long ms) {
  rd_ref r;
  CHECK_EQ(rd_submit(sleep_span, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms))), NULL, &r), 0);
  return r;
}

static int get_status(rd_ref r, int64_t timeout_ms) {
  rd_buf b;
  int e = rd_get(&r, 1, &b, timeout_ms);
  if (e == 0 || e == RD_ECANCELED || e == RD_ETASK) rd_buf_release(&b);
  return e;
}

/* rd_cancel on a task queued for a worker, one waiting for its argument,
 * one running (its result dropped, the worker kept) and, with force, one
 * whose worker is killed; finished tasks and puts are not cancellable. */
static int t_cancel(void) {
  init_with_cpus(1);
  rd_ref a = submit_sleep(800);   /* holds the only CPU */
  usleep(200000);
  rd_ref b = submit_sleep(10);    /* queued behind it */
  rd_ref c;                       /* waits for a's result */
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_ref(a)), NULL, &c), 0);
  double t0 = now_s();
  CHECK_EQ(rd_cancel(b, 0), 0);
  CHECK_EQ(rd_cancel(c, 0), 0);
  CHECK_EQ(get_status(b, 5000), RD_ECANCELED);
  CHECK_EQ(get_status(c, 5000), RD_ECANCELED);
  CHECK(now_s() - t0 < 0.5);   /* at once, not after a */
  rd_buf bb;
  CHECK_EQ(rd_get(&b, 1, &bb, 0), RD_ECANCELED);
  CHECK(strstr((const char *)bb.data, "cancelled") != NULL);
  rd_buf_release(&bb);
  rd_ref d;                       /* takes a cancelled task's result */
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_ref(b)), NULL, &d), 0);
  CHECK_EQ(get_status(d, 5000), RD_ECANCELED);
  CHECK_EQ(get_status(a, 10000), 0);   /* the others ran on */
  CHECK_EQ(rd_cancel(a, 0), RD_ENOENT);   /* finished */
  rd_ref p;
  CHECK_EQ(rd_put("x", 1, &p), 0);
  CHECK_EQ(rd_cancel(p, 1), RD_ENOENT);
  /* running, not forced: its get fails at once; the task runs to its end */
  rd_ref e = submit_sleep(600);
  usleep(200000);
  t0 = now_s();
  CHECK_EQ(rd_cancel(e, 0), 0);
  CHECK_EQ(get_status(e, 5000), RD_ECANCELED);
  CHECK(now_s() - t0 < 0.3);
  /* forced: its worker is killed, and a later task runs on a new one */
  char path[256];
  snprintf(path, sizeof(path), "/tmp/rd-cancel-%d", (int)getpid());
  unlink(path);
  long ms = 20000;
  rd_ref f;
  CHECK_EQ(rd_submit(pid_file_sleep, RD_ARGS(rd_arg_bytes(path, strlen(path)), rd_arg_bytes(&ms, sizeof(ms))), NULL, &f),
           0);
  int pid = pid_file_wait(path, f);
  CHECK(pid > 0);
  t0 = now_s();
  CHECK_EQ(rd_cancel(f, 1), 0);
  CHECK_EQ(get_status(f, 5000), RD_ECANCELED);
  int gone = pid_gone(pid);
  printf("forced cancel: worker %d gone after %.2f s\n", pid, now_s() - t0);
  CHECK(gone);
  long x = 41;
  rd_ref g;
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&x, sizeof(x))), NULL, &g), 0);
  CHECK_EQ(get_status(g, 30000), 0);
  rd_shutdown();
  return 0;
}

/* The progress thread: tasks a driver submitted are sent, run and their
 * leases returned while the driver does something else for a while without
 * calling the library; likewise for children a running task submitted. */
static int t_progress(void) {
  init_with_cpus(2);
  enum { N = 8 };
  rd_ref r[N];
  for (int i = 0; i < N; i++) r[i] = submit_sleep(150);   /* 4 rounds on 2 CPUs: ~0.6 s */
  double t0 = now_s();
  usleep(2500000);            /* no library call meanwhile */
  int ready = rd_wait(r, N, N, 0, NULL);
  rd_node_info ni;
  CHECK_EQ(rd_node_info_get(&ni), 0);   /* sent before this call pumps */
  printf("driver away %.1f s: %d of %d tasks done, %.1f of %.1f CPUs free\n", now_s() - t0, ready, N,
         ni.avail_cpus, ni.num_cpus);
  CHECK_EQ(ready, N);
  CHECK(ni.avail_cpus == ni.num_cpus);  /* idle leases went back without a call */
  for (int i = 0; i < N; i++) rd_ref_release(r[i]);
  /* a task that submits children and then computes for 1.5 s */
  long nm[2] = {4, 1500};
  rd_ref p;
  CHECK_EQ(rd_submit(spawn_then_spin, RD_ARGS(rd_arg_bytes(nm, sizeof(nm))), NULL, &p), 0);
  long done = get_long(p);
  printf("task away 1.5 s: %ld of 4 children done\n", done);
  CHECK_EQ(done, 4);
  /* synchronous round trips still work while the thread is there */
  long x = 0;
  for (int i = 0; i < 200; i++) {
    rd_ref q;
    CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&x, sizeof(x))), NULL, &q), 0);
    x = get_long(q);
    rd_ref_release(q);
  }
  CHECK_EQ(x, 200);
  rd_shutdown();
  return 0;
}

/* Nested tasks deeper than the node has CPUs: each waiting parent lends its
 * CPU back (Ray's blocked workers), so the 8 leaves of a depth-3 tree run on
 * a 2-CPU node where the 7 parents would otherwise hold every CPU forever;
 * afterwards the ledger is whole again. */
static int t_nested_blocked(void) {
  init_with_cpus(2);
  for (long d = 1; d <= 3; d++) {
    rd_ref r;
    double t0 = now_s();
    CHECK_EQ(rd_submit(fan, RD_ARGS(rd_arg_bytes(&d, sizeof(d))), NULL, &r), 0);
    long v = get_long(r);
    printf("fan(%ld) = %ld in %.2f s\n", d, v, now_s() - t0);
    CHECK_EQ(v, 1L << d);
    rd_ref_release(r);
  }
  /* two trees at once: both parents' lends and retakes interleave */
  rd_ref two[2];
  long d = 3;
  for (int i = 0; i < 2; i++) CHECK_EQ(rd_submit(fan, RD_ARGS(rd_arg_bytes(&d, sizeof(d))), NULL, &two[i]), 0);
  for (int i = 0; i < 2; i++) CHECK_EQ(get_long(two[i]), 8);
  rd_node_info ni;
  for (int k = 0; k < 100; k++) {   /* leases go back within ms; up to 5 s */
    CHECK_EQ(rd_node_info_get(&ni), 0);
    if (ni.avail_cpus == ni.num_cpus) break;
    usleep(50000);
  }
  printf("after: %.1f of %.1f CPUs free, %d workers\n", ni.avail_cpus, ni.num_cpus, ni.num_workers);
  CHECK(ni.avail_cpus == ni.num_cpus);
  rd_shutdown();
  return 0;
}

/* A tree of nested tasks with more parents waiting at once than the node's
 * max_workers (15 of fan(4)'s tasks wait for their children; max_workers
 * 4): waiting workers do not count against it, so workers start for the
 * children and the tree finishes (before, the fifth parent's children
 * never got a worker and every get waited for ever).  The extra workers go
 * once idle. */
static int t_nested_wide(void) {
  setenv("RAYDIST_WORKER_IDLE_MS", "300", 1);   /* the node inherits it */
  rd_config cfg;
  rd_config_init(&cfg);
  cfg.num_cpus = 2;
  cfg.max_workers = 4;
  init_or_die(&cfg);
  unsetenv("RAYDIST_WORKER_IDLE_MS");
  long d = 4;
  rd_ref r;
  double t0 = now_s();
  CHECK_EQ(rd_submit(fan, RD_ARGS(rd_arg_bytes(&d, sizeof(d))), NULL, &r), 0);
  rd_buf b;
  int e = rd_get(&r, 1, &b, 90000);
  printf("fan(4), max_workers 4: %s in %.2f s%s%.*s\n", rd_err_name(e), now_s() - t0, e ? ": " : "",
         e ? (int)b.size : 0, e ? (const char *)b.data : "");
  CHECK_EQ(e, 0);
  long v;
  memcpy(&v, b.data, sizeof(v));
  CHECK_EQ(v, 16);
  rd_buf_release(&b);
  rd_ref_release(r);
  rd_node_info ni;
  CHECK_EQ(rd_node_info_get(&ni), 0);
  printf("workers after the tree: %d\n", ni.num_workers);
  CHECK(ni.num_workers > 4);   /* (the 15 parents' and the leaves') */
  for (int k = 0; k < 200 && ni.num_workers > 4; k++) {
    usleep(50000);
    CHECK_EQ(rd_node_info_get(&ni), 0);
  }
  printf("workers once idle: %d\n", ni.num_workers);
  CHECK(ni.num_workers <= 4);
  rd_shutdown();
  return 0;
}

/* A second owner for t_oom_victim: runs three 180 MiB tasks for 2 s (no
 * retries) and returns how many of them the memory monitor killed. */
RD_REMOTE(hog_family) {
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.max_retries = 0;
  long arg[2] = {180, 2000}, killed = 0;
  rd_ref r[3];
  for (int i = 0; i < 3; i++)
    if (rd_submit(hog_hold, RD_ARGS(rd_arg_bytes(&arg[0], sizeof(long)), rd_arg_bytes(&arg[1], sizeof(long))), &o,
                  &r[i]) != 0)
      return rd_call_fail(call, "submit");
  for (int i = 0; i < 3; i++) {
    rd_buf b;
    int e = rd_get(&r[i], 1, &b, 60000);
    if (e == RD_EOOM) killed++;
    else if (e != 0) return rd_call_fail(call, "child %d: %s", i, rd_err_name(e));
    rd_buf_release(&b);
  }
  return rd_return_bytes(call, 0, &killed, sizeof(killed));
}

/* Which task the memory monitor stops: one of the owner with the most tasks
 * running on the node, not simply the biggest.  The driver runs one 350 MiB
 * task and one that owns three 180 MiB tasks; over an 850 MiB limit the
 * monitor stops one of the three (their owner retries such a kill for free
 * while its others run) and leaves the driver's lone big task alone, which
 * would have failed for good (no retries).  Before: the biggest went. */
static int t_oom_victim(void) {
  const char *ao = getenv("ASAN_OPTIONS");   /* freed memory leaves an ASan worker at once */
  char asan[512];
  snprintf(asan, sizeof asan, "%s%squarantine_size_mb=0", ao ? ao : "", ao && *ao ? ":" : "");
  setenv("ASAN_OPTIONS", asan, 1);
  setenv("RAYDIST_MEMORY_LIMIT_BYTES", "891289600", 1);   /* 850 MiB */
  setenv("RAYDIST_MEMORY_MONITOR_MS", "50", 1);
  init_with_cpus(4);
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.max_retries = 0;
  long big[2] = {350, 2000};
  rd_ref ra, rf;
  CHECK_EQ(rd_submit(hog_family, NULL, 0, &o, &rf), 0);
  CHECK_EQ(rd_submit(hog_hold, RD_ARGS(rd_arg_bytes(&big[0], sizeof(long)), rd_arg_bytes(&big[1], sizeof(long))), &o,
                     &ra), 0);
  rd_buf b;
  int e = rd_get(&ra, 1, &b, 60000);
  printf("the driver's 350 MiB task: %s %.*s\n", rd_err_name(e), e ? (int)b.size : 0, e ? (const char *)b.data : "");
  if (e == 0 || e == RD_EOOM) rd_buf_release(&b);
  CHECK_EQ(e, 0);
  long killed = get_long(rf);
  rd_node_info ni;
  CHECK_EQ(rd_node_info_get(&ni), 0);
  printf("the other owner's tasks killed: %ld; node kills: %llu\n", killed, (unsigned long long)ni.memory_kills);
  CHECK(killed >= 1);
  CHECK_EQ((long)ni.memory_kills, killed);
  rd_shutdown();
  unsetenv("RAYDIST_MEMORY_LIMIT_BYTES");
  unsetenv("RAYDIST_MEMORY_MONITOR_MS");
  return 0;
}

/* The memory monitor: over the node's worker memory limit it kills the task
 * using the most memory, with the reason in the task's error (RD_EOOM) after
 * its retry is spent; a small task running beside it is left alone, and the
 * node goes on serving.  RAYDIST_TASK_OOM_RETRIES=0: every OOM kill uses
 * max_retries (t_oom_retry has the default). */
static int t_memory_monitor(void) {
  setenv("RAYDIST_MEMORY_LIMIT_BYTES", "419430400", 1);   /* 400 MiB; the node inherits these */
  setenv("RAYDIST_MEMORY_MONITOR_MS", "50", 1);
  setenv("RAYDIST_TASK_OOM_RETRIES", "0", 1);
  setenv("RAYDIST_TASK_OOM_RETRY_DELAY_MS", "100", 1);
  init_with_cpus(2);
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.max_retries = 1;
  long big = 1536, small = 32;
  rd_ref r_big, r_small, r_sleep = submit_sleep(1500);
  CHECK_EQ(rd_submit(hog, RD_ARGS(rd_arg_bytes(&big, sizeof(big))), &o, &r_big), 0);
  rd_buf b;
  int e = rd_get(&r_big, 1, &b, 60000);
  printf("1.5 GiB task: %s: %.*s\n", rd_err_name(e), (int)b.size, (const char *)b.data);
  CHECK_EQ(e, RD_EOOM);
  CHECK(strstr((const char *)b.data, "memory monitor") != NULL);
  CHECK(strstr((const char *)b.data, "over its limit of 400 MiB") != NULL);
  CHECK(strstr((const char *)b.data, "attempt 2 of 2") != NULL);
  rd_buf_release(&b);
  CHECK_EQ(get_status(r_sleep, 30000), 0);   /* the task beside it ran on */
  CHECK_EQ(rd_submit(hog, RD_ARGS(rd_arg_bytes(&small, sizeof(small))), &o, &r_small), 0);
  CHECK_EQ(get_long(r_small), small);        /* within the limit: runs */
  rd_node_info ni;
  CHECK_EQ(rd_node_info_get(&ni), 0);
  CHECK_EQ(ni.memory_kills, 2);              /* the attempt and its retry */
  rd_shutdown();
  unsetenv("RAYDIST_MEMORY_LIMIT_BYTES");
  unsetenv("RAYDIST_MEMORY_MONITOR_MS");
  unsetenv("RAYDIST_TASK_OOM_RETRIES");
  unsetenv("RAYDIST_TASK_OOM_RETRY_DELAY_MS");
  return 0;
}

/* One run of t_oom_retry: a task holding 200 MiB for 8 s, and beside it one
 * that needs 350 MiB, under a 500 MiB limit (alone, with the idle workers,
 * it fits, under ASan too).  The monitor kills the big one
 * while the small one runs, again after each backoff (0.2, 0.4, 0.8 s, ...).
 * Returns the big task's status (its message in why) and the node's kills. */
static int oom_run(int oom_retries, char *why, size_t cap, uint64_t *kills) {
  char n[16];
  snprintf(n, sizeof n, "%d", oom_retries);
  setenv("RAYDIST_TASK_OOM_RETRIES", n, 1);
  init_with_cpus(2);
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.max_retries = 1;
  /* the small one holds long enough for three kills of the big one even on
   * a loaded machine (with 4 s, one kill in a -j2 run beside the examples:
   * each retry waits for a new worker) */
  long small[2] = {200, 8000}, big[2] = {350, 300};
  rd_ref rs, rb;
  CHECK_EQ(rd_submit(hog_hold, RD_ARGS(rd_arg_bytes(&small[0], sizeof(long)), rd_arg_bytes(&small[1], sizeof(long))),
                     &o, &rs), 0);
  usleep(300000);   /* the small one holds its memory first */
  CHECK_EQ(rd_submit(hog_hold, RD_ARGS(rd_arg_bytes(&big[0], sizeof(long)), rd_arg_bytes(&big[1], sizeof(long))),
                     &o, &rb), 0);
  rd_buf b;
  double t0 = now_s();
  int e = rd_get(&rb, 1, &b, 60000);
  snprintf(why, cap, "%.*s", (int)b.size, (const char *)b.data);
  printf("OOM retries %d: 350 MiB task: %s after %.1f s: %s\n", oom_retries, rd_err_name(e), now_s() - t0,
         e ? why : "ok");
  rd_buf_release(&b);
  CHECK_EQ(get_long(rs), small[0]);   /* never killed: the smaller one */
  rd_node_info ni;
  CHECK_EQ(rd_node_info_get(&ni), 0);
  *kills = ni.memory_kills;
  rd_shutdown();
  return e;
}

/* Retries after OOM kills: while other tasks of the owner run, a killed task
 * comes back after a backoff without using max_retries, so one killed three
 * times or more with max_retries 1 still finishes once it can run alone
 * (before: RD_EOOM at the second kill).  With RAYDIST_TASK_OOM_RETRIES=1 the
 * same run fails with RD_EOOM, saying what was spent. */
static int t_oom_retry(void) {
  /* under ASan a worker's freed blocks wait in its quarantine, so an idle
   * worker would go on holding the small task's memory: free at once */
  const char *ao = getenv("ASAN_OPTIONS");
  char asan[512];
  snprintf(asan, sizeof asan, "%s%squarantine_size_mb=0", ao ? ao : "", ao && *ao ? ":" : "");
  setenv("ASAN_OPTIONS", asan, 1);
  setenv("RAYDIST_MEMORY_LIMIT_BYTES", "524288000", 1);
  setenv("RAYDIST_MEMORY_MONITOR_MS", "50", 1);
  setenv("RAYDIST_TASK_OOM_RETRY_DELAY_MS", "200", 1);
  char why[1024];
  uint64_t kills = 0;
  CHECK_EQ(oom_run(10, why, sizeof why, &kills), 0);
  printf("  memory kills: %llu\n", (unsigned long long)kills);
  CHECK(kills >= 3);
  CHECK_EQ(oom_run(1, why, sizeof why, &kills), RD_EOOM);
  CHECK(strstr(why, "memory monitor") != NULL);
  CHECK(strstr(why, "max_retries 1 spent, and 1 retries after OOM kills") != NULL);
  CHECK_EQ(kills, 3);   /* one on the OOM budget, one on max_retries, the last */

  /* a retry waiting out its backoff is cancelled like a queued task */
  setenv("RAYDIST_TASK_OOM_RETRY_DELAY_MS", "5000", 1);
  setenv("RAYDIST_TASK_OOM_RETRIES", "10", 1);
  init_with_cpus(2);
  long small[2] = {200, 4000}, big[2] = {350, 300};
  rd_ref rs, rb;
  CHECK_EQ(rd_submit(hog_hold, RD_ARGS(rd_arg_bytes(&small[0], sizeof(long)), rd_arg_bytes(&small[1], sizeof(long))),
                     NULL, &rs), 0);
  usleep(300000);
  CHECK_EQ(rd_submit(hog_hold, RD_ARGS(rd_arg_bytes(&big[0], sizeof(long)), rd_arg_bytes(&big[1], sizeof(long))),
                     NULL, &rb), 0);
  rd_node_info ni = {0};
  for (int i = 0; i < 200 && ni.memory_kills == 0; i++) {
    usleep(50000);
    CHECK_EQ(rd_node_info_get(&ni), 0);
  }
  CHECK_EQ(ni.memory_kills, 1);
  usleep(300000);   /* the owner has read the kill: the task waits out its 5 s */
  double t0 = now_s();
  CHECK_EQ(rd_cancel(rb, 0), 0);
  CHECK_EQ(get_status(rb, 2000), RD_ECANCELED);
  printf("delayed retry cancelled in %.3f s\n", now_s() - t0);
  CHECK(now_s() - t0 < 1.0);
  CHECK_EQ(get_long(rs), small[0]);
  rd_shutdown();
  unsetenv("RAYDIST_MEMORY_LIMIT_BYTES");
  unsetenv("RAYDIST_MEMORY_MONITOR_MS");
  unsetenv("RAYDIST_TASK_OOM_RETRY_DELAY_MS");
  unsetenv("RAYDIST_TASK_OOM_RETRIES");
  return 0;
}

/* One HTTP exchange with the node's metrics endpoint: sends req (len bytes),
 * reads until the server closes (at most cap - 1 bytes into out).  The
 * number of bytes read, or -1 when it cannot connect. */
static long http_exchange(int port, const char *req, size_t len, char *out, size_t cap) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  struct timeval tv = {10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (len && write(fd, req, len) != (ssize_t)len) {
    close(fd);
    return -1;
  }
  size_t n = 0;
  ssize_t r;
  while (n + 1 < cap && (r = read(fd, out + n, cap - 1 - n)) > 0) n += (size_t)r;
  out[n] = 0;
  close(fd);
  return (long)n;
}

/* The value of the sample whose line starts with `name` followed by a space. */
static double metric(const char *text, const char *name) {
  size_t nl = strlen(name);
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
    if (strncmp(p, name, nl) == 0 && p[nl] == ' ') return atof(p + nl + 1);
  return -1;
}

/* Writes text to the file path names (for metrics_format's parsers); none: nothing. */
static void dump_to(const char *path, const char *text) {
  if (!path) return;
  FILE *d = fopen(path, "w");
  CHECK(d != NULL);
  fputs(text, d);
  fclose(d);
}

/* The port of this session's metrics endpoint. */
static int metrics_port(void) {
  char path[512], addr[128];
  snprintf(path, sizeof(path), "%s/metrics", rd_session_dir());
  FILE *f = fopen(path, "r");
  CHECK(f != NULL);
  CHECK(fgets(addr, sizeof(addr), f) != NULL);
  fclose(f);
  char *colon = strrchr(addr, ':');
  CHECK(colon && strncmp(addr, "127.0.0.1:", 10) == 0);
  return atoi(colon + 1);
}

/* A streaming task: yields args[0] longs. */
RD_REMOTE(yield_n) {
  rd_buf a;
  long n = 0;
  if (rd_arg(call, 0, &a) == 0 && a.size == sizeof(n)) memcpy(&n, a.data, sizeof(n));
  for (long i = 0; i < n; i++)
    if (rd_yield(call, &i, sizeof(i)) != 0) return rd_call_fail(call, "rd_yield");
  return 0;
}

/* A function whose name needs escaping in a Prometheus label (registered by
 * hand, as RD_REMOTE would, under a name no identifier could have). */
static int odd_name_impl(rd_call *call) { return rd_return_bytes(call, 0, "x", 1); }
static rd_function odd_name_desc = {"odd \"name\"\\", odd_name_impl, NULL};
__attribute__((constructor)) static void odd_name_register(void) { rd_function_register_(&odd_name_desc); }

/* Takes any arguments, returns nothing. */
RD_REMOTE(ignore_args) { return rd_return_bytes(call, 0, "", 0); }

/* The node's /metrics text (into body; NULL when it does not answer). */
static const char *metrics_text(int port, char *body, size_t cap) {
  const char *get = "GET /metrics HTTP/1.0\r\n\r\n";
  if (http_exchange(port, get, strlen(get), body, cap) <= 0) return NULL;
  const char *t = strstr(body, "\r\n\r\n");
  return t ? t + 4 : NULL;
}

/* The body of GET path on the node's metrics port (into body; NULL when it
 * does not answer 200). */
static const char *http_body(int port, const char *path, char *body, size_t cap) {
  char get[256];
  snprintf(get, sizeof(get), "GET %s HTTP/1.0\r\n\r\n", path);
  if (http_exchange(port, get, strlen(get), body, cap) <= 0 || strncmp(body, "HTTP/1.0 200", 12) != 0) return NULL;
  const char *t = strstr(body, "\r\n\r\n");
  return t ? t + 4 : NULL;
}

/* For `raydist stack` on an embedded cluster: a frame of its own (named by
 * the node with addr2line) that waits for the file `path`. */
__attribute__((noinline)) static void stack_probe_wait(const char *path) {
  while (access(path, F_OK) != 0) usleep(2000);
}

/* Writes its worker's pid to argument 0 + ".pid", then waits in
 * stack_probe_wait for argument 0 to exist; its pid. */
RD_REMOTE(stack_probe) {
  rd_buf a;
  char path[400], pidf[420];
  if (rd_arg(call, 0, &a) != 0 || !a.size || a.size >= sizeof(path)) return rd_call_fail(call, "bad path");
  memcpy(path, a.data, a.size);
  path[a.size] = 0;
  snprintf(pidf, sizeof(pidf), "%s.pid", path);
  long pid = getpid();
  FILE *f = fopen(pidf, "w");
  if (!f) return rd_call_fail(call, "no pid file");
  fprintf(f, "%ld\n", pid);
  fclose(f);
  stack_probe_wait(path);
  return rd_return_bytes(call, 0, &pid, sizeof(pid));
}

/* The pid stack_probe wrote to pidf (waited for up to 12 s), or 0. */
static long probe_pid(const char *pidf) {
  long wpid = 0;
  for (int i = 0; i < 600 && !wpid; i++) {
    FILE *f = fopen(pidf, "r");
    if (!f || fscanf(f, "%ld", &wpid) != 1) wpid = 0;
    if (f) fclose(f);
    if (!wpid) usleep(20000);
  }
  return wpid;
}

/* `$RAYDIST_BIN ARGS` run to its end: its output (stdout and stderr) into
 * out; its exit status. */
static int run_cli(const char *args, char *out, size_t cap) {
  const char *bin = getenv("RAYDIST_BIN");
  CHECK(bin != NULL);
  char cmd[1024];
  snprintf(cmd, sizeof(cmd), "%s %s 2>&1", bin, args);
  FILE *p = popen(cmd, "r");
  CHECK(p != NULL);
  size_t n = fread(out, 1, cap - 1, p);
  out[n] = 0;
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* raydist stack on this machine's embedded cluster (no cluster named, so
 * it looks for the local ones): a task waiting in stack_probe_wait, named
 * with its file and line, its worker alone by --pid; this driver among
 * the others with --local; the node's token guards its API; a pid no
 * process has is refused; the task then finishes well. */
static int t_stack_local(void) {
  init_with_cpus(2);
  char flag[300], pidf[320], args[64];
  snprintf(flag, sizeof(flag), "%s/stack-flag", rd_session_dir());
  snprintf(pidf, sizeof(pidf), "%s.pid", flag);
  rd_ref r;
  CHECK_EQ(rd_submit(stack_probe, RD_ARGS(rd_arg_bytes(flag, strlen(flag))), NULL, &r), 0);
  long wpid = probe_pid(pidf);
  CHECK(wpid > 0);
  static char out[1 << 18];
  unsetenv("RAYDIST_ADDRESS");
  snprintf(args, sizeof(args), "stack --pid %ld", wpid);
  CHECK_EQ(run_cli(args, out, sizeof(out)), 0);
  printf("%s", out);
  char want[600];
  snprintf(want, sizeof(want), "embedded node %s:\nworker pid %ld ", rd_session_dir(), wpid);
  CHECK(strstr(out, want) != NULL);
  CHECK(strstr(out, " stack_probe_wait at rt_test.c:") != NULL && strstr(out, " stack_probe_impl at rt_test.c:") != NULL);
  CHECK(strstr(out, "driver pid ") == NULL);   /* that process alone */
  CHECK_EQ(run_cli("stack --local", out, sizeof(out)), 0);
  snprintf(want, sizeof(want), "driver pid %d:", (int)getpid());
  CHECK(strstr(out, want) != NULL && strstr(out, " t_stack_local at rt_test.c:") != NULL);   /* here, in run_cli */
  CHECK(run_cli("stack --local --pid 1", out, sizeof(out)) == 1 && strstr(out, "no driver or worker has pid 1"));
  static char body[4096];
  CHECK(http_body(metrics_port(), "/api/stack", body, sizeof(body)) == NULL);   /* no token */
  CHECK(strstr(body, "401") != NULL && strstr(body, "SESSION/token") != NULL);
  FILE *f = fopen(flag, "w");
  CHECK(f != NULL);
  fclose(f);
  CHECK_EQ(get_long(r), wpid);
  rd_shutdown();
  return 0;
}

/* Returns its worker's RD_SHARD (or "-"). */
RD_REMOTE(shard_of) {
  const char *v = getenv("RD_SHARD");
  return rd_return_bytes(call, 0, v ? v : "-", strlen(v ? v : "-"));
}

/* raydist_node_interned{kind="KIND"} on the node's /metrics, -1 when absent. */
static long interned(int port, const char *kind) {
  static char body[1 << 17];
  const char *t = metrics_text(port, body, sizeof(body));
  char key[96];
  snprintf(key, sizeof(key), "raydist_node_interned{kind=\"%s\"} ", kind);
  const char *p = t ? strstr(t, key) : NULL;
  return p ? atol(p + strlen(key)) : -1;
}

/* Interned env sets, selectors and job variants are given back
 * (rd__node_gc): 60 tasks, each with an env set and a label selector of its
 * own, on a node that sweeps every 100 ms while they run and keeps at most
 * 4 workers (so older sets' workers are stopped for newer ones).  Each task
 * sees its own variable; afterwards the node keeps no selector and only
 * the sets of variants that still have a worker (at most 4); sets it gave
 * back work again when asked for anew. */
static int t_intern_gc(void) {
  setenv("RAYDIST_NODE_GC_MS", "100", 1);
  rd_config cfg;
  rd_config_init(&cfg);
  cfg.num_cpus = 2;
  cfg.max_workers = 4;
  init_or_die(&cfg);
  int port = metrics_port();
  enum { N = 60 };
  for (int round = 0; round < 2; round++) {
    static char vars[N][32], sels[N][48];
    const char *envs[N][2];
    rd_ref r[N];
    int n = round ? 8 : N;   /* then the first 8 again: given back, made anew */
    for (int i = 0; i < n; i++) {
      snprintf(vars[i], sizeof(vars[i]), "RD_SHARD=s%d", i);
      snprintf(sels[i], sizeof(sels[i]), "shard=!s%d", getenv("ONECLASS") ? 0 : i);   /* matches this node (no such label) */
      envs[i][0] = vars[i];
      envs[i][1] = NULL;
      rd_task_opts o;
      rd_task_opts_init(&o);
      o.env = envs[i];
      o.label_selector = sels[i];
      CHECK_EQ(rd_submit(shard_of, RD_NO_ARGS, &o, &r[i]), 0);
    }
    for (int i = 0; i < n; i++) {
      rd_buf b;
      CHECK_EQ(rd_get(&r[i], 1, &b, 60000), 0);
      char want[16];
      snprintf(want, sizeof(want), "s%d", i);
      if (b.size != strlen(want) || memcmp(b.data, want, b.size) != 0) {
        fprintf(stderr, "task %d saw RD_SHARD=%.*s\n", i, (int)b.size, (const char *)b.data);
        CHECK(0);
      }
      rd_buf_release(&b);
      rd_ref_release(r[i]);
    }
    long envs_kept = -1, sels_kept = -1, variants = -1;
    for (int t = 0; t < 100; t++) {   /* the owner's last report, then a sweep */
      envs_kept = interned(port, "env_sets");
      sels_kept = interned(port, "label_selectors");
      variants = interned(port, "job_variants");
      if (sels_kept == 0 && envs_kept >= 0 && envs_kept <= 4 && envs_kept == variants) break;
      usleep(50000);
    }
    printf("round %d: %d tasks with their own set and selector; kept afterwards: %ld sets, %ld selectors, "
           "%ld variants\n", round, n, envs_kept, sels_kept, variants);
    CHECK_EQ(sels_kept, 0);
    CHECK(envs_kept >= 1 && envs_kept <= 4);
    CHECK_EQ(envs_kept, variants);
  }
  rd_shutdown();
  return 0;
}

/* raydist_owner_classes on the node's /metrics, -1 when absent. */
static long owner_classes(int port) {
  static char body[1 << 17];
  const char *t = http_body(port, "/metrics", body, sizeof(body));
  const char *p = t ? strstr(t, "\nraydist_owner_classes ") : NULL;
  return p ? atol(p + strlen("\nraydist_owner_classes ")) : -1;
}

/* Many scheduling classes at once: 6000 tasks, each with a label selector
 * of its own, all submitted before the first is awaited.  The node kept at
 * most 4096 distinct selectors, so the 4097th task failed; the owner kept
 * every class it ever made.  All run, and afterwards the owner's classes
 * and the node's selectors are given back (the node sweeps every 200 ms,
 * the owner frees a class 5 s after its last use). */
static int t_many_classes(void) {
  setenv("RAYDIST_NODE_GC_MS", "200", 1);
  rd_config cfg;
  rd_config_init(&cfg);
  cfg.num_cpus = 2;
  init_or_die(&cfg);
  int port = metrics_port();
  enum { N = 6000 };
  static char sels[N][32];
  static rd_ref r[N];
  double t0 = now_s();
  for (int i = 0; i < N; i++) {
    snprintf(sels[i], sizeof(sels[i]), "shard=!s%d", i);
    rd_task_opts o;
    rd_task_opts_init(&o);
    o.label_selector = sels[i];
    CHECK_EQ(rd_submit(shard_of, RD_NO_ARGS, &o, &r[i]), 0);
  }
  for (int i = 0; i < N; i++) {
    rd_buf b;
    int gr = rd_get(&r[i], 1, &b, 300000);
    if (gr != 0) fprintf(stderr, "task %d: %s: %.*s\n", i, rd_strerror(gr), (int)b.size, (const char *)b.data);
    CHECK_EQ(gr, 0);
    rd_buf_release(&b);
    rd_ref_release(r[i]);
  }
  double t1 = now_s();
  long classes = -1, sels_kept = -1;
  for (int t = 0; t < 300; t++) {
    classes = owner_classes(port);
    sels_kept = interned(port, "label_selectors");
    if (classes == 0 && sels_kept == 0) break;
    usleep(100000);
  }
  printf("%d tasks, each with a selector of its own: all done after %.2f s; %.1f s later the owner keeps %ld "
         "classes and the node %ld selectors\n", N, t1 - t0, now_s() - t1, classes, sels_kept);
  CHECK_EQ(classes, 0);
  CHECK_EQ(sels_kept, 0);
  rd_shutdown();
  return 0;
}

/* Worker processes of the node's /metrics (raydist_workers, every state),
 * -1 when absent. */
static long workers_alive(int port) {
  static char body[1 << 17];
  const char *t = http_body(port, "/metrics", body, sizeof(body));
  if (!t) return -1;
  long n = 0;
  for (const char *p = t; (p = strstr(p, "\nraydist_workers{state=")) != NULL; p++) {
    const char *v = strchr(p, '}');
    if (v) n += atol(v + 1);
  }
  return n;
}

/* A burst of lease requests starts as many workers as can run, not one per
 * request that fits alone: 300 tasks of 20 ms, each with a selector of its
 * own (so 300 requests at once), on a fresh 2-CPU node with max_workers 64.
 * Before, every request that would fit the two free CPUs by itself counted
 * toward starting a worker, and the node started all 64. */
static int t_worker_burst(void) {
  rd_config cfg;
  rd_config_init(&cfg);
  cfg.num_cpus = 2;
  init_or_die(&cfg);
  int port = metrics_port();
  enum { N = 300 };
  static char sels[N][32];
  static rd_ref r[N];
  long ms = 20;
  for (int i = 0; i < N; i++) {
    snprintf(sels[i], sizeof(sels[i]), "burst=!b%d", i);
    rd_task_opts o;
    rd_task_opts_init(&o);
    o.label_selector = sels[i];
    CHECK_EQ(rd_submit(sleep_span, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms))), &o, &r[i]), 0);
  }
  long pids[N];
  int npids = 0;
  for (int i = 0; i < N; i++) {
    rd_buf b;
    CHECK_EQ(rd_get(&r[i], 1, &b, 120000), 0);
    span sp;
    memcpy(&sp, b.data, sizeof(sp));
    int seen = 0;
    for (int k = 0; k < npids && !seen; k++) seen = pids[k] == (long)sp.pid;
    if (!seen) pids[npids++] = (long)sp.pid;
    rd_buf_release(&b);
    rd_ref_release(r[i]);
  }
  long alive = workers_alive(port);
  printf("%d one-task classes of 20 ms on 2 CPUs: %d workers ran them, %ld worker processes on the node\n", N, npids,
         alive);
  CHECK(alive >= 1 && alive <= 4);
  CHECK(npids <= 4);
  rd_shutdown();
  return 0;
}

/* The store's objects on the node's /objects and /api/objects (what
 * `raydist memory` prints): two puts and a task's result, by size, with
 * their owner (this driver), totals and state; ?top= limits the list; an
 * object released is gone from it. */
static int t_objects(void) {
  init_with_cpus(2);
  size_t sz[2] = {3u << 20, 1u << 20};
  rd_ref p[2], r;
  for (int i = 0; i < 2; i++) {
    void *buf = calloc(1, sz[i]);
    CHECK(buf != NULL);
    CHECK_EQ(rd_put(buf, sz[i], &p[i]), 0);
    free(buf);
  }
  size_t big = 2u << 20;
  long seed = 5;
  CHECK_EQ(rd_submit(make_big, RD_ARGS(rd_arg_bytes(&big, sizeof(big)), rd_arg_bytes(&seed, sizeof(seed))), NULL, &r),
           0);
  rd_buf b;
  CHECK_EQ(rd_get(&r, 1, &b, 60000), 0);
  rd_buf_release(&b);
  int port = metrics_port();
  static char body[1 << 16];
  const char *t = http_body(port, "/objects", body, sizeof(body));
  CHECK(t != NULL);
  printf("%s", t);
  char me[64];
  snprintf(me, sizeof(me), "driver pid %d", (int)getpid());
  CHECK(strstr(t, "node 0: 3 objects, 6.0 MiB in memory, 0 spilled (0.0 MiB), 0 unsealed") != NULL);
  CHECK(strstr(t, "largest 3:") != NULL);
  const char *l3 = strstr(t, "3.000 MiB  memory"), *l2 = strstr(t, "2.000 MiB  memory"), *l1 = strstr(t, "1.000 MiB  memory");
  CHECK(l3 && l2 && l1 && l3 < l2 && l2 < l1);   /* largest first */
  CHECK(strstr(l3, me) != NULL);
  CHECK(strstr(t, "       3 objects        6.000 MiB") != NULL);   /* all this driver's */
  t = http_body(port, "/objects?top=1", body, sizeof(body));
  CHECK(t && strstr(t, "largest 1:") && strstr(t, "3.000 MiB") && !strstr(t, "2.000 MiB  memory"));
  t = http_body(port, "/api/objects?top=5", body, sizeof(body));
  CHECK(t != NULL);
  printf("%s", t);
  CHECK(strstr(t, "\"objects\":3,\"bytes_in_memory\":6291456,") != NULL);
  CHECK(strstr(t, "\"size\":3145728,\"state\":\"memory\"") != NULL);
  char who[160];
  snprintf(who, sizeof(who), "\"who\":\"%s\",\"objects\":3,\"bytes\":6291456", me);
  CHECK(strstr(t, who) != NULL);
  rd_ref_release(p[0]);
  rd_node_info ni;
  CHECK_EQ(rd_node_info_get(&ni), 0);   /* a round trip behind the release, on the same socket */
  t = http_body(port, "/objects", body, sizeof(body));
  CHECK(t && strstr(t, "node 0: 2 objects, 3.0 MiB in memory") != NULL);
  rd_ref_release(p[1]);
  rd_ref_release(r);
  rd_shutdown();
  return 0;
}

/* The node's Prometheus endpoint: its address in the session directory, the
 * figures after some tasks (a failed one among them), and clear answers to
 * bad requests, after which it still serves.  RD_METRICS_DUMP names a file
 * to write the text to (metrics_format checks it with a Prometheus parser). */
static int t_metrics(void) {
  init_with_cpus(2);
  long x = 1;
  for (int i = 0; i < 20; i++) {
    rd_ref r;
    CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&x, sizeof(x))), NULL, &r), 0);
    x = get_long(r);
    rd_ref_release(r);
  }
  rd_ref bad;
  CHECK_EQ(rd_submit(fail_always, RD_NO_ARGS, NULL, &bad), 0);
  CHECK_EQ(get_status(bad, 30000), RD_ETASK);
  rd_task_opts so;   /* and a stream of 7 items */
  rd_task_opts_init(&so);
  so.num_returns = RD_STREAMING;
  long seven = 7;
  rd_ref st, item;
  CHECK_EQ(rd_submit(yield_n, RD_ARGS(rd_arg_bytes(&seven, sizeof(seven))), &so, &st), 0);
  int got = 0;
  while (rd_stream_next(st, &item, 30000) == 0) {
    rd_ref_release(item);
    got++;
  }
  CHECK_EQ(got, 7);
  rd_ref_release(st);
  for (int i = 0; i < 3; i++) {
    rd_ref r;
    CHECK_EQ(rd_submit(&odd_name_desc, RD_NO_ARGS, NULL, &r), 0);
    CHECK_EQ(get_status(r, 30000), 0);
    rd_ref_release(r);
  }
  int port = metrics_port();
  CHECK(port > 0);
  static char body[1 << 18];
  /* tasks this driver owns, as its node counts them: a 1.5 s task sent to a
   * worker, and one waiting for its result (the progress thread reports
   * them, as this thread sleeps outside the library) */
  long ms = 1500;
  rd_ref slow, after;
  CHECK_EQ(rd_submit(sleep_span, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms))), NULL, &slow), 0);
  CHECK_EQ(rd_submit(ignore_args, RD_ARGS(rd_arg_ref(slow)), NULL, &after), 0);
  usleep(600000);
  const char *owned = metrics_text(port, body, sizeof(body));
  CHECK(owned != NULL);
  printf("owned tasks 0.6 s in: %g sent, %g waiting\n", metric(owned, "raydist_owned_tasks{state=\"sent\"}"),
         metric(owned, "raydist_owned_tasks{state=\"waiting\"}"));
  CHECK(metric(owned, "raydist_owned_tasks{state=\"sent\"}") == 1);
  CHECK(metric(owned, "raydist_owned_tasks{state=\"waiting\"}") == 1);
  CHECK_EQ(get_status(after, 30000), 0);
  rd_ref_release(slow);
  rd_ref_release(after);
  usleep(500000);   /* workers report run times within 200 ms of going idle */
  const char *get = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  long n = http_exchange(port, get, strlen(get), body, sizeof(body));
  CHECK(n > 0);
  CHECK(strncmp(body, "HTTP/1.0 200 OK\r\n", 17) == 0);
  CHECK(strstr(body, "Content-Type: text/plain; version=0.0.4") != NULL);
  const char *text = strstr(body, "\r\n\r\n");
  CHECK(text != NULL);
  text += 4;
  printf("%ld bytes; leases %g, tasks run %g (failed %g), lease wait count %g, CPU total %g\n", n,
         metric(text, "raydist_leases_granted_total"), metric(text, "raydist_task_run_seconds_count"),
         metric(text, "raydist_tasks_failed_total"), metric(text, "raydist_lease_wait_seconds_count"),
         metric(text, "raydist_resources_total{resource=\"CPU\"}"));
  CHECK(metric(text, "raydist_resources_total{resource=\"CPU\"}") == 2);
  CHECK(metric(text, "raydist_leases_granted_total") >= 1);
  CHECK(metric(text, "raydist_lease_wait_seconds_count") >= 1);
  CHECK(metric(text, "raydist_task_run_seconds_count") >= 22);
  CHECK(metric(text, "raydist_tasks_failed_total") >= 1);
  CHECK(metric(text, "raydist_stream_items_total") == 7);
  CHECK(metric(text, "raydist_task_run_seconds_bucket{le=\"+Inf\"}") == metric(text, "raydist_task_run_seconds_count"));
  /* by function: the 20 add_one runs, the failure, the stream, the odd name escaped */
  CHECK(metric(text, "raydist_function_run_seconds_count{function=\"add_one\"}") == 20);
  CHECK(metric(text, "raydist_function_run_seconds_bucket{function=\"add_one\",le=\"+Inf\"}") == 20);
  CHECK(metric(text, "raydist_function_failed_total{function=\"add_one\"}") == 0);
  CHECK(metric(text, "raydist_function_run_seconds_count{function=\"fail_always\"}") == 1);
  CHECK(metric(text, "raydist_function_failed_total{function=\"fail_always\"}") == 1);
  CHECK(metric(text, "raydist_function_run_seconds_count{function=\"yield_n\"}") == 1);
  CHECK(metric(text, "raydist_function_run_seconds_count{function=\"odd \\\"name\\\"\\\\\"}") == 3);
  /* submit to result, as this driver saw it: 20 + 1 + the stream + 3 + 2, one failed; none left */
  CHECK(metric(text, "raydist_task_latency_seconds_count") == 27);
  CHECK(metric(text, "raydist_task_latency_seconds_bucket{le=\"+Inf\"}") == 27);
  CHECK(metric(text, "raydist_task_latency_seconds_sum") >= 1.5);
  CHECK(metric(text, "raydist_owned_tasks_failed_total") == 1);
  CHECK(metric(text, "raydist_owned_tasks{state=\"sent\"}") == 0);
  CHECK(metric(text, "raydist_owned_tasks{state=\"waiting\"}") == 0);
  /* the same by function: ignore_args ran in no time but waited 1.5 s for its argument */
  CHECK(metric(text, "raydist_function_latency_seconds_count{function=\"add_one\"}") == 20);
  CHECK(metric(text, "raydist_function_latency_seconds_count{function=\"ignore_args\"}") == 1);
  CHECK(metric(text, "raydist_function_latency_seconds_sum{function=\"ignore_args\"}") >= 1.4);
  CHECK(metric(text, "raydist_function_run_seconds_sum{function=\"ignore_args\"}") < 1.0);
  CHECK(metric(text, "raydist_function_latency_seconds_count{function=\"odd \\\"name\\\"\\\\\"}") == 3);
  CHECK(metric(text, "raydist_object_store_bytes{kind=\"capacity\"}") > 0);
  CHECK(metric(text, "raydist_drivers") == 1);
  dump_to(getenv("RD_METRICS_DUMP"), text);
  /* bad requests: a clear status each, and the connection closed */
  struct { const char *req; const char *want; } bads[] = {
      {"POST /metrics HTTP/1.0\r\n\r\n", "HTTP/1.0 405 "},
      {"GET /nope HTTP/1.0\r\n\r\n", "HTTP/1.0 404 "},
      {"hello\r\n\r\n", "HTTP/1.0 400 "},
      {"GET /metrics FTP/9\r\n\r\n", "HTTP/1.0 400 "},
  };
  for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
    CHECK(http_exchange(port, bads[i].req, strlen(bads[i].req), body, sizeof(body)) > 0);
    CHECK(strncmp(body, bads[i].want, strlen(bads[i].want)) == 0);
  }
  static char big[6000];
  memset(big, 'a', sizeof(big));
  CHECK(http_exchange(port, big, sizeof(big), body, sizeof(body)) > 0);
  CHECK(strncmp(body, "HTTP/1.0 431 ", 13) == 0);
  const char *tl = "GET /timeline HTTP/1.0\r\n\r\n";   /* RAYDIST_TIMELINE is not set */
  CHECK(http_exchange(port, tl, strlen(tl), body, sizeof(body)) > 0);
  CHECK(strncmp(body, "HTTP/1.0 404 ", 13) == 0 && strstr(body, "RAYDIST_TIMELINE=1") != NULL);
  const char *head = "HEAD /metrics HTTP/1.0\r\n\r\n";
  CHECK(http_exchange(port, head, strlen(head), body, sizeof(body)) > 0);
  CHECK(strncmp(body, "HTTP/1.0 200 ", 13) == 0);
  CHECK(strstr(body, "raydist_") == NULL);   /* headers only */
  double t0 = now_s();
  CHECK_EQ(http_exchange(port, "", 0, body, sizeof(body)), 0);   /* silent client: dropped */
  printf("a silent client was dropped after %.1f s\n", now_s() - t0);
  CHECK(now_s() - t0 < 8);
  n = http_exchange(port, get, strlen(get), body, sizeof(body));
  CHECK(n > 0 && strncmp(body, "HTTP/1.0 200 OK", 15) == 0);   /* still serves */
  /* the dashboard and its JSON: this node's figures, no cluster */
  const char *api = "GET /api/cluster HTTP/1.0\r\n\r\n", *page = "GET / HTTP/1.0\r\n\r\n";
  CHECK(http_exchange(port, api, strlen(api), body, sizeof(body)) > 0);
  CHECK(strncmp(body, "HTTP/1.0 200 OK", 15) == 0 && strstr(body, "Content-Type: application/json"));
  const char *json = strstr(body, "\r\n\r\n") + 4;
  CHECK(strstr(json, "\"cluster\":null") && strstr(json, "\"drivers\":1"));
  const char *run = strstr(json, "\"tasks\":{\"run\":");
  CHECK(run && atol(run + 15) >= 21);
  dump_to(getenv("RD_DASHBOARD_DUMP"), json);
  CHECK(http_exchange(port, page, strlen(page), body, sizeof(body)) > 0);
  CHECK(strncmp(body, "HTTP/1.0 200 OK", 15) == 0 && strstr(body, "Content-Type: text/html"));
  CHECK(strstr(body, "<table id=\"node\">") && strstr(body, "An embedded single-node cluster"));
  const char *headpage = "HEAD / HTTP/1.0\r\n\r\n";
  CHECK(http_exchange(port, headpage, strlen(headpage), body, sizeof(body)) > 0);
  CHECK(strncmp(body, "HTTP/1.0 200 ", 13) == 0 && !strstr(body, "<html"));
  rd_shutdown();
  return 0;
}

/* RAYDIST_TIMELINE=1: each task a complete event of Chrome trace JSON at
 * /timeline, with its name, worker, length and status; two 2-CPU workers
 * overlap.  RD_TIMELINE_DUMP names a file for metrics_format's JSON check. */
static int t_timeline(void) {
  setenv("RAYDIST_TIMELINE", "1", 1);
  init_with_cpus(2);
  enum { N = 10 };
  rd_ref r[N], bad;
  for (int i = 0; i < N; i++) r[i] = submit_sleep(30);
  CHECK_EQ(rd_submit(fail_always, RD_NO_ARGS, NULL, &bad), 0);
  for (int i = 0; i < N; i++) CHECK_EQ(get_status(r[i], 30000), 0);
  CHECK_EQ(get_status(bad, 30000), RD_ETASK);
  usleep(500000);   /* reported within 200 ms of the workers going idle */
  static char body[1 << 20];
  const char *get = "GET /timeline HTTP/1.0\r\n\r\n";
  CHECK(http_exchange(metrics_port(), get, strlen(get), body, sizeof(body)) > 0);
  CHECK(strncmp(body, "HTTP/1.0 200 OK", 15) == 0);
  CHECK(strstr(body, "Content-Type: application/json") != NULL);
  const char *json = strstr(body, "\r\n\r\n") + 4;
  int sleeps = 0, fails = 0, pids[2] = {0, 0}, npids = 0;
  for (const char *p = strstr(json, "{\"name\":"); p; p = strstr(p + 1, "{\"name\":")) {
    int pid = 0, status = 0;
    long long dur = 0;
    const char *d = strstr(p, "\"dur\":"), *pp = strstr(p, "\"pid\":"), *st = strstr(p, "\"status\":");
    CHECK(d && pp && st);
    dur = atoll(d + 6);
    pid = atoi(pp + 6);
    status = atoi(st + 9);
    static const char k_sleep[] = "{\"name\":\"sleep_span\"", k_fail[] = "{\"name\":\"fail_always\"";
    if (strncmp(p, k_sleep, sizeof(k_sleep) - 1) == 0) {
      sleeps++;
      CHECK(dur >= 30000 && status == 0);
    } else if (strncmp(p, k_fail, sizeof(k_fail) - 1) == 0) {
      fails++;
      CHECK(status == RD_ETASK);
    }
    if (npids < 2 && pid != pids[0]) pids[npids++] = pid;
  }
  printf("timeline: %d sleep_span and %d fail_always events on %d worker(s)\n", sleeps, fails, npids);
  CHECK_EQ(sleeps, N);
  CHECK_EQ(fails, 1);
  CHECK_EQ(npids, 2);
  dump_to(getenv("RD_TIMELINE_DUMP"), json);
  rd_shutdown();
  unsetenv("RAYDIST_TIMELINE");
  return 0;
}

/* rd_cancel without force, seen by the worker (TaskCancel): a running task
 * that polls rd_call_cancelled stops early and frees its worker at once, and
 * a task already pushed to that worker behind it is dropped there, never
 * run.  With pipelining the three sit on one worker of a 1-CPU node. */
static int t_cancel_cooperative(void) {
  init_with_cpus(1);
  long x = 0;
  for (int i = 0; i < 50; i++) {   /* short tasks: the class pipelines from now on */
    rd_ref r;
    CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&x, sizeof(x))), NULL, &r), 0);
    x = get_long(r);
    rd_ref_release(r);
  }
  char path[256];
  snprintf(path, sizeof(path), "/tmp/rd-coop-%d", (int)getpid());
  unlink(path);
  long long_ms = 20000, zero = 0;
  rd_ref a, b, c;
  CHECK_EQ(rd_submit(until_cancelled, RD_ARGS(rd_arg_bytes(&long_ms, sizeof(long_ms))), NULL, &a), 0);
  CHECK_EQ(rd_submit(pid_file_sleep, RD_ARGS(rd_arg_bytes(path, strlen(path)), rd_arg_bytes(&zero, sizeof(zero))), NULL,
                     &b), 0);
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&x, sizeof(x))), NULL, &c), 0);
  CHECK_EQ(rd_wait(&a, 1, 1, 300, NULL), 0);   /* a is running */
  CHECK_EQ(rd_cancel(b, 0), 0);
  usleep(100000);                            /* a's polls read the cancel of b */
  double t0 = now_s();
  CHECK_EQ(rd_cancel(a, 0), 0);
  CHECK_EQ(get_status(a, 1000), RD_ECANCELED);
  CHECK_EQ(get_status(b, 1000), RD_ECANCELED);
  CHECK_EQ(get_long(c), x + 1);              /* the worker was free again */
  double took = now_s() - t0;
  printf("cancelled task stopped and the next ran %.3f s after rd_cancel\n", took);
  CHECK(took < 3.0);
  CHECK(access(path, F_OK) != 0);            /* b never ran */
  rd_shutdown();
  return 0;
}

/* rd_cancel with force frees a lease (kills its worker) while the progress
 * thread may sit in poll() on that lease's socket: the pump must not touch
 * the freed lease when poll returns.  Rounds of tasks force-cancelled while
 * the driver stays away from the library; ASan catches a use after free. */
static int t_cancel_race(void) {
  init_with_cpus(2);
  enum { ROUNDS = 25, K = 3 };
  for (int round = 0; round < ROUNDS; round++) {
    rd_ref r[K];
    for (int i = 0; i < K; i++) r[i] = submit_sleep(300);
    usleep(20000 + (useconds_t)(round % 5) * 8000);   /* the progress thread pumps meanwhile */
    for (int i = 0; i < K; i++) CHECK_EQ(rd_cancel(r[i], 1), 0);
    for (int i = 0; i < K; i++) {
      CHECK_EQ(get_status(r[i], 5000), RD_ECANCELED);
      rd_ref_release(r[i]);
    }
  }
  CHECK_EQ(add_one_run(1), 2);
  rd_shutdown();
  return 0;
}

static int t_malformed(void) {
  init_or_die(NULL);
  const char *sess = rd_session_dir();
  char path[512];
  snprintf(path, sizeof(path), "%s/node.sock", sess);
  struct sockaddr_un a;
  memset(&a, 0, sizeof(a));
  a.sun_family = AF_UNIX;
  strcpy(a.sun_path, path);
  /* garbage, an oversized length, an unknown type, a frame before hello */
  const unsigned char bad[][8] = {
      {0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0},   /* 4 GiB payload */
      {4, 0, 0, 0, 0xee, 0x00, 0, 0},         /* unknown type */
      {4, 0, 0, 0, 7, 0, 0, 0},               /* create before hello */
      {4, 0, 0, 0, 1, 0, 0x80, 0},            /* bad flags */
  };
  for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    CHECK_EQ(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    unsigned char buf[12];
    memcpy(buf, bad[k], 8);
    memset(buf + 8, 0xaa, 4);
    CHECK_EQ(write(fd, buf, sizeof(buf)), (long)sizeof(buf));
    /* the daemon answers with an error frame and closes only this client */
    unsigned char rb[256];
    ssize_t total = 0, n;
    while ((n = read(fd, rb, sizeof(rb))) > 0) total += n;
    CHECK(total > 0);
    close(fd);
  }
  /* a hello with a malformed protobuf payload */
  {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK_EQ(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    unsigned char buf[8 + 6] = {6, 0, 0, 0, 1, 0, 0, 0, 0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f};
    CHECK_EQ(write(fd, buf, sizeof(buf)), (long)sizeof(buf));
    unsigned char rb[256];
    while (read(fd, rb, sizeof(rb)) > 0) {}
    close(fd);
  }
  /* the node still serves this driver */
  CHECK_EQ(add_one_run(41), 42);
  rd_shutdown();
  return 0;
}

/* A thread blocked in the library while another calls rd_shutdown. */
typedef struct blocked_call {
  int kind;       /* 0 rd_get, 1 rd_wait, 2 rd_get of a put object after the shutdown began */
  rd_ref ref;
  int result;
  double secs;
} blocked_call;

static void *blocked_caller(void *p) {
  blocked_call *c = p;
  double t0 = now_s();
  rd_buf b;
  if (c->kind == 1) {
    c->result = rd_wait(&c->ref, 1, 1, 60000, NULL);
  } else {
    c->result = rd_get(&c->ref, 1, &b, 60000);
    if (c->result != RD_ETIMEDOUT) rd_buf_release(&b);
  }
  c->secs = now_s() - t0;
  return NULL;
}

/* rd_shutdown while 32 threads wait in rd_get and rd_wait for a task of
 * 60 s: each returns RD_ESTATE at once and the shutdown ends in seconds
 * (it waited for the task, then the threads read freed state: a crash),
 * a second rd_shutdown from another thread returns once the first is
 * done, and rd_init works again. */
static int t_shutdown_waiters(void) {
  init_or_die(NULL);
  rd_ref slow;
  long ms = 60000;
  CHECK_EQ(rd_submit(sleep_span, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms))), NULL, &slow), 0);
  enum { NT = 32 };
  static blocked_call c[NT];
  pthread_t th[NT];
  for (int i = 0; i < NT; i++) {
    c[i] = (blocked_call){i % 2, slow, 1, 0};
    CHECK_EQ(pthread_create(&th[i], NULL, blocked_caller, &c[i]), 0);
  }
  usleep(500000);
  double t0 = now_s();
  rd_shutdown();
  double took = now_s() - t0;
  for (int i = 0; i < NT; i++) {
    CHECK_EQ(pthread_join(th[i], NULL), 0);
    CHECK_EQ(c[i].result, RD_ESTATE);
    CHECK(c[i].secs < 30);
  }
  printf("rd_shutdown with %d threads waiting: %.2f s\n", NT, took);
  CHECK(took < 20);
  rd_shutdown();   /* again: nothing */
  init_or_die(NULL);
  CHECK_EQ(add_one_run(1), 2);
  rd_shutdown();
  return 0;
}

static int t_shutdown_clean(void) {
  init_or_die(NULL);
  char sess[512];
  snprintf(sess, sizeof(sess), "%s", rd_session_dir());
  struct stat st;
  CHECK_EQ(stat(sess, &st), 0);
  CHECK_EQ(st.st_mode & 0777, 0700);
  char sock[600];
  snprintf(sock, sizeof(sock), "%s/node.sock", sess);
  CHECK_EQ(stat(sock, &st), 0);
  CHECK_EQ(st.st_mode & 0777, 0600);
  long pids[16];
  int np = 0;
  for (int i = 0; i < 16; i++) {
    rd_ref r;
    long ms = 30;
    CHECK_EQ(rd_submit(sleep_span, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms))), NULL, &r), 0);
    rd_buf b;
    CHECK_EQ(rd_get(&r, 1, &b, 30000), 0);
    span s;
    memcpy(&s, b.data, sizeof(s));
    rd_buf_release(&b);
    rd_ref_release(r);
    pids[np++] = s.pid;
  }
  /* the daemon is our child: find it */
  long daemon_pid = 0;
  DIR *d = opendir("/proc");
  struct dirent *e;
  while ((e = readdir(d))) {
    char p[300], buf[512];
    snprintf(p, sizeof(p), "/proc/%s/stat", e->d_name);
    FILE *f = fopen(p, "r");
    if (!f) continue;
    if (fgets(buf, sizeof(buf), f)) {
      char *rp = strrchr(buf, ')');
      int ppid = 0;
      if (rp && sscanf(rp + 2, "%*c %d", &ppid) == 1 && ppid == getpid() && strstr(buf, "(raydist)"))
        daemon_pid = atol(e->d_name);
    }
    fclose(f);
  }
  closedir(d);
  CHECK(daemon_pid > 0);
  rd_shutdown();
  CHECK(kill((pid_t)daemon_pid, 0) != 0 && errno == ESRCH);
  for (int i = 0; i < np; i++) CHECK(kill((pid_t)pids[i], 0) != 0 && errno == ESRCH);
  CHECK(stat(sess, &st) != 0 && errno == ENOENT);
  /* init again in the same process works */
  init_or_die(NULL);
  CHECK_EQ(add_one_run(1), 2);
  rd_shutdown();
  return 0;
}

/* A driver killed (no rd_shutdown): its embedded node goes, and takes the
 * session directory with it (until 2026-12-05 the directory stayed, with
 * the metrics file and logs/ in it: hundreds of them piled up in /tmp).
 * The driver is this program again (killed_driver_child, so that its
 * workers are too), telling its session directory on fd $RD_SESS_FD. */
static int t_killed_driver_child(void) {
  init_or_die(NULL);
  const char *fd = getenv("RD_SESS_FD");
  CHECK(fd != NULL);
  CHECK_EQ(add_one_run(1), 2);   /* a worker started */
  const char *sess = rd_session_dir();
  CHECK(write(atoi(fd), sess, strlen(sess)) == (ssize_t)strlen(sess));
  close(atoi(fd));
  for (;;) pause();
}

static int t_killed_driver_clean(void) {
  int p[2];
  CHECK_EQ(pipe(p), 0);
  pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) {
    close(p[0]);
    char fd[16];
    snprintf(fd, sizeof(fd), "%d", p[1]);
    setenv("RD_SESS_FD", fd, 1);
    execl("/proc/self/exe", "rt_test", "killed_driver_child", (char *)NULL);
    _exit(127);
  }
  close(p[1]);
  char sess[512];
  ssize_t n = read(p[0], sess, sizeof(sess) - 1);
  close(p[0]);
  CHECK(n > 0);
  sess[n] = 0;
  struct stat st;
  char metrics[600];
  snprintf(metrics, sizeof(metrics), "%s/metrics", sess);
  CHECK_EQ(stat(metrics, &st), 0);
  CHECK_EQ(kill(child, SIGKILL), 0);
  int status;
  CHECK_EQ(waitpid(child, &status, 0), child);
  int gone = 0;
  for (int i = 0; i < 200 && !gone; i++) {
    gone = stat(sess, &st) != 0 && errno == ENOENT;
    if (!gone) usleep(50000);
  }
  printf("session %s %s\n", sess, gone ? "removed" : "left");
  if (!gone) {   /* kept (a worker wrote something: what?) or not ended */
    char cmd[1800];
    snprintf(cmd, sizeof(cmd), "ls -lR '%s'; head -c 2000 '%s'/logs/* '%s'/ended", sess, sess, sess);
    if (system(cmd) != 0) printf("(cannot list it)\n");
  }
  CHECK(gone);
  return 0;
}

/* Waits (up to 3 s) until `rendezvous` tasks run at once, each marked by
 * a key of its worker's pid; its pid. */
RD_REMOTE(rendezvous) {
  char key[64];
  snprintf(key, sizeof(key), "rv-%d", (int)getpid());
  if (rd_kv_put(key, "1", 1, 1) != 0) return rd_call_fail(call, "kv put");
  for (int i = 0; i < 300; i++) {
    char **keys = NULL;
    size_t n = 0;
    if (rd_kv_keys("rv-", &keys, &n) != 0) return rd_call_fail(call, "kv keys");
    free(keys);
    if (n >= 3) break;
    usleep(10000);
  }
  long pid = getpid();
  return rd_return_bytes(call, 0, &pid, sizeof(pid));
}

/* Three tasks of a slow function submitted after many fast tasks of
 * another (the same resources, so the same scheduling class) run at once
 * on the three CPUs: the pipeline depth is the function's, not the
 * class's.  Until 2026-12-06 the class's average of the fast tasks sent
 * all three, 32 deep, to the one lease the fast tasks had used: they ran
 * one after the other on one worker (9 s here) with two CPUs idle. */
static int t_depth_by_function(void) {
  init_with_cpus(3);
  for (long i = 0; i < 20; i++) {   /* one at a time: one lease */
    rd_ref r;
    CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&i, sizeof(i))), NULL, &r), 0);
    CHECK_EQ(get_long(r), i + 1);
    rd_ref_release(r);
  }
  double t0 = now_s();
  rd_ref r[3];
  for (int i = 0; i < 3; i++) CHECK_EQ(rd_submit(rendezvous, RD_NO_ARGS, NULL, &r[i]), 0);
  long pid[3];
  for (int i = 0; i < 3; i++) {
    pid[i] = get_long(r[i]);
    rd_ref_release(r[i]);
  }
  double took = now_s() - t0;
  printf("3 rendezvous tasks after 20 fast ones: %.2f s, pids %ld %ld %ld\n", took, pid[0], pid[1], pid[2]);
  CHECK(pid[0] != pid[1] && pid[1] != pid[2] && pid[0] != pid[2]);
  CHECK(took < 2.5);
  rd_shutdown();
  return 0;
}

/* A task waiting for a result whose task is then pipelined behind it on
 * its own worker: hb_read (on a second worker: its function is not timed
 * yet, so nothing shares a worker with it) waits for hb_make's result;
 * hb_make's first attempt dies, and its retry goes to the lease with the
 * fewest tasks in flight, hb_read's (hb_make's function is timed fast, so
 * pipelined).  The waiting worker hands it back (TaskReply.unrun) and it
 * runs on another worker; before, each waited for the other until
 * hb_read's get timed out (found by the chaos driver: 60 s). */
static int t_blocked_handback(void) {
  init_with_cpus(2);
  for (long i = 0; i < 10; i++) {   /* hb_make timed: fast, so pipelined */
    long zero = 0;
    rd_ref r;
    CHECK_EQ(rd_submit(hb_make, RD_ARGS(rd_arg_bytes(&zero, sizeof(zero))), NULL, &r), 0);
    CHECK_EQ(get_long(r), 1);
    rd_ref_release(r);
  }
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.max_retries = 1;
  long one = 1;
  rd_ref a, b;
  CHECK_EQ(rd_submit(hb_make, RD_ARGS(rd_arg_bytes(&one, sizeof(one))), &o, &a), 0);
  CHECK_EQ(rd_submit(hb_read, RD_ARGS(rd_arg_borrow(a)), NULL, &b), 0);
  double t0 = now_s();
  CHECK_EQ(get_long(b), 2);
  double took = now_s() - t0;
  printf("a task waiting for a retry pipelined behind it: done in %.2f s\n", took);
  CHECK(took < 5);
  CHECK_EQ(get_long(a), 2);
  rd_ref_release(a);
  rd_ref_release(b);
  rd_shutdown();
  return 0;
}

typedef struct thr_arg {
  int base, n, ok;
} thr_arg;

static void *submitter(void *p) {
  thr_arg *a = p;
  for (int i = 0; i < a->n; i++) {
    long v = a->base + i;
    rd_ref r;
    if (rd_submit(add_one, RD_ARGS(rd_arg_bytes(&v, sizeof(v))), NULL, &r) != 0) return NULL;
    rd_buf b;
    if (rd_get(&r, 1, &b, 30000) != 0) return NULL;
    long w;
    memcpy(&w, b.data, sizeof(w));
    rd_buf_release(&b);
    rd_ref_release(r);
    if (w != v + 1) return NULL;
  }
  a->ok = 1;
  return NULL;
}

/* Puts n objects of 200 KB (through the store) holding base, reads each back. */
static void *putter(void *p) {
  thr_arg *a = p;
  enum { N = 200000 / sizeof(long) };
  long *v = malloc(N * sizeof(long));
  if (!v) return NULL;
  for (size_t i = 0; i < N; i++) v[i] = a->base;
  int ok = 1;
  for (int i = 0; i < a->n && ok; i++) {
    rd_ref r;
    int e = rd_put(v, N * sizeof(long), &r);
    if (e) {
      fprintf(stderr, "rd_put: %s\n", rd_err_name(e));
      ok = 0;
      break;
    }
    rd_buf b;
    ok = rd_get(&r, 1, &b, 30000) == 0 && b.size == N * sizeof(long) && !memcmp(b.data, v, b.size);
    if (ok) rd_buf_release(&b);
    rd_ref_release(r);
  }
  free(v);
  a->ok = ok;
  return NULL;
}

static int t_threads(void) {
  init_or_die(NULL);
  pthread_t th[4];
  thr_arg args[4];
  for (int i = 0; i < 4; i++) {
    args[i] = (thr_arg){i * 100000, 300, 0};
    pthread_create(&th[i], NULL, submitter, &args[i]);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    CHECK(args[i].ok);
  }
  /* 128 threads putting objects through the store at once: each
   * allocation waits for the node's answer (64 waiting was a limit once,
   * past which rd_put failed with RD_EAGAIN) */
  enum { NT = 128 };
  static pthread_t pt[NT];
  static thr_arg pa[NT];
  for (int i = 0; i < NT; i++) {
    pa[i] = (thr_arg){i, 20, 0};
    CHECK_EQ(pthread_create(&pt[i], NULL, putter, &pa[i]), 0);
  }
  for (int i = 0; i < NT; i++) {
    pthread_join(pt[i], NULL);
    CHECK(pa[i].ok);
  }
  rd_shutdown();
  return 0;
}

/* The job's executable cannot be started (here: deleted after the driver
 * started): tasks fail with RD_ESYS naming the reason, instead of waiting
 * forever for a worker.  Runs in a copy of this program that deletes itself. */
/* Submit add_one where no worker can start: it must fail with RD_ESYS, the
 * message naming `reason` (NULL: anything); the seconds it took. */
static double add_one_fails_to_start(const char *what, const char *reason) {
  rd_ref r;
  long x = 1;
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&x, sizeof(x))), NULL, &r), 0);
  rd_buf b;
  double t0 = now_s();
  int e = rd_get(&r, 1, &b, 60000);
  double secs = now_s() - t0;
  printf("%s: %s after %.1f s: %.*s\n", what, rd_err_name(e), secs, e ? (int)b.size : 0, e ? (const char *)b.data : "");
  CHECK_EQ(e, RD_ESYS);
  if (reason) CHECK(b.size > 0 && memmem(b.data, b.size, reason, strlen(reason)) != NULL);
  rd_buf_release(&b);
  rd_ref_release(r);
  return secs;
}

static int t_spawn_fails_child(void) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  CHECK(n > 0);
  self[n] = 0;
  CHECK_EQ(unlink(self), 0);
  CHECK_EQ(rd_init(NULL), 0);
  (void)add_one_fails_to_start("with no way to start workers", NULL);
  rd_shutdown();
  return 0;
}

static int t_spawn_fails(void) {
  char self[4096], copy[4200];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  CHECK(n > 0);
  self[n] = 0;
  snprintf(copy, sizeof(copy), "%s.spawn-fails.%d", self, (int)getpid());
  char cmd[8600];
  snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", self, copy);
  CHECK_EQ(system(cmd), 0);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    execl(copy, copy, "spawn_fails_child", (char *)NULL);
    _exit(127);
  }
  int st = 0;
  CHECK_EQ(waitpid(pid, &st, 0), pid);
  unlink(copy);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  return 0;
}

/* Workers that exit before joining the node (here: at once, before
 * rd_init) are not restarted forever: after 3 in a row the request fails
 * with RD_ESYS saying so, and the node keeps serving what needs no worker. */
static int t_workers_crash_at_start(void) {
  if (getenv("RAYDIST_WORKER_ID")) _exit(3);   /* as a worker: die before joining */
  init_or_die(NULL);
  CHECK(add_one_fails_to_start("workers that exit at start", "status 3") < 30);
  /* the node still answers and stores */
  rd_buf b;
  rd_node_info ni;
  CHECK_EQ(rd_node_info_get(&ni), 0);
  rd_ref o;
  CHECK_EQ(rd_put("abc", 3, &o), 0);
  CHECK_EQ(rd_get(&o, 1, &b, 10000), 0);
  CHECK_EQ(b.size, 3);
  rd_buf_release(&b);
  rd_ref_release(o);
  rd_shutdown();
  return 0;
}

/* A result (3 MiB, in the store) and a small one, each released by
 * another thread while this one waits for it in rd_get: a misuse, which
 * gets RD_EINVAL with a message for those slots (it read freed memory
 * before), while the slots still held come back whole. */
RD_REMOTE(big_after) {
  rd_buf a;
  if (rd_arg(call, 0, &a)) return rd_call_fail(call, "args");
  long ms;
  memcpy(&ms, a.data, sizeof(ms));
  usleep((useconds_t)(ms * 1000));
  size_t n = ms > 250 ? 3u << 20 : 16;
  uint8_t *p = rd_return_alloc(call, 0, n);
  if (!p) return rd_call_fail(call, "rd_return_alloc");
  memset(p, 7, n);
  return 0;
}

typedef struct release_later {
  rd_ref ref;
  long ms;
} release_later;

static void *releaser(void *arg) {
  release_later *r = arg;
  usleep((useconds_t)(r->ms * 1000));
  rd_ref_release(r->ref);
  return NULL;
}

static int t_get_released(void) {
  init_with_cpus(3);
  long ms[3] = {300, 200, 300};   /* the first and last are 3 MiB, the middle 16 bytes */
  rd_ref refs[3];
  for (int i = 0; i < 3; i++) CHECK_EQ(rd_submit(big_after, RD_ARGS(rd_arg_bytes(&ms[i], sizeof(ms[i]))), NULL, &refs[i]), 0);
  release_later rl[2] = {{refs[0], 100}, {refs[1], 100}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, releaser, &rl[i]);
  rd_buf b[3];
  int r = rd_get(refs, 3, b, 30000);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  printf("rd_get: %s; slots %s (%.*s), %s, %s (%zu bytes)\n", rd_err_name(r), rd_err_name(b[0].error),
         (int)b[0].size, (const char *)b[0].data, rd_err_name(b[1].error), rd_err_name(b[2].error), b[2].size);
  CHECK_EQ(r, RD_EINVAL);
  CHECK_EQ(b[0].error, RD_EINVAL);
  CHECK(strstr((const char *)b[0].data, "released by another thread") != NULL);
  CHECK_EQ(b[1].error, RD_EINVAL);
  CHECK_EQ(b[2].error, 0);
  CHECK_EQ(b[2].size, 3u << 20);
  CHECK_EQ(((const uint8_t *)b[2].data)[12345], 7);
  for (int i = 0; i < 3; i++) rd_buf_release(&b[i]);
  rd_ref_release(refs[2]);
  rd_node_info ni;
  for (int i = 0; i < 100; i++) {   /* nothing left pinned or stored */
    CHECK_EQ(rd_node_info_get(&ni), 0);
    if (ni.store_used == 0) break;
    usleep(20000);
  }
  CHECK_EQ(ni.store_used, 0);
  rd_shutdown();
  return 0;
}

/* rd_kv_*: a task reads the key arg0 names and stores "<value>+task" under
 * "<key>.reply"; with a long arg1, it puts 100 keys "many/<arg1>/<i>". */
RD_REMOTE(kv_task) {
  rd_buf k, n;
  if (rd_arg(call, 0, &k) != 0 || rd_arg(call, 1, &n) != 0 || n.size != sizeof(long)) return rd_call_fail(call, "args");
  char key[600];
  snprintf(key, sizeof(key), "%.*s", (int)k.size, (const char *)k.data);
  long which;
  memcpy(&which, n.data, sizeof(which));
  if (which >= 0) {
    for (int i = 0; i < 100; i++) {
      char kk[64];
      snprintf(kk, sizeof(kk), "many/%ld/%03d", which, i);
      int e = rd_kv_put(kk, &i, sizeof(i), 0);
      if (e) return rd_call_fail(call, "put %s: %s", kk, rd_err_name(e));
    }
    return rd_return_bytes(call, 0, "ok", 2);
  }
  void *v;
  size_t len;
  int e = rd_kv_get(key, &v, &len);
  if (e) return rd_call_fail(call, "get %s: %s", key, rd_err_name(e));
  char out[256];
  int m = snprintf(out, sizeof(out), "%.*s+task", (int)len, (const char *)v);
  free(v);
  strcat(key, ".reply");
  e = rd_kv_put(key, out, (size_t)m, 1);
  if (e) return rd_call_fail(call, "put: %s", rd_err_name(e));
  return rd_return_bytes(call, 0, "ok", 2);
}

static void kv_expect(const char *key, const void *want, size_t n) {
  void *v = NULL;
  size_t len = 0;
  CHECK_EQ(rd_kv_get(key, &v, &len), 0);
  CHECK_EQ(len, n);
  CHECK(n == 0 || memcmp(v, want, n) == 0);
  free(v);
}

/* The key-value store of an embedded cluster, through the public API. */
static int t_kv(void) {
  rd_bundle room = {.num_cpus = 1};
  CHECK_EQ(rd_request_resources(&room, 1), RD_ESTATE);   /* before rd_init */
  init_with_cpus(2);
  /* no autoscaler on an embedded cluster: taken, read by nothing, and not
   * a key of the user's */
  CHECK_EQ(rd_request_resources(&room, 1), 0);
  CHECK_EQ(rd_request_resources(NULL, 0), 0);
  room.num_cpus = -1;
  CHECK_EQ(rd_request_resources(&room, 1), RD_EINVAL);
  void *rv;
  size_t rn;
  CHECK_EQ(rd_kv_get("requested", &rv, &rn), RD_ENOENT);
  CHECK_EQ(rd_kv_put("cfg/model", "minilm", 6, 0), 0);
  kv_expect("cfg/model", "minilm", 6);
  CHECK_EQ(rd_kv_put("cfg/model", "other", 5, 0), RD_EEXIST);   /* kept */
  kv_expect("cfg/model", "minilm", 6);
  CHECK_EQ(rd_kv_put("cfg/model", "bert", 4, 1), 0);             /* replaced */
  kv_expect("cfg/model", "bert", 4);
  const char bin[5] = {0, 1, 0, 2, 0};
  CHECK_EQ(rd_kv_put("cfg/bin", bin, sizeof(bin), 0), 0);          /* bytes, NULs included */
  kv_expect("cfg/bin", bin, sizeof(bin));
  CHECK_EQ(rd_kv_put("cfg/empty", NULL, 0, 0), 0);
  kv_expect("cfg/empty", NULL, 0);
  CHECK_EQ(rd_kv_put("other", "x", 1, 0), 0);
  char **keys;
  size_t n;
  CHECK_EQ(rd_kv_keys("cfg/", &keys, &n), 0);
  CHECK_EQ(n, 3);
  CHECK(!strcmp(keys[0], "cfg/bin") && !strcmp(keys[1], "cfg/empty") && !strcmp(keys[2], "cfg/model") && !keys[3]);
  free(keys);
  CHECK_EQ(rd_kv_keys(NULL, &keys, &n), 0);
  CHECK_EQ(n, 4);
  free(keys);
  CHECK_EQ(rd_kv_keys("nothing", &keys, &n), 0);
  CHECK_EQ(n, 0);
  free(keys);
  void *v;
  size_t len;
  CHECK_EQ(rd_kv_get("missing", &v, &len), RD_ENOENT);
  CHECK_EQ(rd_kv_del("other"), 0);
  CHECK_EQ(rd_kv_del("other"), RD_ENOENT);
  CHECK_EQ(rd_kv_get("other", &v, &len), RD_ENOENT);
  /* bad input */
  static char longkey[RD_KV_MAX_KEY + 2];
  memset(longkey, 'k', sizeof(longkey) - 1);
  CHECK_EQ(rd_kv_put(longkey, "x", 1, 0), RD_EINVAL);
  longkey[RD_KV_MAX_KEY] = 0;   /* exactly the limit */
  CHECK_EQ(rd_kv_put(longkey, "x", 1, 0), 0);
  CHECK_EQ(rd_kv_put(NULL, "x", 1, 0), RD_EINVAL);
  CHECK_EQ(rd_kv_put("", "x", 1, 0), RD_EINVAL);
  CHECK_EQ(rd_kv_get("", &v, &len), RD_EINVAL);
  CHECK_EQ(rd_kv_del(NULL), RD_EINVAL);
  CHECK_EQ(rd_kv_put("k", NULL, 3, 0), RD_EINVAL);
  char *big = calloc(1, RD_KV_MAX_VALUE + 1);
  CHECK(big);
  CHECK_EQ(rd_kv_put("big", big, RD_KV_MAX_VALUE + 1, 0), RD_EINVAL);
  CHECK_EQ(rd_kv_put("big", big, RD_KV_MAX_VALUE, 0), 0);
  CHECK_EQ(rd_kv_get("big", &v, &len), 0);
  CHECK_EQ(len, RD_KV_MAX_VALUE);
  free(v);
  free(big);
  /* seen from tasks: one reads and answers, four write 100 keys each at once */
  rd_ref r[5];
  long minus = -1;
  CHECK_EQ(rd_submit(kv_task, RD_ARGS(rd_arg_bytes("cfg/model", 9), rd_arg_bytes(&minus, sizeof(minus))), NULL, &r[0]),
           0);
  for (long i = 0; i < 4; i++)
    CHECK_EQ(rd_submit(kv_task, RD_ARGS(rd_arg_bytes("x", 1), rd_arg_bytes(&i, sizeof(i))), NULL, &r[1 + i]), 0);
  for (int i = 0; i < 5; i++) {
    rd_buf b;
    int e = rd_get(&r[i], 1, &b, 60000);
    if (e) fprintf(stderr, "kv_task %d: %.*s\n", i, (int)b.size, (const char *)b.data);
    CHECK_EQ(e, 0);
    rd_buf_release(&b);
    rd_ref_release(r[i]);
  }
  kv_expect("cfg/model.reply", "bert+task", 9);
  CHECK_EQ(rd_kv_keys("many/", &keys, &n), 0);
  CHECK_EQ(n, 400);
  for (size_t i = 1; i < n; i++) CHECK(strcmp(keys[i - 1], keys[i]) < 0);   /* sorted */
  free(keys);
  rd_shutdown();
  CHECK_EQ(rd_kv_get("cfg/model", &v, &len), RD_ESTATE);
  return 0;
}

/* Fails (RD_ETASK) on its first arg0 attempts, then returns its attempt. */
RD_REMOTE(flaky) {
  rd_buf a;
  if (rd_arg(call, 0, &a) != 0 || a.size != sizeof(long)) return rd_call_fail(call, "bad args");
  long fails;
  memcpy(&fails, a.data, sizeof(fails));
  long at = rd_call_attempt(call);
  if (at < fails) return rd_call_fail(call, "flaky: attempt %ld fails", at);
  return rd_return_bytes(call, 0, &at, sizeof(at));
}

static int flaky_get(long fails, int max_retries, int retry, long *attempt, char *msg, size_t msglen) {
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.max_retries = max_retries;
  o.retry_failures = retry;
  rd_ref r;
  CHECK_EQ(rd_submit(flaky, RD_ARGS(rd_arg_bytes(&fails, sizeof(fails))), &o, &r), 0);
  rd_buf b;
  int e = rd_get(&r, 1, &b, 60000);
  if (e == 0) {
    CHECK_EQ(b.size, sizeof(long));
    memcpy(attempt, b.data, sizeof(long));
  } else {
    snprintf(msg, msglen, "%.*s", (int)b.size, (const char *)b.data);
  }
  rd_buf_release(&b);
  rd_ref_release(r);
  return e;
}

/* rd_task_opts.retry_failures: a failed run is run again within
 * max_retries; without it, or with no retries left, the failure stands
 * and says which attempt it was. */
static int t_retry_failures(void) {
  init_with_cpus(2);
  long at = -1;
  char msg[256] = "";
  CHECK_EQ(flaky_get(2, 3, 1, &at, msg, sizeof(msg)), 0);
  CHECK_EQ(at, 2);   /* third run */
  CHECK_EQ(flaky_get(2, 3, 0, &at, msg, sizeof(msg)), RD_ETASK);   /* not asked for */
  CHECK(strstr(msg, "attempt 0 fails"));
  CHECK_EQ(flaky_get(5, 2, 1, &at, msg, sizeof(msg)), RD_ETASK);   /* retries run out */
  printf("always failing, max_retries 2: %s\n", msg);
  CHECK(strstr(msg, "attempt 2 fails") && strstr(msg, "(attempt 3 of 3)"));
  CHECK_EQ(flaky_get(1, 0, 1, &at, msg, sizeof(msg)), RD_ETASK);   /* max_retries 0: no retry */
  CHECK(strstr(msg, "attempt 0 fails"));
  /* many at once, each failing twice: all succeed */
  enum { NF = 50 };
  rd_ref r[NF];
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.retry_failures = 1;
  long two = 2;
  for (int i = 0; i < NF; i++) CHECK_EQ(rd_submit(flaky, RD_ARGS(rd_arg_bytes(&two, sizeof(two))), &o, &r[i]), 0);
  for (int i = 0; i < NF; i++) CHECK_EQ(get_long(r[i]), 2);
  /* not for a streaming task */
  o.num_returns = RD_STREAMING;
  CHECK_EQ(rd_submit(flaky, RD_ARGS(rd_arg_bytes(&two, sizeof(two))), &o, &r[0]), RD_EINVAL);
  rd_shutdown();
  return 0;
}

/* For max_calls: the process a task ran in, and its attempt. */
RD_REMOTE(pid_attempt) {
  long v[2] = {(long)getpid(), rd_call_attempt(call)};
  return rd_return_bytes(call, 0, v, sizeof(v));
}

RD_REMOTE(pid_plain) {
  long v[2] = {(long)getpid(), rd_call_attempt(call)};
  return rd_return_bytes(call, 0, v, sizeof(v));
}

/* Fails, naming its process. */
RD_REMOTE(pid_fail) { return rd_call_fail(call, "pid %ld", (long)getpid()); }

/* A streaming task yielding its pid args[0] times. */
RD_REMOTE(yield_pid) {
  rd_buf a;
  long n = 0, pid = (long)getpid();
  if (rd_arg(call, 0, &a) == 0 && a.size == sizeof(n)) memcpy(&n, a.data, sizeof(n));
  for (long i = 0; i < n; i++)
    if (rd_yield(call, &pid, sizeof(pid)) != 0) return rd_call_fail(call, "rd_yield");
  return 0;
}

/* pids[] seen so far (n of them, counts in cnt[]): count pid, return its count. */
static int pid_count(long *pids, int *cnt, int *n, long pid) {
  for (int i = 0; i < *n; i++)
    if (pids[i] == pid) return ++cnt[i];
  pids[*n] = pid;
  cnt[*n] = 1;
  return cnt[(*n)++];
}

/* rd_task_opts.max_calls: a worker runs a function at most that many times
 * and is replaced; the tasks pipelined to it after its last run go to other
 * workers without using a retry (max_retries 0 here: one lost would fail);
 * failed runs count; other functions in the same workers are not limited;
 * streaming tasks too; a negative limit is refused. */
static int t_max_calls(void) {
  init_with_cpus(2);
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.max_calls = -1;
  rd_ref r;
  CHECK_EQ(rd_submit(pid_attempt, RD_NO_ARGS, &o, &r), RD_EINVAL);
  o.max_calls = 3;
  o.max_retries = 0;
  enum { N = 300 };
  static rd_ref refs[N];
  static long pids[N];
  static int cnt[N];
  int np = 0;
  for (int i = 0; i < N; i++) CHECK_EQ(rd_submit(pid_attempt, RD_NO_ARGS, &o, &refs[i]), 0);
  for (int i = 0; i < N; i++) {
    rd_buf b;
    int e = rd_get(&refs[i], 1, &b, 60000);
    if (e != 0) {
      fprintf(stderr, "task %d: %s: %.*s\n", i, rd_err_name(e), (int)b.size, (const char *)b.data);
      return 1;
    }
    long v[2];
    memcpy(v, b.data, sizeof(v));
    CHECK_EQ(v[1], 0);                                  /* no retry was used */
    CHECK(pid_count(pids, cnt, &np, v[0]) <= 3);        /* no process ran it a 4th time */
    rd_buf_release(&b);
    rd_ref_release(refs[i]);
  }
  printf("max_calls 3: %d tasks in %d processes\n", N, np);
  CHECK(np >= N / 3);
  /* two functions in the same workers (same resources): only the limited one is limited */
  np = 0;
  rd_task_opts plain;
  rd_task_opts_init(&plain);
  plain.max_retries = 0;
  o.max_calls = 2;
  for (int i = 0; i < N; i++)
    CHECK_EQ(rd_submit(i % 4 == 0 ? pid_attempt : pid_plain, RD_NO_ARGS, i % 4 == 0 ? &o : &plain, &refs[i]), 0);
  static long ppids[N];
  static int pcnt[N];
  int npp = 0, most_plain = 0;
  for (int i = 0; i < N; i++) {
    rd_buf b;
    CHECK_EQ(rd_get(&refs[i], 1, &b, 60000), 0);
    long v[2];
    memcpy(v, b.data, sizeof(v));
    CHECK_EQ(v[1], 0);
    if (i % 4 == 0) {
      CHECK(pid_count(pids, cnt, &np, v[0]) <= 2);
    } else {
      int c = pid_count(ppids, pcnt, &npp, v[0]);
      if (c > most_plain) most_plain = c;
    }
    rd_buf_release(&b);
    rd_ref_release(refs[i]);
  }
  printf("mixed: the limited function in %d processes, the other one up to %d times in one\n", np, most_plain);
  CHECK(most_plain > 2);
  /* failed runs count: one failure per process */
  o.max_calls = 1;
  enum { NF = 20 };
  long fpids[NF];
  for (int i = 0; i < NF; i++) CHECK_EQ(rd_submit(pid_fail, RD_NO_ARGS, &o, &refs[i]), 0);
  for (int i = 0; i < NF; i++) {
    rd_buf b;
    CHECK_EQ(rd_get(&refs[i], 1, &b, 60000), RD_ETASK);
    char msg[64];
    snprintf(msg, sizeof(msg), "%.*s", (int)b.size, (const char *)b.data);
    CHECK(sscanf(msg, "pid %ld", &fpids[i]) == 1);
    for (int k = 0; k < i; k++) CHECK(fpids[k] != fpids[i]);
    rd_buf_release(&b);
    rd_ref_release(refs[i]);
  }
  /* streaming tasks, one per process */
  o.num_returns = RD_STREAMING;
  enum { NS = 8 };
  long spid[NS];
  long three = 3;
  for (int i = 0; i < NS; i++) CHECK_EQ(rd_submit(yield_pid, RD_ARGS(rd_arg_bytes(&three, sizeof(three))), &o, &refs[i]), 0);
  for (int i = 0; i < NS; i++) {
    for (int k = 0; k < 3; k++) {
      rd_ref item;
      CHECK_EQ(rd_stream_next(refs[i], &item, 60000), 0);
      long p = get_long(item);
      rd_ref_release(item);
      if (k == 0) spid[i] = p;
      CHECK_EQ(p, spid[i]);
    }
    rd_ref item;
    CHECK_EQ(rd_stream_next(refs[i], &item, 60000), RD_EEND);
    for (int k = 0; k < i; k++) CHECK(spid[k] != spid[i]);
    rd_ref_release(refs[i]);
  }
  rd_shutdown();
  return 0;
}

/* rd_nodes and rd_cluster_resources on an embedded cluster: one node,
 * index 0, its resources as configured, and what a running task holds seen
 * at once (the caller's own node is described live). */
/* An actor that only says it is alive (t_labels). */
static int where_init(rd_call *call, void **state) {
  (void)call;
  *state = NULL;
  return 0;
}
RD_ACTOR_CLASS(Where, where_init, NULL)
RD_ACTOR_METHOD(Where, pid) {
  (void)state;
  long p = getpid();
  return rd_return_bytes(call, 0, &p, sizeof(p));
}
RD_ACTOR_METHOD(Where, crash) {
  (void)call, (void)state;
  abort();
}
RD_ACTOR_METHOD(Where, die_kill) {
  (void)call, (void)state;
  raise(SIGKILL);
  return 0;
}

/* An actor's worker that crashes in a call: its caller's message says how
 * (t_crash_report's, for an actor) and the report names the method. */
/* Where.pid of a, rd_get checked. */
static long get_long_ok(rd_actor a) {
  rd_ref r;
  CHECK_EQ(rd_actor_call(a, Where_pid, NULL, 0, NULL, &r), 0);
  return get_long(r);
}

static int t_crash_report_actor(void) {
  init_or_die(NULL);
  rd_actor a;
  CHECK_EQ(rd_actor_create(Where, NULL, 0, NULL, &a), 0);
  rd_ref r;
  CHECK_EQ(rd_actor_call(a, Where_pid, NULL, 0, NULL, &r), 0);
  long pid = get_long(r);
  CHECK_EQ(rd_actor_call(a, Where_crash, NULL, 0, NULL, &r), 0);
  rd_buf b;
  CHECK_EQ(rd_get(&r, 1, &b, 60000), RD_EACTOR_DIED);
  printf("%s\n", (const char *)b.data);
  char want[300], text[16384];
  snprintf(want, sizeof(want), "(worker pid %ld) died of SIGABRT (Aborted) while running 'Where.crash'", pid);
  CHECK(strstr((const char *)b.data, want) != NULL);
  rd_buf_release(&b);
  snprintf(want, sizeof(want), "*** raydist worker %ld: died of SIGABRT (Aborted) while running task 'Where.crash' (",
           pid);
  CHECK(worker_err_has_then(pid, want, "rt_test(Where_crash_impl+0x", text, sizeof(text)));   /* the method, named */
  rd_shutdown();
  return 0;
}

/* t_exit_word for an actor: the call running when its process is killed
 * (no report of its own) says how, from the node; the restarted actor
 * serves the next call; one killed from outside between calls is dead
 * (no restart left) with the same word. */
static int t_exit_word_actor(void) {
  init_or_die(NULL);
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.max_restarts = 1;
  rd_actor a;
  CHECK_EQ(rd_actor_create(Where, NULL, 0, &ao, &a), 0);
  long pid = get_long_ok(a);
  unsigned long long oom0 = oom_kills_now();
  rd_ref r;
  rd_buf b;
  CHECK_EQ(rd_actor_call(a, Where_die_kill, NULL, 0, NULL, &r), 0);
  CHECK_EQ(rd_get(&r, 1, &b, 60000), RD_EACTOR_DIED);
  printf("%s\n", (const char *)b.data);
  char want[300];
  snprintf(want, sizeof(want), "(worker pid %ld) was killed by SIGKILL, %s while running 'Where.die_kill' "
           "(max_task_retries=0)", pid, oom_kills_now() == oom0 ? "not by raydist (a kill -9, or the kernel)" : "");
  CHECK(strstr((const char *)b.data, oom_kills_now() == oom0 ? want : "was killed by SIGKILL, ") != NULL);
  rd_buf_release(&b);
  long pid2 = get_long_ok(a);   /* restarted */
  CHECK(pid2 != pid);
  CHECK_EQ(kill((pid_t)pid2, SIGKILL), 0);
  char m[600];
  int e = RD_OK;
  for (int i = 0; i < 100; i++) {   /* the node may see the exit after this call went out */
    CHECK_EQ(rd_actor_call(a, Where_pid, NULL, 0, NULL, &r), 0);
    if ((e = rd_get(&r, 1, &b, 60000)) != RD_OK) break;
    rd_buf_release(&b);
    usleep(20000);
  }
  CHECK_EQ(e, RD_EACTOR_DIED);
  snprintf(m, sizeof(m), "%s", (const char *)b.data);
  rd_buf_release(&b);
  printf("%s\n", m);
  snprintf(want, sizeof(want), "pid %ld) was killed by SIGKILL, ", pid2);   /* a call in flight, or the next */
  CHECK(strstr(m, want) != NULL);
  CHECK_EQ(add_one_run(41), 42);
  rd_shutdown();
  return 0;
}

/* Fills this process's open files: its soft limit lowered to what it holds
 * plus a little, and that room taken (fill[], *n of them).  The node
 * raises its own limit and has room: only this process is short. */
static void fds_fill(struct rlimit *was, int *fill, int *n) {
  CHECK_EQ(getrlimit(RLIMIT_NOFILE, was), 0);
  int held = 0;
  DIR *d = opendir("/proc/self/fd");
  for (struct dirent *e; d && (e = readdir(d));) held += e->d_name[0] != '.';
  if (d) closedir(d);
  struct rlimit low = *was;
  low.rlim_cur = (rlim_t)held + 64;   /* a little room, filled below (the holes too) */
  CHECK_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  *n = 0;
  while (*n < 200 && (fill[*n] = dup(0)) >= 0) (*n)++;
  CHECK(*n < 200 && errno == EMFILE);
}

static void fds_free(const struct rlimit *was, int *fill, int *n) {
  while (*n > 0) close(fill[--*n]);
  CHECK_EQ(setrlimit(RLIMIT_NOFILE, was), 0);
}

/* A driver out of open files: the socket the node passes for a new actor
 * connection or task lease cannot arrive (the kernel drops it).  That may
 * pass, so the driver asks again (50 ms doubled up to 1 s) for
 * RAYDIST_LEASE_RETRY_MS (here 1.5 s): a shortage that lasts fails the
 * calls waiting with RD_ESYS and the limit to raise (the actor stays
 * alive, the granted workers go back); one that passes in time loses
 * nothing: the same actor and function run once files are free. */
static int t_fd_exhausted(void) {
  setenv("RAYDIST_LEASE_RETRY_MS", "1500", 1);
  init_or_die(NULL);
  rd_actor a1, a2;
  CHECK_EQ(rd_actor_create(Where, NULL, 0, NULL, &a1), 0);
  CHECK_EQ(rd_actor_create(Where, NULL, 0, NULL, &a2), 0);
  rd_ref r;
  CHECK_EQ(rd_actor_call(a1, Where_pid, NULL, 0, NULL, &r), 0);   /* a1 connected before */
  long pid1 = get_long(r);
  struct rlimit was;
  int fill[200], nfill;
  fds_fill(&was, fill, &nfill);
  double t0 = now_s();
  rd_buf b;
  CHECK_EQ(rd_actor_call(a2, Where_pid, NULL, 0, NULL, &r), 0);
  long v = 1;
  rd_ref t;
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&v, sizeof(v))), NULL, &t), 0);
  int st = rd_get(&r, 1, &b, 30000);
  rd_buf tb;
  int tst = rd_get(&t, 1, &tb, 30000);
  double took = now_s() - t0;
  CHECK_EQ(get_long_ok(a1), pid1);   /* a connected actor goes on */
  /* a shortage that passes: the calls wait, and run once files are free */
  rd_ref r2, t2;
  CHECK_EQ(rd_actor_call(a2, Where_pid, NULL, 0, NULL, &r2), 0);
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&v, sizeof(v))), NULL, &t2), 0);
  rd_buf b2, tb2;
  int st2 = rd_get(&r2, 1, &b2, 400);
  int tst2 = rd_get(&t2, 1, &tb2, 1);
  fds_free(&was, fill, &nfill);
  printf("after %.2f s: actor: %s\ntask: %s\n", took, st ? (const char *)b.data : "ok", tst ? (const char *)tb.data : "ok");
  CHECK_EQ(st, RD_ESYS);
  CHECK(strstr((const char *)b.data, "cannot take the socket to the actor: Too many open files (the limit on this "
                                     "process's open files is ") != NULL);
  CHECK(strstr((const char *)b.data, "raise it with ulimit -n") != NULL);
  CHECK(strstr((const char *)b.data, "(asked again for 1.5 s)") != NULL);
  CHECK_EQ(tst, RD_ESYS);
  CHECK(strstr((const char *)tb.data, "cannot schedule 'add_one': cannot take the socket to its worker: Too many open "
                                      "files") != NULL);
  CHECK(strstr((const char *)tb.data, "(asked again for 1.5 s)") != NULL);
  CHECK(took >= 1.4);
  rd_buf_release(&b);
  rd_buf_release(&tb);
  rd_ref_release(r);
  rd_ref_release(t);
  CHECK_EQ(st2, RD_ETIMEDOUT);   /* waiting, not failed */
  CHECK_EQ(tst2, RD_ETIMEDOUT);
  CHECK_EQ(rd_get(&r2, 1, &b2, 30000), 0);
  CHECK(*(const long *)b2.data > 0);
  CHECK_EQ(rd_get(&t2, 1, &tb2, 30000), 0);
  CHECK_EQ(*(const long *)tb2.data, 2);
  rd_buf_release(&b2);
  rd_buf_release(&tb2);
  rd_ref_release(r2);
  rd_ref_release(t2);
  /* room again: the same actor (alive) and the function run */
  CHECK_EQ(rd_actor_call(a2, Where_pid, NULL, 0, NULL, &r), 0);
  CHECK(get_long(r) > 0);
  CHECK_EQ(add_one_run(v), 2);
  rd_shutdown();
  return 0;
}

/* Marks that it runs (kv key held-PID), then sleeps the ms it is given. */
RD_REMOTE(held_sleep) {
  rd_buf a;
  if (rd_arg(call, 0, &a)) return rd_call_fail(call, "args");
  long ms;
  memcpy(&ms, a.data, sizeof(ms));
  char key[64];
  snprintf(key, sizeof(key), "held-%d", (int)getpid());
  if (rd_kv_put(key, "1", 1, 1) != 0) return rd_call_fail(call, "kv put");
  usleep((useconds_t)(ms * 1000));
  return rd_return_bytes(call, 0, &ms, sizeof(ms));
}

/* A driver out of open files while a lease of the class runs a task: the
 * lease it asks for beside it cannot arrive, but that lease takes the
 * queued tasks once free, so none fails, however long the shortage lasts
 * (RAYDIST_LEASE_RETRY_MS is 300 ms here; before, every queued task of
 * the class failed at the first dropped socket). */
static int t_fd_exhausted_leased(void) {
  setenv("RAYDIST_LEASE_RETRY_MS", "300", 1);
  init_or_die(NULL);
  long ms = 1500;
  rd_ref first;
  CHECK_EQ(rd_submit(held_sleep, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms))), NULL, &first), 0);
  size_t nkeys = 0;
  for (int i = 0; i < 3000 && nkeys == 0; i++) {   /* it runs: its lease is here */
    char **keys = NULL;
    CHECK_EQ(rd_kv_keys("held-", &keys, &nkeys), 0);
    free(keys);
    if (!nkeys) usleep(10000);
  }
  CHECK_EQ(nkeys, 1);
  struct rlimit was;
  int fill[200], nfill;
  fds_fill(&was, fill, &nfill);
  enum { N = 4 };
  rd_ref q[N];
  ms = 0;
  for (int i = 0; i < N; i++) CHECK_EQ(rd_submit(held_sleep, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms))), NULL, &q[i]), 0);
  int ok = 0;
  for (int i = 0; i < N; i++) {
    rd_buf b;
    int st = rd_get(&q[i], 1, &b, 30000);
    if (st) printf("task %d: %s: %s\n", i, rd_err_name(st), (const char *)b.data);
    ok += st == 0;
    rd_buf_release(&b);
    rd_ref_release(q[i]);
  }
  rd_buf b;
  int st = rd_get(&first, 1, &b, 30000);
  fds_free(&was, fill, &nfill);
  printf("%d of %d queued tasks ran while the driver was out of files\n", ok, N);
  CHECK_EQ(st, 0);
  CHECK_EQ(ok, N);
  rd_buf_release(&b);
  rd_ref_release(first);
  rd_shutdown();
  return 0;
}

/* A node out of open files (its hard limit, which it cannot raise, is
 * low): of 40 actors some start and answer, the others fail with the limit
 * to raise (they waited for ever before, with "waited 5 s for
 * resources"); none hangs.  A task then, for which no worker can start
 * (the job's workers are its actors'), is asked for again for
 * RAYDIST_LEASE_RETRY_MS (4 s here) and fails with the limit to raise
 * (before: it waited for ever, and once files were free failed with the
 * old words instead of running).  Once actors are killed and files free
 * again, a task waiting runs and a new actor starts. */
static int t_node_fd_exhausted(void) {
  struct rlimit low = {96, 96};
  CHECK_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);   /* this process's and its node's (inherited) */
  setenv("RAYDIST_LEASE_RETRY_MS", "4000", 1);
  init_or_die(NULL);
  enum { N = 40 };
  rd_actor a[N];
  rd_ref r[N];
  rd_actor_opts o;
  rd_actor_opts_init(&o);
  o.num_cpus = 0;
  for (int i = 0; i < N; i++) {
    CHECK_EQ(rd_actor_create(Where, NULL, 0, &o, &a[i]), 0);
    CHECK_EQ(rd_actor_call(a[i], Where_pid, NULL, 0, NULL, &r[i]), 0);
  }
  int ok = 0, failed = 0;
  for (int i = 0; i < N; i++) {
    rd_buf b;
    int st = rd_get(&r[i], 1, &b, 60000);
    if (st == RD_ETIMEDOUT) printf("actor %d: no answer in 60 s\n", i);
    CHECK(st != RD_ETIMEDOUT);
    if (st == 0) {
      ok++;
    } else {
      if (!failed++) printf("actor %d: %s: %s\n", i, rd_err_name(st), (const char *)b.data);
      CHECK(st == RD_EACTOR_DIED || st == RD_ESYS);
      CHECK(strstr((const char *)b.data, "Too many open files") != NULL);
      CHECK(strstr((const char *)b.data, "raise it with ulimit -n") != NULL);
    }
    rd_buf_release(&b);
    rd_ref_release(r[i]);
  }
  printf("%d actors answered, %d failed\n", ok, failed);
  CHECK(ok > 0 && failed > 0);
  /* out of files, the node refuses a connection (takes and closes it)
   * rather than leave it waiting: its listening socket would be ready for
   * ever (a busy loop).  Those it takes wait for their hello. */
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof(sa));
  sa.sun_family = AF_UNIX;
  snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/node.sock", rd_session_dir());
  int conns[16], nconn = 0, refused = 0;
  while (nconn < 16 && !refused) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0);
    CHECK_EQ(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    struct pollfd p = {fd, POLLIN, 0};
    char c;
    if (poll(&p, 1, 1000) == 1 && read(fd, &c, 1) <= 0) refused++;
    conns[nconn++] = fd;
  }
  printf("connection %d refused\n", nconn);
  CHECK(refused);
  while (nconn > 0) close(conns[--nconn]);
  long v = 1;
  rd_ref t1, t2;
  rd_buf tb;
  double t0 = now_s();
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&v, sizeof(v))), NULL, &t1), 0);
  int tst = rd_get(&t1, 1, &tb, 60000);
  double took = now_s() - t0;
  printf("task after %.2f s: %s: %s\n", took, rd_err_name(tst), tst && tst != RD_ETIMEDOUT ? (const char *)tb.data : "");
  CHECK_EQ(tst, RD_ESYS);
  CHECK(strstr((const char *)tb.data, "cannot schedule 'add_one': the node cannot start workers from ") != NULL);
  CHECK(strstr((const char *)tb.data, "Too many open files (the node holds ") != NULL);
  CHECK(strstr((const char *)tb.data, "(asked again for 4.0 s)") != NULL);
  CHECK(took >= 3.9);
  rd_buf_release(&tb);
  rd_ref_release(t1);
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&v, sizeof(v))), NULL, &t2), 0);
  CHECK_EQ(rd_get(&t2, 1, &tb, 300), RD_ETIMEDOUT);   /* waits while files are short */
  int killed = 0;   /* the live ones at least (a dead one may refuse) */
  for (int i = 0; i < N; i++) killed += rd_actor_kill(a[i], 1) == 0;
  CHECK(killed >= ok);
  /* files come free as the actors' workers go: the task waiting runs */
  tst = rd_get(&t2, 1, &tb, 60000);
  if (tst) printf("task after the kills: %s: %s\n", rd_err_name(tst), tst != RD_ETIMEDOUT ? (const char *)tb.data : "");
  CHECK_EQ(tst, 0);
  CHECK_EQ(*(const long *)tb.data, 2);
  rd_buf_release(&tb);
  rd_ref_release(t2);
  /* the node's files come free as the workers go: a new actor starts */
  int started = 0;
  for (int tries = 0; tries < 50 && !started; tries++) {
    rd_actor b;
    CHECK_EQ(rd_actor_create(Where, NULL, 0, &o, &b), 0);
    rd_ref rr;
    rd_buf bb;
    CHECK_EQ(rd_actor_call(b, Where_pid, NULL, 0, NULL, &rr), 0);
    started = rd_get(&rr, 1, &bb, 30000) == 0;
    rd_buf_release(&bb);
    rd_ref_release(rr);
    if (rd_actor_kill(b, 1) != 0) printf("kill: already dead\n");
    if (!started) usleep(100000);
  }
  CHECK(started);
  rd_shutdown();
  return 0;
}

/* This session's part of a `raydist ... --local` answer: from "embedded
 * node DIR:" to the next node's (other tests' embedded nodes may run
 * beside this one); NULL when it is not there.  Cuts out in place. */
static char *own_node(char *out) {
  char head[400];
  snprintf(head, sizeof(head), "embedded node %s:", rd_session_dir());
  char *p = strstr(out, head), *next = p ? strstr(p + 1, "\nembedded node ") : NULL;
  if (next) next[1] = 0;
  return p;
}

/* raydist status, list tasks|actors|workers|objects|runtime-envs|
 * placement-groups and memory on this machine's embedded cluster (no
 * cluster named, or --local): a task running (stack_probe), an actor, a
 * 1 MiB object in the store, this driver's job, a placement group; the
 * GCS's tables are refused with why; Ray's state API on the node. */
static int t_state_local(void) {
  init_with_cpus(2);
  unsetenv("RAYDIST_ADDRESS");
  char flag[300], pidf[320], want[600];
  snprintf(flag, sizeof(flag), "%s/state-flag", rd_session_dir());
  snprintf(pidf, sizeof(pidf), "%s.pid", flag);
  rd_ref r, big;
  CHECK_EQ(rd_submit(stack_probe, RD_ARGS(rd_arg_bytes(flag, strlen(flag))), NULL, &r), 0);
  rd_actor a;
  CHECK_EQ(rd_actor_create(Where, RD_NO_ARGS, NULL, &a), 0);
  rd_ref ar;
  CHECK_EQ(rd_actor_call(a, Where_pid, RD_NO_ARGS, NULL, &ar), 0);
  long apid = get_long(ar);
  static char mib[1 << 20];
  memset(mib, 7, sizeof(mib));
  CHECK_EQ(rd_put(mib, sizeof(mib), &big), 0);
  long wpid = probe_pid(pidf);
  CHECK(wpid > 0);
  static char out[1 << 18];
  char *me;
  CHECK_EQ(run_cli("list tasks", out, sizeof(out)), 0);
  printf("%s", out);
  CHECK((me = own_node(out)) != NULL);
  snprintf(want, sizeof(want), "worker pid %ld", wpid);
  CHECK(strstr(me, "stack_probe") != NULL && strstr(me, " RUNNING ") != NULL && strstr(me, want) != NULL);
  CHECK_EQ(run_cli("list tasks --local --state SUBMITTED", out, sizeof(out)), 0);
  printf("%s", out);
  CHECK((me = own_node(out)) != NULL && strstr(me, " worker pid ") == NULL);   /* no row: the filter reaches the node */
  CHECK_EQ(run_cli("list actors --local", out, sizeof(out)), 0);
  CHECK((me = own_node(out)) != NULL && strstr(me, "Where") != NULL && strstr(me, "ALIVE") != NULL);
  snprintf(want, sizeof(want), " %ld ", apid);
  CHECK(strstr(me, want) != NULL);
  CHECK_EQ(run_cli("list workers", out, sizeof(out)), 0);
  CHECK((me = own_node(out)) != NULL);
  snprintf(want, sizeof(want), " %ld leased", wpid);
  CHECK(strstr(me, want) != NULL);
  CHECK_EQ(run_cli("memory", out, sizeof(out)), 0);
  CHECK((me = own_node(out)) != NULL && strstr(me, "1 objects") != NULL);
  CHECK_EQ(run_cli("list runtime-envs --local", out, sizeof(out)), 0);   /* its API takes the node's token */
  CHECK((me = own_node(out)) != NULL && strstr(me, "runtime envs") != NULL);
  CHECK_EQ(run_cli("status", out, sizeof(out)), 0);
  printf("%s", out);
  CHECK((me = own_node(out)) != NULL);
  snprintf(want, sizeof(want), "dashboard http://127.0.0.1:%d/", metrics_port());
  CHECK(strstr(me, want) != NULL && strstr(me, "resources used/total: CPU 1/2, GPU 0/0, memory ") != NULL);
  CHECK(strstr(me, "object store: 1.0/") != NULL && strstr(me, "1 objects in memory") != NULL);
  CHECK(strstr(me, "workers: 2 (starting 0, idle 0, leased 2, dying 0; blocked in a get 0); drivers 1") != NULL);
  CHECK(strstr(me, "actors: pending 0, starting 0, alive 1, dead 0") != NULL);
  CHECK(strstr(me, "/rt_test, 1 driver, 2 workers, holds CPU 1 GPU 0") != NULL);
  /* the owner's figures come with its reports (every 100 ms or so): the task sent, the actor call done */
  for (int i = 0; i < 100 && !strstr(me, "tasks and actor calls: 0 waiting for a worker, 1 sent to workers, 1 done (0 failed)");
       i++) {
    usleep(50000);
    CHECK_EQ(run_cli("status --local", out, sizeof(out)), 0);
    CHECK((me = own_node(out)) != NULL);
  }
  printf("%s", me);
  CHECK(strstr(me, "tasks and actor calls: 0 waiting for a worker, 1 sent to workers, 1 done (0 failed)") != NULL);
  /* a placement group (the CPU the task leaves): the embedded node's own records */
  rd_bundle bun = {.num_cpus = 1};
  rd_pg pg;
  CHECK_EQ(rd_pg_create(&bun, 1, RD_PG_PACK, "state-pg", &pg), 0);
  CHECK_EQ(rd_pg_wait(pg, 10000), 0);
  CHECK_EQ(run_cli("list placement-groups", out, sizeof(out)), 0);
  printf("%s", out);
  CHECK((me = own_node(out)) != NULL && strstr(me, "placement groups: 1 live, 0 removed\n") != NULL);
  CHECK(strstr(me, " state-pg ") != NULL && strstr(me, " created ") != NULL && strstr(me, " 0: 1/0") != NULL);
  CHECK_EQ(run_cli("status --local", out, sizeof(out)), 0);   /* the live groups, as for a cluster */
  CHECK((me = own_node(out)) != NULL && strstr(me, "\n  placement groups: 1 live, 0 removed\n    id ") != NULL);
  CHECK(strstr(me, "\n    0000000000000001 state-pg ") != NULL);
  CHECK_EQ(run_cli("list placement-groups --local --state pending", out, sizeof(out)), 0);
  CHECK((me = own_node(out)) != NULL && strstr(me, "state-pg") == NULL);   /* the filter reaches the node */
  /* Ray's state API on the embedded node, with the node's own token (ray list --address http://IP:PORT) */
  char tok[128], get[512], tpath[600];
  snprintf(tpath, sizeof(tpath), "%s/token", rd_session_dir());
  FILE *tf = fopen(tpath, "r");
  CHECK(tf != NULL && fgets(tok, sizeof(tok), tf) != NULL);
  fclose(tf);
  tok[strcspn(tok, "\n")] = 0;
  static char body[1 << 16];
  const char *paths[] = {"/api/v0/nodes", "/api/v0/tasks?limit=100", "/api/v0/actors", "/api/v0/placement_groups",
                         "/api/v0/tasks/summarize"};
  for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
    snprintf(get, sizeof(get), "GET %s HTTP/1.0\r\nAuthorization: Bearer %s\r\n\r\n", paths[i], tok);
    CHECK(http_exchange(metrics_port(), get, strlen(get), body, sizeof(body)) > 0);
    printf("%s: %.600s\n", paths[i], body);
    CHECK(strncmp(body, "HTTP/1.0 200", 12) == 0 && strstr(body, "{\"result\": true") != NULL);
    if (i == 0) CHECK(strstr(body, "\"node_ip\": \"127.0.0.1\", \"is_head_node\": true, \"state\": \"ALIVE\"") != NULL);
    snprintf(want, sizeof(want), "\"worker_pid\": %ld", wpid);
    if (i == 1) CHECK(strstr(body, "\"name\": \"stack_probe\", \"state\": \"RUNNING\"") != NULL && strstr(body, want));
    snprintf(want, sizeof(want), "\"class_name\": \"Where\", \"state\": \"ALIVE\"");
    if (i == 2) CHECK(strstr(body, want) != NULL);
    snprintf(want, sizeof(want), "\"name\": \"state-pg\", \"creator_job_id\": ");
    if (i == 3) CHECK(strstr(body, want) != NULL && strstr(body, "\"state\": \"CREATED\"") != NULL &&
                      strstr(body, "\"node_id\":null") == NULL);
    if (i == 4) CHECK(strstr(body, "\"stack_probe\": {") != NULL);
  }
  CHECK(http_body(metrics_port(), "/api/v0/tasks", body, sizeof(body)) == NULL && strstr(body, " 401 ") != NULL);
  CHECK_EQ(rd_pg_remove(pg), 0);
  CHECK(run_cli("list nodes --local", out, sizeof(out)) == 2 && strstr(out, "keeps no nodes table") != NULL);
  CHECK(run_cli("list jobs", out, sizeof(out)) == 1 && strstr(out, "no cluster runs on this machine") != NULL);
  CHECK(run_cli("status extra", out, sizeof(out)) == 2 && strstr(out, "unexpected 'extra'") != NULL);
  FILE *f = fopen(flag, "w");
  CHECK(f != NULL);
  fclose(f);
  CHECK_EQ(get_long(r), wpid);
  rd_ref_release(big);
  CHECK_EQ(rd_actor_kill(a, 1), 0);
  rd_shutdown();
  return 0;
}

/* Sleeps 1.5 s (t_tasks_threaded). */
RD_ACTOR_METHOD(Where, nap) {
  (void)state;
  usleep(1500000);
  return rd_return_bytes(call, 0, "", 0);
}

/* raydist list tasks (/api/tasks) on an actor that runs three calls at
 * once: of five calls sent, its owner counts three running and two
 * waiting behind them (the node tells the owner the actor's concurrency). */
static int t_tasks_threaded(void) {
  init_with_cpus(2);
  rd_actor_opts o;
  rd_actor_opts_init(&o);
  o.max_concurrency = 3;
  rd_actor a;
  CHECK_EQ(rd_actor_create(Where, RD_NO_ARGS, &o, &a), 0);
  rd_ref r[5];
  CHECK_EQ(rd_actor_call(a, Where_pid, RD_NO_ARGS, NULL, &r[0]), 0);   /* connected, constructor done */
  CHECK_EQ(get_status(r[0], 30000), 0);
  rd_ref_release(r[0]);
  for (int i = 0; i < 5; i++) CHECK_EQ(rd_actor_call(a, Where_nap, RD_NO_ARGS, NULL, &r[i]), 0);
  usleep(300000);   /* all sent, the report that they are live made */
  int port = metrics_port();
  static char body[1 << 16];
  const char *t = http_body(port, "/api/tasks", body, sizeof(body));
  CHECK(t != NULL);
  printf("%s", t);
  CHECK(strstr(t, "\"unfinished\":5,") != NULL);
  CHECK(strstr(t, "\"RUNNING\":3") != NULL && strstr(t, "\"SUBMITTED\":2") != NULL);
  for (int i = 0; i < 5; i++) {
    CHECK_EQ(get_status(r[i], 30000), 0);
    rd_ref_release(r[i]);
  }
  CHECK_EQ(rd_actor_kill(a, 1), 0);
  rd_shutdown();
  return 0;
}

/* How many times needle is in hay. */
static int count_of(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
  return n;
}

/* The tasks that finished well, reported by their owner to its node and
 * kept there for /api/tasks with finished=1 (Ray's FINISHED rows): with
 * RAYDIST_TASK_HISTORY=20, of 30 tasks of 60 ms the node keeps the last 20
 * (and says 10 more are not kept), listed after the unfinished
 * one, the last to end first, each with its worker's pid, its submission,
 * start and end (ran at least 60 ms); state=FINISHED lists only them
 * (limit 5: five rows, all 20 counted); without finished=1 none are.  Once
 * the owner has nothing live and this thread is outside the library, its
 * progress thread still answers at once. */
static int t_task_history(void) {
  setenv("RAYDIST_TASK_HISTORY", "20", 1);
  init_with_cpus(2);
  unsetenv("RAYDIST_TASK_HISTORY");
  rd_ref r[30], slow;
  long ms = 60;
  for (int i = 0; i < 30; i++) CHECK_EQ(rd_submit(sleep_span, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms))), NULL, &r[i]), 0);
  for (int i = 0; i < 30; i++) {
    CHECK_EQ(get_status(r[i], 30000), 0);
    rd_ref_release(r[i]);
  }
  long long_ms = 1500;   /* one unfinished: listed first */
  CHECK_EQ(rd_submit(sleep_span, RD_ARGS(rd_arg_bytes(&long_ms, sizeof(long_ms))), NULL, &slow), 0);
  usleep(400000);   /* the owner's report that it has finished tasks */
  struct timeval tv;
  gettimeofday(&tv, NULL);
  long long wall = (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
  int port = metrics_port();
  static char body[1 << 17];
  const char *t = http_body(port, "/api/tasks?finished=1&limit=100", body, sizeof(body));
  CHECK(t != NULL);
  printf("%.600s...\n", t);
  CHECK(strstr(t, "\"unfinished\":1,") != NULL && strstr(t, "\"finished_kept\":20,\"finished_unkept\":10,") != NULL);
  CHECK(strstr(t, "\"FINISHED\":20}") != NULL);   /* the counts, and sleep_span's */
  CHECK_EQ(count_of(t, "\"state\":\"FINISHED\""), 20);
  const char *first = strstr(t, "\"state\":\"");
  CHECK(first && !strncmp(first, "\"state\":\"RUNNING\"", 17));   /* the unfinished first */
  long long last_end = wall + 1;
  int rows = 0;
  for (const char *p = strstr(first + 1, "\"state\":\"FINISHED\""); p; p = strstr(p + 1, "\"state\":\"FINISHED\"")) {
    long long created, start, end;
    int pid;
    const char *c = strstr(p, "\"worker_pid\":");
    CHECK(c && sscanf(c, "\"worker_pid\":%d", &pid) == 1 && pid > 0);
    c = strstr(p, "\"created_ms\":");
    CHECK(c && sscanf(c, "\"created_ms\":%lld,\"start_ms\":%lld,\"end_ms\":%lld", &created, &start, &end) == 3);
    CHECK(created > wall - 60000 && created <= start && end - start >= 60 && end - start < 5000);
    CHECK(end <= last_end);   /* the last to end first */
    last_end = end;
    rows++;
  }
  CHECK_EQ(rows, 20);
  t = http_body(port, "/api/tasks?state=FINISHED&limit=5", body, sizeof(body));
  CHECK(t != NULL);
  CHECK(strstr(t, "\"finished_kept\":20,") != NULL && count_of(t, "\"state\":\"FINISHED\"") == 5);
  CHECK(count_of(t, "\"state\":\"RUNNING\"") == 0);
  t = http_body(port, "/api/tasks?limit=100", body, sizeof(body));
  CHECK(t != NULL);
  CHECK(strstr(t, "\"finished_kept\":0,") != NULL && count_of(t, "\"state\":\"FINISHED\"") == 0);
  t = http_body(port, "/tasks?state=FINISHED&limit=3", body, sizeof(body));   /* raydist list tasks --state finished */
  CHECK(t != NULL);
  printf("%s", t);
  CHECK(strstr(t, "finished well: the last 20 kept (10 more not kept)") != NULL && count_of(t, " FINISHED      ") == 3);
  CHECK(strstr(t, "ran 0.") != NULL);
  /* the owner idle, this thread outside the library: its progress thread
   * answers at once (it slept on a condition variable before 2026-12-05,
   * and the node waited 2 s for an answer that never came) */
  CHECK_EQ(get_status(slow, 30000), 0);
  rd_ref_release(slow);
  usleep(1500000);
  double t0 = now_s();
  t = http_body(port, "/api/tasks?state=FINISHED&limit=1", body, sizeof(body));
  double took = now_s() - t0;
  CHECK(t != NULL);
  printf("idle owner answered in %.3f s: %.300s\n", took, t);
  CHECK(took < 1.0 && strstr(t, "\"unfinished\":0,") && strstr(t, "\"finished_kept\":20,"));
  long long created, start, end;
  const char *c = strstr(t, "\"created_ms\":");
  CHECK(c && sscanf(c, "\"created_ms\":%lld,\"start_ms\":%lld,\"end_ms\":%lld", &created, &start, &end) == 3);
  CHECK(end - start >= 1500 && end - start < 10000);   /* the last to end: the 1.5 s task */
  rd_shutdown();
  return 0;
}

/* The status of the first return of r and its message, in msg. */
static int get_err(rd_ref r, char *msg, size_t cap) {
  rd_buf b;
  int e = rd_get(&r, 1, &b, 60000);
  snprintf(msg, cap, "%.*s", (int)b.size, e && b.data ? (const char *)b.data : "");
  rd_buf_release(&b);
  return e;
}

/* Node labels on an embedded cluster (rd_config.node_labels): rd_nodes
 * shows them canonical; tasks, actors and placement-group bundles whose
 * label selector the node matches run, the others fail with
 * RD_EINFEASIBLE naming the selector; malformed selectors and labels, a
 * selector beside a placement group, and node_labels with an address are
 * RD_EINVAL. */
static int t_labels(void) {
  rd_config cfg;
  rd_config_init(&cfg);
  cfg.num_cpus = 2;
  cfg.node_labels = "zone=a,";
  cfg.node_labels = "zone";
  CHECK_EQ(rd_init(&cfg), RD_EINVAL);
  cfg.node_labels = "raydist.io/x=1";   /* the runtime's own */
  CHECK_EQ(rd_init(&cfg), RD_EINVAL);
  cfg.node_labels = "zone=a";
  cfg.address = "127.0.0.1:1";
  CHECK_EQ(rd_init(&cfg), RD_EINVAL);
  cfg.address = NULL;
  setenv("RAYDIST_NODE_LABELS", "zone=b", 1);   /* rd_config's win */
  cfg.node_labels = " zone = a , tier=gold ";
  init_or_die(&cfg);
  unsetenv("RAYDIST_NODE_LABELS");
  rd_node_desc d;
  size_t n = 0;
  CHECK_EQ(rd_nodes(&d, 1, &n), 0);
  printf("labels: %s (GPUs %g)\n", d.labels, d.num_gpus);
  if (d.num_gpus > 0) {   /* detected (num_gpus -1): the runtime names their model too */
    CHECK(!strncmp(d.labels, "raydist.io/accelerator-type=", 28));
    CHECK(strstr(d.labels, ",tier=gold,zone=a") != NULL);
  } else {
    CHECK(!strcmp(d.labels, "tier=gold,zone=a"));
  }

  static const char *yes[] = {"zone=a", "zone=!b", "tier=in(silver,gold)", "tier=!in(silver),zone=a", "gpu=!A100", ""};
  static const char *no[] = {"zone=b", "zone=!a", "tier=in(silver)", "gpu=A100", "zone=a,tier=silver"};
  rd_task_opts o;
  rd_task_opts_init(&o);
  long x = 41;
  rd_ref r;
  for (size_t i = 0; i < sizeof(yes) / sizeof(*yes); i++) {
    o.label_selector = yes[i];
    CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&x, sizeof(x))), &o, &r), 0);
    CHECK_EQ(get_long(r), 42);
    rd_ref_release(r);
  }
  char msg[512];
  for (size_t i = 0; i < sizeof(no) / sizeof(*no); i++) {
    o.label_selector = no[i];
    CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&x, sizeof(x))), &o, &r), 0);
    int e = get_err(r, msg, sizeof(msg));
    printf("selector '%s': %s: %s\n", no[i], rd_err_name(e), msg);
    CHECK_EQ(e, RD_EINFEASIBLE);
    CHECK(strstr(msg, "label selector") && strstr(msg, no[i]));
    rd_ref_release(r);
  }
  o.label_selector = "zone";   /* malformed */
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&x, sizeof(x))), &o, &r), RD_EINVAL);
  o.label_selector = "zone=in(a";
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&x, sizeof(x))), &o, &r), RD_EINVAL);
  /* fallbacks: the first that matches decides; none matching is
   * RD_EINFEASIBLE naming them all */
  o.label_selector = "zone=b";
  o.fallback_label_selectors = "tier=silver; tier=gold";
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&x, sizeof(x))), &o, &r), 0);
  CHECK_EQ(get_long(r), 42);
  rd_ref_release(r);
  o.fallback_label_selectors = "zone=c;tier=silver";
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&x, sizeof(x))), &o, &r), 0);
  int fe = get_err(r, msg, sizeof(msg));
  printf("fallbacks: %s: %s\n", rd_err_name(fe), msg);
  CHECK_EQ(fe, RD_EINFEASIBLE);
  CHECK(strstr(msg, "zone=b;zone=c;tier=silver") != NULL);
  rd_ref_release(r);
  static const char *const bad_fb[][2] = {
      {NULL, "zone=a"}, {"zone=b;zone=a", NULL}, {"zone=b", "zone=a;"}, {"zone=b", "zone"},
      {"zone=b", "a=1;a=2;a=3;a=4;a=5;a=6;a=7;a=8"}};
  for (size_t i = 0; i < sizeof(bad_fb) / sizeof(*bad_fb); i++) {
    o.label_selector = bad_fb[i][0];
    o.fallback_label_selectors = bad_fb[i][1];
    CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&x, sizeof(x))), &o, &r), RD_EINVAL);
  }
  o.fallback_label_selectors = NULL;

  /* actors */
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.label_selector = "tier=in(gold,silver)";
  rd_actor a;
  CHECK_EQ(rd_actor_create(Where, RD_NO_ARGS, &ao, &a), 0);
  CHECK_EQ(rd_actor_call(a, Where_pid, RD_NO_ARGS, NULL, &r), 0);
  CHECK(get_long(r) > 0);
  rd_ref_release(r);
  ao.label_selector = "tier=silver";
  CHECK_EQ(rd_actor_create(Where, RD_NO_ARGS, &ao, &a), RD_EINFEASIBLE);
  ao.label_selector = "tier=";
  CHECK_EQ(rd_actor_create(Where, RD_NO_ARGS, &ao, &a), RD_EINVAL);
  ao.label_selector = "tier=silver";
  ao.fallback_label_selectors = "zone=a";
  CHECK_EQ(rd_actor_create(Where, RD_NO_ARGS, &ao, &a), 0);
  CHECK_EQ(rd_actor_call(a, Where_pid, RD_NO_ARGS, NULL, &r), 0);
  CHECK(get_long(r) > 0);
  rd_ref_release(r);
  ao.fallback_label_selectors = "zone=b;tier=bronze";
  CHECK_EQ(rd_actor_create(Where, RD_NO_ARGS, &ao, &a), RD_EINFEASIBLE);
  ao.fallback_label_selectors = "zone=";
  CHECK_EQ(rd_actor_create(Where, RD_NO_ARGS, &ao, &a), RD_EINVAL);
  ao.fallback_label_selectors = NULL;

  /* placement-group bundles */
  rd_bundle b[2] = {{.num_cpus = 1, .label_selector = "zone=a"}, {.num_cpus = 1}};
  rd_pg pg;
  CHECK_EQ(rd_pg_create(b, 2, RD_PG_PACK, NULL, &pg), 0);
  CHECK_EQ(rd_pg_wait(pg, 10000), 0);
  o.label_selector = NULL;
  o.placement_group = pg;
  o.bundle_index = 0;
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&x, sizeof(x))), &o, &r), 0);
  CHECK_EQ(get_long(r), 42);
  rd_ref_release(r);
  o.label_selector = "zone=a";   /* the bundle decides */
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&x, sizeof(x))), &o, &r), RD_EINVAL);
  o.label_selector = "zone=a";
  o.fallback_label_selectors = "zone=b";
  CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&x, sizeof(x))), &o, &r), RD_EINVAL);
  o.fallback_label_selectors = NULL;
  ao.label_selector = "zone=a";
  ao.placement_group = pg;
  CHECK_EQ(rd_actor_create(Where, RD_NO_ARGS, &ao, &a), RD_EINVAL);
  CHECK_EQ(rd_pg_remove(pg), 0);
  b[1].label_selector = "zone=b";
  CHECK_EQ(rd_pg_create(b, 2, RD_PG_PACK, NULL, &pg), RD_EINFEASIBLE);
  b[1].label_selector = "zone=!";
  CHECK_EQ(rd_pg_create(b, 2, RD_PG_PACK, NULL, &pg), RD_EINVAL);
  b[1].label_selector = "zone=b;zone=a";   /* fallbacks go in fallback_label_selectors */
  CHECK_EQ(rd_pg_create(b, 2, RD_PG_PACK, NULL, &pg), RD_EINVAL);
  /* a bundle's fallbacks: the group is reserved by the first that matches */
  b[1].label_selector = "zone=b";
  b[1].fallback_label_selectors = "tier=bronze; zone=a";
  CHECK_EQ(rd_pg_create(b, 2, RD_PG_STRICT_PACK, NULL, &pg), 0);
  CHECK_EQ(rd_pg_wait(pg, 10000), 0);
  CHECK_EQ(rd_pg_remove(pg), 0);
  b[1].fallback_label_selectors = "zone=c;tier=bronze";   /* none ever matches */
  CHECK_EQ(rd_pg_create(b, 2, RD_PG_PACK, NULL, &pg), RD_EINFEASIBLE);
  b[1].fallback_label_selectors = "zone=";
  CHECK_EQ(rd_pg_create(b, 2, RD_PG_PACK, NULL, &pg), RD_EINVAL);
  b[1].label_selector = NULL;   /* fallbacks need a selector */
  b[1].fallback_label_selectors = "zone=a";
  CHECK_EQ(rd_pg_create(b, 2, RD_PG_PACK, NULL, &pg), RD_EINVAL);
  rd_shutdown();
  return 0;
}

static int t_nodes(void) {
  size_t n = 7;
  rd_node_desc d[2];
  double t = -1, a = -1;
  CHECK_EQ(rd_nodes(d, 2, &n), RD_ESTATE);   /* before rd_init */
  CHECK_EQ(rd_cluster_resources("CPU", &t, &a), RD_ESTATE);
  rd_config cfg;
  rd_config_init(&cfg);
  cfg.num_cpus = 2;
  cfg.num_gpus = 1;   /* simulated */
  cfg.custom_resources = "accel=2,pool=0.5";
  cfg.object_store_bytes = 64u << 20;
  init_or_die(&cfg);
  CHECK_EQ(rd_nodes(NULL, 0, &n), 0);
  CHECK_EQ(n, 1);
  CHECK_EQ(rd_nodes(d, 0, &n), RD_EINVAL);
  CHECK_EQ(rd_nodes(d, 2, &n), 0);
  CHECK_EQ(n, 1);
  CHECK(d[0].index == 0 && d[0].alive && d[0].is_head && d[0].is_self);
  CHECK(d[0].ip[0] == 0 && d[0].hostname[0] != 0 && d[0].death_reason[0] == 0);
  CHECK(d[0].num_cpus == 2 && d[0].num_gpus == 1 && d[0].avail_gpus == 1);
  CHECK_EQ(d[0].store_capacity, 64u << 20);
  CHECK_EQ(d[0].num_custom, 2);
  int seen = 0;
  for (int i = 0; i < d[0].num_custom; i++) {
    if (!strcmp(d[0].custom[i].name, "accel")) seen += d[0].custom[i].total == 2 && d[0].custom[i].avail == 2;
    if (!strcmp(d[0].custom[i].name, "pool")) seen += d[0].custom[i].total == 0.5 && d[0].custom[i].avail == 0.5;
  }
  CHECK_EQ(seen, 2);
  CHECK_EQ(rd_cluster_resources("GPU", &t, &a), 0);
  CHECK(t == 1 && a == 1);
  CHECK_EQ(rd_cluster_resources("pool", &t, NULL), 0);
  CHECK(t == 0.5);
  CHECK_EQ(rd_cluster_resources("nope", &t, &a), RD_ENOENT);
  CHECK(t == 0 && a == 0);
  CHECK_EQ(rd_cluster_resources("", NULL, NULL), RD_EINVAL);
  /* a task holding accel=1 and half the GPU: seen while it runs */
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.num_gpus = 0.5;
  o.resources = "accel=1";
  long ms = 3000;
  rd_ref r;
  CHECK_EQ(rd_submit(sleep_span, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms))), &o, &r), 0);
  double t0 = now_s(), held_at = 0;
  int held = 0;
  while (!held && now_s() - t0 < 2.9) {
    CHECK_EQ(rd_cluster_resources("accel", &t, &a), 0);
    CHECK(t == 2);
    held = a == 1;
    if (!held) usleep(10000);
    else held_at = now_s();
  }
  CHECK(held);
  CHECK_EQ(rd_nodes(d, 2, &n), 0);
  CHECK(d[0].avail_gpus == 0.5 || now_s() - t0 >= 2.9);
  rd_buf b;
  CHECK_EQ(rd_get(&r, 1, &b, 30000), 0);
  rd_buf_release(&b);
  rd_ref_release(r);
  double t1 = now_s();   /* free again once the idle lease goes back */
  do {
    CHECK_EQ(rd_cluster_resources("accel", &t, &a), 0);
    if (a != 2) usleep(10000);
  } while (a != 2 && now_s() - t1 < 10);
  CHECK(a == 2);
  printf("accel seen held %.2f s after the submit, free %.2f s after the result\n", held_at - t0, now_s() - t1);
  rd_shutdown();
  CHECK_EQ(rd_nodes(NULL, 0, &n), RD_ESTATE);
  return 0;
}

/* A driver whose process gets a signal every millisecond from start to end
 * (a sampling profiler's SIGPROF, a timer's SIGALRM), with a handler set
 * without SA_RESTART, so every blocking call the library makes can come
 * back with EINTR: start, tasks, big objects through the store, waits and
 * shutdown all behave as without them. */
static volatile sig_atomic_t rt_ticks;
static void rt_tick(int sig) {
  (void)sig;
  rt_ticks++;
}

static int t_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = rt_tick;
  CHECK_EQ(sigaction(SIGALRM, &sa, NULL), 0);
  struct itimerval it = {{0, 1000}, {0, 1000}};
  CHECK_EQ(setitimer(ITIMER_REAL, &it, NULL), 0);
  for (int round = 0; round < 3; round++) {
    init_with_store(256ull << 20);
    enum { N = 2000 };
    static rd_ref refs[N];
    for (long i = 0; i < N; i++) CHECK_EQ(rd_submit(add_one, RD_ARGS(rd_arg_bytes(&i, sizeof(i))), NULL, &refs[i]), 0);
    for (long i = 0; i < N; i++) {
      CHECK_EQ(get_long(refs[i]), i + 1);
      rd_ref_release(refs[i]);
    }
    size_t n = 8u << 20;
    long seed = round;
    rd_ref big;
    CHECK_EQ(rd_submit(make_big, RD_ARGS(rd_arg_bytes(&n, sizeof(n)), rd_arg_bytes(&seed, sizeof(seed))), NULL, &big), 0);
    uint8_t ready = 0;
    CHECK_EQ(rd_wait(&big, 1, 1, 60000, &ready), 1);
    CHECK_EQ(ready, 1);
    rd_buf b;
    CHECK_EQ(rd_get(&big, 1, &b, 60000), 0);
    CHECK_EQ(b.size, n);
    for (size_t i = 0; i < n; i += 4093) CHECK_EQ(((const unsigned char *)b.data)[i], (unsigned char)(i * 31 + (size_t)seed));
    rd_ref copy;
    CHECK_EQ(rd_put(b.data, b.size, &copy), 0);
    rd_buf_release(&b);
    rd_ref_release(big);
    rd_ref sum;
    CHECK_EQ(rd_submit(checksum, RD_ARGS(rd_arg_ref(copy)), NULL, &sum), 0);
    (void)get_long(sum);
    rd_ref_release(copy);
    rd_shutdown();
  }
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &off, NULL);
  printf("signals: %d arrived, all calls behaved\n", (int)rt_ticks);
  CHECK(rt_ticks > 100);
  return 0;
}

/* For recursive cancellation: appends a line to the file named by arg 1. */
static void note_line(const rd_buf *path, const char *line) {
  char p[256];
  snprintf(p, sizeof(p), "%.*s", (int)path->size, (const char *)path->data);
  FILE *f = fopen(p, "a");
  if (f) {
    fputs(line, f);
    fclose(f);
  }
}

/* Polls rd_call_cancelled for up to arg 0 ms; notes "started", then
 * "cancelled" or "ran out" in the file arg 1. */
RD_REMOTE(child_poll) {
  rd_buf a, path;
  long ms = 0;
  if (rd_arg(call, 0, &a) != 0 || rd_arg(call, 1, &path) != 0 || a.size != sizeof(ms)) return rd_call_fail(call, "args");
  memcpy(&ms, a.data, sizeof(ms));
  char pid_line[32];
  snprintf(pid_line, sizeof(pid_line), "pid %ld\n", (long)getpid());
  note_line(&path, pid_line);
  note_line(&path, "started\n");
  for (long i = 0; i < ms; i++) {
    if (rd_call_cancelled(call)) {
      note_line(&path, "cancelled\n");
      return rd_call_fail(call, "stopped early");
    }
    usleep(1000);
  }
  note_line(&path, "ran out\n");
  return rd_return_bytes(call, 0, &ms, sizeof(ms));
}

/* Submits child_poll(arg 0, arg 1) (through arg 2 - 1 more levels of itself)
 * and waits for it; returns the error code it got.  With arg 3 set, exits
 * its process 300 ms after submitting instead (the child's owner dies). */
RD_REMOTE(parent_of_poll) {
  rd_buf a, path, d, die;
  long depth = 1, exit_early = 0;
  if (rd_arg(call, 0, &a) != 0 || rd_arg(call, 1, &path) != 0 || rd_arg(call, 2, &d) != 0 || rd_arg(call, 3, &die) != 0)
    return rd_call_fail(call, "args");
  memcpy(&depth, d.data, sizeof(depth));
  memcpy(&exit_early, die.data, sizeof(exit_early));
  long next = depth - 1, no = 0;
  rd_ref r;
  int e = depth > 1 ? rd_submit(parent_of_poll, RD_ARGS(rd_arg_bytes(a.data, a.size), rd_arg_bytes(path.data, path.size),
                                                        rd_arg_bytes(&next, sizeof(next)), rd_arg_bytes(&no, sizeof(no))),
                                NULL, &r)
                    : rd_submit(child_poll, RD_ARGS(rd_arg_bytes(a.data, a.size), rd_arg_bytes(path.data, path.size)), NULL,
                                &r);
  if (e != 0) return rd_call_fail(call, "submit: %s", rd_err_name(e));
  if (exit_early) {
    usleep(300000);
    _exit(1);
  }
  rd_buf b;
  long got = rd_get(&r, 1, &b, 60000);
  if (got != RD_ETIMEDOUT) rd_buf_release(&b);
  rd_ref_release(r);
  return rd_return_bytes(call, 0, &got, sizeof(got));
}

/* 1 when the file holds the line `want` now. */
static int file_has_now(const char *path, const char *want) {
  FILE *f = fopen(path, "r");
  char line[64];
  int found = 0;
  while (f && !found && fgets(line, sizeof(line), f)) found = !strcmp(line, want);
  if (f) fclose(f);
  return found;
}

/* Waits up to 5 s for the file to hold `want` (a line); 1 when it does. */
static int file_has(const char *path, const char *want) {
  for (int i = 0; i < 250; i++) {
    if (file_has_now(path, want)) return 1;
    usleep(20000);
  }
  return 0;
}

/* rd_cancel is recursive, as Ray's default: cancelling a task cancels what
 * it submitted, down the tree (a task two levels below stops early), and a
 * task whose owner died is cancelled too (rd_call_cancelled says so). */
static int t_cancel_recursive(void) {
  init_with_cpus(4);
  char path[] = "/tmp/rd_cancel_rec.XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  close(fd);
  long ms = 20000, depth = 2, no = 0, yes = 1;
  rd_ref top;
  CHECK_EQ(rd_submit(parent_of_poll, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms)), rd_arg_bytes(path, strlen(path)),
                                              rd_arg_bytes(&depth, sizeof(depth)), rd_arg_bytes(&no, sizeof(no))),
                     NULL, &top), 0);
  CHECK(file_has(path, "started\n"));
  double t0 = now_s() * 1e3;
  CHECK_EQ(rd_cancel(top, 0), 0);
  rd_buf b;
  CHECK_EQ(rd_get(&top, 1, &b, 10000), RD_ECANCELED);
  rd_buf_release(&b);
  rd_ref_release(top);
  CHECK(file_has(path, "cancelled\n"));
  printf("a task two levels below the cancelled one stopped %.0f ms after rd_cancel\n", now_s() * 1e3 - t0);
  /* the child's owner dies: the child is cancelled */
  CHECK_EQ(truncate(path, 0), 0);
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.max_retries = 0;
  depth = 1;
  CHECK_EQ(rd_submit(parent_of_poll, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms)), rd_arg_bytes(path, strlen(path)),
                                              rd_arg_bytes(&depth, sizeof(depth)), rd_arg_bytes(&yes, sizeof(yes))),
                     &o, &top), 0);
  CHECK_EQ(rd_get(&top, 1, &b, 10000), RD_EWORKER_DIED);
  rd_buf_release(&b);
  rd_ref_release(top);
  /* its node kills it (the owner left without giving its lease back), or it
   * sees its owner's socket close first and stops as cancelled */
  long cpid = 0;
  FILE *f = fopen(path, "r");
  CHECK(f && fscanf(f, "pid %ld", &cpid) == 1);
  fclose(f);
  t0 = now_s() * 1e3;
  int gone = 0;
  for (int i = 0; i < 250 && !gone; i++) {
    gone = kill((pid_t)cpid, 0) != 0 || file_has_now(path, "cancelled\n");
    if (!gone) usleep(20000);
  }
  CHECK(gone);
  CHECK(!file_has_now(path, "ran out\n"));
  printf("a task whose owner died stopped %.0f ms after the owner (%s)\n", now_s() * 1e3 - t0,
         file_has_now(path, "cancelled\n") ? "cancelled" : "killed");
  unlink(path);
  rd_shutdown();
  return 0;
}

/* ---------------------------------------------------- application metrics */

static const double app_bounds[3] = {0.5, 1, 2};

/* Counts one request for route a (even arg0) or b (odd): a counter and a
 * histogram, defined here, in the worker, under the driver's names. */
RD_REMOTE(app_request) {
  rd_buf a;
  long i = 0;
  if (rd_arg(call, 0, &a) == 0 && a.size == sizeof(i)) memcpy(&i, a.data, sizeof(i));
  rd_metric *c, *h;
  if (rd_metric_counter("app_requests_total", "Requests served, by route.", &c) != 0 ||
      rd_metric_histogram("app_latency_seconds", "Request latency.", app_bounds, 3, &h) != 0)
    return rd_call_fail(call, "define");
  const char *route = i % 2 ? "route=b" : "route=a";
  if (rd_metric_inc(c, 1, route) != 0 || rd_metric_observe(h, (double)(i % 4), route) != 0)
    return rd_call_fail(call, "update");
  return rd_return_bytes(call, 0, "", 0);
}

/* A replica: sets app_queue_depth{pool=replicas} to its argument. */
RD_ACTOR_CLASS(Replica, where_init, NULL)
RD_ACTOR_METHOD(Replica, depth) {
  (void)state;
  rd_buf a;
  long d = 0;
  if (rd_arg(call, 0, &a) == 0 && a.size == sizeof(d)) memcpy(&d, a.data, sizeof(d));
  rd_metric *g;
  if (rd_metric_gauge("app_queue_depth", "Queued \\ waiting\nrequests.", &g) != 0 ||
      rd_metric_set(g, (double)d, "pool=replicas") != 0)
    return rd_call_fail(call, "gauge");
  return rd_return_bytes(call, 0, "", 0);
}

/* Waits (up to 5 s) until /metrics shows series at *want; 0 when it does. */
static int app_metric_wait(int port, const char *series, const double *want) {
  static char body[1 << 18];
  for (int i = 0; i < 100; i++) {
    const char *text = metrics_text(port, body, sizeof(body));
    if (text && metric(text, series) == *want) return 0;
    usleep(50000);
  }
  return -1;
}

/* Application metrics (rd_metric_*): 20 tasks count requests in their
 * workers, the driver adds to the same counter and sets a gauge, and the
 * node serves the sums on /metrics; two actor replicas set one gauge
 * series, served as the sum of their values while they live (Ray's gauges
 * without WorkerId); every bad input is refused.
 * RD_APP_METRICS_DUMP names a file for metrics_format's parser. */
static int t_app_metrics(void) {
  init_with_cpus(2);
  rd_metric *c, *g, *h, *x;
  CHECK_EQ(rd_metric_counter("app_requests_total", "Requests served, by route.", &c), 0);
  CHECK_EQ(rd_metric_gauge("app_queue_depth", "Queued \\ waiting\nrequests.", &g), 0);
  CHECK_EQ(rd_metric_histogram("app_latency_seconds", "Request latency.", app_bounds, 3, &h), 0);
  CHECK_EQ(rd_metric_counter("app_requests_total", NULL, &x), 0);   /* the same one again */
  CHECK(x == c);
  /* bad input, each refused */
  CHECK_EQ(rd_metric_counter("1st", NULL, &x), RD_EINVAL);
  CHECK_EQ(rd_metric_counter("a-b", NULL, &x), RD_EINVAL);
  CHECK_EQ(rd_metric_counter("raydist_mine", NULL, &x), RD_EINVAL);
  CHECK_EQ(rd_metric_counter("", NULL, &x), RD_EINVAL);
  CHECK_EQ(rd_metric_counter(NULL, NULL, &x), RD_EINVAL);
  CHECK_EQ(rd_metric_counter("ok_name", NULL, NULL), RD_EINVAL);
  CHECK_EQ(rd_metric_gauge("app_requests_total", NULL, &x), RD_EEXIST);
  double other[3] = {0.5, 1, 3}, down[2] = {2, 1}, nan_b[1] = {NAN};
  CHECK_EQ(rd_metric_histogram("app_latency_seconds", NULL, other, 3, &x), RD_EEXIST);
  CHECK_EQ(rd_metric_histogram("h_down", NULL, down, 2, &x), RD_EINVAL);
  CHECK_EQ(rd_metric_histogram("h_none", NULL, down, 0, &x), RD_EINVAL);
  CHECK_EQ(rd_metric_histogram("h_nan", NULL, nan_b, 1, &x), RD_EINVAL);
  CHECK_EQ(rd_metric_inc(c, -1, NULL), RD_EINVAL);
  CHECK_EQ(rd_metric_inc(c, NAN, NULL), RD_EINVAL);
  CHECK_EQ(rd_metric_inc(c, INFINITY, NULL), RD_EINVAL);
  CHECK_EQ(rd_metric_set(c, 1, NULL), RD_EINVAL);
  CHECK_EQ(rd_metric_observe(g, 1, NULL), RD_EINVAL);
  CHECK_EQ(rd_metric_inc(NULL, 1, NULL), RD_EINVAL);
  CHECK_EQ(rd_metric_inc(c, 1, "route"), RD_EINVAL);
  CHECK_EQ(rd_metric_inc(c, 1, "route=a,route=b"), RD_EINVAL);
  CHECK_EQ(rd_metric_inc(c, 1, "le=1"), RD_EINVAL);
  CHECK_EQ(rd_metric_inc(c, 1, "__x=1"), RD_EINVAL);
  CHECK_EQ(rd_metric_inc(c, 1, "9k=1"), RD_EINVAL);
  CHECK_EQ(rd_metric_inc(c, 1, "a=1=2"), RD_EINVAL);
  CHECK_EQ(rd_metric_inc(c, 1, "a=new\nline"), RD_EINVAL);
  CHECK_EQ(rd_metric_inc(c, 1, "a=1,b=2,c=3,d=4,e=5,f=6,g=7,h=8,i=9"), RD_EINVAL);
  char longv[100];
  memset(longv, 'v', sizeof(longv));
  memcpy(longv, "a=", 2);
  longv[sizeof(longv) - 1] = 0;
  CHECK_EQ(rd_metric_inc(c, 1, longv), RD_EINVAL);
  /* the driver's own updates: tag order does not matter, a gauge keeps its last */
  CHECK_EQ(rd_metric_inc(c, 2.5, "route=a"), 0);
  CHECK_EQ(rd_metric_inc(c, 1, "zone=x,route=c"), 0);
  CHECK_EQ(rd_metric_inc(c, 1, "route=c,zone=x"), 0);
  CHECK_EQ(rd_metric_set(g, 7, "pool=main,zone=x y"), 0);
  CHECK_EQ(rd_metric_set(g, 5, "zone=x y,pool=main"), 0);
  CHECK_EQ(rd_metric_set(g, -3.25, NULL), 0);
  CHECK_EQ(rd_metric_observe(h, 0.25, "route=\"q\""), 0);
  for (long i = 0; i < 20; i++) {
    rd_ref r;
    CHECK_EQ(rd_submit(app_request, RD_ARGS(rd_arg_bytes(&i, sizeof(i))), NULL, &r), 0);
    CHECK_EQ(get_status(r, 30000), 0);
    rd_ref_release(r);
  }
  /* the workers' reports follow their tasks within 100 ms or so */
  int port = metrics_port();
  static char body[1 << 18];
  const char *text = NULL;
  for (int i = 0; i < 100; i++) {
    text = metrics_text(port, body, sizeof(body));
    if (text && metric(text, "app_requests_total{route=\"b\"}") == 10 &&
        metric(text, "app_latency_seconds_count{route=\"a\"}") == 10)
      break;
    usleep(50000);
  }
  CHECK(text != NULL);
  CHECK(metric(text, "app_requests_total{route=\"a\"}") == 12.5);
  CHECK(metric(text, "app_requests_total{route=\"b\"}") == 10);
  CHECK(metric(text, "app_requests_total{route=\"c\",zone=\"x\"}") == 2);
  CHECK(metric(text, "app_queue_depth{pool=\"main\",zone=\"x y\"}") == 5);
  CHECK(metric(text, "app_queue_depth") == -3.25);
  /* route a: i = 0, 2, ..., 18 observed i % 4 = 0 or 2: five in le=0.5, five more by le=2 */
  CHECK(metric(text, "app_latency_seconds_bucket{route=\"a\",le=\"0.5\"}") == 5);
  CHECK(metric(text, "app_latency_seconds_bucket{route=\"a\",le=\"1\"}") == 5);
  CHECK(metric(text, "app_latency_seconds_bucket{route=\"a\",le=\"2\"}") == 10);
  CHECK(metric(text, "app_latency_seconds_bucket{route=\"a\",le=\"+Inf\"}") == 10);
  CHECK(metric(text, "app_latency_seconds_sum{route=\"a\"}") == 10);
  /* route b: 1 or 3: five by le=1, all ten only at +Inf */
  CHECK(metric(text, "app_latency_seconds_bucket{route=\"b\",le=\"1\"}") == 5);
  CHECK(metric(text, "app_latency_seconds_bucket{route=\"b\",le=\"2\"}") == 5);
  CHECK(metric(text, "app_latency_seconds_bucket{route=\"b\",le=\"+Inf\"}") == 10);
  CHECK(metric(text, "app_latency_seconds_count{route=\"\\\"q\\\"\"}") == 1);
  CHECK(strstr(text, "# HELP app_queue_depth Queued \\\\ waiting\\nrequests.\n") != NULL);
  CHECK(strstr(text, "# TYPE app_latency_seconds histogram\n") != NULL);
  CHECK(metric(text, "raydist_app_metric_rejected_total") == 0);
  CHECK(metric(text, "raydist_app_metric_series") == 8);   /* 3 counter, 2 gauge, 3 histogram series */
  dump_to(getenv("RD_APP_METRICS_DUMP"), text);
  /* two replicas (processes) set one series: the node serves the sum, and
   * each one's part goes with it; the driver's part of its own series stays */
  rd_actor rep[2];
  long depth[2] = {3, 4};
  for (int i = 0; i < 2; i++) {
    CHECK_EQ(rd_actor_create(Replica, RD_NO_ARGS, NULL, &rep[i]), 0);
    rd_ref r;
    CHECK_EQ(rd_actor_call(rep[i], Replica_depth, RD_ARGS(rd_arg_bytes(&depth[i], sizeof(long))), NULL, &r), 0);
    CHECK_EQ(get_status(r, 30000), 0);
    rd_ref_release(r);
  }
  CHECK_EQ(rd_metric_set(g, 10, "pool=replicas"), 0);
  double sum = 17, one = 14, own = 10;
  CHECK_EQ(app_metric_wait(port, "app_queue_depth{pool=\"replicas\"}", &sum), 0);
  long again = 6;   /* a replica's later value replaces its own part only */
  rd_ref r;
  CHECK_EQ(rd_actor_call(rep[0], Replica_depth, RD_ARGS(rd_arg_bytes(&again, sizeof(again))), NULL, &r), 0);
  CHECK_EQ(get_status(r, 30000), 0);
  rd_ref_release(r);
  sum = 20;
  CHECK_EQ(app_metric_wait(port, "app_queue_depth{pool=\"replicas\"}", &sum), 0);
  CHECK_EQ(rd_actor_kill(rep[0], 1), 0);
  CHECK_EQ(app_metric_wait(port, "app_queue_depth{pool=\"replicas\"}", &one), 0);
  CHECK_EQ(rd_actor_kill(rep[1], 1), 0);
  CHECK_EQ(app_metric_wait(port, "app_queue_depth{pool=\"replicas\"}", &own), 0);
  double nine = 9;   /* the 8 above and the replicas' series, the driver's part of it left */
  CHECK_EQ(app_metric_wait(port, "raydist_app_metric_series", &nine), 0);
  rd_shutdown();
  /* not initialised */
  CHECK_EQ(rd_metric_counter("late", NULL, &x), RD_ESTATE);
  return 0;
}

static const rd_test_case tests[] = {
    {"many_tasks", t_many_tasks},   {"chain", t_chain}, {"wide", t_wide},       {"big_objects", t_big_objects},
    {"spill", t_spill}, {"spill_background", t_spill_background}, {"owner_gone", t_owner_gone},             {"store_full", t_store_full}, {"store_fallback", t_store_fallback}, {"store_fallback_spill", t_store_fallback_spill}, {"gpu_packing", t_gpu_packing},
    {"infeasible", t_infeasible},   {"crash_retry", t_crash_retry}, {"crash_report", t_crash_report}, {"crash_report_actor", t_crash_report_actor}, {"exit_word", t_exit_word}, {"exit_word_actor", t_exit_word_actor}, {"kernel_oom", t_kernel_oom}, {"fd_exhausted", t_fd_exhausted}, {"fd_exhausted_leased", t_fd_exhausted_leased}, {"tmpdir", t_tmpdir}, {"node_fd_exhausted", t_node_fd_exhausted}, {"timeouts", t_timeouts},
    {"priority", t_priority},       {"malformed", t_malformed}, {"shutdown_clean", t_shutdown_clean}, {"shutdown_waiters", t_shutdown_waiters}, {"killed_driver_clean", t_killed_driver_clean}, {"stack_local", t_stack_local}, {"state_local", t_state_local}, {"killed_driver_child", t_killed_driver_child},
    {"threads", t_threads},         {"spawn_fails", t_spawn_fails}, {"spawn_fails_child", t_spawn_fails_child},
    {"workers_crash_at_start", t_workers_crash_at_start}, {"workers_trim", t_workers_trim},
    {"cancel", t_cancel},           {"progress", t_progress}, {"nested_blocked", t_nested_blocked}, {"nested_wide", t_nested_wide},
    {"memory_monitor", t_memory_monitor}, {"oom_retry", t_oom_retry}, {"oom_victim", t_oom_victim}, {"metrics", t_metrics}, {"app_metrics", t_app_metrics}, {"tasks_threaded", t_tasks_threaded}, {"task_history", t_task_history},
    {"cancel_cooperative", t_cancel_cooperative}, {"timeline", t_timeline},
    {"cancel_race", t_cancel_race}, {"get_released", t_get_released}, {"nodes", t_nodes}, {"labels", t_labels}, {"objects", t_objects}, {"intern_gc", t_intern_gc}, {"many_classes", t_many_classes}, {"worker_burst", t_worker_burst}, {"retry_failures", t_retry_failures}, {"kv", t_kv}, {"max_calls", t_max_calls}, {"cancel_recursive", t_cancel_recursive},
    {"signals", t_signals}, {"depth_by_function", t_depth_by_function},
    {"blocked_handback", t_blocked_handback},
};

RD_TEST_MAIN(tests)
