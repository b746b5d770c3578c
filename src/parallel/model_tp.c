/* The tensor strategy (sg_dist_create_model with tensor > 1, model.h): rank t rewrites the
 * forward graph into its share by the graph's sg_tp_plan (tp_rewrite.c),
 * appends backward and the optimizer, and runs the share with the hooks
 * that all-reduce the split's partial results (tp_run.c) over the
 * scheduler's transport (xfer_sched.c). A group with copies that healed
 * down to one share per copy (tp_heal.c) runs the unsplit graph: no syncs,
 * the gradients still averaged over the copies.
 *
 * Micro-batches (M > 1): the share is cut from the forward graph rebuilt at
 * the micro-batch shapes (sg__pp_micro_forward); a step runs forward and
 * backward once per micro-batch (rows j*B/M.. of every batched input),
 * adds up the gradients, averages them (over the M micro-batches and, with
 * replicas, the D copies in one allreduce) and runs the updates once: the
 * step of one process on the whole batch when the loss is a mean over the
 * samples and no op mixes samples (batch norm normalises each micro-batch
 * by its own statistics, as in a pipeline). */
#include <math.h>
#include <string.h>

#include "graph/graph.h"
#include "parallel/model.h"
#include "parallel/pp.h"
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
  sg__par_tensor *m = TENSOR(d);
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

sg_status sg__tensor_build_share(sg_dist *d) {
  sg__par_tensor *P = TENSOR(d);
  sg__par_model *m = &P->m;
  int T = m->tensor, D = m->data;
  const sg_graph *src = P->micro_g != NULL ? P->micro_g : m->fwd;
  sg_tensor loss = {sg__tensor_lookup(src, m->loss_name)};
  sg_tp_params tpp = SG_TP_PARAMS_INIT;
  tpp.ways = T;
  sg_tp_plan *plan = NULL;
  /* One share (a group healed down to one per copy, tp_heal.c) holds the whole model: nothing is split,
   * so there is no plan (sg_tp_plan_create splits at least 2 ways) and the rewrite copies the graph. */
  if (T > 1) SG_CHECK(sg_tp_plan_create(src, &tpp, &plan));
  sg_status st = sg__tp_rewrite(src, loss, plan, T, m->index, &P->tp_g, &P->syncs, &P->n_syncs);
  sg_tp_plan_destroy(plan);
  SG_CHECK(st);
  sg_graph *g = P->tp_g;
  int32_t tp_loss = sg__tensor_lookup(g, m->loss_name);
  if (tp_loss < 0)
    return sg__error(SG_ERR_INTERNAL, "sg_dist_create_model: the rewritten graph lost the loss '%s'",
                     m->loss_name);
  SG_CHECK(mark_output(g, tp_loss)); /* readable after the step */
  SG_CHECK(sg_graph_backward(g, (sg_tensor){tp_loss}));
  SG_CHECK(sg__model_add_optimizer(g, &m->opt));
  SG_CHECK(sg__tp_resolve_backward(g, P->syncs, P->n_syncs));
  /* The partial sums the hooks allreduce right after their producers. */
  uint8_t *barrier = sg__model_fuse_barrier(g);
  if (barrier == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_dist_create_model: out of memory");
  for (int i = 0; i < P->n_syncs; i++) {
    int32_t t = P->syncs[i].tensor ? sg__tensor_lookup(g, P->syncs[i].tensor) : -1;
    if (t >= 0) barrier[t] = 1;
  }
  sg_status cs = sg__model_compile(d, g, barrier);
  sg__free(barrier);
  SG_CHECK(cs);
  /* One copy: the world is the group, and its collectives are the
   * communicator's own; with replicas, a group of world ranks. */
  if (D == 1) sg__xfer_sched_init(&m->xctx, d, NULL, 0, 0, "tensor", &m->xfer);
  else sg__xfer_sched_init(&m->xctx, d, m->group, T, m->index, "tensor", &m->xfer);
  sg__xfer_sched_init(&m->rctx, d, m->replicas, D, m->replica, "replica", &m->rxfer);
  SG_CHECK(sg__tp_runner_create(d->s, &m->xfer, P->syncs, P->n_syncs, &P->tp));
  if (D > 1 || m->micro > 1) SG_CHECK(find_grads(d));
  return SG_OK;
}

void sg__tensor_free_share(sg_dist *d) {
  sg__par_tensor *m = TENSOR(d);
  sg__free(m->flat);
  sg__free(m->grad_addr);
  sg__free(m->grad_count);
  m->flat = NULL, m->grad_addr = NULL, m->grad_count = NULL;
  m->n_grads = 0, m->n_flat = 0;
  sg__tp_runner_destroy(m->tp);
  m->tp = NULL;
  sg__model_release_session(d); /* before the graph it was compiled from */
  sg__tp_syncs_free(m->syncs, m->n_syncs);
  m->syncs = NULL;
  m->n_syncs = 0;
  sg_graph_destroy(m->tp_g);
  m->tp_g = NULL;
  d->g = NULL;
  sg__xfer_sched_free(&m->m.xctx);
  sg__xfer_sched_free(&m->m.rctx);
}

static sg_status tensor_build(sg_dist *d, const sg__par_create_args *a) {
  SG_CHECK(sg__model_prepare(d, a));
  sg__par_tensor *P = TENSOR(d);
  sg__par_model *m = &P->m;
  SG_CHECK(sg__model_keep_optimizer(m, a->opt));
  SG_CHECK(sg__model_read_heal(d));
  sg_tensor loss;
  SG_CHECK(sg_graph_find_tensor(m->fwd, m->loss_name, &loss));
  SG_CHECK(sg__model_place(d, m->tensor)); /* rank = replica * T + share */
  if (m->micro > 1) SG_CHECK(sg__pp_micro_forward(m->fwd, loss, m->micro, &P->micro_g, &P->batch));
  SG_CHECK(sg__tensor_build_share(d));
  SG_CHECK(sg__model_list_inputs(m, d->g, a->opt->lr_input));
  /* Micro-batches: the whole batch of each batched input is kept (or bound)
   * and cut at every step; a healing group keeps every input, for a share built again. */
  for (int i = 0; i < m->n_inputs; i++) {
    sg__model_input *in = &m->inputs[i];
    in->batched = m->micro > 1 && in->here && in->ndim >= 1 && in->dims[0] == P->batch;
    if ((in->batched || m->heal.on) && (in->copy = sg__malloc(in->bytes ? in->bytes : 1)) == NULL)
      return sg__error(SG_ERR_NO_MEMORY, "sg_dist_create_model: out of memory for input '%s'", in->name);
  }
  return SG_OK;
}

/* Micro-batch j of every batched input into the session. */
static sg_status feed_micro(sg_dist *d, int j) {
  const sg__par_tensor *P = TENSOR(d);
  const sg__par_model *m = &P->m;
  for (int i = 0; i < m->n_inputs; i++) {
    const sg__model_input *in = &m->inputs[i];
    if (!in->batched) continue;
    int64_t dims[SG_MAX_DIMS];
    memcpy(dims, in->dims, sizeof dims);
    dims[0] = P->batch / m->micro;
    size_t part = in->bytes / (size_t)m->micro;
    SG_CHECK(sg_session_set_input(d->s, in->name, in->dtype, in->ndim, dims,
                                  (const char *)in->src + (size_t)j * part));
  }
  return SG_OK;
}

/* With replicas or micro-batches: forward and backward per micro-batch (the
 * group's syncs run in the hooks), the gradients added up, averaged over the
 * micro-batches and the copies of this share (one allreduce: every copy gets
 * the same bits), then the updates. *loss: the micro-batches' mean.
 * Micro-batch j of copy r is micro-batch g = r * M + j of the step and draws
 * its dropout masks from stream g + 1, as a pipeline's (pp_run.c): the
 * masks of one process that accumulates the D * M micro-batches in that
 * order, and every share of the group draws the same stream, so a dropout on
 * a whole tensor keeps one mask across the group. */
static sg_status accumulated_step(sg_dist *d, float *loss) {
  sg__par_tensor *m = TENSOR(d);
  int M = m->m.micro;
  if (m->m.data > 1 && !m->m.broadcast_done) {
    SG_CHECK(sg__model_broadcast_state(d, NULL, 0)); /* in the group of copies of this share */
    m->m.broadcast_done = true;
  }
  double loss_sum = 0;
  for (int j = 0; j < M; j++) {
    if (M > 1) SG_CHECK(feed_micro(d, j));
    uint64_t stream = (uint64_t)m->m.replica * (uint64_t)M + (uint64_t)j + 1;
    SG_CHECK(sg__tp_runner_run(m->tp, 0, m->upd_pos, stream, false));
    size_t off = 0;
    for (int i = 0; i < m->n_grads; i++) {
      if (j == 0) memcpy(m->flat + off, m->grad_addr[i], m->grad_count[i] * sizeof(float));
      else
        for (size_t k = 0; k < m->grad_count[i]; k++) m->flat[off + k] += m->grad_addr[i][k];
      off += m->grad_count[i];
    }
    float l = NAN;
    SG_CHECK(sg_session_read(d->s, m->m.loss_name, &l, sizeof l));
    loss_sum += l;
  }
  if (m->m.data > 1)
    SG_CHECK(m->m.rxfer.allreduce(m->m.rxfer.ctx, m->flat, m->n_flat, SG_F32, SG_REDUCE_SUM));
  size_t off = 0;
  float copies = (float)m->m.data * (float)M;
  for (int i = 0; i < m->n_grads; i++)
    for (size_t k = 0; k < m->grad_count[i]; k++) m->grad_addr[i][k] = m->flat[off++] / copies;
  SG_CHECK(sg__tp_runner_run(m->tp, m->upd_pos, m->n_order, 0, true)); /* counts the whole step */
  *loss = (float)(loss_sum / M);
  return SG_OK;
}

sg_status sg__tensor_part_step(sg_dist *d, float *loss) {
  SG_CHECK(sg__dist_inject_step(d, d->stats.steps)); /* kill, stop, ...: where a real failure would hit */
  if (MODEL(d)->data > 1 || MODEL(d)->micro > 1) return accumulated_step(d, loss);
  SG_CHECK(sg__tp_runner_step(TENSOR(d)->tp));
  return sg_session_read(d->s, MODEL(d)->loss_name, loss, sizeof *loss);
}

/* Every share of a copy holds its copy's loss: with replicas the world's sum counts each T times. A
 * healing group copies each share's state after each step and heals a lost rank (model_heal.c,
 * tp_heal.c). */
static sg_status tensor_step(sg_dist *d) {
  const sg__par_model *m = MODEL(d);
  if (m->heal.on) return sg__model_heal_step(d, &sg__tp_heal_ops, m->data > 1);
  return sg__model_step(d, sg__tensor_part_step, m->data > 1, m->data * m->tensor);
}

/* The runner's transfers are jobs of the scheduler: it goes while the scheduler runs (destroy's
 * quiesce), or after it stopped (a failed create). Idempotent. */
static void tensor_free(sg_dist *d) {
  sg__par_tensor *m = TENSOR(d);
  sg__tensor_free_share(d);
  sg_graph_destroy(m->micro_g);
  m->micro_g = NULL;
  sg__model_release(d);
}

static sg_status tensor_set_input(sg_dist *d, const char *name, sg_dtype dtype, int ndim, const int64_t *dims,
                                  void *data, bool copy) {
  sg__model_input *in;
  SG_CHECK(sg__model_check_input(d, copy ? "sg_dist_set_input" : "sg_dist_bind_input", name, dtype, ndim,
                                 dims, data, &in));
  if (in == NULL) return SG_OK;
  if (in->copy != NULL) { /* micro-batches cut it at every step (feed_micro); a healing group keeps it */
    if (copy) memcpy(in->copy, data, in->bytes);
    in->src = copy ? in->copy : data;
    if (in->batched) return SG_OK;
  }
  return copy ? sg_session_set_input(d->s, name, dtype, ndim, dims, data)
              : sg_session_bind_input(d->s, name, dtype, ndim, dims, data);
}

static sg_status tensor_read(const sg_dist *d, const char *name, void *out, size_t bytes) {
  return sg_session_read(d->s, name, out, bytes);
}

static sg_status tensor_params_hash(const sg_dist *d, uint64_t *out) {
  return sg__model_params_hash(d, NULL, 0, out);
}

const sg__par_strategy sg__par_tensor_strategy = {
    .name = "tensor",
    .id = 2,
    .impl_bytes = sizeof(sg__par_tensor),
    .build = tensor_build,
    .set_input = tensor_set_input,
    .step = tensor_step,
    .read = tensor_read,
    .params_hash = tensor_params_hash,
    .quiesce = tensor_free,
    .free = tensor_free,
    .sched_fini = sg__model_sched_fini,
};
