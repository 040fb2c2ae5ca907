/* runtime/objxfer.h - node-to-node object transfer over gRPC streaming.
 *
 * Each node runs a transfer server that reads sealed objects straight from
 * its store (through pin/unpin callbacks); a node that needs a remote object
 * pulls it with rd_xfer_pull, which asks the size, lets the caller allocate
 * the destination, then fetches byte ranges over several parallel streams
 * with several chunks in flight.  Wire format: proto/objxfer.proto; the
 * protocol is described in docs/objxfer.md.  Never linked into libraydist. */
#ifndef RD_RUNTIME_OBJXFER_H
#define RD_RUNTIME_OBJXFER_H

#include <stddef.h>
#include <stdint.h>

#define RD_XFER_CHUNK_DEFAULT (1u << 20)
#define RD_XFER_CHUNK_MIN (4u << 10)
#define RD_XFER_CHUNK_MAX (16u << 20)
#define RD_XFER_STREAMS_DEFAULT 4
#define RD_XFER_STREAMS_MAX 64

/* What the server reads from.  Called from the server's threads, possibly at
 * once for several objects: the node implements them thread-safely.  pin:
 * 0 with *data and *size valid until the matching unpin, RD_ENOENT (no such
 * object) or RD_EAGAIN (not sealed yet); every pin that returned 0 gets
 * exactly one unpin. */
typedef struct rd_xfer_source_ops {
  int (*pin)(void *arg, uint64_t oid, const uint8_t **data, uint64_t *size);
  void (*unpin)(void *arg, uint64_t oid);
} rd_xfer_source_ops;

typedef struct rd_xfer_server rd_xfer_server;
typedef struct rd_xfer_client rd_xfer_client;

typedef struct rd_xfer_stats {
  uint64_t bytes;        /* object size */
  double seconds;        /* whole pull: stat, alloc and transfer */
  int streams;           /* streams used */
  uint32_t chunk;        /* bytes per chunk */
} rd_xfer_stats;

/* Serves objects on bind_addr ("127.0.0.2:0"; port 0 picks one, reported in
 * *port_out) to holders of token.  ops (copied) and arg must stay valid
 * until rd_xfer_server_stop.  0, or RD_EINVAL/RD_ECONN with err. */
int rd_xfer_server_start(const char *bind_addr, const char *token, const rd_xfer_source_ops *ops,
                         void *arg, rd_xfer_server **out, int *port_out, char *err, size_t errlen);
/* Ends every transfer (pullers see RD_ENODE_DIED), waits until each pin is
 * unpinned, frees s.  NULL is fine. */
void rd_xfer_server_stop(rd_xfer_server *s);

/* A client with a channel cache per peer.  Streams and chunk size come from
 * RAYDIST_XFER_STREAMS (1..64, default 4) and RAYDIST_XFER_CHUNK (bytes,
 * 4 KiB..16 MiB, default 1 MiB).  0, RD_EINVAL (no token) or RD_ENOMEM. */
int rd_xfer_client_create(const char *token, rd_xfer_client **out);
void rd_xfer_client_destroy(rd_xfer_client *c);

/* Pulls object oid from peer ("ip:port") into memory from alloc(arg, size)
 * (NULL from alloc aborts with RD_ESTORE_FULL).  Blocking and thread-safe;
 * the whole pull ends within timeout_ms (< 0: no limit beyond keepalive).
 * Errors: RD_ENOENT / RD_EAGAIN (the peer has no / no sealed such object),
 * RD_ECONN (peer unreachable before the transfer started), RD_ENODE_DIED
 * (peer went away mid-transfer), RD_ETIMEDOUT, RD_EAUTH (token refused),
 * RD_EPROTO (a chunk out of range or short), RD_EINVAL.  After a failure
 * past alloc the destination holds partial data: the caller drops it. */
int rd_xfer_pull(rd_xfer_client *c, const char *peer, uint64_t oid,
                 void *(*alloc)(void *arg, uint64_t size), void *arg, int timeout_ms,
                 rd_xfer_stats *st_out, char *err, size_t errlen);

#endif
