/* examples/hello_tasks.c - the smallest libraydist driver: square numbers in
 * worker processes, chain a task on another task's result, put and get a
 * large object through the shared-memory store, take a streaming task's
 * items while it runs. */
#include <raydist.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

RD_REMOTE(square) {
  rd_buf in;
  if (rd_arg(call, 0, &in) != 0 || in.size != sizeof(long)) return rd_call_fail(call, "expected one long");
  long x;
  memcpy(&x, in.data, sizeof(x));
  x *= x;
  return rd_return_bytes(call, 0, &x, sizeof(x));
}

RD_REMOTE(sum_bytes) {
  rd_buf in;
  if (rd_arg(call, 0, &in) != 0) return rd_call_fail(call, "no argument");
  unsigned long s = 0;
  for (size_t i = 0; i < in.size; i++) s += ((const unsigned char *)in.data)[i];
  return rd_return_bytes(call, 0, &s, sizeof(s));
}

/* A streaming task: yields the squares of 0..n-1, one at a time. */
RD_REMOTE(squares_stream) {
  rd_buf in;
  if (rd_arg(call, 0, &in) != 0 || in.size != sizeof(long)) return rd_call_fail(call, "expected one long");
  long n;
  memcpy(&n, in.data, sizeof(n));
  for (long i = 0; i < n; i++) {
    long sq = i * i;
    int r = rd_yield(call, &sq, sizeof(sq));
    if (r != 0) return r;   /* RD_ECANCELED: the caller cancelled or left */
    usleep(20000);          /* some work per item: the caller takes each as it comes */
  }
  return 0;
}

int main(void) {
  int r = rd_init(NULL);
  if (r != 0) {
    fprintf(stderr, "rd_init: %s\n", rd_strerror(r));
    return 1;
  }
  enum { N = 10 };
  rd_ref refs[N];
  for (long i = 0; i < N; i++) {
    r = rd_submit(square, RD_ARGS(rd_arg_bytes(&i, sizeof(i))), NULL, &refs[i]);
    if (r != 0) { fprintf(stderr, "submit: %s\n", rd_strerror(r)); return 1; }
  }
  rd_buf out[N];
  r = rd_get(refs, N, out, RD_TIMEOUT_INF);
  if (r != 0) { fprintf(stderr, "get: %s\n", rd_strerror(r)); return 1; }
  printf("squares:");
  for (int i = 0; i < N; i++) {
    long v;
    memcpy(&v, out[i].data, sizeof(v));
    printf(" %ld", v);
    rd_buf_release(&out[i]);
  }
  printf("\n");
  /* a chain: square(square(3)) with the intermediate result passed by reference */
  long three = 3;
  rd_ref a, b;
  if (rd_submit(square, RD_ARGS(rd_arg_bytes(&three, sizeof(three))), NULL, &a) != 0 ||
      rd_submit(square, RD_ARGS(rd_arg_ref(a)), NULL, &b) != 0) return 1;
  rd_buf ob;
  if (rd_get(&b, 1, &ob, 10000) != 0) return 1;
  long v;
  memcpy(&v, ob.data, sizeof(v));
  printf("square(square(3)) = %ld\n", v);
  rd_buf_release(&ob);
  /* 64 MiB through the store, summed in a worker */
  size_t n = 64u << 20;
  unsigned char *big = malloc(n);
  for (size_t i = 0; i < n; i++) big[i] = (unsigned char)i;
  rd_ref big_ref, sum_ref;
  if (rd_put(big, n, &big_ref) != 0 || rd_submit(sum_bytes, RD_ARGS(rd_arg_ref(big_ref)), NULL, &sum_ref) != 0) return 1;
  rd_buf os;
  if (rd_get(&sum_ref, 1, &os, 60000) != 0) return 1;
  unsigned long s;
  memcpy(&s, os.data, sizeof(s));
  printf("sum of a 64 MiB object computed in a worker: %lu\n", s);
  rd_buf_release(&os);
  /* a streaming task: its items are taken while it still runs */
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.num_returns = RD_STREAMING;
  long five = 5, count = 0;
  rd_ref stream, item;
  if (rd_submit(squares_stream, RD_ARGS(rd_arg_bytes(&five, sizeof(five))), &o, &stream) != 0) return 1;
  printf("streamed:");
  while ((r = rd_stream_next(stream, &item, 10000)) == 0) {
    rd_buf oi;
    if (rd_get(&item, 1, &oi, 10000) != 0) return 1;
    memcpy(&v, oi.data, sizeof(v));
    printf(" %ld", v);
    rd_buf_release(&oi);
    rd_ref_release(item);
    count++;
  }
  printf(" (%ld items, %s)\n", count, rd_err_name(r));
  rd_ref_release(stream);
  if (r != RD_EEND) return 1;
  for (int i = 0; i < N; i++) rd_ref_release(refs[i]);
  rd_ref_release(a); rd_ref_release(b); rd_ref_release(big_ref); rd_ref_release(sum_ref);
  free(big);
  rd_shutdown();
  return 0;
}
