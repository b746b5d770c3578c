/* Sample graphs for tests/data (see sample_graphs.h). Everything here is
 * deterministic: initializers come from a fixed-seed integer PRNG and exact
 * float arithmetic, so the same graph (and hash) is built on every host and
 * by every compiler. Each tensor is created in its own statement: C leaves
 * the evaluation order of function arguments unspecified (gcc and clang
 * differ), and creation order decides tensor ids. */
#include "sample_graphs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* xorshift64 seeded from the tensor's name, so every tensor has its own
 * stream and adding a tensor does not shift the others' values. */
static uint64_t name_seed(const char *name) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (const char *c = name; *c; c++) h = (h ^ (uint8_t)*c) * 1099511628211ull;
  return h | 1;
}

/* Values in [-scale, scale): 24 random bits give an exact float in [-1, 1). */
static void fill(float *p, size_t n, const char *name, float scale) {
  uint64_t s = name_seed(name);
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    p[i] = ((float)(s >> 40) / 8388608.0f - 1.0f) * scale;
  }
}

static size_t numel(int ndim, const int64_t *dims) {
  size_t n = 1;
  for (int i = 0; i < ndim; i++) n *= (size_t)dims[i];
  return n;
}

/* kind: 'r' random scaled by 1/sqrt(fan_in), '0' zeros, '1' ones. */
static sg_tensor add_f32(sg_graph *g, const char *name, sg_role role, int ndim, const int64_t *dims,
                         char kind) {
  size_t n = numel(ndim, dims);
  float *buf = calloc(n, sizeof *buf);
  if (buf == NULL) return SG_NO_TENSOR;
  if (kind == 'r') {
    size_t fan_in = ndim > 1 ? n / (size_t)dims[0] : n;
    fill(buf, n, name, (float)(1.0 / sqrt((double)fan_in)));
  } else if (kind == '1') {
    for (size_t i = 0; i < n; i++) buf[i] = 1.0f;
  }
  sg_tensor t = sg_graph_add_tensor(g, name, SG_F32, role, ndim, dims, buf);
  free(buf);
  return t;
}

static sg_tensor param(sg_graph *g, const char *name, int ndim, const int64_t *dims) {
  return add_f32(g, name, SG_ROLE_PARAMETER, ndim, dims, 'r');
}

static sg_status finish(sg_graph *g, sg_graph **out) {
  sg_status st = sg_graph_finalize(g);
  if (st != SG_OK) {
    sg_graph_destroy(g);
    return st;
  }
  *out = g;
  return SG_OK;
}

/* SGD with momentum for one parameter: the gradient is fed as an input (the
 * sample predates autodiff), the momentum buffer starts at zero. */
static void sgd(sg_graph *g, sg_tensor p, const char *pname, sg_tensor lr, int nesterov) {
  sg_tensor_info info;
  if (sg_graph_tensor_info(g, p, &info) != SG_OK) return; /* sticky error already recorded */
  char name[128];
  strcpy(name, pname);
  strcat(name, ".grad");
  sg_tensor grad = sg_graph_add_tensor(g, name, SG_F32, SG_ROLE_INPUT, info.ndim, info.dims, NULL);
  strcpy(name, pname);
  strcat(name, ".momentum");
  sg_tensor buf = add_f32(g, name, SG_ROLE_OPTIMIZER_STATE, info.ndim, info.dims, '0');
  sg_sgd_params sp = SG_SGD_PARAMS_INIT;
  sp.momentum = 0.9;
  sp.weight_decay = 1e-4;
  sp.nesterov = nesterov;
  sg_sgd_update(g, p, grad, lr, buf, &sp);
}

sg_status sample_build_mlp(sg_graph **out) {
  *out = NULL;
  sg_graph *g;
  sg_status st = sg_graph_create(&g);
  if (st != SG_OK) return st;
  int64_t xs[] = {8, 64}, ys[] = {8}, w1s[] = {32, 64}, b1s[] = {32}, w2s[] = {10, 32}, b2s[] = {10};
  sg_tensor x = sg_input(g, "x", SG_F32, 2, xs);
  sg_tensor y = sg_input(g, "labels", SG_I64, 1, ys);
  sg_tensor lr = sg_input(g, "lr", SG_F32, 0, NULL);
  sg_tensor w1 = param(g, "fc1.weight", 2, w1s);
  sg_tensor b1 = param(g, "fc1.bias", 1, b1s);
  sg_tensor w2 = param(g, "fc2.weight", 2, w2s);
  sg_tensor b2 = param(g, "fc2.bias", 1, b2s);
  sg_tensor h = sg_relu(g, sg_linear(g, x, w1, b1));
  sg_tensor logits = sg_linear(g, h, w2, b2);
  sg_tensor loss = sg_cross_entropy(g, logits, y, SG_REDUCTION_MEAN);
  sg_tensor_set_name(g, logits, "logits");
  sg_tensor_set_name(g, loss, "loss");
  sg_graph_mark_output(g, loss);
  sg_graph_mark_output(g, logits);
  sgd(g, w1, "fc1.weight", lr, 0);
  sgd(g, b1, "fc1.bias", lr, 0);
  sgd(g, w2, "fc2.weight", lr, 1);
  sgd(g, b2, "fc2.bias", lr, 1);
  return finish(g, out);
}

sg_status sample_build_cnn(sg_graph **out) {
  *out = NULL;
  sg_graph *g;
  sg_status st = sg_graph_create(&g);
  if (st != SG_OK) return st;
  int64_t xs[] = {2, 3, 16, 16}, ys[] = {2}, c1s[] = {8, 3, 3, 3}, c8[] = {8}, c2s[] = {16, 4, 3, 3};
  int64_t fcs[] = {10, 16}, f10[] = {10};
  sg_tensor x = sg_input(g, "images", SG_F32, 4, xs);
  sg_tensor y = sg_input(g, "labels", SG_I64, 1, ys);
  sg_conv2d_params cp = SG_CONV2D_PARAMS_INIT;
  cp.padding[0] = cp.padding[1] = cp.padding[2] = cp.padding[3] = 1;
  sg_tensor w1 = param(g, "conv1.weight", 4, c1s);
  sg_tensor b1 = param(g, "conv1.bias", 1, c8);
  sg_tensor h = sg_conv2d(g, x, w1, b1, &cp);
  sg_tensor gamma = add_f32(g, "bn1.weight", SG_ROLE_PARAMETER, 1, c8, '1');
  sg_tensor beta = add_f32(g, "bn1.bias", SG_ROLE_PARAMETER, 1, c8, '0');
  sg_tensor rmean = add_f32(g, "bn1.running_mean", SG_ROLE_STATE, 1, c8, '0');
  sg_tensor rvar = add_f32(g, "bn1.running_var", SG_ROLE_STATE, 1, c8, '1');
  h = sg_relu(g, sg_batch_norm(g, h, gamma, beta, rmean, rvar, NULL));
  sg_pool2d_params pp = SG_POOL2D_PARAMS_INIT;
  pp.kernel[0] = pp.kernel[1] = 2;
  h = sg_max_pool2d(g, h, &pp);
  cp.stride[0] = cp.stride[1] = 2;
  cp.groups = 2;
  sg_tensor w2 = param(g, "conv2.weight", 4, c2s);
  h = sg_conv2d(g, h, w2, SG_NO_TENSOR, &cp);
  h = sg_flatten(g, sg_global_avg_pool(g, h), 1);
  sg_tensor fw = param(g, "fc.weight", 2, fcs);
  sg_tensor fb = param(g, "fc.bias", 1, f10);
  sg_tensor logits = sg_linear(g, h, fw, fb);
  sg_tensor loss = sg_cross_entropy(g, logits, y, SG_REDUCTION_MEAN);
  sg_tensor_set_name(g, loss, "loss");
  sg_graph_mark_output(g, loss);
  return finish(g, out);
}

sg_status sample_build_zoo(sg_graph **out) {
  *out = NULL;
  sg_graph *g;
  sg_status st = sg_graph_create(&g);
  if (st != SG_OK) return st;
  int64_t xs[] = {2, 4, 8, 8}, ws[] = {6, 2, 3, 3}, c6[] = {6}, b611[] = {6, 1, 1}, ls[] = {2};
  int64_t mw[] = {12, 5}, gw[] = {5, 12}, f5[] = {5}, scalar1[] = {1};
  sg_tensor x = sg_input(g, "x", SG_F32, 4, xs);
  sg_tensor labels = sg_input(g, "labels", SG_I32, 1, ls);
  sg_tensor lr = sg_input(g, "lr", SG_F32, 1, scalar1);
  sg_conv2d_params cp = SG_CONV2D_PARAMS_INIT;
  cp.padding[0] = 1, cp.padding[1] = 2, cp.padding[2] = 1, cp.padding[3] = 0;
  cp.groups = 2;
  sg_tensor cw = param(g, "conv.w", 4, ws);
  sg_tensor cb = param(g, "conv.b", 1, c6);
  sg_tensor h = sg_conv2d(g, x, cw, cb, &cp);
  sg_batch_norm_params bp = SG_BATCH_NORM_PARAMS_INIT;
  bp.training = 0;
  bp.eps = 1e-3;
  sg_tensor bn_g = add_f32(g, "bn.g", SG_ROLE_PARAMETER, 1, c6, '1');
  sg_tensor bn_b = add_f32(g, "bn.b", SG_ROLE_PARAMETER, 1, c6, '0');
  sg_tensor bn_rm = add_f32(g, "bn.rm", SG_ROLE_STATE, 1, c6, '0');
  sg_tensor bn_rv = add_f32(g, "bn.rv", SG_ROLE_STATE, 1, c6, '1');
  h = sg_batch_norm(g, h, bn_g, bn_b, bn_rm, bn_rv, &bp);
  h = sg_tanh(g, sg_sigmoid(g, sg_gelu(g, sg_relu6(g, sg_relu(g, h)), 1)));
  sg_tensor k = add_f32(g, "k", SG_ROLE_CONSTANT, 3, b611, 'r');
  sg_tensor ones = add_f32(g, "ones", SG_ROLE_CONSTANT, 3, b611, '1');
  h = sg_div(g, sg_mul(g, sg_sub(g, sg_add(g, h, k), k), k), ones);
  h = sg_pow_scalar(g, sg_mul_scalar(g, sg_add_scalar(g, h, 2.0), 0.5), 2.0);
  sg_pool2d_params ap = SG_POOL2D_PARAMS_INIT;
  ap.kernel[0] = ap.kernel[1] = 2;
  ap.count_include_pad = 0;
  sg_tensor avg = sg_avg_pool2d(g, h, &ap);
  sg_pool2d_params mp = SG_POOL2D_PARAMS_INIT;
  mp.kernel[0] = mp.kernel[1] = 3;
  mp.stride[0] = mp.stride[1] = 2;
  mp.padding[0] = mp.padding[1] = mp.padding[2] = mp.padding[3] = 1;
  mp.ceil_mode = 0;
  sg_tensor mx = sg_max_pool2d(g, h, &mp);
  sg_tensor both[] = {avg, mx};
  h = sg_flatten(g, sg_global_avg_pool(g, sg_concat(g, 2, both, -3)), 1); /* [2,12] */
  int64_t s3[] = {2, 3, 4}, perm[] = {0, 2, 1}, s2[] = {0, -1};
  h = sg_reshape(g, sg_transpose(g, sg_reshape(g, h, 3, s3), 3, perm), 2, s2);
  sg_tensor mw_t = param(g, "mm.w", 2, mw);
  sg_tensor gw_t = param(g, "gemm.w", 2, gw);
  sg_tensor gc = param(g, "gemm.c", 1, f5);
  sg_gemm_params gp = SG_GEMM_PARAMS_INIT;
  gp.trans_b = 1;
  gp.alpha = 0.5;
  gp.beta = 2.0;
  sg_tensor mm = sg_matmul(g, h, mw_t);
  sg_tensor gm = sg_gemm(g, h, gw_t, gc, &gp);
  sg_tensor logits = sg_add(g, mm, gm);
  logits = sg_dropout(g, logits, 0.25, 1234567890123ull, 1);
  sg_tensor sm = sg_softmax(g, logits, -1);
  sg_tensor lsm = sg_log_softmax(g, logits, 1);
  int64_t ax[] = {-1};
  sg_tensor rm = sg_reduce_mean(g, sm, 1, ax, 1);
  sg_tensor rs = sg_reduce_sum(g, lsm, 0, NULL, 0);
  sg_tensor loss = sg_cross_entropy(g, logits, labels, SG_REDUCTION_SUM);
  sg_tensor_set_name(g, loss, "loss");
  sg_graph_mark_output(g, loss);
  sg_graph_mark_output(g, rm);
  sg_graph_mark_output(g, rs);
  sgd(g, mw_t, "mm.w", lr, 1);
  sg_tensor m = add_f32(g, "gemm.w.m", SG_ROLE_OPTIMIZER_STATE, 2, gw, '0');
  sg_tensor v = add_f32(g, "gemm.w.v", SG_ROLE_OPTIMIZER_STATE, 2, gw, '0');
  sg_tensor step = add_f32(g, "gemm.w.step", SG_ROLE_OPTIMIZER_STATE, 1, scalar1, '0');
  sg_tensor grad = sg_graph_add_tensor(g, "gemm.w.grad", SG_F32, SG_ROLE_INPUT, 2, gw, NULL);
  sg_adamw_params adp = SG_ADAMW_PARAMS_INIT;
  adp.beta1 = 0.8;
  sg_adamw_update(g, gw_t, grad, lr, m, v, step, &adp);
  return finish(g, out);
}

sg_status sample_build_tiny(sg_graph **out) {
  *out = NULL;
  sg_graph *g;
  sg_status st = sg_graph_create(&g);
  if (st != SG_OK) return st;
  int64_t xs[] = {4};
  sg_tensor y = sg_relu(g, sg_input(g, "x", SG_F32, 1, xs));
  sg_graph_mark_output(g, y);
  return finish(g, out);
}
