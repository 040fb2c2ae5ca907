/* tests/check.h - the assertions every C test uses, and the runner of the
 * test programs that hold several named cases (`prog NAME` runs one).
 *
 * A failed check prints file:line and the expression and exits 1, so CTest
 * reports the test as failed; no framework, no hidden state.  Tests only. */
#ifndef RD_TESTS_CHECK_H
#define RD_TESTS_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                             \
  do {                                                                          \
    if (!(cond)) {                                                              \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);  \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)

#define CHECK_EQ(a, b)                                                          \
  do {                                                                          \
    long long va_ = (long long)(a), vb_ = (long long)(b);                       \
    if (va_ != vb_) {                                                           \
      fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%lld vs %lld)\n",         \
              __FILE__, __LINE__, #a, #b, va_, vb_);                            \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)

typedef struct rd_test_case {
  const char *name;
  int (*fn)(void);
} rd_test_case;

/* main() of a program of named cases.  In a libraydist test the program is
 * re-executed as its workers, whose rd_init() never returns, so only the
 * driver ever prints "ok". */
static inline int rd_test_main(int argc, char **argv, const rd_test_case *cases, size_t n) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s NAME\n", argv[0]);
    return 2;
  }
  for (size_t i = 0; i < n; i++) {
    if (!strcmp(argv[1], cases[i].name)) {
      int r = cases[i].fn();
      if (r == 0) printf("%s: ok\n", argv[1]);
      return r;
    }
  }
  fprintf(stderr, "%s: unknown test %s\n", argv[0], argv[1]);
  return 2;
}
#define RD_TEST_MAIN(cases) \
  int main(int argc, char **argv) { return rd_test_main(argc, argv, cases, sizeof(cases) / sizeof(cases[0])); }

#endif
