/* The ops of issue 17 (exp, log, sqrt, reciprocal, neg, abs, sign, erf,
 * max, min, where, cast, layer_norm and its backward), and sin, cos, acos:
 *  - forward through a CPU session against hand-computed values (edge cases
 *    included: NaN, ±0, ties, out-of-range casts, wrap-around);
 *  - each CPU kernel against the double-precision reference of ref_ops.c
 *    on pseudo-random inputs, integer dtypes and broadcasting included;
 *  - the gradient of max/min at ties (half to each operand, as PyTorch);
 *  - builder errors: dtypes, shapes and attributes, with messages naming
 *    the op and the operands.
 *  - every gradient rule against central finite differences of the loss
 *    evaluated with the double-precision reference (test_ncheck.h, shared
 *    with test_autodiff.c). */
#include <float.h>

#include "test_cpu_harness.h"
#include "test_ncheck.h"

#define F32_EW 1e-6, 1e-7

/* Runs y = op(inputs) in a session and returns y's values as doubles. */
typedef struct feed {
  const char *name;
  sg_dtype dt;
  int ndim;
  const int64_t *dims;
  const void *data;
} feed;

static void run_graph(sg_graph *g, sg_tensor y, int n_feeds, const feed *feeds, double *out) {
  assert_status(sg_tensor_set_name(g, y, "y"), SG_OK, NULL);
  assert_status(sg_graph_mark_output(g, y), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  sg_tensor_info yi;
  assert_int_equal(sg_graph_tensor_info(g, y, &yi), SG_OK);
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sp.threads = 1;
  sg_session *s;
  assert_status(sg_session_create(g, &sp, &s), SG_OK, NULL);
  assert_status(sg_session_compile(s), SG_OK, NULL);
  for (int i = 0; i < n_feeds; i++)
    assert_status(
        sg_session_set_input(s, feeds[i].name, feeds[i].dt, feeds[i].ndim, feeds[i].dims, feeds[i].data),
        SG_OK, NULL);
  assert_status(sg_session_forward(s), SG_OK, NULL);
  unsigned char buf[512];
  assert_true(yi.nbytes <= sizeof buf);
  assert_status(sg_session_read(s, "y", buf, yi.nbytes), SG_OK, NULL);
  for (int64_t i = 0; i < yi.numel; i++) {
    switch (yi.dtype) {
      case SG_F32: out[i] = ((float *)buf)[i]; break;
      case SG_I32: out[i] = ((int32_t *)buf)[i]; break;
      case SG_I64: out[i] = (double)((int64_t *)buf)[i]; break;
      default: out[i] = buf[i]; break;
    }
  }
  sg_session_destroy(s);
}

static void expect_values(const char *what, const double *got, const double *want, int n, double tol) {
  for (int i = 0; i < n; i++) {
    bool ok = isnan(want[i]) ? isnan(got[i])
                             : (got[i] == want[i] && signbit(got[i]) == signbit(want[i])) ||
                                   fabs(got[i] - want[i]) <= tol * fabs(want[i]);
    if (!ok) fail_msg("%s: element %d is %.9g, expected %.9g", what, i, got[i], want[i]);
  }
}

/* One f32 unary op on fixed inputs. */
static void unary_values(const char *what, sg_tensor (*fn)(sg_graph *, sg_tensor), int n, const float *x,
                         const double *want, double tol) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  int64_t dims[1] = {n};
  sg_tensor y = fn(g, sg_input(g, "x", SG_F32, 1, dims));
  feed f = {"x", SG_F32, 1, dims, x};
  double got[16];
  run_graph(g, y, 1, &f, got);
  expect_values(what, got, want, n, tol);
  sg_graph_destroy(g);
}

static void test_hand_computed_unary(void **state) {
  (void)state;
  const float x[] = {0.0f, 1.0f, -2.0f, 0.5f, -0.0f, NAN, INFINITY};
  const double e = 2.718281828459045, tol = 2 * FLT_EPSILON;
  unary_values("exp", sg_exp, 7, x, (const double[]){1, e, 1 / (e * e), 1.6487212707001282, 1, NAN, INFINITY},
               tol);
  const float p[] = {1.0f, 4.0f, 0.25f, 0.0f, -1.0f, INFINITY};
  unary_values("log", sg_log, 6, p,
               (const double[]){0, 1.3862943611198906, -1.3862943611198906, -INFINITY, NAN, INFINITY}, tol);
  unary_values("sqrt", sg_sqrt, 6, p, (const double[]){1, 2, 0.5, 0, NAN, INFINITY}, 0);
  unary_values("reciprocal", sg_reciprocal, 6, p, (const double[]){1, 0.25, 4, INFINITY, -1, 0}, 0);
  unary_values("neg", sg_neg, 7, x, (const double[]){-0.0, -1, 2, -0.5, 0.0, NAN, -INFINITY}, 0);
  unary_values("abs", sg_abs, 7, x, (const double[]){0, 1, 2, 0.5, 0.0, NAN, INFINITY}, 0);
  unary_values("sign", sg_sign, 7, x, (const double[]){0.0, 1, -1, 1, -0.0, NAN, 1}, 0);
  unary_values("erf", sg_erf, 7, x,
               (const double[]){0, 0.8427007929497149, -0.9953222650189527, 0.5204998778130465, -0.0, NAN, 1},
               tol);
  unary_values(
      "sin", sg_sin, 7, x,
      (const double[]){0, 0.8414709848078965, -0.9092974268256817, 0.479425538604203, -0.0, NAN, NAN}, tol);
  unary_values("cos", sg_cos, 7, x,
               (const double[]){1, 0.5403023058681398, -0.4161468365471424, 0.8775825618903728, 1, NAN, NAN},
               tol);
  const float u[] = {1.0f, -1.0f, 0.5f, 0.0f, -0.0f, 1.5f, NAN};
  unary_values("acos", sg_acos, 7, u,
               (const double[]){0, 3.141592653589793, 1.0471975511965979, 1.5707963267948966,
                                1.5707963267948966, NAN, NAN},
               tol);
  /* Integers: wrap-around of -MIN and |MIN|. */
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  const int32_t xi[] = {INT32_MIN, -3, 0, 5};
  int64_t d4[1] = {4};
  sg_tensor a = sg_input(g, "x", SG_I32, 1, d4);
  sg_tensor y = sg_add(g, sg_add(g, sg_neg(g, a), sg_mul_scalar(g, sg_abs(g, a), 10)),
                       sg_mul_scalar(g, sg_sign(g, a), 1000));
  feed f = {"x", SG_I32, 1, d4, xi};
  double got[4];
  run_graph(g, y, 1, &f, got);
  /* -MIN + 10 * MIN - 1000 wraps: MIN * 11 - 1000 mod 2^32. */
  int32_t w0 = (int32_t)((uint32_t)INT32_MIN * 11u - 1000u);
  expect_values("neg/abs/sign i32", got, (const double[]){w0, 3 + 30 - 1000, 0, -5 + 50 + 1000}, 4, 0);
  sg_graph_destroy(g);
}

static void test_hand_computed_minmax_where_cast(void **state) {
  (void)state;
  /* max / min with broadcasting, NaN and signed zeros. */
  const float a[] = {1, -2, NAN, 0.0f, 3, -0.0f}, b[] = {0.5f, 2, -1};
  int64_t da[2] = {2, 3}, db[1] = {3};
  for (int k = 0; k < 2; k++) {
    sg_graph *g;
    assert_int_equal(sg_graph_create(&g), SG_OK);
    sg_tensor ta = sg_input(g, "a", SG_F32, 2, da), tb = sg_input(g, "b", SG_F32, 1, db);
    sg_tensor y = k == 0 ? sg_max(g, ta, tb) : sg_min(g, ta, tb);
    feed f[] = {{"a", SG_F32, 2, da, a}, {"b", SG_F32, 1, db, b}};
    double got[6];
    run_graph(g, y, 2, f, got);
    if (k == 0) expect_values("max", got, (const double[]){1, 2, NAN, 0.5, 3, -1 > -0.0 ? -1 : -0.0}, 6, 0);
    else expect_values("min", got, (const double[]){0.5, -2, NAN, 0.0, 2, -1}, 6, 0);
    sg_graph_destroy(g);
  }
  /* where: cond [2,1] against a [3] and a scalar b. */
  {
    sg_graph *g;
    assert_int_equal(sg_graph_create(&g), SG_OK);
    int64_t dc[2] = {2, 1}, d3[1] = {3};
    const uint8_t cond[] = {1, 0};
    const int64_t av[] = {10, 20, 30}, bv[] = {-7};
    sg_tensor y = sg_where(g, sg_input(g, "c", SG_BOOL, 2, dc), sg_input(g, "a", SG_I64, 1, d3),
                           sg_input(g, "b", SG_I64, 0, NULL));
    feed f[] = {{"c", SG_BOOL, 2, dc, cond}, {"a", SG_I64, 1, d3, av}, {"b", SG_I64, 0, NULL, bv}};
    double got[6];
    run_graph(g, y, 3, f, got);
    expect_values("where", got, (const double[]){10, 20, 30, -7, -7, -7}, 6, 0);
    sg_graph_destroy(g);
  }
  /* cast: truncation, NaN and out of range to 0, to bool, i64 -> i32 wraps. */
  const float xf[] = {2.7f, -2.7f, NAN, 3e9f, -0.0f, 0.5f};
  int64_t d6[1] = {6};
  const sg_dtype tos[] = {SG_I32, SG_I64, SG_BOOL};
  const double want[3][6] = {{2, -2, 0, 0, 0, 0}, {2, -2, 0, 3e9, 0, 0}, {1, 1, 1, 1, 0, 1}};
  for (int k = 0; k < 3; k++) {
    sg_graph *g;
    assert_int_equal(sg_graph_create(&g), SG_OK);
    sg_tensor y = sg_cast(g, sg_input(g, "x", SG_F32, 1, d6), tos[k]);
    feed f = {"x", SG_F32, 1, d6, xf};
    double got[6];
    run_graph(g, y, 1, &f, got);
    expect_values("cast from f32", got, want[k], 6, 0);
    sg_graph_destroy(g);
  }
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  const int64_t xi[] = {((int64_t)1 << 32) + 5, -1, 16777217};
  int64_t d3[1] = {3};
  sg_tensor x = sg_input(g, "x", SG_I64, 1, d3);
  sg_tensor y = sg_add(g, sg_cast(g, sg_cast(g, x, SG_I32), SG_F32), sg_cast(g, x, SG_F32));
  feed f = {"x", SG_I64, 1, d3, xi};
  double got[3];
  run_graph(g, y, 1, &f, got);
  /* 2^32 + 5 is 2^32 in f32, and so is 5 + 2^32. */
  expect_values("cast from i64", got, (const double[]){4294967296.0, -2, 16777216.0 * 2}, 3, 0);
  sg_graph_destroy(g);
}

static void test_hand_computed_layer_norm(void **state) {
  (void)state;
  /* Rows (1, 2, 3, 6) and (0, 0, 0, 4): mean 3 and 1, variance 3.5 and 3. */
  const float x[] = {1, 2, 3, 6, 0, 0, 0, 4}, scale[] = {1, 2, 0.5f, -1}, bias[] = {0, 1, 0, 10};
  int64_t dx[2] = {2, 4}, d4[1] = {4};
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  sg_tensor y =
      sg_layer_norm(g, sg_input(g, "x", SG_F32, 2, dx), sg_constant(g, "scale", SG_F32, 1, d4, scale),
                    sg_constant(g, "bias", SG_F32, 1, d4, bias), -1, 0.5);
  feed f = {"x", SG_F32, 2, dx, x};
  double got[8], want[8];
  const double mean[2] = {3, 1}, var[2] = {3.5, 3};
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < 4; i++)
      want[r * 4 + i] = (x[r * 4 + i] - mean[r]) / sqrt(var[r] + 0.5) * scale[i] + bias[i];
  run_graph(g, y, 1, &f, got);
  expect_values("layer_norm", got, want, 8, 4 * FLT_EPSILON);
  sg_graph_destroy(g);
}

/* d max(a, b) / da at a == b is 1/2 (torch.maximum's convention), 1 where
 * a is larger, 0 where smaller; min mirrors it. Evaluated with the
 * reference, which runs the ops that sg_graph_backward appended. */
static void test_minmax_ties(void **state) {
  (void)state;
  for (int k = 0; k < 2; k++) {
    sg_graph *g;
    assert_int_equal(sg_graph_create(&g), SG_OK);
    const float av[] = {1, 2, 3}, bv[] = {1, 5, -3};
    int64_t d3[1] = {3};
    sg_tensor a = sg_parameter(g, "a", SG_F32, 1, d3, av), b = sg_parameter(g, "b", SG_F32, 1, d3, bv);
    sg_tensor loss = sg_reduce_sum(g, k == 0 ? sg_max(g, a, b) : sg_min(g, a, b), 0, NULL, 0);
    assert_status(sg_graph_backward(g, loss), SG_OK, NULL);
    assert_status(sg_graph_finalize(g), SG_OK, NULL);
    ref_values *rv;
    assert_int_equal(ref_values_create(g, &rv), SG_OK);
    assert_int_equal(ref_run_graph(g, 1, 0, 0, rv), SG_OK);
    sg_tensor ga, gb;
    assert_status(sg_graph_grad(g, a, &ga), SG_OK, NULL);
    assert_status(sg_graph_grad(g, b, &gb), SG_OK, NULL);
    const double wa[2][3] = {{0.5, 0, 1}, {0.5, 1, 0}};
    for (int i = 0; i < 3; i++) {
      assert_true(rv->v[ga.id][i] == wa[k][i]);
      assert_true(rv->v[gb.id][i] == 1 - wa[k][i]);
    }
    ref_values_destroy(rv);
    sg_graph_destroy(g);
  }
}

static void test_gradients_against_finite_differences(void **state) {
  (void)state;
  ncase c;
  c = nbegin();
  ncheck(&c, "exp, log, sqrt, reciprocal",
         sg_add(c.g, sg_reciprocal(c.g, sg_sqrt(c.g, NPOS(&c, 3, 4))), sg_log(c.g, sg_exp(c.g, NPOS(&c, 4)))),
         NULL);
  c = nbegin();
  ncheck(&c, "neg, abs, erf, sign",
         sg_add(c.g, sg_erf(c.g, sg_neg(c.g, sg_abs(c.g, NP(&c, 2, 5)))), sg_sign(c.g, NP(&c, 5))), NULL);
  c = nbegin();
  ncheck(&c, "sin, cos, acos",
         sg_add(c.g, sg_sin(c.g, sg_cos(c.g, NP(&c, 3, 4))),
                sg_acos(c.g, sg_mul_scalar(c.g, sg_tanh(c.g, NP(&c, 4)), 0.9))),
         NULL);
  c = nbegin();
  ncheck(&c, "max, min",
         sg_sub(c.g, sg_max(c.g, NP(&c, 2, 3, 4), NP(&c, 3, 1)), sg_min(c.g, NP(&c, 4), NP(&c, 3, 4))), NULL);
  c = nbegin();
  static const uint8_t cond[3 * 4] = {1, 0, 0, 1, 1, 1, 0, 0, 0, 1, 0, 1};
  sg_tensor cnd = sg_constant(c.g, "cond", SG_BOOL, 2, D(3, 4), cond);
  ncheck(&c, "where", sg_where(c.g, cnd, NP(&c, 2, 1, 4), NP(&c, 3, 1)), NULL);
  c = nbegin();
  ncheck(&c, "cast f32 to f32", sg_cast(c.g, sg_tanh(c.g, NP(&c, 3, 2)), SG_F32), NULL);
  c = nbegin();
  ncheck(&c, "layer_norm, last dim", sg_layer_norm(c.g, NP(&c, 3, 5), NP(&c, 5), NP(&c, 5), -1, 1e-5), NULL);
  c = nbegin();
  ncheck(&c, "layer_norm, two dims", sg_layer_norm(c.g, NP(&c, 2, 3, 4), NP(&c, 3, 4), SG_NO_TENSOR, 1, 1e-2),
         NULL);
  c = nbegin();
  ncheck(&c, "layer_norm, no affine", sg_layer_norm(c.g, NP(&c, 4, 3), SG_NO_TENSOR, SG_NO_TENSOR, -1, 1e-5),
         NULL);
}

/* ---- kernels against the reference ------------------------------------------ */

static void test_kernels_against_reference(void **state) {
  (void)state;
  for (int kind = 0; kind < 11; kind++) {
    sg_graph *g = h_graph();
    sg_tensor x = sg_mul_scalar(g, IN(g, 3, 4, 5), 3.0); /* values in [-3, 3) */
    sg_tensor pos = sg_add_scalar(g, sg_abs(g, x), 0.25);
    sg_tensor (*fns[])(sg_graph *, sg_tensor) = {sg_exp,  sg_log, sg_sqrt, sg_reciprocal, sg_neg, sg_abs,
                                                 sg_sign, sg_erf, sg_sin,  sg_cos,        sg_acos};
    bool positive = kind >= 1 && kind <= 3;
    fns[kind](g, positive ? pos : kind == 10 ? sg_mul_scalar(g, x, 1.0 / 3.0) : x); /* acos: [-1, 1) */
    char what[32];
    snprintf(what, sizeof what, "unary math %d", kind);
    h_check_last(g, 1, F32_EW, what);
    sg_graph_destroy(g);
  }
  const sg_dtype dts[] = {SG_F32, SG_I32, SG_I64};
  for (int t = 0; t < 3; t++) {
    for (int k = 0; k < 3; k++) { /* neg, abs, sign on integers */
      if (t == 0) continue;
      sg_graph *g = h_graph();
      sg_tensor x = h_src(g, SG_ROLE_INPUT, dts[t], 2, D(4, 6), NULL);
      (k == 0 ? sg_neg : k == 1 ? sg_abs : sg_sign)(g, x);
      h_check_last(g, 1, 0, 0, "integer unary");
      sg_graph_destroy(g);
    }
    static const int64_t shapes[][2][4] = {
        {{3, 4}, {3, 4}}, {{2, 3, 4}, {4}}, {{2, 1, 4}, {3, 1}}, {{1}, {2, 3}}};
    static const int nds[][2] = {{2, 2}, {3, 1}, {3, 2}, {1, 2}};
    for (int s = 0; s < 4; s++)
      for (int k = 0; k < 2; k++) {
        sg_graph *g = h_graph();
        sg_tensor a = h_src(g, SG_ROLE_INPUT, dts[t], nds[s][0], shapes[s][0], NULL);
        sg_tensor b = h_src(g, SG_ROLE_INPUT, dts[t], nds[s][1], shapes[s][1], NULL);
        (k == 0 ? sg_max : sg_min)(g, a, b);
        h_check_last(g, 1, 0, 0, "max/min");
        sg_graph_destroy(g);
      }
    sg_graph *g = h_graph();
    sg_tensor c = h_src(g, SG_ROLE_INPUT, SG_BOOL, 3, D(2, 1, 4), NULL);
    sg_tensor a = h_src(g, SG_ROLE_INPUT, dts[t], 2, D(3, 1), NULL);
    sg_tensor b = h_src(g, SG_ROLE_INPUT, dts[t], 1, D(4), NULL);
    sg_where(g, c, a, b);
    h_check_last(g, 1, 0, 0, "where");
    sg_graph_destroy(g);
  }
  const sg_dtype all[] = {SG_F32, SG_I32, SG_I64, SG_BOOL};
  for (int i = 0; i < 4; i++)
    for (int o = 0; o < 4; o++) {
      sg_graph *g = h_graph();
      sg_tensor x = h_src(g, SG_ROLE_INPUT, all[i], 2, D(5, 7), NULL);
      if (all[i] == SG_F32) x = sg_mul_scalar(g, x, 40.0);
      sg_cast(g, x, all[o]);
      h_check_last(g, 1, 0, 0, "cast");
      sg_graph_destroy(g);
    }
}

static void test_layer_norm_kernels(void **state) {
  (void)state;
  for (int k = 0; k < 4; k++) {
    sg_graph *g = h_graph();
    sg_tensor x = IN(g, 2, 3, 40);
    int axis = k == 1 ? 1 : -1;
    sg_tensor sc = k == 3 ? SG_NO_TENSOR : (k == 1 ? IN(g, 3, 40) : IN(g, 40));
    sg_tensor bi = k >= 2 ? SG_NO_TENSOR : (k == 1 ? IN(g, 3, 40) : IN(g, 40));
    sg_tensor y = sg_layer_norm(g, x, sc, bi, axis, 1e-5);
    assert_int_equal(sg_graph_finalize(g), SG_OK);
    h_check_op(g, sg_graph_num_ops(g) - 1, 1, 1e-5, 1e-5, "layer_norm");
    sg_graph_destroy(g);
    /* The backward op, fed by the forward op's statistics. */
    g = h_graph();
    x = IN(g, 2, 3, 40);
    sc = k == 3 ? SG_NO_TENSOR : (k == 1 ? IN(g, 3, 40) : IN(g, 40));
    bi = k >= 2 ? SG_NO_TENSOR : (k == 1 ? IN(g, 3, 40) : IN(g, 40));
    sg_tensor outs[3];
    sg_attr attrs[] = {{.name = "axis", .type = SG_ATTR_INT, .i = axis}};
    sg_tensor in[] = {x, sc, bi};
    assert_int_equal(sg_graph_add_op(g, SG_OP_LAYER_NORM, 3, in, 1, attrs, 3, outs, NULL), SG_OK);
    sg_tensor dy = IN(g, 2, 3, 40);
    sg_tensor bin[] = {dy, x, sc, outs[1], outs[2]};
    assert_int_equal(sg_graph_add_op(g, SG_OP_LAYER_NORM_BACKWARD, 5, bin, 1, attrs, 0, NULL, NULL), SG_OK);
    h_check_last(g, 1, 1e-4, 1e-5, "layer_norm_backward");
    sg_graph_destroy(g);
    (void)y;
  }
}

/* Every new kind, backward ops included, survives the .sgg round trip: the
 * loaded graph verifies and has the same content hash. */
static void test_sgg_round_trip(void **state) {
  (void)state;
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  sg_tensor a = sg_parameter(g, "a", SG_F32, 2, D(3, 4), NULL),
            b = sg_parameter(g, "b", SG_F32, 1, D(4), NULL);
  static const uint8_t cond[4] = {1, 0, 1, 1};
  sg_tensor c = sg_constant(g, "cond", SG_BOOL, 1, D(4), cond);
  sg_tensor t =
      sg_erf(g, sg_sign(g, sg_abs(g, sg_neg(g, sg_reciprocal(g, sg_sqrt(g, sg_log(g, sg_exp(g, a))))))));
  t = sg_add(g, sg_max(g, t, b), sg_min(g, a, b));
  t = sg_where(g, c, t, sg_cast(g, sg_cast(g, a, SG_I64), SG_F32));
  t = sg_layer_norm(g, t, b, b, -1, 1e-3);
  assert_status(sg_graph_backward(g, sg_reduce_sum(g, t, 0, NULL, 0)), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  sg_graph *h = sg_test_sgg_round_trip(g);
  assert_int_equal(sg_graph_num_ops(h), sg_graph_num_ops(g));
  sg_graph_destroy(h);
  sg_graph_destroy(g);
}

/* ---- builder errors ---------------------------------------------------------- */

/* A failed builder call: no tensor, the graph's sticky error `st`, and a
 * message containing `needle`. Destroys g. */
static void expect_error(sg_graph *g, sg_tensor t, sg_status st, const char *needle) {
  assert_true(t.id < 0);
  assert_status(sg_graph_status(g), st, needle);
  sg_graph_destroy(g);
}

static sg_graph *graph(void) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  return g;
}

static void test_builder_errors(void **state) {
  (void)state;
  sg_graph *g = graph();
  expect_error(g, sg_exp(g, sg_input(g, "i", SG_I32, 1, D(3))), SG_ERR_DTYPE,
               "input 'i' [3] i32 must be a float type");
  g = graph();
  expect_error(g, sg_neg(g, sg_input(g, "m", SG_U8, 1, D(3))), SG_ERR_DTYPE,
               "must be a float or integer type");
  g = graph();
  expect_error(g, sg_max(g, sg_input(g, "a", SG_F32, 1, D(3)), sg_input(g, "b", SG_I32, 1, D(3))),
               SG_ERR_DTYPE, "operands 'a' [3] f32 and 'b' [3] i32 must share one float or integer dtype");
  g = graph();
  expect_error(g, sg_min(g, sg_input(g, "a", SG_F32, 2, D(2, 3)), sg_input(g, "b", SG_F32, 1, D(4))),
               SG_ERR_SHAPE, "do not broadcast");
  g = graph();
  sg_tensor a = sg_input(g, "a", SG_F32, 1, D(3));
  expect_error(g, sg_where(g, a, a, a), SG_ERR_DTYPE, "condition 'a' [3] f32 must be bool");
  g = graph();
  sg_tensor c = sg_input(g, "c", SG_BOOL, 1, D(2));
  a = sg_input(g, "a", SG_F32, 1, D(3));
  expect_error(g, sg_where(g, c, a, a), SG_ERR_SHAPE,
               "'c' [2] bool, 'a' [3] f32 and 'a' [3] f32 do not broadcast");
  g = graph();
  c = sg_input(g, "c", SG_BOOL, 1, D(3));
  expect_error(g, sg_where(g, c, sg_input(g, "a", SG_F32, 1, D(3)), sg_input(g, "b", SG_I64, 1, D(3))),
               SG_ERR_DTYPE, "must share one float or integer dtype");
  g = graph();
  expect_error(g, sg_cast(g, sg_input(g, "x", SG_F32, 1, D(3)), SG_F16), SG_ERR_DTYPE, "to is 2 (f16)");
  g = graph();
  expect_error(g, sg_cast(g, sg_input(g, "x", SG_U8, 1, D(3)), SG_F32), SG_ERR_DTYPE,
               "input 'x' [3] u8 must be f32, i32, i64 or bool");
  g = graph();
  expect_error(g, sg_layer_norm(g, sg_input(g, "x", SG_F32, 2, D(2, 3)), SG_NO_TENSOR, SG_NO_TENSOR, 2, 1e-5),
               SG_ERR_ATTRIBUTE, "axis 2 is out of range for x 'x' [2,3] f32");
  g = graph();
  expect_error(g, sg_layer_norm(g, sg_input(g, "x", SG_F32, 2, D(2, 3)), SG_NO_TENSOR, SG_NO_TENSOR, -1, 0.0),
               SG_ERR_ATTRIBUTE, "epsilon is 0");
  g = graph();
  expect_error(g,
               sg_layer_norm(g, sg_input(g, "x", SG_F32, 2, D(2, 3)), sg_input(g, "s", SG_F32, 1, D(2)),
                             SG_NO_TENSOR, -1, 1e-5),
               SG_ERR_SHAPE,
               "scale 's' [2] f32 must have the normalised dims of x 'x' [2,3] f32 (from axis 1)");
  g = graph();
  expect_error(g,
               sg_layer_norm(g, sg_input(g, "x", SG_F32, 2, D(2, 3)), SG_NO_TENSOR,
                             sg_input(g, "b", SG_I32, 1, D(3)), -1, 1e-5),
               SG_ERR_DTYPE, "bias 'b' [3] i32 must have the dtype of x");
  g = graph();
  expect_error(g, sg_layer_norm(g, sg_input(g, "x", SG_I64, 1, D(3)), SG_NO_TENSOR, SG_NO_TENSOR, -1, 1e-5),
               SG_ERR_DTYPE, "input x 'x' [3] i64 must be a float type");
  /* The backward op checks its saved statistics. */
  g = graph();
  sg_tensor x = sg_input(g, "x", SG_F32, 2, D(2, 3));
  sg_tensor in[] = {x, x, SG_NO_TENSOR, sg_input(g, "m", SG_F32, 2, D(2, 3)),
                    sg_input(g, "v", SG_F32, 2, D(2, 1))};
  assert_status(sg_graph_add_op(g, SG_OP_LAYER_NORM_BACKWARD, 5, in, 0, NULL, 0, NULL, NULL), SG_ERR_SHAPE,
                "mean 'm' [2,3] f32 must have the dims of x 'x' [2,3] f32 before axis 1 and 1 after");
  sg_graph_destroy(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hand_computed_unary),
      cmocka_unit_test(test_hand_computed_minmax_where_cast),
      cmocka_unit_test(test_hand_computed_layer_norm),
      cmocka_unit_test(test_minmax_ties),
      cmocka_unit_test(test_gradients_against_finite_differences),
      cmocka_unit_test(test_kernels_against_reference),
      cmocka_unit_test(test_layer_norm_kernels),
      cmocka_unit_test(test_sgg_round_trip),
      cmocka_unit_test(test_builder_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
