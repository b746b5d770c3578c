/* softmax, log_softmax and their gradients as oneDNN softmax_v2 primitives
 * (softmax_accurate / softmax_log). The tensor is viewed as a plain
 * [outer, axis, inner] block, which is the same memory for any rank. */
#include "backend/cpu/dnnl_common.h"

static sg_status build(sg__dk *k, const sg_graph *g, const sg__op *op, sg__exec_mode mode) {
  (void)mode;
  const sg__tensor *x = sg__cpu_in(g, op, 0);
  int axis;
  if (!sg__norm_axis(sg__attr_i(op, 0), x->ndim, &axis))
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "axis %lld out of range", (long long)sg__attr_i(op, 0));
  dnnl_dim_t dims[3] = {sg__numel(axis, x->dims), x->dims[axis],
                        sg__numel(x->ndim - axis - 1, x->dims + axis + 1)};
  dnnl_memory_desc_t md;
  sg__dk_plain_md(&md, 3, dims);
  bool log = op->kind == SG_OP_LOG_SOFTMAX || op->kind == SG_OP_LOG_SOFTMAX_BACKWARD;
  bool backward = op->kind == SG_OP_SOFTMAX_BACKWARD || op->kind == SG_OP_LOG_SOFTMAX_BACKWARD;
  dnnl_alg_kind_t alg = log ? dnnl_softmax_log : dnnl_softmax_accurate;
  dnnl_softmax_v2_desc_t fd;
  dnnl_primitive_desc_t fpd;
  SG_DNNL(k,
          dnnl_softmax_v2_forward_desc_init(&fd, backward ? dnnl_forward_training : dnnl_forward_inference,
                                            alg, &md, &md, 1),
          "softmax descriptor");
  SG_DNNL(k, dnnl_primitive_desc_create(&fpd, &fd, k->attr, k->engine, NULL), "softmax forward");
  if (!backward) {
    const int kinds[] = {DNNL_ARG_SRC, DNNL_ARG_DST}; /* x -> y */
    return sg__dk_step_user(k, fpd, &md, 1, kinds);
  }
  dnnl_softmax_v2_desc_t bd;
  dnnl_primitive_desc_t bpd;
  dnnl_status_t ds = dnnl_softmax_v2_backward_desc_init(&bd, alg, &md, &md, &md, 1);
  if (ds == dnnl_success) ds = dnnl_primitive_desc_create(&bpd, &bd, k->attr, k->engine, fpd);
  dnnl_primitive_desc_destroy(fpd);
  if (ds != dnnl_success) return sg__dnnl_fail(k->op, ds, "softmax backward");
  const int kinds[] = {DNNL_ARG_DIFF_DST, DNNL_ARG_DST, DNNL_ARG_DIFF_SRC};
  return sg__dk_step_user(k, bpd, &md, 2, kinds); /* dy, y -> dx */
}

sg_status sg__cpu_create_softmax(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                                 sg__kernel **out) {
  return sg__dk_create(st, g, op, mode, sizeof(sg__dk), sg__dk_run, NULL, build, out);
}
