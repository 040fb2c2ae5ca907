/* runtime/conn.h - framed protobuf-c messages over a non-blocking Unix socket (or a
 * TCP socket between node daemons, where no descriptors travel).
 *
 * Shared by the node daemon (driven by libuv readiness events), drivers and
 * workers (driven by poll).  A conn owns a read buffer, a write buffer and file
 * descriptors that ride with frames as SCM_RIGHTS.  It never blocks and never
 * trusts a length: frames above RD_FRAME_MAX or of unknown type are RD_EPROTO. */
#ifndef RD_RUNTIME_CONN_H
#define RD_RUNTIME_CONN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <protobuf-c/protobuf-c.h>

#include "raydist.pb-c.h"

#define RD_FRAME_HDR 8u
#define RD_FRAME_MAX (64u << 20)   /* largest payload a peer may send */
#define RD_MSG_TYPE_MAX RD__MSG_TYPE__MSG_ACTOR_NAMES   /* the last of MsgType: above it, RD_EPROTO */
#define RD_FRAME_FLAG_FD 1u
#define RD_CONN_MAX_FDS 16   /* received fds waiting for their frame */

/* A frame's header at h: payload length, type, flags (host order). */
static inline void rd__frame_header(uint8_t *h, uint32_t len, uint16_t type, uint16_t flags) {
  memcpy(h, &len, 4);
  memcpy(h + 4, &type, 2);
  memcpy(h + 6, &flags, 2);
}

typedef struct rd__bytes {
  uint8_t *p;
  size_t off;    /* consumed prefix */
  size_t len;    /* bytes held, including the consumed prefix */
  size_t cap;
} rd__bytes;

typedef struct rd__frame {
  uint16_t type;
  uint16_t flags;
  uint32_t len;
  const uint8_t *data;
} rd__frame;

/* The conns of a process that have bytes queued and not yet written, so
 * that a pass writing them all (the client library's rd__flush_all) visits
 * those only, not every connection it has.  A conn joins its list when a
 * frame is queued on it (rd__conn_track gave it one) and leaves it when it
 * is closed or the walker unlinks it (rd__conn_unlist). */
typedef struct rd__conn_list {
  struct rd__conn *head;
} rd__conn_list;

typedef struct rd__conn {
  int fd;
  rd__bytes rbuf;
  rd__bytes wbuf;
  struct rd__att { size_t off; int fd; } *att;           /* fds to send, by wbuf offset (grows) */
  int natt, capatt;
  int rfds[RD_CONN_MAX_FDS];                             /* fds received, FIFO */
  int nrfds;
  rd__conn_list *wlist;                                  /* where it goes with bytes to write (NULL: none) */
  struct rd__conn *wnext, *wprev;                        /* on wlist while on_wlist */
  int on_wlist;
  /* An epoll set watching fd (the client library's pump): taken out of it
   * by rd__conn_close before the fd closes (a copy of the fd in a child
   * would keep it reported).  ep_tag is the set's data, ep_events what it
   * asks for. */
  int ep_fd, ep_on;
  uint32_t ep_events;
  uint64_t ep_tag;
} rd__conn;

/* Take ownership of a connected socket and make it non-blocking. */
void rd__conn_init(rd__conn *c, int fd);
/* Close the socket and every fd still queued either way; free buffers. */
void rd__conn_close(rd__conn *c);
/* From now on c joins *l whenever a frame is queued on it. */
void rd__conn_track(rd__conn *c, rd__conn_list *l);
/* Take c off its list (a walker that wrote it all, or gave up on it). */
void rd__conn_unlist(rd__conn *c);
/* Take c's socket out of the epoll set watching it (ep_on), if any. */
void rd__conn_unwatch(rd__conn *c);

/* Append one frame.  attach_fd >= 0 is sent with it and closed once sent
 * (ownership passes to the conn).  RD_ENOMEM, RD_EINVAL (message too large). */
int rd__conn_send(rd__conn *c, Rd__MsgType type, const ProtobufCMessage *m, int attach_fd);
/* Append a frame whose payload is already packed (a relayed frame). */
int rd__conn_send_raw(rd__conn *c, uint16_t type, const uint8_t *payload, size_t n);
/* Write what is buffered: 0 all written, 1 some left (socket full), <0 error
 * (RD_ECONN when the peer is gone). */
int rd__conn_flush(rd__conn *c);
static inline int rd__conn_want_write(const rd__conn *c) { return c->wbuf.len > c->wbuf.off; }

/* Read what the socket has: >0 bytes read, 0 end of stream, RD_EAGAIN nothing
 * now, other <0 errors. */
int rd__conn_fill(rd__conn *c);
/* Next complete frame from the read buffer: 1 and *f set (f->data valid until
 * the next rd__conn_fill), 0 when more bytes are needed, RD_EPROTO when the
 * stream is malformed (the caller drops the peer). */
int rd__conn_next(rd__conn *c, rd__frame *f);
/* Pop a received file descriptor (-1 when none). */
int rd__conn_take_fd(rd__conn *c);

/* Unpack a frame's payload as `desc`; NULL when malformed. Free with
 * protobuf_c_message_free_unpacked(m, NULL). */
ProtobufCMessage *rd__frame_unpack(const rd__frame *f, const ProtobufCMessageDescriptor *desc);

/* Blocking helpers for short set-up exchanges (handshake): wait up to
 * timeout_ms for one frame of the given type. */
int rd__conn_flush_blocking(rd__conn *c, int timeout_ms);
int rd__conn_recv_blocking(rd__conn *c, rd__frame *f, int timeout_ms);

/* Monotonic clock in nanoseconds. */
uint64_t rd__now_ns(void);
/* Wall clock (Unix time) in milliseconds: what records and answers carry. */
uint64_t rd__wall_ms(void);

/* Wait until `fd` has one of the poll events `ev` or the rd__now_ns()
 * `deadline` passes, through signals (poll is never restarted after a
 * handler, SA_RESTART or not).  0, RD_ETIMEDOUT or RD_ESYS. */
int rd__wait_fd(int fd, short ev, uint64_t deadline);

#endif
