/* The rank's scheduler thread (SPEC H1, DESIGN.md "How a step flows"): it
 * creates and owns the communicator, so the compute thread never touches the
 * transport; it allreduces each gradient bucket the compute thread hands
 * over, and between buckets it keeps polling, which sends heartbeats and
 * notices peers that went silent, however long a step computes. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "parallel/dist_internal.h"

/* ---- failures -------------------------------------------------------------- */

static void fail_locked(sg_dist *d, sg_status st, const char *msg) {
  if (d->failed != SG_OK) return; /* the first failure is the cause; later ones are its echoes */
  d->failed = st;
  sg__dist_note_detection(d);
  snprintf(d->fail_msg, sizeof d->fail_msg, "%s", msg);
  __atomic_store_n(&d->failed_flag, 1, __ATOMIC_RELEASE);
  pthread_cond_broadcast(&d->wake_compute);
}

void sg__dist_fail(sg_dist *d, sg_status st, const char *fmt, ...) {
  char msg[sizeof d->fail_msg];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&d->mu);
  fail_locked(d, st, msg);
  pthread_mutex_unlock(&d->mu);
  /* Any thread may abort: a collective blocked on the scheduler thread
   * returns within milliseconds, and sg_comm_destroy skips its barrier. */
  sg_comm_abort(d->comm, msg);
}

sg_status sg__dist_failure(sg_dist *d) {
  pthread_mutex_lock(&d->mu);
  char msg[sizeof d->fail_msg];
  memcpy(msg, d->fail_msg, sizeof msg);
  pthread_mutex_unlock(&d->mu);
  return sg__error(SG_ERR_COMM, "%s", msg);
}

/* ---- jobs ------------------------------------------------------------------- */

sg_status sg__dist_run_job(sg_dist *d, sg_status (*fn)(sg_dist *d, void *arg), void *arg) {
  sg__dist_job job = {fn, arg, SG_OK, "", false};
  pthread_mutex_lock(&d->mu);
  d->job = &job;
  pthread_cond_signal(&d->wake_sched);
  while (!job.done) pthread_cond_wait(&d->wake_compute, &d->mu);
  pthread_mutex_unlock(&d->mu);
  if (job.status != SG_OK) return sg__error(job.status, "%s", job.message);
  return SG_OK;
}

static void run_job_locked(sg_dist *d) {
  sg__dist_job *job = d->job;
  pthread_mutex_unlock(&d->mu);
  sg_clear_error();
  job->status = job->fn(d, job->arg);
  /* The error message lives in this thread's buffer: hand it over. */
  if (job->status != SG_OK) snprintf(job->message, sizeof job->message, "%s", sg_last_error());
  pthread_mutex_lock(&d->mu);
  job->done = true;
  d->job = NULL;
  pthread_cond_broadcast(&d->wake_compute);
}

static void record_locked(sg_dist *d, sg__dist_ev_kind kind, int64_t t0, int64_t t1, int32_t id) {
  if (!d->tracing) return;
  sg__dist_event e = {t0 - d->origin_ns, t1 - d->origin_ns, id, (uint32_t)d->step, (uint8_t)kind, 1, {0}};
  sg__dist_ring_put(&d->sched_ring, &e);
}

sg_status sg__dist_job_check(sg_dist *d, void *arg) {
  (void)arg;
  int64_t t0 = sg__now_ns();
  sg_comm_label(d->comm, "consistency check at create"); /* hang diagnosis (SPEC H7) */
  sg_status st =
      sg_comm_check_consistency(d->comm, d->plan.topology_hash, d->plan.dtype_ids, d->plan.n_grads);
  if (st != SG_OK) return st;
  /* Every rank leaves the allgather at about the same moment: the common
   * origin of the ranks' timelines. */
  int64_t t1 = sg__now_ns();
  pthread_mutex_lock(&d->mu);
  d->origin_ns = t1;
  record_locked(d, SG__EV_CHECK, t0, t1, 0);
  record_locked(d, SG__EV_HEALTH, t1, t1, d->last_healthy); /* the counter's first sample */
  pthread_mutex_unlock(&d->mu);
  return SG_OK;
}

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
    if (info.role != SG_ROLE_PARAMETER && info.role != SG_ROLE_STATE && (!opt_state || d->zero.on)) continue;
    size_t bytes;
    void *addr = sg__session_tensor_addr(d->s, t, &bytes);
    if (addr != NULL) st = broadcast_bytes(d->comm, addr, bytes, root);
    if (st != SG_OK)
      sg__dist_fail(d, SG_ERR_COMM, "rank %d: broadcasting '%s' from rank %d failed: %s", d->rank, info.name,
                    root, sg_last_error());
  }
  pthread_mutex_lock(&d->mu);
  record_locked(d, SG__EV_BCAST, t0, sg__now_ns(), 0);
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
    float *g = d->plan.grads[i].addr;
    const float *a = d->accum + d->accum_off[i];
    size_t n = d->plan.grads[i].bytes / 4;
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
  const sg__dist_bucket *bk = &d->plan.buckets[b];
  const sg__dist_grad *gr = &d->plan.grads[bk->first];
  bool with_loss = b + 1 == d->plan.n_buckets && d->loss_addr != NULL;
  /* AVG while every member has one shard: the failure-free path, bitwise as before. */
  sg_reduce_op op = d->sum_div > 0 ? SG_REDUCE_SUM : SG_REDUCE_AVG;
  if (d->accum_on) sg__dist_add_accum(d, bk->first, bk->count);
  float loss = 0;
  if (with_loss) memcpy(&loss, d->loss_addr, 4);
  if (with_loss && d->accum_on) loss += d->accum_loss;
  if (d->size == 1 && d->sum_div == 0) { /* the average of one rank: nothing to move */
    if (with_loss) *loss_mean = loss;
    return SG_OK;
  }
  char *flat = d->flat;
  size_t off = 0;
  for (uint32_t i = 0; i < bk->count; i++) {
    if (gr[i].bytes >= SG__DIST_INPLACE_BYTES) {
      if (d->size > 1)
        SG_CHECK(sg_comm_allreduce(d->comm, gr[i].addr, gr[i].addr, gr[i].bytes / 4, SG_F32, op));
      if (d->sum_div > 0) divide(gr[i].addr, gr[i].bytes / 4, d->sum_div);
      continue;
    }
    memcpy(flat + off, gr[i].addr, gr[i].bytes);
    off += gr[i].bytes;
  }
  size_t n = off / 4;
  if (with_loss) memcpy(flat + 4 * n++, &loss, 4);
  if (n == 0) return SG_OK;
  if (d->size > 1) SG_CHECK(sg_comm_allreduce(d->comm, flat, flat, n, SG_F32, op));
  if (d->sum_div > 0) divide((float *)(void *)flat, n, d->sum_div);
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
  uint32_t b = d->done;
  uint64_t step = d->step;
  float loss = d->loss_mean;
  d->busy = true;
  pthread_mutex_unlock(&d->mu);
  char label[SG_COMM_LABEL_MAX + 1]; /* hang diagnosis (SPEC H7): what this bucket's collectives are */
  snprintf(label, sizeof label, "step %llu: %s of gradient bucket %u of %u", (unsigned long long)step,
           d->zero.on ? "reduce-scatter" : "allreduce", b + 1, d->plan.n_buckets);
  sg_comm_label(d->comm, label);
  int64_t t0 = sg__now_ns();
  sg_status st = d->zero.on ? sg__dist_zero_bucket(d, b, &loss) : allreduce_bucket(d, b, &loss);
  int64_t t1 = sg__now_ns();
  char msg[sizeof d->fail_msg];
  if (st != SG_OK) {
    const sg__dist_bucket *bk = &d->plan.buckets[b];
    snprintf(msg, sizeof msg, "rank %d, step %llu: %s of gradient bucket %u of %u (%zu bytes) failed: %s",
             d->rank, (unsigned long long)step, d->zero.on ? "reduce-scatter (ZeRO-1)" : "allreduce", b + 1,
             d->plan.n_buckets, bk->bytes, sg_last_error());
    sg_comm_abort(d->comm, msg);
  }
  pthread_mutex_lock(&d->mu);
  d->busy = false;
  record_locked(d, SG__EV_BUCKET, t0, t1, (int32_t)b);
  if (st != SG_OK) {
    fail_locked(d, SG_ERR_COMM, msg);
    /* The failure may have been recorded during the bucket (a ZeRO-1 replica push), before busy
     * cleared: wake a recovery waiting for it. */
    pthread_cond_broadcast(&d->wake_compute);
    return;
  }
  d->comm_ms += (double)(t1 - t0) * 1e-6;
  d->loss_mean = loss;
  d->done++;
  pthread_cond_broadcast(&d->wake_compute);
}

/* ---- idle: heartbeats and peers' health ----------------------------------------- */

static void poll_locked(sg_dist *d) {
  uint64_t step = d->step;
  pthread_mutex_unlock(&d->mu);
  sg_status st = sg_comm_poll(d->comm);
  int healthy = d->size;
  if (d->p.heartbeat_ms > 0)
    for (int r = 0; r < d->size; r++) {
      int64_t silence = sg_comm_peer_silence_ms(d->comm, r);
      if (r != d->rank && silence > d->p.dead_ms) healthy--;
    }
  char msg[sizeof d->fail_msg];
  if (st != SG_OK) {
    /* Between steps: the next step reports it. */
    snprintf(msg, sizeof msg, "rank %d, %s step %llu: %s", d->rank, step ? "after" : "before the first",
             (unsigned long long)(step ? step : 1), sg_last_error());
    sg_comm_abort(d->comm, msg);
    if (healthy == d->size) healthy--; /* a dead endpoint may not show as silence yet */
  }
  pthread_mutex_lock(&d->mu);
  if (healthy != d->last_healthy) {
    int64_t now = sg__now_ns();
    record_locked(d, SG__EV_HEALTH, now, now, healthy);
    d->last_healthy = healthy;
    __atomic_store_n(&d->healthy, healthy, __ATOMIC_RELAXED);
  }
  if (st != SG_OK) fail_locked(d, SG_ERR_COMM, msg);
}

/* Often enough that the communicator's silence accounting (which forgives
 * gaps longer than a heartbeat between comm calls) always runs. */
static int64_t poll_interval_ns(const sg_dist *d) {
  int ms = d->p.heartbeat_ms > 0 ? d->p.heartbeat_ms / 4 : 100;
  if (ms < 1) ms = 1;
  if (ms > 25) ms = 25;
  return (int64_t)ms * 1000000;
}

static void wait_until(sg_dist *d, int64_t interval_ns) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  int64_t ns = ts.tv_nsec + interval_ns;
  ts.tv_sec += (time_t)(ns / 1000000000);
  ts.tv_nsec = (long)(ns % 1000000000);
  pthread_cond_timedwait(&d->wake_sched, &d->mu, &ts);
}

static sg_status join_job(sg_dist *d, void *arg) {
  (void)arg;
  if (d->rj.joining) return sg__dist_rejoin_join(d); /* a restarted rank joins a running job (rejoin.c) */
  sg_comm *c = NULL;
  SG_CHECK(sg_comm_create(&d->comm_params, &c));
  sg_status st = sg_comm_set_liveness(c, d->p.heartbeat_ms, d->p.dead_ms);
  if (st != SG_OK) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", sg_last_error());
    sg_comm_abort(c, msg);
    sg_comm_destroy(c);
    return sg__error(st, "%s", msg);
  }
  pthread_mutex_lock(&d->mu);
  d->comm = c;
  d->rank = sg_comm_rank(c);
  d->size = sg_comm_size(c);
  d->last_healthy = d->size;
  __atomic_store_n(&d->healthy, d->size, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&d->mu);
  return SG_OK;
}

static void *sched_main(void *arg) {
  sg_dist *d = arg;
  int64_t interval = poll_interval_ns(d);
  pthread_mutex_lock(&d->mu);
  bool joined = false;
  for (;;) {
    /* Whether the program is inside sg_dist_step, for the peers' hang checks. */
    if (d->comm != NULL) sg_comm_set_away(d->comm, __atomic_load_n(&d->away, __ATOMIC_RELAXED));
    /* Injected drop-heartbeats: a hung communication thread sends and reads
     * nothing (no heartbeats, no collectives) until the hang ends; only a
     * stop request is still honoured, so destroy stays bounded. */
    if (d->hang_until_ns != 0 && !d->stop) {
      int64_t left = d->hang_until_ns - sg__now_ns();
      if (left > 0) {
        wait_until(d, left < 50000000 ? left : 50000000);
        continue;
      }
      d->hang_until_ns = 0;
    }
    if (d->job) {
      bool first = !joined;
      run_job_locked(d);
      /* The first job joins; without a communicator there is nothing to do. */
      if (first && d->comm == NULL) break;
      joined = true;
      continue;
    }
    if (d->stop) break;
    if (d->failed == SG_OK && d->done < d->posted) {
      run_bucket_locked(d);
      continue;
    }
    /* The step's snapshot, between buckets; also after a failure, since the
     * recovery may roll back to it. */
    if (d->snap.pending) {
      sg__dist_snap_chunk_locked(d);
      continue;
    }
    /* ZeRO-1's buddy replica of the step's snapshot (replica.c), after it. */
    if (d->zero.rep_pending && d->failed == SG_OK) {
      sg__dist_replica_push_locked(d);
      continue;
    }
    if (d->failed == SG_OK) {
      wait_until(d, interval);
      if (!d->job && !d->stop && d->done == d->posted) poll_locked(d);
    } else {
      pthread_cond_wait(&d->wake_sched, &d->mu);
    }
  }
  sg_comm *c = d->comm;
  pthread_mutex_unlock(&d->mu);
  /* Earlier epochs' communicators (aborted) close after the current one, so
   * the current one's barrier is not delayed by their closing. */
  /* The replicas' global page table is collective while healthy, and must go before its communicator. */
  sg__dist_replica_gmem_fini(d);
  sg_status cst = c != NULL ? sg_comm_destroy(c) : SG_OK;
  char cmsg[sizeof d->fail_msg];
  if (cst != SG_OK) snprintf(cmsg, sizeof cmsg, "%s", sg_last_error());
  for (int i = 0; i < d->n_old; i++) sg_comm_destroy(d->old_comms[i]);
  d->n_old = 0;
  if (c != NULL) {
    sg_status st = cst;
    char msg[sizeof d->fail_msg];
    if (st != SG_OK) memcpy(msg, cmsg, sizeof msg);
    pthread_mutex_lock(&d->mu);
    d->comm = NULL;
    d->comm_destroy_status = st;
    if (st != SG_OK) memcpy(d->fail_msg, msg, sizeof msg);
    pthread_mutex_unlock(&d->mu);
  }
  return NULL;
}

sg_status sg__dist_sched_start(sg_dist *d) {
  sg__dist_job job = {join_job, NULL, SG_OK, "", false};
  d->job = &job;
  if (pthread_create(&d->thread, NULL, sched_main, d) != 0) {
    d->job = NULL;
    return sg__error(SG_ERR_NO_MEMORY, "sg_dist_create: cannot start the scheduler thread");
  }
  d->thread_started = true;
  pthread_mutex_lock(&d->mu);
  while (!job.done) pthread_cond_wait(&d->wake_compute, &d->mu);
  pthread_mutex_unlock(&d->mu);
  if (job.status != SG_OK) {
    pthread_join(d->thread, NULL);
    d->thread_started = false;
    return sg__error(job.status, "%s", job.message);
  }
  return SG_OK;
}

void sg__dist_sched_stop(sg_dist *d) {
  if (!d->thread_started) return;
  pthread_mutex_lock(&d->mu);
  d->stop = true;
  pthread_cond_signal(&d->wake_sched);
  pthread_mutex_unlock(&d->mu);
  pthread_join(d->thread, NULL);
  d->thread_started = false;
}
