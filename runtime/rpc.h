/* runtime/rpc.h - the gRPC core plumbing shared by the GCS, its client and
 * object transfer: channels with the low-latency arguments, deadlines,
 * protobuf-c <-> byte buffers, the one mapping between gRPC status codes and
 * RD_E* codes, a blocking unary call, and a small server skeleton (one
 * completion queue, registered methods, per-call state machines, token check
 * on every call).
 *
 * Every call carries the cluster token as "rd-token" metadata and a failing
 * server call sends its exact RD_E* code in the "rd-code" trailer.  Nothing
 * here forks, and nothing here may be linked into libraydist (drivers stay
 * gRPC-free). */
#ifndef RD_RUNTIME_RPC_H
#define RD_RUNTIME_RPC_H

#include <stddef.h>
#include <stdint.h>

#include <grpc/grpc.h>
#include <protobuf-c/protobuf-c.h>

#define RD_RPC_TOKEN_MD "rd-token"
#define RD_RPC_CODE_MD "rd-code"
#define RD_RPC_TOKEN_MAX 256

/* ---- client side ---- */

/* Absolute monotonic deadline timeout_ms from now; infinite when < 0. */
gpr_timespec rd__rpc_deadline(int timeout_ms);

/* "host:port" with a numeric port 0..65535 (IPv6 as "[::1]:port").
 * 0 or RD_EINVAL with a sentence in err. */
int rd__rpc_check_addr(const char *addr, char *err, size_t errlen);

/* An insecure channel to target ("ip:port") with retries and channelz off
 * (RPC-NOTES) but the full filter stack, which enforces deadlines, and
 * max_msg as the
 * largest message it receives (0: gRPC's 4 MiB).  keepalive_ms > 0 pings the
 * connection so a vanished peer is noticed (our servers allow pings every
 * second).  extra: up to 4 more arguments.  NULL only on OOM. */
grpc_channel *rd__rpc_channel(const char *target, size_t max_msg, int keepalive_ms,
                              const grpc_arg *extra, size_t nextra);

/* Packs m into a new byte buffer (grpc_byte_buffer_destroy it); NULL on OOM. */
grpc_byte_buffer *rd__rpc_pack(const ProtobufCMessage *m);
/* Unpacks bb (not consumed) as d; NULL when malformed or over max bytes.
 * Free with protobuf_c_message_free_unpacked(m, NULL). */
ProtobufCMessage *rd__rpc_unpack(const ProtobufCMessageDescriptor *d, grpc_byte_buffer *bb,
                                 size_t max);

int rd__rpc_status_to_rd(grpc_status_code st);
grpc_status_code rd__rpc_rd_to_status(int rc);

/* The RD_E* code of a finished call: the "rd-code" trailer when our server
 * sent one, else the mapped status; err gets the status details (or a
 * fallback sentence).  0 for GRPC_STATUS_OK. */
int rd__rpc_call_result(grpc_status_code st, grpc_slice details, const grpc_metadata_array *trailers,
                        char *err, size_t errlen);

/* Fills md with the token entry; release with rd__rpc_token_md_release. */
void rd__rpc_token_md(grpc_metadata *md, const char *token);
void rd__rpc_token_md_release(grpc_metadata *md);

enum { RD_RPC_WAIT_READY = 1 };

/* The opening ops of a client call: initial metadata md (the token; flags
 * as for rd__rpc_unary), the request send, the half-close and the receipt
 * of the server's initial metadata into init_md.  Fills ops[0..3] (zeroing
 * them) and returns 4. */
size_t rd__rpc_client_open_ops(grpc_op *ops, grpc_metadata *md, unsigned flags, grpc_byte_buffer *send,
                               grpc_metadata_array *init_md);

/* One blocking unary call: sends req, unpacks the reply as reply_desc into
 * *reply_out (caller frees with protobuf_c_message_free_unpacked) and returns
 * 0, or returns an RD_E* code with a sentence in err (may be NULL).
 * RD_RPC_WAIT_READY waits for the server to come up within the deadline
 * instead of failing at once.  Thread-safe: every call has its own queue. */
int rd__rpc_unary(grpc_channel *ch, const char *method, const char *token,
                  const ProtobufCMessage *req, const ProtobufCMessageDescriptor *reply_desc,
                  ProtobufCMessage **reply_out, int timeout_ms, unsigned flags, char *err,
                  size_t errlen);

/* rd__rpc_unary with a request already packed (send is not consumed): for
 * callers that build messages by hand, and tests that send malformed ones. */
int rd__rpc_unary_raw(grpc_channel *ch, const char *method, const char *token, grpc_byte_buffer *send,
                      const ProtobufCMessageDescriptor *reply_desc, ProtobufCMessage **reply_out,
                      int timeout_ms, unsigned flags, char *err, size_t errlen);

/* ---- server side ---- */

typedef struct rd__rpc_server rd__rpc_server;
typedef struct rd__rpc_call rd__rpc_call;

#define RD_RPC_END 2   /* a stream's next(): no more messages, finish OK */

/* A unary handler: set the reply with rd__rpc_reply and return 0, or return
 * an RD_E* code (optionally explained with rd__rpc_fail).  Runs on a
 * completion-queue thread: keep it short and never block on the network. */
typedef int (*rd__rpc_unary_fn)(void *arg, rd__rpc_call *call, const ProtobufCMessage *req);

/* A server-streaming method.  start: 0 and *stream set, or an RD_E* code
 * that ends the call.  next: queue one message with rd__rpc_reply and return
 * 1, return 0 when nothing is ready (call rd__rpc_stream_wake later),
 * RD_RPC_END to finish with OK or an RD_E* code to finish with that error;
 * next runs under the call's lock, never twice at once, and only when no
 * send is in flight (one pending send per call).  finish: the call is over
 * (done, cancelled or server stopping): release the stream; no next follows. */
typedef struct rd__rpc_stream_ops {
  int (*start)(void *arg, rd__rpc_call *call, const ProtobufCMessage *req, void **stream);
  int (*next)(void *stream, rd__rpc_call *call);
  void (*finish)(void *stream);
} rd__rpc_stream_ops;

typedef struct rd__rpc_method {
  const char *name;                        /* "/rd.gcs.Gcs/Ping" */
  const ProtobufCMessageDescriptor *req;   /* request type */
  rd__rpc_unary_fn unary;                  /* exactly one of unary/stream */
  const rd__rpc_stream_ops *stream;
} rd__rpc_method;

/* Serves methods (the array must outlive the server) on bind ("ip:port",
 * port 0 picks one, reported in *port_out) with nthreads completion-queue
 * threads.  Calls without the token end UNAUTHENTICATED; requests that fail
 * to unpack INVALID_ARGUMENT; messages over max_msg RESOURCE_EXHAUSTED (by
 * gRPC itself).  0, or RD_EINVAL/RD_ECONN (cannot bind)/RD_ENOMEM with err. */
int rd__rpc_server_start(const char *bind, const char *token, const rd__rpc_method *methods,
                         size_t nmethods, void *arg, int nthreads, size_t max_msg,
                         rd__rpc_server **out, int *port_out, char *err, size_t errlen);
/* Cancels every call, waits until each call's state is released (streams'
 * finish has run), then tears down in the order RPC-NOTES gives. */
void rd__rpc_server_stop(rd__rpc_server *s);

/* The reply of a unary handler or the next message of a stream.  Takes
 * ownership of bb in the _raw form.  RD_ENOMEM when packing fails. */
int rd__rpc_reply(rd__rpc_call *c, const ProtobufCMessage *m);
void rd__rpc_reply_raw(rd__rpc_call *c, grpc_byte_buffer *bb);
/* The status message sent with a failing code. */
void rd__rpc_fail(rd__rpc_call *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The peer's address as gRPC reports it (static "?" when unknown). */
const char *rd__rpc_call_peer(rd__rpc_call *c);

/* A stream producer may keep the call alive beyond its finish by a ref and
 * wake it from any thread; waking a finished call does nothing. */
void rd__rpc_call_ref(rd__rpc_call *c);
void rd__rpc_call_unref(rd__rpc_call *c);
void rd__rpc_stream_wake(rd__rpc_call *c);

/* Reads a token file: the first line, surrounding whitespace removed,
 * 1..RD_RPC_TOKEN_MAX-1 bytes.  0 or RD_EINVAL/RD_EIO with err. */
int rd__rpc_read_token(const char *path, char *token, size_t len, char *err, size_t errlen);

#endif
