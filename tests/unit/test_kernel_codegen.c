/* Generated kernels (backend/kernel_ir.h, cpu_emit.c, cpu_jit.c): kernels
 * built in the IR, emitted as C, compiled by the system compiler, loaded and
 * run over ranges split as threads would split them; every output compared
 * with the same formula written out here in C (bitwise where the operations
 * are IEEE arithmetic or sgk_math.h's exp, erf, tanh and sigmoid, whose
 * accuracy test_sgk_math.c checks; within 2 ulp where they call libm), on random inputs
 * with broadcasting, sizes 1, 7 and 1009, and NaN, infinities and -0.
 * Then what must fail: ill-typed IR, a missing or failing compiler, C that
 * does not compile — each an error naming what went wrong — and that
 * loading generated code leaves the floating-point environment (MXCSR)
 * alone. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/sgk_math.h"
#include "test_util.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next32(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (uint32_t)(rng >> 16);
}
static float uniform(float lo, float hi) { return lo + (hi - lo) * (float)(next32() >> 8) / 16777216.0f; }

/* Fills x with random values, every 13th a special one. */
static void fill(float *x, int64_t n, bool specials) {
  static const float special[] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f, 1e-40f};
  for (int64_t i = 0; i < n; i++) {
    x[i] = uniform(-3, 3);
    if (specials && i % 13 == 5) x[i] = special[(i / 13) % 6];
  }
}

/* Emits, compiles and loads the kernels; returns the library. */
static sg__jit_lib *build(sg__kir_kernel **ks, int n) {
  for (int i = 0; i < n; i++) assert_status(sg__kir_finish(ks[i]), SG_OK, NULL);
  char *src;
  size_t len;
  assert_status(sg__cpu_emit_c((const sg__kir_kernel *const *)ks, n, &src, &len), SG_OK, NULL);
  assert_int_equal(strlen(src), len);
  sg__jit_lib *lib = NULL;
  assert_status(sg__jit_build(src, len, &lib), SG_OK, NULL);
  sg__free(src);
  return lib;
}

/* Runs fn over [0, n) in three uneven pieces, as threads would. */
static void run(sg__jit_kernel_fn fn, int64_t n, const void *const *in, void *const *out) {
  int64_t a = n / 3, b = n - n / 5;
  fn(0, a, in, out);
  fn(a, b, in, out);
  fn(b, n, in, out);
}

static bool same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0 || (isnan(a) && isnan(b)); }
static bool close_ulp(float a, float b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  if (isinf(a) || isinf(b)) return a == b;
  float ulp = nextafterf(fabsf(b), INFINITY) - fabsf(b);
  return fabsf(a - b) <= 2 * ulp;
}

/* y = (a + bias) * s - r / e over [rows, cols]: a and e contiguous, bias
 * per column, s a scalar, r per row; and z = max(a, e), w = min(a, e). */
static void test_broadcast_arith(void **state) {
  (void)state;
  const int64_t sizes[][2] = {{1, 1}, {1, 7}, {7, 1}, {3, 1009}, {1009, 7}};
  for (size_t t = 0; t < sizeof sizes / sizeof *sizes; t++) {
    int64_t rows = sizes[t][0], cols = sizes[t][1], n = rows * cols, dims[2] = {rows, cols};
    sg__kir_kernel k;
    sg__kir_init(&k, "arith", 2, dims);
    int64_t per_col[2] = {0, 1}, per_row[2] = {1, 0}, scalar[2] = {0, 0};
    int ia = sg__kir_input_add(&k, SG_F32, NULL), ib = sg__kir_input_add(&k, SG_F32, per_col);
    int is = sg__kir_input_add(&k, SG_F32, scalar), ir = sg__kir_input_add(&k, SG_F32, per_row);
    int ie = sg__kir_input_add(&k, SG_F32, NULL);
    int a = sg__kir_load(&k, ia), b = sg__kir_load(&k, ib), s = sg__kir_load(&k, is),
        r = sg__kir_load(&k, ir), e = sg__kir_load(&k, ie);
    int y = sg__kir_binary(&k, SG__KIR_SUB,
                           sg__kir_binary(&k, SG__KIR_MUL, sg__kir_binary(&k, SG__KIR_ADD, a, b), s),
                           sg__kir_binary(&k, SG__KIR_DIV, r, e));
    assert_int_equal(sg__kir_store(&k, y), 0);
    assert_int_equal(sg__kir_store(&k, sg__kir_binary(&k, SG__KIR_MAX, a, e)), 1);
    assert_int_equal(sg__kir_store(&k, sg__kir_binary(&k, SG__KIR_MIN, a, e)), 2);
    assert_true(sg__kir_input_contiguous(&k, ia) && sg__kir_input_scalar(&k, is));
    sg__kir_kernel *ks[] = {&k};
    sg__jit_lib *lib = build(ks, 1);
    sg__jit_kernel_fn fn = sg__jit_symbol(lib, "arith");
    assert_non_null(fn);
    float *A = malloc(n * 4), *B = malloc(cols * 4), S[1], *R = malloc(rows * 4), *E = malloc(n * 4);
    float *Y = malloc(n * 4), *Z = malloc(n * 4), *W = malloc(n * 4);
    fill(A, n, true), fill(B, cols, true), fill(S, 1, false), fill(R, rows, true), fill(E, n, true);
    const void *in[] = {A, B, S, R, E};
    void *out[] = {Y, Z, W};
    run(fn, n, in, out);
    for (int64_t i = 0; i < n; i++) {
      int64_t row = i / cols, col = i % cols;
      float want = (A[i] + B[col]) * S[0] - R[row] / E[i];
      float mx = isnan(A[i]) || isnan(E[i]) ? NAN : A[i] > E[i] ? A[i] : E[i];
      float mn = isnan(A[i]) || isnan(E[i]) ? NAN : A[i] < E[i] ? A[i] : E[i];
      if (!same_bits(Y[i], want) || !same_bits(Z[i], mx) || !same_bits(W[i], mn))
        fail_msg("[%lld x %lld] element %lld: y %g want %g, max %g want %g, min %g want %g", (long long)rows,
                 (long long)cols, (long long)i, Y[i], want, Z[i], mx, W[i], mn);
    }
    free(A), free(B), free(R), free(E), free(Y), free(Z), free(W);
    sg__jit_close(lib);
    sg__kir_free(&k);
  }
}

/* Transcendental chains: exact GELU 0.5 x (1 + erf(x / sqrt 2)), tanh,
 * sigmoid, exp, log, sqrt, 1/x, |x|, -x, pow; in place over the input. */
static void test_unary_chains(void **state) {
  (void)state;
  const int64_t n = 1009;
  sg__kir_kernel k;
  sg__kir_init(&k, "chains", 1, &n);
  int x = sg__kir_load(&k, sg__kir_input_add(&k, SG_F32, NULL));
  int half = sg__kir_const(&k, SG_F32, 0.5), one = sg__kir_const(&k, SG_F32, 1.0);
  int rs2 = sg__kir_const(&k, SG_F32, (double)(float)M_SQRT1_2);
  int gelu =
      sg__kir_binary(&k, SG__KIR_MUL, sg__kir_binary(&k, SG__KIR_MUL, half, x),
                     sg__kir_binary(&k, SG__KIR_ADD, one,
                                    sg__kir_unary(&k, SG__KIR_ERF, sg__kir_binary(&k, SG__KIR_MUL, x, rs2))));
  int y2 = sg__kir_binary(&k, SG__KIR_ADD, sg__kir_unary(&k, SG__KIR_TANH, x),
                          sg__kir_unary(&k, SG__KIR_SIGMOID, x));
  int ax = sg__kir_unary(&k, SG__KIR_ABS, x);
  int y3 =
      sg__kir_binary(&k, SG__KIR_SUB, sg__kir_unary(&k, SG__KIR_LOG, sg__kir_unary(&k, SG__KIR_SQRT, ax)),
                     sg__kir_unary(&k, SG__KIR_EXP, sg__kir_unary(&k, SG__KIR_NEG, x)));
  int y4 = sg__kir_binary(&k, SG__KIR_POW, ax, sg__kir_const(&k, SG_F32, 1.5));
  int y5 = sg__kir_unary(&k, SG__KIR_RECIP, x);
  sg__kir_store(&k, gelu); /* output 0 is written over the input */
  assert_int_equal(sg__kir_set_inplace(&k, 0, 0), 0);
  sg__kir_store(&k, y2), sg__kir_store(&k, y3), sg__kir_store(&k, y4), sg__kir_store(&k, y5);
  sg__kir_kernel *ks[] = {&k};
  sg__jit_lib *lib = build(ks, 1);
  sg__jit_kernel_fn fn = sg__jit_symbol(lib, "chains");
  float X[1009], X0[1009], Y2[1009], Y3[1009], Y4[1009], Y5[1009];
  fill(X, n, true);
  memcpy(X0, X, sizeof X);
  const void *in[] = {X};
  void *out[] = {X, Y2, Y3, Y4, Y5};
  run(fn, n, in, out);
  for (int64_t i = 0; i < n; i++) {
    float v = X0[i];
    float want[5] = {0.5f * v * (1.0f + sgk_erff(v * (float)M_SQRT1_2)), sgk_tanhf(v) + sgk_sigmoidf(v),
                     logf(sqrtf(fabsf(v))) - sgk_expf(-v), powf(fabsf(v), 1.5f), 1.0f / v};
    float got[5] = {X[i], Y2[i], Y3[i], Y4[i], Y5[i]};
    for (int o = 0; o < 5; o++)
      if (o < 2 ? memcmp(&got[o], &want[o], sizeof(float)) != 0 && !(isnan(got[o]) && isnan(want[o]))
                : !close_ulp(got[o], want[o]))
        fail_msg("output %d at x = %a: %a, want %a", o, (double)v, got[o], want[o]);
  }
  sg__jit_close(lib);
  sg__kir_free(&k);
}

/* Integers wrap, divide without undefined behaviour; comparisons, select
 * and casts (f32 -> int: 0 for NaN and out of range; i64 -> i32 wraps). */
static void test_integers_casts_select(void **state) {
  (void)state;
  const int64_t n = 7;
  sg__kir_kernel k;
  sg__kir_init(&k, "ints", 1, &n);
  int a = sg__kir_load(&k, sg__kir_input_add(&k, SG_I32, NULL));
  int b = sg__kir_load(&k, sg__kir_input_add(&k, SG_I32, NULL));
  int f = sg__kir_load(&k, sg__kir_input_add(&k, SG_F32, NULL));
  int l = sg__kir_load(&k, sg__kir_input_add(&k, SG_I64, NULL));
  sg__kir_store(&k, sg__kir_binary(&k, SG__KIR_ADD, a, b));
  sg__kir_store(&k, sg__kir_binary(&k, SG__KIR_MUL, a, b));
  sg__kir_store(&k, sg__kir_binary(&k, SG__KIR_DIV, a, b));
  sg__kir_store(&k, sg__kir_unary(&k, SG__KIR_NEG, a));
  sg__kir_store(&k, sg__kir_cast(&k, SG_I32, f));
  sg__kir_store(&k, sg__kir_cast(&k, SG_I32, l));
  int lt = sg__kir_binary(&k, SG__KIR_LT, a, b);
  sg__kir_store(&k, sg__kir_select(&k, lt, f, sg__kir_cast(&k, SG_F32, a)));
  sg__kir_store(
      &k, sg__kir_binary(&k, SG__KIR_OR, lt, sg__kir_unary(&k, SG__KIR_NOT, sg__kir_cast(&k, SG_BOOL, b))));
  sg__kir_kernel *ks[] = {&k};
  sg__jit_lib *lib = build(ks, 1);
  sg__jit_kernel_fn fn = sg__jit_symbol(lib, "ints");
  int32_t A[7] = {INT32_MAX, INT32_MIN, 7, -7, 5, 0, 3}, B[7] = {1, -1, 0, 2, -3, 0, 4};
  float F[7] = {NAN, INFINITY, 3e9f, -2.9f, 2.9f, -0.0f, 1e10f};
  int64_t L[7] = {INT64_MAX, INT64_MIN, 1ll << 32, (1ll << 32) + 5, -1, 0, 0x180000000ll};
  int32_t add[7], mul[7], dv[7], neg[7], fi[7], li[7];
  float sel[7];
  uint8_t both[7];
  const void *in[] = {A, B, F, L};
  void *out[] = {add, mul, dv, neg, fi, li, sel, both};
  run(fn, n, in, out);
  const int32_t want_add[7] = {INT32_MIN, INT32_MAX, 7, -5, 2, 0, 7};
  const int32_t want_mul[7] = {INT32_MAX, INT32_MIN, 0, -14, -15, 0, 12};
  const int32_t want_div[7] = {INT32_MAX, INT32_MIN, 0, -3, -1, 0, 0};
  const int32_t want_neg[7] = {-INT32_MAX, INT32_MIN, -7, 7, -5, 0, -3};
  const int32_t want_fi[7] = {0, 0, 0, -2, 2, 0, 0};
  const int32_t want_li[7] = {-1, 0, 0, 5, -1, 0, INT32_MIN};
  const uint8_t want_both[7] = {0, 1, 1, 1, 0, 1, 1}; /* a < b or b == 0 */
  assert_memory_equal(add, want_add, sizeof add);
  assert_memory_equal(mul, want_mul, sizeof mul);
  assert_memory_equal(dv, want_div, sizeof dv);
  assert_memory_equal(neg, want_neg, sizeof neg);
  assert_memory_equal(fi, want_fi, sizeof fi);
  assert_memory_equal(li, want_li, sizeof li);
  assert_memory_equal(both, want_both, sizeof both);
  for (int i = 0; i < 7; i++) {
    float want = A[i] < B[i] ? F[i] : (float)A[i];
    assert_true(same_bits(sel[i], want));
  }
  sg__jit_close(lib);
  sg__kir_free(&k);
}

/* Two kernels in one translation unit, each found by its name; a zero-size
 * iteration space; exact constants (hexadecimal floats, infinities, NaN). */
static void test_two_kernels_constants(void **state) {
  (void)state;
  int64_t n = 3, zero = 0;
  sg__kir_kernel k1, k2, k3;
  sg__kir_init(&k1, "consts", 1, &n);
  int x = sg__kir_load(&k1, sg__kir_input_add(&k1, SG_F32, NULL));
  sg__kir_store(&k1, sg__kir_binary(&k1, SG__KIR_ADD, x, sg__kir_const(&k1, SG_F32, 0.1)));
  sg__kir_store(&k1, sg__kir_binary(&k1, SG__KIR_MIN, x, sg__kir_const(&k1, SG_F32, -INFINITY)));
  sg__kir_store(&k1, sg__kir_binary(&k1, SG__KIR_ADD, x, sg__kir_const(&k1, SG_F32, NAN)));
  sg__kir_store(&k1, sg__kir_const(&k1, SG_I64, -9223372036854775808.0));
  sg__kir_init(&k2, "empty", 1, &zero);
  sg__kir_store(&k2, sg__kir_const(&k2, SG_F32, 1));
  sg__kir_init(&k3, "scalar0d", 0, NULL);
  sg__kir_store(&k3,
                sg__kir_unary(&k3, SG__KIR_NEG, sg__kir_load(&k3, sg__kir_input_add(&k3, SG_F32, NULL))));
  sg__kir_kernel *ks[] = {&k1, &k2, &k3};
  sg__jit_lib *lib = build(ks, 3);
  float X[3] = {1, -2, 3}, P[3], M[3], Q[3];
  int64_t C[3];
  const void *in[] = {X};
  void *out[] = {P, M, Q, C};
  run(sg__jit_symbol(lib, "consts"), n, in, out);
  for (int i = 0; i < 3; i++) {
    assert_true(same_bits(P[i], X[i] + 0.1f));
    assert_true(M[i] == -INFINITY);
    assert_true(isnan(Q[i]));
    assert_true(C[i] == INT64_MIN);
  }
  float untouched = 42;
  void *out2[] = {&untouched};
  sg__jit_symbol(lib, "empty")(0, 0, NULL, out2);
  assert_true(untouched == 42);
  float s = 2.5f, r = 0;
  const void *in3[] = {&s};
  void *out3[] = {&r};
  sg__jit_symbol(lib, "scalar0d")(0, 1, in3, out3);
  assert_true(r == -2.5f);
  assert_null(sg__jit_symbol(lib, "nosuch"));
  assert_int_equal(sg_last_error()[0] != '\0', 1);
  assert_non_null(strstr(sg_last_error(), "no kernel 'nosuch'"));
  sg__jit_close(lib);
  sg__kir_free(&k1), sg__kir_free(&k2), sg__kir_free(&k3);
}

/* Ill-typed or ill-formed IR is refused with the kernel's name and why;
 * the first error sticks. */
static void test_builder_errors(void **state) {
  (void)state;
  int64_t n = 4;
  sg__kir_kernel k;
  sg__kir_init(&k, "bad", 1, &n);
  int f = sg__kir_load(&k, sg__kir_input_add(&k, SG_F32, NULL));
  int i = sg__kir_load(&k, sg__kir_input_add(&k, SG_I32, NULL));
  assert_int_equal(sg__kir_binary(&k, SG__KIR_ADD, f, i), -1);
  assert_non_null(strstr(sg_last_error(), "kernel 'bad'"));
  assert_non_null(strstr(sg_last_error(), "add of two dtypes"));
  assert_int_equal(sg__kir_unary(&k, SG__KIR_NEG, f), -1); /* sticky */
  assert_status(sg__kir_finish(&k), SG_ERR_INVALID_ARG, "add of two dtypes");
  sg__kir_free(&k);

  sg__kir_init(&k, "tr", 1, &n);
  int x = sg__kir_load(&k, sg__kir_input_add(&k, SG_I32, NULL));
  assert_int_equal(sg__kir_unary(&k, SG__KIR_EXP, x), -1);
  assert_non_null(strstr(sg_last_error(), "exp is f32 only"));
  sg__kir_free(&k);
  sg__kir_init(&k, "fwd", 1, &n);
  assert_int_equal(sg__kir_unary(&k, SG__KIR_NEG, 5), -1);
  assert_non_null(strstr(sg_last_error(), "not an earlier value"));
  sg__kir_free(&k);
  sg__kir_init(&k, "cst", 1, &n);
  assert_int_equal(sg__kir_const(&k, SG_I32, 0.5), -1);
  assert_non_null(strstr(sg_last_error(), "does not fit"));
  sg__kir_free(&k);
  sg__kir_init(&k, "noout", 1, &n);
  sg__kir_load(&k, sg__kir_input_add(&k, SG_F32, NULL));
  assert_status(sg__kir_finish(&k), SG_ERR_INVALID_ARG, "no output");
  sg__kir_free(&k);
  sg__kir_init(&k, "1bad name", 1, &n);
  assert_status(sg__kir_finish(&k), SG_ERR_INVALID_ARG, "not a C identifier");
  sg__kir_free(&k);
  int64_t huge[3] = {1ll << 40, 1ll << 40, 1};
  sg__kir_init(&k, "huge", 3, huge);
  assert_status(sg__kir_finish(&k), SG_ERR_RANGE, "overflows");
  sg__kir_free(&k);
  /* The emitter refuses an unfinished kernel and two kernels of one name. */
  sg__kir_kernel a, b;
  sg__kir_init(&a, "twin", 1, &n);
  sg__kir_store(&a, sg__kir_const(&a, SG_F32, 1));
  sg__kir_init(&b, "twin", 1, &n);
  sg__kir_store(&b, sg__kir_const(&b, SG_F32, 2));
  const sg__kir_kernel *two[] = {&a, &b};
  char *src = NULL;
  size_t len;
  assert_status(sg__cpu_emit_c(two, 2, &src, &len), SG_ERR_DUPLICATE, "two kernels are named 'twin'");
  assert_null(src);
  sg__kir_free(&a), sg__kir_free(&b);
}

/* A missing compiler, a failing one and C that does not compile: each
 * SG_ERR_COMPILER naming the command and what it said. */
static void test_compiler_failures(void **state) {
  (void)state;
  const char *good = "int sgk_x(void) { return 1; }\n";
  sg__jit_lib *lib = (sg__jit_lib *)&lib;
  setenv("SG_CC", "/nonexistent/sgrt-cc", 1);
  assert_status(sg__jit_build(good, strlen(good), &lib), SG_ERR_COMPILER,
                "'/nonexistent/sgrt-cc' could not be started");
  assert_null(lib);
  setenv("SG_CC", "false", 1);
  assert_status(sg__jit_build(good, strlen(good), &lib), SG_ERR_COMPILER, "exited with status 1");
  unsetenv("SG_CC");
  const char *bad = "this is not C;\n";
  assert_status(sg__jit_build(bad, strlen(bad), &lib), SG_ERR_COMPILER, "error");
  assert_non_null(strstr(sg_last_error(), "-ffp-contract=off")); /* the command is named */
  assert_null(strstr(sg__jit_flags(), "fast-math"));
}

/* Loading generated code leaves flush-to-zero and denormals-are-zero off. */
static void test_mxcsr_unchanged(void **state) {
  (void)state;
#if defined(__x86_64__)
  unsigned before = _mm_getcsr();
  int64_t n = 1;
  sg__kir_kernel k;
  sg__kir_init(&k, "tiny", 1, &n);
  int x = sg__kir_load(&k, sg__kir_input_add(&k, SG_F32, NULL));
  sg__kir_store(&k, sg__kir_binary(&k, SG__KIR_MUL, x, sg__kir_const(&k, SG_F32, 0.5)));
  sg__kir_kernel *ks[] = {&k};
  sg__jit_lib *lib = build(ks, 1);
  assert_int_equal(_mm_getcsr(), before);
  float d = 1e-38f, r = 0;
  volatile float half = 0.5f;
  const void *in[] = {&d};
  void *out[] = {&r};
  sg__jit_symbol(lib, "tiny")(0, 1, in, out);
  assert_true(r == d * half && r != 0 && fpclassify(r) == FP_SUBNORMAL); /* not flushed to zero */
  sg__jit_close(lib);
  sg__kir_free(&k);
#else
  skip();
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_broadcast_arith),       cmocka_unit_test(test_unary_chains),
      cmocka_unit_test(test_integers_casts_select), cmocka_unit_test(test_two_kernels_constants),
      cmocka_unit_test(test_builder_errors),        cmocka_unit_test(test_compiler_failures),
      cmocka_unit_test(test_mxcsr_unchanged),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
