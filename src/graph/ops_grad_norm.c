/* batch_norm_backward: gradients of batch normalization with respect to x,
 * gamma and beta in one op. In training form it reads the batch statistics
 * the forward op saved (mean and inverse std, outputs 1 and 2 of
 * batch_norm); in inference form the running statistics, which are then
 * constants of the forward op. */
#include "graph/graph_internal.h"

enum { EPS, TRAINING };
static const sg__attr_schema bn_backward_attrs[] = {
    [EPS] = {"eps", SG_ATTR_FLOAT, false, 0, 1e-5, 0, {0}, 0, 0},
    [TRAINING] = {"training", SG_ATTR_INT, false, 1, 0, 0, {0}, 0, 0},
};

static sg_status infer_bn_backward(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  static const char *const names[] = {"dy", "x", "gamma", "mean", "invstd"};
  static const char *const running[] = {"dy", "x", "gamma", "running_mean", "running_var"};
  const sg__tensor *dy = sg__in(g, op, 0), *x = sg__in(g, op, 1);
  char sdy[SG__SHAPE_STR], sx[SG__SHAPE_STR], s[SG__SHAPE_STR];
  sg__tstr(sdy, dy);
  sg__tstr(sx, x);
  double eps = sg__attr_f(op, EPS);
  int64_t training = sg__attr_i(op, TRAINING);
  if (!(eps > 0)) return sg__op_error(op, SG_ERR_ATTRIBUTE, "eps is %g; must be > 0", eps);
  if (training != 0 && training != 1)
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "training is %lld; must be 0 or 1", (long long)training);
  const char *const *nm = training ? names : running;
  if (!sg__is_float(x->dtype)) return sg__op_error(op, SG_ERR_DTYPE, "x %s must be a float type", sx);
  if (x->ndim < 2) return sg__op_error(op, SG_ERR_SHAPE, "x %s must have at least 2 dims [N,C,...]", sx);
  if (dy->dtype != x->dtype)
    return sg__op_error(op, SG_ERR_DTYPE, "dy %s must have the dtype of x %s", sdy, sx);
  bool same = dy->ndim == x->ndim;
  for (int i = 0; same && i < x->ndim; i++) same = dy->dims[i] == x->dims[i];
  if (!same) return sg__op_error(op, SG_ERR_SHAPE, "dy %s must have the shape of x %s", sdy, sx);
  int64_t C = x->dims[1];
  for (int i = 2; i < 5; i++) {
    const sg__tensor *t = sg__in(g, op, i);
    sg__tstr(s, t);
    if (t->dtype != x->dtype)
      return sg__op_error(op, SG_ERR_DTYPE, "%s %s must have the dtype of x %s", nm[i], s, sx);
    if (t->ndim != 1 || t->dims[0] != C)
      return sg__op_error(op, SG_ERR_SHAPE, "%s %s must be [%lld], the channels of x %s", nm[i], s,
                          (long long)C, sx);
  }
  sg__shape_of(x, &outs[0]);
  outs[1] = (sg__shape){x->dtype, 1, {C}};
  outs[2] = (sg__shape){x->dtype, 1, {C}};
  *n_outs = 3;
  return SG_OK;
}

const sg__op_def sg__def_batch_norm_backward = {
    SG_OP_BATCH_NORM_BACKWARD, "batch_norm_backward", 5, 5, 0, 0, SG_ROLE_GRADIENT, 2,
    bn_backward_attrs,         infer_bn_backward};

/* layer_norm_backward (dy, x, scale, mean, invstd) -> (dx, dscale, dbias):
 * the gradients of layer_norm from the statistics it saved. scale may be
 * absent (then 1); dscale and dbias have the normalised dims of x. */
static const sg__attr_schema ln_backward_attrs[] = {{"axis", SG_ATTR_INT, false, -1, 0, 0, {0}, 0, 0}};

static sg_status infer_ln_backward(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *dy = sg__in(g, op, 0), *x = sg__in(g, op, 1);
  char sdy[SG__SHAPE_STR], sx[SG__SHAPE_STR], s[SG__SHAPE_STR];
  sg__tstr(sdy, dy);
  sg__tstr(sx, x);
  int axis;
  SG_CHECK(sg__layer_norm_check(g, op, x, sg__in(g, op, 2), NULL, &axis));
  if (dy->dtype != x->dtype)
    return sg__op_error(op, SG_ERR_DTYPE, "dy %s must have the dtype of x %s", sdy, sx);
  bool same = dy->ndim == x->ndim;
  for (int i = 0; same && i < x->ndim; i++) same = dy->dims[i] == x->dims[i];
  if (!same) return sg__op_error(op, SG_ERR_SHAPE, "dy %s must have the shape of x %s", sdy, sx);
  static const char *const names[] = {"mean", "invstd"};
  for (int k = 0; k < 2; k++) {
    const sg__tensor *t = sg__in(g, op, 3 + k);
    sg__tstr(s, t);
    if (t->dtype != x->dtype)
      return sg__op_error(op, SG_ERR_DTYPE, "%s %s must have the dtype of x %s", names[k], s, sx);
    bool ok = t->ndim == x->ndim;
    for (int i = 0; ok && i < x->ndim; i++) ok = t->dims[i] == (i < axis ? x->dims[i] : 1);
    if (!ok)
      return sg__op_error(op, SG_ERR_SHAPE, "%s %s must have the dims of x %s before axis %d and 1 after",
                          names[k], s, sx, axis);
  }
  sg__shape_of(x, &outs[0]);
  outs[1] = (sg__shape){x->dtype, x->ndim - axis, {0}};
  for (int i = axis; i < x->ndim; i++) outs[1].dims[i - axis] = x->dims[i];
  outs[2] = outs[1];
  *n_outs = 3;
  return SG_OK;
}

const sg__op_def sg__def_layer_norm_backward = {
    SG_OP_LAYER_NORM_BACKWARD, "layer_norm_backward", 5, 5, 1u << 2, 0, SG_ROLE_GRADIENT, 1,
    ln_backward_attrs,         infer_ln_backward};
