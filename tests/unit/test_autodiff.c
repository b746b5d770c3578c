/* Structure of what sg_graph_backward() and the optimizers append (SPEC G6,
 * G7): every parameter that reaches the loss gets a gradient of its own
 * shape and nothing else does; no gradient is computed for graph inputs,
 * labels or running statistics; fan-out is summed; misuse fails with a
 * clear status; training graphs verify and survive the .sgg round trip.
 * The rules are also checked numerically here, independently of any
 * backend: the whole training graph is evaluated with the double-precision
 * reference (ref_ops.c) and compared with central finite differences.
 * test_gradcheck.c does the same through the CPU kernels. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "ref_ops.h"
#include "test_ncheck.h"
#include "test_util.h"

#define D(...) ((const int64_t[]){__VA_ARGS__})
#define NDIM(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define PARAM(g, name, ...) sg_parameter(g, name, SG_F32, NDIM(__VA_ARGS__), D(__VA_ARGS__), NULL)
#define INPUT(g, name, dt, ...) sg_input(g, name, dt, NDIM(__VA_ARGS__), D(__VA_ARGS__))
#define STATE(g, name, ...) \
  sg_graph_add_tensor(g, name, SG_F32, SG_ROLE_STATE, NDIM(__VA_ARGS__), D(__VA_ARGS__), NULL)

static sg_graph *fresh(void) {
  sg_graph *g = NULL;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  return g;
}

static sg_tensor_info info_of(const sg_graph *g, sg_tensor t) {
  sg_tensor_info info;
  assert_int_equal(sg_graph_tensor_info(g, t, &info), SG_OK);
  return info;
}

static sg_op_info op_of(const sg_graph *g, int32_t k) {
  sg_op_info info;
  assert_int_equal(sg_graph_op_info(g, k, &info), SG_OK);
  return info;
}

/* Ops of `kind` with index >= from. */
static int count_kind(const sg_graph *g, sg_op_kind kind, int32_t from) {
  int n = 0;
  for (int32_t k = from; k < sg_graph_num_ops(g); k++) n += op_of(g, k).kind == kind;
  return n;
}

/* `p` has the gradient "<name>.grad": role gradient, p's shape and dtype,
 * produced by a backward op (index >= first_backward_op). Returns it. */
static sg_tensor expect_grad_(const sg_graph *g, sg_tensor p, int32_t first_backward_op, int line) {
  sg_tensor gt;
  sg_status st = sg_graph_grad(g, p, &gt);
  sg_tensor_info pi = info_of(g, p);
  if (st != SG_OK) {
    fprintf(stderr, "line %d: no gradient for '%s': %s\n", line, pi.name, sg_last_error());
    _fail(__FILE__, line);
  }
  sg_tensor_info gi = info_of(g, gt);
  char want[300];
  snprintf(want, sizeof want, "%s.grad", pi.name);
  assert_string_equal(gi.name, want);
  assert_int_equal(gi.role, SG_ROLE_GRADIENT);
  assert_int_equal(gi.dtype, pi.dtype);
  assert_int_equal(gi.ndim, pi.ndim);
  for (int i = 0; i < pi.ndim; i++) assert_int_equal(gi.dims[i], pi.dims[i]);
  assert_true(gi.producer >= first_backward_op);
  assert_null(gi.data);
  return gt;
}
#define EXPECT_GRAD(g, p, first) expect_grad_(g, p, first, __LINE__)

static void expect_no_grad(const sg_graph *g, sg_tensor p) {
  sg_tensor gt = {7};
  assert_status(sg_graph_grad(g, p, &gt), SG_ERR_NOT_FOUND, "has no gradient");
  assert_int_equal(gt.id, -1);
}

/* Every tensor created after `first_tensor` is a gradient, except the seed
 * (a constant) and optimizer state. */
static void expect_roles_after(const sg_graph *g, int32_t first_tensor) {
  for (int32_t t = first_tensor; t < sg_graph_num_tensors(g); t++) {
    sg_tensor_info ti = info_of(g, (sg_tensor){t});
    if (ti.role == SG_ROLE_CONSTANT) {
      assert_non_null(strstr(ti.name, ".grad_seed"));
      continue;
    }
    if (ti.role != SG_ROLE_GRADIENT && ti.role != SG_ROLE_OPTIMIZER_STATE)
      fail_msg("tensor '%s' created by backward has role %s", ti.name, sg_role_name(ti.role));
  }
}

/* ---- models --------------------------------------------------------------- */

typedef struct mlp {
  sg_tensor x, labels, w1, b1, w2, b2, unused, side, loss;
} mlp;

/* images [8,16] -> linear(32) -> relu -> linear(10) -> cross entropy. A
 * parameter that nothing uses and one on a branch that does not reach the
 * loss have no gradient. */
static mlp build_mlp(sg_graph *g) {
  mlp m;
  m.x = INPUT(g, "images", SG_F32, 8, 16);
  m.labels = INPUT(g, "labels", SG_I64, 8);
  m.w1 = PARAM(g, "fc1.weight", 32, 16);
  m.b1 = PARAM(g, "fc1.bias", 32);
  m.w2 = PARAM(g, "fc2.weight", 10, 32);
  m.b2 = PARAM(g, "fc2.bias", 10);
  m.unused = PARAM(g, "unused", 3);
  m.side = PARAM(g, "side", 32);
  sg_tensor h = sg_relu(g, sg_linear(g, m.x, m.w1, m.b1));
  sg_tensor branch = sg_mul(g, h, m.side);
  sg_graph_mark_output(g, branch);
  m.loss = sg_cross_entropy(g, sg_linear(g, h, m.w2, m.b2), m.labels, SG_REDUCTION_MEAN);
  assert_int_equal(sg_tensor_set_name(g, m.loss, "loss"), SG_OK);
  assert_int_equal(sg_graph_status(g), SG_OK);
  return m;
}

typedef struct cnn {
  sg_tensor x, labels, c1w, c1b, bn1g, bn1b, bn1m, bn1v, c2w, bn2g, bn2b, bn2m, bn2v, fcw, fcb, loss;
  int32_t conv1_op, conv2_op, bn1_op, bn2_op;
} cnn;

/* conv(3->4, bias) -> bn (training) -> relu -> maxpool -> conv(4->8) -> bn
 * (inference form) -> relu -> global avg pool -> flatten -> linear(5) -> CE. */
static cnn build_cnn(sg_graph *g) {
  cnn m;
  m.x = INPUT(g, "images", SG_F32, 2, 3, 8, 8);
  m.labels = INPUT(g, "labels", SG_I32, 2);
  m.c1w = PARAM(g, "conv1.weight", 4, 3, 3, 3);
  m.c1b = PARAM(g, "conv1.bias", 4);
  m.bn1g = PARAM(g, "bn1.weight", 4);
  m.bn1b = PARAM(g, "bn1.bias", 4);
  m.bn1m = STATE(g, "bn1.running_mean", 4);
  m.bn1v = STATE(g, "bn1.running_var", 4);
  m.c2w = PARAM(g, "conv2.weight", 8, 4, 3, 3);
  m.bn2g = PARAM(g, "bn2.weight", 8);
  m.bn2b = PARAM(g, "bn2.bias", 8);
  m.bn2m = STATE(g, "bn2.running_mean", 8);
  m.bn2v = STATE(g, "bn2.running_var", 8);
  m.fcw = PARAM(g, "fc.weight", 5, 8);
  m.fcb = PARAM(g, "fc.bias", 5);
  sg_conv2d_params cp = SG_CONV2D_PARAMS_INIT;
  cp.padding[0] = cp.padding[1] = cp.padding[2] = cp.padding[3] = 1;
  m.conv1_op = sg_graph_num_ops(g);
  sg_tensor h = sg_conv2d(g, m.x, m.c1w, m.c1b, &cp);
  m.bn1_op = sg_graph_num_ops(g);
  h = sg_relu(g, sg_batch_norm(g, h, m.bn1g, m.bn1b, m.bn1m, m.bn1v, NULL));
  sg_pool2d_params pp = SG_POOL2D_PARAMS_INIT;
  pp.kernel[0] = pp.kernel[1] = 2;
  h = sg_max_pool2d(g, h, &pp);
  m.conv2_op = sg_graph_num_ops(g);
  h = sg_conv2d(g, h, m.c2w, SG_NO_TENSOR, &cp);
  sg_batch_norm_params bp = SG_BATCH_NORM_PARAMS_INIT;
  bp.training = 0;
  m.bn2_op = sg_graph_num_ops(g);
  h = sg_relu(g, sg_batch_norm(g, h, m.bn2g, m.bn2b, m.bn2m, m.bn2v, &bp));
  h = sg_flatten(g, sg_global_avg_pool(g, h), 1);
  m.loss = sg_cross_entropy(g, sg_linear(g, h, m.fcw, m.fcb), m.labels, SG_REDUCTION_MEAN);
  assert_int_equal(sg_tensor_set_name(g, m.loss, "loss"), SG_OK);
  assert_int_equal(sg_graph_status(g), SG_OK);
  return m;
}

/* ---- tests ---------------------------------------------------------------- */

static void test_mlp(void **state) {
  (void)state;
  sg_graph *g = fresh();
  mlp m = build_mlp(g);
  int32_t n_ops = sg_graph_num_ops(g), n_tensors = sg_graph_num_tensors(g);
  assert_status(sg_graph_backward(g, m.loss), SG_OK, NULL);
  sg_tensor w1g = EXPECT_GRAD(g, m.w1, n_ops);
  EXPECT_GRAD(g, m.b1, n_ops);
  EXPECT_GRAD(g, m.w2, n_ops);
  EXPECT_GRAD(g, m.b2, n_ops);
  expect_no_grad(g, m.unused);
  expect_no_grad(g, m.side);
  expect_no_grad(g, m.x);
  expect_no_grad(g, m.labels);
  expect_roles_after(g, n_tensors);
  /* dL/dL is a constant 1 named after the loss. */
  sg_tensor seed;
  assert_int_equal(sg_graph_find_tensor(g, "loss.grad_seed", &seed), SG_OK);
  sg_tensor_info si = info_of(g, seed);
  assert_int_equal(si.role, SG_ROLE_CONSTANT);
  assert_int_equal(si.ndim, 0);
  assert_true(*(const float *)si.data == 1.0f);
  /* Exactly the needed ops: one cross_entropy_backward; two gemms for fc2
   * (weight and input), one for fc1 (weight only: the images are an input);
   * one relu_backward; biases summed with sum_to. */
  assert_int_equal(count_kind(g, SG_OP_CROSS_ENTROPY_BACKWARD, n_ops), 1);
  assert_int_equal(count_kind(g, SG_OP_GEMM, n_ops), 3);
  assert_int_equal(count_kind(g, SG_OP_RELU_BACKWARD, n_ops), 1);
  assert_int_equal(count_kind(g, SG_OP_SUM_TO, n_ops), 2);
  assert_int_equal(sg_graph_num_ops(g) - n_ops, 7);
  /* No gradient tensor has the images' shape [8,16]. */
  for (int32_t t = n_tensors; t < sg_graph_num_tensors(g); t++) {
    sg_tensor_info ti = info_of(g, (sg_tensor){t});
    assert_false(ti.ndim == 2 && ti.dims[0] == 8 && ti.dims[1] == 16);
    assert_true(ti.dtype == SG_F32);
  }
  /* Backward ops are named after the forward op they differentiate: fc1's
   * weight gradient is a gemm named "<fc1's gemm>/grad". */
  sg_tensor_info gi = info_of(g, w1g);
  sg_op_info producer = op_of(g, gi.producer);
  assert_int_equal(producer.kind, SG_OP_GEMM);
  assert_string_equal(producer.name, "gemm_0/grad");
  assert_string_equal(op_of(g, n_ops).name, "cross_entropy_4/grad");
  /* ... and the gradient tensors feed the optimizer only. */
  for (int32_t k = n_ops; k < sg_graph_num_ops(g); k++) {
    sg_op_info o = op_of(g, k);
    for (int i = 0; i < o.n_inputs; i++) assert_int_not_equal(o.inputs[i], w1g.id);
  }
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  /* Queries work on the finalized graph. */
  sg_tensor again;
  assert_int_equal(sg_graph_grad(g, m.w1, &again), SG_OK);
  assert_int_equal(again.id, w1g.id);
  sg_graph_destroy(g);
}

static void test_cnn_with_batch_norm(void **state) {
  (void)state;
  sg_graph *g = fresh();
  cnn m = build_cnn(g);
  int32_t n_ops = sg_graph_num_ops(g), n_tensors = sg_graph_num_tensors(g);
  assert_status(sg_graph_backward(g, m.loss), SG_OK, NULL);
  sg_tensor params[] = {m.c1w, m.c1b, m.bn1g, m.bn1b, m.c2w, m.bn2g, m.bn2b, m.fcw, m.fcb};
  for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) EXPECT_GRAD(g, params[i], n_ops);
  expect_no_grad(g, m.bn1m);
  expect_no_grad(g, m.bn1v);
  expect_no_grad(g, m.bn2m);
  expect_no_grad(g, m.x);
  expect_roles_after(g, n_tensors);

  /* The first convolution's input is the images: only conv2 has a
   * conv2d_backward_data, with conv2's weight and conv2's input shape. */
  assert_int_equal(count_kind(g, SG_OP_CONV2D_BACKWARD_DATA, n_ops), 1);
  assert_int_equal(count_kind(g, SG_OP_CONV2D_BACKWARD_WEIGHT, n_ops), 2);
  sg_op_info conv1 = op_of(g, m.conv1_op), conv2 = op_of(g, m.conv2_op);
  for (int32_t k = n_ops; k < sg_graph_num_ops(g); k++) {
    sg_op_info o = op_of(g, k);
    if (o.kind == SG_OP_CONV2D_BACKWARD_DATA) {
      assert_int_equal(o.inputs[1], m.c2w.id);
      sg_attr shape;
      assert_int_equal(sg_graph_op_attr(g, k, 4, &shape), SG_OK);
      assert_string_equal(shape.name, "input_shape");
      sg_tensor_info in2 = info_of(g, (sg_tensor){conv2.inputs[0]});
      assert_memory_equal(shape.ints, in2.dims, sizeof(int64_t) * 4);
      assert_string_equal(o.name, "conv2d_4/grad");
    }
    if (o.kind == SG_OP_CONV2D_BACKWARD_WEIGHT && o.inputs[1] == conv1.inputs[0]) {
      /* conv1's weight gradient reads the images: that is fine. */
      assert_int_equal(info_of(g, (sg_tensor){o.outputs[0]}).dims[0], 4);
    }
    /* conv1's bias gradient: reduce_sum over N, H, W. */
    if (o.kind == SG_OP_REDUCE_SUM) {
      sg_attr axes;
      assert_int_equal(sg_graph_op_attr(g, k, 0, &axes), SG_OK);
      assert_int_equal(axes.count, 3);
    }
    /* No gradient op reads the running statistics except the inference
     * form's batch_norm_backward. */
    for (int i = 0; i < o.n_inputs; i++) {
      if (o.inputs[i] == m.bn1m.id || o.inputs[i] == m.bn1v.id)
        fail_msg("op '%s' reads bn1's running stats", o.name);
      if ((o.inputs[i] == m.bn2m.id || o.inputs[i] == m.bn2v.id) && o.kind != SG_OP_BATCH_NORM_BACKWARD)
        fail_msg("op '%s' reads bn2's running stats", o.name);
    }
  }
  assert_int_equal(count_kind(g, SG_OP_REDUCE_SUM, n_ops), 1);
  /* Batch norm: training form reads the saved statistics, inference form
   * the running ones. */
  assert_int_equal(count_kind(g, SG_OP_BATCH_NORM_BACKWARD, n_ops), 2);
  sg_op_info bn1 = op_of(g, m.bn1_op);
  for (int32_t k = n_ops; k < sg_graph_num_ops(g); k++) {
    sg_op_info o = op_of(g, k);
    if (o.kind != SG_OP_BATCH_NORM_BACKWARD) continue;
    sg_attr training;
    assert_int_equal(sg_graph_op_attr(g, k, 1, &training), SG_OK);
    if (training.i == 1) {
      assert_int_equal(o.inputs[3], bn1.outputs[1]);
      assert_int_equal(o.inputs[4], bn1.outputs[2]);
    } else {
      assert_int_equal(o.inputs[3], m.bn2m.id);
      assert_int_equal(o.inputs[4], m.bn2v.id);
    }
  }
  assert_int_equal(count_kind(g, SG_OP_MAX_POOL2D_BACKWARD, n_ops), 1);
  assert_int_equal(count_kind(g, SG_OP_BROADCAST_TO, n_ops), 1); /* global average pool */
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  sg_graph_destroy(g);
}

/* A parameter consumed twice gets the sum of both contributions; one
 * gradient shared by two parameters is copied for the second. */
static void test_fan_out(void **state) {
  (void)state;
  sg_graph *g = fresh();
  sg_tensor x = INPUT(g, "x", SG_F32, 4, 3);
  sg_tensor w = PARAM(g, "w", 3), v = PARAM(g, "v", 3), p = PARAM(g, "p", 4, 3), q = PARAM(g, "q", 4, 3);
  /* loss = sum(x*w + w) + sum(v*v) + sum(p + q) */
  sg_tensor a = sg_add(g, sg_mul(g, x, w), w);
  sg_tensor b = sg_mul(g, v, v);
  sg_tensor c = sg_add(g, p, q);
  sg_tensor loss = sg_add(g, sg_add(g, sg_reduce_sum(g, a, 0, NULL, 0), sg_reduce_sum(g, b, 0, NULL, 0)),
                          sg_reduce_sum(g, c, 0, NULL, 0));
  int32_t n_ops = sg_graph_num_ops(g);
  assert_status(sg_graph_backward(g, loss), SG_OK, NULL);
  sg_tensor wg = EXPECT_GRAD(g, w, n_ops), vg = EXPECT_GRAD(g, v, n_ops);
  sg_tensor pg = EXPECT_GRAD(g, p, n_ops), qg = EXPECT_GRAD(g, q, n_ops);
  /* w and v: their gradients are sums (add ops) of two gradient tensors. */
  sg_tensor sums[] = {wg, vg};
  for (int i = 0; i < 2; i++) {
    sg_op_info o = op_of(g, info_of(g, sums[i]).producer);
    assert_int_equal(o.kind, SG_OP_ADD);
    assert_int_equal(info_of(g, (sg_tensor){o.inputs[0]}).role, SG_ROLE_GRADIENT);
    assert_int_equal(info_of(g, (sg_tensor){o.inputs[1]}).role, SG_ROLE_GRADIENT);
    assert_int_not_equal(o.inputs[0], o.inputs[1]);
  }
  /* The sum for w is named after w: it is the parameter's own op. */
  assert_string_equal(op_of(g, info_of(g, wg).producer).name, "w/grad");
  /* p and q share one pass-through gradient: distinct tensors all the same. */
  assert_int_not_equal(pg.id, qg.id);
  sg_op_info copy = op_of(g, info_of(g, qg).producer);
  assert_int_equal(copy.kind, SG_OP_RESHAPE);
  assert_int_equal(copy.inputs[0], info_of(g, pg).producer >= 0 ? pg.id : -2);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  sg_graph_destroy(g);

  /* The loss as the direct sum of a parameter: its gradient would be the
   * seed, a constant, so it is copied into a gradient of its own. */
  g = fresh();
  sg_tensor s = PARAM(g, "s", 1);
  n_ops = sg_graph_num_ops(g);
  assert_status(sg_graph_backward(g, sg_add_scalar(g, s, 2.0)), SG_OK, NULL);
  sg_tensor sgrad = EXPECT_GRAD(g, s, n_ops);
  assert_int_equal(op_of(g, info_of(g, sgrad).producer).kind, SG_OP_RESHAPE);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  sg_graph_destroy(g);
}

/* A parameter named p0, p1, ... appended to ps. */
static sg_tensor auto_param(sg_graph *g, sg_tensor *ps, int *np, int ndim, const int64_t *dims) {
  char name[16];
  snprintf(name, sizeof name, "p%d", *np);
  sg_tensor t = sg_parameter(g, name, SG_F32, ndim, dims, NULL);
  ps[(*np)++] = t;
  return t;
}

/* Every forward kind with a rule, in one graph: each parameter gets its
 * gradient and the verifier (which re-infers every op) accepts the result. */
static void test_every_rule(void **state) {
  (void)state;
  sg_graph *g = fresh();
  sg_tensor losses[64];
  int n = 0;
#define SUM(t) (losses[n++] = sg_reduce_sum(g, t, 0, NULL, 0))
  sg_tensor ps[64];
  int np = 0;
#define P(...) auto_param(g, ps, &np, NDIM(__VA_ARGS__), D(__VA_ARGS__))
  /* Elementwise with broadcasting. */
  sg_tensor a = P(2, 3, 4), b = P(3, 1), cc = P(4);
  SUM(sg_sub(g, a, b));
  SUM(sg_div(g, b, sg_add_scalar(g, sg_mul(g, a, a), 1.0)));
  SUM(sg_mul_scalar(g, sg_pow_scalar(g, cc, 3.0), 0.5));
  SUM(sg_pow_scalar(g, cc, 2.0));
  SUM(sg_pow_scalar(g, cc, 1.0));
  SUM(sg_pow_scalar(g, cc, 0.0));
  SUM(sg_clip(g, sg_gelu(g, sg_tanh(g, sg_sigmoid(g, a)), 1), -0.5, 0.5));
  SUM(sg_gelu(g, a, 0));
  /* Elementwise math, max/min, where, cast, layer norm (issue 17). */
  SUM(sg_erf(g, sg_neg(g, sg_abs(g, sg_reciprocal(g, sg_sqrt(g, sg_log(g, sg_exp(g, a))))))));
  SUM(sg_add(g, sg_max(g, a, b), sg_min(g, b, cc)));
  static const uint8_t conds[4] = {1, 0, 0, 1};
  SUM(sg_where(g, sg_constant(g, "cond", SG_BOOL, 1, D(4), conds), a, b));
  SUM(sg_mul(g, sg_sign(g, a), sg_cast(g, a, SG_F32)));
  sg_tensor lx = P(2, 3, 4);
  SUM(sg_layer_norm(g, lx, P(3, 4), P(3, 4), 1, 1e-5));
  SUM(sg_layer_norm(g, lx, SG_NO_TENSOR, SG_NO_TENSOR, -1, 1e-3));
  /* matmul: plain, 1-D on either side and both, batched with broadcasting. */
  sg_tensor m1 = P(3, 4), m2 = P(4, 5), v4 = P(4), bm = P(2, 1, 3, 4), bn = P(5, 4, 6);
  SUM(sg_matmul(g, m1, m2));
  SUM(sg_matmul(g, v4, m2));
  SUM(sg_matmul(g, m1, v4));
  SUM(sg_matmul(g, v4, v4));
  SUM(sg_matmul(g, bm, bn));
  SUM(sg_matmul(g, bm, v4));
  SUM(sg_matmul(g, v4, bn));
  /* gemm: every transpose combination, alpha, beta and c shapes. */
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      sg_gemm_params gp = SG_GEMM_PARAMS_INIT;
      gp.trans_a = ta;
      gp.trans_b = tb;
      gp.alpha = 0.5;
      gp.beta = ta ? 2.0 : 1.0;
      sg_tensor ga = ta ? P(4, 3) : P(3, 4), gb = tb ? P(5, 4) : P(4, 5);
      sg_tensor gc = tb ? P(3, 1) : (ta ? P(3, 5) : P(5));
      SUM(sg_gemm(g, ga, gb, gc, &gp));
    }
  /* Pooling, shape ops, softmax, reductions, dropout. */
  sg_tensor img = P(2, 3, 6, 6);
  sg_pool2d_params pp = SG_POOL2D_PARAMS_INIT;
  pp.kernel[0] = pp.kernel[1] = 3;
  pp.stride[0] = pp.stride[1] = 2;
  pp.padding[0] = pp.padding[1] = pp.padding[2] = pp.padding[3] = 1;
  pp.ceil_mode = 1;
  pp.count_include_pad = 0;
  SUM(sg_avg_pool2d(g, img, &pp));
  SUM(sg_max_pool2d(g, img, &pp));
  SUM(sg_global_avg_pool(g, img));
  SUM(sg_reshape(g, sg_transpose(g, img, 4, D(0, 2, 3, 1)), 2, D(-1, 3)));
  sg_tensor k1 = P(2, 2, 4), k2 = P(2, 5, 4);
  sg_tensor parts[] = {k1, INPUT(g, "fixed", SG_F32, 2, 1, 4), k2};
  SUM(sg_concat(g, 3, parts, -2));
  SUM(sg_concat(g, 1, &k1, 0));
  sg_tensor sm = P(3, 7);
  SUM(sg_mul(g, sg_softmax(g, sm, 0), sg_log_softmax(g, sm, -1)));
  SUM(sg_reduce_mean(g, sg_reduce_sum(g, a, 2, D(0, -1), 1), 1, D(1), 0));
  SUM(sg_reduce_mean(g, a, 0, NULL, 1));
  SUM(sg_dropout(g, a, 0.25, 7, 1));
  SUM(sg_dropout(g, a, 0.25, 7, 0));
  sg_tensor labels = INPUT(g, "labels", SG_I64, 3);
  SUM(sg_cross_entropy(g, sm, labels, SG_REDUCTION_NONE));
  losses[n++] = sg_cross_entropy(g, sm, labels, SG_REDUCTION_SUM);
  /* sum_to / broadcast_to as forward ops (through the generic builder). */
  sg_tensor st_out = SG_NO_TENSOR, bt_out = SG_NO_TENSOR;
  sg_attr sa = {.name = "shape", .type = SG_ATTR_INTS, .count = 2, .ints = D(3, 1)};
  assert_int_equal(sg_graph_add_op(g, SG_OP_SUM_TO, 1, &a, 1, &sa, 1, &st_out, NULL), SG_OK);
  SUM(st_out);
  sg_attr ba = {.name = "shape", .type = SG_ATTR_INTS, .count = 3, .ints = D(2, 3, 4)};
  assert_int_equal(sg_graph_add_op(g, SG_OP_BROADCAST_TO, 1, &b, 1, &ba, 1, &bt_out, NULL), SG_OK);
  SUM(bt_out);
  assert_true(n <= 64 && np <= 64);
  sg_tensor loss = losses[0];
  for (int i = 1; i < n; i++) loss = sg_add(g, loss, losses[i]);
  assert_int_equal(sg_graph_status(g), SG_OK);
  int32_t n_ops = sg_graph_num_ops(g), n_tensors = sg_graph_num_tensors(g);
  assert_status(sg_graph_backward(g, loss), SG_OK, NULL);
  for (int i = 0; i < np; i++) EXPECT_GRAD(g, ps[i], n_ops);
  expect_roles_after(g, n_tensors);
  /* Dropout: training form through its mask, inference form passes dy. */
  assert_int_equal(count_kind(g, SG_OP_DROPOUT_BACKWARD, n_ops), 1);
  assert_int_equal(count_kind(g, SG_OP_SLICE, n_ops), 2); /* the fixed part of the concat gets none */
  assert_int_equal(count_kind(g, SG_OP_CROSS_ENTROPY_BACKWARD, n_ops), 2);
  assert_int_equal(count_kind(g, SG_OP_LAYER_NORM_BACKWARD, n_ops), 2);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
#undef SUM
#undef P
  sg_graph_destroy(g);
}

static void test_misuse(void **state) {
  (void)state;
  assert_status(sg_graph_backward(NULL, (sg_tensor){0}), SG_ERR_INVALID_ARG, "graph is NULL");
  sg_graph *g = fresh();
  mlp m = build_mlp(g);
  /* Not one element. */
  sg_tensor h = sg_linear(g, m.x, m.w1, m.b1);
  assert_status(sg_graph_backward(g, h), SG_ERR_SHAPE,
                "loss 'gemm_5' [8,32] f32 must have exactly one element");
  assert_status(sg_graph_finalize(g), SG_ERR_SHAPE, NULL); /* sticky */
  sg_graph_destroy(g);

  g = fresh();
  m = build_mlp(g);
  sg_tensor isum = sg_reduce_sum(g, m.labels, 0, NULL, 0);
  assert_status(sg_graph_backward(g, isum), SG_ERR_DTYPE, "[] i64 must be a float tensor");
  sg_graph_destroy(g);

  g = fresh();
  m = build_mlp(g);
  assert_status(sg_graph_backward(g, SG_NO_TENSOR), SG_ERR_INVALID_ARG, "loss is SG_NO_TENSOR");
  sg_graph_destroy(g);
  g = fresh();
  m = build_mlp(g);
  assert_status(sg_graph_backward(g, (sg_tensor){9999}), SG_ERR_INVALID_ARG, "not a tensor of this graph");
  sg_graph_destroy(g);

  /* A finalized graph is frozen; the graph's status stays OK. */
  g = fresh();
  m = build_mlp(g);
  int32_t n_ops = sg_graph_num_ops(g);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  assert_status(sg_graph_backward(g, m.loss), SG_ERR_STATE, "finalized");
  assert_int_equal(sg_graph_status(g), SG_OK);
  assert_int_equal(sg_graph_num_ops(g), n_ops);
  sg_graph_destroy(g);

  /* A sticky builder error is returned as it is. */
  g = fresh();
  m = build_mlp(g);
  assert_true(sg_add(g, m.x, m.labels).id < 0);
  assert_int_equal(sg_graph_backward(g, m.loss), SG_ERR_DTYPE);
  sg_graph_destroy(g);

  /* A loss that depends on no parameter. */
  g = fresh();
  m = build_mlp(g);
  sg_tensor no_params = sg_reduce_mean(g, m.x, 0, NULL, 0);
  n_ops = sg_graph_num_ops(g);
  assert_status(sg_graph_backward(g, no_params), SG_ERR_INVALID_ARG, "depends on no parameter");
  assert_int_equal(sg_graph_num_ops(g), n_ops); /* nothing appended */
  sg_graph_destroy(g);

  /* Twice: the gradient names are taken. */
  g = fresh();
  m = build_mlp(g);
  assert_int_equal(sg_graph_backward(g, m.loss), SG_OK);
  assert_status(sg_graph_backward(g, m.loss), SG_ERR_DUPLICATE, "'fc1.weight.grad' is already used");
  sg_graph_destroy(g);

  /* An op without a gradient between a parameter and the loss (a backward kind used forward). */
  g = fresh();
  sg_tensor w = PARAM(g, "w", 4, 3);
  sg_tensor rb_in[] = {w, w};
  sg_tensor cut = SG_NO_TENSOR;
  assert_int_equal(sg_graph_add_op(g, SG_OP_RELU_BACKWARD, 2, rb_in, 0, NULL, 1, &cut, NULL), SG_OK);
  n_ops = sg_graph_num_ops(g);
  assert_status(sg_graph_backward(g, sg_reduce_sum(g, cut, 0, NULL, 0)), SG_ERR_UNSUPPORTED,
                "no gradient for op 'relu_backward_0' (relu_backward)");
  assert_int_equal(sg_graph_num_ops(g), n_ops + 1); /* only the reduce_sum */
  sg_graph_destroy(g);
  /* ... is fine off the path (here: on an input). */
  g = fresh();
  w = PARAM(g, "w", 4, 3);
  sg_tensor x = INPUT(g, "x", SG_F32, 4, 3);
  rb_in[0] = rb_in[1] = x;
  assert_int_equal(sg_graph_add_op(g, SG_OP_RELU_BACKWARD, 2, rb_in, 0, NULL, 1, &cut, NULL), SG_OK);
  sg_tensor sum = sg_add(g, sg_reduce_sum(g, cut, 0, NULL, 0), sg_reduce_sum(g, w, 0, NULL, 0));
  assert_status(sg_graph_backward(g, sum), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  sg_graph_destroy(g);
  /* A forward slice has a gradient: concat of zeros and dy (its values: test_gradcheck). */
  g = fresh();
  w = PARAM(g, "w", 4, 3);
  n_ops = sg_graph_num_ops(g);
  assert_status(sg_graph_backward(g, sg_reduce_sum(g, sg_slice(g, w, 0, 1, 2), 0, NULL, 0)), SG_OK, NULL);
  assert_int_equal(count_kind(g, SG_OP_CONCAT, n_ops), 1);
  assert_int_equal(count_kind(g, SG_OP_BROADCAST_TO, n_ops), 3); /* reduce_sum's, and the zeros' two */
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  sg_graph_destroy(g);
  /* The batch statistics of batch norm are not differentiated. */
  g = fresh();
  sg_tensor bn_in[] = {sg_relu(g, PARAM(g, "x", 4, 3)), PARAM(g, "gamma", 3), PARAM(g, "beta", 3),
                       STATE(g, "rm", 3), STATE(g, "rv", 3)};
  sg_tensor bn_out[3];
  assert_int_equal(sg_graph_add_op(g, SG_OP_BATCH_NORM, 5, bn_in, 0, NULL, 3, bn_out, NULL), SG_OK);
  assert_status(sg_graph_backward(g, sg_reduce_sum(g, bn_out[1], 0, NULL, 0)), SG_ERR_UNSUPPORTED,
                "no gradient through output 1");
  sg_graph_destroy(g);

  /* sg_graph_grad. */
  g = fresh();
  m = build_mlp(g);
  sg_tensor gt;
  assert_status(sg_graph_grad(NULL, m.w1, &gt), SG_ERR_INVALID_ARG, "NULL");
  assert_status(sg_graph_grad(g, m.w1, NULL), SG_ERR_INVALID_ARG, "NULL");
  assert_status(sg_graph_grad(g, (sg_tensor){-1}, &gt), SG_ERR_RANGE, "out of range");
  assert_status(sg_graph_grad(g, m.w1, &gt), SG_ERR_NOT_FOUND, "sg_graph_backward was not run");
  sg_graph_destroy(g);
}

static void test_optimizer_misuse(void **state) {
  (void)state;
  sg_graph *g = fresh();
  mlp m = build_mlp(g);
  sg_tensor lr = INPUT(g, "lr", SG_F32, 1);
  assert_status(sg_graph_add_sgd(NULL, lr, NULL), SG_ERR_INVALID_ARG, "graph is NULL");
  assert_status(sg_graph_add_sgd(g, lr, NULL), SG_ERR_STATE, "call sg_graph_backward() first");
  sg_graph_destroy(g);

  g = fresh();
  m = build_mlp(g);
  assert_int_equal(sg_graph_backward(g, m.loss), SG_OK);
  sg_tensor lr2 = INPUT(g, "lr", SG_F32, 2);
  assert_status(sg_graph_add_adamw(g, lr2, NULL), SG_ERR_SHAPE, "lr 'lr' [2] f32 must be a one-element f32");
  sg_graph_destroy(g);

  g = fresh();
  m = build_mlp(g);
  assert_int_equal(sg_graph_backward(g, m.loss), SG_OK);
  assert_status(sg_graph_add_sgd(g, SG_NO_TENSOR, NULL), SG_ERR_INVALID_ARG, "lr is SG_NO_TENSOR");
  sg_graph_destroy(g);

  g = fresh();
  m = build_mlp(g);
  assert_int_equal(sg_graph_backward(g, m.loss), SG_OK);
  lr = INPUT(g, "lr", SG_F32, 1);
  sg_sgd_params bad = SG_SGD_PARAMS_INIT;
  bad.size = 3;
  assert_status(sg_graph_add_sgd(g, lr, &bad), SG_ERR_INVALID_ARG, "SG_SGD_PARAMS_INIT");
  sg_graph_destroy(g);

  g = fresh();
  m = build_mlp(g);
  assert_int_equal(sg_graph_backward(g, m.loss), SG_OK);
  lr = INPUT(g, "lr", SG_F32, 1);
  bad = (sg_sgd_params)SG_SGD_PARAMS_INIT;
  bad.momentum = -1;
  assert_status(sg_graph_add_sgd(g, lr, &bad), SG_ERR_ATTRIBUTE, "momentum");
  sg_graph_destroy(g);

  /* Twice: every parameter already has its update. */
  g = fresh();
  m = build_mlp(g);
  assert_int_equal(sg_graph_backward(g, m.loss), SG_OK);
  lr = INPUT(g, "lr", SG_F32, 1);
  assert_int_equal(sg_graph_add_sgd(g, lr, NULL), SG_OK);
  assert_status(sg_graph_add_adamw(g, lr, NULL), SG_ERR_STATE, "already has an update op");
  sg_graph_destroy(g);

  /* A state name in use. */
  g = fresh();
  m = build_mlp(g);
  assert_int_equal(sg_graph_backward(g, m.loss), SG_OK);
  lr = INPUT(g, "lr", SG_F32, 1);
  INPUT(g, "fc2.bias.exp_avg_sq", SG_F32, 1);
  assert_status(sg_graph_add_adamw(g, lr, NULL), SG_ERR_DUPLICATE, "'fc2.bias.exp_avg_sq' is already used");
  sg_graph_destroy(g);

  g = fresh();
  m = build_mlp(g);
  assert_int_equal(sg_graph_backward(g, m.loss), SG_OK);
  lr = INPUT(g, "lr", SG_F32, 1);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  assert_status(sg_graph_add_sgd(g, lr, NULL), SG_ERR_STATE, "finalized");
  sg_graph_destroy(g);
}

/* The state tensors of one parameter: name, role, shape, and no stored
 * initializer (a session starts them at zero; see train.h). */
static void expect_state(const sg_graph *g, const char *name, const sg_tensor_info *like) {
  sg_tensor t;
  assert_status(sg_graph_find_tensor(g, name, &t), SG_OK, NULL);
  sg_tensor_info ti = info_of(g, t);
  assert_int_equal(ti.role, SG_ROLE_OPTIMIZER_STATE);
  assert_null(ti.data);
  if (like) {
    assert_int_equal(ti.dtype, like->dtype);
    assert_int_equal(ti.ndim, like->ndim);
    for (int i = 0; i < ti.ndim; i++) assert_int_equal(ti.dims[i], like->dims[i]);
  } else {
    assert_int_equal(ti.dtype, SG_F32);
    assert_int_equal(ti.numel, 1);
  }
}

/* Saves, loads and checks that the gradients are still found by name. */
static void roundtrip(sg_graph *g, const sg_tensor *params, int n) {
  void *buf = NULL;
  size_t size = 0;
  assert_status(sg_graph_save_to_memory(g, &buf, &size), SG_OK, NULL);
  sg_graph *h = NULL;
  assert_status(sg_graph_load_from_memory(buf, size, &h), SG_OK, NULL);
  uint64_t ha, hb;
  assert_int_equal(sg_graph_hash(g, SG_HASH_WEIGHTS, &ha), SG_OK);
  assert_int_equal(sg_graph_hash(h, SG_HASH_WEIGHTS, &hb), SG_OK);
  assert_true(ha == hb);
  for (int i = 0; i < n; i++) {
    sg_tensor a, b;
    assert_int_equal(sg_graph_grad(g, params[i], &a), SG_OK);
    assert_status(sg_graph_grad(h, params[i], &b), SG_OK, NULL);
    assert_int_equal(a.id, b.id);
    assert_string_equal(info_of(g, a).name, info_of(h, b).name);
    assert_int_equal(info_of(h, b).role, SG_ROLE_GRADIENT);
  }
  sg_free(buf);
  sg_graph_destroy(h);
}

static void test_train_graphs(void **state) {
  (void)state;
  /* MLP + SGD with Nesterov momentum and weight decay. */
  sg_graph *g = fresh();
  mlp m = build_mlp(g);
  sg_tensor lr = sg_input(g, "lr", SG_F32, 0, NULL);
  assert_int_equal(sg_graph_backward(g, m.loss), SG_OK);
  int32_t n_ops = sg_graph_num_ops(g);
  sg_sgd_params sp = SG_SGD_PARAMS_INIT;
  sp.momentum = 0.9;
  sp.nesterov = 1;
  sp.weight_decay = 1e-4;
  assert_status(sg_graph_add_sgd(g, lr, &sp), SG_OK, NULL);
  sg_tensor params[] = {m.w1, m.b1, m.w2, m.b2};
  assert_int_equal(count_kind(g, SG_OP_SGD_UPDATE, n_ops), 4);
  assert_int_equal(sg_graph_num_ops(g) - n_ops, 4);
  for (int i = 0; i < 4; i++) {
    sg_tensor_info pi = info_of(g, params[i]);
    char name[300];
    snprintf(name, sizeof name, "%s.momentum_buffer", pi.name);
    expect_state(g, name, &pi);
    /* The update reads the parameter's gradient. */
    sg_op_info o = op_of(g, n_ops + i);
    sg_tensor gt;
    assert_int_equal(sg_graph_grad(g, params[i], &gt), SG_OK);
    assert_int_equal(o.inputs[0], params[i].id);
    assert_int_equal(o.inputs[1], gt.id);
    assert_int_equal(o.inputs[2], lr.id);
  }
  sg_tensor none;
  assert_int_equal(sg_graph_find_tensor(g, "unused.momentum_buffer", &none), SG_ERR_NOT_FOUND);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  roundtrip(g, params, 4);
  sg_graph_destroy(g);

  /* Plain SGD: no state. */
  g = fresh();
  m = build_mlp(g);
  lr = INPUT(g, "lr", SG_F32, 1);
  int32_t n_tensors = sg_graph_num_tensors(g);
  assert_int_equal(sg_graph_backward(g, m.loss), SG_OK);
  assert_int_equal(sg_graph_add_sgd(g, lr, NULL), SG_OK);
  for (int32_t t = n_tensors; t < sg_graph_num_tensors(g); t++)
    assert_int_not_equal(info_of(g, (sg_tensor){t}).role, SG_ROLE_OPTIMIZER_STATE);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  sg_graph_destroy(g);

  /* AdamW's two parameter groups (decay_min_ndim 2): the matrices decay, the biases do not. */
  g = fresh();
  m = build_mlp(g);
  lr = INPUT(g, "lr", SG_F32, 1);
  assert_int_equal(sg_graph_backward(g, m.loss), SG_OK);
  n_ops = sg_graph_num_ops(g);
  sg_adamw_params ap = SG_ADAMW_PARAMS_INIT;
  ap.weight_decay = 0.1;
  ap.decay_min_ndim = 2;
  assert_status(sg_graph_add_adamw(g, lr, &ap), SG_OK, NULL);
  for (int32_t k = n_ops; k < sg_graph_num_ops(g); k++) {
    sg_op_info o = op_of(g, k);
    sg_attr wd;
    assert_int_equal(sg_graph_op_attr(g, k, 3, &wd), SG_OK);
    assert_string_equal(wd.name, "weight_decay");
    bool matrix = info_of(g, (sg_tensor){o.inputs[0]}).ndim == 2;
    assert_true(wd.f == (matrix ? 0.1 : 0.0));
  }
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  sg_graph_destroy(g);
  g = fresh();
  m = build_mlp(g);
  lr = INPUT(g, "lr", SG_F32, 1);
  assert_int_equal(sg_graph_backward(g, m.loss), SG_OK);
  ap.decay_min_ndim = -1;
  assert_status(sg_graph_add_adamw(g, lr, &ap), SG_ERR_ATTRIBUTE, "decay_min_ndim -1 is not in [0, 8]");
  sg_graph_destroy(g);

  /* CNN with batch norm + AdamW. */
  g = fresh();
  cnn c = build_cnn(g);
  lr = sg_input(g, "lr", SG_F32, 0, NULL);
  assert_int_equal(sg_graph_backward(g, c.loss), SG_OK);
  n_ops = sg_graph_num_ops(g);
  ap = (sg_adamw_params)SG_ADAMW_PARAMS_INIT;
  ap.weight_decay = 0.05;
  assert_status(sg_graph_add_adamw(g, lr, &ap), SG_OK, NULL);
  sg_tensor cparams[] = {c.c1w, c.c1b, c.bn1g, c.bn1b, c.c2w, c.bn2g, c.bn2b, c.fcw, c.fcb};
  assert_int_equal(count_kind(g, SG_OP_ADAMW_UPDATE, n_ops), 9);
  for (int i = 0; i < 9; i++) {
    sg_tensor_info pi = info_of(g, cparams[i]);
    char name[300];
    snprintf(name, sizeof name, "%s.exp_avg", pi.name);
    expect_state(g, name, &pi);
    snprintf(name, sizeof name, "%s.exp_avg_sq", pi.name);
    expect_state(g, name, &pi);
    snprintf(name, sizeof name, "%s.step", pi.name);
    expect_state(g, name, NULL);
  }
  sg_attr wd;
  assert_int_equal(sg_graph_op_attr(g, n_ops, 3, &wd), SG_OK);
  assert_string_equal(wd.name, "weight_decay");
  assert_true(wd.f == 0.05);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  roundtrip(g, cparams, 9);
  sg_graph_destroy(g);
}

/* Out-of-memory at every allocation of backward + optimizer: a clean
 * error, never a crash or a leak (checked under ASan). */
static void test_allocation_failures(void **state) {
  (void)state;
  for (long n = 0;; n++) {
    sg_graph *g = fresh();
    cnn c = build_cnn(g);
    sg_tensor lr = sg_input(g, "lr", SG_F32, 0, NULL);
    sg__alloc_fail_after(n);
    sg_status st = sg_graph_backward(g, c.loss);
    sg_status st2 = st == SG_OK ? sg_graph_add_adamw(g, lr, NULL) : st;
    sg__alloc_fail_after(-1);
    if (st2 == SG_OK) {
      assert_status(sg_graph_finalize(g), SG_OK, NULL);
      sg_graph_destroy(g);
      assert_true(n > 10);
      break;
    }
    assert_int_equal(st2, SG_ERR_NO_MEMORY);
    assert_int_equal(sg_graph_finalize(g), SG_ERR_NO_MEMORY);
    sg_graph_destroy(g);
  }
}

/* ---- numeric check of every rule (test_ncheck.h) ----------------------------- */

static void test_rules_against_finite_differences(void **state) {
  (void)state;
  ncase c;
  sg_conv2d_params cp = {sizeof cp, {2, 2}, {1, 0, 1, 2}, {1, 1}, 2};
  c = nbegin();
  ncheck(&c, "conv2d", sg_conv2d(c.g, NP(&c, 2, 4, 7, 6), NP(&c, 6, 2, 3, 3), NP(&c, 6), &cp), NULL);
  sg_conv2d_params dil = {sizeof dil, {1, 1}, {2, 2, 2, 2}, {2, 2}, 1};
  c = nbegin();
  ncheck(&c, "conv2d dilated", sg_conv2d(c.g, NP(&c, 1, 2, 5, 5), NP(&c, 3, 2, 3, 3), SG_NO_TENSOR, &dil),
         NULL);
  for (int training = 0; training < 2; training++) {
    c = nbegin();
    sg_tensor x = NP(&c, 3, 2, 3, 2), gm = NP(&c, 2), bt = NP(&c, 2);
    float var[2] = {0.5f, 2.0f};
    sg_tensor rm = STATE(c.g, "rm", 2),
              rvar = sg_graph_add_tensor(c.g, "rv", SG_F32, SG_ROLE_STATE, 1, D(2), var);
    sg_batch_norm_params bp = SG_BATCH_NORM_PARAMS_INIT;
    bp.training = training;
    ncheck(&c, "batch_norm", sg_batch_norm(c.g, x, gm, bt, rm, rvar, &bp), NULL);
  }
  c = nbegin();
  ncheck(&c, "activations",
         sg_clip(c.g, sg_gelu(c.g, sg_tanh(c.g, sg_sigmoid(c.g, sg_relu(c.g, NP(&c, 3, 4)))), 1), 0.3, 0.4),
         NULL);
  c = nbegin();
  ncheck(&c, "gelu erf", sg_gelu(c.g, NP(&c, 3, 4), 0), NULL);
  c = nbegin();
  ncheck(&c, "add, sub", sg_sub(c.g, sg_add(c.g, NP(&c, 2, 3, 4), NP(&c, 3, 1)), NP(&c, 4)), NULL);
  c = nbegin();
  ncheck(&c, "mul, div", sg_div(c.g, sg_mul(c.g, NP(&c, 2, 1, 4), NP(&c, 3, 1)), NPOS(&c, 4)), NULL);
  c = nbegin();
  sg_tensor sq = NP(&c, 3);
  ncheck(&c, "mul with itself", sg_mul(c.g, sq, sq), NULL);
  c = nbegin();
  sg_tensor s = NPOS(&c, 5);
  sg_tensor sc = sg_add(c.g, sg_mul_scalar(c.g, sg_pow_scalar(c.g, s, 3), -1.5), sg_pow_scalar(c.g, s, 2));
  sc = sg_add(c.g, sg_add(c.g, sc, sg_pow_scalar(c.g, s, 0.5)),
              sg_add_scalar(c.g, sg_pow_scalar(c.g, s, -1), 2));
  ncheck(&c, "scalar ops", sg_add(c.g, sc, sg_add(c.g, sg_pow_scalar(c.g, s, 1), sg_pow_scalar(c.g, s, 0))),
         NULL);
  static const int64_t mm[][2][4] = {
      {{3, 4}, {4, 5}},          {{4}, {4, 5}},    {{3, 4}, {4}},    {{4}, {4}},
      {{2, 1, 3, 4}, {5, 4, 2}}, {{2, 3, 4}, {4}}, {{4}, {2, 4, 3}}, {{3, 4}, {2, 4, 3}},
  };
  for (size_t i = 0; i < sizeof mm / sizeof mm[0]; i++) {
    int na = 0, nb = 0;
    while (na < 4 && mm[i][0][na]) na++;
    while (nb < 4 && mm[i][1][nb]) nb++;
    c = nbegin();
    sg_tensor a = nparam(&c, 0, na, mm[i][0]), b = nparam(&c, 0, nb, mm[i][1]);
    ncheck(&c, "matmul", sg_matmul(c.g, a, b), NULL);
  }
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++)
      for (int cs = 0; cs < 3; cs++) {
        sg_gemm_params gp = {sizeof gp, ta, tb, 0.7, cs == 1 ? 1.0 : -2.0};
        c = nbegin();
        sg_tensor a = ta ? NP(&c, 4, 3) : NP(&c, 3, 4), b = tb ? NP(&c, 5, 4) : NP(&c, 4, 5);
        sg_tensor cc = cs == 0 ? NP(&c, 5) : cs == 1 ? NP(&c, 3, 5) : NP(&c, 3, 1);
        ncheck(&c, "gemm", sg_gemm(c.g, a, b, cc, &gp), NULL);
      }
  sg_pool2d_params pp = {sizeof pp, {3, 2}, {2, 1}, {1, 0, 1, 0}, 1, 1};
  for (int k = 0; k < 3; k++) {
    c = nbegin();
    pp.count_include_pad = k == 2 ? 0 : 1;
    sg_tensor x = NP(&c, 2, 2, 6, 5);
    ncheck(&c, "pooling", k == 0 ? sg_max_pool2d(c.g, x, &pp) : sg_avg_pool2d(c.g, x, &pp), NULL);
  }
  c = nbegin();
  sg_tensor img = NP(&c, 2, 3, 4, 5);
  ncheck(&c, "global_avg_pool, flatten",
         sg_add(c.g, sg_flatten(c.g, sg_global_avg_pool(c.g, img), 1),
                sg_reduce_sum(c.g, sg_reshape(c.g, img, 3, D(2, 3, 20)), 1, D(2), 0)),
         NULL);
  c = nbegin();
  ncheck(&c, "transpose, reshape",
         sg_reshape(c.g, sg_transpose(c.g, NP(&c, 2, 3, 4), 3, D(2, 0, 1)), 2, D(4, -1)), NULL);
  c = nbegin();
  sg_tensor parts[] = {NP(&c, 2, 3), sg_input(c.g, "fixed", SG_F32, 2, D(2, 1)), NP(&c, 2, 2)};
  ncheck(&c, "concat", sg_concat(c.g, 3, parts, 1), NULL);
  c = nbegin();
  sg_tensor sm = NP(&c, 3, 4);
  ncheck(&c, "softmax, log_softmax", sg_mul(c.g, sg_softmax(c.g, sm, 0), sg_log_softmax(c.g, sm, -1)), NULL);
  static const int64_t labels[] = {1, 0, 4, 2};
  for (int red = 0; red < 3; red++) {
    c = nbegin();
    sg_tensor lab = INPUT(c.g, "labels", SG_I64, 4);
    ncheck(&c, "cross_entropy", sg_cross_entropy(c.g, NP(&c, 4, 5), lab, (sg_reduction)red), labels);
  }
  c = nbegin();
  sg_tensor rx = NP(&c, 2, 3, 4);
  sg_tensor red = sg_add(c.g, sg_reduce_mean(c.g, rx, 2, D(0, 2), 1), sg_reduce_sum(c.g, rx, 1, D(1), 1));
  ncheck(&c, "reductions", sg_add(c.g, red, sg_reduce_mean(c.g, rx, 0, NULL, 0)), NULL);
  c = nbegin();
  sg_tensor dx = NP(&c, 4, 5);
  ncheck(&c, "dropout", sg_add(c.g, sg_dropout(c.g, dx, 0.3, 11, 1), sg_dropout(c.g, dx, 0.3, 11, 0)), NULL);
  c = nbegin();
  sg_tensor st = NP(&c, 2, 3, 4), bt = NP(&c, 3, 1), so, bo;
  sg_attr sa = {.name = "shape", .type = SG_ATTR_INTS, .count = 2, .ints = D(3, 1)};
  sg_attr ba = {.name = "shape", .type = SG_ATTR_INTS, .count = 3, .ints = D(2, 3, 4)};
  assert_int_equal(sg_graph_add_op(c.g, SG_OP_SUM_TO, 1, &st, 1, &sa, 1, &so, NULL), SG_OK);
  assert_int_equal(sg_graph_add_op(c.g, SG_OP_BROADCAST_TO, 1, &bt, 1, &ba, 1, &bo, NULL), SG_OK);
  ncheck(&c, "sum_to, broadcast_to", sg_add(c.g, so, sg_reduce_sum(c.g, bo, 1, D(0), 0)), NULL);
  /* Fan-out through a small recurrent-like chain. */
  c = nbegin();
  sg_tensor w = NP(&c, 3, 3), v = NP(&c, 3);
  sg_tensor hh = sg_matmul(c.g, w, v);
  hh = sg_mul(c.g, sg_tanh(c.g, sg_matmul(c.g, w, hh)), hh);
  ncheck(&c, "fan-out", sg_add(c.g, sg_add(c.g, hh, v), v), NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mlp),
      cmocka_unit_test(test_cnn_with_batch_norm),
      cmocka_unit_test(test_fan_out),
      cmocka_unit_test(test_every_rule),
      cmocka_unit_test(test_misuse),
      cmocka_unit_test(test_optimizer_misuse),
      cmocka_unit_test(test_train_graphs),
      cmocka_unit_test(test_allocation_failures),
      cmocka_unit_test(test_rules_against_finite_differences),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
