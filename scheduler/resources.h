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

#include <stddef.h>
#include <stdint.h>

#define RD_RES_UNIT 10000
#define RD_RES_MAX_CUSTOM 8
#define RD_RES_NAME_MAX 32
#define RD_RES_MAX_GPUS 16
/* Enough for rd_res_grant_visible_devices with RD_RES_MAX_GPUS ids. */
#define RD_RES_VISIBLE_DEVICES_MAX 64

/* Resource kinds as bits, for rd_res_kinds_wanted/rd_res_kinds_short.
 * Custom resource i of a ledger's total is bit RD_RES_KIND_CUSTOM(i). */
#define RD_RES_KIND_CPU    (1u << 0)
#define RD_RES_KIND_GPU    (1u << 1)
#define RD_RES_KIND_MEMORY (1u << 2)
#define RD_RES_KIND_CUSTOM(i) (1u << (3 + (i)))

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

/* GPU slot i of a ledger is device gpu_dev[i] with room gpu_cap[i]: on a
 * node's ledger device i with a whole GPU; on a bundle's ledger (a ledger
 * carved out of a grant) the devices and shares that grant holds.  Grants
 * always name devices, never slots. */
typedef struct rd_res_ledger {
  rd_resources total;
  rd_resources avail;
  int ngpus;
  int gpu_dev[RD_RES_MAX_GPUS];
  int64_t gpu_cap[RD_RES_MAX_GPUS];     /* fixed point, RD_RES_UNIT on a node */
  int64_t gpu_avail[RD_RES_MAX_GPUS];   /* fixed point, each starts at gpu_cap */
} rd_res_ledger;

/* Convert a double to fixed point, rounding to the nearest 1/RD_RES_UNIT;
 * RD_EINVAL (and *out untouched) when negative, not finite, above one and
 * not whole, too large for int64 fixed point, or positive but rounding to 0. */
int rd_res_from_double(double q, int64_t *out);
double rd_res_to_double(int64_t fixed);
/* r as text for messages, "{CPU: 1, GPU: 0.5, memory: 1048576, only_b: 1}"
 * (memory only when set), cut to fit len. */
void rd_res_format(const rd_resources *r, char *buf, size_t len);
/* 1 when r asks for nothing: no CPU, GPU or memory, every custom amount 0. */
int rd_res_is_empty(const rd_resources *r);
/* Validate a request (whole above 1 unit, non-negative, names non-empty,
 * NUL-terminated within RD_RES_NAME_MAX and unique, ncustom in range).
 * 0 or RD_EINVAL with no side effect. */
int rd_res_validate(const rd_resources *r);
/* Add/find a custom resource in r; RD_ENOMEM when RD_RES_MAX_CUSTOM are in use.
 * set replaces the amount of an existing name; RD_EINVAL for a bad name or an
 * amount that fails the fixed-point rules.  get returns 0 for an absent name. */
int rd_res_set_custom(rd_resources *r, const char *name, int64_t amount);
int64_t rd_res_get_custom(const rd_resources *r, const char *name);
/* Sum of two requests (custom amounts by name); RD_ENOMEM when the sum names
 * more than RD_RES_MAX_CUSTOM custom resources. */
int rd_res_add(rd_resources *acc, const rd_resources *r);
/* Amounts only (a ledger has the last word on how GPU shares pack): does r
 * fit in room?  A custom amount of 0 asks for nothing. */
int rd_res_fits(const rd_resources *room, const rd_resources *r);
/* room -= r, custom amounts by name (r fits in room). */
void rd_res_take(rd_resources *room, const rd_resources *r);

/* total should pass rd_res_validate.  The GPU total is rounded down to whole
 * GPUs (at most RD_RES_MAX_GPUS) and negative amounts count as 0. */
void rd_res_ledger_init(rd_res_ledger *l, const rd_resources *total);
/* A ledger holding exactly what grant g (made by another ledger) holds:
 * its CPU, memory, custom amounts, and its GPU devices with their shares.
 * Used for placement-group bundles: requests scheduled into the bundle are
 * granted from this ledger, and name the same devices as the parent. */
void rd_res_ledger_init_grant(rd_res_ledger *l, const rd_res_grant *g);
/* Could this request ever fit on an empty node with this ledger's totals?
 * 1 if so, 0 if not (an invalid request is never feasible).  A custom amount
 * of 0 asks for nothing, even for a name the node does not have. */
int rd_res_feasible(const rd_res_ledger *l, const rd_resources *req);
/* Try to grant now: 0 and *g filled, RD_EAGAIN if it does not fit now,
 * RD_EINFEASIBLE if it never can, RD_EINVAL if req fails rd_res_validate.
 * All or nothing: on error neither the ledger nor *g is changed.  The caller
 * owns *g and hands it back, unchanged, to rd_res_release exactly once. */
int rd_res_acquire(rd_res_ledger *l, const rd_resources *req, rd_res_grant *g);
/* Return what g holds.  Aborts on a grant this ledger could not have made
 * (e.g. released twice), since the ledger would otherwise be corrupt. */
void rd_res_release(rd_res_ledger *l, const rd_res_grant *g);
/* The holder of g waits for other work (Ray's blocked worker): its CPUs go
 * back to l for others until rd_res_retake_cpu.  GPUs, memory and custom
 * resources stay held.  Aborts when l could not have granted g. */
void rd_res_lend_cpu(rd_res_ledger *l, const rd_res_grant *g);
/* Take back what rd_res_lend_cpu lent, even when others hold it now: the
 * available CPUs may go below zero (the node runs over its CPUs, and acquire
 * grants none, until enough grants are released). */
void rd_res_retake_cpu(rd_res_ledger *l, const rd_res_grant *g);
/* "0,1" style CUDA_VISIBLE_DEVICES for a grant; writes "" when no GPU, and
 * also "" when the list does not fit in len bytes (never a truncated id).
 * RD_RES_VISIBLE_DEVICES_MAX bytes always suffice. */
void rd_res_grant_visible_devices(const rd_res_grant *g, char *buf, int len);

/* RD_RES_KIND_* bits of the kinds req asks a non-zero amount of, custom
 * names mapped to their index in l->total (names l lacks are left out). */
uint32_t rd_res_kinds_wanted(const rd_res_ledger *l, const rd_resources *req);
/* The subset of rd_res_kinds_wanted that l cannot give req right now
 * (for the GPU: no GPU or set of free GPUs can take the request). */
uint32_t rd_res_kinds_short(const rd_res_ledger *l, const rd_resources *req);

#endif
