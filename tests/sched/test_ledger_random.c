/* tests/sched/test_ledger_random.c - random acquire/release sequences.
 * After every step the ledger must agree with the grants held: nothing is
 * over-committed or negative, per-GPU shares add up, failed acquires change
 * nothing, and releasing everything restores the totals exactly. */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "raydist/error.h"
#include "resources.h"

#define MAXHELD 256

static uint64_t rng_state;

static uint32_t rnd(uint32_t n) {   /* xorshift64*; n > 0 */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (uint32_t)((rng_state * 2685821657736338717ull) >> 33) % n;
}

static const char *names[] = {"tpu", "disk", "license"};

static rd_resources random_req(void) {
  rd_resources r;
  memset(&r, 0, sizeof r);
  static const int64_t cpus[] = {0, 1, 2500, 5000, RD_RES_UNIT, 2 * RD_RES_UNIT};
  r.cpu = cpus[rnd(6)];
  switch (rnd(5)) {
    case 0: r.gpu = 0; break;
    case 1: r.gpu = 1 + rnd(RD_RES_UNIT - 1); break;   /* any fraction */
    case 2: r.gpu = 2500 * (1 + rnd(3)); break;
    case 3: r.gpu = RD_RES_UNIT; break;
    default: r.gpu = RD_RES_UNIT * (1 + rnd(3)); break;
  }
  r.memory = rnd(4) ? 0 : (int64_t)rnd(1 << 20);
  if (rnd(3) == 0) CHECK(rd_res_set_custom(&r, names[rnd(3)], rnd(2) ? 5000 : RD_RES_UNIT) == 0);
  return r;
}

static void check_books(const rd_res_ledger *l, const rd_res_grant *held, int nheld) {
  int64_t cpu = 0, mem = 0, gpu = 0, custom[RD_RES_MAX_CUSTOM] = {0};
  int64_t share[RD_RES_MAX_GPUS] = {0};
  for (int i = 0; i < nheld; i++) {
    const rd_res_grant *g = &held[i];
    cpu += g->req.cpu;
    mem += g->req.memory;
    gpu += g->req.gpu;
    int64_t gs = 0;
    for (int k = 0; k < g->ngpus; k++) {
      CHECK(g->gpu_ids[k] >= 0 && g->gpu_ids[k] < l->ngpus);
      share[g->gpu_ids[k]] += g->gpu_share[k];
      gs += g->gpu_share[k];
    }
    CHECK(gs == g->req.gpu);
    if (g->req.gpu >= RD_RES_UNIT) CHECK(g->ngpus == g->req.gpu / RD_RES_UNIT);
    if (g->req.gpu > 0 && g->req.gpu < RD_RES_UNIT) CHECK(g->ngpus == 1);
    for (int k = 0; k < l->total.ncustom; k++)
      custom[k] += rd_res_get_custom(&g->req, l->total.custom[k].name);
  }
  CHECK(l->avail.cpu >= 0 && l->avail.cpu + cpu == l->total.cpu);
  CHECK(l->avail.memory >= 0 && l->avail.memory + mem == l->total.memory);
  CHECK(l->avail.gpu >= 0 && l->avail.gpu + gpu == l->total.gpu);
  int64_t gsum = 0;
  for (int k = 0; k < l->ngpus; k++) {
    CHECK(share[k] <= RD_RES_UNIT);
    CHECK(l->gpu_avail[k] >= 0 && l->gpu_avail[k] + share[k] == RD_RES_UNIT);
    gsum += l->gpu_avail[k];
  }
  CHECK(gsum == l->avail.gpu);
  for (int k = 0; k < l->total.ncustom; k++) {
    CHECK(l->avail.custom[k].amount >= 0);
    CHECK(l->avail.custom[k].amount + custom[k] == l->total.custom[k].amount);
  }
}

static void run(uint64_t seed, int ngpus) {
  rng_state = seed * 0x9e3779b97f4a7c15ull + 1;
  rd_resources t;
  memset(&t, 0, sizeof t);
  t.cpu = 8 * RD_RES_UNIT;
  t.gpu = ngpus * (int64_t)RD_RES_UNIT;
  t.memory = 4 << 20;
  CHECK(rd_res_set_custom(&t, "tpu", 2 * RD_RES_UNIT) == 0);
  CHECK(rd_res_set_custom(&t, "disk", RD_RES_UNIT) == 0);   /* "license": node lacks it */
  rd_res_ledger l;
  rd_res_ledger_init(&l, &t);
  const rd_res_ledger fresh = l;

  static rd_res_grant held[MAXHELD];
  int nheld = 0, granted = 0, waited = 0;
  for (int step = 0; step < 4000; step++) {
    if (nheld > 0 && (nheld == MAXHELD || rnd(5) < 2)) {
      int i = (int)rnd((uint32_t)nheld);
      rd_res_release(&l, &held[i]);
      held[i] = held[--nheld];
    } else {
      rd_resources r = random_req();
      rd_res_ledger before = l;
      int rc = rd_res_acquire(&l, &r, &held[nheld]);
      int feasible = rd_res_feasible(&l, &r);
      if (rc == 0) {
        CHECK(feasible);
        CHECK(res_same(&held[nheld].req, &r));
        nheld++;
        granted++;
      } else {
        CHECK(ledger_same(&before, &l));
        CHECK(rc == (feasible ? RD_EAGAIN : RD_EINFEASIBLE));
        CHECK(rc == RD_EINFEASIBLE || rd_res_kinds_short(&l, &r) != 0);
        waited += rc == RD_EAGAIN;
      }
    }
    check_books(&l, held, nheld);
  }
  CHECK(granted > 100 && waited > 10);   /* the sequence exercised both paths */
  while (nheld > 0) rd_res_release(&l, &held[--nheld]);
  CHECK(ledger_same(&fresh, &l));
}

/* Releasing a grant twice would over-fill the ledger: it must abort. */
static void test_double_release_aborts(void) {
  rd_resources t;
  memset(&t, 0, sizeof t);
  t.cpu = 2 * RD_RES_UNIT;
  t.gpu = RD_RES_UNIT;
  rd_res_ledger l;
  rd_res_ledger_init(&l, &t);
  rd_resources r;
  memset(&r, 0, sizeof r);
  r.gpu = 2500;
  rd_res_grant g;
  CHECK(rd_res_acquire(&l, &r, &g) == 0);
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    rd_res_release(&l, &g);
    rd_res_release(&l, &g);
    _exit(0);
  }
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
}

int main(void) {
  test_double_release_aborts();
  for (uint64_t seed = 1; seed <= 20; seed++) {
    run(seed, 1);
    run(seed, 2);
    run(seed, 4);
  }
  printf("test_ledger_random: ok\n");
  return 0;
}
