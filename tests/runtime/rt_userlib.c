/* A user's own shared library holding a remote function (rt_test links
 * it): a crash in it is named in the crash report from the library's
 * symbol table, static functions included (src/symbolize.c), as a frame
 * of the program is. */
#include <stdlib.h>

#include <raydist.h>

__attribute__((noinline)) static void userlib_deep(volatile int *x) {
  if (*x) abort();
}

RD_REMOTE(crash_in_userlib) {
  volatile int one = 1;
  userlib_deep(&one);
  return rd_return_bytes(call, 0, "", 0);
}
