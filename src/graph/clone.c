/* sg_graph_clone: an editable copy of a graph. A loaded or finalized graph
 * is immutable; training a loaded model (add a loss, differentiate, add an
 * optimizer) starts from a copy. */
#include <string.h>

#include "graph/graph_internal.h"

static sg_status copy_into(const sg_graph *src, sg_graph *g) {
  for (uint32_t t = 0; t < src->n_tensors; t++) {
    sg__tensor x = src->tensors[t];
    if (x.data) {
      x.data = sg__arena_memdup(&g->arena, x.data, x.nbytes, 64);
      if (x.data == NULL)
        return sg__error(SG_ERR_NO_MEMORY, "sg_graph_clone: out of memory copying '%s'", x.name);
    }
    int32_t id;
    SG_CHECK(sg__graph_push_tensor(g, &x, &id));
    if (sg__names_insert(g, false, id) != SG_OK)
      return sg__error(SG_ERR_NO_MEMORY, "sg_graph_clone: out of memory");
  }
  for (uint32_t k = 0; k < src->n_ops; k++) {
    sg__op op = src->ops[k];
    op.name = sg__arena_strdup(&g->arena, op.name);
    op.inputs =
        sg__arena_memdup(&g->arena, op.inputs, sizeof(int32_t) * (size_t)(op.n_inputs ? op.n_inputs : 1), 4);
    op.outputs = sg__arena_memdup(&g->arena, op.outputs,
                                  sizeof(int32_t) * (size_t)(op.n_outputs ? op.n_outputs : 1), 4);
    op.attrs =
        op.n_attrs ? sg__arena_memdup(&g->arena, op.attrs, sizeof(sg_attr) * (size_t)op.n_attrs, 8) : NULL;
    if (!op.name || !op.inputs || !op.outputs || (op.n_attrs && !op.attrs))
      return sg__error(SG_ERR_NO_MEMORY, "sg_graph_clone: out of memory");
    /* Attribute names point into the static op table; INTS arrays are the
     * graph's own and must be copied. */
    for (int a = 0; a < op.n_attrs; a++) {
      sg_attr *at = &op.attrs[a];
      if (at->type == SG_ATTR_INTS && at->count > 0) {
        at->ints = sg__arena_memdup(&g->arena, at->ints, sizeof(int64_t) * (size_t)at->count, 8);
        if (at->ints == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_graph_clone: out of memory");
      }
    }
    SG_CHECK(sg__graph_push_op(g, &op));
    if (sg__names_insert(g, true, (int32_t)k) != SG_OK)
      return sg__error(SG_ERR_NO_MEMORY, "sg_graph_clone: out of memory");
  }
  for (uint32_t i = 0; i < src->n_outputs; i++)
    SG_CHECK(sg_graph_mark_output(g, (sg_tensor){src->outputs[i]}));
  return SG_OK;
}

sg_status sg_graph_clone(const sg_graph *src, sg_graph **out) {
  if (out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_graph_clone: out is NULL");
  *out = NULL;
  if (src == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_graph_clone: graph is NULL");
  if (src->error != SG_OK)
    return sg__error(src->error, "sg_graph_clone: the graph has a builder error (%s): %s",
                     sg_status_str(src->error), src->error_message);
  sg_graph *g;
  SG_CHECK(sg_graph_create(&g));
  sg_status st = copy_into(src, g);
  if (st != SG_OK) {
    sg_graph_destroy(g);
    return st;
  }
  *out = g;
  return SG_OK;
}
