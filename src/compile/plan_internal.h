/* Steps of sg__plan_build, one file each. */
#ifndef SG_PLAN_INTERNAL_H
#define SG_PLAN_INTERNAL_H

#include "compile/plan.h"

/* Fills order, eval_order, fold_order and n_eliminated; marks folded ops. */
sg_status sg__schedule(const sg_graph *g, const sg__plan_options *opt, sg__plan *p, bool *folded);
/* Fills the per-tensor arrays and the byte counts from the schedule; the
 * persistent tensors marked in no_memory (may be NULL) get no slot. */
sg_status sg__memplan(const sg_graph *g, sg__plan *p, const bool *folded, const uint8_t *no_memory,
                      const sg__backend_i *be, void *be_state);

#endif /* SG_PLAN_INTERNAL_H */
