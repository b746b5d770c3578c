/* add_scalar, mul_scalar (f32, i32, i64) and pow_scalar (f32).
 *
 * As in PyTorch, an f32 tensor combines with the scalar rounded to f32.
 * Integer tensors take integral scalars only (exact, wrapping arithmetic); a
 * fractional scalar with an integer tensor would change the dtype in
 * PyTorch, so it is refused at kernel_create. pow_scalar uses the same
 * special cases as PyTorch (x*x for 2, sqrt for 0.5, ...) and powf
 * otherwise. out[0] may alias in[0]. */
#include <math.h>

#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/cpu_simd.h"

typedef enum { P_GENERIC, P_ONE, P_TWO, P_THREE, P_HALF, P_MINUS_HALF, P_MINUS_ONE, P_MINUS_TWO } pow_case;

typedef struct scalar_kernel {
  sg__kernel base;
  sg_dtype dtype;
  int64_t n;
  float vf;
  int64_t vi;
  pow_case pc;
} scalar_kernel;

static void pow_f32(int64_t n, const float *x, float *y, float v, pow_case pc) {
  switch (pc) {
    case P_ONE:
      for (int64_t i = 0; i < n; i++) y[i] = x[i];
      break;
    case P_TWO:
      for (int64_t i = 0; i < n; i++) y[i] = x[i] * x[i];
      break;
    case P_THREE:
      for (int64_t i = 0; i < n; i++) y[i] = x[i] * x[i] * x[i];
      break;
    case P_HALF:
      for (int64_t i = 0; i < n; i++) y[i] = sqrtf(x[i]);
      break;
    case P_MINUS_HALF:
      for (int64_t i = 0; i < n; i++) y[i] = 1.0f / sqrtf(x[i]);
      break;
    case P_MINUS_ONE:
      for (int64_t i = 0; i < n; i++) y[i] = 1.0f / x[i];
      break;
    case P_MINUS_TWO:
      for (int64_t i = 0; i < n; i++) y[i] = 1.0f / (x[i] * x[i]);
      break;
    case P_GENERIC:
      for (int64_t i = 0; i < n; i++) y[i] = powf(x[i], v);
      break;
  }
}

typedef struct scalar_job {
  const scalar_kernel *k;
  const void *x;
  void *y;
} scalar_job;

static void scalar_range(void *ctx, int64_t b, int64_t e) {
  const scalar_job *j = ctx;
  const scalar_kernel *k = j->k;
  int64_t n = e - b;
  bool add = k->base.kind == SG_OP_ADD_SCALAR;
  if (k->base.kind == SG_OP_POW_SCALAR) {
    pow_f32(n, (const float *)j->x + b, (float *)j->y + b, k->vf, k->pc);
  } else if (k->dtype == SG_F32) {
    const float *x = (const float *)j->x + b;
    float *y = (float *)j->y + b;
    const float v = k->vf;
    const sg__v4f vv = sg__v4f_set1(v);
    int64_t i = 0;
    if (add) {
      for (; i + 4 <= n; i += 4) sg__v4f_store(y + i, sg__v4f_load(x + i) + vv);
      for (; i < n; i++) y[i] = x[i] + v;
    } else {
      for (; i + 4 <= n; i += 4) sg__v4f_store(y + i, sg__v4f_load(x + i) * vv);
      for (; i < n; i++) y[i] = x[i] * v;
    }
  } else if (k->dtype == SG_I32) {
    const int32_t *x = (const int32_t *)j->x + b;
    int32_t *y = (int32_t *)j->y + b;
    const uint32_t v = (uint32_t)k->vi;
    if (add)
      for (int64_t i = 0; i < n; i++) y[i] = (int32_t)((uint32_t)x[i] + v);
    else
      for (int64_t i = 0; i < n; i++) y[i] = (int32_t)((uint32_t)x[i] * v);
  } else {
    const int64_t *x = (const int64_t *)j->x + b;
    int64_t *y = (int64_t *)j->y + b;
    const uint64_t v = (uint64_t)k->vi;
    if (add)
      for (int64_t i = 0; i < n; i++) y[i] = (int64_t)((uint64_t)x[i] + v);
    else
      for (int64_t i = 0; i < n; i++) y[i] = (int64_t)((uint64_t)x[i] * v);
  }
}

static sg_status scalar_run(sg__cpu_state *st, sg__kernel *base, void *const *in, void *const *out,
                            const sg__run_ctx *ctx) {
  (void)st;
  (void)ctx;
  scalar_job j = {(const scalar_kernel *)base, in[0], out[0]};
  sg__cpu_parallel_for(j.k->n, 65536, scalar_range, &j);
  return SG_OK;
}

sg_status sg__cpu_create_scalar(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                                sg__kernel **out) {
  (void)mode;
  const sg__tensor *x = sg__cpu_in(g, op, 0);
  double v = sg__attr_f(op, 0);
  bool is_int = x->dtype == SG_I32 || x->dtype == SG_I64;
  if (!(x->dtype == SG_F32 || (is_int && op->kind != SG_OP_POW_SCALAR)))
    return sg__cpu_unsupported(
        g, op, op->kind == SG_OP_POW_SCALAR ? " (pow_scalar takes f32)" : " (takes f32, i32, i64)");
  if (is_int && (v != floor(v) || !(fabs(v) < 9.2e18)))
    return sg__op_error(op, SG_ERR_UNSUPPORTED,
                        "value %g is not an integer, which %s (%s) cannot combine with an integer tensor of "
                        "dtype %s on the cpu backend",
                        v, sg_op_kind_name(op->kind), op->name, sg_dtype_name(x->dtype));
  sg__kernel *kb;
  SG_CHECK(sg__cpu_kernel_new(op, sizeof(scalar_kernel), scalar_run, &kb));
  scalar_kernel *k = (scalar_kernel *)kb;
  k->dtype = x->dtype;
  k->n = sg__cpu_tensor_flat(st, g, op->inputs[0]); /* stored elements (cpu_layout.c) */
  k->vf = (float)v;
  k->vi = is_int ? (int64_t)v : 0;
  k->pc = v == 1.0    ? P_ONE
          : v == 2.0  ? P_TWO
          : v == 3.0  ? P_THREE
          : v == 0.5  ? P_HALF
          : v == -0.5 ? P_MINUS_HALF
          : v == -1.0 ? P_MINUS_ONE
          : v == -2.0 ? P_MINUS_TWO
                      : P_GENERIC;
  *out = kb;
  return SG_OK;
}
