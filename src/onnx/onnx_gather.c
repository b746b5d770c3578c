/* Gather (onnx_fold.c's table): folded when data and indices are import-time
 * constants; else an embedding lookup of a 2-D weight along axis 0
 * (nn.Embedding), or slices of any other tensor by constant indices (BERT's
 * pooler h[:, 0], x[:, -1]). GatherND and GatherElements, which Hugging Face
 * models exported by PyTorch 2 write for attention masks and RoBERTa's
 * token types: folded, or by constant indices the same slices (GatherND)
 * or the elements moved to their places (GatherElements, onnx_remap.c).
 * docs/onnx.md has the mapping table. */
#include <string.h>

#include "onnx/onnx_internal.h"

/* A Gather that is not folded: rows of a float table along axis 0, an sgrt
 * embedding (what torch.onnx.export writes for nn.Embedding, whose weight is
 * a parameter, with indices known at run time; of a table of rank 3 or more,
 * each row is its trailing block: Mixtral's experts' weights picked by the
 * router's indices). Other Gathers of run-time indices have no run-time
 * form. Constant indices are checked here; run-time ones by the kernel,
 * which takes 0..V-1 only (ONNX's negative indices do not wrap at run
 * time). */
static sg_status embedding_rows(ox_ctx *c, ox_value *data, ox_value *idx, int64_t axis_attr, sg_tensor *out) {
  if (data->kind == OX_V_UNAVAILABLE) return sg__ox_unavailable(c, data);
  if (idx->kind == OX_V_UNAVAILABLE) return sg__ox_unavailable(c, idx);
  int ndim;
  int64_t dims[SG_MAX_DIMS];
  SG_CHECK(sg__ox_shape(c, data, &ndim, dims));
  int axis;
  SG_CHECK(sg__ox_axis(c, axis_attr, ndim, "axis", &axis));
  const char *what = sg__ox_foldable(data) ? "indices are not a constant" : "data is not a constant";
  char sd[256];
  sg__onnx_dims_text(sd, sizeof sd, ndim, dims);
  if (ndim < 2 || axis != 0 || sg__ox_elem_of(c, data) != OX_FLOAT)
    return sg__ox_node_error(c, SG_ERR_UNSUPPORTED,
                             "%s (data '%s' %s, axis %d): sgrt runs such a Gather only as an embedding "
                             "lookup, along axis 0 of a float table of rank 2 or more",
                             what, data->name, sd, axis);
  if (idx->kind == OX_V_CONST) {
    if (idx->elem == OX_FLOAT)
      return sg__ox_node_error(c, SG_ERR_DTYPE, "indices '%s' holds floats; expected integers", idx->name);
    for (int64_t j = 0; j < idx->numel; j++) {
      int64_t i = sg__ox_i64(idx, j);
      if (i < 0 || i >= dims[0])
        return sg__ox_node_error(c, i < -dims[0] || i >= dims[0] ? SG_ERR_RANGE : SG_ERR_UNSUPPORTED,
                                 "index %lld of indices '%s' is outside 0..%lld (data '%s' %s; an embedding "
                                 "lookup does not wrap negative indices)",
                                 (long long)i, idx->name, (long long)(dims[0] - 1), data->name, sd);
    }
  }
  sg_tensor table, ids;
  SG_CHECK(sg__ox_tensor(c, data, &table));
  SG_CHECK(sg__ox_tensor(c, idx, &ids));
  int64_t rows[] = {dims[0], sg__ox_fold_numel(ndim - 1, dims + 1)};
  if (ndim > 2) table = sg_reshape(c->g, table, 2, rows);
  sg_tensor y = sg_embedding(c->g, table, ids);
  SG_CHECK(sg__ox_built(c, y));
  if (ndim > 2) { /* [ids..., rest] to [ids..., dims 1..] */
    sg_tensor_info yi;
    SG_CHECK(sg_graph_tensor_info(c->g, y, &yi));
    int64_t shape[SG_MAX_DIMS];
    int k = yi.ndim - 1;
    if (k + ndim - 1 > SG_MAX_DIMS)
      return sg__ox_node_error(c, SG_ERR_RANGE, "the result would have rank %d; at most %d", k + ndim - 1,
                               SG_MAX_DIMS);
    for (int i = 0; i < k; i++) shape[i] = yi.dims[i];
    for (int i = 1; i < ndim; i++) shape[k++] = dims[i];
    y = sg_reshape(c->g, y, k, shape);
    SG_CHECK(sg__ox_built(c, y));
  }
  *out = y;
  return SG_OK;
}

static sg_status gather_embedding(ox_ctx *c, ox_value *data, ox_value *idx, int64_t axis_attr) {
  sg_tensor y;
  SG_CHECK(embedding_rows(c, data, idx, axis_attr, &y));
  return sg__ox_set_tensor(c, 0, y);
}

/* Most indices a Gather of a tensor by constant indices takes apart into
 * slices (x[:, 0], x[:, -1], a few rows); more is refused. */
#define OX_GATHER_MAX_SLICES 64

/* A Gather of a tensor computed at run time (or of a weight that is no
 * embedding table) by constant indices (the CLS token x[:, 0], the last
 * token x[:, -1]): one sg_slice per run of consecutive indices along the
 * axis, concatenated when there are several, then a reshape to ONNX's
 * result shape (data dims before the axis, the indices' dims, the dims
 * after). Negative indices count from the end, as ONNX says. */
/* How many runs of consecutive indices (after wrapping negative ones) idx takes along a dim d. */
static int64_t count_runs(const ox_value *idx, int64_t d) {
  int64_t runs = 0, prev = -2;
  for (int64_t j = 0; j < idx->numel; j++) {
    int64_t i = sg__ox_i64(idx, j);
    if (i < 0) i += d;
    runs += i != prev + 1;
    prev = i;
  }
  return runs;
}

static sg_status gather_slices(ox_ctx *c, ox_value *data, ox_value *idx, int64_t axis_attr) {
  int ndim;
  int64_t dims[SG_MAX_DIMS];
  SG_CHECK(sg__ox_shape(c, data, &ndim, dims));
  int axis;
  SG_CHECK(sg__ox_axis(c, axis_attr, ndim, "axis", &axis));
  if (idx->elem == OX_FLOAT)
    return sg__ox_node_error(c, SG_ERR_DTYPE, "indices '%s' holds floats; expected integers", idx->name);
  /* Rows of a 2-D float tensor in many runs (Swin's relative position bias table gathered by its
   * index buffer): an embedding lookup, one op whatever the indices. */
  if (ndim == 2 && axis == 0 && sg__ox_elem_of(c, data) == OX_FLOAT &&
      count_runs(idx, dims[0]) > OX_GATHER_MAX_SLICES)
    return gather_embedding(c, data, idx, 0);
  int rank = ndim - 1 + idx->ndim;
  if (rank > SG_MAX_DIMS)
    return sg__ox_node_error(c, SG_ERR_RANGE, "the result would have rank %d; at most %d", rank, SG_MAX_DIMS);
  char sd[256];
  sg__onnx_dims_text(sd, sizeof sd, ndim, dims);
  int64_t d = dims[axis];
  sg_tensor x, parts[OX_GATHER_MAX_SLICES];
  bool was_bool;
  SG_CHECK(sg__ox_tensor(c, data, &x));
  SG_CHECK(sg__ox_bool_in(c, &x, &was_bool));
  int np = 0;
  for (int64_t j = 0; j < idx->numel;) {
    int64_t i = sg__ox_i64(idx, j), len = 1;
    if (i < -d || i >= d)
      return sg__ox_node_error(c, SG_ERR_RANGE,
                               "index %lld of indices '%s' is out of range for axis %d of '%s' %s",
                               (long long)i, idx->name, axis, data->name, sd);
    if (i < 0) i += d;
    for (; j + len < idx->numel; len++) {
      int64_t next = sg__ox_i64(idx, j + len);
      if (next < -d || next >= d || (next < 0 ? next + d : next) != i + len) break;
    }
    if (np == OX_GATHER_MAX_SLICES)
      return sg__ox_node_error(c, SG_ERR_UNSUPPORTED,
                               "indices '%s' (%lld values) take more than %d separate ranges of axis %d of "
                               "'%s' %s; sgrt gathers a tensor computed at run time by slices",
                               idx->name, (long long)idx->numel, OX_GATHER_MAX_SLICES, axis, data->name, sd);
    parts[np] = len == d ? x : sg_slice(c->g, x, axis, i, len);
    SG_CHECK(sg__ox_built(c, parts[np]));
    np++;
    j += len;
  }
  if (np == 0)
    return sg__ox_node_error(c, SG_ERR_UNSUPPORTED, "indices '%s' are empty; sgrt has no empty tensors",
                             idx->name);
  sg_tensor y = np == 1 ? parts[0] : sg_concat(c->g, np, parts, axis);
  SG_CHECK(sg__ox_built(c, y));
  int64_t out[SG_MAX_DIMS];
  int k = 0;
  for (int i = 0; i < axis; i++) out[k++] = dims[i];
  for (int i = 0; i < idx->ndim; i++) out[k++] = idx->dims[i];
  for (int i = axis + 1; i < ndim; i++) out[k++] = dims[i];
  const sg__tensor *yt = &c->g->tensors[y.id];
  if (yt->ndim != rank || memcmp(yt->dims, out, sizeof(int64_t) * (size_t)rank) != 0) {
    y = sg_reshape(c->g, y, rank, out);
    SG_CHECK(sg__ox_built(c, y));
  }
  SG_CHECK(sg__ox_bool_out(c, &y, was_bool));
  return sg__ox_set_tensor(c, 0, y);
}

/* A Gather of constant data by constant indices, at import time. */
static sg_status fold_gather(ox_ctx *c, const ox_value *data, const ox_value *idx, int64_t axis_attr) {
  if (idx->elem == OX_FLOAT)
    return sg__ox_node_error(c, SG_ERR_DTYPE, "indices '%s' holds floats; expected integers", idx->name);
  int axis = 0;
  SG_CHECK(sg__ox_axis(c, axis_attr, data->ndim, "axis", &axis));
  int rank = data->ndim - 1 + idx->ndim;
  if (rank > SG_MAX_DIMS)
    return sg__ox_node_error(c, SG_ERR_RANGE, "the result would have rank %d; at most %d", rank, SG_MAX_DIMS);
  int64_t dims[SG_MAX_DIMS];
  int k = 0;
  for (int i = 0; i < axis; i++) dims[k++] = data->dims[i];
  for (int i = 0; i < idx->ndim; i++) dims[k++] = idx->dims[i];
  for (int i = axis + 1; i < data->ndim; i++) dims[k++] = data->dims[i];
  int64_t outer = sg__ox_fold_numel(axis, data->dims),
          inner = sg__ox_fold_numel(data->ndim - axis - 1, data->dims + axis + 1);
  int64_t dim = data->dims[axis];
  size_t es = sg__ox_elem_size(data->elem);
  char *out;
  SG_CHECK(sg__ox_fold_alloc(c, sg__ox_fold_numel(rank, dims), es, (void **)&out));
  size_t chunk = (size_t)inner * es;
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t j = 0; j < idx->numel; j++) {
      int64_t i = sg__ox_i64(idx, j);
      if (i < -dim || i >= dim)
        return sg__ox_node_error(c, SG_ERR_RANGE, "index %lld is out of range for a dim of %lld",
                                 (long long)i, (long long)dim);
      if (i < 0) i += dim;
      memcpy(out + (size_t)(o * idx->numel + j) * chunk,
             (const char *)data->data + (size_t)(o * dim + i) * chunk, chunk);
    }
  }
  return sg__ox_set_const(c, 0, data->elem, rank, dims, out);
}

/* The flat positions in data (dims ddims) of a GatherND's index tuples (the
 * last dim of idx, m long): each index may count from the end, and must lie
 * in its dim. */
static sg_status nd_positions(ox_ctx *c, const ox_value *idx, int m, const int64_t *ddims, int64_t *flat) {
  int64_t tuples = idx->numel / m;
  for (int64_t t = 0; t < tuples; t++) {
    int64_t f = 0;
    for (int k = 0; k < m; k++) {
      int64_t i = sg__ox_i64(idx, t * m + k), d = ddims[k];
      if (i < -d || i >= d)
        return sg__ox_node_error(c, SG_ERR_RANGE,
                                 "index %lld of indices '%s' is out of range for a dim of %lld", (long long)i,
                                 idx->name, (long long)d);
      f = f * d + (i < 0 ? i + d : i);
    }
    flat[t] = f;
  }
  return SG_OK;
}

/* GatherND by indices computed at run time: index tuples of one element
 * name rows of data's first dim (Mixtral's experts' weights picked by the
 * router's TopK), an embedding lookup of data as a table of those rows,
 * reshaped to the indices' dims but the last, then data's after the first. */
static sg_status gather_nd_rows(ox_ctx *c, ox_value *data, ox_value *idx) {
  int q;
  int64_t idims[SG_MAX_DIMS];
  SG_CHECK(sg__ox_shape(c, idx, &q, idims));
  if (q < 1 || idims[q - 1] != 1)
    return sg__ox_node_error(
        c, SG_ERR_UNSUPPORTED,
        "indices '%s' are computed at run time with tuples of %lld; sgrt gathers by run-time "
        "indices only rows of the first dim (tuples of 1)",
        idx->name, (long long)(q >= 1 ? idims[q - 1] : 0));
  int64_t ids_dims[SG_MAX_DIMS] = {1};
  for (int k = 0; k < q - 1; k++) ids_dims[k] = idims[k];
  sg_tensor ids;
  SG_CHECK(sg__ox_reshape(c, idx, q > 1 ? q - 1 : 1, ids_dims, &ids));
  SG_CHECK(sg__ox_built(c, ids));
  ox_value flat = *idx; /* the tuples without their last dim of 1 */
  flat.kind = OX_V_TENSOR;
  flat.tensor = ids.id;
  flat.ndim = q > 1 ? q - 1 : 1;
  for (int k = 0; k < flat.ndim; k++) flat.dims[k] = ids_dims[k];
  sg_tensor y;
  SG_CHECK(embedding_rows(c, data, &flat, 0, &y));
  if (q == 1) { /* indices [1]: data's dims after the first, without the lookup's dim of 1 */
    int r;
    int64_t ddims[SG_MAX_DIMS];
    SG_CHECK(sg__ox_shape(c, data, &r, ddims));
    y = r > 1 ? sg_reshape(c->g, y, r - 1, ddims + 1) : sg_reshape(c->g, y, 0, NULL);
    SG_CHECK(sg__ox_built(c, y));
  }
  return sg__ox_set_tensor(c, 0, y);
}

/* GatherND with batch_dims 0: each index tuple (the last dim of indices, m
 * long) picks a slice data[i0, .., im-1] of the dims after m; the result has
 * the indices' dims but the last, then those. The indices must be known at
 * import. Seen as a Gather along axis 0 of data reshaped to [rows, rest...]
 * by the tuples' flat row numbers, it is folded for constant data and
 * sliced for a tensor (Hugging Face's padding_mask[batch_idx, kv_idx]). */
static sg_status cv_gather_nd(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known[] = {"batch_dims", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  int64_t batch_dims = 0;
  SG_CHECK(sg__ox_attr_int(c, "batch_dims", 0, &batch_dims));
  if (batch_dims != 0)
    return sg__ox_node_error(c, SG_ERR_UNSUPPORTED, "batch_dims is %lld; sgrt's GatherND takes 0",
                             (long long)batch_dims);
  ox_value *data = sg__ox_input(c, n, 0), *idx = sg__ox_input(c, n, 1);
  if (data->kind == OX_V_UNAVAILABLE) return sg__ox_unavailable(c, data);
  if (idx->kind == OX_V_UNAVAILABLE) return sg__ox_unavailable(c, idx);
  if (!sg__ox_foldable(idx)) return gather_nd_rows(c, data, idx);
  if (idx->elem == OX_FLOAT)
    return sg__ox_node_error(c, SG_ERR_DTYPE, "indices '%s' holds floats; expected integers", idx->name);
  int r;
  int64_t ddims[SG_MAX_DIMS];
  SG_CHECK(sg__ox_shape(c, data, &r, ddims));
  int q = idx->ndim, m = q >= 1 ? (int)idx->dims[q - 1] : 0;
  if (q < 1 || m < 1 || m > r)
    return sg__ox_node_error(c, SG_ERR_SHAPE,
                             "indices '%s' has rank %d and last dim %d; data '%s' has rank %d", idx->name, q,
                             m, data->name, r);
  int64_t rows = sg__ox_fold_numel(m, ddims), rest[SG_MAX_DIMS];
  int nrest = r - m;
  for (int k = 0; k < nrest; k++) rest[k] = ddims[m + k];
  /* The flat row numbers: a constant of their own (named after the indices), which an embedding
   * lookup of the rows materialises. */
  const char *flat_name = sg__ox_tmp_name(c, idx->name);
  if (flat_name == NULL) return sg__error(SG_ERR_NO_MEMORY, "ONNX import: out of memory");
  ox_value flat = {.name = flat_name,
                   .kind = OX_V_CONST,
                   .role = SG_ROLE_CONSTANT,
                   .tensor = -1,
                   .elem = OX_INT64,
                   .ndim = q - 1};
  for (int k = 0; k < q - 1; k++) flat.dims[k] = idx->dims[k];
  flat.numel = idx->numel / m;
  int64_t *pos;
  SG_CHECK(sg__ox_fold_alloc(c, flat.numel, 8, (void **)&pos));
  SG_CHECK(nd_positions(c, idx, m, ddims, pos));
  flat.data = pos;
  /* data seen as [rows, rest...] */
  ox_value seen = *data;
  seen.ndim = 1 + nrest;
  seen.dims[0] = rows;
  for (int k = 0; k < nrest; k++) seen.dims[1 + k] = rest[k];
  if (!sg__ox_foldable(data)) {
    sg_tensor t;
    SG_CHECK(sg__ox_reshape(c, data, seen.ndim, seen.dims, &t));
    SG_CHECK(sg__ox_built(c, t));
    seen.kind = OX_V_TENSOR;
    seen.tensor = t.id;
    return gather_slices(c, &seen, &flat, 0);
  }
  return fold_gather(c, &seen, &flat, 0);
}

/* GatherElements: out[.., j, ..] = data[.., indices[.., j, ..], ..] along
 * axis, the result shaped as the indices. Folded when both are constants;
 * of a tensor computed at run time by constant indices (DeBERTa-v2's
 * relative-position scores), the elements moved to their places
 * (onnx_remap.c). Of constant data whose elements are all one value by
 * indices computed at run time (Hugging Face's RoBERTa gathers its all-zero
 * token_type_ids buffer by the position ids), the result is that value
 * whatever the indices: a constant, folded, with the indices' dims (indices
 * out of range are then not reported, where PyTorch would fail). Both
 * computed at run time has no op here. */
static sg_status cv_gather_elements(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known[] = {"axis", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  ox_value *data = sg__ox_input(c, n, 0), *idx = sg__ox_input(c, n, 1);
  int64_t axis_attr = 0;
  SG_CHECK(sg__ox_attr_int(c, "axis", 0, &axis_attr));
  if (data->kind == OX_V_UNAVAILABLE) return sg__ox_unavailable(c, data);
  if (idx->kind == OX_V_UNAVAILABLE) return sg__ox_unavailable(c, idx);
  if (!sg__ox_foldable(data) && !sg__ox_foldable(idx))
    return sg__ox_node_error(c, SG_ERR_UNSUPPORTED,
                             "data '%s' and indices '%s' are both computed at run time; sgrt runs "
                             "GatherElements with indices known at import (or of constant data)",
                             data->name, idx->name);
  int axis, qi, r;
  int64_t idims[SG_MAX_DIMS], ddims[SG_MAX_DIMS];
  SG_CHECK(sg__ox_shape(c, data, &r, ddims));
  SG_CHECK(sg__ox_axis(c, axis_attr, r, "axis", &axis));
  SG_CHECK(sg__ox_shape(c, idx, &qi, idims));
  if (qi != r)
    return sg__ox_node_error(c, SG_ERR_SHAPE, "indices '%s' has rank %d, data '%s' rank %d; they must agree",
                             idx->name, qi, data->name, r);
  for (int k = 0; k < qi; k++)
    if (k != axis && idims[k] > ddims[k])
      return sg__ox_node_error(c, SG_ERR_SHAPE, "dim %d of indices '%s' is %lld, more than data's %lld", k,
                               idx->name, (long long)idims[k], (long long)ddims[k]);
  int64_t numel = sg__ox_fold_numel(qi, idims);
  if (sg__ox_foldable(idx) && idx->elem == OX_FLOAT)
    return sg__ox_node_error(c, SG_ERR_DTYPE, "indices '%s' holds floats; expected integers", idx->name);
  if (!sg__ox_foldable(data)) {
    int64_t *flat;
    SG_CHECK(sg__ox_fold_alloc(c, numel, sizeof *flat, (void **)&flat));
    SG_CHECK(sg__ox_elements_positions(c, idx, qi, idims, ddims, axis, flat));
    sg_tensor x, y;
    SG_CHECK(sg__ox_tensor(c, data, &x));
    SG_CHECK(sg__ox_remap(c, x, flat, qi, idims, &y));
    return sg__ox_set_tensor(c, 0, y);
  }
  size_t es = sg__ox_elem_size(data->elem);
  char *out;
  if (!sg__ox_foldable(idx)) {
    bool uniform = data->numel > 0;
    for (int64_t i = 1; i < data->numel && uniform; i++)
      uniform = memcmp((const char *)data->data + (size_t)i * es, data->data, es) == 0;
    if (!uniform)
      return sg__ox_node_error(
          c, SG_ERR_UNSUPPORTED,
          "indices '%s' are computed at run time; sgrt folds GatherElements, and runs it "
          "only where every element of data '%s' is one value (or by indices known at import)",
          idx->name, data->name);
    SG_CHECK(sg__ox_fold_alloc(c, numel, es, (void **)&out));
    for (int64_t i = 0; i < numel; i++) memcpy(out + (size_t)i * es, data->data, es);
    return sg__ox_set_const(c, 0, data->elem, qi, idims, out);
  }
  int64_t *flat;
  SG_CHECK(sg__ox_fold_alloc(c, numel, sizeof *flat, (void **)&flat));
  SG_CHECK(sg__ox_elements_positions(c, idx, qi, idims, ddims, axis, flat));
  SG_CHECK(sg__ox_fold_alloc(c, numel, es, (void **)&out));
  for (int64_t i = 0; i < numel; i++)
    memcpy(out + (size_t)i * es, (const char *)data->data + (size_t)flat[i] * es, es);
  return sg__ox_set_const(c, 0, data->elem, qi, idims, out);
}

sg_status sg__ox_cv_gather(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known[] = {"axis", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  ox_value *data = sg__ox_input(c, n, 0), *idx = sg__ox_input(c, n, 1);
  int64_t axis_attr = 0;
  SG_CHECK(sg__ox_attr_int(c, "axis", 0, &axis_attr));
  if (!sg__ox_foldable(data) || !sg__ox_foldable(idx)) {
    if (data->kind == OX_V_UNAVAILABLE) return sg__ox_unavailable(c, data);
    if (idx->kind == OX_V_UNAVAILABLE) return sg__ox_unavailable(c, idx);
    /* A 2-D weight along axis 0 is an embedding table (nn.Embedding, also
     * with constant ids: the position rows); any other tensor gathered by
     * constant indices is sliced. */
    bool table = data->kind == OX_V_CONST && data->ndim == 2 && (axis_attr == 0 || axis_attr == -2);
    if (idx->kind == OX_V_CONST && !table) return gather_slices(c, data, idx, axis_attr);
    return gather_embedding(c, data, idx, axis_attr);
  }
  return fold_gather(c, data, idx, axis_attr);
}

const ox_op sg__ox_gather_ops[] = {
    {"GatherND", cv_gather_nd, 2, 2, 1, 1},
    {"GatherElements", cv_gather_elements, 2, 2, 1, 1},
};
const int sg__ox_n_gather_ops = (int)(sizeof sg__ox_gather_ops / sizeof *sg__ox_gather_ops);
