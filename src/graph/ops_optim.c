/* Optimizer updates as graph ops (SPEC G7). They update their parameter and
 * state inputs in place and have no outputs; the compiled step is forward,
 * backward and these updates as one graph. */
#include <math.h>

#include "graph/graph_internal.h"

/* Checks that `t` matches the parameter's shape and dtype and has `role`
 * (role 0: any). `what` names the input in messages. */
static sg_status like_param(const sg__op *op, const sg__tensor *param, const sg__tensor *t, const char *what,
                            sg_role role) {
  char sp[SG__SHAPE_STR], st[SG__SHAPE_STR];
  sg__tstr(sp, param);
  sg__tstr(st, t);
  if (t->dtype != param->dtype)
    return sg__op_error(op, SG_ERR_DTYPE, "%s %s must have the dtype of param %s", what, st, sp);
  bool same = t->ndim == param->ndim;
  for (int i = 0; same && i < t->ndim; i++) same = t->dims[i] == param->dims[i];
  if (!same) return sg__op_error(op, SG_ERR_SHAPE, "%s %s must have the shape of param %s", what, st, sp);
  if (role && t->role != role)
    return sg__op_error(op, SG_ERR_INVALID_ARG, "%s '%s' must have role %s, not %s", what, t->name,
                        sg_role_name(role), sg_role_name(t->role));
  return SG_OK;
}

/* The learning rate (or step count) is a one-element f32 tensor. */
static sg_status scalar_f32(const sg__op *op, const sg__tensor *t, const char *what) {
  char s[SG__SHAPE_STR];
  if (t->dtype != SG_F32 || sg__numel(t->ndim, t->dims) != 1)
    return sg__op_error(op, SG_ERR_SHAPE, "%s %s must be a one-element f32 tensor", what, sg__tstr(s, t));
  return SG_OK;
}

static sg_status check_param(const sg__op *op, const sg__tensor *param) {
  char s[SG__SHAPE_STR];
  if (param->role != SG_ROLE_PARAMETER)
    return sg__op_error(op, SG_ERR_INVALID_ARG, "param '%s' must have role parameter, not %s", param->name,
                        sg_role_name(param->role));
  if (!sg__is_float(param->dtype))
    return sg__op_error(op, SG_ERR_DTYPE, "param %s must be a float type", sg__tstr(s, param));
  return SG_OK;
}

enum { MOMENTUM, DAMPENING, WEIGHT_DECAY, NESTEROV };
static const sg__attr_schema sgd_attrs[] = {
    [MOMENTUM] = {"momentum", SG_ATTR_FLOAT, false, 0, 0, 0, {0}, 0, 0},
    [DAMPENING] = {"dampening", SG_ATTR_FLOAT, false, 0, 0, 0, {0}, 0, 0},
    [WEIGHT_DECAY] = {"weight_decay", SG_ATTR_FLOAT, false, 0, 0, 0, {0}, 0, 0},
    [NESTEROV] = {"nesterov", SG_ATTR_INT, false, 0, 0, 0, {0}, 0, 0},
};

static sg_status infer_sgd(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  (void)outs;
  const sg__tensor *param = sg__in(g, op, 0), *grad = sg__in(g, op, 1), *lr = sg__in(g, op, 2);
  const sg__tensor *buf = sg__in(g, op, 3);
  double momentum = sg__attr_f(op, MOMENTUM), dampening = sg__attr_f(op, DAMPENING);
  double wd = sg__attr_f(op, WEIGHT_DECAY);
  int64_t nesterov = sg__attr_i(op, NESTEROV);
  if (!(momentum >= 0 && momentum < 1e6) || !(dampening >= 0 && dampening <= 1) || !(wd >= 0 && wd < 1e6))
    return sg__op_error(op, SG_ERR_ATTRIBUTE,
                        "momentum %g and weight_decay %g must be >= 0, dampening %g in [0, 1]", momentum, wd,
                        dampening);
  if (nesterov != 0 && nesterov != 1)
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "nesterov is %lld; must be 0 or 1", (long long)nesterov);
  if (nesterov && (momentum <= 0 || dampening != 0))
    return sg__op_error(op, SG_ERR_ATTRIBUTE,
                        "nesterov needs momentum > 0 and dampening 0 (momentum %g, dampening %g)", momentum,
                        dampening);
  SG_CHECK(check_param(op, param));
  SG_CHECK(like_param(op, param, grad, "grad", 0));
  SG_CHECK(scalar_f32(op, lr, "lr"));
  if (momentum > 0 && buf == NULL)
    return sg__op_error(op, SG_ERR_ARITY, "momentum %g needs a momentum buffer (input 3)", momentum);
  if (momentum == 0 && buf != NULL)
    return sg__op_error(op, SG_ERR_ARITY, "momentum is 0, so input 3 '%s' (momentum buffer) must be absent",
                        buf->name);
  if (buf) SG_CHECK(like_param(op, param, buf, "momentum_buf", SG_ROLE_OPTIMIZER_STATE));
  *n_outs = 0;
  return SG_OK;
}

const sg__op_def sg__def_sgd_update = {SG_OP_SGD_UPDATE,      "sgd_update",       3, 4,         1u << 3,
                                       (1u << 0) | (1u << 3), SG_ROLE_ACTIVATION, 4, sgd_attrs, infer_sgd};

sg_sgd_params sg_sgd_params_init(void) { return (sg_sgd_params)SG_SGD_PARAMS_INIT; }

sg_status sg_sgd_update(sg_graph *g, sg_tensor param, sg_tensor grad, sg_tensor lr, sg_tensor momentum_buf,
                        const sg_sgd_params *p) {
  sg_sgd_params d = SG_SGD_PARAMS_INIT;
  if (sg__graph_params(g, "sg_sgd_update", SG__VERSIONED(sg_sgd_params, momentum, "SG_SGD_PARAMS_INIT"), &d,
                       p) != SG_OK)
    return sg_graph_status(g);
  p = &d;
  sg_attr attrs[] = {SG__AF("momentum", p->momentum), SG__AF("dampening", p->dampening),
                     SG__AF("weight_decay", p->weight_decay), SG__AI("nesterov", p->nesterov)};
  sg_tensor in[] = {param, grad, lr, momentum_buf};
  return sg_graph_add_op(g, SG_OP_SGD_UPDATE, 4, in, 4, attrs, 0, NULL, NULL);
}

enum { BETA1, BETA2, EPS, ADAM_WEIGHT_DECAY };
static const sg__attr_schema adamw_attrs[] = {
    [BETA1] = {"beta1", SG_ATTR_FLOAT, false, 0, 0.9, 0, {0}, 0, 0},
    [BETA2] = {"beta2", SG_ATTR_FLOAT, false, 0, 0.999, 0, {0}, 0, 0},
    [EPS] = {"eps", SG_ATTR_FLOAT, false, 0, 1e-8, 0, {0}, 0, 0},
    [ADAM_WEIGHT_DECAY] = {"weight_decay", SG_ATTR_FLOAT, false, 0, 0.01, 0, {0}, 0, 0},
};

static sg_status infer_adamw(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  (void)outs;
  const sg__tensor *param = sg__in(g, op, 0), *grad = sg__in(g, op, 1), *lr = sg__in(g, op, 2);
  const sg__tensor *m = sg__in(g, op, 3), *v = sg__in(g, op, 4), *step = sg__in(g, op, 5);
  double b1 = sg__attr_f(op, BETA1), b2 = sg__attr_f(op, BETA2), eps = sg__attr_f(op, EPS);
  double wd = sg__attr_f(op, ADAM_WEIGHT_DECAY);
  if (!(b1 >= 0 && b1 < 1) || !(b2 >= 0 && b2 < 1))
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "beta1 %g and beta2 %g must be in [0, 1)", b1, b2);
  if (!(eps > 0 && isfinite(eps)) || !(wd >= 0 && wd < 1e6))
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "eps %g must be > 0 and weight_decay %g >= 0", eps, wd);
  SG_CHECK(check_param(op, param));
  SG_CHECK(like_param(op, param, grad, "grad", 0));
  SG_CHECK(scalar_f32(op, lr, "lr"));
  SG_CHECK(like_param(op, param, m, "m", SG_ROLE_OPTIMIZER_STATE));
  SG_CHECK(like_param(op, param, v, "v", SG_ROLE_OPTIMIZER_STATE));
  SG_CHECK(scalar_f32(op, step, "step"));
  if (step->role != SG_ROLE_OPTIMIZER_STATE)
    return sg__op_error(op, SG_ERR_INVALID_ARG, "step '%s' must have role optimizer_state, not %s",
                        step->name, sg_role_name(step->role));
  *n_outs = 0;
  return SG_OK;
}

const sg__op_def sg__def_adamw_update = {SG_OP_ADAMW_UPDATE,
                                         "adamw_update",
                                         6,
                                         6,
                                         0,
                                         (1u << 0) | (1u << 3) | (1u << 4) | (1u << 5),
                                         SG_ROLE_ACTIVATION,
                                         4,
                                         adamw_attrs,
                                         infer_adamw};

sg_adamw_params sg_adamw_params_init(void) { return (sg_adamw_params)SG_ADAMW_PARAMS_INIT; }

sg_status sg_adamw_update(sg_graph *g, sg_tensor param, sg_tensor grad, sg_tensor lr, sg_tensor m,
                          sg_tensor v, sg_tensor step, const sg_adamw_params *p) {
  sg_adamw_params d = SG_ADAMW_PARAMS_INIT;
  if (sg__graph_params(g, "sg_adamw_update", SG__VERSIONED(sg_adamw_params, beta1, "SG_ADAMW_PARAMS_INIT"),
                       &d, p) != SG_OK)
    return sg_graph_status(g);
  p = &d;
  if (p->decay_min_ndim < 0 || p->decay_min_ndim > SG_MAX_DIMS)
    return sg__graph_fail(g,
                          sg__error(SG_ERR_ATTRIBUTE, "sg_adamw_update: decay_min_ndim %d is not in [0, %d]",
                                    p->decay_min_ndim, SG_MAX_DIMS));
  /* Two parameter groups as torch.optim.AdamW takes them: the rule picks this parameter's (a bad id is
   * the op's own error, below). */
  bool known = param.id >= 0 && (uint32_t)param.id < g->n_tensors;
  double wd = known && g->tensors[param.id].ndim < p->decay_min_ndim ? 0.0 : p->weight_decay;
  sg_attr attrs[] = {SG__AF("beta1", p->beta1), SG__AF("beta2", p->beta2), SG__AF("eps", p->eps),
                     SG__AF("weight_decay", wd)};
  sg_tensor in[] = {param, grad, lr, m, v, step};
  return sg_graph_add_op(g, SG_OP_ADAMW_UPDATE, 6, in, 4, attrs, 0, NULL, NULL);
}
