/* src/stack.c - `raydist stack`: each thread's stack, written by the
 * process itself when its node signals it (Ray's `ray stack`, which runs
 * py-spy on each worker; a C worker has no interpreter to read from
 * outside, and ptrace is often refused in containers); and a worker's
 * crash report (at the end of the file).
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
 * of a program linked without -rdynamic, and static ones, show as
 * `prog(+0xOFFSET)`, which the node names with addr2line
 * (runtime/stack_dump.c).  A crash report, read as it is, names them
 * itself from the files' full symbol tables (symbolize.c). */

#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
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

static void put_fd(int fd, const char *s, size_t n) {
  while (n) {
    ssize_t w = write(fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}
static void put(const char *s, size_t n) { put_fd(out_fd, s, n); }
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

/* v as "0x" and hex digits at p; returns the end. */
static char *put_hex0x(char *p, uintptr_t v) {
  static const char hex[] = "0123456789abcdef";
  int nd = 1;
  while (nd < 16 && (v >> (4 * nd))) nd++;
  *p++ = '0', *p++ = 'x';
  for (int i = nd - 1; i >= 0; i--) *p++ = hex[(v >> (4 * i)) & 15];
  return p;
}

/* One frame, as backtrace_symbols_fd writes it ("FILE(NAME+0xOFF)[0xPC]"),
 * named from the file's full symbol table where it can be (symbolize.c). */
static void frame_to(int fd, void *pc, int is_return) {
  const char *obj, *name;
  uintptr_t off;
  char line[1200], *p = line, *end = line + sizeof(line) - 48;
  if (!rd__sym_name(pc, is_return, &obj, &name, &off)) {
    backtrace_symbols_fd(&pc, 1, fd);
    return;
  }
  while (*obj && p < end - 300) *p++ = *obj++;
  *p++ = '(';
  while (*name && p < end) *p++ = *name++;
  *p++ = '+';
  p = put_hex0x(p, off);
  *p++ = ')', *p++ = '[';
  p = put_hex0x(p, (uintptr_t)pc);
  *p++ = ']', *p++ = '\n';
  put_fd(fd, line, (size_t)(p - line));
}

/* This thread's frames to fd, from where the signal stopped it (the
 * handler's own frames left out when the interrupted one is found among
 * them; ctx NULL: from the caller's caller).  named: frame_to's names (a
 * crash report, read as it is); else backtrace_symbols_fd's, which a
 * `raydist stack` dump gets named with file and line by its node
 * (runtime/stack_dump.c runs addr2line on the offsets). */
static void frames_to(int fd, const void *ctx, int named) {
  void *fr[STACK_FRAMES];
  int n = backtrace(fr, STACK_FRAMES), from = ctx ? 0 : 2, at_pc = 0;
  void *pc = ctx ? interrupted_pc(ctx) : NULL;
  for (int i = 0; pc && i < n && i < 8; i++)
    if (fr[i] == pc || fr[i] == (char *)pc + 1) {
      from = i;
      at_pc = 1;
      break;
    }
  if (!named) {
    if (n > from) backtrace_symbols_fd(fr + from, n - from, fd);
    return;
  }
  for (int i = from; i < n; i++) frame_to(fd, fr[i], !(at_pc && i == from));   /* the rest are return addresses */
}

/* This thread's stack, titled, to the dump. */
static void dump_self(int tid, const void *ctx) {
  char title[128];
  thread_title(title, tid);
  puts_(title);
  puts_(tid == (int)getpid() ? " (main)\n" : "\n");
  frames_to(out_fd, ctx, 0);
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

/* ----------------------------------------------------------------- crashes
 *
 * A worker that dies of a fatal signal (a bad pointer, abort(), a failed
 * assert, a stack overflow) or calls exit() in a task says so before it
 * goes, as Ray's workers print a stack trace when they crash: a report on
 * its stderr (the worker's file, and the driver's terminal with
 * log_to_driver) with the signal, the faulting address, the task it ran
 * and this thread's stack; and its tasks' owners are told why
 * (rd__worker_crash_tell), so that rd_get's error names the signal instead
 * of "died".  The handler then puts the signal's default action back and
 * raises it again: the process ends as it would have (its node sees the
 * signal, a core is dumped where cores are).  Installed only on signals
 * without a handler (a program's own, or a sanitizer's, stay), on an
 * alternate stack so that a stack overflow is reported too (each thread
 * that runs calls has one: the worker's main thread, and an actor's
 * executors, rd__crash_altstack). */

static const struct {
  int sig;
  const char *name, *what;
} fatal[] = {
    {SIGSEGV, "SIGSEGV", "Segmentation fault"}, {SIGBUS, "SIGBUS", "Bus error"},
    {SIGFPE, "SIGFPE", "Floating point exception"}, {SIGILL, "SIGILL", "Illegal instruction"},
    {SIGABRT, "SIGABRT", "Aborted"},
};
#define NFATAL (sizeof(fatal) / sizeof(fatal[0]))
#define ALT_STACK (64u << 10)

static atomic_int crashing;   /* a report is being written: another thread's crash waits for it */
static pid_t crash_pid;       /* the worker's: a child it forked (and did not exec) says nothing */

static char *put_str(char *p, const char *end, const char *s) {
  while (*s && p < end) *p++ = *s++;
  return p;
}

/* The report on stderr and the owners told: cause is the owners' word for
 * it ("died of SIGSEGV (Segmentation fault) at address 0x10", "exited with
 * status 3").  ctx: the signal's context, NULL from exit().  Returns 0
 * without a word when `quiet_idle` and no task runs. */
static int crash_report(const char *cause, const void *ctx, int quiet_idle) {
  char task[400];
  size_t tn = rd__worker_crash_task(task, sizeof(task));
  int told = rd__worker_crash_tell(cause);
  if (quiet_idle && !tn && !told) return 0;
  char line[1000], *p = line, *end = line + sizeof(line) - 32;
  p = put_str(p, end, "*** raydist worker ");
  p = put_dec(p, (long)getpid());
  p = put_str(p, end, ": ");
  p = put_str(p, end, cause);
  p = put_str(p, end, tn ? task : " (no task running)");
  p = put_str(p, end, "; its stack:\n");
  put_fd(2, line, (size_t)(p - line));
  frames_to(2, ctx, 1);
  return 1;
}

static void on_fatal(int sig, siginfo_t *si, void *ctx) {
  if (getpid() != crash_pid) {
    /* a forked child: the default action, as if no handler were there */
  } else if (!atomic_exchange(&crashing, 1)) {
    size_t k = 0;
    while (k + 1 < NFATAL && fatal[k].sig != sig) k++;
    char cause[160], *p = cause, *end = cause + sizeof(cause) - 24;
    p = put_str(p, end, "died of ");
    p = put_str(p, end, fatal[k].name);
    p = put_str(p, end, " (");
    p = put_str(p, end, fatal[k].what);
    *p++ = ')';
    if (si && si->si_code > 0 && sig != SIGABRT) {   /* the kernel's: a fault at an address */
      p = put_str(p, end, " at address ");
      p = put_hex0x(p, (uintptr_t)si->si_addr);
    }
    *p = 0;
    (void)crash_report(cause, ctx, 0);
  } else {   /* another thread's report is under way: it ends the process */
    struct timespec nap = {2, 0};
    nanosleep(&nap, NULL);
  }
  struct sigaction dfl;
  memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, NULL);
  raise(sig);   /* pending until the handler returns (a fault: also taken again on return) */
}

/* exit() while a task runs: said as a crash is, without a signal. */
static void on_exit_hook(int status, void *arg) {
  (void)arg;
  if (getpid() != crash_pid || atomic_exchange(&crashing, 1)) return;
  char cause[64], *p = cause;
  memcpy(p, "exited with status ", 19);
  p = put_dec(p + 19, status);
  memcpy(p, " (exit() called)", 17);
  (void)crash_report(cause, NULL, 1);
}

int rd__crash_altstack(void) {
  stack_t alt;
  memset(&alt, 0, sizeof(alt));
  /* the thread's for its life (a worker's threads live as long as it); mapped, not malloc'd: only the
   * kernel keeps the pointer, which a leak checker would report */
  alt.ss_sp = mmap(NULL, ALT_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  alt.ss_size = ALT_STACK;
  if (alt.ss_sp == MAP_FAILED) return 0;
  if (sigaltstack(&alt, NULL) == 0) return 1;
  munmap(alt.ss_sp, ALT_STACK);
  return 0;
}

void rd__crash_install(void) {
  void *fr[4];
  (void)backtrace(fr, 4);   /* its first call loads the unwinder: not in a handler */
  rd__sym_prepare();
  crash_pid = getpid();
  int have_alt = rd__crash_altstack();
  for (size_t k = 0; k < NFATAL; k++) {
    struct sigaction old, sa;
    if (sigaction(fatal[k].sig, NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)
      continue;   /* the program's own, or a sanitizer's */
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_fatal;
    sa.sa_flags = SA_SIGINFO | (have_alt ? SA_ONSTACK : 0);
    sigemptyset(&sa.sa_mask);
    (void)sigaction(fatal[k].sig, &sa, NULL);
  }
  (void)on_exit(on_exit_hook, NULL);
}
