/* Pooling: max and average over 2-D windows, and global average pooling. */
#include <stdio.h>

#include "graph/graph_internal.h"

enum { KERNEL, STRIDE, PADDING, CEIL_MODE, COUNT_INCLUDE_PAD };
static const sg__attr_schema pool_attrs[] = {SG__POOL2D_ATTR_SCHEMA};

/* PyTorch's rule: with ceil_mode the last window must start inside the input
 * or its leading padding, otherwise it is dropped. */
static int64_t pool_out_dim(int64_t in, int64_t pad_lo, int64_t pad_hi, int64_t k, int64_t s,
                            bool ceil_mode) {
  /* kernel, stride <= 2^30, pads <= kernel / 2 and dims <= 2^56 were
   * checked: no overflow. */
  int64_t span = in + pad_lo + pad_hi - k;
  if (span < 0) return 0;
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (out - 1) * s >= in + pad_lo) out--;
  return out;
}

sg_status sg__pool2d_window(const sg__op *op, bool avg, const int64_t *x, const char *xdesc, int64_t *oh,
                            int64_t *ow) {
  const int64_t *k = sg__attr_ints(op, KERNEL), *s = sg__attr_ints(op, STRIDE),
                *pad = sg__attr_ints(op, PADDING);
  int64_t ceil_mode = sg__attr_i(op, CEIL_MODE);
  if (k[0] < 1 || k[1] < 1 || s[0] < 1 || s[1] < 1 || k[0] > SG__MAX_ATTR_DIM || k[1] > SG__MAX_ATTR_DIM ||
      s[0] > SG__MAX_ATTR_DIM || s[1] > SG__MAX_ATTR_DIM)
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "kernel (%lld,%lld) and stride (%lld,%lld) must be in 1..2^30",
                        (long long)k[0], (long long)k[1], (long long)s[0], (long long)s[1]);
  for (int i = 0; i < 4; i++)
    if (pad[i] < 0 || pad[i] > k[i % 2] / 2)
      return sg__op_error(op, SG_ERR_ATTRIBUTE, "padding[%d] is %lld; must be in 0..%lld (half the kernel)",
                          i, (long long)pad[i], (long long)(k[i % 2] / 2));
  if (ceil_mode != 0 && ceil_mode != 1)
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "ceil_mode is %lld; must be 0 or 1", (long long)ceil_mode);
  if (avg) {
    int64_t cip = sg__attr_i(op, COUNT_INCLUDE_PAD);
    if (cip != 0 && cip != 1)
      return sg__op_error(op, SG_ERR_ATTRIBUTE, "count_include_pad is %lld; must be 0 or 1", (long long)cip);
  }
  *oh = pool_out_dim(x[2], pad[0], pad[2], k[0], s[0], ceil_mode);
  *ow = pool_out_dim(x[3], pad[1], pad[3], k[1], s[1], ceil_mode);
  if (*oh < 1 || *ow < 1)
    return sg__op_error(op, SG_ERR_SHAPE, "kernel (%lld,%lld) is larger than padded %s", (long long)k[0],
                        (long long)k[1], xdesc);
  return SG_OK;
}

static sg_status infer_pool2d(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *x = sg__in(g, op, 0);
  char sx[SG__SHAPE_STR], xdesc[SG__SHAPE_STR + 16];
  sg__tstr(sx, x);
  if (!sg__is_float(x->dtype)) return sg__op_error(op, SG_ERR_DTYPE, "input x %s must be a float type", sx);
  if (x->ndim != 4) return sg__op_error(op, SG_ERR_SHAPE, "input x %s must be 4-D [N,C,H,W]", sx);
  snprintf(xdesc, sizeof xdesc, "input x %s", sx);
  int64_t oh, ow;
  SG_CHECK(sg__pool2d_window(op, op->kind == SG_OP_AVG_POOL2D, x->dims, xdesc, &oh, &ow));
  outs[0] = (sg__shape){x->dtype, 4, {x->dims[0], x->dims[1], oh, ow}};
  *n_outs = 1;
  return SG_OK;
}

const sg__op_def sg__def_max_pool2d = {SG_OP_MAX_POOL2D, "max_pool2d", 1, 1, 0, 0, SG_ROLE_ACTIVATION, 4,
                                       pool_attrs,       infer_pool2d};
const sg__op_def sg__def_avg_pool2d = {SG_OP_AVG_POOL2D, "avg_pool2d", 1, 1, 0, 0, SG_ROLE_ACTIVATION, 5,
                                       pool_attrs,       infer_pool2d};

sg_pool2d_params sg_pool2d_params_init(void) { return (sg_pool2d_params)SG_POOL2D_PARAMS_INIT; }

static sg_tensor pool2d(sg_graph *g, sg_op_kind kind, sg_tensor x, const sg_pool2d_params *p) {
  sg_pool2d_params d = SG_POOL2D_PARAMS_INIT;
  if (sg__graph_params(g, kind == SG_OP_MAX_POOL2D ? "sg_max_pool2d" : "sg_avg_pool2d",
                       SG__VERSIONED(sg_pool2d_params, kernel, "SG_POOL2D_PARAMS_INIT"), &d, p) != SG_OK)
    return SG_NO_TENSOR;
  p = &d;
  /* A zero stride means "same as the kernel", PyTorch's default. */
  int64_t stride[2] = {p->stride[0] ? p->stride[0] : p->kernel[0],
                       p->stride[1] ? p->stride[1] : p->kernel[1]};
  sg_attr attrs[] = {SG__AS("kernel", 2, p->kernel), SG__AS("stride", 2, stride),
                     SG__AS("padding", 4, p->padding), SG__AI("ceil_mode", p->ceil_mode),
                     SG__AI("count_include_pad", p->count_include_pad)};
  return sg__build1(g, kind, 1, &x, kind == SG_OP_AVG_POOL2D ? 5 : 4, attrs);
}

sg_tensor sg_max_pool2d(sg_graph *g, sg_tensor x, const sg_pool2d_params *p) {
  return pool2d(g, SG_OP_MAX_POOL2D, x, p);
}
sg_tensor sg_avg_pool2d(sg_graph *g, sg_tensor x, const sg_pool2d_params *p) {
  return pool2d(g, SG_OP_AVG_POOL2D, x, p);
}

static sg_status infer_global_avg_pool(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *x = sg__in(g, op, 0);
  char sx[SG__SHAPE_STR];
  sg__tstr(sx, x);
  if (!sg__is_float(x->dtype)) return sg__op_error(op, SG_ERR_DTYPE, "input x %s must be a float type", sx);
  if (x->ndim < 3)
    return sg__op_error(op, SG_ERR_SHAPE, "input x %s must be [N,C,spatial...] with >= 1 spatial dim", sx);
  sg__shape_of(x, &outs[0]);
  for (int i = 2; i < x->ndim; i++) outs[0].dims[i] = 1;
  *n_outs = 1;
  return SG_OK;
}

const sg__op_def sg__def_global_avg_pool = {
    SG_OP_GLOBAL_AVG_POOL, "global_avg_pool", 1, 1, 0, 0, SG_ROLE_ACTIVATION, 0, NULL, infer_global_avg_pool};

sg_tensor sg_global_avg_pool(sg_graph *g, sg_tensor x) {
  return sg__build1(g, SG_OP_GLOBAL_AVG_POOL, 1, &x, 0, NULL);
}
