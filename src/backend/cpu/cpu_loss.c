/* cross_entropy (logits [N,C] f32, labels [N] i32/i64) and its gradient, as
 * torch.nn.functional.cross_entropy with class indices:
 *   loss_i = logsumexp(x_i) - x_i[label_i]   (max-shifted, sums in double)
 *   reduction none: [N]; mean: sum / N; sum: sum
 *   dlogits_i = (softmax(x_i) - onehot(label_i)) * g_i, with g_i = dloss_i
 *   (none), dloss / N (mean) or dloss (sum).
 * A label outside 0..C-1 fails the run with SG_ERR_RANGE naming the op, the
 * row and the label (PyTorch raises too). */
#include <math.h>

#include "backend/cpu/cpu_internal.h"

enum { NONE = 0, MEAN = 1, SUM = 2 };

typedef struct ce_kernel {
  sg__kernel base;
  int64_t N, C;
  int reduction;
  bool labels64;
} ce_kernel;

static sg_status label_at(const ce_kernel *k, const void *labels, int64_t i, int64_t *out) {
  int64_t l = k->labels64 ? ((const int64_t *)labels)[i] : ((const int32_t *)labels)[i];
  if (l < 0 || l >= k->C)
    return sg__error(SG_ERR_RANGE, "%s '%s': label %lld of row %lld is outside 0..%lld",
                     sg_op_kind_name(k->base.kind), k->base.name, (long long)l, (long long)i,
                     (long long)(k->C - 1));
  *out = l;
  return SG_OK;
}

/* log(sum(exp(x - max))) + max of one row, in double. */
static double row_lse(const float *x, int64_t C, double *max_out) {
  float m = x[0];
  for (int64_t j = 1; j < C; j++) m = x[j] > m ? x[j] : m;
  double s = 0;
  for (int64_t j = 0; j < C; j++) s += exp((double)x[j] - m);
  *max_out = m;
  return log(s) + m;
}

static sg_status ce_forward(sg__cpu_state *st, sg__kernel *base, void *const *in, void *const *out,
                            const sg__run_ctx *ctx) {
  (void)st;
  (void)ctx;
  ce_kernel *k = (ce_kernel *)base;
  const float *x = in[0];
  float *y = out[0];
  double total = 0;
  for (int64_t i = 0; i < k->N; i++) {
    int64_t l = 0;
    SG_CHECK(label_at(k, in[1], i, &l));
    double m, lse = row_lse(x + i * k->C, k->C, &m);
    double loss = lse - x[i * k->C + l];
    if (k->reduction == NONE) y[i] = (float)loss;
    total += loss;
  }
  if (k->reduction == MEAN) y[0] = (float)(total / (double)k->N);
  else if (k->reduction == SUM) y[0] = (float)total;
  return SG_OK;
}

static sg_status ce_backward(sg__cpu_state *st, sg__kernel *base, void *const *in, void *const *out,
                             const sg__run_ctx *ctx) {
  (void)st;
  (void)ctx;
  ce_kernel *k = (ce_kernel *)base;
  const float *dloss = in[0], *x = in[1];
  float *dx = out[0];
  const int64_t C = k->C;
  for (int64_t i = 0; i < k->N; i++) {
    int64_t l = 0;
    SG_CHECK(label_at(k, in[2], i, &l));
    double g = k->reduction == NONE ? dloss[i] : k->reduction == MEAN ? dloss[0] / (double)k->N : dloss[0];
    const float *xr = x + i * C;
    float *dr = dx + i * C;
    double m, lse = row_lse(xr, C, &m);
    for (int64_t j = 0; j < C; j++) dr[j] = (float)(exp((double)xr[j] - lse) * g);
    dr[l] = (float)((exp((double)xr[l] - lse) - 1.0) * g);
  }
  return SG_OK;
}

sg_status sg__cpu_create_loss(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                              sg__kernel **out) {
  (void)st;
  (void)mode;
  bool fwd = op->kind == SG_OP_CROSS_ENTROPY;
  const sg__tensor *x = sg__cpu_in(g, op, fwd ? 0 : 1), *l = sg__cpu_in(g, op, fwd ? 1 : 2);
  const sg__tensor *d = fwd ? NULL : sg__cpu_in(g, op, 0);
  if (x->dtype != SG_F32 || (d && d->dtype != SG_F32) || (l->dtype != SG_I32 && l->dtype != SG_I64))
    return sg__cpu_unsupported(g, op, " (takes f32 logits and i32/i64 labels)");
  sg__kernel *kb;
  SG_CHECK(sg__cpu_kernel_new(op, sizeof(ce_kernel), fwd ? ce_forward : ce_backward, &kb));
  ce_kernel *k = (ce_kernel *)kb;
  k->N = x->dims[0];
  k->C = x->dims[1];
  k->reduction = (int)sg__attr_i(op, 0);
  k->labels64 = l->dtype == SG_I64;
  *out = kb;
  return SG_OK;
}
