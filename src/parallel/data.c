/* The data strategy (sg_dist_create): every rank runs the whole training
 * graph on its share of the batch; the gradients are averaged in buckets
 * during backward (buckets.c, step.c, data_sched.c), optionally with the
 * optimizer state sharded (ZeRO-1, zero.c) or offloaded (offload.c), and a
 * failed rank is healed around (recovery.c, membership.c, rejoin.c). Here:
 * its checks, its build after joining, its teardown and its small queries. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "graph/graph.h"
#include "parallel/dist_internal.h"
#include "parallel/model.h"
#include "sgrt/devices.h"

/* Shards of a step (world size x micro_batches) stay far from INT_MAX. */
#define MAX_MICRO_BATCHES 65536

/* What only the data strategy reads (sg__par_check_params checked the rest). */
static sg_status check_params(const sg_dist_params *p) {
  const char *fn = "sg_dist_create";
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
  /* On a GPU the runtime reaches the slots through host views (hooks.h),
   * which plain data parallelism pulls and pushes where it reads and writes
   * them; ZeRO-1's shards and the offload tiers bind host memory as slots. */
  bool offloading = p->offload != NULL && strcmp(p->offload, "none") != 0;
  if (sg__par_on_device(p) && (p->zero != 0 || offloading))
    return sg__error(SG_ERR_UNSUPPORTED,
                     "%s: %s on device '%s'%s is not supported yet: data parallelism on a GPU keeps the "
                     "whole optimizer state on the device (zero 0, offload none)",
                     fn, p->zero != 0 ? "zero 1 (sharded optimizer state)" : "offload",
                     p->device ? p->device : "cpu",
                     sg__session_host_mirror_env() ? " (SG_HOST_MIRROR=1, which runs the GPU path)" : "");
  if (p->zero == 1 && offloading)
    return sg__error(SG_ERR_UNSUPPORTED,
                     "%s: zero 1 with offload '%.32s': ZeRO-1 keeps a rank's share of the optimizer state in "
                     "its session; offloading it is not supported yet",
                     fn, p->offload);
  if (p->sync_batch_norm != 0 && p->sync_batch_norm != 1)
    return sg__error(SG_ERR_INVALID_ARG, "%s: sync_batch_norm is %d; 0 (off) or 1", fn, p->sync_batch_norm);
  if (p->sync_batch_norm == 1 && (p->feed != NULL || p->micro_batches > 1))
    return sg__error(
        SG_ERR_UNSUPPORTED,
        "%s: sync_batch_norm 1 with %s: a rank that runs several shards in a step would not meet "
        "its peers in the statistics' sums; set %s",
        fn, p->feed != NULL ? "a feed callback (self-healing)" : "micro_batches > 1",
        p->feed != NULL ? "feed to NULL" : "micro_batches 1");
  if (p->sync_batch_norm == 1 && sg__par_on_device(p))
    return sg__error(SG_ERR_UNSUPPORTED,
                     "%s: sync_batch_norm 1 on device '%s' is not supported yet (cpu only)", fn,
                     p->device ? p->device : "cpu");
  if (p->heal == 1 && p->feed == NULL)
    return sg__error(SG_ERR_INVALID_ARG,
                     "%s: heal 1 without a feed callback: data parallelism heals by feeding the lost ranks' "
                     "shards to the survivors; set sg_dist_params.feed",
                     fn);
  if (p->feed != NULL) { /* healing is on: the tier applies */
    sg_qos q = (sg_qos)p->qos;
    if (p->qos == -1) SG_CHECK(sg_qos_from_env(SG_QOS_STRICT, &q));
    /* best-effort retries a collective from the step's own gradients, which
     * ZeRO-1's reduce-scatter does not keep. */
    if (q == SG_QOS_BEST_EFFORT && p->zero == 1)
      return sg__error(SG_ERR_UNSUPPORTED,
                       "%s: QoS tier best-effort%s with zero 1: its retry averages the step's own gradients "
                       "again, which ZeRO-1 does not keep; use strict or zero 0",
                       fn, p->qos == -1 ? " (from SG_QOS)" : "");
  }
  bool offload;
  sg_gmem_tier tier;
  return sg__dist_offload_parse(p->offload, &offload, &tier);
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
      DP(d)->loss_addr = sg__session_tensor_host(d->s, t, &bytes);
      if (DP(d)->loss_addr != NULL) DP(d)->loss = t;
      return;
    }
}

/* Self-healing's pieces (docs/resilience.md): the original ranks, the
 * store's address for the agreement, the fault plan, and with a feed
 * callback the rollback snapshot and the buffer that accumulates the
 * gradients of extra shards. */
static sg_status prepare_healing(sg_dist *d) {
  SG_CHECK(sg__comm_env_resolve(&d->comm_params, &d->heal.env));
  if (d->p.qos == -1) {
    sg_qos q;
    SG_CHECK(sg_qos_from_env(SG_QOS_STRICT, &q));
    d->heal.qos = (int)q;
  } else {
    d->heal.qos = d->p.qos;
  }
  SG_CHECK(sg__dist_inject_init(d));
  if (d->p.feed == NULL) return SG_OK;
  if (d->p.heartbeat_ms > 0) {
    /* The states of the original ranks, for sg_dist_health(): fed with the
     * ranks' check-ins (checkin.c: DEGRADED), the failures each recovery
     * finds and its new epoch. The comm layer's failure detector decides
     * who is unreachable: no heartbeats go in, and the monitor's own
     * silence timeout is as long as it gets (it would otherwise take a
     * check-in period for silence). */
    sg_health_config hc = SG_HEALTH_CONFIG_INIT;
    hc.heartbeat_ms = d->p.heartbeat_ms;
    hc.unreachable_ms = 86400000;
    sg_health *h = NULL;
    SG_CHECK(sg_health_create(d->orig_size, d->orig_rank, &hc, sg__now_ms(), &h));
    /* The scheduler is running already and sends check-ins once it sees the
     * monitor: both are published under mu. */
    pthread_mutex_lock(&d->mu);
    d->heal.health = h;
    sg_status st = sg__dist_checkins_init(d);
    pthread_mutex_unlock(&d->mu);
    SG_CHECK(st);
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
  /* Graceful-degrade averages a failed step again over the survivors from
   * copies of the step's own gradients (recovery.c): one more gradient-sized
   * buffer, and a copy per bucket on the scheduler thread. ZeRO-1 keeps
   * redoing the step (its reduce-scatter leaves each rank a shard only). */
  DP(d)->keep_local =
      (d->heal.qos == SG_QOS_GRACEFUL_DEGRADE || d->heal.qos == SG_QOS_BEST_EFFORT) && !DP(d)->zero.on;
  if (DP(d)->keep_local) {
    DP(d)->local = sg__malloc(DP(d)->plan.total_bytes ? DP(d)->plan.total_bytes : 4);
    DP(d)->started = sg__calloc(DP(d)->plan.n_buckets ? DP(d)->plan.n_buckets : 1, 1);
    if (DP(d)->local == NULL || DP(d)->started == NULL)
      return sg__error(SG_ERR_NO_MEMORY,
                       "sg_dist_create: out of memory for graceful-degrade's gradient copy");
  }
  return SG_OK;
}

/* What the step's hooks touch between ops, the parameters' gradients
 * (sg__dist_grad_barrier), stays out of generated kernels; elementwise ops
 * elsewhere still fuse (hooks.h). */
static sg_status set_fuse_barrier(sg_dist *d, const sg__par_create_args *a) {
  uint8_t *mask = sg__dist_grad_barrier(d->g);
  if (mask == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_dist_create: out of memory");
  sg__dist_sync_bn_barrier(d->g, a->sync_bn, a->n_sync_bn,
                           mask);                          /* and the sums synchronized batch norm takes */
  sg_status st = sg__session_set_fuse_barrier(d->s, mask); /* copies it */
  sg__free(mask);
  return st;
}

/* The device of this rank's session: "cuda" without a number is GPU
 * local rank mod GPU count, as a torchrun program picks cuda:LOCAL_RANK, so
 * that the ranks of a machine spread over its GPUs (sharing them when there
 * are fewer); anything else as given. */
static const char *rank_device(const sg_dist *d, char *buf, size_t cap) {
  const char *dev = d->p.device;
  if (dev == NULL || strcmp(dev, "cuda") != 0) return dev;
  sg_gpu_device *gpus = NULL;
  size_t n = 0;
  if (sg_gpu_devices(&gpus, &n, NULL, NULL, NULL, 0) != SG_OK || n == 0) {
    sg_gpu_devices_free(gpus);
    return dev; /* the session says why there is none */
  }
  sg_gpu_devices_free(gpus);
  snprintf(buf, cap, "cuda:%d", sg_comm_local_rank(d->comm) % (int)n);
  return buf;
}

/* Everything after joining that the compute thread prepares. */
static sg_status data_build(sg_dist *d, const sg__par_create_args *a) {
  const sg_dist_params *p = &d->p;
  int world = DP(d)->rj.joining ? d->orig_size : d->size; /* a joiner's epoch may lack ranks still down */
  if (p->data != -1 && p->data != world)
    return sg__error(
        SG_ERR_INVALID_ARG,
        "sg_dist_create: data-parallel degree %d times pipeline 1 times tensor 1 must equal the world "
        "size %d",
        p->data, world);
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  char dev[32];
  sp.device = rank_device(d, dev, sizeof dev);
  sp.threads = p->threads;
  sp.seed = p->seed;
  SG_CHECK(sg_session_create(d->g, &sp, &d->s));
  SG_CHECK(sg__session_set_updates_last(d->s, true));
  SG_CHECK(set_fuse_barrier(d, a));
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
  SG_CHECK(sg__dist_sync_bn_start(d, a->sync_bn, a->n_sync_bn));
  if (DP(d)->zero.on) SG_CHECK(sg__dist_zero_init(d));
  find_loss(d);
  DP(d)->flat = sg__malloc(DP(d)->plan.flat_bytes + 64); /* + the loss */
  if (DP(d)->flat == NULL)
    return sg__error(SG_ERR_NO_MEMORY, "sg_dist_create: out of memory for the gradient buffer");
  SG_CHECK(prepare_healing(d));
  d->stats.has_loss = DP(d)->loss >= 0;
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
  sg__par_check check = {DP(d)->plan.topology_hash, DP(d)->plan.dtype_ids, DP(d)->plan.n_grads,
                         "sg_dist_create: the ranks disagree on the gradients, ZeRO or the precision of the "
                         "products (SG_MATMUL_PRECISION; the hash below covers all three)"};
  for (;;) {
    sg_status st = sg__dist_run_job(d, sg__par_job_check, &check);
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

/* The state, after the scheduler thread stopped (or never ran). */
static void data_free(sg_dist *d) {
  sg_session_destroy(d->s);
  d->s = NULL;
  sg__dist_offload_stop(&DP(d)->offload); /* after the session that was bound to it */
  sg__dist_plan_free(&DP(d)->plan);
  sg__dist_sync_bn_free(&DP(d)->sbn);
  sg__free(DP(d)->flat);
  sg__dist_snap_free(&DP(d)->snap);
  sg__dist_zero_free(&DP(d)->zero);
  sg__free(DP(d)->shards);
  sg__free(DP(d)->accum);
  sg__free(DP(d)->accum_off);
  sg__free(DP(d)->local);
  sg__free(DP(d)->started);
  sg_fault_plan_destroy(d->heal.inject);
  sg__dist_rejoin_free(d);
  sg_health_destroy(d->heal.health);
  sg__dist_checkins_free(d);
  sg_graph_destroy(DP(d)->owned_graph); /* sg_dist_create_model's graph: last, everything above may use it */
}

/* Before the scheduler starts: the checks that need d, and whether this
 * process rejoins a running job (SG_REJOIN). */
static sg_status data_init(sg_dist *d, const sg__par_create_args *a) {
  d->g = a->g;
  DP(d)->loss = -1;
  return sg__dist_rejoin_init(d);
}

static sg_status data_build_all(sg_dist *d, const sg__par_create_args *a) {
  SG_CHECK(data_build(d, a));
  return sg__dist_rejoin_receive(d); /* a joiner: the state from a member */
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
  uint64_t h = SG__FNV1A64_SEED;
  for (uint32_t t = 0; t < d->g->n_tensors; t++) {
    const sg__tensor *T = &d->g->tensors[t];
    if (T->role != SG_ROLE_PARAMETER) continue;
    const unsigned char *b = sg__session_tensor_host(d->s, (int32_t)t, NULL);
    if (b == NULL) continue;
    SG_CHECK(sg__session_pull(d->s, (int32_t)t));
    h = sg__fnv1a64(h, b, T->nbytes);
  }
  *out = h;
  return SG_OK;
}

static const sg_health *data_health(const sg_dist *d) { return d->heal.health; }

static sg_status data_join(sg_dist *d) {
  /* A restarted rank joins the running job instead (rejoin.c). */
  return DP(d)->rj.joining ? sg__dist_rejoin_join(d) : sg__par_join(d);
}

/* The replicas' global page table is collective while healthy, and must go
 * before its communicator. */
static void data_sched_fini(sg_dist *d) { sg__dist_replica_gmem_fini(d); }

/* The old communicator's buckets are gone with it. */
static void data_epoch_installed_locked(sg_dist *d) { DP(d)->posted = DP(d)->done = 0; }

const sg__par_strategy sg__par_data_strategy = {
    .name = "data",
    .id = 0,
    .impl_bytes = sizeof(sg__par_data),
    .init = data_init,
    .build = data_build_all,
    .set_input = data_set_input,
    .step = sg__par_data_step,
    .read = data_read,
    .params_hash = data_params_hash,
    .free = data_free,
    .health = data_health,
    .join = data_join,
    .sched_work_locked = sg__par_data_sched_work_locked,
    .sched_poll_locked = sg__dist_checkins_poll_locked,
    .sched_fini = data_sched_fini,
    .epoch_installed_locked = data_epoch_installed_locked,
};

sg_status sg_dist_create(const sg_graph *g, const sg_dist_params *p, sg_dist **out) {
  return sg__dist_create_data(g, p, NULL, 0, out);
}

sg_status sg__dist_create_data(const sg_graph *g, const sg_dist_params *p, const sg__sync_bn *bns, int n_bns,
                               sg_dist **out) {
  if (out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_dist_create: out is NULL");
  *out = NULL;
  if (g == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_dist_create: graph is NULL");
  if (!g->finalized) return sg__error(SG_ERR_STATE, "sg_dist_create: finalize the graph first");
  sg_dist_params q;
  sg_comm_params comm;
  SG_CHECK(sg__par_read_params("sg_dist_create", p, &q, &comm));
  p = &q;
  SG_CHECK(sg__par_check_params(p, "sg_dist_create"));
  SG_CHECK(check_params(p));
  /* The batch norms to synchronize are spelled out in the graph by sg_dist_create_model (sync_bn.c). */
  if (p->sync_batch_norm == 1 && bns == NULL)
    return sg__error(
        SG_ERR_INVALID_ARG,
        "sg_dist_create: sync_batch_norm 1 needs the forward graph: use sg_dist_create_model, which "
        "rewrites its batch norms before backward");
  sg__par_create_args a = {.fn = "sg_dist_create",
                           .p = p,
                           .g = g,
                           .data = p->data,
                           .pipeline = 1,
                           .tensor = 1,
                           .sync_bn = bns,
                           .n_sync_bn = n_bns};
  return sg__par_create(&sg__par_data_strategy, &a, out);
}
