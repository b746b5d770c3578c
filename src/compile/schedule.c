/* Scheduling: dead-code elimination, the choice of ops to fold at compile
 * time, and a deterministic topological order that puts every in-place
 * update after all readers of the tensor it updates. */
#include <string.h>

#include "backend/backend.h"
#include "compile/plan.h"
#include "compile/plan_internal.h"

/* Marks every op that `roots` transitively need. stack has room for n_ops. */
static void mark_needed(const sg_graph *g, bool *needed, int32_t *stack, uint32_t n_stack) {
  while (n_stack > 0) {
    const sg__op *op = &g->ops[stack[--n_stack]];
    for (int i = 0; i < op->n_inputs; i++) {
      int32_t t = op->inputs[i];
      if (t < 0) continue;
      int32_t p = g->tensors[t].producer;
      if (p >= 0 && !needed[p]) {
        needed[p] = true;
        stack[n_stack++] = p;
      }
    }
  }
}

/* Ops a training step needs: those that update state in place and those
 * that produce graph outputs, and everything they depend on. */
static void find_needed(const sg_graph *g, bool *needed, int32_t *stack) {
  uint32_t n = 0;
  for (uint32_t k = 0; k < g->n_ops; k++)
    if (sg__op_mutated_inputs(&g->ops[k]) != 0 && !needed[k]) needed[k] = true, stack[n++] = (int32_t)k;
  for (uint32_t i = 0; i < g->n_outputs; i++) {
    int32_t p = g->tensors[g->outputs[i]].producer;
    if (p >= 0 && !needed[p]) needed[p] = true, stack[n++] = p;
  }
  mark_needed(g, needed, stack, n);
}

/* An op whose inputs are all constants (or folded) computes the same value
 * every step: run it once at compile time. Random and stateful ops never
 * fold. */
static void find_foldable(const sg_graph *g, const bool *needed, bool *folded) {
  /* Op index order is not necessarily topological for loaded graphs, so
   * iterate to a fixed point (graphs are small; this is compile time). */
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t k = 0; k < g->n_ops; k++) {
      const sg__op *op = &g->ops[k];
      if (!needed[k] || folded[k] || op->n_outputs == 0 || sg__op_mutated_inputs(op) != 0) continue;
      if (op->kind == SG_OP_DROPOUT || sg__op_draws_random(op) || op->kind == SG_OP_BATCH_NORM) continue;
      bool all_const = op->n_inputs > 0;
      for (int i = 0; i < op->n_inputs && all_const; i++) {
        int32_t t = op->inputs[i];
        if (t < 0) continue;
        int32_t p = g->tensors[t].producer;
        all_const = p >= 0 ? folded[p] : g->tensors[t].role == SG_ROLE_CONSTANT;
      }
      if (all_const) folded[k] = changed = true;
    }
  }
}

/* A binary min-heap of priority keys, so the order is the smallest ready
 * key first: deterministic, and equal to index order for builder graphs,
 * except that optimizer updates run as soon as they are ready (key() below). */
static void heap_push(int32_t *h, uint32_t *n, int32_t v) {
  uint32_t i = (*n)++;
  while (i > 0 && h[(i - 1) / 2] > v) {
    h[i] = h[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h[i] = v;
}

static int32_t heap_pop(int32_t *h, uint32_t *n) {
  int32_t top = h[0], last = h[--(*n)];
  uint32_t i = 0;
  for (;;) {
    uint32_t c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && h[c + 1] < h[c]) c++;
    if (h[c] >= last) break;
    h[i] = h[c];
    i = c;
  }
  if (*n > 0) h[i] = last;
  return top;
}

/* Heap key of op k: its index, or for an optimizer update its index minus
 * n_ops, so that an update runs as soon as its gradient exists and the last
 * reader of its parameter has run, instead of after the whole backward pass.
 * Its gradient then dies at once (the planner reuses the slot, so the
 * gradients are not all alive at the end of the step) and is often still in
 * cache when the update reads it; a gradient bucket is also complete as
 * early as possible (SPEC C5). */
static int32_t key(const sg_graph *g, bool updates_last, int32_t k) {
  sg_op_kind kind = g->ops[k].kind;
  bool update = kind == SG_OP_SGD_UPDATE || kind == SG_OP_ADAMW_UPDATE;
  return update && !updates_last ? k - (int32_t)g->n_ops : k;
}
static int32_t op_of(const sg_graph *g, int32_t key) { return key < 0 ? key + (int32_t)g->n_ops : key; }

sg_status sg__schedule(const sg_graph *g, const sg__plan_options *opt, sg__plan *p, bool *folded) {
  bool last = opt->updates_last;
  uint32_t n_ops = g->n_ops, nt = g->n_tensors;
  size_t no = n_ops ? n_ops : 1;
  bool *needed = sg__calloc(no, sizeof(bool));
  int32_t *stack = sg__malloc(no * sizeof(int32_t));
  uint32_t *indeg = sg__calloc(no, sizeof(uint32_t));
  int32_t *mutator = sg__malloc((nt ? nt : 1) * sizeof(int32_t));
  int32_t *heap = sg__malloc(no * sizeof(int32_t));
  size_t n_edges = 0;
  for (uint32_t k = 0; k < n_ops; k++) n_edges += (size_t)g->ops[k].n_inputs;
  uint32_t *cons_start = sg__calloc((size_t)nt + 1, sizeof(uint32_t));
  int32_t *cons = sg__malloc((n_edges ? n_edges : 1) * sizeof(int32_t));
  p->order = sg__malloc(no * sizeof(int32_t));
  p->fold_order = sg__malloc(no * sizeof(int32_t));
  p->eval_order = sg__malloc(no * sizeof(int32_t));
  sg_status st = SG_OK;
  if (!needed || !stack || !indeg || !mutator || !heap || !cons_start || !cons || !p->order ||
      !p->fold_order || !p->eval_order) {
    st = sg__error(SG_ERR_NO_MEMORY, "compile: out of memory scheduling %u ops", n_ops);
    goto out;
  }
  find_needed(g, needed, stack);
  find_foldable(g, needed, folded);
  for (uint32_t t = 0; t < nt; t++) mutator[t] = -1;
  for (uint32_t k = 0; k < n_ops; k++) {
    if (!needed[k]) {
      p->n_eliminated++;
      continue;
    }
    uint32_t mut = sg__op_mutated_inputs(&g->ops[k]);
    for (int i = 0; i < g->ops[k].n_inputs && i < 32; i++)
      if ((mut >> i & 1u) && g->ops[k].inputs[i] >= 0) mutator[g->ops[k].inputs[i]] = (int32_t)k;
  }

  /* Edges: producer -> consumer, and reader -> in-place updater of what it
   * reads. Folded ops run before everything and carry no edges. Counted
   * once here, walked again below when an op completes. */
  for (uint32_t k = 0; k < n_ops; k++) {
    if (!needed[k] || folded[k]) continue;
    const sg__op *op = &g->ops[k];
    for (int i = 0; i < op->n_inputs; i++) {
      int32_t t = op->inputs[i];
      if (t < 0) continue;
      int32_t prod = g->tensors[t].producer;
      if (prod >= 0 && !folded[prod]) indeg[k]++;
      int32_t m = mutator[t];
      if (m >= 0 && m != (int32_t)k) indeg[m]++;
    }
  }
  /* Consumers of each tensor among the scheduled ops (CSR). */
  for (uint32_t k = 0; k < n_ops; k++) {
    if (!needed[k] || folded[k]) continue;
    for (int i = 0; i < g->ops[k].n_inputs; i++)
      if (g->ops[k].inputs[i] >= 0) cons_start[g->ops[k].inputs[i] + 1]++;
  }
  for (uint32_t t = 0; t < nt; t++) cons_start[t + 1] += cons_start[t];
  for (uint32_t k = 0; k < n_ops; k++) {
    if (!needed[k] || folded[k]) continue;
    for (int i = 0; i < g->ops[k].n_inputs; i++) {
      int32_t t = g->ops[k].inputs[i];
      if (t >= 0) cons[cons_start[t]++] = (int32_t)k;
    }
  }
  /* The fill advanced each start to the next tensor's: shift back. */
  for (uint32_t t = nt; t > 0; t--) cons_start[t] = cons_start[t - 1];
  cons_start[0] = 0;

  uint32_t n_heap = 0;
  for (uint32_t k = 0; k < n_ops; k++)
    if (needed[k] && !folded[k] && indeg[k] == 0) heap_push(heap, &n_heap, key(g, last, (int32_t)k));
  while (n_heap > 0) {
    int32_t k = op_of(g, heap_pop(heap, &n_heap));
    p->order[p->n_order++] = k;
    const sg__op *op = &g->ops[k];
    /* Release consumers of k's outputs (once per input slot that reads it). */
    for (int o = 0; o < op->n_outputs; o++) {
      int32_t t = op->outputs[o];
      for (uint32_t j = cons_start[t]; j < cons_start[t + 1]; j++)
        if (--indeg[cons[j]] == 0) heap_push(heap, &n_heap, key(g, last, cons[j]));
    }
    /* k has read its inputs: release their in-place updaters. */
    for (int i = 0; i < op->n_inputs; i++) {
      int32_t t = op->inputs[i];
      if (t < 0 || mutator[t] < 0 || mutator[t] == k) continue;
      if (--indeg[mutator[t]] == 0) heap_push(heap, &n_heap, key(g, last, mutator[t]));
    }
  }
  uint32_t n_sched = 0;
  for (uint32_t k = 0; k < n_ops; k++) n_sched += needed[k] && !folded[k];
  if (p->n_order != n_sched) {
    st = sg__error(SG_ERR_CYCLE,
                   "compile: cannot order in-place updates after all readers of the tensors they "
                   "update (%u of %u ops scheduled)",
                   p->n_order, n_sched);
    goto out;
  }
  for (uint32_t k = 0; k < n_ops; k++)
    if (folded[k]) p->fold_order[p->n_fold++] = (int32_t)k;

  /* Evaluation: the forward ops behind the outputs that are not gradients. */
  memset(needed, 0, no * sizeof(bool));
  uint32_t n = 0;
  for (uint32_t i = 0; i < g->n_outputs; i++) {
    const sg__tensor *t = &g->tensors[g->outputs[i]];
    if (t->producer >= 0 && t->role == SG_ROLE_ACTIVATION && !needed[t->producer])
      needed[t->producer] = true, stack[n++] = t->producer;
  }
  mark_needed(g, needed, stack, n);
  for (uint32_t i = 0; i < p->n_order; i++) {
    const sg__op *op = &g->ops[p->order[i]];
    bool forward = sg__op_mutated_inputs(op) == 0 || op->kind == SG_OP_BATCH_NORM;
    for (int o = 0; o < op->n_outputs && forward; o++)
      forward = g->tensors[op->outputs[o]].role != SG_ROLE_GRADIENT;
    if (needed[p->order[i]] && forward) p->eval_order[p->n_eval++] = p->order[i];
  }
out:
  sg__free(needed);
  sg__free(stack);
  sg__free(indeg);
  sg__free(mutator);
  sg__free(heap);
  sg__free(cons_start);
  sg__free(cons);
  return st;
}
