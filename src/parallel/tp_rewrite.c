/* The tensor-parallel rewrite (tp.h): one rank's forward graph from the
 * single-process graph and its sg_tp_plan.
 *
 * The rewrite rebuilds the graph op by op with the builder, so shape
 * inference re-derives every shape from the sliced weights: a column split's
 * output comes out narrower by itself and the ops between it and its row
 * split carry that on. Which ops may read a cut tensor, and how their outputs
 * are cut, is sg__tp_flow's (the planner's rules); a reshape or a slice
 * along the cut axis gets its attribute cut too. Every new shape is checked
 * against the original's, cut where the flow says. */
#include <stdio.h>
#include <string.h>

#include "graph/graph.h"
#include "parallel/tp.h"
#include "partition/partition.h"

/* Bounds of the ops the rewrite rebuilds (none of sgrt's ops has more attributes). */
#define SG__TP_MAX_INPUTS 16
#define SG__TP_MAX_ATTRS 8

typedef struct rw {
  const sg_graph *src;
  sg_graph *g;
  int ways, rank;
  int32_t *map;          /* src tensor -> new tensor */
  int8_t *slice_axis;    /* src source tensor -> axis it is sliced along, or -1 */
  int32_t *slice_groups; /* src source tensor -> blocks of that axis (sg_tp_plan_tensor_split) */
  sg__tp_cut *cut;       /* src computed tensor -> how this rank's graph cuts it */
  int32_t *annot;        /* src op -> plan annotation index, or -1 */
  sg_tp_annotation *a;   /* the plan's annotations */
  int32_t n_a;
  sg__tp_sync *syncs;
  int n_syncs;
} rw;

static sg_status add_sync(rw *c, sg__tp_sync_kind kind, const char *tensor, const char *op,
                          const char *weight) {
  sg__tp_sync *s = &c->syncs[c->n_syncs];
  memset(s, 0, sizeof *s);
  s->kind = kind;
  s->tensor = tensor ? sg__strdup(tensor) : NULL;
  s->op = op ? sg__strdup(op) : NULL;
  s->weight = weight ? sg__strdup(weight) : NULL;
  c->n_syncs++; /* counted first, so an out-of-memory path still frees what was copied */
  if ((tensor && !s->tensor) || (op && !s->op) || (weight && !s->weight))
    return sg__error(SG_ERR_NO_MEMORY, "sg__tp_rewrite: out of memory");
  s->resolved = kind == SG__TP_SYNC_FWD_ALLREDUCE;
  return SG_OK;
}

/* ---- checking the plan against the graph ----------------------------------- */

/* Forward uses of tensor t (graph outputs count: they are read whole). */
static int uses_of(const sg_graph *g, int32_t t) {
  int n = 0;
  for (uint32_t k = 0; k < g->n_ops; k++)
    for (int i = 0; i < g->ops[k].n_inputs; i++) n += g->ops[k].inputs[i] == t;
  for (uint32_t i = 0; i < g->n_outputs; i++) n += g->outputs[i] == t;
  return n;
}

/* Decides which source tensors are sliced, and rejects what this version
 * cannot run, before anything is built. */
static sg_status check_plan(rw *c, const sg_tp_plan *plan) {
  const sg_graph *g = c->src;
  for (int32_t i = 0; i < c->n_a; i++) {
    sg_tp_annotation *a = &c->a[i];
    SG_CHECK(sg_tp_plan_get(plan, i, a));
    if (a->op < 0 || (uint32_t)a->op >= g->n_ops)
      return sg__error(SG_ERR_INVALID_ARG, "sg__tp_rewrite: the plan names op %d; the graph has %u ops",
                       (int)a->op, g->n_ops);
    const sg__op *op = &g->ops[a->op];
    if ((op->kind != SG_OP_GEMM && op->kind != SG_OP_MATMUL) || op->n_inputs < 2)
      return sg__error(SG_ERR_INVALID_ARG,
                       "sg__tp_rewrite: the plan annotates op '%s' (%s), not a gemm/matmul: was it made "
                       "for another graph?",
                       op->name, sg_op_kind_name(op->kind));
    c->annot[a->op] = i;
    if (a->split == SG_TP_REPLICATE) continue;
    if (a->ways != c->ways)
      return sg__error(SG_ERR_INVALID_ARG, "sg__tp_rewrite: the plan splits op '%s' %d ways, not %d",
                       op->name, a->ways, c->ways);
    if (a->weight.id != op->inputs[1])
      return sg__error(SG_ERR_INVALID_ARG, "sg__tp_rewrite: the plan's weight of op '%s' is not its input 1",
                       op->name);
    int32_t bias = op->kind == SG_OP_GEMM && op->n_inputs > 2 ? op->inputs[2] : -1;
    if (a->bias.id != bias)
      return sg__error(SG_ERR_INVALID_ARG, "sg__tp_rewrite: the plan's bias of op '%s' is not its input 2",
                       op->name);
    bool comm_ok = a->split == SG_TP_COLUMN ? a->output_comm != SG_TP_COMM_ALLREDUCE
                                            : a->output_comm == SG_TP_COMM_ALLREDUCE;
    if (!comm_ok || (a->split != SG_TP_COLUMN && a->split != SG_TP_ROW))
      return sg__error(SG_ERR_INVALID_ARG,
                       "sg__tp_rewrite: the plan gives op '%s' split %d with output comm %d", op->name,
                       (int)a->split, (int)a->output_comm);
    const sg__tensor *w = &g->tensors[a->weight.id];
    if (a->weight_axis < 0 || a->weight_axis >= w->ndim || w->dims[a->weight_axis] % c->ways != 0)
      return sg__error(SG_ERR_INVALID_ARG,
                       "sg__tp_rewrite: weight '%s' of op '%s' cannot be split %d ways "
                       "along axis %d",
                       w->name, op->name, c->ways, a->weight_axis);
    /* A slice serves only the op it was cut for. */
    if (w->producer >= 0 || uses_of(g, a->weight.id) != 1)
      return sg__error(SG_ERR_UNSUPPORTED,
                       "sg__tp_rewrite: split weight '%s' is shared or computed; only a "
                       "parameter used by op '%s' alone can be split",
                       w->name, op->name);
    int axis = -1, groups = 1;
    SG_CHECK(sg_tp_plan_tensor_split(plan, a->weight, &axis, &groups));
    if (axis != a->weight_axis || groups < 1 || w->dims[axis] % ((int64_t)groups * c->ways) != 0)
      return sg__error(SG_ERR_INVALID_ARG,
                       "sg__tp_rewrite: weight '%s' of op '%s' cannot be cut in %d blocks of %d", w->name,
                       op->name, groups, c->ways);
    c->slice_axis[a->weight.id] = (int8_t)a->weight_axis;
    c->slice_groups[a->weight.id] = groups;
    if (a->split != SG_TP_COLUMN || a->bias.id < 0) continue;
    const sg__tensor *b = &g->tensors[a->bias.id];
    int64_t n_out = w->dims[a->weight_axis];
    if (b->ndim < 1 || b->dims[b->ndim - 1] == 1) continue; /* broadcast along the output: replicated */
    if (b->dims[b->ndim - 1] != n_out || b->producer >= 0 || uses_of(g, a->bias.id) != 1)
      return sg__error(SG_ERR_UNSUPPORTED,
                       "sg__tp_rewrite: bias '%s' of column-split op '%s' is shared, computed or not "
                       "[..., %lld]",
                       b->name, op->name, (long long)n_out);
    c->slice_axis[a->bias.id] = (int8_t)(b->ndim - 1);
    c->slice_groups[a->bias.id] = groups;
  }
  return SG_OK;
}

/* ---- building ---------------------------------------------------------------- */

/* This rank's slice of `data` (dims, element size es) along axis: its part
 * of each of the axis's `groups` blocks. */
static void slice_copy(const void *data, int ndim, const int64_t *dims, size_t es, int axis, int groups,
                       int ways, int rank, void *dst) {
  size_t outer = (size_t)groups, inner = es;
  for (int i = 0; i < axis; i++) outer *= (size_t)dims[i];
  for (int i = axis + 1; i < ndim; i++) inner *= (size_t)dims[i];
  size_t len = (size_t)dims[axis] / (size_t)groups, chunk = len / (size_t)ways;
  for (size_t o = 0; o < outer; o++)
    memcpy((char *)dst + o * chunk * inner, (const char *)data + (o * len + (size_t)rank * chunk) * inner,
           chunk * inner);
}

static sg_status add_source(rw *c, int32_t t) {
  const sg__tensor *x = &c->src->tensors[t];
  int axis = c->slice_axis[t];
  int64_t dims[SG_MAX_DIMS];
  memcpy(dims, x->dims, sizeof dims);
  void *data = NULL;
  if (axis >= 0) {
    dims[axis] /= c->ways;
    if (x->data) {
      data = sg__malloc(x->nbytes / (size_t)c->ways + 1);
      if (data == NULL)
        return sg__error(SG_ERR_NO_MEMORY, "sg__tp_rewrite: out of memory slicing '%s'", x->name);
      slice_copy(x->data, x->ndim, x->dims, sg_dtype_size(x->dtype), axis, c->slice_groups[t], c->ways,
                 c->rank, data);
    }
  }
  sg_tensor n =
      sg_graph_add_tensor(c->g, x->name, x->dtype, x->role, x->ndim, dims, axis >= 0 ? data : x->data);
  sg__free(data);
  if (n.id < 0) return sg_graph_status(c->g);
  c->map[t] = n.id;
  return SG_OK;
}

static sg_status set_name(rw *c, int32_t n, const char *name) {
  return sg_tensor_set_name(c->g, (sg_tensor){n}, name);
}

/* Whether new tensor n is the original o cut as `cut` says (the cut axis
 * `ways` times shorter). */
static bool shaped_as(const rw *c, int32_t o, int32_t n, sg__tp_cut cut) {
  const sg__tensor *a = &c->src->tensors[o], *b = &c->g->tensors[n];
  if (a->ndim != b->ndim || a->dtype != b->dtype) return false;
  for (int i = 0; i < a->ndim; i++)
    if (b->dims[i] != (i == cut.axis ? a->dims[i] / c->ways : a->dims[i])) return false;
  return cut.axis < 0 || a->dims[cut.axis] % c->ways == 0;
}

/* Checks op k's rebuilt outputs against the originals cut as c->cut says. */
static sg_status check_outputs(const rw *c, const sg__op *op) {
  for (int i = 0; i < op->n_outputs; i++) {
    int32_t o = op->outputs[i];
    if (!shaped_as(c, o, c->map[o], c->cut[o]))
      return sg__error(SG_ERR_INTERNAL, "sg__tp_rewrite: output '%s' of op '%s' has an unexpected shape",
                       c->src->tensors[o].name, op->name);
  }
  return SG_OK;
}

/* An annotated op's input 0 must arrive as its split reads it: cut along the
 * last axis for a row split on a split input, whole otherwise. */
static sg_status check_input(const rw *c, const sg__op *op, const sg_tp_annotation *a) {
  int32_t x = op->inputs[0];
  sg__tp_cut cut = c->cut[x];
  bool want_split = a->split == SG_TP_ROW && a->input_sharded;
  bool ok = want_split ? cut.axis == c->src->tensors[x].ndim - 1 && cut.groups == 1 : cut.axis < 0;
  if (!ok)
    return sg__error(
        SG_ERR_UNSUPPORTED,
        "sg__tp_rewrite: op '%s' (%s) reads tensor '%s' %s; the plan does not produce it that way", op->name,
        sg_op_kind_name(op->kind), c->src->tensors[x].name,
        want_split ? "split along its last dim" : "whole, but it is cut here");
  return SG_OK;
}

/* Whether a gradient may flow into tensor t: computed, or a parameter (a pipeline stage's received
 * activation is one, to get the gradient it sends back: pp_split.c). */
static bool gets_grad(const sg_graph *g, int32_t t) {
  return g->tensors[t].producer >= 0 || g->tensors[t].role == SG_ROLE_PARAMETER;
}

/* Row split: the op on the input and weight slices gives a partial sum
 * "<y>.tp_partial" (synced forward), then the bias, scaled by gemm's beta,
 * is added once. An input that arrives whole is sliced first. */
static sg_status add_row_op(rw *c, const sg__op *op, const sg_tp_annotation *a) {
  const sg_graph *s = c->src;
  const char *name = s->tensors[op->outputs[0]].name;
  sg_tensor in[3] = {{c->map[op->inputs[0]]}, {c->map[op->inputs[1]]}, SG_NO_TENSOR};
  if (!a->input_sharded) {
    sg_tensor sel;
    SG_CHECK(sg__tp_slice_last(c->g, in[0], c->ways, c->rank, name, &in[0], &sel));
    /* The selector product's input gradient is this rank's share, zero
     * elsewhere: summed over the group when a gradient flows there. */
    if (gets_grad(s, op->inputs[0]))
      SG_CHECK(add_sync(c, SG__TP_SYNC_BWD_ALLREDUCE, NULL, c->g->ops[c->g->n_ops - 1].name,
                        c->g->tensors[sel.id].name));
  }
  int32_t bias = op->kind == SG_OP_GEMM && op->n_inputs > 2 ? op->inputs[2] : -1;
  sg_tensor y;
  SG_CHECK(sg_graph_add_op(c->g, op->kind, op->n_inputs, in, op->n_attrs, op->attrs, 1, &y, NULL));
  if (bias < 0) {
    SG_CHECK(set_name(c, y.id, name));
    c->map[op->outputs[0]] = y.id;
    return add_sync(c, SG__TP_SYNC_FWD_ALLREDUCE, name, NULL, NULL);
  }
  char partial[SG__MAX_NAME];
  if ((size_t)snprintf(partial, sizeof partial, "%s.tp_partial", name) >= sizeof partial)
    return sg__error(SG_ERR_RANGE, "sg__tp_rewrite: tensor name '%s' is too long", name);
  SG_CHECK(set_name(c, y.id, partial));
  sg_tensor b = {c->map[bias]};
  double beta = sg__attr_f(op, 3); /* gemm's schema: trans_a, trans_b, alpha, beta */
  if (beta != 1.0) b = sg_mul_scalar(c->g, b, beta);
  sg_tensor sum = sg_add(c->g, y, b);
  if (sum.id < 0) return sg_graph_status(c->g);
  SG_CHECK(set_name(c, sum.id, name));
  c->map[op->outputs[0]] = sum.id;
  return add_sync(c, SG__TP_SYNC_FWD_ALLREDUCE, partial, NULL, NULL);
}

/* Attributes of op for this rank's graph, where the cut changes them: a
 * reshape to the original output's dims cut along the flow's axis, a slice
 * along the cut axis a `ways` times shorter run (the same whole blocks), a
 * dropout on a cut tensor a seed of this rank's. */
static sg_status cut_attrs(const rw *c, const sg__op *op, const sg__tp_cut *in, sg_attr *attrs,
                           int64_t *dims) {
  if (op->n_attrs > SG__TP_MAX_ATTRS)
    return sg__error(SG_ERR_UNSUPPORTED, "sg__tp_rewrite: op '%s' has %d attributes", op->name, op->n_attrs);
  if (op->n_attrs > 0) memcpy(attrs, op->attrs, sizeof *attrs * (size_t)op->n_attrs);
  const sg__tensor *x = op->n_inputs > 0 && op->inputs[0] >= 0 ? &c->src->tensors[op->inputs[0]] : NULL;
  if (op->kind == SG_OP_RESHAPE && in[0].axis >= 0) {
    const sg__tensor *y = &c->src->tensors[op->outputs[0]];
    sg__tp_cut out = c->cut[op->outputs[0]];
    for (int i = 0; i < y->ndim; i++) dims[i] = i == out.axis ? y->dims[i] / c->ways : y->dims[i];
    attrs[0].ints = dims;
    attrs[0].count = y->ndim;
  }
  /* Dropout on a cut tensor (a dropout op, or the fused attention's on its weights): each share draws
   * from a seed of its own, as Megatron's tensor-parallel region does. With the op's seed, every share
   * would draw the same mask over its slice's local indices (head h of every share dropped alike). A
   * dropout on a whole (replicated) tensor keeps the seed: its shares must draw one mask. */
  const int seed_at = op->kind == SG_OP_DROPOUT ? 1 : op->kind == SG_OP_ATTENTION ? 3 : -1;
  if (seed_at >= 0 && in[0].axis >= 0 && op->n_attrs > seed_at)
    attrs[seed_at].i =
        (int64_t)((uint64_t)attrs[seed_at].i + 0x9E3779B97F4A7C15ull * (uint64_t)(c->rank + 1));
  int axis;
  if (op->kind == SG_OP_SLICE && in[0].axis >= 0 && sg__norm_axis(sg__attr_i(op, 0), x->ndim, &axis) &&
      axis == in[0].axis) {
    int64_t start = sg__attr_i(op, 1);
    if (start < 0) start += x->dims[axis];
    attrs[1].i = start / c->ways;
    attrs[2].i = sg__attr_i(op, 2) / c->ways;
  }
  return SG_OK;
}

/* An op that is not split itself: rebuilt as it is, or on cut inputs as
 * sg__tp_flow allows. */
static sg_status add_plain_op(rw *c, const sg__op *op) {
  sg_tensor in[SG__TP_MAX_INPUTS];
  sg__tp_cut cut_in[SG__TP_MAX_INPUTS], cut_out[SG__MAX_OUTPUTS];
  if (op->n_inputs > SG__TP_MAX_INPUTS)
    return sg__error(SG_ERR_UNSUPPORTED, "sg__tp_rewrite: op '%s' has %d inputs (at most %d here)", op->name,
                     op->n_inputs, SG__TP_MAX_INPUTS);
  int32_t cut_input = -1;
  for (int i = 0; i < op->n_inputs; i++) {
    int32_t t = op->inputs[i];
    in[i] = (sg_tensor){t < 0 ? -1 : c->map[t]};
    cut_in[i] = t >= 0 ? c->cut[t] : (sg__tp_cut){-1, 1};
    if (cut_in[i].axis >= 0) cut_input = t;
  }
  if (!sg__tp_flow(c->src, op, c->ways, cut_in, cut_out))
    return sg__error(
        SG_ERR_UNSUPPORTED,
        "sg__tp_rewrite: op '%s' (%s) reads tensor '%s' whole, but it is cut here; the plan does not "
        "produce it that way",
        op->name, sg_op_kind_name(op->kind), c->src->tensors[cut_input].name);
  for (int i = 0; i < op->n_outputs; i++) c->cut[op->outputs[i]] = cut_out[i];
  sg_attr attrs[SG__TP_MAX_ATTRS];
  int64_t dims[SG_MAX_DIMS];
  SG_CHECK(cut_attrs(c, op, cut_in, attrs, dims));
  sg_tensor outs[SG__MAX_OUTPUTS];
  int n_outs = 0;
  SG_CHECK(
      sg_graph_add_op(c->g, op->kind, op->n_inputs, in, op->n_attrs, attrs, SG__MAX_OUTPUTS, outs, &n_outs));
  if (n_outs != op->n_outputs)
    return sg__error(SG_ERR_INTERNAL, "sg__tp_rewrite: op '%s' rebuilt with %d outputs, not %d", op->name,
                     n_outs, op->n_outputs);
  for (int i = 0; i < n_outs; i++) {
    SG_CHECK(set_name(c, outs[i].id, c->src->tensors[op->outputs[i]].name));
    c->map[op->outputs[i]] = outs[i].id;
  }
  return check_outputs(c, op);
}

/* Column split: the op on its weight slice; the output is cut along its
 * last axis in the weight's blocks, or gathered whole when the plan says. */
static sg_status add_column_op(rw *c, const sg__op *op, const sg_tp_annotation *a) {
  sg_tensor in[3];
  for (int i = 0; i < op->n_inputs; i++) in[i] = (sg_tensor){op->inputs[i] < 0 ? -1 : c->map[op->inputs[i]]};
  sg_tensor y;
  SG_CHECK(sg_graph_add_op(c->g, op->kind, op->n_inputs, in, op->n_attrs, op->attrs, 1, &y, NULL));
  int32_t o = op->outputs[0];
  const char *name = c->src->tensors[o].name;
  SG_CHECK(set_name(c, y.id, name));
  c->map[o] = y.id;
  c->cut[o] = (sg__tp_cut){(int8_t)(c->src->tensors[o].ndim - 1), c->slice_groups[op->inputs[1]]};
  SG_CHECK(check_outputs(c, op));
  /* Each rank back-propagates through its weight slice only: its share of
   * the input's gradient is summed over the group, unless no gradient flows
   * there (a graph input); sg__tp_resolve_backward finds out which. */
  if (gets_grad(c->src, op->inputs[0]))
    SG_CHECK(add_sync(c, SG__TP_SYNC_BWD_ALLREDUCE, NULL, c->g->ops[c->g->n_ops - 1].name,
                      c->g->tensors[c->map[op->inputs[1]]].name));
  if (a->output_comm != SG_TP_COMM_ALLGATHER) return SG_OK; /* a row split consumes the shard */
  if (c->cut[o].groups != 1)
    return sg__error(SG_ERR_UNSUPPORTED,
                     "sg__tp_rewrite: the output of op '%s' is cut in %d blocks and gathered", op->name,
                     (int)c->cut[o].groups);
  sg_tensor whole;
  SG_CHECK(sg__tp_gather_last(c->g, y, c->ways, c->rank, name, &whole));
  c->map[o] = whole.id;
  c->cut[o] = (sg__tp_cut){-1, 1};
  return add_sync(c, SG__TP_SYNC_FWD_ALLREDUCE, name, NULL, NULL);
}

static sg_status add_op(rw *c, uint32_t k) {
  const sg__op *op = &c->src->ops[k];
  const sg_tp_annotation *a = c->annot[k] >= 0 ? &c->a[c->annot[k]] : NULL;
  if (a == NULL || a->split == SG_TP_REPLICATE) return add_plain_op(c, op);
  SG_CHECK(check_input(c, op, a));
  if (a->split == SG_TP_COLUMN) return add_column_op(c, op, a);
  SG_CHECK(add_row_op(c, op, a));
  c->cut[op->outputs[0]] = (sg__tp_cut){-1, 1};
  return check_outputs(c, op);
}

static sg_status check_args(const sg_graph *fwd, sg_tensor loss, const sg_tp_plan *plan, int ways, int rank) {
  if (fwd == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg__tp_rewrite: NULL graph");
  if (ways < 1 || ways > SG_PARTITION_MAX_PARTS)
    return sg__error(SG_ERR_INVALID_ARG, "sg__tp_rewrite: ways is %d; it must be in 1..%d", ways,
                     SG_PARTITION_MAX_PARTS);
  /* One way splits nothing (a tensor group healed down to one share per copy, tp_heal.c): there is no
   * plan for it (sg_tp_plan_create splits at least 2 ways), and the rewrite is a copy of the graph. */
  if (ways == 1 && plan != NULL)
    return sg__error(SG_ERR_INVALID_ARG,
                     "sg__tp_rewrite: a plan for 1 way: one way splits nothing, pass none");
  if (ways > 1 && plan == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg__tp_rewrite: NULL plan for %d ways", ways);
  if (rank < 0 || rank >= ways)
    return sg__error(SG_ERR_INVALID_ARG, "sg__tp_rewrite: rank %d is outside 0..%d", rank, ways - 1);
  if (!fwd->finalized) return sg__error(SG_ERR_STATE, "sg__tp_rewrite: the graph is not finalized");
  if (loss.id < 0 || (uint32_t)loss.id >= fwd->n_tensors)
    return sg__error(SG_ERR_INVALID_ARG, "sg__tp_rewrite: loss (tensor %d) is not a tensor of the graph",
                     (int)loss.id);
  for (uint32_t t = 0; t < fwd->n_tensors; t++)
    if (fwd->tensors[t].role == SG_ROLE_GRADIENT || fwd->tensors[t].role == SG_ROLE_OPTIMIZER_STATE)
      return sg__error(SG_ERR_STATE,
                       "sg__tp_rewrite: tensor '%s' has role %s: pass the forward graph, before "
                       "sg_graph_backward and the optimizer",
                       fwd->tensors[t].name, sg_role_name(fwd->tensors[t].role));
  return SG_OK;
}

static sg_status build(rw *c, sg_tensor loss) {
  for (uint32_t t = 0; t < c->src->n_tensors; t++)
    if (c->src->tensors[t].producer < 0) SG_CHECK(add_source(c, (int32_t)t));
  for (uint32_t k = 0; k < c->src->n_ops; k++) SG_CHECK(add_op(c, k));
  for (uint32_t i = 0; i < c->src->n_outputs; i++) {
    int32_t o = c->src->outputs[i];
    if (c->cut[o].axis >= 0)
      return sg__error(SG_ERR_UNSUPPORTED,
                       "sg__tp_rewrite: graph output '%s' is column-split, and graph outputs "
                       "must be whole: make its consumer row-split or keep the op replicated",
                       c->src->tensors[o].name);
    SG_CHECK(sg_graph_mark_output(c->g, (sg_tensor){c->map[o]}));
  }
  if (c->cut[loss.id].axis >= 0)
    return sg__error(SG_ERR_UNSUPPORTED, "sg__tp_rewrite: loss '%s' is column-split",
                     c->src->tensors[loss.id].name);
  return sg_graph_status(c->g);
}

sg_status sg__tp_rewrite(const sg_graph *fwd, sg_tensor loss, const sg_tp_plan *plan, int ways, int rank,
                         sg_graph **out, sg__tp_sync **syncs, int *n_syncs) {
  if (out) *out = NULL;
  if (syncs) *syncs = NULL;
  if (n_syncs) *n_syncs = 0;
  if (out == NULL || syncs == NULL || n_syncs == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg__tp_rewrite: NULL output argument");
  SG_CHECK(check_args(fwd, loss, plan, ways, rank));
  rw c = {.src = fwd, .ways = ways, .rank = rank, .n_a = sg_tp_plan_count(plan)};
  c.map = sg__malloc(((size_t)fwd->n_tensors + 1) * sizeof *c.map);
  c.slice_axis = sg__malloc((size_t)fwd->n_tensors + 1);
  c.slice_groups = sg__malloc(((size_t)fwd->n_tensors + 1) * sizeof *c.slice_groups);
  c.cut = sg__malloc(((size_t)fwd->n_tensors + 1) * sizeof *c.cut);
  c.annot = sg__malloc(((size_t)fwd->n_ops + 1) * sizeof *c.annot);
  c.a = sg__calloc((size_t)c.n_a + 1, sizeof *c.a);
  c.syncs =
      sg__calloc(2 * (size_t)c.n_a + 1, sizeof *c.syncs); /* at most one forward and one backward each */
  sg_status st = SG_OK;
  if (!c.map || !c.slice_axis || !c.slice_groups || !c.cut || !c.annot || !c.a || !c.syncs) {
    st = sg__error(SG_ERR_NO_MEMORY, "sg__tp_rewrite: out of memory");
    goto done;
  }
  for (uint32_t t = 0; t < fwd->n_tensors; t++)
    c.map[t] = -1, c.slice_axis[t] = -1, c.slice_groups[t] = 1, c.cut[t] = (sg__tp_cut){-1, 1};
  for (uint32_t k = 0; k < fwd->n_ops; k++) c.annot[k] = -1;
  SG_CHECK_GOTO(check_plan(&c, plan), st, done);
  SG_CHECK_GOTO(sg_graph_create(&c.g), st, done);
  SG_CHECK_GOTO(build(&c, loss), st, done);
done:
  if (st != SG_OK) {
    sg_graph_destroy(c.g);
    sg__tp_syncs_free(c.syncs, c.n_syncs);
  } else {
    *out = c.g;
    *syncs = c.syncs;
    *n_syncs = c.n_syncs;
  }
  sg__free(c.map);
  sg__free(c.slice_axis);
  sg__free(c.slice_groups);
  sg__free(c.cut);
  sg__free(c.annot);
  sg__free(c.a);
  return st;
}

void sg__tp_syncs_free(sg__tp_sync *syncs, int n_syncs) {
  if (syncs == NULL) return;
  for (int i = 0; i < n_syncs; i++) {
    sg__free(syncs[i].tensor);
    sg__free(syncs[i].op);
    sg__free(syncs[i].weight);
  }
  sg__free(syncs);
}
