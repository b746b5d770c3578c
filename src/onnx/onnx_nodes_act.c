/* Converters of the ONNX activations that sgrt builds from its own ops
 * (docs/onnx.md, "Activations"): LeakyRelu, PRelu, Elu, Celu, Selu,
 * Softplus, Softsign, HardSigmoid, HardSwish. Each is a short expression of
 * elementwise ops whose gradient autodiff already knows; with fusion (on by
 * default) the whole expression runs as part of one generated kernel, so an
 * activation costs what an op of its own would.
 *
 * The expressions keep NaN a NaN and take the relu of oneDNN (NaN -> 0)
 * only where its result is added to x - relu(x), which is NaN again:
 *   neg(x) = x - relu(x)      (min(x, 0), exactly)
 *   LeakyRelu = relu(x) + alpha * neg(x), PRelu the same with a slope tensor
 *   Elu       = relu(x) + alpha * (exp(neg(x)) - 1)
 *   Celu      = relu(x) + alpha * (exp(neg(x) / alpha) - 1)
 *   Selu      = gamma * (relu(x) + alpha * (exp(neg(x)) - 1))
 *   Softplus  = relu(x) + log(1 + exp(-|x|))   (no overflow for large x)
 *   Softsign  = x / (1 + |x|)
 *   HardSigmoid = clip(alpha * x + beta, 0, 1), HardSwish = x * HardSigmoid(x; 1/6, 1/2) */
#include <math.h>

#include "onnx/onnx_internal.h"

static sg_status input_x(ox_ctx *c, sg_tensor *x) {
  ox_value *v = sg__ox_input(c, c->node, 0);
  if (v == NULL) return sg__ox_node_error(c, SG_ERR_ARITY, "input 0 (X) is missing");
  return sg__ox_tensor(c, v, x);
}

static sg_status out0(ox_ctx *c, sg_tensor t) {
  SG_CHECK(sg__ox_built(c, t));
  return sg__ox_set_tensor(c, 0, t);
}

/* A float attribute as the decimal the exporter wrote (0.01, not 0.0099999998). */
static sg_status attr(ox_ctx *c, const char *name, double def, double *out) {
  SG_CHECK(sg__ox_attr_float(c, name, def, out));
  *out = sg__ox_snap_float(*out);
  if (!isfinite(*out)) return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "%s is %g; must be finite", name, *out);
  return SG_OK;
}

/* The negative part, min(x, 0), as x - relu(x). */
static sg_tensor negative_part(sg_graph *g, sg_tensor x, sg_tensor r) { return sg_sub(g, x, r); }

/* relu(x) + alpha * (exp(negative_part / scale) - 1): Elu (scale 1), Celu. */
static sg_tensor exp_linear(sg_graph *g, sg_tensor x, double alpha, double scale) {
  sg_tensor r = sg_relu(g, x), n = negative_part(g, x, r);
  if (scale != 1) n = sg_mul_scalar(g, n, 1 / scale);
  return sg_add(g, r, sg_mul_scalar(g, sg_add_scalar(g, sg_exp(g, n), -1), alpha));
}

static sg_status cv_leaky_relu(ox_ctx *c, const Onnx__NodeProto *n) {
  (void)n;
  static const char *const known[] = {"alpha", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  double alpha;
  SG_CHECK(attr(c, "alpha", 0.01, &alpha));
  sg_tensor x;
  SG_CHECK(input_x(c, &x));
  sg_tensor r = sg_relu(c->g, x);
  return out0(c, sg_add(c->g, r, sg_mul_scalar(c->g, negative_part(c->g, x, r), alpha)));
}

/* PRelu(X, slope): the slope broadcasts to X (PyTorch's nn.PReLU writes one
 * per channel, [C, 1, 1], or a single one). */
static sg_status cv_prelu(ox_ctx *c, const Onnx__NodeProto *n) {
  SG_CHECK(sg__ox_check_attrs(c, (const char *const[]){NULL}));
  ox_value *sv = sg__ox_input(c, n, 1);
  if (sv == NULL) return sg__ox_node_error(c, SG_ERR_ARITY, "input 1 (slope) is missing");
  sg_tensor x, slope;
  SG_CHECK(input_x(c, &x));
  SG_CHECK(sg__ox_tensor(c, sv, &slope));
  sg_tensor r = sg_relu(c->g, x);
  return out0(c, sg_add(c->g, r, sg_mul(c->g, negative_part(c->g, x, r), slope)));
}

static sg_status cv_elu(ox_ctx *c, const Onnx__NodeProto *n) {
  (void)n;
  static const char *const known[] = {"alpha", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  double alpha;
  SG_CHECK(attr(c, "alpha", 1.0, &alpha));
  sg_tensor x;
  SG_CHECK(input_x(c, &x));
  return out0(c, exp_linear(c->g, x, alpha, 1.0));
}

static sg_status cv_celu(ox_ctx *c, const Onnx__NodeProto *n) {
  (void)n;
  static const char *const known[] = {"alpha", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  double alpha;
  SG_CHECK(attr(c, "alpha", 1.0, &alpha));
  if (alpha == 0) return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "alpha is 0; Celu divides by it");
  sg_tensor x;
  SG_CHECK(input_x(c, &x));
  return out0(c, exp_linear(c->g, x, alpha, alpha));
}

static sg_status cv_selu(ox_ctx *c, const Onnx__NodeProto *n) {
  (void)n;
  static const char *const known[] = {"alpha", "gamma", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  double alpha, gamma;
  /* ONNX's defaults, the float32 values of the SELU paper's constants. */
  SG_CHECK(attr(c, "alpha", 1.67326319217681884765625, &alpha));
  SG_CHECK(attr(c, "gamma", 1.05070102214813232421875, &gamma));
  sg_tensor x;
  SG_CHECK(input_x(c, &x));
  return out0(c, sg_mul_scalar(c->g, exp_linear(c->g, x, alpha, 1.0), gamma));
}

static sg_status cv_softplus(ox_ctx *c, const Onnx__NodeProto *n) {
  (void)n;
  SG_CHECK(sg__ox_check_attrs(c, (const char *const[]){NULL}));
  sg_tensor x;
  SG_CHECK(input_x(c, &x));
  sg_graph *g = c->g;
  sg_tensor tail = sg_log(g, sg_add_scalar(g, sg_exp(g, sg_neg(g, sg_abs(g, x))), 1));
  return out0(c, sg_add(g, sg_relu(g, x), tail));
}

static sg_status cv_softsign(ox_ctx *c, const Onnx__NodeProto *n) {
  (void)n;
  SG_CHECK(sg__ox_check_attrs(c, (const char *const[]){NULL}));
  sg_tensor x;
  SG_CHECK(input_x(c, &x));
  return out0(c, sg_div(c->g, x, sg_add_scalar(c->g, sg_abs(c->g, x), 1)));
}

static sg_tensor hard_sigmoid(sg_graph *g, sg_tensor x, double alpha, double beta) {
  return sg_clip(g, sg_add_scalar(g, sg_mul_scalar(g, x, alpha), beta), 0, 1);
}

static sg_status cv_hard_sigmoid(ox_ctx *c, const Onnx__NodeProto *n) {
  (void)n;
  static const char *const known[] = {"alpha", "beta", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  double alpha, beta;
  SG_CHECK(attr(c, "alpha", 0.2, &alpha));
  SG_CHECK(attr(c, "beta", 0.5, &beta));
  sg_tensor x;
  SG_CHECK(input_x(c, &x));
  return out0(c, hard_sigmoid(c->g, x, alpha, beta));
}

static sg_status cv_hard_swish(ox_ctx *c, const Onnx__NodeProto *n) {
  (void)n;
  SG_CHECK(sg__ox_check_attrs(c, (const char *const[]){NULL}));
  sg_tensor x;
  SG_CHECK(input_x(c, &x));
  return out0(c, sg_mul(c->g, x, hard_sigmoid(c->g, x, 1.0 / 6, 0.5)));
}

const ox_op sg__ox_act_ops[] = {
    {"LeakyRelu", cv_leaky_relu, 1, 1, 1, 1},
    {"PRelu", cv_prelu, 2, 2, 1, 1},
    {"Elu", cv_elu, 1, 1, 1, 1},
    {"Celu", cv_celu, 1, 1, 1, 1},
    {"Selu", cv_selu, 1, 1, 1, 1},
    {"Softplus", cv_softplus, 1, 1, 1, 1},
    {"Softsign", cv_softsign, 1, 1, 1, 1},
    {"HardSigmoid", cv_hard_sigmoid, 1, 1, 1, 1},
    {"HardSwish", cv_hard_swish, 1, 1, 1, 1},
};
const int sg__ox_n_act_ops = (int)(sizeof sg__ox_act_ops / sizeof *sg__ox_act_ops);
