/* runtime/log_files.c - a node's log files (see log_files.h): the workers'
 * files written on the loop, and the listing and reading of the logs on
 * the thread pool. */
#include "log_files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"
#include "common.h"
#include "conn.h"
#include "log.h"
#include "metrics.h"

/* ------------------------------------------------------------- writing */

static int rot_read;   /* the rotation settings, read at the first file (the node checked them when it started) */
static uint64_t rot_max;
static int rot_backups;

static void rot_conf(void) {
  if (rot_read) return;
  if (rd__log_rotation_conf(&rot_max, &rot_backups) != 0) rot_max = 0, rot_backups = 0;
  rot_read = 1;
}

void rd__wlog_name(char *out, size_t len, uint32_t wid, uint32_t job, int pid) {
  snprintf(out, len, "worker-%08" PRIx32 "-%" PRIu32 "-%d", wid, job, pid);
}

int rd__wlog_open(rd__wlog *l, const char *dir, uint32_t wid, uint32_t job, int pid, int which) {
  l->fd = -1;
  l->size = 0;
  l->gen = 0;
  rot_conf();
  int n = snprintf(l->path, sizeof(l->path), "%s/logs", dir);
  if (n < 0 || (size_t)n >= sizeof(l->path) - 64) return errno = ENAMETOOLONG, -1;
  if (mkdir(l->path, 0700) != 0 && errno != EEXIST) return -1;
  char name[64];
  rd__wlog_name(name, sizeof(name), wid, job, pid);
  snprintf(l->path + n, sizeof(l->path) - (size_t)n, "/%s.%s", name, which == 2 ? "err" : "out");
  l->fd = open(l->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (l->fd < 0) return -1;
  struct stat st;
  if (fstat(l->fd, &st) == 0) l->size = (uint64_t)st.st_size;   /* a reused pid's file of an earlier node run */
  return 0;
}

/* l's file has reached the limit: its backups shifted and a new one
 * opened (or, keeping none, the same one started over).  -1 when that
 * failed (logged): writing goes on where it was. */
static int wlog_rotate(rd__wlog *l) {
  if (rot_backups == 0) {
    if (ftruncate(l->fd, 0) != 0) goto failed;
    l->size = 0;
    l->gen++;   /* the node's task ranges in this file move to its first backup (or go) */
    return 0;
  }
  if (rd__log_shift(l->path, rot_backups) != 0) goto failed;
  int fd = open(l->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) goto failed;
  close(l->fd);
  l->fd = fd;
  l->size = 0;
  l->gen++;
  return 0;
failed:
  rd__log(RD_LOG_ERROR, "cannot rotate %s: %s", l->path, strerror(errno));
  return -1;
}

uint64_t rd__wlog_here(rd__wlog *l) {
  if (l->fd >= 0 && rot_max && l->size >= rot_max) (void)wlog_rotate(l);
  return l->size;
}

int rd__wlog_backups(void) {
  rot_conf();
  return rot_backups;
}

void rd__wlog_write(rd__wlog *l, const char *p, size_t n) {
  if (l->fd < 0 || !n) return;
  (void)rd__wlog_here(l);
  while (n) {
    ssize_t w = write(l->fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      rd__log(RD_LOG_ERROR, "cannot write the worker's output to %s: %s (no more is kept there)", l->path,
              w < 0 ? strerror(errno) : "nothing written");
      rd__wlog_close(l);
      return;
    }
    p += w;
    n -= (size_t)w;
    l->size += (uint64_t)w;
  }
}

void rd__wlog_remove(const char *dir, uint32_t wid, uint32_t job, int pid) {
  rot_conf();
  char name[64], path[600];
  rd__wlog_name(name, sizeof(name), wid, job, pid);
  for (int which = 0; which < 2; which++)
    for (int k = 0; k <= rot_backups; k++) {
      int n = snprintf(path, sizeof(path), "%s/logs/%s.%s", dir, name, which ? "err" : "out");
      if (k) snprintf(path + n, sizeof(path) - (size_t)n, ".%d", k);
      if (unlink(path) != 0 && errno == ENOENT && k) break;   /* no older backups */
    }
}

void rd__wlog_close(rd__wlog *l) {
  if (l->fd >= 0) close(l->fd);
  l->fd = -1;
}

/* ----------------------------------------------------------- the files */

/* A node's own log at the top of its directory: NAME.log or NAME.log.N. */
static int top_log_name(const char *name) {
  const char *d = strstr(name, ".log");
  if (!d || d == name) return 0;
  d += 4;
  if (!*d) return 1;
  if (*d++ != '.' || !*d) return 0;
  while (*d >= '0' && *d <= '9') d++;
  return !*d;
}

/* A name a client may ask for: no path in it, not hidden. */
static int plain_name(const char *name) {
  return name[0] && name[0] != '.' && !strchr(name, '/') && strlen(name) < 200;
}

/* Where a listed name lives: dir/logs/NAME (a worker's) or dir/NAME. */
static void name_path(char *out, size_t len, const char *dir, const char *name) {
  snprintf(out, len, "%s%s/%s", dir, strncmp(name, "worker-", 7) ? "" : "/logs", name);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

typedef struct names {
  char **v;
  size_t n, cap;
  int oom;
} names;

static void names_add(names *s, const char *name) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 64;
    char **v = realloc(s->v, cap * sizeof(*v));
    if (!v) return (void)(s->oom = 1);
    s->v = v;
    s->cap = cap;
  }
  if (!(s->v[s->n] = strdup(name))) return (void)(s->oom = 1);
  s->n++;
}

/* The regular files of dir that keep(name) takes and glob matches. */
static void names_scan(names *s, const char *dir, const char *glob, int (*keep)(const char *)) {
  DIR *d = opendir(dir);
  if (!d) return;
  for (struct dirent *e; (e = readdir(d)) != NULL && !s->oom;) {
    if (!plain_name(e->d_name) || !keep(e->d_name) || fnmatch(glob, e->d_name, 0) != 0) continue;
    char p[1024];
    struct stat st;
    snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
    if (lstat(p, &st) == 0 && S_ISREG(st.st_mode)) names_add(s, e->d_name);
  }
  closedir(d);
}

static int worker_name(const char *name) { return !strncmp(name, "worker-", 7); }

/* The newest file (the highest worker number) of worker pid with suffix
 * on this node, into out: 1, or 0 when there is none. */
static int pid_file(const char *dir, int pid, const char *suffix, char *out, size_t len) {
  char p[1024];
  snprintf(p, sizeof(p), "%s/logs", dir);
  DIR *d = opendir(p);
  if (!d) return 0;
  uint32_t best = 0;
  int found = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    unsigned wid, job;
    int fpid, end = 0;
    char sfx[8];
    if (sscanf(e->d_name, "worker-%8x-%u-%d.%7[a-z]%n", &wid, &job, &fpid, sfx, &end) != 4 || e->d_name[end] ||
        fpid != pid || strcmp(sfx, suffix) != 0)
      continue;
    if (found && wid <= best) continue;
    snprintf(out, len, "%s", e->d_name);
    best = wid;
    found = 1;
  }
  closedir(d);
  return found;
}

/* Where the last `lines` lines of fd's bytes [off, end) start (a last
 * newline at end ends the last line, it does not start another); the
 * search stops once more than RD_LOGS_MAX_BYTES are behind it (more than
 * one answer may give). */
static uint64_t lines_start(int fd, uint64_t off, uint64_t end, long lines) {
  if (lines < 0) return off;
  if (lines == 0) return end;
  char buf[65536];
  uint64_t pos = end;
  long seen = 0;
  int skip_last = 1;
  while (pos > off) {
    size_t n = pos - off < sizeof(buf) ? (size_t)(pos - off) : sizeof(buf);
    ssize_t r = pread(fd, buf, n, (off_t)(pos - n));
    if (r != (ssize_t)n) return off;
    for (size_t i = n; i-- > 0;) {
      if (buf[i] != '\n') {
        skip_last = 0;
        continue;
      }
      if (skip_last) {   /* the newline that ends the file */
        skip_last = 0;
        continue;
      }
      if (++seen == lines) return pos - n + i + 1;
    }
    pos -= n;
    if (end - pos > RD_LOGS_MAX_BYTES) return pos;
  }
  return off;
}

int rd__log_text(int fd, uint64_t size, uint64_t off, uint64_t end, long lines, const char *name, char **out,
                 size_t *len, char *why, size_t wl) {
  *out = NULL;
  *len = 0;
  if (end > size) end = size;
  if (off > end) off = end;
  uint64_t start = lines_start(fd, off, end, lines);
  if (end - start > RD_LOGS_MAX_BYTES) {
    snprintf(why, wl, "%s has %" PRIu64 " bytes to give, more than %" PRIu64 " at once: ask for its last lines "
                      "(lines=N) or a range (offset, end)", name, end - start, RD_LOGS_MAX_BYTES);
    return 413;
  }
  size_t n = (size_t)(end - start);
  char *b = malloc(n + 1);
  ssize_t r = 0;
  size_t got = 0;
  while (b && got < n && (r = pread(fd, b + got, n - got, (off_t)(start + got))) > 0) got += (size_t)r;
  if (!b || r < 0) {
    if (b) snprintf(why, wl, "cannot read %s: %s", name, strerror(errno));
    else snprintf(why, wl, "node out of memory");
    free(b);
    return 500;
  }
  *out = b;   /* a file cut short meanwhile: what it had */
  *len = got;
  return 0;
}

/* ------------------------------------------------------------- serving */

typedef struct logs_req {
  uv_work_t work;
  char dir[512];
  int file, stat, pid;
  long lines;
  uint64_t off, end;
  int has_end;
  char glob[256], filename[256], suffix[8], task[64];
  rd__http_reply reply;
  void *arg;
  int code;
  rd__mbuf out;             /* the answer (200), or the error's line */
} logs_req;

static void fail(logs_req *q, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(logs_req *q, int code, const char *fmt, ...) {
  char msg[700];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  free(q->out.p);
  q->out = (rd__mbuf){0};
  rd__mbuf_printf(&q->out, "%s\n", msg);
  q->code = code;
}

static void list_work(logs_req *q) {
  names s = {0};
  char lp[600];
  names_scan(&s, q->dir, q->glob, top_log_name);
  snprintf(lp, sizeof(lp), "%s/logs", q->dir);
  names_scan(&s, lp, q->glob, worker_name);
  if (!s.oom && s.n) qsort(s.v, s.n, sizeof(*s.v), by_name);
  rd__mbuf_printf(&q->out, "{\"files\": [");
  for (size_t i = 0; i < s.n; i++) {
    if (i) rd__mbuf_printf(&q->out, ", ");
    rd__mbuf_json_cstr(&q->out, s.v[i]);
    free(s.v[i]);
  }
  rd__mbuf_printf(&q->out, "]}\n");
  free(s.v);
  if (s.oom || q->out.oom) fail(q, 500, "node out of memory");
  else q->code = 200;
}

static void file_work(logs_req *q) {
  if (!q->filename[0] && !pid_file(q->dir, q->pid, q->suffix, q->filename, sizeof(q->filename))) {
    fail(q, 404, "no %s file of a worker with pid %d on this node (a worker's files are in %s/logs)", q->suffix,
         q->pid, q->dir);
    return;
  }
  if (!plain_name(q->filename) || !(worker_name(q->filename) || top_log_name(q->filename))) {
    fail(q, 400, "not a log's name: '%.100s' (the names are what GET /api/logs lists)", q->filename);
    return;
  }
  char p[1024];
  name_path(p, sizeof(p), q->dir, q->filename);
  int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    int e = errno;
    if (fd >= 0) close(fd);
    fail(q, e == ENOENT ? 404 : 500, "no log '%.100s' on this node%s%s", q->filename, e == ENOENT ? "" : ": ",
         e == ENOENT ? "" : strerror(e));
    return;
  }
  uint64_t size = (uint64_t)st.st_size;
  if (q->stat) {
    rd__mbuf_printf(&q->out, "{\"filename\": ");
    rd__mbuf_json_cstr(&q->out, q->filename);
    rd__mbuf_printf(&q->out, ", \"size\": %" PRIu64 ", \"inode\": %llu}\n", size, (unsigned long long)st.st_ino);
    close(fd);
    q->code = q->out.oom ? 500 : 200;
    return;
  }
  char *b = NULL, why[600];
  size_t got = 0;
  int code = rd__log_text(fd, size, q->off, q->has_end ? q->end : UINT64_MAX, q->lines, q->filename, &b, &got, why,
                          sizeof(why));
  close(fd);
  if (code) {
    fail(q, code, "%s", why);
    return;
  }
  q->out = (rd__mbuf){.p = b, .len = got, .cap = got + 1};
  q->code = 200;
}

static void logs_work(uv_work_t *w) {
  logs_req *q = w->data;
  if (q->file) file_work(q);
  else list_work(q);
}

static void logs_done(uv_work_t *w, int status) {
  logs_req *q = w->data;
  if (status != 0) q->reply(q->arg, 503, "the node is stopping\n", 21);
  else q->reply(q->arg, q->code, q->out.p ? q->out.p : "", q->out.len);
  free(q->out.p);
  free(q);
}

int rd__logs_path(const char *path) { return !strcmp(path, "/api/logs") || !strcmp(path, "/api/logs/file"); }

static void answer(rd__http_reply reply, void *arg, int code, const char *msg) { reply(arg, code, msg, strlen(msg)); }

/* key=value pairs of the query into q: 0, or -1 with why. */
static int parse(logs_req *q, const char *query, char *why, size_t wl) {
  rd__query it;
  if (rd__query_open(&it, query) != 0) return snprintf(why, wl, "node out of memory"), -1;
  int rc = 0, has_pid = 0, more;
  char *p, *v;
  while (rc == 0 && (more = rd__query_next(&it, &p, &v)) != 0) {
    char *end = NULL;
    errno = 0;
    if (more < 0) {
      snprintf(why, wl, "a bad %%-escape in the query");
      rc = -1;
    } else if (!strcmp(p, "glob") || !strcmp(p, "filename")) {
      char *to = p[0] == 'g' ? q->glob : q->filename;
      size_t cap = p[0] == 'g' ? sizeof(q->glob) : sizeof(q->filename);
      if (strlen(v) >= cap) snprintf(why, wl, "%s is too long", p), rc = -1;
      else snprintf(to, cap, "%s", v);
    } else if (!strcmp(p, "suffix")) {
      if (strcmp(v, "out") != 0 && strcmp(v, "err") != 0)
        snprintf(why, wl, "suffix must be out or err, not '%.20s'", v), rc = -1;
      else snprintf(q->suffix, sizeof(q->suffix), "%s", v);
    } else if (!strcmp(p, "pid")) {
      long pid = strtol(v, &end, 10);
      if (!*v || *end || pid <= 0 || pid > 1 << 30) snprintf(why, wl, "pid must be a process id, not '%.40s'", v), rc = -1;
      else q->pid = (int)pid, has_pid = 1;
    } else if (!strcmp(p, "lines")) {
      long l = strtol(v, &end, 10);
      if (!*v || *end || errno || l < -1) snprintf(why, wl, "lines must be -1 (all) or a count, not '%.40s'", v), rc = -1;
      else q->lines = l;
    } else if (!strcmp(p, "offset") || !strcmp(p, "end")) {
      unsigned long long o = strtoull(v, &end, 10);
      if (!*v || *end || errno || *v == '-') snprintf(why, wl, "%s must be a byte offset, not '%.40s'", p, v), rc = -1;
      else if (p[0] == 'o') q->off = o;
      else q->end = o, q->has_end = 1;
    } else if (!strcmp(p, "task")) {
      if (!*v || strlen(v) >= sizeof(q->task)) snprintf(why, wl, "task must be a task's id, not '%.40s'", v), rc = -1;
      else snprintf(q->task, sizeof(q->task), "%s", v);
    } else if (!strcmp(p, "stat")) {
      q->stat = !strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "True");
    }   /* others (timeout, node_id, ... forwarded by the state API) are not this node's to read */
  }
  rd__query_close(&it);
  if (rc == 0 && q->file && !q->filename[0] && !has_pid && !q->task[0])
    snprintf(why, wl, "name the file (filename=NAME, as GET /api/logs lists), the worker (pid=P) or the task (task=ID)"),
        rc = -1;
  if (rc == 0 && q->task[0] && (q->filename[0] || q->has_end || q->off))
    snprintf(why, wl, "task=ID names its own file and range: not with filename, offset or end"), rc = -1;
  return rc;
}

void rd__logs_http(uv_loop_t *loop, const char *dir, const char *path, const char *query, const char *auth,
                   rd__http_reply reply, void *arg) {
  if (!rd__cluster_http_gate("logs API", rd__node_local_token(), auth, reply, arg)) return;   /* an embedded node: its own */
  logs_req *q = calloc(1, sizeof(*q));
  if (!q) {
    answer(reply, arg, 500, "node out of memory\n");
    return;
  }
  q->file = !strcmp(path, "/api/logs/file");
  q->lines = -1;
  snprintf(q->glob, sizeof(q->glob), "*");
  snprintf(q->suffix, sizeof(q->suffix), "out");
  snprintf(q->dir, sizeof(q->dir), "%s", dir);
  char why[300];
  if (parse(q, query, why, sizeof(why)) != 0) {
    free(q);
    char line[320];
    snprintf(line, sizeof(line), "%s\n", why);
    answer(reply, arg, 400, line);
    return;
  }
  if (q->file && q->task[0] &&   /* the task's range, found here on the loop, read on the pool */
      rd__node_task_lines(q->task, q->pid, strcmp(q->suffix, "err") ? 1 : 2, q->filename, sizeof(q->filename), &q->off,
                          &q->end, &q->has_end, why, sizeof(why) - 1) != 0) {
    free(q);
    size_t l = strlen(why);
    why[l] = '\n';
    reply(arg, 404, why, l + 1);
    return;
  }
  q->reply = reply;
  q->arg = arg;
  q->work.data = q;
  if (uv_queue_work(loop, &q->work, logs_work, logs_done) != 0) {
    free(q);
    answer(reply, arg, 503, "the node is stopping\n");
  }
}

/* ------------------------------------------------ an embedded session's end */

/* 1 when some file in dir (a session's logs/) holds a byte. */
static int logs_written(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  int any = 0;
  while (d && !any && (e = readdir(d))) {
    char p[1024];
    struct stat st;
    snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
    any = e->d_name[0] != '.' && stat(p, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
  }
  if (d) closedir(d);
  return any;
}

typedef struct ended {
  char name[256];
  struct timespec at;
} ended;

static int ended_newer(const void *a, const void *b) {
  const ended *x = a, *y = b;
  if (x->at.tv_sec != y->at.tv_sec) return x->at.tv_sec < y->at.tv_sec ? 1 : -1;
  return x->at.tv_nsec < y->at.tv_nsec ? 1 : x->at.tv_nsec > y->at.tv_nsec ? -1 : 0;
}

/* An ending session: removed whole, or (keep, and a worker wrote
 * anything) left with logs/ alone, then task_lines.json and `ended`
 * (rd__session_end). */
static void session_strip(const char *dir, size_t keep, int driver_pid, const char *exe, uint64_t start_ms,
                          const char *task_lines, size_t tl_len) {
  char logs[600], p[700];
  snprintf(logs, sizeof(logs), "%s/logs", dir);
  if (!keep || !logs_written(logs)) {
    rd__rm_rf(dir);
    return;
  }
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d))) {   /* all but the workers' files */
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, "logs")) continue;
    struct stat st;
    snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
    if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) rd__rm_rf(p);
    else unlink(p);
  }
  if (d) closedir(d);
  snprintf(p, sizeof(p), "%s/task_lines.json", dir);
  (void)rd__write_file(p, task_lines, tl_len);   /* none: as if no task had lines */
  char info[4400], to[700];
  int n = snprintf(info, sizeof(info), "driver_pid=%d\nexe=%.4096s\nstart_ms=%llu\nend_ms=%llu\n", driver_pid,
                   exe ? exe : "", (unsigned long long)start_ms, (unsigned long long)rd__wall_ms());
  snprintf(p, sizeof(p), "%s/ended.tmp", dir);   /* written whole, then named: it marks the session ended */
  snprintf(to, sizeof(to), "%s/ended", dir);
  /* its mtime orders the ended sessions (sessions_prune): the precise time, not the file system's
   * coarse clock, under which two sessions ended a few ms apart tie and either may be pruned */
  struct timespec now[2];
  clock_gettime(CLOCK_REALTIME, &now[0]);
  now[1] = now[0];
  int ok = rd__write_file(p, info, (size_t)n) == 0 && utimensat(AT_FDCWD, p, now, 0) == 0;
  if (!ok || rename(p, to) != 0) {
    rd__log(RD_LOG_WARN, "cannot mark the session %s ended: %s; removing it", dir, strerror(errno));
    rd__rm_rf(dir);
  }
}

/* A session whose node died without ending it (SIGKILL, the kernel's OOM
 * killer): its node.lock is free.  Ended as its node would have (its
 * ranges are gone with the node: no task's own lines). */
static void session_orphan(const char *dir, size_t keep) {
  char p[1100];
  snprintf(p, sizeof(p), "%s/node.lock", dir);
  int fd = open(p, O_RDWR | O_CLOEXEC);
  if (fd < 0) return;   /* a session that starts, or of a version without the lock */
  if (flock(fd, LOCK_EX | LOCK_NB) == 0) {   /* held while it is ended: no two end it */
    struct stat st;
    if (stat(p, &st) == 0) {   /* not ended meanwhile by another (it removes the lock file) */
      rd__log(RD_LOG_INFO, "session %s: its node died without ending it; ended here", dir);
      session_strip(dir, keep, 0, "", 0, "{\"tasks\": []}\n", 15);
    }
  }
  close(fd);
}

/* Ends root's sessions whose node died without it, then removes the
 * ended sessions past the newest `keep` (by the time their `ended` file
 * was written). */
static void sessions_prune(const char *root, size_t keep) {
  DIR *d = opendir(root);
  ended *v = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    char p[1024];
    struct stat st;
    if (strncmp(e->d_name, "session-", 8) != 0 || strlen(e->d_name) >= sizeof(v->name)) continue;
    snprintf(p, sizeof(p), "%s/%s/ended", root, e->d_name);
    if (stat(p, &st) != 0) {   /* a session that runs, or one whose node died */
      snprintf(p, sizeof(p), "%s/%s", root, e->d_name);
      session_orphan(p, keep);
      snprintf(p, sizeof(p), "%s/%s/ended", root, e->d_name);
      if (stat(p, &st) != 0) continue;
    }
    if (n == cap) {
      ended *w = realloc(v, (cap = cap ? 2 * cap : 32) * sizeof(*v));
      if (!w) break;
      v = w;
    }
    snprintf(v[n].name, sizeof(v[n].name), "%s", e->d_name);
    v[n++].at = st.st_mtim;
  }
  if (d) closedir(d);
  if (n > keep) {
    qsort(v, n, sizeof(*v), ended_newer);
    for (size_t i = keep; i < n; i++) {
      char p[1024];
      snprintf(p, sizeof(p), "%s/%s", root, v[i].name);
      rd__rm_rf(p);   /* another node's prune may remove it at once: harmless */
    }
  }
  free(v);
}

size_t rd__sessions_kept(void) {
  const char *e = getenv("RAYDIST_SESSIONS_KEPT");
  char *end = NULL;
  long v = e && *e ? strtol(e, &end, 10) : 10;
  if (e && *e && (*end || v < 0 || v > 100000)) {
    rd__log(RD_LOG_WARN, "RAYDIST_SESSIONS_KEPT must be a whole number from 0 to 100000, not '%s': 10 kept", e);
    v = 10;
  }
  return (size_t)v;
}

int rd__session_lock(const char *dir) {
  char p[700], tmp[720];
  snprintf(p, sizeof(p), "%s/node.lock", dir);
  snprintf(tmp, sizeof(tmp), "%s.tmp", p);   /* locked before it has its name: no one finds it free */
  int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0 || rename(tmp, p) != 0) {
    rd__log(RD_LOG_WARN, "cannot lock %s: %s (a killed node's session is then not ended by others)", p, strerror(errno));
    if (fd >= 0) close(fd), unlink(tmp);
    return -1;
  }
  return fd;   /* held until the node exits, however it does */
}

void rd__sessions_tidy(void) {
  char root[200];
  rd__session_root(root, sizeof(root));
  sessions_prune(root, rd__sessions_kept());
}

void rd__session_end(const char *dir, size_t keep, int driver_pid, const char *exe, uint64_t start_ms,
                     const char *task_lines, size_t tl_len) {
  session_strip(dir, keep, driver_pid, exe, start_ms, task_lines, tl_len);
  char root[600];
  snprintf(root, sizeof(root), "%s", dir);
  char *slash = strrchr(root, '/');
  if (slash) *slash = 0, sessions_prune(root, keep);
}
