/* cross_entropy and cross_entropy_backward on CUDA: the launches of sgrt's
 * own kernels (cuda_kernels.c has them and their definition, cpu_loss.c's).
 * One block per row, fixed reduction trees: the result is the same on
 * every run. A label outside 0..C-1 is recorded in host-mapped memory by
 * the row that meets it (its loss becomes NaN) and reported by the next
 * synchronize as SG_ERR_RANGE naming the op, the row and the label, as the
 * CPU kernel reports it. */
#include <stdio.h>
#include <string.h>

#include "backend/cuda/cuda_internal.h"

#define BLOCK SG__CUDA_LIB_BLOCK

enum { NONE = 0, MEAN = 1, SUM = 2 };

typedef struct ce_kernel {
  sg__kernel base;
  sg__cuda_check check; /* the label error of this op */
  sg__cuda_lib *lib;
  int64_t N, C;
  int reduction, l64;
  unsigned grid;
  bool backward;
} ce_kernel;

static sg_status ce_run(sg__cuda_state *st, sg__kernel *base, void *const *in, void *const *out,
                        const sg__run_ctx *ctx) {
  (void)ctx;
  ce_kernel *k = (ce_kernel *)base;
  dim3 grid = {k->grid, 1, 1}, block = {BLOCK, 1, 1}, one = {1, 1, 1};
  unsigned long long *err = k->check.dflag;
  /* Kernel arguments are read through pointers to them: locals. */
  const void *a0 = in[0], *a1 = in[1];
  void *y = out[0];
  if (k->backward) { /* dloss, logits, labels -> dlogits */
    const void *labels = in[2];
    int per_row = k->reduction == NONE;
    double scale = k->reduction == MEAN ? 1.0 / (double)k->N : 1.0;
    void *args[] = {&a0, &per_row, &scale, &a1, &labels, &k->l64, &k->N, &k->C, &y, &err};
    SG_CUDA(st,
            cudaLaunchKernel((const void *)sg__cuda_library_kernel(k->lib, SG__CUDA_CE_GRAD), grid, block,
                             args, 0, st->compute),
            k->base.name);
    return SG_OK;
  }
  /* logits, labels -> loss; row losses in the workspace when reduced */
  double *rows = st->workspace;
  float *none = k->reduction == NONE ? y : NULL;
  void *args[] = {&a0, &a1, &k->l64, &k->N, &k->C, &rows, &none, &err};
  SG_CUDA(st,
          cudaLaunchKernel((const void *)sg__cuda_library_kernel(k->lib, SG__CUDA_CE_ROWS), grid, block, args,
                           0, st->compute),
          k->base.name);
  if (k->reduction != NONE) {
    double scale = k->reduction == MEAN ? 1.0 / (double)k->N : 1.0;
    void *targs[] = {&rows, &k->N, &scale, &y};
    SG_CUDA(st,
            cudaLaunchKernel((const void *)sg__cuda_library_kernel(k->lib, SG__CUDA_CE_TOTAL), one, block,
                             targs, 0, st->compute),
            k->base.name);
  }
  return SG_OK;
}

static void ce_destroy(sg__cuda_state *st, sg__kernel *base) {
  ce_kernel *k = (ce_kernel *)base;
  sg__cuda_check_remove(st, &k->check);
}

sg_status sg__cuda_create_cross_entropy(sg__cuda_state *st, const sg_graph *g, const sg__op *op,
                                        sg__kernel **out) {
  bool backward = op->kind == SG_OP_CROSS_ENTROPY_BACKWARD;
  const sg__tensor *x = sg__cuda_in(g, op, backward ? 1 : 0), *labels = sg__cuda_in(g, op, backward ? 2 : 1);
  if (x->dtype != SG_F32 || x->ndim != 2 || (labels->dtype != SG_I32 && labels->dtype != SG_I64))
    return sg__cuda_unsupported(g, op, "");
  sg__cuda_lib *lib = NULL;
  SG_CHECK(sg__cuda_library(st, &lib));
  SG_CHECK(sg__cuda_kernel_new(op, sizeof(ce_kernel), ce_run, out));
  ce_kernel *k = (ce_kernel *)*out;
  k->base.destroy = ce_destroy;
  k->lib = lib;
  k->backward = backward;
  k->N = x->dims[0], k->C = x->dims[1];
  k->reduction = (int)sg__attr_i(op, 0);
  k->l64 = labels->dtype == SG_I64;
  k->grid = sg__cuda_grid(st, k->N, 1);
  snprintf(k->check.what, sizeof k->check.what, "%s '%s'", sg_op_kind_name(op->kind), k->base.name);
  k->check.limit = k->C - 1;
  sg_status s = sg__cuda_check_add(st, &k->check);
  if (s == SG_OK && !backward && k->reduction != NONE)
    s = sg__cuda_workspace_reserve(st, (size_t)k->N * sizeof(double));
  if (s != SG_OK) {
    ce_destroy(st, &k->base);
    sg__free(k);
    *out = NULL;
  }
  return s;
}
