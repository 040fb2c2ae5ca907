/* runtime/log.c - stderr logger shared by all libraydist processes. */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "raydist/error.h"

int rd__log_level = RD_LOG_WARN;
static char log_role[16] = "raydist";

void rd__log_init(const char *role) {
  snprintf(log_role, sizeof(log_role), "%s", role);
  const char *e = getenv("RAYDIST_LOG_LEVEL");
  if (e && *e) rd__log_level = atoi(e);
}

void rd__log_set_level(int level) { rd__log_level = level; }

void rd__log_(int level, const char *fmt, ...) {
  static const char *names[] = {"ERROR", "WARN", "INFO", "DEBUG"};
  char line[1024];
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  int n = snprintf(line, sizeof(line), "[raydist %s %d %s %ld.%03ld] ", log_role, (int)getpid(),
                   names[level < 0 ? 0 : level > 3 ? 3 : level], (long)ts.tv_sec % 100000,
                   ts.tv_nsec / 1000000);
  va_list ap;
  va_start(ap, fmt);
  if (n > 0 && n < (int)sizeof(line)) vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
  va_end(ap);
  size_t len = strlen(line);
  if (len + 1 < sizeof(line)) { line[len++] = '\n'; }
  ssize_t w = write(2, line, len);
  (void)w;
}

/* ------------------------------------------------------------ rotation */

static char rot_path[512];
static uint64_t rot_max, rot_last_ns;
static int rot_backups;

/* getenv(name) as a whole number in [0, max], def when unset. */
static int env_u64(const char *name, uint64_t def, uint64_t max, uint64_t *out) {
  const char *e = getenv(name);
  *out = def;
  if (!e || !*e) return 0;
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(e, &end, 10);
  if (*e == '-' || errno || *end || v > max) {
    fprintf(stderr, "raydist: %s must be a whole number from 0 to %llu, not '%s'\n", name, (unsigned long long)max, e);
    return RD_EINVAL;
  }
  *out = v;
  return 0;
}

int rd__log_rotation_conf(uint64_t *max_bytes, int *backups) {
  uint64_t b;
  if (env_u64("RAYDIST_ROTATION_MAX_BYTES", 512ull << 20, UINT64_MAX / 2, max_bytes) != 0 ||
      env_u64("RAYDIST_ROTATION_BACKUP_COUNT", 5, 1000, &b) != 0)
    return RD_EINVAL;
  *backups = (int)b;
  return 0;
}

int rd__log_rotation_init(const char *path) {
  int backups;
  if (rd__log_rotation_conf(&rot_max, &backups) != 0) return RD_EINVAL;
  if (strlen(path) + 8 > sizeof(rot_path)) {
    fprintf(stderr, "raydist: the log path %s is too long to rotate\n", path);
    return RD_EINVAL;
  }
  rot_backups = backups;
  snprintf(rot_path, sizeof(rot_path), "%s", path);
  return 0;
}

int rd__log_shift(const char *path, int backups) {
  char from[600], to[600];
  for (int k = backups - 1; k >= 1; k--) {   /* path.k -> path.k+1, the oldest overwritten */
    snprintf(from, sizeof(from), "%s.%d", path, k);
    snprintf(to, sizeof(to), "%s.%d", path, k + 1);
    if (rename(from, to) != 0 && errno != ENOENT)
      rd__log(RD_LOG_WARN, "log rotation: cannot rename %s: %s", from, strerror(errno));
  }
  snprintf(to, sizeof(to), "%s.1", path);
  return rename(path, to);
}

int rd__log_rotate_maybe(uint64_t now_ns) {
  if (!rot_path[0] || !rot_max || now_ns - rot_last_ns < 1000000000ull) return 0;
  rot_last_ns = now_ns;
  struct stat st;
  if (fstat(2, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size < rot_max) return 0;
  fflush(stdout);
  fflush(stderr);
  char to[sizeof(rot_path) + 16];
  if (rot_backups == 0) {   /* nothing kept: start the same file over */
    if (ftruncate(2, 0) != 0) {
      rd__log(RD_LOG_ERROR, "cannot truncate %s to rotate it: %s", rot_path, strerror(errno));
      return -1;
    }
    rd__log(RD_LOG_INFO, "log rotated: %llu bytes dropped (RAYDIST_ROTATION_BACKUP_COUNT=0)", (unsigned long long)st.st_size);
    return 1;
  }
  snprintf(to, sizeof(to), "%s.1", rot_path);
  int fd = -1;
  if (rd__log_shift(rot_path, rot_backups) != 0 ||
      (fd = open(rot_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)) < 0) {
    int e = errno;
    if (fd < 0 && access(rot_path, F_OK) != 0) (void)rename(to, rot_path);   /* keep writing where we were */
    rd__log(RD_LOG_ERROR, "cannot rotate %s: %s", rot_path, strerror(e));
    return -1;
  }
  if (dup2(fd, 1) < 0 || dup2(fd, 2) < 0) {
    int e = errno;
    close(fd);
    rd__log(RD_LOG_ERROR, "cannot rotate %s: %s", rot_path, strerror(e));
    return -1;
  }
  close(fd);
  rd__log(RD_LOG_INFO, "log rotated at %llu bytes: the previous one is %s", (unsigned long long)st.st_size, to);
  return 1;
}
