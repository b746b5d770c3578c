/* reduce_sum, reduce_mean and sum_to on CUDA over any axes: the launch of
 * sgrt's own sum kernel (cuda_kernels.c), whose geometry -- x's dims split
 * into kept and reduced runs -- is computed once here. A block per output
 * element, the reduced positions summed in double in a fixed tree: the
 * same result on every run. f32 only. (The sums that end a fused chain,
 * over leading or trailing dims, run in the generated kernels instead.) */
#include "backend/cuda/cuda_internal.h"

#define BLOCK SG__CUDA_LIB_BLOCK

typedef struct sum_kernel {
  sg__kernel base;
  sg__cuda_lib *lib;
  sg__cuda_sum_geom geom;
  unsigned grid;
} sum_kernel;

static sg_status sum_run(sg__cuda_state *st, sg__kernel *base, void *const *in, void *const *out,
                         const sg__run_ctx *ctx) {
  (void)ctx;
  sum_kernel *k = (sum_kernel *)base;
  const void *x = in[0];
  void *y = out[0];
  void *args[] = {&k->geom, &x, &y};
  dim3 grid = {k->grid, 1, 1}, block = {BLOCK, 1, 1};
  SG_CUDA(st,
          cudaLaunchKernel((const void *)sg__cuda_library_kernel(k->lib, SG__CUDA_SUM), grid, block, args, 0,
                           st->compute),
          k->base.name);
  return SG_OK;
}

sg_status sg__cuda_create_sum(sg__cuda_state *st, const sg_graph *g, const sg__op *op, sg__kernel **out) {
  const sg__tensor *x = sg__cuda_in(g, op, 0);
  sg__cuda_sum_geom geom;
  if (x->dtype != SG_F32) return sg__cuda_unsupported(g, op, " (sums take f32 on CUDA)");
  if (!sg__cuda_sum_geometry(g, op, &geom))
    return sg__cuda_unsupported(g, op, " (more than 8 dims, or an axis out of range)");
  sg__cuda_lib *lib = NULL;
  SG_CHECK(sg__cuda_library(st, &lib));
  SG_CHECK(sg__cuda_kernel_new(op, sizeof(sum_kernel), sum_run, out));
  sum_kernel *k = (sum_kernel *)*out;
  k->lib = lib;
  k->geom = geom;
  k->grid = sg__cuda_grid(st, geom.n_out, 1);
  return SG_OK;
}
