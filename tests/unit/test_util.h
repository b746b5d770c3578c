/* Helpers shared by the unit tests. */
#ifndef SG_TEST_UTIL_H
#define SG_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
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

/* g (finalized) saved as .sgg bytes and loaded back: fails the test unless
 * the load succeeds and verifies and the two graphs hash the same, weights
 * included. The caller destroys the returned graph. */
sg_graph *sg_test_sgg_round_trip(const sg_graph *g);

/* Deterministic pseudo-random floats in [-1, 1) for initializers. */
void sg_test_fill(float *p, size_t n, uint64_t seed);

/* The same float, bit for bit (any NaN equals any NaN: kernels pin no NaN
 * payloads); within 2 ulp of `want` (infinities equal, NaN only to NaN). */
bool sg_test_same_bits(float got, float want);
bool sg_test_close_ulp(float got, float want);

/* A small MLP training graph (x [16,24], labels y, scalar lr; parameters
 * w1, b1, w2 without initializers): linear, + b1, then either a ReLU/
 * sigmoid residual trained with SGD (momentum 0.9, weight decay 1e-3) or,
 * `decomposed`, LayerNorm and GELU (erf) written out as elementwise ops and
 * means, trained with AdamW; cross-entropy "loss". Finalized. */
sg_graph *sg_test_mlp_training(bool decomposed);

/* The plan of g for the CPU backend as if its supports_op were `supports`
 * (a backend that lacks some kernels, as CUDA does), fusion on or off;
 * fails the test when it cannot be built. The caller frees *p with
 * sg__plan_free. */
struct sg__plan;
void sg_test_plan_with(const sg_graph *g, bool (*supports)(void *state, sg_op_kind kind), bool fuse,
                       struct sg__plan *p);

#endif
