/* The compute half of the cost model (SPEC P1): FLOPs and memory traffic of
 * every op kind. Multiply-add counts as 2 FLOPs; an exp, log, erf, tanh,
 * sqrt or pow counts as 4 (the order of a vectorised polynomial); a compare
 * or select as 1. Pure data movement (reshape, transpose, concat, slice,
 * broadcast) costs no FLOPs, only traffic. docs/partitioning.md lists the
 * formulas. */
#include <string.h>

#include "partition/partition_internal.h"

/* Attributes are canonical (schema order, defaults filled); looking them up
 * by name keeps this file independent of the schema's order. */
static const sg_attr *attr(const sg__op *op, const char *name) {
  for (int i = 0; i < op->n_attrs; i++)
    if (strcmp(op->attrs[i].name, name) == 0) return &op->attrs[i];
  return NULL;
}

static int64_t attr_i(const sg__op *op, const char *name, int64_t def) {
  const sg_attr *a = attr(op, name);
  return a && a->type == SG_ATTR_INT ? a->i : def;
}

static double attr_f(const sg__op *op, const char *name, double def) {
  const sg_attr *a = attr(op, name);
  return a && a->type == SG_ATTR_FLOAT ? a->f : def;
}

/* kernel[0] * kernel[1] of a pooling op. */
static double window(const sg__op *op) {
  const sg_attr *a = attr(op, "kernel");
  if (a == NULL || a->type != SG_ATTR_INTS || a->count != 2) return 1.0;
  return (double)a->ints[0] * (double)a->ints[1];
}

static double numel(const sg__tensor *t) { return t ? (double)sg__numel(t->ndim, t->dims) : 0.0; }

/* Product of dims 1..3 of a 4-D shape: (C/groups) * R * S of a conv weight. */
static double filter_volume(int ndim, const int64_t *d) {
  return ndim == 4 ? (double)d[1] * (double)d[2] * (double)d[3] : 1.0;
}

static double flops_of(const sg_graph *g, const sg__op *op) {
  const sg__tensor *x = sg__in(g, op, 0);
  const sg__tensor *y = op->n_outputs > 0 ? &g->tensors[op->outputs[0]] : NULL;
  double n_in = numel(x), n_out = numel(y);
  switch (op->kind) {
    case SG_OP_CONV2D: {
      const sg__tensor *w = sg__in(g, op, 1), *b = sg__in(g, op, 2);
      return 2.0 * n_out * (w ? filter_volume(w->ndim, w->dims) : 1.0) + (b ? n_out : 0.0);
    }
    case SG_OP_CONV2D_BACKWARD_DATA: {
      const sg__tensor *w = sg__in(g, op, 1);
      return 2.0 * n_in * (w ? filter_volume(w->ndim, w->dims) : 1.0);
    }
    case SG_OP_CONV2D_BACKWARD_WEIGHT: {
      const sg_attr *ws = attr(op, "weight_shape");
      double vol = ws && ws->type == SG_ATTR_INTS ? filter_volume(ws->count, ws->ints) : 1.0;
      return 2.0 * n_in * vol;
    }
    case SG_OP_BATCH_NORM: /* training: mean, variance, then scale and shift */
      return attr_i(op, "training", 1) ? 7.0 * n_in : 2.0 * n_in;
    case SG_OP_BATCH_NORM_BACKWARD: return attr_i(op, "training", 1) ? 10.0 * n_in : 3.0 * n_in;
    case SG_OP_RELU: return n_out;
    case SG_OP_CLIP: return 2.0 * n_out;
    case SG_OP_GELU: return 10.0 * n_out;
    case SG_OP_SIGMOID:
    case SG_OP_TANH: return 6.0 * n_out;
    case SG_OP_ADD:
    case SG_OP_SUB:
    case SG_OP_MUL:
    case SG_OP_DIV:
    case SG_OP_ADD_SCALAR:
    case SG_OP_MUL_SCALAR: return n_out;
    case SG_OP_POW_SCALAR: return 4.0 * n_out;
    case SG_OP_NEG:
    case SG_OP_ABS:
    case SG_OP_SIGN:
    case SG_OP_MAX:
    case SG_OP_MIN:
    case SG_OP_WHERE:
    case SG_OP_CAST: return n_out;
    case SG_OP_RECIPROCAL:
    case SG_OP_SQRT: return 2.0 * n_out;
    case SG_OP_EXP:
    case SG_OP_LOG:
    case SG_OP_ERF:
    case SG_OP_SIN:
    case SG_OP_COS:
    case SG_OP_ACOS: return 6.0 * n_out;
    case SG_OP_LAYER_NORM: return 7.0 * n_in; /* mean, variance, then scale and shift */
    case SG_OP_LAYER_NORM_BACKWARD: return 10.0 * n_in;
    case SG_OP_EMBEDDING: return 0.0;           /* row copies */
    case SG_OP_EMBEDDING_BACKWARD: return n_in; /* one add per dy element */
    case SG_OP_CUMSUM: return n_in;             /* one add per element */
    case SG_OP_REDUCE_MAX:
    case SG_OP_REDUCE_MIN: return n_in;                /* one compare per element */
    case SG_OP_REDUCE_MAX_BACKWARD: return 3.0 * n_in; /* compare to count, divide, compare to write */
    case SG_OP_TOPK: return 2.0 * n_in;                /* a compare per element, the few insertions */
    case SG_OP_TOPK_BACKWARD: return n_out;            /* zero dx, one add per dy element */
    case SG_OP_ATTENTION:
    case SG_OP_ATTENTION_BACKWARD: {
      /* Per query row and key: q.k and p.v (2d each) and the softmax's exp; backward recomputes the
       * scores and adds dv, dp, dq and dk (10d). A causal mask skips half the pairs. */
      const sg__tensor *q = sg__in(g, op, op->kind == SG_OP_ATTENTION ? 0 : 1),
                       *k = sg__in(g, op, op->kind == SG_OP_ATTENTION ? 1 : 2);
      if (q == NULL || k == NULL || q->ndim < 2 || k->ndim < 2) return n_in;
      double d = (double)q->dims[q->ndim - 1], tk = (double)k->dims[k->ndim - 2];
      double pairs = numel(q) / d * tk * (attr_i(op, "causal", 0) ? 0.5 : 1.0);
      return pairs * (op->kind == SG_OP_ATTENTION ? 4.0 * d + 5.0 : 10.0 * d + 8.0);
    }
    case SG_OP_MATMUL: {
      /* Every output element is a dot product over a's last dim. */
      double kdim = x && x->ndim > 0 ? (double)x->dims[x->ndim - 1] : 1.0;
      return 2.0 * n_out * kdim;
    }
    case SG_OP_GEMM: {
      double kdim = 1.0;
      if (x && x->ndim == 2) kdim = (double)x->dims[attr_i(op, "trans_a", 0) ? 0 : 1];
      double f = 2.0 * n_out * kdim;
      if (sg__in(g, op, 2)) f += n_out * (attr_f(op, "beta", 1.0) != 1.0 ? 2.0 : 1.0);
      if (attr_f(op, "alpha", 1.0) != 1.0) f += n_out;
      return f;
    }
    case SG_OP_MAX_POOL2D:
    case SG_OP_AVG_POOL2D: return n_out * window(op);
    case SG_OP_MAX_POOL2D_BACKWARD: /* finds each window's maximum again */
    case SG_OP_AVG_POOL2D_BACKWARD: return n_in * window(op);
    case SG_OP_GLOBAL_AVG_POOL:
    case SG_OP_REDUCE_MEAN:
    case SG_OP_REDUCE_SUM:
    case SG_OP_SUM_TO: return n_in;
    case SG_OP_SOFTMAX:
    case SG_OP_LOG_SOFTMAX: return 7.0 * n_in; /* max, subtract, exp, sum, divide or log */
    case SG_OP_SOFTMAX_BACKWARD: return 4.0 * n_in;
    case SG_OP_LOG_SOFTMAX_BACKWARD: return 7.0 * n_in;
    case SG_OP_CROSS_ENTROPY: return 7.0 * n_in + (x && x->ndim > 0 ? (double)x->dims[0] : 0.0);
    case SG_OP_CROSS_ENTROPY_BACKWARD: {
      const sg__tensor *logits = sg__in(g, op, 1);
      return 8.0 * numel(logits);
    }
    case SG_OP_DROPOUT: return attr_i(op, "training", 1) ? 3.0 * n_in : 0.0;
    case SG_OP_DROPOUT_BACKWARD: return 2.0 * n_in;
    case SG_OP_RELU_BACKWARD: return n_in;
    case SG_OP_CLIP_BACKWARD: return 3.0 * n_in;
    case SG_OP_GELU_BACKWARD: return 14.0 * n_in;
    case SG_OP_SIGMOID_BACKWARD:
    case SG_OP_TANH_BACKWARD: return 3.0 * n_in;
    case SG_OP_SGD_UPDATE: {
      double per = 2.0; /* p -= lr * g */
      if (attr_f(op, "weight_decay", 0.0) != 0.0) per += 2.0;
      if (attr_f(op, "momentum", 0.0) > 0.0) per += 3.0 + (attr_i(op, "nesterov", 0) ? 2.0 : 0.0);
      return per * n_in;
    }
    case SG_OP_ADAMW_UPDATE: /* decay, two moments, bias corrections, sqrt, divide, step */
      return 18.0 * n_in;
    case SG_OP_FLATTEN:
    case SG_OP_RESHAPE:
    case SG_OP_TRANSPOSE:
    case SG_OP_CONCAT:
    case SG_OP_SLICE:
    case SG_OP_BROADCAST_TO: return 0.0;
  }
  return n_out; /* a kind added later: one FLOP per output element */
}

sg__op_cost sg__op_cost_of(const sg_graph *g, const sg__op *op) {
  sg__op_cost c;
  c.flops = flops_of(g, op);
  /* Views move nothing; everything else reads its inputs and writes its
   * outputs once, and an update also writes back what it mutates. */
  c.traffic = 0.0;
  if (sg__op_flags(op->kind) & SG__OP_VIEW) return c;
  uint32_t mutated = sg__op_mutated_inputs(op);
  for (int i = 0; i < op->n_inputs; i++) {
    const sg__tensor *t = sg__in(g, op, i);
    if (t == NULL) continue;
    double bytes = (double)t->nbytes;
    /* An embedding reads only the rows its ids name: at most its output. */
    if (op->kind == SG_OP_EMBEDDING && i == 0 && bytes > (double)g->tensors[op->outputs[0]].nbytes)
      bytes = (double)g->tensors[op->outputs[0]].nbytes;
    c.traffic += bytes * (i < 32 && ((mutated >> i) & 1u) ? 2.0 : 1.0);
  }
  for (int i = 0; i < op->n_outputs; i++) c.traffic += (double)g->tensors[op->outputs[i]].nbytes;
  return c;
}

sg_status sg_partition_op_cost(const sg_graph *g, int32_t op, double *flops, double *bytes) {
  if (g == NULL || flops == NULL || bytes == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg_partition_op_cost: NULL argument");
  if (!g->finalized) return sg__error(SG_ERR_STATE, "sg_partition_op_cost: the graph is not finalized");
  if (op < 0 || (uint32_t)op >= g->n_ops)
    return sg__error(SG_ERR_RANGE, "sg_partition_op_cost: op %d is not in 0..%u", (int)op, g->n_ops - 1);
  sg__op_cost c = sg__op_cost_of(g, &g->ops[op]);
  *flops = c.flops;
  *bytes = c.traffic;
  return SG_OK;
}
