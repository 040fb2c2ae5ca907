/* tests/store/check.h - the store tests use the shared assertions. */
#ifndef RD_TESTS_STORE_CHECK_H
#define RD_TESTS_STORE_CHECK_H
#include "../check.h"
#endif
