/* runtime/sha256.h - SHA-256 (FIPS 180-4) for the content-addressed code
 * table: the GCS names and verifies shipped executables by their hash.
 * Self-contained so the control plane needs no OpenSSL; not for secrets. */
#ifndef RD_RUNTIME_SHA256_H
#define RD_RUNTIME_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct rd_sha256 {
  uint32_t h[8];
  uint64_t len;          /* bytes hashed so far */
  uint8_t buf[64];
  size_t nbuf;
} rd_sha256;

void rd_sha256_init(rd_sha256 *c);
void rd_sha256_update(rd_sha256 *c, const void *data, size_t n);
void rd_sha256_final(rd_sha256 *c, uint8_t out[32]);
/* One shot, as 64 lowercase hex digits and a NUL. */
void rd_sha256_hex(const void *data, size_t n, char out[65]);
void rd_sha256_to_hex(const uint8_t dig[32], char out[65]);
/* 1 when s is 64 lowercase hex digits. */
int rd_sha256_is_hex(const char *s);
/* Hash a whole file; 0, or RD_EIO with err. */
int rd_sha256_file(const char *path, char out[65], uint64_t *size_out, char *err, size_t errlen);

#endif
