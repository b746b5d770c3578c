/* add, sub, mul, div, max, min with NumPy broadcasting, for f32, i32 and i64.
 *
 * Integer semantics (no undefined behaviour on any input): add, sub and mul
 * wrap around (two's complement); div truncates toward zero, x / 0 is 0 and
 * MIN / -1 wraps to MIN. Floats follow IEEE-754 as C computes them in f32.
 * f32 max and min propagate NaN (torch.maximum / torch.minimum) and
 * otherwise pick a > b ? a : b (a < b ? a : b), exactly the kernel IR's
 * MAX and MIN (cpu_emit.c), so that fused kernels agree bit for bit.
 *
 * out[0] may be the buffer of input 0 (sg__op_inplace_input): every output
 * element is computed from the inputs at the same position only, and the
 * loops carry no restrict between output and inputs for that reason. */
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/cpu_simd.h"

typedef void (*row_fn)(int64_t n, const void *a, int64_t sa, const void *b, int64_t sb, void *y);

/* One function per (op, type): the three stride patterns that matter get
 * their own simple loops so the compiler vectorizes them. */
#define ROW_FN(name, T, EXPR)                                                                     \
  static void name(int64_t n, const void *av, int64_t sa, const void *bv, int64_t sb, void *yv) { \
    const T *a = av, *b = bv;                                                                     \
    T *y = yv;                                                                                    \
    if (sa == 1 && sb == 1) {                                                                     \
      for (int64_t i = 0; i < n; i++) {                                                           \
        T x = a[i], z = b[i];                                                                     \
        y[i] = EXPR;                                                                              \
      }                                                                                           \
    } else if (sa == 1 && sb == 0) {                                                              \
      const T z = b[0];                                                                           \
      for (int64_t i = 0; i < n; i++) {                                                           \
        T x = a[i];                                                                               \
        y[i] = EXPR;                                                                              \
      }                                                                                           \
    } else if (sa == 0 && sb == 1) {                                                              \
      const T x = a[0];                                                                           \
      for (int64_t i = 0; i < n; i++) {                                                           \
        T z = b[i];                                                                               \
        y[i] = EXPR;                                                                              \
      }                                                                                           \
    } else {                                                                                      \
      for (int64_t i = 0; i < n; i++) {                                                           \
        T x = a[i * sa], z = b[i * sb];                                                           \
        y[i] = EXPR;                                                                              \
      }                                                                                           \
    }                                                                                             \
  }

/* f32: the same three patterns four lanes at a time (cpu_simd.h), then the
 * scalar loop for the rest. */
#define ROW_FN_F32(name, EXPR)                                                                    \
  static void name(int64_t n, const void *av, int64_t sa, const void *bv, int64_t sb, void *yv) { \
    const float *a = av, *b = bv;                                                                 \
    float *y = yv;                                                                                \
    int64_t i = 0;                                                                                \
    if (sa == 1 && sb == 1) {                                                                     \
      for (; i + 4 <= n; i += 4) {                                                                \
        sg__v4f x = sg__v4f_load(a + i), z = sg__v4f_load(b + i);                                 \
        sg__v4f_store(y + i, EXPR);                                                               \
      }                                                                                           \
    } else if (sa == 1 && sb == 0) {                                                              \
      const sg__v4f z = sg__v4f_set1(b[0]);                                                       \
      for (; i + 4 <= n; i += 4) {                                                                \
        sg__v4f x = sg__v4f_load(a + i);                                                          \
        sg__v4f_store(y + i, EXPR);                                                               \
      }                                                                                           \
    } else if (sa == 0 && sb == 1) {                                                              \
      const sg__v4f x = sg__v4f_set1(a[0]);                                                       \
      for (; i + 4 <= n; i += 4) {                                                                \
        sg__v4f z = sg__v4f_load(b + i);                                                          \
        sg__v4f_store(y + i, EXPR);                                                               \
      }                                                                                           \
    }                                                                                             \
    for (; i < n; i++) {                                                                          \
      float x = a[i * sa], z = b[i * sb];                                                         \
      y[i] = EXPR;                                                                                \
    }                                                                                             \
  }

ROW_FN_F32(add_f32, x + z)
ROW_FN_F32(sub_f32, x - z)
ROW_FN_F32(mul_f32, x *z)
ROW_FN_F32(div_f32, x / z)
ROW_FN(max_f32, float, x != x ? x : z != z ? z : x > z ? x : z)
ROW_FN(min_f32, float, x != x ? x : z != z ? z : x < z ? x : z)
ROW_FN(max_i32, int32_t, x > z ? x : z)
ROW_FN(min_i32, int32_t, x < z ? x : z)
ROW_FN(max_i64, int64_t, x > z ? x : z)
ROW_FN(min_i64, int64_t, x < z ? x : z)
ROW_FN(add_i32, int32_t, (int32_t)((uint32_t)x + (uint32_t)z))
ROW_FN(sub_i32, int32_t, (int32_t)((uint32_t)x - (uint32_t)z))
ROW_FN(mul_i32, int32_t, (int32_t)((uint32_t)x *(uint32_t)z))
ROW_FN(div_i32, int32_t, z == 0 ? 0 : (z == -1 ? (int32_t)(0u - (uint32_t)x) : x / z))
ROW_FN(add_i64, int64_t, (int64_t)((uint64_t)x + (uint64_t)z))
ROW_FN(sub_i64, int64_t, (int64_t)((uint64_t)x - (uint64_t)z))
ROW_FN(mul_i64, int64_t, (int64_t)((uint64_t)x *(uint64_t)z))
ROW_FN(div_i64, int64_t, z == 0 ? 0 : (z == -1 ? (int64_t)(0u - (uint64_t)x) : x / z))

typedef struct binary_kernel {
  sg__kernel base;
  row_fn fn;
  size_t esize;
  sg__cpu_iter it;
} binary_kernel;

typedef struct binary_job {
  const binary_kernel *k;
  const char *a, *b;
  char *y;
} binary_job;

static void binary_row(void *ctx, const sg__cpu_pos *p, int64_t i0, int64_t len) {
  const binary_job *j = ctx;
  const sg__cpu_iter *it = &j->k->it;
  const int64_t es = (int64_t)j->k->esize, last = it->nd - 1;
  const int64_t sa = it->strides[1][last], sb = it->strides[2][last];
  /* The output is contiguous: its innermost stride is 1. */
  j->k->fn(len, j->a + (p->off[1] + i0 * sa) * es, sa, j->b + (p->off[2] + i0 * sb) * es, sb,
           j->y + (p->off[0] + i0) * es);
}

static sg_status binary_run(sg__cpu_state *st, sg__kernel *base, void *const *in, void *const *out,
                            const sg__run_ctx *ctx) {
  (void)st;
  (void)ctx;
  binary_job j = {(const binary_kernel *)base, in[0], in[1], out[0]};
  sg__cpu_iter_for(&j.k->it, binary_row, &j);
  return SG_OK;
}

sg_status sg__cpu_create_binary(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                                sg__kernel **out) {
  (void)mode;
  const sg__tensor *a = sg__cpu_in(g, op, 0), *b = sg__cpu_in(g, op, 1), *y = sg__cpu_out(g, op, 0);
  static const row_fn fns[3][6] = {{add_f32, sub_f32, mul_f32, div_f32, max_f32, min_f32},
                                   {add_i32, sub_i32, mul_i32, div_i32, max_i32, min_i32},
                                   {add_i64, sub_i64, mul_i64, div_i64, max_i64, min_i64}};
  int t = a->dtype == SG_F32 ? 0 : a->dtype == SG_I32 ? 1 : a->dtype == SG_I64 ? 2 : -1;
  if (t < 0 || b->dtype != a->dtype)
    return sg__cpu_unsupported(g, op, " (add/sub/mul/div/max/min take f32, i32, i64)");
  int f = op->kind == SG_OP_MAX ? 4 : op->kind == SG_OP_MIN ? 5 : (int)(op->kind - SG_OP_ADD);
  sg__kernel *kb;
  SG_CHECK(sg__cpu_kernel_new(op, sizeof(binary_kernel), binary_run, &kb));
  binary_kernel *k = (binary_kernel *)kb;
  k->fn = fns[t][f];
  k->esize = sg_dtype_size(a->dtype);
  int64_t strides[3][SG_MAX_DIMS];
  if (sg__cpu_tensor_layout(st, g, op->outputs[0]) != SG__CPU_PLAIN) {
    /* Blocked operands all alike (same shape and layout, cpu_layout.c):
     * elementwise over the stored elements, padding included. */
    int64_t n = sg__cpu_tensor_flat(st, g, op->outputs[0]), one[3][SG_MAX_DIMS] = {{1}, {1}, {1}};
    sg__cpu_iter_init(&k->it, 1, &n, 3, (const int64_t(*)[SG_MAX_DIMS])one);
    *out = kb;
    return SG_OK;
  }
  sg__cpu_bcast_strides(y->ndim, y->dims, y->ndim, y->dims, strides[0]);
  sg__cpu_bcast_strides(y->ndim, y->dims, a->ndim, a->dims, strides[1]);
  sg__cpu_bcast_strides(y->ndim, y->dims, b->ndim, b->dims, strides[2]);
  sg__cpu_iter_init(&k->it, y->ndim, y->dims, 3, (const int64_t(*)[SG_MAX_DIMS])strides);
  *out = kb;
  return SG_OK;
}
