/* tests/sched/test_autoscale.c - the autoscaler's policy: min_workers,
 * demand packed onto free and starting nodes before new ones, kinds tried
 * in order with their labels and max_workers, the launch budget and the
 * upscaling speed, demand no kind can run, which idle nodes are let go
 * (a kind's own idle timeout too), and STRICT_SPREAD groups kept apart. */
#include <string.h>

#include "../check.h"
#include "autoscale.h"
#include "raydist/error.h"

static rd_resources res(double cpu, double big) {
  rd_resources r;
  memset(&r, 0, sizeof(r));
  CHECK_EQ(rd_res_from_double(cpu, &r.cpu), 0);
  if (big > 0) {
    r.ncustom = 1;
    strcpy(r.custom[0].name, "big");
    CHECK_EQ(rd_res_from_double(big, &r.custom[0].amount), 0);
  }
  return r;
}

static rd_as_node live(int type, rd_resources avail, const char *labels, uint64_t idle_ms) {
  rd_as_node n = {.type = type, .avail = avail, .labels = labels, .idle_ms = idle_ms};
  return n;
}

int main(void) {
  rd_as_type types[2] = {
      {.name = "west", .res = res(1, 1), .labels = "raydist.io/node-type=west,zone=west", .max_workers = 2},
      {.name = "east", .res = res(4, 0), .labels = "raydist.io/node-type=east,zone=east", .min_workers = 1,
       .max_workers = 3}};
  rd_as_opts o = {.idle_timeout_ms = 5000, .max_launch = 5};
  rd_resources work[16];
  unsigned char drain[8];
  rd_as_plan p;

  /* nothing there: each kind comes up to min_workers */
  rd_as_plan_round(types, 2, NULL, 0, NULL, 0, NULL, 0, &o, work, drain, &p);
  CHECK_EQ(p.launch[0], 0);
  CHECK_EQ(p.launch[1], 1);
  CHECK_EQ(p.nlaunch, 1);

  /* four requests for big: the first kind that has it, up to its max */
  rd_as_demand d[3] = {{.shape = res(1, 1), .sel = NULL, .count = 4}};
  rd_as_node nodes[8];
  nodes[0] = live(1, res(4, 0), types[1].labels, 0);   /* east, busy */
  rd_as_plan_round(types, 2, nodes, 1, d, 1, NULL, 0, &o, work, drain, &p);
  CHECK_EQ(p.launch[0], 2);
  CHECK_EQ(p.launch[1], 0);
  CHECK_EQ(p.packed, 2);
  CHECK_EQ(p.capped, 2);
  CHECK_EQ(p.infeasible, 0);

  /* one west node starting: two of them go there (one fits), one more starts */
  nodes[1] = (rd_as_node){.type = 0, .starting = 1};
  d[0].count = 2;
  rd_as_plan_round(types, 2, nodes, 2, d, 1, NULL, 0, &o, work, drain, &p);
  CHECK_EQ(p.launch[0], 1);
  CHECK_EQ(p.packed, 2);

  /* a live node with room takes the demand: nothing starts */
  nodes[2] = live(-1, res(2, 1), "", 0);
  rd_as_plan_round(types, 2, nodes, 3, d, 1, NULL, 0, &o, work, drain, &p);
  CHECK_EQ(p.nlaunch, 0);
  CHECK_EQ(p.packed, 2);
  CHECK_EQ(drain[2], 0);

  /* selectors: zone=east skips west; a fallback counts too; no kind for big=5 */
  d[0] = (rd_as_demand){.shape = res(1, 0), .sel = "zone=east", .count = 5};
  d[1] = (rd_as_demand){.shape = res(1, 0), .sel = "zone=north;zone=west", .count = 1};
  d[2] = (rd_as_demand){.shape = res(1, 5), .sel = NULL, .count = 3};
  nodes[0] = live(1, res(0, 0), types[1].labels, 0);   /* east, full */
  rd_as_plan_round(types, 2, nodes, 1, d, 3, NULL, 0, &o, work, drain, &p);
  CHECK_EQ(p.launch[1], 2);   /* 4 CPUs each: 5 requests */
  CHECK_EQ(p.launch[0], 1);
  CHECK_EQ(p.packed, 6);
  CHECK_EQ(p.infeasible, 3);
  CHECK_EQ(p.infeasible_example, 2);

  /* the budget: ten requests, two launches a round */
  o.max_launch = 2;
  d[0] = (rd_as_demand){.shape = res(1, 1), .count = 10};
  rd_as_plan_round(types, 2, NULL, 0, d, 1, NULL, 0, &o, work, drain, &p);
  CHECK_EQ(p.nlaunch, 2);
  CHECK_EQ(p.launch[1], 1);   /* min_workers first */
  CHECK_EQ(p.launch[0], 1);
  CHECK_EQ(p.packed, 1);
  CHECK_EQ(p.capped, 9);
  o.max_launch = 5;

  /* letting go: idle long enough, above min_workers, not about to get work */
  nodes[0] = live(1, res(4, 0), types[1].labels, 6000);   /* east: its only one (min 1): kept */
  nodes[1] = live(0, res(1, 1), types[0].labels, 6000);   /* west, idle: goes */
  nodes[2] = live(0, res(1, 1), types[0].labels, 4000);   /* not long enough */
  nodes[3] = live(0, res(1, 1), types[0].labels, 0);      /* busy */
  nodes[4] = live(-1, res(8, 0), "", 60000);               /* not the autoscaler's */
  rd_as_plan_round(types, 2, nodes, 5, NULL, 0, NULL, 0, &o, work, drain, &p);
  CHECK(drain[0] == 0 && drain[1] == 1 && drain[2] == 0 && drain[3] == 0 && drain[4] == 0);
  nodes[5] = live(1, res(4, 0), types[1].labels, 9000);   /* a second east: one of the two goes */
  rd_as_plan_round(types, 2, nodes, 6, NULL, 0, NULL, 0, &o, work, drain, &p);
  CHECK_EQ(drain[0] + drain[5], 1);
  /* demand packed onto the idle west node keeps it */
  d[0] = (rd_as_demand){.shape = res(1, 1), .sel = "zone=west", .count = 1};
  nodes[2].idle_ms = 0;
  nodes[4] = live(-1, res(0, 0), "", 0);
  rd_as_plan_round(types, 2, nodes, 5, d, 1, NULL, 0, &o, work, drain, &p);
  CHECK_EQ(drain[1], 0);
  CHECK_EQ(p.packed, 1);
  CHECK_EQ(p.nlaunch, 0);
  /* one already leaving does not count, nor take work */
  nodes[1].draining = 1;
  nodes[2].avail = nodes[3].avail = res(0, 0);
  rd_as_plan_round(types, 2, nodes, 5, d, 1, NULL, 0, &o, work, drain, &p);
  CHECK_EQ(p.packed, 0);     /* nodes[2] and [3] are full, and with them west is at max_workers */
  CHECK_EQ(p.capped, 1);
  CHECK_EQ(drain[1], 0);
  types[0].max_workers = 3;   /* nodes[1] leaving does not count: a new one */
  rd_as_plan_round(types, 2, nodes, 5, d, 1, NULL, 0, &o, work, drain, &p);
  CHECK_EQ(p.launch[0], 1);

  /* requested room: onto the totals however busy, then new nodes, outside
   * the launch budget; what holds some of it stays */
  rd_resources req[4] = {res(4, 0), res(1, 1), res(1, 1), res(1, 1)};
  types[0].max_workers = 2;
  o.max_launch = 1;
  nodes[0] = live(1, res(0, 0), types[1].labels, 9000);    /* east, busy or not: holds the 4 CPUs */
  nodes[1] = live(1, res(4, 0), types[1].labels, 9000);    /* a second east, idle: goes */
  nodes[0].total = nodes[1].total = res(4, 0);
  rd_as_plan_round(types, 2, nodes, 2, NULL, 0, req, 4, &o, work, drain, &p);
  CHECK_EQ(p.launch[0], 2);   /* two west for three big=1: the third is unmet (max 2) */
  CHECK_EQ(p.req_unmet, 1);
  CHECK_EQ(p.launch[1], 0);
  CHECK(drain[0] == 0 && drain[1] == 1);
  /* with demand too: it gets what the request leaves, within the budget */
  d[0] = (rd_as_demand){.shape = res(1, 0), .count = 3};
  rd_as_plan_round(types, 2, nodes, 2, d, 1, req, 1, &o, work, drain, &p);
  CHECK_EQ(p.packed, 3);      /* the second east's 4 CPUs: kept */
  CHECK_EQ(p.nlaunch, 0);
  CHECK(drain[0] == 0 && drain[1] == 0);

  /* a kind's own idle timeout: west's idle nodes go after 1 s, east's
   * after the global 5 s */
  types[0].idle_timeout_ms = 1000;
  o.max_launch = 5;
  nodes[0] = live(0, res(1, 1), types[0].labels, 2000);
  nodes[1] = live(1, res(4, 0), types[1].labels, 2000);
  nodes[2] = live(1, res(4, 0), types[1].labels, 2000);
  rd_as_plan_round(types, 2, nodes, 3, NULL, 0, NULL, 0, &o, work, drain, &p);
  CHECK(drain[0] == 1 && drain[1] == 0 && drain[2] == 0);
  nodes[1].idle_ms = nodes[2].idle_ms = 6000;   /* past 5 s: one east goes, one stays for min_workers */
  rd_as_plan_round(types, 2, nodes, 3, NULL, 0, NULL, 0, &o, work, drain, &p);
  CHECK_EQ(drain[0] + drain[1] + drain[2], 2);
  types[0].idle_timeout_ms = 0;

  /* upscaling speed (Ray's): at most max(5, speed x the nodes there)
   * starting at once, within max_launch */
  rd_as_type w1[1] = {{.name = "w", .res = res(1, 0), .labels = "raydist.io/node-type=w", .max_workers = 100}};
  rd_as_opts up = {.idle_timeout_ms = 5000, .max_launch = 64, .upscaling_speed = 1.0};
  rd_as_demand lots = {.shape = res(1, 0), .count = 50};
  for (int i = 0; i < 8; i++) nodes[i] = live(-1, res(0, 0), "", 0);   /* busy nodes not its own */
  rd_as_plan_round(w1, 1, nodes, 2, &lots, 1, NULL, 0, &up, work, drain, &p);
  CHECK_EQ(p.nlaunch, 5);   /* 2 nodes there: the floor of 5 */
  nodes[2] = nodes[3] = nodes[4] = (rd_as_node){.type = 0, .starting = 1};
  rd_as_plan_round(w1, 1, nodes, 5, &lots, 1, NULL, 0, &up, work, drain, &p);
  CHECK_EQ(p.nlaunch, 2);   /* 3 starting already */
  up.upscaling_speed = 3.0;
  for (int i = 0; i < 8; i++) nodes[i] = live(-1, res(0, 0), "", 0);
  rd_as_plan_round(w1, 1, nodes, 8, &lots, 1, NULL, 0, &up, work, drain, &p);
  CHECK_EQ(p.nlaunch, 24);  /* 3 x 8 */
  up.upscaling_speed = 0;   /* no limit: max_launch */
  rd_as_plan_round(w1, 1, nodes, 8, &lots, 1, NULL, 0, &up, work, drain, &p);
  CHECK_EQ(p.nlaunch, 50);
  up.max_launch = 10;
  up.upscaling_speed = 3.0;
  rd_as_plan_round(w1, 1, nodes, 8, &lots, 1, NULL, 0, &up, work, drain, &p);
  CHECK_EQ(p.nlaunch, 10);  /* max_launch still bounds a round */

  /* a STRICT_SPREAD group's bundles go to distinct nodes: four one-CPU
   * bundles and nodes of 4 CPUs start four nodes in one round (as one
   * group without the spread: one node); an idle node there takes one of
   * them, not two; two groups may share nodes */
  rd_as_type w4[1] = {{.name = "w4", .res = res(4, 0), .labels = "raydist.io/node-type=w4", .max_workers = 10}};
  rd_as_opts fast = {.idle_timeout_ms = 5000, .max_launch = 10};
  rd_as_demand grp = {.shape = res(1, 0), .count = 4, .spread_group = 0x77};
  rd_as_plan_round(w4, 1, NULL, 0, &grp, 1, NULL, 0, &fast, work, drain, &p);
  CHECK_EQ(p.nlaunch, 4);
  CHECK_EQ(p.packed, 4);
  grp.spread_group = 0;
  rd_as_plan_round(w4, 1, NULL, 0, &grp, 1, NULL, 0, &fast, work, drain, &p);
  CHECK_EQ(p.nlaunch, 1);
  grp.spread_group = 0x77;
  nodes[0] = live(0, res(4, 0), w4[0].labels, 0);
  rd_as_plan_round(w4, 1, nodes, 1, &grp, 1, NULL, 0, &fast, work, drain, &p);
  CHECK_EQ(p.nlaunch, 3);
  rd_as_demand two[2] = {{.shape = res(1, 0), .count = 2, .spread_group = 1},
                         {.shape = res(2, 0), .count = 2, .spread_group = 2}};
  rd_as_plan_round(w4, 1, NULL, 0, two, 2, NULL, 0, &fast, work, drain, &p);
  CHECK_EQ(p.nlaunch, 2);   /* 1 + 2 CPUs on each of two nodes */
  CHECK_EQ(p.packed, 4);
  /* a group that lost a bundle (its node died): the nodes holding its
   * others are avoided though they have room, so a node starts for it;
   * a node of the kind without one of its bundles takes it instead */
  uint32_t holds[1] = {7};
  rd_as_demand lost = {.shape = res(1, 0), .count = 1, .spread_group = 0x77, .avoid = holds, .navoid = 1};
  nodes[0] = live(0, res(3, 0), w4[0].labels, 0);
  nodes[0].index = 7;
  rd_as_plan_round(w4, 1, nodes, 1, &lost, 1, NULL, 0, &fast, work, drain, &p);
  CHECK_EQ(p.nlaunch, 1);
  nodes[1] = live(0, res(4, 0), w4[0].labels, 0);
  nodes[1].index = 8;
  rd_as_plan_round(w4, 1, nodes, 2, &lost, 1, NULL, 0, &fast, work, drain, &p);
  CHECK_EQ(p.nlaunch, 0);
  CHECK_EQ(p.packed, 1);
  lost.navoid = 0;          /* (without the avoid list it would go on 7, and wait there for good) */
  rd_as_plan_round(w4, 1, nodes, 1, &lost, 1, NULL, 0, &fast, work, drain, &p);
  CHECK_EQ(p.nlaunch, 0);
  fast.max_launch = 2;      /* a group larger than a round's launches: what fits starts now */
  grp.count = 3;
  rd_as_plan_round(w4, 1, NULL, 0, &grp, 1, NULL, 0, &fast, work, drain, &p);
  CHECK_EQ(p.nlaunch, 2);
  CHECK_EQ(p.packed, 2);
  CHECK_EQ(p.capped, 1);
  printf("ok\n");
  return 0;
}
