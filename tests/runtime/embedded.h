/* tests/runtime/embedded.h - helpers of the test programs that each run an
 * embedded cluster of their own (borrow_test.c, stream_test.c,
 * nested_test.c): the clock every process shares, a long argument, rd_init
 * or exit, an actor call or exit, and the store's use (now, or once deletes
 * have landed).  Tests only. */
#ifndef RD_TESTS_EMBEDDED_H
#define RD_TESTS_EMBEDDED_H

#include <raydist.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../check.h"

/* CLOCK_MONOTONIC: one clock for the driver and its workers. */
static inline double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Argument i as a long, -1 when it is not one. */
static inline long arg_long(rd_call *call, size_t i) {
  rd_buf b;
  long v = -1;
  if (rd_arg(call, i, &b) == 0 && b.size == sizeof(long)) memcpy(&v, b.data, sizeof(v));
  return v;
}

/* An embedded cluster of `cpus` CPUs and a 128 MiB store, or exit. */
static inline void init_or_die(double cpus) {
  rd_config cfg;
  rd_config_init(&cfg);
  cfg.num_cpus = cpus;
  cfg.object_store_bytes = 128u << 20;
  int r = rd_init(&cfg);
  if (r != 0) {
    fprintf(stderr, "rd_init: %s\n", rd_strerror(r));
    exit(1);
  }
}

/* The node's store use once it reaches 0, or after 2 s (deletes travel
 * with the next flush, so they lag the last release a little). */
static inline uint64_t store_used_settled(void) {
  rd_node_info ni;
  for (int i = 0; i < 100; i++) {
    CHECK_EQ(rd_node_info_get(&ni), 0);
    if (ni.store_used == 0) break;
    usleep(20000);
  }
  return ni.store_used;
}

/* The node's store use now. */
static inline uint64_t store_used_now(void) {
  rd_node_info ni;
  CHECK_EQ(rd_node_info_get(&ni), 0);
  return ni.store_used;
}

/* Call method m of actor a and copy its result (size bytes) to out, or exit. */
static inline void call_or_die(rd_actor a, const rd_actor_method *m, const rd_value *args, size_t nargs,
                               void *out, size_t size) {
  rd_ref r;
  CHECK_EQ(rd_actor_call(a, m, args, nargs, NULL, &r), 0);
  rd_buf b;
  int e = rd_get(&r, 1, &b, 60000);
  if (e != 0) {
    fprintf(stderr, "%s: %s: %.*s\n", m->name, rd_err_name(e), (int)b.size, (const char *)b.data);
    exit(1);
  }
  if (out) {
    CHECK_EQ(b.size, size);
    memcpy(out, b.data, size);
  }
  rd_buf_release(&b);
  rd_ref_release(r);
}

#endif
