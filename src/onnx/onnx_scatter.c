/* ScatterND and ScatterElements of import-time constants, folded: the index assignments with which
 * models build buffers in forward (BEiT's relative_position_index: `index[0, 0:] = n - 3`, exported
 * by the TorchScript exporter as ScatterND and by torch.export as ScatterElements of select_scatter).
 * sgrt has no run-time scatter op: data, indices or updates computed at run time are refused, naming
 * the input. `reduction` none (the default: a later update of one element wins, as ONNX's reference
 * applies them in order), add, mul, max or min. */
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

/* The three inputs, checked foldable and of matching types; the reduction's code. */
static sg_status inputs(ox_ctx *c, const Onnx__NodeProto *n, ox_value **data, ox_value **idx, ox_value **upd,
                        char *red) {
  *data = sg__ox_input(c, n, 0), *idx = sg__ox_input(c, n, 1), *upd = sg__ox_input(c, n, 2);
  SG_CHECK(sg__ox_need_foldable(c, *data, "data"));
  SG_CHECK(sg__ox_need_foldable(c, *idx, "indices"));
  SG_CHECK(sg__ox_need_foldable(c, *upd, "updates"));
  if ((*idx)->elem == OX_FLOAT)
    return sg__ox_node_error(c, SG_ERR_DTYPE, "indices '%s' holds floats; expected integers", (*idx)->name);
  if (((*data)->elem == OX_FLOAT) != ((*upd)->elem == OX_FLOAT))
    return sg__ox_node_error(c, SG_ERR_DTYPE, "data '%s' and updates '%s' differ in type", (*data)->name,
                             (*upd)->name);
  char r[16];
  SG_CHECK(sg__ox_attr_string(c, "reduction", "none", r, sizeof r));
  static const char *const names[] = {"none", "add", "mul", "max", "min"};
  static const char codes[] = "namxi";
  for (int i = 0; i < 5; i++)
    if (strcmp(r, names[i]) == 0) return *red = codes[i], SG_OK;
  return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "reduction '%s' is not one of none, add, mul, max, min", r);
}

/* ScatterND: each index tuple (the last dim of indices, m long) names a slice data[i0, .., im-1] of
 * the dims after m, which the matching slice of updates replaces (or is combined into). */
static sg_status cv_scatter_nd(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known[] = {"reduction", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  ox_value *data, *idx, *upd;
  char red;
  SG_CHECK(inputs(c, n, &data, &idx, &upd, &red));
  int r = data->ndim, q = idx->ndim, m = q >= 1 ? (int)idx->dims[q - 1] : 0;
  if (q < 1 || m < 1 || m > r)
    return sg__ox_node_error(c, SG_ERR_SHAPE,
                             "indices '%s' has rank %d and last dim %d; data '%s' has rank %d", idx->name, q,
                             m, data->name, r);
  /* updates: indices' dims but the last, then data's after m */
  bool ok = upd->ndim == q - 1 + r - m;
  for (int k = 0; ok && k < q - 1; k++) ok = upd->dims[k] == idx->dims[k];
  for (int k = 0; ok && k < r - m; k++) ok = upd->dims[q - 1 + k] == data->dims[m + k];
  if (!ok) {
    char b1[256], b2[256], b3[256];
    return sg__ox_node_error(c, SG_ERR_SHAPE, "updates '%s' %s do not fit indices %s into data %s", upd->name,
                             sg__onnx_dims_text(b1, sizeof b1, upd->ndim, upd->dims),
                             sg__onnx_dims_text(b2, sizeof b2, q, idx->dims),
                             sg__onnx_dims_text(b3, sizeof b3, r, data->dims));
  }
  size_t es = sg__ox_elem_size(data->elem);
  int64_t inner = sg__ox_fold_numel(r - m, data->dims + m), tuples = idx->numel / m;
  char *out;
  SG_CHECK(sg__ox_fold_alloc(c, data->numel, es, (void **)&out));
  memcpy(out, data->data, (size_t)data->numel * es);
  for (int64_t t = 0; t < tuples; t++) {
    int64_t row = 0;
    for (int k = 0; k < m; k++) {
      int64_t i = sg__ox_i64(idx, t * m + k), d = data->dims[k];
      if (i < -d || i >= d)
        return sg__ox_node_error(c, SG_ERR_RANGE,
                                 "index %lld of indices '%s' is out of range for dim %d of %lld",
                                 (long long)i, idx->name, k, (long long)d);
      row = row * d + (i < 0 ? i + d : i);
    }
    for (int64_t e = 0; e < inner; e++)
      combine(red, data->elem, out + (size_t)(row * inner + e) * es, upd, t * inner + e);
  }
  return sg__ox_set_const(c, 0, data->elem, r, data->dims, out);
}

/* ScatterElements: updates[.., j, ..] goes to data[.., indices[.., j, ..], ..] along axis; indices
 * and updates share a shape, no larger than data's. */
static sg_status cv_scatter_elements(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known[] = {"axis", "reduction", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  ox_value *data, *idx, *upd;
  char red;
  SG_CHECK(inputs(c, n, &data, &idx, &upd, &red));
  int64_t axis_attr;
  int axis, r = data->ndim;
  SG_CHECK(sg__ox_attr_int(c, "axis", 0, &axis_attr));
  SG_CHECK(sg__ox_axis(c, axis_attr, r, "axis", &axis));
  bool ok = idx->ndim == r && upd->ndim == r;
  for (int k = 0; ok && k < r; k++) ok = idx->dims[k] == upd->dims[k] && idx->dims[k] <= data->dims[k];
  if (!ok) {
    char b1[256], b2[256], b3[256];
    return sg__ox_node_error(c, SG_ERR_SHAPE, "indices %s and updates %s must have one shape within data %s",
                             sg__onnx_dims_text(b1, sizeof b1, idx->ndim, idx->dims),
                             sg__onnx_dims_text(b2, sizeof b2, upd->ndim, upd->dims),
                             sg__onnx_dims_text(b3, sizeof b3, r, data->dims));
  }
  size_t es = sg__ox_elem_size(data->elem);
  char *out;
  SG_CHECK(sg__ox_fold_alloc(c, data->numel, es, (void **)&out));
  memcpy(out, data->data, (size_t)data->numel * es);
  int64_t pos[SG_MAX_DIMS] = {0}, d = data->dims[axis];
  for (int64_t i = 0; i < idx->numel; i++) {
    int64_t j = sg__ox_i64(idx, i);
    if (j < -d || j >= d)
      return sg__ox_node_error(c, SG_ERR_RANGE,
                               "index %lld of indices '%s' is out of range for a dim of %lld", (long long)j,
                               idx->name, (long long)d);
    int64_t off = 0;
    for (int k = 0; k < r; k++) off = off * data->dims[k] + (k == axis ? (j < 0 ? j + d : j) : pos[k]);
    combine(red, data->elem, out + (size_t)off * es, upd, i);
    for (int k = r - 1; k >= 0 && ++pos[k] == idx->dims[k]; k--) pos[k] = 0;
  }
  return sg__ox_set_const(c, 0, data->elem, r, data->dims, out);
}

const ox_op sg__ox_scatter_ops[] = {
    {"ScatterND", cv_scatter_nd, 3, 3, 1, 1},
    {"ScatterElements", cv_scatter_elements, 3, 3, 1, 1},
};
const int sg__ox_n_scatter_ops = (int)(sizeof sg__ox_scatter_ops / sizeof *sg__ox_scatter_ops);
