/* tests/memhog.h - a task that takes a given amount of memory, for the tests
 * of the memory monitor (rt_test, cluster_test).  Include once per program,
 * after raydist.h.  Tests only. */
#ifndef RD_TESTS_MEMHOG_H
#define RD_TESTS_MEMHOG_H

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Takes `mb` MiB, 16 MiB at a time, touching every page, holds it hold_ms
 * milliseconds, frees it and returns mb. */
static int hog_run(rd_call *call, long mb, long hold_ms) {
  char *blocks[256];
  long n = 0;
  for (; n < mb / 16 && n < 256; n++) {
    blocks[n] = malloc(16u << 20);
    if (!blocks[n]) break;
    memset(blocks[n], (int)n + 1, 16u << 20);
    usleep(10000);
  }
  usleep((useconds_t)hold_ms * 1000);
  for (long i = 0; i < n; i++) free(blocks[i]);
  return rd_return_bytes(call, 0, &mb, sizeof(mb));
}

/* Argument i of call as a long, or -1. */
static long hog_arg(rd_call *call, int i) {
  rd_buf a;
  long v;
  if (rd_arg(call, i, &a) || a.size != sizeof(long)) return -1;
  memcpy(&v, a.data, sizeof(v));
  return v;
}

/* `mb` MiB (argument 0, a long) for 300 ms, while the monitor looks.  The
 * body of the task hog and of actor methods. */
static int hog_fn(rd_call *call) {
  long mb = hog_arg(call, 0);
  return mb < 0 ? rd_call_fail(call, "args") : hog_run(call, mb, 300);
}

RD_REMOTE(hog) { return hog_fn(call); }

/* `mb` MiB (argument 0) for `ms` milliseconds (argument 1), both longs. */
RD_REMOTE(hog_hold) {
  long mb = hog_arg(call, 0), ms = hog_arg(call, 1);
  return mb < 0 || ms < 0 ? rd_call_fail(call, "args") : hog_run(call, mb, ms);
}

#endif
