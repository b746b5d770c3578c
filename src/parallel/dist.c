/* sg_dist's lifecycle and small queries (include/sgrt/dist.h): argument
 * checks, joining the job, compiling the session for data parallelism, the
 * consistency check; destroy. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "graph/graph.h"
#include "parallel/dist_internal.h"
#include "parallel/model.h"

#define DEFAULT_TRACE_EVENTS ((size_t)1 << 18)
#define MAX_TRACE_EVENTS ((size_t)1 << 26)
/* Shards of a step (world size x micro_batches) stay far from INT_MAX. */
#define MAX_MICRO_BATCHES 65536

sg_dist_params sg_dist_params_init(void) { return (sg_dist_params)SG_DIST_PARAMS_INIT; }

static sg_status check_params(const sg_dist_params *p) {
  const char *fn = "sg_dist_create";
  if (p->size < sizeof(sg_dist_params))
    return sg__error(SG_ERR_INVALID_ARG,
                     "%s: params.size is %zu, expected %zu; initialise params with SG_DIST_PARAMS_INIT", fn,
                     p->size, sizeof(sg_dist_params));
  if (p->comm.size < sizeof(sg_comm_params))
    return sg__error(SG_ERR_INVALID_ARG,
                     "%s: params.comm.size is %zu, expected %zu; initialise it with SG_COMM_PARAMS_INIT", fn,
                     p->comm.size, sizeof(sg_comm_params));
  if (p->threads < 0)
    return sg__error(SG_ERR_INVALID_ARG, "%s: threads is %d (0 = all CPUs)", fn, p->threads);
  if (p->data == 0 || p->data < -1)
    return sg__error(SG_ERR_INVALID_ARG,
                     "%s: data is %d; the data-parallel degree is >= 1, or -1 for the world size", fn,
                     p->data);
  if (p->pipeline < 1)
    return sg__error(SG_ERR_INVALID_ARG, "%s: pipeline is %d, must be >= 1", fn, p->pipeline);
  if (p->tensor < 1) return sg__error(SG_ERR_INVALID_ARG, "%s: tensor is %d, must be >= 1", fn, p->tensor);
  if (p->micro_batches < 1)
    return sg__error(SG_ERR_INVALID_ARG, "%s: micro_batches is %d, must be >= 1", fn, p->micro_batches);
  if (p->pipeline > 1)
    return sg__error(SG_ERR_UNSUPPORTED,
                     "pipeline parallelism (pp=%d) does not run through sg_dist yet (the stages run with "
                     "src/parallel/pp_*.c, docs/pipeline_parallel.md)",
                     p->pipeline);
  if (p->tensor > 1)
    return sg__error(SG_ERR_UNSUPPORTED,
                     "tensor parallelism (tp=%d) does not run through sg_dist yet (the rewrite is "
                     "src/parallel/tp_*.c, docs/tensor_parallel.md)",
                     p->tensor);
  if (p->micro_batches > MAX_MICRO_BATCHES)
    return sg__error(SG_ERR_INVALID_ARG, "%s: micro_batches is %d, at most %d", fn, p->micro_batches,
                     MAX_MICRO_BATCHES);
  /* Each micro-batch has inputs of its own: only the feed can set them. */
  if (p->micro_batches > 1 && p->feed == NULL)
    return sg__error(SG_ERR_INVALID_ARG,
                     "%s: micro_batches is %d but feed is NULL; micro-batches need a feed callback to set "
                     "each micro-batch's inputs",
                     fn, p->micro_batches);
  if (p->bucket_bytes == 0) return sg__error(SG_ERR_INVALID_ARG, "%s: bucket_bytes is 0", fn);
  if (p->zero != 0 && p->zero != 1)
    return sg__error(SG_ERR_INVALID_ARG, "%s: zero is %d; 0 (off) or 1 (ZeRO-1: sharded optimizer state)", fn,
                     p->zero);
  if (p->zero == 1 && p->offload != NULL && strcmp(p->offload, "none") != 0)
    return sg__error(SG_ERR_UNSUPPORTED,
                     "%s: zero 1 with offload '%.32s': ZeRO-1 keeps a rank's share of the optimizer state in "
                     "its session; offloading it is not supported yet",
                     fn, p->offload);
  if (p->heartbeat_ms < 0)
    return sg__error(SG_ERR_INVALID_ARG, "%s: heartbeat_ms is %d (0 turns heartbeats off)", fn,
                     p->heartbeat_ms);
  if (p->heartbeat_ms > 0 && p->dead_ms <= p->heartbeat_ms)
    return sg__error(SG_ERR_INVALID_ARG, "%s: dead_ms %d must exceed heartbeat_ms %d", fn, p->dead_ms,
                     p->heartbeat_ms);
  if (p->hang_ms < -1 || p->hang_ms > 86400000 || (p->hang_ms > 0 && p->hang_ms <= p->heartbeat_ms))
    return sg__error(
        SG_ERR_INVALID_ARG,
        "%s: hang_ms is %d; 0 (max(10 x dead_ms, 10 s)), -1 (off), or above heartbeat_ms %d and at "
        "most 86400000",
        fn, p->hang_ms, p->heartbeat_ms);
  if (p->qos < -1 || p->qos > SG_QOS_GRACEFUL_DEGRADE)
    return sg__error(SG_ERR_INVALID_ARG,
                     "%s: qos is %d; -1 (SG_QOS or strict), 0 strict, 1 best-effort or 2 graceful-degrade",
                     fn, p->qos);
  if (p->feed != NULL) { /* healing is on: the tier applies */
    sg_qos q = (sg_qos)p->qos;
    if (p->qos == -1) SG_CHECK(sg_qos_from_env(SG_QOS_STRICT, &q));
    /* best-effort promises retries of a failed collective within its
     * budget; the runtime does not retry, so it refuses the tier rather than
     * quietly running it as strict. */
    if (q == SG_QOS_BEST_EFFORT)
      return sg__error(
          SG_ERR_UNSUPPORTED,
          "%s: QoS tier best-effort (retry a failed collective within 200 ms)%s is not available: "
          "the runtime does not retry collectives; use strict (recover and redo the step) or "
          "graceful-degrade",
          fn, p->qos == -1 ? ", from SG_QOS," : "");
  }
  bool offload;
  sg_gmem_tier tier;
  SG_CHECK(sg__dist_offload_parse(p->offload, &offload, &tier));
  if (p->trace_events > MAX_TRACE_EVENTS)
    return sg__error(SG_ERR_INVALID_ARG, "%s: trace_events is %zu, at most %zu", fn, p->trace_events,
                     MAX_TRACE_EVENTS);
  return SG_OK;
}

/* A one-element f32 graph output named "loss": averaged over the ranks for
 * reporting. */
static void find_loss(sg_dist *d) {
  const sg_graph *g = d->g;
  int32_t t = sg__tensor_lookup(g, "loss");
  DP(d)->loss = -1;
  if (t < 0 || g->tensors[t].dtype != SG_F32 || g->tensors[t].nbytes != 4) return;
  for (uint32_t i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] == t) {
      size_t bytes;
      DP(d)->loss_addr = sg__session_tensor_addr(d->s, t, &bytes);
      if (DP(d)->loss_addr != NULL) DP(d)->loss = t;
      return;
    }
}

sg_status sg__dist_init_sync(sg_dist *d, const char *fn) {
  pthread_condattr_t ca;
  if (pthread_condattr_init(&ca) != 0) return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", fn);
  /* The scheduler's timed waits must not jump with the wall clock. */
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  bool ok = pthread_mutex_init(&d->mu, NULL) == 0;
  ok = ok && pthread_cond_init(&d->wake_sched, &ca) == 0;
  ok = ok && pthread_cond_init(&d->wake_compute, NULL) == 0;
  pthread_condattr_destroy(&ca);
  if (!ok) return sg__error(SG_ERR_NO_MEMORY, "%s: cannot create the scheduler's locks", fn);
  return SG_OK;
}

/* Self-healing's pieces (docs/resilience.md): the original ranks, the
 * store's address for the agreement, the fault plan, and with a feed
 * callback the rollback snapshot and the buffer that accumulates the
 * gradients of extra shards. */
static sg_status prepare_healing(sg_dist *d) {
  if (!DP(d)->rj.joining) { /* a rejoining rank has them from its admission (rejoin.c) */
    d->orig_rank = d->rank;
    d->orig_size = d->size;
    for (int r = 0; r < d->size && r < SG__DIST_MAX_RANKS; r++) d->members[r] = r;
  }
  SG_CHECK(sg__comm_env_resolve(&d->comm_params, &DP(d)->env));
  if (d->p.qos == -1) {
    sg_qos q;
    SG_CHECK(sg_qos_from_env(SG_QOS_STRICT, &q));
    DP(d)->qos = (int)q;
  } else {
    DP(d)->qos = d->p.qos;
  }
  SG_CHECK(sg__dist_inject_init(d));
  if (d->p.feed == NULL) return SG_OK;
  if (d->p.heartbeat_ms > 0) {
    /* The states of the original ranks, for sg_dist_health(): fed with the
     * failures each recovery finds and its new epoch (the comm layer does the
     * detection itself, so no heartbeats or ticks go in). */
    sg_health_config hc = SG_HEALTH_CONFIG_INIT;
    hc.heartbeat_ms = d->p.heartbeat_ms;
    hc.unreachable_ms = d->p.dead_ms;
    SG_CHECK(sg_health_create(d->orig_size, d->orig_rank, &hc, sg__now_ms(), &DP(d)->health));
  }
  if (d->orig_size > SG__DIST_MAX_RANKS)
    return sg__error(SG_ERR_UNSUPPORTED,
                     "sg_dist_create: recovery (a feed callback) supports at most %d ranks, not %d",
                     SG__DIST_MAX_RANKS, d->orig_size);
  SG_CHECK(sg__dist_snap_init(d));
  DP(d)->shards = sg__malloc((size_t)sg__dist_n_shards(d) * sizeof *DP(d)->shards);
  if (DP(d)->shards == NULL)
    return sg__error(SG_ERR_NO_MEMORY, "sg_dist_create: out of memory for the shards");
  DP(d)->accum_off = sg__malloc((DP(d)->plan.n_grads ? DP(d)->plan.n_grads : 1) * sizeof *DP(d)->accum_off);
  DP(d)->accum = sg__malloc(DP(d)->plan.total_bytes ? DP(d)->plan.total_bytes : 4);
  if (DP(d)->accum_off == NULL || DP(d)->accum == NULL)
    return sg__error(SG_ERR_NO_MEMORY, "sg_dist_create: out of memory for the gradient accumulator");
  size_t off = 0;
  for (uint32_t i = 0; i < DP(d)->plan.n_grads; i++) {
    DP(d)->accum_off[i] = off;
    off += DP(d)->plan.grads[i].bytes / 4;
  }
  return SG_OK;
}

/* Everything after joining that the compute thread prepares. */
static sg_status prepare(sg_dist *d) {
  const sg_dist_params *p = &d->p;
  int world = DP(d)->rj.joining ? d->orig_size : d->size; /* a joiner's epoch may lack ranks still down */
  if (p->data != -1 && p->data != world)
    return sg__error(
        SG_ERR_INVALID_ARG,
        "sg_dist_create: data-parallel degree %d times pipeline 1 times tensor 1 must equal the world "
        "size %d",
        p->data, world);
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sp.device = p->device;
  sp.threads = p->threads;
  sp.seed = p->seed;
  SG_CHECK(sg_session_create(d->g, &sp, &d->s));
  SG_CHECK(sg__session_set_updates_last(d->s, true));
  /* ZeRO-1: the optimizer state of other ranks' parameters gets no memory. */
  DP(d)->zero.on = p->zero == 1;
  if (DP(d)->zero.on) SG_CHECK(sg__dist_zero_unback(d));
  SG_CHECK(sg_session_compile(d->s));
  /* Before anything takes the state's addresses (buckets, broadcast, snapshots). */
  bool offload;
  sg_gmem_tier tier;
  SG_CHECK(sg__dist_offload_parse(p->offload, &offload, &tier));
  if (offload) SG_CHECK(sg__dist_offload_start(d->g, d->s, tier, p->offload_path, &DP(d)->offload));
  SG_CHECK(sg__dist_plan_build(d->s, p->bucket_bytes, DP(d)->zero.on, &DP(d)->plan));
  if (DP(d)->zero.on) SG_CHECK(sg__dist_zero_init(d));
  find_loss(d);
  DP(d)->flat = sg__malloc(DP(d)->plan.flat_bytes + 64); /* + the loss */
  if (DP(d)->flat == NULL)
    return sg__error(SG_ERR_NO_MEMORY, "sg_dist_create: out of memory for the gradient buffer");
  if (d->tracing) {
    uint64_t cap = p->trace_events ? p->trace_events : DEFAULT_TRACE_EVENTS;
    SG_CHECK(sg__dist_ring_init(&d->compute_ring, cap));
    SG_CHECK(sg__dist_ring_init(&d->sched_ring, cap));
  }
  SG_CHECK(prepare_healing(d));
  d->stats = (sg_dist_stats)SG_DIST_STATS_INIT;
  d->stats.original_rank = d->orig_rank;
  d->stats.shards = 1;
  d->stats.world_size = d->size;
  d->stats.has_loss = DP(d)->loss >= 0;
  d->stats.loss_mean = NAN;
  d->stats.buckets = DP(d)->plan.n_buckets;
  d->stats.gradient_bytes = DP(d)->plan.total_bytes;
  d->stats.offload_bytes = DP(d)->offload.bytes;
  sg__dist_zero_state_stats(d, &d->stats.optimizer_state_bytes, &d->stats.optimizer_state_total);
  DP(d)->loss_mean = NAN;
  /* Healing is armed from here (issue 15): a peer lost before the first
   * step, in the consistency check, is recovered from like any other
   * failure, its share of every batch spread over the others. A mismatch
   * (SG_ERR_SHAPE) or a local error is not a peer's failure. */
  SG_CHECK(sg__dist_inject_recovery(d, SG_RECOVERY_CREATE));
  for (;;) {
    sg_status st = sg__dist_run_job(d, sg__dist_job_check, NULL);
    if (st == SG_OK) break;
    if (st != SG_ERR_COMM || p->feed == NULL) return st;
    sg__dist_fail(d, SG_ERR_COMM, "rank %d, before the first step: %s", d->rank, sg_last_error());
    if (!sg__dist_healable(d)) return sg__dist_failure(d);
    SG_CHECK(sg__dist_recover(d));
  }
  /* After the check: every rank agrees on zero, so every rank creates the replicas' global page
   * table (collective). */
  if (DP(d)->zero.on && p->feed != NULL) {
    SG_CHECK(sg__dist_replica_init(d));
    d->stats.replica_bytes = DP(d)->zero.replica_bytes;
  }
  return SG_OK;
}

static void free_dist(sg_dist *d) {
  sg_session_destroy(d->s);
  sg__dist_offload_stop(&DP(d)->offload); /* after the session that was bound to it */
  sg__dist_plan_free(&DP(d)->plan);
  sg__dist_ring_free(&d->compute_ring);
  sg__dist_ring_free(&d->sched_ring);
  sg__free(DP(d)->flat);
  sg__free(d->trace_path);
  sg__dist_snap_free(&DP(d)->snap);
  sg__dist_zero_free(&DP(d)->zero);
  sg__free(DP(d)->shards);
  sg__free(DP(d)->accum);
  sg__free(DP(d)->accum_off);
  sg__free(d->old_comms);
  sg_fault_plan_destroy(DP(d)->inject);
  sg__dist_rejoin_free(d);
  sg_health_destroy(DP(d)->health);
  pthread_cond_destroy(&d->wake_sched);
  pthread_cond_destroy(&d->wake_compute);
  pthread_mutex_destroy(&d->mu);
  sg_graph_destroy(DP(d)->owned_graph); /* sg_dist_create_model's graph: last, everything above may use it */
  sg__free(d->impl);
  sg__free(d);
}

void sg__dist_give_up(sg_dist *d, sg_status st, char *msg, size_t cap) {
  snprintf(msg, cap, "%s", sg_last_error());
  /* This rank gives up: make its peers fail now rather than hang in the next
   * collective, or in the consistency check until dead_ms (a mismatch fails
   * every rank anyway). */
  if (d->comm != NULL) sg__dist_fail(d, st, "rank %d left the job while joining it: %s", d->rank, msg);
  sg__dist_sched_stop(d);
}

/* A create that failed: frees everything and returns `st` with its message. */
static sg_status abandon(sg_dist *d, sg_status st) {
  char msg[1024];
  sg__dist_give_up(d, st, msg, sizeof msg);
  free_dist(d);
  return sg__error(st, "%s", msg);
}

sg_status sg_dist_create(const sg_graph *g, const sg_dist_params *p, sg_dist **out) {
  if (out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_dist_create: out is NULL");
  *out = NULL;
  if (g == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_dist_create: graph is NULL");
  if (!g->finalized) return sg__error(SG_ERR_STATE, "sg_dist_create: finalize the graph first");
  sg_dist_params defaults = SG_DIST_PARAMS_INIT;
  if (p == NULL) p = &defaults;
  SG_CHECK(check_params(p));

  sg_dist *d = sg__calloc(1, sizeof *d);
  sg__par_data *dp = sg__calloc(1, sizeof *dp);
  if (d == NULL || dp == NULL) {
    sg__free(d);
    sg__free(dp);
    return sg__error(SG_ERR_NO_MEMORY, "sg_dist_create: out of memory");
  }
  d->strategy = &sg__par_data_strategy;
  d->impl = dp;
  d->away = 1; /* until the first sg_dist_step */
  d->g = g;
  d->p = *p;
  d->p.size = sizeof(sg_dist_params);
  /* Resolved once: the communicators of every epoch get this (0 = off). */
  int64_t hang = p->hang_ms > 0 ? p->hang_ms : 10 * (int64_t)p->dead_ms;
  if (p->hang_ms == 0 && hang < 10000) hang = 10000;
  d->p.hang_ms = p->hang_ms < 0 || p->heartbeat_ms == 0 ? 0 : hang > 86400000 ? 86400000 : (int)hang;
  d->comm_params = p->comm;
  d->rank = -1;
  DP(d)->loss = -1;
  d->tracing = p->trace || p->trace_path != NULL;
  if (p->trace_path && (d->trace_path = sg__strdup(p->trace_path)) == NULL) {
    sg__free(d->impl);
    sg__free(d);
    return sg__error(SG_ERR_NO_MEMORY, "sg_dist_create: out of memory");
  }
  d->p.trace_path = d->trace_path;
  sg_status st = sg__dist_init_sync(d, "sg_dist_create");
  if (st != SG_OK) {
    sg__free(d->trace_path);
    sg__free(d->impl);
    sg__free(d);
    return st;
  }
  if ((st = sg__dist_rejoin_init(d)) != SG_OK || (st = sg__dist_sched_start(d)) != SG_OK ||
      (st = prepare(d)) != SG_OK || (st = sg__dist_rejoin_receive(d)) != SG_OK)
    return abandon(d, st);
  d->p.device = NULL; /* the caller's string was needed by create only */
  *out = d;
  return SG_OK;
}

static sg_status data_destroy(sg_dist *d) {
  sg_status st = SG_OK;
  char msg[1024] = "";
  if (d->trace_path != NULL) {
    st = sg__dist_write_trace(d, d->trace_path);
    if (st != SG_OK) snprintf(msg, sizeof msg, "%s", sg_last_error());
  }
  sg__dist_sched_stop(d);
  if (st == SG_OK && d->comm_destroy_status != SG_OK) {
    st = d->comm_destroy_status;
    snprintf(msg, sizeof msg, "sg_dist_destroy: leaving the job: %.960s", d->fail_msg);
  }
  free_dist(d);
  return st == SG_OK ? SG_OK : sg__error(st, "%s", msg);
}

static sg_status data_set_input(sg_dist *d, const char *name, sg_dtype dtype, int ndim, const int64_t *dims,
                                void *data, bool copy) {
  return copy ? sg_session_set_input(d->s, name, dtype, ndim, dims, data)
              : sg_session_bind_input(d->s, name, dtype, ndim, dims, data);
}

static sg_status data_read(const sg_dist *d, const char *name, void *out, size_t bytes) {
  return sg_session_read(d->s, name, out, bytes);
}

static sg_status data_params_hash(const sg_dist *d, uint64_t *out) {
  uint64_t h = 1469598103934665603ull;
  for (uint32_t t = 0; t < d->g->n_tensors; t++) {
    const sg__tensor *T = &d->g->tensors[t];
    if (T->role != SG_ROLE_PARAMETER) continue;
    const unsigned char *b = sg__session_tensor_addr(d->s, (int32_t)t, NULL);
    if (b == NULL) continue;
    for (size_t k = 0; k < T->nbytes; k++) h = (h ^ b[k]) * 1099511628211ull;
  }
  *out = h;
  return SG_OK;
}

static const sg_health *data_health(const sg_dist *d) { return DP(d)->health; }

static sg_status data_join(sg_dist *d) {
  /* A restarted rank joins the running job instead (rejoin.c). */
  return DP(d)->rj.joining ? sg__dist_rejoin_join(d) : sg__par_join(d);
}

/* The replicas' global page table is collective while healthy, and must go
 * before its communicator. */
static void data_sched_fini(sg_dist *d) { sg__dist_replica_gmem_fini(d); }

const sg__par_strategy sg__par_data_strategy = {
    .name = "data",
    .set_input = data_set_input,
    .step = sg__par_data_step,
    .read = data_read,
    .params_hash = data_params_hash,
    .destroy = data_destroy,
    .health = data_health,
    .join = data_join,
    .sched_work_locked = sg__par_data_sched_work_locked,
    .sched_fini = data_sched_fini,
};

/* ---- the public functions: the handle's and the strategy's ----------------------- */

sg_status sg_dist_destroy(sg_dist *d) {
  if (d == NULL) return SG_OK;
  return d->strategy->destroy(d);
}

int sg_dist_rank(const sg_dist *d) { return d ? d->rank : -1; }
int sg_dist_size(const sg_dist *d) { return d ? d->size : 0; }
sg_session *sg_dist_session(sg_dist *d) { return d ? d->s : NULL; }
const sg_health *sg_dist_health(const sg_dist *d) {
  return d != NULL && d->strategy->health != NULL ? d->strategy->health(d) : NULL;
}

sg_status sg_dist_set_input(sg_dist *d, const char *name, sg_dtype dtype, int ndim, const int64_t *dims,
                            const void *data) {
  if (d == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_dist_set_input: d is NULL");
  return d->strategy->set_input(d, name, dtype, ndim, dims, (void *)data, true);
}

sg_status sg_dist_bind_input(sg_dist *d, const char *name, sg_dtype dtype, int ndim, const int64_t *dims,
                             void *data) {
  if (d == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_dist_bind_input: d is NULL");
  return d->strategy->set_input(d, name, dtype, ndim, dims, data, false);
}

sg_status sg_dist_read(const sg_dist *d, const char *name, void *out, size_t bytes) {
  if (d == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_dist_read: d is NULL");
  return d->strategy->read(d, name, out, bytes);
}

sg_status sg_dist_params_hash(const sg_dist *d, uint64_t *out) {
  if (d == NULL || out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_dist_params_hash: NULL argument");
  return d->strategy->params_hash(d, out);
}

sg_status sg_dist_get_stats(const sg_dist *d, sg_dist_stats *out) {
  if (d == NULL || out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_dist_get_stats: NULL argument");
  if (out->size < sizeof(sg_dist_stats))
    return sg__error(
        SG_ERR_INVALID_ARG,
        "sg_dist_get_stats: out->size is %zu, expected %zu; initialise it with SG_DIST_STATS_INIT", out->size,
        sizeof(sg_dist_stats));
  *out = d->stats;
  out->healthy_ranks = __atomic_load_n(&d->healthy, __ATOMIC_RELAXED);
  out->epoch = d->epoch;
  out->world_size = d->size;
  return SG_OK;
}

sg_status sg_dist_write_trace(sg_dist *d, const char *path) {
  if (d == NULL || path == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_dist_write_trace: NULL argument");
  if (!d->tracing)
    return sg__error(SG_ERR_STATE,
                     "sg_dist_write_trace: tracing is off; set sg_dist_params.trace or trace_path at create");
  return sg__dist_write_trace(d, path);
}
