/* Healing a pipeline whose stages are tensor groups (sg_dist_params.heal with pipeline and tensor > 1,
 * docs/resilience.md "Healing a pipeline of tensor groups"): model_heal.c's generations go round each
 * stage's group (share t's state to share t+1 of the same stage), and a loss keeps the stages and splits
 * every stage's group again over one share fewer. Every stage of every copy keeps the same width: the
 * agreement releases, in each other stage and copy, the rank at the lost one's share index
 * (model_heal.c's keep_share), so each group loses one place and T' = T - 1 shares remain per stage
 * (a plain pipeline when T' = 1). Each stage then restores its state as a tensor group does
 * (tp_heal.c's sg__reshard_one, over the stage's group, with the plans of the stage's own forward
 * graph for T and T' ways): a lost or released share's slices from the copy its successor kept. Two
 * neighbouring shares of one stage lost at once leave the first without a copy: the job stops with an
 * error naming both. */
#include <stdio.h>

#include "graph/graph.h"
#include "parallel/model.h"

/* The plans of this rank's stage's forward graph for T0 and T1 ways (T1 = 1: none), into c. */
static sg_status stage_plans(sg_dist *d, sg__reshard *c, sg__pp_stage **fst) {
  const sg__par_pipeline *P = PIPELINE(d);
  const sg__par_model *m = &P->m;
  sg_tensor loss = {sg__tensor_lookup(m->fwd, m->loss_name)};
  SG_CHECK(sg__pp_split_forward(m->fwd, loss, P->stage_of_op, sg_graph_num_ops(m->fwd), m->pipeline,
                                sg__pipeline_stage(m), m->micro, fst));
  c->src = (*fst)->g;
  sg_tp_params tpp = SG_TP_PARAMS_INIT;
  tpp.ways = c->T0;
  SG_CHECK(sg_tp_plan_create(c->src, &tpp, &c->plan0));
  if (c->T1 == 1) return SG_OK;
  tpp.ways = c->T1;
  return sg_tp_plan_create(c->src, &tpp, &c->plan1);
}

/* Source tensor t is on this rank's stage (the heal ops' `mine`): the cut puts it there, or it is a weight
 * tied across stages that this stage reads too. The stages keep their places, so every holder of a tied
 * weight keeps and restores its own copy within its group. */
static bool on_stage(const sg_dist *d, int32_t t) {
  const sg__par_pipeline *P = PIPELINE(d);
  int k = sg__pipeline_stage(&P->m);
  if (sg__pp_tensor_stage(P->m.fwd, P->stage_of_op, t) == k) return true;
  if (P->m.fwd->tensors[t].role != SG_ROLE_PARAMETER) return false;
  uint8_t holds[SG__PP_MAX_STAGES];
  sg__pp_tensor_holders(P->m.fwd, P->stage_of_op, P->m.pipeline, t, holds);
  return holds[k] != 0;
}

/* Every parameter and state of this rank's stage, from the generation's copies into the new share. */
static sg_status restore(sg_dist *d, sg__reshard *c) {
  const sg__par_pipeline *P = PIPELINE(d);
  const sg_graph *fwd = P->m.fwd;
  for (uint32_t t = 0; t < fwd->n_tensors; t++) {
    if (!sg__model_heal_keeps(fwd, t) || !on_stage(d, (int32_t)t)) continue;
    SG_CHECK(sg__reshard_one(c, (int32_t)t));
  }
  return SG_OK;
}

/* The new shares over the agreed members from generation g (model.h's sg__model_heal_ops.rebuild). */
static sg_status rebuild(sg_dist *d, const sg__model_gen *g) {
  sg__par_pipeline *P = PIPELINE(d);
  sg__par_model *m = &P->m;
  int K = m->pipeline, T0 = g->ring;
  if (d->size % (m->data * K) != 0 || g->K != K * T0)
    return sg__error(SG_ERR_INTERNAL, "pipeline x tensor healing: %d members for %d copies of %d stages",
                     d->size, m->data, K);
  sg__reshard c = {.d = d, .g = g, .T0 = T0, .T1 = d->size / (m->data * K)};
  m->tensor = c.T1;
  sg_status st = sg__model_replace(d);
  if (st == SG_OK) st = sg__pipeline_transports(d);
  int k = sg__pipeline_stage(m);
  c.me = sg__pipeline_share(m);
  c.x = &P->txfer;
  /* Which share of this stage now holds each old share's copy (the ring stays within the stage). */
  for (int s = 0; s < T0 && st == SG_OK; s++) {
    int idx;
    st = sg__model_gen_keeper(d, g, k * T0 + s, &idx, &c.from_own[s]);
    c.keeper[s] = idx - k * c.T1;
    if (st == SG_OK && (c.keeper[s] < 0 || c.keeper[s] >= c.T1))
      st = sg__error(SG_ERR_INTERNAL, "pipeline x tensor healing: stage %d share %d's copy is on member %d",
                     k, s, idx);
  }
  sg__pp_stage *fst = NULL;
  if (st == SG_OK) st = stage_plans(d, &c, &fst);
  if (st == SG_OK) st = sg__dist_inject_recovery(d, SG_RECOVERY_TRANSFER);
  sg__pp_built b = {0};
  if (st == SG_OK) st = sg__pipeline_split(d, P->stage_of_op, K, &b);
  if (st == SG_OK) st = sg__pipeline_finish_stage(d, &b);
  /* Every rank built its share, or all give up (a split the rewrite refuses fails everywhere). */
  char why[512] = "";
  if (st != SG_OK) snprintf(why, sizeof why, "%s", sg_last_error());
  int64_t ok = st == SG_OK;
  sg_status ast = st == SG_ERR_COMM ? st : sg__dist_world_allreduce(d, &ok, 1, SG_I64, SG_REDUCE_MIN);
  if (ast == SG_OK && ok) {
    /* The new stage in place of the old one (its runner's tags continue at the generation's step), then
     * its state. */
    st = sg__pipeline_install(d, P->stage_of_op, &b, g->step);
    if (st == SG_OK) st = restore(d, &c);
    if (st != SG_OK) snprintf(why, sizeof why, "%s", sg_last_error());
    ok = st == SG_OK;
    ast = st == SG_ERR_COMM ? st : sg__dist_world_allreduce(d, &ok, 1, SG_I64, SG_REDUCE_MIN);
  }
  sg__pp_built_free(&b);
  sg__pp_stage_destroy(fst);
  sg__reshard_free(&c);
  if (ast != SG_OK) return ast; /* a death: the caller agrees again */
  if (!ok)
    return sg__error(st != SG_OK ? st : SG_ERR_COMM, "rank %d: pipeline x tensor healing: %s", d->orig_rank,
                     st != SG_OK ? why : "another rank could not build its new share");
  sg__model_heal_keep(d); /* one share per stage left: a plain pipeline from here on */
  return SG_OK;
}

/* The last stage's shares each hold their copy's loss: the world's sum counts each copy `tensor` times. */
static int copies(const sg_dist *d) { return MODEL(d)->data * MODEL(d)->tensor; }

const sg__model_heal_ops sg__pptp_heal_ops = {.copies = copies,
                                              .part = sg__pipeline_part_step,
                                              .after = sg__pipeline_maybe_replan,
                                              .mine = on_stage,
                                              .rebuild = rebuild};
