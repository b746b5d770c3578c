/* softmax, log_softmax, layer_norm and their backward ops on CUDA: the
 * launches of sgrt's own kernels (cuda_kernels.c has them and their
 * definitions, the CPU backend's). A row per block (grid-stride, the grid
 * capped at 32 blocks per multiprocessor); layer norm's dscale and dbias a
 * column per thread, rows added in order: the result is the same on every
 * run. f32 only, as on the CPU. */
#include "backend/cuda/cuda_internal.h"

#define BLOCK SG__CUDA_LIB_BLOCK

typedef struct rows_kernel {
  sg__kernel base;
  sg__cuda_lib *lib;
  int64_t outer, C, inner; /* softmax: x as [outer, C, inner]; layer norm: R = outer rows of D = C */
  double eps;
  int log;                  /* log_softmax */
  bool has_scale, has_bias; /* layer norm */
  unsigned grid, col_grid;
} rows_kernel;

static sg_status launch(sg__cuda_state *st, const rows_kernel *k, sg__cuda_lib_kernel which, unsigned grid,
                        void **args) {
  dim3 g = {grid, 1, 1}, b = {BLOCK, 1, 1};
  SG_CUDA(st,
          cudaLaunchKernel((const void *)sg__cuda_library_kernel(k->lib, which), g, b, args, 0, st->compute),
          k->base.name);
  return SG_OK;
}

static sg_status rows_run(sg__cuda_state *st, sg__kernel *base, void *const *in, void *const *out,
                          const sg__run_ctx *ctx) {
  (void)ctx;
  rows_kernel *k = (rows_kernel *)base;
  /* Kernel arguments are read through pointers to them: locals. */
  const void *a0 = in[0], *a1 = NULL, *a2 = NULL, *a3 = NULL, *a4 = NULL;
  void *o0 = out[0], *o1 = NULL, *o2 = NULL;
  switch (k->base.kind) {
    case SG_OP_SOFTMAX:
    case SG_OP_LOG_SOFTMAX: { /* x -> y */
      void *args[] = {&a0, &o0, &k->outer, &k->C, &k->inner, &k->log};
      return launch(st, k, SG__CUDA_SOFTMAX, k->grid, args);
    }
    case SG_OP_SOFTMAX_BACKWARD:
    case SG_OP_LOG_SOFTMAX_BACKWARD: { /* dy, y -> dx */
      a1 = in[1];
      void *args[] = {&a0, &a1, &o0, &k->outer, &k->C, &k->inner, &k->log};
      return launch(st, k, SG__CUDA_SOFTMAX_GRAD, k->grid, args);
    }
    case SG_OP_LAYER_NORM: { /* x, scale?, bias? -> y, mean, invstd */
      a1 = k->has_scale ? in[1] : NULL;
      a2 = k->has_bias ? in[2] : NULL;
      o1 = out[1], o2 = out[2];
      void *args[] = {&a0, &a1, &a2, &o0, &o1, &o2, &k->outer, &k->C, &k->eps};
      return launch(st, k, SG__CUDA_LN, k->grid, args);
    }
    default: { /* layer_norm_backward: dy, x, scale?, mean, invstd -> dx, dscale, dbias */
      a1 = in[1], a2 = k->has_scale ? in[2] : NULL, a3 = in[3], a4 = in[4];
      o1 = out[1], o2 = out[2];
      void *args[] = {&a0, &a1, &a2, &a3, &a4, &o0, &k->outer, &k->C};
      SG_CHECK(launch(st, k, SG__CUDA_LN_GRAD_ROWS, k->grid, args));
      void *cargs[] = {&a0, &a1, &a3, &a4, &o1, &o2, &k->outer, &k->C};
      return launch(st, k, SG__CUDA_LN_GRAD_COLS, k->col_grid, cargs);
    }
  }
}

sg_status sg__cuda_create_rows(sg__cuda_state *st, const sg_graph *g, const sg__op *op, sg__kernel **out) {
  for (int i = 0; i < op->n_inputs; i++) {
    const sg__tensor *t = sg__cuda_in(g, op, i);
    if (t != NULL && t->dtype != SG_F32) return sg__cuda_unsupported(g, op, " (f32 only)");
  }
  bool ln = op->kind == SG_OP_LAYER_NORM || op->kind == SG_OP_LAYER_NORM_BACKWARD;
  bool ln_bwd = op->kind == SG_OP_LAYER_NORM_BACKWARD;
  bool bwd = ln_bwd || op->kind == SG_OP_SOFTMAX_BACKWARD || op->kind == SG_OP_LOG_SOFTMAX_BACKWARD;
  const sg__tensor *x = sg__cuda_in(g, op, bwd ? 1 : 0); /* x, or y of the same shape */
  int axis;
  if (!sg__norm_axis(sg__attr_i(op, 0), x->ndim, &axis))
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "axis %lld is out of range", (long long)sg__attr_i(op, 0));
  sg__cuda_lib *lib = NULL;
  SG_CHECK(sg__cuda_library(st, &lib));
  SG_CHECK(sg__cuda_kernel_new(op, sizeof(rows_kernel), rows_run, out));
  rows_kernel *k = (rows_kernel *)*out;
  k->lib = lib;
  if (ln) { /* R rows of the trailing D elements from axis */
    k->outer = sg__numel(axis, x->dims);
    k->C = sg__numel(x->ndim - axis, x->dims + axis);
    k->inner = 1;
    k->eps = ln_bwd ? 0 : sg__attr_f(op, 1);
    k->has_scale = sg__cuda_in(g, op, ln_bwd ? 2 : 1) != NULL;
    k->has_bias = !ln_bwd && sg__cuda_in(g, op, 2) != NULL;
    k->col_grid = sg__cuda_grid(st, k->C, BLOCK);
  } else { /* [outer, C, inner] around the axis */
    k->outer = sg__numel(axis, x->dims);
    k->C = x->dims[axis];
    k->inner = sg__numel(x->ndim - axis - 1, x->dims + axis + 1);
    k->log = op->kind == SG_OP_LOG_SOFTMAX || op->kind == SG_OP_LOG_SOFTMAX_BACKWARD;
  }
  k->grid = sg__cuda_grid(st, k->outer * k->inner, 1);
  return SG_OK;
}
