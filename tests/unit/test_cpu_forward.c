/* The CPU backend's forward kernels (op kinds 1..31) against the
 * double-precision reference of ref_ops.c on small pseudo-random inputs, in
 * several configurations per op, plus hand-computed optimizer steps and
 * dropout statistics.
 *
 * Tolerances (|got - want| <= atol + rtol |want|): f32 elementwise ops
 * rtol 1e-5 (oneDNN's vectorised erf/exp/tanh are a few ulp off); sums of a
 * few dozen products (conv, matmul, pooling, batch norm, softmax) rtol 1e-4
 * with atol 1e-5 for values that cancel to near zero; integer ops exact. */
#include "test_cpu_harness.h"

#define F32_EW 1e-5, 1e-6
#define F32_SUM 1e-4, 1e-5

/* ---- convolution ---------------------------------------------------------- */

static void conv_case(const int64_t *xd, const int64_t *wd, int bias, const sg_conv2d_params *p,
                      const char *what) {
  sg_graph *g = h_graph();
  sg_tensor x = h_src(g, SG_ROLE_INPUT, SG_F32, 4, xd, NULL);
  sg_tensor w = h_src(g, SG_ROLE_PARAMETER, SG_F32, 4, wd, NULL);
  sg_tensor b = bias ? h_src(g, SG_ROLE_PARAMETER, SG_F32, 1, wd, NULL) : SG_NO_TENSOR;
  sg_conv2d(g, x, w, b, p);
  h_check_last(g, 1, F32_SUM, what);
  sg_graph_destroy(g);
}

static void test_conv2d(void **state) {
  (void)state;
  sg_conv2d_params p = SG_CONV2D_PARAMS_INIT;
  p.padding[0] = p.padding[1] = p.padding[2] = p.padding[3] = 1;
  conv_case(D(2, 3, 7, 7), D(4, 3, 3, 3), 1, &p, "conv 3x3 pad 1 bias");
  sg_conv2d_params q = {sizeof q, {2, 2}, {0, 1, 1, 2}, {2, 1}, 1};
  conv_case(D(2, 3, 9, 8), D(5, 3, 3, 2), 0, &q, "conv stride 2, asymmetric pad, dilation (2,1)");
  sg_conv2d_params r = {sizeof r, {2, 1}, {1, 0, 0, 1}, {1, 1}, 2};
  conv_case(D(1, 4, 6, 5), D(6, 2, 3, 2), 1, &r, "conv groups 2");
  sg_conv2d_params dw = {sizeof dw, {1, 1}, {1, 1, 1, 1}, {1, 1}, 4};
  conv_case(D(2, 4, 5, 5), D(4, 1, 3, 3), 1, &dw, "depthwise conv");
  sg_conv2d_params one = SG_CONV2D_PARAMS_INIT;
  conv_case(D(2, 8, 4, 4), D(16, 8, 1, 1), 0, &one, "1x1 conv");
  sg_conv2d_params big = {sizeof big, {2, 2}, {3, 3, 3, 3}, {1, 1}, 1};
  conv_case(D(1, 3, 16, 16), D(8, 3, 7, 7), 0, &big, "7x7 stride 2 conv");
}

/* ---- batch norm ------------------------------------------------------------- */

static void bn_case(int ndim, const int64_t *xd, int training_form, int train, const char *what) {
  sg_graph *g = h_graph();
  int64_t C = xd[1];
  float rm[16], rv[16];
  for (int i = 0; i < C; i++) {
    rm[i] = 0.1f * (float)i - 0.2f;
    rv[i] = 0.5f + 0.25f * (float)i;
  }
  sg_tensor x = h_src(g, SG_ROLE_INPUT, SG_F32, ndim, xd, NULL);
  sg_tensor gamma = h_src(g, SG_ROLE_PARAMETER, SG_F32, 1, &C, NULL);
  sg_tensor beta = h_src(g, SG_ROLE_PARAMETER, SG_F32, 1, &C, NULL);
  sg_tensor m = h_src(g, SG_ROLE_STATE, SG_F32, 1, &C, rm);
  sg_tensor v = h_src(g, SG_ROLE_STATE, SG_F32, 1, &C, rv);
  sg_batch_norm_params p = SG_BATCH_NORM_PARAMS_INIT;
  p.training = training_form;
  p.momentum = 0.2;
  p.eps = 1e-3;
  sg_batch_norm(g, x, gamma, beta, m, v, &p);
  h_check_last(g, train, F32_SUM, what);
  sg_graph_destroy(g);
}

static void test_batch_norm(void **state) {
  (void)state;
  bn_case(4, D(4, 3, 5, 5), 1, 1, "bn train 4-D (batch stats, running update)");
  bn_case(4, D(4, 3, 5, 5), 1, 0, "bn training form in eval mode");
  bn_case(4, D(2, 3, 4, 4), 0, 1, "bn inference form");
  bn_case(2, D(8, 5), 1, 1, "bn train 2-D");
  bn_case(3, D(2, 3, 4), 1, 1, "bn train 3-D");
  bn_case(5, D(2, 2, 3, 2, 2), 1, 1, "bn train 5-D");
}

static void test_batch_norm_single_value(void **state) {
  (void)state;
  sg_graph *g = h_graph();
  int64_t C = 3;
  sg_tensor x = IN(g, 1, 3);
  sg_tensor ga = h_src(g, SG_ROLE_PARAMETER, SG_F32, 1, &C, NULL),
            be = h_src(g, SG_ROLE_PARAMETER, SG_F32, 1, &C, NULL);
  sg_tensor m = h_src(g, SG_ROLE_STATE, SG_F32, 1, &C, NULL),
            v = h_src(g, SG_ROLE_STATE, SG_F32, 1, &C, NULL);
  sg_batch_norm(g, x, ga, be, m, v, NULL);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  h_host h = h_prepare(g, 0, 1, 1);
  h_dev d;
  assert_status(h_dev_open(g, 0, SG__MODE_TRAIN, 1, &h, &d), SG_ERR_SHAPE, "more than one value per channel");
  h_dev_close(&d);
  h_free(&h);
  sg_graph_destroy(g);
}

/* ---- elementwise ----------------------------------------------------------- */

static void test_activations(void **state) {
  (void)state;
  for (int kind = 0; kind < 7; kind++) {
    sg_graph *g = h_graph();
    sg_tensor x = IN(g, 3, 4, 5);
    x = sg_mul_scalar(g, x, 4.0); /* values in [-4, 4) */
    switch (kind) {
      case 0: sg_relu(g, x); break;
      case 1: sg_clip(g, x, -0.5, 1.5); break;
      case 2: sg_relu6(g, sg_mul_scalar(g, x, 2.0)); break;
      case 3: sg_gelu(g, x, 0); break;
      case 4: sg_gelu(g, x, 1); break;
      case 5: sg_sigmoid(g, x); break;
      default: sg_tanh(g, x); break;
    }
    char what[32];
    snprintf(what, sizeof what, "activation %d", kind);
    h_check_last(g, 1, F32_EW, what);
    sg_graph_destroy(g);
  }
}

static void binary_case(sg_op_kind kind, sg_dtype dt, int na, const int64_t *a, int nb, const int64_t *b) {
  sg_graph *g = h_graph();
  sg_tensor x = h_src(g, SG_ROLE_INPUT, dt, na, a, NULL), y = h_src(g, SG_ROLE_INPUT, dt, nb, b, NULL);
  sg_tensor in[] = {x, y};
  assert_int_equal(sg_graph_add_op(g, kind, 2, in, 0, NULL, 0, NULL, NULL), SG_OK);
  char what[64];
  snprintf(what, sizeof what, "%s %s", sg_op_kind_name(kind), sg_dtype_name(dt));
  if (dt == SG_F32) h_check_last(g, 1, F32_EW, what);
  else h_check_last(g, 1, 0, 0, what);
  sg_graph_destroy(g);
}

static void test_binary(void **state) {
  (void)state;
  sg_dtype dts[] = {SG_F32, SG_I32, SG_I64};
  for (int t = 0; t < 3; t++)
    for (int k = SG_OP_ADD; k <= SG_OP_DIV; k++) {
      binary_case(k, dts[t], 2, D(3, 4), 2, D(3, 4));
      binary_case(k, dts[t], 3, D(2, 3, 4), 1, D(4));
      binary_case(k, dts[t], 3, D(2, 1, 4), 2, D(3, 1));
      binary_case(k, dts[t], 1, D(1), 2, D(2, 3));
      binary_case(k, dts[t], 4, D(2, 3, 4, 5), 4, D(1, 3, 1, 1));
      binary_case(k, dts[t], 0, NULL, 2, D(5, 7));
    }
}

static void test_binary_inplace(void **state) {
  (void)state;
  /* out[0] == in[0] (the planner's in-place reuse) gives the same values. */
  sg_graph *g = h_graph();
  sg_tensor a = IN(g, 4, 33), b = IN(g, 33);
  sg_add(g, a, b);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  h_host h = h_prepare(g, 0, 1, 3);
  float want[4 * 33];
  for (int i = 0; i < 4 * 33; i++) want[i] = ((float *)h.p[0])[i] + ((float *)h.p[1])[i % 33];
  h_dev d;
  assert_int_equal(h_dev_open(g, 0, SG__MODE_TRAIN, 2, &h, &d), SG_OK);
  d.out[0] = d.in[0];
  assert_int_equal(h_dev_run(&d, 0, 0), SG_OK);
  h_dev_download(g, &d, &h);
  assert_memory_equal(h.p[0], want, sizeof want);
  h_dev_close(&d);
  h_free(&h);
  sg_graph_destroy(g);
}

static void test_scalar_ops(void **state) {
  (void)state;
  sg_dtype dts[] = {SG_F32, SG_I32, SG_I64};
  for (int t = 0; t < 3; t++) {
    for (int k = 0; k < 2; k++) {
      sg_graph *g = h_graph();
      sg_tensor x = h_src(g, SG_ROLE_INPUT, dts[t], 2, D(3, 5), NULL);
      if (k == 0) sg_add_scalar(g, x, t ? -3.0 : 0.25);
      else sg_mul_scalar(g, x, t ? 7.0 : -1.5);
      h_check_last(g, 1, t ? 0 : 1e-6, t ? 0 : 1e-7, "scalar op");
      sg_graph_destroy(g);
    }
  }
  double pows[] = {2.0, 3.0, 0.5, -0.5, -1.0, -2.0, 1.0, 1.7};
  for (int i = 0; i < 8; i++) {
    sg_graph *g = h_graph();
    sg_tensor x = sg_add_scalar(g, IN(g, 4, 6), 1.5); /* positive */
    sg_pow_scalar(g, x, pows[i]);
    h_check_last(g, 1, F32_EW, "pow_scalar");
    sg_graph_destroy(g);
  }
  /* A fractional scalar with an integer tensor is refused. */
  sg_graph *g = h_graph();
  sg_add_scalar(g, h_src(g, SG_ROLE_INPUT, SG_I32, 1, D(4), NULL), 0.5);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  h_host h = h_prepare(g, 0, 1, 1);
  h_dev d;
  assert_status(h_dev_open(g, 0, SG__MODE_TRAIN, 1, &h, &d), SG_ERR_UNSUPPORTED, "add_scalar");
  h_dev_close(&d);
  h_free(&h);
  sg_graph_destroy(g);
}

/* ---- matrix products --------------------------------------------------------- */

static void matmul_case(int na, const int64_t *a, int nb, const int64_t *b) {
  sg_graph *g = h_graph();
  sg_matmul(g, h_src(g, SG_ROLE_INPUT, SG_F32, na, a, NULL), h_src(g, SG_ROLE_INPUT, SG_F32, nb, b, NULL));
  h_check_last(g, 1, F32_SUM, "matmul");
  sg_graph_destroy(g);
}

static void test_matmul(void **state) {
  (void)state;
  matmul_case(2, D(3, 4), 2, D(4, 5));
  matmul_case(4, D(2, 1, 3, 4), 3, D(5, 4, 6));
  matmul_case(3, D(2, 3, 4), 2, D(4, 2));
  matmul_case(2, D(3, 4), 3, D(2, 4, 5));
  matmul_case(1, D(4), 2, D(4, 5));
  matmul_case(2, D(3, 4), 1, D(4));
  matmul_case(1, D(4), 1, D(4));
  matmul_case(3, D(3, 1, 4), 1, D(4));
  matmul_case(1, D(4), 3, D(2, 4, 3));
}

static void gemm_case(int ta, int tb, double alpha, double beta, int nc, const int64_t *cd) {
  sg_graph *g = h_graph();
  int64_t M = 3, K = 5, N = 4;
  sg_tensor a = ta ? IN(g, K, M) : IN(g, M, K);
  sg_tensor b = tb ? IN(g, N, K) : IN(g, K, N);
  sg_tensor c = nc >= 0 ? h_src(g, SG_ROLE_PARAMETER, SG_F32, nc, cd, NULL) : SG_NO_TENSOR;
  sg_gemm_params p = {sizeof p, ta, tb, alpha, beta};
  sg_gemm(g, a, b, c, &p);
  h_check_last(g, 1, F32_SUM, "gemm");
  sg_graph_destroy(g);
}

static void test_gemm(void **state) {
  (void)state;
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      gemm_case(ta, tb, 1.0, 1.0, -1, NULL);
      gemm_case(ta, tb, 1.0, 1.0, 1, D(4));
      gemm_case(ta, tb, 0.5, 2.0, 2, D(3, 1));
      gemm_case(ta, tb, -1.5, 1.0, 2, D(3, 4));
      gemm_case(ta, tb, 1.0, 0.25, 1, D(1));
      gemm_case(ta, tb, 2.0, 0.0, 2, D(3, 4));
      gemm_case(ta, tb, 1.0, 1.0, 2, D(1, 4));
      gemm_case(ta, tb, 1.0, 1.0, 2, D(3, 1));
      gemm_case(ta, tb, 1.0, 1.0, 2, D(3, 4));
      gemm_case(ta, tb, 1.0, 1.0, 0, NULL);
    }
  /* The linear layer: x [N,in] w [out,in] bias [out]. */
  sg_graph *g = h_graph();
  sg_linear(g, IN(g, 8, 32), h_src(g, SG_ROLE_PARAMETER, SG_F32, 2, D(10, 32), NULL),
            h_src(g, SG_ROLE_PARAMETER, SG_F32, 1, D(10), NULL));
  h_check_last(g, 1, F32_SUM, "linear");
  sg_graph_destroy(g);
}

/* ---- pooling ------------------------------------------------------------------ */

static void pool_case(int max, const int64_t *xd, const sg_pool2d_params *p, const char *what) {
  sg_graph *g = h_graph();
  sg_tensor x = h_src(g, SG_ROLE_INPUT, SG_F32, 4, xd, NULL);
  if (max) sg_max_pool2d(g, x, p);
  else sg_avg_pool2d(g, x, p);
  h_check_last(g, 1, F32_SUM, what);
  sg_graph_destroy(g);
}

static void test_pooling(void **state) {
  (void)state;
  for (int max = 0; max < 2; max++) {
    sg_pool2d_params a = {sizeof a, {2, 2}, {2, 2}, {0, 0, 0, 0}, 0, 1};
    pool_case(max, D(2, 3, 8, 8), &a, "pool 2x2 s2");
    sg_pool2d_params b = {sizeof b, {3, 3}, {2, 2}, {1, 1, 1, 1}, 0, 1};
    pool_case(max, D(2, 3, 9, 7), &b, "pool 3x3 s2 pad 1 (include pad)");
    b.count_include_pad = 0;
    pool_case(max, D(2, 3, 9, 7), &b, "pool 3x3 s2 pad 1 (exclude pad)");
    sg_pool2d_params c = {sizeof c, {3, 2}, {2, 2}, {0, 0, 0, 0}, 1, 1};
    pool_case(max, D(1, 2, 8, 7), &c, "pool ceil_mode");
    c.count_include_pad = 0;
    pool_case(max, D(1, 2, 8, 7), &c, "pool ceil_mode exclude pad");
    sg_pool2d_params d = {sizeof d, {3, 3}, {2, 2}, {1, 0, 0, 1}, 1, 1};
    pool_case(max, D(2, 2, 6, 6), &d, "pool ceil_mode asymmetric pad (include)");
    d.count_include_pad = 0;
    pool_case(max, D(2, 2, 6, 6), &d, "pool ceil_mode asymmetric pad (exclude)");
    sg_pool2d_params e = {sizeof e, {3, 3}, {1, 1}, {1, 1, 1, 1}, 0, 1};
    pool_case(max, D(1, 3, 5, 5), &e, "pool 3x3 s1 pad 1");
    sg_pool2d_params f = {sizeof f, {2, 2}, {2, 2}, {1, 1, 1, 1}, 1, 1};
    pool_case(max, D(1, 1, 5, 5), &f, "pool ceil_mode with padding");
  }
  sg_graph *g = h_graph();
  sg_global_avg_pool(g, IN(g, 2, 3, 5, 4));
  h_check_last(g, 1, F32_SUM, "global_avg_pool");
  sg_graph_destroy(g);
  g = h_graph();
  sg_global_avg_pool(g, IN(g, 2, 3, 5));
  h_check_last(g, 1, F32_SUM, "global_avg_pool 3-D");
  sg_graph_destroy(g);
}

/* ---- shapes ---------------------------------------------------------------------- */

static void test_shape_ops(void **state) {
  (void)state;
  sg_dtype dts[] = {SG_F32, SG_I32, SG_I64};
  for (int t = 0; t < 3; t++) {
    sg_graph *g = h_graph();
    sg_flatten(g, h_src(g, SG_ROLE_INPUT, dts[t], 4, D(2, 3, 4, 5), NULL), 2);
    h_check_last(g, 1, 0, 0, "flatten");
    sg_graph_destroy(g);
    g = h_graph();
    sg_reshape(g, h_src(g, SG_ROLE_INPUT, dts[t], 3, D(2, 3, 4), NULL), 3, D(4, -1, 2));
    h_check_last(g, 1, 0, 0, "reshape");
    sg_graph_destroy(g);
    int64_t perms[][4] = {{1, 0, 2, 3}, {0, 2, 3, 1}, {3, 2, 1, 0}, {0, 1, 3, 2}, {2, 0, 1, 3}};
    for (int i = 0; i < 5; i++) {
      g = h_graph();
      sg_transpose(g, h_src(g, SG_ROLE_INPUT, dts[t], 4, D(2, 3, 4, 5), NULL), 4, perms[i]);
      h_check_last(g, 1, 0, 0, "transpose");
      sg_graph_destroy(g);
    }
    g = h_graph();
    sg_transpose(g, h_src(g, SG_ROLE_INPUT, dts[t], 2, D(7, 9), NULL), 2, D(1, 0));
    h_check_last(g, 1, 0, 0, "transpose 2-D");
    sg_graph_destroy(g);
    int axes[] = {0, 1, -1};
    for (int i = 0; i < 3; i++) {
      g = h_graph();
      int64_t d0[3] = {2, 3, 4}, d1[3] = {2, 3, 4}, d2[3] = {2, 3, 4};
      int a = axes[i] < 0 ? 2 : axes[i];
      d1[a] = 1;
      d2[a] = 3;
      sg_tensor xs[] = {h_src(g, SG_ROLE_INPUT, dts[t], 3, d0, NULL),
                        h_src(g, SG_ROLE_INPUT, dts[t], 3, d1, NULL),
                        h_src(g, SG_ROLE_INPUT, dts[t], 3, d2, NULL)};
      sg_concat(g, 3, xs, axes[i]);
      h_check_last(g, 1, 0, 0, "concat");
      sg_graph_destroy(g);
    }
  }
}

/* ---- softmax, losses, reductions --------------------------------------------------- */

static void test_softmax(void **state) {
  (void)state;
  for (int log = 0; log < 2; log++) {
    int axes[] = {-1, 1, 0};
    for (int i = 0; i < 3; i++) {
      sg_graph *g = h_graph();
      sg_tensor x = sg_mul_scalar(g, IN(g, 3, 5, 4), 5.0);
      if (log) sg_log_softmax(g, x, axes[i]);
      else sg_softmax(g, x, axes[i]);
      h_check_last(g, 1, F32_SUM, "softmax");
      sg_graph_destroy(g);
    }
  }
}

static void test_cross_entropy(void **state) {
  (void)state;
  for (int red = 0; red < 3; red++)
    for (int i64 = 0; i64 < 2; i64++) {
      sg_graph *g = h_graph();
      int32_t l32[6] = {0, 4, 2, 3, 1, 4};
      int64_t l64[6] = {0, 4, 2, 3, 1, 4};
      sg_tensor x = sg_mul_scalar(g, IN(g, 6, 5), 3.0);
      sg_tensor l =
          h_src(g, SG_ROLE_CONSTANT, i64 ? SG_I64 : SG_I32, 1, D(6), i64 ? (void *)l64 : (void *)l32);
      sg_cross_entropy(g, x, l, (sg_reduction)red);
      h_check_last(g, 1, F32_SUM, "cross_entropy");
      sg_graph_destroy(g);
    }
  /* A label outside 0..C-1 fails the run with a message naming it. */
  sg_graph *g = h_graph();
  int32_t bad[2] = {1, 5};
  sg_cross_entropy(g, IN(g, 2, 5), h_src(g, SG_ROLE_CONSTANT, SG_I32, 1, D(2), bad), SG_REDUCTION_MEAN);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  h_host h = h_prepare(g, 0, 1, 1);
  h_dev d;
  assert_int_equal(h_dev_open(g, 0, SG__MODE_TRAIN, 1, &h, &d), SG_OK);
  assert_status(h_dev_run(&d, 0, 0), SG_ERR_RANGE, "label 5 of row 1");
  h_dev_close(&d);
  h_free(&h);
  sg_graph_destroy(g);
}

static void test_reductions(void **state) {
  (void)state;
  struct {
    int n;
    int64_t axes[3];
    int keep;
  } cases[] = {{0, {0}, 0}, {1, {0}, 0}, {1, {-1}, 1}, {2, {0, 2}, 0}, {2, {1, 3}, 1}, {3, {0, 2, 3}, 0}};
  for (int mean = 0; mean < 2; mean++)
    for (int i = 0; i < 6; i++) {
      sg_graph *g = h_graph();
      sg_tensor x = IN(g, 2, 3, 4, 5);
      if (mean) sg_reduce_mean(g, x, cases[i].n, cases[i].axes, cases[i].keep);
      else sg_reduce_sum(g, x, cases[i].n, cases[i].axes, cases[i].keep);
      h_check_last(g, 1, F32_SUM, "reduce");
      sg_graph_destroy(g);
    }
  sg_dtype its[] = {SG_I32, SG_I64};
  for (int t = 0; t < 2; t++)
    for (int i = 0; i < 6; i++) {
      sg_graph *g = h_graph();
      sg_reduce_sum(g, h_src(g, SG_ROLE_INPUT, its[t], 4, D(2, 3, 4, 5), NULL), cases[i].n, cases[i].axes,
                    cases[i].keep);
      h_check_last(g, 1, 0, 0, "reduce_sum int");
      sg_graph_destroy(g);
    }
}

/* ---- dropout ------------------------------------------------------------------------- */

static void test_dropout(void **state) {
  (void)state;
  const int64_t n = 100000;
  const double p = 0.3;
  sg_graph *g = h_graph();
  sg_tensor x = sg_add_scalar(g, IN(g, n), 2.0); /* no zeros */
  sg_dropout(g, x, p, 1234, 1);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  /* Against the reference: the same mask bit for bit, scaled values. */
  h_check_op_runs(g, 1, 1, 1e-6, 0, 3, "dropout train");
  h_check_op(g, 1, 0, 0, 0, "dropout eval (identity)");
  h_host h = h_prepare(g, 1, 1, 5);
  h_dev d;
  assert_int_equal(h_dev_open(g, 1, SG__MODE_TRAIN, 2, &h, &d), SG_OK);
  sg_op_info info;
  sg_graph_op_info(g, 1, &info);
  int32_t y = info.outputs[0], mask = info.outputs[1], xin = info.inputs[0];
  /* Statistics: the kept fraction is 1 - p within 5 sigma. */
  assert_int_equal(h_dev_run(&d, 3, 99), SG_OK);
  h_dev_download(g, &d, &h);
  uint8_t *m1 = malloc((size_t)n);
  memcpy(m1, h.p[mask], (size_t)n);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; i++) {
    kept += m1[i];
    float xv = ((float *)h.p[xin])[i], yv = ((float *)h.p[y])[i];
    if (m1[i]) assert_true(fabsf(yv - xv / (float)(1 - p)) <= 1e-6f * fabsf(yv));
    else assert_true(yv == 0.0f);
  }
  double sigma = sqrt((double)n * p * (1 - p));
  assert_true(fabs((double)kept - (double)n * (1 - p)) < 5 * sigma);
  /* Determinism: same (step, seed) -> same mask, other thread count too;
   * another step -> another mask. */
  assert_int_equal(h_dev_run(&d, 3, 99), SG_OK);
  h_dev_download(g, &d, &h);
  assert_memory_equal(h.p[mask], m1, (size_t)n);
  assert_int_equal(h_dev_run(&d, 4, 99), SG_OK);
  h_dev_download(g, &d, &h);
  assert_memory_not_equal(h.p[mask], m1, (size_t)n);
  h_dev_close(&d);
  assert_int_equal(h_dev_open(g, 1, SG__MODE_TRAIN, 1, &h, &d), SG_OK);
  assert_int_equal(h_dev_run(&d, 3, 99), SG_OK);
  h_dev_download(g, &d, &h);
  assert_memory_equal(h.p[mask], m1, (size_t)n);
  h_dev_close(&d);
  free(m1);
  h_free(&h);
  sg_graph_destroy(g);
  /* The inference form (training = 0) is the identity in training mode. */
  g = h_graph();
  sg_dropout(g, IN(g, 4, 5), 0.5, 1, 0);
  h_check_last(g, 1, 0, 0, "dropout inference form");
  sg_graph_destroy(g);
}

/* ---- optimizers ------------------------------------------------------------------------ */

/* Runs an update op 3 times (steps 0, 1, 2) and compares the parameter and
 * state with values computed by hand from the torch.optim formulas for
 * p = (1, -2, 0.5), g = (0.1, 0.2, -0.3), lr = 0.1. */
static void run_update(sg_graph *g, const sg_tensor *check, int ncheck, const double (*want)[3][3]) {
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  h_host h = h_prepare(g, 0, 1, 1);
  h_dev d;
  assert_int_equal(h_dev_open(g, 0, SG__MODE_TRAIN, 2, &h, &d), SG_OK);
  for (int step = 0; step < 3; step++) {
    assert_int_equal(h_dev_run(&d, (uint64_t)step, 0), SG_OK);
    h_dev_download(g, &d, &h);
    for (int c = 0; c < ncheck; c++)
      for (int i = 0; i < 3; i++) {
        double got = ((float *)h.p[check[c].id])[i], w = want[c][step][i];
        if (!(fabs(got - w) <= 2e-6 * fabs(w) + 1e-7)) {
          fprintf(stderr, "step %d tensor %d element %d: got %.9g want %.9g\n", step, c, i, got, w);
          fail();
        }
      }
  }
  h_dev_close(&d);
  h_free(&h);
}

static void sgd_case(double momentum, double dampening, double wd, int nesterov, const double (*want_p)[3],
                     const double (*want_buf)[3]) {
  sg_graph *g = h_graph();
  float p0[3] = {1.0f, -2.0f, 0.5f}, g0[3] = {0.1f, 0.2f, -0.3f}, lr = 0.1f;
  sg_tensor p = h_src(g, SG_ROLE_PARAMETER, SG_F32, 1, D(3), p0);
  sg_tensor gr = h_src(g, SG_ROLE_CONSTANT, SG_F32, 1, D(3), g0);
  sg_tensor l = h_src(g, SG_ROLE_CONSTANT, SG_F32, 1, D(1), &lr);
  const float zeros[3] = {0};
  sg_tensor buf = momentum > 0 ? h_src(g, SG_ROLE_OPTIMIZER_STATE, SG_F32, 1, D(3), zeros) : SG_NO_TENSOR;
  sg_sgd_params sp = {sizeof sp, momentum, dampening, wd, nesterov};
  assert_int_equal(sg_sgd_update(g, p, gr, l, buf, &sp), SG_OK);
  double want[2][3][3];
  memcpy(want[0], want_p, sizeof want[0]);
  if (want_buf) memcpy(want[1], want_buf, sizeof want[1]);
  sg_tensor check[2] = {p, buf};
  run_update(g, check, momentum > 0 ? 2 : 1, (const double(*)[3][3])want);
  sg_graph_destroy(g);
}

static void test_sgd(void **state) {
  (void)state;
  /* momentum 0.9, dampening 0.1, weight decay 0.01 */
  const double pa[3][3] = {{0.989, -2.018, 0.5295},
                           {0.9692099, -2.0503838, 0.58257345},
                           {0.9415265211, -2.095683875, 0.6568152389}};
  const double ba[3][3] = {
      {0.11, 0.18, -0.295}, {0.197901, 0.323838, -0.5307345}, {0.2768337891, 0.4530007458, -0.7424178889}};
  sgd_case(0.9, 0.1, 0.01, 0, pa, ba);
  /* Nesterov, momentum 0.9, weight decay 0.01 */
  const double pb[3][3] = {{0.9791, -2.0342, 0.55605},
                           {0.94932971, -2.08291502, 0.635888505},
                           {0.9116139126, -2.144631779, 0.7370354163}};
  const double bb[3][3] = {
      {0.11, 0.18, -0.295}, {0.208791, 0.341658, -0.5599395}, {0.2974051971, 0.4866630498, -0.797586665}};
  sgd_case(0.9, 0.0, 0.01, 1, pb, bb);
  /* Plain SGD */
  const double pc[3][3] = {{0.99, -2.02, 0.53}, {0.98, -2.04, 0.56}, {0.97, -2.06, 0.59}};
  sgd_case(0, 0, 0, 0, pc, NULL);
}

static void test_adamw(void **state) {
  (void)state;
  sg_graph *g = h_graph();
  float p0[3] = {1.0f, -2.0f, 0.5f}, g0[3] = {0.1f, 0.2f, -0.3f}, lr = 0.1f;
  sg_tensor p = h_src(g, SG_ROLE_PARAMETER, SG_F32, 1, D(3), p0);
  sg_tensor gr = h_src(g, SG_ROLE_CONSTANT, SG_F32, 1, D(3), g0);
  sg_tensor l = h_src(g, SG_ROLE_CONSTANT, SG_F32, 1, D(1), &lr);
  const float zeros[3] = {0};
  sg_tensor m = h_src(g, SG_ROLE_OPTIMIZER_STATE, SG_F32, 1, D(3), zeros);
  sg_tensor v = h_src(g, SG_ROLE_OPTIMIZER_STATE, SG_F32, 1, D(3), zeros);
  sg_tensor st = h_src(g, SG_ROLE_OPTIMIZER_STATE, SG_F32, 1, D(1), zeros);
  sg_adamw_params ap = {sizeof ap, 0.9, 0.999, 1e-8, 0.01};
  assert_int_equal(sg_adamw_update(g, p, gr, l, m, v, st, &ap), SG_OK);
  /* p *= 1 - lr wd; m, v moments; p -= lr mhat / (sqrt(vhat) + eps) */
  const double want[3][3][3] = {{{0.89900001, -2.097999995, 0.5994999967},
                                 {0.79810102, -2.19590199, 0.6989004933},
                                 {0.697302929, -2.293706083, 0.7982015895}},
                                {{0.01, 0.02, -0.03}, {0.019, 0.038, -0.057}, {0.0271, 0.0542, -0.0813}},
                                {{1e-05, 4e-05, 9e-05},
                                 {1.999e-05, 7.996e-05, 0.00017991},
                                 {2.997001e-05, 0.00011988004, 0.00026973009}}};
  sg_tensor check[3] = {p, m, v};
  run_update(g, check, 3, want);
  sg_graph_destroy(g);
  /* Also against the reference over 3 steps (step tensor included), from
   * non-zero moments. */
  g = h_graph();
  float m0[20], v0[20];
  for (int i = 0; i < 20; i++) m0[i] = 0.01f * (float)(i - 10), v0[i] = 0.001f * (float)(i + 1);
  p = h_src(g, SG_ROLE_PARAMETER, SG_F32, 2, D(4, 5), NULL);
  gr = IN(g, 4, 5);
  l = h_src(g, SG_ROLE_CONSTANT, SG_F32, 1, D(1), &lr);
  m = h_src(g, SG_ROLE_OPTIMIZER_STATE, SG_F32, 2, D(4, 5), m0);
  v = h_src(g, SG_ROLE_OPTIMIZER_STATE, SG_F32, 2, D(4, 5), v0);
  st = h_src(g, SG_ROLE_OPTIMIZER_STATE, SG_F32, 1, D(1), zeros);
  assert_int_equal(sg_adamw_update(g, p, gr, l, m, v, st, &ap), SG_OK);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  h_check_op_runs(g, 0, 1, 1e-5, 1e-6, 3, "adamw vs reference");
  sg_graph_destroy(g);
}

static void test_sgd_vs_reference(void **state) {
  (void)state;
  float lr = 0.05f;
  for (int nesterov = 0; nesterov < 2; nesterov++) {
    sg_graph *g = h_graph();
    sg_tensor p = h_src(g, SG_ROLE_PARAMETER, SG_F32, 2, D(4, 5), NULL);
    sg_tensor gr = IN(g, 4, 5);
    sg_tensor l = h_src(g, SG_ROLE_CONSTANT, SG_F32, 1, D(1), &lr);
    /* Optimizer state starts zeroed, as in a real graph. */
    const float zeros[20] = {0};
    sg_tensor buf = h_src(g, SG_ROLE_OPTIMIZER_STATE, SG_F32, 2, D(4, 5), zeros);
    sg_sgd_params sp = {sizeof sp, 0.8, nesterov ? 0.0 : 0.3, 1e-3, nesterov};
    assert_int_equal(sg_sgd_update(g, p, gr, l, buf, &sp), SG_OK);
    assert_int_equal(sg_graph_finalize(g), SG_OK);
    h_check_op_runs(g, 0, 1, 1e-5, 1e-6, 3, "sgd vs reference");
    sg_graph_destroy(g);
  }
}

/* Tensors large enough for the multi-threaded C paths: equal to the
 * reference, and bit-identical with 1 and 2 threads. */
static void same_on_1_and_2_threads(const sg_graph *g, int32_t op) {
  h_host h = h_prepare(g, op, 1, 4);
  sg_op_info info;
  sg_graph_op_info(g, op, &info);
  /* The output, or for an update op the parameter it rewrites. */
  int32_t res = info.n_outputs ? info.outputs[0] : info.inputs[0];
  size_t n = h_nbytes(g, res);
  void *outs[2];
  for (int t = 0; t < 2; t++) {
    h_dev d;
    assert_int_equal(h_dev_open(g, op, SG__MODE_TRAIN, t + 1, &h, &d), SG_OK);
    assert_int_equal(h_dev_run(&d, 1, 2), SG_OK);
    outs[t] = malloc(n);
    assert_int_equal(d.be->download(d.st, outs[t], info.n_outputs ? d.out[0] : d.in[0], n), SG_OK);
    h_dev_close(&d);
  }
  assert_memory_equal(outs[0], outs[1], n);
  free(outs[0]);
  free(outs[1]);
  h_free(&h);
}

static void test_large_parallel(void **state) {
  (void)state;
  for (int c = 0; c < 9; c++) {
    sg_graph *g = h_graph();
    switch (c) {
      case 0: sg_add(g, IN(g, 4, 300, 100), IN(g, 300, 1)); break;
      case 1: sg_mul(g, IN(g, 200000), IN(g, 1)); break;
      case 2: sg_sub(g, IN(g, 2, 70000), IN(g, 70000)); break;
      case 3: sg_transpose(g, IN(g, 30, 40, 100), 3, D(2, 0, 1)); break;
      case 4: sg_mul_scalar(g, IN(g, 3, 50000), 0.5); break;
      case 5: sg_reshape(g, IN(g, 300, 1000), 2, D(1000, 300)); break;
      case 6: sg_dropout(g, IN(g, 120000), 0.1, 3, 1); break;
      case 7: {
        float lr = 0.01f;
        sg_sgd_params sp = {sizeof sp, 0.9, 0.1, 1e-4, 0};
        assert_int_equal(sg_sgd_update(g, h_src(g, SG_ROLE_PARAMETER, SG_F32, 1, D(100000), NULL),
                                       IN(g, 100000), h_src(g, SG_ROLE_CONSTANT, SG_F32, 1, D(1), &lr),
                                       h_src(g, SG_ROLE_OPTIMIZER_STATE, SG_F32, 1, D(100000), NULL), &sp),
                         SG_OK);
        break;
      }
      default: {
        sg_tensor a = IN(g, 3, 30000), b = IN(g, 2, 30000), xs[] = {a, b};
        sg_concat(g, 2, xs, 0);
        break;
      }
    }
    h_check_last(g, 1, F32_EW, "large tensor");
    same_on_1_and_2_threads(g, sg_graph_num_ops(g) - 1);
    sg_graph_destroy(g);
  }
}

static void test_unsupported_dtype(void **state) {
  (void)state;
  sg_graph *g = h_graph();
  sg_relu(g, h_src(g, SG_ROLE_INPUT, SG_F16, 2, D(2, 3), NULL));
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  void *st;
  sg__backend_config cfg = {1, 0};
  assert_int_equal(sg__cpu_backend.create(&cfg, &st), SG_OK);
  sg__kernel *k = NULL;
  assert_status(sg__cpu_backend.kernel_create(st, g, 0, SG__MODE_TRAIN, &k), SG_ERR_UNSUPPORTED, "relu");
  assert_null(k);
  assert_status(sg__cpu_backend.kernel_create(st, g, 0, SG__MODE_TRAIN, &k), SG_ERR_UNSUPPORTED, "f16");
  assert_status(sg__cpu_backend.kernel_create(st, g, 5, SG__MODE_TRAIN, &k), SG_ERR_RANGE, NULL);
  sg__cpu_backend.destroy(st);
  sg_graph_destroy(g);
  /* An integer tensor where only f32 works. */
  g = h_graph();
  sg_tensor a = h_src(g, SG_ROLE_INPUT, SG_I32, 2, D(2, 3), NULL),
            b = h_src(g, SG_ROLE_INPUT, SG_I32, 2, D(2, 3), NULL);
  sg_tensor in[] = {a, b};
  assert_int_equal(sg_graph_add_op(g, SG_OP_ADD, 2, in, 0, NULL, 0, NULL, NULL), SG_OK);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  assert_int_equal(sg__cpu_backend.create(&cfg, &st), SG_OK);
  assert_int_equal(sg__cpu_backend.kernel_create(st, g, 0, SG__MODE_TRAIN, &k), SG_OK);
  sg__cpu_backend.kernel_destroy(st, k);
  sg__cpu_backend.destroy(st);
  sg_graph_destroy(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conv2d),
      cmocka_unit_test(test_batch_norm),
      cmocka_unit_test(test_batch_norm_single_value),
      cmocka_unit_test(test_activations),
      cmocka_unit_test(test_binary),
      cmocka_unit_test(test_binary_inplace),
      cmocka_unit_test(test_scalar_ops),
      cmocka_unit_test(test_matmul),
      cmocka_unit_test(test_gemm),
      cmocka_unit_test(test_pooling),
      cmocka_unit_test(test_shape_ops),
      cmocka_unit_test(test_softmax),
      cmocka_unit_test(test_cross_entropy),
      cmocka_unit_test(test_reductions),
      cmocka_unit_test(test_dropout),
      cmocka_unit_test(test_sgd),
      cmocka_unit_test(test_adamw),
      cmocka_unit_test(test_sgd_vs_reference),
      cmocka_unit_test(test_large_parallel),
      cmocka_unit_test(test_unsupported_dtype),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
