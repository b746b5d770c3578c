/* sg_dist_create_model (include/sgrt/dist.h): checks, the choice of mode,
 * and the lifecycle of an sg_dist in pipeline or tensor mode (the parts are
 * built in model_pp.c and model_tp.c). Data parallelism needs nothing of
 * this: the training graph is built here and handed to sg_dist_create. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "graph/graph.h"
#include "parallel/model.h"
#include "runtime/hooks.h"
#include "sgrt/train.h"

#define MAX_TRACE_EVENTS ((size_t)1 << 26)
#define DEFAULT_TRACE_EVENTS ((size_t)1 << 18)

sg_dist_optimizer sg_dist_optimizer_init(void) { return (sg_dist_optimizer)SG_DIST_OPTIMIZER_INIT; }

/* ---- checks ------------------------------------------------------------------ */

static const char *FN = "sg_dist_create_model";

static sg_status check_opt(const sg_dist_optimizer *o) {
  if (o->size < sizeof(sg_dist_optimizer))
    return sg__error(SG_ERR_INVALID_ARG,
                     "%s: opt->size is %zu, expected %zu; initialise it with SG_DIST_OPTIMIZER_INIT", FN,
                     o->size, sizeof(sg_dist_optimizer));
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

/* The parts of sg_dist_params the pipeline and tensor modes read (the
 * data-parallel mode has sg_dist_create check its own). */
static sg_status check_params(const sg_dist_params *p) {
  if (p->size < sizeof(sg_dist_params))
    return sg__error(SG_ERR_INVALID_ARG,
                     "%s: params.size is %zu, expected %zu; initialise params with SG_DIST_PARAMS_INIT", FN,
                     p->size, sizeof(sg_dist_params));
  if (p->comm.size < sizeof(sg_comm_params))
    return sg__error(SG_ERR_INVALID_ARG,
                     "%s: params.comm.size is %zu, expected %zu; initialise it with SG_COMM_PARAMS_INIT", FN,
                     p->comm.size, sizeof(sg_comm_params));
  if (p->data == 0 || p->data < -1)
    return sg__error(SG_ERR_INVALID_ARG,
                     "%s: data is %d; the data-parallel degree is >= 1, or -1 for the world size / "
                     "(pipeline x tensor)",
                     FN, p->data);
  if (p->pipeline < 1 || p->pipeline > SG__PP_MAX_STAGES)
    return sg__error(SG_ERR_INVALID_ARG, "%s: pipeline is %d, must be 1..%d", FN, p->pipeline,
                     SG__PP_MAX_STAGES);
  if (p->tensor < 1) return sg__error(SG_ERR_INVALID_ARG, "%s: tensor is %d, must be >= 1", FN, p->tensor);
  if (p->micro_batches < 1 || p->micro_batches > SG__PP_MAX_MICRO)
    return sg__error(SG_ERR_INVALID_ARG, "%s: micro_batches is %d, must be 1..%d", FN, p->micro_batches,
                     SG__PP_MAX_MICRO);
  if (p->pipeline == 1 && p->tensor == 1) return SG_OK; /* sg_dist_create checks the rest */
  if (p->threads < 0)
    return sg__error(SG_ERR_INVALID_ARG, "%s: threads is %d (0 = all CPUs)", FN, p->threads);
  if (p->heartbeat_ms < 0)
    return sg__error(SG_ERR_INVALID_ARG, "%s: heartbeat_ms is %d (0 turns heartbeats off)", FN,
                     p->heartbeat_ms);
  if (p->heartbeat_ms > 0 && p->dead_ms <= p->heartbeat_ms)
    return sg__error(SG_ERR_INVALID_ARG, "%s: dead_ms %d must exceed heartbeat_ms %d", FN, p->dead_ms,
                     p->heartbeat_ms);
  if (p->trace_events > MAX_TRACE_EVENTS)
    return sg__error(SG_ERR_INVALID_ARG, "%s: trace_events is %zu, at most %zu", FN, p->trace_events,
                     MAX_TRACE_EVENTS);
  const char *mode = p->pipeline > 1 ? "pipeline" : "tensor";
  int deg = p->pipeline > 1 ? p->pipeline : p->tensor;
  /* Self-healing re-plans a data-parallel job over the survivors; a stage or
   * a share has no copy to take over from. */
  if (p->feed != NULL)
    return sg__error(SG_ERR_UNSUPPORTED,
                     "%s: a feed callback (self-healing) is not supported with %s parallelism (%s=%d); set "
                     "feed to NULL: a failure then makes every rank's step fail with SG_ERR_COMM",
                     FN, mode, mode, deg);
  if (p->zero != 0)
    return sg__error(SG_ERR_UNSUPPORTED,
                     "%s: zero %d (sharded optimizer state) is not supported with %s parallelism (%s=%d)", FN,
                     p->zero, mode, mode, deg);
  if (p->offload != NULL && strcmp(p->offload, "none") != 0)
    return sg__error(SG_ERR_UNSUPPORTED, "%s: offload '%s' is not supported with %s parallelism (%s=%d)", FN,
                     p->offload, mode, mode, deg);
  return SG_OK;
}

/* D, K, T from the parameters and the world size, before joining: every
 * rank computes the same answer, so a mismatch fails everywhere at once and
 * nobody waits for a peer that gave up. */
static sg_status resolve_degrees(const sg_dist_params *p, int *D, int *K, int *T) {
  sg__comm_env env;
  SG_CHECK(sg__comm_env_resolve(&p->comm, &env));
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
  if (*K > 1 && *T > 1)
    return sg__error(SG_ERR_UNSUPPORTED,
                     "%s: pipeline (%d) and tensor (%d) parallelism together are not supported yet; use one "
                     "of them",
                     FN, *K, *T);
  if (*T > 1 && p->micro_batches > 1)
    return sg__error(SG_ERR_UNSUPPORTED,
                     "%s: micro_batches %d with tensor parallelism (tensor=%d) is not supported; use 1", FN,
                     p->micro_batches, *T);
  return SG_OK;
}

sg_status sg__model_add_optimizer(sg_graph *g, const sg_dist_optimizer *opt) {
  sg_tensor lr;
  if (sg_graph_find_tensor(g, opt->lr_input, &lr) != SG_OK) {
    lr = sg_input(g, opt->lr_input, SG_F32, 0, NULL);
    SG_CHECK(sg_graph_status(g));
  }
  if (opt->kind == SG_DIST_OPT_ADAMW) SG_CHECK(sg_graph_add_adamw(g, lr, &opt->adamw));
  else SG_CHECK(sg_graph_add_sgd(g, lr, &opt->sgd));
  return sg_graph_finalize(g);
}

sg_status sg__model_broadcast_state(sg_dist *d, const int32_t *skip, int n_skip) {
  sg__dist_model *m = MODEL(d);
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

static sg_status add_input(sg__dist_model *m, const sg_graph *part, const char *name, sg_dtype dtype,
                           int ndim, const int64_t *dims, size_t bytes) {
  sg__model_input *in = &m->inputs[m->n_inputs];
  *in = (sg__model_input){.dtype = dtype, .ndim = ndim, .bytes = bytes};
  if ((in->name = sg__strdup(name)) == NULL) return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", FN);
  m->n_inputs++;
  for (int i = 0; i < ndim; i++) in->dims[i] = dims[i];
  int32_t t = sg__tensor_lookup(part, name);
  in->here = t >= 0 && part->tensors[t].role == SG_ROLE_INPUT;
  return SG_OK;
}

sg_status sg__model_list_inputs(sg__dist_model *m, const sg_graph *part, const char *lr_name) {
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

static sg_status create_dp(const sg_graph *fwd, sg_tensor loss, const sg_dist_optimizer *opt,
                           const sg_dist_params *p, sg_dist **out) {
  sg_graph *g;
  SG_CHECK(sg_graph_clone(fwd, &g));
  sg_status st = mark_output(g, loss);
  if (st == SG_OK) st = sg_graph_backward(g, loss);
  if (st == SG_OK) st = sg__model_add_optimizer(g, opt);
  if (st == SG_OK) st = sg_dist_create(g, p, out);
  if (st != SG_OK) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", sg_last_error());
    sg_graph_destroy(g);
    return sg__error(st, "%s", msg);
  }
  DP(*out)->owned_graph = g;
  return SG_OK;
}

/* ---- pipeline and tensor modes ---------------------------------------------------- */

static void free_model(sg__dist_model *m) {
  if (m == NULL) return;
  if (m->kind == SG__MODEL_PIPELINE) sg__model_pp_free(m);
  else sg__model_tp_free(m);
  sg__xfer_sched_free(&m->xctx);
  sg__free(m->group);
  for (int i = 0; i < m->n_inputs; i++) {
    sg__free(m->inputs[i].copy);
    sg__free(m->inputs[i].name);
  }
  sg__free(m->inputs);
  sg__free(m->loss_name);
  sg_graph_destroy(m->fwd);
  sg__free(m);
}

/* Everything but the scheduler thread, which is stopped (or never ran). */
static void free_dist(sg_dist *d, bool sync_ready) {
  free_model(MODEL(d)); /* its sessions before anything they point to */
  sg__dist_ring_free(&d->compute_ring);
  sg__dist_ring_free(&d->sched_ring);
  sg__free(d->trace_path);
  if (sync_ready) {
    pthread_cond_destroy(&d->wake_sched);
    pthread_cond_destroy(&d->wake_compute);
    pthread_mutex_destroy(&d->mu);
  }
  sg__free(d);
}

static sg_status abandon(sg_dist *d, sg_status st) {
  char msg[1024];
  sg__dist_give_up(d, st, msg, sizeof msg);
  free_dist(d, true);
  return sg__error(st, "%s", msg);
}

/* The mode, the degrees and the model must agree on every rank (SPEC M5). */
static sg_status consistency_hash(const sg_dist *d, uint64_t *out) {
  const sg__dist_model *m = MODEL(d);
  SG_CHECK(sg_graph_hash(m->fwd, 0, out));
  int64_t v[] = {m->kind, m->data, m->pipeline, m->tensor, m->micro};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) *out = (*out ^ (uint64_t)v[i]) * 1099511628211ull;
  return SG_OK;
}

/* Scheduler thread: as sg__dist_job_check, with the model's hash in place
 * of the gradient topology; the ranks leave it together, which makes it the
 * origin of their timelines. */
static sg_status check_job(sg_dist *d, void *arg) {
  const uint64_t *hash = arg;
  const uint8_t ids[1] = {(uint8_t)MODEL(d)->kind};
  int64_t t0 = sg__now_ns();
  sg_status st = sg_comm_check_consistency(d->comm, *hash, ids, 1);
  if (st == SG_ERR_SHAPE) {
    char why[900];
    snprintf(why, sizeof why, "%s", sg_last_error());
    return sg__error(st,
                     "%s: the ranks disagree on the forward graph or the degrees (the hash below covers "
                     "both): %s",
                     FN, why);
  }
  SG_CHECK(st);
  int64_t t1 = sg__now_ns();
  pthread_mutex_lock(&d->mu);
  d->origin_ns = t1;
  if (d->tracing) {
    sg__dist_event e = {0, 0, 0, 0, (uint8_t)SG__EV_CHECK, 1, {0}};
    e.t0_ns = t0 - t1;
    sg__dist_ring_put(&d->sched_ring, &e);
  }
  pthread_mutex_unlock(&d->mu);
  return SG_OK;
}

static sg_status prepare(sg_dist *d, const sg_dist_optimizer *opt) {
  sg__dist_model *m = MODEL(d);
  if (d->size != m->data * m->pipeline * m->tensor)
    return sg__error(SG_ERR_INVALID_ARG, "%s: the communicator has %d ranks, expected %d x %d x %d", FN,
                     d->size, m->data, m->pipeline, m->tensor);
  if (d->tracing) {
    uint64_t cap = d->p.trace_events ? d->p.trace_events : DEFAULT_TRACE_EVENTS;
    SG_CHECK(sg__dist_ring_init(&d->compute_ring, cap));
    SG_CHECK(sg__dist_ring_init(&d->sched_ring, cap));
  }
  d->stats = (sg_dist_stats)SG_DIST_STATS_INIT;
  d->stats.world_size = d->size;
  d->stats.original_rank = d->rank;
  d->stats.shards = 1;
  d->stats.has_loss = 1;
  d->stats.loss_mean = NAN;
  /* Before the build: its collectives (the pipeline's choice of stages)
   * must meet their like on every rank. */
  uint64_t hash;
  SG_CHECK(consistency_hash(d, &hash));
  SG_CHECK(sg__dist_run_job(d, check_job, &hash));
  if (m->kind == SG__MODEL_PIPELINE) return sg__model_pp_build(d, opt);
  return sg__model_tp_build(d, opt);
}

static sg_status create_parts(const sg_graph *fwd, sg_tensor loss, const sg_dist_optimizer *opt,
                              const sg_dist_params *p, int D, int K, int T, sg_dist **out) {
  sg_dist *d = sg__calloc(1, sizeof *d);
  sg__dist_model *m = sg__calloc(1, sizeof *m);
  if (d == NULL || m == NULL) {
    sg__free(d);
    sg__free(m);
    return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", FN);
  }
  d->impl = m;
  d->strategy = K > 1 ? &sg__par_pipeline_strategy : &sg__par_tensor_strategy;
  d->away = 1; /* until the first sg_dist_step */
  *m = (sg__dist_model){K > 1 ? SG__MODEL_PIPELINE : SG__MODEL_TENSOR, D, K, T, p->micro_batches};
  d->p = *p;
  d->p.size = sizeof(sg_dist_params);
  d->comm_params = p->comm;
  d->rank = -1;
  d->tracing = p->trace || p->trace_path != NULL;
  sg_status st = SG_OK;
  if (p->trace_path && (d->trace_path = sg__strdup(p->trace_path)) == NULL)
    st = sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", FN);
  d->p.trace_path = d->trace_path;
  if (st == SG_OK) st = sg_graph_clone(fwd, &m->fwd);
  if (st == SG_OK) st = sg_graph_finalize(m->fwd);
  if (st == SG_OK && (m->loss_name = sg__strdup(fwd->tensors[loss.id].name)) == NULL)
    st = sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", FN);
  if (st != SG_OK) {
    free_dist(d, false);
    return st;
  }
  if ((st = sg__dist_init_sync(d, FN)) != SG_OK) {
    free_dist(d, false);
    return st;
  }
  if ((st = sg__dist_sched_start(d)) != SG_OK || (st = prepare(d, opt)) != SG_OK) return abandon(d, st);
  d->p.device = NULL; /* the caller's strings were needed by create only */
  d->p.offload = d->p.offload_path = NULL;
  *out = d;
  return SG_OK;
}

sg_status sg_dist_create_model(const sg_graph *fwd, sg_tensor loss, const sg_dist_optimizer *opt,
                               const sg_dist_params *p, sg_dist **out) {
  if (out == NULL) return sg__error(SG_ERR_INVALID_ARG, "%s: out is NULL", FN);
  *out = NULL;
  if (fwd == NULL) return sg__error(SG_ERR_INVALID_ARG, "%s: graph is NULL", FN);
  sg_dist_optimizer def_opt = SG_DIST_OPTIMIZER_INIT;
  sg_dist_params def_p = SG_DIST_PARAMS_INIT;
  if (opt == NULL) opt = &def_opt;
  if (p == NULL) p = &def_p;
  SG_CHECK(check_opt(opt));
  SG_CHECK(check_params(p));
  SG_CHECK(check_fwd(fwd, loss));
  int D, K, T;
  SG_CHECK(resolve_degrees(p, &D, &K, &T));
  if (K == 1 && T == 1) return create_dp(fwd, loss, opt, p, out);
  return create_parts(fwd, loss, opt, p, D, K, T, out);
}

/* ---- the public functions in these modes -------------------------------------------- */

static sg_status sg__dist_model_destroy(sg_dist *d) {
  sg_status st = SG_OK;
  char msg[1024] = "";
  if (d->trace_path != NULL) {
    st = sg__dist_write_trace(d, d->trace_path);
    if (st != SG_OK) snprintf(msg, sizeof msg, "%s", sg_last_error());
  }
  /* The runners' transfers are jobs of the scheduler: free them first. */
  free_model(MODEL(d));
  d->impl = NULL;
  d->s = NULL;
  sg__dist_sched_stop(d);
  if (st == SG_OK && d->comm_destroy_status != SG_OK) {
    st = d->comm_destroy_status;
    snprintf(msg, sizeof msg, "sg_dist_destroy: leaving the job: %.960s", d->fail_msg);
  }
  free_dist(d, true);
  return st == SG_OK ? SG_OK : sg__error(st, "%s", msg);
}

static sg__model_input *find_input(sg__dist_model *m, const char *name) {
  for (int i = 0; i < m->n_inputs; i++)
    if (strcmp(m->inputs[i].name, name) == 0) return &m->inputs[i];
  return NULL;
}

static sg_status sg__dist_model_set_input(sg_dist *d, const char *name, sg_dtype dtype, int ndim,
                                          const int64_t *dims, void *data, bool copy) {
  const char *fn = copy ? "sg_dist_set_input" : "sg_dist_bind_input";
  sg__dist_model *m = MODEL(d);
  if (name == NULL || data == NULL || (ndim > 0 && dims == NULL))
    return sg__error(SG_ERR_INVALID_ARG, "%s: NULL argument", fn);
  sg__model_input *in = find_input(m, name);
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
  if (!in->here) { /* another stage reads it */
    in->set = true;
    return SG_OK;
  }
  if (m->kind == SG__MODEL_TENSOR) {
    SG_CHECK(copy ? sg_session_set_input(d->s, name, dtype, ndim, dims, data)
                  : sg_session_bind_input(d->s, name, dtype, ndim, dims, data));
  } else if (in->batched && copy) {
    /* The runner reads the batch during the step: keep a copy, as
     * sg_session_set_input would. */
    memcpy(in->copy, data, in->bytes);
    SG_CHECK(sg__pp_set_input(m->pp, name, in->copy, in->bytes));
  } else {
    SG_CHECK(sg__pp_set_input(m->pp, name, data, in->bytes));
  }
  in->set = true;
  return SG_OK;
}

static void record_step(sg_dist *d, int64_t t0, int64_t t1) {
  sg__dist_event e = {
      t0 - d->origin_ns, t1 - d->origin_ns, 0, (uint32_t)d->stats.steps + 1, (uint8_t)SG__EV_STEP, 0, {0}};
  sg__dist_ring_put(&d->compute_ring, &e);
}

static sg_status sg__dist_model_step(sg_dist *d) {
  sg__dist_model *m = MODEL(d);
  if (__atomic_load_n(&d->failed_flag, __ATOMIC_ACQUIRE)) {
    sg__dist_failure(d);
    char why[1024];
    snprintf(why, sizeof why, "%s", sg_last_error());
    return sg__error(SG_ERR_COMM, "sg_dist_step: the job failed earlier: %s", why);
  }
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
  sg_status st = m->kind == SG__MODEL_PIPELINE ? sg__model_pp_step(d, &loss) : sg__model_tp_step(d, &loss);
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
  /* The loss: the last stage's (or a tensor group's), averaged over the
   * replicas, made known to every rank (one float); with one tensor group
   * every rank holds it already. */
  float mean = loss;
  if (m->kind == SG__MODEL_PIPELINE || m->data > 1) {
    /* Pipeline: only the last stage has it; tensor: every share of a copy
     * holds its copy's loss, so the world's sum counts each T times. */
    float v = isnan(loss) ? 0.0f : loss;
    SG_CHECK(sg__dist_world_allreduce(d, &v, 1, SG_F32, SG_REDUCE_SUM));
    mean = v / (float)(m->data * (m->kind == SG__MODEL_TENSOR ? m->tensor : 1));
  }
  int64_t t1 = sg__now_ns();
  if (d->tracing) record_step(d, t0, t1);
  d->stats.steps++;
  d->stats.step_ms = (double)(t1 - t0) * 1e-6;
  d->stats.loss_mean = mean;
  return SG_OK;
}

static sg_status sg__dist_model_read(const sg_dist *d, const char *name, void *out, size_t bytes) {
  const sg__dist_model *m = MODEL(d);
  if (name == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_dist_read: name is NULL");
  if (m->kind == SG__MODEL_PIPELINE) {
    sg_tensor t;
    int k = sg__model_pp_stage_of(m, name);
    if (sg_graph_find_tensor(d->g, name, &t) != SG_OK && k >= 0 && k != m->st->stage)
      return sg__error(SG_ERR_NOT_FOUND,
                       "sg_dist_read: '%s' is on pipeline stage %d (rank %d); this rank runs stage %d", name,
                       k, m->replica * m->pipeline + k, m->st->stage);
  }
  return sg_session_read(d->s, name, out, bytes);
}

static sg_status sg__dist_model_params_hash(const sg_dist *d, uint64_t *out) {
  sg__dist_model *m = MODEL(d);
  const sg_graph *g = d->g;
  uint64_t h = 1469598103934665603ull;
  for (uint32_t t = 0; t < g->n_tensors; t++) {
    const sg__tensor *T = &g->tensors[t];
    if (T->role != SG_ROLE_PARAMETER) continue;
    bool boundary = false; /* a stage's received activations are parameters only to get their gradient */
    for (int j = 0; m->st != NULL && j < m->st->n_recv; j++) boundary |= m->st->recv[j] == (int32_t)t;
    if (boundary) continue;
    const unsigned char *b = sg__session_tensor_addr(d->s, (int32_t)t, NULL);
    if (b == NULL) continue;
    for (size_t k = 0; k < T->nbytes; k++) h = (h ^ b[k]) * 1099511628211ull;
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
  uint64_t whole = 1469598103934665603ull;
  for (int r = 0; r < d->size && st == SG_OK; r++)
    for (int k = 0; k < 8; k++) whole = (whole ^ ((all[r] >> (8 * k)) & 0xff)) * 1099511628211ull;
  sg__free(all);
  if (st == SG_OK) *out = whole;
  return st;
}

const sg__par_strategy sg__par_pipeline_strategy = {
    "pipeline",          sg__dist_model_set_input,   sg__dist_model_step,
    sg__dist_model_read, sg__dist_model_params_hash, sg__dist_model_destroy};
const sg__par_strategy sg__par_tensor_strategy = {"tensor",
                                                  sg__dist_model_set_input,
                                                  sg__dist_model_step,
                                                  sg__dist_model_read,
                                                  sg__dist_model_params_hash,
                                                  sg__dist_model_destroy};
