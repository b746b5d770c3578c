/* Rollback snapshots for checkpoint-free recovery (docs/resilience.md): in
 * data parallelism every rank holds the full parameters and optimizer state,
 * so the survivors themselves are the replicas; what a failure in the middle
 * of a step can break is consistency (some ranks applied step s's update,
 * others did not). Each step therefore copies parameters, state and
 * optimizer state, as they were when it started, into the slot of the step's
 * label; recovery restores the members' common label.
 *
 * Who copies what: state (batch-norm statistics) is written by forward, so
 * the compute thread copies it before the step starts (it is small).
 * Parameters and optimizer state are written only by the updates, so the
 * scheduler thread copies them while forward and backward run, in chunks
 * between its bucket allreduces (which go first); the hook before the first
 * update waits for the copy to be complete. */
#include <string.h>

#include "parallel/dist_internal.h"

/* A chunk of the scheduler's copy: short enough not to delay a bucket that
 * becomes ready, or a heartbeat, by more than a millisecond or two. */
#define CHUNK_BYTES ((size_t)4 << 20)

sg_status sg__dist_snap_init(sg_dist *d) {
  sg__dist_snap *s = &DP(d)->snap;
  int32_t n = sg_graph_num_tensors(d->g);
  size_t cap = n > 0 ? (size_t)n : 1;
  s->addr = sg__calloc(cap, sizeof *s->addr);
  s->bytes = sg__calloc(cap, sizeof *s->bytes);
  s->off = sg__calloc(cap, sizeof *s->off);
  s->sync = sg__calloc(cap, sizeof *s->sync);
  s->tensor = sg__calloc(cap, sizeof *s->tensor);
  if (s->addr == NULL || s->bytes == NULL || s->off == NULL || s->sync == NULL || s->tensor == NULL)
    return sg__error(SG_ERR_NO_MEMORY, "sg_dist_create: out of memory for the rollback snapshot");
  for (int32_t t = 0; t < n; t++) {
    sg_tensor_info info;
    if (sg_graph_tensor_info(d->g, (sg_tensor){t}, &info) != SG_OK) continue;
    if (info.role != SG_ROLE_PARAMETER && info.role != SG_ROLE_STATE && info.role != SG_ROLE_OPTIMIZER_STATE)
      continue;
    /* Plain data parallelism rolls forward (recovery.c): every member holds
     * the parameters and optimizer state, so only the state forward changes
     * (batch-norm statistics, small) needs a copy. ZeRO-1 shards the optimizer
     * state, and its recovery rolls back to this snapshot. */
    if (!DP(d)->zero.on && info.role != SG_ROLE_STATE) continue;
    size_t bytes;
    void *addr = sg__session_tensor_host(d->s, t, &bytes);
    if (addr == NULL && sg__session_tensor_addr(d->s, t, NULL) != NULL)
      return SG_ERR_NO_MEMORY; /* reported */
    if (addr == NULL || bytes == 0) continue;
    s->tensor[s->n] = t;
    s->addr[s->n] = addr;
    s->bytes[s->n] = bytes;
    s->off[s->n] = s->total;
    s->sync[s->n++] = info.role == SG_ROLE_STATE;
    s->total += bytes;
  }
  for (int k = 0; k < 2; k++) {
    s->slot[k] = sg__malloc(s->total ? s->total : 1);
    if (s->slot[k] == NULL)
      return sg__error(SG_ERR_NO_MEMORY,
                       "sg_dist_create: out of memory for the rollback snapshot (2 x %zu bytes)", s->total);
    /* Touch every page now: the first steps' copies would otherwise pay the
     * page faults (on ResNet-50, 200 ms instead of 10). */
    memset(s->slot[k], 0, s->total);
  }
  return SG_OK;
}

void sg__dist_snap_free(sg__dist_snap *s) {
  sg__free(s->addr);
  sg__free(s->bytes);
  sg__free(s->off);
  sg__free(s->sync);
  sg__free(s->tensor);
  sg__free(s->slot[0]);
  sg__free(s->slot[1]);
  *s = (sg__dist_snap){0};
}

sg_status sg__dist_snap_begin(sg_dist *d, uint64_t label) {
  sg__dist_snap *s = &DP(d)->snap;
  int k = (int)(label % 2);
  /* A step that stopped before its updates (a bad input) may have left a copy running. */
  sg__dist_snap_wait(d);
  /* Already there: a step redone after a rollback starts from the same state. */
  if (s->valid[k] && s->label[k] == label) {
    s->copy_ns = 0;
    return SG_OK;
  }
  s->valid[k] = false;
  s->label[k] = label;
  for (uint32_t i = 0; i < s->n; i++)
    if (s->sync[i]) {
      SG_CHECK(sg__session_pull(d->s, s->tensor[i]));
      memcpy(s->slot[k] + s->off[i], s->addr[i], s->bytes[i]);
    }
  pthread_mutex_lock(&d->mu);
  s->busy_slot = k;
  s->cursor = 0;
  s->copy_ns = 0;
  s->pending = true;
  pthread_cond_signal(&d->wake_sched);
  pthread_mutex_unlock(&d->mu);
  return SG_OK;
}

/* Copies up to CHUNK_BYTES of the parameters and optimizer state, resuming
 * at the cursor (a position in the slot); the last chunk completes the slot. */
void sg__dist_snap_chunk_locked(sg_dist *d) {
  sg__dist_snap *s = &DP(d)->snap;
  int k = s->busy_slot;
  size_t from = s->cursor;
  pthread_mutex_unlock(&d->mu);
  int64_t t0 = sg__now_ns();
  size_t budget = CHUNK_BYTES, at = from;
  for (uint32_t i = 0; i < s->n && budget > 0; i++) {
    size_t end = s->off[i] + s->bytes[i];
    if (s->sync[i] || end <= at) continue;
    if (at < s->off[i]) at = s->off[i];
    size_t lo = at - s->off[i], len = s->bytes[i] - lo;
    if (len > budget) len = budget;
    memcpy(s->slot[k] + at, (const char *)s->addr[i] + lo, len);
    at += len;
    budget -= len;
  }
  bool done = budget > 0; /* ran out of tensors before the budget */
  int64_t t1 = sg__now_ns();
  pthread_mutex_lock(&d->mu);
  s->cursor = at;
  s->copy_ns += t1 - t0;
  if (done) {
    s->pending = false;
    s->valid[k] = true;
    pthread_cond_broadcast(&d->wake_compute);
  }
}

void sg__dist_snap_wait(sg_dist *d) {
  pthread_mutex_lock(&d->mu);
  while (DP(d)->snap.pending) pthread_cond_wait(&d->wake_compute, &d->mu);
  pthread_mutex_unlock(&d->mu);
}

sg_status sg__dist_snap_restore(sg_dist *d, uint64_t label) {
  sg__dist_snap *s = &DP(d)->snap;
  int k = (int)(label % 2);
  if (!s->valid[k] || s->label[k] != label)
    return sg__error(SG_ERR_NOT_FOUND, "no rollback snapshot of step %llu", (unsigned long long)label);
  for (uint32_t i = 0; i < s->n; i++) {
    memcpy(s->addr[i], s->slot[k] + s->off[i], s->bytes[i]);
    SG_CHECK(sg__session_push(d->s, s->tensor[i]));
  }
  /* The other slot is ahead of the state now: it must be retaken when its step is redone. */
  s->valid[1 - k] = s->valid[1 - k] && s->label[1 - k] < label;
  return SG_OK;
}
