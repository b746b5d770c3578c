/* The data strategy's side of the scheduler thread (the scheduler itself
 * is scheduler.c): the consistency check and the broadcast of rank 0's
 * state, and the gradient buckets' allreduces (reduce-scatters with ZeRO-1)
 * that the compute thread hands over during backward, snapshot chunks and
 * ZeRO-1's replica pushes between them. */
#include <stdio.h>
#include <string.h>

#include "parallel/dist_internal.h"

/* A tensor's slot as i64 elements, its last bytes through an 8-byte bounce
 * buffer: broadcast moves bytes, whatever the tensor's dtype. */
static sg_status broadcast_bytes(sg_comm *c, void *addr, size_t bytes, int root) {
  size_t whole = bytes / 8, tail = bytes % 8;
  if (whole) SG_CHECK(sg_comm_broadcast(c, addr, whole, SG_I64, root));
  if (tail) {
    uint64_t last = 0;
    memcpy(&last, (char *)addr + whole * 8, tail);
    SG_CHECK(sg_comm_broadcast(c, &last, 1, SG_I64, root));
    memcpy((char *)addr + whole * 8, &last, tail);
  }
  return SG_OK;
}

sg_status sg__dist_job_broadcast(sg_dist *d, void *arg) {
  int root = arg != NULL ? *(const int *)arg : 0; /* a rejoin's sender (rejoin.c), else rank 0 */
  int64_t t0 = sg__now_ns();
  sg_comm_label(d->comm, "broadcast of parameters and state"); /* hang diagnosis (SPEC H7) */
  sg_status st = SG_OK;
  for (int32_t t = 0; t < sg_graph_num_tensors(d->g) && st == SG_OK; t++) {
    sg_tensor_info info;
    if (sg_graph_tensor_info(d->g, (sg_tensor){t}, &info) != SG_OK) continue;
    /* ZeRO-1: each rank keeps its own share of the optimizer state (buckets.c's topology agrees). */
    bool opt_state = info.role == SG_ROLE_OPTIMIZER_STATE;
    if (info.role != SG_ROLE_PARAMETER && info.role != SG_ROLE_STATE && (!opt_state || DP(d)->zero.on))
      continue;
    /* On a device through the host views (hooks.h): the root's from its slots, the others' back to theirs. */
    size_t bytes;
    void *addr = sg__session_tensor_host(d->s, t, &bytes);
    if (addr != NULL && d->rank == root) st = sg__session_pull(d->s, t);
    if (addr != NULL && st == SG_OK) st = broadcast_bytes(d->comm, addr, bytes, root);
    if (addr != NULL && st == SG_OK && d->rank != root) st = sg__session_push(d->s, t);
    if (st != SG_OK)
      sg__dist_fail(d, SG_ERR_COMM, "rank %d: broadcasting '%s' from rank %d failed: %s", d->rank, info.name,
                    root, sg_last_error());
  }
  pthread_mutex_lock(&d->mu);
  sg__dist_record_locked(d, SG__EV_BCAST, t0, sg__now_ns(), 0);
  pthread_mutex_unlock(&d->mu);
  /* Hang diagnosis (SPEC H7) covers the steps' collectives from here on, not
   * the check and this broadcast: before them a rank may legitimately take
   * long (rank 0 loading a checkpoint). */
  if (st == SG_OK) st = sg_comm_set_hang_timeout(d->comm, d->p.hang_ms);
  return st;
}

/* ---- gradient buckets --------------------------------------------------------- */

/* After a recovery a member may run several shards of the original world:
 * the earlier shards' gradients (accum) join this one's before the
 * allreduce, which then sums and divides by the number of shards. */
void sg__dist_add_accum(const sg_dist *d, uint32_t first, uint32_t count) {
  for (uint32_t i = first; i < first + count; i++) {
    float *g = DP(d)->plan.grads[i].addr;
    const float *a = DP(d)->accum + DP(d)->accum_off[i];
    size_t n = DP(d)->plan.grads[i].bytes / 4;
    for (size_t k = 0; k < n; k++) g[k] += a[k];
  }
}

static void divide(float *x, size_t n, int by) {
  for (size_t k = 0; k < n; k++) x[k] /= (float)by;
}

/* Averages bucket b over the ranks. A gradient of SG__DIST_INPLACE_BYTES or
 * more is reduced in its own slot: copying it in and out of a staging buffer
 * costs more CPU than a collective of its own (on ResNet-50 the copies were
 * half of the scheduler's CPU time). The smaller ones go through the flat
 * buffer together, one collective for all of them. The loss (if any) rides
 * along at the end of the last bucket's flat part: it exists since the
 * forward pass, and reporting the global loss then costs no message of its
 * own. */
static sg_status allreduce_bucket(sg_dist *d, uint32_t b, float *loss_mean) {
  const sg__dist_bucket *bk = &DP(d)->plan.buckets[b];
  const sg__dist_grad *gr = &DP(d)->plan.grads[bk->first];
  bool with_loss = b + 1 == DP(d)->plan.n_buckets && DP(d)->loss_addr != NULL;
  /* AVG while every member has one shard: the failure-free path, bitwise as before. */
  sg_reduce_op op = DP(d)->sum_div > 0 ? SG_REDUCE_SUM : SG_REDUCE_AVG;
  if (DP(d)->keep_local) /* graceful-degrade: the step's own gradients, should it be averaged again */
    for (uint32_t i = 0; i < bk->count; i++)
      memcpy(DP(d)->local + DP(d)->accum_off[bk->first + i], gr[i].addr, gr[i].bytes);
  if (DP(d)->accum_on) sg__dist_add_accum(d, bk->first, bk->count);
  float loss = 0;
  if (with_loss) memcpy(&loss, DP(d)->loss_addr, 4);
  if (with_loss && DP(d)->accum_on) loss += DP(d)->accum_loss;
  if (d->size == 1 && DP(d)->sum_div == 0) { /* the average of one rank: nothing to move */
    if (with_loss) *loss_mean = loss;
    return SG_OK;
  }
  char *flat = DP(d)->flat;
  size_t off = 0;
  for (uint32_t i = 0; i < bk->count; i++) {
    if (gr[i].bytes >= SG__DIST_INPLACE_BYTES) {
      if (d->size > 1)
        SG_CHECK(sg_comm_allreduce(d->comm, gr[i].addr, gr[i].addr, gr[i].bytes / 4, SG_F32, op));
      if (DP(d)->sum_div > 0) divide(gr[i].addr, gr[i].bytes / 4, DP(d)->sum_div);
      continue;
    }
    memcpy(flat + off, gr[i].addr, gr[i].bytes);
    off += gr[i].bytes;
  }
  size_t n = off / 4;
  if (with_loss) memcpy(flat + 4 * n++, &loss, 4);
  if (n == 0) return SG_OK;
  if (d->size > 1) SG_CHECK(sg_comm_allreduce(d->comm, flat, flat, n, SG_F32, op));
  if (DP(d)->sum_div > 0) divide((float *)(void *)flat, n, DP(d)->sum_div);
  off = 0;
  for (uint32_t i = 0; i < bk->count; i++) {
    if (gr[i].bytes >= SG__DIST_INPLACE_BYTES) continue;
    memcpy(gr[i].addr, flat + off, gr[i].bytes);
    off += gr[i].bytes;
  }
  if (with_loss) memcpy(loss_mean, flat + 4 * (n - 1), 4);
  return SG_OK;
}

/* Called with mu held and a bucket waiting; returns with mu held. */
static void run_bucket_locked(sg_dist *d) {
  uint32_t b = DP(d)->done;
  uint64_t step = d->step;
  float loss = DP(d)->loss_mean;
  DP(d)->busy = true;
  if (DP(d)->started != NULL) DP(d)->started[b] = 1;
  pthread_mutex_unlock(&d->mu);
  char label[SG_COMM_LABEL_MAX + 1]; /* hang diagnosis (SPEC H7): what this bucket's collectives are */
  snprintf(label, sizeof label, "step %llu: %s of gradient bucket %u of %u", (unsigned long long)step,
           DP(d)->zero.on ? "reduce-scatter" : "allreduce", b + 1, DP(d)->plan.n_buckets);
  sg_comm_label(d->comm, label);
  int64_t t0 = sg__now_ns();
  sg_status st = DP(d)->zero.on ? sg__dist_zero_bucket(d, b, &loss) : allreduce_bucket(d, b, &loss);
  int64_t t1 = sg__now_ns();
  char msg[sizeof d->fail_msg];
  if (st != SG_OK) {
    const sg__dist_bucket *bk = &DP(d)->plan.buckets[b];
    snprintf(msg, sizeof msg, "rank %d, step %llu: %s of gradient bucket %u of %u (%zu bytes) failed: %s",
             d->rank, (unsigned long long)step, DP(d)->zero.on ? "reduce-scatter (ZeRO-1)" : "allreduce",
             b + 1, DP(d)->plan.n_buckets, bk->bytes, sg_last_error());
    sg_comm_abort(d->comm, msg);
  }
  pthread_mutex_lock(&d->mu);
  DP(d)->busy = false;
  sg__dist_record_locked(d, SG__EV_BUCKET, t0, t1, (int32_t)b);
  if (st != SG_OK) {
    sg__dist_fail_locked(d, SG_ERR_COMM, msg);
    /* The failure may have been recorded during the bucket (a ZeRO-1 replica push), before busy
     * cleared: wake a recovery waiting for it. */
    pthread_cond_broadcast(&d->wake_compute);
    return;
  }
  DP(d)->comm_ms += (double)(t1 - t0) * 1e-6;
  DP(d)->loss_mean = loss;
  DP(d)->done++;
  pthread_cond_broadcast(&d->wake_compute);
}

/* The strategy's sched_work_locked: a bucket first (the step waits for it),
 * then the step's snapshot, also after a failure (the recovery may roll back
 * to it), then ZeRO-1's buddy replica of the snapshot (replica.c). */
bool sg__par_data_sched_work_locked(sg_dist *d) {
  if (d->failed == SG_OK && DP(d)->done < DP(d)->posted) {
    run_bucket_locked(d);
    return true;
  }
  if (DP(d)->snap.pending) {
    sg__dist_snap_chunk_locked(d);
    return true;
  }
  if (DP(d)->zero.rep_pending && d->failed == SG_OK) {
    sg__dist_replica_push_locked(d);
    return true;
  }
  return false;
}
