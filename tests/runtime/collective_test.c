/* tests/runtime/collective_test.c - collective groups (rd_collective_join,
 * rd_allreduce, rd_reduce_scatter, rd_broadcast, rd_allgather, rd_barrier) through the public
 * API, with real processes: the driver, actors and a task in one group;
 * a group of one; members that call different things; a member that dies;
 * a join that times out and a group of the same name formed afterwards;
 * rd_send/rd_recv between every pair and their failures;
 * strangers connecting to a member that joins; bad arguments.  `collective_test NAME` runs one case; the binary is
 * re-executed as workers. */
#include <raydist.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../check.h"
#include "embedded.h"

/* What a member is asked to do. */
typedef struct spec {
  char group[RD_COLLECTIVE_MAX_NAME + 1];
  int world, rank;
  int scenario;
  int tcp;                /* 1: RAYDIST_COLLECTIVE_TCP=1 (no Unix sockets) */
  int64_t timeout_ms;
} spec;

enum { SC_OPS = 1, SC_MISMATCH = 2, SC_DIE = 3, SC_JOIN_ONLY = 4, SC_P2P_MISMATCH = 5, SC_P2P_DIE = 6 };

/* What it reports. */
typedef struct outcome {
  int join_err, op_err;   /* the join's code; the first failed operation's (0: none) */
  int next_err;           /* after a failure: the next operation's code */
  int pad;
  double op_seconds;      /* how long the failing operation took */
  uint64_t hash;          /* FNV-1a of the float all-reduce's result bytes */
} outcome;

static uint64_t fnv(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

#define OPS_FAIL(...)                      \
  do {                                     \
    fprintf(stderr, "rank %d: ", rank);    \
    fprintf(stderr, __VA_ARGS__);          \
    fprintf(stderr, "\n");                 \
    return -1;                             \
  } while (0)

/* Byte i of the message member src sends member dst in round k. */
static unsigned char p2p_byte(int src, int dst, int k, size_t i) {
  return (unsigned char)(i * 31 + (size_t)src * 7 + (size_t)dst * 13 + (size_t)k * 101);
}

static int p2p_check(const unsigned char *b, size_t n, int src, int dst, int k) {
  for (size_t i = 0; i < n; i++)
    if (b[i] != p2p_byte(src, dst, k, i)) return -1;
  return 0;
}

/* rd_sendrecv with messages larger than the sockets' buffers, where plain
 * sends first would wait on each other: a ring shift (every member sends
 * 20 MiB right while receiving from its left); a swap between rank 0 and 1
 * and between 2 and 3 (one peer both ways, messages of different sizes);
 * then rank 0's rd_sendrecv against rank 1's rd_recv and rd_send. */
static int run_sendrecv(rd_collective *g) {
  int rank = rd_collective_rank(g), world = rd_collective_world(g), r;
  size_t n = 20u << 20;   /* more than a socket holds (4 MiB buffers, which the kernel doubles) */
  unsigned char *s = malloc(n), *b = malloc(n);
  if (!s || !b) OPS_FAIL("no memory");
  int next = (rank + 1) % world, prev = (rank + world - 1) % world;
  for (size_t x = 0; x < n; x++) s[x] = p2p_byte(rank, next, 7, x);
  if ((r = rd_sendrecv(g, s, n, next, b, n, prev)) != 0) OPS_FAIL("shift: %s", rd_err_name(r));
  if (p2p_check(b, n, prev, rank, 7)) OPS_FAIL("shift: wrong bytes from %d", prev);
  int partner = rank ^ 1;
  if (partner < world) {
    size_t mine = n - (size_t)rank * 1000, theirs = n - (size_t)partner * 1000;
    for (size_t x = 0; x < mine; x++) s[x] = p2p_byte(rank, partner, 8, x);
    if ((r = rd_sendrecv(g, s, mine, partner, b, theirs, partner)) != 0) OPS_FAIL("swap: %s", rd_err_name(r));
    if (p2p_check(b, theirs, partner, rank, 8)) OPS_FAIL("swap: wrong bytes from %d", partner);
  }
  if (rank <= 1) {   /* rank 1 the plain way: receive, then send */
    for (size_t x = 0; x < n; x++) s[x] = p2p_byte(rank, partner, 9, x);
    if (rank == 0) r = rd_sendrecv(g, s, n, 1, b, n, 1);
    else if ((r = rd_recv(g, b, n, 0)) == 0) r = rd_send(g, s, n, 0);
    if (r != 0) OPS_FAIL("mixed: %s", rd_err_name(r));
    if (p2p_check(b, n, partner, rank, 9)) OPS_FAIL("mixed: wrong bytes from %d", partner);
  }
  free(s);
  free(b);
  return 0;
}

/* rd_send/rd_recv: every pair in turn (lower rank first) swaps a message
 * of 0 B, 100 B, 70 KB or 1 MiB, three rounds, so each pair's connection
 * is made once and reused; then a 3 MiB message goes around the ranks,
 * each adding 1 to every byte. */
static int run_p2p(rd_collective *g) {
  int rank = rd_collective_rank(g), world = rd_collective_world(g), r;
  static const size_t sizes[4] = {0, 100, 70000, 1u << 20};
  unsigned char *b = malloc((3u << 20) + 5);
  if (!b) OPS_FAIL("no memory");
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < world; i++)
      for (int j = i + 1; j < world; j++) {
        if (rank != i && rank != j) continue;
        int other = rank == i ? j : i;
        size_t n = sizes[(i * 7 + j * 3 + k) % 4];
        for (int turn = 0; turn < 2; turn++) {
          if ((turn == 0) == (rank == i)) {   /* the lower rank sends first */
            for (size_t x = 0; x < n; x++) b[x] = p2p_byte(rank, other, k, x);
            if ((r = rd_send(g, b, n, other)) != 0) OPS_FAIL("send to %d: %s", other, rd_err_name(r));
          } else {
            memset(b, 0xee, n);
            if ((r = rd_recv(g, b, n, other)) != 0) OPS_FAIL("recv from %d: %s", other, rd_err_name(r));
            if (p2p_check(b, n, other, rank, k)) OPS_FAIL("round %d: wrong bytes from %d", k, other);
          }
        }
      }
  size_t n = (3u << 20) + 5;
  int next = (rank + 1) % world, prev = (rank + world - 1) % world;
  if (rank == 0) {
    for (size_t x = 0; x < n; x++) b[x] = (unsigned char)(x * 131);
    if ((r = rd_send(g, b, n, next)) != 0) OPS_FAIL("around: send: %s", rd_err_name(r));
  }
  if ((r = rd_recv(g, b, n, prev)) != 0) OPS_FAIL("around: recv: %s", rd_err_name(r));
  for (size_t x = 0; x < n; x++)
    if (b[x] != (unsigned char)(x * 131 + (size_t)(rank ? rank - 1 : world - 1))) OPS_FAIL("around: byte %zu", x);
  if (rank != 0) {
    for (size_t x = 0; x < n; x++) b[x]++;
    if ((r = rd_send(g, b, n, next)) != 0) OPS_FAIL("around: send: %s", rd_err_name(r));
  }
  free(b);
  return run_sendrecv(g);
}

/* Every operation, checked against what it must give; the float result's
 * hash in *hash (every member must have the same bytes). */
static int run_ops(rd_collective *g, uint64_t *hash) {
  int rank = rd_collective_rank(g), world = rd_collective_world(g);
  enum { NF = 1000003 };
  float *f = malloc(NF * sizeof(float));
  if (!f) OPS_FAIL("no memory");
  for (size_t i = 0; i < NF; i++) f[i] = (float)(i % 1000) * 0.5f * (float)(rank + 1);
  int r = rd_allreduce(g, f, NF, RD_FLOAT32, RD_SUM);
  if (r != 0) OPS_FAIL("float sum: %s", rd_err_name(r));
  for (size_t i = 0; i < NF; i++)
    if (f[i] != (float)(i % 1000) * 0.5f * (float)(world * (world + 1) / 2)) OPS_FAIL("float sum at %zu: %g", i, f[i]);
  *hash = fnv(f, NF * sizeof(float));
  free(f);

  enum { NI = 5001 };   /* 40 KB: the ring all-reduce; the ones below are small (whole buffers gathered) */
  int64_t v[NI];
  for (int i = 0; i < NI; i++) v[i] = ((int64_t)i * 7919 + (int64_t)rank * 104729) % 100003;
  if ((r = rd_allreduce(g, v, NI, RD_INT64, RD_MAX)) != 0) OPS_FAIL("int64 max: %s", rd_err_name(r));
  for (int i = 0; i < NI; i++) {
    int64_t want = 0;
    for (int k = 0; k < world; k++) {
      int64_t x = ((int64_t)i * 7919 + (int64_t)k * 104729) % 100003;
      if (x > want) want = x;
    }
    if (v[i] != want) OPS_FAIL("int64 max at %d: %lld, want %lld", i, (long long)v[i], (long long)want);
  }

  int32_t w[5];
  for (int i = 0; i < 5; i++) w[i] = INT32_MAX;
  if ((r = rd_allreduce(g, w, 5, RD_INT32, RD_SUM)) != 0) OPS_FAIL("int32 sum: %s", rd_err_name(r));
  for (int i = 0; i < 5; i++)   /* wraps as two's complement */
    if (w[i] != (int32_t)((uint32_t)INT32_MAX * (uint32_t)world)) OPS_FAIL("int32 sum wraps to %d", w[i]);

  double d[17];
  for (int i = 0; i < 17; i++) d[i] = rank - i;
  if ((r = rd_allreduce(g, d, 17, RD_FLOAT64, RD_MIN)) != 0) OPS_FAIL("double min: %s", rd_err_name(r));
  for (int i = 0; i < 17; i++)
    if (d[i] != -i) OPS_FAIL("double min at %d: %g", i, d[i]);

  int32_t p[3] = {rank + 2, rank + 2, rank + 2};
  if ((r = rd_allreduce(g, p, 3, RD_INT32, RD_PROD)) != 0) OPS_FAIL("int32 prod: %s", rd_err_name(r));
  int32_t prod = 1;
  for (int k = 0; k < world; k++) prod *= k + 2;
  if (p[0] != prod || p[2] != prod) OPS_FAIL("int32 prod %d, want %d", p[0], prod);

  if ((r = rd_allreduce(g, NULL, 0, RD_FLOAT32, RD_SUM)) != 0) OPS_FAIL("empty all-reduce: %s", rd_err_name(r));

  enum { RC = 3001 };   /* reduce-scatter: world blocks of RC doubles, block r to rank r */
  double *rs = malloc((size_t)world * RC * sizeof(double)), *mine_rs = malloc(RC * sizeof(double));
  if (!rs || !mine_rs) OPS_FAIL("no memory");
  for (int j = 0; j < world; j++)
    for (int i = 0; i < RC; i++) rs[(size_t)j * RC + (size_t)i] = (double)(rank + 1) * (j * 10000 + i);
  if ((r = rd_reduce_scatter(g, rs, mine_rs, RC, RD_FLOAT64, RD_SUM)) != 0) OPS_FAIL("reduce-scatter: %s", rd_err_name(r));
  for (int i = 0; i < RC; i++)
    if (mine_rs[i] != (double)(world * (world + 1) / 2) * (rank * 10000 + i)) OPS_FAIL("reduce-scatter at %d: %g", i, mine_rs[i]);
  int32_t one[8], got1 = -1;   /* one element each, a maximum */
  for (int j = 0; j < world && j < 8; j++) one[j] = rank * 10 + j;
  if (world <= 8 && (r = rd_reduce_scatter(g, one, &got1, 1, RD_INT32, RD_MAX)) != 0)
    OPS_FAIL("reduce-scatter of one: %s", rd_err_name(r));
  if (world <= 8 && got1 != (world - 1) * 10 + rank) OPS_FAIL("reduce-scatter of one: %d", got1);
  free(rs);
  free(mine_rs);

  size_t nb = (3u << 20) + 7;
  unsigned char *b = calloc(nb, 1);
  if (!b) OPS_FAIL("no memory");
  int root = world - 1;
  if (rank == root)
    for (size_t i = 0; i < nb; i++) b[i] = (unsigned char)(i * 131 + 7);
  if ((r = rd_broadcast(g, b, nb, root)) != 0) OPS_FAIL("broadcast: %s", rd_err_name(r));
  for (size_t i = 0; i < nb; i++)
    if (b[i] != (unsigned char)(i * 131 + 7)) OPS_FAIL("broadcast byte %zu", i);
  free(b);

  enum { NG = 1000 };
  unsigned char mine[NG], *all = malloc((size_t)world * NG);
  if (!all) OPS_FAIL("no memory");
  memset(mine, rank + 1, NG);
  if ((r = rd_allgather(g, mine, NG, all)) != 0) OPS_FAIL("allgather: %s", rd_err_name(r));
  for (int k = 0; k < world; k++)
    for (int i = 0; i < NG; i++)
      if (all[(size_t)k * NG + (size_t)i] != k + 1) OPS_FAIL("allgather block %d", k);
  free(all);
  if ((r = rd_barrier(g)) != 0) OPS_FAIL("barrier: %s", rd_err_name(r));
  return run_p2p(g);
}

/* Join as the spec says and play its scenario. */
static outcome play(const spec *s) {
  outcome o;
  memset(&o, 0, sizeof(o));
  rd_collective *g = NULL;
  setenv("RAYDIST_COLLECTIVE_TCP", s->tcp ? "1" : "0", 1);
  o.join_err = rd_collective_join(s->group, s->world, s->rank, s->timeout_ms, &g);
  if (o.join_err != 0) return o;
  if (s->scenario == SC_OPS) {
    o.op_err = run_ops(g, &o.hash);
  } else if (s->scenario == SC_MISMATCH) {
    float x[11] = {0};
    double t0 = now_s();
    o.op_err = rd_allreduce(g, x, s->rank == s->world - 1 ? 11 : 10, RD_FLOAT32, RD_SUM);
    o.op_seconds = now_s() - t0;
    o.next_err = rd_barrier(g);
    usleep(2000000);   /* stays in the group: the others must learn of the failure from the closed ring */
  } else if (s->scenario == SC_DIE) {
    if (s->rank == s->world - 1) {
      usleep(200000);
      kill(getpid(), SIGKILL);
    }
    float x[1000] = {0};
    double t0 = now_s();
    o.op_err = rd_allreduce(g, x, 1000, RD_FLOAT32, RD_SUM);
    o.op_seconds = now_s() - t0;
    o.next_err = rd_allreduce(g, x, 1000, RD_FLOAT32, RD_SUM);
  } else if (s->scenario == SC_P2P_MISMATCH) {   /* rank 1 sends 10 bytes, rank 0 takes 11 */
    char x[11] = {0};
    double t0 = now_s();
    o.op_err = s->rank == 1 ? rd_send(g, x, 10, 0) : rd_recv(g, x, 11, 1);
    o.op_seconds = now_s() - t0;
    o.next_err = s->rank == 1 ? rd_recv(g, x, 10, 0) : rd_barrier(g);
  } else if (s->scenario == SC_P2P_DIE) {   /* the last rank dies; the others wait for its message */
    if (s->rank == s->world - 1) {
      usleep(200000);
      kill(getpid(), SIGKILL);
    }
    char x[100];
    double t0 = now_s();
    o.op_err = rd_recv(g, x, sizeof(x), s->world - 1);
    o.op_seconds = now_s() - t0;
    o.next_err = rd_send(g, x, sizeof(x), s->rank ? 0 : 1);
  }
  rd_collective_leave(g);
  return o;
}

static int member_init(rd_call *call, void **state) {
  (void)call;
  *state = NULL;
  return 0;
}
RD_ACTOR_CLASS(Member, member_init, NULL)

static int reply_outcome(rd_call *call) {
  spec s;
  if (rd_arg_copy(call, 0, &s, sizeof(s)) != 0) return rd_call_fail(call, "bad spec");
  outcome o = play(&s);
  return rd_return_bytes(call, 0, &o, sizeof(o));
}

RD_ACTOR_METHOD(Member, play) {
  (void)state;
  return reply_outcome(call);
}

RD_REMOTE(member_task) { return reply_outcome(call); }

/* ------------------------------------------------------------ helpers */

static int g_tcp;   /* the members' RAYDIST_COLLECTIVE_TCP */

static spec make_spec(const char *group, int world, int rank, int scenario, int64_t timeout_ms) {
  spec s;
  memset(&s, 0, sizeof(s));
  s.tcp = g_tcp;
  snprintf(s.group, sizeof(s.group), "%s", group);
  s.world = world;
  s.rank = rank;
  s.scenario = scenario;
  s.timeout_ms = timeout_ms;
  return s;
}

/* Members 1..n-1 (n - 1 actors, or the last one a task with `task`) start
 * playing; the driver then plays rank 0 itself. */
static void start_members(rd_ref *refs, const char *group, int world, int scenario, int64_t timeout_ms, int task) {
  for (int k = 1; k < world; k++) {
    spec s = make_spec(group, world, k, scenario, timeout_ms);
    if (task && k == world - 1) {
      rd_task_opts o;
      rd_task_opts_init(&o);
      o.max_retries = 0;
      CHECK_EQ(rd_submit(member_task, RD_ARGS(rd_arg_bytes(&s, sizeof(s))), &o, &refs[k]), 0);
      continue;
    }
    rd_actor a;
    CHECK_EQ(rd_actor_create(Member, RD_NO_ARGS, NULL, &a), 0);
    CHECK_EQ(rd_actor_call(a, Member_play, RD_ARGS(rd_arg_bytes(&s, sizeof(s))), NULL, &refs[k]), 0);
  }
}

/* Member k's outcome (its call's error when it died instead). */
static outcome outcome_of(rd_ref r, int *call_err) {
  rd_buf b;
  outcome o;
  memset(&o, 0, sizeof(o));
  *call_err = rd_get(&r, 1, &b, 60000);
  if (*call_err == 0) {
    CHECK_EQ(b.size, sizeof(o));
    memcpy(&o, b.data, sizeof(o));
  }
  if (*call_err != RD_ETIMEDOUT) rd_buf_release(&b);
  rd_ref_release(r);
  return o;
}

/* A group of `world` members plays `scenario`: members 1.. as in
 * start_members, the driver as rank 0.  Their outcomes in o[], each
 * member's call error in ce[] (ce[0]: 0). */
static void run_group(const char *group, int world, int scenario, int64_t timeout_ms, int task, outcome *o, int *ce) {
  rd_ref refs[8];
  CHECK(world <= 8);
  start_members(refs, group, world, scenario, timeout_ms, task);
  spec s = make_spec(group, world, 0, scenario, timeout_ms);
  o[0] = play(&s);
  ce[0] = 0;
  for (int k = 1; k < world; k++) o[k] = outcome_of(refs[k], &ce[k]);
}

/* ------------------------------------------------------------------ tests */

/* The driver (rank 0), two actors and a task (rank 3) run every operation;
 * all get the same bytes; then a second group of the same name (the first
 * one's rendezvous is gone) over TCP instead of Unix sockets; then a third
 * with a name of the longest length. */
static int t_ops(void) {
  init_or_die(2);
  char longest[RD_COLLECTIVE_MAX_NAME + 1];   /* the second group: a name of the longest length */
  memset(longest, 'o', RD_COLLECTIVE_MAX_NAME);
  longest[RD_COLLECTIVE_MAX_NAME] = 0;
  for (int round = 0; round < 3; round++) {
    g_tcp = round == 1;
    const char *name = round < 2 ? "ops" : longest;
    enum { W = 4 };
    outcome o[W];
    int ce[W];
    run_group(name, W, SC_OPS, 60000, 1, o, ce);
    for (int k = 0; k < W; k++) {
      CHECK_EQ(ce[k], 0);
      CHECK_EQ(o[k].join_err, 0);
      CHECK_EQ(o[k].op_err, 0);
      CHECK(o[k].hash == o[0].hash);
    }
    printf("round %d (%s, a %zu-byte name): 4 members agree\n", round, g_tcp ? "TCP" : "Unix sockets", strlen(name));
  }
  rd_shutdown();
  return 0;
}

/* A group of one: every operation is local. */
static int t_world1(void) {
  init_or_die(1);
  rd_collective *g = NULL;
  CHECK_EQ(rd_collective_join("solo", 1, 0, 1000, &g), 0);
  CHECK_EQ(rd_collective_world(g), 1);
  CHECK_EQ(rd_collective_rank(g), 0);
  float f[3] = {1, 2, 3};
  CHECK_EQ(rd_allreduce(g, f, 3, RD_FLOAT32, RD_SUM), 0);
  CHECK(f[0] == 1 && f[2] == 3);
  char in[4] = "abc", out[4] = "";
  CHECK_EQ(rd_allgather(g, in, 4, out), 0);
  CHECK(!strcmp(out, "abc"));
  CHECK_EQ(rd_broadcast(g, in, 4, 0), 0);
  CHECK_EQ(rd_barrier(g), 0);
  rd_collective_leave(g);
  rd_shutdown();
  return 0;
}

/* The last rank all-reduces 11 elements, the others 10: every member fails
 * (RD_EINVAL where the difference is seen, RD_ECONN elsewhere) at once,
 * although none leaves the group for 2 s, and the group stays broken. */
static int t_mismatch(void) {
  init_or_die(2);
  enum { W = 3 };
  outcome o[W];
  int ce[W];
  run_group("mismatch", W, SC_MISMATCH, 30000, 0, o, ce);
  int einval = 0;
  for (int k = 0; k < W; k++) {
    CHECK_EQ(ce[k], 0);
    printf("rank %d: %s after %.3f s, then %s\n", k, rd_err_name(o[k].op_err), o[k].op_seconds,
           rd_err_name(o[k].next_err));
    CHECK_EQ(o[k].join_err, 0);
    CHECK(o[k].op_err == RD_EINVAL || o[k].op_err == RD_ECONN);
    einval += o[k].op_err == RD_EINVAL;
    CHECK(o[k].op_seconds < 1.5);
    CHECK_EQ(o[k].next_err, RD_ECONN);
  }
  CHECK(einval >= 1);   /* rank 0 sees rank 2's call, rank 2 rank 1's */
  rd_shutdown();
  return 0;
}

/* The last member's process dies after the join: the others' all-reduce
 * fails with RD_ECONN well before the group's 30 s timeout. */
static int t_member_dies(void) {
  init_or_die(2);
  enum { W = 3 };
  outcome o[W];
  int ce[W];
  run_group("dies", W, SC_DIE, 30000, 0, o, ce);
  outcome o0 = o[0], o1 = o[1];
  CHECK_EQ(ce[1], 0);
  CHECK_EQ(ce[2], RD_EACTOR_DIED);
  printf("rank 0: %s after %.3f s; rank 1: %s after %.3f s\n", rd_err_name(o0.op_err), o0.op_seconds,
         rd_err_name(o1.op_err), o1.op_seconds);
  CHECK_EQ(o0.join_err, 0);
  CHECK_EQ(o1.join_err, 0);
  CHECK_EQ(o0.op_err, RD_ECONN);
  CHECK_EQ(o1.op_err, RD_ECONN);
  CHECK(o0.op_seconds < 5 && o1.op_seconds < 5);
  CHECK_EQ(o0.next_err, RD_ECONN);
  rd_shutdown();
  return 0;
}

/* rd_recv of another size than was sent: RD_EINVAL there; the sender's
 * next call (a receive) finds the group broken, if its send did not.  Then a member dies while
 * the two others wait for its message: RD_ECONN at once, not at the
 * timeout, and their next calls fail too. */
static int t_p2p_errors(void) {
  init_or_die(2);
  outcome o[3];
  int ce[3];
  run_group("p2p_size", 2, SC_P2P_MISMATCH, 30000, 0, o, ce);
  printf("size: rank 0 %s after %.3f s, then %s; rank 1 %s, then %s\n", rd_err_name(o[0].op_err), o[0].op_seconds,
         rd_err_name(o[0].next_err), rd_err_name(o[1].op_err), rd_err_name(o[1].next_err));
  CHECK_EQ(ce[1], 0);
  CHECK_EQ(o[0].join_err, 0);
  CHECK_EQ(o[0].op_err, RD_EINVAL);
  CHECK_EQ(o[0].next_err, RD_ECONN);
  CHECK(o[1].op_err == 0 || o[1].op_err == RD_ECONN);   /* its bytes went, or rank 0 had already closed */
  CHECK_EQ(o[1].next_err, RD_ECONN);
  CHECK(o[0].op_seconds < 5);
  run_group("p2p_dies", 3, SC_P2P_DIE, 30000, 0, o, ce);
  printf("dies: rank 0 %s after %.3f s; rank 1 %s after %.3f s\n", rd_err_name(o[0].op_err), o[0].op_seconds,
         rd_err_name(o[1].op_err), o[1].op_seconds);
  CHECK_EQ(ce[1], 0);
  CHECK_EQ(ce[2], RD_EACTOR_DIED);
  for (int k = 0; k < 2; k++) {
    CHECK_EQ(o[k].join_err, 0);
    CHECK_EQ(o[k].op_err, RD_ECONN);
    CHECK(o[k].op_seconds < 5);
    CHECK_EQ(o[k].next_err, RD_ECONN);
  }
  rd_shutdown();
  return 0;
}

/* Two of three members come: both time out, and rank 0 takes the
 * rendezvous with it.  A member that then comes with world 3 while rank 0
 * forms a group of 2 is refused (RD_EINVAL).  Three members then form the
 * group under the same name. */
static int t_join_timeout(void) {
  init_or_die(2);
  rd_ref refs[3];
  spec s1 = make_spec("late", 3, 1, SC_JOIN_ONLY, 1000);
  rd_actor a;
  CHECK_EQ(rd_actor_create(Member, RD_NO_ARGS, NULL, &a), 0);
  CHECK_EQ(rd_actor_call(a, Member_play, RD_ARGS(rd_arg_bytes(&s1, sizeof(s1))), NULL, &refs[1]), 0);
  rd_collective *g = NULL;
  double t0 = now_s();
  CHECK_EQ(rd_collective_join("late", 3, 0, 1000, &g), RD_ETIMEDOUT);
  double took = now_s() - t0;
  CHECK(g == NULL);
  CHECK(took >= 0.9 && took < 10);
  int ce;
  outcome o = outcome_of(refs[1], &ce);
  CHECK_EQ(ce, 0);
  CHECK_EQ(o.join_err, RD_ETIMEDOUT);
  rd_actor rdv;   /* rank 0 gave up: it took the rendezvous with it */
  CHECK_EQ(rd_actor_get("rd.collective/late", &rdv), RD_ENOENT);
  /* a member that comes with another world is refused by the rendezvous
   * (world 2, rank 0's); rank 0 then waits in vain */
  s1.timeout_ms = 5000;
  CHECK_EQ(rd_actor_call(a, Member_play, RD_ARGS(rd_arg_bytes(&s1, sizeof(s1))), NULL, &refs[1]), 0);
  CHECK_EQ(rd_collective_join("late", 2, 0, 1000, &g), RD_ETIMEDOUT);
  o = outcome_of(refs[1], &ce);
  CHECK_EQ(ce, 0);
  CHECK_EQ(o.join_err, RD_EINVAL);
  outcome all[3];
  int ces[3];
  run_group("late", 3, SC_OPS, 60000, 0, all, ces);
  for (int k = 0; k < 3; k++) {
    CHECK_EQ(ces[k], 0);
    CHECK_EQ(all[k].join_err, 0);
    CHECK_EQ(all[k].op_err, 0);
    CHECK(all[k].hash == all[0].hash);
  }
  rd_shutdown();
  return 0;
}

/* A member's join on a thread of the driver. */
typedef struct joiner {
  spec s;
  outcome o;
} joiner;

static void *join_thread(void *arg) {
  joiner *j = arg;
  j->o = play(&j->s);
  return NULL;
}

/* Rank 0's TCP address ("IP:PORT") from its group's rendezvous table, once
 * it is there: the rendezvous is an actor like any other. */
static void rank0_addr(const char *group, char *ip, int *port) {
  char name[160];
  snprintf(name, sizeof(name), "rd.collective/%s", group);
  for (int i = 0; i < 500; i++) {
    rd_actor a;
    if (rd_actor_get(name, &a) == 0) {
      rd_ref r;
      CHECK_EQ(rd_actor_call_by_name(a, "rd__CollectiveRendezvous.table", RD_NO_ARGS, NULL, &r), 0);
      rd_buf b;
      CHECK_EQ(rd_get(&r, 1, &b, 10000), 0);
      char entry[48];   /* the table's first field: "IP:PORT" */
      memcpy(entry, b.data, sizeof(entry));
      entry[sizeof(entry) - 1] = 0;
      rd_buf_release(&b);
      rd_ref_release(r);
      char *colon = strrchr(entry, ':');
      if (colon) {
        *colon = 0;
        snprintf(ip, 64, "%s", entry);
        *port = atoi(colon + 1);
        return;
      }
    }
    usleep(10000);
  }
  CHECK(!"rank 0 never registered");
}

static int dial(const char *ip, int port) {
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  CHECK_EQ(inet_pton(AF_INET, ip, &sa.sin_addr), 1);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0);
  CHECK_EQ(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  return fd;
}

/* Strangers connect to a member while it joins: one sends garbage, one a
 * hello that names the wrong rank, one a few bytes and then nothing.  They
 * are refused (the silent one after at most 5 s) and the group forms and
 * works. */
static int t_intruders(void) {
  init_or_die(2);
  joiner j;
  memset(&j, 0, sizeof(j));
  j.s = make_spec("intr", 2, 0, SC_OPS, 60000);
  pthread_t th;
  CHECK_EQ(pthread_create(&th, NULL, join_thread, &j), 0);
  char ip[64];
  int port = 0;
  rank0_addr("intr", ip, &port);
  int junk = dial(ip, port), wrong = dial(ip, port), quiet = dial(ip, port);
  char garbage[300];
  memset(garbage, 0xab, sizeof(garbage));
  CHECK_EQ(write(junk, garbage, sizeof(garbage)), (ssize_t)sizeof(garbage));
  uint32_t hello[8] = {0x52444331u, 2, 0, 0, 0, 0, 0, 0};   /* magic, world 2, rank 0 (rank 0's left is 1) */
  memset(garbage, 0, sizeof(garbage));
  memcpy(garbage, hello, sizeof(hello));
  CHECK_EQ(write(wrong, garbage, 184), 184);
  CHECK_EQ(write(quiet, garbage, 10), 10);
  double t0 = now_s();
  rd_ref r;
  spec s1 = make_spec("intr", 2, 1, SC_OPS, 60000);
  rd_actor a;
  CHECK_EQ(rd_actor_create(Member, RD_NO_ARGS, NULL, &a), 0);
  CHECK_EQ(rd_actor_call(a, Member_play, RD_ARGS(rd_arg_bytes(&s1, sizeof(s1))), NULL, &r), 0);
  int ce;
  outcome o1 = outcome_of(r, &ce);
  CHECK_EQ(pthread_join(th, NULL), 0);
  printf("joined and ran every operation %.2f s after the strangers came\n", now_s() - t0);
  CHECK_EQ(ce, 0);
  CHECK_EQ(j.o.join_err, 0);
  CHECK_EQ(j.o.op_err, 0);
  CHECK_EQ(o1.join_err, 0);
  CHECK_EQ(o1.op_err, 0);
  CHECK(o1.hash == j.o.hash);
  char c;   /* each stranger's connection was closed on it (reset, when it had sent more than a hello) */
  CHECK(read(junk, &c, 1) <= 0);
  CHECK(read(wrong, &c, 1) <= 0);
  CHECK(read(quiet, &c, 1) <= 0);
  CHECK(now_s() - t0 < 4);   /* the silent one did not hold the join back for its 5 s */
  close(junk), close(wrong), close(quiet);
  rd_shutdown();
  return 0;
}

static int t_bad_args(void) {
  rd_collective *g = NULL;
  CHECK_EQ(rd_collective_join("early", 1, 0, 1000, &g), RD_ESTATE);   /* before rd_init */
  init_or_die(1);
  char longname[RD_COLLECTIVE_MAX_NAME + 2];
  memset(longname, 'x', sizeof(longname) - 1);
  longname[sizeof(longname) - 1] = 0;
  CHECK_EQ(rd_collective_join("g", 2, 0, 1000, NULL), RD_EINVAL);
  CHECK_EQ(rd_collective_join(NULL, 2, 0, 1000, &g), RD_EINVAL);
  CHECK_EQ(rd_collective_join("", 2, 0, 1000, &g), RD_EINVAL);
  CHECK_EQ(rd_collective_join(longname, 2, 0, 1000, &g), RD_EINVAL);
  CHECK_EQ(rd_collective_join("g", 0, 0, 1000, &g), RD_EINVAL);
  CHECK_EQ(rd_collective_join("g", RD_COLLECTIVE_MAX_WORLD + 1, 0, 1000, &g), RD_EINVAL);
  CHECK_EQ(rd_collective_join("g", 2, -1, 1000, &g), RD_EINVAL);
  CHECK_EQ(rd_collective_join("g", 2, 2, 1000, &g), RD_EINVAL);
  float f[2] = {1, 2};
  CHECK_EQ(rd_allreduce(NULL, f, 2, RD_FLOAT32, RD_SUM), RD_EINVAL);
  CHECK_EQ(rd_broadcast(NULL, f, 8, 0), RD_EINVAL);
  CHECK_EQ(rd_allgather(NULL, f, 8, f), RD_EINVAL);
  CHECK_EQ(rd_barrier(NULL), RD_EINVAL);
  CHECK_EQ(rd_send(NULL, f, 8, 1), RD_EINVAL);
  CHECK_EQ(rd_recv(NULL, f, 8, 1), RD_EINVAL);
  CHECK_EQ(rd_collective_join("g", 1, 0, 1000, &g), 0);
  CHECK_EQ(rd_send(g, f, 8, 0), RD_EINVAL);   /* to itself */
  CHECK_EQ(rd_recv(g, f, 8, 0), RD_EINVAL);
  CHECK_EQ(rd_send(g, f, 8, 1), RD_EINVAL);   /* no such rank */
  CHECK_EQ(rd_recv(g, f, 8, -1), RD_EINVAL);
  CHECK_EQ(rd_sendrecv(g, f, 8, 0, f, 8, 0), RD_EINVAL);
  CHECK_EQ(rd_sendrecv(NULL, f, 8, 1, f, 8, 1), RD_EINVAL);
  CHECK_EQ(rd_allreduce(g, f, 2, 99, RD_SUM), RD_EINVAL);
  CHECK_EQ(rd_allreduce(g, f, 2, RD_FLOAT32, 0), RD_EINVAL);
  CHECK_EQ(rd_allreduce(g, NULL, 2, RD_FLOAT32, RD_SUM), RD_EINVAL);
  CHECK_EQ(rd_broadcast(g, f, 8, 1), RD_EINVAL);
  CHECK_EQ(rd_broadcast(g, NULL, 8, 0), RD_EINVAL);
  CHECK_EQ(rd_allgather(g, NULL, 8, f), RD_EINVAL);
  CHECK_EQ(rd_allreduce(g, f, SIZE_MAX / 4, RD_FLOAT32, RD_SUM), RD_EINVAL);
  float rsout[2];
  CHECK_EQ(rd_reduce_scatter(NULL, f, rsout, 2, RD_FLOAT32, RD_SUM), RD_EINVAL);
  CHECK_EQ(rd_reduce_scatter(g, f, rsout, 2, 77, RD_SUM), RD_EINVAL);
  CHECK_EQ(rd_reduce_scatter(g, f, rsout, 2, RD_FLOAT32, 9), RD_EINVAL);
  CHECK_EQ(rd_reduce_scatter(g, NULL, rsout, 2, RD_FLOAT32, RD_SUM), RD_EINVAL);
  CHECK_EQ(rd_reduce_scatter(g, f, rsout, 2, RD_FLOAT32, RD_SUM), 0);   /* a group of one: a copy */
  CHECK(rsout[0] == f[0] && rsout[1] == f[1]);
  CHECK_EQ(rd_allreduce(g, f, 2, RD_FLOAT32, RD_MAX), 0);   /* bad calls do not break the group */
  CHECK_EQ(rd_collective_rank(NULL), -1);
  CHECK_EQ(rd_collective_world(NULL), 0);
  rd_collective_leave(g);
  rd_collective_leave(NULL);
  rd_shutdown();
  return 0;
}

static const rd_test_case tests[] = {
    {"ops", t_ops},           {"world1", t_world1},         {"mismatch", t_mismatch},
    {"member_dies", t_member_dies}, {"join_timeout", t_join_timeout}, {"bad_args", t_bad_args},
    {"intruders", t_intruders}, {"p2p_errors", t_p2p_errors},
};

RD_TEST_MAIN(tests)
