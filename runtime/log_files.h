/* runtime/log_files.h - a node's log files, as Ray's session logs
 * directory: each worker's stdout and stderr in files of their own
 * (<session>/logs/worker-WID-JOB-PID.out and .err, written by the node of
 * a cluster, which reads them from pipes), rotated as the node's own log,
 * and the node's logs (node.log, gcs.log, autoscaler.log and their
 * backups), listed and read over HTTP for `raydist logs` and Ray's
 * /api/v0/logs (state_api.c):
 *
 *   GET /api/logs?glob=G          {"files": [name, ...]} (sorted; glob: fnmatch, default *)
 *   GET /api/logs/file?filename=F a file's text; or pid=P (and suffix=out|err): that worker's newest file
 *       &lines=N                  its last N lines (-1, the default: all), of
 *       &offset=A&end=B           the bytes [A, B) (default: the whole file)
 *       &stat=1                   {"filename", "size", "inode"} instead of the text (a new inode: rotated)
 *       task=ID (and suffix)      instead of filename or pid: the lines of that task (the range its
 *                                 worker's mark began, to the next mark), with pid=P: on that worker
 *
 * Both need the cluster token, as the state API does; errors are one line
 * of text with 400, 401, 403, 404, 413 (more than RD_LOGS_MAX_BYTES to
 * give) or 500. */
#ifndef RD_RUNTIME_LOG_FILES_H
#define RD_RUNTIME_LOG_FILES_H

#include <stdint.h>
#include <uv.h>

#include "job_http.h"
#include "metrics.h"

#define RD_LOGS_MAX_BYTES ((uint64_t)64 << 20)   /* one answer's text at most */

/* One worker stream's file. */
typedef struct rd__wlog {
  int fd;                   /* -1: none */
  uint64_t size;            /* bytes in the file now */
  uint32_t gen;             /* rotations so far (the file's earlier text is in its backups) */
  char path[512];
} rd__wlog;

/* A worker's files' name without its .out or .err: worker-WID-JOB-PID. */
void rd__wlog_name(char *out, size_t len, uint32_t wid, uint32_t job, int pid);
/* Creates <dir>/logs/worker-WID-JOB-PID.out (which 1) or .err (2) and opens
 * it to append: 0, or -1 with errno (l->fd is -1). */
int rd__wlog_open(rd__wlog *l, const char *dir, uint32_t wid, uint32_t job, int pid, int which);
/* Appends n bytes (whole lines); once the file holds
 * RAYDIST_ROTATION_MAX_BYTES it is rotated first, as node.log is
 * (RAYDIST_ROTATION_BACKUP_COUNT backups, .1 the newest).  A failed write
 * is logged once and the file given up. */
void rd__wlog_write(rd__wlog *l, const char *p, size_t n);
/* Rotates l's file if the next write would: where that write's bytes go. */
uint64_t rd__wlog_here(rd__wlog *l);
/* RAYDIST_ROTATION_BACKUP_COUNT, as the workers' files are rotated. */
int rd__wlog_backups(void);
void rd__wlog_close(rd__wlog *l);
/* Removes a worker's files (.out, .err and their rotated backups): its
 * node no longer lists it (it left the last RAYDIST_WORKERS_EXITED_KEPT). */
void rd__wlog_remove(const char *dir, uint32_t wid, uint32_t job, int pid);

/* The text of the open file fd (size bytes) from off to end (clipped to
 * size; UINT64_MAX: its end), only its last `lines` lines (-1: all): into
 * *out (malloc'd, a byte to spare) and *len.  0; or 413 when more than
 * RD_LOGS_MAX_BYTES would come, 500 on a failed read or no memory, with
 * why (naming the file `name`).  The logs API's and `raydist logs
 * --local`'s reads of ended sessions. */
int rd__log_text(int fd, uint64_t size, uint64_t off, uint64_t end, long lines, const char *name, char **out,
                 size_t *len, char *why, size_t wl);

/* Where task id's lines (its newest attempt's; with pid, of that worker)
 * are in its worker's stream `which` (1 stdout, 2 stderr) on this node: the
 * file's name (a backup's when rotated since), the range [off, end) (end
 * only when *has_end: else to the file's end).  0, or -1 with why.  The
 * node's (node.c: the ranges its workers' marks gave). */
int rd__node_task_lines(const char *id, int pid, int which, char *file, size_t flen, uint64_t *off, uint64_t *end,
                        int *has_end, char *why, size_t wl);

/* GET /api/task_lines (the state API's task_log_info): every range the
 * node keeps, newest first, {"tasks": [{"task_id", "attempt", "pid",
 * "out_file", "out_start", "out_end", "err_file", ...}]} (a stream's members
 * only when its mark came; its _end only when the next mark came, in the
 * same file).  The node's (node.c). */
void rd__node_task_lines_json(rd__mbuf *b);

/* An embedded node's own token (SESSION/token), with which its logs API
 * answers `raydist logs --local`; "" on a cluster's node.  The node's
 * (node.c). */
const char *rd__node_local_token(void);

/* An embedded session at its node's end (the node removes it; a driver
 * whose node it had to kill, too): kept, with only its workers' files
 * (logs/), `task_lines.json` (task_lines, len bytes: the JSON of
 * rd__node_task_lines_json) and `ended` (driver_pid=, exe=, start_ms=,
 * end_ms=; written last, by a rename), when some worker wrote anything and
 * keep is not 0; else removed whole.  Then the sessions beside it whose
 * node died without an end are ended (rd__session_lock), and the ended
 * sessions past the newest `keep` removed.  `raydist logs --local` reads them. */
void rd__session_end(const char *dir, size_t keep, int driver_pid, const char *exe, uint64_t start_ms,
                     const char *task_lines, size_t len);
/* An embedded node's hold on its session (SESSION/node.lock, flock, not
 * inherited by its workers) for as long as it lives: a session whose lock
 * is free and that is not `ended` lost its node without an end (SIGKILL,
 * the OOM killer), and the next session to end ends it (kept as an ended
 * session when its workers wrote anything).  The descriptor, or -1 (logged). */
int rd__session_lock(const char *dir);
/* What a session's end does beside it, for `raydist logs --local`: the
 * sessions of this user's session root whose node died without an end are
 * ended, and the ended ones past the newest RAYDIST_SESSIONS_KEPT removed. */
void rd__sessions_tidy(void);
/* RAYDIST_SESSIONS_KEPT: how many ended embedded sessions to keep (default
 * 10; 0: none, a session goes with its driver; a bad value is logged and
 * 10 kept). */
size_t rd__sessions_kept(void);

/* 1 when path (without its query) is /api/logs or /api/logs/file. */
int rd__logs_path(const char *path);
/* Serves it from dir (the node's session directory) on the loop's thread
 * pool; reply is called once, on the loop. */
void rd__logs_http(uv_loop_t *loop, const char *dir, const char *path, const char *query, const char *auth,
                   rd__http_reply reply, void *arg);

#endif
