/* Elementwise ops: activations, broadcasting binary ops, scalar ops. */
#include <math.h>

#include "graph/graph_internal.h"

/* ---- unary activations: float in, same shape out ------------------------ */

static sg_status infer_float_unary(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *x = sg__in(g, op, 0);
  if (!sg__is_float(x->dtype)) {
    char sx[SG__SHAPE_STR];
    return sg__op_error(op, SG_ERR_DTYPE, "input %s must be a float type", sg__tstr(sx, x));
  }
  sg__shape_of(x, &outs[0]);
  *n_outs = 1;
  return SG_OK;
}

static const sg__attr_schema clip_attrs[] = {
    {"min", SG_ATTR_FLOAT, true, 0, 0, 0, {0}, 0, 0},
    {"max", SG_ATTR_FLOAT, true, 0, 0, 0, {0}, 0, 0},
};

static sg_status infer_clip(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  double lo = sg__attr_f(op, 0), hi = sg__attr_f(op, 1);
  if (isnan(lo) || isnan(hi) || lo > hi)
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "min %g must be <= max %g", lo, hi);
  return infer_float_unary(g, op, outs, n_outs);
}

static const sg__attr_schema gelu_attrs[] = {{"approximate", SG_ATTR_INT, false, 0, 0, 0, {0}, 0, 0}};

static sg_status infer_gelu(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  int64_t a = sg__attr_i(op, 0);
  if (a != 0 && a != 1)
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "approximate is %lld; must be 0 (erf) or 1 (tanh)",
                        (long long)a);
  return infer_float_unary(g, op, outs, n_outs);
}

/* Every elementwise kind here may write its output over its input 0. */
#define EW (SG__OP_ELEMENTWISE | SG__OP_INPLACE_INPUT0)

#define UNARY_DEF(var, KIND, name, nattrs, attrs, infer, flags) \
  const sg__op_def var = {KIND, name, 1, 1, 0, 0, SG_ROLE_ACTIVATION, nattrs, attrs, infer, flags}
UNARY_DEF(sg__def_relu, SG_OP_RELU, "relu", 0, NULL, infer_float_unary, EW | SG__OP_LAYOUT_AGNOSTIC);
UNARY_DEF(sg__def_sigmoid, SG_OP_SIGMOID, "sigmoid", 0, NULL, infer_float_unary, EW);
UNARY_DEF(sg__def_tanh, SG_OP_TANH, "tanh", 0, NULL, infer_float_unary, EW);
UNARY_DEF(sg__def_clip, SG_OP_CLIP, "clip", 2, clip_attrs, infer_clip, EW);
UNARY_DEF(sg__def_gelu, SG_OP_GELU, "gelu", 1, gelu_attrs, infer_gelu, EW);

sg_tensor sg_relu(sg_graph *g, sg_tensor x) { return sg__build1(g, SG_OP_RELU, 1, &x, 0, NULL); }
sg_tensor sg_sigmoid(sg_graph *g, sg_tensor x) { return sg__build1(g, SG_OP_SIGMOID, 1, &x, 0, NULL); }
sg_tensor sg_tanh(sg_graph *g, sg_tensor x) { return sg__build1(g, SG_OP_TANH, 1, &x, 0, NULL); }
sg_tensor sg_clip(sg_graph *g, sg_tensor x, double lo, double hi) {
  sg_attr a[] = {SG__AF("min", lo), SG__AF("max", hi)};
  return sg__build1(g, SG_OP_CLIP, 1, &x, 2, a);
}
sg_tensor sg_relu6(sg_graph *g, sg_tensor x) { return sg_clip(g, x, 0.0, 6.0); }
sg_tensor sg_gelu(sg_graph *g, sg_tensor x, int approximate) {
  sg_attr a[] = {SG__AI("approximate", approximate)};
  return sg__build1(g, SG_OP_GELU, 1, &x, 1, a);
}

/* ---- binary ops with broadcasting ---------------------------------------- */

static sg_status infer_binary(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *a = sg__in(g, op, 0), *b = sg__in(g, op, 1);
  char sa[SG__SHAPE_STR], sb[SG__SHAPE_STR];
  if (a->dtype != b->dtype || !(sg__is_float(a->dtype) || sg__is_int(a->dtype)))
    return sg__op_error(op, SG_ERR_DTYPE, "operands %s and %s must share one float or integer dtype",
                        sg__tstr(sa, a), sg__tstr(sb, b));
  SG_CHECK(sg__broadcast(op, a, b, &outs[0]));
  *n_outs = 1;
  return SG_OK;
}

#define BINARY_DEF(var, KIND, name, flags) \
  const sg__op_def var = {KIND, name, 2, 2, 0, 0, SG_ROLE_ACTIVATION, 0, NULL, infer_binary, flags}
BINARY_DEF(sg__def_add, SG_OP_ADD, "add", EW | SG__OP_LAYOUT_AGNOSTIC);
BINARY_DEF(sg__def_sub, SG_OP_SUB, "sub", EW | SG__OP_LAYOUT_AGNOSTIC);
BINARY_DEF(sg__def_mul, SG_OP_MUL, "mul", EW | SG__OP_LAYOUT_AGNOSTIC);
BINARY_DEF(sg__def_div, SG_OP_DIV, "div", EW); /* 0 / 0 is not 0 */

static sg_tensor binary(sg_graph *g, sg_op_kind kind, sg_tensor a, sg_tensor b) {
  sg_tensor in[] = {a, b};
  return sg__build1(g, kind, 2, in, 0, NULL);
}
sg_tensor sg_add(sg_graph *g, sg_tensor a, sg_tensor b) { return binary(g, SG_OP_ADD, a, b); }
sg_tensor sg_sub(sg_graph *g, sg_tensor a, sg_tensor b) { return binary(g, SG_OP_SUB, a, b); }
sg_tensor sg_mul(sg_graph *g, sg_tensor a, sg_tensor b) { return binary(g, SG_OP_MUL, a, b); }
sg_tensor sg_div(sg_graph *g, sg_tensor a, sg_tensor b) { return binary(g, SG_OP_DIV, a, b); }

/* ---- ops with a build-time scalar ---------------------------------------- */

static const sg__attr_schema scalar_attrs[] = {{"value", SG_ATTR_FLOAT, true, 0, 0, 0, {0}, 0, 0}};

static sg_status infer_scalar(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *x = sg__in(g, op, 0);
  double v = sg__attr_f(op, 0);
  char sx[SG__SHAPE_STR];
  sg__tstr(sx, x);
  if (!isfinite(v)) return sg__op_error(op, SG_ERR_ATTRIBUTE, "value %g must be finite", v);
  bool need_float = op->kind == SG_OP_POW_SCALAR;
  if (!(sg__is_float(x->dtype) || (!need_float && sg__is_int(x->dtype))))
    return sg__op_error(op, SG_ERR_DTYPE, "input %s must be a float%s type", sx,
                        need_float ? "" : " or integer");
  sg__shape_of(x, &outs[0]);
  *n_outs = 1;
  return SG_OK;
}

#define SCALAR_DEF(var, KIND, name, flags) \
  const sg__op_def var = {KIND, name, 1, 1, 0, 0, SG_ROLE_ACTIVATION, 1, scalar_attrs, infer_scalar, flags}
SCALAR_DEF(sg__def_add_scalar, SG_OP_ADD_SCALAR, "add_scalar", EW);
SCALAR_DEF(sg__def_mul_scalar, SG_OP_MUL_SCALAR, "mul_scalar", EW | SG__OP_LAYOUT_AGNOSTIC);
SCALAR_DEF(sg__def_pow_scalar, SG_OP_POW_SCALAR, "pow_scalar", EW);

static sg_tensor scalar(sg_graph *g, sg_op_kind kind, sg_tensor x, double s) {
  sg_attr a[] = {SG__AF("value", s)};
  return sg__build1(g, kind, 1, &x, 1, a);
}
sg_tensor sg_add_scalar(sg_graph *g, sg_tensor x, double s) { return scalar(g, SG_OP_ADD_SCALAR, x, s); }
sg_tensor sg_mul_scalar(sg_graph *g, sg_tensor x, double s) { return scalar(g, SG_OP_MUL_SCALAR, x, s); }
sg_tensor sg_pow_scalar(sg_graph *g, sg_tensor x, double s) { return scalar(g, SG_OP_POW_SCALAR, x, s); }
