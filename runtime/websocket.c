/* runtime/websocket.c - the WebSocket handshake key and server frames (see
 * websocket.h). */
#include "websocket.h"

#include <stdio.h>
#include <string.h>

static uint32_t rol(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

static void sha1_block(uint32_t h[5], const uint8_t *p) {
  uint32_t w[80];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
  for (int i = 16; i < 80; i++) w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
  for (int i = 0; i < 80; i++) {
    uint32_t f, k;
    if (i < 20) f = (b & c) | (~b & d), k = 0x5a827999;
    else if (i < 40) f = b ^ c ^ d, k = 0x6ed9eba1;
    else if (i < 60) f = (b & c) | (b & d) | (c & d), k = 0x8f1bbcdc;
    else f = b ^ c ^ d, k = 0xca62c1d6;
    uint32_t t = rol(a, 5) + f + e + k + w[i];
    e = d;
    d = c;
    c = rol(b, 30);
    b = a;
    a = t;
  }
  h[0] += a;
  h[1] += b;
  h[2] += c;
  h[3] += d;
  h[4] += e;
}

void rd__sha1(const void *data, size_t n, uint8_t out[20]) {
  uint32_t h[5] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0};
  const uint8_t *p = data;
  size_t left = n;
  for (; left >= 64; p += 64, left -= 64) sha1_block(h, p);
  uint8_t last[128] = {0};   /* the tail, 0x80, zeros, the length in bits: one or two blocks */
  memcpy(last, p, left);
  last[left] = 0x80;
  size_t blocks = left + 9 > 64 ? 2 : 1;
  uint64_t bits = (uint64_t)n * 8;
  for (int i = 0; i < 8; i++) last[blocks * 64 - 1 - i] = (uint8_t)(bits >> (8 * i));
  for (size_t b = 0; b < blocks; b++) sha1_block(h, last + 64 * b);
  for (int i = 0; i < 5; i++)
    for (int k = 0; k < 4; k++) out[4 * i + k] = (uint8_t)(h[i] >> (24 - 8 * k));
}

void rd__ws_accept(const char *key, char out[29]) {
  static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
  static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  char in[128 + sizeof(guid)];
  int n = snprintf(in, sizeof(in), "%.128s%s", key, guid);
  uint8_t d[21] = {0};   /* 20 bytes and a zero: 7 groups of 3 */
  rd__sha1(in, (size_t)n, d);
  for (int g = 0; g < 7; g++) {
    uint32_t v = (uint32_t)d[3 * g] << 16 | (uint32_t)d[3 * g + 1] << 8 | d[3 * g + 2];
    for (int k = 0; k < 4; k++) out[4 * g + k] = b64[(v >> (18 - 6 * k)) & 63];
  }
  out[27] = '=';   /* 20 bytes: the last group has two */
  out[28] = 0;
}

size_t rd__ws_header(uint8_t hdr[RD_WS_HEADER_MAX], int opcode, uint64_t n) {
  hdr[0] = (uint8_t)(0x80 | (opcode & 0x0f));   /* FIN: never fragmented */
  if (n < 126) {
    hdr[1] = (uint8_t)n;
    return 2;
  }
  if (n <= 0xffff) {
    hdr[1] = 126;
    hdr[2] = (uint8_t)(n >> 8);
    hdr[3] = (uint8_t)n;
    return 4;
  }
  hdr[1] = 127;
  for (int i = 0; i < 8; i++) hdr[2 + i] = (uint8_t)(n >> (56 - 8 * i));
  return 10;
}
