/* tests/cluster/session.h - where the daemons of cluster_test.sh's cluster
 * keep their sessions (under RAYDIST_TMPDIR, as `raydist start` makes them),
 * for the drivers that kill those daemons (cluster_test, chaos).  Tests
 * only. */
#ifndef RD_TESTS_CLUSTER_SESSION_H
#define RD_TESTS_CLUSTER_SESSION_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The path of `file` in the session of the node on `ip`. */
static inline void session_path(char *buf, size_t len, const char *ip, const char *file) {
  const char *base = getenv("RAYDIST_TMPDIR");
  snprintf(buf, len, "%s/raydist-%u/node-%s/%s", base && *base ? base : "/tmp", (unsigned)getuid(), ip, file);
}

/* The pid `raydist start` recorded for the node on `ip`; -1 when none. */
static inline int node_pid(const char *ip) {
  char path[512];
  session_path(path, sizeof(path), ip, "pids");
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char name[32];
  int pid, found = -1;
  unsigned long long st;
  while (fscanf(f, "%31s %d %llu", name, &pid, &st) == 3)
    if (!strcmp(name, "node")) found = pid;
  fclose(f);
  return found;
}

#endif
