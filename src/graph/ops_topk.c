/* topk: the k largest (or smallest) elements of each row of x along its
 * last axis, in order, and their indices (ONNX TopK, torch.topk: Mixtral's
 * router picks its experts so); and topk_backward, which adds dy into the
 * positions the indices name. Of equal values the lower index comes first,
 * as ONNX specifies (torch.topk leaves ties to its kernel), and NaN ranks
 * above every number, as in torch.topk. */
#include "graph/graph_internal.h"

enum { K, LARGEST };
static const sg__attr_schema topk_attrs[] = {
    [K] = {"k", SG_ATTR_INT, true, 0, 0, 0, {0}, 0, 0, true, 1, INT64_MAX},
    [LARGEST] = {"largest", SG_ATTR_INT, false, 1, 0, 0, {0}, 0, 0, true, 0, 1},
};
static const sg__attr_schema topk_backward_attrs[] = {
    {"n", SG_ATTR_INT, true, 0, 0, 0, {0}, 0, 0, true, 1, INT64_MAX},
};

static sg_status infer_topk(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *x = sg__in(g, op, 0);
  char sx[SG__SHAPE_STR];
  sg__tstr(sx, x);
  if (x->dtype != SG_F32) return sg__op_error(op, SG_ERR_DTYPE, "x %s must be f32", sx);
  if (x->ndim < 1) return sg__op_error(op, SG_ERR_SHAPE, "x %s has no axis to take the top k along", sx);
  int64_t k = sg__attr_i(op, K), n = x->dims[x->ndim - 1];
  if (k > n)
    return sg__op_error(op, SG_ERR_SHAPE, "k %lld is more than the last dim of x %s", (long long)k, sx);
  sg__shape_of(x, &outs[0]);
  outs[0].dims[x->ndim - 1] = k;
  outs[1] = outs[0];
  outs[1].dtype = SG_I64;
  *n_outs = 2;
  return SG_OK;
}

/* Inputs dy and indices (the forward's outputs' shape); output dx, whose last dim is n. */
static sg_status infer_topk_backward(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *dy = sg__in(g, op, 0), *idx = sg__in(g, op, 1);
  char sd[SG__SHAPE_STR], si[SG__SHAPE_STR];
  sg__tstr(sd, dy);
  sg__tstr(si, idx);
  if (dy->dtype != SG_F32 || idx->dtype != SG_I64)
    return sg__op_error(op, SG_ERR_DTYPE, "dy %s must be f32 and indices %s i64", sd, si);
  bool same = dy->ndim == idx->ndim && dy->ndim >= 1;
  for (int i = 0; same && i < dy->ndim; i++) same = dy->dims[i] == idx->dims[i];
  if (!same) return sg__op_error(op, SG_ERR_SHAPE, "dy %s and indices %s must share one shape", sd, si);
  int64_t n = sg__attr_i(op, 0);
  if (dy->dims[dy->ndim - 1] > n)
    return sg__op_error(op, SG_ERR_SHAPE, "dy %s has more than n = %lld elements per row", sd, (long long)n);
  sg__shape_of(dy, &outs[0]);
  outs[0].dims[dy->ndim - 1] = n;
  *n_outs = 1;
  return SG_OK;
}

const sg__op_def sg__def_topk = {SG_OP_TOPK,         "topk", 1,          1,         0, 0,
                                 SG_ROLE_ACTIVATION, 2,      topk_attrs, infer_topk};
const sg__op_def sg__def_topk_backward = {
    SG_OP_TOPK_BACKWARD, "topk_backward",    2, 2, 0, 0, SG_ROLE_ACTIVATION, 1,
    topk_backward_attrs, infer_topk_backward};

sg_tensor sg_topk(sg_graph *g, sg_tensor x, int64_t k, int largest, sg_tensor *indices) {
  sg_attr a[] = {SG__AI("k", k), SG__AI("largest", largest)};
  sg_tensor values = sg__build1(g, SG_OP_TOPK, 1, &x, 2, a);
  if (indices != NULL) {
    *indices = SG_NO_TENSOR;
    if (values.id >= 0) *indices = (sg_tensor){g->ops[g->tensors[values.id].producer].outputs[1]};
  }
  return values;
}
