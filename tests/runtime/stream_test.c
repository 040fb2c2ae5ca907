/* tests/runtime/stream_test.c - streaming tasks (RD_STREAMING: rd_yield,
 * rd_stream_next) through the public API, in real worker processes: items
 * reach the caller while the task runs, in order, small and store-sized;
 * the window holds the producer back; failures, retries after a worker
 * death, cancellation, a released stream, actor methods, a worker that
 * consumes a stream of its own, and misuse.
 * `stream_test NAME` runs one case; the binary is re-executed as workers. */
#include <raydist.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../check.h"
#include "embedded.h"

/* An item: its index, when the rd_yield of the one before it returned
 * (CLOCK_MONOTONIC, one clock for every process), the attempt that made it;
 * padded to `size` bytes with a pattern of the index. */
typedef struct item {
  long index;
  double prev_done;
  long attempt;
  long size;
} item;

/* The options of a streaming call whose window is `window` (0: the default). */
static rd_task_opts streaming(int window) {
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.num_returns = RD_STREAMING;
  o.stream_window = window;
  return o;
}

static double last_yield_done;   /* in the worker: when its last rd_yield returned */

static int yield_item(rd_call *call, long i, size_t size) {
  if (size < sizeof(item)) size = sizeof(item);
  unsigned char *buf = malloc(size);
  if (!buf) return RD_ENOMEM;
  for (size_t k = sizeof(item); k < size; k++) buf[k] = (unsigned char)(i * 31 + (long)k);
  item it = {i, last_yield_done, rd_call_attempt(call), (long)size};
  memcpy(buf, &it, sizeof(it));
  int r = rd_yield(call, buf, size);
  last_yield_done = now_s();
  free(buf);
  return r;
}

/* An item taken: its header, with its padding checked. */
static item check_item(rd_ref r, long want_index) {
  rd_buf b;
  int e = rd_get(&r, 1, &b, 30000);
  if (e != 0) {
    fprintf(stderr, "item %ld: %s: %.*s\n", want_index, rd_err_name(e), (int)b.size, (const char *)b.data);
    exit(1);
  }
  item it;
  CHECK(b.size >= sizeof(it));
  memcpy(&it, b.data, sizeof(it));
  CHECK_EQ(it.index, want_index);
  CHECK_EQ(it.size, b.size);
  const unsigned char *p = b.data;
  for (size_t k = sizeof(item); k < b.size; k += 4093) CHECK_EQ(p[k], (unsigned char)(want_index * 31 + (long)k));
  rd_buf_release(&b);
  return it;
}

/* ------------------------------------------------------ remote functions */

/* Yields args[0] items; item i is args[1] bytes (every 10th: args[2]), and
 * the task sleeps args[3] ms after each of the first five. */
RD_REMOTE(gen_items) {
  long n = arg_long(call, 0), small = arg_long(call, 1), big = arg_long(call, 2), ms = arg_long(call, 3);
  if (rd_call_nreturns(call) != 0) return rd_call_fail(call, "a streaming call has returns");
  if (rd_return_bytes(call, 0, &n, sizeof(n)) != RD_EINVAL) return rd_call_fail(call, "rd_return_bytes worked");
  for (long i = 0; i < n; i++) {
    int r = yield_item(call, i, (size_t)(i % 10 == 9 ? big : small));
    if (r != 0) return rd_call_fail(call, "rd_yield %ld: %s", i, rd_err_name(r));
    if (i < 5 && ms > 0) usleep((useconds_t)(ms * 1000));
  }
  return 0;
}

/* Yields args[0] items, then fails. */
RD_REMOTE(gen_then_fail) {
  long n = arg_long(call, 0);
  for (long i = 0; i < n; i++)
    if (yield_item(call, i, 64) != 0) return rd_call_fail(call, "rd_yield");
  return rd_call_fail(call, "deliberate failure after %ld items", n);
}

/* Yields 10 items (40 ms apart); the first attempt's worker dies after item
 * args[0]. */
RD_REMOTE(gen_dies) {
  long die_after = arg_long(call, 0);
  for (long i = 0; i < 10; i++) {
    if (yield_item(call, i, i == 7 ? 300000 : 100) != 0) return rd_call_fail(call, "rd_yield %ld", i);
    if (i == die_after && rd_call_attempt(call) == 0) _exit(9);
    usleep(40000);
  }
  return 0;
}

/* Yields until rd_yield says stop (cancelled), 5 ms apart; returns 0. */
RD_REMOTE(gen_forever) {
  for (long i = 0;; i++) {
    int r = yield_item(call, i, 200000);
    if (r == RD_ECANCELED) return 0;
    if (r != 0) return rd_call_fail(call, "rd_yield: %s", rd_err_name(r));
    usleep(5000);
  }
}

RD_REMOTE(plain) {
  long v = arg_long(call, 0);
  int r = rd_yield(call, &v, sizeof(v));   /* not a streaming call */
  if (r != RD_EINVAL) return rd_call_fail(call, "rd_yield in a plain task: %d", r);
  return rd_return_bytes(call, 0, &v, sizeof(v));
}

/* The sum of the indexes of the items of a gen_items stream of args[0]
 * items that this task submits and consumes itself (a worker as owner). */
RD_REMOTE(consume_own) {
  long n = arg_long(call, 0), small = 32, big = 150000, ms = 0;
  rd_task_opts o = streaming(3);
  rd_ref s;
  if (rd_submit(gen_items, RD_ARGS(rd_arg_bytes(&n, sizeof(n)), rd_arg_bytes(&small, sizeof(small)),
                                   rd_arg_bytes(&big, sizeof(big)), rd_arg_bytes(&ms, sizeof(ms))),
                &o, &s) != 0)
    return rd_call_fail(call, "submit");
  long sum = 0, k = 0;
  rd_ref it;
  int r;
  while ((r = rd_stream_next(s, &it, 30000)) == 0) {
    item x = check_item(it, k++);
    sum += x.index;
    rd_ref_release(it);
  }
  rd_ref_release(s);
  if (r != RD_EEND) return rd_call_fail(call, "rd_stream_next: %s", rd_err_name(r));
  return rd_return_bytes(call, 0, &sum, sizeof(sum));
}

/* Reads an item passed by value: its index. */
RD_REMOTE(item_index) {
  rd_buf b;
  if (rd_arg(call, 0, &b) != 0 || b.size < sizeof(item)) return rd_call_fail(call, "bad item");
  item it;
  memcpy(&it, b.data, sizeof(it));
  return rd_return_bytes(call, 0, &it.index, sizeof(it.index));
}

/* An actor whose method yields its counter args[0] times. */
typedef struct counter {
  long next;
} counter;

static int counter_init(rd_call *call, void **state) {
  (void)call;
  *state = calloc(1, sizeof(counter));
  return *state ? 0 : RD_ENOMEM;
}

static void counter_fini(void *state) { free(state); }

RD_ACTOR_CLASS(Counter, counter_init, counter_fini)

RD_ACTOR_METHOD(Counter, count) {
  counter *c = state;
  long n = arg_long(call, 0);
  for (long i = 0; i < n; i++) {
    item it = {c->next++, 0, 0, sizeof(item)};
    if (rd_yield(call, &it, sizeof(it)) != 0) return rd_call_fail(call, "rd_yield");
  }
  return 0;
}

/* Yields 10 items, 30 ms apart; in the actor's first life its process dies
 * after item 4.  Items record the life that made them (as `attempt`). */
RD_ACTOR_METHOD(Counter, count_dies) {
  (void)state;
  for (long i = 0; i < 10; i++) {
    item it = {i, 0, rd_call_actor_restarts(call), sizeof(item)};
    if (rd_yield(call, &it, sizeof(it)) != 0) return rd_call_fail(call, "rd_yield");
    if (i == 4 && rd_call_actor_restarts(call) == 0) _exit(9);
    usleep(30000);
  }
  return 0;
}

/* Submits a stream of 1000 items (window 2), takes one, and dies: its
 * producer, waiting in rd_yield for room, must not wait forever. */
RD_REMOTE(owner_dies) {
  rd_task_opts o = streaming(2);
  long n = 1000, small = 64, ms = 0;
  rd_ref s, it;
  if (rd_submit(gen_items, RD_ARGS(rd_arg_bytes(&n, sizeof(n)), rd_arg_bytes(&small, sizeof(small)),
                                   rd_arg_bytes(&small, sizeof(small)), rd_arg_bytes(&ms, sizeof(ms))),
                &o, &s) != 0 ||
      rd_stream_next(s, &it, 30000) != 0)
    return rd_call_fail(call, "no first item");
  usleep(100000);   /* the producer fills its window and waits */
  _exit(3);
}

/* Three items back to back, then a second's pause, then one more. */
RD_REMOTE(gen_burst) {
  for (long i = 0; i < 4; i++) {
    if (i == 3) usleep(1000000);
    if (yield_item(call, i, 64) != 0) return rd_call_fail(call, "rd_yield");
  }
  return 0;
}

/* Six items written in place (rd_yield_alloc + rd_yield_commit), every
 * second one 3 MiB (in the store); the first attempt's worker dies after
 * item 2, so the second attempt writes items 0-2 to scratch memory that is
 * not sent.  Misuse is refused, and an item allocated and never committed
 * is dropped when the task returns. */
RD_REMOTE(gen_alloc) {
  if (rd_yield_commit(call) != RD_EINVAL) return rd_call_fail(call, "commit without an item");
  for (long i = 0; i < 6; i++) {
    size_t size = i % 2 ? 3u << 20 : 100;
    unsigned char *p = rd_yield_alloc(call, size);
    if (!p) return rd_call_fail(call, "rd_yield_alloc %ld", i);
    if (rd_yield_alloc(call, 10) != NULL) return rd_call_fail(call, "a second alloc before the commit");
    if (rd_yield(call, "x", 1) != RD_ESTATE) return rd_call_fail(call, "rd_yield before the commit");
    item it = {i, 0, rd_call_attempt(call), (long)size};
    memcpy(p, &it, sizeof(it));
    for (size_t k = sizeof(item); k < size; k++) p[k] = (unsigned char)(i * 31 + (long)k);
    if (rd_yield_commit(call) != 0) return rd_call_fail(call, "commit %ld", i);
    if (i == 2 && rd_call_attempt(call) == 0) {
      usleep(50000);   /* items 0-2 reach the owner (written within 100 us) */
      _exit(9);
    }
  }
  if (!rd_yield_alloc(call, 5u << 20)) return rd_call_fail(call, "the last alloc");
  return 0;   /* not committed: dropped */
}

/* ------------------------------------------------------------------ tests */

static rd_ref submit_gen(long n, long small, long big, long ms, int window) {
  rd_task_opts o = streaming(window);
  rd_ref s;
  CHECK_EQ(rd_submit(gen_items,
                     RD_ARGS(rd_arg_bytes(&n, sizeof(n)), rd_arg_bytes(&small, sizeof(small)),
                             rd_arg_bytes(&big, sizeof(big)), rd_arg_bytes(&ms, sizeof(ms))),
                     &o, &s),
           0);
  return s;
}

/* The stream's value: its item count, or its error. */
static int stream_count(rd_ref s, long *count, char *msg, size_t msglen) {
  rd_buf b;
  int e = rd_get(&s, 1, &b, 30000);
  if (e == 0) {
    CHECK_EQ(b.size, sizeof(uint64_t));
    uint64_t n;
    memcpy(&n, b.data, sizeof(n));
    *count = (long)n;
  } else if (msg) {
    snprintf(msg, msglen, "%.*s", (int)b.size, (const char *)b.data);
  }
  if (e != RD_ETIMEDOUT) rd_buf_release(&b);
  return e;
}

/* 300 items (every 10th 300 KiB, in the store) taken while the task runs:
 * the first comes long before the task ends; all in order; then RD_EEND
 * and the count; the store is empty once they are released. */
static int t_basic(void) {
  init_or_die(2);
  double t0 = now_s();
  rd_ref s = submit_gen(300, 100, 300000, 100, 0);
  rd_ref it;
  double first = 0;
  for (long i = 0; i < 300; i++) {
    CHECK_EQ(rd_stream_next(s, &it, 30000), 0);
    if (i == 0) first = now_s() - t0;
    check_item(it, i);
    rd_ref_release(it);
  }
  double all = now_s() - t0;
  CHECK_EQ(rd_stream_next(s, &it, 30000), RD_EEND);
  CHECK_EQ(rd_stream_next(s, &it, 0), RD_EEND);   /* and stays so */
  long n = -1;
  CHECK_EQ(stream_count(s, &n, NULL, 0), 0);
  CHECK_EQ(n, 300);
  rd_ref_release(s);
  printf("first item after %.3f s, all 300 after %.3f s\n", first, all);
  CHECK(first < all - 0.3);   /* the five 100 ms pauses come after the first item */
  CHECK_EQ(store_used_settled(), 0);
  rd_shutdown();
  return 0;
}

/* Window 4: the producer never runs more than 4 items ahead of the taker
 * (item i is yielded only after item i-4 was taken).  Without a window it
 * runs ahead: all 40 are yielded before the slow taker has 10. */
static int t_window(void) {
  init_or_die(2);
  for (int pass = 0; pass < 2; pass++) {
    int w = pass == 0 ? 4 : -1;
    rd_ref s = submit_gen(40, 64, 64, 0, w);
    double asked_at[40];
    item items[40];
    rd_ref it;
    for (int i = 0; i < 40; i++) {
      usleep(20000);   /* a slow consumer */
      asked_at[i] = now_s();
      CHECK_EQ(rd_stream_next(s, &it, 30000), 0);
      items[i] = check_item(it, i);
      rd_ref_release(it);
    }
    CHECK_EQ(rd_stream_next(s, &it, 30000), RD_EEND);
    rd_ref_release(s);
    /* item i was yielded by the time item i+1 says its yield returned:
     * count those yielded before the taker asked for the one 10 before */
    int ahead = 0;
    for (int i = 10; i < 39; i++) ahead += items[i + 1].prev_done < asked_at[i - 10];
    printf("window %d: %d of 29 items yielded more than 10 takes ahead\n", w, ahead);
    if (w > 0) {
      for (int i = w; i < 39; i++) CHECK(items[i + 1].prev_done >= asked_at[i - w]);
      CHECK_EQ(ahead, 0);
    } else {
      CHECK_EQ(ahead, 29);
    }
  }
  rd_shutdown();
  return 0;
}

/* Takes items 0..n-1 of stream s, in order. */
static void take(rd_ref s, long n) {
  rd_ref it;
  for (long i = 0; i < n; i++) {
    CHECK_EQ(rd_stream_next(s, &it, 30000), 0);
    check_item(it, i);
    rd_ref_release(it);
  }
}

/* A task that fails after 3 items: the caller takes the 3, then gets the
 * task's error; rd_get on the stream has its message. */
static int t_failure(void) {
  init_or_die(2);
  rd_task_opts o = streaming(0);
  long n = 3;
  rd_ref s, it;
  CHECK_EQ(rd_submit(gen_then_fail, RD_ARGS(rd_arg_bytes(&n, sizeof(n))), &o, &s), 0);
  take(s, 3);
  CHECK_EQ(rd_stream_next(s, &it, 30000), RD_ETASK);
  long cnt;
  char msg[300] = "";
  CHECK_EQ(stream_count(s, &cnt, msg, sizeof(msg)), RD_ETASK);
  printf("after 3 items: %s\n", msg);
  CHECK(strstr(msg, "deliberate failure after 3 items") != NULL);
  rd_ref_release(s);
  rd_shutdown();
  return 0;
}

/* Takes the n items of a stream whose first attempt died after item
 * died_after: each once, in order, those after it from the second attempt;
 * then the end and the count.  Releases the stream. */
static void take_across_retry(rd_ref s, long n, long died_after) {
  rd_ref it;
  for (long i = 0; i < n; i++) {
    CHECK_EQ(rd_stream_next(s, &it, 30000), 0);
    item x = check_item(it, i);
    CHECK_EQ(x.attempt, i <= died_after ? 0 : 1);
    rd_ref_release(it);
  }
  CHECK_EQ(rd_stream_next(s, &it, 30000), RD_EEND);
  long cnt = 0;
  CHECK_EQ(stream_count(s, &cnt, NULL, 0), 0);
  CHECK_EQ(cnt, n);
  rd_ref_release(s);
}

/* The worker dies after item 4 of 10: the task runs again, items 0-4 are
 * not delivered twice, 5-9 come from the second attempt (one in the store). */
static int t_retry(void) {
  init_or_die(2);
  rd_task_opts o = streaming(2);
  long die_after = 4;
  rd_ref s, it;
  CHECK_EQ(rd_submit(gen_dies, RD_ARGS(rd_arg_bytes(&die_after, sizeof(die_after))), &o, &s), 0);
  take_across_retry(s, 10, 4);
  /* without retries the stream fails after the items that came */
  o.max_retries = 0;
  CHECK_EQ(rd_submit(gen_dies, RD_ARGS(rd_arg_bytes(&die_after, sizeof(die_after))), &o, &s), 0);
  long got = 0;
  int r;
  while ((r = rd_stream_next(s, &it, 30000)) == 0) {
    check_item(it, got++);
    rd_ref_release(it);
  }
  printf("without retries: %ld items, then %s\n", got, rd_err_name(r));
  CHECK_EQ(r, RD_EWORKER_DIED);
  CHECK_EQ(got, 5);
  rd_ref_release(s);
  CHECK_EQ(store_used_settled(), 0);
  rd_shutdown();
  return 0;
}

/* A generator without end, cancelled after 5 items: the caller then sees
 * RD_ECANCELED, the task's rd_yield returns RD_ECANCELED and the task ends
 * (the one CPU runs a plain task next).  Then a stream released after 2
 * items with a window of 2: the producer is not held back by the window any
 * more, finishes, and what it made is deleted. */
static int t_cancel(void) {
  init_or_die(1);
  rd_task_opts o = streaming(8);
  rd_ref s, it;
  CHECK_EQ(rd_submit(gen_forever, RD_NO_ARGS, &o, &s), 0);
  take(s, 5);
  CHECK_EQ(rd_cancel(s, 0), 0);
  int r;
  long extra = 0;
  while ((r = rd_stream_next(s, &it, 30000)) == 0) {   /* the ones that came before the cancel */
    rd_ref_release(it);
    extra++;
  }
  CHECK_EQ(r, RD_ECANCELED);
  CHECK(extra <= 8);
  rd_ref_release(s);
  long v = 5;
  rd_ref p;
  CHECK_EQ(rd_submit(plain, RD_ARGS(rd_arg_bytes(&v, sizeof(v))), NULL, &p), 0);
  rd_buf b;
  CHECK_EQ(rd_get(&p, 1, &b, 20000), 0);   /* the generator gave its CPU back */
  rd_buf_release(&b);
  rd_ref_release(p);

  s = submit_gen(60, 64, 250000, 0, 2);
  take(s, 2);
  rd_ref_release(s);
  CHECK_EQ(rd_submit(plain, RD_ARGS(rd_arg_bytes(&v, sizeof(v))), NULL, &p), 0);
  CHECK_EQ(rd_get(&p, 1, &b, 20000), 0);   /* the released stream's producer finished */
  rd_buf_release(&b);
  rd_ref_release(p);
  CHECK_EQ(store_used_settled(), 0);
  printf("cancelled after 5 (+%ld already come); released stream finished\n", extra);
  rd_shutdown();
  return 0;
}

/* An actor method streams its counter: two calls in order, 0-99 then
 * 100-149. */
static int t_actor(void) {
  init_or_die(2);
  rd_actor a;
  CHECK_EQ(rd_actor_create(Counter, RD_NO_ARGS, NULL, &a), 0);
  rd_task_opts o = streaming(0);
  long n1 = 100, n2 = 50;
  rd_ref s1, s2, it;
  CHECK_EQ(rd_actor_call(a, Counter_count, RD_ARGS(rd_arg_bytes(&n1, sizeof(n1))), &o, &s1), 0);
  CHECK_EQ(rd_actor_call(a, Counter_count, RD_ARGS(rd_arg_bytes(&n2, sizeof(n2))), &o, &s2), 0);
  for (long i = 0; i < 150; i++) {
    CHECK_EQ(rd_stream_next(i < 100 ? s1 : s2, &it, 30000), 0);
    check_item(it, i);
    rd_ref_release(it);
  }
  CHECK_EQ(rd_stream_next(s1, &it, 30000), RD_EEND);
  CHECK_EQ(rd_stream_next(s2, &it, 30000), RD_EEND);
  rd_ref_release(s1);
  rd_ref_release(s2);
  rd_shutdown();
  return 0;
}

/* An actor dies in the middle of a streaming call: with max_task_retries
 * the call runs again in the restarted actor and the caller sees items 0-4
 * from the first life and 5-9 from the second, each once; without, the
 * stream fails with RD_EACTOR_DIED after the 5 that came. */
static int t_actor_restart(void) {
  init_or_die(2);
  for (int retries = 1; retries >= 0; retries--) {
    rd_actor_opts ao;
    rd_actor_opts_init(&ao);
    ao.max_restarts = 1;
    ao.max_task_retries = retries;
    rd_actor a;
    CHECK_EQ(rd_actor_create(Counter, RD_NO_ARGS, &ao, &a), 0);
    rd_task_opts o = streaming(3);
    rd_ref s, it;
    CHECK_EQ(rd_actor_call(a, Counter_count_dies, RD_NO_ARGS, &o, &s), 0);
    long got = 0;
    int r;
    while ((r = rd_stream_next(s, &it, 30000)) == 0) {
      item x = check_item(it, got++);
      CHECK_EQ(x.attempt, x.index <= 4 ? 0 : 1);
      rd_ref_release(it);
    }
    printf("max_task_retries %d: %ld items, then %s\n", retries, got, rd_err_name(r));
    CHECK_EQ(r, retries ? RD_EEND : RD_EACTOR_DIED);
    CHECK_EQ(got, retries ? 10 : 5);
    rd_ref_release(s);
    CHECK_EQ(rd_actor_kill(a, 1), 0);
  }
  rd_shutdown();
  return 0;
}

/* The owner of a stream dies while its producer waits for room: the
 * producer's rd_yield returns RD_ECANCELED, the task ends and gives its CPU
 * back (a task wanting both CPUs then runs). */
static int t_owner_dies(void) {
  init_or_die(2);
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.max_retries = 0;
  rd_ref r;
  CHECK_EQ(rd_submit(owner_dies, RD_NO_ARGS, &o, &r), 0);
  rd_buf b;
  CHECK_EQ(rd_get(&r, 1, &b, 30000), RD_EWORKER_DIED);
  rd_buf_release(&b);
  rd_ref_release(r);
  rd_task_opts_init(&o);
  o.num_cpus = 2;
  long v = 1;
  double t0 = now_s();
  CHECK_EQ(rd_submit(plain, RD_ARGS(rd_arg_bytes(&v, sizeof(v))), &o, &r), 0);
  CHECK_EQ(rd_get(&r, 1, &b, 20000), 0);
  printf("both CPUs free %.2f s after the owner died\n", now_s() - t0);
  rd_buf_release(&b);
  rd_ref_release(r);
  rd_shutdown();
  return 0;
}

/* A task consumes a stream it submitted itself; items are passed on as
 * arguments like any object. */
static int t_nested(void) {
  init_or_die(3);
  long n = 50, sum = -1;
  rd_ref r;
  CHECK_EQ(rd_submit(consume_own, RD_ARGS(rd_arg_bytes(&n, sizeof(n))), NULL, &r), 0);
  rd_buf b;
  CHECK_EQ(rd_get(&r, 1, &b, 60000), 0);
  CHECK_EQ(b.size, sizeof(sum));
  memcpy(&sum, b.data, sizeof(sum));
  rd_buf_release(&b);
  rd_ref_release(r);
  CHECK_EQ(sum, 50 * 49 / 2);

  rd_ref s = submit_gen(20, 64, 200000, 0, 0), it, outs[20];
  for (long i = 0; i < 20; i++) {
    CHECK_EQ(rd_stream_next(s, &it, 30000), 0);
    CHECK_EQ(rd_submit(item_index, RD_ARGS(rd_arg_ref(it)), NULL, &outs[i]), 0);
    rd_ref_release(it);
  }
  for (long i = 0; i < 20; i++) {
    long idx = -1;
    CHECK_EQ(rd_get(&outs[i], 1, &b, 30000), 0);
    memcpy(&idx, b.data, sizeof(idx));
    rd_buf_release(&b);
    rd_ref_release(outs[i]);
    CHECK_EQ(idx, i);
  }
  rd_ref_release(s);
  CHECK_EQ(store_used_settled(), 0);
  rd_shutdown();
  return 0;
}

/* A stream held back by its window keeps its worker: tasks submitted after
 * it must not queue behind it there (short tasks are otherwise pipelined
 * many to a worker), or a caller that waits for them before taking items
 * would wait forever. */
static int t_exclusive(void) {
  init_or_die(2);
  enum { N = 400 };
  static rd_ref refs[N];
  static rd_buf bufs[N];
  long v = 1;
  for (int round = 0; round < 2; round++) {   /* the first round teaches the owner they are short */
    if (round == 1) {
      rd_ref s = submit_gen(10, 64, 64, 0, 2), it;
      for (int i = 0; i < N; i++) CHECK_EQ(rd_submit(plain, RD_ARGS(rd_arg_bytes(&v, sizeof(v))), NULL, &refs[i]), 0);
      CHECK_EQ(rd_get(refs, N, bufs, 20000), 0);
      for (int i = 0; i < N; i++) {
        rd_buf_release(&bufs[i]);
        rd_ref_release(refs[i]);
      }
      take(s, 10);
      CHECK_EQ(rd_stream_next(s, &it, 30000), RD_EEND);
      rd_ref_release(s);
      break;
    }
    for (int i = 0; i < N; i++) CHECK_EQ(rd_submit(plain, RD_ARGS(rd_arg_bytes(&v, sizeof(v))), NULL, &refs[i]), 0);
    CHECK_EQ(rd_get(refs, N, bufs, 20000), 0);
    for (int i = 0; i < N; i++) {
      rd_buf_release(&bufs[i]);
      rd_ref_release(refs[i]);
    }
  }
  rd_shutdown();
  return 0;
}

/* Three streams taken together with rd_stream_next_any: a fast one, a slow
 * one (100 ms pauses) and one that fails after 2 items.  Every item comes
 * once, in order within its stream; the slow stream's items do not hold
 * the fast one's back; the failed stream reports its error once its items
 * are taken, and is dropped; then RD_EEND. */
static int t_any(void) {
  init_or_die(3);
  rd_ref st[3];
  st[0] = submit_gen(30, 64, 64, 0, 4);
  st[1] = submit_gen(8, 64, 64, 100, 4);
  rd_task_opts o = streaming(0);
  long two = 2;
  CHECK_EQ(rd_submit(gen_then_fail, RD_ARGS(rd_arg_bytes(&two, sizeof(two))), &o, &st[2]), 0);
  long next[3] = {0, 0, 0}, want[3] = {30, 8, 2};
  int failed = 0;
  long fast_done_at = -1, taken = 0;   /* items taken when the fast stream was done */
  size_t n = 3, idx;
  rd_ref it;
  int r;
  int which[3] = {0, 1, 2};   /* st[k] is stream which[k] */
  while ((r = rd_stream_next_any(st, n, &idx, &it, 30000)) != RD_EEND) {
    CHECK(idx < n);
    int w = which[idx];
    if (r != 0) {   /* the failing stream, once its items are taken */
      CHECK_EQ(r, RD_ETASK);
      CHECK_EQ(w, 2);
      CHECK_EQ(next[2], 2);
      failed = 1;
      rd_ref_release(st[idx]);
      for (size_t k = idx; k + 1 < n; k++) {
        st[k] = st[k + 1];
        which[k] = which[k + 1];
      }
      n--;
      continue;
    }
    check_item(it, next[w]++);
    rd_ref_release(it);
    taken++;
    if (w == 0 && next[0] == 30) fast_done_at = taken;
  }
  for (int w = 0; w < 3; w++) CHECK_EQ(next[w], want[w]);
  CHECK(failed);
  printf("any: fast stream done after %ld of %ld items taken\n", fast_done_at, taken);
  CHECK(fast_done_at < taken);   /* before the slow one's last */
  for (size_t k = 0; k < n; k++) rd_ref_release(st[k]);
  rd_ref bad[2] = {st[0], {777}};
  CHECK_EQ(rd_stream_next_any(bad, 2, &idx, &it, 0), RD_EINVAL);   /* released, and unknown */
  CHECK_EQ(rd_stream_next_any(NULL, 0, &idx, &it, 0), RD_EINVAL);
  rd_shutdown();
  return 0;
}

/* Items yielded close together are written out together, but never held
 * back by a pause that follows them: the burst's last item comes long
 * before the item after the pause. */
static int t_burst(void) {
  init_or_die(2);
  rd_task_opts o = streaming(0);
  for (int round = 0; round < 3; round++) {
    rd_ref s, it;
    CHECK_EQ(rd_submit(gen_burst, RD_NO_ARGS, &o, &s), 0);
    double at[4];
    for (long i = 0; i < 4; i++) {
      CHECK_EQ(rd_stream_next(s, &it, 30000), 0);
      at[i] = now_s();
      check_item(it, i);
      rd_ref_release(it);
    }
    CHECK_EQ(rd_stream_next(s, &it, 30000), RD_EEND);
    rd_ref_release(s);
    printf("burst: items 1 and 2 %.1f and %.1f ms after item 0; item 3 after %.0f ms\n", (at[1] - at[0]) * 1e3,
           (at[2] - at[0]) * 1e3, (at[3] - at[0]) * 1e3);
    CHECK(at[2] - at[0] < 0.2);
    CHECK(at[3] - at[0] > 0.9);
  }
  rd_shutdown();
  return 0;
}

/* gen_alloc's items all come, once and in order, across its retry; the
 * store is empty afterwards (the uncommitted item was dropped). */
static int t_alloc(void) {
  init_or_die(2);
  rd_task_opts o = streaming(2);
  rd_ref s;
  CHECK_EQ(rd_submit(gen_alloc, RD_NO_ARGS, &o, &s), 0);
  take_across_retry(s, 6, 2);
  uint64_t used = store_used_settled();
  printf("alloc: 6 items written in place, across a retry; store afterwards %llu bytes\n", (unsigned long long)used);
  CHECK_EQ(used, 0);   /* the uncommitted 5 MiB item too */
  rd_shutdown();
  return 0;
}

/* Misuse gets RD_EINVAL (or RD_ETIMEDOUT) and nothing else breaks. */
static int t_errors(void) {
  init_or_die(2);
  rd_task_opts o;
  rd_task_opts_init(&o);
  long v = 1;
  rd_ref s, it, p;
  o.num_returns = -2;
  CHECK_EQ(rd_submit(gen_items, RD_ARGS(rd_arg_bytes(&v, sizeof(v))), &o, &s), RD_EINVAL);
  o.num_returns = RD_STREAMING;
  o.stream_window = -2;
  CHECK_EQ(rd_submit(gen_items, RD_ARGS(rd_arg_bytes(&v, sizeof(v))), &o, &s), RD_EINVAL);
  /* a plain task's ref is not a stream; its rd_yield is refused */
  CHECK_EQ(rd_submit(plain, RD_ARGS(rd_arg_bytes(&v, sizeof(v))), NULL, &p), 0);
  CHECK_EQ(rd_stream_next(p, &it, 1000), RD_EINVAL);
  rd_buf b;
  CHECK_EQ(rd_get(&p, 1, &b, 30000), 0);
  rd_buf_release(&b);
  rd_ref_release(p);
  rd_ref bogus = {12345};
  CHECK_EQ(rd_stream_next(bogus, &it, 0), RD_EINVAL);
  /* a slow first item: a short wait times out, a NULL item is refused */
  s = submit_gen(3, 64, 64, 0, 0);
  CHECK_EQ(rd_stream_next(s, NULL, 0), RD_EINVAL);
  long got = 0;
  int r;
  while ((r = rd_stream_next(s, &it, 30000)) == 0) {
    check_item(it, got++);
    rd_ref_release(it);
  }
  CHECK_EQ(r, RD_EEND);
  CHECK_EQ(got, 3);
  rd_ref_release(s);
  CHECK_EQ(rd_stream_next(s, &it, 0), RD_EINVAL);   /* released */
  long ms = 1500, n = 2;
  long small = 64;
  o = streaming(0);
  CHECK_EQ(rd_submit(gen_items,
                     RD_ARGS(rd_arg_bytes(&n, sizeof(n)), rd_arg_bytes(&small, sizeof(small)),
                             rd_arg_bytes(&small, sizeof(small)), rd_arg_bytes(&ms, sizeof(ms))),
                     &o, &s),
           0);
  CHECK_EQ(rd_stream_next(s, &it, 30000), 0);   /* item 0, then 1.5 s to item 1 */
  rd_ref_release(it);
  double t0 = now_s();
  CHECK_EQ(rd_stream_next(s, &it, 100), RD_ETIMEDOUT);
  CHECK(now_s() - t0 < 1.0);
  CHECK_EQ(rd_stream_next(s, &it, 30000), 0);
  rd_ref_release(it);
  CHECK_EQ(rd_stream_next(s, &it, 30000), RD_EEND);
  rd_ref_release(s);
  rd_shutdown();
  return 0;
}

static const rd_test_case tests[] = {
    {"basic", t_basic},   {"window", t_window}, {"failure", t_failure}, {"retry", t_retry},
    {"cancel", t_cancel}, {"actor", t_actor},   {"nested", t_nested},   {"errors", t_errors},
    {"exclusive", t_exclusive}, {"any", t_any}, {"actor_restart", t_actor_restart},
    {"owner_dies", t_owner_dies}, {"burst", t_burst}, {"alloc", t_alloc},
};

RD_TEST_MAIN(tests)
