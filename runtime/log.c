/* runtime/log.c - stderr logger shared by all libraydist processes. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
