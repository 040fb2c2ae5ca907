/* tests/runtime/conn_test.c - the frame layer: round trips, fd passing in
 * order, and rejection of malformed streams (oversized length, unknown type,
 * bad flags, truncated protobuf). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "raydist/error.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)

static void pair(rd__conn *a, rd__conn *b) {
  int sv[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  rd__conn_init(a, sv[0]);
  rd__conn_init(b, sv[1]);
}

int main(void) {
  rd__conn a, b;
  pair(&a, &b);
  /* 3000 frames, two carrying fds, in one buffer */
  for (int i = 0; i < 3000; i++) {
    Rd__ObjCreate m = RD__OBJ_CREATE__INIT;
    m.req_id = (uint64_t)i;
    m.size = (uint64_t)i * 3;
    int fd = -1;
    if (i == 10 || i == 11) {
      int p[2];
      CHECK(pipe(p) == 0);
      CHECK(write(p[1], i == 10 ? "A" : "B", 1) == 1);
      close(p[1]);
      fd = p[0];
    }
    CHECK(rd__conn_send(&a, RD__MSG_TYPE__MSG_OBJ_CREATE, &m.base, fd) == 0);
  }
  int got = 0;
  while (got < 3000) {
    int fr = rd__conn_flush(&a);
    CHECK(fr >= 0);
    int r = rd__conn_fill(&b);
    CHECK(r > 0 || r == RD_EAGAIN);
    rd__frame f;
    while (rd__conn_next(&b, &f) == 1) {
      Rd__ObjCreate *m = (Rd__ObjCreate *)rd__frame_unpack(&f, &rd__obj_create__descriptor);
      CHECK(m && m->req_id == (uint64_t)got && m->size == (uint64_t)got * 3);
      if (got == 10 || got == 11) {
        CHECK(f.flags & RD_FRAME_FLAG_FD);
        int fd = rd__conn_take_fd(&b);
        CHECK(fd >= 0);
        char c = 0;
        CHECK(read(fd, &c, 1) == 1);
        CHECK(c == (got == 10 ? 'A' : 'B'));
        close(fd);
      } else {
        CHECK(!(f.flags & RD_FRAME_FLAG_FD));
      }
      protobuf_c_message_free_unpacked(&m->base, NULL);
      got++;
    }
  }
  /* malformed headers */
  const unsigned char bad[][8] = {
      {0xff, 0xff, 0xff, 0x7f, 7, 0, 0, 0},
      {1, 0, 0, 0, 200, 0, 0, 0},
      {1, 0, 0, 0, 0, 0, 0, 0},
      {1, 0, 0, 0, 7, 0, 2, 0},
  };
  for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
    rd__conn x, y;
    pair(&x, &y);
    CHECK(write(x.fd, bad[k], 8) == 8);
    CHECK(rd__conn_fill(&y) == 8);
    rd__frame f;
    CHECK(rd__conn_next(&y, &f) == RD_EPROTO);
    rd__conn_close(&x);
    rd__conn_close(&y);
  }
  /* a truncated protobuf payload does not unpack */
  {
    rd__frame f = {RD__MSG_TYPE__MSG_HELLO, 0, 3, (const uint8_t *)"\x2a\xff\xff"};
    CHECK(rd__frame_unpack(&f, &rd__hello__descriptor) == NULL);
  }
  /* end of stream */
  rd__conn_close(&a);
  CHECK(rd__conn_fill(&b) == 0);
  rd__conn_close(&b);
  printf("conn_frames: ok\n");
  return 0;
}
