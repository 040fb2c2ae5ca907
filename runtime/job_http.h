/* runtime/job_http.h - the jobs HTTP API on the node's metrics port (Ray's
 * job REST API at /api/jobs/, as its `ray job` CLI and JobSubmissionClient
 * speak it): submit, list, one job, its logs and their tail, stop and
 * delete, for this node's jobs (`raydist job`), with the version check and
 * working_dir package uploads its SDK makes first, and the cluster token
 * as a bearer token. */
#ifndef RD_RUNTIME_JOB_HTTP_H
#define RD_RUNTIME_JOB_HTTP_H

#include <stddef.h>
#include <stdint.h>

/* The answer: an HTTP status and a JSON body (the caller copies it). */
typedef void (*rd__http_reply)(void *arg, int code, const char *body, size_t len);

/* 1 when path (without its query) is the API's: /api/jobs, /api/jobs/...,
 * /api/version, /api/packages/... */
int rd__job_http_path(const char *path);

/* ---- package uploads: PUT /api/packages/gcs/NAME (Ray's SDK uploads a
 * working_dir as a zip this way), streamed to a file as it comes ---- */
typedef struct rd__pkg_put rd__pkg_put;
/* Checks an upload of len bytes (the token, the name, the size): its file,
 * open for the bytes, or NULL when it was answered with reply (401, 400,
 * 413, 500). */
rd__pkg_put *rd__job_http_pkg_begin(const char *path, const char *auth, uint64_t len, rd__http_reply reply,
                                    void *arg);
/* n more bytes of it: 0, or -1 with errno. */
int rd__job_http_pkg_write(rd__pkg_put *p, const char *data, size_t n);
/* Ends it and frees p: with whole (every byte written) the package is kept
 * and reply answers 200; else its file is removed and reply (when not
 * NULL: the connection may be gone) answers 500 with why. */
void rd__job_http_pkg_end(rd__pkg_put *p, int whole, const char *why, rd__http_reply reply, void *arg);

/* ---- a job's log as it comes, over a WebSocket (GET
 * /api/jobs/ID/logs/tail: Ray's `ray job logs --follow`, `ray job submit`) */
typedef struct rd__job_tail rd__job_tail;
/* The next n bytes of the log (UTF-8, a text frame), or p NULL: the job
 * has ended and all of its log was given (a close frame; the tail is freed). */
typedef void (*rd__tail_chunk)(void *arg, const char *p, size_t n);
/* 1 when path (without its query) is a tail's. */
int rd__job_http_tail_path(const char *path);
/* Checks the request (the token, the job): the tail, which gives nothing
 * until rd__job_tail_more, or NULL when it was answered with reply. */
rd__job_tail *rd__job_http_tail(const char *path, const char *auth, rd__http_reply reply, rd__tail_chunk chunk,
                                void *arg);
/* The last chunk was sent (or the handshake): the next one, now or once
 * there is one. */
void rd__job_tail_more(rd__job_tail *t);
/* The connection went: no more chunks; t is freed. */
void rd__job_tail_cancel(rd__job_tail *t);

/* Serves one request.  auth: the Authorization header's value, or NULL;
 * query: after the '?', or NULL; body: blen bytes (POST).  reply is called
 * exactly once, on the loop, maybe before this returns. */
void rd__job_http(const char *method, const char *path, const char *query, const char *auth, const char *body,
                  size_t blen, rd__http_reply reply, void *arg);

#endif
