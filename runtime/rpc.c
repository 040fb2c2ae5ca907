/* runtime/rpc.c - gRPC core helpers and the server skeleton (see rpc.h).
 *
 * The server runs one completion queue polled by a few threads; each call is
 * a small state machine whose tags are fields of the call state, so a
 * completion finds its call without a lookup.  A call's state lives until
 * its last batch completes and its last ref is dropped; the server's stop
 * waits for that before it shuts the queue down, because starting a batch on
 * a shut-down queue aborts the process. */
#include "rpc.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>

#include "log.h"
#include "raydist.h"

gpr_timespec rd__rpc_deadline(int timeout_ms) {
  if (timeout_ms < 0) return gpr_inf_future(GPR_CLOCK_MONOTONIC);
  /* gpr_time_from_millis(ms, MONOTONIC) is an absolute time near zero
   * (RPC-NOTES): add a timespan to now instead. */
  return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                      gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
}

int rd__rpc_check_addr(const char *addr, char *err, size_t errlen) {
  if (!addr || !*addr) {
    if (err) snprintf(err, errlen, "empty address (want IP:PORT)");
    return RD_EINVAL;
  }
  const char *colon = strrchr(addr, ':');
  size_t hostlen = colon ? (size_t)(colon - addr) : 0;
  if (!colon || hostlen == 0 || strlen(addr) > 255) {
    if (err) snprintf(err, errlen, "bad address '%.64s' (want IP:PORT)", addr);
    return RD_EINVAL;
  }
  if (addr[0] == '[' ? addr[hostlen - 1] != ']' : memchr(addr, ':', hostlen) != NULL) {
    if (err) snprintf(err, errlen, "bad address '%.64s' (IPv6 goes in brackets)", addr);
    return RD_EINVAL;
  }
  for (const char *p = addr; p < colon; p++) {
    if (isspace((unsigned char)*p) || *p == '/' || *p == ',') {
      if (err) snprintf(err, errlen, "bad host in address '%.64s'", addr);
      return RD_EINVAL;
    }
  }
  char *end;
  errno = 0;
  long port = strtol(colon + 1, &end, 10);
  if (!colon[1] || *end || errno || port < 0 || port > 65535 || !isdigit((unsigned char)colon[1])) {
    if (err) snprintf(err, errlen, "bad port in address '%.64s'", addr);
    return RD_EINVAL;
  }
  return 0;
}

grpc_channel *rd__rpc_channel(const char *target, size_t max_msg, int keepalive_ms,
                              const grpc_arg *extra, size_t nextra) {
  grpc_arg args[12];
  int n = 0;
#define INT_ARG(k, v)                                                  \
  do {                                                                 \
    args[n].type = GRPC_ARG_INTEGER;                                   \
    args[n].key = (char *)(k);                                         \
    args[n].value.integer = (v);                                       \
    n++;                                                               \
  } while (0)
  INT_ARG("grpc.enable_retries", 0);
  INT_ARG("grpc.enable_channelz", 0);
  /* Not grpc.minimal_stack (RPC-NOTES suggests it): on 1.51 it drops the
   * client's deadline filter, so a call to a frozen peer never expires
   * (measured: a 300 ms deadline fired after 800 ms, a stopped peer's
   * stream not at all).  Deadlines matter more than 15% latency here. */
  if (max_msg) INT_ARG(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, (int)max_msg);
  if (keepalive_ms > 0) {
    INT_ARG(GRPC_ARG_KEEPALIVE_TIME_MS, keepalive_ms);
    INT_ARG(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, keepalive_ms);
    INT_ARG(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    INT_ARG(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  }
#undef INT_ARG
  for (size_t i = 0; i < nextra && i < 4; i++) args[n++] = extra[i];
  grpc_channel_args ca = {(size_t)n, args};
  grpc_channel_credentials *cr = grpc_insecure_credentials_create();
  grpc_channel *ch = grpc_channel_create(target, cr, &ca);
  grpc_channel_credentials_release(cr);
  return ch;
}

grpc_byte_buffer *rd__rpc_pack(const ProtobufCMessage *m) {
  size_t n = protobuf_c_message_get_packed_size(m);
  grpc_slice s = grpc_slice_malloc(n);
  protobuf_c_message_pack(m, GRPC_SLICE_START_PTR(s));
  grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
  grpc_slice_unref(s);
  return bb;
}

ProtobufCMessage *rd__rpc_unpack(const ProtobufCMessageDescriptor *d, grpc_byte_buffer *bb,
                                 size_t max) {
  if (!bb || grpc_byte_buffer_length(bb) > max) return NULL;
  grpc_byte_buffer_reader r;
  if (!grpc_byte_buffer_reader_init(&r, bb)) return NULL;
  grpc_slice s = grpc_byte_buffer_reader_readall(&r);
  grpc_byte_buffer_reader_destroy(&r);
  ProtobufCMessage *m =
      protobuf_c_message_unpack(d, NULL, GRPC_SLICE_LENGTH(s), GRPC_SLICE_START_PTR(s));
  grpc_slice_unref(s);
  return m;
}

int rd__rpc_status_to_rd(grpc_status_code st) {
  switch (st) {
    case GRPC_STATUS_OK: return 0;
    case GRPC_STATUS_CANCELLED: return RD_ECANCELED;
    case GRPC_STATUS_INVALID_ARGUMENT: return RD_EINVAL;
    case GRPC_STATUS_OUT_OF_RANGE: return RD_EINVAL;
    case GRPC_STATUS_RESOURCE_EXHAUSTED: return RD_EINVAL;   /* message over the size limit */
    case GRPC_STATUS_DEADLINE_EXCEEDED: return RD_ETIMEDOUT;
    case GRPC_STATUS_NOT_FOUND: return RD_ENOENT;
    case GRPC_STATUS_ALREADY_EXISTS: return RD_EEXIST;
    case GRPC_STATUS_PERMISSION_DENIED: return RD_EAUTH;
    case GRPC_STATUS_UNAUTHENTICATED: return RD_EAUTH;
    case GRPC_STATUS_FAILED_PRECONDITION: return RD_ESTATE;
    case GRPC_STATUS_ABORTED: return RD_EAGAIN;
    case GRPC_STATUS_UNIMPLEMENTED: return RD_ENOTSUP;
    case GRPC_STATUS_UNAVAILABLE: return RD_ECONN;
    case GRPC_STATUS_DATA_LOSS: return RD_EIO;
    default: return RD_EPROTO;   /* UNKNOWN, INTERNAL */
  }
}

grpc_status_code rd__rpc_rd_to_status(int rc) {
  switch (rc) {
    case 0: return GRPC_STATUS_OK;
    case RD_EINVAL: case RD_EPROTO: return GRPC_STATUS_INVALID_ARGUMENT;
    case RD_ETIMEDOUT: return GRPC_STATUS_DEADLINE_EXCEEDED;
    case RD_ENOENT: case RD_ENOFUNC: return GRPC_STATUS_NOT_FOUND;
    case RD_EEXIST: return GRPC_STATUS_ALREADY_EXISTS;
    case RD_EAUTH: return GRPC_STATUS_UNAUTHENTICATED;
    case RD_ESTATE: case RD_ENODE_DIED: return GRPC_STATUS_FAILED_PRECONDITION;
    case RD_EAGAIN: return GRPC_STATUS_ABORTED;
    case RD_ENOTSUP: return GRPC_STATUS_UNIMPLEMENTED;
    case RD_ENOMEM: case RD_E2BIG: case RD_ESTORE_FULL: case RD_ENOSPC:
      return GRPC_STATUS_RESOURCE_EXHAUSTED;
    case RD_ECANCELED: return GRPC_STATUS_CANCELLED;
    case RD_EIO: return GRPC_STATUS_DATA_LOSS;
    default: return GRPC_STATUS_INTERNAL;
  }
}

static const grpc_slice *md_find(const grpc_metadata_array *a, const char *key) {
  for (size_t i = 0; a && i < a->count; i++)
    if (grpc_slice_str_cmp(a->metadata[i].key, key) == 0) return &a->metadata[i].value;
  return NULL;
}

int rd__rpc_call_result(grpc_status_code st, grpc_slice details, const grpc_metadata_array *trailers,
                        char *err, size_t errlen) {
  if (st == GRPC_STATUS_OK) return 0;
  int rc = rd__rpc_status_to_rd(st);
  const grpc_slice *v = md_find(trailers, RD_RPC_CODE_MD);
  if (v && GRPC_SLICE_LENGTH(*v) > 0 && GRPC_SLICE_LENGTH(*v) < 8) {
    char buf[8];
    memcpy(buf, GRPC_SLICE_START_PTR(*v), GRPC_SLICE_LENGTH(*v));
    buf[GRPC_SLICE_LENGTH(*v)] = 0;
    int code = atoi(buf);
    if (code < 0 && code >= RD__ERR_MIN) rc = code;   /* the server's exact code */
  }
  if (err && errlen) {
    size_t n = GRPC_SLICE_LENGTH(details);
    if (n) {
      if (n >= errlen) n = errlen - 1;
      memcpy(err, GRPC_SLICE_START_PTR(details), n);
      err[n] = 0;
    } else {
      snprintf(err, errlen, "gRPC status %d", (int)st);
    }
  }
  return rc;
}

void rd__rpc_token_md(grpc_metadata *md, const char *token) {
  memset(md, 0, sizeof(*md));
  md->key = grpc_slice_from_static_string(RD_RPC_TOKEN_MD);
  md->value = grpc_slice_from_copied_string(token ? token : "");
}

void rd__rpc_token_md_release(grpc_metadata *md) {
  grpc_slice_unref(md->key);
  grpc_slice_unref(md->value);
}

size_t rd__rpc_client_open_ops(grpc_op *ops, grpc_metadata *md, unsigned flags, grpc_byte_buffer *send,
                               grpc_metadata_array *init_md) {
  memset(ops, 0, 4 * sizeof(*ops));
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[0].data.send_initial_metadata.count = 1;
  ops[0].data.send_initial_metadata.metadata = md;
  ops[0].flags = (flags & RD_RPC_WAIT_READY) ? GRPC_INITIAL_METADATA_WAIT_FOR_READY : 0;
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = send;
  ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[3].data.recv_initial_metadata.recv_initial_metadata = init_md;
  return 4;
}

int rd__rpc_unary(grpc_channel *ch, const char *method, const char *token,
                  const ProtobufCMessage *req, const ProtobufCMessageDescriptor *reply_desc,
                  ProtobufCMessage **reply_out, int timeout_ms, unsigned flags, char *err,
                  size_t errlen) {
  if (reply_out) *reply_out = NULL;
  grpc_byte_buffer *send = rd__rpc_pack(req);
  if (!send) {
    if (err) snprintf(err, errlen, "out of memory packing %s", method);
    return RD_ENOMEM;
  }
  int rc = rd__rpc_unary_raw(ch, method, token, send, reply_desc, reply_out, timeout_ms, flags, err,
                             errlen);
  grpc_byte_buffer_destroy(send);
  return rc;
}

int rd__rpc_unary_raw(grpc_channel *ch, const char *method, const char *token, grpc_byte_buffer *send,
                      const ProtobufCMessageDescriptor *reply_desc, ProtobufCMessage **reply_out,
                      int timeout_ms, unsigned flags, char *err, size_t errlen) {
  if (reply_out) *reply_out = NULL;
  grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
  grpc_slice mslice = grpc_slice_from_static_string(method);
  grpc_call *call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, mslice, NULL,
                                             rd__rpc_deadline(timeout_ms), NULL);
  grpc_metadata md;
  rd__rpc_token_md(&md, token);
  grpc_metadata_array init_md, trailers;
  grpc_metadata_array_init(&init_md);
  grpc_metadata_array_init(&trailers);
  grpc_byte_buffer *recv = NULL;
  grpc_status_code st = GRPC_STATUS_UNKNOWN;
  grpc_slice details = grpc_empty_slice();
  grpc_op ops[6];
  memset(ops, 0, sizeof(ops));
  rd__rpc_client_open_ops(ops, &md, flags, send, &init_md);
  ops[4].op = GRPC_OP_RECV_MESSAGE;
  ops[4].data.recv_message.recv_message = &recv;
  ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[5].data.recv_status_on_client.trailing_metadata = &trailers;
  ops[5].data.recv_status_on_client.status = &st;
  ops[5].data.recv_status_on_client.status_details = &details;
  int rc;
  grpc_call_error ce = grpc_call_start_batch(call, ops, 6, (void *)1, NULL);
  if (ce != GRPC_CALL_OK) {
    if (err) snprintf(err, errlen, "%s: cannot start call (%d)", method, (int)ce);
    rc = RD_EPROTO;
  } else {
    /* The call's deadline should complete the batch, but a wait-for-ready
     * call to a refused address was seen to outlive it on 1.51: wait with
     * our own deadline too, then cancel and collect the completion. */
    gpr_timespec until = timeout_ms < 0 ? gpr_inf_future(GPR_CLOCK_MONOTONIC) : rd__rpc_deadline(timeout_ms + 500);
    grpc_event ev = grpc_completion_queue_next(cq, until, NULL);
    if (ev.type == GRPC_QUEUE_TIMEOUT) {
      grpc_call_cancel_with_status(call, GRPC_STATUS_DEADLINE_EXCEEDED, "deadline exceeded", NULL);
      ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    }
    (void)ev;
    rc = rd__rpc_call_result(st, details, &trailers, err, errlen);
    if (rc == 0 && reply_desc) {
      ProtobufCMessage *m = rd__rpc_unpack(reply_desc, recv, SIZE_MAX);
      if (!m) {
        if (err) snprintf(err, errlen, "%s: malformed reply", method);
        rc = RD_EPROTO;
      } else if (reply_out) {
        *reply_out = m;
      } else {
        protobuf_c_message_free_unpacked(m, NULL);
      }
    }
  }
  if (recv) grpc_byte_buffer_destroy(recv);
  grpc_slice_unref(details);
  grpc_metadata_array_destroy(&init_md);
  grpc_metadata_array_destroy(&trailers);
  rd__rpc_token_md_release(&md);
  grpc_call_unref(call);
  grpc_completion_queue_shutdown(cq);
  while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
         GRPC_QUEUE_SHUTDOWN) {
  }
  grpc_completion_queue_destroy(cq);
  return rc;
}

int rd__rpc_read_token(const char *path, char *token, size_t len, char *err, size_t errlen) {
  FILE *f = path ? fopen(path, "r") : NULL;
  if (!f) {
    if (err) snprintf(err, errlen, "cannot read token file '%s': %s", path ? path : "(none)",
                      strerror(errno));
    return path ? RD_EIO : RD_EINVAL;
  }
  char buf[RD_RPC_TOKEN_MAX + 2];
  char *line = fgets(buf, sizeof(buf), f);
  fclose(f);
  if (!line) buf[0] = 0;
  char *s = buf;
  while (*s && isspace((unsigned char)*s)) s++;
  size_t n = strlen(s);
  while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
  if (n == 0 || n >= RD_RPC_TOKEN_MAX || n >= len) {
    if (err) snprintf(err, errlen, "token file '%s' must hold one token of 1..%d bytes", path,
                      RD_RPC_TOKEN_MAX - 1);
    return RD_EINVAL;
  }
  memcpy(token, s, n + 1);
  return 0;
}

/* ------------------------------------------------------------------ */
/* Server skeleton                                                    */

enum { TAG_NEW, TAG_SEND, TAG_STATUS, TAG_CLOSE, TAG_SHUTDOWN };

typedef struct rpc_tag {
  int kind;
  rd__rpc_call *call;
} rpc_tag;

typedef struct rpc_reg {
  const rd__rpc_method *m;
  void *handle;                 /* from grpc_server_register_method */
} rpc_reg;

struct rd__rpc_server {
  grpc_server *server;
  grpc_completion_queue *cq;
  rpc_reg *regs;
  size_t nregs;
  void *arg;
  size_t max_msg;
  char token[RD_RPC_TOKEN_MAX];
  size_t token_len;
  pthread_t *threads;
  int nthreads;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int stopping;
  int shutdown_done;
  long live_calls;              /* call states allocated and not yet freed */
  rpc_tag shutdown_tag;
};

struct rd__rpc_call {
  rd__rpc_server *srv;
  const rpc_reg *reg;
  grpc_call *call;
  gpr_timespec deadline;
  grpc_metadata_array md;
  grpc_call_details details;    /* filled for unregistered methods only */
  grpc_byte_buffer *payload;
  rpc_tag tag_new, tag_send, tag_status, tag_close;
  pthread_mutex_t mu;
  int refs;
  int send_busy;                /* a SEND_MESSAGE (or initial metadata) batch in flight */
  int status_sent;
  int closed;                   /* RECV_CLOSE_ON_SERVER done: no more next() */
  int cancelled;
  grpc_byte_buffer *out;        /* the packed reply / next message */
  grpc_byte_buffer *sending;    /* owned until its batch completes */
  void *stream;
  grpc_status_code st;
  grpc_slice st_details;
  grpc_metadata trailer;
  char codebuf[8];
  char msg[256];
  char peer[64];
};

static void srv_request(rd__rpc_server *s, const rpc_reg *reg);

static void call_free(rd__rpc_call *c) {
  rd__rpc_server *s = c->srv;
  if (c->payload) grpc_byte_buffer_destroy(c->payload);
  if (c->out) grpc_byte_buffer_destroy(c->out);
  if (c->sending) grpc_byte_buffer_destroy(c->sending);
  grpc_metadata_array_destroy(&c->md);
  grpc_call_details_destroy(&c->details);
  if (c->call) grpc_call_unref(c->call);
  pthread_mutex_destroy(&c->mu);
  free(c);
  pthread_mutex_lock(&s->mu);
  s->live_calls--;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

void rd__rpc_call_ref(rd__rpc_call *c) {
  pthread_mutex_lock(&c->mu);
  c->refs++;
  pthread_mutex_unlock(&c->mu);
}

void rd__rpc_call_unref(rd__rpc_call *c) {
  pthread_mutex_lock(&c->mu);
  int last = --c->refs == 0;
  pthread_mutex_unlock(&c->mu);
  if (last) call_free(c);
}

int rd__rpc_reply(rd__rpc_call *c, const ProtobufCMessage *m) {
  grpc_byte_buffer *bb = rd__rpc_pack(m);
  if (!bb) return RD_ENOMEM;
  rd__rpc_reply_raw(c, bb);
  return 0;
}

void rd__rpc_reply_raw(rd__rpc_call *c, grpc_byte_buffer *bb) {
  if (c->out) grpc_byte_buffer_destroy(c->out);
  c->out = bb;
}

void rd__rpc_fail(rd__rpc_call *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->msg, sizeof(c->msg), fmt, ap);
  va_end(ap);
}

const char *rd__rpc_call_peer(rd__rpc_call *c) { return c->peer[0] ? c->peer : "?"; }

/* Final batch: initial metadata (unless a stream sent it), the reply when
 * rc == 0, the status with the rd-code trailer, and for unary calls the
 * close.  Called with c->mu held or before the call is shared. */
static void call_send_status(rd__rpc_call *c, int rc, int with_md, int with_close) {
  grpc_op ops[4];
  memset(ops, 0, sizeof(ops));
  int n = 0;
  if (with_md) ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
  if (rc == 0 && c->out) {
    c->sending = c->out;
    c->out = NULL;
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n++].data.send_message.send_message = c->sending;
  }
  c->st = rd__rpc_rd_to_status(rc);
  if (rc != 0 && !c->msg[0]) snprintf(c->msg, sizeof(c->msg), "%s", rd_strerror(rc));
  c->st_details = grpc_slice_from_copied_string(c->msg);
  ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
  ops[n].data.send_status_from_server.status = c->st;
  ops[n].data.send_status_from_server.status_details = &c->st_details;
  if (rc != 0) {
    snprintf(c->codebuf, sizeof(c->codebuf), "%d", rc);
    c->trailer.key = grpc_slice_from_static_string(RD_RPC_CODE_MD);
    c->trailer.value = grpc_slice_from_static_string(c->codebuf);
    ops[n].data.send_status_from_server.trailing_metadata_count = 1;
    ops[n].data.send_status_from_server.trailing_metadata = &c->trailer;
  }
  n++;
  if (with_close) {
    ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[n++].data.recv_close_on_server.cancelled = &c->cancelled;
  }
  c->status_sent = 1;
  c->refs++;
  grpc_call_error ce = grpc_call_start_batch(c->call, ops, (size_t)n, &c->tag_status, NULL);
  if (ce != GRPC_CALL_OK) {
    rd__log(RD_LOG_WARN, "rpc: cannot send status (%d)", (int)ce);
    grpc_slice_unref(c->st_details);
    c->refs--;
  }
}

/* Next message of a stream, when none is in flight.  c->mu held. */
static void stream_pump(rd__rpc_call *c) {
  if (c->closed || c->status_sent || c->send_busy) return;
  int r = c->reg->m->stream->next(c->stream, c);
  if (r == 1 && c->out) {
    c->sending = c->out;
    c->out = NULL;
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_SEND_MESSAGE;
    op.data.send_message.send_message = c->sending;
    c->send_busy = 1;
    c->refs++;
    if (grpc_call_start_batch(c->call, &op, 1, &c->tag_send, NULL) != GRPC_CALL_OK) {
      c->send_busy = 0;
      c->refs--;
      grpc_byte_buffer_destroy(c->sending);
      c->sending = NULL;
      call_send_status(c, RD_EPROTO, 0, 0);
    }
  } else if (r != 0) {
    call_send_status(c, r == RD_RPC_END ? 0 : (r < 0 ? r : RD_EPROTO), 0, 0);
  }
}

void rd__rpc_stream_wake(rd__rpc_call *c) {
  pthread_mutex_lock(&c->mu);
  stream_pump(c);
  pthread_mutex_unlock(&c->mu);
}

/* Constant time in the token's length, so timing tells nothing of its bytes. */
static int token_ok(const rd__rpc_server *s, const grpc_metadata_array *md) {
  const grpc_slice *v = md_find(md, RD_RPC_TOKEN_MD);
  if (!v) return 0;
  size_t n = GRPC_SLICE_LENGTH(*v);
  const uint8_t *p = GRPC_SLICE_START_PTR(*v);
  unsigned diff = (unsigned)(n != s->token_len);
  for (size_t i = 0; i < s->token_len; i++) {
    uint8_t b = i < n ? p[i] : 0;
    diff |= (unsigned)(b ^ (uint8_t)s->token[i]);
  }
  return diff == 0;
}

static void on_new_call(rd__rpc_call *c) {
  rd__rpc_server *s = c->srv;
  const rd__rpc_method *m = c->reg->m;
  pthread_mutex_lock(&s->mu);
  if (!s->stopping) srv_request(s, c->reg);   /* keep one request armed per method */
  pthread_mutex_unlock(&s->mu);
  char *peer = grpc_call_get_peer(c->call);
  if (peer) {
    snprintf(c->peer, sizeof(c->peer), "%s", peer);
    gpr_free(peer);
  }
  int rc = 0;
  ProtobufCMessage *req = NULL;
  if (!c->reg->handle) {   /* a method nobody registered */
    char name[128];
    size_t n = GRPC_SLICE_LENGTH(c->details.method);
    if (n >= sizeof(name)) n = sizeof(name) - 1;
    memcpy(name, GRPC_SLICE_START_PTR(c->details.method), n);
    name[n] = 0;
    rd__log(RD_LOG_WARN, "rpc: unknown method %s from %s", name, c->peer);
    rd__rpc_fail(c, "unknown method %s", name);
    rc = RD_ENOTSUP;
  } else if (!token_ok(s, &c->md)) {
    rd__log(RD_LOG_WARN, "rpc: %s from %s refused: missing or wrong cluster token", m->name, c->peer);
    rd__rpc_fail(c, "missing or wrong cluster token");
    rc = RD_EAUTH;
  } else if (!c->payload) {
    rd__rpc_fail(c, "%s: no request message", m->name);
    rc = RD_EINVAL;
  } else if (!(req = rd__rpc_unpack(m->req, c->payload, s->max_msg))) {
    rd__log(RD_LOG_WARN, "rpc: %s from %s: malformed request", m->name, c->peer);
    rd__rpc_fail(c, "%s: malformed request", m->name);
    rc = RD_EINVAL;
  }
  if (c->payload) {
    grpc_byte_buffer_destroy(c->payload);
    c->payload = NULL;
  }
  /* Handlers run without c->mu: they may ref the call.  A stream counts
   * as sending until its initial metadata is out, so a producer that wakes
   * it early cannot send a message first. */
  if (rc == 0 && m->unary) {
    rc = m->unary(s->arg, c, req);
  } else if (rc == 0) {
    pthread_mutex_lock(&c->mu);
    c->send_busy = 1;
    pthread_mutex_unlock(&c->mu);
    rc = m->stream->start(s->arg, c, req, &c->stream);
  }
  pthread_mutex_lock(&c->mu);
  if (rc == 0 && m->stream) {
    /* Initial metadata now, so the client knows the stream is live; the
     * close op completes when the call ends either way. */
    {
      grpc_op op;
      memset(&op, 0, sizeof(op));
      op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
      op.data.recv_close_on_server.cancelled = &c->cancelled;
      c->refs++;
      if (grpc_call_start_batch(c->call, &op, 1, &c->tag_close, NULL) != GRPC_CALL_OK) {
        c->refs--;
        c->closed = 1;
      }
      memset(&op, 0, sizeof(op));
      op.op = GRPC_OP_SEND_INITIAL_METADATA;
      c->refs++;
      if (grpc_call_start_batch(c->call, &op, 1, &c->tag_send, NULL) != GRPC_CALL_OK) {
        c->send_busy = 0;
        c->refs--;
      }
      if (c->closed) {   /* could not even wait for the close: end here */
        pthread_mutex_unlock(&c->mu);
        m->stream->finish(c->stream);
        pthread_mutex_lock(&c->mu);
      }
    }
  } else {
    c->send_busy = 0;
    call_send_status(c, rc, 1, 1);
  }
  pthread_mutex_unlock(&c->mu);
  if (req) protobuf_c_message_free_unpacked(req, NULL);
  rd__rpc_call_unref(c);   /* the ref of the request itself */
}

static void on_tag(rpc_tag *t, int ok) {
  rd__rpc_call *c = t->call;
  switch (t->kind) {
    case TAG_NEW:
      if (!ok) {   /* server shutting down: the armed request is void */
        rd__rpc_call_unref(c);
        return;
      }
      on_new_call(c);
      return;
    case TAG_SEND:
      pthread_mutex_lock(&c->mu);
      c->send_busy = 0;
      if (c->sending) {
        grpc_byte_buffer_destroy(c->sending);
        c->sending = NULL;
      }
      if (ok) stream_pump(c);
      pthread_mutex_unlock(&c->mu);
      rd__rpc_call_unref(c);
      return;
    case TAG_STATUS:
      pthread_mutex_lock(&c->mu);
      grpc_slice_unref(c->st_details);
      if (c->sending) {
        grpc_byte_buffer_destroy(c->sending);
        c->sending = NULL;
      }
      pthread_mutex_unlock(&c->mu);
      rd__rpc_call_unref(c);
      return;
    case TAG_CLOSE: {
      pthread_mutex_lock(&c->mu);
      c->closed = 1;   /* from here on no next(): a pump in progress held mu */
      pthread_mutex_unlock(&c->mu);
      c->reg->m->stream->finish(c->stream);
      rd__rpc_call_unref(c);
      return;
    }
    default:
      return;
  }
}

static void *cq_thread(void *arg) {
  rd__rpc_server *s = arg;
  for (;;) {
    grpc_event ev = grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    if (ev.type == GRPC_QUEUE_SHUTDOWN) break;
    if (ev.type != GRPC_OP_COMPLETE) continue;
    rpc_tag *t = ev.tag;
    if (t->kind == TAG_SHUTDOWN) {
      pthread_mutex_lock(&s->mu);
      s->shutdown_done = 1;
      pthread_cond_broadcast(&s->cv);
      pthread_mutex_unlock(&s->mu);
      continue;
    }
    on_tag(t, ev.success);
  }
  return NULL;
}

/* Arms one request for reg's method.  s->mu held. */
static void srv_request(rd__rpc_server *s, const rpc_reg *reg) {
  rd__rpc_call *c = calloc(1, sizeof(*c));
  if (!c) {
    rd__log(RD_LOG_ERROR, "rpc: out of memory arming %s", reg->m->name);
    return;
  }
  c->srv = s;
  c->reg = reg;
  c->refs = 1;
  pthread_mutex_init(&c->mu, NULL);
  grpc_metadata_array_init(&c->md);
  c->tag_new = (rpc_tag){TAG_NEW, c};
  c->tag_send = (rpc_tag){TAG_SEND, c};
  c->tag_status = (rpc_tag){TAG_STATUS, c};
  c->tag_close = (rpc_tag){TAG_CLOSE, c};
  grpc_call_details_init(&c->details);
  s->live_calls++;
  grpc_call_error ce =
      reg->handle ? grpc_server_request_registered_call(s->server, reg->handle, &c->call, &c->deadline,
                                                        &c->md, &c->payload, s->cq, s->cq, &c->tag_new)
                  : grpc_server_request_call(s->server, &c->call, &c->details, &c->md, s->cq, s->cq,
                                             &c->tag_new);
  if (ce != GRPC_CALL_OK) {
    rd__log(RD_LOG_ERROR, "rpc: cannot arm %s (%d)", reg->m->name, (int)ce);
    grpc_metadata_array_destroy(&c->md);
    grpc_call_details_destroy(&c->details);
    pthread_mutex_destroy(&c->mu);
    free(c);
    s->live_calls--;
  }
}

int rd__rpc_server_start(const char *bind, const char *token, const rd__rpc_method *methods,
                         size_t nmethods, void *arg, int nthreads, size_t max_msg,
                         rd__rpc_server **out, int *port_out, char *err, size_t errlen) {
  *out = NULL;
  int rc = rd__rpc_check_addr(bind, err, errlen);
  if (rc) return rc;
  if (!token || !*token || strlen(token) >= RD_RPC_TOKEN_MAX) {
    if (err) snprintf(err, errlen, "a cluster token of 1..%d bytes is required", RD_RPC_TOKEN_MAX - 1);
    return RD_EINVAL;
  }
  rd__rpc_server *s = calloc(1, sizeof(*s));
  rpc_reg *regs = calloc(nmethods + 1, sizeof(*regs));   /* + unknown methods */
  pthread_t *threads = calloc((size_t)(nthreads > 0 ? nthreads : 1), sizeof(pthread_t));
  if (!s || !regs || !threads) {
    free(s);
    free(regs);
    free(threads);
    if (err) snprintf(err, errlen, "out of memory");
    return RD_ENOMEM;
  }
  s->regs = regs;
  s->nregs = nmethods + 1;
  s->threads = threads;
  s->nthreads = nthreads > 0 ? nthreads : 1;
  s->arg = arg;
  s->max_msg = max_msg ? max_msg : 4u << 20;
  s->token_len = strlen(token);
  memcpy(s->token, token, s->token_len + 1);
  s->shutdown_tag.kind = TAG_SHUTDOWN;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);

  grpc_init();
  /* Clients ping every few seconds to notice a vanished server; without
   * these a server answers such pings with GOAWAY (too_many_pings). */
  static const struct { const char *key; int val; } iargs[] = {
      {"grpc.enable_channelz", 0},
      {GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000},
      {GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1},
      {GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0},
  };
  grpc_arg args[6];
  size_t na = 0;
  for (; na < sizeof(iargs) / sizeof(iargs[0]); na++) {
    args[na].type = GRPC_ARG_INTEGER;
    args[na].key = (char *)iargs[na].key;
    args[na].value.integer = iargs[na].val;
  }
  args[na].type = GRPC_ARG_INTEGER;
  args[na].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
  args[na++].value.integer = (int)s->max_msg;
  args[na].type = GRPC_ARG_INTEGER;
  args[na].key = (char *)GRPC_ARG_MAX_SEND_MESSAGE_LENGTH;
  args[na++].value.integer = (int)s->max_msg;
  grpc_channel_args ca = {na, args};
  s->server = grpc_server_create(&ca, NULL);
  s->cq = grpc_completion_queue_create_for_next(NULL);
  grpc_server_register_completion_queue(s->server, s->cq, NULL);
  for (size_t i = 0; i < nmethods; i++) {
    regs[i].m = &methods[i];
    regs[i].handle = grpc_server_register_method(s->server, methods[i].name, NULL,
                                                 GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
  }
  static const rd__rpc_method unknown = {"(unknown)", NULL, NULL, NULL};
  regs[nmethods].m = &unknown;   /* handle NULL: answered UNIMPLEMENTED */
  grpc_server_credentials *cr = grpc_insecure_server_credentials_create();
  int port = grpc_server_add_http2_port(s->server, bind, cr);
  grpc_server_credentials_release(cr);
  if (port <= 0) {
    if (err) snprintf(err, errlen, "cannot listen on %s (in use or not a local address?)", bind);
    grpc_server_destroy(s->server);
    grpc_completion_queue_shutdown(s->cq);
    while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
           GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(s->cq);
    grpc_shutdown();
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(regs);
    free(threads);
    free(s);
    return RD_ECONN;
  }
  grpc_server_start(s->server);
  pthread_mutex_lock(&s->mu);
  for (size_t i = 0; i < s->nregs; i++) srv_request(s, &regs[i]);
  pthread_mutex_unlock(&s->mu);
  for (int i = 0; i < s->nthreads; i++) pthread_create(&s->threads[i], NULL, cq_thread, s);
  if (port_out) *port_out = port;
  *out = s;
  return 0;
}

void rd__rpc_server_stop(rd__rpc_server *s) {
  if (!s) return;
  pthread_mutex_lock(&s->mu);
  s->stopping = 1;
  pthread_mutex_unlock(&s->mu);
  grpc_server_shutdown_and_notify(s->server, s->cq, &s->shutdown_tag);
  grpc_server_cancel_all_calls(s->server);
  /* Every call state must be gone before the queue shuts down: a stream
   * producer may still start a batch on a call it holds. */
  pthread_mutex_lock(&s->mu);
  while (!s->shutdown_done || s->live_calls > 0) pthread_cond_wait(&s->cv, &s->mu);
  pthread_mutex_unlock(&s->mu);
  grpc_completion_queue_shutdown(s->cq);
  for (int i = 0; i < s->nthreads; i++) pthread_join(s->threads[i], NULL);
  grpc_server_destroy(s->server);
  grpc_completion_queue_destroy(s->cq);
  grpc_shutdown();
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  free(s->regs);
  free(s->threads);
  free(s);
}
