/* reduce_max, reduce_min: the largest or smallest element over axes (ONNX
 * ReduceMax and ReduceMin, torch.amax and torch.amin), and the backward kind
 * both share, which splits dy evenly among the elements equal to the result
 * (PyTorch's rule for amax and amin). A NaN in a group makes its result NaN,
 * as PyTorch propagates it. */
#include "graph/graph_internal.h"

enum { AXES, KEEPDIMS, MIN };
static const sg__attr_schema reduce_max_attrs[] = {
    [AXES] = {"axes", SG_ATTR_INTS, false, 0, 0, 0, {0}, 0, SG_MAX_DIMS},
    [KEEPDIMS] = {"keepdims", SG_ATTR_INT, false, 0, 0, 0, {0}, 0, 0, true, 0, 1},
    [MIN] = {"min", SG_ATTR_INT, false, 0, 0, 0, {0}, 0, 0, true, 0, 1},
};

/* The reduced dims of x (all when the list is empty); an axis out of range
 * or listed twice is an error naming the op. Dims are >= 1, so every group
 * has an element to take the max of. */
static sg_status reduced_dims(const sg__op *op, const sg__tensor *x, const char *sx, bool *reduced) {
  const int64_t *axes = sg__attr_ints(op, AXES);
  int n = sg__attr_count(op, AXES);
  for (int i = 0; i < x->ndim; i++) reduced[i] = n == 0;
  for (int i = 0; i < n; i++) {
    int a;
    if (!sg__norm_axis(axes[i], x->ndim, &a))
      return sg__op_error(op, SG_ERR_ATTRIBUTE, "axis %lld is out of range for x %s", (long long)axes[i], sx);
    if (reduced[a]) return sg__op_error(op, SG_ERR_ATTRIBUTE, "axis %d is listed twice", a);
    reduced[a] = true;
  }
  return SG_OK;
}

static void reduced_shape(const sg__tensor *x, const bool *reduced, bool keepdims, sg__shape *o) {
  o->dtype = x->dtype;
  o->ndim = 0;
  for (int i = 0; i < x->ndim; i++) {
    if (!reduced[i]) o->dims[o->ndim++] = x->dims[i];
    else if (keepdims) o->dims[o->ndim++] = 1;
  }
}

static sg_status infer_reduce_max(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *x = sg__in(g, op, 0);
  char sx[SG__SHAPE_STR];
  sg__tstr(sx, x);
  if (!sg__is_float(x->dtype) && x->dtype != SG_I32 && x->dtype != SG_I64)
    return sg__op_error(op, SG_ERR_DTYPE, "x %s must be a float type, i32 or i64", sx);
  bool reduced[SG_MAX_DIMS];
  SG_CHECK(reduced_dims(op, x, sx, reduced));
  reduced_shape(x, reduced, sg__attr_i(op, KEEPDIMS) != 0, &outs[0]);
  *n_outs = 1;
  return SG_OK;
}

/* Inputs x, y (the forward result), dy (y's shape); output dx of x's shape. */
static sg_status infer_reduce_max_backward(const sg_graph *g, const sg__op *op, sg__shape *outs,
                                           int *n_outs) {
  const sg__tensor *x = sg__in(g, op, 0), *y = sg__in(g, op, 1), *dy = sg__in(g, op, 2);
  char sx[SG__SHAPE_STR], sy[SG__SHAPE_STR], sd[SG__SHAPE_STR];
  sg__tstr(sx, x);
  sg__tstr(sy, y);
  sg__tstr(sd, dy);
  if (!sg__is_float(x->dtype) || y->dtype != x->dtype || dy->dtype != x->dtype)
    return sg__op_error(op, SG_ERR_DTYPE, "x %s, y %s and dy %s must share one float type", sx, sy, sd);
  bool reduced[SG_MAX_DIMS];
  SG_CHECK(reduced_dims(op, x, sx, reduced));
  sg__shape want;
  reduced_shape(x, reduced, sg__attr_i(op, KEEPDIMS) != 0, &want);
  bool same = y->ndim == want.ndim && dy->ndim == want.ndim;
  for (int i = 0; same && i < want.ndim; i++)
    same = y->dims[i] == want.dims[i] && dy->dims[i] == want.dims[i];
  if (!same)
    return sg__op_error(op, SG_ERR_SHAPE, "y %s and dy %s must have the reduced shape of x %s", sy, sd, sx);
  sg__shape_of(x, &outs[0]);
  *n_outs = 1;
  return SG_OK;
}

const sg__op_def sg__def_reduce_max = {SG_OP_REDUCE_MAX, "reduce_max",    1, 1, 0, 0, SG_ROLE_ACTIVATION, 2,
                                       reduce_max_attrs, infer_reduce_max};
const sg__op_def sg__def_reduce_min = {SG_OP_REDUCE_MIN, "reduce_min",    1, 1, 0, 0, SG_ROLE_ACTIVATION, 2,
                                       reduce_max_attrs, infer_reduce_max};
const sg__op_def sg__def_reduce_max_backward = {
    SG_OP_REDUCE_MAX_BACKWARD, "reduce_max_backward",    3, 3, 0, 0, SG_ROLE_ACTIVATION, 3,
    reduce_max_attrs,          infer_reduce_max_backward};

static sg_tensor reduce_max(sg_graph *g, sg_op_kind kind, sg_tensor x, int naxes, const int64_t *axes,
                            int keepdims) {
  sg_attr a[] = {SG__AS("axes", naxes, axes), SG__AI("keepdims", keepdims)};
  return sg__build1(g, kind, 1, &x, 2, a);
}
sg_tensor sg_reduce_max(sg_graph *g, sg_tensor x, int naxes, const int64_t *axes, int keepdims) {
  return reduce_max(g, SG_OP_REDUCE_MAX, x, naxes, axes, keepdims);
}
sg_tensor sg_reduce_min(sg_graph *g, sg_tensor x, int naxes, const int64_t *axes, int keepdims) {
  return reduce_max(g, SG_OP_REDUCE_MIN, x, naxes, axes, keepdims);
}
