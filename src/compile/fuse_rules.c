/* Each elementwise op as an expression in the kernel IR (backend/kernel_ir.h):
 * what the fusion pass (fuse.c) strings together into one kernel
 * (docs/compiler.md). Which ops fuse is
 * the op table's SG__OP_ELEMENTWISE flag; this table says how each one is
 * computed, in the formulas of the reference kernels (oneDNN's eltwise
 * definitions, cpu_binary.c, cpu_scalar.c, cpu_math.c), so that a fused kernel and the
 * ops it replaces agree: bitwise for IEEE arithmetic, within a few ulp where
 * oneDNN evaluates erf, exp or tanh by its own approximations
 * (tests/unit/test_fuse_rules.c runs every rule against the unfused op). */
#include <math.h>

#include "compile/plan_internal.h"

/* Shorthands over one kernel. */
#define C(v) sg__kir_const(k, SG_F32, (v))
#define ADD(a, b) sg__kir_binary(k, SG__KIR_ADD, (a), (b))
#define SUB(a, b) sg__kir_binary(k, SG__KIR_SUB, (a), (b))
#define MUL(a, b) sg__kir_binary(k, SG__KIR_MUL, (a), (b))
#define DIV(a, b) sg__kir_binary(k, SG__KIR_DIV, (a), (b))
#define LT(a, b) sg__kir_binary(k, SG__KIR_LT, (a), (b))
#define LE(a, b) sg__kir_binary(k, SG__KIR_LE, (a), (b))
#define AND(a, b) sg__kir_binary(k, SG__KIR_AND, (a), (b))
#define SEL(c, a, b) sg__kir_select(k, (c), (a), (b))
#define U(op, a) sg__kir_unary(k, SG__KIR_##op, (a))

/* GELU, erf form: 0.5 x (1 + erf(x / sqrt 2)); its derivative
 * 0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) / sqrt(2 pi). */
static int gelu_erf(sg__kir_kernel *k, int x) {
  return MUL(MUL(C(0.5), x), ADD(C(1), U(ERF, MUL(x, C(M_SQRT1_2)))));
}
static int gelu_erf_grad(sg__kir_kernel *k, int x) {
  int cdf = MUL(C(0.5), ADD(C(1), U(ERF, MUL(x, C(M_SQRT1_2)))));
  int pdf = MUL(U(EXP, MUL(C(-0.5), MUL(x, x))), C(0.5 * M_2_SQRTPI * M_SQRT1_2));
  return ADD(cdf, MUL(x, pdf));
}

/* GELU, tanh form: 0.5 x (1 + tanh(u)), u = sqrt(2 / pi) (x + 0.044715 x^3);
 * derivative 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2 / pi) (1 + 3 * 0.044715 x^2). */
static int gelu_tanh_u(sg__kir_kernel *k, int x) {
  return MUL(C(M_2_SQRTPI * M_SQRT1_2), ADD(x, MUL(C(0.044715), MUL(x, MUL(x, x)))));
}
static int gelu_tanh(sg__kir_kernel *k, int x) {
  return MUL(MUL(C(0.5), x), ADD(C(1), U(TANH, gelu_tanh_u(k, x))));
}
static int gelu_tanh_grad(sg__kir_kernel *k, int x) {
  int t = U(TANH, gelu_tanh_u(k, x));
  int du = MUL(C(M_2_SQRTPI * M_SQRT1_2), ADD(C(1), MUL(C(3 * 0.044715), MUL(x, x))));
  return ADD(MUL(C(0.5), ADD(C(1), t)), MUL(MUL(MUL(C(0.5), x), SUB(C(1), MUL(t, t))), du));
}

/* Every kind the op table marks elementwise, from the table itself, except
 * dropout and its backward: dropout draws counter-based random masks and
 * its backward reads the u8 mask; both keep their own kernel. */
/* broadcast_to is not flagged elementwise (its input has fewer elements
 * than its output), but in a kernel it is one: each output element is its
 * input read through broadcast strides, which the kernel's loads already
 * do. Fused, the broadcast copy autodiff writes for the gradients of
 * reduce_mean and of broadcasting ops never reaches memory. */
/* transpose is a kernel of its own: its input read through permuted strides,
 * which only a load from memory can do, so it joins no group (fuse.c). */
bool sg__fuse_has_rule(sg_op_kind kind) {
  if (kind == SG_OP_BROADCAST_TO || kind == SG_OP_TRANSPOSE) return true;
  return (sg__op_flags(kind) & SG__OP_ELEMENTWISE) && kind != SG_OP_DROPOUT && kind != SG_OP_DROPOUT_BACKWARD;
}

bool sg__fuse_sum_rule(const sg_graph *g, const sg__op *op, sg__kir_sum *kind, int *axis, double *scale) {
  if (!(sg__op_flags(op->kind) & SG__OP_SUM) || op->n_inputs != 1 || op->n_outputs != 1 || op->inputs[0] < 0)
    return false;
  const sg__tensor *x = &g->tensors[op->inputs[0]], *y = &g->tensors[op->outputs[0]];
  if (x->dtype != SG_F32 || y->dtype != SG_F32 || x->ndim > SG__KIR_MAX_DIMS) return false;
  bool summed[SG__KIR_MAX_DIMS] = {false};
  int64_t numel = 1, count = 1;
  for (int d = 0; d < x->ndim; d++) numel *= x->dims[d];
  if (numel <= 0) return false;
  if (!sg__sum_dims(g, op, summed)) return false;
  for (int d = 0; d < x->ndim; d++) count *= summed[d] ? x->dims[d] : 1;
  /* The summed dims of more than one element: all after the kept ones
   * (rows summed) or all before them (columns summed). */
  int first_sum = x->ndim, last_sum = -1, first_kept = x->ndim, last_kept = -1;
  for (int d = 0; d < x->ndim; d++) {
    if (x->dims[d] == 1) continue;
    if (summed[d]) {
      if (first_sum == x->ndim) first_sum = d;
      last_sum = d;
    } else {
      if (first_kept == x->ndim) first_kept = d;
      last_kept = d;
    }
  }
  if (last_kept < first_sum) {
    *kind = SG__KIR_SUM_INNER;
    *axis = last_kept + 1;
  } else if (last_sum < first_kept) {
    *kind = SG__KIR_SUM_OUTER;
    *axis = last_sum + 1;
  } else {
    return false;
  }
  *scale = op->kind == SG_OP_REDUCE_MEAN ? 1.0 / (double)count : 1.0;
  return true;
}

int sg__fuse_op_expr(sg__kir_kernel *k, const sg__op *op, const int *in) {
  int x = in[0];
  switch (op->kind) {
    /* oneDNN's relu is max(x, 0): NaN and negatives give +0. */
    case SG_OP_RELU: return SEL(LT(C(0), x), x, C(0));
    case SG_OP_CLIP: {
      /* oneDNN clip_v2: min(max(x, lo), hi) with the x86 max/min, which
       * give the second operand when either is NaN: NaN becomes lo. */
      int lo = C(sg__attr_f(op, 0)), hi = C(sg__attr_f(op, 1));
      int y = SEL(LT(lo, x), x, lo);
      return SEL(LT(y, hi), y, hi);
    }
    case SG_OP_GELU: return sg__attr_i(op, 0) ? gelu_tanh(k, x) : gelu_erf(k, x);
    case SG_OP_SIGMOID: return U(SIGMOID, x);
    case SG_OP_TANH: return U(TANH, x);
    /* Backward ops take (dy, y) or (dy, x): in[0] is dy. */
    /* oneDNN: y > 0 ? dy : dy * 0 (alpha 0), so a NaN or infinite dy stays NaN. */
    case SG_OP_RELU_BACKWARD: return SEL(LT(C(0), in[1]), x, MUL(x, C(0)));
    case SG_OP_CLIP_BACKWARD: {
      int v = in[1], lo = C(sg__attr_f(op, 0)), hi = C(sg__attr_f(op, 1));
      /* oneDNN: dy * (lo < x <= hi), so a NaN dy stays NaN. */
      return MUL(x, SEL(AND(LT(lo, v), LE(v, hi)), C(1), C(0)));
    }
    case SG_OP_GELU_BACKWARD:
      return MUL(x, sg__attr_i(op, 0) ? gelu_tanh_grad(k, in[1]) : gelu_erf_grad(k, in[1]));
    case SG_OP_SIGMOID_BACKWARD: return MUL(x, MUL(in[1], SUB(C(1), in[1])));
    case SG_OP_TANH_BACKWARD: return MUL(x, SUB(C(1), MUL(in[1], in[1])));
    case SG_OP_ADD: return ADD(x, in[1]);
    case SG_OP_SUB: return SUB(x, in[1]);
    case SG_OP_MUL: return MUL(x, in[1]);
    case SG_OP_DIV: return DIV(x, in[1]);
    case SG_OP_ADD_SCALAR:
    case SG_OP_MUL_SCALAR: {
      int t = k->ins[x].dtype;
      int s = sg__kir_const(k, (sg_dtype)t, sg__attr_f(op, 0));
      return op->kind == SG_OP_ADD_SCALAR ? ADD(x, s) : MUL(x, s);
    }
    case SG_OP_POW_SCALAR: {
      /* cpu_scalar.c's special cases, as PyTorch's. */
      double v = sg__attr_f(op, 0);
      if (v == 1) return MUL(x, C(1));
      if (v == 2) return MUL(x, x);
      if (v == 3) return MUL(MUL(x, x), x);
      if (v == 0.5) return U(SQRT, x);
      if (v == -0.5) return DIV(C(1), U(SQRT, x));
      if (v == -1) return DIV(C(1), x);
      if (v == -2) return DIV(C(1), MUL(x, x));
      return sg__kir_binary(k, SG__KIR_POW, x, C(v));
    }
    /* cpu_math.c: exp and erf of sgk_math.h, libm's logf and sqrtf; 1.0f / x. */
    case SG_OP_EXP: return U(EXP, x);
    case SG_OP_LOG: return U(LOG, x);
    case SG_OP_SQRT: return U(SQRT, x);
    case SG_OP_RECIPROCAL: return U(RECIP, x);
    case SG_OP_ERF: return U(ERF, x);
    case SG_OP_SIN: return U(SIN, x);
    case SG_OP_COS: return U(COS, x);
    case SG_OP_ACOS: return U(ACOS, x);
    /* Integers wrap: -MIN is MIN, |MIN| is MIN. */
    case SG_OP_NEG: return U(NEG, x);
    case SG_OP_ABS: return U(ABS, x);
    case SG_OP_SIGN: {
      /* x > 0 ? 1 : x < 0 ? -1 : x: 0, -0 and NaN pass through. */
      sg_dtype t = (sg_dtype)k->ins[x].dtype;
      int zero = sg__kir_const(k, t, 0), one = sg__kir_const(k, t, 1), minus = sg__kir_const(k, t, -1);
      return SEL(LT(zero, x), one, SEL(LT(x, zero), minus, x));
    }
    /* cpu_binary.c: NaN propagates, as torch.maximum / torch.minimum. */
    case SG_OP_MAX: return sg__kir_binary(k, SG__KIR_MAX, x, in[1]);
    case SG_OP_MIN: return sg__kir_binary(k, SG__KIR_MIN, x, in[1]);
    case SG_OP_WHERE: return SEL(x, in[1], in[2]);
    case SG_OP_CAST: return sg__kir_cast(k, (sg_dtype)sg__attr_i(op, 0), x);
    case SG_OP_BROADCAST_TO: return x; /* loaded through broadcast strides */
    case SG_OP_TRANSPOSE: return x;    /* loaded through permuted strides (fuse_kernels.c) */
    default:
      if (k->error == SG_OK)
        sg__error(SG_ERR_UNSUPPORTED, "fusion: %s '%s' has no rule", sg_op_kind_name(op->kind),
                  op->name ? op->name : "?");
      return -1;
  }
}
