/* bench/xfer/xfer_bench.c - how fast rd_xfer_pull moves one large object
 * between two processes, next to what plain loopback TCP between two
 * processes manages, so the ratio can be quoted (docs/objxfer.md).
 *
 * Both receive into the same pre-faulted buffer, so page faults count for
 * neither.  The serving process is started with posix_spawn (this process
 * runs gRPC and must not fork).  Prints a table; a program, not a test. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "objxfer.h"
#include "raydist.h"

extern char **environ;

#define TOKEN "xfer-bench-token"
#define OID 42
#define DIE(...) do { fprintf(stderr, "xfer_bench: " __VA_ARGS__); fprintf(stderr, "\n"); exit(1); } while (0)

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Pre-faulted memory filled with a pattern the receiver can spot-check. */
static uint8_t *make_buf(uint64_t size, int fill) {
  uint8_t *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) DIE("cannot map %llu bytes", (unsigned long long)size);
  if (fill)
    for (uint64_t i = 0; i < size; i += 4096) p[i] = (uint8_t)(i >> 12);
  else
    memset(p, 0, size);
  return p;
}

/* ---- the serving process ---- */

static uint8_t *g_obj;
static uint64_t g_size;

static int pin(void *arg, uint64_t oid, const uint8_t **data, uint64_t *size) {
  if (oid != OID) return RD_ENOENT;
  *data = g_obj;
  *size = g_size;
  return 0;
}
static void unpin(void *arg, uint64_t oid) {}

/* Serves until stdin closes; the port goes to stdout. */
static int serve(uint64_t size) {
  g_size = size;
  g_obj = make_buf(size, 1);
  rd_xfer_source_ops ops = {pin, unpin};
  rd_xfer_server *s;
  int port;
  char err[256];
  if (rd_xfer_server_start("127.0.0.1:0", TOKEN, &ops, NULL, &s, &port, err, sizeof(err)) != 0)
    DIE("server: %s", err);
  printf("%d\n", port);
  fflush(stdout);
  char c;
  while (read(0, &c, 1) > 0) {
  }
  rd_xfer_server_stop(s);
  return 0;
}

/* Connects to the port and writes size bytes in 1 MiB writes. */
static int tcp_send(int port, uint64_t size) {
  uint8_t *buf = make_buf(1 << 20, 1);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) DIE("tcp connect: %s", strerror(errno));
  for (uint64_t sent = 0; sent < size;) {
    size_t n = size - sent < (1u << 20) ? (size_t)(size - sent) : (1u << 20);
    ssize_t w = write(fd, buf, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) DIE("tcp write: %s", strerror(errno));
    sent += (uint64_t)w;
  }
  close(fd);
  return 0;
}

/* ---- the measuring process ---- */

static pid_t spawn_self(const char *self, char **argv, int *stdin_fd, int *stdout_fd) {
  int in[2], out[2];
  if (pipe(in) || pipe(out)) DIE("pipe");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addclose(&fa, in[1]);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  pid_t pid;
  if (posix_spawn(&pid, self, &fa, NULL, argv, environ) != 0) DIE("posix_spawn");
  posix_spawn_file_actions_destroy(&fa);
  close(in[0]);
  close(out[1]);
  *stdin_fd = in[1];
  *stdout_fd = out[0];
  return pid;
}

static uint8_t *g_dst;
static void *dst_alloc(void *arg, uint64_t size) { return size <= g_size ? g_dst : NULL; }

static double tcp_trial(const char *self, uint64_t size) {
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t al = sizeof(a);
  if (bind(ls, (struct sockaddr *)&a, sizeof(a)) || listen(ls, 1) || getsockname(ls, (struct sockaddr *)&a, &al))
    DIE("tcp listen: %s", strerror(errno));
  char port[16], sz[32];
  snprintf(port, sizeof(port), "%d", ntohs(a.sin_port));
  snprintf(sz, sizeof(sz), "%llu", (unsigned long long)size);
  char *argv[] = {(char *)self, "tcp_send", port, sz, NULL};
  int in, out;
  double t0 = now();
  pid_t pid = spawn_self(self, argv, &in, &out);
  int fd = accept(ls, NULL, NULL);
  double t1 = now();   /* count from the connection, like the pull (channel warm) */
  uint64_t got = 0;
  while (got < size) {
    size_t want = size - got < (1u << 20) ? (size_t)(size - got) : (1u << 20);
    ssize_t r = read(fd, g_dst + got, want);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) DIE("tcp read: %s", r ? strerror(errno) : "early EOF");
    got += (uint64_t)r;
  }
  double t2 = now();
  (void)t0;
  close(fd);
  close(ls);
  close(in);
  close(out);
  waitpid(pid, NULL, 0);
  return (double)size / (1 << 20) / (t2 - t1);
}

static void stats(const double *v, int n, double *mean, double *best) {
  *mean = 0;
  *best = 0;
  for (int i = 0; i < n; i++) {
    *mean += v[i] / n;
    if (v[i] > *best) *best = v[i];
  }
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "serve")) return serve(strtoull(argv[2], NULL, 10));
  if (argc == 4 && !strcmp(argv[1], "tcp_send")) return tcp_send(atoi(argv[2]), strtoull(argv[3], NULL, 10));
  uint64_t mib = 1024;
  int trials = 3;
  char streams_list[64] = "1,2,4,8";
  uint32_t chunk = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--size-mib") && i + 1 < argc) mib = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--trials") && i + 1 < argc) trials = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--streams") && i + 1 < argc) snprintf(streams_list, sizeof(streams_list), "%s", argv[++i]);
    else if (!strcmp(argv[i], "--chunk") && i + 1 < argc) chunk = (uint32_t)strtoul(argv[++i], NULL, 10);
    else {
      fprintf(stderr, "usage: xfer_bench [--size-mib N (1024)] [--trials N (3)] [--streams 1,2,4,8] [--chunk BYTES]\n");
      return 2;
    }
  }
  if (trials < 1 || trials > 50 || mib < 1) DIE("bad --trials or --size-mib");
  signal(SIGPIPE, SIG_IGN);
  uint64_t size = mib << 20;
  g_size = size;
  g_dst = make_buf(size, 0);
  const char *self = "/proc/self/exe";
  char exe[4096];
  ssize_t n = readlink(self, exe, sizeof(exe) - 1);
  if (n <= 0) DIE("readlink /proc/self/exe");
  exe[n] = 0;

  printf("xfer_bench: %llu MiB object, %d trials each, %ld CPUs, receiving into pre-faulted memory\n",
         (unsigned long long)mib, trials, sysconf(_SC_NPROCESSORS_ONLN));
  printf("%-28s %10s %10s\n", "path", "MiB/s mean", "MiB/s best");

  /* loopback TCP first: the reference */
  double v[50], mean, best, tcp_mean;
  tcp_trial(exe, size < (64u << 20) ? size : (64u << 20));   /* warm-up */
  for (int t = 0; t < trials; t++) v[t] = tcp_trial(exe, size);
  stats(v, trials, &tcp_mean, &best);
  printf("%-28s %10.0f %10.0f\n", "loopback TCP, 1 connection", tcp_mean, best);

  /* the transfer server in its own process */
  char szs[32];
  snprintf(szs, sizeof(szs), "%llu", (unsigned long long)size);
  char *sargv[] = {exe, "serve", szs, NULL};
  int sin, sout;
  pid_t spid = spawn_self(exe, sargv, &sin, &sout);
  char line[32] = {0};
  for (size_t i = 0; i < sizeof(line) - 1; i++) {
    if (read(sout, &line[i], 1) != 1 || line[i] == '\n') break;
  }
  char peer[64];
  snprintf(peer, sizeof(peer), "127.0.0.1:%d", atoi(line));
  if (chunk) {
    char cs[16];
    snprintf(cs, sizeof(cs), "%u", chunk);
    setenv("RAYDIST_XFER_CHUNK", cs, 1);
  }
  char list[64];
  snprintf(list, sizeof(list), "%s", streams_list);
  for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    setenv("RAYDIST_XFER_STREAMS", tok, 1);
    rd_xfer_client *c;
    if (rd_xfer_client_create(TOKEN, &c) != 0) DIE("client");
    char err[256];
    rd_xfer_stats st = {0};
    for (int t = -1; t < trials; t++) {   /* t = -1: warm-up (connection, windows) */
      memset(g_dst, 0, 4096);
      int rc = rd_xfer_pull(c, peer, OID, dst_alloc, NULL, 120000, &st, err, sizeof(err));
      if (rc) DIE("pull: %s (%s)", err, rd_err_name(rc));
      for (uint64_t i = 0; i < size; i += 4096)
        if (g_dst[i] != (uint8_t)(i >> 12)) DIE("wrong byte at %llu", (unsigned long long)i);
      if (t >= 0) v[t] = (double)size / (1 << 20) / st.seconds;
    }
    stats(v, trials, &mean, &best);
    char name[64];
    snprintf(name, sizeof(name), "rd_xfer_pull, %d stream%s", st.streams, st.streams == 1 ? "" : "s");
    printf("%-28s %10.0f %10.0f   (%.0f%% of TCP, %u KiB chunks)\n", name, mean, best, 100 * mean / tcp_mean,
           st.chunk >> 10);
    fflush(stdout);
    rd_xfer_client_destroy(c);
  }
  close(sin);
  close(sout);
  waitpid(spid, NULL, 0);
  munmap(g_dst, size);
  return 0;
}
