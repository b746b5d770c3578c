/* Backward ops of max and average pooling. They take the forward op's
 * attributes unchanged (avg adds the input shape, since it does not receive
 * x) and check that pooling an input of that shape gives dy. */
#include <stdio.h>

#include "graph/graph_internal.h"

enum { KERNEL, STRIDE, PADDING, CEIL_MODE, COUNT_INCLUDE_PAD, INPUT_SHAPE };
static const sg__attr_schema pool_attrs[] = {
    SG__POOL2D_ATTR_SCHEMA,
    [INPUT_SHAPE] = {"input_shape", SG_ATTR_INTS, true, 0, 0, 0, {0}, 4, 4},
};

/* Checks the attributes (as the forward op does) and that pooling x
 * (described by xdesc) gives dy. */
static sg_status check_pool(const sg__op *op, const int64_t *x, const char *xdesc, const sg__tensor *dy) {
  int64_t oh, ow;
  SG_CHECK(sg__pool2d_window(op, op->kind == SG_OP_AVG_POOL2D_BACKWARD, x, xdesc, &oh, &ow));
  int64_t y[4] = {x[0], x[1], oh, ow};
  char sdy[SG__SHAPE_STR], want[SG__SHAPE_STR];
  sg__tstr(sdy, dy);
  if (dy->ndim != 4 || dy->dims[0] != y[0] || dy->dims[1] != y[1] || dy->dims[2] != y[2] ||
      dy->dims[3] != y[3])
    return sg__op_error(op, SG_ERR_SHAPE, "dy %s must be %s, the pooled shape of %s", sdy,
                        sg__shape_str(want, dy->dtype, 4, y), xdesc);
  return SG_OK;
}

static sg_status infer_max_pool2d_backward(const sg_graph *g, const sg__op *op, sg__shape *outs,
                                           int *n_outs) {
  const sg__tensor *dy = sg__in(g, op, 0), *x = sg__in(g, op, 1);
  char sdy[SG__SHAPE_STR], sx[SG__SHAPE_STR], xdesc[SG__SHAPE_STR + 8];
  sg__tstr(sdy, dy);
  sg__tstr(sx, x);
  if (!sg__is_float(x->dtype) || dy->dtype != x->dtype)
    return sg__op_error(op, SG_ERR_DTYPE, "dy %s and x %s must share one float dtype", sdy, sx);
  if (x->ndim != 4) return sg__op_error(op, SG_ERR_SHAPE, "x %s must be 4-D [N,C,H,W]", sx);
  snprintf(xdesc, sizeof xdesc, "x %s", sx);
  SG_CHECK(check_pool(op, x->dims, xdesc, dy));
  sg__shape_of(x, &outs[0]);
  *n_outs = 1;
  return SG_OK;
}

static sg_status infer_avg_pool2d_backward(const sg_graph *g, const sg__op *op, sg__shape *outs,
                                           int *n_outs) {
  const sg__tensor *dy = sg__in(g, op, 0);
  const int64_t *x = sg__attr_ints(op, INPUT_SHAPE);
  char sdy[SG__SHAPE_STR], sx[SG__SHAPE_STR], xdesc[SG__SHAPE_STR + 16];
  sg__tstr(sdy, dy);
  if (!sg__is_float(dy->dtype)) return sg__op_error(op, SG_ERR_DTYPE, "dy %s must be a float type", sdy);
  snprintf(xdesc, sizeof xdesc, "input_shape %s", sg__shape_str(sx, dy->dtype, 4, x));
  int64_t numel;
  if (!sg__numel_checked(4, x, &numel))
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "%s must have dims >= 1 and at most 2^56 elements", xdesc);
  SG_CHECK(check_pool(op, x, xdesc, dy));
  outs[0] = (sg__shape){dy->dtype, 4, {x[0], x[1], x[2], x[3]}};
  *n_outs = 1;
  return SG_OK;
}

/* max_pool2d_backward has the four attributes of max_pool2d: the first four
 * entries of the shared schema. */
const sg__op_def sg__def_max_pool2d_backward = {
    SG_OP_MAX_POOL2D_BACKWARD, "max_pool2d_backward", 2, 2, 0, 0, SG_ROLE_GRADIENT, 4, pool_attrs,
    infer_max_pool2d_backward};
const sg__op_def sg__def_avg_pool2d_backward = {
    SG_OP_AVG_POOL2D_BACKWARD, "avg_pool2d_backward", 1, 1, 0, 0, SG_ROLE_GRADIENT, 6, pool_attrs,
    infer_avg_pool2d_backward};
