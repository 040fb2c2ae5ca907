/* bench/cluster/actor_hops.c - actor calls by how many links they cross,
 * run by bench/cluster/actor_hops.sh from a driver on node c of a
 * three-node cluster (head a, node b with only_b, node c with only_c):
 *   - "here": an actor on c, recorded on c: no link;
 *   - "on b": an actor recorded on c and hosted on b: one link;
 *   - "on b, recorded on the head": a detached actor (the head keeps its
 *     record) hosted on b: the caller's node is neither its record node
 *     nor its host.
 * For each, round trips per second (one call at a time) and calls per
 * second with 1000 in flight.  Not a test: figures to compare side by side.
 * Usage: RAYDIST_ADDRESS=... RAYDIST_NODE_IP=127.0.0.3 actor_hops
 *        [--duration S] [--trials N] [--filter SUBSTR] [--json FILE] */
#define HARNESS_BENCH_ACTOR   /* the Bench actor class and actor_batch */
#include "../harness.h"

static rd_actor g_actor;

static double t_sync(void) { return actor_round_trips(g_actor, Bench_noop); }

static double t_async(void) { return actor_async(&g_actor, 1); }

static rd_actor make(const char *res, int detached) {
  rd_actor_opts o;
  rd_actor_opts_init(&o);
  o.resources = res;
  o.detached = detached;
  rd_actor a;
  OK(rd_actor_create(Bench, RD_NO_ARGS, &o, &a));
  rd_ref r;
  OK(rd_actor_call(a, Bench_noop, RD_NO_ARGS, NULL, &r));   /* started */
  get_and_drop(r);
  return a;
}

int main(int argc, char **argv) {
  harness_args(argc, argv);
  OK(rd_init(NULL));
  struct {
    const char *name, *res;
    int detached;
  } cases[] = {
      {"here", "only_c=0.1", 0},
      {"on b", "only_b=0.1", 0},
      {"on b, recorded on the head", "only_b=0.1", 1},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char name[160];
    g_actor = make(cases[i].res, cases[i].detached);
    printf("actor %016llx (%s): recorded on node %llu\n", (unsigned long long)g_actor.id, cases[i].name,
           (unsigned long long)(g_actor.id >> 40));
    snprintf(name, sizeof(name), "actor round trips, %s", cases[i].name);
    report(name, "", t_sync);
    snprintf(name, sizeof(name), "actor calls 1000 in flight, %s", cases[i].name);
    report(name, "", t_async);
    OK(rd_actor_kill(g_actor, 1));
  }
  harness_done();
  rd_shutdown();
  return 0;
}
