/* runtime/objxfer.c - object transfer between nodes (objxfer.h).
 *
 * Server: Stat and Pull on the rpc.h skeleton; a Pull pins the object once,
 * copies one chunk at a time from the pinned memory into a send buffer (one
 * send in flight per stream; HTTP/2 flow control keeps several chunks on the
 * wire) and unpins when the stream ends, however it ends.
 * Client: one completion queue per pull drives all of its streams; each chunk
 * is checked against its stream's range and copied straight from the
 * received slices into the destination, never through an unpacked message. */
#include "objxfer.h"

#include <inttypes.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/byte_buffer_reader.h>

#include "log.h"
#include "objxfer.pb-c.h"
#include "raydist.h"
#include "rpc.h"

#define MSG_MAX (RD_XFER_CHUNK_MAX + 64)   /* a chunk and its header */

/* ---------------- server ---------------- */

struct rd_xfer_server {
  rd__rpc_server *rpc;
  rd_xfer_source_ops ops;
  void *arg;
};

typedef struct pull_stream {
  rd_xfer_server *s;
  uint64_t oid;
  const uint8_t *data;
  uint64_t off, end;
  uint32_t chunk;
} pull_stream;

static int pin_err(rd__rpc_call *call, int rc, uint64_t oid) {
  if (rc == RD_ENOENT) rd__rpc_fail(call, "no object %016" PRIx64 " here", oid);
  else if (rc == RD_EAGAIN) rd__rpc_fail(call, "object %016" PRIx64 " is not sealed yet", oid);
  else rd__rpc_fail(call, "cannot pin object %016" PRIx64 ": %s", oid, rd_strerror(rc));
  return rc < 0 ? rc : RD_EPROTO;
}

static int h_stat(void *arg, rd__rpc_call *call, const ProtobufCMessage *req) {
  rd_xfer_server *s = arg;
  const Rd__Xfer__StatRequest *q = (const void *)req;
  const uint8_t *data;
  uint64_t size;
  int rc = s->ops.pin(s->arg, q->oid, &data, &size);
  if (rc) return pin_err(call, rc, q->oid);
  s->ops.unpin(s->arg, q->oid);
  Rd__Xfer__StatReply r = RD__XFER__STAT_REPLY__INIT;
  r.size = size;
  return rd__rpc_reply(call, &r.base);
}

static int pull_start(void *arg, rd__rpc_call *call, const ProtobufCMessage *req, void **stream) {
  rd_xfer_server *s = arg;
  const Rd__Xfer__PullRequest *q = (const void *)req;
  pull_stream *p = calloc(1, sizeof(*p));
  if (!p) return RD_ENOMEM;
  uint64_t size;
  int rc = s->ops.pin(s->arg, q->oid, &p->data, &size);
  if (rc) {
    free(p);
    return pin_err(call, rc, q->oid);
  }
  if (q->offset > size || q->length > size - q->offset) {
    s->ops.unpin(s->arg, q->oid);
    free(p);
    rd__rpc_fail(call, "range %" PRIu64 "+%" PRIu64 " outside object %016" PRIx64 " of %" PRIu64 " bytes",
                 q->offset, q->length, q->oid, size);
    return RD_EINVAL;
  }
  p->s = s;
  p->oid = q->oid;
  p->off = q->offset;
  p->end = q->offset + q->length;
  p->chunk = q->chunk < RD_XFER_CHUNK_MIN ? RD_XFER_CHUNK_DEFAULT
             : q->chunk > RD_XFER_CHUNK_MAX ? RD_XFER_CHUNK_MAX : q->chunk;
  *stream = p;
  return 0;
}

static size_t put_varint(uint8_t *b, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    b[n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  b[n++] = (uint8_t)v;
  return n;
}

/* A Chunk message encoded by hand (field 1 always present, field 2 last)
 * so the data is copied once, from the pinned object into the slice. */
static int pull_next(void *stream, rd__rpc_call *call) {
  pull_stream *p = stream;
  if (p->off == p->end) return RD_RPC_END;
  uint64_t n = p->end - p->off < p->chunk ? p->end - p->off : p->chunk;
  uint8_t hdr[24];
  size_t h = 0;
  hdr[h++] = 0x08;
  h += put_varint(hdr + h, p->off);
  hdr[h++] = 0x12;
  h += put_varint(hdr + h, n);
  grpc_slice sl = grpc_slice_malloc(h + n);
  memcpy(GRPC_SLICE_START_PTR(sl), hdr, h);
  memcpy(GRPC_SLICE_START_PTR(sl) + h, p->data + p->off, n);
  grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&sl, 1);
  grpc_slice_unref(sl);
  rd__rpc_reply_raw(call, bb);
  p->off += n;
  return 1;
}

static void pull_finish(void *stream) {
  pull_stream *p = stream;
  p->s->ops.unpin(p->s->arg, p->oid);
  free(p);
}

static const rd__rpc_stream_ops pull_ops = {pull_start, pull_next, pull_finish};
static const rd__rpc_method xfer_methods[] = {
    {"/rd.xfer.Xfer/Stat", &rd__xfer__stat_request__descriptor, h_stat, NULL},
    {"/rd.xfer.Xfer/Pull", &rd__xfer__pull_request__descriptor, NULL, &pull_ops},
};

int rd_xfer_server_start(const char *bind_addr, const char *token, const rd_xfer_source_ops *ops,
                         void *arg, rd_xfer_server **out, int *port_out, char *err, size_t errlen) {
  *out = NULL;
  if (!ops || !ops->pin || !ops->unpin) {
    if (err) snprintf(err, errlen, "xfer server: pin and unpin are required");
    return RD_EINVAL;
  }
  rd_xfer_server *s = calloc(1, sizeof(*s));
  if (!s) return RD_ENOMEM;
  s->ops = *ops;
  s->arg = arg;
  int rc = rd__rpc_server_start(bind_addr, token, xfer_methods, 2, s, 2, MSG_MAX, &s->rpc, port_out,
                                err, errlen);
  if (rc) {
    free(s);
    return rc;
  }
  *out = s;
  return 0;
}

void rd_xfer_server_stop(rd_xfer_server *s) {
  if (!s) return;
  rd__rpc_server_stop(s->rpc);
  free(s);
}

/* ---------------- client ---------------- */

typedef struct peer_chan {
  char peer[128];
  grpc_channel *ch;
} peer_chan;

struct rd_xfer_client {
  char token[RD_RPC_TOKEN_MAX];
  int streams;
  uint32_t chunk;
  pthread_mutex_t mu;
  peer_chan *peers;
  size_t npeers, cap;
};

static long env_long(const char *name, long def, long lo, long hi) {
  const char *e = getenv(name);
  if (!e || !*e) return def;
  char *end;
  long v = strtol(e, &end, 10);
  if (*end || v < lo || v > hi) {
    rd__log(RD_LOG_WARN, "xfer: ignoring %s=%s (want %ld..%ld)", name, e, lo, hi);
    return def;
  }
  return v;
}

int rd_xfer_client_create(const char *token, rd_xfer_client **out) {
  *out = NULL;
  if (!token || !*token || strlen(token) >= RD_RPC_TOKEN_MAX) return RD_EINVAL;
  rd_xfer_client *c = calloc(1, sizeof(*c));
  if (!c) return RD_ENOMEM;
  snprintf(c->token, sizeof(c->token), "%s", token);
  c->streams = (int)env_long("RAYDIST_XFER_STREAMS", RD_XFER_STREAMS_DEFAULT, 1, RD_XFER_STREAMS_MAX);
  c->chunk = (uint32_t)env_long("RAYDIST_XFER_CHUNK", RD_XFER_CHUNK_DEFAULT, RD_XFER_CHUNK_MIN,
                                RD_XFER_CHUNK_MAX);
  pthread_mutex_init(&c->mu, NULL);
  grpc_init();
  *out = c;
  return 0;
}

void rd_xfer_client_destroy(rd_xfer_client *c) {
  if (!c) return;
  for (size_t i = 0; i < c->npeers; i++) grpc_channel_destroy(c->peers[i].ch);
  free(c->peers);
  pthread_mutex_destroy(&c->mu);
  free(c);
  grpc_shutdown();
}

/* The cached channel to peer; channels live until the client is destroyed. */
static grpc_channel *peer_channel(rd_xfer_client *c, const char *peer) {
  grpc_channel *ch = NULL;
  pthread_mutex_lock(&c->mu);
  for (size_t i = 0; i < c->npeers && !ch; i++)
    if (!strcmp(c->peers[i].peer, peer)) ch = c->peers[i].ch;
  if (!ch && c->npeers == c->cap) {
    size_t cap = c->cap ? 2 * c->cap : 8;
    peer_chan *v = realloc(c->peers, cap * sizeof(*v));
    if (v) {
      c->peers = v;
      c->cap = cap;
    }
  }
  if (!ch && c->npeers < c->cap) {
    /* Large receive windows: the default 64 KiB lookahead caps a stream
     * at a few hundred MiB/s. */
    grpc_arg extra[1];
    extra[0].type = GRPC_ARG_INTEGER;
    extra[0].key = (char *)GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES;
    extra[0].value.integer = 8 << 20;
    ch = rd__rpc_channel(peer, MSG_MAX, 5000, extra, 1);
    if (ch) {
      snprintf(c->peers[c->npeers].peer, sizeof(c->peers[0].peer), "%s", peer);
      c->peers[c->npeers++].ch = ch;
    }
  }
  pthread_mutex_unlock(&c->mu);
  return ch;
}

/* Reads a received Chunk straight out of the byte buffer's slices. */
typedef struct bb_cursor {
  grpc_byte_buffer_reader r;
  grpc_slice cur;
  size_t pos;
  int have;
} bb_cursor;

static size_t cur_read(bb_cursor *k, uint8_t *dst, size_t n) {
  size_t got = 0;
  while (got < n) {
    if (!k->have || k->pos == GRPC_SLICE_LENGTH(k->cur)) {
      if (k->have) grpc_slice_unref(k->cur);
      k->have = grpc_byte_buffer_reader_next(&k->r, &k->cur);
      k->pos = 0;
      if (!k->have) break;
      continue;
    }
    size_t take = GRPC_SLICE_LENGTH(k->cur) - k->pos;
    if (take > n - got) take = n - got;
    memcpy(dst + got, GRPC_SLICE_START_PTR(k->cur) + k->pos, take);
    k->pos += take;
    got += take;
  }
  return got;
}

static int cur_varint(bb_cursor *k, uint64_t *v) {
  *v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    uint8_t b;
    if (cur_read(k, &b, 1) != 1) return -1;
    *v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return 0;
  }
  return -1;
}

typedef struct xstream {
  grpc_call *call;
  uint64_t next, end;          /* next expected offset, end of the range */
  grpc_byte_buffer *send, *recv;
  grpc_metadata_array init_md, trailers;
  grpc_status_code st;
  grpc_slice details;
  int status_done;
} xstream;

/* One received chunk for stream x into dst: 0, or -1 when it does not
 * continue the range exactly (the caller fails the pull with RD_EPROTO). */
static int take_chunk(xstream *x, grpc_byte_buffer *bb, uint8_t *dst) {
  bb_cursor k = {0};
  if (!grpc_byte_buffer_reader_init(&k.r, bb)) return -1;
  int bad = 0;
  uint8_t tag;
  uint64_t off = 0, len = 0;
  if (cur_read(&k, &tag, 1) != 1) bad = 1;
  if (!bad && tag == 0x08) {   /* offset; absent when 0 in canonical protobuf */
    if (cur_varint(&k, &off) != 0 || cur_read(&k, &tag, 1) != 1) bad = 1;
  }
  if (!bad && (tag != 0x12 || cur_varint(&k, &len) != 0)) bad = 1;
  if (!bad && (off != x->next || len == 0 || len > x->end - x->next)) bad = 1;
  if (!bad && cur_read(&k, dst + off, len) != len) bad = 1;
  if (!bad) {   /* nothing may follow the data */
    uint8_t extra;
    if (cur_read(&k, &extra, 1) != 0) bad = 1;
  }
  if (k.have) grpc_slice_unref(k.cur);
  grpc_byte_buffer_reader_destroy(&k.r);
  if (bad) return -1;
  x->next += len;
  return 0;
}

enum { XT_MSG = 0, XT_STATUS = 1 };
#define XTAG(i, kind) ((void *)(intptr_t)(((i) << 1) | (kind)))

static int start_recv(xstream *x, int i) {
  grpc_op op;
  memset(&op, 0, sizeof(op));
  op.op = GRPC_OP_RECV_MESSAGE;
  op.data.recv_message.recv_message = &x->recv;
  return grpc_call_start_batch(x->call, &op, 1, XTAG(i, XT_MSG), NULL) == GRPC_CALL_OK ? 0 : -1;
}

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Sets the pull's first error. */
static int set_err(int *rc, char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int set_err(int *rc, char *err, size_t errlen, int code, const char *fmt, ...) {
  if (*rc) return *rc;
  *rc = code;
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return code;
}

int rd_xfer_pull(rd_xfer_client *c, const char *peer, uint64_t oid,
                 void *(*alloc)(void *arg, uint64_t size), void *arg, int timeout_ms,
                 rd_xfer_stats *st_out, char *err, size_t errlen) {
  double t0 = mono_s();
  if (err && errlen) err[0] = 0;
  if (!c || !alloc) {
    if (err) snprintf(err, errlen, "xfer pull: no client or no alloc");
    return RD_EINVAL;
  }
  int rc = rd__rpc_check_addr(peer, err, errlen);
  if (rc) return rc;
  grpc_channel *ch = peer_channel(c, peer);
  if (!ch) {
    if (err) snprintf(err, errlen, "xfer pull: out of memory");
    return RD_ENOMEM;
  }
  gpr_timespec deadline = rd__rpc_deadline(timeout_ms);

  /* 1. the size */
  Rd__Xfer__StatRequest sq = RD__XFER__STAT_REQUEST__INIT;
  sq.oid = oid;
  ProtobufCMessage *rep = NULL;
  char why[256] = "";
  rc = rd__rpc_unary(ch, "/rd.xfer.Xfer/Stat", c->token, &sq.base, &rd__xfer__stat_reply__descriptor,
                     &rep, timeout_ms, 0, why, sizeof(why));
  if (rc) {
    if (rc == RD_ECONN) snprintf(err, errlen, "cannot reach %s: %s", peer, why);
    else if (err) snprintf(err, errlen, "%s: %s", peer, why);
    return rc;
  }
  uint64_t size = ((Rd__Xfer__StatReply *)rep)->size;
  protobuf_c_message_free_unpacked(rep, NULL);

  /* 2. the destination */
  uint8_t *dst = alloc(arg, size);
  if (!dst && size) {
    if (err) snprintf(err, errlen, "no room for object %016" PRIx64 " (%" PRIu64 " bytes)", oid, size);
    return RD_ESTORE_FULL;
  }
  int n = 0;
  if (size) {
    uint64_t chunks = (size + c->chunk - 1) / c->chunk;
    n = chunks < (uint64_t)c->streams ? (int)chunks : c->streams;
  }
  /* 3. n ranges, each a whole number of chunks, one stream each */
  xstream xs[RD_XFER_STREAMS_MAX];
  memset(xs, 0, sizeof(xs));
  grpc_completion_queue *cq = n ? grpc_completion_queue_create_for_next(NULL) : NULL;
  grpc_metadata md;
  rd__rpc_token_md(&md, c->token);
  uint64_t per = n ? ((size / c->chunk + (size % c->chunk != 0) + (uint64_t)n - 1) / (uint64_t)n) * c->chunk : 0;
  int pending = 0;
  for (int i = 0; i < n; i++) {
    xstream *x = &xs[i];
    x->next = (uint64_t)i * per;
    x->end = x->next + per < size ? x->next + per : size;
    x->details = grpc_empty_slice();
    grpc_metadata_array_init(&x->init_md);
    grpc_metadata_array_init(&x->trailers);
    if (x->next >= x->end) continue;   /* fewer ranges than streams */
    Rd__Xfer__PullRequest pq = RD__XFER__PULL_REQUEST__INIT;
    pq.oid = oid;
    pq.offset = x->next;
    pq.length = x->end - x->next;
    pq.chunk = c->chunk;
    x->send = rd__rpc_pack(&pq.base);
    x->call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
                                       grpc_slice_from_static_string("/rd.xfer.Xfer/Pull"), NULL, deadline, NULL);
    grpc_op ops[5];
    memset(ops, 0, sizeof(ops));
    rd__rpc_client_open_ops(ops, &md, 0, x->send, &x->init_md);
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &x->recv;
    if (grpc_call_start_batch(x->call, ops, 5, XTAG(i, XT_MSG), NULL) == GRPC_CALL_OK) pending++;
    else set_err(&rc, err, errlen, RD_EPROTO, "cannot start a pull stream");
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[0].data.recv_status_on_client.trailing_metadata = &x->trailers;
    ops[0].data.recv_status_on_client.status = &x->st;
    ops[0].data.recv_status_on_client.status_details = &x->details;
    if (grpc_call_start_batch(x->call, ops, 1, XTAG(i, XT_STATUS), NULL) == GRPC_CALL_OK) pending++;
    else x->status_done = 1;
  }
  int cancelled = 0;
  /* Each call carries the deadline; the extra second is only a guard. */
  gpr_timespec guard = timeout_ms < 0 ? gpr_inf_future(GPR_CLOCK_MONOTONIC)
                                      : gpr_time_add(deadline, gpr_time_from_millis(1000, GPR_TIMESPAN));
  while (pending) {
    grpc_event ev = grpc_completion_queue_next(cq, guard, NULL);
    if (ev.type == GRPC_QUEUE_TIMEOUT) {
      set_err(&rc, err, errlen, RD_ETIMEDOUT, "pull from %s timed out", peer);
      for (int i = 0; i < n; i++) if (xs[i].call) grpc_call_cancel(xs[i].call, NULL);
      cancelled = 1;
      guard = gpr_inf_future(GPR_CLOCK_MONOTONIC);   /* cancelling completes every op */
      continue;
    }
    pending--;
    intptr_t t = (intptr_t)ev.tag;
    xstream *x = &xs[t >> 1];
    if ((t & 1) == XT_STATUS) {
      x->status_done = 1;
      continue;
    }
    if (!ev.success || !x->recv) continue;   /* stream over; its status tells why */
    int bad = rc == 0 && take_chunk(x, x->recv, dst) != 0;
    grpc_byte_buffer_destroy(x->recv);
    x->recv = NULL;
    if (bad) set_err(&rc, err, errlen, RD_EPROTO, "%s sent a chunk outside the range asked for", peer);
    if (rc) {
      if (!cancelled) {
        for (int i = 0; i < n; i++) if (xs[i].call) grpc_call_cancel(xs[i].call, NULL);
        cancelled = 1;
      }
      continue;
    }
    if (start_recv(x, (int)(t >> 1)) == 0) pending++;
  }
  /* 4. every stream's verdict */
  uint64_t got = 0;
  for (int i = 0; i < n; i++) got += xs[i].call ? xs[i].next - (uint64_t)i * per : 0;
  for (int i = 0; i < n && !rc; i++) {
    xstream *x = &xs[i];
    if (!x->call) continue;
    int r = rd__rpc_call_result(x->st, x->details, &x->trailers, why, sizeof(why));
    if (r == RD_ECONN || r == RD_EPROTO || r == RD_ECANCELED) {
      set_err(&rc, err, errlen, RD_ENODE_DIED,
              "peer %s went away after %" PRIu64 " of %" PRIu64 " bytes of object %016" PRIx64 " (%s)",
              peer, got, size, oid, why);
    } else if (r == RD_ETIMEDOUT) {
      set_err(&rc, err, errlen, r, "pull of object %016" PRIx64 " from %s timed out after %" PRIu64
              " of %" PRIu64 " bytes", oid, peer, got, size);
    } else if (r) {
      set_err(&rc, err, errlen, r, "%s: %s", peer, why);
    } else if (x->next != x->end) {
      set_err(&rc, err, errlen, RD_EPROTO, "%s ended a stream %" PRIu64 " bytes short", peer, x->end - x->next);
    }
  }
  for (int i = 0; i < n; i++) {
    xstream *x = &xs[i];
    if (x->recv) grpc_byte_buffer_destroy(x->recv);
    if (x->send) grpc_byte_buffer_destroy(x->send);
    grpc_slice_unref(x->details);
    grpc_metadata_array_destroy(&x->init_md);
    grpc_metadata_array_destroy(&x->trailers);
    if (x->call) grpc_call_unref(x->call);
  }
  rd__rpc_token_md_release(&md);
  if (cq) {
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type != GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(cq);
  }
  if (st_out) {
    st_out->bytes = size;
    st_out->seconds = mono_s() - t0;
    st_out->streams = n;
    st_out->chunk = c->chunk;
  }
  return rc;
}
