/* src/client.c - the owner side of libraydist, linked into every driver and
 * worker: objects and their references, task submission, worker leases and
 * the I/O pump.
 *
 * The process that submits a task or puts an object owns it: it keeps the
 * value (small objects inline) or the store location, the reference counts and
 * the task's retry state.  Tasks whose arguments are not ready wait here, never
 * in a worker.  Ready tasks of one scheduling class (resources + priority) are
 * pushed straight to leased workers over socketpairs, pipelined when tasks are
 * short; the node daemon is only asked for leases and store operations.
 * Nothing here blocks while holding the socket of another thread's work: one
 * thread pumps at a time, the others wait on a condition variable. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <dirent.h>
#include <dlfcn.h>

#include "internal.h"
#include "logdedup.h"
#include "node_addr.h"
#include "watch.h"
#include "log.h"

extern char **environ;

rd__ctx rd__g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER,
                 .progress_cv = PTHREAD_COND_INITIALIZER, .wakefd = -1, .epfd = -1};
static __thread int in_progress_thread;   /* this thread is the progress thread */
#define G rd__g

static void obj_ready(rd__obj *o);
static int obj_is_ready(const rd__obj *o);
static void cq_fire(rd__obj *o, int items);
static void ret_refs_let_go(Rd__RetRef *const *refs, size_t n);
static int ret_refs_adopt(rd__obj *o, const Rd__Ret *r);
static void task_fail(rd__task *t, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void on_task_list_ask(const Rd__TaskListAsk *m);
static void class_dispatch(rd__sclass *c);
static void fail_everything(int err, const char *why);
static void wake_pumper(void);
static void flush_or_wake(void);
static void actor_dispatch(rd__actor *a);
static void actor_conn_lost(rd__lease *l, const char *why);
static rd__actor *actor_get(uint64_t id, int create);

/* ------------------------------------------------------------- blobs */

static rd__blob *blob_new(const void *data, size_t n) {
  rd__blob *b = malloc(sizeof(*b) + n + 1);
  if (!b) return NULL;
  b->refs = 1;
  b->size = n;
  if (data && n) memcpy(b->data, data, n);
  b->data[n] = 0;
  return b;
}

static void blob_unref(rd__blob *b) {
  if (b && --b->refs == 0) free(b);
}

static rd__blob *blob_printf(const char *fmt, va_list ap) {
  char buf[2048];
  vsnprintf(buf, sizeof(buf), fmt, ap);
  return blob_new(buf, strlen(buf));
}

/* ------------------------------------------------------------ objects */

static rd__obj *obj_get(uint64_t id) { return rd__u64map_get(&G.objs, id); }

/* A borrowed ref to a small object that is ready when its task is sent
 * travels with its value up to this size, saving the task a round trip; a
 * task handed many refs reads only those it wants, so not larger ones. */
#define BORROW_INLINE_MAX 1024
/* refs in one rd_arg_borrow_refs (8-9 bytes each in the task message) */
#define BORROW_LIST_MAX (4 << 20)

/* An argument that must be ready before its task runs (not a borrowed ref). */
static int targ_dep(const rd__targ *a) { return a->by_ref && !a->borrow; }

static rd__obj *obj_new(uint64_t id, int state) {
  if (rd__u64map_reserve(&G.objs, G.objs.count + 1) != 0) return NULL;
  rd__obj *o = calloc(1, sizeof(*o));
  if (!o) return NULL;
  o->id = id;
  o->state = state;
  o->refs = 1;
  o->node = G.node_index;   /* puts live here; a remote result says where it lives */
  rd__u64map_put(&G.objs, id, o);
  return o;
}

static void queue_release(uint64_t id, int del, uint32_t node);
static void inner_drop(uint64_t *ids, uint32_t n);

/* Drop the object when nobody references or needs it any more. */
static void lineage_drop(rd__task *t);

static void stream_abandon(rd__stream *st);
static void stream_gen_gone(rd__stream *st);

static void borrow_tell(rd__serve *s, int type, uint64_t oid);
static int refs_live(const char *who, const rd_ref *refs, size_t n);

/* Someone here still needs o: a reference, a task, a borrower's wait or hold. */
static int obj_needed(const rd__obj *o) {
  return o->refs > 0 || o->uses > 0 || o->ndeps > 0 || o->nbwait > 0 || o->nholds > 0;
}

static void obj_maybe_free(rd__obj *o) {
  if (obj_needed(o)) return;
  if (o->stream) stream_abandon(o->stream);   /* nobody can take its items any more */
  if (o->watchers > 0 || (o->state == OBJ_PENDING && !o->borrowed)) return;
  rd__u64map_del(&G.objs, o->id);
  if (o->stream) stream_gen_gone(o->stream);
  if (o->borrowed) {
    /* a proxy: the object is its owner's to delete; an answer still on its
     * way finds nothing and is dropped */
    if (o->from) o->from->nborrows--;
    if (o->kept) borrow_tell(o->origin, RD__MSG_TYPE__MSG_BORROW_DROP, o->id);
    if (o->origin) o->origin->norigin--;
  } else {
    if (o->lineage) lineage_drop(o->lineage);
    if (o->state == OBJ_STORE || (o->state == OBJ_PUT_OPEN && !o->blob)) queue_release(o->id, 1, o->node);
    if (o->state == OBJ_PUT_OPEN && !o->blob) queue_release(o->id, 0, 0);   /* the creator's pin */
  }
  blob_unref(o->blob);
  free(o->deps);
  free(o->bwait);
  free(o->holds);
  uint64_t *inner = o->inner;
  uint32_t ninner = o->inner_held ? o->ninner : 0;
  free(o);
  inner_drop(inner, ninner);
}

/* Drop one reference this process holds on id (taken for a contained or
 * returned ref); the object goes when nothing else keeps it.  mu held. */
static void ref_drop(uint64_t id) {
  rd__obj *c = obj_get(id);
  if (c && c->refs > 0 && --c->refs == 0) obj_maybe_free(c);
}

/* The references a freed object held on the refs it contained: dropped
 * through a work list, not by recursion, so a chain of objects each
 * containing the next (a list 10^6 long) frees in constant stack. */
static uint64_t *drop_list;
static size_t ndrop, capdrop;
static int dropping;

static void inner_drop(uint64_t *ids, uint32_t n) {
  if (n && ndrop + n > capdrop) {
    size_t nc = capdrop ? capdrop : 256;
    while (nc < ndrop + n) nc *= 2;
    uint64_t *p = realloc(drop_list, nc * sizeof(*p));
    if (p) {
      drop_list = p;
      capdrop = nc;
    }
  }
  for (uint32_t i = 0; i < n; i++) {
    if (ndrop < capdrop) {
      drop_list[ndrop++] = ids[i];
      continue;
    }
    ref_drop(ids[i]);   /* no memory for the list: this one now, recursively */
  }
  free(ids);
  if (dropping) return;   /* the loop below, further up, takes them */
  dropping = 1;
  while (ndrop > 0) ref_drop(drop_list[--ndrop]);
  dropping = 0;
}

/* o contains the refs ids[0..n): recorded, not yet held.  -1 without memory. */
static int inner_set(rd__obj *o, const uint64_t *ids, size_t n) {
  if (n == 0) return 0;
  if (!(o->inner = malloc(n * sizeof(*ids)))) return -1;
  memcpy(o->inner, ids, n * sizeof(*ids));
  o->ninner = (uint32_t)n;
  return 0;
}

/* A proxy that contains refs must answer for them before it lends them on
 * or hands them out: it borrows each from its own lender, once, and holds
 * them while it lives.  0, or the first error (those taken are dropped
 * again, so a later call starts over). */
static int inner_take(rd__obj *o) {
  if (!o->borrowed || o->inner_held || o->ninner == 0) return 0;
  if (!o->origin) return RD_EOBJECT_LOST;
  for (uint32_t i = 0; i < o->ninner; i++) {
    int r = rd__borrow_ref(o->origin, o->inner[i], NULL);
    if (r != 0) {
      for (uint32_t k = 0; k < i; k++) ref_drop(o->inner[k]);
      return r;
    }
  }
  o->inner_held = 1;
  flush_or_wake();
  return 0;
}

/* Store pins to drop (del=0) and objects to delete (del=1) go to the daemon in
 * batches: one frame per flush instead of one per call. */
static uint64_t *pending_delete;
static uint32_t *pending_delete_node;   /* where each lives (cluster: deleted there too) */
static size_t npending_delete, cappending_delete;

static void queue_release(uint64_t id, int del, uint32_t node) {
  uint64_t **arr = del ? &pending_delete : &G.pending_release;
  size_t *n = del ? &npending_delete : &G.npending_release;
  size_t *cap = del ? &cappending_delete : &G.cappending_release;
  if (*n == *cap) {
    size_t nc = *cap ? *cap * 2 : 64;
    uint64_t *p = realloc(*arr, nc * sizeof(uint64_t));
    if (!p) return;
    *arr = p;
    if (del) {
      uint32_t *q = realloc(pending_delete_node, nc * sizeof(uint32_t));
      if (!q) return;
      pending_delete_node = q;
    }
    *cap = nc;
  }
  if (del) pending_delete_node[*n] = node;
  (*arr)[(*n)++] = id;
}

static void send_pending_releases(void) {
  if (G.dead) {
    G.npending_release = npending_delete = 0;
    return;
  }
  if (G.npending_release) {
    Rd__ObjIds m = RD__OBJ_IDS__INIT;
    m.n_object_ids = G.npending_release;
    m.object_ids = G.pending_release;
    rd__conn_send(&G.daemon, RD__MSG_TYPE__MSG_OBJ_RELEASE, &m.base, -1);
    G.npending_release = 0;
  }
  if (npending_delete) {
    Rd__ObjIds m = RD__OBJ_IDS__INIT;
    m.n_object_ids = npending_delete;
    m.object_ids = pending_delete;
    if (G.cluster) {
      m.n_nodes = npending_delete;
      m.nodes = pending_delete_node;
    }
    rd__conn_send(&G.daemon, RD__MSG_TYPE__MSG_OBJ_DELETE, &m.base, -1);
    npending_delete = 0;
  }
}

static void obj_set_failed(rd__obj *o, int err, rd__blob *msg) {
  o->state = OBJ_FAILED;
  o->err = err;
  blob_unref(o->blob);
  o->blob = msg;
  if (msg) msg->refs++;
}

/* ---------------------------------------------------------- classes */

static uint64_t class_hash(const rd_resources *r, const int *k, size_t nk, uint64_t pg, const char *sel,
                           const char *env, size_t env_len) {
  uint64_t h = rd__hash_bytes(RD_HASH_INIT, r, offsetof(rd_resources, custom));
  h = rd__hash_bytes(h, r->custom, (size_t)r->ncustom * sizeof(r->custom[0]));
  h = rd__hash_bytes(h, k, nk * sizeof(*k));
  h = rd__hash_bytes(h, &pg, sizeof(pg));
  if (env_len) h = rd__hash_bytes(h, env, env_len);
  return sel ? rd__hash_bytes(h, sel, strlen(sel) + 1) : h;
}

/* The class of tasks with these options and label selector alternatives
 * (label_sel_opt; NULL: none); env (canonical, env_len bytes) is taken
 * over: the class keeps it or it is freed. */
static rd__sclass *class_get(const rd_resources *r, int prio, const rd_task_opts *o, const char *sel, char *env,
                             size_t env_len) {
  int strategy = o ? o->strategy : 0, soft = o ? !!o->soft : 0;
  uint32_t node = o && strategy == RD_STRATEGY_NODE_AFFINITY ? o->node : 0;
  uint64_t pg = o ? o->placement_group.id : 0;
  int bundle = pg ? o->bundle_index : -1;
#define CLASS_IS(c)                                                                                        \
  ((c)->priority == prio && (c)->strategy == strategy && (c)->node == node && (c)->soft == soft &&        \
   (c)->pg_id == pg && (c)->bundle == bundle && !memcmp(&(c)->res, r, sizeof(*r)) && (c)->env_len == env_len && \
   (!env_len || !memcmp((c)->env, env, env_len)) && ((c)->sel ? sel && !strcmp((c)->sel, sel) : !sel))
  if (G.last_class && CLASS_IS(G.last_class)) {   /* the same as the last submit's: no hashing */
    free(env);
    return G.last_class;
  }
  int key[5] = {prio, strategy, (int)node, soft, bundle};
  uint64_t hash = class_hash(r, key, 5, pg, sel, env, env_len);
  for (rd__hlink *l = rd__htab_bucket(&G.ctab, hash); l; l = l->next) {
    rd__sclass *c = (rd__sclass *)l;
    if (l->hash == hash && CLASS_IS(c)) {
      free(env);
      return G.last_class = c;
    }
  }
#undef CLASS_IS
  rd__sclass *c = calloc(1, sizeof(*c));
  if (!c || (sel && !(c->sel = strdup(sel)))) {
    free(c);
    free(env);
    return NULL;
  }
  c->link.hash = hash;
  if (rd__htab_add(&G.ctab, &c->link) != 0) {
    free(c->sel);
    free(c);
    free(env);
    return NULL;
  }
  c->env = env;
  c->env_len = env_len;
  c->res = *r;
  c->priority = prio;
  c->strategy = strategy;
  c->node = node;
  c->soft = soft;
  c->pg_id = pg;
  c->bundle = bundle;
  c->next = G.classes;
  G.classes = c;
  return G.last_class = c;
}

static void class_free(rd__sclass *c) {
  free(c->env);
  free(c->sel);
  free(c);
}

/* Classes nothing has used for RD_CLASS_KEEP_NS are freed (a driver that
 * gives each task a selector, env set, resources or placement group of its
 * own would otherwise keep one per task).  It looks once a second at most,
 * after a class may have become unused (G.class_dirty: its last task,
 * lease or request went) and while unused ones wait out their time
 * (G.classes_unused).  Called from the pump, and from the progress thread
 * when it has nothing to pump: where no class is in use up the stack. */
#define RD_CLASS_KEEP_NS 5000000000ull
static void class_sweep(uint64_t now) {
  if (!G.class_dirty && !G.classes_unused) return;
  if (now - G.class_sweep_ns < 1000000000ull) return;
  G.class_sweep_ns = now;
  G.class_dirty = 0;
  G.classes_unused = 0;
  for (rd__sclass **pp = &G.classes; *pp;) {
    rd__sclass *c = *pp;
    if (c->ntasks || c->leases || c->req_id || c->qhead || c->delayed) {
      c->unused_ns = 0;
    } else if (!c->unused_ns || now - c->unused_ns < RD_CLASS_KEEP_NS) {
      if (!c->unused_ns) c->unused_ns = now;
      G.classes_unused++;
    } else {
      *pp = c->next;
      rd__htab_del(&G.ctab, &c->link);
      if (G.last_class == c) G.last_class = NULL;
      class_free(c);
      G.ost.changed = 1;   /* the report counts classes */
      continue;
    }
    pp = &c->next;
  }
}

/* G.leased: the classes holding a lease, which the pump's walks over
 * leases go through (there may be many more classes, each waiting). */
static void class_leased(rd__sclass *c, int on) {
  if (on) {
    c->lprev = NULL;
    c->lnext = G.leased;
    if (G.leased) G.leased->lprev = c;
    G.leased = c;
    return;
  }
  if (c->lprev) c->lprev->lnext = c->lnext;
  else G.leased = c->lnext;
  if (c->lnext) c->lnext->lprev = c->lprev;
  c->lprev = c->lnext = NULL;
}

/* Outstanding lease requests: G.reqs by id, and how many of each
 * priority (G.reqprio; more distinct priorities than it has room for
 * set G.reqprio_over until none is outstanding). */
#define RD_REQPRIO_N (sizeof(G.reqprio) / sizeof(G.reqprio[0]))
static void class_req_set(rd__sclass *c) {
  c->req_id = ++G.next_req;
  if (rd__u64map_reserve(&G.reqs, G.reqs.count + 1) == 0) rd__u64map_put(&G.reqs, c->req_id, c);
  G.nreq++;
  size_t free_slot = RD_REQPRIO_N;
  for (size_t i = 0; i < RD_REQPRIO_N; i++) {
    if (G.reqprio[i].n && G.reqprio[i].prio == c->priority) {
      G.reqprio[i].n++;
      return;
    }
    if (!G.reqprio[i].n && free_slot == RD_REQPRIO_N) free_slot = i;
  }
  if (free_slot == RD_REQPRIO_N) {
    G.reqprio_over = 1;
    return;
  }
  G.reqprio[free_slot].prio = c->priority;
  G.reqprio[free_slot].n = 1;
}

/* The class whose request req_id is, which no longer has one; NULL when
 * none has it (any more). */
static rd__sclass *class_req_done(uint64_t req_id) {
  rd__sclass *c = rd__u64map_del(&G.reqs, req_id);
  for (rd__sclass *x = c ? NULL : G.classes; x && !c; x = x->next)   /* not in G.reqs (out of memory) */
    if (x->req_id == req_id) c = x;
  if (!c) return NULL;
  c->req_id = 0;
  G.nreq--;
  G.class_dirty = 1;
  for (size_t i = 0; i < RD_REQPRIO_N; i++)
    if (G.reqprio[i].n && G.reqprio[i].prio == c->priority) {
      G.reqprio[i].n--;
      break;
    }
  if (!G.nreq) G.reqprio_over = 0;
  return c;
}

static void class_enqueue(rd__sclass *c, rd__task *t, int front) {
  t->next = NULL;
  t->queued_ns = rd__now_ns();
  if (front) {
    t->next = c->qhead;
    c->qhead = t;
    if (!c->qtail) c->qtail = t;
  } else {
    if (c->qtail) c->qtail->next = t;
    else c->qhead = t;
    c->qtail = t;
  }
  c->qlen++;
}

/* ------------------------------------------------------------- tasks */

static void stream_task_gone(rd__stream *st);

int rd__fnstats_add(rd__fnstats *t, const char *name, uint64_t ns, int failed) {
  const size_t max = sizeof(t->fn[0].name) - 1;
  rd__fnstat *f = NULL;
  if (t->n && !strncmp(t->fn[t->last].name, name, max)) f = &t->fn[t->last];
  for (size_t i = 0; !f && i < t->n; i++)
    if (!strncmp(t->fn[i].name, name, max)) f = &t->fn[t->last = i];
  if (!f) {
    if (t->n == RD_FNSTATS_MAX) return -1;
    f = &t->fn[t->last = t->n++];
    memset(f, 0, sizeof(*f));
    snprintf(f->name, sizeof(f->name), "%s", name);
  }
  f->buckets[rd__hist_bucket(ns)]++;
  f->sum_ns += ns;
  f->failed += failed != 0;
  return 0;
}

size_t rd__fnstats_pack(rd__fnstats *t, Rd__FuncStats *fs, Rd__FuncStats **fsp) {
  for (size_t i = 0; i < t->n; i++) {
    rd__func_stats__init(&fs[i]);
    fs[i].func = t->fn[i].name;
    fs[i].n_buckets = RD_HIST_BUCKETS;
    fs[i].buckets = t->fn[i].buckets;
    fs[i].sum_ns = t->fn[i].sum_ns;
    fs[i].failed = t->fn[i].failed;
    fsp[i] = &fs[i];
  }
  return t->n;
}

static void ost_report(uint64_t now, int force, int64_t *wait);

/* t no longer waits for a result: one live task less for the owner's report. */
static void task_unlive(rd__task *t) {
  t->settled = 1;
  if (G.ost.live) G.ost.live--;
  G.ost.changed = 1;
}

/* t's returns are set, or failed: its submit-to-result latency counts
 * once (a run again to rebuild a lost result is not counted again). */
static void task_settle(rd__task *t, int failed) {
  if (t->settled) return;
  uint64_t now = rd__now_ns(), ns = now > t->submit_ns ? now - t->submit_ns : 0;
  G.ost.buckets[rd__hist_bucket(ns)]++;
  G.ost.sum_ns += ns;
  if (failed) G.ost.failed++;
  else G.ost.done++;
  const char *func = t->func ? t->func : "";
  if (rd__fnstats_add(&G.ost.fns, func, ns, failed) != 0) {   /* 32 names since the last report: report now */
    int64_t unused = -1;
    G.ost.changed = 1;
    ost_report(now, 1, &unused);
    (void)rd__fnstats_add(&G.ost.fns, func, ns, failed);   /* if that failed too, only the totals count it */
  }
  task_unlive(t);
}

/* t failed for good (err, msg): kept for the next report, once. */
static void task_failure_note(const rd__task *t, int err, const rd__blob *msg) {
  if (t->settled) return;
  if (G.ost.nfails == RD_OST_FAILS_MAX) {
    G.ost.fails_dropped++;
    return;
  }
  rd__ost_fail *f = &G.ost.fails[G.ost.nfails++];
  f->task_id = t->task_id;
  f->ret_id = t->nret > 0 ? t->ret_ids[0] : 0;
  uint64_t now = rd__now_ns();
  f->age_ns = now > t->submit_ns ? now - t->submit_ns : 0;
  f->actor_id = t->actor ? t->actor->id : t->actor_id;
  f->parent_task = t->parent;
  f->parent_node = t->parent_node;
  f->parent_pid = t->parent_pid;
  f->status = err;
  f->attempt = t->attempt;
  f->worker_pid = t->ran_pid;   /* not t->lease: it may be returned (and freed) by now */
  f->node = t->ran_node;
  snprintf(f->func, sizeof(f->func), "%s", t->func ? t->func : "");
  snprintf(f->err, sizeof(f->err), "%s", msg ? (const char *)msg->data : rd_strerror(err));
}

static void task_free(rd__task *t) {
  if (t->cls && --t->cls->ntasks == 0) G.class_dirty = 1;
  if (!t->settled) task_unlive(t);   /* gone without a result (nothing waits for one) */
  if (t->stream) stream_task_gone(t->stream);
  for (int i = 0; i < t->nargs; i++) {
    for (size_t k = 0; k < t->args[i].nlist; k++) {
      rd__obj *o = obj_get(t->args[i].list[k]);
      if (o) {
        o->uses--;
        obj_maybe_free(o);
      }
    }
    if (!t->args[i].by_ref) continue;
    rd__obj *o = obj_get(t->args[i].oid);
    if (o) {
      o->uses--;
      obj_maybe_free(o);
    }
  }
  free(t);
}

/* Returns already made (a task run again to rebuild one of them) keep
 * their values. */
static void task_fail_returns(rd__task *t, int err, rd__blob *msg) {
  for (int i = 0; i < t->nret; i++) {
    rd__obj *o = obj_get(t->ret_ids[i]);
    if (!o || o->state != OBJ_PENDING) continue;
    obj_set_failed(o, err, msg);
    obj_ready(o);
  }
}

/* ---- lineage: finished tasks kept to rebuild results lost with a node ----
 *
 * A task's results in the store of another node die with that node.  The
 * owner keeps such a task (its function, options and arguments, whose
 * objects stay alive with it) for as long as one of those results is
 * referenced, within RAYDIST_MAX_LINEAGE_BYTES, and when a get finds the
 * result lost it runs the task again, within the task's max_retries,
 * rebuilding first the arguments lost with the same node. */

static void lineage_unlink(rd__task *t) {
  if (!t->lin_linked) return;
  if (t->lin_prev) t->lin_prev->lin_next = t->lin_next;
  else G.lineage = t->lin_next;
  if (t->lin_next) t->lin_next->lin_prev = t->lin_prev;
  t->lin_prev = t->lin_next = NULL;
  t->lin_linked = 0;
  G.lineage_bytes -= t->bytes;
  if (t->actor) t->actor->nlineage--;
}

static void lineage_link(rd__task *t) {
  t->lin_prev = NULL;
  t->lin_next = G.lineage;
  if (G.lineage) G.lineage->lin_prev = t;
  G.lineage = t;
  t->lin_linked = 1;
  G.lineage_bytes += t->bytes;
  if (t->actor) t->actor->nlineage++;
}

/* One of t's results no longer needs it. */
static void lineage_drop(rd__task *t) {
  if (--t->lineage_refs > 0) return;
  lineage_unlink(t);
  task_free(t);
}

/* An actor call's max_task_retries: its own (rd_task_opts), else its
 * actor's (-1: no limit; 0, the actor's default, keeps none: a call is run
 * again only where the program said its calls may be). */
static int call_retries(const rd__task *t) {
  return t->call_retries != RD_ACTOR_DEFAULT ? t->call_retries : t->actor->max_task_retries;
}

/* Whether t may run once more (a failure retried, results rebuilt, a call
 * in flight when its actor died re-sent): within its max_retries, or for an
 * actor call within its call_retries. */
static int may_run_again(const rd__task *t) {
  if (!t->actor) return t->retries_left > 0;
  int m = call_retries(t);
  return m < 0 || t->attempt < m;
}

/* t is about to run once more: one of the retries may_run_again allowed. */
static void spend_retry(rd__task *t) {
  if (!t->actor) t->retries_left--;
  t->attempt++;
}

/* How many runs t may have in all, for a log line or message: its
 * max_retries + 1, or its call_retries + 1 ("unlimited"). */
static const char *runs_allowed(const rd__task *t, char *buf, size_t len) {
  int of = t->actor ? call_retries(t) : t->max_retries;
  if (of < 0) return "unlimited";
  snprintf(buf, len, "%d", of + 1);
  return buf;
}

/* Whether t may be kept to rebuild results a reply put on node. */
static int lineage_wanted(const rd__task *t, uint32_t node) {
  return G.cluster && node && node != G.node_index && may_run_again(t) &&
         G.lineage_bytes + t->bytes <= G.lineage_max;
}

static void task_make_ready(rd__task *t);

/* t waits for a until it is ready.  0, or -1 out of memory. */
static int obj_add_dep(rd__obj *a, rd__task *t) {
  if (a->ndeps == a->capdeps) {
    rd__task **p = realloc(a->deps, (size_t)(a->capdeps + 4) * sizeof(*p));
    if (!p) return -1;
    a->deps = p;
    a->capdeps += 4;
  }
  a->deps[a->ndeps++] = t;
  t->deps_pending++;
  return 0;
}

/* t's store results were lost (with node lost, or UINT32_MAX when only
 * they were): run it again, after its arguments lost with the same node are
 * rebuilt.  1: on its way, 0: no retries left. */
static int lineage_rerun(rd__task *t, uint32_t lost, int depth);

/* Puts tasks (a list, in order) back at the front of a queue (a class's or
 * an actor's): the cost of the list, not of the queue (a task handed back
 * unrun comes alone, possibly ahead of thousands). */
static void queue_put_front(rd__task **qhead, rd__task **qtail, size_t *qlen, rd__task *head) {
  if (!head) return;
  rd__task *last = head;
  size_t n = 1;
  for (; last->next; last = last->next) n++;
  last->next = *qhead;
  if (!*qhead) *qtail = last;
  *qhead = head;
  *qlen += n;
}

/* Actor calls (a list, in order) go back ahead of the calls of a not sent
 * yet. */
static void actor_requeue_front(rd__actor *a, rd__task *head) {
  queue_put_front(&a->qhead, &a->qtail, &a->qlen, head);
}

/* t goes back to its queue once its arguments are ready, rebuilding first
 * those lost with node lost (depth: how deep in a chain of rebuilds). */
static void lineage_requeue(rd__task *t, uint32_t lost, int depth) {
  t->lease = NULL;
  t->next = NULL;
  t->deps_pending = 0;
  if (t->actor) actor_requeue_front(t->actor, t);
  for (int i = 0; i < t->nargs; i++) {
    if (!targ_dep(&t->args[i])) continue;
    rd__obj *a = obj_get(t->args[i].oid);
    if (!a) continue;
    if (a->state == OBJ_STORE && a->node == lost && a->lineage) (void)lineage_rerun(a->lineage, lost, depth + 1);
    if (!obj_is_ready(a)) (void)obj_add_dep(a, t);   /* out of memory: runs now, fails on it clearly */
  }
  if (!t->deps_pending) task_make_ready(t);
}

static int lineage_rerun(rd__task *t, uint32_t lost, int depth) {
  if (!may_run_again(t) || depth > 64) return 0;
  for (int i = 0; i < t->nret; i++) {   /* its results wait for the new run */
    rd__obj *o = obj_get(t->ret_ids[i]);
    if (!o || o->lineage != t) continue;
    o->lineage = NULL;
    o->state = OBJ_PENDING;
    o->node = 0;
    t->lineage_refs--;
  }
  lineage_unlink(t);
  spend_retry(t);
  t->cancelled = 0;
  char of[16];
  rd__log(RD_LOG_WARN, "rebuilding the results of %s '%s' lost with %s%u: running it again (attempt %d of %s)",
          t->actor ? "actor call" : "task", t->func, lost == UINT32_MAX ? "the store of node " : "node ",
          lost == UINT32_MAX ? 0 : lost, t->attempt + 1, runs_allowed(t, of, sizeof(of)));
  lineage_requeue(t, lost, depth);
  return 1;
}

/* Node `dead` died: the kept tasks whose results lived only there run again
 * now (within their retries), so rd_wait sees those results pending until
 * they are back and rd_get does not find them lost first.  A rerun may
 * unlink other kept tasks (arguments rebuilt with it), so the walk starts
 * over after each. */
static void lineage_node_dead(uint32_t dead) {
  if (!dead) return;
  for (int again = 1; again;) {
    again = 0;
    for (rd__task *t = G.lineage; t && !again; t = t->lin_next) {
      int lost = 0;
      for (int i = 0; i < t->nret && !lost; i++) {
        rd__obj *o = obj_get(t->ret_ids[i]);
        lost = o && o->lineage == t && o->state == OBJ_STORE && o->node == dead;
      }
      if (lost && lineage_rerun(t, dead, 0)) again = 1;
    }
  }
}

/* t failed before it ran because its argument lost_arg was lost with its
 * node (or its store): when lineage can rebuild it (and the other
 * arguments lost with it), t waits for them and runs then, without using a
 * retry of its own.  1 when so. */
static int lineage_arg_lost(rd__task *t, int status, uint64_t lost_arg) {
  if ((status != RD_ENODE_DIED && status != RD_EOBJECT_LOST) || !lost_arg) return 0;
  rd__obj *a = obj_get(lost_arg);
  int mine = 0;
  for (int i = 0; i < t->nargs; i++) mine |= targ_dep(&t->args[i]) && t->args[i].oid == lost_arg;
  if (!mine || !a) return 0;
  /* already rebuilt, or being rebuilt, since t was sent (its node's death
   * was heard first, lineage_node_dead): t runs again with it */
  if (a->state == OBJ_PENDING || (a->state == OBJ_STORE && a->ready_ns > t->pushed_ns)) {
    rd__log(RD_LOG_WARN, "%s '%s' runs again with its argument %llx, rebuilt since it was sent",
            t->actor ? "actor call" : "task", t->func, (unsigned long long)lost_arg);
    lineage_requeue(t, UINT32_MAX, 0);
    return 1;
  }
  if (a->state != OBJ_STORE || !a->lineage) return 0;
  uint32_t lost = status == RD_ENODE_DIED ? a->node : UINT32_MAX;
  if (!lineage_rerun(a->lineage, lost, 0)) return 0;
  rd__log(RD_LOG_WARN, "%s '%s' waits for its argument %llx, lost with %s and being rebuilt",
          t->actor ? "actor call" : "task", t->func, (unsigned long long)lost_arg,
          lost == UINT32_MAX ? "its store" : "its node");
  lineage_requeue(t, lost, 0);
  return 1;
}

static void task_fail(rd__task *t, int err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  rd__blob *msg = blob_printf(fmt, ap);
  va_end(ap);
  task_fail_returns(t, err, msg);
  task_failure_note(t, err, msg);
  blob_unref(msg);
  task_settle(t, 1);
  task_free(t);
}

/* All arguments are ready: fail fast on a failed argument, else queue. */
static void task_make_ready(rd__task *t) {
  if (t->actor) {   /* already queued in call order */
    actor_dispatch(t->actor);
    return;
  }
  for (int i = 0; i < t->nargs; i++) {
    if (!targ_dep(&t->args[i])) continue;
    rd__obj *o = obj_get(t->args[i].oid);
    if (o && o->state == OBJ_FAILED) {
      task_fail(t, o->err, "argument %d of '%s' failed: %s", i, t->func,
                o->blob ? (const char *)o->blob->data : rd_strerror(o->err));
      return;
    }
  }
  class_enqueue(t->cls, t, 0);
  class_dispatch(t->cls);
}

/* ---- borrowed refs (rd_arg_borrow) ----
 *
 * A task given a ref itself, not its value, resolves it by asking the
 * process it came from (MSG_BORROW_GET on the lease or actor socket): the
 * owner, or a borrower that passed it on and asks its own sender in turn.
 * The answer (MSG_BORROW_REPLY) comes once the object is ready: its bytes,
 * where it is stored, or why it failed.  The sender keeps the object while
 * the task is pending, as for any argument. */

/* What the ready object o is, in the fields a BorrowReply and a RetRef
 * share: its value (pointing into o), its store object and node, or its
 * failure (code and message). */
static void obj_describe(const rd__obj *o, int32_t *status, char **error, ProtobufCBinaryData *data,
                         protobuf_c_boolean *in_store, uint32_t *node) {
  if (o->state == OBJ_INLINE) {
    data->data = o->blob->data;
    data->len = o->blob->size;
  } else if (o->state == OBJ_STORE) {
    *in_store = 1;
    *node = o->node;
  } else {
    *status = o->err ? o->err : RD_EOBJECT_LOST;
    *error = o->blob ? (char *)o->blob->data : (char *)rd_strerror(*status);
  }
}

static void borrow_answer(rd__lease *l, rd__obj *o, uint64_t oid) {
  Rd__BorrowReply m = RD__BORROW_REPLY__INIT;
  char msg[300];
  m.object_id = oid;
  int ir = o && o->state != OBJ_FAILED ? inner_take(o) : 0;
  if (ir != 0) {
    snprintf(msg, sizeof(msg), "borrowed object %llx: the refs it contains cannot be borrowed here: %s",
             (unsigned long long)oid, rd_strerror(ir));
    m.status = ir;
    m.error = msg;
  } else if (!o) {
    snprintf(msg, sizeof(msg),
             "borrowed object %llx is no longer held by the process that passed it (a borrowed ref is valid "
             "while the task it was passed to runs)", (unsigned long long)oid);
    m.status = RD_EOBJECT_LOST;
    m.error = msg;
  } else {
    obj_describe(o, &m.status, &m.error, &m.data, &m.in_store, &m.node);
  }
  if (m.status == 0 && o) {
    m.n_inner_ids = o->ninner;
    m.inner_ids = o->inner;
  }
  (void)rd__conn_send(&l->conn, RD__MSG_TYPE__MSG_BORROW_REPLY, &m.base, -1);
}

/* Appends l to an object's list of connections (its borrow waits or holds);
 * -1 without memory. */
static int lease_list_push(rd__lease ***list, int *n, int *cap, rd__lease *l) {
  if (*n == *cap) {
    int nc = *cap ? 2 * *cap : 4;
    rd__lease **p = realloc(*list, (size_t)nc * sizeof(*p));
    if (!p) return -1;
    *list = p;
    *cap = nc;
  }
  (*list)[(*n)++] = l;
  return 0;
}

/* A worker of lease l asks for a borrowed object: answered now when it is
 * ready (or unknown here), else once it is (obj_ready). */
static void on_borrow_get(rd__lease *l, uint64_t oid) {
  rd__obj *o = obj_get(oid);
  if (!o || obj_is_ready(o)) {
    borrow_answer(l, o, oid);
    return;
  }
  if (lease_list_push(&o->bwait, &o->nbwait, &o->capbwait, l) == 0) {
    l->nbw++;
    return;
  }
  Rd__BorrowReply m = RD__BORROW_REPLY__INIT;
  m.object_id = oid;
  m.status = RD_ENOMEM;
  m.error = (char *)"out of memory recording a wait for a borrowed object";
  (void)rd__conn_send(&l->conn, RD__MSG_TYPE__MSG_BORROW_REPLY, &m.base, -1);
}

/* Lease l goes away: its waits for borrowed objects go with it.  Rare (a
 * worker gone while a task of it waited), so a pass over the objects rather
 * than a list per lease that every answer would have to search. */
static void lease_drop_borrows(rd__lease *l) {
  for (uint64_t i = 0; l->nbw && G.objs.slots && i <= G.objs.mask; i++) {
    rd__obj *o = G.objs.slots[i].val;
    if (!o || !o->nbwait) continue;
    int k = 0;
    for (int j = 0; j < o->nbwait; j++)
      if (o->bwait[j] != l) o->bwait[k++] = o->bwait[j];
      else l->nbw--;
    o->nbwait = k;
  }
}

/* Answer the borrowers waiting for o, which just became ready. */
static void borrow_answer_waiters(rd__obj *o) {
  rd__lease **bw = o->bwait;
  int n = o->nbwait;
  o->bwait = NULL;
  o->nbwait = o->capbwait = 0;
  for (int i = 0; i < n; i++) {
    borrow_answer(bw[i], o, o->id);
    bw[i]->nbw--;
  }
  free(bw);
}

/* A proxy (in a worker) gets its answer. */
static void on_borrow_reply(rd__serve *s, const Rd__BorrowReply *m) {
  rd__obj *o = obj_get(m->object_id);
  if (!o || !o->borrowed || o->state != OBJ_PENDING || o->from != s) return;   /* released meanwhile */
  o->from = NULL;
  s->nborrows--;
  if (m->status != 0) {
    int err = m->status < 0 && m->status >= RD__ERR_MIN ? m->status : RD_EPROTO;
    const char *why = m->error && *m->error ? m->error : rd_strerror(err);
    rd__blob *b = blob_new(why, strlen(why));
    obj_set_failed(o, err, b);
    blob_unref(b);
  } else if (inner_set(o, m->inner_ids, m->n_inner_ids) != 0) {
    obj_set_failed(o, RD_ENOMEM, NULL);
  } else if (m->in_store) {
    o->state = OBJ_STORE;
    o->node = m->node;
  } else if ((o->blob = blob_new(m->data.data, m->data.len)) != NULL) {
    o->state = OBJ_INLINE;
  } else {
    obj_set_failed(o, RD_ENOMEM, NULL);
  }
  obj_ready(o);
}

/* s closed: proxies still waiting for it fail (their owner or the borrower
 * that passed them on is gone). */
static void serve_fail_borrows(rd__serve *s) {
  uint64_t *ids = malloc((size_t)s->nborrows * sizeof(*ids));
  size_t n = 0;
  for (uint64_t i = 0; ids && G.objs.slots && i <= G.objs.mask; i++) {
    rd__obj *o = G.objs.slots[i].val;
    if (o && o->borrowed && o->from == s && (int)n < s->nborrows) ids[n++] = o->id;
  }
  for (size_t i = 0; i < n; i++) {
    rd__obj *o = obj_get(ids[i]);
    char msg[300];
    snprintf(msg, sizeof(msg),
             "borrowed object %llx: the process that passed it went away before it was ready",
             (unsigned long long)ids[i]);
    rd__blob *b = blob_new(msg, strlen(msg));
    o->from = NULL;
    s->nborrows--;
    obj_set_failed(o, RD_EOBJECT_LOST, b);
    blob_unref(b);
    obj_ready(o);
  }
  free(ids);
}

int rd__borrow_ref(rd__serve *s, uint64_t oid, const Rd__Arg *a) {
  rd__obj *o = obj_get(oid);
  if (o) {   /* asked before (or its own object come back): one more reference */
    o->refs++;
    return 0;
  }
  if (a && a->ready) {   /* answered in advance by the task message */
    o = obj_new(oid, a->by_ref ? OBJ_STORE : OBJ_INLINE);
    if (!o) return RD_ENOMEM;
    o->borrowed = 1;
    o->origin = s;
    s->norigin++;
    if (a->by_ref) {
      o->node = a->node;
    } else if (!(o->blob = blob_new(a->data.data, a->data.len))) {
      rd__u64map_del(&G.objs, oid);
      s->norigin--;
      free(o);
      return RD_ENOMEM;
    }
    if (inner_set(o, a->inner_ids, a->n_inner_ids) != 0) {
      rd__u64map_del(&G.objs, oid);
      s->norigin--;
      blob_unref(o->blob);
      free(o);
      return RD_ENOMEM;
    }
    o->ready_ns = rd__now_ns();
    return 0;
  }
  if (s->closed) return RD_EOBJECT_LOST;
  o = obj_new(oid, OBJ_PENDING);
  if (!o) return RD_ENOMEM;
  o->borrowed = 1;
  o->from = s;
  o->origin = s;
  s->norigin++;
  s->nborrows++;
  Rd__BorrowGet m = RD__BORROW_GET__INIT;
  m.object_id = oid;
  if (rd__conn_send(&s->conn, RD__MSG_TYPE__MSG_BORROW_GET, &m.base, -1) != 0) s->closed = 1;
  return 0;   /* sent with the caller's rd__flush_soon, one flush for many refs */
}

/* ---- kept borrows: refs an actor holds past its call ----
 *
 * A borrow lasts while the task it was lent to runs, since the lender
 * keeps the object for that long.  An actor may keep a borrowed ref in its
 * state for later calls: when the call returns with the proxy still held,
 * the actor tells the connection the ref came on (MSG_BORROW_HOLD, before
 * the call's reply), and the lender keeps the object until MSG_BORROW_DROP,
 * or until that actor connection goes away.  A lender that is itself a
 * borrower keeps its proxy for the hold and passes it on to its own lender
 * (Ray's borrower chain).  Only actor connections carry holds: a leased
 * worker's socket ends with its lease, and its holds with it. */

static void borrow_tell(rd__serve *s, int type, uint64_t oid) {
  if (!s || s->closed) return;
  Rd__BorrowGet m = RD__BORROW_GET__INIT;
  m.object_id = oid;
  if (rd__conn_send(&s->conn, (Rd__MsgType)type, &m.base, -1) != 0) s->closed = 1;
  flush_or_wake();
}

/* The proxy o is needed past the task that brought it: tell its origin once. */
static void borrow_hold_up(rd__obj *o) {
  if (!o->borrowed || o->kept || !o->origin || o->origin->closed) return;
  o->kept = 1;
  borrow_tell(o->origin, RD__MSG_TYPE__MSG_BORROW_HOLD, o->id);
}

void rd__borrow_keep(uint64_t oid) {
  rd__obj *o = obj_get(oid);
  if (o && obj_needed(o)) borrow_hold_up(o);
}

/* The actor on l keeps oid past its call. */
static void on_borrow_hold(rd__lease *l, uint64_t oid) {
  rd__obj *o = obj_get(oid);
  if (!o) {   /* its call held it until the reply, which comes after this: a confused peer */
    rd__log(RD_LOG_WARN, "worker pid %d keeps object %llx, which is not held here", l->worker_pid,
            (unsigned long long)oid);
    return;
  }
  if (lease_list_push(&o->holds, &o->nholds, &o->capholds, l) != 0) {
    rd__log(RD_LOG_ERROR, "out of memory recording that worker pid %d keeps object %llx", l->worker_pid,
            (unsigned long long)oid);
    return;
  }
  l->nholds++;
  borrow_hold_up(o);   /* a borrower lending on: its own lender keeps it too */
}

/* One hold of l on o ends (o may go with it). */
static void hold_remove(rd__obj *o, rd__lease *l) {
  for (int j = 0; j < o->nholds; j++) {
    if (o->holds[j] != l) continue;
    o->holds[j] = o->holds[--o->nholds];
    l->nholds--;
    obj_maybe_free(o);
    return;
  }
}

static void on_borrow_drop(rd__lease *l, uint64_t oid) {
  rd__obj *o = obj_get(oid);
  if (o) hold_remove(o, l);
}

/* The actor connection l goes away: its holds go with it.  Rare, so a pass
 * over the objects (those it frees are collected first: freeing changes
 * the table). */
static void lease_drop_holds(rd__lease *l) {
  if (!l->nholds) return;
  uint64_t *ids = malloc(l->nholds * sizeof(*ids));
  size_t n = 0;
  for (uint64_t i = 0; ids && G.objs.slots && i <= G.objs.mask && n < l->nholds; i++) {
    rd__obj *o = G.objs.slots[i].val;
    for (int j = 0; o && j < o->nholds && n < l->nholds; j++)
      if (o->holds[j] == l) ids[n++] = o->id;
  }
  for (size_t i = 0; i < n; i++) {
    rd__obj *o = obj_get(ids[i]);
    if (o) hold_remove(o, l);
  }
  free(ids);
  l->nholds = 0;
}

/* The connection s (a caller's, in a worker) is being freed: proxies whose
 * refs came on it have nobody to tell any more. */
static void serve_forget_origin(rd__serve *s) {
  for (uint64_t i = 0; s->norigin && G.objs.slots && i <= G.objs.mask; i++) {
    rd__obj *o = G.objs.slots[i].val;
    if (!o || o->origin != s) continue;
    o->origin = NULL;
    o->kept = 0;
    s->norigin--;
  }
}

void rd__flush_soon(void) { flush_or_wake(); }

/* ---- streaming tasks (RD_STREAMING) ----
 *
 * The task yields items one by one (rd_yield); each comes to its owner as a
 * MSG_STREAM_ITEM on the lease or actor socket, made under the next of the
 * ids the owner granted.  The owner grants ids ahead as the caller takes
 * items (rd_stream_next), at most `window` beyond the last one taken: the
 * producer waits in rd_yield for the next grant (MSG_STREAM_GRANT), which is
 * the backpressure.  An attempt that dies is run again (max_retries) with
 * the items delivered so far skipped; the ids it was granted and did not
 * use are deleted from the store, in case it made them and died before
 * saying so. */

#define STREAM_WINDOW_DEFAULT 64
#define STREAM_AHEAD 64   /* ids granted ahead of the items come, without a window */

/* Items it may make in all, by the current grants policy. */
static uint64_t stream_target(const rd__stream *st) {
  if (st->abandoned || st->window < 0) return st->received + STREAM_AHEAD;
  return st->taken + (uint64_t)st->window;
}

/* n more ids, granted to the attempt; returns how many (fewer without memory). */
static size_t stream_add_ids(rd__stream *st, size_t n) {
  size_t k = 0;
  for (; k < n; k++)
    if (rd__idq_push(&st->grants, rd__oid_make(G.client_id, ++G.next_seq)) != 0) break;
  st->limit += k;
  return k;
}

/* Tell the running attempt about more ids, when the policy allows a batch
 * of them (or any, when it has none left). */
static void stream_grant(rd__stream *st) {
  rd__task *t = st->task;
  if (!t || !t->lease || t->cancelled) return;
  uint64_t target = stream_target(st);
  if (target <= st->limit) return;
  uint64_t batch = st->abandoned || st->window < 0 ? STREAM_AHEAD / 4 : (uint64_t)st->window / 4;
  if (target - st->limit < batch && st->limit > st->received) return;
  size_t n = stream_add_ids(st, (size_t)(target - st->limit));
  if (!n) return;
  Rd__StreamGrant m = RD__STREAM_GRANT__INIT;
  m.task_id = t->task_id;
  m.n_ids = n;
  m.ids = &st->grants.v[st->grants.len - n];
  (void)rd__conn_send(&t->lease->conn, RD__MSG_TYPE__MSG_STREAM_GRANT, &m.base, -1);
  flush_or_wake();
}

/* Ids granted and not used: with del, deleted from the store (an attempt
 * that died may have made one without saying so). */
static void stream_drop_grants(rd__stream *st, int del) {
  while (del && rd__idq_count(&st->grants)) queue_release(rd__idq_pop(&st->grants), 1, st->node);
  st->grants.head = st->grants.len = 0;
  st->limit = st->received;
}

/* An attempt of the task is being sent: where it starts, and its first ids. */
static void stream_attempt(rd__stream *st, Rd__Task *m) {
  stream_drop_grants(st, 1);
  uint64_t target = stream_target(st);
  size_t n = target > st->limit ? stream_add_ids(st, (size_t)(target - st->limit)) : 0;
  m->streaming = 1;
  m->stream_skip = st->received;
  m->n_return_ids = 0;
  m->return_ids = NULL;
  m->n_stream_ids = n;
  m->stream_ids = n ? &st->grants.v[st->grants.len - n] : NULL;
}

/* Items come and not taken, from items.v[first] on, are dropped: the
 * stream's reference to each goes (the item with it, when it was the last). */
static void stream_drop_items(rd__stream *st, size_t first) {
  for (size_t k = first; k < st->items.len; k++) {
    rd__obj *o = obj_get(st->items.v[k]);
    if (o && o->refs > 0) {
      o->refs--;
      obj_maybe_free(o);
    }
  }
  st->items.len = first;
}

/* The attempt died with its node, and is run again: the items that came
 * and are not taken yet, from the first one stored on that node (st->node,
 * where its store items were made) on, are lost with it; they are dropped
 * and made again by the next attempt, which skips only the ones before. */
static void stream_rewind(rd__stream *st) {
  size_t first = st->items.len;
  for (size_t k = st->items.head; k < st->items.len && first == st->items.len; k++) {
    rd__obj *o = obj_get(st->items.v[k]);
    if (o && o->state == OBJ_STORE && o->node == st->node) first = k;
  }
  size_t n = st->items.len - first;
  if (!n) return;
  rd__log(RD_LOG_WARN, "streaming task: %zu items not taken yet were lost with node %u; made again", n, st->node);
  stream_drop_items(st, first);
  st->received -= n;
  st->limit = st->received;
}

static void stream_free(rd__stream *st) {
  free(st->items.v);
  free(st->grants.v);
  free(st);
}

/* The stream object's last reference went: drop what waits to be taken,
 * and let the task run on to its end without waiting for takers. */
static void stream_abandon(rd__stream *st) {
  if (st->abandoned) return;
  st->abandoned = 1;
  stream_drop_items(st, st->items.head);
  stream_grant(st);
}

static void stream_gen_gone(rd__stream *st) {
  st->gen = 0;
  if (!st->task) stream_free(st);
}

static void stream_task_gone(rd__stream *st) {
  st->task = NULL;
  stream_drop_grants(st, 1);
  if (!st->gen) stream_free(st);
}

/* Item m->index of a streaming task in flight on l. */
static void on_stream_item(rd__lease *l, const Rd__StreamItem *m) {
  rd__task *t = l->inhead;
  while (t && t->task_id != m->task_id) t = t->next;
  rd__stream *st = t ? t->stream : NULL;
  if (!st || !m->ret || m->index != st->received || !rd__idq_count(&st->grants) ||
      st->grants.v[st->grants.head] != m->object_id) {
    rd__log(RD_LOG_ERROR, "worker pid %d sent a stream item out of turn (task %llu, item %llu)", l->worker_pid,
            (unsigned long long)m->task_id, (unsigned long long)m->index);
    l->broken = l->stop = 1;
    return;
  }
  (void)rd__idq_pop(&st->grants);
  st->received++;
  if (m->ret->in_store) st->node = m->node;
  rd__obj *gen = obj_get(st->gen);
  rd__obj *o = NULL;
  if (!t->cancelled && !st->abandoned && gen && gen->state == OBJ_PENDING) {
    o = obj_new(m->object_id, m->ret->in_store ? OBJ_STORE : OBJ_INLINE);
    if (o && m->ret->in_store) {
      o->node = m->node;
    } else if (o && !(o->blob = blob_new(m->ret->data.data, m->ret->data.len))) {
      rd__u64map_del(&G.objs, o->id);
      free(o);
      o = NULL;
    }
    if (o && ((m->ret->n_refs && ret_refs_adopt(o, m->ret) != 0) || rd__idq_push(&st->items, o->id) != 0)) {
      o->refs = 0;
      obj_maybe_free(o);   /* deletes it from the store, drops the refs it took */
      o = NULL;
    } else if (!o) {
      if (m->ret->in_store) queue_release(m->object_id, 1, m->node);
      ret_refs_let_go(m->ret->refs, m->ret->n_refs);
    }
    if (!o) {   /* an item lost here fails the stream: the caller must not see a gap */
      char msg[200];
      snprintf(msg, sizeof(msg), "out of memory keeping item %llu of streaming task '%s'",
               (unsigned long long)m->index, t->func);
      rd__blob *b = blob_new(msg, strlen(msg));
      obj_set_failed(gen, RD_ENOMEM, b);
      blob_unref(b);
      obj_ready(gen);
      st->abandoned = 1;
    } else {
      o->ready_ns = rd__now_ns();
      if (gen->cqw) cq_fire(gen, 1);   /* rd_cq_add_stream: an item to take */
      pthread_cond_broadcast(&G.cv);
    }
  } else {   /* nobody will take it */
    if (m->ret->in_store) queue_release(m->object_id, 1, m->node);
    ret_refs_let_go(m->ret->refs, m->ret->n_refs);
  }
  stream_grant(st);
}

static void obj_ready(rd__obj *o) {
  o->ready_ns = rd__now_ns();
  rd__task **deps = o->deps;
  int n = o->ndeps;
  o->deps = NULL;
  o->ndeps = o->capdeps = 0;
  /* a dependent that fails at once frees its arguments, o among them: hold
   * o until its dependents are through */
  o->uses++;
  for (int i = 0; i < n; i++)
    if (--deps[i]->deps_pending == 0) task_make_ready(deps[i]);
  free(deps);
  if (o->nbwait) borrow_answer_waiters(o);
  if (o->cqw) cq_fire(o, 0);
  o->uses--;
  obj_maybe_free(o);
  pthread_cond_broadcast(&G.cv);
}

/* The run-time slot of function func in class c, or NULL.  By its name's
 * pointer (the registered descriptor's, the same for each of its tasks),
 * never read: a name gone since is only a slot no task finds. */
static uint64_t *fn_time(rd__sclass *c, const char *func) {
  for (int i = 0; i < RD_CLASS_FN_TIMES; i++)
    if (c->fn_time[i].ewma_ns && c->fn_time[i].func == func) return &c->fn_time[i].ewma_ns;
  return NULL;
}

/* A task of func took svc ns: its function's average (a function not
 * timed yet takes the slot of the one first timed longest ago). */
static void fn_time_add(rd__sclass *c, const char *func, uint64_t svc) {
  uint64_t *e = fn_time(c, func);
  if (!e) {
    memmove(&c->fn_time[1], &c->fn_time[0], (RD_CLASS_FN_TIMES - 1) * sizeof(c->fn_time[0]));
    c->fn_time[0].func = func;
    c->fn_time[0].ewma_ns = 0;
    e = &c->fn_time[0].ewma_ns;
  }
  *e = *e ? (*e * 7 + svc) / 8 : svc + 1;
}

/* How many tasks of t's function to keep in flight on one worker: deep
 * pipelines for short tasks (throughput), one at a time for long ones and
 * for a function not timed yet (no head-of-line waits: the class is the
 * resource shape, so the function's own time counts, not the class's; a
 * slow function after fast ones of the same shape went 32 deep onto one
 * worker while CPUs were idle, until 2026-12-06). */
static int task_depth(rd__sclass *c, const rd__task *t) {
  if (t->stream) return 1;   /* may wait in rd_yield for its caller: only to an idle worker */
  const uint64_t *e = fn_time(c, t->func);
  if (!e || *e == 0) return 1;
  if (*e < 200000) return G.pipeline_depth;
  if (*e < 2000000) return 4;
  return 1;
}

static int lease_push(rd__lease *l, rd__task *t) {
  Rd__Task m = RD__TASK__INIT;
  Rd__Arg argv_in[8], *argp_in[8];
  Rd__Arg *argv = argv_in, **argp = argp_in;
  if (t->nargs > 8) {
    argv = malloc((size_t)t->nargs * sizeof(*argv));
    argp = malloc((size_t)t->nargs * sizeof(*argp));
    if (!argv || !argp) {
      free(argv);
      free(argp);
      return RD_ENOMEM;
    }
  }
  m.task_id = t->task_id;
  m.actor_id = t->actor_id;
  m.func = (char *)t->func;
  m.attempt = (uint32_t)t->attempt;
  m.max_calls = (uint32_t)t->max_calls;
  m.ns = (char *)t->ns;
  m.concurrency_group = (char *)t->cgroup;
  m.owner_node = G.node_index;
  m.owner_pid = G.pid;
  m.n_return_ids = (size_t)t->nret;
  m.return_ids = t->ret_ids;
  m.n_args = (size_t)t->nargs;
  m.args = argp;
  size_t inl = 0;   /* bytes of values inside the message so far (RD_MSG_REF_BUDGET) */
  for (int i = 0; i < t->nargs; i++) {
    rd__arg__init(&argv[i]);
    argp[i] = &argv[i];
    const rd__targ *a = &t->args[i];
    if (a->list) {   /* borrowed refs: the worker asks for those it takes */
      argv[i].borrow_list = 1;
      argv[i].n_borrow_ids = a->nlist;
      argv[i].borrow_ids = a->list;
      continue;
    }
    if (!a->by_ref) {
      argv[i].data.data = (uint8_t *)a->data;
      argv[i].data.len = a->size;
      inl += a->size;
      continue;
    }
    rd__obj *o = obj_get(a->oid);
    if (o && o->ninner && (o->state == OBJ_STORE || o->state == OBJ_INLINE)) {
      /* the refs it contains go with it, for the task to borrow; a proxy
       * that cannot answer for them still names them, and the task's
       * question about them gets the reason */
      int ir = inner_take(o);
      if (ir != 0)
        rd__log(RD_LOG_WARN, "task '%s': the refs in argument %d cannot be lent: %s", t->func, i, rd_strerror(ir));
      argv[i].n_inner_ids = o->ninner;
      argv[i].inner_ids = o->inner;
    }
    if (a->borrow) {   /* the ref itself; ready and cheap to say: with its answer */
      argv[i].borrow = 1;
      argv[i].object_id = a->oid;
      if (o && o->state == OBJ_STORE) {
        argv[i].ready = argv[i].by_ref = 1;
        argv[i].node = o->node;
      } else if (o && o->state == OBJ_INLINE && o->blob->size <= BORROW_INLINE_MAX) {
        argv[i].ready = 1;
        argv[i].data.data = o->blob->data;
        argv[i].data.len = o->blob->size;
        inl += o->blob->size;
      } else {
        argv[i].n_inner_ids = 0;   /* asked for: they come with the answer */
      }
      continue;
    }
    if (o && o->state == OBJ_INLINE) {   /* small: travels with the task, or, the message full, is asked for */
      if (inl <= RD_MSG_REF_BUDGET && o->blob->size <= RD_MSG_REF_BUDGET - inl) {
        argv[i].data.data = o->blob->data;
        argv[i].data.len = o->blob->size;
        inl += o->blob->size;
      } else {
        argv[i].fetch = 1;
        argv[i].object_id = a->oid;
      }
    } else {
      argv[i].by_ref = 1;
      argv[i].object_id = a->oid;
      argv[i].node = o ? o->node : 0;
    }
  }
  if (t->stream) stream_attempt(t->stream, &m);
  int r = rd__conn_send(&l->conn, RD__MSG_TYPE__MSG_TASK, &m.base, -1);
  if (argv != argv_in) {
    free(argv);
    free(argp);
  }
  if (r == RD_EINVAL) r = RD_E2BIG;   /* larger than a frame: its ready small arguments, together */
  if (r != 0) return r;
  t->lease = l;
  t->ran_pid = l->worker_pid;
  t->ran_node = l->node;
  t->next = NULL;
  if (l->intail) l->intail->next = t;
  else l->inhead = t;
  l->intail = t;
  l->ninflight++;
  G.ninflight++;
  l->nstream += t->stream != NULL;
  l->idle_since = 0;
  t->pushed_ns = rd__now_ns();
  G.ost.changed = 1;
  return 0;
}

static void lease_request(rd__sclass *c) {
  if (c->req_id || G.dead || c->ask.after_ns) return;   /* asked, or backing off (ask_backoff) */
  Rd__LeaseRequest m = RD__LEASE_REQUEST__INIT;
  rd__res_msg rm;
  rd__res_to_msg(&c->res, &rm);
  class_req_set(c);
  m.req_id = c->req_id;
  m.res = &rm.msg;
  m.priority = c->priority;
  m.strategy = c->strategy;
  m.node_affinity = c->node;
  m.soft = c->soft;
  m.pg_id = c->pg_id;
  m.bundle_index = c->bundle;
  m.label_selector = c->sel;
  char *env[RD_ENV_MAX_VARS];
  m.n_env = rd__env_split(c->env, c->env_len, env, RD_ENV_MAX_VARS);
  m.env = env;
  if (G.cluster && c->qhead && !c->pg_id) {
    /* data locality: the node holding the next task's first store argument
     * kept on another node (the owner does not know store objects' sizes) */
    for (int i = 0; i < c->qhead->nargs && !m.prefer_node; i++) {
      const rd__targ *a = &c->qhead->args[i];
      rd__obj *o = targ_dep(a) ? obj_get(a->oid) : NULL;
      if (o && o->state == OBJ_STORE && o->node && o->node != G.node_index) m.prefer_node = o->node;
    }
  }
  rd__conn_send(&G.daemon, RD__MSG_TYPE__MSG_LEASE_REQUEST, &m.base, -1);
}

/* Is another class of this process with a higher priority waiting for a
 * worker?  Then lower-priority leases drain instead of taking more work. */
static int higher_priority_waiting(const rd__sclass *c) {
  int any = G.reqprio_over;
  for (size_t i = 0; i < RD_REQPRIO_N && !any; i++) any = G.reqprio[i].n && G.reqprio[i].prio > c->priority;
  if (!any) return 0;
  for (rd__sclass *o = G.classes; o; o = o->next)
    if (o != c && o->priority > c->priority && o->qlen > 0 && o->req_id) return 1;
  return 0;
}

/* t could not be sent: it fails, saying why. */
static void push_failed(rd__task *t, int err) {
  if (err == RD_E2BIG)
    task_fail(t, RD_E2BIG, "'%s': its %d arguments make a task message larger than %u MiB (small ready values "
              "travel inside it): pass fewer at once, or nest their refs in one object (rd_put_refs)", t->func, t->nargs,
              RD_FRAME_MAX >> 20);
  else
    task_fail(t, err, "cannot encode task '%s': %s", t->func, rd_strerror(err));
}

static void class_dispatch(rd__sclass *c) {
  int yield = higher_priority_waiting(c);
  while (c->qhead && !yield) {
    rd__lease *best = NULL;
    /* a streaming task may wait in rd_yield for its caller as long as the
     * caller likes: it goes only to an idle worker, and nothing is queued
     * behind it there */
    int cap = task_depth(c, c->qhead);
    for (rd__lease *l = c->leases; l; l = l->next)
      if (!l->yielding && !l->retired && !l->gone_ns && !l->nstream && !l->blocked && l->ninflight < cap &&
          (!best || l->ninflight < best->ninflight))
        best = l;
    if (!best) break;
    rd__task *t = c->qhead;
    c->qhead = t->next;
    if (!c->qhead) c->qtail = NULL;
    c->qlen--;
    int pr = lease_push(best, t);
    if (pr != 0) push_failed(t, pr);
  }
  if (c->qlen > 0) lease_request(c);
}

static void lease_return_ex(rd__lease *l, int worker_lost);
static void lease_return(rd__lease *l) { lease_return_ex(l, 0); }

static void lease_return_ex(rd__lease *l, int worker_lost) {
  rd__sclass *c = l->cls;
  for (rd__lease **pp = &c->leases; *pp; pp = &(*pp)->next)
    if (*pp == l) { *pp = l->next; break; }
  if (--c->nleases == 0) {
    class_leased(c, 0);
    G.class_dirty = 1;
  }
  if (!G.dead) {
    Rd__LeaseReturn m = RD__LEASE_RETURN__INIT;
    m.lease_id = l->lease_id;
    m.worker_lost = worker_lost;
    rd__conn_send(&G.daemon, RD__MSG_TYPE__MSG_LEASE_RETURN, &m.base, -1);
  }
  lease_drop_borrows(l);
  lease_drop_holds(l);
  rd__conn_close(&l->conn);
  G.ninflight -= l->ninflight;
  free(l);
  G.conn_gen++;
}

/* Puts tasks (a list, in order) back at the front of c's queue. */
static void class_requeue_front(rd__sclass *c, rd__task *head) {
  queue_put_front(&c->qhead, &c->qtail, &c->qlen, head);
}

/* ------------------------------------------------- retries after OOM kills
 *
 * A task whose worker the node's memory monitor killed (RD_EOOM) is not at
 * fault the way a crash is: it may fit once fewer tasks run beside it.  So,
 * as in Ray, such a retry waits out a backoff (RAYDIST_TASK_OOM_RETRY_DELAY_MS,
 * default 1 s, doubled per kill up to 60 s) on its class's delayed list, and
 * while other tasks of this owner are running it does not use max_retries
 * but a budget of its own (RAYDIST_TASK_OOM_RETRIES, default 10, -1 no
 * limit).  A task killed while it was the owner's only one running cannot be
 * helped by waiting for the others, so that kill uses max_retries (with the
 * backoff); max_retries 0 still means no retry at all. */

#define RD__OOM_DELAY_MAX_NS 60000000000ull

/* Tasks of this owner in flight now, on every lease and actor connection:
 * G.ninflight, kept where theirs change.  A build with assertions (Debug:
 * the sanitizer suite) walks them and stops the process if the two differ. */
static int owner_inflight(void) {
#ifndef NDEBUG
  int n = 0;
  for (rd__sclass *c = G.leased; c; c = c->lnext)
    for (rd__lease *l = c->leases; l; l = l->next) n += l->ninflight;
  for (rd__actor *a = G.actors; a; a = a->next)
    if (a->conn) n += a->conn->ninflight;
  if (n != G.ninflight) {
    rd__log(RD_LOG_ERROR, "tasks in flight: %d counted, %d on the connections", G.ninflight, n);
    abort();
  }
#endif
  return G.ninflight;
}

/* The backoff before the retry after t's latest OOM kill. */
static uint64_t oom_delay(const rd__task *t) {
  uint64_t d = G.oom_delay_ns;
  for (int k = 1; k < t->oom_kills && d < RD__OOM_DELAY_MAX_NS; k++) d *= 2;
  return d < RD__OOM_DELAY_MAX_NS ? d : RD__OOM_DELAY_MAX_NS;
}

/* Delayed tasks of c whose time has come go back to the front of its queue,
 * earliest first.  Returns when the next one is due (0: none waits).  The
 * pump calls it each round and sleeps no longer than that. */
static uint64_t class_undelay(rd__sclass *c, uint64_t now) {
  rd__task *due = NULL;
  uint64_t next = 0;
  for (rd__task **pp = &c->delayed; *pp;) {
    rd__task *t = *pp;
    if (t->not_before_ns > now) {
      if (!next || t->not_before_ns < next) next = t->not_before_ns;
      pp = &t->next;
      continue;
    }
    *pp = t->next;
    rd__task **ins = &due;   /* keep due in the order they were due */
    while (*ins && (*ins)->not_before_ns <= t->not_before_ns) ins = &(*ins)->next;
    t->next = *ins;
    *ins = t;
  }
  for (rd__task *t = due; t; t = t->next) t->not_before_ns = 0;
  class_requeue_front(c, due);
  return next;
}

/* The word for the death of l's worker (why: "died", NULL for none) that
 * came on its socket before it broke: its own as it crashed ("died of
 * SIGSEGV (...)", rd__worker_crash_tell) or a remote worker's node's,
 * copied into buf (l is about to be freed); else why. */
static const char *death_word(const rd__lease *l, const char *why, char *buf, size_t len) {
  if (!why || l->lost_err != RD_EWORKER_DIED || !l->lost_why[0]) return why;
  snprintf(buf, len, "%s", l->lost_why);
  return buf;
}

/* The worker behind a lease is gone: retry or fail what it was running.
 * why NULL: killed for rd_cancel with force (lease_kill), or retired after a
 * task's max_calls (TaskReply.retire: it runs nothing pushed after), so the
 * others go back to the front of the queue, in order, without using a
 * retry, and the node kills the worker (a fresh one takes its place). */
static void lease_lost(rd__lease *l, const char *why) {
  rd__sclass *c = l->cls;
  rd__task *t = l->inhead;
  l->inhead = l->intail = NULL;
  G.ninflight -= l->ninflight;
  l->ninflight = l->nstream = 0;
  int pid = l->worker_pid;
  int l_err = l->lost_err;
  char l_why[400];
  snprintf(l_why, sizeof(l_why), "%s", l->lost_why);
  const int reported = why && l_err == RD_EWORKER_DIED && !l->lost_node;   /* the worker's own report */
  why = death_word(l, why, l_why, sizeof(l_why));
  if (why == l_why) l_err = 0;   /* taken as the word, not an error of its own */
  lease_return_ex(l, 1);
  /* for an OOM kill: this owner's other tasks in flight (this lease's are off it) */
  const int others = l_err == RD_EOOM ? owner_inflight() : 0;
  const uint64_t now = rd__now_ns();
  /* requeue in order at the front of the class queue */
  rd__task *retry_head = NULL, **rtail = &retry_head, **dtail = &c->delayed;
  while (*dtail) dtail = &(*dtail)->next;
  while (t) {
    rd__task *next = t->next;
    t->lease = NULL;
    /* killed by the memory monitor (see above): on its own budget while
     * other tasks of this owner run, else on max_retries */
    const int oom = why && l_err == RD_EOOM && t->max_retries != 0;
    const int own_budget = oom && others > 0 && (G.oom_retries < 0 || t->oom_kills < G.oom_retries);
    if (t->cancelled) {
      task_free(t);   /* its returns failed when it was cancelled */
    } else if (oom && (own_budget || t->retries_left > 0)) {
      if (!own_budget) t->retries_left--;
      t->oom_kills++;
      t->attempt++;
      const uint64_t d = oom_delay(t);
      rd__log(RD_LOG_WARN, "worker pid %d %s while running '%s'; retrying in %.1f s (OOM kill %d, %s)", pid, l_why,
              t->func, (double)d / 1e9, t->oom_kills,
              own_budget ? "other tasks were running: max_retries not used" : "it ran alone: one of max_retries");
      t->not_before_ns = now + d;
      t->next = NULL;
      G.any_delayed = 1;
      *dtail = t;   /* in the lease's order, after what waits already */
      dtail = &t->next;
    } else if (!why || t->retries_left > 0) {
      if (why) {
        if (t->stream && l_err == RD_ENODE_DIED) stream_rewind(t->stream);
        t->retries_left--;
        t->attempt++;
        /* its node's word ("node 3 died or its link broke") or its own ("was killed by ...") */
        rd__log(RD_LOG_WARN, "worker pid %d%s %s while running '%s'; retrying (attempt %d of %d)", pid,
                l_err == RD_ENODE_DIED ? ":" : "", l_err ? l_why : why, t->func, t->attempt + 1, t->max_retries + 1);
      }
      t->next = NULL;
      *rtail = t;
      rtail = &t->next;
    } else if (l_err == RD_EOOM && t->attempt > t->max_retries - t->retries_left) {
      task_fail(t, l_err, "%s: task '%s' (attempt %d: max_retries %d spent, and %d retries after OOM kills while "
                "other tasks ran, RAYDIST_TASK_OOM_RETRIES %d)", l_why, t->func, t->attempt + 1, t->max_retries,
                t->attempt - (t->max_retries - t->retries_left), G.oom_retries);
    } else if (l_err) {
      task_fail(t, l_err, "%s: task '%s' (attempt %d of %d)", l_why, t->func, t->attempt + 1, t->max_retries + 1);
    } else {
      task_fail(t, RD_EWORKER_DIED, "worker process (pid %d) %s while running task '%s' (attempt %d of %d)%s", pid,
                why, t->func, t->attempt + 1, t->max_retries + 1,
                reported ? "; its stack is on its stderr" : "");
    }
    t = next;
  }
  class_requeue_front(c, retry_head);
  class_dispatch(c);
}

/* ---- how a worker ended, from its node ----
 *
 * A worker killed from outside (SIGKILL: the kernel's OOM killer, a kill
 * -9) or ending without a report of its own (_exit, a sanitizer's exit)
 * leaves its lease's socket closed and nothing said.  Its node, its
 * parent, learns how it ended and says it (LeaseLost with RD_EWORKER_DIED:
 * "was killed by SIGKILL, most likely by the kernel's OOM killer ..."),
 * usually within a millisecond of the socket's close but after it; an
 * actor's process, to each caller the node gave a socket to it (LeaseLost
 * naming the actor and the pid).  So a lease or an actor connection whose
 * socket broke mid-call with no word yet waits for that word (gone_ns: it
 * takes no new call and is not polled), up to RD__GONE_WAIT_NS, before its
 * calls are retried or failed; one that never comes leaves "died". */
#define RD__GONE_WAIT_NS 2000000000ull

/* l's worker's end, as its node tells it: the first word stands (the
 * memory monitor's comes before its kill, a worker's own report before its
 * socket closes).  1 when l waited for it (gone_ns). */
static int lost_word(rd__lease *l, const Rd__LeaseLost *ll) {
  if (!l->lost_err) {
    l->lost_err = ll->status;
    l->lost_node = 1;
    snprintf(l->lost_why, sizeof(l->lost_why), "%s", ll->error ? ll->error : "");
  }
  return l->gone_ns != 0;
}

static void on_lease_lost(const Rd__LeaseLost *ll) {
  if (ll->status >= 0) return;
  if (ll->actor_id) {   /* an actor's process this one has a socket to */
    rd__actor *a = actor_get(ll->actor_id, 0);
    if (a && a->conn && a->conn->worker_pid == ll->worker_pid && lost_word(a->conn, ll))
      actor_conn_lost(a->conn, "died");
    return;
  }
  for (rd__sclass *c = G.classes; c; c = c->next)
    for (rd__lease *l = c->leases; l; l = l->next) {
      if (l->lease_id != ll->lease_id) continue;
      if (lost_word(l, ll)) lease_lost(l, "died");
      return;
    }
}

/* Lowers *wait (ms; -1: none yet) to when `due` (ns, after now) comes,
 * rounded up: the pump sleeps no longer than that. */
static void wait_until(int64_t *wait, uint64_t due, uint64_t now) {
  int64_t ms = (int64_t)((due - now) / 1000000) + 1;
  if (*wait < 0 || ms < *wait) *wait = ms;
}

/* Does l wait for its node's word past RD__GONE_WAIT_NS?  Then it ends as
 * "died" (1); else *wait_ms is lowered to when it is due. */
static int gone_due(rd__lease *l, uint64_t now, int64_t *wait_ms) {
  if (!l->gone_ns) return 0;
  if (now - l->gone_ns >= RD__GONE_WAIT_NS) {
    rd__log(RD_LOG_DEBUG, "worker pid %d: its node did not say how it ended within 2 s", l->worker_pid);
    if (l->actor) actor_conn_lost(l, "died");
    else lease_lost(l, "died");
    return 1;
  }
  wait_until(wait_ms, l->gone_ns + RD__GONE_WAIT_NS, now);
  return 0;
}

/* Leases and actor connections waiting for their node's word past
 * RD__GONE_WAIT_NS end as "died" (how many did); *wait_ms: until the next
 * is due (-1: none waits). */
static int leases_gone_due(uint64_t now, int64_t *wait_ms) {
  int ended = 0;
  *wait_ms = -1;
  if (!G.any_gone) return 0;
again:
  for (rd__sclass *c = G.leased; c; c = c->lnext)
    for (rd__lease *l = c->leases; l; l = l->next)
      if (gone_due(l, now, wait_ms)) {
        ended++;
        goto again;   /* the lists changed */
      }
  for (rd__actor *a = G.actors; a; a = a->next)
    if (a->conn && gone_due(a->conn, now, wait_ms)) {
      ended++;
      goto again;
    }
  G.any_gone = *wait_ms >= 0;   /* some still wait (their word, or another path, ends them) */
  return ended;
}

/* rd_cancel with force on a task in flight on l: the node kills the worker
 * (LeaseReturn with worker_lost); the cancelled tasks are dropped. */
static void lease_kill(rd__lease *l) { lease_lost(l, NULL); }

/* A streaming task ended well: its stream object says how many items came. */
static void stream_end(rd__task *t, const Rd__TaskReply *m) {
  rd__stream *st = t->stream;
  rd__obj *o = obj_get(st->gen);
  t->lease = NULL;
  stream_drop_grants(st, 0);   /* it ended cleanly: it made nothing under the ids it did not use */
  if (o && o->state == OBJ_PENDING) {
    uint64_t n = st->received;
    rd__blob *b = NULL;
    if (m->stream_items != n) {
      char msg[200];
      snprintf(msg, sizeof(msg), "streaming task '%s' says it yielded %llu items, but %llu came", t->func,
               (unsigned long long)m->stream_items, (unsigned long long)n);
      b = blob_new(msg, strlen(msg));
      obj_set_failed(o, RD_EPROTO, b);
      blob_unref(b);
    } else if ((b = blob_new(&n, sizeof(n))) != NULL) {
      o->state = OBJ_INLINE;
      o->blob = b;
    } else {
      obj_set_failed(o, RD_ENOMEM, NULL);
    }
    obj_ready(o);
  }
  task_settle(t, 0);
  task_free(t);
}

/* ---- refs returned inside a task's value (rd_return_refs) ----
 *
 * The worker hands each ref over at its reply: the caller's own objects
 * (lent to the task) come back as one more reference; the others come with
 * their value (a copy: values never change), their failure, or their store
 * object, of which the caller has become a co-owner in the store holding it
 * (the object goes when its maker and every co-owner have let go of it or
 * gone).  They are the return object's contained refs, held while it
 * lives. */

/* In a worker: o is a ref the connection s lent it (so the caller of a
 * task that came on s owns it, or borrows it in turn). */
static int lent_by(const rd__obj *o, const rd__serve *s) { return o->borrowed && o->origin == s; }

/* The caller's own object (an id of ours is, whatever the reply says). */
static int ret_ref_yours(const Rd__RetRef *x) { return x->yours || rd__oid_client(x->id) == G.client_id; }

/* A store object the reply made us a co-owner of: letting go of it drops
 * that co-ownership (never one of our own objects, whatever the worker says). */
static int ret_ref_co_owned(const Rd__RetRef *x) { return !ret_ref_yours(x) && x->in_store && x->status == 0; }

/* Handed-over store objects nobody takes (their return was dropped, the
 * task cancelled or run again, or adopting them failed): let go of where
 * they are. */
static void ret_refs_let_go(Rd__RetRef *const *refs, size_t n) {
  for (size_t k = 0; k < n; k++)
    if (ret_ref_co_owned(refs[k])) queue_release(refs[k]->id, 1, refs[k]->node);
}

/* One handed-over ref, as a reference of this process: 0, or RD_ENOMEM
 * (the ref then is not held, and a co-owned store object is let go of). */
static int ret_ref_take(const Rd__RetRef *x) {
  rd__obj *c = obj_get(x->id);
  if (c) {   /* ours (lent to the task), or handed over again while we hold it */
    c->refs++;
    if (ret_ref_co_owned(x)) queue_release(x->id, 1, x->node);   /* one co-ownership is enough */
    return 0;
  }
  int yours = ret_ref_yours(x), st = yours ? RD_EOBJECT_LOST : x->status;
  if (st == 0 && x->in_store) {
    if (!(c = obj_new(x->id, OBJ_STORE))) goto nomem;
    c->node = x->node;
  } else if (st == 0) {
    rd__blob *b = blob_new(x->data.data, x->data.len);
    if (!b || !(c = obj_new(x->id, OBJ_INLINE))) {
      blob_unref(b);
      return RD_ENOMEM;
    }
    c->blob = b;
  } else {
    if (!(c = obj_new(x->id, OBJ_PENDING))) return RD_ENOMEM;
    char msg[300];
    if (yours)
      snprintf(msg, sizeof(msg), "object %llx, returned to its owner by a task, was no longer held here",
               (unsigned long long)x->id);
    rd__blob *b = yours ? blob_new(msg, strlen(msg)) : blob_new(x->error ? x->error : "", x->error ? strlen(x->error) : 0);
    obj_set_failed(c, st < 0 && st >= RD__ERR_MIN ? st : RD_EPROTO, b);
    blob_unref(b);
  }
  c->ready_ns = rd__now_ns();
  return 0;
nomem:
  if (ret_ref_co_owned(x)) queue_release(x->id, 1, x->node);
  return RD_ENOMEM;
}

/* Return object o (pending) contains the refs r hands over: it holds them.
 * A rebuilt return drops those of its earlier run.  0, or RD_ENOMEM (o then
 * fails, and what was handed over goes). */
static int ret_refs_adopt(rd__obj *o, const Rd__Ret *r) {
  uint64_t *old = o->inner;
  uint32_t nold = o->inner_held ? o->ninner : 0;
  o->inner = NULL;
  o->ninner = 0;
  o->inner_held = 0;
  int rc = 0;
  size_t k = 0;
  if (r->n_refs && !(o->inner = malloc(r->n_refs * sizeof(*o->inner)))) rc = RD_ENOMEM;
  for (; rc == 0 && k < r->n_refs; k++) {
    if ((rc = ret_ref_take(r->refs[k])) == 0) o->inner[k] = r->refs[k]->id;
  }
  if (rc == 0) {
    o->ninner = (uint32_t)r->n_refs;
    o->inner_held = 1;
  } else {   /* undo: those taken, and the store objects not reached */
    for (size_t j = 0; j + 1 < k; j++) ref_drop(o->inner[j]);
    ret_refs_let_go(r->refs + k, r->n_refs - k);
    free(o->inner);
    o->inner = NULL;
  }
  for (uint32_t j = 0; j < nold; j++) ref_drop(old[j]);
  free(old);
  return rc;
}

int rd__ret_refs_hold(rd__serve *s, const char *api, const char *func, const rd_ref *refs, size_t n) {
  uint64_t *wait_ids = NULL;
  size_t nwait = 0;
  int r = 0;
  pthread_mutex_lock(&G.mu);
  for (size_t i = 0; i < n && r == 0; i++) {
    rd__obj *o = obj_get(refs[i].id);
    const char *bad = !o ? "is not a live reference of this process"
                      : o->stream ? "is a stream (a streaming task's ref)"
                      : o->state == OBJ_PUT_OPEN ? "is a put not sealed yet"
                      : o->ninner && !lent_by(o, s) ? "itself contains refs"
                      : NULL;
    if (bad) {
      rd__log(RD_LOG_WARN, "%s in '%s': ref %zu (%llx) %s", api, func, i, (unsigned long long)refs[i].id, bad);
      r = RD_EINVAL;
    }
  }
  if (r == 0 && n && !(wait_ids = malloc(n * sizeof(*wait_ids)))) r = RD_ENOMEM;
  for (size_t i = 0; i < n && r == 0; i++) {
    rd__obj *o = obj_get(refs[i].id);
    o->refs++;
    if (!lent_by(o, s) && !obj_is_ready(o)) wait_ids[nwait++] = o->id;
  }
  pthread_mutex_unlock(&G.mu);
  /* results of tasks this one submitted, and refs another process lent it,
   * are handed over once ready: this process answers for them only while
   * the task runs (the caller's own refs need no wait) */
  if (r == 0 && nwait) {
    int w = rd_wait((const rd_ref *)wait_ids, nwait, nwait, RD_TIMEOUT_INF, NULL);
    if (w < 0) {
      r = w;
      pthread_mutex_lock(&G.mu);
      for (size_t i = 0; i < n; i++) ref_drop(refs[i].id);
      pthread_mutex_unlock(&G.mu);
    }
  }
  free(wait_ids);
  return r;
}

/* A ref in the store that is not the caller's own (s: the task's
 * connection): the caller becomes its co-owner. */
static int ret_ref_in_store(const rd__obj *o, const rd__serve *s) {
  return o && !lent_by(o, s) && o->state == OBJ_STORE;
}

int rd__ret_refs_hand_over(rd__serve *s, uint32_t owner, uint64_t *const *ids, const size_t *n, int nret, char *err,
                           size_t errlen) {
  size_t total = 0, k = 0;
  for (int i = 0; i < nret; i++)
    for (size_t j = 0; j < n[i]; j++) total += ret_ref_in_store(obj_get(ids[i][j]), s);
  if (total == 0) return 0;
  uint64_t *hids = malloc(total * (sizeof(uint64_t) + sizeof(uint32_t)));
  if (!hids) {
    snprintf(err, errlen, "out of memory handing over %zu returned store objects", total);
    return RD_ENOMEM;
  }
  uint32_t *hnodes = (uint32_t *)(hids + total);
  for (int i = 0; i < nret; i++)
    for (size_t j = 0; j < n[i]; j++) {
      rd__obj *o = obj_get(ids[i][j]);
      if (!ret_ref_in_store(o, s)) continue;
      hids[k] = o->id;
      hnodes[k++] = o->node;
    }
  Rd__ObjHandover m = RD__OBJ_HANDOVER__INIT;
  m.req_id = ++G.next_req;
  m.owner = owner;
  m.n_object_ids = m.n_nodes = total;
  m.object_ids = hids;
  m.nodes = hnodes;
  ProtobufCMessage *rep = NULL;
  int r = rd__daemon_call(RD__MSG_TYPE__MSG_OBJ_HANDOVER, &m.base, m.req_id, RD__MSG_TYPE__MSG_OBJ_HANDOVER_REPLY,
                          &rep, -1);
  free(hids);
  if (r == 0) {
    Rd__ObjGetReply *gr = (Rd__ObjGetReply *)rep;
    r = gr->status;
    if (r != 0) snprintf(err, errlen, "handing returned refs over to the caller: %s", gr->error ? gr->error : "");
    protobuf_c_message_free_unpacked(rep, NULL);
  } else {
    snprintf(err, errlen, "handing returned refs over to the caller: %s", rd_strerror(r));
  }
  return r;
}

void rd__ret_refs_describe(rd__serve *s, const uint64_t *ids, size_t n, Rd__RetRef *out) {
  for (size_t i = 0; i < n; i++) {
    rd__obj *o = obj_get(ids[i]);
    Rd__RetRef *x = &out[i];
    rd__ret_ref__init(x);
    x->id = ids[i];
    if (o && lent_by(o, s)) {
      x->yours = 1;
    } else if (!o || !obj_is_ready(o)) {
      x->status = RD_EOBJECT_LOST;
      x->error = (char *)"the object was not ready when the task that returned it ended";
    } else {
      obj_describe(o, &x->status, &x->error, &x->data, &x->in_store, &x->node);
    }
  }
}

void rd__ret_refs_unhold(const uint64_t *ids, size_t n) {
  for (size_t i = 0; i < n; i++) ref_drop(ids[i]);
  if (npending_delete) flush_or_wake();
}

/* ---- the tasks finished well, until the node has them ----
 *
 * For `ray list tasks` (FINISHED rows, their start and end) and its
 * summary: the node keeps them (RAYDIST_TASK_HISTORY), as it keeps the
 * failures, so that they outlive this process (Ray keeps task events in its
 * GCS).  Each finished task waits here, in a ring of done_max, for the next
 * OwnerStats (ost_report, every 100 ms while tasks finish; at most
 * RD_OST_FINISHED_MAX a report, all at shutdown); the node's TaskListAsk
 * gets those not reported yet.  A ring full of unreported ones drops its
 * oldest (counted: OwnerStats.finished_dropped), so a process finishing
 * more than ~2,000 tasks a second reports a sample, as Ray drops task
 * events past its buffer: each row costs a few µs to pack and unpack (at
 * 1000 a report the single-client microbench lost 6%, at 200 ~1-3%). */
typedef struct rd__done {
  uint64_t task_id, ret_id, actor_id;
  uint64_t submit_ns, start_ns, end_ns;   /* rd__now_ns: made wall-clock times when listed */
  int attempt, worker_pid;
  uint32_t node;
  uint32_t parent_node;     /* the task whose run submitted it (parent_task 0: none) */
  int parent_pid;
  uint64_t parent_task;
  char func[64];
} rd__done;

/* When t, sent on l, could start on its worker: when it was sent, or when
 * the task before it there answered (its service time counts from here). */
static uint64_t task_start_ns(const rd__task *t, const rd__lease *l) {
  return t->pushed_ns > l->last_reply_ns ? t->pushed_ns : l->last_reply_ns;
}

/* t, answered now on l, finished well; it could start on its worker at
 * start (task_start_ns). */
static void done_keep(const rd__task *t, const rd__lease *l, uint64_t start, uint64_t now) {
  if (!G.done_max) return;
  if (!G.done && !(G.done = malloc(G.done_max * sizeof(*G.done)))) {
    G.done_max = 0;   /* out of memory: none kept */
    return;
  }
  rd__done *d = &G.done[G.done_next];
  d->task_id = t->task_id;
  d->ret_id = t->nret > 0 ? t->ret_ids[0] : 0;
  d->actor_id = t->actor ? t->actor->id : t->actor_id;
  d->submit_ns = t->submit_ns;
  d->start_ns = start;
  d->end_ns = now;
  d->attempt = t->attempt;
  d->worker_pid = l->worker_pid;
  d->node = l->node;
  d->parent_task = t->parent;
  d->parent_node = t->parent_node;
  d->parent_pid = t->parent_pid;
  const char *f = t->func ? t->func : "";
  size_t n = strnlen(f, sizeof(d->func) - 1);
  memcpy(d->func, f, n);
  d->func[n] = 0;
  G.done_next = (G.done_next + 1) % G.done_max;
  if (G.done_n < G.done_max) G.done_n++;
  else G.done_dropped++;   /* the oldest unreported, overwritten */
  G.ost.changed = 1;         /* a report is due (a rebuilt result's run settles nothing) */
}

/* d as a FINISHED row (the times back from the end by whole ms of each
 * span), by the clocks now (rd__now_ns) and wall (ms). */
static void done_info(const rd__done *d, Rd__TaskInfo *x, uint64_t now, uint64_t wall) {
  rd__task_info__init(x);
  x->task_id = d->task_id;
  x->func = (char *)d->func;
  x->state = RD_TS_FINISHED;
  x->age_ns = now > d->submit_ns ? now - d->submit_ns : 0;
  x->end_ms = wall - (now > d->end_ns ? now - d->end_ns : 0) / 1000000;
  x->start_ms = x->end_ms - (d->end_ns - d->start_ns) / 1000000;
  x->created_ms = x->end_ms - (d->end_ns - d->submit_ns) / 1000000;
  x->attempt = d->attempt;
  x->worker_pid = d->worker_pid;
  x->actor_id = d->actor_id;
  x->ret_id = d->ret_id;
  x->node = d->node;
  x->resources = (char *)"";
  x->parent_task = d->parent_task;
  x->parent_node = d->parent_node;
  x->parent_pid = d->parent_pid;
}

/* The k-th oldest unreported (k < G.done_n). */
static const rd__done *done_oldest(size_t k) {
  return &G.done[(G.done_next + G.done_max - G.done_n + k) % G.done_max];
}

static void on_task_reply(rd__lease *l, Rd__TaskReply *m) {
  rd__task *t = l->inhead, *prev = NULL;
  while (t && t->task_id != m->task_id) { prev = t; t = t->next; }
  if (!t) {
    rd__log(RD_LOG_WARN, "reply for unknown task %llu", (unsigned long long)m->task_id);
    return;
  }
  if (prev) prev->next = t->next;
  else l->inhead = t->next;
  if (l->intail == t) l->intail = prev;
  l->ninflight--;
  G.ninflight--;
  l->nstream -= t->stream != NULL;
  rd__sclass *c = l->cls;
  if (m->unrun && c) {
    /* its worker's task ahead of it waits (rd__worker_hand_back): back to
     * the front of the queue (the worker answers them last first, so they
     * stay in order), no retry used; the lease takes nothing more until its
     * next reply, and the queue asks for another worker if it needs one */
    l->blocked = 1;
    t->lease = NULL;
    if (t->cancelled) {
      task_free(t);   /* its returns failed when it was cancelled */
    } else {
      t->next = NULL;
      class_requeue_front(c, t);
      G.ost.changed = 1;
    }
    if (m->retire) l->retired = l->stop = 1;
    else class_dispatch(c);
    return;
  }
  l->blocked = 0;
  uint64_t now = rd__now_ns();
  uint64_t start = task_start_ns(t, l);
  uint64_t svc = now > start ? now - start : 0;
  if (c) fn_time_add(c, t->func, svc);
  l->last_reply_ns = now;

  if (t->cancelled) {   /* its returns failed when it was cancelled: drop what it made */
    for (size_t i = 0; i < m->n_returns && i < (size_t)t->nret; i++) {
      if (m->returns[i]->in_store) queue_release(t->ret_ids[i], 1, m->node);
      ret_refs_let_go(m->returns[i]->refs, m->returns[i]->n_refs);
    }
    task_free(t);
  } else if (m->status == RD_ETASK && t->retry_failures && !t->stream && (c || t->actor) && may_run_again(t)) {
    /* rd_task_opts.retry_failures (Ray's retry_exceptions): run it again,
     * first in its class's queue, on one of max_retries; an actor call ahead
     * of the calls not sent yet (those sent after it may run first), within
     * its actor's max_task_retries */
    spend_retry(t);
    char of[16];
    rd__log(RD_LOG_WARN, "%s '%s' failed: %s; retrying (attempt %d of %s)", t->actor ? "actor call" : "task",
            t->func, m->error && *m->error ? m->error : rd_strerror(m->status), t->attempt + 1,
            runs_allowed(t, of, sizeof(of)));
    t->lease = NULL;
    t->next = NULL;
    if (t->actor) actor_requeue_front(t->actor, t);
    else class_requeue_front(c, t);
  } else if (m->status != 0) {
    char of[16];
    if (m->status == RD_ETASK && t->retry_failures)   /* say it was the last of several */
      task_fail(t, m->status, "%s (attempt %d of %s)", m->error && *m->error ? m->error : rd_strerror(m->status),
                t->attempt + 1, runs_allowed(t, of, sizeof(of)));
    else if (!lineage_arg_lost(t, m->status, m->lost_arg))
      task_fail(t, m->status, "%s", m->error && *m->error ? m->error : rd_strerror(m->status));
  } else if (t->stream) {
    done_keep(t, l, start, now);
    stream_end(t, m);
  } else {
    int keep = lineage_wanted(t, m->node);
    t->lineage_refs++;   /* a return freed at once in obj_ready must not free t */
    for (int i = 0; i < t->nret; i++) {
      rd__obj *o = obj_get(t->ret_ids[i]);
      const Rd__Ret *ret = i < (int)m->n_returns ? m->returns[i] : NULL;
      int in_store = ret && ret->in_store;
      if (!o || o->state != OBJ_PENDING) {   /* run again to rebuild another return: keep this one */
        if (o && in_store) queue_release(t->ret_ids[i], 1, m->node);
        if (ret) ret_refs_let_go(ret->refs, ret->n_refs);
        continue;
      }
      if (ret && ret->n_refs && ret_refs_adopt(o, ret) != 0) {
        if (in_store) queue_release(t->ret_ids[i], 1, m->node);
        obj_set_failed(o, RD_ENOMEM, NULL);
      } else if (in_store) {
        o->state = OBJ_STORE;
        o->node = m->node;
        if (keep) {
          o->lineage = t;
          t->lineage_refs++;
        }
      } else {
        const ProtobufCBinaryData *d = i < (int)m->n_returns ? &m->returns[i]->data : NULL;
        rd__blob *b = blob_new(d ? d->data : NULL, d ? d->len : 0);
        if (!b) {
          obj_set_failed(o, RD_ENOMEM, NULL);
        } else {
          o->state = OBJ_INLINE;
          o->blob = b;
        }
      }
      obj_ready(o);
    }
    task_settle(t, 0);
    done_keep(t, l, start, now);
    if (t->lineage_refs > 1) {
      t->lineage_refs--;
      lineage_link(t);
    } else {
      t->lineage_refs = 0;
      task_free(t);
    }
  }
  if (!c) {
    actor_dispatch(l->actor);
    return;
  }
  if (m->retire) {   /* no more tasks to it; handed back once the pump stops reading it */
    l->retired = l->stop = 1;
    return;
  }
  if (l->ninflight == 0 && !c->qhead) l->idle_since = now;
  class_dispatch(c);
}

/* Why a socket the node sent (a lease's, an actor's) did not arrive: the
 * kernel drops a passed fd that this process has no room for. */
static void fd_missing_why(char *out, size_t len, const char *what) {
  struct rlimit rl;
  int held = rd__open_fds();   /* -1 with EMFILE: not even room to look */
  if ((held < 0 && (errno == EMFILE || errno == ENFILE)) ||
      (getrlimit(RLIMIT_NOFILE, &rl) == 0 && held >= 0 && (rlim_t)held + 8 >= rl.rlim_cur))
    rd__sys_error(out, len, what, EMFILE, "this process");
  else
    snprintf(out, len, "%s: the node's reply came without it", what);
}

/* A failure to get a worker that may pass (this process or its node out of
 * files or memory): back off before asking again, 50 ms doubled per failure
 * up to 1 s.  live: something else runs what waits meanwhile (a class's
 * other lease), so the run of failures starts over.  Returns 1 when the
 * failures have gone on for RAYDIST_LEASE_RETRY_MS with nothing to run what
 * waits: it fails, and the next failure starts a new run. */
static int ask_backoff(rd__ask_backoff *b, int live, const char *what, const char *why) {
  const uint64_t now = rd__now_ns();
  if (live || !b->since_ns) b->since_ns = now;
  if (now - b->since_ns >= G.ask_retry_ns) {
    *b = (rd__ask_backoff){0};
    return 1;
  }
  if (b->n++ == 0)
    rd__log(RD_LOG_WARN, "%s: %s; asking again (for up to %.1f s)", what, why, (double)G.ask_retry_ns / 1e9);
  const uint64_t d = 50000000ull << (b->n <= 5 ? b->n - 1 : 5);
  b->after_ns = now + (d < 1000000000ull ? d : 1000000000ull);
  G.any_backoff = 1;
  return 0;
}

/* Has c a lease that can take its queued tasks? */
static int class_live(const rd__sclass *c) {
  for (const rd__lease *l = c->leases; l; l = l->next)
    if (!l->yielding && !l->retired && !l->gone_ns) return 1;
  return 0;
}

static void on_lease_grant(Rd__LeaseGrant *m, int fd) {
  rd__sclass *c = m->req_id ? class_req_done(m->req_id) : NULL;
  if (!c) {                      /* nobody asked (any more): hand it back */
    if (fd >= 0) close(fd);
    if (m->status == 0) {
      Rd__LeaseReturn r = RD__LEASE_RETURN__INIT;
      r.lease_id = m->lease_id;
      rd__conn_send(&G.daemon, RD__MSG_TYPE__MSG_LEASE_RETURN, &r.base, -1);
    }
    return;
  }
  if (m->status == RD_EAGAIN) {   /* transient on the node: ask again */
    if (fd >= 0) close(fd);
    class_dispatch(c);
    return;
  }
  rd__lease *l = m->status == 0 && fd >= 0 ? calloc(1, sizeof(*l)) : NULL;
  if (!l) {
    if (fd >= 0) close(fd);
    int err = m->status ? m->status : RD_ESYS;
    char why[400];
    if (m->status == 0) {   /* granted, but its socket did not come (or no room for it here): the worker goes back */
      Rd__LeaseReturn lr = RD__LEASE_RETURN__INIT;
      lr.lease_id = m->lease_id;
      lr.worker_lost = 1;   /* its end of the socket is closed: not reused */
      rd__conn_send(&G.daemon, RD__MSG_TYPE__MSG_LEASE_RETURN, &lr.base, -1);
      if (fd >= 0) {
        err = RD_ENOMEM;
        snprintf(why, sizeof(why), "out of memory for a lease");
      } else {
        fd_missing_why(why, sizeof(why), "cannot take the socket to its worker");
      }
    } else {
      snprintf(why, sizeof(why), "%s", m->error && *m->error ? m->error : rd_strerror(err));
    }
    /* out of files or memory here or on the node: queued tasks wait for
     * the class's other leases, or for the shortage to pass */
    const int passing = m->status == 0 || m->transient;
    char what[160];
    snprintf(what, sizeof(what), "cannot get a worker for '%s'", c->qhead ? c->qhead->func : "?");
    if (passing && !ask_backoff(&c->ask, class_live(c), what, why)) {
      class_dispatch(c);   /* to the leases it has; asks again once the backoff is over */
      return;
    }
    double asked = passing ? (double)G.ask_retry_ns / 1e9 : 0;
    while (c->qhead) {
      rd__task *t = c->qhead;
      c->qhead = t->next;
      c->qlen--;
      if (passing) task_fail(t, err, "cannot schedule '%s': %s (asked again for %.1f s)", t->func, why, asked);
      else task_fail(t, err, "cannot schedule '%s': %s", t->func, why);
    }
    c->qtail = NULL;
    return;
  }
  c->ask = (rd__ask_backoff){0};
  l->lease_id = m->lease_id;
  l->worker_pid = m->worker_pid;
  l->node = m->node;
  l->cls = c;
  rd__conn_init(&l->conn, fd);
  rd__pump_watch(&l->conn, 1, l);
  l->next = c->leases;
  c->leases = l;
  if (c->nleases++ == 0) class_leased(c, 1);
  if (!c->qhead) l->idle_since = rd__now_ns();
  class_dispatch(c);
}

/* ------------------------------------------------------------- actors */

/* The entry of actor id (a handle's state in this process), made when
 * create is set; NULL when there is none, or no memory.  By id in
 * G.actor_ids: a driver that made and killed thousands of actors walked
 * them all on every call (2,000 dead ones cut calls to a live one from
 * 373,000/s to 74,000/s). */
static rd__actor *actor_get(uint64_t id, int create) {
  rd__actor *a = rd__u64map_get(&G.actor_ids, id);
  if (a || !create) return a;
  if (rd__u64map_reserve(&G.actor_ids, G.actor_ids.count + 1) != 0 || !(a = calloc(1, sizeof(*a)))) return NULL;
  a->id = id;
  rd__u64map_put(&G.actor_ids, id, a);
  a->next = G.actors;
  if (G.actors) G.actors->prev = a;
  G.actors = a;
  return a;
}

/* Drop a's entry: a later call on its handle makes a new one, which asks
 * the node and fails as it would have (the node keeps dead actors'
 * records).  Not while a list walk up the stack may hold it. */
static void actor_forget(rd__actor *a) {
  if (a->prev) a->prev->next = a->next;
  else G.actors = a->next;
  if (a->next) a->next->prev = a->prev;
  (void)rd__u64map_del(&G.actor_ids, a->id);
  (void)rd__u64map_reserve(&G.actor_ids, G.actor_ids.count);   /* shrinks after a burst */
  blob_unref(a->dead_msg);
  free(a);
}

/* Whether nothing points at a's entry: no call queued (or waiting for an
 * argument), no connection, no finished call kept as lineage. */
static int actor_unused(const rd__actor *a) { return !a->qhead && !a->conn && !a->nlineage; }

/* Whether a is dead with nothing left that points at its entry. */
static int actor_forgettable(const rd__actor *a) { return a->state == AH_DEAD && actor_unused(a); }

/* An actor connection with no call in flight whose other end hung up: its
 * process died while this one did not pump (an owner with nothing else
 * live does not).  Dropped before a new call goes out, so that the call
 * waits for the restart instead of failing as if it had been in flight.
 * Not from inside a drain: it frees the lease. */
static void actor_conn_check_idle(rd__actor *a) {
  if (a->state != AH_CONNECTED || a->conn->ninflight) return;
  struct pollfd p = {a->conn->conn.fd, POLLRDHUP, 0};
  if (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR | POLLRDHUP))) actor_conn_lost(a->conn, "died");
}

/* The actor is dead: fail its queued calls (those still waiting for an
 * argument stay queued, keeping the actor's entry alive, and fail when the
 * argument arrives). */
static void actor_fail_queue(rd__actor *a) {
  a->state = AH_DEAD;
  G.any_dead_actor = 1;
  actor_dispatch(a);
}

/* Send what may be sent: calls go in order, each once its arguments are ready. */
static void actor_dispatch(rd__actor *a) {
  if (a->state == AH_DEAD) {
    /* failing a call can make a later call of this queue ready and re-enter
     * here: take one call at a time, from the head, until none is ready */
    for (;;) {
      rd__task **pp = &a->qhead;
      while (*pp && (*pp)->deps_pending > 0) pp = &(*pp)->next;
      rd__task *t = *pp;
      if (!t) break;
      *pp = t->next;
      a->qlen--;
      a->qtail = NULL;
      for (rd__task *x = a->qhead; x; x = x->next) a->qtail = x;
      task_fail(t, a->dead_err, "%s", a->dead_msg ? (const char *)a->dead_msg->data : rd_strerror(a->dead_err));
    }
    return;
  }
  if (a->state == AH_IDLE && a->qhead && !G.dead && !a->ask.after_ns) {
    Rd__ActorConnect m = RD__ACTOR_CONNECT__INIT;
    a->connect_req = ++G.next_req;
    m.req_id = a->connect_req;
    m.actor_id = a->id;
    m.dead_pid = a->lost_pid;
    if (rd__conn_send(&G.daemon, RD__MSG_TYPE__MSG_ACTOR_CONNECT, &m.base, -1) == 0) a->state = AH_CONNECTING;
    return;
  }
  /* gone, or on a node declared dead: calls wait for the next process */
  if (a->state != AH_CONNECTED || a->conn->gone_ns || a->conn->host_dead) return;
  while (a->qhead && a->qhead->deps_pending == 0) {
    rd__task *t = a->qhead;
    a->qhead = t->next;
    if (!a->qhead) a->qtail = NULL;
    a->qlen--;
    int failed_arg = -1;
    for (int i = 0; i < t->nargs && failed_arg < 0; i++) {
      rd__obj *o = targ_dep(&t->args[i]) ? obj_get(t->args[i].oid) : NULL;
      if (o && o->state == OBJ_FAILED) failed_arg = i;
    }
    if (failed_arg >= 0) {
      rd__obj *o = obj_get(t->args[failed_arg].oid);
      task_fail(t, o->err, "argument %d of '%s' failed: %s", failed_arg, t->func,
                o->blob ? (const char *)o->blob->data : rd_strerror(o->err));
    } else {
      int pr = lease_push(a->conn, t);
      if (pr != 0) push_failed(t, pr);
    }
  }
}

static void on_actor_connect_reply(Rd__ActorConnectReply *m, int fd) {
  /* by the id it names (a walk of every entry made connecting to N actors
   * cost N^2: 2,000 took 7 s, mostly here); one that names none (the node
   * does not know the actor), or another, by its request */
  rd__actor *a = m->actor_id ? actor_get(m->actor_id, 0) : NULL;
  if (a && !(a->state == AH_CONNECTING && a->connect_req == m->req_id)) a = NULL;
  for (rd__actor *x = a ? NULL : G.actors; x; x = x->next)
    if (x->state == AH_CONNECTING && x->connect_req == m->req_id) a = x;
  if (!a) {
    if (fd >= 0) close(fd);
    return;
  }
  a->connect_req = 0;
  rd__lease *l = m->status == 0 && fd >= 0 ? calloc(1, sizeof(*l)) : NULL;
  if (m->status == 0 && !l) {
    /* the actor lives, but its socket did not come (or no room for it
     * here): the calls wait and it is asked again, or they fail with why
     * once that has gone on for RAYDIST_LEASE_RETRY_MS */
    char why[400], what[64];
    if (fd >= 0) {
      close(fd);
      snprintf(why, sizeof(why), "out of memory for the connection to the actor");
    } else {
      fd_missing_why(why, sizeof(why), "cannot take the socket to the actor");
    }
    snprintf(what, sizeof(what), "actor %016llx", (unsigned long long)a->id);
    a->state = AH_IDLE;
    if (!ask_backoff(&a->ask, 0, what, why)) return;
    rd__log(RD_LOG_ERROR, "actor %016llx: %s", (unsigned long long)a->id, why);
    for (rd__task *t; (t = a->qhead);) {
      a->qhead = t->next;
      a->qlen--;
      task_fail(t, fd >= 0 ? RD_ENOMEM : RD_ESYS, "%s (asked again for %.1f s)", why, (double)G.ask_retry_ns / 1e9);
    }
    a->qtail = NULL;
    return;
  }
  if (m->status != 0 || fd < 0) {
    if (fd >= 0) close(fd);
    a->state = AH_DEAD;
    G.any_dead_actor = 1;
    a->dead_err = m->status == RD_ENOENT || m->status == RD_EACTOR_DIED || m->status == 0 ? RD_EACTOR_DIED : m->status;
    blob_unref(a->dead_msg);
    const char *why = m->error && *m->error ? m->error : rd_strerror(a->dead_err);
    a->dead_msg = blob_new(why, strlen(why));
    actor_dispatch(a);
    return;
  }
  a->ask = (rd__ask_backoff){0};
  l->worker_pid = m->worker_pid;
  l->node = m->node;
  l->actor = a;
  rd__conn_init(&l->conn, fd);
  rd__pump_watch(&l->conn, 1, l);
  a->conn = l;
  a->max_task_retries = m->max_task_retries;
  a->max_pending = m->max_pending_calls > 0 ? m->max_pending_calls : 0;
  a->concurrency = m->concurrency;
  a->state = AH_CONNECTED;
  actor_dispatch(a);
}

/* The socket to the actor broke (it died, or was killed): calls in flight are
 * re-sent after the restart within max_task_retries, or fail. */
static void actor_conn_lost(rd__lease *l, const char *why) {
  rd__actor *a = l->actor;
  rd__task *t = l->inhead;
  int pid = l->worker_pid;
  char said[400];
  why = death_word(l, why, said, sizeof(said));
  /* its node died or the link to it broke (a caller on another node): that
   * node's word, after a colon ("...: node 3 died or its link broke") */
  const char *sep = " ";
  if (why && why != said && l->lost_err == RD_ENODE_DIED && l->lost_why[0]) {
    snprintf(said, sizeof(said), "%s", l->lost_why);
    why = said;
    sep = ": ";
  }
  lease_drop_borrows(l);
  lease_drop_holds(l);
  rd__conn_close(&l->conn);
  G.ninflight -= l->ninflight;
  free(l);
  G.conn_gen++;
  a->conn = NULL;
  a->lost_pid = pid;
  a->state = AH_IDLE;
  rd__task *retry = NULL, **rt = &retry;
  while (t) {
    rd__task *next = t->next;
    t->lease = NULL;
    if (t->cancelled) {
      task_free(t);
    } else if (may_run_again(t)) {
      t->attempt++;
      t->next = NULL;
      *rt = t;
      rt = &t->next;
    } else {
      task_fail(t, RD_EACTOR_DIED, "actor %016llx (worker pid %d)%s%s while running '%s' (max_task_retries=%d%s)",
                (unsigned long long)a->id, pid, sep, why, t->func, call_retries(t),
                t->call_retries != RD_ACTOR_DEFAULT ? ", the call's" : "");
    }
    t = next;
  }
  actor_requeue_front(a, retry);   /* in order, ahead of the calls not sent yet */
  actor_dispatch(a);
}

/* ---------------------------------------------------------- the pump */

/* Lines a worker wrote, for this driver (rd_config.log_to_driver): on its
 * stdout or stderr, each prefixed with where it came from. */
static void print_worker_output(const Rd__WorkerOutput *m) {
  if (!G.log_to_driver) return;
  FILE *f = m->stream == 2 ? stderr : stdout;
  if (m->dropped)
    fprintf(f, "(raydist) %llu bytes of worker output were dropped: this driver did not read them in time\n",
            (unsigned long long)m->dropped);
  if (G.dedup) {
    const char *data = (const char *)m->data.data;
    uint64_t now = rd__now_ns();
    for (size_t k = 0; k < m->data.len;) {
      const char *nl = memchr(data + k, '\n', m->data.len - k);
      size_t l = nl ? (size_t)(nl - (data + k)) : m->data.len - k;
      rd__dedup_line(G.dedup, f, m->pid, m->ip, m->name, data + k, l, now);
      k += l + 1;
    }
    fflush(f);
    (void)rd__dedup_tick(G.dedup, now);
    return;
  }
  char prefix[RD_WORKER_PREFIX_MAX];
  rd__worker_prefix(prefix, sizeof(prefix), m->pid, m->ip, m->name);
  rd__print_lines(f, prefix, (const char *)m->data.data, m->data.len);
}

static void handle_daemon_frame(const rd__frame *f) {
  const ProtobufCMessageDescriptor *d = NULL;
  switch (f->type) {
    case RD__MSG_TYPE__MSG_LEASE_GRANT: d = &rd__lease_grant__descriptor; break;
    case RD__MSG_TYPE__MSG_LEASE_ASSIGN: d = &rd__lease_assign__descriptor; break;
    case RD__MSG_TYPE__MSG_OBJ_CREATE_REPLY: d = &rd__obj_create_reply__descriptor; break;
    case RD__MSG_TYPE__MSG_OBJ_GET_REPLY:
    case RD__MSG_TYPE__MSG_OBJ_HANDOVER_REPLY: d = &rd__obj_get_reply__descriptor; break;
    case RD__MSG_TYPE__MSG_NODE_INFO_REPLY: d = &rd__node_info_reply__descriptor; break;
    case RD__MSG_TYPE__MSG_ERROR: d = &rd__error__descriptor; break;
    case RD__MSG_TYPE__MSG_ACTOR_ID_REPLY: d = &rd__actor_id_reply__descriptor; break;
    case RD__MSG_TYPE__MSG_ACTOR_NAMES: d = &rd__actor_names__descriptor; break;
    case RD__MSG_TYPE__MSG_ACTOR_CONNECT_REPLY: d = &rd__actor_connect_reply__descriptor; break;
    case RD__MSG_TYPE__MSG_ACTOR_START: d = &rd__actor_start__descriptor; break;
    case RD__MSG_TYPE__MSG_ACTOR_ATTACH: d = &rd__actor_attach__descriptor; break;
    case RD__MSG_TYPE__MSG_ACTOR_KILL: d = &rd__actor_kill__descriptor; break;
    case RD__MSG_TYPE__MSG_PG_REPLY: d = &rd__pg_reply__descriptor; break;
    case RD__MSG_TYPE__MSG_LEASE_LOST: d = &rd__lease_lost__descriptor; break;
    case RD__MSG_TYPE__MSG_LEASE_YIELD: d = &rd__lease_yield__descriptor; break;
    case RD__MSG_TYPE__MSG_NODE_DEAD: d = &rd__node_dead__descriptor; break;
    case RD__MSG_TYPE__MSG_WORKER_OUTPUT: d = &rd__worker_output__descriptor; break;
    case RD__MSG_TYPE__MSG_KV_REPLY: d = &rd__kv_reply__descriptor; break;
    case RD__MSG_TYPE__MSG_TASK_LIST_ASK: d = &rd__task_list_ask__descriptor; break;
    default: break;
  }
  int fd = (f->flags & RD_FRAME_FLAG_FD) ? rd__conn_take_fd(&G.daemon) : -1;
  ProtobufCMessage *m = d ? rd__frame_unpack(f, d) : NULL;
  if (!m) {
    if (fd >= 0) close(fd);
    rd__log(RD_LOG_ERROR, "malformed message (type %d) from the node daemon", f->type);
    return;
  }
  switch (f->type) {
    case RD__MSG_TYPE__MSG_LEASE_GRANT:
      on_lease_grant((Rd__LeaseGrant *)m, fd);
      break;
    case RD__MSG_TYPE__MSG_LEASE_ASSIGN:
      if (G.is_worker) rd__worker_on_assign((Rd__LeaseAssign *)m, fd);
      else if (fd >= 0) close(fd);
      break;
    case RD__MSG_TYPE__MSG_ACTOR_CONNECT_REPLY:
      on_actor_connect_reply((Rd__ActorConnectReply *)m, fd);
      break;
    case RD__MSG_TYPE__MSG_ACTOR_ATTACH:
      if (G.is_worker) rd__worker_on_attach((Rd__ActorAttach *)m, fd);
      else if (fd >= 0) close(fd);
      break;
    case RD__MSG_TYPE__MSG_ACTOR_START:
      if (G.is_worker && !G.actor_start) {
        G.actor_start = (Rd__ActorStart *)m;   /* the worker loop runs the constructor */
        return;
      }
      break;
    case RD__MSG_TYPE__MSG_WORKER_OUTPUT:
      print_worker_output((Rd__WorkerOutput *)m);
      break;
    case RD__MSG_TYPE__MSG_ACTOR_KILL:
      G.actor_kill = ((Rd__ActorKill *)m)->no_restart ? 2 : 1;
      break;
    case RD__MSG_TYPE__MSG_LEASE_LOST:
      on_lease_lost((Rd__LeaseLost *)m);
      break;
    case RD__MSG_TYPE__MSG_LEASE_YIELD: {
      /* another job waits for what this lease holds: finish what was sent,
       * then return it (return_idle_leases); the class's queued tasks wait
       * for a new lease like any other request */
      uint64_t id = ((Rd__LeaseYield *)m)->lease_id;
      for (rd__sclass *c = G.classes; c; c = c->next)
        for (rd__lease *l = c->leases; l; l = l->next)
          if (l->lease_id == id) l->yielding = 1;
      break;
    }
    case RD__MSG_TYPE__MSG_NODE_DEAD: {
      uint32_t dead = ((Rd__NodeDead *)m)->node_index;
      /* first, so that calls run again to rebuild results do not go out on
       * a socket to a process that died with the node */
      for (rd__actor *a = G.actors; a && dead; a = a->next)
        if (a->conn && a->conn->node == dead) a->conn->host_dead = 1;
      lineage_node_dead(dead);
      break;
    }
    case RD__MSG_TYPE__MSG_TASK_LIST_ASK:
      on_task_list_ask((Rd__TaskListAsk *)m);
      break;
    case RD__MSG_TYPE__MSG_ERROR: {
      Rd__Error *e = (Rd__Error *)m;
      rd__log(RD_LOG_ERROR, "node daemon: %s (%s)", e->message, rd_err_name(e->status));
      break;
    }
    default: {
      uint64_t req = 0;
      if (f->type == RD__MSG_TYPE__MSG_OBJ_CREATE_REPLY) req = ((Rd__ObjCreateReply *)m)->req_id;
      if (f->type == RD__MSG_TYPE__MSG_OBJ_GET_REPLY || f->type == RD__MSG_TYPE__MSG_OBJ_HANDOVER_REPLY)
        req = ((Rd__ObjGetReply *)m)->req_id;
      if (f->type == RD__MSG_TYPE__MSG_NODE_INFO_REPLY) req = ((Rd__NodeInfoReply *)m)->req_id;
      if (f->type == RD__MSG_TYPE__MSG_ACTOR_ID_REPLY) req = ((Rd__ActorIdReply *)m)->req_id;
      if (f->type == RD__MSG_TYPE__MSG_ACTOR_NAMES) req = ((Rd__ActorNames *)m)->req_id;
      if (f->type == RD__MSG_TYPE__MSG_PG_REPLY) req = ((Rd__PgReply *)m)->req_id;
      if (f->type == RD__MSG_TYPE__MSG_KV_REPLY) req = ((Rd__KvReply *)m)->req_id;
      if (fd >= 0) close(fd);
      for (size_t i = 0; i < G.nreplies; i++) {
        if (G.replies[i].req_id == req && !G.replies[i].msg && G.replies[i].type == f->type) {
          G.replies[i].msg = m;
          pthread_cond_broadcast(&G.cv);
          return;
        }
      }
      rd__log(RD_LOG_WARN, "unexpected reply %llu from the node daemon", (unsigned long long)req);
      break;
    }
  }
  protobuf_c_message_free_unpacked(m, NULL);
}

static void handle_lease_frame(rd__lease *l, const rd__frame *f) {
  if (f->type == RD__MSG_TYPE__MSG_ERROR) {
    /* why the worker goes: its own crash report (rd__worker_crash_tell), or
     * its node's word as the bridged socket closes (a remote worker); the
     * first stands (a crashed remote worker's node says only "died" after),
     * but the worker's own report is better than this node's word on how
     * it ended, which may come first (on_lease_lost) */
    Rd__Error *e = (Rd__Error *)rd__frame_unpack(f, &rd__error__descriptor);
    if (e && l->lost_err && !(l->lost_node && l->lost_err == RD_EWORKER_DIED)) {
      protobuf_c_message_free_unpacked(&e->base, NULL);
      return;
    }
    if (e) {
      l->lost_err = e->status;
      l->lost_node = !e->own;   /* a remote worker's node's word, unless its own report */
      snprintf(l->lost_why, sizeof(l->lost_why), "%s", e->message ? e->message : "");
      protobuf_c_message_free_unpacked(&e->base, NULL);
      return;
    }
  }
  if (f->type == RD__MSG_TYPE__MSG_BORROW_GET) {
    Rd__BorrowGet *b = (Rd__BorrowGet *)rd__frame_unpack(f, &rd__borrow_get__descriptor);
    if (b) {
      on_borrow_get(l, b->object_id);
      protobuf_c_message_free_unpacked(&b->base, NULL);
      return;
    }
  }
  if (f->type == RD__MSG_TYPE__MSG_BORROW_HOLD || f->type == RD__MSG_TYPE__MSG_BORROW_DROP) {
    Rd__BorrowGet *b = (Rd__BorrowGet *)rd__frame_unpack(f, &rd__borrow_get__descriptor);
    if (b) {
      if (f->type == RD__MSG_TYPE__MSG_BORROW_HOLD) on_borrow_hold(l, b->object_id);
      else on_borrow_drop(l, b->object_id);
      protobuf_c_message_free_unpacked(&b->base, NULL);
      return;
    }
  }
  if (f->type == RD__MSG_TYPE__MSG_STREAM_ITEM) {
    Rd__StreamItem *it = (Rd__StreamItem *)rd__frame_unpack(f, &rd__stream_item__descriptor);
    if (it) {
      on_stream_item(l, it);
      protobuf_c_message_free_unpacked(&it->base, NULL);
      return;
    }
  }
  Rd__TaskReply *m = f->type == RD__MSG_TYPE__MSG_TASK_REPLY
                         ? (Rd__TaskReply *)rd__frame_unpack(f, &rd__task_reply__descriptor) : NULL;
  if (!m) {
    /* a worker that speaks nonsense is treated like a dead one */
    rd__log(RD_LOG_ERROR, "malformed message (type %d) from worker pid %d", f->type, l->worker_pid);
    l->broken = l->stop = 1;
    return;
  }
  on_task_reply(l, m);
  protobuf_c_message_free_unpacked(&m->base, NULL);
}

static void handle_serve_frame(rd__serve *s, const rd__frame *f) {
  const ProtobufCMessageDescriptor *d = NULL;
  switch (f->type) {
    case RD__MSG_TYPE__MSG_TASK: d = &rd__task__descriptor; break;
    case RD__MSG_TYPE__MSG_TASK_CANCEL: d = &rd__task_cancel__descriptor; break;
    case RD__MSG_TYPE__MSG_BORROW_REPLY: d = &rd__borrow_reply__descriptor; break;
    case RD__MSG_TYPE__MSG_STREAM_GRANT: d = &rd__stream_grant__descriptor; break;
    default: break;
  }
  ProtobufCMessage *m = d ? rd__frame_unpack(f, d) : NULL;
  if (!m) {
    rd__log(RD_LOG_ERROR, "malformed or unexpected frame (type %d) from an owner; dropping that connection", f->type);
    s->closed = 1;
    return;
  }
  switch (f->type) {
    case RD__MSG_TYPE__MSG_TASK:
      rd__worker_on_task(s, (Rd__Task *)m);   /* keeps the message */
      return;
    case RD__MSG_TYPE__MSG_TASK_CANCEL: rd__worker_on_cancel(s, ((Rd__TaskCancel *)m)->task_id); break;
    case RD__MSG_TYPE__MSG_STREAM_GRANT: rd__worker_on_grant(s, (Rd__StreamGrant *)m); break;
    default: on_borrow_reply(s, (Rd__BorrowReply *)m); break;
  }
  protobuf_c_message_free_unpacked(m, NULL);
}

/* Read everything a conn has; returns 0, or <0 when the peer is gone. */
typedef void (*frame_fn)(void *who, const rd__frame *f);

static int conn_drain(rd__conn *c, void (*fn)(void *, const rd__frame *), void *who, int *closed) {
  for (int rounds = 0; rounds < 64; rounds++) {
    int r = rd__conn_fill(c);
    if (r == RD_EAGAIN) return 0;
    if (r <= 0) return RD_ECONN;
    rd__frame f;
    int k;
    while ((k = rd__conn_next(c, &f)) == 1) {
      fn(who, &f);
      if (closed && *closed) return RD_ECONN;
    }
    if (k < 0) return RD_EPROTO;
  }
  return 0;
}

static void daemon_fn(void *who, const rd__frame *f) { (void)who; handle_daemon_frame(f); }
static void lease_fn(void *who, const rd__frame *f) { handle_lease_frame(who, f); }
static void serve_fn(void *who, const rd__frame *f) { handle_serve_frame(who, f); }

void rd__flush_all(void) {
  if (G.dead) return;
  send_pending_releases();
  if (rd__conn_flush(&G.daemon) < 0) fail_everything(RD_ENODE_DIED, "the node daemon connection broke");
  /* only the conns with bytes queued, not every lease, actor and caller:
   * one left with its socket full stays for the next pass (and its poll
   * asks for POLLOUT); one whose peer is gone is dropped from the list, its
   * reader finds the end */
  for (rd__conn *c = G.wdirty.head, *next; c; c = next) {
    next = c->wnext;
    if (rd__conn_flush(c) != 1) rd__conn_unlist(c);
  }
}

/* An idle lease is kept RAYDIST_LEASE_IDLE_MS for its class's next task,
 * unless another class of this process has asked for a worker: then it
 * goes back to the node at once, for that class's request. */
static void return_idle_leases(uint64_t now) {
  for (rd__sclass *c = G.leased, *cnext; c; c = cnext) {
    cnext = c->lnext;
    int starved = G.nreq > (c->req_id != 0);
    for (rd__lease *l = c->leases, *next; l; l = next) {
      next = l->next;
      if (l->ninflight == 0 && !c->qhead && l->idle_since && (starved || now - l->idle_since >= G.lease_idle_ns))
        lease_return(l);
      else if (l->ninflight == 0 && l->yielding) {
        lease_return(l);
        if (c->qlen > 0) lease_request(c);   /* its tasks queue for a new lease */
      } else if (l->ninflight == 0 && higher_priority_waiting(c))
        lease_return(l);
    }
  }
}

/* Fail every task and actor call this process has queued or in flight with
 * err/why, returning all leases and closing all actor connections. */
static void abandon_all_work(int err, const char *why) {
  for (rd__sclass *c = G.classes; c; c = c->next) {
    while (c->leases) {
      rd__lease *l = c->leases;
      rd__task *t = l->inhead;
      l->inhead = NULL;
      /* a worker still running one of these is of no use to anyone: the
       * node kills it rather than grant it to the next owner busy */
      lease_return_ex(l, t != NULL);
      while (t) {
        rd__task *n = t->next;
        task_fail(t, err, "%s", why);
        t = n;
      }
    }
    while (c->qhead) {
      rd__task *t = c->qhead;
      c->qhead = t->next;
      c->qlen--;
      task_fail(t, err, "%s", why);
    }
    c->qtail = NULL;
    while (c->delayed) {
      rd__task *t = c->delayed;
      c->delayed = t->next;
      task_fail(t, err, "%s", why);
    }
  }
  for (rd__actor *a = G.actors; a; a = a->next) {
    rd__task *t = a->conn ? a->conn->inhead : NULL;
    if (a->conn) {
      lease_drop_borrows(a->conn);
      lease_drop_holds(a->conn);
      rd__conn_close(&a->conn->conn);
      G.ninflight -= a->conn->ninflight;
      free(a->conn);
      a->conn = NULL;
      G.conn_gen++;
    }
    while (t) {
      rd__task *nx = t->next;
      task_fail(t, err, "%s", why);
      t = nx;
    }
    a->state = AH_DEAD;
    a->dead_err = err;
    blob_unref(a->dead_msg);
    a->dead_msg = blob_new(why, strlen(why));
    actor_fail_queue(a);
  }
}

static void fail_everything(int err, const char *why) {
  if (G.dead) return;
  G.dead = 1;
  rd__log(RD_LOG_ERROR, "%s", why);
  abandon_all_work(err, why);
  pthread_cond_broadcast(&G.cv);
}

/* Room for need entries in a poll set.  -1 when out of memory. */
static int pollset_reserve(rd__pollset *ps, size_t need) {
  if (need <= ps->cap) return 0;
  size_t cap = ps->cap ? 2 * ps->cap : 64;
  while (cap < need) cap *= 2;
  struct pollfd *pf = realloc(ps->pf, cap * sizeof(*pf));
  if (pf) ps->pf = pf;
  void **w = pf ? realloc(ps->who, cap * sizeof(*w)) : NULL;
  if (w) ps->who = w;
  int *k = w ? realloc(ps->kind, cap * sizeof(*k)) : NULL;
  if (!k) return -1;
  ps->kind = k;
  ps->cap = cap;
  return 0;
}

/* Add fd to a poll set; grows it.  -1 when out of memory. */
static int poll_add(rd__pollset *ps, int fd, short events, int kind, void *who) {
  if (pollset_reserve(ps, ps->n + 1) != 0) return -1;
  ps->pf[ps->n] = (struct pollfd){fd, events, 0};
  ps->kind[ps->n] = kind;
  ps->who[ps->n++] = who;
  return 0;
}

static void pollset_free(rd__pollset *ps) {
  free(ps->pf);
  free(ps->who);
  free(ps->kind);
  *ps = (rd__pollset){0};
}

/* A round is done with ps: G keeps it for the next. */
static void pollset_put_back(rd__pollset *ps) {
  if (!G.pollset.cap) G.pollset = *ps;
  else pollset_free(ps);   /* a round nested in this one kept its own */
}

static short poll_events(rd__conn *c) { return (short)(POLLIN | (rd__conn_want_write(c) ? POLLOUT : 0)); }

/* --------------------------------------------------------- epoll set */

/* An epoll entry's data: who (a lease or serve, 16-aligned) with the kind
 * (0 the daemon, 1 a lease, 2 a serve, 3 the wake fd) in its low bits, so a
 * round knows an entry's kind without reading memory that may be freed. */
#define EP_KIND(tag) ((int)((tag) & 3u))
#define EP_WHO(tag) ((void *)(uintptr_t)((tag) & ~(uint64_t)3u))
#define EP_MAX 256   /* events taken per round; the rest come in the next */
#define POLL_SMALL 32   /* connections up to which a round poll()s them all instead */

static int ep_add(rd__conn *c, int fd, int kind, void *who) {
  uint64_t tag = (uint64_t)(uintptr_t)who | (uint64_t)kind;
  struct epoll_event ev = {.events = EPOLLIN, .data.u64 = tag};
  if (epoll_ctl(G.epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
    rd__log(RD_LOG_ERROR, "cannot watch a socket with epoll (%s): polling every socket each round from now on",
            strerror(errno));
    G.ep_off = 1;
    return -1;
  }
  if (c) {
    c->ep_fd = G.epfd;
    c->ep_on = 1;
    c->ep_events = EPOLLIN;
    c->ep_tag = tag;
  }
  return 0;
}

void rd__pump_watch(rd__conn *c, int kind, void *who) {
  rd__conn_track(c, &G.wdirty);
  if (!G.ep_off && G.epfd >= 0 && !c->ep_on && c->fd >= 0) (void)ep_add(c, c->fd, kind, who);
}

/* Ask for EPOLLOUT on c, or stop asking. */
static void ep_want_out(rd__conn *c, int out) {
  uint32_t e = EPOLLIN | (out ? EPOLLOUT : 0u);
  if (!c->ep_on || c->ep_events == e) return;
  struct epoll_event ev = {.events = e, .data.u64 = c->ep_tag};
  if (epoll_ctl(c->ep_fd, EPOLL_CTL_MOD, c->fd, &ev) == 0) c->ep_events = e;
}

/* Before a round waits on the epoll set: the daemon's socket and the wake
 * fd in it (once), and writability asked for where bytes wait.  0, or -1
 * when the set cannot be used (G.ep_off). */
static int ep_prepare(void) {
  if (G.ep_off || G.epfd < 0) return -1;
  if (!G.daemon.ep_on && G.daemon.fd >= 0 && ep_add(&G.daemon, G.daemon.fd, 0, NULL) != 0) return -1;
  if (!G.ep_base) {   /* the wake fd, once */
    if (ep_add(NULL, G.wakefd, 3, NULL) != 0) return -1;
    G.ep_base = 1;
  }
  ep_want_out(&G.daemon, rd__conn_want_write(&G.daemon));
  for (rd__conn *c = G.wdirty.head; c; c = c->wnext) ep_want_out(c, 1);
  return 0;
}

/* Wait on cv (with G.mu) for at most ns. */
static void cond_wait_ns(pthread_cond_t *cv, uint64_t ns) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += (time_t)(ns / 1000000000u);
  ts.tv_nsec += (long)(ns % 1000000000u);
  if (ts.tv_nsec >= 1000000000) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000;
  }
  pthread_cond_timedwait(cv, &G.mu, &ts);
}

/* The owner's report to its node (OwnerStats, for the node's metrics): sent
 * at most every 100 ms while something changed (a task submitted, sent or
 * settled), so a stream of tasks costs one small frame per 100 ms, and at
 * shutdown (force).  *wait (ms, -1: none) is cut to when the next one is
 * due.  G.mu held. */
#define OST_GAP_NS 100000000ull

/* The backlog (OwnerStats.backlog): for each class with a lease request out
 * whose oldest queued task has waited BACKLOG_AFTER_NS or more for a
 * worker, the tasks queued behind that request; at most BACKLOG_MAX
 * classes, into b (shapes in rm, pointers in bp) when not NULL.  Returns
 * how many, with a signature of the whole in *sig; *wait (ms) is cut to
 * when a younger queue comes of age.  G.mu held.
 *
 * The oldest task's wait, not the request's: an owner asks for one worker
 * per class at a time, so with each grant a new request starts, and a
 * queue that never emptied would not be reported until one request alone
 * had waited the whole second (a cold cluster grew a node or two at a
 * time). */
#define BACKLOG_AFTER_NS 1000000000ull
#define BACKLOG_MAX 8
static size_t ost_backlog(uint64_t now, Rd__ClassBacklog *b, rd__res_msg *rm, Rd__ClassBacklog **bp, uint64_t *sig,
                          int64_t *wait) {
  size_t n = 0;
  uint64_t h = 1469598103934665603ull;
  for (rd__sclass *c = G.classes; c && n < BACKLOG_MAX; c = c->next) {
    if (!c->req_id || c->qlen < 2 || c->pg_id || !c->qhead) continue;
    uint64_t since = c->qhead->queued_ns;
    if (now < since + BACKLOG_AFTER_NS) {
      wait_until(wait, since + BACKLOG_AFTER_NS, now);
      continue;
    }
    h = (h ^ (uint64_t)(uintptr_t)c) * 1099511628211ull;
    h = (h ^ (uint64_t)c->qlen) * 1099511628211ull;
    if (b) {
      rd__class_backlog__init(&b[n]);
      rd__res_to_msg(&c->res, &rm[n]);
      b[n].shape = &rm[n].msg;
      b[n].label_selector = c->sel;
      b[n].count = (uint32_t)(c->qlen - 1 > UINT32_MAX ? UINT32_MAX : c->qlen - 1);
      bp[n] = &b[n];
    }
    n++;
  }
  *sig = n ? h : 0;
  return n;
}

static void ost_report(uint64_t now, int force, int64_t *wait) {
  uint64_t sig;
  if (!G.ost.changed) {   /* a report is due anyway otherwise: its backlog is made when it is sent */
    (void)ost_backlog(now, NULL, NULL, NULL, &sig, wait);
    if (sig != G.ost.backlog_sig) G.ost.changed = 1;
  }
  if (!G.ost.changed || G.dead || G.daemon.fd < 0) return;
  if (!force && now - G.ost.last_sent_ns < OST_GAP_NS) {
    wait_until(wait, G.ost.last_sent_ns + OST_GAP_NS, now);
    return;
  }
  uint64_t sent = (uint64_t)owner_inflight();
  Rd__OwnerStats m = RD__OWNER_STATS__INIT;
  m.n_buckets = RD_HIST_BUCKETS;
  m.buckets = G.ost.buckets;
  m.sum_ns = G.ost.sum_ns;
  m.done = G.ost.done;
  m.failed = G.ost.failed;
  m.sent = sent < G.ost.live ? sent : G.ost.live;   /* cancelled ones still in flight are not live */
  m.waiting = G.ost.live - m.sent;
  Rd__FuncStats fs[RD_FNSTATS_MAX], *fsp[RD_FNSTATS_MAX];
  m.n_funcs = rd__fnstats_pack(&G.ost.fns, fs, fsp);
  m.funcs = fsp;
  Rd__TaskFailure tf[RD_OST_FAILS_MAX], *tfp[RD_OST_FAILS_MAX];
  for (size_t i = 0; i < G.ost.nfails; i++) {
    const rd__ost_fail *f = &G.ost.fails[i];
    rd__task_failure__init(&tf[i]);
    tf[i].task_id = f->task_id;
    tf[i].ret_id = f->ret_id;
    tf[i].func = (char *)f->func;
    tf[i].status = f->status;
    tf[i].error = (char *)f->err;
    tf[i].attempt = f->attempt;
    tf[i].age_ns = f->age_ns;
    tf[i].actor_id = f->actor_id;
    tf[i].parent_task = f->parent_task;
    tf[i].parent_node = f->parent_node;
    tf[i].parent_pid = f->parent_pid;
    tf[i].worker_pid = f->worker_pid;
    tf[i].worker_node = f->node;
    tfp[i] = &tf[i];
  }
  m.n_failures = G.ost.nfails;
  m.failures = tfp;
  m.failures_dropped = G.ost.fails_dropped;
  Rd__AppMetric *amv, **amp;
  m.n_app_metrics = rd__appm_pack(&amv, &amp);
  m.app_metrics = amp;
  Rd__ClassBacklog bl[BACKLOG_MAX], *blp[BACKLOG_MAX];
  rd__res_msg blr[BACKLOG_MAX];
  m.n_backlog = ost_backlog(now, bl, blr, blp, &sig, wait);
  m.classes = G.ctab.count;
  m.backlog = blp;
  /* the finished tasks, oldest first: a stream of them goes out
   * RD_OST_FINISHED_MAX a report, all at shutdown (force); out of memory,
   * they wait */
  size_t nfin = force || G.done_n < RD_OST_FINISHED_MAX ? G.done_n : RD_OST_FINISHED_MAX;
  Rd__TaskInfo *fin = nfin ? malloc(nfin * (sizeof(*fin) + sizeof(fin))) : NULL;
  if (!fin) nfin = 0;
  Rd__TaskInfo **finp = (Rd__TaskInfo **)(fin + nfin);
  uint64_t wall = nfin ? rd__wall_ms() : 0;
  for (size_t i = 0; i < nfin; i++) {
    done_info(done_oldest(i), &fin[i], now, wall);
    finp[i] = &fin[i];
  }
  m.n_finished = nfin;
  m.finished = finp;
  m.finished_dropped = G.done_dropped;
  m.finished_unsent = G.done_n - nfin;
  m.finished_first = G.done_reported;
  int ok = rd__conn_send(&G.daemon, RD__MSG_TYPE__MSG_OWNER_STATS, &m.base, -1) == 0;
  rd__appm_done(amv, amp, ok);
  free(fin);
  if (!ok) return;
  G.done_n -= nfin;
  G.done_reported += nfin;
  G.done_dropped = 0;
  G.ost.backlog_sig = sig;
  G.ost.nfails = 0;
  G.ost.fails_dropped = 0;
  G.ost.fns.n = G.ost.fns.last = 0;
  memset(G.ost.buckets, 0, sizeof(G.ost.buckets));
  G.ost.sum_ns = G.ost.done = G.ost.failed = 0;
  G.ost.changed = G.done_n > 0;   /* finished tasks left for the next report */
  G.ost.last_sent_ns = now;
}

/* ---- raydist list tasks: what this owner has not finished ----
 *
 * The node asks (MSG_TASK_LIST_ASK, only of owners whose last OwnerStats
 * had something live); the answer holds the `limit` oldest tasks and
 * every state's count, overall and by function.  Costs a walk of the owner's
 * queues and objects, on demand only.  G.mu held. */
#define TL_FUNCS 64
typedef struct tl_acc {
  Rd__TaskInfo *v;
  Rd__TaskInfo **p;
  char (*res)[160];
  size_t n, limit;
  int only;                 /* rows of this state only (-1: all) */
  uint64_t counts[RD_TS_NSTATES], finished;
  uint64_t now, wall;       /* rd__now_ns, rd__wall_ms */
  struct {                  /* the counts by function; [TL_FUNCS]: "(other)" */
    const char *func;
    uint64_t counts[RD_TS_NSTATES];
    uint64_t finished;
  } fn[TL_FUNCS + 1];
  size_t nfn;
} tl_acc;

/* rd__now_ns reading ns as a wall-clock time in ms, by the listing's clocks. */
static uint64_t tl_wall_ms(const tl_acc *a, uint64_t ns) { return a->wall - (a->now > ns ? a->now - ns : 0) / 1000000; }

static void tl_count_func(tl_acc *a, const char *func, int state) {
  size_t i = 0;
  if (!func) func = "";
  while (i < a->nfn && a->fn[i].func != func && strcmp(a->fn[i].func, func) != 0) i++;
  if (i == a->nfn && a->nfn < TL_FUNCS) a->fn[a->nfn++].func = func;
  else if (i == a->nfn) a->fn[i = TL_FUNCS].func = "(other)";
  if (state == RD_TS_FINISHED) a->fn[i].finished++;
  else a->fn[i].counts[state]++;
}

/* a->p[0..n) is a heap with the youngest kept task on top, so the rows
 * sent are the `limit` oldest, whatever the walk's order. */
static void tl_sift_down(tl_acc *a, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < a->n && a->p[l]->age_ns < a->p[m]->age_ns) m = l;
    if (r < a->n && a->p[r]->age_ns < a->p[m]->age_ns) m = r;
    if (m == i) return;
    Rd__TaskInfo *x = a->p[i];
    a->p[i] = a->p[m];
    a->p[m] = x;
    i = m;
  }
}

static Rd__TaskInfo *tl_add(tl_acc *a, const rd__task *t, int state) {
  a->counts[state]++;
  tl_count_func(a, t->func, state);
  if (!a->limit || (a->only >= 0 && state != a->only)) return NULL;
  uint64_t age = a->now > t->submit_ns ? a->now - t->submit_ns : 0;
  Rd__TaskInfo *x;
  if (a->n < a->limit) {
    x = a->p[a->n] = &a->v[a->n];
    for (size_t i = a->n++; i > 0 && a->p[(i - 1) / 2]->age_ns > age; i = (i - 1) / 2) {
      a->p[i] = a->p[(i - 1) / 2];   /* sift up: x's place is found below */
      a->p[(i - 1) / 2] = x;
    }
  } else if (age > a->p[0]->age_ns) {
    x = a->p[0];   /* the youngest kept makes room (its storage is reused) */
  } else {
    return NULL;
  }
  char *res = a->res[x - a->v];
  rd__task_info__init(x);
  x->task_id = t->task_id;
  x->func = (char *)(t->func ? t->func : "");
  x->state = state;
  x->age_ns = age;
  x->created_ms = tl_wall_ms(a, t->submit_ns);
  x->attempt = t->attempt;
  x->actor_id = t->actor ? t->actor->id : t->actor_id;
  x->ret_id = t->nret > 0 ? t->ret_ids[0] : 0;
  x->args_pending = t->deps_pending > 0 ? t->deps_pending : 0;
  x->resources = (char *)"";
  x->parent_task = t->parent;
  x->parent_node = t->parent_node;
  x->parent_pid = t->parent_pid;
  if (t->cls && (state == RD_TS_PENDING_LEASE || state == RD_TS_RETRY_BACKOFF)) {
    rd_res_format(&t->cls->res, res, sizeof(a->res[0]));
    x->resources = res;
  }
  if (state == RD_TS_RETRY_BACKOFF && t->not_before_ns > a->now) x->retry_in_ns = t->not_before_ns - a->now;
  if (a->p[0] == x && a->n == a->limit) tl_sift_down(a, 0);
  return x;
}

/* The calls sent on l: the oldest runs, the rest wait behind it; on an
 * actor, as many as it runs at once (max_concurrency and its groups'
 * threads) count as running, the oldest first. */
static void tl_inflight(tl_acc *a, const rd__lease *l) {
  uint32_t running = l->actor && l->actor->concurrency > 1 ? l->actor->concurrency : 1, k = 0;
  for (const rd__task *t = l->inhead; t; t = t->next, k++) {
    Rd__TaskInfo *x = tl_add(a, t, k < running ? RD_TS_RUNNING : RD_TS_SUBMITTED);
    if (x) {
      x->worker_pid = l->worker_pid;
      x->node = l->node;
      if (x->state == RD_TS_RUNNING) x->start_ms = tl_wall_ms(a, task_start_ns(t, l));
    }
  }
}

/* The finished tasks not reported yet (the node has the rest): every one
 * counted, the most recent as rows
 * while the limit has room after the unfinished ones (called last: a->p is
 * no heap after it). */
static void tl_finished(tl_acc *a) {
  for (size_t k = G.done_n; k-- > 0;) {   /* the most recent first */
    const rd__done *d = done_oldest(k);
    a->finished++;
    tl_count_func(a, d->func, RD_TS_FINISHED);
    if (a->n >= a->limit || (a->only >= 0 && a->only != RD_TS_FINISHED)) continue;
    Rd__TaskInfo *x = a->p[a->n] = &a->v[a->n];
    a->n++;
    done_info(d, x, a->now, a->wall);
  }
}

static void on_task_list_ask(const Rd__TaskListAsk *m) {
  tl_acc a;
  memset(&a, 0, sizeof(a));
  a.limit = m->limit > 10000 ? 10000 : m->limit;   /* the node asks for at most 10000 */
  a.only = m->only > 0 && m->only <= RD_TS_FINISHED + 1 ? (int)m->only - 1 : -1;
  a.now = rd__now_ns();
  a.wall = rd__wall_ms();
  if (a.limit) {
    a.v = malloc(a.limit * sizeof(*a.v));
    a.p = malloc(a.limit * sizeof(*a.p));
    a.res = malloc(a.limit * sizeof(*a.res));
    if (!a.v || !a.p || !a.res) a.limit = 0;   /* out of memory: the counts alone */
  }
  for (rd__sclass *c = G.classes; c; c = c->next)
    for (rd__lease *l = c->leases; l; l = l->next) tl_inflight(&a, l);
  for (rd__actor *x = G.actors; x; x = x->next)
    if (x->conn) tl_inflight(&a, x->conn);
  for (rd__sclass *c = G.classes; c; c = c->next) {
    for (rd__task *t = c->qhead; t; t = t->next) (void)tl_add(&a, t, RD_TS_PENDING_LEASE);
    for (rd__task *t = c->delayed; t; t = t->next) (void)tl_add(&a, t, RD_TS_RETRY_BACKOFF);
  }
  for (rd__actor *x = G.actors; x; x = x->next)
    for (rd__task *t = x->qhead; t; t = t->next)
      (void)tl_add(&a, t, t->deps_pending > 0 ? RD_TS_PENDING_ARGS : RD_TS_PENDING_ACTOR);
  /* tasks waiting for arguments are on the lists of those not ready only
   * (and on one twice when given it twice): each is taken once, at the
   * first of its arguments not ready (actor calls were counted in their
   * actor's queue).  O(tasks x arguments), whatever the lists share. */
  for (uint64_t i = 0; G.objs.slots && i <= G.objs.mask; i++) {
    rd__obj *o = G.objs.slots[i].val;
    for (int j = 0; o && j < o->ndeps; j++) {
      rd__task *t = o->deps[j];
      if (t->actor || t->deps_pending <= 0) continue;
      uint64_t first = 0;
      int times = 0;
      for (int k = 0; k < t->nargs; k++) {
        if (!targ_dep(&t->args[k]) || obj_is_ready(obj_get(t->args[k].oid))) continue;
        if (!first) first = t->args[k].oid;
        times += t->args[k].oid == o->id;
      }
      if (first != o->id) continue;
      int seen = 0;
      for (int q = 0; times > 1 && q < j && !seen; q++) seen = o->deps[q] == t;
      if (!seen) (void)tl_add(&a, t, RD_TS_PENDING_ARGS);
    }
  }
  if (m->finished && G.done_n) tl_finished(&a);
  Rd__TaskList r = RD__TASK_LIST__INIT;
  r.finished = a.finished;
  r.finished_reported = G.done_reported;   /* those reported after this answer are in it */
  r.req_id = m->req_id;
  r.n_tasks = a.n;
  r.tasks = a.p;
  r.n_counts = RD_TS_NSTATES;
  r.counts = a.counts;
  Rd__FuncTaskCounts fc[TL_FUNCS + 1], *fcp[TL_FUNCS + 1];
  int other = a.fn[TL_FUNCS].func != NULL;
  for (size_t i = 0; i < a.nfn + (size_t)other; i++) {
    size_t k = i < a.nfn ? i : TL_FUNCS;
    rd__func_task_counts__init(&fc[i]);
    fc[i].func = (char *)a.fn[k].func;
    fc[i].n_counts = RD_TS_NSTATES;
    fc[i].counts = a.fn[k].counts;
    fc[i].finished = a.fn[k].finished;
    fcp[i] = &fc[i];
  }
  r.n_by_func = a.nfn + (size_t)other;
  r.by_func = fcp;
  (void)rd__conn_send(&G.daemon, RD__MSG_TYPE__MSG_TASK_LIST, &r.base, -1);
  free(a.v);
  free(a.p);
  free(a.res);
}

/* Is b's backoff over (then it is cleared)?  Else *wait is lowered to
 * when it will be, and *waiting set. */
static int ask_due(rd__ask_backoff *b, uint64_t now, int64_t *wait, int *waiting) {
  if (!b->after_ns) return 0;
  if (b->after_ns <= now) {
    b->after_ns = 0;
    return 1;
  }
  wait_until(wait, b->after_ns, now);
  *waiting = 1;
  return 0;
}

/* Classes and actors whose backoff after a failure that may pass is over
 * ask again (ask_backoff); *wait is lowered to when the next is due. */
static void asks_due(uint64_t now, int64_t *wait) {
  int waiting = 0;
  G.any_backoff = 0;   /* set again by a backoff begun meanwhile */
  for (rd__sclass *c = G.classes; c; c = c->next)
    if (ask_due(&c->ask, now, wait, &waiting)) class_dispatch(c);
  for (rd__actor *a = G.actors; a; a = a->next)
    if (ask_due(&a->ask, now, wait, &waiting)) actor_dispatch(a);
  if (waiting) G.any_backoff = 1;
}

/* Wait up to timeout ms for a round's sockets: poll() on the whole set ps,
 * or the epoll set, whose events fill ps (pf[].revents, kind, who) as a
 * poll would.  Called without the mutex; what poll or epoll_wait returns. */
static int pump_wait(int use_ep, rd__pollset *ps, int timeout) {
  if (!use_ep) return poll(ps->pf, (nfds_t)ps->n, timeout);
  struct epoll_event ev[EP_MAX];
  int r = epoll_wait(G.epfd, ev, EP_MAX, timeout);
  for (int i = 0; i < r; i++) {
    ps->pf[i] = (struct pollfd){-1, 0, (short)(ev[i].events & 0xffffu)};   /* EPOLLIN == POLLIN, ... */
    ps->kind[i] = EP_KIND(ev[i].data.u64);
    ps->who[i] = EP_WHO(ev[i].data.u64);
  }
  ps->n = r > 0 ? (size_t)r : 0;
  return r;
}

static __thread int closing_thread;   /* this thread runs rd_shutdown */
static int pump_round(int64_t timeout_ms);

/* One round of pump_round; while rd_shutdown runs, RD_ESTATE at once for
 * any other thread, so that a get or wait elsewhere ends ("rd_shutdown was
 * called") before the state it looks at is freed. */
int rd__pump(int64_t timeout_ms) {
  if (G.closing && !closing_thread) return RD_ESTATE;
  G.in_pump++;
  int r = pump_round(timeout_ms);
  if (--G.in_pump == 0 && G.closing) pthread_cond_broadcast(&G.cv);
  return r;
}

/* One round: flush, wait up to timeout_ms, handle what arrived.  Called
 * with the mutex held; it is dropped while this thread waits. */
static int pump_round(int64_t timeout_ms) {
  if (G.dead) return RD_ENODE_DIED;
  if (!in_progress_thread) G.user_calls++;
  if (G.pumping) {                              /* another thread pumps: wait */
    /* the progress thread gives way to a caller: wake it from poll() */
    if (G.progress_pumping && !in_progress_thread) wake_pumper();
    int64_t ms = timeout_ms < 0 || timeout_ms > 100 ? 100 : timeout_ms;
    cond_wait_ns(&G.cv, (uint64_t)ms * 1000000u);
    return 0;
  }
  /* forget dead actors with nothing queued: a later call on the handle asks
   * the daemon again and fails the same way (safe here: nothing up the stack
   * is walking the list) */
  if (G.any_dead_actor) {
    G.any_dead_actor = 0;
    for (rd__actor *a = G.actors, *next; a; a = next) {
      next = a->next;
      if (actor_forgettable(a)) actor_forget(a);
      else if (a->state == AH_DEAD) G.any_dead_actor = 1;   /* calls still queued, or lineage: look again */
    }
  }
  /* frames read ahead by the blocking handshake are in the buffer already:
   * handle them before sleeping on a socket that has nothing more to say */
  if (G.daemon.rbuf.len > G.daemon.rbuf.off) {
    rd__frame f;
    int any = 0;
    while (rd__conn_next(&G.daemon, &f) == 1) {
      handle_daemon_frame(&f);
      any = 1;
    }
    if (any) {
      rd__flush_all();
      pthread_cond_broadcast(&G.cv);
      return 0;
    }
  }
  rd__flush_all();
  uint64_t now = rd__now_ns();
  return_idle_leases(now);
  class_sweep(now);
  int64_t delay_wait = -1;   /* ms until the next delayed retry is due */
  int any_delayed = 0;
  for (rd__sclass *c = G.any_delayed ? G.classes : NULL; c; c = c->next) {
    if (!c->delayed) continue;
    any_delayed = 1;
    uint64_t next = class_undelay(c, now);
    if (c->qhead) class_dispatch(c);
    if (next) wait_until(&delay_wait, next, now);
  }
  G.any_delayed = any_delayed;
  if (G.any_backoff) asks_due(now, &delay_wait);   /* ... or the next lease asked for again */
  int64_t ost_wait = -1;   /* ms until the owner's next report is due */
  ost_report(now, 0, &ost_wait);
  int64_t gone_wait;   /* ms until a lease stops waiting for its worker's end */
  if (leases_gone_due(now, &gone_wait) > 0) {   /* tasks failed or went back: their waiters look */
    rd__flush_all();
    pthread_cond_broadcast(&G.cv);
    return 0;
  }
  rd__flush_all();

  int64_t idle_wait = -1;
  int inflight = G.ninflight;
  size_t nconn = 0;
  for (rd__sclass *c = G.leased; c; c = c->lnext)
    for (rd__lease *l = c->leases; l; l = l->next, nconn++)
      if (!l->gone_ns && l->idle_since) wait_until(&idle_wait, l->idle_since + G.lease_idle_ns, now);
  /* only whether there are more than POLL_SMALL: a process connected to
   * thousands of actors does not walk them every round */
  for (rd__actor *a = G.actors; a && nconn <= POLL_SMALL; a = a->next) nconn += a->conn && !a->conn->gone_ns;
  for (rd__serve *s = G.serves; s && nconn <= POLL_SMALL; s = s->next) nconn++;
  /* a few connections: poll() them (cheaper than epoll's wake-ups: the
   * sync task path ran 15% slower through epoll); many: the epoll set,
   * which holds every connection, so a round costs what is ready.  Either
   * way every connection is watched: one left out would never be read */
  int use_ep = nconn > POLL_SMALL && ep_prepare() == 0;
  rd__pollset ps = G.pollset;
  G.pollset = (rd__pollset){0};
  ps.n = 0;
  int full = 0;
  if (!use_ep) {
    full = poll_add(&ps, G.daemon.fd, poll_events(&G.daemon), 0, NULL) | poll_add(&ps, G.wakefd, POLLIN, 3, NULL);
    for (rd__sclass *c = G.leased; c; c = c->lnext)
      for (rd__lease *l = c->leases; l; l = l->next)
        if (!l->gone_ns) full |= poll_add(&ps, l->conn.fd, poll_events(&l->conn), 1, l);   /* else its socket is done */
    for (rd__actor *a = G.actors; a; a = a->next)
      if (a->conn && !a->conn->gone_ns) full |= poll_add(&ps, a->conn->conn.fd, poll_events(&a->conn->conn), 1, a->conn);
    for (rd__serve *s = G.serves; s; s = s->next)
      if (!s->closed) full |= poll_add(&ps, s->conn.fd, poll_events(&s->conn), 2, s);
  } else {
    full = pollset_reserve(&ps, EP_MAX);   /* room for the events a round takes */
  }
  if (full) {   /* a few bytes a connection: the process is about out of memory */
    rd__log(RD_LOG_ERROR, "out of memory for the poll set of %zu connections", ps.n + 1);
    pollset_put_back(&ps);
    cond_wait_ns(&G.cv, 1000000u);
    return RD_ENOMEM;
  }
  struct pollfd *pf = ps.pf;
  void **who = ps.who;
  int *kind = ps.kind;
  int64_t wait = timeout_ms;
  if (idle_wait >= 0 && (wait < 0 || idle_wait < wait)) wait = idle_wait;
  if (delay_wait >= 0 && (wait < 0 || delay_wait < wait)) wait = delay_wait;
  if (ost_wait >= 0 && (wait < 0 || ost_wait < wait)) wait = ost_wait;
  if (gone_wait >= 0 && (wait < 0 || gone_wait < wait)) wait = gone_wait;
  if (wait > INT_MAX) wait = INT_MAX;

  G.pumping = 1;
  uint64_t gen = G.conn_gen;
  pthread_mutex_unlock(&G.mu);
  /* a reply to a short request usually comes within tens of microseconds:
   * polling without sleeping that long saves the wake-up, which costs
   * ~35-70 us when it crosses vCPUs */
  int r = pump_wait(use_ep, &ps, 0);
  /* spin only in the synchronous pattern: an owner waiting for its single
   * request, or a worker whose last wait for work was short.  Streams of
   * pipelined work need the cores for the processes doing it. */
  int spin = G.spin_ns && !in_progress_thread &&
             (G.is_worker && !inflight ? G.last_wait_ns < G.spin_ns : inflight == 1);
  uint64_t wait_start = rd__now_ns();
  if (r == 0 && wait != 0 && spin) {
    uint64_t until = rd__now_ns() + G.spin_ns;
    /* yield between polls: a spinning waiter must not take a core from a
     * process that has work (more runnable processes than cores is common) */
    while (r == 0 && rd__now_ns() < until) {
      sched_yield();
      r = pump_wait(use_ep, &ps, 0);
    }
  }
  if (r == 0 && wait != 0) r = pump_wait(use_ep, &ps, (int)wait);
  nfds_t n = (nfds_t)ps.n;
  if (!in_progress_thread) G.last_wait_ns = rd__now_ns() - wait_start;
  pthread_mutex_lock(&G.mu);
  G.pumping = 0;
  if (r < 0) {
    int err = errno;
    pollset_put_back(&ps);
    pthread_cond_broadcast(&G.cv);
    return err == EINTR ? 0 : RD_ESYS;
  }
  for (nfds_t i = 0; i < n && r > 0; i++) {
    if (!pf[i].revents) continue;
    /* another thread freed a lease or actor connection while this one sat in
     * poll() (rd_cancel with force, say): who[] may point at freed memory
     * and fds may be reused.  Their readiness stays; the next round re-polls. */
    if ((kind[i] == 1 || kind[i] == 2) && G.conn_gen != gen) break;
    if (use_ep && kind[i] != 3) {
      rd__conn *c = kind[i] == 0 ? &G.daemon : kind[i] == 1 ? &((rd__lease *)who[i])->conn : &((rd__serve *)who[i])->conn;
      /* done with writing: stop asking (level-triggered, it would come every round) */
      if ((pf[i].revents & POLLOUT) && !rd__conn_want_write(c)) ep_want_out(c, 0);
      /* a lease waiting for its worker's end and a closed caller are not
       * read any more (the poll path leaves them out) */
      if ((kind[i] == 1 && ((rd__lease *)who[i])->gone_ns) || (kind[i] == 2 && ((rd__serve *)who[i])->closed)) {
        rd__conn_unwatch(c);
        continue;
      }
    }
    if (kind[i] == 3) {
      uint64_t v;
      ssize_t rr = read(G.wakefd, &v, sizeof(v));
      (void)rr;
      continue;
    }
    if (kind[i] == 0) {
      if (conn_drain(&G.daemon, daemon_fn, NULL, NULL) != 0) {
        if (G.is_worker) _exit(0);  /* the node is gone: a worker has nothing left to do */
        fail_everything(RD_ENODE_DIED, "the node daemon died");
        break;
      }
    } else if (kind[i] == 1) {
      rd__lease *l = who[i];
      int dr = conn_drain(&l->conn, lease_fn, l, &l->stop);
      if (l->retired) {   /* lease lists change: the next round re-polls */
        rd__log(RD_LOG_DEBUG, "worker pid %d reached a task's max_calls: its lease goes back", l->worker_pid);
        lease_lost(l, NULL);
        break;
      }
      const char *why = dr == RD_EPROTO || l->broken ? "sent a malformed frame" : "died";
      if (dr != 0 && !l->lost_err && l->ninflight > 0 && !l->broken && dr != RD_EPROTO) {
        l->gone_ns = rd__now_ns(), G.any_gone = 1;   /* its node will say how it ended (on_lease_lost) */
        rd__conn_unwatch(&l->conn);
      }
      else if (dr != 0 && l->actor) actor_conn_lost(l, why);
      else if (dr != 0) lease_lost(l, why);
      /* lease lists may have changed: stop here, the next round re-polls */
      if (dr != 0) break;
    } else {
      rd__serve *s = who[i];
      if (conn_drain(&s->conn, serve_fn, s, &s->closed) != 0) s->closed = 1;
    }
  }
  /* forget serve conns whose owner went away */
  for (rd__serve **pp = &G.serves; *pp;) {
    rd__serve *s = *pp;
    if (s->closed && !s->gone) {
      s->gone = 1;
      rd__worker_serve_gone(s);
    }
    if (s->closed && s->nborrows > 0) serve_fail_borrows(s);
    if (s->closed) {
      int busy = s->busy;
      for (rd__wtask *w = G.wq_head; w; w = w->next) busy |= w->from == s;
      if (!busy) {
        *pp = s->next;
        serve_forget_origin(s);
        rd__conn_close(&s->conn);
        free(s);
        continue;
      }
    }
    pp = &s->next;
  }
  pollset_put_back(&ps);
  rd__flush_all();
  pthread_cond_broadcast(&G.cv);
  return 0;
}

static void wake_pumper(void) {
  if (G.pumping && G.wakefd >= 0) {
    uint64_t one = 1;
    ssize_t w = write(G.wakefd, &one, sizeof(one));
    (void)w;
  }
}

/* Frames were queued: write them now, or have the pumping thread (which may
 * sit in poll()) write them. */
static void flush_or_wake(void) {
  if (!G.pumping) rd__flush_all();
  else wake_pumper();
}

/* ------------------------------------------------------ progress thread
 *
 * Tasks are sent, replies read and idle leases returned by whichever thread
 * pumps.  A program busy outside the library (a driver computing between
 * submits, a task that submitted children and then works) would leave its
 * queued tasks unsent and its leases held.  The progress thread pumps for it:
 * only while this process owns work (queued or running tasks and actor calls,
 * leases), only when no other thread is pumping, and only once no thread has
 * entered the library for progress_grace_ns, so that a caller's synchronous
 * round trips never pay a hand-over.  A caller that finds it pumping wakes it
 * (wake_pumper) and takes over as soon as its poll() returns. */

static int owner_has_work(void) {
  /* live: tasks waiting for an argument are on no queue, and the node may
   * ask about them (raydist list tasks) */
  if (npending_delete || G.npending_release || G.cq_nwatch || G.ost.changed || G.ost.live) return 1;
  for (rd__sclass *c = G.classes; c; c = c->next)
    if (c->qhead || c->delayed || c->leases || c->req_id) return 1;
  for (rd__actor *a = G.actors; a; a = a->next)
    if (a->qhead || a->state == AH_CONNECTING || (a->conn && a->conn->ninflight)) return 1;
  return 0;
}

static void progress_nap(uint64_t ns) { cond_wait_ns(&G.progress_cv, ns); }

/* Looks every grace period whether it is needed (every 20 ms while a caller
 * pumps, as in a long rd_get); after ~70 ms with nothing owned it waits in
 * poll() for what the node or a peer may still ask of this owner (`raydist
 * list tasks` for its finished tasks, a borrower's question) until
 * submit_task kicks it or a caller comes, so an idle process costs nothing
 * but answers at once, and a busy caller never pays a wake-up.  (Before
 * 2026-12-05 it slept on a condition variable: a driver idle outside the
 * library left the node's questions for its next call, and `ray list
 * tasks` waited 2 s for it.) */
static void *progress_main(void *arg) {
  (void)arg;
  in_progress_thread = 1;
  sigset_t stack_sig;   /* all signals blocked but `raydist stack`'s: its stack is shown too */
  sigemptyset(&stack_sig);
  sigaddset(&stack_sig, rd__stack_signal());
  pthread_sigmask(SIG_UNBLOCK, &stack_sig, NULL);
  pthread_mutex_lock(&G.mu);
  uint64_t seen = G.user_calls, quiet_since = rd__now_ns();
  int idle_naps = 0;
  while (!G.progress_stop && !G.dead) {
    uint64_t now = rd__now_ns();
    if (G.dedup) (void)rd__dedup_tick(G.dedup, now);   /* workers' repeated lines whose window ended */
    if (G.flush_due_ns) {   /* rd__flush_within: a deadline of microseconds, before anything else */
      if (now < G.flush_due_ns) {
        progress_nap(G.flush_due_ns - now);
        continue;
      }
      G.flush_due_ns = 0;
      flush_or_wake();
    }
    if (G.user_calls != seen) {            /* a caller came by: start the grace again */
      seen = G.user_calls;
      quiet_since = now;
    }
    if (!owner_has_work()) {
      class_sweep(now);   /* classes the last tasks left unused */
      if (++idle_naps < 100 / (int)(G.progress_grace_ns / 1000000u + 1)) {
        progress_nap(G.progress_grace_ns);
      } else if (G.pumping) {   /* another thread pumps (a worker's loop, a long rd_get): it answers */
        G.progress_idle = 1;
        progress_nap(1000000000u);
        G.progress_idle = 0;
      } else if (now - quiet_since < G.progress_grace_ns) {
        progress_nap(20000000u);   /* a caller was in the library just now: look again later */
      } else {
        G.progress_idle = G.progress_pumping = 1;
        (void)rd__pump(1000);
        G.progress_idle = G.progress_pumping = 0;
      }
      continue;
    }
    idle_naps = 0;
    if (G.pumping) {   /* a caller pumps (in rd_get, say): it does the work; look again later */
      progress_nap(20000000u);
      continue;
    }
    if (now - quiet_since < G.progress_grace_ns) {
      progress_nap(G.progress_grace_ns);
      continue;
    }
    G.progress_pumping = 1;
    (void)rd__pump(1000);
    G.progress_pumping = 0;
  }
  pthread_mutex_unlock(&G.mu);
  return NULL;
}

/* A child of fork() has no progress thread (only the forking thread is
 * copied): it must not wait for one at rd_shutdown. */
static void progress_atfork_child(void) { G.progress_on = 0; }

/* G.mu held.  Started at the first submit, so a worker that never submits
 * has none.  RAYDIST_PROGRESS_THREAD=0 turns it off; RAYDIST_PROGRESS_GRACE_US
 * sets how long no caller must have entered the library (default 2 ms). */
static void progress_start(void) {
  const char *e = getenv("RAYDIST_PROGRESS_THREAD");
  if (G.progress_on || G.progress_off) return;
  if (e && *e && atoi(e) == 0) {
    G.progress_off = 1;
    return;
  }
  e = getenv("RAYDIST_PROGRESS_GRACE_US");
  double us = e && *e ? atof(e) : 2000.0;
  G.progress_grace_ns = us >= 100 && us < 1e7 ? (uint64_t)(us * 1000) : 2000000u;
  G.progress_stop = 0;
  static int atfork_set;
  if (!atfork_set && pthread_atfork(NULL, NULL, progress_atfork_child) == 0) atfork_set = 1;
  /* signals go to the program's own threads, never to this one (but
   * raydist stack's, which it unblocks) */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int r = pthread_create(&G.progress, NULL, progress_main, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (r != 0) {
    rd__log(RD_LOG_WARN, "no progress thread (%s): queued tasks move only inside library calls", strerror(r));
    G.progress_off = 1;
    return;
  }
  G.progress_on = 1;
}

void rd__flush_within(uint64_t ns) {
  uint64_t due = rd__now_ns() + ns;
  if (G.flush_due_ns && G.flush_due_ns <= due) return;
  G.flush_due_ns = due;
  if (!G.progress_on) progress_start();
  if (G.progress_on) pthread_cond_signal(&G.progress_cv);
  else flush_or_wake();   /* no thread to do it later */
}

void rd__ost_flush(void) {
  int64_t unused = -1;
  ost_report(rd__now_ns(), 1, &unused);
}

/* Work arrived: start the progress thread, or wake it if it sleeps. */
static void progress_kick(void) {
  if (!G.progress_on) progress_start();
  else if (G.progress_idle && G.progress_pumping) wake_pumper();   /* out of its poll() */
  else if (G.progress_idle) pthread_cond_signal(&G.progress_cv);
}

void rd__ost_touch(void) {
  G.ost.changed = 1;
  progress_kick();
}

/* G.mu held; dropped while the thread is joined. */
static void progress_stop(void) {
  if (!G.progress_on) return;
  G.progress_stop = 1;
  pthread_cond_signal(&G.progress_cv);
  wake_pumper();
  pthread_mutex_unlock(&G.mu);
  pthread_join(G.progress, NULL);
  pthread_mutex_lock(&G.mu);
  G.progress_on = 0;
}

/* Send a request to the daemon and wait for its reply (pumping meanwhile). */
int rd__daemon_call(Rd__MsgType type, const ProtobufCMessage *m, uint64_t req_id, Rd__MsgType reply_type,
                    ProtobufCMessage **reply, int64_t timeout_ms) {
  if (G.dead) return RD_ENODE_DIED;
  size_t slot = 0;
  while (slot < G.nreplies && G.replies[slot].req_id) slot++;
  if (slot == G.nreplies) {   /* every slot has a waiter: room for as many again */
    size_t n = G.nreplies ? 2 * G.nreplies : 16;
    rd__reply_slot *p = realloc(G.replies, n * sizeof(*p));
    if (!p) return RD_ENOMEM;
    memset(p + G.nreplies, 0, (n - G.nreplies) * sizeof(*p));
    G.replies = p;
    G.nreplies = n;
  }
  G.replies[slot].req_id = req_id;
  G.replies[slot].type = reply_type;
  G.replies[slot].msg = NULL;
  send_pending_releases();   /* frees must reach the daemon before this request */
  int r = rd__conn_send(&G.daemon, type, m, -1);
  if (r == 0) {
    wake_pumper();
    uint64_t deadline = timeout_ms >= 0 ? rd__now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
    while (!G.replies[slot].msg) {
      if (G.dead) { r = RD_ENODE_DIED; break; }
      int64_t left = -1;
      if (deadline) {
        uint64_t now = rd__now_ns();
        if (now >= deadline) { r = RD_ETIMEDOUT; break; }
        left = (int64_t)((deadline - now) / 1000000) + 1;
      }
      int pr = rd__pump(left);
      if (pr < 0) { r = pr; break; }
    }
  }
  *reply = G.replies[slot].msg;
  G.replies[slot].req_id = 0;
  G.replies[slot].msg = NULL;
  if (r != 0 && *reply) {
    protobuf_c_message_free_unpacked(*reply, NULL);
    *reply = NULL;
  }
  return r;
}

int rd__store_create(uint64_t oid, uint64_t size, uint8_t **ptr, char *err, size_t errlen) {
  if (size > G.store_cap) {
    snprintf(err, errlen, "object of %llu bytes is larger than the object store and its fallback region (%llu bytes)",
             (unsigned long long)size, (unsigned long long)G.store_cap);
    return RD_E2BIG;
  }
  Rd__ObjCreate m = RD__OBJ_CREATE__INIT;
  m.req_id = ++G.next_req;
  m.object_id = oid;
  m.size = size;
  ProtobufCMessage *rep = NULL;
  int r = rd__daemon_call(RD__MSG_TYPE__MSG_OBJ_CREATE, &m.base, m.req_id, RD__MSG_TYPE__MSG_OBJ_CREATE_REPLY,
                          &rep, -1);
  if (r != 0) {
    snprintf(err, errlen, "object store create failed: %s", rd_strerror(r));
    return r;
  }
  Rd__ObjCreateReply *cr = (Rd__ObjCreateReply *)rep;
  r = cr->status;
  if (r == 0 && (cr->offset > G.store_cap || size > G.store_cap - cr->offset)) r = RD_EPROTO;
  if (r == 0) *ptr = G.rw_base + cr->offset;
  else snprintf(err, errlen, "%s", cr->error && *cr->error ? cr->error : rd_strerror(r));
  protobuf_c_message_free_unpacked(rep, NULL);
  return r;
}

void rd__store_seal(uint64_t oid) {
  Rd__ObjSeal m = RD__OBJ_SEAL__INIT;
  m.object_id = oid;
  m.release = 1;
  rd__conn_send(&G.daemon, RD__MSG_TYPE__MSG_OBJ_SEAL, &m.base, -1);
}

void rd__store_release(uint64_t oid) { queue_release(oid, 0, 0); }

/* ---------------------------------------------------------------- API */

#define LOCKED_OR(err)                \
  pthread_mutex_lock(&G.mu);          \
  if (!G.inited) {                    \
    pthread_mutex_unlock(&G.mu);      \
    return (err);                     \
  }                                   \
  G.user_calls++

int rd_put_begin(size_t size, void **data_out, rd_ref *out) {
  if (!data_out || !out) return RD_EINVAL;
  LOCKED_OR(RD_ESTATE);
  uint64_t id = rd__oid_make(G.client_id, ++G.next_seq);
  int r = 0;
  rd__obj *o = obj_new(id, OBJ_PUT_OPEN);
  if (!o) { r = RD_ENOMEM; goto out; }
  if (size <= G.inline_max) {
    o->blob = blob_new(NULL, size);
    if (!o->blob) { r = RD_ENOMEM; goto fail; }
    *data_out = o->blob->data;
  } else {
    char err[256];
    uint8_t *p;
    r = rd__store_create(id, size, &p, err, sizeof(err));
    if (r != 0) {
      rd__log(RD_LOG_WARN, "rd_put: %s", err);
      goto fail;
    }
    *data_out = p;
  }
  out->id = id;
  goto out;
fail:
  rd__u64map_del(&G.objs, id);
  free(o);
out:
  pthread_mutex_unlock(&G.mu);
  return r;
}

int rd_put_seal(rd_ref ref) {
  LOCKED_OR(RD_ESTATE);
  int r = 0;
  rd__obj *o = obj_get(ref.id);
  if (!o || o->state != OBJ_PUT_OPEN) {
    r = RD_EINVAL;
  } else if (o->blob) {
    o->state = OBJ_INLINE;
    obj_ready(o);
  } else {
    rd__store_seal(ref.id);
    o->state = OBJ_STORE;
    rd__flush_all();
    obj_ready(o);
  }
  pthread_mutex_unlock(&G.mu);
  return r;
}

int rd_put(const void *data, size_t size, rd_ref *out) {
  if ((!data && size) || !out) return RD_EINVAL;
  void *p;
  int r = rd_put_begin(size, &p, out);
  if (r != 0) return r;
  if (size) rd__copy(p, data, size);
  return rd_put_seal(*out);
}

int rd_put_refs(const void *data, size_t size, const rd_ref *refs, size_t n, rd_ref *out) {
  if ((!data && size) || (!refs && n) || !out) return RD_EINVAL;
  if (n > BORROW_LIST_MAX) {
    rd__log(RD_LOG_WARN, "rd_put_refs: %zu refs, more than the %d an object may contain", n, BORROW_LIST_MAX);
    return RD_EINVAL;
  }
  LOCKED_OR(RD_ESTATE);
  int r = refs_live("rd_put_refs", refs, n);
  pthread_mutex_unlock(&G.mu);
  if (r != 0) return r;
  rd_ref outer;
  if ((r = rd_put(data, size, &outer)) != 0) return r;
  pthread_mutex_lock(&G.mu);
  rd__obj *o = obj_get(outer.id);
  /* another thread may have dropped one of them meanwhile (its misuse) */
  if ((r = refs_live("rd_put_refs", refs, n)) == 0 && o && n) {
    if (!(o->inner = malloc(n * sizeof(*o->inner)))) r = RD_ENOMEM;
    for (size_t i = 0; r == 0 && i < n; i++) {
      o->inner[i] = refs[i].id;
      obj_get(refs[i].id)->refs++;
    }
    if (r == 0) {
      o->ninner = (uint32_t)n;
      o->inner_held = 1;
    }
  }
  pthread_mutex_unlock(&G.mu);
  if (r != 0) {
    rd_ref_release(outer);
    return r;
  }
  *out = outer;
  return 0;
}

int rd_get_refs(rd_ref ref, rd_ref *out, size_t max, size_t *n_out, int64_t timeout_ms) {
  if (!n_out) return RD_EINVAL;
  int w = rd_wait(&ref, 1, 1, timeout_ms, NULL);
  if (w < 0) return w;
  if (w == 0) return RD_ETIMEDOUT;
  LOCKED_OR(RD_ESTATE);
  rd__obj *o = obj_get(ref.id);
  int r = 0;
  if (!o) {
    r = refs_live("rd_get_refs", &ref, 1);
  } else if (o->state == OBJ_FAILED) {
    r = o->err ? o->err : RD_EOBJECT_LOST;
  } else if (!obj_is_ready(o)) {
    r = RD_ETIMEDOUT;   /* a lost result being rebuilt: pending again */
  } else {
    *n_out = o->ninner;
    if (out && max < o->ninner) {
      rd__log(RD_LOG_WARN, "rd_get_refs: object %llx contains %u refs, room for %zu", (unsigned long long)o->id,
              o->ninner, max);
      r = RD_EINVAL;
    } else if (out && (r = inner_take(o)) == 0) {
      for (uint32_t i = 0; i < o->ninner; i++) {
        obj_get(o->inner[i])->refs++;
        out[i].id = o->inner[i];
      }
    }
  }
  pthread_mutex_unlock(&G.mu);
  return r;
}

/* One more reference to id's object, or with `watch` one more watch
 * (src/watch.h): 0, or RD_EINVAL when it is not live here. */
static int obj_hold(uint64_t id, int watch) {
  pthread_mutex_lock(&G.mu);
  rd__obj *o = G.inited ? obj_get(id) : NULL;
  if (o) ++*(watch ? &o->watchers : &o->refs);
  pthread_mutex_unlock(&G.mu);
  return o ? 0 : RD_EINVAL;
}

/* The last reference to a put not sealed yet (rd_put_begin) is gone, and
 * tasks wait for it: it can never be sealed now (rd_put_seal takes the
 * ref), so it fails, and they with it, instead of waiting for ever. */
static void put_abandoned(rd__obj *o) {
  if (!o->blob) {   /* its store room and pins go now, as when it is freed */
    queue_release(o->id, 1, o->node);
    queue_release(o->id, 0, 0);
  }
  char msg[200];
  snprintf(msg, sizeof(msg), "object %llx: its put was released before rd_put_seal, so it is never ready",
           (unsigned long long)o->id);
  rd__blob *b = blob_new(msg, strlen(msg));
  obj_set_failed(o, RD_EOBJECT_LOST, b);
  blob_unref(b);
  obj_ready(o);   /* its dependents fail; it goes once they are through */
}

/* Drop what obj_hold added; the object goes when nothing keeps it. */
static void obj_unhold(uint64_t id, int watch) {
  pthread_mutex_lock(&G.mu);
  rd__obj *o = G.inited ? obj_get(id) : NULL;
  int *count = !o ? NULL : watch ? &o->watchers : &o->refs;
  if (count && *count > 0) {
    --*count;
    if (o->refs == 0 && o->state == OBJ_PUT_OPEN && (obj_needed(o) || o->watchers > 0)) put_abandoned(o);
    else obj_maybe_free(o);
    if (npending_delete) flush_or_wake();
  }
  pthread_mutex_unlock(&G.mu);
}

void rd_ref_retain(rd_ref ref) { (void)obj_hold(ref.id, 0); }
void rd_ref_release(rd_ref ref) { obj_unhold(ref.id, 0); }
int rd__watch_add(rd_ref ref) { return obj_hold(ref.id, 1); }
void rd__watch_drop(rd_ref ref) { obj_unhold(ref.id, 1); }

static int obj_is_ready(const rd__obj *o) {
  return !o || o->state == OBJ_INLINE || o->state == OBJ_STORE || o->state == OBJ_FAILED;
}

/* For rd_wait: a ref released meanwhile (by another thread) is not ready. */
static int ref_ready(uint64_t id) {
  rd__obj *o = obj_get(id);
  return o && obj_is_ready(o);
}

enum { BUF_NONE = 0, BUF_BLOB = 1, BUF_STORE = 2 };

static void buf_fail(rd_buf *b, int err, rd__blob *msg) {
  if (!msg) msg = blob_new(rd_strerror(err), strlen(rd_strerror(err)));
  else msg->refs++;
  b->error = err;
  b->data = msg ? (const void *)msg->data : (const void *)"";
  b->size = msg ? msg->size : 0;
  b->priv_[0] = msg ? BUF_BLOB : BUF_NONE;
  b->priv_[1] = (uint64_t)(uintptr_t)msg;
}

/* RD_EINVAL (with a log line naming `who`) unless every ref is live here. */
static int refs_live(const char *who, const rd_ref *refs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (!obj_get(refs[i].id)) {
      rd__log(RD_LOG_WARN, "%s: ref %zu (%llx) is not a live reference of this process", who, i,
              (unsigned long long)refs[i].id);
      return RD_EINVAL;
    }
  }
  return 0;
}

/* A task that waits in rd_get/rd_wait for longer than BLOCKED_NOTIFY_NS
 * tells its node (WorkerBlocked), which lends the lease's CPUs to other tasks
 * until it resumes: the children a task waits for then run even when waiting
 * parents hold every CPU (Ray's blocked workers).  A shorter wait, a quick
 * child's, sends nothing.  Actors keep their CPUs. */
#define BLOCKED_NOTIFY_NS 1000000u

typedef struct wait_block {
  uint64_t since;
  int told;
} wait_block;

static void blocked_send(int on) {
  Rd__WorkerBlocked m = RD__WORKER_BLOCKED__INIT;
  m.blocked = on;
  (void)rd__conn_send(&G.daemon, RD__MSG_TYPE__MSG_WORKER_BLOCKED, &m.base, -1);
  flush_or_wake();
}

/* Before each pump of a wait: returns the pump's timeout, at most 1 ms until
 * the wait has lasted long enough to be told. */
static int64_t wait_block_round(wait_block *b, int64_t left) {
  if (!G.is_worker || b->told || left == 0 || rd__worker_is_actor()) return left;
  uint64_t now = rd__now_ns();
  if (!b->since) b->since = now;
  if (now - b->since >= BLOCKED_NOTIFY_NS) {
    b->told = 1;
    if (G.nblocked++ == 0) {
      rd__worker_hand_back();
      blocked_send(1);
    }
    return left;
  }
  return left < 0 || left > 1 ? 1 : left;
}

static void wait_block_end(wait_block *b) {
  if (b->told && --G.nblocked == 0 && !G.dead) blocked_send(0);
  b->told = 0;
}

/* A wait of rd_get, rd_wait or rd_stream_next_any: its deadline (0: none),
 * whether it has read the sockets once, and its node's blocked notice. */
typedef struct waiter {
  uint64_t deadline;
  int polled;
  wait_block wb;
} waiter;

static void waiter_start(waiter *w, int64_t timeout_ms) {
  w->deadline = timeout_ms >= 0 ? rd__now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
  w->polled = 0;
  w->wb.since = 0;
  w->wb.told = 0;
}

/* One round of the wait, after its condition was found unmet: 1 once the
 * deadline has passed, else what rd__pump returned pumping until the
 * deadline (or 1 ms, while the node is not told the wait blocks).  Even a
 * zero timeout reads what the sockets already hold, once (polled). */
static int waiter_round(waiter *w) {
  int64_t left = -1;   /* no deadline */
  if (w->deadline) {
    uint64_t now = rd__now_ns();
    if (now >= w->deadline && w->polled) return 1;
    left = now >= w->deadline ? 0 : (int64_t)((w->deadline - now) / 1000000) + 1;
  }
  w->polled = 1;
  return rd__pump(wait_block_round(&w->wb, left));
}

int rd_get(const rd_ref *refs, size_t n, rd_buf *out, int64_t timeout_ms) {
  if ((!refs || !out) && n) return RD_EINVAL;
  LOCKED_OR(RD_ESTATE);
  int r = refs_live("rd_get", refs, n);
  if (r != 0) {
    pthread_mutex_unlock(&G.mu);
    return r;
  }
  waiter w;
  waiter_start(&w, timeout_ms);
  /* a get of objects already here sends nothing: in a task it must not
   * flush the worker's batched replies one task at a time */
  int sent = 0;
again:
  for (size_t first = 0;;) {
    /* each wake-up looks from the first ref not yet ready on, so a get of
     * many waits in one pass over them, not one per wake-up (a get of 100k
     * results spent 99% of its time rescanning: quadratic) */
    while (first < n && obj_is_ready(obj_get(refs[first].id))) first++;
    if (first == n) {
      /* and all are still ready (a lost result being rebuilt is pending again) */
      size_t i = 0;
      while (i < n && obj_is_ready(obj_get(refs[i].id))) i++;
      if (i == n) break;
      first = i;
    }
    int pr = waiter_round(&w);
    if (pr == 1) { r = RD_ETIMEDOUT; goto out; }
    sent = 1;   /* the pump flushes every socket before it waits */
    if (pr < 0 && pr != RD_ENODE_DIED) { r = pr; goto out; }
    /* G.dead: everything pending failed in fail_everything */
  }
  wait_block_end(&w.wb);
  /* pin store objects with one request */
  uint64_t sids_small[64], *sids = sids_small;
  uint32_t snodes_small[64], *snodes = snodes_small;
  size_t ns = 0;
  if (n > 64 && !(sids = malloc(n * (sizeof(uint64_t) + sizeof(uint32_t))))) { r = RD_ENOMEM; goto out; }
  if (n > 64) snodes = (uint32_t *)(sids + n);
  for (size_t i = 0; i < n; i++) {
    rd__obj *o = obj_get(refs[i].id);   /* NULL: another thread released it (misuse: failed below) */
    if (o && o->state == OBJ_STORE) {
      snodes[ns] = o->node;
      sids[ns++] = o->id;
    }
  }
  Rd__ObjGetReply *gr = NULL;
  if (ns) {
    sent = 1;
    Rd__ObjGet m = RD__OBJ_GET__INIT;
    m.req_id = ++G.next_req;
    m.n_object_ids = ns;
    m.object_ids = sids;
    m.timeout_ms = -1;
    if (G.cluster) {
      m.n_nodes = ns;
      m.nodes = snodes;
    }
    ProtobufCMessage *rep = NULL;
    int cr = rd__daemon_call(RD__MSG_TYPE__MSG_OBJ_GET, &m.base, m.req_id, RD__MSG_TYPE__MSG_OBJ_GET_REPLY, &rep,
                             timeout_ms < 0 ? -1 : timeout_ms + 1000);
    if (cr != 0) {
      if (sids != sids_small) free(sids);
      r = cr;
      goto out;
    }
    gr = (Rd__ObjGetReply *)rep;
    if (gr->n_locs != ns) {
      protobuf_c_message_free_unpacked(rep, NULL);
      if (sids != sids_small) free(sids);
      r = RD_EPROTO;
      goto out;
    }
    /* results lost with their node (or its store) that their lineage can
     * rebuild: run their tasks again and wait for them */
    int rebuilt = 0;
    for (size_t j = 0; j < ns; j++) {
      int st = gr->locs[j]->status;
      rd__obj *o = obj_get(sids[j]);
      if (!o || !o->lineage || (st != RD_ENODE_DIED && st != RD_ENOENT && st != RD_EOBJECT_LOST)) continue;
      rd__log(RD_LOG_INFO, "object %llx on node %u: %s (%s)", (unsigned long long)o->id, o->node, rd_err_name(st),
            gr->error ? gr->error : "");
    rebuilt |= lineage_rerun(o->lineage, st == RD_ENODE_DIED ? o->node : UINT32_MAX, 0);
    }
    /* or rebuilt while the request was out (its node's death was heard
     * meanwhile, lineage_node_dead): the reply is stale, ask again */
    for (size_t i = 0; i < n && !rebuilt; i++) rebuilt = !obj_is_ready(obj_get(refs[i].id));
    if (rebuilt) {
      for (size_t j = 0; j < ns; j++)
        if (gr->locs[j]->status == 0) rd__store_release(sids[j]);
      protobuf_c_message_free_unpacked(&gr->base, NULL);
      gr = NULL;
      if (sids != sids_small) free(sids);
      sids = sids_small;
      snodes = snodes_small;
      rd__flush_all();
      goto again;
    }
  }
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    rd__obj *o = obj_get(refs[i].id);
    /* its pin, asked above (the lock was dropped while asking) */
    Rd__ObjLoc *loc = k < ns && sids[k] == refs[i].id ? gr->locs[k++] : NULL;
    rd_buf *b = &out[i];
    memset(b, 0, sizeof(*b));
    if (!o || (o->state == OBJ_STORE && !loc)) {
      if (loc && loc->status == 0) rd__store_release(refs[i].id);
      char msg[200];
      snprintf(msg, sizeof(msg), "ref %zu (%llx) was released by another thread during rd_get", i,
               (unsigned long long)refs[i].id);
      rd__blob *mb = blob_new(msg, strlen(msg));
      buf_fail(b, RD_EINVAL, mb);
      blob_unref(mb);
    } else if (o->state == OBJ_INLINE) {
      if (loc && loc->status == 0) rd__store_release(refs[i].id);
      o->blob->refs++;
      b->data = o->blob->data;
      b->size = o->blob->size;
      b->priv_[0] = BUF_BLOB;
      b->priv_[1] = (uint64_t)(uintptr_t)o->blob;
    } else if (o->state == OBJ_STORE) {
      if (loc->status != 0 || loc->offset > G.store_cap || loc->size > G.store_cap - loc->offset) {
        int e = loc->status ? loc->status : RD_EPROTO;
        if (e == RD_ENOENT) e = RD_EOBJECT_LOST;
        char msg[400];
        snprintf(msg, sizeof(msg), "object %llx could not be read from the store: %s", (unsigned long long)o->id,
                 gr->error && *gr->error ? gr->error : rd_strerror(loc->status ? loc->status : RD_EPROTO));
        rd__blob *mb = blob_new(msg, strlen(msg));
        buf_fail(b, e, mb);
        blob_unref(mb);
        if (loc->status == 0) rd__store_release(o->id);
      } else {
        b->data = G.ro_base + loc->offset;
        b->size = loc->size;
        b->priv_[0] = BUF_STORE;
        b->priv_[1] = o->id;
      }
    } else {
      if (loc && loc->status == 0) rd__store_release(refs[i].id);
      buf_fail(b, o->err, o->blob);
    }
    if (b->error && r == 0) r = b->error;
  }
  if (gr) protobuf_c_message_free_unpacked(&gr->base, NULL);
  if (sids != sids_small) free(sids);
out:
  wait_block_end(&w.wb);
  if (sent) rd__flush_all();
  pthread_mutex_unlock(&G.mu);
  return r;
}

void rd_buf_release(rd_buf *b) {
  if (!b) return;
  pthread_mutex_lock(&G.mu);
  if (b->priv_[0] == BUF_BLOB) {
    blob_unref((rd__blob *)(uintptr_t)b->priv_[1]);
  } else if (b->priv_[0] == BUF_STORE && G.inited && !G.dead) {
    rd__store_release(b->priv_[1]);
    flush_or_wake();
  }
  memset(b, 0, sizeof(*b));
  pthread_mutex_unlock(&G.mu);
}

int rd_wait(const rd_ref *refs, size_t n, size_t num_ready, int64_t timeout_ms, uint8_t *ready_out) {
  if ((!refs && n) || num_ready > n) return RD_EINVAL;
  LOCKED_OR(RD_ESTATE);
  if (refs_live("rd_wait", refs, n) != 0) {
    pthread_mutex_unlock(&G.mu);
    return RD_EINVAL;
  }
  waiter w;
  waiter_start(&w, timeout_ms);
  int closing = 0;
  /* As in rd_get: the ready prefix only grows, and past it a wake-up counts
   * only until num_ready is reached or out of reach, so waiting for all of
   * many refs is one pass over them, not one per wake-up.  Only the pump
   * flushes. */
  for (size_t first = 0;;) {
    while (first < n && ref_ready(refs[first].id)) first++;
    size_t cnt = first;
    /* stop once num_ready is reached, or out of reach (a wait for all) */
    for (size_t i = first; i < n && cnt < num_ready && cnt + (n - i) >= num_ready; i++) cnt += ref_ready(refs[i].id);
    if (G.dead) break;
    if (cnt >= num_ready) {
      /* and still so (a lost result being rebuilt is pending again) */
      cnt = 0;
      for (size_t i = 0; i < n; i++) cnt += ref_ready(refs[i].id);
      if (cnt >= num_ready) break;
      first = 0;
    }
    int pr = waiter_round(&w);
    if (pr == RD_ESTATE) closing = 1;   /* rd_shutdown in another thread */
    if (pr == 1 || (pr < 0 && !G.dead)) break;
  }
  wait_block_end(&w.wb);
  int ready = 0;
  for (size_t i = 0; i < n; i++) {
    int rdy = ref_ready(refs[i].id);
    if (ready_out) ready_out[i] = (uint8_t)rdy;
    ready += rdy;
  }
  pthread_mutex_unlock(&G.mu);
  return closing ? RD_ESTATE : ready;
}

/* ---- completion queues (rd_cq_*) ----
 *
 * A watch (rd__cqw) sits on its object's list (o->cqw) and on its queue's,
 * holding one reference to the object.  When the object becomes ready
 * (obj_ready) each watch turns into an event of its queue, keeping that
 * reference for the taker; the queue's eventfd is written when its event
 * list stops being empty and read when rd_cq_take empties it, so the fd is
 * readable exactly while events wait.  Room for every event a queue may
 * get is reserved at rd_cq_add, so firing never allocates. */

typedef struct rd__cqw {
  struct rd_cq *cq;
  uint64_t id, tag;
  int items;                           /* rd_cq_add_stream: fired by an item too */
  struct rd__cqw *next_obj;            /* the object's watches */
  struct rd__cqw *prev_cq, *next_cq;   /* the queue's watches */
} rd__cqw;

struct rd_cq {
  int efd;
  int closed;                /* by rd_shutdown: its objects are gone */
  rd__cqw *watches;
  size_t nwatch;
  rd_cq_event *ev;           /* ev[head .. head + nev) */
  size_t head, nev, capev;
  struct rd_cq *next;        /* G.cqs */
};

static void cq_signal(rd_cq *cq, int on) {
  if (on) {
    uint64_t one = 1;
    ssize_t w = write(cq->efd, &one, sizeof(one));
    (void)w;   /* EAGAIN only at a count of 2^64 - 2: it is readable then */
  } else {
    uint64_t v;
    ssize_t r = read(cq->efd, &v, sizeof(v));
    (void)r;
  }
}

static void cq_unlink_watch(rd__cqw *w) {
  rd_cq *cq = w->cq;
  if (w->prev_cq) w->prev_cq->next_cq = w->next_cq;
  else cq->watches = w->next_cq;
  if (w->next_cq) w->next_cq->prev_cq = w->prev_cq;
  cq->nwatch--;
  G.cq_nwatch--;
}

/* o became ready (or, with items, stream o has an item to take): its
 * watches (with items, its stream watches) become events, in the order
 * they were added. */
static void cq_fire(rd__obj *o, int items) {
  rd__cqw *w = o->cqw, *rev = NULL, **keep = &o->cqw;
  o->cqw = NULL;
  while (w) {   /* the list is newest first */
    rd__cqw *next = w->next_obj;
    if (items && !w->items) {   /* waits for the end: stays */
      *keep = w;
      keep = &w->next_obj;
    } else {
      w->next_obj = rev;
      rev = w;
    }
    w = next;
  }
  *keep = NULL;
  int status = o->state == OBJ_FAILED ? (o->err ? o->err : RD_ETASK) : 0;
  for (w = rev; w;) {
    rd__cqw *next = w->next_obj;
    rd_cq *cq = w->cq;
    cq_unlink_watch(w);
    if (cq->head + cq->nev == cq->capev) {   /* reserved room: slide to the front */
      memmove(cq->ev, cq->ev + cq->head, cq->nev * sizeof(*cq->ev));
      cq->head = 0;
    }
    rd_cq_event *e = &cq->ev[cq->head + cq->nev++];
    e->tag = w->tag;
    e->ref.id = o->id;   /* the watch's reference passes to the event */
    e->status = status;
    if (cq->nev == 1) cq_signal(cq, 1);
    free(w);
    w = next;
  }
}

int rd_cq_create(rd_cq **out) {
  if (!out) return RD_EINVAL;
  *out = NULL;
  LOCKED_OR(RD_ESTATE);
  rd_cq *cq = calloc(1, sizeof(*cq));
  int r = cq ? 0 : RD_ENOMEM;
  if (cq && (cq->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
    rd__log(RD_LOG_ERROR, "rd_cq_create: eventfd: %s", strerror(errno));
    free(cq);
    cq = NULL;
    r = RD_ESYS;
  }
  if (cq) {
    cq->next = G.cqs;
    G.cqs = cq;
    *out = cq;
  }
  pthread_mutex_unlock(&G.mu);
  return r;
}

int rd_cq_fd(const rd_cq *cq) { return cq ? cq->efd : -1; }

static int cq_add(rd_cq *cq, rd_ref ref, uint64_t tag, int items) {
  const char *who = items ? "rd_cq_add_stream" : "rd_cq_add";
  if (!cq) return RD_EINVAL;
  pthread_mutex_lock(&G.mu);
  if (cq->closed || !G.inited) {
    pthread_mutex_unlock(&G.mu);
    return RD_ESTATE;
  }
  rd__obj *o = obj_get(ref.id);
  if (!o || (items && !o->stream)) {
    rd__log(RD_LOG_WARN, "%s: %llx is not a live %sreference of this process", who, (unsigned long long)ref.id,
            items ? "stream " : "");
    pthread_mutex_unlock(&G.mu);
    return RD_EINVAL;
  }
  /* room for every event this queue may hold: those waiting, those to come */
  size_t need = cq->nev + cq->nwatch + 1;
  if (need > cq->capev) {
    size_t cap = cq->capev ? cq->capev : 16;
    while (cap < need) cap *= 2;
    rd_cq_event *ev = malloc(cap * sizeof(*ev));
    if (!ev) {
      pthread_mutex_unlock(&G.mu);
      return RD_ENOMEM;
    }
    if (cq->nev) memcpy(ev, cq->ev + cq->head, cq->nev * sizeof(*ev));
    free(cq->ev);
    cq->ev = ev;
    cq->head = 0;
    cq->capev = cap;
  }
  rd__cqw *w = calloc(1, sizeof(*w));
  if (!w) {
    pthread_mutex_unlock(&G.mu);
    return RD_ENOMEM;
  }
  w->cq = cq;
  w->id = ref.id;
  w->tag = tag;
  w->items = items;
  w->next_cq = cq->watches;
  if (cq->watches) cq->watches->prev_cq = w;
  cq->watches = w;
  cq->nwatch++;
  G.cq_nwatch++;
  o->refs++;   /* the watch's reference */
  w->next_obj = o->cqw;
  o->cqw = w;
  if (obj_is_ready(o)) cq_fire(o, 0);
  else if (items && rd__idq_count(&o->stream->items)) cq_fire(o, 1);
  else progress_kick();   /* someone must read the answer */
  pthread_mutex_unlock(&G.mu);
  return 0;
}

int rd_cq_add(rd_cq *cq, rd_ref ref, uint64_t tag) { return cq_add(cq, ref, tag, 0); }
int rd_cq_add_stream(rd_cq *cq, rd_ref stream, uint64_t tag) { return cq_add(cq, stream, tag, 1); }

int rd_cq_take(rd_cq *cq, rd_cq_event *out, size_t max, int64_t timeout_ms) {
  if (!cq || (!out && max)) return RD_EINVAL;
  pthread_mutex_lock(&G.mu);
  int r = 0;
  if (G.inited) G.user_calls++;
  waiter w;
  waiter_start(&w, timeout_ms);
  for (;;) {
    if (cq->closed || !G.inited) {
      r = RD_ESTATE;
      break;
    }
    if (cq->nev) {
      size_t n = cq->nev < max ? cq->nev : max;
      if (n) memcpy(out, cq->ev + cq->head, n * sizeof(*out));
      cq->head += n;
      cq->nev -= n;
      if (!cq->nev) {
        cq->head = 0;
        cq_signal(cq, 0);
      }
      r = (int)(n > INT_MAX ? INT_MAX : n);
      break;
    }
    if (!cq->nwatch) {
      r = RD_EEND;
      break;
    }
    if (!max || G.dead) break;   /* a daemon gone fails every pending object: events come first */
    int pr = waiter_round(&w);
    if (pr == 1 || (pr < 0 && !G.dead)) break;
  }
  wait_block_end(&w.wb);
  pthread_mutex_unlock(&G.mu);
  return r;
}

size_t rd_cq_size(const rd_cq *cq) {
  if (!cq) return 0;
  pthread_mutex_lock(&G.mu);
  size_t n = cq->nev + cq->nwatch;
  pthread_mutex_unlock(&G.mu);
  return n;
}

/* Take the first watch of cq off its object and its queue, and free it;
 * the id of its object, whose reference it held. */
static uint64_t cq_watch_remove(rd_cq *cq) {
  rd__cqw *w = cq->watches;
  uint64_t id = w->id;
  rd__obj *o = obj_get(id);
  for (rd__cqw **pp = o ? &o->cqw : NULL; pp && *pp; pp = &(*pp)->next_obj)
    if (*pp == w) {
      *pp = w->next_obj;
      break;
    }
  cq_unlink_watch(w);
  free(w);
  return id;
}

/* rd_shutdown: the objects go, so do the watches and events; the fd stays
 * readable so that a loop waiting on it hears of it. */
static void cq_close(rd_cq *cq) {
  while (cq->watches) (void)cq_watch_remove(cq);
  if (!cq->nev) cq_signal(cq, 1);
  cq->nev = cq->head = 0;
  cq->closed = 1;
}

void rd_cq_destroy(rd_cq *cq) {
  if (!cq) return;
  pthread_mutex_lock(&G.mu);
  if (!cq->closed) {
    while (cq->watches) ref_drop(cq_watch_remove(cq));
    for (size_t i = 0; i < cq->nev; i++) ref_drop(cq->ev[cq->head + i].ref.id);
    if (npending_delete) flush_or_wake();
  }
  for (rd_cq **pp = &G.cqs; *pp; pp = &(*pp)->next)
    if (*pp == cq) {
      *pp = cq->next;
      break;
    }
  pthread_mutex_unlock(&G.mu);
  close(cq->efd);
  free(cq->ev);
  free(cq);
}

/* rd_stream_next_any's look at the streams: 0 with an item taken, else
 * the code to return, or 1 to wait on. */
static int streams_take(const rd_ref *streams, size_t n, size_t *index, rd_ref *item) {
  int ended_ok = 1;
  for (size_t i = 0; i < n; i++) {
    rd__obj *o = obj_get(streams[i].id);
    if (!o || !o->stream) {
      rd__log(RD_LOG_WARN, "rd_stream_next: %llx is not a live stream ref of this process (a streaming task's)",
              (unsigned long long)streams[i].id);
      return RD_EINVAL;
    }
    rd__stream *st = o->stream;
    if (rd__idq_count(&st->items)) {
      item->id = rd__idq_pop(&st->items);   /* its reference passes to the caller */
      *index = i;
      st->taken++;
      stream_grant(st);
      return 0;
    }
    ended_ok &= o->state != OBJ_PENDING;
  }
  for (size_t i = 0; i < n; i++) {   /* no item anywhere: a stream that failed says so */
    rd__obj *o = obj_get(streams[i].id);
    if (o->state == OBJ_FAILED) {
      *index = i;
      return o->err ? o->err : RD_ETASK;
    }
  }
  return ended_ok ? RD_EEND : 1;
}

int rd_stream_next_any(const rd_ref *streams, size_t n, size_t *index, rd_ref *item, int64_t timeout_ms) {
  if (!streams || !n || !index || !item) return RD_EINVAL;
  LOCKED_OR(RD_ESTATE);
  waiter w;
  waiter_start(&w, timeout_ms);
  int r;
  while ((r = streams_take(streams, n, index, item)) == 1) {
    if (G.dead) {
      r = RD_ENODE_DIED;
      break;
    }
    int pr = waiter_round(&w);
    if (pr == 1 || (pr < 0 && !G.dead)) {
      r = pr == 1 ? RD_ETIMEDOUT : RD_ESYS;
      break;
    }
  }
  wait_block_end(&w.wb);
  pthread_mutex_unlock(&G.mu);
  return r;
}

int rd_stream_next(rd_ref stream, rd_ref *item, int64_t timeout_ms) {
  size_t index;
  return rd_stream_next_any(&stream, 1, &index, item, timeout_ms);
}

void rd_task_opts_init(rd_task_opts *o) {
  memset(o, 0, sizeof(*o));
  o->num_cpus = 1;
  o->num_returns = 1;
  o->max_retries = 3;
  o->bundle_index = -1;
  o->max_task_retries = RD_ACTOR_DEFAULT;
}

/* The resources a task, an actor or a bundle asks for, from its options'
 * num_cpus, num_gpus, memory and resources: 0, or RD_EINVAL with err. */
static int amounts_to_resources(double cpus, double gpus, uint64_t memory, const char *custom, rd_resources *r,
                                char *err, size_t errlen) {
  memset(r, 0, sizeof(*r));
  if (rd_res_from_double(cpus, &r->cpu) != 0) {
    snprintf(err, errlen, "num_cpus %g is invalid (negative, or above 1 and not whole)", cpus);
    return RD_EINVAL;
  }
  if (rd_res_from_double(gpus, &r->gpu) != 0) {
    snprintf(err, errlen, "num_gpus %g is invalid (negative, or above 1 and not whole)", gpus);
    return RD_EINVAL;
  }
  if (memory > INT64_MAX) {
    snprintf(err, errlen, "memory is too large");
    return RD_EINVAL;
  }
  r->memory = (int64_t)memory;
  if (rd__res_parse_custom(r, custom, err, (int)errlen) != 0) return RD_EINVAL;
  return 0;
}

static int opts_to_resources(const rd_task_opts *o, rd_resources *r, char *err, size_t errlen) {
  return amounts_to_resources(o->num_cpus, o->num_gpus, o->memory, o->resources, r, err, errlen);
}

/* Whether by-value argument v travels inside the task message: small, and
 * within RD_MSG_INLINE_BUDGET with those before it (*used, added to). */
static int arg_inline(const rd_value *v, size_t *used) {
  if (v->kind != RD_VALUE_BYTES || v->size > G.inline_max || v->size > RD_MSG_INLINE_BUDGET - *used) return 0;
  *used += v->size;
  return 1;
}

/* Room in o->deps for its dependents to come (o->deps_want): 0 or RD_ENOMEM. */
static int deps_reserve(rd__obj *o) {
  int want = o->ndeps + o->deps_want;
  if (o->capdeps >= want) return 0;
  int cap = o->capdeps * 2 > want ? o->capdeps * 2 : want;   /* many tasks on one object: amortised */
  rd__task **p = realloc(o->deps, (size_t)cap * sizeof(*p));
  if (!p) return RD_ENOMEM;
  o->deps = p;
  o->capdeps = cap;
  return 0;
}

/* submit_task gives up: what it allocated goes. */
static void submit_undo(rd__obj **rets, rd__obj **rets_in, int nret, uint64_t *big_ids, uint64_t *big_in,
                        rd__stream *st, rd__task *t) {
  for (int k = 0; rets && k < nret; k++) free(rets[k]);
  if (rets != rets_in) free(rets);
  if (big_ids != big_in) free(big_ids);
  free(st);
  free(t);
}

/* Everything a task and an actor call share: arguments (large ones through
 * the store), dependencies, return objects.  Called with the mutex held;
 * exactly one of cls and actor is set; o: a task's options (retries,
 * max_calls), NULL for an actor call.  Nothing changes on error. */
/* stream_window: 0 for a task with nret returns; else a streaming task
 * (nret 1, its stream object), which may yield that many items ahead (-1:
 * any number). */
static int submit_task(const char *func, rd__sclass *cls, rd__actor *actor, const rd_value *args, size_t nargs,
                       int nret, const rd_task_opts *o, int stream_window, const char *cgroup, rd_ref *refs_out) {
  size_t bytes = 0, nlist = 0, nbig = 0;   /* inline bytes; borrowed ids in lists; by-value args through the store */
  for (size_t i = 0; i < nargs; i++) {
    if (args[i].kind == RD_VALUE_BYTES && !arg_inline(&args[i], &bytes)) nbig++;
    if (args[i].kind == RD_VALUE_BORROW_LIST) {
      const rd_ref *refs = args[i].data;
      for (size_t k = 0; k < args[i].size; k++) {
        if (!obj_get(refs[k].id)) {
          rd__log(RD_LOG_WARN, "rd_submit '%s': ref %zu of argument %zu is not a live reference", func, k, i);
          return RD_EINVAL;
        }
      }
      nlist += args[i].size;
    }
    if (args[i].kind == RD_VALUE_REF || args[i].kind == RD_VALUE_BORROW) {
      rd__obj *o = obj_get(args[i].ref.id);
      if (!o) {
        rd__log(RD_LOG_WARN, "rd_submit '%s': argument %zu is not a live reference", func, i);
        return RD_EINVAL;
      }
    }
  }
  /* room to record this task as a dependent of each argument not ready,
   * reserved before any change (an object given twice: twice) */
  for (size_t i = 0; i < nargs; i++) {
    if (args[i].kind != RD_VALUE_REF) continue;
    rd__obj *o = obj_get(args[i].ref.id);
    if (!obj_is_ready(o)) o->deps_want++;
  }
  int dr = 0;
  for (size_t i = 0; i < nargs; i++) {
    if (args[i].kind != RD_VALUE_REF) continue;
    rd__obj *o = obj_get(args[i].ref.id);
    if (!o->deps_want) continue;
    if (!dr) dr = deps_reserve(o);
    o->deps_want = 0;
  }
  if (dr) return dr;
  rd__task *t = calloc(1, sizeof(*t) + nargs * sizeof(rd__targ) + (nlist + (size_t)nret) * sizeof(uint64_t) + bytes);
  rd__obj *rets_in[4] = {0}, **rets = nret > 4 ? calloc((size_t)nret, sizeof(*rets)) : rets_in;
  uint64_t big_in[4], *big_ids = nbig > 4 ? malloc(nbig * sizeof(*big_ids)) : big_in;
  int ok = t && rets && big_ids && (cls || actor) && rd__u64map_reserve(&G.objs, G.objs.count + (uint64_t)nret + nargs) == 0;
  for (int i = 0; ok && i < nret; i++) ok = (rets[i] = calloc(1, sizeof(rd__obj))) != NULL;
  rd__stream *st = ok && stream_window ? calloc(1, sizeof(*st)) : NULL;
  if (stream_window && !st) ok = 0;
  /* by-value arguments above the inline limit (or past the message's
   * inline budget) travel through the store once */
  nbig = 0;
  size_t used = 0;
  for (size_t i = 0; ok && i < nargs; i++) {
    if (args[i].kind != RD_VALUE_BYTES || arg_inline(&args[i], &used)) continue;
    uint64_t id = rd__oid_make(G.client_id, ++G.next_seq);
    uint8_t *p;
    char err[256];
    int cr = rd__store_create(id, args[i].size, &p, err, sizeof(err));
    if (cr != 0) {
      rd__log(RD_LOG_WARN, "rd_submit '%s': argument %zu: %s", func, i, err);
      for (size_t k = 0; k < nbig; k++) {
        rd__obj *o = obj_get(big_ids[k]);
        o->refs = 0;
        obj_maybe_free(o);
      }
      submit_undo(rets, rets_in, nret, big_ids, big_in, st, t);
      rd__flush_all();
      return cr;
    }
    memcpy(p, args[i].data, args[i].size);
    rd__store_seal(id);
    rd__obj *o = obj_new(id, OBJ_STORE);   /* map room reserved above */
    if (!o) { ok = 0; break; }
    big_ids[nbig++] = id;
  }
  if (!ok) {
    submit_undo(rets, rets_in, nret, big_ids, big_in, st, t);
    return RD_ENOMEM;
  }
  uint64_t *ids = (uint64_t *)&t->args[nargs];   /* the lists' ids, the return ids, then the inline bytes */
  t->ret_ids = ids + nlist;
  uint8_t *data = (uint8_t *)(t->ret_ids + nret);
  t->task_id = ++G.next_task;
  t->submit_ns = rd__now_ns();
  G.ost.live++;
  G.ost.changed = 1;
  t->func = func;
  t->cls = cls;
  if (cls) cls->ntasks++;
  t->actor = actor;
  t->actor_id = actor ? actor->id : 0;
  t->nargs = (int)nargs;
  t->nret = nret;
  t->max_retries = !o ? 0 : o->max_retries < 0 ? 3 : o->max_retries;
  t->retries_left = t->max_retries;
  t->retry_failures = o && o->retry_failures != 0;
  t->call_retries = o ? o->max_task_retries : RD_ACTOR_DEFAULT;
  t->max_calls = o ? o->max_calls : 0;
  t->parent = G.is_worker ? rd__worker_current_task() : 0;
  if (t->parent) rd__worker_current_owner(&t->parent_node, &t->parent_pid);
  t->ns = rd__ns_current();
  t->cgroup = cgroup ? cgroup : "";
  t->bytes = sizeof(*t) + nargs * sizeof(rd__targ) + (nlist + (size_t)nret) * sizeof(uint64_t) + bytes;
  size_t kbig = 0;
  used = 0;
  for (size_t i = 0; i < nargs; i++) {
    rd__targ *a = &t->args[i];
    if (args[i].kind == RD_VALUE_BORROW_LIST) {   /* held while the task is pending */
      const rd_ref *refs = args[i].data;
      a->list = ids;
      a->nlist = args[i].size;
      for (size_t k = 0; k < a->nlist; k++) {
        ids[k] = refs[k].id;
        obj_get(ids[k])->uses++;
      }
      ids += a->nlist;
    } else if (arg_inline(&args[i], &used)) {
      if (args[i].size) memcpy(data, args[i].data, args[i].size);
      a->data = data;
      a->size = args[i].size;
      data += args[i].size;
    } else {
      rd__obj *o = obj_get(args[i].kind != RD_VALUE_BYTES ? args[i].ref.id : big_ids[kbig++]);
      a->by_ref = 1;
      a->borrow = args[i].kind == RD_VALUE_BORROW;   /* held while the task is pending, not waited for */
      a->oid = o->id;
      o->uses++;
      if (args[i].kind == RD_VALUE_BYTES) o->refs = 0;   /* only this task holds it */
      if (!a->borrow && !obj_is_ready(o)) {   /* pending result or unsealed put */
        t->deps_pending++;
        o->deps[o->ndeps++] = t;
      }
    }
  }
  for (int i = 0; i < t->nret; i++) {
    t->ret_ids[i] = rd__oid_make(G.client_id, ++G.next_seq);
    rd__obj *o = rets[i];
    o->id = t->ret_ids[i];
    o->state = OBJ_PENDING;
    o->refs = 1;
    rd__u64map_put(&G.objs, o->id, o);
    refs_out[i].id = t->ret_ids[i];
  }
  if (st) {
    st->gen = t->ret_ids[0];
    st->task = t;
    st->window = stream_window;
    rets[0]->stream = t->stream = st;
  }
  if (rets != rets_in) free(rets);
  if (big_ids != big_in) free(big_ids);
  if (actor) {   /* calls keep their order: queued now, sent when their turn and arguments come */
    actor_conn_check_idle(actor);
    t->next = NULL;
    if (actor->qtail) actor->qtail->next = t;
    else actor->qhead = t;
    actor->qtail = t;
    actor->qlen++;
    actor_dispatch(actor);
  } else if (t->deps_pending == 0) {
    task_make_ready(t);
  }
  flush_or_wake();
  progress_kick();
  return 0;
}


/* The arguments of a task or actor call, before anything is locked: a known
 * kind, data where there are bytes or refs, a list the task message can
 * carry.  RD_EINVAL with a log line naming `who` and `func`.  (Whether refs
 * are live is checked under the lock, in submit_task.) */
static int args_check(const char *who, const char *func, const rd_value *args, size_t nargs) {
  for (size_t i = 0; i < nargs; i++) {
    int kind = args[i].kind;
    const char *bad = NULL;
    if (kind < RD_VALUE_BYTES || kind > RD_VALUE_BORROW_LIST) bad = "has an unknown kind";
    else if ((kind == RD_VALUE_BYTES || kind == RD_VALUE_BORROW_LIST) && args[i].size && !args[i].data)
      bad = kind == RD_VALUE_BYTES ? "has no data" : "has no refs";
    else if (kind == RD_VALUE_BORROW_LIST && args[i].size > BORROW_LIST_MAX)
      bad = "lends more refs than the task message can carry (64 MiB)";
    if (bad) {
      rd__log(RD_LOG_WARN, "%s '%s': argument %zu (kind %d, size %zu) %s", who, func, i, kind, args[i].size, bad);
      return RD_EINVAL;
    }
  }
  return 0;
}

/* rd_task_opts.env / rd_actor_opts.env (NULL-terminated) in canonical form:
 * 0 (*out NULL when there is none), or RD_EINVAL / RD_ENOMEM with err. */
static int env_canon(const char *const *env, char **out, size_t *len, char *err, size_t errlen) {
  size_t n = 0;
  while (env && env[n] && n <= RD_ENV_MAX_VARS) n++;
  if (env && env[n]) {
    snprintf(err, errlen, "env: more than %d variables", RD_ENV_MAX_VARS);
    return RD_EINVAL;
  }
  return rd__env_canon(env, n, out, len, err, errlen);
}

/* The env set a task or actor with options' env runs with: the process's
 * own (G.job_env, Ray's job runtime_env and the parent task's), with env's
 * variables in place of those of the same name (Ray merges env_vars so).
 * As env_canon; G.mu need not be held (job_env is set once, at rd_init). */
static int env_for(const char *const *env, char **out, size_t *len, char *err, size_t errlen) {
  if (!G.job_env) return env_canon(env, out, len, err, errlen);
  if (!env || !env[0]) {
    *len = G.job_env_len;
    if (!(*out = malloc(G.job_env_len))) {
      snprintf(err, errlen, "out of memory");
      return RD_ENOMEM;
    }
    memcpy(*out, G.job_env, G.job_env_len);
    return 0;
  }
  const char *all[2 * RD_ENV_MAX_VARS + 1];
  char *own[RD_ENV_MAX_VARS];
  size_t n = 0;
  while (env[n] && n <= RD_ENV_MAX_VARS) all[n] = env[n], n++;
  if (env[n]) {
    snprintf(err, errlen, "env: more than %d variables", RD_ENV_MAX_VARS);
    return RD_EINVAL;
  }
  size_t ntask = n, nown = rd__env_split(G.job_env, G.job_env_len, own, RD_ENV_MAX_VARS);
  for (size_t i = 0; i < nown; i++) {
    int replaced = 0;
    for (size_t k = 0; k < ntask && !replaced; k++) replaced = rd__env_same_name(env[k], own[i]);
    if (!replaced) all[n++] = own[i];
  }
  return rd__env_canon(all, n, out, len, err, errlen);
}

/* submit_task's stream_window for these options (0: not streaming). */
static int stream_window_of(const rd_task_opts *o) {
  if (!o || o->num_returns != RD_STREAMING) return 0;
  return o->stream_window ? o->stream_window : STREAM_WINDOW_DEFAULT;
}

/* A task's or actor's label selector and its fallbacks, joined into
 * alternatives in out (RD_LABEL_ALTS_LEN bytes; "" for none): 0, or
 * RD_EINVAL with err (malformed, or beside a placement group, whose bundle
 * decides the node). */
static int label_sel_opt(const char *sel, const char *fallbacks, uint64_t pg, const char *what, char *out,
                         char *err, size_t errlen) {
  char why[200];
  if (rd_label_alts_join(sel, fallbacks, out, RD_LABEL_ALTS_LEN, why, sizeof(why)) != 0) {
    snprintf(err, errlen, "label_selector: %s", why);
    return RD_EINVAL;
  }
  if (pg && *out) {
    snprintf(err, errlen, "label_selector: %s in a placement group runs on its bundle's node: give the bundle "
             "(rd_bundle.label_selector) the selector", what);
    return RD_EINVAL;
  }
  return 0;
}

int rd_submit(const rd_function *fn, const rd_value *args, size_t nargs, const rd_task_opts *opts,
              rd_ref *refs_out) {
  rd_task_opts dflt;
  if (!opts) {
    rd_task_opts_init(&dflt);
    opts = &dflt;
  }
  char err[256] = "", sel[RD_LABEL_ALTS_LEN];   /* label_sel_opt fills it (not zeroed: the submit path) */
  sel[0] = 0;
  int r = 0;
  if (!fn || !fn->name || !refs_out || (nargs && !args)) { snprintf(err, sizeof(err), "NULL function, args or refs"); r = RD_EINVAL; }
  else if (nargs > RD_MAX_ARGS) { snprintf(err, sizeof(err), "%zu arguments (at most %d)", nargs, RD_MAX_ARGS); r = RD_EINVAL; }
  else if ((opts->num_returns < 1 && opts->num_returns != RD_STREAMING) || opts->num_returns > RD_MAX_RETURNS) {
    snprintf(err, sizeof(err), "num_returns %d (1..%d, or RD_STREAMING)", opts->num_returns, RD_MAX_RETURNS);
    r = RD_EINVAL;
  } else if (opts->num_returns == RD_STREAMING && opts->stream_window < -1) {
    snprintf(err, sizeof(err), "stream_window %d (-1, 0 for the default, or more)", opts->stream_window);
    r = RD_EINVAL;
  } else if (opts->max_retries < -1) { snprintf(err, sizeof(err), "max_retries %d", opts->max_retries); r = RD_EINVAL; }
  else if (opts->max_task_retries != RD_ACTOR_DEFAULT) {
    snprintf(err, sizeof(err), "max_task_retries %d is for actor calls (a task's is max_retries; "
             "rd_task_opts_init sets RD_ACTOR_DEFAULT)", opts->max_task_retries);
    r = RD_EINVAL;
  } else if (opts->max_calls < 0) { snprintf(err, sizeof(err), "max_calls %d (0: no limit, or more)", opts->max_calls); r = RD_EINVAL; }
  else if (opts->retry_failures && opts->num_returns == RD_STREAMING) {
    snprintf(err, sizeof(err), "retry_failures does not apply to streaming tasks (items already taken)");
    r = RD_EINVAL;
  }
  else if (opts->strategy < RD_STRATEGY_DEFAULT || opts->strategy > RD_STRATEGY_NODE_AFFINITY) {
    snprintf(err, sizeof(err), "unknown scheduling strategy %d", opts->strategy);
    r = RD_EINVAL;
  } else if (opts->strategy == RD_STRATEGY_NODE_AFFINITY && (opts->node == 0 || opts->node > 4095)) {
    snprintf(err, sizeof(err), "node affinity needs a node index (1..4095), got %u", opts->node);
    r = RD_EINVAL;
  } else if (opts->placement_group.id && (opts->bundle_index < -1 || opts->bundle_index >= RD_PG_MAX_BUNDLES)) {
    snprintf(err, sizeof(err), "bundle_index %d (-1 or 0..%d)", opts->bundle_index, RD_PG_MAX_BUNDLES - 1);
    r = RD_EINVAL;
  } else {
    r = label_sel_opt(opts->label_selector, opts->fallback_label_selectors, opts->placement_group.id, "a task", sel,
                      err, sizeof(err));
  }
  rd_resources res;
  if (r == 0) r = opts_to_resources(opts, &res, err, sizeof(err));
  char *env = NULL;
  size_t env_len = 0;
  if (r == 0) r = env_for(opts->env, &env, &env_len, err, sizeof(err));
  if (r != 0) {
    rd__log(RD_LOG_WARN, "rd_submit: %s", err);
    return r;
  }
  if (args_check("rd_submit", fn->name, args, nargs) != 0) {
    free(env);
    return RD_EINVAL;
  }
  pthread_mutex_lock(&G.mu);   /* LOCKED_OR, freeing env */
  if (!G.inited) {
    pthread_mutex_unlock(&G.mu);
    free(env);
    return RD_ESTATE;
  }
  G.user_calls++;
  if (G.dead) { pthread_mutex_unlock(&G.mu); free(env); return RD_ENODE_DIED; }
  if (!G.cluster && !rd_res_feasible(&G.totals, &res)) {
    rd__log(RD_LOG_WARN, "rd_submit '%s': request {CPU: %g, GPU: %g} can never be satisfied by this node {CPU: %g, GPU: %g}%s",
            fn->name, opts->num_cpus, opts->num_gpus, rd_res_to_double(G.totals.total.cpu),
            rd_res_to_double(G.totals.total.gpu), res.ncustom ? " or a custom resource is missing" : "");
    pthread_mutex_unlock(&G.mu);
    free(env);
    return RD_EINFEASIBLE;
  }
  rd__sclass *cls = class_get(&res, opts->priority, opts, *sel ? sel : NULL, env, env_len);
  r = cls ? submit_task(fn->name, cls, NULL, args, nargs, opts->num_returns == RD_STREAMING ? 1 : opts->num_returns,
                        opts, stream_window_of(opts), NULL, refs_out)
          : RD_ENOMEM;
  pthread_mutex_unlock(&G.mu);
  return r;
}

int rd_submit_by_name(const char *name, const rd_value *args, size_t nargs, const rd_task_opts *opts,
                      rd_ref *refs_out) {
  rd_function *f = rd_function_lookup(name);
  if (!f) {
    rd__log(RD_LOG_WARN, "rd_submit_by_name: no remote function named '%s' is registered", name ? name : "(null)");
    return RD_ENOFUNC;
  }
  return rd_submit(f, args, nargs, opts, refs_out);
}

/* ------------------------------------------------------------ cancel */

static int task_returns(const rd__task *t, uint64_t id) {
  for (int i = 0; i < t->nret; i++)
    if (t->ret_ids[i] == id) return 1;
  return 0;
}

static void task_cancel_returns(rd__task *t) {
  char buf[300];
  snprintf(buf, sizeof(buf), "task '%s' was cancelled", t->func);
  rd__blob *msg = blob_new(buf, strlen(buf));
  task_fail_returns(t, RD_ECANCELED, msg);
  task_failure_note(t, RD_ECANCELED, msg);
  blob_unref(msg);
  task_settle(t, 1);
}

/* t has not been sent: it never runs. */
static void task_cancel(rd__task *t) {
  task_cancel_returns(t);
  task_free(t);
}

/* t is in flight on l (sent, maybe running): its returns fail now; with
 * force its worker is killed, else it runs to the end and its results are
 * dropped. */
static int cancel_in_flight(rd__task *t, rd__lease *l, int force) {
  if (!t->cancelled) {
    t->cancelled = 1;
    task_cancel_returns(t);
    if (!force) {   /* the worker drops it if not started, else rd_call_cancelled says so */
      Rd__TaskCancel m = RD__TASK_CANCEL__INIT;
      m.task_id = t->task_id;
      (void)rd__conn_send(&l->conn, RD__MSG_TYPE__MSG_TASK_CANCEL, &m.base, -1);   /* lost only without memory */
      flush_or_wake();
    }
  }
  if (force) lease_kill(l);
  return 0;
}

/* Unlinks t from the singly linked queue *head (tail, len kept). */
static void queue_unlink(rd__task **head, rd__task **tail, size_t *len, rd__task *t) {
  rd__task *prev = NULL;
  for (rd__task *x = *head; x; prev = x, x = x->next) {
    if (x != t) continue;
    if (prev) prev->next = x->next;
    else *head = x->next;
    if (*tail == x) *tail = prev;
    (*len)--;
    return;
  }
}

/* A task still waiting for arguments is listed only by the objects it waits
 * on: take it off all of them. */
static void deps_unlink(rd__task *t) {
  for (int i = 0; i < t->nargs; i++) {
    rd__obj *o = targ_dep(&t->args[i]) ? obj_get(t->args[i].oid) : NULL;
    if (!o) continue;
    int k = 0;
    for (int j = 0; j < o->ndeps; j++)
      if (o->deps[j] != t) o->deps[k++] = o->deps[j];
    o->ndeps = k;
  }
  t->deps_pending = 0;
}

static int cancel_locked(uint64_t id, int force) {
  for (rd__sclass *c = G.classes; c; c = c->next) {
    for (rd__task *t = c->qhead; t; t = t->next) {
      if (!task_returns(t, id)) continue;
      queue_unlink(&c->qhead, &c->qtail, &c->qlen, t);
      task_cancel(t);
      return 0;
    }
    for (rd__task **pp = &c->delayed; *pp; pp = &(*pp)->next) {
      rd__task *t = *pp;
      if (!task_returns(t, id)) continue;
      *pp = t->next;   /* not running: dropped, with or without force, as a queued task is */
      task_cancel(t);
      return 0;
    }
    for (rd__lease *l = c->leases; l; l = l->next)
      for (rd__task *t = l->inhead; t; t = t->next)
        if (task_returns(t, id)) return cancel_in_flight(t, l, force);
  }
  for (rd__actor *a = G.actors; a; a = a->next) {
    for (rd__task *t = a->qhead; t; t = t->next) {
      if (!task_returns(t, id)) continue;
      if (force) return RD_EINVAL;
      if (t->deps_pending) deps_unlink(t);
      queue_unlink(&a->qhead, &a->qtail, &a->qlen, t);
      task_cancel(t);
      return 0;
    }
    if (a->conn)
      for (rd__task *t = a->conn->inhead; t; t = t->next)
        if (task_returns(t, id)) return force ? RD_EINVAL : cancel_in_flight(t, a->conn, 0);
  }
  for (uint64_t i = 0; G.objs.slots && i <= G.objs.mask; i++) {
    rd__obj *o = G.objs.slots[i].val;
    for (int k = 0; o && k < o->ndeps; k++) {
      rd__task *t = o->deps[k];
      if (t->actor || !task_returns(t, id)) continue;   /* actor calls wait in their queue, above */
      deps_unlink(t);
      task_cancel(t);
      return 0;
    }
  }
  return RD_ENOENT;
}

/* Adds the first return of t to *ids when t was submitted by parent's run. */
static int child_collect(const rd__task *t, uint64_t parent, uint64_t **ids, size_t *n, size_t *cap) {
  if (t->parent != parent || t->cancelled || t->nret < 1) return 0;
  if (*n == *cap) {
    size_t nc = *cap ? *cap * 2 : 16;
    uint64_t *p = realloc(*ids, nc * sizeof(*p));
    if (!p) return -1;
    *ids = p;
    *cap = nc;
  }
  (*ids)[(*n)++] = t->ret_ids[0];
  return 0;
}

void rd__cancel_children(uint64_t parent) {
  if (!parent) return;
  uint64_t *ids = NULL;
  size_t n = 0, cap = 0;
  int r = 0;
  for (rd__sclass *c = G.classes; c && !r; c = c->next) {
    for (rd__task *t = c->qhead; t && !r; t = t->next) r = child_collect(t, parent, &ids, &n, &cap);
    for (rd__task *t = c->delayed; t && !r; t = t->next) r = child_collect(t, parent, &ids, &n, &cap);
    for (rd__lease *l = c->leases; l && !r; l = l->next)
      for (rd__task *t = l->inhead; t && !r; t = t->next) r = child_collect(t, parent, &ids, &n, &cap);
  }
  for (rd__actor *a = G.actors; a && !r; a = a->next) {
    for (rd__task *t = a->qhead; t && !r; t = t->next) r = child_collect(t, parent, &ids, &n, &cap);
    for (rd__task *t = a->conn ? a->conn->inhead : NULL; t && !r; t = t->next)
      r = child_collect(t, parent, &ids, &n, &cap);
  }
  for (uint64_t i = 0; G.objs.slots && i <= G.objs.mask && !r; i++) {
    rd__obj *o = G.objs.slots[i].val;
    for (int k = 0; o && k < o->ndeps && !r; k++)
      if (!o->deps[k]->actor) r = child_collect(o->deps[k], parent, &ids, &n, &cap);
  }
  if (r) rd__log(RD_LOG_WARN, "out of memory: tasks submitted by cancelled task %llx are not all cancelled",
                 (unsigned long long)parent);
  if (n) rd__log(RD_LOG_DEBUG, "cancelling %zu tasks submitted by task %llx", n, (unsigned long long)parent);
  for (size_t i = 0; i < n; i++) (void)cancel_locked(ids[i], 0);   /* one waiting on two objects is found once */
  free(ids);
  if (n) rd__flush_all();
}

int rd_cancel(rd_ref ref, int force) {
  pthread_mutex_lock(&G.mu);
  int r = !G.inited || G.dead ? RD_ESTATE : cancel_locked(ref.id, force);
  if (r == 0) rd__flush_all();   /* a LeaseReturn may be waiting */
  pthread_mutex_unlock(&G.mu);
  return r;
}

int rd_node_info_get(rd_node_info *out) {
  if (!out) return RD_EINVAL;
  LOCKED_OR(RD_ESTATE);
  Rd__NodeInfo m = RD__NODE_INFO__INIT;
  m.req_id = ++G.next_req;
  ProtobufCMessage *rep = NULL;
  int r = rd__daemon_call(RD__MSG_TYPE__MSG_NODE_INFO, &m.base, m.req_id, RD__MSG_TYPE__MSG_NODE_INFO_REPLY, &rep,
                          10000);
  if (r == 0) {
    Rd__NodeInfoReply *ni = (Rd__NodeInfoReply *)rep;
    memset(out, 0, sizeof(*out));
    if (ni->total) {
      out->num_cpus = rd_res_to_double(ni->total->cpu);
      out->num_gpus = rd_res_to_double(ni->total->gpu);
    }
    if (ni->avail) {
      out->avail_cpus = rd_res_to_double(ni->avail->cpu);
      out->avail_gpus = rd_res_to_double(ni->avail->gpu);
    }
    out->store_capacity = ni->store_capacity;
    out->store_used = ni->store_used;
    out->store_spilled_bytes = ni->spilled_bytes;
    out->store_spill_count = ni->spill_count;
    out->store_restore_count = ni->restore_count;
    out->num_workers = ni->num_workers;
    out->num_idle_workers = ni->num_idle;
    out->tasks_leased = ni->leases_granted;
    out->node_index = ni->node_index;
    out->cluster_nodes = ni->cluster_nodes > 0 ? ni->cluster_nodes : 1;
    out->memory_kills = ni->memory_kills;
    out->store_fallback_limit = ni->fallback_limit;
    out->store_fallback_used = ni->fallback_used;
    out->store_fallback_count = ni->fallback_count;
    protobuf_c_message_free_unpacked(rep, NULL);
  }
  pthread_mutex_unlock(&G.mu);
  return r;
}

/* The nodes of a NodeInfoReply asked with nodes set. */
static int nodes_fetch(Rd__NodeInfoReply **out) {
  Rd__NodeInfo m = RD__NODE_INFO__INIT;
  m.req_id = ++G.next_req;
  m.nodes = 1;
  ProtobufCMessage *rep = NULL;
  int r = rd__daemon_call(RD__MSG_TYPE__MSG_NODE_INFO, &m.base, m.req_id, RD__MSG_TYPE__MSG_NODE_INFO_REPLY, &rep,
                          10000);
  if (r != 0) return r;
  *out = (Rd__NodeInfoReply *)rep;
  if (!(*out)->n_nodes) {   /* the daemon always has itself: it ran out of memory */
    protobuf_c_message_free_unpacked(rep, NULL);
    rd__log(RD_LOG_ERROR, "the node daemon sent no node list (out of memory there?)");
    return RD_ENOMEM;
  }
  return 0;
}

static void node_desc_fill(rd_node_desc *d, const Rd__NodeDesc *m, uint32_t self) {
  memset(d, 0, sizeof(*d));
  d->index = m->index;
  d->alive = m->alive;
  d->is_head = m->is_head;
  d->is_self = m->index == self;
  snprintf(d->ip, sizeof(d->ip), "%s", m->ip ? m->ip : "");
  snprintf(d->hostname, sizeof(d->hostname), "%s", m->hostname ? m->hostname : "");
  snprintf(d->death_reason, sizeof(d->death_reason), "%s", m->death_reason ? m->death_reason : "");
  snprintf(d->labels, sizeof(d->labels), "%s", m->labels ? m->labels : "");
  d->store_capacity = m->store_capacity;
  d->store_used = m->store_used;
  d->pending_leases = m->pending;
  d->ms_since_heartbeat = m->ms_since_heartbeat;
  const Rd__Resources *t = m->total, *a = m->avail;
  if (t) {
    d->num_cpus = rd_res_to_double(t->cpu);
    d->num_gpus = rd_res_to_double(t->gpu);
    d->memory = t->memory > 0 ? (uint64_t)t->memory : 0;
  }
  if (a) {
    d->avail_cpus = rd_res_to_double(a->cpu);
    d->avail_gpus = rd_res_to_double(a->gpu);
    d->avail_memory = a->memory > 0 ? (uint64_t)a->memory : 0;
  }
  for (size_t i = 0; t && i < t->n_custom && d->num_custom < RD_NODE_MAX_CUSTOM; i++) {
    rd_node_resource *x = &d->custom[d->num_custom++];
    snprintf(x->name, sizeof(x->name), "%s", t->custom[i]->name ? t->custom[i]->name : "");
    x->total = rd_res_to_double(t->custom[i]->amount);
    for (size_t k = 0; a && k < a->n_custom; k++)
      if (a->custom[k]->name && strcmp(a->custom[k]->name, x->name) == 0) x->avail = rd_res_to_double(a->custom[k]->amount);
  }
}

int rd_nodes(rd_node_desc *out, size_t max, size_t *n_out) {
  if (!n_out) return RD_EINVAL;
  LOCKED_OR(RD_ESTATE);
  Rd__NodeInfoReply *ni = NULL;
  int r = nodes_fetch(&ni);
  if (r == 0) {
    *n_out = ni->n_nodes;
    if (out && max < ni->n_nodes) r = RD_EINVAL;
    for (size_t i = 0; out && r == 0 && i < ni->n_nodes; i++) node_desc_fill(&out[i], ni->nodes[i], ni->node_index);
    protobuf_c_message_free_unpacked(&ni->base, NULL);
  }
  pthread_mutex_unlock(&G.mu);
  return r;
}

/* Resource `name` ("CPU", "GPU", "memory" or a custom one) of node d: 1
 * when the node has it, with its total and free amounts in *t and *a. */
static int node_resource(const rd_node_desc *d, const char *name, double *t, double *a) {
  if (!strcmp(name, "CPU")) {
    *t = d->num_cpus;
    *a = d->avail_cpus;
    return *t > 0;
  }
  if (!strcmp(name, "GPU")) {
    *t = d->num_gpus;
    *a = d->avail_gpus;
    return *t > 0;
  }
  if (!strcmp(name, "memory")) {
    *t = (double)d->memory;
    *a = (double)d->avail_memory;
    return *t > 0;
  }
  for (int k = 0; k < d->num_custom; k++)
    if (!strcmp(d->custom[k].name, name)) {
      *t = d->custom[k].total;
      *a = d->custom[k].avail;
      return 1;
    }
  return 0;
}

int rd_cluster_resources(const char *name, double *total, double *avail) {
  if (total) *total = 0;
  if (avail) *avail = 0;
  if (!name || !*name || strlen(name) >= RD_RES_NAME_MAX) return RD_EINVAL;
  LOCKED_OR(RD_ESTATE);
  Rd__NodeInfoReply *ni = NULL;
  int r = nodes_fetch(&ni);
  if (r == 0) {
    double t = 0, a = 0;
    int found = 0;
    for (size_t i = 0; i < ni->n_nodes; i++) {
      rd_node_desc d;
      double nt, na;
      node_desc_fill(&d, ni->nodes[i], ni->node_index);
      if (!d.alive || !node_resource(&d, name, &nt, &na)) continue;
      found = 1;
      t += nt;
      a += na;
    }
    protobuf_c_message_free_unpacked(&ni->base, NULL);
    if (!found) {
      r = RD_ENOENT;
    } else {
      if (total) *total = t;
      if (avail) *avail = a;
    }
  }
  pthread_mutex_unlock(&G.mu);
  return r;
}

const char *rd_session_dir(void) { return G.session; }
int rd_is_worker(void) { return G.is_worker; }

int rd__node_addr(char *ip, size_t iplen, char *token, size_t toklen) {
  char path[sizeof(G.session) + 16];
  pthread_mutex_lock(&G.mu);
  int r = G.inited && !G.dead ? 0 : RD_ESTATE;
  if (r == 0) {
    snprintf(path, sizeof(path), "%s/cluster", G.session);
    snprintf(token, toklen, "%s", G.token);
  }
  pthread_mutex_unlock(&G.mu);
  /* a node of a cluster (`raydist start`) records its IP in its session
   * directory, which its drivers and workers share; an embedded one has
   * none.  Read without the lock: other threads need not wait on the disk. */
  if (r == 0 && (rd__read_kv(path, "ip", ip, iplen) != 0 || !*ip)) snprintf(ip, iplen, "127.0.0.1");
  return r;
}


/* ---------------------------------------------------------- actor API */

void rd_actor_opts_init(rd_actor_opts *o) {
  memset(o, 0, sizeof(*o));
  o->max_concurrency = 1;
  o->bundle_index = -1;
}

static int actor_create_once(const rd_actor_class *cls, const rd_value *args, size_t nargs, const rd_actor_opts *opts,
                             rd_actor *out);

int rd_actor_create(const rd_actor_class *cls, const rd_value *args, size_t nargs, const rd_actor_opts *opts,
                    rd_actor *out) {
  rd_actor_opts dflt;
  if (!opts) {
    rd_actor_opts_init(&dflt);
    opts = &dflt;
  }
  if (!opts->get_if_exists) return actor_create_once(cls, args, nargs, opts, out);
  if (!opts->name || !*opts->name || !out) {
    rd__log(RD_LOG_WARN, "rd_actor_create: get_if_exists needs a name");
    return RD_EINVAL;
  }
  /* Ray's get_if_exists: the live actor of that name, else a new one.  Two
   * creators racing: one creates, the other's create finds the name taken
   * (RD_EEXIST) and looks again.  A name still held by an actor that just
   * died is freed shortly (its record node tells the GCS): look again. */
  int r = RD_EEXIST;
  const char *ns = opts->namespace_name ? opts->namespace_name : rd__ns_current();
  for (int attempt = 0; attempt < 100 && r == RD_EEXIST; attempt++) {
    if (attempt) usleep(50000);
    r = rd_actor_get_in(ns, opts->name, out);
    if (r != RD_ENOENT) break;
    r = actor_create_once(cls, args, nargs, opts, out);
  }
  return r;
}

static int actor_create_once(const rd_actor_class *cls, const rd_value *args, size_t nargs, const rd_actor_opts *opts,
                             rd_actor *out) {
  if (!cls || !cls->name || !out || (nargs && !args) || nargs > RD_MAX_ARGS || opts->max_restarts < -1 ||
      opts->max_task_retries < -1 || opts->max_concurrency < 0 || opts->max_pending_calls < -1 ||
      opts->strategy < RD_STRATEGY_DEFAULT ||
      opts->strategy > RD_STRATEGY_NODE_AFFINITY ||
      (opts->strategy == RD_STRATEGY_NODE_AFFINITY && (opts->node == 0 || opts->node > 4095)) ||
      (opts->placement_group.id && (opts->bundle_index < -1 || opts->bundle_index >= RD_PG_MAX_BUNDLES))) {
    rd__log(RD_LOG_WARN, "rd_actor_create: invalid class, arguments or options");
    return RD_EINVAL;
  }
  const char *ns = opts->namespace_name ? opts->namespace_name : rd__ns_current();
  char qname[256] = "";
  if (!rd__ns_valid(ns) || !(ns = rd__ns_intern(ns)) ||   /* a bad one is not kept */
      (opts->name && *opts->name && rd__ns_name(ns, opts->name, qname, sizeof(qname)) != 0)) {
    rd__log(RD_LOG_WARN, "rd_actor_create: a bad namespace (no ':', at most %d bytes) or a name too long",
            RD_NS_MAX - 1);
    return RD_EINVAL;
  }
  if (!rd_actor_class_lookup(cls->name)) {
    rd__log(RD_LOG_WARN, "rd_actor_create: actor class '%s' is not registered", cls->name);
    return RD_ENOFUNC;
  }
  rd_resources res;
  char err[256], sel[RD_LABEL_ALTS_LEN];
  rd__cgroup cgs[RD_CGROUPS_MAX];
  if (amounts_to_resources(opts->num_cpus, opts->num_gpus, opts->memory, opts->resources, &res, err,
                           sizeof(err)) != 0 ||
      label_sel_opt(opts->label_selector, opts->fallback_label_selectors, opts->placement_group.id, "an actor", sel,
                    err, sizeof(err)) != 0 ||
      rd__cgroups_parse(opts->concurrency_groups, cgs, err, sizeof(err)) < 0) {
    rd__log(RD_LOG_WARN, "rd_actor_create: %s", err);
    return RD_EINVAL;
  }
  char *env = NULL, *envv[RD_ENV_MAX_VARS];
  size_t env_len = 0;
  int er = env_for(opts->env, &env, &env_len, err, sizeof(err));
  if (er != 0) {
    rd__log(RD_LOG_WARN, "rd_actor_create: %s", err);
    return er;
  }
  /* constructor arguments are kept by the node for restarts: copy them in,
   * waiting for refs (outside the lock, through the public rd_get) */
  ProtobufCBinaryData bin_in[8], *bin = nargs > 8 ? malloc(nargs * sizeof(*bin)) : bin_in;
  rd_buf held_in[8], *held = nargs > 8 ? malloc(nargs * sizeof(*held)) : held_in;
  size_t nheld = 0;
  int r = bin && held ? 0 : RD_ENOMEM;
  for (size_t i = 0; i < nargs && r == 0; i++) {
    if (args[i].kind == RD_VALUE_BYTES) {
      if (args[i].size && !args[i].data) r = RD_EINVAL;
      bin[i].data = (uint8_t *)args[i].data;
      bin[i].len = args[i].size;
    } else if (args[i].kind == RD_VALUE_REF) {
      r = rd_get(&args[i].ref, 1, &held[nheld], RD_TIMEOUT_INF);
      if (r != 0) {
        rd__log(RD_LOG_WARN, "rd_actor_create: constructor argument %zu failed: %s", i, rd_err_name(r));
        rd_buf_release(&held[nheld]);
        break;
      }
      size_t inner = 0;
      if (rd_get_refs(args[i].ref, NULL, 0, &inner, 0) == 0 && inner > 0) {
        /* its bytes are kept for restarts, the refs it contains could not be */
        rd__log(RD_LOG_WARN, "rd_actor_create: constructor argument %zu contains %zu refs (rd_put_refs), which a "
                "constructor cannot keep: pass it to a method", i, inner);
        rd_buf_release(&held[nheld]);
        r = RD_EINVAL;
        break;
      }
      bin[i].data = (uint8_t *)held[nheld].data;
      bin[i].len = held[nheld].size;
      nheld++;
    } else {
      /* a borrowed ref lives only while a call runs; the constructor's
       * arguments are kept for restarts */
      rd__log(RD_LOG_WARN, "rd_actor_create: constructor argument %zu: %s", i,
              args[i].kind == RD_VALUE_BORROW || args[i].kind == RD_VALUE_BORROW_LIST
                  ? "a borrowed ref cannot be a constructor argument (pass its value with rd_arg_ref)"
                  : "unknown kind");
      r = RD_EINVAL;
    }
  }
  if (r == 0) {
    pthread_mutex_lock(&G.mu);
    if (!G.inited) {
      r = RD_ESTATE;
    } else if (!G.cluster && !rd_res_feasible(&G.totals, &res)) {
      rd__log(RD_LOG_WARN, "rd_actor_create '%s': {CPU: %g, GPU: %g} can never be satisfied by this node", cls->name,
              opts->num_cpus, opts->num_gpus);
      r = RD_EINFEASIBLE;
    } else {
      Rd__ActorCreate m = RD__ACTOR_CREATE__INIT;
      rd__res_msg rm;
      rd__res_to_msg(&res, &rm);
      m.req_id = ++G.next_req;
      m.class_name = (char *)cls->name;
      m.res = &rm.msg;
      m.name = qname;
      m.ns = (char *)ns;
      m.max_restarts = opts->max_restarts;
      m.max_task_retries = opts->max_task_retries;
      m.max_pending_calls = opts->max_pending_calls > 0 ? opts->max_pending_calls : 0;
      m.max_concurrency = opts->max_concurrency > 0 ? opts->max_concurrency : 1;
      m.priority = opts->priority;
      m.strategy = opts->strategy;
      m.node_affinity = opts->node;
      m.soft = opts->soft;
      m.pg_id = opts->placement_group.id;
      m.bundle_index = opts->placement_group.id ? opts->bundle_index : -1;
      m.detached = opts->detached != 0;
      m.label_selector = *sel ? sel : NULL;
      m.concurrency_groups = (char *)opts->concurrency_groups;
      m.n_args = nargs;
      m.args = bin;
      m.n_env = rd__env_split(env, env_len, envv, RD_ENV_MAX_VARS);
      m.env = envv;
      ProtobufCMessage *rep = NULL;
      r = rd__daemon_call(RD__MSG_TYPE__MSG_ACTOR_CREATE, &m.base, m.req_id, RD__MSG_TYPE__MSG_ACTOR_ID_REPLY, &rep,
                          30000);
      if (r == 0) {
        Rd__ActorIdReply *ar = (Rd__ActorIdReply *)rep;
        r = ar->status;
        if (r == 0) {
          out->id = ar->actor_id;
          rd__actor *a = opts->max_pending_calls > 0 ? actor_get(out->id, 1) : NULL;
          if (a) a->max_pending = opts->max_pending_calls;   /* no memory: learnt at connect */
        } else if (r != RD_EEXIST || !opts->get_if_exists)   /* get_if_exists looks the name up again */
          rd__log(RD_LOG_WARN, "rd_actor_create '%s': %s", cls->name, ar->error);
        protobuf_c_message_free_unpacked(rep, NULL);
      }
    }
    pthread_mutex_unlock(&G.mu);
  }
  for (size_t i = 0; i < nheld; i++) rd_buf_release(&held[i]);
  if (bin != bin_in) free(bin);
  if (held != held_in) free(held);
  free(env);
  return r;
}

int rd_actor_call_by_name(rd_actor actor, const char *method, const rd_value *args, size_t nargs,
                          const rd_task_opts *opts, rd_ref *refs_out) {
  int nret = opts ? opts->num_returns : 1;
  int window = stream_window_of(opts);
  if (window) nret = 1;
  if (!method || !refs_out || (nargs && !args) || nargs > RD_MAX_ARGS || nret < 1 || nret > RD_MAX_RETURNS ||
      window < -1) {
    rd__log(RD_LOG_WARN, "rd_actor_call: invalid method, arguments, num_returns or stream_window");
    return RD_EINVAL;
  }
  if (opts && opts->max_task_retries < RD_ACTOR_DEFAULT) {
    rd__log(RD_LOG_WARN, "rd_actor_call '%s': max_task_retries %d (-1: no limit, 0 or more, or RD_ACTOR_DEFAULT)",
            method, opts->max_task_retries);
    return RD_EINVAL;
  }
  if (args_check("rd_actor_call", method, args, nargs) != 0) return RD_EINVAL;
  const char *cg = opts ? opts->concurrency_group : NULL;
  if (cg && *cg && (strlen(cg) > 63 || strspn(cg, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") !=
                    strlen(cg))) {
    rd__log(RD_LOG_WARN, "rd_actor_call: concurrency_group '%.80s' is not 1..63 bytes of [A-Za-z0-9_-]", cg);
    return RD_EINVAL;
  }
  cg = cg && *cg ? rd__ns_intern(cg) : NULL;   /* kept for the process's life, as namespaces are */
  LOCKED_OR(RD_ESTATE);
  int r;
  rd__actor *a = actor.id ? actor_get(actor.id, 1) : NULL;
  if (G.dead) r = RD_ENODE_DIED;
  else if (!a) r = actor.id ? RD_ENOMEM : RD_EINVAL;
  else if (a->max_pending && a->state != AH_DEAD &&
           a->qlen + (size_t)(a->conn ? a->conn->ninflight : 0) >= (size_t)a->max_pending)
    r = RD_EAGAIN;   /* max_pending_calls: nothing queued, no log line (a caller may spin on it) */
  else {
    /* of the options' retries max_retries does not count: an actor call is
     * run again within its own max_task_retries, or its actor's */
    rd_task_opts to;
    rd_task_opts_init(&to);
    to.max_retries = 0;
    to.retry_failures = opts ? opts->retry_failures : 0;
    to.max_task_retries = opts ? opts->max_task_retries : RD_ACTOR_DEFAULT;
    r = submit_task(method, NULL, a, args, nargs, nret, &to, window, cg, refs_out);
  }
  pthread_mutex_unlock(&G.mu);
  return r;
}

int rd_actor_call(rd_actor actor, const rd_actor_method *method, const rd_value *args, size_t nargs,
                  const rd_task_opts *opts, rd_ref *refs_out) {
  if (!method) return RD_EINVAL;
  return rd_actor_call_by_name(actor, method->name, args, nargs, opts, refs_out);
}

/* ---- namespaces ---- */

static pthread_mutex_t ns_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ns_entry { struct ns_entry *next; char name[]; } *ns_list;
static __thread const char *tl_ns;   /* a worker thread's current call's (NULL: the process's) */

const char *rd__ns_intern(const char *ns) {
  if (!ns || !*ns) return "";
  pthread_mutex_lock(&ns_mu);
  struct ns_entry *e = ns_list;
  while (e && strcmp(e->name, ns)) e = e->next;
  if (!e && (e = malloc(sizeof(*e) + strlen(ns) + 1))) {   /* kept for the process's life */
    strcpy(e->name, ns);
    e->next = ns_list;
    ns_list = e;
  }
  pthread_mutex_unlock(&ns_mu);
  return e ? e->name : NULL;
}

void rd__ns_set_thread(const char *ns) {
  static __thread const char *last;   /* the last one interned here: calls of a job repeat it */
  if (!ns) tl_ns = NULL;
  else if (last && !strcmp(last, ns)) tl_ns = last;
  else tl_ns = last = rd__ns_intern(ns);
}

const char *rd__ns_current(void) { return tl_ns ? tl_ns : G.ns ? G.ns : ""; }

const char *rd_namespace(void) { return rd__ns_current(); }

int rd__ns_valid(const char *ns) {
  if (!ns) return 1;
  if (strlen(ns) >= RD_NS_MAX) return 0;
  for (const unsigned char *p = (const unsigned char *)ns; *p; p++)
    if (*p == ':' || *p < 0x20 || *p == 0x7f) return 0;
  return 1;
}

int rd__ns_name(const char *ns, const char *name, char *buf, size_t len) {
  if (!name || !*name) return RD_EINVAL;
  /* a name may hold ':' (a namespace may not): in the default namespace
   * such a name gets a leading ':' so that it cannot read as namespace
   * "a"'s "b" ("a:b"); one without ':' stays as it was */
  int n = ns && *ns        ? snprintf(buf, len, "%s:%s", ns, name)
          : strchr(name, ':') ? snprintf(buf, len, ":%s", name)
                              : snprintf(buf, len, "%s", name);
  return n < 0 || (size_t)n >= len ? RD_EINVAL : 0;
}

int rd_actor_get(const char *name, rd_actor *out) { return rd_actor_get_in(rd__ns_current(), name, out); }

int rd_actor_get_in(const char *ns, const char *name, rd_actor *out) {
  char qname[256];
  if (!name || !*name || !out || !rd__ns_valid(ns) || rd__ns_name(ns, name, qname, sizeof(qname)) != 0)
    return RD_EINVAL;
  LOCKED_OR(RD_ESTATE);
  Rd__ActorLookup m = RD__ACTOR_LOOKUP__INIT;
  m.req_id = ++G.next_req;
  m.name = qname;
  ProtobufCMessage *rep = NULL;
  int r = rd__daemon_call(RD__MSG_TYPE__MSG_ACTOR_LOOKUP, &m.base, m.req_id, RD__MSG_TYPE__MSG_ACTOR_ID_REPLY, &rep,
                          30000);
  if (r == 0) {
    Rd__ActorIdReply *ar = (Rd__ActorIdReply *)rep;
    r = ar->status;
    if (r == 0) out->id = ar->actor_id;
    /* its max_pending_calls holds from the first call on (not from when
     * the handle first connects: calls made meanwhile were not counted) */
    rd__actor *a = r == 0 && ar->max_pending_calls > 0 ? actor_get(out->id, 1) : NULL;
    if (a) a->max_pending = ar->max_pending_calls;   /* no memory: learnt at connect */
    protobuf_c_message_free_unpacked(rep, NULL);
  }
  pthread_mutex_unlock(&G.mu);
  return r;
}

static int actor_name_cmp(const void *a, const void *b) {
  const rd_actor_name *x = a, *y = b;
  int c = strcmp(x->ns, y->ns);
  return c ? c : strcmp(x->name, y->name);
}

int rd_actor_list_named(int all_namespaces, rd_actor_name **out, size_t *n_out) {
  if (!out || !n_out) return RD_EINVAL;
  *out = NULL;
  *n_out = 0;
  LOCKED_OR(RD_ESTATE);
  Rd__ActorListNamed m = RD__ACTOR_LIST_NAMED__INIT;
  m.req_id = ++G.next_req;
  m.ns = (char *)rd__ns_current();
  m.all = all_namespaces != 0;
  ProtobufCMessage *rep = NULL;
  int r = rd__daemon_call(RD__MSG_TYPE__MSG_ACTOR_LIST_NAMED, &m.base, m.req_id, RD__MSG_TYPE__MSG_ACTOR_NAMES, &rep,
                          30000);
  pthread_mutex_unlock(&G.mu);
  if (r != 0) return r;
  Rd__ActorNames *an = (Rd__ActorNames *)rep;
  r = an->status;
  if (r != 0) rd__log(RD_LOG_WARN, "rd_actor_list_named: %s", an->error);
  /* one block: the array, then each entry's namespace and name */
  size_t bytes = an->n_names * sizeof(rd_actor_name);
  for (size_t i = 0; r == 0 && i < an->n_names; i++) bytes += strlen(an->names[i]) + 2;
  rd_actor_name *v = r == 0 && an->n_names ? malloc(bytes) : NULL;
  if (r == 0 && an->n_names && !v) r = RD_ENOMEM;
  if (v) {
    char *p = (char *)(v + an->n_names);
    for (size_t i = 0; i < an->n_names; i++) {
      const char *q = an->names[i], *colon = strchr(q, ':');   /* namespaces have none */
      size_t nl = colon ? (size_t)(colon - q) : 0;
      memcpy(p, q, nl);
      p[nl] = 0;
      v[i].ns = p;
      p += nl + 1;
      strcpy(p, colon ? colon + 1 : q);
      v[i].name = p;
      p += strlen(p) + 1;
    }
    qsort(v, an->n_names, sizeof(*v), actor_name_cmp);
    *out = v;
    *n_out = an->n_names;
  }
  protobuf_c_message_free_unpacked(rep, NULL);
  return r;
}

void rd_actor_names_free(rd_actor_name *names) { free(names); }

int rd_actor_kill(rd_actor actor, int no_restart) {
  if (!actor.id) return RD_EINVAL;
  LOCKED_OR(RD_ESTATE);
  Rd__ActorKill m = RD__ACTOR_KILL__INIT;
  m.actor_id = actor.id;
  m.no_restart = no_restart != 0;
  m.req_id = ++G.next_req;
  ProtobufCMessage *rep = NULL;
  /* returns once the old process is gone, so later calls reach the next one */
  int r = rd__daemon_call(RD__MSG_TYPE__MSG_ACTOR_KILL, &m.base, m.req_id, RD__MSG_TYPE__MSG_ACTOR_ID_REPLY, &rep,
                          30000);
  if (r == 0) {
    r = ((Rd__ActorIdReply *)rep)->status;
    protobuf_c_message_free_unpacked(rep, NULL);
  }
  rd__actor *a = actor_get(actor.id, 0);
  if (a && a->conn) actor_conn_lost(a->conn, "was killed by rd_actor_kill");
  /* dead for good: nothing of this handle's to keep (a later call asks the
   * node, which says how it ended); calls re-sent by the loss above keep
   * it until they have failed */
  if (a && r == 0 && no_restart && actor_unused(a)) actor_forget(a);
  pthread_mutex_unlock(&G.mu);
  return r == RD_ENOENT ? RD_EINVAL : r;
}

/* ------------------------------------------------------- init/shutdown */

void rd_config_init(rd_config *c) {
  memset(c, 0, sizeof(*c));
  c->num_gpus = -1;
  c->num_prestart_workers = -1;
  c->log_level = -1;
  c->log_to_driver = 1;
}

/* Map the store's fd: `cap` bytes, its capacity and fallback region (the
 * region's addresses read past the memfd's end until the node grows it). */
static int map_segment(int fd, uint64_t cap) {
  void *rw = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (rw == MAP_FAILED) return RD_ESYS;
  void *ro = mmap(NULL, cap, PROT_READ, MAP_SHARED, fd, 0);
  if (ro == MAP_FAILED) {
    munmap(rw, cap);
    return RD_ESYS;
  }
  G.rw_base = rw;
  G.ro_base = ro;
  G.store_cap = cap;
  return 0;
}

int rd__connect_daemon(const char *session, int role, uint32_t worker_id) {
  rd__stack_install(session);   /* before the node knows this process: it may signal it from then on */
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", session, RD_NODE_SOCK);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return RD_ESYS;
  struct sockaddr_un a;
  memset(&a, 0, sizeof(a));
  a.sun_family = AF_UNIX;
  if (strlen(path) >= sizeof(a.sun_path)) { close(fd); return RD_EINVAL; }
  strcpy(a.sun_path, path);
  if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
    rd__log(RD_LOG_ERROR, "cannot connect to the node daemon at %s: %s", path, strerror(errno));
    close(fd);
    return RD_ECONN;
  }
  rd__conn_init(&G.daemon, fd);
  Rd__Hello h = RD__HELLO__INIT;
  char exe[PATH_MAX] = "";
  char *argv_store[256];
  size_t argc = 0;
  char cmdline[8192];
  h.version = RD_PROTO_VERSION;
  h.role = role;
  h.worker_id = worker_id;
  h.pid = G.pid = getpid();
  h.token = G.token;
  if (role == 0) {
    h.job_weight = G.job_weight;
    h.no_worker_output = !G.log_to_driver;
    const char *sub = getenv("RAYDIST_JOB_ID");   /* a submitted job's driver: the node links the two */
    h.submission = sub && *sub ? (uint32_t)strtoul(sub, NULL, 10) : 0;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) exe[n] = 0;
    h.exe = exe;
    int cfd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    ssize_t len = cfd >= 0 ? read(cfd, cmdline, sizeof(cmdline) - 1) : -1;
    if (cfd >= 0) close(cfd);
    if (len > 0) {
      cmdline[len] = 0;
      for (ssize_t i = 0; i < len && argc < 255;) {
        argv_store[argc++] = cmdline + i;
        i += (ssize_t)strlen(cmdline + i) + 1;
      }
    }
    h.n_argv = argc;
    h.argv = argv_store;
  }
  char *env[RD_ENV_MAX_VARS];   /* a driver's own set: its tasks' workers are prestarted with it */
  if (role == 0 && G.job_env) {
    h.n_env = rd__env_split(G.job_env, G.job_env_len, env, RD_ENV_MAX_VARS);
    h.env = env;
  }
  int r = rd__conn_send(&G.daemon, RD__MSG_TYPE__MSG_HELLO, &h.base, -1);
  if (r == 0) r = rd__conn_flush_blocking(&G.daemon, 10000);
  rd__frame f;
  if (r == 0) r = rd__conn_recv_blocking(&G.daemon, &f, 10000);
  if (r != 0) {
    rd__log(RD_LOG_ERROR, "no answer from the node daemon: %s", rd_strerror(r));
    rd__conn_close(&G.daemon);
    return RD_ECONN;
  }
  if (f.type != RD__MSG_TYPE__MSG_HELLO_REPLY) {
    /* refused (a wrong cluster token, a node busy with another job): say why */
    int st = RD_EPROTO;
    Rd__Error *e = f.type == RD__MSG_TYPE__MSG_ERROR ? (Rd__Error *)rd__frame_unpack(&f, &rd__error__descriptor) : NULL;
    if (e) {
      rd__log(RD_LOG_ERROR, "the node daemon refused this process: %s", e->message ? e->message : "");
      if (e->status < 0) st = e->status;
      protobuf_c_message_free_unpacked(&e->base, NULL);
    }
    rd__conn_close(&G.daemon);
    return st;
  }
  Rd__HelloReply *hr = (Rd__HelloReply *)rd__frame_unpack(&f, &rd__hello_reply__descriptor);
  int sfd = rd__conn_take_fd(&G.daemon);
  if (!hr || hr->status != 0 || sfd < 0) {
    if (hr) protobuf_c_message_free_unpacked(&hr->base, NULL);
    if (sfd >= 0) close(sfd);
    rd__conn_close(&G.daemon);
    return RD_EPROTO;
  }
  G.client_id = hr->client_id;
  G.node_index = hr->node_index;
  G.cluster = hr->cluster;
  G.inline_max = hr->inline_max;
  rd_resources tot;
  if (rd__res_from_msg(hr->total, &tot) != 0) memset(&tot, 0, sizeof(tot));
  rd_res_ledger_init(&G.totals, &tot);
  if (hr->store_map_size > hr->store_capacity && map_segment(sfd, hr->store_map_size) == 0) {
    r = 0;
  } else {
    if (hr->store_map_size > hr->store_capacity)   /* address space limited (ulimit -v) */
      rd__log(RD_LOG_WARN, "cannot map the object store's %llu bytes with its fallback region (%s): objects "
              "placed there cannot be read here", (unsigned long long)hr->store_map_size, strerror(errno));
    r = map_segment(sfd, hr->store_capacity);
  }
  close(sfd);
  protobuf_c_message_free_unpacked(&hr->base, NULL);
  if (r != 0) {
    rd__conn_close(&G.daemon);
    return r;
  }
  return 0;
}

/* Where is the `raydist` program that runs the node daemon?  $RAYDIST_BIN,
 * then next to this library (<prefix>/lib/.. /bin, or the build tree's
 * runtime/), then the configured install and build directories. */
static int find_raydist(char *out, size_t len) {
  const char *e = getenv("RAYDIST_BIN");
  char near_bin[PATH_MAX + 32] = "", near_build[PATH_MAX + 32] = "";
  Dl_info di;
  if (dladdr((void *)rd_init, &di) && di.dli_fname) {
    char self[PATH_MAX];
    if (realpath(di.dli_fname, self)) {
      char *slash = strrchr(self, '/');
      if (slash) {
        *slash = 0;
        snprintf(near_bin, sizeof(near_bin), "%s/../bin/raydist", self);
        snprintf(near_build, sizeof(near_build), "%s/../runtime/raydist", self);
      }
    }
  }
  const char *cands[5] = {e, near_bin, near_build, RD_INSTALL_BINDIR "/raydist", RD_BUILD_BINDIR "/raydist"};
  for (int i = 0; i < 5; i++) {
    if (cands[i] && *cands[i] && access(cands[i], X_OK) == 0) {
      snprintf(out, len, "%s", cands[i]);
      return 0;
    }
  }
  return RD_ENOENT;
}



/* rd_init with an address: use the node that `raydist start` runs on this
 * machine for that cluster (its session directory records the GCS address),
 * preferring $RAYDIST_NODE_IP, then the node on the address's own IP.
 * "auto" takes any.  The token comes from the node's owner-only session. */
static int attach_cluster(const char *address) {
  char root[200];
  rd__session_root(root, sizeof(root));
  DIR *d = opendir(root);
  if (!d) {
    rd__log(RD_LOG_ERROR, "rd_init(address=%s): no raydist node runs on this machine (%s is missing); "
                          "start one with `raydist start --address=%s`", address, root, address);
    return RD_ECONN;
  }
  const char *want_ip = getenv("RAYDIST_NODE_IP");
  char addr_ip[128];
  snprintf(addr_ip, sizeof(addr_ip), "%s", address);
  char *colon = strrchr(addr_ip, ':');
  if (colon) *colon = 0;
  int best = -1;
  char best_dir[512] = "";
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strncmp(e->d_name, "node-", 5) != 0) continue;
    char dir[512], file[600], gcs[128], ip[128];
    snprintf(dir, sizeof(dir), "%s/%s", root, e->d_name);
    snprintf(file, sizeof(file), "%s/cluster", dir);
    if (rd__read_kv(file, "gcs", gcs, sizeof(gcs)) != 0 || rd__read_kv(file, "ip", ip, sizeof(ip)) != 0) continue;
    if (strcmp(address, "auto") != 0 && strcmp(gcs, address) != 0) continue;
    snprintf(file, sizeof(file), "%s/%s", dir, RD_NODE_SOCK);
    if (access(file, F_OK) != 0) continue;
    int score = 1 + (want_ip && !strcmp(want_ip, ip)) * 4 + !strcmp(ip, addr_ip) * 2;
    if (want_ip && *want_ip && strcmp(want_ip, ip) != 0) score = 0;
    if (score > best) {
      best = score;
      snprintf(best_dir, sizeof(best_dir), "%s", dir);
    }
  }
  closedir(d);
  if (best <= 0) {
    rd__log(RD_LOG_ERROR, "rd_init(address=%s): no node of that cluster runs on this machine%s%s; "
                          "join one with `raydist start --address=%s`", address, want_ip ? " with RAYDIST_NODE_IP=" : "",
            want_ip ? want_ip : "", address);
    return RD_ECONN;
  }
  size_t len = strlen(best_dir);
  if (len >= sizeof(G.session)) {
    rd__log(RD_LOG_ERROR, "rd_init: the node's session directory %s is longer than %zu bytes", best_dir,
            sizeof(G.session) - 1);
    return RD_EINVAL;
  }
  char tok[sizeof(G.session) + 8];
  memcpy(tok, best_dir, len);
  memcpy(tok + len, "/token", sizeof("/token"));
  if (rd__read_line(tok, G.token, sizeof(G.token)) != 0) {
    rd__log(RD_LOG_ERROR, "rd_init: cannot read the cluster token %s: %s", tok, strerror(errno));
    return RD_EAUTH;
  }
  memcpy(G.session, best_dir, len + 1);
  G.attached = 1;
  return 0;
}

static int make_session_dir(void) {
  char root[200], why[600];
  int code;
  if (rd__session_root_make(root, sizeof(root), sizeof("/session-XXXXXX/" RD_NODE_SOCK), &code, why, sizeof(why)) != 0) {
    rd__log(RD_LOG_ERROR, "rd_init: %s", why);
    return code;
  }
  snprintf(G.session, sizeof(G.session), "%s/session-XXXXXX", root);
  if (!mkdtemp(G.session)) {
    rd__log(RD_LOG_ERROR, "rd_init: cannot make a session directory in %s: %s", root, strerror(errno));
    G.session[0] = 0;
    return RD_ESYS;
  }
  return 0;
}

/* The embedded node's labels: rd_config.node_labels, else the environment's. */
static const char *embedded_labels(const rd_config *cfg) {
  return cfg->node_labels ? cfg->node_labels : getenv("RAYDIST_NODE_LABELS");
}

static int start_daemon(const rd_config *cfg) {
  char bin[PATH_MAX];
  if (find_raydist(bin, sizeof(bin)) != 0) {
    rd__log(RD_LOG_ERROR, "cannot find the raydist program (set RAYDIST_BIN)");
    return RD_ENOENT;
  }
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return RD_ESYS;
  char a_cpus[32], a_gpus[32], a_gmem[32], a_store[32], a_fallback[32], a_fd[16], a_pre[16], a_max[16], a_log[16], spill[400];
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  snprintf(a_cpus, sizeof(a_cpus), "%g", cfg->num_cpus > 0 ? cfg->num_cpus : (double)(ncpu > 0 ? ncpu : 1));
  snprintf(a_gpus, sizeof(a_gpus), "%g", cfg->num_gpus);
  snprintf(a_gmem, sizeof(a_gmem), "%llu", (unsigned long long)cfg->gpu_memory_bytes);
  uint64_t store = cfg->object_store_bytes;
  const char *es = getenv("RAYDIST_OBJECT_STORE_BYTES");
  if (!store && es && *es) store = strtoull(es, NULL, 10);
  if (!store) store = 512ull << 20;
  snprintf(a_store, sizeof(a_store), "%llu", (unsigned long long)store);
  int64_t fallback = cfg->object_store_fallback_bytes;
  const char *ef = getenv("RAYDIST_OBJECT_STORE_FALLBACK_BYTES");
  if (!fallback && ef && *ef) fallback = strtoll(ef, NULL, 10);
  snprintf(a_fallback, sizeof(a_fallback), "%lld", (long long)(fallback > 0 ? fallback : 0));
  snprintf(a_fd, sizeof(a_fd), "%d", p[1]);
  snprintf(a_pre, sizeof(a_pre), "%d", cfg->num_prestart_workers);
  snprintf(a_max, sizeof(a_max), "%d", cfg->max_workers > 0 ? cfg->max_workers : 64);
  snprintf(a_log, sizeof(a_log), "%d", cfg->log_level);
  if (cfg->spill_dir) snprintf(spill, sizeof(spill), "%s", cfg->spill_dir);
  else snprintf(spill, sizeof(spill), "%s/spill", G.session);
  char *argv[32];
  int k = 0;
  argv[k++] = "raydist";
  argv[k++] = "node";
  argv[k++] = "--session"; argv[k++] = G.session;
  argv[k++] = "--num-cpus"; argv[k++] = a_cpus;
  if (cfg->num_gpus >= 0) { argv[k++] = "--num-gpus"; argv[k++] = a_gpus; }
  if (cfg->gpu_memory_bytes) { argv[k++] = "--gpu-memory"; argv[k++] = a_gmem; }
  argv[k++] = "--object-store-memory"; argv[k++] = a_store;
  if (fallback) { argv[k++] = "--object-store-fallback"; argv[k++] = a_fallback; }   /* 0: the node's default */
  argv[k++] = "--spill-dir"; argv[k++] = spill;
  if (cfg->custom_resources && *cfg->custom_resources) {
    argv[k++] = "--resources";
    argv[k++] = (char *)cfg->custom_resources;
  }
  char a_labels[RD_LABELS_LEN] = "", lwhy[8];
  if (rd_labels_canon(embedded_labels(cfg), a_labels, sizeof(a_labels), lwhy, sizeof(lwhy)) == 0 && a_labels[0]) {
    argv[k++] = "--labels";   /* checked by rd_init */
    argv[k++] = a_labels;
  }
  if (cfg->num_prestart_workers >= 0) { argv[k++] = "--prestart"; argv[k++] = a_pre; }
  argv[k++] = "--max-workers"; argv[k++] = a_max;
  argv[k++] = "--ready-fd"; argv[k++] = a_fd;
  if (cfg->log_level >= 0) { argv[k++] = "--log-level"; argv[k++] = a_log; }
  argv[k++] = "--embedded";
  argv[k] = NULL;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  /* keep the write end open across exec: dup2 onto itself clears CLOEXEC */
  posix_spawn_file_actions_adddup2(&fa, p[1], p[1]);
  pid_t pid;
  int r = posix_spawn(&pid, bin, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(p[1]);
  if (r != 0) {
    close(p[0]);
    rd__log(RD_LOG_ERROR, "cannot start %s: %s", bin, strerror(r));
    return RD_ESYS;
  }
  G.daemon_pid = pid;
  char c = 0;
  ssize_t n = rd__wait_fd(p[0], POLLIN, rd__now_ns() + 30000000000ull) == 0 ? read(p[0], &c, 1) : -1;
  close(p[0]);
  if (n != 1 || c != 'R') {
    rd__log(RD_LOG_ERROR, "the node daemon did not start (see its messages above)");
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    G.daemon_pid = 0;
    return RD_ECONN;
  }
  return 0;
}

static void ctx_reset(void) {
  pollset_free(&G.pollset);
  while (G.wdirty.head) rd__conn_unlist(G.wdirty.head);   /* conns still open at shutdown */
  rd__dedup_free(G.dedup);
  G.dedup = NULL;
  free(G.job_env);
  G.job_env = NULL;
  G.job_env_len = 0;
  if (G.rw_base) munmap(G.rw_base, G.store_cap);
  if (G.ro_base) munmap((void *)G.ro_base, G.store_cap);
  G.rw_base = NULL;
  G.ro_base = NULL;
  free(G.done);
  G.done = NULL;
  G.done_n = G.done_next = 0;
  G.done_dropped = G.done_reported = 0;
  if (G.objs.slots) {
    /* tasks still waiting for arguments live only in their objects' lists;
     * a task can wait on several objects, so mark each before freeing */
    rd__task *waiting = NULL;
    for (uint64_t i = 0; i <= G.objs.mask; i++) {
      rd__obj *o = G.objs.slots[i].val;
      for (int k = 0; o && k < o->ndeps; k++) {
        rd__task *t = o->deps[k];
        if (t->deps_pending == INT_MIN) continue;
        t->deps_pending = INT_MIN;
        t->next = waiting;
        waiting = t;
      }
    }
    while (waiting) {
      rd__task *t = waiting;
      waiting = t->next;
      free(t);
    }
    while (G.lineage) {   /* their objects go below, without counting */
      rd__task *t = G.lineage;
      G.lineage = t->lin_next;
      free(t);
    }
    G.lineage_bytes = 0;
    for (uint64_t i = 0; i <= G.objs.mask; i++) {
      rd__obj *o = G.objs.slots[i].val;
      if (!o) continue;
      blob_unref(o->blob);
      free(o->deps);
      free(o->bwait);
      free(o->holds);
      free(o->inner);
      free(o);
    }
    rd__u64map_free(&G.objs);
    free(drop_list);
    drop_list = NULL;
    ndrop = capdrop = 0;
  }
  while (G.classes) {
    rd__sclass *c = G.classes;
    G.classes = c->next;
    class_free(c);
  }
  free(G.ctab.b);
  memset(&G.ctab, 0, sizeof(G.ctab));
  G.leased = G.last_class = NULL;
  rd__u64map_free(&G.reqs);
  G.nreq = 0;
  memset(G.reqprio, 0, sizeof(G.reqprio));
  G.reqprio_over = G.any_delayed = G.any_gone = G.any_backoff = G.class_dirty = 0;
  G.class_sweep_ns = 0;
  G.classes_unused = 0;
  while (G.actors) actor_forget(G.actors);
  rd__u64map_free(&G.actor_ids);
  G.any_dead_actor = 0;
  if (G.wakefd >= 0) close(G.wakefd);
  G.wakefd = -1;
  if (G.epfd >= 0) close(G.epfd);   /* the conns left it as they closed */
  G.epfd = -1;
  G.ep_base = 0;
  free(G.pending_release);
  G.pending_release = NULL;
  G.npending_release = G.cappending_release = 0;
  free(pending_delete);
  free(pending_delete_node);
  pending_delete = NULL;
  pending_delete_node = NULL;
  npending_delete = cappending_delete = 0;
  G.inited = G.dead = 0;
  G.progress_off = 0;
  G.session[0] = 0;
  G.attached = G.cluster = 0;
  G.node_index = 0;
  G.token[0] = 0;
  rd__registry_free();
}

/* The job's fair-share weight: cfg->job_weight, else env
 * RAYDIST_JOB_WEIGHT, else 1; into G.job_weight. */
static int job_weight_parse(const rd_config *cfg, char *why, size_t whylen) {
  double w = cfg->job_weight;
  char src = 'c';   /* c: the config, e: the environment */
  const char *e = getenv("RAYDIST_JOB_WEIGHT");
  if (w == 0 && e && *e) {
    char *end;
    w = strtod(e, &end);
    src = 'e';
    if (end == e || *end || !(w > 0)) w = -1;   /* 0 from the environment is a mistake, not "default" */
  }
  if (w == 0) w = 1;
  if (!(w > 0 && w <= 1000)) {   /* also NaN */
    if (src == 'e') snprintf(why, whylen, "RAYDIST_JOB_WEIGHT '%s' must be a number above 0 and at most 1000", e);
    else snprintf(why, whylen, "job_weight %g must be above 0 and at most 1000", w);
    return RD_EINVAL;
  }
  G.job_weight = w;
  return 0;
}

/* The process's own env set (G.job_env): a driver's cfg->env, else (and a
 * worker's, whose program's rd_config is not its driver's) the variables
 * $RAYDIST_ENV_VARS names ("NAME,NAME,..."; set by `raydist job submit
 * --env` and the jobs API's env_vars for a job's driver, and by the node
 * for a worker started with a set), those unset skipped.  0, or RD_EINVAL
 * / RD_ENOMEM with why. */
static int own_env_load(const rd_config *cfg, int worker, char *why, size_t len) {
  const char *names = getenv("RAYDIST_ENV_VARS");
  if (!worker && cfg->env) return env_canon(cfg->env, &G.job_env, &G.job_env_len, why, len);
  if (!names || !*names) return 0;
  char *vars[RD_ENV_MAX_VARS + 1];
  size_t n = 0;
  char *copy = strdup(names), *save = NULL;
  int r = copy ? 0 : RD_ENOMEM;
  for (char *nm = copy ? strtok_r(copy, ",", &save) : NULL; nm && r == 0; nm = strtok_r(NULL, ",", &save)) {
    const char *v = getenv(nm);
    if (!v) continue;
    if (n == RD_ENV_MAX_VARS) {
      snprintf(why, len, "names more than %d variables", RD_ENV_MAX_VARS);
      r = RD_EINVAL;
    } else if (asprintf(&vars[n], "%s=%s", nm, v) < 0) {
      r = RD_ENOMEM;
    } else {
      n++;
    }
  }
  if (r == RD_ENOMEM) snprintf(why, len, "out of memory");
  if (r == 0) r = rd__env_canon((const char *const *)vars, n, &G.job_env, &G.job_env_len, why, len);
  for (size_t i = 0; i < n; i++) free(vars[i]);
  free(copy);
  return r;
}

int rd_init(const rd_config *cfg_in) {
  rd_config cfg;
  if (cfg_in) cfg = *cfg_in;
  else rd_config_init(&cfg);
  pthread_mutex_lock(&G.mu);
  if (G.inited) {
    pthread_mutex_unlock(&G.mu);
    return RD_ESTATE;
  }
  const char *wid = getenv("RAYDIST_WORKER_ID");
  rd__log_init(wid ? "worker" : "driver");
  rd__raise_nofile();   /* a socket per actor called, per lease held */
  if (cfg.log_level >= 0) rd__log_set_level(cfg.log_level);
  int r = rd__registry_build();
  if (r != 0) {
    pthread_mutex_unlock(&G.mu);
    return r;
  }
  const char *address = cfg.address && *cfg.address ? cfg.address : getenv("RAYDIST_ADDRESS");
  {
    int64_t fx;
    rd_resources tmp;
    char why[200] = "";
    memset(&tmp, 0, sizeof(tmp));
    if (cfg.num_cpus < 0 || (cfg.num_cpus > 0 && rd_res_from_double(cfg.num_cpus, &fx) != 0))
      snprintf(why, sizeof(why), "num_cpus %g must be a whole number or a fraction below 1", cfg.num_cpus);
    else if (cfg.num_gpus > RD_RES_MAX_GPUS || (cfg.num_gpus >= 0 && cfg.num_gpus != (double)(long)cfg.num_gpus))
      snprintf(why, sizeof(why), "num_gpus %g must be a whole number up to %d", cfg.num_gpus, RD_RES_MAX_GPUS);
    else if (job_weight_parse(&cfg, why, sizeof(why)) != 0)
      ;   /* why says it */
    else if (rd__res_parse_custom(&tmp, cfg.custom_resources, why, sizeof(why)) != 0)
      ;   /* why says it */
    else if (cfg.node_labels && *cfg.node_labels && address && *address)
      snprintf(why, sizeof(why), "node_labels are the embedded node's: a cluster's nodes take `raydist start --labels`");
    else {
      char lab[RD_LABELS_LEN];
      (void)rd_labels_canon(embedded_labels(&cfg), lab, sizeof(lab), why, sizeof(why));   /* fills why on error */
    }
    if (why[0]) {
      rd__log(RD_LOG_ERROR, "rd_init: %s", why);
      pthread_mutex_unlock(&G.mu);
      return RD_EINVAL;
    }
    const char *ld = getenv("RAYDIST_LOG_TO_DRIVER");
    G.log_to_driver = cfg.log_to_driver && !(ld && !strcmp(ld, "0"));
    /* a driver's is its own; a worker's comes with each call (its program's
     * rd_config is not its driver's) */
    const char *ns = wid ? NULL : cfg.namespace_name && *cfg.namespace_name ? cfg.namespace_name : getenv("RAYDIST_NAMESPACE");
    if (!rd__ns_valid(ns)) {
      rd__log(RD_LOG_ERROR, "rd_init: namespace '%.200s' must be at most %d bytes with no ':' and no control characters",
              ns, RD_NS_MAX - 1);
      pthread_mutex_unlock(&G.mu);
      return RD_EINVAL;
    }
    if (!(G.ns = rd__ns_intern(ns))) {
      pthread_mutex_unlock(&G.mu);
      return RD_ENOMEM;
    }
    int er = own_env_load(&cfg, wid != NULL, why, sizeof(why));
    if (er != 0) {
      rd__log(RD_LOG_ERROR, "rd_init: %s%s", wid || cfg.env ? "" : "RAYDIST_ENV_VARS: ", why);
      pthread_mutex_unlock(&G.mu);
      return er;
    }
  }
  signal(SIGPIPE, SIG_IGN);
  const char *e = getenv("RAYDIST_PIPELINE_DEPTH");
  G.pipeline_depth = e && atoi(e) > 0 ? atoi(e) : 32;
  e = getenv("RAYDIST_MAX_LINEAGE_BYTES");
  G.lineage_max = e && *e ? (size_t)strtoull(e, NULL, 10) : (size_t)1 << 30;
  e = getenv("RAYDIST_TASK_HISTORY");   /* finished tasks the node keeps for `ray list tasks`; 0: none */
  G.done_max = e && *e ? (size_t)strtoull(e, NULL, 10) : RD_OWNER_FINISHED_MAX;
  if (G.done_max > RD_OWNER_FINISHED_MAX) G.done_max = RD_OWNER_FINISHED_MAX;   /* held until reported */
  e = getenv("RAYDIST_SPIN_US");
  double spin_us = e && *e ? atof(e) : 50.0;
  G.spin_ns = spin_us > 0 && spin_us < 1e6 ? (uint64_t)(spin_us * 1000) : 0;
  e = getenv("RAYDIST_LEASE_IDLE_MS");
  double idle_ms = e && *e ? atof(e) : 5.0;
  G.lease_idle_ns = idle_ms > 0 && idle_ms < 3.6e6 ? (uint64_t)(idle_ms * 1e6) : 0;
  e = getenv("RAYDIST_TASK_OOM_RETRIES");
  G.oom_retries = e && *e ? (atoi(e) < -1 ? -1 : atoi(e)) : 10;
  e = getenv("RAYDIST_TASK_OOM_RETRY_DELAY_MS");
  double oom_ms = e && *e ? atof(e) : 1000.0;
  G.oom_delay_ns = oom_ms >= 0 && oom_ms <= 6e4 ? (uint64_t)(oom_ms * 1e6) : 1000000000ull;
  e = getenv("RAYDIST_LEASE_RETRY_MS");
  double ask_ms = e && *e ? atof(e) : 10000.0;
  G.ask_retry_ns = ask_ms >= 0 && ask_ms <= 3.6e6 ? (uint64_t)(ask_ms * 1e6) : 10000000000ull;
  G.wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  e = getenv("RAYDIST_EPOLL");   /* 0: poll() every socket each round (the fallback, for comparing) */
  G.ep_off = e && !strcmp(e, "0");
  G.ep_base = 0;
  G.epfd = G.ep_off ? -1 : epoll_create1(EPOLL_CLOEXEC);
  if (G.epfd < 0) G.ep_off = 1;
  if (rd__u64map_init(&G.objs, 1024) != 0 || rd__u64map_init(&G.reqs, 64) != 0 ||
      rd__u64map_init(&G.actor_ids, 64) != 0 || G.wakefd < 0) {
    ctx_reset();
    pthread_mutex_unlock(&G.mu);
    return RD_ENOMEM;
  }
  if (wid) {
    const char *sess = getenv("RAYDIST_SESSION");
    const char *tok = getenv("RAYDIST_CLUSTER_TOKEN");
    snprintf(G.token, sizeof(G.token), "%s", tok ? tok : "");
    G.is_worker = 1;
    /* a pipe to the node (log_to_driver): line by line, as on a terminal,
     * or a task's prints would come at its process's exit */
    struct stat so;
    if (fstat(1, &so) == 0 && (S_ISFIFO(so.st_mode) || S_ISSOCK(so.st_mode))) setvbuf(stdout, NULL, _IOLBF, 0);
    snprintf(G.session, sizeof(G.session), "%s", sess ? sess : "");
    rd__crash_install();   /* a crash in a task says what, where and in which task */
    r = rd__connect_daemon(G.session, 1, (uint32_t)strtoul(wid, NULL, 10));
    if (r != 0) {
      rd__log(RD_LOG_ERROR, "worker cannot join its node: %s", rd_strerror(r));
      _exit(1);
    }
    G.inited = 1;
    pthread_mutex_unlock(&G.mu);
    rd__worker_main();
  }
  char dwhy[300];   /* a driver's deduplication of its workers' lines: made once nothing else can fail early */
  if (G.log_to_driver && rd__dedup_from_env(&G.dedup, dwhy, sizeof(dwhy)) != 0) {
    rd__log(RD_LOG_ERROR, "rd_init: %s", dwhy);
    ctx_reset();
    pthread_mutex_unlock(&G.mu);
    return RD_EINVAL;
  }
  if (address && *address) {
    r = attach_cluster(address);
    if (r == 0) r = rd__connect_daemon(G.session, 0, 0);
    if (r != 0) {
      G.session[0] = 0;   /* the node's, not ours to remove */
      G.attached = 0;
    }
  } else {
    r = make_session_dir();
    if (r == 0) r = start_daemon(&cfg);
    if (r == 0) r = rd__connect_daemon(G.session, 0, 0);
  }
  if (r != 0) {
    if (G.daemon_pid > 0) {
      kill(G.daemon_pid, SIGKILL);
      waitpid(G.daemon_pid, NULL, 0);
      G.daemon_pid = 0;
    }
    if (G.session[0]) rd__rm_rf(G.session);
    ctx_reset();
    pthread_mutex_unlock(&G.mu);
    return r;
  }
  G.inited = 1;
  pthread_mutex_unlock(&G.mu);
  return 0;
}

void rd_shutdown(void) {
  pthread_mutex_lock(&G.mu);
  if (!G.inited) {
    pthread_mutex_unlock(&G.mu);
    return;
  }
  if (G.closing) {   /* another thread shuts down: done when it is */
    while (G.closing) pthread_cond_wait(&G.cv, &G.mu);
    pthread_mutex_unlock(&G.mu);
    return;
  }
  progress_stop();
  /* threads blocked in a get, a wait or a request leave it (RD_ESTATE)
   * before anything goes: the one in poll() is woken, those waiting for it
   * are told, and none enters again */
  G.closing = 1;
  closing_thread = 1;
  wake_pumper();
  pthread_cond_broadcast(&G.cv);
  while (G.in_pump > 0) pthread_cond_wait(&G.cv, &G.mu);
  /* workers' output (log_to_driver) is printed, not lost: the node first
   * reads and sends what its workers wrote for this driver (a task's last
   * lines may still be in a pipe as its result comes), then what has
   * arrived (from other nodes too) is printed */
  if (!G.is_worker && G.log_to_driver && !G.dead) {
    Rd__NodeInfo ni = RD__NODE_INFO__INIT;
    ni.req_id = ++G.next_req;
    ni.drain_output = 1;
    ProtobufCMessage *rep = NULL;
    if (rd__daemon_call(RD__MSG_TYPE__MSG_NODE_INFO, &ni.base, ni.req_id, RD__MSG_TYPE__MSG_NODE_INFO_REPLY, &rep,
                        2000) == 0)
      protobuf_c_message_free_unpacked(rep, NULL);
    (void)rd__pump(0);
  }
  rd__dedup_free(G.dedup);   /* what it held, printed */
  G.dedup = NULL;
  for (rd_cq *cq = G.cqs; cq; cq = cq->next) cq_close(cq);
  G.cqs = NULL;   /* rd_cq_destroy finds a closed queue in no list */
  abandon_all_work(RD_ECANCELED, "rd_shutdown");
  if (!G.dead) {
    Rd__Shutdown m = RD__SHUTDOWN__INIT;
    send_pending_releases();
    int64_t unused = -1;
    ost_report(rd__now_ns(), 1, &unused);   /* what the last 100 ms did, and nothing left live */
    /* a cluster's node outlives its drivers */
    if (!G.attached) rd__conn_send(&G.daemon, RD__MSG_TYPE__MSG_SHUTDOWN, &m.base, -1);
    (void)rd__conn_flush_blocking(&G.daemon, 2000);
  }
  rd__conn_close(&G.daemon);
  if (G.daemon_pid > 0) {
    uint64_t deadline = rd__now_ns() + 5000000000ull;
    int st;
    while (waitpid(G.daemon_pid, &st, WNOHANG) == 0) {
      if (rd__now_ns() > deadline) {
        rd__log(RD_LOG_WARN, "node daemon did not stop in 5 s; killing it");
        kill(G.daemon_pid, SIGKILL);
        waitpid(G.daemon_pid, &st, 0);
        break;
      }
      usleep(2000);
    }
    G.daemon_pid = 0;
  }
  if (!G.is_worker && !G.attached && G.session[0]) {   /* the node ended it, kept or not; else (killed) it goes */
    char ended[sizeof(G.session) + 8];
    snprintf(ended, sizeof(ended), "%s/ended", G.session);
    if (access(ended, F_OK) != 0) rd__rm_rf(G.session);
  }
  ctx_reset();
  G.closing = 0;
  closing_thread = 0;
  pthread_cond_broadcast(&G.cv);   /* a second rd_shutdown waits for this one */
  pthread_mutex_unlock(&G.mu);
}

/* ------------------------------------------------------ key-value store */

enum { KV_PUT = 1, KV_GET = 2, KV_DEL = 3, KV_KEYS = 4, KV_REQUEST = 5 };

/* One rd_kv_* request: 0 and *rep (free it), or the error (logged). */
static int kv_call(const char *what, int op, const char *key, const void *value, size_t size, int overwrite,
                   Rd__KvReply **rep) {
  *rep = NULL;
  size_t klen = key ? strlen(key) : 0;
  if ((op != KV_KEYS && (!key || klen == 0)) || klen > RD_KV_MAX_KEY || ((op == KV_PUT || op == KV_REQUEST) && size && !value) ||
      size > RD_KV_MAX_VALUE) {
    rd__log(RD_LOG_WARN, "%s: a key of 1..%d bytes and a value of at most %u bytes", what, RD_KV_MAX_KEY,
            RD_KV_MAX_VALUE);
    return RD_EINVAL;
  }
  LOCKED_OR(RD_ESTATE);
  Rd__KvRequest m = RD__KV_REQUEST__INIT;
  m.req_id = ++G.next_req;
  m.op = (uint32_t)op;
  m.key = (char *)(key ? key : "");
  m.value.data = (uint8_t *)value;
  m.value.len = op == KV_PUT || op == KV_REQUEST ? size : 0;
  m.overwrite = overwrite != 0;
  ProtobufCMessage *r = NULL;
  int rc = rd__daemon_call(RD__MSG_TYPE__MSG_KV, &m.base, m.req_id, RD__MSG_TYPE__MSG_KV_REPLY, &r, 60000);
  pthread_mutex_unlock(&G.mu);
  if (rc == 0) {
    Rd__KvReply *kr = (Rd__KvReply *)r;
    rc = kr->status;
    if (rc != 0 && rc != RD_ENOENT && rc != RD_EEXIST)
      rd__log(RD_LOG_WARN, "%s '%.100s': %s", what, key ? key : "", kr->error && *kr->error ? kr->error : rd_strerror(rc));
    if (rc == 0) *rep = kr;
    else protobuf_c_message_free_unpacked(r, NULL);
  }
  return rc;
}

int rd_kv_put(const char *key, const void *value, size_t size, int overwrite) {
  Rd__KvReply *r;
  int rc = kv_call("rd_kv_put", KV_PUT, key, value, size, overwrite, &r);
  if (rc == 0) protobuf_c_message_free_unpacked(&r->base, NULL);
  return rc;
}

/* A bundle's resources, checked as a task's: 0, or RD_EINVAL with err. */
static int bundle_resources(const rd_bundle *b, rd_resources *r, char *err, size_t errlen) {
  return amounts_to_resources(b->num_cpus, b->num_gpus, b->memory, b->resources, r, err, errlen);
}

/* rd_request_resources: the bundles as lines of "CPU=1,GPU=0.5,memory=N,
 * name=amount" (the autoscaling config's syntax), sent as KV op 5, which
 * the node writes to the autoscaler's namespace. */
int rd_request_resources(const rd_bundle *bundles, size_t n) {
  if ((n && !bundles) || n > RD_REQUEST_MAX) {
    rd__log(RD_LOG_WARN, "rd_request_resources: %zu bundles (at most %d, and not NULL)", n, RD_REQUEST_MAX);
    return RD_EINVAL;
  }
  size_t cap = n * 320 + 1, len = 0;
  char *text = malloc(cap);
  if (!text) return RD_ENOMEM;
  text[0] = 0;
  for (size_t i = 0; i < n; i++) {
    rd_resources r;
    char err[256];
    int bad = bundle_resources(&bundles[i], &r, err, sizeof(err)) != 0;
    if (!bad && bundles[i].label_selector && *bundles[i].label_selector) {
      snprintf(err, sizeof(err), "a label_selector (requests are resources only)");
      bad = 1;
    }
    if (!bad && !r.cpu && !r.gpu && !r.memory && !r.ncustom) {
      snprintf(err, sizeof(err), "it asks for nothing");
      bad = 1;
    }
    if (bad) {
      rd__log(RD_LOG_WARN, "rd_request_resources: bundle %zu: %s", i, err);
      free(text);
      return RD_EINVAL;
    }
    len += (size_t)snprintf(text + len, cap - len, "CPU=%g,GPU=%g,memory=%lld", rd_res_to_double(r.cpu),
                            rd_res_to_double(r.gpu), (long long)r.memory);
    for (int k = 0; k < r.ncustom && len < cap; k++)
      len += (size_t)snprintf(text + len, cap - len, ",%s=%g", r.custom[k].name, rd_res_to_double(r.custom[k].amount));
    if (len < cap) len += (size_t)snprintf(text + len, cap - len, "\n");
  }
  Rd__KvReply *r;
  int rc = kv_call("rd_request_resources", KV_REQUEST, "requested", text, len, 1, &r);
  free(text);
  if (rc == 0) protobuf_c_message_free_unpacked(&r->base, NULL);
  return rc;
}

int rd_kv_get(const char *key, void **value, size_t *size) {
  if (!value || !size) return RD_EINVAL;
  *value = NULL;
  *size = 0;
  Rd__KvReply *r;
  int rc = kv_call("rd_kv_get", KV_GET, key, NULL, 0, 0, &r);
  if (rc != 0) return rc;
  void *v = malloc(r->value.len ? r->value.len : 1);
  if (v) {
    if (r->value.len) memcpy(v, r->value.data, r->value.len);
    *value = v;
    *size = r->value.len;
  }
  protobuf_c_message_free_unpacked(&r->base, NULL);
  return v ? 0 : RD_ENOMEM;
}

int rd_kv_del(const char *key) {
  Rd__KvReply *r;
  int rc = kv_call("rd_kv_del", KV_DEL, key, NULL, 0, 0, &r);
  if (rc == 0) protobuf_c_message_free_unpacked(&r->base, NULL);
  return rc;
}

int rd_kv_keys(const char *prefix, char ***keys, size_t *n) {
  if (!keys || !n) return RD_EINVAL;
  *keys = NULL;
  *n = 0;
  Rd__KvReply *r;
  int rc = kv_call("rd_kv_keys", KV_KEYS, prefix ? prefix : "", NULL, 0, 0, &r);
  if (rc != 0) return rc;
  char **v = rd__strv_pack(r->keys, r->n_keys);
  if (v) {
    *keys = v;
    *n = r->n_keys;
  }
  protobuf_c_message_free_unpacked(&r->base, NULL);
  return v ? 0 : RD_ENOMEM;
}

/* ---------------------------------------------------- placement groups */

/* One request to the node answered by a PgReply: its status (or the call's
 * error); *rep is the reply when status is 0 (free it).  G.mu held. */
static int pg_call(Rd__MsgType t, const ProtobufCMessage *m, uint64_t req_id, int64_t timeout_ms, const char *what,
                   Rd__PgReply **rep) {
  ProtobufCMessage *r = NULL;
  *rep = NULL;
  int rc = rd__daemon_call(t, m, req_id, RD__MSG_TYPE__MSG_PG_REPLY, &r, timeout_ms);
  if (rc != 0) return rc;
  Rd__PgReply *pr = (Rd__PgReply *)r;
  if (pr->status != 0) {
    rc = pr->status;
    if (rc != RD_ETIMEDOUT) rd__log(RD_LOG_WARN, "%s: %s", what, pr->error);
    protobuf_c_message_free_unpacked(r, NULL);
    return rc;
  }
  *rep = pr;
  return 0;
}

void rd_pg_opts_init(rd_pg_opts *o) {
  if (o) memset(o, 0, sizeof(*o));
}

int rd_pg_create(const rd_bundle *bundles, size_t n, int strategy, const char *name, rd_pg *out) {
  rd_pg_opts o = {.strategy = strategy, .name = name};
  return rd_pg_create_with(bundles, n, &o, out);
}

static void pg_sels_free(char **sels, size_t n) {
  for (size_t i = 0; i < n; i++) free(sels[i]);
}

int rd_pg_create_with(const rd_bundle *bundles, size_t n, const rd_pg_opts *o, rd_pg *out) {
  char qname[128] = "";   /* "ns:name" in a namespace */
  if (!o || (o->detached != 0 && o->detached != 1)) {
    rd__log(RD_LOG_WARN, "rd_pg_create: options missing, or detached not 0 or 1");
    return RD_EINVAL;
  }
  int strategy = o->strategy;
  const char *name = o->name;
  if (!bundles || !out || n == 0 || n > RD_PG_MAX_BUNDLES || strategy < RD_PG_PACK || strategy > RD_PG_STRICT_SPREAD ||
      (name && *name && rd__ns_name(rd__ns_current(), name, qname, sizeof(qname)) != 0)) {
    rd__log(RD_LOG_WARN, "rd_pg_create: need 1..%d bundles, a known strategy and a name (with its namespace) under 128 bytes",
            RD_PG_MAX_BUNDLES);
    return RD_EINVAL;
  }
  name = qname;
  /* per bundle: what it asks and its message, which points into it, and
   * its selectors; one allocation (~450 bytes a bundle) */
  size_t each = sizeof(rd__res_msg) + sizeof(rd_resources) + sizeof(Rd__Resources *) + sizeof(char *);
  char *mem = calloc(n, each);
  if (!mem) return RD_ENOMEM;
  rd__res_msg *rm = (rd__res_msg *)mem;
  rd_resources *res = (rd_resources *)(rm + n);
  Rd__Resources **rp = (Rd__Resources **)(res + n);
  char **sels = (char **)(rp + n);
  size_t nsel = 0;   /* up to the last bundle with a selector */
  for (size_t i = 0; i < n; i++) {
    char err[256], why[200];
    sels[i] = NULL;
    if (bundle_resources(&bundles[i], &res[i], err, sizeof(err)) != 0) {
      rd__log(RD_LOG_WARN, "rd_pg_create: bundle %zu: %s", i, err);
      pg_sels_free(sels, i);
      free(mem);
      return RD_EINVAL;
    }
    /* the selector and its fallbacks as alternatives, "sel;fallback;..." */
    char alts[RD_LABEL_ALTS_LEN];
    if (rd_label_alts_join(bundles[i].label_selector, bundles[i].fallback_label_selectors, alts, sizeof(alts), why,
                           sizeof(why)) != 0) {
      rd__log(RD_LOG_WARN, "rd_pg_create: bundle %zu: label_selector: %s", i, why);
      pg_sels_free(sels, i);
      free(mem);
      return RD_EINVAL;
    }
    if (!(sels[i] = strdup(alts))) {
      pg_sels_free(sels, i);
      free(mem);
      return RD_ENOMEM;
    }
    if (sels[i][0]) nsel = i + 1;
    rd__res_to_msg(&res[i], &rm[i]);
    rp[i] = &rm[i].msg;
  }
  pthread_mutex_lock(&G.mu);
  if (!G.inited) {
    pthread_mutex_unlock(&G.mu);
    pg_sels_free(sels, n);
    free(mem);
    return RD_ESTATE;
  }
  G.user_calls++;
  Rd__PgCreate m = RD__PG_CREATE__INIT;
  m.req_id = ++G.next_req;
  m.name = (char *)(name ? name : "");
  m.strategy = strategy;
  m.n_bundles = n;
  m.bundles = rp;
  m.n_label_selectors = nsel;
  m.label_selectors = sels;
  m.detached = o->detached;
  Rd__PgReply *rep;
  int r = pg_call(RD__MSG_TYPE__MSG_PG_CREATE, &m.base, m.req_id, 30000, "rd_pg_create", &rep);
  if (r == 0) {
    out->id = rep->pg_id;
    protobuf_c_message_free_unpacked(&rep->base, NULL);
  }
  pthread_mutex_unlock(&G.mu);
  pg_sels_free(sels, n);
  free(mem);
  return r;
}

/* A query by id or name; timeout_ms 0 answers at once. */
static int pg_query(uint64_t id, const char *name, int64_t timeout_ms, const char *what, Rd__PgReply **rep) {
  LOCKED_OR(RD_ESTATE);
  Rd__PgQuery m = RD__PG_QUERY__INIT;
  m.req_id = ++G.next_req;
  m.pg_id = id;
  m.name = (char *)(name ? name : "");
  m.timeout_ms = timeout_ms;
  /* the node answers a wait when it ends; give the answer time to arrive */
  int64_t t = timeout_ms < 0 ? -1 : timeout_ms + 30000;
  int r = pg_call(RD__MSG_TYPE__MSG_PG_QUERY, &m.base, m.req_id, t, what, rep);
  pthread_mutex_unlock(&G.mu);
  return r;
}

int rd_pg_wait(rd_pg pg, int64_t timeout_ms) {
  if (!pg.id) return RD_EINVAL;
  /* in slices, so other threads of this process are not held off the
   * client lock for the whole wait */
  uint64_t deadline = timeout_ms >= 0 ? rd__now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
  for (;;) {
    int64_t slice = 200;
    if (deadline) {
      uint64_t now = rd__now_ns();
      int64_t left = now >= deadline ? 1 : (int64_t)((deadline - now + 999999) / 1000000);
      if (left < slice) slice = left;
    }
    Rd__PgReply *rep;
    int r = pg_query(pg.id, NULL, slice, "rd_pg_wait", &rep);
    if (r == 0) protobuf_c_message_free_unpacked(&rep->base, NULL);
    if (r != RD_ETIMEDOUT || (deadline && rd__now_ns() >= deadline)) return r;
  }
}

int rd_pg_info_get(rd_pg pg, rd_pg_info *out) {
  if (!pg.id || !out) return RD_EINVAL;
  Rd__PgReply *rep;
  int r = pg_query(pg.id, NULL, 0, "rd_pg_info_get", &rep);
  if (r != 0) return r;
  memset(out, 0, sizeof(*out));
  out->state = rep->state;
  out->strategy = rep->strategy;
  out->num_bundles = rep->n_bundle_nodes;
  for (size_t i = 0; i < out->num_bundles && i < RD_PG_INFO_NODES; i++) out->bundle_nodes[i] = rep->bundle_nodes[i];
  protobuf_c_message_free_unpacked(&rep->base, NULL);
  return 0;
}

int rd_pg_bundle_nodes(rd_pg pg, uint32_t *nodes, size_t cap, size_t *n) {
  if (!pg.id || !n || (cap && !nodes)) return RD_EINVAL;
  Rd__PgReply *rep;
  int r = pg_query(pg.id, NULL, 0, "rd_pg_bundle_nodes", &rep);
  if (r != 0) return r;
  *n = rep->n_bundle_nodes;
  for (size_t i = 0; i < *n && i < cap; i++) nodes[i] = rep->bundle_nodes[i];
  protobuf_c_message_free_unpacked(&rep->base, NULL);
  return 0;
}

int rd_pg_get(const char *name, rd_pg *out) {
  char qname[128];
  if (!name || !*name || !out || rd__ns_name(rd__ns_current(), name, qname, sizeof(qname)) != 0) return RD_EINVAL;
  Rd__PgReply *rep;
  int r = pg_query(0, qname, 0, "rd_pg_get", &rep);
  if (r != 0) return r;
  if (rep->state == RD_PG_STATE_REMOVED) r = RD_ENOENT;
  else out->id = rep->pg_id;
  protobuf_c_message_free_unpacked(&rep->base, NULL);
  return r;
}

int rd_pg_remove(rd_pg pg) {
  if (!pg.id) return RD_EINVAL;
  LOCKED_OR(RD_ESTATE);
  Rd__PgRemove m = RD__PG_REMOVE__INIT;
  m.req_id = ++G.next_req;
  m.pg_id = pg.id;
  Rd__PgReply *rep;
  int r = pg_call(RD__MSG_TYPE__MSG_PG_REMOVE, &m.base, m.req_id, 30000, "rd_pg_remove", &rep);
  if (r == 0) protobuf_c_message_free_unpacked(&rep->base, NULL);
  pthread_mutex_unlock(&G.mu);
  return r;
}
