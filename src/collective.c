/* src/collective.c - collective communication between the processes of a job
 * (include/raydist/collective.h): a ring of connections, each member talking
 * to its two neighbours only, over a Unix socket on one host and TCP between
 * hosts.  It must never leave a member waiting for ever: every wait ends at
 * the group's timeout or when a peer's connection closes, and any failure
 * closes all of the member's connections, so that the failure travels
 * around the ring.  It reaches the runtime only through the public
 * API (the rendezvous is an ordinary actor) and rd__node_addr.
 *
 * Joining: each member listens (its node's IP, and an abstract Unix socket),
 * registers with the group's rendezvous actor ("rd.collective/NAME", made by
 * rank 0), reads the table until its right neighbour is in it, connects and
 * sends a hello, takes and acknowledges its left neighbour's hello, and
 * waits for its right neighbour's acknowledgement: connections complete in
 * the kernel's backlog and the left is acknowledged before the right is
 * waited for, so the order has no cycle.  An all-gather of every member's
 * addresses ends the join, and rank 0 kills the rendezvous (also when its
 * own join fails).
 *
 * Every operation starts with a header sent right and checked against the
 * left neighbour's, so members that call different things fail instead of
 * mixing their bytes.  Data moves in ring steps: send a block to the right
 * while receiving one from the left, under one poll().  A large all-reduce
 * is a reduce-scatter (the received block reduced as it arrives) and an
 * all-gather; a small one gathers whole buffers and reduces them in rank
 * order.
 *
 * rd_send/rd_recv/rd_sendrecv use a connection per pair of members, made at
 * first use by the lower rank to the address from the join's all-gather
 * and taken by the higher one from the listening sockets it keeps; each
 * message is a header (sequence, size) and its bytes. */
#include "raydist.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "log.h"
#include "node_addr.h"

#define CO_MAGIC 0x52444331u   /* "RDC1" */
#define CO_UNIX_BUF (4 << 20)  /* socket buffers between members on one host */
#define CO_TOKEN_MAX 160
#define CO_HELLO_WAIT_MS 5000  /* a connection must say hello within this */
#define CO_BACKLOG 128        /* connections waiting to be accepted (rd_send/rd_recv's come from every lower rank) */
#define CO_SMALL_BYTES 16384   /* all-reduces up to this a member gather whole buffers */

enum { CO_BARRIER = 1, CO_ALLREDUCE = 2, CO_BROADCAST = 3, CO_ALLGATHER = 4, CO_REDUCE_SCATTER = 5, CO_SEND = 6 };

typedef struct co_entry co_entry;

/* What a connecting member says first. */
typedef struct co_hello {
  uint32_t magic;
  int32_t world, rank;
  uint32_t p2p;              /* 0: the ring's connection from the left; 1: rd_send/rd_recv's */
  uint64_t rdv;              /* the rendezvous actor both joined through */
  char token[CO_TOKEN_MAX];
} co_hello;

/* An accepted connection, until its hello has come. */
typedef struct co_pending {
  int fd;
  uint64_t until;   /* closed if its hello is not whole by then */
  size_t got;
  co_hello h;
} co_pending;

#define CO_PENDING_MAX 8

/* rd_send/rd_recv's connection with one other member (made at its first
 * use, by the lower rank) and the messages each way so far. */
typedef struct co_peer {
  int fd;
  uint64_t sent, got;
} co_peer;

struct rd_collective {
  int world, rank;
  int64_t timeout_ms;
  int right, left;          /* sockets to rank + 1 and from rank - 1 (-1: world 1, or closed) */
  int err;                  /* the first error: the group is broken */
  uint64_t seq;             /* operations begun */
  uint8_t *tmp;             /* all-reduce: the block coming from the left */
  size_t tmpcap;
  char name[RD_COLLECTIVE_MAX_NAME + 1];
  /* for rd_send/rd_recv: the listening sockets (TCP, Unix), where every
   * member listens, this member's hello, and a connection per member */
  int lfd[2];
  co_entry *tab;
  co_hello hello;
  co_peer *peer;
  co_pending pend[CO_PENDING_MAX];   /* accepted connections whose hello is still coming */
  int npend;
};

static uint64_t co_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The deadline of a wait of timeout_ms (0: none). */
static uint64_t co_deadline(int64_t timeout_ms) {
  return timeout_ms < 0 ? 0 : co_now_ns() + (uint64_t)timeout_ms * 1000000ull;
}

/* poll()'s timeout until the deadline: -1 without one, 0 once passed. */
static int co_poll_ms(uint64_t deadline) {
  if (!deadline) return -1;
  uint64_t now = co_now_ns();
  if (now >= deadline) return 0;
  uint64_t ms = (deadline - now + 999999) / 1000000;
  return ms > 60000 ? 60000 : (int)ms;
}

static void co_close(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

/* The member k places around the ring from this one (k < 0: to the left). */
static int co_ring(const rd_collective *g, int k) {
  return ((g->rank + k) % g->world + g->world) % g->world;
}

/* Close the connections still waiting for their hellos. */
static void co_pend_close(rd_collective *g) {
  for (int i = 0; i < g->npend; i++) close(g->pend[i].fd);
  g->npend = 0;
}

/* Every socket of the group: the ring's, rd_send/rd_recv's, the listening
 * ones and those whose hello is still coming. */
static void co_close_all(rd_collective *g) {
  co_close(&g->right);
  co_close(&g->left);
  co_close(&g->lfd[0]);
  co_close(&g->lfd[1]);
  for (int i = 0; g->peer && i < g->world; i++) co_close(&g->peer[i].fd);
  co_pend_close(g);
}

/* The group fails with err: every connection closes (the members at their
 * other ends then fail too), and every later call returns RD_ECONN. */
static int co_fail(rd_collective *g, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int co_fail(rd_collective *g, int err, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  rd__log(RD_LOG_WARN, "collective group '%s', rank %d of %d: %s (%s)", g->name, g->rank, g->world, msg,
          rd_err_name(err));
  if (!g->err) g->err = err;
  co_close_all(g);
  return err;
}

/* ------------------------------------------------------------ the rendezvous */

/* Where a member listens: TCP on its node's IP, and an abstract Unix socket
 * that members on the same host (the same kernel boot id) use instead:
 * about twice TCP's bandwidth over loopback. */
struct co_entry {
  char addr[48];    /* "IP:PORT" */
  char uaddr[40];   /* the Unix socket's name, without its leading NUL */
  char host[40];    /* the kernel's boot id */
};

/* The rendezvous actor's state: where each rank that joined listens. */
typedef struct co_rdv {
  int world;
  co_entry *tab;
} co_rdv;

/* What a member registers. */
typedef struct co_reg {
  int32_t rank, world;
  co_entry e;
} co_reg;

static int rdv_init(rd_call *call, void **state) {
  int32_t world;
  if (rd_arg_copy(call, 0, &world, sizeof(world)) != 0) return rd_call_fail(call, "rendezvous: bad arguments");
  if (world < 1 || world > RD_COLLECTIVE_MAX_WORLD) return rd_call_fail(call, "rendezvous: world %d", world);
  co_rdv *r = calloc(1, sizeof(*r));
  if (r) r->tab = calloc((size_t)world, sizeof(co_entry));
  if (!r || !r->tab) {
    free(r);
    return rd_call_fail(call, "rendezvous: out of memory");
  }
  r->world = world;
  *state = r;
  return 0;
}

static void rdv_fini(void *state) {
  co_rdv *r = state;
  if (!r) return;
  free(r->tab);
  free(r);
}

RD_ACTOR_CLASS(rd__CollectiveRendezvous, rdv_init, rdv_fini)

/* Record a member's address (a later registration of a rank replaces an
 * earlier one: a member joining again after a failed try); the table. */
RD_ACTOR_METHOD(rd__CollectiveRendezvous, join) {
  co_rdv *r = state;
  co_reg reg;
  if (rd_arg_copy(call, 0, &reg, sizeof(reg)) != 0) return rd_call_fail(call, "rendezvous: bad registration");
  reg.e.addr[sizeof(reg.e.addr) - 1] = reg.e.uaddr[sizeof(reg.e.uaddr) - 1] = reg.e.host[sizeof(reg.e.host) - 1] = 0;
  if (reg.world != r->world)
    return rd_call_fail(call, "the group has %d members, and rank %d joined it with world %d", r->world, reg.rank,
                        reg.world);
  if (reg.rank < 0 || reg.rank >= r->world)
    return rd_call_fail(call, "rank %d is out of range for world %d", reg.rank, r->world);
  r->tab[reg.rank] = reg.e;
  return rd_return_bytes(call, 0, r->tab, (size_t)r->world * sizeof(co_entry));
}

RD_ACTOR_METHOD(rd__CollectiveRendezvous, table) {
  co_rdv *r = state;
  return rd_return_bytes(call, 0, r->tab, (size_t)r->world * sizeof(co_entry));
}

/* The group's rendezvous actor: rank 0 creates it (or finds the one left
 * by a try that failed); the others look it up until it is there. */
static int rdv_find(const rd_collective *g, rd_actor *out, uint64_t deadline) {
  char name[RD_COLLECTIVE_MAX_NAME + 32];
  snprintf(name, sizeof(name), "rd.collective/%s", g->name);
  for (useconds_t nap = 1000;; nap = nap < 50000 ? nap * 2 : nap) {
    if (g->rank == 0) {
      rd_actor_opts o;
      rd_actor_opts_init(&o);
      o.name = name;
      int32_t world = g->world;
      int r = rd_actor_create(rd__CollectiveRendezvous, RD_ARGS(rd_arg_bytes(&world, sizeof(world))), &o, out);
      if (r != RD_EEXIST) return r;
    }
    int r = rd_actor_get(name, out);
    if (r != RD_ENOENT) return r;
    if (deadline && co_now_ns() >= deadline) return RD_ETIMEDOUT;
    usleep(nap);
  }
}

/* Call the rendezvous (reg: join with it; NULL: read the table) and copy
 * the table into tab.  RD_EACTOR_DIED when the rendezvous is gone (the
 * group before this one of the same name has just finished with it). */
static int rdv_call(rd_collective *g, rd_actor rdv, const co_reg *reg, co_entry *tab) {
  rd_ref ref;
  int r = reg ? rd_actor_call(rdv, rd__CollectiveRendezvous_join, RD_ARGS(rd_arg_bytes(reg, sizeof(*reg))), NULL, &ref)
              : rd_actor_call(rdv, rd__CollectiveRendezvous_table, RD_NO_ARGS, NULL, &ref);
  if (r != 0) return r;
  rd_buf b;
  r = rd_get(&ref, 1, &b, g->timeout_ms < 0 ? RD_TIMEOUT_INF : g->timeout_ms);
  if (r == 0 && b.size != (size_t)g->world * sizeof(co_entry)) r = RD_EPROTO;
  if (r == 0) memcpy(tab, b.data, b.size);
  else if (r == RD_ETASK) {
    rd__log(RD_LOG_WARN, "collective group '%s', rank %d: %.*s", g->name, g->rank, (int)b.size, (const char *)b.data);
    r = RD_EINVAL;
  }
  if (r != RD_ETIMEDOUT) rd_buf_release(&b);
  rd_ref_release(ref);
  return r;
}

/* ------------------------------------------------------------ connections */

/* Write or read all of buf on a non-blocking socket before the deadline. */
static int co_io(int fd, void *buf, size_t n, int out, uint64_t deadline) {
  uint8_t *p = buf;
  while (n > 0) {
    ssize_t k = out ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
    if (k > 0) {
      p += k;
      n -= (size_t)k;
      continue;
    }
    if (k == 0) return RD_ECONN;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return RD_ECONN;
    struct pollfd pf = {fd, (short)(out ? POLLOUT : POLLIN), 0};
    int pr = poll(&pf, 1, co_poll_ms(deadline));
    if (pr == 0) return RD_ETIMEDOUT;
    if (pr < 0 && errno != EINTR) return RD_ESYS;
  }
  return 0;
}

static void co_sock_setup(int fd) {
  int one = 1, buf = CO_UNIX_BUF;
  struct sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0 && ss.ss_family == AF_UNIX) {
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
  } else {
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* The abstract Unix address `name`; its length. */
static socklen_t co_unix_addr(struct sockaddr_un *su, const char *name) {
  memset(su, 0, sizeof(*su));
  su->sun_family = AF_UNIX;
  size_t n = strlen(name);
  if (n > sizeof(su->sun_path) - 2) n = sizeof(su->sun_path) - 2;
  memcpy(su->sun_path + 1, name, n);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}


/* Listen on ip, any port, and on a Unix socket of a fresh abstract name:
 * the sockets, and where they are in e. */
static int co_listen(const char *ip, co_entry *e, int *tcp_out, int *unix_out) {
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1) return RD_EINVAL;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return RD_ESYS;
  socklen_t len = sizeof(sa);
  if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, CO_BACKLOG) != 0 ||
      getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
    close(fd);
    return RD_ESYS;
  }
  snprintf(e->addr, sizeof(e->addr), "%.40s:%u", ip, (unsigned)ntohs(sa.sin_port));
  *tcp_out = fd;
  /* the same host: found by its boot id; without one, TCP only (and with
   * RAYDIST_COLLECTIVE_TCP=1, for a test, or where abstract sockets are
   * not shared between processes of one host) */
  *unix_out = -1;
  const char *tcp_only = getenv("RAYDIST_COLLECTIVE_TCP");
  if (tcp_only && !strcmp(tcp_only, "1")) return 0;
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (!f) return 0;
  if (!fgets(e->host, sizeof(e->host), f)) e->host[0] = 0;
  fclose(f);
  e->host[strcspn(e->host, "\n")] = 0;
  static unsigned counter;
  snprintf(e->uaddr, sizeof(e->uaddr), "raydist-coll.%d.%u.%llx", (int)getpid(), ++counter,
           (unsigned long long)(co_now_ns() & 0xffffffffffull));
  struct sockaddr_un su;
  socklen_t ulen = co_unix_addr(&su, e->uaddr);
  int ufd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (ufd < 0 || bind(ufd, (struct sockaddr *)&su, ulen) != 0 || listen(ufd, CO_BACKLOG) != 0) {
    if (ufd >= 0) close(ufd);
    e->uaddr[0] = e->host[0] = 0;
    return 0;
  }
  *unix_out = ufd;
  return 0;
}

/* Connect to "IP:PORT" before the deadline: the socket, or RD_EAGAIN when
 * nobody listens there (yet, or any more). */
static int co_connect(const char *addr, uint64_t deadline, int *fd_out) {
  char ip[64];
  snprintf(ip, sizeof(ip), "%s", addr);
  char *colon = strrchr(ip, ':');
  if (!colon) return RD_EPROTO;
  *colon = 0;
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)atoi(colon + 1));
  if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1) return RD_EPROTO;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return RD_ESYS;
  int r = 0;
  if (rd__connect_within(fd, (const struct sockaddr *)&sa, sizeof(sa), co_poll_ms(deadline)) != 0)
    r = errno == ETIMEDOUT ? RD_ETIMEDOUT : RD_EAGAIN;
  if (r != 0) {
    close(fd);
    return r;
  }
  co_sock_setup(fd);
  *fd_out = fd;
  return 0;
}

/* Connect to member e: over its Unix socket when it is on this host (host
 * is ours), else (or when that fails) over TCP.  RD_EAGAIN when nobody
 * listens there (yet, or any more). */
static int co_connect_entry(const co_entry *e, const char *host, uint64_t deadline, int *fd_out) {
  if (e->uaddr[0] && host[0] && !strcmp(e->host, host)) {
    struct sockaddr_un su;
    socklen_t ulen = co_unix_addr(&su, e->uaddr);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&su, ulen) == 0) {
      co_sock_setup(fd);
      *fd_out = fd;
      return 0;
    }
    if (fd >= 0) close(fd);
  }
  return co_connect(e->addr, deadline, fd_out);
}

static int co_token_eq(const char *a, const char *b) {
  unsigned char d = 0;
  for (size_t i = 0; i < CO_TOKEN_MAX; i++) d |= (unsigned char)(a[i] ^ b[i]);
  return d == 0;
}

static void co_refuse(rd_collective *g, co_pending *p, int want_rank, const char *why) {
  rd__log(RD_LOG_INFO, "collective group '%s', rank %d: refused a connection that is not rank %d's of this group (%s)",
          g->name, g->rank, want_rank, why);
  close(p->fd);
  p->fd = -1;
}

/* Whether hello h is one this member takes: the ring's left neighbour's
 * (want->p2p 0: want's rank exactly) or, for rd_send/rd_recv (want->p2p
 * 1), any lower rank's not connected yet; both of this group's rendezvous,
 * world and cluster token. */
static int co_hello_ok(const rd_collective *g, const co_hello *h, const co_hello *want) {
  if (h->magic != CO_MAGIC || h->world != want->world || h->rdv != want->rdv || h->p2p != want->p2p ||
      !co_token_eq(h->token, want->token))
    return 0;
  if (!want->p2p) return h->rank == want->rank;
  return h->rank >= 0 && h->rank < g->rank && g->peer[h->rank].fd < 0;
}

/* A connection whose hello is good: the left neighbour's, or a lower
 * rank's for rd_send/rd_recv, acknowledged here (its first send or recv
 * waits for that).  Its rank. */
static int co_take(rd_collective *g, int fd, const co_hello *h, uint64_t deadline) {
  if (!h->p2p) {
    g->left = fd;
    return h->rank;
  }
  uint32_t ack = CO_MAGIC;
  if (co_io(fd, &ack, sizeof(ack), 1, deadline) != 0) {
    close(fd);   /* that member finds it closed */
    return -1;
  }
  g->peer[h->rank].fd = fd;
  return h->rank;
}

/* Take the connection of rank want->rank (the left neighbour, or a lower
 * rank for rd_send/rd_recv: see co_hello_ok) from the listening sockets.
 * Other connections are closed: a wrong hello at once, a silent one after
 * CO_HELLO_WAIT_MS; up to CO_PENDING_MAX wait for their hellos together,
 * so a stranger that says nothing does not hold the member wanted back.
 * Good rd_send/rd_recv connections of other ranks that come first are
 * taken too, and those whose hello is still coming wait in g->pend for
 * the next call. */
static int co_accept(rd_collective *g, const co_hello *want, uint64_t deadline) {
  co_pending *pend = g->pend;
  int r = RD_ETIMEDOUT;
  for (;;) {
    struct pollfd pf[2 + CO_PENDING_MAX];
    int nl = 0, np = g->npend;
    for (int k = 0; k < 2 && np < CO_PENDING_MAX; k++)
      if (g->lfd[k] >= 0) pf[nl++] = (struct pollfd){g->lfd[k], POLLIN, 0};
    uint64_t wake = deadline;
    for (int i = 0; i < np; i++) {
      pf[nl + i] = (struct pollfd){pend[i].fd, POLLIN, 0};
      if (!wake || pend[i].until < wake) wake = pend[i].until;
    }
    int pr = poll(pf, (nfds_t)(nl + np), co_poll_ms(wake));
    if (pr < 0 && errno != EINTR) {
      r = RD_ESYS;
      break;
    }
    uint64_t now = co_now_ns();
    for (int i = 0; i < np; i++) {
      co_pending *p = &pend[i];
      if (pr > 0 && pf[nl + i].revents) {
        ssize_t k = recv(p->fd, (uint8_t *)&p->h + p->got, sizeof(p->h) - p->got, 0);
        if (k > 0) p->got += (size_t)k;
        else if (k == 0 || (errno != EAGAIN && errno != EINTR)) co_refuse(g, p, want->rank, "it closed or failed");
      }
      if (p->fd >= 0 && p->got == sizeof(p->h)) {
        if (co_hello_ok(g, &p->h, want)) {
          int fd = p->fd;
          p->fd = -1;
          if (co_take(g, fd, &p->h, deadline) == want->rank) r = 0;
        } else {
          co_refuse(g, p, want->rank, "a wrong hello");
        }
      } else if (p->fd >= 0 && now >= p->until) {
        co_refuse(g, p, want->rank, "no hello in time");
      }
    }
    int keep = 0;   /* drop the closed and taken ones */
    for (int i = 0; i < np; i++)
      if (pend[i].fd >= 0) pend[keep++] = pend[i];
    g->npend = keep;
    if (r == 0 || (deadline && now >= deadline)) break;
    for (int k = 0; pr > 0 && k < nl && g->npend < CO_PENDING_MAX; k++) {
      if (!pf[k].revents) continue;
      int fd = accept4(pf[k].fd, NULL, NULL, SOCK_CLOEXEC);
      if (fd < 0) continue;
      co_sock_setup(fd);
      co_pending *p = &pend[g->npend++];
      memset(p, 0, sizeof(*p));
      p->fd = fd;
      p->until = now + (uint64_t)CO_HELLO_WAIT_MS * 1000000ull;
    }
  }
  return r;
}

/* ------------------------------------------------------------ data */

/* One ring step: send sbuf[sdone..savail) to the right while receiving
 * rbuf[rdone..rn) from the left, until sn and rn bytes have gone. */
typedef struct co_xfer {
  const uint8_t *sbuf;
  size_t sn, sdone, savail;
  uint8_t *rbuf;
  size_t rn, rdone;
  void (*on_recv)(struct co_xfer *x, void *ctx);   /* after bytes came (may raise savail) */
  void *ctx;
} co_xfer;

static int co_run(rd_collective *g, co_xfer *x, uint64_t deadline) {
  while (x->sdone < x->sn || x->rdone < x->rn) {
    struct pollfd p[2];
    int np = 0, si = -1, ri = -1;
    if (x->sdone < x->savail) {
      si = np;
      p[np++] = (struct pollfd){g->right, POLLOUT, 0};
    }
    if (x->rdone < x->rn) {
      ri = np;
      p[np++] = (struct pollfd){g->left, POLLIN, 0};
    }
    if (np == 0) return co_fail(g, RD_EPROTO, "a ring step waits for bytes to send that cannot come");
    int pr = poll(p, (nfds_t)np, co_poll_ms(deadline));
    if (pr < 0) {
      if (errno == EINTR) continue;
      return co_fail(g, RD_ESYS, "poll: %s", strerror(errno));
    }
    if (pr == 0)
      return co_fail(g, RD_ETIMEDOUT, "waited %lld ms for rank %d (sent %zu of %zu bytes, received %zu of %zu)",
                     (long long)g->timeout_ms, co_ring(g, x->rdone < x->rn ? -1 : 1),
                     x->sdone, x->sn, x->rdone, x->rn);
    if (si >= 0 && p[si].revents) {
      ssize_t k = send(g->right, x->sbuf + x->sdone, x->savail - x->sdone, MSG_NOSIGNAL);
      if (k > 0) x->sdone += (size_t)k;
      else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        return co_fail(g, RD_ECONN, "sending to rank %d: %s (it left the group, failed or died)",
                       co_ring(g, 1), strerror(errno));
    }
    if (ri >= 0 && p[ri].revents) {
      ssize_t k = recv(g->left, x->rbuf + x->rdone, x->rn - x->rdone, 0);
      if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        return co_fail(g, RD_ECONN, "rank %d closed its connection%s%s (it left the group, failed or died)",
                       co_ring(g, -1), k ? ": " : "", k ? strerror(errno) : "");
      if (k > 0) {
        x->rdone += (size_t)k;
        if (x->on_recv) x->on_recv(x, x->ctx);
      }
    }
  }
  return 0;
}

/* Send the same block size both ways: bytes from s to the right, from the
 * left into r (with on_recv, if any). */
static int co_step(rd_collective *g, const void *s, void *r, size_t n, void (*on_recv)(co_xfer *, void *), void *ctx,
                   uint64_t deadline) {
  co_xfer x = {s, n, 0, n, r, n, 0, on_recv, ctx};
  return co_run(g, &x, deadline);
}

typedef struct co_op {
  uint32_t magic, kind;
  uint64_t seq, size;
  int32_t dtype, op, root, pad;
} co_op;

static const char *co_kind_name(uint32_t k) {
  switch (k) {
    case CO_BARRIER: return "rd_barrier";
    case CO_ALLREDUCE: return "rd_allreduce";
    case CO_BROADCAST: return "rd_broadcast";
    case CO_ALLGATHER: return "rd_allgather";
    case CO_REDUCE_SCATTER: return "rd_reduce_scatter";
    case CO_SEND: return "rd_send";
    default: return "an unknown operation";
  }
}

/* The start of every operation: the group must be whole, and the left
 * neighbour must be calling the same operation with the same arguments. */
static int co_begin(rd_collective *g, uint32_t kind, uint64_t size, int dtype, int op, int root, uint64_t deadline) {
  co_op mine = {CO_MAGIC, kind, g->seq++, size, dtype, op, root, 0}, theirs;
  int r = co_step(g, &mine, &theirs, sizeof(mine), NULL, NULL, deadline);
  if (r != 0) return r;
  if (memcmp(&mine, &theirs, sizeof(mine)) != 0) {
    int left = co_ring(g, -1);
    if (theirs.magic != CO_MAGIC) return co_fail(g, RD_EPROTO, "rank %d sent garbage", left);
    return co_fail(g, RD_EINVAL,
                   "rank %d called %s (size %llu, dtype %d, op %d, root %d) as operation %llu, and this rank %s "
                   "(size %llu, dtype %d, op %d, root %d) as operation %llu: every member must make the same calls",
                   left, co_kind_name(theirs.kind), (unsigned long long)theirs.size, theirs.dtype, theirs.op,
                   theirs.root, (unsigned long long)theirs.seq, co_kind_name(kind), (unsigned long long)size, dtype,
                   op, root, (unsigned long long)mine.seq);
  }
  return 0;
}

/* RD_EINVAL for NULL, RD_ECONN for a broken group, else 0. */
static int co_usable(const rd_collective *g, const char *who) {
  if (!g) {
    rd__log(RD_LOG_WARN, "%s: NULL group", who);
    return RD_EINVAL;
  }
  if (g->err) {
    rd__log(RD_LOG_WARN, "%s: collective group '%s' is broken since an earlier %s; leave it and join again", who,
            g->name, rd_err_name(g->err));
    return RD_ECONN;
  }
  return 0;
}

int rd_barrier(rd_collective *g) {
  int r = co_usable(g, "rd_barrier");
  if (r != 0 || g->world == 1) return r;
  uint64_t deadline = co_deadline(g->timeout_ms);
  r = co_begin(g, CO_BARRIER, 0, 0, 0, 0, deadline);
  /* after k steps a member has heard, through its left neighbour, from the
   * k members to its left: after world - 1, from all of them */
  for (int s = 1; s < g->world - 1 && r == 0; s++) {
    uint64_t out = g->seq, in = 0;
    r = co_step(g, &out, &in, sizeof(out), NULL, NULL, deadline);
  }
  return r;
}

/* ---- all-reduce ---- */

static size_t co_esize(int dtype) {
  switch (dtype) {
    case RD_FLOAT32: case RD_INT32: return 4;
    case RD_FLOAT64: case RD_INT64: return 8;
    default: return 0;
  }
}

/* Integers reduce in unsigned arithmetic: a sum that overflows wraps, as
 * two's complement, instead of being undefined. */
#define CO_REDUCE_LOOP(T, ADD, MUL)                                   \
  do {                                                                \
    T *restrict d = (T *)dst;                                         \
    const T *restrict s = (const T *)src;                             \
    switch (op) {                                                     \
      case RD_SUM: for (size_t i = 0; i < n; i++) d[i] = ADD; break;  \
      case RD_PROD: for (size_t i = 0; i < n; i++) d[i] = MUL; break; \
      case RD_MIN: for (size_t i = 0; i < n; i++) d[i] = s[i] < d[i] ? s[i] : d[i]; break; \
      case RD_MAX: for (size_t i = 0; i < n; i++) d[i] = s[i] > d[i] ? s[i] : d[i]; break; \
    }                                                                 \
  } while (0)

static void co_reduce(void *dst, const void *src, size_t n, int dtype, int op) {
  switch (dtype) {
    case RD_FLOAT32: CO_REDUCE_LOOP(float, d[i] + s[i], d[i] * s[i]); break;
    case RD_FLOAT64: CO_REDUCE_LOOP(double, d[i] + s[i], d[i] * s[i]); break;
    case RD_INT32:
      CO_REDUCE_LOOP(int32_t, (int32_t)((uint32_t)d[i] + (uint32_t)s[i]), (int32_t)((uint32_t)d[i] * (uint32_t)s[i]));
      break;
    case RD_INT64:
      CO_REDUCE_LOOP(int64_t, (int64_t)((uint64_t)d[i] + (uint64_t)s[i]), (int64_t)((uint64_t)d[i] * (uint64_t)s[i]));
      break;
  }
}

/* A reduce-scatter step's receiver: elements that came are reduced into
 * the own block at once, while the rest still travels. */
typedef struct co_red {
  uint8_t *dst;
  size_t es, done;   /* elements reduced so far */
  int dtype, op;
} co_red;

static void co_reduce_arrived(co_xfer *x, void *ctx) {
  co_red *c = ctx;
  size_t have = x->rdone / c->es;
  if (have == c->done) return;
  co_reduce(c->dst + c->done * c->es, x->rbuf + c->done * c->es, have - c->done, c->dtype, c->op);
  c->done = have;
}

/* g->tmp with room for size bytes. */
static int co_tmp(rd_collective *g, size_t size) {
  if (size <= g->tmpcap) return 0;
  uint8_t *t = realloc(g->tmp, size);
  if (!t) return co_fail(g, RD_ENOMEM, "no memory for a %zu-byte buffer", size);
  g->tmp = t;
  g->tmpcap = size;
  return 0;
}

/* Every member's block of `size` bytes at base + rank x size goes around
 * the ring to every other member's base, in world - 1 steps (each sends the
 * block it got last and takes its left neighbour's). */
static int co_gather_ring(rd_collective *g, uint8_t *base, size_t size, uint64_t deadline) {
  int n = g->world, r = 0;
  for (int s = 0; s < n - 1 && r == 0; s++) {
    r = co_step(g, base + (size_t)co_ring(g, -s) * size, base + (size_t)co_ring(g, -s - 1) * size, size, NULL, NULL,
                deadline);
  }
  return r;
}

/* A small all-reduce (at most CO_SMALL_BYTES a member): every member's
 * whole buffer goes around the ring (world - 1 steps, as rd_allgather),
 * and each member reduces them all itself, in rank order, so that all get
 * the same bytes.  Half the steps of the ring all-reduce for a little more
 * data: each step is a wake-up of the next process, which is what a small
 * all-reduce costs. */
static int co_allreduce_small(rd_collective *g, uint8_t *b, size_t count, size_t es, int dtype, int op,
                              uint64_t deadline) {
  int n = g->world, r;
  size_t bytes = count * es;
  if ((r = co_tmp(g, bytes * (size_t)n)) != 0) return r;
  if (bytes) memcpy(g->tmp + (size_t)g->rank * bytes, b, bytes);
  r = co_gather_ring(g, g->tmp, bytes, deadline);
  if (r != 0 || !bytes) return r;
  memcpy(b, g->tmp, bytes);
  for (int k = 1; k < n; k++) co_reduce(b, g->tmp + (size_t)k * bytes, count, dtype, op);
  return 0;
}

/* Block i of n over count elements: its first element and length. */
static void co_block(size_t count, int n, int i, size_t *lo, size_t *len) {
  size_t base = count / (size_t)n, rem = count % (size_t)n;
  *lo = base * (size_t)i + ((size_t)i < rem ? (size_t)i : rem);
  *len = base + ((size_t)i < rem);
}

/* The ring's reduce-scatter over the world blocks of b (count elements), in
 * world - 1 steps: each sends a block and reduces the one coming from the
 * left into its own copy as it arrives.  Afterwards this member's block
 * (rank + 1 + shift) mod world is reduced over every member. */
static int co_reduce_scatter(rd_collective *g, uint8_t *b, size_t count, size_t es, int dtype, int op, int shift,
                             uint64_t deadline) {
  int n = g->world, r;
  if ((r = co_tmp(g, (count + (size_t)n - 1) / (size_t)n * es)) != 0) return r;
  for (int s = 0; s < n - 1 && r == 0; s++) {
    size_t slo, slen, rlo, rlen;
    co_block(count, n, co_ring(g, shift - s), &slo, &slen);
    co_block(count, n, co_ring(g, shift - s - 1), &rlo, &rlen);
    co_red red = {b + rlo * es, es, 0, dtype, op};
    co_xfer x = {b + slo * es, slen * es, 0, slen * es, g->tmp, rlen * es, 0, co_reduce_arrived, &red};
    r = co_run(g, &x, deadline);
  }
  return r;
}

/* What rd_allreduce and rd_reduce_scatter check: a usable group, a known
 * dtype (its size in *es) and op, buffers when count is not 0, and a size
 * (count, or count per member when scatter) that cannot overflow. */
static int co_reduce_args(rd_collective *g, const char *what, size_t count, int scatter, int dtype, int op,
                          int have_bufs, size_t *es) {
  int r = co_usable(g, what);
  if (r != 0) return r;
  size_t members = scatter ? (size_t)g->world : 1;
  *es = co_esize(dtype);
  if (!*es || op < RD_SUM || op > RD_MAX || (count && !have_bufs) || count > SIZE_MAX / 16 / members) {
    rd__log(RD_LOG_WARN, "%s: bad arguments (dtype %d, op %d, count %zu%s)", what, dtype, op, count,
            count && !have_bufs ? ", a NULL buffer" : "");
    return RD_EINVAL;
  }
  return 0;
}

int rd_allreduce(rd_collective *g, void *buf, size_t count, int dtype, int op) {
  size_t es;
  int r = co_reduce_args(g, "rd_allreduce", count, 0, dtype, op, buf != NULL, &es);
  if (r != 0) return r;
  if (g->world == 1) return 0;
  uint64_t deadline = co_deadline(g->timeout_ms);
  r = co_begin(g, CO_ALLREDUCE, count, dtype, op, 0, deadline);
  if (r != 0) return r;
  int n = g->world;
  uint8_t *b = buf;
  if (count * es <= CO_SMALL_BYTES) return co_allreduce_small(g, b, count, es, dtype, op, deadline);
  r = co_reduce_scatter(g, b, count, es, dtype, op, 0, deadline);   /* this member ends with block rank + 1 */
  for (int s = 0; s < n - 1 && r == 0; s++) {   /* all-gather of the reduced blocks */
    size_t slo, slen, rlo, rlen;
    co_block(count, n, co_ring(g, 1 - s), &slo, &slen);
    co_block(count, n, co_ring(g, -s), &rlo, &rlen);
    co_xfer x = {b + slo * es, slen * es, 0, slen * es, b + rlo * es, rlen * es, 0, NULL, NULL};
    r = co_run(g, &x, deadline);
  }
  return r;
}

int rd_reduce_scatter(rd_collective *g, const void *send, void *recv, size_t recv_count, int dtype, int op) {
  size_t es;
  int r = co_reduce_args(g, "rd_reduce_scatter", recv_count, 1, dtype, op, send && recv, &es);
  if (r != 0) return r;
  size_t bytes = recv_count * es, total = bytes * (size_t)g->world;
  if (g->world == 1) {
    if (bytes && recv != send) memmove(recv, send, bytes);
    return 0;
  }
  uint64_t deadline = co_deadline(g->timeout_ms);
  r = co_begin(g, CO_REDUCE_SCATTER, recv_count, dtype, op, 0, deadline);
  if (r != 0) return r;
  /* a working copy of send (the steps reduce into it); the schedule is
   * shifted by one so that this member ends with its own block */
  uint8_t *work = malloc(total ? total : 1);
  if (!work) return co_fail(g, RD_ENOMEM, "no memory for a %zu-byte working copy", total);
  if (total) memcpy(work, send, total);
  r = co_reduce_scatter(g, work, recv_count * (size_t)g->world, es, dtype, op, -1, deadline);
  if (r == 0 && bytes) memcpy(recv, work + (size_t)g->rank * bytes, bytes);
  free(work);
  return r;
}

/* ---- broadcast, all-gather ---- */

/* A member between the root and the last one passes on what came. */
static void co_forward_arrived(co_xfer *x, void *ctx) {
  (void)ctx;
  x->savail = x->rdone;
}

int rd_broadcast(rd_collective *g, void *buf, size_t size, int root) {
  int r = co_usable(g, "rd_broadcast");
  if (r != 0) return r;
  if (root < 0 || root >= g->world || (size && !buf)) {
    rd__log(RD_LOG_WARN, "rd_broadcast: bad arguments (root %d of %d, size %zu, buf %p)", root, g->world, size, buf);
    return RD_EINVAL;
  }
  if (g->world == 1) return 0;
  uint64_t deadline = co_deadline(g->timeout_ms);
  r = co_begin(g, CO_BROADCAST, size, 0, 0, root, deadline);
  if (r != 0) return r;
  co_xfer x = {buf, size, 0, size, buf, size, 0, co_forward_arrived, NULL};
  if (g->rank == root) x.rn = 0;                                    /* sends only */
  else if (co_ring(g, 1) == root) x.sn = x.savail = 0, x.on_recv = NULL;   /* the last: receives only */
  else x.savail = 0;                                                /* passes on */
  return co_run(g, &x, deadline);
}

int rd_allgather(rd_collective *g, const void *send, size_t size, void *recv) {
  int r = co_usable(g, "rd_allgather");
  if (r != 0) return r;
  if ((size && (!send || !recv)) || size > SIZE_MAX / (size_t)g->world) {
    rd__log(RD_LOG_WARN, "rd_allgather: NULL send or recv buffer, or %zu bytes x %d members overflow", size, g->world);
    return RD_EINVAL;
  }
  uint8_t *out = recv;
  if (size && send != out + (size_t)g->rank * size) memmove(out + (size_t)g->rank * size, send, size);
  if (g->world == 1) return 0;
  uint64_t deadline = co_deadline(g->timeout_ms);
  r = co_begin(g, CO_ALLGATHER, size, 0, 0, 0, deadline);
  return r != 0 ? r : co_gather_ring(g, out, size, deadline);
}

/* ---- send, receive ---- */

/* The connection with member `other` for rd_send/rd_recv.  The lower rank
 * of the two makes it: it connects, says hello, and waits for the higher
 * one's acknowledgement, which comes when the higher one makes its first
 * rd_send or rd_recv with it (and takes connections from its listening
 * sockets until that one's is there). */
static int co_peer_fd(rd_collective *g, int other, uint64_t deadline) {
  co_peer *p = &g->peer[other];
  if (p->fd >= 0) return p->fd;
  co_hello want = g->hello;
  want.p2p = 1;
  int r;
  if (g->rank > other) {
    want.rank = other;
    r = co_accept(g, &want, deadline);
  } else {
    r = co_connect_entry(&g->tab[other], g->tab[g->rank].host, deadline, &p->fd);
    if (r == RD_EAGAIN) r = RD_ECONN;   /* it listened since the join: gone */
    uint32_t ack = 0;
    if (r == 0) r = co_io(p->fd, &want, sizeof(want), 1, deadline);
    if (r == 0) r = co_io(p->fd, &ack, sizeof(ack), 0, deadline);
    if (r == 0 && ack != CO_MAGIC) r = RD_EPROTO;
  }
  if (r == RD_ETIMEDOUT)
    return co_fail(g, r, "waited %lld ms for rank %d to make its first rd_send or rd_recv with this rank",
                   (long long)g->timeout_ms, other);
  if (r != 0)
    return co_fail(g, r == RD_ENOMEM || r == RD_ESYS ? r : RD_ECONN,
                   "no connection with rank %d for rd_send/rd_recv: %s (it left the group, failed or died)", other,
                   rd_err_name(r));
  return p->fd;
}

static int co_p2p_args(rd_collective *g, const char *what, const void *buf, size_t size, int other) {
  int r = co_usable(g, what);
  if (r != 0) return r;
  if (other < 0 || other >= g->world || other == g->rank || (size && !buf)) {
    rd__log(RD_LOG_WARN, "%s: bad arguments (rank %d of %d to or from rank %d, size %zu%s)", what, g->rank,
            g->world, other, size, size && !buf ? ", a NULL buffer" : "");
    return RD_EINVAL;
  }
  return 0;
}

/* A message's header from src, for a receive of size bytes: 0, or the
 * group fails. */
static int co_check_msg(rd_collective *g, const co_op *h, int src, size_t size, const char *what) {
  if (h->magic != CO_MAGIC || h->kind != CO_SEND || h->root != src || h->seq != g->peer[src].got)
    return co_fail(g, RD_EPROTO, "rank %d sent garbage", src);
  if (h->size != size)
    return co_fail(g, RD_EINVAL, "rank %d sent %llu bytes as its message %llu to this rank, and %s here takes %zu",
                   src, (unsigned long long)h->size, (unsigned long long)h->seq, what, size);
  return 0;
}

/* rd_send, rd_recv and rd_sendrecv: a message (header and bytes) to dst
 * while one comes from src (either -1: none).  Both directions move as
 * they can, so the send never waits for the receive (the other end may
 * send only after it has received); the bytes in go to rbuf only after
 * their header is checked.  Each round tries both, and polls only when
 * neither moved. */
static int co_exchange(rd_collective *g, const char *what, int dst, const void *sbuf, size_t ssize, int src,
                       void *rbuf, size_t rsize) {
  uint64_t deadline = co_deadline(g->timeout_ms);
  int sfd = -1, rfd = -1, r;
  if (dst >= 0 && (sfd = co_peer_fd(g, dst, deadline)) < 0) return sfd;
  if (src >= 0 && (rfd = co_peer_fd(g, src, deadline)) < 0) return rfd;
  const size_t hn = sizeof(co_op);
  co_op hs = {CO_MAGIC, CO_SEND, dst >= 0 ? g->peer[dst].sent : 0, ssize, 0, 0, g->rank, 0}, hr;
  size_t sn = dst >= 0 ? hn + ssize : 0, rn = src >= 0 ? hn + rsize : 0, sdone = 0, rdone = 0;
  while (sdone < sn || rdone < rn) {
    int moved = 0;
    if (sdone < sn) {
      struct iovec iov[2];
      int n = 0;
      if (sdone < hn) iov[n++] = (struct iovec){(uint8_t *)&hs + sdone, hn - sdone};
      size_t off = sdone < hn ? 0 : sdone - hn;
      if (ssize > off) iov[n++] = (struct iovec){(uint8_t *)sbuf + off, ssize - off};
      struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
      ssize_t k = sendmsg(sfd, &mh, MSG_NOSIGNAL);
      if (k > 0) sdone += (size_t)k, moved = 1;
      else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        return co_fail(g, RD_ECONN, "sending to rank %d: %s (it left the group, failed or died)", dst, strerror(errno));
    }
    if (rdone < rn) {
      uint8_t *to = rdone < hn ? (uint8_t *)&hr + rdone : (uint8_t *)rbuf + (rdone - hn);
      ssize_t k = recv(rfd, to, rdone < hn ? hn - rdone : rn - rdone, 0);
      if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        return co_fail(g, RD_ECONN, "receiving from rank %d: %s (it left the group, failed or died)", src,
                       k ? strerror(errno) : "it closed its connection");
      if (k > 0) {
        rdone += (size_t)k, moved = 1;
        if (rdone == hn && (r = co_check_msg(g, &hr, src, rsize, what)) != 0) return r;
      }
    }
    if (moved) continue;
    struct pollfd p[2];
    int np = 0;
    if (sdone < sn) p[np++] = (struct pollfd){sfd, POLLOUT, 0};
    if (rdone < rn) p[np++] = (struct pollfd){rfd, POLLIN, 0};
    int pr = poll(p, (nfds_t)np, co_poll_ms(deadline));
    if (pr < 0 && errno != EINTR) return co_fail(g, RD_ESYS, "poll: %s", strerror(errno));
    if (pr == 0 && rdone < rn)
      return co_fail(g, RD_ETIMEDOUT, "waited %lld ms in %s for rank %d's message %llu (%zu of %zu bytes came)",
                     (long long)g->timeout_ms, what, src, (unsigned long long)g->peer[src].got, rdone, rn);
    if (pr == 0)
      return co_fail(g, RD_ETIMEDOUT, "waited %lld ms in %s for rank %d to take a message (%zu of %zu bytes sent)",
                     (long long)g->timeout_ms, what, dst, sdone, sn);
  }
  if (dst >= 0) g->peer[dst].sent++;
  if (src >= 0) g->peer[src].got++;
  return 0;
}

int rd_send(rd_collective *g, const void *buf, size_t size, int dst) {
  int r = co_p2p_args(g, "rd_send", buf, size, dst);
  return r != 0 ? r : co_exchange(g, "rd_send", dst, buf, size, -1, NULL, 0);
}

int rd_recv(rd_collective *g, void *buf, size_t size, int src) {
  int r = co_p2p_args(g, "rd_recv", buf, size, src);
  return r != 0 ? r : co_exchange(g, "rd_recv", -1, NULL, 0, src, buf, size);
}

int rd_sendrecv(rd_collective *g, const void *sbuf, size_t ssize, int dst, void *rbuf, size_t rsize, int src) {
  int r = co_p2p_args(g, "rd_sendrecv", sbuf, ssize, dst);
  if (r == 0) r = co_p2p_args(g, "rd_sendrecv", rbuf, rsize, src);
  return r != 0 ? r : co_exchange(g, "rd_sendrecv", dst, sbuf, ssize, src, rbuf, rsize);
}

/* ------------------------------------------------------------ join, leave */

int rd_collective_rank(const rd_collective *g) { return g ? g->rank : -1; }
int rd_collective_world(const rd_collective *g) { return g ? g->world : 0; }

void rd_collective_leave(rd_collective *g) {
  if (!g) return;
  co_close_all(g);
  free(g->peer);
  free(g->tab);
  free(g->tmp);
  free(g);
}

/* Joining's state: the rendezvous, its table, and the hello this member
 * sends its right neighbour. */
typedef struct co_joining {
  rd_actor rdv;
  co_entry *tab;
  co_reg reg;
  co_hello hello;
  useconds_t nap;
} co_joining;

/* Register with the rendezvous (found or created), which gives the table.
 * RD_EACTOR_DIED (the last group of this name has just killed it) starts
 * over with a new one. */
static int co_register(rd_collective *g, co_joining *j, uint64_t deadline) {
  for (;;) {
    int r = rdv_find(g, &j->rdv, deadline);
    if (r == 0) r = rdv_call(g, j->rdv, &j->reg, j->tab);
    if (r != RD_EACTOR_DIED) return r;
    if (deadline && co_now_ns() >= deadline) return RD_ETIMEDOUT;
  }
}

/* Connect to the right neighbour once it is in the table and listening,
 * and send it the hello (its acknowledgement is read later). */
static int co_connect_right(rd_collective *g, co_joining *j, uint64_t deadline) {
  int right = co_ring(g, 1);
  for (;;) {
    if (j->tab[right].addr[0]) {
      int r = co_connect_entry(&j->tab[right], j->reg.e.host, deadline, &g->right);
      if (r == 0) {
        r = co_io(g->right, &j->hello, sizeof(j->hello), 1, deadline);
        if (r == 0) return 0;
        co_close(&g->right);
      }
      if (r != RD_EAGAIN && r != RD_ECONN) return r;
      /* a stale entry (a member of a failed try), or not listening yet */
    }
    if (deadline && co_now_ns() >= deadline) return RD_ETIMEDOUT;
    usleep(j->nap);
    if (j->nap < 50000) j->nap *= 2;
    int r = rdv_call(g, j->rdv, NULL, j->tab);
    if (r == RD_EACTOR_DIED) r = co_register(g, j, deadline);
    if (r != 0) return r;
  }
}

/* Join the ring: connect right and say hello; take the left neighbour's
 * connection and acknowledge it; then wait for the right one's
 * acknowledgement.  A connection the right end refuses (the address was
 * stale and reused by another process) is made again.  The order has no
 * cycle: connections complete in the kernel's backlog, and a member
 * acknowledges its left before it waits for its right. */
static int co_connect_ring(rd_collective *g, const co_entry *me, const char *token,
                           uint64_t deadline, rd_actor *rdv_out) {
  co_joining j;
  memset(&j, 0, sizeof(j));
  j.nap = 2000;
  if (!(j.tab = calloc((size_t)g->world, sizeof(co_entry)))) return RD_ENOMEM;
  j.reg.rank = g->rank;
  j.reg.world = g->world;
  j.reg.e = *me;
  j.hello.magic = CO_MAGIC;
  j.hello.world = g->world;
  j.hello.rank = g->rank;
  snprintf(j.hello.token, sizeof(j.hello.token), "%s", token);
  int r = co_register(g, &j, deadline);
  for (int accepted = 0; r == 0;) {
    j.hello.rdv = j.rdv.id;
    r = co_connect_right(g, &j, deadline);
    if (r == 0 && !accepted) {
      co_hello want = j.hello;
      want.rank = co_ring(g, -1);
      r = co_accept(g, &want, deadline);
      uint32_t ack = CO_MAGIC;
      if (r == 0) r = co_io(g->left, &ack, sizeof(ack), 1, deadline);
      accepted = r == 0;
    }
    if (r != 0) break;
    uint32_t ack = 0;
    r = co_io(g->right, &ack, sizeof(ack), 0, deadline);
    if (r == 0 && ack == CO_MAGIC) break;
    if (r == RD_ETIMEDOUT) break;
    co_close(&g->right);   /* refused: not our neighbour after all */
    r = rdv_call(g, j.rdv, NULL, j.tab);
    if (r == RD_EACTOR_DIED) r = co_register(g, &j, deadline);
  }
  co_pend_close(g);   /* strangers: only the left neighbour is taken while joining */
  *rdv_out = j.rdv;   /* also on failure: rank 0 then removes it */
  /* rd_send/rd_recv connect by the table, and say this hello */
  if (r == 0) {
    g->hello = j.hello;
    g->tab = j.tab;
  } else {
    free(j.tab);
  }
  return r;
}

int rd_collective_join(const char *name, int world, int rank, int64_t timeout_ms, rd_collective **out) {
  if (!out || !name || !*name || strlen(name) > RD_COLLECTIVE_MAX_NAME || world < 1 ||
      world > RD_COLLECTIVE_MAX_WORLD || rank < 0 || rank >= world) {
    rd__log(RD_LOG_WARN, "rd_collective_join: bad arguments (name %s%s%s, world %d, rank %d; names 1..%d bytes, "
            "world 1..%d)", name ? "'" : "", name ? name : "NULL", name ? "'" : "", world, rank,
            RD_COLLECTIVE_MAX_NAME, RD_COLLECTIVE_MAX_WORLD);
    return RD_EINVAL;
  }
  *out = NULL;
  char ip[64], token[CO_TOKEN_MAX];
  int r = rd__node_addr(ip, sizeof(ip), token, sizeof(token));
  if (r != 0) return r;
  rd_collective *g = calloc(1, sizeof(*g));
  if (!g) return RD_ENOMEM;
  g->world = world;
  g->rank = rank;
  g->timeout_ms = timeout_ms < 0 ? -1 : timeout_ms;
  g->right = g->left = g->lfd[0] = g->lfd[1] = -1;
  snprintf(g->name, sizeof(g->name), "%s", name);
  if (world == 1) {
    *out = g;
    return 0;
  }
  uint64_t deadline = co_deadline(g->timeout_ms);
  co_entry me;
  memset(&me, 0, sizeof(me));
  r = co_listen(ip, &me, &g->lfd[0], &g->lfd[1]);   /* kept for rd_send/rd_recv's connections */
  if (r != 0) {
    rd__log(RD_LOG_WARN, "rd_collective_join '%s': cannot listen on %s: %s", name, ip, strerror(errno));
    free(g);
    return r;
  }
  rd_actor rdv = {0};
  g->peer = malloc((size_t)world * sizeof(*g->peer));
  if (!g->peer) r = RD_ENOMEM;
  for (int i = 0; g->peer && i < world; i++) g->peer[i] = (co_peer){-1, 0, 0};
  if (r == 0) r = co_connect_ring(g, &me, token, deadline, &rdv);
  /* every member's entry, for rd_send/rd_recv (the table read from the
   * rendezvous may predate later members); once it is whole here, everybody
   * is connected: the rendezvous has done its part */
  if (r == 0) r = rd_allgather(g, &me, sizeof(me), g->tab);
  if (r == 0) {
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    int over_unix = getsockname(g->right, (struct sockaddr *)&ss, &sl) == 0 && ss.ss_family == AF_UNIX;
    rd__log(RD_LOG_INFO, "collective group '%s': rank %d of %d joined, listening at %s; to rank %d over %s", name,
            rank, world, me.addr, co_ring(g, 1), over_unix ? "a Unix socket (same host)" : "TCP");
  }
  /* rank 0 made the rendezvous: it goes once everybody is connected (the
   * name is free for the next group), or when rank 0 gives up (no group of
   * this name can form without it, and a later one starts clean) */
  if (rank == 0 && rdv.id) {
    int kr = rd_actor_kill(rdv, 1);
    if (kr != 0) rd__log(RD_LOG_INFO, "rd_collective_join '%s': the rendezvous did not go: %s", name, rd_err_name(kr));
  }
  if (r != 0) {
    rd__log(RD_LOG_WARN, "rd_collective_join '%s': rank %d of %d could not join: %s", name, rank, world,
            rd_err_name(r));
    rd_collective_leave(g);
    return r;
  }
  *out = g;
  return 0;
}
