/* reduce_max, reduce_min (f32, i32, i64) and reduce_max_backward (f32).
 *
 * The input is walked once in memory order with, next to each element, the
 * offset of the output element it reduces into (strides 0 along the reduced
 * dims, as cpu_reduce.c walks its sums). The forward starts every output at
 * the identity (-inf / +inf, or the integer extremes: dims are >= 1, so
 * no group is empty) and takes an element when it is larger (smaller) or NaN, so
 * a NaN stays once seen: PyTorch's amax/amin propagate NaN.
 *
 * The backward is PyTorch's amax/amin rule: mask = (x == y), and
 * dx = dy / count(mask over the group) * mask, in f32 in that order. It
 * counts the ties per output element first (in the backend's workspace),
 * then writes dx; a group whose y is NaN has no element equal to it, so its
 * dy / 0 * 0 is NaN everywhere, as in PyTorch. */
#include <math.h>
#include <stdint.h>

#include "backend/cpu/cpu_internal.h"

typedef struct reduce_max_kernel {
  sg__kernel base;
  sg_dtype dtype;
  bool min;
  sg__cpu_iter it; /* operand 0 = x, operand 1 = the output element */
  int64_t out_n;
} reduce_max_kernel;

/* T the element type; BETTER(v, acc) whether v replaces acc. */
#define REDUCE_WALK(T, INIT, BETTER)                    \
  do {                                                  \
    const T *x = in[0];                                 \
    T *y = out[0];                                      \
    for (int64_t i = 0; i < k->out_n; i++) y[i] = INIT; \
    for (int64_t r = 0; r < rows; r++) {                \
      const T *xr = x + p.off[0];                       \
      T *yr = y + p.off[1];                             \
      for (int64_t i = 0; i < n; i++) {                 \
        T v = xr[i * sx], *a = &yr[i * sa];             \
        if (BETTER(v, *a)) *a = v;                      \
      }                                                 \
      sg__cpu_iter_next(it, &p);                        \
    }                                                   \
  } while (0)

#define MAX_F(v, a) ((v) > (a) || isnan(v))
#define MIN_F(v, a) ((v) < (a) || isnan(v))
#define MAX_I(v, a) ((v) > (a))
#define MIN_I(v, a) ((v) < (a))

static sg_status reduce_max_run(sg__cpu_state *st, sg__kernel *base, void *const *in, void *const *out,
                                const sg__run_ctx *ctx) {
  (void)st;
  (void)ctx;
  const reduce_max_kernel *k = (const reduce_max_kernel *)base;
  const sg__cpu_iter *it = &k->it;
  int64_t rows = sg__cpu_iter_rows(it), n = it->dims[it->nd - 1];
  int64_t sx = it->strides[0][it->nd - 1], sa = it->strides[1][it->nd - 1];
  sg__cpu_pos p;
  sg__cpu_iter_seek(it, 0, &p);
  switch (k->dtype) {
    case SG_F32:
      if (k->min) REDUCE_WALK(float, INFINITY, MIN_F);
      else REDUCE_WALK(float, -INFINITY, MAX_F);
      break;
    case SG_I32:
      if (k->min) REDUCE_WALK(int32_t, INT32_MAX, MIN_I);
      else REDUCE_WALK(int32_t, INT32_MIN, MAX_I);
      break;
    default:
      if (k->min) REDUCE_WALK(int64_t, INT64_MAX, MIN_I);
      else REDUCE_WALK(int64_t, INT64_MIN, MAX_I);
      break;
  }
  return SG_OK;
}

/* Inputs x, y, dy; output dx. */
static sg_status reduce_max_backward_run(sg__cpu_state *st, sg__kernel *base, void *const *in,
                                         void *const *out, const sg__run_ctx *ctx) {
  (void)ctx;
  const reduce_max_kernel *k = (const reduce_max_kernel *)base;
  const sg__cpu_iter *it = &k->it;
  int64_t rows = sg__cpu_iter_rows(it), n = it->dims[it->nd - 1];
  int64_t sx = it->strides[0][it->nd - 1], sa = it->strides[1][it->nd - 1];
  const float *x = in[0], *y = in[1], *dy = in[2];
  float *dx = out[0];
  int64_t *count = (int64_t *)(void *)st->ws; /* out_n, 8-byte aligned */
  for (int64_t i = 0; i < k->out_n; i++) count[i] = 0;
  sg__cpu_pos p;
  sg__cpu_iter_seek(it, 0, &p);
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + p.off[0], *yr = y + p.off[1];
    int64_t *cr = count + p.off[1];
    for (int64_t i = 0; i < n; i++) cr[i * sa] += xr[i * sx] == yr[i * sa];
    sg__cpu_iter_next(it, &p);
  }
  sg__cpu_iter_seek(it, 0, &p);
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + p.off[0], *yr = y + p.off[1], *dr = dy + p.off[1];
    const int64_t *cr = count + p.off[1];
    float *gr = dx + p.off[0];
    for (int64_t i = 0; i < n; i++) {
      float share = dr[i * sa] / (float)cr[i * sa];
      gr[i * sx] = share * (float)(xr[i * sx] == yr[i * sa]);
    }
    sg__cpu_iter_next(it, &p);
  }
  return SG_OK;
}

sg_status sg__cpu_create_reduce_max(sg__cpu_state *st, const sg_graph *g, const sg__op *op,
                                    sg__exec_mode mode, sg__kernel **out) {
  (void)mode;
  bool backward = op->kind == SG_OP_REDUCE_MAX_BACKWARD;
  const sg__tensor *x = sg__cpu_in(g, op, 0), *y = backward ? sg__cpu_in(g, op, 1) : sg__cpu_out(g, op, 0);
  if (backward ? x->dtype != SG_F32 : x->dtype != SG_F32 && x->dtype != SG_I32 && x->dtype != SG_I64)
    return sg__cpu_unsupported(g, op, backward ? " (takes f32)" : " (takes f32, i32, i64)");
  bool reduced[SG_MAX_DIMS] = {false};
  int na = sg__attr_count(op, 0);
  const int64_t *axes = sg__attr_ints(op, 0);
  for (int i = 0; i < na; i++) {
    int a;
    if (!sg__norm_axis(axes[i], x->ndim, &a)) return sg__op_error(op, SG_ERR_ATTRIBUTE, "axis out of range");
    reduced[a] = true;
  }
  /* x contiguous; the output's strides over x's dims, 0 along reduced dims. */
  int64_t strides[3][SG_MAX_DIMS] = {{0}}, s = 1;
  sg__cpu_bcast_strides(x->ndim, x->dims, x->ndim, x->dims, strides[0]);
  for (int i = x->ndim - 1; i >= 0; i--) {
    if (na == 0 || reduced[i]) {
      strides[1][i] = 0;
    } else {
      strides[1][i] = x->dims[i] == 1 ? 0 : s;
      s *= x->dims[i];
    }
  }
  sg__kernel *kb;
  SG_CHECK(sg__cpu_kernel_new(op, sizeof(reduce_max_kernel),
                              backward ? reduce_max_backward_run : reduce_max_run, &kb));
  reduce_max_kernel *k = (reduce_max_kernel *)kb;
  k->dtype = x->dtype;
  k->min = backward ? sg__attr_i(op, 2) != 0 : op->kind == SG_OP_REDUCE_MIN;
  k->out_n = sg__cpu_numel(y);
  if (backward) {
    sg_status st_ws = sg__cpu_ws_reserve(st, sizeof(int64_t) * (size_t)(k->out_n ? k->out_n : 1));
    if (st_ws != SG_OK) {
      sg__free(kb);
      return st_ws;
    }
  }
  sg__cpu_iter_init(&k->it, x->ndim, x->dims, 2, (const int64_t(*)[SG_MAX_DIMS])strides);
  *out = kb;
  return SG_OK;
}
