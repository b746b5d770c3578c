/* softmax, log_softmax and cross entropy with class indices. */
#include "graph/graph_internal.h"

static const sg__attr_schema softmax_attrs[] = {{"axis", SG_ATTR_INT, false, -1, 0, 0, {0}, 0, 0}};

sg_status sg__softmax_axis_check(const sg__op *op, const sg__tensor *t, const char *what) {
  char st[SG__SHAPE_STR];
  int axis;
  if (t->ndim == 0 || !sg__norm_axis(sg__attr_i(op, 0), t->ndim, &axis))
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "axis %lld is out of range for %s %s",
                        (long long)sg__attr_i(op, 0), what, sg__tstr(st, t));
  return SG_OK;
}

static sg_status infer_softmax(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *x = sg__in(g, op, 0);
  char sx[SG__SHAPE_STR];
  sg__tstr(sx, x);
  if (!sg__is_float(x->dtype)) return sg__op_error(op, SG_ERR_DTYPE, "input x %s must be a float type", sx);
  SG_CHECK(sg__softmax_axis_check(op, x, "x"));
  sg__shape_of(x, &outs[0]);
  *n_outs = 1;
  return SG_OK;
}

const sg__op_def sg__def_softmax = {SG_OP_SOFTMAX, "softmax",    1, 1, 0, 0, SG_ROLE_ACTIVATION, 1,
                                    softmax_attrs, infer_softmax};
const sg__op_def sg__def_log_softmax = {SG_OP_LOG_SOFTMAX, "log_softmax", 1, 1, 0, 0, SG_ROLE_ACTIVATION, 1,
                                        softmax_attrs,     infer_softmax};

sg_tensor sg_softmax(sg_graph *g, sg_tensor x, int axis) {
  sg_attr a[] = {SG__AI("axis", axis)};
  return sg__build1(g, SG_OP_SOFTMAX, 1, &x, 1, a);
}
sg_tensor sg_log_softmax(sg_graph *g, sg_tensor x, int axis) {
  sg_attr a[] = {SG__AI("axis", axis)};
  return sg__build1(g, SG_OP_LOG_SOFTMAX, 1, &x, 1, a);
}

static const sg__attr_schema ce_attrs[] = {
    {"reduction", SG_ATTR_INT, false, SG_REDUCTION_MEAN, 0, 0, {0}, 0, 0}};

sg_status sg__cross_entropy_check(const sg__op *op, const sg__tensor *x, const sg__tensor *y,
                                  const sg__tensor *dl) {
  char sx[SG__SHAPE_STR], sy[SG__SHAPE_STR], sdl[SG__SHAPE_STR];
  sg__tstr(sx, x);
  sg__tstr(sy, y);
  int64_t red = sg__attr_i(op, 0);
  if (red < SG_REDUCTION_NONE || red > SG_REDUCTION_SUM)
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "reduction is %lld; must be 0 (none), 1 (mean) or 2 (sum)",
                        (long long)red);
  if (!sg__is_float(x->dtype)) return sg__op_error(op, SG_ERR_DTYPE, "logits %s must be a float type", sx);
  if (dl != NULL && dl->dtype != x->dtype)
    return sg__op_error(op, SG_ERR_DTYPE, "dloss %s must have the dtype of logits %s", sg__tstr(sdl, dl), sx);
  if (!sg__is_int(y->dtype))
    return sg__op_error(op, SG_ERR_DTYPE, "labels %s must be i32 or i64 class indices", sy);
  if (x->ndim != 2) return sg__op_error(op, SG_ERR_SHAPE, "logits %s must be 2-D [N,C]", sx);
  if (y->ndim != 1 || y->dims[0] != x->dims[0])
    return sg__op_error(op, SG_ERR_SHAPE, "labels %s must be [%lld] to match logits %s", sy,
                        (long long)x->dims[0], sx);
  return SG_OK;
}

static sg_status infer_cross_entropy(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *x = sg__in(g, op, 0), *y = sg__in(g, op, 1);
  SG_CHECK(sg__cross_entropy_check(op, x, y, NULL));
  int64_t red = sg__attr_i(op, 0);
  if (red == SG_REDUCTION_NONE) outs[0] = (sg__shape){x->dtype, 1, {x->dims[0]}};
  else outs[0] = (sg__shape){x->dtype, 0, {0}};
  *n_outs = 1;
  return SG_OK;
}

const sg__op_def sg__def_cross_entropy = {
    SG_OP_CROSS_ENTROPY, "cross_entropy", 2, 2, 0, 0, SG_ROLE_ACTIVATION, 1, ce_attrs, infer_cross_entropy};

sg_tensor sg_cross_entropy(sg_graph *g, sg_tensor logits, sg_tensor labels, sg_reduction reduction) {
  sg_attr a[] = {SG__AI("reduction", reduction)};
  sg_tensor in[] = {logits, labels};
  return sg__build1(g, SG_OP_CROSS_ENTROPY, 2, in, 1, a);
}
