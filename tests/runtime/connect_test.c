/* tests/runtime/connect_test.c - rd__connect_within, the connect a node
 * uses for its links to other nodes: it connects, it is refused at once by
 * a closed port, and it waits its whole time for a peer that does not
 * answer even while signals keep arriving (a node gets SIGCHLD whenever one
 * of its workers exits; a blocking connect failed with EINTR then, and a
 * link to a healthy node was refused for it). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: %s (errno %s)\n", __FILE__, __LINE__, #c, strerror(errno)); exit(1); } } while (0)

static volatile sig_atomic_t ticks;

static void on_alarm(int sig) {
  (void)sig;
  ticks++;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int tcp_socket(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  CHECK(fd >= 0);
  return fd;
}

/* A listener on 127.0.0.1 with the given backlog; its address in *a. */
static int listener(int backlog, struct sockaddr_in *a) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CHECK(fd >= 0);
  memset(a, 0, sizeof(*a));
  a->sin_family = AF_INET;
  a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK(bind(fd, (struct sockaddr *)a, sizeof(*a)) == 0);
  socklen_t l = sizeof(*a);
  CHECK(getsockname(fd, (struct sockaddr *)a, &l) == 0);
  CHECK(listen(fd, backlog) == 0);
  return fd;
}

int main(void) {
  /* signals every 2 ms from here on, without SA_RESTART */
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_alarm;
  CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
  struct itimerval it = {{0, 2000}, {0, 2000}};
  CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);

  /* 1: a listening peer: connected */
  struct sockaddr_in a;
  int l = listener(16, &a);
  for (int i = 0; i < 200; i++) {
    int fd = tcp_socket();
    CHECK(rd__connect_within(fd, (struct sockaddr *)&a, sizeof(a), 2000) == 0);
    int s;
    do s = accept(l, NULL, NULL); while (s < 0 && errno == EINTR);
    CHECK(s >= 0);
    close(s);
    close(fd);
  }
  close(l);

  /* 2: nobody listens: refused at once, not after the time */
  int fd = tcp_socket();
  double t0 = now_ms();
  CHECK(rd__connect_within(fd, (struct sockaddr *)&a, sizeof(a), 2000) == -1);
  CHECK(errno == ECONNREFUSED);
  CHECK(now_ms() - t0 < 1000);
  close(fd);

  /* 3: a peer that does not answer (its accept queue is full, so the kernel
   * drops our SYN): the wait lasts the whole 300 ms through ~150 signals
   * and ends with ETIMEDOUT */
  l = listener(0, &a);
  int filler[8];
  for (int i = 0; i < 8; i++) {
    filler[i] = tcp_socket();
    (void)rd__connect_within(filler[i], (struct sockaddr *)&a, sizeof(a), 50);
  }
  fd = tcp_socket();
  int before = ticks;
  t0 = now_ms();
  int r = rd__connect_within(fd, (struct sockaddr *)&a, sizeof(a), 300);
  double took = now_ms() - t0;
  printf("unanswered connect: %d (%s) after %.0f ms, %d signals\n", r, r ? strerror(errno) : "ok", took,
         (int)(ticks - before));
  CHECK(r == -1 && errno == ETIMEDOUT);
  CHECK(took >= 290 && took < 2000);
  CHECK(ticks - before >= 10);
  close(fd);

  /* 4: no limit (ms < 0) still connects */
  for (int i = 0; i < 8; i++) close(filler[i]);
  close(l);
  l = listener(16, &a);
  fd = tcp_socket();
  CHECK(rd__connect_within(fd, (struct sockaddr *)&a, sizeof(a), -1) == 0);
  close(fd);
  close(l);
  printf("connect_within: ok\n");
  return 0;
}
