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

void sg__dist_fail_locked(sg_dist *d, sg_status st, const char *msg) {
  if (d->failed != SG_OK) return; /* the first failure is the cause; later ones are its echoes */
  d->failed = st;
  if (d->fail_ns == 0) d->fail_ns = sg__now_ns();
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
  sg__dist_fail_locked(d, st, msg);
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

void sg__dist_record_locked(sg_dist *d, sg__dist_ev_kind kind, int64_t t0, int64_t t1, int32_t id) {
  if (!d->tracing) return;
  sg__dist_event e = {t0 - d->origin_ns, t1 - d->origin_ns, id, (uint32_t)d->step, (uint8_t)kind, 1, {0}};
  sg__dist_ring_put(&d->sched_ring, &e);
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
    sg__dist_record_locked(d, SG__EV_HEALTH, now, now, healthy);
    d->last_healthy = healthy;
    __atomic_store_n(&d->healthy, healthy, __ATOMIC_RELAXED);
  }
  if (st != SG_OK) sg__dist_fail_locked(d, SG_ERR_COMM, msg);
  else if (d->strategy->sched_poll_locked != NULL) d->strategy->sched_poll_locked(d);
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

sg_status sg__par_join(sg_dist *d) {
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
  /* Epoch 0: the original ranks are the communicator's. */
  d->orig_rank = d->rank;
  d->orig_size = d->size;
  for (int r = 0; r < d->size && r < SG__DIST_MAX_RANKS; r++) d->members[r] = r;
  d->last_healthy = d->size;
  __atomic_store_n(&d->healthy, d->size, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&d->mu);
  return SG_OK;
}

/* The scheduler's first job: the strategy's way of joining, or epoch 0's. */
static sg_status join_job(sg_dist *d, void *arg) {
  (void)arg;
  return d->strategy->join != NULL ? d->strategy->join(d) : sg__par_join(d);
}

static void *sched_main(void *arg) {
  sg_dist *d = arg;
  int64_t interval = poll_interval_ns(d), next_poll = 0;
  pthread_mutex_lock(&d->mu);
  bool joined = false;
  for (;;) {
    /* Whether the program is inside sg_dist_step, for the peers' hang checks. */
    if (d->comm != NULL) sg__comm_set_away(d->comm, __atomic_load_n(&d->away, __ATOMIC_RELAXED));
    /* Injected drop-heartbeats: a hung communication thread sends and reads
     * nothing (no heartbeats, no collectives) until the hang ends; only a
     * stop request is still honoured, so destroy stays bounded. */
    if (d->pause_until_ns != 0 && !d->stop) {
      int64_t left = d->pause_until_ns - sg__now_ns();
      if (left > 0) {
        wait_until(d, left < 50000000 ? left : 50000000);
        continue;
      }
      d->pause_until_ns = 0;
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
    if (d->strategy->sched_work_locked != NULL && d->strategy->sched_work_locked(d)) continue;
    if (d->failed != SG_OK) {
      pthread_cond_wait(&d->wake_sched, &d->mu);
      continue;
    }
    /* Idle: poll every interval (heartbeats, the peers' health). */
    int64_t now = sg__now_ns();
    if (now >= next_poll) {
      poll_locked(d);
      next_poll = sg__now_ns() + interval;
      continue;
    }
    wait_until(d, next_poll - now);
  }
  sg_comm *c = d->comm;
  pthread_mutex_unlock(&d->mu);
  /* Earlier epochs' communicators (aborted) close after the current one, so
   * the current one's barrier is not delayed by their closing. */
  if (d->strategy->sched_fini != NULL) d->strategy->sched_fini(d); /* before the communicator goes */
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

void sg__dist_sched_pause(sg_dist *d, int64_t ns) {
  pthread_mutex_lock(&d->mu);
  d->pause_until_ns = sg__now_ns() + ns;
  pthread_mutex_unlock(&d->mu);
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
