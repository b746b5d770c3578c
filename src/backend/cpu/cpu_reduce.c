/* Sums over axes: reduce_sum (f32, i32, i64), reduce_mean (f32), sum_to (the
 * adjoint of broadcasting; f32, i32, i64) and global_avg_pool (f32).
 *
 * The input is walked once in memory order and every element is added into
 * an accumulator of the output's size (double for f32, wrapping int64 for
 * integers; in the backend's workspace, reserved at kernel_create), which is
 * then scaled (mean) and rounded into the output. An f32 run of the
 * innermost dim that sums into one element is summed in sgk_math.h's eight
 * lanes (sgk_sum_add) first. The order of additions is fixed, so results
 * are bit-identical from run to run, and the generated kernels that end in
 * a sum (cpu_emit.c) follow it to the bit. Two common shapes split over
 * threads without changing that order: every row its own output
 * (rows_distinct) and [rows, n] -> [n] (cols_distinct). */
#include <string.h>

#include "backend/cpu/cpu_internal.h"
#include "backend/sgk_math.h"

typedef struct reduce_kernel {
  sg__kernel base;
  sg_dtype dtype;
  sg__cpu_iter it; /* operand 0 = x, operand 1 = accumulator */
  int64_t out_n;
  double scale;       /* 1, or 1/count for means */
  bool rows_distinct; /* f32, innermost dim reduced, every row its own output */
  bool cols_distinct; /* f32, [rows, n] -> [n]: the outer dim reduced, the inner one kept and contiguous */
} reduce_kernel;

/* f32 where every row of the walk sums into its own output element (the
 * reduced dims are the innermost ones, as in global_avg_pool): rows are
 * independent, so they are split over threads; each row is still summed in
 * order, so the result does not depend on the thread count. */
/* One run of n elements at stride sx, summed in sgk_math.h's lanes. */
static double run_sum(const float *x, int64_t n, int64_t sx) {
  double l[SGK_SUM_LANES] = {0};
  if (sx == 1) {
    sgk_sum_add(l, x, n);
  } else {
    for (int64_t i = 0; i < n; i++) l[i % SGK_SUM_LANES] += (double)x[i * sx];
  }
  return sgk_sum_lanes(l);
}

typedef struct rows_job {
  const reduce_kernel *k;
  const float *x;
  float *y;
} rows_job;

static void rows_range(void *ctx, int64_t b, int64_t e) {
  const rows_job *j = ctx;
  const sg__cpu_iter *it = &j->k->it;
  const int64_t n = it->dims[it->nd - 1], sx = it->strides[0][it->nd - 1];
  sg__cpu_pos p;
  sg__cpu_iter_seek(it, b, &p);
  for (int64_t r = b; r < e; r++) {
    j->y[p.off[1]] = (float)(run_sum(j->x + p.off[0], n, sx) * j->k->scale);
    sg__cpu_iter_next(it, &p);
  }
}

/* f32 [rows, n] -> [n] (sum_to of a bias gradient, a reduction over the
 * leading dims): columns are independent, so they are split over threads.
 * Each column still adds its rows in order into its double accumulator, as
 * the serial walk below does, so the result is bit-identical to it and does
 * not depend on the thread count. */
typedef struct cols_job {
  const reduce_kernel *k;
  const float *x;
  float *y;
  double *acc;
} cols_job;

static void cols_range(void *ctx, int64_t b, int64_t e) {
  const cols_job *j = ctx;
  const sg__cpu_iter *it = &j->k->it;
  const int64_t rows = it->dims[0], sr = it->strides[0][0];
  double *restrict acc = j->acc;
  for (int64_t c = b; c < e; c++) acc[c] = 0;
  for (int64_t r = 0; r < rows; r++) {
    const float *restrict xr = j->x + r * sr;
    for (int64_t c = b; c < e; c++) acc[c] += xr[c];
  }
  for (int64_t c = b; c < e; c++) j->y[c] = (float)(acc[c] * j->k->scale);
}

static sg_status reduce_run(sg__cpu_state *st, sg__kernel *base, void *const *in, void *const *out,
                            const sg__run_ctx *ctx) {
  (void)ctx;
  reduce_kernel *k = (reduce_kernel *)base;
  if (k->rows_distinct) {
    rows_job j = {k, in[0], out[0]};
    sg__cpu_parallel_for(sg__cpu_iter_rows(&k->it), 1 + 65536 / k->it.dims[k->it.nd - 1], rows_range, &j);
    return SG_OK;
  }
  void *accp = st->ws; /* out_n doubles or int64s */
  if (k->cols_distinct) {
    cols_job j = {k, in[0], out[0], accp};
    sg__cpu_parallel_for(k->out_n, 1 + 65536 / k->it.dims[0], cols_range, &j);
    return SG_OK;
  }
  const sg__cpu_iter *it = &k->it;
  int64_t rows = sg__cpu_iter_rows(it), n = it->dims[it->nd - 1];
  int64_t sx = it->strides[0][it->nd - 1], sa = it->strides[1][it->nd - 1];
  sg__cpu_pos p;
  sg__cpu_iter_seek(it, 0, &p);
  if (k->dtype == SG_F32) {
    double *restrict acc = accp;
    const float *restrict x = in[0];
    memset(acc, 0, sizeof(double) * (size_t)k->out_n);
    for (int64_t r = 0; r < rows; r++) {
      const float *xr = x + p.off[0];
      double *ar = acc + p.off[1];
      if (sa == 0) {
        ar[0] += run_sum(xr, n, sx);
      } else {
        for (int64_t i = 0; i < n; i++) ar[i * sa] += xr[i * sx];
      }
      sg__cpu_iter_next(it, &p);
    }
    float *y = out[0];
    for (int64_t i = 0; i < k->out_n; i++) y[i] = (float)(acc[i] * k->scale);
    return SG_OK;
  }
  uint64_t *restrict acc = accp;
  memset(acc, 0, sizeof(uint64_t) * (size_t)k->out_n);
  for (int64_t r = 0; r < rows; r++) {
    uint64_t *ar = acc + p.off[1];
    if (k->dtype == SG_I32) {
      const int32_t *xr = (const int32_t *)in[0] + p.off[0];
      for (int64_t i = 0; i < n; i++) ar[i * sa] += (uint64_t)(int64_t)xr[i * sx];
    } else {
      const int64_t *xr = (const int64_t *)in[0] + p.off[0];
      for (int64_t i = 0; i < n; i++) ar[i * sa] += (uint64_t)xr[i * sx];
    }
    sg__cpu_iter_next(it, &p);
  }
  if (k->dtype == SG_I32) {
    int32_t *y = out[0];
    for (int64_t i = 0; i < k->out_n; i++) y[i] = (int32_t)(uint32_t)acc[i];
  } else {
    int64_t *y = out[0];
    for (int64_t i = 0; i < k->out_n; i++) y[i] = (int64_t)acc[i];
  }
  return SG_OK;
}

sg_status sg__cpu_create_reduce(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                                sg__kernel **out) {
  (void)mode;
  const sg__tensor *x = sg__cpu_in(g, op, 0), *y = sg__cpu_out(g, op, 0);
  bool ints_ok = op->kind == SG_OP_REDUCE_SUM || op->kind == SG_OP_SUM_TO;
  if (!(x->dtype == SG_F32 || (ints_ok && (x->dtype == SG_I32 || x->dtype == SG_I64))))
    return sg__cpu_unsupported(g, op, ints_ok ? " (takes f32, i32, i64)" : " (takes f32)");
  /* Output strides over x's dims: 0 along reduced dims. */
  int64_t strides[3][SG_MAX_DIMS] = {{0}};
  sg__cpu_bcast_strides(x->ndim, x->dims, x->ndim, x->dims, strides[0]);
  int64_t count = 1;
  if (op->kind == SG_OP_SUM_TO) {
    sg__cpu_bcast_strides(x->ndim, x->dims, y->ndim, y->dims, strides[1]);
  } else {
    bool reduced[SG_MAX_DIMS] = {false};
    if (op->kind == SG_OP_GLOBAL_AVG_POOL) {
      for (int i = 2; i < x->ndim; i++) reduced[i] = true;
    } else {
      int n = sg__attr_count(op, 0);
      const int64_t *axes = sg__attr_ints(op, 0);
      for (int i = 0; i < n; i++) {
        int a;
        if (!sg__norm_axis(axes[i], x->ndim, &a))
          return sg__op_error(op, SG_ERR_ATTRIBUTE, "axis out of range");
        reduced[a] = true;
      }
      if (n == 0)
        for (int i = 0; i < x->ndim; i++) reduced[i] = true;
    }
    int64_t s = 1;
    for (int i = x->ndim - 1; i >= 0; i--) {
      if (reduced[i]) {
        strides[1][i] = 0;
        count *= x->dims[i];
      } else {
        strides[1][i] = x->dims[i] == 1 ? 0 : s;
        s *= x->dims[i];
      }
    }
  }
  sg__kernel *kb;
  SG_CHECK(sg__cpu_kernel_new(op, sizeof(reduce_kernel), reduce_run, &kb));
  reduce_kernel *k = (reduce_kernel *)kb;
  k->dtype = x->dtype;
  k->out_n = sg__cpu_numel(y);
  k->scale = op->kind == SG_OP_REDUCE_MEAN || op->kind == SG_OP_GLOBAL_AVG_POOL ? 1.0 / (double)count : 1.0;
  sg_status s = sg__cpu_ws_reserve(st, sizeof(double) * (size_t)k->out_n);
  if (s != SG_OK) {
    sg__free(kb);
    return s;
  }
  sg__cpu_iter_init(&k->it, x->ndim, x->dims, 2, (const int64_t(*)[SG_MAX_DIMS])strides);
  k->rows_distinct = x->dtype == SG_F32 && k->it.nd >= 2 && k->it.strides[1][k->it.nd - 1] == 0;
  for (int d = 0; d + 1 < k->it.nd; d++) k->rows_distinct &= k->it.strides[1][d] != 0;
  k->cols_distinct = x->dtype == SG_F32 && k->it.nd == 2 && k->it.strides[1][0] == 0 &&
                     k->it.strides[1][1] == 1 && k->it.strides[0][1] == 1 && k->it.dims[1] == k->out_n;
  *out = kb;
  return SG_OK;
}
