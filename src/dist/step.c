/* A data-parallel step on the compute thread: the session runs the whole
 * graph; its hooks hand each gradient bucket to the scheduler thread the
 * moment backward has produced it, and hold the first optimizer update until
 * every bucket has been averaged (SPEC C5). Nothing here allocates. */
#include <math.h>
#include <string.h>

#include "dist/dist_internal.h"

static void record(sg_dist *d, sg__dist_ev_kind kind, int64_t t0, int64_t t1, int32_t id) {
  sg__dist_event e = {
      t0 - d->origin_ns, t1 - d->origin_ns, id, (uint32_t)d->stats.steps + 1, (uint8_t)kind, 0, {0}};
  sg__dist_ring_put(&d->compute_ring, &e);
}

static sg_status wait_buckets(sg_dist *d) {
  int64_t t0 = sg__dist_now_ns();
  pthread_mutex_lock(&d->mu);
  while (d->done < d->plan.n_buckets && d->failed == SG_OK) pthread_cond_wait(&d->wake_compute, &d->mu);
  bool failed = d->failed != SG_OK;
  pthread_mutex_unlock(&d->mu);
  int64_t t1 = sg__dist_now_ns();
  d->stats.wait_ms += (double)(t1 - t0) * 1e-6;
  if (d->tracing) record(d, SG__EV_WAIT, t0, t1, 0);
  return failed ? sg__dist_failure(d) : SG_OK;
}

static sg_status before_op(void *ctx, uint32_t pos) {
  sg_dist *d = ctx;
  if (pos == d->plan.wait_pos) SG_CHECK(wait_buckets(d));
  if (d->tracing) d->op_t0 = sg__dist_now_ns();
  return SG_OK;
}

static sg_status after_op(void *ctx, uint32_t pos) {
  sg_dist *d = ctx;
  if (d->tracing) record(d, SG__EV_OP, d->op_t0, sg__dist_now_ns(), (int32_t)pos);
  uint32_t ready = d->plan.posted_after[pos];
  if (ready > d->posted_local) {
    d->posted_local = ready;
    pthread_mutex_lock(&d->mu);
    d->posted = ready;
    pthread_cond_signal(&d->wake_sched);
    pthread_mutex_unlock(&d->mu);
  }
  /* A peer died: the rest of backward would be wasted. */
  if (__atomic_load_n(&d->failed_flag, __ATOMIC_ACQUIRE)) return sg__dist_failure(d);
  return SG_OK;
}

sg_status sg__dist_install_hooks(sg_dist *d) {
  /* Tracing times every op; otherwise only the positions that matter run a hook. */
  sg__step_hooks h = {d, before_op, after_op, d->tracing ? NULL : d->plan.before_at,
                      d->tracing ? NULL : d->plan.after_at};
  return sg__session_set_hooks(d->s, &h);
}

/* After a local error in the middle of a step: the peers cannot finish the
 * step without this rank's gradients, so the job fails here and now rather
 * than at their timeout; the scheduler is left idle. */
static sg_status abandon_step(sg_dist *d, sg_status st) {
  sg__dist_fail(d, st, "rank %d, step %llu failed on this rank: %s", d->rank,
                (unsigned long long)d->stats.steps + 1, sg_last_error());
  pthread_mutex_lock(&d->mu);
  while (d->busy) pthread_cond_wait(&d->wake_compute, &d->mu);
  pthread_mutex_unlock(&d->mu);
  return st;
}

sg_status sg_dist_step(sg_dist *d) {
  if (d == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_dist_step: d is NULL");
  if (__atomic_load_n(&d->failed_flag, __ATOMIC_ACQUIRE)) {
    sg_status st = sg__dist_failure(d);
    return sg__error(st, "sg_dist_step: the job failed earlier: %s", sg_last_error());
  }
  if (!d->broadcast_done) {
    SG_CHECK(sg__dist_run_job(d, sg__dist_job_broadcast, NULL));
    d->broadcast_done = true;
  }
  int64_t t0 = sg__dist_now_ns();
  pthread_mutex_lock(&d->mu);
  d->step = d->stats.steps + 1;
  d->posted = d->done = 0;
  d->comm_ms = 0;
  pthread_mutex_unlock(&d->mu);
  d->posted_local = 0;
  d->stats.wait_ms = 0;
  sg_status st = sg_session_step(d->s);
  if (st == SG_OK && d->plan.wait_pos == d->plan.n_order) st = wait_buckets(d);
  if (st != SG_OK) {
    if (__atomic_load_n(&d->failed_flag, __ATOMIC_ACQUIRE)) return st; /* the job's failure, reported */
    /* Before the first bucket went out nothing was communicated: the ranks
     * are still in step and the caller may fix the input and retry. */
    return d->posted_local == 0 ? st : abandon_step(d, st);
  }
  int64_t t1 = sg__dist_now_ns();
  if (d->tracing) record(d, SG__EV_STEP, t0, t1, 0);
  pthread_mutex_lock(&d->mu);
  d->stats.comm_ms = d->comm_ms;
  d->stats.loss_mean = d->loss_addr ? d->loss_mean : NAN;
  pthread_mutex_unlock(&d->mu);
  d->stats.steps++;
  d->stats.step_ms = (double)(t1 - t0) * 1e-6;
  return SG_OK;
}
