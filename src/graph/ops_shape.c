/* Shape manipulation: flatten, reshape, transpose, concat. */
#include <string.h>

#include "graph/graph_internal.h"

/* flatten and reshape: the input's bytes under another shape, so the output
 * may be the input's buffer. */
#define VIEW (SG__OP_VIEW | SG__OP_INPLACE_INPUT0)

static const sg__attr_schema flatten_attrs[] = {{"axis", SG_ATTR_INT, false, 1, 0, 0, {0}, 0, 0}};

static sg_status infer_flatten(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *x = sg__in(g, op, 0);
  int64_t axis = sg__attr_i(op, 0);
  char sx[SG__SHAPE_STR];
  /* ONNX allows axis == rank (everything in the first dim). */
  if (axis < -x->ndim || axis > x->ndim)
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "axis %lld is out of range for x %s", (long long)axis,
                        sg__tstr(sx, x));
  int a = (int)(axis < 0 ? axis + x->ndim : axis);
  outs[0] = (sg__shape){x->dtype, 2, {sg__numel(a, x->dims), sg__numel(x->ndim - a, x->dims + a)}};
  *n_outs = 1;
  return SG_OK;
}

const sg__op_def sg__def_flatten = {SG_OP_FLATTEN, "flatten",     1,   1, 0, 0, SG_ROLE_ACTIVATION, 1,
                                    flatten_attrs, infer_flatten, VIEW};

sg_tensor sg_flatten(sg_graph *g, sg_tensor x, int axis) {
  sg_attr a[] = {SG__AI("axis", axis)};
  return sg__build1(g, SG_OP_FLATTEN, 1, &x, 1, a);
}

static const sg__attr_schema reshape_attrs[] = {{"shape", SG_ATTR_INTS, true, 0, 0, 0, {0}, 0, SG_MAX_DIMS}};

static sg_status infer_reshape(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *x = sg__in(g, op, 0);
  const int64_t *shape = sg__attr_ints(op, 0);
  int n = sg__attr_count(op, 0);
  char sx[SG__SHAPE_STR], ss[SG__SHAPE_STR];
  sg__tstr(sx, x);
  sg__shape_str(ss, x->dtype, n, shape);
  int64_t known = 1, numel = sg__numel(x->ndim, x->dims);
  int infer_at = -1;
  sg__shape *o = &outs[0];
  o->dtype = x->dtype;
  o->ndim = n;
  for (int i = 0; i < n; i++) {
    int64_t d = shape[i];
    if (d == -1) {
      if (infer_at >= 0) return sg__op_error(op, SG_ERR_ATTRIBUTE, "shape %s has more than one -1", ss);
      infer_at = i;
      continue;
    }
    if (d == 0) {
      /* ONNX: 0 copies the input's dim at the same index. */
      if (i >= x->ndim)
        return sg__op_error(op, SG_ERR_ATTRIBUTE, "shape %s has 0 at index %d but x %s has only %d dims", ss,
                            i, sx, x->ndim);
      d = x->dims[i];
    }
    if (d < 1) return sg__op_error(op, SG_ERR_ATTRIBUTE, "shape %s has invalid entry %lld", ss, (long long)d);
    if (__builtin_mul_overflow(known, d, &known) || known > numel)
      return sg__op_error(op, SG_ERR_SHAPE, "shape %s has more elements than x %s", ss, sx);
    o->dims[i] = d;
  }
  if (infer_at >= 0) {
    if (numel % known != 0)
      return sg__op_error(op, SG_ERR_SHAPE, "cannot reshape x %s (%lld elements) to %s", sx, (long long)numel,
                          ss);
    o->dims[infer_at] = numel / known;
  } else if (known != numel) {
    return sg__op_error(op, SG_ERR_SHAPE, "cannot reshape x %s (%lld elements) to %s (%lld elements)", sx,
                        (long long)numel, ss, (long long)known);
  }
  *n_outs = 1;
  return SG_OK;
}

const sg__op_def sg__def_reshape = {SG_OP_RESHAPE, "reshape",     1,   1, 0, 0, SG_ROLE_ACTIVATION, 1,
                                    reshape_attrs, infer_reshape, VIEW};

sg_tensor sg_reshape(sg_graph *g, sg_tensor x, int ndim, const int64_t *shape) {
  sg_attr a[] = {SG__AS("shape", ndim, shape)};
  return sg__build1(g, SG_OP_RESHAPE, 1, &x, 1, a);
}

static const sg__attr_schema transpose_attrs[] = {{"perm", SG_ATTR_INTS, true, 0, 0, 0, {0}, 0, SG_MAX_DIMS}};

static sg_status infer_transpose(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *x = sg__in(g, op, 0);
  const int64_t *perm = sg__attr_ints(op, 0);
  int n = sg__attr_count(op, 0);
  char sx[SG__SHAPE_STR], sp[SG__SHAPE_STR];
  sg__tstr(sx, x);
  if (n != x->ndim)
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "perm has %d entries but x %s has %d dims", n, sx, x->ndim);
  bool seen[SG_MAX_DIMS] = {false};
  sg__shape *o = &outs[0];
  o->dtype = x->dtype;
  o->ndim = n;
  for (int i = 0; i < n; i++) {
    if (perm[i] < 0 || perm[i] >= n || seen[perm[i]])
      return sg__op_error(op, SG_ERR_ATTRIBUTE, "perm %s is not a permutation of 0..%d",
                          sg__shape_str(sp, x->dtype, n, perm), n - 1);
    seen[perm[i]] = true;
    o->dims[i] = x->dims[perm[i]];
  }
  *n_outs = 1;
  return SG_OK;
}

const sg__op_def sg__def_transpose = {SG_OP_TRANSPOSE, "transpose",    1, 1, 0, 0, SG_ROLE_ACTIVATION, 1,
                                      transpose_attrs, infer_transpose};

sg_tensor sg_transpose(sg_graph *g, sg_tensor x, int ndim, const int64_t *perm) {
  sg_attr a[] = {SG__AS("perm", ndim, perm)};
  return sg__build1(g, SG_OP_TRANSPOSE, 1, &x, 1, a);
}

static const sg__attr_schema concat_attrs[] = {{"axis", SG_ATTR_INT, true, 0, 0, 0, {0}, 0, 0}};

static sg_status infer_concat(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *x0 = sg__in(g, op, 0);
  char s0[SG__SHAPE_STR], si[SG__SHAPE_STR];
  sg__tstr(s0, x0);
  int axis;
  if (x0->ndim == 0 || !sg__norm_axis(sg__attr_i(op, 0), x0->ndim, &axis))
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "axis %lld is out of range for input 0 %s",
                        (long long)sg__attr_i(op, 0), s0);
  sg__shape_of(x0, &outs[0]);
  for (int i = 1; i < op->n_inputs; i++) {
    const sg__tensor *x = sg__in(g, op, i);
    sg__tstr(si, x);
    if (x->dtype != x0->dtype)
      return sg__op_error(op, SG_ERR_DTYPE, "input %d %s and input 0 %s differ in dtype", i, si, s0);
    if (x->ndim != x0->ndim)
      return sg__op_error(op, SG_ERR_SHAPE, "input %d %s and input 0 %s differ in rank", i, si, s0);
    for (int d = 0; d < x0->ndim; d++)
      if (d != axis && x->dims[d] != x0->dims[d])
        return sg__op_error(op, SG_ERR_SHAPE,
                            "input %d %s and input 0 %s differ in dim %d (concat axis is %d)", i, si, s0, d,
                            axis);
    /* Dims of valid tensors are <= 2^56, so the sum cannot overflow; the
     * element count of the result is checked by the caller. */
    outs[0].dims[axis] += x->dims[axis];
  }
  *n_outs = 1;
  return SG_OK;
}

const sg__op_def sg__def_concat = {SG_OP_CONCAT, "concat",    1, -1, 0, 0, SG_ROLE_ACTIVATION, 1,
                                   concat_attrs, infer_concat};

sg_tensor sg_concat(sg_graph *g, int n, const sg_tensor *xs, int axis) {
  sg_attr a[] = {SG__AI("axis", axis)};
  return sg__build1(g, SG_OP_CONCAT, n, xs, 1, a);
}
