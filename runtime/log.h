/* runtime/log.h - one-line structured logs on stderr for every process.
 *
 * Level from RAYDIST_LOG_LEVEL (0 error, 1 warn (default), 2 info, 3 debug).
 * Each line names the process role and pid so interleaved output stays
 * readable.  Logging never fails the caller. */
#ifndef RD_RUNTIME_LOG_H
#define RD_RUNTIME_LOG_H

enum { RD_LOG_ERROR = 0, RD_LOG_WARN = 1, RD_LOG_INFO = 2, RD_LOG_DEBUG = 3 };

extern int rd__log_level;
void rd__log_init(const char *role);
void rd__log_set_level(int level);
void rd__log_(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define rd__log(level, ...) \
  do { if ((level) <= rd__log_level) rd__log_((level), __VA_ARGS__); } while (0)

#endif
