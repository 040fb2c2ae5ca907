/* tests/runtime/wirefuzz.c - see wirefuzz.h. */
#include "wirefuzz.h"

#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "raydist.pb-c.h"

uint64_t wf_next(wf_rng *r) {   /* splitmix64 */
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t wf_below(wf_rng *r, uint64_t n) { return wf_next(r) % n; }
int wf_chance(wf_rng *r, unsigned pct) { return wf_below(r, 100) < pct; }

void wf_buf_free(wf_buf *b) {
  free(b->p);
  b->p = NULL;
  b->len = b->cap = 0;
}

static void put(wf_buf *b, const void *p, size_t n) {
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n) cap *= 2;
    uint8_t *np = realloc(b->p, cap);
    if (!np) abort();   /* a test helper: out of memory is the end */
    b->p = np;
    b->cap = cap;
  }
  memcpy(b->p + b->len, p, n);
  b->len += n;
}

static void put_varint(wf_buf *b, uint64_t v) {
  uint8_t t[10];
  size_t n = 0;
  do {
    t[n] = (uint8_t)(v & 0x7f);
    v >>= 7;
    if (v) t[n] |= 0x80;
    n++;
  } while (v);
  put(b, t, n);
}

static void put_key(wf_buf *b, uint32_t id, unsigned wire) { put_varint(b, ((uint64_t)id << 3) | wire); }

static const char *const *g_names;
static size_t g_nnames;

void wf_set_names(const char *const *names, size_t n) {
  g_names = names;
  g_nnames = n;
}

static uint64_t g_seen[64];   /* values the target sent back: ids it knows */
static unsigned g_nseen;

/* A varint at p[*i..n); *i moves past it (a cut-off one reads as what it has). */
static uint64_t get_varint(const uint8_t *p, size_t n, size_t *i) {
  uint64_t v = 0;
  for (int sh = 0; *i < n && sh < 64; sh += 7) {
    uint8_t byte = p[(*i)++];
    v |= (uint64_t)(byte & 0x7f) << sh;
    if (!(byte & 0x80)) break;
  }
  return v;
}

void wf_note_reply(const uint8_t *p, size_t n) {
  size_t i = 0;
  while (i < n) {
    uint64_t key = get_varint(p, n, &i), v;
    switch (key & 7) {
      case 0:
        v = get_varint(p, n, &i);
        if (v > 1) g_seen[g_nseen++ % 64] = v;
        break;
      case 1: i += 8; break;
      case 5: i += 4; break;
      case 2:
        v = get_varint(p, n, &i);
        if (v > n - i) return;
        i += v;
        break;
      default: return;
    }
  }
}

/* An integer the handlers are likely to treat specially. */
static uint64_t edge_value(wf_rng *r) {
  if (g_nseen && wf_chance(r, 20)) return g_seen[wf_below(r, g_nseen < 64 ? g_nseen : 64)];
  static const uint64_t edges[] = {
      0, 1, 2, 3, 4, 7, 8, 16, 63, 64, 100, 255, 256, 1000, 4096, 5000, 10000, 20000, 65535, 65536,
      1u << 20, 64u << 20, 1ull << 31, 0x7fffffffu, 0x80000000u, 0xffffffffu, 1ull << 32,
      0x7fffffffffffffffull, 0x8000000000000000ull, 0xffffffffffffffffull, 0xfffffffffffffffeull,
      (uint64_t)-10000, (uint64_t)-1000000};
  switch (wf_below(r, 4)) {
    case 0: return wf_below(r, 8);
    case 1: return edges[wf_below(r, sizeof(edges) / sizeof(edges[0]))];
    case 2: return (wf_below(r, 64) << 48) | wf_below(r, 64);   /* an id with a node index above a sequence */
    default: return wf_next(r) >> wf_below(r, 64);
  }
}

static void put_text(wf_rng *r, wf_buf *b) {
  char tmp[64];
  size_t n;
  switch (wf_below(r, 6)) {
    case 0: put_varint(b, 0); return;
    case 1:
      if (g_nnames) {
        const char *s = g_names[wf_below(r, g_nnames)];
        put_varint(b, strlen(s));
        put(b, s, strlen(s));
        return;
      }
      /* fall through */
    case 2:   /* short printable */
      n = 1 + wf_below(r, 24);
      for (size_t i = 0; i < n; i++) tmp[i] = (char)('!' + wf_below(r, 94));
      put_varint(b, n);
      put(b, tmp, n);
      return;
    case 3:   /* arbitrary bytes: invalid UTF-8, NULs */
      n = wf_below(r, 64);
      for (size_t i = 0; i < n; i++) tmp[i] = (char)wf_next(r);
      put_varint(b, n);
      put(b, tmp, n);
      return;
    case 4: {   /* long */
      n = wf_chance(r, 20) ? 70000 + wf_below(r, 70000) : 200 + wf_below(r, 3000);
      put_varint(b, n);
      for (size_t i = 0; i < n; i++) {
        char c = (char)('a' + (i % 26));
        put(b, &c, 1);
      }
      return;
    }
    default: {   /* a path-like string */
      static const char *paths[] = {"/", "/tmp", "/bin/true", "/nonexistent/x", ".", "..", "/proc/self/exe",
                                    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"};
      const char *s = paths[wf_below(r, sizeof(paths) / sizeof(paths[0]))];
      put_varint(b, strlen(s));
      put(b, s, strlen(s));
      return;
    }
  }
}

static void put_scalar(wf_rng *r, const ProtobufCFieldDescriptor *f, wf_buf *b, int with_key) {
  uint64_t v = edge_value(r);
  switch (f->type) {
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT: {
      uint32_t x = (uint32_t)v;
      if (with_key) put_key(b, f->id, 5);
      put(b, &x, 4);
      return;
    }
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
      if (with_key) put_key(b, f->id, 1);
      put(b, &v, 8);
      return;
    case PROTOBUF_C_TYPE_BOOL:
      if (with_key) put_key(b, f->id, 0);
      put_varint(b, wf_chance(r, 90) ? wf_below(r, 2) : v);
      return;
    case PROTOBUF_C_TYPE_ENUM:
      if (with_key) put_key(b, f->id, 0);
      put_varint(b, wf_chance(r, 70) ? wf_below(r, 60) : v);
      return;
    default:   /* the varint integers */
      if (with_key) put_key(b, f->id, 0);
      put_varint(b, v);
      return;
  }
}

static int is_scalar(const ProtobufCFieldDescriptor *f) {
  return f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_BYTES && f->type != PROTOBUF_C_TYPE_MESSAGE;
}

static void put_field(wf_rng *r, const ProtobufCFieldDescriptor *f, int depth, wf_buf *b) {
  if (is_scalar(f)) {
    put_scalar(r, f, b, 1);
    return;
  }
  put_key(b, f->id, 2);
  if (f->type != PROTOBUF_C_TYPE_MESSAGE) {
    put_text(r, b);
    return;
  }
  wf_buf sub = {0};
  if (depth > 0) wf_message(r, f->descriptor, depth - 1, &sub);
  put_varint(b, sub.len);
  if (sub.len) put(b, sub.p, sub.len);
  wf_buf_free(&sub);
}

/* A repeated field stops growing once its message holds this much: without
 * a bound, repeated messages of repeated messages (up to 2000 each, three
 * deep) made messages of hundreds of MiB that the peer refuses by size
 * alone, and building them was most of a fuzz run.  Oversized messages
 * have their own tests (rpc gcs_bad_input, conn_test). */
#define WF_SOFT_MAX (256u << 10)

void wf_message(wf_rng *r, const ProtobufCMessageDescriptor *d, int depth, wf_buf *out) {
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if (!wf_chance(r, 75)) continue;
    if (f->label != PROTOBUF_C_LABEL_REPEATED) {
      put_field(r, f, depth, out);
      if (wf_chance(r, 3)) put_field(r, f, depth, out);   /* a singular field twice: the last wins */
      continue;
    }
    size_t n = wf_chance(r, 5) ? 100 + wf_below(r, 2000) : wf_below(r, 5);
    if (is_scalar(f) && wf_chance(r, 30)) {   /* packed */
      wf_buf pk = {0};
      for (size_t k = 0; k < n && pk.len < WF_SOFT_MAX; k++) put_scalar(r, f, &pk, 0);
      put_key(out, f->id, 2);
      put_varint(out, pk.len);
      if (pk.len) put(out, pk.p, pk.len);
      wf_buf_free(&pk);
      continue;
    }
    for (size_t k = 0; k < n && out->len < WF_SOFT_MAX; k++) put_field(r, f, depth, out);
  }
  if (wf_chance(r, 3)) {   /* an unknown field: must be skipped */
    put_key(out, 100 + (uint32_t)wf_below(r, 1000), 0);
    put_varint(out, edge_value(r));
  }
  if (depth >= 3 && wf_chance(r, 1)) {   /* a known field with the wrong wire type (top level only) */
    if (d->n_fields) {
      const ProtobufCFieldDescriptor *f = &d->fields[wf_below(r, d->n_fields)];
      put_key(out, f->id, (unsigned)wf_below(r, 6));
      put_varint(out, edge_value(r));
    }
  }
}

void wf_damage(wf_rng *r, wf_buf *b) {
  switch (wf_below(r, 3)) {
    case 0:
      for (int k = 0; k < 1 + (int)wf_below(r, 4) && b->len; k++) b->p[wf_below(r, b->len)] ^= (uint8_t)(1u << wf_below(r, 8));
      break;
    case 1:
      if (b->len) b->len = wf_below(r, b->len);
      break;
    default: {
      uint8_t g[16];
      for (size_t i = 0; i < sizeof(g); i++) g[i] = (uint8_t)wf_next(r);
      put(b, g, 1 + wf_below(r, sizeof(g)));
    }
  }
}

const ProtobufCMessageDescriptor *wf_type_desc(unsigned t) {
  switch (t) {
    case RD__MSG_TYPE__MSG_HELLO: return &rd__hello__descriptor;
    case RD__MSG_TYPE__MSG_HELLO_REPLY: return &rd__hello_reply__descriptor;
    case RD__MSG_TYPE__MSG_LEASE_REQUEST: return &rd__lease_request__descriptor;
    case RD__MSG_TYPE__MSG_LEASE_GRANT: return &rd__lease_grant__descriptor;
    case RD__MSG_TYPE__MSG_LEASE_RETURN: return &rd__lease_return__descriptor;
    case RD__MSG_TYPE__MSG_LEASE_ASSIGN: return &rd__lease_assign__descriptor;
    case RD__MSG_TYPE__MSG_OBJ_CREATE: return &rd__obj_create__descriptor;
    case RD__MSG_TYPE__MSG_OBJ_CREATE_REPLY: return &rd__obj_create_reply__descriptor;
    case RD__MSG_TYPE__MSG_OBJ_SEAL: return &rd__obj_seal__descriptor;
    case RD__MSG_TYPE__MSG_OBJ_GET: return &rd__obj_get__descriptor;
    case RD__MSG_TYPE__MSG_OBJ_GET_REPLY: return &rd__obj_get_reply__descriptor;
    case RD__MSG_TYPE__MSG_OBJ_RELEASE:
    case RD__MSG_TYPE__MSG_OBJ_DELETE:
    case RD__MSG_TYPE__MSG_LINK_DELETE: return &rd__obj_ids__descriptor;
    case RD__MSG_TYPE__MSG_TASK: return &rd__task__descriptor;
    case RD__MSG_TYPE__MSG_TASK_REPLY: return &rd__task_reply__descriptor;
    case RD__MSG_TYPE__MSG_ERROR: return &rd__error__descriptor;
    case RD__MSG_TYPE__MSG_NODE_INFO: return &rd__node_info__descriptor;
    case RD__MSG_TYPE__MSG_NODE_INFO_REPLY: return &rd__node_info_reply__descriptor;
    case RD__MSG_TYPE__MSG_SHUTDOWN: return &rd__shutdown__descriptor;
    case RD__MSG_TYPE__MSG_LEASE_CANCEL: return &rd__lease_cancel__descriptor;
    case RD__MSG_TYPE__MSG_ACTOR_CREATE: return &rd__actor_create__descriptor;
    case RD__MSG_TYPE__MSG_ACTOR_ID_REPLY:
    case RD__MSG_TYPE__MSG_LINK_ACTOR_KILLED: return &rd__actor_id_reply__descriptor;
    case RD__MSG_TYPE__MSG_ACTOR_START: return &rd__actor_start__descriptor;
    case RD__MSG_TYPE__MSG_ACTOR_READY: return &rd__actor_ready__descriptor;
    case RD__MSG_TYPE__MSG_ACTOR_CONNECT: return &rd__actor_connect__descriptor;
    case RD__MSG_TYPE__MSG_ACTOR_CONNECT_REPLY: return &rd__actor_connect_reply__descriptor;
    case RD__MSG_TYPE__MSG_ACTOR_ATTACH: return &rd__actor_attach__descriptor;
    case RD__MSG_TYPE__MSG_ACTOR_KILL:
    case RD__MSG_TYPE__MSG_LINK_ACTOR_KILL: return &rd__actor_kill__descriptor;
    case RD__MSG_TYPE__MSG_ACTOR_LOOKUP: return &rd__actor_lookup__descriptor;
    case RD__MSG_TYPE__MSG_LINK_HELLO: return &rd__link_hello__descriptor;
    case RD__MSG_TYPE__MSG_LINK_HELLO_REPLY: return &rd__link_hello_reply__descriptor;
    case RD__MSG_TYPE__MSG_LINK_LEASE: return &rd__link_lease__descriptor;
    case RD__MSG_TYPE__MSG_LINK_GRANT: return &rd__link_grant__descriptor;
    case RD__MSG_TYPE__MSG_LINK_DATA: return &rd__link_data__descriptor;
    case RD__MSG_TYPE__MSG_LINK_CLOSE: return &rd__link_close__descriptor;
    case RD__MSG_TYPE__MSG_LINK_RETURN: return &rd__link_return__descriptor;
    case RD__MSG_TYPE__MSG_LINK_CANCEL: return &rd__link_cancel__descriptor;
    case RD__MSG_TYPE__MSG_LINK_LEASE_YIELD: return &rd__link_lease_yield__descriptor;
    case RD__MSG_TYPE__MSG_NODE_DEAD: return &rd__node_dead__descriptor;
    case RD__MSG_TYPE__MSG_BORROW_GET: return &rd__borrow_get__descriptor;
    case RD__MSG_TYPE__MSG_BORROW_REPLY: return &rd__borrow_reply__descriptor;
    case RD__MSG_TYPE__MSG_STREAM_ITEM: return &rd__stream_item__descriptor;
    case RD__MSG_TYPE__MSG_STREAM_GRANT: return &rd__stream_grant__descriptor;
    case RD__MSG_TYPE__MSG_BORROW_HOLD:
    case RD__MSG_TYPE__MSG_BORROW_DROP: return &rd__borrow_get__descriptor;
    case RD__MSG_TYPE__MSG_OBJ_HANDOVER:
    case RD__MSG_TYPE__MSG_LINK_HANDOVER: return &rd__obj_handover__descriptor;
    case RD__MSG_TYPE__MSG_OBJ_HANDOVER_REPLY: return &rd__obj_get_reply__descriptor;
    case RD__MSG_TYPE__MSG_WORKER_OUTPUT:
    case RD__MSG_TYPE__MSG_LINK_WORKER_OUTPUT: return &rd__worker_output__descriptor;
    case RD__MSG_TYPE__MSG_KV: return &rd__kv_request__descriptor;
    case RD__MSG_TYPE__MSG_KV_REPLY: return &rd__kv_reply__descriptor;
    case RD__MSG_TYPE__MSG_WORKER_RETIRE: return &rd__worker_retire__descriptor;
    case RD__MSG_TYPE__MSG_LINK_JOB: return &rd__link_job__descriptor;
    case RD__MSG_TYPE__MSG_LINK_JOB_REPLY: return &rd__link_job_reply__descriptor;
    case RD__MSG_TYPE__MSG_OWNER_STATS: return &rd__owner_stats__descriptor;
    case RD__MSG_TYPE__MSG_TASK_LIST_ASK: return &rd__task_list_ask__descriptor;
    case RD__MSG_TYPE__MSG_TASK_LIST: return &rd__task_list__descriptor;
    case RD__MSG_TYPE__MSG_LINK_ACTOR_CREATE:
    case RD__MSG_TYPE__MSG_LINK_ACTOR_RECORD: return &rd__link_actor_create__descriptor;
    case RD__MSG_TYPE__MSG_LINK_ACTOR_STATE: return &rd__link_actor_state__descriptor;
    case RD__MSG_TYPE__MSG_LINK_ACTOR_CONNECT: return &rd__link_actor_connect__descriptor;
    case RD__MSG_TYPE__MSG_LINK_ACTOR_CONNECTED: return &rd__link_actor_connected__descriptor;
    case RD__MSG_TYPE__MSG_PG_CREATE:
    case RD__MSG_TYPE__MSG_LINK_PG_CREATE: return &rd__pg_create__descriptor;
    case RD__MSG_TYPE__MSG_JOB_HOLD: return &rd__job_hold__descriptor;
    case RD__MSG_TYPE__MSG_JOB_HOLD_REPLY: return &rd__job_hold_reply__descriptor;
    case RD__MSG_TYPE__MSG_PG_REPLY:
    case RD__MSG_TYPE__MSG_LINK_PG_REMOVED: return &rd__pg_reply__descriptor;
    case RD__MSG_TYPE__MSG_PG_QUERY: return &rd__pg_query__descriptor;
    case RD__MSG_TYPE__MSG_PG_REMOVE:
    case RD__MSG_TYPE__MSG_LINK_PG_REMOVE: return &rd__pg_remove__descriptor;
    case RD__MSG_TYPE__MSG_LINK_PG_PREPARE: return &rd__link_pg_prepare__descriptor;
    case RD__MSG_TYPE__MSG_LINK_PG_PREPARED: return &rd__link_pg_prepared__descriptor;
    case RD__MSG_TYPE__MSG_LINK_PG_COMMIT:
    case RD__MSG_TYPE__MSG_LINK_PG_ABORT: return &rd__link_pg_commit__descriptor;
    case RD__MSG_TYPE__MSG_WORKER_BLOCKED: return &rd__worker_blocked__descriptor;
    case RD__MSG_TYPE__MSG_LEASE_LOST: return &rd__lease_lost__descriptor;
    case RD__MSG_TYPE__MSG_WORKER_STATS: return &rd__worker_stats__descriptor;
    case RD__MSG_TYPE__MSG_TASK_CANCEL: return &rd__task_cancel__descriptor;
    case RD__MSG_TYPE__MSG_LEASE_YIELD: return &rd__lease_yield__descriptor;
    default: return NULL;
  }
}

unsigned wf_max_type(void) { return RD_MSG_TYPE_MAX; }
