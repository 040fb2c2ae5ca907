/* bench/gcs/gcs_bench.c - what persistence costs the GCS and what a restart
 * costs: KV puts, actor registrations and node heartbeats per second from
 * one client against `raydist gcs --storage memory` and `--storage
 * file:PATH`, side by side in one run, then the time a GCS killed with
 * SIGKILL takes to serve again on a log of --records KV entries, and the
 * log's size.  The GCS runs as a child (posix_spawn: this process runs
 * gRPC and must not fork).  Prints a table; a program, not a test.
 *
 *   gcs_bench [--duration S] [--records N] [--raydist PATH] */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gcs_client.h"
#include "raydist.h"

extern char **environ;

#define TOKEN "gcs-bench-token-0123456789"
#define DIE(...) do { fprintf(stderr, "gcs_bench: " __VA_ARGS__); fprintf(stderr, "\n"); exit(1); } while (0)

static const char *g_bin = RD_BENCH_RAYDIST;
static char g_dir[64];

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct gcs_child {
  pid_t pid;
  char addr[64];
} gcs_child;

/* Starts `raydist gcs` on bind with storage and waits until it serves. */
static void gcs_spawn(gcs_child *c, const char *bind, const char *storage) {
  char tok[128], portf[128], fdbuf[16], logf[128];
  snprintf(tok, sizeof(tok), "%s/token", g_dir);
  snprintf(portf, sizeof(portf), "%s/port", g_dir);
  snprintf(logf, sizeof(logf), "%s/gcs.log", g_dir);
  FILE *f = fopen(tok, "w");
  if (!f || fprintf(f, "%s\n", TOKEN) < 0 || fclose(f) != 0) DIE("cannot write %s", tok);
  int p[2];
  if (pipe(p) != 0) DIE("pipe");
  snprintf(fdbuf, sizeof(fdbuf), "%d", p[1]);
  char *argv[] = {(char *)g_bin, "gcs", "--bind", (char *)bind, "--token-file", tok, "--port-file", portf,
                  "--ready-fd", fdbuf, "--storage", (char *)storage, "--heartbeat-timeout-ms", "600000", NULL};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addclose(&fa, p[0]);
  posix_spawn_file_actions_addopen(&fa, 2, logf, O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (posix_spawn(&c->pid, g_bin, &fa, NULL, argv, environ) != 0) DIE("cannot run %s", g_bin);
  posix_spawn_file_actions_destroy(&fa);
  close(p[1]);
  char r = 0;
  if (read(p[0], &r, 1) != 1 || r != 'R') DIE("the GCS did not start (see %s)", logf);
  close(p[0]);
  int port = 0;
  f = fopen(portf, "r");
  if (!f || fscanf(f, "%d", &port) != 1) DIE("no port");
  fclose(f);
  snprintf(c->addr, sizeof(c->addr), "127.0.0.1:%d", port);
}

static void gcs_end(gcs_child *c, int sig) {
  kill(c->pid, sig);
  waitpid(c->pid, NULL, 0);
}

static rd_gcs *gcs_connect(const gcs_child *c) {
  rd_gcs *g = NULL;
  char err[256];
  if (rd_gcs_connect(c->addr, TOKEN, 5000, &g, err, sizeof(err)) != 0) DIE("connect: %s", err);
  return g;
}

typedef struct rates {
  double kv, actors, heartbeats;
} rates;

static rates measure(const gcs_child *c, double dur) {
  rd_gcs *g = gcs_connect(c);
  rates r;
  char val[200];
  memset(val, 'v', sizeof(val));
  long n = 0;
  double t0 = now();
  while (now() - t0 < dur) {
    char key[32];
    snprintf(key, sizeof(key), "k%ld", n % 1000);
    if (rd_gcs_kv_put(g, "bench", key, val, sizeof(val), 1) != 0) DIE("kv put");
    n++;
  }
  r.kv = n / (now() - t0);
  n = 0;
  t0 = now();
  while (now() - t0 < dur) {
    char name[32];
    snprintf(name, sizeof(name), "a%ld", n);
    if (rd_gcs_actor_register(g, (uint64_t)n + 1, name, "Bench", 0, 0) != 0) DIE("actor register");
    n++;
  }
  r.actors = n / (now() - t0);
  rd_gcs_node self;
  memset(&self, 0, sizeof(self));
  snprintf(self.ip, sizeof(self.ip), "127.0.0.1");
  self.total.cpu = 8 * RD_RES_UNIT;
  uint32_t idx = 0;
  char err[256];
  if (rd_gcs_register_node(g, &self, &idx, err, sizeof(err)) != 0) DIE("register: %s", err);
  n = 0;
  t0 = now();
  while (now() - t0 < dur) {
    rd_resources av = self.total;
    av.cpu = (n % 8) * RD_RES_UNIT;
    if (rd_gcs_heartbeat(g, idx, &av, n % 5, (uint64_t)n, NULL) != 0) DIE("heartbeat");
    n++;
  }
  r.heartbeats = n / (now() - t0);
  rd_gcs_close(g);
  return r;
}

int main(int argc, char **argv) {
  double dur = 2;
  long records = 100000;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--duration") && i + 1 < argc) dur = atof(argv[++i]);
    else if (!strcmp(argv[i], "--records") && i + 1 < argc) records = atol(argv[++i]);
    else if (!strcmp(argv[i], "--raydist") && i + 1 < argc) g_bin = argv[++i];
    else DIE("usage: gcs_bench [--duration S] [--records N] [--raydist PATH]");
  }
  snprintf(g_dir, sizeof(g_dir), "/tmp/gcs_bench.XXXXXX");
  if (!mkdtemp(g_dir)) DIE("mkdtemp");
  char storage[128], logpath[96];
  snprintf(logpath, sizeof(logpath), "%s/gcs.db", g_dir);
  snprintf(storage, sizeof(storage), "file:%s", logpath);

  /* memory and file side by side, twice, alternating */
  rates m[2], f[2];
  for (int round = 0; round < 2; round++) {
    gcs_child c;
    gcs_spawn(&c, "127.0.0.1:0", "memory");
    m[round] = measure(&c, dur);
    gcs_end(&c, SIGTERM);
    unlink(logpath);
    gcs_spawn(&c, "127.0.0.1:0", storage);
    f[round] = measure(&c, dur);
    gcs_end(&c, SIGTERM);
    unlink(logpath);
  }
  printf("one client, sequential calls, %.1f s each, two rounds (memory, file alternating):\n", dur);
  printf("%-28s %14s %14s %8s\n", "call", "memory /s", "file /s", "file/mem");
  const char *names[3] = {"KvPut (200 B)", "ActorRegister (named)", "Heartbeat"};
  for (int k = 0; k < 3; k++) {
    double mv = 0, fv = 0;
    for (int r = 0; r < 2; r++) {
      mv += k == 0 ? m[r].kv : k == 1 ? m[r].actors : m[r].heartbeats;
      fv += k == 0 ? f[r].kv : k == 1 ? f[r].actors : f[r].heartbeats;
    }
    printf("%-28s %14.0f %14.0f %8.2f\n", names[k], mv / 2, fv / 2, fv / mv);
  }

  /* a restart on a log of `records` KV entries */
  gcs_child c;
  gcs_spawn(&c, "127.0.0.1:0", storage);
  char bind[64];
  snprintf(bind, sizeof(bind), "%s", c.addr);
  rd_gcs *g = gcs_connect(&c);
  char val[200];
  memset(val, 'r', sizeof(val));
  double t0 = now();
  for (long i = 0; i < records; i++) {
    char key[32];
    snprintf(key, sizeof(key), "r%ld", i);
    if (rd_gcs_kv_put(g, "bench", key, val, sizeof(val), 1) != 0) DIE("kv put");
  }
  double fill = now() - t0;
  gcs_end(&c, SIGKILL);
  struct stat st;
  if (stat(logpath, &st) != 0) DIE("no log");
  t0 = now();
  gcs_spawn(&c, bind, storage);
  double restart = now() - t0;
  void *v = NULL;
  size_t vlen = 0;
  char key[32];
  snprintf(key, sizeof(key), "r%ld", records - 1);
  int rc = -1;
  for (int i = 0; i < 200 && rc != 0; i++) {   /* the old channel reconnects */
    rc = rd_gcs_kv_get(g, "bench", key, &v, &vlen);
    if (rc) usleep(10000);
  }
  double first = now() - t0;
  if (rc != 0 || vlen != sizeof(val)) DIE("the last record did not come back");
  free(v);
  rd_gcs_close(g);
  gcs_end(&c, SIGTERM);
  printf("\nrestart after SIGKILL with %ld KV records (%.1f MB log, written at %.0f puts/s):\n", records,
         st.st_size / 1e6, records / fill);
  printf("  serving again %.3f s after the new process started; the old client's channel read the last record "
         "after %.3f s\n", restart, first);
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", g_dir);
  if (system(cmd) != 0) fprintf(stderr, "gcs_bench: cannot remove %s\n", g_dir);
  return 0;
}
