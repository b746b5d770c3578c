/* Steps of sg__plan_build, one file each. */
#ifndef SG_PLAN_INTERNAL_H
#define SG_PLAN_INTERNAL_H

#include "backend/kernel_ir.h"
#include "compile/plan.h"

/* Fills order, eval_order, fold_order and n_eliminated; marks folded ops. */
sg_status sg__schedule(const sg_graph *g, const sg__plan_options *opt, sg__plan *p, bool *folded);
/* Fills the per-tensor arrays and the byte counts from the schedule; the
 * persistent tensors marked in no_memory (may be NULL) get no slot. */
sg_status sg__memplan(const sg_graph *g, sg__plan *p, const bool *folded, const uint8_t *no_memory,
                      const sg__backend_i *be, void *be_state);

/* ---- fusion (fuse.c, fuse_kernels.c) ------------------------------------------ */

/* What the fusion pass is asked to do: join ops into groups (fusion on) or
 * not, around the barrier tensors (sg__plan_options.fuse_barrier), for a
 * backend whose supports_op says which ops need a generated kernel even
 * alone (be NULL: none). */
typedef struct sg__fuse_params {
  bool join;
  const uint8_t *barrier;
  const sg__backend_i *be;
  void *be_state;
} sg__fuse_params;
/* Groups the scheduled elementwise ops (fills p's fusion fields and drops
 * the members other than anchors from order and eval_order). */
sg_status sg__fuse_plan(const sg_graph *g, const sg__fuse_params *fp, sg__plan *p);
/* Memory planning of groups: which tensors may take a backend layout
 * (clears may[t] for the operands of a group that computes in the plain
 * index space; sets it for the values inside groups), and the in-place
 * outputs of group gi at schedule position pos (returns how many). */
void sg__fuse_layouts(const sg_graph *g, const sg__plan *p, uint8_t *may);
uint32_t sg__fuse_inplace(const sg_graph *g, sg__plan *p, int32_t gi, int32_t pos);
/* Builds plan.kernels, one per group, once memory is planned, and the list
 * of distinct ones (plan.unique: a kernel equal to an earlier one but for
 * its name takes that one's name). */
sg_status sg__fuse_kernels(const sg_graph *g, sg__plan *p);
/* The canonical text of a kernel: its IR line by line, with its name or
 * without (to compare programs); part of the compile cache's key. */
void sg__fuse_kernel_text(sg__strbuf *b, const sg__kir_kernel *k, bool with_name);

/* ---- fusion rules (fuse_rules.c) -------------------------------------------- */

/* Whether op (an SG__OP_SUM kind) may end a chain: f32, not empty, its
 * summed dims the trailing or the leading ones of its input; then the
 * kernel's sum geometry over the input's dims and the factor (1, or
 * 1/count for a mean). */
bool sg__fuse_sum_rule(const sg_graph *g, const sg__op *op, sg__kir_sum *kind, int *axis, double *scale);
/* Whether an optimizer update gets a generated kernel (fuse_updates.c),
 * and that kernel, named `name`, over the parameter's elements. */
bool sg__fuse_update_rule(const sg_graph *g, const sg__op *op);
sg_status sg__fuse_update_kernel(const sg_graph *g, const sg__op *op, const char *name, sg__kir_kernel *k);
/* Whether an op kind has an expression in the kernel IR. */
bool sg__fuse_has_rule(sg_op_kind kind);
/* Appends op's expression to k over the values in[] (its inputs, in order);
 * returns the value of its output, -1 on error (k's sticky error, or
 * SG_ERR_UNSUPPORTED for a kind without a rule). */
int sg__fuse_op_expr(sg__kir_kernel *k, const sg__op *op, const int *in);

#endif /* SG_PLAN_INTERNAL_H */
