/* The pipeline strategy (sg_dist_create_model with pipeline > 1, model.h):
 * rank k builds stage k of the forward graph (pp_split.c), appends the
 * optimizer, compiles with the updates last and drives the stage with the
 * 1F1B runner (pp_run.c) over the scheduler's transport (xfer_sched.c).
 * With tensor > 1 each stage is a tensor group: its ranks build their shares
 * of the stage (pp_tp.c) and the runner's passes allreduce the split's partial
 * results over the group (tp_run.c's hooks). */
#include <math.h>
#include <string.h>

#include "graph/graph.h"
#include "parallel/model.h"
#include "runtime/hooks.h"
#include "sgrt/partition.h"

/* Stages of equal op counts, in op order (the graph's ops are in a
 * topological order, so every edge goes forward). */
static void spread(int32_t n_ops, int stages, int *stage_of) {
  for (int32_t k = 0; k < n_ops; k++) stage_of[k] = (int)((int64_t)k * stages / n_ops);
}

static int count_ops(const int *stage_of, int32_t n_ops, int k) {
  int n = 0;
  for (int32_t i = 0; i < n_ops; i++) n += stage_of[i] == k;
  return n;
}

/* The partitioner's pipeline mode (METIS and acyclic refinement). */
static sg_status from_metis(const sg_graph *fwd, int stages, int *stage_of) {
  sg_partition_params pp = SG_PARTITION_PARAMS_INIT;
  pp.parts = stages;
  pp.mode = SG_PARTITION_PIPELINE;
  sg_partition *part;
  SG_CHECK(sg_partition_create(fwd, &pp, NULL, &part));
  sg_status st = sg__pp_stages_from_partition(part, sg_graph_num_ops(fwd), stage_of);
  sg_partition_destroy(part);
  return st;
}

/* The stages from the partitioner when it gives K stages that the split
 * accepts on every rank; otherwise evenly by op count. The ranks agree
 * through one allreduce, since a split can fail on one stage only (one that
 * sends nothing). */
static sg_status choose_stages(sg_dist *d, sg__pp_built *b) {
  sg__par_pipeline *P = PIPELINE(d);
  sg__par_model *m = &P->m;
  const sg_graph *fwd = m->fwd;
  int32_t n_ops = sg_graph_num_ops(fwd);
  int K = m->pipeline, k = sg__pipeline_stage(m);
  P->stage_of_op = sg__calloc((size_t)n_ops + 1, sizeof *P->stage_of_op);
  if (P->stage_of_op == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_dist_create_model: out of memory");
  sg_status st_metis = from_metis(fwd, K, P->stage_of_op);
  if (st_metis == SG_OK) st_metis = sg__pipeline_split(d, P->stage_of_op, K, b);
  if (st_metis == SG_ERR_NO_MEMORY) return st_metis;
  int64_t ok = st_metis == SG_OK;
  sg_status cst = sg__dist_world_allreduce(d, &ok, 1, SG_I64, SG_REDUCE_MIN);
  if (cst != SG_OK) return cst;
  if (ok) {
    P->metis = true;
    SG_INFO("rank %d: pipeline stage %d of %d from the partitioner (%d ops of %d)", d->rank, k, K,
            count_ops(P->stage_of_op, n_ops, k), n_ops);
    return SG_OK;
  }
  sg__pp_built_free(b);
  spread(n_ops, K, P->stage_of_op);
  SG_INFO("rank %d: pipeline stage %d of %d by op count (%d ops of %d): the partitioner's stages were not "
          "usable on every rank",
          d->rank, k, K, count_ops(P->stage_of_op, n_ops, k), n_ops);
  return sg__pipeline_split(d, P->stage_of_op, K, b);
}

sg_status sg__pipeline_transports(sg_dist *d) {
  sg__par_pipeline *P = PIPELINE(d);
  sg__par_model *m = &P->m;
  int K = m->pipeline, T = m->tensor;
  sg__xfer_sched_free(&m->xctx);
  sg__xfer_sched_free(&m->rctx);
  sg__xfer_sched_free(&P->tctx);
  sg__xfer_sched_init(&m->xctx, d, m->group, K * T, m->index, "pipeline", &m->xfer);
  sg__xfer_sched_init(&m->rctx, d, m->replicas, m->data, m->replica, "replica", &m->rxfer);
  if (T == 1) return SG_OK;
  if (P->tgroup == NULL && (P->tgroup = sg__calloc((size_t)T, sizeof *P->tgroup)) == NULL)
    return sg__error(SG_ERR_NO_MEMORY, "sg_dist_create_model: out of memory");
  for (int j = 0; j < T; j++) P->tgroup[j] = m->group[sg__pipeline_stage(m) * T + j];
  sg__xfer_sched_init(&P->tctx, d, P->tgroup, T, sg__pipeline_share(m), "tensor", &P->txfer);
  return SG_OK;
}

sg_status sg__pipeline_split(sg_dist *d, const int *cut, int stages, sg__pp_built *b) {
  const sg__par_model *m = MODEL(d);
  sg_tensor loss = {sg__tensor_lookup(m->fwd, m->loss_name)};
  return sg__pp_split_tp(m->fwd, loss, cut, stages, sg__pipeline_stage(m), m->micro, m->tensor,
                         sg__pipeline_share(m), &b->st, &b->syncs, &b->n_syncs);
}

/* A share's fusion barrier: the model's, and the partial sums its hooks allreduce right after their
 * producers. NULL when out of memory. */
static uint8_t *share_barrier(const sg__pp_built *b) {
  uint8_t *barrier = sg__model_fuse_barrier(b->st->g);
  for (int i = 0; i < b->n_syncs && barrier != NULL; i++) {
    int32_t t = b->syncs[i].tensor ? sg__tensor_lookup(b->st->g, b->syncs[i].tensor) : -1;
    if (t >= 0) barrier[t] = 1;
  }
  return barrier;
}

sg_status sg__pipeline_finish_stage(sg_dist *d, sg__pp_built *b) {
  sg__par_pipeline *P = PIPELINE(d);
  sg__par_model *m = &P->m;
  SG_CHECK(sg__model_add_optimizer(b->st->g, &m->opt));
  if (b->n_syncs > 0) SG_CHECK(sg__tp_resolve_backward(b->st->g, b->syncs, b->n_syncs));
  uint8_t *barrier = share_barrier(b);
  if (barrier == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_dist_create_model: out of memory");
  sg_status cs = sg__model_new_session(d, b->st->g, barrier, &b->s);
  sg__free(barrier);
  SG_CHECK(cs);
  /* The neighbours are the same share of the stages before and after (every share holds the boundary
   * tensors whole). */
  sg__pp_dp dp = {&m->rxfer, m->replica, m->data};
  int T = m->tensor;
  SG_CHECK(sg__pp_runner_create(b->st, b->s, &m->xfer, m->index - T, m->index + T, &dp, &b->pp));
  if (T == 1) return SG_OK;
  SG_CHECK(sg__tp_runner_create(b->s, &P->txfer, b->syncs, b->n_syncs, &b->tp));
  sg__pp_runner_set_hooks(b->pp, sg__tp_runner_hooks(b->tp));
  return SG_OK;
}

sg_status sg__pipeline_install(sg_dist *d, const int *cut, sg__pp_built *b, uint64_t tag_step) {
  sg__par_pipeline *P = PIPELINE(d);
  b->pp->step = tag_step;
  sg__pp_runner_destroy(P->pp);
  sg__tp_runner_destroy(P->tp);
  sg__model_release_session(d); /* before the stage graph it was compiled from */
  sg__pp_stage_destroy(P->st);
  sg__tp_syncs_free(P->syncs, P->n_syncs);
  P->st = b->st;
  P->pp = b->pp;
  P->tp = b->tp;
  P->syncs = b->syncs;
  P->n_syncs = b->n_syncs;
  P->m.part_session = d->s = b->s;
  d->g = P->st->g;
  *b = (sg__pp_built){0};
  memcpy(P->stage_of_op, cut, (size_t)sg_graph_num_ops(P->m.fwd) * sizeof *cut);
  P->busy_sum = 0;
  P->busy_steps = 0;
  return sg__pipeline_bind_inputs(d, true);
}

void sg__pp_built_free(sg__pp_built *b) {
  sg__pp_runner_destroy(b->pp);
  sg__tp_runner_destroy(b->tp);
  sg_session_destroy(b->s); /* before the stage graph it was compiled from */
  sg__pp_stage_destroy(b->st);
  sg__tp_syncs_free(b->syncs, b->n_syncs);
  *b = (sg__pp_built){0};
}

sg_status sg__pipeline_bind_inputs(sg_dist *d, bool resend) {
  sg__par_pipeline *P = PIPELINE(d);
  sg__par_model *m = &P->m;
  const sg__pp_stage *st = P->st;
  for (int i = 0; i < m->n_inputs; i++) {
    sg__model_input *in = &m->inputs[i];
    int32_t t = sg__tensor_lookup(st->g, in->name);
    in->here = t >= 0 && st->g->tensors[t].role == SG_ROLE_INPUT;
    in->batched = false;
    for (int j = 0; j < st->n_inputs; j++)
      if (st->inputs[j] == t && st->batched[j]) in->batched = in->here;
    if (resend && in->here && in->src != NULL)
      SG_CHECK(sg__pp_set_input(P->pp, in->name, in->src, in->bytes));
  }
  return SG_OK;
}

static sg_status pipeline_build(sg_dist *d, const sg__par_create_args *a) {
  SG_CHECK(sg__model_prepare(d, a));
  sg__par_pipeline *P = PIPELINE(d);
  sg__par_model *m = &P->m;
  SG_CHECK(sg__model_keep_optimizer(m, a->opt));
  SG_CHECK(sg__model_read_heal(d));
  int K = m->pipeline, T = m->tensor;
  SG_CHECK(sg__model_place(d, K * T)); /* rank = replica * K * T + stage * T + share */
  SG_CHECK(sg__pipeline_transports(d));
  sg__pp_built b = {0};
  sg_status st = choose_stages(d, &b);
  if (st == SG_OK) st = sg__pipeline_finish_stage(d, &b);
  /* Owned from here on, even half made: pipeline_free frees them. */
  P->st = b.st;
  P->pp = b.pp;
  P->tp = b.tp;
  P->syncs = b.syncs;
  P->n_syncs = b.n_syncs;
  m->part_session = d->s = b.s;
  d->g = P->st != NULL ? P->st->g : NULL;
  SG_CHECK(st);
  SG_CHECK(sg__model_list_inputs(m, P->st->g, a->opt->lr_input));
  SG_CHECK(sg__pipeline_bind_inputs(d, false));
  /* Each step sums over the world: the ranks whose profile fired, each stage's busy time. */
  m->n_step_sums = 1 + K;
  m->step_sums = sg__calloc((size_t)m->n_step_sums, sizeof *m->step_sums);
  int32_t n_ops = sg_graph_num_ops(m->fwd);
  P->cost = sg__calloc((size_t)n_ops + 1, sizeof *P->cost);
  if (m->step_sums == NULL || P->cost == NULL)
    return sg__error(SG_ERR_NO_MEMORY, "sg_dist_create_model: out of memory");
  for (int32_t o = 0; o < n_ops; o++) {
    double flops, bytes;
    SG_CHECK(sg_partition_op_cost(m->fwd, o, &flops, &bytes));
    /* A roofline time on a typical core (100 GFLOP/s, 20 GB/s): only the ratios matter. */
    P->cost[o] = fmax(flops / 1e11, bytes / 2e10);
  }
  return SG_OK;
}

sg_status sg__pipeline_part_step(sg_dist *d, float *loss) {
  sg__par_pipeline *P = PIPELINE(d);
  if (P->m.data > 1 && !P->m.broadcast_done) {
    /* The state may be set between create and the first step on replica 0
     * alone. The stage's received activations are parameters only to get
     * their gradient: nothing to send. */
    SG_CHECK(sg__model_broadcast_state(d, P->st->recv, P->st->n_recv));
    P->m.broadcast_done = true;
  }
  SG_CHECK(sg__dist_inject_step(d, d->stats.steps)); /* kill, stop, ...: where a real failure would hit */
  if (d->heal.inject != NULL)
    sg__pp_runner_set_slow(P->pp, sg_fault_plan_slow_factor(d->heal.inject, d->orig_rank, (int64_t)d->step));
  SG_CHECK(sg__pp_step(P->pp, loss));
  sg__pp_stats ps;
  sg__pp_runner_stats(P->pp, &ps);
  P->busy_sum += ps.busy_ms;
  P->busy_steps++;
  sg__par_model *m = &P->m;
  memset(m->step_sums, 0, (size_t)m->n_step_sums * sizeof *m->step_sums);
  m->step_sums[0] = d->stats.repartition_due ? 1.0f : 0.0f;
  m->step_sums[1 + sg__pipeline_stage(m)] = (float)(P->busy_sum / P->busy_steps);
  return SG_OK;
}

/* Only the last stage has the loss (each of its shares): the world's sum over the replicas and shares. A
 * healing pipeline copies its stages' state after each step and heals a lost rank (model_heal.c,
 * pp_heal.c; stages that are tensor groups: pptp_heal.c, until they are down to one share). */
static sg_status pipeline_step(sg_dist *d) {
  if (MODEL(d)->heal.on)
    return sg__model_heal_step(d, MODEL(d)->tensor > 1 ? &sg__pptp_heal_ops : &sg__pp_heal_ops, true);
  SG_CHECK(sg__model_step(d, sg__pipeline_part_step, true, MODEL(d)->data * MODEL(d)->tensor));
  return sg__pipeline_maybe_replan(d);
}

/* The runner's transfers are jobs of the scheduler: it goes while the scheduler runs (destroy's
 * quiesce), or after it stopped (a failed create). Idempotent. */
static void pipeline_free(sg_dist *d) {
  sg__par_pipeline *P = PIPELINE(d);
  sg__pp_runner_destroy(P->pp);
  P->pp = NULL;
  sg__tp_runner_destroy(P->tp);
  P->tp = NULL;
  sg__model_release_session(d); /* before the stage graph it was compiled from */
  sg__pp_stage_destroy(P->st);
  P->st = NULL;
  sg__tp_syncs_free(P->syncs, P->n_syncs);
  P->syncs = NULL;
  P->n_syncs = 0;
  sg__xfer_sched_free(&P->tctx);
  sg__free(P->tgroup);
  P->tgroup = NULL;
  sg__free(P->stage_of_op);
  P->stage_of_op = NULL;
  sg__free(P->cost);
  P->cost = NULL;
  sg__model_release(d);
}

/* Every rank keeps what each input was last set to (a copy, or the caller's
 * bound buffer), read here or not: a re-cut may give its stage another input. */
static sg_status pipeline_set_input(sg_dist *d, const char *name, sg_dtype dtype, int ndim,
                                    const int64_t *dims, void *data, bool copy) {
  sg__model_input *here;
  SG_CHECK(sg__model_check_input(d, copy ? "sg_dist_set_input" : "sg_dist_bind_input", name, dtype, ndim,
                                 dims, data, &here));
  sg__model_input *in = sg__model_find_input(MODEL(d), name);
  if (copy) {
    if (in->copy == NULL && (in->copy = sg__malloc(in->bytes ? in->bytes : 1)) == NULL)
      return sg__error(SG_ERR_NO_MEMORY, "sg_dist_set_input: out of memory for input '%s'", name);
    memcpy(in->copy, data, in->bytes);
  }
  /* The runner reads a batched input during the step: the copy, as sg_session_set_input would keep one. */
  in->src = copy ? in->copy : data;
  if (here == NULL) return SG_OK; /* another stage reads it */
  return sg__pp_set_input(PIPELINE(d)->pp, name, in->src, in->bytes);
}

/* The stage that holds tensor `name` of the source graph, -1 when none. */
static int stage_of(const sg__par_pipeline *P, const char *name) {
  const sg_graph *g = P->m.fwd;
  char buf[SG__MAX_NAME];
  if (strlen(name) >= sizeof buf) return -1;
  strcpy(buf, name);
  /* "<param>.grad", "<param>.momentum_buffer": the stage of the parameter. */
  int32_t t;
  while ((t = sg__tensor_lookup(g, buf)) < 0) {
    char *dot = strrchr(buf, '.');
    if (dot == NULL) return -1;
    *dot = '\0';
  }
  if (g->tensors[t].producer >= 0) return P->stage_of_op[g->tensors[t].producer];
  for (uint32_t o = 0; o < g->n_ops; o++)
    for (int i = 0; i < g->ops[o].n_inputs; i++)
      if (g->ops[o].inputs[i] == t) return P->stage_of_op[o];
  return -1;
}

static sg_status pipeline_read(const sg_dist *d, const char *name, void *out, size_t bytes) {
  const sg__par_pipeline *P = PIPELINE(d);
  sg_tensor t;
  int k = stage_of(P, name);
  if (sg_graph_find_tensor(d->g, name, &t) != SG_OK && k >= 0 && k != P->st->stage)
    return sg__error(
        SG_ERR_NOT_FOUND, "sg_dist_read: '%s' is on pipeline stage %d (rank %d); this rank runs stage %d",
        name, k, (P->m.replica * P->m.pipeline + k) * P->m.tensor + sg__pipeline_share(&P->m), P->st->stage);
  return sg_session_read(d->s, name, out, bytes);
}

/* A stage's received activations are parameters only to get their gradient. */
static sg_status pipeline_params_hash(const sg_dist *d, uint64_t *out) {
  const sg__par_pipeline *P = PIPELINE(d);
  return sg__model_params_hash(d, P->st->recv, P->st->n_recv, out);
}

const sg__par_strategy sg__par_pipeline_strategy = {
    .name = "pipeline",
    .id = 1,
    .impl_bytes = sizeof(sg__par_pipeline),
    .build = pipeline_build,
    .set_input = pipeline_set_input,
    .step = pipeline_step,
    .read = pipeline_read,
    .params_hash = pipeline_params_hash,
    .quiesce = pipeline_free,
    .free = pipeline_free,
    .sched_fini = sg__model_sched_fini,
};
