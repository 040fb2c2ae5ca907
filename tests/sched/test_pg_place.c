/* tests/sched/test_pg_place.c - where placement-group bundles go: every
 * strategy on a three-node snapshot, bundles that wait (RD_EAGAIN) versus
 * bundles that never fit (RD_EINFEASIBLE), and re-placing the bundles of a
 * node that died while the others keep theirs; groups of the largest size
 * on thousands of nodes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "labels.h"
#include "pg_place.h"
#include "raydist/error.h"

static rd_pg_node mk(uint32_t index, int cpus, int free_cpus) {
  rd_pg_node n;
  memset(&n, 0, sizeof n);
  n.index = index;
  n.total.cpu = cpus * RD_RES_UNIT;
  n.total.memory = 1 << 30;
  n.avail = n.total;
  n.avail.cpu = free_cpus * RD_RES_UNIT;
  return n;
}

static rd_resources cpus(int n) {
  rd_resources r;
  memset(&r, 0, sizeof r);
  r.cpu = n * RD_RES_UNIT;
  return r;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Thousands of nodes and RD_PG_PLACE_MAX_BUNDLES bundles (the snapshot was
 * 256 nodes and a group 64 bundles): every strategy places them as it
 * should, and a group one node short of STRICT_SPREAD never fits. */
static void large(void) {
  const size_t nn = 4095, nb = RD_PG_PLACE_MAX_BUNDLES;
  rd_pg_node *nodes = calloc(nn, sizeof(*nodes));
  rd_resources *b = calloc(nb + 1, sizeof(*b));
  uint32_t *a = calloc(nb + 1, sizeof(*a));
  int *per = calloc(nn + 1, sizeof(*per));
  CHECK(nodes && b && a && per);
  for (size_t i = 0; i < nn; i++) nodes[i] = mk((uint32_t)(i + 1), 8, 8);
  for (size_t i = 0; i <= nb; i++) b[i] = cpus(1);
  char why[300];
  double t0 = now_s();
  /* PACK: 8 to a node, the first 512 nodes */
  CHECK(rd_pg_place(nodes, nn, b, nb, RD_PG_PLACE_PACK, a, why, sizeof why) == 0);
  for (size_t i = 0; i < nb; i++) per[a[i]]++;
  for (size_t s = 1; s <= nn; s++) CHECK(per[s] == (s <= nb / 8 ? 8 : 0));
  double t_pack = now_s() - t0;
  /* SPREAD: one on each node, then a second on the first ones */
  memset(a, 0, (nb + 1) * sizeof(*a));
  memset(per, 0, (nn + 1) * sizeof(*per));
  t0 = now_s();
  CHECK(rd_pg_place(nodes, nn, b, nb, RD_PG_PLACE_SPREAD, a, why, sizeof why) == 0);
  for (size_t i = 0; i < nb; i++) per[a[i]]++;
  for (size_t s = 1; s <= nn; s++) CHECK(per[s] == (s <= nb - nn ? 2 : 1));
  double t_spread = now_s() - t0;
  /* STRICT_SPREAD: 4,095 bundles on 4,095 nodes; one more never */
  memset(a, 0, (nb + 1) * sizeof(*a));
  memset(per, 0, (nn + 1) * sizeof(*per));
  t0 = now_s();
  CHECK(rd_pg_place(nodes, nn, b, nn, RD_PG_PLACE_STRICT_SPREAD, a, why, sizeof why) == 0);
  for (size_t i = 0; i < nn; i++) CHECK(a[i] && per[a[i]]++ == 0);
  double t_strict = now_s() - t0;
  memset(a, 0, (nb + 1) * sizeof(*a));
  CHECK(rd_pg_place(nodes, nn, b, nb, RD_PG_PLACE_STRICT_SPREAD, a, why, sizeof why) == RD_EINFEASIBLE);
  CHECK(strstr(why, "4096 nodes") != NULL);
  /* too many bundles: refused */
  CHECK(rd_pg_place(nodes, nn, b, nb + 1, RD_PG_PLACE_PACK, a, why, sizeof why) == RD_EINVAL);
  fprintf(stderr, "%zu bundles on %zu nodes: PACK %.3f s, SPREAD %.3f s, STRICT_SPREAD (%zu) %.3f s\n", nb, nn,
          t_pack, t_spread, nn, t_strict);
  free(nodes);
  free(b);
  free(a);
  free(per);
}

int main(void) {
  large();
  rd_pg_node nodes[3] = {mk(1, 4, 4), mk(2, 4, 4), mk(3, 4, 4)};
  rd_resources b[4] = {cpus(1), cpus(1), cpus(1), cpus(1)};
  uint32_t a[4];
  char why[200];

  /* PACK: all four on the first node */
  memset(a, 0, sizeof a);
  CHECK(rd_pg_place(nodes, 3, b, 4, RD_PG_PLACE_PACK, a, why, sizeof why) == 0);
  CHECK(a[0] == 1 && a[1] == 1 && a[2] == 1 && a[3] == 1);
  /* STRICT_PACK with 5 CPUs in all: no node has 5 */
  rd_resources b5[5] = {cpus(1), cpus(1), cpus(1), cpus(1), cpus(1)};
  uint32_t a5[5] = {0};
  CHECK(rd_pg_place(nodes, 3, b5, 5, RD_PG_PLACE_STRICT_PACK, a5, why, sizeof why) == RD_EINFEASIBLE);
  CHECK(strstr(why, "STRICT_PACK") != NULL);
  /* PACK bends: 4 on node 1, 1 on node 2 */
  CHECK(rd_pg_place(nodes, 3, b5, 5, RD_PG_PLACE_PACK, a5, why, sizeof why) == 0);
  CHECK(a5[0] == 1 && a5[3] == 1 && a5[4] == 2);
  /* SPREAD: round the nodes, then again */
  memset(a, 0, sizeof a);
  CHECK(rd_pg_place(nodes, 3, b, 4, RD_PG_PLACE_SPREAD, a, why, sizeof why) == 0);
  CHECK(a[0] == 1 && a[1] == 2 && a[2] == 3 && a[3] == 1);
  /* STRICT_SPREAD: three bundles on three nodes; a fourth can never fit */
  memset(a, 0, sizeof a);
  CHECK(rd_pg_place(nodes, 3, b, 3, RD_PG_PLACE_STRICT_SPREAD, a, why, sizeof why) == 0);
  CHECK(a[0] == 1 && a[1] == 2 && a[2] == 3);
  memset(a, 0, sizeof a);
  CHECK(rd_pg_place(nodes, 3, b, 4, RD_PG_PLACE_STRICT_SPREAD, a, why, sizeof why) == RD_EINFEASIBLE);
  CHECK(a[0] == 0 && strstr(why, "STRICT_SPREAD") != NULL);

  /* busy nodes: fits when empty, not now */
  rd_pg_node busy[2] = {mk(1, 4, 1), mk(2, 4, 0)};
  memset(a, 0, sizeof a);
  CHECK(rd_pg_place(busy, 2, b, 2, RD_PG_PLACE_STRICT_SPREAD, a, why, sizeof why) == RD_EAGAIN);
  CHECK(a[0] == 0 && a[1] == 0);
  CHECK(rd_pg_place(busy, 2, b, 1, RD_PG_PLACE_PACK, a, why, sizeof why) == 0 && a[0] == 1);
  /* a bundle larger than any node */
  rd_resources huge = cpus(8);
  memset(a, 0, sizeof a);
  CHECK(rd_pg_place(nodes, 3, &huge, 1, RD_PG_PLACE_PACK, a, why, sizeof why) == RD_EINFEASIBLE);
  CHECK(strstr(why, "bundle 0") != NULL);
  /* a custom resource only node 3 has */
  rd_pg_node cn[3] = {mk(1, 4, 4), mk(2, 4, 4), mk(3, 4, 4)};
  CHECK(rd_res_set_custom(&cn[2].total, "disk", 2 * RD_RES_UNIT) == 0);
  cn[2].avail = cn[2].total;
  rd_resources d = cpus(1);
  CHECK(rd_res_set_custom(&d, "disk", RD_RES_UNIT) == 0);
  rd_resources db[2] = {d, d};
  memset(a, 0, sizeof a);
  CHECK(rd_pg_place(cn, 3, db, 2, RD_PG_PLACE_SPREAD, a, why, sizeof why) == 0 && a[0] == 3 && a[1] == 3);
  CHECK(rd_pg_place(cn, 3, db, 2, RD_PG_PLACE_STRICT_SPREAD, (memset(a, 0, sizeof a), a), why, sizeof why) ==
        RD_EINFEASIBLE);

  /* rescheduling: node 2 died; bundle 1 was there, bundles 0 and 2 stay */
  rd_pg_node alive[2] = {mk(1, 4, 3), mk(3, 4, 3)};
  uint32_t r[3] = {1, 0, 3};
  CHECK(rd_pg_place(alive, 2, b, 3, RD_PG_PLACE_STRICT_SPREAD, r, why, sizeof why) == RD_EINFEASIBLE);
  CHECK(rd_pg_place(alive, 2, b, 3, RD_PG_PLACE_SPREAD, r, why, sizeof why) == 0);
  CHECK(r[0] == 1 && r[2] == 3 && (r[1] == 1 || r[1] == 3));
  uint32_t p[2] = {3, 0};   /* STRICT_PACK keeps to the surviving bundle's node */
  CHECK(rd_pg_place(alive, 2, b, 2, RD_PG_PLACE_STRICT_PACK, p, why, sizeof why) == 0 && p[1] == 3);

  /* label selectors: node 1 unlabelled, 2 zone=a, 3 zone=b */
  rd_pg_node ln[3] = {mk(1, 4, 4), mk(2, 4, 4), mk(3, 4, 4)};
  ln[1].labels = "zone=a";
  ln[2].labels = "tier=gold,zone=b";
  const char *s2[2] = {"zone=a", "zone=a"};
  memset(a, 0, sizeof a);   /* PACK: together on the one that matches both, not the first node */
  CHECK(rd_pg_place_sel(ln, 3, b, s2, 2, RD_PG_PLACE_PACK, a, why, sizeof why) == 0 && a[0] == 2 && a[1] == 2);
  const char *sab[3] = {"zone=a", "zone=b", NULL};
  memset(a, 0, sizeof a);   /* PACK bends to the selectors; the free bundle joins a used node */
  CHECK(rd_pg_place_sel(ln, 3, b, sab, 3, RD_PG_PLACE_PACK, a, why, sizeof why) == 0);
  CHECK(a[0] == 2 && a[1] == 3 && (a[2] == 2 || a[2] == 3));
  memset(a, 0, sizeof a);
  CHECK(rd_pg_place_sel(ln, 3, b, sab, 2, RD_PG_PLACE_STRICT_PACK, a, why, sizeof why) == RD_EINFEASIBLE);
  CHECK(strstr(why, "label selectors") != NULL);
  const char *spread[3] = {"zone=!b", "zone=!b", "tier=!gold"};
  memset(a, 0, sizeof a);   /* three bundles, two nodes they may use */
  CHECK(rd_pg_place_sel(ln, 3, b, spread, 3, RD_PG_PLACE_STRICT_SPREAD, a, why, sizeof why) == RD_EINFEASIBLE);
  spread[2] = "tier=gold";
  memset(a, 0, sizeof a);   /* each bundle on its own node, within what its selector allows */
  CHECK(rd_pg_place_sel(ln, 3, b, spread, 3, RD_PG_PLACE_STRICT_SPREAD, a, why, sizeof why) == 0);
  CHECK(a[0] != 3 && a[1] != 3 && a[2] == 3 && a[0] != a[1]);
  /* the most constrained first: bundle 1 may only use node 1, so bundle 0
   * (node 1 or 2, node 1 first in order) must leave it */
  const char *tight[2] = {"zone=!b", "zone=!in(a,b)"};
  memset(a, 0, sizeof a);
  CHECK(rd_pg_place_sel(ln, 3, b, tight, 2, RD_PG_PLACE_STRICT_SPREAD, a, why, sizeof why) == 0);
  CHECK(a[0] == 2 && a[1] == 1);
  const char *none[1] = {"zone=c"};
  memset(a, 0, sizeof a);
  CHECK(rd_pg_place_sel(ln, 3, b, none, 1, RD_PG_PLACE_SPREAD, a, why, sizeof why) == RD_EINFEASIBLE);
  printf("%s\n", why);
  CHECK(strstr(why, "bundle 0: its label selector 'zone=c' matches no live node") != NULL);
  rd_pg_node busy2[3] = {mk(1, 4, 4), mk(2, 4, 0), mk(3, 4, 4)};
  busy2[1].labels = "zone=a";
  memset(a, 0, sizeof a);   /* the matching node is full: wait, do not go elsewhere */
  CHECK(rd_pg_place_sel(busy2, 3, b, s2, 1, RD_PG_PLACE_PACK, a, why, sizeof why) == RD_EAGAIN);

  /* fallbacks (Ray's fallback_strategy): the group is placed by the first
   * alternative that fits now, each bundle its k-th selector or its last */
  int alt = -1;
  const char *fb[2] = {"zone=a;zone=b", NULL};
  busy2[2].labels = "tier=gold,zone=b";
  memset(a, 0, sizeof a);   /* zone=a is full now: zone=b, alternative 1 */
  CHECK(rd_pg_place_alt(busy2, 3, b, fb, 1, RD_PG_PLACE_PACK, a, &alt, why, sizeof why) == 0 && a[0] == 3 && alt == 1);
  memset(a, 0, sizeof a);   /* the primary while it has room */
  alt = 0;
  CHECK(rd_pg_place_alt(ln, 3, b, fb, 1, RD_PG_PLACE_PACK, a, &alt, why, sizeof why) == 0 && a[0] == 2 && alt == 0);
  memset(a, 0, sizeof a);   /* the whole group moves: the free bundle follows to zone=b */
  alt = 0;
  CHECK(rd_pg_place_alt(busy2, 3, b, fb, 2, RD_PG_PLACE_STRICT_PACK, a, &alt, why, sizeof why) == 0);
  CHECK(a[0] == 3 && a[1] == 3 && alt == 1);
  const char *fb_last[2] = {"zone=a;zone=b", "zone=a"};
  memset(a, 0, sizeof a);   /* bundle 1 keeps its only selector in alternative 1: zone=a is full, so wait */
  CHECK(rd_pg_place_sel(busy2, 3, b, fb_last, 2, RD_PG_PLACE_STRICT_SPREAD, a, why, sizeof why) == RD_EAGAIN);
  CHECK(a[0] == 0 && a[1] == 0);
  const char *fb_never[1] = {"zone=c;zone=d"};
  memset(a, 0, sizeof a);   /* infeasible only when no alternative ever fits */
  CHECK(rd_pg_place_sel(ln, 3, b, fb_never, 1, RD_PG_PLACE_PACK, a, why, sizeof why) == RD_EINFEASIBLE);
  CHECK(strstr(why, "'zone=c;zone=d' matches no live node") != NULL);
  const char *fb_later[1] = {"zone=c;zone=a"};
  memset(a, 0, sizeof a);   /* only the fallback could ever fit, and it is full: wait */
  CHECK(rd_pg_place_sel(busy2, 3, b, fb_later, 1, RD_PG_PLACE_PACK, a, why, sizeof why) == RD_EAGAIN);
  uint32_t kept[2] = {2, 0};   /* a bundle already reserved keeps its node; the other uses what fits now */
  CHECK(rd_pg_place_sel(ln, 3, b, fb, 2, RD_PG_PLACE_SPREAD, kept, why, sizeof why) == 0 && kept[0] == 2 && kept[1] != 0);
  /* a group re-reserved around a bundle it holds on zone=b (alternative 1)
   * stays with zone=b when told so; from the first it would mix */
  const char *both[2] = {"zone=a;zone=b", "zone=a;zone=b"};
  uint32_t again[2] = {3, 0};
  alt = 1;
  CHECK(rd_pg_place_alt(ln, 3, b, both, 2, RD_PG_PLACE_SPREAD, again, &alt, why, sizeof why) == 0);
  CHECK(again[0] == 3 && again[1] == 3 && alt == 1);
  again[1] = 0;
  alt = 0;
  CHECK(rd_pg_place_alt(ln, 3, b, both, 2, RD_PG_PLACE_SPREAD, again, &alt, why, sizeof why) == 0);
  CHECK(again[0] == 3 && again[1] == 2 && alt == 0);
  again[1] = 0;
  alt = 1;   /* zone=b full now: the other alternative rather than waiting */
  rd_pg_node bfull[3] = {mk(1, 4, 4), mk(2, 4, 4), mk(3, 4, 0)};
  bfull[1].labels = "zone=a";
  bfull[2].labels = "tier=gold,zone=b";
  CHECK(rd_pg_place_alt(bfull, 3, b, both, 2, RD_PG_PLACE_SPREAD, again, &alt, why, sizeof why) == 0);
  CHECK(again[1] == 2 && alt == 0);
  CHECK(rd_label_alts_count(NULL) == 1 && rd_label_alts_count("a=1") == 1 && rd_label_alts_count("a=1;b=2;c=3") == 3);
  CHECK(rd_labels_match_nth("zone=b", "zone=a;zone=b", 1) && !rd_labels_match_nth("zone=b", "zone=a;zone=b", 0));
  CHECK(rd_labels_match_nth("zone=b", "zone=a;zone=b", 5) && rd_labels_match_nth("zone=b", NULL, 3));

  /* bad arguments */
  CHECK(rd_pg_place(nodes, 3, b, 0, RD_PG_PLACE_PACK, a, why, sizeof why) == RD_EINVAL);
  CHECK(rd_pg_place(nodes, 3, b, 1, 7, a, why, sizeof why) == RD_EINVAL);
  printf("test_pg_place: ok\n");
  return 0;
}
