/* tests/runtime/fuzz_test.c - hostile clients against a real node daemon.
 *
 *   fuzz_test node [ROUNDS [SEED]]
 *       An embedded cluster; raw connections to its socket send a hello, then
 *       random frames of every type built from the protocol's descriptors
 *       (wirefuzz.c), some damaged, some with descriptors attached, and close
 *       at random moments.  Every 25 rounds, and at the end, this driver
 *       checks through the public API that the node still runs tasks, stores
 *       objects and hosts an actor.
 *   fuzz_test link HOST PORT TOKEN [ROUNDS [SEED]]
 *       The same against a cluster node's TCP port as a peer node that knows
 *       the cluster token (and, a share of the time, one that does not), then
 *       checks the node as a driver attached with RAYDIST_ADDRESS.
 *   fuzz_test joblink HOST PORT TOKEN [ROUNDS [SEED]]
 *       `raydist job --address`'s tool link to that node, given requests
 *       that are well formed but wrong (each must get its error), a node's
 *       frame (the link must be dropped), many at once, then random
 *       LinkJob messages; the node must answer a job list at the end.
 *
 * A crash, hang or lost request in the daemon fails the check that follows
 * it; the seed in the output replays the run.  RD_FUZZ_ROUNDS and
 * RD_FUZZ_SEED override the defaults for longer runs by hand. */
#include <raydist.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "../check.h"
#include "conn.h"
#include "raydist.pb-c.h"
#include "wirefuzz.h"

/* ------------------------------------------------ what the checks run */

RD_REMOTE(fz_add_one) {
  rd_buf in;
  long v;
  if (rd_call_nargs(call) != 1 || rd_arg(call, 0, &in) != 0 || in.size != sizeof(long))
    return rd_call_fail(call, "fz_add_one takes one long");
  memcpy(&v, in.data, sizeof(v));
  v++;
  return rd_return_bytes(call, 0, &v, sizeof(v));
}

static int fz_init(rd_call *call, void **state) {
  (void)call;
  long *v = calloc(1, sizeof(long));
  if (!v) return rd_call_fail(call, "out of memory");
  *state = v;
  return 0;
}
static void fz_fini(void *state) { free(state); }
RD_ACTOR_CLASS(Fz, fz_init, fz_fini)
RD_ACTOR_METHOD(Fz, incr) {
  long *v = state;
  (*v)++;
  return rd_return_bytes(call, 0, v, sizeof(*v));
}

static const char *const names[] = {"fz_add_one", "Fz", "Fz.incr", "fz_missing", "Counter"};

static long get_long(rd_ref r, const char *what) {
  rd_buf b;
  int e = rd_get(&r, 1, &b, 60000);
  if (e != 0) {
    fprintf(stderr, "%s: rd_get failed: %s: %.*s\n", what, rd_err_name(e), (int)b.size, (const char *)b.data);
    exit(1);
  }
  CHECK_EQ(b.size, sizeof(long));
  long v;
  memcpy(&v, b.data, sizeof(v));
  rd_buf_release(&b);
  return v;
}

static uint64_t now_ms(void);

/* The node still does its job for a well-behaved driver. */
static void check_node(int round) {
  long v = round;
  rd_ref r;
  CHECK_EQ(rd_submit(fz_add_one, RD_ARGS(rd_arg_bytes(&v, sizeof(v))), NULL, &r), 0);
  CHECK_EQ(get_long(r, "task"), round + 1);
  rd_ref_release(r);
  size_t n = 200000;
  unsigned char *p = malloc(n);
  CHECK(p);
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 7 + (size_t)round);
  rd_ref o;
  /* the hostile connections were just closed: objects they made (up to the
   * whole store) go once the node has read their ends, which may be after
   * this put reaches it; wait for that, but not for ever */
  int e;
  uint64_t t0 = now_ms();
  while ((e = rd_put(p, n, &o)) == RD_ESTORE_FULL && now_ms() - t0 < 10000) usleep(20000);
  if (now_ms() - t0 >= 20) printf("round %d: the store had room after %llu ms\n", round, (unsigned long long)(now_ms() - t0));
  CHECK_EQ(e, 0);
  rd_buf b;
  CHECK_EQ(rd_get(&o, 1, &b, 30000), 0);
  CHECK_EQ(b.size, n);
  CHECK(memcmp(b.data, p, n) == 0);
  rd_buf_release(&b);
  rd_ref_release(o);
  free(p);
  rd_actor a;
  CHECK_EQ(rd_actor_create(Fz, RD_NO_ARGS, NULL, &a), 0);
  CHECK_EQ(rd_actor_call(a, Fz_incr, RD_NO_ARGS, NULL, &r), 0);
  CHECK_EQ(get_long(r, "actor call"), 1);
  rd_ref_release(r);
  CHECK_EQ(rd_actor_kill(a, 1), 0);
}

/* ------------------------------------------------ hostile connections */

typedef struct fz_conn {
  int fd;
  int hello_done;
  int keeper;               /* its hello said role 3: a job's keeper (JobHold) */
} fz_conn;

#define MAX_OPEN 6

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Read and drop whatever the node sent (descriptors it passed are closed by
 * the kernel, since no control buffer takes them).  0: peer closed. */
static int drain(int fd) {
  uint8_t buf[65536];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {   /* note the ids in whole frames at the start of what came */
      size_t off = 0;
      while ((size_t)n - off >= 8) {
        uint32_t len;
        memcpy(&len, buf + off, 4);
        if (len > (size_t)n - off - 8) break;
        wf_note_reply(buf + off + 8, len);
        off += 8 + len;
      }
      continue;
    }
    if (n == 0) return 0;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  }
}

/* Send all of p[0..n) (draining replies while the socket is full, for at
 * most 2 s), the first byte with `attach` as SCM_RIGHTS when >= 0.
 * 0: sent; -1: the node closed the connection. */
static int send_all(int fd, const uint8_t *p, size_t n, int attach) {
  uint64_t deadline = now_ms() + 2000;
  size_t off = 0;
  while (off < n) {
    struct iovec iov = {.iov_base = (void *)(p + off), .iov_len = n - off};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    char cbuf[CMSG_SPACE(sizeof(int))];
    if (attach >= 0 && off == 0) {
      memset(cbuf, 0, sizeof(cbuf));
      mh.msg_control = cbuf;
      mh.msg_controllen = sizeof(cbuf);
      struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
      cm->cmsg_level = SOL_SOCKET;
      cm->cmsg_type = SCM_RIGHTS;
      cm->cmsg_len = CMSG_LEN(sizeof(int));
      memcpy(CMSG_DATA(cm), &attach, sizeof(int));
    }
    ssize_t w = sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w > 0) {
      off += (size_t)w;
      continue;
    }
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if (!drain(fd)) return -1;
      if (now_ms() > deadline) return -1;   /* the node stopped reading us: give up on this one */
      struct pollfd pf = {.fd = fd, .events = POLLOUT};
      poll(&pf, 1, 10);
      continue;
    }
    return -1;
  }
  return 0;
}

static void frame_hdr(uint8_t h[8], uint32_t len, uint16_t type, uint16_t flags) {
  memcpy(h, &len, 4);   /* the protocol is little-endian, as is every host this builds on */
  memcpy(h + 4, &type, 2);
  memcpy(h + 6, &flags, 2);
}

static int send_frame(wf_rng *r, int fd, unsigned type, wf_buf *payload) {
  uint16_t flags = 0;
  int attach = -1, p[2] = {-1, -1};
  if (wf_chance(r, 2)) {
    if (pipe(p) == 0) attach = p[0];
    if (wf_chance(r, 80)) flags = 1;   /* RD_FRAME_FLAG_FD, sometimes an fd with no flag */
  } else if (wf_chance(r, 1)) {
    flags = wf_chance(r, 50) ? 1 : (uint16_t)wf_next(r);
  }
  uint8_t *buf = malloc(8 + payload->len);
  CHECK(buf);
  uint32_t len = (uint32_t)payload->len;
  if (wf_below(r, 1000) < 3) len = (uint32_t)wf_next(r);   /* a lying length */
  frame_hdr(buf, len, (uint16_t)type, flags);
  if (payload->len) memcpy(buf + 8, payload->p, payload->len);
  int rc = send_all(fd, buf, 8 + payload->len, attach);
  free(buf);
  if (p[0] >= 0) close(p[0]);
  if (p[1] >= 0) close(p[1]);
  return rc;
}

/* A hello, mostly well formed so the frames after it reach the handlers.
 * Never a worker id a real worker could have: impersonating one of the
 * node's own workers is possible for any process of the same user (the
 * socket is 0600) and would make the checks' tasks fail for a reason that
 * is not a bug. */
static int send_hello(wf_rng *r, int fd, const char *token, int link, int *keeper) {
  wf_buf b = {0};
  if (link) {
    Rd__LinkHello h = RD__LINK_HELLO__INIT;
    h.token = (char *)(wf_chance(r, 85) ? token : "wrong-token");
    h.node_index = (uint32_t)(wf_chance(r, 50) ? 1000 + wf_below(r, 1000) : wf_below(r, 8));
    h.tool = wf_chance(r, 15);   /* `raydist job --address`: LINK_JOB only */
    b.cap = b.len = protobuf_c_message_get_packed_size(&h.base);
    b.p = malloc(b.len + 1);
    CHECK(b.p);
    protobuf_c_message_pack(&h.base, b.p);
    int rc = send_frame(r, fd, RD__MSG_TYPE__MSG_LINK_HELLO, &b);
    wf_buf_free(&b);
    return rc;
  }
  Rd__Hello h = RD__HELLO__INIT;
  h.version = wf_chance(r, 95) ? 1 : (uint32_t)wf_next(r);
  h.role = wf_chance(r, 75) ? 0 : wf_chance(r, 40) ? 3 : wf_chance(r, 50) ? 1 : (int32_t)wf_next(r);
  *keeper = h.role == 3;
  h.worker_id = (uint32_t)(1000000 + wf_below(r, 1000000));
  h.pid = wf_chance(r, 50) ? getpid() : (int32_t)wf_next(r);
  char exe[32];
  snprintf(exe, sizeof(exe), "/nonexistent/%u", (unsigned)wf_below(r, 100));
  if (wf_chance(r, 20)) h.exe = exe;
  if (token && wf_chance(r, 85)) h.token = (char *)token;
  b.cap = b.len = protobuf_c_message_get_packed_size(&h.base);
  b.p = malloc(b.len + 1);
  CHECK(b.p);
  protobuf_c_message_pack(&h.base, b.p);
  if (wf_chance(r, 5)) wf_damage(r, &b);
  int rc = send_frame(r, fd, RD__MSG_TYPE__MSG_HELLO, &b);
  wf_buf_free(&b);
  return rc;
}

/* A random frame for the node: mostly the types a client (or a peer node)
 * sends, sometimes any type, one the node only sends, or none at all. */
static int send_random(wf_rng *r, int fd, int link, int keeper) {
  static const unsigned client_types[] = {3, 5, 7, 9, 10, 12, 13, 17, 20, 21, 24, 25, 28, 29, 45, 47, 48, 80};
  static const unsigned link_types[] = {32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 49, 50, 51, 52, 53, 54, 76};
  unsigned type;
  if (keeper && wf_chance(r, 80))
    type = RD__MSG_TYPE__MSG_JOB_HOLD;   /* mostly what a keeper may send: amounts, a second one */
  else if (wf_chance(r, 95))
    type = link ? link_types[wf_below(r, sizeof(link_types) / sizeof(link_types[0]))]
                : client_types[wf_below(r, sizeof(client_types) / sizeof(client_types[0]))];
  else if (wf_chance(r, 90))
    type = 1 + (unsigned)wf_below(r, wf_max_type());
  else
    type = (unsigned)wf_below(r, 65536);
  if (type == RD__MSG_TYPE__MSG_SHUTDOWN) type = RD__MSG_TYPE__MSG_NODE_INFO;   /* a driver's right; see below */
  wf_buf b = {0};
  const ProtobufCMessageDescriptor *d = wf_type_desc(type);
  if (type == RD__MSG_TYPE__MSG_JOB_HOLD && wf_chance(r, 60)) {   /* amounts the node may grant, or make wait */
    static const int64_t cpus[] = {0, 5000, 10000, 20000, 40000, 50000}, gpus[] = {0, 2500, 10000, 20000};
    Rd__Resources res = RD__RESOURCES__INIT;
    res.cpu = cpus[wf_below(r, 6)];
    res.gpu = gpus[wf_below(r, 4)];
    Rd__JobHold h = RD__JOB_HOLD__INIT;
    h.res = &res;
    h.job = (uint32_t)wf_below(r, 100);
    h.seek = wf_chance(r, 20);   /* a mirror asking for a node: none outside a cluster */
    static char *const sels[] = {"zone=west", "zone=in(a", "a=1;b=2", ""};
    h.label_selector = sels[wf_below(r, 4)];   /* good, malformed, with a fallback, none */
    b.cap = b.len = protobuf_c_message_get_packed_size(&h.base);
    b.p = malloc(b.len + 1);
    CHECK(b.p);
    protobuf_c_message_pack(&h.base, b.p);
  } else if (d) wf_message(r, d, 3, &b);
  else {
    size_t n = wf_below(r, 200);
    b.p = malloc(n + 1);
    CHECK(b.p);
    for (size_t i = 0; i < n; i++) b.p[i] = (uint8_t)wf_next(r);
    b.len = b.cap = n;
  }
  if (wf_chance(r, 3)) wf_damage(r, &b);
  int rc = send_frame(r, fd, type, &b);
  wf_buf_free(&b);
  return rc;
}

typedef int (*dial_fn)(void);

static const char *g_sock;                 /* node: the Unix socket */
static struct sockaddr_in g_peer;          /* link: the node's TCP address */
static const char *g_token;

static int dial_unix(void) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CHECK(fd >= 0);
  struct sockaddr_un a;
  memset(&a, 0, sizeof(a));
  a.sun_family = AF_UNIX;
  CHECK(strlen(g_sock) < sizeof(a.sun_path));
  strcpy(a.sun_path, g_sock);
  if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
    fprintf(stderr, "connect %s: %s\n", g_sock, strerror(errno));
    exit(1);
  }
  return fd;
}

static int dial_tcp(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CHECK(fd >= 0);
  if (connect(fd, (struct sockaddr *)&g_peer, sizeof(g_peer)) != 0) {
    fprintf(stderr, "connect to the node's port: %s\n", strerror(errno));
    exit(1);
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

static void close_conn(fz_conn *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
}

static void fuzz(int link, int rounds, uint64_t seed) {
  wf_rng r = {seed};
  wf_set_names(names, sizeof(names) / sizeof(names[0]));
  fz_conn open_c[MAX_OPEN];
  for (int i = 0; i < MAX_OPEN; i++) open_c[i].fd = -1;
  dial_fn dial = link ? dial_tcp : dial_unix;
  uint64_t frames = 0;
  for (int round = 1; round <= rounds; round++) {
    fz_conn *c = &open_c[wf_below(&r, MAX_OPEN)];
    if (c->fd >= 0 && wf_chance(&r, 30)) close_conn(c);   /* leave mid-conversation */
    if (c->fd < 0) {
      c->fd = dial();
      c->hello_done = 0;
      c->keeper = 0;
      if (wf_chance(&r, 5)) {   /* raw bytes, no hello */
        uint8_t g[512];
        size_t n = 1 + wf_below(&r, sizeof(g));
        for (size_t i = 0; i < n; i++) g[i] = (uint8_t)wf_next(&r);
        if (send_all(c->fd, g, n, -1) != 0) close_conn(c);
        continue;
      }
      if (!wf_chance(&r, 3)) {   /* and sometimes frames before any hello */
        if (send_hello(&r, c->fd, g_token, link, &c->keeper) != 0) {
          close_conn(c);
          continue;
        }
      }
      c->hello_done = 1;
    }
    int burst = 1 + (int)wf_below(&r, 25);
    for (int k = 0; k < burst && c->fd >= 0; k++) {
      if (send_random(&r, c->fd, link, c->keeper) != 0 || !drain(c->fd)) close_conn(c);
      frames++;
    }
    if (c->fd >= 0 && !drain(c->fd)) close_conn(c);
    if (round % 25 == 0 || round == rounds) {
      for (int i = 0; i < MAX_OPEN; i++) close_conn(&open_c[i]);
      check_node(round);
      printf("round %d: %llu frames sent, node healthy\n", round, (unsigned long long)frames);
      fflush(stdout);
    }
  }
}

static int arg_int(int argc, char **argv, int i, const char *env, int def) {
  const char *e = getenv(env);
  if (e && *e) return atoi(e);
  return argc > i ? atoi(argv[i]) : def;
}

static uint64_t arg_seed(int argc, char **argv, int i) {
  const char *e = getenv("RD_FUZZ_SEED");
  if (e && *e) return strtoull(e, NULL, 0);
  if (argc > i) return strtoull(argv[i], NULL, 0);
  return 0x5eedf00dull;
}

/* ------------------------------------------------ the job tool's link */

/* A tool link to g_peer: its hello answered with status (0: open). */
static int tool_open(rd__conn *c, const char *token) {
  int fd = dial_tcp();
  CHECK(fd >= 0);
  rd__conn_init(c, fd);
  Rd__LinkHello h = RD__LINK_HELLO__INIT;
  h.token = (char *)token;
  h.tool = 1;
  CHECK_EQ(rd__conn_send(c, RD__MSG_TYPE__MSG_LINK_HELLO, &h.base, -1), 0);
  CHECK_EQ(rd__conn_flush_blocking(c, 5000), 0);
  rd__frame f;
  CHECK_EQ(rd__conn_recv_blocking(c, &f, 5000), 0);
  CHECK_EQ(f.type, RD__MSG_TYPE__MSG_LINK_HELLO_REPLY);
  Rd__LinkHelloReply *r = (Rd__LinkHelloReply *)rd__frame_unpack(&f, &rd__link_hello_reply__descriptor);
  CHECK(r);
  int st = r->status;
  protobuf_c_message_free_unpacked(&r->base, NULL);
  return st;
}

static Rd__LinkJobReply *tool_recv(rd__conn *c) {
  rd__frame f;
  CHECK_EQ(rd__conn_recv_blocking(c, &f, 90000), 0);
  CHECK_EQ(f.type, RD__MSG_TYPE__MSG_LINK_JOB_REPLY);
  Rd__LinkJobReply *r = (Rd__LinkJobReply *)rd__frame_unpack(&f, &rd__link_job_reply__descriptor);
  CHECK(r);
  return r;
}

/* One request; its reply's status, the error containing `want` (or NULL). */
static int tool_ask(rd__conn *c, Rd__LinkJob *q, const char *want) {
  CHECK_EQ(rd__conn_send(c, RD__MSG_TYPE__MSG_LINK_JOB, &q->base, -1), 0);
  CHECK_EQ(rd__conn_flush_blocking(c, 5000), 0);
  Rd__LinkJobReply *r = tool_recv(c);
  CHECK_EQ(r->req_id, q->req_id);
  int st = r->status;
  if (want && (!r->error || !strstr(r->error, want))) {
    fprintf(stderr, "joblink: op %d: error '%s', wanted '%s'\n", q->op, r->error ? r->error : "", want);
    CHECK(0);
  }
  protobuf_c_message_free_unpacked(&r->base, NULL);
  return st;
}

/* The node closed the link: the next read ends. */
static void tool_expect_closed(rd__conn *c) {
  rd__frame f;
  int r = rd__conn_recv_blocking(c, &f, 5000);
  CHECK(r != 0 && r != RD_ETIMEDOUT);
}

static void joblink(const char *token, int rounds, uint64_t seed) {
  rd__conn c;
  /* a wrong token: refused and dropped */
  CHECK_EQ(tool_open(&c, "wrong-token"), RD_EAUTH);
  tool_expect_closed(&c);
  rd__conn_close(&c);
  CHECK_EQ(tool_open(&c, token), 0);
  char *argv1[] = {"prog"}, *bad_env[] = {"NOEQUALS"}, *empty[] = {""};
  const char *unknown_hash = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  Rd__LinkJob q = RD__LINK_JOB__INIT;
  q.req_id = 1;
  q.op = 99;
  CHECK_EQ(tool_ask(&c, &q, "unknown job operation 99"), RD_EINVAL);
  q.op = 1;   /* submit */
  q.code_hash = "xyz";
  q.argv = argv1;
  q.n_argv = 1;
  q.req_id++;
  CHECK_EQ(tool_ask(&c, &q, "64 lowercase hex"), RD_EINVAL);
  q.code_hash = (char *)unknown_hash;
  q.n_argv = 0;
  q.req_id++;
  CHECK_EQ(tool_ask(&c, &q, "needs the program's argv"), RD_EINVAL);
  q.argv = empty;
  q.n_argv = 1;
  q.req_id++;
  CHECK_EQ(tool_ask(&c, &q, "needs the program's argv"), RD_EINVAL);
  q.argv = argv1;
  q.env = bad_env;
  q.n_env = 1;
  q.req_id++;
  CHECK_EQ(tool_ask(&c, &q, "NAME=VALUE"), RD_EINVAL);
  q.n_env = 0;
  q.name = "two\nlines";
  q.req_id++;
  CHECK_EQ(tool_ask(&c, &q, "a job name"), RD_EINVAL);
  q.name = "";
  q.req_id++;
  CHECK(tool_ask(&c, &q, "cannot fetch the program") != 0);   /* no such code in the GCS */
  memset(&q, 0, sizeof(q));
  rd__link_job__init(&q);
  q.req_id = 100;
  q.op = 5;   /* stop */
  q.timeout = 1;
  CHECK_EQ(tool_ask(&c, &q, "needs a job id"), RD_EINVAL);
  q.id = 1;
  q.timeout = -1;
  q.req_id++;
  CHECK_EQ(tool_ask(&c, &q, "timeout of 0..3600"), RD_EINVAL);
  q.timeout = 1e9;
  q.req_id++;
  CHECK_EQ(tool_ask(&c, &q, "timeout of 0..3600"), RD_EINVAL);
  q.op = 6;   /* delete */
  q.id = 0;
  q.req_id++;
  CHECK_EQ(tool_ask(&c, &q, "delete needs a job id"), RD_EINVAL);
  q.op = 3;   /* logs */
  q.id = 4242;
  q.offset = UINT64_MAX;
  q.req_id++;
  CHECK_EQ(tool_ask(&c, &q, "no job 4242"), RD_ENOENT);
  q.op = 4;   /* state */
  q.id = 0;
  q.req_id++;
  CHECK_EQ(tool_ask(&c, &q, "no job 0"), RD_ENOENT);
  /* many at once: every one answered, run or refused as busy */
  for (int i = 0; i < 40; i++) {
    Rd__LinkJob l = RD__LINK_JOB__INIT;
    l.req_id = 1000 + (uint64_t)i;
    l.op = 2;
    CHECK_EQ(rd__conn_send(&c, RD__MSG_TYPE__MSG_LINK_JOB, &l.base, -1), 0);
  }
  CHECK_EQ(rd__conn_flush_blocking(&c, 5000), 0);
  int ran = 0, busy = 0;
  for (int i = 0; i < 40; i++) {
    Rd__LinkJobReply *r = tool_recv(&c);
    if (r->status == 0) {
      CHECK_EQ(r->exit_code, 0);
      CHECK(r->out.len > 0 && !memcmp(r->out.data, "id ", 3));   /* the list's heading */
      ran++;
    } else {
      CHECK_EQ(r->status, RD_EAGAIN);
      busy++;
    }
    protobuf_c_message_free_unpacked(&r->base, NULL);
  }
  printf("joblink: 40 lists at once: %d ran, %d refused as busy\n", ran, busy);
  CHECK(ran >= 16);
  /* a node's frame from a tool: dropped */
  Rd__LinkCancel lc = RD__LINK_CANCEL__INIT;
  CHECK_EQ(rd__conn_send(&c, RD__MSG_TYPE__MSG_LINK_CANCEL, &lc.base, -1), 0);
  CHECK_EQ(rd__conn_flush_blocking(&c, 5000), 0);
  tool_expect_closed(&c);
  rd__conn_close(&c);
  /* random LinkJob messages, each answered or the link dropped */
  wf_rng r = {seed};
  int answered = 0;
  for (int i = 0; i < rounds; i++) {
    CHECK_EQ(tool_open(&c, token), 0);
    for (int k = 0; k < 5; k++) {
      wf_buf b = {0};
      wf_message(&r, &rd__link_job__descriptor, 3, &b);
      Rd__LinkJob *m = (Rd__LinkJob *)protobuf_c_message_unpack(&rd__link_job__descriptor, NULL, b.len, b.p);
      wf_buf_free(&b);
      if (!m) continue;
      if (m->op == 1 || m->op == 5 || m->op == 6) m->op = 2;   /* nothing started, stopped or deleted */
      uint64_t want = m->req_id;
      int ok = rd__conn_send(&c, RD__MSG_TYPE__MSG_LINK_JOB, &m->base, -1) == 0 && rd__conn_flush_blocking(&c, 5000) == 0;
      protobuf_c_message_free_unpacked(&m->base, NULL);
      if (!ok) break;
      Rd__LinkJobReply *rep = tool_recv(&c);
      CHECK_EQ(rep->req_id, want);
      protobuf_c_message_free_unpacked(&rep->base, NULL);
      answered++;
    }
    rd__conn_close(&c);
  }
  printf("joblink: %d random requests answered\n", answered);
  CHECK_EQ(tool_open(&c, token), 0);
  Rd__LinkJob l = RD__LINK_JOB__INIT;
  l.req_id = 7;
  l.op = 2;
  CHECK_EQ(tool_ask(&c, &l, NULL), 0);
  rd__conn_close(&c);
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc < 2) {
    fprintf(stderr, "usage: fuzz_test node [ROUNDS [SEED]] | link|joblink HOST PORT TOKEN [ROUNDS [SEED]]\n");
    return 2;
  }
  rd_config cfg;
  rd_config_init(&cfg);
  if (!strcmp(argv[1], "node")) {
    int rounds = arg_int(argc, argv, 2, "RD_FUZZ_ROUNDS", 1500);
    uint64_t seed = arg_seed(argc, argv, 3);
    printf("fuzz node: %d rounds, seed 0x%llx\n", rounds, (unsigned long long)seed);
    cfg.num_cpus = 4;
    cfg.num_gpus = 1;
    cfg.object_store_bytes = 64u << 20;
    CHECK_EQ(rd_init(&cfg), 0);
    char sock[600];
    snprintf(sock, sizeof(sock), "%s/node.sock", rd_session_dir());
    g_sock = sock;
    check_node(0);
    fuzz(0, rounds, seed);
    rd_shutdown();
    return 0;
  }
  int joblink_case = !strcmp(argv[1], "joblink");
  if ((joblink_case || !strcmp(argv[1], "link")) && argc >= 5) {   /* HOST PORT TOKEN [ROUNDS [SEED]] */
    int rounds = arg_int(argc, argv, 5, "RD_FUZZ_ROUNDS", joblink_case ? 40 : 1000);
    uint64_t seed = arg_seed(argc, argv, 6);
    printf("fuzz %s %s:%s: %d rounds, seed 0x%llx\n", argv[1], argv[2], argv[3], rounds, (unsigned long long)seed);
    memset(&g_peer, 0, sizeof(g_peer));
    g_peer.sin_family = AF_INET;
    g_peer.sin_port = htons((uint16_t)atoi(argv[3]));
    CHECK(inet_pton(AF_INET, argv[2], &g_peer.sin_addr) == 1);
    g_token = argv[4];
    if (joblink_case) {
      joblink(g_token, rounds, seed);
      return 0;
    }
    CHECK_EQ(rd_init(&cfg), 0);   /* attaches with RAYDIST_ADDRESS */
    check_node(0);
    fuzz(1, rounds, seed);
    rd_shutdown();
    return 0;
  }
  fprintf(stderr, "unknown case %s\n", argv[1]);
  return 2;
}
