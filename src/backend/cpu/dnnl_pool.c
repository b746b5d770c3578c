/* max_pool2d, avg_pool2d and their gradients as oneDNN pooling primitives
 * on plain NCHW.
 *
 * PyTorch's window rules map onto oneDNN's as follows: padding is
 * (top, left, bottom, right) = (padding_l, padding_r); with ceil_mode the
 * output has one more window whose end hangs past the bottom/right padding,
 * which becomes a larger padding_r (padded with -inf for max, ignored by the
 * exclude-padding average). count_include_pad maps to
 * pooling_avg_include_padding, whose divisor is always kh*kw; PyTorch
 * instead divides a window that hangs past the padding by the part inside
 * input + padding, so that one case (avg, count_include_pad, a window past
 * the padding) runs the C kernel of cpu_pool.c instead.
 *
 * max_pool2d_backward receives x, not the forward workspace: the kernel runs
 * the forward primitive again with a workspace (both in the workspace, sized at
 * create time) and then the backward primitive. */
#include "backend/cpu/dnnl_common.h"

enum { KERNEL, STRIDE, PADDING, CEIL_MODE, COUNT_INCLUDE_PAD, INPUT_SHAPE };

typedef struct pool_geom {
  dnnl_dim_t x[4], y[4];
  dnnl_dims_t kernel, strides, pad_l, pad_r;
  bool overhang; /* a window ends past the bottom/right padding */
} pool_geom;

static void geom(const sg__op *op, const int64_t *x, const int64_t *y, pool_geom *p) {
  const int64_t *k = sg__attr_ints(op, KERNEL), *s = sg__attr_ints(op, STRIDE),
                *pad = sg__attr_ints(op, PADDING);
  p->overhang = false;
  for (int i = 0; i < 4; i++) {
    p->x[i] = x[i];
    p->y[i] = y[i];
  }
  for (int d = 0; d < 2; d++) {
    p->kernel[d] = k[d];
    p->strides[d] = s[d];
    p->pad_l[d] = pad[d];
    int64_t need = (y[2 + d] - 1) * s[d] + k[d] - x[2 + d] - pad[d];
    p->pad_r[d] = need > pad[2 + d] ? need : pad[2 + d];
    if (need > pad[2 + d]) p->overhang = true;
  }
}

/* xm, ym: the layout the primitive runs in (sg__dk_compute_md). */
static sg_status fwd_pd(sg__dk *k, const pool_geom *p, dnnl_alg_kind_t alg, dnnl_prop_kind_t prop,
                        const dnnl_memory_desc_t *xm, const dnnl_memory_desc_t *ym,
                        dnnl_primitive_desc_t *pd) {
  dnnl_pooling_desc_t d;
  SG_DNNL(k, dnnl_pooling_forward_desc_init(&d, prop, alg, xm, ym, p->strides, p->kernel, p->pad_l, p->pad_r),
          "pooling descriptor");
  SG_DNNL(k, dnnl_primitive_desc_create(pd, &d, k->attr, k->engine, NULL), "pooling forward");
  return SG_OK;
}

static sg_status build(sg__dk *k, const sg_graph *g, const sg__op *op, sg__exec_mode mode) {
  (void)mode;
  bool is_max = op->kind == SG_OP_MAX_POOL2D || op->kind == SG_OP_MAX_POOL2D_BACKWARD;
  bool forward = op->kind == SG_OP_MAX_POOL2D || op->kind == SG_OP_AVG_POOL2D;
  dnnl_alg_kind_t alg = is_max                                   ? dnnl_pooling_max
                        : sg__attr_i(op, COUNT_INCLUDE_PAD) != 0 ? dnnl_pooling_avg_include_padding
                                                                 : dnnl_pooling_avg_exclude_padding;
  pool_geom p;
  const sg__tensor *a = sg__cpu_in(g, op, 0), *y = sg__cpu_out(g, op, 0);
  if (forward) geom(op, a->dims, y->dims, &p);
  else geom(op, y->dims, a->dims, &p); /* dy, [x] -> dx */
  /* The operands as stored: x-shaped (x, dx) and y-shaped (y, dy). */
  int32_t x_t = forward ? op->inputs[0] : op->outputs[0], y_t = forward ? op->outputs[0] : op->inputs[0];
  int32_t x_in = is_max && !forward ? op->inputs[1] : -1;
  dnnl_memory_desc_t xu, yu, xin_u, xm, ym;
  sg__dk_tensor_md(k, g, x_t, 4, p.x, &xu);
  sg__dk_tensor_md(k, g, y_t, 4, p.y, &yu);
  sg__dk_tensor_md(k, g, x_in, 4, p.x, &xin_u);
  /* The primitive runs in the backend's compute layout whatever the
   * operands' storage (sg__dk_compute_md): average pooling sums, and max
   * pooling breaks ties, in a layout's own order. */
  sg__dk_compute_md(k, 4, p.x, &xm);
  sg__dk_compute_md(k, 4, p.y, &ym);
  dnnl_primitive_desc_t fpd, bpd;
  sg_status st = SG_OK;
  if (forward) {
    SG_CHECK(fwd_pd(k, &p, alg, dnnl_forward_inference, &xm, &ym, &fpd));
    int xi, yi;
    SG_CHECK_GOTO(sg__dk_input(k, &xu, &xm, SG__DK_IN(0), &xi), st, ffail);
    SG_CHECK_GOTO(sg__dk_output(k, &yu, &ym, SG__DK_OUT(0), &yi), st, ffail);
    int kinds[] = {DNNL_ARG_SRC, DNNL_ARG_DST};
    int mems[] = {xi, yi};
    SG_CHECK(sg__dk_step_add(k, fpd, 2, kinds, mems));
    return sg__dk_finish(k);
  ffail:
    dnnl_primitive_desc_destroy(fpd);
    return st;
  }
  SG_CHECK(fwd_pd(k, &p, alg, dnnl_forward_training, &xm, &ym, &fpd));
  int wsi = -1, dyi, dxi;
  dnnl_status_t ds;
  if (is_max) {
    /* The forward again, into scratch dst and workspace buffers. */
    const dnnl_memory_desc_t *wsm = dnnl_primitive_desc_query_md(fpd, dnnl_query_workspace_md, 0);
    int xi, yi;
    SG_CHECK_GOTO(sg__dk_input(k, &xin_u, &xm, SG__DK_IN(1), &xi), st, mfail);
    SG_CHECK_GOTO(sg__dk_scratch(k, &ym, &yi), st, mfail);
    SG_CHECK_GOTO(sg__dk_scratch(k, wsm, &wsi), st, mfail);
    dnnl_primitive_desc_t again;
    ds = dnnl_primitive_desc_clone(&again, fpd);
    if (ds != dnnl_success) {
      st = sg__dnnl_fail(k->op, ds, "pooling clone");
      goto mfail;
    }
    int kinds[] = {DNNL_ARG_SRC, DNNL_ARG_DST, DNNL_ARG_WORKSPACE};
    int mems[] = {xi, yi, wsi};
    SG_CHECK_GOTO(sg__dk_step_add(k, again, 3, kinds, mems), st, mfail);
  }
  dnnl_pooling_desc_t bd;
  ds = dnnl_pooling_backward_desc_init(&bd, alg, &xm, &ym, p.strides, p.kernel, p.pad_l, p.pad_r);
  if (ds == dnnl_success) ds = dnnl_primitive_desc_create(&bpd, &bd, k->attr, k->engine, fpd);
  dnnl_primitive_desc_destroy(fpd);
  if (ds != dnnl_success) return sg__dnnl_fail(k->op, ds, "pooling backward");
  SG_CHECK_GOTO(sg__dk_input(k, &yu, &ym, SG__DK_IN(0), &dyi), st, bfail);
  SG_CHECK_GOTO(sg__dk_output(k, &xu, &xm, SG__DK_OUT(0), &dxi), st, bfail);
  {
    int kinds[] = {DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_SRC, DNNL_ARG_WORKSPACE};
    int mems[] = {dyi, dxi, wsi};
    SG_CHECK(sg__dk_step_add(k, bpd, is_max ? 3 : 2, kinds, mems));
    return sg__dk_finish(k);
  }
mfail:
  dnnl_primitive_desc_destroy(fpd);
  return st;
bfail:
  dnnl_primitive_desc_destroy(bpd);
  return st;
}

bool sg__cpu_pool_uses_c(const sg_graph *g, const sg__op *op) {
  if (op->kind != SG_OP_AVG_POOL2D && op->kind != SG_OP_AVG_POOL2D_BACKWARD) return false;
  const sg__tensor *a = sg__cpu_in(g, op, 0), *y = sg__cpu_out(g, op, 0);
  if (a == NULL || y == NULL || a->ndim != 4 || y->ndim != 4) return false;
  pool_geom p;
  if (op->kind == SG_OP_AVG_POOL2D) geom(op, a->dims, y->dims, &p);
  else geom(op, y->dims, a->dims, &p);
  return p.overhang && sg__attr_i(op, COUNT_INCLUDE_PAD) != 0 && a->dtype == SG_F32;
}

sg_status sg__cpu_create_pool(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                              sg__kernel **out) {
  if (sg__cpu_pool_uses_c(g, op)) return sg__cpu_create_pool_c(st, g, op, mode, out);
  return sg__dk_create(st, g, op, mode, sizeof(sg__dk), sg__dk_run, NULL, build, out);
}
