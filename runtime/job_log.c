/* runtime/job_log.c - a submitted job's log: the keeper's copy and
 * rotation, and reads by offset (see job_log.h).
 *
 * Why segments named by their start rather than node.log's log.1, log.2:
 * a reader holding an offset (`job logs --follow`, a tool link's `logs`
 * request) must find the same byte after a rotation.  A segment's name
 * never changes while it exists, and the link `log` is swapped by a
 * rename, so a reader sees either the old segment or the new one, each
 * with its start in its name; no lock between the keeper and readers. */
#include "job_log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define SEG_MAX 2048   /* segments looked at in a directory (the newest kept: at most 1001) */

/* "log.<digits>" into *start: 1, or 0 for any other name. */
static int seg_name(const char *name, uint64_t *start) {
  if (strncmp(name, "log.", 4) != 0 || !name[4] || strlen(name + 4) > 20) return 0;
  uint64_t v = 0;
  for (const char *c = name + 4; *c; c++) {
    if (*c < '0' || *c > '9') return 0;
    v = v * 10 + (uint64_t)(*c - '0');
  }
  *start = v;
  return 1;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* The segments' starts in dir, ascending: how many (at most max). */
static int segments(const char *dir, uint64_t *starts, int max) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while (n < max && (e = readdir(d)))
    if (seg_name(e->d_name, &starts[n])) n++;
  closedir(d);
  qsort(starts, (size_t)n, sizeof(*starts), cmp_u64);
  return n;
}

/* ---- the keeper's side ---- */

/* A new segment from l->start, and `log` pointing at it: its fd, or -1. */
static int seg_make(rd_job_log *l) {
  char path[900], name[32], tmp[900], link[900];
  snprintf(name, sizeof(name), "log.%llu", (unsigned long long)l->start);
  snprintf(path, sizeof(path), "%s/%s", l->dir, name);
  snprintf(tmp, sizeof(tmp), "%s/log.link", l->dir);
  snprintf(link, sizeof(link), "%s/log", l->dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  (void)unlink(tmp);
  if (symlink(name, tmp) != 0 || rename(tmp, link) != 0) {
    int e = errno;
    close(fd);
    (void)unlink(path);
    errno = e;
    return -1;
  }
  return fd;
}

/* Removes all but the newest backups segments before the current one. */
static void prune(rd_job_log *l) {
  static uint64_t s[SEG_MAX];
  int n = segments(l->dir, s, SEG_MAX), older = 0;
  for (int i = 0; i < n; i++) older += s[i] < l->start;
  for (int i = 0; i < n && older > l->backups; i++) {
    if (s[i] >= l->start) continue;
    char path[900];
    snprintf(path, sizeof(path), "%s/log.%llu", l->dir, (unsigned long long)s[i]);
    (void)unlink(path);
    older--;
  }
}

/* The next segment: writing goes on there (and the keeper's own stdout
 * and stderr with it).  A segment that cannot be made leaves the current
 * one growing; the next cut tries again. */
static void rotate(rd_job_log *l) {
  rd_job_log next = *l;
  next.start = l->start + l->size;
  int fd = seg_make(&next);
  if (fd < 0) return;
  (void)dup2(fd, 1);
  (void)dup2(fd, 2);
  if (l->fd >= 0) close(l->fd);
  l->fd = fd;
  l->start = next.start;
  l->size = 0;
  prune(l);
}

static void put(rd_job_log *l, const char *buf, size_t n) {
  while (n > 0 && l->fd >= 0) {
    ssize_t w = write(l->fd, buf, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;   /* a full disk: the bytes are lost, not the program */
    l->size += (uint64_t)w;
    buf += w;
    n -= (size_t)w;
  }
}

/* Writes n bytes, cutting to a new segment at the first line end that
 * takes the current one to the limit, or mid-line at twice the limit. */
static void copy(rd_job_log *l, const char *buf, size_t n) {
  uint64_t max = l->max_bytes;
  while (max && n > 0 && l->size + n >= max) {
    size_t k = l->size < max ? (size_t)(max - l->size) : 1;   /* bytes to the limit (1: past it) */
    size_t cut = l->size < 2 * max && 2 * max - l->size < n ? (size_t)(2 * max - l->size) : n;
    while (k <= cut && buf[k - 1] != '\n' && buf[k - 1] != '\r') k++;
    if (k > cut) {   /* no line end from the limit to twice it */
      if (cut == n && l->size + n < 2 * max) break;
      k = cut;
    }
    put(l, buf, k);
    rotate(l);
    buf += k;
    n -= k;
  }
  put(l, buf, n);
}

int rd__job_log_open(rd_job_log *l, const char *dir, uint64_t max_bytes, int backups) {
  memset(l, 0, sizeof(*l));
  snprintf(l->dir, sizeof(l->dir), "%s", dir);
  l->max_bytes = max_bytes;
  l->backups = backups;
  l->fd = seg_make(l);
  return l->fd;
}

/* Reads what pipe in holds (nonblocking) into the log: 0 at its end (no
 * writer left), 1 otherwise. */
static int drain(rd_job_log *l, int in) {
  char buf[65536];
  for (;;) {
    ssize_t r = read(in, buf, sizeof(buf));
    if (r > 0) copy(l, buf, (size_t)r);
    else if (r == 0) return 0;
    else if (errno != EINTR) return 1;
  }
}

int rd__job_log_pump(rd_job_log *l, int in, int sfd, int pid, int *stop_sig) {
  int open_in = 1, st = 0;
  *stop_sig = 0;
  fcntl(in, F_SETFL, fcntl(in, F_GETFL) | O_NONBLOCK);
  for (;;) {
    struct pollfd p[2] = {{sfd, POLLIN, 0}, {open_in ? in : -1, POLLIN, 0}};
    if (poll(p, 2, 1000) < 0 && errno != EINTR) break;
    if (p[1].revents) open_in = drain(l, in);
    struct signalfd_siginfo si;
    /* (SIGUSR1, a withdrawal that came too late: the program runs) */
    if ((p[0].revents & POLLIN) && read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si) && si.ssi_signo != SIGCHLD &&
        si.ssi_signo != SIGUSR1) {
      /* the keeper told to end: so is the program's group, as `job stop`
       * does (SIGKILL the second time); its output is still copied */
      int sig = *stop_sig ? SIGKILL : SIGTERM;
      if (!*stop_sig) *stop_sig = (int)si.ssi_signo;
      kill(-pid, sig);
      kill(pid, sig);
    }
    /* every wake: a SIGCHLD merged with another, or a missed one, is seen */
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) break;
  }
  /* what it wrote before it exited is in the pipe now: copied before the
   * keeper writes the status a follower ends on */
  if (open_in) (void)drain(l, in);
  return st;
}

void rd__job_log_rest(rd_job_log *l, int in) {
  fcntl(in, F_SETFL, fcntl(in, F_GETFL) & ~O_NONBLOCK);
  (void)drain(l, in);
}

/* ---- readers ---- */

/* The segment `log` points to: 0 and its start; 1 for a plain file (a
 * job of an older node: no segments); -1 when there is no log yet. */
static int current(const char *dir, uint64_t *start) {
  char link[900], t[64];
  snprintf(link, sizeof(link), "%s/log", dir);
  ssize_t n = readlink(link, t, sizeof(t) - 1);
  if (n < 0) {
    *start = 0;
    return errno == EINVAL ? 1 : -1;
  }
  t[n] = 0;
  return seg_name(t, start) ? 0 : -1;
}

/* pread of up to len bytes of dir/name at off: the count, or -1 with
 * errno (ENOENT: removed meanwhile). */
static ssize_t read_at(const char *dir, const char *name, uint64_t off, char *buf, size_t len) {
  char path[900];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t got = 0;
  while (got < len) {
    ssize_t r = pread(fd, buf + got, len - got, (off_t)(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fd);
  return (ssize_t)got;
}

uint64_t rd__job_log_end(const char *dir) {
  uint64_t cur;
  int kind = current(dir, &cur);
  if (kind < 0) return 0;
  char path[900];
  if (kind == 1) snprintf(path, sizeof(path), "%s/log", dir);
  else snprintf(path, sizeof(path), "%s/log.%llu", dir, (unsigned long long)cur);
  struct stat st;
  return stat(path, &st) == 0 ? cur + (uint64_t)st.st_size : cur;   /* rotated meanwhile: at least cur */
}

size_t rd__job_log_read(const char *dir, uint64_t *off, char *buf, size_t len, uint64_t *dropped) {
  static uint64_t s[SEG_MAX];
  /* a rotation, and the removal of a segment, can come between looking and
   * opening: look again (a few times; the keeper cuts at most once a chunk) */
  for (int tries = 0; tries < 16; tries++) {
    uint64_t cur;
    int kind = current(dir, &cur);
    if (kind < 0) return 0;
    if (kind == 1) {
      ssize_t r = read_at(dir, "log", *off, buf, len);
      if (r < 0) return 0;
      *off += (uint64_t)r;
      return (size_t)r;
    }
    char name[32];
    if (*off >= cur) {
      snprintf(name, sizeof(name), "log.%llu", (unsigned long long)cur);
      ssize_t r = read_at(dir, name, *off - cur, buf, len);
      if (r < 0) continue;
      *off += (uint64_t)r;
      return (size_t)r;
    }
    int n = segments(dir, s, SEG_MAX), i = -1;
    for (int k = 0; k < n && s[k] <= *off; k++) i = k;
    if (i < 0) {   /* before the oldest kept: skip to it */
      uint64_t next = n > 0 && s[0] < cur ? s[0] : cur;
      *dropped += next - *off;
      *off = next;
      continue;
    }
    uint64_t end = i + 1 < n && s[i + 1] < cur ? s[i + 1] : cur;
    size_t want = end - *off < len ? (size_t)(end - *off) : len;
    snprintf(name, sizeof(name), "log.%llu", (unsigned long long)s[i]);
    ssize_t r = read_at(dir, name, *off - s[i], buf, want);
    if (r < 0) continue;
    if (r == 0) {   /* shorter than its successor's start says (a write lost): go on there */
      *dropped += end - *off;
      *off = end;
      continue;
    }
    *off += (uint64_t)r;
    return (size_t)r;
  }
  return 0;
}
