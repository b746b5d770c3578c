/* Pipeline stages that are tensor groups (pipeline x tensor, SPEC P7, model.h):
 * stage k's forward graph (pp_split.c: its ops, the loss or the surrogate loss
 * of the boundary gradients, the received activations as parameters) is
 * planned and rewritten into share s of T like any forward graph
 * (sg_tp_plan_create on the stage graph, tp_rewrite.c), then differentiated.
 *
 * Why every share of a stage holds the whole boundary tensors: the rewrite
 * keeps graph outputs and the loss whole (a column split feeding one is
 * gathered), and a received activation is a replicated parameter whose
 * gradient the backward syncs complete on every share. So share s of stage k
 * talks to share s of stages k-1 and k+1 only, exactly as a pipeline of one
 * share does, and the shares of a stage run the same passes (the 1F1B
 * program, the recomputations) whose hooks allreduce the split's partial
 * results over the stage's tensor group. */
#include <string.h>

#include "graph/graph.h"
#include "parallel/model.h"

/* Stage graph ids of `from` mapped by name into `to`. */
static sg_status remap(const sg_graph *from, const sg_graph *to, int32_t *ids, int n) {
  for (int i = 0; i < n; i++) {
    const char *name = from->tensors[ids[i]].name;
    int32_t t = sg__tensor_lookup(to, name);
    if (t < 0)
      return sg__error(SG_ERR_INTERNAL, "pipeline x tensor: the share's graph lost the stage's tensor '%s'",
                       name);
    ids[i] = t;
  }
  return SG_OK;
}

/* A received activation is a parameter of the stage graph only to get its gradient: a plan that splits it
 * (the second operand of a matmul) would cut what the previous stage sends whole. A tied weight is
 * refused when split too (below). */
static sg_status check_plan(const sg__pp_stage *st, const sg_tp_plan *plan) {
  for (int32_t i = 0; i < sg_tp_plan_count(plan); i++) {
    sg_tp_annotation a;
    SG_CHECK(sg_tp_plan_get(plan, i, &a));
    if (a.split == SG_TP_REPLICATE) continue;
    for (int j = 0; j < st->n_recv; j++)
      if (a.weight.id == st->recv[j])
        return sg__error(SG_ERR_UNSUPPORTED,
                         "sg_dist_create_model: pipeline x tensor: op '%s' of stage %d multiplies by '%s', "
                         "an activation the stage receives, which the tensor split would cut; move the "
                         "stage boundary or use one of the two modes",
                         st->g->ops[a.op].name, st->stage, st->g->tensors[st->recv[j]].name);
  }
  /* A tied weight's holders add their gradients element by element (pp_run.c): every holder must keep it
   * whole. A stage's plan sees only its own uses, so the stage graph marks it an output, which a plan keeps
   * whole (pp_split.c); this guards that. */
  for (int j = 0; j < st->n_tied; j++) {
    int axis = -1, groups = 1;
    SG_CHECK(sg_tp_plan_tensor_split(plan, (sg_tensor){st->tied[j]}, &axis, &groups));
    if (axis >= 0)
      return sg__error(
          SG_ERR_UNSUPPORTED,
          "sg_dist_create_model: pipeline x tensor: stage %d's tensor plan splits '%s' (axis %d), a "
          "weight tied across stages (read on another stage too), which every stage holding it "
          "must keep whole; untie it or use one of the two modes",
          st->stage, st->g->tensors[st->tied[j]].name, axis);
  }
  return SG_OK;
}

sg_status sg__pp_split_tp(const sg_graph *fwd, sg_tensor loss, const int *stage_of_op, int stages, int stage,
                          int micro_batches, int ways, int share, sg__pp_stage **out, sg__tp_sync **syncs,
                          int *n_syncs) {
  *out = NULL;
  *syncs = NULL;
  *n_syncs = 0;
  int32_t n_ops = sg_graph_num_ops(fwd);
  if (ways == 1) return sg__pp_split(fwd, loss, stage_of_op, n_ops, stages, stage, micro_batches, out);
  sg__pp_stage *st = NULL;
  SG_CHECK(sg__pp_split_forward(fwd, loss, stage_of_op, n_ops, stages, stage, micro_batches, &st));
  sg_graph *share_g = NULL;
  sg_tp_plan *plan = NULL;
  sg_tp_params tpp = SG_TP_PARAMS_INIT;
  tpp.ways = ways;
  sg_status rc = sg_tp_plan_create(st->g, &tpp, &plan);
  if (rc == SG_OK) rc = check_plan(st, plan);
  if (rc == SG_OK)
    rc = sg__tp_rewrite(st->g, (sg_tensor){st->loss}, plan, ways, share, &share_g, syncs, n_syncs);
  sg_tp_plan_destroy(plan);
  /* The stage's ids, by name, in the share's graph, which replaces the stage's. */
  if (rc == SG_OK) rc = remap(st->g, share_g, st->recv, st->n_recv);
  if (rc == SG_OK) rc = remap(st->g, share_g, st->send, st->n_send);
  if (rc == SG_OK && st->send_grad != NULL) rc = remap(st->g, share_g, st->send_grad, st->n_send);
  if (rc == SG_OK) rc = remap(st->g, share_g, st->inputs, st->n_inputs);
  if (rc == SG_OK) rc = remap(st->g, share_g, st->tied, st->n_tied);
  if (rc == SG_OK) rc = remap(st->g, share_g, &st->loss, 1);
  if (rc == SG_OK) {
    sg_graph_destroy(st->g);
    st->g = share_g;
    share_g = NULL;
    rc = sg__pp_stage_backward(st);
  }
  sg_graph_destroy(share_g);
  if (rc != SG_OK) {
    sg__pp_stage_destroy(st);
    sg__tp_syncs_free(*syncs, *n_syncs);
    *syncs = NULL;
    *n_syncs = 0;
    return rc;
  }
  *out = st;
  return SG_OK;
}
