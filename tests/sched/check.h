/* tests/sched/check.h - the assertion and comparison the scheduler tests use.
 *
 * CHECK prints file:line and the failed expression, then exits 1 so CTest
 * sees the failure.  Tests only; never include it from library code. */
#ifndef RD_TESTS_SCHED_CHECK_H
#define RD_TESTS_SCHED_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resources.h"

#include "../check.h"

/* Field by field, so struct padding never decides a test. */
static inline int res_same(const rd_resources *a, const rd_resources *b) {
  if (a->cpu != b->cpu || a->gpu != b->gpu || a->memory != b->memory || a->ncustom != b->ncustom)
    return 0;
  for (int i = 0; i < a->ncustom; i++)
    if (a->custom[i].amount != b->custom[i].amount ||
        strncmp(a->custom[i].name, b->custom[i].name, RD_RES_NAME_MAX) != 0)
      return 0;
  return 1;
}

static inline int ledger_same(const rd_res_ledger *a, const rd_res_ledger *b) {
  if (!res_same(&a->total, &b->total) || !res_same(&a->avail, &b->avail) || a->ngpus != b->ngpus)
    return 0;
  for (int i = 0; i < a->ngpus; i++)
    if (a->gpu_avail[i] != b->gpu_avail[i]) return 0;
  return 1;
}

#endif
