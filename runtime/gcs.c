/* runtime/gcs.c - the GCS server: node, actor, placement group, job, code
 * and KV tables, the cluster's events and pub/sub of state changes, over
 * gRPC (proto/gcs.proto).
 *
 * Every table lives in the rd_gcs_store as packed protobuf records, so a
 * persistent back end keeps the cluster's state; only soft state stays in
 * memory here: the monotonic time of each node's last heartbeat, which nodes
 * are alive (a cache of the node records), uploads in progress and the
 * subscribers.  One lock serialises all of it; handlers are short.  A node
 * that misses heartbeats for the timeout is declared dead for good: it must
 * register again and gets a new index. */
#include "gcs.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "conn.h"   /* rd__wall_ms */
#include "gcs.pb-c.h"
#include "labels.h"
#include "gcs_client.h"   /* RD_GCS_PG_MAX_BUNDLES */
#include "gcs_store.h"
#include "keeper.h"
#include "log.h"
#include "raydist.h"   /* rd_strerror */
#include "raydist/error.h"
#include "rpc.h"
#include "sha256.h"

#define T_NODE "node"
#define T_ACTOR "actor"
#define T_ACTOR_NAME "actor_name"
#define T_PG "pg"
#define T_PG_NAME "pg_name"
#define T_JOB "job"
#define T_KV "kv"
#define T_CODE "code"
#define T_META "meta"          /* counters that must survive a restart */
#define T_EVENT "event"        /* cluster events by id, %016x */
#define MAX_UPLOADS 8
#define SYNC_MS 1000           /* a persistent store is synced this often */
#define UPLOAD_IDLE_MS 60000
#define PG_REMOVED_KEEP 1000   /* REMOVED placement groups kept (the newest ids) */
/* ... and no more bytes of them than this: a group may have 4,096 bundles
 * (~40 KB a record), and PgList answers every record in one reply of at
 * most RD_GCS_MSG_MAX / 2 */
#define PG_REMOVED_BYTES (RD_GCS_MSG_MAX / 8)
#define ACTOR_DEAD_KEEP 1000   /* dead named actors kept (the highest ids) */
#define JOB_ENDED_KEEP 1000    /* finished jobs kept (the highest ids) */
#define CODE_TTL_S 600         /* code nothing used for this long is dropped (--code-ttl-s) */
#define CODE_SWEEP_MS 5000     /* how often the code table is swept (more often for a short TTL) */
#define TYPES_TTL_MS 10000     /* node types the autoscaler has not sent again for this long are dropped */
#define DRAIN_ASK_MS 3000      /* a DrainNode stands this long unless asked again */

typedef struct gcs_event {
  int kind;
  uint32_t node_index;
  uint64_t actor_id;
  int actor_state;
  uint64_t view_version;
  char reason[128];
} gcs_event;

typedef struct gcs_sub {
  struct gcs_sub *next;
  struct gcs *g;
  rd__rpc_call *call;
  pthread_mutex_t mu;           /* the queue; taken under the call's lock */
  gcs_event *q;
  size_t head, len;
  int overflow;
  int dirty;                    /* has events not yet handed to the call; g->mu */
} gcs_sub;

typedef struct gcs_upload {
  uint64_t id;                  /* 0: slot free */
  char hash[65];
  uint64_t size, got, last_ms;
  uint8_t *buf;
  rd_sha256 sha;
} gcs_upload;

/* What a node's last heartbeat said: soft state, never written to the
 * store (a persistent one would log two records a second per node). */
typedef struct node_soft {
  uint8_t *avail;               /* packed rd.Resources; NULL: none yet */
  size_t avail_len;
  int64_t pending;
  uint64_t store_used;
  char (*code)[65];             /* the code its jobs and actors need */
  size_t ncode;
  uint8_t *demand;              /* packed NodeLoad: its demand and idle time; NULL: none */
  size_t demand_len;
  char drain[128];              /* the autoscaler asked it to leave once idle ("": no) ... */
  uint64_t drain_until_ms;      /* ... until then (mono_ms; DrainNode is asked again each cycle) */
} node_soft;

/* A blob of the code table, as the sweep sees it (soft state: a restarted
 * GCS starts every blob's idle time over). */
typedef struct code_ent {
  char hash[65];
  uint64_t size;
  uint64_t last_ms;             /* last used (uploaded, read, named by a job or heartbeat) */
} code_ent;

typedef struct gcs {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int alive_fd;                 /* --alive-fd: a byte every ALIVE_MS for the keeper (-1: none) */
  rd_gcs_store *store;
  int hb_timeout_ms;
  uint64_t last_hb_ms[RD_GCS_MAX_NODES + 1];
  uint8_t alive[RD_GCS_MAX_NODES + 1];
  node_soft load[RD_GCS_MAX_NODES + 1];
  uint32_t cursor;              /* next index to try */
  uint64_t view_version;
  uint32_t next_job;
  uint64_t next_event;          /* the last event id handed out */
  uint64_t next_upload;
  gcs_upload uploads[MAX_UPLOADS];
  code_ent *code;               /* every blob of T_CODE */
  size_t ncode, code_cap;
  uint64_t code_ttl_ms;         /* 0: keep code forever */
  uint64_t code_swept_ms;
  uint64_t code_collected, code_collected_bytes;
  gcs_sub *subs;
  uint8_t *types;               /* packed SetNodeTypesRequest from the autoscaler; NULL: none */
  size_t types_len;
  uint64_t types_ms;            /* when it came (mono_ms): stale after TYPES_TTL_MS */
  int stop;
} gcs;

static uint64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Room for one more element in a growing array: 0 or RD_ENOMEM. */
static int grow(void *vp, size_t *cap, size_t n, size_t elem) {
  void **v = vp;
  if (n < *cap) return 0;
  size_t c = *cap ? 2 * *cap : 16;
  void *nv = realloc(*v, c * elem);
  if (!nv) return RD_ENOMEM;
  *v = nv;
  *cap = c;
  return 0;
}

static code_ent *code_find(gcs *g, const char *hash);
static void code_touch(gcs *g, const char *hash);

/* Forgets what a node's heartbeats said: the code it named was last used
 * now.  g->mu held. */
static void soft_clear(gcs *g, node_soft *l) {
  for (size_t i = 0; i < l->ncode; i++) code_touch(g, l->code[i]);
  free(l->avail);
  free(l->code);
  free(l->demand);
  memset(l, 0, sizeof(*l));
}

/* Strings from the wire: NULL-safe, bounded. */
static int str_ok(const char *s, size_t max) { return s && strnlen(s, max) < max; }

/* ---- records in the store ---- */

static int rec_put(gcs *g, const char *table, const char *key, const ProtobufCMessage *m) {
  size_t n = protobuf_c_message_get_packed_size(m);
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf) return RD_ENOMEM;
  protobuf_c_message_pack(m, buf);
  int rc = g->store->ops->put(g->store, table, key, strlen(key), buf, n);
  free(buf);
  return rc;
}

static void *rec_get(gcs *g, const char *table, const char *key,
                     const ProtobufCMessageDescriptor *d, int *rc) {
  void *val;
  size_t len;
  *rc = g->store->ops->get(g->store, table, key, strlen(key), &val, &len);
  if (*rc) return NULL;
  ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, val);
  free(val);
  if (!m) *rc = RD_EIO;   /* a record we wrote no longer unpacks */
  return m;
}

static void node_key(char key[12], uint32_t idx) { snprintf(key, 12, "%04u", idx); }
static void actor_key(char key[20], uint64_t id) { snprintf(key, 20, "%016" PRIx64, id); }
/* Fixed-width hex, so the store's key order is id order. */
static void pg_key(char key[20], uint64_t id) { snprintf(key, 20, "%016" PRIx64, id); }
static void job_key(char key[12], uint32_t id) { snprintf(key, 12, "%08u", id); }

/* The counters of T_META, "cursor view_version" as text: saved when they
 * change, so a restarted GCS hands out indexes in the same cycle and its
 * view versions keep growing. */
static void meta_save(gcs *g) {
  char v[64];
  int n = snprintf(v, sizeof(v), "%u %" PRIu64, g->cursor, g->view_version);
  if (g->store->ops->put(g->store, T_META, "counters", 8, v, (size_t)n) != 0)
    rd__log(RD_LOG_ERROR, "gcs: cannot save the node counters");
}

static Rd__Gcs__NodeInfo *node_load(gcs *g, uint32_t idx, int *rc) {
  char key[12];
  node_key(key, idx);
  return rec_get(g, T_NODE, key, &rd__gcs__node_info__descriptor, rc);
}

static int node_save(gcs *g, const Rd__Gcs__NodeInfo *n) {
  char key[12];
  node_key(key, n->index);
  return rec_put(g, T_NODE, key, &n->base);
}

/* ---- cluster events ----
 *
 * What happened to the cluster, for people (Ray's cluster events): the
 * GCS's own (a node joined, died, left) and those nodes, the autoscaler
 * and the job runner send (EventAdd).  Each gets the next id; the newest
 * RD_GCS_EVENTS_KEEP are kept in T_EVENT: adding event N drops event
 * N - RD_GCS_EVENTS_KEEP, so the table never holds more. */

static void event_key(char key[20], uint64_t id) { snprintf(key, 20, "%016" PRIx64, id); }

static const char *const event_sources[] = {"GCS", "RAYLET", "AUTOSCALER", "JOBS", "CORE_WORKER", "COMMON"};
static const char *const event_severities[] = {"INFO", "WARNING", "ERROR", "FATAL", "DEBUG"};

static int one_of(const char *s, const char *const *v, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(s, v[i])) return 1;
  return 0;
}

/* Numbers e, stamps it (when it has no time) and stores it.  g->mu held. */
static int event_put(gcs *g, Rd__Gcs__ClusterEvent *e) {
  char key[20];
  e->event_id = ++g->next_event;
  if (!e->time_ms) e->time_ms = rd__wall_ms();
  event_key(key, e->event_id);
  int rc = rec_put(g, T_EVENT, key, &e->base);
  if (rc) rd__log(RD_LOG_ERROR, "gcs: cannot store event %" PRIu64 ": %s", e->event_id, rd_strerror(rc));
  if (e->event_id > RD_GCS_EVENTS_KEEP) {
    event_key(key, e->event_id - RD_GCS_EVENTS_KEEP);
    (void)g->store->ops->del(g->store, T_EVENT, key, strlen(key));
  }
  return rc;
}

/* One of the GCS's own events, about node n (NULL: none).  g->mu held. */
static void event_gcs(gcs *g, const char *severity, const Rd__Gcs__NodeInfo *n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void event_gcs(gcs *g, const char *severity, const Rd__Gcs__NodeInfo *n, const char *fmt, ...) {
  char msg[RD_GCS_EVENT_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  Rd__Gcs__ClusterEvent e = RD__GCS__CLUSTER_EVENT__INIT;
  Rd__Gcs__EventField f[2] = {RD__GCS__EVENT_FIELD__INIT, RD__GCS__EVENT_FIELD__INIT};
  Rd__Gcs__EventField *fp[2] = {&f[0], &f[1]};
  e.source = (char *)"GCS";
  e.severity = (char *)severity;
  e.message = msg;
  e.pid = (int32_t)getpid();
  if (n) {
    e.node_index = n->index;
    f[0].key = (char *)"node_id";
    f[0].value = n->node_id ? n->node_id : (char *)"";
    f[1].key = (char *)"node_ip";
    f[1].value = n->ip ? n->ip : (char *)"";
    e.fields = fp;
    e.n_fields = 2;
  }
  (void)event_put(g, &e);
}

static int h_event_add(void *arg, rd__rpc_call *call, const ProtobufCMessage *req) {
  gcs *g = arg;
  Rd__Gcs__ClusterEvent e = *(const Rd__Gcs__ClusterEvent *)req;   /* strings stay in the request */
  if (!str_ok(e.source, 32) || !one_of(e.source, event_sources, sizeof(event_sources) / sizeof(*event_sources))) {
    rd__rpc_fail(call, "event: source must be GCS, RAYLET, AUTOSCALER, JOBS, CORE_WORKER or COMMON");
    return RD_EINVAL;
  }
  if (!str_ok(e.severity, 32) ||
      !one_of(e.severity, event_severities, sizeof(event_severities) / sizeof(*event_severities))) {
    rd__rpc_fail(call, "event: severity must be INFO, WARNING, ERROR, FATAL or DEBUG");
    return RD_EINVAL;
  }
  if (!str_ok(e.message, RD_GCS_EVENT_MSG_MAX) || !e.message[0]) {
    rd__rpc_fail(call, "event: a message of 1..%d bytes", RD_GCS_EVENT_MSG_MAX - 1);
    return RD_EINVAL;
  }
  if (e.node_index > RD_GCS_MAX_NODES || e.n_fields > RD_GCS_EVENT_FIELDS_MAX) {
    rd__rpc_fail(call, "event: node index 0..%d, at most %d fields", RD_GCS_MAX_NODES, RD_GCS_EVENT_FIELDS_MAX);
    return RD_EINVAL;
  }
  for (size_t i = 0; i < e.n_fields; i++) {
    const Rd__Gcs__EventField *f = e.fields[i];
    if (!str_ok(f->key, RD_GCS_EVENT_KEY_MAX) || !f->key[0] || !str_ok(f->value, RD_GCS_EVENT_VALUE_MAX)) {
      rd__rpc_fail(call, "event: field keys 1..%d bytes, values < %d bytes", RD_GCS_EVENT_KEY_MAX - 1,
                   RD_GCS_EVENT_VALUE_MAX);
      return RD_EINVAL;
    }
  }
  if (e.time_ms > rd__wall_ms() + 86400000ull) e.time_ms = 0;   /* a day ahead: a clock gone wrong; ours */
  /* an event about a node names it as Ray's do (node_id, node_ip), unless
   * its sender did */
  Rd__Gcs__EventField nf[2] = {RD__GCS__EVENT_FIELD__INIT, RD__GCS__EVENT_FIELD__INIT};
  Rd__Gcs__EventField *fp[RD_GCS_EVENT_FIELDS_MAX + 2];
  int named = 0;
  for (size_t i = 0; i < e.n_fields; i++) named |= !strcmp(e.fields[i]->key, "node_id");
  pthread_mutex_lock(&g->mu);
  int rc = 0;
  Rd__Gcs__NodeInfo *n = e.node_index && !named ? node_load(g, e.node_index, &rc) : NULL;
  if (n) {
    if (e.n_fields) memcpy(fp, e.fields, e.n_fields * sizeof(*fp));   /* (fields NULL when none) */
    nf[0].key = (char *)"node_id";
    nf[0].value = n->node_id;
    nf[1].key = (char *)"node_ip";
    nf[1].value = n->ip;
    fp[e.n_fields] = &nf[0];
    fp[e.n_fields + 1] = &nf[1];
    e.fields = fp;
    e.n_fields += 2;
  }
  rc = event_put(g, &e);
  pthread_mutex_unlock(&g->mu);
  if (n) protobuf_c_message_free_unpacked(&n->base, NULL);
  if (rc) return rc;
  Rd__Gcs__EventAddReply r = RD__GCS__EVENT_ADD_REPLY__INIT;
  r.event_id = e.event_id;
  return rd__rpc_reply(call, &r.base);
}

/* The id a T_EVENT key names (fixed-width hex). */
static uint64_t event_key_id(const char *key, size_t klen) {
  uint64_t id = 0;
  for (size_t i = 0; i < klen && isxdigit((unsigned char)key[i]); i++)
    id = id * 16 + (uint64_t)(isdigit((unsigned char)key[i]) ? key[i] - '0' : (key[i] | 0x20) - 'a' + 10);
  return id;
}

typedef struct event_scan {
  uint64_t from;                /* the first id wanted (the others are not unpacked) */
  Rd__Gcs__ClusterEvent **v;    /* from there on, in id order */
  size_t n, cap;
  int rc;
} event_scan;

static int collect_event(void *arg, const char *key, size_t klen, const void *val, size_t vlen) {
  event_scan *s = arg;
  if (event_key_id(key, klen) < s->from) return 0;
  Rd__Gcs__ClusterEvent *e = rd__gcs__cluster_event__unpack(NULL, vlen, val);
  if (!e) return 0;
  if ((s->rc = grow(&s->v, &s->cap, s->n, sizeof(*s->v))) != 0) {
    protobuf_c_message_free_unpacked(&e->base, NULL);
    return s->rc;
  }
  s->v[s->n++] = e;
  return 0;
}

/* The events with ids above `after`, the newest `limit` of them (0: all
 * kept), oldest first, as many of the newest as pack into
 * RD_GCS_EVENTS_REPLY_MAX (`omitted` counts the others). */
static int h_event_list(void *arg, rd__rpc_call *call, const ProtobufCMessage *req) {
  gcs *g = arg;
  const Rd__Gcs__EventListRequest *q = (const void *)req;
  event_scan s = {.from = q->after + 1};
  Rd__Gcs__EventListReply r = RD__GCS__EVENT_LIST_REPLY__INIT;
  pthread_mutex_lock(&g->mu);
  r.last = g->next_event;
  r.first_kept = r.last > RD_GCS_EVENTS_KEEP ? r.last - RD_GCS_EVENTS_KEEP + 1 : 1;
  if (q->limit && r.last >= q->limit && r.last - q->limit + 1 > s.from) s.from = r.last - q->limit + 1;
  int rc = q->after >= r.last ? 0 : g->store->ops->scan(g->store, T_EVENT, "", 0, collect_event, &s);
  pthread_mutex_unlock(&g->mu);
  if (!rc) rc = s.rc;
  size_t from = q->limit && s.n > q->limit ? s.n - q->limit : 0, bytes = 0;
  if (!rc) {
    size_t i = s.n;
    while (i > from) {
      size_t b = protobuf_c_message_get_packed_size(&s.v[i - 1]->base) + 8;
      if (bytes + b > RD_GCS_EVENTS_REPLY_MAX) break;
      bytes += b;
      i--;
    }
    r.omitted = i - from;
    r.events = s.v + i;
    r.n_events = s.n - i;
    rc = rd__rpc_reply(call, &r.base);
  }
  for (size_t i = 0; i < s.n; i++) protobuf_c_message_free_unpacked(&s.v[i]->base, NULL);
  free(s.v);
  return rc;
}

/* ---- pub/sub ---- */

static void publish(gcs *g, int kind, uint32_t node, uint64_t actor, int astate, const char *reason) {
  for (gcs_sub *s = g->subs; s; s = s->next) {
    pthread_mutex_lock(&s->mu);
    if (s->len == RD_GCS_SUB_QUEUE) {
      s->overflow = 1;
    } else {
      gcs_event *e = &s->q[(s->head + s->len++) % RD_GCS_SUB_QUEUE];
      *e = (gcs_event){kind, node, actor, astate, g->view_version, ""};
      snprintf(e->reason, sizeof(e->reason), "%s", reason ? reason : "");
    }
    pthread_mutex_unlock(&s->mu);
    s->dirty = 1;
  }
}

/* Hands queued events to their calls.  Never with g->mu held: a call's
 * lock is taken before g->mu when a handler runs. */
static void flush_wakes(gcs *g) {
  rd__rpc_call *calls[64];
  for (;;) {
    size_t n = 0;
    pthread_mutex_lock(&g->mu);
    for (gcs_sub *s = g->subs; s && n < 64; s = s->next) {
      if (!s->dirty) continue;
      s->dirty = 0;
      rd__rpc_call_ref(s->call);
      calls[n++] = s->call;
    }
    pthread_mutex_unlock(&g->mu);
    for (size_t i = 0; i < n; i++) {
      rd__rpc_stream_wake(calls[i]);
      rd__rpc_call_unref(calls[i]);
    }
    if (n < 64) return;
  }
}

static int sub_start(void *arg, rd__rpc_call *call, const ProtobufCMessage *req, void **stream) {
  gcs *g = arg;
  gcs_sub *s = calloc(1, sizeof(*s));
  gcs_event *q = malloc(RD_GCS_SUB_QUEUE * sizeof(*q));
  if (!s || !q) {
    free(s);
    free(q);
    return RD_ENOMEM;
  }
  s->g = g;
  s->q = q;
  s->call = call;
  pthread_mutex_init(&s->mu, NULL);
  rd__rpc_call_ref(call);
  pthread_mutex_lock(&g->mu);
  s->next = g->subs;
  g->subs = s;
  pthread_mutex_unlock(&g->mu);
  rd__log(RD_LOG_INFO, "gcs: subscriber %s", rd__rpc_call_peer(call));
  *stream = s;
  return 0;
}

static int sub_next(void *stream, rd__rpc_call *call) {
  gcs_sub *s = stream;
  pthread_mutex_lock(&s->mu);
  if (s->overflow) {
    pthread_mutex_unlock(&s->mu);
    rd__rpc_fail(call, "subscriber fell %d events behind; subscribe again and re-read the tables",
                 RD_GCS_SUB_QUEUE);
    return RD_EAGAIN;
  }
  if (!s->len) {
    pthread_mutex_unlock(&s->mu);
    return 0;
  }
  gcs_event e = s->q[s->head];
  s->head = (s->head + 1) % RD_GCS_SUB_QUEUE;
  s->len--;
  pthread_mutex_unlock(&s->mu);
  Rd__Gcs__Event m = RD__GCS__EVENT__INIT;
  m.kind = (Rd__Gcs__EventKind)e.kind;
  m.node_index = e.node_index;
  m.actor_id = e.actor_id;
  m.actor_state = (Rd__Gcs__ActorState)e.actor_state;
  m.reason = e.reason;
  m.view_version = e.view_version;
  return rd__rpc_reply(call, &m.base) == 0 ? 1 : RD_ENOMEM;
}

static void sub_finish(void *stream) {
  gcs_sub *s = stream;
  gcs *g = s->g;
  pthread_mutex_lock(&g->mu);
  for (gcs_sub **pp = &g->subs; *pp; pp = &(*pp)->next) {
    if (*pp == s) {
      *pp = s->next;
      break;
    }
  }
  pthread_mutex_unlock(&g->mu);
  rd__rpc_call_unref(s->call);
  pthread_mutex_destroy(&s->mu);
  free(s->q);
  free(s);
}

static const rd__rpc_stream_ops sub_ops = {sub_start, sub_next, sub_finish};

/* The end of a handler whose answer is only its status. */
static int reply_empty(rd__rpc_call *call, int rc) {
  if (rc) return rc;
  Rd__Gcs__Empty r = RD__GCS__EMPTY__INIT;
  return rd__rpc_reply(call, &r.base);
}

/* ---- nodes ---- */

/* Actors on a node that died can no longer be alive, nor can placement
 * groups it recorded.  g->mu held. */
static void actors_of_dead_node(gcs *g, uint32_t idx);
static void pgs_of_dead_node(gcs *g, uint32_t idx);
static void jobs_of_dead_node(gcs *g, uint32_t idx);

/* g->mu held. */
static void node_mark_dead(gcs *g, Rd__Gcs__NodeInfo *n, const char *reason, int kind) {
  char *old = n->death_reason;
  n->state = RD__GCS__NODE_STATE__NODE_DEAD;
  n->death_reason = (char *)reason;
  n->end_ms = rd__wall_ms();
  if (node_save(g, n) != 0) rd__log(RD_LOG_ERROR, "gcs: cannot save node %u", n->index);
  n->death_reason = old;   /* the unpacked record frees its own string */
  g->alive[n->index] = 0;
  soft_clear(g, &g->load[n->index]);
  g->view_version++;
  meta_save(g);
  rd__log(RD_LOG_WARN, "gcs: node %u (%s) %s: %s", n->index, n->ip ? n->ip : "?",
          kind == RD__GCS__EVENT_KIND__EV_NODE_DEAD ? "dead" : "removed", reason);
  publish(g, kind, n->index, 0, 0, reason);
  if (kind == RD__GCS__EVENT_KIND__EV_NODE_DEAD)
    event_gcs(g, "ERROR", n, "Node %u (%s) is dead: %s.", n->index, n->ip ? n->ip : "?", reason);
  else
    event_gcs(g, "INFO", n, "Node %u (%s) left the cluster: %s.", n->index, n->ip ? n->ip : "?",
              strncmp(reason, "unregistered: ", 14) ? reason : reason + 14);
  actors_of_dead_node(g, n->index);
  pgs_of_dead_node(g, n->index);
  jobs_of_dead_node(g, n->index);
}

static int h_ping(void *arg, rd__rpc_call *call, const ProtobufCMessage *req) {
  Rd__Gcs__PingReply r = RD__GCS__PING_REPLY__INIT;
  r.version = RD_PROTO_VERSION;
  return rd__rpc_reply(call, &r.base);
}

static int check_res(rd__rpc_call *call, const Rd__Resources *m, const char *what) {
  rd_resources r;
  if (m && rd__res_amounts_from_msg(m, &r) != 0) {
    rd__rpc_fail(call, "invalid %s resources", what);
    return RD_EINVAL;
  }
  return 0;
}

/* "Node 3 (10.0.0.3, host b) joined the cluster with 4 CPU, ...": what Ray
 * users see as the autoscaler's "Resized to" line.  g->mu held. */
static void node_joined_event(gcs *g, const Rd__Gcs__NodeInfo *n) {
  rd_resources r;
  char res[400] = "";
  if (n->total && rd__res_amounts_from_msg(n->total, &r) == 0) {   /* "2 CPU, 1 GPU, 23.5 GiB memory, only_b 1" */
    size_t k = 0;
    if (r.cpu) k += (size_t)snprintf(res + k, sizeof(res) - k, "%g CPU", rd_res_to_double(r.cpu));
    if (r.gpu && k < sizeof(res))
      k += (size_t)snprintf(res + k, sizeof(res) - k, "%s%g GPU", k ? ", " : "", rd_res_to_double(r.gpu));
    if (r.memory && k < sizeof(res))
      k += (size_t)snprintf(res + k, sizeof(res) - k, "%s%.1f GiB memory", k ? ", " : "", r.memory / 1073741824.0);
    for (int i = 0; i < r.ncustom && k < sizeof(res); i++)
      k += (size_t)snprintf(res + k, sizeof(res) - k, "%s%s %g", k ? ", " : "", r.custom[i].name,
                            rd_res_to_double(r.custom[i].amount));
  }
  event_gcs(g, "INFO", n, "Node %u (%s, host %s) joined the cluster%s%s%s.", n->index, n->ip,
            n->hostname && n->hostname[0] ? n->hostname : "?", n->is_head ? " as its head" : "",
            res[0] ? " with " : "", res);
}

static int h_register(void *arg, rd__rpc_call *call, const ProtobufCMessage *req) {
  gcs *g = arg;
  const Rd__Gcs__RegisterNodeRequest *q = (const void *)req;
  const Rd__Gcs__NodeInfo *in = q->node;
  if (!in || !str_ok(in->ip, 64) || !in->ip[0] || !str_ok(in->hostname, 64) ||
      !str_ok(in->session_dir, 256) || in->link_port < 0 || in->link_port > 65535 ||
      in->xfer_port < 0 || in->xfer_port > 65535 || in->metrics_port < 0 || in->metrics_port > 65535) {
    rd__rpc_fail(call, "register: node needs an ip, and hostname < 64, session_dir < 256 bytes, ports 0..65535");
    return RD_EINVAL;
  }
  int rc = check_res(call, in->total, "total");
  if (rc) return rc;
  char labels[RD_LABELS_LEN], why[200];
  /* the runtime's own (raydist.io/) labels come from the node daemon itself */
  if (rd_labels_canon_sys(in->labels, labels, sizeof(labels), why, sizeof(why)) != 0) {
    rd__rpc_fail(call, "register: %s", why);
    return RD_EINVAL;
  }
  uint8_t rnd[16];
  char id[33];
  if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
    rd__rpc_fail(call, "no randomness for a node id");
    return RD_ESYS;
  }
  for (int i = 0; i < 16; i++) snprintf(id + 2 * i, 3, "%02x", rnd[i]);

  pthread_mutex_lock(&g->mu);
  uint32_t idx = 0;
  /* A fresh index each time, cycling: a dead node's index is reused only
   * after every other index has been handed out once more. */
  for (int tries = 0; tries < RD_GCS_MAX_NODES; tries++) {
    uint32_t c = g->cursor;
    g->cursor = g->cursor % RD_GCS_MAX_NODES + 1;
    if (!g->alive[c]) {
      idx = c;
      break;
    }
  }
  if (!idx) {
    pthread_mutex_unlock(&g->mu);
    rd__rpc_fail(call, "node table full (%d alive nodes)", RD_GCS_MAX_NODES);
    return RD_ENOMEM;
  }
  Rd__Gcs__NodeInfo n = *in;   /* strings and resources stay in the request */
  n.index = idx;
  n.node_id = id;
  n.state = RD__GCS__NODE_STATE__NODE_ALIVE;
  n.avail = in->total;
  n.pending = 0;
  n.store_used = 0;
  n.ms_since_heartbeat = 0;
  n.death_reason = (char *)"";
  n.labels = labels;
  n.start_ms = rd__wall_ms();
  n.end_ms = 0;
  rc = node_save(g, &n);
  if (rc) {
    pthread_mutex_unlock(&g->mu);
    return rc;
  }
  g->alive[idx] = 1;
  g->last_hb_ms[idx] = mono_ms();
  soft_clear(g, &g->load[idx]);
  g->view_version++;
  meta_save(g);
  publish(g, RD__GCS__EVENT_KIND__EV_NODE_ADDED, idx, 0, 0, "");
  node_joined_event(g, &n);
  Rd__Gcs__RegisterNodeReply r = RD__GCS__REGISTER_NODE_REPLY__INIT;
  r.index = idx;
  r.node_id = id;
  r.view_version = g->view_version;
  pthread_mutex_unlock(&g->mu);
  rd__log(RD_LOG_INFO, "gcs: node %u registered: %s (%s)%s", idx, in->ip, id, in->is_head ? " head" : "");
  flush_wakes(g);
  return rd__rpc_reply(call, &r.base);
}

/* The node record for a call naming idx: RD_EINVAL/RD_ENOENT otherwise. */
static Rd__Gcs__NodeInfo *node_for_call(gcs *g, rd__rpc_call *call, uint32_t idx, int *rc) {
  if (idx < 1 || idx > RD_GCS_MAX_NODES) {
    rd__rpc_fail(call, "node index %u out of range 1..%d", idx, RD_GCS_MAX_NODES);
    *rc = RD_EINVAL;
    return NULL;
  }
  Rd__Gcs__NodeInfo *n = node_load(g, idx, rc);
  if (!n) rd__rpc_fail(call, "no node %u", idx);
  return n;
}

/* A heartbeat's demand: at most DEMAND_MAX shapes, each valid resources
 * and a selector of at most RD_LABEL_ALTS_LEN - 1 bytes. */
#define DEMAND_MAX 16
static int check_demand(rd__rpc_call *call, Rd__Gcs__ResourceDemand *const *d, size_t n) {
  if (n > DEMAND_MAX) {
    rd__rpc_fail(call, "heartbeat: %zu demand shapes (at most %d)", n, DEMAND_MAX);
    return RD_EINVAL;
  }
  for (size_t i = 0; i < n; i++) {
    int rc = check_res(call, d[i]->shape, "demand");
    if (rc) return rc;
    if (d[i]->n_avoid_nodes > RD_GCS_DEMAND_AVOID_MAX) {
      rd__rpc_fail(call, "heartbeat: a demand avoids %zu nodes (at most %d)", d[i]->n_avoid_nodes,
                   RD_GCS_DEMAND_AVOID_MAX);
      return RD_EINVAL;
    }
    if (d[i]->label_selector && !str_ok(d[i]->label_selector, RD_LABEL_ALTS_LEN)) {
      rd__rpc_fail(call, "heartbeat: a demand's label selector is longer than %d bytes", RD_LABEL_ALTS_LEN - 1);
      return RD_EINVAL;
    }
  }
  return 0;
}

static int h_heartbeat(void *arg, rd__rpc_call *call, const ProtobufCMessage *req) {
  gcs *g = arg;
  const Rd__Gcs__HeartbeatRequest *q = (const void *)req;
  int rc = check_res(call, q->avail, "available");
  if (rc) return rc;
  int bad = q->n_code_in_use > RD_GCS_CODE_REFS_MAX;
  for (size_t i = 0; i < q->n_code_in_use && !bad; i++) bad = !rd_sha256_is_hex(q->code_in_use[i]);
  if (bad) {
    rd__rpc_fail(call, "heartbeat: at most %d code hashes in use, each 64 lowercase hex digits", RD_GCS_CODE_REFS_MAX);
    return RD_EINVAL;
  }
  if ((rc = check_demand(call, q->demand, q->n_demand)) != 0) return rc;
  size_t alen = q->avail ? rd__resources__get_packed_size(q->avail) : 0;
  uint8_t *avail = q->avail ? malloc(alen ? alen : 1) : NULL;
  char (*code)[65] = q->n_code_in_use ? malloc(q->n_code_in_use * sizeof(*code)) : NULL;
  Rd__Gcs__NodeLoad ld = RD__GCS__NODE_LOAD__INIT;
  ld.index = q->index;
  ld.n_demand = q->n_demand;
  ld.demand = q->demand;
  ld.idle_ms = q->idle_ms;
  size_t dlen = q->n_demand || q->idle_ms ? rd__gcs__node_load__get_packed_size(&ld) : 0;
  uint8_t *demand = dlen ? malloc(dlen) : NULL;
  if ((q->avail && !avail) || (q->n_code_in_use && !code) || (dlen && !demand)) {
    free(avail);
    free(code);
    free(demand);
    return RD_ENOMEM;
  }
  if (avail) rd__resources__pack(q->avail, avail);
  if (demand) rd__gcs__node_load__pack(&ld, demand);
  for (size_t i = 0; i < q->n_code_in_use; i++) memcpy(code[i], q->code_in_use[i], 65);
  Rd__Gcs__NodeInfo *n = NULL;
  char drain[128] = "";
  pthread_mutex_lock(&g->mu);
  if (q->index >= 1 && q->index <= RD_GCS_MAX_NODES && g->alive[q->index]) {
    node_soft *l = &g->load[q->index];   /* the common case: no store access */
    for (size_t i = 0; i < l->ncode; i++) {   /* code it stopped naming was last used now */
      size_t k = 0;
      while (k < q->n_code_in_use && memcmp(l->code[i], code[k], 64)) k++;
      if (k == q->n_code_in_use) code_touch(g, l->code[i]);
    }
    free(l->avail);
    free(l->code);
    free(l->demand);
    l->avail = avail;
    l->avail_len = alen;
    l->pending = q->pending;
    l->store_used = q->store_used;
    l->code = code;
    l->ncode = q->n_code_in_use;
    l->demand = demand;
    l->demand_len = dlen;
    avail = NULL;
    code = NULL;
    demand = NULL;
    g->last_hb_ms[q->index] = mono_ms();
    if (l->drain[0] && g->last_hb_ms[q->index] < l->drain_until_ms) snprintf(drain, sizeof(drain), "%s", l->drain);
  } else if ((n = node_for_call(g, call, q->index, &rc)) != NULL) {
    rd__rpc_fail(call, "node %u was declared dead (%s); register again", q->index,
                 n->death_reason ? n->death_reason : "");
    rc = RD_ENODE_DIED;
  }
  Rd__Gcs__HeartbeatReply r = RD__GCS__HEARTBEAT_REPLY__INIT;
  r.view_version = g->view_version;
  r.drain = drain;
  pthread_mutex_unlock(&g->mu);
  free(avail);
  free(code);
  free(demand);
  if (n) protobuf_c_message_free_unpacked(&n->base, NULL);
  return rc ? rc : rd__rpc_reply(call, &r.base);
}

static int h_unregister(void *arg, rd__rpc_call *call, const ProtobufCMessage *req) {
  gcs *g = arg;
  const Rd__Gcs__UnregisterNodeRequest *q = (const void *)req;
  char reason[128];
  snprintf(reason, sizeof(reason), "unregistered: %.100s", str_ok(q->reason, 1024) ? q->reason : "");
  int rc;
  pthread_mutex_lock(&g->mu);
  Rd__Gcs__NodeInfo *n = node_for_call(g, call, q->index, &rc);
  if (n && n->state == RD__GCS__NODE_STATE__NODE_ALIVE)
    node_mark_dead(g, n, reason, RD__GCS__EVENT_KIND__EV_NODE_REMOVED);
  pthread_mutex_unlock(&g->mu);
  if (n) protobuf_c_message_free_unpacked(&n->base, NULL);
  flush_wakes(g);
  return reply_empty(call, rc);
}

typedef struct node_list {
  Rd__Gcs__NodeInfo **v;
  size_t n, cap;
  int rc;
} node_list;

static int collect_node(void *arg, const char *key, size_t klen, const void *val, size_t vlen) {
  node_list *l = arg;
  if ((l->rc = grow(&l->v, &l->cap, l->n, sizeof(*l->v))) != 0) return 1;
  Rd__Gcs__NodeInfo *n = rd__gcs__node_info__unpack(NULL, vlen, val);
  if (!n) {
    l->rc = RD_EIO;
    return 1;
  }
  l->v[l->n++] = n;
  return 0;
}

static int h_get_nodes(void *arg, rd__rpc_call *call, const ProtobufCMessage *req) {
  gcs *g = arg;
  node_list l = {0};
  pthread_mutex_lock(&g->mu);
  int rc = g->store->ops->scan(g->store, T_NODE, "", 0, collect_node, &l);
  uint64_t now = mono_ms();
  for (size_t i = 0; i < l.n; i++) {
    Rd__Gcs__NodeInfo *n = l.v[i];
    uint32_t idx = n->index;
    if (idx < 1 || idx > RD_GCS_MAX_NODES) continue;
    n->ms_since_heartbeat = now - g->last_hb_ms[idx];
    if (!g->alive[idx]) continue;
    const node_soft *ld = &g->load[idx];
    Rd__Resources *avail = ld->avail ? rd__resources__unpack(NULL, ld->avail_len, ld->avail) : NULL;
    if (avail) {   /* the unpacked record owns its fields: swap in the same kind */
      if (n->avail) rd__resources__free_unpacked(n->avail, NULL);
      n->avail = avail;
    }
    n->pending = ld->pending;
    n->store_used = ld->store_used;
  }
  Rd__Gcs__GetNodesReply r = RD__GCS__GET_NODES_REPLY__INIT;
  r.view_version = g->view_version;
  Rd__Gcs__SetNodeTypesRequest *types = g->types && now - g->types_ms < TYPES_TTL_MS
                                            ? rd__gcs__set_node_types_request__unpack(NULL, g->types_len, g->types)
                                            : NULL;
  pthread_mutex_unlock(&g->mu);
  if (!rc) rc = l.rc;
  if (!rc) {
    r.n_nodes = l.n;
    r.nodes = l.v;
    if (types) {
      r.n_node_types = types->n_types;
      r.node_types = types->types;
    }
    rc = rd__rpc_reply(call, &r.base);
  }
  for (size_t i = 0; i < l.n; i++) protobuf_c_message_free_unpacked(&l.v[i]->base, NULL);
  free(l.v);
  if (types) protobuf_c_message_free_unpacked(&types->base, NULL);
  return rc;
}

/* ---- the autoscaler's calls (runtime/autoscaler.c) ---- */

static int h_set_node_types(void *arg, rd__rpc_call *call, const ProtobufCMessage *req) {
  gcs *g = arg;
  const Rd__Gcs__SetNodeTypesRequest *q = (const void *)req;
  if (q->n_types > RD_GCS_NODE_TYPES_MAX) {
    rd__rpc_fail(call, "%zu node types (at most %d)", q->n_types, RD_GCS_NODE_TYPES_MAX);
    return RD_EINVAL;
  }
  for (size_t i = 0; i < q->n_types; i++) {
    const Rd__Gcs__NodeType *t = q->types[i];
    int rc = check_res(call, t->res, "node type");
    if (rc) return rc;
    if (!str_ok(t->name, 64) || !t->name[0] || !str_ok(t->labels, RD_LABELS_LEN)) {
      rd__rpc_fail(call, "node type %zu: a name of 1..63 bytes and labels of at most %d bytes", i, RD_LABELS_LEN - 1);
      return RD_EINVAL;
    }
  }
  size_t len = protobuf_c_message_get_packed_size(&q->base);
  uint8_t *buf = malloc(len ? len : 1);
  if (!buf) return RD_ENOMEM;
  protobuf_c_message_pack(&q->base, buf);
  pthread_mutex_lock(&g->mu);
  free(g->types);
  g->types = q->n_types ? buf : NULL;
  g->types_len = len;
  g->types_ms = mono_ms();
  pthread_mutex_unlock(&g->mu);
  if (!q->n_types) free(buf);
  return reply_empty(call, 0);
}

static int h_get_load(void *arg, rd__rpc_call *call, const ProtobufCMessage *req) {
  gcs *g = arg;
  (void)req;
  Rd__Gcs__GetLoadReply r = RD__GCS__GET_LOAD_REPLY__INIT;
  size_t n = 0;
  pthread_mutex_lock(&g->mu);
  for (uint32_t i = 1; i <= RD_GCS_MAX_NODES; i++) n += g->alive[i];
  Rd__Gcs__NodeLoad **v = n ? calloc(n, sizeof(*v)) : NULL;
  Rd__Gcs__NodeLoad *empty = n ? calloc(n, sizeof(*empty)) : NULL;
  int rc = n && (!v || !empty) ? RD_ENOMEM : 0;
  uint64_t now = mono_ms();
  size_t k = 0;
  for (uint32_t i = 1; !rc && i <= RD_GCS_MAX_NODES; i++) {
    if (!g->alive[i]) continue;
    const node_soft *l = &g->load[i];
    Rd__Gcs__NodeLoad *x = l->demand ? rd__gcs__node_load__unpack(NULL, l->demand_len, l->demand) : NULL;
    if (!x) {   /* no report yet, or none worth packing */
      rd__gcs__node_load__init(&empty[k]);
      x = &empty[k];
    }
    x->index = i;
    x->drain = l->drain[0] && now < l->drain_until_ms ? strdup(l->drain) : NULL;
    v[k++] = x;
  }
  pthread_mutex_unlock(&g->mu);
  if (!rc) {
    r.n_nodes = k;
    r.nodes = v;
    rc = rd__rpc_reply(call, &r.base);
  }
  for (size_t i = 0; i < k; i++) {
    free(v[i]->drain);
    v[i]->drain = NULL;
    if (v[i] != &empty[i]) protobuf_c_message_free_unpacked(&v[i]->base, NULL);
  }
  free(v);
  free(empty);
  return rc;
}

static int h_drain_node(void *arg, rd__rpc_call *call, const ProtobufCMessage *req) {
  gcs *g = arg;
  const Rd__Gcs__DrainNodeRequest *q = (const void *)req;
  if (q->index < 1 || q->index > RD_GCS_MAX_NODES || !str_ok(q->reason, 1024)) {
    rd__rpc_fail(call, "drain: node index %u out of range 1..%d, or no reason", q->index, RD_GCS_MAX_NODES);
    return RD_EINVAL;
  }
  int rc = 0;
  pthread_mutex_lock(&g->mu);
  if (!g->alive[q->index]) {
    rc = RD_ENOENT;
  } else {
    node_soft *l = &g->load[q->index];
    snprintf(l->drain, sizeof(l->drain), "%s", q->reason[0] ? q->reason : "drained");
    l->drain_until_ms = mono_ms() + DRAIN_ASK_MS;
  }
  pthread_mutex_unlock(&g->mu);
  if (rc) rd__rpc_fail(call, "drain: no live node %u", q->index);
  return reply_empty(call, rc);
}

static void code_sweep(gcs *g, uint64_t now);

/* The failure detector: declares silent nodes dead and drops stale uploads
 * and unused code.
 * It also shows the keeper that the server lives: a byte on the alive fd
 * every ALIVE_MS, written with the table lock held, so a server whose
 * handlers deadlock on it (or a stopped process) goes silent. */
#define ALIVE_MS 500

static void *detector(void *arg) {
  gcs *g = arg;
  int period = g->hb_timeout_ms / 10;
  if (period < 20) period = 20;
  if (period > 200) period = 200;
  uint64_t last_sync = mono_ms(), last_alive = 0;
  pthread_mutex_lock(&g->mu);
  while (!g->stop) {
    if (g->alive_fd >= 0 && mono_ms() - last_alive >= ALIVE_MS) {
      ssize_t w = write(g->alive_fd, ".", 1);   /* non-blocking; a full pipe or a gone keeper is no error */
      (void)w;
      last_alive = mono_ms();
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += (long)period * 1000000;
    ts.tv_sec += ts.tv_nsec / 1000000000;
    ts.tv_nsec %= 1000000000;
    pthread_cond_timedwait(&g->cv, &g->mu, &ts);
    if (g->stop) break;
    uint64_t now = mono_ms();
    int changed = 0;
    for (uint32_t i = 1; i <= RD_GCS_MAX_NODES; i++) {
      if (!g->alive[i] || now - g->last_hb_ms[i] <= (uint64_t)g->hb_timeout_ms) continue;
      int rc;
      Rd__Gcs__NodeInfo *n = node_load(g, i, &rc);
      if (!n) {
        g->alive[i] = 0;
        continue;
      }
      char reason[128];
      snprintf(reason, sizeof(reason), "no heartbeat for %" PRIu64 " ms (timeout %d ms)",
               now - g->last_hb_ms[i], g->hb_timeout_ms);
      node_mark_dead(g, n, reason, RD__GCS__EVENT_KIND__EV_NODE_DEAD);
      protobuf_c_message_free_unpacked(&n->base, NULL);
      changed = 1;
    }
    if (g->store->ops->sync && now - last_sync >= SYNC_MS) {
      (void)g->store->ops->sync(g->store);   /* the back end logs a failure */
      last_sync = now;
    }
    for (int i = 0; i < MAX_UPLOADS; i++) {
      gcs_upload *u = &g->uploads[i];
      if (u->id && now - u->last_ms > UPLOAD_IDLE_MS) {
        rd__log(RD_LOG_WARN, "gcs: dropping idle upload of %s (%" PRIu64 "/%" PRIu64 " bytes)", u->hash,
                u->got, u->size);
        free(u->buf);
        memset(u, 0, sizeof(*u));
      }
    }
    code_sweep(g, now);
    if (changed) {
      pthread_mutex_unlock(&g->mu);
      flush_wakes(g);
      pthread_mutex_lock(&g->mu);
    }
  }
  pthread_mutex_unlock(&g->mu);
  return NULL;
}

/* ---- actors ---- */

static void actor_publish(gcs *g, const Rd__Gcs__ActorInfo *a) {
  publish(g, RD__GCS__EVENT_KIND__EV_ACTOR, a->node_index, a->actor_id, a->state, a->death_reason);
}

/* Name tables (actors, placement groups) map a name to the 8-byte id of its
 * holder.  Frees name when id holds it.  g->mu held. */
static void name_drop(gcs *g, const char *table, const char *name, uint64_t id) {
  if (!name || !name[0]) return;
  void *v;
  size_t len;
  if (g->store->ops->get(g->store, table, name, strlen(name), &v, &len) == 0) {
    if (len == 8 && !memcmp(v, &id, 8)) g->store->ops->del(g->store, table, name, strlen(name));
    free(v);
  }
}

/* Takes name for id: 0 (also when id holds it already), RD_EEXIST when
 * another id holds it.  "" is never taken.  g->mu held. */
static int name_claim(gcs *g, const char *table, const char *name, uint64_t id) {
  if (!name || !name[0]) return 0;
  void *v;
  size_t len;
  if (g->store->ops->get(g->store, table, name, strlen(name), &v, &len) == 0) {
    int mine = len == 8 && !memcmp(v, &id, 8);
    free(v);
    return mine ? 0 : RD_EEXIST;
  }
  return g->store->ops->put(g->store, table, name, strlen(name), &id, 8);
}

/* Takes the name for the actor: RD_EEXIST when another live actor holds it. */
static int actor_claim_name(gcs *g, rd__rpc_call *call, const Rd__Gcs__ActorInfo *a) {
  int rc = name_claim(g, T_ACTOR_NAME, a->name, a->actor_id);
  if (rc == RD_EEXIST) rd__rpc_fail(call, "actor name '%s' is taken by a live actor", a->name);
  return rc;
}

/* The records of one table, unpacked, for a list reply (PgList, ActorList). */
typedef struct rec_list {
  const ProtobufCMessageDescriptor *desc;
  ProtobufCMessage **v;
  size_t n, cap, bytes;
  int rc;
} rec_list;

static int collect_rec(void *arg, const char *key, size_t klen, const void *val, size_t vlen) {
  rec_list *l = arg;
  if (l->bytes + vlen > RD_GCS_MSG_MAX / 2) {   /* keep the reply under the message limit */
    l->rc = RD_E2BIG;
    return 1;
  }
  if ((l->rc = grow(&l->v, &l->cap, l->n, sizeof(*l->v))) != 0) return 1;
  ProtobufCMessage *m = protobuf_c_message_unpack(l->desc, NULL, vlen, val);
  if (!m) {
    l->rc = RD_EIO;
    return 1;
  }
  l->v[l->n++] = m;
  l->bytes += vlen + 8;
  return 0;
}

/* Fills l (its desc set) with every record of table t. */
static int list_table(gcs *g, rd__rpc_call *call, const char *t, const char *what, rec_list *l) {
  pthread_mutex_lock(&g->mu);
  int rc = g->store->ops->scan(g->store, t, "", 0, collect_rec, l);
  pthread_mutex_unlock(&g->mu);
  if (!rc) rc = l->rc;
  if (rc == RD_E2BIG) rd__rpc_fail(call, "%s: too many for one reply", what);
  return rc;
}

static void rec_list_free(rec_list *l);

/* Replies with every record of table t as the one repeated field of a reply
 * of type reply (ActorListReply, PgListReply, JobListReply), whose items
 * are messages of type item. */
static int reply_table(gcs *g, rd__rpc_call *call, const char *t, const char *what,
                       const ProtobufCMessageDescriptor *reply, const ProtobufCMessageDescriptor *item) {
  rec_list l = {.desc = item};
  int rc = list_table(g, call, t, what, &l);
  ProtobufCMessage *r = rc ? NULL : calloc(1, reply->sizeof_message);
  if (!rc && !r) rc = RD_ENOMEM;
  if (!rc) {
    const ProtobufCFieldDescriptor *f = &reply->fields[0];
    reply->message_init(r);
    *(size_t *)((char *)r + f->quantifier_offset) = l.n;
    *(ProtobufCMessage ***)((char *)r + f->offset) = l.v;
    rc = rd__rpc_reply(call, r);
  }
  free(r);
  rec_list_free(&l);
  return rc;
}

static void rec_list_free(rec_list *l) {
  for (size_t i = 0; i < l->n; i++) protobuf_c_message_free_unpacked(l->v[i], NULL);
  free(l->v);
}

static void actor_trim_dead(gcs *g);

/* Moves actor a (its record under key) to state, saves and publishes it.
 * A dead actor frees its name; one coming back must win it again
 * (RD_EEXIST, nothing changed).  node 0 keeps the node.  g->mu held. */
static int actor_change(gcs *g, rd__rpc_call *call, Rd__Gcs__ActorInfo *a, const char *key, int state,
                        uint32_t node, char *reason) {
  char *old = a->death_reason;
  int was = a->state, rc = 0;
  a->state = (Rd__Gcs__ActorState)state;
  if (node) a->node_index = node;
  a->death_reason = reason;
  if (state == RD__GCS__ACTOR_STATE__ACTOR_DEAD) name_drop(g, T_ACTOR_NAME, a->name, a->actor_id);
  else if (was == RD__GCS__ACTOR_STATE__ACTOR_DEAD && call) rc = actor_claim_name(g, call, a);
  if (!rc) rc = rec_put(g, T_ACTOR, key, &a->base);
  if (!rc) actor_publish(g, a);
  a->death_reason = old;   /* the unpacked record frees its own string */
  if (!rc && state == RD__GCS__ACTOR_STATE__ACTOR_DEAD && was != RD__GCS__ACTOR_STATE__ACTOR_DEAD) actor_trim_dead(g);
  return rc;
}

typedef struct id_list {
  uint64_t *v;
  size_t n, cap;
  uint32_t node;
  size_t *len;          /* each record's size, where the collector keeps it (trim_ended's budget) */
  size_t len_cap;
} id_list;

static int collect_actor_on(void *arg, const char *key, size_t klen, const void *val, size_t vlen) {
  id_list *l = arg;
  Rd__Gcs__ActorInfo *a = rd__gcs__actor_info__unpack(NULL, vlen, val);
  if (!a) return 0;
  if (a->node_index == l->node && a->state != RD__GCS__ACTOR_STATE__ACTOR_DEAD) {
    if (grow(&l->v, &l->cap, l->n, sizeof(*l->v)) == 0) l->v[l->n++] = a->actor_id;
  }
  protobuf_c_message_free_unpacked(&a->base, NULL);
  return 0;
}

/* Deletes the records of table t (keyed by fixed-width hex ids, so key
 * order is id order) that collect lists as ended, all but the keep with the
 * highest ids, and, where collect keeps their sizes, all but the highest
 * ids that fit in max_bytes.  g->mu held. */
static void trim_ended(gcs *g, const char *t, int (*collect)(void *, const char *, size_t, const void *, size_t),
                       void (*key_of)(char key[20], uint64_t id), size_t keep, size_t max_bytes) {
  id_list l = {0};
  if (g->store->ops->scan(g->store, t, "", 0, collect, &l) == 0) {
    size_t first = l.n > keep ? l.n - keep : 0, bytes = 0;   /* the oldest kept */
    for (size_t i = l.n; l.len && i > first; i--) {
      bytes += l.len[i - 1];
      if (bytes > max_bytes) first = i;   /* i - 1 and older go */
    }
    for (size_t i = 0; i < first; i++) {
      char key[20];
      key_of(key, l.v[i]);
      g->store->ops->del(g->store, t, key, strlen(key));
    }
  }
  free(l.v);
  free(l.len);
}

static int collect_actor_dead(void *arg, const char *key, size_t klen, const void *val, size_t vlen) {
  id_list *l = arg;
  Rd__Gcs__ActorInfo *a = rd__gcs__actor_info__unpack(NULL, vlen, val);
  if (!a) return 0;
  if (a->state == RD__GCS__ACTOR_STATE__ACTOR_DEAD && grow(&l->v, &l->cap, l->n, sizeof(*l->v)) == 0)
    l->v[l->n++] = a->actor_id;
  protobuf_c_message_free_unpacked(&a->base, NULL);
  return 0;
}

/* Deletes the lowest-id dead actors beyond ACTOR_DEAD_KEEP (ids are a node
 * index above a per-node sequence, so within a node the oldest go first):
 * named actors created and killed without end must not grow the table
 * without end.  g->mu held. */
static void actor_trim_dead(gcs *g) { trim_ended(g, T_ACTOR, collect_actor_dead, actor_key, ACTOR_DEAD_KEEP, 0); }

static void actors_of_dead_node(gcs *g, uint32_t idx) {
  id_list l = {.node = idx};
  g->store->ops->scan(g->store, T_ACTOR, "", 0, collect_actor_on, &l);
  char reason[64];
  snprintf(reason, sizeof(reason), "node %u died", idx);
  for (size_t i = 0; i < l.n; i++) {
    char key[20];
    actor_key(key, l.v[i]);
    int rc;
    Rd__Gcs__ActorInfo *a = rec_get(g, T_ACTOR, key, &rd__gcs__actor_info__descriptor, &rc);
    if (!a) continue;
    actor_change(g, NULL, a, key, RD__GCS__ACTOR_STATE__ACTOR_DEAD, 0, reason);
    protobuf_c_message_free_unpacked(&a->base, NULL);
  }
  free(l.v);
}

static int h_actor_register(void *arg, rd__rpc_call *call, const ProtobufCMessage *req) {
  gcs *g = arg;
  const Rd__Gcs__ActorInfo *q = (const void *)req;
  if (!q->actor_id || !str_ok(q->name, RD_GCS_NAME_MAX) || !str_ok(q->class_name, RD_GCS_NAME_MAX) ||
      !q->class_name[0] || q->node_index > RD_GCS_MAX_NODES) {
    rd__rpc_fail(call, "actor register needs an id, a class name and names < %d bytes", RD_GCS_NAME_MAX);
    return RD_EINVAL;
  }
  char key[20];
  actor_key(key, q->actor_id);
  Rd__Gcs__ActorInfo a = *q;
  a.state = RD__GCS__ACTOR_STATE__ACTOR_ALIVE;
  a.death_reason = (char *)"";
  pthread_mutex_lock(&g->mu);
  void *v;
  size_t len;
  int rc = 0;
  Rd__Gcs__NodeInfo *n = q->node_index ? node_load(g, q->node_index, &rc) : NULL;
  rc = 0;
  if (n && n->state != RD__GCS__NODE_STATE__NODE_ALIVE) {   /* late: its node is already dead */
    rd__rpc_fail(call, "actor %016" PRIx64 ": node %u is dead", q->actor_id, q->node_index);
    rc = RD_ENODE_DIED;
  }
  if (n) protobuf_c_message_free_unpacked(&n->base, NULL);
  int again = 0;
  if (!rc && g->store->ops->get(g->store, T_ACTOR, key, strlen(key), &v, &len) == 0) {
    /* the same registration again (a node retrying across a GCS restart,
     * whose first answer was lost) is answered as the first was */
    Rd__Gcs__ActorInfo *old = rd__gcs__actor_info__unpack(NULL, len, v);
    free(v);
    again = old && old->state == RD__GCS__ACTOR_STATE__ACTOR_ALIVE && old->node_index == q->node_index &&
            !strcmp(old->name, q->name) && !strcmp(old->class_name, q->class_name);
    if (old) protobuf_c_message_free_unpacked(&old->base, NULL);
    if (!again) {
      rd__rpc_fail(call, "actor %016" PRIx64 " is already registered", q->actor_id);
      rc = RD_EEXIST;
    }
  }
  if (again) {
    pthread_mutex_unlock(&g->mu);
    return reply_empty(call, 0);
  }
  if (!rc) rc = actor_claim_name(g, call, &a);
  if (!rc) rc = rec_put(g, T_ACTOR, key, &a.base);
  if (!rc) actor_publish(g, &a);
  pthread_mutex_unlock(&g->mu);
  flush_wakes(g);
  return reply_empty(call, rc);
}

static int h_actor_update(void *arg, rd__rpc_call *call, const ProtobufCMessage *req) {
  gcs *g = arg;
  const Rd__Gcs__ActorUpdateRequest *q = (const void *)req;
  if (q->state < RD__GCS__ACTOR_STATE__ACTOR_ALIVE || q->state > RD__GCS__ACTOR_STATE__ACTOR_DEAD ||
      q->node_index > RD_GCS_MAX_NODES || !str_ok(q->reason, 1024)) {
    rd__rpc_fail(call, "actor update: bad state or node index");
    return RD_EINVAL;
  }
  char key[20], reason[128];
  actor_key(key, q->actor_id);
  snprintf(reason, sizeof(reason), "%s", q->reason ? q->reason : "");
  pthread_mutex_lock(&g->mu);
  int rc;
  Rd__Gcs__ActorInfo *a = rec_get(g, T_ACTOR, key, &rd__gcs__actor_info__descriptor, &rc);
  if (!a) {
    rd__rpc_fail(call, "no actor %016" PRIx64, q->actor_id);
  } else {
    rc = actor_change(g, call, a, key, q->state, q->node_index, reason);
    protobuf_c_message_free_unpacked(&a->base, NULL);
  }
  pthread_mutex_unlock(&g->mu);
  flush_wakes(g);
  return reply_empty(call, rc);
}

static int h_actor_lookup(void *arg, rd__rpc_call *call, const ProtobufCMessage *req) {
  gcs *g = arg;
  const Rd__Gcs__ActorLookupRequest *q = (const void *)req;
  if (!str_ok(q->name, RD_GCS_NAME_MAX) || !q->name[0]) {
    rd__rpc_fail(call, "actor lookup needs a name");
    return RD_EINVAL;
  }
  Rd__Gcs__ActorLookupReply r = RD__GCS__ACTOR_LOOKUP_REPLY__INIT;
  pthread_mutex_lock(&g->mu);
  void *v = NULL;
  size_t len = 0;
  int rc = g->store->ops->get(g->store, T_ACTOR_NAME, q->name, strlen(q->name), &v, &len);
  if (!rc && len == 8) {
    memcpy(&r.actor_id, v, 8);
    char key[20];
    actor_key(key, r.actor_id);
    Rd__Gcs__ActorInfo *a = rec_get(g, T_ACTOR, key, &rd__gcs__actor_info__descriptor, &rc);
    if (a) {
      r.node_index = a->node_index;
      r.max_pending_calls = a->max_pending_calls;
      protobuf_c_message_free_unpacked(&a->base, NULL);
    }
  } else if (!rc) {
    rc = RD_EIO;
  }
  pthread_mutex_unlock(&g->mu);
  free(v);
  if (rc == RD_ENOENT) rd__rpc_fail(call, "no live actor named '%s'", q->name);
  return rc ? rc : rd__rpc_reply(call, &r.base);
}

/* Every named actor the table holds: live ones and the dead kept. */
static int h_actor_list(void *arg, rd__rpc_call *call, const ProtobufCMessage *req) {
  return reply_table(arg, call, T_ACTOR, "actors", &rd__gcs__actor_list_reply__descriptor,
                     &rd__gcs__actor_info__descriptor);
}

/* ---- placement groups ---- */

/* The record node writes a group's record whole (PgPut); the GCS checks it,
 * keeps names unique among groups not REMOVED, and removes the groups of a
 * record node that dies.  Bundles on other dead nodes are the record node's
 * business (it reschedules them), never changed here. */

static int pg_live(const Rd__Gcs__PgInfo *p) { return p->state != RD__GCS__PG_STATE__PG_REMOVED; }

/* Does p hold its name (live and named)? */
static int pg_holds_name(const Rd__Gcs__PgInfo *p) { return p && pg_live(p) && p->name && p->name[0]; }

/* 0, or RD_EINVAL with the reason failed on call. */
static int pg_check(rd__rpc_call *call, const Rd__Gcs__PgInfo *q) {
  char why[160] = "";
  if (!q->pg_id)
    snprintf(why, sizeof(why), "needs a non-zero id");
  else if (q->n_bundles < 1 || q->n_bundles > RD_GCS_PG_MAX_BUNDLES)
    snprintf(why, sizeof(why), "needs 1..%d bundles, not %zu", RD_GCS_PG_MAX_BUNDLES, q->n_bundles);
  else if (q->n_bundle_nodes != q->n_bundles)
    snprintf(why, sizeof(why), "has %zu bundle nodes for %zu bundles", q->n_bundle_nodes, q->n_bundles);
  else if (q->strategy < 0 || q->strategy > 3)
    snprintf(why, sizeof(why), "strategy %d is not 0..3 (PACK, SPREAD, STRICT_PACK, STRICT_SPREAD)", q->strategy);
  else if (q->state < RD__GCS__PG_STATE__PG_PENDING || q->state > RD__GCS__PG_STATE__PG_REMOVED)
    snprintf(why, sizeof(why), "state %d is not PENDING, CREATED, RESCHEDULING or REMOVED", (int)q->state);
  else if (!str_ok(q->name, RD_GCS_NAME_MAX) || !str_ok(q->reason, 1024))
    snprintf(why, sizeof(why), "name must be < %d bytes, reason < 1024", RD_GCS_NAME_MAX);
  else if (q->record_node < 1 || q->record_node > RD_GCS_MAX_NODES)
    snprintf(why, sizeof(why), "record node %u is not 1..%d", q->record_node, RD_GCS_MAX_NODES);
  for (size_t i = 0; !why[0] && i < q->n_bundles; i++) {
    rd_resources r;
    if (rd__res_from_msg(q->bundles[i], &r) != 0)
      snprintf(why, sizeof(why), "bundle %zu is not a valid resource request", i);
    else if (rd_res_is_empty(&r))
      snprintf(why, sizeof(why), "bundle %zu asks for nothing", i);
    else if (q->bundle_nodes[i] > RD_GCS_MAX_NODES)
      snprintf(why, sizeof(why), "bundle %zu: node %u is not 0..%d", i, q->bundle_nodes[i], RD_GCS_MAX_NODES);
  }
  if (!why[0]) return 0;
  rd__rpc_fail(call, "placement group %016" PRIx64 ": %s", q->pg_id, why);
  return RD_EINVAL;
}

static int collect_pg_removed(void *arg, const char *key, size_t klen, const void *val, size_t vlen) {
  id_list *l = arg;
  Rd__Gcs__PgInfo *p = rd__gcs__pg_info__unpack(NULL, vlen, val);
  if (!p) return 0;
  if (!pg_live(p) && grow(&l->v, &l->cap, l->n, sizeof(*l->v)) == 0 &&
      grow(&l->len, &l->len_cap, l->n, sizeof(*l->len)) == 0) {
    l->len[l->n] = vlen;
    l->v[l->n++] = p->pg_id;
  }
  protobuf_c_message_free_unpacked(&p->base, NULL);
  return 0;
}

/* Deletes the oldest-id REMOVED groups beyond PG_REMOVED_KEEP.  g->mu held. */
static void pg_trim_removed(gcs *g) {
  trim_ended(g, T_PG, collect_pg_removed, pg_key, PG_REMOVED_KEEP, PG_REMOVED_BYTES);
}

static int collect_pg_of(void *arg, const char *key, size_t klen, const void *val, size_t vlen) {
  id_list *l = arg;
  Rd__Gcs__PgInfo *p = rd__gcs__pg_info__unpack(NULL, vlen, val);
  if (!p) return 0;
  if (p->record_node == l->node && pg_live(p) && grow(&l->v, &l->cap, l->n, sizeof(*l->v)) == 0)
    l->v[l->n++] = p->pg_id;
  protobuf_c_message_free_unpacked(&p->base, NULL);
  return 0;
}

static void pgs_of_dead_node(gcs *g, uint32_t idx) {
  id_list l = {.node = idx};
  g->store->ops->scan(g->store, T_PG, "", 0, collect_pg_of, &l);
  char reason[64];
  snprintf(reason, sizeof(reason), "its record node %u died", idx);
  for (size_t i = 0; i < l.n; i++) {
    char key[20];
    pg_key(key, l.v[i]);
    int rc;
    Rd__Gcs__PgInfo *p = rec_get(g, T_PG, key, &rd__gcs__pg_info__descriptor, &rc);
    if (!p) continue;
    char *old = p->reason;
    name_drop(g, T_PG_NAME, p->name, p->pg_id);
    p->state = RD__GCS__PG_STATE__PG_REMOVED;
    p->reason = reason;
    if (rec_put(g, T_PG, key, &p->base) != 0) rd__log(RD_LOG_ERROR, "gcs: cannot save placement group %s", key);
    else rd__log(RD_LOG_INFO, "gcs: placement group %s removed: %s", key, reason);
    p->reason = old;   /* the unpacked record frees its own string */
    protobuf_c_message_free_unpacked(&p->base, NULL);
  }
  if (l.n) pg_trim_removed(g);
  free(l.v);
}

/* Insert or replace the record with q's id.  A live named group takes its
 * name (RD_EEXIST, nothing changed, when another live group holds it); a
 * rename or a move to REMOVED frees the old name. */
static int h_pg_put(void *arg, rd__rpc_call *call, const ProtobufCMessage *req) {
  gcs *g = arg;
  const Rd__Gcs__PgInfo *q = (const void *)req;
  int rc = pg_check(call, q);
  if (rc) return rc;
  char key[20], reason[128];
  pg_key(key, q->pg_id);
  snprintf(reason, sizeof(reason), "%s", q->reason);
  Rd__Gcs__PgInfo p = *q;   /* bundles and strings stay in the request */
  p.reason = reason;
  pthread_mutex_lock(&g->mu);
  if (pg_live(&p)) {
    /* a late write from a record node already declared dead would bring
     * its group back with nobody left to remove it */
    Rd__Gcs__NodeInfo *n = node_load(g, p.record_node, &rc);
    int dead = n && n->state != RD__GCS__NODE_STATE__NODE_ALIVE;   /* never registered: not late */
    if (n) protobuf_c_message_free_unpacked(&n->base, NULL);
    if (dead) {
      pthread_mutex_unlock(&g->mu);
      rd__rpc_fail(call, "placement group %016" PRIx64 ": its record node %u is dead", p.pg_id, p.record_node);
      return RD_ENODE_DIED;
    }
    rc = 0;
  }
  Rd__Gcs__PgInfo *old = rec_get(g, T_PG, key, &rd__gcs__pg_info__descriptor, &rc);
  if (rc == RD_ENOENT) rc = 0;
  int same = pg_holds_name(old) && pg_holds_name(&p) && !strcmp(old->name, p.name);
  if (!rc && pg_holds_name(&p) && !same) {
    rc = name_claim(g, T_PG_NAME, p.name, p.pg_id);
    if (rc == RD_EEXIST) rd__rpc_fail(call, "placement group name '%s' is taken", p.name);
  }
  if (!rc) {
    rc = rec_put(g, T_PG, key, &p.base);
    if (rc && pg_holds_name(&p) && !same) name_drop(g, T_PG_NAME, p.name, p.pg_id);   /* undo the claim */
  }
  if (!rc && pg_holds_name(old) && !same) name_drop(g, T_PG_NAME, old->name, old->pg_id);
  if (!rc && !pg_live(&p) && (!old || pg_live(old))) pg_trim_removed(g);
  pthread_mutex_unlock(&g->mu);
  if (old) protobuf_c_message_free_unpacked(&old->base, NULL);
  return reply_empty(call, rc);
}

static int h_pg_get(void *arg, rd__rpc_call *call, const ProtobufCMessage *req) {
  gcs *g = arg;
  const Rd__Gcs__PgKey *q = (const void *)req;
  if (!q->pg_id && (!str_ok(q->name, RD_GCS_NAME_MAX) || !q->name[0])) {
    rd__rpc_fail(call, "placement group get needs an id or a name < %d bytes", RD_GCS_NAME_MAX);
    return RD_EINVAL;
  }
  uint64_t id = q->pg_id;
  int rc = 0;
  Rd__Gcs__PgInfo *p = NULL;
  pthread_mutex_lock(&g->mu);
  if (!id) {
    void *v;
    size_t len;
    rc = g->store->ops->get(g->store, T_PG_NAME, q->name, strlen(q->name), &v, &len);
    if (!rc) {
      if (len == 8) memcpy(&id, v, 8);
      else rc = RD_EIO;
      free(v);
    }
  }
  if (!rc) {
    char key[20];
    pg_key(key, id);
    p = rec_get(g, T_PG, key, &rd__gcs__pg_info__descriptor, &rc);
  }
  pthread_mutex_unlock(&g->mu);
  if (rc == RD_ENOENT && q->pg_id) rd__rpc_fail(call, "no placement group %016" PRIx64, q->pg_id);
  else if (rc == RD_ENOENT) rd__rpc_fail(call, "no placement group named '%s'", q->name);
  if (rc) return rc;
  rc = rd__rpc_reply(call, &p->base);
  protobuf_c_message_free_unpacked(&p->base, NULL);
  return rc;
}

static int h_pg_list(void *arg, rd__rpc_call *call, const ProtobufCMessage *req) {
  return reply_table(arg, call, T_PG, "placement groups", &rd__gcs__pg_list_reply__descriptor,
                     &rd__gcs__pg_info__descriptor);
}

/* ---- jobs ---- */

static int h_job_add(void *arg, rd__rpc_call *call, const ProtobufCMessage *req) {
  gcs *g = arg;
  const Rd__Gcs__JobAddRequest *q = (const void *)req;
  if (!str_ok(q->code_hash, 65) || (q->code_hash[0] && !rd_sha256_is_hex(q->code_hash)) ||
      q->node_index > RD_GCS_MAX_NODES) {
    rd__rpc_fail(call, "job add: code hash must be empty or 64 hex digits");
    return RD_EINVAL;
  }
  Rd__Gcs__JobInfo j = RD__GCS__JOB_INFO__INIT;
  j.code_hash = q->code_hash;
  j.driver_pid = q->driver_pid;
  j.node_index = q->node_index;
  j.start_ms = rd__wall_ms();
  char key[12];
  pthread_mutex_lock(&g->mu);
  code_ent *code = q->code_hash[0] ? code_find(g, q->code_hash) : NULL;
  if (q->code_hash[0] && !code) {   /* never stored, or collected since: the caller uploads it again */
    pthread_mutex_unlock(&g->mu);
    rd__rpc_fail(call, "job add: no code %s in the GCS (never stored, or collected unused)", q->code_hash);
    return RD_ENOENT;
  }
  if (code) code->last_ms = mono_ms();
  j.job_id = ++g->next_job;
  job_key(key, j.job_id);
  int rc = rec_put(g, T_JOB, key, &j.base);
  pthread_mutex_unlock(&g->mu);
  if (rc) return rc;
  rd__log(RD_LOG_INFO, "gcs: job %u started (driver pid %d on node %u)", j.job_id, j.driver_pid, j.node_index);
  Rd__Gcs__JobAddReply r = RD__GCS__JOB_ADD_REPLY__INIT;
  r.job_id = j.job_id;
  return rd__rpc_reply(call, &r.base);
}

static void job_key20(char key[20], uint64_t id) { job_key(key, (uint32_t)id); }

static int collect_job_ended(void *arg, const char *key, size_t klen, const void *val, size_t vlen) {
  id_list *l = arg;
  Rd__Gcs__JobInfo *j = rd__gcs__job_info__unpack(NULL, vlen, val);
  if (!j) return 0;
  if (j->end_ms && grow(&l->v, &l->cap, l->n, sizeof(*l->v)) == 0) l->v[l->n++] = j->job_id;
  protobuf_c_message_free_unpacked(&j->base, NULL);
  return 0;
}

/* Ends job id (once: the first reason stands) and drops the oldest ended
 * jobs beyond JOB_ENDED_KEEP.  0 or RD_ENOENT.  g->mu held. */
static int job_end(gcs *g, uint32_t id, const char *reason) {
  char key[12];
  job_key(key, id);
  int rc;
  Rd__Gcs__JobInfo *j = rec_get(g, T_JOB, key, &rd__gcs__job_info__descriptor, &rc);
  if (!j) return rc;
  if (!j->end_ms) {
    char *old = j->end_reason;
    j->end_ms = rd__wall_ms();
    j->end_reason = (char *)reason;
    rc = rec_put(g, T_JOB, key, &j->base);
    j->end_reason = old;   /* the unpacked record frees its own string */
    rd__log(RD_LOG_INFO, "gcs: job %u ended: %s", id, reason);
    if (j->code_hash && j->code_hash[0]) code_touch(g, j->code_hash);   /* its code's TTL starts now */
    trim_ended(g, T_JOB, collect_job_ended, job_key20, JOB_ENDED_KEEP, 0);
  }
  protobuf_c_message_free_unpacked(&j->base, NULL);
  return rc;
}

static int h_job_finish(void *arg, rd__rpc_call *call, const ProtobufCMessage *req) {
  gcs *g = arg;
  const Rd__Gcs__JobFinishRequest *q = (const void *)req;
  char reason[128];
  snprintf(reason, sizeof(reason), "%.120s", str_ok(q->reason, 1024) && q->reason[0] ? q->reason : "finished");
  pthread_mutex_lock(&g->mu);
  int rc = job_end(g, q->job_id, reason);
  pthread_mutex_unlock(&g->mu);
  if (rc == RD_ENOENT) rd__rpc_fail(call, "no job %u", q->job_id);
  return reply_empty(call, rc);
}

static int collect_job_on(void *arg, const char *key, size_t klen, const void *val, size_t vlen) {
  id_list *l = arg;
  Rd__Gcs__JobInfo *j = rd__gcs__job_info__unpack(NULL, vlen, val);
  if (!j) return 0;
  if (!j->end_ms && j->node_index == l->node && grow(&l->v, &l->cap, l->n, sizeof(*l->v)) == 0)
    l->v[l->n++] = j->job_id;
  protobuf_c_message_free_unpacked(&j->base, NULL);
  return 0;
}

/* The jobs driven from a node that died end with it.  g->mu held. */
static void jobs_of_dead_node(gcs *g, uint32_t idx) {
  id_list l = {.node = idx};
  g->store->ops->scan(g->store, T_JOB, "", 0, collect_job_on, &l);
  char reason[64];
  snprintf(reason, sizeof(reason), "its node %u died or left", idx);
  for (size_t i = 0; i < l.n; i++) (void)job_end(g, (uint32_t)l.v[i], reason);
  free(l.v);
}

/* Every job the table holds: running ones and the last ended ones. */
static int h_job_list(void *arg, rd__rpc_call *call, const ProtobufCMessage *req) {
  return reply_table(arg, call, T_JOB, "jobs", &rd__gcs__job_list_reply__descriptor, &rd__gcs__job_info__descriptor);
}

/* ---- KV ---- */

/* Store key: namespace, NUL, key. */
static int kv_key(rd__rpc_call *call, const char *ns, const char *key, char *out, size_t *len) {
  if (!str_ok(ns, RD_GCS_NAME_MAX) || !str_ok(key, RD_GCS_KV_KEY_MAX) || !key[0]) {
    rd__rpc_fail(call, "kv: namespace < %d and key 1..%d bytes", RD_GCS_NAME_MAX, RD_GCS_KV_KEY_MAX - 1);
    return RD_EINVAL;
  }
  size_t a = strlen(ns), b = strlen(key);
  memcpy(out, ns, a + 1);
  memcpy(out + a + 1, key, b);
  *len = a + 1 + b;
  return 0;
}

static int h_kv_put(void *arg, rd__rpc_call *call, const ProtobufCMessage *req) {
  gcs *g = arg;
  const Rd__Gcs__KvPutRequest *q = (const void *)req;
  char k[RD_GCS_NAME_MAX + RD_GCS_KV_KEY_MAX];
  size_t klen;
  int rc = kv_key(call, q->ns, q->key, k, &klen);
  if (rc) return rc;
  pthread_mutex_lock(&g->mu);
  if (!q->overwrite) {
    void *v;
    size_t len;
    if (g->store->ops->get(g->store, T_KV, k, klen, &v, &len) == 0) {
      free(v);
      rc = RD_EEXIST;
      rd__rpc_fail(call, "kv key '%s' exists in namespace '%s'", q->key, q->ns);
    }
  }
  if (!rc) rc = g->store->ops->put(g->store, T_KV, k, klen, q->value.data, q->value.len);
  pthread_mutex_unlock(&g->mu);
  return reply_empty(call, rc);
}

static int h_kv_get(void *arg, rd__rpc_call *call, const ProtobufCMessage *req) {
  gcs *g = arg;
  const Rd__Gcs__KvKey *q = (const void *)req;
  char k[RD_GCS_NAME_MAX + RD_GCS_KV_KEY_MAX];
  size_t klen;
  int rc = kv_key(call, q->ns, q->key, k, &klen);
  if (rc) return rc;
  void *v = NULL;
  size_t len = 0;
  pthread_mutex_lock(&g->mu);
  rc = g->store->ops->get(g->store, T_KV, k, klen, &v, &len);
  pthread_mutex_unlock(&g->mu);
  if (rc == RD_ENOENT) rd__rpc_fail(call, "no kv key '%s' in namespace '%s'", q->key, q->ns);
  if (rc) return rc;
  Rd__Gcs__KvGetReply r = RD__GCS__KV_GET_REPLY__INIT;
  r.value.data = v;
  r.value.len = len;
  rc = rd__rpc_reply(call, &r.base);
  free(v);
  return rc;
}

static int h_kv_del(void *arg, rd__rpc_call *call, const ProtobufCMessage *req) {
  gcs *g = arg;
  const Rd__Gcs__KvKey *q = (const void *)req;
  char k[RD_GCS_NAME_MAX + RD_GCS_KV_KEY_MAX];
  size_t klen;
  int rc = kv_key(call, q->ns, q->key, k, &klen);
  if (rc) return rc;
  pthread_mutex_lock(&g->mu);
  rc = g->store->ops->del(g->store, T_KV, k, klen);
  pthread_mutex_unlock(&g->mu);
  if (rc == RD_ENOENT) rd__rpc_fail(call, "no kv key '%s' in namespace '%s'", q->key, q->ns);
  return reply_empty(call, rc);
}

typedef struct key_list {
  char **v;
  size_t n, cap, skip, bytes;
  int rc;
} key_list;

static int collect_key(void *arg, const char *key, size_t klen, const void *val, size_t vlen) {
  key_list *l = arg;
  if (l->bytes + klen > RD_GCS_MSG_MAX / 2) {   /* keep the reply under the message limit */
    l->rc = RD_E2BIG;
    return 1;
  }
  if ((l->rc = grow(&l->v, &l->cap, l->n, sizeof(*l->v))) != 0) return 1;
  char *s = strndup(key + l->skip, klen - l->skip);
  if (!s) {
    l->rc = RD_ENOMEM;
    return 1;
  }
  l->v[l->n++] = s;
  l->bytes += klen + 4;
  return 0;
}

static int h_kv_list(void *arg, rd__rpc_call *call, const ProtobufCMessage *req) {
  gcs *g = arg;
  const Rd__Gcs__KvListRequest *q = (const void *)req;
  char k[RD_GCS_NAME_MAX + RD_GCS_KV_KEY_MAX];
  if (!str_ok(q->ns, RD_GCS_NAME_MAX) || !str_ok(q->prefix, RD_GCS_KV_KEY_MAX)) {
    rd__rpc_fail(call, "kv list: namespace or prefix too long");
    return RD_EINVAL;
  }
  size_t a = strlen(q->ns), b = strlen(q->prefix);
  memcpy(k, q->ns, a + 1);
  memcpy(k + a + 1, q->prefix, b);
  key_list l = {.skip = a + 1};
  pthread_mutex_lock(&g->mu);
  int rc = g->store->ops->scan(g->store, T_KV, k, a + 1 + b, collect_key, &l);
  pthread_mutex_unlock(&g->mu);
  if (!rc) rc = l.rc;
  if (rc == RD_E2BIG) rd__rpc_fail(call, "kv list: too many keys for one reply; use a longer prefix");
  if (!rc) {
    Rd__Gcs__KvListReply r = RD__GCS__KV_LIST_REPLY__INIT;
    r.n_keys = l.n;
    r.keys = l.v;
    rc = rd__rpc_reply(call, &r.base);
  }
  for (size_t i = 0; i < l.n; i++) free(l.v[i]);
  free(l.v);
  return rc;
}

/* ---- code ---- */

static int check_hash(rd__rpc_call *call, const char *h) {
  if (rd_sha256_is_hex(h)) return 0;
  rd__rpc_fail(call, "code hash must be 64 lowercase hex digits");
  return RD_EINVAL;
}

/* Code is collected once nothing has used it for code_ttl_ms: no running
 * job names it (the job table), no live node's heartbeat lists it (what its
 * jobs, workers and actor records need, detached actors' code included),
 * and no upload, read or stat touched it.  The end of a use (a job ends, a
 * node stops naming it or dies) counts as a use, so code is kept for the
 * TTL after that.  The sweep runs in the detector. */

/* g->code's entry for hash, or NULL.  g->mu held. */
static code_ent *code_find(gcs *g, const char *hash) {
  for (size_t i = 0; i < g->ncode; i++)
    if (!memcmp(g->code[i].hash, hash, 64)) return &g->code[i];
  return NULL;
}

/* Something used hash now: its idle time starts over.  g->mu held. */
static void code_touch(gcs *g, const char *hash) {
  code_ent *e = code_find(g, hash);
  if (e) e->last_ms = mono_ms();
}

/* A blob now in T_CODE.  0 or RD_ENOMEM.  g->mu held. */
static int code_add(gcs *g, const char *hash, uint64_t size) {
  code_ent *e = code_find(g, hash);
  if (!e) {
    if (grow(&g->code, &g->code_cap, g->ncode, sizeof(*g->code)) != 0) return RD_ENOMEM;
    e = &g->code[g->ncode++];
    memcpy(e->hash, hash, 65);
  }
  e->size = size;
  e->last_ms = mono_ms();
  return 0;
}

static int code_scan_add(void *arg, const char *key, size_t klen, const void *val, size_t vlen) {
  gcs *g = arg;
  char h[65];
  if (klen != 64) return 0;
  memcpy(h, key, 64);
  h[64] = 0;
  if (code_add(g, h, vlen) != 0) rd__log(RD_LOG_ERROR, "gcs: out of memory listing code: %s is kept for good", h);
  return 0;
}

/* The code hashes held now: running jobs' and live nodes' heartbeats'. */
typedef struct code_refs {
  char (*v)[65];
  size_t n, cap;
  int rc;
} code_refs;

static int collect_job_code(void *arg, const char *key, size_t klen, const void *val, size_t vlen) {
  code_refs *r = arg;
  Rd__Gcs__JobInfo *j = rd__gcs__job_info__unpack(NULL, vlen, val);
  if (!j) return 0;
  if (!j->end_ms && rd_sha256_is_hex(j->code_hash)) {
    if (grow(&r->v, &r->cap, r->n, sizeof(*r->v)) == 0) memcpy(r->v[r->n++], j->code_hash, 65);
    else r->rc = RD_ENOMEM;
  }
  protobuf_c_message_free_unpacked(&j->base, NULL);
  return r->rc != 0;
}

/* Whether refs name hash. */
static int code_in_use(const code_refs *r, const char *hash) {
  for (size_t i = 0; i < r->n; i++)
    if (!memcmp(r->v[i], hash, 64)) return 1;
  return 0;
}

/* 0, or RD_ENOMEM (then nothing may be judged unused).  g->mu held. */
static int code_refs_read(gcs *g, code_refs *r) {
  *r = (code_refs){0};
  int rc = g->store->ops->scan(g->store, T_JOB, "", 0, collect_job_code, r);
  for (uint32_t n = 1; !rc && !r->rc && n <= RD_GCS_MAX_NODES; n++) {
    if (!g->alive[n]) continue;
    for (size_t i = 0; i < g->load[n].ncode && !r->rc; i++) {
      if (grow(&r->v, &r->cap, r->n, sizeof(*r->v)) == 0) memcpy(r->v[r->n++], g->load[n].code[i], 65);
      else r->rc = RD_ENOMEM;
    }
  }
  return rc ? rc : r->rc;
}

/* Drops the code nothing has used for code_ttl_ms (every quarter of it,
 * CODE_SWEEP_MS at most).  g->mu held. */
static void code_sweep(gcs *g, uint64_t now) {
  if (!g->code_ttl_ms || !g->ncode) return;
  uint64_t period = g->code_ttl_ms / 4;
  if (period > CODE_SWEEP_MS) period = CODE_SWEEP_MS;
  if (period < 50) period = 50;
  if (now - g->code_swept_ms < period) return;
  g->code_swept_ms = now;
  int due = 0;
  for (size_t i = 0; i < g->ncode && !due; i++) due = now - g->code[i].last_ms >= g->code_ttl_ms;
  if (!due) return;
  code_refs r;
  if (code_refs_read(g, &r) != 0) {
    rd__log(RD_LOG_WARN, "gcs: out of memory reading the job table: no code collected this time");
    free(r.v);
    return;
  }
  for (size_t i = 0; i < g->ncode;) {
    code_ent *e = &g->code[i];
    if (code_in_use(&r, e->hash)) e->last_ms = now;
    if (now - e->last_ms < g->code_ttl_ms) {
      i++;
      continue;
    }
    int rc = g->store->ops->del(g->store, T_CODE, e->hash, 64);
    if (rc && rc != RD_ENOENT) {   /* the back end said why; kept for the next sweep */
      i++;
      continue;
    }
    rd__log(RD_LOG_INFO, "gcs: code %s collected (%" PRIu64 " bytes, unused for %" PRIu64 " s)", e->hash, e->size,
            (now - e->last_ms) / 1000);
    g->code_collected++;
    g->code_collected_bytes += e->size;
    *e = g->code[--g->ncode];
  }
  free(r.v);
}

static int h_code_list(void *arg, rd__rpc_call *call, const ProtobufCMessage *req) {
  gcs *g = arg;
  (void)req;
  Rd__Gcs__CodeListReply r = RD__GCS__CODE_LIST_REPLY__INIT;
  pthread_mutex_lock(&g->mu);
  code_refs refs;
  int rc = code_refs_read(g, &refs);
  Rd__Gcs__CodeInfo *v = g->ncode ? calloc(g->ncode, sizeof(*v)) : NULL;
  Rd__Gcs__CodeInfo **vp = g->ncode ? calloc(g->ncode, sizeof(*vp)) : NULL;
  char (*hashes)[65] = g->ncode ? malloc(g->ncode * sizeof(*hashes)) : NULL;
  if (!rc && g->ncode && (!v || !vp || !hashes)) rc = RD_ENOMEM;
  uint64_t now = mono_ms();
  for (size_t i = 0; !rc && i < g->ncode; i++) {
    const code_ent *e = &g->code[i];
    rd__gcs__code_info__init(&v[i]);
    memcpy(hashes[i], e->hash, 65);
    v[i].hash = hashes[i];
    v[i].size = e->size;
    v[i].idle_ms = now - e->last_ms;
    v[i].in_use = code_in_use(&refs, e->hash);
    vp[i] = &v[i];
  }
  r.n_code = rc ? 0 : g->ncode;
  r.code = vp;
  r.ttl_ms = g->code_ttl_ms;
  r.collected = g->code_collected;
  r.collected_bytes = g->code_collected_bytes;
  pthread_mutex_unlock(&g->mu);
  if (!rc) rc = rd__rpc_reply(call, &r.base);
  free(refs.v);
  free(v);
  free(vp);
  free(hashes);
  return rc;
}

static int h_code_stat(void *arg, rd__rpc_call *call, const ProtobufCMessage *req) {
  gcs *g = arg;
  const Rd__Gcs__CodeStatRequest *q = (const void *)req;
  int rc = check_hash(call, q->hash);
  if (rc) return rc;
  Rd__Gcs__CodeStatReply r = RD__GCS__CODE_STAT_REPLY__INIT;
  size_t n;
  uint8_t dummy;
  pthread_mutex_lock(&g->mu);
  rc = g->store->ops->read(g->store, T_CODE, q->hash, 64, 0, &dummy, 0, &n, &r.size);
  if (!rc) code_touch(g, q->hash);   /* an upload skipped for it: its job is on the way */
  pthread_mutex_unlock(&g->mu);
  r.present = rc == 0;
  if (rc && rc != RD_ENOENT) return rc;
  return rd__rpc_reply(call, &r.base);
}

static int h_code_put(void *arg, rd__rpc_call *call, const ProtobufCMessage *req) {
  gcs *g = arg;
  const Rd__Gcs__CodePutRequest *q = (const void *)req;
  int rc = check_hash(call, q->hash);
  if (rc) return rc;
  if (q->size == 0 || q->size > RD_GCS_CODE_MAX || q->data.len > RD_GCS_CHUNK_MAX) {
    rd__rpc_fail(call, "code put: size must be 1..%llu bytes and chunks <= %u bytes",
                 (unsigned long long)RD_GCS_CODE_MAX, RD_GCS_CHUNK_MAX);
    return RD_EINVAL;
  }
  Rd__Gcs__CodePutReply r = RD__GCS__CODE_PUT_REPLY__INIT;
  uint64_t now = mono_ms();
  pthread_mutex_lock(&g->mu);
  gcs_upload *u = NULL;
  if (q->upload_id == 0) {
    size_t n;
    uint64_t total;
    uint8_t dummy;
    if (q->offset != 0) {
      rd__rpc_fail(call, "code put: a new upload starts at offset 0");
      rc = RD_EINVAL;
    } else if (g->store->ops->read(g->store, T_CODE, q->hash, 64, 0, &dummy, 0, &n, &total) == 0) {
      r.complete = 1;   /* someone uploaded it already */
      code_touch(g, q->hash);
    } else {
      for (int i = 0; i < MAX_UPLOADS && !u; i++)
        if (!g->uploads[i].id) u = &g->uploads[i];
      uint8_t *buf = u ? malloc(q->size) : NULL;
      if (!u) {
        rd__rpc_fail(call, "code put: %d uploads in progress; retry later", MAX_UPLOADS);
        rc = RD_EAGAIN;
      } else if (!buf) {
        rd__rpc_fail(call, "code put: cannot hold %" PRIu64 " bytes", q->size);
        rc = RD_ENOMEM;
        u = NULL;
      } else {
        u->id = ++g->next_upload;
        memcpy(u->hash, q->hash, 65);
        u->size = q->size;
        u->got = 0;
        u->buf = buf;
        rd_sha256_init(&u->sha);
      }
    }
  } else {
    for (int i = 0; i < MAX_UPLOADS && !u; i++)
      if (g->uploads[i].id == q->upload_id) u = &g->uploads[i];
    if (!u) {
      rd__rpc_fail(call, "code put: no upload %" PRIu64 " (expired?)", q->upload_id);
      rc = RD_ENOENT;
    } else if (strcmp(u->hash, q->hash) || u->size != q->size || q->offset != u->got) {
      rd__rpc_fail(call, "code put: chunk does not continue upload %" PRIu64, q->upload_id);
      rc = RD_EINVAL;
      u = NULL;
    }
  }
  if (u) {
    if (q->data.len > u->size - u->got) {
      rd__rpc_fail(call, "code put: chunk runs past the declared size");
      rc = RD_EINVAL;
    } else {
      memcpy(u->buf + u->got, q->data.data, q->data.len);
      rd_sha256_update(&u->sha, q->data.data, q->data.len);
      u->got += q->data.len;
      u->last_ms = now;
      r.upload_id = u->id;
      if (u->got == u->size) {
        uint8_t d[32];
        char hex[65];
        rd_sha256_final(&u->sha, d);
        rd_sha256_to_hex(d, hex);
        if (strcmp(hex, u->hash)) {
          rd__rpc_fail(call, "code put: data hashes to %s, not %s", hex, u->hash);
          rc = RD_EINVAL;
        } else {
          rc = g->store->ops->put(g->store, T_CODE, u->hash, 64, u->buf, u->size);
          if (!rc && code_add(g, u->hash, u->size) != 0) {   /* never swept: it stays */
            rd__log(RD_LOG_ERROR, "gcs: out of memory listing code: %s is kept for good", u->hash);
          }
          r.complete = rc == 0;
          if (!rc) rd__log(RD_LOG_INFO, "gcs: code %s stored (%" PRIu64 " bytes)", u->hash, u->size);
        }
      }
    }
    if (rc || r.complete) {   /* a failed upload starts over */
      free(u->buf);
      memset(u, 0, sizeof(*u));
    }
  }
  pthread_mutex_unlock(&g->mu);
  return rc ? rc : rd__rpc_reply(call, &r.base);
}

static int h_code_get(void *arg, rd__rpc_call *call, const ProtobufCMessage *req) {
  gcs *g = arg;
  const Rd__Gcs__CodeGetRequest *q = (const void *)req;
  int rc = check_hash(call, q->hash);
  if (rc) return rc;
  size_t want = q->length ? q->length : RD_GCS_CHUNK;
  if (want > RD_GCS_CHUNK_MAX) want = RD_GCS_CHUNK_MAX;
  uint8_t *buf = malloc(want);
  if (!buf) return RD_ENOMEM;
  Rd__Gcs__CodeGetReply r = RD__GCS__CODE_GET_REPLY__INIT;
  size_t n = 0;
  pthread_mutex_lock(&g->mu);
  rc = g->store->ops->read(g->store, T_CODE, q->hash, 64, q->offset, buf, want, &n, &r.size);
  if (!rc) code_touch(g, q->hash);
  pthread_mutex_unlock(&g->mu);
  if (rc == RD_ENOENT) rd__rpc_fail(call, "no code %s", q->hash);
  if (rc == RD_EINVAL) rd__rpc_fail(call, "offset %" PRIu64 " past the end of code %s", q->offset, q->hash);
  if (!rc) {
    r.data.data = buf;
    r.data.len = n;
    rc = rd__rpc_reply(call, &r.base);
  }
  free(buf);
  return rc;
}

/* ---- the method table and the command ---- */

#define M(name, req, fn) {"/rd.gcs.Gcs/" name, &rd__gcs__##req##__descriptor, fn, NULL}
static const rd__rpc_method gcs_methods[] = {
    M("Ping", empty, h_ping),
    M("RegisterNode", register_node_request, h_register),
    M("Heartbeat", heartbeat_request, h_heartbeat),
    M("UnregisterNode", unregister_node_request, h_unregister),
    M("GetNodes", empty, h_get_nodes),
    M("SetNodeTypes", set_node_types_request, h_set_node_types),
    M("GetLoad", empty, h_get_load),
    M("DrainNode", drain_node_request, h_drain_node),
    M("KvPut", kv_put_request, h_kv_put),
    M("KvGet", kv_key, h_kv_get),
    M("KvDel", kv_key, h_kv_del),
    M("KvList", kv_list_request, h_kv_list),
    M("CodeStat", code_stat_request, h_code_stat),
    M("CodePut", code_put_request, h_code_put),
    M("CodeGet", code_get_request, h_code_get),
    M("CodeList", empty, h_code_list),
    M("JobAdd", job_add_request, h_job_add),
    M("JobFinish", job_finish_request, h_job_finish),
    M("JobList", empty, h_job_list),
    M("ActorRegister", actor_info, h_actor_register),
    M("ActorUpdate", actor_update_request, h_actor_update),
    M("ActorLookup", actor_lookup_request, h_actor_lookup),
    M("ActorList", empty, h_actor_list),
    M("PgPut", pg_info, h_pg_put),
    M("PgGet", pg_key, h_pg_get),
    M("PgList", empty, h_pg_list),
    M("EventAdd", cluster_event, h_event_add),
    M("EventList", event_list_request, h_event_list),
    {"/rd.gcs.Gcs/Subscribe", &rd__gcs__empty__descriptor, NULL, &sub_ops},
};
#undef M

/* ---- restart ---- */

static int collect_alive(void *arg, const char *key, size_t klen, const void *val, size_t vlen) {
  gcs *g = arg;
  Rd__Gcs__NodeInfo *n = rd__gcs__node_info__unpack(NULL, vlen, val);
  if (!n) return 0;
  if (n->state == RD__GCS__NODE_STATE__NODE_ALIVE && n->index >= 1 && n->index <= RD_GCS_MAX_NODES) {
    g->alive[n->index] = 1;
    g->last_hb_ms[n->index] = mono_ms();
  }
  protobuf_c_message_free_unpacked(&n->base, NULL);
  return 0;
}

static int last_job(void *arg, const char *key, size_t klen, const void *val, size_t vlen) {
  uint32_t *max = arg, id = 0;
  for (size_t i = 0; i < klen && key[i] >= '0' && key[i] <= '9'; i++) id = id * 10 + (uint32_t)(key[i] - '0');
  if (id > *max) *max = id;
  return 0;
}

static int count_rec(void *arg, const char *key, size_t klen, const void *val, size_t vlen) {
  (*(size_t *)arg)++;
  return 0;
}

static int last_event(void *arg, const char *key, size_t klen, const void *val, size_t vlen) {
  uint64_t *max = arg, id = event_key_id(key, klen);
  if (id > *max) *max = id;
  return 0;
}

/* Picks up the tables a persistent store kept.  Nodes recorded alive get a
 * whole heartbeat timeout from now to be heard from again (they keep the
 * index they had); the view version moves on by one, so subscribers that
 * compare versions re-read the tables. */
static void recover(gcs *g) {
  (void)g->store->ops->scan(g->store, T_NODE, "", 0, collect_alive, g);
  void *v;
  size_t vlen;
  if (g->store->ops->get(g->store, T_META, "counters", 8, &v, &vlen) == 0) {
    char buf[64];
    snprintf(buf, sizeof(buf), "%.*s", (int)(vlen < 63 ? vlen : 63), (char *)v);
    free(v);
    unsigned cursor = 1;
    uint64_t ver = 0;
    if (sscanf(buf, "%u %" SCNu64, &cursor, &ver) == 2 && cursor >= 1 && cursor <= RD_GCS_MAX_NODES) {
      g->cursor = cursor;
      g->view_version = ver;
    }
  }
  (void)g->store->ops->scan(g->store, T_JOB, "", 0, last_job, &g->next_job);
  (void)g->store->ops->scan(g->store, T_EVENT, "", 0, last_event, &g->next_event);
  (void)g->store->ops->scan(g->store, T_CODE, "", 0, code_scan_add, g);   /* idle from now */
  size_t nodes = 0, actors = 0, pgs = 0, keys = 0;
  for (uint32_t i = 1; i <= RD_GCS_MAX_NODES; i++) nodes += g->alive[i];
  (void)g->store->ops->scan(g->store, T_ACTOR, "", 0, count_rec, &actors);
  (void)g->store->ops->scan(g->store, T_PG, "", 0, count_rec, &pgs);
  (void)g->store->ops->scan(g->store, T_KV, "", 0, count_rec, &keys);
  if (!nodes && !actors && !pgs && !keys && !g->next_job && !g->view_version && !g->ncode && !g->next_event)
    return;
  g->view_version++;
  meta_save(g);
  rd__log(RD_LOG_WARN, "gcs: recovered %zu live nodes, %zu actors, %zu placement groups, %zu kv keys, "
          "%u jobs, %zu code blobs (view version %" PRIu64 ")", nodes, actors, pgs, keys, g->next_job, g->ncode,
          g->view_version);
  event_gcs(g, "WARNING", NULL, "The GCS restarted and recovered its tables: %zu live nodes (each has %d ms to "
            "beat again), %zu actors, %zu placement groups, %u jobs.", nodes, g->hb_timeout_ms, actors, pgs,
            g->next_job);
}

static void usage(FILE *f) {
  fprintf(f, "usage: raydist gcs --bind IP:PORT --token-file PATH [--ready-fd FD] [--alive-fd FD] [--port-file PATH]\n"
             "                   [--storage memory|file:PATH (default memory)] [--pid-file PATH]\n"
             "                   [--supervise (restart the server when it dies; needs --port-file)\n"
             "                    [--log-file F (stdout and stderr are F: the keeper copies the server's\n"
             "                     there and rotates it, RAYDIST_ROTATION_MAX_BYTES)]]\n"
             "                   [--heartbeat-timeout-ms N (default %d)] [--log-level L]\n"
             "                   [--code-ttl-s S (code unused this long is dropped; default\n"
             "                    $RAYDIST_GCS_CODE_TTL_S, else %d; 0: keep it for good)]\n",
          RD_GCS_HB_TIMEOUT_MS, CODE_TTL_S);
}

int rd__gcs_cli(int argc, char **argv) {
  static const struct option opts[] = {
      {"bind", required_argument, NULL, 'b'},       {"token-file", required_argument, NULL, 't'},
      {"ready-fd", required_argument, NULL, 'r'},   {"port-file", required_argument, NULL, 'p'},
      {"heartbeat-timeout-ms", required_argument, NULL, 'h'},
      {"log-level", required_argument, NULL, 'l'},  {"help", no_argument, NULL, 'H'},
      {"storage", required_argument, NULL, 's'},   {"pid-file", required_argument, NULL, 'P'},
      {"alive-fd", required_argument, NULL, 'a'},   {"code-ttl-s", required_argument, NULL, 'c'},
      {NULL, 0, NULL, 0}};
  const char *bind = NULL, *token_file = NULL, *port_file = NULL, *storage = "memory", *pid_file = NULL;
  for (int i = 2; i < argc; i++)
    if (!strcmp(argv[i], "--supervise")) {
      static const rd_keeper_conf kc = {.role = "gcs", .fixed_port = 1, .alive = 1};
      return rd__keeper(argc, argv, &kc);
    }
  int ready_fd = -1, alive_fd = -1, hb = RD_GCS_HB_TIMEOUT_MS;
  const char *ttl_s = getenv("RAYDIST_GCS_CODE_TTL_S");
  rd__log_init("gcs");
  optind = 2;   /* argv[1] is "gcs" */
  int c;
  while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    char *end = NULL;
    switch (c) {
      case 'b': bind = optarg; break;
      case 't': token_file = optarg; break;
      case 'p': port_file = optarg; break;
      case 's': storage = optarg; break;
      case 'P': pid_file = optarg; break;
      case 'r':
        ready_fd = (int)strtol(optarg, &end, 10);
        if (*end || ready_fd < 0) { usage(stderr); return 2; }
        break;
      case 'a':
        alive_fd = (int)strtol(optarg, &end, 10);
        if (*end || alive_fd < 0 || fcntl(alive_fd, F_SETFL, O_NONBLOCK) != 0) { usage(stderr); return 2; }
        break;
      case 'h':
        hb = (int)strtol(optarg, &end, 10);
        if (*end || hb < 50 || hb > 3600000) {
          fprintf(stderr, "raydist gcs: --heartbeat-timeout-ms must be 50..3600000\n");
          return 2;
        }
        break;
      case 'l':
        rd__log_set_level((int)strtol(optarg, &end, 10));
        break;
      case 'c': ttl_s = optarg; break;
      case 'H': usage(stdout); return 0;
      default: usage(stderr); return 2;
    }
  }
  if (!bind || !token_file || optind != argc) {
    usage(stderr);
    return 2;
  }
  double ttl = CODE_TTL_S;
  if (ttl_s && *ttl_s) {
    char *end = NULL;
    ttl = strtod(ttl_s, &end);
    if (*end || !(ttl >= 0 && ttl <= 1e8)) {
      fprintf(stderr, "raydist gcs: the code TTL must be 0..100000000 seconds, not '%s'\n", ttl_s);
      return 2;
    }
  }
  char token[RD_RPC_TOKEN_MAX], err[256];
  if (rd__rpc_read_token(token_file, token, sizeof(token), err, sizeof(err)) != 0) {
    fprintf(stderr, "raydist gcs: %s\n", err);
    return 1;
  }
  /* Signals go to sigwait below: block them before gRPC starts threads. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);

  gcs *g = calloc(1, sizeof(*g));
  if (!g || !(g->store = rd_gcs_store_open(storage, err, sizeof(err)))) {
    fprintf(stderr, "raydist gcs: %s\n", g ? err : "out of memory");
    free(g);
    return 1;
  }
  g->hb_timeout_ms = hb;
  g->code_ttl_ms = (uint64_t)(ttl * 1000);
  g->alive_fd = alive_fd;
  g->cursor = 1;
  recover(g);
  pthread_mutex_init(&g->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&g->cv, &ca);
  pthread_condattr_destroy(&ca);

  rd__rpc_server *srv;
  int port = 0;
  int rc = rd__rpc_server_start(bind, token, gcs_methods, sizeof(gcs_methods) / sizeof(gcs_methods[0]),
                                g, 2, RD_GCS_MSG_MAX, &srv, &port, err, sizeof(err));
  int status = 1;
  if (rc) {
    fprintf(stderr, "raydist gcs: %s\n", err);
    goto out;
  }
  pthread_t det;
  pthread_create(&det, NULL, detector, g);
  rd__log(RD_LOG_INFO, "gcs: serving on %s (port %d), heartbeat timeout %d ms, code TTL %g s, storage %s", bind, port, hb, ttl,
          storage);
  if (port_file && rd__write_num_file(port_file, port) != 0) {
    fprintf(stderr, "raydist gcs: cannot write port file '%s': %s\n", port_file, strerror(errno));
  } else if (pid_file && rd__write_num_file(pid_file, (int)getpid()) != 0) {
    fprintf(stderr, "raydist gcs: cannot write pid file '%s': %s\n", pid_file, strerror(errno));
  } else {
    if (ready_fd >= 0) {
      ssize_t w = write(ready_fd, "R", 1);
      (void)w;
      close(ready_fd);
    }
    int sig = 0;
    sigwait(&set, &sig);
    rd__log(RD_LOG_INFO, "gcs: signal %d, stopping", sig);
    status = 0;
  }
  pthread_mutex_lock(&g->mu);
  g->stop = 1;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
  pthread_join(det, NULL);
  rd__rpc_server_stop(srv);   /* ends every subscriber stream */
out:
  for (int i = 0; i < MAX_UPLOADS; i++) free(g->uploads[i].buf);
  for (uint32_t i = 0; i <= RD_GCS_MAX_NODES; i++) soft_clear(g, &g->load[i]);
  free(g->code);
  free(g->types);
  g->store->ops->destroy(g->store);
  pthread_mutex_destroy(&g->mu);
  pthread_cond_destroy(&g->cv);
  free(g);
  return status;
}
