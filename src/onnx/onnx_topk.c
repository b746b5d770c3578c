/* TopK: the `topk` op along the last axis; another axis is transposed last
 * and back (both outputs). Mixtral's router picks its experts with it; the
 * experts' weights are then gathered by the indices (GatherND / Gather of a
 * weight by run-time indices: onnx_gather.c). `sorted` 0 leaves the order
 * to the implementation, which sorts anyway; K must be known at import. */
#include "onnx/onnx_internal.h"

static sg_status cv_topk(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known_old[] = {"axis", "k", NULL};
  static const char *const known[] = {"axis", "largest", "sorted", NULL};
  SG_CHECK(sg__ox_check_attrs(c, c->opset < 10 ? known_old : known));
  ox_value *x = sg__ox_input(c, n, 0);
  if (x->kind == OX_V_UNAVAILABLE) return sg__ox_unavailable(c, x);
  int64_t k = 0, axis_attr = -1, largest = 1;
  if (c->opset < 10) {
    if (sg__ox_attr(c, "k") == NULL) return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "needs attribute 'k'");
    SG_CHECK(sg__ox_attr_int(c, "k", 0, &k));
  } else {
    ox_value *kv = sg__ox_input(c, n, 1);
    if (kv == NULL) return sg__ox_node_error(c, SG_ERR_ARITY, "needs input 'K'");
    int nk;
    SG_CHECK(sg__ox_const_ints(c, kv, "K", 1, &k, &nk));
    if (nk != 1)
      return sg__ox_node_error(c, SG_ERR_SHAPE, "K '%s' holds %d values; expected 1", kv->name, nk);
    SG_CHECK(sg__ox_attr_int(c, "largest", 1, &largest));
  }
  SG_CHECK(sg__ox_attr_int(c, "axis", -1, &axis_attr));
  if (largest != 0 && largest != 1)
    return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "largest is %lld; expected 0 or 1", (long long)largest);
  if (sg__ox_elem_of(c, x) != OX_FLOAT)
    return sg__ox_node_error(c, SG_ERR_DTYPE, "input '%s' must be float; sgrt's topk takes f32", x->name);
  int r, axis;
  int64_t dims[SG_MAX_DIMS];
  SG_CHECK(sg__ox_shape(c, x, &r, dims));
  if (r < 1) return sg__ox_node_error(c, SG_ERR_SHAPE, "input '%s' is a scalar", x->name);
  SG_CHECK(sg__ox_axis(c, axis_attr, r, "axis", &axis));
  if (k < 1 || k > dims[axis])
    return sg__ox_node_error(c, SG_ERR_SHAPE, "K is %lld for a dim of %lld along axis %d of '%s'",
                             (long long)k, (long long)dims[axis], axis, x->name);
  sg_tensor t, idx;
  SG_CHECK(sg__ox_tensor(c, x, &t));
  int64_t perm[SG_MAX_DIMS];
  for (int i = 0; i < r; i++) perm[i] = i;
  perm[axis] = r - 1, perm[r - 1] = axis; /* a swap: its own inverse */
  if (axis != r - 1) t = sg_transpose(c->g, t, r, perm);
  sg_tensor v = sg_topk(c->g, t, k, (int)largest, &idx);
  if (axis != r - 1) {
    v = sg_transpose(c->g, v, r, perm);
    idx = sg_transpose(c->g, idx, r, perm);
  }
  SG_CHECK(sg__ox_built(c, v));
  SG_CHECK(sg__ox_built(c, idx));
  SG_CHECK(sg__ox_set_tensor(c, 0, v));
  return sg__ox_has_output(c, 1) ? sg__ox_set_tensor(c, 1, idx) : SG_OK;
}

const ox_op sg__ox_topk_ops[] = {
    {"TopK", cv_topk, 1, 2, 1, 2},
};
const int sg__ox_n_topk_ops = (int)(sizeof sg__ox_topk_ops / sizeof *sg__ox_topk_ops);
