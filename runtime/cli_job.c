/* runtime/cli_job.c - `raydist job`: drivers run detached on a node, their
 * output kept (Ray's job submission).
 *
 *   raydist job submit [--name N] [--env K=V]... [--working-dir DIR] [--num-cpus N] [--num-gpus N]
 *                      [--memory BYTES] [--resources a=1,b=2] [--follow] [where] -- PROGRAM [ARGS...]
 *   raydist job list [--all] [where]
 *   raydist job status ID [where]
 *   raydist job logs ID [--follow] [where]
 *   raydist job wait ID [--timeout S] [where]
 *   raydist job stop ID [--timeout S] [where]
 *   raydist job delete ID [where]
 *
 * where: a node of this machine (--node-ip, --session), or --address for
 * the cluster's node from any machine: the program goes up to the GCS code
 * table and the node runs these same commands for us (job_link.c), over a
 * link opened as a tool (LinkHello.tool, MSG_LINK_JOB).
 *
 * A job lives in <node session>/jobs/<id>/: `info` (name, pid, kernel start
 * time, start, command), `log` (the program's stdout and stderr, workers'
 * output included through log_to_driver), `status` once it ended (exit= or
 * signal=, end=), `stopped` when `job stop` ended it.  `submit` forks a
 * keeper that starts a new session (setsid), runs the program in it with
 * RAYDIST_ADDRESS and RAYDIST_NODE_IP naming the node, waits for it and
 * writes `status`; so a job outlives the shell that submitted it, and
 * `raydist stop` ends the jobs of the sessions it removes. */
#include <arpa/inet.h>
#include <dirent.h>
#include <ftw.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_cluster.h"
#include "common.h"
#include "conn.h"
#include "gcs_client.h"
#include "job_log.h"
#include "log.h"
#include "raydist.h"

#define JOB_MAX 100000

static double wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define NODES_MAX 64   /* node sessions of one machine looked at */

/* The node session directories of this machine ("node-IP") into names (at
 * most max), the session root into root; how many. */
static int node_sessions(char root[200], char (*names)[256], int max) {
  rd__session_root(root, 200);
  DIR *d = opendir(root);
  struct dirent *e;
  int n = 0;
  while (d && n < max && (e = readdir(d)))
    if (!strncmp(e->d_name, "node-", 5)) snprintf(names[n++], 256, "%s", e->d_name);
  if (d) closedir(d);
  return n;
}

/* The session directory of the node on `ip`, or of the only node (or the
 * head) of this machine: 0, or -1 with a message. */
static int node_dir(const char *ip, char *out, size_t len) {
  char root[200];
  rd__session_root(root, sizeof(root));
  if (ip) {
    snprintf(out, len, "%.200s/node-%.64s", root, ip);
    struct stat st;
    if (stat(out, &st) == 0 && S_ISDIR(st.st_mode)) return 0;
    fprintf(stderr, "raydist job: no node on %s runs on this machine (raydist start first)\n", ip);
    return -1;
  }
  char names[NODES_MAX][256];
  int n = node_sessions(root, names, NODES_MAX), head = -1;
  for (int i = 0; i < n; i++) {
    char f[700], h[8] = "0";
    snprintf(f, sizeof(f), "%.200s/%.255s/cluster", root, names[i]);
    if (rd__read_kv(f, "head", h, sizeof(h)) == 0 && h[0] == '1') head = i;
  }
  if (n == 0) {
    fprintf(stderr, "raydist job: no node runs on this machine (raydist start first)\n");
    return -1;
  }
  if (n > 1 && head < 0) {
    fprintf(stderr, "raydist job: %d nodes run on this machine: name one with --node-ip\n", n);
    return -1;
  }
  snprintf(out, len, "%.200s/%.255s", root, names[n == 1 ? 0 : head]);
  return 0;
}

typedef struct job {
  int id;
  char name[128];
  int pid;
  unsigned long long start_ticks;
  int keeper;
  unsigned long long keeper_ticks;
  double start, end;
  char cmd[1024];
  char error[64];           /* status error=: why it never started ("" none) */
  char res[160];            /* info resources=: what its driver holds while it runs ("" none) */
  char there[96];           /* state_there: a mirror's job waits on its node ("PENDING (...) on IP"; "" none) */
  int ended, status, sig, stopped;
} job;

static int job_read(const char *dir, int id, job *j) {
  memset(j, 0, sizeof(*j));
  j->id = id;
  char f[1200], v[1024];
  snprintf(f, sizeof(f), "%s/jobs/%d/info", dir, id);
  if (rd__read_kv(f, "pid", v, sizeof(v)) != 0) return -1;
  j->pid = atoi(v);
  if (rd__read_kv(f, "ticks", v, sizeof(v)) == 0) j->start_ticks = strtoull(v, NULL, 10);
  if (rd__read_kv(f, "keeper", v, sizeof(v)) == 0) j->keeper = atoi(v);
  if (rd__read_kv(f, "keeper_ticks", v, sizeof(v)) == 0) j->keeper_ticks = strtoull(v, NULL, 10);
  if (rd__read_kv(f, "start", v, sizeof(v)) == 0) j->start = atof(v);
  (void)rd__read_kv(f, "name", j->name, sizeof(j->name));
  (void)rd__read_kv(f, "cmd", j->cmd, sizeof(j->cmd));
  (void)rd__read_kv(f, "resources", j->res, sizeof(j->res));
  snprintf(f, sizeof(f), "%s/jobs/%d/status", dir, id);
  if (rd__read_kv(f, "end", v, sizeof(v)) == 0) {
    j->ended = 1;
    j->end = atof(v);
    if (rd__read_kv(f, "exit", v, sizeof(v)) == 0) j->status = atoi(v);
    if (rd__read_kv(f, "signal", v, sizeof(v)) == 0) j->sig = atoi(v);
    (void)rd__read_kv(f, "error", j->error, sizeof(j->error));
  }
  snprintf(f, sizeof(f), "%s/jobs/%d/stopped", dir, id);
  j->stopped = access(f, F_OK) == 0;
  snprintf(f, sizeof(f), "%s/jobs/%d/state_there", dir, id);
  if (!j->ended) (void)rd__read_line(f, j->there, sizeof(j->there));
  /* no status yet: ended all the same if its keeper (which writes status)
   * is gone, killed, and so is the program */
  if (!j->ended) {
    char st, kst;
    int prog = j->pid > 0 && rd__proc_start_time(j->pid, &st) == j->start_ticks && st != 'Z';
    int keeper = j->keeper > 0 && rd__proc_start_time(j->keeper, &kst) == j->keeper_ticks && kst != 'Z';
    if (!prog && !keeper) {
      j->ended = 1;
      j->sig = -1;   /* unknown: its keeper was killed */
    }
  }
  return 0;
}

static const char *job_state(const job *j, char *buf, size_t len) {
  if (!j->ended && j->pid > 0 && j->there[0]) {   /* a mirror (--mirror) whose job waits on its node */
    snprintf(buf, len, "%.60s", j->there);
    return buf;
  }
  if (!j->ended && j->pid > 0) return "RUNNING";
  if (!j->ended) {   /* pid 0: its keeper waits for its resources */
    snprintf(buf, len, "PENDING (waits for %.40s)", j->res);
    return buf;
  }
  if (j->stopped) return "STOPPED";
  if (j->error[0]) snprintf(buf, len, "FAILED (%.50s)", j->error);
  else if (j->sig < 0) snprintf(buf, len, "FAILED (its keeper was killed: status unknown)");
  else if (j->sig) snprintf(buf, len, "FAILED (signal %d)", j->sig);
  else if (j->status) snprintf(buf, len, "FAILED (exit %d)", j->status);
  else return "SUCCEEDED";
  return buf;
}

static int parse_id(const char *s) {
  char *end;
  long v = s ? strtol(s, &end, 10) : 0;
  return s && *s && !*end && v > 0 && v <= JOB_MAX ? (int)v : -1;
}

/* Best effort: a reader sees what is there. */
static void write_file(const char *path, const char *text) { (void)rd__write_file(path, text, strlen(text)); }

/* How a submit runs its program beyond argv (the defaults: none of it). */
typedef struct submit_opts {
  const char *exe;          /* run this file, argv[0] only shown (--exe) */
  char **env;               /* NAME=VALUE set for the program (--env) */
  int nenv;
  int in_job_dir;           /* its working directory: the job's (--in-job-dir) */
  const char *wd_tar;       /* a tar unpacked in <job>/wd/, its working directory (--working-dir) */
  const char *wd_zip;       /* the same from a zip (--working-dir-zip: Ray's working_dir packages, job_http.c) */
  const char *res_spec;     /* what its driver holds of the node while it runs ("CPU=1,GPU=1,name=2"), NULL none */
  rd_resources res;         /* res_spec parsed; all zero: nothing held */
  int seek;                 /* --seek-node: a mirror's node is the one its own node names (seek_node) */
  const char *sel;          /* --entrypoint-label-selector: with seek, the labels that node must have */
} submit_opts;

/* RAYDIST_ENV_VARS for a job's program: the names of its --env variables
 * (each once, those a worker's env set may hold), so that a libraydist
 * driver runs its tasks and actors with them too, as Ray's job-level
 * runtime_env env_vars (rd_config.env); unset when none, whatever the
 * submitter had.  In the program's child, before exec. */
static void job_env_names(const submit_opts *so) {
  char *names = rd__env_names("", (const char *const *)so->env, (size_t)so->nenv);
  if (names && *names) setenv("RAYDIST_ENV_VARS", names, 1);
  else unsetenv("RAYDIST_ENV_VARS");
  free(names);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *f) {
  (void)st; (void)f;
  return (flag == FTW_DP ? rmdir(path) : unlink(path)) == 0 ? 0 : -1;
}

/* Runs args[0] (tar, unzip) with args: 0 when it succeeded, or 1 (it says why). */
static int run_tool(char *const args[]) {
  fflush(stdout);
  pid_t p = fork();
  if (p == 0) {
    execvp(args[0], args);
    fprintf(stderr, "raydist job: cannot run %s: %s\n", args[0], strerror(errno));
    _exit(127);
  }
  int st = 0;
  while (p > 0 && waitpid(p, &st, 0) < 0 && errno == EINTR) {
  }
  return p > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

/* A tar of directory dir in a new temporary file (its path into out, the
 * caller removes it): 0, or 1 with a message. */
static int pack_dir(const char *dir, char *out, size_t len) {
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    fprintf(stderr, "raydist job submit: --working-dir %s is not a directory\n", dir);
    return 1;
  }
  const char *tmp = getenv("TMPDIR");
  snprintf(out, len, "%s/raydist-wd-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  int fd = mkstemp(out);
  if (fd < 0) {
    fprintf(stderr, "raydist job submit: cannot make a temporary file %s: %s\n", out, strerror(errno));
    return 1;
  }
  close(fd);
  char *args[] = {"tar", "-C", (char *)dir, "-cf", out, ".", NULL};
  if (run_tool(args) != 0) {
    fprintf(stderr, "raydist job submit: cannot pack the working directory %s\n", dir);
    unlink(out);
    return 1;
  }
  return 0;
}

/* The processes below this one (its children, theirs, ...) but `except`,
 * into out (at most max): how many.  A keeper is a child subreaper, so
 * whatever the program started and left is still below it. */
static int descendants(pid_t except, pid_t *out, int max) {
  enum { PROCS_MAX = 65536 };
  static pid_t pids[PROCS_MAX], ppids[PROCS_MAX];
  int n = 0;
  DIR *d = opendir("/proc");
  struct dirent *e;
  while (d && n < PROCS_MAX && (e = readdir(d))) {
    char *end, path[64], buf[512];
    long pid = strtol(e->d_name, &end, 10);
    if (*end || pid <= 0) continue;
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t k = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    if (fd >= 0) close(fd);
    if (k <= 0) continue;
    buf[k] = 0;
    char *rp = strrchr(buf, ')'), st;   /* the command name may hold spaces */
    int ppid;
    if (!rp || sscanf(rp + 1, " %c %d", &st, &ppid) != 2 || st == 'Z') continue;
    pids[n] = (pid_t)pid;
    ppids[n++] = (pid_t)ppid;
  }
  if (d) closedir(d);
  int m = 0;
  out[m++] = getpid();   /* the tree's root, taken out below */
  for (int grew = 1; grew && m < max;) {
    grew = 0;
    for (int i = 0; i < n && m < max; i++) {
      int below = 0, seen = 0;
      for (int k = 0; k < m; k++) {
        below |= ppids[i] == out[k];
        seen |= pids[i] == out[k];
      }
      if (below && !seen && pids[i] != except) {
        out[m++] = pids[i];
        grew = 1;
      }
    }
  }
  memmove(out, out + 1, (size_t)(m - 1) * sizeof(*out));
  return m - 1;
}

/* A stopped job's program is gone; what it started outside its process
 * group (setsid, setpgid: a daemon) is not: SIGTERM to all of it, SIGKILL
 * to what is left after 5 s, reaped as it goes (the reaper `except`
 * stands down by itself). */
static void end_tree(pid_t except) {
  enum { TREE_MAX = 4096 };
  static pid_t tree[TREE_MAX];
  int n = descendants(except, tree, TREE_MAX);
  if (n == 0) return;
  fprintf(stderr, "raydist job: stopping %d process%s the job started outside its process group\n", n,
          n == 1 ? "" : "es");
  for (int i = 0; i < n; i++) kill(tree[i], SIGTERM);
  for (int t = 0; t < 200; t++) {   /* 5 s, then SIGKILL, 5 s more at most */
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    if ((n = descendants(except, tree, TREE_MAX)) == 0) return;
    if (t == 100)
      for (int i = 0; i < n; i++) kill(tree[i], SIGKILL);
    usleep(50000);
  }
}

/* The keeper's second child, in the program's process group (pgid pg):
 * when the keeper is killed outright (nothing closes the pipe it holds in
 * order: the kernel does), it ends the whole group, SIGTERM and SIGKILL 5 s
 * later, as `job stop` would, where PR_SET_PDEATHSIG reaches the program
 * alone.  It ignores the SIGTERM a stop sends the group.  The write end of
 * its pipe, for the keeper to write one byte to before it exits (the
 * reaper then leaves), or -1 when there is none (no pipe, no fork). */
static int group_reaper(pid_t pg, const sigset_t *mask, pid_t *reaper) {
  setpgid(pg, pg);   /* as the program does itself: the group exists before the reaper joins it */
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return -1;
  pid_t r = fork();
  if (r < 0) {
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  if (r > 0) {
    close(fds[0]);
    *reaper = r;
    return fds[1];
  }
  /* the reaper: only its end of the pipe (and the log as stdout) kept, so
   * that it holds no job pipe open */
  for (int fd = 3; fd < 1024; fd++)
    if (fd != fds[0]) close(fd);
  signal(SIGTERM, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  sigprocmask(SIG_SETMASK, mask, NULL);
  if (setpgid(0, pg) != 0) _exit(0);   /* the program has gone already */
  char c;
  ssize_t n;
  while ((n = read(fds[0], &c, 1)) < 0 && errno == EINTR) {
  }
  if (n == 0 && kill(-pg, SIGTERM) == 0) {   /* the keeper went without a word */
    sleep(5);
    kill(-pg, SIGKILL);   /* what ignored the SIGTERM, and this process, which is in the group */
  }
  _exit(0);
}

/* ---- a job's entrypoint resources, held from its node (job_hold.c) ---- */

typedef struct hold {
  rd__conn conn;            /* to the node as a job's keeper (Hello.role 3); fd -1: none */
  char vis[256];            /* its GPUs, for CUDA_VISIBLE_DEVICES ("" none) */
  int ngpus;
  char node_ip[64];         /* a seek's answer: the node that can hold them */
} hold;

/* A JobHoldReply in f: its status, and the GPUs (or a seek's node) into h
 * when held; why when refused or waiting. */
static int hold_reply(hold *h, const rd__frame *f, char *why, size_t len) {
  Rd__JobHoldReply *r = f->type == RD__MSG_TYPE__MSG_JOB_HOLD_REPLY
                            ? (Rd__JobHoldReply *)rd__frame_unpack(f, &rd__job_hold_reply__descriptor)
                            : NULL;
  if (!r) {
    Rd__Error *e = f->type == RD__MSG_TYPE__MSG_ERROR ? (Rd__Error *)rd__frame_unpack(f, &rd__error__descriptor) : NULL;
    snprintf(why, len, "the node refused the job's keeper: %s", e && e->message ? e->message : "an unexpected answer");
    if (e) protobuf_c_message_free_unpacked(&e->base, NULL);
    return RD_EPROTO;
  }
  int st = r->status;
  if (st == RD_OK) {
    snprintf(h->vis, sizeof(h->vis), "%s", r->visible_devices ? r->visible_devices : "");
    snprintf(h->node_ip, sizeof(h->node_ip), "%s", r->node_ip ? r->node_ip : "");
    h->ngpus = (int)r->n_gpu_ids;
  } else {
    snprintf(why, len, "%s", r->error && *r->error ? r->error : rd_strerror(st));
  }
  protobuf_c_message_free_unpacked(&r->base, NULL);
  return st;
}

/* Connects to the node of session dir as a job's keeper (Hello.role 3):
 * 0 with the node's answer to the Hello in *f (a HelloReply, or an Error
 * saying why not), else why. */
static int keeper_connect(rd__conn *conn, const char *dir, rd__frame *f, char *why, size_t len) {
  char path[800], token[256] = "";
  memset(conn, 0, sizeof(*conn));
  conn->fd = -1;
  snprintf(path, sizeof(path), "%s/token", dir);
  if (rd__read_line(path, token, sizeof(token)) != 0) {
    snprintf(why, len, "cannot read the node's cluster token %s: %s", path, strerror(errno));
    return RD_EAUTH;
  }
  snprintf(path, sizeof(path), "%s/%s", dir, RD_NODE_SOCK);
  struct sockaddr_un a;
  memset(&a, 0, sizeof(a));
  a.sun_family = AF_UNIX;
  int fd = strlen(path) < sizeof(a.sun_path) ? socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0) : -1;
  if (fd >= 0) memcpy(a.sun_path, path, strlen(path) + 1);
  if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
    snprintf(why, len, "cannot reach the node at %s: %s", path, strerror(errno));
    if (fd >= 0) close(fd);
    return RD_ECONN;
  }
  rd__conn_init(conn, fd);
  Rd__Hello hello = RD__HELLO__INIT;
  hello.version = RD_PROTO_VERSION;
  hello.role = 3;   /* a job's keeper */
  hello.pid = getpid();
  hello.token = token;
  int r = rd__conn_send(conn, RD__MSG_TYPE__MSG_HELLO, &hello.base, -1);
  if (r == 0) r = rd__conn_flush_blocking(conn, 10000);
  if (r == 0) r = rd__conn_recv_blocking(conn, f, 10000);
  if (r != 0) snprintf(why, len, "no answer from the node at %s: %s", path, rd_strerror(r));
  if (r == 0 && f->type == RD__MSG_TYPE__MSG_HELLO_REPLY) {
    int sfd = rd__conn_take_fd(conn);   /* the store's segment: not the keeper's business */
    if (sfd >= 0) close(sfd);
  }
  return r;
}

/* Connects to the node of session dir as job id's keeper and asks for
 * res: RD_OK held, RD_EAGAIN waiting (hold_wait), else refused (why).
 * seek: for the node that can hold them, not for them (JobHold.seek). */
static int hold_ask(hold *h, const char *dir, const rd_resources *res, int id, int seek, const char *sel, char *why,
                    size_t len) {
  memset(h, 0, sizeof(*h));
  rd__frame f;
  int r = keeper_connect(&h->conn, dir, &f, why, len);
  if (r != 0) return r;
  if (f.type != RD__MSG_TYPE__MSG_HELLO_REPLY) return hold_reply(h, &f, why, len);   /* says why */
  Rd__JobHold q = RD__JOB_HOLD__INIT;
  rd__res_msg rm;
  rd__res_to_msg(res, &rm);
  q.res = &rm.msg;
  q.job = (uint32_t)id;
  q.seek = seek;
  q.label_selector = (char *)(sel ? sel : "");
  r = rd__conn_send(&h->conn, RD__MSG_TYPE__MSG_JOB_HOLD, &q.base, -1);
  if (r == 0) r = rd__conn_flush_blocking(&h->conn, 10000);
  if (r == 0) r = rd__conn_recv_blocking(&h->conn, &f, 10000);
  if (r != 0) {
    snprintf(why, len, "no answer from the node at %s/%s: %s", dir, RD_NODE_SOCK, rd_strerror(r));
    return r;
  }
  return hold_reply(h, &f, why, len);
}

/* Tells the node of session dir that job id started or ended (state, or
 * NULL: as it reads in the job's files now): a cluster event (JobEvent).
 * Best effort: a node that is gone, or is not in a cluster, records none. */
static void keeper_event(const char *dir, int id, const char *state) {
  job j;
  char buf[128], why[300];
  if (job_read(dir, id, &j) != 0) return;
  rd__conn conn;
  rd__frame f;
  if (keeper_connect(&conn, dir, &f, why, sizeof(why)) == 0 && f.type == RD__MSG_TYPE__MSG_HELLO_REPLY) {
    Rd__JobEvent m = RD__JOB_EVENT__INIT;
    m.job = (uint32_t)id;
    m.name = j.name;
    m.state = (char *)(state ? state : job_state(&j, buf, sizeof(buf)));
    m.pid = j.pid;
    if (rd__conn_send(&conn, RD__MSG_TYPE__MSG_JOB_EVENT, &m.base, -1) == 0) (void)rd__conn_flush_blocking(&conn, 5000);
  }
  rd__conn_close(&conn);
}

/* The job's start told from a thread of its own, so that a node slow to
 * answer (up to the Hello's 10 s) holds up neither the copy of the
 * program's output nor its end; the end's event waits for it (in order). */
typedef struct started_ev {
  const char *dir;
  int id;
} started_ev;

static void *started_thread(void *arg) {
  const started_ev *e = arg;
  keeper_event(e->dir, e->id, "RUNNING");
  return NULL;
}

/* Until a waiting hold is held (RD_OK), the node answers otherwise or goes
 * (why), or the keeper is told to end (RD_ECANCELED, the signal in *sig;
 * sfd, its signal fd, -1: none). */
static int hold_wait(hold *h, int sfd, int *sig, char *why, size_t len) {
  for (;;) {
    rd__frame f;
    int r = rd__conn_next(&h->conn, &f);
    if (r == 1) {
      if ((r = hold_reply(h, &f, why, len)) != RD_EAGAIN) return r;
      continue;
    }
    if (r < 0) {
      snprintf(why, len, "a malformed answer from the node");
      return RD_EPROTO;
    }
    struct pollfd p[2] = {{h->conn.fd, POLLIN, 0}, {sfd, POLLIN, 0}};
    if (poll(p, sfd >= 0 ? 2 : 1, -1) < 0) {
      if (errno == EINTR) continue;
      snprintf(why, len, "poll: %s", strerror(errno));
      return RD_ESYS;
    }
    struct signalfd_siginfo si;
    if (sfd >= 0 && (p[1].revents & POLLIN) && read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si) &&
        si.ssi_signo != SIGCHLD) {
      *sig = (int)si.ssi_signo;
      return RD_ECANCELED;
    }
    if (p[0].revents) {
      r = rd__conn_fill(&h->conn);
      if (r == 0 || (r < 0 && r != RD_EAGAIN)) {
        snprintf(why, len, "node gone before it started");
        return RD_ECONN;
      }
    }
  }
}

/* The job's record (jobs/<id>/info), replaced whole: a reader sees the old
 * one or the new.  pid 0: its program has not started (PENDING). */
static void info_write(const char *jd, const char *name, pid_t pid, double start, char **argv, int argc,
                       const char *res_spec) {
  char st;
  unsigned long long ticks = pid > 0 ? rd__proc_start_time((int)pid, &st) : 0;
  unsigned long long kticks = rd__proc_start_time((int)getpid(), &st);
  char cmd[1024];
  size_t off = 0;
  for (int i = 0; i < argc && off < sizeof(cmd) - 2; i++) {
    int w = snprintf(cmd + off, sizeof(cmd) - off, "%s%s", i ? " " : "", argv[i]);
    if (w < 0) break;
    off += (size_t)w;
  }
  for (char *c = cmd; *c; c++)
    if (*c == '\n') *c = ' ';
  char info[2600], f[900], tmp[900];
  snprintf(info, sizeof(info),
           "name=%s\npid=%d\nticks=%llu\nkeeper=%d\nkeeper_ticks=%llu\nstart=%.3f\nresources=%.150s\ncmd=%s\n",
           name ? name : "", (int)pid, ticks, (int)getpid(), kticks, start, res_spec ? res_spec : "", cmd);
  snprintf(f, sizeof(f), "%s/info", jd);
  snprintf(tmp, sizeof(tmp), "%s/.info", jd);
  write_file(tmp, info);
  if (rename(tmp, f) != 0) write_file(f, info);
}

/* 0 and the new job's id in *id_out, or 1 with a message */
static int job_submit(const char *dir, const char *name, char **argv, int argc, const submit_opts *so, int *id_out) {
  char jobs[700], jd[800], f[900];
  uint64_t rot_max;
  int rot_backups;
  if (rd__log_rotation_conf(&rot_max, &rot_backups) != 0) return 1;   /* said why */
  snprintf(jobs, sizeof(jobs), "%s/jobs", dir);
  mkdir(jobs, 0700);
  int id = 0;
  for (int i = 1; i <= JOB_MAX && !id; i++) {   /* the next free number; mkdir decides races */
    snprintf(jd, sizeof(jd), "%s/%d", jobs, i);
    if (mkdir(jd, 0700) == 0) id = i;
    else if (errno != EEXIST) break;
  }
  if (!id) {
    fprintf(stderr, "raydist job submit: cannot make a job directory under %s: %s\n", jobs, strerror(errno));
    return 1;
  }
  char cfile[700], gcs[256] = "", ip[64] = "";
  snprintf(cfile, sizeof(cfile), "%s/cluster", dir);
  (void)rd__read_kv(cfile, "gcs", gcs, sizeof(gcs));
  (void)rd__read_kv(cfile, "ip", ip, sizeof(ip));
  char log[900], wd[900];
  snprintf(log, sizeof(log), "%s/log", jd);
  snprintf(wd, sizeof(wd), "%s/wd", jd);
  if (so->wd_tar || so->wd_zip) {   /* unpacked before the job starts: a bad archive is this command's error */
    char *targs[] = {"tar", "-C", wd, "--no-same-owner", "-xf", (char *)so->wd_tar, NULL};
    char *zargs[] = {"unzip", "-q", (char *)so->wd_zip, "-d", wd, NULL};
    if (mkdir(wd, 0700) != 0 || run_tool(so->wd_tar ? targs : zargs) != 0) {
      fprintf(stderr, "raydist job submit: cannot unpack the working directory into %s\n", wd);
      (void)nftw(jd, rm_entry, 16, FTW_DEPTH | FTW_PHYS);   /* no job: its number is free again */
      return 1;
    }
  }
  int ready[2];
  if (pipe(ready) != 0) return 1;
  double start = wall_now();   /* before the program runs: a quick one may end before info is written */
  pid_t keeper = fork();
  if (keeper < 0) {
    fprintf(stderr, "raydist job submit: fork: %s\n", strerror(errno));
    return 1;
  }
  if (keeper == 0) {   /* the keeper: a session of its own, the program in it */
    close(ready[0]);
    setsid();
    /* what the program starts and leaves (a daemon: setsid, its parent
     * gone) stays in the keeper's tree, for a stop to end (end_tree) */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    rd_job_log jl;
    int lfd = rd__job_log_open(&jl, jd, rot_max, rot_backups);
    int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
    /* let go of the submitter's stdin, stdout and stderr (a shell's $(...)
     * would wait for the job otherwise): the keeper's go to the log too */
    if (nul >= 0) dup2(nul, 0);
    if (lfd >= 0) {
      dup2(lfd, 1);
      dup2(lfd, 2);
    }
    /* the program writes into a pipe the keeper copies to the log and
     * rotates; without one (no fds left) it writes the log itself */
    int out[2] = {-1, -1}, sfd = -1;
    pid_t self = getpid();
    sigset_t chld, old;   /* read from sfd: the child's end, and being told to end */
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigaddset(&chld, SIGTERM);
    sigaddset(&chld, SIGINT);
    sigaddset(&chld, SIGHUP);
    sigaddset(&chld, SIGUSR1);   /* `job withdraw`: end now if still waiting for its resources */
    sigprocmask(SIG_BLOCK, &chld, &old);
    if (lfd < 0 || pipe2(out, O_CLOEXEC) != 0) out[0] = out[1] = -1;
    if (out[0] >= 0 && (sfd = signalfd(-1, &chld, SFD_CLOEXEC)) < 0) {
      close(out[0]);
      close(out[1]);
      out[0] = out[1] = -1;
    }
    hold h;   /* its entrypoint resources, held while the keeper lives */
    memset(&h, 0, sizeof(h));
    h.conn.fd = -1;
    if (so->res_spec) {
      char why[1400], msg[1500];
      int hr = hold_ask(&h, dir, &so->res, id, 0, NULL, why, sizeof(why));
      if (hr != RD_OK && hr != RD_EAGAIN) {   /* refused: the submit says why, and there is no job */
        snprintf(msg, sizeof(msg), "E%s\n", why);
        if (write(ready[1], msg, strlen(msg)) < 0) { /* the submitter reports it */
        }
        _exit(1);
      }
      if (hr == RD_EAGAIN) {   /* PENDING: the submit returns, the keeper waits for them */
        info_write(jd, name, 0, start, argv, argc, so->res_spec);
        if (write(ready[1], "0\n", 2) < 0) { /* the submitter reports it */
        }
        close(ready[1]);
        ready[1] = -1;
        fprintf(stderr, "raydist job: waiting for %s of the node to be free\n", so->res_spec);
        int sig = 0;
        if ((hr = hold_wait(&h, sfd, &sig, why, sizeof(why))) != RD_OK) {
          if (hr == RD_ECANCELED) {   /* stopped (or withdrawn) before it started */
            if (sig == SIGUSR1) fprintf(stderr, "raydist job: withdrawn before it started (to run on another node)\n");
            snprintf(f, sizeof(f), "%s/stopped", jd);
            snprintf(msg, sizeof(msg), "keeper_signal=%d\n", sig);
            write_file(f, msg);
            snprintf(msg, sizeof(msg), "end=%.3f\n", wall_now());
          } else {
            fprintf(stderr, "raydist job: %s\n", why);
            snprintf(msg, sizeof(msg), "error=%.60s\nend=%.3f\n", why, wall_now());
          }
          snprintf(f, sizeof(f), "%s/status", jd);
          write_file(f, msg);
          if (sig != SIGUSR1) keeper_event(dir, id, NULL);   /* a withdrawn job is no event: it moves */
          _exit(0);
        }
      }
    }
    pid_t p = fork();
    if (p == 0) {
      sigprocmask(SIG_SETMASK, &old, NULL);
      if (h.ngpus) setenv("CUDA_VISIBLE_DEVICES", h.vis, 1);   /* the GPUs it holds */
      /* a killed keeper (SIGKILL: no chance to copy or record) ends the
       * program now, rather than at its next write into the closed pipe */
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != self) _exit(128 + SIGTERM);
      if (out[1] >= 0) {
        dup2(out[1], 1);
        dup2(out[1], 2);
      }
      setpgid(0, 0);   /* a group of its own: `job stop` signals it and what it started */
      if (gcs[0]) setenv("RAYDIST_ADDRESS", gcs, 1);
      if (ip[0]) setenv("RAYDIST_NODE_IP", ip, 1);
      setenv("RAYDIST_JOB_ID", strrchr(jd, '/') + 1, 1);
      setenv("RAYDIST_JOB_DIR", jd, 1);
      for (int i = 0; i < so->nenv; i++) putenv(so->env[i]);
      job_env_names(so);   /* ... and for the tasks and actors of its driver too (RAYDIST_ENV_VARS) */
      const char *cwd = so->wd_tar || so->wd_zip ? wd : so->in_job_dir ? jd : NULL;
      if (cwd && chdir(cwd) != 0) {
        fprintf(stderr, "raydist job: cannot enter %s: %s\n", cwd, strerror(errno));
        _exit(127);
      }
      execvp(so->exe ? so->exe : argv[0], argv);
      fprintf(stderr, "raydist job: cannot run %s: %s\n", so->exe ? so->exe : argv[0], strerror(errno));
      _exit(127);
    }
    pid_t reaper = 0;
    int alive = p > 0 ? group_reaper(p, &old, &reaper) : -1;
    if (p > 0) info_write(jd, name, p, start, argv, argc, so->res_spec);   /* before the submitter returns */
    char msg[64];
    snprintf(msg, sizeof(msg), "%d\n", (int)p);
    if (ready[1] >= 0 && write(ready[1], msg, strlen(msg)) < 0) { /* the submitter reports it */
    }
    if (ready[1] >= 0) close(ready[1]);
    if (out[1] >= 0) close(out[1]);
    pthread_t evt;
    started_ev sev = {dir, id};
    int evt_on = p > 0 && pthread_create(&evt, NULL, started_thread, &sev) == 0;
    if (p > 0 && !evt_on) keeper_event(dir, id, "RUNNING");
    int st = 0, stop_sig = 0;
    if (p > 0 && out[0] >= 0) st = rd__job_log_pump(&jl, out[0], sfd, p, &stop_sig);
    else
      while (p > 0 && waitpid(p, &st, 0) < 0 && errno == EINTR) {
      }
    snprintf(f, sizeof(f), "%s/stopped", jd);
    if (p > 0 && (stop_sig || access(f, F_OK) == 0)) end_tree(reaper);   /* a stop ends all it started */
    rd__conn_close(&h.conn);   /* its resources free before its end is seen */
    char text[128];
    if (p < 0) snprintf(text, sizeof(text), "exit=127\nend=%.3f\n", wall_now());
    else if (WIFSIGNALED(st)) snprintf(text, sizeof(text), "signal=%d\nend=%.3f\n", WTERMSIG(st), wall_now());
    else snprintf(text, sizeof(text), "exit=%d\nend=%.3f\n", WEXITSTATUS(st), wall_now());
    if (stop_sig) {   /* before status: a reader that sees the end sees it was stopped */
      char why[64];
      snprintf(f, sizeof(f), "%s/stopped", jd);
      snprintf(why, sizeof(why), "keeper_signal=%d\n", stop_sig);
      write_file(f, why);
    }
    snprintf(f, sizeof(f), "%s/status", jd);
    write_file(f, text);
    if (evt_on) pthread_join(evt, NULL);   /* its start told first */
    keeper_event(dir, id, NULL);
    if (out[0] >= 0) rd__job_log_rest(&jl, out[0]);   /* what its children still write */
    signal(SIGPIPE, SIG_IGN);   /* a reaper a stop's SIGKILL took: no one to tell */
    if (alive >= 0 && write(alive, "x", 1) < 0) { /* the reaper stands down */
    }
    _exit(0);
  }
  close(ready[1]);
  char buf[2048] = "";
  ssize_t n = read(ready[0], buf, sizeof(buf) - 1);
  close(ready[0]);
  if (n > 0) buf[n] = 0;
  if (n > 1 && buf[0] == 'E') {   /* its resources refused: no job */
    buf[strcspn(buf, "\n")] = 0;
    fprintf(stderr, "raydist job submit: %s\n", buf + 1);
    while (waitpid(keeper, NULL, 0) < 0 && errno == EINTR) {
    }
    (void)nftw(jd, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return 1;
  }
  int pid = n > 0 ? atoi(buf) : -1;
  if (pid == 0 && buf[0] == '0') {
    printf("job %d submitted: pending until %s of the node is free, log %s\n", id, so->res_spec, log);
    fflush(stdout);
    *id_out = id;
    return 0;
  }
  if (pid <= 0) {
    fprintf(stderr, "raydist job submit: the job could not be started\n");
    return 1;
  }
  printf("job %d submitted: pid %d, log %s\n", id, pid, log);
  fflush(stdout);
  *id_out = id;
  return 0;
}

/* The job ids of a session, ascending; how many (at most max). */
static int job_ids(const char *dir, int *ids, int max) {
  char jobs[700];
  snprintf(jobs, sizeof(jobs), "%s/jobs", dir);
  DIR *d = opendir(jobs);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)) && n < max) {
    int id = parse_id(e->d_name);
    if (id > 0) ids[n++] = id;
  }
  if (d) closedir(d);
  for (int i = 1; i < n; i++)   /* insertion sort: a few jobs */
    for (int k = i; k > 0 && ids[k - 1] > ids[k]; k--) {
      int t = ids[k];
      ids[k] = ids[k - 1];
      ids[k - 1] = t;
    }
  return n;
}

static int job_list(const char *dir) {
  static int ids[4096];
  int n = job_ids(dir, ids, 4096);
  printf("%-5s %-16s %-28s %-8s %-10s %s\n", "id", "name", "state", "pid", "seconds", "command");
  for (int i = 0; i < n; i++) {
    job j;
    if (job_read(dir, ids[i], &j) != 0) continue;
    char sb[64];
    double secs = (j.ended && j.end > 0 ? j.end : wall_now()) - j.start;
    printf("%-5d %-16s %-28s %-8d %-10.1f %s\n", j.id, j.name[0] ? j.name : "-", job_state(&j, sb, sizeof(sb)), j.pid,
           secs, j.cmd);
  }
  return 0;
}

static int job_get(const char *dir, const char *arg, job *j) {
  int id = parse_id(arg);
  if (id < 0 || job_read(dir, id, j) != 0) {
    fprintf(stderr, "raydist job: no job %s on this node\n", arg ? arg : "(none)");
    return -1;
  }
  return 0;
}

/* Says on stderr that n bytes of the log went before they were read. */
static void log_dropped(uint64_t n) {
  if (n)
    fprintf(stderr, "raydist job logs: %llu bytes of the log were rotated away before they were read "
            "(RAYDIST_ROTATION_MAX_BYTES, RAYDIST_ROTATION_BACKUP_COUNT)\n", (unsigned long long)n);
}

/* The job's log from *off on: written to stdout, *off moved past it. */
static void log_copy(const char *dir, int id, uint64_t *off) {
  char jd[1200], buf[65536];
  snprintf(jd, sizeof(jd), "%s/jobs/%d", dir, id);
  size_t n;
  uint64_t dropped = 0;
  while ((n = rd__job_log_read(jd, off, buf, sizeof(buf), &dropped)) > 0) {
    log_dropped(dropped);
    dropped = 0;
    fwrite(buf, 1, n, stdout);
  }
  log_dropped(dropped);
  fflush(stdout);
}

/* News in a job's directory (its log grows, a segment is made, `status`
 * is written), through inotify, so that a follower or a waiter wakes at
 * once instead of every 0.1 s.  Opened before the first look at the job,
 * so nothing that happens after that look is missed. */
typedef struct job_watch {
  int fd;                   /* -1: no inotify (no fds left): a sleep instead */
} job_watch;

/* logs: the log's growth too (a waiter for the end alone skips it: a
 * chatty job would wake it at every write) */
static void watch_open(job_watch *w, const char *dir, int id, int logs) {
  char jd[1200];
  snprintf(jd, sizeof(jd), "%s/jobs/%d", dir, id);
  uint32_t mask = IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE | IN_DELETE_SELF | (logs ? IN_MODIFY : 0);
  w->fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (w->fd >= 0 && inotify_add_watch(w->fd, jd, mask) < 0) {
    close(w->fd);
    w->fd = -1;
  }
}

/* Until there is news, or ms passed (a killed keeper writes nothing: the
 * caller looks anyway). */
static void watch_wait(job_watch *w, int ms) {
  if (w->fd < 0) {
    usleep((useconds_t)(ms < 100 ? ms : 100) * 1000);
    return;
  }
  struct pollfd p = {w->fd, POLLIN, 0};
  if (poll(&p, 1, ms) > 0) {
    char buf[4096];
    while (read(w->fd, buf, sizeof(buf)) > 0) {
    }
  }
}

static void watch_close(job_watch *w) {
  if (w->fd >= 0) close(w->fd);
}

/* follow: on until the job has ended, as its output comes */
static int job_logs(const char *dir, const char *arg, int follow) {
  job j;
  if (job_get(dir, arg, &j) != 0) return 1;
  job_watch w = {-1};
  if (follow) {
    watch_open(&w, dir, j.id, 1);
    if (job_read(dir, j.id, &j) != 0) j.ended = 1;   /* looked at again after the watch began */
  }
  uint64_t off = 0;
  log_copy(dir, j.id, &off);
  while (follow && !j.ended) {
    watch_wait(&w, 1000);
    if (job_read(dir, j.id, &j) != 0) break;
    log_copy(dir, j.id, &off);   /* what it wrote before it ended, too */
  }
  watch_close(&w);
  return 0;
}

static int job_delete(const char *dir, job *j);

/* A job still waiting for its entrypoint resources (PENDING, its keeper in
 * hold_wait) ends before it starts and its record goes: 0.  1 when it
 * runs or ended already, or started before its keeper read the word (the
 * keeper decides, so the two never both happen).  A job's mirror
 * withdraws it from one node to run it on another whose room came free
 * first. */
static int job_withdraw(const char *dir, job *j) {
  char sb[64], st;
  if (j->ended || j->pid > 0 || j->keeper <= 0 || rd__proc_start_time(j->keeper, &st) != j->keeper_ticks) {
    printf("job %d: %s (not waiting: not withdrawn)\n", j->id, job_state(j, sb, sizeof(sb)));
    return 1;
  }
  kill(j->keeper, SIGUSR1);
  job_watch w = {-1};
  watch_open(&w, dir, j->id, 0);
  double until = wall_now() + 10;
  while (job_read(dir, j->id, j) == 0 && !j->ended && j->pid <= 0 && wall_now() < until) watch_wait(&w, 100);
  watch_close(&w);
  if (!j->ended || j->pid > 0) {
    printf("job %d: %s (started: not withdrawn)\n", j->id, job_state(j, sb, sizeof(sb)));
    return 1;
  }
  if (job_delete(dir, j) != 0) return 1;
  printf("job %d withdrawn\n", j->id);
  return 0;
}

/* Removes an ended job's directory (its record, log and working copy). */
static int job_delete(const char *dir, job *j) {
  char sb[64];
  if (!j->ended) {
    fprintf(stderr, "raydist job delete: job %d is %s: stop it first\n", j->id, job_state(j, sb, sizeof(sb)));
    return 1;
  }
  char jd[1200];
  snprintf(jd, sizeof(jd), "%s/jobs/%d", dir, j->id);
  if (nftw(jd, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0) {
    fprintf(stderr, "raydist job delete: cannot remove %s: %s\n", jd, strerror(errno));
    return 1;
  }
  printf("job %d deleted\n", j->id);
  return 0;
}

int rd__cli_job_get(const char *session_dir, int id, rd_cli_job *out) {
  job j;
  if (id <= 0 || job_read(session_dir, id, &j) != 0) return -1;
  memset(out, 0, sizeof(*out));
  out->id = j.id;
  snprintf(out->name, sizeof(out->name), "%s", j.name);
  snprintf(out->cmd, sizeof(out->cmd), "%s", j.cmd);
  out->pid = j.pid;
  out->start = j.start;
  out->end = j.ended ? j.end : 0;
  out->ended = j.ended;
  out->status = j.status;
  out->sig = j.sig;
  out->stopped = j.stopped;
  snprintf(out->resources, sizeof(out->resources), "%s", j.res);
  char sb[64];
  snprintf(out->state, sizeof(out->state), "%s", job_state(&j, sb, sizeof(sb)));
  return 0;
}

int rd__cli_job_ids(const char *session_dir, int *ids, int max) { return job_ids(session_dir, ids, max); }

int rd__cli_job_state(const char *session_dir, int id, char *state, size_t len, int *ended) {
  job j;
  if (id <= 0 || job_read(session_dir, id, &j) != 0) return -1;
  char sb[64];
  snprintf(state, len, "%s", job_state(&j, sb, sizeof(sb)));
  *ended = j.ended;
  return 0;
}

/* Waits up to timeout seconds (<0: forever) for the job to end: 1 when it has. */
static int job_wait_end(const char *dir, job *j, double timeout) {
  double until = wall_now() + timeout;
  job_watch w = {-1};
  if (!j->ended) {
    watch_open(&w, dir, j->id, 0);
    if (job_read(dir, j->id, j) != 0) j->ended = 1;   /* looked at again after the watch began */
  }
  int rc = 1;
  while (!j->ended) {
    double left = until - wall_now();
    if (timeout >= 0 && left <= 0) {
      rc = 0;
      break;
    }
    watch_wait(&w, timeout >= 0 && left < 1 ? (int)(left * 1000) + 1 : 1000);
    if (job_read(dir, j->id, j) != 0) break;
  }
  watch_close(&w);
  return rc;
}

/* A running job's process group (the program and what it started); a
 * pending one's keeper, which waits for its resources (it starts nothing
 * once told to end, and records the stop). */
static void job_signal(const job *j, int sig) {
  char st;
  if (j->pid > 0) {
    kill(-j->pid, sig);
    kill(j->pid, sig);
  } else if (j->keeper > 0 && rd__proc_start_time(j->keeper, &st) == j->keeper_ticks) {
    kill(j->keeper, sig);
  }
}

static int job_stop(const char *dir, job *j, double timeout) {
  if (j->ended) return 0;
  char f[1200];
  snprintf(f, sizeof(f), "%s/jobs/%d/stopped", dir, j->id);
  write_file(f, "");
  job_signal(j, SIGTERM);
  if (!job_wait_end(dir, j, timeout)) {
    fprintf(stderr, "raydist job stop: job %d did not stop in %g s; killing it\n", j->id, timeout);
    job_signal(j, SIGKILL);
    job_wait_end(dir, j, 5);
  }
  return 1;
}

int rd__cli_jobs_live(const char *session_dir) {
  static int ids[4096];
  int n = job_ids(session_dir, ids, 4096), live = 0;
  for (int i = 0; i < n; i++) {
    job j;
    live += job_read(session_dir, ids[i], &j) == 0 && !j.ended;
  }
  return live;
}

int rd__cli_jobs_stop(const char *session_dir) {
  static int ids[4096];
  int n = job_ids(session_dir, ids, 4096), stopped = 0;
  for (int i = 0; i < n; i++) {
    job j;
    if (job_read(session_dir, ids[i], &j) == 0 && !j.ended) stopped += job_stop(session_dir, &j, 5);
  }
  return stopped;
}

static void job_usage(void) {
  fprintf(stderr,
          "usage: raydist job submit [--name NAME] [--env NAME=VALUE]... [--follow] [where] -- PROGRAM [ARGS...]\n"
          "                          (--follow: its output as it comes, then its end; exit status 0: it succeeded)\n"
          "       raydist job list [--all] [where]   (--all: every node's, each under a line naming it)\n"
          "       raydist job status ID [where]\n"
          "       raydist job logs ID [--follow] [where]\n"
          "       raydist job wait ID [--timeout S] [where]   (exit status 0: it succeeded)\n"
          "       raydist job stop ID [--timeout S] [where]\n"
          "       raydist job delete ID [where]   (an ended job's record, log and working copy)\n"
          "       raydist job withdraw ID [where]   (a PENDING job ends before it starts, and its record goes;\n"
          "                                         exit status 0: withdrawn, 1: it runs or ended)\n"
          "where: [--node-ip IP]  a node of this machine (default: the only one, or the head)\n"
          "       --address IP:PORT [--token T] [--node-ip IP]\n"
          "                       from any machine (RAYDIST_ADDRESS when no node runs on this one):\n"
          "                       the cluster whose GCS is at IP:PORT, its node on IP\n"
          "                       (default: the head); PROGRAM is uploaded and run there in its job's\n"
          "                       directory.  The token: --token, RAYDIST_TOKEN, or found on its own\n"
          "                       when the cluster runs on this machine.\n"
          "       --session DIR   the node whose session directory is DIR\n"
          "submit also takes --working-dir DIR (a copy of DIR, shipped with --address, is the job's working\n"
          "directory), --exe FILE (run FILE, PROGRAM only its argv[0]) and --in-job-dir, and what the job's\n"
          "driver holds of its node while it runs (Ray's entrypoint resources; PENDING until they are free):\n"
          "--num-cpus N, --num-gpus N (its GPUs in CUDA_VISIBLE_DEVICES), --memory BYTES, --resources a=1,b=2.\n"
          "submit --address ... --follow --mirror: the job's log alone on stdout, then its end as this command's\n"
          "(its exit status, or its signal); SIGTERM, SIGINT or SIGHUP stop the job first.  With --seek-node\n"
          "(as a submitted job's program), the node is the one this job's node names once a live node can hold\n"
          "--entrypoint-resources, with labels that satisfy --entrypoint-label-selector (the autoscaler starts\n"
          "one), after --node-ip's if given, and again while the one named has gone: the jobs API's way.\n");
}

/* ---- from another machine: the node over a tool link ---- */

enum { OP_SUBMIT = 1, OP_LIST = 2, OP_LOGS = 3, OP_STATE = 4, OP_STOP = 5, OP_DELETE = 6, OP_WITHDRAW = 7 };
#define REMOTE_WAIT_S 10.0   /* logs --follow and wait: how long the node holds a request for news */

typedef struct remote {
  rd__conn conn;
  uint64_t next_req;
  char ip[64];
  /* --mirror --seek-node: the seek's connection, kept while the job waits
   * on the node named (PENDING there), where the seeking node counts it as
   * waiting there (job_hold.c's waits_at); closed once it runs or ends */
  rd__conn *seek;
  char move_to[64];         /* a second answer on it: the node to move the waiting job to */
  uint64_t off;             /* logs: how far the job's log was read */
} remote;

/* PROGRAM as execvp would find it: 0 and its path, or -1 with a message. */
static int find_program(const char *prog, char *out, size_t len) {
  if (strchr(prog, '/')) {
    snprintf(out, len, "%s", prog);
  } else {
    const char *path = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof(dirs), "%s", path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
    int found = 0;
    for (char *save, *d = strtok_r(dirs, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
      snprintf(out, len, "%s/%s", d, prog);
      found = access(out, X_OK) == 0;
    }
    if (!found) {
      fprintf(stderr, "raydist job submit: %s: not found in PATH\n", prog);
      return -1;
    }
  }
  struct stat st;
  if (stat(out, &st) != 0 || !S_ISREG(st.st_mode) || access(out, X_OK) != 0) {
    fprintf(stderr, "raydist job submit: %s is not an executable file\n", out);
    return -1;
  }
  return 0;
}

/* The cluster's GCS (*g) and its nodes (*nodes, *n: free() them), with
 * *token found when not given (into tbuf): 0, or 1 with a message. */
static int remote_cluster(const char *address, const char **token, char tbuf[256], rd_gcs **g, rd_gcs_node **nodes,
                          size_t *n) {
  char err[512];
  if ((!*token || !**token) && rd__cli_local_token(address, tbuf, 256) == 0) *token = tbuf;
  if (!*token || !**token) {
    fprintf(stderr, "raydist job: no cluster token: pass --token or RAYDIST_TOKEN (the file `token` in the head's "
                    "session directory)\n");
    return 1;
  }
  if (rd_gcs_connect(address, *token, 5000, g, err, sizeof(err)) != 0) {
    fprintf(stderr, "raydist job: cannot reach the cluster at %s: %s\n", address, err);
    return 1;
  }
  if (rd_gcs_get_nodes(*g, nodes, n, NULL) != 0) {
    fprintf(stderr, "raydist job: cannot list the cluster's nodes: %s\n", rd_gcs_last_error());
    rd_gcs_close(*g);
    return 1;
  }
  return 0;
}

/* A tool link to node t: 0, or 1 with a message. */
static int remote_link(const rd_gcs_node *t, const char *token, remote *rm) {
  snprintf(rm->ip, sizeof(rm->ip), "%s", t->ip);
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)t->link_port);
  int fd = inet_pton(AF_INET, t->ip, &a.sin_addr) == 1 ? socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0) : -1;
  if (fd < 0 || rd__connect_within(fd, (const struct sockaddr *)&a, sizeof(a), 5000) != 0) {
    fprintf(stderr, "raydist job: cannot reach node %s: %s\n", rm->ip, strerror(errno));
    if (fd >= 0) close(fd);
    return 1;
  }
  rd__conn_init(&rm->conn, fd);
  Rd__LinkHello h = RD__LINK_HELLO__INIT;
  h.token = (char *)token;
  h.tool = 1;
  rd__frame f;
  Rd__LinkHelloReply *hr = NULL;
  if (rd__conn_send(&rm->conn, RD__MSG_TYPE__MSG_LINK_HELLO, &h.base, -1) == 0 &&
      rd__conn_flush_blocking(&rm->conn, 5000) == 0 && rd__conn_recv_blocking(&rm->conn, &f, 5000) == 0 &&
      f.type == RD__MSG_TYPE__MSG_LINK_HELLO_REPLY)
    hr = (Rd__LinkHelloReply *)rd__frame_unpack(&f, &rd__link_hello_reply__descriptor);
  if (!hr || hr->status != 0) {
    fprintf(stderr, "raydist job: node %s refused the connection: %s\n", rm->ip,
            hr && hr->error ? hr->error : "no answer");
    if (hr) protobuf_c_message_free_unpacked(&hr->base, NULL);
    rd__conn_close(&rm->conn);
    return 1;
  }
  protobuf_c_message_free_unpacked(&hr->base, NULL);
  return 0;
}

/* Connects to the cluster's GCS and to node ip (NULL: the head) over a tool
 * link; uploads `program` (and wd_tar) to the code table when given (their
 * hashes into hash and wd_hash).  0, or 1 with a message. */
static int remote_open(const char *address, const char *token, const char *ip, const char *program, char hash[65],
                       const char *wd_tar, char wd_hash[65], remote *rm) {
  char tbuf[256], err[512];
  rd_gcs *g = NULL;
  rd_gcs_node *nodes = NULL;
  size_t n = 0;
  if (remote_cluster(address, &token, tbuf, &g, &nodes, &n) != 0) return 1;
  const rd_gcs_node *t = NULL;
  for (size_t i = 0; i < n && !t; i++)
    if (nodes[i].state == RD_GCS_NODE_ALIVE && (ip ? !strcmp(nodes[i].ip, ip) : nodes[i].is_head)) t = &nodes[i];
  int r = 0;
  if (!t) {   /* 2: gone (a mirror asks its node for another) */
    fprintf(stderr, "raydist job: the cluster at %s has no live %s%s\n", address, ip ? "node on " : "head node",
            ip ? ip : "");
    r = 2;
  } else if (program) {
    if (rd_gcs_code_put(g, program, hash, err, sizeof(err)) != 0 ||
        (wd_tar && rd_gcs_code_put(g, wd_tar, wd_hash, err, sizeof(err)) != 0)) {
      fprintf(stderr, "raydist job submit: cannot upload %s: %s\n", program, err);
      r = 1;
    }
  }
  rd_gcs_close(g);
  if (r == 0) r = remote_link(t, token, rm);
  free(nodes);
  return r;
}

/* One request, its answer into *out (free with
 * protobuf_c_message_free_unpacked): 0, or 1 with a message (the node's
 * refusal included). */
static int remote_call(remote *rm, Rd__LinkJob *q, int timeout_ms, Rd__LinkJobReply **out) {
  q->req_id = ++rm->next_req;
  rd__frame f;
  int r = rd__conn_send(&rm->conn, RD__MSG_TYPE__MSG_LINK_JOB, &q->base, -1);
  if (r == 0) r = rd__conn_flush_blocking(&rm->conn, 10000);
  if (r == 0) r = rd__conn_recv_blocking(&rm->conn, &f, timeout_ms);
  Rd__LinkJobReply *rep = NULL;
  if (r == 0 && f.type == RD__MSG_TYPE__MSG_LINK_JOB_REPLY)
    rep = (Rd__LinkJobReply *)rd__frame_unpack(&f, &rd__link_job_reply__descriptor);
  if (!rep || rep->req_id != q->req_id) {
    fprintf(stderr, "raydist job: no answer from node %s (%s)\n", rm->ip, r ? rd_strerror(r) : "a bad reply");
    if (rep) protobuf_c_message_free_unpacked(&rep->base, NULL);
    return 1;
  }
  if (rep->status != 0) {
    fprintf(stderr, "raydist job: node %s: %s (%s)\n", rm->ip, rep->error ? rep->error : "", rd_err_name(rep->status));
    protobuf_c_message_free_unpacked(&rep->base, NULL);
    return 1;
  }
  *out = rep;
  return 0;
}

/* What the command the node ran printed, and its exit status. */
static int remote_output(Rd__LinkJobReply *rep) {
  if (rep->out.len) fwrite(rep->out.data, 1, rep->out.len, stdout);
  if (rep->err.len) fwrite(rep->err.data, 1, rep->err.len, stderr);
  int rc = rep->exit_code;
  protobuf_c_message_free_unpacked(&rep->base, NULL);
  return rc;
}

/* submit --mirror (a job of another node standing in for one of this
 * node: job_http.c): the signal that asked this process to end, which
 * stops the remote job (0: none yet) */
static volatile sig_atomic_t mirror_stop;
static void mirror_on_signal(int sig) { mirror_stop = sig; }

/* --mirror: while the job waits on its node (PENDING), this process's own
 * job says so (RAYDIST_JOB_DIR/state_there, which job_read reads), and no
 * longer once it runs there, when the seek's connection goes too. */
static void mirror_state(remote *rm, const char *state) {
  static int pending = -1;
  static char at[64];   /* the node it waits on (a move changes it) */
  const char *jd = getenv("RAYDIST_JOB_DIR");
  int now = state && !strncmp(state, "PENDING", 7);
  if (!now && rm->seek) {
    rd__conn_close(rm->seek);
    rm->seek = NULL;
  }
  if (!jd || !*jd || (now == pending && (!now || !strcmp(at, rm->ip)))) return;
  pending = now;
  snprintf(at, sizeof(at), "%s", rm->ip);
  char f[900], text[200];
  snprintf(f, sizeof(f), "%s/state_there", jd);
  if (!now) {
    unlink(f);
    return;
  }
  snprintf(text, sizeof(text), "%.60s on %.60s\n", state, rm->ip);
  write_file(f, text);
}

/* --mirror, while the job waits there: has the seeking node answered again
 * on the seek's connection, naming another node whose room came free first
 * (job_hold.c's seek_move)?  1 and its address in rm->move_to; 0 (the
 * connection gone or broken: closed, no move). */
static int seek_moved(remote *rm) {
  while (rm->seek) {
    rd__frame f;
    int r = rd__conn_next(rm->seek, &f);
    if (r == 1) {
      hold h;
      char why[300];
      memset(&h, 0, sizeof(h));
      if (hold_reply(&h, &f, why, sizeof(why)) == RD_OK && h.node_ip[0] && strcmp(h.node_ip, rm->ip)) {
        snprintf(rm->move_to, sizeof(rm->move_to), "%s", h.node_ip);
        return 1;
      }
      continue;
    }
    struct pollfd p = {rm->seek->fd, POLLIN, 0};
    if (r == 0 && poll(&p, 1, 0) == 0) return 0;   /* nothing new */
    if (r == 0 && ((r = rd__conn_fill(rm->seek)) > 0 || r == RD_EAGAIN)) continue;
    rd__conn_close(rm->seek);   /* gone, or malformed */
    rm->seek = NULL;
  }
  return 0;
}

/* --mirror: remote job id stopped once this process is asked to end (its
 * output dropped: the log that follows says the rest); 0, or 1 */
static int mirror_stop_send(remote *rm, int id) {
  Rd__LinkJob q = RD__LINK_JOB__INIT;
  Rd__LinkJobReply *rep;
  q.op = OP_STOP;
  q.id = (uint32_t)id;
  q.timeout = 10;
  if (remote_call(rm, &q, 60000, &rep) != 0) return 1;
  protobuf_c_message_free_unpacked(&rep->base, NULL);
  return 0;
}

/* logs: the job's log from rm->off (0: the start), on until it has ended
 * with follow; mirror: asked every second, the job stopped when this
 * process is, and 3 when the job, waiting there, is to move to
 * rm->move_to (seek_moved) */
#define MIRROR_MOVE 3
static int remote_logs(remote *rm, int id, int follow, int mirror) {
  Rd__LinkJob q = RD__LINK_JOB__INIT;
  Rd__LinkJobReply *rep;
  q.op = OP_LOGS;
  q.id = (uint32_t)id;
  q.offset = rm->off;
  q.timeout = follow ? mirror ? 1 : REMOTE_WAIT_S : 0;   /* the node answers once there is more, or the end */
  int stop_sent = 0;
  for (;;) {
    if (mirror && mirror_stop && !stop_sent) {
      stop_sent = 1;
      if (mirror_stop_send(rm, id) != 0) return 1;
    }
    double asked = wall_now();
    if (remote_call(rm, &q, (int)(REMOTE_WAIT_S * 1000) + 30000, &rep) != 0) return 1;
    log_dropped(rep->dropped);
    if (mirror) mirror_state(rm, rep->state);
    if (rep->out.len) fwrite(rep->out.data, 1, rep->out.len, stdout);
    fflush(stdout);
    int more = rep->out.len > 0, ended = rep->ended;
    q.offset = rm->off = rep->offset;
    protobuf_c_message_free_unpacked(&rep->base, NULL);
    if (mirror && !mirror_stop && !ended && seek_moved(rm)) return MIRROR_MOVE;
    if (!more && (!follow || ended)) return 0;
    if (!more && wall_now() - asked < 0.1) usleep(200000);   /* a node that does not wait: ask every 0.2 s */
  }
}

/* The job's state once (timeout 0), or once it has ended (timeout < 0:
 * however long): "job N: STATE"; 0 when it succeeded (status: when it
 * exists). */
static int remote_state(remote *rm, int id, double timeout, int status) {
  Rd__LinkJob q = RD__LINK_JOB__INIT;
  Rd__LinkJobReply *rep;
  q.op = OP_STATE;
  q.id = (uint32_t)id;
  double until = wall_now() + timeout;
  for (;;) {
    double asked = wall_now(), left = until - asked;
    /* wait: the node answers once the job has ended (or the time is up) */
    q.timeout = status ? 0 : timeout < 0 || left > REMOTE_WAIT_S ? REMOTE_WAIT_S : left > 0 ? left : 0;
    if (remote_call(rm, &q, (int)(REMOTE_WAIT_S * 1000) + 30000, &rep) != 0) return 1;
    int ended = rep->ended, rc = -1;
    if (status) {
      printf("job %d: %s\n", id, rep->state);
      rc = 0;
    } else if (ended) {
      printf("job %d: %s\n", id, rep->state);
      rc = !strcmp(rep->state, "SUCCEEDED") ? 0 : 1;
    } else if (timeout >= 0 && wall_now() > until) {
      fprintf(stderr, "raydist job wait: job %d still runs after %g s\n", id, timeout);
      rc = 1;
    }
    protobuf_c_message_free_unpacked(&rep->base, NULL);
    if (rc >= 0) return rc;
    if (wall_now() - asked < 0.1) usleep(200000);   /* a node that does not wait */
  }
}

/* --mirror: how job id ended, as this process's own end: its exit
 * status, or its signal raised here (so the job this process is the
 * program of ends as it did); a stop this process asked for, 143 */
static int mirror_end(remote *rm, int id) {
  Rd__LinkJob q = RD__LINK_JOB__INIT;
  Rd__LinkJobReply *rep;
  q.op = OP_STATE;
  q.id = (uint32_t)id;
  if (remote_call(rm, &q, 60000, &rep) != 0) return 1;
  int n = 0, rc = 1;
  if (!strcmp(rep->state, "SUCCEEDED")) rc = 0;
  else if (sscanf(rep->state, "FAILED (exit %d)", &n) == 1) rc = n & 255;
  else if (sscanf(rep->state, "FAILED (signal %d)", &n) == 1 && n > 0 && n < 65) rc = 256 + n;
  else if (!strncmp(rep->state, "STOPPED", 7)) rc = mirror_stop ? 128 + SIGTERM : 256 + SIGTERM;
  else fprintf(stderr, "raydist job: job %d on node %s: %s\n", id, rm->ip, rep->state);
  protobuf_c_message_free_unpacked(&rep->base, NULL);
  if (rc > 256) {   /* ended by a signal there: by the same here */
    fflush(NULL);
    signal(rc - 256, SIG_DFL);
    raise(rc - 256);
    rc = 128 + (rc - 256);
  }
  return rc;
}

/* list --all: every live node's jobs, each under a line naming it */
static int remote_list_all(const char *address, const char *token) {
  char tbuf[256];
  rd_gcs *g = NULL;
  rd_gcs_node *nodes = NULL;
  size_t n = 0;
  if (remote_cluster(address, &token, tbuf, &g, &nodes, &n) != 0) return 1;
  rd_gcs_close(g);
  int rc = 0;
  for (size_t i = 0; i < n; i++) {
    if (nodes[i].state != RD_GCS_NODE_ALIVE) continue;
    printf("node %s%s\n", nodes[i].ip, nodes[i].is_head ? " (head)" : "");
    fflush(stdout);
    remote rm;
    memset(&rm, 0, sizeof(rm));
    Rd__LinkJob q = RD__LINK_JOB__INIT;
    Rd__LinkJobReply *rep;
    q.op = OP_LIST;
    if (remote_link(&nodes[i], token, &rm) != 0) {
      rc = 1;
      continue;
    }
    if (remote_call(&rm, &q, 120000, &rep) != 0 || remote_output(rep) != 0) rc = 1;
    fflush(stdout);
    rd__conn_close(&rm.conn);
  }
  free(nodes);
  return rc;
}

/* list --all on this machine: every node session's jobs */
static int local_list_all(void) {
  char root[200], names[NODES_MAX][256];
  int n = node_sessions(root, names, NODES_MAX);
  for (int i = 0; i < n; i++) {
    char dir[600];
    snprintf(dir, sizeof(dir), "%.200s/%.255s", root, names[i]);
    printf("node %s\n", names[i] + 5);
    job_list(dir);
  }
  if (!n) fprintf(stderr, "raydist job: no node runs on this machine (raydist start first)\n");
  return n ? 0 : 1;
}

/* --seek-node: the node to run this mirror's job on, asked of the node
 * whose job this process is (RAYDIST_JOB_DIR), which answers once a node
 * of its view can hold the job's entrypoint resources and meanwhile counts
 * them as demand for the autoscaler (job_hold.c).  This process's job
 * waits (PENDING) until then.  0 and the node's address in ip, else this
 * process's exit status: 128 + SIGTERM when told to end meanwhile.  The
 * connection stays open in *keep (closed here otherwise) until the job's
 * submit there was answered: the node claims that node's room in its view
 * till then, so jobs submitted together go to different nodes. */
static int seek_node(const submit_opts *so, char *ip, size_t len, rd__conn *keep) {
  const char *jd = getenv("RAYDIST_JOB_DIR");
  char dir[900], why[1400];
  snprintf(dir, sizeof(dir), "%s", jd);
  char *slash = strrchr(dir, '/');
  int id = slash ? atoi(slash + 1) : 0;
  for (int i = 0; i < 2 && slash; i++, slash = strrchr(dir, '/')) *slash = 0;   /* <session>/jobs/<id> */
  sigset_t set, old;   /* told to end: read from sfd while waiting */
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  sigprocmask(SIG_BLOCK, &set, &old);
  int sfd = signalfd(-1, &set, SFD_CLOEXEC), sig = 0;
  hold h;
  int r = hold_ask(&h, dir, &so->res, id, 1, so->sel, why, sizeof(why));
  if (r == RD_EAGAIN) {
    char f[900], text[200];
    fprintf(stderr, "raydist job: %s\n", why);
    fflush(stderr);
    snprintf(f, sizeof(f), "%s/state_there", jd);
    snprintf(text, sizeof(text), "PENDING (waits for a node with %.40s%s%.40s)\n", so->res_spec ? so->res_spec : "",
             so->res_spec && so->sel ? ", " : "", so->sel ? so->sel : "");
    write_file(f, text);
    r = hold_wait(&h, sfd, &sig, why, sizeof(why));
  }
  if (sfd >= 0) close(sfd);
  sigprocmask(SIG_SETMASK, &old, NULL);
  if (r == RD_OK && h.node_ip[0]) {
    snprintf(ip, len, "%s", h.node_ip);
    *keep = h.conn;
    return 0;
  }
  rd__conn_close(&h.conn);
  if (r == RD_ECANCELED) return 128 + SIGTERM;   /* stopped before it ran anywhere */
  fprintf(stderr, "raydist job: no node for the job: %s\n", r == RD_OK ? "the node named none" : why);
  return 1;
}

/* --mirror: q submitted to node ip, rm now linked to it (its seek kept):
 * 0 and the answer in *rep, or 1 with a message. */
static int mirror_submit_at(remote *rm, const char *address, const char *token, const char *ip, Rd__LinkJob *q,
                            Rd__LinkJobReply **rep) {
  char hash[65], wd_hash[65];
  remote nr;
  memset(&nr, 0, sizeof(nr));
  rd__conn_close(&rm->conn);
  /* (no upload: q names the program stored already) */
  if (remote_open(address, token, ip, NULL, hash, NULL, wd_hash, &nr) != 0) return 1;
  nr.seek = rm->seek;
  *rm = nr;
  return remote_call(rm, q, 120000, rep);
}

/* --mirror: the job, waiting on node rm->ip, is withdrawn there and
 * submitted (q) to rm->move_to, whose room came free first (or, should
 * that fail, where it was); if it started where it was meanwhile, it is
 * followed on there.  0 (rm and *id the job's node and number now), or 1
 * with a message. */
static int mirror_move(remote *rm, const char *address, const char *token, Rd__LinkJob *q, int *id) {
  Rd__LinkJob w = RD__LINK_JOB__INIT;
  Rd__LinkJobReply *rep;
  w.op = OP_WITHDRAW;
  w.id = (uint32_t)*id;
  if (remote_call(rm, &w, 60000, &rep) != 0) return 1;
  int withdrawn = rep->exit_code == 0;
  protobuf_c_message_free_unpacked(&rep->base, NULL);
  if (!withdrawn) return 0;   /* it started there */
  char from[64];
  snprintf(from, sizeof(from), "%s", rm->ip);
  fprintf(stderr, "raydist job: withdrawn from node %s to run on node %s, where its room came free first\n", from,
          rm->move_to);
  fflush(stderr);
  if (mirror_submit_at(rm, address, token, rm->move_to, q, &rep) != 0 &&
      mirror_submit_at(rm, address, token, from, q, &rep) != 0) {
    fprintf(stderr, "raydist job: the job was withdrawn from node %s and could not be submitted again\n", from);
    return 1;
  }
  *id = (int)rep->id;
  if (rep->exit_code != 0 || *id <= 0) {
    int rc = remote_output(rep);
    return rc ? rc : 1;
  }
  protobuf_c_message_free_unpacked(&rep->base, NULL);
  fprintf(stderr, "raydist job: runs on node %s as its job %d\n", rm->ip, *id);
  fflush(stderr);
  return 0;
}

static int remote_job(const char *sub, const char *address, const char *token, const char *ip, const char *name,
                      const submit_opts *so, char **args, int nargs, double timeout, int follow, int mirror) {
  char program[4096], hash[65] = "";
  int submit = !strcmp(sub, "submit");
  if (submit && find_program(so->exe ? so->exe : args[0], program, sizeof(program)) != 0) return 1;
  int id = 0;
  if (!submit && strcmp(sub, "list") && (id = parse_id(args[0])) < 0) {
    fprintf(stderr, "raydist job: no job %s on this node\n", args[0]);
    return 1;
  }
  /* --seek-node: the node this job's node names (after --node-ip's, when
   * given), named again while the one named has gone (the node's view is
   * a heartbeat behind: at most 20 times, half a second apart) */
  char sought[64];
  remote rm;
  memset(&rm, 0, sizeof(rm));
  char wd_hash[65] = "";
  rd__conn seekc;   /* the seek's connection, open until the submit is answered */
  memset(&seekc, 0, sizeof(seekc));
  seekc.fd = -1;
  for (int tries = 0;; tries++) {
    if (submit && so->seek && (!ip || tries > 0)) {
      rd__conn_close(&seekc);   /* the node that was named has gone: its claim with it */
      if (tries > 0) {
        fprintf(stderr, "raydist job: asking this job's node for another node\n");
        usleep(500000);
      }
      int r = seek_node(so, sought, sizeof(sought), &seekc);
      if (r != 0) return r;
      ip = sought;
    }
    int r = remote_open(address, token, ip, submit ? program : NULL, hash, so->wd_tar, wd_hash, &rm);
    if (r == 2 && submit && so->seek && tries < 20) continue;
    if (r != 0) {
      rd__conn_close(&seekc);
      return 1;
    }
    break;
  }
  Rd__LinkJob q = RD__LINK_JOB__INIT;
  Rd__LinkJobReply *rep = NULL;
  int rc = 1;
  q.id = (uint32_t)id;
  if (submit) {
    q.op = OP_SUBMIT;
    q.code_hash = hash;
    q.name = (char *)name;
    q.argv = args;
    q.n_argv = (size_t)nargs;
    q.env = so->env;
    q.n_env = (size_t)so->nenv;
    q.working_dir_hash = wd_hash;
    q.resources = (char *)(so->res_spec ? so->res_spec : "");
    if (mirror) {   /* asked to end: the remote job is stopped, then followed to its end */
      struct sigaction sa;
      memset(&sa, 0, sizeof(sa));
      sa.sa_handler = mirror_on_signal;   /* no SA_RESTART: nothing here needs it */
      sigaction(SIGTERM, &sa, NULL);
      sigaction(SIGINT, &sa, NULL);
      sigaction(SIGHUP, &sa, NULL);
    }
    int called = remote_call(&rm, &q, 120000, &rep);
    if (called == 0) {
      id = (int)rep->id;
      if (mirror && rep->exit_code == 0 && id > 0) {   /* its log alone, then its end as this process's */
        fprintf(stderr, "raydist job: runs on node %s as its job %d\n", rm.ip, id);
        fflush(stderr);
        protobuf_c_message_free_unpacked(&rep->base, NULL);
        if (seekc.fd >= 0) rm.seek = &seekc;   /* until the first answer that it is not PENDING */
        while ((rc = remote_logs(&rm, id, 1, 1)) == MIRROR_MOVE && (rc = mirror_move(&rm, address, token, &q, &id)) == 0) {
        }
        if (rc == 0) rc = mirror_end(&rm, id);
      } else {
        rd__conn_close(&seekc);   /* answered: the node named holds the job's room (or refused it) */
        rc = remote_output(rep);
        if (rc == 0 && follow && id > 0 && (rc = remote_logs(&rm, id, 1, 0)) == 0) rc = remote_state(&rm, id, -1, 0);
      }
    }
  } else if (!strcmp(sub, "list")) {
    q.op = OP_LIST;
    if (remote_call(&rm, &q, 120000, &rep) == 0) rc = remote_output(rep);
  } else if (!strcmp(sub, "stop")) {
    q.op = OP_STOP;
    q.timeout = timeout >= 0 ? timeout : 10;
    if (remote_call(&rm, &q, (int)(q.timeout * 1000) + 30000, &rep) == 0) rc = remote_output(rep);
  } else if (!strcmp(sub, "delete") || !strcmp(sub, "withdraw")) {
    q.op = !strcmp(sub, "delete") ? OP_DELETE : OP_WITHDRAW;
    if (remote_call(&rm, &q, 120000, &rep) == 0) rc = remote_output(rep);
  } else if (!strcmp(sub, "logs")) {
    rc = remote_logs(&rm, id, follow, 0);
  } else {
    rc = remote_state(&rm, id, timeout, !strcmp(sub, "status"));
  }
  rd__conn_close(&rm.conn);
  rd__conn_close(&seekc);
  return rc;
}

#define ENV_MAX 256

int rd__cli_job(int argc, char **argv) {
  if (argc < 3) {
    job_usage();
    return 2;
  }
  const char *sub = argv[2], *ip = NULL, *name = NULL, *session = NULL, *address = NULL;
  const char *token = getenv("RAYDIST_TOKEN");
  double timeout = -1;
  int follow = 0, all = 0, mirror = 0;
  static char *envs[ENV_MAX];
  submit_opts so = {NULL, envs, 0, 0, NULL};
  const char *working_dir = NULL;
  static const struct option lo[] = {{"node-ip", 1, 0, 'i'}, {"name", 1, 0, 'n'},    {"timeout", 1, 0, 't'},
                                     {"session", 1, 0, 's'}, {"address", 1, 0, 'a'}, {"token", 1, 0, 'k'},
                                     {"env", 1, 0, 'e'},     {"exe", 1, 0, 'x'},     {"in-job-dir", 0, 0, 'j'},
                                     {"follow", 0, 0, 'f'},  {"working-dir", 1, 0, 'w'},
                                     {"working-dir-tar", 1, 0, 'W'}, {"working-dir-zip", 1, 0, 'Z'},
                                     {"all", 0, 0, 'A'},     {"num-cpus", 1, 0, 'c'}, {"num-gpus", 1, 0, 'g'},
                                     {"memory", 1, 0, 'm'},  {"resources", 1, 0, 'r'},
                                     {"entrypoint-resources", 1, 0, 'R'}, {"mirror", 0, 0, 'M'},
                                     {"seek-node", 0, 0, 'S'}, {"entrypoint-label-selector", 1, 0, 'L'},
                                     {0, 0, 0, 0}};
  char spec[1100] = "";   /* --num-cpus, ... as one "CPU=1,GPU=1,name=2" */
  const char *full_spec = NULL;
  int ch;
  optind = 3;
  /* submit: options end at the program (its own follow it); the others
   * take them before or after the id */
  const char *order = !strcmp(sub, "submit") ? "+" : "";
  while ((ch = getopt_long(argc, argv, order, lo, NULL)) != -1) {
    if (ch == 'i') ip = optarg;
    else if (ch == 'n') name = optarg;
    else if (ch == 't') {
      char *end;
      timeout = strtod(optarg, &end);
      if (!*optarg || *end || timeout < 0 || timeout > 1e6) {
        fprintf(stderr, "raydist job: --timeout takes seconds, not '%s'\n", optarg);
        return 2;
      }
    } else if (ch == 's') session = optarg;
    else if (ch == 'a') address = optarg;
    else if (ch == 'k') token = optarg;
    else if (ch == 'x') so.exe = optarg;
    else if (ch == 'j') so.in_job_dir = 1;
    else if (ch == 'f') follow = 1;
    else if (ch == 'w') working_dir = optarg;
    else if (ch == 'A') all = 1;
    else if (ch == 'W') so.wd_tar = optarg;
    else if (ch == 'Z') so.wd_zip = optarg;
    else if (ch == 'R') full_spec = optarg;
    else if (ch == 'M') mirror = 1;
    else if (ch == 'S') so.seek = 1;
    else if (ch == 'L') so.sel = optarg;
    else if (ch == 'c' || ch == 'g' || ch == 'm' || ch == 'r') {
      size_t k = strlen(spec);
      const char *what = ch == 'c' ? "CPU=" : ch == 'g' ? "GPU=" : ch == 'm' ? "memory=" : "";
      snprintf(spec + k, sizeof(spec) - k, "%s%s%s", k ? "," : "", what, optarg);
    }
    else if (ch == 'e') {
      const char *eq = strchr(optarg, '=');
      if (!eq || eq == optarg || strchr(optarg, '\n') || so.nenv == ENV_MAX) {
        fprintf(stderr, "raydist job submit: --env takes NAME=VALUE (at most %d)\n", ENV_MAX);
        return 2;
      }
      envs[so.nenv++] = optarg;
    } else {
      job_usage();
      return 2;
    }
  }
  if (name && (strlen(name) >= 128 || strchr(name, '\n'))) {
    fprintf(stderr, "raydist job submit: a name of at most 127 characters on one line\n");
    return 2;
  }
  int submit = !strcmp(sub, "submit"), list = !strcmp(sub, "list");
  if (full_spec && spec[0]) {
    fprintf(stderr, "raydist job submit: --entrypoint-resources or --num-cpus/--num-gpus/--memory/--resources\n");
    return 2;
  }
  if (full_spec || spec[0]) {   /* what its driver holds while it runs: nothing held when all are 0 */
    char why[300];
    if (!submit) {
      fprintf(stderr, "raydist job: resources are a submit's\n");
      return 2;
    }
    if (rd__res_parse_spec(full_spec ? full_spec : spec, &so.res, why, sizeof(why)) != 0) {
      fprintf(stderr, "raydist job submit: %s\n", why);
      return 2;
    }
    if (!rd_res_is_empty(&so.res)) so.res_spec = full_spec ? full_spec : spec;
  }
  if (!submit && !list && strcmp(sub, "logs") && strcmp(sub, "wait") && strcmp(sub, "stop") && strcmp(sub, "status") &&
      strcmp(sub, "delete") && strcmp(sub, "withdraw")) {
    job_usage();
    return 2;
  }
  if (!list && optind >= argc) {   /* submit needs a program, the others an id */
    job_usage();
    return 2;
  }
  /* no node here, no node named: the cluster drivers would use, as Ray's
   * job CLI reads RAY_ADDRESS */
  const char *env_address = getenv("RAYDIST_ADDRESS");
  char root[200], one[1][256];
  if (!address && !session && env_address && *env_address && node_sessions(root, one, 1) == 0) address = env_address;
  if (address && session) {
    fprintf(stderr, "raydist job: --address and --session name two different nodes\n");
    return 2;
  }
  if (!!working_dir + !!so.wd_tar + !!so.wd_zip > 1) {
    fprintf(stderr, "raydist job submit: one of --working-dir, --working-dir-tar and --working-dir-zip\n");
    return 2;
  }
  if (mirror && (!submit || !address || !follow)) {
    fprintf(stderr, "raydist job submit: --mirror is for submit --address ... --follow\n");
    return 2;
  }
  const char *jd = getenv("RAYDIST_JOB_DIR");
  if (so.seek && (!mirror || (!so.res_spec && !so.sel) || !jd || !strrchr(jd, '/'))) {
    fprintf(stderr, "raydist job submit: --seek-node is for a submitted job's program (RAYDIST_JOB_DIR) that is "
                    "a --mirror with entrypoint resources or a label selector\n");
    return 2;
  }
  if (so.sel && !so.seek) {
    fprintf(stderr, "raydist job submit: --entrypoint-label-selector goes with --seek-node\n");
    return 2;
  }
  if (address && so.wd_zip) {
    fprintf(stderr, "raydist job submit: --working-dir-zip is for a node of this machine (--address ships "
                    "--working-dir)\n");
    return 2;
  }
  if (list && all) {
    if (ip || session) {
      fprintf(stderr, "raydist job list: --all lists every node: no --node-ip or --session with it\n");
      return 2;
    }
    return address ? remote_list_all(address, token) : local_list_all();
  }
  char dir[600], packed[600] = "";
  if (!address) {
    if (session) snprintf(dir, sizeof(dir), "%s", session);
    else if (node_dir(ip, dir, sizeof(dir)) != 0) return 1;
  }
  if (submit && working_dir) {
    if (pack_dir(working_dir, packed, sizeof(packed)) != 0) return 1;
    so.wd_tar = packed;
  }
  if (address) {
    int rc = remote_job(sub, address, token, ip, name, &so, argv + optind, argc - optind, timeout, follow, mirror);
    if (packed[0]) unlink(packed);
    return rc;
  }
  char ids[16];   /* submit --follow: the new job's, for wait below */
  const char *idarg = argv[optind];
  if (submit) {
    int id = 0, r = job_submit(dir, name, argv + optind, argc - optind, &so, &id);
    if (packed[0]) unlink(packed);
    if (r != 0) return 1;
    if (!follow) return 0;
    snprintf(ids, sizeof(ids), "%d", id);
    idarg = ids;
    job_logs(dir, idarg, 1);   /* then its end, as wait says it */
    timeout = -1;
    sub = "wait";
  }
  if (list) return job_list(dir);
  if (!strcmp(sub, "logs")) return job_logs(dir, idarg, follow);
  job j;
  if (job_get(dir, idarg, &j) != 0) return 1;
  char sb[64];
  if (!strcmp(sub, "status")) {
    printf("job %d: %s\n", j.id, job_state(&j, sb, sizeof(sb)));
    return 0;
  }
  if (!strcmp(sub, "delete")) return job_delete(dir, &j);
  if (!strcmp(sub, "withdraw")) return job_withdraw(dir, &j);
  if (!strcmp(sub, "wait")) {
    if (!job_wait_end(dir, &j, timeout)) {
      fprintf(stderr, "raydist job wait: job %d still runs after %g s\n", j.id, timeout);
      return 1;
    }
    printf("job %d: %s\n", j.id, job_state(&j, sb, sizeof(sb)));
    return !strcmp(job_state(&j, sb, sizeof(sb)), "SUCCEEDED") ? 0 : 1;
  }
  if (!job_stop(dir, &j, timeout >= 0 ? timeout : 10)) {
    printf("job %d had ended: %s\n", j.id, job_state(&j, sb, sizeof(sb)));
    return 0;
  }
  printf("job %d: %s\n", j.id, job_state(&j, sb, sizeof(sb)));
  return 0;
}
