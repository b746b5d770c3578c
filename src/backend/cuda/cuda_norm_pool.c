/* batch_norm, batch_norm_backward, max_pool2d, max_pool2d_backward,
 * avg_pool2d and global_avg_pool through cuDNN's normalization and pooling
 * API (the one cuDNN 9 keeps next to its graph API; marked deprecated in
 * its headers, still exported and supported).
 *
 * Batch norm (SPATIAL mode, x viewed as [N, C, prod(rest), 1]) keeps the
 * graph's statistics as cuDNN does: the batch mean and the inverse standard
 * deviation (saveMean, saveInvVariance are outputs 1 and 2), running
 * statistics updated with the momentum and the unbiased variance as
 * PyTorch does -- or left alone when the run asks for batch statistics
 * only. The inference form (running statistics) runs in evaluation passes
 * and for ops in inference form; its backward pass is not supported here.
 *
 * Pooling: symmetric padding, floor-mode windows (ceil_mode only where it
 * adds no window); max pooling in cuDNN's deterministic mode, its backward
 * pass recomputing the forward output into the workspace (the graph keeps
 * x, not y); global average pooling is average pooling over the whole
 * plane. */
#include <string.h>

#include "backend/cuda/cuda_internal.h"

#define DNN(call, what)                                               \
  do {                                                                \
    cudnnStatus_t s_ = (call);                                        \
    if (s_ != CUDNN_STATUS_SUCCESS) return sg__cudnn_error(s_, what); \
  } while (0)

static sg_status nchw(cudnnTensorDescriptor_t *d, int64_t n, int64_t c, int64_t h, int64_t w) {
  if (n > INT32_MAX || c > INT32_MAX || h > INT32_MAX || w > INT32_MAX)
    return sg__error(SG_ERR_UNSUPPORTED, "cudnn: a dim past 2^31");
  DNN(cudnnCreateTensorDescriptor(d), "tensor descriptor");
  DNN(cudnnSetTensor4dDescriptor(*d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, (int)n, (int)c, (int)h, (int)w),
      "tensor descriptor");
  return SG_OK;
}

/* x [N, C, ...] as [N, C, prod(rest), 1]. */
static sg_status nc_rest(cudnnTensorDescriptor_t *d, const sg__tensor *x) {
  int64_t rest = 1;
  for (int i = 2; i < x->ndim; i++) rest *= x->dims[i];
  return nchw(d, x->dims[0], x->dims[1], rest, 1);
}

/* ---- batch norm ------------------------------------------------------------------ */

enum { EPS, MOMENTUM, TRAINING };
enum { BWD_EPS, BWD_TRAINING };

typedef struct bn_kernel {
  sg__kernel base;
  cudnnTensorDescriptor_t x, c; /* x (and y, dy, dx); the per-channel [1, C, 1, 1] */
  double eps, momentum;
  bool batch, backward;
} bn_kernel;

static sg_status bn_run(sg__cuda_state *st, sg__kernel *base, void *const *in, void *const *out,
                        const sg__run_ctx *ctx) {
  bn_kernel *k = (bn_kernel *)base;
  const float one = 1.0f, zero = 0.0f;
  if (k->backward) /* dy, x, gamma, mean, invstd -> dx, dgamma, dbeta */
    DNN(cudnnBatchNormalizationBackward(st->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, k->x,
                                        in[1], k->x, in[0], k->x, out[0], k->c, in[2], out[1], out[2], k->eps,
                                        in[3], in[4]),
        k->base.name);
  else if (k->batch) /* x, gamma, beta, running mean, running var -> y, mean, invstd */
    DNN(cudnnBatchNormalizationForwardTraining(st->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, k->x, in[0],
                                               k->x, out[0], k->c, in[1], in[2], k->momentum,
                                               ctx->batch_stats_only ? NULL : in[3],
                                               ctx->batch_stats_only ? NULL : in[4], k->eps, out[1], out[2]),
        k->base.name);
  else
    DNN(cudnnBatchNormalizationForwardInference(st->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, k->x, in[0],
                                                k->x, out[0], k->c, in[1], in[2], in[3], in[4], k->eps),
        k->base.name);
  return SG_OK;
}

static void bn_destroy(sg__cuda_state *st, sg__kernel *base) {
  (void)st;
  bn_kernel *k = (bn_kernel *)base;
  if (k->x) cudnnDestroyTensorDescriptor(k->x);
  if (k->c) cudnnDestroyTensorDescriptor(k->c);
}

sg_status sg__cuda_create_batch_norm(sg__cuda_state *st, const sg_graph *g, const sg__op *op,
                                     sg__exec_mode mode, sg__kernel **out) {
  (void)st;
  bool backward = op->kind == SG_OP_BATCH_NORM_BACKWARD;
  const sg__tensor *x = sg__cuda_in(g, op, backward ? 1 : 0);
  if (x->dtype != SG_F32) return sg__cuda_unsupported(g, op, "");
  bool training = sg__attr_i(op, backward ? BWD_TRAINING : TRAINING) != 0;
  if (backward && !training)
    return sg__cuda_unsupported(g, op, " (the backward pass of batch norm in inference form)");
  /* cuDNN's spatial batch norm needs eps >= CUDNN_BN_MIN_EPSILON. */
  double eps = sg__attr_f(op, backward ? BWD_EPS : EPS);
  if (eps < CUDNN_BN_MIN_EPSILON)
    return sg__op_error(op, SG_ERR_UNSUPPORTED, "cuDNN needs eps >= %g, not %g", CUDNN_BN_MIN_EPSILON, eps);
  SG_CHECK(sg__cuda_kernel_new(op, sizeof(bn_kernel), bn_run, out));
  bn_kernel *k = (bn_kernel *)*out;
  k->base.destroy = bn_destroy;
  k->backward = backward;
  k->batch = backward || (training && mode == SG__MODE_TRAIN);
  k->eps = eps;
  k->momentum = backward ? 0 : sg__attr_f(op, MOMENTUM);
  sg_status s = nc_rest(&k->x, x);
  if (s == SG_OK) s = nchw(&k->c, 1, x->dims[1], 1, 1);
  if (s != SG_OK) {
    bn_destroy(st, &k->base);
    sg__free(k);
    *out = NULL;
  }
  return s;
}

/* ---- pooling ----------------------------------------------------------------------- */

enum { KERNEL, STRIDE, PADDING, CEIL_MODE, COUNT_INCLUDE_PAD };

typedef struct pool_kernel {
  sg__kernel base;
  cudnnPoolingDescriptor_t pool;
  cudnnTensorDescriptor_t x, y;
  size_t y_bytes; /* backward: the recomputed forward output, in the workspace */
  bool backward;
} pool_kernel;

static sg_status pool_run(sg__cuda_state *st, sg__kernel *base, void *const *in, void *const *out,
                          const sg__run_ctx *ctx) {
  (void)ctx;
  pool_kernel *k = (pool_kernel *)base;
  const float one = 1.0f, zero = 0.0f;
  if (!k->backward) {
    DNN(cudnnPoolingForward(st->dnn, k->pool, &one, k->x, in[0], &zero, k->y, out[0]), k->base.name);
    return SG_OK;
  }
  /* dy, x -> dx; y again into the workspace first. */
  void *y = st->workspace;
  DNN(cudnnPoolingForward(st->dnn, k->pool, &one, k->x, in[1], &zero, k->y, y), k->base.name);
  DNN(cudnnPoolingBackward(st->dnn, k->pool, &one, k->y, y, k->y, in[0], k->x, in[1], &zero, k->x, out[0]),
      k->base.name);
  return SG_OK;
}

static void pool_destroy(sg__cuda_state *st, sg__kernel *base) {
  (void)st;
  pool_kernel *k = (pool_kernel *)base;
  if (k->pool) cudnnDestroyPoolingDescriptor(k->pool);
  if (k->x) cudnnDestroyTensorDescriptor(k->x);
  if (k->y) cudnnDestroyTensorDescriptor(k->y);
}

sg_status sg__cuda_create_pool(sg__cuda_state *st, const sg_graph *g, const sg__op *op, sg__kernel **out) {
  bool backward = op->kind == SG_OP_MAX_POOL2D_BACKWARD || op->kind == SG_OP_AVG_POOL2D_BACKWARD;
  bool global = op->kind == SG_OP_GLOBAL_AVG_POOL;
  bool max = op->kind == SG_OP_MAX_POOL2D || op->kind == SG_OP_MAX_POOL2D_BACKWARD;
  const sg__tensor *x = backward ? sg__cuda_out(g, op, 0) : sg__cuda_in(g, op, 0);
  const sg__tensor *y = backward ? sg__cuda_in(g, op, 0) : sg__cuda_out(g, op, 0);
  if (x->dtype != SG_F32 || x->ndim != 4 || y->ndim != 4) return sg__cuda_unsupported(g, op, "");
  if (op->kind == SG_OP_AVG_POOL2D_BACKWARD)
    return sg__cuda_unsupported(g, op, " (the average pooling gradient has no CUDA kernel yet)");
  int64_t kh = x->dims[2], kw = x->dims[3], sh = 1, sw = 1, ph = 0, pw = 0;
  bool include_pad = false;
  if (!global) {
    const int64_t *k = sg__attr_ints(op, KERNEL), *s = sg__attr_ints(op, STRIDE),
                  *p = sg__attr_ints(op, PADDING);
    kh = k[0], kw = k[1], sh = s[0], sw = s[1], ph = p[0], pw = p[1];
    if (p[0] != p[2] || p[1] != p[3])
      return sg__cuda_unsupported(g, op, " (asymmetric padding: cuDNN pools with one padding per dim)");
    include_pad = !max && sg__attr_i(op, COUNT_INCLUDE_PAD) != 0;
    /* cuDNN's windows are the floor-mode ones. */
    int64_t fh = (x->dims[2] + 2 * ph - kh) / sh + 1, fw = (x->dims[3] + 2 * pw - kw) / sw + 1;
    if (fh != y->dims[2] || fw != y->dims[3])
      return sg__cuda_unsupported(g, op,
                                  " (ceil_mode adding a window: cuDNN's pooling windows are floor-mode)");
  }
  SG_CHECK(sg__cuda_kernel_new(op, sizeof(pool_kernel), pool_run, out));
  pool_kernel *k = (pool_kernel *)*out;
  k->base.destroy = pool_destroy;
  k->backward = backward;
  cudnnPoolingMode_t pm = max           ? CUDNN_POOLING_MAX_DETERMINISTIC
                          : include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                        : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  sg_status s = SG_OK;
  cudnnStatus_t e = cudnnCreatePoolingDescriptor(&k->pool);
  if (e == CUDNN_STATUS_SUCCESS)
    e = cudnnSetPooling2dDescriptor(k->pool, pm, CUDNN_PROPAGATE_NAN, (int)kh, (int)kw, (int)ph, (int)pw,
                                    (int)sh, (int)sw);
  if (e != CUDNN_STATUS_SUCCESS) s = sg__cudnn_error(e, "pooling descriptor");
  if (s == SG_OK) s = nchw(&k->x, x->dims[0], x->dims[1], x->dims[2], x->dims[3]);
  if (s == SG_OK) s = nchw(&k->y, y->dims[0], y->dims[1], y->dims[2], y->dims[3]);
  if (s == SG_OK && backward) s = sg__cuda_workspace_reserve(st, y->nbytes);
  if (s != SG_OK) {
    pool_destroy(st, &k->base);
    sg__free(k);
    *out = NULL;
  }
  return s;
}
