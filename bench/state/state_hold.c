/* bench/state/state_hold.c - the load for bench/state/state_latency.sh: a
 * driver (RAYDIST_ADDRESS) that submits N tasks, each waiting for an
 * argument that is not ready (an open put), and an actor, writes its pid
 * to READY, and holds them until the file DONE appears; then seals the put
 * and waits for every task.
 *
 *   state_hold N READY DONE */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "raydist.h"

RD_REMOTE(arg_size) {
  rd_buf a;
  if (rd_arg(call, 0, &a) != 0) return rd_call_fail(call, "no argument");
  uint32_t v = (uint32_t)a.size;
  return rd_return_bytes(call, 0, &v, sizeof(v));
}

static int counter_init(rd_call *call, void **state) {
  (void)call;
  *state = NULL;
  return 0;
}
static void counter_fini(void *state) { (void)state; }
RD_ACTOR_CLASS(Counter, counter_init, counter_fini)

int main(int argc, char **argv) {
  if (argc != 4 || atoi(argv[1]) <= 0) {
    fprintf(stderr, "usage: state_hold N READY DONE\n");
    return 2;
  }
  int n = atoi(argv[1]);
  int rc = rd_init(NULL);
  if (rc != 0) {
    fprintf(stderr, "state_hold: rd_init: %s\n", rd_err_name(rc));
    return 1;
  }
  void *p;
  rd_ref arg, *r = malloc((size_t)n * sizeof(*r));
  rd_actor a;
  if (!r || rd_put_begin(16, &p, &arg) != 0 || rd_actor_create(Counter, RD_NO_ARGS, NULL, &a) != 0) {
    fprintf(stderr, "state_hold: cannot start\n");
    return 1;
  }
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.num_cpus = 0.01;
  for (int i = 0; i < n; i++)
    if ((rc = rd_submit(arg_size, RD_ARGS(rd_arg_ref(arg)), &o, &r[i])) != 0) {
      fprintf(stderr, "state_hold: rd_submit: %s\n", rd_err_name(rc));
      return 1;
    }
  FILE *f = fopen(argv[2], "w");
  if (f) {
    fprintf(f, "%d\n", (int)getpid());
    fclose(f);
  }
  while (access(argv[3], F_OK) != 0) usleep(50000);
  memset(p, 1, 16);
  if (rd_put_seal(arg) != 0 || rd_wait(r, (size_t)n, (size_t)n, 600000, NULL) != n) {
    fprintf(stderr, "state_hold: the tasks did not finish\n");
    return 1;
  }
  for (int i = 0; i < n; i++) rd_ref_release(r[i]);
  rd_ref_release(arg);
  free(r);
  rd_shutdown();
  return 0;
}
