/* runtime/sha256.c - SHA-256 as FIPS 180-4 gives it; see sha256.h.
 * Straight C, one block at a time: fast enough to hash a 100 MiB executable
 * in well under a second, which is all the code table asks. */
#include "sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "raydist/error.h"

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void block(uint32_t h[8], const uint8_t *p) {
  uint32_t w[64];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
           (uint32_t)p[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
  for (int i = 0; i < 64; i++) {
    uint32_t t1 = hh + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
    uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    hh = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h[0] += a; h[1] += b; h[2] += c; h[3] += d;
  h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
}

void rd_sha256_init(rd_sha256 *c) {
  static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(c->h, iv, sizeof(iv));
  c->len = 0;
  c->nbuf = 0;
}

void rd_sha256_update(rd_sha256 *c, const void *data, size_t n) {
  const uint8_t *p = data;
  c->len += n;
  if (c->nbuf) {
    size_t take = 64 - c->nbuf < n ? 64 - c->nbuf : n;
    memcpy(c->buf + c->nbuf, p, take);
    c->nbuf += take;
    p += take;
    n -= take;
    if (c->nbuf < 64) return;
    block(c->h, c->buf);
    c->nbuf = 0;
  }
  for (; n >= 64; p += 64, n -= 64) block(c->h, p);
  memcpy(c->buf, p, n);
  c->nbuf = n;
}

void rd_sha256_final(rd_sha256 *c, uint8_t out[32]) {
  uint64_t bits = c->len * 8;
  uint8_t pad[72] = {0x80};
  size_t padlen = (c->nbuf < 56 ? 56 : 120) - c->nbuf;
  for (int i = 0; i < 8; i++) pad[padlen + (size_t)i] = (uint8_t)(bits >> (56 - 8 * i));
  rd_sha256_update(c, pad, padlen + 8);
  for (int i = 0; i < 8; i++) {
    out[4 * i] = (uint8_t)(c->h[i] >> 24);
    out[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
    out[4 * i + 2] = (uint8_t)(c->h[i] >> 8);
    out[4 * i + 3] = (uint8_t)c->h[i];
  }
}

void rd_sha256_to_hex(const uint8_t dig[32], char out[65]) {
  static const char hx[] = "0123456789abcdef";
  for (int i = 0; i < 32; i++) {
    out[2 * i] = hx[dig[i] >> 4];
    out[2 * i + 1] = hx[dig[i] & 15];
  }
  out[64] = 0;
}

void rd_sha256_hex(const void *data, size_t n, char out[65]) {
  rd_sha256 c;
  uint8_t d[32];
  rd_sha256_init(&c);
  rd_sha256_update(&c, data, n);
  rd_sha256_final(&c, d);
  rd_sha256_to_hex(d, out);
}

int rd_sha256_is_hex(const char *s) {
  if (!s) return 0;
  for (int i = 0; i < 64; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
  return s[64] == 0;
}

int rd_sha256_file(const char *path, char out[65], uint64_t *size_out, char *err, size_t errlen) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (err) snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
    return RD_EIO;
  }
  static __thread uint8_t buf[1 << 16];
  rd_sha256 c;
  rd_sha256_init(&c);
  for (;;) {
    ssize_t r = read(fd, buf, sizeof(buf));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      if (err) snprintf(err, errlen, "cannot read '%s': %s", path, strerror(errno));
      close(fd);
      return RD_EIO;
    }
    if (r == 0) break;
    rd_sha256_update(&c, buf, (size_t)r);
  }
  close(fd);
  uint8_t d[32];
  if (size_out) *size_out = c.len;
  rd_sha256_final(&c, d);
  rd_sha256_to_hex(d, out);
  return 0;
}
