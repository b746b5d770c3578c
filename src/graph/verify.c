/* The verifier (SPEC G3). It trusts nothing in the graph: a graph read from a
 * file reaches it with every id, count and attribute unchecked beyond memory
 * safety, so each check runs before anything relies on it. Every error names
 * the offending op or tensor. */
#include <stdlib.h>
#include <string.h>

#include "graph/graph_internal.h"

typedef struct verify_ctx {
  const sg_graph *g;
  int32_t *producer;    /* per tensor: op that produces it, or -1 */
  int32_t *mutator;     /* per tensor: op that updates it in place, or -1 */
  uint32_t *cons_start; /* CSR: consumers of tensor t are cons[cons_start[t] .. cons_start[t+1]) */
  int32_t *cons;
  uint32_t *indeg; /* per op */
  int32_t *queue;
} verify_ctx;

static const char *op_name(const sg__op *op) { return op->name ? op->name : "?"; }

static sg_status check_tensor(const sg_graph *g, uint32_t i) {
  const sg__tensor *t = &g->tensors[i];
  const char *bad = sg__name_problem(t->name);
  if (bad) return sg__error(SG_ERR_FORMAT, "tensor %u: its name %s", i, bad);
  if (!sg__dtype_valid(t->dtype))
    return sg__error(SG_ERR_UNSUPPORTED, "tensor '%s': unknown dtype %d", t->name, (int)t->dtype);
  if (!sg__role_valid(t->role))
    return sg__error(SG_ERR_UNSUPPORTED, "tensor '%s': unknown role %d", t->name, (int)t->role);
  if (t->ndim < 0 || t->ndim > SG_MAX_DIMS)
    return sg__error(SG_ERR_RANGE, "tensor '%s': rank %d is outside 0..%d", t->name, t->ndim, SG_MAX_DIMS);
  for (int d = 0; d < t->ndim; d++)
    if (t->dims[d] < 1)
      return sg__error(SG_ERR_SHAPE, "tensor '%s': dim %d is %lld; dims must be >= 1", t->name, d,
                       (long long)t->dims[d]);
  int64_t numel;
  if (!sg__numel_checked(t->ndim, t->dims, &numel))
    return sg__error(SG_ERR_RANGE, "tensor '%s': element count exceeds 2^56", t->name);
  if (t->nbytes != (size_t)numel * sg_dtype_size(t->dtype))
    return sg__error(SG_ERR_FORMAT, "tensor '%s': byte size %zu does not match its shape and dtype (%zu)",
                     t->name, t->nbytes, (size_t)numel * sg_dtype_size(t->dtype));
  if (t->role == SG_ROLE_INPUT && t->data)
    return sg__error(SG_ERR_FORMAT, "input '%s' has data; inputs are fed each step", t->name);
  if (t->role == SG_ROLE_CONSTANT && !t->data)
    return sg__error(SG_ERR_FORMAT, "constant '%s' has no data", t->name);
  return SG_OK;
}

static int cmp_tensor_names(const void *a, const void *b, const sg_graph *g) {
  return strcmp(g->tensors[*(const int32_t *)a].name, g->tensors[*(const int32_t *)b].name);
}
static int cmp_op_names(const void *a, const void *b, const sg_graph *g) {
  return strcmp(g->ops[*(const int32_t *)a].name, g->ops[*(const int32_t *)b].name);
}

/* qsort has no context argument in C11; a thread-local graph pointer keeps
 * concurrent verifications of different graphs apart. */
static _Thread_local const sg_graph *sort_graph;
static int cmp_t(const void *a, const void *b) { return cmp_tensor_names(a, b, sort_graph); }
static int cmp_o(const void *a, const void *b) { return cmp_op_names(a, b, sort_graph); }

static sg_status check_unique_names(const sg_graph *g) {
  uint32_t n = g->n_tensors > g->n_ops ? g->n_tensors : g->n_ops;
  int32_t *ids = sg__malloc(sizeof(int32_t) * (n ? n : 1));
  if (ids == NULL) return sg__error(SG_ERR_NO_MEMORY, "verifier: out of memory");
  sg_status st = SG_OK;
  sort_graph = g;
  for (uint32_t i = 0; i < g->n_tensors; i++) ids[i] = (int32_t)i;
  qsort(ids, g->n_tensors, sizeof *ids, cmp_t);
  for (uint32_t i = 1; i < g->n_tensors && st == SG_OK; i++)
    if (strcmp(g->tensors[ids[i - 1]].name, g->tensors[ids[i]].name) == 0)
      st = sg__error(SG_ERR_DUPLICATE, "tensors %d and %d are both named '%s'", ids[i - 1], ids[i],
                     g->tensors[ids[i]].name);
  for (uint32_t i = 0; i < g->n_ops && st == SG_OK; i++) ids[i] = (int32_t)i;
  if (st == SG_OK) qsort(ids, g->n_ops, sizeof *ids, cmp_o);
  for (uint32_t i = 1; i < g->n_ops && st == SG_OK; i++)
    if (strcmp(g->ops[ids[i - 1]].name, g->ops[ids[i]].name) == 0)
      st = sg__error(SG_ERR_DUPLICATE, "ops %d and %d are both named '%s'", ids[i - 1], ids[i],
                     g->ops[ids[i]].name);
  sort_graph = NULL;
  sg__free(ids);
  return st;
}

/* Structure of one op: kind, arity, ids, attributes against the schema. */
static sg_status check_op_structure(const sg_graph *g, uint32_t k) {
  const sg__op *op = &g->ops[k];
  const char *bad = sg__name_problem(op->name);
  if (bad) return sg__error(SG_ERR_FORMAT, "op %u: its name %s", k, bad);
  const sg__op_def *def = sg__op_def_get(op->kind);
  if (def == NULL)
    return sg__error(SG_ERR_UNSUPPORTED, "op '%s': unknown op kind %d", op->name, (int)op->kind);
  if (op->n_inputs < def->min_inputs || (def->max_inputs >= 0 && op->n_inputs > def->max_inputs) ||
      op->n_inputs > SG__MAX_OP_IO)
    return sg__error(SG_ERR_ARITY, "%s '%s': has %d inputs; the op takes %d..%d", def->name, op->name,
                     op->n_inputs, def->min_inputs, def->max_inputs < 0 ? SG__MAX_OP_IO : def->max_inputs);
  if (op->n_outputs < 0 || op->n_outputs > SG__MAX_OUTPUTS)
    return sg__error(SG_ERR_ARITY, "%s '%s': has %d outputs", def->name, op->name, op->n_outputs);
  for (int i = 0; i < op->n_inputs; i++) {
    int32_t id = op->inputs[i];
    bool optional = i < 32 && (def->optional_inputs >> i & 1u);
    if (id == -1 && optional) continue;
    if (id < 0 || (uint32_t)id >= g->n_tensors)
      return sg__error(SG_ERR_RANGE, "%s '%s': input %d refers to tensor id %d; the graph has %u tensors%s",
                       def->name, op->name, i, id, g->n_tensors,
                       id == -1 ? " (and this input is not optional)" : "");
  }
  for (int i = 0; i < op->n_outputs; i++) {
    int32_t id = op->outputs[i];
    if (id < 0 || (uint32_t)id >= g->n_tensors)
      return sg__error(SG_ERR_RANGE, "%s '%s': output %d refers to tensor id %d; the graph has %u tensors",
                       def->name, op->name, i, id, g->n_tensors);
  }
  if (op->n_attrs != def->n_attrs)
    return sg__error(SG_ERR_ATTRIBUTE, "%s '%s': has %d attributes; the op has %d", def->name, op->name,
                     op->n_attrs, def->n_attrs);
  for (int a = 0; a < op->n_attrs; a++) {
    const sg_attr *at = &op->attrs[a];
    const sg__attr_schema *s = &def->attrs[a];
    if (at->name == NULL || strcmp(at->name, s->name) != 0 || at->type != s->type)
      return sg__error(SG_ERR_ATTRIBUTE, "%s '%s': attribute %d is not '%s' of type %d", def->name, op->name,
                       a, s->name, (int)s->type);
    if (s->type == SG_ATTR_INTS &&
        (at->count < s->min_count || at->count > s->max_count || (at->count && !at->ints)))
      return sg__error(SG_ERR_ATTRIBUTE, "%s '%s': attribute '%s' needs %d..%d values, has %d", def->name,
                       op->name, s->name, s->min_count, s->max_count, at->count);
    SG_CHECK(sg__attr_check_bounds(def->name, op->name, s, at));
  }
  return SG_OK;
}

/* Producers, roles of produced and source tensors, in-place updates. */
static sg_status check_dataflow(verify_ctx *c) {
  const sg_graph *g = c->g;
  for (uint32_t t = 0; t < g->n_tensors; t++) c->producer[t] = c->mutator[t] = -1;
  for (uint32_t k = 0; k < g->n_ops; k++) {
    const sg__op *op = &g->ops[k];
    for (int i = 0; i < op->n_outputs; i++) {
      int32_t t = op->outputs[i];
      if (c->producer[t] >= 0)
        return sg__error(SG_ERR_DUPLICATE, "tensor '%s' is produced by both op '%s' and op '%s'",
                         g->tensors[t].name, op_name(&g->ops[c->producer[t]]), op->name);
      c->producer[t] = (int32_t)k;
    }
  }
  for (uint32_t t = 0; t < g->n_tensors; t++) {
    const sg__tensor *x = &g->tensors[t];
    bool produced_role = x->role == SG_ROLE_ACTIVATION || x->role == SG_ROLE_GRADIENT;
    if (c->producer[t] < 0 && produced_role)
      return sg__error(SG_ERR_DANGLING, "tensor '%s' (%s) has no producing op", x->name,
                       sg_role_name(x->role));
    if (c->producer[t] >= 0 && !produced_role)
      return sg__error(SG_ERR_FORMAT, "tensor '%s' has role %s but is produced by op '%s'", x->name,
                       sg_role_name(x->role), op_name(&g->ops[c->producer[t]]));
    if (c->producer[t] >= 0 && x->data)
      return sg__error(SG_ERR_FORMAT, "tensor '%s' is produced by op '%s' and cannot have data", x->name,
                       op_name(&g->ops[c->producer[t]]));
    if (x->producer != c->producer[t])
      return sg__error(SG_ERR_FORMAT, "tensor '%s': recorded producer %d differs from the ops (%d)", x->name,
                       x->producer, c->producer[t]);
  }
  for (uint32_t k = 0; k < g->n_ops; k++) {
    const sg__op *op = &g->ops[k];
    uint32_t mut = sg__op_mutated_inputs(op);
    for (int i = 0; i < op->n_inputs && i < 32; i++) {
      int32_t t = op->inputs[i];
      if (!(mut >> i & 1u) || t < 0) continue;
      const sg__tensor *x = &g->tensors[t];
      if (c->producer[t] >= 0 ||
          !(x->role == SG_ROLE_PARAMETER || x->role == SG_ROLE_STATE || x->role == SG_ROLE_OPTIMIZER_STATE))
        return sg__error(SG_ERR_INVALID_ARG,
                         "op '%s' updates tensor '%s' in place, which must be a parameter or state, not %s",
                         op->name, x->name, sg_role_name(x->role));
      if (c->mutator[t] >= 0)
        return sg__error(SG_ERR_DUPLICATE, "tensor '%s' is updated in place by both op '%s' and op '%s'",
                         x->name, op_name(&g->ops[c->mutator[t]]), op->name);
      c->mutator[t] = (int32_t)k;
    }
  }
  return SG_OK;
}

/* Kahn's algorithm over op -> op edges; on a cycle, walks it to name it. */
static sg_status check_acyclic(verify_ctx *c) {
  const sg_graph *g = c->g;
  memset(c->cons_start, 0, sizeof(uint32_t) * (g->n_tensors + 1));
  for (uint32_t k = 0; k < g->n_ops; k++) {
    c->indeg[k] = 0;
    for (int i = 0; i < g->ops[k].n_inputs; i++) {
      int32_t t = g->ops[k].inputs[i];
      if (t < 0) continue;
      c->cons_start[t + 1]++;
      if (c->producer[t] >= 0) c->indeg[k]++;
    }
  }
  for (uint32_t t = 0; t < g->n_tensors; t++) c->cons_start[t + 1] += c->cons_start[t];
  /* Fill consumers using indeg-independent cursors (reuse queue as cursors is
   * unsafe: sizes differ), so count again from the starts. */
  uint32_t *cursor = sg__malloc(sizeof(uint32_t) * (g->n_tensors ? g->n_tensors : 1));
  if (cursor == NULL) return sg__error(SG_ERR_NO_MEMORY, "verifier: out of memory");
  memcpy(cursor, c->cons_start, sizeof(uint32_t) * g->n_tensors);
  for (uint32_t k = 0; k < g->n_ops; k++)
    for (int i = 0; i < g->ops[k].n_inputs; i++) {
      int32_t t = g->ops[k].inputs[i];
      if (t >= 0) c->cons[cursor[t]++] = (int32_t)k;
    }
  sg__free(cursor);
  uint32_t head = 0, tail = 0;
  for (uint32_t k = 0; k < g->n_ops; k++)
    if (c->indeg[k] == 0) c->queue[tail++] = (int32_t)k;
  while (head < tail) {
    const sg__op *op = &g->ops[c->queue[head++]];
    for (int o = 0; o < op->n_outputs; o++) {
      int32_t t = op->outputs[o];
      for (uint32_t j = c->cons_start[t]; j < c->cons_start[t + 1]; j++)
        if (--c->indeg[c->cons[j]] == 0) c->queue[tail++] = c->cons[j];
    }
  }
  if (tail == g->n_ops) return SG_OK;
  /* Every unprocessed op has an unprocessed producer among its inputs; walk
   * back through them until an op repeats: that op lies on a cycle. */
  int32_t k = -1;
  for (uint32_t i = 0; i < g->n_ops && k < 0; i++)
    if (c->indeg[i] > 0) k = (int32_t)i;
  for (uint32_t steps = 0; steps < g->n_ops; steps++) {
    const sg__op *op = &g->ops[k];
    for (int i = 0; i < op->n_inputs; i++) {
      int32_t t = op->inputs[i];
      if (t >= 0 && c->producer[t] >= 0 && c->indeg[c->producer[t]] > 0) {
        k = c->producer[t];
        break;
      }
    }
  }
  const sg__op *op = &g->ops[k];
  for (int i = 0; i < op->n_inputs; i++) {
    int32_t t = op->inputs[i];
    if (t >= 0 && c->producer[t] >= 0 && c->indeg[c->producer[t]] > 0)
      return sg__error(SG_ERR_CYCLE,
                       "the graph has a cycle: op '%s' consumes tensor '%s', which depends on op '%s' itself "
                       "(%u of %u ops are on or behind a cycle)",
                       op->name, g->tensors[t].name, op->name, g->n_ops - tail, g->n_ops);
  }
  return sg__error(SG_ERR_CYCLE, "the graph has a cycle through op '%s'", op->name);
}

/* Re-runs inference and compares with the recorded outputs. */
static sg_status check_shapes(const sg_graph *g, uint32_t k) {
  const sg__op *op = &g->ops[k];
  const sg__op_def *def = sg__op_def_get(op->kind);
  sg__shape outs[SG__MAX_OUTPUTS];
  int n = 0;
  SG_CHECK(def->infer(g, op, outs, &n));
  if (n != op->n_outputs)
    return sg__error(SG_ERR_ARITY, "%s '%s': has %d outputs; with its attributes it must have %d", def->name,
                     op->name, op->n_outputs, n);
  for (int i = 0; i < n; i++) {
    const sg__tensor *t = &g->tensors[op->outputs[i]];
    bool same = t->dtype == outs[i].dtype && t->ndim == outs[i].ndim;
    for (int d = 0; same && d < t->ndim; d++) same = t->dims[d] == outs[i].dims[d];
    if (!same) {
      char want[SG__SHAPE_STR], got[SG__SHAPE_STR];
      return sg__error(t->dtype != outs[i].dtype ? SG_ERR_DTYPE : SG_ERR_SHAPE,
                       "%s '%s': output %d '%s' is recorded as %s but the op produces %s", def->name,
                       op->name, i, t->name, sg__shape_str(got, t->dtype, t->ndim, t->dims),
                       sg__shape_str(want, outs[i].dtype, outs[i].ndim, outs[i].dims));
    }
  }
  return SG_OK;
}

static sg_status check_io(const sg_graph *g) {
  uint32_t n = 0;
  for (uint32_t t = 0; t < g->n_tensors; t++) {
    if (g->tensors[t].role != SG_ROLE_INPUT) continue;
    if (n >= g->n_inputs || g->inputs[n] != (int32_t)t)
      return sg__error(SG_ERR_INTERNAL, "graph input list is inconsistent at tensor '%s'",
                       g->tensors[t].name);
    n++;
  }
  if (n != g->n_inputs)
    return sg__error(SG_ERR_INTERNAL, "graph input list has %u entries, expected %u", g->n_inputs, n);
  for (uint32_t i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] < 0 || (uint32_t)g->outputs[i] >= g->n_tensors)
      return sg__error(SG_ERR_RANGE, "graph output %u refers to tensor id %d; the graph has %u tensors", i,
                       g->outputs[i], g->n_tensors);
  return SG_OK;
}

sg_status sg_graph_verify(const sg_graph *g) {
  if (g == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_graph_verify: graph is NULL");
  if (g->error != SG_OK) return sg__graph_sticky_error(g);
  for (uint32_t t = 0; t < g->n_tensors; t++) SG_CHECK(check_tensor(g, t));
  for (uint32_t k = 0; k < g->n_ops; k++) SG_CHECK(check_op_structure(g, k));
  SG_CHECK(check_unique_names(g));
  SG_CHECK(check_io(g));

  verify_ctx c = {.g = g};
  size_t nt = g->n_tensors ? g->n_tensors : 1, no = g->n_ops ? g->n_ops : 1;
  size_t n_edges = 0;
  for (uint32_t k = 0; k < g->n_ops; k++) n_edges += (size_t)g->ops[k].n_inputs;
  c.producer = sg__malloc(sizeof(int32_t) * nt);
  c.mutator = sg__malloc(sizeof(int32_t) * nt);
  c.cons_start = sg__malloc(sizeof(uint32_t) * (nt + 1));
  c.cons = sg__malloc(sizeof(int32_t) * (n_edges ? n_edges : 1));
  c.indeg = sg__malloc(sizeof(uint32_t) * no);
  c.queue = sg__malloc(sizeof(int32_t) * no);
  sg_status st = SG_OK;
  if (!c.producer || !c.mutator || !c.cons_start || !c.cons || !c.indeg || !c.queue) {
    st = sg__error(SG_ERR_NO_MEMORY, "verifier: out of memory");
    goto out;
  }
  SG_CHECK_GOTO(check_dataflow(&c), st, out);
  SG_CHECK_GOTO(check_acyclic(&c), st, out);
  for (uint32_t k = 0; k < g->n_ops; k++) SG_CHECK_GOTO(check_shapes(g, k), st, out);
out:
  sg__free(c.producer);
  sg__free(c.mutator);
  sg__free(c.cons_start);
  sg__free(c.cons);
  sg__free(c.indeg);
  sg__free(c.queue);
  return st;
}
