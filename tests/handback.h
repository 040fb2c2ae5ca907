/* tests/handback.h - the two tasks of the blocked-worker hand-back tests
 * (rt_blocked_handback, cluster_nested): a task that dies on its first
 * attempt and one that waits for its result.  Include once per program,
 * after raydist.h.  Tests only. */
#ifndef RD_TESTS_HANDBACK_H
#define RD_TESTS_HANDBACK_H

#include <signal.h>
#include <unistd.h>

/* hb_make(mode): returns mode + 1; mode 1 on its first attempt sleeps
 * 150 ms and dies (SIGKILL) instead. */
RD_REMOTE(hb_make) {
  long mode;
  if (rd_arg_copy(call, 0, &mode, sizeof(mode)) != 0) return rd_call_fail(call, "args");
  if (mode == 1 && rd_call_attempt(call) == 0) {
    usleep(150 * 1000);
    raise(SIGKILL);
  }
  long v = mode + 1;
  return rd_return_bytes(call, 0, &v, sizeof(v));
}

/* hb_read(borrowed ref): its value (a long), waited for up to 20 s. */
RD_REMOTE(hb_read) {
  rd_ref r;
  if (rd_call_arg_ref(call, 0, &r) != 0) return rd_call_fail(call, "args");
  rd_buf b;
  int e = rd_get(&r, 1, &b, 20000);
  rd_ref_release(r);
  if (e != 0) return rd_call_fail(call, "get: %s", rd_err_name(e));
  int rc = rd_return_bytes(call, 0, b.data, b.size);
  rd_buf_release(&b);
  return rc;
}

#endif
