/* Gradient rules, one per forward op kind (the table at the end). Each rule
 * appends the ops that turn dy, the gradient of the op's output, into the
 * gradients of the inputs that need one, and nothing for the others: the
 * first convolution of a network gets no conv2d_backward_data. The
 * derivations are in docs/autodiff.md. */
#include <stdio.h>
#include <string.h>

#include "graph/autodiff.h"

/* A copy of a tensor's record: g->tensors moves while ops are appended. */
static sg__tensor tensor_of(const sg__ad *c, int32_t id) { return c->g->tensors[id]; }

static bool has_dims(const sg__tensor *t, int ndim, const int64_t *dims) {
  if (t->ndim != ndim) return false;
  for (int i = 0; i < ndim; i++)
    if (t->dims[i] != dims[i]) return false;
  return true;
}

static sg_tensor in_t(const sg__op *op, int i) { return (sg_tensor){op->inputs[i]}; }
static sg_tensor out_t(const sg__op *op, int i) { return (sg_tensor){op->outputs[i]}; }

static sg_tensor emit(sg__ad *c, sg_op_kind kind, int n_in, const sg_tensor *in, int n_attrs,
                      const sg_attr *attrs) {
  for (int i = 0; i < n_in; i++)
    if (in[i].id < 0) return SG_NO_TENSOR; /* an earlier emission failed */
  return sg__ad_emit(c, kind, n_in, in, n_attrs, attrs, 0, NULL);
}

/* Shape ops that are skipped when they would not change the shape. */
static sg_tensor shape_op(sg__ad *c, sg_op_kind kind, sg_tensor x, int ndim, const int64_t *dims) {
  if (x.id < 0) return x;
  sg__tensor t = tensor_of(c, x.id);
  if (has_dims(&t, ndim, dims)) return x;
  sg_attr a = SG__AS("shape", ndim, dims);
  return emit(c, kind, 1, &x, 1, &a);
}
static sg_tensor reshape(sg__ad *c, sg_tensor x, int ndim, const int64_t *dims) {
  return shape_op(c, SG_OP_RESHAPE, x, ndim, dims);
}
static sg_tensor sum_to(sg__ad *c, sg_tensor x, int ndim, const int64_t *dims) {
  return shape_op(c, SG_OP_SUM_TO, x, ndim, dims);
}
static sg_tensor broadcast_to(sg__ad *c, sg_tensor x, int ndim, const int64_t *dims) {
  return shape_op(c, SG_OP_BROADCAST_TO, x, ndim, dims);
}
/* sum_to / reshape to the shape of forward input i. */
static sg_tensor sum_to_input(sg__ad *c, const sg__op *op, int i, sg_tensor x) {
  sg__tensor t = tensor_of(c, op->inputs[i]);
  return sum_to(c, x, t.ndim, t.dims);
}
static sg_tensor reshape_to_input(sg__ad *c, const sg__op *op, int i, sg_tensor x) {
  sg__tensor t = tensor_of(c, op->inputs[i]);
  return reshape(c, x, t.ndim, t.dims);
}

static sg_tensor mul_scalar(sg__ad *c, sg_tensor x, double s) {
  if (s == 1.0) return x;
  sg_attr a = SG__AF("value", s);
  return emit(c, SG_OP_MUL_SCALAR, 1, &x, 1, &a);
}
static sg_tensor binary(sg__ad *c, sg_op_kind kind, sg_tensor a, sg_tensor b) {
  sg_tensor in[] = {a, b};
  return emit(c, kind, 2, in, 0, NULL);
}
static sg_tensor gemm(sg__ad *c, sg_tensor a, sg_tensor b, int64_t ta, int64_t tb, double alpha) {
  sg_tensor in[] = {a, b, SG_NO_TENSOR};
  if (a.id < 0 || b.id < 0) return SG_NO_TENSOR;
  sg_attr attrs[] = {SG__AI("trans_a", ta), SG__AI("trans_b", tb), SG__AF("alpha", alpha),
                     SG__AF("beta", 0.0)};
  return sg__ad_emit(c, SG_OP_GEMM, 3, in, 4, attrs, 0, NULL);
}
/* Swaps the last two dims (rank >= 2). */
static sg_tensor transpose_last2(sg__ad *c, sg_tensor x) {
  if (x.id < 0) return x;
  sg__tensor t = tensor_of(c, x.id);
  int64_t perm[SG_MAX_DIMS];
  for (int i = 0; i < t.ndim; i++) perm[i] = i;
  perm[t.ndim - 2] = t.ndim - 1;
  perm[t.ndim - 1] = t.ndim - 2;
  sg_attr a = SG__AS("perm", t.ndim, perm);
  return emit(c, SG_OP_TRANSPOSE, 1, &x, 1, &a);
}

/* Rules compute a gradient only under NEEDS(i): an op emitted for an input
 * that needs none would be wasted work in every step. */
#define NEEDS(i) sg__ad_needs(c, op, i)

/* ---- convolution and normalization -------------------------------------- */

static sg_status rule_conv2d(sg__ad *c, const sg__op *op, sg_tensor dy) {
  /* conv2d's four attributes pass on unchanged, plus the missing shape. */
  sg_attr attrs[5];
  memcpy(attrs, op->attrs, sizeof(sg_attr) * 4);
  if (NEEDS(0)) {
    sg__tensor x = tensor_of(c, op->inputs[0]);
    attrs[4] = SG__AS("input_shape", 4, x.dims);
    sg_tensor in[] = {dy, in_t(op, 1)};
    SG_CHECK(sg__ad_give(c, op, 0, emit(c, SG_OP_CONV2D_BACKWARD_DATA, 2, in, 5, attrs)));
  }
  if (NEEDS(1)) {
    sg__tensor w = tensor_of(c, op->inputs[1]);
    attrs[4] = SG__AS("weight_shape", 4, w.dims);
    sg_tensor in[] = {dy, in_t(op, 0)};
    SG_CHECK(sg__ad_give(c, op, 1, emit(c, SG_OP_CONV2D_BACKWARD_WEIGHT, 2, in, 5, attrs)));
  }
  if (op->inputs[2] >= 0 && NEEDS(2)) {
    static const int64_t axes[] = {0, 2, 3};
    sg_attr a[] = {SG__AS("axes", 3, axes), SG__AI("keepdims", 0)};
    SG_CHECK(sg__ad_give(c, op, 2, emit(c, SG_OP_REDUCE_SUM, 1, &dy, 2, a)));
  }
  return SG_OK;
}

static sg_status rule_batch_norm(sg__ad *c, const sg__op *op, sg_tensor dy) {
  /* Training form: the saved batch statistics (outputs 1, 2); inference
   * form: the running statistics, constants of the forward op. */
  int64_t training = sg__attr_i(op, 2);
  sg_tensor in[] = {dy, in_t(op, 0), in_t(op, 1), training ? out_t(op, 1) : in_t(op, 3),
                    training ? out_t(op, 2) : in_t(op, 4)};
  sg_attr attrs[] = {SG__AF("eps", sg__attr_f(op, 0)), SG__AI("training", training)};
  sg_tensor out[3] = {SG_NO_TENSOR, SG_NO_TENSOR, SG_NO_TENSOR};
  if (dy.id >= 0) sg__ad_emit(c, SG_OP_BATCH_NORM_BACKWARD, 5, in, 2, attrs, 3, out);
  /* One op computes all three; only the needed ones are handed on. */
  for (int i = 0; i < 3; i++)
    if (NEEDS(i)) SG_CHECK(sg__ad_give(c, op, i, out[i]));
  return SG_OK;
}

static sg_status rule_layer_norm(sg__ad *c, const sg__op *op, sg_tensor dy) {
  sg_tensor in[] = {dy, in_t(op, 0), in_t(op, 1), out_t(op, 1), out_t(op, 2)};
  sg_attr axis = SG__AI("axis", sg__attr_i(op, 0));
  sg_tensor out[3] = {SG_NO_TENSOR, SG_NO_TENSOR, SG_NO_TENSOR};
  if (dy.id >= 0) sg__ad_emit(c, SG_OP_LAYER_NORM_BACKWARD, 5, in, 1, &axis, 3, out);
  for (int i = 0; i < 3; i++)
    if (NEEDS(i)) SG_CHECK(sg__ad_give(c, op, i, out[i]));
  return SG_OK;
}

/* ---- elementwise -------------------------------------------------------- */

/* relu, sigmoid, tanh: the derivative is cheapest from the output y. */
static sg_status rule_from_output(sg__ad *c, const sg__op *op, sg_tensor dy) {
  sg_op_kind kind = op->kind == SG_OP_RELU      ? SG_OP_RELU_BACKWARD
                    : op->kind == SG_OP_SIGMOID ? SG_OP_SIGMOID_BACKWARD
                                                : SG_OP_TANH_BACKWARD;
  sg_tensor in[] = {dy, out_t(op, 0)};
  return sg__ad_give(c, op, 0, emit(c, kind, 2, in, 0, NULL));
}

/* clip, gelu: from the input x, with the forward attributes. */
static sg_status rule_from_input(sg__ad *c, const sg__op *op, sg_tensor dy) {
  sg_op_kind kind = op->kind == SG_OP_CLIP ? SG_OP_CLIP_BACKWARD : SG_OP_GELU_BACKWARD;
  sg_tensor in[] = {dy, in_t(op, 0)};
  return sg__ad_give(c, op, 0, emit(c, kind, 2, in, op->n_attrs, op->attrs));
}

/* Broadcasting binary ops: each operand's gradient is summed back to its
 * shape (sum_to is skipped when the shapes already agree). */
static sg_status rule_add(sg__ad *c, const sg__op *op, sg_tensor dy) {
  if (NEEDS(0)) SG_CHECK(sg__ad_give(c, op, 0, sum_to_input(c, op, 0, dy)));
  if (NEEDS(1)) SG_CHECK(sg__ad_give(c, op, 1, sum_to_input(c, op, 1, dy)));
  return SG_OK;
}

static sg_status rule_sub(sg__ad *c, const sg__op *op, sg_tensor dy) {
  if (NEEDS(0)) SG_CHECK(sg__ad_give(c, op, 0, sum_to_input(c, op, 0, dy)));
  /* Negate after summing: the smaller tensor. */
  if (NEEDS(1)) SG_CHECK(sg__ad_give(c, op, 1, mul_scalar(c, sum_to_input(c, op, 1, dy), -1.0)));
  return SG_OK;
}

static sg_status rule_mul(sg__ad *c, const sg__op *op, sg_tensor dy) {
  /* d(a*b) = dy*b da + dy*a db. */
  if (NEEDS(0))
    SG_CHECK(sg__ad_give(c, op, 0, sum_to_input(c, op, 0, binary(c, SG_OP_MUL, dy, in_t(op, 1)))));
  if (NEEDS(1))
    SG_CHECK(sg__ad_give(c, op, 1, sum_to_input(c, op, 1, binary(c, SG_OP_MUL, dy, in_t(op, 0)))));
  return SG_OK;
}

static sg_status rule_div(sg__ad *c, const sg__op *op, sg_tensor dy) {
  /* y = a/b: da = dy/b; db = -dy*a/b^2 = -(dy*y)/b, from the output. */
  if (NEEDS(0))
    SG_CHECK(sg__ad_give(c, op, 0, sum_to_input(c, op, 0, binary(c, SG_OP_DIV, dy, in_t(op, 1)))));
  if (NEEDS(1)) {
    sg_tensor q = binary(c, SG_OP_DIV, binary(c, SG_OP_MUL, dy, out_t(op, 0)), in_t(op, 1));
    SG_CHECK(sg__ad_give(c, op, 1, mul_scalar(c, sum_to_input(c, op, 1, q), -1.0)));
  }
  return SG_OK;
}

static sg_status rule_add_scalar(sg__ad *c, const sg__op *op, sg_tensor dy) {
  return sg__ad_give(c, op, 0, dy);
}

static sg_status rule_mul_scalar(sg__ad *c, const sg__op *op, sg_tensor dy) {
  return sg__ad_give(c, op, 0, mul_scalar(c, dy, sg__attr_f(op, 0)));
}

static sg_status rule_pow_scalar(sg__ad *c, const sg__op *op, sg_tensor dy) {
  /* d(x^s) = s*x^(s-1); s = 0 gives zeros (not 0*x^-1, which is NaN at 0,
   * the case PyTorch special-cases too). */
  double s = sg__attr_f(op, 0);
  if (s == 0.0) return sg__ad_give(c, op, 0, mul_scalar(c, dy, 0.0));
  if (s == 1.0) return sg__ad_give(c, op, 0, dy);
  sg_tensor x = in_t(op, 0);
  if (s != 2.0) {
    sg_attr a = SG__AF("value", s - 1.0);
    x = emit(c, SG_OP_POW_SCALAR, 1, &x, 1, &a);
  }
  return sg__ad_give(c, op, 0, mul_scalar(c, binary(c, SG_OP_MUL, dy, x), s));
}

/* ---- elementwise math --------------------------------------------------- */

static sg_tensor unary(sg__ad *c, sg_op_kind kind, sg_tensor x) { return emit(c, kind, 1, &x, 0, NULL); }
static sg_tensor add_scalar(sg__ad *c, sg_tensor x, double s) {
  sg_attr a = SG__AF("value", s);
  return emit(c, SG_OP_ADD_SCALAR, 1, &x, 1, &a);
}

/* exp: dy*y; log: dy/x; sqrt: (dy/y)*0.5; reciprocal: -(dy*y*y); neg: -dy;
 * abs: dy*sign(x) (0 at 0, as PyTorch); sign: 0; erf: dy*(2/sqrt(pi))*exp(-x^2);
 * sin: dy*cos(x); cos: -(dy*sin(x)); acos: -(dy/sqrt(1 - x^2)) (infinite at
 * ±1 and NaN beyond, as PyTorch's). */
static sg_status rule_math(sg__ad *c, const sg__op *op, sg_tensor dy) {
  sg_tensor x = in_t(op, 0), y = out_t(op, 0), dx;
  switch (op->kind) {
    case SG_OP_EXP: dx = binary(c, SG_OP_MUL, dy, y); break;
    case SG_OP_LOG: dx = binary(c, SG_OP_DIV, dy, x); break;
    case SG_OP_SQRT: dx = mul_scalar(c, binary(c, SG_OP_DIV, dy, y), 0.5); break;
    case SG_OP_RECIPROCAL:
      dx = mul_scalar(c, binary(c, SG_OP_MUL, dy, binary(c, SG_OP_MUL, y, y)), -1.0);
      break;
    case SG_OP_NEG: dx = mul_scalar(c, dy, -1.0); break;
    case SG_OP_ABS: dx = binary(c, SG_OP_MUL, dy, unary(c, SG_OP_SIGN, x)); break;
    case SG_OP_SIGN: dx = mul_scalar(c, dy, 0.0); break;
    case SG_OP_SIN: dx = binary(c, SG_OP_MUL, dy, unary(c, SG_OP_COS, x)); break;
    case SG_OP_COS: dx = mul_scalar(c, binary(c, SG_OP_MUL, dy, unary(c, SG_OP_SIN, x)), -1.0); break;
    case SG_OP_ACOS: {
      sg_tensor r = unary(c, SG_OP_SQRT, add_scalar(c, mul_scalar(c, binary(c, SG_OP_MUL, x, x), -1.0), 1.0));
      dx = mul_scalar(c, binary(c, SG_OP_DIV, dy, r), -1.0);
      break;
    }
    default: { /* SG_OP_ERF */
      sg_tensor e = unary(c, SG_OP_EXP, mul_scalar(c, binary(c, SG_OP_MUL, x, x), -1.0));
      dx = binary(c, SG_OP_MUL, dy, mul_scalar(c, e, 1.1283791670955126)); /* 2/sqrt(pi) */
      break;
    }
  }
  return sg__ad_give(c, op, 0, dx);
}

/* max/min: the selected operand gets dy, ties split it half and half (as
 * torch.maximum / torch.minimum). With s = sign(a - b), a's share is
 * (1 + s) / 2 for max and (1 - s) / 2 for min, b's the rest. */
static sg_status rule_minmax(sg__ad *c, const sg__op *op, sg_tensor dy) {
  sg_tensor s = unary(c, SG_OP_SIGN, binary(c, SG_OP_SUB, in_t(op, 0), in_t(op, 1)));
  double sa = op->kind == SG_OP_MAX ? 0.5 : -0.5;
  if (NEEDS(0)) {
    sg_tensor share = add_scalar(c, mul_scalar(c, s, sa), 0.5);
    SG_CHECK(sg__ad_give(c, op, 0, sum_to_input(c, op, 0, binary(c, SG_OP_MUL, dy, share))));
  }
  if (NEEDS(1)) {
    sg_tensor share = add_scalar(c, mul_scalar(c, s, -sa), 0.5);
    SG_CHECK(sg__ad_give(c, op, 1, sum_to_input(c, op, 1, binary(c, SG_OP_MUL, dy, share))));
  }
  return SG_OK;
}

/* where(cond, a, b): dy goes to a where cond holds, to b elsewhere, through
 * the condition as 0/1 in dy's dtype; then summed to each operand's shape. */
static sg_status rule_where(sg__ad *c, const sg__op *op, sg_tensor dy) {
  sg__tensor t = tensor_of(c, op->outputs[0]);
  sg_tensor cond = in_t(op, 0);
  sg_attr to = SG__AI("to", (int64_t)t.dtype);
  sg_tensor mask = emit(c, SG_OP_CAST, 1, &cond, 1, &to);
  if (NEEDS(1)) SG_CHECK(sg__ad_give(c, op, 1, sum_to_input(c, op, 1, binary(c, SG_OP_MUL, dy, mask))));
  if (NEEDS(2)) {
    sg_tensor inv = add_scalar(c, mul_scalar(c, mask, -1.0), 1.0);
    SG_CHECK(sg__ad_give(c, op, 2, sum_to_input(c, op, 2, binary(c, SG_OP_MUL, dy, inv))));
  }
  return SG_OK;
}

/* cast between float dtypes passes the gradient back (cast to the input's
 * dtype when it differs); from an integer or bool there is none (the
 * driver differentiates float inputs only). */
static sg_status rule_cast(sg__ad *c, const sg__op *op, sg_tensor dy) {
  sg__tensor x = tensor_of(c, op->inputs[0]), y = tensor_of(c, op->outputs[0]);
  if (x.dtype == y.dtype) return sg__ad_give(c, op, 0, dy);
  sg_attr to = SG__AI("to", (int64_t)x.dtype);
  return sg__ad_give(c, op, 0, emit(c, SG_OP_CAST, 1, &dy, 1, &to));
}

/* ---- matrix products ---------------------------------------------------- */

/* NumPy matmul. With a' and b' the operands with 1-D ones promoted ([K] ->
 * [1,K] on the left, [K,1] on the right) and dy' the gradient reshaped to
 * the promoted output: da' = dy' b'^T, db' = a'^T dy', each summed over the
 * batch dims its operand broadcast along, then reshaped back. Plain matrices
 * use gemm's transpose flags instead of transpose ops. */
static sg_status rule_matmul(sg__ad *c, const sg__op *op, sg_tensor dy) {
  sg__tensor a = tensor_of(c, op->inputs[0]), b = tensor_of(c, op->inputs[1]),
             y = tensor_of(c, op->outputs[0]);
  sg_tensor ta = in_t(op, 0), tb = in_t(op, 1);
  int64_t K = a.dims[a.ndim - 1];
  int64_t a2[SG_MAX_DIMS], b2[SG_MAX_DIMS], y2[SG_MAX_DIMS];
  int na2 = a.ndim == 1 ? 2 : a.ndim, nb2 = b.ndim == 1 ? 2 : b.ndim;
  if (a.ndim == 1) {
    a2[0] = 1;
    a2[1] = K;
  } else {
    memcpy(a2, a.dims, sizeof(int64_t) * (size_t)a.ndim);
  }
  if (b.ndim == 1) {
    b2[0] = K;
    b2[1] = 1;
  } else {
    memcpy(b2, b.dims, sizeof(int64_t) * (size_t)b.ndim);
  }
  int nbatch = y.ndim - (a.ndim > 1) - (b.ndim > 1), ny2 = nbatch + 2;
  memcpy(y2, y.dims, sizeof(int64_t) * (size_t)nbatch);
  y2[nbatch] = a.ndim > 1 ? y.dims[nbatch] : 1;
  y2[nbatch + 1] = b.ndim > 1 ? y.dims[y.ndim - 1] : 1;
  sg_tensor dy2 = reshape(c, dy, ny2, y2);
  if (na2 == 2 && nb2 == 2) {
    if (NEEDS(0)) {
      sg_tensor da = gemm(c, dy2, reshape(c, tb, 2, b2), 0, 1, 1.0);
      SG_CHECK(sg__ad_give(c, op, 0, reshape(c, da, a.ndim, a.dims)));
    }
    if (NEEDS(1)) {
      sg_tensor db = gemm(c, reshape(c, ta, 2, a2), dy2, 1, 0, 1.0);
      SG_CHECK(sg__ad_give(c, op, 1, reshape(c, db, b.ndim, b.dims)));
    }
    return SG_OK;
  }
  if (NEEDS(0)) {
    int64_t bt[2] = {1, K};
    sg_tensor bT = b.ndim == 1 ? reshape(c, tb, 2, bt) : transpose_last2(c, tb);
    sg_tensor da = sum_to(c, binary(c, SG_OP_MATMUL, dy2, bT), na2, a2);
    SG_CHECK(sg__ad_give(c, op, 0, reshape(c, da, a.ndim, a.dims)));
  }
  if (NEEDS(1)) {
    int64_t at[2] = {K, 1};
    sg_tensor aT = a.ndim == 1 ? reshape(c, ta, 2, at) : transpose_last2(c, ta);
    sg_tensor db = sum_to(c, binary(c, SG_OP_MATMUL, aT, dy2), nb2, b2);
    SG_CHECK(sg__ad_give(c, op, 1, reshape(c, db, b.ndim, b.dims)));
  }
  return SG_OK;
}

/* Y = alpha op(A) op(B) + beta C with op(X) = X or X^T:
 *   d op(A) = alpha dY op(B)^T  ->  dA = that, or its transpose when trans_a;
 *   d op(B) = alpha op(A)^T dY  ->  dB likewise; dC = beta sum_to(dY).
 * Written as one gemm each by folding the transposes into the flags:
 *   !ta: dA = gemm(dY, B, 0, !tb)   ta: dA = gemm(B, dY, tb, 1)
 *   !tb: dB = gemm(A, dY, !ta, 0)   tb: dB = gemm(dY, A, 1, ta). */
static sg_status rule_gemm(sg__ad *c, const sg__op *op, sg_tensor dy) {
  int64_t ta = sg__attr_i(op, 0), tb = sg__attr_i(op, 1);
  double alpha = sg__attr_f(op, 2), beta = sg__attr_f(op, 3);
  sg_tensor a = in_t(op, 0), b = in_t(op, 1);
  if (NEEDS(0))
    SG_CHECK(sg__ad_give(c, op, 0, ta ? gemm(c, b, dy, tb, 1, alpha) : gemm(c, dy, b, 0, !tb, alpha)));
  if (NEEDS(1))
    SG_CHECK(sg__ad_give(c, op, 1, tb ? gemm(c, dy, a, 1, ta, alpha) : gemm(c, a, dy, !ta, 0, alpha)));
  if (op->inputs[2] >= 0 && NEEDS(2))
    SG_CHECK(sg__ad_give(c, op, 2, mul_scalar(c, sum_to_input(c, op, 2, dy), beta)));
  return SG_OK;
}

/* ---- pooling ------------------------------------------------------------ */

static sg_status rule_max_pool2d(sg__ad *c, const sg__op *op, sg_tensor dy) {
  sg_tensor in[] = {dy, in_t(op, 0)};
  return sg__ad_give(c, op, 0, emit(c, SG_OP_MAX_POOL2D_BACKWARD, 2, in, op->n_attrs, op->attrs));
}

static sg_status rule_avg_pool2d(sg__ad *c, const sg__op *op, sg_tensor dy) {
  sg_attr attrs[6];
  memcpy(attrs, op->attrs, sizeof(sg_attr) * 5);
  sg__tensor x = tensor_of(c, op->inputs[0]);
  attrs[5] = SG__AS("input_shape", 4, x.dims);
  return sg__ad_give(c, op, 0, emit(c, SG_OP_AVG_POOL2D_BACKWARD, 1, &dy, 6, attrs));
}

/* y = mean over the spatial dims: dx = dy / (H*W) spread over them. Scaling
 * first touches the small tensor. */
static sg_status rule_global_avg_pool(sg__ad *c, const sg__op *op, sg_tensor dy) {
  sg__tensor x = tensor_of(c, op->inputs[0]);
  int64_t hw = sg__numel(x.ndim - 2, x.dims + 2);
  return sg__ad_give(c, op, 0, broadcast_to(c, mul_scalar(c, dy, 1.0 / (double)hw), x.ndim, x.dims));
}

/* ---- shape manipulation ------------------------------------------------- */

/* flatten and reshape move no data: reshape the gradient back. */
static sg_status rule_reshape(sg__ad *c, const sg__op *op, sg_tensor dy) {
  return sg__ad_give(c, op, 0, reshape_to_input(c, op, 0, dy));
}

static sg_status rule_transpose(sg__ad *c, const sg__op *op, sg_tensor dy) {
  const int64_t *perm = sg__attr_ints(op, 0);
  int n = sg__attr_count(op, 0);
  int64_t inverse[SG_MAX_DIMS];
  for (int i = 0; i < n; i++) inverse[perm[i]] = i;
  sg_attr a = SG__AS("perm", n, inverse);
  return sg__ad_give(c, op, 0, emit(c, SG_OP_TRANSPOSE, 1, &dy, 1, &a));
}

static sg_status rule_concat(sg__ad *c, const sg__op *op, sg_tensor dy) {
  if (op->n_inputs == 1) return sg__ad_give(c, op, 0, dy);
  sg__tensor x0 = tensor_of(c, op->inputs[0]);
  int axis;
  if (!sg__norm_axis(sg__attr_i(op, 0), x0.ndim, &axis))
    return sg__error(SG_ERR_INTERNAL, "concat '%s': axis out of range in backward", op->name);
  int64_t offset = 0;
  for (int i = 0; i < op->n_inputs; i++) {
    int64_t len = tensor_of(c, op->inputs[i]).dims[axis];
    if (NEEDS(i)) {
      sg_attr a[] = {SG__AI("axis", axis), SG__AI("start", offset), SG__AI("length", len)};
      SG_CHECK(sg__ad_give(c, op, i, emit(c, SG_OP_SLICE, 1, &dy, 3, a)));
    }
    offset += len;
  }
  return SG_OK;
}

/* sum_to and broadcast_to are each other's adjoints. */
static sg_status rule_sum_to(sg__ad *c, const sg__op *op, sg_tensor dy) {
  sg__tensor x = tensor_of(c, op->inputs[0]);
  return sg__ad_give(c, op, 0, broadcast_to(c, dy, x.ndim, x.dims));
}
static sg_status rule_broadcast_to(sg__ad *c, const sg__op *op, sg_tensor dy) {
  return sg__ad_give(c, op, 0, sum_to_input(c, op, 0, dy));
}

/* Slice: dy in its place along the axis, zeros around it: concat(zeros, dy, zeros), the zeros a
 * broadcast scalar constant ("<op>/zero"; a part of length 0 is left out). Slices that together cover
 * x (attention's q, k and v) give contributions that the sum over consumers adds up. */
static sg_status rule_slice(sg__ad *c, const sg__op *op, sg_tensor dy) {
  sg__tensor x = tensor_of(c, op->inputs[0]);
  int axis;
  if (!sg__norm_axis(sg__attr_i(op, 0), x.ndim, &axis))
    return sg__error(SG_ERR_INTERNAL, "slice '%s': axis out of range in backward", op->name);
  int64_t start = sg__attr_i(op, 1), length = sg__attr_i(op, 2), after = x.dims[axis] - start - length;
  if (start == 0 && after == 0) return sg__ad_give(c, op, 0, dy);
  char name[SG__MAX_NAME + 16];
  snprintf(name, sizeof name, "%.*s/zero", SG__MAX_NAME - 8, op->name);
  for (uint32_t k = 1; sg__tensor_lookup(c->g, name) >= 0; k++)
    snprintf(name, sizeof name, "%.*s/zero_%u", SG__MAX_NAME - 20, op->name, k);
  uint8_t zero[8] = {0}; /* 0 in every float dtype */
  sg_tensor z = sg_graph_add_tensor(c->g, name, x.dtype, SG_ROLE_CONSTANT, 0, NULL, zero);
  sg_tensor parts[3];
  int n = 0;
  int64_t dims[SG_MAX_DIMS];
  memcpy(dims, x.dims, sizeof dims);
  if (start > 0) dims[axis] = start, parts[n++] = broadcast_to(c, z, x.ndim, dims);
  parts[n++] = dy;
  if (after > 0) dims[axis] = after, parts[n++] = broadcast_to(c, z, x.ndim, dims);
  sg_attr a = SG__AI("axis", axis);
  return sg__ad_give(c, op, 0, emit(c, SG_OP_CONCAT, n, parts, 1, &a));
}

/* ---- softmax, losses, reductions ---------------------------------------- */

static sg_status rule_softmax(sg__ad *c, const sg__op *op, sg_tensor dy) {
  sg_op_kind kind = op->kind == SG_OP_SOFTMAX ? SG_OP_SOFTMAX_BACKWARD : SG_OP_LOG_SOFTMAX_BACKWARD;
  sg_tensor in[] = {dy, out_t(op, 0)};
  return sg__ad_give(c, op, 0, emit(c, kind, 2, in, op->n_attrs, op->attrs));
}

/* With respect to the logits only: labels are class indices. */
static sg_status rule_cross_entropy(sg__ad *c, const sg__op *op, sg_tensor dy) {
  sg_tensor in[] = {dy, in_t(op, 0), in_t(op, 1)};
  return sg__ad_give(c, op, 0, emit(c, SG_OP_CROSS_ENTROPY_BACKWARD, 3, in, op->n_attrs, op->attrs));
}

/* dy gets the reduced dims back as 1 (reshape), is repeated along them
 * (broadcast_to) and, for the mean, divided by their element count (first,
 * on the small tensor). */
static sg_status rule_reduce(sg__ad *c, const sg__op *op, sg_tensor dy) {
  sg__tensor x = tensor_of(c, op->inputs[0]);
  const int64_t *axes = sg__attr_ints(op, 0);
  int n = sg__attr_count(op, 0);
  bool reduced[SG_MAX_DIMS] = {false};
  for (int i = 0; i < n; i++) {
    int a;
    if (sg__norm_axis(axes[i], x.ndim, &a)) reduced[a] = true;
  }
  int64_t keep[SG_MAX_DIMS], count = 1;
  for (int i = 0; i < x.ndim; i++) {
    if (n == 0) reduced[i] = true; /* no axes: all of them */
    keep[i] = reduced[i] ? 1 : x.dims[i];
    if (reduced[i]) count *= x.dims[i];
  }
  sg_tensor t = dy;
  if (op->kind == SG_OP_REDUCE_MEAN) t = mul_scalar(c, t, 1.0 / (double)count);
  t = broadcast_to(c, reshape(c, t, x.ndim, keep), x.ndim, x.dims);
  return sg__ad_give(c, op, 0, t);
}

/* With respect to the table only: ids are integers. The backward op gets V
 * (the table's rows) as an attribute, so it does not hold the table. */
static sg_status rule_embedding(sg__ad *c, const sg__op *op, sg_tensor dy) {
  sg__tensor table = tensor_of(c, op->inputs[0]);
  sg_tensor in[] = {dy, in_t(op, 1)};
  sg_attr v = SG__AI("num_embeddings", table.dims[0]);
  return sg__ad_give(c, op, 0, emit(c, SG_OP_EMBEDDING_BACKWARD, 2, in, 1, &v));
}

/* One attention_backward from the forward op's inputs and both its outputs
 * (y for D = rowsum(dy * y), lse to recompute the probabilities), with the
 * forward attributes as they are (scale 0 stays "1/sqrt(d)"; dropout and
 * seed draw the forward's masks again). It computes
 * dq, dk and dv together; only the needed ones are handed on. */
static sg_status rule_attention(sg__ad *c, const sg__op *op, sg_tensor dy) {
  sg_tensor in[] = {dy, in_t(op, 0), in_t(op, 1), in_t(op, 2), out_t(op, 0), out_t(op, 1)};
  sg_attr attrs[] = {SG__AF("scale", sg__attr_f(op, 0)), SG__AI("causal", sg__attr_i(op, 1)),
                     SG__AF("dropout", sg__attr_f(op, 2)), SG__AI("seed", sg__attr_i(op, 3))};
  sg_tensor out[3] = {SG_NO_TENSOR, SG_NO_TENSOR, SG_NO_TENSOR};
  if (dy.id >= 0) sg__ad_emit(c, SG_OP_ATTENTION_BACKWARD, 6, in, 4, attrs, 3, out);
  for (int i = 0; i < 3; i++)
    if (NEEDS(i)) SG_CHECK(sg__ad_give(c, op, i, out[i]));
  return SG_OK;
}

/* y_j = sum of x_i over i <= j (exclusive: i < j) gives dx_i = sum of dy_j
 * over j >= i (exclusive: j > i): the cumsum of dy in the other direction,
 * with the same exclusive. */
static sg_status rule_cumsum(sg__ad *c, const sg__op *op, sg_tensor dy) {
  sg_attr attrs[] = {SG__AI("axis", sg__attr_i(op, 0)), SG__AI("exclusive", sg__attr_i(op, 1)),
                     SG__AI("reverse", !sg__attr_i(op, 2))};
  return sg__ad_give(c, op, 0, emit(c, SG_OP_CUMSUM, 1, &dy, 3, attrs));
}

/* dx = dy / (number of elements equal to y) at those elements, 0 elsewhere
 * (PyTorch's amax/amin rule): one backward op that sees x, y and dy, with
 * the forward's axes and keepdims and min telling max from min. */
static sg_status rule_reduce_max(sg__ad *c, const sg__op *op, sg_tensor dy) {
  sg_tensor in[] = {in_t(op, 0), out_t(op, 0), dy};
  sg_attr attrs[] = {SG__AS("axes", sg__attr_count(op, 0), sg__attr_ints(op, 0)),
                     SG__AI("keepdims", sg__attr_i(op, 1)), SG__AI("min", op->kind == SG_OP_REDUCE_MIN)};
  return sg__ad_give(c, op, 0, emit(c, SG_OP_REDUCE_MAX_BACKWARD, 3, in, 3, attrs));
}

/* The values' gradient goes back to the elements they were taken from: one
 * topk_backward of dy and the indices, with x's last dim; the indices have
 * none. */
static sg_status rule_topk(sg__ad *c, const sg__op *op, sg_tensor dy) {
  sg__tensor x = tensor_of(c, op->inputs[0]);
  sg_tensor in[] = {dy, out_t(op, 1)};
  sg_attr n = SG__AI("n", x.dims[x.ndim - 1]);
  return sg__ad_give(c, op, 0, emit(c, SG_OP_TOPK_BACKWARD, 2, in, 1, &n));
}

/* Training form: the saved keep mask; inference form is the identity. */
static sg_status rule_dropout(sg__ad *c, const sg__op *op, sg_tensor dy) {
  if (sg__attr_i(op, 2) == 0) return sg__ad_give(c, op, 0, dy);
  sg_tensor in[] = {dy, out_t(op, 1)};
  sg_attr a = SG__AF("p", sg__attr_f(op, 0));
  return sg__ad_give(c, op, 0, emit(c, SG_OP_DROPOUT_BACKWARD, 2, in, 1, &a));
}

/* ---- the table ---------------------------------------------------------- */

#define ALL_INPUTS 0xffffffffu
static const sg__grad_def rules[] = {
    [SG_OP_CONV2D] = {rule_conv2d, ALL_INPUTS},
    /* Not the running statistics (inputs 3, 4). */
    [SG_OP_BATCH_NORM] = {rule_batch_norm, 0x7u},
    [SG_OP_RELU] = {rule_from_output, ALL_INPUTS},
    [SG_OP_CLIP] = {rule_from_input, ALL_INPUTS},
    [SG_OP_GELU] = {rule_from_input, ALL_INPUTS},
    [SG_OP_SIGMOID] = {rule_from_output, ALL_INPUTS},
    [SG_OP_TANH] = {rule_from_output, ALL_INPUTS},
    [SG_OP_ADD] = {rule_add, ALL_INPUTS},
    [SG_OP_SUB] = {rule_sub, ALL_INPUTS},
    [SG_OP_MUL] = {rule_mul, ALL_INPUTS},
    [SG_OP_DIV] = {rule_div, ALL_INPUTS},
    [SG_OP_ADD_SCALAR] = {rule_add_scalar, ALL_INPUTS},
    [SG_OP_MUL_SCALAR] = {rule_mul_scalar, ALL_INPUTS},
    [SG_OP_POW_SCALAR] = {rule_pow_scalar, ALL_INPUTS},
    [SG_OP_MATMUL] = {rule_matmul, ALL_INPUTS},
    [SG_OP_GEMM] = {rule_gemm, ALL_INPUTS},
    [SG_OP_MAX_POOL2D] = {rule_max_pool2d, ALL_INPUTS},
    [SG_OP_AVG_POOL2D] = {rule_avg_pool2d, ALL_INPUTS},
    [SG_OP_GLOBAL_AVG_POOL] = {rule_global_avg_pool, ALL_INPUTS},
    [SG_OP_FLATTEN] = {rule_reshape, ALL_INPUTS},
    [SG_OP_RESHAPE] = {rule_reshape, ALL_INPUTS},
    [SG_OP_TRANSPOSE] = {rule_transpose, ALL_INPUTS},
    [SG_OP_CONCAT] = {rule_concat, ALL_INPUTS},
    [SG_OP_SOFTMAX] = {rule_softmax, ALL_INPUTS},
    [SG_OP_LOG_SOFTMAX] = {rule_softmax, ALL_INPUTS},
    /* Not the labels (input 1). */
    [SG_OP_CROSS_ENTROPY] = {rule_cross_entropy, 0x1u},
    [SG_OP_REDUCE_MEAN] = {rule_reduce, ALL_INPUTS},
    [SG_OP_REDUCE_SUM] = {rule_reduce, ALL_INPUTS},
    [SG_OP_DROPOUT] = {rule_dropout, ALL_INPUTS},
    [SG_OP_SUM_TO] = {rule_sum_to, ALL_INPUTS},
    [SG_OP_BROADCAST_TO] = {rule_broadcast_to, ALL_INPUTS},
    [SG_OP_SLICE] = {rule_slice, ALL_INPUTS},
    [SG_OP_EXP] = {rule_math, ALL_INPUTS},
    [SG_OP_LOG] = {rule_math, ALL_INPUTS},
    [SG_OP_SQRT] = {rule_math, ALL_INPUTS},
    [SG_OP_RECIPROCAL] = {rule_math, ALL_INPUTS},
    [SG_OP_NEG] = {rule_math, ALL_INPUTS},
    [SG_OP_ABS] = {rule_math, ALL_INPUTS},
    [SG_OP_SIGN] = {rule_math, ALL_INPUTS},
    [SG_OP_ERF] = {rule_math, ALL_INPUTS},
    [SG_OP_MAX] = {rule_minmax, ALL_INPUTS},
    [SG_OP_MIN] = {rule_minmax, ALL_INPUTS},
    /* Not the condition (input 0). */
    [SG_OP_WHERE] = {rule_where, 0x6u},
    [SG_OP_CAST] = {rule_cast, ALL_INPUTS},
    [SG_OP_LAYER_NORM] = {rule_layer_norm, ALL_INPUTS},
    /* Not the ids (input 1). */
    [SG_OP_EMBEDDING] = {rule_embedding, 0x1u},
    [SG_OP_ATTENTION] = {rule_attention, ALL_INPUTS},
    [SG_OP_CUMSUM] = {rule_cumsum, ALL_INPUTS},
    [SG_OP_REDUCE_MAX] = {rule_reduce_max, ALL_INPUTS},
    [SG_OP_TOPK] = {rule_topk, ALL_INPUTS},
    [SG_OP_SIN] = {rule_math, ALL_INPUTS},
    [SG_OP_COS] = {rule_math, ALL_INPUTS},
    [SG_OP_ACOS] = {rule_math, ALL_INPUTS},
    [SG_OP_REDUCE_MIN] = {rule_reduce_max, ALL_INPUTS},
};

const sg__grad_def *sg__grad_def_get(sg_op_kind kind) {
  if ((int)kind <= 0 || (size_t)kind >= sizeof rules / sizeof rules[0] || rules[kind].rule == NULL)
    return NULL;
  return &rules[kind];
}
