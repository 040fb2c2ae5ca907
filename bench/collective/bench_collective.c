/* bench/collective/bench_collective.c - what an all-reduce of float32
 * gradients costs between actors of an embedded cluster: through a
 * collective group (rd_allreduce around a TCP ring), and side by side the
 * way it is done without one, through the driver (each actor returns its
 * buffer, the driver sums them, puts the sum and every actor copies it in:
 * what examples/train_allreduce does).  Prints, per world size and buffer
 * size, the time per all-reduce of both and the ring's bandwidths:
 * algbw = bytes / time, busbw = algbw x 2 (world - 1) / world (what each
 * member sends and receives, comparable across world sizes, as NCCL's tests
 * report it).
 *
 *   ./build/bench/collective/bench_collective [--worlds 2,4] [--sizes 8,65536,4194304,67108864]
 *                                             [--min-time S] [--no-driver]
 *
 * Then, with --p2p-sizes (default 8,65536,1048576,16777216), messages
 * from one actor to another: rd_send/rd_recv between the two (one way, many
 * in a row: time per message and bandwidth; and ping-pong: half the round
 * trip), and side by side what a pipeline does without them, the driver
 * passing each message's ref from one actor's call to the other's
 * (examples/pipeline_parallel): many in flight, and one at a time.
 *
 * A program, not a test. */
#include <raydist.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DIE(...) do { fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); exit(1); } while (0)
#define OK(call) do { int e_ = (call); if (e_ != 0) DIE("%s: %s", #call, rd_err_name(e_)); } while (0)

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------ the member */

typedef struct member {
  float *grad;       /* this member's gradient buffer */
  size_t cap;        /* floats */
} member;

static int member_init(rd_call *call, void **state) {
  member *m = calloc(1, sizeof(*m));
  if (!m) return rd_call_fail(call, "out of memory");
  *state = m;
  return 0;
}

static void member_fini(void *state) {
  member *m = state;
  free(m->grad);
  free(m);
}

RD_ACTOR_CLASS(Member, member_init, member_fini)

static int member_fill(member *m, size_t n, int rank) {
  if (n > m->cap) {
    float *g = realloc(m->grad, n * sizeof(float));
    if (!g) return RD_ENOMEM;
    m->grad = g;
    m->cap = n;
  }
  for (size_t i = 0; i < n; i++) m->grad[i] = (float)((i + (size_t)rank) % 97) * 0.25f;
  return 0;
}

typedef struct ring_spec {
  char group[32];
  int world, rank;
  double min_time;
  int64_t floats;
} ring_spec;

/* Join the group and time all-reduces of `floats` floats: one to warm up,
 * then as many as rank 0 says fill min_time; rank 0's seconds per op. */
RD_ACTOR_METHOD(Member, ring) {
  member *m = state;
  ring_spec s;
  if (rd_arg_copy(call, 0, &s, sizeof(s)) != 0) return rd_call_fail(call, "bad spec");
  if (member_fill(m, (size_t)s.floats, s.rank) != 0) return rd_call_fail(call, "out of memory");
  rd_collective *g;
  int r = rd_collective_join(s.group, s.world, s.rank, 60000, &g);
  if (r != 0) return rd_call_fail(call, "join: %s", rd_err_name(r));
  double t0 = now();
  r = rd_allreduce(g, m->grad, (size_t)s.floats, RD_FLOAT32, RD_SUM);
  double one = now() - t0;
  int64_t iters = (int64_t)(s.min_time / (one > 1e-6 ? one : 1e-6));
  if (iters < 3) iters = 3;
  if (iters > 100000) iters = 100000;
  if (r == 0) r = rd_broadcast(g, &iters, sizeof(iters), 0);   /* everybody runs rank 0's count */
  if (r == 0) r = rd_barrier(g);
  t0 = now();
  for (int64_t i = 0; i < iters && r == 0; i++) r = rd_allreduce(g, m->grad, (size_t)s.floats, RD_FLOAT32, RD_SUM);
  double per = (now() - t0) / (double)iters;
  rd_collective_leave(g);
  if (r != 0) return rd_call_fail(call, "allreduce: %s", rd_err_name(r));
  return rd_return_bytes(call, 0, &per, sizeof(per));
}

typedef struct p2p_spec {
  char group[32];
  int rank, pingpong;
  double min_time;
  int64_t bytes;
} p2p_spec;

/* One message of s->bytes from rank 0 to rank 1 (pingpong: and back). */
static int p2p_once(rd_collective *g, const p2p_spec *s, void *buf) {
  int r = s->rank == 0 ? rd_send(g, buf, (size_t)s->bytes, 1) : rd_recv(g, buf, (size_t)s->bytes, 0);
  if (r == 0 && s->pingpong)
    r = s->rank == 1 ? rd_send(g, buf, (size_t)s->bytes, 0) : rd_recv(g, buf, (size_t)s->bytes, 1);
  return r;
}

/* A group of two: rank 0 sends rank 1 messages (and, pingpong, it sends
 * each back), five to warm up (the first makes the connection), then as
 * many as rank 0 says fill min_time; seconds per message (per round
 * trip). */
RD_ACTOR_METHOD(Member, p2p) {
  member *m = state;
  p2p_spec s;
  if (rd_arg_copy(call, 0, &s, sizeof(s)) != 0) return rd_call_fail(call, "bad spec");
  if (member_fill(m, (size_t)s.bytes / 4 + 1, s.rank) != 0) return rd_call_fail(call, "out of memory");
  rd_collective *g;
  int r = rd_collective_join(s.group, 2, s.rank, 60000, &g);
  if (r != 0) return rd_call_fail(call, "join: %s", rd_err_name(r));
  r = p2p_once(g, &s, m->grad);   /* makes the connection */
  double t0 = now();
  for (int i = 0; i < 4 && r == 0; i++) r = p2p_once(g, &s, m->grad);
  double one = (now() - t0) / 4;
  int64_t iters = (int64_t)(s.min_time / (one > 1e-6 ? one : 1e-6));
  if (iters < 3) iters = 3;
  if (iters > 200000) iters = 200000;
  if (r == 0) r = rd_broadcast(g, &iters, sizeof(iters), 0);
  if (r == 0) r = rd_barrier(g);
  t0 = now();
  for (int64_t i = 0; i < iters && r == 0; i++) r = p2p_once(g, &s, m->grad);
  if (r == 0) r = rd_barrier(g);   /* the last message has arrived */
  double per = (now() - t0) / (double)iters;
  rd_collective_leave(g);
  if (r != 0) return rd_call_fail(call, "send/recv: %s", rd_err_name(r));
  return rd_return_bytes(call, 0, &per, sizeof(per));
}

/* Through the object store: a message of argument 0's size... */
RD_ACTOR_METHOD(Member, emit) {
  member *m = state;
  int64_t n;
  if (rd_arg_copy(call, 0, &n, sizeof(n)) != 0) return rd_call_fail(call, "bad size");
  if ((size_t)n > m->cap * 4 && member_fill(m, (size_t)n / 4 + 1, 0) != 0) return rd_call_fail(call, "out of memory");
  return rd_return_bytes(call, 0, m->grad, (size_t)n);
}

/* ...taken by the other actor (reads its first and last bytes). */
RD_ACTOR_METHOD(Member, take) {
  (void)state;
  rd_buf b;
  if (rd_arg(call, 0, &b) != 0) return rd_call_fail(call, "bad message");
  uint8_t ends[2] = {b.size ? ((const uint8_t *)b.data)[0] : 0, b.size ? ((const uint8_t *)b.data)[b.size - 1] : 0};
  return rd_return_bytes(call, 0, ends, sizeof(ends));
}

/* Through the driver: this member's gradient as an object... */
RD_ACTOR_METHOD(Member, contribute) {
  member *m = state;
  int64_t n;
  if (rd_arg_copy(call, 0, &n, sizeof(n)) != 0) return rd_call_fail(call, "bad size");
  if ((size_t)n > m->cap && member_fill(m, (size_t)n, 0) != 0) return rd_call_fail(call, "out of memory");
  return rd_return_bytes(call, 0, m->grad, (size_t)n * sizeof(float));
}

/* ...and the sum, copied back in. */
RD_ACTOR_METHOD(Member, receive) {
  member *m = state;
  rd_buf b;
  if (rd_arg(call, 0, &b) != 0 || b.size > m->cap * sizeof(float)) return rd_call_fail(call, "bad sum");
  memcpy(m->grad, b.data, b.size);
  return 0;
}

/* ------------------------------------------------------------ the driver */

/* Waits for the n members' calls; the seconds member `which` returned. */
static double members_time(rd_ref *refs, int n, int which, const char *what) {
  double per = 0;
  for (int k = 0; k < n; k++) {
    rd_buf b;
    int r = rd_get(&refs[k], 1, &b, RD_TIMEOUT_INF);
    if (r != 0) DIE("%s member %d: %s: %.*s", what, k, rd_err_name(r), (int)b.size, (const char *)b.data);
    if (k == which) memcpy(&per, b.data, sizeof(per));
    rd_buf_release(&b);
    rd_ref_release(refs[k]);
  }
  return per;
}

static double ring_time(rd_actor *a, int world, int64_t floats, double min_time, int seq) {
  rd_ref refs[64];
  for (int k = 0; k < world; k++) {
    ring_spec s;
    memset(&s, 0, sizeof(s));
    snprintf(s.group, sizeof(s.group), "bench-%d", seq);
    s.world = world;
    s.rank = k;
    s.min_time = min_time;
    s.floats = floats;
    OK(rd_actor_call(a[k], Member_ring, RD_ARGS(rd_arg_bytes(&s, sizeof(s))), NULL, &refs[k]));
  }
  return members_time(refs, world, 0, "ring");
}

/* One all-reduce through the driver. */
static void driver_once(rd_actor *a, int world, int64_t floats, float *sum) {
  rd_ref refs[64];
  for (int k = 0; k < world; k++)
    OK(rd_actor_call(a[k], Member_contribute, RD_ARGS(rd_arg_bytes(&floats, sizeof(floats))), NULL, &refs[k]));
  rd_buf bufs[64];
  OK(rd_get(refs, (size_t)world, bufs, RD_TIMEOUT_INF));
  memcpy(sum, bufs[0].data, (size_t)floats * sizeof(float));
  for (int k = 1; k < world; k++) {
    const float *x = bufs[k].data;
    for (int64_t i = 0; i < floats; i++) sum[i] += x[i];
  }
  for (int k = 0; k < world; k++) {
    rd_buf_release(&bufs[k]);
    rd_ref_release(refs[k]);
  }
  rd_ref s;
  OK(rd_put(sum, (size_t)floats * sizeof(float), &s));
  for (int k = 0; k < world; k++) OK(rd_actor_call(a[k], Member_receive, RD_ARGS(rd_arg_ref(s)), NULL, &refs[k]));
  rd_ref_release(s);
  OK(rd_get(refs, (size_t)world, bufs, RD_TIMEOUT_INF));
  for (int k = 0; k < world; k++) {
    rd_buf_release(&bufs[k]);
    rd_ref_release(refs[k]);
  }
}

static double driver_time(rd_actor *a, int world, int64_t floats, double min_time) {
  float *sum = malloc((size_t)floats * sizeof(float) + 4);
  if (!sum) DIE("out of memory");
  double t0 = now();
  driver_once(a, world, floats, sum);   /* warm-up, and sizes the rest */
  double one = now() - t0;
  int iters = (int)(min_time / (one > 1e-6 ? one : 1e-6));
  if (iters < 3) iters = 3;
  t0 = now();
  for (int i = 0; i < iters; i++) driver_once(a, world, floats, sum);
  free(sum);
  return (now() - t0) / iters;
}

static double p2p_time(rd_actor *a, int64_t bytes, int pingpong, double min_time, int seq) {
  rd_ref refs[2];
  for (int k = 0; k < 2; k++) {
    p2p_spec s;
    memset(&s, 0, sizeof(s));
    snprintf(s.group, sizeof(s.group), "p2p-%d", seq);
    s.rank = k;
    s.pingpong = pingpong;
    s.min_time = min_time;
    s.bytes = bytes;
    OK(rd_actor_call(a[k], Member_p2p, RD_ARGS(rd_arg_bytes(&s, sizeof(s))), NULL, &refs[k]));
  }
  return members_time(refs, 2, 1, "p2p");
}

/* Messages through the store: a[0].emit's result passed to a[1].take, up to
 * `inflight` at once; seconds per message. */
static double store_time(rd_actor *a, int64_t bytes, int inflight, double min_time) {
  enum { MAXF = 64 };
  rd_ref pend[MAXF];
  int np = 0;
  long done = 0;
  double t0 = now(), end = 0;
  for (long sent = 0;; sent++) {
    if (np == inflight || (end && np)) {   /* take the oldest */
      rd_buf b;
      OK(rd_get(&pend[0], 1, &b, RD_TIMEOUT_INF));
      rd_buf_release(&b);
      rd_ref_release(pend[0]);
      memmove(pend, pend + 1, (size_t)(np - 1) * sizeof(rd_ref));
      np--;
      done++;
    }
    if (!end && now() - t0 >= min_time && done >= 3) end = 1;
    if (end) {
      if (np == 0) break;
      continue;
    }
    rd_ref m;
    OK(rd_actor_call(a[0], Member_emit, RD_ARGS(rd_arg_bytes(&bytes, sizeof(bytes))), NULL, &m));
    OK(rd_actor_call(a[1], Member_take, RD_ARGS(rd_arg_ref(m)), NULL, &pend[np++]));
    rd_ref_release(m);
  }
  return (now() - t0) / (double)done;
}

static int parse_list(const char *s, long long *out, int max) {
  int n = 0;
  while (*s && n < max) {
    char *end;
    out[n++] = strtoll(s, &end, 10);
    if (*end != ',' && *end) DIE("bad list %s", s);
    s = *end ? end + 1 : end;
  }
  return n;
}

int main(int argc, char **argv) {
  long long worlds[8] = {2, 4}, sizes[16] = {8, 65536, 4194304, 67108864};
  long long psizes[16] = {8, 65536, 1048576, 16777216};
  int nworlds = 2, nsizes = 4, npsizes = 4, with_driver = 1;
  double min_time = 1.0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--worlds") && i + 1 < argc) nworlds = parse_list(argv[++i], worlds, 8);
    else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) nsizes = parse_list(argv[++i], sizes, 16);
    else if (!strcmp(argv[i], "--min-time") && i + 1 < argc) min_time = atof(argv[++i]);
    else if (!strcmp(argv[i], "--p2p-sizes") && i + 1 < argc) npsizes = parse_list(argv[++i], psizes, 16);
    else if (!strcmp(argv[i], "--no-driver")) with_driver = 0;
    else if (strcmp(argv[i], "--help") == 0) {
      printf("usage: %s [--worlds 2,4] [--sizes BYTES,...] [--p2p-sizes BYTES,...] [--min-time S] [--no-driver]\n",
             argv[0]);
      return 0;
    } else DIE("unknown option %s", argv[i]);
  }
  rd_config cfg;
  rd_config_init(&cfg);
  cfg.object_store_bytes = 1ull << 30;
  OK(rd_init(&cfg));
  printf("%-6s %12s | %12s %10s %10s | %14s %8s\n", "world", "bytes", "ring ms/op", "algbw GB/s", "busbw GB/s",
         "driver ms/op", "speedup");
  int seq = 0;
  for (int wi = 0; wi < nworlds; wi++) {
    int world = (int)worlds[wi];
    if (world < 2 || world > 64) DIE("world %d: 2..64", world);
    rd_actor a[64];
    for (int k = 0; k < world; k++) OK(rd_actor_create(Member, RD_NO_ARGS, NULL, &a[k]));
    for (int si = 0; si < nsizes; si++) {
      int64_t floats = sizes[si] / 4 > 0 ? sizes[si] / 4 : 1;
      double bytes = (double)floats * 4;
      double ring = ring_time(a, world, floats, min_time, seq++);
      double algbw = bytes / ring / 1e9, busbw = algbw * 2.0 * (world - 1) / world;
      printf("%-6d %12.0f | %12.4f %10.2f %10.2f |", world, bytes, ring * 1e3, algbw, busbw);
      if (with_driver) {
        double drv = driver_time(a, world, floats, min_time);
        printf(" %14.4f %7.1fx\n", drv * 1e3, drv / ring);
      } else {
        printf(" %14s %8s\n", "-", "-");
      }
      fflush(stdout);
    }
    for (int k = 0; k < world; k++) OK(rd_actor_kill(a[k], 1));
  }
  if (npsizes > 0 && psizes[0] > 0) {
    printf("\nfrom one actor to another, ms per message (GB/s):\n");
    printf("%12s | %18s %12s | %18s %12s | %8s\n", "bytes", "rd_send/rd_recv", "ping-pong/2", "store, 16 in flight",
           "store, 1", "speedup");
    rd_actor a[2];
    for (int k = 0; k < 2; k++) OK(rd_actor_create(Member, RD_NO_ARGS, NULL, &a[k]));
    for (int si = 0; si < npsizes; si++) {
      int64_t bytes = psizes[si];
      double one_way = p2p_time(a, bytes, 0, min_time, seq++);
      double half_rtt = p2p_time(a, bytes, 1, min_time, seq++) / 2;
      double st16 = store_time(a, bytes, 16, min_time), st1 = store_time(a, bytes, 1, min_time);
      printf("%12lld | %9.4f (%6.2f) %12.4f | %9.4f (%6.2f) %12.4f | %7.1fx\n", (long long)bytes, one_way * 1e3,
             (double)bytes / one_way / 1e9, half_rtt * 1e3, st16 * 1e3, (double)bytes / st16 / 1e9, st1 * 1e3,
             st16 / one_way);
      fflush(stdout);
    }
    for (int k = 0; k < 2; k++) OK(rd_actor_kill(a[k], 1));
  }
  rd_shutdown();
  return 0;
}
