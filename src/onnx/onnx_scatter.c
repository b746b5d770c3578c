/* ScatterND and ScatterElements. Of import-time constants, folded: the index assignments with which
 * models build buffers in forward (BEiT's relative_position_index: `index[0, 0:] = n - 3`, exported
 * by the TorchScript exporter as ScatterND and by torch.export as ScatterElements of select_scatter).
 * `reduction` none (the default: a later update of one element wins, as ONNX's reference applies
 * them in order), add, mul, max or min. Data or updates computed at run time (Funnel's attention
 * writes its position terms into a tensor this way) by indices known at import, without a
 * reduction: each result element is an element of data or of updates, so the two are concatenated
 * and the elements moved to their places (onnx_remap.c), which carries the gradient to both. Indices
 * computed at run time are refused, naming them. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* Element i of v combined into *out (of v's type) by the reduction. */
static void combine(char red, int elem, void *out, const ox_value *v, int64_t i) {
  if (elem == OX_FLOAT) {
    float *o = out, u = sg__ox_f32(v, i);
    *o = red == 'n'   ? u
         : red == 'a' ? *o + u
         : red == 'm' ? *o * u
         : red == 'x' ? fmaxf(*o, u)
                      : fminf(*o, u);
    return;
  }
  int64_t *o = out, u = sg__ox_i64(v, i); /* integer products wrap, as in two's complement kernels */
  *o = red == 'n'   ? u
       : red == 'a' ? (int64_t)((uint64_t)*o + (uint64_t)u)
       : red == 'm' ? (int64_t)((uint64_t)*o * (uint64_t)u)
       : red == 'x' ? (*o > u ? *o : u)
                    : (*o < u ? *o : u);
}

/* The three inputs: indices known at import, data and updates of matching types; the reduction's
 * code; their shapes. */
typedef struct scatter_args {
  ox_value *data, *idx, *upd;
  char red;
  int r, ru; /* ranks of data and updates */
  int64_t dd[SG_MAX_DIMS], ud[SG_MAX_DIMS];
} scatter_args;

static sg_status inputs(ox_ctx *c, const Onnx__NodeProto *n, scatter_args *a) {
  a->data = sg__ox_input(c, n, 0), a->idx = sg__ox_input(c, n, 1), a->upd = sg__ox_input(c, n, 2);
  if (a->data->kind == OX_V_UNAVAILABLE) return sg__ox_unavailable(c, a->data);
  if (a->upd->kind == OX_V_UNAVAILABLE) return sg__ox_unavailable(c, a->upd);
  SG_CHECK(sg__ox_need_foldable(c, a->idx, "indices"));
  if (a->idx->elem == OX_FLOAT)
    return sg__ox_node_error(c, SG_ERR_DTYPE, "indices '%s' holds floats; expected integers", a->idx->name);
  if ((sg__ox_elem_of(c, a->data) == OX_FLOAT) != (sg__ox_elem_of(c, a->upd) == OX_FLOAT))
    return sg__ox_node_error(c, SG_ERR_DTYPE, "data '%s' and updates '%s' differ in type", a->data->name,
                             a->upd->name);
  char r[16];
  SG_CHECK(sg__ox_attr_string(c, "reduction", "none", r, sizeof r));
  static const char *const names[] = {"none", "add", "mul", "max", "min"};
  static const char codes[] = "namxi";
  a->red = 0;
  for (int i = 0; i < 5; i++)
    if (strcmp(r, names[i]) == 0) a->red = codes[i];
  if (a->red == 0)
    return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "reduction '%s' is not one of none, add, mul, max, min", r);
  if (a->red != 'n' && !(sg__ox_foldable(a->data) && sg__ox_foldable(a->upd)))
    return sg__ox_node_error(c, SG_ERR_UNSUPPORTED,
                             "reduction '%s' of %s '%s' computed at run time; sgrt scatters run-time tensors "
                             "without a reduction only",
                             r, sg__ox_foldable(a->data) ? "updates" : "data",
                             sg__ox_foldable(a->data) ? a->upd->name : a->data->name);
  SG_CHECK(sg__ox_shape(c, a->data, &a->r, a->dd));
  return sg__ox_shape(c, a->upd, &a->ru, a->ud);
}

/* Output 0: data with update element k written at flat position dst[k] (combined by the reduction,
 * folded, for constants; else the last write wins, run-time tensors moved into place). */
static sg_status scatter(ox_ctx *c, const scatter_args *a, const int64_t *dst) {
  ox_value *data = a->data, *upd = a->upd;
  int64_t n_data = sg__ox_fold_numel(a->r, a->dd), n_upd = sg__ox_fold_numel(a->ru, a->ud);
  if (sg__ox_foldable(data) && sg__ox_foldable(upd)) {
    size_t es = sg__ox_elem_size(data->elem);
    char *out;
    SG_CHECK(sg__ox_fold_alloc(c, data->numel, es, (void **)&out));
    memcpy(out, data->data, (size_t)data->numel * es);
    for (int64_t k = 0; k < n_upd; k++) combine(a->red, data->elem, out + (size_t)dst[k] * es, upd, k);
    return sg__ox_set_const(c, 0, data->elem, a->r, a->dd, out);
  }
  int64_t *src;
  SG_CHECK(sg__ox_fold_alloc(c, n_data, sizeof *src, (void **)&src));
  for (int64_t p = 0; p < n_data; p++) src[p] = p;
  for (int64_t k = 0; k < n_upd; k++) src[dst[k]] = n_data + k;
  sg_tensor parts[2];
  bool was_bool = false, upd_bool;
  SG_CHECK(sg__ox_tensor(c, data, &parts[0]));
  SG_CHECK(sg__ox_tensor(c, upd, &parts[1]));
  SG_CHECK(sg__ox_bool_in(c, &parts[0], &was_bool));
  SG_CHECK(sg__ox_bool_in(c, &parts[1], &upd_bool));
  parts[0] = sg_reshape(c->g, parts[0], 1, &n_data);
  parts[1] = sg_reshape(c->g, parts[1], 1, &n_upd);
  sg_tensor both = sg_concat(c->g, 2, parts, 0), y;
  SG_CHECK(sg__ox_built(c, both));
  SG_CHECK(sg__ox_remap(c, both, src, a->r, a->dd, &y));
  SG_CHECK(sg__ox_bool_out(c, &y, was_bool));
  return sg__ox_set_tensor(c, 0, y);
}

/* ScatterND: each index tuple (the last dim of indices, m long) names a slice data[i0, .., im-1] of
 * the dims after m, which the matching slice of updates replaces (or is combined into). */
static sg_status cv_scatter_nd(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known[] = {"reduction", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  scatter_args a;
  SG_CHECK(inputs(c, n, &a));
  const ox_value *idx = a.idx;
  int r = a.r, q = idx->ndim, m = q >= 1 ? (int)idx->dims[q - 1] : 0;
  if (q < 1 || m < 1 || m > r)
    return sg__ox_node_error(c, SG_ERR_SHAPE,
                             "indices '%s' has rank %d and last dim %d; data '%s' has rank %d", idx->name, q,
                             m, a.data->name, r);
  /* updates: indices' dims but the last, then data's after m */
  bool ok = a.ru == q - 1 + r - m;
  for (int k = 0; ok && k < q - 1; k++) ok = a.ud[k] == idx->dims[k];
  for (int k = 0; ok && k < r - m; k++) ok = a.ud[q - 1 + k] == a.dd[m + k];
  if (!ok) {
    char b1[256], b2[256], b3[256];
    return sg__ox_node_error(c, SG_ERR_SHAPE, "updates '%s' %s do not fit indices %s into data %s",
                             a.upd->name, sg__onnx_dims_text(b1, sizeof b1, a.ru, a.ud),
                             sg__onnx_dims_text(b2, sizeof b2, q, idx->dims),
                             sg__onnx_dims_text(b3, sizeof b3, r, a.dd));
  }
  int64_t inner = sg__ox_fold_numel(r - m, a.dd + m), tuples = idx->numel / m, *dst;
  SG_CHECK(sg__ox_fold_alloc(c, tuples * inner, sizeof *dst, (void **)&dst));
  for (int64_t t = 0; t < tuples; t++) {
    int64_t row = 0;
    for (int k = 0; k < m; k++) {
      int64_t i = sg__ox_i64(idx, t * m + k), d = a.dd[k];
      if (i < -d || i >= d)
        return sg__ox_node_error(c, SG_ERR_RANGE,
                                 "index %lld of indices '%s' is out of range for dim %d of %lld",
                                 (long long)i, idx->name, k, (long long)d);
      row = row * d + (i < 0 ? i + d : i);
    }
    for (int64_t e = 0; e < inner; e++) dst[t * inner + e] = row * inner + e;
  }
  return scatter(c, &a, dst);
}

/* ScatterElements: updates[.., j, ..] goes to data[.., indices[.., j, ..], ..] along axis; indices
 * and updates share a shape, no larger than data's. */
static sg_status cv_scatter_elements(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known[] = {"axis", "reduction", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  scatter_args a;
  SG_CHECK(inputs(c, n, &a));
  const ox_value *idx = a.idx;
  int64_t axis_attr;
  int axis, r = a.r;
  SG_CHECK(sg__ox_attr_int(c, "axis", 0, &axis_attr));
  SG_CHECK(sg__ox_axis(c, axis_attr, r, "axis", &axis));
  bool ok = idx->ndim == r && a.ru == r;
  for (int k = 0; ok && k < r; k++) ok = idx->dims[k] == a.ud[k] && idx->dims[k] <= a.dd[k];
  if (!ok) {
    char b1[256], b2[256], b3[256];
    return sg__ox_node_error(c, SG_ERR_SHAPE, "indices %s and updates %s must have one shape within data %s",
                             sg__onnx_dims_text(b1, sizeof b1, idx->ndim, idx->dims),
                             sg__onnx_dims_text(b2, sizeof b2, a.ru, a.ud),
                             sg__onnx_dims_text(b3, sizeof b3, r, a.dd));
  }
  int64_t *dst;
  SG_CHECK(sg__ox_fold_alloc(c, idx->numel, sizeof *dst, (void **)&dst));
  SG_CHECK(sg__ox_elements_positions(c, idx, r, idx->dims, a.dd, axis, dst));
  return scatter(c, &a, dst);
}

const ox_op sg__ox_scatter_ops[] = {
    {"ScatterND", cv_scatter_nd, 3, 3, 1, 1},
    {"ScatterElements", cv_scatter_elements, 3, 3, 1, 1},
};
const int sg__ox_n_scatter_ops = (int)(sizeof sg__ox_scatter_ops / sizeof *sg__ox_scatter_ops);
