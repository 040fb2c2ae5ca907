/* runtime/cli_job.c - `raydist job`: drivers run detached on a node of this
 * machine, their output kept (Ray's job submission, on the node itself).
 *
 *   raydist job submit [--name N] [--node-ip IP] -- PROGRAM [ARGS...]
 *   raydist job list [--node-ip IP]
 *   raydist job logs ID [--node-ip IP]
 *   raydist job wait ID [--node-ip IP] [--timeout S]
 *   raydist job stop ID [--node-ip IP] [--timeout S]
 *
 * A job lives in <node session>/jobs/<id>/: `info` (name, pid, kernel start
 * time, start, command), `log` (the program's stdout and stderr, workers'
 * output included through log_to_driver), `status` once it ended (exit= or
 * signal=, end=), `stopped` when `job stop` ended it.  `submit` forks a
 * keeper that starts a new session (setsid), runs the program in it with
 * RAYDIST_ADDRESS and RAYDIST_NODE_IP naming the node, waits for it and
 * writes `status`; so a job outlives the shell that submitted it, and
 * `raydist stop` ends the jobs of the sessions it removes. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_cluster.h"
#include "common.h"

#define JOB_MAX 100000

static double wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
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
  DIR *d = opendir(root);
  int n = 0, head = -1;
  char names[16][256];
  struct dirent *e;
  while (d && (e = readdir(d)) && n < 16) {
    if (strncmp(e->d_name, "node-", 5) != 0) continue;
    snprintf(names[n], sizeof(names[n]), "%s", e->d_name);
    char f[700], h[8] = "0";
    snprintf(f, sizeof(f), "%s/%s/cluster", root, e->d_name);
    if (rd__read_kv(f, "head", h, sizeof(h)) == 0 && h[0] == '1') head = n;
    n++;
  }
  if (d) closedir(d);
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
  snprintf(f, sizeof(f), "%s/jobs/%d/status", dir, id);
  if (rd__read_kv(f, "end", v, sizeof(v)) == 0) {
    j->ended = 1;
    j->end = atof(v);
    if (rd__read_kv(f, "exit", v, sizeof(v)) == 0) j->status = atoi(v);
    if (rd__read_kv(f, "signal", v, sizeof(v)) == 0) j->sig = atoi(v);
  }
  snprintf(f, sizeof(f), "%s/jobs/%d/stopped", dir, id);
  j->stopped = access(f, F_OK) == 0;
  /* no status yet: ended all the same if its keeper (which writes status)
   * is gone, killed, and so is the program */
  if (!j->ended) {
    char st, kst;
    int prog = rd__proc_start_time(j->pid, &st) == j->start_ticks && st != 'Z';
    int keeper = j->keeper > 0 && rd__proc_start_time(j->keeper, &kst) == j->keeper_ticks && kst != 'Z';
    if (!prog && !keeper) {
      j->ended = 1;
      j->sig = -1;   /* unknown */
    }
  }
  return 0;
}

static const char *job_state(const job *j, char *buf, size_t len) {
  if (!j->ended) return "RUNNING";
  if (j->stopped) return "STOPPED";
  if (j->sig < 0) snprintf(buf, len, "FAILED (ended, status unknown)");
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

static void write_file(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return;
  size_t n = strlen(text);
  if (write(fd, text, n) != (ssize_t)n) { /* best effort: a reader sees what is there */
  }
  close(fd);
}

static int job_submit(const char *dir, const char *name, char **argv, int argc) {
  char jobs[700], jd[800], f[900];
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
  char log[900];
  snprintf(log, sizeof(log), "%s/log", jd);
  int ready[2];
  if (pipe(ready) != 0) return 1;
  pid_t keeper = fork();
  if (keeper < 0) {
    fprintf(stderr, "raydist job submit: fork: %s\n", strerror(errno));
    return 1;
  }
  if (keeper == 0) {   /* the keeper: a session of its own, the program in it */
    close(ready[0]);
    setsid();
    int lfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
    /* let go of the submitter's stdin, stdout and stderr (a shell's $(...)
     * would wait for the job otherwise): the keeper's go to the log too */
    if (nul >= 0) dup2(nul, 0);
    if (lfd >= 0) {
      dup2(lfd, 1);
      dup2(lfd, 2);
    }
    pid_t p = fork();
    if (p == 0) {
      setpgid(0, 0);   /* a group of its own: `job stop` signals it and what it started */
      if (gcs[0]) setenv("RAYDIST_ADDRESS", gcs, 1);
      if (ip[0]) setenv("RAYDIST_NODE_IP", ip, 1);
      setenv("RAYDIST_JOB_ID", strrchr(jd, '/') + 1, 1);
      execvp(argv[0], argv);
      fprintf(stderr, "raydist job: cannot run %s: %s\n", argv[0], strerror(errno));
      _exit(127);
    }
    char msg[64];
    snprintf(msg, sizeof(msg), "%d\n", (int)p);
    if (write(ready[1], msg, strlen(msg)) < 0) { /* the submitter reports it */
    }
    close(ready[1]);
    int st = 0;
    while (p > 0 && waitpid(p, &st, 0) < 0 && errno == EINTR) {
    }
    char text[128];
    if (p < 0) snprintf(text, sizeof(text), "exit=127\nend=%.3f\n", wall_now());
    else if (WIFSIGNALED(st)) snprintf(text, sizeof(text), "signal=%d\nend=%.3f\n", WTERMSIG(st), wall_now());
    else snprintf(text, sizeof(text), "exit=%d\nend=%.3f\n", WEXITSTATUS(st), wall_now());
    snprintf(f, sizeof(f), "%s/status", jd);
    write_file(f, text);
    _exit(0);
  }
  close(ready[1]);
  char buf[64] = "";
  ssize_t n = read(ready[0], buf, sizeof(buf) - 1);
  close(ready[0]);
  int pid = n > 0 ? atoi(buf) : -1;
  if (pid <= 0) {
    fprintf(stderr, "raydist job submit: the job could not be started\n");
    return 1;
  }
  char st;
  unsigned long long ticks = rd__proc_start_time(pid, &st);
  unsigned long long kticks = rd__proc_start_time((int)keeper, &st);
  char cmd[1024];
  size_t off = 0;
  for (int i = 0; i < argc && off < sizeof(cmd) - 2; i++) {
    int w = snprintf(cmd + off, sizeof(cmd) - off, "%s%s", i ? " " : "", argv[i]);
    if (w < 0) break;
    off += (size_t)w;
  }
  for (char *c = cmd; *c; c++)
    if (*c == '\n') *c = ' ';
  char info[2400];
  snprintf(info, sizeof(info), "name=%s\npid=%d\nticks=%llu\nkeeper=%d\nkeeper_ticks=%llu\nstart=%.3f\ncmd=%s\n",
           name ? name : "", pid, ticks, (int)keeper, kticks, wall_now(), cmd);
  snprintf(f, sizeof(f), "%s/info", jd);
  write_file(f, info);
  printf("job %d submitted: pid %d, log %s\n", id, pid, log);
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

static int job_logs(const char *dir, const char *arg) {
  job j;
  if (job_get(dir, arg, &j) != 0) return 1;
  char f[1200];
  snprintf(f, sizeof(f), "%s/jobs/%d/log", dir, j.id);
  FILE *in = fopen(f, "r");
  if (!in) return 0;   /* nothing written yet */
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), in)) > 0) fwrite(buf, 1, n, stdout);
  fclose(in);
  return 0;
}

/* Waits up to timeout seconds (<0: forever) for the job to end: 1 when it has. */
static int job_wait_end(const char *dir, job *j, double timeout) {
  double until = wall_now() + timeout;
  while (!j->ended) {
    if (timeout >= 0 && wall_now() > until) return 0;
    usleep(50000);
    if (job_read(dir, j->id, j) != 0) return 1;
  }
  return 1;
}

static int job_stop(const char *dir, job *j, double timeout) {
  if (j->ended) return 0;
  char f[1200];
  snprintf(f, sizeof(f), "%s/jobs/%d/stopped", dir, j->id);
  write_file(f, "");
  kill(-j->pid, SIGTERM);   /* its process group: the program and what it started */
  kill(j->pid, SIGTERM);
  if (!job_wait_end(dir, j, timeout)) {
    fprintf(stderr, "raydist job stop: job %d did not stop in %g s; killing it\n", j->id, timeout);
    kill(-j->pid, SIGKILL);
    kill(j->pid, SIGKILL);
    job_wait_end(dir, j, 5);
  }
  return 1;
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
          "usage: raydist job submit [--name NAME] [--node-ip IP] -- PROGRAM [ARGS...]\n"
          "       raydist job list [--node-ip IP]\n"
          "       raydist job logs ID [--node-ip IP]\n"
          "       raydist job wait ID [--node-ip IP] [--timeout S]   (exit status 0: it succeeded)\n"
          "       raydist job stop ID [--node-ip IP] [--timeout S]\n");
}

int rd__cli_job(int argc, char **argv) {
  if (argc < 3) {
    job_usage();
    return 2;
  }
  const char *sub = argv[2], *ip = NULL, *name = NULL;
  double timeout = -1;
  static const struct option lo[] = {
      {"node-ip", 1, 0, 'i'}, {"name", 1, 0, 'n'}, {"timeout", 1, 0, 't'}, {0, 0, 0, 0}};
  int ch;
  optind = 3;
  while ((ch = getopt_long(argc, argv, "+", lo, NULL)) != -1) {
    if (ch == 'i') ip = optarg;
    else if (ch == 'n') name = optarg;
    else if (ch == 't') timeout = atof(optarg);
    else {
      job_usage();
      return 2;
    }
  }
  if (name && (strlen(name) >= 128 || strchr(name, '\n'))) {
    fprintf(stderr, "raydist job submit: a name of at most 127 characters on one line\n");
    return 2;
  }
  char dir[600];
  if (!strcmp(sub, "submit")) {
    if (optind >= argc) {
      job_usage();
      return 2;
    }
    if (node_dir(ip, dir, sizeof(dir)) != 0) return 1;
    return job_submit(dir, name, argv + optind, argc - optind);
  }
  if (!strcmp(sub, "list")) {
    if (node_dir(ip, dir, sizeof(dir)) != 0) return 1;
    return job_list(dir);
  }
  if (strcmp(sub, "logs") && strcmp(sub, "wait") && strcmp(sub, "stop")) {
    job_usage();
    return 2;
  }
  if (optind >= argc) {
    job_usage();
    return 2;
  }
  if (node_dir(ip, dir, sizeof(dir)) != 0) return 1;
  if (!strcmp(sub, "logs")) return job_logs(dir, argv[optind]);
  job j;
  if (job_get(dir, argv[optind], &j) != 0) return 1;
  char sb[64];
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
