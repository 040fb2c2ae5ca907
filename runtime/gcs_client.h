/* runtime/gcs_client.h - the blocking client of the GCS for node daemons and
 * the raydist command (never for drivers: libraydist stays gRPC-free).
 *
 * Every call is thread-safe, blocks for at most its deadline (5 s unless
 * said otherwise) and returns 0 or an RD_E* code: RD_ECONN when the GCS
 * cannot be reached, RD_EAUTH when it refuses the token, RD_ETIMEDOUT when it
 * does not answer in time, RD_EINVAL for bad arguments. */
#ifndef RD_RUNTIME_GCS_CLIENT_H
#define RD_RUNTIME_GCS_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "gcs.h"         /* RD_GCS_NAME_MAX, RD_GCS_MAX_NODES */
#include "labels.h"      /* RD_LABELS_LEN */
#include "resources.h"   /* rd_resources */

typedef struct rd_gcs rd_gcs;

/* Connects and verifies address + token with a ping: RD_ECONN (unreachable
 * within timeout_ms), RD_EAUTH (token refused), RD_EINVAL (bad address).
 * err gets a human sentence.  Close with rd_gcs_close. */
int rd_gcs_connect(const char *address, const char *token, int timeout_ms, rd_gcs **out, char *err,
                   size_t errlen);
/* Ends subscriptions (their callbacks have returned when this returns) and
 * frees g.  NULL is fine. */
void rd_gcs_close(rd_gcs *g);
/* The text of the last failure on this thread (a sentence from the GCS or
 * from this client), for calls that have no err argument. */
const char *rd_gcs_last_error(void);

enum { RD_GCS_NODE_ALIVE = 1, RD_GCS_NODE_DEAD = 2 };
typedef struct rd_gcs_node {
  uint32_t index;            /* 1..4095, assigned by the GCS */
  char node_id[33];          /* hex */
  int state;                 /* RD_GCS_NODE_* */
  int is_head;
  char ip[64];               /* the node's address, e.g. "127.0.0.2" */
  char hostname[64];
  int link_port;             /* the node's TCP task link (owned by node.c) */
  int xfer_port;             /* the node's object-transfer gRPC server */
  int metrics_port;          /* its Prometheus endpoint on ip (0: none) */
  char session_dir[256];     /* on its host */
  rd_resources total, avail;
  int64_t pending;           /* queued lease requests */
  uint64_t store_capacity, store_used;
  uint64_t ms_since_heartbeat;
  char death_reason[128];
  char labels[RD_LABELS_LEN];  /* "key=value,..." sorted by key (scheduler/labels.h) */
  uint64_t start_ms, end_ms;   /* wall-clock ms: registered; declared dead or removed (0: alive, or not known) */
} rd_gcs_node;

/* Registers self (index, node_id, state, avail, ms_since_heartbeat and
 * death_reason are ignored; avail starts at total).  *index_out gets the new
 * index. */
int rd_gcs_register_node(rd_gcs *g, const rd_gcs_node *self, uint32_t *index_out, char *err,
                         size_t errlen);
/* RD_ENODE_DIED when the GCS has already declared this node dead (register
 * again); *view_version_out (may be NULL) changes whenever a node is added
 * or dies, so a caller knows when to re-read rd_gcs_get_nodes. */
int rd_gcs_heartbeat(rd_gcs *g, uint32_t index, const rd_resources *avail, int64_t pending,
                     uint64_t store_used, uint64_t *view_version_out);
/* The same, naming the code hashes the node's jobs and actors need, so
 * the GCS keeps them (at most RD_GCS_CODE_REFS_MAX; more are cut). */
#define RD_GCS_CODE_REFS_MAX 256
int rd_gcs_heartbeat_code(rd_gcs *g, uint32_t index, const rd_resources *avail, int64_t pending,
                          uint64_t store_used, char (*code)[65], size_t ncode, uint64_t *view_version_out);
/* Requests of one shape a node cannot run now (the autoscaler's demand). */
#define RD_GCS_DEMAND_MAX 16          /* shapes in one report */
#define RD_GCS_DEMAND_SEL_MAX 256     /* a longer selector's requests are not reported */
#define RD_GCS_DEMAND_AVOID_MAX 16    /* nodes a STRICT_SPREAD group's waiting bundles avoid, reported */
typedef struct rd_gcs_demand {
  rd_resources shape;
  char sel[RD_GCS_DEMAND_SEL_MAX];    /* its label selector and fallbacks, "" any node */
  uint32_t count;
  uint64_t spread_group;              /* not 0: a STRICT_SPREAD group's bundles, one node each */
  uint32_t avoid[RD_GCS_DEMAND_AVOID_MAX];   /* ... and not on these nodes, which hold its others */
  uint32_t navoid;
} rd_gcs_demand;
/* What a node says with each heartbeat. */
typedef struct rd_gcs_load {
  const rd_resources *avail;
  int64_t pending;
  uint64_t store_used;
  char (*code)[65];                   /* code hashes its jobs and actors need */
  size_t ncode;
  const rd_gcs_demand *demand;
  size_t ndemand;
  uint64_t idle_ms;                   /* idle that long; 0 busy */
} rd_gcs_load;
/* A heartbeat with the load; drain (drainlen bytes, may be NULL) gets the
 * autoscaler's reason when it asks this node to leave once idle, else "". */
int rd_gcs_heartbeat_load(rd_gcs *g, uint32_t index, const rd_gcs_load *l, uint64_t *view_version_out, char *drain,
                          size_t drainlen);
int rd_gcs_unregister_node(rd_gcs *g, uint32_t index, const char *reason);

/* A kind of node the autoscaler starts (SetNodeTypes). */
typedef struct rd_gcs_node_type {
  char name[64];
  rd_resources res;
  char labels[RD_LABELS_LEN];
  uint32_t max_workers;
  uint32_t workers;                   /* alive or starting */
} rd_gcs_node_type;
int rd_gcs_set_node_types(rd_gcs *g, const rd_gcs_node_type *t, size_t n);
/* rd_gcs_get_nodes, and the node types (types has room for
 * RD_GCS_NODE_TYPES_MAX; *ntypes 0 without an autoscaler). */
int rd_gcs_get_view(rd_gcs *g, rd_gcs_node **nodes_out, size_t *n_out, rd_gcs_node_type *types, size_t *ntypes,
                    uint64_t *version_out);
/* Each live node's last report; *out is malloc'ed (free() it). */
typedef struct rd_gcs_node_load {
  uint32_t index;
  uint64_t idle_ms;
  char drain[128];                    /* a drain asked and standing, "" none */
  size_t ndemand;
  rd_gcs_demand demand[RD_GCS_DEMAND_MAX];
} rd_gcs_node_load;
int rd_gcs_get_load(rd_gcs *g, rd_gcs_node_load **out, size_t *n_out);
/* Asks node index to leave once idle (it is told with its next heartbeat;
 * the request stands 3 s, so ask again while it should).  RD_ENOENT when
 * it is not alive. */
int rd_gcs_drain_node(rd_gcs *g, uint32_t index, const char *reason);
/* All nodes (alive and dead); *nodes_out is malloc'ed, free() it (NULL when
 * there are none). */
int rd_gcs_get_nodes(rd_gcs *g, rd_gcs_node **nodes_out, size_t *n_out, uint64_t *version_out);

/* KV: namespaces < 256 bytes, keys 1..1023 bytes, values up to ~7 MiB. */
int rd_gcs_kv_put(rd_gcs *g, const char *ns, const char *key, const void *val, size_t len,
                  int overwrite); /* RD_EEXIST */
int rd_gcs_kv_get(rd_gcs *g, const char *ns, const char *key, void **val_out,
                  size_t *len_out); /* RD_ENOENT; free() val */
int rd_gcs_kv_del(rd_gcs *g, const char *ns, const char *key); /* RD_ENOENT */
/* Keys of ns starting with prefix, sorted; *keys_out is one malloc'ed block
 * (free() it once) holding *n_out string pointers. */
int rd_gcs_kv_list(rd_gcs *g, const char *ns, const char *prefix, char ***keys_out, size_t *n_out);

/* Hash the file (SHA-256 hex into hash_out) and upload it unless the GCS
 * has it, in 1 MiB chunks (files up to 1 GiB). */
int rd_gcs_code_put(rd_gcs *g, const char *path, char hash_out[65], char *err, size_t errlen);
/* Download, verify the hash, write dest_path atomically (tmp + rename) with
 * mode 0700.  RD_ENOENT if unknown, RD_EPROTO when the bytes do not hash
 * to hash (nothing is written then). */
int rd_gcs_code_get(rd_gcs *g, const char *hash, const char *dest_path, char *err, size_t errlen);

/* The code table: each blob's size, how long nothing used it, and whether
 * a running job or a live node holds it; the TTL after which unused code
 * is dropped (0: never) and what was dropped so far.  free(out->code). */
typedef struct rd_gcs_code {
  char hash[65];
  uint64_t size, idle_ms;
  int in_use;
} rd_gcs_code;
typedef struct rd_gcs_code_table {
  rd_gcs_code *code;
  size_t n;
  uint64_t ttl_ms, collected, collected_bytes;
} rd_gcs_code_table;
int rd_gcs_code_list(rd_gcs *g, rd_gcs_code_table *out);
/* Its blobs' bytes together and how many are in use. */
void rd_gcs_code_sum(const rd_gcs_code_table *t, uint64_t *bytes, size_t *in_use);
/* The same in a sentence, as `raydist status` and the dashboard show it:
 * "2 blobs, 9.8 MiB, 1 in use; 14 collected (61.0 MiB); unused code is
 * dropped after 600 s". */
void rd_gcs_code_describe(const rd_gcs_code_table *t, char *buf, size_t len);

/* RD_ENOENT when code_hash is not "" and the GCS lacks that code (never
 * stored, or collected unused): upload it again and retry. */
int rd_gcs_job_add(rd_gcs *g, const char *code_hash, int driver_pid, uint32_t node_index,
                   uint32_t *job_id_out);
/* Ends a job with a reason (NULL: "finished"); again is a no-op.  RD_ENOENT. */
int rd_gcs_job_finish(rd_gcs *g, uint32_t job_id, const char *reason);
/* The job table: running jobs and the 1000 ended ones with the highest ids
 * (a node's death ends the jobs driven from it); *out is malloc'd. */
typedef struct rd_gcs_job {
  uint32_t job_id;
  char code_hash[65];
  int driver_pid;
  uint32_t node_index;
  uint64_t start_ms, end_ms;    /* wall clock; end_ms 0 while running */
  char end_reason[128];
} rd_gcs_job;
int rd_gcs_job_list(rd_gcs *g, rd_gcs_job **out, size_t *n);

enum { RD_GCS_ACTOR_ALIVE = 1, RD_GCS_ACTOR_RESTARTING = 2, RD_GCS_ACTOR_DEAD = 3 };
/* RD_EEXIST when the id is registered or the name is held by a live actor.
 * max_pending_calls: its rd_actor_opts' (0: none), told to lookups. */
int rd_gcs_actor_register(rd_gcs *g, uint64_t actor_id, const char *name /* NULL or "" */,
                          const char *class_name, uint32_t node_index, int32_t max_pending_calls);
/* node_index 0 keeps the node.  DEAD frees the name; an update out of DEAD
 * takes it back (RD_EEXIST if another live actor took it meanwhile). */
int rd_gcs_actor_update(rd_gcs *g, uint64_t actor_id, int state, uint32_t node_index,
                        const char *reason);
int rd_gcs_actor_lookup(rd_gcs *g, const char *name, uint64_t *actor_id_out, uint32_t *node_index_out,
                        int32_t *max_pending_out); /* RD_ENOENT; each out may be NULL */
/* The actor table (named actors): live ones and the 1000 dead ones with the
 * highest ids; *out is malloc'd (free it). */
typedef struct rd_gcs_actor {
  uint64_t actor_id;
  char name[RD_GCS_NAME_MAX];
  char class_name[RD_GCS_NAME_MAX];
  uint32_t node_index;          /* where it runs (ran) */
  int state;                    /* RD_GCS_ACTOR_* */
  char reason[128];             /* why it died */
} rd_gcs_actor;
int rd_gcs_actor_list(rd_gcs *g, rd_gcs_actor **out, size_t *n);
/* "alive", "restarting", "dead"; "?" for anything else. */
const char *rd_gcs_actor_state_name(int state);

/* Placement groups.  The node that creates a group (its record node)
 * reserves the bundles and writes the whole record with rd_gcs_pg_put at
 * every change; the GCS checks it and keeps names unique among groups not
 * REMOVED.  When the record node dies the GCS moves its groups to REMOVED
 * with reason "its record node N died"; bundles on other dead nodes are left
 * to the record node.  REMOVED records are kept (the 1000 newest ids) so
 * status can say why. */
#define RD_GCS_PG_MAX_BUNDLES 4096   /* RD_PG_MAX_BUNDLES */
enum { RD_GCS_PG_PENDING = 1, RD_GCS_PG_CREATED = 2, RD_GCS_PG_RESCHEDULING = 3, RD_GCS_PG_REMOVED = 4 };
typedef struct rd_gcs_pg {
  uint64_t pg_id;                               /* non-zero, chosen by the record node */
  char name[RD_GCS_NAME_MAX];                   /* "" anonymous */
  int strategy;                                 /* 0 PACK, 1 SPREAD, 2 STRICT_PACK, 3 STRICT_SPREAD */
  int state;                                    /* RD_GCS_PG_* */
  uint32_t record_node;                         /* 1..4095 */
  size_t nbundles;                              /* 1..RD_GCS_PG_MAX_BUNDLES */
  rd_resources *bundles;                        /* nbundles, each a valid request asking for something */
  uint32_t *bundle_nodes;                       /* nbundles, 0 = not placed (yet) */
  size_t cap;                                   /* room in the two arrays when they are its own
                                                   (rd_gcs_pg_reserve), else 0 */
  char reason[128];                             /* why pending / removed */
  uint32_t creator_job;                         /* the GCS job that created it (0: not known) */
} rd_gcs_pg;
/* Insert or replace the record with pg->pg_id.  RD_EINVAL for a bad record
 * (the reason in rd_gcs_last_error), RD_EEXIST when another group not
 * REMOVED holds the name (nothing changed).  Moving to REMOVED or renaming
 * frees the old name. */
int rd_gcs_pg_put(rd_gcs *g, const rd_gcs_pg *pg);
/* By id, or by name (among groups not REMOVED) when pg_id is 0; RD_ENOENT.
 * *out is the caller's, zeroed before its first use: its arrays are
 * reused when they have room, else made (rd_gcs_pg_reserve), and
 * rd_gcs_pg_clear frees them. */
int rd_gcs_pg_get(rd_gcs *g, uint64_t pg_id, const char *name, rd_gcs_pg *out);
/* Every record, REMOVED ones included, sorted by id.  *out is one
 * malloc'ed block with every record's arrays in it: free() it; NULL and 0
 * when there are none. */
int rd_gcs_pg_list(rd_gcs *g, rd_gcs_pg **out, size_t *n);
/* Give pg arrays of its own with room for n bundles (what it held is kept
 * up to n; pg->nbundles is not changed): 0 or RD_ENOMEM. */
int rd_gcs_pg_reserve(rd_gcs_pg *pg, size_t n);
/* Zero every field of pg but its arrays (and their room). */
void rd_gcs_pg_reset(rd_gcs_pg *pg);
/* Free the arrays pg owns (rd_gcs_pg_reserve) and zero the pointers. */
void rd_gcs_pg_clear(rd_gcs_pg *pg);
/* n zeroed records in one malloc'ed block that free() releases, record i
 * with nb[i] bundles (nbundles set, arrays pointing into the block); NULL
 * when out of memory or n is 0. */
rd_gcs_pg *rd_gcs_pg_block(size_t n, const size_t *nb);
/* "pending", "created", "rescheduling", "removed" and "PACK", "SPREAD",
 * "STRICT_PACK", "STRICT_SPREAD"; "?" for anything else. */
const char *rd_gcs_pg_state_name(int state);
const char *rd_gcs_pg_strategy_name(int strategy);

/* Cluster events (Ray's `ray list cluster-events`).  Adding one: source
 * GCS, RAYLET, AUTOSCALER, JOBS, CORE_WORKER or COMMON; severity INFO,
 * WARNING, ERROR, FATAL or DEBUG; a message of 1..RD_GCS_EVENT_MSG_MAX-1
 * bytes; at most RD_GCS_EVENT_FIELDS_MAX fields (Ray's custom_fields);
 * time_ms 0: the GCS's clock.  RD_EINVAL otherwise.  event_id is the id
 * it got (NULL: not wanted). */
typedef struct rd_gcs_field {
  const char *key, *value;
} rd_gcs_field;
typedef struct rd_gcs_cluster_event {
  uint64_t event_id, time_ms;   /* time: wall clock, ms since the epoch */
  const char *source, *severity, *message;
  uint32_t node_index;          /* the node it is about or from; 0: none */
  int pid;                      /* the process that sent it; 0: none */
  const rd_gcs_field *fields;
  size_t nfields;
} rd_gcs_cluster_event;
int rd_gcs_event_add(rd_gcs *g, const rd_gcs_cluster_event *e, uint64_t *event_id);
/* The kept events with ids above `after`, the newest `limit` of them (0:
 * all), oldest first.  first_kept: the oldest id the GCS still has; last:
 * the newest it gave; omitted: events left out to keep the answer under
 * RD_GCS_EVENTS_REPLY_MAX.  Free with rd_gcs_events_free (the strings
 * live in it). */
typedef struct rd_gcs_events {
  rd_gcs_cluster_event *ev;
  size_t n;
  uint64_t first_kept, last, omitted;
  void *priv;
} rd_gcs_events;
int rd_gcs_event_list(rd_gcs *g, uint64_t after, uint32_t limit, rd_gcs_events *out);
void rd_gcs_events_free(rd_gcs_events *l);

/* Pub/sub: cb runs on an internal thread (one per subscription, events in
 * order) for every event until rd_gcs_close.  The subscription is live when
 * this returns 0.  If the stream breaks (GCS restart, subscriber too slow)
 * the thread subscribes again; events in between are lost, so re-read the
 * tables after an RD_GCS_EV_NODE_* gap in view_version. */
enum { RD_GCS_EV_NODE_ADDED = 1, RD_GCS_EV_NODE_DEAD, RD_GCS_EV_NODE_REMOVED, RD_GCS_EV_ACTOR };
typedef struct rd_gcs_event {
  int kind;
  uint32_t node_index;
  uint64_t actor_id;
  int actor_state;
  char reason[128];
  uint64_t view_version;
} rd_gcs_event;
typedef void (*rd_gcs_event_cb)(void *arg, const rd_gcs_event *ev);
int rd_gcs_subscribe(rd_gcs *g, rd_gcs_event_cb cb, void *arg);

#endif
