/* sg__plan_build: schedule, then memory. */
#include "compile/plan.h"
#include "compile/plan_internal.h"

sg_status sg__plan_build(const sg_graph *g, const sg__backend_i *be, void *be_state,
                         const sg__plan_options *opt, sg__plan *out) {
  sg__plan_options none = {0};
  *out = (sg__plan){0};
  if (!g->finalized) return sg__error(SG_ERR_STATE, "compile: the graph must be finalized");
  bool *folded = sg__calloc(g->n_ops ? g->n_ops : 1, sizeof(bool));
  if (folded == NULL) return sg__error(SG_ERR_NO_MEMORY, "compile: out of memory");
  if (opt == NULL) opt = &none;
  sg_status st = sg__schedule(g, opt, out, folded);
  /* Generated kernels need a backend that runs them: fused groups when
   * fusion is on, and for a backend without kernels of its own for some
   * ops the IR expresses, those ops alone even when it is off. */
  if (st == SG_OK && be != NULL && be->module_build != NULL) {
    sg__fuse_params fp = {opt->fuse, opt->fuse_barrier, be, be_state};
    st = sg__fuse_plan(g, &fp, out);
  }
  if (st == SG_OK) st = sg__memplan(g, out, folded, opt->no_memory, be, be_state);
  if (st == SG_OK) st = sg__fuse_kernels(g, out);
  sg__free(folded);
  if (st != SG_OK) sg__plan_free(out);
  return st;
}

sg_status sg__plan_schedule(const sg_graph *g, const sg__plan_options *opt, int32_t **order, uint32_t *n) {
  sg__plan_options none = {0};
  sg__plan p = {0};
  *order = NULL;
  *n = 0;
  if (!g->finalized) return sg__error(SG_ERR_STATE, "compile: the graph must be finalized");
  bool *folded = sg__calloc(g->n_ops ? g->n_ops : 1, sizeof(bool));
  if (folded == NULL) return sg__error(SG_ERR_NO_MEMORY, "compile: out of memory");
  sg_status st = sg__schedule(g, opt ? opt : &none, &p, folded);
  sg__free(folded);
  if (st == SG_OK) {
    *order = p.order;
    *n = p.n_order;
    p.order = NULL;
  }
  sg__plan_free(&p);
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
  sg__free(p->groups);
  sg__free(p->group_of);
  sg__free(p->fused_ops);
  sg__free(p->fused_io);
  sg__free(p->fused_over);
  for (uint32_t i = 0; p->kernels != NULL && i < p->n_groups; i++) sg__kir_free(&p->kernels[i]);
  sg__free(p->unique);
  sg__free(p->kernels);
  *p = (sg__plan){0};
}
