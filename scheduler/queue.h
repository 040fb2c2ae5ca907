/* scheduler/queue.h - the local scheduler's queue of waiting lease requests.
 *
 * Mechanism only: it orders requests (higher priority first, FIFO within a
 * priority) and, given a ledger and a predicate "is a worker free for this",
 * pops the requests that can be granted now.  Policy (which node) lives
 * elsewhere.  Not thread-safe; no allocation per operation beyond the node the
 * caller embeds. */
#ifndef RD_SCHEDULER_QUEUE_H
#define RD_SCHEDULER_QUEUE_H

#include <stdint.h>
#include "resources.h"

typedef struct rd_sched_item {
  /* set by the caller */
  rd_resources req;
  int32_t priority;          /* larger runs first */
  void *data;                /* caller's request */
  /* private */
  uint64_t seq;
  double rank;               /* rd_sched_queue_order's key while it sorts */
  struct rd_sched_item *prev, *next;
} rd_sched_item;

typedef struct rd_sched_queue {
  rd_sched_item *head, *tail;   /* sorted: priority desc, then seq asc (or rank, seq: rd_sched_queue_order) */
  uint64_t next_seq;
  uint64_t len;
} rd_sched_queue;

void rd_sched_queue_init(rd_sched_queue *q);
/* Insert it after every item of equal or higher priority.  The caller owns
 * it and keeps it alive until it is removed or handed to granted.  Callers
 * check rd_res_feasible first: an infeasible item is never granted. */
void rd_sched_queue_push(rd_sched_queue *q, rd_sched_item *it);
/* Unlink it.  Removing an item that was already removed (or granted) is a
 * no-op. */
void rd_sched_queue_remove(rd_sched_queue *q, rd_sched_item *it);

/* Reorder the items of each priority by rank(item, ctx), lowest first,
 * then by arrival (a stable insertion sort: no allocation; the queue holds
 * one request per waiting owner and class, so it is short).  The node daemon
 * ranks requests by their job's fair share before a dispatch when more than
 * one job waits.  Later pushes go to the end of their priority as before. */
typedef double (*rd_sched_rank_fn)(const rd_sched_item *it, void *ctx);
void rd_sched_queue_order(rd_sched_queue *q, rd_sched_rank_fn rank, void *ctx);

/* Walk the queue in order; for each item whose request fits the ledger now
 * and for which can_run(item, ctx) is non-zero, acquire the resources into
 * *grant, remove it from the queue and call granted(item, grant, ctx).  A
 * lower-priority item may be granted when a higher one does not fit (backfill)
 * only if it asks for no GPU, CPU and memory the higher one is waiting for
 * (so large requests are not starved by a stream of small ones).
 * Precisely: when an earlier item gets RD_EAGAIN, the kinds it is short of
 * (rd_res_kinds_short: cpu, gpu, memory or one custom name) are reserved for
 * the rest of this walk, and a later item that wants any reserved kind is
 * skipped.  Items with can_run == 0, invalid or infeasible items are skipped
 * and reserve nothing.  One pass, so it always ends.
 * The item is already removed when granted runs, so granted may free or
 * reuse it; *g is only valid during the call (copy it to release later).
 * granted must not otherwise push to or remove from q.
 * Returns the number granted. */
typedef int (*rd_sched_can_run_fn)(rd_sched_item *it, void *ctx);
typedef void (*rd_sched_granted_fn)(rd_sched_item *it, const rd_res_grant *g, void *ctx);
int rd_sched_queue_dispatch(rd_sched_queue *q, rd_res_ledger *l,
                            rd_sched_can_run_fn can_run,
                            rd_sched_granted_fn granted, void *ctx);

#endif
