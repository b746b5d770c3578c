/* batch_norm over the channel dim 1, in training or inference form. */
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
