/* cumsum: the running sum of x along one axis (ONNX CumSum, torch.cumsum),
 * inclusive or exclusive, from the start or from the end. Its gradient is
 * a cumsum too (autodiff_rules.c), so it needs no backward kind. */
#include "graph/graph_internal.h"

static const sg__attr_schema cumsum_attrs[] = {
    {"axis", SG_ATTR_INT, true, 0, 0, 0, {0}, 0, 0},
    {"exclusive", SG_ATTR_INT, false, 0, 0, 0, {0}, 0, 0, true, 0, 1},
    {"reverse", SG_ATTR_INT, false, 0, 0, 0, {0}, 0, 0, true, 0, 1}};

static sg_status infer_cumsum(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *x = sg__in(g, op, 0);
  char sx[SG__SHAPE_STR];
  sg__tstr(sx, x);
  if (x->dtype != SG_I32 && x->dtype != SG_I64 && !sg__is_float(x->dtype))
    return sg__op_error(op, SG_ERR_DTYPE, "x %s must be a float type, i32 or i64", sx);
  int axis;
  if (x->ndim == 0 || !sg__norm_axis(sg__attr_i(op, 0), x->ndim, &axis))
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "axis %lld is out of range for x %s (rank >= 1)",
                        (long long)sg__attr_i(op, 0), sx);
  sg__shape_of(x, &outs[0]);
  *n_outs = 1;
  return SG_OK;
}

const sg__op_def sg__def_cumsum = {SG_OP_CUMSUM, "cumsum",    1, 1, 0, 0, SG_ROLE_ACTIVATION, 3,
                                   cumsum_attrs, infer_cumsum};

sg_tensor sg_cumsum(sg_graph *g, sg_tensor x, int axis, int exclusive, int reverse) {
  sg_attr a[] = {SG__AI("axis", axis), SG__AI("exclusive", exclusive), SG__AI("reverse", reverse)};
  return sg__build1(g, SG_OP_CUMSUM, 1, &x, 3, a);
}
