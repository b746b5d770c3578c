/* Backward ops of softmax, log_softmax and cross entropy. The softmax pair
 * work from the forward output y (both derivatives are cheapest from it);
 * cross entropy recomputes the softmax of the logits rather than keeping it
 * alive from the forward pass. */
#include "graph/graph_internal.h"

static const sg__attr_schema softmax_attrs[] = {{"axis", SG_ATTR_INT, false, -1, 0, 0, {0}, 0, 0}};

static sg_status infer_softmax_backward(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *dy = sg__in(g, op, 0), *y = sg__in(g, op, 1);
  char sdy[SG__SHAPE_STR], sy[SG__SHAPE_STR];
  sg__tstr(sdy, dy);
  sg__tstr(sy, y);
  if (!sg__is_float(y->dtype) || dy->dtype != y->dtype)
    return sg__op_error(op, SG_ERR_DTYPE, "dy %s and y %s must share one float dtype", sdy, sy);
  bool same = dy->ndim == y->ndim;
  for (int i = 0; same && i < y->ndim; i++) same = dy->dims[i] == y->dims[i];
  if (!same) return sg__op_error(op, SG_ERR_SHAPE, "dy %s and y %s must have the same shape", sdy, sy);
  SG_CHECK(sg__softmax_axis_check(op, y, "y"));
  sg__shape_of(y, &outs[0]);
  *n_outs = 1;
  return SG_OK;
}

const sg__op_def sg__def_softmax_backward = {
    SG_OP_SOFTMAX_BACKWARD, "softmax_backward",    2, 2, 0, 0, SG_ROLE_GRADIENT, 1,
    softmax_attrs,          infer_softmax_backward};
const sg__op_def sg__def_log_softmax_backward = {
    SG_OP_LOG_SOFTMAX_BACKWARD, "log_softmax_backward", 2, 2, 0, 0, SG_ROLE_GRADIENT, 1, softmax_attrs,
    infer_softmax_backward};

static const sg__attr_schema ce_attrs[] = {
    {"reduction", SG_ATTR_INT, false, SG_REDUCTION_MEAN, 0, 0, {0}, 0, 0}};

static sg_status infer_ce_backward(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *dl = sg__in(g, op, 0), *x = sg__in(g, op, 1), *y = sg__in(g, op, 2);
  SG_CHECK(sg__cross_entropy_check(op, x, y, dl));
  char sdl[SG__SHAPE_STR], sx[SG__SHAPE_STR];
  sg__tstr(sdl, dl);
  sg__tstr(sx, x);
  int64_t red = sg__attr_i(op, 0);
  /* dloss has the shape of the forward loss: [N] unreduced, else a scalar. */
  if (red == SG_REDUCTION_NONE && (dl->ndim != 1 || dl->dims[0] != x->dims[0]))
    return sg__op_error(op, SG_ERR_SHAPE, "dloss %s must be [%lld] (reduction none) to match logits %s", sdl,
                        (long long)x->dims[0], sx);
  if (red != SG_REDUCTION_NONE && dl->ndim != 0)
    return sg__op_error(op, SG_ERR_SHAPE, "dloss %s must be a scalar (reduction %s)", sdl,
                        red == SG_REDUCTION_MEAN ? "mean" : "sum");
  sg__shape_of(x, &outs[0]);
  *n_outs = 1;
  return SG_OK;
}

const sg__op_def sg__def_cross_entropy_backward = {SG_OP_CROSS_ENTROPY_BACKWARD,
                                                   "cross_entropy_backward",
                                                   3,
                                                   3,
                                                   0,
                                                   0,
                                                   SG_ROLE_GRADIENT,
                                                   1,
                                                   ce_attrs,
                                                   infer_ce_backward};
