/* Kernels of the CUDA backend that need no library: views. A view (reshape,
 * flatten, ...) is the same bytes under another shape; the memory planner
 * usually gives its output the input's slot (sg__op_inplace_input), and
 * then there is nothing to do. Otherwise the bytes are copied on the
 * compute stream. */
#include "backend/cuda/cuda_internal.h"

typedef struct view_kernel {
  sg__kernel base;
  size_t bytes;
} view_kernel;

static sg_status view_run(sg__cuda_state *st, sg__kernel *base, void *const *in, void *const *out,
                          const sg__run_ctx *ctx) {
  (void)ctx;
  view_kernel *k = (view_kernel *)base;
  if (in[0] == out[0] || k->bytes == 0) return SG_OK;
  SG_CUDA(st, cudaMemcpyAsync(out[0], in[0], k->bytes, cudaMemcpyDeviceToDevice, st->compute), k->base.name);
  return SG_OK;
}

sg_status sg__cuda_create_view(sg__cuda_state *st, const sg_graph *g, const sg__op *op, sg__kernel **out) {
  (void)st;
  const sg__tensor *x = sg__cuda_in(g, op, 0), *y = sg__cuda_out(g, op, 0);
  if (x == NULL || y == NULL || x->nbytes != y->nbytes)
    return sg__cuda_unsupported(g, op, " (a view whose output has other bytes than its input)");
  SG_CHECK(sg__cuda_kernel_new(op, sizeof(view_kernel), view_run, out));
  ((view_kernel *)*out)->bytes = y->nbytes;
  return SG_OK;
}
