/* tests/sched/test_resources.c - fixed-point conversion, validation and
 * custom resources.  Asserts the exact fixed-point values and that every
 * invalid input is refused with RD_EINVAL and no side effect. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "raydist/error.h"
#include "resources.h"

static void test_from_double(void) {
  int64_t v = -7;
  CHECK(rd_res_from_double(0.25, &v) == 0 && v == 2500);
  CHECK(rd_res_from_double(0.0001, &v) == 0 && v == 1);
  CHECK(rd_res_from_double(0, &v) == 0 && v == 0);
  CHECK(rd_res_from_double(0.5, &v) == 0 && v == 5000);
  CHECK(rd_res_from_double(1, &v) == 0 && v == RD_RES_UNIT);
  CHECK(rd_res_from_double(2, &v) == 0 && v == 2 * RD_RES_UNIT);
  CHECK(rd_res_from_double(0.1, &v) == 0 && v == 1000);
  CHECK(rd_res_from_double(1.0 / 3, &v) == 0 && v == 3333);   /* nearest */
  CHECK(rd_res_from_double(0.00016, &v) == 0 && v == 2);

  v = 42;
  CHECK(rd_res_from_double(1.5, &v) == RD_EINVAL);
  CHECK(rd_res_from_double(-1, &v) == RD_EINVAL);
  CHECK(rd_res_from_double(-0.25, &v) == RD_EINVAL);
  CHECK(rd_res_from_double(NAN, &v) == RD_EINVAL);
  CHECK(rd_res_from_double(INFINITY, &v) == RD_EINVAL);
  CHECK(rd_res_from_double(-INFINITY, &v) == RD_EINVAL);
  CHECK(rd_res_from_double(3.00001, &v) == RD_EINVAL);
  CHECK(rd_res_from_double(1e-5, &v) == RD_EINVAL);   /* would round to 0 */
  CHECK(rd_res_from_double(1e300, &v) == RD_EINVAL);  /* overflows int64 */
  CHECK(v == 42);   /* untouched on error */
  CHECK(rd_res_from_double(1, NULL) == RD_EINVAL);

  CHECK(rd_res_to_double(2500) == 0.25);
  CHECK(rd_res_to_double(3 * RD_RES_UNIT) == 3.0);
}

static void test_validate(void) {
  rd_resources r;
  memset(&r, 0, sizeof r);
  CHECK(rd_res_validate(&r) == 0);
  r.cpu = 2500;
  r.gpu = 2 * RD_RES_UNIT;
  r.memory = 1 << 20;
  CHECK(rd_res_validate(&r) == 0);
  r.cpu = RD_RES_UNIT + 1;                 /* 1.0001 CPUs: not whole */
  CHECK(rd_res_validate(&r) == RD_EINVAL);
  r.cpu = -1;
  CHECK(rd_res_validate(&r) == RD_EINVAL);
  r.cpu = RD_RES_UNIT;
  r.gpu = 15000;
  CHECK(rd_res_validate(&r) == RD_EINVAL);
  r.gpu = 9999;
  CHECK(rd_res_validate(&r) == 0);
  r.memory = -1;
  CHECK(rd_res_validate(&r) == RD_EINVAL);
  r.memory = 0;
  r.ncustom = -1;
  CHECK(rd_res_validate(&r) == RD_EINVAL);
  r.ncustom = RD_RES_MAX_CUSTOM + 1;
  CHECK(rd_res_validate(&r) == RD_EINVAL);
  r.ncustom = 1;
  memset(r.custom[0].name, 0, RD_RES_NAME_MAX);
  CHECK(rd_res_validate(&r) == RD_EINVAL);   /* empty name */
  memset(r.custom[0].name, 'x', RD_RES_NAME_MAX);
  CHECK(rd_res_validate(&r) == RD_EINVAL);   /* not NUL-terminated */
  strcpy(r.custom[0].name, "tpu");
  r.custom[0].amount = 25000;
  CHECK(rd_res_validate(&r) == RD_EINVAL);   /* 2.5: not whole */
  r.custom[0].amount = 3 * RD_RES_UNIT;
  CHECK(rd_res_validate(&r) == 0);
  r.ncustom = 2;
  strcpy(r.custom[1].name, "tpu");
  r.custom[1].amount = 1;
  CHECK(rd_res_validate(&r) == RD_EINVAL);   /* duplicate name */
  strcpy(r.custom[1].name, "disk");
  CHECK(rd_res_validate(&r) == 0);
  CHECK(rd_res_validate(NULL) == RD_EINVAL);
}

static void test_custom(void) {
  rd_resources r;
  memset(&r, 0, sizeof r);
  CHECK(rd_res_is_empty(&r));
  CHECK(rd_res_set_custom(&r, "zero", 0) == 0);
  CHECK(rd_res_is_empty(&r));   /* a custom entry of amount 0 asks for nothing */
  memset(&r, 0, sizeof r);
  r.memory = 1;
  CHECK(!rd_res_is_empty(&r));
  memset(&r, 0, sizeof r);
  CHECK(rd_res_get_custom(&r, "tpu") == 0);
  CHECK(rd_res_set_custom(&r, "tpu", 2 * RD_RES_UNIT) == 0);
  CHECK(rd_res_set_custom(&r, "disk", 5000) == 0);
  CHECK(r.ncustom == 2);
  CHECK(rd_res_get_custom(&r, "tpu") == 2 * RD_RES_UNIT);
  CHECK(rd_res_get_custom(&r, "disk") == 5000);
  CHECK(rd_res_set_custom(&r, "tpu", RD_RES_UNIT) == 0);   /* replaces */
  CHECK(r.ncustom == 2 && rd_res_get_custom(&r, "tpu") == RD_RES_UNIT);
  CHECK(rd_res_validate(&r) == 0);
  CHECK(!rd_res_is_empty(&r));

  CHECK(rd_res_set_custom(&r, "", 1) == RD_EINVAL);
  CHECK(rd_res_set_custom(&r, NULL, 1) == RD_EINVAL);
  CHECK(rd_res_set_custom(&r, "neg", -1) == RD_EINVAL);
  CHECK(rd_res_set_custom(&r, "half", 15000) == RD_EINVAL);
  char longname[RD_RES_NAME_MAX + 1];
  memset(longname, 'a', RD_RES_NAME_MAX);
  longname[RD_RES_NAME_MAX] = '\0';
  CHECK(rd_res_set_custom(&r, longname, 1) == RD_EINVAL);
  longname[RD_RES_NAME_MAX - 1] = '\0';   /* 31 chars + NUL fits */
  CHECK(rd_res_set_custom(&r, longname, 1) == 0);
  CHECK(r.ncustom == 3);

  for (int i = r.ncustom; i < RD_RES_MAX_CUSTOM; i++) {
    char name[8] = "c0";
    name[1] = (char)('0' + i);
    CHECK(rd_res_set_custom(&r, name, 1) == 0);
  }
  CHECK(r.ncustom == RD_RES_MAX_CUSTOM);
  CHECK(rd_res_set_custom(&r, "onemore", 1) == RD_ENOMEM);
  CHECK(rd_res_set_custom(&r, "tpu", 0) == 0);   /* existing name still settable */
  CHECK(rd_res_validate(&r) == 0);

  /* Duplicate made by hand is refused by validate and acquire. */
  strcpy(r.custom[1].name, "tpu");
  CHECK(rd_res_validate(&r) == RD_EINVAL);
  rd_res_ledger l;
  rd_resources total;
  memset(&total, 0, sizeof total);
  rd_res_ledger_init(&l, &total);
  rd_res_grant g;
  CHECK(rd_res_acquire(&l, &r, &g) == RD_EINVAL);
  CHECK(rd_res_feasible(&l, &r) == 0);
}

/* A blocked holder lends its CPUs: others may take them, its return may
 * leave the node over its CPUs, and releases bring the ledger back whole.
 * GPUs stay held while lent. */
static void test_lend_cpu(void) {
  rd_resources total, one;
  memset(&total, 0, sizeof total);
  memset(&one, 0, sizeof one);
  total.cpu = 2 * RD_RES_UNIT;
  total.gpu = RD_RES_UNIT;
  one.cpu = RD_RES_UNIT;
  rd_res_ledger l;
  rd_res_ledger_init(&l, &total);
  rd_res_grant parent, other, child;
  rd_resources pg = one;
  pg.gpu = RD_RES_UNIT / 2;
  CHECK(rd_res_acquire(&l, &pg, &parent) == 0);
  CHECK(rd_res_acquire(&l, &one, &other) == 0);
  CHECK(rd_res_acquire(&l, &one, &child) == RD_EAGAIN);   /* full */
  rd_res_lend_cpu(&l, &parent);
  CHECK(l.avail.cpu == RD_RES_UNIT && l.avail.gpu == RD_RES_UNIT / 2);   /* the GPU share stays held */
  CHECK(rd_res_acquire(&l, &one, &child) == 0);            /* the child runs */
  rd_res_retake_cpu(&l, &parent);                          /* parent resumes first */
  CHECK(l.avail.cpu == -RD_RES_UNIT);
  rd_res_grant g;
  CHECK(rd_res_acquire(&l, &one, &g) == RD_EAGAIN);
  rd_res_release(&l, &child);
  rd_res_release(&l, &other);
  CHECK(l.avail.cpu == RD_RES_UNIT);
  rd_res_release(&l, &parent);
  CHECK(l.avail.cpu == total.cpu && l.avail.gpu == total.gpu);
}

int main(void) {
  test_from_double();
  test_validate();
  test_custom();
  test_lend_cpu();
  printf("test_resources: ok\n");
  return 0;
}
