/* The adjoints of implicit shape changes: sum_to undoes broadcasting (used by
 * the gradients of broadcasting binary ops and of a gemm bias), broadcast_to
 * undoes a reduction, slice undoes concat. Backward passes append them, but
 * nothing in them is specific to gradients. */
#include "graph/graph_internal.h"

static const sg__attr_schema shape_attrs[] = {{"shape", SG_ATTR_INTS, true, 0, 0, 0, {0}, 0, SG_MAX_DIMS}};

/* True when `from` broadcasts to `to` under NumPy's rules in one direction:
 * trailing dims aligned, each dim of `from` equal to the one of `to` or 1. */
static bool broadcasts_to(int nfrom, const int64_t *from, int nto, const int64_t *to) {
  if (nfrom > nto) return false;
  for (int i = 0; i < nfrom; i++) {
    int64_t f = from[nfrom - 1 - i], t = to[nto - 1 - i];
    if (f != t && f != 1) return false;
  }
  return true;
}

/* The shape attribute as an output shape of `dtype`; entries must be >= 1. */
static sg_status shape_attr(const sg__op *op, sg_dtype dtype, sg__shape *out) {
  const int64_t *shape = sg__attr_ints(op, 0);
  int n = sg__attr_count(op, 0);
  out->dtype = dtype;
  out->ndim = n;
  int64_t numel;
  if (!sg__numel_checked(n, shape, &numel)) {
    char ss[SG__SHAPE_STR];
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "shape %s must have dims >= 1 and at most 2^56 elements",
                        sg__shape_str(ss, dtype, n, shape));
  }
  for (int i = 0; i < n; i++) out->dims[i] = shape[i];
  return SG_OK;
}

static sg_status infer_sum_to(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *x = sg__in(g, op, 0);
  char sx[SG__SHAPE_STR], ss[SG__SHAPE_STR];
  sg__tstr(sx, x);
  if (!sg__is_float(x->dtype) && !sg__is_int(x->dtype))
    return sg__op_error(op, SG_ERR_DTYPE, "input x %s must be a float or integer type", sx);
  SG_CHECK(shape_attr(op, x->dtype, &outs[0]));
  if (!broadcasts_to(outs[0].ndim, outs[0].dims, x->ndim, x->dims))
    return sg__op_error(op, SG_ERR_SHAPE, "shape %s does not broadcast to x %s, so x cannot be summed to it",
                        sg__shape_str(ss, x->dtype, outs[0].ndim, outs[0].dims), sx);
  *n_outs = 1;
  return SG_OK;
}

static sg_status infer_broadcast_to(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *x = sg__in(g, op, 0);
  char sx[SG__SHAPE_STR], ss[SG__SHAPE_STR];
  sg__tstr(sx, x);
  SG_CHECK(shape_attr(op, x->dtype, &outs[0]));
  if (!broadcasts_to(x->ndim, x->dims, outs[0].ndim, outs[0].dims))
    return sg__op_error(op, SG_ERR_SHAPE, "x %s does not broadcast to shape %s", sx,
                        sg__shape_str(ss, x->dtype, outs[0].ndim, outs[0].dims));
  *n_outs = 1;
  return SG_OK;
}

const sg__op_def sg__def_sum_to = {SG_OP_SUM_TO, "sum_to",     1,         1, 0, 0, SG_ROLE_GRADIENT, 1,
                                   shape_attrs,  infer_sum_to, SG__OP_SUM};
/* A forward op too (the ONNX importer's Expand), so its outputs are activations outside backward. */
const sg__op_def sg__def_broadcast_to = {
    SG_OP_BROADCAST_TO, "broadcast_to", 1, 1, 0, 0, SG_ROLE_ACTIVATION, 1, shape_attrs, infer_broadcast_to};

enum { AXIS, START, LENGTH };
static const sg__attr_schema slice_attrs[] = {
    [AXIS] = {"axis", SG_ATTR_INT, true, 0, 0, 0, {0}, 0, 0},
    [START] = {"start", SG_ATTR_INT, true, 0, 0, 0, {0}, 0, 0},
    [LENGTH] = {"length", SG_ATTR_INT, true, 0, 0, 0, {0}, 0, 0},
};

static sg_status infer_slice(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *x = sg__in(g, op, 0);
  char sx[SG__SHAPE_STR];
  sg__tstr(sx, x);
  int64_t start = sg__attr_i(op, START), length = sg__attr_i(op, LENGTH);
  int axis;
  if (x->ndim == 0 || !sg__norm_axis(sg__attr_i(op, AXIS), x->ndim, &axis))
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "axis %lld is out of range for x %s",
                        (long long)sg__attr_i(op, AXIS), sx);
  /* Written so that no operand can overflow: dims are <= 2^56. */
  if (start < 0 || length < 1 || start > x->dims[axis] || length > x->dims[axis] - start)
    return sg__op_error(op, SG_ERR_ATTRIBUTE,
                        "start %lld and length %lld must give a non-empty range inside dim %d (size %lld) of "
                        "x %s",
                        (long long)start, (long long)length, axis, (long long)x->dims[axis], sx);
  sg__shape_of(x, &outs[0]);
  outs[0].dims[axis] = length;
  *n_outs = 1;
  return SG_OK;
}

/* A forward op too (sg_slice: attention's q, k and v), so its outputs are activations outside backward. */
const sg__op_def sg__def_slice = {SG_OP_SLICE,        "slice", 1,           1,          0, 0,
                                  SG_ROLE_ACTIVATION, 3,       slice_attrs, infer_slice};

sg_tensor sg_slice(sg_graph *g, sg_tensor x, int axis, int64_t start, int64_t length) {
  sg_attr a[] = {SG__AI("axis", axis), SG__AI("start", start), SG__AI("length", length)};
  return sg__build1(g, SG_OP_SLICE, 1, &x, 3, a);
}
