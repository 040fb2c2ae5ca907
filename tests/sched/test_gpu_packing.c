/* tests/sched/test_gpu_packing.c - how the ledger places GPU requests.
 * Fractional requests pack best-fit onto one GPU before the next, whole
 * requests take only free GPUs, and impossible requests are told apart
 * (RD_EINFEASIBLE) from ones that merely wait (RD_EAGAIN). */
#include <string.h>

#include "check.h"
#include "raydist/error.h"
#include "resources.h"

static rd_res_ledger node(int64_t cpus, int64_t gpus) {
  rd_resources t;
  memset(&t, 0, sizeof t);
  t.cpu = cpus * RD_RES_UNIT;
  t.gpu = gpus * RD_RES_UNIT;
  t.memory = 1 << 30;
  rd_res_ledger l;
  rd_res_ledger_init(&l, &t);
  return l;
}

static rd_resources gpu_req(int64_t fixed) {
  rd_resources r;
  memset(&r, 0, sizeof r);
  r.gpu = fixed;
  return r;
}

static void test_two_gpus_pack_in_order(void) {
  rd_res_ledger l = node(8, 2);
  CHECK(l.ngpus == 2);
  rd_resources q = gpu_req(2500);
  rd_res_grant g[5];
  for (int i = 0; i < 4; i++) {
    CHECK(rd_res_acquire(&l, &q, &g[i]) == 0);
    CHECK(g[i].ngpus == 1 && g[i].gpu_ids[0] == 0 && g[i].gpu_share[0] == 2500);
  }
  CHECK(l.gpu_avail[0] == 0 && l.gpu_avail[1] == RD_RES_UNIT);
  CHECK(rd_res_acquire(&l, &q, &g[4]) == 0);
  CHECK(g[4].gpu_ids[0] == 1);
  CHECK(l.avail.gpu == 2 * RD_RES_UNIT - 5 * 2500);
  for (int i = 0; i < 5; i++) rd_res_release(&l, &g[i]);
  CHECK(l.gpu_avail[0] == RD_RES_UNIT && l.gpu_avail[1] == RD_RES_UNIT);
  CHECK(l.avail.gpu == l.total.gpu);
}

static void test_one_gpu_waits_then_fits(void) {
  rd_res_ledger l = node(8, 1);
  rd_resources q = gpu_req(2500);
  rd_res_grant g[5];
  for (int i = 0; i < 4; i++) CHECK(rd_res_acquire(&l, &q, &g[i]) == 0);
  rd_res_ledger before = l;
  memset(&g[4], 0x5a, sizeof g[4]);
  rd_res_grant untouched = g[4];
  CHECK(rd_res_acquire(&l, &q, &g[4]) == RD_EAGAIN);
  CHECK(rd_res_acquire(&l, &q, &g[4]) == RD_EAGAIN);
  CHECK(ledger_same(&before, &l));                 /* no side effect */
  CHECK(memcmp(&untouched, &g[4], sizeof g[4]) == 0);
  rd_res_release(&l, &g[2]);
  CHECK(rd_res_acquire(&l, &q, &g[4]) == 0);
  CHECK(g[4].ngpus == 1 && g[4].gpu_ids[0] == 0);
  CHECK(l.gpu_avail[0] == 0);
}

static void test_mixed_fractions_share_one_gpu(void) {
  rd_res_ledger l = node(8, 2);
  rd_resources half = gpu_req(5000), quarter = gpu_req(2500);
  rd_res_grant a, b, c;
  CHECK(rd_res_acquire(&l, &half, &a) == 0 && a.gpu_ids[0] == 0);
  CHECK(rd_res_acquire(&l, &quarter, &b) == 0 && b.gpu_ids[0] == 0);
  CHECK(rd_res_acquire(&l, &quarter, &c) == 0 && c.gpu_ids[0] == 0);
  CHECK(l.gpu_avail[0] == 0 && l.gpu_avail[1] == RD_RES_UNIT);

  /* Best fit, not first fit: GPU 1 has 0.3 left, GPU 0 has 0.6; a 0.3 goes
   * onto GPU 1 so that GPU 0 keeps room for a 0.6. */
  rd_res_ledger m = node(8, 2);
  rd_resources p4 = gpu_req(4000), p7 = gpu_req(7000), p3 = gpu_req(3000), p6 = gpu_req(6000);
  rd_res_grant x, y, z, w;
  CHECK(rd_res_acquire(&m, &p4, &x) == 0 && x.gpu_ids[0] == 0);
  CHECK(rd_res_acquire(&m, &p7, &y) == 0 && y.gpu_ids[0] == 1);
  CHECK(rd_res_acquire(&m, &p3, &z) == 0 && z.gpu_ids[0] == 1);
  CHECK(rd_res_acquire(&m, &p6, &w) == 0 && w.gpu_ids[0] == 0);
}

static void test_whole_gpus(void) {
  rd_res_ledger l = node(8, 3);
  rd_resources quarter = gpu_req(2500), one = gpu_req(RD_RES_UNIT), two = gpu_req(2 * RD_RES_UNIT);
  rd_res_grant f, w;
  CHECK(rd_res_acquire(&l, &quarter, &f) == 0 && f.gpu_ids[0] == 0);
  CHECK(rd_res_acquire(&l, &one, &w) == 0);
  CHECK(w.ngpus == 1 && w.gpu_ids[0] == 1 && w.gpu_share[0] == RD_RES_UNIT);   /* skips GPU 0 */
  rd_res_release(&l, &w);
  CHECK(rd_res_acquire(&l, &two, &w) == 0);
  CHECK(w.ngpus == 2 && w.gpu_ids[0] == 1 && w.gpu_ids[1] == 2);
  char buf[RD_RES_VISIBLE_DEVICES_MAX];
  rd_res_grant_visible_devices(&w, buf, sizeof buf);
  CHECK(strcmp(buf, "1,2") == 0);
  rd_res_grant_visible_devices(&f, buf, sizeof buf);
  CHECK(strcmp(buf, "0") == 0);

  /* 2 whole GPUs on a 2-GPU node with one partly used: waits, not infeasible. */
  rd_res_ledger m = node(8, 2);
  rd_res_grant p, q;
  CHECK(rd_res_acquire(&m, &quarter, &p) == 0);
  CHECK(m.avail.gpu == 17500 && m.gpu_avail[0] == 7500);
  CHECK(rd_res_acquire(&m, &two, &q) == RD_EAGAIN);
  CHECK(rd_res_feasible(&m, &two) == 1);
  rd_res_release(&m, &p);
  CHECK(rd_res_acquire(&m, &two, &q) == 0 && q.ngpus == 2);
  rd_res_grant_visible_devices(&q, buf, sizeof buf);
  CHECK(strcmp(buf, "0,1") == 0);
  /* Too small a buffer gets "", never a truncated id list. */
  char small[3];
  rd_res_grant_visible_devices(&q, small, sizeof small);
  CHECK(strcmp(small, "") == 0);

  rd_resources three = gpu_req(3 * RD_RES_UNIT);
  CHECK(rd_res_acquire(&m, &three, &q) == RD_EINFEASIBLE);
  CHECK(rd_res_feasible(&m, &three) == 0);
}

static void test_infeasible(void) {
  rd_res_ledger l = node(4, 0);
  rd_resources q = gpu_req(2500);
  rd_res_grant g;
  CHECK(rd_res_acquire(&l, &q, &g) == RD_EINFEASIBLE);
  q = gpu_req(RD_RES_UNIT);
  CHECK(rd_res_acquire(&l, &q, &g) == RD_EINFEASIBLE);

  q = gpu_req(0);
  CHECK(rd_res_set_custom(&q, "tpu", RD_RES_UNIT) == 0);
  CHECK(rd_res_feasible(&l, &q) == 0);
  CHECK(rd_res_acquire(&l, &q, &g) == RD_EINFEASIBLE);
  CHECK(rd_res_set_custom(&q, "tpu", 0) == 0);   /* asks for nothing */
  CHECK(rd_res_acquire(&l, &q, &g) == 0);
  rd_res_release(&l, &g);

  q = gpu_req(0);
  q.cpu = 5 * RD_RES_UNIT;
  CHECK(rd_res_acquire(&l, &q, &g) == RD_EINFEASIBLE);
  q.cpu = 0;
  q.memory = (int64_t)1 << 31;
  CHECK(rd_res_acquire(&l, &q, &g) == RD_EINFEASIBLE);

  /* Custom resource the node has: more than total is infeasible, more than
   * what is free now waits. */
  rd_resources t;
  memset(&t, 0, sizeof t);
  t.cpu = 4 * RD_RES_UNIT;
  CHECK(rd_res_set_custom(&t, "tpu", 2 * RD_RES_UNIT) == 0);
  rd_res_ledger c;
  rd_res_ledger_init(&c, &t);
  rd_resources r = gpu_req(0);
  CHECK(rd_res_set_custom(&r, "tpu", 3 * RD_RES_UNIT) == 0);
  CHECK(rd_res_acquire(&c, &r, &g) == RD_EINFEASIBLE);
  CHECK(rd_res_set_custom(&r, "tpu", 2 * RD_RES_UNIT) == 0);
  CHECK(rd_res_acquire(&c, &r, &g) == 0);
  CHECK(rd_res_get_custom(&c.avail, "tpu") == 0);
  rd_res_grant h;
  CHECK(rd_res_acquire(&c, &r, &h) == RD_EAGAIN);
  rd_res_release(&c, &g);
  CHECK(rd_res_get_custom(&c.avail, "tpu") == 2 * RD_RES_UNIT);

  /* All or nothing: CPU fits, GPU does not, so nothing is taken. */
  rd_res_ledger d = node(4, 1);
  rd_resources whole = gpu_req(RD_RES_UNIT);
  CHECK(rd_res_acquire(&d, &whole, &g) == 0);
  rd_resources both = gpu_req(2500);
  both.cpu = RD_RES_UNIT;
  CHECK(rd_res_acquire(&d, &both, &h) == RD_EAGAIN);
  CHECK(d.avail.cpu == 4 * RD_RES_UNIT);

  /* Invalid request. */
  rd_resources bad = gpu_req(15000);
  CHECK(rd_res_acquire(&d, &bad, &h) == RD_EINVAL);

  /* No GPU in the grant: empty visible devices. */
  rd_resources cpu_only = gpu_req(0);
  cpu_only.cpu = RD_RES_UNIT;
  CHECK(rd_res_acquire(&d, &cpu_only, &h) == 0 && h.ngpus == 0);
  char buf[RD_RES_VISIBLE_DEVICES_MAX] = "junk";
  rd_res_grant_visible_devices(&h, buf, sizeof buf);
  CHECK(strcmp(buf, "") == 0);
}

static void test_ledger_init_rounds_gpus(void) {
  rd_resources t;
  memset(&t, 0, sizeof t);
  t.gpu = 25000;                               /* 2.5 GPUs: two usable */
  rd_res_ledger l;
  rd_res_ledger_init(&l, &t);
  CHECK(l.ngpus == 2 && l.total.gpu == 2 * RD_RES_UNIT && l.avail.gpu == 2 * RD_RES_UNIT);
  t.gpu = 100 * RD_RES_UNIT;                    /* capped */
  rd_res_ledger_init(&l, &t);
  CHECK(l.ngpus == RD_RES_MAX_GPUS);
  rd_resources all = gpu_req(RD_RES_MAX_GPUS * (int64_t)RD_RES_UNIT);
  rd_res_grant g;
  CHECK(rd_res_acquire(&l, &all, &g) == 0 && g.ngpus == RD_RES_MAX_GPUS);
  char buf[RD_RES_VISIBLE_DEVICES_MAX];
  rd_res_grant_visible_devices(&g, buf, sizeof buf);
  CHECK(strcmp(buf, "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15") == 0);
}

/* A placement-group bundle: a ledger carved out of a grant hands out only
 * what the grant holds, names the parent's devices, and gives everything
 * back so the parent can take the bundle's grant back whole. */
static void test_bundle_ledger(void) {
  rd_res_ledger n = node(8, 2);
  rd_resources half = gpu_req(5000), whole = gpu_req(RD_RES_UNIT);
  rd_res_grant other, bg;
  CHECK(rd_res_acquire(&n, &half, &other) == 0 && other.gpu_ids[0] == 0);
  /* bundle {CPU 2, GPU 1.5}: not possible as a share; whole 1 GPU + 2 CPUs */
  rd_resources b = whole;
  b.cpu = 2 * RD_RES_UNIT;
  CHECK(rd_res_set_custom(&b, "disk", 3 * RD_RES_UNIT) == 0 && rd_res_feasible(&n, &b) == 0);  /* no "disk" here */
  b.ncustom = 0;
  CHECK(rd_res_acquire(&n, &b, &bg) == 0 && bg.ngpus == 1 && bg.gpu_ids[0] == 1);
  rd_res_ledger bl;
  rd_res_ledger_init_grant(&bl, &bg);
  CHECK(bl.total.cpu == 2 * RD_RES_UNIT && bl.ngpus == 1 && bl.gpu_dev[0] == 1);
  rd_resources q = gpu_req(2500), big = gpu_req(2 * RD_RES_UNIT), cpu3 = gpu_req(0);
  cpu3.cpu = 3 * RD_RES_UNIT;
  CHECK(rd_res_feasible(&bl, &big) == 0 && rd_res_feasible(&bl, &cpu3) == 0);
  rd_res_grant g[4];
  for (int i = 0; i < 4; i++) CHECK(rd_res_acquire(&bl, &q, &g[i]) == 0 && g[i].gpu_ids[0] == 1);
  rd_res_grant extra;
  CHECK(rd_res_acquire(&bl, &q, &extra) == RD_EAGAIN);
  char buf[RD_RES_VISIBLE_DEVICES_MAX];
  rd_res_grant_visible_devices(&g[2], buf, sizeof buf);
  CHECK(strcmp(buf, "1") == 0);
  for (int i = 0; i < 4; i++) rd_res_release(&bl, &g[i]);
  CHECK(bl.gpu_avail[0] == RD_RES_UNIT && bl.avail.gpu == RD_RES_UNIT);
  rd_res_release(&n, &bg);
  rd_res_release(&n, &other);
  CHECK(n.avail.gpu == 2 * RD_RES_UNIT && n.avail.cpu == 8 * RD_RES_UNIT);

  /* a fractional bundle {GPU 0.5}: a 0.25 fits twice, a whole GPU never */
  CHECK(rd_res_acquire(&n, &half, &other) == 0);
  CHECK(rd_res_acquire(&n, &half, &bg) == 0 && bg.gpu_ids[0] == 0);   /* best fit: same GPU */
  rd_res_ledger_init_grant(&bl, &bg);
  CHECK(rd_res_feasible(&bl, &whole) == 0 && rd_res_feasible(&bl, &q) == 1);
  CHECK(rd_res_acquire(&bl, &whole, &g[0]) == RD_EINFEASIBLE);
  CHECK(rd_res_acquire(&bl, &q, &g[0]) == 0 && rd_res_acquire(&bl, &q, &g[1]) == 0);
  CHECK(rd_res_acquire(&bl, &q, &g[2]) == RD_EAGAIN);
  rd_res_release(&bl, &g[0]);
  rd_res_release(&bl, &g[1]);
  CHECK(bl.gpu_avail[0] == 5000);
  rd_res_release(&n, &bg);
  rd_res_release(&n, &other);
  CHECK(n.gpu_avail[0] == RD_RES_UNIT);
}

int main(void) {
  test_two_gpus_pack_in_order();
  test_one_gpu_waits_then_fits();
  test_mixed_fractions_share_one_gpu();
  test_whole_gpus();
  test_infeasible();
  test_ledger_init_rounds_gpus();
  test_bundle_ledger();
  printf("test_gpu_packing: ok\n");
  return 0;
}
