/* Buddy replicas of the ZeRO-1 optimizer state, and recovery with sharded
 * state (docs/resilience.md "Recovery with ZeRO-1"). With ZeRO-1 a range's
 * optimizer state exists on its owner only; with a feed callback (recovery
 * on) each rank therefore copies it every step to its buddy, rank
 * (rank + 1) mod size: into one of two slots the buddy allocated in the
 * global page table (replica_gmem.c: sg_gmem_write through translation, the
 * slot's page version then set to the step by compare-and-swap), on the
 * scheduler thread while forward and backward run. The source is the
 * rank's rollback snapshot of the step (state as after `label` steps), which
 * stays unchanged until two steps later.
 *
 * The push of step k ends before the rank's reduce-scatter of step k starts;
 * so any rank that got past step k's reduce-scatter knows every owner pushed
 * step k. A buddy registers for recovery at most the latest step a readable
 * slot of its holds, so the agreed rollback step always has a replica of
 * every range.
 *
 * Recovery: every range is restored from its owner's snapshot or, for a
 * lost owner, from its buddy's slot of the rollback step (read at version
 * rollback + 2: SG_ERR_STALE when it holds another step; both lost: a clear
 * error); the ranges are cut again over the members and each state tensor
 * is sent from the member that holds it to its new owner (point to point, in
 * one global order every member follows, so no two members wait on each
 * other); a member that becomes the owner of state it had no memory for
 * binds new memory (sg_session_bind_state). Then the snapshot and the slots
 * are rebuilt for the new layout, over the new communicator. */
#include <stdio.h>
#include <string.h>

#include "graph/graph.h"
#include "parallel/dist_internal.h"

#define NO_LABEL UINT64_MAX
#define TAG 0x5a45 /* point-to-point tag of the state moves */

/* The optimizer-state tensors of rank r's range in the current layout, in
 * order (update op inputs), with their offsets in a replica slot's payload.
 * Returns the count; *bytes gets the payload size. ts/offs may be NULL. */
static uint32_t range_state(const sg_dist *d, int r, int32_t *ts, size_t *offs, size_t *bytes) {
  const sg__dist_zero *z = &DP(d)->zero;
  uint32_t n_order, n = 0;
  const int32_t *order = sg__session_order(d->s, &n_order);
  size_t at = 0;
  for (uint32_t i = z->first[r]; i < z->first[r + 1]; i++) {
    const sg__op *op = &d->g->ops[order[z->update_pos[i]]];
    for (int k = 1; k < op->n_inputs; k++) {
      int32_t t = op->inputs[k];
      if (t < 0 || d->g->tensors[t].role != SG_ROLE_OPTIMIZER_STATE) continue;
      if (ts) ts[n] = t;
      if (offs) offs[n] = at;
      n++;
      at += (d->g->tensors[t].nbytes + 7) / 8 * 8;
    }
  }
  *bytes = at;
  return n;
}

void sg__dist_replica_free(sg__dist_zero *z) {
  sg__free(z->rep_snap_off);
  sg__free(z->rep_bytes);
  sg__free(z->rep_pay_off);
  z->rep_snap_off = NULL;
  z->rep_bytes = NULL;
  z->rep_pay_off = NULL;
  z->n_rep = 0;
}

/* The slots for the current layout, pushes starting at step `next`: this rank holds rank
 * (rank-1)'s state as buddy, and pushes its own range's state from the snapshot. */
static sg_status replica_setup(sg_dist *d, uint64_t next) {
  sg__dist_zero *z = &DP(d)->zero;
  int owner = (z->rank + z->size - 1) % z->size;
  size_t mine = 0;
  range_state(d, owner, NULL, NULL, &z->slots.held_bytes); /* the setup takes it */
  uint32_t n = range_state(d, z->rank, NULL, NULL, &mine);
  sg__dist_replica_free(z);
  int32_t *ts = sg__malloc((n ? n : 1) * sizeof *ts);
  z->rep_snap_off = sg__malloc((n ? n : 1) * sizeof *z->rep_snap_off);
  z->rep_bytes = sg__malloc((n ? n : 1) * sizeof *z->rep_bytes);
  z->rep_pay_off = sg__malloc((n ? n : 1) * sizeof *z->rep_pay_off);
  sg_status st = SG_OK;
  if (!ts || !z->rep_snap_off || !z->rep_bytes || !z->rep_pay_off) {
    st = sg__error(SG_ERR_NO_MEMORY, "ZeRO-1: out of memory for the buddy replica's tables");
    n = 0;
  } else {
    range_state(d, z->rank, ts, z->rep_pay_off, &mine);
  }
  /* Where each of this rank's state tensors lies in the snapshot slots. */
  for (uint32_t j = 0; j < n && st == SG_OK; j++) {
    void *addr = sg__session_tensor_addr(d->s, ts[j], &z->rep_bytes[j]);
    uint32_t i = 0;
    while (i < DP(d)->snap.n && DP(d)->snap.addr[i] != addr) i++;
    if (addr == NULL || i == DP(d)->snap.n)
      st = sg__error(SG_ERR_INTERNAL, "ZeRO-1: state '%s' of this rank's range is not in its snapshot",
                     d->g->tensors[ts[j]].name);
    else z->rep_snap_off[j] = DP(d)->snap.off[i];
  }
  sg__free(ts);
  z->n_rep = n;
  z->replica_bytes = mine;
  /* Collective even when this rank failed above, so no other rank waits for it: it fails after. */
  char why[512];
  snprintf(why, sizeof why, "%s", sg_last_error());
  sg_status gs = sg__dist_replica_gmem_setup(d, next);
  return st != SG_OK ? sg__error(st, "%s", why) : gs;
}

sg_status sg__dist_replica_init(sg_dist *d) { return replica_setup(d, d->stats.steps); }

void sg__dist_replica_begin(sg_dist *d, uint64_t label) {
  if (DP(d)->zero.slots.gm == NULL) return;
  pthread_mutex_lock(&d->mu);
  DP(d)->zero.rep_label = label;
  DP(d)->zero.rep_pending = true;
  pthread_cond_signal(&d->wake_sched);
  pthread_mutex_unlock(&d->mu);
}

void sg__dist_replica_wait(sg_dist *d) {
  pthread_mutex_lock(&d->mu);
  while (DP(d)->zero.rep_pending && d->failed == SG_OK) pthread_cond_wait(&d->wake_compute, &d->mu);
  pthread_mutex_unlock(&d->mu);
}

void sg__dist_replica_push_locked(sg_dist *d) {
  sg__dist_zero *z = &DP(d)->zero;
  uint64_t label = z->rep_label;
  /* Scheduler thread: its snapshot of `label` is complete (the caller checked). */
  z->rep_busy = true;
  pthread_mutex_unlock(&d->mu);
  int64_t t0 = sg__now_ns();
  int buddy = (z->rank + 1) % z->size;
  sg_status st = sg__dist_replica_gmem_push(d, label, DP(d)->snap.slot[label % 2]);
  int64_t t1 = sg__now_ns();
  char msg[sizeof d->fail_msg];
  if (st != SG_OK) {
    snprintf(msg, sizeof msg,
             "rank %d, step %llu: replicating the optimizer state to buddy rank %d failed: %s", d->rank,
             (unsigned long long)label + 1, buddy, sg_last_error());
    sg_comm_abort(d->comm, msg);
  }
  pthread_mutex_lock(&d->mu);
  z->rep_ns = t1 - t0;
  z->rep_pending = false;
  z->rep_busy = false;
  pthread_cond_broadcast(&d->wake_compute);
  if (st != SG_OK) {
    pthread_mutex_unlock(&d->mu);
    sg__dist_fail(d, SG_ERR_COMM, "%s", msg);
    pthread_mutex_lock(&d->mu);
  }
}

void sg__dist_replica_quiesce(sg_dist *d) {
  pthread_mutex_lock(&d->mu);
  while (DP(d)->zero.rep_busy) pthread_cond_wait(&d->wake_compute, &d->mu);
  DP(d)->zero.rep_pending = false;
  pthread_mutex_unlock(&d->mu);
}

void sg__dist_replica_flush_locked(sg_dist *d) {
  while (DP(d)->snap.pending) sg__dist_snap_chunk_locked(d);
  if (DP(d)->zero.rep_pending && d->failed == SG_OK) sg__dist_replica_push_locked(d);
}

sg_status sg__dist_replica_committed(sg_dist *d, uint64_t committed, uint64_t *out) {
  *out = committed;
  if (DP(d)->zero.slots.gm == NULL) return SG_OK;
  uint64_t l;
  SG_CHECK(sg__dist_replica_latest(d, &l));
  if (l != NO_LABEL && l < committed) *out = l;
  return SG_OK;
}

/* ---- recovery ----------------------------------------------------------- */

typedef struct move {
  int32_t t;
  int from, to; /* new ranks: the holder, the new owner */
  bool from_replica;
  size_t rep_off; /* in the holder's slot payload */
} move;

typedef struct reshard {
  move *moves;
  uint32_t n;
  int rep_slot;
} reshard;

static sg_status move_job(sg_dist *d, void *arg) {
  reshard *r = arg;
  sg_comm_label(d->comm, "recovery: moving ZeRO-1 optimizer state to new owners"); /* SPEC H7 */
  for (uint32_t i = 0; i < r->n; i++) {
    move *m = &r->moves[i];
    size_t bytes = d->g->tensors[m->t].nbytes;
    /* Only the holder reads a source; only it knows which replica slot has the rollback step (its
     * own memory, read through the old epoch's sg_gmem: local, no communication). */
    const void *src = NULL;
    sg_status st = SG_OK;
    if (m->from == d->rank && m->from_replica)
      st = sg__dist_replica_held_ptr(d, r->rep_slot, m->rep_off, bytes, &src);
    else if (m->from == d->rank) src = sg__session_tensor_addr(d->s, m->t, NULL);
    void *dst = sg__session_tensor_addr(d->s, m->t, NULL);
    if (st == SG_OK && m->from == d->rank && m->to == d->rank) {
      if (src != dst) memcpy(dst, src, bytes);
    } else if (st == SG_OK && m->from == d->rank) {
      st = sg_comm_send(d->comm, m->to, TAG, src, bytes);
    } else if (st == SG_OK && m->to == d->rank) {
      st = sg_comm_recv(d->comm, m->from, TAG, dst, bytes);
    }
    if (st != SG_OK) {
      char why[512]; /* sg__error formats into the buffer sg_last_error() points at */
      snprintf(why, sizeof why, "%s", sg_last_error());
      return sg__error(st, "rank %d: recovery: moving optimizer state '%s' (ZeRO-1) failed: %s", d->rank,
                       d->g->tensors[m->t].name, why);
    }
  }
  return SG_OK;
}

static int new_rank_of(const sg_dist *d, int orig) {
  for (int i = 0; i < d->size; i++)
    if (d->members[i] == orig) return i;
  return -1;
}

/* Memory for a state tensor this rank now owns but had none for. */
static sg_status give_memory(sg_dist *d, int32_t t) {
  if (sg__session_tensor_addr(d->s, t, NULL) != NULL) return SG_OK;
  const sg__tensor *x = &d->g->tensors[t];
  void *mem = sg__arena_alloc(&DP(d)->zero.arena, x->nbytes ? x->nbytes : 1, 64);
  if (mem == NULL)
    return sg__error(SG_ERR_NO_MEMORY, "recovery: out of memory for optimizer state '%s'", x->name);
  return sg_session_bind_state(d->s, x->name, mem, x->nbytes);
}

sg_status sg__dist_zero_recover(sg_dist *d, const int *old_members, int old_size, uint64_t rollback) {
  sg__dist_zero *z = &DP(d)->zero;
  int old_rank = z->rank;
  /* Who holds each old range's state at `rollback`: its owner, else its buddy. */
  int holder[SG__DIST_MAX_RANKS];
  bool via_replica[SG__DIST_MAX_RANKS];
  int rep_slot = -1;
  for (int r = 0; r < old_size; r++) {
    int owner = new_rank_of(d, old_members[r]), buddy = new_rank_of(d, old_members[(r + 1) % old_size]);
    holder[r] = owner >= 0 ? owner : buddy;
    via_replica[r] = owner < 0;
    if (holder[r] < 0)
      return sg__error(SG_ERR_COMM,
                       "rank %d: recovery: ZeRO-1: original ranks %d and %d (its buddy) were both lost, and "
                       "with them the only copies of the optimizer state of parameter range %d of %d",
                       d->orig_rank, old_members[r], old_members[(r + 1) % old_size], r, old_size);
    if (via_replica[r] && holder[r] == d->rank) {
      sg_status st = sg__dist_replica_check(d, rollback, &rep_slot);
      char why[512]; /* sg__error formats into the buffer sg_last_error() points at */
      snprintf(why, sizeof why, "%s", sg_last_error());
      if (st != SG_OK)
        return sg__error(st, "rank %d: recovery: ZeRO-1: the replica of lost rank %d's optimizer state: %s",
                         d->orig_rank, old_members[r], why);
    }
  }
  /* The old layout's state lists (offsets within a replica slot), before re-cutting. */
  uint32_t n_all = 0;
  for (int r = 0; r < old_size; r++) {
    size_t b;
    n_all += range_state(d, r, NULL, NULL, &b);
  }
  move *moves = sg__malloc((n_all ? n_all : 1) * sizeof *moves);
  int32_t *ts = sg__malloc((n_all ? n_all : 1) * sizeof *ts);
  size_t *offs = sg__malloc((n_all ? n_all : 1) * sizeof *offs);
  if (!moves || !ts || !offs) {
    sg__free(moves);
    sg__free(ts);
    sg__free(offs);
    return sg__error(SG_ERR_NO_MEMORY, "recovery: out of memory");
  }
  uint32_t n = 0;
  for (int r = 0; r < old_size; r++) {
    size_t b;
    uint32_t c = range_state(d, r, ts + n, offs + n, &b);
    for (uint32_t j = 0; j < c; j++)
      moves[n + j] = (move){ts[n + j], holder[r], -1, via_replica[r], offs[n + j]};
    n += c;
  }
  sg__free(ts);
  sg__free(offs);
  /* The new cut; then each tensor's new owner. */
  sg_status st = sg__dist_zero_layout(d, d->rank, d->size);
  for (uint32_t j = 0; j < n && st == SG_OK; j++) {
    uint32_t n_order;
    const int32_t *order = sg__session_order(d->s, &n_order);
    for (uint32_t i = 0; i < DP(d)->plan.n_grads && moves[j].to < 0; i++) {
      const sg__op *op = &d->g->ops[order[z->update_pos[i]]];
      for (int k = 1; k < op->n_inputs; k++)
        if (op->inputs[k] == moves[j].t) moves[j].to = z->owner[i];
    }
    if (moves[j].to == d->rank) st = give_memory(d, moves[j].t);
  }
  reshard rs = {moves, n, rep_slot};
  if (st == SG_OK) st = sg__dist_run_job(d, move_job, &rs);
  sg__free(moves);
  if (st != SG_OK) return st;
  fprintf(stderr, "sgrt: rank %d: ZeRO-1: ranges cut again over %d members (was rank %d of %d)\n",
          d->orig_rank, d->size, old_rank, old_size);
  /* The snapshot covers the state this rank has memory for now; the slots the new buddy pairs, over the
   * new communicator (the old sg_gmem goes with the old one), pushes from the rollback step on. */
  sg__dist_snap_free(&DP(d)->snap);
  SG_CHECK(sg__dist_snap_init(d));
  SG_CHECK(replica_setup(d, rollback));
  sg__dist_zero_state_stats(d, &d->stats.optimizer_state_bytes, &d->stats.optimizer_state_total);
  d->stats.replica_bytes = z->replica_bytes;
  return SG_OK;
}
