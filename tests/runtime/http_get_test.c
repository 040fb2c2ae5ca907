/* tests/runtime/http_get_test.c - rd__http_get_all, the GETs the state API
 * sends every node at once: answers come back with their bodies and the
 * token as a bearer token; a peer that accepts and never answers fails
 * with "no whole answer" once the time is up without holding up the
 * others; another status, a closed port and an answer past the size
 * limit fail with why; rd__http_get is the same for one.  Then the query
 * helpers the node's HTTP APIs read requests with: rd__query's pairs
 * (decoded, a bare key, a bad escape), rd__url_encode and _decode. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A listener on 127.0.0.1; its port in *port. */
static int listener(int *port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CHECK(fd >= 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
  socklen_t l = sizeof(a);
  CHECK(getsockname(fd, (struct sockaddr *)&a, &l) == 0);
  CHECK(listen(fd, 16) == 0);
  *port = ntohs(a.sin_port);
  return fd;
}

/* Serves each connection on the listener: "hello PATH TOKEN" (200), a
 * 200 KB body for /big, 404 for /missing. */
static void *serve(void *arg) {
  int lfd = *(int *)arg;
  for (;;) {
    int c = accept(lfd, NULL, NULL);
    if (c < 0) return NULL;
    char req[4096];
    size_t n = 0;
    while (n < sizeof(req) - 1) {
      ssize_t r = read(c, req + n, sizeof(req) - 1 - n);
      if (r <= 0) break;
      n += (size_t)r;
      req[n] = 0;
      if (strstr(req, "\r\n\r\n")) break;
    }
    req[n] = 0;
    char path[256] = "", tok[128] = "-";
    sscanf(req, "GET %255s", path);
    const char *au = strstr(req, "Authorization: Bearer ");
    if (au) sscanf(au + 22, "%127s", tok);
    char head[512];
    if (!strcmp(path, "/missing")) {
      snprintf(head, sizeof(head), "HTTP/1.0 404 Not Found\r\n\r\nnone\n");
      (void)!write(c, head, strlen(head));
    } else if (!strcmp(path, "/big")) {
      snprintf(head, sizeof(head), "HTTP/1.0 200 OK\r\n\r\n");
      (void)!write(c, head, strlen(head));
      static char big[200000];
      memset(big, 'x', sizeof(big));
      (void)!write(c, big, sizeof(big));
    } else {
      snprintf(head, sizeof(head), "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nhello %s %s", path, tok);
      (void)!write(c, head, strlen(head));
    }
    close(c);
  }
}

static void query_checks(void) {
  rd__query it;
  char *k, *v;
  CHECK(rd__query_open(&it, "a=1&b=x%20y+z&c&&d=%2F%26&e=%zz&f=2") == 0);
  CHECK(rd__query_next(&it, &k, &v) == 1 && !strcmp(k, "a") && !strcmp(v, "1"));
  CHECK(rd__query_next(&it, &k, &v) == 1 && !strcmp(k, "b") && !strcmp(v, "x y z"));
  CHECK(rd__query_next(&it, &k, &v) == 1 && !strcmp(k, "c") && !strcmp(v, ""));   /* a bare key; && skipped */
  CHECK(rd__query_next(&it, &k, &v) == 1 && !strcmp(k, "d") && !strcmp(v, "/&"));
  CHECK(rd__query_next(&it, &k, &v) == -1);   /* %zz */
  CHECK(rd__query_next(&it, &k, &v) == 1 && !strcmp(k, "f") && !strcmp(v, "2"));   /* the caller may go on */
  CHECK(rd__query_next(&it, &k, &v) == 0);
  rd__query_close(&it);
  for (int i = 0; i < 2; i++) {   /* nothing, or NULL: no pair */
    CHECK(rd__query_open(&it, i ? NULL : "") == 0);
    CHECK(rd__query_next(&it, &k, &v) == 0);
    rd__query_close(&it);
  }
  CHECK(rd__query_open(&it, "x=%00") == 0 && rd__query_next(&it, &k, &v) == -1);   /* a NUL */
  rd__query_close(&it);
  char enc[64], dec[64];
  rd__url_encode(enc, sizeof(enc), "a b/&=~\xc3\xa9");
  CHECK(!strcmp(enc, "a%20b%2F%26%3D~%C3%A9"));
  snprintf(dec, sizeof(dec), "%s", enc);
  CHECK(rd__url_decode(dec) == 0 && !strcmp(dec, "a b/&=~\xc3\xa9"));
  rd__url_encode(enc, 8, "//////");   /* cut short, whole escapes only */
  CHECK(!strcmp(enc, "%2F%2F"));
}

int main(void) {
  query_checks();
  int good_port, hung_port, closed_port;
  int good = listener(&good_port);
  int hung = listener(&hung_port);   /* never accepts: connects, no answer */
  int closed = listener(&closed_port);
  close(closed);                     /* refused */
  pthread_t th;
  CHECK(pthread_create(&th, NULL, serve, &good) == 0);

  rd__http_fetch v[] = {
      {.ip = "127.0.0.1", .port = good_port, .path = "/a"},
      {.ip = "127.0.0.1", .port = hung_port, .path = "/a"},
      {.ip = "127.0.0.1", .port = good_port, .path = "/missing"},
      {.ip = "127.0.0.1", .port = closed_port, .path = "/a"},
      {.ip = "not-an-ip", .port = good_port, .path = "/a"},
      {.ip = "127.0.0.1", .port = good_port, .path = "/big"},
      {.ip = "127.0.0.1", .port = good_port, .path = "/b"},
  };
  size_t n = sizeof(v) / sizeof(v[0]);
  double t0 = now_ms();
  rd__http_get_all(v, n, "tok123", 600, 100000);
  double took = now_ms() - t0;
  for (size_t i = 0; i < n; i++) printf("%zu: rc %d, %s%s\n", i, v[i].rc, v[i].rc ? v[i].why : "body ", v[i].rc ? "" : v[i].body);
  CHECK(v[0].rc == 0 && !strcmp(v[0].body, "hello /a tok123") && v[0].len == strlen("hello /a tok123"));
  CHECK(v[1].rc == -1 && strstr(v[1].why, "no whole answer from 127.0.0.1:") && strstr(v[1].why, "within 600 ms"));
  CHECK(v[2].rc == -1 && strstr(v[2].why, "answered: HTTP/1.0 404 Not Found"));
  CHECK(v[3].rc == -1 && strstr(v[3].why, "cannot connect to 127.0.0.1:"));
  CHECK(v[4].rc == -1 && strstr(v[4].why, "not an IPv4 address: not-an-ip"));
  CHECK(v[5].rc == -1 && strstr(v[5].why, "answered more than 100000 bytes"));
  CHECK(v[6].rc == 0 && !strcmp(v[6].body, "hello /b tok123"));
  for (size_t i = 0; i < n; i++) CHECK(v[i].rc == 0 || v[i].body == NULL);
  printf("all at once: %.0f ms (the hung peer's 600)\n", took);
  CHECK(took >= 550 && took < 3000);   /* the hung one's time, once: not one after the other */
  free(v[0].body);
  free(v[6].body);

  /* the single GET, without a token */
  char *body, why[300];
  size_t len;
  CHECK(rd__http_get("127.0.0.1", good_port, "/one", NULL, 2000, 1 << 20, &body, &len, why, sizeof(why)) == 0);
  CHECK(!strcmp(body, "hello /one -") && len == strlen(body));
  free(body);
  CHECK(rd__http_get("127.0.0.1", good_port, "/big", NULL, 2000, 1 << 20, &body, &len, why, sizeof(why)) == 0);
  CHECK(len == 200000 && body[0] == 'x' && body[199999] == 'x');
  free(body);
  CHECK(rd__http_get("127.0.0.1", hung_port, "/x", NULL, 200, 1 << 20, &body, &len, why, sizeof(why)) == -1);
  CHECK(body == NULL && strstr(why, "within 200 ms"));
  rd__http_get_all(NULL, 0, NULL, 100, 10);   /* nothing to ask: returns */
  close(hung);
  printf("ok\n");
  return 0;
}
