/* runtime/job_http.h - the jobs HTTP API on the node's metrics port (Ray's
 * job REST API at /api/jobs/, as its JobSubmissionClient speaks it):
 * submit, list, one job, its logs, stop and delete, for this node's jobs
 * (`raydist job`), with the cluster token as a bearer token. */
#ifndef RD_RUNTIME_JOB_HTTP_H
#define RD_RUNTIME_JOB_HTTP_H

#include <stddef.h>

/* The answer: an HTTP status and a JSON body (the caller copies it). */
typedef void (*rd__http_reply)(void *arg, int code, const char *body, size_t len);

/* 1 when path (without its query) is the API's: /api/jobs, /api/jobs/... */
int rd__job_http_path(const char *path);

/* Serves one request.  auth: the Authorization header's value, or NULL;
 * query: after the '?', or NULL; body: blen bytes (POST).  reply is called
 * exactly once, on the loop, maybe before this returns. */
void rd__job_http(const char *method, const char *path, const char *query, const char *auth, const char *body,
                  size_t blen, rd__http_reply reply, void *arg);

#endif
