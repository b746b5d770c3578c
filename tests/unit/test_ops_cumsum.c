/* cumsum (kind 67), ONNX CumSum and torch.cumsum:
 *  - forward through a CPU session against hand-computed values: inclusive,
 *    exclusive, reverse and both, along the first, a middle and the last
 *    axis, f32, i32 (with wrap-around) and i64;
 *  - the CPU kernel against the double-precision reference of ref_ops.c on
 *    pseudo-random inputs, rows longer than the kernel's column block
 *    (256) included, every dtype and flag combination;
 *  - the gradient (a cumsum in the other direction) against central finite
 *    differences of the loss (test_ncheck.h), for every flag combination;
 *  - builder errors and the .sgg round trip. */
#include <stdint.h>

#include "test_cpu_harness.h"
#include "test_ncheck.h"

/* y = cumsum(x) of a [2, 3] input in a session; y as doubles. */
static void run_cumsum(sg_dtype dt, const void *x, int axis, int exclusive, int reverse, double *out) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  sg_tensor y = sg_cumsum(g, sg_input(g, "x", dt, 2, D(2, 3)), axis, exclusive, reverse);
  assert_status(sg_tensor_set_name(g, y, "y"), SG_OK, NULL);
  assert_status(sg_graph_mark_output(g, y), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sp.threads = 1;
  sg_session *s;
  assert_status(sg_session_create(g, &sp, &s), SG_OK, NULL);
  assert_status(sg_session_compile(s), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "x", dt, 2, D(2, 3), x), SG_OK, NULL);
  assert_status(sg_session_forward(s), SG_OK, NULL);
  unsigned char buf[6 * 8];
  size_t es = dt == SG_I64 ? 8 : 4;
  assert_status(sg_session_read(s, "y", buf, 6 * es), SG_OK, NULL);
  for (int i = 0; i < 6; i++)
    out[i] = dt == SG_F32   ? ((float *)buf)[i]
             : dt == SG_I32 ? ((int32_t *)buf)[i]
                            : (double)((int64_t *)buf)[i];
  sg_session_destroy(s);
  sg_graph_destroy(g);
}

static void expect6(const char *what, const double *got, const double *want) {
  for (int i = 0; i < 6; i++)
    if (got[i] != want[i]) fail_msg("%s: element %d is %.17g, expected %.17g", what, i, got[i], want[i]);
}

static void test_hand_computed(void **state) {
  (void)state;
  /* x = [[1, 2, 3], [4, 5, 6]] */
  const float xf[] = {1, 2, 3, 4, 5, 6};
  const int32_t xi[] = {1, 2, 3, 4, 5, 6};
  const int64_t xl[] = {1, 2, 3, 4, 5, 6};
  static const struct {
    int axis, exclusive, reverse;
    double want[6];
  } cases[] = {
      {1, 0, 0, {1, 3, 6, 4, 9, 15}}, {-1, 1, 0, {0, 1, 3, 0, 4, 9}}, {1, 0, 1, {6, 5, 3, 15, 11, 6}},
      {1, 1, 1, {5, 3, 0, 11, 6, 0}}, {0, 0, 0, {1, 2, 3, 5, 7, 9}},  {-2, 1, 0, {0, 0, 0, 1, 2, 3}},
      {0, 0, 1, {5, 7, 9, 4, 5, 6}},  {0, 1, 1, {4, 5, 6, 0, 0, 0}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    char what[64];
    double got[6];
    snprintf(what, sizeof what, "axis %d exclusive %d reverse %d", cases[c].axis, cases[c].exclusive,
             cases[c].reverse);
    run_cumsum(SG_F32, xf, cases[c].axis, cases[c].exclusive, cases[c].reverse, got);
    expect6(what, got, cases[c].want);
    run_cumsum(SG_I32, xi, cases[c].axis, cases[c].exclusive, cases[c].reverse, got);
    expect6(what, got, cases[c].want);
    run_cumsum(SG_I64, xl, cases[c].axis, cases[c].exclusive, cases[c].reverse, got);
    expect6(what, got, cases[c].want);
  }
  /* Integer sums wrap around (two's complement), as PyTorch's. */
  const int32_t wi[] = {INT32_MAX, 1, 1, INT32_MIN, -1, 0};
  double got[6];
  run_cumsum(SG_I32, wi, 1, 0, 0, got);
  expect6("i32 wrap-around", got,
          (const double[]){INT32_MAX, INT32_MIN, INT32_MIN + 1, INT32_MIN, INT32_MAX, INT32_MAX});
  const int64_t wl[] = {INT64_MAX, 1, 0, 5, -7, 2};
  run_cumsum(SG_I64, wl, 1, 0, 0, got);
  expect6("i64 wrap-around", got,
          (const double[]){(double)INT64_MAX, (double)INT64_MIN, (double)INT64_MIN, 5, -2, 0});
  /* f32 sums are accumulated in double: 2^24 + 1 + 1 is exact there,
   * while a float accumulator would lose both ones. */
  const float big[] = {16777216.0f, 1, 1, 0, 0, 0};
  run_cumsum(SG_F32, big, 1, 0, 0, got);
  expect6("f32 accumulated in double", got, (const double[]){16777216.0, 16777216.0, 16777218.0, 0, 0, 0});
}

static void test_kernel_against_reference(void **state) {
  (void)state;
  static const int64_t shapes[][4] = {{7}, {3, 5}, {2, 9, 4}, {2, 3, 300}, {600, 2}, {2, 5, 3, 517}};
  static const int ndims[] = {1, 2, 3, 3, 2, 4};
  const sg_dtype dts[] = {SG_F32, SG_I32, SG_I64};
  for (int s = 0; s < 6; s++)
    for (int axis = -ndims[s]; axis < ndims[s]; axis++)
      for (int flags = 0; flags < 4; flags++)
        for (int t = 0; t < 3; t++) {
          sg_graph *g = h_graph();
          sg_tensor x = h_src(g, SG_ROLE_INPUT, dts[t], ndims[s], shapes[s], NULL);
          sg_cumsum(g, x, axis, flags & 1, flags >> 1);
          char what[96];
          snprintf(what, sizeof what, "cumsum shape %d axis %d flags %d dtype %d", s, axis, flags,
                   (int)dts[t]);
          h_check_last(g, 1, dts[t] == SG_F32 ? 1e-6 : 0, dts[t] == SG_F32 ? 1e-6 : 0, what);
          sg_graph_destroy(g);
        }
}

static void test_gradients_against_finite_differences(void **state) {
  (void)state;
  for (int flags = 0; flags < 4; flags++)
    for (int axis = 0; axis < 3; axis++) {
      ncase c = nbegin();
      char what[64];
      snprintf(what, sizeof what, "cumsum axis %d exclusive %d reverse %d", axis, flags & 1, flags >> 1);
      /* A tanh after it, so the gradient of cumsum meets a non-uniform dy. */
      ncheck(&c, what, sg_tanh(c.g, sg_cumsum(c.g, NP(&c, 2, 4, 3), axis - 1, flags & 1, flags >> 1)), NULL);
    }
  /* Two cumsums in a row and a broadcast product, the gradient summing over
   * both of its consumers. */
  ncase c = nbegin();
  sg_tensor x = NP(&c, 3, 5);
  sg_tensor y = sg_mul(c.g, sg_cumsum(c.g, sg_cumsum(c.g, x, 1, 1, 0), 0, 0, 1), x);
  ncheck(&c, "cumsum of cumsum times x", sg_add(c.g, y, sg_cumsum(c.g, x, -1, 0, 1)), NULL);
}

/* The backward pass is a cumsum in the other direction with the same
 * exclusive; an integer x gets no gradient op. */
static void test_backward_ops(void **state) {
  (void)state;
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  sg_tensor x = sg_parameter(g, "x", SG_F32, 2, D(2, 3), NULL);
  sg_tensor y = sg_cumsum(g, x, 1, 1, 0);
  sg_tensor ids = sg_input(g, "ids", SG_I64, 2, D(2, 3));
  sg_tensor pos = sg_cast(g, sg_cumsum(g, ids, 1, 0, 0), SG_F32);
  assert_status(sg_graph_backward(g, sg_reduce_sum(g, sg_mul(g, y, pos), 0, NULL, 0)), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  int n_cumsum = 0;
  for (int32_t i = 0; i < sg_graph_num_ops(g); i++) {
    sg_op_info oi;
    assert_int_equal(sg_graph_op_info(g, i, &oi), SG_OK);
    if (oi.kind != SG_OP_CUMSUM) continue;
    n_cumsum++;
    if (i < 2) continue;
    sg_attr a;
    assert_int_equal(sg_graph_op_attr(g, i, 1, &a), SG_OK);
    assert_int_equal(a.i, 1); /* exclusive kept */
    assert_int_equal(sg_graph_op_attr(g, i, 2, &a), SG_OK);
    assert_int_equal(a.i, 1); /* reverse flipped */
  }
  assert_int_equal(n_cumsum, 3);
  assert_string_equal(sg_op_kind_name(SG_OP_CUMSUM), "cumsum");
  sg_graph *h = sg_test_sgg_round_trip(g);
  sg_graph_destroy(h);
  sg_graph_destroy(g);
}

static void expect_error(sg_tensor (*build)(sg_graph *), sg_status st, const char *needle) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  assert_true(build(g).id < 0);
  assert_status(sg_graph_status(g), st, needle);
  sg_graph_destroy(g);
}
static sg_tensor bad_axis(sg_graph *g) { return sg_cumsum(g, sg_input(g, "x", SG_F32, 2, D(2, 3)), 2, 0, 0); }
static sg_tensor bad_neg_axis(sg_graph *g) {
  return sg_cumsum(g, sg_input(g, "x", SG_F32, 2, D(2, 3)), -3, 0, 0);
}
static sg_tensor bad_rank(sg_graph *g) { return sg_cumsum(g, sg_input(g, "x", SG_F32, 0, NULL), 0, 0, 0); }
static sg_tensor bad_dtype(sg_graph *g) { return sg_cumsum(g, sg_input(g, "x", SG_BOOL, 1, D(3)), 0, 0, 0); }
static sg_tensor bad_flag(sg_graph *g) { return sg_cumsum(g, sg_input(g, "x", SG_F32, 1, D(3)), 0, 2, 0); }
static sg_tensor bad_reverse(sg_graph *g) {
  return sg_cumsum(g, sg_input(g, "x", SG_F32, 1, D(3)), 0, 0, -1);
}

static void test_builder_errors(void **state) {
  (void)state;
  expect_error(bad_axis, SG_ERR_ATTRIBUTE, "axis 2 is out of range for x 'x' [2,3] f32");
  expect_error(bad_neg_axis, SG_ERR_ATTRIBUTE, "axis -3 is out of range");
  expect_error(bad_rank, SG_ERR_ATTRIBUTE, "axis 0 is out of range for x 'x' [] f32 (rank >= 1)");
  expect_error(bad_dtype, SG_ERR_DTYPE, "must be a float type, i32 or i64");
  expect_error(bad_flag, SG_ERR_ATTRIBUTE, "exclusive");
  expect_error(bad_reverse, SG_ERR_ATTRIBUTE, "reverse");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hand_computed),
      cmocka_unit_test(test_kernel_against_reference),
      cmocka_unit_test(test_gradients_against_finite_differences),
      cmocka_unit_test(test_backward_ops),
      cmocka_unit_test(test_builder_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
