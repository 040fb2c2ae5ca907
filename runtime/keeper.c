/* runtime/keeper.c - `raydist gcs --supervise` and `raydist autoscaler
 * --supervise` (see keeper.h): a small parent that runs the daemon as its
 * child and starts it again when it dies.  The GCS server comes back on the
 * same port and storage: with a persistent store (--storage file:PATH) it
 * has the cluster's tables back and the nodes, which ride out a GCS outage
 * of up to RAYDIST_GCS_TIMEOUT_S, carry on with their indexes.  The
 * autoscaler comes back with its launches from the GCS KV store.
 *
 * A child that hangs rather than dies is killed and started again too (conf
 * alive): the GCS server writes a byte to a pipe (--alive-fd) every 500 ms
 * from its failure detector while holding its table lock, and once a server
 * that has served stays silent for RAYDIST_GCS_HANG_MS (10 s), the keeper
 * SIGKILLs it.  That catches a stopped process and handlers deadlocked on
 * the tables, not a hang inside gRPC that leaves the lock free.
 *
 * The log: with --log-file the children write into a pipe the keeper holds
 * for its whole life (so a launch command the autoscaler left running still
 * has somewhere to write after a restart), and the keeper copies it to the
 * file and rotates the file at line ends.
 *
 * The keeper never touches gRPC (it only forks, execs, copies and waits), so
 * forking is safe.  It must never outlive a stop: SIGTERM/SIGINT go to the
 * child and the keeper exits once it has; a killed keeper takes the child
 * with it (PR_SET_PDEATHSIG). */
#include "keeper.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "log.h"

#define QUICK_MS 10000      /* a child that lived less than this failed quickly */
#define MAX_QUICK 5         /* give up after this many quick failures in a row */
#define STOP_MS 10000       /* SIGKILL a child that has not stopped after SIGTERM by then */

typedef struct keeper {
  const char *role;
  int sfd;                  /* signalfd: SIGTERM, SIGINT, SIGCHLD */
  int log_r, log_w;         /* the children's stdout and stderr (-1: no --log-file) */
  int line_end;             /* the last byte copied ended a line: the file may be rotated */
} keeper;

static uint64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Copies what the children wrote into the log (our stderr) and rotates it
 * when it is due and the copy ends a line. */
static void pump(keeper *k) {
  if (k->log_r >= 0) {
    char buf[16384];
    ssize_t r;
    while ((r = read(k->log_r, buf, sizeof(buf))) > 0) {
      for (ssize_t off = 0; off < r;) {
        ssize_t w = write(2, buf + off, (size_t)(r - off));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;   /* a full disk: the lines are lost, not the child */
        off += w;
      }
      k->line_end = buf[r - 1] == '\n';
    }
  }
  if (k->line_end) (void)rd__log_rotate_maybe(mono_ms() * 1000000ull);
}

/* Waits up to ms for a signal, a byte on fd (when fd >= 0) or on afd (when
 * afd >= 0), copying the children's output meanwhile.  Returns the signal
 * number, 0 for fd readable (or closed), -2 for afd readable (or closed),
 * -1 otherwise (timeout, or only output copied). */
static int wait_event(keeper *k, int fd, int afd, int ms) {
  struct pollfd p[4] = {{k->sfd, POLLIN, 0}, {fd, POLLIN, 0}, {afd, POLLIN, 0}, {k->log_r, POLLIN, 0}};
  int n = poll(p, 4, ms);   /* negative fds are ignored */
  pump(k);   /* also rotates the file for the keeper's own lines */
  if (n <= 0) return -1;
  if (p[0].revents & POLLIN) {
    struct signalfd_siginfo si;
    if (read(k->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) return (int)si.ssi_signo;
    return -1;
  }
  if (p[1].revents) return 0;
  return p[2].revents ? -2 : -1;
}

static void describe(int st, char *buf, size_t len) {
  if (WIFSIGNALED(st)) snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
  else snprintf(buf, len, "exited with status %d", WEXITSTATUS(st));
}

/* Stops the child (SIGTERM, then SIGKILL after STOP_MS) and reaps it. */
static int stop_child(keeper *k, pid_t pid) {
  kill(pid, SIGTERM);
  uint64_t end = mono_ms() + STOP_MS;
  int st = 0;
  for (;;) {
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) break;
    uint64_t now = mono_ms();
    if (now >= end) {
      rd__log(RD_LOG_WARN, "%s keeper: the child (pid %d) did not stop in %d s; killing it", k->role, (int)pid,
              STOP_MS / 1000);
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      break;
    }
    (void)wait_event(k, -1, -1, (int)(end - now < 100 ? end - now : 100));
  }
  pump(k);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

int rd__keeper(int argc, char **argv, const rd_keeper_conf *conf) {
  keeper K = {.role = conf->role, .sfd = -1, .log_r = -1, .log_w = -1};
  rd__log_init(conf->role);
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) {
    fprintf(stderr, "raydist %s: cannot find this program's path\n", conf->role);
    return 1;
  }
  exe[n] = 0;
  /* The child's arguments: ours without --supervise, --ready-fd (the
   * keeper answers it) and --log-file, with a ready fd of its own. */
  char **args = calloc((size_t)argc + 5, sizeof(*args));
  const char *port_file = NULL, *bind = NULL, *log_file = NULL;
  int outer_ready = -1, k = 0, bind_i = -1;
  char rfd[16], afd[16], bind_fixed[160];
  if (!args) return 1;
  args[k++] = exe;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--supervise")) continue;
    if (!strcmp(argv[i], "--ready-fd") && i + 1 < argc) {
      outer_ready = atoi(argv[++i]);
      continue;
    }
    if (!strncmp(argv[i], "--ready-fd=", 11)) {
      outer_ready = atoi(argv[i] + 11);
      continue;
    }
    if (!strcmp(argv[i], "--log-file") && i + 1 < argc) {
      log_file = argv[++i];
      continue;
    }
    if (!strcmp(argv[i], "--port-file") && i + 1 < argc) port_file = argv[i + 1];
    if (!strcmp(argv[i], "--log-level") && i + 1 < argc) rd__log_set_level(atoi(argv[i + 1]));
    if (!strcmp(argv[i], "--bind") && i + 1 < argc) {
      bind = argv[i + 1];
      bind_i = k + 1;
    }
    args[k++] = argv[i];
  }
  if (conf->fixed_port && (!port_file || !bind)) {
    fprintf(stderr, "raydist %s: --supervise needs --bind and --port-file (restarts reuse the port)\n", conf->role);
    free(args);
    return 2;
  }
  args[k++] = "--ready-fd";
  args[k++] = rfd;
  if (conf->alive) {
    args[k++] = "--alive-fd";
    args[k++] = afd;
  }
  args[k] = NULL;
  long hang_ms = 0;
  if (conf->alive) {
    char var[64];
    snprintf(var, sizeof(var), "RAYDIST_%s_HANG_MS", conf->role);
    for (char *c = var; *c; c++) *c = (char)toupper((unsigned char)*c);
    const char *hm = getenv(var);
    hang_ms = hm && *hm ? atol(hm) : 10000;   /* 0: never */
  }
  int lp[2];
  if (log_file && (rd__log_rotation_init(log_file) != 0 || pipe2(lp, O_CLOEXEC) != 0)) {
    free(args);
    return 2;
  }
  if (log_file) {
    K.log_r = lp[0];
    K.log_w = lp[1];
    fcntl(K.log_r, F_SETFL, O_NONBLOCK);
  }

  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGCHLD);
  sigprocmask(SIG_BLOCK, &set, &old);
  K.sfd = signalfd(-1, &set, SFD_CLOEXEC);
  if (K.sfd < 0) {
    fprintf(stderr, "raydist %s: signalfd: %s\n", conf->role, strerror(errno));
    free(args);
    return 1;
  }
  pid_t self = getpid();
  int ever_ready = 0, quick = 0, restarts = 0, status = 1;
  for (;;) {
    int p[2], a[2] = {-1, -1};
    if (pipe2(p, O_CLOEXEC) != 0) break;
    if (conf->alive && pipe2(a, O_CLOEXEC | O_NONBLOCK) != 0) {
      close(p[0]);
      close(p[1]);
      break;
    }
    snprintf(rfd, sizeof(rfd), "%d", p[1]);
    snprintf(afd, sizeof(afd), "%d", a[1]);
    uint64_t started = mono_ms();
    pid_t pid = fork();
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != self) _exit(1);
      fcntl(p[1], F_SETFD, 0);   /* the child's ready and alive fds survive exec */
      if (a[1] >= 0) fcntl(a[1], F_SETFD, 0);
      if (K.log_w >= 0 && (dup2(K.log_w, 1) < 0 || dup2(K.log_w, 2) < 0)) _exit(1);
      sigprocmask(SIG_SETMASK, &old, NULL);
      execv(exe, args);
      _exit(127);
    }
    close(p[1]);
    if (a[1] >= 0) close(a[1]);
    if (pid < 0) {
      close(p[0]);
      if (a[0] >= 0) close(a[0]);
      rd__log(RD_LOG_ERROR, "%s keeper: fork: %s", conf->role, strerror(errno));
      break;
    }
    rd__log(RD_LOG_INFO, "%s keeper: started pid %d%s", conf->role, (int)pid, restarts ? ", recovering" : "");
    int rfd_open = 1, afd_open = a[0] >= 0, st = 0, stop = 0, served = 0, hang_killed = 0;
    uint64_t last_alive = 0;
    for (;;) {
      int ev = wait_event(&K, rfd_open ? p[0] : -1, afd_open ? a[0] : -1, 1000);
      if (ev == -2) {   /* the child lives (or closed its end: it is going, SIGCHLD follows) */
        char buf[64];
        ssize_t r;
        while ((r = read(a[0], buf, sizeof(buf))) > 0) last_alive = mono_ms();
        if (r == 0) afd_open = 0;
      } else if (ev == -1) {
        /* a timeout, or output copied: see below */
      } else if (ev == 0) {   /* the child's ready byte, or its end of the pipe closed */
        char c = 0;
        if (read(p[0], &c, 1) == 1 && c == 'R') {
          served = 1;
          last_alive = mono_ms();
        }
        if (c == 'R' && !ever_ready) {
          ever_ready = 1;
          /* restarts bind the port the first server got (--bind IP:0) */
          char port[32];
          const char *colon = bind ? strrchr(bind, ':') : NULL;
          if (conf->fixed_port && colon && rd__read_line(port_file, port, sizeof(port)) == 0 && port[0]) {
            snprintf(bind_fixed, sizeof(bind_fixed), "%.*s:%s", (int)(colon - bind), bind, port);
            args[bind_i] = bind_fixed;
          }
          if (outer_ready >= 0) {
            ssize_t w = write(outer_ready, "R", 1);
            (void)w;
            close(outer_ready);
            outer_ready = -1;
          }
        } else if (c == 'R') {
          rd__log(RD_LOG_WARN, "%s keeper: pid %d ready again after restart %d", conf->role, (int)pid, restarts);
        }
        close(p[0]);
        rfd_open = 0;
      } else if (ev == SIGTERM || ev == SIGINT) {
        rd__log(RD_LOG_INFO, "%s keeper: signal %d, stopping pid %d", conf->role, ev, (int)pid);
        if (rfd_open) close(p[0]);
        status = stop_child(&K, pid);
        stop = 1;
        break;
      } else if (ev == SIGCHLD && waitpid(pid, &st, WNOHANG) == pid) {
        if (rfd_open) close(p[0]);
        break;
      }
      uint64_t now = mono_ms();
      if (served && afd_open && !hang_killed && hang_ms > 0 && now - last_alive > (uint64_t)hang_ms) {
        rd__log(RD_LOG_ERROR, "%s keeper: pid %d has shown no life for %llu ms: killing it", conf->role, (int)pid,
                (unsigned long long)(now - last_alive));
        kill(pid, SIGKILL);
        hang_killed = 1;   /* reaped on its SIGCHLD, then started again */
      }
    }
    if (a[0] >= 0) close(a[0]);
    if (stop) break;
    pump(&K);   /* its last words before ours */
    char why[96];
    describe(st, why, sizeof(why));
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {   /* someone stopped the child itself */
      rd__log(RD_LOG_INFO, "%s keeper: pid %d stopped cleanly; stopping too", conf->role, (int)pid);
      status = 0;
      break;
    }
    if (!ever_ready) {   /* it never came up: a bad argument, port, store or config */
      rd__log(RD_LOG_ERROR, "%s keeper: pid %d %s before it was ready; not restarting", conf->role, (int)pid, why);
      status = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
      break;
    }
    uint64_t lived = mono_ms() - started;
    quick = lived < QUICK_MS ? quick + 1 : 0;
    if (quick > MAX_QUICK) {
      rd__log(RD_LOG_ERROR, "%s keeper: the child %s, %d times in a row within %d s of starting; giving up",
              conf->role, why, quick, QUICK_MS / 1000);
      break;
    }
    int delay = quick ? 200 << (quick - 1) : 100;
    restarts++;
    rd__log(RD_LOG_ERROR, "%s keeper: pid %d %s after %llu ms; restart %d in %d ms", conf->role, (int)pid, why,
            (unsigned long long)lived, restarts, delay);
    uint64_t end = mono_ms() + (uint64_t)delay;
    for (uint64_t now; (now = mono_ms()) < end && !stop;) {
      int ev = wait_event(&K, -1, -1, (int)(end - now));
      if (ev == SIGTERM || ev == SIGINT) stop = 1;
    }
    if (stop) {
      status = 0;
      break;
    }
  }
  pump(&K);
  if (outer_ready >= 0) close(outer_ready);
  close(K.sfd);
  if (K.log_r >= 0) close(K.log_r);
  if (K.log_w >= 0) close(K.log_w);
  free(args);
  return status;
}
