/* The lifecycle every strategy shares (include/sgrt/dist.h): the checks of
 * sg_dist_params that hold in every mode, create (the handle, the
 * scheduler thread that joins the job, the strategy's build), destroy, the
 * consistency check, and the public functions that dispatch through the
 * strategy table. One path for every mode, so a fix to create, teardown or
 * a failed create's cleanup lands in all of them at once. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "parallel/dist_internal.h"

#define DEFAULT_TRACE_EVENTS ((size_t)1 << 18)
#define MAX_TRACE_EVENTS ((size_t)1 << 26)
#define MAX_HANG_MS 86400000

sg_dist_params sg_dist_params_init(void) { return (sg_dist_params)SG_DIST_PARAMS_INIT; }

/* ---- checks ------------------------------------------------------------------ */

sg_status sg__par_read_params(const char *fn, const sg_dist_params *given, sg_dist_params *p,
                              sg_comm_params *comm) {
  *p = (sg_dist_params)SG_DIST_PARAMS_INIT;
  *comm = (sg_comm_params)SG_COMM_PARAMS_INIT;
  SG_CHECK(sg__params_read(fn, SG__VERSIONED(sg_dist_params, comm, "SG_DIST_PARAMS_INIT"), p, given));
  SG_CHECK(sg__params_read(fn, SG__COMM_PARAMS_VERSIONS, comm, p->comm));
  p->comm = comm;
  return SG_OK;
}

bool sg__par_on_device(const sg_dist_params *p) {
  if (sg__session_host_mirror_env()) return true;
  const sg__backend_i *be = NULL;
  int device = 0;
  return p->device != NULL && sg__backend_parse("", p->device, &be, &device) == SG_OK &&
         be != &sg__cpu_backend;
}

sg_status sg__par_check_params(const sg_dist_params *p, const char *fn) {
  /* An unknown device is refused as a session refuses it (the modes check
   * what they support of a known one: sg__par_on_device). */
  if (p->device != NULL) {
    const sg__backend_i *be = NULL;
    int device = 0;
    SG_CHECK(sg__backend_parse(fn, p->device, &be, &device));
  }
  if (p->threads < 0)
    return sg__error(SG_ERR_INVALID_ARG, "%s: threads is %d (0 = all CPUs)", fn, p->threads);
  if (p->data == 0 || p->data < -1)
    return sg__error(SG_ERR_INVALID_ARG,
                     "%s: data is %d; the data-parallel degree is >= 1, or -1 for the world size / "
                     "(pipeline x tensor)",
                     fn, p->data);
  if (p->pipeline < 1)
    return sg__error(SG_ERR_INVALID_ARG, "%s: pipeline is %d, must be >= 1", fn, p->pipeline);
  if (p->tensor < 1) return sg__error(SG_ERR_INVALID_ARG, "%s: tensor is %d, must be >= 1", fn, p->tensor);
  if (p->micro_batches < 1)
    return sg__error(SG_ERR_INVALID_ARG, "%s: micro_batches is %d, must be >= 1", fn, p->micro_batches);
  if (p->heartbeat_ms < 0)
    return sg__error(SG_ERR_INVALID_ARG, "%s: heartbeat_ms is %d (0 turns heartbeats off)", fn,
                     p->heartbeat_ms);
  if (p->heartbeat_ms > 0 && p->dead_ms <= p->heartbeat_ms)
    return sg__error(SG_ERR_INVALID_ARG, "%s: dead_ms %d must exceed heartbeat_ms %d", fn, p->dead_ms,
                     p->heartbeat_ms);
  if (p->hang_ms < -1 || p->hang_ms > MAX_HANG_MS || (p->hang_ms > 0 && p->hang_ms <= p->heartbeat_ms))
    return sg__error(
        SG_ERR_INVALID_ARG,
        "%s: hang_ms is %d; 0 (max(10 x dead_ms, 10 s)), -1 (off), or above heartbeat_ms %d and at "
        "most %d",
        fn, p->hang_ms, p->heartbeat_ms, MAX_HANG_MS);
  if (p->qos < -1 || p->qos > SG_QOS_GRACEFUL_DEGRADE)
    return sg__error(SG_ERR_INVALID_ARG,
                     "%s: qos is %d; -1 (SG_QOS or strict), 0 strict, 1 best-effort or 2 graceful-degrade",
                     fn, p->qos);
  if (p->trace_events > MAX_TRACE_EVENTS)
    return sg__error(SG_ERR_INVALID_ARG, "%s: trace_events is %zu, at most %zu", fn, p->trace_events,
                     MAX_TRACE_EVENTS);
  if (!isfinite(p->repartition_p99_ms) || p->repartition_p99_ms > 3600000)
    return sg__error(SG_ERR_INVALID_ARG,
                     "%s: repartition_p99_ms is %g; 0 (200 ms), a threshold up to 3600000 ms, or < 0 (never)",
                     fn, p->repartition_p99_ms);
  if (!(p->repartition_cpu >= 0 && p->repartition_cpu <= 1))
    return sg__error(SG_ERR_INVALID_ARG, "%s: repartition_cpu is %g; 0 (0.85) or a utilisation in (0, 1]", fn,
                     p->repartition_cpu);
  if (p->heal != 0 && p->heal != 1)
    return sg__error(SG_ERR_INVALID_ARG, "%s: heal is %d; 0 (off) or 1 (heal a lost rank)", fn, p->heal);
  return SG_OK;
}

/* hang_ms resolved once: the communicators of every epoch get this (0 = off). */
static int resolve_hang_ms(const sg_dist_params *p) {
  if (p->hang_ms < 0 || p->heartbeat_ms == 0) return 0;
  int64_t hang = p->hang_ms > 0 ? p->hang_ms : 10 * (int64_t)p->dead_ms;
  if (p->hang_ms == 0 && hang < 10000) hang = 10000;
  return hang > MAX_HANG_MS ? MAX_HANG_MS : (int)hang;
}

/* ---- create and destroy --------------------------------------------------------- */

static sg_status init_sync(sg_dist *d, const char *fn) {
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

/* Everything; the scheduler thread is stopped (or never ran). */
static void free_all(sg_dist *d, bool sync_ready) {
  if (d->impl != NULL) d->strategy->free(d); /* its sessions before anything they point to */
  sg__dist_ring_free(&d->compute_ring);
  sg__dist_ring_free(&d->sched_ring);
  sg__free(d->trace_path);
  sg__free(d->old_comms);
  if (sync_ready) {
    pthread_cond_destroy(&d->wake_sched);
    pthread_cond_destroy(&d->wake_compute);
    pthread_mutex_destroy(&d->mu);
  }
  sg__free(d->impl);
  sg__free(d);
}

/* A create that failed after the scheduler's locks exist: this rank gives
 * up, so its peers are made to fail now rather than hang in the next
 * collective, or in the consistency check until dead_ms (a mismatch fails
 * every rank anyway); then everything goes and `st` is returned with the
 * cause's message, kept across the teardown. */
static sg_status abandon(sg_dist *d, sg_status st) {
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", sg_last_error());
  if (d->comm != NULL) sg__dist_fail(d, st, "rank %d left the job while joining it: %s", d->rank, msg);
  sg__dist_sched_stop(d);
  free_all(d, true);
  return sg__error(st, "%s", msg);
}

/* The statistics every strategy starts from; the build adds its own. */
static void init_stats(sg_dist *d) {
  d->stats = (sg_dist_stats)SG_DIST_STATS_INIT;
  d->stats.original_rank = d->orig_rank;
  d->stats.world_size = d->size;
  d->stats.shards = 1;
  d->stats.loss_mean = NAN;
}

sg_status sg__par_create(const sg__par_strategy *s, const sg__par_create_args *a, sg_dist **out) {
  const sg_dist_params *p = a->p;
  sg_dist *d = sg__calloc(1, sizeof *d);
  void *impl = sg__calloc(1, s->impl_bytes);
  if (d == NULL || impl == NULL) {
    sg__free(d);
    sg__free(impl);
    return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", a->fn);
  }
  d->strategy = s;
  d->impl = impl;
  d->away = 1; /* until the first sg_dist_step */
  d->p = *p;
  d->p.hang_ms = resolve_hang_ms(p);
  d->comm_params = *p->comm;
  d->p.comm = &d->comm_params;
  d->rank = -1;
  d->tracing = p->trace || p->trace_path != NULL;
  sg_status st = SG_OK;
  if (p->trace_path != NULL && (d->trace_path = sg__strdup(p->trace_path)) == NULL)
    st = sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", a->fn);
  d->p.trace_path = d->trace_path;
  if (st == SG_OK && d->tracing) {
    uint64_t cap = p->trace_events ? p->trace_events : DEFAULT_TRACE_EVENTS;
    st = sg__dist_ring_init(&d->compute_ring, cap);
    if (st == SG_OK) st = sg__dist_ring_init(&d->sched_ring, cap);
  }
  if (st == SG_OK && s->init != NULL) st = s->init(d, a);
  if (st != SG_OK || (st = init_sync(d, a->fn)) != SG_OK) {
    free_all(d, false);
    return st;
  }
  if ((st = sg__dist_sched_start(d)) != SG_OK) return abandon(d, st);
  init_stats(d);
  if ((st = s->build(d, a)) != SG_OK) return abandon(d, st);
  /* The caller's strings were needed by create only. */
  d->p.device = NULL;
  d->p.offload = d->p.offload_path = d->p.inject = NULL;
  *out = d;
  return SG_OK;
}

sg_status sg_dist_destroy(sg_dist *d) {
  if (d == NULL) return SG_OK;
  sg_status st = SG_OK;
  char msg[1024] = "";
  if (d->trace_path != NULL) {
    st = sg__dist_write_trace(d, d->trace_path);
    if (st != SG_OK) snprintf(msg, sizeof msg, "%s", sg_last_error());
  }
  if (d->strategy->quiesce != NULL) d->strategy->quiesce(d);
  sg__dist_sched_stop(d);
  if (st == SG_OK && d->comm_destroy_status != SG_OK) {
    st = d->comm_destroy_status;
    snprintf(msg, sizeof msg, "sg_dist_destroy: leaving the job: %.960s", d->fail_msg);
  }
  free_all(d, true);
  return st == SG_OK ? SG_OK : sg__error(st, "%s", msg);
}

/* ---- shared pieces of the strategies ------------------------------------------------ */

sg_status sg__par_job_check(sg_dist *d, void *arg) {
  const sg__par_check *c = arg;
  int64_t t0 = sg__now_ns();
  sg_comm_label(d->comm, "consistency check at create"); /* hang diagnosis (SPEC H7) */
  sg_status st = sg_comm_check_consistency(d->comm, c->hash, c->ids, c->n_ids);
  if (st == SG_ERR_SHAPE && c->what != NULL) {
    char why[900];
    snprintf(why, sizeof why, "%s", sg_last_error());
    return sg__error(st, "%s: %s", c->what, why);
  }
  SG_CHECK(st);
  /* Every rank leaves the allgather at about the same moment: the common
   * origin of the ranks' timelines. */
  int64_t t1 = sg__now_ns();
  pthread_mutex_lock(&d->mu);
  d->origin_ns = t1;
  sg__dist_record_locked(d, SG__EV_CHECK, t0, t1, 0);
  sg__dist_record_locked(d, SG__EV_HEALTH, t1, t1, d->last_healthy); /* the counter's first sample */
  pthread_mutex_unlock(&d->mu);
  return SG_OK;
}

sg_status sg__par_failed_earlier(sg_dist *d) {
  sg_status st = sg__dist_failure(d);
  char why[1024];
  snprintf(why, sizeof why, "%s", sg_last_error()); /* sg__error writes the buffer it would read */
  return sg__error(st, "sg_dist_step: the job failed earlier: %s", why);
}

void sg__par_record(sg_dist *d, sg__dist_ev_kind kind, int64_t t0, int64_t t1, int32_t id) {
  if (!d->tracing) return;
  sg__dist_event e = {
      t0 - d->origin_ns, t1 - d->origin_ns, id, (uint32_t)d->stats.steps + 1, (uint8_t)kind, 0, {0}};
  sg__dist_ring_put(&d->compute_ring, &e);
}

/* ---- the public functions: the handle's and the strategy's ----------------------- */

/* Between calls the rank is "away" (sg__comm_set_away): its program may
 * evaluate or write a checkpoint for as long as the communicator's timeout
 * allows without the hang check (SPEC H7) calling it stuck; the scheduler
 * thread hands the flag to its communicator. */
sg_status sg_dist_step(sg_dist *d) {
  if (d == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_dist_step: d is NULL");
  __atomic_store_n(&d->away, 0, __ATOMIC_RELAXED);
  sg_status st = d->strategy->step(d);
  __atomic_store_n(&d->away, 1, __ATOMIC_RELAXED);
  if (st == SG_OK) sg__dist_profile_step(d, d->stats.step_ms);
  return st;
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
  if (name == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_dist_read: name is NULL");
  return d->strategy->read(d, name, out, bytes);
}

sg_status sg_dist_params_hash(const sg_dist *d, uint64_t *out) {
  if (d == NULL || out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_dist_params_hash: NULL argument");
  return d->strategy->params_hash(d, out);
}

sg_status sg_dist_get_stats(const sg_dist *d, sg_dist_stats *out) {
  if (d == NULL || out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_dist_get_stats: NULL argument");
  sg_dist_stats now = d->stats;
  now.size = sizeof now;
  now.healthy_ranks = __atomic_load_n(&d->healthy, __ATOMIC_RELAXED);
  now.epoch = d->epoch;
  now.world_size = d->size;
  return sg__out_write("sg_dist_get_stats", SG__VERSIONED(sg_dist_stats, steps, "SG_DIST_STATS_INIT"), out,
                       &now);
}

sg_status sg_dist_write_trace(sg_dist *d, const char *path) {
  if (d == NULL || path == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_dist_write_trace: NULL argument");
  if (!d->tracing)
    return sg__error(SG_ERR_STATE,
                     "sg_dist_write_trace: tracing is off; set sg_dist_params.trace or trace_path at create");
  return sg__dist_write_trace(d, path);
}
