/* embedding and embedding_backward on CUDA: the launches of sgrt's own
 * kernels (cuda_kernels.c has them and their definition, cpu_embedding.c's).
 * The forward copies a row per block; the backward gives each element of
 * the table's gradient one thread, which adds dy's rows in position order:
 * no atomics, the same result on every run and bitwise the CPU's. An id
 * outside 0..V-1 is recorded in host-mapped memory (its forward row becomes
 * NaN, the backward skips it) and reported by the next synchronize as
 * SG_ERR_RANGE naming the op, the id and its position, as the CPU kernel
 * reports it. f32 tables, i32 or i64 ids. */
#include <stdio.h>

#include "backend/cuda/cuda_internal.h"

#define BLOCK SG__CUDA_LIB_BLOCK

typedef struct emb_kernel {
  sg__kernel base;
  sg__cuda_check check; /* the id error of this op */
  sg__cuda_lib *lib;
  int64_t n, V, C, slices;
  int l64;
  unsigned grid;
} emb_kernel;

static sg_status emb_run(sg__cuda_state *st, sg__kernel *base, void *const *in, void *const *out,
                         const sg__run_ctx *ctx) {
  (void)ctx;
  emb_kernel *k = (emb_kernel *)base;
  dim3 grid = {k->grid, 1, 1}, block = {BLOCK, 1, 1};
  unsigned long long *err = k->check.dflag;
  /* Kernel arguments are read through pointers to them: locals. */
  const void *src = in[0], *ids = in[1];
  void *y = out[0];
  bool fwd = k->base.kind == SG_OP_EMBEDDING;
  void *fargs[] = {&src, &ids, &k->l64, &k->n, &k->V, &k->C, &y, &err};
  void *bargs[] = {&src, &ids, &k->l64, &k->n, &k->V, &k->C, &k->slices, &y, &err};
  cudaKernel_t f = sg__cuda_library_kernel(k->lib, fwd ? SG__CUDA_EMBEDDING : SG__CUDA_EMBEDDING_GRAD);
  SG_CUDA(st, cudaLaunchKernel((const void *)f, grid, block, fwd ? fargs : bargs, 0, st->compute),
          k->base.name);
  return SG_OK;
}

static void emb_destroy(sg__cuda_state *st, sg__kernel *base) {
  emb_kernel *k = (emb_kernel *)base;
  sg__cuda_check_remove(st, &k->check);
}

/* Slices of the table's rows in the backward: enough (column, slice) units
 * to give every multiprocessor a few blocks, at most one slice per row.
 * Each unit reads all the ids, so more slices cost more reads. */
static int64_t slices_of(const sg__cuda_state *st, int64_t V, int64_t C) {
  int64_t want = ((int64_t)st->sm_count * 2 * BLOCK + C - 1) / C;
  return want < 1 ? 1 : want > V ? V : want;
}

sg_status sg__cuda_create_embedding(sg__cuda_state *st, const sg_graph *g, const sg__op *op,
                                    sg__kernel **out) {
  bool fwd = op->kind == SG_OP_EMBEDDING;
  const sg__tensor *src = sg__cuda_in(g, op, 0), *ids = sg__cuda_in(g, op, 1);
  const sg__tensor *table = fwd ? src : sg__cuda_out(g, op, 0);
  if (src->dtype != SG_F32 || (ids->dtype != SG_I32 && ids->dtype != SG_I64))
    return sg__cuda_unsupported(g, op, " (takes an f32 table and i32/i64 ids)");
  sg__cuda_lib *lib = NULL;
  SG_CHECK(sg__cuda_library(st, &lib));
  SG_CHECK(sg__cuda_kernel_new(op, sizeof(emb_kernel), emb_run, out));
  emb_kernel *k = (emb_kernel *)*out;
  k->base.destroy = emb_destroy;
  k->lib = lib;
  k->n = sg__numel(ids->ndim, ids->dims);
  k->V = table->dims[0], k->C = table->dims[1];
  k->l64 = ids->dtype == SG_I64;
  k->slices = fwd ? 1 : slices_of(st, k->V, k->C);
  k->grid = fwd ? sg__cuda_grid(st, k->n, 1) : sg__cuda_grid(st, k->C * k->slices, BLOCK);
  snprintf(k->check.what, sizeof k->check.what, "%s '%s'", sg_op_kind_name(op->kind), k->base.name);
  k->check.limit = k->V - 1;
  k->check.value_name = "id";
  k->check.index_name = "at position";
  sg_status s = sg__cuda_check_add(st, &k->check);
  if (s != SG_OK) {
    emb_destroy(st, &k->base);
    sg__free(k);
    *out = NULL;
  }
  return s;
}
