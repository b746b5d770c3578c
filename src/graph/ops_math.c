/* Elementwise math (exp, log, sqrt, reciprocal, neg, abs, sign, erf, sin,
 * cos, acos), the
 * broadcasting maximum and minimum, where (select) and cast. */
#include "graph/graph_internal.h"

/* ---- unary math ----------------------------------------------------------- */

/* exp, log, sqrt, reciprocal, erf, sin, cos and acos take floats; neg, abs and sign also
 * integers. The output has the input's shape and dtype. */
static sg_status infer_math_unary(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *x = sg__in(g, op, 0);
  bool ints_ok = op->kind == SG_OP_NEG || op->kind == SG_OP_ABS || op->kind == SG_OP_SIGN;
  if (!(sg__is_float(x->dtype) || (ints_ok && sg__is_int(x->dtype)))) {
    char sx[SG__SHAPE_STR];
    return sg__op_error(op, SG_ERR_DTYPE, "input %s must be a float%s type", sg__tstr(sx, x),
                        ints_ok ? " or integer" : "");
  }
  sg__shape_of(x, &outs[0]);
  *n_outs = 1;
  return SG_OK;
}

/* Every elementwise kind here may write its output over its input 0. */
#define EW (SG__OP_ELEMENTWISE | SG__OP_INPLACE_INPUT0)

#define MATH_DEF(var, KIND, name) \
  const sg__op_def var = {KIND, name, 1, 1, 0, 0, SG_ROLE_ACTIVATION, 0, NULL, infer_math_unary, EW}
MATH_DEF(sg__def_exp, SG_OP_EXP, "exp");
MATH_DEF(sg__def_log, SG_OP_LOG, "log");
MATH_DEF(sg__def_sqrt, SG_OP_SQRT, "sqrt");
MATH_DEF(sg__def_reciprocal, SG_OP_RECIPROCAL, "reciprocal");
MATH_DEF(sg__def_neg, SG_OP_NEG, "neg");
MATH_DEF(sg__def_abs, SG_OP_ABS, "abs");
MATH_DEF(sg__def_sign, SG_OP_SIGN, "sign");
MATH_DEF(sg__def_erf, SG_OP_ERF, "erf");
MATH_DEF(sg__def_sin, SG_OP_SIN, "sin");
MATH_DEF(sg__def_cos, SG_OP_COS, "cos");
MATH_DEF(sg__def_acos, SG_OP_ACOS, "acos");

sg_tensor sg_exp(sg_graph *g, sg_tensor x) { return sg__build1(g, SG_OP_EXP, 1, &x, 0, NULL); }
sg_tensor sg_log(sg_graph *g, sg_tensor x) { return sg__build1(g, SG_OP_LOG, 1, &x, 0, NULL); }
sg_tensor sg_sqrt(sg_graph *g, sg_tensor x) { return sg__build1(g, SG_OP_SQRT, 1, &x, 0, NULL); }
sg_tensor sg_reciprocal(sg_graph *g, sg_tensor x) { return sg__build1(g, SG_OP_RECIPROCAL, 1, &x, 0, NULL); }
sg_tensor sg_neg(sg_graph *g, sg_tensor x) { return sg__build1(g, SG_OP_NEG, 1, &x, 0, NULL); }
sg_tensor sg_abs(sg_graph *g, sg_tensor x) { return sg__build1(g, SG_OP_ABS, 1, &x, 0, NULL); }
sg_tensor sg_sign(sg_graph *g, sg_tensor x) { return sg__build1(g, SG_OP_SIGN, 1, &x, 0, NULL); }
sg_tensor sg_erf(sg_graph *g, sg_tensor x) { return sg__build1(g, SG_OP_ERF, 1, &x, 0, NULL); }
sg_tensor sg_sin(sg_graph *g, sg_tensor x) { return sg__build1(g, SG_OP_SIN, 1, &x, 0, NULL); }
sg_tensor sg_cos(sg_graph *g, sg_tensor x) { return sg__build1(g, SG_OP_COS, 1, &x, 0, NULL); }
sg_tensor sg_acos(sg_graph *g, sg_tensor x) { return sg__build1(g, SG_OP_ACOS, 1, &x, 0, NULL); }

/* ---- max, min ------------------------------------------------------------- */

static sg_status infer_minmax(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *a = sg__in(g, op, 0), *b = sg__in(g, op, 1);
  char sa[SG__SHAPE_STR], sb[SG__SHAPE_STR];
  if (a->dtype != b->dtype || !(sg__is_float(a->dtype) || sg__is_int(a->dtype)))
    return sg__op_error(op, SG_ERR_DTYPE, "operands %s and %s must share one float or integer dtype",
                        sg__tstr(sa, a), sg__tstr(sb, b));
  SG_CHECK(sg__broadcast(op, a, b, &outs[0]));
  *n_outs = 1;
  return SG_OK;
}

const sg__op_def sg__def_max = {SG_OP_MAX, "max", 2, 2, 0, 0, SG_ROLE_ACTIVATION, 0, NULL, infer_minmax, EW};
const sg__op_def sg__def_min = {SG_OP_MIN, "min", 2, 2, 0, 0, SG_ROLE_ACTIVATION, 0, NULL, infer_minmax, EW};

sg_tensor sg_max(sg_graph *g, sg_tensor a, sg_tensor b) {
  sg_tensor in[] = {a, b};
  return sg__build1(g, SG_OP_MAX, 2, in, 0, NULL);
}
sg_tensor sg_min(sg_graph *g, sg_tensor a, sg_tensor b) {
  sg_tensor in[] = {a, b};
  return sg__build1(g, SG_OP_MIN, 2, in, 0, NULL);
}

/* ---- where ---------------------------------------------------------------- */

static sg_status infer_where(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *cond = sg__in(g, op, 0), *a = sg__in(g, op, 1), *b = sg__in(g, op, 2);
  char sc[SG__SHAPE_STR], sa[SG__SHAPE_STR], sb[SG__SHAPE_STR];
  sg__tstr(sc, cond);
  sg__tstr(sa, a);
  sg__tstr(sb, b);
  if (cond->dtype != SG_BOOL) return sg__op_error(op, SG_ERR_DTYPE, "condition %s must be bool", sc);
  if (a->dtype != b->dtype || !(sg__is_float(a->dtype) || sg__is_int(a->dtype)))
    return sg__op_error(op, SG_ERR_DTYPE, "operands %s and %s must share one float or integer dtype", sa, sb);
  /* NumPy broadcasting of all three shapes, right-aligned. */
  const sg__tensor *t[3] = {cond, a, b};
  int n = 0;
  for (int k = 0; k < 3; k++) n = t[k]->ndim > n ? t[k]->ndim : n;
  sg__shape *o = &outs[0];
  o->dtype = a->dtype;
  o->ndim = n;
  for (int i = 0; i < n; i++) {
    int64_t d = 1;
    for (int k = 0; k < 3; k++) {
      int j = t[k]->ndim - n + i;
      int64_t dk = j >= 0 ? t[k]->dims[j] : 1;
      if (dk != 1 && d != 1 && dk != d)
        return sg__op_error(op, SG_ERR_SHAPE, "shapes %s, %s and %s do not broadcast (dim %d)", sc, sa, sb,
                            i);
      if (dk != 1) d = dk;
    }
    o->dims[i] = d;
  }
  *n_outs = 1;
  return SG_OK;
}

const sg__op_def sg__def_where = {SG_OP_WHERE,        "where", 3,    3,           0, 0,
                                  SG_ROLE_ACTIVATION, 0,       NULL, infer_where, EW};

sg_tensor sg_where(sg_graph *g, sg_tensor cond, sg_tensor a, sg_tensor b) {
  sg_tensor in[] = {cond, a, b};
  return sg__build1(g, SG_OP_WHERE, 3, in, 0, NULL);
}

/* ---- cast ----------------------------------------------------------------- */

static const sg__attr_schema cast_attrs[] = {{"to", SG_ATTR_INT, true, 0, 0, 0, {0}, 0, 0}};

static bool castable(int64_t dt) { return dt == SG_F32 || dt == SG_I32 || dt == SG_I64 || dt == SG_BOOL; }

static sg_status infer_cast(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *x = sg__in(g, op, 0);
  int64_t to = sg__attr_i(op, 0);
  char sx[SG__SHAPE_STR];
  if (!castable(to))
    return sg__op_error(
        op, SG_ERR_DTYPE, "to is %lld (%s); must be f32 (%d), i32 (%d), i64 (%d) or bool (%d)", (long long)to,
        to > 0 && to < 1000 ? sg_dtype_name((sg_dtype)to) : "?", SG_F32, SG_I32, SG_I64, SG_BOOL);
  if (!castable(x->dtype))
    return sg__op_error(op, SG_ERR_DTYPE, "input %s must be f32, i32, i64 or bool", sg__tstr(sx, x));
  sg__shape_of(x, &outs[0]);
  outs[0].dtype = (sg_dtype)to;
  *n_outs = 1;
  return SG_OK;
}

const sg__op_def sg__def_cast = {SG_OP_CAST,         "cast", 1,          1,          0, 0,
                                 SG_ROLE_ACTIVATION, 1,      cast_attrs, infer_cast, EW};

sg_tensor sg_cast(sg_graph *g, sg_tensor x, sg_dtype to) {
  sg_attr a = SG__AI("to", (int64_t)to);
  return sg__build1(g, SG_OP_CAST, 1, &x, 1, &a);
}
