/* Data movement: flatten and reshape (a copy, or nothing when the planner
 * gave input and output one buffer), transpose, concat, slice and
 * broadcast_to. Dtypes f32, i32 and i64; elements are moved as 4- or 8-byte
 * words. */
#include <string.h>

#include "backend/cpu/cpu_internal.h"

typedef struct shape_kernel {
  sg__kernel base;
  size_t esize;
  size_t bytes;      /* reshape: bytes to copy */
  sg__cpu_iter it;   /* transpose, broadcast_to: operand 0 = out, 1 = in */
  int64_t outer;     /* concat, slice: product of dims before the axis */
  int64_t out_inner; /* concat, slice: elements of one outer block of the output */
  int64_t in_inner;  /* slice: elements of one outer block of the input */
  int64_t offset;    /* slice: start * inner */
  int n_inputs;      /* concat */
  int64_t *inners;   /* concat: per input, elements of one outer block */
} shape_kernel;

typedef struct copy_job {
  const char *x;
  char *y;
} copy_job;

static void copy_range(void *ctx, int64_t begin, int64_t end) {
  const copy_job *j = ctx;
  memcpy(j->y + begin, j->x + begin, (size_t)(end - begin));
}

static sg_status copy_run(sg__cpu_state *st, sg__kernel *base, void *const *in, void *const *out,
                          const sg__run_ctx *ctx) {
  (void)st;
  (void)ctx;
  shape_kernel *k = (shape_kernel *)base;
  copy_job j = {in[0], out[0]};
  if (out[0] != in[0]) sg__cpu_parallel_for((int64_t)k->bytes, 1 << 20, copy_range, &j);
  return SG_OK;
}

/* Strided gather: out (contiguous, operand 0) from in (operand 1). */
typedef struct gather_job {
  const shape_kernel *k;
  const char *x;
  char *y;
} gather_job;

#define GATHER_ROW(T)                                       \
  do {                                                      \
    const T *xr = (const T *)j->x + p->off[1] + i0 * sx;    \
    T *yr = (T *)j->y + p->off[0] + i0;                     \
    if (sx == 1) memcpy(yr, xr, sizeof(T) * (size_t)len);   \
    else if (sx == 0)                                       \
      for (int64_t i = 0; i < len; i++) yr[i] = xr[0];      \
    else                                                    \
      for (int64_t i = 0; i < len; i++) yr[i] = xr[i * sx]; \
  } while (0)

static void gather_row(void *ctx, const sg__cpu_pos *p, int64_t i0, int64_t len) {
  const gather_job *j = ctx;
  const sg__cpu_iter *it = &j->k->it;
  const int64_t sx = it->strides[1][it->nd - 1];
  if (j->k->esize == 4) GATHER_ROW(uint32_t);
  else GATHER_ROW(uint64_t);
}

static sg_status gather_run(sg__cpu_state *st, sg__kernel *base, void *const *in, void *const *out,
                            const sg__run_ctx *ctx) {
  (void)st;
  (void)ctx;
  gather_job j = {(const shape_kernel *)base, in[0], out[0]};
  sg__cpu_iter_for(&j.k->it, gather_row, &j);
  return SG_OK;
}

/* Concat and slice copy one run per (outer block, input): the blocks are
 * independent, so they are split over threads (a transformer's q, k and v
 * are 1024 runs of 1.5 KB). */
#define MIN_PARALLEL_BYTES (256 << 10)

typedef struct runs_job {
  const shape_kernel *k;
  void *const *in;
  char *y;
} runs_job;

static void concat_range(void *ctx, int64_t o0, int64_t o1) {
  const runs_job *j = ctx;
  const shape_kernel *k = j->k;
  const size_t block = (size_t)k->out_inner * k->esize;
  for (int64_t o = o0; o < o1; o++) {
    char *y = j->y + (size_t)o * block;
    for (int i = 0; i < k->n_inputs; i++) {
      size_t b = (size_t)k->inners[i] * k->esize;
      memcpy(y, (const char *)j->in[i] + (size_t)o * b, b);
      y += b;
    }
  }
}

static void slice_range(void *ctx, int64_t o0, int64_t o1) {
  const runs_job *j = ctx;
  const shape_kernel *k = j->k;
  const char *x = j->in[0];
  size_t ob = (size_t)k->out_inner * k->esize, ib = (size_t)k->in_inner * k->esize;
  size_t off = (size_t)k->offset * k->esize;
  for (int64_t o = o0; o < o1; o++) memcpy(j->y + (size_t)o * ob, x + (size_t)o * ib + off, ob);
}

/* Fewer outer blocks than this (under MIN_PARALLEL_BYTES of output) stay on
 * the calling thread. */
static int64_t min_parallel_blocks(const shape_kernel *k) {
  size_t block = (size_t)k->out_inner * k->esize;
  return block == 0 ? k->outer + 1 : (int64_t)(MIN_PARALLEL_BYTES / block) + 1;
}

static sg_status concat_run(sg__cpu_state *st, sg__kernel *base, void *const *in, void *const *out,
                            const sg__run_ctx *ctx) {
  (void)st;
  (void)ctx;
  runs_job j = {(const shape_kernel *)base, in, out[0]};
  sg__cpu_parallel_for(j.k->outer, min_parallel_blocks(j.k), concat_range, &j);
  return SG_OK;
}

static sg_status slice_run(sg__cpu_state *st, sg__kernel *base, void *const *in, void *const *out,
                           const sg__run_ctx *ctx) {
  (void)st;
  (void)ctx;
  runs_job j = {(const shape_kernel *)base, in, out[0]};
  sg__cpu_parallel_for(j.k->outer, min_parallel_blocks(j.k), slice_range, &j);
  return SG_OK;
}

static void shape_destroy(sg__kernel *base) { sg__free(((shape_kernel *)base)->inners); }

sg_status sg__cpu_create_shape(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                               sg__kernel **out) {
  (void)st;
  (void)mode;
  const sg__tensor *x = sg__cpu_in(g, op, 0), *y = sg__cpu_out(g, op, 0);
  if (x->dtype != SG_F32 && x->dtype != SG_I32 && x->dtype != SG_I64)
    return sg__cpu_unsupported(g, op, " (takes f32, i32, i64)");
  sg__cpu_run_fn run = op->kind == SG_OP_CONCAT                                        ? concat_run
                       : op->kind == SG_OP_SLICE                                       ? slice_run
                       : op->kind == SG_OP_TRANSPOSE || op->kind == SG_OP_BROADCAST_TO ? gather_run
                                                                                       : copy_run;
  sg__kernel *kb;
  SG_CHECK(sg__cpu_kernel_new(op, sizeof(shape_kernel), run, &kb));
  shape_kernel *k = (shape_kernel *)kb;
  kb->destroy = shape_destroy;
  k->esize = sg_dtype_size(x->dtype);
  k->bytes = y->nbytes;
  int64_t strides[3][SG_MAX_DIMS] = {{0}};
  switch (op->kind) {
    case SG_OP_TRANSPOSE: {
      const int64_t *perm = sg__attr_ints(op, 0);
      int64_t xs[SG_MAX_DIMS];
      sg__cpu_bcast_strides(x->ndim, x->dims, x->ndim, x->dims, xs);
      sg__cpu_bcast_strides(y->ndim, y->dims, y->ndim, y->dims, strides[0]);
      for (int i = 0; i < y->ndim; i++) strides[1][i] = xs[perm[i]];
      sg__cpu_iter_init(&k->it, y->ndim, y->dims, 2, (const int64_t(*)[SG_MAX_DIMS])strides);
      break;
    }
    case SG_OP_BROADCAST_TO:
      sg__cpu_bcast_strides(y->ndim, y->dims, y->ndim, y->dims, strides[0]);
      sg__cpu_bcast_strides(y->ndim, y->dims, x->ndim, x->dims, strides[1]);
      sg__cpu_iter_init(&k->it, y->ndim, y->dims, 2, (const int64_t(*)[SG_MAX_DIMS])strides);
      break;
    case SG_OP_CONCAT: {
      int axis;
      if (!sg__norm_axis(sg__attr_i(op, 0), y->ndim, &axis)) {
        sg__free(kb);
        return sg__op_error(op, SG_ERR_ATTRIBUTE, "axis out of range");
      }
      k->outer = sg__numel(axis, y->dims);
      k->n_inputs = op->n_inputs;
      k->inners = sg__malloc(sizeof(int64_t) * (size_t)op->n_inputs);
      if (k->inners == NULL) {
        sg__free(kb);
        return sg__op_error(op, SG_ERR_NO_MEMORY, "out of memory");
      }
      for (int i = 0; i < op->n_inputs; i++) {
        const sg__tensor *t = sg__cpu_in(g, op, i);
        if (t->dtype != x->dtype) {
          shape_destroy(kb);
          sg__free(kb);
          return sg__cpu_unsupported(g, op, " (inputs of different dtypes)");
        }
        k->inners[i] = sg__numel(t->ndim - axis, t->dims + axis);
        k->out_inner += k->inners[i];
      }
      break;
    }
    case SG_OP_SLICE: {
      int axis;
      if (!sg__norm_axis(sg__attr_i(op, 0), x->ndim, &axis)) {
        sg__free(kb);
        return sg__op_error(op, SG_ERR_ATTRIBUTE, "axis out of range");
      }
      int64_t inner = sg__numel(x->ndim - axis - 1, x->dims + axis + 1);
      k->outer = sg__numel(axis, x->dims);
      k->in_inner = x->dims[axis] * inner;
      k->out_inner = y->dims[axis] * inner;
      k->offset = sg__attr_i(op, 1) * inner;
      break;
    }
    default: break;
  }
  *out = kb;
  return SG_OK;
}
