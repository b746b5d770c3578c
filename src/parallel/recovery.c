/* Recovery on the compute thread (docs/resilience.md): after a peer's
 * failure the scheduler thread agrees on the new membership and builds its
 * communicator (membership.c); here the state rolls back to the members'
 * common step, and sg_dist_step() redoes the steps from there, the lost
 * ranks' shards spread over the members (strict QoS: the global batch and
 * the result are those of a failure-free run, RPO 0). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "parallel/dist_internal.h"

bool sg__dist_healable(sg_dist *d) {
  if (d->p.feed == NULL || DP(d)->excluded) return false;
  pthread_mutex_lock(&d->mu);
  /* SG_ERR_COMM: a peer's failure (a local error fails with its own status). */
  bool ok = d->failed == SG_ERR_COMM;
  pthread_mutex_unlock(&d->mu);
  return ok;
}

/* Graceful-degrade: whether every member completed the backward of the
 * failed step (and nobody its updates), so that the step can be averaged
 * again over the members instead of redone; and the shards they ran in it.
 * One decision for all: a MIN over (has it, its step, -its step) and a SUM
 * of the shards, on the new communicator. */
typedef struct rereduce_vote {
  int64_t min[3], sum[1];
} rereduce_vote;

static sg_status vote_job(sg_dist *d, void *arg) {
  rereduce_vote *v = arg;
  sg_comm_label(d->comm, "graceful-degrade: can the step be averaged again");
  SG_CHECK(sg_comm_allreduce(d->comm, v->min, v->min, 3, SG_I64, SG_REDUCE_MIN));
  return sg_comm_allreduce(d->comm, v->sum, v->sum, 1, SG_I64, SG_REDUCE_SUM);
}

static sg_status vote_rereduce(sg_dist *d, const sg__dist_heal *h, bool *yes, int *shards) {
  *yes = false;
  uint64_t step = d->stats.steps + 1; /* the step that failed here */
  bool have = DP(d)->local_step == step;
  rereduce_vote v = {{have ? 1 : 0, (int64_t)step, -(int64_t)step}, {have ? d->stats.shards : 0}};
  SG_CHECK(sg__dist_run_job(d, vote_job, &v));
  *yes = v.min[0] == 1 && v.min[1] == -v.min[2] && h->forward == h->rollback && h->rollback == d->stats.steps;
  *shards = (int)v.sum[0];
  return SG_OK;
}

/* The job resumes here (SPEC H4): the RTO of SPEC H6 ends; the step it resumes with is timed on top of it
 * (rto_step_ms, step.c). */
static void resumed(sg_dist *d, int64_t t0) {
  d->stats.recovery_ms = (double)(sg__now_ns() - t0) * 1e-6;
  d->stats.rto_ms = d->stats.detection_ms + d->stats.recovery_ms;
}

sg_status sg__dist_recover(sg_dist *d) {
  pthread_mutex_lock(&d->mu);
  /* The scheduler may still be inside the failed allreduce: let it leave. */
  while (DP(d)->busy) pthread_cond_wait(&d->wake_compute, &d->mu);
  pthread_mutex_unlock(&d->mu);
  int64_t t0 = sg__dist_announce_recovery(d);
  /* The scheduler finishes the step's snapshot first (it copies even after
   * a failure): the rollback may need it. */
  sg__dist_snap_wait(d);
  /* ZeRO-1: the old layout's members (whose ranges the replicas hold); no push runs during the recovery,
   * and the rollback is at most the latest replica this rank holds as buddy (replica.c). */
  int old_members[SG__DIST_MAX_RANKS], old_size = d->size;
  memcpy(old_members, d->members, (size_t)old_size * sizeof old_members[0]);
  if (DP(d)->zero.slots.gm != NULL) sg__dist_replica_quiesce(d);
  uint64_t committed;
  sg_status st = sg__dist_replica_committed(d, d->stats.steps, &committed);
  if (st != SG_OK) return st;
  sg__dist_heal h = {committed, 0, false, 0};
  st = sg__dist_run_job(d, sg__dist_job_recover, &h);
  if (st != SG_OK) {
    if (h.excluded) {
      DP(d)->excluded = true;
      d->stats.excluded = 1;
    }
    return st;
  }
  SG_CHECK(sg__dist_inject_recovery(d, SG_RECOVERY_TRANSFER));
  DP(d)->rereduce = false;
  d->stats.collective_retries += h.probes;
  /* Graceful-degrade averages the step again over the survivors; best-effort
   * does when the members are the same (its retry of the collective), and
   * recovers as strict otherwise. */
  bool same = h.retries > 0 && d->size == old_size;
  if (DP(d)->keep_local && (d->heal.qos == SG_QOS_GRACEFUL_DEGRADE || same)) {
    bool yes;
    int shards;
    SG_CHECK(vote_rereduce(d, &h, &yes, &shards));
    if (yes) {
      /* Graceful-degrade: nothing rolls back (this step's forward, its
       * batch-norm statistics included, stands); the step is averaged again
       * over the members' shards and completed (sg__dist_rereduce_step). */
      DP(d)->rereduce = true;
      DP(d)->rr_div = shards;
      sg_clear_error();
      d->stats.recoveries++;
      d->stats.rereduced_steps++;
      d->stats.epoch = d->epoch;
      d->stats.world_size = d->size;
      d->stats.detection_ms = h.detection_ms;
      DP(d)->heal_t0_ns = t0;
      resumed(d, t0);
      if (same)
        fprintf(
            stderr,
            "sgrt: rank %d: recovered: epoch %d, rank %d of %d, retrying step %llu's allreduce over the same "
            "%d members (best-effort: %d probe(s) of the cut link)\n",
            d->orig_rank, d->epoch, d->rank, d->size, (unsigned long long)d->stats.steps + 1, d->size,
            h.retries);
      else
        fprintf(stderr,
                "sgrt: rank %d: recovered: epoch %d, rank %d of %d, averaging step %llu again over the %d "
                "members' %d shards (graceful-degrade: %d dropped)\n",
                d->orig_rank, d->epoch, d->rank, d->size, (unsigned long long)d->stats.steps + 1, d->size,
                shards, sg__dist_n_shards(d) - shards);
      return SG_OK;
    }
  }
  /* Plain data parallelism rolls forward, so no member is past `forward`; ZeRO-1 rolls back to the
   * latest step every replica holds complete, which a push cut short by the failure may put one step
   * behind this rank. */
  if (h.rollback > d->stats.steps || h.forward - h.rollback > 1 ||
      (!DP(d)->zero.on && d->stats.steps > h.forward))
    return sg__error(SG_ERR_INTERNAL, "rank %d: recovery: members completed %llu..%llu steps, this rank %llu",
                     d->orig_rank, (unsigned long long)h.rollback, (unsigned long long)h.forward,
                     (unsigned long long)d->stats.steps);
  uint64_t resume;
  if (DP(d)->zero.on) {
    /* ZeRO-1 rolls back: the snapshot of the rollback step exists when this
     * rank started that step (it may have changed batch-norm statistics, or
     * completed it); otherwise it failed between steps and its state is
     * that step's. */
    st = sg__dist_snap_restore(d, h.rollback);
    if (st == SG_OK) d->stats.snapshot_restores++;
    if (st != SG_OK && d->stats.steps != h.rollback)
      return sg__error(SG_ERR_INTERNAL, "rank %d: recovery: no rollback snapshot of step %llu", d->orig_rank,
                       (unsigned long long)h.rollback);
    if (DP(d)->zero.slots.gm != NULL) SG_CHECK(sg__dist_zero_recover(d, old_members, old_size, h.rollback));
    resume = h.rollback;
  } else {
    /* Plain data parallelism rolls forward: every member holds the whole
     * state, a step's updates are all or nothing (step.c), and the members
     * are at most one step apart; so the state of the most advanced member is
     * the job's. First each rank puts back the batch-norm statistics of the
     * step it was in (the only snapshot kept: forward changes them), then,
     * when some member completed one step more than others, that member
     * broadcasts parameters, state and optimizer state to all. */
    st = sg__dist_snap_restore(d, d->stats.steps);
    if (st == SG_OK) d->stats.snapshot_restores++;
    else if (st != SG_ERR_NOT_FOUND) return st; /* the device's */
    if (h.forward > h.rollback) {
      int root = h.donor;
      fprintf(stderr,
              "sgrt: rank %d: members completed %llu or %llu steps: state of step %llu from rank %d\n",
              d->orig_rank, (unsigned long long)h.rollback, (unsigned long long)h.forward,
              (unsigned long long)h.forward, d->members[root]);
      SG_CHECK(sg__dist_run_job(d, sg__dist_job_broadcast, &root));
    }
    resume = h.forward;
  }
  sg_clear_error();
  if (resume < d->stats.steps) d->stats.redone_steps += d->stats.steps - resume;
  d->stats.steps = resume;
  /* One session step per completed step: a redone step draws the same
   * dropout masks as the first attempt would have. */
  sg__session_set_steps(d->s, resume);
  d->stats.recoveries++;
  d->stats.epoch = d->epoch;
  d->stats.world_size = d->size;
  d->stats.detection_ms = h.detection_ms;
  DP(d)->heal_t0_ns = t0;
  resumed(d, t0);
  fprintf(stderr, "sgrt: rank %d: recovered: epoch %d, rank %d of %d, %s step %llu\n", d->orig_rank, d->epoch,
          d->rank, d->size, DP(d)->zero.on ? "rolled back to" : "resuming after", (unsigned long long)resume);
  return SG_OK;
}
