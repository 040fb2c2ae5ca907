/* scheduler/pg_place.c - placement-group bundle placement (see pg_place.h).
 * Greedy and in node order, so the same snapshot always gives the same
 * answer; strict strategies fail rather than bend. */
#include "pg_place.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "labels.h"
#include "raydist/error.h"

typedef struct place_ctx {
  const rd_pg_node *nodes;
  size_t nn;
  const char *const *sels;   /* per bundle, or NULL; each may hold alternatives */
  int alt;                   /* the alternative of each tried (its last when it has fewer); -1: any */
  rd_resources *room;        /* per node */
  int *count;                /* the group's bundles per node */
  size_t *order, *nallowed;  /* per bundle: the order they are placed in */
  uint32_t *out;             /* per bundle: a proposal being made */
  size_t cap_nodes, cap_bundles;
} place_ctx;

/* Room in x for nn nodes and nb bundles: 0, or RD_ENOMEM (x unchanged). */
static int ctx_reserve(place_ctx *x, size_t nn, size_t nb) {
  if (nn > x->cap_nodes) {
    size_t c = nn < 64 ? 64 : nn;
    rd_resources *room = malloc(c * sizeof(*room));
    int *count = malloc(c * sizeof(*count));
    if (!room || !count) {
      free(room);
      free(count);
      return RD_ENOMEM;
    }
    free(x->room);
    free(x->count);
    x->room = room;
    x->count = count;
    x->cap_nodes = c;
  }
  if (nb > x->cap_bundles) {
    size_t c = nb < 64 ? 64 : nb;
    size_t *order = malloc(c * sizeof(*order)), *nallowed = malloc(c * sizeof(*nallowed));
    uint32_t *out = malloc(c * sizeof(*out));
    if (!order || !nallowed || !out) {
      free(order);
      free(nallowed);
      free(out);
      return RD_ENOMEM;
    }
    free(x->order);
    free(x->nallowed);
    free(x->out);
    x->order = order;
    x->nallowed = nallowed;
    x->out = out;
    x->cap_bundles = c;
  }
  return 0;
}

static int node_slot(const place_ctx *x, uint32_t index) {
  for (size_t i = 0; i < x->nn; i++)
    if (x->nodes[i].index == index) return (int)i;
  return -1;
}

/* May bundle i go to node slot s (its label selector)? */
static int allowed(const place_ctx *x, size_t s, size_t i) {
  if (!x->sels) return 1;
  return x->alt < 0 ? rd_labels_match(x->nodes[s].labels, x->sels[i])
                    : rd_labels_match_nth(x->nodes[s].labels, x->sels[i], x->alt);
}

/* One attempt against rooms (totals or avail).  0 or -1. */
static int try_place(place_ctx *x, const rd_resources *b, size_t nb, int strategy, uint32_t *out) {
  int fixed = -1;   /* the node of an already placed bundle, for STRICT_PACK / PACK */
  for (size_t i = 0; i < nb; i++) {
    if (!out[i]) continue;
    int s = node_slot(x, out[i]);
    if (s >= 0) {
      x->count[s]++;
      if (fixed < 0) fixed = s;
    }
  }
  if (strategy == RD_PG_PLACE_STRICT_PACK || strategy == RD_PG_PLACE_PACK) {
    rd_resources sum;
    memset(&sum, 0, sizeof(sum));
    for (size_t i = 0; i < nb; i++)
      if (!out[i] && rd_res_add(&sum, &b[i]) != 0) return -1;
    for (size_t s = 0; s < x->nn; s++) {
      if (fixed >= 0 && (int)s != fixed) continue;
      if (!rd_res_fits(&x->room[s], &sum)) continue;
      int all = 1;
      for (size_t i = 0; i < nb && all; i++) all = out[i] || allowed(x, s, i);
      if (!all) continue;
      for (size_t i = 0; i < nb; i++)
        if (!out[i]) out[i] = x->nodes[s].index;
      return 0;
    }
    if (strategy == RD_PG_PLACE_STRICT_PACK) return -1;
  }
  /* one by one, the bundles allowed on fewest nodes (label selectors) first,
   * else in order: a bundle free to go anywhere does not take the only node
   * another may use */
  size_t *order = x->order, *nallowed = x->nallowed;
  for (size_t k = 0; k < nb; k++) {
    nallowed[k] = x->nn;   /* no selector: every node, without asking each */
    if (x->sels && x->sels[k] && x->sels[k][0]) {
      nallowed[k] = 0;
      for (size_t s = 0; s < x->nn; s++) nallowed[k] += (size_t)allowed(x, s, k);
    }
    size_t j = k;
    for (; j > 0 && nallowed[order[j - 1]] > nallowed[k]; j--) order[j] = order[j - 1];
    order[j] = k;
  }
  for (size_t k = 0; k < nb; k++) {
    size_t i = order[k];
    if (out[i]) continue;
    int best = -1;
    for (size_t s = 0; s < x->nn; s++) {
      if (strategy == RD_PG_PLACE_STRICT_SPREAD && x->count[s] > 0) continue;
      if (!rd_res_fits(&x->room[s], &b[i]) || !allowed(x, s, i)) continue;
      if (best < 0) best = (int)s;
      /* PACK: nodes already used first; SPREAD: the fewest bundles */
      else if (strategy == RD_PG_PLACE_PACK && x->count[best] == 0 && x->count[s] > 0) best = (int)s;
      else if (strategy == RD_PG_PLACE_SPREAD && x->count[s] < x->count[best]) best = (int)s;
      /* nothing later can replace it: the first used node (PACK), one
       * without any (SPREAD), the first free one (STRICT_SPREAD) */
      if (strategy == RD_PG_PLACE_STRICT_SPREAD || (strategy == RD_PG_PLACE_PACK) == (x->count[best] > 0)) break;
    }
    if (best < 0) return -1;
    rd_res_take(&x->room[best], &b[i]);
    x->count[best]++;
    out[i] = x->nodes[best].index;
  }
  return 0;
}

/* try_place with the group's alternatives in order, against node totals
 * (avail 0) or what is free: the first that places, or -1. */
static int try_alts(place_ctx *x, const rd_pg_node *nodes, size_t nn, const rd_resources *b, size_t nb,
                    const char *const *sels, int strategy, int avail, uint32_t *out, const uint32_t *assign,
                    int first) {
  int nalts = 1;
  for (size_t i = 0; sels && i < nb; i++) {
    int k = rd_label_alts_count(sels[i]);
    if (k > nalts) nalts = k;
  }
  if (first < 0 || first >= nalts) first = 0;
  for (int k = 0; k < nalts; k++) {
    int alt = k == 0 ? first : k <= first ? k - 1 : k;   /* first, then the others in order */
    x->nodes = nodes;
    x->nn = nn;
    x->sels = sels;
    x->alt = alt;
    memset(x->count, 0, nn * sizeof(*x->count));
    for (size_t s = 0; s < nn; s++) x->room[s] = avail ? nodes[s].avail : nodes[s].total;
    if (!avail)   /* never: against empty nodes (bundles already placed keep their share) */
      for (size_t i = 0; i < nb; i++) {
        int s = assign[i] ? node_slot(x, assign[i]) : -1;
        if (s >= 0) rd_res_take(&x->room[s], &b[i]);
      }
    memcpy(out, assign, nb * sizeof(*out));
    if (try_place(x, b, nb, strategy, out) == 0) return alt;
  }
  x->alt = -1;   /* for the reasons: whether any alternative matches */
  return -1;
}

int rd_pg_place(const rd_pg_node *nodes, size_t nn, const rd_resources *b, size_t nb, int strategy,
                uint32_t *assign, char *why, size_t whylen) {
  return rd_pg_place_sel(nodes, nn, b, NULL, nb, strategy, assign, why, whylen);
}

int rd_pg_place_sel(const rd_pg_node *nodes, size_t nn, const rd_resources *b, const char *const *sels, size_t nb,
                    int strategy, uint32_t *assign, char *why, size_t whylen) {
  return rd_pg_place_alt(nodes, nn, b, sels, nb, strategy, assign, NULL, why, whylen);
}

int rd_pg_place_alt(const rd_pg_node *nodes, size_t nn, const rd_resources *b, const char *const *sels, size_t nb,
                    int strategy, uint32_t *assign, int *alt, char *why, size_t whylen) {
  if (why && whylen) why[0] = '\0';
  if (!nodes || !b || !assign || nb == 0 || nb > RD_PG_PLACE_MAX_BUNDLES || strategy < RD_PG_PLACE_PACK ||
      strategy > RD_PG_PLACE_STRICT_SPREAD)
    return RD_EINVAL;
  /* scratch kept between calls (grown to the largest snapshot and group
   * seen), one per thread: the node daemon places from its loop alone */
  static __thread place_ctx x;
  if (ctx_reserve(&x, nn, nb) != 0) {
    if (why && whylen) snprintf(why, whylen, "out of memory placing %zu bundles on %zu nodes", nb, nn);
    return RD_ENOMEM;
  }
  uint32_t *out = x.out;

  /* never: no alternative places the group on these nodes empty */
  int first = alt ? *alt : 0;
  if (try_alts(&x, nodes, nn, b, nb, sels, strategy, 0, out, assign, first) < 0) {
    if (why && whylen) {
      size_t one = nb, unlabelled = nb;   /* a bundle no node can hold at all? */
      for (size_t i = 0; i < nb && one == nb && unlabelled == nb; i++) {
        int any = 0, anyl = 0;
        for (size_t s = 0; s < nn && !anyl; s++) {
          int f = rd_res_fits(&nodes[s].total, &b[i]);
          any |= f;
          anyl |= f && allowed(&x, s, i);
        }
        if (!any) one = i;
        else if (!anyl) unlabelled = i;
      }
      if (unlabelled < nb)
        snprintf(why, whylen, "bundle %zu: its label selector '%.200s' matches no live node that could hold it",
                 unlabelled, sels[unlabelled]);
      else if (one < nb) {
        char want[300];
        rd_res_format(&b[one], want, sizeof(want));   /* its custom resources by name */
        snprintf(why, whylen, "bundle %zu %s fits no live node", one, want);
      }
      else if (strategy == RD_PG_PLACE_STRICT_SPREAD)
        snprintf(why, whylen, "STRICT_SPREAD needs %zu nodes that can each hold a bundle; the cluster has %zu live nodes",
                 nb, nn);
      else if (strategy == RD_PG_PLACE_STRICT_PACK)
        snprintf(why, whylen, "STRICT_PACK needs one node that holds all %zu bundles together%s; none does", nb,
                 sels ? " and matches their label selectors" : "");
      else
        snprintf(why, whylen, "the %zu bundles do not fit the cluster's nodes together", nb);
    }
    return RD_EINFEASIBLE;
  }

  /* now: the first alternative that places it on what is free */
  int k = try_alts(&x, nodes, nn, b, nb, sels, strategy, 1, out, assign, first);
  if (k < 0) {
    if (why && whylen) snprintf(why, whylen, "waiting for resources: the bundles fit the cluster but not its free resources now");
    return RD_EAGAIN;
  }
  memcpy(assign, out, nb * sizeof(*out));
  if (alt) *alt = k;
  return 0;
}
