/* sg_dist_create_model's tensor mode (model.h): rank t rewrites the
 * forward graph into its share by the graph's sg_tp_plan (tp_rewrite.c),
 * appends backward and the optimizer, and runs the share with the hooks
 * that all-reduce the split's partial results (tp_run.c) over the
 * scheduler's transport (xfer_sched.c). */
#include <math.h>
#include <string.h>

#include "graph/graph.h"
#include "parallel/model.h"
#include "runtime/hooks.h"
#include "sgrt/train.h"

static sg_status mark_output(sg_graph *g, int32_t t) {
  for (uint32_t i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] == t) return SG_OK;
  return sg_graph_mark_output(g, (sg_tensor){t});
}

static bool is_update(sg_op_kind k) { return k == SG_OP_SGD_UPDATE || k == SG_OP_ADAMW_UPDATE; }

/* With replicas: where the updates start (the session runs them last) and
 * every parameter gradient's slot, for the average between backward and
 * the updates. */
static sg_status find_grads(sg_dist *d) {
  sg__dist_model *m = MODEL(d);
  const sg_graph *g = d->g;
  const int32_t *order = sg__session_order(d->s, &m->n_order);
  m->upd_pos = m->n_order;
  for (uint32_t p = 0; p < m->n_order && m->upd_pos == m->n_order; p++)
    if (is_update(g->ops[order[p]].kind)) m->upd_pos = p;
  m->grad_addr = sg__calloc(g->n_tensors + 1, sizeof *m->grad_addr);
  m->grad_count = sg__calloc(g->n_tensors + 1, sizeof *m->grad_count);
  if (m->grad_addr == NULL || m->grad_count == NULL)
    return sg__error(SG_ERR_NO_MEMORY, "sg_dist_create_model: out of memory");
  for (uint32_t t = 0; t < g->n_tensors; t++) {
    sg_tensor grad;
    if (g->tensors[t].role != SG_ROLE_PARAMETER || sg_graph_grad(g, (sg_tensor){(int32_t)t}, &grad) != SG_OK)
      continue;
    const sg__tensor *x = &g->tensors[grad.id];
    size_t bytes = 0;
    float *addr = sg__session_tensor_addr(d->s, grad.id, &bytes);
    if (x->dtype != SG_F32)
      return sg__error(SG_ERR_UNSUPPORTED, "sg_dist_create_model: gradient '%s' is not f32", x->name);
    if (addr == NULL || bytes < x->nbytes)
      return sg__error(SG_ERR_STATE, "sg_dist_create_model: gradient '%s' has no slot", x->name);
    m->grad_addr[m->n_grads] = addr;
    m->grad_count[m->n_grads++] = x->nbytes / 4;
    m->n_flat += x->nbytes / 4;
  }
  m->flat = sg__malloc(m->n_flat * sizeof(float) + 1);
  if (m->flat == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_dist_create_model: out of memory");
  return SG_OK;
}

sg_status sg__model_tp_build(sg_dist *d, const sg_dist_optimizer *opt) {
  sg__dist_model *m = MODEL(d);
  sg_tensor loss;
  SG_CHECK(sg_graph_find_tensor(m->fwd, m->loss_name, &loss));
  sg_tp_params tpp = SG_TP_PARAMS_INIT;
  tpp.ways = m->tensor;
  sg_tp_plan *plan;
  SG_CHECK(sg_tp_plan_create(m->fwd, &tpp, &plan));
  /* Rank layout (dist.h): rank = replica * T + share. */
  int T = m->tensor, D = m->data;
  m->stage = d->rank % T; /* the share */
  m->replica = d->rank / T;
  m->group = sg__calloc((size_t)T, sizeof *m->group);
  m->replicas = sg__calloc((size_t)D, sizeof *m->replicas);
  if (m->group == NULL || m->replicas == NULL) {
    sg_tp_plan_destroy(plan);
    return sg__error(SG_ERR_NO_MEMORY, "sg_dist_create_model: out of memory");
  }
  for (int j = 0; j < T; j++) m->group[j] = m->replica * T + j;
  for (int e = 0; e < D; e++) m->replicas[e] = e * T + m->stage;
  sg_status st = sg__tp_rewrite(m->fwd, loss, plan, T, m->stage, &m->tp_g, &m->syncs, &m->n_syncs);
  sg_tp_plan_destroy(plan);
  SG_CHECK(st);
  sg_graph *g = m->tp_g;
  m->tp_loss = sg__tensor_lookup(g, m->loss_name);
  if (m->tp_loss < 0)
    return sg__error(SG_ERR_INTERNAL, "sg_dist_create_model: the rewritten graph lost the loss '%s'",
                     m->loss_name);
  SG_CHECK(mark_output(g, m->tp_loss)); /* readable after the step */
  SG_CHECK(sg_graph_backward(g, (sg_tensor){m->tp_loss}));
  SG_CHECK(sg__model_add_optimizer(g, opt));
  SG_CHECK(sg__tp_resolve_backward(g, m->syncs, m->n_syncs));
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sp.device = d->p.device;
  sp.threads = d->p.threads;
  sp.seed = d->p.seed;
  SG_CHECK(sg_session_create(g, &sp, &m->part_session));
  d->s = m->part_session;
  d->g = g;
  SG_CHECK(sg__session_set_updates_last(d->s, true));
  SG_CHECK(sg_session_compile(d->s));
  /* One copy: the world is the group, and its collectives are the
   * communicator's own; with replicas, a group of world ranks. */
  if (D == 1) sg__xfer_sched_init(&m->xctx, d, NULL, 0, 0, "tensor", &m->xfer);
  else sg__xfer_sched_init(&m->xctx, d, m->group, T, m->stage, "tensor", &m->xfer);
  sg__xfer_sched_init(&m->rctx, d, m->replicas, D, m->replica, "replica", &m->rxfer);
  SG_CHECK(sg__tp_runner_create(d->s, &m->xfer, m->syncs, m->n_syncs, &m->tp));
  if (D > 1) SG_CHECK(find_grads(d));
  return sg__model_list_inputs(m, g, opt->lr_input);
}

/* With replicas: forward and backward (the group's syncs run in the hooks),
 * the gradients averaged over the copies of this share in one allreduce
 * (every copy gets the same bits), then the updates. */
static sg_status replicated_step(sg_dist *d) {
  sg__dist_model *m = MODEL(d);
  if (!m->broadcast_done) {
    SG_CHECK(sg__model_broadcast_state(d, NULL, 0)); /* in the group of copies of this share */
    m->broadcast_done = true;
  }
  SG_CHECK(sg__tp_runner_run(m->tp, 0, m->upd_pos, false));
  size_t off = 0;
  for (int i = 0; i < m->n_grads; i++) {
    memcpy(m->flat + off, m->grad_addr[i], m->grad_count[i] * sizeof(float));
    off += m->grad_count[i];
  }
  SG_CHECK(m->rxfer.allreduce(m->rxfer.ctx, m->flat, m->n_flat, SG_F32, SG_REDUCE_SUM));
  off = 0;
  for (int i = 0; i < m->n_grads; i++)
    for (size_t k = 0; k < m->grad_count[i]; k++) m->grad_addr[i][k] = m->flat[off++] / (float)m->data;
  SG_CHECK(sg__tp_runner_run(m->tp, m->upd_pos, m->n_order, true)); /* counts the whole step */
  return SG_OK;
}

sg_status sg__model_tp_step(sg_dist *d, float *loss) {
  if (MODEL(d)->data > 1) SG_CHECK(replicated_step(d));
  else SG_CHECK(sg__tp_runner_step(MODEL(d)->tp));
  return sg_session_read(d->s, MODEL(d)->loss_name, loss, sizeof *loss);
}

void sg__model_tp_free(sg__dist_model *m) {
  sg__free(m->flat);
  sg__free(m->grad_addr);
  sg__free(m->grad_count);
  m->flat = NULL, m->grad_addr = NULL, m->grad_count = NULL;
  sg__xfer_sched_free(&m->rctx);
  sg__free(m->replicas);
  m->replicas = NULL;
  sg__tp_runner_destroy(m->tp);
  m->tp = NULL;
  sg_session_destroy(m->part_session); /* before the graph it was compiled from */
  m->part_session = NULL;
  sg__tp_syncs_free(m->syncs, m->n_syncs);
  m->syncs = NULL;
  sg_graph_destroy(m->tp_g);
  m->tp_g = NULL;
}
