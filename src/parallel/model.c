/* sg_dist_create_model (include/sgrt/dist.h): checks, the choice of mode,
 * and what the pipeline (model_pp.c) and tensor (model_tp.c) strategies
 * share: the model's inputs, the check that every rank runs the same job,
 * the rank's place and session, a step's skeleton and the parameters'
 * digest. Data parallelism needs nothing of this: the training graph is
 * built here and handed to sg_dist_create. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "graph/graph.h"
#include "parallel/model.h"
#include "runtime/hooks.h"
#include "sgrt/train.h"

sg_dist_optimizer sg_dist_optimizer_init(void) { return (sg_dist_optimizer)SG_DIST_OPTIMIZER_INIT; }

/* ---- checks ------------------------------------------------------------------ */

static const char *FN = "sg_dist_create_model";

/* Reads the caller's optimizer (NULL: the defaults) as far as its size goes, and checks it. */
static sg_status read_opt(const sg_dist_optimizer *given, sg_dist_optimizer *o) {
  const sg__versioned v = SG__VERSIONED(sg_dist_optimizer, kind, "SG_DIST_OPTIMIZER_INIT");
  *o = (sg_dist_optimizer)SG_DIST_OPTIMIZER_INIT;
  if (given != NULL && given->size < v.min_size)
    return sg__error(
        SG_ERR_INVALID_ARG,
        "%s: opt->size is %zu; this library reads sg_dist_optimizer of %zu..%zu bytes (initialise "
        "it from SG_DIST_OPTIMIZER_INIT)",
        FN, given->size, v.min_size, v.max_size);
  SG_CHECK(sg__params_read(FN, v, o, given));
  if (o->kind != SG_DIST_OPT_SGD && o->kind != SG_DIST_OPT_ADAMW)
    return sg__error(SG_ERR_INVALID_ARG, "%s: opt->kind is %d; SG_DIST_OPT_SGD (1) or SG_DIST_OPT_ADAMW (2)",
                     FN, o->kind);
  if (o->lr_input == NULL || o->lr_input[0] == '\0')
    return sg__error(SG_ERR_INVALID_ARG, "%s: opt->lr_input is empty; name the learning-rate input", FN);
  return SG_OK;
}

/* The forward graph: finalized, without gradients or optimizer, and a loss of one f32 element. */
static sg_status check_fwd(const sg_graph *g, sg_tensor loss) {
  if (!g->finalized) return sg__error(SG_ERR_STATE, "%s: finalize the forward graph first", FN);
  for (uint32_t t = 0; t < g->n_tensors; t++) {
    sg_role r = g->tensors[t].role;
    if (r == SG_ROLE_GRADIENT || r == SG_ROLE_OPTIMIZER_STATE)
      return sg__error(SG_ERR_STATE,
                       "%s: the graph is not forward-only: tensor '%s' is a %s (pass the forward graph; "
                       "backward and the optimizer are added per rank)",
                       FN, g->tensors[t].name, sg_role_name(r));
  }
  if (loss.id < 0 || (uint32_t)loss.id >= g->n_tensors)
    return sg__error(SG_ERR_INVALID_ARG, "%s: loss %d is not a tensor of the graph (%u tensors)", FN, loss.id,
                     g->n_tensors);
  const sg__tensor *x = &g->tensors[loss.id];
  if (x->dtype != SG_F32 || x->nbytes != 4)
    return sg__error(SG_ERR_INVALID_ARG, "%s: loss '%s' must be one f32 element", FN, x->name);
  return SG_OK;
}

/* The faults a model strategy honours: a pipeline slow ones (its profile re-cuts the stages), and with
 * heal both the losses they heal from: kill, stop, drop-heartbeats and partition at a step, or a kill in a
 * recovery's phase. Device, hang, behind and drop-checkins faults need what only data parallelism has (a
 * GPU, hang diagnosis, rolling forward, check-ins). */
static bool model_fault_ok(const sg_fault *f, bool pipeline, bool heal) {
  if (f->kind == SG_FAULT_SLOW) return pipeline;
  if (f->phase == SG_RECOVERY_CREATE) return false; /* nothing is copied before the first step */
  return heal && (f->kind == SG_FAULT_KILL || f->kind == SG_FAULT_STOP ||
                  f->kind == SG_FAULT_DROP_HEARTBEATS || f->kind == SG_FAULT_PARTITION);
}

/* What only the pipeline and tensor modes read (sg__par_check_params
 * checked the rest; the data-parallel mode has sg_dist_create check its own). */
static sg_status check_params(const sg_dist_params *p) {
  if (p->pipeline > SG__PP_MAX_STAGES)
    return sg__error(SG_ERR_INVALID_ARG, "%s: pipeline is %d, must be 1..%d", FN, p->pipeline,
                     SG__PP_MAX_STAGES);
  if (p->micro_batches > SG__PP_MAX_MICRO)
    return sg__error(SG_ERR_INVALID_ARG, "%s: micro_batches is %d, must be 1..%d", FN, p->micro_batches,
                     SG__PP_MAX_MICRO);
  if (p->pipeline == 1 && p->tensor == 1) return SG_OK; /* sg_dist_create checks the rest */
  bool both = p->pipeline > 1 && p->tensor > 1;
  const char *mode = both ? "pipeline x tensor" : p->pipeline > 1 ? "pipeline" : "tensor";
  int deg = p->pipeline > 1 ? p->pipeline : p->tensor;
  char shape[64]; /* "pipeline=4", "pipeline=2, tensor=2": what the message's parentheses show */
  if (both) snprintf(shape, sizeof shape, "pipeline=%d, tensor=%d", p->pipeline, p->tensor);
  else snprintf(shape, sizeof shape, "%s=%d", mode, deg);
  if (p->sync_batch_norm != 0)
    return sg__error(SG_ERR_UNSUPPORTED,
                     "%s: sync_batch_norm %d with %s parallelism (%s): synchronized batch norm is data "
                     "parallelism's (pipeline 1, tensor 1)",
                     FN, p->sync_batch_norm, mode, shape);
  /* The inputs are the whole batch on every rank: there are no shards to feed. A pipeline or a tensor
   * group heals with heal = 1 (per-step copies of each part's state: model_heal.c). */
  if (p->feed != NULL)
    return sg__error(SG_ERR_UNSUPPORTED,
                     "%s: a feed callback is not supported with %s parallelism (%s): set feed to NULL and "
                     "heal to 1 to heal a lost rank",
                     FN, mode, shape);
  if (p->heal == 1) {
    sg_qos q = (sg_qos)p->qos;
    if (p->qos == -1) SG_CHECK(sg_qos_from_env(SG_QOS_STRICT, &q));
    if (q != SG_QOS_STRICT)
      return sg__error(
          SG_ERR_UNSUPPORTED,
          "%s: QoS tier %s%s with %s parallelism: it heals under strict QoS only (its parts have "
          "no other replica to continue on)",
          FN, sg_qos_name(q), p->qos == -1 ? " (from SG_QOS)" : "", mode);
  }
  if (sg__par_on_device(p))
    return sg__error(SG_ERR_UNSUPPORTED,
                     "%s: device '%s'%s: %s parallelism runs on device 'cpu' only for now (data parallelism "
                     "runs on GPUs: docs/cuda.md)",
                     FN, p->device ? p->device : "cpu",
                     sg__session_host_mirror_env() ? " with SG_HOST_MIRROR=1 (the GPU path)" : "", mode);
  if (p->zero != 0)
    return sg__error(SG_ERR_UNSUPPORTED,
                     "%s: zero %d (sharded optimizer state) is not supported with %s parallelism (%s)", FN,
                     p->zero, mode, shape);
  if (p->offload != NULL && strcmp(p->offload, "none") != 0)
    return sg__error(SG_ERR_UNSUPPORTED, "%s: offload '%s' is not supported with %s parallelism (%s)", FN,
                     p->offload, mode, shape);
  /* A pipeline takes slow faults (its profile re-cuts the stages), and with heal 1 both strategies take
   * the faults they survive; every other fault needs what they lack. Checked before joining, so that every
   * rank fails alone; the plan proper is read once the world is known. */
  const char *spec = p->inject != NULL ? p->inject : sg__dist_inject_env();
  bool recut = p->pipeline > 1 && p->tensor == 1; /* a pipeline of tensor groups is not re-cut */
  if (spec != NULL && !recut && p->heal != 1)
    return sg__error(SG_ERR_UNSUPPORTED,
                     "%s: fault injection (%s) is not supported with %s parallelism (%s) without heal 1: its "
                     "faults need self-healing",
                     FN, p->inject != NULL ? "sg_dist_params.inject" : "SG_INJECT", mode, shape);
  sg_fault_plan *plan = NULL;
  if (spec != NULL && sg_fault_plan_parse(spec, 65536, 0, &plan) == SG_OK) {
    for (size_t i = 0; i < sg_fault_plan_count(plan); i++) {
      sg_fault f;
      if (sg_fault_plan_get(plan, i, &f) != SG_OK || model_fault_ok(&f, recut, p->heal == 1)) continue;
      sg_fault_plan_destroy(plan);
      return sg__error(
          SG_ERR_UNSUPPORTED, "%s: fault %zu of %s ('%s%s') is not injected with %s parallelism%s: %s", FN, i,
          p->inject != NULL ? "sg_dist_params.inject" : "SG_INJECT", sg_fault_kind_name(f.kind),
          f.phase == SG_RECOVERY_CREATE ? " at=create" : "", mode, p->heal == 1 ? "" : " without heal",
          p->heal != 1 ? "it takes 'slow' only (the others need heal 1)"
          : recut      ? "it takes 'slow', 'kill', 'stop', 'drop-heartbeats' and 'partition' at a "
                         "step and 'kill' in a recovery's phase"
                       : "it takes 'kill', 'stop', 'drop-heartbeats' and 'partition' at a step "
                         "and 'kill' in a recovery's phase");
    }
  }
  sg_fault_plan_destroy(plan);
  sg_clear_error(); /* a malformed plan is reported where it is read */
  /* Hang diagnosis names a rank stuck in a collective; the runners'
   * transfers are point-to-point, which it does not cover yet. */
  if (p->hang_ms > 0)
    return sg__error(SG_ERR_UNSUPPORTED,
                     "%s: hang_ms %d: hang diagnosis is not supported with %s parallelism (%s); leave it 0 "
                     "or -1",
                     FN, p->hang_ms, mode, shape);
  return SG_OK;
}

/* D, K, T from the parameters and the world size, before joining: every
 * rank computes the same answer, so a mismatch fails everywhere at once and
 * nobody waits for a peer that gave up. */
static sg_status resolve_degrees(const sg_dist_params *p, int *D, int *K, int *T) {
  sg__comm_env env;
  SG_CHECK(sg__comm_env_resolve(p->comm, &env));
  int world = env.world_size;
  *K = p->pipeline, *T = p->tensor;
  *D = p->data == -1 ? world / (*K * *T) : p->data;
  if (p->data == -1 && (world % (*K * *T) != 0 || *D < 1))
    return sg__error(SG_ERR_INVALID_ARG,
                     "%s: pipeline %d x tensor %d = %d ranks does not divide the world of %d (data -1 takes "
                     "world / (pipeline x tensor))",
                     FN, *K, *T, *K * *T, world);
  if ((int64_t)*D * *K * *T != world)
    return sg__error(SG_ERR_INVALID_ARG,
                     "%s: data %d x pipeline %d x tensor %d = %lld ranks, but the world has %d", FN, *D, *K,
                     *T, (long long)*D * *K * *T, world);
  return SG_OK;
}

/* Tensor parallelism with M micro-batches cuts the batch (the first dim of
 * the first input of rank >= 1) into M equal parts, before joining. Each
 * micro-batch draws its own dropout stream (model_tp.c, pp_run.c). */
static sg_status check_tensor_micro(const sg_graph *g, int T, int M) {
  if (T == 1 || M == 1) return SG_OK;
  for (uint32_t i = 0; i < g->n_inputs; i++) {
    const sg__tensor *x = &g->tensors[g->inputs[i]];
    if (x->ndim < 1) continue;
    if (x->dims[0] % M != 0)
      return sg__error(
          SG_ERR_INVALID_ARG,
          "%s: the batch of %lld (first dim of input '%s') does not divide into micro_batches %d", FN,
          (long long)x->dims[0], x->name, M);
    return SG_OK;
  }
  return sg__error(SG_ERR_INVALID_ARG, "%s: micro_batches %d: the graph has no input with a batch dim", FN,
                   M);
}

sg_status sg__model_add_optimizer(sg_graph *g, const sg_dist_optimizer *opt) {
  sg_tensor lr;
  if (sg_graph_find_tensor(g, opt->lr_input, &lr) != SG_OK) {
    lr = sg_input(g, opt->lr_input, SG_F32, 0, NULL);
    SG_CHECK(sg_graph_status(g));
  }
  if (opt->kind == SG_DIST_OPT_ADAMW) SG_CHECK(sg_graph_add_adamw(g, lr, opt->adamw));
  else SG_CHECK(sg_graph_add_sgd(g, lr, opt->sgd));
  return sg_graph_finalize(g);
}

sg_status sg__model_broadcast_state(sg_dist *d, const int32_t *skip, int n_skip) {
  sg__par_model *m = MODEL(d);
  const sg_graph *g = d->g;
  for (uint32_t t = 0; t < g->n_tensors; t++) {
    sg_role r = g->tensors[t].role;
    if (r != SG_ROLE_PARAMETER && r != SG_ROLE_STATE && r != SG_ROLE_OPTIMIZER_STATE) continue;
    bool skipped = false;
    for (int j = 0; j < n_skip; j++) skipped |= skip[j] == (int32_t)t;
    size_t bytes = 0;
    void *addr = sg__session_tensor_addr(d->s, (int32_t)t, &bytes);
    if (skipped || addr == NULL) continue;
    SG_CHECK(sg__xfer_sched_bcast(&m->rctx, addr, bytes));
  }
  return SG_OK;
}

static sg_status mark_output(sg_graph *g, sg_tensor t) {
  for (uint32_t i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] == t.id) return SG_OK;
  return sg_graph_mark_output(g, t);
}

static sg_status add_input(sg__par_model *m, const sg_graph *part, const char *name, sg_dtype dtype, int ndim,
                           const int64_t *dims, size_t bytes) {
  sg__model_input *in = &m->inputs[m->n_inputs];
  *in = (sg__model_input){.dtype = dtype, .ndim = ndim, .bytes = bytes};
  if ((in->name = sg__strdup(name)) == NULL) return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", FN);
  m->n_inputs++;
  for (int i = 0; i < ndim; i++) in->dims[i] = dims[i];
  int32_t t = sg__tensor_lookup(part, name);
  in->here = t >= 0 && part->tensors[t].role == SG_ROLE_INPUT;
  return SG_OK;
}

sg_status sg__model_list_inputs(sg__par_model *m, const sg_graph *part, const char *lr_name) {
  const sg_graph *g = m->fwd;
  m->inputs = sg__calloc((size_t)g->n_inputs + 1, sizeof *m->inputs);
  if (m->inputs == NULL) return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", FN);
  for (uint32_t i = 0; i < g->n_inputs; i++) {
    const sg__tensor *x = &g->tensors[g->inputs[i]];
    SG_CHECK(add_input(m, part, x->name, x->dtype, x->ndim, x->dims, x->nbytes));
  }
  if (sg__tensor_lookup(g, lr_name) < 0) SG_CHECK(add_input(m, part, lr_name, SG_F32, 0, NULL, 4));
  return SG_OK;
}

/* ---- data parallelism ---------------------------------------------------------- */

/* With sync_batch_norm the batch norms are spelled out before backward (sync_bn.c), their statistics summed
 * over the `ranks` of the job. */
static sg_status create_dp(const sg_graph *fwd, sg_tensor loss, const sg_dist_optimizer *opt,
                           const sg_dist_params *p, int ranks, sg_dist **out) {
  sg_graph *g = NULL;
  sg__sync_bn *bns = NULL;
  int n_bns = 0;
  sg_status st =
      p->sync_batch_norm == 1 ? sg__sync_bn_rewrite(fwd, ranks, &g, &bns, &n_bns) : sg_graph_clone(fwd, &g);
  if (st == SG_OK) loss = (sg_tensor){sg__tensor_lookup(g, fwd->tensors[loss.id].name)};
  if (st == SG_OK) st = mark_output(g, loss);
  if (st == SG_OK) st = sg_graph_backward(g, loss);
  if (st == SG_OK) st = sg__model_add_optimizer(g, opt);
  if (st == SG_OK) st = sg__dist_create_data(g, p, bns, n_bns, out);
  sg__sync_bn_free(bns, n_bns);
  if (st != SG_OK) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", sg_last_error());
    sg_graph_destroy(g);
    return sg__error(st, "%s", msg);
  }
  DP(*out)->owned_graph = g;
  return SG_OK;
}

/* ---- what the pipeline and tensor strategies share ------------------------------- */

/* The mode, the degrees and the model must agree on every rank (SPEC M5). */
static sg_status consistency_hash(const sg_dist *d, uint64_t *out) {
  const sg__par_model *m = MODEL(d);
  SG_CHECK(sg_graph_hash(m->fwd, 0, out));
  /* The sessions are made later, from the environment's SG_MATMUL_PRECISION:
   * ranks that differ in it would compute different products. */
  int precision;
  SG_CHECK(sg__matmul_precision_resolve(SG_MATMUL_DEFAULT, &precision));
  int64_t v[] = {d->strategy->id, m->data, m->pipeline, m->tensor, m->micro, precision};
  *out = sg__fnv1a64(*out, v, sizeof v);
  return SG_OK;
}

sg_status sg__model_prepare(sg_dist *d, const sg__par_create_args *a) {
  sg__par_model *m = MODEL(d);
  m->data = a->data, m->pipeline = a->pipeline, m->tensor = a->tensor, m->micro = a->p->micro_batches;
  SG_CHECK(sg_graph_clone(a->g, &m->fwd));
  SG_CHECK(sg_graph_finalize(m->fwd));
  if ((m->loss_name = sg__strdup(a->g->tensors[a->loss.id].name)) == NULL)
    return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", FN);
  if (d->size != m->data * m->pipeline * m->tensor)
    return sg__error(SG_ERR_INVALID_ARG, "%s: the communicator has %d ranks, expected %d x %d x %d", FN,
                     d->size, m->data, m->pipeline, m->tensor);
  d->stats.has_loss = 1;
  sg__par_check check = {0, &d->strategy->id, 1,
                         "sg_dist_create_model: the ranks disagree on the forward graph, the degrees or the "
                         "precision of the products (SG_MATMUL_PRECISION; the hash below covers all three)"};
  SG_CHECK(consistency_hash(d, &check.hash));
  return sg__dist_run_job(d, sg__par_job_check, &check);
}

sg_status sg__model_place(sg_dist *d, int width) {
  sg__par_model *m = MODEL(d);
  int D = m->data;
  m->index = d->rank % width;
  m->replica = d->rank / width;
  m->group = sg__calloc((size_t)width, sizeof *m->group);
  m->replicas = sg__calloc((size_t)D, sizeof *m->replicas);
  if (m->group == NULL || m->replicas == NULL) return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", FN);
  for (int j = 0; j < width; j++) m->group[j] = m->replica * width + j;
  for (int e = 0; e < D; e++) m->replicas[e] = e * width + m->index;
  return SG_OK;
}

uint8_t *sg__model_fuse_barrier(const sg_graph *g) {
  uint8_t *mask = sg__dist_grad_barrier(g);
  if (mask == NULL) return NULL;
  for (uint32_t i = 0; i < g->n_inputs; i++) mask[g->inputs[i]] = 1;
  for (uint32_t i = 0; i < g->n_outputs; i++) mask[g->outputs[i]] = 1;
  return mask;
}

sg_status sg__model_new_session(const sg_dist *d, const sg_graph *part, const uint8_t *barrier,
                                sg_session **out) {
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sp.device = d->p.device;
  sp.threads = d->p.threads;
  sp.seed = d->p.seed;
  SG_CHECK(sg_session_create(part, &sp, out));
  SG_CHECK(sg__session_set_updates_last(*out, true));
  SG_CHECK(sg__session_set_fuse_barrier(*out, barrier));
  return sg_session_compile(*out);
}

sg_status sg__model_compile(sg_dist *d, const sg_graph *part, const uint8_t *barrier) {
  sg__par_model *m = MODEL(d);
  sg_status st = sg__model_new_session(d, part, barrier, &m->part_session);
  d->s = m->part_session;
  d->g = part;
  return st;
}

void sg__model_release_session(sg_dist *d) {
  sg_session_destroy(MODEL(d)->part_session);
  MODEL(d)->part_session = NULL;
  d->s = NULL;
}

void sg__model_release(sg_dist *d) {
  sg__par_model *m = MODEL(d);
  sg__model_release_session(d);
  sg__xfer_sched_free(&m->xctx);
  sg__xfer_sched_free(&m->rctx);
  sg__free(m->group);
  sg__free(m->replicas);
  m->group = m->replicas = NULL;
  for (int i = 0; i < m->n_inputs; i++) {
    sg__free(m->inputs[i].copy);
    sg__free(m->inputs[i].name);
  }
  sg__free(m->inputs);
  m->inputs = NULL;
  m->n_inputs = 0;
  sg__free(m->step_sums);
  m->step_sums = NULL;
  m->n_step_sums = 0;
  sg__free(m->loss_name);
  m->loss_name = NULL;
  sg__free(m->lr_input);
  m->lr_input = NULL;
  sg__model_heal_free(&m->heal);
  sg_fault_plan_destroy(d->heal.inject);
  d->heal.inject = NULL;
  sg_graph_destroy(m->fwd);
  m->fwd = NULL;
}

/* Its params keep the caller's size (an older caller's shorter struct reads as such, a bad size is still
 * refused when the part is built); a newer caller's longer struct is cut to the fields this library knows. */
sg_status sg__model_keep_optimizer(sg__par_model *m, const sg_dist_optimizer *o) {
  m->opt = *o;
  m->sgd = (sg_sgd_params)SG_SGD_PARAMS_INIT;
  m->adamw = (sg_adamw_params)SG_ADAMW_PARAMS_INIT;
  if (o->sgd != NULL) {
    size_t n = o->sgd->size < sizeof m->sgd ? o->sgd->size : sizeof m->sgd;
    memcpy(&m->sgd, o->sgd, n);
    m->sgd.size = n;
  }
  if (o->adamw != NULL) {
    size_t n = o->adamw->size < sizeof m->adamw ? o->adamw->size : sizeof m->adamw;
    memcpy(&m->adamw, o->adamw, n);
    m->adamw.size = n;
  }
  m->opt.sgd = o->sgd != NULL ? &m->sgd : NULL;
  m->opt.adamw = o->adamw != NULL ? &m->adamw : NULL;
  if ((m->lr_input = sg__strdup(o->lr_input)) == NULL)
    return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", FN);
  m->opt.lr_input = m->lr_input;
  return SG_OK;
}

/* check_params refused the fault kinds and tiers the mode does not honour before joining (the kinds do
 * not depend on the world size); the plan proper is read here, for the world. Healing reaches the
 * rendezvous store for the recovery's agreement. */
sg_status sg__model_read_heal(sg_dist *d) {
  sg__model_heal_init(d);
  d->heal.qos = SG_QOS_STRICT;
  if (d->p.heal == 1) SG_CHECK(sg__comm_env_resolve(&d->comm_params, &d->heal.env));
  return sg__dist_inject_parse(d, &d->heal.inject);
}

sg__model_input *sg__model_find_input(sg__par_model *m, const char *name) {
  for (int i = 0; i < m->n_inputs; i++)
    if (strcmp(m->inputs[i].name, name) == 0) return &m->inputs[i];
  return NULL;
}

sg_status sg__model_check_input(sg_dist *d, const char *fn, const char *name, sg_dtype dtype, int ndim,
                                const int64_t *dims, const void *data, sg__model_input **out) {
  *out = NULL;
  if (name == NULL || data == NULL || (ndim > 0 && dims == NULL))
    return sg__error(SG_ERR_INVALID_ARG, "%s: NULL argument", fn);
  sg__model_input *in = sg__model_find_input(MODEL(d), name);
  if (in == NULL) return sg__error(SG_ERR_NOT_FOUND, "%s: the model has no input '%s'", fn, name);
  /* The user feeds the batch of the forward graph on every rank, whatever
   * part of the model the rank runs. */
  bool same = dtype == in->dtype && ndim == in->ndim;
  for (int i = 0; same && i < ndim; i++) same = dims[i] == in->dims[i];
  if (!same) {
    char want[160] = "", got[160] = "";
    for (int i = 0, o = 0; i < in->ndim && o < (int)sizeof want; i++)
      o += snprintf(want + o, sizeof want - (size_t)o, "%s%lld", i ? "," : "", (long long)in->dims[i]);
    for (int i = 0, o = 0; i < ndim && i < SG_MAX_DIMS && o < (int)sizeof got; i++)
      o += snprintf(got + o, sizeof got - (size_t)o, "%s%lld", i ? "," : "", (long long)dims[i]);
    return sg__error(SG_ERR_SHAPE, "%s: input '%s' is %s [%s] (the whole batch on every rank); given %s [%s]",
                     fn, name, sg_dtype_name(in->dtype), want, sg_dtype_name(dtype), got);
  }
  in->set = true;
  if (in->here) *out = in; /* else another stage reads it */
  return SG_OK;
}

sg_status sg__model_step(sg_dist *d, sg_status (*part)(sg_dist *d, float *loss), bool reduce, int copies) {
  sg__par_model *m = MODEL(d);
  if (__atomic_load_n(&d->failed_flag, __ATOMIC_ACQUIRE)) return sg__par_failed_earlier(d);
  /* Nothing is communicated for a usage error. */
  for (int i = 0; i < m->n_inputs; i++)
    if (!m->inputs[i].set)
      return sg__error(SG_ERR_STATE, "sg_dist_step: input '%s' was not set (sg_dist_set_input)",
                       m->inputs[i].name);
  pthread_mutex_lock(&d->mu);
  d->step = d->stats.steps + 1;
  pthread_mutex_unlock(&d->mu);
  int64_t t0 = sg__now_ns();
  float loss = NAN;
  sg_status st = part(d, &loss);
  if (st != SG_OK && __atomic_load_n(&d->failed_flag, __ATOMIC_ACQUIRE)) return sg__dist_failure(d);
  if (st != SG_OK) {
    /* A local error (a kernel's): the peers cannot finish the step without
     * this rank, so make them fail now. */
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", sg_last_error());
    sg__dist_fail(d, SG_ERR_COMM, "rank %d left the job in step %llu: %s", d->rank,
                  (unsigned long long)(d->stats.steps + 1), msg);
    return sg__error(st, "%s", msg);
  }
  float mean = loss;
  if (reduce) {
    /* The loss and the strategy's figures in one allreduce. */
    float v[1 + 2 * SG__PP_MAX_STAGES];
    int n = 1 + m->n_step_sums;
    if (n > (int)(sizeof v / sizeof v[0]))
      return sg__error(SG_ERR_INTERNAL, "sg_dist_step: %d step sums", m->n_step_sums);
    v[0] = isnan(loss) ? 0.0f : loss;
    for (int i = 1; i < n; i++) v[i] = m->step_sums[i - 1];
    SG_CHECK(sg__dist_world_allreduce(d, v, (size_t)n, SG_F32, SG_REDUCE_SUM));
    for (int i = 1; i < n; i++) m->step_sums[i - 1] = v[i];
    mean = v[0] / (float)copies;
  }
  int64_t t1 = sg__now_ns();
  sg__par_record(d, SG__EV_STEP, t0, t1, 0);
  d->stats.steps++;
  d->stats.step_ms = (double)(t1 - t0) * 1e-6;
  d->stats.loss_mean = mean;
  return SG_OK;
}

sg_status sg__model_params_hash(const sg_dist *d, const int32_t *skip, int n_skip, uint64_t *out) {
  const sg_graph *g = d->g;
  uint64_t h = SG__FNV1A64_SEED;
  for (uint32_t t = 0; t < g->n_tensors; t++) {
    const sg__tensor *T = &g->tensors[t];
    if (T->role != SG_ROLE_PARAMETER) continue;
    bool skipped = false;
    for (int j = 0; j < n_skip; j++) skipped |= skip[j] == (int32_t)t;
    const unsigned char *b = sg__session_tensor_addr(d->s, (int32_t)t, NULL);
    if (skipped || b == NULL) continue;
    h = sg__fnv1a64(h, b, T->nbytes);
  }
  /* Every part's digest, in rank order, digested again: one value for the
   * whole model, the same on every rank. */
  uint64_t *all = sg__calloc((size_t)d->size, sizeof *all);
  if (all == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_dist_params_hash: out of memory");
  sg__xfer_sched wctx;
  sg__xfer world;
  sg__xfer_sched_init(&wctx, (sg_dist *)d, NULL, 0, 0, "loss", &world);
  sg_status st = world.allgather(world.ctx, &h, all, 1, SG_I64);
  sg__xfer_sched_free(&wctx);
  uint64_t whole = SG__FNV1A64_SEED;
  for (int r = 0; r < d->size && st == SG_OK; r++) {
    unsigned char le[8]; /* little-endian bytes: the same value on every host */
    for (int k = 0; k < 8; k++) le[k] = (unsigned char)(all[r] >> (8 * k));
    whole = sg__fnv1a64(whole, le, sizeof le);
  }
  sg__free(all);
  if (st == SG_OK) *out = whole;
  return st;
}

/* ---- create ------------------------------------------------------------------------- */

sg_status sg_dist_create_model(const sg_graph *fwd, sg_tensor loss, const sg_dist_optimizer *opt,
                               const sg_dist_params *p, sg_dist **out) {
  if (out == NULL) return sg__error(SG_ERR_INVALID_ARG, "%s: out is NULL", FN);
  *out = NULL;
  if (fwd == NULL) return sg__error(SG_ERR_INVALID_ARG, "%s: graph is NULL", FN);
  sg_dist_optimizer o;
  sg_dist_params q;
  sg_comm_params comm;
  SG_CHECK(read_opt(opt, &o));
  opt = &o;
  SG_CHECK(sg__par_read_params(FN, p, &q, &comm));
  p = &q;
  SG_CHECK(sg__par_check_params(p, FN));
  SG_CHECK(check_params(p));
  SG_CHECK(check_fwd(fwd, loss));
  int D, K, T;
  SG_CHECK(resolve_degrees(p, &D, &K, &T));
  /* A lost rank must leave a strict majority of the ranks to go on. Copies count: 2 shares x 2 copies lose
   * one rank of 4 and go on as 2 copies of one share (tp_heal.c), 2 stages x 2 copies as 2 of one stage. */
  if (p->heal == 1 && (K > 1 || T > 1) && D * K * T < 3)
    return sg__error(SG_ERR_INVALID_ARG,
                     "%s: heal 1 with data %d x pipeline %d x tensor %d = %d ranks: a lost rank must leave a "
                     "strict majority of the ranks to go on, so a healing job has at least 3 (a pipeline or "
                     "tensor group without copies: 3 stages or shares)",
                     FN, D, K, T, D * K * T);
  SG_CHECK(check_tensor_micro(fwd, T, p->micro_batches));
  if (K == 1 && T == 1) return create_dp(fwd, loss, opt, p, D, out);
  sg__par_create_args a = {
      .fn = FN, .p = p, .g = fwd, .loss = loss, .opt = opt, .data = D, .pipeline = K, .tensor = T};
  return sg__par_create(K > 1 ? &sg__par_pipeline_strategy : &sg__par_tensor_strategy, &a, out);
}
