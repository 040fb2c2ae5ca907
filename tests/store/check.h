/* tests/store/check.h - the tiny CHECK macro shared by the store tests.
 *
 * A failed check prints file:line and the expression and exits 1, so CTest
 * reports the test as failed; no test framework, no hidden state. */
#ifndef RD_TESTS_STORE_CHECK_H
#define RD_TESTS_STORE_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                         \
  do {                                                                      \
    if (!(cond)) {                                                          \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      exit(1);                                                              \
    }                                                                       \
  } while (0)

#define CHECK_EQ(a, b)                                                      \
  do {                                                                      \
    long long va_ = (long long)(a), vb_ = (long long)(b);                   \
    if (va_ != vb_) {                                                       \
      fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%lld vs %lld)\n",     \
              __FILE__, __LINE__, #a, #b, va_, vb_);                        \
      exit(1);                                                              \
    }                                                                       \
  } while (0)

#endif
