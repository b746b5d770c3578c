/* Generated kernels (backend/kernel_ir.h, cpu_emit.c, cpu_jit.c): kernels
 * built in the IR, emitted as C, compiled by the system compiler, loaded and
 * run over ranges split as threads would split them; every output compared
 * with the same formula written out here in C (bitwise where the operations
 * are IEEE arithmetic or sgk_math.h's exp, erf, tanh and sigmoid, whose
 * accuracy test_sgk_math.c checks; within 2 ulp where they call libm), on random inputs
 * with broadcasting, sizes 1, 7 and 1009, and NaN, infinities and -0;
 * kernels that end in a sum against sums written out in their order; a
 * prologue (per-run parameters, a scalar state written back).
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
#include "backend/sgk_math.h"
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
      if (!sg_test_same_bits(Y[i], want) || !sg_test_same_bits(Z[i], mx) || !sg_test_same_bits(W[i], mn))
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
                : !sg_test_close_ulp(got[o], want[o]))
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
    assert_true(sg_test_same_bits(sel[i], want));
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
    assert_true(sg_test_same_bits(P[i], X[i] + 0.1f));
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
/* sgk_math.h's row sum, written out: lane i % 8 in order, the lanes as a
 * fixed tree. */
static double lane_sum(const float *v, int64_t n, int64_t stride) {
  double l[8] = {0};
  for (int64_t i = 0; i < n; i++) l[i % 8] += (double)v[i * stride];
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

/* A kernel v = a + b over dims[nd] (b read through `bstrides`) that stores
 * v and its sum of geometry `sum` at `axis`, scaled by `scale`. */
static void sum_kernel(sg__kir_kernel *k, const char *name, int nd, const int64_t *dims,
                       const int64_t *bstrides, sg__kir_sum sum, int axis, double scale) {
  sg__kir_init(k, name, nd, dims);
  assert_int_equal(sg__kir_set_sum(k, sum, axis), 0);
  int a = sg__kir_load(k, sg__kir_input_add(k, SG_F32, NULL));
  int b = sg__kir_load(k, sg__kir_input_add(k, SG_F32, bstrides));
  int v = sg__kir_binary(k, SG__KIR_ADD, a, b);
  assert_int_equal(sg__kir_store(k, v), 0);
  assert_int_equal(sg__kir_store_sum(k, v, scale), 1);
}

/* Kernels that end in a sum, against the sums written out here: over the
 * columns of each row (in the eight lanes) and over the rows of each
 * column (in order), with b broadcast per column, per row and (3-d) along
 * a middle dim whose strides merge with neither neighbour; run over
 * uneven thread ranges. A row [1e20, 1 x 7, -1e20] sums to 7 in the lanes
 * (0 in one chain): the order is the lanes'. */
static void test_sums(void **state) {
  (void)state;
  const int64_t sizes[][2] = {{1, 1}, {1, 7}, {7, 1}, {3, 1009}, {1009, 7}};
  for (size_t t = 0; t < sizeof sizes / sizeof *sizes; t++) {
    int64_t rows = sizes[t][0], cols = sizes[t][1], n = rows * cols, dims[2] = {rows, cols};
    int64_t per_col[2] = {0, 1}, per_row[2] = {1, 0};
    sg__kir_kernel in_k, out_k;
    sum_kernel(&in_k, "rowsum", 2, dims, per_row, SG__KIR_SUM_INNER, 1, 1.0 / (double)cols);
    sum_kernel(&out_k, "colsum", 2, dims, per_col, SG__KIR_SUM_OUTER, 1, 1.0);
    sg__kir_kernel *ks[] = {&in_k, &out_k};
    sg__jit_lib *lib = build(ks, 2);
    float *A = malloc(n * 4), *B = malloc((rows > cols ? rows : cols) * 4), *V = malloc(n * 4);
    float *S = malloc((rows > cols ? rows : cols) * 4), *W = malloc(n * 4);
    fill(A, n, true), fill(B, rows > cols ? rows : cols, false);
    if (cols >= 9) { /* row 0: no specials, the crafted head */
      fill(A, cols, false);
      A[0] = 1e20f, A[8] = -1e20f, B[0] = 0;
      for (int i = 1; i < 8; i++) A[i] = 1;
    }
    for (int which = 0; which < 2; which++) {
      sg__kir_kernel *k = ks[which];
      int64_t per, range = sg__kir_range(k, &per);
      assert_int_equal(range, which == 0 ? rows : cols);
      assert_int_equal(range * per, n);
      const void *in[] = {A, B};
      void *out[] = {V, S};
      run(sg__jit_symbol(lib, k->name), range, in, out);
      for (int64_t i = 0; i < n; i++) {
        int64_t r = i / cols, c = i % cols;
        W[i] = A[i] + B[which == 0 ? r : c];
        if (!sg_test_same_bits(V[i], W[i]))
          fail_msg("%s [%lld x %lld] v[%lld] %g want %g", k->name, (long long)rows, (long long)cols,
                   (long long)i, V[i], W[i]);
      }
      for (int64_t j = 0; j < range; j++) {
        double want;
        if (which == 0) {
          want = lane_sum(W + j * cols, cols, 1) * (1.0 / (double)cols);
        } else {
          want = 0;
          for (int64_t r = 0; r < rows; r++) want += (double)W[r * cols + j];
        }
        if (!sg_test_same_bits(S[j], (float)want))
          fail_msg("%s [%lld x %lld] sum %lld: %.9g want %.9g", k->name, (long long)rows, (long long)cols,
                   (long long)j, S[j], (float)want);
      }
      if (which == 0 && cols >= 9) {
        /* One chain loses the seven 1s to 1e20: the check sees the order. */
        double chain = 0;
        for (int64_t c = 0; c < cols; c++) chain += (double)W[c];
        assert_false(sg_test_same_bits(S[0], (float)(chain * (1.0 / (double)cols))));
      }
    }
    free(A), free(B), free(V), free(S), free(W);
    sg__jit_close(lib);
    sg__kir_free(&in_k), sg__kir_free(&out_k);
  }

  /* 3-d: b per middle dim; the sums over [3, 5] (rows: dim 0) and over
   * [2, 3] (columns: dim 2), the head row of the crafted values. */
  int64_t d3[3] = {2, 3, 5}, mid[3] = {0, 1, 0};
  sg__kir_kernel k3i, k3o;
  sum_kernel(&k3i, "inner3", 3, d3, mid, SG__KIR_SUM_INNER, 1, 1.0);
  sum_kernel(&k3o, "outer3", 3, d3, mid, SG__KIR_SUM_OUTER, 2, 0.5);
  sg__kir_kernel *ks3[] = {&k3i, &k3o};
  sg__jit_lib *lib = build(ks3, 2);
  float A[30], B[3], V[30], S[5], W[30];
  fill(A, 30, true), fill(B, 3, false);
  A[0] = 1e20f, A[8] = -1e20f, B[0] = B[1] = 0;
  for (int i = 1; i < 8; i++) A[i] = 1;
  for (int i = 0; i < 30; i++) W[i] = A[i] + B[(i / 5) % 3];
  const void *in[] = {A, B};
  void *out[] = {V, S};
  run(sg__jit_symbol(lib, "inner3"), 2, in, out);
  assert_memory_equal(V, W, sizeof V);
  assert_true(sg_test_same_bits(S[0], (float)lane_sum(W, 15, 1)));
  assert_true(sg_test_same_bits(S[1], (float)lane_sum(W + 15, 15, 1)));
  run(sg__jit_symbol(lib, "outer3"), 5, in, out);
  for (int c = 0; c < 5; c++) {
    double want = 0;
    for (int r = 0; r < 6; r++) want += (double)W[r * 5 + c];
    assert_true(sg_test_same_bits(S[c], (float)(want * 0.5)));
  }
  sg__jit_close(lib);
  sg__kir_free(&k3i), sg__kir_free(&k3o);
}

/* A prologue: per-run scalars from two scalar inputs (a rate and a count
 * that the prologue increments in place), rounded to f32 parameters that
 * the body reads: y = x * (float)(rate * 3) + (float)sqrt(count + 1),
 * over in-place x, and the count written back. The caller runs the
 * prologue (sg__kir_prologue_run) and passes the parameters after the
 * inputs, as the CPU backend does. */
static void test_prologue(void **state) {
  (void)state;
  int64_t n = 1009;
  sg__kir_kernel k;
  sg__kir_init(&k, "pro", 1, &n);
  int64_t zero = 0;
  int ix = sg__kir_input_add(&k, SG_F32, NULL), ir = sg__kir_input_add(&k, SG_F32, &zero);
  int ic = sg__kir_input_add(&k, SG_F32, &zero);
  int count = sg__kir_pro_op(
      &k, SG__KIR_P_F32,
      sg__kir_pro_op(&k, SG__KIR_P_ADD, sg__kir_pro_load(&k, ic), sg__kir_pro_const(&k, 1)), 0);
  assert_true(count >= 0);
  assert_true(sg__kir_pro_write(&k, count, ic) >= 0);
  int scale = sg__kir_pro_param(
      &k, sg__kir_pro_op(&k, SG__KIR_P_MUL, sg__kir_pro_load(&k, ir), sg__kir_pro_const(&k, 3)));
  int shift = sg__kir_pro_param(&k, sg__kir_pro_op(&k, SG__KIR_P_SQRT, count, 0));
  assert_int_equal(scale, 0);
  assert_int_equal(shift, 1);
  int y = sg__kir_binary(&k, SG__KIR_ADD,
                         sg__kir_binary(&k, SG__KIR_MUL, sg__kir_load(&k, ix), sg__kir_param(&k, scale)),
                         sg__kir_param(&k, shift));
  assert_int_equal(sg__kir_set_inplace(&k, sg__kir_store(&k, y), ix), 0);
  sg__kir_kernel *ks[] = {&k};
  sg__jit_lib *lib = build(ks, 1);
  float X[1009], W[1009], rate = 0.1f, cnt = 6.0f, params[SG__KIR_MAX_PARAMS];
  fill(X, n, true);
  for (int i = 0; i < n; i++) W[i] = X[i] * (float)((double)rate * 3) + (float)sqrt(7.0);
  void *in[] = {X, &rate, &cnt, params};
  sg__kir_prologue_run(&k, in, params);
  assert_true(cnt == 7.0f);
  run(sg__jit_symbol(lib, "pro"), n, (const void *const *)in, (void *const *)in);
  for (int i = 0; i < n; i++)
    if (!sg_test_same_bits(X[i], W[i])) fail_msg("element %d: %g want %g", i, X[i], W[i]);
  sg__jit_close(lib);
  sg__kir_free(&k);

  /* What the prologue refuses. */
  sg__kir_init(&k, "probad", 1, &n);
  int full = sg__kir_input_add(&k, SG_F32, NULL), iscalar = sg__kir_input_add(&k, SG_I32, &zero);
  assert_int_equal(sg__kir_pro_load(&k, full), -1);
  assert_non_null(strstr(sg_last_error(), "not a scalar f32 input"));
  sg__kir_free(&k);
  sg__kir_init(&k, "probad2", 1, &n);
  sg__kir_input_add(&k, SG_F32, NULL);
  iscalar = sg__kir_input_add(&k, SG_I32, &zero);
  assert_int_equal(sg__kir_pro_write(&k, sg__kir_pro_const(&k, 1), iscalar), -1);
  assert_non_null(strstr(sg_last_error(), "not a scalar f32 input"));
  sg__kir_free(&k);
  sg__kir_init(&k, "probad3", 1, &n);
  assert_int_equal(sg__kir_param(&k, 0), -1);
  assert_non_null(strstr(sg_last_error(), "not an f32 parameter"));
  sg__kir_free(&k);
  sg__kir_init(&k, "probad4", 1, &n);
  assert_int_equal(sg__kir_pro_op(&k, SG__KIR_P_ADD, 0, 1), -1);
  assert_non_null(strstr(sg_last_error(), "not an earlier value"));
  sg__kir_free(&k);
}

/* Sums the IR refuses: a summed output without a geometry, a second
 * geometry, an axis out of range, an integer sum, a sum written in place. */
static void test_sum_errors(void **state) {
  (void)state;
  int64_t d[2] = {3, 4};
  sg__kir_kernel k;
  sg__kir_init(&k, "nogeo", 2, d);
  int x = sg__kir_load(&k, sg__kir_input_add(&k, SG_F32, NULL));
  assert_int_equal(sg__kir_store_sum(&k, x, 1), -1);
  assert_non_null(strstr(sg_last_error(), "a summed output without a sum"));
  sg__kir_free(&k);
  sg__kir_init(&k, "twice", 2, d);
  assert_int_equal(sg__kir_set_sum(&k, SG__KIR_SUM_INNER, 1), 0);
  assert_int_equal(sg__kir_set_sum(&k, SG__KIR_SUM_OUTER, 1), -1);
  assert_non_null(strstr(sg_last_error(), "the sum is set twice"));
  sg__kir_free(&k);
  sg__kir_init(&k, "axis", 2, d);
  assert_int_equal(sg__kir_set_sum(&k, SG__KIR_SUM_INNER, 3), -1);
  assert_non_null(strstr(sg_last_error(), "axis 3 of 2 dims"));
  sg__kir_free(&k);
  sg__kir_init(&k, "isum", 2, d);
  sg__kir_set_sum(&k, SG__KIR_SUM_OUTER, 1);
  int i = sg__kir_load(&k, sg__kir_input_add(&k, SG_I32, NULL));
  assert_int_equal(sg__kir_store_sum(&k, i, 1), -1);
  assert_non_null(strstr(sg_last_error(), "a summed output is f32 only"));
  sg__kir_free(&k);
  sg__kir_init(&k, "inplace", 2, d);
  sg__kir_set_sum(&k, SG__KIR_SUM_INNER, 1);
  int in = sg__kir_input_add(&k, SG_F32, NULL);
  assert_int_equal(sg__kir_store_sum(&k, sg__kir_load(&k, in), 1), 0);
  assert_int_equal(sg__kir_set_inplace(&k, 0, in), -1);
  assert_non_null(strstr(sg_last_error(), "output 0 is a sum"));
  sg__kir_free(&k);
}

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
      cmocka_unit_test(test_broadcast_arith),
      cmocka_unit_test(test_unary_chains),
      cmocka_unit_test(test_integers_casts_select),
      cmocka_unit_test(test_two_kernels_constants),
      cmocka_unit_test(test_sums),
      cmocka_unit_test(test_sum_errors),
      cmocka_unit_test(test_prologue),
      cmocka_unit_test(test_builder_errors),
      cmocka_unit_test(test_compiler_failures),
      cmocka_unit_test(test_mxcsr_unchanged),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
