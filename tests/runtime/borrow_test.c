/* tests/runtime/borrow_test.c - borrowed refs (rd_arg_borrow, rd_call_arg_ref)
 * through the public API, in real worker processes: a task given a ref
 * itself starts before the object is ready, resolves it through the process
 * it came from (small values, store objects, failures, results still
 * pending), passes it on, and gets a clear error when that process is gone.
 * `borrow_test NAME` runs one case; the binary is re-executed as workers. */
#include <raydist.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../check.h"
#include "embedded.h"

static unsigned long fnv(const void *data, size_t n) {
  unsigned long s = 1469598103934665603ul;
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++) s = (s ^ p[i]) * 1099511628211ul;
  return s ^ n;
}

/* ------------------------------------------------------ remote functions */

/* Sleeps args[0] ms, returns args[1]. */
RD_REMOTE(slow_value) {
  long ms = arg_long(call, 0), v = arg_long(call, 1);
  usleep((useconds_t)(ms * 1000));
  return rd_return_bytes(call, 0, &v, sizeof(v));
}

RD_REMOTE(fails) { return rd_call_fail(call, "deliberate failure %d", 7); }

/* Every argument is a borrowed ref.  Returns, per argument: whether it was
 * ready when the task started (rd_wait with a zero timeout), then the error
 * of rd_get and the FNV hash of its bytes (or of its error message). */
typedef struct got {
  double started;   /* CLOCK_MONOTONIC when the task began (one clock for every process) */
  long ready_at_start;
  long err;
  unsigned long hash;
  size_t size;
  char msg[200];
} got;

RD_REMOTE(inspect) {
  double started = now_s();
  size_t n = rd_call_nargs(call);
  got g[8];
  if (n > 8) return rd_call_fail(call, "at most 8 arguments");
  memset(g, 0, sizeof(g));
  for (size_t i = 0; i < n; i++) g[i].started = started;
  rd_ref refs[8];
  for (size_t i = 0; i < n; i++)
    if (rd_call_arg_ref(call, i, &refs[i]) != 0) return rd_call_fail(call, "rd_call_arg_ref(%zu)", i);
  uint8_t ready[8];
  rd_wait(refs, n, n, 0, ready);
  for (size_t i = 0; i < n; i++) {
    g[i].ready_at_start = ready[i];
    rd_buf b;
    g[i].err = rd_get(&refs[i], 1, &b, 30000);
    if (g[i].err != RD_ETIMEDOUT) {
      g[i].hash = fnv(b.data, b.size);
      g[i].size = b.size;
      if (g[i].err) snprintf(g[i].msg, sizeof(g[i].msg), "%.*s", (int)b.size, (const char *)b.data);
      rd_buf_release(&b);
    }
    rd_ref_release(refs[i]);
  }
  return rd_return_bytes(call, 0, g, n * sizeof(got));
}

/* Misuse inside a task (arguments: a borrowed ref, a value, a list of three
 * borrowed refs): rd_arg on a borrowed argument and on a list,
 * rd_call_arg_ref on a value, on a list and out of range, rd_call_arg_refs
 * on a single ref and with too little room, rd_arg_copy on a borrowed ref,
 * out of range and with the wrong size.  Returns the codes, then the list's
 * length, then rd_arg_copy's code and value with the right size. */
RD_REMOTE(misuse) {
  long codes[13];
  rd_buf b;
  rd_ref r, rs[3];
  size_t n = 0;
  codes[0] = rd_arg(call, 0, &b);
  codes[1] = rd_call_arg_ref(call, 1, &r);
  codes[2] = rd_call_arg_ref(call, 9, &r);
  codes[3] = rd_arg(call, 2, &b);
  codes[4] = rd_call_arg_ref(call, 2, &r);
  codes[5] = rd_call_arg_refs(call, 0, NULL, 0, &n);
  codes[6] = rd_call_arg_refs(call, 2, rs, 2, &n);
  codes[7] = (long)n;
  long v = 0;
  char small[4];
  codes[8] = rd_arg_copy(call, 0, &v, sizeof(v));
  codes[9] = rd_arg_copy(call, 9, &v, sizeof(v));
  codes[10] = rd_arg_copy(call, 1, small, sizeof(small));
  codes[11] = rd_arg_copy(call, 1, &v, sizeof(v));
  codes[12] = v;
  return rd_return_bytes(call, 0, codes, sizeof(codes));
}

/* Argument 0 is a list of borrowed refs to longs, argument 1 the number of
 * them to skip at the end (read separately, as bytes).  Returns {count,
 * sum of the longs, FNV hash of the rest, seconds from submission to start}. */
RD_REMOTE(sum_list) {
  double started = now_s();
  size_t n = 0;
  if (rd_call_arg_refs(call, 0, NULL, 0, &n) != 0) return rd_call_fail(call, "not a list");
  long skip = arg_long(call, 1);
  rd_ref *refs = malloc((n ? n : 1) * sizeof(*refs));
  rd_buf *bufs = malloc((n ? n : 1) * sizeof(*bufs));
  if (!refs || !bufs) return rd_call_fail(call, "out of memory");
  size_t got_n = 0;
  int e = rd_call_arg_refs(call, 0, refs, n, &got_n);
  if (e != 0 || got_n != n) return rd_call_fail(call, "rd_call_arg_refs: %s", rd_err_name(e));
  e = rd_get(refs, n, bufs, 30000);
  if (e != 0) return rd_call_fail(call, "rd_get of %zu borrowed refs: %s", n, rd_err_name(e));
  double out[4] = {(double)n, 0, 0, 0};
  long sum = 0;
  unsigned long h = 0;
  for (size_t i = 0; i < n; i++) {
    if (i + (size_t)skip < n) {
      long v;
      memcpy(&v, bufs[i].data, sizeof(v));
      sum += v;
    } else {
      h ^= fnv(bufs[i].data, bufs[i].size);
    }
    rd_buf_release(&bufs[i]);
    rd_ref_release(refs[i]);
  }
  free(refs);
  free(bufs);
  out[1] = (double)sum;
  memcpy(&out[2], &h, sizeof(h));
  out[3] = started;
  return rd_return_bytes(call, 0, out, sizeof(out));
}

/* Argument 0 is borrowed: passes it on to `inspect` borrowed again and to
 * `add_value` by value, and returns {inspect's err, value seen by inspect,
 * add_value's result}. */
RD_REMOTE(add_value) {
  long v = arg_long(call, 0) + 1000;
  return rd_return_bytes(call, 0, &v, sizeof(v));
}

RD_REMOTE(pass_on) {
  rd_ref r;
  if (rd_call_arg_ref(call, 0, &r) != 0) return rd_call_fail(call, "rd_call_arg_ref");
  rd_ref a, b;
  if (rd_submit(inspect, RD_ARGS(rd_arg_borrow(r)), NULL, &a) != 0) return rd_call_fail(call, "submit inspect");
  if (rd_submit(add_value, RD_ARGS(rd_arg_ref(r)), NULL, &b) != 0) return rd_call_fail(call, "submit add_value");
  rd_ref_release(r);   /* the two tasks keep it */
  rd_buf ba, bb;
  int ea = rd_get(&a, 1, &ba, 30000), eb = rd_get(&b, 1, &bb, 30000);
  if (ea || eb) return rd_call_fail(call, "children: %s %s", rd_err_name(ea), rd_err_name(eb));
  got g;
  memcpy(&g, ba.data, sizeof(g));
  long out[3] = {g.err, -1, -1};
  memcpy(&out[2], bb.data, sizeof(long));
  rd_buf_release(&ba);
  rd_buf_release(&bb);
  rd_ref_release(a);
  rd_ref_release(b);
  /* inspect hashed the value's bytes; what value it was is checked by hash */
  out[1] = (long)g.hash;
  return rd_return_bytes(call, 0, out, sizeof(out));
}

/* Asks for borrowed argument 0 (still pending), then dies while the answer
 * is owed. */
RD_REMOTE(ask_then_die) {
  rd_ref r;
  if (rd_call_arg_ref(call, 0, &r) != 0) return rd_call_fail(call, "rd_call_arg_ref");
  rd_wait(&r, 1, 1, 300, NULL);
  _exit(3);
}

/* ------------------------------------------------------------ an actor */

typedef struct acc {
  long total;
  long last_err;
  char last_msg[200];
} acc;

static int acc_init(rd_call *call, void **state) {
  (void)call;
  *state = calloc(1, sizeof(acc));
  return *state ? 0 : RD_ENOMEM;
}

static void acc_fini(void *state) { free(state); }

RD_ACTOR_CLASS(Acc, acc_init, acc_fini)

/* Adds the long behind the borrowed argument 0 (waiting up to 30 s);
 * returns the total, or records the error. */
RD_ACTOR_METHOD(Acc, add) {
  acc *a = state;
  rd_ref r;
  int e = rd_call_arg_ref(call, 0, &r);
  if (e != 0) {   /* the caller was gone before this call ran */
    a->last_err = e;
    snprintf(a->last_msg, sizeof(a->last_msg), "rd_call_arg_ref: %s", rd_err_name(e));
    return rd_return_bytes(call, 0, &a->total, sizeof(a->total));
  }
  rd_buf b;
  a->last_err = rd_get(&r, 1, &b, 30000);
  if (a->last_err == 0 && b.size == sizeof(long)) {
    long v;
    memcpy(&v, b.data, sizeof(v));
    a->total += v;
  } else if (a->last_err != RD_ETIMEDOUT) {
    snprintf(a->last_msg, sizeof(a->last_msg), "%.*s", (int)b.size, (const char *)b.data);
  }
  if (a->last_err != RD_ETIMEDOUT) rd_buf_release(&b);
  rd_ref_release(r);
  return rd_return_bytes(call, 0, &a->total, sizeof(a->total));
}

RD_ACTOR_METHOD(Acc, last) {
  acc *a = state;
  return rd_return_bytes(call, 0, a, sizeof(*a));
}

/* Owns a slow result, lends it to the actor (argument 0), and dies before
 * the result is ready. */
RD_REMOTE(lend_then_die) {
  rd_actor a;
  if (rd_call_arg_actor(call, 0, &a) != 0) return rd_call_fail(call, "actor arg");
  long ms = 5000, v = 1;
  rd_ref slow, r;
  if (rd_submit(slow_value, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms)), rd_arg_bytes(&v, sizeof(v))), NULL, &slow) != 0)
    return rd_call_fail(call, "submit");
  if (rd_actor_call(a, Acc_add, RD_ARGS(rd_arg_borrow(slow)), NULL, &r) != 0) return rd_call_fail(call, "call");
  rd_wait(&r, 1, 1, 700, NULL);   /* the call reaches the actor, which waits for the value */
  _exit(3);
}

/* An actor that keeps the refs lent to it in its state, past the call. */
typedef struct keeper {
  rd_ref refs[8];
  int n;
} keeper;

static int keeper_init(rd_call *call, void **state) {
  (void)call;
  *state = calloc(1, sizeof(keeper));
  return *state ? 0 : RD_ENOMEM;
}

static void keeper_fini(void *state) { free(state); }

RD_ACTOR_CLASS(Keeper, keeper_init, keeper_fini)

/* Keeps every borrowed argument; returns how many it keeps. */
RD_ACTOR_METHOD(Keeper, keep) {
  keeper *k = state;
  for (size_t i = 0; i < rd_call_nargs(call) && k->n < 8; i++)
    if (rd_call_arg_ref(call, i, &k->refs[k->n++]) != 0) return rd_call_fail(call, "rd_call_arg_ref(%zu)", i);
  long n = k->n;
  return rd_return_bytes(call, 0, &n, sizeof(n));
}

/* Reads what it keeps: {error, hash} per ref (30 s for each). */
RD_ACTOR_METHOD(Keeper, read) {
  keeper *k = state;
  unsigned long out[16];
  for (int i = 0; i < k->n; i++) {
    rd_buf b;
    int e = rd_get(&k->refs[i], 1, &b, 30000);
    out[2 * i] = (unsigned long)(long)e;
    out[2 * i + 1] = e == RD_ETIMEDOUT ? 0 : fnv(b.data, b.size);
    if (e != RD_ETIMEDOUT) rd_buf_release(&b);
  }
  return rd_return_bytes(call, 0, out, 2 * (size_t)k->n * sizeof(out[0]));
}

RD_ACTOR_METHOD(Keeper, drop) {
  keeper *k = state;
  for (int i = 0; i < k->n; i++) rd_ref_release(k->refs[i]);
  k->n = 0;
  return rd_return_bytes(call, 0, "", 0);
}

/* Lends borrowed argument 1 on to Keeper actor argument 0 (its keep), waits
 * for that call, and lets go of its own reference. */
RD_ACTOR_METHOD(Keeper, lend) {
  (void)state;
  rd_actor other;
  rd_ref r, out;
  if (rd_call_arg_actor(call, 0, &other) != 0 || rd_call_arg_ref(call, 1, &r) != 0) return rd_call_fail(call, "args");
  if (rd_actor_call(other, Keeper_keep, RD_ARGS(rd_arg_borrow(r)), NULL, &out) != 0) return rd_call_fail(call, "call");
  rd_buf b;
  int e = rd_get(&out, 1, &b, 30000);
  if (e != RD_ETIMEDOUT) rd_buf_release(&b);
  rd_ref_release(out);
  rd_ref_release(r);
  return e ? rd_call_fail(call, "keep: %s", rd_err_name(e)) : rd_return_bytes(call, 0, "", 0);
}

/* ------------------------------------------------------------------ tests */

static void get_or_die(rd_ref r, void *out, size_t size) {
  rd_buf b;
  int e = rd_get(&r, 1, &b, 60000);
  if (e != 0) {
    fprintf(stderr, "get failed: %s: %.*s\n", rd_err_name(e), (int)b.size, (const char *)b.data);
    exit(1);
  }
  CHECK_EQ(b.size, size);
  memcpy(out, b.data, size);
  rd_buf_release(&b);
  rd_ref_release(r);
}

static rd_ref submit_slow(long ms, long v) {
  rd_ref r;
  CHECK_EQ(rd_submit(slow_value, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms)), rd_arg_bytes(&v, sizeof(v))), NULL, &r), 0);
  return r;
}

/* A small put, a store put, a pending result and a 50 KiB put: the task
 * starts before the result is ready and reads all four.  The two puts ready
 * at submission and cheap to describe come with the task; the others are
 * asked for (the result's answer waits until it is made). */
static int t_values(void) {
  init_or_die(4);
  long small = 4242;
  size_t big_n = 3u << 20;
  unsigned char *big = malloc(big_n);
  CHECK(big);
  for (size_t i = 0; i < big_n; i++) big[i] = (unsigned char)(i * 7 + 3);
  size_t mid_n = 50u << 10;
  unsigned char *mid = malloc(mid_n);
  CHECK(mid);
  for (size_t i = 0; i < mid_n; i++) mid[i] = (unsigned char)(i * 13 + 1);
  rd_ref rs, rb, rm, rp = submit_slow(1500, 77);
  CHECK_EQ(rd_put(&small, sizeof(small), &rs), 0);
  CHECK_EQ(rd_put(big, big_n, &rb), 0);
  CHECK_EQ(rd_put(mid, mid_n, &rm), 0);
  double t0 = now_s();
  rd_ref out;
  CHECK_EQ(rd_submit(inspect, RD_ARGS(rd_arg_borrow(rs), rd_arg_borrow(rb), rd_arg_borrow(rp), rd_arg_borrow(rm)), NULL,
                     &out), 0);
  got g[4];
  get_or_die(out, g, sizeof(g));
  double took = now_s() - t0;
  long pv = 77;
  printf("ready at start: %ld %ld %ld %ld; errors %ld %ld %ld %ld; %.2f s\n", g[0].ready_at_start,
         g[1].ready_at_start, g[2].ready_at_start, g[3].ready_at_start, g[0].err, g[1].err, g[2].err, g[3].err, took);
  for (int i = 0; i < 4; i++) CHECK_EQ(g[i].err, 0);
  CHECK_EQ(g[0].ready_at_start, 1);   /* described in the task message */
  CHECK_EQ(g[1].ready_at_start, 1);
  CHECK_EQ(g[3].hash, fnv(mid, mid_n));
  CHECK_EQ(g[3].size, mid_n);
  CHECK_EQ(g[0].hash, fnv(&small, sizeof(small)));
  CHECK_EQ(g[1].hash, fnv(big, big_n));
  CHECK_EQ(g[1].size, big_n);
  CHECK_EQ(g[2].hash, fnv(&pv, sizeof(pv)));
  /* not held back until the result was ready (1.5 s after submission) */
  printf("the task started %.2f s after submission\n", g[0].started - t0);
  CHECK(g[0].started - t0 < 1.0);
  CHECK_EQ(g[2].ready_at_start, 0);
  CHECK(took >= 1.0);
  rd_ref_release(rs);
  rd_ref_release(rb);
  rd_ref_release(rp);
  rd_ref_release(rm);
  free(big);
  free(mid);
  rd_shutdown();
  return 0;
}

/* The driver drops its refs right after submitting: the objects stay until
 * the task has read them; afterwards the store is empty again. */
static int t_released(void) {
  init_or_die(4);
  size_t big_n = 2u << 20;
  unsigned char *big = calloc(1, big_n);
  CHECK(big);
  big[12345] = 9;
  rd_ref rb, rp = submit_slow(800, 5);
  CHECK_EQ(rd_put(big, big_n, &rb), 0);
  rd_ref out;
  CHECK_EQ(rd_submit(inspect, RD_ARGS(rd_arg_borrow(rb), rd_arg_borrow(rp)), NULL, &out), 0);
  rd_ref_release(rb);
  rd_ref_release(rp);
  got g[2];
  get_or_die(out, g, sizeof(g));
  long five = 5;
  CHECK_EQ(g[0].err, 0);
  CHECK_EQ(g[0].hash, fnv(big, big_n));
  CHECK_EQ(g[1].err, 0);
  CHECK_EQ(g[1].hash, fnv(&five, sizeof(five)));
  uint64_t used = store_used_settled();
  printf("store after the task: %llu bytes\n", (unsigned long long)used);
  CHECK_EQ(used, 0);
  free(big);
  rd_shutdown();
  return 0;
}

/* A failed object reaches the borrower as its error and message; misuse is
 * RD_EINVAL, at submit and inside the task. */
static int t_errors(void) {
  init_or_die(4);
  rd_ref rf;
  CHECK_EQ(rd_submit(fails, RD_NO_ARGS, NULL, &rf), 0);
  rd_ref out;
  CHECK_EQ(rd_submit(inspect, RD_ARGS(rd_arg_borrow(rf)), NULL, &out), 0);
  got g;
  get_or_die(out, &g, sizeof(g));
  printf("borrowed failure: %s: %s\n", rd_err_name((int)g.err), g.msg);
  CHECK_EQ(g.err, RD_ETASK);
  CHECK(strstr(g.msg, "deliberate failure 7") != NULL);

  long v = 1;
  rd_ref rv;
  CHECK_EQ(rd_put(&v, sizeof(v), &rv), 0);
  rd_ref three[3] = {rv, rv, rf};
  CHECK_EQ(rd_submit(misuse, RD_ARGS(rd_arg_borrow(rv), rd_arg_bytes(&v, sizeof(v)), rd_arg_borrow_refs(three, 3)),
                     NULL, &out), 0);
  long codes[13];
  get_or_die(out, codes, sizeof(codes));
  for (int i = 0; i < 7; i++) CHECK_EQ(codes[i], RD_EINVAL);
  CHECK_EQ(codes[7], 3);   /* the short call still says how many */
  for (int i = 8; i < 11; i++) CHECK_EQ(codes[i], RD_EINVAL);
  CHECK_EQ(codes[11], 0);
  CHECK_EQ(codes[12], 1);

  /* a ref this process does not hold */
  rd_ref gone = {rv.id + 1000};
  CHECK_EQ(rd_submit(inspect, RD_ARGS(rd_arg_borrow(gone)), NULL, &out), RD_EINVAL);
  rd_ref with_gone[2] = {rv, gone};
  CHECK_EQ(rd_submit(sum_list, RD_ARGS(rd_arg_borrow_refs(with_gone, 2)), NULL, &out), RD_EINVAL);
  CHECK_EQ(rd_submit(sum_list, RD_ARGS(rd_arg_borrow_refs(NULL, 3)), NULL, &out), RD_EINVAL);
  /* a list the task message could not carry is refused before it is read */
  CHECK_EQ(rd_submit(sum_list, RD_ARGS(rd_arg_borrow_refs(with_gone, (size_t)(4 << 20) + 1)), NULL, &out), RD_EINVAL);
  /* constructors keep their arguments for restarts: values only */
  rd_actor a;
  CHECK_EQ(rd_actor_create(Acc, RD_ARGS(rd_arg_borrow(rv)), NULL, &a), RD_EINVAL);
  rd_ref_release(rv);
  rd_ref_release(rf);
  rd_shutdown();
  return 0;
}

/* A borrower passes the ref on, borrowed again and by value, to its own
 * tasks while the object is still pending. */
static int t_chain(void) {
  init_or_die(4);
  rd_ref rp = submit_slow(1000, 31);
  rd_ref out;
  CHECK_EQ(rd_submit(pass_on, RD_ARGS(rd_arg_borrow(rp)), NULL, &out), 0);
  long res[3];
  get_or_die(out, res, sizeof(res));
  long v = 31;
  printf("inner borrower: %s, hash ok %d; by value: %ld\n", rd_err_name((int)res[0]),
         (unsigned long)res[1] == fnv(&v, sizeof(v)), res[2]);
  CHECK_EQ(res[0], 0);
  CHECK_EQ((unsigned long)res[1], fnv(&v, sizeof(v)));
  CHECK_EQ(res[2], 1031);
  rd_ref_release(rp);
  rd_shutdown();
  return 0;
}

/* One task lent 2000 small puts, 5 results still being made and two store
 * objects in one argument: it starts at once and reads them all with one
 * rd_get (the requests for those not described in the task go out together). */
static int t_list(void) {
  init_or_die(8);   /* the five sleeping tasks and the reader run at once */
  enum { NSMALL = 2000, NPEND = 5, NBIG = 2 };
  size_t n = NSMALL + NPEND + NBIG;
  rd_ref *refs = malloc(n * sizeof(*refs));
  CHECK(refs);
  long want = 0;
  for (long i = 0; i < NSMALL; i++) {
    long v = i * 3 + 1;
    want += v;
    CHECK_EQ(rd_put(&v, sizeof(v), &refs[i]), 0);
  }
  for (long i = 0; i < NPEND; i++) {
    refs[NSMALL + i] = submit_slow(600 + 100 * i, 1000 + i);
    want += 1000 + i;
  }
  size_t big_n = 1u << 20;
  unsigned char *big = malloc(big_n);
  CHECK(big);
  unsigned long want_h = 0;
  for (int k = 0; k < NBIG; k++) {
    for (size_t i = 0; i < big_n; i++) big[i] = (unsigned char)(i * 5 + (size_t)k);
    CHECK_EQ(rd_put(big, big_n, &refs[NSMALL + NPEND + k]), 0);
    want_h ^= fnv(big, big_n);
  }
  long skip = NBIG;
  double t0 = now_s();
  rd_ref out;
  CHECK_EQ(rd_submit(sum_list, RD_ARGS(rd_arg_borrow_refs(refs, n), rd_arg_bytes(&skip, sizeof(skip))), NULL, &out), 0);
  for (size_t i = 0; i < n; i++) rd_ref_release(refs[i]);   /* the task holds them */
  double res[4];
  get_or_die(out, res, sizeof(res));
  unsigned long h;
  memcpy(&h, &res[2], sizeof(h));
  printf("%zu borrowed refs: sum %.0f (want %ld), started %.2f s after submission, %.2f s in all\n", n, res[1], want,
         res[3] - t0, now_s() - t0);
  CHECK_EQ((long)res[0], (long)n);
  CHECK_EQ((long)res[1], want);
  CHECK(h == want_h);
  CHECK(res[3] - t0 < 0.5);   /* not held back by the pending five */
  CHECK_EQ(store_used_settled(), 0);   /* the store objects went with the task */
  free(refs);
  free(big);
  rd_shutdown();
  return 0;
}

/* A borrower dies while the driver owes it an answer: the driver forgets the
 * wait with the lease, and answering the others later touches nothing freed
 * (the ASan build checks that). */
static int t_borrower_dies(void) {
  init_or_die(4);
  rd_ref rp = submit_slow(1200, 8);
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.max_retries = 0;
  rd_ref dead[3], alive;
  for (int i = 0; i < 3; i++) CHECK_EQ(rd_submit(ask_then_die, RD_ARGS(rd_arg_borrow(rp)), &o, &dead[i]), 0);
  CHECK_EQ(rd_submit(inspect, RD_ARGS(rd_arg_borrow(rp)), NULL, &alive), 0);
  for (int i = 0; i < 3; i++) {
    rd_buf b;
    int e = rd_get(&dead[i], 1, &b, 30000);
    printf("borrower %d: %s\n", i, rd_err_name(e));
    CHECK_EQ(e, RD_EWORKER_DIED);
    rd_buf_release(&b);
    rd_ref_release(dead[i]);
  }
  got g;
  get_or_die(alive, &g, sizeof(g));
  long eight = 8;
  CHECK_EQ(g.err, 0);
  CHECK_EQ(g.hash, fnv(&eight, sizeof(eight)));
  long v;
  get_or_die(rp, &v, sizeof(v));
  CHECK_EQ(v, 8);
  rd_shutdown();
  return 0;
}

/* Many borrowers of many pending results at once: every answer arrives. */
static int t_many(void) {
  init_or_die(4);
  enum { N = 40 };
  rd_ref vals[N], outs[N];
  for (long i = 0; i < N; i++) vals[i] = submit_slow(5 * (i % 7), i * i);
  for (long i = 0; i < N; i++) {
    /* each borrower gets two: its own value and the last one */
    CHECK_EQ(rd_submit(inspect, RD_ARGS(rd_arg_borrow(vals[i]), rd_arg_borrow(vals[N - 1])), NULL, &outs[i]), 0);
  }
  for (long i = 0; i < N; i++) rd_ref_release(vals[i]);
  for (long i = 0; i < N; i++) {
    got g[2];
    get_or_die(outs[i], g, sizeof(g));
    long want = i * i, last = (long)(N - 1) * (N - 1);
    CHECK_EQ(g[0].err, 0);
    CHECK_EQ(g[1].err, 0);
    CHECK_EQ(g[0].hash, fnv(&want, sizeof(want)));
    CHECK_EQ(g[1].hash, fnv(&last, sizeof(last)));
  }
  rd_shutdown();
  return 0;
}

/* An actor method borrows pending results (calls stay in order, each waits
 * for its own value); then a caller lends it a ref and dies before the value
 * is ready: the actor's rd_get fails clearly instead of waiting forever. */
static int t_actor(void) {
  init_or_die(4);
  rd_actor a;
  CHECK_EQ(rd_actor_create(Acc, RD_NO_ARGS, NULL, &a), 0);
  rd_ref vals[5], outs[5];
  for (long i = 0; i < 5; i++) vals[i] = submit_slow(100 * (5 - i), i + 1);
  for (int i = 0; i < 5; i++) CHECK_EQ(rd_actor_call(a, Acc_add, RD_ARGS(rd_arg_borrow(vals[i])), NULL, &outs[i]), 0);
  long total = 0;
  for (int i = 0; i < 5; i++) {
    get_or_die(outs[i], &total, sizeof(total));
    rd_ref_release(vals[i]);
  }
  printf("actor total: %ld\n", total);
  CHECK_EQ(total, 15);

  rd_task_opts o;
  rd_task_opts_init(&o);
  o.max_retries = 0;
  rd_ref t;
  double t0 = now_s();
  CHECK_EQ(rd_submit(lend_then_die, RD_ARGS(rd_arg_actor(&a)), &o, &t), 0);
  rd_buf b;
  CHECK(rd_get(&t, 1, &b, 30000) != 0);   /* its worker died */
  rd_buf_release(&b);
  rd_ref_release(t);
  acc st;
  rd_ref r;
  CHECK_EQ(rd_actor_call(a, Acc_last, RD_NO_ARGS, NULL, &r), 0);   /* runs after the add above */
  get_or_die(r, &st, sizeof(st));
  printf("after the lender died: %s (%s), %.2f s\n", rd_err_name((int)st.last_err), st.last_msg, now_s() - t0);
  CHECK_EQ(st.last_err, RD_EOBJECT_LOST);
  CHECK(strstr(st.last_msg, "went away") != NULL || strstr(st.last_msg, "rd_call_arg_ref") != NULL);
  CHECK(now_s() - t0 < 4.5);   /* before the slow value would have come */
  CHECK_EQ(st.total, 15);
  rd_shutdown();
  return 0;
}

/* Kept borrows: an actor keeps refs lent to it in its state (a 3 MiB store
 * put, a small put, a result still pending when lent) and reads them in a
 * later call, after the driver has let go of its own refs; a second actor
 * keeps a ref lent on to it by the first, whose call has ended; what they
 * keep is freed when they drop it, or when the actor is killed. */
static int t_kept(void) {
  init_or_die(4);
  size_t n = 3u << 20;
  uint8_t *d = malloc(n);
  CHECK(d);
  for (size_t i = 0; i < n; i++) d[i] = (uint8_t)(i * 7 + 1);
  long small = 99, want = 77;
  rd_ref big, sm, pending, big2, big3;
  CHECK_EQ(rd_put(d, n, &big), 0);
  CHECK_EQ(rd_put(&small, sizeof(small), &sm), 0);
  pending = submit_slow(300, want);
  rd_actor k1, k2;
  CHECK_EQ(rd_actor_create(Keeper, RD_NO_ARGS, NULL, &k1), 0);
  CHECK_EQ(rd_actor_create(Keeper, RD_NO_ARGS, NULL, &k2), 0);
  long kept = 0;
  call_or_die(k1, Keeper_keep, RD_ARGS(rd_arg_borrow(big), rd_arg_borrow(sm), rd_arg_borrow(pending)), &kept,
              sizeof(kept));
  CHECK_EQ(kept, 3);
  rd_ref_release(big);
  rd_ref_release(sm);
  rd_ref_release(pending);
  usleep(300000);   /* deletes would have landed by now */
  CHECK(store_used_now() >= n);
  unsigned long got[6];
  call_or_die(k1, Keeper_read, RD_NO_ARGS, got, sizeof(got));
  printf("kept past the call: errors %ld %ld %ld\n", (long)got[0], (long)got[2], (long)got[4]);
  CHECK_EQ((long)got[0], 0);
  CHECK(got[1] == fnv(d, n));
  CHECK_EQ((long)got[2], 0);
  CHECK(got[3] == fnv(&small, sizeof(small)));
  CHECK_EQ((long)got[4], 0);
  CHECK(got[5] == fnv(&want, sizeof(want)));

  /* lent on: k1 lends to k2 and returns; k2 keeps it */
  for (size_t i = 0; i < n; i++) d[i] = (uint8_t)(i * 13 + 5);
  CHECK_EQ(rd_put(d, n, &big2), 0);
  call_or_die(k1, Keeper_lend, RD_ARGS(rd_arg_actor(&k2), rd_arg_borrow(big2)), NULL, 0);
  rd_ref_release(big2);
  usleep(300000);
  unsigned long got2[2];
  call_or_die(k2, Keeper_read, RD_NO_ARGS, got2, sizeof(got2));
  CHECK_EQ((long)got2[0], 0);
  CHECK(got2[1] == fnv(d, n));
  CHECK(store_used_now() >= 2 * n);

  /* letting go frees them */
  call_or_die(k1, Keeper_drop, RD_NO_ARGS, NULL, 0);
  call_or_die(k2, Keeper_drop, RD_NO_ARGS, NULL, 0);
  uint64_t used = store_used_settled();
  printf("after both dropped them: %llu bytes in the store\n", (unsigned long long)used);
  CHECK_EQ(used, 0);

  /* and so does the keeper's death */
  CHECK_EQ(rd_put(d, n, &big3), 0);
  call_or_die(k1, Keeper_keep, RD_ARGS(rd_arg_borrow(big3)), &kept, sizeof(kept));
  rd_ref_release(big3);
  usleep(300000);
  CHECK(store_used_now() >= n);
  CHECK_EQ(rd_actor_kill(k1, 1), 0);
  used = store_used_settled();
  printf("after the keeper was killed: %llu bytes in the store\n", (unsigned long long)used);
  CHECK_EQ(used, 0);
  free(d);
  rd_shutdown();
  return 0;
}

static const rd_test_case tests[] = {
    {"values", t_values}, {"released", t_released}, {"errors", t_errors},
    {"chain", t_chain},   {"many", t_many},         {"actor", t_actor}, {"list", t_list},
    {"borrower_dies", t_borrower_dies}, {"kept", t_kept},
};

RD_TEST_MAIN(tests)
