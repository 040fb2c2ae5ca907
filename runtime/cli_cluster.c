/* runtime/cli_cluster.c - `raydist start`, `raydist status`, `raydist stop`.
 *
 * Each node this machine runs has a session directory
 * <RAYDIST_TMPDIR or /tmp>/raydist-<uid>/node-<ip> (0700) holding the node's
 * socket, the cluster token (0600), a `cluster` file (gcs=, ip=, head=) that
 * drivers use to find the node, the logs, and a `pids` file naming exactly
 * the processes `start` launched (pid and kernel start time, so a reused pid
 * is never signalled).  `stop` ends those processes and removes the
 * directory; nothing else is touched. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_cluster.h"
#include "dashboard.h"
#include "autoscaler.h"
#include "common.h"
#include "conn.h"
#include "gcs_client.h"
#include "json.h"
#include "log_files.h"
#include "metrics.h"
#include "pg.h"
#include "rpc.h"
#include "raydist.h"
#include "resources.h"

extern char **environ;

#define DEFAULT_PORT 6380



/* Field 22 of /proc/PID/stat (cli_cluster.h). */
unsigned long long rd__proc_start_time(int pid, char *state) {
  *state = 0;
  char path[64], buf[1024];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  char *p = strrchr(buf, ')');   /* the command name may hold spaces */
  if (!p) return 0;
  unsigned long long v = 0;
  int field = 2;
  for (char *tok = strtok(p + 1, " "); tok; tok = strtok(NULL, " ")) {
    if (++field == 3) *state = tok[0];
    if (field == 22) {
      v = strtoull(tok, NULL, 10);
      break;
    }
  }
  return v;
}


/* A process `start` recorded in a session's pids file. */
typedef struct recorded {
  char name[32];
  int pid;
  unsigned long long start;   /* kernel start time: a reused pid does not match */
} recorded;

#define RD_MAX_RECORDED 16

static int read_recorded(const char *dir, recorded *out) {
  char path[1024];
  snprintf(path, sizeof(path), "%.900s/pids", dir);
  FILE *f = fopen(path, "r");
  int n = 0;
  if (!f) return 0;
  while (n < RD_MAX_RECORDED && fscanf(f, "%31s %d %llu", out[n].name, &out[n].pid, &out[n].start) == 3) n++;
  fclose(f);
  return n;
}

/* A zombie counts as gone: it has exited and freed what it held; only its
 * parent's (often init's, for these detached processes) reaping is left,
 * which can take seconds. */
static int recorded_alive(const recorded *r) {
  char state;
  return r->pid > 0 && rd__proc_start_time(r->pid, &state) == r->start && state != 'Z';
}

/* Are the processes recorded in dir/pids still running? */
static int session_live(const char *dir) {
  recorded r[RD_MAX_RECORDED];
  int n = read_recorded(dir, r);
  for (int i = 0; i < n; i++)
    if (recorded_alive(&r[i])) return 1;
  return 0;
}

static int self_exe(char *out, size_t len) {
  ssize_t n = readlink("/proc/self/exe", out, len - 1);
  if (n <= 0) return -1;
  out[n] = 0;
  return 0;
}

/* Start `raydist <args>` detached (own session, output to log), wait until it
 * writes "R" on its ready fd.  The pid, or -1 with the log's tail printed. */
static int spawn_ready(char **args, const char *log, int ready_argi, int timeout_ms) {
  int p[2];
  if (pipe(p) != 0) return -1;
  fcntl(p[0], F_SETFD, FD_CLOEXEC);
  char fdbuf[16];
  snprintf(fdbuf, sizeof(fdbuf), "%d", p[1]);
  args[ready_argi] = fdbuf;
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&at);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid;
  int r = posix_spawn(&pid, args[0], &fa, &at, args, environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  close(p[1]);
  if (r != 0) {
    fprintf(stderr, "raydist start: cannot run %s: %s\n", args[0], strerror(r));
    close(p[0]);
    return -1;
  }
  char c = 0;
  int ok = rd__wait_fd(p[0], POLLIN, rd__now_ns() + (uint64_t)timeout_ms * 1000000u) == 0 &&
           read(p[0], &c, 1) == 1 && c == 'R';
  close(p[0]);
  if (!ok) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    fprintf(stderr, "raydist start: %s %s did not come up; the end of %s:\n", args[0], args[1], log);
    FILE *f = fopen(log, "r");
    if (f) {
      char lines[12][400];
      int n = 0;
      while (fgets(lines[n % 12], sizeof(lines[0]), f)) n++;
      fclose(f);
      for (int i = n > 12 ? n - 12 : 0; i < n; i++) fprintf(stderr, "  %s", lines[i % 12]);
    }
    return -1;
  }
  return pid;
}

/* Records process name (pid) in dir/pids, in place of one of that name
 * already there (a head's node daemon started again). */
static int append_pid(const char *dir, const char *name, int pid) {
  recorded r[RD_MAX_RECORDED];
  int n = read_recorded(dir, r);
  char path[600], tmp[610];
  snprintf(path, sizeof(path), "%s/pids", dir);
  snprintf(tmp, sizeof(tmp), "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) return -1;
  for (int i = 0; i < n; i++)
    if (strcmp(r[i].name, name) != 0) fprintf(f, "%s %d %llu\n", r[i].name, r[i].pid, r[i].start);
  char state;
  fprintf(f, "%s %d %llu\n", name, pid, rd__proc_start_time(pid, &state));
  return fclose(f) == 0 && rename(tmp, path) == 0 ? 0 : -1;
}

/* A head session whose node daemon is gone while its GCS (keeper) lives:
 * 1, and the GCS's address into gcs (a node daemon started again there
 * rejoins it), else 0. */
static int head_node_gone(const char *dir, char *gcs, size_t len) {
  recorded r[RD_MAX_RECORDED];
  int n = read_recorded(dir, r), gcs_alive = 0, node_alive = 0;
  for (int i = 0; i < n; i++) {
    if (!strcmp(r[i].name, "gcs")) gcs_alive |= recorded_alive(&r[i]);
    if (!strcmp(r[i].name, "node")) node_alive |= recorded_alive(&r[i]);
  }
  char f[600], head[8] = "";
  snprintf(f, sizeof(f), "%s/cluster", dir);
  return gcs_alive && !node_alive && rd__read_kv(f, "head", head, sizeof(head)) == 0 && head[0] == '1' &&
         rd__read_kv(f, "gcs", gcs, len) == 0 && gcs[0];
}

/* The session directory of a node this machine runs for the cluster at
 * `address` (NULL: any cluster, the head's preferred), and its GCS address. */
static int local_session(const char *address, char *dir, size_t dirlen, char *gcs, size_t gcslen) {
  char root[200];
  rd__session_root(root, sizeof(root));
  DIR *d = opendir(root);
  if (!d) return -1;
  struct dirent *e;
  int r = -1;
  while ((e = readdir(d))) {
    if (strncmp(e->d_name, "node-", 5) != 0) continue;
    char f[600], g[128], head[8] = "0";
    snprintf(f, sizeof(f), "%s/%s/cluster", root, e->d_name);
    if (rd__read_kv(f, "gcs", g, sizeof(g)) != 0 || (address && strcmp(g, address) != 0)) continue;
    snprintf(dir, dirlen, "%s/%s", root, e->d_name);
    snprintf(gcs, gcslen, "%s", g);
    r = 0;
    if (rd__read_kv(f, "head", head, sizeof(head)) == 0 && head[0] == '1') break;
  }
  closedir(d);
  return r;
}

/* This machine's embedded nodes (a driver's own, rd_init(NULL)): the
 * session directories session-* under the session root, each with its
 * metrics address and token, into *out (malloc'd); how many. */
typedef struct local_node {
  char ip[128], token[64], dir[512];
  int port;
} local_node;

/* take(dir, slot) for each session-* directory of this user's session
 * root, each with a zeroed slot of elsize bytes, kept when take returns 1:
 * the kept ones into *out (malloc'd); how many. */
static size_t scan_sessions(size_t elsize, int (*take)(const char *dir, void *slot), void **out) {
  char root[200];
  rd__session_root(root, sizeof(root));
  DIR *d = opendir(root);
  size_t n = 0, cap = 0;
  char *v = NULL;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    char dir[512];
    if (strncmp(e->d_name, "session-", 8) != 0) continue;
    if (n == cap) {
      char *w = realloc(v, (cap = cap ? 2 * cap : 16) * elsize);
      if (!w) break;
      v = w;
    }
    snprintf(dir, sizeof(dir), "%.200s/%.200s", root, e->d_name);
    memset(v + n * elsize, 0, elsize);
    n += take(dir, v + n * elsize) == 1;
  }
  if (d) closedir(d);
  *out = v;
  return n;
}

/* A running embedded node's session: its metrics address and token. */
static int take_live(const char *dir, void *slot) {
  local_node *x = slot;
  char m[600], t[600], *colon;
  snprintf(x->dir, sizeof(x->dir), "%s", dir);
  snprintf(m, sizeof(m), "%s/metrics", dir);
  snprintf(t, sizeof(t), "%s/token", dir);
  if (rd__read_line(m, x->ip, sizeof(x->ip)) != 0 || !(colon = strrchr(x->ip, ':')) ||
      rd__read_line(t, x->token, sizeof(x->token)) != 0 || !x->token[0])
    return 0;   /* an ended session, one of an older version, or one going away */
  *colon = 0;   /* ip, then the port after it */
  x->port = atoi(colon + 1);
  return 1;
}

static size_t local_nodes(local_node **out) { return scan_sessions(sizeof(**out), take_live, (void **)out); }

/* 1 when `raydist CMD` asks this machine's embedded clusters: --local was
 * given, or no cluster is named (--address, RAYDIST_ADDRESS) and none runs
 * here (a started node's session). */
static int use_local(int local, const char *address) {
  char dir[512], gcs[160];
  return local || ((!address || !*address) && local_session(NULL, dir, sizeof(dir), gcs, sizeof(gcs)) != 0);
}

/* How each_local shows an embedded node's answer (body, len bytes, NUL
 * after them): 1 when it printed something, 0 when it had nothing to show. */
typedef int (*local_show)(const local_node *x, const char *body, size_t len, void *arg);

/* GET path from each embedded node of this machine, each with its own
 * token, its answer shown by show.  0, or 1 with `none` (default: that no
 * embedded node runs) on stderr when none showed anything. */
static int each_local(const char *cmd, const char *path, local_show show, void *arg, const char *none) {
  local_node *v = NULL;
  size_t n = local_nodes(&v);
  int shown = 0;
  for (size_t i = 0; i < n; i++) {
    rd__http_fetch f = {.ip = v[i].ip, .path = path, .port = v[i].port};
    rd__http_get_all(&f, 1, v[i].token, 15000, (size_t)64 << 20);
    if (f.rc == 0) {
      fflush(stdout);
      shown |= show(&v[i], f.body ? f.body : "", f.len, arg);
    }   /* else not this node's (404), or a node gone (its directory stays when its driver was killed) */
    free(f.body);
  }
  free(v);
  if (!shown) fprintf(stderr, "raydist %s: %s\n", cmd, none ? none : "no cluster and no embedded node runs on this machine");
  return !shown;
}

/* The answer as it is, after the node's name. */
static int show_text(const local_node *x, const char *body, size_t len, void *arg) {
  (void)arg;
  printf("embedded node %s:\n", x->dir);
  fwrite(body, 1, len, stdout);
  return 1;
}

int rd__cli_local_token(const char *address, char *out, size_t len) {
  char dir[512], gcs[128], f[600];
  if (local_session(address, dir, sizeof(dir), gcs, sizeof(gcs)) != 0) return -1;
  snprintf(f, sizeof(f), "%s/token", dir);
  return rd__read_line(f, out, len) == 0 && out[0] ? 0 : -1;
}

/* The token for `raydist CMD`'s HTTP requests to the cluster at address:
 * the one given (--token, RAYDIST_TOKEN), else this machine's node's of
 * that cluster.  0, or -1 with why printed. */
static int cli_http_token(const char *cmd, const char *given, const char *address, char *out, size_t len) {
  if (given && *given) return snprintf(out, len, "%s", given), 0;
  if (rd__cli_local_token(address, out, len) == 0) return 0;
  fprintf(stderr, "raydist %s: no token for the cluster at %s: pass --token or RAYDIST_TOKEN\n", cmd, address);
  return -1;
}

static void usage_start(FILE *f) {
  fprintf(f,
          "usage: raydist start --head [--port N] [--node-ip IP] [--gcs-storage memory|file:PATH] [resources]\n"
          "       raydist start --address IP:PORT [--node-ip IP] [--token T] [resources]\n"
          "resources: [--num-cpus N] [--num-gpus N] [--gpu-memory BYTES] [--resources a=1,b=2] [--memory BYTES]\n"
          "           [--object-store-memory BYTES] [--object-store-fallback BYTES] [--max-workers N] [--log-level L]\n"
          "           [--labels k=v,k2=v2]  (the node's labels, which label selectors match)\n"
          "           [--metrics-port N]  (Prometheus /metrics; default any free port, -1 none;\n"
          "                                the address is in the node's session directory, file `metrics`)\n"
          "--head only: [--autoscaling-config FILE]  (start and stop nodes with the load: docs/autoscaler.md)\n"
          "The GCS keeps its tables in the head's session directory (file gcs.db) unless\n"
          "--gcs-storage says otherwise, and is restarted with them when it dies.  When the head's\n"
          "node daemon died and its GCS runs on, --head starts the node daemon again beside it.\n"
          "The token of a cluster started on this machine is found on its own; elsewhere pass\n"
          "--token or RAYDIST_TOKEN (it is in the head's session directory, file `token`).\n");
}

int rd__cli_start(int argc, char **argv) {
  int head = 0, port = DEFAULT_PORT;
  const char *address = NULL, *node_ip = "127.0.0.1", *token = getenv("RAYDIST_TOKEN");
  const char *num_cpus = NULL, *num_gpus = NULL, *resources = NULL, *memory = NULL, *store = NULL, *fallback = NULL, *maxw = NULL,
             *loglevel = NULL, *metrics_port = NULL, *gcs_storage = NULL, *gpu_memory = NULL,
             *labels = NULL, *as_config = NULL;
  static const struct option lo[] = {
      {"head", 0, 0, 'H'},        {"port", 1, 0, 'p'},      {"address", 1, 0, 'a'},   {"node-ip", 1, 0, 'i'},
      {"token", 1, 0, 't'},       {"num-cpus", 1, 0, 'c'},  {"num-gpus", 1, 0, 'g'},  {"resources", 1, 0, 'r'},
      {"memory", 1, 0, 'm'},      {"object-store-memory", 1, 0, 'o'}, {"max-workers", 1, 0, 'w'},
      {"log-level", 1, 0, 'l'},   {"help", 0, 0, 'h'},      {"metrics-port", 1, 0, 'M'},
      {"gcs-storage", 1, 0, 'S'}, {"gpu-memory", 1, 0, 'u'}, {"labels", 1, 0, 'L'},
      {"autoscaling-config", 1, 0, 'A'}, {"object-store-fallback", 1, 0, 'B'}, {0, 0, 0, 0}};
  int ch;
  optind = 2;
  while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
    switch (ch) {
      case 'H': head = 1; break;
      case 'p': port = atoi(optarg); break;
      case 'a': address = optarg; break;
      case 'i': node_ip = optarg; break;
      case 't': token = optarg; break;
      case 'c': num_cpus = optarg; break;
      case 'g': num_gpus = optarg; break;
      case 'r': resources = optarg; break;
      case 'm': memory = optarg; break;
      case 'o': store = optarg; break;
      case 'B': fallback = optarg; break;
      case 'w': maxw = optarg; break;
      case 'l': loglevel = optarg; break;
      case 'M': metrics_port = optarg; break;
      case 'S': gcs_storage = optarg; break;
      case 'u': gpu_memory = optarg; break;
      case 'L': labels = optarg; break;
      case 'A': as_config = optarg; break;
      case 'h': usage_start(stdout); return 0;
      default: usage_start(stderr); return 2;
    }
  }
  if (head == !!address) {
    fprintf(stderr, "raydist start: give exactly one of --head or --address\n");
    usage_start(stderr);
    return 2;
  }
  if (port < 0 || port > 65535) {
    fprintf(stderr, "raydist start: --port %d is not a TCP port\n", port);
    return 2;
  }
  char lbuf[RD_LABELS_LEN], why[200];
  if (rd_labels_canon(labels, lbuf, sizeof(lbuf), why, sizeof(why)) != 0) {
    fprintf(stderr, "raydist start: --labels: %s\n", why);
    return 2;
  }
  char as_path[4096] = "";
  if (as_config) {   /* checked before anything starts */
    static rd_as_config cfg;
    char aerr[600];
    if (!head) {
      fprintf(stderr, "raydist start: --autoscaling-config goes with --head\n");
      return 2;
    }
    if (!realpath(as_config, as_path)) {
      fprintf(stderr, "raydist start: --autoscaling-config %s: %s\n", as_config, strerror(errno));
      return 2;
    }
    if (rd__as_config_load(as_path, &cfg, aerr, sizeof(aerr)) != 0) {
      fprintf(stderr, "raydist start: --autoscaling-config: %s\n", aerr);
      return 2;
    }
  }
  char exe[4096];
  if (self_exe(exe, sizeof(exe)) != 0) {
    fprintf(stderr, "raydist start: cannot find this program's path\n");
    return 1;
  }
  char root[200], dir[400], rwhy[600];
  int code;
  char room[128];   /* the node's socket under it */
  int nroom = snprintf(room, sizeof(room), "/node-%s/" RD_NODE_SOCK, node_ip);
  if (rd__session_root_make(root, sizeof(root), (size_t)nroom + 1, &code, rwhy, sizeof(rwhy)) != 0) {
    fprintf(stderr, "raydist start: %s\n", rwhy);
    return 1;
  }
  snprintf(dir, sizeof(dir), "%s/node-%s", root, node_ip);
  char tokfile[600], gcs_addr[160], tokbuf[200], logf[600], path[600];
  snprintf(tokfile, sizeof(tokfile), "%s/token", dir);
  /* the head's node daemon died (a crash, the OOM killer) while its GCS
   * lives on: start it again there, rejoining that GCS and its nodes */
  int again = head && session_live(dir) && head_node_gone(dir, gcs_addr, sizeof(gcs_addr));
  if (again && as_config) {
    fprintf(stderr, "raydist start: the head's GCS runs on at %s with its autoscaler, if it had one: start the "
                    "node again without --autoscaling-config\n", gcs_addr);
    return 2;
  }
  if (!again && session_live(dir)) {
    fprintf(stderr, "raydist start: a node already runs on %s (session %s); `raydist stop` it first\n", node_ip, dir);
    return 1;
  }
  char spill_old[600];
  snprintf(spill_old, sizeof(spill_old), "%s/spill", dir);
  if (again) rd__rm_rf(spill_old);   /* the dead store's spilled objects: no one can read them now */
  else rd__rm_rf(dir);   /* a stale session of a node that is gone */
  if (!again && mkdir(dir, 0700) != 0) {
    fprintf(stderr, "raydist start: cannot create %s: %s\n", dir, strerror(errno));
    return 1;
  }
  if (again) {
    printf("the head's node daemon is gone but its GCS runs on at %s: starting the node again\n", gcs_addr);
  } else if (head) {
    snprintf(gcs_addr, sizeof(gcs_addr), "%s:%d", node_ip, port);
    if (rd__make_token(tokfile, 24, NULL, 0) != 0) {
      fprintf(stderr, "raydist start: cannot write the cluster token %s\n", tokfile);
      rd__rm_rf(dir);
      return 1;
    }
    char bind[160], portf[600], pidf[600], pbuf[32], storage[700];
    snprintf(bind, sizeof(bind), "%s:%d", node_ip, port);
    snprintf(logf, sizeof(logf), "%s/gcs.log", dir);
    snprintf(portf, sizeof(portf), "%s/gcs.port", dir);
    snprintf(pidf, sizeof(pidf), "%s/gcs.pid", dir);   /* the server's; `pids` names its keeper */
    if (gcs_storage) snprintf(storage, sizeof(storage), "%s", gcs_storage);
    else snprintf(storage, sizeof(storage), "file:%s/gcs.db", dir);
    char *gargs[] = {exe, "gcs", "--supervise", "--bind", bind, "--token-file", tokfile, "--ready-fd", NULL,
                     "--port-file", portf, "--pid-file", pidf, "--storage", storage,
                     "--heartbeat-timeout-ms", (char *)(getenv("RAYDIST_HEARTBEAT_TIMEOUT_MS") ? getenv("RAYDIST_HEARTBEAT_TIMEOUT_MS") : "3000"),
                     "--log-level", (char *)(loglevel ? loglevel : "1"),
                     "--log-file", logf,   /* the keeper copies the server's lines there and rotates it */
                     NULL};
    int pid = spawn_ready(gargs, logf, 8, 15000);
    if (pid < 0) {
      rd__rm_rf(dir);
      return 1;
    }
    append_pid(dir, "gcs", pid);
    if (rd__read_line(portf, pbuf, sizeof(pbuf)) == 0 && pbuf[0]) port = atoi(pbuf);   /* --port 0: the one it chose */
    snprintf(gcs_addr, sizeof(gcs_addr), "%s:%d", node_ip, port);
  } else {
    snprintf(gcs_addr, sizeof(gcs_addr), "%s", address);
    if (!token && rd__cli_local_token(address, tokbuf, sizeof(tokbuf)) == 0) token = tokbuf;
    if (!token || !*token) {
      fprintf(stderr, "raydist start: no cluster token: pass --token or RAYDIST_TOKEN (the file `token` in the "
                      "head node's session directory)\n");
      rd__rm_rf(dir);
      return 1;
    }
    char line[RD_RPC_TOKEN_MAX + 1];
    int len = snprintf(line, sizeof(line), "%s\n", token);
    if (len < 0 || (size_t)len >= sizeof(line)) {
      fprintf(stderr, "raydist start: the cluster token is longer than %d bytes\n", RD_RPC_TOKEN_MAX - 1);
      rd__rm_rf(dir);
      return 1;
    }
    if (rd__write_file(tokfile, line, (size_t)len) != 0) {
      fprintf(stderr, "raydist start: cannot write %s\n", tokfile);
      rd__rm_rf(dir);
      return 1;
    }
    /* a clear answer for a wrong address or token before starting anything */
    rd_gcs *g = NULL;
    char err[300] = "";
    int r = rd_gcs_connect(gcs_addr, token, 5000, &g, err, sizeof(err));
    if (r != 0) {
      fprintf(stderr, "raydist start: cannot join the cluster at %s: %s (%s)\n", gcs_addr, err, rd_err_name(r));
      rd__rm_rf(dir);
      return 1;
    }
    rd_gcs_close(g);
  }
  snprintf(path, sizeof(path), "%s/cluster", dir);
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "raydist start: cannot write %s\n", path);
    return 1;
  }
  fprintf(f, "gcs=%s\nip=%s\nhead=%d\n", gcs_addr, node_ip, head);
  fclose(f);
  char spill[600];
  snprintf(spill, sizeof(spill), "%s/spill", dir);
  snprintf(logf, sizeof(logf), "%s/node.log", dir);
  char *nargs[40];
  int k = 0;
  nargs[k++] = exe;
  nargs[k++] = "node";
  nargs[k++] = "--session"; nargs[k++] = dir;
  nargs[k++] = "--gcs"; nargs[k++] = gcs_addr;
  nargs[k++] = "--token-file"; nargs[k++] = tokfile;
  nargs[k++] = "--node-ip"; nargs[k++] = (char *)node_ip;
  nargs[k++] = "--spill-dir"; nargs[k++] = spill;
  if (head) nargs[k++] = "--head";
  if (num_cpus) { nargs[k++] = "--num-cpus"; nargs[k++] = (char *)num_cpus; }
  if (num_gpus) { nargs[k++] = "--num-gpus"; nargs[k++] = (char *)num_gpus; }
  if (gpu_memory) { nargs[k++] = "--gpu-memory"; nargs[k++] = (char *)gpu_memory; }
  if (resources) { nargs[k++] = "--resources"; nargs[k++] = (char *)resources; }
  if (memory) { nargs[k++] = "--memory"; nargs[k++] = (char *)memory; }
  if (store) { nargs[k++] = "--object-store-memory"; nargs[k++] = (char *)store; }
  if (fallback) { nargs[k++] = "--object-store-fallback"; nargs[k++] = (char *)fallback; }
  if (maxw) { nargs[k++] = "--max-workers"; nargs[k++] = (char *)maxw; }
  if (loglevel) { nargs[k++] = "--log-level"; nargs[k++] = (char *)loglevel; }
  if (metrics_port) { nargs[k++] = "--metrics-port"; nargs[k++] = (char *)metrics_port; }
  if (lbuf[0]) { nargs[k++] = "--labels"; nargs[k++] = lbuf; }
  nargs[k++] = "--log-file"; nargs[k++] = logf;   /* rotated there (RAYDIST_ROTATION_MAX_BYTES) */
  nargs[k++] = "--ready-fd";
  int ready_i = k;
  nargs[k++] = NULL;
  nargs[k] = NULL;
  int pid = spawn_ready(nargs, logf, ready_i, 30000);
  if (pid < 0) {
    if (again) return 1;   /* the GCS and the cluster's other nodes run on */
    /* leave nothing half-started */
    char *stop[] = {exe, "stop", "--node-ip", (char *)node_ip, NULL};
    rd__cli_stop(4, stop);
    return 1;
  }
  append_pid(dir, "node", pid);
  if (as_path[0]) {
    char alog[600], apidf[600];
    snprintf(alog, sizeof(alog), "%s/autoscaler.log", dir);
    snprintf(apidf, sizeof(apidf), "%s/autoscaler.pid", dir);   /* the autoscaler's; `pids` names its keeper */
    char *aargs[] = {exe, "autoscaler", "--address", gcs_addr, "--token-file", tokfile, "--config", as_path,
                     "--log-level", (char *)(loglevel ? loglevel : "1"), "--ready-fd", NULL,
                     "--supervise", "--log-file", alog, "--pid-file", apidf, NULL};
    int apid = spawn_ready(aargs, alog, 11, 30000);
    if (apid < 0) {
      char *stop[] = {exe, "stop", "--node-ip", (char *)node_ip, NULL};
      rd__cli_stop(4, stop);
      return 1;
    }
    append_pid(dir, "autoscaler", apid);
    printf("autoscaler started (config %s, log %s)\n", as_path, alog);
  }
  if (again) {
    printf("head node started again on %s, beside the GCS at %s (session %s); what the previous one recorded "
           "(detached actors and placement groups, its drivers' objects) is gone\n", node_ip, gcs_addr, dir);
  } else if (head) {
    printf("head node started on %s\n"
           "  GCS:      %s\n"
           "  session:  %s\n"
           "join from another machine (or address) with:\n"
           "  raydist start --address=%s --node-ip=<its ip> --token=$(cat %s)\n"
           "run a driver on it with RAYDIST_ADDRESS=%s ./your_program (or rd_config.address)\n",
           node_ip, gcs_addr, dir, gcs_addr, tokfile, gcs_addr);
  } else {
    printf("node started on %s, joined the cluster at %s (session %s)\n", node_ip, gcs_addr, dir);
  }
  return 0;
}

/* SIGTERM, then SIGKILL after 5 s: 1 when it was running. */
static int stop_recorded(const recorded *r) {
  if (!recorded_alive(r)) return 0;
  kill(r->pid, SIGTERM);
  for (int t = 0; t < 100 && recorded_alive(r); t++) usleep(50000);
  if (recorded_alive(r)) {
    fprintf(stderr, "raydist stop: %s (pid %d) did not stop in 5 s; killing it\n", r->name, r->pid);
    kill(r->pid, SIGKILL);
    for (int t = 0; t < 40 && recorded_alive(r); t++) usleep(50000);
  }
  return 1;
}

/* Stops a session's autoscaler, before any node goes: it would start
 * nodes again to keep its min_workers. */
static int stop_autoscaler(const char *dir) {
  recorded r[RD_MAX_RECORDED];
  int n = read_recorded(dir, r), stopped = 0;
  for (int i = 0; i < n; i++)
    if (!strcmp(r[i].name, "autoscaler")) stopped += stop_recorded(&r[i]);
  return stopped;
}

/* End one session's recorded processes (its autoscaler, then nodes, then
 * the GCS). */
static int stop_session(const char *dir) {
  recorded r[RD_MAX_RECORDED];
  int n = read_recorded(dir, r);
  int stopped = rd__cli_jobs_stop(dir) + stop_autoscaler(dir);   /* its submitted drivers first (`raydist job`) */
  for (int pass = 0; pass < 2; pass++)   /* node first: it leaves the GCS cleanly */
    for (int i = 0; i < n; i++)
      if ((strcmp(r[i].name, "gcs") == 0) == pass) stopped += stop_recorded(&r[i]);
  rd__rm_rf(dir);
  return stopped;
}

int rd__cli_stop(int argc, char **argv) {
  const char *node_ip = NULL;
  static const struct option lo[] = {{"node-ip", 1, 0, 'i'}, {0, 0, 0, 0}};
  int ch;
  optind = 2;
  while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
    if (ch == 'i') node_ip = optarg;
    else {
      fprintf(stderr, "usage: raydist stop [--node-ip IP]\n");
      return 2;
    }
  }
  char root[200];
  rd__session_root(root, sizeof(root));
  DIR *d = opendir(root);
  int stopped = 0, sessions = 0;
  if (d) {
    struct dirent *e;
    char dirs[64][512];   /* root (200) + "/" + a name (255) */
    int nd = 0;
    while ((e = readdir(d)) && nd < 64) {
      if (strncmp(e->d_name, "node-", 5) != 0) continue;
      if (node_ip && strcmp(e->d_name + 5, node_ip) != 0) continue;
      snprintf(dirs[nd++], sizeof(dirs[0]), "%s/%s", root, e->d_name);
    }
    closedir(d);
    for (int i = 0; i < nd; i++) stopped += stop_autoscaler(dirs[i]);
    /* worker nodes before the head, whose GCS the others report to */
    for (int pass = 0; pass < 2; pass++)
      for (int i = 0; i < nd; i++) {
        char f[1024], head[8] = "0";
        snprintf(f, sizeof(f), "%.900s/cluster", dirs[i]);
        (void)rd__read_kv(f, "head", head, sizeof(head));
        if ((head[0] == '1') != pass) continue;
        stopped += stop_session(dirs[i]);
        sessions++;
      }
  }
  printf("raydist stop: %d process%s stopped, %d session%s removed\n", stopped, stopped == 1 ? "" : "es", sessions,
         sessions == 1 ? "" : "s");
  return 0;
}

/* What each node reports it cannot run now (the autoscaler's demand), and
 * the nodes asked to leave. */
static void print_waiting(const rd_gcs_node_load *l, size_t n) {
  int any = 0;
  for (size_t i = 0; i < n; i++) {
    for (size_t k = 0; k < l[i].ndemand; k++) {
      const rd_gcs_demand *d = &l[i].demand[k];
      char r[200];
      rd_res_format(&d->shape, r, sizeof(r));
      if (!any++) printf("\nwaiting for resources (requests no node has room for now):\n");
      printf("waiting: node %u %s x %u%s%s%s", l[i].index, r, d->count, d->sel[0] ? " selector '" : "", d->sel,
             d->sel[0] ? "'" : "");
      if (d->spread_group) printf(" apart (STRICT_SPREAD group %016llx)", (unsigned long long)d->spread_group);
      printf("\n");
    }
    if (l[i].drain[0]) printf("leaving: node %u %s\n", l[i].index, l[i].drain);
  }
}

static void res_used(char *buf, size_t len, double total, double avail) {
  snprintf(buf, len, "%g/%g", total - avail, total);
}

/* Placement groups: how many are live and removed, then a row for each in
 * state `only` (an RD_GCS_PG_*; 0: every one; -1: those not removed), at
 * most limit, each with its bundles' nodes and why it waits or went. */
static void print_pgs(const rd_gcs_pg *pgs, size_t n, int only, size_t limit) {
  rd__mbuf b = {0};
  rd__pgs_describe(&b, pgs, n, only, limit);
  printf("\n%s", b.p ? b.p : "");
  free(b.p);
}

static void print_actors(const rd_gcs_actor *as, size_t n) {
  size_t live = 0;
  for (size_t i = 0; i < n; i++) live += as[i].state != RD_GCS_ACTOR_DEAD;
  printf("\nnamed actors: %zu live, %zu dead\n", live, n - live);
  if (!live) return;
  printf("%-16s %-24s %-24s %-5s %s\n", "id", "name", "class", "node", "state");
  for (size_t i = 0; i < n; i++) {
    const rd_gcs_actor *a = &as[i];
    if (a->state == RD_GCS_ACTOR_DEAD) continue;
    printf("%016llx %-24s %-24s %-5u %s\n", (unsigned long long)a->actor_id, a->name[0] ? a->name : "-",
           a->class_name, a->node_index,
           rd_gcs_actor_state_name(a->state));
  }
}

static void print_job_head(void) {
  printf("%-6s %-5s %-8s %-16s %-12s %s\n", "job", "node", "driver", "code", "started", "state");
}

static void print_job_row(const rd_gcs_job *j, uint64_t now) {
  char state[200];
  if (j->end_ms) snprintf(state, sizeof(state), "ended after %.1f s: %s", (j->end_ms - j->start_ms) / 1000.0, j->end_reason);
  else snprintf(state, sizeof(state), "running");
  char started[32];
  snprintf(started, sizeof(started), "%.0f s ago", now > j->start_ms ? (now - j->start_ms) / 1000.0 : 0.0);
  printf("%-6u %-5u %-8d %-16.16s %-12s %s\n", j->job_id, j->node_index, j->driver_pid,
         j->code_hash[0] ? j->code_hash : "-", started, state);
}

/* Jobs: how many run and ended, each running one, and the last ended. */
static void print_jobs(const rd_gcs_job *js, size_t n) {
  size_t running = 0;
  for (size_t i = 0; i < n; i++) running += js[i].end_ms == 0;
  printf("\njobs: %zu running, %zu ended\n", running, n - running);
  uint64_t now = rd__wall_ms();
  const rd_gcs_job *last = NULL;
  for (size_t i = 0; i < n; i++)
    if (js[i].end_ms && (!last || js[i].job_id > last->job_id)) last = &js[i];
  if (!running && !last) return;
  print_job_head();
  for (size_t i = 0; i < n; i++)
    if (!js[i].end_ms || &js[i] == last) print_job_row(&js[i], now);
}

/* The node table: a row for each node in state `only` (RD_GCS_NODE_*; 0:
 * all), at most limit. */
static void print_nodes(const rd_gcs_node *nodes, size_t n, int only, size_t limit) {
  char cb[64], gb[64];
  size_t shown = 0;
  for (size_t i = 0; i < n && shown < limit; i++) {
    const rd_gcs_node *x = &nodes[i];
    if (only && x->state != only) continue;
    if (!shown++)
      printf("%-5s %-16s %-5s %-6s %-11s %-11s %-24s %-19s %-7s %s\n", "node", "ip", "head", "state", "CPU", "GPU",
             "custom (used/total)", "store MiB used/cap", "pending", "last heartbeat");
    res_used(cb, sizeof(cb), rd_res_to_double(x->total.cpu), rd_res_to_double(x->avail.cpu));
    res_used(gb, sizeof(gb), rd_res_to_double(x->total.gpu), rd_res_to_double(x->avail.gpu));
    char custom[128] = "-";
    size_t off = 0;
    for (int k = 0; k < x->total.ncustom && off < sizeof(custom) - 40; k++) {
      double t = rd_res_to_double(x->total.custom[k].amount);
      double a = rd_res_to_double(rd_res_get_custom(&x->avail, x->total.custom[k].name));
      off += (size_t)snprintf(custom + off, sizeof(custom) - off, "%s%s %g/%g", k ? "," : "", x->total.custom[k].name,
                              t - a, t);
    }
    char store[64];
    snprintf(store, sizeof(store), "%.0f/%.0f", x->store_used / 1048576.0, x->store_capacity / 1048576.0);
    char hb[200];
    if (x->state == RD_GCS_NODE_ALIVE) snprintf(hb, sizeof(hb), "%.1f s ago", x->ms_since_heartbeat / 1000.0);
    else snprintf(hb, sizeof(hb), "dead: %s", x->death_reason);
    printf("%-5u %-16s %-5s %-6s %-11s %-11s %-24s %-19s %-7lld %s\n", x->index, x->ip, x->is_head ? "yes" : "",
           x->state == RD_GCS_NODE_ALIVE ? "alive" : "dead", cb, gb, custom, store, (long long)x->pending, hb);
  }
}

/* The code table: blobs, bytes, how many are held, what was collected. */
static void print_code(const rd_gcs_code_table *t) {
  char line[300];
  rd_gcs_code_describe(t, line, sizeof(line));
  printf("\ncode: %s\n", line);
}

/* The GCS of the cluster at address (NULL or "": the one this machine runs)
 * with token (NULL or "": this machine's copy), for `raydist cmd`; the
 * address used in addr_out.  NULL, with the reason on stderr, when it
 * cannot be reached. */
static rd_gcs *cli_gcs(const char *cmd, const char *address, const char *token, char *addr_out, size_t addr_len) {
  char tbuf[200];
  if (!address || !*address) {
    char dir[512];
    if (local_session(NULL, dir, sizeof(dir), addr_out, addr_len) != 0) {
      fprintf(stderr, "raydist %s: no cluster runs on this machine; pass --address\n", cmd);
      return NULL;
    }
  } else {
    snprintf(addr_out, addr_len, "%s", address);
  }
  if ((!token || !*token) && rd__cli_local_token(addr_out, tbuf, sizeof(tbuf)) == 0) token = tbuf;
  rd_gcs *g = NULL;
  char err[300] = "";
  int r = rd_gcs_connect(addr_out, token, 5000, &g, err, sizeof(err));
  if (r != 0) {
    fprintf(stderr, "raydist %s: cannot reach the cluster at %s: %s (%s)\n", cmd, addr_out, err, rd_err_name(r));
    return NULL;
  }
  return g;
}

/* raydist status: the cluster's last warnings and errors of the past hour
 * (Ray's "Recent failures"), the newest last, at most 5; nothing when
 * there are none. */
static void print_recent(const rd_gcs_events *ev) {
  uint64_t now = rd__wall_ms();
  size_t pick[5], n = 0;
  for (size_t i = ev->n; i-- > 0 && n < 5;) {
    const rd_gcs_cluster_event *e = &ev->ev[i];
    if (!strcmp(e->severity, "INFO") || !strcmp(e->severity, "DEBUG")) continue;
    if (e->time_ms + 3600000 < now) break;
    pick[n++] = i;
  }
  if (!n) return;
  printf("\nrecent failures (the last hour; raydist list cluster-events has them all):\n");
  while (n-- > 0) {
    const rd_gcs_cluster_event *e = &ev->ev[pick[n]];
    double age = e->time_ms < now ? (now - e->time_ms) / 1e3 : 0;
    char when[32], node[24] = "";
    if (age < 120) snprintf(when, sizeof(when), "%.0fs ago", age);
    else snprintf(when, sizeof(when), "%.0fm ago", age / 60);
    if (e->node_index) snprintf(node, sizeof(node), "node %u: ", e->node_index);
    printf("  %-8s %-7s %s%s\n", when, e->severity, node, e->message);
  }
}

/* A number at obj.key (0 when absent). */
static double jnum(const rd_json *obj, const char *key) {
  const rd_json *v = rd_json_get(obj, key);
  return v && v->type == RD_JSON_NUMBER ? v->num : 0;
}

/* raydist status --local: an embedded node's /api/cluster in a few lines
 * (the node's resources used of total, store, workers, actors, tasks, its
 * jobs), as raydist status shows a cluster's nodes. */
static int show_status(const local_node *x, const char *body, size_t len, void *arg) {
  (void)arg;
  rd_json *root = rd_json_parse(body, len, NULL, 0);
  const rd_json *n = root ? rd_json_get(root, "node") : NULL;
  if (!n || n->type != RD_JSON_OBJECT) {
    printf("embedded node %s: an answer that is no node's status\n", x->dir);
    free(root);
    return 1;
  }
  const rd_json *res = rd_json_get(n, "resources"), *tot = rd_json_get(res, "total"), *av = rd_json_get(res, "available");
  const rd_json *w = rd_json_get(n, "workers"), *a = rd_json_get(n, "actors"), *t = rd_json_get(n, "tasks");
  const rd_json *o = rd_json_get(n, "owned_tasks"), *st = rd_json_get(n, "store");
  printf("embedded node %s: up %.0f s, dashboard http://%s:%d/\n  resources used/total:", x->dir, jnum(n, "uptime_s"),
         x->ip, x->port);
  for (const rd_json *r = tot && tot->type == RD_JSON_OBJECT ? tot->child : NULL; r; r = r->next) {
    double used = r->num - jnum(av, r->key);
    if (!strcmp(r->key, "memory")) printf(" memory %.0f/%.0f MiB", used / 1048576.0, r->num / 1048576.0);
    else printf(" %s %g/%g", r->key, used, r->num);
    putchar(r->next ? ',' : '\n');
  }
  double ws = jnum(w, "starting"), wi = jnum(w, "idle"), wl = jnum(w, "leased"), wd = jnum(w, "dying");
  printf("  object store: %.1f/%.1f MiB, %.0f objects in memory, %.0f spilled (%.1f MiB)",
         jnum(st, "used") / 1048576.0, jnum(st, "capacity") / 1048576.0, jnum(st, "objects"),
         jnum(st, "spilled_objects"), jnum(st, "spilled_bytes") / 1048576.0);
  if (jnum(st, "fallback_objects") > 0)
    printf("; fallback region %.1f MiB in %.0f objects", jnum(st, "fallback_used") / 1048576.0,
           jnum(st, "fallback_objects"));
  putchar('\n');
  printf("  workers: %.0f (starting %.0f, idle %.0f, leased %.0f, dying %.0f; blocked in a get %.0f); drivers %.0f\n",
         ws + wi + wl + wd, ws, wi, wl, wd, jnum(w, "blocked"), jnum(n, "drivers"));
  printf("  actors: pending %.0f, starting %.0f, alive %.0f, dead %.0f\n", jnum(a, "pending"), jnum(a, "starting"),
         jnum(a, "alive"), jnum(a, "dead"));
  printf("  tasks and actor calls: %.0f waiting for a worker, %.0f sent to workers, %.0f done (%.0f failed); "
         "run here %.0f (%.0f failed), mean %.3g s\n",
         jnum(o, "waiting"), jnum(o, "sent"), jnum(o, "settled"), jnum(o, "failed"), jnum(t, "run"), jnum(t, "failed"),
         jnum(t, "run_mean_s"));
  if (jnum(n, "memory_kills") > 0) printf("  memory monitor kills: %.0f\n", jnum(n, "memory_kills"));
  const rd_json *jobs = rd_json_get(root, "node_jobs");
  for (const rd_json *j = jobs && jobs->type == RD_JSON_ARRAY ? jobs->child : NULL; j; j = j->next) {
    const rd_json *exe = rd_json_get(j, "exe"), *held = rd_json_get(j, "held");
    printf("  job %.0f: %s, %.0f driver%s, %.0f workers, holds CPU %g GPU %g\n", jnum(j, "id"),
           exe && exe->type == RD_JSON_STRING ? exe->str : "?", jnum(j, "drivers"), jnum(j, "drivers") == 1 ? "" : "s",
           jnum(j, "workers"), jnum(held, "CPU"), jnum(held, "GPU"));
  }
  free(root);
  /* its live placement groups, as raydist status shows a cluster's */
  char *pb = NULL, why[200];
  size_t plen = 0;
  if (rd__http_get(x->ip, x->port, "/placement_groups?live=1&limit=100", x->token, 15000, 4u << 20, &pb, &plen, why,
                   sizeof(why)) != 0)
    plen = 0;   /* a node of a version without it */
  for (const char *l = pb; l && l < pb + plen && *l;) {   /* the count line, then the rows indented under it */
    size_t k = strcspn(l, "\n");
    printf("%s%.*s\n", l == pb ? "  " : "    ", (int)k, l);
    l += k + (l[k] == '\n');
  }
  free(pb);
  return 1;
}

int rd__cli_status(int argc, char **argv) {
  const char *address = getenv("RAYDIST_ADDRESS"), *token = getenv("RAYDIST_TOKEN");
  static const struct option lo[] = {{"address", 1, 0, 'a'}, {"token", 1, 0, 't'}, {"local", 0, 0, 'L'}, {0, 0, 0, 0}};
  int ch, local = 0;
  optind = 2;
  while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
    if (ch == 'a') address = optarg;
    else if (ch == 't') token = optarg;
    else if (ch == 'L') local = 1;
    else {
      fprintf(stderr, "usage: raydist status [--address IP:PORT] [--token T] [--local]\n"
                      "       --local, or no cluster named and none runs here: this machine's embedded clusters\n");
      return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "raydist status: unexpected '%s'\n", argv[optind]);
    return 2;
  }
  if (use_local(local, address)) return each_local("status", "/api/cluster", show_status, NULL, NULL);
  char abuf[160];
  rd_gcs *g = cli_gcs("status", address, token, abuf, sizeof(abuf));
  if (!g) return 1;
  address = abuf;
  int r;
  rd_gcs_node *nodes = NULL;
  size_t n = 0;
  uint64_t ver = 0;
  r = rd_gcs_get_nodes(g, &nodes, &n, &ver);
  rd_gcs_pg *pgs = NULL;
  size_t npg = 0;
  if (r == 0 && rd_gcs_pg_list(g, &pgs, &npg) != 0) {
    pgs = NULL;
    npg = 0;
  }
  rd_gcs_actor *actors = NULL;
  size_t nact = 0;
  if (r == 0 && rd_gcs_actor_list(g, &actors, &nact) != 0) {
    actors = NULL;
    nact = 0;
  }
  rd_gcs_job *jobs = NULL;
  size_t njobs = 0;
  if (r == 0 && rd_gcs_job_list(g, &jobs, &njobs) != 0) {
    jobs = NULL;
    njobs = 0;
  }
  rd_gcs_code_table code = {0};
  int code_rc = r == 0 ? rd_gcs_code_list(g, &code) : -1;
  rd_gcs_node_load *load = NULL;
  size_t nload = 0;
  if (r == 0 && rd_gcs_get_load(g, &load, &nload) != 0) {
    load = NULL;
    nload = 0;
  }
  void *astat = NULL;   /* the autoscaler's status text, when one runs */
  size_t astat_len = 0;
  if (r == 0 && rd_gcs_kv_get(g, RD_AS_KV_NS, RD_AS_KV_STATUS, &astat, &astat_len) != 0) {
    astat = NULL;
    astat_len = 0;
  }
  rd_gcs_events ev = {0};
  if (r == 0 && rd_gcs_event_list(g, 0, 100, &ev) != 0) memset(&ev, 0, sizeof(ev));
  rd_gcs_close(g);
  if (r != 0) {
    fprintf(stderr, "raydist status: %s\n", rd_strerror(r));
    return 1;
  }
  int alive = 0;
  int64_t pending = 0;
  double cpu_t = 0, cpu_a = 0, gpu_t = 0, gpu_a = 0;
  for (size_t i = 0; i < n; i++) {
    if (nodes[i].state != RD_GCS_NODE_ALIVE) continue;
    alive++;
    pending += nodes[i].pending;
    cpu_t += rd_res_to_double(nodes[i].total.cpu);
    cpu_a += rd_res_to_double(nodes[i].avail.cpu);
    gpu_t += rd_res_to_double(nodes[i].total.gpu);
    gpu_a += rd_res_to_double(nodes[i].avail.gpu);
  }
  char cb[64], gb[64];
  res_used(cb, sizeof(cb), cpu_t, cpu_a);
  res_used(gb, sizeof(gb), gpu_t, gpu_a);
  printf("cluster at %s: %d node%s alive, %zu dead\n", address, alive, alive == 1 ? "" : "s", n - (size_t)alive);
  printf("resources used/total: CPU %s, GPU %s; pending lease requests: %lld\n\n", cb, gb, (long long)pending);
  print_nodes(nodes, n, 0, SIZE_MAX);
  for (size_t i = 0; i < n; i++)
    if (nodes[i].state == RD_GCS_NODE_ALIVE && nodes[i].metrics_port > 0)
      printf("metrics: node %u http://%s:%d/metrics\n", nodes[i].index, nodes[i].ip, nodes[i].metrics_port);
  for (size_t i = 0; i < n; i++)
    if (nodes[i].state == RD_GCS_NODE_ALIVE && nodes[i].labels[0])
      printf("labels: node %u %s\n", nodes[i].index, nodes[i].labels);
  free(nodes);
  print_waiting(load, nload);
  free(load);
  if (astat_len) printf("\n%.*s", (int)astat_len, (const char *)astat);
  free(astat);
  print_pgs(pgs, npg, -1, SIZE_MAX);
  free(pgs);
  print_actors(actors, nact);
  free(actors);
  print_jobs(jobs, njobs);
  free(jobs);
  if (code_rc == 0) print_code(&code);
  free(code.code);
  print_recent(&ev);
  rd_gcs_events_free(&ev);
  return 0;
}

/* GET path from ip:port (HTTP/1.0; with the bearer token when not NULL):
 * the body on stdout; 0, or -1 with why. */
static int http_get_print(const char *ip, int port, const char *path, const char *token, char *why, size_t whylen) {
  char *body;
  size_t len;
  if (rd__http_get(ip, port, path, token, 30000, (size_t)1 << 30, &body, &len, why, whylen) != 0) return -1;
  fwrite(body, 1, len, stdout);
  free(body);
  return 0;
}

/* The GCS's node table (cli_gcs's address into abuf): 0, or 1 with why
 * printed. */
static int cli_nodes(const char *cmd, const char *address, const char *token, char *abuf, size_t alen,
                     rd_gcs_node **nodes, size_t *n) {
  rd_gcs *g = cli_gcs(cmd, address, token, abuf, alen);
  if (!g) return 1;
  uint64_t ver = 0;
  int r = rd_gcs_get_nodes(g, nodes, n, &ver);
  rd_gcs_close(g);
  if (r != 0) fprintf(stderr, "raydist %s: %s\n", cmd, rd_strerror(r));
  return r != 0;
}

/* GET path from every live node's metrics endpoint and print it (raydist
 * memory, raydist list tasks); bearer: with the cluster token (what needs
 * it: the runtime envs).  0, or 1 when the GCS or a node failed. */
static int each_node_print(const char *cmd, const char *address, const char *token, const char *path, int bearer) {
  char abuf[160], err[300], tbuf[200];
  rd_gcs_node *nodes = NULL;
  size_t n = 0;
  if (cli_nodes(cmd, address, token, abuf, sizeof(abuf), &nodes, &n) != 0) return 1;
  if ((!token || !*token) && rd__cli_local_token(abuf, tbuf, sizeof(tbuf)) == 0) token = tbuf;
  int failed = 0;
  for (size_t i = 0; i < n; i++) {
    const rd_gcs_node *x = &nodes[i];
    if (x->state != RD_GCS_NODE_ALIVE) continue;
    if (x->metrics_port <= 0) {
      printf("node %u (%s): no metrics endpoint (started with --metrics-port -1)\n", x->index, x->ip);
      continue;
    }
    fflush(stdout);
    if (http_get_print(x->ip, x->metrics_port, path, bearer ? token : NULL, err, sizeof(err)) != 0) {
      printf("node %u (%s): %s\n", x->index, x->ip, err);
      failed = 1;
    }
  }
  free(nodes);
  return failed;
}

/* A count option's value (--top, --limit): 1 when s is a whole number in
 * 0..10000, put in *out. */
static int count_arg(const char *s, long *out) {
  char *end = NULL;
  long v = strtol(s, &end, 10);
  if (!*s || *end || v < 0 || v > 10000) return 0;
  *out = v;
  return 1;
}

int rd__cli_memory(int argc, char **argv) {
  const char *address = getenv("RAYDIST_ADDRESS"), *token = getenv("RAYDIST_TOKEN");
  long top = 20;
  static const struct option lo[] = {{"address", 1, 0, 'a'}, {"token", 1, 0, 't'}, {"top", 1, 0, 'n'},
                                     {"local", 0, 0, 'L'},   {0, 0, 0, 0}};
  int ch, local = 0;
  optind = 2;
  while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
    if (ch == 'a') address = optarg;
    else if (ch == 't') token = optarg;
    else if (ch == 'L') local = 1;
    else if (ch == 'n' && count_arg(optarg, &top)) continue;
    else {
      fprintf(stderr, "usage: raydist memory [--address IP:PORT] [--token T] [--top N (0..10000, default 20)] [--local]\n"
                      "       --local, or no cluster named and none runs here: this machine's embedded clusters\n");
      return 2;
    }
  }
  char path[64];
  snprintf(path, sizeof(path), "/objects?top=%ld", top);
  if (use_local(local, address)) return each_local("memory", path, show_text, NULL, NULL);
  return each_node_print("memory", address, token, path, 0);
}

/* States of the GCS's tables by name (any case); -1: none such. */
static int node_state_parse(const char *s) {
  return !strcasecmp(s, "ALIVE") ? RD_GCS_NODE_ALIVE : !strcasecmp(s, "DEAD") ? RD_GCS_NODE_DEAD : -1;
}
enum { JOB_RUNNING = 1, JOB_ENDED = 2 };
static int job_state_parse(const char *s) {
  return !strcasecmp(s, "RUNNING") ? JOB_RUNNING : !strcasecmp(s, "ENDED") ? JOB_ENDED : -1;
}

static const char *const severities[] = {"DEBUG", "INFO", "WARNING", "ERROR", "FATAL"};
static int severity_parse(const char *s) {
  for (int k = 0; k < 5; k++)
    if (!strcasecmp(s, severities[k])) return k + 1;
  return -1;
}

static void print_event(const rd_gcs_cluster_event *e, int *head) {
  if (!*head) {
    printf("  %-19s  %-7s  %-10s %5s  %s\n", "TIME", "LEVEL", "SOURCE", "NODE", "MESSAGE");
    *head = 1;
  }
  time_t t = (time_t)(e->time_ms / 1000);
  struct tm tm;
  char when[32] = "?";
  if (localtime_r(&t, &tm)) strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
  char node[12] = "-";
  if (e->node_index) snprintf(node, sizeof(node), "%u", e->node_index);
  printf("  %-19s  %-7s  %-10s %5s  %s\n", when, e->severity, e->source, node, e->message);
}

/* raydist list cluster-events: the newest `limit` of the GCS's events (of
 * severity `only`, 1..5 in severities[]; 0: all), oldest first; with
 * follow, then those that come, asked for each second, until interrupted
 * (through a restart of the GCS). */
static int print_events(rd_gcs *g, int only, size_t limit, int follow) {
  rd_gcs_events ev;
  int r = rd_gcs_event_list(g, 0, only ? 0 : (uint32_t)limit, &ev);
  if (r != 0) return r;
  uint64_t kept = ev.last >= ev.first_kept ? ev.last - ev.first_kept + 1 : 0;
  printf("cluster events: %llu kept", (unsigned long long)kept);
  if (kept) printf(" (ids %llu..%llu)", (unsigned long long)ev.first_kept, (unsigned long long)ev.last);
  if (ev.first_kept > 1) printf(", %llu older dropped", (unsigned long long)(ev.first_kept - 1));
  printf("\n");
  size_t match = 0;
  int head = 0;
  for (size_t i = 0; i < ev.n; i++) match += !only || !strcmp(ev.ev[i].severity, severities[only - 1]);
  size_t skip = match > limit ? match - limit : 0;
  for (size_t i = 0, k = 0; i < ev.n; i++) {
    const rd_gcs_cluster_event *e = &ev.ev[i];
    if (only && strcmp(e->severity, severities[only - 1]) != 0) continue;
    if (k++ < skip) continue;
    print_event(e, &head);
  }
  if (ev.omitted) printf("  (%llu older events left out of the GCS's answer)\n", (unsigned long long)ev.omitted);
  uint64_t last = ev.last;
  rd_gcs_events_free(&ev);
  int away = 0;
  while (follow) {
    fflush(stdout);
    sleep(1);
    if ((r = rd_gcs_event_list(g, last, 0, &ev)) != 0) {
      if (r != RD_ECONN && r != RD_ETIMEDOUT) return r;
      if (!away++) fprintf(stderr, "raydist list cluster-events: the GCS does not answer (%s); asking again each second\n",
                           rd_strerror(r));
      continue;
    }
    away = 0;
    if (ev.first_kept > last + 1)
      printf("  (%llu events came and were dropped before they could be shown)\n",
             (unsigned long long)(ev.first_kept - last - 1));
    for (size_t i = 0; i < ev.n; i++)
      if (!only || !strcmp(ev.ev[i].severity, severities[only - 1])) print_event(&ev.ev[i], &head);
    if (ev.n) last = ev.ev[ev.n - 1].event_id;
    else if (ev.last > last) last = ev.last;   /* (dropped meanwhile) */
    rd_gcs_events_free(&ev);
  }
  return 0;
}

static int job_newer(const void *a, const void *b) {
  const rd_gcs_job *x = a, *y = b;
  return x->job_id < y->job_id ? 1 : x->job_id > y->job_id ? -1 : 0;
}

/* raydist list nodes|placement-groups|jobs|cluster-events: the GCS's table, rows in state
 * `only` (0: all), at most limit. */
static int list_gcs(const char *kind, const char *address, const char *token, int only, size_t limit, int follow) {
  char abuf[160];
  rd_gcs *g = cli_gcs("list", address, token, abuf, sizeof(abuf));
  if (!g) return 1;
  int r;
  if (!strcmp(kind, "nodes")) {
    rd_gcs_node *nodes = NULL;
    size_t n = 0, alive = 0;
    uint64_t ver = 0;
    if ((r = rd_gcs_get_nodes(g, &nodes, &n, &ver)) == 0) {
      for (size_t i = 0; i < n; i++) alive += nodes[i].state == RD_GCS_NODE_ALIVE;
      printf("nodes: %zu alive, %zu dead\n", alive, n - alive);
      print_nodes(nodes, n, only, limit);
      free(nodes);
    }
  } else if (!strcmp(kind, "jobs")) {
    rd_gcs_job *js = NULL;
    size_t n = 0, running = 0, shown = 0;
    if ((r = rd_gcs_job_list(g, &js, &n)) == 0) {
      for (size_t i = 0; i < n; i++) running += js[i].end_ms == 0;
      printf("jobs: %zu running, %zu ended\n", running, n - running);
      if (n) qsort(js, n, sizeof(*js), job_newer);
      uint64_t now = rd__wall_ms();
      for (size_t i = 0; i < n && shown < limit; i++) {
        if (only && (js[i].end_ms ? JOB_ENDED : JOB_RUNNING) != only) continue;
        if (!shown++) print_job_head();
        print_job_row(&js[i], now);
      }
      free(js);
    }
  } else if (!strcmp(kind, "cluster-events")) {
    r = print_events(g, only, limit, follow);
  } else {
    rd_gcs_pg *pgs = NULL;
    size_t n = 0;
    if ((r = rd_gcs_pg_list(g, &pgs, &n)) == 0) {
      print_pgs(pgs, n, only, limit);
      free(pgs);
    }
  }
  rd_gcs_close(g);
  if (r != 0) fprintf(stderr, "raydist list %s: %s\n", kind, rd_strerror(r));
  return r != 0;
}

/* raydist list KIND: every live node's owners' unfinished (and failed, or
 * with --state finished the finished) tasks (/tasks), actor records (/actors), worker processes, alive
 * and exited (/workers), store objects (/objects, as raydist memory) or env sets (/runtime_envs); or the
 * GCS's nodes, placement groups, jobs or events. */
int rd__cli_list(int argc, char **argv) {
  const char *address = getenv("RAYDIST_ADDRESS"), *token = getenv("RAYDIST_TOKEN"), *state = NULL;
  long limit = 100;
  static const char usage[] =
      "usage: raydist list KIND [--address IP:PORT] [--token T] [--state S] [--limit N (0..10000, default 100)]\n"
      "       KIND and its states S (any case):\n"
      "       tasks              PENDING_ARGS, PENDING_LEASE, RETRY_BACKOFF, PENDING_ACTOR, SUBMITTED, RUNNING,\n"
      "                          FAILED (the last 1000 that failed for good on each node),\n"
      "                          FINISHED (the last RAYDIST_TASK_HISTORY that finished well, kept by each node)\n"
      "       actors             PENDING_CREATION, RESTARTING, ALIVE, DEAD\n"
      "       workers            ALIVE, EXITED (the last RAYDIST_WORKERS_EXITED_KEPT of each node, with why)\n"
      "       objects            (none: the N largest in each node's store)\n"
      "       nodes              ALIVE, DEAD\n"
      "       placement-groups   PENDING, CREATED, RESCHEDULING, REMOVED\n"
      "       jobs               RUNNING, ENDED (drivers' runs, newest first; raydist job list: submitted jobs)\n"
      "       cluster-events     DEBUG, INFO, WARNING, ERROR, FATAL (the newest, oldest first: nodes joined and\n"
      "                          died, the autoscaler's launches, workers that crashed or were killed for memory,\n"
      "                          submitted jobs; --follow: then those that come, until interrupted)\n"
      "       runtime-envs       (none: the env sets each node's workers start with, and whether they start)\n"
      "       --local, or no cluster named and none runs here: tasks, actors, workers, objects, runtime-envs and\n"
      "       placement-groups of this machine's embedded clusters (rd_init without an address; they keep no\n"
      "       node, job or event tables)\n";
  const char *kind = argc >= 3 ? argv[2] : NULL;
  int (*parse)(const char *) = NULL, gcs = 0;
  if (kind && !strcmp(kind, "tasks")) parse = rd__task_state_parse;
  else if (kind && !strcmp(kind, "actors")) parse = rd__actor_list_state_parse;
  else if (kind && !strcmp(kind, "workers")) parse = rd__worker_list_state_parse;
  else if (kind && !strcmp(kind, "nodes")) parse = node_state_parse, gcs = 1;
  else if (kind && !strcmp(kind, "placement-groups")) parse = rd__pg_state_parse, gcs = 1;
  else if (kind && !strcmp(kind, "jobs")) parse = job_state_parse, gcs = 1;
  else if (kind && !strcmp(kind, "cluster-events")) parse = severity_parse, gcs = 1;
  else if (!kind || (strcmp(kind, "objects") != 0 && strcmp(kind, "runtime-envs") != 0)) {
    fprintf(stderr, "raydist list: %s%s%s", kind ? "cannot list '" : "what? ", kind ? kind : "", kind ? "'\n" : "");
    fprintf(stderr, "%s", usage);
    return 2;
  }
  static const struct option lo[] = {{"address", 1, 0, 'a'}, {"token", 1, 0, 't'}, {"state", 1, 0, 's'},
                                     {"limit", 1, 0, 'n'},   {"follow", 0, 0, 'f'}, {"local", 0, 0, 'L'},
                                     {0, 0, 0, 0}};
  int ch, follow = 0, local = 0;
  optind = 3;
  while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
    if (ch == 'a') address = optarg;
    else if (ch == 't') token = optarg;
    else if (ch == 's' && parse && parse(optarg) >= 0) state = optarg;
    else if (ch == 'n' && count_arg(optarg, &limit)) continue;
    else if (ch == 'f' && !strcmp(kind, "cluster-events")) follow = 1;
    else if (ch == 'L') local = 1;
    else {
      fprintf(stderr, "%s", usage);
      return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "raydist list %s: unexpected '%s'\n%s", kind, argv[optind], usage);
    return 2;
  }
  int here = use_local(local, address);
  if (here && !strcmp(kind, "placement-groups")) {   /* an embedded node keeps its own */
    char path[96];
    snprintf(path, sizeof(path), "/placement_groups?limit=%ld%s%s", limit, state ? "&state=" : "", state ? state : "");
    return each_local("list", path, show_text, NULL, NULL);
  }
  if (gcs && here) {   /* an embedded node keeps what a GCS would */
    fprintf(stderr, "raydist list %s%s: %san embedded cluster keeps no %s table (raydist status --local shows its node)\n",
            kind, local ? " --local" : "", local ? "" : "no cluster runs on this machine (pass --address), and ", kind);
    return local ? 2 : 1;
  }
  if (gcs) return list_gcs(kind, address, token, state ? parse(state) : 0, (size_t)limit, follow);
  char path[96];
  if (!strcmp(kind, "runtime-envs")) snprintf(path, sizeof(path), "/runtime_envs?limit=%ld", limit);
  else if (!parse) snprintf(path, sizeof(path), "/objects?top=%ld", limit);
  else snprintf(path, sizeof(path), "/%s?limit=%ld%s%s", kind, limit, state ? "&state=" : "", state ? state : "");
  if (here) return each_local("list", path, show_text, NULL, NULL);
  return each_node_print("list", address, token, path, !strcmp(kind, "runtime-envs"));
}

/* ---------------------------------------------------------------- logs
 *
 * raydist logs: a node's log files (Ray's `ray logs`), through the state
 * API of a live node (/api/v0/logs, /api/v0/logs/file), which asks the
 * node that has them. */

typedef struct logs_cli {
  char ip[128];             /* the node asked: a live node's state API (api /api/v0/logs), */
  int port;                 /* or an embedded node's own logs API (api /api/logs, --local) */
  const char *api;
  char token[200];
  char node_id[80], node_ip[64];   /* --node-id, --node-ip */
  long tail;
  int err, follow;
} logs_cli;

/* GET path (to which the node's choice is added) from the state API:
 * 0 with the body (malloc'd), or 1 with the reason printed. */
static int logs_get(const logs_cli *L, const char *path, char **body, size_t *len) {
  char full[1200], why[300];
  snprintf(full, sizeof(full), "%s%s%s%s%s", path, L->node_id[0] ? "&node_id=" : "", L->node_id,
           !L->node_id[0] && L->node_ip[0] ? "&node_ip=" : "", !L->node_id[0] ? L->node_ip : "");
  if (rd__http_get(L->ip, L->port, full, L->token, 60000, RD_LOGS_MAX_BYTES + 4096, body, len, why, sizeof(why)) == 0)
    return 0;
  fprintf(stderr, "raydist logs: %s\n", why);
  return 1;
}

/* Prints the file `who` names (filename=F, pid=P, actor_id=A, task_id=T),
 * its last --tail lines; with --follow, what is added to it after, until
 * interrupted. */
static int logs_print(logs_cli *L, const char *who) {
  char path[1024], *body = NULL;
  size_t len = 0;
  const char *sfx = L->err ? "err" : "out";
  if (!L->follow) {
    snprintf(path, sizeof(path), "%s/file?%s&suffix=%s&lines=%ld", L->api, who, sfx, L->tail);
    if (logs_get(L, path, &body, &len) != 0) return 1;
    fwrite(body, 1, len, stdout);
    free(body);
    return 0;
  }
  /* where the file is, and how long, once; then its tail up to there, then what comes */
  snprintf(path, sizeof(path), "%s/file?%s&suffix=%s&stat=1", L->api, who, sfx);
  if (logs_get(L, path, &body, &len) != 0) return 1;
  rd_json *st = rd_json_parse(body, len, NULL, 0);
  const rd_json *id = st ? rd_json_get(st, "node_id") : NULL, *fn = st ? rd_json_get(st, "filename") : NULL;
  const rd_json *sz = st ? rd_json_get(st, "size") : NULL;
  int pinned = !strcmp(L->api, "/api/logs");   /* a node's own API: no node to pin */
  if ((!pinned && (!id || id->type != RD_JSON_STRING)) || !fn || fn->type != RD_JSON_STRING || !sz ||
      sz->type != RD_JSON_NUMBER) {
    fprintf(stderr, "raydist logs: the node's answer says no file: %.*s\n", (int)(len < 200 ? len : 200), body);
    free(st);
    free(body);
    return 1;
  }
  char name[600];
  rd__url_encode(name, sizeof(name), fn->str);
  if (!pinned) snprintf(L->node_id, sizeof(L->node_id), "%s", id->str);
  uint64_t off = (uint64_t)sz->num;
  const rd_json *ino = rd_json_get(st, "inode");
  double inode = ino && ino->type == RD_JSON_NUMBER ? ino->num : 0;
  free(st);
  free(body);
  snprintf(path, sizeof(path), "%s/file?filename=%s&lines=%ld&end=%llu", L->api, name, L->tail,
           (unsigned long long)off);
  if (logs_get(L, path, &body, &len) != 0) return 1;
  fwrite(body, 1, len, stdout);
  fflush(stdout);
  free(body);
  for (;;) {
    usleep(500000);
    snprintf(path, sizeof(path), "%s/file?filename=%s&stat=1", L->api, name);
    if (logs_get(L, path, &body, &len) != 0) return 1;
    st = rd_json_parse(body, len, NULL, 0);
    sz = st ? rd_json_get(st, "size") : NULL;
    ino = st ? rd_json_get(st, "inode") : NULL;
    uint64_t size = sz && sz->type == RD_JSON_NUMBER ? (uint64_t)sz->num : off;
    double now_ino = ino && ino->type == RD_JSON_NUMBER ? ino->num : inode;
    free(st);
    free(body);
    if (size < off || now_ino != inode) off = 0;   /* rotated: the new file from its start */
    inode = now_ino;
    if (size == off) continue;
    snprintf(path, sizeof(path), "%s/file?filename=%s&lines=-1&offset=%llu&end=%llu", L->api, name,
             (unsigned long long)off, (unsigned long long)size);
    if (logs_get(L, path, &body, &len) != 0) return 1;
    fwrite(body, 1, len, stdout);
    fflush(stdout);
    free(body);
    off += len;
  }
}

/* raydist logs [cluster] [GLOB]: each chosen node's files matching GLOB
 * by category; one file alone (on one node) is printed instead. */
static int logs_cluster(logs_cli *L, const rd_gcs_node *nodes, size_t n, const char *glob) {
  char g[600], path[800], one[300] = "", one_node[80] = "";
  int files = 0, failed = 0;
  rd__url_encode(g, sizeof(g), glob ? glob : "*");
  rd__mbuf shown = {0};
  for (size_t i = 0; i < n; i++) {
    const rd_gcs_node *x = &nodes[i];
    if (x->state != RD_GCS_NODE_ALIVE) continue;
    if (L->node_id[0] && strcasecmp(L->node_id, x->node_id) != 0) continue;
    if (!L->node_id[0] && L->node_ip[0] && strcmp(L->node_ip, x->ip) != 0) continue;
    logs_cli one_l = *L;
    snprintf(one_l.node_id, sizeof(one_l.node_id), "%s", x->node_id);
    char *body = NULL;
    size_t len = 0;
    snprintf(path, sizeof(path), "/api/v0/logs?glob=%s", g);
    if (logs_get(&one_l, path, &body, &len) != 0) {
      failed = 1;
      continue;
    }
    rd_json *root = rd_json_parse(body, len, NULL, 0);
    const rd_json *data = root ? rd_json_get(root, "data") : NULL;
    const rd_json *res = data ? rd_json_get(data, "result") : NULL;
    rd__mbuf_printf(&shown, "node %u (%s, node_id %s):\n", x->index, x->ip, x->node_id);
    for (const rd_json *cat = res && res->type == RD_JSON_OBJECT ? res->child : NULL; cat; cat = cat->next) {
      rd__mbuf_printf(&shown, "  %s:\n", cat->key);
      for (const rd_json *f = cat->type == RD_JSON_ARRAY ? cat->child : NULL; f; f = f->next) {
        if (f->type != RD_JSON_STRING) continue;
        rd__mbuf_printf(&shown, "    %s\n", f->str);
        if (!files++) {
          snprintf(one, sizeof(one), "%s", f->str);
          snprintf(one_node, sizeof(one_node), "%s", x->node_id);
        }
      }
    }
    free(root);
    free(body);
  }
  if (files == 1 && glob) {   /* a unique match: the file itself, as ray logs does */
    free(shown.p);
    snprintf(L->node_id, sizeof(L->node_id), "%s", one_node);
    char who[700];
    rd__url_encode(g, sizeof(g), one);
    snprintf(who, sizeof(who), "filename=%s", g);
    return logs_print(L, who) || failed;
  }
  if (shown.p) fputs(shown.p, stdout);
  if (!files && !failed) printf("no log files%s%s%s\n", glob ? " match '" : "", glob ? glob : "", glob ? "'" : "");
  free(shown.p);
  return failed;
}

/* logs_print asks the embedded node x (its own logs API and token). */
static void logs_ask(logs_cli *L, const local_node *x) {
  snprintf(L->ip, sizeof(L->ip), "%s", x->ip);
  L->port = x->port;
  snprintf(L->token, sizeof(L->token), "%s", x->token);
}

/* This machine's ended embedded sessions, kept for their workers' files
 * (rd__session_end: `ended`, logs/, task_lines.json), newest first. */
typedef struct ended_session {
  char dir[512], exe[400];
  int driver_pid;
  uint64_t end_ms;
} ended_session;

static int ended_newer(const void *a, const void *b) {
  const ended_session *x = a, *y = b;
  return x->end_ms < y->end_ms ? 1 : x->end_ms > y->end_ms ? -1 : 0;
}

/* An ended session (its `ended` file). */
static int take_ended(const char *dir, void *slot) {
  ended_session *x = slot;
  char f[600], num[32];
  snprintf(x->dir, sizeof(x->dir), "%s", dir);
  snprintf(f, sizeof(f), "%s/ended", dir);
  if (rd__read_kv(f, "end_ms", num, sizeof(num)) != 0) return 0;   /* running, or going */
  x->end_ms = strtoull(num, NULL, 10);
  x->driver_pid = rd__read_kv(f, "driver_pid", num, sizeof(num)) == 0 ? atoi(num) : 0;
  if (rd__read_kv(f, "exe", x->exe, sizeof(x->exe)) != 0) x->exe[0] = 0;
  return 1;
}

static size_t ended_sessions(ended_session **out) {
  size_t n = scan_sessions(sizeof(**out), take_ended, (void **)out);
  if (n > 1) qsort(*out, n, sizeof(**out), ended_newer);
  return n;
}

/* Prints bytes [off, end) of path (end UINT64_MAX: to its end), only its
 * last `tail` lines when tail >= 0, as a node's logs API gives them
 * (rd__log_text).  0, or 1 with why printed. */
static int print_kept(const char *path, uint64_t off, uint64_t end, long tail) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  char *text = NULL, why[800];
  size_t len = 0;
  int code = fd < 0 || fstat(fd, &st) != 0 ? -1 : rd__log_text(fd, (uint64_t)st.st_size, off, end, tail, path, &text,
                                                                &len, why, sizeof(why));
  if (code < 0) snprintf(why, sizeof(why), "cannot read %s: %s", path, strerror(errno));
  if (fd >= 0) close(fd);
  if (code) fprintf(stderr, "raydist logs: %s\n", why);
  else fwrite(text, 1, len, stdout);
  free(text);
  return code != 0;
}

/* raydist logs worker --pid P | task --id T --local, of an ended session:
 * the newest one that has it.  0 when printed, 1 on an error, -1 when none
 * has it. */
static int logs_ended(const logs_cli *L, const ended_session *v, size_t n, long pid, const char *task) {
  const char *sfx = L->err ? "err" : "out";
  for (size_t i = 0; i < n; i++) {
    char path[1200];
    if (pid) {
      char pat[96], logs[600];
      snprintf(pat, sizeof(pat), "worker-*-*-%ld.%s", pid, sfx);
      snprintf(logs, sizeof(logs), "%s/logs", v[i].dir);
      DIR *d = opendir(logs);
      struct dirent *e;
      int r = -1;
      while (d && r < 0 && (e = readdir(d)))
        if (!fnmatch(pat, e->d_name, 0)) {
          snprintf(path, sizeof(path), "%s/%s", logs, e->d_name);
          r = print_kept(path, 0, UINT64_MAX, L->tail);
        }
      if (d) closedir(d);
      if (r >= 0) return r;
      continue;
    }
    snprintf(path, sizeof(path), "%s/task_lines.json", v[i].dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    char *text = NULL, why[800];
    size_t len = 0;
    if (fd < 0) continue;
    if (fstat(fd, &st) != 0 || rd__log_text(fd, (uint64_t)st.st_size, 0, UINT64_MAX, -1, path, &text, &len, why,
                                             sizeof(why)) != 0)
      text = NULL;   /* unreadable: as if it had no ranges */
    close(fd);
    rd_json *root = text ? rd_json_parse(text, len, NULL, 0) : NULL;
    free(text);
    const rd_json *ts = rd_json_get(root, "tasks");
    for (const rd_json *t = ts && ts->type == RD_JSON_ARRAY ? ts->child : NULL; t; t = t->next) {   /* newest first */
      const rd_json *id = rd_json_get(t, "task_id");
      if (!id || id->type != RD_JSON_STRING || strcasecmp(id->str, task) != 0) continue;
      char k[16];
      snprintf(k, sizeof(k), "%s_file", sfx);
      const rd_json *file = rd_json_get(t, k);
      if (!file || file->type != RD_JSON_STRING || strchr(file->str, '/')) {
        fprintf(stderr, "raydist logs: task %s printed nothing to std%s\n", task, sfx);
        free(root);
        return 1;
      }
      snprintf(path, sizeof(path), "%s/logs/%s", v[i].dir, file->str);
      snprintf(k, sizeof(k), "%s_start", sfx);
      uint64_t off = (uint64_t)jnum(t, k);
      snprintf(k, sizeof(k), "%s_end", sfx);
      const rd_json *end = rd_json_get(t, k);   /* none: to the end of the file (its last task) */
      int r = end && (uint64_t)end->num <= off ? 0
                                               : print_kept(path, off, end ? (uint64_t)end->num : UINT64_MAX, L->tail);
      free(root);
      return r;
    }
    free(root);
  }
  return -1;
}

static int name_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The files of an ended session's logs/ that match glob, sorted, after
 * its heading, into shown (brief: how many, on the heading's line); how
 * many (the first's path into one when *files was 0). */
static size_t ended_list(const ended_session *x, const char *glob, int brief, rd__mbuf *shown, size_t *files,
                         char *one, size_t olen) {
  char logs[600];
  snprintf(logs, sizeof(logs), "%s/logs", x->dir);
  DIR *d = opendir(logs);
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    if (e->d_name[0] == '.' || fnmatch(glob ? glob : "*", e->d_name, 0) != 0) continue;
    if (n == cap) {
      char **w = realloc(names, (cap = cap ? 2 * cap : 16) * sizeof(*names));
      if (!w) break;
      names = w;
    }
    if (!(names[n] = strdup(e->d_name))) break;
    n++;
  }
  if (d) closedir(d);
  if (n > 1) qsort(names, n, sizeof(*names), name_cmp);
  uint64_t now = rd__wall_ms();
  rd__mbuf_printf(shown, "ended session %s (driver pid %d, %s; ended %.0f s ago):", x->dir, x->driver_pid,
                  x->exe[0] ? x->exe : "?", x->end_ms < now ? (now - x->end_ms) / 1e3 : 0.0);
  if (brief) rd__mbuf_printf(shown, " %zu files\n", n);
  else rd__mbuf_printf(shown, "\n");
  for (size_t i = 0; i < n; i++) {
    if (!brief) rd__mbuf_printf(shown, "  %s\n", names[i]);
    if (!(*files)++) snprintf(one, olen, "%s/%s", logs, names[i]);
    free(names[i]);
  }
  free(names);
  return n;
}

/* raydist logs --local (or without a cluster on this machine): the files
 * of this machine's embedded nodes, each asked with its own token on its
 * own logs API (GET /api/logs?glob=G, /api/logs/file?...), then those of
 * its ended sessions kept on disk (rd__session_end): `who` (pid=P, task=ID;
 * P and ID given as pid and task too) printed from the running node that
 * has it, else from the newest ended session that has it; or every node's
 * and ended session's files matching glob (one file alone printed
 * instead). */
static int logs_local(logs_cli *L, const char *who, const char *glob, long pid, const char *task) {
  rd__sessions_tidy();   /* a node killed (the OOM killer): its session ended here, listed with the others */
  local_node *v = NULL;
  size_t n = local_nodes(&v);
  ended_session *ev = NULL;
  size_t ne = ended_sessions(&ev);
  L->api = "/api/logs";
  L->node_id[0] = L->node_ip[0] = 0;
  char g[600], path[800], one[1200] = "";
  size_t files = 0, one_at = 0;
  int one_ended = 0;
  rd__mbuf shown = {0};
  rd__url_encode(g, sizeof(g), glob ? glob : "*");
  for (size_t i = 0; i < n; i++) {
    char *body = NULL, why[300];
    size_t len = 0;
    if (who)
      snprintf(path, sizeof(path), "/api/logs/file?%s&suffix=%s&stat=1", who, L->err ? "err" : "out");
    else
      snprintf(path, sizeof(path), "/api/logs?glob=%s", g);
    if (rd__http_get(v[i].ip, v[i].port, path, v[i].token, 15000, 4u << 20, &body, &len, why, sizeof(why)) != 0) {
      free(body);
      continue;   /* not this node's (404), or a node going away */
    }
    if (who) {   /* this node has it */
      free(body);
      logs_ask(L, &v[i]);
      free(v);
      free(ev);
      return logs_print(L, who);
    }
    rd_json *root = rd_json_parse(body, len, NULL, 0);
    const rd_json *fl = root ? rd_json_get(root, "files") : NULL;
    rd__mbuf_printf(&shown, "embedded node %s:\n", v[i].dir);
    for (const rd_json *f = fl && fl->type == RD_JSON_ARRAY ? fl->child : NULL; f; f = f->next) {
      if (f->type != RD_JSON_STRING) continue;
      rd__mbuf_printf(&shown, "  %s\n", f->str);
      if (!files++) snprintf(one, sizeof(one), "%s", f->str), one_at = i;
    }
    free(root);
    free(body);
  }
  for (size_t i = 0; !who && i < ne; i++) {
    size_t before = files;
    ended_list(&ev[i], glob, !glob && i > 0, &shown, &files, one, sizeof(one));   /* the older in a line each */
    if (!before && files) one_ended = 1;
  }
  int r = 0;
  if (who) {
    if ((r = logs_ended(L, ev, ne, pid, task)) < 0) {
      fprintf(stderr, "raydist logs: no embedded node on this machine, running or ended, has %s\n", who);
      r = 1;
    } else if (!r && L->follow) {
      fprintf(stderr, "raydist logs: (from an ended session: nothing more comes)\n");
    }
  } else if (files == 1 && glob && one_ended) {   /* a unique match: the file itself */
    r = print_kept(one, 0, UINT64_MAX, L->tail);
  } else if (files == 1 && glob) {
    char who1[700];
    rd__url_encode(g, sizeof(g), one);
    snprintf(who1, sizeof(who1), "filename=%s", g);
    logs_ask(L, &v[one_at]);
    r = logs_print(L, who1);
  } else if (!n && !ne) {
    fprintf(stderr, "raydist logs: no cluster and no embedded node, running or ended, on this machine\n");
    r = 1;
  } else {
    if (shown.p) fputs(shown.p, stdout);
    if (!files) printf("no log files%s%s%s\n", glob ? " match '" : "", glob ? glob : "", glob ? "'" : "");
  }
  free(shown.p);
  free(v);
  free(ev);
  return r;
}

/* An embedded node's actors (/api/actors) searched for one id (each_local's
 * show for local_actor_pid): 1 when this node has it. */
typedef struct actor_hunt {
  const char *id;
  long pid;
  size_t found;
  char state[32];
  rd__mbuf where;
} actor_hunt;

static int show_actor(const local_node *x, const char *body, size_t len, void *arg) {
  actor_hunt *h = arg;
  rd_json *root = rd_json_parse(body, len, NULL, 0);
  const rd_json *l = rd_json_get(root, "list");
  int has = 0;
  for (const rd_json *a = l && l->type == RD_JSON_ARRAY ? l->child : NULL; a && !has; a = a->next) {
    const rd_json *aid = rd_json_get(a, "id"), *st = rd_json_get(a, "state");
    if (!aid || aid->type != RD_JSON_STRING || strcasecmp(aid->str, h->id) != 0) continue;
    h->pid = (long)jnum(a, "pid");
    if (st && st->type == RD_JSON_STRING) snprintf(h->state, sizeof(h->state), "%s", st->str);
    rd__mbuf_printf(&h->where, "%s%s (worker pid %ld)", h->found++ ? ", " : "", x->dir, h->pid);
    has = 1;
  }
  free(root);
  return has;
}

/* raydist logs actor --id ID --local: the pid of the actor's worker now,
 * from the running embedded node that has the actor; 0 with why printed
 * when none has it alive, or when several embedded nodes have an actor of
 * that id (an embedded node numbers its actors from 1: the ids of two
 * drivers' clusters meet). */
static long local_actor_pid(const char *id) {
  actor_hunt h = {.id = id};
  char none[200];
  snprintf(none, sizeof(none), "no running embedded node on this machine has actor %.64s (an ended session keeps no "
                               "actors: raydist logs worker --pid P)", id);
  if (each_local("logs actor", "/api/actors?limit=10000", show_actor, &h, none) != 0) return 0;
  if (h.found > 1)
    fprintf(stderr, "raydist logs actor: %zu embedded nodes of this machine have an actor %s: %s; use raydist logs "
                    "worker --pid P\n", h.found, id, h.where.p ? h.where.p : "");
  else if (h.pid <= 0)
    fprintf(stderr, "raydist logs actor: the actor has no worker now: %s\n", h.state[0] ? h.state : "?");
  free(h.where.p);
  return h.found == 1 ? h.pid : 0;
}

int rd__cli_logs(int argc, char **argv) {
  const char *address = getenv("RAYDIST_ADDRESS"), *token = getenv("RAYDIST_TOKEN"), *id = NULL, *pid = NULL;
  static const char usage[] =
      "usage: raydist logs [cluster] [GLOB] [--node-ip IP | --node-id ID]   the log files of the nodes (or of one),\n"
      "                                                                     a single match printed\n"
      "       raydist logs actor --id ACTOR_ID                              an actor's worker's stdout\n"
      "       raydist logs task --id TASK_ID                                the stdout of the worker a task ran on\n"
      "       raydist logs worker --pid PID (--node-ip IP | --node-id ID)   a worker's stdout\n"
      "  options: [--err (stderr)] [--tail N (its last N lines; default 1000, -1 all)] [--follow]\n"
      "           [--address IP:PORT] [--token T]\n"
      "           [--local (this machine's embedded clusters, running or ended (RAYDIST_SESSIONS_KEPT): files,\n"
      "            task, actor (running) and worker --pid without the node; the default when no cluster is named and\n"
      "            none runs here)]\n";
  logs_cli L = {.tail = 1000};
  int a = 2;
  const char *kind = "cluster", *glob = NULL;
  if (a < argc && (!strcmp(argv[a], "cluster") || !strcmp(argv[a], "actor") || !strcmp(argv[a], "task") ||
                   !strcmp(argv[a], "worker")))
    kind = argv[a++];
  static const struct option lo[] = {{"address", 1, 0, 'a'}, {"token", 1, 0, 't'},   {"node-ip", 1, 0, 'i'},
                                     {"node-id", 1, 0, 'n'}, {"id", 1, 0, 'd'},      {"pid", 1, 0, 'p'},
                                     {"tail", 1, 0, 'l'},    {"err", 0, 0, 'e'},     {"follow", 0, 0, 'f'},
                                     {"local", 0, 0, 'L'},   {"help", 0, 0, 'h'},    {0, 0, 0, 0}};
  int ch, local = 0;
  optind = a;
  while ((ch = getopt_long(argc, argv, "f", lo, NULL)) != -1) {
    char *end = NULL;
    if (ch == 'a') address = optarg;
    else if (ch == 't') token = optarg;
    else if (ch == 'i') snprintf(L.node_ip, sizeof(L.node_ip), "%s", optarg);
    else if (ch == 'n') snprintf(L.node_id, sizeof(L.node_id), "%s", optarg);
    else if (ch == 'd') id = optarg;
    else if (ch == 'p') pid = optarg;
    else if (ch == 'e') L.err = 1;
    else if (ch == 'f') L.follow = 1;
    else if (ch == 'L') local = 1;
    else if (ch == 'l' && (L.tail = strtol(optarg, &end, 10), *optarg && !*end && L.tail >= -1)) continue;
    else {
      fprintf(stderr, "%s", usage);
      return ch == 'h' ? 0 : 2;
    }
  }
  if (optind < argc && !strcmp(kind, "cluster")) glob = argv[optind++];
  if (optind < argc) {
    fprintf(stderr, "raydist logs: unexpected '%s'\n%s", argv[optind], usage);
    return 2;
  }
  int actor = !strcmp(kind, "actor"), task = !strcmp(kind, "task"), worker = !strcmp(kind, "worker");
  local = use_local(local, address);
  if (local && (L.node_ip[0] || L.node_id[0])) {
    fprintf(stderr, "raydist logs --local: an embedded cluster has one node: no --node-ip or --node-id\n%s", usage);
    return 2;
  }
  if (((actor || task) && !id) || (worker && (!pid || (!local && !L.node_ip[0] && !L.node_id[0]))) ||
      (!actor && !task && id) || (!worker && pid)) {
    fprintf(stderr, "raydist logs %s: %s\n%s", kind,
            actor || task ? "--id is needed"
            : worker      ? (local ? "--pid is needed" : "--pid and the node (--node-ip or --node-id) are needed")
                          : "--id and --pid are for actor, task and worker",
            usage);
    return 2;
  }
  char who[300];
  long wpid = 0;
  if (actor || task) {
    char e[200];
    rd__url_encode(e, sizeof(e), id);   /* a node's own API takes task=, the state API task_id= */
    snprintf(who, sizeof(who), "%s=%s", actor ? "actor_id" : local ? "task" : "task_id", e);
  } else if (worker) {
    char *end = NULL;
    long p = strtol(pid, &end, 10);
    if (!*pid || *end || p <= 0) {
      fprintf(stderr, "raydist logs worker: --pid takes a process id, not '%s'\n", pid);
      return 2;
    }
    snprintf(who, sizeof(who), "pid=%ld", p);   /* on an embedded cluster its pid alone names it */
    wpid = p;
  }
  if (local && actor) {   /* its worker's pid, from the running embedded node that has it */
    if ((wpid = local_actor_pid(id)) <= 0) return 1;
    snprintf(who, sizeof(who), "pid=%ld", wpid);
  }
  if (local) return logs_local(&L, task || worker || actor ? who : NULL, glob, wpid, task ? id : NULL);
  char abuf[160];
  rd_gcs_node *nodes = NULL;
  size_t n = 0;
  if (cli_nodes("logs", address, token, abuf, sizeof(abuf), &nodes, &n) != 0) return 1;
  if (cli_http_token("logs", token, abuf, L.token, sizeof(L.token)) != 0) {
    free(nodes);
    return 1;
  }
  L.api = "/api/v0/logs";
  for (size_t i = 0; i < n && !L.port; i++)   /* any live node's state API finds the files */
    if (nodes[i].state == RD_GCS_NODE_ALIVE && nodes[i].metrics_port > 0) {
      snprintf(L.ip, sizeof(L.ip), "%s", nodes[i].ip);
      L.port = nodes[i].metrics_port;
    }
  if (!L.port) {
    fprintf(stderr, "raydist logs: no live node with an HTTP endpoint in the cluster at %s\n", abuf);
    free(nodes);
    return 1;
  }
  int r = actor || task || worker ? logs_print(&L, who) : logs_cluster(&L, nodes, n, glob);
  free(nodes);
  return r;
}

/* raydist stack --local: an embedded node's stacks (with --pid, *arg,
 * only the node that has the process shows them). */
static int show_stack(const local_node *x, const char *body, size_t len, void *arg) {
  if (*(long *)arg && !len) return 0;
  printf("embedded node %s:\n%s", x->dir, len ? "" : "  no drivers or workers\n");
  fwrite(body, 1, len, stdout);
  return 1;
}

/* raydist stack: every live node (or the one at --node-ip) asked at once
 * for its drivers' and workers' stacks (GET /api/stack, the cluster token),
 * printed node by node; with --pid only the node that has that process
 * answers (the others say 404). */
int rd__cli_stack(int argc, char **argv) {
  const char *address = getenv("RAYDIST_ADDRESS"), *token = getenv("RAYDIST_TOKEN"), *node_ip = NULL;
  long pid = 0;
  static const char usage[] =
      "usage: raydist stack [--pid P] [--node-ip IP] [--address IP:PORT] [--token T] [--local]\n"
      "       each thread's stack of every driver and worker of the cluster's live nodes (or of process P, or of\n"
      "       the node at IP), as each writes it when its node signals it (signal SIGRTMIN+7); with --local, or\n"
      "       when no cluster is named and none runs here, those of this machine's embedded clusters\n";
  static const struct option lo[] = {{"address", 1, 0, 'a'}, {"token", 1, 0, 't'}, {"pid", 1, 0, 'p'},
                                     {"node-ip", 1, 0, 'i'}, {"local", 0, 0, 'l'}, {"help", 0, 0, 'h'},
                                     {0, 0, 0, 0}};
  int ch, local = 0;
  optind = 2;
  while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
    char *end = NULL;
    if (ch == 'a') address = optarg;
    else if (ch == 't') token = optarg;
    else if (ch == 'i') node_ip = optarg;
    else if (ch == 'l') local = 1;
    else if (ch == 'p' && (pid = strtol(optarg, &end, 10)) > 0 && pid <= 0x7fffffff && !*end) continue;
    else {
      fputs(usage, ch == 'h' ? stdout : stderr);
      return ch == 'h' ? 0 : 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "raydist stack: unexpected '%s'\n%s", argv[optind], usage);
    return 2;
  }
  char abuf[160], tok[256], path[64];
  rd_gcs_node *nodes = NULL;
  size_t n = 0, k = 0;
  snprintf(path, sizeof(path), pid ? "/api/stack?pid=%ld" : "/api/stack", pid);
  if (use_local(local, address)) {   /* this machine's embedded nodes */
    char none[96];
    snprintf(none, sizeof(none), "no driver or worker has pid %ld on this machine", pid);
    return each_local("stack", path, show_stack, &pid, pid ? none : NULL);
  }
  if (cli_nodes("stack", address, token, abuf, sizeof(abuf), &nodes, &n) != 0) return 1;
  if (cli_http_token("stack", token, abuf, tok, sizeof(tok)) != 0) {
    free(nodes);
    return 1;
  }
  rd__http_fetch *f = calloc(n ? n : 1, sizeof(*f));
  const rd_gcs_node **of = calloc(n ? n : 1, sizeof(*of));
  if (!f || !of) {
    fprintf(stderr, "raydist stack: out of memory\n");
    free(f), free(of), free(nodes);
    return 1;
  }
  for (size_t i = 0; i < n; i++) {
    const rd_gcs_node *x = &nodes[i];
    if (x->state != RD_GCS_NODE_ALIVE || (node_ip && strcmp(x->ip, node_ip) != 0)) continue;
    if (x->metrics_port <= 0) {
      printf("node %u (%s): no HTTP endpoint (started with --metrics-port -1)\n", x->index, x->ip);
      continue;
    }
    f[k] = (rd__http_fetch){.ip = x->ip, .path = path, .port = x->metrics_port};
    of[k++] = x;
  }
  rd__http_get_all(f, k, tok, 15000, (size_t)64 << 20);
  int failed = 0, found = 0;
  for (size_t i = 0; i < k; i++) {
    if (f[i].rc == 0) {
      found = 1;
      if (!pid || f[i].len) printf("node %u (%s):\n%s%s", of[i]->index, of[i]->ip, f[i].len ? "" : "  no drivers or workers\n",
                                   f[i].body ? f[i].body : "");
    } else if (!(pid && f[i].status == 404)) {
      printf("node %u (%s): %s\n", of[i]->index, of[i]->ip, f[i].why);
      failed = 1;
    }
    free(f[i].body);
  }
  if (!k) fprintf(stderr, "raydist stack: no live node%s%s in the cluster at %s\n", node_ip ? " at " : "",
                  node_ip ? node_ip : "", abuf), failed = 1;
  else if (pid && !found && !failed)
    fprintf(stderr, "raydist stack: no driver or worker has pid %ld on %s\n", pid, node_ip ? node_ip : "any live node"),
        failed = 1;
  free(f);
  free(of);
  free(nodes);
  return failed;
}
