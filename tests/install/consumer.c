/* tests/install/consumer.c - a user program built against an installed libraydist. */
#include <raydist.h>
#include <stdio.h>
#include <string.h>

RD_REMOTE(twice) {
  rd_buf in;
  if (rd_arg(call, 0, &in) != 0) return rd_call_fail(call, "no argument");
  int v;
  memcpy(&v, in.data, sizeof(v));
  v *= 2;
  return rd_return_bytes(call, 0, &v, sizeof(v));
}

int main(void) {
  if (rd_init(NULL) != 0) return 1;
  int v = 21;
  rd_ref r;
  rd_buf b;
  if (rd_submit(twice, RD_ARGS(rd_arg_bytes(&v, sizeof(v))), NULL, &r) != 0 || rd_get(&r, 1, &b, 30000) != 0) return 1;
  memcpy(&v, b.data, sizeof(v));
  rd_buf_release(&b);
  rd_ref_release(r);
  rd_shutdown();
  printf("consumer: %d\n", v);
  return v == 42 ? 0 : 1;
}
