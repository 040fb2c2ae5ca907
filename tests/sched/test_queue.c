/* tests/sched/test_queue.c - ordering and dispatch of the lease queue.
 * Priority order, FIFO within a priority, backfill of small requests past a
 * blocked big one only when they take none of what it waits for, the
 * can_run predicate, removal from the middle and robustness to bad items. */
#include <string.h>

#include "check.h"
#include "queue.h"
#include "raydist/error.h"
#include "resources.h"

typedef struct log {
  int order[64];
  int n;
  rd_res_grant grants[64];
  int blocked_id;      /* can_run returns 0 for this id */
  int free_on_grant;   /* granted removes (again) and scribbles on the item */
  rd_sched_queue *q;
} log_t;

static int id_of(const rd_sched_item *it) { return (int)(intptr_t)it->data; }

static int can_run(rd_sched_item *it, void *ctx) {
  return id_of(it) != ((log_t *)ctx)->blocked_id;
}

static void granted(rd_sched_item *it, const rd_res_grant *g, void *ctx) {
  log_t *lg = ctx;
  lg->grants[lg->n] = *g;
  lg->order[lg->n++] = id_of(it);
  CHECK(it->prev == NULL && it->next == NULL);   /* already out of the queue */
  if (lg->free_on_grant) {
    rd_sched_queue_remove(lg->q, it);            /* a no-op, must not corrupt */
    memset(it, 0xa5, sizeof *it);                /* as if freed and reused */
  }
}

static void item(rd_sched_item *it, int id, int32_t prio, int64_t cpu, int64_t gpu) {
  memset(it, 0, sizeof *it);
  it->priority = prio;
  it->req.cpu = cpu;
  it->req.gpu = gpu;
  it->data = (void *)(intptr_t)id;
}

static rd_res_ledger node(int64_t cpus, int64_t gpus) {
  rd_resources t;
  memset(&t, 0, sizeof t);
  t.cpu = cpus * RD_RES_UNIT;
  t.gpu = gpus * RD_RES_UNIT;
  t.memory = 1 << 30;
  CHECK(rd_res_set_custom(&t, "tpu", RD_RES_UNIT) == 0);
  rd_res_ledger l;
  rd_res_ledger_init(&l, &t);
  return l;
}

static void check_links(const rd_sched_queue *q) {
  uint64_t n = 0;
  const rd_sched_item *prev = NULL;
  for (const rd_sched_item *it = q->head; it; it = it->next) {
    CHECK(it->prev == prev);
    if (prev) CHECK(prev->priority > it->priority || (prev->priority == it->priority && prev->seq < it->seq));
    prev = it;
    n++;
  }
  CHECK(q->tail == prev && q->len == n);
}

static void test_order(void) {
  rd_sched_queue q;
  rd_sched_queue_init(&q);
  rd_sched_item it[8];
  static const int32_t prio[8] = {1, 5, 1, 9, 5, 0, 9, 1};
  for (int i = 0; i < 8; i++) {
    item(&it[i], i, prio[i], RD_RES_UNIT / 10, 0);
    rd_sched_queue_push(&q, &it[i]);
    check_links(&q);
  }
  rd_res_ledger l = node(8, 0);
  log_t lg = {.blocked_id = -1};
  CHECK(rd_sched_queue_dispatch(&q, &l, can_run, granted, &lg) == 8);
  static const int want[8] = {3, 6, 1, 4, 0, 2, 7, 5};
  CHECK(lg.n == 8);
  for (int i = 0; i < 8; i++) CHECK(lg.order[i] == want[i]);
  CHECK(q.head == NULL && q.tail == NULL && q.len == 0);
  CHECK(l.avail.cpu == 8 * RD_RES_UNIT - 8 * (RD_RES_UNIT / 10));
}

static void test_fifo_when_full(void) {
  /* Only one fits at a time: grants come out in FIFO order across dispatches. */
  rd_sched_queue q;
  rd_sched_queue_init(&q);
  rd_sched_item it[4];
  for (int i = 0; i < 4; i++) {
    item(&it[i], i, 3, RD_RES_UNIT, 0);
    rd_sched_queue_push(&q, &it[i]);
  }
  rd_res_ledger l = node(1, 0);
  log_t lg = {.blocked_id = -1};
  for (int i = 0; i < 4; i++) {
    CHECK(rd_sched_queue_dispatch(&q, &l, can_run, granted, &lg) == 1);
    CHECK(lg.order[i] == i);
    CHECK(rd_sched_queue_dispatch(&q, &l, can_run, granted, &lg) == 0);
    rd_res_release(&l, &lg.grants[i]);
  }
  CHECK(q.len == 0);
}

static void test_backfill(void) {
  /* GPU 0 busy; a high-priority whole-GPU task waits.  A low-priority CPU
   * task may run past it; a low-priority fractional GPU task may not. */
  rd_res_ledger l = node(4, 1);
  rd_resources busy;
  memset(&busy, 0, sizeof busy);
  busy.gpu = 2500;
  rd_res_grant bg;
  CHECK(rd_res_acquire(&l, &busy, &bg) == 0);

  rd_sched_queue q;
  rd_sched_queue_init(&q);
  rd_sched_item big, small_cpu, small_gpu, tpu_task;
  item(&big, 1, 10, RD_RES_UNIT, RD_RES_UNIT);
  item(&small_gpu, 2, 1, 0, 2500);
  item(&small_cpu, 3, 1, RD_RES_UNIT, 0);
  item(&tpu_task, 4, 1, 0, 0);
  CHECK(rd_res_set_custom(&tpu_task.req, "tpu", RD_RES_UNIT) == 0);
  rd_sched_queue_push(&q, &small_gpu);
  rd_sched_queue_push(&q, &big);
  rd_sched_queue_push(&q, &small_cpu);
  rd_sched_queue_push(&q, &tpu_task);
  CHECK(q.head == &big);

  log_t lg = {.blocked_id = -1};
  CHECK(rd_sched_queue_dispatch(&q, &l, can_run, granted, &lg) == 2);
  CHECK(lg.order[0] == 3 && lg.order[1] == 4);   /* CPU and tpu backfilled */
  CHECK(q.len == 2 && q.head == &big && big.next == &small_gpu);
  /* The fractional GPU task would fit GPU 0 right now, yet it must wait. */
  CHECK(l.gpu_avail[0] == 7500);
  CHECK(rd_sched_queue_dispatch(&q, &l, can_run, granted, &lg) == 0);

  /* GPU frees: the big task runs first, then the small GPU task waits again. */
  rd_res_release(&l, &bg);
  CHECK(rd_sched_queue_dispatch(&q, &l, can_run, granted, &lg) == 1);
  CHECK(lg.order[2] == 1 && lg.grants[2].gpu_ids[0] == 0);
  CHECK(q.len == 1 && q.head == &small_gpu);
  rd_res_release(&l, &lg.grants[2]);
  CHECK(rd_sched_queue_dispatch(&q, &l, can_run, granted, &lg) == 1);
  CHECK(lg.order[3] == 2);

  /* Blocked on CPU: a later CPU request is held back even though it fits,
   * a later memory-only request is not. */
  rd_res_ledger m = node(2, 0);
  rd_sched_queue_init(&q);
  rd_sched_item a, b, c;
  item(&a, 10, 5, 2 * RD_RES_UNIT, 0);
  item(&b, 11, 5, 5000, 0);
  item(&c, 12, 0, 0, 0);
  c.req.memory = 4096;
  rd_resources one;
  memset(&one, 0, sizeof one);
  one.cpu = RD_RES_UNIT;
  rd_res_grant og;
  CHECK(rd_res_acquire(&m, &one, &og) == 0);
  rd_sched_queue_push(&q, &a);
  rd_sched_queue_push(&q, &b);   /* same priority, later: also held back */
  rd_sched_queue_push(&q, &c);
  log_t lm = {.blocked_id = -1};
  CHECK(rd_sched_queue_dispatch(&q, &m, can_run, granted, &lm) == 1);
  CHECK(lm.order[0] == 12);
  CHECK(m.avail.cpu == RD_RES_UNIT);
}

static void test_can_run_and_remove(void) {
  rd_res_ledger l = node(8, 0);
  rd_sched_queue q;
  rd_sched_queue_init(&q);
  rd_sched_item it[5];
  for (int i = 0; i < 5; i++) {
    item(&it[i], i, 0, RD_RES_UNIT, 0);
    rd_sched_queue_push(&q, &it[i]);
  }
  rd_sched_queue_remove(&q, &it[2]);          /* middle */
  check_links(&q);
  CHECK(q.len == 4 && it[1].next == &it[3] && it[3].prev == &it[1]);
  rd_sched_queue_remove(&q, &it[2]);          /* again: no-op */
  CHECK(q.len == 4);
  rd_sched_queue_remove(&q, &it[0]);          /* head */
  rd_sched_queue_remove(&q, &it[4]);          /* tail */
  check_links(&q);
  CHECK(q.head == &it[1] && q.tail == &it[3] && q.len == 2);

  log_t lg = {.blocked_id = 1};
  CHECK(rd_sched_queue_dispatch(&q, &l, can_run, granted, &lg) == 1);
  CHECK(lg.order[0] == 3);
  CHECK(q.head == &it[1] && q.len == 1);
  CHECK(l.avail.cpu == 7 * RD_RES_UNIT);      /* skipped item took nothing */
  lg.blocked_id = -1;
  CHECK(rd_sched_queue_dispatch(&q, &l, can_run, granted, &lg) == 1);
  CHECK(q.len == 0 && q.head == NULL && q.tail == NULL);

  /* Re-push after removal works and gets a later seq. */
  rd_sched_queue_push(&q, &it[2]);
  rd_sched_queue_push(&q, &it[0]);
  CHECK(q.head == &it[2] && q.tail == &it[0]);
  check_links(&q);
}

static void test_bad_items_and_freeing(void) {
  /* Infeasible and invalid items stay queued, block nothing, and dispatch
   * ends; granted may remove and scribble on the item it is given. */
  rd_res_ledger l = node(2, 0);
  rd_sched_queue q;
  rd_sched_queue_init(&q);
  rd_sched_item bad_gpu, bad_cpu, invalid, ok1, ok2;
  item(&bad_gpu, 1, 9, RD_RES_UNIT, RD_RES_UNIT);   /* node has no GPU */
  item(&bad_cpu, 2, 9, 64 * RD_RES_UNIT, 0);        /* more CPU than exists */
  item(&invalid, 3, 9, 15000, 0);                   /* 1.5 CPU */
  item(&ok1, 4, 0, RD_RES_UNIT, 0);
  item(&ok2, 5, 0, RD_RES_UNIT, 0);
  rd_sched_queue_push(&q, &bad_gpu);
  rd_sched_queue_push(&q, &ok1);
  rd_sched_queue_push(&q, &bad_cpu);
  rd_sched_queue_push(&q, &invalid);
  rd_sched_queue_push(&q, &ok2);
  log_t lg = {.blocked_id = -1, .free_on_grant = 1, .q = &q};
  CHECK(rd_sched_queue_dispatch(&q, &l, can_run, granted, &lg) == 2);
  CHECK(lg.order[0] == 4 && lg.order[1] == 5);
  CHECK(q.len == 3 && q.head == &bad_gpu && q.tail == &invalid);
  check_links(&q);
  CHECK(rd_sched_queue_dispatch(&q, &l, can_run, granted, &lg) == 0);
  CHECK(rd_sched_queue_dispatch(&q, &l, NULL, NULL, NULL) == 0);
}

int main(void) {
  test_order();
  test_fifo_when_full();
  test_backfill();
  test_can_run_and_remove();
  test_bad_items_and_freeing();
  printf("test_queue: ok\n");
  return 0;
}
