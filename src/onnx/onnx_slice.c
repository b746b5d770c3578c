/* Slice and Split: folded for constants, as the other shape ops
 * (onnx_fold.c); of a tensor computed at run time (attention's
 * q, k and v; GPT-J's x[..., ::2]) one sg_slice per axis cut, a strided
 * range as slices and views, and a reversal (a negative step) as one
 * embedding lookup of the elements (onnx_remap.c). */
#include <stdio.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* What a Slice, or one output of a Split, takes from its data along each
 * axis: `count` elements from `first`, `step` apart (ONNX's clamping done). */
typedef struct slice_plan {
  int ndim;
  int64_t in[SG_MAX_DIMS]; /* the data's dims */
  int64_t first[SG_MAX_DIMS], step[SG_MAX_DIMS], count[SG_MAX_DIMS];
} slice_plan;

/* Every axis whole. */
static sg_status plan_whole(ox_ctx *c, const ox_value *data, slice_plan *p) {
  SG_CHECK(sg__ox_shape(c, data, &p->ndim, p->in));
  for (int a = 0; a < p->ndim; a++) {
    p->first[a] = 0;
    p->step[a] = 1;
    p->count[a] = p->in[a];
  }
  return SG_OK;
}

/* Axis ax from start s to end e (exclusive) by step st (not 0, not
 * INT64_MIN), as ONNX reads them: negative indices count from the end, and
 * out-of-range ones are clamped to the dim (an end to -1 for a negative
 * step, so that the range can include index 0). */
static void plan_axis(slice_plan *p, int ax, int64_t s, int64_t e, int64_t st) {
  int64_t d = p->in[ax];
  if (s < 0) s = s < -d ? 0 : s + d;
  if (e < 0) e = e < -d ? -1 : e + d;
  if (st > 0) {
    s = s < 0 ? 0 : s > d ? d : s;
    e = e < 0 ? 0 : e > d ? d : e;
    p->count[ax] = e > s ? (e - s - 1) / st + 1 : 0; /* no overflow for a huge step */
  } else {
    s = s < 0 ? 0 : s > d - 1 ? d - 1 : s;
    e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
    p->count[ax] = s > e ? (s - e - 1) / -st + 1 : 0;
  }
  p->first[ax] = s;
  p->step[ax] = st;
}

/* Slice's starts, ends, axes and steps (attributes before opset 10, inputs
 * from 10, which must be import-time constants) applied to the data's shape. */
static sg_status plan_slice(ox_ctx *c, const Onnx__NodeProto *n, const ox_value *data, slice_plan *p) {
  SG_CHECK(plan_whole(c, data, p));
  int64_t starts[SG_MAX_DIMS], ends[SG_MAX_DIMS], axes[SG_MAX_DIMS], steps[SG_MAX_DIMS];
  int ns = 0, ne = 0, na = 0, nst = 0;
  if (c->opset < 10) {
    SG_CHECK(sg__ox_attr_ints(c, "starts", SG_MAX_DIMS, starts, &ns));
    SG_CHECK(sg__ox_attr_ints(c, "ends", SG_MAX_DIMS, ends, &ne));
    SG_CHECK(sg__ox_attr_ints(c, "axes", SG_MAX_DIMS, axes, &na));
    if (sg__ox_attr(c, "starts") == NULL || sg__ox_attr(c, "ends") == NULL)
      return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "needs attributes 'starts' and 'ends'");
  } else {
    ox_value *vs = sg__ox_input(c, n, 1), *ve = sg__ox_input(c, n, 2), *va = sg__ox_input(c, n, 3),
             *vst = sg__ox_input(c, n, 4);
    if (vs == NULL || ve == NULL)
      return sg__ox_node_error(c, SG_ERR_ARITY, "needs inputs 'starts' and 'ends'");
    SG_CHECK(sg__ox_const_ints(c, vs, "starts", SG_MAX_DIMS, starts, &ns));
    SG_CHECK(sg__ox_const_ints(c, ve, "ends", SG_MAX_DIMS, ends, &ne));
    if (va) SG_CHECK(sg__ox_const_ints(c, va, "axes", SG_MAX_DIMS, axes, &na));
    if (vst) SG_CHECK(sg__ox_const_ints(c, vst, "steps", SG_MAX_DIMS, steps, &nst));
  }
  if (ne != ns || (na && na != ns) || (nst && nst != ns))
    return sg__ox_node_error(
        c, SG_ERR_SHAPE, "starts, ends, axes and steps differ in length (%d, %d, %d, %d)", ns, ne, na, nst);
  bool seen[SG_MAX_DIMS] = {false};
  for (int k = 0; k < ns; k++) {
    int ax = 0;
    SG_CHECK(sg__ox_axis(c, na ? axes[k] : k, p->ndim, "axis", &ax));
    if (seen[ax]) return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "axis %d is sliced twice", ax);
    seen[ax] = true;
    int64_t st = nst ? steps[k] : 1;
    if (st == 0 || st == INT64_MIN)
      return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "step of axis %d is %lld", ax, (long long)st);
    plan_axis(p, ax, starts[k], ends[k], st);
  }
  return SG_OK;
}

/* Output k is the plan applied to a constant, at import time (the constant
 * itself when the plan keeps every axis whole: a causal-mask buffer sliced
 * to its full context is not copied). */
static sg_status fold_slice(ox_ctx *c, int k, const ox_value *data, const slice_plan *p) {
  int r = p->ndim;
  bool whole = true;
  for (int a = 0; a < r; a++) whole = whole && p->step[a] == 1 && p->count[a] == p->in[a];
  if (whole) return sg__ox_set_alias(c, k, data);
  int64_t numel = sg__ox_fold_numel(r, p->count), in_st[SG_MAX_DIMS], idx[SG_MAX_DIMS] = {0};
  sg__ox_strides(r, p->in, in_st);
  size_t es = sg__ox_elem_size(data->elem);
  char *out;
  SG_CHECK(sg__ox_fold_alloc(c, numel, es, (void **)&out));
  for (int64_t i = 0; i < numel; i++) {
    int64_t off = 0;
    for (int a = 0; a < r; a++) off += (p->first[a] + idx[a] * p->step[a]) * in_st[a];
    memcpy(out + (size_t)i * es, (const char *)data->data + (size_t)off * es, es);
    for (int a = r - 1; a >= 0 && ++idx[a] == p->count[a]; a--) idx[a] = 0;
  }
  return sg__ox_set_const(c, k, data->elem, r, p->count, out);
}

/* `count` elements of t along `axis` from `first`, `step` (> 1) apart (x[..., first::step] of GPT-J's
 * rotate_every_two, Swin's patch merging): the range [first, first + count * step) reshaped to
 * [count, step] along the axis and its column 0 taken, so only slices and views. When that range runs
 * past the dim (the last element is nearer its end than a whole step), the last element is a slice of
 * its own, concatenated. */
static sg_status strided_slice(ox_ctx *c, sg_tensor *t, int axis, int64_t first, int64_t count,
                               int64_t step) {
  sg_graph *g = c->g;
  sg_tensor_info ti;
  SG_CHECK(sg_graph_tensor_info(g, *t, &ti));
  int64_t whole = count;                                       /* elements taken by whole steps */
  if (first + count * step > ti.dims[axis]) whole = count - 1; /* no overflow: count * step < 2 dims */
  sg_tensor parts[2];
  int n = 0;
  if (whole > 0) {
    sg_tensor x = sg_slice(g, *t, axis, first, whole * step);
    int64_t dims[SG_MAX_DIMS + 1];
    int r = 0;
    for (int d = 0; d < ti.ndim; d++) {
      if (d != axis) {
        dims[r++] = ti.dims[d];
        continue;
      }
      dims[r++] = whole;
      dims[r++] = step;
    }
    x = sg_slice(g, sg_reshape(g, x, r, dims), axis + 1, 0, 1);
    dims[axis + 1] = 1;
    memmove(dims + axis + 1, dims + axis + 2, sizeof(int64_t) * (size_t)(r - axis - 2));
    parts[n++] = sg_reshape(g, x, r - 1, dims);
  }
  if (whole < count) parts[n++] = sg_slice(g, *t, axis, first + whole * step, 1);
  *t = n == 1 ? parts[0] : sg_concat(g, n, parts, axis);
  return sg__ox_built(c, *t);
}

/* Output k is the plan applied to a tensor computed at run time (or a
 * weight): one sg_slice per axis it cuts (strided_slice for a step above 1),
 * none when it cuts nothing (the output is then the data itself). A
 * negative step (a reversal: torch.flip, x[::-1] of the TorchScript
 * exporter) moves each element to its place (onnx_remap.c). An empty
 * result has no run-time form but Concat's. */
static sg_status slice_tensor(ox_ctx *c, int k, ox_value *data, const slice_plan *p) {
  char sd[256];
  sg__onnx_dims_text(sd, sizeof sd, p->ndim, p->in);
  bool reverses = false;
  for (int a = 0; a < p->ndim; a++) {
    reverses = reverses || (p->step[a] < 0 && p->count[a] > 1);
    if (p->step[a] > 1 && p->ndim == SG_MAX_DIMS && p->count[a] > 1)
      return sg__ox_node_error(c, SG_ERR_UNSUPPORTED,
                               "step %lld along axis %d of '%s' %s: a strided slice of a tensor of rank %d "
                               "needs one more dim than sgrt has",
                               (long long)p->step[a], a, data->name, sd, SG_MAX_DIMS);
    if (p->count[a] == 0) { /* for a Concat to drop; any other use is refused with this */
      char why[512];
      snprintf(why, sizeof why,
               "it is empty (node '%s' (Slice) takes nothing along axis %d of '%s' %s), and sgrt has no "
               "empty tensors (only Concat leaves one out)",
               sg__ox_str(c->node->name), a, data->name, sd);
      const char *kept = sg__arena_strdup(&c->tmp, why);
      if (kept == NULL) return sg__error(SG_ERR_NO_MEMORY, "ONNX import: out of memory");
      return sg__ox_set_empty(c, k, p->ndim, p->count, kept);
    }
  }
  sg_tensor t, x;
  bool was_bool;
  SG_CHECK(sg__ox_tensor(c, data, &x));
  if (reverses) {
    int64_t numel = sg__ox_fold_numel(p->ndim, p->count), in_st[SG_MAX_DIMS], idx[SG_MAX_DIMS] = {0}, *pos;
    sg__ox_strides(p->ndim, p->in, in_st);
    SG_CHECK(sg__ox_fold_alloc(c, numel, sizeof *pos, (void **)&pos));
    for (int64_t i = 0; i < numel; i++) {
      pos[i] = 0;
      for (int a = 0; a < p->ndim; a++) pos[i] += (p->first[a] + idx[a] * p->step[a]) * in_st[a];
      for (int a = p->ndim - 1; a >= 0 && ++idx[a] == p->count[a]; a--) idx[a] = 0;
    }
    SG_CHECK(sg__ox_remap(c, x, pos, p->ndim, p->count, &t));
    return sg__ox_set_tensor(c, k, t);
  }
  t = x;
  SG_CHECK(sg__ox_bool_in(c, &t, &was_bool));
  bool cut = false;
  for (int a = 0; a < p->ndim; a++) {
    if (p->count[a] == p->in[a]) continue; /* whole: a step above 1 then takes one element */
    cut = true;
    if (p->step[a] > 1 && p->count[a] > 1) {
      SG_CHECK(strided_slice(c, &t, a, p->first[a], p->count[a], p->step[a]));
      continue;
    }
    t = sg_slice(c->g, t, a, p->first[a], p->count[a]);
    SG_CHECK(sg__ox_built(c, t));
  }
  if (!cut) return sg__ox_set_tensor(c, k, x);
  SG_CHECK(sg__ox_bool_out(c, &t, was_bool));
  return sg__ox_set_tensor(c, k, t);
}

static sg_status cv_slice(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known_old[] = {"starts", "ends", "axes", NULL};
  static const char *const known_new[] = {NULL};
  SG_CHECK(sg__ox_check_attrs(c, c->opset < 10 ? known_old : known_new));
  ox_value *data = sg__ox_input(c, n, 0);
  slice_plan p;
  SG_CHECK(plan_slice(c, n, data, &p));
  return sg__ox_foldable(data) ? fold_slice(c, 0, data, &p) : slice_tensor(c, 0, data, &p);
}

/* Checks the sizes of a given split (the `split` attribute before opset
 * 13, the input from 13): one per output, each >= 1, adding up to the dim. */
static sg_status check_split(ox_ctx *c, const int64_t *sizes, int ns, int outs, int64_t d) {
  if (ns != outs) return sg__ox_node_error(c, SG_ERR_SHAPE, "split has %d sizes for %d outputs", ns, outs);
  int64_t sum = 0;
  for (int i = 0; i < ns; i++) {
    if (sizes[i] < 0 || sizes[i] > d)
      return sg__ox_node_error(c, SG_ERR_SHAPE, "split size %d is %lld; the axis has %lld", i,
                               (long long)sizes[i], (long long)d);
    if (sizes[i] == 0)
      return sg__ox_node_error(c, SG_ERR_UNSUPPORTED, "split size %d is 0; sgrt has no empty tensors", i);
    sum += sizes[i]; /* at most 4096 sizes of at most 2^56 */
  }
  if (sum != d)
    return sg__ox_node_error(c, SG_ERR_SHAPE, "split sizes add up to %lld; the axis has %lld", (long long)sum,
                             (long long)d);
  return SG_OK;
}

/* Split's sizes along an axis of dim d: as given, else the dim in equal
 * parts, one per output; with opset 18's num_outputs, parts of
 * ceil(d / num_outputs) with a smaller last one. */
static sg_status split_sizes(ox_ctx *c, const Onnx__NodeProto *n, int64_t d, int64_t *sizes) {
  int outs = (int)n->n_output, ns = 0;
  ox_value *v = sg__ox_input(c, n, 1);
  if (c->opset < 13 && v)
    return sg__ox_node_error(c, SG_ERR_ARITY, "has input 'split'; before opset 13 it is an attribute");
  if (c->opset < 13 && sg__ox_attr(c, "split")) {
    SG_CHECK(sg__ox_attr_ints(c, "split", SG__MAX_OP_IO, sizes, &ns));
    return check_split(c, sizes, ns, outs, d);
  }
  if (v) {
    SG_CHECK(sg__ox_const_ints(c, v, "split", SG__MAX_OP_IO, sizes, &ns));
    return check_split(c, sizes, ns, outs, d);
  }
  int64_t parts = outs, chunk;
  SG_CHECK(sg__ox_attr_int(c, "num_outputs", outs, &parts));
  if (parts != outs)
    return sg__ox_node_error(c, SG_ERR_ARITY, "num_outputs is %lld but the node has %d outputs",
                             (long long)parts, outs);
  if (c->opset < 18 && d % outs != 0)
    return sg__ox_node_error(c, SG_ERR_SHAPE, "cannot split an axis of %lld into %d equal parts",
                             (long long)d, outs);
  chunk = (d + outs - 1) / outs;
  for (int i = 0; i < outs; i++) {
    sizes[i] = d - chunk * i < chunk ? d - chunk * i : chunk;
    if (sizes[i] < 1)
      return sg__ox_node_error(c, SG_ERR_UNSUPPORTED,
                               "an axis of %lld in %d parts leaves part %d empty; sgrt has no empty tensors",
                               (long long)d, outs, i);
  }
  return SG_OK;
}

/* Split: each output a Slice along the axis, folded for a constant, an
 * sg_slice for a tensor (attention's q, k and v from one projection). */
static sg_status cv_split(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known_old[] = {"axis", "split", NULL};
  static const char *const known_13[] = {"axis", NULL};
  static const char *const known_18[] = {"axis", "num_outputs", NULL};
  SG_CHECK(sg__ox_check_attrs(c, c->opset < 13 ? known_old : c->opset < 18 ? known_13 : known_18));
  ox_value *data = sg__ox_input(c, n, 0);
  slice_plan p;
  SG_CHECK(plan_whole(c, data, &p));
  int64_t axis_attr = 0;
  int axis = 0;
  SG_CHECK(sg__ox_attr_int(c, "axis", 0, &axis_attr));
  SG_CHECK(sg__ox_axis(c, axis_attr, p.ndim, "axis", &axis));
  /* Room for as many sizes as a node may list, so that a wrong count is
   * reported as such. */
  int64_t *sizes = sg__arena_alloc(&c->tmp, sizeof(int64_t) * SG__MAX_OP_IO, 8);
  if (sizes == NULL) return sg__ox_node_error(c, SG_ERR_NO_MEMORY, "out of memory");
  SG_CHECK(split_sizes(c, n, p.in[axis], sizes));
  bool fold = sg__ox_foldable(data);
  int64_t off = 0;
  for (int k = 0; k < (int)n->n_output; off += sizes[k++]) {
    p.first[axis] = off;
    p.count[axis] = sizes[k];
    SG_CHECK(fold ? fold_slice(c, k, data, &p) : slice_tensor(c, k, data, &p));
  }
  return SG_OK;
}

sg_status sg__ox_take_range(ox_ctx *c, int k, ox_value *data, int axis, int64_t first, int64_t count,
                            bool squeeze) {
  slice_plan p;
  SG_CHECK(plan_whole(c, data, &p));
  p.first[axis] = first;
  p.count[axis] = count;
  SG_CHECK(sg__ox_foldable(data) ? fold_slice(c, k, data, &p) : slice_tensor(c, k, data, &p));
  if (!squeeze) return SG_OK;
  ox_value *y = sg__ox_find(c, c->node->output[k]);
  if (y == NULL) return SG_OK; /* an unused output */
  int64_t dims[SG_MAX_DIMS];
  int nd = 0;
  for (int a = 0; a < p.ndim; a++)
    if (a != axis) dims[nd++] = p.count[a];
  if (sg__ox_foldable(y)) return sg__ox_set_const(c, k, y->elem, nd, dims, y->data);
  sg_tensor t;
  SG_CHECK(sg__ox_reshape(c, y, nd, dims, &t));
  return sg__ox_set_tensor(c, k, t);
}

const ox_op sg__ox_slice_ops[] = {
    {"Slice", cv_slice, 1, 5, 1, 1},
    {"Split", cv_split, 1, 2, 1, SG__MAX_OP_IO},
};
const int sg__ox_n_slice_ops = (int)(sizeof sg__ox_slice_ops / sizeof *sg__ox_slice_ops);
