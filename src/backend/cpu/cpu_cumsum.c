/* cumsum (f32, i32, i64): x seen as [outer, L, inner] around the axis; each
 * (outer, inner) column is summed along L in order (from the end when
 * reverse), exclusive writing the sum before adding the element. f32 sums
 * are accumulated in double, as PyTorch's CPU cumsum does (its accumulate
 * type), so long rows do not drift from it; integer sums wrap around
 * (unsigned arithmetic: no undefined overflow). Work is split over (outer,
 * block of inner columns) units; each column has one writer and one order,
 * so results do not depend on the thread count. */
#include "backend/cpu/cpu_internal.h"

/* Columns summed together: one stack row of accumulators. */
#define COLS 256

typedef struct cumsum_kernel {
  sg__kernel base;
  int64_t outer, L, inner, blocks;
  sg_dtype dtype;
  bool exclusive, reverse;
} cumsum_kernel;

typedef struct cumsum_job {
  const cumsum_kernel *k;
  const void *x;
  void *y;
} cumsum_job;

/* One column block [c0, c1) of one outer index; T the element type, A the
 * accumulator type. */
#define CUMSUM_BLOCK(T, A, CONV)                                     \
  do {                                                               \
    const T *x = (const T *)j->x + base;                             \
    T *y = (T *)j->y + base;                                         \
    A acc[COLS];                                                     \
    for (int64_t c = 0; c < n; c++) acc[c] = 0;                      \
    for (int64_t s = 0; s < k->L; s++) {                             \
      int64_t a = k->reverse ? k->L - 1 - s : s, off = a * k->inner; \
      for (int64_t c = 0; c < n; c++) {                              \
        A v = (A)x[off + c];                                         \
        if (k->exclusive) {                                          \
          y[off + c] = CONV(acc[c]);                                 \
          acc[c] += v;                                               \
        } else {                                                     \
          acc[c] += v;                                               \
          y[off + c] = CONV(acc[c]);                                 \
        }                                                            \
      }                                                              \
    }                                                                \
  } while (0)

#define TO_F32(v) ((float)(v))
#define TO_I32(v) ((int32_t)(v))
#define TO_I64(v) ((int64_t)(v))

static void cumsum_units(void *ctx, int64_t u0, int64_t u1) {
  const cumsum_job *j = ctx;
  const cumsum_kernel *k = j->k;
  for (int64_t u = u0; u < u1; u++) {
    int64_t o = u / k->blocks, c0 = u % k->blocks * COLS;
    int64_t n = k->inner - c0 < COLS ? k->inner - c0 : COLS;
    int64_t base = o * k->L * k->inner + c0;
    switch (k->dtype) {
      case SG_F32: CUMSUM_BLOCK(float, double, TO_F32); break;
      /* Two's complement wrap-around, as PyTorch's integer sums. */
      case SG_I32: CUMSUM_BLOCK(int32_t, uint32_t, TO_I32); break;
      default: CUMSUM_BLOCK(int64_t, uint64_t, TO_I64); break;
    }
  }
}

static sg_status cumsum_run(sg__cpu_state *st, sg__kernel *base, void *const *in, void *const *out,
                            const sg__run_ctx *ctx) {
  (void)st;
  (void)ctx;
  const cumsum_kernel *k = (const cumsum_kernel *)base;
  cumsum_job j = {.k = k, .x = in[0], .y = out[0]};
  int64_t per_unit = k->L * (k->inner < COLS ? k->inner : COLS);
  sg__cpu_parallel_for(k->outer * k->blocks, 1 + 32768 / per_unit, cumsum_units, &j);
  return SG_OK;
}

sg_status sg__cpu_create_cumsum(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                                sg__kernel **out) {
  (void)st;
  (void)mode;
  const sg__tensor *x = sg__cpu_in(g, op, 0);
  if (x->dtype != SG_F32 && x->dtype != SG_I32 && x->dtype != SG_I64)
    return sg__cpu_unsupported(g, op, " (takes f32, i32 or i64)");
  int axis;
  if (!sg__norm_axis(sg__attr_i(op, 0), x->ndim, &axis))
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "axis %lld is out of range", (long long)sg__attr_i(op, 0));
  sg__kernel *kb;
  SG_CHECK(sg__cpu_kernel_new(op, sizeof(cumsum_kernel), cumsum_run, &kb));
  cumsum_kernel *k = (cumsum_kernel *)kb;
  k->outer = 1;
  k->inner = 1;
  for (int i = 0; i < axis; i++) k->outer *= x->dims[i];
  for (int i = axis + 1; i < x->ndim; i++) k->inner *= x->dims[i];
  k->L = x->dims[axis];
  k->blocks = (k->inner + COLS - 1) / COLS;
  k->dtype = x->dtype;
  k->exclusive = sg__attr_i(op, 1) != 0;
  k->reverse = sg__attr_i(op, 2) != 0;
  *out = kb;
  return SG_OK;
}
