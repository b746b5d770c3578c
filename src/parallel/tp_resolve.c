/* Finding the backward sync tensors (tp.h) after sg_graph_backward().
 *
 * A column-split op must sum, over the group, its own contribution to its
 * input's gradient -- not the input's total gradient, which may include
 * contributions of replicated consumers that are already whole. Autodiff
 * names the ops it appends for forward op F "F/grad", "F/grad_1", ...
 * (docs/autodiff.md); of those, the input gradient is the one that reads the
 * weight (dx = dy . W for gemm and 2-D matmul; dW reads x instead). A shape
 * op may follow it (matmul's reshape back to x's shape): we follow such a
 * chain of F/grad ops to the tensor with x's shape. */
#include <string.h>

#include "graph/graph.h"
#include "parallel/tp.h"

/* "F/grad" or "F/grad_<digits>". */
static bool is_grad_op_of(const char *name, const char *f) {
  size_t n = strlen(f);
  if (strncmp(name, f, n) != 0 || strncmp(name + n, "/grad", 5) != 0) return false;
  const char *p = name + n + 5;
  if (*p == '\0') return true;
  if (*p++ != '_' || *p == '\0') return false;
  for (; *p; p++)
    if (*p < '0' || *p > '9') return false;
  return true;
}

static bool same_shape(const sg__tensor *a, const sg__tensor *b) {
  if (a->ndim != b->ndim || a->dtype != b->dtype) return false;
  for (int i = 0; i < a->ndim; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

static sg_status resolve_one(const sg_graph *g, sg__tp_sync *s) {
  int32_t fop = sg__op_lookup(g, s->op), w = sg__tensor_lookup(g, s->weight);
  if (fop < 0 || w < 0)
    return sg__error(SG_ERR_NOT_FOUND, "sg__tp_resolve_backward: no %s '%s' in the graph",
                     fop < 0 ? "op" : "tensor", fop < 0 ? s->op : s->weight);
  const sg__tensor *x = &g->tensors[g->ops[fop].inputs[0]];
  int32_t found = -1;
  for (uint32_t k = 0; k < g->n_ops; k++) {
    const sg__op *op = &g->ops[k];
    if (!is_grad_op_of(op->name, s->op)) continue;
    bool reads_w = false;
    for (int i = 0; i < op->n_inputs; i++) reads_w |= op->inputs[i] == w;
    if (!reads_w) continue;
    if (found >= 0)
      return sg__error(SG_ERR_INTERNAL,
                       "sg__tp_resolve_backward: two ops read weight '%s' in the backward of '%s'", s->weight,
                       s->op);
    found = (int32_t)k;
  }
  if (found < 0) {
    s->resolved = 1; /* the input needs no gradient: nothing to sum */
    return SG_OK;
  }
  int32_t t = g->ops[found].outputs[0];
  /* Follow single-consumer shape ops of the same group to x's shape. */
  for (int hops = 0; !same_shape(&g->tensors[t], x) && hops < 4; hops++) {
    int32_t next = -1;
    for (uint32_t k = 0; k < g->n_ops && next < 0; k++)
      if (is_grad_op_of(g->ops[k].name, s->op) && g->ops[k].n_inputs >= 1 && g->ops[k].inputs[0] == t)
        next = g->ops[k].outputs[0];
    if (next < 0) break;
    t = next;
  }
  if (!same_shape(&g->tensors[t], x))
    return sg__error(SG_ERR_INTERNAL,
                     "sg__tp_resolve_backward: the input gradient of '%s' ('%s') does not have "
                     "the shape of its input '%s'",
                     s->op, g->tensors[t].name, x->name);
  s->tensor = sg__strdup(g->tensors[t].name);
  if (s->tensor == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg__tp_resolve_backward: out of memory");
  s->resolved = 1; /* only now: a failed resolution can be retried */
  return SG_OK;
}

sg_status sg__tp_resolve_backward(const sg_graph *train, sg__tp_sync *syncs, int n_syncs) {
  if (train == NULL || (syncs == NULL && n_syncs > 0) || n_syncs < 0)
    return sg__error(SG_ERR_INVALID_ARG, "sg__tp_resolve_backward: NULL graph or syncs, or n_syncs %d",
                     n_syncs);
  for (int i = 0; i < n_syncs; i++) {
    sg__tp_sync *s = &syncs[i];
    if (s->kind != SG__TP_SYNC_BWD_ALLREDUCE || s->resolved) continue;
    if (s->op == NULL || s->weight == NULL)
      return sg__error(SG_ERR_INVALID_ARG, "sg__tp_resolve_backward: backward sync %d names no op or weight",
                       i);
    SG_CHECK(resolve_one(train, s));
  }
  return SG_OK;
}
