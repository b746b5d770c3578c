/* Matrix products: NumPy matmul, and gemm (which linear layers lower to). */
#include <math.h>

#include "graph/graph_internal.h"

static sg_status infer_matmul(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *a = sg__in(g, op, 0), *b = sg__in(g, op, 1);
  char sa[SG__SHAPE_STR], sb[SG__SHAPE_STR];
  sg__tstr(sa, a);
  sg__tstr(sb, b);
  if (a->dtype != b->dtype || !sg__is_float(a->dtype))
    return sg__op_error(op, SG_ERR_DTYPE, "operands %s and %s must share one float dtype", sa, sb);
  if (a->ndim < 1 || b->ndim < 1)
    return sg__op_error(op, SG_ERR_SHAPE, "operands %s and %s must have at least 1 dim", sa, sb);
  /* 1-D operands are promoted to matrices and the added dim removed after. */
  int64_t M = a->ndim == 1 ? 1 : a->dims[a->ndim - 2], K = a->dims[a->ndim - 1];
  int64_t Kb = b->ndim == 1 ? b->dims[0] : b->dims[b->ndim - 2], N = b->ndim == 1 ? 1 : b->dims[b->ndim - 1];
  if (K != Kb)
    return sg__op_error(op, SG_ERR_SHAPE, "inner dims differ: %s has %lld columns, %s has %lld rows", sa,
                        (long long)K, sb, (long long)Kb);
  /* Broadcast the batch dims. */
  sg__tensor ba = *a, bb = *b;
  ba.ndim = a->ndim > 2 ? a->ndim - 2 : 0;
  bb.ndim = b->ndim > 2 ? b->ndim - 2 : 0;
  sg__shape batch;
  SG_CHECK(sg__broadcast(op, &ba, &bb, &batch));
  sg__shape *o = &outs[0];
  o->dtype = a->dtype;
  o->ndim = batch.ndim;
  for (int i = 0; i < batch.ndim; i++) o->dims[i] = batch.dims[i];
  if (a->ndim > 1) o->dims[o->ndim++] = M;
  if (b->ndim > 1) o->dims[o->ndim++] = N;
  *n_outs = 1;
  return SG_OK;
}

const sg__op_def sg__def_matmul = {SG_OP_MATMUL,       "matmul", 2,    2,           0, 0,
                                   SG_ROLE_ACTIVATION, 0,        NULL, infer_matmul};

sg_tensor sg_matmul(sg_graph *g, sg_tensor a, sg_tensor b) {
  sg_tensor in[] = {a, b};
  return sg__build1(g, SG_OP_MATMUL, 2, in, 0, NULL);
}

enum { TRANS_A, TRANS_B, ALPHA, BETA };
static const sg__attr_schema gemm_attrs[] = {
    [TRANS_A] = {"trans_a", SG_ATTR_INT, false, 0, 0, 0, {0}, 0, 0},
    [TRANS_B] = {"trans_b", SG_ATTR_INT, false, 0, 0, 0, {0}, 0, 0},
    [ALPHA] = {"alpha", SG_ATTR_FLOAT, false, 0, 1.0, 0, {0}, 0, 0},
    [BETA] = {"beta", SG_ATTR_FLOAT, false, 0, 1.0, 0, {0}, 0, 0},
};

static sg_status infer_gemm(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *a = sg__in(g, op, 0), *b = sg__in(g, op, 1), *c = sg__in(g, op, 2);
  char sa[SG__SHAPE_STR], sb[SG__SHAPE_STR], sc[SG__SHAPE_STR];
  sg__tstr(sa, a);
  sg__tstr(sb, b);
  int64_t ta = sg__attr_i(op, TRANS_A), tb = sg__attr_i(op, TRANS_B);
  double alpha = sg__attr_f(op, ALPHA), beta = sg__attr_f(op, BETA);
  if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1))
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "trans_a %lld and trans_b %lld must be 0 or 1", (long long)ta,
                        (long long)tb);
  if (!isfinite(alpha) || !isfinite(beta))
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "alpha %g and beta %g must be finite", alpha, beta);
  if (a->dtype != b->dtype || !sg__is_float(a->dtype) || (c && c->dtype != a->dtype))
    return sg__op_error(op, SG_ERR_DTYPE, "a %s, b %s%s%s must share one float dtype", sa, sb,
                        c ? ", c " : "", c ? sg__tstr(sc, c) : "");
  if (a->ndim != 2 || b->ndim != 2)
    return sg__op_error(op, SG_ERR_SHAPE, "a %s and b %s must be 2-D", sa, sb);
  /* op(A) is [M,K]: A is [M,K], or [K,M] when transposed; op(B) is [K,N]. */
  int64_t M = a->dims[ta], K = a->dims[1 - ta], Kb = b->dims[tb], N = b->dims[1 - tb];
  if (K != Kb)
    return sg__op_error(op, SG_ERR_SHAPE, "inner dims differ: a %s%s gives K=%lld, b %s%s gives K=%lld", sa,
                        ta ? " (transposed)" : "", (long long)K, sb, tb ? " (transposed)" : "",
                        (long long)Kb);
  outs[0] = (sg__shape){a->dtype, 2, {M, N}};
  if (c) {
    /* c broadcasts one way, to [M, N]: at most 2 dims, each 1 or the
     * result's (aligned from the right, as NumPy). */
    bool ok = c->ndim <= 2;
    for (int i = 0; ok && i < c->ndim; i++) {
      int64_t want = i == c->ndim - 1 ? N : M;
      ok = c->dims[i] == 1 || c->dims[i] == want;
    }
    if (!ok)
      return sg__op_error(op, SG_ERR_SHAPE, "c %s must broadcast to the result [%lld,%lld] of a %s and b %s",
                          sg__tstr(sc, c), (long long)M, (long long)N, sa, sb);
  }
  *n_outs = 1;
  return SG_OK;
}

const sg__op_def sg__def_gemm = {SG_OP_GEMM,         "gemm", 2,          3,         1u << 2, 0,
                                 SG_ROLE_ACTIVATION, 4,      gemm_attrs, infer_gemm};

sg_gemm_params sg_gemm_params_init(void) { return (sg_gemm_params)SG_GEMM_PARAMS_INIT; }

sg_tensor sg_gemm(sg_graph *g, sg_tensor a, sg_tensor b, sg_tensor c, const sg_gemm_params *p) {
  sg_gemm_params d = SG_GEMM_PARAMS_INIT;
  if (sg__graph_params(g, "sg_gemm", SG__VERSIONED(sg_gemm_params, trans_a, "SG_GEMM_PARAMS_INIT"), &d, p) !=
      SG_OK)
    return SG_NO_TENSOR;
  p = &d;
  sg_attr attrs[] = {SG__AI("trans_a", p->trans_a), SG__AI("trans_b", p->trans_b), SG__AF("alpha", p->alpha),
                     SG__AF("beta", p->beta)};
  sg_tensor in[] = {a, b, c};
  return sg__build1(g, SG_OP_GEMM, 3, in, 4, attrs);
}

sg_tensor sg_linear(sg_graph *g, sg_tensor x, sg_tensor w, sg_tensor bias) {
  sg_gemm_params p = SG_GEMM_PARAMS_INIT;
  p.trans_b = 1;
  return sg_gemm(g, x, w, bias, &p);
}
