/* src/stack.c - `raydist stack`: each thread's stack, written by the
 * process itself when its node signals it (Ray's `ray stack`, which runs
 * py-spy on each worker; a C worker has no interpreter to read from
 * outside, and ptrace is often refused in containers).
 *
 * rd__stack_install puts a handler on rd__stack_signal() (a real-time
 * signal) before the process connects to its node.  The thread the
 * signal reaches leads: it writes its own stack to
 * SESSION/logs/stack-PID.tmp, then asks each other thread of the process
 * in turn (tgkill) and waits up to a second for it to write its own, and
 * renames the file to stack-PID.txt, which the node reads
 * (runtime/stack_dump.c).  Only async-signal-safe calls: open, write,
 * getdents64, tgkill, nanosleep, rename; backtrace() is called once at
 * install so that its first call (which loads libgcc's unwinder) is not
 * made in a handler.  Frames are named by backtrace_symbols_fd: functions
 * of a program linked without -rdynamic show as `prog(+0xOFFSET)`, which
 * addr2line -e prog turns into a name. */

#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "internal.h"
#include "log.h"

#define STACK_FRAMES 64
#define STACK_WAIT_MS 1000   /* how long the leader waits for each other thread */

static char dir[300];                /* SESSION/logs */
static atomic_int installed, busy;   /* busy: a dump in progress */
static atomic_int want_tid;          /* the thread asked to write its stack now */
static atomic_int written;           /* ... has */
static int out_fd = -1;

static void put(const char *s, size_t n) {
  while (n) {
    ssize_t w = write(out_fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}
static void puts_(const char *s) { put(s, strlen(s)); }

/* v in decimal at p; returns the end. */
static char *put_dec(char *p, long v) {
  char t[24];
  int n = 0;
  if (v < 0) *p++ = '-', v = -v;
  do t[n++] = (char)('0' + v % 10); while ((v /= 10) && n < 23);
  while (n) *p++ = t[--n];
  return p;
}

/* "thread TID (NAME)" or "thread TID" into out (at least 64 bytes). */
static void thread_title(char *out, int tid) {
  char path[64], *p = path;
  memcpy(p, "/proc/self/task/", 16);
  p = put_dec(p + 16, tid);
  memcpy(p, "/comm", 6);
  char *o = out;
  memcpy(o, "thread ", 7);
  o = put_dec(o + 7, tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, o + 2, 32) : -1;
  if (fd >= 0) close(fd);
  if (n > 0) {
    o[0] = ' ', o[1] = '(';
    o += 2 + n;
    if (o[-1] == '\n') o--;
    *o++ = ')';
  }
  *o = 0;
}

/* The interrupted instruction's address, from the handler's context. */
static void *interrupted_pc(const void *ctx) {
  const ucontext_t *uc = ctx;
#if defined(__x86_64__)
  return (void *)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
  return (void *)uc->uc_mcontext.pc;
#else
  (void)uc;
  return NULL;
#endif
}

/* This thread's stack, from where the signal stopped it (the handler's
 * own frames left out when the interrupted one is found among them). */
static void dump_self(int tid, const void *ctx) {
  void *fr[STACK_FRAMES];
  int n = backtrace(fr, STACK_FRAMES), from = 0;
  void *pc = interrupted_pc(ctx);
  for (int i = 0; pc && i < n && i < 8; i++)
    if (fr[i] == pc || fr[i] == (char *)pc + 1) {
      from = i;
      break;
    }
  char title[128];
  thread_title(title, tid);
  puts_(title);
  puts_(tid == (int)getpid() ? " (main)\n" : "\n");
  if (n > from) backtrace_symbols_fd(fr + from, n - from, out_fd);
  puts_("\n");
}

/* Every other thread of this process, one at a time. */
static void dump_others(int me, int sig) {
  int dfd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return;
  char buf[4096];
  long got;
  while ((got = syscall(SYS_getdents64, dfd, buf, sizeof(buf))) > 0) {
    for (long off = 0; off < got;) {
      /* struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name */
      unsigned short reclen;
      memcpy(&reclen, buf + off + 16, 2);
      const char *name = buf + off + 19;
      off += reclen;
      int tid = 0;
      for (const char *c = name; *c >= '0' && *c <= '9'; c++) tid = tid * 10 + (*c - '0');
      if (tid <= 0 || tid == me) continue;
      atomic_store(&written, 0);
      atomic_store(&want_tid, tid);
      if (syscall(SYS_tgkill, getpid(), tid, sig) != 0) {   /* it ended meanwhile */
        atomic_store(&want_tid, 0);
        continue;
      }
      struct timespec nap = {0, 5000000};
      for (int i = 0; i < STACK_WAIT_MS / 5 && !atomic_load(&written); i++) nanosleep(&nap, NULL);
      if (atomic_exchange(&want_tid, 0) == tid && !atomic_load(&written)) {
        char title[128];
        thread_title(title, tid);
        puts_(title);
        puts_(": no answer within 1 s (it blocks the signal, or cannot run)\n\n");
      }
    }
  }
  close(dfd);
}

static void on_signal(int sig, siginfo_t *si, void *ctx) {
  (void)si;
  int saved = errno, me = (int)syscall(SYS_gettid);
  if (atomic_load(&want_tid) == me) {   /* asked by the leader */
    dump_self(me, ctx);
    atomic_store(&written, 1);
    errno = saved;
    return;
  }
  int idle = 0;
  if (!atomic_compare_exchange_strong(&busy, &idle, 1)) {   /* a dump is under way */
    errno = saved;
    return;
  }
  char tmp[sizeof(dir) + 40], *p = tmp;
  size_t dl = strlen(dir);
  memcpy(p, dir, dl);
  memcpy(p += dl, "/stack-", 7);
  p = put_dec(p + 7, (long)getpid());
  char *dot = p;
  memcpy(p, ".tmp", 5);
  (void)mkdir(dir, 0700);   /* a node with RAYDIST_LOG_TO_STDERR=1 makes none */
  out_fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (out_fd >= 0) {
    char head[64], *h = head;
    memcpy(h, "process ", 8);
    h = put_dec(h + 8, (long)getpid());
    *h++ = '\n', *h++ = '\n';
    put(head, (size_t)(h - head));
    dump_self(me, ctx);
    dump_others(me, sig);
    close(out_fd);
    out_fd = -1;
    char done[sizeof(tmp)];
    memcpy(done, tmp, (size_t)(dot - tmp));
    memcpy(done + (dot - tmp), ".txt", 5);
    (void)rename(tmp, done);
  }
  atomic_store(&busy, 0);
  errno = saved;
}

void rd__stack_install(const char *session) {
  size_t n = strlen(session);
  if (n + sizeof("/logs") > sizeof(dir)) return;   /* too long a path: no dumps */
  if (atomic_load(&busy)) return;
  memcpy(dir, session, n);
  memcpy(dir + n, "/logs", sizeof("/logs"));   /* made at the first dump (mkdir is async-signal-safe) */
  if (atomic_exchange(&installed, 1)) return;
  int sig = rd__stack_signal();
  struct sigaction old;
  if (sigaction(sig, NULL, &old) == 0 && old.sa_handler != SIG_DFL) {   /* the program's own (or ignored) */
    rd__log(RD_LOG_WARN, "signal %d has a handler already: `raydist stack` cannot reach this process", sig);
    return;
  }
  void *fr[4];
  (void)backtrace(fr, 4);   /* its first call loads the unwinder: not in a handler */
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(sig, &sa, NULL) != 0) rd__log(RD_LOG_WARN, "no handler for `raydist stack`: %s", strerror(errno));
}
