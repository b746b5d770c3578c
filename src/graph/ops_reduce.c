/* Reductions (mean, sum over axes) and dropout. */
#include <math.h>

#include "graph/graph_internal.h"

enum { AXES, KEEPDIMS };
static const sg__attr_schema reduce_attrs[] = {
    [AXES] = {"axes", SG_ATTR_INTS, false, 0, 0, 0, {0}, 0, SG_MAX_DIMS},
    [KEEPDIMS] = {"keepdims", SG_ATTR_INT, false, 0, 0, 0, {0}, 0, 0},
};

static sg_status infer_reduce(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *x = sg__in(g, op, 0);
  const int64_t *axes = sg__attr_ints(op, AXES);
  int n = sg__attr_count(op, AXES);
  int64_t keepdims = sg__attr_i(op, KEEPDIMS);
  char sx[SG__SHAPE_STR];
  sg__tstr(sx, x);
  if (!(sg__is_float(x->dtype) || (op->kind == SG_OP_REDUCE_SUM && sg__is_int(x->dtype))))
    return sg__op_error(op, SG_ERR_DTYPE, "input x %s must be a float%s type", sx,
                        op->kind == SG_OP_REDUCE_SUM ? " or integer" : "");
  if (keepdims != 0 && keepdims != 1)
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "keepdims is %lld; must be 0 or 1", (long long)keepdims);
  bool reduced[SG_MAX_DIMS] = {false};
  for (int i = 0; i < n; i++) {
    int a;
    if (!sg__norm_axis(axes[i], x->ndim, &a))
      return sg__op_error(op, SG_ERR_ATTRIBUTE, "axis %lld is out of range for x %s", (long long)axes[i], sx);
    if (reduced[a]) return sg__op_error(op, SG_ERR_ATTRIBUTE, "axis %d is listed twice", a);
    reduced[a] = true;
  }
  if (n == 0)
    for (int i = 0; i < x->ndim; i++) reduced[i] = true;
  sg__shape *o = &outs[0];
  o->dtype = x->dtype;
  o->ndim = 0;
  for (int i = 0; i < x->ndim; i++) {
    if (!reduced[i]) o->dims[o->ndim++] = x->dims[i];
    else if (keepdims) o->dims[o->ndim++] = 1;
  }
  *n_outs = 1;
  return SG_OK;
}

const sg__op_def sg__def_reduce_mean = {
    SG_OP_REDUCE_MEAN, "reduce_mean", 1,         1, 0, 0, SG_ROLE_ACTIVATION, 2,
    reduce_attrs,      infer_reduce,  SG__OP_SUM};
const sg__op_def sg__def_reduce_sum = {
    SG_OP_REDUCE_SUM, "reduce_sum", 1,         1, 0, 0, SG_ROLE_ACTIVATION, 2,
    reduce_attrs,     infer_reduce, SG__OP_SUM};

static sg_tensor reduce(sg_graph *g, sg_op_kind kind, sg_tensor x, int naxes, const int64_t *axes,
                        int keepdims) {
  sg_attr a[] = {SG__AS("axes", naxes, axes), SG__AI("keepdims", keepdims)};
  return sg__build1(g, kind, 1, &x, 2, a);
}
sg_tensor sg_reduce_mean(sg_graph *g, sg_tensor x, int naxes, const int64_t *axes, int keepdims) {
  return reduce(g, SG_OP_REDUCE_MEAN, x, naxes, axes, keepdims);
}
sg_tensor sg_reduce_sum(sg_graph *g, sg_tensor x, int naxes, const int64_t *axes, int keepdims) {
  return reduce(g, SG_OP_REDUCE_SUM, x, naxes, axes, keepdims);
}

enum { P, SEED, TRAINING };
static const sg__attr_schema dropout_attrs[] = {
    [P] = {"p", SG_ATTR_FLOAT, false, 0, 0.5, 0, {0}, 0, 0},
    [SEED] = {"seed", SG_ATTR_INT, false, 0, 0, 0, {0}, 0, 0},
    [TRAINING] = {"training", SG_ATTR_INT, false, 1, 0, 0, {0}, 0, 0},
};

static sg_status infer_dropout(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *x = sg__in(g, op, 0);
  char sx[SG__SHAPE_STR];
  double p = sg__attr_f(op, P);
  int64_t training = sg__attr_i(op, TRAINING);
  if (!sg__is_float(x->dtype))
    return sg__op_error(op, SG_ERR_DTYPE, "input x %s must be a float type", sg__tstr(sx, x));
  if (!(p >= 0 && p < 1)) return sg__op_error(op, SG_ERR_ATTRIBUTE, "p is %g; must be in [0, 1)", p);
  if (training != 0 && training != 1)
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "training is %lld; must be 0 or 1", (long long)training);
  sg__shape_of(x, &outs[0]);
  *n_outs = 1;
  if (training) {
    /* The keep mask, saved for the backward pass. */
    sg__shape_of(x, &outs[1]);
    outs[1].dtype = SG_U8;
    *n_outs = 2;
  }
  return SG_OK;
}

/* Elementwise, but not offered in place (no SG__OP_INPLACE_INPUT0). */
const sg__op_def sg__def_dropout = {
    SG_OP_DROPOUT, "dropout",         1, 1, 0, 0, SG_ROLE_ACTIVATION, 3, dropout_attrs,
    infer_dropout, SG__OP_ELEMENTWISE};

sg_tensor sg_dropout(sg_graph *g, sg_tensor x, double p, uint64_t seed, int training) {
  /* The seed travels as int64 bits; the cast is undone by the kernel. */
  sg_attr a[] = {SG__AF("p", p), SG__AI("seed", (int64_t)seed), SG__AI("training", training)};
  return sg__build1(g, SG_OP_DROPOUT, 1, &x, 3, a);
}

bool sg__sum_dims(const sg_graph *g, const sg__op *op, bool *summed) {
  if (op->kind != SG_OP_REDUCE_SUM && op->kind != SG_OP_REDUCE_MEAN && op->kind != SG_OP_SUM_TO) return false;
  const sg__tensor *x = sg__in(g, op, 0), *y = &g->tensors[op->outputs[0]];
  for (int d = 0; d < x->ndim; d++) summed[d] = false;
  if (op->kind == SG_OP_SUM_TO) {
    for (int d = 0; d < x->ndim; d++) {
      int j = d - (x->ndim - y->ndim);
      summed[d] = (j < 0 || y->dims[j] == 1) && x->dims[d] != 1;
    }
    return true;
  }
  int n = sg__attr_count(op, AXES);
  const int64_t *axes = sg__attr_ints(op, AXES);
  for (int i = 0; i < n; i++) {
    int a;
    if (!sg__norm_axis(axes[i], x->ndim, &a)) return false;
    summed[a] = true;
  }
  for (int d = 0; n == 0 && d < x->ndim; d++) summed[d] = true; /* no axes: all */
  return true;
}
