/* conv2d: NCHW input, [K, C/groups, R, S] weight, optional [K] bias. */
#include <stdio.h>

#include "graph/graph_internal.h"

enum { STRIDE, PADDING, DILATION, GROUPS };
static const sg__attr_schema conv_attrs[] = {SG__CONV2D_ATTR_SCHEMA};

/* Output size of one spatial dim; the window must fit the padded input. */
int64_t sg__conv_out_dim(int64_t in, int64_t pad_lo, int64_t pad_hi, int64_t k, int64_t stride, int64_t dil) {
  /* Attributes may come from a file: every step is overflow-checked. */
  int64_t span, padded;
  if (__builtin_mul_overflow(dil, k - 1, &span) || __builtin_add_overflow(span, 1, &span) ||
      __builtin_add_overflow(in, pad_lo, &padded) || __builtin_add_overflow(padded, pad_hi, &padded) ||
      padded < span)
    return 0;
  return (padded - span) / stride + 1;
}

sg_status sg__conv2d_window(const sg__op *op, const int64_t *x, const char *xdesc, const int64_t *w,
                            const char *wdesc, int64_t y[4]) {
  const int64_t *st = sg__attr_ints(op, STRIDE), *pad = sg__attr_ints(op, PADDING);
  const int64_t *dil = sg__attr_ints(op, DILATION);
  int64_t groups = sg__attr_i(op, GROUPS);
  /* The schema bounds these (sg__attr_check_bounds); checked again because
   * the arithmetic below relies on them. */
  for (int i = 0; i < 2; i++)
    if (st[i] < 1 || st[i] > SG__MAX_ATTR_DIM || dil[i] < 1 || dil[i] > SG__MAX_ATTR_DIM || groups < 1 ||
        groups > SG__MAX_ATTR_DIM)
      return sg__op_error(
          op, SG_ERR_ATTRIBUTE, "stride (%lld,%lld), dilation (%lld,%lld) and groups %lld must be in 1..2^30",
          (long long)st[0], (long long)st[1], (long long)dil[0], (long long)dil[1], (long long)groups);
  for (int i = 0; i < 4; i++)
    if (pad[i] < 0 || pad[i] > SG__MAX_ATTR_DIM)
      return sg__op_error(op, SG_ERR_ATTRIBUTE, "padding[%d] is %lld; must be in 0..2^30", i,
                          (long long)pad[i]);
  if (x[1] % groups != 0 || w[0] % groups != 0)
    return sg__op_error(op, SG_ERR_SHAPE,
                        "groups %lld must divide the input channels of %s and output channels of %s",
                        (long long)groups, xdesc, wdesc);
  if (w[1] * groups != x[1])
    return sg__op_error(
        op, SG_ERR_SHAPE, "%s has %lld channels but %s expects %lld (C/groups = %lld, groups = %lld)", xdesc,
        (long long)x[1], wdesc, (long long)(w[1] * groups), (long long)w[1], (long long)groups);
  int64_t oh = sg__conv_out_dim(x[2], pad[0], pad[2], w[2], st[0], dil[0]);
  int64_t ow = sg__conv_out_dim(x[3], pad[1], pad[3], w[3], st[1], dil[1]);
  if (oh < 1 || ow < 1)
    return sg__op_error(op, SG_ERR_SHAPE, "kernel of %s (dilation %lld,%lld) is larger than padded %s", wdesc,
                        (long long)dil[0], (long long)dil[1], xdesc);
  y[0] = x[0];
  y[1] = w[0];
  y[2] = oh;
  y[3] = ow;
  return SG_OK;
}

static sg_status infer_conv2d(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *x = sg__in(g, op, 0), *w = sg__in(g, op, 1), *b = sg__in(g, op, 2);
  char sx[SG__SHAPE_STR], sw[SG__SHAPE_STR], sb[SG__SHAPE_STR];
  char xdesc[SG__SHAPE_STR + 16], wdesc[SG__SHAPE_STR + 16];
  sg__tstr(sx, x);
  sg__tstr(sw, w);
  if (!sg__is_float(x->dtype)) return sg__op_error(op, SG_ERR_DTYPE, "input x %s must be a float type", sx);
  if (w->dtype != x->dtype || (b && b->dtype != x->dtype))
    return sg__op_error(op, SG_ERR_DTYPE, "x %s, weight %s%s%s must share one dtype", sx, sw,
                        b ? ", bias " : "", b ? sg__tstr(sb, b) : "");
  if (x->ndim != 4) return sg__op_error(op, SG_ERR_SHAPE, "input x %s must be 4-D [N,C,H,W]", sx);
  if (w->ndim != 4) return sg__op_error(op, SG_ERR_SHAPE, "weight %s must be 4-D [K,C/groups,R,S]", sw);
  snprintf(xdesc, sizeof xdesc, "input x %s", sx);
  snprintf(wdesc, sizeof wdesc, "weight %s", sw);
  int64_t y[4];
  SG_CHECK(sg__conv2d_window(op, x->dims, xdesc, w->dims, wdesc, y));
  if (b && (b->ndim != 1 || b->dims[0] != y[1]))
    return sg__op_error(op, SG_ERR_SHAPE, "bias %s must be [%lld] to match weight %s", sg__tstr(sb, b),
                        (long long)y[1], sw);
  outs[0] = (sg__shape){x->dtype, 4, {y[0], y[1], y[2], y[3]}};
  *n_outs = 1;
  return SG_OK;
}

const sg__op_def sg__def_conv2d = {SG_OP_CONV2D,       "conv2d", 2,          3,           1u << 2, 0,
                                   SG_ROLE_ACTIVATION, 4,        conv_attrs, infer_conv2d};

sg_conv2d_params sg_conv2d_params_init(void) { return (sg_conv2d_params)SG_CONV2D_PARAMS_INIT; }

sg_tensor sg_conv2d(sg_graph *g, sg_tensor x, sg_tensor w, sg_tensor bias, const sg_conv2d_params *p) {
  sg_conv2d_params d = SG_CONV2D_PARAMS_INIT;
  if (sg__graph_params(g, "sg_conv2d", SG__VERSIONED(sg_conv2d_params, stride, "SG_CONV2D_PARAMS_INIT"), &d,
                       p) != SG_OK)
    return SG_NO_TENSOR;
  p = &d;
  sg_attr attrs[] = {SG__AS("stride", 2, p->stride), SG__AS("padding", 4, p->padding),
                     SG__AS("dilation", 2, p->dilation), SG__AI("groups", p->groups)};
  sg_tensor in[] = {x, w, bias};
  return sg__build1(g, SG_OP_CONV2D, 3, in, 4, attrs);
}
