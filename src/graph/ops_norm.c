/* batch_norm over the channel dim 1, in training or inference form;
 * layer_norm over the trailing dims. */
#include <math.h>

#include "graph/graph_internal.h"

enum { EPS, MOMENTUM, TRAINING };
static const sg__attr_schema bn_attrs[] = {
    [EPS] = {"eps", SG_ATTR_FLOAT, false, 0, 1e-5, 0, {0}, 0, 0},
    [MOMENTUM] = {"momentum", SG_ATTR_FLOAT, false, 0, 0.1, 0, {0}, 0, 0},
    [TRAINING] = {"training", SG_ATTR_INT, false, 1, 0, 0, {0}, 0, 0},
};

static sg_status infer_batch_norm(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  static const char *const names[] = {"x", "gamma", "beta", "running_mean", "running_var"};
  const sg__tensor *x = sg__in(g, op, 0);
  char sx[SG__SHAPE_STR], s[SG__SHAPE_STR];
  sg__tstr(sx, x);
  if (!sg__is_float(x->dtype)) return sg__op_error(op, SG_ERR_DTYPE, "input x %s must be a float type", sx);
  if (x->ndim < 2)
    return sg__op_error(op, SG_ERR_SHAPE, "input x %s must have at least 2 dims [N,C,...]", sx);
  double eps = sg__attr_f(op, EPS), momentum = sg__attr_f(op, MOMENTUM);
  int64_t training = sg__attr_i(op, TRAINING);
  if (!(eps > 0)) return sg__op_error(op, SG_ERR_ATTRIBUTE, "eps is %g; must be > 0", eps);
  if (!(momentum >= 0 && momentum <= 1))
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "momentum is %g; must be in [0, 1]", momentum);
  if (training != 0 && training != 1)
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "training is %lld; must be 0 or 1", (long long)training);
  int64_t C = x->dims[1];
  for (int i = 1; i < 5; i++) {
    const sg__tensor *t = sg__in(g, op, i);
    sg__tstr(s, t);
    if (t->dtype != x->dtype)
      return sg__op_error(op, SG_ERR_DTYPE, "%s %s must have the dtype of x %s", names[i], s, sx);
    if (t->ndim != 1 || t->dims[0] != C)
      return sg__op_error(op, SG_ERR_SHAPE, "%s %s must be [%lld], the channels of x %s", names[i], s,
                          (long long)C, sx);
    if (training && i >= 3 && t->role != SG_ROLE_STATE)
      return sg__op_error(op, SG_ERR_INVALID_ARG,
                          "%s '%s' is updated in training form and must have role state, not %s", names[i],
                          t->name, sg_role_name(t->role));
  }
  sg__shape_of(x, &outs[0]);
  *n_outs = 1;
  if (training) {
    /* Batch mean and inverse std, kept for the backward pass. */
    outs[1] = (sg__shape){x->dtype, 1, {C}};
    outs[2] = (sg__shape){x->dtype, 1, {C}};
    *n_outs = 3;
  }
  return SG_OK;
}

const sg__op_def sg__def_batch_norm = {
    SG_OP_BATCH_NORM,      "batch_norm",       5, 5,        0,
    (1u << 3) | (1u << 4), SG_ROLE_ACTIVATION, 3, bn_attrs, infer_batch_norm};

sg_batch_norm_params sg_batch_norm_params_init(void) {
  return (sg_batch_norm_params)SG_BATCH_NORM_PARAMS_INIT;
}

sg_tensor sg_batch_norm(sg_graph *g, sg_tensor x, sg_tensor gamma, sg_tensor beta, sg_tensor running_mean,
                        sg_tensor running_var, const sg_batch_norm_params *p) {
  sg_batch_norm_params d = SG_BATCH_NORM_PARAMS_INIT;
  if (sg__graph_params(g, "sg_batch_norm",
                       SG__VERSIONED(sg_batch_norm_params, eps, "SG_BATCH_NORM_PARAMS_INIT"), &d, p) != SG_OK)
    return SG_NO_TENSOR;
  p = &d;
  sg_attr attrs[] = {SG__AF("eps", p->eps), SG__AF("momentum", p->momentum), SG__AI("training", p->training)};
  sg_tensor in[] = {x, gamma, beta, running_mean, running_var};
  return sg__build1(g, SG_OP_BATCH_NORM, 5, in, 3, attrs);
}

/* ---- layer_norm ------------------------------------------------------------ */

/* x normalised over its trailing dims from `axis` (ONNX LayerNormalization,
 * torch.nn.LayerNorm): y = (x - mean) * invstd * scale + bias with the
 * biased variance. Outputs 1 and 2, the mean and inverse standard
 * deviation, have x's leading dims and 1 for the normalised ones (ONNX's
 * Mean and InvStdDev), kept for the backward pass. */
enum { LN_AXIS, LN_EPS };
static const sg__attr_schema ln_attrs[] = {
    [LN_AXIS] = {"axis", SG_ATTR_INT, false, -1, 0, 0, {0}, 0, 0},
    [LN_EPS] = {"epsilon", SG_ATTR_FLOAT, false, 0, 1e-5, 0, {0}, 0, 0},
};

sg_status sg__layer_norm_check(const sg_graph *g, const sg__op *op, const sg__tensor *x,
                               const sg__tensor *scale, const sg__tensor *bias, int *axis) {
  char sx[SG__SHAPE_STR], s[SG__SHAPE_STR];
  sg__tstr(sx, x);
  (void)g;
  if (!sg__is_float(x->dtype)) return sg__op_error(op, SG_ERR_DTYPE, "input x %s must be a float type", sx);
  if (x->ndim < 1) return sg__op_error(op, SG_ERR_SHAPE, "input x %s must have at least 1 dim", sx);
  int64_t a = sg__attr_i(op, LN_AXIS);
  if (!sg__norm_axis(a, x->ndim, axis))
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "axis %lld is out of range for x %s", (long long)a, sx);
  const sg__tensor *ps[2] = {scale, bias};
  static const char *const names[2] = {"scale", "bias"};
  for (int k = 0; k < 2; k++) {
    const sg__tensor *t = ps[k];
    if (t == NULL) continue;
    sg__tstr(s, t);
    if (t->dtype != x->dtype)
      return sg__op_error(op, SG_ERR_DTYPE, "%s %s must have the dtype of x %s", names[k], s, sx);
    bool same = t->ndim == x->ndim - *axis;
    for (int i = 0; same && i < t->ndim; i++) same = t->dims[i] == x->dims[*axis + i];
    if (!same)
      return sg__op_error(op, SG_ERR_SHAPE, "%s %s must have the normalised dims of x %s (from axis %d)",
                          names[k], s, sx, *axis);
  }
  return SG_OK;
}

static sg_status infer_layer_norm(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *x = sg__in(g, op, 0);
  int axis;
  SG_CHECK(sg__layer_norm_check(g, op, x, sg__in(g, op, 1), sg__in(g, op, 2), &axis));
  double eps = sg__attr_f(op, LN_EPS);
  if (!(eps > 0) || !isfinite(eps))
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "epsilon is %g; must be finite and > 0", eps);
  sg__shape_of(x, &outs[0]);
  sg__shape_of(x, &outs[1]);
  for (int i = axis; i < x->ndim; i++) outs[1].dims[i] = 1;
  outs[2] = outs[1];
  *n_outs = 3;
  return SG_OK;
}

const sg__op_def sg__def_layer_norm = {
    SG_OP_LAYER_NORM, "layer_norm",    1, 3, (1u << 1) | (1u << 2), 0, SG_ROLE_ACTIVATION, 2,
    ln_attrs,         infer_layer_norm};

sg_tensor sg_layer_norm(sg_graph *g, sg_tensor x, sg_tensor scale, sg_tensor bias, int axis, double epsilon) {
  sg_attr attrs[] = {SG__AI("axis", axis), SG__AF("epsilon", epsilon)};
  sg_tensor in[] = {x, scale, bias};
  return sg__build1(g, SG_OP_LAYER_NORM, 3, in, 2, attrs);
}
