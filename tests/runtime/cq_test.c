/* tests/runtime/cq_test.c - completion queues (rd_cq_*) through the public
 * API, in real worker processes: tags of refs that become ready reach an
 * event loop through the queue's fd, in the order they became ready, with
 * the failure of a failed task; the fd is readable exactly while events
 * wait; results arrive while no thread is inside the library (the progress
 * thread); a queue holds its objects, frees them when destroyed, closes at
 * rd_shutdown; a task uses one for its own subtasks; 20,000 tasks through
 * one queue; misuse.
 * `cq_test NAME` runs one case; the binary is re-executed as workers. */
#include <raydist.h>

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "../check.h"
#include "embedded.h"

/* Sleep arg0 ms, then return arg1 (a long). */
RD_REMOTE(nap_echo) {
  long ms = arg_long(call, 0), v = arg_long(call, 1);
  if (ms < 0 || v < 0) return rd_call_fail(call, "bad args");
  usleep((useconds_t)ms * 1000u);
  return rd_return_bytes(call, 0, &v, sizeof(v));
}

RD_REMOTE(fail_after) {
  long ms = arg_long(call, 0);
  usleep((useconds_t)(ms > 0 ? ms : 0) * 1000u);
  return rd_call_fail(call, "failed on purpose after %ld ms", ms);
}

/* A result of arg0 bytes in the store, after arg1 ms. */
RD_REMOTE(big_after_ms) {
  long n = arg_long(call, 0), ms = arg_long(call, 1);
  usleep((useconds_t)(ms > 0 ? ms : 0) * 1000u);
  void *p = rd_return_alloc(call, 0, (size_t)n);
  if (!p) return rd_call_fail(call, "no room");
  memset(p, 7, (size_t)n);
  return 0;
}

static rd_ref nap(long ms, long v) {
  rd_ref r;
  CHECK_EQ(rd_submit(nap_echo, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms)), rd_arg_bytes(&v, sizeof(v))), NULL, &r), 0);
  return r;
}

static long value_of(rd_ref r) {
  rd_buf b;
  CHECK_EQ(rd_get(&r, 1, &b, 30000), 0);
  CHECK_EQ(b.size, sizeof(long));
  long v;
  memcpy(&v, b.data, sizeof(v));
  rd_buf_release(&b);
  return v;
}

static int readable(int fd, int ms) {
  struct pollfd p = {fd, POLLIN, 0};
  return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

/* Tasks of different lengths: their tags come through the fd in the order
 * they finish, each once, with a reference that reads the value; the
 * program released its own refs right after adding them.  Readable exactly
 * while events wait; a take of fewer than wait leaves the rest. */
static int t_basic(void) {
  init_or_die(4);
  rd_cq *cq;
  CHECK_EQ(rd_cq_create(&cq), 0);
  int fd = rd_cq_fd(cq);
  CHECK(fd >= 0);
  CHECK(!readable(fd, 0));
  rd_cq_event ev[8];
  CHECK_EQ(rd_cq_take(cq, ev, 8, 0), RD_EEND);   /* nothing added */
  long ms[4] = {2400, 100, 1600, 800};          /* finish: 1, 3, 2, 0 (0.7 s apart: room for slow starts) */
  for (long i = 0; i < 4; i++) {
    rd_ref r = nap(ms[i], 100 + i);
    CHECK_EQ(rd_cq_add(cq, r, (uint64_t)i), 0);
    rd_ref_release(r);   /* the queue keeps the object */
  }
  CHECK_EQ(rd_cq_size(cq), 4);
  CHECK_EQ(rd_cq_take(cq, ev, 8, 0), 0);   /* none ready yet */
  long order[4];
  int got = 0;
  while (got < 4) {
    /* only poll(): no thread of this program is inside the library */
    CHECK(readable(fd, 10000));
    int n = rd_cq_take(cq, ev, 1, 0);   /* one at a time */
    CHECK_EQ(n, 1);
    CHECK_EQ(ev[0].status, 0);
    CHECK(ev[0].tag < 4);
    CHECK_EQ(value_of(ev[0].ref), 100 + (long)ev[0].tag);
    rd_ref_release(ev[0].ref);
    order[got++] = (long)ev[0].tag;
  }
  CHECK(order[0] == 1 && order[1] == 3 && order[2] == 2 && order[3] == 0);
  CHECK(!readable(fd, 0));
  CHECK_EQ(rd_cq_size(cq), 0);
  CHECK_EQ(rd_cq_take(cq, ev, 8, 100), RD_EEND);
  /* ready already: queued at once; the same ref twice; two waiting, one taken */
  rd_ref p;
  long v = 42;
  CHECK_EQ(rd_put(&v, sizeof(v), &p), 0);
  CHECK_EQ(rd_cq_add(cq, p, 7), 0);
  CHECK_EQ(rd_cq_add(cq, p, 8), 0);
  CHECK(readable(fd, 0));
  CHECK_EQ(rd_cq_take(cq, ev, 1, 0), 1);
  CHECK_EQ(ev[0].tag, 7);
  CHECK(readable(fd, 0));   /* the second still waits */
  CHECK_EQ(rd_cq_take(cq, ev + 1, 1, 0), 1);
  CHECK_EQ(ev[1].tag, 8);
  CHECK(!readable(fd, 0));
  CHECK_EQ(value_of(ev[1].ref), 42);
  rd_ref_release(ev[0].ref);
  rd_ref_release(ev[1].ref);
  rd_ref_release(p);
  rd_cq_destroy(cq);
  CHECK_EQ(store_used_settled(), 0);
  rd_shutdown();
  return 0;
}

/* A failed task's event carries its error; rd_get on the ref gives the
 * message. */
static int t_failure(void) {
  init_or_die(2);
  rd_cq *cq;
  CHECK_EQ(rd_cq_create(&cq), 0);
  long ms = 50;
  rd_ref r;
  CHECK_EQ(rd_submit(fail_after, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms))), NULL, &r), 0);
  CHECK_EQ(rd_cq_add(cq, r, 99), 0);
  rd_cq_event ev;
  CHECK_EQ(rd_cq_take(cq, &ev, 1, 30000), 1);   /* blocking take */
  CHECK_EQ(ev.tag, 99);
  CHECK_EQ(ev.status, RD_ETASK);
  rd_buf b;
  CHECK_EQ(rd_get(&ev.ref, 1, &b, 1000), RD_ETASK);
  CHECK(strstr((const char *)b.data, "failed on purpose") != NULL);
  rd_buf_release(&b);
  rd_ref_release(ev.ref);
  rd_ref_release(r);
  rd_cq_destroy(cq);
  rd_shutdown();
  return 0;
}

/* Misuse: clear errors, nothing taken or kept. */
static int t_errors(void) {
  rd_cq *cq = (rd_cq *)1;
  CHECK_EQ(rd_cq_create(&cq), RD_ESTATE);   /* before rd_init */
  CHECK(cq == NULL);
  init_or_die(2);
  CHECK_EQ(rd_cq_create(NULL), RD_EINVAL);
  CHECK_EQ(rd_cq_fd(NULL), -1);
  CHECK_EQ(rd_cq_size(NULL), 0);
  rd_cq_destroy(NULL);
  CHECK_EQ(rd_cq_create(&cq), 0);
  rd_ref bogus = {0x7777777777ull};
  CHECK_EQ(rd_cq_add(cq, bogus, 1), RD_EINVAL);
  rd_ref r = nap(0, 5);
  CHECK_EQ(rd_cq_add(NULL, r, 1), RD_EINVAL);
  CHECK_EQ(rd_cq_take(NULL, NULL, 0, 0), RD_EINVAL);
  rd_cq_event ev;
  CHECK_EQ(rd_cq_take(cq, NULL, 1, 0), RD_EINVAL);
  CHECK_EQ(rd_cq_size(cq), 0);
  CHECK_EQ(rd_cq_add(cq, r, 1), 0);
  CHECK_EQ(rd_cq_take(cq, &ev, 0, 5000), 0);   /* room for none: nothing taken, no wait */
  CHECK_EQ(rd_cq_take(cq, &ev, 1, 30000), 1);
  rd_ref_release(ev.ref);
  rd_ref_release(r);
  rd_cq_destroy(cq);
  rd_shutdown();
  return 0;
}

/* rd_cq_destroy with adds pending and events untaken drops their
 * references: the store empties once the tasks are done. */
static int t_destroy(void) {
  init_or_die(2);
  rd_cq *cq;
  CHECK_EQ(rd_cq_create(&cq), 0);
  long n = 2 << 20, ms0 = 0, ms1 = 400;
  rd_ref a, b;
  CHECK_EQ(rd_submit(big_after_ms, RD_ARGS(rd_arg_bytes(&n, sizeof(n)), rd_arg_bytes(&ms0, sizeof(ms0))), NULL, &a), 0);
  CHECK_EQ(rd_submit(big_after_ms, RD_ARGS(rd_arg_bytes(&n, sizeof(n)), rd_arg_bytes(&ms1, sizeof(ms1))), NULL, &b), 0);
  CHECK_EQ(rd_cq_add(cq, a, 1), 0);
  CHECK_EQ(rd_cq_add(cq, b, 2), 0);
  rd_ref_release(a);
  rd_ref_release(b);
  CHECK(readable(rd_cq_fd(cq), 10000));   /* a's event waits, b's add is pending */
  CHECK_EQ(rd_cq_size(cq), 2);
  CHECK(store_used_now() >= (uint64_t)n);
  rd_cq_destroy(cq);
  usleep(600 * 1000);   /* b ends with nothing holding it */
  CHECK_EQ(store_used_settled(), 0);
  rd_shutdown();
  return 0;
}

/* rd_shutdown closes a queue: its fd turns readable, a take says
 * RD_ESTATE, adds are refused, and destroy still frees it. */
static int t_shutdown(void) {
  init_or_die(2);
  rd_cq *cq;
  CHECK_EQ(rd_cq_create(&cq), 0);
  rd_ref r = nap(5000, 1);
  CHECK_EQ(rd_cq_add(cq, r, 1), 0);
  CHECK(!readable(rd_cq_fd(cq), 0));
  rd_shutdown();
  CHECK(readable(rd_cq_fd(cq), 0));
  rd_cq_event ev;
  CHECK_EQ(rd_cq_take(cq, &ev, 1, 1000), RD_ESTATE);
  CHECK_EQ(rd_cq_add(cq, r, 2), RD_ESTATE);
  rd_cq_destroy(cq);
  init_or_die(2);   /* a new session's queues start afresh */
  CHECK_EQ(rd_cq_create(&cq), 0);
  r = nap(0, 3);
  CHECK_EQ(rd_cq_add(cq, r, 3), 0);
  CHECK_EQ(rd_cq_take(cq, &ev, 1, 30000), 1);
  CHECK_EQ(value_of(ev.ref), 3);
  rd_ref_release(ev.ref);
  rd_ref_release(r);
  rd_cq_destroy(cq);
  rd_shutdown();
  return 0;
}

typedef struct taker {
  rd_cq *cq;
  long sum;
  int n;
} taker;

static void *take_all(void *arg) {
  taker *t = arg;
  rd_cq_event ev[16];
  while (t->n < 50) {
    int k = rd_cq_take(t->cq, ev, 16, RD_TIMEOUT_INF);
    if (k == RD_EEND) {   /* between adds */
      usleep(1000);
      continue;
    }
    if (k < 0) break;
    for (int i = 0; i < k; i++) {
      t->sum += value_of(ev[i].ref);
      rd_ref_release(ev[i].ref);
    }
    t->n += k;
  }
  return NULL;
}

/* One thread blocks in rd_cq_take while another submits and adds. */
static int t_threads(void) {
  init_or_die(2);
  rd_cq *cq;
  CHECK_EQ(rd_cq_create(&cq), 0);
  rd_ref first = nap(300, 0);
  CHECK_EQ(rd_cq_add(cq, first, 0), 0);
  taker t = {cq, 0, 0};
  pthread_t th;
  CHECK_EQ(pthread_create(&th, NULL, take_all, &t), 0);
  long want = 0;
  for (long i = 1; i < 50; i++) {
    rd_ref r = nap(i % 7, i);
    CHECK_EQ(rd_cq_add(cq, r, (uint64_t)i), 0);
    rd_ref_release(r);
    want += i;
  }
  pthread_join(th, NULL);
  CHECK_EQ(t.n, 50);
  CHECK_EQ(t.sum, want);
  rd_ref_release(first);
  rd_cq_destroy(cq);
  rd_shutdown();
  return 0;
}

/* Inside a task: a queue over its own subtasks. */
RD_REMOTE(fan_in) {
  rd_cq *cq;
  if (rd_cq_create(&cq) != 0) return rd_call_fail(call, "rd_cq_create");
  for (long i = 0; i < 5; i++) {   /* 3 CPUs free: 0-2 start at once, the last added ends first */
    rd_ref r = nap(i == 2 ? 0 : 2000, i * i);
    if (rd_cq_add(cq, r, (uint64_t)i) != 0) return rd_call_fail(call, "rd_cq_add");
    rd_ref_release(r);
  }
  long sum = 0, first = -1;
  rd_cq_event ev[5];
  int got = 0;
  while (got < 5) {
    int k = rd_cq_take(cq, ev, 5, 30000);
    if (k <= 0) return rd_call_fail(call, "rd_cq_take: %s", rd_err_name(k));
    for (int i = 0; i < k; i++) {
      if (first < 0) first = (long)ev[i].tag;
      rd_buf b;
      if (rd_get(&ev[i].ref, 1, &b, 30000) != 0) return rd_call_fail(call, "rd_get");
      long v;
      memcpy(&v, b.data, sizeof(v));
      sum += v;
      rd_buf_release(&b);
      rd_ref_release(ev[i].ref);
    }
    got += k;
  }
  rd_cq_destroy(cq);
  long out[2] = {sum, first};
  return rd_return_bytes(call, 0, out, sizeof(out));
}

static int t_in_task(void) {
  init_or_die(4);
  rd_ref r;
  CHECK_EQ(rd_submit(fan_in, RD_NO_ARGS, NULL, &r), 0);
  rd_buf b;
  CHECK_EQ(rd_get(&r, 1, &b, 60000), 0);
  long out[2];
  CHECK_EQ(b.size, sizeof(out));
  memcpy(out, b.data, sizeof(out));
  CHECK_EQ(out[0], 0 + 1 + 4 + 9 + 16);
  CHECK_EQ(out[1], 2);   /* the short one came first */
  rd_buf_release(&b);
  rd_ref_release(r);
  rd_shutdown();
  return 0;
}

/* 20,000 tasks consumed through epoll and the queue, 256 at a time, while
 * the driver keeps submitting: each tag once, the sum right. */
static int t_many(void) {
  init_or_die(2);
  rd_cq *cq;
  CHECK_EQ(rd_cq_create(&cq), 0);
  int ep = epoll_create1(0);
  CHECK(ep >= 0);
  struct epoll_event ee = {.events = EPOLLIN, .data.u64 = 1};
  CHECK_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, rd_cq_fd(cq), &ee), 0);
  enum { N = 20000 };
  static uint8_t seen[N];
  long submitted = 0, done = 0, want = 0, sum = 0;
  rd_cq_event ev[256];
  double t0 = now_s();
  while (done < N) {
    while (submitted < N && submitted - done < 2000) {   /* keep 2000 in flight */
      rd_ref r = nap(0, submitted);
      CHECK_EQ(rd_cq_add(cq, r, (uint64_t)submitted), 0);
      rd_ref_release(r);
      want += submitted++;
    }
    struct epoll_event out;
    CHECK(epoll_wait(ep, &out, 1, 30000) == 1);
    int k = rd_cq_take(cq, ev, 256, 0);
    CHECK(k >= 0);
    for (int i = 0; i < k; i++) {
      CHECK(ev[i].tag < N && !seen[ev[i].tag]);
      seen[ev[i].tag] = 1;
      CHECK_EQ(ev[i].status, 0);
      sum += value_of(ev[i].ref);
      rd_ref_release(ev[i].ref);
    }
    done += k;
  }
  printf("%d tasks through one queue in %.2f s\n", N, now_s() - t0);
  CHECK_EQ(sum, want);
  CHECK_EQ(rd_cq_take(cq, ev, 1, 0), RD_EEND);
  close(ep);
  rd_cq_destroy(cq);
  rd_shutdown();
  return 0;
}

/* Yield arg0 items (longs: arg1 * 1000 + i), arg2 ms apart; fail after
 * them when arg1 is negative. */
RD_REMOTE(tick_stream) {
  long n = arg_long(call, 0), ms = arg_long(call, 2);
  rd_buf b;
  long base = 0;
  if (rd_arg(call, 1, &b) == 0 && b.size == sizeof(long)) memcpy(&base, b.data, sizeof(base));
  for (long i = 0; i < n; i++) {
    usleep((useconds_t)ms * 1000u);
    long v = (base < 0 ? -base : base) * 1000 + i;
    if (rd_yield(call, &v, sizeof(v)) != 0) return 0;
  }
  if (base < 0) return rd_call_fail(call, "stream %ld failed after its items", -base);
  return 0;
}

static rd_ref ticks(long n, long base, long ms) {
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.num_returns = RD_STREAMING;
  rd_ref st;
  CHECK_EQ(rd_submit(tick_stream, RD_ARGS(rd_arg_bytes(&n, sizeof(n)), rd_arg_bytes(&base, sizeof(base)),
                                          rd_arg_bytes(&ms, sizeof(ms))), &o, &st), 0);
  return st;
}

/* Three streams multiplexed through one queue (rd_cq_add_stream, re-armed
 * after each drain): every item of each in order, each end seen, a failed
 * stream's failure; a plain add on a stream fires at its end only. */
static int t_stream(void) {
  init_or_die(4);
  rd_cq *cq;
  CHECK_EQ(rd_cq_create(&cq), 0);
  rd_ref st[3] = {ticks(15, 1, 30), ticks(8, 2, 100), ticks(5, -3, 60)};
  rd_ref plain = st[1];
  CHECK_EQ(rd_cq_add(cq, plain, 100), 0);   /* the end of stream 1 */
  for (int i = 0; i < 3; i++) CHECK_EQ(rd_cq_add_stream(cq, st[i], (uint64_t)i), 0);
  rd_ref not_stream = nap(0, 1);
  CHECK_EQ(rd_cq_add_stream(cq, not_stream, 9), RD_EINVAL);
  rd_ref_release(not_stream);
  long next[3] = {0, 0, 0};
  int ended[3] = {0, 0, 0}, plain_seen = 0, events = 0;
  int want_items[3] = {15, 8, 5};
  while (!(ended[0] && ended[1] && ended[2] && plain_seen)) {
    CHECK(readable(rd_cq_fd(cq), 30000));
    rd_cq_event ev[8];
    int k = rd_cq_take(cq, ev, 8, 0);
    CHECK(k > 0);
    for (int e = 0; e < k; e++) {
      events++;
      if (ev[e].tag == 100) {   /* a plain add: stream 1 is over */
        CHECK_EQ(ev[e].status, 0);
        CHECK_EQ(next[1], 8);   /* every item came before the end */
        plain_seen = 1;
        rd_ref_release(ev[e].ref);
        continue;
      }
      int i = (int)ev[e].tag;
      CHECK(i >= 0 && i < 3 && !ended[i]);
      rd_ref item;
      int r;
      while ((r = rd_stream_next(st[i], &item, 0)) == 0) {
        CHECK_EQ(value_of(item), (i == 2 ? 3 : i + 1) * 1000 + next[i]);
        rd_ref_release(item);
        next[i]++;
      }
      if (r == RD_ETIMEDOUT) {
        CHECK_EQ(ev[e].status, 0);
        CHECK_EQ(rd_cq_add_stream(cq, st[i], (uint64_t)i), 0);   /* re-arm */
      } else {
        CHECK_EQ(r, i == 2 ? RD_ETASK : RD_EEND);
        CHECK_EQ(next[i], want_items[i]);
        ended[i] = 1;
      }
      rd_ref_release(ev[e].ref);
    }
  }
  printf("28 items of 3 streams in %d events\n", events);
  CHECK(events >= 8);   /* items were heard as they came, not only at the ends (4 events) */
  CHECK_EQ(rd_cq_size(cq), 0);
  for (int i = 0; i < 3; i++) rd_ref_release(st[i]);
  rd_cq_destroy(cq);
  rd_shutdown();
  return 0;
}

static const rd_test_case tests[] = {
    {"basic", t_basic},         {"failure", t_failure}, {"errors", t_errors}, {"destroy", t_destroy},
    {"shutdown", t_shutdown},   {"threads", t_threads}, {"in_task", t_in_task}, {"many", t_many},
    {"stream", t_stream},
};

RD_TEST_MAIN(tests)
