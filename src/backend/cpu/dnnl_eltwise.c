/* Activations and their gradients as oneDNN eltwise primitives, over the
 * tensor viewed as one flat dim (elementwise ops do not care about shape).
 *
 *   relu            eltwise_relu (alpha 0)
 *   clip            eltwise_clip_v2 (alpha = min, beta = max)
 *   gelu            eltwise_gelu_erf / eltwise_gelu_tanh
 *   sigmoid, tanh   eltwise_logistic, eltwise_tanh
 *   relu/sigmoid/tanh_backward (dy, y)  the *_use_dst_for_bwd variants
 *   clip_backward (dy, x)   clip_v2: dx = dy where min < x < max (hardtanh)
 *   gelu_backward (dy, x)   gelu_erf / gelu_tanh on src
 * oneDNN eltwise works in place, so out[0] may alias in[0] (the in-place
 * input named by sg__op_inplace_input). */
#include "backend/cpu/dnnl_common.h"

static sg_status build(sg__dk *k, const sg_graph *g, const sg__op *op, sg__exec_mode mode) {
  (void)mode;
  const sg__tensor *x = sg__cpu_in(g, op, 0);
  /* Flat over the elements as stored: a blocked tensor's padding channels
   * hold zeros, which every activation here except ones kept plain maps to
   * zero (cpu_layout.c). */
  dnnl_dim_t n = sg__cpu_tensor_flat(k->st, g, op->inputs[0]);
  (void)x;
  dnnl_memory_desc_t md;
  sg__dk_plain_md(&md, 1, &n);
  dnnl_alg_kind_t alg;
  float alpha = 0.0f, beta = 0.0f;
  bool backward = false;
  switch (op->kind) {
    case SG_OP_RELU: alg = dnnl_eltwise_relu; break;
    case SG_OP_SIGMOID: alg = dnnl_eltwise_logistic; break;
    case SG_OP_TANH: alg = dnnl_eltwise_tanh; break;
    case SG_OP_GELU: alg = sg__attr_i(op, 0) ? dnnl_eltwise_gelu_tanh : dnnl_eltwise_gelu_erf; break;
    case SG_OP_CLIP:
      alg = dnnl_eltwise_clip_v2;
      alpha = (float)sg__attr_f(op, 0);
      beta = (float)sg__attr_f(op, 1);
      break;
    case SG_OP_RELU_BACKWARD: alg = dnnl_eltwise_relu_use_dst_for_bwd, backward = true; break;
    case SG_OP_SIGMOID_BACKWARD: alg = dnnl_eltwise_logistic_use_dst_for_bwd, backward = true; break;
    case SG_OP_TANH_BACKWARD: alg = dnnl_eltwise_tanh_use_dst_for_bwd, backward = true; break;
    case SG_OP_GELU_BACKWARD:
      alg = sg__attr_i(op, 0) ? dnnl_eltwise_gelu_tanh : dnnl_eltwise_gelu_erf;
      backward = true;
      break;
    case SG_OP_CLIP_BACKWARD:
      alg = dnnl_eltwise_clip_v2;
      alpha = (float)sg__attr_f(op, 0);
      beta = (float)sg__attr_f(op, 1);
      backward = true;
      break;
    default: return sg__cpu_unsupported(g, op, "");
  }
  dnnl_eltwise_desc_t fd;
  dnnl_primitive_desc_t fpd;
  SG_DNNL(k,
          dnnl_eltwise_forward_desc_init(&fd, backward ? dnnl_forward_training : dnnl_forward_inference, alg,
                                         &md, alpha, beta),
          "eltwise descriptor");
  SG_DNNL(k, dnnl_primitive_desc_create(&fpd, &fd, k->attr, k->engine, NULL), "eltwise forward");
  if (!backward) {
    const int kinds[] = {DNNL_ARG_SRC, DNNL_ARG_DST}; /* x -> y */
    return sg__dk_step_user(k, fpd, &md, 1, kinds);
  }
  /* Backward: inputs (dy, y) for the use_dst variants, (dy, x) otherwise. */
  bool use_dst = alg == dnnl_eltwise_relu_use_dst_for_bwd || alg == dnnl_eltwise_logistic_use_dst_for_bwd ||
                 alg == dnnl_eltwise_tanh_use_dst_for_bwd;
  dnnl_eltwise_desc_t bd;
  dnnl_primitive_desc_t bpd;
  dnnl_status_t ds = dnnl_eltwise_backward_desc_init(&bd, alg, &md, &md, alpha, beta);
  if (ds == dnnl_success) ds = dnnl_primitive_desc_create(&bpd, &bd, k->attr, k->engine, fpd);
  dnnl_primitive_desc_destroy(fpd);
  if (ds != dnnl_success) return sg__dnnl_fail(k->op, ds, "eltwise backward");
  const int kinds[] = {DNNL_ARG_DIFF_DST, use_dst ? DNNL_ARG_DST : DNNL_ARG_SRC, DNNL_ARG_DIFF_SRC};
  return sg__dk_step_user(k, bpd, &md, 2, kinds); /* dy, y or x -> dx */
}

sg_status sg__cpu_create_eltwise(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                                 sg__kernel **out) {
  return sg__dk_create(st, g, op, mode, sizeof(sg__dk), sg__dk_run, NULL, build, out);
}
