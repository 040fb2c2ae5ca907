/* tests/runtime/nested_test.c - refs inside objects (rd_put_refs,
 * rd_get_refs) and refs returned by tasks (rd_return_refs), through the
 * public API in real worker processes: an object keeps the refs it contains
 * alive, a task passed it by value or borrowed takes them, a task hands the
 * objects it made over to its caller, who co-owns them after the worker has
 * gone.  `nested_test NAME` runs one case; the binary is re-executed as
 * workers. */
#include <raydist.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../check.h"
#include "embedded.h"

#define BIG (3u << 20)   /* a store object */

/* A value of `size` bytes derived from `seed`. */
static void fill(uint8_t *p, size_t size, long seed) {
  for (size_t i = 0; i < size; i++) p[i] = (uint8_t)(seed * 31 + i * 7);
}

static int check_fill(const rd_buf *b, size_t size, long seed) {
  if (b->error || b->size != size) return 0;
  const uint8_t *p = b->data;
  for (size_t i = 0; i < size; i += 4093)
    if (p[i] != (uint8_t)(seed * 31 + i * 7)) return 0;
  return size == 0 || p[size - 1] == (uint8_t)(seed * 31 + (size - 1) * 7);
}

/* Reads refs[0..n) as values made by fill(sizes[k], seeds[k]): the number
 * of them that match. */
static long count_good(const rd_ref *refs, size_t n, const size_t *sizes, const long *seeds) {
  long good = 0;
  for (size_t k = 0; k < n; k++) {
    rd_buf b;
    if (rd_get(&refs[k], 1, &b, 30000) == 0) good += check_fill(&b, sizes[k], seeds[k]);
    if (b.error != RD_ETIMEDOUT) rd_buf_release(&b);
  }
  return good;
}

/* The object made of three refs that every case uses: a small put, a 3 MiB
 * put and the result of a task still running for `ms`. */
static const size_t SIZES[3] = {16, BIG, 8};
static const long SEEDS[3] = {1, 2, 3};

/* Sleeps args[0] ms, returns fill(8, args[1]). */
RD_REMOTE(slow_fill) {
  long ms = arg_long(call, 0), seed = arg_long(call, 1);
  usleep((useconds_t)(ms * 1000));
  uint8_t v[8];
  fill(v, sizeof(v), seed);
  return rd_return_bytes(call, 0, v, sizeof(v));
}

static void make_three(rd_ref out[3], long ms) {
  uint8_t small[16], *big = malloc(BIG);
  CHECK(big != NULL);
  fill(small, sizeof(small), 1);
  fill(big, BIG, 2);
  CHECK_EQ(rd_put(small, sizeof(small), &out[0]), 0);
  CHECK_EQ(rd_put(big, BIG, &out[1]), 0);
  long seed = 3;
  CHECK_EQ(rd_submit(slow_fill, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms)), rd_arg_bytes(&seed, sizeof(seed))), NULL,
                     &out[2]),
           0);
  free(big);
}

/* Argument 0: an object passed by value that contains the three refs.
 * Returns {its byte count, refs it contains, refs that read back right}. */
RD_REMOTE(read_value) {
  rd_buf b;
  if (rd_arg(call, 0, &b) != 0) return rd_call_fail(call, "rd_arg");
  size_t n = 0;
  if (rd_call_arg_refs(call, 0, NULL, 0, &n) != 0) return rd_call_fail(call, "rd_call_arg_refs count");
  rd_ref refs[3];
  long out[3] = {(long)b.size, (long)n, 0};
  if (n == 3) {
    if (rd_call_arg_refs(call, 0, refs, 3, &n) != 0) return rd_call_fail(call, "rd_call_arg_refs");
    out[2] = count_good(refs, 3, SIZES, SEEDS);
    for (int k = 0; k < 3; k++) rd_ref_release(refs[k]);
  }
  return rd_return_bytes(call, 0, out, sizeof(out));
}

/* Argument 0: a borrowed ref to an object containing the three refs;
 * argument 1: 1 to read them here, 0 to lend the object on, borrowed, to
 * another borrow_read (which reads them) and return its answer.  Returns
 * {refs it contains, refs that read back right}. */
RD_REMOTE(borrow_read) {
  rd_ref outer;
  if (rd_call_arg_ref(call, 0, &outer) != 0) return rd_call_fail(call, "rd_call_arg_ref");
  long here = arg_long(call, 1), out[2] = {0, 0};
  if (!here) {
    long one = 1;
    rd_ref r;
    rd_buf b;
    if (rd_submit(borrow_read, RD_ARGS(rd_arg_borrow(outer), rd_arg_bytes(&one, sizeof(one))), NULL, &r) != 0)
      return rd_call_fail(call, "submit");
    int e = rd_get(&r, 1, &b, 60000);
    if (e != 0) return rd_call_fail(call, "inner borrow_read: %s", rd_err_name(e));
    memcpy(out, b.data, sizeof(out));
    rd_buf_release(&b);
    rd_ref_release(r);
  } else {
    rd_ref refs[3];
    size_t n = 0;
    int e = rd_get_refs(outer, refs, 3, &n, 30000);
    if (e != 0) return rd_call_fail(call, "rd_get_refs: %s", rd_err_name(e));
    out[0] = (long)n;
    out[1] = count_good(refs, n, SIZES, SEEDS);
    for (size_t k = 0; k < n; k++) rd_ref_release(refs[k]);
  }
  rd_ref_release(outer);
  return rd_return_bytes(call, 0, out, sizeof(out));
}

/* The owner's own use: an object holds what it contains after the driver
 * has dropped its refs, nests, reads back, and frees them all when it goes;
 * misuse is RD_EINVAL. */
static int t_put_get(void) {
  init_or_die(2);
  rd_ref three[3], outer, outer2, plain;
  make_three(three, 300);
  const char hdr[] = "three refs";
  CHECK_EQ(rd_put_refs(hdr, sizeof(hdr), three, 3, &outer), 0);
  for (int k = 0; k < 3; k++) rd_ref_release(three[k]);
  CHECK_EQ(rd_put_refs(NULL, 0, &outer, 1, &outer2), 0);
  rd_ref_release(outer);

  rd_ref got[3], mid;
  size_t n = 99;
  CHECK_EQ(rd_get_refs(outer2, NULL, 0, &n, 10000), 0);
  CHECK_EQ(n, 1);
  CHECK_EQ(rd_get_refs(outer2, &mid, 1, &n, 10000), 0);
  rd_buf b;
  CHECK_EQ(rd_get(&mid, 1, &b, 10000), 0);
  CHECK_EQ(b.size, sizeof(hdr));
  CHECK(memcmp(b.data, hdr, sizeof(hdr)) == 0);
  rd_buf_release(&b);
  CHECK_EQ(rd_get_refs(mid, got, 2, &n, 10000), RD_EINVAL);   /* room for 2 of 3 */
  CHECK_EQ(n, 3);
  CHECK_EQ(rd_get_refs(mid, got, 3, &n, 10000), 0);
  CHECK_EQ(count_good(got, 3, SIZES, SEEDS), 3);
  for (int k = 0; k < 3; k++) rd_ref_release(got[k]);
  rd_ref_release(mid);

  /* misuse */
  long v = 5;
  CHECK_EQ(rd_put(&v, sizeof(v), &plain), 0);
  CHECK_EQ(rd_get_refs(plain, got, 3, &n, 1000), 0);
  CHECK_EQ(n, 0);
  rd_ref dead = plain;
  rd_ref_release(plain);
  CHECK_EQ(rd_put_refs(&v, sizeof(v), &dead, 1, &outer), RD_EINVAL);
  CHECK_EQ(rd_get_refs(dead, got, 3, &n, 1000), RD_EINVAL);
  CHECK_EQ(rd_put_refs(&v, sizeof(v), NULL, 1, &outer), RD_EINVAL);
  CHECK_EQ(rd_get_refs(outer2, got, 3, NULL, 1000), RD_EINVAL);

  /* a chain 300,000 long, each object containing the one before: walked,
   * then freed from its head in one release (without recursion) */
  enum { CHAIN = 300000 };
  rd_ref link, next;
  long v0 = 42;
  CHECK_EQ(rd_put(&v0, sizeof(v0), &link), 0);
  double t0 = now_s();
  for (long k = 1; k < CHAIN; k++) {
    CHECK_EQ(rd_put_refs(&k, sizeof(k), &link, 1, &next), 0);
    rd_ref_release(link);
    link = next;
  }
  double t1 = now_s();
  rd_ref walk = link;
  rd_ref_retain(walk);
  for (int k = 0; k < 5; k++) {
    CHECK_EQ(rd_get_refs(walk, &next, 1, &n, 1000), 0);
    CHECK_EQ(n, 1);
    rd_ref_release(walk);
    walk = next;
  }
  CHECK_EQ(rd_get(&walk, 1, &b, 1000), 0);
  CHECK_EQ(*(const long *)b.data, CHAIN - 6);
  rd_buf_release(&b);
  rd_ref_release(walk);
  rd_ref_release(link);
  printf("a chain of %d nested objects: made in %.2f s, walked and freed in %.3f s\n", CHAIN, t1 - t0, now_s() - t1);

  CHECK(store_used_now() >= BIG);
  rd_ref_release(outer2);   /* the last holder of all of them */
  uint64_t used = store_used_settled();
  printf("after the outer object went: %llu bytes in the store\n", (unsigned long long)used);
  CHECK_EQ(used, 0);
  rd_shutdown();
  return 0;
}

/* A task passed the object by value reads what it contains (the driver
 * dropped its own refs first, and the result is still being made); one
 * lent it borrowed does too, and so does one it lends it on to. */
static int t_arg(void) {
  init_or_die(4);
  rd_ref three[3], outer, r[3];
  make_three(three, 1500);
  const char hdr[] = "0123456789";
  CHECK_EQ(rd_put_refs(hdr, sizeof(hdr), three, 3, &outer), 0);
  for (int k = 0; k < 3; k++) rd_ref_release(three[k]);
  long here = 1, on = 0;
  double t0 = now_s();
  CHECK_EQ(rd_submit(read_value, RD_ARGS(rd_arg_ref(outer)), NULL, &r[0]), 0);
  CHECK_EQ(rd_submit(borrow_read, RD_ARGS(rd_arg_borrow(outer), rd_arg_bytes(&here, sizeof(here))), NULL, &r[1]),
           0);
  CHECK_EQ(rd_submit(borrow_read, RD_ARGS(rd_arg_borrow(outer), rd_arg_bytes(&on, sizeof(on))), NULL, &r[2]), 0);
  rd_ref_release(outer);
  rd_buf b[3];
  int e = rd_get(r, 3, b, 60000);
  if (e != 0)
    for (int k = 0; k < 3; k++)
      if (b[k].error) fprintf(stderr, "task %d: %.*s\n", k, (int)b[k].size, (const char *)b[k].data);
  CHECK_EQ(e, 0);
  long v[3], w[2], x[2];
  memcpy(v, b[0].data, sizeof(v));
  memcpy(w, b[1].data, sizeof(w));
  memcpy(x, b[2].data, sizeof(x));
  printf("by value: %ld bytes, %ld refs, %ld read; borrowed: %ld refs, %ld read; lent on: %ld refs, %ld read "
         "(%.2f s)\n", v[0], v[1], v[2], w[0], w[1], x[0], x[1], now_s() - t0);
  CHECK_EQ(v[0], (long)sizeof(hdr));
  CHECK_EQ(v[1], 3);
  CHECK_EQ(v[2], 3);
  CHECK_EQ(w[0], 3);
  CHECK_EQ(w[1], 3);
  CHECK_EQ(x[0], 3);
  CHECK_EQ(x[1], 3);
  for (int k = 0; k < 3; k++) {
    rd_buf_release(&b[k]);
    rd_ref_release(r[k]);
  }
  CHECK_EQ(store_used_settled(), 0);
  rd_shutdown();
  return 0;
}

/* Makes args[0] puts of 8 bytes (seeds 100..), a 3 MiB put (seed 2), a
 * failed result and a result still being made (seed 3, 1 s), and returns
 * refs to all of them, then the ref it was lent (argument 1, borrowed),
 * inside "made", dropping its own refs first.  With args[2] == 1 it checks
 * misuse instead and returns the codes. */
RD_REMOTE(make_refs) {
  long n = arg_long(call, 0), misuse = arg_long(call, 2);
  if (n < 0 || n > 100000) return rd_call_fail(call, "bad n");
  rd_ref *refs = malloc((size_t)(n + 4) * sizeof(*refs));
  if (!refs) return rd_call_fail(call, "out of memory");
  for (long k = 0; k < n; k++) {
    uint8_t v[8];
    fill(v, sizeof(v), 100 + k);
    if (rd_put(v, sizeof(v), &refs[k]) != 0) return rd_call_fail(call, "rd_put");
  }
  uint8_t *big = malloc(BIG);
  if (!big) return rd_call_fail(call, "out of memory");
  fill(big, BIG, 2);
  int e = rd_put(big, BIG, &refs[n]);
  free(big);
  if (e != 0) return rd_call_fail(call, "rd_put big: %s", rd_err_name(e));
  long ms = 1000, seed = 3;
  if (rd_submit_by_name("fails_now", NULL, 0, NULL, &refs[n + 1]) != 0) return rd_call_fail(call, "submit fails");
  if (rd_submit(slow_fill, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms)), rd_arg_bytes(&seed, sizeof(seed))), NULL,
                &refs[n + 2]) != 0)
    return rd_call_fail(call, "submit slow");
  if (rd_call_arg_ref(call, 1, &refs[n + 3]) != 0) return rd_call_fail(call, "rd_call_arg_ref");
  if (misuse == 1) {
    long codes[5];
    rd_ref nested, dead;
    codes[0] = rd_put_refs(NULL, 0, refs, 1, &nested);
    codes[1] = rd_return_refs(call, 0, "x", 1, &nested, 1);   /* contains refs */
    if (rd_put(&ms, sizeof(ms), &dead) != 0) return rd_call_fail(call, "rd_put");
    rd_ref_release(dead);
    codes[2] = rd_return_refs(call, 0, "x", 1, &dead, 1);     /* not live */
    codes[3] = rd_return_refs(call, 0, "x", 1, refs, 1);
    codes[4] = rd_return_refs(call, 0, "x", 1, refs, 1);      /* set already */
    rd_ref_release(nested);
    for (long k = 0; k < n + 4; k++) rd_ref_release(refs[k]);
    free(refs);
    return rd_return_bytes(call, 1, codes, sizeof(codes));
  }
  e = rd_return_refs(call, 0, "made", 4, refs, (size_t)(n + 4));
  for (long k = 0; k < n + 4; k++) rd_ref_release(refs[k]);
  free(refs);
  return e;
}

RD_REMOTE(fails_now) { return rd_call_fail(call, "deliberate failure"); }

/* Checks what make_refs(n) handed over, after its worker has gone on. */
static void check_made(rd_ref res, long n, rd_ref lent, long lent_seed) {
  rd_buf b;
  CHECK_EQ(rd_get(&res, 1, &b, 60000), 0);
  CHECK_EQ(b.size, 4);
  CHECK(memcmp(b.data, "made", 4) == 0);
  rd_buf_release(&b);
  size_t got_n = 0;
  rd_ref *refs = malloc((size_t)(n + 4) * sizeof(*refs));
  size_t *sizes = malloc((size_t)(n + 4) * sizeof(*sizes));
  long *seeds = malloc((size_t)(n + 4) * sizeof(*seeds));
  CHECK(refs && sizes && seeds);
  CHECK_EQ(rd_get_refs(res, refs, (size_t)n + 4, &got_n, 10000), 0);
  CHECK_EQ(got_n, (size_t)n + 4);
  for (long k = 0; k < n; k++) {
    sizes[k] = 8;
    seeds[k] = 100 + k;
  }
  sizes[n] = BIG;
  seeds[n] = 2;
  CHECK_EQ(count_good(refs, (size_t)n, sizes, seeds), n);
  CHECK_EQ(count_good(&refs[n], 1, &sizes[n], &seeds[n]), 1);
  CHECK_EQ(rd_get(&refs[n + 1], 1, &b, 10000), RD_ETASK);
  CHECK(strstr((const char *)b.data, "deliberate failure") != NULL);
  rd_buf_release(&b);
  size_t s8 = 8;
  long seed3 = 3;
  CHECK_EQ(count_good(&refs[n + 2], 1, &s8, &seed3), 1);
  CHECK_EQ(refs[n + 3].id, lent.id);   /* the caller's own object, one more reference */
  CHECK_EQ(count_good(&refs[n + 3], 1, &s8, &lent_seed), 1);
  for (long k = 0; k < n + 4; k++) rd_ref_release(refs[k]);
  free(refs);
  free(sizes);
  free(seeds);
}

/* Puts the 8-byte value of seed 7 as *lent and submits make_refs(n, lent
 * borrowed, misuse) with opts. */
static void submit_make(long n, long misuse, const rd_task_opts *opts, rd_ref *lent, rd_ref *res) {
  uint8_t v[8];
  fill(v, sizeof(v), 7);
  CHECK_EQ(rd_put(v, sizeof(v), lent), 0);
  CHECK_EQ(rd_submit(make_refs,
                     RD_ARGS(rd_arg_bytes(&n, sizeof(n)), rd_arg_borrow(*lent), rd_arg_bytes(&misuse, sizeof(misuse))),
                     opts, res),
           0);
}

/* A task returns refs to what it made (small and store puts, a failed
 * and a running subtask's results) and to what its caller lent it; the
 * caller co-owns them from then on, reads them, and frees them all with the
 * result.  Misuse in the task is RD_EINVAL / RD_EEXIST. */
static int t_return(void) {
  init_or_die(2);
  long n = 5, seed = 7;
  rd_ref lent, res;
  double t0 = now_s();
  submit_make(n, 0, NULL, &lent, &res);
  rd_buf b;
  CHECK_EQ(rd_get(&res, 1, &b, 60000), 0);
  rd_buf_release(&b);
  printf("task returned %ld refs in %.2f s (one waited for a 1 s subtask)\n", n + 4, now_s() - t0);
  CHECK(now_s() - t0 >= 0.9);
  usleep(300000);   /* its worker has dropped its own refs: what it handed over must stay */
  check_made(res, n, lent, seed);
  CHECK(store_used_now() >= BIG);
  rd_ref_release(res);
  CHECK_EQ(store_used_settled(), 0);   /* the 3 MiB put went with the result */
  CHECK_EQ(count_good(&lent, 1, (size_t[]){8}, &seed), 1);   /* still the driver's */
  rd_ref_release(lent);

  /* misuse in the task */
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.num_returns = 2;
  rd_ref rr[2];
  submit_make(0, 1, &o, &lent, rr);
  CHECK_EQ(rd_get(&rr[1], 1, &b, 60000), 0);
  long codes[5];
  CHECK_EQ(b.size, sizeof(codes));
  memcpy(codes, b.data, sizeof(codes));
  rd_buf_release(&b);
  printf("misuse: %s %s %s %s %s\n", rd_err_name((int)codes[0]), rd_err_name((int)codes[1]),
         rd_err_name((int)codes[2]), rd_err_name((int)codes[3]), rd_err_name((int)codes[4]));
  CHECK_EQ(codes[0], 0);
  CHECK_EQ(codes[1], RD_EINVAL);
  CHECK_EQ(codes[2], RD_EINVAL);
  CHECK_EQ(codes[3], 0);
  CHECK_EQ(codes[4], RD_EEXIST);
  size_t got = 9;
  CHECK_EQ(rd_get_refs(rr[0], NULL, 0, &got, 10000), 0);
  CHECK_EQ(got, 1);
  rd_ref_release(rr[0]);
  rd_ref_release(rr[1]);
  rd_ref_release(lent);
  CHECK_EQ(store_used_settled(), 0);
  rd_shutdown();
  return 0;
}

/* ------------------------------------------------------------ an actor */

typedef struct holder {
  rd_ref refs[3];
  int n;
  rd_ref shared;   /* Holder.share: a 3 MiB put it keeps and returns to every caller */
  int has_shared;
} holder;

static int holder_init(rd_call *call, void **state) {
  (void)call;
  *state = calloc(1, sizeof(holder));
  return *state ? 0 : RD_ENOMEM;
}

static void holder_fini(void *state) { free(state); }

RD_ACTOR_CLASS(Holder, holder_init, holder_fini)

/* Keeps the refs contained in argument 0 (passed by value). */
RD_ACTOR_METHOD(Holder, keep) {
  holder *h = state;
  size_t n = 0;
  if (rd_call_arg_refs(call, 0, h->refs, 3, &n) != 0) return rd_call_fail(call, "rd_call_arg_refs");
  h->n = (int)n;
  return rd_return_bytes(call, 0, &h->n, sizeof(h->n));
}

/* Returns the refs it keeps (lent to it by the driver) inside an object,
 * to whichever process calls: a third party's refs for any caller but the
 * driver. */
RD_ACTOR_METHOD(Holder, give) {
  holder *h = state;
  return rd_return_refs(call, 0, NULL, 0, h->refs, (size_t)h->n);
}

/* Lets go of what it keeps. */
RD_ACTOR_METHOD(Holder, drop) {
  holder *h = state;
  for (int i = 0; i < h->n; i++) rd_ref_release(h->refs[i]);
  h->n = 0;
  return rd_return_bytes(call, 0, NULL, 0);
}

/* Reads what it keeps: how many read back right. */
RD_ACTOR_METHOD(Holder, read) {
  holder *h = state;
  long good = h->n == 3 ? count_good(h->refs, 3, SIZES, SEEDS) : -1;
  return rd_return_bytes(call, 0, &good, sizeof(good));
}

/* Returns a 3 MiB put of its own (seed 2) and a small one (seed 1) inside
 * an object, keeping none of them. */
RD_ACTOR_METHOD(Holder, make) {
  (void)state;
  rd_ref r[2];
  uint8_t *big = malloc(BIG), small[16];
  if (!big) return rd_call_fail(call, "out of memory");
  fill(big, BIG, 2);
  fill(small, sizeof(small), 1);
  int e = rd_put(big, BIG, &r[0]);
  free(big);
  if (e != 0 || rd_put(small, sizeof(small), &r[1]) != 0) return rd_call_fail(call, "rd_put");
  e = rd_return_refs(call, 0, NULL, 0, r, 2);
  rd_ref_release(r[0]);
  rd_ref_release(r[1]);
  return e;
}

/* Returns its 3 MiB put (seed 2, made on the first call and kept) inside
 * an object: the parameter-server pattern, one object for every caller. */
RD_ACTOR_METHOD(Holder, share) {
  holder *h = state;
  if (!h->has_shared) {
    uint8_t *big = malloc(BIG);
    if (!big) return rd_call_fail(call, "out of memory");
    fill(big, BIG, 2);
    int e = rd_put(big, BIG, &h->shared);
    free(big);
    if (e != 0) return rd_call_fail(call, "rd_put: %s", rd_err_name(e));
    h->has_shared = 1;
  }
  return rd_return_refs(call, 0, NULL, 0, &h->shared, 1);
}

/* Reads what it shares: 1 when it reads back right. */
RD_ACTOR_METHOD(Holder, read_shared) {
  holder *h = state;
  size_t sz = BIG;
  long seed = 2, good = h->has_shared ? count_good(&h->shared, 1, &sz, &seed) : -1;
  return rd_return_bytes(call, 0, &good, sizeof(good));
}

/* The refs inside r: exactly one, which reads back as the 3 MiB put. */
static void check_shared(rd_ref r) {
  rd_ref in;
  size_t n = 0, sz = BIG;
  long seed = 2;
  CHECK_EQ(rd_get_refs(r, &in, 1, &n, 60000), 0);
  CHECK_EQ(n, 1);
  CHECK_EQ(count_good(&in, 1, &sz, &seed), 1);
  rd_ref_release(in);
}

/* Argument 0: a Holder that keeps the three refs, which nobody else holds.
 * Asks it for them (Holder.give), has it let go of them (Holder.drop), and
 * returns how many read back right afterwards. */
RD_REMOTE(via_actor) {
  rd_actor a;
  if (rd_call_arg_actor(call, 0, &a) != 0) return rd_call_fail(call, "rd_call_arg_actor");
  rd_ref r, in[3];
  size_t n = 0;
  if (rd_actor_call(a, Holder_give, RD_NO_ARGS, NULL, &r) != 0) return rd_call_fail(call, "call give");
  int e = rd_get_refs(r, in, 3, &n, 60000);
  if (e != 0) return rd_call_fail(call, "rd_get_refs: %s", rd_err_name(e));
  rd_ref d;
  rd_buf db;
  if (rd_actor_call(a, Holder_drop, RD_NO_ARGS, NULL, &d) != 0 || rd_get(&d, 1, &db, 60000) != 0)
    return rd_call_fail(call, "drop");
  rd_buf_release(&db);
  rd_ref_release(d);
  usleep(300000);   /* the driver's delete would have landed by now */
  long good = n == 3 ? count_good(in, 3, SIZES, SEEDS) : -1;
  for (size_t k = 0; k < n; k++) rd_ref_release(in[k]);
  rd_ref_release(r);
  return rd_return_bytes(call, 0, &good, sizeof(good));
}

/* An actor keeps the refs an object passed to it contained, after the
 * driver let go of the object and of them, and reads them in a later call,
 * and returns them to a task, which reads them after the actor let go;
 * an actor returns store objects it made, and they outlive it; an actor
 * returns the same object it keeps to several calls, and it stays for the
 * actor and for the caller, whoever lets go first. */
static int t_actor(void) {
  init_or_die(4);
  rd_actor h;
  CHECK_EQ(rd_actor_create(Holder, RD_NO_ARGS, NULL, &h), 0);
  rd_ref three[3], outer;
  make_three(three, 200);
  CHECK_EQ(rd_put_refs(NULL, 0, three, 3, &outer), 0);
  for (int k = 0; k < 3; k++) rd_ref_release(three[k]);
  rd_actor bad;   /* a constructor's arguments are kept for restarts: not its refs */
  CHECK_EQ(rd_actor_create(Holder, RD_ARGS(rd_arg_ref(outer)), NULL, &bad), RD_EINVAL);
  int kept = 0;
  call_or_die(h, Holder_keep, RD_ARGS(rd_arg_ref(outer)), &kept, sizeof(kept));
  CHECK_EQ(kept, 3);
  rd_ref_release(outer);
  usleep(300000);   /* deletes would have landed by now */
  CHECK(store_used_now() >= BIG);
  long good = 0;
  call_or_die(h, Holder_read, RD_NO_ARGS, &good, sizeof(good));
  printf("kept past the call: %ld of 3 read back\n", good);
  CHECK_EQ(good, 3);
  /* a task asks the actor for them: refs the driver lent it, a third
   * party's to the task, handed over all the same */
  rd_ref v;
  CHECK_EQ(rd_submit(via_actor, RD_ARGS(rd_arg_actor(&h)), NULL, &v), 0);
  rd_buf vb;
  CHECK_EQ(rd_get(&v, 1, &vb, 60000), 0);
  memcpy(&good, vb.data, sizeof(good));
  rd_buf_release(&vb);
  rd_ref_release(v);
  printf("a task got them from the actor, which then let go: %ld of 3 read back\n", good);
  CHECK_EQ(good, 3);
  CHECK_EQ(store_used_settled(), 0);   /* nobody holds the 3 MiB put any more */

  rd_ref made;
  CHECK_EQ(rd_actor_call(h, Holder_make, RD_NO_ARGS, NULL, &made), 0);
  rd_buf b;
  CHECK_EQ(rd_get(&made, 1, &b, 60000), 0);
  rd_buf_release(&b);
  CHECK_EQ(rd_actor_kill(h, 1), 0);   /* its kept refs go; what it handed over stays */
  usleep(500000);
  rd_ref got[2];
  size_t n = 0;
  CHECK_EQ(rd_get_refs(made, got, 2, &n, 10000), 0);
  CHECK_EQ(n, 2);
  size_t sz[2] = {BIG, 16};
  long sd[2] = {2, 1};
  CHECK_EQ(count_good(got, 2, sz, sd), 2);
  printf("handed over by an actor since killed: read back\n");
  rd_ref_release(got[0]);
  rd_ref_release(got[1]);
  rd_ref_release(made);
  CHECK_EQ(store_used_settled(), 0);

  /* one object it keeps, returned to three calls */
  rd_actor p;
  CHECK_EQ(rd_actor_create(Holder, RD_NO_ARGS, NULL, &p), 0);
  rd_ref s[3];
  for (int i = 0; i < 3; i++) CHECK_EQ(rd_actor_call(p, Holder_share, RD_NO_ARGS, NULL, &s[i]), 0);
  for (int i = 0; i < 3; i++) check_shared(s[i]);
  rd_ref_release(s[0]);
  rd_ref_release(s[1]);
  usleep(300000);   /* deletes would have landed by now */
  CHECK(store_used_now() >= BIG);
  check_shared(s[2]);
  good = 0;
  call_or_die(p, Holder_read_shared, RD_NO_ARGS, &good, sizeof(good));
  CHECK_EQ(good, 1);
  rd_ref_release(s[2]);   /* the caller lets go first: the actor still has it */
  usleep(300000);
  CHECK(store_used_now() >= BIG);
  call_or_die(p, Holder_read_shared, RD_NO_ARGS, &good, sizeof(good));
  CHECK_EQ(good, 1);
  CHECK_EQ(rd_actor_call(p, Holder_share, RD_NO_ARGS, NULL, &s[0]), 0);
  check_shared(s[0]);
  CHECK_EQ(rd_actor_kill(p, 1), 0);   /* the actor goes first: the caller still has it */
  usleep(500000);
  check_shared(s[0]);
  printf("an object the actor keeps, returned to 4 calls: read by both sides, whoever let go first\n");
  rd_ref_release(s[0]);
  CHECK_EQ(store_used_settled(), 0);
  rd_shutdown();
  return 0;
}

/* Scale: a task returns 10,000 refs to small puts of its own (Ray's
 * single_client_get_object_containing_10k_refs makes the same object);
 * the caller reads them all after the worker moved on. */
static int t_many(void) {
  init_or_die(2);
  long n = 10000, seed = 7;
  rd_ref lent, res;
  double t0 = now_s();
  submit_make(n, 0, NULL, &lent, &res);
  check_made(res, n, lent, seed);
  printf("%ld refs returned and read back in %.2f s\n", n + 4, now_s() - t0);
  rd_ref_release(res);
  rd_ref_release(lent);
  CHECK_EQ(store_used_settled(), 0);
  rd_shutdown();
  return 0;
}

/* ------------------------------------------------------------ streams */

/* Streaming: item i (8 bytes: i) contains a small put (fill 16, seed
 * 10 + i), a 3 MiB put (seed 20 + i) and a subtask's result (seed 30 + i);
 * the last one also the ref its caller lent it (argument 0, borrowed).
 * Argument 1: how many items.  Misuse is checked first. */
RD_REMOTE(yield_refs) {
  rd_ref lent;
  if (rd_call_arg_ref(call, 0, &lent) != 0) return rd_call_fail(call, "rd_call_arg_ref");
  long n = arg_long(call, 1);
  rd_ref bogus = {0x123456789ull};
  if (rd_yield_refs(call, NULL, 0, &bogus, 1) != RD_EINVAL) return rd_call_fail(call, "a ref not live was taken");
  if (rd_yield_refs(call, NULL, 0, NULL, 1) != RD_EINVAL) return rd_call_fail(call, "NULL refs were taken");
  if (rd_return_refs(call, 0, NULL, 0, &lent, 1) != RD_EINVAL) return rd_call_fail(call, "rd_return_refs in a stream");
  for (long i = 0; i < n; i++) {
    uint8_t small[16], *big = malloc(BIG);
    if (!big) return rd_call_fail(call, "malloc");
    fill(small, sizeof(small), 10 + i);
    fill(big, BIG, 20 + i);
    rd_ref refs[4];
    long ms = 50, seed = 30 + i;
    if (rd_put(small, sizeof(small), &refs[0]) != 0 || rd_put(big, BIG, &refs[1]) != 0 ||
        rd_submit(slow_fill, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms)), rd_arg_bytes(&seed, sizeof(seed))), NULL,
                  &refs[2]) != 0)
      return rd_call_fail(call, "put or submit");
    free(big);
    refs[3] = lent;
    int e = rd_yield_refs(call, &i, sizeof(i), refs, i == n - 1 ? 4 : 3);
    for (int k = 0; k < 3; k++) rd_ref_release(refs[k]);   /* the item holds them now */
    if (e != 0) return rd_call_fail(call, "rd_yield_refs %ld: %s", i, rd_err_name(e));
  }
  rd_ref_release(lent);
  return 0;
}

/* A streaming task's items contain refs (rd_yield_refs): its puts and a
 * subtask's result, handed over to the driver, which reads them after the
 * task (and its refs) are gone, and the ref the driver lent it; the store
 * empties when the driver lets go. */
static int t_stream(void) {
  init_or_die(2);
  uint8_t v[8];
  fill(v, sizeof(v), 5);
  rd_ref lent;
  CHECK_EQ(rd_put(v, sizeof(v), &lent), 0);
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.num_returns = RD_STREAMING;
  long n = 4;
  rd_ref st;
  CHECK_EQ(rd_submit(yield_refs, RD_ARGS(rd_arg_borrow(lent), rd_arg_bytes(&n, sizeof(n))), &o, &st), 0);
  CHECK_EQ(rd_wait(&st, 1, 1, 60000, NULL), 1);   /* the task has ended */
  usleep(300000);                                 /* and its worker has dropped its own refs */
  CHECK(store_used_now() >= 4 * (uint64_t)BIG);
  for (long i = 0; i < n; i++) {
    rd_ref item;
    CHECK_EQ(rd_stream_next(st, &item, 30000), 0);
    rd_buf b;
    CHECK_EQ(rd_get(&item, 1, &b, 30000), 0);
    CHECK_EQ(b.size, sizeof(long));
    long idx;
    memcpy(&idx, b.data, sizeof(idx));
    CHECK_EQ(idx, i);
    rd_buf_release(&b);
    rd_ref refs[4];
    size_t k = 0;
    CHECK_EQ(rd_get_refs(item, refs, 4, &k, 30000), 0);
    CHECK_EQ(k, i == n - 1 ? 4 : 3);
    size_t sizes[3] = {16, BIG, 8};
    long seeds[3] = {10 + i, 20 + i, 30 + i};
    CHECK_EQ(count_good(refs, 3, sizes, seeds), 3);
    if (k == 4) {
      CHECK_EQ(refs[3].id, lent.id);   /* the driver's own object, not a copy */
      CHECK_EQ(count_good(&refs[3], 1, (size_t[]){8}, (long[]){5}), 1);
    }
    for (size_t j = 0; j < k; j++) rd_ref_release(refs[j]);
    rd_ref_release(item);
  }
  rd_ref end;
  CHECK_EQ(rd_stream_next(st, &end, 30000), RD_EEND);
  rd_buf b;
  CHECK_EQ(rd_get(&st, 1, &b, 1000), 0);   /* the task succeeded: its misuse checks passed */
  rd_buf_release(&b);
  rd_ref_release(st);
  CHECK_EQ(store_used_settled(), 0);
  CHECK_EQ(count_good(&lent, 1, (size_t[]){8}, (long[]){5}), 1);
  rd_ref_release(lent);
  rd_shutdown();
  return 0;
}

static const rd_test_case tests[] = {
    {"put_get", t_put_get}, {"arg", t_arg}, {"return", t_return}, {"actor", t_actor}, {"many", t_many},
    {"stream", t_stream},
};

RD_TEST_MAIN(tests)
