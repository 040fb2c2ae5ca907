/* runtime/websocket.h - the server side of RFC 6455 that the jobs API's log
 * tail needs (GET /api/jobs/ID/logs/tail, what Ray's `ray job logs
 * --follow` and `ray job submit` open): the handshake's accept key and the
 * frames a server sends (unmasked, never fragmented).  What a client sends
 * after the handshake is not parsed: the tail only watches for the close. */
#ifndef RD_RUNTIME_WEBSOCKET_H
#define RD_RUNTIME_WEBSOCKET_H

#include <stddef.h>
#include <stdint.h>

#define RD_WS_TEXT 0x1
#define RD_WS_CLOSE 0x8
#define RD_WS_HEADER_MAX 10   /* a server frame's header: 2, 4 or 10 bytes */

/* Sec-WebSocket-Accept for the client's Sec-WebSocket-Key: base64 of the
 * SHA-1 of key and RFC 6455's GUID, 28 characters and a NUL. */
void rd__ws_accept(const char *key, char out[29]);

/* The header of a final frame of opcode with n payload bytes into hdr:
 * its length. */
size_t rd__ws_header(uint8_t hdr[RD_WS_HEADER_MAX], int opcode, uint64_t n);

/* SHA-1 (FIPS 180-4) of n bytes: only for the handshake, not for secrets. */
void rd__sha1(const void *data, size_t n, uint8_t out[20]);

#endif
