/* tests/runtime/websocket_test.c - the jobs API's WebSocket pieces
 * (runtime/websocket.c): SHA-1 against FIPS 180's vectors on every padding
 * path (one block, a tail that needs a second, whole blocks, a million
 * bytes), RFC 6455's example accept key, and the three header lengths. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "websocket.h"

static void sha1_is(const void *data, size_t n, const char *hex) {
  uint8_t d[20];
  char got[41];
  rd__sha1(data, n, d);
  for (int i = 0; i < 20; i++) snprintf(got + 2 * i, 3, "%02x", d[i]);
  if (strcmp(got, hex) != 0) fprintf(stderr, "sha1 of %zu bytes: %s, not %s\n", n, got, hex);
  CHECK(strcmp(got, hex) == 0);
}

int main(void) {
  sha1_is("", 0, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  sha1_is("abc", 3, "a9993e364706816aba3e25717850c26c9cd0d89d");
  const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";   /* 56 bytes: the length needs a 2nd block */
  sha1_is(two, strlen(two), "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
  char blocks[128];
  memset(blocks, 'a', sizeof(blocks));   /* two whole blocks: the padding is a block of its own */
  sha1_is(blocks, sizeof(blocks), "ad5b3fdbcb526778c2839d2f151ea753995e26a0");
  char *million = malloc(1000000);
  CHECK(million != NULL);
  memset(million, 'a', 1000000);
  sha1_is(million, 1000000, "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
  free(million);

  char acc[29];
  rd__ws_accept("dGhlIHNhbXBsZSBub25jZQ==", acc);   /* RFC 6455, section 1.3 */
  CHECK(strcmp(acc, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=") == 0);

  uint8_t h[RD_WS_HEADER_MAX];
  CHECK(rd__ws_header(h, RD_WS_TEXT, 5) == 2 && h[0] == 0x81 && h[1] == 5);
  CHECK(rd__ws_header(h, RD_WS_CLOSE, 125) == 2 && h[0] == 0x88 && h[1] == 125);
  CHECK(rd__ws_header(h, RD_WS_TEXT, 126) == 4 && h[1] == 126 && h[2] == 0 && h[3] == 126);
  CHECK(rd__ws_header(h, RD_WS_TEXT, 65535) == 4 && h[2] == 0xff && h[3] == 0xff);
  CHECK(rd__ws_header(h, RD_WS_TEXT, 65536) == 10 && h[1] == 127 && h[7] == 1 && h[8] == 0 && h[9] == 0);
  printf("websocket: sha1 vectors, the accept key, frame headers ok\n");
  return 0;
}
