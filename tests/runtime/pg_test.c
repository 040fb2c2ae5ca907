/* tests/runtime/pg_test.c - placement groups on an embedded cluster, through
 * the public API with real worker processes: bundles are carved out of the
 * node (other work cannot use them), tasks and actors run inside them with
 * the bundle's GPU, a group that does not fit waits and is reserved when
 * room appears, removal gives everything back and kills what ran inside,
 * and bad input gets clear errors.  `pg_test NAME` runs one case. */
#include <raydist.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../check.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void init_or_die(double cpus, double gpus) {
  rd_config cfg;
  rd_config_init(&cfg);
  cfg.num_cpus = cpus;
  cfg.num_gpus = gpus;
  cfg.num_prestart_workers = 0;
  int r = rd_init(&cfg);
  if (r != 0) {
    fprintf(stderr, "rd_init: %s\n", rd_err_name(r));
    exit(1);
  }
}

/* Returns {first GPU id or -1, its share * 10000}. */
RD_REMOTE(gpu_of) {
  int ids[4];
  double fr[4];
  long out[2] = {-1, 0};
  if (rd_call_gpu_ids(call, ids, fr, 4) >= 1) {
    out[0] = ids[0];
    out[1] = (long)(fr[0] * 10000 + 0.5);
  }
  usleep(200 * 1000);
  return rd_return_bytes(call, 0, out, sizeof(out));
}

RD_REMOTE(sleep_ms) {
  rd_buf b;
  long ms = 0;
  if (rd_arg(call, 0, &b) == 0 && b.size == sizeof(ms)) memcpy(&ms, b.data, sizeof(ms));
  usleep((useconds_t)ms * 1000);
  return rd_return_bytes(call, 0, &ms, sizeof(ms));
}

typedef struct cell {
  long v;
} cell;
static int cell_init(rd_call *call, void **state) {
  cell *c = calloc(1, sizeof(*c));
  if (!c) return rd_call_fail(call, "out of memory");
  *state = c;
  return 0;
}
static void cell_fini(void *state) { free(state); }
RD_ACTOR_CLASS(Cell, cell_init, cell_fini)
RD_ACTOR_METHOD(Cell, incr) {
  cell *c = state;
  c->v++;
  return rd_return_bytes(call, 0, &c->v, sizeof(c->v));
}

static int get_longs(rd_ref r, long *out, size_t n, int64_t timeout_ms, char *msg, size_t msglen) {
  rd_buf b;
  int err = rd_get(&r, 1, &b, timeout_ms);
  if (err == 0 && b.size == n * sizeof(long)) memcpy(out, b.data, n * sizeof(long));
  if (err != 0 && err != RD_ETIMEDOUT && msg) snprintf(msg, msglen, "%.*s", (int)b.size, (const char *)b.data);
  if (err != RD_ETIMEDOUT) rd_buf_release(&b);
  return err;
}

static double avail_cpus(void) {
  rd_node_info ni;
  CHECK_EQ(rd_node_info_get(&ni), 0);
  return ni.avail_cpus;
}

/* Bundles hold their share of the node; tasks inside get the bundle's GPU;
 * work outside cannot use it; removal gives it back. */
static int t_basic(void) {
  init_or_die(4, 2);
  rd_bundle b[2] = {{.num_cpus = 2, .num_gpus = 1}, {.num_cpus = 1, .num_gpus = 0.5}};
  rd_pg pg;
  CHECK_EQ(rd_pg_create(b, 2, RD_PG_PACK, "basic", &pg), 0);
  CHECK_EQ(rd_pg_wait(pg, 10000), 0);
  rd_pg_info info;
  CHECK_EQ(rd_pg_info_get(pg, &info), 0);
  CHECK_EQ(info.state, RD_PG_STATE_CREATED);
  CHECK_EQ(info.num_bundles, 2);
  CHECK(avail_cpus() > 0.99 && avail_cpus() < 1.01);   /* 4 - 3 reserved */
  rd_pg same;
  CHECK_EQ(rd_pg_get("basic", &same), 0);
  CHECK_EQ(same.id, pg.id);

  /* two half-GPU tasks in bundle 0 share its one GPU, at the same time */
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.num_cpus = 1;
  o.num_gpus = 0.5;
  o.placement_group = pg;
  o.bundle_index = 0;
  rd_ref r[3];
  for (int i = 0; i < 2; i++) CHECK_EQ(rd_submit(gpu_of, RD_NO_ARGS, &o, &r[i]), 0);
  /* bundle 1 holds the other GPU's half */
  o.bundle_index = 1;
  CHECK_EQ(rd_submit(gpu_of, RD_NO_ARGS, &o, &r[2]), 0);
  long g[3][2];
  for (int i = 0; i < 3; i++) CHECK_EQ(get_longs(r[i], g[i], 2, 30000, NULL, 0), 0);
  CHECK_EQ(g[0][0], g[1][0]);
  CHECK_EQ(g[0][1], 5000);
  CHECK(g[2][0] >= 0 && g[2][0] != g[0][0]);
  for (int i = 0; i < 3; i++) rd_ref_release(r[i]);

  /* any bundle (-1) that can run it */
  o.bundle_index = -1;
  o.num_gpus = 0;
  o.num_cpus = 2;
  CHECK_EQ(rd_submit(gpu_of, RD_NO_ARGS, &o, &r[0]), 0);
  CHECK_EQ(get_longs(r[0], g[0], 2, 30000, NULL, 0), 0);
  rd_ref_release(r[0]);

  /* outside the group only 1 CPU is free: a 2-CPU task waits for removal */
  rd_task_opts out;
  rd_task_opts_init(&out);
  out.num_cpus = 2;
  long ms = 10;
  CHECK_EQ(rd_submit(sleep_ms, RD_ARGS(rd_arg_bytes(&ms, sizeof ms)), &out, &r[0]), 0);
  CHECK_EQ(rd_wait(&r[0], 1, 1, 1500, NULL), 0);
  CHECK_EQ(rd_pg_remove(pg), 0);
  long v;
  CHECK_EQ(get_longs(r[0], &v, 1, 30000, NULL, 0), 0);
  rd_ref_release(r[0]);
  double t0 = now_s();
  while (avail_cpus() < 3.99 && now_s() - t0 < 10) usleep(20000);
  CHECK(avail_cpus() > 3.99);
  CHECK_EQ(rd_pg_info_get(pg, &info), 0);
  CHECK_EQ(info.state, RD_PG_STATE_REMOVED);
  CHECK_EQ(rd_pg_wait(pg, 100), RD_EPG_REMOVED);
  CHECK_EQ(rd_pg_get("basic", &same), RD_ENOENT);
  /* the name is free again */
  CHECK_EQ(rd_pg_create(b, 1, RD_PG_STRICT_PACK, "basic", &same), 0);
  CHECK_EQ(rd_pg_wait(same, 10000), 0);
  CHECK_EQ(rd_pg_remove(same), 0);
  rd_shutdown();
  return 0;
}

/* A group that does not fit now waits, and is reserved when room appears;
 * tasks submitted into it wait with it. */
static int t_pending(void) {
  init_or_die(2, 0);
  rd_bundle all = {.num_cpus = 2};
  rd_pg a, b;
  CHECK_EQ(rd_pg_create(&all, 1, RD_PG_PACK, NULL, &a), 0);
  CHECK_EQ(rd_pg_wait(a, 10000), 0);
  rd_bundle one[2] = {{.num_cpus = 1}, {.num_cpus = 1}};
  CHECK_EQ(rd_pg_create(one, 2, RD_PG_STRICT_PACK, NULL, &b), 0);
  CHECK_EQ(rd_pg_wait(b, 300), RD_ETIMEDOUT);
  rd_pg_info info;
  CHECK_EQ(rd_pg_info_get(b, &info), 0);
  CHECK_EQ(info.state, RD_PG_STATE_PENDING);
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.placement_group = b;
  o.bundle_index = 1;
  long ms = 1;
  rd_ref r;
  CHECK_EQ(rd_submit(sleep_ms, RD_ARGS(rd_arg_bytes(&ms, sizeof ms)), &o, &r), 0);
  CHECK_EQ(rd_wait(&r, 1, 1, 500, NULL), 0);   /* waits with its group */
  CHECK_EQ(rd_pg_remove(a), 0);
  CHECK_EQ(rd_pg_wait(b, 10000), 0);
  long v;
  CHECK_EQ(get_longs(r, &v, 1, 30000, NULL, 0), 0);
  rd_ref_release(r);
  CHECK_EQ(rd_pg_remove(b), 0);
  rd_shutdown();
  return 0;
}

/* A group waiting for room is reserved when the room comes back (an actor
 * killed, a group removed, a task's lease returned), not at its next
 * periodic retry: that retry is set to ten minutes here, so only the node
 * noticing the release can reserve the groups within the waits below. */
static int t_room_kicks(void) {
  setenv("RAYDIST_PG_RETRY_MS", "600000", 1);   /* read by the node this starts */
  init_or_die(2, 0);
  rd_bundle all = {.num_cpus = 2};
  rd_pg a, b, c;
  rd_pg_info info;
  /* an actor holds both CPUs */
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.num_cpus = 2;
  rd_actor holder;
  CHECK_EQ(rd_actor_create(Cell, RD_NO_ARGS, &ao, &holder), 0);
  rd_ref r;
  long v;
  CHECK_EQ(rd_actor_call(holder, Cell_incr, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(get_longs(r, &v, 1, 30000, NULL, 0), 0);
  rd_ref_release(r);
  CHECK_EQ(rd_pg_create(&all, 1, RD_PG_PACK, NULL, &a), 0);
  CHECK_EQ(rd_pg_wait(a, 300), RD_ETIMEDOUT);
  CHECK_EQ(rd_actor_kill(holder, 1), 0);
  double t0 = now_s();
  CHECK_EQ(rd_pg_wait(a, 20000), 0);
  fprintf(stderr, "reserved %.1f ms after the actor's kill\n", (now_s() - t0) * 1e3);
  /* a group removed: the one waiting behind it */
  CHECK_EQ(rd_pg_create(&all, 1, RD_PG_PACK, NULL, &b), 0);
  CHECK_EQ(rd_pg_info_get(b, &info), 0);
  CHECK_EQ(info.state, RD_PG_STATE_PENDING);
  t0 = now_s();
  CHECK_EQ(rd_pg_remove(a), 0);
  CHECK_EQ(rd_pg_wait(b, 20000), 0);
  fprintf(stderr, "reserved %.1f ms after the other group's removal\n", (now_s() - t0) * 1e3);
  CHECK_EQ(rd_pg_remove(b), 0);
  /* a task holding both CPUs: the group is reserved once its lease is back */
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.num_cpus = 2;
  long ms = 300;
  CHECK_EQ(rd_submit(sleep_ms, RD_ARGS(rd_arg_bytes(&ms, sizeof ms)), &o, &r), 0);
  t0 = now_s();
  while (avail_cpus() > 0.01 && now_s() - t0 < 10) usleep(5000);   /* running */
  CHECK_EQ(rd_pg_create(&all, 1, RD_PG_PACK, NULL, &c), 0);
  CHECK_EQ(rd_pg_info_get(c, &info), 0);
  CHECK_EQ(info.state, RD_PG_STATE_PENDING);
  CHECK_EQ(get_longs(r, &v, 1, 30000, NULL, 0), 0);
  rd_ref_release(r);
  CHECK_EQ(rd_pg_wait(c, 20000), 0);
  CHECK_EQ(rd_pg_remove(c), 0);
  rd_shutdown();
  return 0;
}

/* Removing a group kills its actors for good and its running tasks, and
 * fails what is submitted into it afterwards. */
static int t_remove_kills(void) {
  init_or_die(4, 0);
  rd_bundle b[2] = {{.num_cpus = 1}, {.num_cpus = 1}};
  rd_pg pg;
  CHECK_EQ(rd_pg_create(b, 2, RD_PG_SPREAD, NULL, &pg), 0);
  CHECK_EQ(rd_pg_wait(pg, 10000), 0);
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.num_cpus = 1;
  ao.max_restarts = 5;
  ao.placement_group = pg;
  ao.bundle_index = 0;
  rd_actor cell;
  CHECK_EQ(rd_actor_create(Cell, RD_NO_ARGS, &ao, &cell), 0);
  rd_ref r;
  long v;
  CHECK_EQ(rd_actor_call(cell, Cell_incr, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(get_longs(r, &v, 1, 30000, NULL, 0), 0);
  CHECK_EQ(v, 1);
  /* a second 1-CPU actor does not fit bundle 0 (the first holds it): it waits */
  rd_actor waiting;
  CHECK_EQ(rd_actor_create(Cell, RD_NO_ARGS, &ao, &waiting), 0);
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.placement_group = pg;
  o.bundle_index = 1;
  o.max_retries = 0;
  long ms = 20000;
  rd_ref slow;
  CHECK_EQ(rd_submit(sleep_ms, RD_ARGS(rd_arg_bytes(&ms, sizeof ms)), &o, &slow), 0);
  usleep(500 * 1000);
  double t0 = now_s();
  CHECK_EQ(rd_pg_remove(pg), 0);
  char msg[512] = "";
  int err = get_longs(slow, &v, 1, 30000, msg, sizeof(msg));
  CHECK(err == RD_EWORKER_DIED || err == RD_EPG_REMOVED);
  printf("the running task: %s\n", msg);
  CHECK(strstr(msg, "placement group was removed") != NULL);   /* the node's word, not "died" */
  CHECK(now_s() - t0 < 10);
  rd_ref_release(slow);
  CHECK_EQ(rd_actor_call(cell, Cell_incr, RD_NO_ARGS, NULL, &r), 0);
  err = get_longs(r, &v, 1, 30000, msg, sizeof(msg));
  CHECK_EQ(err, RD_EACTOR_DIED);   /* no restart, despite max_restarts */
  rd_ref_release(r);
  /* the next call asks the node, which says why */
  CHECK_EQ(rd_actor_call(cell, Cell_incr, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(get_longs(r, &v, 1, 30000, msg, sizeof(msg)), RD_EACTOR_DIED);
  if (!strstr(msg, "removed")) fprintf(stderr, "actor death: %s\n", msg);
  CHECK(strstr(msg, "removed") != NULL);
  rd_ref_release(r);
  CHECK_EQ(rd_actor_call(waiting, Cell_incr, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(get_longs(r, &v, 1, 30000, msg, sizeof(msg)), RD_EACTOR_DIED);
  rd_ref_release(r);
  ms = 1;
  CHECK_EQ(rd_submit(sleep_ms, RD_ARGS(rd_arg_bytes(&ms, sizeof ms)), &o, &r), 0);
  CHECK_EQ(get_longs(r, &v, 1, 30000, msg, sizeof(msg)), RD_EPG_REMOVED);
  rd_ref_release(r);
  /* everything came back */
  t0 = now_s();
  while (avail_cpus() < 3.99 && now_s() - t0 < 10) usleep(20000);
  CHECK(avail_cpus() > 3.99);
  rd_shutdown();
  return 0;
}

/* Bad input: clear codes, and the node keeps serving. */
static int t_bad_input(void) {
  init_or_die(2, 1);
  rd_bundle b = {.num_cpus = 1};
  rd_pg pg;
  CHECK_EQ(rd_pg_create(NULL, 1, RD_PG_PACK, NULL, &pg), RD_EINVAL);
  CHECK_EQ(rd_pg_create(&b, 0, RD_PG_PACK, NULL, &pg), RD_EINVAL);
  CHECK_EQ(rd_pg_create(&b, RD_PG_MAX_BUNDLES + 1, RD_PG_PACK, NULL, &pg), RD_EINVAL);
  CHECK_EQ(rd_pg_create(&b, 1, 9, NULL, &pg), RD_EINVAL);
  rd_bundle empty = {0};
  CHECK_EQ(rd_pg_create(&empty, 1, RD_PG_PACK, NULL, &pg), RD_EINVAL);
  rd_bundle neg = {.num_cpus = -1};
  CHECK_EQ(rd_pg_create(&neg, 1, RD_PG_PACK, NULL, &pg), RD_EINVAL);
  rd_bundle huge = {.num_cpus = 64};
  CHECK_EQ(rd_pg_create(&huge, 1, RD_PG_PACK, NULL, &pg), RD_EINFEASIBLE);
  rd_bundle gpus = {.num_gpus = 2};
  CHECK_EQ(rd_pg_create(&gpus, 1, RD_PG_PACK, NULL, &pg), RD_EINFEASIBLE);
  rd_bundle two[2] = {{.num_cpus = 1}, {.num_cpus = 1}};
  CHECK_EQ(rd_pg_create(two, 2, RD_PG_STRICT_SPREAD, NULL, &pg), RD_EINFEASIBLE);   /* one node */
  rd_bundle custom = {.num_cpus = 1, .resources = "nope=1"};
  CHECK_EQ(rd_pg_create(&custom, 1, RD_PG_PACK, NULL, &pg), RD_EINFEASIBLE);
  CHECK_EQ(rd_pg_create(&b, 1, RD_PG_PACK, "dup", &pg), 0);
  rd_pg other;
  CHECK_EQ(rd_pg_create(&b, 1, RD_PG_PACK, "dup", &other), RD_EEXIST);
  CHECK_EQ(rd_pg_wait(pg, 10000), 0);
  rd_pg ghost = {0x7777};
  CHECK_EQ(rd_pg_wait(ghost, 100), RD_ENOENT);
  CHECK_EQ(rd_pg_remove(ghost), RD_ENOENT);
  CHECK_EQ(rd_pg_get("ghost", &other), RD_ENOENT);
  rd_pg none = {0};
  CHECK_EQ(rd_pg_wait(none, 100), RD_EINVAL);

  rd_task_opts o;
  rd_task_opts_init(&o);
  o.placement_group = pg;
  long ms = 1, v;
  rd_ref r;
  char msg[512];
  o.bundle_index = 5;   /* the group has one bundle */
  CHECK_EQ(rd_submit(sleep_ms, RD_ARGS(rd_arg_bytes(&ms, sizeof ms)), &o, &r), 0);
  CHECK_EQ(get_longs(r, &v, 1, 30000, msg, sizeof(msg)), RD_EINVAL);
  CHECK(strstr(msg, "out of range") != NULL);
  rd_ref_release(r);
  o.bundle_index = RD_PG_MAX_BUNDLES;
  CHECK_EQ(rd_submit(sleep_ms, RD_ARGS(rd_arg_bytes(&ms, sizeof ms)), &o, &r), RD_EINVAL);
  o.bundle_index = 0;
  o.num_cpus = 2;   /* more than the bundle holds */
  CHECK_EQ(rd_submit(sleep_ms, RD_ARGS(rd_arg_bytes(&ms, sizeof ms)), &o, &r), 0);
  CHECK_EQ(get_longs(r, &v, 1, 30000, msg, sizeof(msg)), RD_EINFEASIBLE);
  CHECK(strstr(msg, "bundle 0") != NULL);
  rd_ref_release(r);
  o.placement_group = ghost;
  o.num_cpus = 1;
  CHECK_EQ(rd_submit(sleep_ms, RD_ARGS(rd_arg_bytes(&ms, sizeof ms)), &o, &r), 0);
  CHECK_EQ(get_longs(r, &v, 1, 30000, msg, sizeof(msg)), RD_ENOENT);
  rd_ref_release(r);
  /* still serving */
  o.placement_group = pg;
  CHECK_EQ(rd_submit(sleep_ms, RD_ARGS(rd_arg_bytes(&ms, sizeof ms)), &o, &r), 0);
  CHECK_EQ(get_longs(r, &v, 1, 30000, NULL, 0), 0);
  rd_ref_release(r);
  rd_shutdown();
  return 0;
}

static double avail_of(const char *name) {
  double total = 0, avail = 0;
  CHECK_EQ(rd_cluster_resources(name, &total, &avail), 0);
  return avail;
}

/* Groups of RD_PG_MAX_BUNDLES bundles (a 512-node x 8-GPU training
 * group's size; it was 64): reserved whole, every bundle's node readable,
 * tasks run in any of them, the node's room held and given back. */
static int t_large(void) {
  rd_config cfg;
  rd_config_init(&cfg);
  cfg.num_cpus = 2;
  cfg.num_prestart_workers = 0;
  cfg.custom_resources = "slot=8192";
  CHECK_EQ(rd_init(&cfg), 0);
  const size_t nb = RD_PG_MAX_BUNDLES;
  rd_bundle *b = calloc(nb + 1, sizeof(*b));
  CHECK(b != NULL);
  for (size_t i = 0; i <= nb; i++) {
    b[i].num_cpus = 0.0002;   /* 4,096 of them hold 0.82 of a CPU */
    b[i].resources = "slot=1";
  }
  rd_pg pg, pg2, pg3;
  CHECK_EQ(rd_pg_create(b, nb + 1, RD_PG_PACK, NULL, &pg), RD_EINVAL);
  double t0 = now_s();
  CHECK_EQ(rd_pg_create(b, nb, RD_PG_STRICT_PACK, "large", &pg), 0);
  CHECK_EQ(rd_pg_wait(pg, 30000), 0);
  fprintf(stderr, "%zu bundles reserved in %.3f s\n", nb, now_s() - t0);
  CHECK(avail_of("slot") > 4095.9 && avail_of("slot") < 4096.1);
  rd_pg_info info;
  CHECK_EQ(rd_pg_info_get(pg, &info), 0);
  CHECK(info.state == RD_PG_STATE_CREATED && info.strategy == RD_PG_STRICT_PACK && info.num_bundles == nb);
  uint32_t *nodes = calloc(nb, sizeof(*nodes));
  CHECK(nodes != NULL);
  size_t n = 0;
  CHECK_EQ(rd_pg_bundle_nodes(pg, nodes, nb, &n), 0);
  CHECK_EQ(n, nb);
  CHECK_EQ(rd_pg_bundle_nodes(pg, nodes, 3, &n), 0);   /* fewer asked: the count still says all */
  CHECK_EQ(n, nb);
  CHECK_EQ(rd_pg_bundle_nodes(pg, NULL, 0, &n), 0);
  CHECK_EQ(n, nb);
  CHECK_EQ(rd_pg_bundle_nodes(pg, NULL, 5, &n), RD_EINVAL);

  /* a second as large fits the rest; a third waits for room */
  t0 = now_s();
  CHECK_EQ(rd_pg_create(b, nb, RD_PG_SPREAD, NULL, &pg2), 0);
  CHECK_EQ(rd_pg_wait(pg2, 30000), 0);
  fprintf(stderr, "%zu more reserved (SPREAD) in %.3f s\n", nb, now_s() - t0);
  CHECK(avail_of("slot") < 0.1);
  CHECK_EQ(rd_pg_create(b, 1, RD_PG_PACK, NULL, &pg3), 0);
  CHECK_EQ(rd_pg_wait(pg3, 300), RD_ETIMEDOUT);

  /* tasks in the first bundle, the last and wherever there is room */
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.num_cpus = 0.0002;
  o.resources = "slot=1";
  o.placement_group = pg;
  const int which[] = {0, (int)nb - 1, 2048, -1};
  rd_ref r[4];
  for (int i = 0; i < 4; i++) {
    long ms = 1;
    o.bundle_index = which[i];
    CHECK_EQ(rd_submit(sleep_ms, RD_ARGS(rd_arg_bytes(&ms, sizeof ms)), &o, &r[i]), 0);
  }
  for (int i = 0; i < 4; i++) {
    long v = 0;
    char msg[300] = "";
    int rc = get_longs(r[i], &v, 1, 60000, msg, sizeof(msg));
    if (rc) fprintf(stderr, "bundle %d: %s %s\n", which[i], rd_err_name(rc), msg);
    CHECK(rc == 0 && v == 1);
    rd_ref_release(r[i]);
  }
  o.bundle_index = (int)nb;   /* past the end */
  long ms = 1;
  CHECK_EQ(rd_submit(sleep_ms, RD_ARGS(rd_arg_bytes(&ms, sizeof ms)), &o, &r[0]), RD_EINVAL);

  /* removal gives it all back, and the waiting one gets its room */
  CHECK_EQ(rd_pg_remove(pg), 0);
  CHECK_EQ(rd_pg_wait(pg3, 30000), 0);
  CHECK_EQ(rd_pg_remove(pg2), 0);
  CHECK_EQ(rd_pg_remove(pg3), 0);
  t0 = now_s();
  while (avail_of("slot") < 8191.9 && now_s() - t0 < 10) usleep(20000);
  CHECK(avail_of("slot") > 8191.9);
  CHECK(avail_cpus() > 1.99);
  free(nodes);
  free(b);
  rd_shutdown();
  return 0;
}

static const rd_test_case tests[] = {
    {"basic", t_basic},
    {"pending", t_pending},
    {"remove_kills", t_remove_kills},
    {"room_kicks", t_room_kicks},
    {"bad_input", t_bad_input},
    {"large", t_large},
};

RD_TEST_MAIN(tests)
