/* runtime/stack_dump.h - GET /api/stack (`raydist stack`): the threads'
 * stacks of this node's drivers and workers, which each writes itself when
 * signalled (src/stack.c). */
#ifndef RD_RUNTIME_STACK_DUMP_H
#define RD_RUNTIME_STACK_DUMP_H

#include <uv.h>

#include "job_http.h"

/* Whether path is the stack API's. */
int rd__stack_path(const char *path);
/* GET /api/stack[?pid=P] with the cluster token in auth ("Bearer T"):
 * answered through reply, as text, once every process asked has written
 * its stacks or 3 s passed; 400 for another query, 404 for a pid that is
 * no driver or worker here, 503 while another request runs. */
void rd__stack_http(uv_loop_t *loop, const char *session, const char *query, const char *auth, rd__http_reply reply,
                    void *arg);

#endif
