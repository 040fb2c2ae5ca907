/* src/logdedup.h - workers' lines deduplicated on the driver, as Ray's
 * RAY_DEDUP_LOGS: a line that workers elsewhere also print (the same once
 * the words with digits are dropped) is printed the first time, then
 * counted, and printed once more at the end of a window with
 * "[repeated Nx across cluster]".  Lines from one worker alone are never
 * held.  Not thread-safe: the caller serialises (the client's lock). */
#ifndef RD_SRC_LOGDEDUP_H
#define RD_SRC_LOGDEDUP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct rd__dedup rd__dedup;

/* From RAYDIST_DEDUP_LOGS (0: off, *out NULL), RAYDIST_DEDUP_LOGS_AGG_WINDOW_S
 * (seconds, default 5), RAYDIST_DEDUP_LOGS_ALLOW_REGEX (lines matching it are
 * always printed) and RAYDIST_DEDUP_LOGS_SKIP_REGEX (never): 0, or -1 with
 * why for a malformed one. */
int rd__dedup_from_env(rd__dedup **out, char *why, size_t whylen);
/* How the driver prefixes a worker's lines, as Ray: "(NAME pid=P, ip=A) "
 * (name: the task or actor class the worker marked last; NULL or "" left
 * out; ip "": an embedded node's worker, "(NAME pid=P) "), into out
 * (RD_WORKER_PREFIX_MAX bytes). */
#define RD_WORKER_PREFIX_MAX 200
void rd__worker_prefix(char *out, size_t len, int pid, const char *ip, const char *name);
/* One line (len bytes, no newline) that worker pid at ip wrote on stream f
 * (stdout or stderr) while running name, prefixed as the driver prints
 * workers' lines. */
void rd__dedup_line(rd__dedup *d, FILE *f, int pid, const char *ip, const char *name, const char *line, size_t len,
                    uint64_t now_ns);
/* Prints what windows that have ended hold (each batch of lines, and from
 * time to time while none come); the ns until the next one ends, or
 * UINT64_MAX when nothing is held. */
uint64_t rd__dedup_tick(rd__dedup *d, uint64_t now_ns);
/* Prints all that is held (rd_shutdown) and frees d. */
void rd__dedup_free(rd__dedup *d);

#endif
