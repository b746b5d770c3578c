/* Kernels of the CUDA backend that only move bytes, as copies on the
 * compute stream. A view (reshape, flatten, ...) is the same bytes under
 * another shape; the memory planner usually gives its output the input's
 * slot (sg__op_inplace_input), and then there is nothing to do. concat and
 * slice move, for each of the `outer` leading positions before the axis,
 * one contiguous run of (dims along the axis) x (inner elements after it):
 * one strided 2-D copy per input (cudaMemcpy2DAsync, device to device). */
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

typedef struct runs_kernel {
  sg__kernel base;
  size_t outer;   /* positions before the axis */
  size_t out_run; /* bytes of one output run (the whole axis, or the slice) */
  size_t in_run;  /* slice: bytes of one input run; concat: unused */
  size_t offset;  /* slice: bytes into an input run where the slice starts */
  int n;          /* concat: inputs */
  size_t run[];   /* concat: bytes of input i's run */
} runs_kernel;

static sg_status concat_run(sg__cuda_state *st, sg__kernel *base, void *const *in, void *const *out,
                            const sg__run_ctx *ctx) {
  (void)ctx;
  runs_kernel *k = (runs_kernel *)base;
  size_t at = 0;
  for (int i = 0; i < k->n; i++) {
    SG_CUDA(st,
            cudaMemcpy2DAsync((char *)out[0] + at, k->out_run, in[i], k->run[i], k->run[i], k->outer,
                              cudaMemcpyDeviceToDevice, st->compute),
            k->base.name);
    at += k->run[i];
  }
  return SG_OK;
}

static sg_status slice_run(sg__cuda_state *st, sg__kernel *base, void *const *in, void *const *out,
                           const sg__run_ctx *ctx) {
  (void)ctx;
  runs_kernel *k = (runs_kernel *)base;
  SG_CUDA(st,
          cudaMemcpy2DAsync(out[0], k->out_run, (const char *)in[0] + k->offset, k->in_run, k->out_run,
                            k->outer, cudaMemcpyDeviceToDevice, st->compute),
          k->base.name);
  return SG_OK;
}

sg_status sg__cuda_create_runs(sg__cuda_state *st, const sg_graph *g, const sg__op *op, sg__kernel **out) {
  (void)st;
  const sg__tensor *x = sg__cuda_in(g, op, 0), *y = sg__cuda_out(g, op, 0);
  int axis;
  if (!sg__norm_axis(sg__attr_i(op, 0), x->ndim, &axis))
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "axis %lld is out of range", (long long)sg__attr_i(op, 0));
  size_t elem = sg_dtype_size(x->dtype);
  size_t inner = (size_t)sg__numel(x->ndim - axis - 1, x->dims + axis + 1) * elem;
  bool concat = op->kind == SG_OP_CONCAT;
  int n = concat ? op->n_inputs : 0;
  SG_CHECK(sg__cuda_kernel_new(op, sizeof(runs_kernel) + (size_t)n * sizeof(size_t),
                               concat ? concat_run : slice_run, out));
  runs_kernel *k = (runs_kernel *)*out;
  k->outer = (size_t)sg__numel(axis, x->dims);
  k->out_run = (size_t)y->dims[axis] * inner;
  k->n = n;
  for (int i = 0; i < n; i++) k->run[i] = (size_t)sg__cuda_in(g, op, i)->dims[axis] * inner;
  if (!concat) {
    k->in_run = (size_t)x->dims[axis] * inner;
    k->offset = (size_t)sg__attr_i(op, 1) * inner;
  }
  return SG_OK;
}
