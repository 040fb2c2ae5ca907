/* scheduler/resources.h - resource quantities and a node's resource ledger.
 *
 * Quantities are fixed point: RD_RES_UNIT (10000) units make one CPU, one GPU,
 * one byte of memory budget is counted in plain bytes (not fixed point).  A
 * request above one unit of CPU/GPU/custom must be whole.  The ledger grants
 * and returns requests; fractional GPU requests are packed best-fit onto the
 * GPU that has the least room that still fits, so one GPU fills before the
 * next is touched.  Pure data structure: no I/O, no threads. */
#ifndef RD_SCHEDULER_RESOURCES_H
#define RD_SCHEDULER_RESOURCES_H

#include <stdint.h>

#define RD_RES_UNIT 10000
#define RD_RES_MAX_CUSTOM 8
#define RD_RES_NAME_MAX 32
#define RD_RES_MAX_GPUS 16

typedef struct rd_res_custom {
  char name[RD_RES_NAME_MAX];
  int64_t amount;            /* fixed point */
} rd_res_custom;

typedef struct rd_resources {
  int64_t cpu;               /* fixed point */
  int64_t gpu;               /* fixed point */
  int64_t memory;            /* bytes */
  int ncustom;
  rd_res_custom custom[RD_RES_MAX_CUSTOM];
} rd_resources;

/* What a granted request holds: per-GPU fixed-point shares. */
typedef struct rd_res_grant {
  rd_resources req;
  int ngpus;
  int gpu_ids[RD_RES_MAX_GPUS];
  int64_t gpu_share[RD_RES_MAX_GPUS];   /* fixed point, per id */
} rd_res_grant;

typedef struct rd_res_ledger {
  rd_resources total;
  rd_resources avail;
  int ngpus;
  int64_t gpu_avail[RD_RES_MAX_GPUS];   /* fixed point, each starts at RD_RES_UNIT */
} rd_res_ledger;

/* Convert a double to fixed point; RD_EINVAL when negative, not finite, or
 * above one and not whole. */
int rd_res_from_double(double q, int64_t *out);
double rd_res_to_double(int64_t fixed);
/* Validate a request (whole above 1 unit, non-negative, names non-empty and
 * unique).  RD_EINVAL with no side effect. */
int rd_res_validate(const rd_resources *r);
/* Add/find a custom resource in r; RD_ENOMEM when RD_RES_MAX_CUSTOM are in use. */
int rd_res_set_custom(rd_resources *r, const char *name, int64_t amount);
int64_t rd_res_get_custom(const rd_resources *r, const char *name);

void rd_res_ledger_init(rd_res_ledger *l, const rd_resources *total);
/* Could this request ever fit on an empty node with this ledger's totals? */
int rd_res_feasible(const rd_res_ledger *l, const rd_resources *req);
/* Try to grant now: 0 and *g filled, RD_EAGAIN if it does not fit now,
 * RD_EINFEASIBLE if it never can. */
int rd_res_acquire(rd_res_ledger *l, const rd_resources *req, rd_res_grant *g);
void rd_res_release(rd_res_ledger *l, const rd_res_grant *g);
/* "0,1" style CUDA_VISIBLE_DEVICES for a grant; writes "" when no GPU. */
void rd_res_grant_visible_devices(const rd_res_grant *g, char *buf, int len);

#endif
