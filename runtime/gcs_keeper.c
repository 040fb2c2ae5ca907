/* runtime/gcs_keeper.c - `raydist gcs --supervise`: a small parent that runs
 * the GCS server as its child and starts it again, on the same port and
 * storage, when it dies.  With a persistent store (--storage file:PATH) the
 * new server has the cluster's tables back and the nodes, which ride out a
 * GCS outage of up to RAYDIST_GCS_TIMEOUT_S, carry on with their indexes.
 *
 * A server that hangs rather than dies is killed and started again too: the
 * server writes a byte to a pipe (--alive-fd) every 500 ms from its failure
 * detector while holding its table lock, and once a server that has served
 * stays silent for RAYDIST_GCS_HANG_MS (10 s), the keeper SIGKILLs it.  That
 * catches a stopped process and handlers deadlocked on the tables, not a
 * hang inside gRPC that leaves the lock free.
 *
 * The keeper never touches gRPC (it only forks, execs and waits), so forking
 * is safe.  It must never outlive a stop: SIGTERM/SIGINT go to the server and
 * the keeper exits once it has; a killed keeper takes the server with it
 * (PR_SET_PDEATHSIG). */
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
#include "gcs.h"
#include "log.h"

#define QUICK_MS 10000      /* a server that lived less than this failed quickly */
#define MAX_QUICK 5         /* give up after this many quick failures in a row */
#define STOP_MS 10000       /* SIGKILL a server that has not stopped after SIGTERM by then */

static uint64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Waits up to ms for a signal on sfd, a byte on fd (when fd >= 0) or on
 * afd (when afd >= 0).  Returns the signal number, 0 for fd readable (or
 * closed), -2 for afd readable (or closed), -1 on timeout. */
static int wait_event(int sfd, int fd, int afd, int ms) {
  struct pollfd p[3] = {{sfd, POLLIN, 0}, {fd, POLLIN, 0}, {afd, POLLIN, 0}};
  int n = poll(p, 3, ms);   /* negative fds are ignored */
  if (n <= 0) return -1;
  if (p[0].revents & POLLIN) {
    struct signalfd_siginfo si;
    if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) return (int)si.ssi_signo;
    return -1;
  }
  if (p[1].revents) return 0;
  return p[2].revents ? -2 : -1;
}

static void describe(int st, char *buf, size_t len) {
  if (WIFSIGNALED(st)) snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
  else snprintf(buf, len, "exited with status %d", WEXITSTATUS(st));
}

/* Stops the server (SIGTERM, then SIGKILL after STOP_MS) and reaps it. */
static int stop_server(int sfd, pid_t pid) {
  kill(pid, SIGTERM);
  uint64_t end = mono_ms() + STOP_MS;
  int st = 0;
  for (;;) {
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) break;
    uint64_t now = mono_ms();
    if (now >= end) {
      rd__log(RD_LOG_WARN, "gcs keeper: the server (pid %d) did not stop in %d s; killing it", (int)pid,
              STOP_MS / 1000);
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      break;
    }
    (void)wait_event(sfd, -1, -1, (int)(end - now < 100 ? end - now : 100));
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

int rd__gcs_keeper(int argc, char **argv) {
  rd__log_init("gcs");
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) {
    fprintf(stderr, "raydist gcs: cannot find this program's path\n");
    return 1;
  }
  exe[n] = 0;
  /* The server's arguments: ours without --supervise and --ready-fd (the
   * keeper answers the ready fd), with a ready fd of its own. */
  char **args = calloc((size_t)argc + 5, sizeof(*args));
  const char *port_file = NULL, *bind = NULL;
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
    if (!strcmp(argv[i], "--port-file") && i + 1 < argc) port_file = argv[i + 1];
    if (!strcmp(argv[i], "--log-level") && i + 1 < argc) rd__log_set_level(atoi(argv[i + 1]));
    if (!strcmp(argv[i], "--bind") && i + 1 < argc) {
      bind = argv[i + 1];
      bind_i = k + 1;
    }
    args[k++] = argv[i];
  }
  if (!port_file || !bind) {
    fprintf(stderr, "raydist gcs: --supervise needs --bind and --port-file (restarts reuse the port)\n");
    free(args);
    return 2;
  }
  args[k++] = "--ready-fd";
  args[k++] = rfd;
  args[k++] = "--alive-fd";
  args[k++] = afd;
  args[k] = NULL;
  const char *hm = getenv("RAYDIST_GCS_HANG_MS");
  long hang_ms = hm && *hm ? atol(hm) : 10000;   /* 0: never */

  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGCHLD);
  sigprocmask(SIG_BLOCK, &set, &old);
  int sfd = signalfd(-1, &set, SFD_CLOEXEC);
  if (sfd < 0) {
    fprintf(stderr, "raydist gcs: signalfd: %s\n", strerror(errno));
    free(args);
    return 1;
  }
  pid_t keeper = getpid();
  int ever_ready = 0, quick = 0, restarts = 0, status = 1;
  for (;;) {
    int p[2], a[2];
    if (pipe2(p, O_CLOEXEC) != 0) break;
    if (pipe2(a, O_CLOEXEC | O_NONBLOCK) != 0) {
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
      if (getppid() != keeper) _exit(1);
      fcntl(p[1], F_SETFD, 0);   /* the server's ready and alive fds survive exec */
      fcntl(a[1], F_SETFD, 0);
      sigprocmask(SIG_SETMASK, &old, NULL);
      execv(exe, args);
      _exit(127);
    }
    close(p[1]);
    close(a[1]);
    if (pid < 0) {
      close(p[0]);
      close(a[0]);
      rd__log(RD_LOG_ERROR, "gcs keeper: fork: %s", strerror(errno));
      break;
    }
    rd__log(RD_LOG_INFO, "gcs keeper: server started (pid %d)%s", (int)pid, restarts ? ", recovering" : "");
    int rfd_open = 1, afd_open = 1, st = 0, stop = 0, served = 0, hang_killed = 0;
    uint64_t last_alive = 0;
    for (;;) {
      int ev = wait_event(sfd, rfd_open ? p[0] : -1, afd_open ? a[0] : -1, 1000);
      if (ev == -2) {   /* the server lives (or closed its end: it is going, SIGCHLD follows) */
        char buf[64];
        ssize_t r;
        while ((r = read(a[0], buf, sizeof(buf))) > 0) last_alive = mono_ms();
        if (r == 0) afd_open = 0;
      } else if (ev == -1) {
        /* a timeout: see below */
      } else if (ev == 0) {   /* the server's ready byte, or its end of the pipe closed */
        char c = 0;
        if (read(p[0], &c, 1) == 1 && c == 'R') {
          served = 1;
          last_alive = mono_ms();
        }
        if (c == 'R' && !ever_ready) {
          ever_ready = 1;
          /* restarts bind the port the first server got (--bind IP:0) */
          char port[32];
          const char *colon = strrchr(bind, ':');
          if (colon && rd__read_line(port_file, port, sizeof(port)) == 0 && port[0]) {
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
          rd__log(RD_LOG_INFO, "gcs keeper: server (pid %d) serving again after restart %d", (int)pid, restarts);
        }
        close(p[0]);
        rfd_open = 0;
      } else if (ev == SIGTERM || ev == SIGINT) {
        rd__log(RD_LOG_INFO, "gcs keeper: signal %d, stopping the server (pid %d)", ev, (int)pid);
        if (rfd_open) close(p[0]);
        status = stop_server(sfd, pid);
        stop = 1;
        break;
      } else if (ev == SIGCHLD && waitpid(pid, &st, WNOHANG) == pid) {
        if (rfd_open) close(p[0]);
        break;
      }
      uint64_t now = mono_ms();
      if (served && afd_open && !hang_killed && hang_ms > 0 && now - last_alive > (uint64_t)hang_ms) {
        rd__log(RD_LOG_ERROR, "gcs keeper: the server (pid %d) has shown no life for %llu ms: killing it", (int)pid,
                (unsigned long long)(now - last_alive));
        kill(pid, SIGKILL);
        hang_killed = 1;   /* reaped on its SIGCHLD, then started again */
      }
    }
    close(a[0]);
    if (stop) break;
    char why[96];
    describe(st, why, sizeof(why));
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {   /* someone stopped the server itself */
      rd__log(RD_LOG_INFO, "gcs keeper: the server (pid %d) stopped cleanly; stopping too", (int)pid);
      status = 0;
      break;
    }
    if (!ever_ready) {   /* it never came up: a bad argument, port or store */
      rd__log(RD_LOG_ERROR, "gcs keeper: the server (pid %d) %s before it served; not restarting", (int)pid, why);
      break;
    }
    uint64_t lived = mono_ms() - started;
    quick = lived < QUICK_MS ? quick + 1 : 0;
    if (quick > MAX_QUICK) {
      rd__log(RD_LOG_ERROR, "gcs keeper: the server %s, %d times in a row within %d s of starting; giving up",
              why, quick, QUICK_MS / 1000);
      break;
    }
    int delay = quick ? 200 << (quick - 1) : 100;
    restarts++;
    rd__log(RD_LOG_ERROR, "gcs keeper: the server (pid %d) %s after %llu ms; restart %d in %d ms", (int)pid, why,
            (unsigned long long)lived, restarts, delay);
    uint64_t end = mono_ms() + (uint64_t)delay;
    for (uint64_t now; (now = mono_ms()) < end && !stop;) {
      int ev = wait_event(sfd, -1, -1, (int)(end - now));
      if (ev == SIGTERM || ev == SIGINT) stop = 1;
    }
    if (stop) {
      status = 0;
      break;
    }
  }
  if (outer_ready >= 0) close(outer_ready);
  close(sfd);
  free(args);
  return status;
}
