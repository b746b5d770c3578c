/* dropout and dropout_backward on CUDA: the launches of sgrt's own kernels
 * (cuda_kernels.c). The masks are the CPU backend's, element for element:
 * the key comes from backend/dropout_rng.h here, from the op's seed and the
 * run context (seed, step, subsequence), and the kernel draws each
 * element's bits from it and the index alone. Outside training (attribute
 * training = 0, or an evaluation pass) dropout is the identity: a device
 * copy when the planner gave y a slot of its own, and the mask untouched. */
#include "backend/cuda/cuda_internal.h"
#include "backend/dropout_rng.h"

#define BLOCK SG__CUDA_LIB_BLOCK

enum { P, SEED, TRAINING };

typedef struct dropout_kernel {
  sg__kernel base;
  sg__cuda_lib *lib;
  int64_t n;
  uint64_t seed;
  unsigned threshold, grid;
  float scale;
  bool active;
} dropout_kernel;

static sg_status dropout_run(sg__cuda_state *st, sg__kernel *base, void *const *in, void *const *out,
                             const sg__run_ctx *ctx) {
  dropout_kernel *k = (dropout_kernel *)base;
  const void *x = in[0];
  void *y = out[0];
  dim3 grid = {k->grid, 1, 1}, block = {BLOCK, 1, 1};
  if (k->base.kind == SG_OP_DROPOUT_BACKWARD) { /* dy, mask -> dx */
    const void *mask = in[1];
    void *args[] = {&x, &mask, &y, &k->n, &k->scale};
    SG_CUDA(st,
            cudaLaunchKernel((const void *)sg__cuda_library_kernel(k->lib, SG__CUDA_DROPOUT_GRAD), grid,
                             block, args, 0, st->compute),
            k->base.name);
    return SG_OK;
  }
  if (!k->active) {
    if (y != x)
      SG_CUDA(st, cudaMemcpyAsync(y, x, (size_t)k->n * sizeof(float), cudaMemcpyDeviceToDevice, st->compute),
              k->base.name);
    return SG_OK;
  }
  void *mask = out[1];
  unsigned long long key = sg__dropout_key(k->seed, ctx->seed, ctx->step, ctx->rng_subsequence);
  void *args[] = {&x, &y, &mask, &k->n, &key, &k->threshold, &k->scale};
  SG_CUDA(st,
          cudaLaunchKernel((const void *)sg__cuda_library_kernel(k->lib, SG__CUDA_DROPOUT), grid, block, args,
                           0, st->compute),
          k->base.name);
  return SG_OK;
}

sg_status sg__cuda_create_dropout(sg__cuda_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                                  sg__kernel **out) {
  const sg__tensor *x = sg__cuda_in(g, op, 0);
  bool fwd = op->kind == SG_OP_DROPOUT;
  if (x->dtype != SG_F32 || (!fwd && sg__cuda_in(g, op, 1)->dtype != SG_U8))
    return sg__cuda_unsupported(g, op, " (takes f32 data and a u8 mask)");
  sg__cuda_lib *lib = NULL;
  SG_CHECK(sg__cuda_library(st, &lib));
  SG_CHECK(sg__cuda_kernel_new(op, sizeof(dropout_kernel), dropout_run, out));
  dropout_kernel *k = (dropout_kernel *)*out;
  double p = sg__attr_f(op, P);
  k->lib = lib;
  k->n = sg__numel(x->ndim, x->dims);
  k->scale = (float)(1.0 / (1.0 - p));
  k->threshold = sg__dropout_threshold(p);
  if (fwd) {
    k->active = sg__attr_i(op, TRAINING) != 0 && mode == SG__MODE_TRAIN;
    k->seed = (uint64_t)sg__attr_i(op, SEED);
  }
  k->grid = sg__cuda_grid(st, k->n, BLOCK);
  return SG_OK;
}
