/* chaos.c - a randomized driver for the three-node cluster of
 * cluster_test.sh (head 127.0.0.1, b 127.0.0.2 with only_b, c 127.0.0.3
 * with only_c), run by its case `chaos`.
 *
 *   chaos SECS SEED
 *
 * THREADS driver threads (default 1) each pick operations at random for
 * SECS seconds: batches of small tasks, 0.1-5 MiB objects made on one node
 * and read on another, chains, nested tasks, several returns, rd_wait,
 * failing and retried tasks, streams (some dropped early), actors with and
 * without restarts, borrowed refs passed on, refs returned by a task,
 * cancels, placement groups, results held to the end and read then,
 * completion queues, named actors whose handles tasks call, objects
 * holding refs, the GCS's KV store from drivers and tasks, and actors
 * running calls at once in concurrency groups, some cancelled.
 * Every result is checked byte for byte (or by hash) against what its seed
 * makes; every wait is bounded.  Meanwhile, as asked:
 *
 *   CHAOS_MS=N        SIGKILL a random worker every N ms ...
 *   CHAOS_NODES=bc    ... of these nodes (default abc)
 *   KILL_NODE=b|c     SIGKILL that node's daemon at KILL_AT s (default SECS/2)
 *   REJOIN_AFTER=S    and start it again S s later (RD_BIN: raydist)
 *   STOP_NODE=b|c     SIGSTOP it at STOP_AT s (default SECS/2) for STOP_FOR s (default 4)
 *   KILL_GCS_AT=S     SIGKILL the GCS server at S s, KILL_GCS_TIMES times, 6 s apart
 *   STRICT=1          after a node's death tolerate only what cannot be
 *                     rebuilt (actors' results); tasks placed by soft affinity
 *   OPS=0,1,...       only these operations (numbers as in `names`)
 *   VERBOSE=1         a line per operation
 *
 * An error is tolerated (TOL) only when the faults asked for explain it
 * (a worker's death with CHAOS_MS, a node's after KILL_NODE or STOP_NODE);
 * anything else, a wrong byte, or a wait past 90 s is a BAD or HANG line
 * and exit status 3.  The daemons' pids are read in their sessions, under
 * RAYDIST_TMPDIR (tests/cluster/session.h).
 */
#include <raydist.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "session.h"

/* each driver thread's own sequence, from the seed (rnd() is shared) */
static __thread unsigned rs;
static int rnd(void) { return (int)(rand_r(&rs) & 0x7fffffff); }
/* ------------------------------------------------------------ content */
static uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
/* pattern(seed) ^ key, word by word; tail bytes from the next word */
static void fill(uint64_t seed, uint64_t key, void *p, size_t n) {
  uint64_t *w = p;
  size_t nw = n / 8;
  for (size_t k = 0; k < nw; k++) w[k] = mix(seed * 1000003ull + k) ^ key;
  if (n % 8) {
    uint64_t t = mix(seed * 1000003ull + nw) ^ key;
    memcpy((char *)p + nw * 8, &t, n % 8);
  }
}
static uint64_t hash(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = 1469598103934665603ull ^ n;
  size_t k = 0;
  for (; k + 8 <= n; k += 8) { uint64_t w; memcpy(&w, b + k, 8); h = (h ^ w) * 1099511628211ull; h ^= h >> 29; }
  for (; k < n; k++) h = (h ^ b[k]) * 1099511628211ull;
  return h;
}
static uint64_t expect_hash(uint64_t seed, uint64_t key, size_t n) {
  void *p = malloc(n ? n : 1);
  fill(seed, key, p, n);
  uint64_t h = hash(p, n);
  free(p);
  return h;
}
/* first differing byte, -1 if equal */
static long check_bytes(const void *got, size_t n, uint64_t seed, uint64_t key) {
  void *p = malloc(n ? n : 1);
  fill(seed, key, p, n);
  long bad = -1;
  if (memcmp(p, got, n)) for (size_t i = 0; i < n; i++) if (((unsigned char *)p)[i] != ((const unsigned char *)got)[i]) { bad = (long)i; break; }
  free(p);
  return bad;
}

static uint64_t argu(rd_call *c, size_t i) {
  uint64_t v = 0;
  if (rd_arg_copy(c, i, &v, 8)) return ~0ull;
  return v;
}
static uint32_t my_node(void) {
  rd_node_info ni;
  if (rd_node_info_get(&ni)) return 0;
  return ni.node_index;
}

/* ------------------------------------------------------------ tasks */
RD_REMOTE(where) { uint32_t n = my_node(); return rd_return_bytes(call, 0, &n, 4); }
RD_REMOTE(add) { uint64_t v = argu(call, 0) + argu(call, 1); return rd_return_bytes(call, 0, &v, 8); }
RD_REMOTE(sleepy) { uint64_t ms = argu(call, 0); usleep(ms * 1000); return rd_return_bytes(call, 0, &ms, 8); }
RD_REMOTE(fails) { return rd_call_fail(call, "nope %llu", (unsigned long long)argu(call, 0)); }
RD_REMOTE(flaky) {
  if (rd_call_attempt(call) == 0) return rd_call_fail(call, "flaky first run");
  uint64_t v = argu(call, 0) * 3;
  return rd_return_bytes(call, 0, &v, 8);
}
/* gen(seed, size) -> big object pattern(seed) */
RD_REMOTE(gen) {
  uint64_t seed = argu(call, 0), n = argu(call, 1);
  void *p = rd_return_alloc(call, 0, n);
  if (!p) return rd_call_fail(call, "gen: alloc %llu", (unsigned long long)n);
  fill(seed, 0, p, n);
  return 0;
}
/* xform(ref, key) -> arg ^ key (words) */
RD_REMOTE(xform) {
  rd_buf b;
  if (rd_arg(call, 0, &b)) return rd_call_fail(call, "xform: arg");
  uint64_t key = argu(call, 1);
  void *p = rd_return_alloc(call, 0, b.size);
  if (!p) return rd_call_fail(call, "xform: alloc");
  size_t nw = b.size / 8;
  const uint64_t *s = b.data;
  uint64_t *d = p;
  for (size_t k = 0; k < nw; k++) { uint64_t w; memcpy(&w, s + k, 8); w ^= key; memcpy(d + k, &w, 8); }
  if (b.size % 8) {
    uint64_t t = 0;
    memcpy(&t, (const char *)b.data + nw * 8, b.size % 8);
    t ^= key;
    memcpy((char *)p + nw * 8, &t, b.size % 8);
  }
  return 0;
}
/* csum(ref) -> {hash, size} */
RD_REMOTE(csum) {
  rd_buf b;
  if (rd_arg(call, 0, &b)) return rd_call_fail(call, "csum: arg");
  uint64_t r[2] = {hash(b.data, b.size), b.size};
  return rd_return_bytes(call, 0, r, 16);
}
/* In a task: rd_get of r (60 s) into b, 0; or the call fails, *rc, with
 * "WHAT: RD_E...: its message" (WHAT ends in "get" or "get borrowed": the
 * driver reads the code there, get1) and the error is returned. */
static int get_in_task(rd_call *call, rd_ref r, rd_buf *b, const char *what, int *rc) {
  int e = rd_get(&r, 1, b, 60000);
  if (!e) return 0;
  *rc = rd_call_fail(call, "%s: %s: %.*s", what, rd_err_name(e), e == RD_ETIMEDOUT ? 0 : (int)b->size,
                     e == RD_ETIMEDOUT ? "" : (const char *)b->data);
  if (e != RD_ETIMEDOUT) rd_buf_release(b);
  return e;
}
/* ... and r's bytes returned as the call's */
static int pass_on(rd_call *call, rd_ref r, const char *what) {
  rd_buf b;
  int rc;
  if (get_in_task(call, r, &b, what, &rc)) return rc;
  rc = rd_return_bytes(call, 0, b.data, b.size);
  rd_buf_release(&b);
  return rc;
}
/* bcsum(borrowed ref) -> {hash, size} */
RD_REMOTE(bcsum) {
  rd_ref r;
  if (rd_call_arg_ref(call, 0, &r)) return rd_call_fail(call, "bcsum: arg ref");
  rd_buf b;
  int rc;
  if (get_in_task(call, r, &b, "bcsum: get borrowed", &rc)) {
    rd_ref_release(r);
    return rc;
  }
  uint64_t out[2] = {hash(b.data, b.size), b.size};
  rd_buf_release(&b);
  rd_ref_release(r);
  return rd_return_bytes(call, 0, out, 16);
}
/* nested(seed, size, res_index): gen on the other node, xform here, return bytes */
RD_REMOTE(nested) {
  uint64_t seed = argu(call, 0), n = argu(call, 1), which = argu(call, 2);
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = which == 1 ? "only_b=0.1" : which == 2 ? "only_c=0.1" : NULL;
  rd_ref g, x;
  if (rd_submit(gen, RD_ARGS(rd_arg_bytes(&seed, 8), rd_arg_bytes(&n, 8)), &o, &g)) return rd_call_fail(call, "nested: submit gen");
  uint64_t key = seed ^ 0x55;
  rd_task_opts_init(&o);
  if (rd_submit(xform, RD_ARGS(rd_arg_ref(g), rd_arg_bytes(&key, 8)), &o, &x)) return rd_call_fail(call, "nested: submit xform");
  rd_ref_release(g);
  int rc = pass_on(call, x, "nested: get");
  rd_ref_release(x);
  return rc;
}
/* multi(seed, size): 3 returns: {seed}, pattern(seed), pattern(seed+1) */
RD_REMOTE(multi) {
  uint64_t seed = argu(call, 0), n = argu(call, 1);
  if (rd_return_bytes(call, 0, &seed, 8)) return rd_call_fail(call, "multi r0");
  for (int i = 1; i < 3; i++) {
    void *p = rd_return_alloc(call, (size_t)i, n);
    if (!p) return rd_call_fail(call, "multi alloc %d", i);
    fill(seed + (uint64_t)i - 1, 0, p, n);
  }
  return 0;
}
/* stream_items(seed, count): item i = pattern(seed+i) of size (i%3==2 ? 1 MiB+i : 40+i) */
static size_t item_size(uint64_t i) { return i % 3 == 2 ? (1u << 20) + i : 40 + i; }
RD_REMOTE(stream_items) {
  uint64_t seed = argu(call, 0), cnt = argu(call, 1);
  for (uint64_t i = 0; i < cnt; i++) {
    size_t n = item_size(i);
    void *p = rd_yield_alloc(call, n);
    if (!p) return rd_call_fail(call, "yield alloc %llu", (unsigned long long)i);
    fill(seed + i, 0, p, n);
    if (rd_yield_commit(call)) return rd_call_fail(call, "yield commit %llu", (unsigned long long)i);
  }
  return 0;
}

/* bpass(borrowed ref, where): passes it on, borrowed, to bcsum on the other node */
RD_REMOTE(bpass) {
  rd_ref r;
  if (rd_call_arg_ref(call, 0, &r)) return rd_call_fail(call, "bpass: arg ref");
  uint64_t w = argu(call, 1);
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = w == 1 ? "only_b=0.1" : w == 2 ? "only_c=0.1" : NULL;
  rd_ref c;
  int e = rd_submit(bcsum, RD_ARGS(rd_arg_borrow(r)), &o, &c);
  if (e) { rd_ref_release(r); return rd_call_fail(call, "bpass: submit %s", rd_err_name(e)); }
  int rc = pass_on(call, c, "bpass: get");
  rd_ref_release(c);
  rd_ref_release(r);
  return rc;
}

/* mkrefs(seed, n, where): puts pattern(seed) here, submits gen(seed+1) on `where`,
 * returns {pid} containing both refs */
RD_REMOTE(mkrefs) {
  uint64_t seed = argu(call, 0), n = argu(call, 1), w = argu(call, 2);
  void *p;
  rd_ref refs[2];
  if (rd_put_begin(n, &p, &refs[0])) return rd_call_fail(call, "mkrefs: put");
  fill(seed, 0, p, n);
  if (rd_put_seal(refs[0])) return rd_call_fail(call, "mkrefs: seal");
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = w == 1 ? "only_b=0.1" : w == 2 ? "only_c=0.1" : NULL;
  uint64_t s1 = seed + 1;
  if (rd_submit(gen, RD_ARGS(rd_arg_bytes(&s1, 8), rd_arg_bytes(&n, 8)), &o, &refs[1])) return rd_call_fail(call, "mkrefs: submit");
  uint64_t pid = (uint64_t)getpid();
  int e = rd_return_refs(call, 0, &pid, 8, refs, 2);
  rd_ref_release(refs[0]);
  rd_ref_release(refs[1]);
  if (e) return rd_call_fail(call, "mkrefs: return_refs %s", rd_err_name(e));
  return 0;
}
/* sleeper(ms) that polls cancellation; submits a child sleeper too */
RD_REMOTE(csleep) {
  uint64_t ms = argu(call, 0), depth = argu(call, 1);
  rd_ref child = {0};
  if (depth > 0) {
    uint64_t d = depth - 1;
    rd_task_opts o;
    rd_task_opts_init(&o);
    o.num_cpus = 0;
    if (rd_submit(csleep, RD_ARGS(rd_arg_bytes(&ms, 8), rd_arg_bytes(&d, 8)), &o, &child)) return rd_call_fail(call, "csleep submit");
  }
  for (uint64_t t = 0; t < ms; t += 10) {
    if (rd_call_cancelled(call)) break;
    usleep(10000);
  }
  if (child.id) {
    rd_buf b;
    int e = rd_get(&child, 1, &b, 60000);
    if (e != RD_ETIMEDOUT) rd_buf_release(&b);
    rd_ref_release(child);
  }
  return rd_return_bytes(call, 0, &ms, 8);
}

/* refsum(object holding refs by value, or refs borrowed as one argument)
 * -> {hash, size} of each of its refs' objects, in order */
RD_REMOTE(refsum) {
  rd_ref r[8];
  size_t n = 0;
  if (rd_call_arg_refs(call, 0, r, 8, &n)) return rd_call_fail(call, "refsum: arg refs");
  uint64_t out[16];
  int rc = 0, failed = 0;
  for (size_t i = 0; i < n && !failed; i++) {
    rd_buf b;
    if ((failed = get_in_task(call, r[i], &b, "refsum: get", &rc)) != 0) break;
    out[2 * i] = hash(b.data, b.size);
    out[2 * i + 1] = b.size;
    rd_buf_release(&b);
  }
  for (size_t i = 0; i < n; i++) rd_ref_release(r[i]);
  return failed ? rc : rd_return_bytes(call, 0, out, 16 * n);
}
/* kvecho(key, reply key): reads key from the GCS's KV, puts its hash under
 * the reply key (over the one of an attempt killed after its put) ->
 * {hash, size} */
RD_REMOTE(kvecho) {
  char key[64], reply[64];
  rd_buf k, rk;
  if (rd_arg(call, 0, &k) || rd_arg(call, 1, &rk) || k.size >= sizeof(key) || rk.size >= sizeof(reply))
    return rd_call_fail(call, "kvecho: args");
  snprintf(key, sizeof(key), "%.*s", (int)k.size, (const char *)k.data);
  snprintf(reply, sizeof(reply), "%.*s", (int)rk.size, (const char *)rk.data);
  void *v;
  size_t n;
  int e = rd_kv_get(key, &v, &n);
  if (e) return rd_call_fail(call, "kvecho: kv_get %s: %s", key, rd_err_name(e));
  uint64_t out[2] = {hash(v, n), n};
  free(v);
  if ((e = rd_kv_put(reply, out, sizeof(out), 1))) return rd_call_fail(call, "kvecho: kv_put %s: %s", reply, rd_err_name(e));
  return rd_return_bytes(call, 0, out, sizeof(out));
}

/* ------------------------------------------------------------ actor */
typedef struct { uint64_t calls, base; } acc;
static int acc_init(rd_call *c, void **st) {
  acc *a = calloc(1, sizeof(acc));
  a->base = argu(c, 0);
  *st = a;
  return 0;
}
static void acc_fini(void *st) { free(st); }
RD_ACTOR_CLASS(Acc, acc_init, acc_fini)
/* feed(ref) -> {hash, size, calls, restarts, base} */
RD_ACTOR_METHOD(Acc, feed) {
  acc *a = state;
  rd_buf b;
  if (rd_arg(call, 0, &b)) return rd_call_fail(call, "feed: arg");
  a->calls++;
  uint64_t r[5] = {hash(b.data, b.size), b.size, a->calls, (uint64_t)rd_call_actor_restarts(call), a->base};
  return rd_return_bytes(call, 0, r, sizeof r);
}
/* The echo methods: pattern(seed) of size bytes (arguments 0 and 1), made
 * by the actor after a nap of ms. */
static int echo_after(rd_call *call, uint64_t ms) {
  uint64_t seed = argu(call, 0), n = argu(call, 1);
  if (ms) usleep((useconds_t)ms * 1000);
  void *p = rd_return_alloc(call, 0, n);
  if (!p) return rd_call_fail(call, "echo alloc");
  fill(seed, 0, p, n);
  return 0;
}
/* echo(seed, size) -> pattern(seed) big, made by the actor */
RD_ACTOR_METHOD(Acc, echo) {
  (void)state;
  return echo_after(call, 0);
}
RD_ACTOR_METHOD(Acc, die) { (void)call; (void)state; raise(SIGKILL); return 0; }

/* an actor running calls at once: three in its default group, two in
 * "io" (its constructor and state are Acc's) */
RD_ACTOR_CLASS(Conc, acc_init, acc_fini)
/* echo(seed, size), as Acc's */
RD_ACTOR_METHOD(Conc, echo) {
  (void)state;
  return echo_after(call, 0);
}
/* nap_echo(seed, size, ms): echo after ms, in the "io" group */
RD_ACTOR_METHOD_IN(Conc, nap_echo, "io") {
  (void)state;
  return echo_after(call, argu(call, 2));
}

/* via_actor(handle, seed, size): calls Acc.echo on the actor it was
 * handed and returns what it made */
RD_REMOTE(via_actor) {
  rd_actor a;
  if (rd_call_arg_actor(call, 0, &a)) return rd_call_fail(call, "via_actor: handle");
  uint64_t seed = argu(call, 1), n = argu(call, 2);
  rd_ref r;
  int e = rd_actor_call(a, Acc_echo, RD_ARGS(rd_arg_bytes(&seed, 8), rd_arg_bytes(&n, 8)), NULL, &r);
  if (e) return rd_call_fail(call, "via_actor: call: %s", rd_err_name(e));
  int rc = pass_on(call, r, "via_actor: get");
  rd_ref_release(r);
  return rc;
}

/* ------------------------------------------------------------ driver side */
static int bad, hangs;
static double t_start;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static double el(void) { return now() - t_start; }
static pthread_mutex_t note_mu = PTHREAD_MUTEX_INITIALIZER;
static __thread int tid;
static void note(const char *kind, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  pthread_mutex_lock(&note_mu);
  if (!strcmp(kind, "BAD")) bad++;
  if (!strcmp(kind, "HANG")) hangs++;
  fprintf(stdout, "[T%d] ", tid);
  fprintf(stdout, "%s t=%.2f ", kind, el());
  vfprintf(stdout, fmt, ap);
  fprintf(stdout, "\n");
  fflush(stdout);
  pthread_mutex_unlock(&note_mu);
  va_end(ap);
}
#define BAD(...) note("BAD", __VA_ARGS__)
#define INFO(...) note("INFO", __VA_ARGS__)

static uint32_t node_b, node_c, node_a;
static volatile int dead_node;   /* 0, 'b' or 'c' once killed */
static int chaos_workers;

/* What a result is, for the errors the faults asked for may explain. */
enum {
  R_TASK,         /* a task's result: made again from its lineage when lost */
  R_ACTOR,        /* an actor call's result */
  R_ACTOR_GONE,   /* an actor call after a die call used up its restarts */
  R_NO_LINEAGE    /* a stream item, a borrowed or returned ref: not made again when its node dies */
};
static int strict;
/* Is error e, for a result of this kind, explained by the faults so far? */
static int tolerable(int e, int kind) {
  if (e == RD_ETIMEDOUT) return 0;
  if (strict && dead_node) {   /* only what the docs say cannot be rebuilt */
    if (kind == R_ACTOR_GONE && e == RD_EACTOR_DIED) return 1;
    if (chaos_workers && (e == RD_EWORKER_DIED || (kind != R_TASK && e == RD_EACTOR_DIED))) return 1;
    if (kind != R_TASK && (e == RD_EACTOR_DIED || e == RD_ENODE_DIED || e == RD_EOBJECT_LOST)) return 1;
    return 0;
  }
  if (kind == R_ACTOR_GONE && e == RD_EACTOR_DIED) return 1;
  if (chaos_workers && (e == RD_EWORKER_DIED || (kind != R_TASK && e == RD_EACTOR_DIED))) return 1;
  if (dead_node && (e == RD_ENODE_DIED || e == RD_EOBJECT_LOST || e == RD_EINFEASIBLE || e == RD_EACTOR_DIED ||
                    e == RD_EWORKER_DIED))
    return 1;
  return 0;
}
static long n_tolerated;
/* rd_get of one ref, bounded at 90 s: its error, said as TOL, BAD or HANG (what: the result, for the line) */
static int get1(rd_ref r, rd_buf *b, const char *what, int kind, int *tol) {
  double t0 = now();
  int e = rd_get(&r, 1, b, 90000);
  double dt = now() - t0;
  *tol = 0;
  if (e == RD_ETIMEDOUT) {
    note("HANG", "rd_get(%s ref %llx) timed out after %.1f s", what, (unsigned long long)r.id, dt);
    return e;
  }
  if (dt > 20) note("SLOW", "rd_get(%s) took %.1f s (err %s)", what, dt, rd_err_name(e));
  if (e) {
    const char *m = b->data ? (const char *)b->data : "";
    int inner = 0;   /* a nested get's error, wrapped by rd_call_fail in the task */
    if (e == RD_ETASK) {
      const char *q = strstr(m, "get: RD_E");
      if (!q) q = strstr(m, "get borrowed: RD_E");
      if (q) {
        q = strstr(q, "RD_E");
        static const int codes[] = {RD_ENODE_DIED, RD_EOBJECT_LOST, RD_EINFEASIBLE, RD_EACTOR_DIED, RD_EWORKER_DIED, RD_ETASK};
        for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
          const char *nm = rd_err_name(codes[i]);
          if (!strncmp(q, nm, strlen(nm)) && q[strlen(nm)] == ':' && codes[i] != RD_ETASK) inner = codes[i];
        }
      }
    }
    if (tolerable(e, kind) || (inner && tolerable(inner, kind))) {
      *tol = 1;
      n_tolerated++;
      note("TOL", "%s: %s: %.300s", what, rd_err_name(e), m);
    } else {
      BAD("%s: %s: %.400s", what, rd_err_name(e), m);
    }
  }
  return e;
}

static int ops_ok[32];
static volatile int rejoined;
static int pick_node(void) {   /* 0 default, 1 b, 2 c, 3 spread */
  for (;;) {
    int w = rnd() % 4;
    if (strict) return w;
    if (dead_node == 'b' && w == 1 && !rejoined) continue;
    if (dead_node == 'c' && w == 2 && !rejoined) continue;
    return w;
  }
}
/* where a task goes: w from pick_node (by only_b or only_c, or by soft
 * affinity to b or c when STRICT; spread) */
static void place(rd_task_opts *o, int w) {
  if (strict && (w == 1 || w == 2)) { o->strategy = RD_STRATEGY_NODE_AFFINITY; o->node = w == 1 ? node_b : node_c; o->soft = 1; }
  else if (w == 1) o->resources = "only_b=0.1";
  else if (w == 2) o->resources = "only_c=0.1";
  else if (w == 3) o->strategy = RD_STRATEGY_SPREAD;
}
/* the same for an actor */
static void place_actor(rd_actor_opts *o, int w) {
  if (strict && (w == 1 || w == 2)) { o->strategy = RD_STRATEGY_NODE_AFFINITY; o->node = w == 1 ? node_b : node_c; o->soft = 1; }
  else if (w == 1) o->resources = "only_b=0.1";
  else if (w == 2) o->resources = "only_c=0.1";
  else if (w == 3) o->strategy = RD_STRATEGY_SPREAD;
}
static const char *wname(int w) { return w == 0 ? "default" : w == 1 ? "b" : w == 2 ? "c" : "spread"; }
static size_t big_size(void) {
  switch (rnd() % 4) {
    case 0: return 100 * 1024 + rnd() % 1000;   /* above the inline limit? */
    case 1: return (1u << 20) + rnd() % 4096;
    case 2: return (3u << 20) + (rnd() % 8) * 8;
    default: return (5u << 20) + rnd() % 77;
  }
}

/* checks a big result against pattern(seed)^key */
static void check_big(rd_ref r, uint64_t seed, uint64_t key, size_t n, const char *what, int kind) {
  rd_buf b;
  int tol;
  int e = get1(r, &b, what, kind, &tol);
  if (e == RD_ETIMEDOUT) return;
  if (!e) {
    if (b.size != n) BAD("%s: size %zu want %zu", what, b.size, n);
    else {
      long at = check_bytes(b.data, n, seed, key);
      if (at >= 0) BAD("%s: content differs at byte %ld of %zu", what, at, n);
    }
  }
  rd_buf_release(&b);
}

/* checks a {hash, size} result (csum and the like) against pattern(seed)^key */
static void check_sum(rd_ref r, uint64_t seed, uint64_t key, size_t n, const char *what, int kind) {
  rd_buf b;
  int tol;
  int e = get1(r, &b, what, kind, &tol);
  if (e == RD_ETIMEDOUT) return;
  if (!e) {
    uint64_t v[2];
    if (b.size != sizeof(v)) {
      BAD("%s: %zu bytes", what, b.size);
    } else {
      memcpy(v, b.data, sizeof(v));
      if (v[1] != n || v[0] != expect_hash(seed, key, n)) BAD("%s: wrong hash/size %llu", what, (unsigned long long)v[1]);
    }
  }
  rd_buf_release(&b);
}

/* ---- lineage holdings: big results produced (soft affinity) on b/c, kept until the end */
#define MAXHELD 64
static struct { rd_ref r; uint64_t seed, key; size_t n; int chain /* 0 gen, 1 a chain, 2 an actor call */; uint32_t node; } held[MAXHELD];
static int nheld;
static pthread_mutex_t held_mu = PTHREAD_MUTEX_INITIALIZER;

static void op_small_batch(void) {
  enum { N = 30 };
  rd_ref r[N];
  int w[N];
  for (uint64_t i = 0; i < N; i++) {
    rd_task_opts o;
    rd_task_opts_init(&o);
    w[i] = pick_node();
    place(&o, w[i]);
    uint64_t b = 7;
    int e = rd_submit(add, RD_ARGS(rd_arg_bytes(&i, 8), rd_arg_bytes(&b, 8)), &o, &r[i]);
    if (e) { BAD("submit add: %s", rd_err_name(e)); r[i].id = 0; }
  }
  for (uint64_t i = 0; i < N; i++) {
    if (!r[i].id) continue;
    rd_buf b;
    int tol;
    char what[64];
    snprintf(what, sizeof what, "add[%llu] on %s", (unsigned long long)i, wname(w[i]));
    int e = get1(r[i], &b, what, R_TASK, &tol);
    if (e == 0) {
      uint64_t v;
      if (b.size != 8) BAD("%s size %zu", what, b.size);
      else { memcpy(&v, b.data, 8); if (v != i + 7) BAD("%s = %llu", what, (unsigned long long)v); }
    }
    if (e != RD_ETIMEDOUT) rd_buf_release(&b);
    rd_ref_release(r[i]);
  }
}

/* gen on X, xform on Y, csum on Z; get both big results and the csum */
static void op_big_pipeline(void) {
  uint64_t seed = (uint64_t)rnd() << 20 | (uint64_t)rnd();
  uint64_t n = big_size(), key = mix(seed);
  rd_task_opts o;
  int wx = pick_node(), wy = pick_node(), wz = pick_node();
  rd_ref g, x, c;
  rd_task_opts_init(&o); place(&o, wx);
  if (rd_submit(gen, RD_ARGS(rd_arg_bytes(&seed, 8), rd_arg_bytes(&n, 8)), &o, &g)) { BAD("submit gen"); return; }
  rd_task_opts_init(&o); place(&o, wy);
  if (rd_submit(xform, RD_ARGS(rd_arg_ref(g), rd_arg_bytes(&key, 8)), &o, &x)) { BAD("submit xform"); return; }
  rd_task_opts_init(&o); place(&o, wz);
  if (rd_submit(csum, RD_ARGS(rd_arg_ref(x)), &o, &c)) { BAD("submit csum"); return; }
  char what[128];
  int order = rnd() % 2;
  if (order) { rd_ref_release(g); g.id = 0; }
  snprintf(what, sizeof what, "pipeline csum (gen %s, xform %s, csum %s, n %llu)", wname(wx), wname(wy), wname(wz),
           (unsigned long long)n);
  check_sum(c, seed, key, n, what, R_TASK);
  snprintf(what, sizeof what, "pipeline xform result (gen %s, xform %s, n %llu)", wname(wx), wname(wy), (unsigned long long)n);
  check_big(x, seed, key, n, what, R_TASK);
  if (g.id) {
    snprintf(what, sizeof what, "pipeline gen result (gen %s, n %llu)", wname(wx), (unsigned long long)n);
    check_big(g, seed, 0, n, what, R_TASK);
    rd_ref_release(g);
  }
  rd_ref_release(x);
  rd_ref_release(c);
}

/* put a big object here, pass it by value to csum and borrowed to bcsum on X */
static void op_put_pass(void) {
  uint64_t seed = (uint64_t)rnd() * 77 + 1;
  size_t n = big_size();
  void *p;
  rd_ref in;
  int e = rd_put_begin(n, &p, &in);
  if (e) { BAD("put_begin %zu: %s", n, rd_err_name(e)); return; }
  fill(seed, 0, p, n);
  if ((e = rd_put_seal(in))) { BAD("put_seal: %s", rd_err_name(e)); return; }
  rd_ref r[2];
  int w[2];
  for (int i = 0; i < 2; i++) {
    rd_task_opts o;
    rd_task_opts_init(&o);
    w[i] = pick_node();
    place(&o, w[i]);
    e = i == 0 ? rd_submit(csum, RD_ARGS(rd_arg_ref(in)), &o, &r[i]) : rd_submit(bcsum, RD_ARGS(rd_arg_borrow(in)), &o, &r[i]);
    if (e) { BAD("submit csum/bcsum: %s", rd_err_name(e)); return; }
  }
  if (rnd() % 2) { rd_ref_release(in); in.id = 0; }   /* the pending tasks keep it */
  for (int i = 0; i < 2; i++) {
    char what[128];
    snprintf(what, sizeof what, "%s of put %zu B on %s%s", i ? "bcsum(borrow)" : "csum", n, wname(w[i]), in.id ? "" : " (put released)");
    check_sum(r[i], seed, 0, n, what, R_TASK);
    rd_ref_release(r[i]);
  }
  if (in.id) rd_ref_release(in);
}

static void op_nested(void) {
  uint64_t seed = (uint64_t)rnd() + 11, n = big_size();
  uint64_t which = (uint64_t)(rnd() % 3);   /* where the child gen goes */
  if ((dead_node == 'b' && which == 1) || (dead_node == 'c' && which == 2) || strict) which = 0;
  rd_task_opts o;
  rd_task_opts_init(&o);
  int w = pick_node();
  place(&o, w);
  rd_ref r;
  if (rd_submit(nested, RD_ARGS(rd_arg_bytes(&seed, 8), rd_arg_bytes(&n, 8), rd_arg_bytes(&which, 8)), &o, &r)) { BAD("submit nested"); return; }
  char what[128];
  snprintf(what, sizeof what, "nested on %s, child gen on %s, n %llu", wname(w), which == 0 ? "default" : which == 1 ? "b" : "c",
           (unsigned long long)n);
  check_big(r, seed, seed ^ 0x55, n, what, R_TASK);
  rd_ref_release(r);
}

static void op_multi(void) {
  uint64_t seed = (uint64_t)rnd() * 3 + 5, n = big_size();
  rd_task_opts o;
  rd_task_opts_init(&o);
  int w = pick_node();
  place(&o, w);
  o.num_returns = 3;
  rd_ref r[3];
  if (rd_submit(multi, RD_ARGS(rd_arg_bytes(&seed, 8), rd_arg_bytes(&n, 8)), &o, r)) { BAD("submit multi"); return; }
  char what[96];
  snprintf(what, sizeof what, "multi on %s r0", wname(w));
  rd_buf b;
  int tol;
  int e = get1(r[0], &b, what, R_TASK, &tol);
  if (!e && (b.size != 8 || memcmp(b.data, &seed, 8))) BAD("%s wrong", what);
  if (e != RD_ETIMEDOUT) rd_buf_release(&b);
  for (int i = 1; i < 3; i++) {
    snprintf(what, sizeof what, "multi on %s r%d n %llu", wname(w), i, (unsigned long long)n);
    check_big(r[i], seed + (uint64_t)i - 1, 0, n, what, R_TASK);
  }
  for (int i = 0; i < 3; i++) rd_ref_release(r[i]);
}

static void op_wait(void) {
  enum { N = 16 };
  rd_ref r[N];
  for (uint64_t i = 0; i < N; i++) {
    rd_task_opts o;
    rd_task_opts_init(&o);
    place(&o, pick_node());
    uint64_t ms = (uint64_t)(rnd() % 200);
    if (rd_submit(sleepy, RD_ARGS(rd_arg_bytes(&ms, 8)), &o, &r[i])) { BAD("submit sleepy"); return; }
  }
  uint8_t ready[N];
  double t0 = now();
  int k = rd_wait(r, N, N / 2, 5 + rnd() % 50, ready);
  double dt = now() - t0;
  if (k < 0 || k > N) BAD("rd_wait returned %d", k);
  if (dt > 5) BAD("rd_wait with a short timeout took %.1f s", dt);
  t0 = now();
  k = rd_wait(r, N, N, 90000, ready);
  dt = now() - t0;
  if (k != N) {
    note("HANG", "rd_wait(all %d sleepy) gave %d after %.1f s", N, k, dt);
  }
  for (int i = 0; i < N; i++) {
    rd_buf b;
    int tol;
    int e = get1(r[i], &b, "sleepy after wait", R_TASK, &tol);
    if (e != RD_ETIMEDOUT) rd_buf_release(&b);
    rd_ref_release(r[i]);
  }
}

static void op_fail(void) {
  uint64_t x = (uint64_t)rnd();
  rd_task_opts o;
  rd_task_opts_init(&o);
  int w = pick_node();
  place(&o, w);
  o.max_retries = rnd() % 2 ? 0 : 2;
  rd_ref r, f;
  if (rd_submit(fails, RD_ARGS(rd_arg_bytes(&x, 8)), &o, &r)) { BAD("submit fails"); return; }
  rd_task_opts_init(&o);
  place(&o, pick_node());
  o.retry_failures = 1;
  o.max_retries = 3;
  if (rd_submit(flaky, RD_ARGS(rd_arg_bytes(&x, 8)), &o, &f)) { BAD("submit flaky"); return; }
  /* a task depending on a failed one */
  rd_ref dep;
  rd_task_opts_init(&o);
  place(&o, pick_node());
  uint64_t k = 1;
  if (rd_submit(xform, RD_ARGS(rd_arg_ref(r), rd_arg_bytes(&k, 8)), &o, &dep)) { BAD("submit dep"); return; }
  rd_buf b;
  int tol;
  int e = rd_get(&r, 1, &b, 90000);
  char want[64];
  snprintf(want, sizeof want, "nope %llu", (unsigned long long)x);
  if (e == RD_ETIMEDOUT) { note("HANG", "rd_get(fails on %s)", wname(w)); }
  else {
    if (!(e == RD_ETASK && b.data && strstr(b.data, want)) && !tolerable(e, R_TASK)) BAD("fails on %s: %s: %.300s", wname(w), rd_err_name(e), b.data ? (char *)b.data : "");
    rd_buf_release(&b);
  }
  e = get1(f, &b, "flaky retry_failures", R_TASK, &tol);
  if (!e) { uint64_t v; memcpy(&v, b.data, 8); if (v != x * 3) BAD("flaky = %llu", (unsigned long long)v); }
  if (e != RD_ETIMEDOUT) rd_buf_release(&b);
  e = rd_get(&dep, 1, &b, 90000);
  if (e == RD_ETIMEDOUT) { note("HANG", "rd_get(dep on failed)"); }
  else {
    if (!(e == RD_ETASK && b.data && strstr(b.data, want)) && !tolerable(e, R_TASK)) BAD("dep on failed: %s: %.300s", rd_err_name(e), b.data ? (char *)b.data : "");
    rd_buf_release(&b);
  }
  rd_ref_release(r);
  rd_ref_release(f);
  rd_ref_release(dep);
}

static void op_stream(void) {
  uint64_t seed = (uint64_t)rnd() * 5 + 3, cnt = (uint64_t)(rnd() % 12);
  rd_task_opts o;
  rd_task_opts_init(&o);
  int w = pick_node();
  place(&o, w);
  o.num_returns = RD_STREAMING;
  o.stream_window = rnd() % 2 ? 2 : 0;
  rd_ref s;
  if (rd_submit(stream_items, RD_ARGS(rd_arg_bytes(&seed, 8), rd_arg_bytes(&cnt, 8)), &o, &s)) { BAD("submit stream"); return; }
  uint64_t got = 0;
  int e;
  rd_ref it;
  int early = rnd() % 6 == 0;
  while ((e = rd_stream_next(s, &it, 90000)) == 0) {
    char what[96];
    snprintf(what, sizeof what, "stream on %s item %llu/%llu", wname(w), (unsigned long long)got, (unsigned long long)cnt);
    check_big(it, seed + got, 0, item_size(got), what, R_NO_LINEAGE);
    rd_ref_release(it);
    got++;
    if (early && got == 2) break;
  }
  if (e == RD_ETIMEDOUT) { note("HANG", "rd_stream_next on %s after %llu of %llu items", wname(w), (unsigned long long)got, (unsigned long long)cnt); }
  else if (e == RD_EEND) { if (got != cnt) BAD("stream on %s ended after %llu of %llu", wname(w), (unsigned long long)got, (unsigned long long)cnt); }
  else if (e != 0) {
    if (!tolerable(e, R_TASK)) BAD("stream on %s: %s after %llu", wname(w), rd_err_name(e), (unsigned long long)got);
    else { n_tolerated++; note("TOL", "stream on %s: %s", wname(w), rd_err_name(e)); }
  }
  if (!early && e == RD_EEND) {
    rd_buf b;
    int tol;
    e = get1(s, &b, "stream ref", R_TASK, &tol);
    if (!e) { uint64_t v; memcpy(&v, b.data, 8); if (v != cnt) BAD("stream count %llu want %llu", (unsigned long long)v, (unsigned long long)cnt); }
    if (e != RD_ETIMEDOUT) rd_buf_release(&b);
  }
  rd_ref_release(s);
}

static void op_actor(void) {
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  int w = pick_node();
  place_actor(&ao, w);
  int mr = rnd() % 3;
  ao.max_restarts = mr == 2 ? -1 : mr;
  ao.max_task_retries = rnd() % 2;
  uint64_t base = (uint64_t)rnd();
  rd_actor a;
  int e = rd_actor_create(Acc, RD_ARGS(rd_arg_bytes(&base, 8)), &ao, &a);
  if (e) { if (!tolerable(e, R_ACTOR)) BAD("actor create on %s: %s", wname(w), rd_err_name(e)); return; }
  int k = 2 + rnd() % 10;
  int died = 0;
  uint64_t last_calls = 0, last_restarts = 0;
  for (int i = 0; i < k; i++) {
    int kind = rnd() % 10;
    rd_ref r;
    char what[128];
    if (kind == 0) {   /* die */
      e = rd_actor_call(a, Acc_die, RD_NO_ARGS, NULL, &r);
      if (e) { BAD("call die: %s", rd_err_name(e)); break; }
      rd_buf b;
      int g = rd_get(&r, 1, &b, 90000);
      if (g == RD_ETIMEDOUT) { note("HANG", "actor die call on %s", wname(w)); }
      else {
        if (g != RD_EACTOR_DIED && !(ao.max_task_retries && g == 0) && !tolerable(g, R_ACTOR))
          BAD("actor die call on %s (mr %d, mtr %d): %s: %.300s", wname(w), ao.max_restarts, ao.max_task_retries, rd_err_name(g), b.data ? (char *)b.data : "");
        rd_buf_release(&b);
      }
      rd_ref_release(r);
      died += 1 + ao.max_task_retries;   /* the die call is re-sent max_task_retries times */
      continue;
    }
    if (kind < 6) {   /* feed a big object (from put or a task on another node) */
      uint64_t seed = (uint64_t)rnd() * 13 + 1;
      size_t n = big_size();
      rd_ref in;
      int from_task = rnd() % 2;
      if (from_task) {
        rd_task_opts o;
        rd_task_opts_init(&o);
        place(&o, pick_node());
        uint64_t nn = n;
        if (rd_submit(gen, RD_ARGS(rd_arg_bytes(&seed, 8), rd_arg_bytes(&nn, 8)), &o, &in)) { BAD("submit gen for actor"); break; }
      } else {
        void *p;
        if ((e = rd_put_begin(n, &p, &in))) { BAD("put for actor: %s", rd_err_name(e)); break; }
        fill(seed, 0, p, n);
        if (rd_put_seal(in)) { BAD("seal"); break; }
      }
      e = rd_actor_call(a, Acc_feed, RD_ARGS(rd_arg_ref(in)), NULL, &r);
      rd_ref_release(in);
      if (e) { BAD("call feed: %s", rd_err_name(e)); break; }
      snprintf(what, sizeof what, "actor(%s, mr %d, mtr %d) feed %zu from %s%s %d", wname(w), ao.max_restarts, ao.max_task_retries, n,
               from_task ? "task" : "put", died ? " after die" : "", died);
      rd_buf b;
      int tol;
      int g = get1(r, &b, what, (ao.max_restarts >= 0 && died > ao.max_restarts) ? R_ACTOR_GONE : R_ACTOR, &tol);
      if (!g) {
        uint64_t v[5];
        memcpy(v, b.data, sizeof v);
        if (v[0] != expect_hash(seed, 0, n) || v[1] != n) BAD("%s: wrong hash/size", what);
        if (v[4] != base) BAD("%s: base %llu want %llu", what, (unsigned long long)v[4], (unsigned long long)base);
        if (v[3] == last_restarts && v[2] != last_calls + 1 && !chaos_workers) BAD("%s: calls %llu after %llu without restart", what, (unsigned long long)v[2], (unsigned long long)last_calls);
        if (v[3] < last_restarts) BAD("%s: restarts went down %llu -> %llu", what, (unsigned long long)last_restarts, (unsigned long long)v[3]);
        if (ao.max_restarts >= 0 && v[3] > (uint64_t)ao.max_restarts) BAD("%s: restarts %llu > max %d", what, (unsigned long long)v[3], ao.max_restarts);
        last_calls = v[2];
        last_restarts = v[3];
      }
      if (g != RD_ETIMEDOUT) rd_buf_release(&b);
      rd_ref_release(r);
    } else {   /* echo: actor-made big result */
      uint64_t seed = (uint64_t)rnd() * 17 + 2, n = big_size();
      /* a quarter each: the actor's retries, the call's own -1, 0 or 2 */
      static const int call_mtr[4] = {RD_ACTOR_DEFAULT, -1, 0, 2};
      rd_task_opts co;
      rd_task_opts_init(&co);
      co.max_task_retries = call_mtr[rnd() % 4];
      e = rd_actor_call(a, Acc_echo, RD_ARGS(rd_arg_bytes(&seed, 8), rd_arg_bytes(&n, 8)), &co, &r);
      if (e) { BAD("call echo: %s", rd_err_name(e)); break; }
      snprintf(what, sizeof what, "actor(%s, mr %d, mtr %d, call's %d) echo %llu%s %d", wname(w), ao.max_restarts,
               ao.max_task_retries, co.max_task_retries, (unsigned long long)n, died ? " after die" : "", died);
      rd_buf b;
      int tol;
      int g = get1(r, &b, what, (ao.max_restarts >= 0 && died > ao.max_restarts) ? R_ACTOR_GONE : R_ACTOR, &tol);
      if (!g) {
        if (b.size != n) BAD("%s size", what);
        else if (check_bytes(b.data, n, seed, 0) >= 0) BAD("%s content", what);
      }
      if (g != RD_ETIMEDOUT) rd_buf_release(&b);
      rd_ref_release(r);
    }
  }
  e = rd_actor_kill(a, 1);
  if (e && e != RD_EACTOR_DIED && e != RD_ENOENT && !tolerable(e, R_ACTOR)) BAD("actor kill: %s", rd_err_name(e));
}

/* many chains in flight at once: gen X -> xform Y -> csum Z; one rd_get for all */
static void op_burst(void) {
  enum { K = 12 };
  rd_ref g[K], x[K], c[K];
  uint64_t seed[K], key[K], n[K];
  int w[K][3];
  for (int i = 0; i < K; i++) {
    seed[i] = (uint64_t)rnd() * 101 + (uint64_t)i;
    key[i] = mix(seed[i] + 1);
    n[i] = big_size();
    rd_task_opts o;
    for (int j = 0; j < 3; j++) w[i][j] = pick_node();
    rd_task_opts_init(&o); place(&o, w[i][0]);
    if (rd_submit(gen, RD_ARGS(rd_arg_bytes(&seed[i], 8), rd_arg_bytes(&n[i], 8)), &o, &g[i])) { BAD("burst submit gen"); return; }
    rd_task_opts_init(&o); place(&o, w[i][1]);
    if (rd_submit(xform, RD_ARGS(rd_arg_ref(g[i]), rd_arg_bytes(&key[i], 8)), &o, &x[i])) { BAD("burst submit xform"); return; }
    rd_task_opts_init(&o); place(&o, w[i][2]);
    if (rd_submit(csum, RD_ARGS(rd_arg_ref(x[i])), &o, &c[i])) { BAD("burst submit csum"); return; }
    rd_ref_release(g[i]);
  }
  rd_buf b[K];
  double t0 = now();
  int e = rd_get(c, K, b, 90000);
  if (e == RD_ETIMEDOUT) {
    uint8_t rdy[K];
    int k = rd_wait(c, K, K, 0, rdy);
    note("HANG", "burst rd_get(%d csums) timed out after %.1f s; %d ready", K, now() - t0, k);
    for (int i = 0; i < K; i++) if (!rdy[i]) note("HANG", "  burst csum %d pending (gen %s xform %s csum %s)", i, wname(w[i][0]), wname(w[i][1]), wname(w[i][2]));
  } else {
    for (int i = 0; i < K; i++) {
      if (b[i].error) {
        if (!tolerable(b[i].error, R_TASK)) BAD("burst csum %d (gen %s xform %s csum %s): %s: %.300s", i, wname(w[i][0]), wname(w[i][1]), wname(w[i][2]), rd_err_name(b[i].error), (const char *)b[i].data);
        else { n_tolerated++; note("TOL", "burst csum %d: %s: %.200s", i, rd_err_name(b[i].error), (const char *)b[i].data); }
      } else {
        uint64_t v[2];
        memcpy(v, b[i].data, 16);
        if (v[1] != n[i] || v[0] != expect_hash(seed[i], key[i], n[i])) BAD("burst csum %d wrong", i);
      }
      rd_buf_release(&b[i]);
    }
  }
  for (int i = 0; i < K; i++) {
    if (rnd() % 3 == 0) {
      char what[96];
      snprintf(what, sizeof what, "burst xform %d (gen %s xform %s)", i, wname(w[i][0]), wname(w[i][1]));
      check_big(x[i], seed[i], key[i], n[i], what, R_TASK);
    }
    rd_ref_release(x[i]);
    rd_ref_release(c[i]);
  }
}

/* a borrowed ref passed on by a task to a task on another node */
static void op_bpass(void) {
  uint64_t seed = (uint64_t)rnd() * 7 + 9, n = big_size();
  rd_task_opts o;
  rd_ref src;
  int ws = pick_node(), w1 = pick_node();
  uint64_t w2 = (uint64_t)pick_node();
  if (w2 == 3 || strict) w2 = 0;
  int from_task = rnd() % 2;
  if (from_task) {
    rd_task_opts_init(&o); place(&o, ws);
    if (rd_submit(gen, RD_ARGS(rd_arg_bytes(&seed, 8), rd_arg_bytes(&n, 8)), &o, &src)) { BAD("bpass submit gen"); return; }
  } else {
    void *p;
    if (rd_put_begin(n, &p, &src)) { BAD("bpass put"); return; }
    fill(seed, 0, p, n);
    if (rd_put_seal(src)) { BAD("bpass seal"); return; }
  }
  rd_task_opts_init(&o); place(&o, w1);
  rd_ref r;
  if (rd_submit(bpass, RD_ARGS(rd_arg_borrow(src), rd_arg_bytes(&w2, 8)), &o, &r)) { BAD("submit bpass"); return; }
  if (rnd() % 2) { rd_ref_release(src); src.id = 0; }
  char what[128];
  snprintf(what, sizeof what, "bpass(src %s on %s, pass on %s, bcsum on %s)", from_task ? "gen" : "put", from_task ? wname(ws) : "driver",
           wname(w1), wname((int)w2));
  check_sum(r, seed, 0, n, what, R_NO_LINEAGE);
  rd_ref_release(r);
  if (src.id) rd_ref_release(src);
}

/* refs returned by a task on X (its own put, and a child's result on Y); sometimes its worker is killed after */
static void op_refs(void) {
  uint64_t seed = (uint64_t)rnd() * 23 + 5, n = big_size();
  int wx = pick_node();
  uint64_t wy = (uint64_t)pick_node();
  if (wy == 3 || strict) wy = 0;
  rd_task_opts o;
  rd_task_opts_init(&o);
  place(&o, wx);
  rd_ref r;
  if (rd_submit(mkrefs, RD_ARGS(rd_arg_bytes(&seed, 8), rd_arg_bytes(&n, 8), rd_arg_bytes(&wy, 8)), &o, &r)) { BAD("submit mkrefs"); return; }
  char what[160];
  int killit = rnd() % 2;
  snprintf(what, sizeof what, "mkrefs on %s (child gen on %s, n %llu%s)", wname(wx), wname((int)wy), (unsigned long long)n,
           killit ? ", maker killed after" : "");
  rd_buf b;
  int tol;
  int e = get1(r, &b, what, R_TASK, &tol);
  if (e) { if (e != RD_ETIMEDOUT) rd_buf_release(&b); rd_ref_release(r); return; }
  uint64_t pid;
  memcpy(&pid, b.data, 8);
  rd_buf_release(&b);
  if (killit) { kill((pid_t)pid, SIGKILL); usleep(100000); }
  rd_ref in[2];
  size_t k = 0;
  e = rd_get_refs(r, in, 2, &k, 60000);
  if (e || k != 2) { BAD("%s: rd_get_refs %s n %zu", what, rd_err_name(e), k); rd_ref_release(r); return; }
  rd_ref_release(r);
  if (rnd() % 2) {   /* read from a task on another node */
    for (int i = 0; i < 2; i++) {
      rd_task_opts_init(&o);
      int wz = pick_node();
      place(&o, wz);
      rd_ref c;
      if (rd_submit(csum, RD_ARGS(rd_arg_ref(in[i])), &o, &c)) { BAD("submit csum of returned ref"); continue; }
      char w2[200];
      snprintf(w2, sizeof w2, "%s: csum of returned ref %d on %s", what, i, wname(wz));
      check_sum(c, seed + (uint64_t)i, 0, n, w2, R_NO_LINEAGE);
      rd_ref_release(c);
    }
  }
  for (int i = 0; i < 2; i++) {
    char w2[200];
    snprintf(w2, sizeof w2, "%s: returned ref %d (%s)", what, i, i ? "child's result" : "its put");
    check_big(in[i], seed + (uint64_t)i, 0, n, w2, R_NO_LINEAGE);
    rd_ref_release(in[i]);
  }
}

/* cancel tasks (nested) on X, with or without force */
static void op_cancel(void) {
  rd_task_opts o;
  rd_task_opts_init(&o);
  int w = pick_node();
  place(&o, w);
  uint64_t ms = 300 + (uint64_t)(rnd() % 700), depth = (uint64_t)(rnd() % 3);
  rd_ref r;
  if (rd_submit(csleep, RD_ARGS(rd_arg_bytes(&ms, 8), rd_arg_bytes(&depth, 8)), &o, &r)) { BAD("submit csleep"); return; }
  usleep((useconds_t)(rnd() % 400) * 1000);
  int force = rnd() % 2;
  int c = rd_cancel(r, force);
  if (c != 0 && c != RD_ENOENT) BAD("rd_cancel(force %d) on %s: %s", force, wname(w), rd_err_name(c));
  rd_buf b;
  double t0 = now();
  int e = rd_get(&r, 1, &b, 90000);
  double dt = now() - t0;
  if (e == RD_ETIMEDOUT) note("HANG", "rd_get(cancelled csleep on %s, force %d, depth %llu)", wname(w), force, (unsigned long long)depth);
  else {
    if (e != 0 && e != RD_ECANCELED && !tolerable(e, R_TASK)) BAD("cancelled csleep on %s (force %d, depth %llu): %s: %.300s", wname(w), force, (unsigned long long)depth, rd_err_name(e), (const char *)b.data);
    if (e == RD_ECANCELED && dt > 5) note("SLOW", "cancelled get took %.1f s", dt);
    rd_buf_release(&b);
  }
  rd_ref_release(r);
}

/* a placement group of 2 SPREAD bundles; a gen in each bundle; removed */
static void op_pg(void) {
  rd_bundle bs[2];
  memset(bs, 0, sizeof bs);
  bs[0].num_cpus = bs[1].num_cpus = 0.5;
  rd_pg pg;
  int e = rd_pg_create(bs, 2, rnd() % 2 ? RD_PG_SPREAD : RD_PG_PACK, NULL, &pg);
  if (e) { BAD("rd_pg_create: %s", rd_err_name(e)); return; }
  double t0 = now();
  e = rd_pg_wait(pg, 60000);
  if (e) {
    if (e == RD_ETIMEDOUT) note("HANG", "rd_pg_wait 60 s");
    else BAD("rd_pg_wait: %s", rd_err_name(e));
    if (rd_pg_remove(pg)) {}
    return;
  }
  if (now() - t0 > 10) note("SLOW", "rd_pg_wait %.1f s", now() - t0);
  rd_ref r[2];
  uint64_t seed[2], n = big_size();
  for (int i = 0; i < 2; i++) {
    rd_task_opts o;
    rd_task_opts_init(&o);
    o.num_cpus = 0.5;
    o.placement_group = pg;
    o.bundle_index = i;
    seed[i] = (uint64_t)rnd() * 29 + (uint64_t)i;
    if (rd_submit(gen, RD_ARGS(rd_arg_bytes(&seed[i], 8), rd_arg_bytes(&n, 8)), &o, &r[i])) { BAD("submit in pg"); r[i].id = 0; }
  }
  for (int i = 0; i < 2; i++) {
    if (!r[i].id) continue;
    char what[64];
    snprintf(what, sizeof what, "gen in pg bundle %d", i);
    check_big(r[i], seed[i], 0, n, what, R_TASK);
    rd_ref_release(r[i]);
  }
  e = rd_pg_remove(pg);
  if (e) BAD("rd_pg_remove: %s", rd_err_name(e));
}

/* The actors, one with soft affinity to b and one to c, that make the held
 * results of op_hold's third kind: they restart without limit and their
 * calls may run again, so what they made is made again on their new
 * process when their node dies.  Made on first use; 0, or the error. */
static rd_actor keeper[2];
static int keeper_made[2];
static pthread_mutex_t keeper_mu = PTHREAD_MUTEX_INITIALIZER;

static int keeper_get(int k, uint32_t node, rd_actor *out) {
  int e = 0;
  pthread_mutex_lock(&keeper_mu);
  if (!keeper_made[k]) {
    rd_actor_opts ao;
    rd_actor_opts_init(&ao);
    ao.strategy = RD_STRATEGY_NODE_AFFINITY;
    ao.node = node;
    ao.soft = 1;
    ao.max_restarts = -1;
    ao.max_task_retries = -1;
    uint64_t base = 7;
    e = rd_actor_create(Acc, RD_ARGS(rd_arg_bytes(&base, 8)), &ao, &keeper[k]);
    keeper_made[k] = e == 0;
  }
  *out = keeper[k];
  pthread_mutex_unlock(&keeper_mu);
  return e;
}

/* lineage holding: gen with soft affinity to b or c, or a chain of two
 * tasks, or an actor call (keeper_get), kept until the end */
static void op_hold(void) {
  if (nheld >= MAXHELD || dead_node) return;
  uint64_t seed = (uint64_t)rnd() * 19 + 4;
  size_t n = (1u << 20) + (size_t)(rnd() % 3) * (1u << 20) + 8;
  uint32_t node = rnd() % 2 ? node_b : node_c;
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.strategy = RD_STRATEGY_NODE_AFFINITY;
  o.node = node;
  o.soft = 1;
  uint64_t nn = n;
  rd_ref g;
  int chain = rnd() % 3;
  uint64_t key = 0;
  if (chain == 2) {
    rd_actor a;
    int e = keeper_get(node == node_b ? 0 : 1, node, &a);
    if (e) { if (!tolerable(e, R_ACTOR)) BAD("keeper actor create: %s", rd_err_name(e)); return; }
    if ((e = rd_actor_call(a, Acc_echo, RD_ARGS(rd_arg_bytes(&seed, 8), rd_arg_bytes(&nn, 8)), NULL, &g))) {
      BAD("call hold echo: %s", rd_err_name(e));
      return;
    }
  } else if (rd_submit(gen, RD_ARGS(rd_arg_bytes(&seed, 8), rd_arg_bytes(&nn, 8)), &o, &g)) {
    BAD("submit hold gen");
    return;
  }
  if (chain == 1) {
    key = mix(seed + 9);
    rd_ref x;
    if (rd_submit(xform, RD_ARGS(rd_arg_ref(g), rd_arg_bytes(&key, 8)), &o, &x)) { BAD("submit hold xform"); return; }
    rd_ref_release(g);
    g = x;
  }
  if (rnd() % 2) {   /* make sure it ran */
    uint8_t rd = 0;
    if (rd_wait(&g, 1, 1, 90000, &rd) != 1) { note("HANG", "rd_wait(hold)"); }
  }
  pthread_mutex_lock(&held_mu);
  if (nheld >= MAXHELD) { pthread_mutex_unlock(&held_mu); rd_ref_release(g); return; }
  held[nheld].r = g;
  held[nheld].seed = seed;
  held[nheld].key = key;
  held[nheld].n = n;
  held[nheld].chain = chain;
  held[nheld].node = node;
  nheld++;
  pthread_mutex_unlock(&held_mu);
}

static void check_held(void) {
  for (int i = 0; i < nheld; i++) {
    char what[128];
    snprintf(what, sizeof what, "held[%d] (%s, soft affinity node %u, %zu B)", i,
             held[i].chain == 2 ? "actor call" : held[i].chain ? "chain" : "gen", held[i].node, held[i].n);
    check_big(held[i].r, held[i].seed, held[i].key, held[i].n, what, R_TASK);
    rd_ref_release(held[i].r);
  }
  INFO("checked %d held results", nheld);
  nheld = 0;
}

/* gen tasks of all sizes on several nodes, their refs added to a
 * completion queue and dropped at once; every event taken once, and
 * its ref read and checked (a failed one's error is its event's) */
static void op_cq(void) {
  enum { K = 10 };
  rd_cq *cq;
  int e = rd_cq_create(&cq);
  if (e) { BAD("rd_cq_create: %s", rd_err_name(e)); return; }
  uint64_t seed[K], n[K];
  int w[K], added = 0;
  for (int i = 0; i < K; i++) {
    seed[i] = (uint64_t)rnd() * 31 + (uint64_t)i;
    n[i] = i % 2 ? big_size() : 8 + (uint64_t)(rnd() % 200);
    rd_task_opts o;
    rd_task_opts_init(&o);
    w[i] = pick_node();
    place(&o, w[i]);
    rd_ref r;
    if ((e = rd_submit(gen, RD_ARGS(rd_arg_bytes(&seed[i], 8), rd_arg_bytes(&n[i], 8)), &o, &r))) {
      BAD("cq: submit gen: %s", rd_err_name(e));
      continue;
    }
    if ((e = rd_cq_add(cq, r, (uint64_t)i))) BAD("rd_cq_add: %s", rd_err_name(e));
    else added++;
    rd_ref_release(r);   /* the add holds its own reference */
  }
  uint8_t seen[K] = {0};
  int got = 0;
  double t0 = now();
  while (got < added) {
    rd_cq_event ev[4];
    int k = rd_cq_take(cq, ev, 4, 1000);
    if (k < 0) {
      BAD("rd_cq_take after %d of %d events: %s", got, added, rd_err_name(k));
      break;
    }
    if (k == 0 && now() - t0 > 90) {
      note("HANG", "rd_cq_take: %d of %d events after 90 s (%zu in the queue)", got, added, rd_cq_size(cq));
      break;
    }
    for (int j = 0; j < k; j++) {
      uint64_t t = ev[j].tag;
      if (t >= K || seen[t]) {
        BAD("rd_cq_take: tag %llu %s", (unsigned long long)t, t >= K ? "never added" : "taken twice");
      } else {
        seen[t] = 1;
        char what[96];
        snprintf(what, sizeof(what), "cq gen %llu on %s, n %llu", (unsigned long long)t, wname(w[t]), (unsigned long long)n[t]);
        rd_buf b;
        int tol;
        int g = get1(ev[j].ref, &b, what, R_TASK, &tol);
        /* a failure is final; a value may be lost since (its node died), which get1 judged */
        if (ev[j].status && g != ev[j].status && g != RD_ETIMEDOUT)
          BAD("%s: the event said %s, rd_get %s", what, rd_err_name(ev[j].status), rd_err_name(g));
        if (!g) {
          if (b.size != n[t]) BAD("%s: size %zu", what, b.size);
          else if (check_bytes(b.data, b.size, seed[t], 0) >= 0) BAD("%s: content", what);
        }
        if (g != RD_ETIMEDOUT) rd_buf_release(&b);
      }
      rd_ref_release(ev[j].ref);
      got++;
    }
  }
  if (got == added && rd_cq_size(cq) != 0) BAD("cq: %zu left in the queue after every event was taken", rd_cq_size(cq));
  rd_cq_destroy(cq);
}

/* a named actor found by its name, its handle passed to a task on another
 * node that calls it; the actor killed for good after */
static void op_handle(void) {
  static int seq;
  char name[48];
  pthread_mutex_lock(&note_mu);
  snprintf(name, sizeof(name), "chaos-acc-%d", ++seq);
  pthread_mutex_unlock(&note_mu);
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  int w = pick_node();
  place_actor(&ao, w);
  ao.name = name;
  ao.max_restarts = rnd() % 2 ? -1 : 0;
  ao.max_task_retries = ao.max_restarts ? 2 : 0;
  uint64_t base = (uint64_t)rnd();
  rd_actor a, found;
  int e = rd_actor_create(Acc, RD_ARGS(rd_arg_bytes(&base, 8)), &ao, &a);
  if (e) { if (!tolerable(e, R_ACTOR)) BAD("named actor create on %s: %s", wname(w), rd_err_name(e)); return; }
  if ((e = rd_actor_get(name, &found))) {   /* no more when a kill ended it already */
    if (!(e == RD_ENOENT && (chaos_workers || dead_node)) && !tolerable(e, R_ACTOR))
      BAD("rd_actor_get(%s): %s", name, rd_err_name(e));
  } else if (found.id != a.id) {
    BAD("rd_actor_get(%s): actor %llu, created %llu", name, (unsigned long long)found.id, (unsigned long long)a.id);
  } else {   /* and rd_actor_list_named names it (the GCS's table) */
    rd_actor_name *v;
    size_t nv;
    if ((e = rd_actor_list_named(0, &v, &nv))) {
      if (!tolerable(e, R_ACTOR)) BAD("rd_actor_list_named: %s", rd_err_name(e));
    } else {
      int listed = 0;
      for (size_t i = 0; i < nv; i++) listed |= !strcmp(v[i].name, name);
      rd_actor_names_free(v);
      if (!listed && !(chaos_workers || dead_node)) BAD("rd_actor_list_named: %s is not listed", name);
    }
  }
  for (int i = 0, k = 1 + rnd() % 3; i < k; i++) {
    uint64_t seed = (uint64_t)rnd() * 37 + 3, n = big_size();
    rd_task_opts o;
    rd_task_opts_init(&o);
    int wt = pick_node();
    place(&o, wt);
    rd_ref r;
    if ((e = rd_submit(via_actor, RD_ARGS(rd_arg_actor(&a), rd_arg_bytes(&seed, 8), rd_arg_bytes(&n, 8)), &o, &r))) {
      BAD("submit via_actor: %s", rd_err_name(e));
      break;
    }
    char what[128];
    snprintf(what, sizeof(what), "via_actor on %s calling %s (actor on %s, mr %d), n %llu", wname(wt), name, wname(w),
             ao.max_restarts, (unsigned long long)n);
    check_big(r, seed, 0, n, what, R_ACTOR);
    rd_ref_release(r);
  }
  e = rd_actor_kill(a, 1);
  if (e && e != RD_EACTOR_DIED && e != RD_ENOENT && !tolerable(e, R_ACTOR)) BAD("named actor kill: %s", rd_err_name(e));
}

/* three objects made on several nodes, handed to a task on another node as
 * an object holding their refs (rd_put_refs) or as borrowed refs in one
 * argument (rd_arg_borrow_refs); it reads each */
static void op_put_refs(void) {
  enum { K = 3 };
  rd_ref in[K];
  uint64_t seed[K], n[K];
  int e;
  for (int i = 0; i < K; i++) {
    seed[i] = (uint64_t)rnd() * 41 + (uint64_t)i;
    n[i] = big_size();
    rd_task_opts o;
    rd_task_opts_init(&o);
    place(&o, pick_node());
    if ((e = rd_submit(gen, RD_ARGS(rd_arg_bytes(&seed[i], 8), rd_arg_bytes(&n[i], 8)), &o, &in[i]))) {
      BAD("put_refs: submit gen: %s", rd_err_name(e));
      for (int j = 0; j < i; j++) rd_ref_release(in[j]);
      return;
    }
  }
  int as_object = rnd() % 2;
  rd_ref holder = {0}, r;
  if (as_object) {
    uint64_t tag = seed[0];
    if ((e = rd_put_refs(&tag, 8, in, K, &holder))) {
      BAD("rd_put_refs: %s", rd_err_name(e));
      for (int i = 0; i < K; i++) rd_ref_release(in[i]);
      return;
    }
  }
  rd_task_opts o;
  rd_task_opts_init(&o);
  int w = pick_node();
  place(&o, w);
  e = as_object ? rd_submit(refsum, RD_ARGS(rd_arg_ref(holder)), &o, &r) : rd_submit(refsum, RD_ARGS(rd_arg_borrow_refs(in, K)), &o, &r);
  if (rnd() % 2) {   /* the holder (or the pending task) keeps them */
    for (int i = 0; i < K; i++) rd_ref_release(in[i]);
    memset(in, 0, sizeof(in));
  }
  if (holder.id) rd_ref_release(holder);
  if (e) {
    BAD("submit refsum: %s", rd_err_name(e));
  } else {
    char what[96];
    snprintf(what, sizeof(what), "refsum on %s of %d refs %s", wname(w), K, as_object ? "in an object" : "borrowed");
    rd_buf b;
    int tol;
    int g = get1(r, &b, what, as_object ? R_TASK : R_NO_LINEAGE, &tol);
    if (!g) {
      uint64_t v[2 * K];
      if (b.size != sizeof(v)) {
        BAD("%s: %zu bytes", what, b.size);
      } else {
        memcpy(v, b.data, sizeof(v));
        for (int i = 0; i < K; i++)
          if (v[2 * i + 1] != n[i] || v[2 * i] != expect_hash(seed[i], 0, n[i])) BAD("%s: ref %d wrong", what, i);
      }
    }
    if (g != RD_ETIMEDOUT) rd_buf_release(&b);
    rd_ref_release(r);
  }
  for (int i = 0; i < K; i++)
    if (in[i].id) rd_ref_release(in[i]);
}

/* calls made at once to an actor with concurrency groups, some in its
 * "io" group that nap, some cancelled just after: a cancelled call gives
 * RD_ECANCELED, unless the cancel came after it ended; the rest their bytes */
static void op_conc(void) {
  enum { K = 8 };
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  int w = pick_node();
  place_actor(&ao, w);
  ao.max_concurrency = 3;
  ao.concurrency_groups = "io=2";
  ao.max_restarts = rnd() % 2;
  uint64_t base = (uint64_t)rnd();
  rd_actor a;
  int e = rd_actor_create(Conc, RD_ARGS(rd_arg_bytes(&base, 8)), &ao, &a);
  if (e) { if (!tolerable(e, R_ACTOR)) BAD("Conc create on %s: %s", wname(w), rd_err_name(e)); return; }
  rd_ref r[K];
  uint64_t seed[K], n[K];
  int nap[K], cancelled[K];
  for (int i = 0; i < K; i++) {
    seed[i] = (uint64_t)rnd() * 47 + (uint64_t)i;
    n[i] = i % 3 ? 40 + (uint64_t)(rnd() % 4000) : big_size();
    nap[i] = rnd() % 2;
    cancelled[i] = 0;
    uint64_t ms = (uint64_t)(rnd() % 100);
    e = nap[i] ? rd_actor_call(a, Conc_nap_echo, RD_ARGS(rd_arg_bytes(&seed[i], 8), rd_arg_bytes(&n[i], 8), rd_arg_bytes(&ms, 8)),
                               NULL, &r[i])
               : rd_actor_call(a, Conc_echo, RD_ARGS(rd_arg_bytes(&seed[i], 8), rd_arg_bytes(&n[i], 8)), NULL, &r[i]);
    if (e) {
      BAD("Conc call: %s", rd_err_name(e));
      r[i].id = 0;
      continue;
    }
    if (rnd() % 4 == 0) {
      int c = rd_cancel(r[i], 0);
      if (c == 0) cancelled[i] = 1;
      else if (c != RD_ENOENT) BAD("rd_cancel of a Conc call: %s", rd_err_name(c));
    }
  }
  for (int i = 0; i < K; i++) {
    if (!r[i].id) continue;
    char what[128];
    snprintf(what, sizeof(what), "Conc(%s, mr %d) %s %llu%s", wname(w), ao.max_restarts, nap[i] ? "nap_echo" : "echo",
             (unsigned long long)n[i], cancelled[i] ? " cancelled" : "");
    if (cancelled[i]) {
      rd_buf b;
      int g = rd_get(&r[i], 1, &b, 90000);
      if (g == RD_ETIMEDOUT) note("HANG", "%s", what);
      else {
        if (g != RD_ECANCELED) BAD("%s: %s, not RD_ECANCELED", what, rd_err_name(g));
        rd_buf_release(&b);
      }
    } else {
      check_big(r[i], seed[i], 0, n[i], what, R_ACTOR);
    }
    rd_ref_release(r[i]);
  }
  e = rd_actor_kill(a, 1);
  if (e && e != RD_EACTOR_DIED && e != RD_ENOENT && !tolerable(e, R_ACTOR)) BAD("Conc kill: %s", rd_err_name(e));
}

/* the GCS's KV store from the driver and from a task on another node:
 * a value put here is read there, and the task's reply read here */
static void op_kv(void) {
  if (getenv("KILL_GCS_AT")) return;   /* its calls fail while the GCS is away */
  static int seq;
  char key[64], reply[64];
  pthread_mutex_lock(&note_mu);
  int id = ++seq;
  pthread_mutex_unlock(&note_mu);
  snprintf(key, sizeof(key), "chaos/%d/in", id);
  snprintf(reply, sizeof(reply), "chaos/%d/out", id);
  size_t n = 1 + (size_t)(rnd() % 65536);
  uint64_t seed = (uint64_t)rnd() * 43 + 1;
  void *v = malloc(n);
  fill(seed, 0, v, n);
  int e = rd_kv_put(key, v, n, 0);
  free(v);
  if (e) { BAD("rd_kv_put %s: %s", key, rd_err_name(e)); return; }
  rd_task_opts o;
  rd_task_opts_init(&o);
  int w = pick_node();
  place(&o, w);
  rd_ref r;
  if ((e = rd_submit(kvecho, RD_ARGS(rd_arg_bytes(key, strlen(key)), rd_arg_bytes(reply, strlen(reply))), &o, &r))) {
    BAD("submit kvecho: %s", rd_err_name(e));
    return;
  }
  char what[96];
  snprintf(what, sizeof(what), "kvecho on %s of %zu B", wname(w), n);
  rd_buf b;
  int tol;
  int g = get1(r, &b, what, R_TASK, &tol);
  uint64_t want[2] = {expect_hash(seed, 0, n), n};
  if (!g) {
    if (b.size != sizeof(want) || memcmp(b.data, want, sizeof(want))) BAD("%s: wrong hash", what);
    void *got;
    size_t gn;
    if ((e = rd_kv_get(reply, &got, &gn))) BAD("rd_kv_get %s after the task: %s", reply, rd_err_name(e));
    else {
      if (gn != sizeof(want) || memcmp(got, want, sizeof(want))) BAD("%s: the reply key differs", what);
      free(got);
    }
  }
  if (g != RD_ETIMEDOUT) rd_buf_release(&b);
  rd_ref_release(r);
  /* a retried kvecho may have put the reply before its worker died: gone either way */
  if ((e = rd_kv_del(key)) != 0) BAD("rd_kv_del %s: %s", key, rd_err_name(e));
  if ((e = rd_kv_del(reply)) != 0 && e != RD_ENOENT) BAD("rd_kv_del %s: %s", reply, rd_err_name(e));
}

/* ------------------------------------------------------------ chaos */
static volatile int chaos_stop;
static long chaos_kills;
static const char *chaos_nodes = "abc";
static int chaos_ms;
static void *chaos_thread(void *arg) {
  (void)arg;
  int np[3];
  const char *ips[3] = {"127.0.0.1", "127.0.0.2", "127.0.0.3"};
  for (int i = 0; i < 3; i++) np[i] = strchr(chaos_nodes, 'a' + i) ? node_pid(ips[i]) : -1;
  while (!chaos_stop) {
    usleep((useconds_t)chaos_ms * 1000);
    int pids[512], n = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    while ((e = readdir(d))) {
      int pid = atoi(e->d_name);
      if (pid <= 0) continue;
      char path[64], buf[512];
      snprintf(path, sizeof path, "/proc/%d/stat", pid);
      FILE *f = fopen(path, "r");
      if (!f) continue;
      size_t k = fread(buf, 1, sizeof buf - 1, f);
      fclose(f);
      buf[k] = 0;
      char *p = strrchr(buf, ')');
      if (!p) continue;
      char st;
      int pp;
      if (sscanf(p + 2, "%c %d", &st, &pp) != 2 || st == 'Z') continue;
      for (int i = 0; i < 3; i++)
        if (np[i] > 0 && pp == np[i] && n < 512) pids[n++] = pid;
    }
    closedir(d);
    if (n) {
      int v = pids[rnd() % n];
      kill(v, SIGKILL);
      chaos_kills++;
    }
  }
  return NULL;
}
/* arg: when to stop it, in s (STOP_AT, default half the run) */
static void *node_stopper(void *arg) {
  double at = *(const double *)arg, dur = getenv("STOP_FOR") ? atof(getenv("STOP_FOR")) : 4;
  int which = getenv("STOP_NODE")[0];
  while (!chaos_stop && el() < at) usleep(20000);
  if (chaos_stop) return NULL;
  int pid = node_pid(which == 'b' ? "127.0.0.2" : "127.0.0.3");
  dead_node = which;   /* errors tolerated from now on */
  kill(pid, SIGSTOP);
  note("INFO", "stopped node %c (pid %d) for %.1f s", which, pid, dur);
  usleep((useconds_t)(dur * 1e6));
  kill(pid, SIGCONT);
  note("INFO", "continued node %c", which);
  return NULL;
}
static double kill_at;
static int kill_which;
static void *node_killer(void *arg) {
  (void)arg;
  while (!chaos_stop && el() < kill_at) usleep(20000);
  if (chaos_stop) return NULL;
  int pid = node_pid(kill_which == 'a' ? "127.0.0.1" : kill_which == 'b' ? "127.0.0.2" : "127.0.0.3");
  if (pid <= 0) { note("BAD", "no pid for node %c", kill_which); return NULL; }
  dead_node = kill_which;
  kill(pid, SIGKILL);
  note("INFO", "killed node %c (pid %d)", kill_which, pid);
  if (getenv("REJOIN_AFTER")) {
    double at = el() + atof(getenv("REJOIN_AFTER"));
    while (!chaos_stop && el() < at) usleep(20000);
    if (chaos_stop) return NULL;
    const char *bin = getenv("RD_BIN"), *addr = getenv("RAYDIST_ADDRESS"), *tmp = getenv("RAYDIST_TMPDIR");
    if (!bin || !addr) { note("BAD", "REJOIN_AFTER needs RD_BIN and RAYDIST_ADDRESS"); return NULL; }
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' start --address %s --node-ip %s --num-cpus 2 --resources %s > '%s/rejoin.out' 2>&1", bin,
             addr, kill_which == 'b' ? "127.0.0.2" : "127.0.0.3", kill_which == 'b' ? "only_b=1,pool=1" : "only_c=1,pool=1",
             tmp ? tmp : "/tmp");
    int rc = system(cmd);
    note("INFO", "restarted node %c: rc %d", kill_which, rc);
    if (rc == 0) rejoined = 1;
  }
  return NULL;
}

static void *gcs_killer(void *arg) {
  (void)arg;
  double at = atof(getenv("KILL_GCS_AT"));
  int times = getenv("KILL_GCS_TIMES") ? atoi(getenv("KILL_GCS_TIMES")) : 1;
  for (int t = 0; t < times; t++) {
    while (!chaos_stop && el() < at) usleep(20000);
    if (chaos_stop) return NULL;
    char path[512];
    session_path(path, sizeof(path), "127.0.0.1", "gcs.pid");
    FILE *f = fopen(path, "r");
    int pid = -1;
    if (f) { if (fscanf(f, "%d", &pid) != 1) pid = -1; fclose(f); }
    if (pid > 0) kill(pid, SIGKILL);
    note("INFO", "killed the GCS server (pid %d)", pid);
    at += 6;
  }
  return NULL;
}
static const char *names[] = {"small", "pipeline", "put_pass", "nested", "multi", "wait", "fail", "stream", "actor", "hold",
                               "burst", "bpass", "refs", "cancel", "pg", "cq", "handle", "put_refs", "kv", "conc"};
#define NOPS (int)(sizeof(names) / sizeof(names[0]))
static struct targ { int id; unsigned seed; double secs; long count[32]; } targ[16];
static void *worker_loop(void *arg) {
  struct targ *t = arg;
  tid = t->id;
  rs = t->seed;
  while (el() < t->secs) {
    int op = rnd() % NOPS;
    if (!ops_ok[op]) continue;
    t->count[op]++;
    double t0 = now();
    switch (op) {
      case 0: op_small_batch(); break;
      case 1: op_big_pipeline(); break;
      case 2: op_put_pass(); break;
      case 3: op_nested(); break;
      case 4: op_multi(); break;
      case 5: op_wait(); break;
      case 6: op_fail(); break;
      case 7: op_stream(); break;
      case 8: op_actor(); break;
      case 9: op_hold(); break;
      case 10: op_burst(); break;
      case 11: op_bpass(); break;
      case 12: op_refs(); break;
      case 13: op_cancel(); break;
      case 14: op_pg(); break;
      case 15: op_cq(); break;
      case 16: op_handle(); break;
      case 17: op_put_refs(); break;
      case 18: op_kv(); break;
      case 19: op_conc(); break;
    }
    double dt = now() - t0;
    if (getenv("VERBOSE") || dt > 10) INFO("op %s took %.2f s", names[op], dt);
  }
  return NULL;
}

int main(int argc, char **argv) {
  int r = rd_init(NULL);
  if (r) { fprintf(stderr, "rd_init: %s\n", rd_err_name(r)); return 1; }
  if (rd_is_worker()) return 0;
  setvbuf(stdout, NULL, _IOLBF, 0);
  double secs = argc > 1 ? atof(argv[1]) : 30;
  unsigned seed = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : (unsigned)time(NULL);
  rs = seed;
  printf("seed %u secs %.0f\n", seed, secs);
  t_start = now();
  rd_node_info ni;
  for (int i = 0; i < 100; i++) {
    if (rd_node_info_get(&ni) == 0 && ni.cluster_nodes == 3) break;
    usleep(50000);
  }
  node_a = ni.node_index;
  {
    rd_task_opts o;
    rd_ref w[2];
    rd_task_opts_init(&o); o.resources = "only_b=1";
    if (rd_submit(where, RD_NO_ARGS, &o, &w[0])) return 1;
    rd_task_opts_init(&o); o.resources = "only_c=1";
    if (rd_submit(where, RD_NO_ARGS, &o, &w[1])) return 1;
    rd_buf b[2];
    if (rd_get(w, 2, b, 60000)) { fprintf(stderr, "where failed\n"); return 1; }
    memcpy(&node_b, b[0].data, 4);
    memcpy(&node_c, b[1].data, 4);
    rd_buf_release(&b[0]); rd_buf_release(&b[1]);
    rd_ref_release(w[0]); rd_ref_release(w[1]);
  }
  printf("nodes: a %u b %u c %u\n", node_a, node_b, node_c);
  const char *ops_env = getenv("OPS");
  for (int i = 0; i < NOPS; i++) ops_ok[i] = ops_env ? 0 : 1;
  if (ops_env) for (const char *p = ops_env; *p;) { ops_ok[atoi(p) & 31] = 1; while (*p && *p != ',') p++; if (*p) p++; }
  pthread_t ct, kt;
  int have_ct = 0, have_kt = 0;
  strict = getenv("STRICT") != NULL;
  if (getenv("CHAOS_MS")) {
    chaos_ms = atoi(getenv("CHAOS_MS"));
    if (getenv("CHAOS_NODES")) chaos_nodes = getenv("CHAOS_NODES");
    chaos_workers = 1;
    pthread_create(&ct, NULL, chaos_thread, NULL);
    have_ct = 1;
  }
  if (getenv("KILL_GCS_AT")) {
    pthread_t gt;
    pthread_create(&gt, NULL, gcs_killer, NULL);
    pthread_detach(gt);
  }
  if (getenv("STOP_NODE")) {
    static double stop_at;   /* (STOP_AT unset was atof(NULL): the driver crashed at start) */
    stop_at = getenv("STOP_AT") ? atof(getenv("STOP_AT")) : secs / 2;
    pthread_t st;
    pthread_create(&st, NULL, node_stopper, &stop_at);
    pthread_detach(st);
  }
  if (getenv("KILL_NODE")) {
    kill_which = getenv("KILL_NODE")[0];
    kill_at = getenv("KILL_AT") ? atof(getenv("KILL_AT")) : secs / 2;
    pthread_create(&kt, NULL, node_killer, NULL);
    have_kt = 1;
  }
  int nthreads = getenv("THREADS") ? atoi(getenv("THREADS")) : 1;
  if (nthreads < 1 || nthreads > 16) { fprintf(stderr, "chaos: THREADS is 1..16\n"); return 2; }
  pthread_t th[16];
  for (int i = 0; i < nthreads; i++) { targ[i].id = i; targ[i].seed = seed * 131 + (unsigned)i; targ[i].secs = secs; pthread_create(&th[i], NULL, worker_loop, &targ[i]); }
  for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
  long count[32] = {0};
  for (int i = 0; i < nthreads; i++) for (int k = 0; k < NOPS; k++) count[k] += targ[i].count[k];
  if (have_kt) { chaos_stop = 1; pthread_join(kt, NULL); }
  check_held();
  chaos_stop = 1;
  if (have_ct) pthread_join(ct, NULL);
  printf("ops:");
  for (int i = 0; i < NOPS; i++) printf(" %s=%ld", names[i], count[i]);
  printf("\nchaos kills %ld, tolerated errors %ld, hangs %d, bad %d\n", chaos_kills, n_tolerated, hangs, bad);
  double t0 = now();
  rd_shutdown();
  printf("shutdown %.2f s\n", now() - t0);
  return bad || hangs ? 3 : 0;
}
