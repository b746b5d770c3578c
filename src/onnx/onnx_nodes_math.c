/* Converters of the ONNX elementwise math ops, Pow, Max/Min, Where, Gelu
 * LayerNormalization (issue 17; docs/onnx.md has the mapping table),
 * CumSum, ReduceMax and ReduceMin.
 * PyTorch exports GELU before opset 20 as x * 0.5 * (1 + Erf(x / sqrt 2))
 * (or its tanh form with Pow and Tanh) and LayerNorm before opset 17 as
 * ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add: those import
 * op by op through the converters here and in onnx_nodes.c. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "onnx/onnx_internal.h"

static const char *const no_attrs[] = {NULL};

static sg_status in_tensor(ox_ctx *c, int i, const char *what, sg_tensor *t) {
  ox_value *v = sg__ox_input(c, c->node, i);
  if (v == NULL) return sg__ox_node_error(c, SG_ERR_ARITY, "input %d (%s) is missing", i, what);
  return sg__ox_tensor(c, v, t);
}

static sg_status out0(ox_ctx *c, sg_tensor t) {
  SG_CHECK(sg__ox_built(c, t));
  return sg__ox_set_tensor(c, 0, t);
}

/* ---- unary math ------------------------------------------------------------ */

/* A unary op of an import-time constant, folded: float32 data computed in
 * float32 (as the kernels do, up to libm's last bit), integers exactly
 * (Neg, Abs, Sign only; Neg and Abs of INT64_MIN are SG_ERR_RANGE). T5's
 * relative position buckets take Abs and Log of constants. */
static sg_status fold_unary(ox_ctx *c, const ox_value *x, sg_tensor (*fn)(sg_graph *, sg_tensor)) {
  bool fl = x->elem == OX_FLOAT;
  if (!fl && fn != sg_neg && fn != sg_abs && fn != sg_sign)
    return sg__ox_node_error(c, SG_ERR_DTYPE, "input '%s' holds integers; this op takes floats", x->name);
  void *out;
  SG_CHECK(sg__ox_fold_alloc(c, x->numel, fl ? 4 : 8, &out));
  for (int64_t i = 0; i < x->numel; i++) {
    if (fl) {
      float v = sg__ox_f32(x, i), r;
      if (fn == sg_exp) r = expf(v);
      else if (fn == sg_log) r = logf(v);
      else if (fn == sg_sqrt) r = sqrtf(v);
      else if (fn == sg_reciprocal) r = 1.0f / v;
      else if (fn == sg_neg) r = -v;
      else if (fn == sg_abs) r = fabsf(v);
      else if (fn == sg_sign) r = v > 0 ? 1.0f : v < 0 ? -1.0f : v; /* 0 and NaN stay */
      else if (fn == sg_sin) r = sinf(v); /* the kernels' libm calls: folded and run-time agree */
      else if (fn == sg_cos) r = cosf(v);
      else if (fn == sg_acos) r = acosf(v);
      else r = erff(v);
      ((float *)out)[i] = r;
      continue;
    }
    int64_t v = sg__ox_i64(x, i);
    if (v == INT64_MIN && fn != sg_sign)
      return sg__ox_node_error(c, SG_ERR_RANGE, "cannot negate %lld of '%s'", (long long)v, x->name);
    ((int64_t *)out)[i] = fn == sg_neg ? -v : fn == sg_abs ? (v < 0 ? -v : v) : (v > 0) - (v < 0);
  }
  return sg__ox_set_const(c, 0, x->elem, x->ndim, x->dims, out);
}

static sg_status unary(ox_ctx *c, sg_tensor (*fn)(sg_graph *, sg_tensor)) {
  SG_CHECK(sg__ox_check_attrs(c, no_attrs));
  ox_value *xv = sg__ox_input(c, c->node, 0);
  if (xv && sg__ox_foldable(xv) && (xv->elem == OX_FLOAT || xv->elem == OX_INT64 || xv->elem == OX_INT32))
    return fold_unary(c, xv, fn);
  sg_tensor x;
  SG_CHECK(in_tensor(c, 0, "X", &x));
  return out0(c, fn(c->g, x));
}

#define UNARY_CV(cvname, fn)                                     \
  static sg_status cvname(ox_ctx *c, const Onnx__NodeProto *n) { \
    (void)n;                                                     \
    return unary(c, fn);                                         \
  }
UNARY_CV(cv_exp, sg_exp)
UNARY_CV(cv_log, sg_log)
UNARY_CV(cv_sqrt, sg_sqrt)
UNARY_CV(cv_reciprocal, sg_reciprocal)
UNARY_CV(cv_neg, sg_neg)
UNARY_CV(cv_abs, sg_abs)
UNARY_CV(cv_sign, sg_sign)
UNARY_CV(cv_erf, sg_erf)

/* Pow(X, Y) with Y a constant scalar (PyTorch's x ** 2, x ** 3, x ** 0.5); of two constants, folded
 * with NumPy broadcasting and X's type (BLOOM's and MPT's ALiBi slopes: base ** arange, a float
 * base and an integer exponent). */
static sg_status cv_pow(ox_ctx *c, const Onnx__NodeProto *n) {
  SG_CHECK(sg__ox_check_attrs(c, no_attrs));
  ox_value *xv = sg__ox_input(c, n, 0), *y = sg__ox_input(c, n, 1);
  if (y == NULL) return sg__ox_node_error(c, SG_ERR_ARITY, "input 1 (Y) is missing");
  bool folded = false;
  if (xv) SG_CHECK(sg__ox_fold_binary(c, 'p', xv, y, &folded));
  if (folded) return SG_OK;
  double e;
  SG_CHECK(sg__ox_const_scalar(c, y, "exponent", &e));
  if (!isfinite(e)) return sg__ox_node_error(c, SG_ERR_UNSUPPORTED, "exponent %g is not finite", e);
  sg_tensor x;
  SG_CHECK(in_tensor(c, 0, "X", &x));
  /* The exponent of a float base is read as the float32 it is (2.0, 0.5 exact). */
  return out0(c, sg_pow_scalar(c->g, x, y->elem == OX_FLOAT ? sg__ox_snap_float(e) : e));
}

/* Ceil, Floor and Round (half to even) of import-time constants, folded (DeBERTa's and Funnel's
 * position buckets). sgrt has no run-time rounding op. */
static sg_status rounding(ox_ctx *c, const Onnx__NodeProto *n, char mode) {
  SG_CHECK(sg__ox_check_attrs(c, no_attrs));
  ox_value *x = sg__ox_input(c, n, 0);
  SG_CHECK(sg__ox_need_foldable(c, x, "input"));
  if (x->elem != OX_FLOAT)
    return sg__ox_node_error(c, SG_ERR_DTYPE, "input '%s' has data type %d; this op takes FLOAT (1)", x->name,
                             x->elem);
  float *out;
  SG_CHECK(sg__ox_fold_alloc(c, x->numel, 4, (void **)&out));
  for (int64_t i = 0; i < x->numel; i++) {
    float v = sg__ox_f32(x, i);
    out[i] = mode == 'c' ? ceilf(v) : mode == 'f' ? floorf(v) : nearbyintf(v); /* default rounding: to even */
  }
  return sg__ox_set_const(c, 0, OX_FLOAT, x->ndim, x->dims, out);
}
static sg_status cv_ceil(ox_ctx *c, const Onnx__NodeProto *n) { return rounding(c, n, 'c'); }
static sg_status cv_floor(ox_ctx *c, const Onnx__NodeProto *n) { return rounding(c, n, 'f'); }
static sg_status cv_round(ox_ctx *c, const Onnx__NodeProto *n) { return rounding(c, n, 'r'); }

/* Sin, Cos and Acos: folded for constants in float32 (libm's sinf, cosf
 * and acosf, as the kernels compute them): the rotary tables of Hugging
 * Face's llama-family models, which exporters write as Cos and Sin of
 * constant angles; of a run-time tensor (rotary angles from position ids
 * that are inputs, YOSO's angles) the sin, cos and acos ops. */
UNARY_CV(cv_sin, sg_sin)
UNARY_CV(cv_cos, sg_cos)
UNARY_CV(cv_acos, sg_acos)

/* ---- Max, Min, Where ------------------------------------------------------- */

/* Max and Min take one or more inputs, broadcast together. */
static sg_status minmax(ox_ctx *c, const Onnx__NodeProto *n, bool max) {
  SG_CHECK(sg__ox_check_attrs(c, no_attrs));
  if (n->n_input == 2) { /* two constants: folded */
    bool folded;
    ox_value *a = sg__ox_input(c, n, 0), *b = sg__ox_input(c, n, 1);
    if (a && b) SG_CHECK(sg__ox_fold_binary(c, max ? 'M' : 'm', a, b, &folded));
    if (a && b && folded) return SG_OK;
  }
  sg_tensor acc;
  SG_CHECK(in_tensor(c, 0, "data_0", &acc));
  for (size_t i = 1; i < n->n_input; i++) {
    sg_tensor t;
    char what[32];
    snprintf(what, sizeof what, "data_%zu", i);
    SG_CHECK(in_tensor(c, (int)i, what, &t));
    acc = (max ? sg_max : sg_min)(c->g, acc, t);
    SG_CHECK(sg__ox_built(c, acc));
  }
  return sg__ox_set_tensor(c, 0, acc);
}
static sg_status cv_max(ox_ctx *c, const Onnx__NodeProto *n) { return minmax(c, n, true); }
static sg_status cv_min(ox_ctx *c, const Onnx__NodeProto *n) { return minmax(c, n, false); }

/* Mod of import-time constants, folded: PyTorch 2's TorchScript exporter
 * writes one in nn.MultiheadAttention's shape arithmetic. `fmod` 0 (the
 * default): the sign of the divisor, as Python's %, integers only; 1: the
 * sign of the dividend, as C's fmod (ONNX requires it for floats). A tensor
 * computed at run time has no form here. */
static sg_status cv_mod(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known[] = {"fmod", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  int64_t fmod_attr = 0;
  SG_CHECK(sg__ox_attr_int(c, "fmod", 0, &fmod_attr));
  if (fmod_attr != 0 && fmod_attr != 1)
    return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "fmod is %lld; must be 0 or 1", (long long)fmod_attr);
  ox_value *a = sg__ox_input(c, n, 0), *b = sg__ox_input(c, n, 1);
  SG_CHECK(sg__ox_need_foldable(c, a, "input A"));
  SG_CHECK(sg__ox_need_foldable(c, b, "input B"));
  if (a->elem != b->elem)
    return sg__ox_node_error(c, SG_ERR_DTYPE, "inputs '%s' and '%s' have data types %d and %d", a->name,
                             b->name, a->elem, b->elem);
  if (a->elem == OX_FLOAT && fmod_attr == 0)
    return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "Mod of floats needs fmod = 1");
  bool folded;
  SG_CHECK(sg__ox_fold_binary(c, fmod_attr ? 'f' : '%', a, b, &folded));
  return folded
             ? SG_OK
             : sg__ox_node_error(c, SG_ERR_UNSUPPORTED, "cannot fold Mod of '%s' and '%s'", a->name, b->name);
}

/* Where of three import-time constants, folded with NumPy broadcasting:
 * what torch.onnx.export writes for `expand(b, -1)` (a Where over the
 * shape's -1 entries) and other shape arithmetic. */
static sg_status fold_where(ox_ctx *c, const ox_value *const v[3]) {
  if (v[0]->elem != OX_BOOL)
    return sg__ox_node_error(c, SG_ERR_DTYPE, "condition '%s' has data type %d; Where takes BOOL (9)",
                             v[0]->name, v[0]->elem);
  if ((v[1]->elem == OX_FLOAT) != (v[2]->elem == OX_FLOAT))
    return sg__ox_node_error(c, SG_ERR_DTYPE, "X '%s' and Y '%s' differ in type", v[1]->name, v[2]->name);
  int r = 0;
  for (int k = 0; k < 3; k++) r = v[k]->ndim > r ? v[k]->ndim : r;
  int64_t dims[SG_MAX_DIMS], st[3][SG_MAX_DIMS], idx[SG_MAX_DIMS] = {0};
  for (int a = 0; a < r; a++) {
    dims[a] = 1;
    for (int k = 0; k < 3; k++) {
      int ia = a - (r - v[k]->ndim);
      int64_t d = ia >= 0 ? v[k]->dims[ia] : 1;
      if (d != 1 && dims[a] != 1 && d != dims[a]) {
        char b1[256], b2[256];
        return sg__ox_node_error(c, SG_ERR_SHAPE, "cannot broadcast '%s' %s with %s", v[k]->name,
                                 sg__onnx_dims_text(b1, sizeof b1, v[k]->ndim, v[k]->dims),
                                 sg__onnx_dims_text(b2, sizeof b2, a, dims));
      }
      if (d != 1) dims[a] = d;
    }
  }
  for (int k = 0; k < 3; k++) { /* element strides; 0 along a broadcast dim */
    int64_t s = 1;
    for (int a = r - 1; a >= 0; a--) {
      int ia = a - (r - v[k]->ndim);
      int64_t d = ia >= 0 ? v[k]->dims[ia] : 1;
      st[k][a] = d == 1 ? 0 : s;
      s *= d;
    }
  }
  int64_t numel = sg__ox_fold_numel(r, dims);
  bool fl = v[1]->elem == OX_FLOAT;
  void *out;
  SG_CHECK(sg__ox_fold_alloc(c, numel, fl ? 4 : 8, &out));
  for (int64_t i = 0; i < numel; i++) {
    int64_t off[3] = {0, 0, 0};
    for (int a = 0; a < r; a++)
      for (int k = 0; k < 3; k++) off[k] += idx[a] * st[k][a];
    const ox_value *src = sg__ox_i64(v[0], off[0]) ? v[1] : v[2];
    int64_t o = src == v[1] ? off[1] : off[2];
    if (fl) ((float *)out)[i] = sg__ox_f32(src, o);
    else ((int64_t *)out)[i] = sg__ox_i64(src, o);
    for (int a = r - 1; a >= 0 && ++idx[a] == dims[a]; a--) idx[a] = 0;
  }
  return sg__ox_set_const(c, 0, v[1]->elem, r, dims, out);
}

static sg_status cv_where(ox_ctx *c, const Onnx__NodeProto *n) {
  SG_CHECK(sg__ox_check_attrs(c, no_attrs));
  const ox_value *v[3] = {sg__ox_input(c, n, 0), sg__ox_input(c, n, 1), sg__ox_input(c, n, 2)};
  if (v[0] && v[1] && v[2] && sg__ox_foldable(v[0]) && sg__ox_foldable(v[1]) && sg__ox_foldable(v[2]))
    return fold_where(c, v);
  sg_tensor cond, a, b;
  SG_CHECK(in_tensor(c, 0, "condition", &cond));
  SG_CHECK(in_tensor(c, 1, "X", &a));
  SG_CHECK(in_tensor(c, 2, "Y", &b));
  return out0(c, sg_where(c->g, cond, a, b));
}

/* ---- Gelu (opset 20) -------------------------------------------------------- */

static sg_status cv_gelu(ox_ctx *c, const Onnx__NodeProto *n) {
  (void)n;
  static const char *const known[] = {"approximate", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  if (c->opset < 20)
    return sg__ox_node_error(c, SG_ERR_UNSUPPORTED, "Gelu is an op of opset 20; the model imports opset %lld",
                             (long long)c->opset);
  char mode[16];
  SG_CHECK(sg__ox_attr_string(c, "approximate", "none", mode, sizeof mode));
  int tanh_form = strcmp(mode, "tanh") == 0;
  if (!tanh_form && strcmp(mode, "none") != 0)
    return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "approximate is '%s'; must be 'none' or 'tanh'", mode);
  sg_tensor x;
  SG_CHECK(in_tensor(c, 0, "X", &x));
  return out0(c, sg_gelu(c->g, x, tanh_form));
}

/* ---- LayerNormalization (opset 17) ------------------------------------------ */

static sg_status cv_layer_norm(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known[] = {"axis", "epsilon", "stash_type", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  if (c->opset < 17)
    return sg__ox_node_error(c, SG_ERR_UNSUPPORTED,
                             "LayerNormalization is an op of opset 17; the model imports opset %lld",
                             (long long)c->opset);
  int64_t axis = -1, stash = 1;
  double eps = 1e-5;
  SG_CHECK(sg__ox_attr_int(c, "axis", -1, &axis));
  SG_CHECK(sg__ox_attr_float(c, "epsilon", 1e-5, &eps));
  SG_CHECK(sg__ox_attr_int(c, "stash_type", 1, &stash));
  /* The statistics are computed in double precision and kept as float32. */
  if (stash != OX_FLOAT)
    return sg__ox_node_error(c, SG_ERR_UNSUPPORTED, "stash_type %lld (only 1, FLOAT)", (long long)stash);
  sg_tensor in[3] = {SG_NO_TENSOR, SG_NO_TENSOR, SG_NO_TENSOR};
  SG_CHECK(in_tensor(c, 0, "X", &in[0]));
  SG_CHECK(in_tensor(c, 1, "Scale", &in[1]));
  if (sg__ox_input(c, n, 2)) SG_CHECK(in_tensor(c, 2, "B", &in[2]));
  int rank = c->g->tensors[in[0].id].ndim, ax;
  SG_CHECK(sg__ox_axis(c, axis, rank, "axis", &ax));
  sg_attr attrs[] = {SG__AI("axis", ax), SG__AF("epsilon", sg__ox_snap_float(eps))};
  sg_tensor outs[3];
  if (sg_graph_add_op(c->g, SG_OP_LAYER_NORM, 3, in, 2, attrs, 3, outs, NULL) != SG_OK)
    return sg__ox_built(c, SG_NO_TENSOR);
  SG_CHECK(sg__ox_set_tensor(c, 0, outs[0]));
  /* Mean and InvStdDev: the op's saved statistics, named after Y when the
   * model does not use them. */
  const char *y = sg__ox_has_output(c, 0) ? n->output[0] : "layer_norm";
  static const char *const suffix[] = {"mean", "invstd"};
  for (int k = 1; k < 3; k++) {
    if (sg__ox_has_output(c, k)) {
      SG_CHECK(sg__ox_set_tensor(c, k, outs[k]));
    } else {
      char buf[SG__MAX_NAME];
      snprintf(buf, sizeof buf, "%.4000s.%s", y, suffix[k - 1]);
      SG_CHECK(sg__ox_want_name(c, outs[k].id, buf, 1));
    }
  }
  return SG_OK;
}

/* ---- CumSum (opset 11) --------------------------------------------------------- */

/* CumSum of an import-time constant, folded: floats summed in double and
 * rounded per element (as the cumsum kernel does), integers wrapping
 * around in their width (INT32 data is held widened to int64 here). */
static sg_status fold_cumsum(ox_ctx *c, const ox_value *x, int axis, bool exclusive, bool reverse) {
  bool fl = x->elem == OX_FLOAT;
  void *out;
  SG_CHECK(sg__ox_fold_alloc(c, x->numel, fl ? 4 : 8, &out));
  int64_t L = x->dims[axis], inner = 1;
  for (int a = axis + 1; a < x->ndim; a++) inner *= x->dims[a];
  for (int64_t o = 0; o < x->numel / (L * inner); o++)
    for (int64_t in = 0; in < inner; in++) {
      double facc = 0;
      uint64_t iacc = 0; /* unsigned: wraps around without undefined behaviour */
      for (int64_t s = 0; s < L; s++) {
        int64_t i = o * L * inner + (reverse ? L - 1 - s : s) * inner + in;
        double fv = fl ? sg__ox_f32(x, i) : 0;
        uint64_t iv = fl ? 0 : (uint64_t)sg__ox_i64(x, i);
        if (!exclusive) facc += fv, iacc += iv;
        if (fl) ((float *)out)[i] = (float)facc;
        else ((int64_t *)out)[i] = x->elem == OX_INT32 ? (int64_t)(int32_t)(uint32_t)iacc : (int64_t)iacc;
        if (exclusive) facc += fv, iacc += iv;
      }
    }
  return sg__ox_set_const(c, 0, x->elem, x->ndim, x->dims, out);
}

/* CumSum(x, axis): axis an import-time constant (0-D or one element); x a
 * constant (folded) or a run-time tensor, such as RoBERTa's padding mask
 * computed from the input ids: the cumsum op. */
static sg_status cv_cumsum(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known[] = {"exclusive", "reverse", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  int64_t exclusive = 0, reverse = 0, axis_v[1];
  SG_CHECK(sg__ox_attr_int(c, "exclusive", 0, &exclusive));
  SG_CHECK(sg__ox_attr_int(c, "reverse", 0, &reverse));
  if ((exclusive != 0 && exclusive != 1) || (reverse != 0 && reverse != 1))
    return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "exclusive %lld and reverse %lld must each be 0 or 1",
                             (long long)exclusive, (long long)reverse);
  ox_value *xv = sg__ox_input(c, n, 0), *av = sg__ox_input(c, n, 1);
  if (xv == NULL || av == NULL) return sg__ox_node_error(c, SG_ERR_ARITY, "input x or axis is missing");
  int na = 0, rank, axis;
  SG_CHECK(sg__ox_const_ints(c, av, "axis", 1, axis_v, &na));
  if (na != 1) return sg__ox_node_error(c, SG_ERR_SHAPE, "axis '%s' must hold one value", av->name);
  int64_t dims[SG_MAX_DIMS];
  SG_CHECK(sg__ox_shape(c, xv, &rank, dims));
  if (rank == 0)
    return sg__ox_node_error(c, SG_ERR_SHAPE, "x '%s' is a scalar; CumSum needs rank >= 1", xv->name);
  SG_CHECK(sg__ox_axis(c, axis_v[0], rank, "axis", &axis));
  if (sg__ox_foldable(xv)) {
    if (xv->elem != OX_FLOAT && xv->elem != OX_INT32 && xv->elem != OX_INT64)
      return sg__ox_node_error(c, SG_ERR_DTYPE, "x '%s' has data type %d; CumSum takes FLOAT, INT32, INT64",
                               xv->name, xv->elem);
    return fold_cumsum(c, xv, axis, exclusive, reverse);
  }
  sg_tensor x;
  SG_CHECK(in_tensor(c, 0, "x", &x));
  return out0(c, sg_cumsum(c->g, x, axis, (int)exclusive, (int)reverse));
}

/* ---- ReduceMax, ReduceMin ------------------------------------------------------ */

/* Of an import-time constant, folded: max and min as the kernel computes them (every output element
 * starts at its group's first element and takes a larger (smaller) one or a NaN, so NaN propagates);
 * sum and mean of floats in double, rounded once to float32, of integers exactly (a mean of integers
 * truncates, as NumPy's astype would not: refused). INT32 data is held widened to int64 here. */
static sg_status fold_reduce(ox_ctx *c, const ox_value *x, const bool *reduced, char kind, int ndim,
                             const int64_t *dims) {
  bool fl = x->elem == OX_FLOAT, extreme = kind == 'M' || kind == 'm';
  int64_t out_n = 1, ostride[SG_MAX_DIMS], s = 1, group = 1;
  for (int i = 0; i < ndim; i++) out_n *= dims[i];
  for (int a = x->ndim - 1; a >= 0; a--) {
    ostride[a] = reduced[a] ? 0 : s;
    s *= reduced[a] ? 1 : x->dims[a];
    group *= reduced[a] ? x->dims[a] : 1;
  }
  if (kind == 'a' && !fl)
    return sg__ox_node_error(c, SG_ERR_DTYPE, "data '%s' holds integers; sgrt folds ReduceMean of floats",
                             x->name);
  void *out;
  bool *seen;
  double *acc = NULL;
  SG_CHECK(sg__ox_fold_alloc(c, out_n, fl ? 4 : 8, &out));
  SG_CHECK(sg__ox_fold_alloc(c, out_n, 1, (void **)&seen));
  if (fl && !extreme) SG_CHECK(sg__ox_fold_alloc(c, out_n, sizeof(double), (void **)&acc));
  memset(seen, 0, (size_t)out_n);
  for (int64_t i = 0; i < x->numel; i++) {
    int64_t o = 0, rest = i;
    for (int a = x->ndim - 1; a >= 0; a--) {
      o += rest % x->dims[a] * ostride[a];
      rest /= x->dims[a];
    }
    if (fl && extreme) {
      float v = sg__ox_f32(x, i), *y = &((float *)out)[o];
      if (!seen[o] || isnan(v) || (kind == 'm' ? v < *y : v > *y)) *y = v;
    } else if (fl) {
      acc[o] = (seen[o] ? acc[o] : 0.0) + sg__ox_f32(x, i);
    } else {
      int64_t v = sg__ox_i64(x, i), *y = &((int64_t *)out)[o];
      if (!extreme && seen[o] && __builtin_add_overflow(*y, v, y))
        return sg__ox_node_error(c, SG_ERR_RANGE, "the sum of '%s' overflows int64", x->name);
      if (!extreme && !seen[o]) *y = v;
      if (extreme && (!seen[o] || (kind == 'm' ? v < *y : v > *y))) *y = v;
    }
    seen[o] = true;
  }
  for (int64_t o = 0; acc != NULL && o < out_n; o++)
    ((float *)out)[o] = (float)(kind == 'a' ? acc[o] / (double)group : acc[o]);
  return sg__ox_set_const(c, 0, x->elem, ndim, dims, out);
}

sg_status sg__ox_fold_reduce(ox_ctx *c, const ox_value *xv, const int64_t *axes, int na, int64_t keepdims,
                             char kind, const char *op) {
  if (xv->elem != OX_FLOAT && xv->elem != OX_INT32 && xv->elem != OX_INT64)
    return sg__ox_node_error(c, SG_ERR_DTYPE, "data '%s' has data type %d; %s takes FLOAT, INT32, INT64",
                             xv->name, xv->elem, op);
  bool reduced[SG_MAX_DIMS] = {false};
  int64_t dims[SG_MAX_DIMS];
  int nd = 0;
  for (int i = 0; i < na; i++) {
    int a;
    SG_CHECK(sg__ox_axis(c, axes[i], xv->ndim, "axes", &a));
    if (reduced[a]) return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "axis %d is listed twice", a);
    reduced[a] = true;
  }
  for (int a = 0; a < xv->ndim; a++) {
    reduced[a] |= na == 0;
    if (reduced[a] && xv->dims[a] == 0)
      return sg__ox_node_error(c, SG_ERR_SHAPE, "data '%s' has no element along reduced axis %d", xv->name,
                               a);
    if (!reduced[a] || keepdims) dims[nd++] = reduced[a] ? 1 : xv->dims[a];
  }
  return fold_reduce(c, xv, reduced, kind, nd, dims);
}

/* ReduceMax / ReduceMin(data[, axes]): axes an attribute before opset 18,
 * an optional import-time constant input from 18; keepdims (default 1);
 * noop_with_empty_axes (18) leaves x as it is when no axes are given. */
static sg_status reduce_max(ox_ctx *c, const Onnx__NodeProto *n, bool min) {
  int64_t axes[SG_MAX_DIMS], keepdims;
  int na;
  bool noop;
  ox_value *xv;
  SG_CHECK(sg__ox_reduce_args(c, n, 18, axes, &na, &keepdims, &noop, &xv));
  if (noop) return sg__ox_set_alias(c, 0, xv);
  if (sg__ox_foldable(xv))
    return sg__ox_fold_reduce(c, xv, axes, na, keepdims, min ? 'm' : 'M', min ? "ReduceMin" : "ReduceMax");
  sg_tensor x;
  SG_CHECK(in_tensor(c, 0, "data", &x));
  return out0(c, (min ? sg_reduce_min : sg_reduce_max)(c->g, x, na, axes, (int)keepdims));
}

static sg_status cv_reduce_max(ox_ctx *c, const Onnx__NodeProto *n) { return reduce_max(c, n, false); }
static sg_status cv_reduce_min(ox_ctx *c, const Onnx__NodeProto *n) { return reduce_max(c, n, true); }

const ox_op sg__ox_math_ops[] = {
    {"Exp", cv_exp, 1, 1, 1, 1},
    {"Log", cv_log, 1, 1, 1, 1},
    {"Sqrt", cv_sqrt, 1, 1, 1, 1},
    {"Reciprocal", cv_reciprocal, 1, 1, 1, 1},
    {"Neg", cv_neg, 1, 1, 1, 1},
    {"Abs", cv_abs, 1, 1, 1, 1},
    {"Sign", cv_sign, 1, 1, 1, 1},
    {"Erf", cv_erf, 1, 1, 1, 1},
    {"Sin", cv_sin, 1, 1, 1, 1},
    {"Cos", cv_cos, 1, 1, 1, 1},
    {"Acos", cv_acos, 1, 1, 1, 1},
    {"Ceil", cv_ceil, 1, 1, 1, 1},
    {"Floor", cv_floor, 1, 1, 1, 1},
    {"Round", cv_round, 1, 1, 1, 1},
    {"Pow", cv_pow, 2, 2, 1, 1},
    {"Max", cv_max, 1, SG__MAX_OP_IO, 1, 1},
    {"Mod", cv_mod, 2, 2, 1, 1},
    {"Min", cv_min, 1, SG__MAX_OP_IO, 1, 1},
    {"Where", cv_where, 3, 3, 1, 1},
    {"Gelu", cv_gelu, 1, 1, 1, 1},
    {"LayerNormalization", cv_layer_norm, 2, 3, 1, 3},
    {"CumSum", cv_cumsum, 2, 2, 1, 1},
    {"ReduceMax", cv_reduce_max, 1, 2, 1, 1},
    {"ReduceMin", cv_reduce_min, 1, 2, 1, 1},
};
const int sg__ox_n_math_ops = (int)(sizeof sg__ox_math_ops / sizeof *sg__ox_math_ops);
