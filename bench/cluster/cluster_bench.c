/* bench/cluster/cluster_bench.c - figures of a multi-node cluster, run by
 * bench/cluster/run.sh against a head (127.0.0.1) and a node (127.0.0.2,
 * custom resource only_b) that `raydist start` launched:
 *   - tasks/s of tiny tasks run on the driver's node and, in the same run,
 *     spilled back to the other node (every frame relayed over the link);
 *   - tasks/s of 20 ms tasks of one CPU each with the default policy, more
 *     than the driver's node can run at once: they spill to the other node
 *     once this one is full (both nodes' CPUs busy at the end);
 *   - MiB/s of a large object put on the head and read by a task on the other
 *     node (the node pulls it over gRPC), and of the task's large result pulled
 *     back to the driver;
 *   - MiB/s of one rd_get of 8 results made on the other node (pulled at
 *     once, each kept until the get has them all), and objects/s of one
 *     rd_get of --many (2000) results of 128 KiB made there;
 *   - with --metrics IP:PORT (the driver's node's endpoint): how long the
 *     node takes to answer /api/tasks (`raydist list tasks`) while the
 *     driver holds 1000, 10000 and 100000 tasks waiting for an argument;
 *   - and with --token T too: MB/s of a task on the other node printing 20 MB
 *     of 100-byte lines (the node reads them into the worker's file; run
 *     the driver with RAYDIST_LOG_TO_DRIVER=0 to leave its own copy out),
 *     and how long the driver's node takes to give that file's last 1000
 *     lines and its last 200,000 (20 MB) (/api/v0/logs/file, `raydist
 *     logs`), asking the other node.
 * Usage: RAYDIST_ADDRESS=ip:port cluster_bench [--duration S] [--trials N]
 *        [--mib N (default 1024)] [--many N (default 2000)] [--metrics IP:PORT [--token T]]
 *        [--json FILE] */
#include "../harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

RD_REMOTE(nop) { return rd_return_bytes(call, 0, "", 0); }

/* Read every page of the argument (it is in this node's store once pulled),
 * then return a result of the same size. */
RD_REMOTE(touch_and_echo) {
  rd_buf a;
  if (rd_arg(call, 0, &a) != 0) return rd_call_fail(call, "no argument");
  const volatile uint8_t *p = a.data;
  uint64_t s = 0;
  for (size_t i = 0; i < a.size; i += 4096) s += p[i];
  uint8_t *out = rd_return_alloc(call, 1, a.size);
  if (!out) return rd_call_fail(call, "no room for the result");
  memset(out, (int)(s & 0xff), a.size);
  return rd_return_bytes(call, 0, &s, sizeof(s));
}

static rd_task_opts g_opts;

/* Sleep 20 ms, then say which node ran it. */
RD_REMOTE(nap_where) {
  usleep(20000);
  rd_node_info ni;
  if (rd_node_info_get(&ni) != 0) return rd_call_fail(call, "rd_node_info_get failed");
  uint32_t idx = ni.node_index;
  return rd_return_bytes(call, 0, &idx, sizeof(idx));
}

static uint32_t g_here;
static long g_far, g_all;   /* saturated: tasks run on the other node, in all */

/* 200 one-CPU tasks at a time with the default policy: the driver's node
 * runs 2 at once, the rest spill (4 CPUs in all: 200 tasks/s at best). */
static double saturated_tasks(void) {
  enum { BATCH = 200 };
  static rd_ref refs[BATCH];
  rd_task_opts o;
  rd_task_opts_init(&o);
  double t0 = now(), t;
  long n = 0;
  do {
    for (int i = 0; i < BATCH; i++) OK(rd_submit(nap_where, RD_NO_ARGS, &o, &refs[i]));
    for (int i = 0; i < BATCH; i++) {
      rd_buf b;
      OK(rd_get(&refs[i], 1, &b, 120000));
      uint32_t v;
      memcpy(&v, b.data, 4);
      g_far += v != g_here;
      g_all++;
      rd_buf_release(&b);
      rd_ref_release(refs[i]);
    }
    n += BATCH;
    t = now() - t0;
  } while (t < g_duration);
  return n / t;
}

static double async_tasks(void) {
  enum { BATCH = 2000 };
  static rd_ref refs[BATCH];
  double t0 = now(), t;
  long n = 0;
  do {
    for (int i = 0; i < BATCH; i++) OK(rd_submit(nop, RD_NO_ARGS, &g_opts, &refs[i]));
    rd_buf b[BATCH];
    OK(rd_get(refs, BATCH, b, 120000));
    for (int i = 0; i < BATCH; i++) {
      rd_buf_release(&b[i]);
      rd_ref_release(refs[i]);
    }
    n += BATCH;
    t = now() - t0;
  } while (t < g_duration);
  return n / t;
}

static double sync_tasks(void) {
  double t0 = now(), t;
  long n = 0;
  do {
    rd_ref r;
    OK(rd_submit(nop, RD_NO_ARGS, &g_opts, &r));
    rd_buf b;
    OK(rd_get(&r, 1, &b, 60000));
    rd_buf_release(&b);
    rd_ref_release(r);
    n++;
    t = now() - t0;
  } while (t < g_duration);
  return n / t;
}

static size_t g_bytes;
static double g_there, g_back;

/* One round: put (not timed), task on node b (pull there), result back. */
static double transfer_round(void) {
  void *p;
  rd_ref in;
  OK(rd_put_begin(g_bytes, &p, &in));
  memset(p, 7, g_bytes);
  OK(rd_put_seal(in));
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_b=1";
  o.num_returns = 2;
  rd_ref out[2];
  double t0 = now();
  OK(rd_submit(touch_and_echo, RD_ARGS(rd_arg_ref(in)), &o, out));
  rd_buf small;
  int e = rd_get(&out[0], 1, &small, 300000);   /* the task ran: the pull to b is done */
  if (e != 0) DIE("transfer task: %s: %.*s", rd_err_name(e), (int)small.size, small.data ? (const char *)small.data : "");
  double t1 = now();
  rd_buf big;
  OK(rd_get(&out[1], 1, &big, 300000));     /* its result pulled back here */
  double t2 = now();
  if (big.size != g_bytes) DIE("result of %zu bytes, expected %zu", big.size, g_bytes);
  rd_buf_release(&small);
  rd_buf_release(&big);
  rd_ref_release(out[0]);
  rd_ref_release(out[1]);
  rd_ref_release(in);
  g_there = g_bytes / 1048576.0 / (t1 - t0);
  g_back = g_bytes / 1048576.0 / (t2 - t1);
  return g_there;
}

/* A result of arg0 bytes, written, where it runs. */
RD_REMOTE(fill_result) {
  rd_buf a;
  size_t n;
  if (rd_arg(call, 0, &a) != 0 || a.size != sizeof(n)) return rd_call_fail(call, "bad argument");
  memcpy(&n, a.data, sizeof(n));
  uint8_t *out = rd_return_alloc(call, 0, n);
  if (!out) return rd_call_fail(call, "no room for the result");
  memset(out, 5, n);
  return 0;
}

/* k results of n bytes made on node b (not timed), then one rd_get of all
 * of them here (pulled at once): the seconds of that get. */
static double get_made_there(int k, size_t n) {
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_b=0.001";
  rd_ref *r = calloc((size_t)k, sizeof(*r));
  rd_buf *b = calloc((size_t)k, sizeof(*b));
  if (!r || !b) DIE("out of memory");
  for (int i = 0; i < k; i++) OK(rd_submit(fill_result, RD_ARGS(rd_arg_bytes(&n, sizeof(n))), &o, &r[i]));
  if (rd_wait(r, (size_t)k, (size_t)k, 300000, NULL) != k) DIE("results not made in 300 s");
  double t0 = now();
  OK(rd_get(r, (size_t)k, b, 300000));
  double dt = now() - t0;
  for (int i = 0; i < k; i++) {
    if (b[i].size != n) DIE("result of %zu bytes, expected %zu", b[i].size, n);
    rd_buf_release(&b[i]);
    rd_ref_release(r[i]);
  }
  free(r);
  free(b);
  return dt;
}

/* 8 results of g_bytes / 8: MiB/s of the get. */
static double multi_get_round(void) { return (double)(g_bytes / 8 * 8) / 1048576.0 / get_made_there(8, g_bytes / 8); }

/* g_many results of 128 KiB (store objects): objects/s of the get. */
static int g_many = 2000;
static double multi_get_many(void) { return g_many / get_made_there(g_many, 128u << 10); }

/* Placement groups created, waited for and removed, per second: 100 of one
 * bundle on the driver's node, or of two STRICT_SPREAD bundles (two-phase
 * over the link to the other node). */
static double pg_rate(size_t nb, int strategy) {
  enum { NPG = 100 };
  static rd_pg pg[NPG];
  rd_bundle b[2] = {{.num_cpus = 0.01}, {.num_cpus = 0.01}};
  double t0 = now();
  for (int i = 0; i < NPG; i++) OK(rd_pg_create(b, nb, strategy, NULL, &pg[i]));
  for (int i = 0; i < NPG; i++) OK(rd_pg_wait(pg[i], RD_TIMEOUT_INF));
  for (int i = 0; i < NPG; i++) OK(rd_pg_remove(pg[i]));
  return NPG / (now() - t0);
}
static double pg_local(void) { return pg_rate(1, RD_PG_PACK); }
static double pg_spread(void) { return pg_rate(2, RD_PG_STRICT_SPREAD); }

static const char *g_token;   /* --token: sent as a bearer token */

/* GET path from ip:port (HTTP/1.0): the answer's bytes, or -1 (also for
 * an answer other than 200). */
static long http_get(const char *ipport, const char *path) {
  char ip[64];
  int port = 0;
  if (sscanf(ipport, "%63[^:]:%d", ip, &port) != 2) return -1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) return -1;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  char req[512];
  int n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\n%s%s%s\r\n", path, g_token ? "Authorization: Bearer " : "",
                   g_token ? g_token : "", g_token ? "\r\n" : "");
  if (write(fd, req, (size_t)n) != n) {
    close(fd);
    return -1;
  }
  static char buf[1 << 16];
  long total = 0;
  int ok = 0;
  ssize_t r;
  while ((r = read(fd, buf, sizeof(buf))) > 0) {
    if (!total) ok = r >= 12 && !memcmp(buf + 8, " 200", 4);
    total += r;
  }
  close(fd);
  return ok ? total : -1;
}

/* arg0: n (a long); prints n lines of 100 bytes to stdout, returns its pid. */
RD_REMOTE(print_lines) {
  rd_buf a;
  long n;
  if (rd_arg(call, 0, &a) != 0 || a.size != sizeof(n)) return rd_call_fail(call, "bad args");
  memcpy(&n, a.data, sizeof(n));
  char line[101];
  memset(line, 'x', 99);
  line[99] = '\n';
  for (long i = 0; i < n; i++) {
    char num[24];
    snprintf(num, sizeof(num), "%010ld ", i);
    memcpy(line, num, 11);
    if (fwrite(line, 1, 100, stdout) != 100) return rd_call_fail(call, "stdout");
  }
  fflush(stdout);
  int pid = (int)getpid();
  return rd_return_bytes(call, 0, &pid, sizeof(pid));
}

/* 20 MB printed on the other node (only_b, 127.0.0.2), then its file read
 * through this node's state API: the figures printed. */
static void worker_output(const char *metrics) {
  long n = 200000;
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_b=0.001";
  int pid = 0;
  for (int t = 0; t <= g_trials; t++) {   /* the first: a warm-up (the worker's start) */
    rd_ref r;
    double s = now();
    OK(rd_submit(print_lines, RD_ARGS(rd_arg_bytes(&n, sizeof(n))), &o, &r));
    rd_buf b;
    OK(rd_get(&r, 1, &b, 600000));
    double el = now() - s;
    if (b.size == sizeof(pid)) memcpy(&pid, b.data, sizeof(pid));
    rd_buf_release(&b);
    rd_ref_release(r);
    if (t) printf("worker_output: %ld lines of 100 bytes printed on the other node in %.3f s: %.1f MB/s\n", n, el,
                  n * 100 / el / 1e6);
  }
  char p1[160], p2[160];
  snprintf(p1, sizeof(p1), "/api/v0/logs/file?node_ip=127.0.0.2&pid=%d&lines=1000", pid);
  snprintf(p2, sizeof(p2), "/api/v0/logs/file?node_ip=127.0.0.2&pid=%d&lines=%ld", pid, n);   /* 20 MB */
  const char *const paths[] = {p1, p2};
  for (int k = 0; k < 2; k++) {
    double best = 1e9;
    long bytes = 0;
    for (int t = 0; t < g_trials; t++) {
      double s = now();
      bytes = http_get(metrics, paths[k]);
      if (bytes < 0) {   /* e.g. nodes started with RAYDIST_LOG_TO_STDERR=1: no worker files */
        printf("worker_output: GET %s from %s failed\n", paths[k], metrics);
        return;
      }
      if (now() - s < best) best = now() - s;
    }
    printf("worker_output: GET %-60s %8.1f ms (best of %d), %ld bytes\n", paths[k], best * 1e3, g_trials, bytes);
  }
}

/* Each of paths GET from metrics g_trials times: the best time printed,
 * the line starting "list_tasks N WHAT". */
static void list_tasks_gets(const char *metrics, int n, const char *what, const char *const *paths, size_t np) {
  for (size_t k = 0; k < np; k++) {
    double best = 1e9;
    long bytes = 0;
    for (int t = 0; t < g_trials; t++) {
      double s = now();
      bytes = http_get(metrics, paths[k]);
      if (bytes < 0) DIE("GET %s from %s failed", paths[k], metrics);
      if (now() - s < best) best = now() - s;
    }
    printf("list_tasks %6d %s: GET %-38s %8.1f ms (best of %d), %ld bytes\n", n, what, paths[k], best * 1e3, g_trials,
           bytes);
  }
}

/* n tasks waiting for an open put, listed: the node asks this driver (its
 * progress thread answers), which walks its object table.  Then the same
 * tasks finished: the driver keeps the last RAYDIST_TASK_HISTORY (10,000)
 * of them, listed and counted when asked. */
static void list_tasks_round(const char *metrics, int n) {
  void *p;
  rd_ref arg;
  OK(rd_put_begin(8, &p, &arg));
  rd_ref *refs = malloc((size_t)n * sizeof(*refs));
  if (!refs) DIE("out of memory");
  double t0 = now();
  for (int i = 0; i < n; i++) OK(rd_submit(nop, RD_ARGS(rd_arg_ref(arg)), &g_opts, &refs[i]));
  double sub = now() - t0;
  usleep(300000);   /* the driver's OwnerStats reaches its node */
  static const char *const waiting[] = {"/api/tasks?limit=100", "/api/tasks?limit=10000", "/tasks?limit=100"};
  list_tasks_gets(metrics, n, "waiting", waiting, 3);
  memset(p, 0, 8);
  OK(rd_put_seal(arg));
  OK(rd_wait(refs, (size_t)n, (size_t)n, 600000, NULL) == n ? 0 : RD_ETIMEDOUT);
  for (int i = 0; i < n; i++) rd_ref_release(refs[i]);
  rd_ref_release(arg);
  free(refs);
  printf("list_tasks %6d waiting: submitted in %.2f s (%.0f tasks/s)\n", n, sub, n / sub);
  usleep(300000);
  static const char *const finished[] = {"/api/tasks?finished=1&limit=100", "/api/tasks?state=FINISHED&limit=10000",
                                         "/api/tasks?finished=1&limit=0"};
  list_tasks_gets(metrics, n, "finished", finished, 3);
}

int main(int argc, char **argv) {
  harness_args(argc, argv);
  size_t mib = 1024;
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--mib") && i + 1 < argc) mib = (size_t)atol(argv[++i]);
  g_bytes = mib << 20;
  OK(rd_init(NULL));
  rd_node_info ni;
  for (int i = 0; i < 100; i++) {   /* the node's view follows the GCS within a heartbeat */
    OK(rd_node_info_get(&ni));
    if (ni.cluster_nodes >= 2) break;
    usleep(50000);
  }
  if (ni.cluster_nodes < 2) DIE("needs a cluster of two nodes (RAYDIST_ADDRESS); this one has %d", ni.cluster_nodes);
  printf("driver on node %u of %d\n", ni.node_index, ni.cluster_nodes);
  g_here = ni.node_index;
  rd_task_opts_init(&g_opts);
  g_opts.num_cpus = 0.01;   /* many leases at once on either node */
  report("local_tasks_async", "tasks", async_tasks);
  report("local_tasks_sync", "tasks", sync_tasks);
  g_opts.resources = "only_b=0.001";
  report("spillback_tasks_async", "tasks", async_tasks);
  report("spillback_tasks_sync", "tasks", sync_tasks);
  report("saturated_tasks_default", "tasks (20 ms, 1 CPU; 4 CPUs in all)", saturated_tasks);
  if (g_all) printf("saturated_tasks_default: %.0f%% ran on the other node\n", 100.0 * g_far / g_all);
  report("pg_create_removal_local", "groups (1 bundle, this node)", pg_local);
  report("pg_create_removal_spread", "groups (2 STRICT_SPREAD bundles, both nodes)", pg_spread);
  if (selected("pg_tasks")) {
    /* tasks into a bundle on the other node: routed by the driver's node */
    rd_bundle b[2] = {{.num_cpus = 1}, {.num_cpus = 1}};
    rd_pg pg;
    OK(rd_pg_create(b, 2, RD_PG_STRICT_SPREAD, NULL, &pg));
    OK(rd_pg_wait(pg, RD_TIMEOUT_INF));
    rd_pg_info info;
    OK(rd_pg_info_get(pg, &info));
    rd_task_opts_init(&g_opts);
    g_opts.num_cpus = 0.01;
    g_opts.placement_group = pg;
    g_opts.bundle_index = info.bundle_nodes[0] == ni.node_index ? 1 : 0;
    report("pg_tasks_async", "tasks (in a bundle on the other node)", async_tasks);
    report("pg_tasks_sync", "tasks (in a bundle on the other node)", sync_tasks);
    OK(rd_pg_remove(pg));
    rd_task_opts_init(&g_opts);
    g_opts.num_cpus = 0.01;
    g_opts.resources = "only_b=0.001";
  }
  if (selected("transfer")) {
    (void)transfer_round();   /* warm-up: workers, mappings */
    for (int t = 0; t < g_trials; t++) {
      (void)transfer_round();
      printf("object_transfer %zu MiB: to the other node %.1f MiB/s, result back %.1f MiB/s\n", mib, g_there, g_back);
    }
  }
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--many") && i + 1 < argc) g_many = atoi(argv[++i]);
  if (g_many < 1) g_many = 1;
  if (selected("multi_get_many")) {
    (void)multi_get_many();   /* warm-up */
    for (int t = 0; t < g_trials; t++)
      printf("multi_get_many %d x 128 KiB from the other node in one rd_get: %.0f objects/s\n", g_many,
             multi_get_many());
  }
  if (selected("multi_get")) {
    (void)multi_get_round();   /* warm-up */
    for (int t = 0; t < g_trials; t++)
      printf("multi_object_get 8 x %zu MiB from the other node in one rd_get: %.1f MiB/s\n", mib / 8,
             multi_get_round());
  }
  const char *metrics = NULL;
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--metrics") && i + 1 < argc) metrics = argv[++i];
    else if (!strcmp(argv[i], "--token") && i + 1 < argc) g_token = argv[++i];
  if (metrics && selected("list_tasks")) {
    rd_task_opts_init(&g_opts);
    g_opts.num_cpus = 0.01;
    for (int n = 1000; n <= 100000; n *= 10) list_tasks_round(metrics, n);
  }
  if (metrics && g_token && selected("worker_output")) worker_output(metrics);
  harness_done();
  rd_shutdown();
  return 0;
}
