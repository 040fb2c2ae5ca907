/* runtime/metrics.c - the node's Prometheus endpoint.
 *
 * A small HTTP/1.0 server on the node daemon's libuv loop: one request per
 * connection, `GET /metrics` (or HEAD) answered with the text format 0.0.4
 * that rd__node_metrics writes from the node's state at that moment, then the
 * connection is closed; the dashboard's pages (dashboard.c) and the jobs
 * API (/api/jobs, /api/version, /api/packages, job_http.c: GET, POST and
 * DELETE, the only requests with a body, Content-Length at most 64 KiB) on
 * the same port.  Two of the jobs API's requests are streams: a package
 * upload (PUT /api/packages/..., up to 512 MiB) goes to a file as it comes,
 * once its head is accepted, and a log tail (GET /api/jobs/ID/logs/tail
 * with Upgrade: websocket) stays open, sending the log as WebSocket frames
 * until the job ends.  The request head is 4 KiB at most; anything else is
 * answered with 400, 404, 405, 413 or 431.  It holds at most MAX_CONNS
 * connections and drops one that has not sent its whole request within 5 s
 * (an upload: that has sent nothing for 30 s), so a slow or hostile client
 * costs the node nothing lasting. */
#include "metrics.h"
#include "pg.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cluster.h"
#include "common.h"
#include "dashboard.h"
#include "job_http.h"
#include "state_api.h"
#include "json.h"
#include "log.h"
#include "log_files.h"
#include "stack_dump.h"
#include "raydist/error.h"
#include "websocket.h"

#define MAX_CONNS 16
#define REQ_MAX 4096
#define REQ_TIMEOUT_MS 5000
#define BODY_MAX (64u << 10)   /* a request body (jobs API submit) */
#define PKG_CHUNK (64u << 10)  /* an upload is read this much at a time */
#define PKG_IDLE_MS 30000      /* an upload that sends nothing this long is dropped */

typedef struct mconn {
  uv_tcp_t tcp;
  uv_timer_t timer;
  uv_write_t wr;
  char req[REQ_MAX + 1];
  size_t len;
  int open_handles;   /* tcp and timer: freed when both are closed */
  int answered;
  int head_only;      /* a HEAD request waiting for the dashboard */
  char *resp;
  char *body;         /* a request's body (Content-Length bytes: the jobs API's POST); an upload's buffer */
  size_t blen, bgot;
  rd__pkg_put *pkg;   /* a package upload (PUT /api/packages/...): its bytes go to a file as they come */
  rd__job_tail *tail; /* a WebSocket tail of a job's log: frames sent as the log grows */
  int ws_hold;        /* a WebSocket holds the connection (open_handles) until conn_close */
  struct mconn *next;
} mconn;

static struct {
  int on, port;
  char dir[512];            /* the node's session directory (its logs) */
  uv_tcp_t server;
  mconn *conns;
  int nconns;
} M;

/* ---------------------------------------------------------- text buffer */

/* Room for n more bytes and a NUL: 0, or -1 (b->oom set). */
static int mbuf_room(rd__mbuf *b, size_t n) {
  if (b->cap - b->len > n) return 0;
  size_t cap = b->cap ? b->cap * 2 : 8192;
  while (cap - b->len <= n) cap *= 2;
  char *p = realloc(b->p, cap);
  if (!p) {
    b->oom = 1;
    return -1;
  }
  b->p = p;
  b->cap = cap;
  return 0;
}

void rd__mbuf_printf(rd__mbuf *b, const char *fmt, ...) {
  if (b->oom) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = b->cap - b->len;
    int n = vsnprintf(b->p ? b->p + b->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < room) {
      b->len += (size_t)n;
      return;
    }
    if (mbuf_room(b, (size_t)n) != 0) return;
  }
}

void rd__mbuf_put(rd__mbuf *b, const void *p, size_t n) {
  if (b->oom || !n || mbuf_room(b, n) != 0) return;
  memcpy(b->p + b->len, p, n);
  b->len += n;
  b->p[b->len] = 0;
}

void rd__mbuf_utf8(rd__mbuf *b, const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  size_t run = 0;   /* valid bytes from i - run, copied as they are */
  for (size_t i = 0; i < n;) {
    size_t k = u[i] < 0x80 ? 1 : rd_json_utf8_len(u + i, n - i);
    if (k) {
      run += k;
      i += k;
      continue;
    }
    rd__mbuf_put(b, s + i - run, run);
    rd__mbuf_put(b, "\xef\xbf\xbd", 3);
    run = 0;
    i++;
  }
  rd__mbuf_put(b, s + n - run, run);
}

void rd__mbuf_family(rd__mbuf *b, const char *name, const char *type, const char *help) {
  rd__mbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void rd__mbuf_label_value(rd__mbuf *b, const char *s) {
  for (const char *p = s; *p; p++) {
    if (*p == '\\' || *p == '"') rd__mbuf_printf(b, "\\%c", *p);
    else if (*p == '\n') rd__mbuf_printf(b, "\\n");
    else rd__mbuf_printf(b, "%c", *p);
  }
}


void rd__mbuf_res_asked(rd__mbuf *b, const rd_resources *r) {
  int k = 0;
  rd__mbuf_printf(b, "{");
  if (r->cpu) rd__mbuf_printf(b, "%s\"CPU\":%g", k++ ? "," : "", rd_res_to_double(r->cpu));
  if (r->gpu) rd__mbuf_printf(b, "%s\"GPU\":%g", k++ ? "," : "", rd_res_to_double(r->gpu));
  if (r->memory) rd__mbuf_printf(b, "%s\"memory\":%lld", k++ ? "," : "", (long long)r->memory);
  for (int i = 0; i < r->ncustom; i++) {
    int64_t v = rd_res_get_custom(r, r->custom[i].name);
    if (!v) continue;
    rd__mbuf_printf(b, "%s", k++ ? "," : "");
    rd__mbuf_json_cstr(b, r->custom[i].name);
    rd__mbuf_printf(b, ":%g", rd_res_to_double(v));
  }
  rd__mbuf_printf(b, "}");
}

void rd__mbuf_json_str(rd__mbuf *b, const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  size_t run = 0;   /* bytes copied as they are, from i - run */
  rd__mbuf_printf(b, "\"");
  for (size_t i = 0; i < n;) {
    unsigned char c = u[i];
    size_t k = c < 0x80 ? (c >= 0x20 && c != '"' && c != '\\') : rd_json_utf8_len(u + i, n - i);
    if (k) {
      run += k;
      i += k;
      continue;
    }
    rd__mbuf_put(b, s + i - run, run);
    run = 0;
    if (c == '"' || c == '\\') rd__mbuf_printf(b, "\\%c", c);
    else if (c == '\n') rd__mbuf_printf(b, "\\n");
    else if (c == '\t') rd__mbuf_printf(b, "\\t");
    else if (c < 0x20) rd__mbuf_printf(b, "\\u%04x", c);
    else rd__mbuf_printf(b, "\\ufffd");
    i++;
  }
  rd__mbuf_put(b, s + n - run, run);
  rd__mbuf_printf(b, "\"");
}

/* A line's labels: the series' label="value" (none when label is NULL) and
 * le="le" (none when le is NULL); nothing at all without either. */
static void labels(rd__mbuf *b, const char *label, const char *value, const char *le) {
  if (!label && !le) return;
  rd__mbuf_printf(b, "{");
  if (label) {
    rd__mbuf_printf(b, "%s=\"", label);
    rd__mbuf_label_value(b, value);
    rd__mbuf_printf(b, "\"%s", le ? "," : "");
  }
  if (le) rd__mbuf_printf(b, "le=\"%s\"", le);
  rd__mbuf_printf(b, "}");
}

void rd__mbuf_histogram_series(rd__mbuf *b, const char *name, const char *label, const char *value,
                               const uint64_t *buckets, uint64_t count, double sum_s) {
  uint64_t cum = 0;
  double bound = 1e-5;
  for (int i = 0; i < RD_HIST_BUCKETS; i++, bound *= 10) {
    cum += buckets[i];
    char le[32] = "+Inf";
    if (i < RD_HIST_BUCKETS - 1) snprintf(le, sizeof(le), "%g", bound);
    rd__mbuf_printf(b, "%s_bucket", name);
    labels(b, label, value, le);
    rd__mbuf_printf(b, " %llu\n", (unsigned long long)(i < RD_HIST_BUCKETS - 1 ? cum : count));
  }
  rd__mbuf_printf(b, "%s_sum", name);
  labels(b, label, value, NULL);
  rd__mbuf_printf(b, " %.9g\n%s_count", sum_s, name);
  labels(b, label, value, NULL);
  rd__mbuf_printf(b, " %llu\n", (unsigned long long)count);
}

void rd__mbuf_histogram(rd__mbuf *b, const char *name, const char *help, const uint64_t *buckets, uint64_t count,
                        double sum_s) {
  rd__mbuf_family(b, name, "histogram", help);
  rd__mbuf_histogram_series(b, name, NULL, NULL, buckets, count, sum_s);
}

/* ----------------------------------------------------------- the server */

static void on_timeout(uv_timer_t *t);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static void conn_free(mconn *c) {
  free(c->resp);
  free(c->body);
  free(c);
}

static void conn_free_cb(uv_handle_t *h) {
  mconn *c = h->data;
  if (--c->open_handles > 0) return;
  conn_free(c);
}

static void conn_close(mconn *c) {
  if (uv_is_closing((uv_handle_t *)&c->tcp)) return;
  if (c->pkg) {   /* cut off (timeout, the client went, the node stops): its file goes */
    rd__job_http_pkg_end(c->pkg, 0, NULL, NULL, NULL);
    c->pkg = NULL;
  }
  if (c->tail) {   /* the client went (or the node stops) while it tailed */
    rd__job_tail_cancel(c->tail);
    c->tail = NULL;
  }
  if (c->ws_hold) {   /* the handles being closed below still count: not freed here */
    c->ws_hold = 0;
    c->open_handles--;
  }
  for (mconn **pp = &M.conns; *pp; pp = &(*pp)->next)
    if (*pp == c) {
      *pp = c->next;
      break;
    }
  M.nconns--;
  uv_timer_stop(&c->timer);
  uv_close((uv_handle_t *)&c->timer, conn_free_cb);
  uv_close((uv_handle_t *)&c->tcp, conn_free_cb);
}

static void on_written(uv_write_t *w, int status) {
  (void)status;
  conn_close(w->data);
}

static void respond(mconn *c, int code, const char *reason, const char *ctype, const char *body, size_t blen,
                    int head_only, const char *extra) {
  c->answered = 1;
  uv_read_stop((uv_stream_t *)&c->tcp);
  char hdr[512];
  int hn = snprintf(hdr, sizeof(hdr),
                    "HTTP/1.0 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n", code,
                    reason, ctype, blen, extra ? extra : "");
  size_t n = (size_t)hn + (head_only ? 0 : blen);
  c->resp = malloc(n ? n : 1);
  if (!c->resp) {
    conn_close(c);
    return;
  }
  memcpy(c->resp, hdr, (size_t)hn);
  if (!head_only && blen) memcpy(c->resp + hn, body, blen);
  uv_buf_t buf = uv_buf_init(c->resp, (unsigned)n);
  c->wr.data = c;
  if (uv_write(&c->wr, (uv_stream_t *)&c->tcp, &buf, 1, on_written) != 0) conn_close(c);
}

static void respond_text(mconn *c, int code, const char *reason, const char *text) {
  respond(c, code, reason, "text/plain; charset=utf-8", text, strlen(text), 0, code == 405 ? "Allow: GET, HEAD\r\n" : NULL);
}

/* The dashboard is ready.  The connection was held (open_handles) while it
 * was built; it may have been closed meanwhile (timeout, node stop). */
static void on_dashboard(void *arg, rd__mbuf *b, const char *ctype) {
  mconn *c = arg;
  if (!uv_is_closing((uv_handle_t *)&c->tcp)) {
    if (b->oom) respond_text(c, 500, "Internal Server Error", "out of memory\n");
    else respond(c, 200, "OK", ctype, b->p ? b->p : "", b->len, c->head_only, "Cache-Control: no-store\r\n");
  }
  if (--c->open_handles == 0) conn_free(c);
}

static const char *reason_of(int code) {
  switch (code) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 503: return "Service Unavailable";
    default: return "Internal Server Error";
  }
}

/* The jobs API's answer (job_http.c); the connection was held as for the dashboard. */
static void api_answer(mconn *c, int code, const char *ctype, const char *body, size_t len) {
  if (!uv_is_closing((uv_handle_t *)&c->tcp))
    respond(c, code, reason_of(code), ctype, body, len, 0,
            code == 401 ? "WWW-Authenticate: Bearer\r\nCache-Control: no-store\r\n" : "Cache-Control: no-store\r\n");
  if (--c->open_handles == 0) conn_free(c);
}
static void on_job_http(void *arg, int code, const char *body, size_t len) {
  api_answer(arg, code, "application/json", body, len);
}

/* The same for a log's text (GET /api/logs/file, /api/v0/logs/file). */
static void on_text_http(void *arg, int code, const char *body, size_t len) {
  api_answer(arg, code, "text/plain; charset=utf-8", body, len);
}

/* Header name's value in the request head (case-insensitive name, spaces
 * around the value dropped) into out: 1, or 0 when it is not there. */
static int header(const char *head, const char *name, char *out, size_t len) {
  size_t n = strlen(name);
  for (const char *l = strchr(head, '\n'); l; l = strchr(l, '\n')) {
    l++;
    if (strncasecmp(l, name, n) != 0 || l[n] != ':') continue;
    const char *v = l + n + 1;
    while (*v == ' ' || *v == '\t') v++;
    size_t k = strcspn(v, "\r\n");
    while (k > 0 && (v[k - 1] == ' ' || v[k - 1] == '\t')) k--;
    snprintf(out, len, "%.*s", (int)k, v);
    return 1;
  }
  return 0;
}

/* ?name=N in the query q (NULL: none): def when absent, else cut to 0..max. */
static long query_long(const char *q, const char *name, long def, long max) {
  const char *t = q ? strstr(q, name) : NULL;
  long v = t ? strtol(t + strlen(name), NULL, 10) : def;
  return v < 0 ? 0 : v > max ? max : v;
}

/* ?state=NAME in the query q, parsed by parse: -1 when absent, -2 when
 * parse does not know it. */
static int query_state(const char *q, int (*parse)(const char *)) {
  const char *t = q ? strstr(q, "state=") : NULL;
  if (!t) return -1;
  char name[32];
  size_t n = strcspn(t + 6, "&");
  snprintf(name, sizeof(name), "%.*s", (int)(n < sizeof(name) ? n : sizeof(name) - 1), t + 6);
  int s = parse(name);
  return s < 0 ? -2 : s;
}

/* A page built at once: its text or JSON, or 500 when building it ran out
 * of memory.  Frees b's buffer. */
static void respond_built(mconn *c, rd__mbuf *b, int json, int head) {
  if (b->oom) respond_text(c, 500, "Internal Server Error", "out of memory\n");
  else respond(c, 200, "OK", json ? "application/json" : "text/plain; charset=utf-8", b->p ? b->p : "", b->len, head,
               NULL);
  free(b->p);
}

/* The answer comes later, through on_dashboard (GCS reads, owners'
 * answers): the connection is held until then, or until
 * dashboard_not_taken when the request could not be started. */
static void hold_for_dashboard(mconn *c, int head) {
  c->answered = 1;
  /* the request is whole: nothing more is read (a read would be given no
   * room once a body has filled its buffer: UV_ENOBUFS, and the close) */
  uv_read_stop((uv_stream_t *)&c->tcp);
  c->head_only = head;
  c->open_handles++;   /* held until on_dashboard */
  uv_timer_stop(&c->timer);   /* the answer has deadlines of its own */
}

static void dashboard_not_taken(mconn *c) {
  c->open_handles--;
  respond_text(c, 500, "Internal Server Error", "out of memory\n");
}

/* ---- the jobs API's streams: package uploads and log tails ---- */

/* A package upload's answer: given while the request is read (no hold). */
static void on_pkg_reply(void *arg, int code, const char *body, size_t len) {
  mconn *c = arg;
  if (!uv_is_closing((uv_handle_t *)&c->tcp))
    respond(c, code, reason_of(code), "application/json", body, len, 0, "Cache-Control: no-store\r\n");
}

/* n bytes of an upload came (in c->body): written to its file; the whole
 * of it answers. */
static void pkg_bytes(mconn *c, const char *p, size_t n) {
  c->bgot += n;
  if (rd__job_http_pkg_write(c->pkg, p, n) != 0) {
    char why[200];
    snprintf(why, sizeof(why), "cannot write the package: %s", strerror(errno));
    rd__job_http_pkg_end(c->pkg, 0, why, on_pkg_reply, c);
    c->pkg = NULL;
    return;
  }
  if (c->bgot == c->blen) {
    rd__job_http_pkg_end(c->pkg, 1, NULL, on_pkg_reply, c);
    c->pkg = NULL;
    return;
  }
  uv_timer_start(&c->timer, on_timeout, PKG_IDLE_MS, 0);   /* it moves: another while */
}

typedef struct ws_write {
  uv_write_t wr;
  mconn *c;
  int close;   /* the close frame: the connection ends once it is written */
  uint8_t hdr[RD_WS_HEADER_MAX];
  char data[];
} ws_write;

static void ws_written(uv_write_t *w, int status) {
  ws_write *x = (ws_write *)w;
  mconn *c = x->c;
  int close = x->close;
  free(x);
  if (status < 0 || uv_is_closing((uv_handle_t *)&c->tcp)) return;   /* closed meanwhile: conn_close cancelled the tail */
  if (close) conn_close(c);
  else if (c->tail) {
    rd__job_tail_more(c->tail);
  }
}

/* Writes raw bytes (the handshake) or a frame; 0, or -1 (the connection is closed). */
static int ws_send(mconn *c, int opcode, const char *p, size_t n, int close) {
  ws_write *x = malloc(sizeof(*x) + n);
  if (!x) {
    conn_close(c);
    return -1;
  }
  x->c = c;
  x->close = close;
  if (n) memcpy(x->data, p, n);
  size_t hn = opcode ? rd__ws_header(x->hdr, opcode, n) : 0;
  uv_buf_t b[2] = {uv_buf_init((char *)x->hdr, (unsigned)hn), uv_buf_init(x->data, (unsigned)n)};
  if (uv_write(&x->wr, (uv_stream_t *)&c->tcp, hn ? b : b + 1, hn ? 2 : 1, ws_written) != 0) {
    free(x);
    conn_close(c);
    return -1;
  }
  return 0;
}

/* The tail's next piece of the log, or (p NULL) its end: a close frame
 * (1000, normal), as Ray's server closes once the job has ended. */
static void on_tail_chunk(void *arg, const char *p, size_t n) {
  mconn *c = arg;
  if (p) {
    (void)ws_send(c, RD_WS_TEXT, p, n, 0);
    return;
  }
  c->tail = NULL;   /* freed by the tail */
  static const char normal[2] = {0x03, (char)0xe8};
  (void)ws_send(c, RD_WS_CLOSE, normal, 2, 1);
}

/* GET /api/jobs/ID/logs/tail with Upgrade: websocket: the handshake, then
 * the log's frames as it grows (what the client sends is read and dropped:
 * the tail only watches for its close). */
static void ws_tail(mconn *c, const char *path, const char *auth) {
  char key[128];
  if (!header(c->req, "Sec-WebSocket-Key", key, sizeof(key)) || !key[0]) {
    respond_text(c, 400, "Bad Request", "a WebSocket request without Sec-WebSocket-Key\n");
    return;
  }
  hold_for_dashboard(c, 0);   /* released when the tail ends (the close frame written, or the client gone) */
  c->tail = rd__job_http_tail(path, auth, on_job_http, on_tail_chunk, c);
  if (!c->tail) return;   /* answered through on_job_http, which let go of the hold */
  c->ws_hold = 1;
  char accept[29], hs[256];
  rd__ws_accept(key, accept);
  int n = snprintf(hs, sizeof(hs), "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Accept: %s\r\n\r\n", accept);
  c->len = 0;   /* what the client sends now is read into req from its start, and dropped */
  (void)uv_tcp_keepalive(&c->tcp, 1, 60);   /* a client gone without a word, while the job is quiet, is found */
  if (ws_send(c, 0, hs, (size_t)n, 0) == 0) uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

/* The request head is complete in c->req (NUL-terminated). */
static void handle_request(mconn *c) {
  char method[16], path[REQ_MAX], version[16];   /* a state API query with filters can be long */
  if (sscanf(c->req, "%15s %4095s %15s", method, path, version) != 3 || strncmp(version, "HTTP/", 5) != 0) {
    respond_text(c, 400, "Bad Request", "bad request line\n");
    return;
  }
  int head = strcmp(method, "HEAD") == 0;
  char *q = strchr(path, '?');
  if (q) *q = 0;
  if (rd__job_http_path(path)) {   /* the jobs API: GET, POST and DELETE, answered later */
    char auth[512], up[32];
    int has_auth = header(c->req, "Authorization", auth, sizeof(auth));
    if (!strcmp(method, "GET") && rd__job_http_tail_path(path) && header(c->req, "Upgrade", up, sizeof(up)) &&
        !strcasecmp(up, "websocket")) {
      ws_tail(c, path, has_auth ? auth : NULL);
      return;
    }
    hold_for_dashboard(c, 0);
    rd__job_http(method, path, q ? q + 1 : NULL, has_auth ? auth : NULL, c->body ? c->body : "", c->blen, on_job_http,
                 c);
    return;
  }
  if (rd__state_api_path(path)) {   /* Ray's state API: ray list, ray get, ray summary, the logs */
    char auth[512];
    int has_auth = header(c->req, "Authorization", auth, sizeof(auth));
    hold_for_dashboard(c, 0);
    rd__state_api(c->tcp.loop, method, path, q ? q + 1 : NULL, has_auth ? auth : NULL,
                  !strncmp(path, "/api/v0/logs/", 13) ? on_text_http : on_job_http, c);
    return;
  }
  /* this node's log files (what the state API's logs ask of each node), and
   * its drivers' and workers' stacks (raydist stack): GET, with the token */
  int logs = rd__logs_path(path);
  if (logs || rd__stack_path(path)) {
    char auth[512];
    int has_auth = header(c->req, "Authorization", auth, sizeof(auth));
    if (strcmp(method, "GET") != 0) {
      respond_text(c, 405, "Method Not Allowed", "only GET\n");
      return;
    }
    hold_for_dashboard(c, 0);
    if (logs)
      rd__logs_http(c->tcp.loop, M.dir, path, q ? q + 1 : NULL, has_auth ? auth : NULL,
                    strcmp(path, "/api/logs/file") ? on_job_http : on_text_http, c);
    else
      rd__stack_http(c->tcp.loop, M.dir, q ? q + 1 : NULL, has_auth ? auth : NULL, on_text_http, c);
    return;
  }
  if (!head && strcmp(method, "GET") != 0) {
    respond_text(c, 405, "Method Not Allowed", "only GET and HEAD\n");
    return;
  }
  int objects = strcmp(path, "/objects") == 0, objects_api = strcmp(path, "/api/objects") == 0;
  if (objects || objects_api) {
    long top = query_long(q ? q + 1 : NULL, "top=", 20, 10000);   /* that many largest objects */
    rd__mbuf b = {0};
    rd__dashboard_objects(&b, objects_api, (size_t)top);
    respond_built(c, &b, objects_api, head);
    return;
  }
  int actors = strcmp(path, "/actors") == 0, actors_api = strcmp(path, "/api/actors") == 0;
  if (actors || actors_api) {
    long limit = query_long(q ? q + 1 : NULL, "limit=", 100, 10000);
    int state = query_state(q ? q + 1 : NULL, rd__actor_list_state_parse);   /* ?state=ALIVE: only those */
    if (state == -2) {
      respond_text(c, 400, "Bad Request", "unknown state: the states are PENDING_CREATION, RESTARTING, ALIVE and DEAD\n");
      return;
    }
    rd__mbuf b = {0};
    rd__dashboard_actors(&b, actors_api, (size_t)limit, state);
    respond_built(c, &b, actors_api, head);
    return;
  }
  if (!strcmp(path, "/workers")) {   /* raydist list workers: alive and exited, as text */
    int which = query_state(q ? q + 1 : NULL, rd__worker_list_state_parse);
    if (which == -2) {
      respond_text(c, 400, "Bad Request", "unknown state: the states are ALIVE and EXITED\n");
      return;
    }
    rd__mbuf b = {0};
    rd__dashboard_workers_text(&b, (size_t)query_long(q ? q + 1 : NULL, "limit=", 100, 10000), which < 0 ? 0 : which);
    respond_built(c, &b, 0, head);
    return;
  }
  if (!strcmp(path, "/api/runtime_envs") || !strcmp(path, "/runtime_envs")) {   /* ray list runtime-envs */
    /* the variables' values may be secrets: the cluster token, as for the logs */
    char auth[512];
    int has_auth = header(c->req, "Authorization", auth, sizeof(auth)), json = path[1] == 'a';
    hold_for_dashboard(c, 0);
    if (!rd__cluster_http_gate("runtime envs API", rd__node_local_token(), has_auth ? auth : NULL, on_text_http, c))
      return;   /* an embedded node: its own token */
    long limit = query_long(q ? q + 1 : NULL, "limit=", 10000, 10000);
    rd__mbuf b = {0};
    if (json) rd__dashboard_runtime_envs(&b, (size_t)limit);
    else rd__dashboard_runtime_envs_text(&b, (size_t)limit);
    if (b.oom) on_text_http(c, 500, "out of memory\n", 14);
    else api_answer(c, 200, json ? "application/json" : "text/plain; charset=utf-8", b.p ? b.p : "", b.len);
    free(b.p);
    return;
  }
  if (!strcmp(path, "/placement_groups")) {   /* raydist list placement-groups --local: the groups recorded here */
    int state = query_state(q ? q + 1 : NULL, rd__pg_state_parse);
    if (state == -2) {
      respond_text(c, 400, "Bad Request", "unknown state: the states are PENDING, CREATED, RESCHEDULING and REMOVED\n");
      return;
    }
    size_t n = 0;
    rd_gcs_pg *pgs = rd__pg_records(&n, 1);
    rd__mbuf b = {0};
    if (!pgs) b.oom = 1;
    else   /* live=1: all but the removed (raydist status) */
      rd__pgs_describe(&b, pgs, n, state >= 0 ? state : query_long(q ? q + 1 : NULL, "live=", 0, 1) ? -1 : 0,
                       (size_t)query_long(q ? q + 1 : NULL, "limit=", 100, 10000));
    free(pgs);
    respond_built(c, &b, 0, head);
    return;
  }
  if (!strcmp(path, "/api/task_lines")) {   /* for the state API's task_log_info */
    rd__mbuf b = {0};
    rd__node_task_lines_json(&b);
    respond_built(c, &b, 1, head);
    return;
  }
  if (!strcmp(path, "/api/workers")) {   /* for the state API's ray list workers */
    long limit = query_long(q ? q + 1 : NULL, "limit=", 10000, 10000);
    rd__mbuf b = {0};
    rd__dashboard_workers(&b, (size_t)limit);
    respond_built(c, &b, 1, head);
    return;
  }
  int tasks = strcmp(path, "/tasks") == 0, tasks_api = strcmp(path, "/api/tasks") == 0;
  if (tasks || tasks_api) {
    long limit = query_long(q ? q + 1 : NULL, "limit=", 100, 10000);   /* the N oldest */
    int state = query_state(q ? q + 1 : NULL, rd__task_state_parse);   /* ?state=RUNNING: only those */
    if (state == -2) {
      respond_text(c, 400, "Bad Request", "unknown state: the states are PENDING_ARGS, PENDING_LEASE, "
                                          "RETRY_BACKOFF, PENDING_ACTOR, SUBMITTED, RUNNING, FAILED and FINISHED\n");
      return;
    }
    int finished = query_long(q ? q + 1 : NULL, "finished=", 0, 1) == 1;   /* and the finished tasks kept */
    hold_for_dashboard(c, head);
    if (rd__dashboard_tasks(c->tcp.loop, tasks_api, (size_t)limit, state, finished, on_dashboard, c) != 0)
      dashboard_not_taken(c);
    return;
  }
  int api = strcmp(path, "/api/cluster") == 0;
  if (api || strcmp(path, "/") == 0) {
    hold_for_dashboard(c, head);
    if (rd__dashboard_request(c->tcp.loop, api, on_dashboard, c) != 0) dashboard_not_taken(c);
    return;
  }
  int timeline = strcmp(path, "/timeline") == 0;
  if (!timeline && strcmp(path, "/metrics") != 0) {
    respond_text(c, 404, "Not Found", "not found: the dashboard is at /, its JSON at /api/cluster, the metrics at "
                                      "/metrics, the task timeline at /timeline, the store's objects at /objects "
                                      "and /api/objects, the unfinished tasks at /tasks and /api/tasks, the actors at /actors and "
                                      "/api/actors, the env sets workers start with at /runtime_envs and /api/runtime_envs, the placement "
                                      "groups recorded here at /placement_groups, the jobs API at "
                                      "/api/jobs/, Ray's state API at /api/v0/\n");
    return;
  }
  rd__mbuf b = {0};
  if (timeline && rd__node_timeline(&b) != 0) {
    respond_text(c, 404, "Not Found", "no timeline: start the node (or the driver of an embedded one) with "
                                      "RAYDIST_TIMELINE=1\n");
    return;
  }
  if (!timeline) rd__node_metrics(&b);
  if (b.oom) {
    free(b.p);
    respond_text(c, 500, "Internal Server Error", "out of memory\n");
    return;
  }
  respond(c, 200, "OK", timeline ? "application/json" : "text/plain; version=0.0.4; charset=utf-8", b.p ? b.p : "",
          b.len, head, NULL);
  free(b.p);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  mconn *c = h->data;
  if (c->pkg) *buf = uv_buf_init(c->body, (unsigned)(c->blen - c->bgot < PKG_CHUNK ? c->blen - c->bgot : PKG_CHUNK));
  else if (c->body) *buf = uv_buf_init(c->body + c->bgot, (unsigned)(c->blen - c->bgot));
  else *buf = uv_buf_init(c->req + c->len, (unsigned)(REQ_MAX - c->len));
}

/* PUT /api/packages/...: 1 when the head is one (the body, streamed to a
 * file, answers it; or it was answered with an error), else 0. */
static int pkg_start(mconn *c, size_t hlen, unsigned long long n) {
  char method[16], path[256];
  if (sscanf(c->req, "%15s %255s", method, path) != 2 || strcmp(method, "PUT") != 0 ||
      strncmp(path, "/api/packages/", 14) != 0)
    return 0;
  if (!(c->body = malloc(PKG_CHUNK))) {
    respond_text(c, 500, "Internal Server Error", "out of memory\n");
    return 1;
  }
  size_t after = c->len - hlen;   /* what came with the head (less than REQ_MAX < PKG_CHUNK) */
  if (after > n) after = (size_t)n;
  memcpy(c->body, c->req + hlen, after);
  c->req[hlen] = 0;   /* the head alone, for its headers */
  char auth[512];
  int has_auth = header(c->req, "Authorization", auth, sizeof(auth));
  /* the token, the name and the size checked before a byte is kept */
  if (!(c->pkg = rd__job_http_pkg_begin(path, has_auth ? auth : NULL, n, on_pkg_reply, c))) return 1;
  c->blen = (size_t)n;
  pkg_bytes(c, c->body, after);
  return 1;
}

/* The head is complete, its end at c->req + hlen: 1 when the request is
 * whole (no body, or all of it here), 0 when the body is still to come,
 * -1 when answered with an error. */
static int body_start(mconn *c, size_t hlen) {
  char v[64];
  size_t after = c->len - hlen;
  c->req[c->len] = 0;
  if (!header(c->req, "Content-Length", v, sizeof(v))) {
    c->req[hlen] = 0;   /* no body: the head alone */
    return 1;
  }
  char *end;
  errno = 0;
  unsigned long long n = strtoull(v, &end, 10);
  if (v[0] < '0' || v[0] > '9' || *end || errno) {
    respond_text(c, 400, "Bad Request", "a malformed Content-Length\n");
    return -1;
  }
  if (pkg_start(c, hlen, n)) return -1;   /* answered, or being read into its file */
  if (n > BODY_MAX) {
    respond_text(c, 413, "Payload Too Large", "a request body over 64 KiB\n");
    return -1;
  }
  if (n == 0) {
    c->req[hlen] = 0;
    return 1;
  }
  if (!(c->body = malloc((size_t)n))) {
    respond_text(c, 500, "Internal Server Error", "out of memory\n");
    return -1;
  }
  c->blen = (size_t)n;
  c->bgot = after < c->blen ? after : c->blen;
  memcpy(c->body, c->req + hlen, c->bgot);
  c->req[hlen] = 0;
  return c->bgot == c->blen;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  (void)buf;
  mconn *c = s->data;
  if (nread < 0) {
    conn_close(c);
    return;
  }
  if (c->answered) return;
  if (c->pkg) {   /* an upload: to its file */
    pkg_bytes(c, c->body, (size_t)nread);
    return;
  }
  if (c->body) {   /* the head came: its body now */
    c->bgot += (size_t)nread;
    if (c->bgot == c->blen) handle_request(c);
    return;
  }
  c->len += (size_t)nread;
  c->req[c->len] = 0;
  char *e1 = strstr(c->req, "\r\n\r\n"), *e2 = strstr(c->req, "\n\n");
  if (e1 || e2) {
    size_t hlen = e1 && (!e2 || e1 < e2) ? (size_t)(e1 + 4 - c->req) : (size_t)(e2 + 2 - c->req);
    if (body_start(c, hlen) == 1) handle_request(c);
  } else if (c->len >= REQ_MAX) {
    respond_text(c, 431, "Request Header Fields Too Large", "request head over 4 KiB\n");
  } else if (memchr(c->req, 0, c->len)) {
    respond_text(c, 400, "Bad Request", "NUL byte in the request\n");
  }
}

static void on_timeout(uv_timer_t *t) { conn_close(t->data); }

static void on_connection(uv_stream_t *server, int status) {
  if (status < 0) return;
  mconn *c = calloc(1, sizeof(*c));
  if (!c) return;
  uv_tcp_init(server->loop, &c->tcp);
  c->tcp.data = c;
  c->open_handles = 1;
  if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0 || M.nconns >= MAX_CONNS) {
    uv_close((uv_handle_t *)&c->tcp, conn_free_cb);   /* over the limit: refused by closing */
    return;
  }
  uv_timer_init(server->loop, &c->timer);
  c->timer.data = c;
  c->open_handles = 2;
  c->next = M.conns;
  M.conns = c;
  M.nconns++;
  uv_timer_start(&c->timer, on_timeout, REQ_TIMEOUT_MS, 0);
  if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0) conn_close(c);
}

int rd__metrics_start(uv_loop_t *loop, const char *ip, int port, const char *session_dir, char *err, size_t errlen) {
  struct sockaddr_in a;
  if (port < 0 || port > 65535 || uv_ip4_addr(ip, port, &a) != 0) {
    snprintf(err, errlen, "bad metrics address %s:%d", ip, port);
    return RD_EINVAL;
  }
  uv_tcp_init(loop, &M.server);
  int r = uv_tcp_bind(&M.server, (const struct sockaddr *)&a, 0);
  if (r == 0) r = uv_listen((uv_stream_t *)&M.server, 64, on_connection);
  struct sockaddr_storage got;
  int gl = sizeof(got);
  if (r == 0) r = uv_tcp_getsockname(&M.server, (struct sockaddr *)&got, &gl);
  if (r != 0) {
    snprintf(err, errlen, "cannot listen for metrics on %s:%d: %s", ip, port, uv_strerror(r));
    uv_close((uv_handle_t *)&M.server, NULL);
    return RD_ESYS;
  }
  M.on = 1;
  snprintf(M.dir, sizeof(M.dir), "%s", session_dir);
  int bound = ntohs(((struct sockaddr_in *)&got)->sin_port);
  M.port = bound;
  char path[600], tmp[610];
  snprintf(path, sizeof(path), "%s/metrics", session_dir);
  snprintf(tmp, sizeof(tmp), "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f || fprintf(f, "%s:%d\n", ip, bound) < 0 || fclose(f) != 0 || rename(tmp, path) != 0) {
    snprintf(err, errlen, "cannot write %s", path);
    return RD_EIO;
  }
  rd__log(RD_LOG_INFO, "metrics at http://%s:%d/metrics", ip, bound);
  return 0;
}

int rd__metrics_port(void) { return M.on ? M.port : 0; }

void rd__metrics_stop(void) {
  if (!M.on) return;
  M.on = 0;
  if (!uv_is_closing((uv_handle_t *)&M.server)) uv_close((uv_handle_t *)&M.server, NULL);
  while (M.conns) conn_close(M.conns);
}
