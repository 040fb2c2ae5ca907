/* runtime/gcs.h - the global control store server (`raydist gcs`).
 *
 * One process per cluster, on the head node: node table with heartbeat
 * failure detection, actor, job and code tables, a KV store, the cluster's
 * events and pub/sub of node and actor changes, all served over gRPC (runtime/proto/gcs.proto) to
 * token holders.  Table state lives behind rd_gcs_store (gcs_store.h).
 * docs/gcs.md describes the tables, calls and timings. */
#ifndef RD_RUNTIME_GCS_H
#define RD_RUNTIME_GCS_H

#include <stdint.h>

#define RD_GCS_MAX_NODES 4095          /* node indexes 1..4095 */
#define RD_GCS_MSG_MAX (8u << 20)       /* largest message the GCS accepts */
#define RD_GCS_CHUNK (1u << 20)         /* code upload/download chunk */
#define RD_GCS_CHUNK_MAX (4u << 20)     /* largest chunk the GCS takes or gives */
#define RD_GCS_CODE_MAX (1ull << 30)    /* largest code blob */
#define RD_GCS_KV_KEY_MAX 1024
#define RD_GCS_NAME_MAX 256             /* namespaces, actor and class names */
#define RD_GCS_SUB_QUEUE 4096           /* events queued per subscriber before it is dropped */
#define RD_GCS_HB_TIMEOUT_MS 3000
#define RD_GCS_NODE_TYPES_MAX 16        /* kinds of node the autoscaler starts */
#define RD_GCS_EVENTS_KEEP 10000        /* cluster events kept (the newest) */
#define RD_GCS_EVENT_MSG_MAX 1024       /* an event's message is shorter */
#define RD_GCS_EVENT_FIELDS_MAX 16      /* custom fields of an event */
#define RD_GCS_EVENT_KEY_MAX 64         /* a field's key is shorter ... */
#define RD_GCS_EVENT_VALUE_MAX 256      /* ... and its value */
#define RD_GCS_EVENTS_REPLY_MAX (4u << 20)   /* an EventList answer packs to at most this */

/* `raydist gcs --bind IP:PORT --token-file PATH [--ready-fd FD]
 * [--port-file PATH] [--pid-file PATH] [--storage memory|file:PATH]
 * [--heartbeat-timeout-ms N] [--log-level L] [--supervise [--log-file F]]`:
 * serves until SIGINT or SIGTERM.  Exit status 0 after a clean stop, 1 when
 * it cannot start (message on stderr), 2 for bad usage.  With --supervise
 * the process is a keeper (keeper.h) that runs the server as its child and
 * restarts it, on the port the first one bound, when it dies or hangs. */
int rd__gcs_cli(int argc, char **argv);

#endif
