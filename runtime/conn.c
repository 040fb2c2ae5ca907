/* runtime/conn.c - framing, buffering and fd passing for Unix sockets.
 *
 * Frames are appended to a write buffer and written in as few syscalls as the
 * socket allows; an fd attached to a frame is sent with the frame's first byte
 * so it arrives in order with the bytes.  Reads go into one buffer that frames
 * are parsed from in place. */
#include "conn.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "raydist/error.h"

uint64_t rd__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t rd__wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* c has bytes to write: onto its list, if it has one. */
static void wlist_join(rd__conn *c) {
  if (!c->wlist || c->on_wlist) return;
  c->wprev = NULL;
  c->wnext = c->wlist->head;
  if (c->wnext) c->wnext->wprev = c;
  c->wlist->head = c;
  c->on_wlist = 1;
}

void rd__conn_init(rd__conn *c, int fd) {
  memset(c, 0, sizeof(*c));
  c->fd = fd;
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

void rd__conn_track(rd__conn *c, rd__conn_list *l) {
  rd__conn_unlist(c);
  c->wlist = l;
  if (c->wbuf.len > c->wbuf.off) wlist_join(c);
}

void rd__conn_unlist(rd__conn *c) {
  if (!c->on_wlist) return;
  if (c->wprev) c->wprev->wnext = c->wnext;
  else c->wlist->head = c->wnext;
  if (c->wnext) c->wnext->wprev = c->wprev;
  c->wnext = c->wprev = NULL;
  c->on_wlist = 0;
}

void rd__conn_unwatch(rd__conn *c) {
  if (c->ep_on && c->fd >= 0) epoll_ctl(c->ep_fd, EPOLL_CTL_DEL, c->fd, NULL);
  c->ep_on = 0;
}

void rd__conn_close(rd__conn *c) {
  rd__conn_unlist(c);
  rd__conn_unwatch(c);
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  for (int i = 0; i < c->natt; i++) close(c->att[i].fd);
  for (int i = 0; i < c->nrfds; i++) close(c->rfds[i]);
  free(c->att);
  c->att = NULL;
  c->natt = c->capatt = c->nrfds = 0;
  free(c->rbuf.p);
  free(c->wbuf.p);
  memset(&c->rbuf, 0, sizeof(c->rbuf));
  memset(&c->wbuf, 0, sizeof(c->wbuf));
}

/* Make room for `need` more bytes after b->len, compacting the consumed
 * prefix first. */
static int bytes_reserve(rd__bytes *b, size_t need) {
  if (b->off > 0 && (b->off == b->len || b->off > b->cap / 2)) {
    memmove(b->p, b->p + b->off, b->len - b->off);
    b->len -= b->off;
    b->off = 0;
  }
  if (b->len + need <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 16384;
  while (cap < b->len + need) cap *= 2;
  uint8_t *p = realloc(b->p, cap);
  if (!p) return RD_ENOMEM;
  b->p = p;
  b->cap = cap;
  return 0;
}

int rd__conn_send(rd__conn *c, Rd__MsgType type, const ProtobufCMessage *m, int attach_fd) {
  size_t n = m ? protobuf_c_message_get_packed_size(m) : 0;
  if (n > RD_FRAME_MAX) {
    if (attach_fd >= 0) close(attach_fd);
    return RD_EINVAL;
  }
  if (attach_fd >= 0 && c->natt == c->capatt) {
    int cap = c->capatt ? c->capatt * 2 : 8;
    struct rd__att *a = realloc(c->att, (size_t)cap * sizeof(*a));
    if (!a) {
      close(attach_fd);
      return RD_ENOMEM;
    }
    c->att = a;
    c->capatt = cap;
  }
  size_t before_off = c->wbuf.off;
  if (bytes_reserve(&c->wbuf, RD_FRAME_HDR + n) != 0) {
    if (attach_fd >= 0) close(attach_fd);
    return RD_ENOMEM;
  }
  /* compaction moved the buffer: shift pending attachment offsets */
  for (int i = 0; i < c->natt; i++) c->att[i].off -= before_off - c->wbuf.off;
  uint8_t *h = c->wbuf.p + c->wbuf.len;
  rd__frame_header(h, (uint32_t)n, (uint16_t)type, attach_fd >= 0 ? RD_FRAME_FLAG_FD : 0);
  if (m) protobuf_c_message_pack(m, h + RD_FRAME_HDR);
  if (attach_fd >= 0) {
    c->att[c->natt].off = c->wbuf.len;
    c->att[c->natt].fd = attach_fd;
    c->natt++;
  }
  c->wbuf.len += RD_FRAME_HDR + n;
  wlist_join(c);
  return 0;
}

int rd__conn_send_raw(rd__conn *c, uint16_t type, const uint8_t *payload, size_t n) {
  if (n > RD_FRAME_MAX) return RD_EINVAL;
  size_t before_off = c->wbuf.off;
  if (bytes_reserve(&c->wbuf, RD_FRAME_HDR + n) != 0) return RD_ENOMEM;
  for (int i = 0; i < c->natt; i++) c->att[i].off -= before_off - c->wbuf.off;
  uint8_t *h = c->wbuf.p + c->wbuf.len;
  rd__frame_header(h, (uint32_t)n, type, 0);
  if (n) memcpy(h + RD_FRAME_HDR, payload, n);
  c->wbuf.len += RD_FRAME_HDR + n;
  wlist_join(c);
  return 0;
}

static ssize_t send_with_fd(int sock, const uint8_t *p, size_t n, int fd) {
  struct iovec iov = {(void *)p, n};
  union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } u;
  struct msghdr msg = {0};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = u.buf;
  msg.msg_controllen = sizeof(u.buf);
  struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(cm), &fd, sizeof(int));
  return sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

int rd__conn_flush(rd__conn *c) {
  rd__bytes *b = &c->wbuf;
  while (b->off < b->len) {
    size_t end = b->len;
    ssize_t w;
    if (c->natt > 0 && c->att[0].off == b->off) {
      if (c->natt > 1) end = c->att[1].off;   /* the next fd rides with its own frame */
      w = send_with_fd(c->fd, b->p + b->off, end - b->off, c->att[0].fd);
      if (w > 0) {
        close(c->att[0].fd);
        memmove(&c->att[0], &c->att[1], sizeof(c->att[0]) * (size_t)(c->natt - 1));
        c->natt--;
      }
    } else {
      if (c->natt > 0) end = c->att[0].off;
      w = send(c->fd, b->p + b->off, end - b->off, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 1;
      return RD_ECONN;
    }
    b->off += (size_t)w;
  }
  b->off = b->len = 0;
  for (int i = 0; i < c->natt; i++) c->att[i].off = 0; /* none left in practice */
  return 0;
}

int rd__conn_fill(rd__conn *c) {
  if (bytes_reserve(&c->rbuf, 65536) != 0) return RD_ENOMEM;
  struct iovec iov = {c->rbuf.p + c->rbuf.len, c->rbuf.cap - c->rbuf.len};
  union { char buf[CMSG_SPACE(sizeof(int) * 4)]; struct cmsghdr align; } u;
  struct msghdr msg = {0};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = u.buf;
  msg.msg_controllen = sizeof(u.buf);
  ssize_t r;
  do {
    r = recvmsg(c->fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  } while (r < 0 && errno == EINTR);
  if (r < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return RD_EAGAIN;
    return RD_ECONN;
  }
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
    int nfd = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    for (int i = 0; i < nfd; i++) {
      int fd;
      memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
      if (c->nrfds < RD_CONN_MAX_FDS) c->rfds[c->nrfds++] = fd;
      else close(fd);
    }
  }
  c->rbuf.len += (size_t)r;
  return (int)(r > 0x7fffffff ? 0x7fffffff : r);
}

int rd__conn_next(rd__conn *c, rd__frame *f) {
  rd__bytes *b = &c->rbuf;
  size_t avail = b->len - b->off;
  if (avail < RD_FRAME_HDR) return 0;
  const uint8_t *h = b->p + b->off;
  uint32_t len;
  uint16_t t, fl;
  memcpy(&len, h, 4);
  memcpy(&t, h + 4, 2);
  memcpy(&fl, h + 6, 2);
  if (len > RD_FRAME_MAX || t == 0 || t > RD_MSG_TYPE_MAX || (fl & ~RD_FRAME_FLAG_FD))
    return RD_EPROTO;
  if (avail < RD_FRAME_HDR + len) {
    /* make sure a large frame fits without repeated small reads */
    if (bytes_reserve(b, RD_FRAME_HDR + len - avail) != 0) return RD_ENOMEM;
    return 0;
  }
  f->type = t;
  f->flags = fl;
  f->len = len;
  f->data = b->p + b->off + RD_FRAME_HDR;
  b->off += RD_FRAME_HDR + len;
  return 1;
}

int rd__conn_take_fd(rd__conn *c) {
  if (c->nrfds == 0) return -1;
  int fd = c->rfds[0];
  memmove(&c->rfds[0], &c->rfds[1], sizeof(int) * (size_t)(c->nrfds - 1));
  c->nrfds--;
  return fd;
}

ProtobufCMessage *rd__frame_unpack(const rd__frame *f, const ProtobufCMessageDescriptor *desc) {
  return protobuf_c_message_unpack(desc, NULL, f->len, f->data);
}

int rd__wait_fd(int fd, short ev, uint64_t deadline) {
  for (;;) {
    uint64_t now = rd__now_ns();
    if (now >= deadline) return RD_ETIMEDOUT;
    uint64_t ms = (deadline - now) / 1000000 + 1;
    struct pollfd p = {fd, ev, 0};
    int r = poll(&p, 1, ms > 60000 ? 60000 : (int)ms);
    if (r > 0) return 0;
    if (r < 0 && errno != EINTR) return RD_ESYS;
  }
}

int rd__conn_flush_blocking(rd__conn *c, int timeout_ms) {
  uint64_t deadline = rd__now_ns() + (uint64_t)timeout_ms * 1000000ull;
  for (;;) {
    int r = rd__conn_flush(c);
    if (r <= 0) return r;
    if ((r = rd__wait_fd(c->fd, POLLOUT, deadline)) != 0) return r;
  }
}

int rd__conn_recv_blocking(rd__conn *c, rd__frame *f, int timeout_ms) {
  uint64_t deadline = rd__now_ns() + (uint64_t)timeout_ms * 1000000ull;
  for (;;) {
    int r = rd__conn_next(c, f);
    if (r != 0) return r < 0 ? r : 0;
    if ((r = rd__wait_fd(c->fd, POLLIN, deadline)) != 0) return r;
    r = rd__conn_fill(c);
    if (r == 0) return RD_ECONN;
    if (r < 0 && r != RD_EAGAIN) return r;
  }
}
