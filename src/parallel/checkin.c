/* Check-ins (SPEC H3): every check-in period (1 s) each rank of a healing
 * data-parallel job tells every other how it is doing — its step, the busy
 * time of its last step (compute, not waiting for the others), its CPU use —
 * and the health monitor of the original ranks (sg_dist_health) judges from
 * them: a rank whose check-ins stopped for two periods, or whose steps take
 * more than slow_factor (3) times the median and 50 ms more than it (their
 * mean busy time since its previous check-in), becomes DEGRADED, and HEALTHY
 * again when that ends. DEGRADED is reported (sg_dist_stats.degraded_ranks,
 * a line on stderr per change, the examples' progress line and JSON), not
 * acted upon: a rank that stops altogether is the failure detector's
 * (UNREACHABLE, a recovery).
 *
 * Threads: the scheduler sends this rank's check-ins and queues what arrives
 * (both on its communicator, under mu); the compute thread, which owns the
 * monitor (recoveries reset its epochs there too), feeds the queue to it
 * between steps. The monitor therefore moves at step boundaries; a step
 * longer than two periods delays a verdict, never forges one (each check-in
 * goes in with its arrival time). */
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "parallel/dist_internal.h"

_Static_assert(SG_CHECKIN_MAX_BYTES <= SG__COMM_CHECKIN_BYTES,
               "a check-in must fit the comm layer's channel");

#define CHECKIN_MS 1000 /* the monitor's checkin_ms (SG_HEALTH_CONFIG_INIT) */

sg_status sg__dist_checkins_init(sg_dist *d) {
  sg__dist_checkins *c = &d->heal.ci;
  memset(c, 0, sizeof *c);
  c->rx = sg__calloc(SG__DIST_CHECKIN_QUEUE, sizeof *c->rx);
  if (c->rx == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_dist_create: out of memory for check-ins");
  /* A new id per process: a peer whose id changes within an epoch restarted. */
  if (getrandom(&c->instance, sizeof c->instance, GRND_NONBLOCK) != (ssize_t)sizeof c->instance)
    c->instance = ((uint64_t)getpid() << 32) ^ (uint64_t)sg__now_ns();
  if (c->instance == 0) c->instance = 1;
  c->cpu = (sg_cpu_meter)SG_CPU_METER_INIT;
  c->ring_epoch = -1;
  return SG_OK;
}

void sg__dist_checkins_free(sg_dist *d) {
  sg__free(d->heal.ci.rx);
  d->heal.ci.rx = NULL;
}

static void queue_locked(sg__dist_checkins *c, int64_t at, const sg_checkin *ci) {
  if (c->n_rx == SG__DIST_CHECKIN_QUEUE) { /* the compute thread is in a long step: keep the newest */
    memmove(c->rx, c->rx + 1, (SG__DIST_CHECKIN_QUEUE - 1) * sizeof *c->rx);
    c->n_rx--;
    c->rx_dropped++;
  }
  c->rx[c->n_rx++] = (sg__dist_checkin_rx){at, *ci};
}

/* This rank's check-in, to every peer and to its own monitor. */
static void send_locked(sg_dist *d, int64_t now) {
  sg__dist_checkins *c = &d->heal.ci;
  /* The mean busy time since the last check-in: one preemption in a short
   * step must not make a rank look three times slower than the others. */
  if (c->busy_n > 0) {
    double ms = c->busy_sum / c->busy_n;
    c->busy_ms = ms < 1 ? 1 : ms > 4e9 ? 4000000000u : (uint32_t)ms;
    c->busy_sum = 0;
    c->busy_n = 0;
  }
  unsigned permille = c->cpu.last_permille;
  if (sg_health_cpu_permille(&c->cpu, &permille) != SG_OK) permille = c->cpu.last_permille;
  sg_checkin ci = {.rank = d->orig_rank,
                   .epoch = (uint32_t)d->epoch,
                   .instance_id = c->instance,
                   .timestamp_ms = (uint64_t)now,
                   .step = d->step,
                   .collective = 0,
                   .cpu_permille = (uint16_t)(permille > 1000 ? 1000 : permille),
                   .step_ms = c->busy_ms,
                   .n_deps = 0};
  uint8_t buf[SG_CHECKIN_MAX_BYTES];
  size_t len = 0;
  if (sg_checkin_encode(&ci, buf, sizeof buf, &len) != SG_OK) return; /* nothing out of range: never */
  bool muted = c->muted;
  pthread_mutex_unlock(&d->mu);
  int sent = 0;
  for (int r = 0; r < d->size && !muted; r++)
    if (r != d->rank) sent += sg__comm_checkin_send(d->comm, r, buf, len);
  pthread_mutex_lock(&d->mu);
  c->sent += (uint64_t)sent;
  queue_locked(c, now, &ci);
}

void sg__dist_checkins_poll_locked(sg_dist *d) {
  if (d->heal.health == NULL || d->comm == NULL || d->heal.ci.rx == NULL) return;
  sg__dist_checkins *c = &d->heal.ci;
  int64_t now = sg__now_ms();
  if (now >= c->next_ms) {
    c->next_ms = now + CHECKIN_MS;
    send_locked(d, now);
  }
  /* What arrived, validated here (SPEC S1): a payload that does not decode,
   * or whose sender is not the rank the transport names, is counted and
   * dropped. */
  uint8_t buf[SG__COMM_CHECKIN_BYTES];
  size_t len = 0;
  int peer = -1;
  while (sg__comm_checkin_take(d->comm, buf, &len, &peer) == SG_OK) {
    sg_checkin ci;
    if (sg_checkin_decode(buf, len, d->orig_size, &ci) != SG_OK || peer < 0 || peer >= d->size ||
        ci.rank != d->members[peer]) {
      c->rejected++;
      continue;
    }
    c->received++;
    queue_locked(c, now, &ci);
  }
}

void sg__dist_checkins_step_done(sg_dist *d, double busy_ms) {
  if (d->heal.health == NULL) return;
  pthread_mutex_lock(&d->mu);
  d->heal.ci.busy_sum += busy_ms > 0 ? busy_ms : 0;
  d->heal.ci.busy_n++;
  pthread_mutex_unlock(&d->mu);
}

/* Transitions the monitor logged since the last look, on stderr: a DEGRADED
 * rank (and its return) is news to whoever watches the job. */
static void report_transitions(sg_dist *d) {
  sg__dist_checkins *c = &d->heal.ci;
  const sg_health *h = d->heal.health;
  uint64_t total = sg_health_log_total(h);
  size_t kept = sg_health_log_size(h);
  for (uint64_t t = c->log_seen; t < total; t++) {
    uint64_t first_kept = total - kept;
    if (t < first_kept) continue; /* dropped by the log */
    sg_health_transition tr;
    if (sg_health_log_get(h, (size_t)(t - first_kept), &tr) != SG_OK) continue;
    if (tr.to == SG_HEALTH_DEGRADED || tr.from == SG_HEALTH_DEGRADED)
      fprintf(stderr, "sgrt: rank %d: rank %d is %s: %s\n", d->orig_rank, tr.rank, sg_health_state_str(tr.to),
              tr.reason);
  }
  c->log_seen = total;
}

void sg__dist_checkins_feed(sg_dist *d) {
  sg_health *h = d->heal.health;
  if (h == NULL) return;
  sg__dist_checkins *c = &d->heal.ci;
  sg__dist_checkin_rx rx[SG__DIST_CHECKIN_QUEUE];
  pthread_mutex_lock(&d->mu);
  int n = c->n_rx;
  memcpy(rx, c->rx, (size_t)n * sizeof *rx);
  c->n_rx = 0;
  pthread_mutex_unlock(&d->mu);
  for (int i = 0; i < n; i++) {
    /* The monitor's clock never goes back: a check-in queued just before
     * the last feed's clock reading goes in at that reading. */
    int64_t at = rx[i].at_ms > c->fed_ms ? rx[i].at_ms : c->fed_ms;
    c->fed_ms = at;
    /* SG_ERR_STATE: another epoch's, or from a rank already UNREACHABLE: dropped. */
    (void)sg_health_checkin(h, rx[i].ci.rank, at, &rx[i].ci);
  }
  /* The health graph: the data-parallel ring of this epoch's members (a
   * recovery's epoch reset clears it), so that sg_health_unhealthy_deps
   * answers "which of my neighbours is unwell". */
  if (c->ring_epoch != (int64_t)sg_health_epoch(h)) {
    c->ring_epoch = (int64_t)sg_health_epoch(h);
    (void)sg_health_add_ring(h, d->members, d->size);
  }
  int64_t now = sg__now_ms();
  if (now > c->fed_ms) c->fed_ms = now;
  (void)sg_health_tick(h, c->fed_ms);
  report_transitions(d);
  d->stats.degraded_ranks = sg_health_count(h, SG_HEALTH_DEGRADED);
}
