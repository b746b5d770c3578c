/* attention (q, k, v) -> y = softmax(q k^T scale [+ causal mask]) v and
 * lse, the log-sum-exp of each query row's scaled scores; and its backward,
 * which recomputes the probabilities from lse instead of keeping them:
 * nothing of size [T_q, T_k] lives between forward and backward.
 *
 * Shapes: q [..., T_q, d], k [..., T_k, d], v [..., T_k, d_v] with the same
 * leading dims (no broadcasting: a head is one index of them), f32 only
 * (the one dtype of the CPU kernel); y [..., T_q, d_v], lse [..., T_q]. */
#include <math.h>

#include "graph/graph_internal.h"

enum { SCALE, CAUSAL, DROPOUT, SEED };
/* scale 0 (the default) stands for 1/sqrt(d), resolved where it is used
 * (sg__attention_scale) so that the attribute keeps what the caller meant
 * and a .sgg file stays the same when d changes with a reshape upstream.
 * dropout p (default 0) drops attention weights in training as a dropout op
 * on softmax's output with this seed would (the same masks). */
static const sg__attr_schema attention_attrs[] = {
    [SCALE] = {"scale", SG_ATTR_FLOAT, false, 0, 0.0, 0, {0}, 0, 0},
    [CAUSAL] = {"causal", SG_ATTR_INT, false, 0, 0, 0, {0}, 0, 0, true, 0, 1},
    [DROPOUT] = {"dropout", SG_ATTR_FLOAT, false, 0, 0.0, 0, {0}, 0, 0},
    [SEED] = {"seed", SG_ATTR_INT, false, 0, 0, 0, {0}, 0, 0},
};

double sg__attention_scale(const sg_graph *g, const sg__op *op) {
  double s = sg__attr_f(op, SCALE);
  if (s != 0) return s;
  /* q is input 0 of the forward op and input 1 of the backward op. */
  const sg__tensor *q = sg__in(g, op, op->kind == SG_OP_ATTENTION ? 0 : 1);
  return 1.0 / sqrt((double)q->dims[q->ndim - 1]);
}

/* The checks both kinds make of q, k, v and the attributes; the forward
 * op's outputs into y and lse. */
static sg_status check_qkv(const sg_graph *g, const sg__op *op, int first, sg__shape *y, sg__shape *lse) {
  static const char *const names[] = {"q", "k", "v"};
  const sg__tensor *t[3];
  char s[3][SG__SHAPE_STR];
  for (int i = 0; i < 3; i++) {
    t[i] = sg__in(g, op, first + i);
    sg__tstr(s[i], t[i]);
    if (t[i]->dtype != SG_F32)
      return sg__op_error(op, SG_ERR_DTYPE, "%s %s must be f32 (the dtype of the fused kernel)", names[i],
                          s[i]);
    if (t[i]->ndim < 2)
      return sg__op_error(op, SG_ERR_SHAPE, "%s %s must have at least 2 dims [..., T, d]", names[i], s[i]);
  }
  const sg__tensor *q = t[0], *k = t[1], *v = t[2];
  for (int i = 1; i < 3; i++) {
    bool same = t[i]->ndim == q->ndim;
    for (int d = 0; same && d < q->ndim - 2; d++) same = t[i]->dims[d] == q->dims[d];
    if (!same)
      return sg__op_error(op, SG_ERR_SHAPE,
                          "%s %s and q %s must have the same leading dims [..., T, d] (one index per head, "
                          "no broadcasting)",
                          names[i], s[i], s[0]);
  }
  const int n = q->ndim;
  int64_t Tq = q->dims[n - 2], d = q->dims[n - 1], Tk = k->dims[n - 2];
  if (k->dims[n - 1] != d)
    return sg__op_error(op, SG_ERR_SHAPE, "k %s has head dim %lld but q %s has %lld (q and k share d)", s[1],
                        (long long)k->dims[n - 1], s[0], (long long)d);
  if (v->dims[n - 2] != Tk)
    return sg__op_error(op, SG_ERR_SHAPE, "v %s has %lld positions but k %s has %lld (one value per key)",
                        s[2], (long long)v->dims[n - 2], s[1], (long long)Tk);
  double scale = sg__attr_f(op, SCALE);
  if (!(scale >= 0) || isinf(scale))
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "scale is %g; must be finite and > 0, or 0 for 1/sqrt(d)",
                        scale);
  double p = sg__attr_f(op, DROPOUT);
  if (!(p >= 0 && p < 1)) return sg__op_error(op, SG_ERR_ATTRIBUTE, "dropout is %g; must be in [0, 1)", p);
  if (sg__attr_i(op, CAUSAL) && Tq != Tk)
    return sg__op_error(op, SG_ERR_SHAPE,
                        "causal attention needs as many queries as keys: q %s has T = %lld, k %s has %lld",
                        s[0], (long long)Tq, s[1], (long long)Tk);
  sg__shape_of(q, y);
  y->dims[n - 1] = v->dims[n - 1];
  sg__shape_of(q, lse);
  lse->ndim = n - 1;
  return SG_OK;
}

static sg_status infer_attention(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  SG_CHECK(check_qkv(g, op, 0, &outs[0], &outs[1]));
  *n_outs = 2;
  return SG_OK;
}

const sg__op_def sg__def_attention = {SG_OP_ATTENTION, "attention",    3, 3, 0, 0, SG_ROLE_ACTIVATION, 4,
                                      attention_attrs, infer_attention};

sg_tensor sg_attention(sg_graph *g, sg_tensor q, sg_tensor k, sg_tensor v, double scale, int causal) {
  sg_tensor in[] = {q, k, v};
  sg_attr a[] = {SG__AF("scale", scale), SG__AI("causal", causal)};
  return sg__build1(g, SG_OP_ATTENTION, 3, in, 2, a);
}

sg_tensor sg_attention_dropout(sg_graph *g, sg_tensor q, sg_tensor k, sg_tensor v, double scale, int causal,
                               double p, uint64_t seed) {
  sg_tensor in[] = {q, k, v};
  /* The seed travels as int64 bits, as sg_dropout's; the kernel casts it back. */
  sg_attr a[] = {SG__AF("scale", scale), SG__AI("causal", causal), SG__AF("dropout", p),
                 SG__AI("seed", (int64_t)seed)};
  return sg__build1(g, SG_OP_ATTENTION, 3, in, 4, a);
}

/* ---- attention_backward ------------------------------------------------------ */

/* (dy, q, k, v, y, lse) -> dq, dk, dv: y and lse are the forward op's
 * outputs, which the backward needs (D = rowsum(dy * y), P = exp(s - lse))
 * and checks against the forward shapes of q, k and v. */
static sg_status infer_attention_backward(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  sg__shape want[2];
  SG_CHECK(check_qkv(g, op, 1, &want[0], &want[1]));
  static const char *const names[] = {"dy", "y", "lse"};
  const int at[] = {0, 4, 5}, shape_of[] = {0, 0, 1};
  for (int i = 0; i < 3; i++) {
    const sg__tensor *t = sg__in(g, op, at[i]);
    const sg__shape *w = &want[shape_of[i]];
    bool same = t->dtype == w->dtype && t->ndim == w->ndim;
    for (int d = 0; same && d < t->ndim; d++) same = t->dims[d] == w->dims[d];
    if (!same) {
      char st[SG__SHAPE_STR], sw[SG__SHAPE_STR], sq[SG__SHAPE_STR];
      sg__tstr(st, t);
      sg__tstr(sq, sg__in(g, op, 1));
      sg__shape_str(sw, w->dtype, w->ndim, w->dims);
      return sg__op_error(op, SG_ERR_SHAPE, "%s %s must be %s, the forward op's %s for q %s", names[i], st,
                          sw, i == 2 ? "lse" : "y", sq);
    }
  }
  for (int i = 0; i < 3; i++) sg__shape_of(sg__in(g, op, 1 + i), &outs[i]);
  *n_outs = 3;
  return SG_OK;
}

const sg__op_def sg__def_attention_backward = {
    SG_OP_ATTENTION_BACKWARD, "attention_backward",    6, 6, 0, 0, SG_ROLE_GRADIENT, 4,
    attention_attrs,          infer_attention_backward};
