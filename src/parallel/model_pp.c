/* sg_dist_create_model's pipeline mode (model.h): rank k builds stage k of
 * the forward graph (pp_split.c), appends the optimizer, compiles with the
 * updates last and drives the stage with the 1F1B runner (pp_run.c) over
 * the scheduler's transport (xfer_sched.c). */
#include <math.h>
#include <string.h>

#include "graph/graph.h"
#include "parallel/model.h"
#include "runtime/hooks.h"

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
static sg_status choose_stages(sg_dist *d, sg_tensor loss) {
  sg__dist_model *m = MODEL(d);
  const sg_graph *fwd = m->fwd;
  int32_t n_ops = sg_graph_num_ops(fwd);
  int K = m->pipeline, k = m->stage;
  m->stage_of_op = sg__calloc((size_t)n_ops + 1, sizeof *m->stage_of_op);
  if (m->stage_of_op == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_dist_create_model: out of memory");
  sg__pp_stage *st = NULL;
  sg_status st_metis = from_metis(fwd, K, m->stage_of_op);
  if (st_metis == SG_OK) st_metis = sg__pp_split(fwd, loss, m->stage_of_op, n_ops, K, k, m->micro, &st);
  if (st_metis == SG_ERR_NO_MEMORY) return st_metis;
  int64_t ok = st_metis == SG_OK;
  sg_status cst = sg__dist_world_allreduce(d, &ok, 1, SG_I64, SG_REDUCE_MIN);
  if (cst != SG_OK) {
    sg__pp_stage_destroy(st);
    return cst;
  }
  if (ok) {
    m->metis = true;
    m->st = st;
    SG_INFO("rank %d: pipeline stage %d of %d from the partitioner (%d ops of %d)", d->rank, k, K,
            count_ops(m->stage_of_op, n_ops, k), n_ops);
    return SG_OK;
  }
  sg__pp_stage_destroy(st);
  spread(n_ops, K, m->stage_of_op);
  SG_INFO("rank %d: pipeline stage %d of %d by op count (%d ops of %d): the partitioner's stages were not "
          "usable on every rank",
          d->rank, k, K, count_ops(m->stage_of_op, n_ops, k), n_ops);
  return sg__pp_split(fwd, loss, m->stage_of_op, n_ops, K, k, m->micro, &m->st);
}

sg_status sg__model_pp_build(sg_dist *d, const sg_dist_optimizer *opt) {
  sg__dist_model *m = MODEL(d);
  sg_tensor loss;
  SG_CHECK(sg_graph_find_tensor(m->fwd, m->loss_name, &loss));
  /* Rank layout (dist.h): rank = replica * K + stage. */
  int K = m->pipeline, D = m->data;
  m->stage = d->rank % K;
  m->replica = d->rank / K;
  m->group = sg__calloc((size_t)K, sizeof *m->group);
  m->replicas = sg__calloc((size_t)D, sizeof *m->replicas);
  if (m->group == NULL || m->replicas == NULL)
    return sg__error(SG_ERR_NO_MEMORY, "sg_dist_create_model: out of memory");
  for (int j = 0; j < K; j++) m->group[j] = m->replica * K + j;
  for (int e = 0; e < D; e++) m->replicas[e] = e * K + m->stage;
  SG_CHECK(choose_stages(d, loss));
  sg__pp_stage *st = m->st;
  SG_CHECK(sg__model_add_optimizer(st->g, opt));
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sp.device = d->p.device;
  sp.threads = d->p.threads;
  sp.seed = d->p.seed;
  SG_CHECK(sg_session_create(st->g, &sp, &m->part_session));
  d->s = m->part_session;
  d->g = st->g;
  SG_CHECK(sg__session_set_updates_last(d->s, true));
  SG_CHECK(sg_session_compile(d->s));
  /* The transports' ranks are member indices: the stage in the pipeline,
   * the replica among the stage's copies. */
  sg__xfer_sched_init(&m->xctx, d, m->group, K, m->stage, "pipeline", &m->xfer);
  sg__xfer_sched_init(&m->rctx, d, m->replicas, D, m->replica, "replica", &m->rxfer);
  sg__pp_dp dp = {&m->rxfer, m->replica, D};
  SG_CHECK(sg__pp_runner_create(st, d->s, &m->xfer, m->stage - 1, m->stage + 1, &dp, &m->pp));
  SG_CHECK(sg__model_list_inputs(m, st->g, opt->lr_input));
  for (int i = 0; i < m->n_inputs; i++) {
    sg__model_input *in = &m->inputs[i];
    int32_t t = sg__tensor_lookup(st->g, in->name);
    for (int j = 0; j < st->n_inputs; j++)
      if (st->inputs[j] == t && st->batched[j]) in->batched = true;
    if (in->batched && (in->copy = sg__malloc(in->bytes ? in->bytes : 1)) == NULL)
      return sg__error(SG_ERR_NO_MEMORY, "sg_dist_create_model: out of memory for input '%s'", in->name);
  }
  return SG_OK;
}

sg_status sg__model_pp_step(sg_dist *d, float *loss) {
  sg__dist_model *m = MODEL(d);
  if (m->data > 1 && !m->broadcast_done) {
    /* The state may be set between create and the first step on replica 0
     * alone. The stage's received activations are parameters only to get
     * their gradient: nothing to send. */
    SG_CHECK(sg__model_broadcast_state(d, m->st->recv, m->st->n_recv));
    m->broadcast_done = true;
  }
  return sg__pp_step(m->pp, loss);
}

void sg__model_pp_free(sg__dist_model *m) {
  sg__pp_runner_destroy(m->pp);
  m->pp = NULL;
  /* The session before the stage graph it was compiled from. */
  sg_session_destroy(m->part_session);
  m->part_session = NULL;
  sg__pp_stage_destroy(m->st);
  m->st = NULL;
  sg__free(m->stage_of_op);
  m->stage_of_op = NULL;
  sg__xfer_sched_free(&m->rctx);
  sg__free(m->replicas);
  m->replicas = NULL;
}

int sg__model_pp_stage_of(const sg__dist_model *m, const char *name) {
  const sg_graph *g = m->fwd;
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
  if (g->tensors[t].producer >= 0) return m->stage_of_op[g->tensors[t].producer];
  for (uint32_t o = 0; o < g->n_ops; o++)
    for (int i = 0; i < g->ops[o].n_inputs; i++)
      if (g->ops[o].inputs[i] == t) return m->stage_of_op[o];
  return -1;
}
