/* tests/memhog.h - a task that takes a given amount of memory, for the tests
 * of the memory monitor (rt_test, cluster_test).  Include once per program,
 * after raydist.h.  Tests only. */
#ifndef RD_TESTS_MEMHOG_H
#define RD_TESTS_MEMHOG_H

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Takes `mb` MiB (argument 0, a long), 16 MiB at a time, touching every
 * page, then returns mb.  The body of the task hog and of actor methods. */
static int hog_fn(rd_call *call) {
  rd_buf a;
  if (rd_arg(call, 0, &a) || a.size != sizeof(long)) return rd_call_fail(call, "args");
  long mb;
  memcpy(&mb, a.data, sizeof(mb));
  char *blocks[256];
  long n = 0;
  for (; n < mb / 16 && n < 256; n++) {
    blocks[n] = malloc(16u << 20);
    if (!blocks[n]) break;
    memset(blocks[n], (int)n + 1, 16u << 20);
    usleep(10000);
  }
  usleep(300000);   /* hold it while the monitor looks */
  for (long i = 0; i < n; i++) free(blocks[i]);
  return rd_return_bytes(call, 0, &mb, sizeof(mb));
}

RD_REMOTE(hog) { return hog_fn(call); }

#endif
