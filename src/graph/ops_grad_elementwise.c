/* Backward ops of the elementwise activations and of dropout: dx from dy and
 * one saved tensor of the same shape (the forward output y for relu, sigmoid
 * and tanh, whose derivatives are cheapest from y; the forward input x for
 * clip and gelu; the keep mask for dropout). */
#include <math.h>

#include "graph/graph_internal.h"

/* dy (float) and a saved tensor of its shape; `dtype` 0 means dy's dtype. */
static sg_status infer_dy_like(const sg_graph *g, const sg__op *op, const char *what, sg_dtype dtype,
                               sg__shape *outs, int *n_outs) {
  const sg__tensor *dy = sg__in(g, op, 0), *t = sg__in(g, op, 1);
  char sdy[SG__SHAPE_STR], st[SG__SHAPE_STR];
  sg__tstr(sdy, dy);
  sg__tstr(st, t);
  if (!sg__is_float(dy->dtype)) return sg__op_error(op, SG_ERR_DTYPE, "dy %s must be a float type", sdy);
  sg_dtype want = dtype ? dtype : dy->dtype;
  if (t->dtype != want)
    return sg__op_error(op, SG_ERR_DTYPE, "%s %s must be %s%s", what, st, sg_dtype_name(want),
                        dtype ? "" : ", the dtype of dy");
  bool same = t->ndim == dy->ndim;
  for (int i = 0; same && i < dy->ndim; i++) same = t->dims[i] == dy->dims[i];
  if (!same) return sg__op_error(op, SG_ERR_SHAPE, "dy %s and %s %s must have the same shape", sdy, what, st);
  sg__shape_of(dy, &outs[0]);
  *n_outs = 1;
  return SG_OK;
}

static sg_status infer_with_y(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  return infer_dy_like(g, op, "y", 0, outs, n_outs);
}

static const sg__attr_schema clip_attrs[] = {
    {"min", SG_ATTR_FLOAT, true, 0, 0, 0, {0}, 0, 0},
    {"max", SG_ATTR_FLOAT, true, 0, 0, 0, {0}, 0, 0},
};

static sg_status infer_clip_backward(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  double lo = sg__attr_f(op, 0), hi = sg__attr_f(op, 1);
  if (isnan(lo) || isnan(hi) || lo > hi)
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "min %g must be <= max %g", lo, hi);
  return infer_dy_like(g, op, "x", 0, outs, n_outs);
}

static const sg__attr_schema gelu_attrs[] = {{"approximate", SG_ATTR_INT, false, 0, 0, 0, {0}, 0, 0}};

static sg_status infer_gelu_backward(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  int64_t a = sg__attr_i(op, 0);
  if (a != 0 && a != 1)
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "approximate is %lld; must be 0 (erf) or 1 (tanh)",
                        (long long)a);
  return infer_dy_like(g, op, "x", 0, outs, n_outs);
}

static const sg__attr_schema dropout_attrs[] = {{"p", SG_ATTR_FLOAT, false, 0, 0.5, 0, {0}, 0, 0}};

static sg_status infer_dropout_backward(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  double p = sg__attr_f(op, 0);
  if (!(p >= 0 && p < 1)) return sg__op_error(op, SG_ERR_ATTRIBUTE, "p is %g; must be in [0, 1)", p);
  return infer_dy_like(g, op, "mask", SG_U8, outs, n_outs);
}

/* dx[i] from dy[i] and the saved value at i; dx may be written over dy. */
#define EW (SG__OP_ELEMENTWISE | SG__OP_INPLACE_INPUT0)

#define BACKWARD_DEF(var, KIND, name, nattrs, attrs, infer, flags) \
  const sg__op_def var = {KIND, name, 2, 2, 0, 0, SG_ROLE_GRADIENT, nattrs, attrs, infer, flags}
BACKWARD_DEF(sg__def_relu_backward, SG_OP_RELU_BACKWARD, "relu_backward", 0, NULL, infer_with_y,
             EW | SG__OP_LAYOUT_AGNOSTIC);
BACKWARD_DEF(sg__def_sigmoid_backward, SG_OP_SIGMOID_BACKWARD, "sigmoid_backward", 0, NULL, infer_with_y, EW);
BACKWARD_DEF(sg__def_tanh_backward, SG_OP_TANH_BACKWARD, "tanh_backward", 0, NULL, infer_with_y, EW);
BACKWARD_DEF(sg__def_clip_backward, SG_OP_CLIP_BACKWARD, "clip_backward", 2, clip_attrs, infer_clip_backward,
             EW);
BACKWARD_DEF(sg__def_gelu_backward, SG_OP_GELU_BACKWARD, "gelu_backward", 1, gelu_attrs, infer_gelu_backward,
             EW);
BACKWARD_DEF(sg__def_dropout_backward, SG_OP_DROPOUT_BACKWARD, "dropout_backward", 1, dropout_attrs,
             infer_dropout_backward, EW);
