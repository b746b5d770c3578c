/* conv2d, conv2d_backward_data and conv2d_backward_weight as oneDNN
 * convolution primitives (forward with bias; backward data; backward
 * weights without bias, whose gradient is a separate reduce_sum).
 *
 * Layout decision: the graph's tensors are plain NCHW / KCRS. The primitives
 * are created with format_tag any for src, weights and dst (and their diffs)
 * so that oneDNN picks its fast blocked layouts (nChw8c on AVX2, nChw16c on
 * AVX-512); the kernel then reorders the plain operands into scratch buffers
 * of the chosen layout before the primitive and the result back after it.
 * Where oneDNN picks the plain layout itself no reorder is made. Weights are
 * reordered on every run because the optimizer rewrites them every step.
 * Activations that plan_layouts made blocked (cpu_layout.c) are described
 * as such, so when oneDNN picks that same layout no reorder is made. */
#include "backend/cpu/dnnl_common.h"

enum { STRIDE, PADDING, DILATION, GROUPS, SHAPE_ATTR };

typedef struct conv_geom {
  dnnl_dim_t x[4], w[5], y[4];
  int w_ndims; /* 4, or 5 with groups */
  dnnl_dims_t strides, dilates, pad_l, pad_r;
  dnnl_dim_t bias[1];
  /* The activation tensors (x-shaped and y-shaped) and their graph, for
   * their storage layouts (plain or blocked, cpu_layout.c). */
  const sg_graph *g;
  int32_t x_t, y_t;
} conv_geom;

static void geom(const sg__op *op, const int64_t *x, const int64_t *w, const int64_t *y, conv_geom *c) {
  const int64_t *s = sg__attr_ints(op, STRIDE), *p = sg__attr_ints(op, PADDING),
                *d = sg__attr_ints(op, DILATION);
  int64_t groups = sg__attr_i(op, GROUPS);
  for (int i = 0; i < 4; i++) {
    c->x[i] = x[i];
    c->y[i] = y[i];
  }
  if (groups > 1) {
    c->w_ndims = 5;
    c->w[0] = groups;
    c->w[1] = w[0] / groups;
    for (int i = 1; i < 4; i++) c->w[i + 1] = w[i];
  } else {
    c->w_ndims = 4;
    for (int i = 0; i < 4; i++) c->w[i] = w[i];
  }
  c->strides[0] = s[0];
  c->strides[1] = s[1];
  c->dilates[0] = d[0] - 1; /* oneDNN counts dilation from 0 */
  c->dilates[1] = d[1] - 1;
  c->pad_l[0] = p[0];
  c->pad_l[1] = p[1];
  c->pad_r[0] = p[2];
  c->pad_r[1] = p[3];
  c->bias[0] = w[0];
}

static void any_md(dnnl_memory_desc_t *md, int ndims, const dnnl_dim_t *dims) {
  dnnl_dims_t d = {0}; /* oneDNN reads a whole dnnl_dims_t */
  for (int i = 0; i < ndims; i++) d[i] = dims[i];
  dnnl_status_t s = dnnl_memory_desc_init_by_tag(md, ndims, d, dnnl_f32, dnnl_format_tag_any);
  SG_ASSERT(s == dnnl_success);
}

/* The forward training descriptor every conv kernel starts from (the hint
 * for the backward ones). */
static sg_status fwd_pd(sg__dk *k, const conv_geom *c, bool with_bias, dnnl_primitive_desc_t *pd) {
  dnnl_memory_desc_t xm, wm, ym, bm;
  any_md(&xm, 4, c->x);
  any_md(&wm, c->w_ndims, c->w);
  any_md(&ym, 4, c->y);
  sg__dk_plain_md(&bm, 1, c->bias);
  dnnl_convolution_desc_t d;
  SG_DNNL(k,
          dnnl_dilated_convolution_forward_desc_init(&d, dnnl_forward_training, dnnl_convolution_direct, &xm,
                                                     &wm, with_bias ? &bm : NULL, &ym, c->strides, c->dilates,
                                                     c->pad_l, c->pad_r),
          "convolution descriptor");
  SG_DNNL(k, dnnl_primitive_desc_create(pd, &d, k->attr, k->engine, NULL), "convolution forward");
  return SG_OK;
}

static const dnnl_memory_desc_t *qmd(dnnl_primitive_desc_t pd, dnnl_query_t q) {
  return dnnl_primitive_desc_query_md(pd, q, 0);
}

static sg_status build_forward(sg__dk *k, const conv_geom *c, bool with_bias) {
  dnnl_primitive_desc_t pd;
  SG_CHECK(fwd_pd(k, c, with_bias, &pd));
  dnnl_memory_desc_t xu, wu, yu, bu;
  sg__dk_tensor_md(k, c->g, c->x_t, 4, c->x, &xu);
  sg__dk_plain_md(&wu, c->w_ndims, c->w);
  sg__dk_tensor_md(k, c->g, c->y_t, 4, c->y, &yu);
  sg__dk_plain_md(&bu, 1, c->bias);
  int xi, wi, yi, bi = -1;
  sg_status st = SG_OK;
  SG_CHECK_GOTO(sg__dk_input(k, &xu, qmd(pd, dnnl_query_src_md), SG__DK_IN(0), &xi), st, fail);
  SG_CHECK_GOTO(sg__dk_input(k, &wu, qmd(pd, dnnl_query_weights_md), SG__DK_IN(1), &wi), st, fail);
  if (with_bias) SG_CHECK_GOTO(sg__dk_user(k, &bu, SG__DK_IN(2), &bi), st, fail);
  SG_CHECK_GOTO(sg__dk_output(k, &yu, qmd(pd, dnnl_query_dst_md), SG__DK_OUT(0), &yi), st, fail);
  int kinds[] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS};
  int mems[] = {xi, wi, yi, bi};
  SG_CHECK(sg__dk_step_add(k, pd, with_bias ? 4 : 3, kinds, mems));
  return sg__dk_finish(k);
fail:
  dnnl_primitive_desc_destroy(pd);
  return st;
}

/* Both backward convolutions read dy and one forward operand and write the
 * gradient of the other: data reads w and writes dx, weights reads x and
 * writes dw. The forward primitive descriptor is oneDNN's hint for both. */
static sg_status build_backward(sg__dk *k, const conv_geom *c, bool weights) {
  const char *what = weights ? "convolution backward weights" : "convolution backward data";
  dnnl_primitive_desc_t hint, pd;
  SG_CHECK(fwd_pd(k, c, false, &hint));
  dnnl_memory_desc_t xm, wm, ym;
  any_md(&xm, 4, c->x);
  any_md(&wm, c->w_ndims, c->w);
  any_md(&ym, 4, c->y);
  dnnl_convolution_desc_t d;
  dnnl_status_t ds =
      weights ? dnnl_dilated_convolution_backward_weights_desc_init(&d, dnnl_convolution_direct, &xm, &wm,
                                                                    NULL, &ym, c->strides, c->dilates,
                                                                    c->pad_l, c->pad_r)
              : dnnl_dilated_convolution_backward_data_desc_init(&d, dnnl_convolution_direct, &xm, &wm, &ym,
                                                                 c->strides, c->dilates, c->pad_l, c->pad_r);
  if (ds == dnnl_success) ds = dnnl_primitive_desc_create(&pd, &d, k->attr, k->engine, hint);
  dnnl_primitive_desc_destroy(hint);
  if (ds != dnnl_success) return sg__dnnl_fail(k->op, ds, what);
  dnnl_memory_desc_t xu, wu, yu;
  sg__dk_tensor_md(k, c->g, c->x_t, 4, c->x, &xu);
  sg__dk_plain_md(&wu, c->w_ndims, c->w);
  sg__dk_tensor_md(k, c->g, c->y_t, 4, c->y, &yu);
  /* The operand read (input 1) and the gradient written (output 0). */
  const dnnl_memory_desc_t *read_u = weights ? &xu : &wu, *grad_u = weights ? &wu : &xu;
  dnnl_query_t read_q = weights ? dnnl_query_src_md : dnnl_query_weights_md;
  dnnl_query_t grad_q = weights ? dnnl_query_diff_weights_md : dnnl_query_diff_src_md;
  int yi, ri, gi;
  sg_status st = SG_OK;
  SG_CHECK_GOTO(sg__dk_input(k, &yu, qmd(pd, dnnl_query_diff_dst_md), SG__DK_IN(0), &yi), st, fail);
  SG_CHECK_GOTO(sg__dk_input(k, read_u, qmd(pd, read_q), SG__DK_IN(1), &ri), st, fail);
  SG_CHECK_GOTO(sg__dk_output(k, grad_u, qmd(pd, grad_q), SG__DK_OUT(0), &gi), st, fail);
  int kinds[] = {DNNL_ARG_DIFF_DST, weights ? DNNL_ARG_SRC : DNNL_ARG_WEIGHTS,
                 weights ? DNNL_ARG_DIFF_WEIGHTS : DNNL_ARG_DIFF_SRC};
  int mems[] = {yi, ri, gi};
  SG_CHECK(sg__dk_step_add(k, pd, 3, kinds, mems));
  return sg__dk_finish(k);
fail:
  dnnl_primitive_desc_destroy(pd);
  return st;
}

static sg_status build(sg__dk *k, const sg_graph *g, const sg__op *op, sg__exec_mode mode) {
  (void)mode;
  const sg__tensor *a = sg__cpu_in(g, op, 0), *b = sg__cpu_in(g, op, 1), *y = sg__cpu_out(g, op, 0);
  conv_geom c;
  c.g = g;
  switch (op->kind) {
    case SG_OP_CONV2D: /* x, w, bias -> y */
      geom(op, a->dims, b->dims, y->dims, &c);
      c.x_t = op->inputs[0], c.y_t = op->outputs[0];
      return build_forward(k, &c, sg__cpu_in(g, op, 2) != NULL);
    case SG_OP_CONV2D_BACKWARD_DATA: /* dy, w -> dx */
      geom(op, y->dims, b->dims, a->dims, &c);
      c.x_t = op->outputs[0], c.y_t = op->inputs[0];
      return build_backward(k, &c, false);
    case SG_OP_CONV2D_BACKWARD_WEIGHT: /* dy, x -> dw */
      geom(op, b->dims, y->dims, a->dims, &c);
      c.x_t = op->inputs[1], c.y_t = op->inputs[0];
      return build_backward(k, &c, true);
    default: return sg__cpu_unsupported(g, op, "");
  }
}

sg_status sg__cpu_create_conv(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                              sg__kernel **out) {
  return sg__dk_create(st, g, op, mode, sizeof(sg__dk), sg__dk_run, NULL, build, out);
}
