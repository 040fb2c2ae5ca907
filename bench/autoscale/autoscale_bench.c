/* bench/autoscale/autoscale_bench.c - how fast the autoscaler grows a
 * cluster for waiting work, run by bench/autoscale/run.sh against a head
 * whose autoscaler starts nodes of type `job` (one CPU and job=1 each) on
 * this machine:
 *   - --tasks N (default 40) tasks of --ms M (250) ms that need job=1, which
 *     only autoscaled nodes have: when each autoscaled node joined, when
 *     the first and the last result came, and the best time the nodes could
 *     have given (N * M / nodes);
 *   - the same again at once, on the nodes now warm (before they go idle).
 * Usage: RAYDIST_ADDRESS=ip:port autoscale_bench [--tasks N] [--ms M] */
#include "../harness.h"

#include <stdint.h>
#include <unistd.h>

RD_REMOTE(nap_job) {
  uint32_t ms = 0;
  rd_buf a;
  if (rd_arg(call, 0, &a) == 0 && a.size == 4) memcpy(&ms, a.data, 4);
  usleep(ms * 1000u);
  rd_node_info ni;
  if (rd_node_info_get(&ni) != 0) return rd_call_fail(call, "rd_node_info_get failed");
  uint32_t idx = ni.node_index;
  return rd_return_bytes(call, 0, &idx, sizeof(idx));
}

/* Live nodes the autoscaler started (type job). */
static int job_nodes(void) {
  rd_node_desc d[64];
  size_t n = 0;
  if (rd_nodes(d, 64, &n) != 0) return -1;
  int k = 0;
  for (size_t i = 0; i < n; i++) k += d[i].alive && strstr(d[i].labels, "raydist.io/node-type=job") != NULL;
  return k;
}

static void run(const char *what, int ntasks, uint32_t ms) {
  rd_ref *refs = calloc((size_t)ntasks, sizeof(*refs));
  int *done = calloc((size_t)ntasks, sizeof(int));
  if (!refs || !done) DIE("out of memory");
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.resources = "job=1";
  int nodes0 = job_nodes(), nodes = nodes0, maxnodes = nodes0;
  double t0 = now(), first = -1, joined[64];
  for (int i = 0; i < ntasks; i++) OK(rd_submit(nap_job, RD_ARGS(rd_arg_bytes(&ms, 4)), &o, &refs[i]));
  uint32_t used[64];
  int nused = 0, left = ntasks, per[64] = {0};
  while (left > 0) {
    for (int i = 0; i < ntasks; i++) {
      if (done[i]) continue;
      rd_buf b;
      int e = rd_get(&refs[i], 1, &b, 0);
      if (e == RD_ETIMEDOUT) continue;
      if (e) DIE("task %d: %s", i, rd_err_name(e));
      uint32_t v;
      memcpy(&v, b.data, 4);
      rd_buf_release(&b);
      rd_ref_release(refs[i]);
      done[i] = 1;
      left--;
      if (first < 0) first = now() - t0;
      int k = 0;
      while (k < nused && used[k] != v) k++;
      if (k == nused && nused < 64) used[nused++] = v;
      if (k < 64) per[k]++;
    }
    int n = job_nodes();
    while (n > nodes && nodes < 64) joined[nodes++] = now() - t0;
    if (n > maxnodes) maxnodes = n;
    usleep(20000);
  }
  double total = now() - t0;
  printf("%s: %d tasks of %u ms needing job=1\n", what, ntasks, ms);
  if (nodes0) printf("  %d job nodes there already\n", nodes0);
  for (int i = nodes0; i < nodes; i++) printf("  job node %d joined after %.2f s\n", i + 1, joined[i]);
  printf("  first result after %.2f s, all after %.2f s, on %d node(s) (at most %d at once)\n", first, total, nused,
         maxnodes);
  printf("  tasks per node:");
  for (int k = 0; k < nused; k++) printf(" %d on node %u%s", per[k], used[k], k + 1 < nused ? "," : "\n");
  if (maxnodes > 0)
    printf("  best with %d nodes there from the start: %.2f s (%.0f%% of the time)\n", maxnodes,
           ntasks * ms / 1000.0 / maxnodes, 100.0 * ntasks * ms / 1000.0 / maxnodes / total);
  free(refs);
  free(done);
}

int main(int argc, char **argv) {
  int ntasks = 40;
  uint32_t ms = 250;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--tasks") && i + 1 < argc) ntasks = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--ms") && i + 1 < argc) ms = (uint32_t)atoi(argv[++i]);
  }
  if (ntasks < 1 || ntasks > 100000) DIE("--tasks 1..100000");
  OK(rd_init(NULL));
  run("cold (the autoscaler starts the nodes)", ntasks, ms);
  run("warm (the same nodes, still there)", ntasks, ms);
  rd_shutdown();
  return 0;
}
