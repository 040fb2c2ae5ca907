/* tests/pidfile.h - tasks for the tests of rd_cancel (rt_test,
 * cluster_test): one that tells the test which worker process runs it (its
 * pid, through a file) for cancels with force, and one that stops early when
 * cancelled without.  Include once per program,
 * after raydist.h and check.h.  Tests only. */
#ifndef RD_TESTS_PIDFILE_H
#define RD_TESTS_PIDFILE_H

#include <errno.h>
#include <signal.h>
#include <unistd.h>

/* Writes its pid to the file named by argument 0, then sleeps argument 1
 * (a long) ms. */
RD_REMOTE(pid_file_sleep) {
  rd_buf p, a;
  if (rd_arg(call, 0, &p) || rd_arg(call, 1, &a) || a.size != sizeof(long)) return rd_call_fail(call, "args");
  char path[256], tmp[270];
  snprintf(path, sizeof(path), "%.*s", (int)p.size, (const char *)p.data);
  snprintf(tmp, sizeof(tmp), "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) return rd_call_fail(call, "cannot write %s", tmp);
  fprintf(f, "%d\n", (int)getpid());
  fclose(f);
  rename(tmp, path);
  long ms;
  memcpy(&ms, a.data, sizeof(ms));
  usleep((useconds_t)(ms * 1000));
  return rd_return_bytes(call, 0, &ms, sizeof(ms));
}

/* Works (sleeps) up to argument 0 (a long) ms, looking at rd_call_cancelled;
 * fails with "stopped early" when its owner cancelled it. */
RD_REMOTE(until_cancelled) {
  rd_buf a;
  if (rd_arg(call, 0, &a) || a.size != sizeof(long)) return rd_call_fail(call, "args");
  long ms;
  memcpy(&ms, a.data, sizeof(ms));
  for (long i = 0; i < 2 * ms; i++) {
    if (rd_call_cancelled(call)) return rd_call_fail(call, "stopped early");
    usleep(500);
  }
  return rd_return_bytes(call, 0, &ms, sizeof(ms));
}

/* The pid that r's task (pid_file_sleep on path) wrote, within 15 s. */
static int pid_file_wait(const char *path, rd_ref r) {
  int pid = 0;
  for (int i = 0; i < 300 && !pid; i++) {
    FILE *fp = fopen(path, "r");
    if (fp) {
      if (fscanf(fp, "%d", &pid) != 1) pid = 0;
      fclose(fp);
    }
    if (!pid) CHECK_EQ(rd_wait(&r, 1, 1, 50, NULL), 0);
  }
  unlink(path);
  return pid;
}

/* 1 once process pid no longer exists (within 5 s). */
static int pid_gone(int pid) {
  for (int i = 0; i < 100; i++) {
    if (kill(pid, 0) != 0 && errno == ESRCH) return 1;
    usleep(50000);
  }
  return 0;
}

#endif
