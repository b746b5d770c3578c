/* sg__plan_build: schedule, then memory. */
#include "compile/plan.h"
#include "compile/plan_internal.h"

/* Lays the persistent region out again without the unallocated optimizer
 * state (same order and alignment as memplan): those tensors keep their
 * kind but have no offset, and the region shrinks by their bytes. */
static void drop_unallocated(const sg_graph *g, const uint8_t *unallocated, sg__plan *p) {
  size_t at = 0;
  for (uint32_t t = 0; t < g->n_tensors; t++) {
    if (p->buf_kind[t] != SG__BUF_PERSISTENT) continue;
    if (unallocated[t] && g->tensors[t].role == SG_ROLE_OPTIMIZER_STATE) {
      p->offset[t] = SG__NO_OFFSET;
      continue;
    }
    p->offset[t] = at;
    at += (g->tensors[t].nbytes + SG__SLOT_ALIGN - 1) / SG__SLOT_ALIGN * SG__SLOT_ALIGN;
  }
  p->persistent_bytes = at;
}

sg_status sg__plan_build(const sg_graph *g, const sg__backend_i *be, void *be_state,
                         const sg__plan_options *opt, sg__plan *out) {
  sg__plan_options none = {0};
  *out = (sg__plan){0};
  if (!g->finalized) return sg__error(SG_ERR_STATE, "compile: the graph must be finalized");
  bool *folded = sg__calloc(g->n_ops ? g->n_ops : 1, sizeof(bool));
  if (folded == NULL) return sg__error(SG_ERR_NO_MEMORY, "compile: out of memory");
  sg_status st = sg__schedule(g, opt ? opt : &none, out, folded);
  if (st == SG_OK) st = sg__memplan(g, out, folded, be, be_state);
  if (st == SG_OK && opt && opt->unallocated) drop_unallocated(g, opt->unallocated, out);
  sg__free(folded);
  if (st != SG_OK) sg__plan_free(out);
  return st;
}

void sg__plan_free(sg__plan *p) {
  sg__free(p->order);
  sg__free(p->eval_order);
  sg__free(p->fold_order);
  sg__free(p->buf_kind);
  sg__free(p->offset);
  sg__free(p->last_use);
  sg__free(p->alias_of);
  sg__free(p->bytes);
  *p = (sg__plan){0};
}
