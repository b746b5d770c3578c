/* Converters of the ONNX ops that become sgrt ops (docs/onnx.md has the
 * mapping table). Each checks the node's attributes against what it
 * implements, so an attribute with semantics sgrt lacks is an error rather
 * than a silently different model. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "onnx/onnx_internal.h"

static const char *const no_attrs[] = {NULL};

/* Graph tensor of required input i. */
static sg_status in_tensor(ox_ctx *c, int i, const char *what, sg_tensor *t) {
  ox_value *v = sg__ox_input(c, c->node, i);
  if (v == NULL) return sg__ox_node_error(c, SG_ERR_ARITY, "input %d (%s) is missing", i, what);
  return sg__ox_tensor(c, v, t);
}

/* Graph tensor of optional input i, SG_NO_TENSOR when absent. */
static sg_status opt_tensor(ox_ctx *c, int i, sg_tensor *t) {
  ox_value *v = sg__ox_input(c, c->node, i);
  *t = SG_NO_TENSOR;
  return v ? sg__ox_tensor(c, v, t) : SG_OK;
}

static int rank_of(const ox_ctx *c, sg_tensor t) { return c->g->tensors[t.id].ndim; }

/* Output 0 is the builder's result t. */
static sg_status out0(ox_ctx *c, sg_tensor t) {
  SG_CHECK(sg__ox_built(c, t));
  return sg__ox_set_tensor(c, 0, t);
}

/* An INTS attribute that must have exactly `count` values when present. */
static sg_status ints_n(ox_ctx *c, const char *name, int count, int64_t *vals) {
  int n = 0;
  int64_t tmp[8];
  SG_CHECK(sg__ox_attr_ints(c, name, 8, tmp, &n));
  if (n == 0) return SG_OK;
  if (n != count)
    return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "attribute '%s' has %d values; expected %d", name, n,
                             count);
  memcpy(vals, tmp, sizeof(int64_t) * (size_t)count);
  return SG_OK;
}

/* auto_pad: NOTSET (explicit pads) and VALID (no padding) only. */
static sg_status check_auto_pad(ox_ctx *c, int64_t pads[4]) {
  char mode[32];
  SG_CHECK(sg__ox_attr_string(c, "auto_pad", "NOTSET", mode, sizeof mode));
  if (strcmp(mode, "NOTSET") == 0) return SG_OK;
  if (strcmp(mode, "VALID") == 0) {
    for (int i = 0; i < 4; i++) pads[i] = 0;
    return SG_OK;
  }
  return sg__ox_node_error(c, SG_ERR_UNSUPPORTED, "auto_pad '%s' is not supported (only NOTSET and VALID)",
                           mode);
}

/* Kernel sizes, strides, dilations, pads and groups sgrt accepts: the
 * bounds of the builder's schema (docs/ops.md), checked here too so that
 * messages use the ONNX names and values. */
#define OX_MAX_WINDOW SG__MAX_ATTR_DIM

/* Each of the n values of attribute `name` must lie in lo..OX_MAX_WINDOW. */
static sg_status check_range(ox_ctx *c, const char *name, const int64_t *v, int n, int64_t lo) {
  for (int i = 0; i < n; i++)
    if (v[i] < lo || v[i] > OX_MAX_WINDOW) {
      char index[16] = "";
      if (n > 1) snprintf(index, sizeof index, "[%d]", i);
      return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "%s%s is %lld; must be in %lld..2^30", name, index,
                               (long long)v[i], (long long)lo);
    }
  return SG_OK;
}

/* The window must fit the padded input along both spatial dims, so that
 * every output size is >= 1: (kernel - 1) * dilation + 1 <= in + pads. */
static sg_status check_window(ox_ctx *c, sg_tensor x, const int64_t kernel[2], const int64_t dil[2],
                              const int64_t pads[4]) {
  const sg__tensor *t = &c->g->tensors[x.id];
  for (int i = 0; i < 2; i++) {
    int64_t in = t->dims[2 + i], span, padded;
    /* A kernel from W's dims can be up to 2^56: the product may overflow. */
    bool over =
        __builtin_mul_overflow(kernel[i] - 1, dil[i], &span) || __builtin_add_overflow(span, 1, &span);
    padded = in + pads[i] + pads[i + 2]; /* dims <= 2^56, pads <= 2^30 */
    if (over || span > padded) {
      char spans[64];
      if (over) snprintf(spans, sizeof spans, "more than 2^63");
      else snprintf(spans, sizeof spans, "%lld", (long long)span);
      return sg__ox_node_error(c, SG_ERR_SHAPE,
                               "the window along dim %d spans %s (kernel %lld, dilation %lld), more than "
                               "input '%s' padded: %lld + pads %lld + %lld = %lld",
                               2 + i, spans, (long long)kernel[i], (long long)dil[i], c->node->input[0],
                               (long long)in, (long long)pads[i], (long long)pads[i + 2], (long long)padded);
    }
  }
  return SG_OK;
}

/* 2-D ops want a 4-D NCHW input (Conv also takes a 3-D one: conv1d). */
static sg_status need_4d(ox_ctx *c, sg_tensor x) {
  int r = rank_of(c, x);
  if (r == 4) return SG_OK;
  return sg__ox_node_error(c, SG_ERR_UNSUPPORTED,
                           "input '%s' has rank %d; only 2-D (NCHW) inputs are supported", c->node->input[0],
                           r);
}

/* ---- convolution and batch norm ------------------------------------------ */

/* The 2-D convolution of x and w (both 4-D) with p and the kernel_shape attribute's values (kernel),
 * checked as the builder would, with ONNX's names in the messages. */
static sg_status conv2d_checked(ox_ctx *c, sg_tensor x, sg_tensor w, sg_tensor b, const sg_conv2d_params *p,
                                const int64_t kernel[2], sg_tensor *y) {
  /* A weight of another rank is the builder's error, with both shapes. */
  const sg__tensor *wt = &c->g->tensors[w.id];
  if (wt->ndim == 4) {
    const Onnx__AttributeProto *ka = sg__ox_attr(c, "kernel_shape");
    if (ka && ka->n_ints > 0 && (wt->dims[2] != kernel[0] || wt->dims[3] != kernel[1]))
      return sg__ox_node_error(
          c, SG_ERR_SHAPE, "kernel_shape (%lld,%lld) does not match weight '%s' [%lld,%lld,%lld,%lld]",
          (long long)kernel[0], (long long)kernel[1], c->node->input[1], (long long)wt->dims[0],
          (long long)wt->dims[1], (long long)wt->dims[2], (long long)wt->dims[3]);
    SG_CHECK(check_window(c, x, &wt->dims[2], p->dilation, p->padding));
  }
  *y = sg_conv2d(c->g, x, w, b, p);
  return sg__ox_built(c, *y);
}

/* A 1-D convolution (Conv1d: x [N, C, L], w [O, C/g, K]; Whisper's and SqueezeBERT's) as a 2-D one of
 * height 1: x and w reshaped to [N, C, 1, L] and [O, C/g, 1, K] (views; w's gradient flows back
 * through the reshape), the result back to [N, O, L']. */
static sg_status conv1d(ox_ctx *c, sg_tensor x, sg_tensor w, sg_tensor b) {
  sg_conv2d_params p = SG_CONV2D_PARAMS_INIT;
  int64_t stride = 1, dilation = 1, kernel = 1, pads[4] = {0, 0, 0, 0};
  SG_CHECK(ints_n(c, "strides", 1, &stride));
  SG_CHECK(ints_n(c, "dilations", 1, &dilation));
  SG_CHECK(ints_n(c, "pads", 2, pads));
  SG_CHECK(ints_n(c, "kernel_shape", 1, &kernel));
  SG_CHECK(sg__ox_attr_int(c, "group", 1, &p.groups));
  SG_CHECK(check_range(c, "kernel_shape", &kernel, 1, 1));
  SG_CHECK(check_range(c, "strides", &stride, 1, 1));
  SG_CHECK(check_range(c, "dilations", &dilation, 1, 1));
  SG_CHECK(check_range(c, "pads", pads, 2, 0));
  SG_CHECK(check_range(c, "group", &p.groups, 1, 1));
  SG_CHECK(check_auto_pad(c, pads));
  p.stride[0] = 1, p.stride[1] = stride;
  p.dilation[0] = 1, p.dilation[1] = dilation;
  p.padding[0] = 0, p.padding[1] = pads[0], p.padding[2] = 0, p.padding[3] = pads[1];
  const sg__tensor *xt = &c->g->tensors[x.id], *wt = &c->g->tensors[w.id];
  if (wt->ndim != 3)
    return sg__ox_node_error(c, SG_ERR_SHAPE,
                             "weight '%s' has rank %d; a 1-D convolution's is [O, C/group, K]",
                             c->node->input[1], wt->ndim);
  int64_t x4[4] = {xt->dims[0], xt->dims[1], 1, xt->dims[2]},
          w4[4] = {wt->dims[0], wt->dims[1], 1, wt->dims[2]};
  int64_t k2[2] = {1, kernel};
  sg_tensor y;
  SG_CHECK(conv2d_checked(c, sg_reshape(c->g, x, 4, x4), sg_reshape(c->g, w, 4, w4), b, &p, k2, &y));
  const sg__tensor *yt = &c->g->tensors[y.id];
  int64_t y3[3] = {yt->dims[0], yt->dims[1], yt->dims[3]};
  return out0(c, sg_reshape(c->g, y, 3, y3));
}

static sg_status cv_conv(ox_ctx *c, const Onnx__NodeProto *n) {
  (void)n;
  static const char *const known[] = {"auto_pad", "dilations", "group", "kernel_shape",
                                      "pads",     "strides",   NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  sg_tensor x, w, b;
  SG_CHECK(in_tensor(c, 0, "X", &x));
  SG_CHECK(in_tensor(c, 1, "W", &w));
  SG_CHECK(opt_tensor(c, 2, &b));
  if (rank_of(c, x) == 3) return conv1d(c, x, w, b);
  SG_CHECK(need_4d(c, x));
  sg_conv2d_params p = SG_CONV2D_PARAMS_INIT;
  int64_t kernel[2] = {1, 1};
  SG_CHECK(ints_n(c, "strides", 2, p.stride));
  SG_CHECK(ints_n(c, "dilations", 2, p.dilation));
  SG_CHECK(ints_n(c, "pads", 4, p.padding));
  SG_CHECK(ints_n(c, "kernel_shape", 2, kernel));
  SG_CHECK(sg__ox_attr_int(c, "group", 1, &p.groups));
  SG_CHECK(check_range(c, "kernel_shape", kernel, 2, 1));
  SG_CHECK(check_range(c, "strides", p.stride, 2, 1));
  SG_CHECK(check_range(c, "dilations", p.dilation, 2, 1));
  SG_CHECK(check_range(c, "pads", p.padding, 4, 0));
  SG_CHECK(check_range(c, "group", &p.groups, 1, 1));
  SG_CHECK(check_auto_pad(c, p.padding));
  sg_tensor y;
  SG_CHECK(conv2d_checked(c, x, w, b, &p, kernel, &y));
  return sg__ox_set_tensor(c, 0, y);
}

/* 1 - m for a momentum m read as float32, rounded to 15 digits so that
 * PyTorch's 0.1 comes back as 0.1. */
static double torch_momentum(double onnx_momentum) {
  char buf[64];
  snprintf(buf, sizeof buf, "%.15g", 1.0 - sg__ox_snap_float(onnx_momentum));
  return strtod(buf, NULL);
}

static sg_status cv_batch_norm(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known[] = {"epsilon", "momentum", "training_mode", "spatial", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  sg_tensor in[5];
  static const char *const what[] = {"X", "scale", "B", "input_mean", "input_var"};
  for (int i = 0; i < 5; i++) SG_CHECK(in_tensor(c, i, what[i], &in[i]));
  double eps = 0, momentum = 0;
  int64_t mode = 0, spatial = 1;
  SG_CHECK(sg__ox_attr_float(c, "epsilon", 1e-5, &eps));
  SG_CHECK(sg__ox_attr_float(c, "momentum", 0.9, &momentum));
  SG_CHECK(sg__ox_attr_int(c, "spatial", 1, &spatial));
  if (spatial != 1)
    return sg__ox_node_error(c, SG_ERR_UNSUPPORTED, "spatial=%lld (only 1)", (long long)spatial);
  /* Opset 14 says so with training_mode; before, training exports have the
   * running statistics as extra outputs. */
  bool file_training;
  if (c->opset >= 14) {
    SG_CHECK(sg__ox_attr_int(c, "training_mode", 0, &mode));
    if (mode != 0 && mode != 1)
      return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "training_mode is %lld; must be 0 or 1", (long long)mode);
    file_training = mode == 1;
  } else {
    file_training = sg__ox_has_output(c, 1) || sg__ox_has_output(c, 2);
  }
  int training = c->training < 0 ? file_training : c->training;
  sg_attr attrs[] = {SG__AF("eps", sg__ox_snap_float(eps)), SG__AF("momentum", torch_momentum(momentum)),
                     SG__AI("training", training)};
  sg_tensor outs[3];
  int n_outs = 0;
  sg_status st = sg_graph_add_op(c->g, SG_OP_BATCH_NORM, 5, in, 3, attrs, 3, outs, &n_outs);
  if (st != SG_OK) return sg__ox_built(c, SG_NO_TENSOR);
  SG_CHECK(sg__ox_set_tensor(c, 0, outs[0]));
  /* Outputs 1 and 2 are the running statistics after the update: in sgrt
   * the state tensors themselves, updated in place. */
  SG_CHECK(sg__ox_set_tensor(c, 1, in[3]));
  SG_CHECK(sg__ox_set_tensor(c, 2, in[4]));
  if (training) {
    char buf[SG__MAX_NAME];
    const char *y = sg__ox_has_output(c, 0) ? n->output[0] : "batch_norm";
    snprintf(buf, sizeof buf, "%.4000s.batch_mean", y);
    SG_CHECK(sg__ox_want_name(c, outs[1].id, buf, 1));
    snprintf(buf, sizeof buf, "%.4000s.batch_invstd", y);
    SG_CHECK(sg__ox_want_name(c, outs[2].id, buf, 1));
    SG_CHECK(sg__ox_set_tensor(c, 3, outs[1])); /* saved_mean (opsets < 14): the batch mean */
  } else {
    SG_CHECK(sg__ox_set_unavailable(c, 3, "BatchNormalization's saved_mean exists only in training form"));
  }
  return sg__ox_set_unavailable(
      c, 4, "BatchNormalization's saved_var (sgrt keeps the inverse standard deviation instead)");
}

/* ---- elementwise ---------------------------------------------------------- */

static sg_status unary(ox_ctx *c, sg_tensor (*fn)(sg_graph *, sg_tensor)) {
  SG_CHECK(sg__ox_check_attrs(c, no_attrs));
  sg_tensor x;
  SG_CHECK(in_tensor(c, 0, "X", &x));
  return out0(c, fn(c->g, x));
}

static sg_status cv_relu(ox_ctx *c, const Onnx__NodeProto *n) {
  (void)n;
  return unary(c, sg_relu);
}
static sg_status cv_sigmoid(ox_ctx *c, const Onnx__NodeProto *n) {
  (void)n;
  return unary(c, sg_sigmoid);
}
static sg_status cv_tanh(ox_ctx *c, const Onnx__NodeProto *n) {
  (void)n;
  return unary(c, sg_tanh);
}

static sg_status cv_clip(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known_old[] = {"min", "max", NULL};
  SG_CHECK(sg__ox_check_attrs(c, c->opset < 11 ? known_old : no_attrs));
  double lo = -FLT_MAX, hi = FLT_MAX;
  if (c->opset < 11) {
    SG_CHECK(sg__ox_attr_float(c, "min", lo, &lo));
    SG_CHECK(sg__ox_attr_float(c, "max", hi, &hi));
  } else {
    ox_value *vlo = sg__ox_input(c, n, 1), *vhi = sg__ox_input(c, n, 2);
    if (vlo) SG_CHECK(sg__ox_const_scalar(c, vlo, "min", &lo));
    if (vhi) SG_CHECK(sg__ox_const_scalar(c, vhi, "max", &hi));
  }
  /* Infinite bounds become FLT_MAX: attribute values end up in generated C. */
  lo = lo < -FLT_MAX ? -FLT_MAX : lo;
  hi = hi > FLT_MAX ? FLT_MAX : hi;
  ox_value *x = sg__ox_input(c, n, 0);
  if (x == NULL) return sg__ox_node_error(c, SG_ERR_ARITY, "input 0 (input) is missing");
  if (lo == -FLT_MAX && hi == FLT_MAX) return sg__ox_set_alias(c, 0, x);
  if (sg__ox_foldable(x)) { /* index arithmetic of torch.export's interpolation: clamped indices */
    bool fl = x->elem == OX_FLOAT;
    void *out;
    SG_CHECK(sg__ox_fold_alloc(c, x->numel, fl ? 4 : 8, &out));
    for (int64_t i = 0; i < x->numel; i++) {
      if (fl) {
        float v = sg__ox_f32(x, i);
        ((float *)out)[i] = v < (float)lo ? (float)lo : v > (float)hi ? (float)hi : v; /* NaN stays */
        continue;
      }
      int64_t v = sg__ox_i64(x, i); /* integer bounds up to 2^53 are exact as doubles */
      if (lo > -FLT_MAX && (double)v < lo) v = (int64_t)ceil(lo);
      if (hi < FLT_MAX && (double)v > hi) v = (int64_t)floor(hi);
      ((int64_t *)out)[i] = v;
    }
    return sg__ox_set_const(c, 0, x->elem, x->ndim, x->dims, out);
  }
  sg_tensor t;
  SG_CHECK(sg__ox_tensor(c, x, &t));
  if (lo == 0 && hi == FLT_MAX) return out0(c, sg_relu(c->g, t));
  return out0(c, sg_clip(c->g, t, lo, hi));
}

/* Add, Sub, Mul, Div: folded for constants; a float constant scalar on the
 * right (or either side of + and *) becomes a scalar op. */
static sg_status binary(ox_ctx *c, const Onnx__NodeProto *n, char op) {
  SG_CHECK(sg__ox_check_attrs(c, no_attrs));
  ox_value *a = sg__ox_input(c, n, 0), *b = sg__ox_input(c, n, 1);
  if (a == NULL || b == NULL) return sg__ox_node_error(c, SG_ERR_ARITY, "needs inputs A and B");
  bool folded;
  SG_CHECK(sg__ox_fold_binary(c, op, a, b, &folded));
  if (folded) return SG_OK;
  if (op == '+' || op == '*') {
    if (sg__ox_foldable(a) && !sg__ox_foldable(b)) {
      ox_value *t = a;
      a = b;
      b = t;
    }
  }
  sg_tensor ta;
  SG_CHECK(sg__ox_tensor(c, a, &ta));
  const sg__tensor *at = &c->g->tensors[ta.id];
  if (op != '/' && sg__ox_foldable(b) && b->elem == OX_FLOAT && b->numel == 1 && b->ndim <= at->ndim &&
      at->dtype == SG_F32) {
    double s = sg__ox_f32(b, 0);
    if (op == '*') return out0(c, sg_mul_scalar(c->g, ta, s));
    return out0(c, sg_add_scalar(c->g, ta, op == '+' ? s : -s));
  }
  sg_tensor tb;
  SG_CHECK(sg__ox_tensor(c, b, &tb));
  sg_tensor (*fn)(sg_graph *, sg_tensor, sg_tensor) = op == '+'   ? sg_add
                                                      : op == '-' ? sg_sub
                                                      : op == '*' ? sg_mul
                                                                  : sg_div;
  /* Keep ONNX's operand order for - and /, which swapping above never touches. */
  return out0(c, fn(c->g, ta, tb));
}

static sg_status cv_add(ox_ctx *c, const Onnx__NodeProto *n) { return binary(c, n, '+'); }
static sg_status cv_sub(ox_ctx *c, const Onnx__NodeProto *n) { return binary(c, n, '-'); }
static sg_status cv_mul(ox_ctx *c, const Onnx__NodeProto *n) { return binary(c, n, '*'); }
static sg_status cv_div(ox_ctx *c, const Onnx__NodeProto *n) { return binary(c, n, '/'); }

/* ---- matrix products ------------------------------------------------------ */

static sg_status cv_matmul(ox_ctx *c, const Onnx__NodeProto *n) {
  (void)n;
  SG_CHECK(sg__ox_check_attrs(c, no_attrs));
  sg_tensor a, b;
  SG_CHECK(in_tensor(c, 0, "A", &a));
  SG_CHECK(in_tensor(c, 1, "B", &b));
  return out0(c, sg_matmul(c->g, a, b));
}

static sg_status cv_gemm(ox_ctx *c, const Onnx__NodeProto *n) {
  (void)n;
  static const char *const known[] = {"alpha", "beta", "transA", "transB", "broadcast", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  sg_tensor a, b, cc;
  SG_CHECK(in_tensor(c, 0, "A", &a));
  SG_CHECK(in_tensor(c, 1, "B", &b));
  SG_CHECK(opt_tensor(c, 2, &cc));
  sg_gemm_params p = SG_GEMM_PARAMS_INIT;
  int64_t ta = 0, tb = 0;
  SG_CHECK(sg__ox_attr_float(c, "alpha", 1.0, &p.alpha));
  SG_CHECK(sg__ox_attr_float(c, "beta", 1.0, &p.beta));
  SG_CHECK(sg__ox_attr_int(c, "transA", 0, &ta));
  SG_CHECK(sg__ox_attr_int(c, "transB", 0, &tb));
  if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1))
    return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "transA and transB must be 0 or 1 (are %lld, %lld)",
                             (long long)ta, (long long)tb);
  p.trans_a = (int)ta;
  p.trans_b = (int)tb;
  p.alpha = sg__ox_snap_float(p.alpha);
  p.beta = sg__ox_snap_float(p.beta);
  return out0(c, sg_gemm(c->g, a, b, cc, &p));
}

/* ---- pooling -------------------------------------------------------------- */

static sg_status pool(ox_ctx *c, bool max) {
  static const char *const known_max[] = {"auto_pad", "ceil_mode", "dilations",     "kernel_shape",
                                          "pads",     "strides",   "storage_order", NULL};
  static const char *const known_avg[] = {
      "auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides", NULL};
  /* AveragePool has dilations from opset 19 (only 1 is supported, as for MaxPool). */
  static const char *const known_avg19[] = {"auto_pad",     "ceil_mode", "count_include_pad", "dilations",
                                            "kernel_shape", "pads",      "strides",           NULL};
  SG_CHECK(sg__ox_check_attrs(c, max ? known_max : c->opset >= 19 ? known_avg19 : known_avg));
  sg_tensor x;
  SG_CHECK(in_tensor(c, 0, "X", &x));
  SG_CHECK(need_4d(c, x));
  sg_pool2d_params p = SG_POOL2D_PARAMS_INIT;
  int64_t dil[2] = {1, 1}, ceil_mode = 0, cip = 0, order = 0;
  if (sg__ox_attr(c, "kernel_shape") == NULL)
    return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "needs attribute 'kernel_shape'");
  SG_CHECK(ints_n(c, "kernel_shape", 2, p.kernel));
  p.stride[0] = p.stride[1] = 1;
  SG_CHECK(ints_n(c, "strides", 2, p.stride));
  SG_CHECK(ints_n(c, "pads", 4, p.padding));
  SG_CHECK(ints_n(c, "dilations", 2, dil));
  SG_CHECK(sg__ox_attr_int(c, "ceil_mode", 0, &ceil_mode));
  SG_CHECK(sg__ox_attr_int(c, "count_include_pad", 0, &cip));
  SG_CHECK(sg__ox_attr_int(c, "storage_order", 0, &order));
  SG_CHECK(check_range(c, "kernel_shape", p.kernel, 2, 1));
  SG_CHECK(check_range(c, "strides", p.stride, 2, 1));
  SG_CHECK(check_range(c, "dilations", dil, 2, 1));
  SG_CHECK(check_range(c, "pads", p.padding, 4, 0));
  SG_CHECK(check_auto_pad(c, p.padding));
  if (dil[0] != 1 || dil[1] != 1)
    return sg__ox_node_error(c, SG_ERR_UNSUPPORTED, "dilations (%lld,%lld) (only 1)", (long long)dil[0],
                             (long long)dil[1]);
  if (order != 0)
    return sg__ox_node_error(c, SG_ERR_UNSUPPORTED, "storage_order=%lld (only 0)", (long long)order);
  if ((ceil_mode != 0 && ceil_mode != 1) || (cip != 0 && cip != 1))
    return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "ceil_mode and count_include_pad must be 0 or 1");
  SG_CHECK(check_window(c, x, p.kernel, dil, p.padding));
  p.ceil_mode = (int)ceil_mode;
  p.count_include_pad = (int)cip;
  if (max) SG_CHECK(sg__ox_set_unavailable(c, 1, "MaxPool's Indices output"));
  return out0(c, max ? sg_max_pool2d(c->g, x, &p) : sg_avg_pool2d(c->g, x, &p));
}

static sg_status cv_max_pool(ox_ctx *c, const Onnx__NodeProto *n) {
  (void)n;
  return pool(c, true);
}
static sg_status cv_avg_pool(ox_ctx *c, const Onnx__NodeProto *n) {
  (void)n;
  return pool(c, false);
}
static sg_status cv_global_avg_pool(ox_ctx *c, const Onnx__NodeProto *n) {
  (void)n;
  return unary(c, sg_global_avg_pool);
}

/* ---- shape ---------------------------------------------------------------- */

static sg_status cv_flatten(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known[] = {"axis", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  int64_t axis;
  SG_CHECK(sg__ox_attr_int(c, "axis", 1, &axis));
  ox_value *v = sg__ox_input(c, n, 0);
  if (v && sg__ox_foldable(v)) { /* a constant (BEiT's relative position index, built in forward): folded */
    int r = v->ndim;
    if (axis < -r || axis > r)
      return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "axis %lld is out of range for rank %d", (long long)axis,
                               r);
    int a = (int)(axis < 0 ? axis + r : axis);
    int64_t dims[2] = {sg__ox_fold_numel(a, v->dims), sg__ox_fold_numel(r - a, v->dims + a)};
    return sg__ox_set_const(c, 0, v->elem, 2, dims, v->data);
  }
  sg_tensor x;
  SG_CHECK(in_tensor(c, 0, "input", &x));
  int r = rank_of(c, x);
  if (axis < -r || axis > r)
    return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "axis %lld is out of range for rank %d", (long long)axis,
                             r);
  bool was_bool;
  SG_CHECK(sg__ox_bool_in(c, &x, &was_bool));
  sg_tensor y = sg_flatten(c->g, x, (int)axis);
  SG_CHECK(sg__ox_bool_out(c, &y, was_bool));
  return out0(c, y);
}

/* Transpose of an import-time constant (the TorchScript exporter reverses F.pad's pads with Slice
 * and Transpose): folded. perm must be a permutation of 0..r-1. */
static sg_status fold_transpose(ox_ctx *c, const ox_value *v, int r, const int64_t *dims, int np,
                                const int64_t *perm) {
  bool seen[SG_MAX_DIMS] = {false};
  if (np != r)
    return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "perm has %d values; the data has rank %d", np, r);
  for (int i = 0; i < r; i++) {
    if (perm[i] < 0 || perm[i] >= r || seen[perm[i]])
      return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "perm is not a permutation of 0..%d", r - 1);
    seen[perm[i]] = true;
  }
  int64_t out_dims[SG_MAX_DIMS], in_st[SG_MAX_DIMS], idx[SG_MAX_DIMS] = {0};
  int64_t numel = sg__ox_fold_numel(r, dims), st = 1;
  size_t es = sg__ox_elem_size(v->elem);
  char *out;
  SG_CHECK(sg__ox_fold_alloc(c, numel, es, (void **)&out)); /* numel within the import's limit */
  for (int i = 0; i < r; i++) out_dims[i] = dims[perm[i]];
  for (int i = r - 1; i >= 0; i--) in_st[i] = st, st *= dims[i];
  for (int64_t i = 0; i < numel; i++) {
    int64_t off = 0;
    for (int a = 0; a < r; a++) off += idx[a] * in_st[perm[a]];
    memcpy(out + (size_t)i * es, (const char *)v->data + (size_t)off * es, es);
    for (int a = r - 1; a >= 0 && ++idx[a] == out_dims[a]; a--) idx[a] = 0;
  }
  return sg__ox_set_const(c, 0, v->elem, r, out_dims, out);
}

static sg_status cv_transpose(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known[] = {"perm", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  ox_value *v = sg__ox_input(c, n, 0);
  if (v == NULL) return sg__ox_node_error(c, SG_ERR_ARITY, "input 0 (data) is missing");
  int r = 0, np = 0;
  int64_t perm[SG_MAX_DIMS], dims[SG_MAX_DIMS];
  SG_CHECK(sg__ox_shape(c, v, &r, dims));
  SG_CHECK(sg__ox_attr_ints(c, "perm", SG_MAX_DIMS, perm, &np));
  if (sg__ox_attr(c, "perm") == NULL) {
    np = r;
    for (int i = 0; i < r; i++) perm[i] = r - 1 - i;
  }
  if (sg__ox_foldable(v)) return fold_transpose(c, v, r, dims, np, perm);
  sg_tensor x;
  SG_CHECK(in_tensor(c, 0, "data", &x));
  bool was_bool;
  SG_CHECK(sg__ox_bool_in(c, &x, &was_bool));
  sg_tensor y = sg_transpose(c->g, x, np, perm);
  SG_CHECK(sg__ox_bool_out(c, &y, was_bool));
  return out0(c, y);
}

/* ---- softmax and reductions ----------------------------------------------- */

static sg_status softmax(ox_ctx *c, bool log) {
  static const char *const known[] = {"axis", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  sg_tensor x;
  SG_CHECK(in_tensor(c, 0, "input", &x));
  sg_tensor (*fn)(sg_graph *, sg_tensor, int) = log ? sg_log_softmax : sg_softmax;
  int64_t axis_attr = 0;
  int r = rank_of(c, x), axis = 0;
  SG_CHECK(sg__ox_attr_int(c, "axis", c->opset >= 13 ? -1 : 1, &axis_attr));
  SG_CHECK(sg__ox_axis(c, axis_attr, r, "axis", &axis));
  if (c->opset >= 13 || axis == r - 1) return out0(c, fn(c->g, x, axis));
  /* Before opset 13 the input is seen as 2-D [d0*..*d(axis-1), d(axis)*..]. */
  const sg__tensor *t = &c->g->tensors[x.id];
  int64_t dims[SG_MAX_DIMS], flat[2] = {1, 1};
  memcpy(dims, t->dims, sizeof dims);
  for (int i = 0; i < r; i++) flat[i < axis ? 0 : 1] *= dims[i];
  sg_tensor y = fn(c->g, sg_reshape(c->g, x, 2, flat), 1);
  return out0(c, sg_reshape(c->g, y, r, dims));
}

static sg_status cv_softmax(ox_ctx *c, const Onnx__NodeProto *n) {
  (void)n;
  return softmax(c, false);
}
static sg_status cv_log_softmax(ox_ctx *c, const Onnx__NodeProto *n) {
  (void)n;
  return softmax(c, true);
}

sg_status sg__ox_reduce_args(ox_ctx *c, const Onnx__NodeProto *n, int64_t axes_input_opset, int64_t *axes,
                             int *na, int64_t *keepdims, bool *noop, ox_value **x) {
  bool axes_input = c->opset >= axes_input_opset;
  static const char *const known_attr[] = {"axes", "keepdims", NULL};
  static const char *const known_input[] = {"keepdims", "noop_with_empty_axes", NULL};
  SG_CHECK(sg__ox_check_attrs(c, axes_input ? known_input : known_attr));
  int64_t noop_attr = 0;
  *na = 0;
  SG_CHECK(sg__ox_attr_int(c, "keepdims", 1, keepdims));
  SG_CHECK(sg__ox_attr_int(c, "noop_with_empty_axes", 0, &noop_attr));
  if (axes_input) {
    ox_value *va = sg__ox_input(c, n, 1);
    if (va) SG_CHECK(sg__ox_const_ints(c, va, "axes", SG_MAX_DIMS, axes, na));
  } else {
    SG_CHECK(sg__ox_attr_ints(c, "axes", SG_MAX_DIMS, axes, na));
  }
  if (*keepdims != 0 && *keepdims != 1)
    return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "keepdims is %lld; must be 0 or 1", (long long)*keepdims);
  *x = sg__ox_input(c, n, 0);
  if (*x == NULL) return sg__ox_node_error(c, SG_ERR_ARITY, "input 0 (data) is missing");
  *noop = *na == 0 && noop_attr != 0;
  return SG_OK;
}

/* kind: 'm' ReduceMean, 's' ReduceSum, '2' ReduceL2 (sqrt of the sum of
 * squares: F.normalize's norm). */
static sg_status reduce(ox_ctx *c, const Onnx__NodeProto *n, char kind) {
  bool mean = kind == 'm', noop;
  int64_t axes[SG_MAX_DIMS], keepdims;
  int na;
  ox_value *x;
  /* Axes became an input in opset 13 for ReduceSum, 18 for the others. */
  SG_CHECK(sg__ox_reduce_args(c, n, kind == 's' ? 13 : 18, axes, &na, &keepdims, &noop, &x));
  if (noop) return sg__ox_set_alias(c, 0, x);
  if (kind != '2' && sg__ox_foldable(x)) /* BEiT's relative position index: a sum of constants */
    return sg__ox_fold_reduce(c, x, axes, na, keepdims, mean ? 'a' : 's', mean ? "ReduceMean" : "ReduceSum");
  sg_tensor t;
  SG_CHECK(sg__ox_tensor(c, x, &t));
  if (kind == '2') {
    sg_tensor s = sg_reduce_sum(c->g, sg_mul(c->g, t, t), na, axes, (int)keepdims);
    SG_CHECK(sg__ox_built(c, s));
    return out0(c, sg_sqrt(c->g, s));
  }
  return out0(c, (mean ? sg_reduce_mean : sg_reduce_sum)(c->g, t, na, axes, (int)keepdims));
}

static sg_status cv_reduce_mean(ox_ctx *c, const Onnx__NodeProto *n) { return reduce(c, n, 'm'); }
static sg_status cv_reduce_sum(ox_ctx *c, const Onnx__NodeProto *n) { return reduce(c, n, 's'); }
static sg_status cv_reduce_l2(ox_ctx *c, const Onnx__NodeProto *n) { return reduce(c, n, '2'); }

/* ---- Dropout, Pad --------------------------------------------------------- */

static sg_status cv_dropout(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known_old[] = {"ratio", "is_test", NULL};
  static const char *const known_new[] = {"seed", NULL};
  SG_CHECK(sg__ox_check_attrs(c, c->opset < 12 ? known_old : known_new));
  ox_value *x = sg__ox_input(c, n, 0);
  if (x == NULL) return sg__ox_node_error(c, SG_ERR_ARITY, "input 0 (data) is missing");
  double ratio = 0.5;
  bool file_training;
  int64_t seed = 0;
  if (c->opset < 12) {
    int64_t is_test = 0;
    SG_CHECK(sg__ox_attr_float(c, "ratio", 0.5, &ratio));
    SG_CHECK(sg__ox_attr_int(c, "is_test", 0, &is_test));
    file_training = !is_test && sg__ox_has_output(c, 1);
  } else {
    ox_value *vr = sg__ox_input(c, n, 1), *vt = sg__ox_input(c, n, 2);
    double tm = 0;
    if (vr) SG_CHECK(sg__ox_const_scalar(c, vr, "ratio", &ratio));
    if (vt) SG_CHECK(sg__ox_const_scalar(c, vt, "training_mode", &tm));
    file_training = tm != 0;
    SG_CHECK(sg__ox_attr_int(c, "seed", 0, &seed));
  }
  ratio = sg__ox_snap_float(ratio);
  int training = c->training < 0 ? file_training : c->training;
  if (!training || ratio == 0) {
    SG_CHECK(sg__ox_set_unavailable(c, 1, "the mask of a Dropout in inference form"));
    return sg__ox_set_alias(c, 0, x);
  }
  sg_tensor t;
  SG_CHECK(sg__ox_tensor(c, x, &t));
  /* Each dropout draws its own masks: the seed comes from its output name. */
  const char *y = sg__ox_has_output(c, 0) ? n->output[0] : sg__ox_str(n->name);
  if (sg__ox_attr(c, "seed") == NULL) seed = (int64_t)XXH64(y, strlen(y), 0);
  sg_attr attrs[] = {SG__AF("p", ratio), SG__AI("seed", seed), SG__AI("training", 1)};
  sg_tensor outs[2];
  if (sg_graph_add_op(c->g, SG_OP_DROPOUT, 1, &t, 3, attrs, 2, outs, NULL) != SG_OK)
    return sg__ox_built(c, SG_NO_TENSOR);
  SG_CHECK(sg__ox_set_tensor(c, 0, outs[0]));
  char buf[SG__MAX_NAME];
  snprintf(buf, sizeof buf, "%.4000s.mask", y);
  SG_CHECK(sg__ox_want_name(c, outs[1].id, buf, 1));
  return sg__ox_set_tensor(c, 1, outs[1]);
}

const ox_op sg__ox_nn_ops[] = {
    {"Conv", cv_conv, 2, 3, 1, 1},
    {"BatchNormalization", cv_batch_norm, 5, 5, 1, 5},
    {"Relu", cv_relu, 1, 1, 1, 1},
    {"Sigmoid", cv_sigmoid, 1, 1, 1, 1},
    {"Tanh", cv_tanh, 1, 1, 1, 1},
    {"Clip", cv_clip, 1, 3, 1, 1},
    {"Add", cv_add, 2, 2, 1, 1},
    {"Sub", cv_sub, 2, 2, 1, 1},
    {"Mul", cv_mul, 2, 2, 1, 1},
    {"Div", cv_div, 2, 2, 1, 1},
    {"MatMul", cv_matmul, 2, 2, 1, 1},
    {"Gemm", cv_gemm, 2, 3, 1, 1},
    {"MaxPool", cv_max_pool, 1, 1, 1, 2},
    {"AveragePool", cv_avg_pool, 1, 1, 1, 1},
    {"GlobalAveragePool", cv_global_avg_pool, 1, 1, 1, 1},
    {"Flatten", cv_flatten, 1, 1, 1, 1},
    {"Transpose", cv_transpose, 1, 1, 1, 1},
    {"Softmax", cv_softmax, 1, 1, 1, 1},
    {"LogSoftmax", cv_log_softmax, 1, 1, 1, 1},
    {"ReduceMean", cv_reduce_mean, 1, 2, 1, 1},
    {"ReduceSum", cv_reduce_sum, 1, 2, 1, 1},
    {"ReduceL2", cv_reduce_l2, 1, 2, 1, 1},
    {"Dropout", cv_dropout, 1, 3, 1, 2},
};
const int sg__ox_n_nn_ops = (int)(sizeof sg__ox_nn_ops / sizeof *sg__ox_nn_ops);

const ox_op *sg__ox_op_get(const char *op_type) {
  if (op_type == NULL) return NULL;
  for (int i = 0; i < sg__ox_n_nn_ops; i++)
    if (strcmp(sg__ox_nn_ops[i].op_type, op_type) == 0) return &sg__ox_nn_ops[i];
  for (int i = 0; i < sg__ox_n_fold_ops; i++)
    if (strcmp(sg__ox_fold_ops[i].op_type, op_type) == 0) return &sg__ox_fold_ops[i];
  for (int i = 0; i < sg__ox_n_math_ops; i++)
    if (strcmp(sg__ox_math_ops[i].op_type, op_type) == 0) return &sg__ox_math_ops[i];
  for (int i = 0; i < sg__ox_n_act_ops; i++)
    if (strcmp(sg__ox_act_ops[i].op_type, op_type) == 0) return &sg__ox_act_ops[i];
  for (int i = 0; i < sg__ox_n_mask_ops; i++)
    if (strcmp(sg__ox_mask_ops[i].op_type, op_type) == 0) return &sg__ox_mask_ops[i];
  for (int i = 0; i < sg__ox_n_einsum_ops; i++)
    if (strcmp(sg__ox_einsum_ops[i].op_type, op_type) == 0) return &sg__ox_einsum_ops[i];
  for (int i = 0; i < sg__ox_n_sequence_ops; i++)
    if (strcmp(sg__ox_sequence_ops[i].op_type, op_type) == 0) return &sg__ox_sequence_ops[i];
  for (int i = 0; i < sg__ox_n_pad_ops; i++)
    if (strcmp(sg__ox_pad_ops[i].op_type, op_type) == 0) return &sg__ox_pad_ops[i];
  for (int i = 0; i < sg__ox_n_resize_ops; i++)
    if (strcmp(sg__ox_resize_ops[i].op_type, op_type) == 0) return &sg__ox_resize_ops[i];
  for (int i = 0; i < sg__ox_n_scatter_ops; i++)
    if (strcmp(sg__ox_scatter_ops[i].op_type, op_type) == 0) return &sg__ox_scatter_ops[i];
  for (int i = 0; i < sg__ox_n_gather_ops; i++)
    if (strcmp(sg__ox_gather_ops[i].op_type, op_type) == 0) return &sg__ox_gather_ops[i];
  for (int i = 0; i < sg__ox_n_slice_ops; i++)
    if (strcmp(sg__ox_slice_ops[i].op_type, op_type) == 0) return &sg__ox_slice_ops[i];
  for (int i = 0; i < sg__ox_n_topk_ops; i++)
    if (strcmp(sg__ox_topk_ops[i].op_type, op_type) == 0) return &sg__ox_topk_ops[i];
  return NULL;
}
