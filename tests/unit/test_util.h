/* Helpers shared by the unit tests. */
#ifndef SG_TEST_UTIL_H
#define SG_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the includes above first. */
#include <cmocka.h>

#include "sgrt/sgrt.h"

/* Asserts that `call` returned `expected` and, for an error, that the last
 * error message contains `needle` (NULL: any non-empty message). The last
 * error message must never contain "(null)" (a NULL name printed with %s). */
#define assert_status(call, expected, needle) \
  sg_test_assert_status((call), (expected), (needle), __FILE__, __LINE__)
void sg_test_assert_status(sg_status got, sg_status expected, const char *needle, const char *file, int line);

/* Reads a whole file into a malloc'd buffer; fails the test on error. */
unsigned char *sg_test_read_file(const char *path, size_t *size);
/* Path of a file under tests/data. */
const char *sg_test_data(const char *name);
/* A TCP port on 127.0.0.1 that was free a moment ago (bound, then released). */
int sg_test_free_port(void);

/* Deterministic pseudo-random floats in [-1, 1) for initializers. */
void sg_test_fill(float *p, size_t n, uint64_t seed);

#endif
