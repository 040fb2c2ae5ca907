/* tests/rpc/rpc_test.c - the control plane in real processes: a `raydist gcs`
 * child (posix_spawn: this process runs gRPC, so it never forks) driven
 * through gcs_client, and object transfer between servers and clients in
 * this process and in a child that gets killed mid-transfer.  One case per
 * CTest; `rpc_test NAME`. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "gcs.h"
#include "gcs.pb-c.h"
#include "gcs_client.h"
#include "gcs_store.h"
#include "objxfer.h"
#include "objxfer.pb-c.h"
#include "raydist.h"
#include "rpc.h"
#include "sha256.h"
#include "wirefuzz.h"

extern char **environ;

#define TOKEN "test-token-0123456789abcdef"

static char g_dir[256];

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void make_dir(void) {
  snprintf(g_dir, sizeof(g_dir), "/tmp/rd_rpc_test.XXXXXX");
  CHECK(mkdtemp(g_dir) != NULL);
}

static void rm_dir(void) {
  char cmd[300];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", g_dir);
  CHECK(system(cmd) == 0);
}

static void write_file(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "w");
  CHECK(f);
  CHECK(fwrite(p, 1, n, f) == n);
  CHECK(fclose(f) == 0);
}

/* ---- a `raydist gcs` child ---- */

typedef struct gcs_proc {
  pid_t pid;
  int port;
  char addr[64];
} gcs_proc;

/* Children die with a failed test (CHECK exits): no stray servers. */
static pid_t g_children[4];

static void kill_children(void) {
  for (int i = 0; i < 4; i++)
    if (g_children[i] > 0) kill(g_children[i], SIGKILL);
}

static void child_track(pid_t pid, int add) {
  static int registered;
  if (!registered) registered = !atexit(kill_children);
  for (int i = 0; i < 4; i++) {
    if (add && g_children[i] <= 0) {
      g_children[i] = pid;
      return;
    }
    if (!add && g_children[i] == pid) g_children[i] = 0;
  }
}

/* A GCS on bind (an IP:PORT; port 0 = any) with a storage spec. */
static void gcs_start_on(gcs_proc *p, int hb_ms, const char *bind, const char *storage) {
  const char *bin = getenv("RAYDIST_BIN");
  CHECK(bin != NULL);
  char token_file[300], port_file[300], hb[16], fdbuf[16];
  snprintf(token_file, sizeof(token_file), "%s/token", g_dir);
  snprintf(port_file, sizeof(port_file), "%s/gcs.port", g_dir);
  write_file(token_file, TOKEN "\n", strlen(TOKEN) + 1);
  snprintf(hb, sizeof(hb), "%d", hb_ms);
  int fds[2];
  CHECK(pipe(fds) == 0);
  snprintf(fdbuf, sizeof(fdbuf), "%d", fds[1]);
  char *argv[] = {(char *)bin, "gcs", "--bind", (char *)bind, "--token-file", token_file,
                  "--port-file", port_file, "--ready-fd", fdbuf, "--heartbeat-timeout-ms", hb,
                  "--storage", (char *)storage, NULL};
  /* Its output goes to a file: a child that outlives a crashed test must
   * not hold CTest's pipe open. */
  char log_file[300];
  snprintf(log_file, sizeof(log_file), "%s/gcs.log", g_dir);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  posix_spawn_file_actions_addopen(&fa, 1, log_file, O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  CHECK(posix_spawn(&p->pid, bin, &fa, NULL, argv, environ) == 0);
  posix_spawn_file_actions_destroy(&fa);
  child_track(p->pid, 1);
  close(fds[1]);
  char c = 0;
  CHECK(read(fds[0], &c, 1) == 1 && c == 'R');
  close(fds[0]);
  FILE *f = fopen(port_file, "r");
  CHECK(f && fscanf(f, "%d", &p->port) == 1);
  fclose(f);
  snprintf(p->addr, sizeof(p->addr), "127.0.0.1:%d", p->port);
}

static void gcs_start(gcs_proc *p, int hb_ms) { gcs_start_on(p, hb_ms, "127.0.0.1:0", "memory"); }

/* SIGTERM must stop the GCS cleanly within 10 s (and, under the
 * sanitizers, with no report: that would change the exit status). */
static void gcs_stop(gcs_proc *p) {
  CHECK(kill(p->pid, SIGTERM) == 0);
  int st = 0;
  pid_t r = 0;
  for (int i = 0; i < 1000 && r == 0; i++) {
    r = waitpid(p->pid, &st, WNOHANG);
    if (r == 0) sleep_ms(10);
  }
  CHECK(r == p->pid);
  child_track(p->pid, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "cat %s/gcs.log >&2", g_dir);
    CHECK(system(cmd) == 0);
    CHECK(!"the GCS did not stop cleanly");
  }
}

static rd_gcs *connect_ok(const gcs_proc *p) {
  rd_gcs *g = NULL;
  char err[256];
  int rc = rd_gcs_connect(p->addr, TOKEN, 5000, &g, err, sizeof(err));
  if (rc) fprintf(stderr, "connect: %s\n", err);
  CHECK_EQ(rc, 0);
  return g;
}

/* ---- events from a subscription ---- */

typedef struct ev_log {
  pthread_mutex_t mu;
  rd_gcs_event ev[256];
  double at[256];
  int n;
} ev_log;

static void on_event(void *arg, const rd_gcs_event *e) {
  ev_log *l = arg;
  pthread_mutex_lock(&l->mu);
  if (l->n < 256) {
    l->at[l->n] = now_ms();
    l->ev[l->n++] = *e;
  }
  pthread_mutex_unlock(&l->mu);
}

/* Index of the first event of kind for node (or actor) within wait_ms, or -1. */
static int ev_wait(ev_log *l, int kind, uint32_t node, uint64_t actor, int wait_ms) {
  double end = now_ms() + wait_ms;
  do {
    pthread_mutex_lock(&l->mu);
    for (int i = 0; i < l->n; i++) {
      if (l->ev[i].kind == kind && (!node || l->ev[i].node_index == node) &&
          (!actor || l->ev[i].actor_id == actor)) {
        pthread_mutex_unlock(&l->mu);
        return i;
      }
    }
    pthread_mutex_unlock(&l->mu);
    sleep_ms(10);
  } while (now_ms() < end);
  return -1;
}

static void node_fill(rd_gcs_node *n, const char *ip, int cpus) {
  memset(n, 0, sizeof(*n));
  snprintf(n->ip, sizeof(n->ip), "%s", ip);
  snprintf(n->hostname, sizeof(n->hostname), "host-%s", ip);
  snprintf(n->session_dir, sizeof(n->session_dir), "/tmp/session-%s", ip);
  n->link_port = 7000;
  n->xfer_port = 7001;
  n->total.cpu = (int64_t)cpus * RD_RES_UNIT;
  n->total.memory = 1 << 30;
  CHECK_EQ(rd_res_set_custom(&n->total, "tpu", 2 * RD_RES_UNIT), 0);
  n->store_capacity = 1 << 28;
}

/* ---------------------------------------------------------------- */

static int t_sha256(void) {
  static const struct { const char *in; const char *hex; } v[] = {
      {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
      {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
       "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
  };
  char hex[65];
  for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
    rd_sha256_hex(v[i].in, strlen(v[i].in), hex);
    CHECK(!strcmp(hex, v[i].hex));
  }
  /* a million 'a', fed in uneven pieces across block boundaries */
  static char a[1000000];
  memset(a, 'a', sizeof(a));
  rd_sha256 c;
  uint8_t d[32];
  rd_sha256_init(&c);
  size_t off = 0, step = 1;
  while (off < sizeof(a)) {
    size_t n = step < sizeof(a) - off ? step : sizeof(a) - off;
    rd_sha256_update(&c, a + off, n);
    off += n;
    step = step * 3 % 997 + 1;
  }
  rd_sha256_final(&c, d);
  rd_sha256_to_hex(d, hex);
  CHECK(!strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
  rd_sha256_hex(a, sizeof(a), hex);
  CHECK(!strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
  CHECK(rd_sha256_is_hex(hex));
  hex[3] = 'G';
  CHECK(!rd_sha256_is_hex(hex));
  return 0;
}

/* Registration, heartbeats, failure detection within the timeout, pub/sub,
 * re-registration with a new index, graceful unregister, status view. */
static int t_gcs_nodes(void) {
  make_dir();
  gcs_proc p;
  const int hb_timeout = 600;
  gcs_start(&p, hb_timeout);
  rd_gcs *g = connect_ok(&p);
  ev_log log = {.mu = PTHREAD_MUTEX_INITIALIZER};
  CHECK_EQ(rd_gcs_subscribe(g, on_event, &log), 0);

  rd_gcs_node a, b;
  node_fill(&a, "127.0.0.2", 4);
  node_fill(&b, "127.0.0.3", 2);
  a.is_head = 1;
  uint32_t ia = 0, ib = 0;
  char err[256];
  CHECK_EQ(rd_gcs_register_node(g, &a, &ia, err, sizeof(err)), 0);
  CHECK_EQ(rd_gcs_register_node(g, &b, &ib, err, sizeof(err)), 0);
  CHECK(ia >= 1 && ia <= 4095 && ib >= 1 && ib <= 4095 && ia != ib);
  CHECK(ev_wait(&log, RD_GCS_EV_NODE_ADDED, ia, 0, 2000) >= 0);
  CHECK(ev_wait(&log, RD_GCS_EV_NODE_ADDED, ib, 0, 2000) >= 0);
  /* an actor on b dies with it, and a job driven from b ends */
  CHECK_EQ(rd_gcs_actor_register(g, 0xb0b, "on-b", "Cls", ib, 0), 0);
  uint32_t jb = 0;
  CHECK_EQ(rd_gcs_job_add(g, "", 77, ib, &jb), 0);

  /* a heartbeats every 100 ms; b only once, then goes silent */
  rd_resources avail = a.total;
  avail.cpu = 1 * RD_RES_UNIT;
  uint64_t ver = 0;
  CHECK_EQ(rd_gcs_heartbeat(g, ib, &b.total, 0, 0, &ver), 0);
  double b_last = now_ms();
  int dead_at = -1;
  for (int i = 0; i < 40 && dead_at < 0; i++) {
    CHECK_EQ(rd_gcs_heartbeat(g, ia, &avail, 7, 12345, &ver), 0);
    sleep_ms(100);
    dead_at = ev_wait(&log, RD_GCS_EV_NODE_DEAD, ib, 0, 0);
  }
  CHECK(dead_at >= 0);
  double after = log.at[dead_at] - b_last;
  fprintf(stderr, "node declared dead %.0f ms after its last heartbeat (timeout %d ms)\n", after, hb_timeout);
  CHECK(after >= hb_timeout - 50 && after < hb_timeout + 600);
  CHECK(strstr(log.ev[dead_at].reason, "no heartbeat") != NULL);
  CHECK(ev_wait(&log, RD_GCS_EV_NODE_DEAD, ia, 0, 0) < 0);   /* a kept beating */
  int dead_actor = 0;
  for (int i = 0; i < 200 && !dead_actor; i++) {
    pthread_mutex_lock(&log.mu);
    for (int j = 0; j < log.n; j++)
      if (log.ev[j].kind == RD_GCS_EV_ACTOR && log.ev[j].actor_id == 0xb0b &&
          log.ev[j].actor_state == RD_GCS_ACTOR_DEAD)
        dead_actor = 1;
    pthread_mutex_unlock(&log.mu);
    if (!dead_actor) sleep_ms(10);
  }
  CHECK(dead_actor);
  CHECK_EQ(rd_gcs_actor_lookup(g, "on-b", NULL, NULL, NULL), RD_ENOENT);
  rd_gcs_job *jobs;
  size_t njobs;
  CHECK_EQ(rd_gcs_job_list(g, &jobs, &njobs), 0);
  CHECK(njobs == 1 && jobs[0].job_id == jb && jobs[0].end_ms > 0 && strstr(jobs[0].end_reason, "died"));
  free(jobs);
  CHECK_EQ(rd_gcs_actor_register(g, 0xb0c, "late", "Cls", ib, 0), RD_ENODE_DIED);   /* a late write from b */
  CHECK_EQ(rd_gcs_actor_lookup(g, "late", NULL, NULL, NULL), RD_ENOENT);

  /* a dead node stays dead */
  CHECK_EQ(rd_gcs_heartbeat(g, ib, &b.total, 0, 0, NULL), RD_ENODE_DIED);
  CHECK(strstr(rd_gcs_last_error(), "dead") != NULL);
  CHECK_EQ(rd_gcs_heartbeat(g, 4000, &b.total, 0, 0, NULL), RD_ENOENT);
  CHECK_EQ(rd_gcs_heartbeat(g, 0, &b.total, 0, 0, NULL), RD_EINVAL);

  rd_gcs_node *nodes;
  size_t n;
  uint64_t v2;
  CHECK_EQ(rd_gcs_heartbeat(g, ia, &avail, 7, 12345, NULL), 0);
  CHECK_EQ(rd_gcs_get_nodes(g, &nodes, &n, &v2), 0);
  CHECK_EQ(n, 2);
  for (size_t i = 0; i < n; i++) {
    if (nodes[i].index == ia) {
      CHECK_EQ(nodes[i].state, RD_GCS_NODE_ALIVE);
      CHECK(nodes[i].is_head);
      CHECK(!strcmp(nodes[i].ip, "127.0.0.2"));
      CHECK(!strcmp(nodes[i].session_dir, "/tmp/session-127.0.0.2"));
      CHECK_EQ(strlen(nodes[i].node_id), 32);
      CHECK_EQ(nodes[i].total.cpu, 4 * RD_RES_UNIT);
      CHECK_EQ(nodes[i].avail.cpu, 1 * RD_RES_UNIT);
      CHECK_EQ(rd_res_get_custom(&nodes[i].avail, "tpu"), 2 * RD_RES_UNIT);
      CHECK_EQ(nodes[i].pending, 7);
      CHECK_EQ(nodes[i].store_used, 12345);
      CHECK_EQ(nodes[i].store_capacity, 1 << 28);
      CHECK(nodes[i].ms_since_heartbeat < 500);
      CHECK(nodes[i].start_ms > 0 && nodes[i].end_ms == 0);
    } else {
      CHECK_EQ(nodes[i].index, ib);
      CHECK_EQ(nodes[i].state, RD_GCS_NODE_DEAD);
      CHECK(strstr(nodes[i].death_reason, "no heartbeat") != NULL);
      CHECK(nodes[i].ms_since_heartbeat >= (uint64_t)hb_timeout);
      CHECK(nodes[i].start_ms > 0 && nodes[i].end_ms >= nodes[i].start_ms + (uint64_t)hb_timeout);
    }
  }
  free(nodes);

  /* b comes back: a new index */
  uint32_t ib2 = 0;
  CHECK_EQ(rd_gcs_register_node(g, &b, &ib2, err, sizeof(err)), 0);
  CHECK(ib2 != ib && ib2 != ia);
  CHECK(ev_wait(&log, RD_GCS_EV_NODE_ADDED, ib2, 0, 2000) >= 0);

  /* a leaves gracefully */
  CHECK_EQ(rd_gcs_unregister_node(g, ia, "stopped by test"), 0);
  int re = ev_wait(&log, RD_GCS_EV_NODE_REMOVED, ia, 0, 2000);
  CHECK(re >= 0);
  CHECK(strstr(log.ev[re].reason, "stopped by test") != NULL);
  CHECK_EQ(rd_gcs_heartbeat(g, ia, &avail, 0, 0, NULL), RD_ENODE_DIED);
  CHECK_EQ(rd_gcs_get_nodes(g, &nodes, &n, NULL), 0);
  CHECK_EQ(n, 3);
  free(nodes);

  /* a bad registration is refused and changes nothing */
  rd_gcs_node bad;
  node_fill(&bad, "", 1);
  CHECK_EQ(rd_gcs_register_node(g, &bad, NULL, err, sizeof(err)), RD_EINVAL);
  node_fill(&bad, "127.0.0.9", 1);
  bad.total.memory = -1;
  CHECK_EQ(rd_gcs_register_node(g, &bad, NULL, err, sizeof(err)), RD_EINVAL);

  rd_gcs_close(g);
  gcs_stop(&p);
  rm_dir();
  return 0;
}

/* The autoscaler's calls: a heartbeat's demand and idle time come back
 * from GetLoad; DrainNode reaches the node's next heartbeat and stands 3 s;
 * node types come with the view; the runtime's own labels register; bad
 * calls are refused. */
static int t_gcs_autoscale(void) {
  make_dir();
  gcs_proc p;
  gcs_start(&p, 10000);   /* a heartbeat timeout past the drain's 3 s */
  rd_gcs *g = connect_ok(&p);
  rd_gcs_node a, b;
  node_fill(&a, "127.0.0.2", 4);
  node_fill(&b, "127.0.0.3", 2);
  snprintf(b.labels, sizeof(b.labels), "raydist.io/launch-id=7,raydist.io/node-type=big,zone=x");
  uint32_t ia = 0, ib = 0;
  char err[256];
  CHECK_EQ(rd_gcs_register_node(g, &a, &ia, err, sizeof(err)), 0);
  CHECK_EQ(rd_gcs_register_node(g, &b, &ib, err, sizeof(err)), 0);

  rd_gcs_demand d[2];
  memset(d, 0, sizeof(d));
  d[0].shape.cpu = RD_RES_UNIT;
  CHECK_EQ(rd_res_set_custom(&d[0].shape, "big", RD_RES_UNIT), 0);
  d[0].count = 5;
  d[1].shape.cpu = 2 * RD_RES_UNIT;
  snprintf(d[1].sel, sizeof(d[1].sel), "zone=a;zone=b");
  d[1].count = 1;
  d[1].spread_group = 0x1234567890abcdefull;   /* a STRICT_SPREAD group's bundles */
  d[1].avoid[0] = 3;
  d[1].avoid[1] = 9;
  d[1].navoid = 2;
  rd_gcs_load la = {.avail = &a.total, .demand = d, .ndemand = 2};
  rd_gcs_load lb = {.avail = &b.total, .idle_ms = 4200};
  char drain[128] = "x";
  CHECK_EQ(rd_gcs_heartbeat_load(g, ia, &la, NULL, drain, sizeof(drain)), 0);
  CHECK_EQ(drain[0], 0);
  CHECK_EQ(rd_gcs_heartbeat_load(g, ib, &lb, NULL, drain, sizeof(drain)), 0);
  rd_gcs_node_load *ld;
  size_t nl;
  CHECK_EQ(rd_gcs_get_load(g, &ld, &nl), 0);
  CHECK_EQ(nl, 2);
  for (size_t i = 0; i < nl; i++) {
    if (ld[i].index == ia) {
      CHECK(ld[i].ndemand == 2 && ld[i].idle_ms == 0 && ld[i].demand[0].count == 5);
      CHECK_EQ(rd_res_get_custom(&ld[i].demand[0].shape, "big"), RD_RES_UNIT);
      CHECK(!strcmp(ld[i].demand[1].sel, "zone=a;zone=b") && ld[i].demand[1].shape.cpu == 2 * RD_RES_UNIT);
      CHECK(ld[i].demand[0].spread_group == 0 && ld[i].demand[1].spread_group == 0x1234567890abcdefull);
      CHECK(ld[i].demand[0].navoid == 0 && ld[i].demand[1].navoid == 2 && ld[i].demand[1].avoid[0] == 3 &&
            ld[i].demand[1].avoid[1] == 9);
    } else {
      CHECK(ld[i].index == ib && ld[i].ndemand == 0 && ld[i].idle_ms == 4200 && !ld[i].drain[0]);
    }
  }
  free(ld);

  /* drain b: its next heartbeats say so, for 3 s */
  CHECK_EQ(rd_gcs_drain_node(g, ib, "idle for 4 s"), 0);
  CHECK_EQ(rd_gcs_heartbeat_load(g, ib, &lb, NULL, drain, sizeof(drain)), 0);
  CHECK(!strcmp(drain, "idle for 4 s"));
  CHECK_EQ(rd_gcs_heartbeat_load(g, ia, &la, NULL, drain, sizeof(drain)), 0);
  CHECK_EQ(drain[0], 0);
  CHECK_EQ(rd_gcs_get_load(g, &ld, &nl), 0);
  for (size_t i = 0; i < nl; i++) CHECK(ld[i].index == ib ? !strcmp(ld[i].drain, "idle for 4 s") : !ld[i].drain[0]);
  free(ld);
  sleep_ms(3300);
  CHECK_EQ(rd_gcs_heartbeat_load(g, ib, &lb, NULL, drain, sizeof(drain)), 0);
  CHECK_EQ(drain[0], 0);
  CHECK_EQ(rd_gcs_drain_node(g, 0, "x"), RD_EINVAL);
  CHECK_EQ(rd_gcs_drain_node(g, 4000, "x"), RD_ENOENT);

  /* node types: in the view until replaced */
  rd_gcs_node_type t[RD_GCS_NODE_TYPES_MAX + 1];
  memset(t, 0, sizeof(t));
  snprintf(t[0].name, sizeof(t[0].name), "big");
  t[0].res.cpu = RD_RES_UNIT;
  snprintf(t[0].labels, sizeof(t[0].labels), "raydist.io/node-type=big");
  t[0].max_workers = 3;
  t[0].workers = 1;
  snprintf(t[1].name, sizeof(t[1].name), "small");
  t[1].res.cpu = RD_RES_UNIT;
  CHECK_EQ(rd_gcs_set_node_types(g, t, 2), 0);
  rd_gcs_node *nodes;
  size_t n, nt;
  rd_gcs_node_type got[RD_GCS_NODE_TYPES_MAX];
  CHECK_EQ(rd_gcs_get_view(g, &nodes, &n, got, &nt, NULL), 0);
  free(nodes);
  CHECK(nt == 2 && !strcmp(got[0].name, "big") && got[0].max_workers == 3 && got[0].workers == 1 &&
        !strcmp(got[0].labels, "raydist.io/node-type=big") && got[1].res.cpu == RD_RES_UNIT);
  t[1].name[0] = 0;   /* no name */
  CHECK_EQ(rd_gcs_set_node_types(g, t, 2), RD_EINVAL);
  CHECK_EQ(rd_gcs_set_node_types(g, t, RD_GCS_NODE_TYPES_MAX + 1), RD_EINVAL);
  t[1].res.memory = -5;
  snprintf(t[1].name, sizeof(t[1].name), "bad");
  CHECK_EQ(rd_gcs_set_node_types(g, t, 2), RD_EINVAL);
  CHECK_EQ(rd_gcs_get_view(g, &nodes, &n, got, &nt, NULL), 0);   /* the good ones stay */
  free(nodes);
  CHECK_EQ(nt, 2);
  CHECK_EQ(rd_gcs_set_node_types(g, NULL, 0), 0);
  CHECK_EQ(rd_gcs_get_view(g, &nodes, &n, got, &nt, NULL), 0);
  free(nodes);
  CHECK_EQ(nt, 0);

  /* the runtime's labels register; malformed ones do not */
  rd_gcs_node c;
  node_fill(&c, "127.0.0.4", 1);
  snprintf(c.labels, sizeof(c.labels), "raydist.io/node-type=");
  CHECK_EQ(rd_gcs_register_node(g, &c, NULL, err, sizeof(err)), RD_EINVAL);
  rd_gcs_close(g);
  gcs_stop(&p);
  rm_dir();
  return 0;
}

static int t_gcs_kv(void) {
  make_dir();
  gcs_proc p;
  gcs_start(&p, 3000);
  rd_gcs *g = connect_ok(&p);
  const char bin[] = {'a', 0, 'b', 0, (char)0xff};
  CHECK_EQ(rd_gcs_kv_put(g, "ns1", "k1", bin, sizeof(bin), 0), 0);
  CHECK_EQ(rd_gcs_kv_put(g, "ns1", "k1", "x", 1, 0), RD_EEXIST);
  void *v;
  size_t len;
  CHECK_EQ(rd_gcs_kv_get(g, "ns1", "k1", &v, &len), 0);
  CHECK(len == sizeof(bin) && !memcmp(v, bin, len));
  free(v);
  CHECK_EQ(rd_gcs_kv_put(g, "ns1", "k1", "x", 1, 1), 0);
  CHECK_EQ(rd_gcs_kv_get(g, "ns1", "k1", &v, &len), 0);
  CHECK(len == 1 && !memcmp(v, "x", 1));
  free(v);
  CHECK_EQ(rd_gcs_kv_get(g, "ns2", "k1", &v, &len), RD_ENOENT);   /* namespaces are apart */
  CHECK_EQ(rd_gcs_kv_put(g, "ns1", "empty", "", 0, 0), 0);
  CHECK_EQ(rd_gcs_kv_get(g, "ns1", "empty", &v, &len), 0);
  CHECK_EQ(len, 0);
  free(v);
  /* a 4 MiB value */
  size_t big = 4u << 20;
  char *bv = malloc(big);
  for (size_t i = 0; i < big; i++) bv[i] = (char)(i * 131 + 7);
  CHECK_EQ(rd_gcs_kv_put(g, "ns1", "big", bv, big, 0), 0);
  CHECK_EQ(rd_gcs_kv_get(g, "ns1", "big", &v, &len), 0);
  CHECK(len == big && !memcmp(v, bv, big));
  free(v);
  free(bv);
  for (int i = 0; i < 5; i++) {
    char k[16];
    snprintf(k, sizeof(k), "job:%d", 4 - i);
    CHECK_EQ(rd_gcs_kv_put(g, "ns1", k, k, strlen(k), 0), 0);
  }
  char **keys;
  size_t nk;
  CHECK_EQ(rd_gcs_kv_list(g, "ns1", "job:", &keys, &nk), 0);
  CHECK_EQ(nk, 5);
  CHECK(!strcmp(keys[0], "job:0") && !strcmp(keys[4], "job:4"));   /* sorted */
  free(keys);
  CHECK_EQ(rd_gcs_kv_list(g, "ns1", "", &keys, &nk), 0);
  CHECK_EQ(nk, 8);
  free(keys);
  CHECK_EQ(rd_gcs_kv_del(g, "ns1", "job:3"), 0);
  CHECK_EQ(rd_gcs_kv_del(g, "ns1", "job:3"), RD_ENOENT);
  CHECK_EQ(rd_gcs_kv_list(g, "ns1", "job:", &keys, &nk), 0);
  CHECK_EQ(nk, 4);
  free(keys);
  CHECK_EQ(rd_gcs_kv_put(g, "ns1", "", "x", 1, 0), RD_EINVAL);   /* empty key */
  rd_gcs_close(g);
  gcs_stop(&p);
  rm_dir();
  return 0;
}

static int t_gcs_code(void) {
  make_dir();
  gcs_proc p;
  gcs_start(&p, 3000);
  rd_gcs *g = connect_ok(&p);
  /* 5 MiB + a tail: several chunks and a short last one */
  size_t size = (5u << 20) + 12345;
  uint8_t *buf = malloc(size);
  uint64_t x = 88172645463325252ull;
  for (size_t i = 0; i < size; i++) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    buf[i] = (uint8_t)x;
  }
  char src[300], dst[300], hash[65], want[65], err[256];
  snprintf(src, sizeof(src), "%s/exe", g_dir);
  snprintf(dst, sizeof(dst), "%s/exe.fetched", g_dir);
  write_file(src, buf, size);
  rd_sha256_hex(buf, size, want);
  double t0 = now_ms();
  int rc = rd_gcs_code_put(g, src, hash, err, sizeof(err));
  if (rc) fprintf(stderr, "code put: %s\n", err);
  CHECK_EQ(rc, 0);
  fprintf(stderr, "code put of %zu bytes: %.0f ms\n", size, now_ms() - t0);
  CHECK(!strcmp(hash, want));
  CHECK_EQ(rd_gcs_code_put(g, src, hash, err, sizeof(err)), 0);   /* already there */
  t0 = now_ms();
  rc = rd_gcs_code_get(g, hash, dst, err, sizeof(err));
  if (rc) fprintf(stderr, "code get: %s\n", err);
  CHECK_EQ(rc, 0);
  fprintf(stderr, "code get: %.0f ms\n", now_ms() - t0);
  struct stat st;
  CHECK(stat(dst, &st) == 0);
  CHECK_EQ(st.st_size, (long long)size);
  CHECK_EQ(st.st_mode & 0777, 0700);
  char got[65];
  uint64_t gsz;
  CHECK_EQ(rd_sha256_file(dst, got, &gsz, NULL, 0), 0);
  CHECK(!strcmp(got, want));
  /* a second fetch of the same hash (another request raced the first) keeps
   * the file that is there: replacing it lets a worker forked during the
   * second download exec the new file while holding it open (ETXTBSY) */
  ino_t first = st.st_ino;
  CHECK_EQ(rd_gcs_code_get(g, hash, dst, err, sizeof(err)), 0);
  CHECK(stat(dst, &st) == 0);
  CHECK(st.st_ino == first);
  DIR *dir = opendir(g_dir);
  int temps = 0;
  for (struct dirent *e; dir && (e = readdir(dir));)
    if (!strncmp(e->d_name, "exe.fetched.", 12)) temps++;
  if (dir) closedir(dir);
  CHECK_EQ(temps, 0);   /* the losing download is removed */
  /* unknown and malformed hashes; nothing is left behind */
  char unknown[65];
  rd_sha256_hex("nope", 4, unknown);
  char dst2[300];
  snprintf(dst2, sizeof(dst2), "%s/none", g_dir);
  CHECK_EQ(rd_gcs_code_get(g, unknown, dst2, err, sizeof(err)), RD_ENOENT);
  CHECK(access(dst2, F_OK) != 0);
  CHECK_EQ(rd_gcs_code_get(g, "abc", dst2, err, sizeof(err)), RD_EINVAL);
  /* an upload whose bytes do not match its hash is refused */
  grpc_channel *ch = rd__rpc_channel(p.addr, 0, 0, NULL, 0);
  Rd__Gcs__CodePutRequest q = RD__GCS__CODE_PUT_REQUEST__INIT;
  q.hash = unknown;
  q.size = 3;
  q.data.data = (uint8_t *)"abc";
  q.data.len = 3;
  CHECK_EQ(rd__rpc_unary(ch, "/rd.gcs.Gcs/CodePut", TOKEN, &q.base, &rd__gcs__code_put_reply__descriptor,
                         NULL, 5000, 0, err, sizeof(err)), RD_EINVAL);
  CHECK(strstr(err, "hashes to") != NULL);
  CHECK_EQ(rd_gcs_code_get(g, unknown, dst2, err, sizeof(err)), RD_ENOENT);
  grpc_channel_destroy(ch);
  free(buf);
  rd_gcs_close(g);
  gcs_stop(&p);
  rm_dir();
  return 0;
}

/* code_put of a file holding text: its hash in hash. */
static void code_put_text(rd_gcs *g, const char *name, const char *text, char hash[65]) {
  char path[300], err[256];
  snprintf(path, sizeof(path), "%s/%s", g_dir, name);
  write_file(path, text, strlen(text));
  int rc = rd_gcs_code_put(g, path, hash, err, sizeof(err));
  if (rc) fprintf(stderr, "code put: %s\n", err);
  CHECK_EQ(rc, 0);
}

/* hash's entry in the code table (NULL: not there); t is refreshed. */
static const rd_gcs_code *code_entry(rd_gcs *g, rd_gcs_code_table *t, const char *hash) {
  free(t->code);
  CHECK_EQ(rd_gcs_code_list(g, t), 0);
  for (size_t i = 0; i < t->n; i++)
    if (!strcmp(t->code[i].hash, hash)) return &t->code[i];
  return NULL;
}

/* Code nothing uses is dropped after the TTL (1 s here): a running job's
 * and a node's heartbeat list keep theirs, and the TTL counts from the last
 * use; a job may not name code the GCS lacks.  Heartbeats naming too many
 * or malformed hashes are refused; --code-ttl-s takes only 0..1e8. */
static int t_gcs_code_ttl(void) {
  make_dir();
  setenv("RAYDIST_GCS_CODE_TTL_S", "1", 1);
  gcs_proc p;
  gcs_start(&p, 3000);
  unsetenv("RAYDIST_GCS_CODE_TTL_S");
  rd_gcs *g = connect_ok(&p);
  rd_gcs_node a;
  node_fill(&a, "127.0.0.2", 2);
  uint32_t ia = 0, job = 0;
  char err[256], job_code[65], node_code[65], loose[65];
  CHECK_EQ(rd_gcs_register_node(g, &a, &ia, err, sizeof(err)), 0);
  code_put_text(g, "job", "job's program", job_code);
  code_put_text(g, "node", "a detached actor's program", node_code);
  code_put_text(g, "loose", "uploaded, then never used", loose);
  CHECK_EQ(rd_gcs_job_add(g, job_code, 99, ia, &job), 0);
  rd_gcs_code_table t = {0};
  CHECK(code_entry(g, &t, loose) != NULL);
  CHECK_EQ(t.n, 3);
  CHECK_EQ(t.ttl_ms, 1000);
  /* 2.5 s of heartbeats naming node_code: the loose one goes, the others stay */
  char refs[1][65];
  memcpy(refs[0], node_code, 65);
  for (int i = 0; i < 25; i++) {
    CHECK_EQ(rd_gcs_heartbeat_code(g, ia, &a.total, 0, 0, refs, 1, NULL), 0);
    sleep_ms(100);
  }
  CHECK(code_entry(g, &t, loose) == NULL);
  CHECK(t.collected == 1 && t.collected_bytes == strlen("uploaded, then never used"));
  const rd_gcs_code *e = code_entry(g, &t, job_code);
  CHECK(e && e->in_use);
  e = code_entry(g, &t, node_code);
  CHECK(e && e->in_use);
  char dst[300];
  snprintf(dst, sizeof(dst), "%s/loose.fetched", g_dir);
  CHECK_EQ(rd_gcs_code_get(g, loose, dst, err, sizeof(err)), RD_ENOENT);
  /* the job ends and the node stops naming its code: both stay for the TTL, then go */
  CHECK_EQ(rd_gcs_job_finish(g, job, NULL), 0);
  double t0 = now_ms();
  for (int i = 0; i < 5; i++) {
    CHECK_EQ(rd_gcs_heartbeat_code(g, ia, &a.total, 0, 0, NULL, 0, NULL), 0);
    sleep_ms(100);
  }
  if (now_ms() - t0 < 800) {   /* still within the TTL of their last use */
    e = code_entry(g, &t, job_code);
    CHECK(e && !e->in_use);
    CHECK(code_entry(g, &t, node_code) != NULL);
  }
  for (int i = 0; i < 25 && t.n; i++) {
    CHECK_EQ(rd_gcs_heartbeat_code(g, ia, &a.total, 0, 0, NULL, 0, NULL), 0);
    sleep_ms(100);
    free(t.code);
    CHECK_EQ(rd_gcs_code_list(g, &t), 0);
  }
  CHECK_EQ(t.n, 0);
  CHECK_EQ(t.collected, 3);
  /* a new run of the job's program: refused until it is stored again */
  CHECK_EQ(rd_gcs_job_add(g, job_code, 100, ia, &job), RD_ENOENT);
  code_put_text(g, "job", "job's program", job_code);
  CHECK_EQ(rd_gcs_job_add(g, job_code, 100, ia, &job), 0);
  /* a read keeps code too: 2 s of reads, and it is still there */
  code_put_text(g, "read", "read again and again", loose);
  for (int i = 0; i < 10; i++) {
    CHECK_EQ(rd_gcs_code_get(g, loose, dst, err, sizeof(err)), 0);
    unlink(dst);
    CHECK_EQ(rd_gcs_heartbeat_code(g, ia, &a.total, 0, 0, NULL, 0, NULL), 0);
    sleep_ms(200);
  }
  CHECK(code_entry(g, &t, loose) != NULL);
  free(t.code);
  /* heartbeats naming malformed or too many hashes are refused */
  grpc_channel *ch = rd__rpc_channel(p.addr, 0, 0, NULL, 0);
  Rd__Gcs__HeartbeatRequest q = RD__GCS__HEARTBEAT_REQUEST__INIT;
  q.index = ia;
  char *bad[1] = {"xyz"};
  q.n_code_in_use = 1;
  q.code_in_use = bad;
  CHECK_EQ(rd__rpc_unary(ch, "/rd.gcs.Gcs/Heartbeat", TOKEN, &q.base, &rd__gcs__heartbeat_reply__descriptor, NULL,
                         5000, 0, err, sizeof(err)), RD_EINVAL);
  CHECK(strstr(err, "code hashes") != NULL);
  char **many = malloc((RD_GCS_CODE_REFS_MAX + 1) * sizeof(*many));
  for (int i = 0; i <= RD_GCS_CODE_REFS_MAX; i++) many[i] = job_code;
  q.n_code_in_use = RD_GCS_CODE_REFS_MAX + 1;
  q.code_in_use = many;
  CHECK_EQ(rd__rpc_unary(ch, "/rd.gcs.Gcs/Heartbeat", TOKEN, &q.base, &rd__gcs__heartbeat_reply__descriptor, NULL,
                         5000, 0, err, sizeof(err)), RD_EINVAL);
  q.n_code_in_use = RD_GCS_CODE_REFS_MAX;   /* the most it takes */
  CHECK_EQ(rd__rpc_unary(ch, "/rd.gcs.Gcs/Heartbeat", TOKEN, &q.base, &rd__gcs__heartbeat_reply__descriptor, NULL,
                         5000, 0, err, sizeof(err)), 0);
  free(many);
  grpc_channel_destroy(ch);
  rd_gcs_close(g);
  gcs_stop(&p);
  /* bad TTLs: usage errors */
  const char *bin = getenv("RAYDIST_BIN");
  const char *ttls[] = {"abc", "-1", "1e9", ""};
  for (int i = 0; i < 4; i++) {
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "'%s' gcs --bind 127.0.0.1:0 --token-file /dev/null --code-ttl-s '%s' 2>/dev/null", bin,
             ttls[i]);
    int st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == (i < 3 ? 2 : 1));   /* "": the default; then no token */
  }
  rm_dir();
  return 0;
}

static int t_gcs_jobs_actors(void) {
  make_dir();
  gcs_proc p;
  gcs_start(&p, 3000);
  rd_gcs *g = connect_ok(&p);
  ev_log log = {.mu = PTHREAD_MUTEX_INITIALIZER};
  CHECK_EQ(rd_gcs_subscribe(g, on_event, &log), 0);
  uint32_t j1, j2;
  char hash[65], src[300], err[256];
  rd_sha256_hex("x", 1, hash);
  CHECK_EQ(rd_gcs_job_add(g, hash, 1234, 1, &j1), RD_ENOENT);   /* its code must be stored first */
  snprintf(src, sizeof(src), "%s/x", g_dir);
  write_file(src, "x", 1);
  CHECK_EQ(rd_gcs_code_put(g, src, hash, err, sizeof(err)), 0);
  CHECK_EQ(rd_gcs_job_add(g, hash, 1234, 1, &j1), 0);
  CHECK_EQ(rd_gcs_job_add(g, "", 1235, 1, &j2), 0);
  CHECK(j1 >= 1 && j2 == j1 + 1);
  CHECK_EQ(rd_gcs_job_finish(g, j1, "done here"), 0);
  CHECK_EQ(rd_gcs_job_finish(g, j1, "again"), 0);   /* idempotent: the first reason stands */
  CHECK_EQ(rd_gcs_job_finish(g, 999, NULL), RD_ENOENT);
  rd_gcs_job *jobs;
  size_t njobs;
  CHECK_EQ(rd_gcs_job_list(g, &jobs, &njobs), 0);
  CHECK_EQ(njobs, 2);
  CHECK(jobs[0].job_id == j1 && jobs[0].end_ms >= jobs[0].start_ms && jobs[0].end_ms > 0);
  CHECK(!strcmp(jobs[0].end_reason, "done here") && !strcmp(jobs[0].code_hash, hash));
  CHECK(jobs[1].job_id == j2 && jobs[1].end_ms == 0 && jobs[1].driver_pid == 1235 && jobs[1].node_index == 1);
  free(jobs);
  /* ended jobs are kept up to 1000, the newest; running ones always */
  for (int i = 0; i < 1005; i++) {
    uint32_t j;
    CHECK_EQ(rd_gcs_job_add(g, "", 2000 + i, 2, &j), 0);
    CHECK_EQ(rd_gcs_job_finish(g, j, NULL), 0);
  }
  CHECK_EQ(rd_gcs_job_list(g, &jobs, &njobs), 0);
  CHECK_EQ(njobs, 1001);
  CHECK(jobs[0].job_id == j2 && jobs[0].end_ms == 0);   /* still running */
  CHECK(!strcmp(jobs[1000].end_reason, "finished") && jobs[1000].driver_pid == 2000 + 1004);
  free(jobs);
  CHECK_EQ(rd_gcs_job_add(g, "not-a-hash", 1, 1, &j2), RD_EINVAL);

  CHECK_EQ(rd_gcs_actor_register(g, 1, "svc", "Embedder", 3, 7), 0);   /* max_pending_calls 7 */
  CHECK_EQ(rd_gcs_actor_register(g, 2, "svc", "Embedder", 4, 0), RD_EEXIST);   /* name taken */
  CHECK(strstr(rd_gcs_last_error(), "taken") != NULL);
  CHECK_EQ(rd_gcs_actor_register(g, 1, "other", "Embedder", 4, 0), RD_EEXIST);  /* id taken */
  CHECK_EQ(rd_gcs_actor_register(g, 3, NULL, "Anon", 4, 0), 0);
  CHECK_EQ(rd_gcs_actor_register(g, 4, "", "Anon", 4, 0), 0);   /* unnamed actors never clash */
  CHECK_EQ(rd_gcs_actor_register(g, 5, "x", "", 4, 0), RD_EINVAL);
  uint64_t id;
  uint32_t node;
  int32_t mp = 0;
  CHECK_EQ(rd_gcs_actor_lookup(g, "svc", &id, &node, &mp), 0);
  CHECK(id == 1 && node == 3 && mp == 7);
  CHECK_EQ(rd_gcs_actor_update(g, 1, RD_GCS_ACTOR_RESTARTING, 0, "worker died"), 0);
  CHECK_EQ(rd_gcs_actor_update(g, 1, RD_GCS_ACTOR_ALIVE, 5, ""), 0);
  CHECK_EQ(rd_gcs_actor_lookup(g, "svc", &id, &node, &mp), 0);
  CHECK(id == 1 && node == 5 && mp == 7);   /* kept through a restart */
  CHECK_EQ(rd_gcs_actor_update(g, 1, RD_GCS_ACTOR_DEAD, 0, "killed"), 0);
  CHECK_EQ(rd_gcs_actor_lookup(g, "svc", &id, &node, NULL), RD_ENOENT);
  CHECK_EQ(rd_gcs_actor_register(g, 2, "svc", "Embedder", 4, 0), 0);   /* the name is free again */
  CHECK_EQ(rd_gcs_actor_update(g, 1, RD_GCS_ACTOR_ALIVE, 5, ""), RD_EEXIST);  /* cannot take it back */
  CHECK_EQ(rd_gcs_actor_update(g, 77, RD_GCS_ACTOR_DEAD, 0, ""), RD_ENOENT);
  CHECK_EQ(rd_gcs_actor_update(g, 2, 9, 0, ""), RD_EINVAL);
  /* the subscriber saw actor 1 go through its states in order */
  int states[8], ns = 0;
  CHECK(ev_wait(&log, RD_GCS_EV_ACTOR, 0, 2, 2000) >= 0);
  pthread_mutex_lock(&log.mu);
  for (int i = 0; i < log.n && ns < 8; i++)
    if (log.ev[i].kind == RD_GCS_EV_ACTOR && log.ev[i].actor_id == 1) states[ns++] = log.ev[i].actor_state;
  pthread_mutex_unlock(&log.mu);
  CHECK_EQ(ns, 4);
  CHECK(states[0] == RD_GCS_ACTOR_ALIVE && states[1] == RD_GCS_ACTOR_RESTARTING &&
        states[2] == RD_GCS_ACTOR_ALIVE && states[3] == RD_GCS_ACTOR_DEAD);
  /* the table, for `raydist status`: every actor with its state */
  rd_gcs_actor *as = NULL;
  size_t na = 0;
  CHECK_EQ(rd_gcs_actor_list(g, &as, &na), 0);
  CHECK_EQ(na, 4);   /* 1 (dead), 2 (svc), 3 and 4 (anonymous) */
  int seen = 0;
  for (size_t i = 0; i < na; i++) {
    if (as[i].actor_id == 1) {
      CHECK(as[i].state == RD_GCS_ACTOR_DEAD && !strcmp(as[i].reason, "killed") && !strcmp(as[i].name, "svc"));
      seen |= 1;
    }
    if (as[i].actor_id == 2) {
      CHECK(as[i].state == RD_GCS_ACTOR_ALIVE && as[i].node_index == 4 && !strcmp(as[i].class_name, "Embedder"));
      seen |= 2;
    }
  }
  CHECK_EQ(seen, 3);
  free(as);
  /* named actors made and killed without end: the dead beyond 1000 go,
   * lowest ids first; live ones stay */
  for (uint64_t k = 0; k < 1010; k++) {
    char nm[32];
    snprintf(nm, sizeof(nm), "churn-%llu", (unsigned long long)k);
    CHECK_EQ(rd_gcs_actor_register(g, 100 + k, nm, "Churn", 4, 0), 0);
    CHECK_EQ(rd_gcs_actor_update(g, 100 + k, RD_GCS_ACTOR_DEAD, 0, "done"), 0);
  }
  CHECK_EQ(rd_gcs_actor_list(g, &as, &na), 0);
  size_t dead = 0, live = 0, lowest = SIZE_MAX;
  for (size_t i = 0; i < na; i++) {
    if (as[i].state == RD_GCS_ACTOR_DEAD) {
      dead++;
      if (as[i].actor_id < lowest) lowest = (size_t)as[i].actor_id;
    } else {
      live++;
    }
  }
  free(as);
  printf("actor table after churn: %zu live, %zu dead, lowest dead id %zu\n", live, dead, lowest);
  CHECK_EQ(live, 3);
  CHECK_EQ(dead, 1000);
  CHECK_EQ(lowest, 110);   /* 1 and 100..109 went */
  /* the GCS stops cleanly under a live subscription; the client, left
   * resubscribing to nobody, still closes at once */
  gcs_stop(&p);
  CHECK_EQ(rd_gcs_kv_put(g, "ns", "k", "v", 1, 1), RD_ECONN);
  sleep_ms(300);
  double t0 = now_ms();
  rd_gcs_close(g);
  CHECK(now_ms() - t0 < 2000);
  rm_dir();
  return 0;
}

/* ---- placement groups ---- */

/* pg_fill's records' arrays (one record filled at a time), with room for
 * one bundle too many */
static rd_resources fill_bundles[RD_GCS_PG_MAX_BUNDLES + 1];
static uint32_t fill_nodes[RD_GCS_PG_MAX_BUNDLES + 1];

static void pg_fill(rd_gcs_pg *pg, uint64_t id, const char *name, uint32_t record_node, size_t nb) {
  memset(pg, 0, sizeof(*pg));
  memset(fill_bundles, 0, sizeof(fill_bundles));
  memset(fill_nodes, 0, sizeof(fill_nodes));
  pg->bundles = fill_bundles;
  pg->bundle_nodes = fill_nodes;
  pg->pg_id = id;
  snprintf(pg->name, sizeof(pg->name), "%s", name);
  pg->strategy = 1;
  pg->state = RD_GCS_PG_PENDING;
  pg->record_node = record_node;
  pg->nbundles = nb;
  for (size_t i = 0; i < nb; i++) pg->bundles[i].cpu = RD_RES_UNIT;
  snprintf(pg->reason, sizeof(pg->reason), "waiting for resources");
}

/* The record in the GCS under id, which must exist. */
static void pg_get_ok(rd_gcs *g, uint64_t id, rd_gcs_pg *out) {
  int rc = rd_gcs_pg_get(g, id, NULL, out);
  if (rc) fprintf(stderr, "pg get %" PRIx64 ": %s\n", id, rd_gcs_last_error());
  CHECK_EQ(rc, 0);
  CHECK_EQ(out->pg_id, id);
}

/* A put the client sends as is and the GCS must refuse: RD_EINVAL with a
 * reason that names the placement group. */
static void pg_put_bad(rd_gcs *g, const rd_gcs_pg *pg) {
  CHECK_EQ(rd_gcs_pg_put(g, pg), RD_EINVAL);
  CHECK(strstr(rd_gcs_last_error(), "placement group") != NULL);
}

/* Put/get by id and name, the sorted list, unique names among groups not
 * REMOVED, bad records refused (the GCS keeps serving), the groups of a
 * record node that dies (by heartbeat timeout, and by leaving) becoming
 * REMOVED while other groups' bundles on it are left alone, and the cap on
 * REMOVED records. */
static int t_gcs_pgs(void) {
  make_dir();
  gcs_proc p;
  const int hb_timeout = 600;
  gcs_start(&p, hb_timeout);
  rd_gcs *g = connect_ok(&p);
  static rd_gcs_pg pg, got;   /* got's arrays are rd_gcs_pg_get's (rd_gcs_pg_clear at the end) */
  rd_gcs_pg *list;
  size_t n;
  CHECK_EQ(rd_gcs_pg_list(g, &list, &n), 0);
  CHECK(list == NULL && n == 0);

  /* three groups recorded by nodes 100 and 101 (never registered) */
  pg_fill(&pg, 0x20, "train", 100, 2);
  pg.strategy = 2;
  pg.state = RD_GCS_PG_CREATED;
  pg.bundles[0].gpu = RD_RES_UNIT;
  pg.bundles[0].memory = 1 << 20;
  CHECK_EQ(rd_res_set_custom(&pg.bundles[0], "tpu", 2 * RD_RES_UNIT), 0);
  pg.bundles[1].cpu = RD_RES_UNIT / 2;
  pg.bundle_nodes[0] = 100;
  pg.bundle_nodes[1] = 4095;
  pg.reason[0] = 0;
  CHECK_EQ(rd_gcs_pg_put(g, &pg), 0);
  pg_fill(&pg, 0x10, "", 100, 1);
  CHECK_EQ(rd_gcs_pg_put(g, &pg), 0);
  pg_fill(&pg, 0x30, "serve", 101, 64);
  CHECK_EQ(rd_gcs_pg_put(g, &pg), 0);

  pg_get_ok(g, 0x20, &got);
  CHECK(!strcmp(got.name, "train") && !strcmp(got.reason, ""));
  CHECK(got.strategy == 2 && got.state == RD_GCS_PG_CREATED && got.record_node == 100);
  CHECK_EQ(got.nbundles, 2);
  CHECK(got.bundles[0].cpu == RD_RES_UNIT && got.bundles[0].gpu == RD_RES_UNIT &&
        got.bundles[0].memory == 1 << 20);
  CHECK_EQ(rd_res_get_custom(&got.bundles[0], "tpu"), 2 * RD_RES_UNIT);
  CHECK(got.bundles[1].cpu == RD_RES_UNIT / 2 && got.bundles[1].gpu == 0 && got.bundles[1].ncustom == 0);
  CHECK(got.bundle_nodes[0] == 100 && got.bundle_nodes[1] == 4095);
  CHECK_EQ(rd_gcs_pg_get(g, 0, "train", &got), 0);
  CHECK_EQ(got.pg_id, 0x20);
  CHECK_EQ(rd_gcs_pg_get(g, 0, "serve", &got), 0);
  CHECK(got.pg_id == 0x30 && got.nbundles == 64 && !strcmp(got.reason, "waiting for resources"));
  CHECK_EQ(rd_gcs_pg_get(g, 0x20, "serve", &got), 0);   /* an id wins over a name */
  CHECK_EQ(got.pg_id, 0x20);
  CHECK_EQ(rd_gcs_pg_get(g, 0x99, NULL, &got), RD_ENOENT);
  CHECK(strstr(rd_gcs_last_error(), "no placement group") != NULL);
  CHECK_EQ(rd_gcs_pg_get(g, 0, "nope", &got), RD_ENOENT);
  CHECK_EQ(rd_gcs_pg_get(g, 0, "", &got), RD_EINVAL);
  CHECK_EQ(rd_gcs_pg_get(g, 0, NULL, &got), RD_EINVAL);

  CHECK_EQ(rd_gcs_pg_list(g, &list, &n), 0);
  CHECK_EQ(n, 3);
  CHECK(list[0].pg_id == 0x10 && list[1].pg_id == 0x20 && list[2].pg_id == 0x30);
  CHECK(!strcmp(list[1].name, "train") && list[1].bundle_nodes[1] == 4095 && list[2].nbundles == 64);
  free(list);

  /* names: unique among groups not REMOVED */
  pg_fill(&pg, 0x40, "train", 100, 1);
  CHECK_EQ(rd_gcs_pg_put(g, &pg), RD_EEXIST);
  CHECK(strstr(rd_gcs_last_error(), "placement group name 'train' is taken") != NULL);
  CHECK_EQ(rd_gcs_pg_get(g, 0x40, NULL, &got), RD_ENOENT);   /* nothing written */
  pg_fill(&pg, 0x20, "train", 100, 1);                        /* its holder may rewrite it */
  pg.state = RD_GCS_PG_RESCHEDULING;
  CHECK_EQ(rd_gcs_pg_put(g, &pg), 0);
  CHECK_EQ(rd_gcs_pg_get(g, 0, "train", &got), 0);
  CHECK(got.pg_id == 0x20 && got.state == RD_GCS_PG_RESCHEDULING && got.nbundles == 1);
  pg_fill(&pg, 0x30, "serve2", 101, 1);                       /* a rename frees the old name */
  CHECK_EQ(rd_gcs_pg_put(g, &pg), 0);
  CHECK_EQ(rd_gcs_pg_get(g, 0, "serve", &got), RD_ENOENT);
  CHECK_EQ(rd_gcs_pg_get(g, 0, "serve2", &got), 0);
  CHECK_EQ(got.pg_id, 0x30);
  pg_fill(&pg, 0x20, "train", 100, 1);                        /* REMOVED frees it */
  pg.state = RD_GCS_PG_REMOVED;
  snprintf(pg.reason, sizeof(pg.reason), "removed by its owner");
  CHECK_EQ(rd_gcs_pg_put(g, &pg), 0);
  CHECK_EQ(rd_gcs_pg_get(g, 0, "train", &got), RD_ENOENT);
  pg_get_ok(g, 0x20, &got);                                   /* kept, with its reason */
  CHECK(got.state == RD_GCS_PG_REMOVED && !strcmp(got.reason, "removed by its owner"));
  pg_fill(&pg, 0x40, "train", 100, 1);                        /* another id takes it */
  CHECK_EQ(rd_gcs_pg_put(g, &pg), 0);
  CHECK_EQ(rd_gcs_pg_get(g, 0, "train", &got), 0);
  CHECK_EQ(got.pg_id, 0x40);
  pg_fill(&pg, 0x20, "train", 100, 1);                        /* the old holder cannot take it back */
  CHECK_EQ(rd_gcs_pg_put(g, &pg), RD_EEXIST);
  pg_get_ok(g, 0x20, &got);
  CHECK_EQ(got.state, RD_GCS_PG_REMOVED);
  pg_fill(&pg, 0x41, "train", 100, 1);                        /* a REMOVED record may share a name */
  pg.state = RD_GCS_PG_REMOVED;
  CHECK_EQ(rd_gcs_pg_put(g, &pg), 0);
  CHECK_EQ(rd_gcs_pg_get(g, 0, "train", &got), 0);
  CHECK_EQ(got.pg_id, 0x40);

  /* bad records: RD_EINVAL, nothing written */
  pg_fill(&pg, 0, "", 100, 1);
  pg_put_bad(g, &pg);
  pg_fill(&pg, 0x50, "", 100, 0);
  pg_put_bad(g, &pg);
  pg_fill(&pg, 0x50, "", 100, 1);
  pg.strategy = 4;
  pg_put_bad(g, &pg);
  CHECK(strstr(rd_gcs_last_error(), "strategy") != NULL);
  pg.strategy = -1;
  pg_put_bad(g, &pg);
  pg_fill(&pg, 0x50, "", 100, 1);
  pg.state = 0;
  pg_put_bad(g, &pg);
  pg.state = 5;
  pg_put_bad(g, &pg);
  pg_fill(&pg, 0x50, "", 0, 1);
  pg_put_bad(g, &pg);
  pg_fill(&pg, 0x50, "", 4096, 1);
  pg_put_bad(g, &pg);
  pg_fill(&pg, 0x50, "", 100, 2);
  pg.bundle_nodes[1] = 4096;
  pg_put_bad(g, &pg);
  pg_fill(&pg, 0x50, "", 100, 2);
  pg.bundles[1].cpu = 0;                                      /* asks for nothing */
  pg_put_bad(g, &pg);
  CHECK(strstr(rd_gcs_last_error(), "bundle 1 asks for nothing") != NULL);
  CHECK_EQ(rd_res_set_custom(&pg.bundles[1], "tpu", 0), 0);   /* nothing, by name */
  pg_put_bad(g, &pg);
  pg_fill(&pg, 0x50, "", 100, 2);
  pg.bundles[1].cpu = 3 * RD_RES_UNIT / 2;                    /* above one unit, not whole */
  pg_put_bad(g, &pg);
  CHECK(strstr(rd_gcs_last_error(), "bundle 1 is not a valid") != NULL);
  pg_fill(&pg, 0x50, "", 100, 1);
  pg.bundles[0].memory = -1;
  pg_put_bad(g, &pg);
  pg_fill(&pg, 0x50, "", 100, 1);
  pg.nbundles = RD_GCS_PG_MAX_BUNDLES + 1;                    /* refused by the client itself */
  CHECK_EQ(rd_gcs_pg_put(g, &pg), RD_EINVAL);
  /* what the client cannot send: too many bundles, bundle nodes not one per bundle */
  grpc_init();
  grpc_channel *ch = rd__rpc_channel(p.addr, 0, 0, NULL, 0);
  Rd__Resources res = RD__RESOURCES__INIT;
  res.cpu = RD_RES_UNIT;
  static Rd__Resources *resp[RD_GCS_PG_MAX_BUNDLES + 1];
  static uint32_t nodes[RD_GCS_PG_MAX_BUNDLES + 1];
  for (int i = 0; i <= RD_GCS_PG_MAX_BUNDLES; i++) resp[i] = &res;
  Rd__Gcs__PgInfo raw = RD__GCS__PG_INFO__INIT;
  raw.pg_id = 0x50;
  raw.state = RD__GCS__PG_STATE__PG_PENDING;
  raw.record_node = 100;
  raw.bundles = resp;
  raw.bundle_nodes = nodes;
  char err[256];
  const size_t shapes[][2] = {{RD_GCS_PG_MAX_BUNDLES + 1, RD_GCS_PG_MAX_BUNDLES + 1}, {2, 1}, {1, 2}, {1, 0}};
  for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
    raw.n_bundles = shapes[i][0];
    raw.n_bundle_nodes = shapes[i][1];
    CHECK_EQ(rd__rpc_unary(ch, "/rd.gcs.Gcs/PgPut", TOKEN, &raw.base, NULL, NULL, 3000, 0, err, sizeof(err)),
             RD_EINVAL);
    CHECK(strstr(err, "placement group") != NULL);
  }
  raw.n_bundles = raw.n_bundle_nodes = 1;                     /* the same call, well formed */
  CHECK_EQ(rd__rpc_unary(ch, "/rd.gcs.Gcs/PgPut", TOKEN, &raw.base, NULL, NULL, 3000, 0, err, sizeof(err)), 0);
  grpc_channel_destroy(ch);
  grpc_shutdown();
  CHECK_EQ(rd_gcs_pg_list(g, &list, &n), 0);                  /* still serving, only good records */
  CHECK_EQ(n, 6);
  uint64_t want[] = {0x10, 0x20, 0x30, 0x40, 0x41, 0x50};
  for (size_t i = 0; i < n; i++) CHECK_EQ(list[i].pg_id, want[i]);
  free(list);

  /* record nodes die: a by leaving, b by silence (a keeps beating) */
  rd_gcs_node a, b;
  node_fill(&a, "127.0.0.2", 4);
  node_fill(&b, "127.0.0.3", 4);
  uint32_t ia = 0, ib = 0;
  CHECK_EQ(rd_gcs_register_node(g, &a, &ia, err, sizeof(err)), 0);
  CHECK_EQ(rd_gcs_register_node(g, &b, &ib, err, sizeof(err)), 0);
  pg_fill(&pg, 0x60, "on-a", ia, 2);                          /* recorded by a, a bundle on b */
  pg.state = RD_GCS_PG_CREATED;
  pg.bundle_nodes[0] = ia;
  pg.bundle_nodes[1] = ib;
  pg.reason[0] = 0;
  CHECK_EQ(rd_gcs_pg_put(g, &pg), 0);
  pg_fill(&pg, 0x70, "on-b", ib, 1);
  pg.state = RD_GCS_PG_CREATED;
  pg.bundle_nodes[0] = ib;
  CHECK_EQ(rd_gcs_pg_put(g, &pg), 0);
  pg_fill(&pg, 0x71, "", ib, 1);                              /* pending, anonymous */
  CHECK_EQ(rd_gcs_pg_put(g, &pg), 0);
  pg_fill(&pg, 0x72, "", ib, 1);                              /* removed before: keeps its reason */
  pg.state = RD_GCS_PG_REMOVED;
  snprintf(pg.reason, sizeof(pg.reason), "removed by its owner");
  CHECK_EQ(rd_gcs_pg_put(g, &pg), 0);
  char want_b[64], want_a[64];
  snprintf(want_b, sizeof(want_b), "its record node %u died", ib);
  snprintf(want_a, sizeof(want_a), "its record node %u died", ia);
  int removed = 0;
  for (int i = 0; i < 40 && !removed; i++) {
    CHECK_EQ(rd_gcs_heartbeat(g, ia, &a.total, 0, 0, NULL), 0);
    sleep_ms(100);
    pg_get_ok(g, 0x70, &got);
    removed = got.state == RD_GCS_PG_REMOVED;
  }
  CHECK(removed);
  CHECK(!strcmp(got.reason, want_b));
  CHECK(got.bundle_nodes[0] == ib && !strcmp(got.name, "on-b"));
  CHECK_EQ(rd_gcs_pg_get(g, 0, "on-b", &got), RD_ENOENT);     /* the name is free */
  pg_get_ok(g, 0x71, &got);
  CHECK(got.state == RD_GCS_PG_REMOVED && !strcmp(got.reason, want_b));
  pg_get_ok(g, 0x72, &got);
  CHECK(got.state == RD_GCS_PG_REMOVED && !strcmp(got.reason, "removed by its owner"));
  pg_get_ok(g, 0x60, &got);                                   /* a's group: left to a */
  CHECK(got.state == RD_GCS_PG_CREATED && got.bundle_nodes[0] == ia && got.bundle_nodes[1] == ib &&
        !strcmp(got.reason, ""));
  CHECK_EQ(rd_gcs_pg_get(g, 0, "on-a", &got), 0);
  pg_get_ok(g, 0x30, &got);                                   /* nodes 100, 101: untouched */
  CHECK_EQ(got.state, RD_GCS_PG_PENDING);
  CHECK_EQ(rd_gcs_unregister_node(g, ia, "stopped by test"), 0);
  pg_get_ok(g, 0x60, &got);
  CHECK(got.state == RD_GCS_PG_REMOVED && !strcmp(got.reason, want_a));
  CHECK_EQ(rd_gcs_pg_get(g, 0, "on-a", &got), RD_ENOENT);
  /* a late write from a dead record node cannot bring its group back;
   * recording the removal is still fine */
  pg_fill(&pg, 0x70, "on-b", ib, 1);
  pg.state = RD_GCS_PG_CREATED;
  CHECK_EQ(rd_gcs_pg_put(g, &pg), RD_ENODE_DIED);
  CHECK(strstr(rd_gcs_last_error(), "is dead") != NULL);
  pg_get_ok(g, 0x70, &got);
  CHECK_EQ(got.state, RD_GCS_PG_REMOVED);
  pg.state = RD_GCS_PG_REMOVED;
  CHECK_EQ(rd_gcs_pg_put(g, &pg), 0);

  /* REMOVED records: the 1000 newest ids are kept */
  size_t live = 0, gone = 0;
  CHECK_EQ(rd_gcs_pg_list(g, &list, &n), 0);
  for (size_t i = 0; i < n; i++) {
    live += list[i].state != RD_GCS_PG_REMOVED;
    gone += list[i].state == RD_GCS_PG_REMOVED;
  }
  free(list);
  CHECK(live == 4 && gone == 6);   /* live: 0x10, 0x30, 0x40, 0x50 */
  double t0 = now_ms();
  for (uint64_t i = 0; i < 1000; i++) {
    pg_fill(&pg, 0x1000 + i, "", 100, 1);
    pg.state = RD_GCS_PG_REMOVED;
    CHECK_EQ(rd_gcs_pg_put(g, &pg), 0);
  }
  fprintf(stderr, "1000 REMOVED puts: %.0f ms\n", now_ms() - t0);
  CHECK_EQ(rd_gcs_pg_list(g, &list, &n), 0);
  CHECK_EQ(n, live + 1000);
  for (size_t i = 0; i < n; i++) {
    if (i) CHECK(list[i].pg_id > list[i - 1].pg_id);
    if (list[i].state == RD_GCS_PG_REMOVED) CHECK(list[i].pg_id >= 0x1000);   /* the oldest went */
  }
  CHECK_EQ(list[0].pg_id, 0x10);
  CHECK_EQ(list[n - 1].pg_id, 0x1000 + 999);
  free(list);
  CHECK_EQ(rd_gcs_pg_get(g, 0x20, NULL, &got), RD_ENOENT);
  pg_get_ok(g, 0x40, &got);                                   /* live ones never go */
  CHECK_EQ(rd_gcs_pg_get(g, 0, "train", &got), 0);

  /* the largest group: every bundle and its node through put, get (into
   * got's smaller arrays, which grow) and list */
  pg_fill(&pg, 0x2000, "big", 100, RD_GCS_PG_MAX_BUNDLES);
  for (size_t i = 0; i < RD_GCS_PG_MAX_BUNDLES; i++) {
    pg.bundles[i].cpu = (int64_t)(1 + i % 4) * RD_RES_UNIT;
    pg.bundle_nodes[i] = (uint32_t)(1 + i % 4000);
  }
  CHECK_EQ(rd_gcs_pg_put(g, &pg), 0);
  pg_get_ok(g, 0x2000, &got);
  CHECK_EQ(got.nbundles, RD_GCS_PG_MAX_BUNDLES);
  for (size_t i = 0; i < RD_GCS_PG_MAX_BUNDLES; i++)
    CHECK(got.bundles[i].cpu == (int64_t)(1 + i % 4) * RD_RES_UNIT && got.bundle_nodes[i] == 1 + i % 4000);
  CHECK_EQ(rd_gcs_pg_list(g, &list, &n), 0);
  CHECK(n == live + 1001 && list[n - 1].pg_id == 0x2000 && list[n - 1].nbundles == RD_GCS_PG_MAX_BUNDLES);
  CHECK(list[n - 1].bundle_nodes[RD_GCS_PG_MAX_BUNDLES - 1] == 1 + (RD_GCS_PG_MAX_BUNDLES - 1) % 4000);
  CHECK(list[n - 2].nbundles == 1 && list[n - 2].bundles[0].cpu == RD_RES_UNIT);
  free(list);
  rd_gcs_pg_clear(&got);

  /* REMOVED ones are kept within a byte budget as well: 60 of the largest
   * (~30 KB each) would have passed PgList's reply limit; the oldest go */
  for (uint64_t i = 0; i < 60; i++) {
    pg_fill(&pg, 0x3000 + i, "", 100, RD_GCS_PG_MAX_BUNDLES);
    pg.state = RD_GCS_PG_REMOVED;
    CHECK_EQ(rd_gcs_pg_put(g, &pg), 0);
  }
  CHECK_EQ(rd_gcs_pg_list(g, &list, &n), 0);
  size_t big = 0;
  for (size_t i = 0; i < n; i++) big += list[i].pg_id >= 0x3000;
  fprintf(stderr, "REMOVED groups of %d bundles kept: %zu of 60\n", RD_GCS_PG_MAX_BUNDLES, big);
  CHECK(big >= 10 && big < 60);
  CHECK_EQ(list[n - 1].pg_id, 0x3000 + 59);
  CHECK_EQ(list[n - 1 - big].pg_id, 0x2000);   /* the live one stays */
  free(list);

  rd_gcs_close(g);
  gcs_stop(&p);
  rm_dir();
  return 0;
}

/* Wrong or missing token, bad and unreachable addresses, malformed and
 * oversized messages: each gets its error and the GCS keeps serving. */
static int t_gcs_bad_input(void) {
  make_dir();
  gcs_proc p;
  gcs_start(&p, 3000);
  rd_gcs *g = NULL;
  char err[256];
  CHECK_EQ(rd_gcs_connect(p.addr, "wrong-token", 3000, &g, err, sizeof(err)), RD_EAUTH);
  CHECK(g == NULL && strstr(err, "token") != NULL);
  CHECK_EQ(rd_gcs_connect(p.addr, "", 3000, &g, err, sizeof(err)), RD_EINVAL);
  CHECK_EQ(rd_gcs_connect("no-port", TOKEN, 3000, &g, err, sizeof(err)), RD_EINVAL);
  CHECK_EQ(rd_gcs_connect("127.0.0.1:99999", TOKEN, 3000, &g, err, sizeof(err)), RD_EINVAL);
  double t0 = now_ms();
  CHECK_EQ(rd_gcs_connect("127.0.0.1:1", TOKEN, 300, &g, err, sizeof(err)), RD_ECONN);
  CHECK(now_ms() - t0 < 3000);

  grpc_init();
  grpc_channel *ch = rd__rpc_channel(p.addr, 0, 0, NULL, 0);
  Rd__Gcs__Empty e = RD__GCS__EMPTY__INIT;
  /* no token at all: raw metadata-free call */
  CHECK_EQ(rd__rpc_unary(ch, "/rd.gcs.Gcs/GetNodes", "", &e.base, NULL, NULL, 3000, 0, err, sizeof(err)), RD_EAUTH);
  CHECK_EQ(rd__rpc_unary(ch, "/rd.gcs.Gcs/GetNodes", TOKEN "x", &e.base, NULL, NULL, 3000, 0, err, sizeof(err)), RD_EAUTH);
  CHECK_EQ(rd__rpc_unary(ch, "/rd.gcs.Gcs/NoSuchCall", TOKEN, &e.base, NULL, NULL, 3000, 0, err, sizeof(err)), RD_ENOTSUP);
  /* bytes that are no protobuf at all, and a wire type that contradicts the schema */
  const uint8_t junk[][6] = {{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, {0x0a, 0x05, 'a', 'b'}, {0x0d, 1, 2, 3, 4, 0}};
  for (int i = 0; i < 3; i++) {
    grpc_slice s = grpc_slice_from_copied_buffer((const char *)junk[i], 6);
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    int rc = rd__rpc_unary_raw(ch, "/rd.gcs.Gcs/Heartbeat", TOKEN, bb, NULL, NULL, 3000, 0, err, sizeof(err));
    grpc_byte_buffer_destroy(bb);
    CHECK_EQ(rc, RD_EINVAL);
    CHECK(strstr(err, "malformed") != NULL);
  }
  /* a 9 MiB message is over the GCS's 8 MiB limit */
  size_t big = 9u << 20;
  char *bv = calloc(1, big);
  g = NULL;
  CHECK_EQ(rd_gcs_connect(p.addr, TOKEN, 3000, &g, err, sizeof(err)), 0);
  CHECK_EQ(rd_gcs_kv_put(g, "ns", "big", bv, big, 1), RD_EINVAL);
  fprintf(stderr, "oversized: %s\n", rd_gcs_last_error());
  free(bv);
  /* still serving, state intact */
  CHECK_EQ(rd_gcs_kv_put(g, "ns", "small", "v", 1, 1), 0);
  void *v;
  size_t len;
  CHECK_EQ(rd_gcs_kv_get(g, "ns", "small", &v, &len), 0);
  free(v);
  CHECK_EQ(rd_gcs_kv_get(g, "ns", "big", &v, &len), RD_ENOENT);
  grpc_channel_destroy(ch);
  grpc_shutdown();
  rd_gcs_close(g);
  gcs_stop(&p);
  rm_dir();
  return 0;
}

/* Random requests (tests/runtime/wirefuzz.c) to every unary GCS method,
 * some damaged: each gets an answer, never a crash or a hang; every 100
 * calls the GCS still stores and returns a value and lists nodes, and it
 * stops cleanly at the end (a sanitizer report would change its exit). */
static int t_gcs_fuzz(void) {
  static const struct {
    const char *method;
    const ProtobufCMessageDescriptor *req;
  } calls[] = {
      {"Ping", &rd__gcs__empty__descriptor},
      {"RegisterNode", &rd__gcs__register_node_request__descriptor},
      {"Heartbeat", &rd__gcs__heartbeat_request__descriptor},
      {"UnregisterNode", &rd__gcs__unregister_node_request__descriptor},
      {"GetNodes", &rd__gcs__empty__descriptor},
      {"KvPut", &rd__gcs__kv_put_request__descriptor},
      {"KvGet", &rd__gcs__kv_key__descriptor},
      {"KvDel", &rd__gcs__kv_key__descriptor},
      {"KvList", &rd__gcs__kv_list_request__descriptor},
      {"CodeStat", &rd__gcs__code_stat_request__descriptor},
      {"CodePut", &rd__gcs__code_put_request__descriptor},
      {"CodeGet", &rd__gcs__code_get_request__descriptor},
      {"CodeList", &rd__gcs__empty__descriptor},
      {"JobAdd", &rd__gcs__job_add_request__descriptor},
      {"JobFinish", &rd__gcs__job_finish_request__descriptor},
      {"JobList", &rd__gcs__empty__descriptor},
      {"ActorRegister", &rd__gcs__actor_info__descriptor},
      {"ActorUpdate", &rd__gcs__actor_update_request__descriptor},
      {"ActorLookup", &rd__gcs__actor_lookup_request__descriptor},
      {"ActorList", &rd__gcs__empty__descriptor},
      {"PgPut", &rd__gcs__pg_info__descriptor},
      {"PgGet", &rd__gcs__pg_key__descriptor},
      {"PgList", &rd__gcs__empty__descriptor},
      {"EventAdd", &rd__gcs__cluster_event__descriptor},
      {"EventList", &rd__gcs__event_list_request__descriptor},
  };
  const size_t ncalls = sizeof(calls) / sizeof(calls[0]);
  const char *e = getenv("RD_FUZZ_ROUNDS");
  int rounds = e && *e ? atoi(e) : 5000;
  e = getenv("RD_FUZZ_SEED");
  wf_rng r = {e && *e ? strtoull(e, NULL, 0) : 0x6c5f00dull};
  fprintf(stderr, "gcs_fuzz: %d calls, seed 0x%llx\n", rounds, (unsigned long long)r.s);
  static const char *const names[] = {"ns", "k", "rd", "job", "actor", "pg", "0123456789abcdef"};
  wf_set_names(names, sizeof(names) / sizeof(names[0]));
  make_dir();
  gcs_proc p;
  gcs_start(&p, 3000);
  rd_gcs *g = NULL;
  char err[256];
  CHECK_EQ(rd_gcs_connect(p.addr, TOKEN, 3000, &g, err, sizeof(err)), 0);
  grpc_init();
  grpc_channel *ch = rd__rpc_channel(p.addr, 0, 0, NULL, 0);
  int by_status[64] = {0};
  for (int i = 1; i <= rounds; i++) {
    size_t k = wf_below(&r, ncalls);
    wf_buf b = {0};
    wf_message(&r, calls[k].req, 3, &b);
    if (wf_chance(&r, 5)) wf_damage(&r, &b);
    grpc_slice sl = grpc_slice_from_copied_buffer(b.len ? (const char *)b.p : "", b.len);
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&sl, 1);
    grpc_slice_unref(sl);
    char method[64];
    snprintf(method, sizeof(method), "/rd.gcs.Gcs/%s", calls[k].method);
    int rc = rd__rpc_unary_raw(ch, method, TOKEN, bb, NULL, NULL, 5000, 0, err, sizeof(err));
    grpc_byte_buffer_destroy(bb);
    wf_buf_free(&b);
    if (rc == RD_ETIMEDOUT || rc == RD_ECONN) {
      fprintf(stderr, "call %d (%s): %s: %s\n", i, calls[k].method, rd_err_name(rc), err);
      CHECK(!"the GCS stopped answering");
    }
    by_status[-rc < 64 ? -rc : 63]++;
    if (i % 100 == 0 || i == rounds) {
      char key[32], *v = NULL;
      size_t len = 0;
      snprintf(key, sizeof(key), "probe-%d", i);
      CHECK_EQ(rd_gcs_kv_put(g, "fuzz-probe", key, key, strlen(key), 1), 0);
      CHECK_EQ(rd_gcs_kv_get(g, "fuzz-probe", key, (void **)&v, &len), 0);
      CHECK(len == strlen(key) && !memcmp(v, key, len));
      free(v);
      rd_gcs_node *nodes = NULL;
      size_t n = 0;
      CHECK_EQ(rd_gcs_get_nodes(g, &nodes, &n, NULL), 0);
      free(nodes);
    }
  }
  fprintf(stderr, "answers by code:");
  for (int i = 0; i < 64; i++)
    if (by_status[i]) fprintf(stderr, " %s=%d", rd_err_name(-i), by_status[i]);
  fprintf(stderr, "\n");
  CHECK(by_status[0] > 0);   /* some requests were well formed enough to succeed */
  grpc_channel_destroy(ch);
  grpc_shutdown();
  rd_gcs_close(g);
  gcs_stop(&p);
  rm_dir();
  return 0;
}

/* ---------------------------------------------------------------- */
/* object transfer                                                  */

typedef struct src_obj {
  uint64_t oid;
  uint8_t *data;
  uint64_t size;
  int sealed;
  atomic_int pins;
} src_obj;

typedef struct source {
  src_obj obj[4];
  int n;
  atomic_int max_pins;
} source;

static int src_pin(void *arg, uint64_t oid, const uint8_t **data, uint64_t *size) {
  source *s = arg;
  for (int i = 0; i < s->n; i++) {
    if (s->obj[i].oid != oid) continue;
    if (!s->obj[i].sealed) return RD_EAGAIN;
    int now = atomic_fetch_add(&s->obj[i].pins, 1) + 1;
    if (now > atomic_load(&s->max_pins)) atomic_store(&s->max_pins, now);
    *data = s->obj[i].data;
    *size = s->obj[i].size;
    return 0;
  }
  return RD_ENOENT;
}

static void src_unpin(void *arg, uint64_t oid) {
  source *s = arg;
  for (int i = 0; i < s->n; i++)
    if (s->obj[i].oid == oid) CHECK(atomic_fetch_sub(&s->obj[i].pins, 1) > 0);
}

static const rd_xfer_source_ops src_ops = {src_pin, src_unpin};

static uint8_t *pattern(uint64_t size, uint64_t seed) {
  uint8_t *p = malloc(size ? size : 1);
  CHECK(p);
  uint64_t *w = (uint64_t *)p, x = seed | 1;
  for (uint64_t i = 0; i < size / 8; i++) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    w[i] = x;
  }
  for (uint64_t i = size / 8 * 8; i < size; i++) p[i] = (uint8_t)(i ^ seed);
  return p;
}

typedef struct dest {
  uint8_t *p;
  uint64_t size;
  int refuse;
} dest;

static void *dest_alloc(void *arg, uint64_t size) {
  dest *d = arg;
  if (d->refuse) return NULL;
  d->p = malloc(size ? size : 1);
  d->size = size;
  return d->p;
}

static void add_obj(source *s, uint64_t oid, uint64_t size, int sealed) {
  src_obj *o = &s->obj[s->n++];
  o->oid = oid;
  o->size = size;
  o->data = pattern(size, oid);
  o->sealed = sealed;
}

typedef struct pull_job {
  rd_xfer_client *c;
  const char *peer;
  uint64_t oid;
  int rc;
  dest d;
} pull_job;

static void *pull_thread(void *arg) {
  pull_job *j = arg;
  char err[256];
  j->rc = rd_xfer_pull(j->c, j->peer, j->oid, dest_alloc, &j->d, 30000, NULL, err, sizeof(err));
  if (j->rc) fprintf(stderr, "pull %" PRIx64 ": %s\n", j->oid, err);
  return NULL;
}

/* 200 MiB between servers on 127.0.0.1 and 127.0.0.2, byte for byte; odd
 * sizes and chunks; two pulls at once from one client. */
static int t_xfer_big(void) {
  source s1 = {0}, s2 = {0};
  add_obj(&s1, 0x100, 200ull << 20, 1);
  add_obj(&s2, 0x200, (3ull << 20) + 17, 1);
  add_obj(&s2, 0x201, 1, 1);
  rd_xfer_server *a, *b;
  int pa, pb;
  char err[256], peer_a[64], peer_b[64];
  CHECK_EQ(rd_xfer_server_start("127.0.0.1:0", TOKEN, &src_ops, &s1, &a, &pa, err, sizeof(err)), 0);
  CHECK_EQ(rd_xfer_server_start("127.0.0.2:0", TOKEN, &src_ops, &s2, &b, &pb, err, sizeof(err)), 0);
  snprintf(peer_a, sizeof(peer_a), "127.0.0.1:%d", pa);
  snprintf(peer_b, sizeof(peer_b), "127.0.0.2:%d", pb);
  rd_xfer_client *c;
  CHECK_EQ(rd_xfer_client_create(TOKEN, &c), 0);
  dest d = {0};
  rd_xfer_stats st;
  int rc = rd_xfer_pull(c, peer_a, 0x100, dest_alloc, &d, 60000, &st, err, sizeof(err));
  if (rc) fprintf(stderr, "pull: %s\n", err);
  CHECK_EQ(rc, 0);
  CHECK(d.size == s1.obj[0].size && !memcmp(d.p, s1.obj[0].data, d.size));
  fprintf(stderr, "200 MiB in %.3f s (%.0f MiB/s, %d streams, %u-byte chunks)\n", st.seconds,
          200 / st.seconds, st.streams, st.chunk);
  CHECK_EQ(st.streams, 4);
  free(d.p);
  /* two objects at once, from another server, through the same client */
  pull_job j1 = {c, peer_b, 0x200, -1, {0}}, j2 = {c, peer_a, 0x100, -1, {0}};
  pthread_t t1, t2;
  pthread_create(&t1, NULL, pull_thread, &j1);
  pthread_create(&t2, NULL, pull_thread, &j2);
  pthread_join(t1, NULL);
  pthread_join(t2, NULL);
  CHECK_EQ(j1.rc, 0);
  CHECK_EQ(j2.rc, 0);
  CHECK(j1.d.size == s2.obj[0].size && !memcmp(j1.d.p, s2.obj[0].data, j1.d.size));
  CHECK(j2.d.size == s1.obj[0].size && !memcmp(j2.d.p, s1.obj[0].data, j2.d.size));
  free(j1.d.p);
  free(j2.d.p);
  rd_xfer_client_destroy(c);
  /* one stream with small odd chunks, and a one-byte object */
  setenv("RAYDIST_XFER_STREAMS", "3", 1);
  setenv("RAYDIST_XFER_CHUNK", "70001", 1);
  CHECK_EQ(rd_xfer_client_create(TOKEN, &c), 0);
  CHECK_EQ(rd_xfer_pull(c, peer_b, 0x200, dest_alloc, &d, 30000, &st, err, sizeof(err)), 0);
  CHECK(d.size == s2.obj[0].size && !memcmp(d.p, s2.obj[0].data, d.size));
  CHECK(st.streams == 3 && st.chunk == 70001);
  free(d.p);
  CHECK_EQ(rd_xfer_pull(c, peer_b, 0x201, dest_alloc, &d, 30000, &st, err, sizeof(err)), 0);
  CHECK(d.size == 1 && d.p[0] == s2.obj[1].data[0] && st.streams == 1);
  free(d.p);
  rd_xfer_client_destroy(c);
  rd_xfer_server_stop(a);
  rd_xfer_server_stop(b);
  CHECK_EQ(atomic_load(&s1.obj[0].pins), 0);   /* every pin unpinned */
  CHECK_EQ(atomic_load(&s2.obj[0].pins), 0);
  CHECK(atomic_load(&s1.max_pins) >= 4);   /* streams ran in parallel */
  for (int i = 0; i < s1.n; i++) free(s1.obj[i].data);
  for (int i = 0; i < s2.n; i++) free(s2.obj[i].data);
  return 0;
}

static int t_xfer_errors(void) {
  source s = {0};
  add_obj(&s, 1, 1 << 20, 1);
  add_obj(&s, 2, 100, 0);   /* not sealed */
  add_obj(&s, 3, 0, 1);     /* empty */
  rd_xfer_server *a;
  int port;
  char err[256], peer[64];
  CHECK_EQ(rd_xfer_server_start("127.0.0.1:0", TOKEN, &src_ops, &s, &a, &port, err, sizeof(err)), 0);
  snprintf(peer, sizeof(peer), "127.0.0.1:%d", port);
  rd_xfer_client *c, *bad;
  CHECK_EQ(rd_xfer_client_create(TOKEN, &c), 0);
  CHECK_EQ(rd_xfer_client_create("", &bad), RD_EINVAL);
  CHECK_EQ(rd_xfer_client_create("wrong", &bad), 0);
  dest d = {0};
  CHECK_EQ(rd_xfer_pull(c, peer, 99, dest_alloc, &d, 5000, NULL, err, sizeof(err)), RD_ENOENT);
  CHECK(d.p == NULL);
  CHECK_EQ(rd_xfer_pull(c, peer, 2, dest_alloc, &d, 5000, NULL, err, sizeof(err)), RD_EAGAIN);
  CHECK_EQ(rd_xfer_pull(bad, peer, 1, dest_alloc, &d, 5000, NULL, err, sizeof(err)), RD_EAUTH);
  CHECK(d.p == NULL);
  d.refuse = 1;
  CHECK_EQ(rd_xfer_pull(c, peer, 1, dest_alloc, &d, 5000, NULL, err, sizeof(err)), RD_ESTORE_FULL);
  d.refuse = 0;
  CHECK_EQ(rd_xfer_pull(c, peer, 3, dest_alloc, &d, 5000, NULL, err, sizeof(err)), 0);
  CHECK_EQ(d.size, 0);
  free(d.p);
  CHECK_EQ(rd_xfer_pull(c, "127.0.0.1:1", 1, dest_alloc, &d, 2000, NULL, err, sizeof(err)), RD_ECONN);
  CHECK_EQ(rd_xfer_pull(c, "nonsense", 1, dest_alloc, &d, 2000, NULL, err, sizeof(err)), RD_EINVAL);
  /* a raw Pull for a range outside the object ends at once */
  grpc_channel *ch = rd__rpc_channel(peer, 0, 0, NULL, 0);
  Rd__Xfer__PullRequest pq = RD__XFER__PULL_REQUEST__INIT;
  pq.oid = 1;
  pq.offset = 1 << 20;
  pq.length = 1;
  CHECK_EQ(rd__rpc_unary(ch, "/rd.xfer.Xfer/Pull", TOKEN, &pq.base, NULL, NULL, 3000, 0, err, sizeof(err)),
           RD_EINVAL);
  CHECK(strstr(err, "outside") != NULL);
  /* served fine after all that */
  d.p = NULL;
  CHECK_EQ(rd_xfer_pull(c, peer, 1, dest_alloc, &d, 5000, NULL, err, sizeof(err)), 0);
  CHECK(!memcmp(d.p, s.obj[0].data, 1 << 20));
  free(d.p);
  grpc_channel_destroy(ch);
  rd_xfer_client_destroy(c);
  rd_xfer_client_destroy(bad);
  rd_xfer_server_stop(a);
  for (int i = 0; i < s.n; i++) {
    CHECK_EQ(atomic_load(&s.obj[i].pins), 0);
    free(s.obj[i].data);
  }
  return 0;
}

/* The serving side of t_xfer_kill: a child process with one object. */
static int xfer_child(const char *size_s, const char *port_file) {
  source s = {0};
  add_obj(&s, 7, strtoull(size_s, NULL, 10), 1);
  rd_xfer_server *a;
  int port;
  char err[256];
  CHECK_EQ(rd_xfer_server_start("127.0.0.1:0", TOKEN, &src_ops, &s, &a, &port, err, sizeof(err)), 0);
  char tmp[300];
  snprintf(tmp, sizeof(tmp), "%s.tmp", port_file);
  FILE *f = fopen(tmp, "w");
  fprintf(f, "%d\n", port);
  fclose(f);
  rename(tmp, port_file);
  for (;;) pause();   /* until killed */
}

typedef struct kill_ctx {
  pid_t pid;
  int sig;
  dest d;
} kill_ctx;

/* Kills the peer once the size is known, i.e. mid-transfer. */
static void *kill_alloc(void *arg, uint64_t size) {
  kill_ctx *k = arg;
  CHECK(kill(k->pid, k->sig) == 0);
  return dest_alloc(&k->d, size);
}

static pid_t spawn_child(const char *self, const char *port_file, int *port) {
  unlink(port_file);
  char *argv[] = {(char *)self, "xfer_child", "67108864", (char *)port_file, NULL};
  pid_t pid;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  CHECK(posix_spawn(&pid, self, &fa, NULL, argv, environ) == 0);
  posix_spawn_file_actions_destroy(&fa);
  child_track(pid, 1);
  for (int i = 0; i < 500; i++) {
    FILE *f = fopen(port_file, "r");
    if (f) {
      CHECK(fscanf(f, "%d", port) == 1);
      fclose(f);
      return pid;
    }
    sleep_ms(20);
  }
  CHECK(!"xfer child did not start");
  return -1;
}

static const char *g_self;

static int t_xfer_kill(void) {
  make_dir();
  char port_file[300], peer[64], err[256];
  snprintf(port_file, sizeof(port_file), "%s/xfer.port", g_dir);
  rd_xfer_client *c;
  CHECK_EQ(rd_xfer_client_create(TOKEN, &c), 0);
  int port, st;
  /* killed: RD_ENODE_DIED at once */
  kill_ctx k = {0};
  k.pid = spawn_child(g_self, port_file, &port);
  k.sig = SIGKILL;
  snprintf(peer, sizeof(peer), "127.0.0.1:%d", port);
  double t0 = now_ms();
  int rc = rd_xfer_pull(c, peer, 7, kill_alloc, &k, 20000, NULL, err, sizeof(err));
  double took = now_ms() - t0;
  fprintf(stderr, "killed peer: %s after %.0f ms: %s\n", rd_err_name(rc), took, err);
  CHECK_EQ(rc, RD_ENODE_DIED);
  CHECK(strstr(err, "went away") != NULL);
  CHECK(took < 5000);
  CHECK(waitpid(k.pid, &st, 0) == k.pid);
  child_track(k.pid, 0);
  free(k.d.p);
  /* frozen: the deadline ends the pull, no hang */
  memset(&k, 0, sizeof(k));
  k.pid = spawn_child(g_self, port_file, &port);
  k.sig = SIGSTOP;
  snprintf(peer, sizeof(peer), "127.0.0.1:%d", port);
  t0 = now_ms();
  rc = rd_xfer_pull(c, peer, 7, kill_alloc, &k, 1500, NULL, err, sizeof(err));
  took = now_ms() - t0;
  fprintf(stderr, "frozen peer: %s after %.0f ms: %s\n", rd_err_name(rc), took, err);
  CHECK_EQ(rc, RD_ETIMEDOUT);
  CHECK(took < 4000);
  CHECK(kill(k.pid, SIGKILL) == 0);
  CHECK(waitpid(k.pid, &st, 0) == k.pid);
  child_track(k.pid, 0);
  free(k.d.p);
  rd_xfer_client_destroy(c);
  rm_dir();
  return 0;
}

/* ---- the persistent store ---- */

static rd_gcs_store *store_open_ok(const char *path) {
  char err[512];
  rd_gcs_store *s = rd_gcs_store_file_open(path, err, sizeof(err));
  if (!s) fprintf(stderr, "open %s: %s\n", path, err);
  CHECK(s != NULL);
  return s;
}

static int val_is(rd_gcs_store *s, const char *t, const char *k, const void *want, size_t n) {
  void *v = NULL;
  size_t len = 0;
  int rc = s->ops->get(s, t, k, strlen(k), &v, &len);
  int ok = rc == 0 && len == n && !memcmp(v, want, n);
  free(v);
  return ok;
}

typedef struct scan_log {
  char keys[16][32];
  int n;
} scan_log;

static int scan_keys(void *arg, const char *key, size_t klen, const void *val, size_t vlen) {
  scan_log *l = arg;
  if (l->n < 16) snprintf(l->keys[l->n++], 32, "%.*s", (int)klen, key);
  return 0;
}

static off_t file_size(const char *path) {
  struct stat st;
  CHECK(stat(path, &st) == 0);
  return st.st_size;
}

/* The file back end: a reopened store has what was put and not what was
 * deleted; compaction keeps it; a torn tail is dropped and damage before it
 * refuses the open; two processes cannot share a log; a write that fails
 * (the file-size limit) leaves store and log as they were. */
static int t_gcs_store_file(void) {
  make_dir();
  char path[300], err[512];
  snprintf(path, sizeof(path), "%s/gcs.log", g_dir);
  CHECK(rd_gcs_store_open("bogus", err, sizeof(err)) == NULL && strstr(err, "unknown GCS storage"));
  CHECK(rd_gcs_store_open("file:", err, sizeof(err)) == NULL);
  rd_gcs_store *s = rd_gcs_store_open("memory", err, sizeof(err));
  CHECK(s && !strcmp(s->ops->name, "memory"));
  s->ops->destroy(s);

  s = store_open_ok(path);
  CHECK(!strcmp(s->ops->name, "file"));
  static uint8_t big[64 << 10];
  for (size_t i = 0; i < sizeof(big); i++) big[i] = (uint8_t)(i * 7 + 1);
  CHECK_EQ(s->ops->put(s, "node", "0002", 4, "two", 3), 0);
  CHECK_EQ(s->ops->put(s, "node", "0001", 4, "one", 3), 0);
  CHECK_EQ(s->ops->put(s, "kv", "a\0k", 3, "", 0), 0);   /* empty value, key with a NUL */
  CHECK_EQ(s->ops->put(s, "code", "blob", 4, big, sizeof(big)), 0);
  CHECK_EQ(s->ops->put(s, "node", "0003", 4, "three", 5), 0);
  CHECK_EQ(s->ops->del(s, "node", "0003", 4), 0);
  CHECK_EQ(s->ops->del(s, "node", "0003", 4), RD_ENOENT);
  CHECK_EQ(s->ops->put(s, "node", "0002", 4, "TWO", 3), 0);
  CHECK_EQ(s->ops->sync(s), 0);
  /* a second process (here: a second open) cannot use the same log */
  CHECK(rd_gcs_store_file_open(path, err, sizeof(err)) == NULL && strstr(err, "in use"));
  s->ops->destroy(s);

  s = store_open_ok(path);
  CHECK(val_is(s, "node", "0001", "one", 3));
  CHECK(val_is(s, "node", "0002", "TWO", 3));
  CHECK(!val_is(s, "node", "0003", "three", 5));
  CHECK(val_is(s, "code", "blob", big, sizeof(big)));
  void *v;
  size_t vlen;
  CHECK_EQ(s->ops->get(s, "kv", "a\0k", 3, &v, &vlen), 0);
  CHECK_EQ(vlen, 0);
  free(v);
  scan_log l = {0};
  CHECK_EQ(s->ops->scan(s, "node", "", 0, scan_keys, &l), 0);
  CHECK(l.n == 2 && !strcmp(l.keys[0], "0001") && !strcmp(l.keys[1], "0002"));

  /* 200 rewrites of a 64 KiB value: 12.8 MB written, one value live */
  for (int i = 0; i < 200; i++) {
    big[0] = (uint8_t)i;
    CHECK_EQ(s->ops->put(s, "code", "blob", 4, big, sizeof(big)), 0);
  }
  off_t compacted = file_size(path);
  fprintf(stderr, "after 200 rewrites of 64 KiB: log %lld bytes\n", (long long)compacted);
  CHECK(compacted < (off_t)(5 << 20));
  s->ops->destroy(s);
  s = store_open_ok(path);
  CHECK(val_is(s, "code", "blob", big, sizeof(big)));
  CHECK(val_is(s, "node", "0002", "TWO", 3));
  CHECK_EQ(s->ops->put(s, "kv", "last", 4, "0123456789", 10), 0);
  s->ops->destroy(s);

  /* a torn last record: everything before it is kept */
  off_t whole = file_size(path);
  CHECK(truncate(path, whole - 4) == 0);
  s = store_open_ok(path);
  CHECK(!val_is(s, "kv", "last", "0123456789", 10));
  CHECK(val_is(s, "node", "0002", "TWO", 3));
  CHECK_EQ(s->ops->put(s, "kv", "last", 4, "0123456789", 10), 0);   /* appends after the cut */
  s->ops->destroy(s);
  s = store_open_ok(path);
  CHECK(val_is(s, "kv", "last", "0123456789", 10));
  s->ops->destroy(s);

  /* a zero-filled tail (a crash of the machine) */
  whole = file_size(path);
  int fd = open(path, O_WRONLY | O_APPEND);
  static const uint8_t zeros[100];
  CHECK(fd >= 0 && write(fd, zeros, sizeof(zeros)) == (ssize_t)sizeof(zeros));
  close(fd);
  s = store_open_ok(path);
  CHECK(val_is(s, "kv", "last", "0123456789", 10));
  s->ops->destroy(s);
  CHECK_EQ(file_size(path), whole);

  /* one flipped byte inside an earlier record: refused, file untouched */
  fd = open(path, O_RDWR);
  uint8_t b;
  CHECK(fd >= 0 && pread(fd, &b, 1, 40) == 1);
  b ^= 0x10;
  CHECK(pwrite(fd, &b, 1, 40) == 1);
  CHECK(rd_gcs_store_file_open(path, err, sizeof(err)) == NULL);
  fprintf(stderr, "damaged: %s\n", err);
  CHECK(strstr(err, "corrupt at offset") != NULL);
  CHECK_EQ(file_size(path), whole);
  b ^= 0x10;
  CHECK(pwrite(fd, &b, 1, 40) == 1);
  close(fd);

  /* not a log at all */
  char other[300];
  snprintf(other, sizeof(other), "%s/other", g_dir);
  write_file(other, "hello world\n", 12);
  CHECK(rd_gcs_store_file_open(other, err, sizeof(err)) == NULL && strstr(err, "not a raydist GCS log"));

  /* a write that fails half-way: the store and the log stay as they were */
  s = store_open_ok(path);
  whole = file_size(path);
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit old, lim;
  CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
  lim = old;
  lim.rlim_cur = (rlim_t)whole + 1000;
  CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
  int rc = s->ops->put(s, "node", "0001", 4, big, sizeof(big));
  CHECK(rc == RD_EIO || rc == RD_ENOSPC);
  CHECK(val_is(s, "node", "0001", "one", 3));
  CHECK_EQ(file_size(path), whole);
  CHECK_EQ(s->ops->put(s, "node", "0004", 4, "four", 4), 0);   /* a small one still fits */
  CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
  s->ops->destroy(s);
  s = store_open_ok(path);
  CHECK(val_is(s, "node", "0001", "one", 3));
  CHECK(val_is(s, "node", "0004", "four", 4));
  s->ops->destroy(s);
  rm_dir();
  return 0;
}

static void sigkill_wait(gcs_proc *p) {
  CHECK(kill(p->pid, SIGKILL) == 0);
  int st;
  CHECK(waitpid(p->pid, &st, 0) == p->pid);
  child_track(p->pid, 0);
}

/* A GCS killed with SIGKILL and started again on the same port and log:
 * the node keeps its index and heartbeats on as if nothing happened, KV,
 * actors (and names), placement groups and jobs are back, indexes and job
 * ids continue, and a node that stays silent is still declared dead. */
static int t_gcs_restart(void) {
  make_dir();
  char storage[300];
  snprintf(storage, sizeof(storage), "file:%s/gcs.db", g_dir);
  gcs_proc p;
  const int hb_timeout = 1500;
  gcs_start_on(&p, hb_timeout, "127.0.0.1:0", storage);
  char bind[64];
  snprintf(bind, sizeof(bind), "127.0.0.1:%d", p.port);
  rd_gcs *g = connect_ok(&p);
  rd_gcs_node a, b;
  node_fill(&a, "127.0.0.2", 4);
  node_fill(&b, "127.0.0.3", 2);
  uint32_t ia = 0, ib = 0, job1 = 0, job2 = 0;
  char err[256];
  CHECK_EQ(rd_gcs_register_node(g, &a, &ia, err, sizeof(err)), 0);
  CHECK_EQ(rd_gcs_register_node(g, &b, &ib, err, sizeof(err)), 0);
  rd_resources avail = a.total;
  avail.cpu = 3 * RD_RES_UNIT;
  CHECK_EQ(rd_gcs_heartbeat(g, ia, &avail, 5, 777, NULL), 0);
  CHECK_EQ(rd_gcs_kv_put(g, "ns", "key", "value", 5, 1), 0);
  CHECK_EQ(rd_gcs_actor_register(g, 0xa1, "svc", "Cls", ia, 0), 0);
  CHECK_EQ(rd_gcs_job_add(g, "", 4242, ia, &job1), 0);
  rd_gcs_pg pg;
  pg_fill(&pg, ((uint64_t)ia << 40) | 1, "grp", ia, 1);
  pg.strategy = 0;
  pg.state = RD_GCS_PG_CREATED;
  pg.reason[0] = 0;
  pg.bundle_nodes[0] = ia;
  CHECK_EQ(rd_gcs_pg_put(g, &pg), 0);
  rd_gcs_node *nodes;
  size_t n;
  uint64_t ver1 = 0, ver2 = 0;
  CHECK_EQ(rd_gcs_get_nodes(g, &nodes, &n, &ver1), 0);
  free(nodes);

  sigkill_wait(&p);
  CHECK(rd_gcs_heartbeat(g, ia, &avail, 5, 777, NULL) != 0);   /* nobody there */
  gcs_start_on(&p, hb_timeout, bind, storage);
  double t_restart = now_ms();
  /* the old channel reconnects by itself */
  int rc = -1;
  for (int i = 0; i < 100 && rc != 0; i++) {
    rc = rd_gcs_heartbeat(g, ia, &avail, 5, 777, NULL);
    if (rc) sleep_ms(50);
  }
  CHECK_EQ(rc, 0);
  CHECK_EQ(rd_gcs_get_nodes(g, &nodes, &n, &ver2), 0);
  CHECK(ver2 > ver1);
  CHECK_EQ(n, 2);
  for (size_t i = 0; i < n; i++) {
    CHECK_EQ(nodes[i].state, RD_GCS_NODE_ALIVE);
    if (nodes[i].index == ia) {
      CHECK_EQ(nodes[i].avail.cpu, 3 * RD_RES_UNIT);   /* from the heartbeat after the restart */
      CHECK_EQ(nodes[i].store_used, 777);
    }
  }
  free(nodes);
  void *v = NULL;
  size_t vlen = 0;
  CHECK_EQ(rd_gcs_kv_get(g, "ns", "key", &v, &vlen), 0);
  CHECK(vlen == 5 && !memcmp(v, "value", 5));
  free(v);
  uint64_t aid = 0;
  uint32_t anode = 0;
  CHECK_EQ(rd_gcs_actor_lookup(g, "svc", &aid, &anode, NULL), 0);
  CHECK(aid == 0xa1 && anode == ia);
  CHECK_EQ(rd_gcs_actor_register(g, 0xa2, "svc", "Cls", ia, 0), RD_EEXIST);   /* the name is still taken */
  /* a node retrying a registration whose answer the dead server never sent */
  CHECK_EQ(rd_gcs_actor_register(g, 0xa1, "svc", "Cls", ia, 0), 0);
  CHECK_EQ(rd_gcs_actor_register(g, 0xa1, "svc", "Other", ia, 0), RD_EEXIST);
  rd_gcs_pg got = {0};
  CHECK_EQ(rd_gcs_pg_get(g, 0, "grp", &got), 0);
  CHECK(got.pg_id == pg.pg_id && got.state == RD_GCS_PG_CREATED);
  CHECK(got.nbundles == 1 && got.bundles[0].cpu == RD_RES_UNIT && got.bundle_nodes[0] == ia);
  rd_gcs_pg_clear(&got);
  CHECK_EQ(rd_gcs_job_add(g, "", 4243, ia, &job2), 0);
  CHECK(job2 > job1);
  uint32_t ic = 0;
  rd_gcs_node c;
  node_fill(&c, "127.0.0.4", 1);
  CHECK_EQ(rd_gcs_register_node(g, &c, &ic, err, sizeof(err)), 0);
  CHECK(ic != ia && ic != ib);

  /* b never heartbeats again: dead a timeout after the restart; a and c live */
  ev_log log = {.mu = PTHREAD_MUTEX_INITIALIZER};
  CHECK_EQ(rd_gcs_subscribe(g, on_event, &log), 0);
  int dead_at = -1;
  for (int i = 0; i < 60 && dead_at < 0; i++) {
    CHECK_EQ(rd_gcs_heartbeat(g, ia, &avail, 0, 0, NULL), 0);
    CHECK_EQ(rd_gcs_heartbeat(g, ic, &c.total, 0, 0, NULL), 0);
    sleep_ms(100);
    dead_at = ev_wait(&log, RD_GCS_EV_NODE_DEAD, ib, 0, 0);
  }
  CHECK(dead_at >= 0);
  double after = log.at[dead_at] - t_restart;
  fprintf(stderr, "silent node declared dead %.0f ms after the restart (timeout %d ms)\n", after, hb_timeout);
  CHECK(after >= hb_timeout - 300);
  CHECK(ev_wait(&log, RD_GCS_EV_NODE_DEAD, ia, 0, 0) < 0);

  /* a clean stop and a third start: the death of b was kept too */
  gcs_stop(&p);
  gcs_start_on(&p, hb_timeout, bind, storage);
  rc = -1;
  for (int i = 0; i < 100 && rc != 0; i++) {
    rc = rd_gcs_get_nodes(g, &nodes, &n, NULL);
    if (rc) sleep_ms(50);
  }
  CHECK_EQ(rc, 0);
  CHECK_EQ(n, 3);
  for (size_t i = 0; i < n; i++) CHECK_EQ(nodes[i].state, nodes[i].index == ib ? RD_GCS_NODE_DEAD : RD_GCS_NODE_ALIVE);
  free(nodes);
  CHECK_EQ(rd_gcs_heartbeat(g, ib, &b.total, 0, 0, NULL), RD_ENODE_DIED);
  rd_gcs_close(g);
  gcs_stop(&p);
  rm_dir();
  return 0;
}

/* Cluster events: the GCS's own (a node joined, left, died), those sent
 * with EventAdd (the sender's node named for it), bad ones refused, the
 * newest RD_GCS_EVENTS_KEEP kept, a big answer cut to its newest. */
static const rd_gcs_cluster_event *event_find(const rd_gcs_events *ev, const char *words) {
  for (size_t i = 0; i < ev->n; i++)
    if (strstr(ev->ev[i].message, words)) return &ev->ev[i];
  return NULL;
}

static const char *event_field(const rd_gcs_cluster_event *e, const char *key) {
  for (size_t i = 0; i < e->nfields; i++)
    if (!strcmp(e->fields[i].key, key)) return e->fields[i].value;
  return NULL;
}

static uint64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int t_gcs_events(void) {
  make_dir();
  gcs_proc p;
  gcs_start(&p, 600);
  rd_gcs *g = connect_ok(&p);
  rd_gcs_node a, b;
  node_fill(&a, "127.0.0.2", 4);
  node_fill(&b, "127.0.0.3", 2);
  uint32_t ia = 0, ib = 0;
  char err[256];
  CHECK_EQ(rd_gcs_register_node(g, &a, &ia, err, sizeof(err)), 0);
  CHECK_EQ(rd_gcs_register_node(g, &b, &ib, err, sizeof(err)), 0);
  rd_gcs_events ev;
  CHECK_EQ(rd_gcs_event_list(g, 0, 0, &ev), 0);
  CHECK(ev.n == 2 && ev.first_kept == 1 && ev.last == 2 && ev.omitted == 0);
  const rd_gcs_cluster_event *e = &ev.ev[0];
  CHECK(e->event_id == 1 && !strcmp(e->source, "GCS") && !strcmp(e->severity, "INFO") && e->node_index == ia);
  CHECK(strstr(e->message, "Node ") && strstr(e->message, "(127.0.0.2, host ") &&
        strstr(e->message, "joined the cluster with 4 CPU"));
  CHECK(event_field(e, "node_ip") && !strcmp(event_field(e, "node_ip"), "127.0.0.2"));
  CHECK(event_field(e, "node_id") && strlen(event_field(e, "node_id")) == 32);
  uint64_t t0 = wall_ms();
  CHECK(e->time_ms > 0 && e->time_ms <= t0 && e->time_ms + 60000 > t0);
  rd_gcs_events_free(&ev);

  /* sent by a node: the GCS adds which node it is */
  rd_gcs_field f[RD_GCS_EVENT_FIELDS_MAX + 1] = {{"exit_type", "SYSTEM_ERROR"}};
  rd_gcs_cluster_event in = {.source = "RAYLET", .severity = "ERROR", .message = "Worker 1 died.", .node_index = ib,
                             .pid = 4242, .fields = f, .nfields = 1, .time_ms = t0 - 5000};
  uint64_t id = 0;
  CHECK_EQ(rd_gcs_event_add(g, &in, &id), 0);
  CHECK_EQ(id, 3);
  in.time_ms = t0 + 10ull * 86400000;   /* ten days ahead: a clock gone wrong, the GCS's time instead */
  in.message = "from the future";
  CHECK_EQ(rd_gcs_event_add(g, &in, &id), 0);
  /* about a node, with no fields of its own (cluster_bad_node's "cannot
   * start" event: UBSan caught a NULL memcpy here) */
  rd_gcs_cluster_event bare = {.source = "RAYLET", .severity = "ERROR", .message = "bare", .node_index = ia};
  CHECK_EQ(rd_gcs_event_add(g, &bare, &id), 0);
  CHECK_EQ(rd_gcs_event_list(g, id - 1, 0, &ev), 0);
  CHECK(ev.n == 1 && ev.ev[0].nfields == 2 && !strcmp(event_field(&ev.ev[0], "node_ip"), "127.0.0.2"));
  rd_gcs_events_free(&ev);
  CHECK_EQ(rd_gcs_event_list(g, 2, 2, &ev), 0);   /* ids above 2, the newest 2: 4 and 5 */
  CHECK_EQ(ev.n, 2);
  CHECK(event_find(&ev, "Worker 1 died.") == NULL && event_find(&ev, "bare"));
  rd_gcs_events_free(&ev);
  CHECK_EQ(rd_gcs_event_list(g, 2, 0, &ev), 0);   /* ids above 2 */
  CHECK_EQ(ev.n, 3);
  e = event_find(&ev, "Worker 1 died.");
  CHECK(e && e->event_id == 3 && e->time_ms == t0 - 5000 && e->pid == 4242 && e->node_index == ib);
  CHECK(!strcmp(event_field(e, "exit_type"), "SYSTEM_ERROR") && !strcmp(event_field(e, "node_ip"), "127.0.0.3"));
  e = event_find(&ev, "from the future");
  CHECK(e && e->time_ms >= t0 && e->time_ms < t0 + 60000);
  rd_gcs_events_free(&ev);

  /* bad ones: refused with why, nothing stored */
  char big[RD_GCS_EVENT_MSG_MAX + 1];
  memset(big, 'm', sizeof(big) - 1);
  big[sizeof(big) - 1] = 0;
  char bigval[RD_GCS_EVENT_VALUE_MAX + 1];
  memset(bigval, 'v', sizeof(bigval) - 1);
  bigval[sizeof(bigval) - 1] = 0;
  rd_gcs_cluster_event bad[] = {
      {.source = "NOPE", .severity = "INFO", .message = "x"},
      {.source = "GCS", .severity = "LOUD", .message = "x"},
      {.source = "GCS", .severity = "INFO", .message = ""},
      {.source = "GCS", .severity = "INFO", .message = big},
      {.source = "GCS", .severity = "INFO", .message = "x", .node_index = RD_GCS_MAX_NODES + 1},
      {.source = "GCS", .severity = "INFO", .message = "x", .fields = (rd_gcs_field[]){{"", "v"}}, .nfields = 1},
      {.source = "GCS", .severity = "INFO", .message = "x", .fields = (rd_gcs_field[]){{"k", bigval}}, .nfields = 1},
      {.source = "GCS", .severity = "INFO", .message = "x", .fields = f, .nfields = RD_GCS_EVENT_FIELDS_MAX + 1},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) CHECK_EQ(rd_gcs_event_add(g, &bad[i], NULL), RD_EINVAL);
  CHECK(strstr(rd_gcs_last_error(), "too many fields"));
  big[RD_GCS_EVENT_MSG_MAX - 1] = 0;   /* the longest there may be */
  in = (rd_gcs_cluster_event){.source = "AUTOSCALER", .severity = "WARNING", .message = big};
  CHECK_EQ(rd_gcs_event_add(g, &in, &id), 0);
  CHECK_EQ(id, 6);

  /* a node leaves, another dies */
  CHECK_EQ(rd_gcs_unregister_node(g, ia, "stopped by test"), 0);
  for (int i = 0; i < 100; i++) {   /* b sends no heartbeat: dead after 600 ms */
    CHECK_EQ(rd_gcs_event_list(g, 7, 0, &ev), 0);
    int dead = event_find(&ev, "is dead: no heartbeat for") != NULL;
    rd_gcs_events_free(&ev);
    if (dead) break;
    usleep(50000);
  }
  CHECK_EQ(rd_gcs_event_list(g, 6, 0, &ev), 0);
  CHECK_EQ(ev.n, 2);
  CHECK(!strcmp(ev.ev[0].severity, "INFO") && strstr(ev.ev[0].message, "left the cluster: stopped by test."));
  CHECK(!strcmp(ev.ev[1].severity, "ERROR") && strstr(ev.ev[1].message, "(127.0.0.3) is dead: no heartbeat for"));
  CHECK(ev.ev[1].node_index == ib && !strcmp(event_field(&ev.ev[1], "node_ip"), "127.0.0.3"));
  rd_gcs_events_free(&ev);

  /* the newest RD_GCS_EVENTS_KEEP are kept; a long list is cut to its
   * newest under RD_GCS_EVENTS_REPLY_MAX, the rest counted */
  in = (rd_gcs_cluster_event){.source = "COMMON", .severity = "DEBUG", .message = big};
  for (int i = 0; i < RD_GCS_EVENTS_KEEP + 10; i++) CHECK_EQ(rd_gcs_event_add(g, &in, &id), 0);
  uint64_t last = id;
  CHECK_EQ(rd_gcs_event_list(g, 0, 5, &ev), 0);
  CHECK(ev.n == 5 && ev.last == last && ev.first_kept == last - RD_GCS_EVENTS_KEEP + 1 && ev.omitted == 0);
  CHECK(ev.ev[0].event_id == last - 4 && ev.ev[4].event_id == last);
  rd_gcs_events_free(&ev);
  CHECK_EQ(rd_gcs_event_list(g, 0, 0, &ev), 0);
  CHECK(ev.n > 1000 && ev.n < RD_GCS_EVENTS_KEEP && ev.n + ev.omitted == RD_GCS_EVENTS_KEEP);
  CHECK(ev.ev[ev.n - 1].event_id == last && ev.ev[0].event_id == last - ev.n + 1);
  rd_gcs_events_free(&ev);
  CHECK_EQ(rd_gcs_event_list(g, last - 3, 0, &ev), 0);
  CHECK(ev.n == 3 && ev.ev[0].event_id == last - 2);
  rd_gcs_events_free(&ev);
  rd_gcs_close(g);
  gcs_stop(&p);
  rm_dir();
  return 0;
}

static const rd_test_case cases[] = {
    {"sha256", t_sha256},
    {"gcs_nodes", t_gcs_nodes}, {"gcs_autoscale", t_gcs_autoscale},
    {"gcs_kv", t_gcs_kv},
    {"gcs_code", t_gcs_code},
    {"gcs_code_ttl", t_gcs_code_ttl},
    {"gcs_jobs_actors", t_gcs_jobs_actors},
    {"gcs_events", t_gcs_events},
    {"gcs_pgs", t_gcs_pgs},
    {"gcs_bad_input", t_gcs_bad_input},
    {"gcs_fuzz", t_gcs_fuzz},
    {"gcs_store_file", t_gcs_store_file},
    {"gcs_restart", t_gcs_restart},
    {"xfer_big", t_xfer_big},
    {"xfer_errors", t_xfer_errors},
    {"xfer_kill", t_xfer_kill},
};

int main(int argc, char **argv) {
  g_self = argv[0];
  if (argc == 4 && !strcmp(argv[1], "xfer_child")) return xfer_child(argv[2], argv[3]);
  return rd_test_main(argc, argv, cases, sizeof(cases) / sizeof(cases[0]));
}
