/* runtime/gcs_client.c - the blocking GCS client (gcs_client.h).
 *
 * One gRPC channel per rd_gcs; each call is a unary rd__rpc_unary with its
 * own completion queue, so any thread may call at any time.  A subscription
 * is a thread holding one Subscribe stream.  Never linked into libraydist. */
#include "gcs_client.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "gcs.h"
#include "gcs.pb-c.h"
#include "log.h"
#include "raydist/error.h"
#include "rpc.h"
#include "sha256.h"

#define CALL_MS 5000

typedef struct gcs_subscription {
  struct gcs_subscription *next;
  rd_gcs *g;
  rd_gcs_event_cb cb;
  void *arg;
  pthread_t thread;
  grpc_call *call;             /* the live stream, for rd_gcs_close to cancel; g->mu */
  int state;                   /* 0 connecting, 1 live, <0 first attempt failed */
  char err[256];
} gcs_subscription;

struct rd_gcs {
  grpc_channel *ch;
  char token[RD_RPC_TOKEN_MAX];
  char addr[256];
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int closing;
  gcs_subscription *subs;
};

static __thread char last_err[256];

const char *rd_gcs_last_error(void) { return last_err; }

/* One unary call with the default deadline; the failure text goes to
 * last_err (and err when given). */
static int call(rd_gcs *g, const char *method, const ProtobufCMessage *req,
                const ProtobufCMessageDescriptor *rd, ProtobufCMessage **reply, char *err, size_t errlen) {
  last_err[0] = 0;
  int rc = rd__rpc_unary(g->ch, method, g->token, req, rd, reply, CALL_MS, 0, last_err, sizeof(last_err));
  if (rc && err && errlen) snprintf(err, errlen, "%s", last_err);
  return rc;
}

static int fail(int rc, char *err, size_t errlen, const char *fmt, const char *a) {
  snprintf(last_err, sizeof(last_err), fmt, a);
  if (err && errlen) snprintf(err, errlen, "%s", last_err);
  return rc;
}

int rd_gcs_connect(const char *address, const char *token, int timeout_ms, rd_gcs **out, char *err,
                   size_t errlen) {
  *out = NULL;
  int rc = rd__rpc_check_addr(address, err, errlen);
  if (rc) return rc;
  if (!token || !*token || strlen(token) >= RD_RPC_TOKEN_MAX)
    return fail(RD_EINVAL, err, errlen, "%.200s", "a cluster token of 1..255 bytes is required");
  rd_gcs *g = calloc(1, sizeof(*g));
  if (!g) return fail(RD_ENOMEM, err, errlen, "%.200s", "out of memory");
  snprintf(g->token, sizeof(g->token), "%s", token);
  snprintf(g->addr, sizeof(g->addr), "%s", address);
  pthread_mutex_init(&g->mu, NULL);
  pthread_cond_init(&g->cv, NULL);
  grpc_init();
  g->ch = rd__rpc_channel(address, RD_GCS_MSG_MAX, 10000, NULL, 0);
  Rd__Gcs__Empty req = RD__GCS__EMPTY__INIT;
  ProtobufCMessage *rep = NULL;
  char why[256] = "";
  rc = rd__rpc_unary(g->ch, "/rd.gcs.Gcs/Ping", token, &req.base, &rd__gcs__ping_reply__descriptor,
                     &rep, timeout_ms, RD_RPC_WAIT_READY, why, sizeof(why));
  if (rep) protobuf_c_message_free_unpacked(rep, NULL);
  if (rc == RD_ETIMEDOUT || rc == RD_ECONN) {
    snprintf(last_err, sizeof(last_err), "no GCS answered at %.100s within %d ms (%.100s)", address, timeout_ms, why);
    rc = RD_ECONN;
  } else if (rc == RD_EAUTH) {
    snprintf(last_err, sizeof(last_err), "the GCS at %s refused the cluster token", address);
  } else if (rc) {
    snprintf(last_err, sizeof(last_err), "GCS at %.100s: %.140s", address, why);
  }
  if (rc) {
    if (err && errlen) snprintf(err, errlen, "%s", last_err);
    rd_gcs_close(g);
    return rc;
  }
  *out = g;
  return 0;
}

void rd_gcs_close(rd_gcs *g) {
  if (!g) return;
  pthread_mutex_lock(&g->mu);
  g->closing = 1;
  for (gcs_subscription *s = g->subs; s; s = s->next)
    if (s->call) grpc_call_cancel(s->call, NULL);
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
  while (g->subs) {
    gcs_subscription *s = g->subs;
    g->subs = s->next;
    pthread_join(s->thread, NULL);
    free(s);
  }
  grpc_channel_destroy(g->ch);
  grpc_shutdown();
  pthread_mutex_destroy(&g->mu);
  pthread_cond_destroy(&g->cv);
  free(g);
}

/* ---- nodes ---- */

static void copy_str(char *dst, size_t n, const char *src) { snprintf(dst, n, "%s", src ? src : ""); }

int rd_gcs_register_node(rd_gcs *g, const rd_gcs_node *self, uint32_t *index_out, char *err,
                         size_t errlen) {
  if (!g || !self) return fail(RD_EINVAL, err, errlen, "%.200s", "register: no node");
  Rd__Gcs__NodeInfo n = RD__GCS__NODE_INFO__INIT;
  rd__res_msg total;
  rd__res_to_msg(&self->total, &total);
  n.is_head = self->is_head != 0;
  n.ip = (char *)self->ip;
  n.hostname = (char *)self->hostname;
  n.link_port = self->link_port;
  n.xfer_port = self->xfer_port;
  n.metrics_port = self->metrics_port;
  n.labels = (char *)self->labels;
  n.session_dir = (char *)self->session_dir;
  n.total = &total.msg;
  n.store_capacity = self->store_capacity;
  Rd__Gcs__RegisterNodeRequest req = RD__GCS__REGISTER_NODE_REQUEST__INIT;
  req.node = &n;
  ProtobufCMessage *rep;
  int rc = call(g, "/rd.gcs.Gcs/RegisterNode", &req.base, &rd__gcs__register_node_reply__descriptor,
                &rep, err, errlen);
  if (rc) return rc;
  if (index_out) *index_out = ((Rd__Gcs__RegisterNodeReply *)rep)->index;
  protobuf_c_message_free_unpacked(rep, NULL);
  return 0;
}

int rd_gcs_heartbeat(rd_gcs *g, uint32_t index, const rd_resources *avail, int64_t pending,
                     uint64_t store_used, uint64_t *view_version_out) {
  return rd_gcs_heartbeat_code(g, index, avail, pending, store_used, NULL, 0, view_version_out);
}

int rd_gcs_heartbeat_code(rd_gcs *g, uint32_t index, const rd_resources *avail, int64_t pending,
                          uint64_t store_used, char (*code)[65], size_t ncode, uint64_t *view_version_out) {
  rd_gcs_load l = {.avail = avail, .pending = pending, .store_used = store_used, .code = code, .ncode = ncode};
  return rd_gcs_heartbeat_load(g, index, &l, view_version_out, NULL, 0);
}

/* A demand entry to and from its message (m->shape points into rm). */
static void demand_to_msg(const rd_gcs_demand *d, Rd__Gcs__ResourceDemand *m, rd__res_msg *rm) {
  rd__gcs__resource_demand__init(m);
  rd__res_to_msg(&d->shape, rm);
  m->shape = &rm->msg;
  m->label_selector = (char *)d->sel;
  m->count = d->count;
  m->spread_group = d->spread_group;
  m->n_avoid_nodes = d->navoid < RD_GCS_DEMAND_AVOID_MAX ? d->navoid : RD_GCS_DEMAND_AVOID_MAX;
  m->avoid_nodes = (uint32_t *)d->avoid;
}

static int demand_from_msg(const Rd__Gcs__ResourceDemand *m, rd_gcs_demand *d) {
  memset(d, 0, sizeof(*d));
  if (rd__res_amounts_from_msg(m->shape, &d->shape) != 0) return RD_EPROTO;
  copy_str(d->sel, sizeof(d->sel), m->label_selector);
  d->count = m->count;
  d->spread_group = m->spread_group;
  d->navoid = m->n_avoid_nodes < RD_GCS_DEMAND_AVOID_MAX ? (uint32_t)m->n_avoid_nodes : RD_GCS_DEMAND_AVOID_MAX;
  if (d->navoid) memcpy(d->avoid, m->avoid_nodes, d->navoid * sizeof(uint32_t));
  return 0;
}

int rd_gcs_heartbeat_load(rd_gcs *g, uint32_t index, const rd_gcs_load *l, uint64_t *view_version_out, char *drain,
                          size_t drainlen) {
  Rd__Gcs__HeartbeatRequest req = RD__GCS__HEARTBEAT_REQUEST__INIT;
  rd__res_msg a, dm[RD_GCS_DEMAND_MAX];
  Rd__Gcs__ResourceDemand dmsg[RD_GCS_DEMAND_MAX], *dp[RD_GCS_DEMAND_MAX];
  char *codep[RD_GCS_CODE_REFS_MAX];
  size_t ncode = l->ncode > RD_GCS_CODE_REFS_MAX ? RD_GCS_CODE_REFS_MAX : l->ncode;
  size_t nd = l->ndemand > RD_GCS_DEMAND_MAX ? RD_GCS_DEMAND_MAX : l->ndemand;
  for (size_t i = 0; i < ncode; i++) codep[i] = l->code[i];
  for (size_t i = 0; i < nd; i++) {
    demand_to_msg(&l->demand[i], &dmsg[i], &dm[i]);
    dp[i] = &dmsg[i];
  }
  req.n_code_in_use = ncode;
  req.code_in_use = codep;
  req.n_demand = nd;
  req.demand = dp;
  req.idle_ms = l->idle_ms;
  req.index = index;
  if (l->avail) {
    rd__res_to_msg(l->avail, &a);
    req.avail = &a.msg;
  }
  req.pending = l->pending;
  req.store_used = l->store_used;
  ProtobufCMessage *rep;
  if (drain && drainlen) drain[0] = 0;
  int rc = call(g, "/rd.gcs.Gcs/Heartbeat", &req.base, &rd__gcs__heartbeat_reply__descriptor, &rep,
                NULL, 0);
  if (rc) return rc;
  const Rd__Gcs__HeartbeatReply *r = (const Rd__Gcs__HeartbeatReply *)rep;
  if (view_version_out) *view_version_out = r->view_version;
  if (drain && drainlen) copy_str(drain, drainlen, r->drain);
  protobuf_c_message_free_unpacked(rep, NULL);
  return 0;
}

int rd_gcs_set_node_types(rd_gcs *g, const rd_gcs_node_type *t, size_t n) {
  if (n > RD_GCS_NODE_TYPES_MAX) return fail(RD_EINVAL, NULL, 0, "%.200s", "too many node types");
  Rd__Gcs__NodeType m[RD_GCS_NODE_TYPES_MAX], *mp[RD_GCS_NODE_TYPES_MAX];
  rd__res_msg rm[RD_GCS_NODE_TYPES_MAX];
  for (size_t i = 0; i < n; i++) {
    rd__gcs__node_type__init(&m[i]);
    rd__res_to_msg(&t[i].res, &rm[i]);
    m[i].name = (char *)t[i].name;
    m[i].res = &rm[i].msg;
    m[i].labels = (char *)t[i].labels;
    m[i].max_workers = t[i].max_workers;
    m[i].workers = t[i].workers;
    mp[i] = &m[i];
  }
  Rd__Gcs__SetNodeTypesRequest req = RD__GCS__SET_NODE_TYPES_REQUEST__INIT;
  req.n_types = n;
  req.types = mp;
  return call(g, "/rd.gcs.Gcs/SetNodeTypes", &req.base, &rd__gcs__empty__descriptor, NULL, NULL, 0);
}

int rd_gcs_get_load(rd_gcs *g, rd_gcs_node_load **out, size_t *n_out) {
  *out = NULL;
  *n_out = 0;
  Rd__Gcs__Empty req = RD__GCS__EMPTY__INIT;
  ProtobufCMessage *rep;
  int rc = call(g, "/rd.gcs.Gcs/GetLoad", &req.base, &rd__gcs__get_load_reply__descriptor, &rep, NULL, 0);
  if (rc) return rc;
  const Rd__Gcs__GetLoadReply *r = (const Rd__Gcs__GetLoadReply *)rep;
  rd_gcs_node_load *v = r->n_nodes ? calloc(r->n_nodes, sizeof(*v)) : NULL;
  if (r->n_nodes && !v) rc = RD_ENOMEM;
  for (size_t i = 0; !rc && i < r->n_nodes; i++) {
    const Rd__Gcs__NodeLoad *m = r->nodes[i];
    v[i].index = m->index;
    v[i].idle_ms = m->idle_ms;
    copy_str(v[i].drain, sizeof(v[i].drain), m->drain);
    for (size_t k = 0; !rc && k < m->n_demand && k < RD_GCS_DEMAND_MAX; k++)
      if ((rc = demand_from_msg(m->demand[k], &v[i].demand[v[i].ndemand])) == 0) v[i].ndemand++;
  }
  size_t n = r->n_nodes;
  protobuf_c_message_free_unpacked(rep, NULL);
  if (rc) {
    free(v);
    return rc;
  }
  *out = v;
  *n_out = n;
  return 0;
}

int rd_gcs_drain_node(rd_gcs *g, uint32_t index, const char *reason) {
  Rd__Gcs__DrainNodeRequest req = RD__GCS__DRAIN_NODE_REQUEST__INIT;
  req.index = index;
  req.reason = (char *)(reason ? reason : "");
  return call(g, "/rd.gcs.Gcs/DrainNode", &req.base, &rd__gcs__empty__descriptor, NULL, NULL, 0);
}

int rd_gcs_unregister_node(rd_gcs *g, uint32_t index, const char *reason) {
  Rd__Gcs__UnregisterNodeRequest req = RD__GCS__UNREGISTER_NODE_REQUEST__INIT;
  req.index = index;
  req.reason = (char *)(reason ? reason : "");
  return call(g, "/rd.gcs.Gcs/UnregisterNode", &req.base, &rd__gcs__empty__descriptor, NULL, NULL, 0);
}

int rd_gcs_get_nodes(rd_gcs *g, rd_gcs_node **nodes_out, size_t *n_out, uint64_t *version_out) {
  return rd_gcs_get_view(g, nodes_out, n_out, NULL, NULL, version_out);
}

int rd_gcs_get_view(rd_gcs *g, rd_gcs_node **nodes_out, size_t *n_out, rd_gcs_node_type *types, size_t *ntypes,
                    uint64_t *version_out) {
  *nodes_out = NULL;
  *n_out = 0;
  if (ntypes) *ntypes = 0;
  Rd__Gcs__Empty req = RD__GCS__EMPTY__INIT;
  ProtobufCMessage *rep;
  int rc = call(g, "/rd.gcs.Gcs/GetNodes", &req.base, &rd__gcs__get_nodes_reply__descriptor, &rep, NULL, 0);
  if (rc) return rc;
  Rd__Gcs__GetNodesReply *r = (Rd__Gcs__GetNodesReply *)rep;
  rd_gcs_node *v = r->n_nodes ? calloc(r->n_nodes, sizeof(*v)) : NULL;
  if (r->n_nodes && !v) rc = RD_ENOMEM;
  for (size_t i = 0; !rc && i < r->n_nodes; i++) {
    const Rd__Gcs__NodeInfo *m = r->nodes[i];
    rd_gcs_node *n = &v[i];
    n->index = m->index;
    copy_str(n->node_id, sizeof(n->node_id), m->node_id);
    n->state = m->state == RD__GCS__NODE_STATE__NODE_ALIVE ? RD_GCS_NODE_ALIVE : RD_GCS_NODE_DEAD;
    n->is_head = m->is_head;
    copy_str(n->ip, sizeof(n->ip), m->ip);
    copy_str(n->hostname, sizeof(n->hostname), m->hostname);
    n->link_port = m->link_port;
    n->xfer_port = m->xfer_port;
    n->metrics_port = m->metrics_port;
    copy_str(n->labels, sizeof(n->labels), m->labels);
    copy_str(n->session_dir, sizeof(n->session_dir), m->session_dir);
    if (rd__res_amounts_from_msg(m->total, &n->total) != 0 || rd__res_amounts_from_msg(m->avail, &n->avail) != 0)
      rc = RD_EPROTO;
    n->pending = m->pending;
    n->store_capacity = m->store_capacity;
    n->store_used = m->store_used;
    n->ms_since_heartbeat = m->ms_since_heartbeat;
    copy_str(n->death_reason, sizeof(n->death_reason), m->death_reason);
    n->start_ms = m->start_ms;
    n->end_ms = m->end_ms;
  }
  if (version_out) *version_out = r->view_version;
  for (size_t i = 0; !rc && types && ntypes && i < r->n_node_types && i < RD_GCS_NODE_TYPES_MAX; i++) {
    const Rd__Gcs__NodeType *m = r->node_types[i];
    rd_gcs_node_type *t = &types[(*ntypes)++];
    copy_str(t->name, sizeof(t->name), m->name);
    copy_str(t->labels, sizeof(t->labels), m->labels);
    t->max_workers = m->max_workers;
    t->workers = m->workers;
    if (rd__res_amounts_from_msg(m->res, &t->res) != 0) rc = RD_EPROTO;
  }
  size_t count = r->n_nodes;
  protobuf_c_message_free_unpacked(rep, NULL);
  if (rc) {
    free(v);
    return rc;
  }
  *nodes_out = v;
  *n_out = count;
  return 0;
}

/* ---- KV ---- */

int rd_gcs_kv_put(rd_gcs *g, const char *ns, const char *key, const void *val, size_t len,
                  int overwrite) {
  if (!ns || !key || (len && !val)) return fail(RD_EINVAL, NULL, 0, "%.200s", "kv put: NULL argument");
  Rd__Gcs__KvPutRequest req = RD__GCS__KV_PUT_REQUEST__INIT;
  req.ns = (char *)ns;
  req.key = (char *)key;
  req.value.data = (uint8_t *)val;
  req.value.len = len;
  req.overwrite = overwrite != 0;
  return call(g, "/rd.gcs.Gcs/KvPut", &req.base, &rd__gcs__empty__descriptor, NULL, NULL, 0);
}

int rd_gcs_kv_get(rd_gcs *g, const char *ns, const char *key, void **val_out, size_t *len_out) {
  *val_out = NULL;
  *len_out = 0;
  if (!ns || !key) return fail(RD_EINVAL, NULL, 0, "%.200s", "kv get: NULL argument");
  Rd__Gcs__KvKey req = RD__GCS__KV_KEY__INIT;
  req.ns = (char *)ns;
  req.key = (char *)key;
  ProtobufCMessage *rep;
  int rc = call(g, "/rd.gcs.Gcs/KvGet", &req.base, &rd__gcs__kv_get_reply__descriptor, &rep, NULL, 0);
  if (rc) return rc;
  Rd__Gcs__KvGetReply *r = (Rd__Gcs__KvGetReply *)rep;
  void *v = malloc(r->value.len ? r->value.len : 1);
  if (v) {
    if (r->value.len) memcpy(v, r->value.data, r->value.len);
    *val_out = v;
    *len_out = r->value.len;
  }
  protobuf_c_message_free_unpacked(rep, NULL);
  return v ? 0 : RD_ENOMEM;
}

int rd_gcs_kv_del(rd_gcs *g, const char *ns, const char *key) {
  if (!ns || !key) return fail(RD_EINVAL, NULL, 0, "%.200s", "kv del: NULL argument");
  Rd__Gcs__KvKey req = RD__GCS__KV_KEY__INIT;
  req.ns = (char *)ns;
  req.key = (char *)key;
  return call(g, "/rd.gcs.Gcs/KvDel", &req.base, &rd__gcs__empty__descriptor, NULL, NULL, 0);
}

int rd_gcs_kv_list(rd_gcs *g, const char *ns, const char *prefix, char ***keys_out, size_t *n_out) {
  *keys_out = NULL;
  *n_out = 0;
  Rd__Gcs__KvListRequest req = RD__GCS__KV_LIST_REQUEST__INIT;
  req.ns = (char *)(ns ? ns : "");
  req.prefix = (char *)(prefix ? prefix : "");
  ProtobufCMessage *rep;
  int rc = call(g, "/rd.gcs.Gcs/KvList", &req.base, &rd__gcs__kv_list_reply__descriptor, &rep, NULL, 0);
  if (rc) return rc;
  Rd__Gcs__KvListReply *r = (Rd__Gcs__KvListReply *)rep;
  char **v = rd__strv_pack(r->keys, r->n_keys);
  if (v) {
    *keys_out = v;
    *n_out = r->n_keys;
  }
  protobuf_c_message_free_unpacked(rep, NULL);
  return v ? 0 : RD_ENOMEM;
}

/* ---- code ---- */

int rd_gcs_code_put(rd_gcs *g, const char *path, char hash_out[65], char *err, size_t errlen) {
  uint64_t size;
  int rc = rd_sha256_file(path, hash_out, &size, err, errlen);
  if (rc) return rc;
  if (size == 0 || size > RD_GCS_CODE_MAX)
    return fail(RD_EINVAL, err, errlen, "code put: '%.200s' is empty or over 1 GiB", path);
  Rd__Gcs__CodeStatRequest sq = RD__GCS__CODE_STAT_REQUEST__INIT;
  sq.hash = hash_out;
  ProtobufCMessage *rep;
  rc = call(g, "/rd.gcs.Gcs/CodeStat", &sq.base, &rd__gcs__code_stat_reply__descriptor, &rep, err, errlen);
  if (rc) return rc;
  int present = ((Rd__Gcs__CodeStatReply *)rep)->present;
  protobuf_c_message_free_unpacked(rep, NULL);
  if (present) return 0;

  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(RD_EIO, err, errlen, "code put: cannot open '%.200s'", path);
  uint8_t *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return fail(RD_EIO, err, errlen, "code put: cannot map '%.200s'", path);
  Rd__Gcs__CodePutRequest req = RD__GCS__CODE_PUT_REQUEST__INIT;
  req.hash = hash_out;
  req.size = size;
  for (uint64_t off = 0; off < size && !rc;) {
    req.offset = off;
    req.data.data = map + off;
    req.data.len = size - off < RD_GCS_CHUNK ? (size_t)(size - off) : RD_GCS_CHUNK;
    rc = call(g, "/rd.gcs.Gcs/CodePut", &req.base, &rd__gcs__code_put_reply__descriptor, &rep, err, errlen);
    if (rc) break;
    Rd__Gcs__CodePutReply *r = (Rd__Gcs__CodePutReply *)rep;
    req.upload_id = r->upload_id;
    int complete = r->complete;
    protobuf_c_message_free_unpacked(rep, NULL);
    off += req.data.len;
    if (complete) break;   /* done, or another uploader got there first */
    if (off == size) rc = fail(RD_EPROTO, err, errlen, "code put: the GCS did not confirm %.200s", hash_out);
  }
  munmap(map, size);
  return rc;
}

static int write_all(int fd, const uint8_t *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Moves tmp to dest unless dest exists (another fetch of the same hash got
 * there first; then tmp goes).  Never replacing it matters: a process forked
 * while tmp was open for writing holds it until its exec, and if that child
 * execs dest after tmp took its name, the kernel refuses with ETXTBSY (the
 * child's own inherited descriptor is the writer).  Two fetches of one hash
 * and a worker started between them hit this ("text file is busy"). */
static int place_new(const char *tmp, const char *dest) {
  if (renameat2(AT_FDCWD, tmp, AT_FDCWD, dest, RENAME_NOREPLACE) == 0) return 0;
  if (errno == EEXIST) {
    unlink(tmp);
    return 0;
  }
  if (errno != EINVAL && errno != ENOSYS) return -1;
  /* a file system without RENAME_NOREPLACE: link refuses an existing name too */
  if (link(tmp, dest) != 0 && errno != EEXIST) return -1;
  unlink(tmp);
  return 0;
}

int rd_gcs_code_get(rd_gcs *g, const char *hash, const char *dest_path, char *err, size_t errlen) {
  if (!rd_sha256_is_hex(hash)) return fail(RD_EINVAL, err, errlen, "%.200s", "code get: hash must be 64 lowercase hex digits");
  char tmp[4096];
  if (snprintf(tmp, sizeof(tmp), "%s.XXXXXX", dest_path) >= (int)sizeof(tmp))
    return fail(RD_EINVAL, err, errlen, "%.200s", "code get: destination path too long");
  int fd = mkostemp(tmp, O_CLOEXEC);   /* a worker forked meanwhile must not keep it open: ETXTBSY at exec */
  if (fd < 0) return fail(RD_EIO, err, errlen, "code get: cannot create a file next to '%.200s'", dest_path);
  rd_sha256 sha;
  rd_sha256_init(&sha);
  Rd__Gcs__CodeGetRequest req = RD__GCS__CODE_GET_REQUEST__INIT;
  req.hash = (char *)hash;
  req.length = RD_GCS_CHUNK;
  uint64_t size = UINT64_MAX;
  int rc = 0;
  while (!rc && req.offset < size) {
    ProtobufCMessage *rep;
    rc = call(g, "/rd.gcs.Gcs/CodeGet", &req.base, &rd__gcs__code_get_reply__descriptor, &rep, err, errlen);
    if (rc) break;
    Rd__Gcs__CodeGetReply *r = (Rd__Gcs__CodeGetReply *)rep;
    if ((size != UINT64_MAX && r->size != size) || r->data.len == 0 || r->data.len > r->size - req.offset) {
      rc = fail(RD_EPROTO, err, errlen, "code get: bad chunk for %.200s", hash);
    } else if (write_all(fd, r->data.data, r->data.len) != 0) {
      rc = fail(RD_EIO, err, errlen, "code get: cannot write '%.200s'", tmp);
    } else {
      size = r->size;
      rd_sha256_update(&sha, r->data.data, r->data.len);
      req.offset += r->data.len;
    }
    protobuf_c_message_free_unpacked(rep, NULL);
  }
  if (!rc) {
    uint8_t d[32];
    char hex[65];
    rd_sha256_final(&sha, d);
    rd_sha256_to_hex(d, hex);
    if (strcmp(hex, hash)) rc = fail(RD_EPROTO, err, errlen, "code get: downloaded bytes do not hash to %.200s", hash);
  }
  if (!rc && (fchmod(fd, 0700) != 0 || fsync(fd) != 0))
    rc = fail(RD_EIO, err, errlen, "code get: cannot finish '%.200s'", tmp);
  if (close(fd) != 0 && !rc) rc = fail(RD_EIO, err, errlen, "code get: cannot close '%.200s'", tmp);
  if (!rc && place_new(tmp, dest_path) != 0)
    rc = fail(RD_EIO, err, errlen, "code get: cannot rename into '%.200s'", dest_path);
  if (rc) unlink(tmp);
  return rc;
}

/* ---- jobs and actors ---- */

int rd_gcs_code_list(rd_gcs *g, rd_gcs_code_table *out) {
  memset(out, 0, sizeof(*out));
  Rd__Gcs__Empty req = RD__GCS__EMPTY__INIT;
  ProtobufCMessage *rep;
  int rc = call(g, "/rd.gcs.Gcs/CodeList", &req.base, &rd__gcs__code_list_reply__descriptor, &rep, NULL, 0);
  if (rc) return rc;
  Rd__Gcs__CodeListReply *r = (Rd__Gcs__CodeListReply *)rep;
  rd_gcs_code *v = r->n_code ? calloc(r->n_code, sizeof(*v)) : NULL;
  if (r->n_code && !v) rc = fail(RD_ENOMEM, NULL, 0, "%.200s", "out of memory");
  for (size_t i = 0; !rc && i < r->n_code; i++) {
    const Rd__Gcs__CodeInfo *c = r->code[i];
    snprintf(v[i].hash, sizeof(v[i].hash), "%s", c->hash ? c->hash : "");
    v[i].size = c->size;
    v[i].idle_ms = c->idle_ms;
    v[i].in_use = c->in_use;
  }
  if (!rc) {
    out->code = v;
    out->n = r->n_code;
    out->ttl_ms = r->ttl_ms;
    out->collected = r->collected;
    out->collected_bytes = r->collected_bytes;
  }
  protobuf_c_message_free_unpacked(rep, NULL);
  return rc;
}

void rd_gcs_code_sum(const rd_gcs_code_table *t, uint64_t *bytes, size_t *in_use) {
  *bytes = 0;
  *in_use = 0;
  for (size_t i = 0; i < t->n; i++) {
    *bytes += t->code[i].size;
    *in_use += t->code[i].in_use != 0;
  }
}

void rd_gcs_code_describe(const rd_gcs_code_table *t, char *buf, size_t len) {
  uint64_t bytes;
  size_t used;
  rd_gcs_code_sum(t, &bytes, &used);
  char ttl[64];
  if (t->ttl_ms) snprintf(ttl, sizeof(ttl), "unused code is dropped after %g s", t->ttl_ms / 1000.0);
  else snprintf(ttl, sizeof(ttl), "code is kept for good");
  snprintf(buf, len, "%zu blob%s, %.1f MiB, %zu in use; %llu collected (%.1f MiB); %s", t->n, t->n == 1 ? "" : "s",
           bytes / 1048576.0, used, (unsigned long long)t->collected, t->collected_bytes / 1048576.0, ttl);
}

int rd_gcs_job_add(rd_gcs *g, const char *code_hash, int driver_pid, uint32_t node_index,
                   uint32_t *job_id_out) {
  Rd__Gcs__JobAddRequest req = RD__GCS__JOB_ADD_REQUEST__INIT;
  req.code_hash = (char *)(code_hash ? code_hash : "");
  req.driver_pid = driver_pid;
  req.node_index = node_index;
  ProtobufCMessage *rep;
  int rc = call(g, "/rd.gcs.Gcs/JobAdd", &req.base, &rd__gcs__job_add_reply__descriptor, &rep, NULL, 0);
  if (rc) return rc;
  if (job_id_out) *job_id_out = ((Rd__Gcs__JobAddReply *)rep)->job_id;
  protobuf_c_message_free_unpacked(rep, NULL);
  return 0;
}

int rd_gcs_job_finish(rd_gcs *g, uint32_t job_id, const char *reason) {
  Rd__Gcs__JobFinishRequest req = RD__GCS__JOB_FINISH_REQUEST__INIT;
  req.job_id = job_id;
  req.reason = (char *)(reason ? reason : "");
  return call(g, "/rd.gcs.Gcs/JobFinish", &req.base, &rd__gcs__empty__descriptor, NULL, NULL, 0);
}

int rd_gcs_job_list(rd_gcs *g, rd_gcs_job **out, size_t *n) {
  *out = NULL;
  *n = 0;
  Rd__Gcs__Empty req = RD__GCS__EMPTY__INIT;
  ProtobufCMessage *rep;
  int rc = call(g, "/rd.gcs.Gcs/JobList", &req.base, &rd__gcs__job_list_reply__descriptor, &rep, NULL, 0);
  if (rc) return rc;
  Rd__Gcs__JobListReply *r = (Rd__Gcs__JobListReply *)rep;
  rd_gcs_job *v = r->n_jobs ? calloc(r->n_jobs, sizeof(*v)) : NULL;
  if (r->n_jobs && !v) rc = fail(RD_ENOMEM, NULL, 0, "%.200s", "out of memory");
  for (size_t i = 0; !rc && i < r->n_jobs; i++) {
    const Rd__Gcs__JobInfo *j = r->jobs[i];
    v[i].job_id = j->job_id;
    snprintf(v[i].code_hash, sizeof(v[i].code_hash), "%s", j->code_hash ? j->code_hash : "");
    v[i].driver_pid = j->driver_pid;
    v[i].node_index = j->node_index;
    v[i].start_ms = j->start_ms;
    v[i].end_ms = j->end_ms;
    snprintf(v[i].end_reason, sizeof(v[i].end_reason), "%s", j->end_reason ? j->end_reason : "");
  }
  size_t count = r->n_jobs;
  protobuf_c_message_free_unpacked(rep, NULL);
  if (rc) {
    free(v);
    return rc;
  }
  *out = v;
  *n = count;
  return 0;
}

int rd_gcs_actor_register(rd_gcs *g, uint64_t actor_id, const char *name, const char *class_name,
                          uint32_t node_index, int32_t max_pending_calls) {
  Rd__Gcs__ActorInfo req = RD__GCS__ACTOR_INFO__INIT;
  req.actor_id = actor_id;
  req.max_pending_calls = max_pending_calls > 0 ? max_pending_calls : 0;
  req.name = (char *)(name ? name : "");
  req.class_name = (char *)(class_name ? class_name : "");
  req.node_index = node_index;
  return call(g, "/rd.gcs.Gcs/ActorRegister", &req.base, &rd__gcs__empty__descriptor, NULL, NULL, 0);
}

int rd_gcs_actor_update(rd_gcs *g, uint64_t actor_id, int state, uint32_t node_index,
                        const char *reason) {
  Rd__Gcs__ActorUpdateRequest req = RD__GCS__ACTOR_UPDATE_REQUEST__INIT;
  req.actor_id = actor_id;
  req.state = (Rd__Gcs__ActorState)state;
  req.node_index = node_index;
  req.reason = (char *)(reason ? reason : "");
  return call(g, "/rd.gcs.Gcs/ActorUpdate", &req.base, &rd__gcs__empty__descriptor, NULL, NULL, 0);
}

int rd_gcs_actor_lookup(rd_gcs *g, const char *name, uint64_t *actor_id_out, uint32_t *node_index_out,
                        int32_t *max_pending_out) {
  Rd__Gcs__ActorLookupRequest req = RD__GCS__ACTOR_LOOKUP_REQUEST__INIT;
  req.name = (char *)(name ? name : "");
  ProtobufCMessage *rep;
  int rc = call(g, "/rd.gcs.Gcs/ActorLookup", &req.base, &rd__gcs__actor_lookup_reply__descriptor, &rep,
                NULL, 0);
  if (rc) return rc;
  Rd__Gcs__ActorLookupReply *r = (Rd__Gcs__ActorLookupReply *)rep;
  if (actor_id_out) *actor_id_out = r->actor_id;
  if (node_index_out) *node_index_out = r->node_index;
  if (max_pending_out) *max_pending_out = r->max_pending_calls;
  protobuf_c_message_free_unpacked(rep, NULL);
  return 0;
}

int rd_gcs_actor_list(rd_gcs *g, rd_gcs_actor **out, size_t *n) {
  *out = NULL;
  *n = 0;
  Rd__Gcs__Empty req = RD__GCS__EMPTY__INIT;
  ProtobufCMessage *rep;
  int rc = call(g, "/rd.gcs.Gcs/ActorList", &req.base, &rd__gcs__actor_list_reply__descriptor, &rep, NULL, 0);
  if (rc) return rc;
  Rd__Gcs__ActorListReply *r = (Rd__Gcs__ActorListReply *)rep;
  rd_gcs_actor *v = r->n_actors ? calloc(r->n_actors, sizeof(*v)) : NULL;
  if (r->n_actors && !v) rc = fail(RD_ENOMEM, NULL, 0, "%.200s", "out of memory");
  for (size_t i = 0; !rc && i < r->n_actors; i++) {
    const Rd__Gcs__ActorInfo *a = r->actors[i];
    v[i].actor_id = a->actor_id;
    snprintf(v[i].name, sizeof(v[i].name), "%s", a->name ? a->name : "");
    snprintf(v[i].class_name, sizeof(v[i].class_name), "%s", a->class_name ? a->class_name : "");
    v[i].node_index = a->node_index;
    v[i].state = (int)a->state;
    snprintf(v[i].reason, sizeof(v[i].reason), "%s", a->death_reason ? a->death_reason : "");
  }
  size_t count = r->n_actors;
  protobuf_c_message_free_unpacked(rep, NULL);
  if (rc) {
    free(v);
    return rc;
  }
  *out = v;
  *n = count;
  return 0;
}

/* ---- placement groups ---- */

/* Can r be turned into a message without reading past its arrays? */
static int res_packable(const rd_resources *r) {
  if (r->ncustom < 0 || r->ncustom > RD_RES_MAX_CUSTOM) return 0;
  for (int i = 0; i < r->ncustom; i++)
    if (!memchr(r->custom[i].name, 0, sizeof(r->custom[i].name))) return 0;
  return 1;
}

int rd_gcs_pg_put(rd_gcs *g, const rd_gcs_pg *pg) {
  /* Only what the message needs is checked here; the GCS checks the rest. */
  if (!g || !pg || pg->nbundles > RD_GCS_PG_MAX_BUNDLES || !memchr(pg->name, 0, sizeof(pg->name)) ||
      !memchr(pg->reason, 0, sizeof(pg->reason)))
    return fail(RD_EINVAL, NULL, 0, "%.200s",
                "pg put: no group, over RD_GCS_PG_MAX_BUNDLES bundles or unterminated strings");
  if (pg->nbundles && (!pg->bundles || !pg->bundle_nodes))
    return fail(RD_EINVAL, NULL, 0, "%.200s", "pg put: bundles without their arrays");
  for (size_t i = 0; i < pg->nbundles; i++)
    if (!res_packable(&pg->bundles[i])) return fail(RD_EINVAL, NULL, 0, "%.200s", "pg put: a malformed bundle");
  size_t nb = pg->nbundles ? pg->nbundles : 1;
  rd__res_msg *bm = calloc(nb, sizeof(*bm));   /* ~500 bytes each: not on the stack */
  Rd__Resources **bp = calloc(nb, sizeof(*bp));
  if (!bm || !bp) {
    free(bm);
    free(bp);
    return fail(RD_ENOMEM, NULL, 0, "%.200s", "out of memory");
  }
  for (size_t i = 0; i < pg->nbundles; i++) {
    rd__res_to_msg(&pg->bundles[i], &bm[i]);
    bp[i] = &bm[i].msg;
  }
  Rd__Gcs__PgInfo req = RD__GCS__PG_INFO__INIT;
  req.pg_id = pg->pg_id;
  req.name = (char *)pg->name;
  req.strategy = pg->strategy;
  req.state = (Rd__Gcs__PgState)pg->state;
  req.record_node = pg->record_node;
  req.n_bundles = pg->nbundles;
  req.bundles = bp;
  req.n_bundle_nodes = pg->nbundles;
  req.bundle_nodes = (uint32_t *)pg->bundle_nodes;
  req.reason = (char *)pg->reason;
  req.creator_job = pg->creator_job;
  int rc = call(g, "/rd.gcs.Gcs/PgPut", &req.base, &rd__gcs__empty__descriptor, NULL, NULL, 0);
  free(bm);
  free(bp);
  return rc;
}

int rd_gcs_pg_reserve(rd_gcs_pg *pg, size_t n) {
  if (pg->cap >= n && pg->cap) return 0;
  size_t c = n ? n : 1, keep = pg->nbundles < n ? pg->nbundles : n;
  rd_resources *b = calloc(c, sizeof(*b));
  uint32_t *nodes = calloc(c, sizeof(*nodes));
  if (!b || !nodes) {
    free(b);
    free(nodes);
    return RD_ENOMEM;
  }
  if (keep && pg->bundles) memcpy(b, pg->bundles, keep * sizeof(*b));
  if (keep && pg->bundle_nodes) memcpy(nodes, pg->bundle_nodes, keep * sizeof(*nodes));
  rd_gcs_pg_clear(pg);
  pg->bundles = b;
  pg->bundle_nodes = nodes;
  pg->cap = c;
  return 0;
}

void rd_gcs_pg_clear(rd_gcs_pg *pg) {
  if (!pg) return;
  if (pg->cap) {
    free(pg->bundles);
    free(pg->bundle_nodes);
  }
  pg->bundles = NULL;
  pg->bundle_nodes = NULL;
  pg->cap = 0;
}

rd_gcs_pg *rd_gcs_pg_block(size_t n, const size_t *nb) {
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    if (nb[i] > RD_GCS_PG_MAX_BUNDLES) return NULL;
    total += nb[i];
  }
  /* the records, then every bundle, then every bundle node (alignment
   * falls from largest to smallest) */
  size_t head = n * sizeof(rd_gcs_pg), body = total * sizeof(rd_resources);
  char *m = n ? calloc(1, head + body + total * sizeof(uint32_t)) : NULL;
  if (!m) return NULL;
  rd_gcs_pg *v = (rd_gcs_pg *)m;
  rd_resources *b = (rd_resources *)(m + head);
  uint32_t *nodes = (uint32_t *)(m + head + body);
  for (size_t i = 0; i < n; i++) {
    v[i].nbundles = nb[i];
    v[i].bundles = b;
    v[i].bundle_nodes = nodes;
    b += nb[i];
    nodes += nb[i];
  }
  return v;
}

/* Does m hold a placement group this client can hold?  RD_EPROTO when not. */
static int pg_msg_ok(const Rd__Gcs__PgInfo *m) {
  if (m->n_bundles > RD_GCS_PG_MAX_BUNDLES || m->n_bundle_nodes != m->n_bundles)
    return fail(RD_EPROTO, NULL, 0, "%.200s", "pg: the GCS sent a malformed placement group");
  return 0;
}

void rd_gcs_pg_reset(rd_gcs_pg *pg) {
  rd_resources *b = pg->bundles;
  uint32_t *nodes = pg->bundle_nodes;
  size_t cap = pg->cap;
  memset(pg, 0, sizeof(*pg));
  pg->bundles = b;
  pg->bundle_nodes = nodes;
  pg->cap = cap;
}

/* Fill out, whose arrays have room for m's bundles (pg_msg_ok first). */
static int pg_from_msg(const Rd__Gcs__PgInfo *m, rd_gcs_pg *out) {
  rd_gcs_pg_reset(out);
  out->pg_id = m->pg_id;
  copy_str(out->name, sizeof(out->name), m->name);
  out->strategy = m->strategy;
  out->state = m->state;
  out->record_node = m->record_node;
  out->nbundles = m->n_bundles;
  for (size_t i = 0; i < m->n_bundles; i++) {
    if (rd__res_from_msg(m->bundles[i], &out->bundles[i]) != 0)
      return fail(RD_EPROTO, NULL, 0, "%.200s", "pg: the GCS sent a malformed bundle");
    out->bundle_nodes[i] = m->bundle_nodes[i];
  }
  copy_str(out->reason, sizeof(out->reason), m->reason);
  out->creator_job = m->creator_job;
  return 0;
}

int rd_gcs_pg_get(rd_gcs *g, uint64_t pg_id, const char *name, rd_gcs_pg *out) {
  if (!g || !out) return fail(RD_EINVAL, NULL, 0, "%.200s", "pg get: NULL argument");
  Rd__Gcs__PgKey req = RD__GCS__PG_KEY__INIT;
  req.pg_id = pg_id;
  req.name = (char *)(name ? name : "");
  ProtobufCMessage *rep;
  int rc = call(g, "/rd.gcs.Gcs/PgGet", &req.base, &rd__gcs__pg_info__descriptor, &rep, NULL, 0);
  if (rc) return rc;
  const Rd__Gcs__PgInfo *m = (Rd__Gcs__PgInfo *)rep;
  if (!(rc = pg_msg_ok(m)) && rd_gcs_pg_reserve(out, m->n_bundles) != 0)
    rc = fail(RD_ENOMEM, NULL, 0, "%.200s", "out of memory");
  if (!rc) rc = pg_from_msg(m, out);
  protobuf_c_message_free_unpacked(rep, NULL);
  return rc;
}

int rd_gcs_event_add(rd_gcs *g, const rd_gcs_cluster_event *e, uint64_t *event_id) {
  if (e->nfields > RD_GCS_EVENT_FIELDS_MAX) return fail(RD_EINVAL, NULL, 0, "%s", "event: too many fields");
  Rd__Gcs__ClusterEvent req = RD__GCS__CLUSTER_EVENT__INIT;
  Rd__Gcs__EventField f[RD_GCS_EVENT_FIELDS_MAX], *fp[RD_GCS_EVENT_FIELDS_MAX];
  for (size_t i = 0; i < e->nfields; i++) {
    rd__gcs__event_field__init(&f[i]);
    f[i].key = (char *)(e->fields[i].key ? e->fields[i].key : "");
    f[i].value = (char *)(e->fields[i].value ? e->fields[i].value : "");
    fp[i] = &f[i];
  }
  req.time_ms = e->time_ms;
  req.source = (char *)(e->source ? e->source : "");
  req.severity = (char *)(e->severity ? e->severity : "");
  req.message = (char *)(e->message ? e->message : "");
  req.node_index = e->node_index;
  req.pid = e->pid;
  req.fields = fp;
  req.n_fields = e->nfields;
  ProtobufCMessage *rep;
  int rc = call(g, "/rd.gcs.Gcs/EventAdd", &req.base, &rd__gcs__event_add_reply__descriptor, &rep, NULL, 0);
  if (rc) return rc;
  if (event_id) *event_id = ((Rd__Gcs__EventAddReply *)rep)->event_id;
  protobuf_c_message_free_unpacked(rep, NULL);
  return 0;
}

int rd_gcs_event_list(rd_gcs *g, uint64_t after, uint32_t limit, rd_gcs_events *out) {
  memset(out, 0, sizeof(*out));
  Rd__Gcs__EventListRequest req = RD__GCS__EVENT_LIST_REQUEST__INIT;
  req.after = after;
  req.limit = limit;
  ProtobufCMessage *rep;
  int rc = call(g, "/rd.gcs.Gcs/EventList", &req.base, &rd__gcs__event_list_reply__descriptor, &rep, NULL, 0);
  if (rc) return rc;
  Rd__Gcs__EventListReply *r = (Rd__Gcs__EventListReply *)rep;
  size_t nf = 0;
  for (size_t i = 0; i < r->n_events; i++) nf += r->events[i]->n_fields;
  /* one block: the events, then their fields */
  rd_gcs_cluster_event *v = r->n_events ? calloc(1, r->n_events * sizeof(*v) + nf * sizeof(rd_gcs_field)) : NULL;
  rd_gcs_field *f = v ? (rd_gcs_field *)(v + r->n_events) : NULL;
  if (r->n_events && !v) {
    protobuf_c_message_free_unpacked(rep, NULL);
    return fail(RD_ENOMEM, NULL, 0, "%.200s", "out of memory");
  }
  for (size_t i = 0, k = 0; i < r->n_events; i++) {
    const Rd__Gcs__ClusterEvent *e = r->events[i];
    v[i] = (rd_gcs_cluster_event){.event_id = e->event_id, .time_ms = e->time_ms, .source = e->source,
                                  .severity = e->severity, .message = e->message, .node_index = e->node_index,
                                  .pid = e->pid, .fields = f + k, .nfields = e->n_fields};
    for (size_t j = 0; j < e->n_fields; j++, k++) f[k] = (rd_gcs_field){e->fields[j]->key, e->fields[j]->value};
  }
  out->ev = v;
  out->n = r->n_events;
  out->first_kept = r->first_kept;
  out->last = r->last;
  out->omitted = r->omitted;
  out->priv = rep;
  return 0;
}

void rd_gcs_events_free(rd_gcs_events *l) {
  if (!l) return;
  free(l->ev);   /* and the fields after the events */
  if (l->priv) protobuf_c_message_free_unpacked(l->priv, NULL);
  memset(l, 0, sizeof(*l));
}

int rd_gcs_pg_list(rd_gcs *g, rd_gcs_pg **out, size_t *n) {
  *out = NULL;
  *n = 0;
  Rd__Gcs__Empty req = RD__GCS__EMPTY__INIT;
  ProtobufCMessage *rep;
  int rc = call(g, "/rd.gcs.Gcs/PgList", &req.base, &rd__gcs__pg_list_reply__descriptor, &rep, NULL, 0);
  if (rc) return rc;
  Rd__Gcs__PgListReply *r = (Rd__Gcs__PgListReply *)rep;
  size_t *nb = r->n_pgs ? malloc(r->n_pgs * sizeof(*nb)) : NULL;
  rd_gcs_pg *v = NULL;
  if (r->n_pgs && !nb) rc = fail(RD_ENOMEM, NULL, 0, "%.200s", "out of memory");
  for (size_t i = 0; !rc && i < r->n_pgs; i++)
    if (!(rc = pg_msg_ok(r->pgs[i]))) nb[i] = r->pgs[i]->n_bundles;
  if (!rc && r->n_pgs && !(v = rd_gcs_pg_block(r->n_pgs, nb))) rc = fail(RD_ENOMEM, NULL, 0, "%.200s", "out of memory");
  free(nb);
  for (size_t i = 0; !rc && i < r->n_pgs; i++) rc = pg_from_msg(r->pgs[i], &v[i]);
  size_t count = r->n_pgs;
  protobuf_c_message_free_unpacked(rep, NULL);
  if (rc) {
    free(v);
    return rc;
  }
  *out = v;
  *n = count;
  return 0;
}

/* ---- pub/sub ---- */

enum { TAG_START = 1, TAG_MSG, TAG_STATUS };

/* One Subscribe stream until it ends; 0 when it ended after going live. */
static int sub_stream(gcs_subscription *s, int wait_ready) {
  rd_gcs *g = s->g;
  grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
  grpc_call *c = grpc_channel_create_call(g->ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
                                          grpc_slice_from_static_string("/rd.gcs.Gcs/Subscribe"), NULL,
                                          gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
  pthread_mutex_lock(&g->mu);
  if (g->closing) grpc_call_cancel(c, NULL);
  s->call = c;
  pthread_mutex_unlock(&g->mu);

  Rd__Gcs__Empty req = RD__GCS__EMPTY__INIT;
  grpc_byte_buffer *send = rd__rpc_pack(&req.base), *recv = NULL;
  grpc_metadata md;
  rd__rpc_token_md(&md, g->token);
  grpc_metadata_array init_md, trailers;
  grpc_metadata_array_init(&init_md);
  grpc_metadata_array_init(&trailers);
  grpc_status_code st = GRPC_STATUS_UNKNOWN;
  grpc_slice details = grpc_empty_slice();
  grpc_op ops[4];
  rd__rpc_client_open_ops(ops, &md, wait_ready ? RD_RPC_WAIT_READY : 0, send, &init_md);
  int pending = 0, live = 0;
  if (grpc_call_start_batch(c, ops, 4, (void *)(intptr_t)TAG_START, NULL) == GRPC_CALL_OK) pending++;
  memset(ops, 0, sizeof(ops));
  ops[0].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[0].data.recv_status_on_client.trailing_metadata = &trailers;
  ops[0].data.recv_status_on_client.status = &st;
  ops[0].data.recv_status_on_client.status_details = &details;
  if (grpc_call_start_batch(c, ops, 1, (void *)(intptr_t)TAG_STATUS, NULL) == GRPC_CALL_OK) pending++;
  while (pending) {
    grpc_event ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    pending--;
    intptr_t tag = (intptr_t)ev.tag;
    int rearm = 0;
    if (tag == TAG_START && ev.success) {
      live = 1;
      pthread_mutex_lock(&g->mu);
      s->state = 1;
      pthread_cond_broadcast(&g->cv);
      pthread_mutex_unlock(&g->mu);
      rearm = 1;
    } else if (tag == TAG_MSG && ev.success && recv) {
      Rd__Gcs__Event *m = (Rd__Gcs__Event *)rd__rpc_unpack(&rd__gcs__event__descriptor, recv, RD_GCS_MSG_MAX);
      grpc_byte_buffer_destroy(recv);
      recv = NULL;
      if (m) {
        rd_gcs_event e = {0};
        e.kind = m->kind;
        e.node_index = m->node_index;
        e.actor_id = m->actor_id;
        e.actor_state = m->actor_state;
        e.view_version = m->view_version;
        copy_str(e.reason, sizeof(e.reason), m->reason);
        protobuf_c_message_free_unpacked(&m->base, NULL);
        s->cb(s->arg, &e);
      }
      rearm = 1;
    }
    if (rearm) {
      memset(ops, 0, sizeof(ops));
      ops[0].op = GRPC_OP_RECV_MESSAGE;
      ops[0].data.recv_message.recv_message = &recv;
      if (grpc_call_start_batch(c, ops, 1, (void *)(intptr_t)TAG_MSG, NULL) == GRPC_CALL_OK) pending++;
    }
  }
  char why[256];
  int rc = rd__rpc_call_result(st, details, &trailers, why, sizeof(why));
  if (!live) {
    pthread_mutex_lock(&g->mu);
    snprintf(s->err, sizeof(s->err), "subscribe: %.230s", why);
    s->state = rc ? rc : RD_EPROTO;
    s->call = NULL;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
  } else {
    rd__log(RD_LOG_INFO, "gcs client: subscription ended (%s)", rc ? why : "ok");
    pthread_mutex_lock(&g->mu);
    s->call = NULL;
    pthread_mutex_unlock(&g->mu);
  }
  if (recv) grpc_byte_buffer_destroy(recv);
  grpc_byte_buffer_destroy(send);
  grpc_slice_unref(details);
  grpc_metadata_array_destroy(&init_md);
  grpc_metadata_array_destroy(&trailers);
  rd__rpc_token_md_release(&md);
  grpc_call_unref(c);
  grpc_completion_queue_shutdown(cq);
  while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type != GRPC_QUEUE_SHUTDOWN) {
  }
  grpc_completion_queue_destroy(cq);
  return live ? 0 : (rc ? rc : RD_EPROTO);
}

static void *sub_thread(void *arg) {
  gcs_subscription *s = arg;
  rd_gcs *g = s->g;
  if (sub_stream(s, 0) != 0) return NULL;   /* the first attempt's error goes to the caller */
  for (;;) {
    /* The stream broke (GCS restarting, or we fell behind): back off, retry. */
    pthread_mutex_lock(&g->mu);
    if (!g->closing) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_nsec += 200 * 1000000L;
      ts.tv_sec += ts.tv_nsec / 1000000000L;
      ts.tv_nsec %= 1000000000L;
      pthread_cond_timedwait(&g->cv, &g->mu, &ts);
    }
    int closing = g->closing;
    pthread_mutex_unlock(&g->mu);
    if (closing) return NULL;
    sub_stream(s, 1);
  }
}

int rd_gcs_subscribe(rd_gcs *g, rd_gcs_event_cb cb, void *arg) {
  if (!g || !cb) return RD_EINVAL;
  gcs_subscription *s = calloc(1, sizeof(*s));
  if (!s) return RD_ENOMEM;
  s->g = g;
  s->cb = cb;
  s->arg = arg;
  if (pthread_create(&s->thread, NULL, sub_thread, s) != 0) {
    free(s);
    return RD_ESYS;
  }
  pthread_mutex_lock(&g->mu);
  while (s->state == 0) pthread_cond_wait(&g->cv, &g->mu);
  int rc = s->state < 0 ? s->state : 0;
  if (rc == 0) {
    s->next = g->subs;
    g->subs = s;
  } else {
    snprintf(last_err, sizeof(last_err), "%s", s->err);
  }
  pthread_mutex_unlock(&g->mu);
  if (rc) {
    pthread_join(s->thread, NULL);
    free(s);
  }
  return rc;
}

const char *rd_gcs_actor_state_name(int state) {
  static const char *const names[] = {"?", "alive", "restarting", "dead"};
  return state >= RD_GCS_ACTOR_ALIVE && state <= RD_GCS_ACTOR_DEAD ? names[state] : "?";
}

const char *rd_gcs_pg_state_name(int state) {
  static const char *const names[] = {"?", "pending", "created", "rescheduling", "removed"};
  return state >= RD_GCS_PG_PENDING && state <= RD_GCS_PG_REMOVED ? names[state] : "?";
}

const char *rd_gcs_pg_strategy_name(int strategy) {
  static const char *const names[] = {"PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"};
  return strategy >= 0 && strategy <= 3 ? names[strategy] : "?";
}
