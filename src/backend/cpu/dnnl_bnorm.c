/* batch_norm and batch_norm_backward as oneDNN batch normalization
 * primitives (flags use_scale | use_shift, plus use_global_stats for the
 * inference form), with small C loops around them.
 *
 * The graph keeps the batch statistics as mean and invstd = 1/sqrt(var+eps)
 * (docs/ops.md; what the backward pass needs), oneDNN works with the biased
 * variance. Forward training: oneDNN writes the mean straight into output 1
 * and the variance into a workspace buffer, from which invstd (output 2)
 * and the running statistics are computed as PyTorch does:
 *   running_mean = (1 - m) running_mean + m mean
 *   running_var  = (1 - m) running_var  + m var n/(n-1)   (unbiased)
 * unless the run context asks for the batch statistics only.
 * Backward training form: var = 1/invstd^2 - eps (in double) into the workspace
 * buffer before the primitive runs.
 *
 * Which statistics: batch statistics when the op is in training form
 * (attribute training = 1) and the kernel is compiled for SG__MODE_TRAIN;
 * running statistics otherwise (outputs 1 and 2 are then left untouched and
 * may be NULL). Layout: a 4-D x in the backend's compute layout (channel
 * blocked where oneDNN blocks, sg__dk_compute_md), its operands reordered
 * where they are stored otherwise; any other rank >= 2 viewed as plain
 * [N, C, prod(spatial), 1]. */
#include <math.h>

#include "backend/cpu/dnnl_common.h"

enum { EPS, MOMENTUM, TRAINING };
enum { BWD_EPS, BWD_TRAINING };

typedef struct bn_kernel {
  sg__dk dk;
  int mode;     /* FWD_BATCH, FWD_RUNNING, BWD_BATCH, BWD_RUNNING */
  int var_mem;  /* [C] variance in the workspace (batch modes) */
  int64_t C, n; /* channels, values per channel */
  double eps, momentum;
} bn_kernel;

enum { FWD_BATCH, FWD_RUNNING, BWD_BATCH, BWD_RUNNING };

static sg_status bn_run(sg__cpu_state *st, sg__kernel *base, void *const *in, void *const *out,
                        const sg__run_ctx *ctx) {
  (void)st;
  bn_kernel *k = (bn_kernel *)base;
  float *var = k->mode == FWD_BATCH || k->mode == BWD_BATCH ? sg__dk_buf(&k->dk, k->var_mem) : NULL;
  if (k->mode == BWD_BATCH) {
    const float *invstd = in[4];
    if (invstd == NULL)
      return sg__error(SG_ERR_INVALID_ARG, "batch_norm_backward '%s': invstd is NULL", base->name);
    for (int64_t c = 0; c < k->C; c++) {
      double is = invstd[c];
      var[c] = (float)(1.0 / (is * is) - k->eps);
    }
  }
  SG_CHECK(sg__dk_bind(&k->dk, in, out));
  SG_CHECK(sg__dk_exec(&k->dk, 0, k->dk.nsteps));
  if (k->mode == FWD_BATCH) {
    float *invstd = out[2], *rm = in[3], *rv = in[4];
    const float *mean = out[1];
    const double m = k->momentum, unbias = (double)k->n / (double)(k->n - 1);
    for (int64_t c = 0; c < k->C; c++) {
      invstd[c] = (float)(1.0 / sqrt((double)var[c] + k->eps));
      if (ctx->batch_stats_only) continue;
      rm[c] = (float)((1.0 - m) * rm[c] + m * mean[c]);
      rv[c] = (float)((1.0 - m) * rv[c] + m * var[c] * unbias);
    }
  }
  return SG_OK;
}

static sg_status build(sg__dk *dk, const sg_graph *g, const sg__op *op, sg__exec_mode mode) {
  bn_kernel *k = (bn_kernel *)dk;
  const int x_in = op->kind == SG_OP_BATCH_NORM ? 0 : 1;
  const sg__tensor *x = sg__cpu_in(g, op, x_in);
  int64_t C = x->dims[1];
  int64_t S = sg__numel(x->ndim - 2, x->dims + 2);
  /* 4-D tensors keep their dims (they may be stored blocked); any other
   * rank is viewed as plain [N, C, spatial, 1]. The primitive runs in the
   * backend's compute layout (sg__dk_compute_md), so that a plain x (a
   * pipeline stage's received activations) gives the bits a blocked one
   * does; an operand stored otherwise is reordered. */
  dnnl_dim_t xd[4] = {x->dims[0], C, S, 1}, cd[1] = {C};
  if (x->ndim == 4) xd[2] = x->dims[2], xd[3] = x->dims[3];
  dnnl_memory_desc_t xm, cm, u_x, u_y, u_dy;
  if (x->ndim == 4) sg__dk_compute_md(dk, 4, xd, &xm);
  else sg__dk_plain_md(&xm, 4, xd);
  sg__dk_tensor_md(dk, g, op->inputs[x_in], 4, xd, &u_x);
  sg__dk_tensor_md(dk, g, op->outputs[0], 4, xd, &u_y); /* y or dx */
  sg__dk_tensor_md(dk, g, op->kind == SG_OP_BATCH_NORM ? -1 : op->inputs[0], 4, xd, &u_dy);
  sg__dk_plain_md(&cm, 1, cd);
  k->C = C;
  k->n = x->dims[0] * S;
  bool forward = op->kind == SG_OP_BATCH_NORM;
  bool training_form = sg__attr_i(op, forward ? TRAINING : BWD_TRAINING) != 0;
  k->eps = sg__attr_f(op, forward ? EPS : BWD_EPS);
  k->momentum = forward ? sg__attr_f(op, MOMENTUM) : 0.0;
  if (forward) k->mode = training_form && mode == SG__MODE_TRAIN ? FWD_BATCH : FWD_RUNNING;
  else k->mode = training_form ? BWD_BATCH : BWD_RUNNING;
  bool batch = k->mode == FWD_BATCH || k->mode == BWD_BATCH;
  if (k->mode == FWD_BATCH && k->n < 2)
    return sg__op_error(op, SG_ERR_SHAPE,
                        "training needs more than one value per channel (x has %lld per channel), as PyTorch",
                        (long long)k->n);
  unsigned flags = dnnl_use_scale | dnnl_use_shift | (batch ? 0u : (unsigned)dnnl_use_global_stats);
  float eps = (float)k->eps;
  dnnl_batch_normalization_desc_t fd;
  dnnl_primitive_desc_t fpd;
  dnnl_prop_kind_t fprop = k->mode == FWD_RUNNING ? dnnl_forward_inference : dnnl_forward_training;
  SG_DNNL(dk, dnnl_batch_normalization_forward_desc_init(&fd, fprop, &xm, eps, flags),
          "batch norm descriptor");
  SG_DNNL(dk, dnnl_primitive_desc_create(&fpd, &fd, dk->attr, dk->engine, NULL), "batch norm forward");
  sg_status st = SG_OK;
  int xi, yi, gi, bi, mi, vi;
  if (forward) {
    SG_CHECK_GOTO(sg__dk_input(dk, &u_x, &xm, SG__DK_IN(0), &xi), st, ffail);
    SG_CHECK_GOTO(sg__dk_output(dk, &u_y, &xm, SG__DK_OUT(0), &yi), st, ffail);
    SG_CHECK_GOTO(sg__dk_user(dk, &cm, SG__DK_IN(1), &gi), st, ffail);
    SG_CHECK_GOTO(sg__dk_user(dk, &cm, SG__DK_IN(2), &bi), st, ffail);
    if (batch) {
      SG_CHECK_GOTO(sg__dk_user(dk, &cm, SG__DK_OUT(1), &mi), st, ffail);
      SG_CHECK_GOTO(sg__dk_scratch(dk, &cm, &vi), st, ffail);
      k->var_mem = vi;
    } else {
      SG_CHECK_GOTO(sg__dk_user(dk, &cm, SG__DK_IN(3), &mi), st, ffail);
      SG_CHECK_GOTO(sg__dk_user(dk, &cm, SG__DK_IN(4), &vi), st, ffail);
    }
    int kinds[] = {DNNL_ARG_SRC,   DNNL_ARG_DST,  DNNL_ARG_SCALE,
                   DNNL_ARG_SHIFT, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE};
    int mems[] = {xi, yi, gi, bi, mi, vi};
    SG_CHECK(sg__dk_step_add(dk, fpd, 6, kinds, mems));
    return sg__dk_finish(dk);
  ffail:
    dnnl_primitive_desc_destroy(fpd);
    return st;
  }
  /* Backward: dy, x, gamma, mean|running_mean, invstd|running_var ->
   * dx, dgamma, dbeta. */
  dnnl_batch_normalization_desc_t bd;
  dnnl_primitive_desc_t bpd;
  dnnl_status_t ds = dnnl_batch_normalization_backward_desc_init(&bd, dnnl_backward, &xm, &xm, eps, flags);
  if (ds == dnnl_success) ds = dnnl_primitive_desc_create(&bpd, &bd, dk->attr, dk->engine, fpd);
  dnnl_primitive_desc_destroy(fpd);
  if (ds != dnnl_success) return sg__dnnl_fail(dk->op, ds, "batch norm backward");
  int dyi, dxi, dgi, dbi;
  SG_CHECK_GOTO(sg__dk_input(dk, &u_dy, &xm, SG__DK_IN(0), &dyi), st, bfail);
  SG_CHECK_GOTO(sg__dk_input(dk, &u_x, &xm, SG__DK_IN(1), &xi), st, bfail);
  SG_CHECK_GOTO(sg__dk_user(dk, &cm, SG__DK_IN(2), &gi), st, bfail);
  SG_CHECK_GOTO(sg__dk_user(dk, &cm, SG__DK_IN(3), &mi), st, bfail);
  if (batch) {
    SG_CHECK_GOTO(sg__dk_scratch(dk, &cm, &vi), st, bfail);
    k->var_mem = vi;
  } else {
    SG_CHECK_GOTO(sg__dk_user(dk, &cm, SG__DK_IN(4), &vi), st, bfail);
  }
  SG_CHECK_GOTO(sg__dk_output(dk, &u_y, &xm, SG__DK_OUT(0), &dxi), st, bfail);
  SG_CHECK_GOTO(sg__dk_user(dk, &cm, SG__DK_OUT(1), &dgi), st, bfail);
  SG_CHECK_GOTO(sg__dk_user(dk, &cm, SG__DK_OUT(2), &dbi), st, bfail);
  {
    /* oneDNN wants a shift argument whenever use_shift is set, although the
     * backward pass never reads it: gamma's memory stands in for beta. */
    int kinds[] = {DNNL_ARG_DIFF_DST,   DNNL_ARG_SRC,        DNNL_ARG_SCALE,
                   DNNL_ARG_MEAN,       DNNL_ARG_VARIANCE,   DNNL_ARG_DIFF_SRC,
                   DNNL_ARG_DIFF_SCALE, DNNL_ARG_DIFF_SHIFT, DNNL_ARG_SHIFT};
    int mems[] = {dyi, xi, gi, mi, vi, dxi, dgi, dbi, gi};
    SG_CHECK(sg__dk_step_add(dk, bpd, 9, kinds, mems));
    return sg__dk_finish(dk);
  }
bfail:
  dnnl_primitive_desc_destroy(bpd);
  return st;
}

sg_status sg__cpu_create_bnorm(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                               sg__kernel **out) {
  return sg__dk_create(st, g, op, mode, sizeof(bn_kernel), bn_run, NULL, build, out);
}
