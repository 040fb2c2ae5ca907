/* bench/vs_ray/first_task.c - time from nothing to a first task's result:
 * rd_init (start an embedded single-node cluster), one no-op task and its
 * rd_get, then rd_shutdown, in one fresh process.  run.sh runs it several
 * times, each in a new process, as it does for ray.init + one remote call.
 * Prints one line "first_task init_s=... first_result_s=... shutdown_s=...
 * total_s=..." (seconds from before rd_init).  A benchmark: it checks nothing. */
#include <raydist.h>

#include <stdio.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

RD_REMOTE(first_noop) { return rd_return_bytes(call, 0, "", 0); }

int main(void) {
  double t0 = now();
  int r = rd_init(NULL);   /* in a worker this never returns */
  if (r != 0) {
    fprintf(stderr, "rd_init: %s\n", rd_strerror(r));
    return 1;
  }
  double t_init = now();
  rd_ref ref;
  rd_buf b;
  r = rd_submit(first_noop, RD_NO_ARGS, NULL, &ref);
  if (r == 0) r = rd_get(&ref, 1, &b, RD_TIMEOUT_INF);
  if (r != 0) {
    fprintf(stderr, "first task: %s\n", rd_strerror(r));
    rd_shutdown();
    return 1;
  }
  double t_task = now();
  rd_buf_release(&b);
  rd_ref_release(ref);
  rd_shutdown();
  double t_end = now();
  printf("first_task init_s=%.6f first_result_s=%.6f shutdown_s=%.6f total_s=%.6f\n", t_init - t0, t_task - t0,
         t_end - t_task, t_end - t0);
  return 0;
}
