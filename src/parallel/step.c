/* A data-parallel step on the compute thread: the session runs the whole
 * graph; its hooks hand each gradient bucket to the scheduler thread the
 * moment backward has produced it, and hold the first optimizer update until
 * every bucket has been averaged (SPEC C5). Nothing here allocates. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "parallel/dist_internal.h"
#include "parallel/model.h"

static sg_status wait_buckets(sg_dist *d) {
  int64_t t0 = sg__now_ns();
  pthread_mutex_lock(&d->mu);
  while (DP(d)->done < DP(d)->plan.n_buckets && d->failed == SG_OK)
    pthread_cond_wait(&d->wake_compute, &d->mu);
  bool failed = d->failed != SG_OK;
  pthread_mutex_unlock(&d->mu);
  int64_t t1 = sg__now_ns();
  d->stats.wait_ms += (double)(t1 - t0) * 1e-6;
  if (d->tracing) sg__par_record(d, SG__EV_WAIT, t0, t1, 0);
  return failed ? sg__dist_failure(d) : SG_OK;
}

/* The first update must not run before the scheduler has copied what it
 * overwrites into the step's snapshot. */
static void wait_snapshot(sg_dist *d) {
  if (d->p.feed == NULL) return;
  int64_t t0 = sg__now_ns();
  sg__dist_snap_wait(d);
  d->stats.snapshot_wait_ms = (double)(sg__now_ns() - t0) * 1e-6;
}

/* An injected 'behind' fault (inject.c): every rank's gradients are averaged,
 * and this rank gives the step up before its updates, as if the last
 * allreduce had failed here only; the others complete the step. */
static sg_status inject_behind(sg_dist *d) {
  if (d->heal.inject_behind == 0 || d->heal.inject_behind != d->stats.steps + 1) return SG_OK;
  d->heal.inject_behind = 0;
  sg__dist_fail(d, SG_ERR_COMM,
                "rank %d, step %llu: injected fault 'behind': the step is given up after its "
                "gradients were averaged, before the updates",
                d->rank, (unsigned long long)d->stats.steps + 1);
  return sg__dist_failure(d);
}

/* On a device (hooks.h's host views): the gradients of buckets [first,
 * end) from their slots to their host views, for the scheduler, and the
 * loss with the last bucket; after the allreduces, all the gradients back
 * for the updates. On the CPU the views are the slots: nothing to copy. */
static sg_status pull_buckets(sg_dist *d, uint32_t first, uint32_t end) {
  if (!sg__session_views_separate(d->s)) return SG_OK;
  for (uint32_t b = first; b < end; b++) {
    const sg__dist_bucket *bk = &DP(d)->plan.buckets[b];
    for (uint32_t i = bk->first; i < bk->first + bk->count; i++)
      SG_CHECK(sg__session_pull(d->s, DP(d)->plan.grads[i].grad));
  }
  if (end == DP(d)->plan.n_buckets && DP(d)->loss >= 0) SG_CHECK(sg__session_pull(d->s, DP(d)->loss));
  return SG_OK;
}

static sg_status push_grads(sg_dist *d) {
  if (!sg__session_views_separate(d->s)) return SG_OK;
  for (uint32_t i = 0; i < DP(d)->plan.n_grads; i++)
    SG_CHECK(sg__session_push(d->s, DP(d)->plan.grads[i].grad));
  return SG_OK;
}

static sg_status before_op(void *ctx, uint32_t pos) {
  sg_dist *d = ctx;
  /* A peer died: the rest of forward and backward would be wasted (the
   * recovery redoes the step), so the step ends here rather than in its
   * first allreduce -- except under graceful-degrade, which completes the
   * step's backward to average it again over the survivors. */
  if (pos < DP(d)->plan.wait_pos && !DP(d)->keep_local && __atomic_load_n(&d->failed_flag, __ATOMIC_ACQUIRE))
    return sg__dist_failure(d);
  if (pos == DP(d)->plan.wait_pos) {
    DP(d)->local_step = d->stats.steps + 1; /* every gradient of the step exists (graceful-degrade) */
    SG_CHECK(wait_buckets(d));
    wait_snapshot(d);
    SG_CHECK(inject_behind(d));
    SG_CHECK(push_grads(d));
  }
  if (d->tracing) DP(d)->op_t0 = sg__now_ns();
  return SG_OK;
}

static sg_status after_op(void *ctx, uint32_t pos) {
  sg_dist *d = ctx;
  if (d->tracing) sg__par_record(d, SG__EV_OP, DP(d)->op_t0, sg__now_ns(), (int32_t)pos);
  uint32_t ready = DP(d)->plan.posted_after[pos];
  /* An earlier shard's forward+backward: its gradients are accumulated, not sent. */
  if (!DP(d)->partial && ready > DP(d)->posted_local) {
    SG_CHECK(pull_buckets(d, DP(d)->posted_local, ready));
    DP(d)->posted_local = ready;
    pthread_mutex_lock(&d->mu);
    DP(d)->posted = ready;
    pthread_cond_signal(&d->wake_sched);
    pthread_mutex_unlock(&d->mu);
  }
  if (DP(d)->sbn.n_bns > 0) SG_CHECK(sg__dist_sync_bn_after(d, pos));
  /* A peer died: the rest of backward would be wasted. Once the updates run
   * (every gradient was averaged) they all run: a recovery rolls forward from
   * a member that completed the step, which needs a step's updates to be all
   * or nothing (recovery.c). */
  if (pos < DP(d)->plan.wait_pos && !DP(d)->keep_local && __atomic_load_n(&d->failed_flag, __ATOMIC_ACQUIRE))
    return sg__dist_failure(d);
  return SG_OK;
}

sg__step_hooks sg__dist_step_hooks(sg_dist *d) {
  /* Tracing times every op; otherwise only the positions that matter run a hook. */
  return (sg__step_hooks){d, before_op, after_op, d->tracing ? NULL : DP(d)->plan.before_at,
                          d->tracing ? NULL : DP(d)->plan.after_at};
}

/* Schedule positions [begin, end) of shard `stream - 1` (stream 0: no
 * shards) with the data-parallel hooks; `count_step` ends the step. */
static sg_status run_pass(sg_dist *d, uint32_t begin, uint32_t end, uint64_t stream, bool count_step) {
  sg__step_hooks h = sg__dist_step_hooks(d);
  sg__session_pass p = {.begin = begin, .end = end, .stream = stream, .hooks = &h, .count_step = count_step};
  return sg__session_run_pass(d->s, &p);
}

/* After a local error in the middle of a step: the peers cannot finish the
 * step without this rank's gradients, so the job fails here and now rather
 * than at their timeout; the scheduler is left idle. */
static sg_status abandon_step(sg_dist *d, sg_status st) {
  sg__dist_fail(d, st, "rank %d, step %llu failed on this rank: %s", d->rank,
                (unsigned long long)d->stats.steps + 1, sg_last_error());
  pthread_mutex_lock(&d->mu);
  while (DP(d)->busy) pthread_cond_wait(&d->wake_compute, &d->mu);
  pthread_mutex_unlock(&d->mu);
  return st;
}

/* Forward and backward of an earlier shard, its gradients (and loss) added
 * to accum. */
static sg_status run_partial_shard(sg_dist *d, bool first, uint64_t stream) {
  DP(d)->partial = true;
  sg_status st = run_pass(d, 0, DP(d)->plan.wait_pos, stream, false);
  DP(d)->partial = false;
  if (st != SG_OK) return st;
  SG_CHECK(pull_buckets(d, 0, DP(d)->plan.n_buckets));
  for (uint32_t i = 0; i < DP(d)->plan.n_grads; i++) {
    const float *g = DP(d)->plan.grads[i].addr;
    float *a = DP(d)->accum + DP(d)->accum_off[i];
    size_t n = DP(d)->plan.grads[i].bytes / 4;
    if (first) memcpy(a, g, n * 4);
    else
      for (size_t k = 0; k < n; k++) a[k] += g[k];
  }
  float loss = 0;
  if (DP(d)->loss_addr) memcpy(&loss, DP(d)->loss_addr, 4);
  DP(d)->accum_loss = first ? loss : DP(d)->accum_loss + loss;
  return SG_OK;
}

/* ZeRO-1 (zero.c): forward and backward post the buckets as usual (the last
 * one's reduce-scatter leaves this rank its range's averaged gradients);
 * then only this rank's updates run, and the parameters are allgathered. */
static sg_status zero_step(sg_dist *d, uint64_t stream) {
  SG_CHECK(run_pass(d, 0, DP(d)->plan.wait_pos, stream, false));
  SG_CHECK(wait_buckets(d));
  wait_snapshot(d);
  return sg__dist_zero_update(d);
}

/* One attempt at step index k (0-based): injection, snapshot, the shards,
 * the allreduces, the updates. */
static sg_status run_step(sg_dist *d, uint64_t k) {
  sg_status st = sg__dist_inject_step(d, k);
  if (st != SG_OK) return abandon_step(d, st);
  double sync_ms = 0;
  d->stats.snapshot_wait_ms = 0;
  if (d->p.feed != NULL) {
    int64_t s0 = sg__now_ns();
    sg__dist_replica_wait(d); /* its source is the snapshot slot reused now */
    st = sg__dist_snap_begin(d, k);
    if (st != SG_OK) return abandon_step(d, st);
    sg__dist_replica_begin(d, k);
    sync_ms = (double)(sg__now_ns() - s0) * 1e-6;
  }
  int *shards = DP(d)->shards;
  int ns = sg__dist_my_shards(d, shards), n_all = sg__dist_n_shards(d);
  pthread_mutex_lock(&d->mu);
  d->step = k + 1;
  DP(d)->posted = DP(d)->done = 0;
  DP(d)->comm_ms = 0;
  if (DP(d)->started != NULL) memset(DP(d)->started, 0, DP(d)->plan.n_buckets);
  pthread_mutex_unlock(&d->mu);
  DP(d)->posted_local = 0;
  d->stats.wait_ms = 0;
  DP(d)->accum_on = false;
  DP(d)->sum_div = sg__dist_sum_div(d);
  /* Earlier shards (micro-batches, or a lost rank's) run forward+backward
   * only; the last one runs the whole step, so its backward overlaps the
   * bucket allreduces. Each shard has its own dropout stream (micro.c). */
  for (int i = 0; i + 1 < ns && st == SG_OK; i++) {
    st = d->p.feed(d->p.feed_ctx, d, k, shards[i], n_all);
    if (st == SG_OK) st = run_partial_shard(d, i == 0, (uint64_t)shards[i] + 1);
    DP(d)->accum_on = st == SG_OK;
  }
  uint64_t stream = 0; /* without a feed callback, the program's one shard: a plain step */
  if (st == SG_OK && ns > 0) {
    st = d->p.feed(d->p.feed_ctx, d, k, shards[ns - 1], n_all);
    stream = (uint64_t)shards[ns - 1] + 1;
  }
  d->stats.shards = ns > 0 ? ns : 1;
  DP(d)->rr_accum_on = DP(d)->accum_on;
  DP(d)->rr_stream = stream;
  if (st == SG_OK)
    st = DP(d)->zero.on ? zero_step(d, stream) : run_pass(d, 0, DP(d)->plan.n_order, stream, true);
  if (st == SG_OK && DP(d)->plan.wait_pos == DP(d)->plan.n_order) {
    st = wait_buckets(d);
    wait_snapshot(d);
  }
  DP(d)->accum_on = false;
  if (d->p.feed != NULL && st == SG_OK) {
    pthread_mutex_lock(&d->mu);
    d->stats.snapshot_ms = sync_ms + (double)DP(d)->snap.copy_ns * 1e-6;
    pthread_mutex_unlock(&d->mu);
  }
  if (st != SG_OK) {
    if (__atomic_load_n(&d->failed_flag, __ATOMIC_ACQUIRE)) return st; /* the job's failure, reported */
    /* Before the first bucket went out nothing was communicated: the ranks
     * are still in step and the caller may fix the input and retry -- but
     * not after a device error, which stays (SPEC H6): the rank leaves the
     * job, and the others heal around it. */
    return DP(d)->posted_local == 0 && st != SG_ERR_DEVICE ? st : abandon_step(d, st);
  }
  return SG_OK;
}

sg_status sg__dist_rereduce_step(sg_dist *d) {
  DP(d)->rereduce = false;
  const sg__dist_plan *p = &DP(d)->plan;
  /* Buckets whose allreduce began may hold partial or old-membership sums:
   * back to the step's own gradients. The others were never touched. */
  for (uint32_t b = 0; b < p->n_buckets; b++) {
    if (!DP(d)->started[b]) continue;
    const sg__dist_bucket *bk = &p->buckets[b];
    for (uint32_t i = bk->first; i < bk->first + bk->count; i++)
      memcpy(p->grads[i].addr, DP(d)->local + DP(d)->accum_off[i], p->grads[i].bytes);
  }
  pthread_mutex_lock(&d->mu);
  memset(DP(d)->started, 0, p->n_buckets);
  DP(d)->accum_on = DP(d)->rr_accum_on;
  DP(d)->sum_div = DP(d)->rr_div; /* SUM, then divided by the shards the members ran */
  DP(d)->comm_ms = 0;
  DP(d)->done = 0;
  DP(d)->posted = p->n_buckets;
  pthread_cond_signal(&d->wake_sched);
  pthread_mutex_unlock(&d->mu);
  DP(d)->posted_local = p->n_buckets;
  d->stats.wait_ms = 0;
  /* The rest of the step: the wait for the buckets (before_op at wait_pos),
   * the updates, the step counted. */
  sg_status st = run_pass(d, p->wait_pos, p->n_order, DP(d)->rr_stream, true);
  if (st == SG_OK && p->wait_pos == p->n_order) st = wait_buckets(d);
  DP(d)->accum_on = false;
  return st;
}

/* An injected 'slow' fault: the step's compute (its time less the waits for
 * the others) takes slow_factor times as long, as on a slower CPU; the time
 * counts as busy (check-ins report it) and the others wait for this rank at
 * the next step's first allreduce. */
static void stretch(sg_dist *d, int64_t t0) {
  double busy_ms = (double)(sg__now_ns() - t0) * 1e-6 - d->stats.wait_ms;
  double extra_ms = busy_ms > 0 ? busy_ms * (d->heal.slow_factor - 1) : 0;
  sg__sleep_ms(fmin(extra_ms, 60000)); /* a bounded stall, never a hang */
}

/* A rank that goes on failing (e.g. a flapping link) gives up after this many
 * recoveries within one sg_dist_step() call. */
#define MAX_RECOVERIES_PER_STEP 8

sg_status sg__par_data_step(sg_dist *d) {
  if (DP(d)->excluded)
    return sg__error(SG_ERR_COMM, "sg_dist_step: rank %d was excluded from the job earlier", d->orig_rank);
  if (__atomic_load_n(&d->failed_flag, __ATOMIC_ACQUIRE) && !sg__dist_healable(d))
    return sg__par_failed_earlier(d);
  if (!DP(d)->broadcast_done) {
    SG_CHECK(sg__dist_run_job(d, sg__dist_job_broadcast, NULL));
    DP(d)->broadcast_done = true;
  }
  uint64_t target = d->stats.steps + 1;
  int recoveries = 0;
  int64_t t0 = sg__now_ns();
  while (d->stats.steps < target) {
    sg_status st;
    if (__atomic_load_n(&d->failed_flag, __ATOMIC_ACQUIRE)) {
      if (!sg__dist_healable(d)) return sg__dist_failure(d);
      if (++recoveries > MAX_RECOVERIES_PER_STEP)
        return sg__error(SG_ERR_COMM, "rank %d: step %llu: %d recoveries in a row failed to complete it",
                         d->orig_rank, (unsigned long long)target, MAX_RECOVERIES_PER_STEP);
      SG_CHECK(sg__dist_recover(d));
      if (!DP(d)->rereduce) continue; /* redo the step */
      st = sg__dist_rereduce_step(d); /* graceful-degrade: the failed step, averaged over the members */
    } else {
      /* Between steps: the check-ins that arrived go to the health monitor, and
       * a restarted rank asking to rejoin is admitted (rejoin.c). */
      sg__dist_checkins_feed(d);
      SG_CHECK(sg__dist_rejoin_poll(d));
      if (__atomic_load_n(&d->failed_flag, __ATOMIC_ACQUIRE)) continue; /* the admission failed: heal */
      t0 = sg__now_ns();
      st = run_step(d, d->stats.steps);
      if (st == SG_OK && d->heal.slow_factor > 1) stretch(d, t0);
    }
    if (st != SG_OK) {
      if (__atomic_load_n(&d->failed_flag, __ATOMIC_ACQUIRE) && sg__dist_healable(d)) continue;
      if (d->p.feed == NULL) return st; /* data parallelism heals through its feed (sg__dist_healable) */
      st = sg__dist_left_out(d, st);
      DP(d)->excluded = d->stats.excluded != 0;
      return st;
    }
    int64_t t1 = sg__now_ns();
    if (d->tracing) sg__par_record(d, SG__EV_STEP, t0, t1, 0);
    pthread_mutex_lock(&d->mu);
    d->stats.comm_ms = DP(d)->comm_ms;
    d->stats.loss_mean = DP(d)->loss_addr ? DP(d)->loss_mean : NAN;
    pthread_mutex_unlock(&d->mu);
    d->stats.steps++;
    d->stats.step_ms = (double)(t1 - t0) * 1e-6;
    d->heal.be_retries = 0; /* a completed step ends a best-effort failure streak */
    d->heal.be_t0_ms = 0;
    /* Graceful-degrade after a loss: each member runs its own shards only, the lost ranks' are dropped. */
    if (d->heal.qos == SG_QOS_GRACEFUL_DEGRADE && d->size != d->orig_size && d->p.feed != NULL)
      d->stats.dropped_shards += (uint64_t)(sg__dist_n_shards(d) - d->size * d->p.micro_batches);
    sg__dist_checkins_step_done(d, d->stats.step_ms - d->stats.wait_ms);
    if (DP(d)->heal_t0_ns != 0) { /* the first step completed after a recovery */
      d->stats.rto_step_ms = d->stats.detection_ms + (double)(t1 - DP(d)->heal_t0_ns) * 1e-6;
      DP(d)->heal_t0_ns = 0;
    }
  }
  return SG_OK;
}
