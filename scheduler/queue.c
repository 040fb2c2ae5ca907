/* scheduler/queue.c - the local scheduler's ordered queue of lease requests.
 *
 * Keeps requests sorted by priority (FIFO within one) and grants those that
 * fit the ledger now, backfilling lower ones only when they take nothing a
 * blocked earlier request is short of.  Mechanism only: it never decides
 * which node a request belongs on, never allocates and never blocks. */
#include "queue.h"

#include <stddef.h>

#include "raydist/error.h"

void rd_sched_queue_init(rd_sched_queue *q) {
  q->head = q->tail = NULL;
  q->next_seq = 0;
  q->len = 0;
}

void rd_sched_queue_push(rd_sched_queue *q, rd_sched_item *it) {
  it->seq = q->next_seq++;
  /* Walk back from the tail: a push at an existing priority is O(1). */
  rd_sched_item *after = q->tail;
  while (after != NULL && after->priority < it->priority) after = after->prev;
  it->prev = after;
  it->next = after ? after->next : q->head;
  if (it->next) it->next->prev = it;
  else q->tail = it;
  if (after) after->next = it;
  else q->head = it;
  q->len++;
}

void rd_sched_queue_remove(rd_sched_queue *q, rd_sched_item *it) {
  if (it->prev == NULL && q->head != it) return;   /* not in the queue */
  if (it->prev) it->prev->next = it->next;
  else q->head = it->next;
  if (it->next) it->next->prev = it->prev;
  else q->tail = it->prev;
  it->prev = it->next = NULL;
  q->len--;
}

/* Does a go before b? */
static int before(const rd_sched_item *a, const rd_sched_item *b) {
  if (a->priority != b->priority) return a->priority > b->priority;
  if (a->rank != b->rank) return a->rank < b->rank;
  return a->seq < b->seq;
}

void rd_sched_queue_order(rd_sched_queue *q, rd_sched_rank_fn rank, void *ctx) {
  for (rd_sched_item *it = q->head; it; it = it->next) it->rank = rank(it, ctx);
  rd_sched_item *sorted = NULL, *stail = NULL;   /* rebuilt in order, doubly linked */
  for (rd_sched_item *it = q->head, *next; it; it = next) {
    next = it->next;
    rd_sched_item *after = stail;   /* mostly in order already: walk back from the end */
    while (after && before(it, after)) after = after->prev;
    it->prev = after;
    it->next = after ? after->next : sorted;
    if (it->next) it->next->prev = it;
    else stail = it;
    if (after) after->next = it;
    else sorted = it;
  }
  q->head = sorted;
  q->tail = stail;
}

int rd_sched_queue_dispatch(rd_sched_queue *q, rd_res_ledger *l,
                            rd_sched_can_run_fn can_run,
                            rd_sched_granted_fn granted, void *ctx) {
  int n = 0;
  uint32_t reserved = 0;   /* kinds an earlier blocked item is short of */
  rd_sched_item *next;
  for (rd_sched_item *it = q->head; it != NULL; it = next) {
    next = it->next;   /* granted may free it */
    if (reserved & rd_res_kinds_wanted(l, &it->req)) continue;
    if (can_run != NULL && !can_run(it, ctx)) continue;
    rd_res_grant g;
    int rc = rd_res_acquire(l, &it->req, &g);
    if (rc == RD_EAGAIN) {
      reserved |= rd_res_kinds_short(l, &it->req);
      continue;
    }
    if (rc != 0) continue;   /* invalid or infeasible: never runs, blocks nothing */
    rd_sched_queue_remove(q, it);
    n++;
    if (granted != NULL) granted(it, &g, ctx);
  }
  return n;
}
