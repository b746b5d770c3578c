/* The health monitor (SPEC H2, H3): one rank's view of every member's state,
 * driven by the scheduler thread with heartbeats, check-ins, transport
 * failures and ticks, each carrying the caller's time. No clock and no
 * thread here, so a test can replay a timeline to the millisecond. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "health/health_internal.h"

#define MAX_PERIOD_MS 86400000 /* one day: longer periods are typos */

sg_health_config sg_health_config_init(void) {
  sg_health_config c = SG_HEALTH_CONFIG_INIT;
  return c;
}

const char *sg_health_state_str(sg_health_state state) {
  switch (state) {
    case SG_HEALTH_HEALTHY: return "HEALTHY";
    case SG_HEALTH_DEGRADED: return "DEGRADED";
    case SG_HEALTH_UNREACHABLE: return "UNREACHABLE";
  }
  return "?";
}

static sg_status check_period(const char *field, int v) {
  if (v < 1 || v > MAX_PERIOD_MS)
    return sg__error(SG_ERR_INVALID_ARG, "sg_health_config.%s = %d ms is outside 1..%d", field, v,
                     MAX_PERIOD_MS);
  return SG_OK;
}

static sg_status validate_config(const sg_health_config *c) {
  SG_CHECK(check_period("heartbeat_ms", c->heartbeat_ms));
  SG_CHECK(check_period("checkin_ms", c->checkin_ms));
  SG_CHECK(check_period("unreachable_ms", c->unreachable_ms));
  /* A timeout no longer than the heartbeat period would declare a healthy
   * peer dead between two of its heartbeats. */
  if (c->unreachable_ms <= c->heartbeat_ms)
    return sg__error(SG_ERR_INVALID_ARG, "sg_health_config.unreachable_ms %d must exceed heartbeat_ms %d",
                     c->unreachable_ms, c->heartbeat_ms);
  if (c->degraded_missed_checkins < 1 || c->degraded_missed_checkins > 1000)
    return sg__error(SG_ERR_INVALID_ARG, "sg_health_config.degraded_missed_checkins %d is outside 1..1000",
                     c->degraded_missed_checkins);
  /* `!(x <= y)` also refuses NaN. */
  if (c->slow_factor != 0.0 && !(c->slow_factor > 1.0 && c->slow_factor <= 1000.0))
    return sg__error(SG_ERR_INVALID_ARG,
                     "sg_health_config.slow_factor %g is neither 0 (off) nor in (1, 1000]", c->slow_factor);
  if (c->slow_min_ms < 0 || c->slow_min_ms > MAX_PERIOD_MS)
    return sg__error(SG_ERR_INVALID_ARG, "sg_health_config.slow_min_ms = %d ms is outside 0..%d",
                     c->slow_min_ms, MAX_PERIOD_MS);
  if (c->log_capacity < 1 || c->log_capacity > 1048576)
    return sg__error(SG_ERR_INVALID_ARG, "sg_health_config.log_capacity %d is outside 1..1048576",
                     c->log_capacity);
  return SG_OK;
}

/* Every member as if heard from at now_ms, with nothing received yet. */
static void reset_peer(sg__health_peer *p, int64_t now_ms) {
  memset(&p->pub, 0, sizeof p->pub);
  p->pub.state = SG_HEALTH_HEALTHY;
  p->pub.last_heard_ms = p->pub.last_checkin_ms = now_ms;
  p->missed = p->slow = false;
  p->checkin_gap_ms = 0;
  p->n_adj = 0; /* the edges belong to the previous plan; capacity is kept */
}

sg_status sg_health_create(int world_size, int self_rank, const sg_health_config *cfg, int64_t now_ms,
                           sg_health **out) {
  if (out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_health_create: out is NULL");
  *out = NULL;
  if (world_size < 1 || world_size > SG__HEALTH_MAX_WORLD)
    return sg__error(SG_ERR_INVALID_ARG, "sg_health_create: world_size %d is outside 1..%d", world_size,
                     SG__HEALTH_MAX_WORLD);
  if (self_rank < 0 || self_rank >= world_size)
    return sg__error(SG_ERR_INVALID_ARG, "sg_health_create: self_rank %d is outside 0..%d", self_rank,
                     world_size - 1);
  if (now_ms < 0)
    return sg__error(SG_ERR_INVALID_ARG, "sg_health_create: now_ms %lld is negative", (long long)now_ms);
  sg_health_config c = SG_HEALTH_CONFIG_INIT;
  SG_CHECK(sg__params_read("sg_health_create",
                           SG__VERSIONED(sg_health_config, heartbeat_ms, "SG_HEALTH_CONFIG_INIT"), &c, cfg));
  SG_CHECK(validate_config(&c));
  sg_health *h = sg__calloc(1, sizeof *h);
  if (h == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_health_create: out of memory");
  h->world_size = world_size;
  h->self = self_rank;
  h->cfg = c;
  h->now_ms = now_ms;
  h->peers = sg__calloc((size_t)world_size, sizeof *h->peers);
  h->scratch = sg__calloc((size_t)world_size, sizeof *h->scratch);
  h->log = sg__calloc((size_t)c.log_capacity, sizeof *h->log);
  if (h->peers == NULL || h->scratch == NULL || h->log == NULL) {
    sg_health_destroy(h);
    return sg__error(SG_ERR_NO_MEMORY, "sg_health_create: out of memory for %d ranks and %d log entries",
                     world_size, c.log_capacity);
  }
  for (int r = 0; r < world_size; r++) {
    reset_peer(&h->peers[r], now_ms);
    h->peers[r].member = true;
  }
  *out = h;
  return SG_OK;
}

void sg_health_destroy(sg_health *h) {
  if (h == NULL) return;
  if (h->peers)
    for (int r = 0; r < h->world_size; r++) sg__free(h->peers[r].adj);
  sg__free(h->peers);
  sg__free(h->scratch);
  sg__free(h->log);
  sg__free(h);
}

sg_status sg_health_set_callback(sg_health *h, sg_health_callback fn, void *ctx) {
  if (h == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_health_set_callback: h is NULL");
  if (h->in_callback)
    return sg__error(SG_ERR_STATE, "sg_health_set_callback: called from the health callback");
  h->callback = fn;
  h->callback_ctx = ctx;
  return SG_OK;
}

sg_status sg__health_check_rank(const sg_health *h, int rank, const char *fn) {
  if (h == NULL) return sg__error(SG_ERR_INVALID_ARG, "%s: h is NULL", fn);
  if (rank < 0 || rank >= h->world_size)
    return sg__error(SG_ERR_INVALID_ARG, "%s: rank %d is outside the job of %d ranks", fn, rank,
                     h->world_size);
  return SG_OK;
}

/* The checks every input shares; on success the monitor's clock moves to now_ms. */
static sg_status begin_input(sg_health *h, int peer, int64_t now_ms, const void *msg, const char *fn) {
  SG_CHECK(sg__health_check_rank(h, peer, fn));
  if (msg == NULL) return sg__error(SG_ERR_INVALID_ARG, "%s: the message is NULL", fn);
  if (h->in_callback) return sg__error(SG_ERR_STATE, "%s: called from the health callback", fn);
  if (now_ms < h->now_ms)
    return sg__error(SG_ERR_INVALID_ARG, "%s: time went backwards: now_ms %lld after %lld", fn,
                     (long long)now_ms, (long long)h->now_ms);
  h->now_ms = now_ms;
  return SG_OK;
}

static void log_push(sg_health *h, const sg_health_transition *t) {
  size_t cap = (size_t)h->cfg.log_capacity;
  if (h->log_size < cap) {
    h->log[(h->log_head + h->log_size) % cap] = *t;
    h->log_size++;
  } else {
    h->log[h->log_head] = *t; /* the oldest makes room */
    h->log_head = (h->log_head + 1) % cap;
  }
  h->log_total++;
}

__attribute__((format(printf, 4, 5))) static void transition(sg_health *h, int rank, sg_health_state to,
                                                             const char *fmt, ...) {
  sg__health_peer *p = &h->peers[rank];
  sg_health_transition t;
  memset(&t, 0, sizeof t);
  t.rank = rank;
  t.from = p->pub.state;
  t.to = to;
  t.at_ms = h->now_ms;
  t.epoch = h->epoch;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t.reason, sizeof t.reason, fmt, ap);
  va_end(ap);
  p->pub.state = to;
  log_push(h, &t);
  SG_INFO("health: rank %d %s -> %s at %lld ms: %s", rank, sg_health_state_str(t.from),
          sg_health_state_str(to), (long long)t.at_ms, t.reason);
  if (h->callback) {
    h->in_callback = true;
    h->callback(&t, h->callback_ctx);
    h->in_callback = false;
  }
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* The lower median of the latest step times of reachable members that
 * reported one; 0 when fewer than two did (one rank cannot be slower than
 * itself). With two it is the faster one, so the slower is judged against it. */
static uint32_t median_step_ms(sg_health *h) {
  size_t n = 0;
  for (int r = 0; r < h->world_size; r++) {
    const sg__health_peer *p = &h->peers[r];
    if (p->member && p->pub.state != SG_HEALTH_UNREACHABLE && p->pub.has_checkin &&
        p->pub.checkin.step_ms > 0)
      h->scratch[n++] = p->pub.checkin.step_ms;
  }
  if (n < 2) return 0;
  qsort(h->scratch, n, sizeof *h->scratch, cmp_u32);
  return h->scratch[(n - 1) / 2];
}

/* Decides one member's state at h->now_ms and records a change. UNREACHABLE
 * is terminal within an epoch: a peer declared dead may already have been
 * replaced by the recovery, so a late heartbeat must not revive it. */
static void evaluate(sg_health *h, int rank, uint32_t median) {
  sg__health_peer *p = &h->peers[rank];
  if (!p->member || p->pub.state == SG_HEALTH_UNREACHABLE) return;
  const sg_health_config *c = &h->cfg;
  int64_t silent = h->now_ms - p->pub.last_heard_ms;
  if (rank != h->self && silent >= c->unreachable_ms) {
    transition(h, rank, SG_HEALTH_UNREACHABLE, "no heartbeat for %lld ms (timeout %d ms)", (long long)silent,
               c->unreachable_ms);
    return;
  }
  int64_t since = h->now_ms - p->pub.last_checkin_ms;
  int64_t missed = rank == h->self ? 0 : since / c->checkin_ms;
  bool was_missed = p->missed, was_slow = p->slow;
  p->missed = missed >= c->degraded_missed_checkins;
  uint32_t step_ms = p->pub.has_checkin ? p->pub.checkin.step_ms : 0;
  p->slow = c->slow_factor > 0 && median > 0 && step_ms > 0 && (double)step_ms > c->slow_factor * median &&
            step_ms - median >= (uint32_t)c->slow_min_ms;
  sg_health_state want = p->missed || p->slow ? SG_HEALTH_DEGRADED : SG_HEALTH_HEALTHY;
  if (want == p->pub.state) return;
  if (want == SG_HEALTH_DEGRADED && p->missed)
    transition(h, rank, want, "missed %lld check-ins (none for %lld ms, period %d ms)", (long long)missed,
               (long long)since, c->checkin_ms);
  else if (want == SG_HEALTH_DEGRADED)
    transition(h, rank, want, "too slow: step %u ms is %.1fx the median %u ms (limit %.1fx)", step_ms,
               (double)step_ms / median, median, c->slow_factor);
  else if (was_missed)
    transition(h, rank, want, "check-ins resumed after %lld ms", (long long)p->checkin_gap_ms);
  else if (was_slow && (double)step_ms <= c->slow_factor * median)
    transition(h, rank, want, "step %u ms is within %.1fx the median %u ms again", step_ms, c->slow_factor,
               median);
  else if (was_slow)
    transition(h, rank, want, "step %u ms is within %d ms of the median %u ms again", step_ms, c->slow_min_ms,
               median);
}

/* The checks heartbeats and check-ins share once the message is known valid. */
static sg_status accept_from(sg_health *h, int peer, int rank, uint32_t epoch, const char *fn) {
  const sg__health_peer *p = &h->peers[peer];
  if (rank != peer)
    return sg__error(SG_ERR_FORMAT, "%s: the message from rank %d claims to be from rank %d", fn, peer, rank);
  if (!p->member)
    return sg__error(SG_ERR_STATE, "%s: rank %d is not a member of epoch %u; ignored", fn, peer, h->epoch);
  if (p->pub.state == SG_HEALTH_UNREACHABLE)
    return sg__error(SG_ERR_STATE, "%s: rank %d is UNREACHABLE in epoch %u (until a new epoch); ignored", fn,
                     peer, h->epoch);
  /* Around an epoch change, messages of the old epoch are still in flight;
   * they must not keep a peer alive that the new epoch has not heard from. */
  if (epoch != h->epoch)
    return sg__error(SG_ERR_STATE, "%s: rank %d sent epoch %u, the current epoch is %u; ignored", fn, peer,
                     epoch, h->epoch);
  return SG_OK;
}

sg_status sg_health_heartbeat(sg_health *h, int peer, int64_t now_ms, const sg_heartbeat *hb) {
  static const char fn[] = "sg_health_heartbeat";
  SG_CHECK(begin_input(h, peer, now_ms, hb, fn));
  SG_CHECK(sg__heartbeat_validate(hb, h->world_size, fn));
  SG_CHECK(accept_from(h, peer, hb->rank, hb->epoch, fn));
  sg__health_peer *p = &h->peers[peer];
  p->pub.last_heard_ms = now_ms;
  p->pub.has_heartbeat = true;
  p->pub.heartbeat = *hb;
  return SG_OK;
}

sg_status sg_health_checkin(sg_health *h, int peer, int64_t now_ms, const sg_checkin *ci) {
  static const char fn[] = "sg_health_checkin";
  SG_CHECK(begin_input(h, peer, now_ms, ci, fn));
  SG_CHECK(sg__checkin_validate(ci, h->world_size, fn));
  SG_CHECK(accept_from(h, peer, ci->rank, ci->epoch, fn));
  sg__health_peer *p = &h->peers[peer];
  if (peer != h->self && p->pub.has_checkin && p->pub.checkin.instance_id != ci->instance_id) {
    /* Same rank, another process: the one we knew died, and its state with it. */
    transition(h, peer, SG_HEALTH_UNREACHABLE, "restarted: instance 0x%llx replaced 0x%llx",
               (unsigned long long)ci->instance_id, (unsigned long long)p->pub.checkin.instance_id);
    return SG_OK;
  }
  p->checkin_gap_ms = now_ms - p->pub.last_checkin_ms;
  p->pub.last_heard_ms = p->pub.last_checkin_ms = now_ms;
  p->pub.has_checkin = true;
  p->pub.checkin = *ci;
  /* The last tick's median: recomputing it per check-in would cost
   * O(n log n) per message, O(n^2 log n) per period on n ranks. */
  evaluate(h, peer, h->median_ms);
  return SG_OK;
}

sg_status sg_health_peer_failed(sg_health *h, int peer, int64_t now_ms, const char *reason) {
  static const char fn[] = "sg_health_peer_failed";
  SG_CHECK(begin_input(h, peer, now_ms, "", fn));
  if (peer == h->self)
    return sg__error(SG_ERR_INVALID_ARG, "%s: rank %d is this rank; it cannot report itself failed", fn,
                     peer);
  sg__health_peer *p = &h->peers[peer];
  if (!p->member)
    return sg__error(SG_ERR_STATE, "%s: rank %d is not a member of epoch %u", fn, peer, h->epoch);
  if (p->pub.state != SG_HEALTH_UNREACHABLE)
    transition(h, peer, SG_HEALTH_UNREACHABLE, "%s", reason && reason[0] ? reason : "peer failed");
  return SG_OK;
}

sg_status sg_health_tick(sg_health *h, int64_t now_ms) {
  if (h == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_health_tick: h is NULL");
  SG_CHECK(begin_input(h, h->self, now_ms, "", "sg_health_tick"));
  /* One median for the whole tick, so that peers are judged alike even when
   * one of them changes state on the way. */
  h->median_ms = median_step_ms(h);
  for (int r = 0; r < h->world_size; r++) evaluate(h, r, h->median_ms);
  return SG_OK;
}

sg_status sg_health_reset_epoch(sg_health *h, int64_t now_ms, uint32_t epoch, const int *members,
                                int n_members) {
  static const char fn[] = "sg_health_reset_epoch";
  if (h == NULL || members == NULL) return sg__error(SG_ERR_INVALID_ARG, "%s: h or members is NULL", fn);
  SG_CHECK(begin_input(h, h->self, now_ms, members, fn));
  if (epoch <= h->epoch)
    return sg__error(SG_ERR_INVALID_ARG, "%s: epoch %u is not after the current epoch %u", fn, epoch,
                     h->epoch);
  if (n_members < 1 || n_members > h->world_size)
    return sg__error(SG_ERR_INVALID_ARG, "%s: %d members, expected 1..%d", fn, n_members, h->world_size);
  /* Validate everything before changing anything: a refused epoch leaves
   * the current one intact. scratch marks the members. */
  memset(h->scratch, 0, (size_t)h->world_size * sizeof *h->scratch);
  for (int i = 0; i < n_members; i++) {
    int r = members[i];
    if (r < 0 || r >= h->world_size)
      return sg__error(SG_ERR_INVALID_ARG, "%s: member %d is rank %d, outside the job of %d ranks", fn, i, r,
                       h->world_size);
    if (h->scratch[r]) return sg__error(SG_ERR_INVALID_ARG, "%s: member %d repeats rank %d", fn, i, r);
    h->scratch[r] = 1;
  }
  if (!h->scratch[h->self])
    return sg__error(SG_ERR_INVALID_ARG, "%s: the members of epoch %u leave out this rank (%d)", fn, epoch,
                     h->self);
  for (int r = 0; r < h->world_size; r++) {
    reset_peer(&h->peers[r], now_ms);
    h->peers[r].member = h->scratch[r] != 0;
  }
  h->epoch = epoch;
  h->median_ms = 0;
  return SG_OK;
}

/* ---- queries ------------------------------------------------------------- */

int sg_health_world_size(const sg_health *h) { return h ? h->world_size : 0; }
int sg_health_self(const sg_health *h) { return h ? h->self : -1; }
uint32_t sg_health_epoch(const sg_health *h) { return h ? h->epoch : 0; }

bool sg_health_is_member(const sg_health *h, int rank) {
  return h && rank >= 0 && rank < h->world_size && h->peers[rank].member;
}

sg_status sg_health_peer_info(const sg_health *h, int rank, sg_health_peer *out) {
  SG_CHECK(sg__health_check_rank(h, rank, "sg_health_peer_info"));
  if (out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_health_peer_info: out is NULL");
  if (!h->peers[rank].member)
    return sg__error(SG_ERR_NOT_FOUND, "sg_health_peer_info: rank %d is not a member of epoch %u", rank,
                     h->epoch);
  *out = h->peers[rank].pub;
  return SG_OK;
}

sg_status sg_health_state_of(const sg_health *h, int rank, sg_health_state *out) {
  SG_CHECK(sg__health_check_rank(h, rank, "sg_health_state_of"));
  if (out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_health_state_of: out is NULL");
  if (!h->peers[rank].member)
    return sg__error(SG_ERR_NOT_FOUND, "sg_health_state_of: rank %d is not a member of epoch %u", rank,
                     h->epoch);
  *out = h->peers[rank].pub.state;
  return SG_OK;
}

int sg_health_count(const sg_health *h, sg_health_state state) {
  if (h == NULL ||
      (state != SG_HEALTH_HEALTHY && state != SG_HEALTH_DEGRADED && state != SG_HEALTH_UNREACHABLE))
    return -1;
  int n = 0;
  for (int r = 0; r < h->world_size; r++) n += h->peers[r].member && h->peers[r].pub.state == state;
  return n;
}

size_t sg_health_log_size(const sg_health *h) { return h ? h->log_size : 0; }
uint64_t sg_health_log_total(const sg_health *h) { return h ? h->log_total : 0; }

sg_status sg_health_log_get(const sg_health *h, size_t i, sg_health_transition *out) {
  if (h == NULL || out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_health_log_get: NULL argument");
  if (i >= h->log_size)
    return sg__error(SG_ERR_RANGE, "sg_health_log_get: entry %zu, the log holds %zu", i, h->log_size);
  *out = h->log[(h->log_head + i) % (size_t)h->cfg.log_capacity];
  return SG_OK;
}
