/* tests/sched/test_fair.c - weighted dominant shares, the yield test
 * between two jobs, and reordering the lease queue by share. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "fair.h"
#include "queue.h"

static rd_resources res(double cpus, double gpus, int64_t mem) {
  rd_resources r;
  memset(&r, 0, sizeof r);
  r.cpu = (int64_t)(cpus * RD_RES_UNIT + 0.5);
  r.gpu = (int64_t)(gpus * RD_RES_UNIT + 0.5);
  r.memory = mem;
  return r;
}

static void test_share(void) {
  rd_resources total = res(8, 2, 1000);
  rd_resources h = res(2, 0, 0);
  CHECK(rd_fair_share(&total, &h, 1) == 0.25);
  h = res(2, 1, 0);                          /* GPUs dominate */
  CHECK(rd_fair_share(&total, &h, 1) == 0.5);
  CHECK(rd_fair_share(&total, &h, 2) == 0.25);
  CHECK(rd_fair_share(&total, &h, 0) == 0.5);  /* no weight: 1 */
  h = res(1, 0, 900);                        /* memory dominates */
  CHECK(rd_fair_share(&total, &h, 1) == 0.9);
  rd_resources none = res(0, 0, 0);          /* a node without GPUs or memory */
  h = res(0, 1, 5);
  CHECK(rd_fair_share(&none, &h, 1) == 0.0);
  CHECK_EQ(h.ncustom, 0);
  CHECK(rd_res_set_custom(&h, "tpu", RD_RES_UNIT) == 0);   /* custom: not counted */
  CHECK(rd_fair_share(&total, &h, 1) == 0.5);
}

static void test_should_yield(void) {
  rd_resources total = res(2, 0, 0), one = res(1, 0, 0), two = res(2, 0, 0), zero = res(0, 0, 0);
  /* A holds both CPUs, B holds none: A gives one */
  CHECK(rd_fair_should_yield(&total, &two, 1, &one, &zero, 1, &one) == 1);
  /* one each: giving would overshoot, so the two never trade back and forth */
  CHECK(rd_fair_should_yield(&total, &one, 1, &one, &one, 1, &one) == 0);
  CHECK(rd_fair_should_yield(&total, &one, 1, &one, &zero, 1, &one) == 0);   /* would only swap them */
  /* three jobs on 2 CPUs: A 1, B 1, C none; neither gives (1/2 - 1/2 < 0 + 1/2) */
  CHECK(rd_fair_should_yield(&total, &one, 1, &one, &zero, 1, &two) == 0);
  /* weights: 4 CPUs, A weight 3 holds 3, B weight 1 holds 1: stays */
  rd_resources four = res(4, 0, 0), three = res(3, 0, 0);
  CHECK(rd_fair_should_yield(&four, &three, 3, &one, &one, 1, &one) == 0);
  /* ... but with equal weights A gives one */
  CHECK(rd_fair_should_yield(&four, &three, 1, &one, &one, 1, &one) == 1);
  /* and B (weight 1, holding 2) gives one to A (weight 3, holding 2) */
  CHECK(rd_fair_should_yield(&four, &two, 1, &one, &two, 3, &one) == 1);
  /* a grant that frees nothing the request wants is never asked for */
  rd_resources gtotal = res(4, 1, 0), gpu = res(0, 1, 0);
  CHECK(rd_fair_should_yield(&gtotal, &three, 1, &one, &zero, 1, &gpu) == 0);
  /* one GPU that both want whole: a swap, never by share alone (the node
   * time-slices such grants, runtime/fair.c) */
  CHECK(rd_fair_should_yield(&gtotal, &gpu, 1, &gpu, &zero, 1, &gpu) == 0);
  rd_resources gtotal2 = res(4, 2, 0), gpu2 = res(0, 2, 0);
  CHECK(rd_fair_should_yield(&gtotal2, &gpu2, 1, &gpu, &zero, 1, &gpu) == 1);
  CHECK(rd_fair_should_yield(&total, &two, 1, &zero, &zero, 1, &one) == 0);
}

/* item id -> its job's share */
static double shares[8];
static double rank_of(const rd_sched_item *it, void *ctx) {
  (void)ctx;
  return shares[(intptr_t)it->data >> 4];
}

static void check_sorted(const rd_sched_queue *q) {
  uint64_t n = 0;
  const rd_sched_item *prev = NULL;
  for (const rd_sched_item *it = q->head; it; it = it->next, n++) {
    CHECK(it->prev == prev);
    if (prev)
      CHECK(prev->priority > it->priority ||
            (prev->priority == it->priority &&
             (prev->rank < it->rank || (prev->rank == it->rank && prev->seq < it->seq))));
    prev = it;
  }
  CHECK(q->tail == prev && q->len == n);
}

static void test_order(void) {
  rd_sched_queue q;
  rd_sched_queue_init(&q);
  rd_sched_item it[9];
  /* id = job << 4 | n; jobs 0 (share 1.0), 1 (0.0), 2 (0.5) */
  static const int job[9] = {0, 0, 1, 0, 2, 1, 0, 2, 1};
  static const int32_t prio[9] = {0, 0, 0, 5, 0, 0, 0, 5, 0};
  for (int i = 0; i < 9; i++) {
    memset(&it[i], 0, sizeof it[i]);
    it[i].priority = prio[i];
    it[i].req = res(1, 0, 0);
    it[i].data = (void *)(intptr_t)(job[i] << 4 | i);
    rd_sched_queue_push(&q, &it[i]);
  }
  shares[0] = 1.0;
  shares[1] = 0.0;
  shares[2] = 0.5;
  rd_sched_queue_order(&q, rank_of, NULL);
  check_sorted(&q);
  /* priority 5 first (job 2 before job 0), then jobs 1, 2, 0 in arrival order */
  static const int want[9] = {7, 3, 2, 5, 8, 4, 0, 1, 6};
  int n = 0;
  for (rd_sched_item *x = q.head; x; x = x->next, n++) CHECK((intptr_t)x->data == (job[want[n]] << 4 | want[n]));
  CHECK(n == 9);
  /* a push keeps priorities; removal from the reordered middle keeps links */
  rd_sched_item late;
  memset(&late, 0, sizeof late);
  late.priority = 5;
  late.data = (void *)(intptr_t)(1 << 4);
  rd_sched_queue_push(&q, &late);
  CHECK(it[3].next == &late && late.next == &it[2]);
  rd_sched_queue_remove(&q, &it[5]);
  rd_sched_queue_remove(&q, &late);
  CHECK(q.len == 8);
  /* equal ranks again: arrival order comes back */
  shares[0] = shares[1] = shares[2] = 0.25;
  rd_sched_queue_order(&q, rank_of, NULL);
  check_sorted(&q);
  CHECK(q.head == &it[3] && q.head->next == &it[7] && q.tail == &it[8]);
  /* the empty queue and a one-item queue */
  rd_sched_queue e;
  rd_sched_queue_init(&e);
  rd_sched_queue_order(&e, rank_of, NULL);
  CHECK(e.head == NULL && e.tail == NULL);
  rd_sched_queue_push(&e, &late);
  rd_sched_queue_order(&e, rank_of, NULL);
  CHECK(e.head == &late && e.tail == &late && late.prev == NULL && late.next == NULL);
}

int main(void) {
  test_share();
  test_should_yield();
  test_order();
  printf("test_fair: ok\n");
  return 0;
}
