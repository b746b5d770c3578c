/* Constants, and the shape computations exporters emit around Reshape and
 * Flatten (Shape -> Gather -> Unsqueeze -> Concat, Slice, Cast, ...). Every
 * shape is static in sgrt, so these are computed at import time and never
 * become ops. Ops that also have a run-time form here (Concat, Reshape,
 * Squeeze, Unsqueeze, Cast, Identity) build sgrt ops when an input is not
 * an import-time constant. Gather is onnx_gather.c's, Slice and Split
 * onnx_slice.c's. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* ---- helpers shared with onnx_nodes.c ------------------------------------ */

bool sg__ox_foldable(const ox_value *v) {
  return v && v->kind == OX_V_CONST && !(v->elem == OX_FLOAT && v->role != SG_ROLE_CONSTANT);
}

sg_status sg__ox_built(ox_ctx *c, sg_tensor t) {
  if (t.id >= 0) return SG_OK;
  sg_status st = sg_graph_status(c->g);
  if (st == SG_OK) st = SG_ERR_INTERNAL;
  char buf[1024];
  return sg__ox_node_error(c, st, "%s", sg__ox_message(c, sg_last_error(), buf, sizeof buf));
}

sg_status sg__ox_unavailable(ox_ctx *c, const ox_value *v) {
  return sg__ox_node_error(c, SG_ERR_UNSUPPORTED, "uses '%s', which sgrt cannot provide: %s", v->name,
                           v->why);
}

sg_status sg__ox_shape(ox_ctx *c, const ox_value *v, int *ndim, int64_t *dims) {
  *ndim = 0;
  if (v->kind == OX_V_TENSOR) {
    const sg__tensor *t = &c->g->tensors[v->tensor];
    *ndim = t->ndim;
    memcpy(dims, t->dims, sizeof(int64_t) * (size_t)t->ndim);
    return SG_OK;
  }
  if (v->kind == OX_V_CONST) {
    *ndim = v->ndim;
    memcpy(dims, v->dims, sizeof(int64_t) * (size_t)v->ndim);
    return SG_OK;
  }
  return sg__ox_unavailable(c, v);
}

sg_status sg__ox_axis(ox_ctx *c, int64_t axis, int rank, const char *what, int *out) {
  *out = 0;
  if (axis < -rank || axis >= rank || rank == 0)
    return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "%s %lld is out of range for rank %d", what,
                             (long long)axis, rank);
  *out = (int)(axis < 0 ? axis + rank : axis);
  return SG_OK;
}

sg_status sg__ox_const_ints(ox_ctx *c, const ox_value *v, const char *what, int cap, int64_t *vals, int *n) {
  *n = 0;
  if (v->kind == OX_V_UNAVAILABLE) return sg__ox_unavailable(c, v);
  if (v->kind != OX_V_CONST)
    return sg__ox_node_error(c, SG_ERR_UNSUPPORTED,
                             "%s '%s' is computed at run time; sgrt needs it to be a constant", what,
                             v->name);
  if (v->elem == OX_FLOAT)
    return sg__ox_node_error(c, SG_ERR_DTYPE, "%s '%s' holds floats; expected integers", what, v->name);
  if (v->ndim > 1)
    return sg__ox_node_error(c, SG_ERR_SHAPE, "%s '%s' has rank %d; expected a scalar or a 1-D tensor", what,
                             v->name, v->ndim);
  if (v->numel > cap)
    return sg__ox_node_error(c, SG_ERR_RANGE, "%s '%s' has %lld values; at most %d are supported", what,
                             v->name, (long long)v->numel, cap);
  for (int64_t i = 0; i < v->numel; i++) vals[i] = sg__ox_i64(v, i);
  *n = (int)v->numel;
  return SG_OK;
}

sg_status sg__ox_const_scalar(ox_ctx *c, const ox_value *v, const char *what, double *out) {
  if (v->kind == OX_V_UNAVAILABLE) return sg__ox_unavailable(c, v);
  if (v->kind != OX_V_CONST)
    return sg__ox_node_error(c, SG_ERR_UNSUPPORTED,
                             "%s '%s' is computed at run time; sgrt needs it to be a constant", what,
                             v->name);
  if (v->numel != 1)
    return sg__ox_node_error(c, SG_ERR_SHAPE, "%s '%s' has %lld elements; expected one", what, v->name,
                             (long long)v->numel);
  *out = sg__ox_num(v, 0);
  return SG_OK;
}

sg_status sg__ox_bool_in(ox_ctx *c, sg_tensor *t, bool *was_bool) {
  *was_bool = c->g->tensors[t->id].dtype == SG_BOOL;
  if (!*was_bool) return SG_OK;
  *t = sg_cast(c->g, *t, SG_F32);
  return sg__ox_built(c, *t);
}

sg_status sg__ox_bool_out(ox_ctx *c, sg_tensor *t, bool was_bool) {
  SG_CHECK(sg__ox_built(c, *t));
  if (!was_bool) return SG_OK;
  *t = sg_cast(c->g, *t, SG_BOOL);
  return sg__ox_built(c, *t);
}

sg_status sg__ox_reshape(ox_ctx *c, ox_value *v, int ndim, const int64_t *dims, sg_tensor *out) {
  sg_tensor x;
  bool was_bool;
  SG_CHECK(sg__ox_tensor(c, v, &x));
  SG_CHECK(sg__ox_bool_in(c, &x, &was_bool));
  *out = sg_reshape(c->g, x, ndim, dims);
  return sg__ox_bool_out(c, out, was_bool);
}

void sg__ox_strides(int ndim, const int64_t *dims, int64_t *st) {
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    st[i] = s;
    s *= dims[i];
  }
}

/* ---- Constant, ConstantOfShape, Shape ------------------------------------ */

/* A DOUBLE Constant, which training exports of PyTorch write for Python
 * floats (torch.clamp(x, min=1e-9) is Constant DOUBLE -> Cast FLOAT -> Clip),
 * is read as the float32 constant that Cast to FLOAT gives (each value
 * rounded to nearest). Rounding must not change what a Cast to an integer or
 * to bool would give (the truncated value, zero or not): a value for which
 * it does is SG_ERR_UNSUPPORTED. */
static sg_status double_constant(ox_ctx *c, const Onnx__TensorProto *t) {
  const char *name = sg__ox_str(t->name);
  if (t->n_dims > SG_MAX_DIMS)
    return sg__ox_node_error(c, SG_ERR_RANGE, "Constant value '%s' has rank %zu; at most %d", name, t->n_dims,
                             SG_MAX_DIMS);
  int64_t dims[SG_MAX_DIMS];
  for (size_t i = 0; i < t->n_dims; i++) {
    if (t->dims[i] < 0)
      return sg__ox_node_error(c, SG_ERR_FORMAT, "Constant value '%s': dim %zu is %lld", name, i,
                               (long long)t->dims[i]);
    dims[i] = t->dims[i];
  }
  int64_t numel = sg__ox_fold_numel((int)t->n_dims, dims);
  size_t others = t->n_float_data + t->n_int32_data + t->n_int64_data + t->n_uint64_data + t->n_string_data;
  bool raw = t->has_raw_data;
  if (others || (raw && t->n_double_data) || t->segment || t->n_external_data)
    return sg__ox_node_error(c, SG_ERR_FORMAT,
                             "Constant value '%s' (DOUBLE) holds its data other than in "
                             "raw_data or double_data",
                             name);
  uint64_t have = raw ? t->raw_data.len / 8 : t->n_double_data;
  if ((raw && t->raw_data.len % 8 != 0) || (numel <= OX_FOLD_MAX_NUMEL && have != (uint64_t)numel))
    return sg__ox_node_error(c, SG_ERR_FORMAT, "Constant value '%s' (DOUBLE, %lld elements) has %llu values",
                             name, (long long)numel, (unsigned long long)have);
  float *out;
  SG_CHECK(sg__ox_fold_alloc(c, numel, 4, (void **)&out));
  for (int64_t i = 0; i < numel; i++) {
    double d;
    if (raw) memcpy(&d, t->raw_data.data + 8 * i, 8);
    else d = t->double_data[i];
    float f = (float)d;
    if (isfinite(d) && ((f == 0) != (d == 0) || trunc((double)f) != trunc(d)))
      return sg__ox_node_error(c, SG_ERR_UNSUPPORTED,
                               "Constant value '%s' (DOUBLE) holds %.17g, which float32 does not keep well "
                               "enough (%.9g); sgrt reads DOUBLE constants as float32",
                               name, d, (double)f);
    out[i] = f;
  }
  return sg__ox_set_const(c, 0, OX_FLOAT, (int)t->n_dims, dims, out);
}

static sg_status cv_constant(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known[] = {"value",        "value_float",   "value_floats",
                                      "value_int",    "value_ints",    "sparse_value",
                                      "value_string", "value_strings", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  if (n->n_attribute != 1)
    return sg__ox_node_error(c, SG_ERR_FORMAT, "needs exactly one value attribute, has %zu", n->n_attribute);
  const char *an = n->attribute[0]->name;
  static const struct {
    const char *name;
    int type;
  } types[] = {
      {"value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR},
      {"value_float", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT},
      {"value_floats", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS},
      {"value_int", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT},
      {"value_ints", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS},
      {"sparse_value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR},
      {"value_string", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING},
      {"value_strings", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS},
  };
  const Onnx__AttributeProto *a = NULL;
  for (size_t k = 0; k < sizeof types / sizeof *types; k++)
    if (strcmp(an, types[k].name) == 0) SG_CHECK(sg__ox_attr_typed(c, an, types[k].type, &a));
  if (a == NULL) return sg__ox_node_error(c, SG_ERR_INTERNAL, "attribute '%s' was not found", an);
  if (strcmp(an, "value") == 0) {
    if (a->t == NULL) return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "attribute 'value' holds no tensor");
    if (a->t->has_data_type && a->t->data_type == OX_DOUBLE) return double_constant(c, a->t);
    ox_value v = {0};
    sg_status st = sg__ox_decode_tensor(c, a->t, "Constant value", &v);
    if (st != SG_OK) return sg__ox_node_error(c, st, "%s", sg_last_error());
    return sg__ox_set_const(c, 0, v.elem, v.ndim, v.dims, v.data);
  }
  if (strcmp(an, "value_float") == 0 || strcmp(an, "value_floats") == 0) {
    bool one = strcmp(an, "value_float") == 0;
    int64_t count = one ? 1 : (int64_t)a->n_floats;
    if (one && !a->has_f)
      return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "attribute 'value_float' has no value");
    void *data;
    SG_CHECK(sg__ox_fold_alloc(c, count, 4, &data));
    if (one) memcpy(data, &a->f, 4);
    else if (count) memcpy(data, a->floats, 4 * (size_t)count);
    return sg__ox_set_const(c, 0, OX_FLOAT, one ? 0 : 1, &count, data);
  }
  if (strcmp(an, "value_int") == 0 || strcmp(an, "value_ints") == 0) {
    bool one = strcmp(an, "value_int") == 0;
    int64_t count = one ? 1 : (int64_t)a->n_ints;
    if (one && !a->has_i) return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "attribute 'value_int' has no value");
    void *data;
    SG_CHECK(sg__ox_fold_alloc(c, count, 8, &data));
    if (one) memcpy(data, &a->i, 8);
    else if (count) memcpy(data, a->ints, 8 * (size_t)count);
    return sg__ox_set_const(c, 0, OX_INT64, one ? 0 : 1, &count, data);
  }
  return sg__ox_node_error(c, SG_ERR_UNSUPPORTED,
                           "attribute '%s' (sparse and string constants) is not supported", an);
}

static sg_status cv_constant_of_shape(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known[] = {"value", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  int64_t dims[SG_MAX_DIMS];
  int nd = 0;
  SG_CHECK(sg__ox_const_ints(c, sg__ox_input(c, n, 0), "shape", SG_MAX_DIMS, dims, &nd));
  int64_t numel = 1;
  for (int i = 0; i < nd; i++) {
    if (dims[i] < 0 || dims[i] > OX_FOLD_MAX_NUMEL)
      return sg__ox_node_error(c, SG_ERR_RANGE, "shape dim %d is %lld", i, (long long)dims[i]);
    numel *= dims[i];
    if (numel > OX_FOLD_MAX_NUMEL) break; /* sg__ox_fold_alloc reports it */
  }
  ox_value fill = {.elem = OX_FLOAT, .numel = 1};
  float zero = 0;
  fill.data = &zero;
  const Onnx__AttributeProto *a;
  SG_CHECK(sg__ox_attr_typed(c, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR, &a));
  if (a) {
    if (a->t == NULL) return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "attribute 'value' holds no tensor");
    sg_status st = sg__ox_decode_tensor(c, a->t, "ConstantOfShape value", &fill);
    if (st != SG_OK) return sg__ox_node_error(c, st, "%s", sg_last_error());
    if (fill.numel != 1)
      return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "attribute 'value' has %lld elements; expected one",
                               (long long)fill.numel);
  }
  void *data;
  size_t es = sg__ox_elem_size(fill.elem);
  SG_CHECK(sg__ox_fold_alloc(c, numel, es, &data));
  for (int64_t i = 0; i < numel; i++) memcpy((char *)data + (size_t)i * es, fill.data, es);
  return sg__ox_set_const(c, 0, fill.elem, nd, dims, data);
}

static sg_status cv_shape(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known[] = {"start", "end", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  int nd = 0;
  int64_t dims[SG_MAX_DIMS], start, end;
  SG_CHECK(sg__ox_shape(c, sg__ox_input(c, n, 0), &nd, dims));
  SG_CHECK(sg__ox_attr_int(c, "start", 0, &start));
  SG_CHECK(sg__ox_attr_int(c, "end", nd, &end));
  if (start < 0) start += nd;
  if (end < 0) end += nd;
  start = start < 0 ? 0 : start > nd ? nd : start;
  end = end < 0 ? 0 : end > nd ? nd : end;
  int64_t len = end > start ? end - start : 0;
  int64_t *data;
  SG_CHECK(sg__ox_fold_alloc(c, len, 8, (void **)&data));
  for (int64_t i = 0; i < len; i++) data[i] = dims[start + i];
  return sg__ox_set_const(c, 0, OX_INT64, 1, &len, data);
}

/* ---- import-time constants ---------------------------------------------------- */

sg_status sg__ox_need_foldable(ox_ctx *c, const ox_value *v, const char *what) {
  if (v->kind == OX_V_UNAVAILABLE) return sg__ox_unavailable(c, v);
  if (v->kind == OX_V_TENSOR)
    return sg__ox_node_error(c, SG_ERR_UNSUPPORTED,
                             "%s '%s' is computed at run time; sgrt folds this op only for constants", what,
                             v->name);
  if (!sg__ox_foldable(v))
    return sg__ox_node_error(c, SG_ERR_UNSUPPORTED,
                             "%s '%s' is a parameter; sgrt folds this op only for constants", what, v->name);
  return SG_OK;
}

/* ---- Unsqueeze, Squeeze, Reshape ----------------------------------------- */

/* Axes of Squeeze/Unsqueeze: an attribute before opset 13, an input after. */
static sg_status squeeze_axes(ox_ctx *c, const Onnx__NodeProto *n, int64_t *axes, int *na, bool *given) {
  static const char *const known_old[] = {"axes", NULL};
  static const char *const known_new[] = {NULL};
  SG_CHECK(sg__ox_check_attrs(c, c->opset < 13 ? known_old : known_new));
  *na = 0;
  if (c->opset < 13) {
    *given = sg__ox_attr(c, "axes") != NULL;
    return sg__ox_attr_ints(c, "axes", SG_MAX_DIMS, axes, na);
  }
  ox_value *v = sg__ox_input(c, n, 1);
  *given = v != NULL;
  return v ? sg__ox_const_ints(c, v, "axes", SG_MAX_DIMS, axes, na) : SG_OK;
}

/* Output k is value x with a new shape: metadata only for a constant, a
 * reshape op for a tensor or a parameter. */
static sg_status set_reshaped(ox_ctx *c, ox_value *x, int ndim, const int64_t *dims) {
  if (sg__ox_foldable(x)) return sg__ox_set_const(c, 0, x->elem, ndim, dims, x->data);
  sg_tensor t;
  SG_CHECK(sg__ox_reshape(c, x, ndim, dims, &t));
  return sg__ox_set_tensor(c, 0, t);
}

static sg_status cv_unsqueeze(ox_ctx *c, const Onnx__NodeProto *n) {
  int64_t axes[SG_MAX_DIMS], dims[SG_MAX_DIMS], in[SG_MAX_DIMS];
  int na = 0, nd = 0;
  bool given;
  SG_CHECK(squeeze_axes(c, n, axes, &na, &given));
  if (!given) return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "needs 'axes'");
  ox_value *x = sg__ox_input(c, n, 0);
  SG_CHECK(sg__ox_shape(c, x, &nd, in));
  int r = nd + na;
  if (r > SG_MAX_DIMS)
    return sg__ox_node_error(c, SG_ERR_RANGE, "the result would have rank %d; at most %d", r, SG_MAX_DIMS);
  bool added[SG_MAX_DIMS] = {false};
  for (int k = 0; k < na; k++) {
    int ax = 0;
    SG_CHECK(sg__ox_axis(c, axes[k], r, "axis", &ax));
    if (added[ax])
      return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "axis %lld is given twice", (long long)axes[k]);
    added[ax] = true;
  }
  for (int i = 0, j = 0; i < r; i++) dims[i] = added[i] ? 1 : in[j++];
  return set_reshaped(c, x, r, dims);
}

static sg_status cv_squeeze(ox_ctx *c, const Onnx__NodeProto *n) {
  int64_t axes[SG_MAX_DIMS], dims[SG_MAX_DIMS], in[SG_MAX_DIMS];
  int na = 0, nd = 0;
  bool given;
  SG_CHECK(squeeze_axes(c, n, axes, &na, &given));
  ox_value *x = sg__ox_input(c, n, 0);
  SG_CHECK(sg__ox_shape(c, x, &nd, in));
  bool drop[SG_MAX_DIMS] = {false};
  for (int k = 0; k < na; k++) {
    int ax = 0;
    SG_CHECK(sg__ox_axis(c, axes[k], nd, "axis", &ax));
    if (in[ax] != 1)
      return sg__ox_node_error(c, SG_ERR_SHAPE, "cannot squeeze axis %d of '%s': its size is %lld", ax,
                               x->name, (long long)in[ax]);
    drop[ax] = true;
  }
  if (na == 0)
    for (int i = 0; i < nd; i++) drop[i] = in[i] == 1;
  int r = 0;
  for (int i = 0; i < nd; i++)
    if (!drop[i]) dims[r++] = in[i];
  return set_reshaped(c, x, r, dims);
}

static sg_status cv_reshape(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known[] = {"allowzero", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  int64_t allowzero = 0, shape[SG_MAX_DIMS], in[SG_MAX_DIMS], dims[SG_MAX_DIMS];
  int ns = 0, nd = 0;
  SG_CHECK(sg__ox_attr_int(c, "allowzero", 0, &allowzero));
  ox_value *x = sg__ox_input(c, n, 0);
  SG_CHECK(sg__ox_shape(c, x, &nd, in));
  SG_CHECK(sg__ox_const_ints(c, sg__ox_input(c, n, 1), "shape", SG_MAX_DIMS, shape, &ns));
  int64_t known_numel = 1, numel = sg__ox_fold_numel(nd, in);
  int infer = -1;
  char b1[256], b2[256];
  for (int i = 0; i < ns; i++) {
    int64_t s = shape[i];
    if (s == 0 && allowzero)
      return sg__ox_node_error(c, SG_ERR_UNSUPPORTED, "allowzero=1 with a 0 in the shape (empty tensors)");
    if (s == 0) {
      if (i >= nd)
        return sg__ox_node_error(c, SG_ERR_SHAPE, "shape %s copies dim %d of %s, which has no such dim",
                                 sg__onnx_dims_text(b1, sizeof b1, ns, shape), i,
                                 sg__onnx_dims_text(b2, sizeof b2, nd, in));
      s = in[i];
    } else if (s == -1) {
      if (infer >= 0)
        return sg__ox_node_error(c, SG_ERR_SHAPE, "shape %s has more than one -1",
                                 sg__onnx_dims_text(b1, sizeof b1, ns, shape));
      infer = i;
      dims[i] = 1;
      continue;
    } else if (s < 0 || s > SG__MAX_NUMEL) {
      return sg__ox_node_error(c, SG_ERR_SHAPE, "shape %s has the invalid dim %lld",
                               sg__onnx_dims_text(b1, sizeof b1, ns, shape), (long long)s);
    }
    dims[i] = s;
    if (s > 0 && known_numel > SG__MAX_NUMEL / s)
      return sg__ox_node_error(c, SG_ERR_RANGE, "shape %s has more than 2^56 elements",
                               sg__onnx_dims_text(b1, sizeof b1, ns, shape));
    known_numel *= s;
  }
  if (infer >= 0) {
    if (known_numel == 0 || numel % known_numel != 0)
      return sg__ox_node_error(c, SG_ERR_SHAPE, "cannot reshape %s (%lld elements) to %s",
                               sg__onnx_dims_text(b2, sizeof b2, nd, in), (long long)numel,
                               sg__onnx_dims_text(b1, sizeof b1, ns, shape));
    dims[infer] = numel / known_numel;
  } else if (known_numel != numel) {
    return sg__ox_node_error(c, SG_ERR_SHAPE, "cannot reshape %s (%lld elements) to %s",
                             sg__onnx_dims_text(b2, sizeof b2, nd, in), (long long)numel,
                             sg__onnx_dims_text(b1, sizeof b1, ns, shape));
  }
  return set_reshaped(c, x, ns, dims);
}

/* ---- Concat, Cast, Identity ---------------------------------------------- */

static sg_status cv_concat(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known[] = {"axis", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  if (sg__ox_attr(c, "axis") == NULL) return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "needs attribute 'axis'");
  int64_t axis_attr = 0;
  SG_CHECK(sg__ox_attr_int(c, "axis", 0, &axis_attr));
  if (axis_attr < -SG_MAX_DIMS || axis_attr >= SG_MAX_DIMS)
    return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "axis %lld is out of range", (long long)axis_attr);
  int k = 0;
  bool fold = true;
  ox_value *ins[SG__MAX_OP_IO];
  for (int i = 0; i < (int)n->n_input; i++) {
    ox_value *v = sg__ox_input(c, n, i);
    if (v == NULL) return sg__ox_node_error(c, SG_ERR_ARITY, "input %d is empty", i);
    if (v->kind == OX_V_UNAVAILABLE && v->empty) continue; /* adds nothing along the axis */
    if (v->kind == OX_V_UNAVAILABLE) return sg__ox_unavailable(c, v);
    ins[k++] = v;
  }
  if (k == 0) return sg__ox_unavailable(c, sg__ox_input(c, n, 0)); /* every input empty */
  int rank0;
  int64_t dims0[SG_MAX_DIMS];
  SG_CHECK(sg__ox_shape(c, ins[0], &rank0, dims0));
  for (int i = 0; i < (int)n->n_input; i++) { /* an empty input must still have the others' rank */
    const ox_value *v = sg__ox_input(c, n, i);
    if (v->kind == OX_V_UNAVAILABLE && v->empty && v->ndim != rank0)
      return sg__ox_node_error(c, SG_ERR_SHAPE, "input %d '%s' (empty) has rank %d; the others have %d", i,
                               v->name, v->ndim, rank0);
  }
  if (k == 1 && (int)n->n_input > 1) return sg__ox_set_alias(c, 0, ins[0]);
  for (int i = 0; i < k; i++) fold = fold && sg__ox_foldable(ins[i]) && ins[i]->elem == ins[0]->elem;
  if (!fold) {
    sg_tensor xs[SG__MAX_OP_IO];
    bool was_bool = false;
    for (int i = 0; i < k; i++) {
      bool b;
      SG_CHECK(sg__ox_tensor(c, ins[i], &xs[i]));
      SG_CHECK(sg__ox_bool_in(c, &xs[i], &b));
      was_bool = was_bool || b;
    }
    sg_tensor t = sg_concat(c->g, k, xs, (int)axis_attr);
    SG_CHECK(sg__ox_bool_out(c, &t, was_bool));
    return sg__ox_set_tensor(c, 0, t);
  }
  const ox_value *x0 = ins[0];
  int r = x0->ndim, axis = 0;
  SG_CHECK(sg__ox_axis(c, axis_attr, r, "axis", &axis));
  int64_t dims[SG_MAX_DIMS];
  memcpy(dims, x0->dims, sizeof(int64_t) * (size_t)r);
  dims[axis] = 0;
  for (int i = 0; i < k; i++) {
    const ox_value *v = ins[i];
    bool ok = v->ndim == r;
    for (int d = 0; ok && d < r; d++) ok = d == axis || v->dims[d] == x0->dims[d];
    if (!ok) {
      char b1[256], b2[256];
      return sg__ox_node_error(c, SG_ERR_SHAPE, "cannot concatenate %s and %s along axis %d",
                               sg__onnx_dims_text(b1, sizeof b1, x0->ndim, x0->dims),
                               sg__onnx_dims_text(b2, sizeof b2, v->ndim, v->dims), axis);
    }
    dims[axis] += v->dims[axis];
  }
  size_t es = sg__ox_elem_size(x0->elem);
  int64_t outer = sg__ox_fold_numel(axis, dims), inner = sg__ox_fold_numel(r - axis - 1, dims + axis + 1);
  char *out;
  SG_CHECK(sg__ox_fold_alloc(c, sg__ox_fold_numel(r, dims), es, (void **)&out));
  char *p = out;
  for (int64_t o = 0; o < outer; o++) {
    for (int i = 0; i < k; i++) {
      const ox_value *v = ins[i];
      size_t chunk = (size_t)(v->dims[axis] * inner) * es;
      memcpy(p, (const char *)v->data + (size_t)o * chunk, chunk);
      p += chunk;
    }
  }
  return sg__ox_set_const(c, 0, x0->elem, r, dims, out);
}

/* Output 0 is x as ONNX element type `to` (Cast, CastLike). */
static sg_status cast_to(ox_ctx *c, ox_value *x, int64_t to, const char *what) {
  if (to != OX_FLOAT && to != OX_INT64 && to != OX_INT32 && to != OX_BOOL)
    return sg__ox_node_error(c, SG_ERR_UNSUPPORTED, "cast to %s %lld (only FLOAT, INT32, INT64, BOOL)", what,
                             (long long)to);
  if (x->kind == OX_V_UNAVAILABLE) return sg__ox_unavailable(c, x);
  if (sg__ox_elem_of(c, x) == to) return sg__ox_set_alias(c, 0, x);
  if (!sg__ox_foldable(x)) {
    /* A tensor computed at run time (or a parameter): the cast op. */
    sg_tensor t;
    SG_CHECK(sg__ox_tensor(c, x, &t));
    sg_dtype dt = to == OX_FLOAT ? SG_F32 : to == OX_INT64 ? SG_I64 : to == OX_INT32 ? SG_I32 : SG_BOOL;
    sg_tensor y = sg_cast(c->g, t, dt);
    SG_CHECK(sg__ox_built(c, y));
    return sg__ox_set_tensor(c, 0, y);
  }
  void *out;
  SG_CHECK(sg__ox_fold_alloc(c, x->numel, sg__ox_elem_size((int)to), &out));
  for (int64_t i = 0; i < x->numel; i++) {
    if (to == OX_FLOAT) {
      ((float *)out)[i] = (float)sg__ox_num(x, i);
      continue;
    }
    int64_t v;
    if (x->elem == OX_FLOAT) {
      double d = sg__ox_f32(x, i);
      /* As the cast op: truncated; NaN and values out of the type's range
       * give 0 (torch.log(0) cast to long in T5's position buckets, a value
       * that a Where then discards). */
      double lim = to == OX_INT32 ? 2147483648.0 : 9223372036854775808.0;
      if (to == OX_BOOL) v = d != 0;
      else v = d >= -lim && d < lim ? (int64_t)d : 0;
    } else {
      v = sg__ox_i64(x, i);
      if (to == OX_BOOL) v = v != 0;
    }
    if (to == OX_INT32)
      v = (int32_t)(uint32_t)(uint64_t)v; /* wraps, as a C cast does on every ABI we build for */
    ((int64_t *)out)[i] = v;
  }
  return sg__ox_set_const(c, 0, (int)to, x->ndim, x->dims, out);
}

static sg_status cv_cast(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known[] = {"to", "saturate", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  if (sg__ox_attr(c, "to") == NULL) return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "needs attribute 'to'");
  int64_t to = 0;
  SG_CHECK(sg__ox_attr_int(c, "to", 0, &to));
  return cast_to(c, sg__ox_input(c, n, 0), to, "data type");
}

/* CastLike (opset 15; the dynamo exporter's unoptimised graphs write it to
 * give a Python scalar the type of a tensor): Cast to input 1's type. Its
 * `saturate` concerns float8 only, as Cast's. */
static sg_status cv_cast_like(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known[] = {"saturate", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  ox_value *like = sg__ox_input(c, n, 1);
  if (like->kind == OX_V_UNAVAILABLE) return sg__ox_unavailable(c, like);
  return cast_to(c, sg__ox_input(c, n, 0), sg__ox_elem_of(c, like), "the type of input 1");
}

static sg_status cv_identity(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known[] = {NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  return sg__ox_set_alias(c, 0, sg__ox_input(c, n, 0));
}

/* ---- arithmetic on constants --------------------------------------------- */

static sg_status int_op(ox_ctx *c, char op, int64_t x, int64_t y, int64_t *r) {
  bool bad;
  switch (op) {
    case 'm': *r = x < y ? x : y; return SG_OK;
    case 'M': *r = x > y ? x : y; return SG_OK;
    case '+': bad = __builtin_add_overflow(x, y, r); break;
    case '-': bad = __builtin_sub_overflow(x, y, r); break;
    case '*': bad = __builtin_mul_overflow(x, y, r); break;
    case '&': *r = x != 0 && y != 0; return SG_OK; /* And, Or, Xor of bools */
    case '|': *r = x != 0 || y != 0; return SG_OK;
    case '^': *r = (x != 0) != (y != 0); return SG_OK;
    case 'p': /* Pow of integers: exact; a negative exponent is refused, as NumPy refuses it */
      if (y < 0)
        return sg__ox_node_error(c, SG_ERR_RANGE, "%lld to the power %lld: a negative integer exponent",
                                 (long long)x, (long long)y);
      bad = false;
      *r = 1;
      if (x == 0 || x == 1) *r = x == 1 || y == 0 ? 1 : 0;
      else if (x == -1) *r = y % 2 ? -1 : 1;
      else /* |x| >= 2 overflows within 63 factors */
        for (int64_t k = 0; k < y && !bad; k++) bad = __builtin_mul_overflow(*r, x, r);
      break;
    case '%': /* Mod: the sign of the divisor, as Python's % */
    case 'f': /* Mod with fmod = 1: the sign of the dividend, as C's % */
      bad = y == 0;
      if (!bad) *r = y == -1 ? 0 : x % y; /* INT64_MIN % -1 overflows in C */
      if (!bad && op == '%' && *r != 0 && (*r < 0) != (y < 0)) *r += y;
      break;
    default:
      bad = y == 0 || (x == INT64_MIN && y == -1);
      if (!bad) *r = x / y;
  }
  if (bad)
    return sg__ox_node_error(c, SG_ERR_RANGE, "%lld %c %lld overflows or divides by zero", (long long)x, op,
                             (long long)y);
  return SG_OK;
}

sg_status sg__ox_fold_binary(ox_ctx *c, char op, const ox_value *a, const ox_value *b, bool *folded) {
  *folded = false;
  /* One type, except Pow's float base with an integer exponent (the result is the base's type). */
  if (!sg__ox_foldable(a) || !sg__ox_foldable(b) ||
      ((a->elem == OX_FLOAT) != (b->elem == OX_FLOAT) && !(op == 'p' && a->elem == OX_FLOAT)))
    return SG_OK;
  int r = a->ndim > b->ndim ? a->ndim : b->ndim;
  int64_t dims[SG_MAX_DIMS], sa[SG_MAX_DIMS], sb[SG_MAX_DIMS], ta[SG_MAX_DIMS], tb[SG_MAX_DIMS];
  sg__ox_strides(a->ndim, a->dims, ta);
  sg__ox_strides(b->ndim, b->dims, tb);
  for (int i = 0; i < r; i++) {
    int ia = i - (r - a->ndim), ib = i - (r - b->ndim);
    int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
    if (da != db && da != 1 && db != 1) {
      char b1[256], b2[256];
      return sg__ox_node_error(c, SG_ERR_SHAPE, "cannot broadcast %s and %s",
                               sg__onnx_dims_text(b1, sizeof b1, a->ndim, a->dims),
                               sg__onnx_dims_text(b2, sizeof b2, b->ndim, b->dims));
    }
    dims[i] = da == 1 ? db : da;
    sa[i] = ia >= 0 && da != 1 ? ta[ia] : 0;
    sb[i] = ib >= 0 && db != 1 ? tb[ib] : 0;
  }
  int64_t numel = sg__ox_fold_numel(r, dims), idx[SG_MAX_DIMS] = {0}, oa = 0, ob = 0;
  bool fl = a->elem == OX_FLOAT, eq = strchr("=<>lg", op) != NULL;
  void *out;
  SG_CHECK(sg__ox_fold_alloc(c, numel, fl && !eq ? 4 : 8, &out));
  for (int64_t i = 0; i < numel; i++) {
    if (eq) {
      /* Floats compare as float32 (NaN compares false), the others as int64. */
      int cmp;
      bool nan = false;
      if (fl) {
        float x = sg__ox_f32(a, oa), y = sg__ox_f32(b, ob);
        nan = isnan(x) || isnan(y);
        cmp = x < y ? -1 : x > y ? 1 : 0;
      } else {
        int64_t x = sg__ox_i64(a, oa), y = sg__ox_i64(b, ob);
        cmp = x < y ? -1 : x > y ? 1 : 0;
      }
      bool res = op == '='   ? cmp == 0
                 : op == '<' ? cmp < 0
                 : op == '>' ? cmp > 0
                 : op == 'l' ? cmp <= 0
                             : cmp >= 0;
      ((int64_t *)out)[i] = !nan && res;
    } else if (fl) {
      double x = sg__ox_f32(a, oa), y = sg__ox_num(b, ob);
      double z = op == 'p'   ? (double)powf((float)x, (float)y)
                 : op == '+' ? x + y
                 : op == '-' ? x - y
                 : op == '*' ? x * y
                 : op == 'm' ? (isnan(x) || isnan(y) ? NAN : fmin(x, y))
                 : op == 'M' ? (isnan(x) || isnan(y) ? NAN : fmax(x, y))
                 : op == 'f' ? fmod(x, y)
                             : x / y;
      ((float *)out)[i] = (float)z;
    } else {
      SG_CHECK(int_op(c, op, sg__ox_i64(a, oa), sg__ox_i64(b, ob), &((int64_t *)out)[i]));
    }
    for (int d = r - 1; d >= 0; d--) {
      oa += sa[d];
      ob += sb[d];
      if (++idx[d] < dims[d]) break;
      oa -= sa[d] * dims[d];
      ob -= sb[d] * dims[d];
      idx[d] = 0;
    }
  }
  int elem = eq ? OX_BOOL : fl ? OX_FLOAT : (a->elem == OX_INT64 || b->elem == OX_INT64) ? OX_INT64 : a->elem;
  *folded = true;
  return sg__ox_set_const(c, 0, elem, r, dims, out);
}

const ox_op sg__ox_fold_ops[] = {
    {"Constant", cv_constant, 0, 0, 1, 1},   {"ConstantOfShape", cv_constant_of_shape, 1, 1, 1, 1},
    {"Shape", cv_shape, 1, 1, 1, 1},         {"Gather", sg__ox_cv_gather, 2, 2, 1, 1},
    {"Unsqueeze", cv_unsqueeze, 1, 2, 1, 1}, {"Squeeze", cv_squeeze, 1, 2, 1, 1},
    {"Reshape", cv_reshape, 2, 2, 1, 1},     {"Concat", cv_concat, 1, SG__MAX_OP_IO, 1, 1},
    {"Cast", cv_cast, 1, 1, 1, 1},           {"Identity", cv_identity, 1, 1, 1, 1},
    {"CastLike", cv_cast_like, 2, 2, 1, 1},
};
const int sg__ox_n_fold_ops = (int)(sizeof sg__ox_fold_ops / sizeof *sg__ox_fold_ops);
