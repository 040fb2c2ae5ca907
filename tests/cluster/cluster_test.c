/* tests/cluster/cluster_test.c - drivers run against a real multi-node
 * cluster started by cluster_test.sh: a head on 127.0.0.1 and nodes on
 * 127.0.0.2 (custom resource only_b) and 127.0.0.3 (only_c), each its own
 * `raydist node` process with its own store and workers.  The driver joins
 * through RAYDIST_ADDRESS; its executable reaches the other nodes through
 * the GCS code table.  `cluster_test NAME` runs one case. */
#include <raydist.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../check.h"
#include "../memhog.h"
#include "../handback.h"
#include "../pidfile.h"
#include "session.h"

/* Which node ran me: its index in the cluster. */
/* Each argument i: FILL_SZ bytes of (i & 0xff); answers {its node, the
 * number of arguments}. */
enum { FILL_SZ = 100 * 1024 };
RD_REMOTE(check_fill_args) {
  for (size_t i = 0; i < rd_call_nargs(call); i++) {
    rd_buf b;
    if (rd_arg(call, i, &b) != 0 || b.size != FILL_SZ) return rd_call_fail(call, "argument %zu: size", i);
    const unsigned char *p = b.data;
    if (p[0] != (i & 0xff) || p[FILL_SZ / 2] != (i & 0xff) || p[FILL_SZ - 1] != (i & 0xff))
      return rd_call_fail(call, "argument %zu: bytes", i);
  }
  rd_node_info ni;
  if (rd_node_info_get(&ni) != 0) return rd_call_fail(call, "rd_node_info_get failed");
  uint64_t out[2] = {ni.node_index, rd_call_nargs(call)};
  return rd_return_bytes(call, 0, out, sizeof(out));
}

RD_REMOTE(where) {
  rd_node_info ni;
  if (rd_node_info_get(&ni) != 0) return rd_call_fail(call, "rd_node_info_get failed");
  uint32_t idx = ni.node_index;
  return rd_return_bytes(call, 0, &idx, sizeof(idx));
}

/* Sleep arg0 ms, then say where it ran and echo arg1. */
RD_REMOTE(slow_where) {
  rd_buf a, b;
  if (rd_arg(call, 0, &a) != 0 || rd_arg(call, 1, &b) != 0 || a.size != 4 || b.size != 4)
    return rd_call_fail(call, "bad args");
  uint32_t ms, tag;
  memcpy(&ms, a.data, 4);
  memcpy(&tag, b.data, 4);
  usleep(ms * 1000u);
  rd_node_info ni;
  if (rd_node_info_get(&ni) != 0) return rd_call_fail(call, "rd_node_info_get failed");
  uint32_t out[2] = {ni.node_index, tag};
  return rd_return_bytes(call, 0, out, sizeof(out));
}

/* slow_where that first writes the KV key "marked/<arg1>", so that the
 * driver knows it runs. */
RD_REMOTE(marked_where) {
  rd_buf b;
  if (rd_arg(call, 1, &b) != 0 || b.size != 4) return rd_call_fail(call, "bad args");
  uint32_t tag;
  memcpy(&tag, b.data, 4);
  char key[32];
  snprintf(key, sizeof(key), "marked/%u", tag);
  int e = rd_kv_put(key, "1", 1, 1);
  if (e) return rd_call_fail(call, "put: %s", rd_err_name(e));
  return slow_where_impl(call);
}

/* Waits until marked_where task `tag` runs (its KV key appears). */
static void wait_marked(int tag) {
  char key[32];
  snprintf(key, sizeof(key), "marked/%d", tag);
  void *v = NULL;
  size_t vlen;
  for (int tries = 0; rd_kv_get(key, &v, &vlen) != 0; tries++) {
    CHECK(tries < 600);
    usleep(10000);
  }
  free(v);
}

/* Sleep arg0 ms, then say which process ran it. */
RD_REMOTE(slow_pid) {
  rd_buf a;
  uint32_t ms = 0;
  if (rd_arg(call, 0, &a) == 0 && a.size == 4) memcpy(&ms, a.data, 4);
  usleep(ms * 1000u);
  int32_t pid = (int32_t)getpid();
  return rd_return_bytes(call, 0, &pid, sizeof(pid));
}

/* The size of the executable this task runs in (the two_jobs case tells its
 * jobs apart by it), where it ran, after sleeping arg0 ms. */
RD_REMOTE(exe_size_where) {
  rd_buf a;
  uint32_t ms = 0;
  if (rd_arg(call, 0, &a) == 0 && a.size == 4) memcpy(&ms, a.data, 4);
  usleep(ms * 1000u);
  struct stat st;
  if (stat("/proc/self/exe", &st) != 0) return rd_call_fail(call, "stat /proc/self/exe failed");
  rd_node_info ni;
  if (rd_node_info_get(&ni) != 0) return rd_call_fail(call, "rd_node_info_get failed");
  uint64_t out[2] = {(uint64_t)st.st_size, ni.node_index};
  return rd_return_bytes(call, 0, out, sizeof(out));
}

static uint64_t fnv(const uint8_t *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

/* Checksum a big argument (pulled from the node that holds it) and return a
 * big result of its own, derived from it, that stays in this node's store. */
static int twist(rd_call *call) {
  rd_buf a;
  if (rd_arg(call, 0, &a) != 0) return rd_call_fail(call, "no arg");
  uint8_t *out = rd_return_alloc(call, 1, a.size);
  if (!out) return rd_call_fail(call, "no room for the result");
  const uint8_t *in = a.data;
  for (size_t i = 0; i < a.size; i++) out[i] = (uint8_t)(in[i] ^ 0x5a);
  uint64_t h = fnv(in, a.size);
  rd_node_info ni;
  if (rd_node_info_get(&ni) != 0) ni.node_index = 0;
  uint64_t rep[2] = {h, ni.node_index};
  return rd_return_bytes(call, 0, rep, sizeof(rep));
}

RD_REMOTE(digest_and_twist) { return twist(call); }

/* The same, slow when run again: a rebuild stays pending long enough to be
 * seen pending. */
RD_REMOTE(twist_slow_again) {
  if (rd_call_attempt(call) > 0) usleep(500000);
  return twist(call);
}

static uint32_t node_of(rd_ref r) {
  rd_buf b;
  CHECK_EQ(rd_get(&r, 1, &b, 60000), 0);
  CHECK_EQ(b.size, 4);
  uint32_t v;
  memcpy(&v, b.data, 4);
  rd_buf_release(&b);
  rd_ref_release(r);
  return v;
}

static void join(void) {
  int r = rd_init(NULL);   /* RAYDIST_ADDRESS names the cluster */
  if (r != 0) {
    fprintf(stderr, "rd_init: %s\n", rd_err_name(r));
    exit(1);
  }
  /* the node's view of the cluster follows the GCS within a heartbeat */
  const char *e = getenv("RD_CLUSTER_NODES");   /* the script started more than 3 */
  uint32_t want = e && *e ? (uint32_t)atoi(e) : 3;
  rd_node_info ni;
  for (int i = 0; i < 100; i++) {
    CHECK_EQ(rd_node_info_get(&ni), 0);
    if ((uint32_t)ni.cluster_nodes == want) break;
    usleep(50000);
  }
  CHECK(ni.node_index > 0);
  CHECK_EQ((uint32_t)ni.cluster_nodes, want);
}

/* Index of the node on `ip`, from the session the test script started. */
static uint32_t run_where(const char *res) {
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = res;
  rd_ref r;
  CHECK_EQ(rd_submit(where, RD_NO_ARGS, &o, &r), 0);
  return node_of(r);
}

/* Run K 50 ms slow_where tasks with o; count[node] how many ran on each. */
static int run_counted(const rd_task_opts *o, int k, int count[4096]) {
  rd_ref refs[64];
  uint32_t ms = 50;
  CHECK(k <= 64);
  for (uint32_t i = 0; i < (uint32_t)k; i++)
    CHECK_EQ(rd_submit(slow_where, RD_ARGS(rd_arg_bytes(&ms, 4), rd_arg_bytes(&i, 4)), o, &refs[i]), 0);
  memset(count, 0, 4096 * sizeof(int));
  for (int i = 0; i < k; i++) {
    rd_buf r;
    int e = rd_get(&refs[i], 1, &r, 60000);
    if (e != 0) {
      fprintf(stderr, "task %d: %s: %.*s\n", i, rd_err_name(e), (int)r.size, (const char *)r.data);
      return 1;
    }
    uint32_t v[2];
    memcpy(v, r.data, 8);
    CHECK_EQ(v[1], (uint32_t)i);
    count[v[0] & 4095]++;
    rd_buf_release(&r);
    rd_ref_release(refs[i]);
  }
  return 0;
}

/* A task with o (its resources set to what only node c has) fails at once
 * with RD_ESYS and c's reason: its workers exit with status 3. */
static void only_c_fails(rd_task_opts *o, const char *what) {
  o->resources = "only_c=1";
  rd_ref r;
  CHECK_EQ(rd_submit(where, RD_NO_ARGS, o, &r), 0);
  rd_buf out;
  int e = rd_get(&r, 1, &out, 60000);
  printf("%s: %s: %.*s\n", what, rd_err_name(e), (int)out.size, (const char *)out.data);
  CHECK_EQ(e, RD_ESYS);
  CHECK(out.size > 0 && memmem(out.data, out.size, "status 3", 8) != NULL);
  rd_buf_release(&out);
  rd_ref_release(r);
}

/* Node c cannot run this program (its workers exit at once there, as a
 * binary missing a library would): tasks must not fail for it.  From the
 * head, SPREAD tasks land on a and b only; from c itself (the script sets
 * RAYDIST_NODE_IP), tasks that would pack on c spill.  A task only c can
 * run fails with the reason, at once. */
static int t_bad_node(void) {
  const char *s = getenv("RAYDIST_SESSION");
  if (getenv("RAYDIST_WORKER_ID") && s && strstr(s, "node-127.0.0.3")) _exit(3);
  join();
  rd_node_info ni;
  CHECK_EQ(rd_node_info_get(&ni), 0);
  const char *ip = getenv("RAYDIST_NODE_IP");
  int on_c = ip && !strcmp(ip, "127.0.0.3");
  uint32_t here = ni.node_index, b = run_where("only_b=1");
  rd_task_opts o;
  rd_task_opts_init(&o);
  if (!on_c) o.strategy = RD_STRATEGY_SPREAD;   /* on c: the default packs here first */
  enum { K = 24 };
  static int count[4096];
  if (run_counted(&o, K, count) != 0) return 1;
  printf("driver on node %u (%s): %d tasks on it, %d on b (node %u), %d elsewhere\n", here, on_c ? "c" : "the head",
         count[here], count[b], b, K - count[here] - (b != here ? count[b] : 0));
  if (on_c) CHECK_EQ(count[here], 0);              /* none on c */
  else CHECK_EQ(count[here] + count[b], K);        /* all on the head and b */
  /* only c has only_c: the task fails with why, it does not wait */
  rd_task_opts_init(&o);
  only_c_fails(&o, "a task only node c can run");
  rd_shutdown();
  return 0;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Run K 100 ms tasks with the default policy; how many ran on node `head`. */
static int run_k_on(uint32_t head, int k) {
  rd_ref refs[8];
  uint32_t ms = 100;
  for (uint32_t i = 0; i < (uint32_t)k; i++)
    CHECK_EQ(rd_submit(slow_where, RD_ARGS(rd_arg_bytes(&ms, 4), rd_arg_bytes(&i, 4)), NULL, &refs[i]), 0);
  int on_head = 0;
  for (int i = 0; i < k; i++) {
    rd_buf b;
    CHECK_EQ(rd_get(&refs[i], 1, &b, 60000), 0);
    uint32_t v[2];
    memcpy(v, b.data, 8);
    if (v[0] == head) on_head++;
    rd_buf_release(&b);
    rd_ref_release(refs[i]);
  }
  return on_head;
}

static void finish_all(rd_ref *refs, int n) {
  for (int i = 0; i < n; i++) {
    rd_buf b;
    CHECK_EQ(rd_get(&refs[i], 1, &b, 60000), 0);
    rd_buf_release(&b);
    rd_ref_release(refs[i]);
  }
}

/* arg0: ms.  Takes both CPUs of its own node for that long, from there: a
 * 2-CPU slow_where pinned to this node, which this node places itself (no
 * other node's view learns of it before the next heartbeat), left running
 * when this returns. */
RD_REMOTE(block_from_here) {
  rd_buf a;
  rd_node_info ni;
  if (rd_arg(call, 0, &a) != 0 || a.size != 4) return rd_call_fail(call, "bad args");
  if (rd_node_info_get(&ni) != 0) return rd_call_fail(call, "rd_node_info_get failed");
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.num_cpus = 2;
  o.strategy = RD_STRATEGY_NODE_AFFINITY;
  o.node = ni.node_index;
  uint32_t tag = 0;
  rd_ref r;
  if (rd_submit(slow_where, RD_ARGS(rd_arg_bytes(a.data, 4), rd_arg_bytes(&tag, 4)), &o, &r) != 0)
    return rd_call_fail(call, "submit failed");
  rd_ref_release(r);   /* it runs all the same */
  usleep(100000);      /* its lease request is this node's before the caller's next ones arrive */
  return rd_return_bytes(call, 0, "ok", 2);
}

/* Two halves.  First, a stale view: b and c are taken for 3 s - by tasks
 * that b and c place themselves, so the head's view (up to a second old)
 * still shows them free - and the head for 1 s, and tasks are submitted
 * right after.  Spilled to b or c, they would wait behind those 3 s; b and
 * c refuse them instead (busy, the request came with grant_or_reject), and
 * they run on the head after its 1 s.  (Blockers the head placed itself
 * would be claimed out of its view at once: nothing would be spilled.)  Then, a request that had to wait on a busy node goes to another node
 * once that one has room: the head is taken for 5 s, b and c for 2 s; tasks
 * submitted meanwhile queue on the head (every node is busy in the view),
 * and must run on b and c as soon as those are free, not after the head's
 * 5 s. */
static int t_respill(void) {
  join();
  rd_node_info ni;
  CHECK_EQ(rd_node_info_get(&ni), 0);
  uint32_t head = ni.node_index;
  /* b and c run this job's code already, so the blockers' requests are
   * queued there before the spilled ones (the first fetch of the code is
   * asynchronous) */
  (void)run_where("only_b=1");
  (void)run_where("only_c=1");
  usleep(1200000);   /* every view shows the cluster idle */
  rd_task_opts hb, bb, cb;
  rd_task_opts_init(&hb);
  hb.num_cpus = 2;
  hb.strategy = RD_STRATEGY_NODE_AFFINITY;
  hb.node = head;
  rd_task_opts_init(&bb);
  bb.num_cpus = 2;
  bb.resources = "only_b=1";
  rd_task_opts_init(&cb);
  cb.num_cpus = 2;
  cb.resources = "only_c=1";
  {
    uint32_t far_ms = 3000, head_ms = 1000, tag = 0;
    rd_ref blockers[3];
    rd_task_opts fb, fc;   /* no CPU, so the blockers they start have both */
    rd_task_opts_init(&fb);
    fb.num_cpus = 0;
    fb.resources = "only_b=0.25";
    fc = fb;
    fc.resources = "only_c=0.25";
    double t0 = now_s();
    CHECK_EQ(rd_submit(block_from_here, RD_ARGS(rd_arg_bytes(&far_ms, 4)), &fb, &blockers[0]), 0);
    CHECK_EQ(rd_submit(block_from_here, RD_ARGS(rd_arg_bytes(&far_ms, 4)), &fc, &blockers[1]), 0);
    finish_all(blockers, 2);   /* their blockers are queued on b and c now */
    double t_far = now_s();   /* b and c are taken from about now until 3 s later */
    CHECK_EQ(rd_submit(slow_where, RD_ARGS(rd_arg_bytes(&head_ms, 4), rd_arg_bytes(&tag, 4)), &hb, &blockers[2]), 0);
    int on_head = run_k_on(head, 4);
    double took = now_s() - t0, far_left = t_far + far_ms / 1e3 - now_s();
    printf("stale view: 4 tasks placed while b and c looked free ran in %.2f s, %d on the head; b and c busy "
           "%.2f s more\n", took, on_head, far_left);
    CHECK_EQ(on_head, 4);
    CHECK(far_left > 0);   /* done before b and c could have run them */
    finish_all(&blockers[2], 1);
    if (far_left > 0) usleep((useconds_t)(far_left * 1e6));
  }
  usleep(1200000);
  uint32_t long_ms = 5000, short_ms = 2000, tag = 0;
  rd_ref blockers[3];
  CHECK_EQ(rd_submit(slow_where, RD_ARGS(rd_arg_bytes(&long_ms, 4), rd_arg_bytes(&tag, 4)), &hb, &blockers[0]), 0);
  CHECK_EQ(rd_submit(slow_where, RD_ARGS(rd_arg_bytes(&short_ms, 4), rd_arg_bytes(&tag, 4)), &bb, &blockers[1]), 0);
  CHECK_EQ(rd_submit(slow_where, RD_ARGS(rd_arg_bytes(&short_ms, 4), rd_arg_bytes(&tag, 4)), &cb, &blockers[2]), 0);
  usleep(1200000);   /* the head's view shows b and c busy */
  double t0 = now_s();
  int on_head = run_k_on(head, 4);
  double took = now_s() - t0;
  int head_busy = rd_wait(&blockers[0], 1, 1, 0, NULL) == 0;
  printf("4 tasks queued behind a busy head ran in %.2f s, %d of them on the head; the head's blocker %s\n", took,
         on_head, head_busy ? "still ran" : "had ended");
  CHECK_EQ(on_head, 0);
  CHECK(head_busy);
  finish_all(blockers, 3);
  rd_shutdown();
  return 0;
}

/* For the view_claim case: three rounds of two 600 ms tasks that need
 * pool=1, which only b and c have (one each) and the head, their owner's
 * node, cannot stand in for (so the requests go without grant_or_reject).
 * The owner's second request is placed before the next view: it must go to
 * the node the first did not take, which the first claimed out of the
 * view, not queue behind the first until respill moves it (the script
 * checks that neither b nor c respilled anything). */
static int t_view_claim(void) {
  join();
  (void)run_where("only_b=1");   /* the code is on b and c already */
  (void)run_where("only_c=1");
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "pool=1";
  for (uint32_t round = 0; round < 3; round++) {
    usleep(1200000);   /* every view shows b and c idle */
    uint32_t ms = 600;
    rd_ref r[2];
    double t0 = now_s();
    for (uint32_t i = 0; i < 2; i++)
      CHECK_EQ(rd_submit(slow_where, RD_ARGS(rd_arg_bytes(&ms, 4), rd_arg_bytes(&i, 4)), &o, &r[i]), 0);
    uint32_t node[2];
    for (int i = 0; i < 2; i++) {
      rd_buf b;
      CHECK_EQ(rd_get(&r[i], 1, &b, 60000), 0);
      uint32_t v[2];
      memcpy(v, b.data, 8);
      node[i] = v[0];
      rd_buf_release(&b);
      rd_ref_release(r[i]);
    }
    printf("round %u: two pool=1 tasks ran on nodes %u and %u in %.2f s\n", round, node[0], node[1], now_s() - t0);
    CHECK(node[0] != node[1]);
  }
  rd_shutdown();
  return 0;
}

/* Many scheduling classes across the cluster: 1200 tasks of 20 ms, each
 * with a label selector of its own that every node matches (so a lease of
 * its own), submitted at once from the head's driver.  All run, and each
 * of b and c runs at least a fifth of them.  Before a returned spilled
 * lease gave its room back in the head's view (view_unclaim), b and c got
 * only as many as they had CPUs per view: 45 each of 1200, in 11.3 s;
 * now about 350 each in 4.8 s (one class: 400 each in 4.2 s). */
static int t_many_classes(void) {
  join();
  (void)run_where("only_b=1");   /* the code is on b and c already */
  (void)run_where("only_c=1");
  enum { N = 1200 };
  static char sel[N][32];
  static rd_ref r[N];
  double t0 = now_s();
  for (int i = 0; i < N; i++) {
    snprintf(sel[i], sizeof(sel[i]), "shard=!s%d", i);
    rd_task_opts o;
    rd_task_opts_init(&o);
    o.label_selector = sel[i];
    uint32_t ms = 20, k = (uint32_t)i;
    CHECK_EQ(rd_submit(slow_where, RD_ARGS(rd_arg_bytes(&ms, 4), rd_arg_bytes(&k, 4)), &o, &r[i]), 0);
  }
  int per[8] = {0};
  for (int i = 0; i < N; i++) {
    rd_buf b;
    int gr = rd_get(&r[i], 1, &b, 120000);
    if (gr != 0) fprintf(stderr, "task %d: %s: %.*s\n", i, rd_strerror(gr), (int)b.size, (const char *)b.data);
    CHECK_EQ(gr, 0);
    uint32_t v[2];
    memcpy(v, b.data, 8);
    CHECK_EQ(v[1], (uint32_t)i);
    if (v[0] < 8) per[v[0]]++;
    rd_buf_release(&b);
    rd_ref_release(r[i]);
  }
  printf("%d tasks, each with a selector of its own: done after %.2f s; per node %d/%d/%d\n", N, now_s() - t0,
         per[1], per[2], per[3]);
  CHECK(per[2] >= N / 5 && per[3] >= N / 5);
  rd_shutdown();
  return 0;
}

RD_REMOTE(crash_abort) {
  (void)call;
  abort();
}

RD_REMOTE(end_kill) {
  (void)call;
  raise(SIGKILL);
  return 0;
}

RD_REMOTE(end_status) {
  (void)call;
  _exit(3);
}

/* f run with o fails with RD_EWORKER_DIED, its message holding want. */
static int died_saying(rd_function *f, const rd_task_opts *o, const char *want) {
  rd_ref r;
  rd_buf b;
  CHECK_EQ(rd_submit(f, RD_NO_ARGS, o, &r), 0);
  CHECK_EQ(rd_get(&r, 1, &b, 30000), RD_EWORKER_DIED);
  printf("%s\n", (const char *)b.data);
  int has = strstr((const char *)b.data, want) != NULL;
  rd_buf_release(&b);
  rd_ref_release(r);
  return has;
}

static int t_custom_resources(void) {
  join();
  rd_node_info ni;
  CHECK_EQ(rd_node_info_get(&ni), 0);
  uint32_t here = ni.node_index;
  uint32_t b = run_where("only_b=1"), c = run_where("only_c=1");
  printf("driver on node %u, only_b ran on node %u, only_c on node %u\n", here, b, c);
  CHECK(b != here && c != here && b != c);
  /* many at once: all land on b, results all come back */
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_b=0.1";
  rd_ref refs[200];
  for (int i = 0; i < 200; i++) CHECK_EQ(rd_submit(where, RD_NO_ARGS, &o, &refs[i]), 0);
  for (int i = 0; i < 200; i++) CHECK_EQ(node_of(refs[i]), b);
  /* infeasible everywhere: a clear error at rd_get */
  o.resources = "nowhere=1";
  rd_ref bad;
  CHECK_EQ(rd_submit(where, RD_NO_ARGS, &o, &bad), 0);
  rd_buf bb;
  CHECK_EQ(rd_get(&bad, 1, &bb, 30000), RD_EINFEASIBLE);
  rd_buf_release(&bb);
  rd_ref_release(bad);
  /* a worker on b that crashes: its report reaches the owner through the
   * link before b's own word for the closed socket (src/stack.c) */
  o.resources = "only_b=1";
  o.max_retries = 0;
  CHECK(died_saying(crash_abort, &o, ") died of SIGABRT (Aborted) while running task 'crash_abort' (attempt 1 of 1); "
                                     "its stack is on its stderr"));
  /* ones that end without a report: b's word on how, through the link */
  CHECK(died_saying(end_kill, &o, ") was killed by SIGKILL, "));
  CHECK(died_saying(end_kill, &o, " while running task 'end_kill' (attempt 1 of 1)"));
  CHECK(died_saying(end_status, &o, ") exited with status 3 (its stderr may say why) while running task 'end_status' "
                                    "(attempt 1 of 1)"));
  rd_shutdown();
  return 0;
}

static int t_strategies(void) {
  join();
  /* SPREAD: 3 nodes, round robin: every node runs some */
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.strategy = RD_STRATEGY_SPREAD;
  int seen[4096] = {0};
  rd_ref refs[30];
  uint32_t ms = 200;
  for (uint32_t i = 0; i < 30; i++) CHECK_EQ(rd_submit(slow_where, RD_ARGS(rd_arg_bytes(&ms, 4), rd_arg_bytes(&i, 4)), &o, &refs[i]), 0);
  int distinct = 0;
  for (int i = 0; i < 30; i++) {
    rd_buf b;
    CHECK_EQ(rd_get(&refs[i], 1, &b, 60000), 0);
    uint32_t v[2];
    memcpy(v, b.data, 8);
    CHECK_EQ(v[1], i);
    if (!seen[v[0]]++) distinct++;
    rd_buf_release(&b);
    rd_ref_release(refs[i]);
  }
  printf("SPREAD used %d nodes\n", distinct);
  CHECK_EQ(distinct, 3);
  /* hard affinity: to node c (found through its resource) */
  uint32_t c = run_where("only_c=1");
  rd_task_opts_init(&o);
  o.strategy = RD_STRATEGY_NODE_AFFINITY;
  o.node = c;
  for (int i = 0; i < 5; i++) {
    rd_ref r;
    CHECK_EQ(rd_submit(where, RD_NO_ARGS, &o, &r), 0);
    CHECK_EQ(node_of(r), c);
  }
  /* hard affinity to a node that does not exist: an error, not a hang */
  o.node = 4000;
  rd_ref r;
  CHECK_EQ(rd_submit(where, RD_NO_ARGS, &o, &r), 0);
  rd_buf b;
  int e = rd_get(&r, 1, &b, 30000);
  CHECK(e == RD_ENODE_DIED || e == RD_EINFEASIBLE);
  rd_buf_release(&b);
  rd_ref_release(r);
  /* soft: falls back to the default policy */
  o.soft = 1;
  CHECK_EQ(rd_submit(where, RD_NO_ARGS, &o, &r), 0);
  CHECK(node_of(r) > 0);
  rd_shutdown();
  return 0;
}

/* 200 MiB put here, consumed on b; b's 200 MiB result pulled back here. */
/* Make a big result where it runs (only_b: node b). */
RD_REMOTE(make_big) {
  size_t n = 64u << 20;
  uint8_t *out = rd_return_alloc(call, 0, n);
  if (!out) return rd_call_fail(call, "no room");
  memset(out, 9, n);
  return 0;
}

/* A result of arg0 bytes, byte i = (i * 7 + arg1), where it runs. */
RD_REMOTE(make_sized) {
  long n = 0, seed = 0;
  rd_buf a, b;
  if (rd_arg(call, 0, &a) != 0 || rd_arg(call, 1, &b) != 0 || a.size != sizeof(long) || b.size != sizeof(long))
    return rd_call_fail(call, "bad args");
  memcpy(&n, a.data, sizeof(n));
  memcpy(&seed, b.data, sizeof(seed));
  uint8_t *out = rd_return_alloc(call, 0, (size_t)n);
  if (!out) return rd_call_fail(call, "no room");
  for (long i = 0; i < n; i++) out[i] = (uint8_t)(i * 7 + seed);
  return 0;
}

/* Has two big results made on node b, then dies (run it on c). */
RD_REMOTE(owner_then_die) {
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_b=1";
  rd_ref r[2];
  for (int i = 0; i < 2; i++)
    if (rd_submit(make_big, RD_NO_ARGS, &o, &r[i]) != 0) return rd_call_fail(call, "submit failed");
  if (rd_wait(r, 2, 2, 60000, NULL) != 2) return rd_call_fail(call, "results not ready");
  kill(getpid(), SIGKILL);
  return 0;
}

/* The bytes in use in the store of the node it runs on. */
RD_REMOTE(store_used_here) {
  rd_node_info ni;
  if (rd_node_info_get(&ni) != 0) return rd_call_fail(call, "rd_node_info_get failed");
  return rd_return_bytes(call, 0, &ni.store_used, sizeof(ni.store_used));
}

static uint64_t store_used_on(const char *resources) {
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = resources;
  rd_ref r;
  if (rd_submit(store_used_here, RD_NO_ARGS, &o, &r) != 0) return UINT64_MAX;
  rd_buf b;
  uint64_t used = UINT64_MAX;
  if (rd_get(&r, 1, &b, 60000) == 0) {
    if (b.size == sizeof(used)) memcpy(&used, b.data, sizeof(used));
    rd_buf_release(&b);
  }
  rd_ref_release(r);
  return used;
}

/* Read r: out[0] the error of rd_get, out[1] the hash of the bytes. */
static void hash_ref(rd_ref r, uint64_t out[2]) {
  rd_buf b;
  int e = rd_get(&r, 1, &b, 60000);
  out[0] = (uint64_t)(int64_t)e;
  out[1] = e == 0 ? fnv(b.data, b.size) : 0;
  if (e != RD_ETIMEDOUT) rd_buf_release(&b);
}

/* The result r of `what` (up to timeout_ms), exactly `size` bytes, copied
 * into out (NULL: only checked); on failure its message, and exit. */
static void get_exact(rd_ref r, const char *what, int64_t timeout_ms, void *out, size_t size) {
  rd_buf b;
  int e = rd_get(&r, 1, &b, timeout_ms);
  if (e != 0) {
    fprintf(stderr, "%s: %s: %.*s\n", what, rd_err_name(e), (int)b.size, (const char *)b.data);
    exit(1);
  }
  CHECK_EQ(b.size, size);
  if (out) memcpy(out, b.data, size);
  rd_buf_release(&b);
}

/* The stores of nodes b and c reach 0 bytes within 5 s (deletes travel
 * with flushes and across links); `when` names the moment in the output. */
static void stores_bc_empty(const char *when) {
  uint64_t ub = UINT64_MAX, uc = UINT64_MAX;
  for (int i = 0; i < 50; i++) {
    ub = store_used_on("only_b=1");
    uc = store_used_on("only_c=1");
    if (ub == 0 && uc == 0) break;
    usleep(100000);
  }
  printf("stores of b and c %s: %llu and %llu bytes\n", when, (unsigned long long)ub, (unsigned long long)uc);
  CHECK_EQ(ub, 0);
  CHECK_EQ(uc, 0);
}

/* Borrowed refs across nodes: hash the object behind borrowed argument 0.
 * Returns {error, hash, node}. */
RD_REMOTE(borrow_hash) {
  rd_ref r;
  if (rd_call_arg_ref(call, 0, &r) != 0) return rd_call_fail(call, "rd_call_arg_ref");
  uint64_t out[3] = {0, 0, 0};
  hash_ref(r, out);
  rd_ref_release(r);
  rd_node_info ni;
  if (rd_node_info_get(&ni) == 0) out[2] = ni.node_index;
  return rd_return_bytes(call, 0, out, sizeof(out));
}

/* Hashes its three borrowed arguments and lends the first on to a task on
 * node c.  Returns {node, 3 x (error, hash), c's answer (error, hash, node)}. */
RD_REMOTE(borrow_three) {
  uint64_t out[10];
  memset(out, 0, sizeof(out));
  rd_node_info ni;
  if (rd_node_info_get(&ni) == 0) out[0] = ni.node_index;
  rd_ref r[3];
  for (int i = 0; i < 3; i++)
    if (rd_call_arg_ref(call, (size_t)i, &r[i]) != 0) return rd_call_fail(call, "rd_call_arg_ref(%d)", i);
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_c=1";
  rd_ref inner;
  if (rd_submit(borrow_hash, RD_ARGS(rd_arg_borrow(r[0])), &o, &inner) != 0) return rd_call_fail(call, "submit");
  for (int i = 0; i < 3; i++) hash_ref(r[i], &out[1 + 2 * i]);
  rd_buf b;
  int e = rd_get(&inner, 1, &b, 60000);
  if (e != 0) return rd_call_fail(call, "inner: %s", rd_err_name(e));
  memcpy(&out[7], b.data, 3 * sizeof(uint64_t));
  rd_buf_release(&b);
  rd_ref_release(inner);
  for (int i = 0; i < 3; i++) rd_ref_release(r[i]);
  return rd_return_bytes(call, 0, out, sizeof(out));
}

static void borrow_on_actor(rd_ref store_on_c);

/* The bytes every nested case hashes: n bytes of pattern `seed`. */
static uint8_t *pattern(size_t n, unsigned seed) {
  uint8_t *d = malloc(n);
  if (d)
    for (size_t i = 0; i < n; i++) d[i] = (uint8_t)((i + seed) * 2654435761u >> 13);
  return d;
}

/* On node b: puts 4 MiB (pattern 1) and 8 bytes, has a task on c make
 * 4 MiB (pattern 1 twisted: digest_and_twist's second result, stored on c);
 * out: refs to all three, the caller's to release.  0, or the task failed
 * (rd_call_fail). */
static int make_hand_refs(rd_call *call, rd_ref out[3]) {
  size_t n = 4u << 20;
  uint8_t *d = pattern(n, 1);
  if (!d) return rd_call_fail(call, "out of memory");
  uint64_t small = 0xfeedull;
  rd_ref r[4];
  int e = rd_put(d, n, &r[0]);
  free(d);
  if (e != 0 || rd_put(&small, sizeof(small), &r[1]) != 0) return rd_call_fail(call, "rd_put");
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_c=1";
  o.num_returns = 2;
  if (rd_submit(digest_and_twist, RD_ARGS(rd_arg_ref(r[0])), &o, &r[2]) != 0) return rd_call_fail(call, "submit");
  rd_ref_release(r[2]);
  out[0] = r[0];
  out[1] = r[1];
  out[2] = r[3];
  return 0;
}

/* Returns make_hand_refs's three refs inside "nested", keeping none. */
RD_REMOTE(hand_refs) {
  rd_ref r[3];
  int e = make_hand_refs(call, r);
  if (e != 0) return e;
  e = rd_return_refs(call, 0, "nested", 6, r, 3);
  for (int i = 0; i < 3; i++) rd_ref_release(r[i]);
  return e;
}

/* The same three refs as a stream, one item each (rd_yield_refs). */
RD_REMOTE(yield_hand_refs) {
  rd_ref items[3];
  int e = make_hand_refs(call, items);
  if (e != 0) return e;
  for (long i = 0; i < 3 && e == 0; i++) e = rd_yield_refs(call, &i, sizeof(i), &items[i], 1);
  for (int i = 0; i < 3; i++) rd_ref_release(items[i]);
  return e ? rd_call_fail(call, "rd_yield_refs: %s", rd_err_name(e)) : 0;
}

/* Argument 0 (by value) contains refs: {count, then error and hash of each
 * (up to 3), then this node}. */
RD_REMOTE(hash_contained) {
  uint64_t out[8] = {0};
  rd_ref r[3];
  size_t n = 0;
  if (rd_call_arg_refs(call, 0, r, 3, &n) != 0) return rd_call_fail(call, "rd_call_arg_refs");
  out[0] = n;
  for (size_t i = 0; i < n; i++) {
    hash_ref(r[i], &out[1 + 2 * i]);
    rd_ref_release(r[i]);
  }
  rd_node_info ni;
  if (rd_node_info_get(&ni) == 0) out[7] = ni.node_index;
  return rd_return_bytes(call, 0, out, sizeof(out));
}

/* Refs returned across nodes: a task on b returns refs to a store object of
 * its own on b, a small value and a result its subtask left on c; the
 * driver, on the head, co-owns them after the task: it reads them, lends them
 * inside the result to a task on c, and when it lets go the stores of b
 * and c empty (the deletes of objects handed over reach the nodes holding
 * them). */
/* rt_blocked_handback over bridged leases (workers on node b): hb_make's
 * retry is pipelined behind hb_read, which waits for its result; the
 * waiting worker hands it back (TaskReply.unrun, through node b and the
 * link) and it runs on another worker of b. */
static void handback_bridged(void) {
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_b=0.1";
  long mode = 0, v;
  for (int i = 0; i < 10; i++) {   /* hb_make timed: fast, so pipelined */
    rd_ref r;
    CHECK_EQ(rd_submit(hb_make, RD_ARGS(rd_arg_bytes(&mode, sizeof(mode))), &o, &r), 0);
    get_exact(r, "hb_make", 60000, &v, sizeof(v));
    CHECK_EQ(v, 1);
    rd_ref_release(r);
  }
  o.max_retries = 1;
  mode = 1;
  rd_ref a, b;
  CHECK_EQ(rd_submit(hb_make, RD_ARGS(rd_arg_bytes(&mode, sizeof(mode))), &o, &a), 0);
  o.max_retries = 0;
  CHECK_EQ(rd_submit(hb_read, RD_ARGS(rd_arg_borrow(a)), &o, &b), 0);
  double t0 = now_s();
  get_exact(b, "hb_read", 60000, &v, sizeof(v));
  double took = now_s() - t0;
  printf("a task on node b waiting for a retry pipelined behind it: done in %.2f s\n", took);
  CHECK_EQ(v, 2);
  CHECK(took < 5);
  get_exact(a, "hb_make", 60000, &v, sizeof(v));
  CHECK_EQ(v, 2);
  rd_ref_release(a);
  rd_ref_release(b);
}

static int t_nested(void) {
  join();
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_b=1";
  rd_ref res;
  CHECK_EQ(rd_submit(hand_refs, RD_NO_ARGS, &o, &res), 0);
  get_exact(res, "hand_refs", 120000, NULL, 6);
  size_t n = 4u << 20;
  uint8_t *d = pattern(n, 1);
  CHECK(d);
  uint64_t small = 0xfeedull, want[3] = {fnv(d, n), fnv((const uint8_t *)&small, sizeof(small)), 0};
  for (size_t i = 0; i < n; i++) d[i] ^= 0x5a;
  want[2] = fnv(d, n);
  free(d);
  usleep(500000);   /* b's worker has dropped its refs; its lease goes back */
  CHECK(store_used_on("only_b=1") >= n);
  CHECK(store_used_on("only_c=1") >= n);
  rd_ref in[3];
  size_t k = 0;
  CHECK_EQ(rd_get_refs(res, in, 3, &k, 10000), 0);
  CHECK_EQ(k, 3);
  for (int i = 0; i < 3; i++) {
    uint64_t h[2];
    hash_ref(in[i], h);
    printf("handed-over ref %d: %s\n", i, rd_err_name((int)(int64_t)h[0]));
    CHECK_EQ(h[0], 0);
    CHECK(h[1] == want[i]);
    rd_ref_release(in[i]);
  }
  rd_task_opts_init(&o);
  o.resources = "only_c=1";
  rd_ref out;
  CHECK_EQ(rd_submit(hash_contained, RD_ARGS(rd_arg_ref(res)), &o, &out), 0);
  uint64_t r[8];
  get_exact(out, "hash_contained", 120000, r, sizeof(r));
  printf("a task on node %llu took %llu refs from the result: errors %lld %lld %lld\n", (unsigned long long)r[7],
         (unsigned long long)r[0], (long long)r[1], (long long)r[3], (long long)r[5]);
  CHECK_EQ(r[0], 3);
  for (int i = 0; i < 3; i++) {
    CHECK_EQ(r[1 + 2 * i], 0);
    CHECK(r[2 + 2 * i] == want[i]);
  }
  rd_ref_release(out);
  rd_ref_release(res);
  stores_bc_empty("after the result holding them went");
  /* the same refs as items of a stream, read after the task ended */
  rd_task_opts_init(&o);
  o.resources = "only_b=1";
  o.num_returns = RD_STREAMING;
  rd_ref st;
  CHECK_EQ(rd_submit(yield_hand_refs, RD_NO_ARGS, &o, &st), 0);
  CHECK_EQ(rd_wait(&st, 1, 1, 120000, NULL), 1);
  usleep(500000);
  for (long i = 0; i < 3; i++) {
    rd_ref item, x;
    CHECK_EQ(rd_stream_next(st, &item, 30000), 0);
    k = 0;
    CHECK_EQ(rd_get_refs(item, &x, 1, &k, 10000), 0);
    CHECK_EQ(k, 1);
    uint64_t h[2];
    hash_ref(x, h);
    printf("ref in streamed item %ld: %s\n", i, rd_err_name((int)(int64_t)h[0]));
    CHECK_EQ(h[0], 0);
    CHECK(h[1] == want[i]);
    rd_ref_release(x);
    rd_ref_release(item);
  }
  rd_ref_release(st);
  stores_bc_empty("after the streamed items went");
  handback_bridged();
  rd_shutdown();
  return 0;
}

/* A task on b borrows a store object of this node, a small value, and a big
 * result still being made on c, and lends the first on to c: every read
 * crosses nodes (the answers through the bridged lease sockets, the bytes by
 * pulls between stores). */
static int t_borrow(void) {
  join();
  rd_node_info ni;
  CHECK_EQ(rd_node_info_get(&ni), 0);
  size_t n = 8u << 20;
  uint8_t *d = malloc(n);
  CHECK(d);
  for (size_t i = 0; i < n; i++) d[i] = (uint8_t)(i * 2654435761u >> 11);
  uint8_t *tw = malloc(n);
  CHECK(tw);
  for (size_t i = 0; i < n; i++) tw[i] = (uint8_t)(d[i] ^ 0x5a);
  uint64_t small = 0x1234567890abcdefull;
  rd_ref big, sm, made[2];
  CHECK_EQ(rd_put(d, n, &big), 0);
  CHECK_EQ(rd_put(&small, sizeof(small), &sm), 0);
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_c=1";
  o.num_returns = 2;
  CHECK_EQ(rd_submit(digest_and_twist, RD_ARGS(rd_arg_ref(big)), &o, made), 0);
  rd_task_opts_init(&o);
  o.resources = "only_b=1";
  rd_ref out;
  CHECK_EQ(rd_submit(borrow_three, RD_ARGS(rd_arg_borrow(big), rd_arg_borrow(sm), rd_arg_borrow(made[1])), &o, &out), 0);
  uint64_t r[10];
  get_exact(out, "borrow_three", 120000, r, sizeof(r));
  printf("borrower on node %llu: errors %lld %lld %lld; lent on to node %llu: %lld\n", (unsigned long long)r[0],
         (long long)r[1], (long long)r[3], (long long)r[5], (unsigned long long)r[9], (long long)r[7]);
  CHECK(r[0] != ni.node_index);
  CHECK_EQ(r[1], 0);
  CHECK(r[2] == fnv(d, n));
  CHECK_EQ(r[3], 0);
  CHECK(r[4] == fnv((const uint8_t *)&small, sizeof(small)));
  CHECK_EQ(r[5], 0);
  CHECK(r[6] == fnv(tw, n));
  CHECK_EQ(r[7], 0);
  CHECK(r[8] == fnv(d, n));
  CHECK(r[9] != ni.node_index && r[9] != r[0]);
  borrow_on_actor(made[1]);
  rd_ref_release(out);
  rd_ref_release(big);
  rd_ref_release(sm);
  rd_ref_release(made[0]);
  rd_ref_release(made[1]);
  free(d);
  free(tw);
  /* 600 small values this driver put (inline here, 60 MiB in all) as the
   * arguments of a task on node b: past the 56 MiB that travel in its
   * message, the rest asked for by the worker across the link */
  enum { NF = 600 };
  static rd_ref fill[NF];
  static rd_value fv[NF];
  static unsigned char one_val[FILL_SZ];
  for (int i = 0; i < NF; i++) {
    memset(one_val, i & 0xff, FILL_SZ);
    CHECK_EQ(rd_put(one_val, FILL_SZ, &fill[i]), 0);
    fv[i] = rd_arg_ref(fill[i]);
  }
  CHECK_EQ(rd_submit(check_fill_args, fv, NF, &o, &out), 0);   /* o: on node b */
  uint64_t fr[2];
  get_exact(out, "check_fill_args", 120000, fr, sizeof(fr));
  CHECK(fr[0] != ni.node_index && fr[1] == NF);
  rd_ref_release(out);
  for (int i = 0; i < NF; i++) rd_ref_release(fill[i]);
  /* the copies b and c pulled go with the objects */
  stores_bc_empty("after the release");
  rd_shutdown();
  return 0;
}

static int t_big_object(void) {
  join();
  size_t n = 200u << 20;
  void *p;
  rd_ref in;
  CHECK_EQ(rd_put_begin(n, &p, &in), 0);
  uint8_t *d = p;
  for (size_t i = 0; i < n; i++) d[i] = (uint8_t)(i * 2654435761u >> 13);
  uint64_t want = fnv(d, n);
  CHECK_EQ(rd_put_seal(in), 0);
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_b=1";
  o.num_returns = 2;
  rd_ref out[2];
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  CHECK_EQ(rd_submit(digest_and_twist, RD_ARGS(rd_arg_ref(in)), &o, out), 0);
  rd_buf bufs[2];
  CHECK_EQ(rd_get(out, 2, bufs, 120000), 0);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  uint64_t rep[2];
  CHECK_EQ(bufs[0].size, 16);
  memcpy(rep, bufs[0].data, 16);
  CHECK(rep[0] == want);   /* b saw exactly our bytes */
  rd_node_info ni;
  CHECK_EQ(rd_node_info_get(&ni), 0);
  CHECK(rep[1] != ni.node_index);
  CHECK_EQ(bufs[1].size, n);
  const uint8_t *back = bufs[1].data;
  for (size_t i = 0; i < n; i += 4093) CHECK_EQ(back[i], (uint8_t)(d[i] ^ 0x5a));
  for (size_t i = 0; i < n; i++)
    if (back[i] != (uint8_t)(d[i] ^ 0x5a)) {
      fprintf(stderr, "byte %zu differs\n", i);
      return 1;
    }
  double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
  printf("200 MiB there and 200 MiB back through node %llu in %.2f s\n", (unsigned long long)rep[1], s);
  rd_buf_release(&bufs[0]);
  rd_buf_release(&bufs[1]);
  rd_ref_release(out[0]);
  rd_ref_release(out[1]);
  rd_ref_release(in);
  /* results that b had to spill (768 MiB in its 700 MB store) are read back
   * there and pulled here (the script checks b's restore count) */
  enum { K = 12 };
  rd_ref big[K];
  o.num_returns = 1;
  for (int i = 0; i < K; i++) CHECK_EQ(rd_submit(make_big, RD_NO_ARGS, &o, &big[i]), 0);
  CHECK(rd_wait(big, K, K, 120000, NULL) == K);
  for (int i = 0; i < K; i++) {
    rd_buf b;
    CHECK_EQ(rd_get(&big[i], 1, &b, 120000), 0);
    CHECK_EQ(b.size, 64u << 20);
    const uint8_t *q = b.data;
    for (size_t j = 0; j < b.size; j += 4093) CHECK_EQ(q[j], 9);
    rd_buf_release(&b);
    rd_ref_release(big[i]);
  }
  /* a process on c whose results live on b dies: b deletes them (nobody
   * else can name them) */
  rd_task_opts oc;
  rd_task_opts_init(&oc);
  oc.resources = "only_c=1";
  oc.max_retries = 0;
  rd_ref dead;
  CHECK_EQ(rd_submit(owner_then_die, RD_NO_ARGS, &oc, &dead), 0);
  rd_buf db;
  CHECK(rd_get(&dead, 1, &db, 60000) != 0);
  rd_buf_release(&db);   /* the error message */
  rd_ref_release(dead);
  uint64_t used = UINT64_MAX;
  for (int i = 0; i < 50; i++) {
    used = store_used_on("only_b=1");
    if (used < (64u << 20)) break;
    usleep(100000);
  }
  printf("node b's store after the owner of 128 MiB there died: %llu bytes\n", (unsigned long long)used);
  CHECK(used < (64u << 20));
  /* larger than both stores (700 MB): made in b's fallback region, pulled
   * into this node's (docs/objectstore.md#fallback-allocation) */
  long huge = 800l << 20, seed = 11;
  rd_ref h;
  CHECK_EQ(rd_submit(make_sized, RD_ARGS(rd_arg_bytes(&huge, sizeof(huge)), rd_arg_bytes(&seed, sizeof(seed))), &o, &h),
           0);
  rd_buf hb;
  int e = rd_get(&h, 1, &hb, 120000);
  if (e != 0) fprintf(stderr, "800 MiB result: %s: %.*s\n", rd_err_name(e), (int)hb.size, (const char *)hb.data);
  CHECK_EQ(e, 0);
  CHECK_EQ(hb.size, (size_t)huge);
  const uint8_t *hp = hb.data;
  for (long i = 0; i < huge; i += 4093) CHECK_EQ(hp[i], (uint8_t)(i * 7 + seed));
  CHECK_EQ(hp[huge - 1], (uint8_t)((huge - 1) * 7 + seed));
  CHECK_EQ(rd_node_info_get(&ni), 0);
  CHECK(ni.store_fallback_used >= (uint64_t)huge);
  /* b's heartbeat counts it as held (so b is not idle: the autoscaler
   * would let it go with the object only in its region) */
  uint64_t b_used = 0;
  for (int i = 0; i < 40 && b_used < (uint64_t)huge; i++) {
    rd_node_desc nd[8];
    size_t nn = 0;
    CHECK_EQ(rd_nodes(nd, 8, &nn), 0);
    for (size_t k = 0; k < nn; k++)
      if (nd[k].index == (uint32_t)rep[1]) b_used = nd[k].store_used;
    if (b_used < (uint64_t)huge) usleep(100000);
  }
  printf("node b holds %llu MiB of a %llu MiB store\n", (unsigned long long)(b_used >> 20),
         (unsigned long long)(700000000ull >> 20));
  CHECK(b_used >= (uint64_t)huge);
  rd_buf_release(&hb);
  rd_ref_release(h);
  for (int i = 0; i < 50 && ni.store_fallback_used != 0; i++) {
    usleep(100000);
    CHECK_EQ(rd_node_info_get(&ni), 0);
  }
  CHECK_EQ(ni.store_fallback_used, 0);   /* gone with the last ref */
  rd_shutdown();
  return 0;
}

/* Kill node c while SPREAD tasks run on it: every task still completes
 * (retried elsewhere), and work pinned to c fails with RD_ENODE_DIED. */
RD_REMOTE_DECLARE(stream_remote);

/* Takes item i of a stream_blocks stream: intact, made on a node other than
 * this one; returns that node. */
static uint64_t take_block(rd_ref s, long i) {
  rd_ref it;
  int e = rd_stream_next(s, &it, 120000);
  if (e != 0) fprintf(stderr, "stream item %ld: %s\n", i, rd_err_name(e));
  CHECK_EQ(e, 0);
  rd_buf b;
  e = rd_get(&it, 1, &b, 120000);
  if (e != 0) fprintf(stderr, "stream item %ld: %s: %.*s\n", i, rd_err_name(e), (int)b.size, (const char *)b.data);
  CHECK_EQ(e, 0);
  CHECK_EQ(b.size, i % 4 == 3 ? 2u << 20 : 64);
  uint64_t head[2];
  memcpy(head, b.data, sizeof(head));
  CHECK_EQ(head[1], i);
  const uint8_t *p = b.data;
  for (size_t k = sizeof(head); k < b.size; k += 997) CHECK_EQ(p[k], (uint8_t)(i + (long)k));
  rd_buf_release(&b);
  rd_ref_release(it);
  return head[0];
}

static int t_node_death(void) {
  join();
  uint32_t c = run_where("only_c=1");
  int pid = node_pid("127.0.0.3");
  CHECK(pid > 0);
  rd_task_opts o;
  /* a stream made on c (soft affinity), 10 items taken before c dies; the
   * ones that came from c and were not taken yet die with it, and the
   * task's next attempt, elsewhere, makes them again */
  rd_task_opts_init(&o);
  o.strategy = RD_STRATEGY_NODE_AFFINITY;
  o.node = c;
  o.soft = 1;
  o.num_returns = RD_STREAMING;
  o.stream_window = 8;
  long nitems = 40;
  rd_ref st;
  CHECK_EQ(rd_submit(stream_remote, RD_ARGS(rd_arg_bytes(&nitems, sizeof(nitems))), &o, &st), 0);
  for (long i = 0; i < 10; i++) CHECK_EQ(take_block(st, i), c);
  rd_task_opts_init(&o);
  o.strategy = RD_STRATEGY_SPREAD;
  enum { N = 60 };
  rd_ref refs[N];
  uint32_t ms = 300;
  for (uint32_t i = 0; i < N; i++) CHECK_EQ(rd_submit(slow_where, RD_ARGS(rd_arg_bytes(&ms, 4), rd_arg_bytes(&i, 4)), &o, &refs[i]), 0);
  usleep(700 * 1000);
  CHECK_EQ(kill(pid, SIGKILL), 0);
  fprintf(stderr, "killed node %u (pid %d)\n", c, pid);
  int on_c = 0;
  for (int i = 0; i < N; i++) {
    rd_buf b;
    int e = rd_get(&refs[i], 1, &b, 120000);
    if (e != 0) fprintf(stderr, "task %d: %s\n", i, rd_err_name(e));
    CHECK_EQ(e, 0);
    uint32_t v[2];
    memcpy(v, b.data, 8);
    CHECK_EQ(v[1], i);
    on_c += v[0] == c;
    rd_buf_release(&b);
    rd_ref_release(refs[i]);
  }
  printf("all %d tasks done; %d finished on node %u before it died\n", N, on_c, c);
  uint64_t last = c;
  for (long i = 10; i < nitems; i++) last = take_block(st, i);
  rd_ref it;
  CHECK_EQ(rd_stream_next(st, &it, 60000), RD_EEND);
  rd_ref_release(st);
  printf("stream: 10 items from node %u before it died, the other %ld in order from node %llu\n", c, nitems - 10,
         (unsigned long long)last);
  CHECK(last != c);
  /* pinned to the dead node: a clear error */
  o.strategy = RD_STRATEGY_NODE_AFFINITY;
  o.node = c;
  o.soft = 0;
  rd_ref r;
  CHECK_EQ(rd_submit(where, RD_NO_ARGS, &o, &r), 0);
  rd_buf b;
  int e = rd_get(&r, 1, &b, 60000);
  printf("affinity to the dead node: %s\n", rd_err_name(e));
  CHECK(e == RD_ENODE_DIED || e == RD_EINFEASIBLE);
  rd_buf_release(&b);
  rd_ref_release(r);
  rd_shutdown();
  return 0;
}


/* ------------------------------------------------------------ actors */

typedef struct tally {
  long value;
  rd_ref kept;   /* Tally.keep: a borrowed ref kept past the call */
  int has_kept;
} tally;

static int tally_init(rd_call *call, void **state) {
  (void)call;
  tally *t = calloc(1, sizeof(*t));
  if (!t) return rd_call_fail(call, "out of memory");
  *state = t;
  return 0;
}

static void tally_fini(void *state) { free(state); }

RD_ACTOR_CLASS(Tally, tally_init, tally_fini)

RD_ACTOR_METHOD(Tally, add) {
  tally *t = state;
  t->value++;
  return rd_return_bytes(call, 0, &t->value, sizeof(t->value));
}

/* Ends the actor after this call (rd_actor_exit). */
RD_ACTOR_METHOD(Tally, bye) {
  (void)state;
  long r = rd_actor_exit(call);
  return rd_return_bytes(call, 0, &r, sizeof(r));
}

RD_ACTOR_METHOD(Tally, crash) {
  (void)state;
  (void)call;
  kill(getpid(), SIGKILL);
  return 0;
}

RD_ACTOR_METHOD(Tally, exe_size) {
  (void)state;
  struct stat st;
  if (stat("/proc/self/exe", &st) != 0) return rd_call_fail(call, "stat /proc/self/exe failed");
  uint64_t v = (uint64_t)st.st_size;
  return rd_return_bytes(call, 0, &v, sizeof(v));
}

/* Keeps borrowed argument 0 for later calls. */
RD_ACTOR_METHOD(Tally, keep) {
  tally *t = state;
  if (t->has_kept || rd_call_arg_ref(call, 0, &t->kept) != 0) return rd_call_fail(call, "keep");
  t->has_kept = 1;
  return rd_return_bytes(call, 0, "", 0);
}

/* {error, hash} of the ref it keeps. */
RD_ACTOR_METHOD(Tally, read_kept) {
  tally *t = state;
  uint64_t out[2];
  if (!t->has_kept) return rd_call_fail(call, "nothing kept");
  hash_ref(t->kept, out);
  return rd_return_bytes(call, 0, out, sizeof(out));
}

/* Waits (at most 120 s) for the file named by argument 0; echoes its length. */
static int wait_for_file(rd_call *call) {
  rd_buf a;
  char path[512];
  if (rd_arg(call, 0, &a) != 0 || a.size == 0 || a.size >= sizeof(path)) return rd_call_fail(call, "bad path");
  memcpy(path, a.data, a.size);
  path[a.size] = 0;
  for (int i = 0; i < 2400 && access(path, F_OK) != 0; i++) usleep(50000);
  uint32_t n = (uint32_t)a.size;
  return rd_return_bytes(call, 0, &n, sizeof(n));
}

RD_REMOTE(wait_file) { return wait_for_file(call); }

RD_ACTOR_METHOD(Tally, wait_file) {
  (void)state;
  return wait_for_file(call);
}

/* Sleeps arg0 ms (uint32) in the default group. */
RD_ACTOR_METHOD(Tally, nap) {
  (void)state;
  rd_buf a;
  uint32_t ms = 0;
  if (rd_arg(call, 0, &a) == 0 && a.size == 4) memcpy(&ms, a.data, 4);
  usleep(ms * 1000u);
  return rd_return_bytes(call, 0, &ms, sizeof(ms));
}

/* twist() as an actor call: its big result stays in its host's store. */
RD_ACTOR_METHOD(Tally, twist) {
  (void)state;
  return twist(call);
}

/* The length of argument 0. */
RD_REMOTE(arg_len) {
  rd_buf a;
  if (rd_arg(call, 0, &a) != 0) return rd_call_fail(call, "no arg");
  uint32_t n = (uint32_t)a.size;
  return rd_return_bytes(call, 0, &n, sizeof(n));
}

/* A member of a collective group across the nodes (t_collective). */
typedef struct co_spec {
  char group[32];
  int world, rank, tcp, pad;
} co_spec;

/* Join, all-reduce 12 MiB of floats, broadcast 1 MiB from the last rank
 * and send 1 MiB around the ranks with rd_send/rd_recv (each adds 1 to
 * every byte), checking all three: 0 with the sum's hash in *hash, or the
 * failing code. */
static int co_play(const co_spec *s, uint64_t *hash) {
  setenv("RAYDIST_COLLECTIVE_TCP", s->tcp ? "1" : "0", 1);
  rd_collective *g;
  int r = rd_collective_join(s->group, s->world, s->rank, 60000, &g);
  if (r != 0) return r;
  size_t n = 3u << 20, nb = 1u << 20;
  float *f = malloc(n * sizeof(float));
  uint8_t *b = calloc(nb, 1);
  if (!f || !b) r = RD_ENOMEM;
  for (size_t i = 0; r == 0 && i < n; i++) f[i] = (float)((i % 1000) * (size_t)(s->rank + 1));
  if (r == 0) r = rd_allreduce(g, f, n, RD_FLOAT32, RD_SUM);
  for (size_t i = 0; r == 0 && i < n; i++)
    if (f[i] != (float)((i % 1000) * (size_t)(s->world * (s->world + 1) / 2))) r = RD_EPROTO;
  if (r == 0) *hash = fnv((const uint8_t *)f, n * sizeof(float));
  if (r == 0 && s->rank == s->world - 1)
    for (size_t i = 0; i < nb; i++) b[i] = (uint8_t)(i * 7 + 1);
  if (r == 0) r = rd_broadcast(g, b, nb, s->world - 1);
  for (size_t i = 0; r == 0 && i < nb; i++)
    if (b[i] != (uint8_t)(i * 7 + 1)) r = RD_EPROTO;
  int next = (s->rank + 1) % s->world, prev = (s->rank + s->world - 1) % s->world;
  if (r == 0 && s->rank == 0) r = rd_send(g, b, nb, next);
  if (r == 0) r = rd_recv(g, b, nb, prev);
  size_t added = (size_t)(s->rank ? s->rank - 1 : s->world - 1);   /* by the ranks it has been through */
  for (size_t i = 0; r == 0 && i < nb; i++)
    if (b[i] != (uint8_t)(i * 7 + 1 + added)) r = RD_EPROTO;
  if (r == 0 && s->rank != 0) {
    for (size_t i = 0; i < nb; i++) b[i]++;
    r = rd_send(g, b, nb, next);
  }
  free(f);
  free(b);
  rd_collective_leave(g);
  return r;
}

/* {hash of the all-reduced sum, this node's index}. */
RD_ACTOR_METHOD(Tally, collective) {
  (void)state;
  co_spec s;
  if (rd_arg_copy(call, 0, &s, sizeof(s)) != 0) return rd_call_fail(call, "bad spec");
  uint64_t out[2] = {0, 0};
  int r = co_play(&s, &out[0]);
  if (r != 0) return rd_call_fail(call, "collective rank %d: %s", s.rank, rd_err_name(r));
  rd_node_info ni;
  if (rd_node_info_get(&ni) == 0) out[1] = ni.node_index;
  return rd_return_bytes(call, 0, out, sizeof(out));
}

/* Hashes borrowed arguments 0 and 1: {error, hash} each, then its node. */
RD_ACTOR_METHOD(Tally, hash_borrowed) {
  (void)state;
  uint64_t out[5] = {0, 0, 0, 0, 0};
  for (size_t i = 0; i < 2; i++) {
    rd_ref r;
    if (rd_call_arg_ref(call, i, &r) != 0) return rd_call_fail(call, "rd_call_arg_ref(%zu)", i);
    hash_ref(r, &out[2 * i]);
    rd_ref_release(r);
  }
  rd_node_info ni;
  if (rd_node_info_get(&ni) == 0) out[4] = ni.node_index;
  return rd_return_bytes(call, 0, out, sizeof(out));
}

/* Streams arg0 items: {node, index} then a pattern of the index, 2 MiB for
 * every 4th (in the store), 64 bytes otherwise. */
static int stream_blocks(rd_call *call, long n) {
  rd_node_info ni;
  if (rd_node_info_get(&ni) != 0) return rd_call_fail(call, "rd_node_info_get failed");
  uint8_t *buf = malloc(2u << 20);
  if (!buf) return rd_call_fail(call, "out of memory");
  for (long i = 0; i < n; i++) {
    size_t size = i % 4 == 3 ? 2u << 20 : 64;
    uint64_t head[2] = {ni.node_index, (uint64_t)i};
    memcpy(buf, head, sizeof(head));
    for (size_t k = sizeof(head); k < size; k++) buf[k] = (uint8_t)(i + (long)k);
    int r = rd_yield(call, buf, size);
    if (r != 0) {
      free(buf);
      return rd_call_fail(call, "rd_yield %ld: %s", i, rd_err_name(r));
    }
  }
  free(buf);
  return 0;
}

RD_REMOTE(stream_remote) {
  rd_buf a;
  long n = 0;
  if (rd_arg(call, 0, &a) == 0 && a.size == sizeof(n)) memcpy(&n, a.data, sizeof(n));
  return stream_blocks(call, n);
}

RD_ACTOR_METHOD(Tally, stream) {
  (void)state;
  rd_buf a;
  long n = 0;
  if (rd_arg(call, 0, &a) == 0 && a.size == sizeof(n)) memcpy(&n, a.data, sizeof(n));
  return stream_blocks(call, n);
}

/* Takes every item of a stream_blocks stream: all made on one node, other
 * than this one, in order, intact.  Returns that node. */
static uint64_t take_blocks(rd_ref s, long n) {
  rd_node_info ni;
  CHECK_EQ(rd_node_info_get(&ni), 0);
  uint64_t node = 0;
  rd_ref it;
  for (long i = 0; i < n; i++) {
    CHECK_EQ(rd_stream_next(s, &it, 60000), 0);
    rd_buf b;
    CHECK_EQ(rd_get(&it, 1, &b, 60000), 0);
    CHECK_EQ(b.size, i % 4 == 3 ? 2u << 20 : 64);
    uint64_t head[2];
    memcpy(head, b.data, sizeof(head));
    CHECK_EQ(head[1], i);
    CHECK(head[0] != ni.node_index);
    if (i == 0) node = head[0];
    CHECK_EQ(head[0], node);
    const uint8_t *p = b.data;
    for (size_t k = sizeof(head); k < b.size; k += 997) CHECK_EQ(p[k], (uint8_t)(i + (long)k));
    rd_buf_release(&b);
    rd_ref_release(it);
  }
  CHECK_EQ(rd_stream_next(s, &it, 60000), RD_EEND);
  rd_ref_release(s);
  return node;
}

/* Streaming across nodes: a task on b and an actor method on c stream
 * small items and 2 MiB store items to this driver (on a) over the bridged
 * lease and actor sockets; the stores of b and c are empty afterwards. */
static int t_stream(void) {
  join();
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_b=1";
  o.num_returns = RD_STREAMING;
  o.stream_window = 8;
  long n = 40;
  rd_ref s;
  CHECK_EQ(rd_submit(stream_remote, RD_ARGS(rd_arg_bytes(&n, sizeof(n))), &o, &s), 0);
  uint64_t on_b = take_blocks(s, n);
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.resources = "only_c=1";
  rd_actor a;
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &a), 0);
  rd_task_opts_init(&o);
  o.num_returns = RD_STREAMING;
  CHECK_EQ(rd_actor_call(a, Tally_stream, RD_ARGS(rd_arg_bytes(&n, sizeof(n))), &o, &s), 0);
  uint64_t on_c = take_blocks(s, n);
  printf("streamed %ld items from node %llu (task) and %ld from node %llu (actor)\n", n, (unsigned long long)on_b, n,
         (unsigned long long)on_c);
  CHECK(on_b != on_c);
  CHECK_EQ(rd_actor_kill(a, 1), 0);
  stores_bc_empty("afterwards");
  rd_shutdown();
  return 0;
}

/* A collective group of the driver (on a) and actors on b and c: the
 * all-reduce and broadcast agree, between processes of three nodes, over
 * Unix sockets (one host) and then over TCP between the nodes' IPs. */
static int t_collective(void) {
  join();
  rd_actor a[3];
  const char *res[3] = {NULL, "only_b=1", "only_c=1"};
  for (int k = 1; k < 3; k++) {
    rd_actor_opts ao;
    rd_actor_opts_init(&ao);
    ao.resources = res[k];
    CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &a[k]), 0);
  }
  rd_node_info ni;
  CHECK_EQ(rd_node_info_get(&ni), 0);
  for (int tcp = 0; tcp < 2; tcp++) {
    rd_ref refs[3];
    co_spec s;
    memset(&s, 0, sizeof(s));
    snprintf(s.group, sizeof(s.group), "across-%d", tcp);
    s.world = 3;
    s.tcp = tcp;
    for (int k = 1; k < 3; k++) {
      s.rank = k;
      CHECK_EQ(rd_actor_call(a[k], Tally_collective, RD_ARGS(rd_arg_bytes(&s, sizeof(s))), NULL, &refs[k]), 0);
    }
    s.rank = 0;
    uint64_t mine = 0;
    CHECK_EQ(co_play(&s, &mine), 0);
    uint64_t nodes[3] = {ni.node_index, 0, 0};
    for (int k = 1; k < 3; k++) {
      rd_buf b;
      int e = rd_get(&refs[k], 1, &b, 60000);
      if (e != 0) {
        fprintf(stderr, "member %d: %s: %.*s\n", k, rd_err_name(e), (int)b.size, (const char *)b.data);
        exit(1);
      }
      uint64_t out[2];
      CHECK_EQ(b.size, sizeof(out));
      memcpy(out, b.data, sizeof(out));
      rd_buf_release(&b);
      rd_ref_release(refs[k]);
      CHECK(out[0] == mine);
      nodes[k] = out[1];
    }
    printf("collective over %s: members on nodes %llu %llu %llu agree\n", tcp ? "TCP" : "Unix sockets",
           (unsigned long long)nodes[0], (unsigned long long)nodes[1], (unsigned long long)nodes[2]);
    CHECK(nodes[0] != nodes[1] && nodes[1] != nodes[2] && nodes[0] != nodes[2]);
  }
  for (int k = 1; k < 3; k++) CHECK_EQ(rd_actor_kill(a[k], 1), 0);
  rd_shutdown();
  return 0;
}

/* An actor on c borrows from this driver (on a) a store object held on c and
 * a result still being made on b: its questions cross the link over the
 * bridged actor socket. */
static void borrow_on_actor(rd_ref store_on_c) {
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.resources = "only_c=1";
  rd_actor a;
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &a), 0);
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_b=1";
  uint32_t args[2] = {500, 4242};
  rd_ref pending, out;
  CHECK_EQ(rd_submit(slow_where, RD_ARGS(rd_arg_bytes(&args[0], 4), rd_arg_bytes(&args[1], 4)), &o, &pending), 0);
  CHECK_EQ(rd_actor_call(a, Tally_hash_borrowed, RD_ARGS(rd_arg_borrow(store_on_c), rd_arg_borrow(pending)), NULL, &out), 0);
  uint64_t res[5];
  get_exact(out, "hash_borrowed", 60000, res, sizeof(res));
  rd_buf b;
  rd_buf bs, bp;
  CHECK_EQ(rd_get(&store_on_c, 1, &bs, 60000), 0);
  CHECK_EQ(rd_get(&pending, 1, &bp, 60000), 0);
  printf("actor on node %llu: errors %lld %lld\n", (unsigned long long)res[4], (long long)res[0], (long long)res[2]);
  CHECK_EQ(res[0], 0);
  CHECK(res[1] == fnv(bs.data, bs.size));
  CHECK_EQ(res[2], 0);
  CHECK(res[3] == fnv(bp.data, bp.size));
  rd_buf_release(&bs);
  rd_buf_release(&bp);
  rd_ref_release(out);
  rd_ref_release(pending);
  /* it keeps a 4 MiB put of this driver past the call, and reads it after
   * the driver has let go of its own ref (the hold crossed the link) */
  size_t n = 4u << 20;
  uint8_t *d = malloc(n);
  CHECK(d);
  for (size_t i = 0; i < n; i++) d[i] = (uint8_t)(i * 31 + 3);
  rd_ref mine, r;
  CHECK_EQ(rd_put(d, n, &mine), 0);
  CHECK_EQ(rd_actor_call(a, Tally_keep, RD_ARGS(rd_arg_borrow(mine)), NULL, &r), 0);
  CHECK_EQ(rd_get(&r, 1, &b, 60000), 0);
  rd_buf_release(&b);
  rd_ref_release(r);
  rd_ref_release(mine);
  usleep(300000);
  CHECK_EQ(rd_actor_call(a, Tally_read_kept, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(rd_get(&r, 1, &b, 60000), 0);
  CHECK_EQ(b.size, sizeof(res[0]) * 2);
  memcpy(res, b.data, sizeof(res[0]) * 2);
  rd_buf_release(&b);
  rd_ref_release(r);
  printf("actor on node c read a ref it kept past its call: error %lld\n", (long long)res[0]);
  CHECK_EQ(res[0], 0);
  CHECK(res[1] == fnv(d, n));
  free(d);
  CHECK_EQ(rd_actor_kill(a, 1), 0);
}

/* Where the actor runs, and how often it was restarted. */
RD_ACTOR_METHOD(Tally, where) {
  (void)state;
  rd_node_info ni;
  if (rd_node_info_get(&ni) != 0) return rd_call_fail(call, "rd_node_info_get failed");
  long v[2] = {(long)ni.node_index, rd_call_actor_restarts(call)};
  return rd_return_bytes(call, 0, v, sizeof(v));
}

/* Make a group named by argument 0 from inside the actor. */
RD_ACTOR_METHOD(Tally, make_pg) {
  (void)state;
  rd_buf a;
  char name[64];
  if (rd_arg(call, 0, &a) != 0 || a.size == 0 || a.size >= sizeof(name)) return rd_call_fail(call, "args");
  memcpy(name, a.data, a.size);
  name[a.size] = 0;
  rd_bundle b = {.num_cpus = 0.5};
  rd_pg pg;
  int r = rd_pg_create(&b, 1, RD_PG_PACK, name, &pg);
  if (r != 0) return rd_call_fail(call, "create: %s", rd_err_name(r));
  return rd_return_bytes(call, 0, &pg.id, sizeof(pg.id));
}

/* On another node: find the named actor through the GCS and call it; then
 * try to create another actor of that name (refused cluster-wide). */
RD_REMOTE(use_named_actor) {
  rd_actor a;
  int e = rd_actor_get("tally-main", &a);
  if (e != 0) return rd_call_fail(call, "rd_actor_get: %s", rd_err_name(e));
  rd_ref r;
  if (rd_actor_call(a, Tally_add, RD_NO_ARGS, NULL, &r) != 0) return rd_call_fail(call, "call failed");
  rd_buf b;
  e = rd_get(&r, 1, &b, 60000);
  if (e != 0) return rd_call_fail(call, "get: %s", rd_err_name(e));
  long v[2];
  memcpy(&v[0], b.data, sizeof(long));
  rd_buf_release(&b);
  rd_ref_release(r);
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.name = "tally-main";
  rd_actor dup;
  long out[3] = {v[0], rd_actor_create(Tally, RD_NO_ARGS, &ao, &dup), rd_actor_kill(a, 1)};   /* kill from afar */
  return rd_return_bytes(call, 0, out, sizeof(out));
}

/* A task on a third node calls the actor through the handle it was given. */
RD_REMOTE(call_actor_from_afar) {
  rd_actor a;
  if (rd_call_arg_actor(call, 0, &a) != 0) return rd_call_fail(call, "no actor handle");
  rd_ref r;
  if (rd_actor_call(a, Tally_add, RD_NO_ARGS, NULL, &r) != 0) return rd_call_fail(call, "call failed");
  rd_buf b;
  int e = rd_get(&r, 1, &b, 60000);
  if (e != 0) return rd_call_fail(call, "get: %s", rd_err_name(e));
  long v;
  memcpy(&v, b.data, sizeof(v));
  rd_buf_release(&b);
  rd_ref_release(r);
  rd_node_info ni;
  if (rd_node_info_get(&ni) != 0) return rd_call_fail(call, "rd_node_info_get failed");
  long out[2] = {v, (long)ni.node_index};
  return rd_return_bytes(call, 0, out, sizeof(out));
}

/* Two 300 ms naps and an add on a, an actor with max_pending_calls 2 (after
 * a first call answered when warm); their return codes. */
static int pending_probe(rd_call *call, rd_actor a, int warm) {
  rd_ref r, q[3];
  rd_buf b;
  if (warm && (rd_actor_call(a, Tally_add, RD_NO_ARGS, NULL, &r) != 0 || rd_get(&r, 1, &b, 60000) != 0))
    return rd_call_fail(call, "first call");
  if (warm) {
    rd_buf_release(&b);
    rd_ref_release(r);
  }
  uint32_t ms = 300;
  long rc[3];
  for (int i = 0; i < 3; i++)
    rc[i] = i < 2 ? rd_actor_call(a, Tally_nap, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms))), NULL, &q[i])
                  : rd_actor_call(a, Tally_add, RD_NO_ARGS, NULL, &q[i]);
  for (int i = 0; i < 3; i++) {
    if (rc[i] != 0) continue;
    if (rd_get(&q[i], 1, &b, 60000) == 0) rd_buf_release(&b);
    rd_ref_release(q[i]);
  }
  return rd_return_bytes(call, 0, rc, sizeof(rc));
}

/* A task on a third node, given a handle to an actor with max_pending_calls
 * 2: once connected, two naps and an add (the add's: RD_EAGAIN, the limit
 * told by the actor's host over the node link). */
RD_REMOTE(probe_pending) {
  rd_actor a;
  if (rd_call_arg_actor(call, 0, &a) != 0) return rd_call_fail(call, "no actor handle");
  return pending_probe(call, a, 1);
}

/* The same with a handle got by name (the GCS's record says the limit),
 * calling at once: the add is refused before any connection. */
RD_REMOTE(probe_pending_named) {
  rd_actor a;
  if (rd_actor_get("capped_b", &a) != 0) return rd_call_fail(call, "rd_actor_get");
  return pending_probe(call, a, 0);
}

/* Where actor a runs and how often it restarted (Tally_where), within ms;
 * an error (RD_ETIMEDOUT: not started yet) leaves *out alone. */
static int actor_where_in(rd_actor a, int ms, long out[2]) {
  rd_ref r;
  CHECK_EQ(rd_actor_call(a, Tally_where, RD_NO_ARGS, NULL, &r), 0);
  rd_buf b;
  int e = rd_get(&r, 1, &b, ms);
  if (e == 0) memcpy(out, b.data, 2 * sizeof(long));
  else if (e != RD_ETIMEDOUT) fprintf(stderr, "where: %s: %.*s\n", rd_err_name(e), (int)b.size, (const char *)b.data);
  if (e != RD_ETIMEDOUT) rd_buf_release(&b);   /* filled unless it timed out */
  rd_ref_release(r);
  return e;
}

static void actor_where(rd_actor a, long out[2]) { CHECK_EQ(actor_where_in(a, 60000, out), 0); }

static long actor_add(rd_actor a) {
  rd_ref r;
  CHECK_EQ(rd_actor_call(a, Tally_add, RD_NO_ARGS, NULL, &r), 0);
  rd_buf b;
  int e = rd_get(&r, 1, &b, 60000);
  if (e != 0) fprintf(stderr, "add: %s: %.*s\n", rd_err_name(e), (int)b.size, (const char *)b.data);
  CHECK_EQ(e, 0);
  long v;
  memcpy(&v, b.data, sizeof(v));
  rd_buf_release(&b);
  rd_ref_release(r);
  return v;
}

/* Run fn(name) with o; its size-byte result goes to out. */
static void call_named(const rd_function *fn, const char *name, const rd_task_opts *o, void *out, size_t size) {
  rd_ref r;
  rd_buf buf;
  CHECK_EQ(rd_submit(fn, RD_ARGS(rd_arg_bytes(name, strlen(name))), o, &r), 0);
  CHECK_EQ(rd_get(&r, 1, &buf, 60000), 0);
  CHECK_EQ(buf.size, size);
  memcpy(out, buf.data, size);
  rd_buf_release(&buf);
  rd_ref_release(r);
}

/* Argument 0 of a call_named task, as a string. */
static int arg_name(rd_call *call, char *name, size_t cap) {
  rd_buf a;
  if (rd_arg(call, 0, &a) != 0 || a.size >= cap) return -1;
  memcpy(name, a.data, a.size);
  name[a.size] = 0;
  return 0;
}

/* On another node: what rd_actor_get of the name in argument 0 returns. */
RD_REMOTE(actor_get_code) {
  char name[64];
  if (arg_name(call, name, sizeof(name)) != 0) return rd_call_fail(call, "name");
  rd_actor x;
  int32_t e = rd_actor_get(name, &x);
  return rd_return_bytes(call, 0, &e, sizeof(e));
}

/* An actor that needs only_b runs on node b; calls from the driver keep
 * their order; a task on node c calls it through its handle; a kill for
 * good ends it with RD_EACTOR_DIED. */
static int t_actors(void) {
  join();
  rd_node_info ni;
  CHECK_EQ(rd_node_info_get(&ni), 0);
  uint32_t b = run_where("only_b=1"), c = run_where("only_c=1");
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.resources = "only_b=1";
  rd_actor a;
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &a), 0);
  long w[2];
  actor_where(a, w);
  printf("actor on node %ld (driver on %u)\n", w[0], ni.node_index);
  CHECK_EQ(w[0], b);
  enum { N = 100 };
  rd_ref refs[N];
  for (int i = 0; i < N; i++) CHECK_EQ(rd_actor_call(a, Tally_add, RD_NO_ARGS, NULL, &refs[i]), 0);
  for (int i = 0; i < N; i++) {
    rd_buf bb;
    CHECK_EQ(rd_get(&refs[i], 1, &bb, 60000), 0);
    long v;
    memcpy(&v, bb.data, sizeof(v));
    CHECK_EQ(v, i + 1);
    rd_buf_release(&bb);
    rd_ref_release(refs[i]);
  }
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_c=1";
  rd_ref r;
  /* max_pending_calls of an actor on b, enforced by a handle on c */
  ao.max_pending_calls = 2;
  ao.resources = NULL;   /* a holds all of b's only_b */
  ao.strategy = RD_STRATEGY_NODE_AFFINITY;
  ao.node = b;
  ao.name = "capped_b";
  rd_actor capped;
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &capped), 0);
  ao.name = NULL;
  for (int named = 0; named < 2; named++) {
    if (named) CHECK_EQ(rd_submit(probe_pending_named, RD_NO_ARGS, &o, &r), 0);
    else CHECK_EQ(rd_submit(probe_pending, RD_ARGS(rd_arg_actor(&capped)), &o, &r), 0);
    long prc[3];
    get_exact(r, "probe_pending", 60000, prc, sizeof(prc));
    printf("a handle on node c%s to an actor on b with max_pending_calls 2: %s %s %s\n", named ? " (by name)" : "",
           rd_err_name((int)prc[0]), rd_err_name((int)prc[1]), rd_err_name((int)prc[2]));
    CHECK(prc[0] == 0 && prc[1] == 0 && prc[2] == RD_EAGAIN);
    rd_ref_release(r);
  }
  CHECK_EQ(rd_actor_kill(capped, 1), 0);
  /* rd_actor_list_named from the head finds an actor named on node c (the
   * GCS's table), and not once it is dead */
  rd_actor_opts_init(&ao);
  ao.resources = "only_c=0.1";
  ao.name = "listed_on_c";
  rd_actor listed;
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &listed), 0);
  rd_actor_name *names;
  size_t nn;
  CHECK_EQ(rd_actor_list_named(0, &names, &nn), 0);
  int found = 0;
  for (size_t i = 0; i < nn; i++) found += !strcmp(names[i].name, "listed_on_c") && !*names[i].ns;
  rd_actor_names_free(names);
  CHECK_EQ(found, 1);
  CHECK_EQ(rd_actor_kill(listed, 1), 0);
  CHECK_EQ(rd_actor_list_named(1, &names, &nn), 0);
  found = 0;
  for (size_t i = 0; i < nn; i++) found += !strcmp(names[i].name, "listed_on_c");
  rd_actor_names_free(names);
  CHECK_EQ(found, 0);
  CHECK_EQ(rd_submit(call_actor_from_afar, RD_ARGS(rd_arg_actor(&a)), &o, &r), 0);
  rd_buf bb;
  int e = rd_get(&r, 1, &bb, 60000);
  if (e != 0) fprintf(stderr, "afar: %s: %.*s\n", rd_err_name(e), (int)bb.size, (const char *)bb.data);
  CHECK_EQ(e, 0);
  long v[2];
  memcpy(v, bb.data, sizeof(v));
  rd_buf_release(&bb);
  rd_ref_release(r);
  printf("a task on node %ld called it: %ld\n", v[1], v[0]);
  CHECK_EQ(v[1], c);
  CHECK_EQ(v[0], N + 1);
  CHECK_EQ(actor_add(a), N + 2);
  CHECK_EQ(rd_actor_kill(a, 1), 0);
  CHECK_EQ(rd_actor_call(a, Tally_add, RD_NO_ARGS, NULL, &r), 0);
  e = rd_get(&r, 1, &bb, 60000);
  CHECK_EQ(e, RD_EACTOR_DIED);
  rd_buf_release(&bb);
  rd_ref_release(r);
  /* names are cluster-wide: found from node c, taken there too */
  rd_actor_opts_init(&ao);
  ao.resources = "only_b=1";
  ao.name = "tally-main";
  rd_actor named;
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &named), 0);
  CHECK_EQ(actor_add(named), 1);
  o.resources = "only_c=1";
  CHECK_EQ(rd_submit(use_named_actor, RD_NO_ARGS, &o, &r), 0);
  e = rd_get(&r, 1, &bb, 60000);
  if (e != 0) fprintf(stderr, "named: %s: %.*s\n", rd_err_name(e), (int)bb.size, (const char *)bb.data);
  CHECK_EQ(e, 0);
  long nv[3];
  memcpy(nv, bb.data, sizeof(nv));
  rd_buf_release(&bb);
  rd_ref_release(r);
  printf("named actor from node %u: value %ld, duplicate create %s, kill %s\n", c, nv[0], rd_err_name((int)nv[1]),
         rd_err_name((int)nv[2]));
  CHECK_EQ(nv[0], 2);
  CHECK_EQ(nv[1], RD_EEXIST);
  CHECK_EQ(nv[2], 0);   /* killed for good from node c */
  CHECK_EQ(rd_actor_call(named, Tally_add, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(rd_get(&r, 1, &bb, 60000), RD_EACTOR_DIED);
  rd_buf_release(&bb);
  rd_ref_release(r);
  /* once rd_actor_kill has returned, the name is free cluster-wide: it is
   * taken again at once, and after the next kill node c no longer finds it
   * (the kill is answered after the GCS has the death) */
  for (int i = 0; i < 10; i++) {
    CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &named), 0);
    int32_t found;
    call_named(actor_get_code, "tally-main", &o, &found, sizeof(found));
    CHECK_EQ(found, 0);
    CHECK_EQ(rd_actor_kill(named, 1), 0);
    call_named(actor_get_code, "tally-main", &o, &found, sizeof(found));
    CHECK_EQ(found, RD_ENOENT);
  }
  /* a named actor that crashes with no restarts left, on this node (even
   * rounds) or on node b (odd): its caller re-creates it under the name at
   * once, and node c finds the new one.  The node hosting it reads the dead
   * worker's end before the caller's socket closes (on b, its death goes
   * over the link before that close), and the driver's node asks the GCS
   * for the name again once the death is written. */
  rd_actor_opts_init(&ao);
  ao.strategy = RD_STRATEGY_NODE_AFFINITY;
  ao.node = ni.node_index;
  ao.name = "tally-crash";
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &named), 0);
  for (int i = 0; i < 10; i++) {
    ao.node = i % 2 ? b : ni.node_index;
    CHECK_EQ(rd_actor_call(named, Tally_crash, RD_NO_ARGS, NULL, &r), 0);
    CHECK_EQ(rd_get(&r, 1, &bb, 60000), RD_EACTOR_DIED);
    rd_buf_release(&bb);
    rd_ref_release(r);
    e = rd_actor_create(Tally, RD_NO_ARGS, &ao, &named);
    if (e != 0) fprintf(stderr, "round %d: re-creating 'tally-crash': %s\n", i, rd_err_name(e));
    CHECK_EQ(e, 0);
    int32_t found;
    call_named(actor_get_code, "tally-crash", &o, &found, sizeof(found));
    CHECK_EQ(found, 0);
    CHECK_EQ(actor_add(named), 1);
  }
  CHECK_EQ(rd_actor_kill(named, 1), 0);
  /* placement strategies for actors: affinity, then SPREAD over the 3 nodes */
  rd_actor_opts_init(&ao);
  ao.strategy = RD_STRATEGY_NODE_AFFINITY;
  ao.node = c;
  rd_actor pinned;
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &pinned), 0);
  actor_where(pinned, w);
  CHECK_EQ(w[0], c);
  CHECK_EQ(rd_actor_kill(pinned, 1), 0);
  ao.node = 4000;
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &pinned), RD_ENODE_DIED);
  rd_actor_opts_init(&ao);
  ao.strategy = RD_STRATEGY_SPREAD;
  int seen[4096] = {0}, distinct = 0;
  rd_actor spread[3];
  for (int i = 0; i < 3; i++) CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &spread[i]), 0);
  for (int i = 0; i < 3; i++) {
    actor_where(spread[i], w);
    if (!seen[w[0]]++) distinct++;
    CHECK_EQ(rd_actor_kill(spread[i], 1), 0);
  }
  printf("3 SPREAD actors on %d nodes\n", distinct);
  CHECK_EQ(distinct, 3);
  /* no node has it: RD_EINFEASIBLE at create */
  rd_actor_opts_init(&ao);
  ao.resources = "nowhere=1";
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &a), RD_EINFEASIBLE);
  rd_shutdown();
  return 0;
}

/* Tally.twist on actor a with argument in, with the call's own
 * max_task_retries (RD_ACTOR_DEFAULT: the actor's): {hash, node} of the
 * call, its big result in out[1]. */
static void twist_call(rd_actor a, rd_ref in, rd_ref out[2], uint64_t rep[2], int retries) {
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.num_returns = 2;
  o.max_task_retries = retries;
  CHECK_EQ(rd_actor_call(a, Tally_twist, RD_ARGS(rd_arg_ref(in)), &o, out), 0);
  rd_buf b;
  CHECK_EQ(rd_get(&out[0], 1, &b, 60000), 0);
  CHECK_EQ(b.size, 2 * sizeof(uint64_t));
  memcpy(rep, b.data, 2 * sizeof(uint64_t));
  rd_buf_release(&b);
}

/* The node hosting an actor dies: it restarts on another node that has the
 * resource (within max_restarts) and answers calls again.  The big result
 * of a call it made there (in that node's store) is made again by running
 * the call on the new process (max_task_retries 2); those of actors whose
 * calls may not run again (max_task_retries 0), of a call of the first
 * actor whose own max_task_retries is 0, or of actors that cannot restart,
 * fail. */
static int t_actor_node_death(void) {
  join();
  size_t n = 2u << 20;
  void *p;
  rd_ref in;
  CHECK_EQ(rd_put_begin(n, &p, &in), 0);
  for (size_t i = 0; i < n; i++) ((uint8_t *)p)[i] = (uint8_t)(i * 13 + 5);
  CHECK_EQ(rd_put_seal(in), 0);
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.resources = "pool=1";
  ao.max_restarts = 1;
  ao.max_task_retries = 2;
  rd_actor a;
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &a), 0);
  long w[2];
  actor_where(a, w);
  CHECK_EQ(actor_add(a), 1);
  const char *ip = NULL;
  uint32_t b = run_where("only_b=1"), c = run_where("only_c=1");
  if ((uint32_t)w[0] == b) ip = "127.0.0.2";
  if ((uint32_t)w[0] == c) ip = "127.0.0.3";
  CHECK(ip != NULL);
  rd_ref tw[2], ltw[2], dtw[2];
  uint64_t rep[2];
  twist_call(a, in, tw, rep, RD_ACTOR_DEFAULT);
  CHECK_EQ(rep[1], (uint64_t)w[0]);
  /* a call of the same actor whose own max_task_retries is 0: not kept */
  rd_ref ntw[2];
  twist_call(a, in, ntw, rep, 0);
  /* and one beside it with no restarts or retries, running a call as the
   * node dies: the call says the node's word */
  rd_actor_opts_init(&ao);
  ao.strategy = RD_STRATEGY_NODE_AFFINITY;
  ao.node = (uint32_t)w[0];
  rd_actor lone;
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &lone), 0);
  long wl[2];
  actor_where(lone, wl);
  CHECK_EQ(wl[0], w[0]);
  twist_call(lone, in, ltw, rep, RD_ACTOR_DEFAULT);
  CHECK_EQ(rep[1], (uint64_t)w[0]);
  /* and one whose calls may run again but which cannot restart */
  ao.max_task_retries = 1;
  rd_actor doomed;
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &doomed), 0);
  twist_call(doomed, in, dtw, rep, RD_ACTOR_DEFAULT);
  CHECK_EQ(rep[1], (uint64_t)w[0]);
  const char never[] = "/nonexistent/raydist-never";
  rd_ref running;
  CHECK_EQ(rd_actor_call(lone, Tally_wait_file, RD_ARGS(rd_arg_bytes(never, sizeof(never) - 1)), NULL, &running), 0);
  usleep(300000);
  int pid = node_pid(ip);
  CHECK(pid > 0);
  CHECK_EQ(kill(pid, SIGKILL), 0);
  fprintf(stderr, "killed node %ld (%s), the actor's host\n", w[0], ip);
  rd_buf rb;
  CHECK_EQ(rd_get(&running, 1, &rb, 60000), RD_EACTOR_DIED);
  char want[160];
  snprintf(want, sizeof(want), "): node %ld died or its link broke while running 'Tally.wait_file' (max_task_retries=0)",
           w[0]);
  printf("the call running: %s\n", (const char *)rb.data);
  CHECK(strstr((const char *)rb.data, want) != NULL);
  rd_buf_release(&rb);
  rd_ref_release(running);
  long w2[2];
  actor_where(a, w2);
  printf("actor moved from node %ld to node %ld after %ld restart(s)\n", w[0], w2[0], w2[1]);
  CHECK(w2[0] != w[0]);
  CHECK_EQ(w2[1], 1);
  CHECK_EQ(actor_add(a), 1);   /* state is not kept across restarts */
  /* the results lost with the node: a's is made again, byte for byte */
  rd_buf big;
  CHECK_EQ(rd_get(&tw[1], 1, &big, 60000), 0);
  CHECK_EQ(big.size, n);
  const uint8_t *q = big.data;
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += q[i] != (uint8_t)((uint8_t)(i * 13 + 5) ^ 0x5a);
  CHECK_EQ(bad, 0);
  rd_buf_release(&big);
  int e = rd_get(&ltw[1], 1, &big, 60000);
  printf("lost with no retries: %s: %.*s\n", rd_err_name(e), (int)big.size, (const char *)big.data);
  CHECK(e == RD_ENODE_DIED || e == RD_EOBJECT_LOST);
  rd_buf_release(&big);
  e = rd_get(&ntw[1], 1, &big, 60000);
  printf("lost, the call's max_task_retries 0: %s: %.*s\n", rd_err_name(e), (int)big.size, (const char *)big.data);
  CHECK(e == RD_ENODE_DIED || e == RD_EOBJECT_LOST);
  rd_buf_release(&big);
  e = rd_get(&dtw[1], 1, &big, 60000);
  printf("lost with an actor that cannot restart: %s: %.*s\n", rd_err_name(e), (int)big.size,
         (const char *)big.data);
  CHECK_EQ(e, RD_EACTOR_DIED);
  CHECK(strstr((const char *)big.data, "no restarts left") != NULL);
  rd_buf_release(&big);
  rd_shutdown();
  return 0;
}


/* Where a task that reads a big argument runs. */
RD_REMOTE(where_with_arg) {
  rd_buf a;
  if (rd_arg(call, 0, &a) != 0 || a.size != (64u << 20)) return rd_call_fail(call, "bad arg");
  rd_node_info ni;
  if (rd_node_info_get(&ni) != 0) return rd_call_fail(call, "rd_node_info_get failed");
  uint32_t idx = ni.node_index;
  return rd_return_bytes(call, 0, &idx, sizeof(idx));
}

/* Default policy with data locality: a task whose largest argument lives on
 * node b runs there (b has room), without moving the argument. */
static int t_locality(void) {
  join();
  uint32_t b = run_where("only_b=1");
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_b=1";
  rd_ref big;
  CHECK_EQ(rd_submit(make_big, RD_NO_ARGS, &o, &big), 0);
  CHECK(rd_wait(&big, 1, 1, 60000, NULL) == 1);
  rd_task_opts_init(&o);   /* no resources: the default policy chooses */
  for (int i = 0; i < 3; i++) {
    rd_ref r;
    CHECK_EQ(rd_submit(where_with_arg, RD_ARGS(rd_arg_ref(big)), &o, &r), 0);
    uint32_t at = node_of(r);
    printf("consumer of an object held on node %u ran on node %u\n", b, at);
    CHECK_EQ(at, b);
  }
  rd_ref_release(big);
  rd_shutdown();
  return 0;
}

/* A result held on a node that dies before it is fetched: RD_ENODE_DIED,
 * promptly, with the node named; nothing hangs. */
static int t_object_lost(void) {
  join();
  size_t n = 150u << 20;   /* argument and result both fit node c's 512 MiB store */
  void *p;
  rd_ref in;
  CHECK_EQ(rd_put_begin(n, &p, &in), 0);
  memset(p, 3, n);
  CHECK_EQ(rd_put_seal(in), 0);
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_c=1";
  o.num_returns = 2;
  o.max_retries = 0;
  rd_ref out[2];
  CHECK_EQ(rd_submit(digest_and_twist, RD_ARGS(rd_arg_ref(in)), &o, out), 0);
  rd_buf small;
  CHECK_EQ(rd_get(&out[0], 1, &small, 60000), 0);   /* ran: its big result sits on node c */
  rd_buf_release(&small);
  int pid = node_pid("127.0.0.3");
  CHECK(pid > 0);
  CHECK_EQ(kill(pid, SIGKILL), 0);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  rd_buf big;
  int e = rd_get(&out[1], 1, &big, 60000);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
  printf("get of a result on the killed node: %s after %.2f s: %.*s\n", rd_err_name(e), s,
         e ? (int)big.size : 0, e ? (const char *)big.data : "");
  CHECK(e == RD_ENODE_DIED || e == RD_EOBJECT_LOST);
  CHECK(s < 30);
  rd_buf_release(&big);
  rd_ref_release(out[0]);
  rd_ref_release(out[1]);
  rd_ref_release(in);
  rd_shutdown();
  return 0;
}

/* Node b hangs (SIGSTOP: it neither answers nor closes its sockets) while
 * the head pulls objects from it, with libuv's pool at 2 threads
 * (UV_THREADPOOL_SIZE, set by the script): the hung pulls hold every pool
 * thread, and the head must still send its heartbeats, or the GCS declares
 * the head dead too and one hung node takes a healthy one along.  The get
 * ends with b's death, not the pulls' 120 s deadline; the head serves on. */
static int t_hung_peer(void) {
  join();
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_b=0.25";
  o.max_retries = 0;
  enum { NH = 6 };
  rd_ref r[NH];
  long sz = 1l << 20;
  for (long i = 0; i < NH; i++)
    CHECK_EQ(rd_submit(make_sized, RD_ARGS(rd_arg_bytes(&sz, sizeof(long)), rd_arg_bytes(&i, sizeof(long))), &o,
                       &r[i]), 0);
  CHECK_EQ(rd_wait(r, NH, NH, 60000, NULL), NH);
  int pid = node_pid("127.0.0.2");
  CHECK(pid > 0);
  CHECK_EQ(kill(pid, SIGSTOP), 0);
  double t0 = now_s();
  rd_buf b[NH];
  memset(b, 0, sizeof(b));   /* not filled on a timeout */
  int e = rd_get(r, NH, b, 60000);
  double s = now_s() - t0;
  printf("get of %d objects on hung node b: %s after %.2f s: %.*s\n", NH, rd_err_name(e), s,
         e && b[0].error ? (int)b[0].size : 0, e && b[0].error ? (const char *)b[0].data : "");
  CHECK(e == RD_ENODE_DIED || e == RD_EOBJECT_LOST);
  CHECK(s < 8);   /* b is declared dead after 2 s; the hung pulls would hold the get for 10 s or more */
  for (int i = 0; i < NH; i++) rd_buf_release(&b[i]);
  /* the head and c live on: the head's next heartbeats were answered */
  sleep(3);
  rd_node_info ni;
  CHECK_EQ(rd_node_info_get(&ni), 0);
  printf("after b hung: %u nodes alive\n", ni.cluster_nodes);
  CHECK_EQ(ni.cluster_nodes, 2);
  rd_task_opts h;
  rd_task_opts_init(&h);
  h.strategy = RD_STRATEGY_NODE_AFFINITY;
  h.node = ni.node_index;
  long one = 1000, seed = 5;
  rd_ref x;
  CHECK_EQ(rd_submit(make_sized, RD_ARGS(rd_arg_bytes(&one, sizeof(long)), rd_arg_bytes(&seed, sizeof(long))), &h, &x),
           0);
  rd_buf xb;
  CHECK_EQ(rd_get(&x, 1, &xb, 30000), 0);
  CHECK_EQ(xb.size, (size_t)one);
  rd_buf_release(&xb);
  rd_ref_release(x);
  for (int i = 0; i < NH; i++) rd_ref_release(r[i]);
  CHECK_EQ(kill(pid, SIGKILL), 0);
  rd_shutdown();
  return 0;
}

/* rd_task_opts.env / rd_actor_opts.env across nodes: "node|RD_CL_ENV" of
 * where it ran. */
static int env_where_reply(rd_call *call) {
  rd_node_info ni;
  if (rd_node_info_get(&ni) != 0) return rd_call_fail(call, "rd_node_info_get failed");
  const char *v = getenv("RD_CL_ENV");
  char out[128];
  int n = snprintf(out, sizeof(out), "%u|%s", ni.node_index, v ? v : "-");
  return rd_return_bytes(call, 0, out, (size_t)n);
}

RD_REMOTE(env_where) { return env_where_reply(call); }

RD_ACTOR_METHOD(Tally, env_where) {
  (void)state;
  return env_where_reply(call);
}

static rd_pg pg_make(const rd_bundle *b, size_t n, int strategy, const char *name, rd_pg_info *info);

static void check_env_result(rd_ref r, uint32_t want_node, const char *want_val, const char *what) {
  rd_buf b;
  int e = rd_get(&r, 1, &b, 60000);
  if (e) fprintf(stderr, "%s: %s: %.*s\n", what, rd_err_name(e), (int)b.size, (const char *)b.data);
  CHECK_EQ(e, 0);
  char s[128], want[128];
  snprintf(s, sizeof(s), "%.*s", (int)b.size, (const char *)b.data);
  snprintf(want, sizeof(want), "%u|%s", want_node, want_val);
  printf("%s: ran as %s\n", what, s);
  CHECK(!strcmp(s, want));
  rd_buf_release(&b);
  rd_ref_release(r);
}

/* env_where on a task needing res (with env), checked as check_env_result. */
static void task_env_check(const char *res, const char *const *env, uint32_t want_node, const char *want_val,
                           const char *what) {
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = res;
  o.env = env;
  rd_ref r;
  CHECK_EQ(rd_submit(env_where, RD_NO_ARGS, &o, &r), 0);
  check_env_result(r, want_node, want_val, what);
}

/* The same on an actor needing res (with env), killed afterwards. */
static void actor_env_check(const char *res, const char *const *env, uint32_t want_node, const char *want_val,
                            const char *what) {
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.resources = res;
  ao.env = env;
  rd_actor a;
  rd_ref r;
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &a), 0);
  CHECK_EQ(rd_actor_call(a, Tally_env_where, RD_NO_ARGS, NULL, &r), 0);
  check_env_result(r, want_node, want_val, what);
  CHECK_EQ(rd_actor_kill(a, 1), 0);
}

/* The env set travels with requests spilled to another node (by resource,
 * and through a placement group's bundle there) and with an actor placed
 * elsewhere: the worker there starts with it. */
static int t_env(void) {
  join();
  uint32_t b = run_where("only_b=1"), c = run_where("only_c=1");
  static const char *const set[] = {"RD_CL_ENV=yes", NULL};
  task_env_check("only_b=0.5", set, b, "yes", "task with env on b");
  task_env_check("only_b=0.5", NULL, b, "-", "task without env on b");
  /* through a bundle reserved on b */
  rd_ref r;
  rd_bundle bu = {1, 0, 0, "only_b=0.25"};
  rd_pg_info info;
  rd_pg pg = pg_make(&bu, 1, RD_PG_PACK, NULL, &info);
  rd_task_opts po;
  rd_task_opts_init(&po);
  po.placement_group = pg;
  po.bundle_index = 0;
  po.env = set;
  CHECK_EQ(rd_submit(env_where, RD_NO_ARGS, &po, &r), 0);
  check_env_result(r, b, "yes", "task with env in a bundle on b");
  CHECK_EQ(rd_pg_remove(pg), 0);
  actor_env_check("only_c=0.5", set, c, "yes", "actor with env on c");   /* an actor placed on c */
  rd_shutdown();
  return 0;
}

/* Run as a job submitted with RD_CL_ENV=job in its env (`raydist job
 * submit --env`, the jobs API's runtime_env env_vars): the job's tasks on
 * b and its actor on c run with it too (Ray's job-level runtime_env), a
 * task's own env in its place. */
static int t_job_env(void) {
  join();   /* (a worker's rd_init does not return: a plain one has no RD_CL_ENV) */
  const char *mine = getenv("RD_CL_ENV");
  CHECK(mine && !strcmp(mine, "job"));
  uint32_t b = run_where("only_b=1"), c = run_where("only_c=1");
  task_env_check("only_b=0.5", NULL, b, "job", "the job's task on b");
  static const char *const own[] = {"RD_CL_ENV=own", NULL};
  task_env_check("only_b=0.5", own, b, "own", "the job's task with its own env on b");
  actor_env_check("only_c=0.5", NULL, c, "job", "the job's actor on c");
  rd_shutdown();
  return 0;
}

/* rd_actor_opts.get_if_exists from three nodes at once: a task on b, a
 * task on c and the driver on the head each ask for "rendezvous"; one
 * creates it, all get the same actor. */
RD_REMOTE(get_or_create) {
  long wait_until_ms = 0;
  rd_buf w;
  if (rd_arg(call, 0, &w) != 0 || w.size != sizeof(long)) return rd_call_fail(call, "bad args");
  memcpy(&wait_until_ms, w.data, sizeof(long));
  while (now_s() * 1000 < (double)wait_until_ms) usleep(1000);   /* all three start together */
  rd_actor_opts o;
  rd_actor_opts_init(&o);
  o.name = "rendezvous";
  o.get_if_exists = 1;
  rd_actor a;
  int r = rd_actor_create(Tally, RD_NO_ARGS, &o, &a);
  if (r != 0) return rd_call_fail(call, "rd_actor_create: %s", rd_err_name(r));
  return rd_return_bytes(call, 0, &a.id, sizeof(a.id));
}

static int t_get_if_exists(void) {
  join();
  long at = (long)(now_s() * 1000) + 1500;
  rd_task_opts o;
  rd_task_opts_init(&o);
  rd_ref r[2];
  o.resources = "only_b=0.5";
  CHECK_EQ(rd_submit(get_or_create, RD_ARGS(rd_arg_bytes(&at, sizeof(at))), &o, &r[0]), 0);
  o.resources = "only_c=0.5";
  CHECK_EQ(rd_submit(get_or_create, RD_ARGS(rd_arg_bytes(&at, sizeof(at))), &o, &r[1]), 0);
  while (now_s() * 1000 < (double)at) usleep(1000);
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.name = "rendezvous";
  ao.get_if_exists = 1;
  rd_actor mine;
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &mine), 0);
  for (int i = 0; i < 2; i++) {
    rd_buf b;
    int e = rd_get(&r[i], 1, &b, 60000);
    if (e) fprintf(stderr, "task %d: %s: %.*s\n", i, rd_err_name(e), (int)b.size, (const char *)b.data);
    CHECK_EQ(e, 0);
    uint64_t id;
    CHECK_EQ(b.size, sizeof(id));
    memcpy(&id, b.data, sizeof(id));
    printf("node %s got actor %llx, the driver %llx\n", i ? "c" : "b", (unsigned long long)id,
           (unsigned long long)mine.id);
    CHECK_EQ(id, mine.id);
    rd_buf_release(&b);
    rd_ref_release(r[i]);
  }
  rd_ref x;
  CHECK_EQ(rd_actor_call(mine, Tally_add, RD_NO_ARGS, NULL, &x), 0);
  rd_buf b;
  CHECK_EQ(rd_get(&x, 1, &b, 30000), 0);
  rd_buf_release(&b);
  rd_ref_release(x);
  CHECK_EQ(rd_actor_kill(mine, 1), 0);
  rd_shutdown();
  return 0;
}

/* A driver co-owns objects a task on b handed over to it (one on b, one
 * its subtask left on c) and exits without letting go: both stores empty.
 * The driver's node has no link to c (nothing of this driver ran there),
 * so node b, which handed c's object over, tells c (it stayed on c before). */
static int t_owner_exit_child(void) {
  join();
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_b=1";
  rd_ref res, inner[3];
  CHECK_EQ(rd_submit(hand_refs, RD_NO_ARGS, &o, &res), 0);
  size_t n = 0;
  CHECK_EQ(rd_get_refs(res, inner, 3, &n, 120000), 0);
  CHECK_EQ(n, 3);
  rd_buf b;
  CHECK_EQ(rd_get(&inner[2], 1, &b, 60000), 0);   /* the one on c */
  CHECK_EQ(b.size, 4u << 20);
  rd_buf_release(&b);
  printf("owner_exit_child: holds 3 refs (4 MiB on b, 4 MiB on c), exits without letting go\n");
  fflush(stdout);
  _exit(0);
}

static int t_owner_exit_check(void) {
  join();
  usleep(500000);
  stores_bc_empty("after the owner exited holding them");
  rd_shutdown();
  return 0;
}

/* `raydist job submit` runs these as drivers (the script checks them). */
RD_REMOTE(job_say) {
  printf("job task says hi\n");
  return rd_return_bytes(call, 0, "ok", 2);
}

static int t_job_ok(void) {
  join();
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_b=0.25";
  rd_ref r;
  CHECK_EQ(rd_submit(job_say, RD_NO_ARGS, &o, &r), 0);
  rd_buf b;
  CHECK_EQ(rd_get(&r, 1, &b, 60000), 0);
  rd_buf_release(&b);
  rd_ref_release(r);
  usleep(300000);   /* the task's line comes on its own */
  printf("job ok done (RAYDIST_JOB_ID=%s)\n", getenv("RAYDIST_JOB_ID") ? getenv("RAYDIST_JOB_ID") : "-");
  rd_shutdown();
  return 0;
}

static int t_job_bad(void) {
  join();
  fprintf(stderr, "job bad: giving up\n");
  rd_shutdown();
  exit(3);
}

static int t_job_long(void) {
  join();
  printf("job long started\n");
  fflush(stdout);
  sleep(120);
  rd_shutdown();
  return 0;
}

/* rd_kv_* on a cluster: one table in the GCS for every node. */
RD_REMOTE(kv_on_node) {   /* reads "cl/driver", writes "cl/<node>" = its value + this node */
  rd_node_info ni;
  if (rd_node_info_get(&ni) != 0) return rd_call_fail(call, "node info");
  void *v;
  size_t len;
  int e = rd_kv_get("cl/driver", &v, &len);
  if (e) return rd_call_fail(call, "get: %s", rd_err_name(e));
  char key[32], val[128];
  snprintf(key, sizeof(key), "cl/node%u", ni.node_index);
  int n = snprintf(val, sizeof(val), "%.*s@%u", (int)len, (const char *)v, ni.node_index);
  free(v);
  e = rd_kv_put(key, val, (size_t)n, 0);
  if (e) return rd_call_fail(call, "put: %s", rd_err_name(e));
  return rd_return_bytes(call, 0, &ni.node_index, sizeof(ni.node_index));
}

static int t_kv(void) {
  join();
  CHECK_EQ(rd_kv_put("cl/driver", "hello", 5, 0), 0);
  CHECK_EQ(rd_kv_put("cl/driver", "again", 5, 0), RD_EEXIST);
  rd_task_opts o;
  rd_task_opts_init(&o);
  rd_ref r[2];
  o.resources = "only_b=0.25";
  CHECK_EQ(rd_submit(kv_on_node, RD_NO_ARGS, &o, &r[0]), 0);
  o.resources = "only_c=0.25";
  CHECK_EQ(rd_submit(kv_on_node, RD_NO_ARGS, &o, &r[1]), 0);
  uint32_t nodes[2];
  for (int i = 0; i < 2; i++) get_exact(r[i], "kv_on_node", 60000, &nodes[i], sizeof(uint32_t));
  char **keys;
  size_t n;
  CHECK_EQ(rd_kv_keys("cl/", &keys, &n), 0);
  CHECK_EQ(n, 3);
  for (int i = 0; i < 2; i++) {
    char key[32], want[32];
    snprintf(key, sizeof(key), "cl/node%u", nodes[i]);
    snprintf(want, sizeof(want), "hello@%u", nodes[i]);
    void *v;
    size_t len;
    CHECK_EQ(rd_kv_get(key, &v, &len), 0);
    printf("%s = %.*s\n", key, (int)len, (const char *)v);
    CHECK(len == strlen(want) && !memcmp(v, want, len));
    free(v);
    CHECK_EQ(rd_kv_del(key), 0);
  }
  free(keys);
  CHECK_EQ(rd_kv_del("cl/driver"), 0);
  CHECK_EQ(rd_kv_keys("cl/", &keys, &n), 0);
  CHECK_EQ(n, 0);
  free(keys);
  rd_shutdown();
  return 0;
}

/* log_to_driver: what workers print reaches the driver (checked by the
 * script on the driver's stdout and stderr). */
RD_REMOTE(say) {   /* arg0: a tag; prints 3 lines to stdout, 1 to stderr */
  rd_buf t;
  if (rd_arg(call, 0, &t) != 0) return rd_call_fail(call, "bad args");
  for (int i = 0; i < 3; i++) printf("say %.*s stdout %d\n", (int)t.size, (const char *)t.data, i);
  fprintf(stderr, "say %.*s stderr\n", (int)t.size, (const char *)t.data);
  return rd_return_bytes(call, 0, "ok", 2);
}

RD_REMOTE(say_nested) {   /* on b: a subtask on c prints */
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_c=0.25";
  rd_ref r;
  int e = rd_submit(say, RD_ARGS(rd_arg_bytes("nested-on-c", 11)), &o, &r);
  if (e == 0) {
    rd_buf b;
    e = rd_get(&r, 1, &b, 60000);
    rd_buf_release(&b);
    rd_ref_release(r);
  }
  if (e) return rd_call_fail(call, "subtask: %s", rd_err_name(e));
  return rd_return_bytes(call, 0, "ok", 2);
}

RD_ACTOR_METHOD(Tally, say) {
  (void)state;
  printf("say actor-on-c stdout\n");
  char big[20000];   /* one line longer than the node's line buffer: cut, not lost */
  memset(big, 'x', sizeof(big) - 1);
  big[sizeof(big) - 1] = 0;
  printf("long %s\n", big);
  printf("no newline at the end");   /* printed when the actor exits */
  fflush(stdout);
  return rd_return_bytes(call, 0, "ok", 2);
}

static void get_ok(rd_ref r, const char *what) {
  rd_buf b;
  int e = rd_get(&r, 1, &b, 60000);
  if (e) fprintf(stderr, "%s: %s: %.*s\n", what, rd_err_name(e), (int)b.size, (const char *)b.data);
  CHECK_EQ(e, 0);
  rd_buf_release(&b);
  rd_ref_release(r);
}

/* For the app_metrics case: one request counted on the node it runs on. */
RD_REMOTE(count_request) {
  rd_metric *c;
  if (rd_metric_counter("cl_requests_total", "Requests, by where they ran.", &c) != 0 ||
      rd_metric_inc(c, 1, "route=b") != 0)
    return rd_call_fail(call, "rd_metric");
  return rd_return_bytes(call, 0, "ok", 2);
}

/* Sets the gauge cl_queue_depth{actor="tally"} to arg0 (a long). */
RD_ACTOR_METHOD(Tally, set_gauge) {
  (void)state;
  rd_buf a;
  long v = 0;
  if (rd_arg(call, 0, &a) == 0 && a.size == sizeof(v)) memcpy(&v, a.data, sizeof(v));
  rd_metric *g;
  if (rd_metric_gauge("cl_queue_depth", "Set by an actor.", &g) != 0 || rd_metric_set(g, (double)v, "actor=tally") != 0)
    return rd_call_fail(call, "rd_metric");
  return rd_return_bytes(call, 0, "ok", 2);
}

/* The holding cases (cluster_test.sh's hold_start): this driver's pid in
 * the file `ready`, once what it holds exists. */
static void say_ready(const char *ready) {
  FILE *f = fopen(ready, "w");
  CHECK(f != NULL);
  fprintf(f, "%d\n", (int)getpid());
  fclose(f);
}

/* Application metrics on a cluster: 10 tasks count on b, an actor on c
 * sets a gauge, the driver counts on the head; each node serves its own.
 * The actor sets 2 and at once 3, and is killed right after: 2 goes with
 * its first report, 3 only with the one it sends as it exits. */
static int t_app_metrics(void) {
  join();
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_b=0.25";
  for (int i = 0; i < 10; i++) {
    rd_ref r;
    CHECK_EQ(rd_submit(count_request, RD_NO_ARGS, &o, &r), 0);
    get_ok(r, "count_request");
  }
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.resources = "only_c=0.25";
  rd_actor a;
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &a), 0);
  usleep(300000);   /* the task workers' last reports */
  for (long v = 2; v <= 3; v++) {
    rd_ref r;
    CHECK_EQ(rd_actor_call(a, Tally_set_gauge, RD_ARGS(rd_arg_bytes(&v, sizeof(v))), NULL, &r), 0);
    get_ok(r, "set_gauge");
  }
  /* the actor lives (its gauge served by c) until the script has looked */
  const char *ready = getenv("RD_READY"), *done = getenv("RD_DONE");
  CHECK(ready && done);
  say_ready(ready);
  for (int i = 0; i < 1200 && access(done, F_OK) != 0; i++) usleep(50000);
  CHECK_EQ(rd_actor_kill(a, 1), 0);
  rd_metric *c;
  CHECK_EQ(rd_metric_counter("cl_requests_total", NULL, &c), 0);
  CHECK_EQ(rd_metric_inc(c, 1, "route=driver"), 0);
  rd_shutdown();    /* sends the driver's */
  return 0;
}

/* arg0: a round number (int); prints 400 lines of 100 bytes to stdout. */
RD_REMOTE(say_lots) {
  rd_buf t;
  int round;
  if (rd_arg(call, 0, &t) != 0 || t.size != sizeof(round)) return rd_call_fail(call, "bad args");
  memcpy(&round, t.data, sizeof(round));
  for (int i = 0; i < 400; i++) printf("say-lots round %02d line %03d %070d\n", round, i, 0);
  fflush(stdout);
  return rd_return_bytes(call, 0, "ok", 2);
}

/* For the log_rotation case: 12 rounds of 40 KB of worker output on node
 * b, 300 ms apart, into b's node.log (rotated at 100 KB there). */
static int t_log_rotation(void) {
  join();
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_b=0.25";
  for (int round = 0; round < 12; round++) {
    rd_ref r;
    CHECK_EQ(rd_submit(say_lots, RD_ARGS(rd_arg_bytes(&round, sizeof(round))), &o, &r), 0);
    get_ok(r, "say_lots");
    usleep(300000);
  }
  rd_shutdown();
  return 0;
}

/* `say task-on-b` run on node b; o is left asking for b. */
static void say_on_b(rd_task_opts *o) {
  rd_task_opts_init(o);
  o->resources = "only_b=0.25";
  rd_ref r;
  CHECK_EQ(rd_submit(say, RD_ARGS(rd_arg_bytes("task-on-b", 9)), o, &r), 0);
  get_ok(r, "task on b");
}

/* A Tally on node c that has printed (Tally_say) once. */
static rd_actor sayer_on_c(void) {
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.resources = "only_c=0.25";
  rd_actor a;
  rd_ref r;
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &a), 0);
  CHECK_EQ(rd_actor_call(a, Tally_say, RD_NO_ARGS, NULL, &r), 0);
  get_ok(r, "actor on c");
  return a;
}

static int t_log_to_driver(void) {
  join();
  rd_task_opts o;
  rd_ref r;
  say_on_b(&o);
  CHECK_EQ(rd_submit(say_nested, RD_NO_ARGS, &o, &r), 0);
  get_ok(r, "nested");
  rd_task_opts h;
  rd_task_opts_init(&h);
  rd_node_info ni;
  CHECK_EQ(rd_node_info_get(&ni), 0);
  h.strategy = RD_STRATEGY_NODE_AFFINITY;
  h.node = ni.node_index;
  CHECK_EQ(rd_submit(say, RD_ARGS(rd_arg_bytes("task-here", 9)), &h, &r), 0);
  get_ok(r, "task here");
  rd_actor a = sayer_on_c();
  CHECK_EQ(rd_actor_kill(a, 1), 0);
  usleep(3000000);   /* its last line comes at its exit, on its own: give it time */
  CHECK_EQ(rd_node_info_get(&ni), 0);   /* any call reads what came */
  rd_shutdown();
  return 0;
}

/* For log_dedup: arg0 a letter; after 400 ms (so that two run at once on
 * b, on two workers) prints the line every worker prints (its pid makes
 * no difference), one of its own, and one of its own three times. */
RD_REMOTE(say_same) {
  rd_buf t;
  if (rd_arg(call, 0, &t) != 0 || t.size != 1) return rd_call_fail(call, "bad args");
  usleep(400000);
  printf("dedup-me hello from a worker %d\n", (int)getpid());
  printf("only task %c says this\n", *(const char *)t.data);
  for (int i = 0; i < 3; i++) printf("task %c again and again\n", *(const char *)t.data);
  fflush(stdout);
  return rd_return_bytes(call, 0, "ok", 2);
}

/* Two tasks at once on b and one on c print the same line; then the
 * driver idles 2.5 s (RAYDIST_DEDUP_LOGS_AGG_WINDOW_S=1: the repeats are
 * printed within it) and says so. */
static int t_log_dedup(void) {
  join();
  rd_task_opts ob, oc;
  rd_task_opts_init(&ob);
  rd_task_opts_init(&oc);
  ob.resources = "only_b=0.25";
  oc.resources = "only_c=0.25";
  rd_ref r[3];
  CHECK_EQ(rd_submit(say_same, RD_ARGS(rd_arg_bytes("a", 1)), &ob, &r[0]), 0);
  CHECK_EQ(rd_submit(say_same, RD_ARGS(rd_arg_bytes("b", 1)), &ob, &r[1]), 0);
  CHECK_EQ(rd_submit(say_same, RD_ARGS(rd_arg_bytes("c", 1)), &oc, &r[2]), 0);
  for (int i = 0; i < 3; i++) get_ok(r[i], "say_same");
  usleep(2500000);
  printf("driver: idled\n");
  rd_shutdown();
  return 0;
}

/* Says so on stderr, then dies of SIGABRT (a crash, for the logs case). */
RD_REMOTE(crash_loudly) {
  (void)call;
  fprintf(stderr, "crash_loudly: about to abort\n");
  fflush(stderr);
  abort();
}

/* The logs case: a task on b and an actor on c print (their workers'
 * files), a task on b crashes (its worker listed as exited, with why);
 * the actor's id goes to the file `actor`; once the script has looked,
 * the actor prints again for `raydist logs --follow` (when the file
 * `more` appears), and it is killed at `done`. */
static int t_logs_hold(void) {
  join();
  rd_task_opts o;
  rd_ref r;
  say_on_b(&o);
  /* a second task on the same worker: each task's lines apart (raydist logs task) */
  CHECK_EQ(rd_submit(say, RD_ARGS(rd_arg_bytes("again-on-b", 10)), &o, &r), 0);
  get_ok(r, "again on b");
  o.max_retries = 0;
  CHECK_EQ(rd_submit(crash_loudly, RD_NO_ARGS, &o, &r), 0);
  rd_buf b;
  CHECK_EQ(rd_get(&r, 1, &b, 60000), RD_EWORKER_DIED);
  rd_buf_release(&b);
  rd_ref_release(r);
  rd_actor a = sayer_on_c();
  const char *ready = getenv("RD_READY"), *done = getenv("RD_DONE"), *dir = getenv("RAYDIST_TMPDIR");
  CHECK(ready && done && dir);
  char path[600];
  snprintf(path, sizeof(path), "%s/actor", dir);
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  fprintf(f, "%016llx\n", (unsigned long long)a.id);   /* as the state API words it */
  fclose(f);
  say_ready(ready);
  snprintf(path, sizeof(path), "%s/more", dir);
  for (int i = 0; i < 1200 && access(path, F_OK) != 0 && access(done, F_OK) != 0; i++) usleep(50000);
  CHECK_EQ(rd_actor_call(a, Tally_say, RD_NO_ARGS, NULL, &r), 0);
  get_ok(r, "actor on c, again");
  for (int i = 0; i < 1200 && access(done, F_OK) != 0; i++) usleep(50000);
  CHECK_EQ(rd_actor_kill(a, 1), 0);
  rd_shutdown();
  return 0;
}

RD_REMOTE(say_fake_mark) {   /* output that looks like a task mark (runtime/common.h's RD_TASK_MARK) is output */
  (void)call;
  printf("fake \x1e\x1f" "rd:bogus mark\n");
  printf("\x1e\x1f" "rd:task not-an-id\n");
  return rd_return_bytes(call, 0, "ok", 2);
}

/* The task_logs case: two Tallies on b print (Tally_say), one with
 * RAYDIST_RECORD_ACTOR_TASK_LOGGING=1 in its env (its calls' lines are
 * recorded apart), called twice, one without, called once; their ids on
 * stdout. */
static int t_actor_task_logs(void) {
  join();
  static const char *const rec[] = {"RAYDIST_RECORD_ACTOR_TASK_LOGGING=1", NULL};
  rd_actor a[2];
  for (int k = 0; k < 2; k++) {
    rd_actor_opts ao;
    rd_actor_opts_init(&ao);
    ao.resources = "only_b=0.25";
    ao.env = k == 0 ? rec : NULL;
    CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &a[k]), 0);
    for (int i = 0; i < 2 - k; i++) {
      rd_ref r;
      CHECK_EQ(rd_actor_call(a[k], Tally_say, RD_NO_ARGS, NULL, &r), 0);
      get_ok(r, "Tally.say on b");
    }
  }
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_b=0.25";
  rd_ref r;
  CHECK_EQ(rd_submit(say_fake_mark, RD_NO_ARGS, &o, &r), 0);
  get_ok(r, "say_fake_mark");
  printf("recorded %016llx\nplain %016llx\n", (unsigned long long)a[0].id, (unsigned long long)a[1].id);
  fflush(stdout);
  for (int k = 0; k < 2; k++) CHECK_EQ(rd_actor_kill(a[k], 1), 0);
  rd_shutdown();
  return 0;
}

/* One rd_get of several objects that all live on node b, of different
 * sizes so that their pulls end at different times: the head must keep
 * each pulled copy until the get has them all (it used to let each go and
 * pull it again while it waited for the other, without end). */
static int t_get_many_remote(void) {
  join();
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_b=0.25";
  long sizes[4] = {1l << 20, 24l << 20, 3l << 20, 12l << 20};
  for (int round = 0; round < 3; round++) {
    rd_ref r[4];
    for (long i = 0; i < 4; i++) {
      long seed = round * 10 + i;
      CHECK_EQ(rd_submit(make_sized, RD_ARGS(rd_arg_bytes(&sizes[i], sizeof(long)), rd_arg_bytes(&seed, sizeof(long))),
                         &o, &r[i]), 0);
    }
    CHECK_EQ(rd_wait(r, 4, 4, 60000, NULL), 4);
    double t0 = now_s();
    rd_buf b[4];
    int e = rd_get(r, 4, b, 30000);
    if (e) fprintf(stderr, "round %d: rd_get of 4 objects on node b: %s\n", round, rd_err_name(e));
    CHECK_EQ(e, 0);
    printf("round %d: 4 objects (40 MiB) from node b in %.3f s\n", round, now_s() - t0);
    for (int i = 0; i < 4; i++) {
      CHECK_EQ(b[i].size, (size_t)sizes[i]);
      const uint8_t *x = b[i].data;
      for (long k = 0; k < sizes[i]; k += 4093) CHECK(x[k] == (uint8_t)(k * 7 + round * 10 + i));
      rd_buf_release(&b[i]);
      rd_ref_release(r[i]);
    }
  }
  /* 3000 objects of 128 KiB on node b in one get: the head pulls them a
   * few at a time (it queued every pull on libuv's pool ahead of its
   * heartbeat, and the GCS declared it dead: 2 s without one here) */
  {
    enum { NM = 3000 };
    long sz = 128l << 10;
    rd_ref *m = calloc(NM, sizeof(*m));
    rd_buf *mb = calloc(NM, sizeof(*mb));
    CHECK(m && mb);
    for (long i = 0; i < NM; i++)
      CHECK_EQ(rd_submit(make_sized, RD_ARGS(rd_arg_bytes(&sz, sizeof(long)), rd_arg_bytes(&i, sizeof(long))), &o,
                         &m[i]), 0);
    CHECK_EQ(rd_wait(m, NM, NM, 120000, NULL), NM);
    double t0 = now_s();
    int e = rd_get(m, NM, mb, 120000);
    if (e) fprintf(stderr, "a get of %d objects on node b: %s: %.*s\n", NM, rd_err_name(e), (int)mb[0].size,
                   mb[0].data ? (const char *)mb[0].data : "");
    CHECK_EQ(e, 0);
    printf("%d objects of 128 KiB from node b in one get: %.2f s\n", NM, now_s() - t0);
    for (long i = 0; i < NM; i++) {
      CHECK_EQ(mb[i].size, (size_t)sz);
      CHECK(((const uint8_t *)mb[i].data)[777] == (uint8_t)(777 * 7 + i));
      rd_buf_release(&mb[i]);
      rd_ref_release(m[i]);
    }
    free(m);
    free(mb);
    rd_node_info ni;
    CHECK_EQ(rd_node_info_get(&ni), 0);
    CHECK_EQ(ni.cluster_nodes, 3);   /* nobody was declared dead */
  }
  /* three objects that together do not fit in the head's store (700 MB,
   * started without a fallback region for this case: with one, the third
   * would go there, as big_object shows): the get fails, within the
   * create's wait, for the one that found no room, not waiting forever;
   * each alone is read afterwards */
  long big = 260l << 20;
  rd_ref r[3];
  for (long i = 0; i < 3; i++)
    CHECK_EQ(rd_submit(make_sized, RD_ARGS(rd_arg_bytes(&big, sizeof(long)), rd_arg_bytes(&i, sizeof(long))), &o,
                       &r[i]), 0);
  CHECK_EQ(rd_wait(r, 3, 3, 120000, NULL), 3);
  double t0 = now_s();
  rd_buf b[3];
  int e = rd_get(r, 3, b, 120000);
  int bad = 0;
  for (int i = 0; i < 3; i++) {
    if (b[i].error) {
      bad++;
      printf("object %d of 3 x 260 MiB: %s: %.*s\n", i, rd_err_name(b[i].error), (int)b[i].size,
             (const char *)b[i].data);
      CHECK(b[i].size > 0);   /* with a message */
    }
    rd_buf_release(&b[i]);
  }
  printf("a get of 3 x 260 MiB into a 700 MB store: %s after %.1f s, %d failed\n", rd_err_name(e), now_s() - t0, bad);
  CHECK(e != 0 && bad >= 1);
  CHECK(now_s() - t0 < 60);
  for (int i = 0; i < 3; i++) {
    CHECK_EQ(rd_get(&r[i], 1, b, 60000), 0);
    CHECK_EQ(b[0].size, (size_t)big);
    CHECK(((const uint8_t *)b[0].data)[12345] == (uint8_t)(12345 * 7 + i));
    rd_buf_release(b);
    rd_ref_release(r[i]);
  }
  rd_shutdown();
  return 0;
}

/* Shuffle map: 4 partitions of map arg0 (round arg1), partition j of
 * (64 KiB << j) + arg0 * 4096 bytes, byte k = (k + 3 * j + 5 * arg0 + arg1).
 * Small ones travel inline, large ones stay in this node's store. */
RD_REMOTE(shuffle_map) {
  long m = -1, round = -1;
  rd_buf a, b;
  if (rd_arg(call, 0, &a) == 0 && a.size == sizeof(long)) memcpy(&m, a.data, sizeof(m));
  if (rd_arg(call, 1, &b) == 0 && b.size == sizeof(long)) memcpy(&round, b.data, sizeof(round));
  if (m < 0 || round < 0) return rd_call_fail(call, "bad args");
  for (long j = 0; j < 4; j++) {
    size_t n = ((size_t)64 << 10 << j) + (size_t)m * 4096;
    uint8_t *out = rd_return_alloc(call, (size_t)j, n);
    if (!out) return rd_call_fail(call, "no room");
    for (size_t k = 0; k < n; k++) out[k] = (uint8_t)(k + 3 * j + 5 * m + round);
  }
  return 0;
}

/* Shuffle reduce: every argument is one map's partition j (arg 0 is j and
 * the round); checks each and returns the bytes seen. */
RD_REMOTE(shuffle_reduce) {
  rd_buf h;
  long hdr[2];
  if (rd_arg(call, 0, &h) != 0 || h.size != sizeof(hdr)) return rd_call_fail(call, "bad header");
  memcpy(hdr, h.data, sizeof(hdr));
  long j = hdr[0], round = hdr[1], total = 0;
  size_t nargs = rd_call_nargs(call);
  for (size_t i = 1; i < nargs; i++) {
    long m = (long)i - 1;
    rd_buf p;
    if (rd_arg(call, i, &p) != 0) return rd_call_fail(call, "arg %zu", i);
    size_t want = ((size_t)64 << 10 << j) + (size_t)m * 4096;
    if (p.size != want) return rd_call_fail(call, "map %ld partition %ld: %zu bytes, want %zu", m, j, p.size, want);
    const uint8_t *x = p.data;
    for (size_t k = 0; k < p.size; k += 97)
      if (x[k] != (uint8_t)(k + 3 * j + 5 * m + round)) return rd_call_fail(call, "map %ld partition %ld: byte %zu", m, j, k);
    total += (long)p.size;
  }
  return rd_return_bytes(call, 0, &total, sizeof(total));
}

/* A wide map: partition j of map m (arg 0) is 1 KiB + j bytes (inline)
 * for even j, 110 KiB + j (through its node's store) for odd j, every
 * byte (m + j) & 0xff. */
static size_t wide_part_size(long j) { return (j % 2 ? (size_t)110 << 10 : (size_t)1 << 10) + (size_t)j; }
RD_REMOTE(wide_map) {
  rd_buf a;
  long m;
  if (rd_arg(call, 0, &a) != 0 || a.size != sizeof(m)) return rd_call_fail(call, "bad map");
  memcpy(&m, a.data, sizeof(m));
  for (size_t j = 0; j < rd_call_nreturns(call); j++) {
    uint8_t *p = rd_return_alloc(call, j, wide_part_size((long)j));
    if (!p) return rd_call_fail(call, "partition %zu", j);
    memset(p, (int)((m + (long)j) & 0xff), wide_part_size((long)j));
  }
  return 0;
}

/* Arg i is map i / wr's partition i % wr (arg 0: wr): checks each, returns the bytes. */
RD_REMOTE(wide_reduce) {
  rd_buf h;
  long wr, total = 0;
  if (rd_arg(call, 0, &h) != 0 || h.size != sizeof(wr)) return rd_call_fail(call, "bad header");
  memcpy(&wr, h.data, sizeof(wr));
  for (size_t i = 1; i < rd_call_nargs(call); i++) {
    long m = (long)(i - 1) / wr, j = (long)(i - 1) % wr;
    rd_buf p;
    if (rd_arg(call, i, &p) != 0) return rd_call_fail(call, "arg %zu", i);
    const uint8_t *x = p.data;
    if (p.size != wide_part_size(j) || x[0] != (uint8_t)(m + j) || x[p.size - 1] != (uint8_t)(m + j))
      return rd_call_fail(call, "map %ld partition %ld: %zu bytes", m, j, p.size);
    total += (long)p.size;
  }
  return rd_return_bytes(call, 0, &total, sizeof(total));
}

/* The shuffle of Ray's data libraries: 12 map tasks spread over the three
 * nodes, each leaving 4 partitions (64 KiB to 0.5 MiB, most in its node's
 * store), then 4 reduce tasks, spread too, each taking one partition of
 * every map as arguments: every reducer fetches a dozen objects from two
 * other nodes at once.  Three rounds; a result got from every node. */
static int t_shuffle(void) {
  join();
  enum { M = 12, R = 4 };
  rd_task_opts mo;
  rd_task_opts_init(&mo);
  mo.num_returns = R;
  mo.strategy = RD_STRATEGY_SPREAD;
  rd_task_opts ro;
  rd_task_opts_init(&ro);
  ro.strategy = RD_STRATEGY_SPREAD;
  for (long round = 0; round < 3; round++) {
    double t0 = now_s();
    rd_ref parts[M][R];
    for (long m = 0; m < M; m++)
      CHECK_EQ(rd_submit(shuffle_map, RD_ARGS(rd_arg_bytes(&m, sizeof(m)), rd_arg_bytes(&round, sizeof(round))), &mo,
                         parts[m]), 0);
    rd_ref red[R];
    long want_total[R];
    for (long j = 0; j < R; j++) {
      rd_value args[1 + M];
      long hdr[2] = {j, round};
      args[0] = rd_arg_bytes(hdr, sizeof(hdr));
      want_total[j] = 0;
      for (long m = 0; m < M; m++) {
        args[1 + m] = rd_arg_ref(parts[m][j]);
        want_total[j] += (long)(((size_t)64 << 10 << j) + (size_t)m * 4096);
      }
      CHECK_EQ(rd_submit(shuffle_reduce, args, 1 + M, &ro, &red[j]), 0);
    }
    rd_buf out[R];
    int e = rd_get(red, R, out, 120000);
    for (int j = 0; e && j < R; j++)
      if (out[j].error) fprintf(stderr, "reduce %d: %s: %.*s\n", j, rd_err_name(out[j].error), (int)out[j].size,
                                (const char *)out[j].data);
    CHECK_EQ(e, 0);
    for (int j = 0; j < R; j++) {
      long got;
      CHECK_EQ(out[j].size, sizeof(got));
      memcpy(&got, out[j].data, sizeof(got));
      CHECK_EQ(got, want_total[j]);
      rd_buf_release(&out[j]);
      rd_ref_release(red[j]);
    }
    /* and the driver gets every partition at once, from all three nodes */
    rd_ref all[M * R];
    rd_buf ab[M * R];
    for (int m = 0; m < M; m++)
      for (int j = 0; j < R; j++) all[m * R + j] = parts[m][j];
    e = rd_get(all, M * R, ab, 120000);
    CHECK_EQ(e, 0);
    for (int m = 0; m < M; m++)
      for (int j = 0; j < R; j++) {
        rd_buf *b = &ab[m * R + j];
        CHECK_EQ(b->size, ((size_t)64 << 10 << j) + (size_t)m * 4096);
        CHECK(((const uint8_t *)b->data)[b->size - 1] == (uint8_t)(b->size - 1 + 3 * j + 5 * m + round));
        rd_buf_release(b);
        rd_ref_release(parts[m][j]);
      }
    printf("round %ld: %d maps, %d reduces and a get of all %d partitions in %.2f s\n", round, M, R, M * R,
           now_s() - t0);
  }
  /* wide: 6 maps of 100 partitions each (more returns than a task once
   * had), and one reduce taking all 600 as arguments, half of them pulled
   * from the other nodes' stores */
  enum { WM = 6, WR = 100 };
  double t0 = now_s();
  static rd_ref wparts[WM][WR];
  static rd_value wargs[1 + WM * WR];
  mo.num_returns = WR;
  long wr = WR, wwant = 0;
  wargs[0] = rd_arg_bytes(&wr, sizeof(wr));
  for (long m = 0; m < WM; m++) {
    CHECK_EQ(rd_submit(wide_map, RD_ARGS(rd_arg_bytes(&m, sizeof(m))), &mo, wparts[m]), 0);
    for (long j = 0; j < WR; j++) {
      wargs[1 + m * WR + j] = rd_arg_ref(wparts[m][j]);
      wwant += (long)wide_part_size(j);
    }
  }
  rd_ref wred;
  CHECK_EQ(rd_submit(wide_reduce, wargs, 1 + WM * WR, &ro, &wred), 0);
  rd_buf wb;
  int we = rd_get(&wred, 1, &wb, 120000);
  if (we) fprintf(stderr, "wide reduce: %s: %.*s\n", rd_err_name(we), (int)wb.size, (const char *)wb.data);
  CHECK_EQ(we, 0);
  long wgot;
  CHECK_EQ(wb.size, sizeof(wgot));
  memcpy(&wgot, wb.data, sizeof(wgot));
  CHECK_EQ(wgot, wwant);
  rd_buf_release(&wb);
  rd_ref_release(wred);
  for (int m = 0; m < WM; m++)
    for (int j = 0; j < WR; j++) rd_ref_release(wparts[m][j]);
  printf("wide: %d maps of %d returns and a reduce of all %d in %.2f s\n", WM, WR, WM * WR, now_s() - t0);
  rd_shutdown();
  return 0;
}

/* The index rd_nodes marks as the caller's own node, seen from a task. */
RD_REMOTE(self_in_nodes) {
  rd_node_desc d[8];
  size_t n = 0;
  if (rd_nodes(d, 8, &n) != 0) return rd_call_fail(call, "rd_nodes failed");
  uint32_t self = 0;
  int nself = 0;
  for (size_t i = 0; i < n; i++)
    if (d[i].is_self) {
      self = d[i].index;
      nself++;
    }
  if (nself != 1) return rd_call_fail(call, "%d nodes marked as self", nself);
  return rd_return_bytes(call, 0, &self, sizeof(self));
}

static const rd_node_desc *node_on(const rd_node_desc *d, size_t n, const char *ip) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(d[i].ip, ip)) return &d[i];
  return NULL;
}

static double custom_of(const rd_node_desc *d, const char *name, double *avail) {
  for (int i = 0; i < d->num_custom; i++)
    if (!strcmp(d->custom[i].name, name)) {
      if (avail) *avail = d->custom[i].avail;
      return d->custom[i].total;
    }
  return -1;
}

/* rd_nodes and rd_cluster_resources (ray.nodes(), cluster_resources(),
 * available_resources()): the three nodes with their addresses and
 * resources, what a running task holds, the caller's node as seen from a
 * task on another, and a node's death. */
static int t_nodes(void) {
  join();
  uint32_t b = run_where("only_b=1"), c = run_where("only_c=1");
  size_t n = 0;
  CHECK_EQ(rd_nodes(NULL, 0, &n), 0);
  CHECK_EQ(n, 3);
  rd_node_desc d[4];
  n = 0;
  CHECK_EQ(rd_nodes(d, 2, &n), RD_EINVAL);   /* too small: how many are needed */
  CHECK_EQ(n, 3);
  CHECK_EQ(rd_nodes(d, 4, NULL), RD_EINVAL);
  CHECK_EQ(rd_nodes(d, 4, &n), 0);
  CHECK_EQ(n, 3);
  const rd_node_desc *h = node_on(d, n, "127.0.0.1"), *nb = node_on(d, n, "127.0.0.2"), *nc = node_on(d, n, "127.0.0.3");
  CHECK(h && nb && nc);
  CHECK(h->is_head && !nb->is_head && !nc->is_head);
  CHECK(h->is_self && !nb->is_self && !nc->is_self);   /* the driver's node is the head */
  CHECK_EQ(nb->index, b);
  CHECK_EQ(nc->index, c);
  CHECK(h->index != b && h->index != c && h->index > 0);
  for (size_t i = 0; i < n; i++) {
    CHECK(d[i].alive);
    CHECK(d[i].num_cpus == 2);
    CHECK(d[i].hostname[0] != 0);
    CHECK(d[i].store_capacity > 0);
    CHECK_EQ(d[i].death_reason[0], 0);
    CHECK(d[i].ms_since_heartbeat < 10000);
  }
  CHECK_EQ(h->ms_since_heartbeat, 0);   /* its own, live */
  CHECK(nb->store_capacity >= 700000000 && nb->store_capacity < 701000000);   /* rounded up to pages */
  CHECK(custom_of(nb, "only_b", NULL) == 1 && custom_of(nb, "pool", NULL) == 1);
  CHECK(custom_of(nc, "only_c", NULL) == 1 && custom_of(nc, "only_b", NULL) == -1);
  CHECK_EQ(h->num_custom, 0);
  double t = -1, a = -1;
  CHECK_EQ(rd_cluster_resources("CPU", &t, &a), 0);
  CHECK(t == 6 && a >= 0 && a <= 6);
  CHECK_EQ(rd_cluster_resources("pool", &t, NULL), 0);
  CHECK(t == 2);
  CHECK_EQ(rd_cluster_resources("no_such_resource", &t, &a), RD_ENOENT);
  CHECK(t == 0 && a == 0);
  CHECK_EQ(rd_cluster_resources("", &t, &a), RD_EINVAL);
  CHECK_EQ(rd_cluster_resources(NULL, &t, &a), RD_EINVAL);
  CHECK_EQ(rd_cluster_resources("a_resource_name_longer_than_31_characters", &t, &a), RD_EINVAL);
  /* a task that holds only_b for 3 s: node b's heartbeat shows it taken */
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_b=1";
  uint32_t ms = 3000, tag = 7;
  rd_ref r;
  CHECK_EQ(rd_submit(slow_where, RD_ARGS(rd_arg_bytes(&ms, 4), rd_arg_bytes(&tag, 4)), &o, &r), 0);
  double t0 = now_s(), taken_at = 0;
  while (!taken_at && now_s() - t0 < 2.9) {
    CHECK_EQ(rd_cluster_resources("only_b", &t, &a), 0);
    CHECK(t == 1);
    if (a == 0) taken_at = now_s();
    else usleep(20000);
  }
  CHECK(taken_at > 0);
  CHECK_EQ(rd_nodes(d, 4, &n), 0);
  nb = node_on(d, n, "127.0.0.2");
  double av = -1;
  CHECK(nb && custom_of(nb, "only_b", &av) == 1);
  CHECK(av == 0 || now_s() - t0 > 2.9);
  rd_buf rb;
  CHECK_EQ(rd_get(&r, 1, &rb, 60000), 0);
  rd_buf_release(&rb);
  rd_ref_release(r);
  double freed_at = 0, t1 = now_s();
  while (!freed_at && now_s() - t1 < 10) {
    CHECK_EQ(rd_cluster_resources("only_b", &t, &a), 0);
    if (a == 1) freed_at = now_s();
    else usleep(20000);
  }
  CHECK(freed_at > 0);
  printf("only_b seen taken %.2f s after the submit, free again %.2f s after the result\n", taken_at - t0,
         freed_at - t1);
  /* from a task on b, b is the caller's node */
  rd_task_opts_init(&o);
  o.resources = "only_b=0.1";
  CHECK_EQ(rd_submit(self_in_nodes, RD_NO_ARGS, &o, &r), 0);
  CHECK_EQ(rd_get(&r, 1, &rb, 60000), 0);
  CHECK_EQ(rb.size, 4);
  uint32_t seen;
  memcpy(&seen, rb.data, 4);
  CHECK_EQ(seen, b);
  rd_buf_release(&rb);
  rd_ref_release(r);
  /* node c dies: listed as dead, with the reason, and out of the sums */
  int pid = node_pid("127.0.0.3");
  CHECK(pid > 0);
  CHECK_EQ(kill(pid, SIGKILL), 0);
  t0 = now_s();
  int dead = 0;
  while (!dead && now_s() - t0 < 30) {
    CHECK_EQ(rd_nodes(d, 4, &n), 0);
    CHECK_EQ(n, 3);
    nc = node_on(d, n, "127.0.0.3");
    CHECK(nc);
    dead = !nc->alive;
    if (!dead) usleep(50000);
  }
  CHECK(dead);
  printf("node %u listed dead %.2f s after its kill: %s\n", c, now_s() - t0, nc->death_reason);
  CHECK(nc->death_reason[0] != 0);
  CHECK_EQ(rd_cluster_resources("CPU", &t, NULL), 0);
  CHECK(t == 4);
  CHECK_EQ(rd_cluster_resources("only_c", &t, &a), RD_ENOENT);
  CHECK_EQ(rd_cluster_resources("pool", &t, NULL), 0);
  CHECK(t == 1);
  rd_shutdown();
  return 0;
}

/* Submit fn (digest_and_twist or twist_slow_again) on arg, preferring node (soft affinity), with
 * max_retries retries. */
static void twist_fn_on(const rd_function *fn, rd_ref arg, uint32_t node, int max_retries, rd_ref out[2]) {
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.num_returns = 2;
  o.max_retries = max_retries;
  o.strategy = RD_STRATEGY_NODE_AFFINITY;
  o.node = node;
  o.soft = 1;
  CHECK_EQ(rd_submit(fn, RD_ARGS(rd_arg_ref(arg)), &o, out), 0);
}

static void twist_on(rd_ref arg, uint32_t node, int max_retries, rd_ref out[2]) {
  twist_fn_on(digest_and_twist, arg, node, max_retries, out);
}

/* Rebuilt before anyone asks: once the driver's node hears that c died, the
 * result that lived only there is pending again in rd_wait (its task runs
 * again at once), then ready with the same bytes. */
static int t_lineage_eager(void) {
  join();
  uint32_t c = run_where("only_c=1");
  size_t n = 1u << 20;
  void *p;
  rd_ref in;
  CHECK_EQ(rd_put_begin(n, &p, &in), 0);
  for (size_t i = 0; i < n; i++) ((uint8_t *)p)[i] = (uint8_t)(i * 13 + 1);
  CHECK_EQ(rd_put_seal(in), 0);
  rd_ref r[2];
  twist_fn_on(twist_slow_again, in, c, 2, r);   /* the rebuild takes 0.5 s: not missed between polls */
  rd_buf small;
  CHECK_EQ(rd_get(&r[0], 1, &small, 60000), 0);
  uint64_t rep[2];
  memcpy(rep, small.data, sizeof(rep));
  CHECK_EQ(rep[1], c);
  rd_buf_release(&small);
  uint8_t rdy = 0;
  CHECK_EQ(rd_wait(&r[1], 1, 1, 0, &rdy), 1);   /* done, on c */
  int pid = node_pid("127.0.0.3");
  CHECK(pid > 0);
  CHECK_EQ(kill(pid, SIGKILL), 0);
  double t0 = now_s(), pending_at = 0;
  for (int i = 0; i < 400 && !pending_at; i++) {   /* the GCS's timeout (2 s here) and a heartbeat */
    if (rd_wait(&r[1], 1, 1, 0, &rdy) == 0) pending_at = now_s();
    else usleep(25000);
    rd_node_info ni;   /* the driver hears its node in its calls (or when tasks are in flight) */
    CHECK_EQ(rd_node_info_get(&ni), 0);
  }
  CHECK(pending_at > 0);
  CHECK_EQ(rd_wait(&r[1], 1, 1, 60000, &rdy), 1);
  double ready_at = now_s();
  printf("after node %u died: its result pending again in rd_wait after %.2f s, rebuilt %.2f s later\n", c,
         pending_at - t0, ready_at - pending_at);
  rd_buf big;
  CHECK_EQ(rd_get(&r[1], 1, &big, 60000), 0);
  CHECK_EQ(big.size, n);
  for (size_t i = 0; i < n; i++) CHECK(((const uint8_t *)big.data)[i] == (uint8_t)((uint8_t)(i * 13 + 1) ^ 0x5a));
  rd_buf_release(&big);
  rd_ref_release(r[0]);
  rd_ref_release(r[1]);
  rd_ref_release(in);
  rd_shutdown();
  return 0;
}

/* Lineage reconstruction: results that lived only in node c's store are
 * rebuilt after c is killed by running their tasks again elsewhere: a
 * result of a task whose argument is the driver's, and the end of a chain
 * whose middle link was lost with c too.  A task without retries still
 * fails as before. */
static int t_lineage(void) {
  join();
  uint32_t c = run_where("only_c=1");
  size_t n = 8u << 20;   /* node c's store holds the input and six results */
  void *p;
  rd_ref in;
  CHECK_EQ(rd_put_begin(n, &p, &in), 0);
  for (size_t i = 0; i < n; i++) ((uint8_t *)p)[i] = (uint8_t)(i * 31 + 7);
  CHECK_EQ(rd_put_seal(in), 0);
  rd_ref one[2], mid[2], end[2], none[2], two[2];
  twist_on(in, c, 2, one);             /* in -> one[1] on c */
  twist_on(in, c, 2, two);             /* in -> two[1] on c, later an argument */
  twist_on(in, c, 2, mid);             /* in -> mid[1] on c -> end[1] on c */
  rd_buf small[3];
  CHECK_EQ(rd_get(&mid[0], 1, &small[0], 60000), 0);
  twist_on(mid[1], c, 2, end);
  twist_on(in, c, 0, none);            /* no retries: no lineage */
  CHECK_EQ(rd_get(&one[0], 1, &small[1], 60000), 0);
  CHECK_EQ(rd_get(&end[0], 1, &small[2], 60000), 0);
  rd_buf nb;
  CHECK_EQ(rd_get(&none[0], 1, &nb, 60000), 0);
  rd_buf_release(&nb);
  CHECK_EQ(rd_get(&two[0], 1, &nb, 60000), 0);
  uint64_t rep2[2];
  memcpy(rep2, nb.data, sizeof(rep2));
  CHECK_EQ(rep2[1], c);
  uint64_t rep[2];
  for (int i = 0; i < 3; i++) {
    memcpy(rep, small[i].data, sizeof(rep));
    CHECK_EQ(rep[1], c);                /* all ran on c: their big results live there */
    rd_buf_release(&small[i]);
  }
  rd_buf_release(&nb);
  rd_ref_release(mid[0]);
  rd_ref_release(mid[1]);               /* end[1] still needs it: kept by lineage */
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.resources = "only_b=0.1";
  rd_actor ta;                          /* an actor on b, for a call given a lost result */
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &ta), 0);
  CHECK_EQ(actor_add(ta), 1);
  int pid = node_pid("127.0.0.3");
  CHECK(pid > 0);
  CHECK_EQ(kill(pid, SIGKILL), 0);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  /* a new task (no retries of its own) whose argument was lost with c: the
   * argument is rebuilt and the task runs then, without using a retry */
  rd_task_opts uo;
  rd_task_opts_init(&uo);
  uo.num_returns = 2;
  uo.max_retries = 0;
  uo.resources = "only_b=0.1";
  rd_ref use[2];
  CHECK_EQ(rd_submit(digest_and_twist, RD_ARGS(rd_arg_ref(two[1])), &uo, use), 0);
  /* and an actor call given it (no max_task_retries): sent again once the
   * argument is back, as the task is */
  rd_ref acall[2];
  CHECK_EQ(rd_actor_call(ta, Tally_twist, RD_ARGS(rd_arg_ref(two[1])), &uo, acall), 0);
  rd_buf big[2];
  rd_ref gets[2] = {one[1], end[1]};
  int e = rd_get(gets, 2, big, 60000);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  for (int i = 0; e && i < 2; i++)
    if (big[i].error)
      fprintf(stderr, "get %d after the node died: %s: %.*s\n", i, rd_err_name(big[i].error), (int)big[i].size,
              (const char *)big[i].data);
  if (e) {   /* which of them never came back (for a look at the logs) */
    rd_ref all[] = {one[1], end[1], two[1], use[1], end[0], one[0]};
    const char *names[] = {"one[1]", "end[1]", "two[1]", "use[1]", "end[0]", "one[0]"};
    for (int i = 0; i < 6; i++) {
      uint8_t rdy = 0;
      (void)rd_wait(&all[i], 1, 1, 0, &rdy);
      fprintf(stderr, "%s (%llx): %s\n", names[i], (unsigned long long)all[i].id, rdy ? "ready" : "pending");
    }
  }
  CHECK_EQ(e, 0);
  printf("two results (one through a chain of two tasks) rebuilt in %.2f s after node %u died\n",
         (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9, c);
  CHECK(big[0].size == n && big[1].size == n);
  const uint8_t *x = big[0].data, *y = big[1].data;
  for (size_t i = 0; i < n; i++) {
    uint8_t v = (uint8_t)(i * 31 + 7);
    if (x[i] != (uint8_t)(v ^ 0x5a) || y[i] != v) {   /* twisted once; twice = the input */
      fprintf(stderr, "byte %zu: %u %u (input %u)\n", i, x[i], y[i], v);
      CHECK(!"rebuilt result differs");
    }
  }
  rd_buf_release(&big[0]);
  rd_buf_release(&big[1]);
  e = rd_get(&use[1], 1, &big[0], 60000);
  if (e) fprintf(stderr, "task on a lost argument: %s: %.*s\n", rd_err_name(e), (int)big[0].size,
                 (const char *)big[0].data);
  CHECK_EQ(e, 0);
  CHECK_EQ(big[0].size, n);
  x = big[0].data;
  for (size_t i = 0; i < n; i++) CHECK(x[i] == (uint8_t)(i * 31 + 7));   /* twisted twice */
  rd_buf_release(&big[0]);
  e = rd_get(&acall[1], 1, &big[0], 60000);
  if (e) fprintf(stderr, "actor call on a lost argument: %s: %.*s\n", rd_err_name(e), (int)big[0].size,
                 (const char *)big[0].data);
  CHECK_EQ(e, 0);
  CHECK_EQ(big[0].size, n);
  x = big[0].data;
  for (size_t i = 0; i < n; i++) CHECK(x[i] == (uint8_t)(i * 31 + 7));
  rd_buf_release(&big[0]);
  rd_ref_release(acall[0]);
  rd_ref_release(acall[1]);
  rd_ref_release(use[0]);
  rd_ref_release(use[1]);
  rd_ref_release(two[0]);
  rd_ref_release(two[1]);
  /* without retries there is nothing to rebuild it with */
  e = rd_get(&none[1], 1, &nb, 60000);
  CHECK(e == RD_ENODE_DIED || e == RD_EOBJECT_LOST);
  rd_buf_release(&nb);
  rd_ref_release(one[0]);
  rd_ref_release(one[1]);
  rd_ref_release(end[0]);
  rd_ref_release(end[1]);
  rd_ref_release(none[0]);
  rd_ref_release(none[1]);
  rd_ref_release(in);
  rd_shutdown();
  return 0;
}

/* Garbage on a node's link port, and a link without the token: the node
 * drops that connection and keeps serving. */
static int t_bad_link(void) {
  char path[512], v[32];
  session_path(path, sizeof(path), "127.0.0.2", "cluster");
  FILE *f = fopen(path, "r");
  CHECK(f != NULL);
  int port = 0;
  char line[256];
  while (fgets(line, sizeof(line), f))
    if (sscanf(line, "link_port=%31s", v) == 1) port = atoi(v);
  fclose(f);
  CHECK(port > 0);
  for (int round = 0; round < 3; round++) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, "127.0.0.2", &a.sin_addr);
    CHECK_EQ(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    if (round == 0) {   /* not a frame at all */
      const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
      CHECK(write(fd, junk, sizeof(junk)) > 0);
    } else if (round == 1) {   /* a frame claiming 1 GiB */
      uint8_t h[8] = {0, 0, 0, 0x40, 30, 0, 0, 0};
      CHECK(write(fd, h, 8) == 8);
    } else {   /* a well-formed link hello with a wrong token (field 1, "nope") */
      uint8_t fr[8 + 6] = {6, 0, 0, 0, 30, 0, 0, 0, 0x0a, 4, 'n', 'o', 'p', 'e'};
      CHECK(write(fd, fr, sizeof(fr)) == (ssize_t)sizeof(fr));
    }
    /* the node closes the connection (after an error frame, maybe) */
    char buf[256];
    ssize_t r;
    int closed = 0;
    for (int i = 0; i < 50 && !closed; i++) {
      r = read(fd, buf, sizeof(buf));
      if (r == 0 || (r < 0 && errno != EINTR)) closed = 1;
    }
    close(fd);
    CHECK(closed);
  }
  /* and it still runs work */
  join();
  CHECK(run_where("only_b=1") > 0);
  rd_shutdown();
  return 0;
}

/* A driver with a wrong token is refused with RD_EAUTH. */
static int t_bad_token(void) {
  rd_config cfg;
  rd_config_init(&cfg);
  int r = rd_init(&cfg);
  printf("rd_init with a tampered token: %s\n", rd_err_name(r));
  CHECK_EQ(r, RD_EAUTH);
  return 0;
}

/* ------------------------------------------------------ placement groups */

static rd_pg pg_make(const rd_bundle *b, size_t n, int strategy, const char *name, rd_pg_info *info) {
  rd_pg pg;
  CHECK_EQ(rd_pg_create(b, n, strategy, name, &pg), 0);
  CHECK_EQ(rd_pg_wait(pg, 30000), 0);
  CHECK_EQ(rd_pg_info_get(pg, info), 0);
  CHECK_EQ(info->state, RD_PG_STATE_CREATED);
  CHECK_EQ(info->num_bundles, n);
  return pg;
}

/* For the burst_claim case (the head retries a refused reservation only
 * after 600 s): three groups of one 2-CPU bundle, created at once, are
 * reserved on the three nodes, and then three 2-CPU actors run on the three.
 * Each is placed before the next view: a bundle or actor sent to b or c
 * must be claimed out of the head's view, or the next one goes to the same
 * node, where a group is refused and waits out the retry, and an actor
 * waits for good.  Then each again, 0.6 s apart: a view comes between
 * each two, made of reports sent before the bundle or actor got there, and
 * must not give its room back. */
static int t_burst_claim(void) {
  join();
  rd_bundle two = {.num_cpus = 2};
  for (int round = 0; round < 2; round++) {
    useconds_t gap = round ? 600000 : 0;
    rd_pg pg[3];
    double t0 = now_s();
    for (int i = 0; i < 3; i++) {
      if (i && gap) usleep(gap);
      CHECK_EQ(rd_pg_create(&two, 1, RD_PG_PACK, NULL, &pg[i]), 0);
    }
    uint32_t seen[3];
    for (int i = 0; i < 3; i++) {
      int e = rd_pg_wait(pg[i], 20000);
      rd_pg_info info;
      CHECK_EQ(rd_pg_info_get(pg[i], &info), 0);
      if (e != 0) fprintf(stderr, "round %d, group %d: %s (state %d)\n", round, i, rd_err_name(e), info.state);
      CHECK_EQ(e, 0);
      seen[i] = info.bundle_nodes[0];
      for (int j = 0; j < i; j++) CHECK(seen[j] != seen[i]);
    }
    printf("three 2-CPU groups created %s: reserved on nodes %u, %u and %u after %.2f s\n",
           gap ? "0.6 s apart" : "at once", seen[0], seen[1], seen[2], now_s() - t0);
    for (int i = 0; i < 3; i++) CHECK_EQ(rd_pg_remove(pg[i]), 0);
    usleep(1200000);   /* every view shows the groups gone */
  }
  /* the same for actors, which hold their CPUs for life: one queued behind
   * another on a node would wait there for good (actor placements are not
   * respilled) */
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.num_cpus = 2;
  for (int round = 0; round < 2; round++) {
    useconds_t gap = round ? 600000 : 0;
    rd_actor act[3];
    double t0 = now_s();
    for (int i = 0; i < 3; i++) {
      if (i && gap) usleep(gap);
      CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &act[i]), 0);
    }
    long where[3][2];
    for (int i = 0; i < 3; i++) {
      rd_ref r;
      CHECK_EQ(rd_actor_call(act[i], Tally_where, RD_NO_ARGS, NULL, &r), 0);
      rd_buf b;
      int e = rd_get(&r, 1, &b, 10000);
      if (e != 0) fprintf(stderr, "round %d, actor %d: %s\n", round, i, rd_err_name(e));
      CHECK_EQ(e, 0);
      memcpy(where[i], b.data, sizeof(where[i]));
      rd_buf_release(&b);
      rd_ref_release(r);
      for (int j = 0; j < i; j++) CHECK(where[j][0] != where[i][0]);
    }
    printf("three 2-CPU actors created %s: on nodes %ld, %ld and %ld after %.2f s\n", gap ? "0.6 s apart" : "at once",
           where[0][0], where[1][0], where[2][0], now_s() - t0);
    for (int i = 0; i < 3; i++) CHECK_EQ(rd_actor_kill(act[i], 1), 0);
    if (!round) usleep(1200000);   /* every view shows them gone */
  }
  rd_shutdown();
  return 0;
}

/* A blocker actor with ao's resources pinned to each of nodes 1-3 (hard
 * affinity), each running. */
static void pin_blockers(const rd_actor_opts *ao, rd_actor blk[4]) {
  for (uint32_t i = 1; i <= 3; i++) {
    rd_actor_opts po = *ao;
    po.strategy = RD_STRATEGY_NODE_AFFINITY;
    po.node = i;
    CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &po, &blk[i]), 0);
    long w[2];
    CHECK_EQ(actor_where_in(blk[i], 20000, w), 0);
    CHECK_EQ(w[0], (long)i);
  }
}

/* An actor like ao's with label selector zone=east and fallback zone=west
 * (c, then b), created while it cannot start. */
static rd_actor east_west_waiting(const rd_actor_opts *ao) {
  rd_actor y;
  rd_actor_opts yo = *ao;
  yo.label_selector = "zone=east";
  yo.fallback_label_selectors = "zone=west";
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &yo, &y), 0);
  long w[2];
  CHECK_EQ(actor_where_in(y, 1500, w), RD_ETIMEDOUT);
  return y;
}

/* Actor a starts on node `node` without a restart (said with what, and the
 * time since t0). */
static void starts_on(rd_actor a, long node, const char *what, double t0) {
  long w[2];
  int e = actor_where_in(a, 20000, w);
  if (e != 0) fprintf(stderr, "%s: %s\n", what, rd_err_name(e));
  CHECK_EQ(e, 0);
  printf("%s: runs on node %ld %.2f s after (restarts %ld)\n", what, w[0], now_s() - t0, w[1]);
  CHECK_EQ(w[0], node);
  CHECK_EQ(w[1], 0);
}

/* For the actor_respill case: a pending actor that waits on a full node
 * moves to a node that has room later, not only once its own node frees
 * (Ray spills actor creations back like tasks).  Three 2-CPU blockers
 * pinned one to each node; z (2 CPUs) waits on the head, its record node;
 * the blocker on c goes, and z runs on c.  Then y (2 CPUs, label selector
 * zone=east with fallback zone=west) waits on c, which hosts it for the
 * head (the head has no labels); the blocker on b goes, and c gives y back
 * to the head, which places it on b.  Neither move is a restart: both have
 * max_restarts 0, and report 0 restarts. */
static int t_actor_respill(void) {
  join();
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.num_cpus = 2;
  rd_actor blk[4];
  long w[2];
  pin_blockers(&ao, blk);
  rd_actor z;
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &z), 0);
  CHECK_EQ(actor_where_in(z, 1500, w), RD_ETIMEDOUT);   /* no room anywhere: it waits */
  double t0 = now_s();
  CHECK_EQ(rd_actor_kill(blk[3], 1), 0);
  starts_on(z, 3, "an actor waiting on its record node (1), c freed", t0);
  rd_actor y = east_west_waiting(&ao);
  t0 = now_s();
  CHECK_EQ(rd_actor_kill(blk[2], 1), 0);
  starts_on(y, 2, "an actor waiting on the node hosting it (3), b freed", t0);
  CHECK_EQ(rd_actor_kill(blk[1], 1), 0);
  CHECK_EQ(rd_actor_kill(z, 1), 0);
  CHECK_EQ(rd_actor_kill(y, 1), 0);
  rd_shutdown();
  return 0;
}

/* For the actor_host_gone case: an actor sent to a node that dies before
 * it starts there is placed again, not restarted (it has max_restarts 0:
 * a restart would end it).  With a 2-CPU blocker pinned on each node, y
 * (2 CPUs, zone=east with fallback zone=west) waits on c, which hosts it;
 * c is killed, y waits on b, and runs there once b's blocker goes, with 0
 * restarts. */
static int t_actor_host_gone(void) {
  join();
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.num_cpus = 2;
  rd_actor blk[4];
  long w[2];
  pin_blockers(&ao, blk);
  rd_actor y = east_west_waiting(&ao);
  int pid = node_pid("127.0.0.3");
  CHECK(pid > 0);
  double t0 = now_s();
  CHECK_EQ(kill(pid, SIGKILL), 0);
  usleep(1500000);   /* the head sees the link go and places y again: on b, where it waits */
  CHECK_EQ(actor_where_in(y, 500, w), RD_ETIMEDOUT);
  CHECK_EQ(rd_actor_kill(blk[2], 1), 0);
  starts_on(y, 2, "an actor whose host (3) died before it started, b freed", t0);
  CHECK_EQ(rd_actor_kill(blk[1], 1), 0);
  CHECK_EQ(rd_actor_kill(y, 1), 0);
  rd_shutdown();
  return 0;
}

/* Where a task in bundle i of pg runs (asking for cpus of it). */
static uint32_t where_in(rd_pg pg, int i, double cpus) {
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.num_cpus = cpus;
  o.placement_group = pg;
  o.bundle_index = i;
  rd_ref r;
  CHECK_EQ(rd_submit(where, RD_NO_ARGS, &o, &r), 0);
  return node_of(r);
}

/* From a task on another node: find the group by name through the GCS, and
 * run something in each of its bundles from there. */
RD_REMOTE(pg_probe) {
  rd_pg pg;
  if (rd_pg_get("spread3", &pg) != 0) return rd_call_fail(call, "rd_pg_get failed");
  rd_pg_info info;
  if (rd_pg_info_get(pg, &info) != 0 || info.state != RD_PG_STATE_CREATED) return rd_call_fail(call, "info");
  uint32_t out[1 + 3] = {(uint32_t)info.num_bundles};
  for (int i = 0; i < 3 && i < (int)info.num_bundles; i++) {
    rd_task_opts o;
    rd_task_opts_init(&o);
    o.placement_group = pg;
    o.bundle_index = i;
    rd_ref r;
    rd_buf b;
    if (rd_submit(where, RD_NO_ARGS, &o, &r) != 0) return rd_call_fail(call, "submit");
    int e = rd_get(&r, 1, &b, 20000);
    if (e != 0 || b.size != 4) return rd_call_fail(call, "bundle %d: %s", i, rd_err_name(e));
    memcpy(&out[1 + i], b.data, 4);
    rd_buf_release(&b);
    rd_ref_release(r);
  }
  return rd_return_bytes(call, 0, out, sizeof(out));
}

/* From a task on another node: the state of the group named arg0 as that
 * node reads it (0: no such group, or removed). */
RD_REMOTE(pg_seen) {
  char name[64];
  if (arg_name(call, name, sizeof(name)) != 0) return rd_call_fail(call, "name");
  rd_pg pg;
  rd_pg_info info = {0};
  int r = rd_pg_get(name, &pg);
  if (r == 0) r = rd_pg_info_get(pg, &info);
  if (r != 0 && r != RD_ENOENT) return rd_call_fail(call, "%s: %s", name, rd_err_name(r));
  int32_t st = r == 0 ? (int32_t)info.state : 0;
  return rd_return_bytes(call, 0, &st, sizeof(st));
}

static int32_t pg_seen_by(const rd_task_opts *o, const char *name) {
  int32_t st;
  call_named(pg_seen, name, o, &st, sizeof(st));
  return st;
}

/* From a task on another node: remove the group named "doomed" (the
 * removal travels to the node that records it). */
RD_REMOTE(pg_remove_named) {
  rd_pg pg;
  int r = rd_pg_get("doomed", &pg);
  if (r == 0) r = rd_pg_remove(pg);
  if (r != 0) return rd_call_fail(call, "remove: %s", rd_err_name(r));
  return rd_return_bytes(call, 0, &pg.id, sizeof(pg.id));
}

/* Create a group from inside a task (named arg0, else "from_task"); it
 * lives with the job. */
RD_REMOTE(pg_from_task) {
  rd_bundle b = {.num_cpus = 0.5};
  rd_pg pg;
  rd_buf a;
  char name[64] = "from_task";
  if (rd_call_nargs(call) > 0 && rd_arg(call, 0, &a) == 0 && a.size > 0 && a.size < sizeof(name)) {
    memcpy(name, a.data, a.size);
    name[a.size] = 0;
  }
  int r = rd_pg_create(&b, 1, RD_PG_PACK, name, &pg);
  if (r != 0) return rd_call_fail(call, "create: %s", rd_err_name(r));
  return rd_return_bytes(call, 0, &pg.id, sizeof(pg.id));
}

/* A task run with o makes group `name`; it is found by name and reserved. */
static void pg_by_task(const char *name, const rd_task_opts *o) {
  uint64_t made;
  call_named(pg_from_task, name, o, &made, sizeof(made));
  rd_pg pg;
  CHECK_EQ(rd_pg_get(name, &pg), 0);
  CHECK_EQ(pg.id, made);
  CHECK_EQ(rd_pg_wait(pg, 30000), 0);
}

/* Every strategy across three nodes: bundles land where the strategy says,
 * tasks and actors in a bundle run on its node, custom resources steer
 * bundles, a group that cannot fit now waits and one that never can is
 * refused, and removal gives everything back. */
static int t_placement_groups(void) {
  join();
  uint32_t b = run_where("only_b=1"), c = run_where("only_c=1");
  rd_node_info ni;
  CHECK_EQ(rd_node_info_get(&ni), 0);
  uint32_t head = ni.node_index;
  rd_bundle one[3] = {{.num_cpus = 1}, {.num_cpus = 1}, {.num_cpus = 1}};
  rd_pg_info info;

  /* STRICT_SPREAD: three different nodes */
  rd_pg ss = pg_make(one, 3, RD_PG_STRICT_SPREAD, "spread3", &info);
  uint32_t seen = 0;
  for (int i = 0; i < 3; i++) {
    uint32_t n = info.bundle_nodes[i];
    CHECK(n == head || n == b || n == c);
    CHECK((seen & (1u << n)) == 0);
    seen |= 1u << n;
    CHECK_EQ(where_in(ss, i, 1), n);
  }
  /* from a task on node c: by name via the GCS, and into each bundle */
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.num_cpus = 0;
  o.resources = "only_c=1";
  rd_ref r;
  CHECK_EQ(rd_submit(pg_probe, RD_NO_ARGS, &o, &r), 0);
  rd_buf buf;
  int e = rd_get(&r, 1, &buf, 60000);
  if (e != 0) fprintf(stderr, "pg_probe: %s: %.*s\n", rd_err_name(e), (int)buf.size, (const char *)buf.data);
  CHECK_EQ(e, 0);
  uint32_t probe[4];
  CHECK_EQ(buf.size, sizeof(probe));
  memcpy(probe, buf.data, sizeof(probe));
  rd_buf_release(&buf);
  rd_ref_release(r);
  CHECK_EQ(probe[0], 3);
  for (int i = 0; i < 3; i++) CHECK_EQ(probe[1 + i], info.bundle_nodes[i]);
  /* an actor in the bundle on node b */
  int on_b = -1;
  for (int i = 0; i < 3; i++)
    if (info.bundle_nodes[i] == b) on_b = i;
  CHECK(on_b >= 0);
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.num_cpus = 1;
  ao.placement_group = ss;
  ao.bundle_index = on_b;
  rd_actor t;
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &t), 0);
  long w[2];
  actor_where(t, w);
  CHECK_EQ((uint32_t)w[0], b);
  CHECK_EQ(actor_add(t), 1);
  /* a fourth STRICT_SPREAD bundle has no node to go to */
  rd_bundle four[4] = {{.num_cpus = 1}, {.num_cpus = 1}, {.num_cpus = 1}, {.num_cpus = 1}};
  rd_pg bad;
  CHECK_EQ(rd_pg_create(four, 4, RD_PG_STRICT_SPREAD, NULL, &bad), RD_EINFEASIBLE);
  CHECK_EQ(rd_pg_create(one, 1, RD_PG_PACK, "spread3", &bad), RD_EEXIST);   /* cluster-wide names */
  CHECK_EQ(rd_pg_remove(ss), 0);
  /* the actor went with its group */
  CHECK_EQ(rd_actor_call(t, Tally_add, RD_NO_ARGS, NULL, &r), 0);
  CHECK(rd_get(&r, 1, &buf, 60000) == RD_EACTOR_DIED);
  rd_buf_release(&buf);
  rd_ref_release(r);

  /* STRICT_PACK: both on one node; PACK: one node while it fits */
  rd_pg sp = pg_make(one, 2, RD_PG_STRICT_PACK, NULL, &info);
  CHECK_EQ(info.bundle_nodes[0], info.bundle_nodes[1]);
  CHECK_EQ(where_in(sp, 1, 1), info.bundle_nodes[1]);
  CHECK_EQ(rd_pg_remove(sp), 0);
  rd_pg pk = pg_make(one, 2, RD_PG_PACK, NULL, &info);
  CHECK_EQ(info.bundle_nodes[0], info.bundle_nodes[1]);
  CHECK_EQ(rd_pg_remove(pk), 0);
  /* SPREAD: three bundles, three nodes (each has room, once the view
   * shows the groups above gone: a node PACK filled looks full for up to
   * a second, and SPREAD then doubles up elsewhere; seen under load) */
  usleep(1200000);
  rd_pg sd = pg_make(one, 3, RD_PG_SPREAD, NULL, &info);
  CHECK(info.bundle_nodes[0] != info.bundle_nodes[1] && info.bundle_nodes[1] != info.bundle_nodes[2] &&
        info.bundle_nodes[0] != info.bundle_nodes[2]);
  CHECK_EQ(rd_pg_remove(sd), 0);
  /* a custom resource only node c has steers the bundle there */
  rd_bundle cb = {.num_cpus = 1, .resources = "only_c=1"};
  rd_pg cp = pg_make(&cb, 1, RD_PG_PACK, NULL, &info);
  CHECK_EQ(info.bundle_nodes[0], c);
  CHECK_EQ(where_in(cp, 0, 1), c);
  CHECK_EQ(rd_pg_remove(cp), 0);

  /* past 64 bundles (it was the limit): 300 SPREAD over the three nodes,
   * every bundle's node read back, tasks in bundles past the first 64 run
   * where those say */
  enum { MANY = 300 };
  rd_bundle *many = calloc(MANY, sizeof(*many));
  CHECK(many != NULL);
  for (int i = 0; i < MANY; i++) many[i].num_cpus = 0.001;
  usleep(1200000);   /* as for SPREAD above: the view shows the group on c gone */
  rd_pg mg = pg_make(many, MANY, RD_PG_SPREAD, "many", &info);
  uint32_t mn[MANY];
  size_t mcount = 0;
  CHECK_EQ(rd_pg_bundle_nodes(mg, mn, MANY, &mcount), 0);
  CHECK_EQ(mcount, MANY);
  int per_node[3] = {0, 0, 0};
  for (int i = 0; i < MANY; i++) {
    CHECK(mn[i] == head || mn[i] == b || mn[i] == c);
    per_node[mn[i] == head ? 0 : mn[i] == b ? 1 : 2]++;
    if (i < RD_PG_INFO_NODES) CHECK_EQ(info.bundle_nodes[i], mn[i]);
  }
  fprintf(stderr, "many: %d on the head, %d on b, %d on c\n", per_node[0], per_node[1], per_node[2]);
  CHECK(per_node[0] == MANY / 3 && per_node[1] == MANY / 3 && per_node[2] == MANY / 3);
  for (int i = MANY - 3; i < MANY; i++) CHECK_EQ(where_in(mg, i, 0.001), mn[i]);
  CHECK_EQ(where_in(mg, 100, 0.001), mn[100]);
  CHECK_EQ(rd_pg_remove(mg), 0);
  free(many);

  /* removed from a task on node c, recorded here */
  rd_pg doomed = pg_make(one, 2, RD_PG_SPREAD, "doomed", &info);
  CHECK_EQ(rd_submit(pg_remove_named, RD_NO_ARGS, &o, &r), 0);   /* o: on node c */
  e = rd_get(&r, 1, &buf, 60000);
  if (e != 0) fprintf(stderr, "pg_remove_named: %s: %.*s\n", rd_err_name(e), (int)buf.size, (const char *)buf.data);
  CHECK_EQ(e, 0);
  uint64_t gone;
  memcpy(&gone, buf.data, sizeof(gone));
  rd_buf_release(&buf);
  rd_ref_release(r);
  CHECK_EQ(gone, doomed.id);
  CHECK_EQ(rd_pg_info_get(doomed, &info), 0);
  CHECK_EQ(info.state, RD_PG_STATE_REMOVED);
  CHECK_EQ(rd_pg_wait(doomed, 1000), RD_EPG_REMOVED);

  /* once rd_pg_wait or rd_pg_remove returns here, node c reads the same:
   * the GCS has it before they answer */
  for (int i = 0; i < 10; i++) {
    char name[32];
    snprintf(name, sizeof(name), "seen%d", i);
    rd_pg g = pg_make(one, 1, RD_PG_PACK, name, &info);
    CHECK_EQ(pg_seen_by(&o, name), RD_PG_STATE_CREATED);
    CHECK_EQ(rd_pg_remove(g), 0);
    CHECK_EQ(pg_seen_by(&o, name), 0);
  }

  /* made by a task on this (the head) node: outlives the task, ends with
   * the job (the script checks that nothing is live after the driver) */
  rd_task_opts ho;
  rd_task_opts_init(&ho);
  ho.num_cpus = 0;
  ho.strategy = RD_STRATEGY_NODE_AFFINITY;
  ho.node = head;
  pg_by_task("from_task", &ho);

  /* all CPUs reserved: a new group waits, and is reserved after removal */

  rd_bundle almost[3] = {{.num_cpus = 1}, {.num_cpus = 2}, {.num_cpus = 2}};   /* the head keeps 0.5 for ft */
  rd_pg all = pg_make(almost, 3, RD_PG_STRICT_SPREAD, NULL, &info);
  rd_pg later;
  CHECK_EQ(rd_pg_create(one, 1, RD_PG_PACK, NULL, &later), 0);
  CHECK_EQ(rd_pg_wait(later, 1000), RD_ETIMEDOUT);
  /* a named actor waiting in a group that is removed: dead, its name free */
  rd_pg pend;
  CHECK_EQ(rd_pg_create(one, 1, RD_PG_PACK, NULL, &pend), 0);
  rd_actor_opts_init(&ao);
  ao.num_cpus = 1;
  ao.name = "waiter";
  ao.placement_group = pend;
  rd_actor waiter;
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &waiter), 0);
  CHECK_EQ(rd_pg_remove(pend), 0);
  CHECK_EQ(rd_actor_call(waiter, Tally_add, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(rd_get(&r, 1, &buf, 60000), RD_EACTOR_DIED);
  rd_buf_release(&buf);
  rd_ref_release(r);
  int freed = 0;
  for (int i = 0; i < 60 && !freed; i++) {
    rd_actor x;
    freed = rd_actor_get("waiter", &x) == RD_ENOENT;
    if (!freed) usleep(50000);
  }
  CHECK(freed);
  CHECK_EQ(rd_pg_remove(all), 0);
  CHECK_EQ(rd_pg_wait(later, 30000), 0);
  CHECK_EQ(rd_pg_remove(later), 0);
  /* removed everywhere: every node's CPUs come back (within a heartbeat) */
  for (int i = 0; i < 3; i++) {
    rd_pg chk = pg_make(almost, 3, RD_PG_STRICT_SPREAD, NULL, &info);
    CHECK_EQ(rd_pg_remove(chk), 0);
  }
  /* a group made by a task on node c, where no driver of this job runs:
   * node c learns from the GCS that the job ended (the script checks that
   * it goes with the job) */
  rd_task_opts co;
  rd_task_opts_init(&co);
  co.num_cpus = 0;
  co.resources = "only_c=1";
  pg_by_task("from_task_c", &co);
  /* and one made by an actor placed on node c: it goes with the job too */
  rd_actor_opts tao;
  rd_actor_opts_init(&tao);
  tao.resources = "only_c=1";
  rd_actor ta;
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &tao, &ta), 0);
  rd_ref made;
  CHECK_EQ(rd_actor_call(ta, Tally_make_pg, RD_ARGS(rd_arg_bytes("from_actor_c", 12)), NULL, &made), 0);
  rd_buf mbuf;
  CHECK_EQ(rd_get(&made, 1, &mbuf, 60000), 0);
  rd_buf_release(&mbuf);
  rd_ref_release(made);
  rd_pg apg;
  CHECK_EQ(rd_pg_get("from_actor_c", &apg), 0);
  CHECK_EQ(rd_pg_wait(apg, 30000), 0);
  rd_shutdown();
  return 0;
}

/* A bundle's node dies: the group is reserved again without it, and an
 * actor in that bundle restarts where the bundle went. */
static int t_pg_node_death(void) {
  join();
  uint32_t c = run_where("only_c=1");
  rd_bundle one[3] = {{.num_cpus = 1}, {.num_cpus = 1}, {.num_cpus = 1}};
  rd_pg_info info;
  rd_pg pg = pg_make(one, 3, RD_PG_SPREAD, NULL, &info);
  int on_c = -1;
  for (int i = 0; i < 3; i++)
    if (info.bundle_nodes[i] == c) on_c = i;
  CHECK(on_c >= 0);
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.num_cpus = 1;
  ao.max_restarts = 1;
  ao.placement_group = pg;
  ao.bundle_index = on_c;
  rd_actor t;
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &t), 0);
  long w[2];
  actor_where(t, w);
  CHECK_EQ((uint32_t)w[0], c);
  int pid = node_pid("127.0.0.3");
  CHECK(pid > 0);
  CHECK_EQ(kill(pid, SIGKILL), 0);
  /* reserved again elsewhere within a few seconds */
  int moved = 0;
  for (int i = 0; i < 200 && !moved; i++) {
    usleep(100000);
    CHECK_EQ(rd_pg_info_get(pg, &info), 0);
    moved = info.state == RD_PG_STATE_CREATED && info.bundle_nodes[on_c] && info.bundle_nodes[on_c] != c;
  }
  CHECK(moved);
  printf("bundle %d moved from node %u to node %u\n", on_c, c, info.bundle_nodes[on_c]);
  CHECK_EQ(where_in(pg, on_c, 0), info.bundle_nodes[on_c]);   /* the actor holds its CPU */
  long w2[2];
  actor_where(t, w2);
  CHECK_EQ((uint32_t)w2[0], info.bundle_nodes[on_c]);
  CHECK_EQ(w2[1], 1);
  CHECK_EQ(rd_pg_remove(pg), 0);
  rd_shutdown();
  return 0;
}

/* Two programs at once (see the two_jobs case of cluster_test.sh): wait
 * until the other one has reached the same point (files in $RD_TWO_JOBS_DIR,
 * named by phase and $RD_TWO_JOBS_TAG, "a" or "b"), so their work overlaps. */
static const char *two_jobs_barrier(const char *phase) {
  const char *dir = getenv("RD_TWO_JOBS_DIR"), *tag = getenv("RD_TWO_JOBS_TAG");
  CHECK(dir && tag);
  char path[600];
  snprintf(path, sizeof(path), "%s/%s.%s", dir, phase, tag);
  FILE *f = fopen(path, "w");
  CHECK(f);
  fclose(f);
  int both = 0;
  for (int i = 0; i < 600 && !both; i++) {   /* up to 30 s for the other job */
    snprintf(path, sizeof(path), "%s/%s.%s", dir, phase, strcmp(tag, "a") ? "a" : "b");
    both = access(path, F_OK) == 0;
    if (!both) usleep(50000);
  }
  CHECK(both);
  return tag;
}

/* n tasks with opts o (each sleeping ms): every one must have run this
 * program's executable; returns how many nodes ran them. */
static int run_own_code(const char *tag, const rd_task_opts *o, int n, uint32_t ms) {
  struct stat me;
  CHECK_EQ(stat("/proc/self/exe", &me), 0);
  int seen[4096] = {0}, distinct = 0;
  rd_ref refs[64];
  CHECK(n <= 64);
  for (int i = 0; i < n; i++) CHECK_EQ(rd_submit(exe_size_where, RD_ARGS(rd_arg_bytes(&ms, 4)), o, &refs[i]), 0);
  for (int i = 0; i < n; i++) {
    rd_buf b;
    int e = rd_get(&refs[i], 1, &b, 60000);
    if (e != 0) {
      fprintf(stderr, "job %s: task %d: %s: %.*s\n", tag, i, rd_err_name(e), (int)b.size, (const char *)b.data);
      exit(1);
    }
    uint64_t v[2];
    CHECK_EQ(b.size, sizeof(v));
    memcpy(v, b.data, sizeof(v));
    if (v[0] != (uint64_t)me.st_size) {
      fprintf(stderr, "job %s: a task on node %llu ran an executable of %llu bytes, not this job's %lld\n", tag,
              (unsigned long long)v[1], (unsigned long long)v[0], (long long)me.st_size);
      exit(1);
    }
    if (!seen[v[1] & 4095]++) distinct++;
    rd_buf_release(&b);
    rd_ref_release(refs[i]);
  }
  return distinct;
}

/* Two different programs drive the cluster at once (the script runs this
 * binary and a copy with one byte appended, so its code hash differs): each
 * one's tasks and actors, on every node, run its own executable. */
static int t_two_jobs(void) {
  join();   /* first: the workers, this program too, become workers there */
  const char *tag = two_jobs_barrier("ready");
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.strategy = RD_STRATEGY_SPREAD;
  int distinct = 0;
  for (int round = 0; round < 4; round++) {
    int d = run_own_code(tag, &o, 30, 60);
    if (d > distinct) distinct = d;
  }
  CHECK(distinct >= 3);
  /* an actor on each other node runs this job's code too */
  struct stat me;
  CHECK_EQ(stat("/proc/self/exe", &me), 0);
  const char *where_res[] = {"only_b=0.01", "only_c=0.01"};
  for (int k = 0; k < 2; k++) {
    rd_actor_opts ao;
    rd_actor_opts_init(&ao);
    ao.resources = where_res[k];
    rd_actor a;
    CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &a), 0);
    rd_ref r;
    CHECK_EQ(rd_actor_call(a, Tally_exe_size, RD_NO_ARGS, NULL, &r), 0);
    rd_buf b;
    CHECK_EQ(rd_get(&r, 1, &b, 60000), 0);
    uint64_t v;
    CHECK_EQ(b.size, sizeof(v));
    memcpy(&v, b.data, sizeof(v));
    CHECK_EQ(v, (uint64_t)me.st_size);
    rd_buf_release(&b);
    rd_ref_release(r);
    CHECK_EQ(rd_actor_kill(a, 1), 0);
  }
  printf("job %s (%lld bytes): 120 tasks on %d nodes and 2 actors ran its own executable\n", tag,
         (long long)me.st_size, distinct);
  rd_shutdown();
  return 0;
}

/* Both programs as drivers on node d, whose pool is 2 workers: each one's
 * prestart and tasks (a tenth of a CPU each, so the pool binds, not the
 * CPUs) stop the other's idle workers to start its own. */
static int t_two_jobs_local(void) {
  join();
  const char *tag = two_jobs_barrier("local");
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.num_cpus = 0.1;
  o.resources = "only_d=0.01";
  for (int round = 0; round < 3; round++) CHECK_EQ(run_own_code(tag, &o, 20, 20), 1);
  printf("job %s: 60 tasks on the 2-worker node ran its own executable\n", tag);
  rd_shutdown();
  return 0;
}

/* lease_reuse: run as two drivers one after the other.  The first keeps
 * six leases on node b busy and exits the moment its results are in, while
 * it still holds them; the second must get some of the same worker
 * processes back: a remote lease whose owner goes away with nothing in flight
 * is returned, its worker kept, not killed as if it were mid-task. */
static int t_lease_reuse(void) {
  join();
  const char *file = getenv("RD_PIDS_FILE");
  CHECK(file != NULL);
  int second = access(file, F_OK) == 0;
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.num_cpus = 0.1;
  o.resources = "only_b=0.1";
  int32_t pids[16];
  int n = second ? 12 : 6;
  rd_ref refs[16];
  uint32_t ms = second ? 0 : 150;
  for (int i = 0; i < n; i++) CHECK_EQ(rd_submit(slow_pid, RD_ARGS(rd_arg_bytes(&ms, 4)), &o, &refs[i]), 0);
  for (int i = 0; i < n; i++) {
    rd_buf b;
    CHECK_EQ(rd_get(&refs[i], 1, &b, 60000), 0);
    memcpy(&pids[i], b.data, sizeof(pids[i]));
    rd_buf_release(&b);
  }
  if (!second) {   /* out at once, leases still held */
    FILE *f = fopen(file, "w");
    CHECK(f);
    for (int i = 0; i < n; i++) fprintf(f, "%d\n", (int)pids[i]);
    fclose(f);
    printf("first driver: 6 tasks on node b, exiting with its leases\n");
    rd_shutdown();
    return 0;
  }
  FILE *f = fopen(file, "r");
  CHECK(f);
  int old, reused = 0;
  while (fscanf(f, "%d", &old) == 1)
    for (int i = 0; i < n; i++)
      if (pids[i] == old) { reused++; break; }
  fclose(f);
  printf("second driver: %d of the first driver's worker processes ran its tasks\n", reused);
  CHECK(reused > 0);
  rd_shutdown();
  return 0;
}

/* ------------------------------------------------------------ cancel */

/* rd_cancel with force on a task spilled to node b: the worker there is
 * killed over the link, the get fails with RD_ECANCELED, and node b runs
 * the next task on a new worker. */
static int t_cancel(void) {
  join();
  uint32_t b = run_where("only_b=1");
  char path[256];
  snprintf(path, sizeof(path), "/tmp/rd-cl-cancel-%d", (int)getpid());
  unlink(path);
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_b=1";
  rd_ref r;
  long ms = 20000;
  CHECK_EQ(rd_submit(pid_file_sleep, RD_ARGS(rd_arg_bytes(path, strlen(path)), rd_arg_bytes(&ms, sizeof(ms))), &o, &r),
           0);
  int pid = pid_file_wait(path, r);
  CHECK(pid > 0);
  CHECK_EQ(rd_cancel(r, 1), 0);
  rd_buf bb;
  CHECK_EQ(rd_get(&r, 1, &bb, 5000), RD_ECANCELED);
  rd_buf_release(&bb);
  int gone = pid_gone(pid);
  printf("worker %d on node %u gone: %d\n", pid, b, gone);
  CHECK(gone);
  CHECK_EQ(run_where("only_b=1"), b);
  /* without force: the cancel travels over the link to the task, which
   * polls rd_call_cancelled and stops, so node b serves the next at once */
  ms = 20000;
  CHECK_EQ(rd_submit(until_cancelled, RD_ARGS(rd_arg_bytes(&ms, sizeof(ms))), &o, &r), 0);
  CHECK_EQ(rd_wait(&r, 1, 1, 1000, NULL), 0);   /* running there */
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  CHECK_EQ(rd_cancel(r, 0), 0);
  CHECK_EQ(rd_get(&r, 1, &bb, 5000), RD_ECANCELED);
  rd_buf_release(&bb);
  CHECK_EQ(run_where("only_b=1"), b);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double took = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
  printf("cooperative cancel on node %u: next task ran there %.3f s later\n", b, took);
  CHECK(took < 3.0);
  rd_shutdown();
  return 0;
}

/* ------------------------------------------------------- memory monitor */

/* Node d (cluster_test.sh starts it with a 400 MiB worker memory limit)
 * kills a task spilled there from this driver's node for using too much
 * memory; the reason travels back over the link into the task's error. */
static int t_memory_remote(void) {
  join();
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_d=1";
  o.max_retries = 0;
  long big = 1536, small = 32;
  rd_ref r;
  CHECK_EQ(rd_submit(hog, RD_ARGS(rd_arg_bytes(&big, sizeof(big))), &o, &r), 0);
  rd_buf b;
  int e = rd_get(&r, 1, &b, 60000);
  printf("1.5 GiB task on node d: %s: %.*s\n", rd_err_name(e), (int)b.size, (const char *)b.data);
  CHECK_EQ(e, RD_EOOM);
  CHECK(strstr((const char *)b.data, "memory monitor") != NULL);
  rd_buf_release(&b);
  CHECK_EQ(rd_submit(hog, RD_ARGS(rd_arg_bytes(&small, sizeof(small))), &o, &r), 0);
  CHECK_EQ(rd_get(&r, 1, &b, 60000), 0);   /* within the limit: runs */
  CHECK(b.size == sizeof(long) && memcmp(b.data, &small, sizeof(small)) == 0);
  rd_buf_release(&b);
  rd_shutdown();
  return 0;
}

/* ------------------------------------------------------- detached actors */

static rd_actor make_tally(const char *name, int detached, const char *res, double cpus, uint32_t node,
                           int max_restarts) {
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.name = name;
  ao.detached = detached;
  ao.resources = res;
  ao.num_cpus = cpus;
  ao.max_restarts = max_restarts;
  if (node != UINT32_MAX) {
    ao.strategy = RD_STRATEGY_NODE_AFFINITY;
    ao.node = node;
  }
  rd_actor a;
  int e = rd_actor_create(Tally, RD_NO_ARGS, &ao, &a);
  if (e != 0) fprintf(stderr, "create %s: %s\n", name ? name : "(anonymous)", rd_err_name(e));
  CHECK_EQ(e, 0);
  return a;
}

static rd_actor get_named(const char *name) {
  rd_actor a;
  int e = rd_actor_get(name, &a);
  if (e != 0) fprintf(stderr, "rd_actor_get %s: %s\n", name, rd_err_name(e));
  CHECK_EQ(e, 0);
  return a;
}

/* First driver: detached actors that must outlive it (one hosted on node b
 * for a record kept here, one here, one still waiting for this node's CPUs
 * when the driver leaves) and an ordinary named actor that must not. */
/* ---- namespaces across drivers and nodes (RAYDIST_NAMESPACE set by the script) */

/* "<namespace>:<svc's next tally>" as seen from here, ":-" without svc */
static int ns_seen(rd_call *call) {
  rd_actor svc;
  char out[300];
  int n;
  if (rd_actor_get("svc", &svc) == 0) n = snprintf(out, sizeof(out), "%s:%ld", rd_namespace(), actor_add(svc));
  else n = snprintf(out, sizeof(out), "%s:-", rd_namespace());
  return rd_return_bytes(call, 0, out, (size_t)n);
}

RD_REMOTE(ns_task) { return ns_seen(call); }

RD_ACTOR_METHOD(Tally, ns_probe) {
  (void)state;
  return ns_seen(call);
}

static void ns_expect(rd_ref r, const char *want) {
  rd_buf b;
  int e = rd_get(&r, 1, &b, 60000);
  if (e != 0) fprintf(stderr, "want %s: %s: %.*s\n", want, rd_err_name(e), e == RD_ETIMEDOUT ? 0 : (int)b.size,
                      e == RD_ETIMEDOUT ? "" : (const char *)b.data);
  CHECK_EQ(e, 0);
  if (b.size != strlen(want) || memcmp(b.data, want, b.size)) {
    fprintf(stderr, "got %.*s, want %s\n", (int)b.size, (const char *)b.data, want);
    CHECK(0);
  }
  rd_buf_release(&b);
  rd_ref_release(r);
}

/* team_a's first driver: a detached svc on node b; a task on node c and an
 * anonymous actor on node c, both of team_a, find it there. */
static int t_ns_make(void) {
  join();
  CHECK(!strcmp(rd_namespace(), "team_a"));
  rd_actor svc = make_tally("svc", 1, "only_b=0.1", 0, UINT32_MAX, 0);
  CHECK_EQ(actor_add(svc), 1);
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_c=0.1";
  rd_ref r;
  CHECK_EQ(rd_submit(ns_task, RD_NO_ARGS, &o, &r), 0);
  ns_expect(r, "team_a:2");
  rd_actor probe = make_tally(NULL, 0, "only_c=0.1", 0, UINT32_MAX, 0);
  CHECK_EQ(rd_actor_call(probe, Tally_ns_probe, RD_NO_ARGS, NULL, &r), 0);
  ns_expect(r, "team_a:3");
  rd_shutdown();
  return 0;
}

/* team_b: its own svc on node b (an actor hosted for another node learns
 * its namespace), team_a's reached only by naming team_a. */
static int t_ns_other(void) {
  join();
  CHECK(!strcmp(rd_namespace(), "team_b"));
  rd_actor a;
  CHECK_EQ(rd_actor_get("svc", &a), RD_ENOENT);
  CHECK_EQ(rd_actor_get_in("team_a", "svc", &a), 0);
  CHECK_EQ(actor_add(a), 4);
  rd_actor mine = make_tally("svc", 0, "only_b=0.1", 0, UINT32_MAX, 0);
  CHECK(mine.id != a.id);
  rd_actor probe = make_tally(NULL, 0, "only_b=0.1", 0, UINT32_MAX, 0);
  rd_ref r;
  CHECK_EQ(rd_actor_call(probe, Tally_ns_probe, RD_NO_ARGS, NULL, &r), 0);
  ns_expect(r, "team_b:1");
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_c=0.1";
  CHECK_EQ(rd_submit(ns_task, RD_NO_ARGS, &o, &r), 0);
  ns_expect(r, "team_b:2");
  rd_shutdown();
  return 0;
}

/* team_a again: its svc has its state; killed for good, the name is free. */
static int t_ns_same(void) {
  join();
  rd_actor a;
  CHECK_EQ(rd_actor_get("svc", &a), 0);
  CHECK_EQ(actor_add(a), 5);
  CHECK_EQ(rd_actor_kill(a, 1), 0);
  CHECK_EQ(rd_actor_get("svc", &a), RD_ENOENT);
  rd_shutdown();
  return 0;
}

/* Run on node c by the first detached driver: two groups made by a task,
 * one of them detached; 0 once both are reserved. */
RD_REMOTE(make_task_pgs) {
  rd_bundle b = {.resources = "pool=0.25"};
  rd_pg_opts o;
  rd_pg_opts_init(&o);
  o.name = "task-pg";
  o.detached = 1;
  rd_pg kept, dropped;
  long r = rd_pg_create_with(&b, 1, &o, &kept);
  if (!r) r = rd_pg_wait(kept, 30000);
  o.name = "task-pg-drop";
  o.detached = 0;
  if (!r) r = rd_pg_create_with(&b, 1, &o, &dropped);
  if (!r) r = rd_pg_wait(dropped, 30000);
  return rd_return_bytes(call, 0, &r, sizeof(r));
}

/* The first driver's placement groups: detached ones from the driver and
 * from a task on node c, and one of each that is not. */
static void detached_pgs_make(void) {
  rd_bundle b[2] = {{.resources = "pool=0.25"}, {.resources = "pool=0.25"}};
  rd_pg_opts o;
  rd_pg_opts_init(&o);
  o.strategy = RD_PG_STRICT_SPREAD;   /* on b and c, the nodes with pool */
  o.name = "kept-pg";
  o.detached = 1;
  rd_pg kept, dropped;
  CHECK_EQ(rd_pg_create_with(b, 2, &o, &kept), 0);
  CHECK_EQ(rd_pg_wait(kept, 30000), 0);
  o.strategy = RD_PG_PACK;
  o.name = "dropped-pg";
  o.detached = 0;
  CHECK_EQ(rd_pg_create_with(b, 1, &o, &dropped), 0);
  CHECK_EQ(rd_pg_wait(dropped, 30000), 0);
  o.detached = 2;
  CHECK_EQ(rd_pg_create_with(b, 1, &o, &dropped), RD_EINVAL);
  CHECK_EQ(rd_pg_create_with(b, 1, NULL, &dropped), RD_EINVAL);
  rd_task_opts to;
  rd_task_opts_init(&to);
  to.resources = "only_c=1";
  rd_ref r;
  long st = -1;
  CHECK_EQ(rd_submit(make_task_pgs, RD_NO_ARGS, &to, &r), 0);
  get_exact(r, "make_task_pgs", 60000, &st, sizeof(st));
  CHECK_EQ(st, 0);
}

/* The second driver: the detached groups are there and usable, the others
 * went with the driver (at once) and with the job (its end in the GCS job
 * table, read by node c each second); then they are removed. */
static void detached_pgs_use(void) {
  rd_pg kept, task_kept, p;
  double t0 = now_s();
  while ((rd_pg_get("dropped-pg", &p) != RD_ENOENT || rd_pg_get("task-pg-drop", &p) != RD_ENOENT) &&
         now_s() - t0 < 15)
    usleep(50 * 1000);
  CHECK_EQ(rd_pg_get("dropped-pg", &p), RD_ENOENT);
  CHECK_EQ(rd_pg_get("task-pg-drop", &p), RD_ENOENT);
  rd_pg_info info;
  CHECK_EQ(rd_pg_get("kept-pg", &kept), 0);
  CHECK_EQ(rd_pg_info_get(kept, &info), 0);
  CHECK_EQ(info.state, RD_PG_STATE_CREATED);
  CHECK_EQ(info.num_bundles, 2);
  CHECK(info.bundle_nodes[0] && info.bundle_nodes[1] && info.bundle_nodes[0] != info.bundle_nodes[1]);
  CHECK_EQ(where_in(kept, 1, 0), info.bundle_nodes[1]);
  CHECK_EQ(rd_pg_get("task-pg", &task_kept), 0);
  CHECK_EQ(rd_pg_info_get(task_kept, &info), 0);
  CHECK_EQ(info.state, RD_PG_STATE_CREATED);
  CHECK_EQ(rd_pg_remove(kept), 0);
  CHECK_EQ(rd_pg_remove(task_kept), 0);
  CHECK_EQ(rd_pg_get("kept-pg", &p), RD_ENOENT);
  CHECK_EQ(rd_pg_get("task-pg", &p), RD_ENOENT);
}

static int t_detached_make(void) {
  join();
  detached_pgs_make();
  rd_node_info ni;
  CHECK_EQ(rd_node_info_get(&ni), 0);
  uint32_t b = run_where("only_b=1");
  rd_actor keeper = make_tally("keeper", 1, "only_b=1", 0, UINT32_MAX, 1);
  for (int i = 1; i <= 3; i++) CHECK_EQ(actor_add(keeper), i);
  long w[2];
  actor_where(keeper, w);
  CHECK_EQ(w[0], (long)b);
  rd_actor local = make_tally("keeper-local", 1, NULL, 0, ni.node_index, 0);
  CHECK_EQ(actor_add(local), 1);
  rd_actor eph = make_tally("ephemeral", 0, NULL, 0, UINT32_MAX, 0);
  CHECK_EQ(actor_add(eph), 1);
  /* this node's 2 CPUs held by an ordinary actor: a detached one that needs
   * them waits (its call does not finish) until the holder dies with us */
  rd_actor holder = make_tally(NULL, 0, NULL, 2, ni.node_index, 0);
  CHECK_EQ(actor_add(holder), 1);
  rd_actor later = make_tally("later", 1, NULL, 2, ni.node_index, 0);
  rd_ref r;
  CHECK_EQ(rd_actor_call(later, Tally_add, RD_NO_ARGS, NULL, &r), 0);
  rd_buf bb;
  CHECK_EQ(rd_get(&r, 1, &bb, 500), RD_ETIMEDOUT);
  printf("detached actors made; driver %d leaves\n", (int)getpid());
  rd_shutdown();
  return 0;
}

/* Second driver, after the first exited: the detached actors are there with
 * their state, the ordinary one is gone; a restart of a detached actor and
 * a kill for good work without its creator. */
static int t_detached_use(void) {
  join();
  detached_pgs_use();
  rd_actor a;
  CHECK_EQ(rd_actor_get("ephemeral", &a), RD_ENOENT);
  rd_actor keeper = get_named("keeper");
  CHECK_EQ(actor_add(keeper), 4);   /* the same process: its state went on */
  rd_actor local = get_named("keeper-local");
  CHECK_EQ(actor_add(local), 2);
  rd_actor later = get_named("later");   /* placed once the holder died */
  CHECK_EQ(actor_add(later), 1);
  /* restart: its record node places it again, on node b (it holds
   * only_b=1, so where it ran is where it must run again) */
  long w[2], w2[2];
  actor_where(keeper, w);
  CHECK_EQ(w[1], 0);
  CHECK_EQ(rd_actor_kill(keeper, 0), 0);
  CHECK_EQ(actor_add(keeper), 1);
  actor_where(keeper, w2);
  CHECK_EQ(w2[0], w[0]);
  CHECK_EQ(w2[1], 1);
  /* for good */
  CHECK_EQ(rd_actor_kill(keeper, 1), 0);
  CHECK_EQ(rd_actor_kill(local, 1), 0);
  rd_ref r;
  CHECK_EQ(rd_actor_call(keeper, Tally_add, RD_NO_ARGS, NULL, &r), 0);
  rd_buf bb;
  CHECK_EQ(rd_get(&r, 1, &bb, 60000), RD_EACTOR_DIED);
  rd_buf_release(&bb);
  rd_shutdown();
  return 0;
}

/* Third driver: the killed ones are gone, the other is still serving (and
 * `raydist stop` must end it). */
static int t_detached_gone(void) {
  join();
  rd_actor a;
  CHECK_EQ(rd_actor_get("keeper", &a), RD_ENOENT);
  CHECK_EQ(rd_actor_get("keeper-local", &a), RD_ENOENT);
  CHECK_EQ(actor_add(get_named("later")), 2);
  rd_shutdown();
  return 0;
}

/* ---- detached actors outlive their creator's node (cluster_detached_node_death) */

/* A driver on node c: two detached actors, recorded on the head (their ids
 * carry its index), one hosted on b and one placed near its creator, on c;
 * and an ordinary one that dies with the driver. */
static int t_detached_node_make(void) {
  join();
  rd_node_info ni;
  CHECK_EQ(rd_node_info_get(&ni), 0);
  uint32_t c = ni.node_index, b = run_where("only_b=1");
  rd_actor on_b = make_tally("far-b", 1, "only_b=0.1", 0, UINT32_MAX, 0);
  CHECK_EQ(actor_add(on_b), 1);
  CHECK_EQ(actor_add(on_b), 2);
  /* the script sees its calls cross c -> b only, not c -> head -> b */
  const char *ready = getenv("RD_READY"), *done = getenv("RD_DONE");
  if (ready && done) {
    say_ready(ready);
    while (access(done, F_OK) != 0) usleep(50000);
  }
  /* one that crashes on b while called directly from here: the call fails
   * (its process died: b's word on how, through the bridged socket), the
   * next waits for the head's restart on b */
  rd_actor crashy = make_tally(NULL, 1, "only_b=0.1", 0, UINT32_MAX, 1);
  CHECK_EQ(actor_add(crashy), 1);
  rd_ref r;
  rd_buf bb;
  CHECK_EQ(rd_actor_call(crashy, Tally_crash, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(rd_get(&r, 1, &bb, 60000), RD_EACTOR_DIED);
  printf("%s\n", (const char *)bb.data);
  CHECK(strstr((const char *)bb.data, ") was killed by SIGKILL, ") != NULL);
  CHECK(strstr((const char *)bb.data, " while running 'Tally.crash'") != NULL);
  rd_buf_release(&bb);
  rd_ref_release(r);
  CHECK_EQ(actor_add(crashy), 1);
  long wc[2];
  actor_where(crashy, wc);
  CHECK(wc[0] == (long)b && wc[1] == 1);
  CHECK_EQ(rd_actor_kill(crashy, 1), 0);
  rd_actor on_c = make_tally("near-c", 1, NULL, 0.5, UINT32_MAX, 2);
  rd_actor eph = make_tally("eph-c", 0, NULL, 0.5, UINT32_MAX, 0);
  /* no room on c now (1 of its 2 CPUs held): placed where there is, not
   * kept waiting for its creator's node */
  rd_actor big = make_tally(NULL, 1, NULL, 2, UINT32_MAX, 0);
  long w[2];
  actor_where(big, w);
  CHECK(w[0] != (long)c);
  CHECK_EQ(rd_actor_kill(big, 1), 0);
  CHECK(rd_actor_get("far-b", &eph) == 0 && eph.id == on_b.id);
  CHECK_EQ(actor_add(on_c), 1);
  actor_where(on_b, w);
  CHECK_EQ(w[0], (long)b);
  actor_where(on_c, w);
  CHECK_EQ(w[0], (long)c);   /* placed where it would have been without the head's record */
  /* restarted by the head (a restart of its two): a caller here, where it
   * runs, waits for the new process rather than seeing the old one dead */
  CHECK_EQ(rd_actor_kill(on_c, 0), 0);
  CHECK_EQ(actor_add(on_c), 1);
  actor_where(on_c, w);
  CHECK(w[0] == (long)c && w[1] == 1);
  CHECK(on_b.id >> 40 != c && on_c.id >> 40 != c && on_b.id >> 40 == on_c.id >> 40);
  /* a detached group, recorded on the head too, its bundle on b */
  rd_bundle pb = {.resources = "only_b=0.1"};
  rd_pg_opts po;
  rd_pg_opts_init(&po);
  po.name = "far-pg";
  po.detached = 1;
  rd_pg pg;
  CHECK_EQ(rd_pg_create_with(&pb, 1, &po, &pg), 0);
  CHECK_EQ(rd_pg_wait(pg, 30000), 0);
  CHECK(pg.id >> 40 == on_b.id >> 40);
  CHECK_EQ(where_in(pg, 0, 0), b);
  CHECK_EQ(rd_pg_create_with(&pb, 1, &po, &pg), RD_EEXIST);   /* the head's answer, relayed */
  printf("detached actors %llx and %llx recorded on node %llu from node %u\n", (unsigned long long)on_b.id,
         (unsigned long long)on_c.id, (unsigned long long)(on_b.id >> 40), c);
  rd_shutdown();
  return 0;
}

/* A driver on the head, after node c was killed: far-b serves on with its
 * state, near-c was restarted elsewhere (its one restart), eph-c is gone. */
static int t_detached_node_use(void) {
  join();
  int pid = node_pid("127.0.0.3");
  CHECK(pid > 0);
  CHECK_EQ(kill(pid, SIGKILL), 0);
  rd_node_info ni;
  double t0 = now_s();
  for (; now_s() - t0 < 30; usleep(100000)) {
    CHECK_EQ(rd_node_info_get(&ni), 0);
    if (ni.cluster_nodes == 2) break;
  }
  CHECK_EQ(ni.cluster_nodes, 2);
  rd_actor a;
  CHECK_EQ(rd_actor_get("eph-c", &a), RD_ENOENT);
  rd_actor on_b = get_named("far-b");
  CHECK_EQ(actor_add(on_b), 3);   /* the same process: its record did not go with node c */
  rd_actor on_c = get_named("near-c");
  CHECK_EQ(actor_add(on_c), 1);
  long w[2];
  actor_where(on_c, w);
  CHECK(w[0] != 3 && w[1] == 2);
  rd_pg pg;
  rd_pg_info info;
  CHECK_EQ(rd_pg_get("far-pg", &pg), 0);
  CHECK_EQ(rd_pg_info_get(pg, &info), 0);
  CHECK_EQ(info.state, RD_PG_STATE_CREATED);
  long wb[2];
  actor_where(on_b, wb);   /* node b (only_b is held by far-b and the bundle) */
  CHECK_EQ(where_in(pg, 0, 0), (uint32_t)wb[0]);
  CHECK_EQ(rd_pg_remove(pg), 0);
  CHECK_EQ(rd_pg_get("far-pg", &pg), RD_ENOENT);
  printf("after node c died: far-b at 3 calls, near-c restarted on node %ld\n", w[0]);
  CHECK_EQ(rd_actor_kill(on_b, 1), 0);
  CHECK_EQ(rd_actor_kill(on_c, 1), 0);
  CHECK_EQ(rd_actor_get("far-b", &a), RD_ENOENT);
  rd_shutdown();
  return 0;
}

/* The GCS's code table (cluster_code_gc, a TTL of 1 s): first driver, a
 * task on node b and a detached actor on node c, whose code the GCS must
 * keep after this job ends. */
static int t_code_keep(void) {
  join();
  CHECK(run_where("only_b=1") > 0);
  rd_actor a = make_tally("codekeep", 1, "only_c=1", 0, UINT32_MAX, 1);
  CHECK_EQ(actor_add(a), 1);
  rd_shutdown();
  return 0;
}

/* Second driver, seconds later: the actor serves, then is killed for good. */
static int t_code_kill(void) {
  join();
  rd_actor a = get_named("codekeep");
  CHECK_EQ(actor_add(a), 2);
  CHECK_EQ(rd_actor_kill(a, 1), 0);
  rd_shutdown();
  return 0;
}

/* Third driver, after the code was collected: its node stores it again, and
 * a node that joined since (only_d) fetches it to start a worker. */
static int t_code_again(void) {
  join();
  CHECK(run_where("only_d=1") > 0);
  CHECK(run_where("only_b=1") > 0);
  rd_shutdown();
  return 0;
}

/* The pid in a file the GCS writes (RD_GCS_PID_FILE), or 0. */
static pid_t gcs_pid(void) {
  const char *path = getenv("RD_GCS_PID_FILE");
  CHECK(path != NULL);
  FILE *f = fopen(path, "r");
  int pid = 0;
  if (f) {
    if (fscanf(f, "%d", &pid) != 1) pid = 0;
    fclose(f);
  }
  return pid;
}

/* First driver: a detached actor on node b, then the GCS server is killed
 * (its keeper starts it again on its table log).  Tasks on b and c run
 * while it is away (the nodes route by the view they have), and a named
 * actor created meanwhile waits for the new server instead of failing. */
static int t_gcs_restart_before(void) {
  join();
  uint32_t b = run_where("only_b=1"), c = run_where("only_c=1");
  rd_actor survivor = make_tally("survivor", 1, "only_b=0.01", 0, UINT32_MAX, 0);
  for (int i = 1; i <= 3; i++) CHECK_EQ(actor_add(survivor), i);
  CHECK_EQ(rd_kv_put("restart/kept", "before", 6, 0), 0);   /* read back after the restart */
  pid_t old = gcs_pid();
  CHECK(old > 0);
  CHECK_EQ(kill(old, SIGKILL), 0);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < 20; i++) {
    CHECK_EQ(run_where("only_b=0.5"), b);
    CHECK_EQ(run_where("only_c=0.5"), c);
  }
  CHECK_EQ(actor_add(survivor), 4);
  rd_actor born = make_tally("born-in-outage", 1, "only_c=0.01", 0, UINT32_MAX, 0);
  CHECK_EQ(actor_add(born), 1);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  pid_t now = 0;
  for (int i = 0; i < 200 && ((now = gcs_pid()) == old || now == 0); i++) usleep(50000);
  printf("GCS server %d killed; 40 tasks, 2 actor calls and a named actor in %.0f ms; new server %d\n", (int)old,
         (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6, (int)now);
  CHECK(now > 0 && now != old);
  rd_shutdown();
  return 0;
}

/* Second driver, a new job against the restarted GCS: both detached actors
 * are found by name with their state, tasks reach every node, and the
 * actors are killed for good. */
static int t_gcs_restart_after(void) {
  join();
  uint32_t b = run_where("only_b=0.5"), c = run_where("only_c=0.5");
  CHECK(b != c);
  rd_actor survivor = get_named("survivor"), born = get_named("born-in-outage");
  void *kv;
  size_t kvlen;
  CHECK_EQ(rd_kv_get("restart/kept", &kv, &kvlen), 0);   /* the GCS's table log kept it */
  CHECK(kvlen == 6 && !memcmp(kv, "before", 6));
  free(kv);
  CHECK_EQ(actor_add(survivor), 5);
  CHECK_EQ(actor_add(born), 2);
  CHECK_EQ(rd_actor_kill(survivor, 1), 0);
  CHECK_EQ(rd_actor_kill(born, 1), 0);
  rd_shutdown();
  return 0;
}

/* rd_task_opts.max_calls through a lease bridged to another node: tasks
 * that only node b can run, at most 2 per worker process there; the ones
 * pipelined to a worker after its last run go to another without a retry
 * (max_retries 0: one lost would fail). */
RD_REMOTE(pid_where) {
  rd_node_info ni;
  if (rd_node_info_get(&ni) != 0) return rd_call_fail(call, "rd_node_info_get failed");
  long v[3] = {(long)getpid(), (long)ni.node_index, rd_call_attempt(call)};
  return rd_return_bytes(call, 0, v, sizeof(v));
}

static int t_max_calls(void) {
  join();
  uint32_t b = run_where("only_b=1");
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_b=0.1";
  o.max_calls = 2;
  o.max_retries = 0;
  enum { N = 120 };
  rd_ref refs[N];
  long pids[N];
  int cnt[N], np = 0;
  for (int i = 0; i < N; i++) CHECK_EQ(rd_submit(pid_where, RD_NO_ARGS, &o, &refs[i]), 0);
  for (int i = 0; i < N; i++) {
    rd_buf r;
    int e = rd_get(&refs[i], 1, &r, 60000);
    if (e != 0) {
      fprintf(stderr, "task %d: %s: %.*s\n", i, rd_err_name(e), (int)r.size, (const char *)r.data);
      return 1;
    }
    long v[3];
    memcpy(v, r.data, sizeof(v));
    CHECK_EQ(v[1], (long)b);
    CHECK_EQ(v[2], 0);
    int k = 0;
    while (k < np && pids[k] != v[0]) k++;
    if (k == np) {
      pids[np] = v[0];
      cnt[np++] = 0;
    }
    CHECK(++cnt[k] <= 2);
    rd_buf_release(&r);
    rd_ref_release(refs[i]);
  }
  printf("max_calls 2 on node b: %d tasks in %d processes\n", N, np);
  CHECK(np >= N / 2);
  rd_shutdown();
  return 0;
}

/* Node c cannot start this program's workers with one env set (they exit at
 * once there with RD_CL_BREAK set), but runs its other workers: requests
 * with that set avoid c, the others still use it; a task with the set that
 * only c can run fails with the reason. */
static int t_env_bad_node(void) {
  const char *s = getenv("RAYDIST_SESSION");
  if (getenv("RAYDIST_WORKER_ID") && getenv("RD_CL_BREAK") && s && strstr(s, "node-127.0.0.3")) _exit(3);
  join();
  uint32_t c = run_where("only_c=1");
  static const char *const brk[] = {"RD_CL_BREAK=1", "RD_CL_ENV=brk", NULL};
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "pool=0.1";
  o.strategy = RD_STRATEGY_SPREAD;
  enum { K = 24 };
  static int count[4096];
  for (int round = 0; round < 2; round++) {   /* with the set, then without */
    o.env = round == 0 ? brk : NULL;
    if (run_counted(&o, K, count) != 0) return 1;
    printf("%s the set: %d of %d tasks on node c\n", round == 0 ? "with" : "without", count[c], K);
    if (round == 0) CHECK_EQ(count[c], 0);
    else CHECK(count[c] > 0);   /* c is avoided for the set only */
  }
  o.env = brk;
  o.strategy = RD_STRATEGY_DEFAULT;
  only_c_fails(&o, "a task with the set only node c can run");
  /* held (the set's workers kept) while cluster_test.sh lists the runtime envs */
  const char *ready = getenv("RD_READY"), *done = getenv("RD_DONE");
  if (ready && done) {
    say_ready(ready);
    for (int i = 0; i < 1200 && access(done, F_OK) != 0; i++) usleep(50000);
  }
  rd_shutdown();
  return 0;
}

/* Kill, from a task on node c, the actor "victim" running on c for good. */
RD_REMOTE(kill_victim) {
  rd_actor v;
  int r = rd_actor_get("victim", &v);
  if (r == 0) r = rd_actor_kill(v, 1);
  long out = r;
  return rd_return_bytes(call, 0, &out, sizeof(out));
}

/* Calls to a that fail RD_EACTOR_DIED; 1 once one says `why` (within 2 s). */
static int dead_with(rd_actor a, const char *why) {
  for (int i = 0; i < 100; i++) {
    rd_ref r;
    CHECK_EQ(rd_actor_call(a, Tally_add, RD_NO_ARGS, NULL, &r), 0);
    rd_buf b;
    int e = rd_get(&r, 1, &b, 60000);
    if (e != RD_EACTOR_DIED) {
      fprintf(stderr, "a call after the end: %s (%.*s)\n", rd_err_name(e), (int)b.size, (const char *)b.data);
      return 0;
    }
    int found = memmem(b.data, b.size, why, strlen(why)) != NULL;
    if (found) printf("a call after the end: %.*s\n", (int)b.size, (const char *)b.data);
    rd_buf_release(&b);
    rd_ref_release(r);
    if (found) return 1;
    usleep(20000);
  }
  return 0;
}

/* Actors on node c, recorded on the head, ended for good from node c: by
 * rd_actor_exit in a method, and by rd_actor_kill in a task running on c.
 * Neither restarts, though max_restarts is -1: the end goes through the
 * record node, which decides about restarts. */
static int t_actor_exit(void) {
  join();
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.resources = "only_c=0.1";
  ao.max_restarts = -1;
  ao.name = "leaver";
  rd_actor a;
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &a), 0);
  CHECK_EQ(actor_add(a), 1);
  rd_ref r;
  CHECK_EQ(rd_actor_call(a, Tally_bye, RD_NO_ARGS, NULL, &r), 0);
  rd_buf b;
  CHECK_EQ(rd_get(&r, 1, &b, 60000), 0);
  CHECK_EQ(*(const long *)b.data, 0);
  rd_buf_release(&b);
  rd_ref_release(r);
  CHECK(dead_with(a, "exited (rd_actor_exit)"));
  usleep(600000);   /* a restart, if one were made, would be up by now */
  CHECK(dead_with(a, "exited (rd_actor_exit)"));
  rd_actor found;
  CHECK_EQ(rd_actor_get("leaver", &found), RD_ENOENT);
  /* killed for good by a task on the node it runs on */
  ao.name = "victim";
  rd_actor v;
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &v), 0);
  CHECK_EQ(actor_add(v), 1);
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_c=0.1";
  CHECK_EQ(rd_submit(kill_victim, RD_NO_ARGS, &o, &r), 0);
  CHECK_EQ(rd_get(&r, 1, &b, 60000), 0);
  CHECK_EQ(*(const long *)b.data, 0);
  rd_buf_release(&b);
  rd_ref_release(r);
  CHECK(dead_with(v, "killed by rd_actor_kill"));
  usleep(600000);
  CHECK(dead_with(v, "killed by rd_actor_kill"));
  rd_shutdown();
  return 0;
}

/* A driver on node b that ends while its task still runs there, by
 * rd_shutdown or by dying (an _exit: a crash, Ctrl-C): the worker running
 * the task is killed, not handed to the next owner busy (a lease bridged to
 * another node was already: its relay kills it).  A child process is that
 * driver; then this one, on the head, needs b's only slot for a task and
 * gets it at once (before, it waited for the 20 s task). */
static int t_shutdown_busy(void) {
  if (getenv("RAYDIST_WORKER_ID")) join();   /* a worker: rd_init does not return */
  for (int crash = 0; crash < 2; crash++) {
    pid_t child = fork();
    if (child == 0) {
      setenv("RAYDIST_NODE_IP", "127.0.0.2", 1);   /* a driver on b: its lease is b's own, not bridged */
      join();
      rd_task_opts o;
      rd_task_opts_init(&o);
      o.resources = "only_b=1";
      rd_ref r;
      uint32_t ms = 20000, tag = 7;
      CHECK_EQ(rd_submit(slow_where, RD_ARGS(rd_arg_bytes(&ms, 4), rd_arg_bytes(&tag, 4)), &o, &r), 0);
      usleep(1500000);   /* it runs on b by now */
      if (!crash) rd_shutdown();
      _exit(0);
    }
    int st;
    CHECK_EQ(waitpid(child, &st, 0), child);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
      fprintf(stderr, "the busy driver (%s) ended with %s %d\n", crash ? "dying" : "shutting down",
              WIFEXITED(st) ? "status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    join();
    double t0 = now_s();
    uint32_t b = run_where("only_b=1");
    double took = now_s() - t0;
    printf("a task on b's only slot after the busy driver %s: %.2f s\n", crash ? "died" : "shut down", took);
    CHECK(b > 0);
    CHECK(took < 10);
    rd_shutdown();
  }
  return 0;
}

/* The node an actor runs on. */
RD_ACTOR_METHOD(Tally, node) {
  (void)state;
  rd_node_info ni;
  if (rd_node_info_get(&ni) != 0) return rd_call_fail(call, "rd_node_info_get failed");
  uint32_t idx = ni.node_index;
  return rd_return_bytes(call, 0, &idx, sizeof(idx));
}

/* The node an actor runs on, from its concurrency group "io". */
RD_ACTOR_METHOD_IN(Tally, node_io, "io") { return Tally_node_impl(call, state); }

/* Run k slow_where tasks with selector sel and fallbacks fb (SPREAD when
 * spread, else the default policy); count[node] how many ran on each. */
static void run_fallback(const char *sel, const char *fb, int spread, int k, uint32_t ms, int count[4096]) {
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.label_selector = sel;
  o.fallback_label_selectors = fb;
  o.strategy = spread ? RD_STRATEGY_SPREAD : RD_STRATEGY_DEFAULT;
  memset(count, 0, 4096 * sizeof(int));
  rd_ref refs[32];
  CHECK(k <= 32);
  for (uint32_t i = 0; i < (uint32_t)k; i++)
    CHECK_EQ(rd_submit(slow_where, RD_ARGS(rd_arg_bytes(&ms, 4), rd_arg_bytes(&i, 4)), &o, &refs[i]), 0);
  for (int i = 0; i < k; i++) {
    rd_buf b;
    CHECK_EQ(rd_get(&refs[i], 1, &b, 60000), 0);
    uint32_t v[2];
    memcpy(v, b.data, 8);
    count[v[0] & 4095]++;
    rd_buf_release(&b);
    rd_ref_release(refs[i]);
  }
}

static void run_selected(const char *sel, int spread, int k, uint32_t ms, int count[4096]) {
  run_fallback(sel, NULL, spread, k, ms, count);
}

/* Node labels (cluster_test.sh starts b with zone=west,gpu=A100, c with
 * zone=east,market=spot, the head with none): rd_nodes shows them; tasks,
 * actors (and their restarts) and placement-group bundles run only where
 * their label selector matches, with every strategy; a selector no node
 * matches is RD_EINFEASIBLE naming it. */
static int t_labels(void) {
  join();
  uint32_t b = run_where("only_b=1"), c = run_where("only_c=1");
  rd_node_info self;
  CHECK_EQ(rd_node_info_get(&self), 0);
  uint32_t h = self.node_index;
  rd_node_desc d[8];
  size_t n = 0;
  CHECK_EQ(rd_nodes(d, 8, &n), 0);
  int seen = 0;
  for (size_t i = 0; i < n; i++) {
    printf("node %u labels '%s'\n", d[i].index, d[i].labels);
    if (d[i].index == b) seen += !strcmp(d[i].labels, "gpu=A100,zone=west");
    else if (d[i].index == c) seen += !strcmp(d[i].labels, "market=spot,zone=east");
    else if (d[i].index == h) seen += d[i].labels[0] == 0;
  }
  CHECK_EQ(seen, 3);

  int count[4096];
  /* default policy, from the head, which has room but does not match */
  run_selected("zone=west", 0, 6, 100, count);
  CHECK_EQ(count[b], 6);
  run_selected("zone=in(west,east)", 1, 12, 50, count);
  printf("zone=in(west,east) spread: b %d, c %d, head %d\n", count[b], count[c], count[h]);
  CHECK(count[b] > 0 && count[c] > 0 && count[b] + count[c] == 12);
  run_selected("zone=!west", 1, 12, 50, count);
  printf("zone=!west spread: b %d, c %d, head %d\n", count[b], count[c], count[h]);
  CHECK(count[h] > 0 && count[c] > 0 && count[h] + count[c] == 12);
  run_selected("market=!spot,zone=in(east,west)", 0, 4, 50, count);
  CHECK_EQ(count[b], 4);
  run_selected("gpu=!in(A100,H100)", 1, 8, 50, count);
  CHECK_EQ(count[b], 0);

  /* nothing matches: refused, naming the selector */
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.label_selector = "zone=north";
  rd_ref r;
  CHECK_EQ(rd_submit(where, RD_NO_ARGS, &o, &r), 0);
  rd_buf eb;
  int e = rd_get(&r, 1, &eb, 30000);
  printf("zone=north: %s: %.*s\n", rd_err_name(e), (int)eb.size, (const char *)eb.data);
  CHECK_EQ(e, RD_EINFEASIBLE);
  CHECK(strstr((const char *)eb.data, "label selector 'zone=north' matches no live node"));
  rd_buf_release(&eb);
  rd_ref_release(r);
  /* a selector and a hard affinity that disagree; soft falls back to a match */
  o.label_selector = "zone=west";
  o.strategy = RD_STRATEGY_NODE_AFFINITY;
  o.node = c;
  CHECK_EQ(rd_submit(where, RD_NO_ARGS, &o, &r), 0);
  e = rd_get(&r, 1, &eb, 30000);
  printf("affinity c, zone=west: %s: %.*s\n", rd_err_name(e), (int)eb.size, (const char *)eb.data);
  CHECK_EQ(e, RD_EINFEASIBLE);
  CHECK(strstr((const char *)eb.data, "does not match the label selector"));
  rd_buf_release(&eb);
  rd_ref_release(r);
  o.soft = 1;
  CHECK_EQ(rd_submit(where, RD_NO_ARGS, &o, &r), 0);
  CHECK_EQ(node_of(r), b);

  /* an actor placed on c, and placed on c again after a crash, its
   * concurrency group with it (hosted for the head's record) */
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.label_selector = "market=spot";
  ao.max_restarts = 1;
  ao.concurrency_groups = "io=1";
  rd_actor a;
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &a), 0);
  CHECK_EQ(rd_actor_call(a, Tally_node, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(node_of(r), c);
  CHECK_EQ(rd_actor_call(a, Tally_crash, RD_NO_ARGS, NULL, &r), 0);
  rd_ref_release(r);
  uint32_t again = 0;
  for (int i = 0; i < 100 && !again; i++) {
    CHECK_EQ(rd_actor_call(a, Tally_node, RD_NO_ARGS, NULL, &r), 0);
    rd_buf nb;
    e = rd_get(&r, 1, &nb, 30000);
    if (e == 0) memcpy(&again, nb.data, 4);
    rd_buf_release(&nb);
    rd_ref_release(r);
    if (!again) usleep(50000);
  }
  printf("actor after its restart on node %u (c %u)\n", again, c);
  CHECK_EQ(again, c);
  uint32_t nap = 1500;
  rd_ref slow;
  double t0 = now_s();
  CHECK_EQ(rd_actor_call(a, Tally_nap, RD_ARGS(rd_arg_bytes(&nap, 4)), NULL, &slow), 0);
  usleep(100000);
  CHECK_EQ(rd_actor_call(a, Tally_node_io, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(node_of(r), c);
  double io_s = now_s() - t0;
  rd_buf sb;
  CHECK_EQ(rd_get(&slow, 1, &sb, 30000), 0);
  rd_buf_release(&sb);
  rd_ref_release(slow);
  printf("group io answered in %.3f s beside a %.3f s call\n", io_s, now_s() - t0);
  CHECK(io_s < 1.0);
  CHECK_EQ(rd_actor_kill(a, 1), 0);
  ao.label_selector = "zone=north";
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &a), RD_EINFEASIBLE);

  /* bundles: PACK cannot keep them together against their selectors */
  rd_bundle bu[2] = {{.num_cpus = 1, .label_selector = "zone=east"}, {.num_cpus = 1, .label_selector = "gpu=A100"}};
  rd_pg pg;
  CHECK_EQ(rd_pg_create(bu, 2, RD_PG_PACK, NULL, &pg), 0);
  CHECK_EQ(rd_pg_wait(pg, 30000), 0);
  rd_pg_info info;
  CHECK_EQ(rd_pg_info_get(pg, &info), 0);
  printf("bundles on %u and %u\n", info.bundle_nodes[0], info.bundle_nodes[1]);
  CHECK(info.bundle_nodes[0] == c && info.bundle_nodes[1] == b);
  rd_task_opts_init(&o);
  o.placement_group = pg;
  o.bundle_index = 1;
  CHECK_EQ(rd_submit(where, RD_NO_ARGS, &o, &r), 0);
  CHECK_EQ(node_of(r), b);
  CHECK_EQ(rd_pg_remove(pg), 0);
  CHECK_EQ(rd_pg_create(bu, 2, RD_PG_STRICT_PACK, NULL, &pg), RD_EINFEASIBLE);
  bu[1].label_selector = "zone=north";
  CHECK_EQ(rd_pg_create(bu, 2, RD_PG_SPREAD, NULL, &pg), RD_EINFEASIBLE);
  /* a group's fallbacks: the whole group takes its first alternative that
   * fits, a bundle without fallbacks keeping its selector */
  rd_bundle fbg[2] = {{.num_cpus = 1, .label_selector = "zone=north", .fallback_label_selectors = "zone=east"},
                      {.num_cpus = 1, .label_selector = "gpu=A100"}};
  CHECK_EQ(rd_pg_create(fbg, 2, RD_PG_PACK, NULL, &pg), 0);
  CHECK_EQ(rd_pg_wait(pg, 30000), 0);
  CHECK_EQ(rd_pg_info_get(pg, &info), 0);
  printf("zone=north falling back to zone=east, with gpu=A100: bundles on %u and %u\n", info.bundle_nodes[0],
         info.bundle_nodes[1]);
  CHECK(info.bundle_nodes[0] == c && info.bundle_nodes[1] == b);
  CHECK_EQ(rd_pg_remove(pg), 0);
  /* STRICT_SPREAD of two on zone=west has one node; the fallback has two */
  rd_bundle fbs[2] = {{.num_cpus = 1, .label_selector = "zone=west", .fallback_label_selectors = "zone=in(west,east)"},
                      {.num_cpus = 1, .label_selector = "zone=west", .fallback_label_selectors = "zone=in(west,east)"}};
  CHECK_EQ(rd_pg_create(fbs, 2, RD_PG_STRICT_SPREAD, NULL, &pg), 0);
  CHECK_EQ(rd_pg_wait(pg, 30000), 0);
  CHECK_EQ(rd_pg_info_get(pg, &info), 0);
  CHECK((info.bundle_nodes[0] == b && info.bundle_nodes[1] == c) || (info.bundle_nodes[0] == c && info.bundle_nodes[1] == b));
  CHECK_EQ(rd_pg_remove(pg), 0);
  fbg[0].fallback_label_selectors = "zone=south;gpu=H100";   /* none ever fits */
  CHECK_EQ(rd_pg_create(fbg, 2, RD_PG_PACK, NULL, &pg), RD_EINFEASIBLE);
  fbg[0].label_selector = NULL;   /* fallbacks without a selector */
  CHECK_EQ(rd_pg_create(fbg, 2, RD_PG_PACK, NULL, &pg), RD_EINVAL);

  /* fallbacks (Ray's fallback_strategy): a selector no node matches gives
   * way to the first fallback one does, with either strategy */
  run_fallback("zone=north", "gpu=H100; market=spot", 0, 4, 50, count);
  CHECK_EQ(count[c], 4);
  run_fallback("zone=north", "gpu=H100; zone=in(west,east)", 1, 12, 50, count);
  printf("zone=north, falling back to zone=in(west,east), spread: b %d, c %d, head %d\n", count[b], count[c],
         count[h]);
  CHECK(count[b] > 0 && count[c] > 0 && count[b] + count[c] == 12);
  /* the selector's own node while it has room (the view shows it idle
   * once a heartbeat has passed) ... */
  usleep(1500000);
  run_fallback("zone=west", "zone=east", 0, 2, 50, count);
  CHECK_EQ(count[b], 2);
  /* ... and the fallback's while b's two CPUs are taken */
  rd_ref busy[2];
  uint32_t long_ms = 4000;
  rd_task_opts_init(&o);
  o.label_selector = "zone=west";
  for (uint32_t i = 0; i < 2; i++)
    CHECK_EQ(rd_submit(marked_where, RD_ARGS(rd_arg_bytes(&long_ms, 4), rd_arg_bytes(&i, 4)), &o, &busy[i]), 0);
  /* both run: the view may not show it yet (a heartbeat or two), and then
   * b refuses what placement sent it for room it no longer has */
  for (int i = 0; i < 2; i++) wait_marked(i);
  t0 = now_s();
  run_fallback("zone=west", "zone=east", 0, 2, 50, count);
  printf("zone=west busy, falling back to zone=east: b %d, c %d in %.2f s\n", count[b], count[c], now_s() - t0);
  CHECK_EQ(count[c], 2);
  /* a group falls back the same way while b's CPUs are taken */
  rd_bundle fb1[1] = {{.num_cpus = 1, .label_selector = "zone=west", .fallback_label_selectors = "zone=east"}};
  t0 = now_s();
  CHECK_EQ(rd_pg_create(fb1, 1, RD_PG_PACK, NULL, &pg), 0);
  CHECK_EQ(rd_pg_wait(pg, 30000), 0);
  CHECK_EQ(rd_pg_info_get(pg, &info), 0);
  printf("zone=west busy: the group's bundle on %u (c %u) in %.2f s\n", info.bundle_nodes[0], c, now_s() - t0);
  CHECK_EQ(info.bundle_nodes[0], c);
  CHECK_EQ(rd_pg_remove(pg), 0);
  for (int i = 0; i < 2; i++) {   /* slow_where gives its node and its index */
    rd_buf bb;
    CHECK_EQ(rd_get(&busy[i], 1, &bb, 60000), 0);
    uint32_t v[2];
    memcpy(v, bb.data, 8);
    CHECK_EQ(v[0], b);
    rd_buf_release(&bb);
    rd_ref_release(busy[i]);
  }
  /* nothing has room: it waits for its own selector's node (b), and moves
   * to the fallback's (c) when c frees first (b gives it back: respill) */
  rd_ref blk[4];
  uint32_t blk_ms[4] = {6000, 6000, 2500, 2500};
  const char *blk_sel[4] = {"zone=west", "zone=west", "market=spot", "market=spot"};
  for (uint32_t i = 0; i < 4; i++) {
    rd_task_opts_init(&o);
    o.label_selector = blk_sel[i];
    uint32_t tag = 10 + i;
    CHECK_EQ(rd_submit(marked_where, RD_ARGS(rd_arg_bytes(&blk_ms[i], 4), rd_arg_bytes(&tag, 4)), &o, &blk[i]), 0);
  }
  for (int i = 10; i < 14; i++) wait_marked(i);
  usleep(1200000);   /* the view shows both full */
  t0 = now_s();
  run_fallback("zone=west", "zone=east", 0, 1, 50, count);
  double moved_s = now_s() - t0;
  printf("b and c full, c frees first: b %d, c %d after %.2f s\n", count[b], count[c], moved_s);
  CHECK_EQ(count[c], 1);
  for (int i = 0; i < 4; i++) {
    rd_buf bb;
    CHECK_EQ(rd_get(&blk[i], 1, &bb, 60000), 0);
    rd_buf_release(&bb);
    rd_ref_release(blk[i]);
  }

  /* an actor too; none matching is RD_EINFEASIBLE naming them all */
  ao.label_selector = "zone=north";
  ao.fallback_label_selectors = "zone=south;market=spot";
  ao.max_restarts = 0;
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &a), 0);
  CHECK_EQ(rd_actor_call(a, Tally_node, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(node_of(r), c);
  CHECK_EQ(rd_actor_kill(a, 1), 0);
  o.fallback_label_selectors = "zone=south";
  o.label_selector = "zone=north";
  CHECK_EQ(rd_submit(where, RD_NO_ARGS, &o, &r), 0);
  e = rd_get(&r, 1, &eb, 30000);
  printf("zone=north;zone=south: %s: %.*s\n", rd_err_name(e), (int)eb.size, (const char *)eb.data);
  CHECK_EQ(e, RD_EINFEASIBLE);
  CHECK(strstr((const char *)eb.data, "label selector 'zone=north;zone=south' matches no live node"));
  rd_buf_release(&eb);
  rd_ref_release(r);
  rd_shutdown();
  return 0;
}

/* Does node idx carry label "key=value"? */
static int node_has_label(uint32_t idx, const char *kv) {
  rd_node_desc d[16];
  size_t n = 0;
  CHECK_EQ(rd_nodes(d, 16, &n), 0);
  for (size_t i = 0; i < n; i++)
    if (d[i].index == idx) {
      size_t k = strlen(kv);
      for (const char *p = d[i].labels; (p = strstr(p, kv)) != NULL; p++)
        if ((p == d[i].labels || p[-1] == ',') && (p[k] == 0 || p[k] == ',')) return 1;
    }
  return 0;
}

/* The autoscaler (cluster_test.sh starts the head with a config whose
 * type `big` has big=1 and at most two nodes, and `warm` one node kept):
 * a placement group, tasks and an actor that only big nodes could hold
 * wait while the autoscaler starts them, then run there; a request no
 * type could run is still RD_EINFEASIBLE.  The script then sees the big nodes leave
 * once idle, and warm stay. */
static int t_autoscale(void) {
  join();
  /* a group only two big nodes can hold (STRICT_SPREAD, though both
   * bundles would fit one: the autoscaler keeps them apart, or it would
   * start one node and wait on it for good): it waits while the autoscaler
   * starts them; three such bundles, more than max_workers can ever give,
   * are refused at once */
  rd_bundle bu[3] = {{.num_cpus = 0.5, .resources = "big=0.5"}, {.num_cpus = 0.5, .resources = "big=0.5"},
                     {.num_cpus = 0.5, .resources = "big=0.5"}};
  rd_pg pg;
  double tp = now_s();
  CHECK_EQ(rd_pg_create(bu, 3, RD_PG_STRICT_SPREAD, NULL, &pg), RD_EINFEASIBLE);
  CHECK_EQ(rd_pg_create(bu, 2, RD_PG_STRICT_SPREAD, NULL, &pg), 0);
  CHECK_EQ(rd_pg_wait(pg, 90000), 0);
  rd_pg_info info;
  CHECK_EQ(rd_pg_info_get(pg, &info), 0);
  printf("group on autoscaled nodes %u and %u after %.1f s\n", info.bundle_nodes[0], info.bundle_nodes[1],
         now_s() - tp);
  CHECK(info.bundle_nodes[0] && info.bundle_nodes[1] && info.bundle_nodes[0] != info.bundle_nodes[1]);
  CHECK(node_has_label(info.bundle_nodes[0], "raydist.io/node-type=big"));
  CHECK(node_has_label(info.bundle_nodes[1], "raydist.io/node-type=big"));
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.placement_group = pg;
  o.bundle_index = 1;
  o.num_cpus = 0.5;   /* what the bundle holds */
  rd_ref pr;
  CHECK_EQ(rd_submit(where, RD_NO_ARGS, &o, &pr), 0);
  CHECK_EQ(node_of(pr), info.bundle_nodes[1]);
  /* the node of bundle 1 dies: the bundle would fit beside bundle 0 on the
   * other big node, but not for STRICT_SPREAD, so a third big node starts
   * for it and the group is reserved again there */
  uint32_t keep = info.bundle_nodes[0], lost = info.bundle_nodes[1];
  rd_node_desc nd[16];
  size_t nn = 0;
  char lost_ip[64] = "";
  CHECK_EQ(rd_nodes(nd, 16, &nn), 0);
  for (size_t i = 0; i < nn; i++)
    if (nd[i].index == lost) snprintf(lost_ip, sizeof(lost_ip), "%s", nd[i].ip);
  int lpid = node_pid(lost_ip);
  CHECK(lpid > 0);
  CHECK_EQ(kill(lpid, SIGKILL), 0);
  tp = now_s();
  int again = 0;
  while (!again && now_s() - tp < 60) {
    usleep(100000);
    again = rd_pg_info_get(pg, &info) == 0 && info.state == RD_PG_STATE_CREATED && info.bundle_nodes[0] == keep &&
            info.bundle_nodes[1] && info.bundle_nodes[1] != lost && info.bundle_nodes[1] != keep;
  }
  printf("bundle 1 reserved again on autoscaled node %u %.1f s after node %u died\n", info.bundle_nodes[1],
         now_s() - tp, lost);
  CHECK(again);
  CHECK(node_has_label(info.bundle_nodes[1], "raydist.io/node-type=big"));
  CHECK_EQ(rd_pg_remove(pg), 0);

  rd_task_opts_init(&o);
  o.resources = "big=1";
  rd_ref refs[4];
  uint32_t ms = 1500;
  double t0 = now_s();
  for (uint32_t i = 0; i < 4; i++)
    CHECK_EQ(rd_submit(slow_where, RD_ARGS(rd_arg_bytes(&ms, 4), rd_arg_bytes(&i, 4)), &o, &refs[i]), 0);
  uint32_t seen[4];
  int nseen = 0;
  for (int i = 0; i < 4; i++) {
    rd_buf b;
    int e = rd_get(&refs[i], 1, &b, 90000);
    if (e) printf("task %d: %s: %.*s\n", i, rd_err_name(e), (int)b.size, (const char *)b.data);
    CHECK_EQ(e, 0);
    uint32_t v[2];
    memcpy(v, b.data, 8);
    rd_buf_release(&b);
    rd_ref_release(refs[i]);
    int k = 0;
    while (k < nseen && seen[k] != v[0]) k++;
    if (k == nseen) seen[nseen++] = v[0];
    CHECK(node_has_label(v[0], "raydist.io/node-type=big"));
    CHECK(node_has_label(v[0], "tier=big"));
  }
  printf("4 tasks for big=1 ran on %d autoscaled node(s) in %.1f s\n", nseen, now_s() - t0);
  CHECK(nseen >= 1 && nseen <= 2);
  /* an actor, and a task that selects the type's label */
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.resources = "big=1";
  rd_actor a;
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &a), 0);
  rd_ref r;
  CHECK_EQ(rd_actor_call(a, Tally_node, RD_NO_ARGS, NULL, &r), 0);
  uint32_t an = node_of(r);
  CHECK(node_has_label(an, "raydist.io/node-type=big"));
  CHECK_EQ(rd_actor_kill(a, 1), 0);
  rd_task_opts_init(&o);
  o.label_selector = "raydist.io/node-type=warm";
  CHECK_EQ(rd_submit(where, RD_NO_ARGS, &o, &r), 0);
  CHECK(node_has_label(node_of(r), "raydist.io/node-type=warm"));
  /* no type has big=5: refused, not kept waiting */
  rd_task_opts_init(&o);
  o.resources = "big=5";
  CHECK_EQ(rd_submit(where, RD_NO_ARGS, &o, &r), 0);
  rd_buf eb;
  int e = rd_get(&r, 1, &eb, 30000);
  printf("big=5: %s: %.*s\n", rd_err_name(e), (int)eb.size, (const char *)eb.data);
  CHECK_EQ(e, RD_EINFEASIBLE);
  rd_buf_release(&eb);
  rd_ref_release(r);
  rd_shutdown();
  return 0;
}

/* For `raydist memory` (cluster_test.sh): a 4 MiB put here and a 2 MiB
 * result left on node b, held until the file $RD_DONE appears; $RD_READY
 * gets this driver's pid once both exist. */
static int t_memory_hold(void) {
  join();
  size_t n = 4u << 20;
  void *buf = calloc(1, n);
  CHECK(buf != NULL);
  rd_ref p, r;
  CHECK_EQ(rd_put(buf, n, &p), 0);
  free(buf);
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_b=1";
  long size = 2l << 20, seed = 1;
  CHECK_EQ(rd_submit(make_sized, RD_ARGS(rd_arg_bytes(&size, sizeof(size)), rd_arg_bytes(&seed, sizeof(seed))), &o, &r),
           0);
  CHECK_EQ(rd_wait(&r, 1, 1, 60000, NULL), 1);   /* made on b, not fetched here */
  const char *ready = getenv("RD_READY"), *done = getenv("RD_DONE");
  CHECK(ready && done);
  say_ready(ready);
  for (int i = 0; i < 1200 && access(done, F_OK) != 0; i++) usleep(50000);
  rd_ref_release(p);
  rd_ref_release(r);
  rd_shutdown();
  return 0;
}

/* rd_request_resources of $RD_REQUEST bundles {CPU: 1, big: 1} (0:
 * withdraw the request), after the refusals (cluster_test.sh's autoscaler
 * case watches the big nodes come and stay, then go). */
static int t_request_room(void) {
  join();
  const char *e = getenv("RD_REQUEST");
  size_t n = e ? (size_t)atoi(e) : 0;
  rd_bundle b[4] = {{.num_cpus = 1, .resources = "big=1"}, {.num_cpus = 1, .resources = "big=1"},
                    {.num_cpus = 1, .resources = "big=1"}, {.num_cpus = 1, .resources = "big=1"}};
  CHECK(n <= 4);
  rd_bundle bad = {.num_cpus = -1};
  CHECK_EQ(rd_request_resources(&bad, 1), RD_EINVAL);
  bad = (rd_bundle){.num_cpus = 1, .label_selector = "zone=west"};
  CHECK_EQ(rd_request_resources(&bad, 1), RD_EINVAL);
  bad = (rd_bundle){0};
  CHECK_EQ(rd_request_resources(&bad, 1), RD_EINVAL);   /* asks for nothing */
  bad = (rd_bundle){.resources = "big=x"};
  CHECK_EQ(rd_request_resources(&bad, 1), RD_EINVAL);
  CHECK_EQ(rd_request_resources(NULL, 1), RD_EINVAL);
  CHECK_EQ(rd_request_resources(b, RD_REQUEST_MAX + 1), RD_EINVAL);
  CHECK_EQ(rd_request_resources(b, n), 0);
  rd_shutdown();
  return 0;
}

/* For the autoscaler's demand (cluster_test.sh): b's two CPUs taken by
 * two long zone=west tasks, then five more zone=west tasks: one lease
 * request waits on b and four tasks wait behind it here (the backlog);
 * held until the file $RD_DONE appears. */
static int t_backlog_hold(void) {
  join();
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.label_selector = "zone=west";
  rd_ref blk[2], more[5];
  uint32_t long_ms = 30000, short_ms = 10;
  for (uint32_t i = 0; i < 2; i++) {
    uint32_t tag = 20 + i;
    CHECK_EQ(rd_submit(marked_where, RD_ARGS(rd_arg_bytes(&long_ms, 4), rd_arg_bytes(&tag, 4)), &o, &blk[i]), 0);
  }
  for (int i = 20; i < 22; i++) wait_marked(i);
  o.num_cpus = 0.5;   /* a class of its own */
  for (uint32_t i = 0; i < 5; i++)
    CHECK_EQ(rd_submit(slow_where, RD_ARGS(rd_arg_bytes(&short_ms, 4), rd_arg_bytes(&i, 4)), &o, &more[i]), 0);
  const char *ready = getenv("RD_READY"), *done = getenv("RD_DONE");
  CHECK(ready && done);
  say_ready(ready);
  for (int i = 0; i < 1200 && access(done, F_OK) != 0; i++) usleep(50000);
  rd_shutdown();
  return 0;
}

/* For `raydist list tasks` (cluster_test.sh): tasks held unfinished until
 * the file $RD_DONE appears: three wait_file tasks that need only_b (one
 * runs on b, the others wait behind it), three arg_len tasks on the first
 * one's result (their argument not ready), two calls on an actor on c (one
 * runs); and three that failed (slow_where, slow_pid on its result, where
 * cancelled).  $RD_READY gets this driver's pid once all are submitted; at the
 * end every result is checked.  With $RD_SILENT it makes no library call
 * between then and $RD_DONE. */
static int t_tasks_hold(void) {
  join();
  const char *ready = getenv("RD_READY"), *done = getenv("RD_DONE");
  CHECK(ready && done);
  size_t dl = strlen(done);
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_b=1";
  rd_ref w[3], d[3], m[2];
  for (int i = 0; i < 3; i++) CHECK_EQ(rd_submit(wait_file, RD_ARGS(rd_arg_bytes(done, dl)), &o, &w[i]), 0);
  for (int i = 0; i < 3; i++) CHECK_EQ(rd_submit(arg_len, RD_ARGS(rd_arg_ref(w[0])), NULL, &d[i]), 0);
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.resources = "only_c=1";
  rd_actor a;
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &a), 0);
  for (int i = 0; i < 2; i++) CHECK_EQ(rd_actor_call(a, Tally_wait_file, RD_ARGS(rd_arg_bytes(done, dl)), NULL, &m[i]), 0);
  int silent = getenv("RD_SILENT") != NULL;   /* with RAYDIST_PROGRESS_THREAD=0: answers nothing until done */
  if (silent) (void)rd_wait(&d[0], 1, 1, 300, NULL);   /* a library call: the node hears of its tasks */
  if (!silent) {   /* three that fail for good: a task's own error, a failed argument, a cancel */
    rd_ref bad, bad_dep, cancelled;
    CHECK_EQ(rd_submit(slow_where, RD_NO_ARGS, NULL, &bad), 0);   /* "bad args" */
    CHECK_EQ(rd_submit(slow_pid, RD_ARGS(rd_arg_ref(bad)), NULL, &bad_dep), 0);
    CHECK_EQ(rd_submit(where, RD_NO_ARGS, &o, &cancelled), 0);    /* waits for only_b */
    CHECK_EQ(rd_cancel(cancelled, 0), 0);
    CHECK_EQ(rd_wait(&bad_dep, 1, 1, 60000, NULL), 1);
    rd_ref_release(bad);
    rd_ref_release(bad_dep);
    rd_ref_release(cancelled);
  }
  say_ready(ready);
  for (int i = 0; silent && i < 2400 && access(done, F_OK) != 0; i++) usleep(50000);
  for (int i = 0; i < 3; i++) CHECK_EQ(node_of(w[i]), (uint32_t)dl);   /* (node_of: a u32 result) */
  for (int i = 0; i < 3; i++) CHECK_EQ(node_of(d[i]), 4u);
  for (int i = 0; i < 2; i++) CHECK_EQ(node_of(m[i]), (uint32_t)dl);
  CHECK_EQ(rd_actor_kill(a, 1), 0);
  rd_shutdown();
  return 0;
}

/* For `raydist list tasks` (cluster_test.sh): 50000 arg_len tasks on an
 * open put (no task of this driver is queued or running), and no library
 * call until $RD_DONE: the progress thread must answer the node.  Then
 * the put is sealed and every result checked. */
static int t_tasks_open_put(void) {
  join();
  const char *ready = getenv("RD_READY"), *done = getenv("RD_DONE");
  CHECK(ready && done);
  enum { N = 50000 };
  rd_ref *r = malloc(N * sizeof(*r)), arg;
  CHECK(r != NULL);
  void *p;
  CHECK_EQ(rd_put_begin(16, &p, &arg), 0);
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.num_cpus = 0.01;
  for (int i = 0; i < N; i++) CHECK_EQ(rd_submit(arg_len, RD_ARGS(rd_arg_ref(arg)), &o, &r[i]), 0);
  say_ready(ready);
  for (int i = 0; i < 2400 && access(done, F_OK) != 0; i++) usleep(50000);
  memset(p, 1, 16);
  CHECK_EQ(rd_put_seal(arg), 0);
  CHECK_EQ(rd_wait(r, N, N, 120000, NULL), N);
  for (int i = 0; i < N; i += 997) CHECK_EQ(node_of(r[i]), 16u);   /* (node_of: a u32 result, and releases) */
  for (int i = 0; i < N; i++)
    if (i % 997) rd_ref_release(r[i]);
  rd_ref_release(arg);
  free(r);
  rd_shutdown();
  return 0;
}

/* For `raydist list actors` (cluster_test.sh): actors in every state until
 * $RD_DONE appears.  "keeper" (namespace "team") on c, with two restarts
 * (the script kills its process: it must be back for the last call); one
 * on b holding only_b, a second waiting for only_b; one killed for good.
 * $RD_READY gets this driver's pid once the first two answered a call. */
static int t_actors_hold(void) {
  join();
  const char *ready = getenv("RD_READY"), *done = getenv("RD_DONE");
  CHECK(ready && done);
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.resources = "only_c=1";
  ao.name = "keeper";
  ao.namespace_name = "team";
  ao.max_restarts = 2;
  rd_actor keeper, on_b, waits, gone;
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &keeper), 0);
  rd_actor_opts_init(&ao);
  ao.resources = "only_b=1";
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &on_b), 0);
  CHECK_EQ(actor_add(keeper), 1);
  CHECK_EQ(actor_add(on_b), 1);   /* on_b holds only_b before waits asks for it */
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &waits), 0);
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, NULL, &gone), 0);
  CHECK_EQ(actor_add(gone), 1);
  CHECK_EQ(rd_actor_kill(gone, 1), 0);
  say_ready(ready);
  for (int i = 0; i < 2400 && access(done, F_OK) != 0; i++) usleep(50000);
  CHECK_EQ(actor_add(keeper), 1);   /* a new process: the count began again */
  CHECK_EQ(actor_add(on_b), 2);
  CHECK_EQ(rd_actor_kill(on_b, 1), 0);
  CHECK_EQ(actor_add(waits), 1);    /* placed once on_b gave only_b back */
  rd_shutdown();
  return 0;
}

/* For Ray's state API (cluster_test.sh state_api): until $RD_DONE appears,
 * a named actor "counter" (namespace "team") on c, an actor killed for
 * good, a placement group "pg_state" of two half-CPU bundles, two
 * wait_file tasks running, two arg_len waiting for the first's result, one
 * slow_where that failed and one that finished after 300 ms (and the two
 * Tally.add calls that finished), a 1 MiB put and a call of counter
 * waiting for $RD_DONE.  $RD_READY gets this driver's pid. */
static int t_state_hold(void) {
  join();
  const char *ready = getenv("RD_READY"), *done = getenv("RD_DONE");
  CHECK(ready && done);
  size_t dl = strlen(done);
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.resources = "only_c=1";
  ao.name = "counter";
  ao.namespace_name = "team";
  rd_actor counter, gone;
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, &ao, &counter), 0);
  CHECK_EQ(actor_add(counter), 1);
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, NULL, &gone), 0);
  CHECK_EQ(actor_add(gone), 1);
  CHECK_EQ(rd_actor_kill(gone, 1), 0);
  rd_bundle b[2] = {{.num_cpus = 0.5}, {.num_cpus = 0.5}};
  rd_pg pg;
  CHECK_EQ(rd_pg_create(b, 2, RD_PG_PACK, "pg_state", &pg), 0);
  CHECK_EQ(rd_pg_wait(pg, 30000), 0);
  rd_ref w[2], d[2], bad;
  for (int i = 0; i < 2; i++) CHECK_EQ(rd_submit(wait_file, RD_ARGS(rd_arg_bytes(done, dl)), NULL, &w[i]), 0);
  for (int i = 0; i < 2; i++) CHECK_EQ(rd_submit(arg_len, RD_ARGS(rd_arg_ref(w[0])), NULL, &d[i]), 0);
  CHECK_EQ(rd_submit(slow_where, RD_NO_ARGS, NULL, &bad), 0);   /* "bad args" */
  CHECK(rd_wait(&bad, 1, 1, 60000, NULL) == 1);
  rd_ref_release(bad);
  uint32_t ms = 300, tag = 7;   /* a task that finished well, after 300 ms */
  rd_ref quick;
  CHECK_EQ(rd_submit(slow_where, RD_ARGS(rd_arg_bytes(&ms, 4), rd_arg_bytes(&tag, 4)), NULL, &quick), 0);
  CHECK(rd_wait(&quick, 1, 1, 60000, NULL) == 1);
  rd_ref_release(quick);
  static char mib[1 << 20];
  rd_ref put, call;
  CHECK_EQ(rd_put(mib, sizeof(mib), &put), 0);   /* a 1 MiB object in the head's store */
  CHECK_EQ(rd_actor_call(counter, Tally_wait_file, RD_ARGS(rd_arg_bytes(done, dl)), NULL, &call), 0);
  say_ready(ready);
  for (int i = 0; i < 2; i++) CHECK_EQ(node_of(w[i]), (uint32_t)dl);   /* (node_of: a u32 result) */
  for (int i = 0; i < 2; i++) CHECK_EQ(node_of(d[i]), 4u);
  CHECK_EQ(node_of(call), (uint32_t)dl);
  CHECK_EQ(rd_pg_remove(pg), 0);
  CHECK_EQ(rd_actor_kill(counter, 1), 0);
  rd_ref_release(put);
  rd_shutdown();
  return 0;
}

/* For `raydist list tasks` (cluster_test.sh tasks): three `where` tasks
 * run to their end, then a wait_file task left live, $RD_READY written, and
 * no library call (run with RAYDIST_PROGRESS_THREAD=0) until $RD_DONE:
 * the node's questions meanwhile stay unread when it shuts down. */
static int t_tasks_last_report(void) {
  join();
  const char *ready = getenv("RD_READY"), *done = getenv("RD_DONE");
  CHECK(ready && done);
  for (int i = 0; i < 3; i++) {
    rd_ref r;
    CHECK_EQ(rd_submit(where, RD_NO_ARGS, NULL, &r), 0);
    (void)node_of(r);
  }
  rd_ref w;
  CHECK_EQ(rd_submit(wait_file, RD_ARGS(rd_arg_bytes(done, strlen(done))), NULL, &w), 0);
  say_ready(ready);
  for (int i = 0; i < 2400 && access(done, F_OK) != 0; i++) usleep(50000);
  rd_shutdown();   /* the wait_file task abandoned */
  return 0;
}

/* A driver that joins the cluster and leaves (cluster_test.sh state_api
 * submits it as a job): its GCS job, and nothing else. */
static int t_join_leave(void) {
  join();
  rd_shutdown();
  return 0;
}

/* Workers that come and go on b (cluster_test.sh worker_files_pruned):
 * eight `say` tasks there with max_calls 1, each on a worker of its own,
 * which exits after it. */
static int t_worker_churn(void) {
  join();
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_b=0.01";
  o.max_calls = 1;
  for (int i = 0; i < 8; i++) {
    char tag[32];
    int n = snprintf(tag, sizeof(tag), "churn-%d", i);
    rd_ref r;
    CHECK_EQ(rd_submit(say, RD_ARGS(rd_arg_bytes(tag, (size_t)n)), &o, &r), 0);
    rd_buf b;
    CHECK_EQ(rd_get(&r, 1, &b, 60000), 0);
    CHECK(b.size == 2 && !memcmp(b.data, "ok", 2));
    rd_buf_release(&b);
    rd_ref_release(r);
  }
  rd_shutdown();
  return 0;
}

/* For `raydist stack` (cluster_test.sh stack): not inlined, so that each
 * is a frame of its own, named by the node (addr2line: the test is built
 * with hidden visibility, so the dump has only their offsets).  Each waits
 * for the file `path`. */
__attribute__((noinline)) void *stack_helper_sleep(void *path) {
  while (access(path, F_OK) != 0) usleep(20000);
  return NULL;
}
__attribute__((noinline)) void *stack_helper_deaf(void *path) {   /* blocks every signal: it cannot answer */
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  while (access(path, F_OK) != 0) usleep(20000);
  return NULL;
}
__attribute__((noinline)) uint32_t stack_spin_wait(const char *path) {
  uint32_t naps = 0;
  while (access(path, F_OK) != 0) naps += usleep(1000) == 0;
  return naps;
}

/* Argument 0: a file to wait for; argument 1: a file to write this
 * worker's pid to.  Waits in stack_spin_wait beside two threads; 42. */
RD_REMOTE(stack_stuck) {
  rd_buf a, b;
  char done[512], pidf[512];
  if (rd_arg(call, 0, &a) != 0 || rd_arg(call, 1, &b) != 0 || !a.size || a.size >= sizeof(done) || !b.size ||
      b.size >= sizeof(pidf))
    return rd_call_fail(call, "bad paths");
  memcpy(done, a.data, a.size);
  done[a.size] = 0;
  memcpy(pidf, b.data, b.size);
  pidf[b.size] = 0;
  pthread_t t[2];
  if (pthread_create(&t[0], NULL, stack_helper_sleep, done) != 0) return rd_call_fail(call, "no thread");
  if (pthread_create(&t[1], NULL, stack_helper_deaf, done) != 0) return rd_call_fail(call, "no thread");
  FILE *f = fopen(pidf, "w");
  if (f) fprintf(f, "%d\n", (int)getpid()), fclose(f);
  (void)stack_spin_wait(done);
  pthread_join(t[0], NULL);
  pthread_join(t[1], NULL);
  uint32_t v = 42;
  return rd_return_bytes(call, 0, &v, sizeof(v));
}

/* For `raydist stack`: a stack_stuck task on b until $RD_DONE appears (its
 * worker's pid in $RD_WORKER_PID); the driver waits for it in rd_get. */
static int t_stack_hold(void) {
  join();
  const char *ready = getenv("RD_READY"), *done = getenv("RD_DONE"), *wpid = getenv("RD_WORKER_PID");
  CHECK(ready && done && wpid);
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "only_b=1";
  rd_ref r;
  CHECK_EQ(rd_submit(stack_stuck, RD_ARGS(rd_arg_bytes(done, strlen(done)), rd_arg_bytes(wpid, strlen(wpid))), &o, &r), 0);
  say_ready(ready);
  CHECK_EQ(node_of(r), 42u);   /* (node_of: a u32 result) */
  rd_shutdown();
  return 0;
}

/* A second driver for the state API's summaries (cluster_test.sh
 * state_api, run on node c): an unnamed Tally and a call of it, and a
 * wait_file task, until $RD_DONE appears. */
static int t_state_hold2(void) {
  join();
  const char *ready = getenv("RD_READY"), *done = getenv("RD_DONE");
  CHECK(ready && done);
  size_t dl = strlen(done);
  rd_actor t;
  rd_ref w, call;
  CHECK_EQ(rd_actor_create(Tally, RD_NO_ARGS, NULL, &t), 0);
  CHECK_EQ(actor_add(t), 1);
  CHECK_EQ(rd_actor_call(t, Tally_wait_file, RD_ARGS(rd_arg_bytes(done, dl)), NULL, &call), 0);
  CHECK_EQ(rd_submit(wait_file, RD_ARGS(rd_arg_bytes(done, dl)), NULL, &w), 0);
  say_ready(ready);
  CHECK_EQ(node_of(w), (uint32_t)dl);
  CHECK_EQ(node_of(call), (uint32_t)dl);
  CHECK_EQ(rd_actor_kill(t, 1), 0);
  rd_shutdown();
  return 0;
}

/* For join_fresh: n bytes of 0x44. */
RD_REMOTE(fresh_gen) {
  uint64_t n = 0;
  if (rd_arg_copy(call, 0, &n, sizeof(n)) != 0 || n > (64u << 20)) return rd_call_fail(call, "args");
  char *p = rd_return_alloc(call, 0, n);
  if (!p) return rd_call_fail(call, "alloc");
  memset(p, 0x44, n);
  return 0;
}

/* How many bytes of 0x44 its argument is (by value). */
RD_REMOTE(fresh_size) {
  rd_buf b;
  if (rd_arg(call, 0, &b)) return rd_call_fail(call, "args");
  uint64_t n = b.size;
  for (size_t i = 0; i < b.size; i += 4096)
    if (((const unsigned char *)b.data)[i] != 0x44) return rd_call_fail(call, "byte %zu", i);
  return rd_return_bytes(call, 0, &n, sizeof(n));
}

/* The same, for a borrowed ref to it. */
RD_REMOTE(fresh_bsize) {
  rd_ref r;
  if (rd_call_arg_ref(call, 0, &r)) return rd_call_fail(call, "args");
  rd_buf b;
  int e = rd_get(&r, 1, &b, 30000);
  if (e) {
    int rc = rd_call_fail(call, "borrowed get: %s: %.300s", rd_err_name(e), e == RD_ETIMEDOUT ? "" : (const char *)b.data);
    if (e != RD_ETIMEDOUT) rd_buf_release(&b);
    rd_ref_release(r);
    return rc;
  }
  uint64_t n = b.size;
  rd_buf_release(&b);
  rd_ref_release(r);
  return rd_return_bytes(call, 0, &n, sizeof(n));
}

/* Nodes join while the driver runs (RD_RAYDIST: the raydist program); a
 * task placed on each at once makes a 3 MiB object, which tasks on b read
 * by value and borrowed.  b may not have the new node in its view yet (it
 * follows the GCS a heartbeat behind): it waits for it rather than take it
 * for dead (before: 2 of 5 rounds failed with "node died" / "not in the
 * cluster"). */
static int t_join_fresh(void) {
  join();
  const char *raydist = getenv("RD_RAYDIST"), *addr = getenv("RAYDIST_ADDRESS");
  CHECK(raydist && addr);
  for (int i = 0; i < 4; i++) {
    char cmd[1024], res[32], ares[32], pres[32];
    snprintf(res, sizeof(res), "only_j%d=1", i);
    snprintf(ares, sizeof(ares), "actor_j%d=1", i);
    snprintf(pres, sizeof(pres), "pg_j%d=1", i);
    snprintf(cmd, sizeof(cmd), "%s start --address %s --node-ip 127.0.0.%d --num-cpus 1 --resources %s,%s,%s "
             "--object-store-memory 100000000 >/dev/null", raydist, addr, 20 + i, res, ares, pres);
    CHECK_EQ(system(cmd), 0);
    /* and a placement group only it can hold (refused at once before
     * 2026-12-07: "bundle 0 ... fits no live node") */
    rd_bundle pb;
    memset(&pb, 0, sizeof(pb));
    pb.resources = pres;
    rd_pg pg;
    int pst = rd_pg_create(&pb, 1, RD_PG_PACK, NULL, &pg);
    if (pst) printf("round %d, placement group: %s\n", i, rd_err_name(pst));
    CHECK_EQ(pst, 0);
    CHECK_EQ(rd_pg_wait(pg, 30000), 0);
    CHECK_EQ(rd_pg_remove(pg), 0);
    /* an actor only the new node can host, made at once: placed by the
     * next view when this one does not have the node yet (it was dead at
     * once, "can never be satisfied", in 1 run of 1 before 2026-12-07) */
    rd_actor_opts ao;
    rd_actor_opts_init(&ao);
    ao.resources = ares;
    rd_actor act;
    rd_ref ar;
    CHECK_EQ(rd_actor_create(Tally, NULL, 0, &ao, &act), 0);
    CHECK_EQ(rd_actor_call(act, Tally_add, NULL, 0, NULL, &ar), 0);
    rd_buf ab;
    int ast = rd_get(&ar, 1, &ab, 30000);
    if (ast) printf("round %d, actor: %s: %s\n", i, rd_err_name(ast), ast != RD_ETIMEDOUT ? (const char *)ab.data : "");
    CHECK_EQ(ast, 0);
    rd_buf_release(&ab);
    rd_ref_release(ar);
    CHECK_EQ(rd_actor_kill(act, 1), 0);
    rd_task_opts o;
    rd_task_opts_init(&o);
    o.resources = res;
    uint64_t n = 3u << 20;
    rd_ref g, a, b;
    CHECK_EQ(rd_submit(fresh_gen, RD_ARGS(rd_arg_bytes(&n, sizeof(n))), &o, &g), 0);
    rd_task_opts_init(&o);
    o.resources = "only_b=0.1";
    CHECK_EQ(rd_submit(fresh_size, RD_ARGS(rd_arg_ref(g)), &o, &a), 0);
    CHECK_EQ(rd_submit(fresh_bsize, RD_ARGS(rd_arg_borrow(g)), &o, &b), 0);
    rd_ref refs[2] = {a, b};
    for (int k = 0; k < 2; k++) {
      rd_buf out;
      int st = rd_get(&refs[k], 1, &out, 60000);
      if (st) printf("round %d, %s: %s: %s\n", i, k ? "borrowed" : "by value", rd_err_name(st),
                     st != RD_ETIMEDOUT ? (const char *)out.data : "");
      CHECK_EQ(st, 0);
      CHECK_EQ(*(const uint64_t *)out.data, n);
      rd_buf_release(&out);
    }
    rd_ref_release(g);
    rd_ref_release(a);
    rd_ref_release(b);
  }
  rd_shutdown();
  return 0;
}

int main(int argc, char **argv) {
  static const rd_test_case cases[] = {
      {"custom_resources", t_custom_resources}, {"strategies", t_strategies}, {"big_object", t_big_object},
      {"node_death", t_node_death},             {"bad_token", t_bad_token},
      {"actors", t_actors},                     {"actor_node_death", t_actor_node_death},
      {"object_lost", t_object_lost},           {"bad_link", t_bad_link},
      {"locality", t_locality},                 {"placement_groups", t_placement_groups},
      {"pg_node_death", t_pg_node_death},       {"two_jobs", t_two_jobs},
      {"two_jobs_local", t_two_jobs_local},     {"lease_reuse", t_lease_reuse},
      {"detached_make", t_detached_make},       {"detached_use", t_detached_use},
      {"detached_gone", t_detached_gone},       {"detached_node_make", t_detached_node_make},
      {"detached_node_use", t_detached_node_use},       {"gcs_restart_before", t_gcs_restart_before},
      {"gcs_restart_after", t_gcs_restart_after}, {"lineage", t_lineage}, {"nodes", t_nodes}, {"get_many_remote", t_get_many_remote}, {"hung_peer", t_hung_peer}, {"env", t_env}, {"job_env", t_job_env}, {"get_if_exists", t_get_if_exists}, {"log_to_driver", t_log_to_driver}, {"logs_hold", t_logs_hold}, {"actor_task_logs", t_actor_task_logs}, {"log_dedup", t_log_dedup}, {"kv", t_kv}, {"max_calls", t_max_calls}, {"actor_exit", t_actor_exit}, {"env_bad_node", t_env_bad_node}, {"shutdown_busy", t_shutdown_busy}, {"job_ok", t_job_ok}, {"ns_make", t_ns_make}, {"ns_other", t_ns_other}, {"ns_same", t_ns_same}, {"job_bad", t_job_bad}, {"job_long", t_job_long}, {"owner_exit_child", t_owner_exit_child}, {"owner_exit_check", t_owner_exit_check}, {"shuffle", t_shuffle}, {"bad_node", t_bad_node}, {"lineage_eager", t_lineage_eager}, {"respill", t_respill}, {"view_claim", t_view_claim}, {"burst_claim", t_burst_claim}, {"actor_respill", t_actor_respill}, {"actor_host_gone", t_actor_host_gone}, {"many_classes", t_many_classes},       {"cancel", t_cancel}, {"memory_remote", t_memory_remote},
      {"borrow", t_borrow},                     {"stream", t_stream},           {"nested", t_nested},
      {"collective", t_collective},             {"code_keep", t_code_keep},     {"code_kill", t_code_kill},
      {"code_again", t_code_again},             {"labels", t_labels}, {"memory_hold", t_memory_hold},
      {"autoscaler", t_autoscale}, {"backlog_hold", t_backlog_hold},
      {"request_room", t_request_room},
      {"tasks_hold", t_tasks_hold},             {"tasks_open_put", t_tasks_open_put},
      {"actors_hold", t_actors_hold},           {"state_hold", t_state_hold},           {"state_hold2", t_state_hold2},           {"stack_hold", t_stack_hold},           {"worker_churn", t_worker_churn},         {"join_leave", t_join_leave}, {"join_fresh", t_join_fresh},             {"tasks_last_report", t_tasks_last_report},           {"log_rotation", t_log_rotation},
      {"app_metrics", t_app_metrics},
  };
  return rd_test_main(argc, argv, cases, sizeof(cases) / sizeof(cases[0]));
}
