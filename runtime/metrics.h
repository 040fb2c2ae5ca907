/* runtime/metrics.h - the node daemon's Prometheus endpoint (metrics.c):
 * `GET /metrics` over HTTP on a TCP port of the node's address, answered
 * from the node's state by rd__node_metrics (node.c). */
#ifndef RD_RUNTIME_METRICS_H
#define RD_RUNTIME_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <uv.h>

#include "common.h"

/* A growing text buffer; on allocation failure it stops growing and sets oom. */
typedef struct rd__mbuf {
  char *p;
  size_t len, cap;
  int oom;
} rd__mbuf;

void rd__mbuf_printf(rd__mbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The HELP and TYPE lines of one metric family. */
void rd__mbuf_family(rd__mbuf *b, const char *name, const char *type, const char *help);
/* A histogram family: cumulative buckets at rd__hist_bucket's bounds, sum, count. */
void rd__mbuf_histogram(rd__mbuf *b, const char *name, const char *help, const uint64_t *buckets, uint64_t count,
                        double sum_s);
/* One labelled series of a histogram family whose HELP and TYPE lines are
 * out already: label="value" on every line, the value escaped. */
void rd__mbuf_histogram_series(rd__mbuf *b, const char *name, const char *label, const char *value,
                               const uint64_t *buckets, uint64_t count, double sum_s);
/* n bytes of p as they are (NUL bytes too). */
void rd__mbuf_put(rd__mbuf *b, const void *p, size_t n);
/* n bytes of s as valid UTF-8: a byte that does not start a valid
 * sequence as U+FFFD (a WebSocket text frame's payload). */
void rd__mbuf_utf8(rd__mbuf *b, const char *s, size_t n);
/* s as a label value: backslash, double quote and newline escaped. */
void rd__mbuf_label_value(rd__mbuf *b, const char *s);
/* n bytes of s as a JSON string, quotes included: escaped, and a byte that
 * does not start valid UTF-8 as U+FFFD, so the answer is always valid JSON
 * whatever a name or a log holds. */
void rd__mbuf_json_str(rd__mbuf *b, const char *s, size_t n);
static inline void rd__mbuf_json_cstr(rd__mbuf *b, const char *s) { rd__mbuf_json_str(b, s, strlen(s)); }
/* What r asks for as a JSON object, the amounts above zero alone:
 * {"CPU":1,"memory":1048576,"only_b":1}. */
void rd__mbuf_res_asked(rd__mbuf *b, const rd_resources *r);

/* Listen on ip:port (port 0: any free one) and write "ip:port" to
 * session_dir/metrics.  0, or a negative RD_E* code with a reason in err. */
int rd__metrics_start(uv_loop_t *loop, const char *ip, int port, const char *session_dir, char *err, size_t errlen);
/* The port it listens on; 0 when it does not. */
int rd__metrics_port(void);
/* Stop listening and close every open connection (node shutdown). */
void rd__metrics_stop(void);

/* node.c: the node's metrics in Prometheus text format. */
void rd__node_metrics(rd__mbuf *b);
/* node.c: its task timeline as Chrome trace JSON; RD_ENOENT when off. */
int rd__node_timeline(rd__mbuf *b);

#endif
