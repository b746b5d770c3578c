/* Backward ops of conv2d: the gradient with respect to the input
 * (conv2d_backward_data) and to the weight (conv2d_backward_weight). The bias
 * gradient is an ordinary reduce_sum. Each op carries the shape of the
 * forward tensor it does not receive, and its inference checks that the
 * forward convolution of that shape really produces dy: a backward op that
 * disagrees with its forward op fails at build time, not in a kernel. */
#include <stdio.h>

#include "graph/graph_internal.h"

/* The attributes of conv2d in its order (see ops_conv.c), then the extra
 * shape: the forward op's attribute array passes on unchanged plus one. */
enum { SHAPE = 4 };
static const sg__attr_schema data_attrs[] = {
    SG__CONV2D_ATTR_SCHEMA,
    [SHAPE] = {"input_shape", SG_ATTR_INTS, true, 0, 0, 0, {0}, 4, 4},
};
static const sg__attr_schema weight_attrs[] = {
    SG__CONV2D_ATTR_SCHEMA,
    [SHAPE] = {"weight_shape", SG_ATTR_INTS, true, 0, 0, 0, {0}, 4, 4},
};

/* A shape attribute must describe a valid tensor. */
static sg_status check_shape_attr(const sg__op *op, const char *what, const int64_t *d, sg_dtype dt) {
  int64_t numel;
  if (!sg__numel_checked(4, d, &numel)) {
    char s[SG__SHAPE_STR];
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "%s %s must have dims >= 1 and at most 2^56 elements", what,
                        sg__shape_str(s, dt, 4, d));
  }
  return SG_OK;
}

/* Checks the attributes (as conv2d does) and that conv2d of an input of
 * shape x with a weight of shape w gives dy. xdesc / wdesc describe x and w
 * in messages. */
static sg_status check_conv(const sg__op *op, const int64_t *x, const char *xdesc, const int64_t *w,
                            const char *wdesc, const sg__tensor *dy) {
  int64_t y[4];
  SG_CHECK(sg__conv2d_window(op, x, xdesc, w, wdesc, y));
  char sdy[SG__SHAPE_STR], want[SG__SHAPE_STR];
  sg__tstr(sdy, dy);
  if (dy->dims[0] != y[0] || dy->dims[1] != y[1] || dy->dims[2] != y[2] || dy->dims[3] != y[3])
    return sg__op_error(op, SG_ERR_SHAPE, "dy %s must be %s, the conv2d output of %s with %s", sdy,
                        sg__shape_str(want, dy->dtype, 4, y), xdesc, wdesc);
  return SG_OK;
}

/* dy and the other tensor: 4-D, one float dtype. */
static sg_status check_operands(const sg__op *op, const sg__tensor *dy, const sg__tensor *t, const char *what,
                                const char *layout) {
  char sdy[SG__SHAPE_STR], st[SG__SHAPE_STR];
  sg__tstr(sdy, dy);
  sg__tstr(st, t);
  if (!sg__is_float(dy->dtype) || t->dtype != dy->dtype)
    return sg__op_error(op, SG_ERR_DTYPE, "dy %s and %s %s must share one float dtype", sdy, what, st);
  if (dy->ndim != 4) return sg__op_error(op, SG_ERR_SHAPE, "dy %s must be 4-D [N,K,OH,OW]", sdy);
  if (t->ndim != 4) return sg__op_error(op, SG_ERR_SHAPE, "%s %s must be 4-D %s", what, st, layout);
  return SG_OK;
}

static sg_status infer_backward_data(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *dy = sg__in(g, op, 0), *w = sg__in(g, op, 1);
  const int64_t *x = sg__attr_ints(op, SHAPE);
  char sw[SG__SHAPE_STR], sx[SG__SHAPE_STR], xdesc[SG__SHAPE_STR + 16], wdesc[SG__SHAPE_STR + 8];
  SG_CHECK(check_operands(op, dy, w, "w", "[K,C/groups,R,S]"));
  SG_CHECK(check_shape_attr(op, "input_shape", x, dy->dtype));
  snprintf(xdesc, sizeof xdesc, "input_shape %s", sg__shape_str(sx, dy->dtype, 4, x));
  snprintf(wdesc, sizeof wdesc, "w %s", sg__tstr(sw, w));
  SG_CHECK(check_conv(op, x, xdesc, w->dims, wdesc, dy));
  outs[0] = (sg__shape){dy->dtype, 4, {x[0], x[1], x[2], x[3]}};
  *n_outs = 1;
  return SG_OK;
}

static sg_status infer_backward_weight(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *dy = sg__in(g, op, 0), *x = sg__in(g, op, 1);
  const int64_t *w = sg__attr_ints(op, SHAPE);
  char sw[SG__SHAPE_STR], sx[SG__SHAPE_STR], xdesc[SG__SHAPE_STR + 8], wdesc[SG__SHAPE_STR + 16];
  SG_CHECK(check_operands(op, dy, x, "x", "[N,C,H,W]"));
  SG_CHECK(check_shape_attr(op, "weight_shape", w, dy->dtype));
  snprintf(xdesc, sizeof xdesc, "x %s", sg__tstr(sx, x));
  snprintf(wdesc, sizeof wdesc, "weight_shape %s", sg__shape_str(sw, dy->dtype, 4, w));
  SG_CHECK(check_conv(op, x->dims, xdesc, w, wdesc, dy));
  outs[0] = (sg__shape){dy->dtype, 4, {w[0], w[1], w[2], w[3]}};
  *n_outs = 1;
  return SG_OK;
}

const sg__op_def sg__def_conv2d_backward_data = {
    SG_OP_CONV2D_BACKWARD_DATA, "conv2d_backward_data", 2, 2, 0, 0, SG_ROLE_GRADIENT, 5, data_attrs,
    infer_backward_data};
const sg__op_def sg__def_conv2d_backward_weight = {
    SG_OP_CONV2D_BACKWARD_WEIGHT, "conv2d_backward_weight", 2, 2, 0, 0, SG_ROLE_GRADIENT, 5, weight_attrs,
    infer_backward_weight};
