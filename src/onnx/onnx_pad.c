/* ONNX Pad (F.pad, nn.ZeroPad2d, Swin's window padding, MobileBERT's shifted
 * embeddings), lowered to slice, concat and broadcast_to: sgrt has no pad
 * op, and these carry the gradient already (the pads' share is dropped).
 *
 * Per axis, in order: a negative pad crops (a slice); a positive one adds
 * `before` and `after` elements by mode:
 *   constant  the value (input 2, or the `value` attribute before opset 11;
 *             0 by default) broadcast to the pad's shape from a constant of
 *             one element, so no pad-sized constant is stored;
 *   edge      the border element broadcast along the axis;
 *   reflect   the elements next to the border, mirrored: one slice each (at
 *             most 64 a side, each less than the dim);
 *   wrap      the other end's elements: one slice (at most the dim).
 * All-zero pads leave the data as it is. Pads and axes (opset 18) must be
 * import-time constants; a bool tensor goes through f32 (sg__ox_bool_in). */
#include <stdio.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* Most single-element slices a reflect pad makes on one side of an axis. */
#define OX_REFLECT_MAX 64

typedef enum { PAD_CONSTANT, PAD_EDGE, PAD_REFLECT, PAD_WRAP } pad_mode;

/* The dims of t. */
static sg_status dims_of(ox_ctx *c, sg_tensor t, sg_tensor_info *ti) {
  SG_CHECK(sg__ox_built(c, t));
  return sg_graph_tensor_info(c->g, t, ti);
}

/* `n` copies of `value` shaped as t with `n` along `axis`: a one-element constant broadcast. */
static sg_status fill(ox_ctx *c, sg_tensor t, int axis, int64_t n, double value, sg_tensor *out) {
  sg_tensor_info ti;
  SG_CHECK(dims_of(c, t, &ti));
  int64_t ones[SG_MAX_DIMS], dims[SG_MAX_DIMS];
  for (int d = 0; d < ti.ndim; d++) ones[d] = 1, dims[d] = d == axis ? n : ti.dims[d];
  void *data;
  SG_CHECK(sg__ox_fold_alloc(c, 1, 8, &data));
  if (ti.dtype == SG_F32) *(float *)data = (float)value;
  else if (ti.dtype == SG_I64) *(int64_t *)data = (int64_t)value;
  else if (ti.dtype == SG_I32) *(int32_t *)data = (int32_t)value;
  else return sg__ox_node_error(c, SG_ERR_DTYPE, "pads a tensor of type %s", sg_dtype_name(ti.dtype));
  char name[300];
  snprintf(name, sizeof name, "%.256s.pad_value", sg__ox_has_output(c, 0) ? c->node->output[0] : "pad");
  const char *tmp = sg__ox_tmp_name(c, name);
  if (tmp == NULL) return sg__error(SG_ERR_NO_MEMORY, "ONNX import: out of memory");
  sg_tensor one = sg_graph_add_tensor(c->g, tmp, ti.dtype, SG_ROLE_CONSTANT, ti.ndim, ones, data);
  SG_CHECK(sg__ox_built(c, one));
  SG_CHECK(sg__ox_want_name(c, one.id, name, 1));
  sg_attr shape = SG__AS("shape", ti.ndim, dims);
  if (sg_graph_add_op(c->g, SG_OP_BROADCAST_TO, 1, &one, 1, &shape, 1, out, NULL) != SG_OK)
    return sg__ox_built(c, SG_NO_TENSOR);
  return SG_OK;
}

/* The border element along `axis` (the first, or the last with at_end) repeated n times. */
static sg_status edge(ox_ctx *c, sg_tensor t, int axis, int64_t dim, int64_t n, bool at_end, sg_tensor *out) {
  sg_tensor e = sg_slice(c->g, t, axis, at_end ? dim - 1 : 0, 1);
  sg_tensor_info ti;
  SG_CHECK(dims_of(c, e, &ti));
  if (n == 1) return *out = e, SG_OK;
  ti.dims[axis] = n;
  sg_attr shape = SG__AS("shape", ti.ndim, ti.dims);
  if (sg_graph_add_op(c->g, SG_OP_BROADCAST_TO, 1, &e, 1, &shape, 1, out, NULL) != SG_OK)
    return sg__ox_built(c, SG_NO_TENSOR);
  return SG_OK;
}

/* The n elements next to the border, mirrored (reflect: the border itself not repeated). */
static sg_status reflect(ox_ctx *c, sg_tensor t, int axis, int64_t dim, int64_t n, bool at_end,
                         sg_tensor *out) {
  if (n > OX_REFLECT_MAX || n >= dim)
    return sg__ox_node_error(
        c, SG_ERR_UNSUPPORTED,
        "mode 'reflect' pads %lld along axis %d of dim %lld; sgrt reflects fewer than the "
        "dim and at most %d",
        (long long)n, axis, (long long)dim, OX_REFLECT_MAX);
  sg_tensor parts[OX_REFLECT_MAX];
  for (int64_t i = 0; i < n; i++) /* before: x[n], ..., x[1]; after: x[dim-2], ..., x[dim-1-n] */
    parts[i] = sg_slice(c->g, t, axis, at_end ? dim - 2 - i : n - i, 1);
  *out = n == 1 ? parts[0] : sg_concat(c->g, (int)n, parts, axis);
  return sg__ox_built(c, *out);
}

/* The other end's n elements (wrap). */
static sg_status wrap(ox_ctx *c, sg_tensor t, int axis, int64_t dim, int64_t n, bool at_end, sg_tensor *out) {
  if (n > dim)
    return sg__ox_node_error(c, SG_ERR_UNSUPPORTED,
                             "mode 'wrap' pads %lld along axis %d of dim %lld; sgrt wraps at most the dim",
                             (long long)n, axis, (long long)dim);
  *out = sg_slice(c->g, t, axis, at_end ? 0 : dim - n, n);
  return sg__ox_built(c, *out);
}

/* t padded along `axis` by before and after (>= 0) elements. */
static sg_status pad_axis(ox_ctx *c, sg_tensor *t, int axis, int64_t before, int64_t after, pad_mode mode,
                          double value) {
  sg_tensor_info ti;
  SG_CHECK(dims_of(c, *t, &ti));
  int64_t dim = ti.dims[axis];
  sg_tensor parts[3];
  int n = 0;
  for (int side = 0; side < 2; side++) {
    int64_t k = side == 0 ? before : after;
    if (side == 1) parts[n++] = *t;
    if (k == 0) continue;
    sg_tensor p;
    if (mode == PAD_CONSTANT) SG_CHECK(fill(c, *t, axis, k, value, &p));
    else if (mode == PAD_EDGE) SG_CHECK(edge(c, *t, axis, dim, k, side == 1, &p));
    else if (mode == PAD_REFLECT) SG_CHECK(reflect(c, *t, axis, dim, k, side == 1, &p));
    else SG_CHECK(wrap(c, *t, axis, dim, k, side == 1, &p));
    parts[n++] = p;
  }
  *t = sg_concat(c->g, n, parts, axis);
  return sg__ox_built(c, *t);
}

static sg_status read_mode(ox_ctx *c, pad_mode *mode) {
  char m[32];
  SG_CHECK(sg__ox_attr_string(c, "mode", "constant", m, sizeof m));
  static const char *const names[] = {"constant", "edge", "reflect", "wrap"};
  for (int i = 0; i < 4; i++)
    if (strcmp(m, names[i]) == 0) return *mode = (pad_mode)i, SG_OK;
  return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "mode '%s' is not one of constant, edge, reflect, wrap", m);
}

/* pads (2 per axis: all begins, then all ends) as per-axis before/after over the data's rank r. */
static sg_status read_pads(ox_ctx *c, const Onnx__NodeProto *n, int r, int64_t *before, int64_t *after,
                           double *value) {
  int64_t pads[2 * SG_MAX_DIMS], axes[SG_MAX_DIMS];
  int np = 0, na = 0;
  *value = 0;
  if (c->opset < 11) {
    SG_CHECK(sg__ox_attr_ints(c, "pads", 2 * SG_MAX_DIMS, pads, &np));
    SG_CHECK(sg__ox_attr_float(c, "value", 0.0, value));
  } else {
    ox_value *vp = sg__ox_input(c, n, 1), *vv = sg__ox_input(c, n, 2), *va = sg__ox_input(c, n, 3);
    if (vp == NULL) return sg__ox_node_error(c, SG_ERR_ARITY, "input 1 (pads) is missing");
    SG_CHECK(sg__ox_const_ints(c, vp, "pads", 2 * SG_MAX_DIMS, pads, &np));
    if (vv) SG_CHECK(sg__ox_const_scalar(c, vv, "constant_value", value));
    if (va) SG_CHECK(sg__ox_const_ints(c, va, "axes", SG_MAX_DIMS, axes, &na));
  }
  int count = na ? na : r;
  if (np != 2 * count)
    return sg__ox_node_error(c, SG_ERR_SHAPE, "pads has %d values; the %s needs %d", np,
                             na ? "axes input" : "data's rank", 2 * count);
  for (int d = 0; d < r; d++) before[d] = after[d] = 0;
  bool seen[SG_MAX_DIMS] = {false};
  for (int k = 0; k < count; k++) {
    int ax = k;
    if (na) SG_CHECK(sg__ox_axis(c, axes[k], r, "axis", &ax));
    if (seen[ax]) return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "axis %d is padded twice", ax);
    seen[ax] = true;
    before[ax] = pads[k];
    after[ax] = pads[count + k];
  }
  return SG_OK;
}

static sg_status cv_pad(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known_old[] = {"mode", "pads", "value", NULL};
  static const char *const known_new[] = {"mode", NULL};
  SG_CHECK(sg__ox_check_attrs(c, c->opset < 11 ? known_old : known_new));
  ox_value *x = sg__ox_input(c, n, 0);
  if (x == NULL) return sg__ox_node_error(c, SG_ERR_ARITY, "input 0 (data) is missing");
  int r;
  int64_t xd[SG_MAX_DIMS], before[SG_MAX_DIMS], after[SG_MAX_DIMS];
  double value;
  pad_mode mode = PAD_CONSTANT;
  SG_CHECK(sg__ox_shape(c, x, &r, xd));
  SG_CHECK(read_mode(c, &mode));
  SG_CHECK(read_pads(c, n, r, before, after, &value));
  bool none = true;
  for (int d = 0; d < r; d++) {
    if (before[d] > OX_FOLD_MAX_NUMEL || after[d] > OX_FOLD_MAX_NUMEL)
      return sg__ox_node_error(c, SG_ERR_RANGE, "pads of axis %d are %lld and %lld; at most %lld", d,
                               (long long)before[d], (long long)after[d], (long long)OX_FOLD_MAX_NUMEL);
    if (xd[d] + (before[d] < 0 ? before[d] : 0) + (after[d] < 0 ? after[d] : 0) < 1)
      return sg__ox_node_error(
          c, SG_ERR_UNSUPPORTED,
          "pads %lld and %lld crop axis %d of dim %lld to nothing; sgrt has no empty tensors",
          (long long)before[d], (long long)after[d], d, (long long)xd[d]);
    none = none && before[d] == 0 && after[d] == 0;
  }
  if (none) return sg__ox_set_alias(c, 0, x); /* PyTorch's all-zero Pad before an AveragePool */
  sg_tensor t;
  bool was_bool;
  SG_CHECK(sg__ox_tensor(c, x, &t));
  SG_CHECK(sg__ox_bool_in(c, &t, &was_bool));
  for (int d = 0; d < r; d++) { /* crops first: the pads then see the cropped data, as ONNX's reference */
    int64_t lo = before[d] < 0 ? -before[d] : 0, hi = after[d] < 0 ? -after[d] : 0;
    if (lo + hi == 0) continue;
    t = sg_slice(c->g, t, d, lo, xd[d] - lo - hi);
    SG_CHECK(sg__ox_built(c, t));
  }
  for (int d = 0; d < r; d++) {
    int64_t lo = before[d] > 0 ? before[d] : 0, hi = after[d] > 0 ? after[d] : 0;
    if (lo + hi > 0) SG_CHECK(pad_axis(c, &t, d, lo, hi, mode, value));
  }
  SG_CHECK(sg__ox_bool_out(c, &t, was_bool));
  return sg__ox_set_tensor(c, 0, t);
}

const ox_op sg__ox_pad_ops[] = {
    {"Pad", cv_pad, 1, 4, 1, 1},
};
const int sg__ox_n_pad_ops = (int)(sizeof sg__ox_pad_ops / sizeof *sg__ox_pad_ops);
