/* runtime/log.h - one-line structured logs on stderr for every process.
 *
 * Level from RAYDIST_LOG_LEVEL (0 error, 1 warn (default), 2 info, 3 debug).
 * Each line names the process role and pid so interleaved output stays
 * readable.  Logging never fails the caller. */
#ifndef RD_RUNTIME_LOG_H
#define RD_RUNTIME_LOG_H

#include <stdint.h>

enum { RD_LOG_ERROR = 0, RD_LOG_WARN = 1, RD_LOG_INFO = 2, RD_LOG_DEBUG = 3 };

extern int rd__log_level;
void rd__log_init(const char *role);
void rd__log_set_level(int level);
void rd__log_(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define rd__log(level, ...) \
  do { if ((level) <= rd__log_level) rd__log_((level), __VA_ARGS__); } while (0)

/* Log rotation for a process whose stdout and stderr are the file at path
 * (a node started by `raydist start`, its node.log), as Ray's
 * RAY_ROTATION_MAX_BYTES / RAY_ROTATION_BACKUP_COUNT: once the file holds
 * RAYDIST_ROTATION_MAX_BYTES (default 512 MiB; 0: never) it becomes
 * path.1 (path.1 becomes path.2, ... up to RAYDIST_ROTATION_BACKUP_COUNT,
 * default 5, the oldest dropped) and a new path takes its place.
 * Rotation settings read from the environment; 0, or RD_EINVAL with the
 * reason on stderr for a malformed value. */
int rd__log_rotation_init(const char *path);
/* The two settings alone (for a job's log, which its keeper rotates by its
 * own scheme: cli_job.c): 0, or RD_EINVAL with the reason on stderr. */
int rd__log_rotation_conf(uint64_t *max_bytes, int *backups);
/* The renames of one rotation: path.k becomes path.k+1 for k from
 * backups-1 down to 1 (the oldest overwritten), then path becomes path.1.
 * 0, or -1 with errno when path could not be renamed. */
int rd__log_shift(const char *path, int backups);
/* Rotates when the file has grown past the limit (at most once a second;
 * now_ns from rd__now_ns).  1 rotated, 0 not, -1 failed (logged). */
int rd__log_rotate_maybe(uint64_t now_ns);

#endif
