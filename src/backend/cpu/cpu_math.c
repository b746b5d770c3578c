/* Elementwise math (exp, log, sqrt, reciprocal, erf, sin, cos, acos on f32; neg, abs, sign
 * on f32, i32, i64), cast between f32, i32, i64 and bool, and where with
 * broadcasting.
 *
 * The formulas are the kernel IR's (backend/kernel_ir.h, cpu_emit.c), so a
 * fused kernel agrees bit for bit: exp and erf from sgk_math.h (vectorizable,
 * computed in double), logf, sqrtf, sinf, cosf and acosf from libm, 1/x
 * as 1.0f / x, sign(x) = x > 0 ? 1 : x < 0 ? -1 : x (0, -0 and NaN pass
 * through); integer neg and abs wrap (-MIN is MIN). Casts: f32 to an
 * integer truncates toward zero, NaN and out-of-range values give 0 (C
 * leaves them undefined); to bool is x != 0; i64 to i32 wraps.
 *
 * out[0] may be the buffer of input 0: each output element is computed from
 * the inputs at its own position only. */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_internal.h"
#include "backend/sgk_math.h"

typedef struct math_kernel {
  sg__kernel base;
  sg_dtype in_dt, out_dt;
  int64_t n;
} math_kernel;

typedef struct math_job {
  const math_kernel *k;
  const void *x;
  void *y;
} math_job;

static inline float sign_f32(float x) { return x > 0 ? 1.0f : x < 0 ? -1.0f : x; }

static void f32_range(const math_kernel *k, const float *x, float *y, int64_t n) {
  switch (k->base.kind) {
    case SG_OP_EXP:
      for (int64_t i = 0; i < n; i++) y[i] = sgk_expf(x[i]);
      break;
    case SG_OP_LOG:
      for (int64_t i = 0; i < n; i++) y[i] = logf(x[i]);
      break;
    case SG_OP_SQRT:
      for (int64_t i = 0; i < n; i++) y[i] = sqrtf(x[i]);
      break;
    case SG_OP_RECIPROCAL:
      for (int64_t i = 0; i < n; i++) y[i] = 1.0f / x[i];
      break;
    case SG_OP_ERF:
      for (int64_t i = 0; i < n; i++) y[i] = sgk_erff(x[i]);
      break;
    case SG_OP_SIN:
      for (int64_t i = 0; i < n; i++) y[i] = sinf(x[i]);
      break;
    case SG_OP_COS:
      for (int64_t i = 0; i < n; i++) y[i] = cosf(x[i]);
      break;
    case SG_OP_ACOS:
      for (int64_t i = 0; i < n; i++) y[i] = acosf(x[i]);
      break;
    case SG_OP_NEG:
      for (int64_t i = 0; i < n; i++) y[i] = -x[i];
      break;
    case SG_OP_ABS:
      for (int64_t i = 0; i < n; i++) y[i] = fabsf(x[i]);
      break;
    default: /* SG_OP_SIGN */
      for (int64_t i = 0; i < n; i++) y[i] = sign_f32(x[i]);
      break;
  }
}

#define INT_RANGE(name, T, U)                                                         \
  static void name(sg_op_kind kind, const T *x, T *y, int64_t n) {                    \
    switch (kind) {                                                                   \
      case SG_OP_NEG:                                                                 \
        for (int64_t i = 0; i < n; i++) y[i] = (T)(0u - (U)x[i]);                     \
        break;                                                                        \
      case SG_OP_ABS:                                                                 \
        for (int64_t i = 0; i < n; i++) y[i] = x[i] < 0 ? (T)(0u - (U)x[i]) : x[i];   \
        break;                                                                        \
      default: /* SG_OP_SIGN */                                                       \
        for (int64_t i = 0; i < n; i++) y[i] = (T)(x[i] > 0 ? 1 : x[i] < 0 ? -1 : 0); \
        break;                                                                        \
    }                                                                                 \
  }
INT_RANGE(i32_range, int32_t, uint32_t)
INT_RANGE(i64_range, int64_t, uint64_t)

/* ---- cast ----------------------------------------------------------------- */

static inline int32_t f2i32(float x) {
  return x == x && x >= -2147483648.0f && x < 2147483648.0f ? (int32_t)x : 0;
}
static inline int64_t f2i64(float x) {
  return x == x && x >= -9223372036854775808.0f && x < 9223372036854775808.0f ? (int64_t)x : 0;
}

/* One loop per (from, to) pair. */
#define CAST_LOOP(TI, TO, EXPR)       \
  do {                                \
    const TI *a = (const TI *)x;      \
    TO *b = (TO *)y;                  \
    for (int64_t i = 0; i < n; i++) { \
      TI v = a[i];                    \
      b[i] = EXPR;                    \
    }                                 \
  } while (0)
#define CAST_FROM(TI)                                                           \
  switch (to) {                                                                 \
    case SG_F32: CAST_LOOP(TI, float, (float)v); break;                         \
    case SG_I32: CAST_LOOP(TI, int32_t, (int32_t)(uint32_t)(uint64_t)v); break; \
    case SG_I64: CAST_LOOP(TI, int64_t, (int64_t)v); break;                     \
    default: CAST_LOOP(TI, uint8_t, (uint8_t)(v != 0)); break;                  \
  }

static void cast_range(sg_dtype from, sg_dtype to, const void *x, void *y, int64_t n) {
  if (from == to) {
    if (x != y) memcpy(y, x, (size_t)n * sg_dtype_size(from));
    return;
  }
  switch (from) {
    case SG_F32:
      switch (to) {
        case SG_I32: CAST_LOOP(float, int32_t, f2i32(v)); break;
        case SG_I64: CAST_LOOP(float, int64_t, f2i64(v)); break;
        default: CAST_LOOP(float, uint8_t, (uint8_t)(v != 0)); break;
      }
      break;
    case SG_I32: CAST_FROM(int32_t); break;
    case SG_I64: CAST_FROM(int64_t); break;
    default: CAST_FROM(uint8_t); break;
  }
}

static void math_range(void *ctx, int64_t b, int64_t e) {
  const math_job *j = ctx;
  const math_kernel *k = j->k;
  size_t si = sg_dtype_size(k->in_dt), so = sg_dtype_size(k->out_dt);
  const char *x = (const char *)j->x + (size_t)b * si;
  char *y = (char *)j->y + (size_t)b * so;
  int64_t n = e - b;
  if (k->base.kind == SG_OP_CAST) cast_range(k->in_dt, k->out_dt, x, y, n);
  else if (k->in_dt == SG_F32) f32_range(k, (const float *)x, (float *)y, n);
  else if (k->in_dt == SG_I32) i32_range(k->base.kind, (const int32_t *)x, (int32_t *)y, n);
  else i64_range(k->base.kind, (const int64_t *)x, (int64_t *)y, n);
}

static sg_status math_run(sg__cpu_state *st, sg__kernel *base, void *const *in, void *const *out,
                          const sg__run_ctx *ctx) {
  (void)st;
  (void)ctx;
  math_job j = {(const math_kernel *)base, in[0], out[0]};
  sg__cpu_parallel_for(j.k->n, 32768, math_range, &j);
  return SG_OK;
}

/* ---- where ---------------------------------------------------------------- */

typedef struct where_kernel {
  sg__kernel base;
  size_t esize; /* 4 or 8: a select copies the chosen element's bytes */
  int nd;
  int64_t dims[SG_MAX_DIMS];
  int64_t strides[3][SG_MAX_DIMS]; /* cond, a, b over the output dims */
} where_kernel;

typedef struct where_job {
  const where_kernel *k;
  const uint8_t *c;
  const char *a, *b;
  char *y;
} where_job;

/* Rows of the innermost output dim [r0, r1). */
static void where_rows(void *ctx, int64_t r0, int64_t r1) {
  const where_job *j = ctx;
  const where_kernel *k = j->k;
  const int last = k->nd - 1;
  const int64_t n = k->dims[last], sc = k->strides[0][last], sa = k->strides[1][last],
                sb = k->strides[2][last];
  for (int64_t r = r0; r < r1; r++) {
    int64_t off[3] = {0, 0, 0}, rem = r;
    for (int d = last - 1; d >= 0; d--) {
      int64_t i = rem % k->dims[d];
      rem /= k->dims[d];
      for (int o = 0; o < 3; o++) off[o] += i * k->strides[o][d];
    }
    const uint8_t *c = j->c + off[0];
    if (k->esize == 4) {
      const uint32_t *a = (const uint32_t *)j->a + off[1], *b = (const uint32_t *)j->b + off[2];
      uint32_t *y = (uint32_t *)j->y + r * n;
      for (int64_t i = 0; i < n; i++) y[i] = c[i * sc] ? a[i * sa] : b[i * sb];
    } else {
      const uint64_t *a = (const uint64_t *)j->a + off[1], *b = (const uint64_t *)j->b + off[2];
      uint64_t *y = (uint64_t *)j->y + r * n;
      for (int64_t i = 0; i < n; i++) y[i] = c[i * sc] ? a[i * sa] : b[i * sb];
    }
  }
}

static sg_status where_run(sg__cpu_state *st, sg__kernel *base, void *const *in, void *const *out,
                           const sg__run_ctx *ctx) {
  (void)st;
  (void)ctx;
  const where_kernel *k = (const where_kernel *)base;
  where_job j = {k, in[0], in[1], in[2], out[0]};
  int64_t rows = 1;
  for (int d = 0; d < k->nd - 1; d++) rows *= k->dims[d];
  sg__cpu_parallel_for(rows, 1 + 32768 / k->dims[k->nd - 1], where_rows, &j);
  return SG_OK;
}

static sg_status create_where(const sg_graph *g, const sg__op *op, sg__kernel **out) {
  const sg__tensor *c = sg__cpu_in(g, op, 0), *a = sg__cpu_in(g, op, 1), *b = sg__cpu_in(g, op, 2),
                   *y = sg__cpu_out(g, op, 0);
  if (c->dtype != SG_BOOL || a->dtype != b->dtype ||
      !(a->dtype == SG_F32 || a->dtype == SG_I32 || a->dtype == SG_I64))
    return sg__cpu_unsupported(g, op, " (where takes a bool condition and f32, i32 or i64 operands)");
  sg__kernel *kb;
  SG_CHECK(sg__cpu_kernel_new(op, sizeof(where_kernel), where_run, &kb));
  where_kernel *k = (where_kernel *)kb;
  k->esize = sg_dtype_size(a->dtype);
  /* Rank 0 becomes one dim of 1. */
  k->nd = y->ndim > 0 ? y->ndim : 1;
  int64_t one = 1;
  const int64_t *dims = y->ndim > 0 ? y->dims : &one;
  memcpy(k->dims, dims, sizeof(int64_t) * (size_t)k->nd);
  const sg__tensor *ops[3] = {c, a, b};
  for (int o = 0; o < 3; o++)
    sg__cpu_bcast_strides(k->nd, k->dims, ops[o]->ndim, ops[o]->dims, k->strides[o]);
  *out = kb;
  return SG_OK;
}

sg_status sg__cpu_create_math(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                              sg__kernel **out) {
  (void)mode;
  if (op->kind == SG_OP_WHERE) return create_where(g, op, out);
  const sg__tensor *x = sg__cpu_in(g, op, 0), *y = sg__cpu_out(g, op, 0);
  bool int_ok = op->kind == SG_OP_NEG || op->kind == SG_OP_ABS || op->kind == SG_OP_SIGN;
  if (op->kind == SG_OP_CAST) {
    bool ok = true;
    for (int i = 0; i < 2; i++) {
      sg_dtype dt = i ? y->dtype : x->dtype;
      ok &= dt == SG_F32 || dt == SG_I32 || dt == SG_I64 || dt == SG_BOOL;
    }
    if (!ok) return sg__cpu_unsupported(g, op, " (cast converts between f32, i32, i64 and bool)");
  } else if (!(x->dtype == SG_F32 || (int_ok && (x->dtype == SG_I32 || x->dtype == SG_I64)))) {
    return sg__cpu_unsupported(g, op, int_ok ? " (takes f32, i32, i64)" : " (takes f32)");
  }
  sg__kernel *kb;
  SG_CHECK(sg__cpu_kernel_new(op, sizeof(math_kernel), math_run, &kb));
  math_kernel *k = (math_kernel *)kb;
  k->in_dt = x->dtype;
  k->out_dt = y->dtype;
  k->n = sg__cpu_numel(x);
  (void)st;
  *out = kb;
  return SG_OK;
}
