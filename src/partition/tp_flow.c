/* How a tensor-parallel cut flows through one op (partition.h): the rules
 * the planner follows from a column split to the row split that ends it
 * (tp_plan.c) and the rewrite rebuilds by (parallel/tp_rewrite.c).
 *
 * Between Megatron's column and row splits every rank computes its own
 * slice of the work with no communication. For an MLP the slice is the
 * hidden features and only elementwise ops lie in between; for attention it
 * is a set of heads, and the cut moves through the ops that build them:
 * slicing q, k and v out of the fused projection, the reshape to heads, the
 * transposes, the batched matmuls (heads are a batch dim), the scale, the
 * mask and the softmax over keys (or the fused attention op). An op may take a cut input when each rank
 * computes exactly its slice of the output from its slices of the inputs;
 * anything else (a reduction over the cut axis, a product contracting it, a
 * whole operand that is not the same on every slice) ends the region, and
 * the planner then gathers the column split's output instead. */
#include <string.h>

#include "partition/partition_internal.h"

static bool cut_whole(sg__tp_cut c) { return c.axis < 0; }
static bool same_cut(sg__tp_cut a, sg__tp_cut b) { return a.axis == b.axis && a.groups == b.groups; }

/* A whole operand of an op whose other operands are cut: every rank reads
 * all of it but uses it for its slice only, so its gradient would be a
 * partial sum that nothing adds up. Only operands without a gradient (data,
 * constants) may be whole. */
static bool whole_ok(const sg_graph *g, int32_t t) {
  const sg__tensor *x = &g->tensors[t];
  return x->producer < 0 && x->role != SG_ROLE_PARAMETER;
}

static bool same_dims(const sg__tensor *a, const sg__tensor *b) {
  return a->ndim == b->ndim && memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

/* Elementwise with broadcasting (right-aligned dims): the output is cut
 * where the cut operands are, which must agree; a whole operand must be 1
 * along that axis (or not reach it). */
static bool flow_broadcast(const sg_graph *g, const sg__op *op, const sg__tp_cut *in, sg__tp_cut *out) {
  const sg__tensor *y = &g->tensors[op->outputs[0]];
  sg__tp_cut c = {-1, 1};
  for (int i = 0; i < op->n_inputs; i++) {
    if (op->inputs[i] < 0 || cut_whole(in[i])) continue;
    const sg__tensor *x = &g->tensors[op->inputs[i]];
    sg__tp_cut ci = {(int8_t)(in[i].axis + (y->ndim - x->ndim)), in[i].groups};
    if (x->dims[in[i].axis] != y->dims[ci.axis] || (!cut_whole(c) && !same_cut(c, ci))) return false;
    c = ci;
  }
  for (int i = 0; i < op->n_inputs; i++) {
    if (op->inputs[i] < 0 || !cut_whole(in[i])) continue;
    const sg__tensor *x = &g->tensors[op->inputs[i]];
    int ax = c.axis - (y->ndim - x->ndim);
    if ((ax >= 0 && x->dims[ax] != 1) || !whole_ok(g, op->inputs[i])) return false;
  }
  out[0] = c;
  return true;
}

/* A slice along the cut axis keeps whole blocks of it (q, k or v of a fused
 * projection): each rank's part of a block is its part of the slice. */
static bool flow_slice(const sg__tensor *x, const sg__op *op, sg__tp_cut c, sg__tp_cut *out) {
  int axis;
  if (!sg__norm_axis(sg__attr_i(op, 0), x->ndim, &axis)) return false;
  if (axis != c.axis) {
    *out = c;
    return true;
  }
  int64_t n = x->dims[axis], start = sg__attr_i(op, 1), len = sg__attr_i(op, 2), block = n / c.groups;
  if (start < 0) start += n;
  if (c.groups < 2 || start % block != 0 || len % block != 0 || len < block) return false;
  *out = (sg__tp_cut){c.axis, (int32_t)(len / block)};
  return true;
}

/* A reshape keeps a cut of axis a (groups 1) when some output axis b starts
 * at the same offset (the dims before it multiply to those before a) and
 * divides by ways: a rank's contiguous run of a is then its run of b. */
static bool flow_reshape(const sg__tensor *x, const sg__tensor *y, int ways, sg__tp_cut c, sg__tp_cut *out) {
  if (c.groups != 1) return false;
  int64_t before = 1, acc = 1;
  for (int i = 0; i < c.axis; i++) before *= x->dims[i];
  for (int b = 0; b < y->ndim; b++) {
    if (acc == before && y->dims[b] > 1 && y->dims[b] % ways == 0) {
      *out = (sg__tp_cut){(int8_t)b, 1};
      return true;
    }
    acc *= y->dims[b];
    if (acc > before) break;
  }
  return false;
}

/* A batched matmul [..., M, K] x [..., K, N]: heads (a batch dim) cut on
 * both, rows of the first or columns of the second; never K. */
static bool flow_matmul(const sg_graph *g, const sg__op *op, const sg__tp_cut *in, sg__tp_cut *out) {
  const sg__tensor *a = sg__in(g, op, 0), *b = sg__in(g, op, 1), *y = &g->tensors[op->outputs[0]];
  if (a->ndim < 2 || b->ndim < 2) return false;
  int r = y->ndim;
  sg__tp_cut ca = {-1, 1}, cb = {-1, 1};
  if (!cut_whole(in[0])) {
    if (in[0].axis == a->ndim - 1) return false;
    ca = (sg__tp_cut){(int8_t)(in[0].axis + r - a->ndim), in[0].groups};
  }
  if (!cut_whole(in[1])) {
    if (in[1].axis == b->ndim - 2) return false;
    cb = (sg__tp_cut){(int8_t)(in[1].axis + r - b->ndim), in[1].groups};
  }
  if (!cut_whole(ca) && !cut_whole(cb)) {
    if (!same_cut(ca, cb) || ca.axis >= r - 2) return false; /* both: the same heads */
    *out = ca;
    return true;
  }
  /* One operand cut: the other is read whole, and must be broadcast (1) along a cut batch dim. */
  sg__tp_cut c = cut_whole(ca) ? cb : ca;
  int whole_i = cut_whole(ca) ? 0 : 1;
  const sg__tensor *w = whole_i == 0 ? a : b;
  int ax = c.axis - (r - w->ndim);
  if (c.axis < r - 2 && ax >= 0 && w->dims[ax] != 1) return false;
  if (!whole_ok(g, op->inputs[whole_i])) return false;
  *out = c;
  return true;
}

/* Fused attention: q, k and v cut along the same leading dim (the heads):
 * each rank attends over its heads; y and each row's lse are cut there too. */
static bool flow_attention(const sg_graph *g, const sg__op *op, const sg__tp_cut *in, sg__tp_cut *out) {
  const sg__tensor *q = sg__in(g, op, 0);
  if (cut_whole(in[0]) || in[0].axis >= q->ndim - 2 || !same_cut(in[0], in[1]) || !same_cut(in[0], in[2]))
    return false;
  out[0] = out[1] = in[0];
  return true;
}

/* reduce_max / reduce_min: each output element reads one group of x, so a
 * cut along a dim that is not reduced stays (renumbered when keepdims drops
 * the reduced dims before it); a cut along a reduced dim would split groups. */
static bool flow_reduce_max(const sg__tensor *x, const sg__op *op, sg__tp_cut in, sg__tp_cut *out) {
  int na = sg__attr_count(op, 0), before = 0, a;
  const int64_t *axes = sg__attr_ints(op, 0);
  if (na == 0) return false;
  for (int i = 0; i < na; i++) {
    if (!sg__norm_axis(axes[i], x->ndim, &a) || a == in.axis) return false;
    before += a < in.axis;
  }
  *out = (sg__tp_cut){(int8_t)(in.axis - (sg__attr_i(op, 1) ? 0 : before)), in.groups};
  return true;
}

bool sg__tp_flow(const sg_graph *g, const sg__op *op, int ways, const sg__tp_cut *in, sg__tp_cut *out) {
  bool any = false;
  for (int i = 0; i < op->n_inputs; i++) any |= op->inputs[i] >= 0 && !cut_whole(in[i]);
  for (int i = 0; i < op->n_outputs; i++) out[i] = (sg__tp_cut){-1, 1};
  if (!any) return true;
  const sg__tensor *x = sg__in(g, op, 0), *y = &g->tensors[op->outputs[0]];
  uint32_t flags = sg__op_flags(op->kind);
  if (sg__tp_keeps_split(op->kind)) { /* every output shaped as the input (dropout's mask too) */
    for (int i = 0; i < op->n_outputs; i++) {
      if (!same_dims(&g->tensors[op->outputs[i]], x)) return false;
      out[i] = in[0];
    }
    return true;
  }
  if (op->kind == SG_OP_ATTENTION) return flow_attention(g, op, in, out); /* y and lse */
  if (op->n_outputs != 1) return false;
  if (flags & SG__OP_ELEMENTWISE) return flow_broadcast(g, op, in, out);
  int axis;
  switch (op->kind) {
    case SG_OP_SOFTMAX:
    case SG_OP_LOG_SOFTMAX:
    case SG_OP_CUMSUM: /* each along its axis (attribute 0): a cut elsewhere stays */
      if (!sg__norm_axis(sg__attr_i(op, 0), x->ndim, &axis) || axis == in[0].axis) return false;
      out[0] = in[0];
      return true;
    case SG_OP_REDUCE_MAX:
    case SG_OP_REDUCE_MIN: return flow_reduce_max(x, op, in[0], out);
    case SG_OP_SLICE: return flow_slice(x, op, in[0], out);
    case SG_OP_RESHAPE: return flow_reshape(x, y, ways, in[0], out);
    case SG_OP_TRANSPOSE:
      for (int i = 0; i < y->ndim; i++)
        if (sg__attr_ints(op, 0)[i] == in[0].axis) out[0] = (sg__tp_cut){(int8_t)i, in[0].groups};
      return true;
    case SG_OP_MATMUL: return flow_matmul(g, op, in, out);
    default: return false;
  }
}
