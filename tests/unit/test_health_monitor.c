/* The health monitor (SPEC H2, H3) against hand-computed timelines: a peer
 * silent from t=1000 is UNREACHABLE at the first tick >= 2000, a dead peer at
 * once, two missed check-ins make DEGRADED and a check-in heals it, a too
 * slow peer is DEGRADED; callback order, log contents, epoch reset, input
 * validation and every allocation failure of create. */
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "test_util.h"

static sg_heartbeat hb_of(int rank, uint32_t epoch, uint64_t step, uint32_t coll, int64_t t) {
  sg_heartbeat hb = {rank, epoch, step, coll, (uint64_t)t};
  return hb;
}

static sg_checkin ci_of(int rank, uint32_t epoch, uint32_t step_ms, int64_t t) {
  sg_checkin ci;
  memset(&ci, 0, sizeof ci);
  ci.rank = rank;
  ci.epoch = epoch;
  ci.instance_id = 1000u + (uint64_t)rank;
  ci.timestamp_ms = (uint64_t)t;
  ci.step = (uint64_t)t / 100;
  ci.cpu_permille = 250;
  ci.step_ms = step_ms;
  return ci;
}

static sg_health_state state(const sg_health *h, int rank) {
  sg_health_state s = (sg_health_state)-1;
  assert_status(sg_health_state_of(h, rank, &s), SG_OK, NULL);
  return s;
}

/* Records what the callback saw. */
typedef struct seen {
  int n;
  sg_health_transition t[16];
  sg_health *h;
  sg_status reentry; /* what a mutating call from inside the callback returned */
  sg_health_state state_inside;
} seen;

static void record(const sg_health_transition *t, void *ctx) {
  seen *s = ctx;
  if (s->n < 16) s->t[s->n] = *t;
  s->n++;
  s->reentry = sg_health_tick(s->h, t->at_ms);
  sg_health_state_of(s->h, t->rank, &s->state_inside);
}

static void test_silent_peer_timeline(void **state_) {
  (void)state_;
  sg_health *h;
  assert_status(sg_health_create(3, 0, NULL, 0, &h), SG_OK, NULL);
  /* Heartbeats every 100 ms from ranks 1 and 2; rank 2's last one is at
   * t=1000. Ticks every 10 ms. Timeout 1000 ms: rank 2 must still be
   * HEALTHY at 1990 and UNREACHABLE at exactly 2000. */
  for (int64_t t = 10; t <= 2500; t += 10) {
    if (t % 100 == 0) {
      for (int r = 1; r <= 2; r++) {
        if (r == 2 && t > 1000) continue;
        sg_heartbeat hb = hb_of(r, 0, (uint64_t)t / 100, 0, t);
        assert_status(sg_health_heartbeat(h, r, t, &hb), SG_OK, NULL);
      }
    }
    if (t % 1000 == 0)
      for (int r = 1; r <= 2; r++) {
        if (r == 2 && t > 1000) continue;
        sg_checkin ci = ci_of(r, 0, 0, t);
        assert_status(sg_health_checkin(h, r, t, &ci), SG_OK, NULL);
      }
    assert_status(sg_health_tick(h, t), SG_OK, NULL);
    if (t == 1990) assert_int_equal(state(h, 2), SG_HEALTH_HEALTHY);
    if (t == 2000) assert_int_equal(state(h, 2), SG_HEALTH_UNREACHABLE);
  }
  assert_int_equal(state(h, 1), SG_HEALTH_HEALTHY);
  assert_int_equal(state(h, 0), SG_HEALTH_HEALTHY);
  assert_int_equal(sg_health_count(h, SG_HEALTH_HEALTHY), 2);
  assert_int_equal(sg_health_count(h, SG_HEALTH_UNREACHABLE), 1);
  assert_int_equal(sg_health_count(h, SG_HEALTH_DEGRADED), 0);
  assert_int_equal(sg_health_count(h, (sg_health_state)7), -1);
  assert_int_equal(sg_health_log_size(h), 1);
  sg_health_transition tr;
  assert_status(sg_health_log_get(h, 0, &tr), SG_OK, NULL);
  assert_int_equal(tr.rank, 2);
  assert_int_equal(tr.from, SG_HEALTH_HEALTHY);
  assert_int_equal(tr.to, SG_HEALTH_UNREACHABLE);
  assert_int_equal(tr.at_ms, 2000);
  assert_int_equal(tr.epoch, 0);
  assert_string_equal(tr.reason, "no heartbeat for 1000 ms (timeout 1000 ms)");
  /* UNREACHABLE is terminal in the epoch: a late heartbeat is refused. */
  sg_heartbeat late = hb_of(2, 0, 30, 0, 2600);
  assert_status(sg_health_heartbeat(h, 2, 2600, &late), SG_ERR_STATE, "UNREACHABLE");
  assert_status(sg_health_tick(h, 2600), SG_OK, NULL);
  assert_int_equal(state(h, 2), SG_HEALTH_UNREACHABLE);
  sg_health_destroy(h);
}

static void test_silent_from_start(void **state_) {
  (void)state_;
  /* A peer never heard from counts from create: UNREACHABLE at create + timeout. */
  sg_health_config cfg = SG_HEALTH_CONFIG_INIT;
  cfg.unreachable_ms = 500;
  sg_health *h;
  assert_status(sg_health_create(2, 1, &cfg, 7000, &h), SG_OK, NULL);
  assert_status(sg_health_tick(h, 7499), SG_OK, NULL);
  assert_int_equal(state(h, 0), SG_HEALTH_HEALTHY);
  assert_status(sg_health_tick(h, 7600), SG_OK, NULL); /* the first tick after the deadline */
  assert_int_equal(state(h, 0), SG_HEALTH_UNREACHABLE);
  assert_int_equal(state(h, 1), SG_HEALTH_HEALTHY); /* self is never timed out */
  sg_health_transition tr;
  assert_status(sg_health_log_get(h, 0, &tr), SG_OK, NULL);
  assert_int_equal(tr.at_ms, 7600);
  assert_string_equal(tr.reason, "no heartbeat for 600 ms (timeout 500 ms)");
  sg_health_destroy(h);
}

static void test_dead_peer_at_once(void **state_) {
  (void)state_;
  sg_health *h;
  seen s = {0};
  assert_status(sg_health_create(4, 0, NULL, 0, &h), SG_OK, NULL);
  s.h = h;
  assert_status(sg_health_set_callback(h, record, &s), SG_OK, NULL);
  assert_status(sg_health_peer_failed(h, 3, 350, "UCX endpoint error: Connection reset"), SG_OK, NULL);
  assert_int_equal(state(h, 3), SG_HEALTH_UNREACHABLE);
  assert_int_equal(s.n, 1);
  assert_int_equal(s.t[0].at_ms, 350);
  assert_string_equal(s.t[0].reason, "UCX endpoint error: Connection reset");
  /* Already dead: nothing new. */
  assert_status(sg_health_peer_failed(h, 3, 400, "launcher: exit status 137"), SG_OK, NULL);
  assert_int_equal(s.n, 1);
  assert_int_equal(sg_health_log_total(h), 1);
  assert_status(sg_health_peer_failed(h, 2, 400, NULL), SG_OK, NULL);
  assert_string_equal(s.t[1].reason, "peer failed");
  assert_status(sg_health_peer_failed(h, 0, 400, "x"), SG_ERR_INVALID_ARG, "this rank");
  assert_status(sg_health_peer_failed(h, 4, 400, "x"), SG_ERR_INVALID_ARG, "outside the job of 4");
  sg_health_destroy(h);
}

static void test_missed_checkins_and_back(void **state_) {
  (void)state_;
  sg_health *h;
  seen s = {0};
  assert_status(sg_health_create(2, 0, NULL, 0, &h), SG_OK, NULL);
  s.h = h;
  assert_status(sg_health_set_callback(h, record, &s), SG_OK, NULL);
  /* Heartbeats every 100 ms throughout; check-ins at 1000, then none at 2000
   * and 3000 (period 1000 ms, 2 missed for DEGRADED), then again from 4000. */
  for (int64_t t = 100; t <= 5000; t += 100) {
    sg_heartbeat hb = hb_of(1, 0, (uint64_t)t / 100, 0, t);
    assert_status(sg_health_heartbeat(h, 1, t, &hb), SG_OK, NULL);
    if (t % 1000 == 0 && (t == 1000 || t >= 4000)) {
      sg_checkin ci = ci_of(1, 0, 0, t);
      assert_status(sg_health_checkin(h, 1, t, &ci), SG_OK, NULL);
      if (t == 4000) {
        /* The check-in itself heals it, before any tick. */
        assert_int_equal(state(h, 1), SG_HEALTH_HEALTHY);
      }
    }
    assert_status(sg_health_tick(h, t), SG_OK, NULL);
    if (t == 2900) assert_int_equal(state(h, 1), SG_HEALTH_HEALTHY);
    if (t == 3000) assert_int_equal(state(h, 1), SG_HEALTH_DEGRADED);
    if (t == 3900) assert_int_equal(state(h, 1), SG_HEALTH_DEGRADED);
  }
  assert_int_equal(state(h, 1), SG_HEALTH_HEALTHY);
  assert_int_equal(s.n, 2);
  assert_int_equal(s.t[0].rank, 1);
  assert_int_equal(s.t[0].from, SG_HEALTH_HEALTHY);
  assert_int_equal(s.t[0].to, SG_HEALTH_DEGRADED);
  assert_int_equal(s.t[0].at_ms, 3000);
  assert_string_equal(s.t[0].reason, "missed 2 check-ins (none for 2000 ms, period 1000 ms)");
  assert_int_equal(s.t[1].from, SG_HEALTH_DEGRADED);
  assert_int_equal(s.t[1].to, SG_HEALTH_HEALTHY);
  assert_int_equal(s.t[1].at_ms, 4000);
  assert_string_equal(s.t[1].reason, "check-ins resumed after 3000 ms");
  /* The callback could query, and its mutating calls were refused. */
  assert_int_equal(s.reentry, SG_ERR_STATE);
  assert_int_equal(s.state_inside, SG_HEALTH_HEALTHY);
  /* The log says the same as the callback. */
  assert_int_equal(sg_health_log_size(h), 2);
  for (size_t i = 0; i < 2; i++) {
    sg_health_transition tr;
    assert_status(sg_health_log_get(h, i, &tr), SG_OK, NULL);
    assert_int_equal(tr.rank, s.t[i].rank);
    assert_int_equal(tr.from, s.t[i].from);
    assert_int_equal(tr.to, s.t[i].to);
    assert_int_equal(tr.at_ms, s.t[i].at_ms);
    assert_int_equal(tr.epoch, s.t[i].epoch);
    assert_string_equal(tr.reason, s.t[i].reason);
  }
  sg_health_destroy(h);
}

static void test_too_slow(void **state_) {
  (void)state_;
  sg_health *h;
  assert_status(sg_health_create(4, 0, NULL, 0, &h), SG_OK, NULL);
  /* Step times 100, 100, 110 and 400 ms: the lower median is 100, rank 3 is
   * 4.0x it, over the default limit of 3.0x. Self reports too. */
  const uint32_t ms[4] = {100, 100, 110, 400};
  for (int r = 0; r < 4; r++) {
    sg_checkin ci = ci_of(r, 0, ms[r], 500);
    assert_status(sg_health_checkin(h, r, 500, &ci), SG_OK, NULL);
  }
  assert_int_equal(state(h, 3), SG_HEALTH_HEALTHY); /* no tick has computed a median yet */
  assert_status(sg_health_tick(h, 500), SG_OK, NULL);
  assert_int_equal(state(h, 3), SG_HEALTH_DEGRADED);
  for (int r = 0; r < 3; r++) assert_int_equal(state(h, r), SG_HEALTH_HEALTHY);
  sg_health_transition tr;
  assert_status(sg_health_log_get(h, 0, &tr), SG_OK, NULL);
  assert_string_equal(tr.reason, "too slow: step 400 ms is 4.0x the median 100 ms (limit 3.0x)");
  /* 250 ms is within 3.0x the median: HEALTHY at that check-in. */
  sg_checkin ci = ci_of(3, 0, 250, 900);
  assert_status(sg_health_checkin(h, 3, 900, &ci), SG_OK, NULL);
  assert_int_equal(state(h, 3), SG_HEALTH_HEALTHY);
  assert_status(sg_health_log_get(h, 1, &tr), SG_OK, NULL);
  assert_string_equal(tr.reason, "step 250 ms is within 3.0x the median 100 ms again");
  /* Self can be the slow one too. */
  ci = ci_of(0, 0, 1000, 950);
  assert_status(sg_health_checkin(h, 0, 950, &ci), SG_OK, NULL);
  assert_int_equal(state(h, 0), SG_HEALTH_DEGRADED);
  sg_health_destroy(h);

  /* slow_factor 0 turns the check off; two ranks: the faster is the median. */
  sg_health_config cfg = SG_HEALTH_CONFIG_INIT;
  cfg.slow_factor = 0;
  assert_status(sg_health_create(2, 0, &cfg, 0, &h), SG_OK, NULL);
  for (int r = 0; r < 2; r++) {
    ci = ci_of(r, 0, r ? 900 : 100, 10);
    assert_status(sg_health_checkin(h, r, 10, &ci), SG_OK, NULL);
  }
  assert_status(sg_health_tick(h, 20), SG_OK, NULL);
  assert_int_equal(state(h, 1), SG_HEALTH_HEALTHY);
  sg_health_destroy(h);
  cfg.slow_factor = 2.0;
  assert_status(sg_health_create(2, 0, &cfg, 0, &h), SG_OK, NULL);
  for (int r = 0; r < 2; r++) {
    ci = ci_of(r, 0, r ? 900 : 100, 10);
    assert_status(sg_health_checkin(h, r, 10, &ci), SG_OK, NULL);
  }
  assert_status(sg_health_tick(h, 20), SG_OK, NULL);
  assert_int_equal(state(h, 1), SG_HEALTH_DEGRADED);
  assert_int_equal(state(h, 0), SG_HEALTH_HEALTHY);
  sg_health_destroy(h);

  /* slow_min_ms (default 50): 4.5x a 10 ms median is only 35 ms more, noise
   * of a loaded host; 70 ms is 60 ms more and slow; back to 45 ms it is
   * within the floor again (and still over 3x, which the reason must not
   * claim otherwise). */
  assert_status(sg_health_create(3, 0, NULL, 0, &h), SG_OK, NULL);
  for (int r = 0; r < 3; r++) {
    ci = ci_of(r, 0, r == 2 ? 45 : 10, 10);
    assert_status(sg_health_checkin(h, r, 10, &ci), SG_OK, NULL);
  }
  assert_status(sg_health_tick(h, 20), SG_OK, NULL);
  assert_int_equal(state(h, 2), SG_HEALTH_HEALTHY);
  ci = ci_of(2, 0, 70, 30);
  assert_status(sg_health_checkin(h, 2, 30, &ci), SG_OK, NULL);
  assert_int_equal(state(h, 2), SG_HEALTH_DEGRADED);
  ci = ci_of(2, 0, 45, 40);
  assert_status(sg_health_checkin(h, 2, 40, &ci), SG_OK, NULL);
  assert_int_equal(state(h, 2), SG_HEALTH_HEALTHY);
  assert_status(sg_health_log_get(h, sg_health_log_size(h) - 1, &tr), SG_OK, NULL);
  assert_string_equal(tr.reason, "step 45 ms is within 50 ms of the median 10 ms again");
  sg_health_destroy(h);
  /* 0 turns the floor off: 45 ms against 10 is slow. */
  cfg = sg_health_config_init();
  cfg.slow_min_ms = 0;
  assert_status(sg_health_create(3, 0, &cfg, 0, &h), SG_OK, NULL);
  for (int r = 0; r < 3; r++) {
    ci = ci_of(r, 0, r == 2 ? 45 : 10, 10);
    assert_status(sg_health_checkin(h, r, 10, &ci), SG_OK, NULL);
  }
  assert_status(sg_health_tick(h, 20), SG_OK, NULL);
  assert_int_equal(state(h, 2), SG_HEALTH_DEGRADED);
  sg_health_destroy(h);
}

static void test_callback_order_and_log_ring(void **state_) {
  (void)state_;
  sg_health_config cfg = SG_HEALTH_CONFIG_INIT;
  cfg.log_capacity = 2;
  sg_health *h;
  seen s = {0};
  assert_status(sg_health_create(5, 2, &cfg, 0, &h), SG_OK, NULL);
  s.h = h;
  assert_status(sg_health_set_callback(h, record, &s), SG_OK, NULL);
  /* Ranks 1 and 4 keep talking; 0 and 3 fall silent: one tick finds both, in rank order. */
  for (int64_t t = 100; t <= 1000; t += 100)
    for (int r = 1; r <= 4; r += 3) {
      sg_heartbeat hb = hb_of(r, 0, 1, 0, t);
      assert_status(sg_health_heartbeat(h, r, t, &hb), SG_OK, NULL);
    }
  assert_status(sg_health_tick(h, 1000), SG_OK, NULL);
  assert_int_equal(s.n, 2);
  assert_int_equal(s.t[0].rank, 0);
  assert_int_equal(s.t[1].rank, 3);
  assert_status(sg_health_peer_failed(h, 4, 1100, "launcher: rank 4 exited with status 1"), SG_OK, NULL);
  assert_int_equal(s.n, 3);
  /* A log of 2 keeps the last two of three. */
  assert_int_equal(sg_health_log_size(h), 2);
  assert_int_equal(sg_health_log_total(h), 3);
  sg_health_transition tr;
  assert_status(sg_health_log_get(h, 0, &tr), SG_OK, NULL);
  assert_int_equal(tr.rank, 3);
  assert_status(sg_health_log_get(h, 1, &tr), SG_OK, NULL);
  assert_int_equal(tr.rank, 4);
  assert_string_equal(tr.reason, "launcher: rank 4 exited with status 1");
  assert_status(sg_health_log_get(h, 2, &tr), SG_ERR_RANGE, "the log holds 2");
  /* Without a callback transitions are still logged. */
  assert_status(sg_health_set_callback(h, NULL, NULL), SG_OK, NULL);
  assert_status(sg_health_tick(h, 5000), SG_OK, NULL);
  assert_int_equal(s.n, 3);
  assert_int_equal(sg_health_log_total(h), 4);
  sg_health_destroy(h);
}

static void test_epoch_reset(void **state_) {
  (void)state_;
  sg_health *h;
  assert_status(sg_health_create(4, 1, NULL, 0, &h), SG_OK, NULL);
  assert_status(sg_health_add_ring(h, NULL, 4), SG_OK, NULL);
  assert_status(sg_health_peer_failed(h, 2, 500, "killed"), SG_OK, NULL);
  uint64_t logged = sg_health_log_total(h);
  /* Refused resets change nothing. */
  const int dup[] = {0, 1, 1}, noself[] = {0, 3}, out[] = {0, 1, 4}, ok[] = {3, 1, 0};
  assert_status(sg_health_reset_epoch(h, 600, 0, ok, 3), SG_ERR_INVALID_ARG, "not after the current epoch 0");
  assert_status(sg_health_reset_epoch(h, 600, 1, dup, 3), SG_ERR_INVALID_ARG, "repeats rank 1");
  assert_status(sg_health_reset_epoch(h, 600, 1, noself, 2), SG_ERR_INVALID_ARG, "leave out this rank (1)");
  assert_status(sg_health_reset_epoch(h, 600, 1, out, 3), SG_ERR_INVALID_ARG, "rank 4, outside");
  assert_status(sg_health_reset_epoch(h, 600, 1, ok, 0), SG_ERR_INVALID_ARG, "0 members");
  assert_status(sg_health_reset_epoch(h, 600, 1, NULL, 3), SG_ERR_INVALID_ARG, "NULL");
  assert_int_equal(sg_health_epoch(h), 0);
  assert_int_equal(state(h, 2), SG_HEALTH_UNREACHABLE);
  assert_status(sg_health_reset_epoch(h, 1000, 1, ok, 3), SG_OK, NULL);
  assert_int_equal(sg_health_epoch(h), 1);
  assert_int_equal(sg_health_log_total(h), logged); /* not a transition */
  assert_false(sg_health_is_member(h, 2));
  assert_true(sg_health_is_member(h, 3));
  sg_health_state st;
  assert_status(sg_health_state_of(h, 2, &st), SG_ERR_NOT_FOUND, "not a member of epoch 1");
  assert_int_equal(sg_health_count(h, SG_HEALTH_HEALTHY), 3);
  assert_int_equal(sg_health_count(h, SG_HEALTH_UNREACHABLE), 0);
  /* The graph belonged to the old plan. */
  size_t n = 99;
  assert_status(sg_health_neighbors(h, 1, NULL, 0, &n), SG_OK, NULL);
  assert_int_equal(n, 0);
  assert_status(sg_health_add_edge(h, 1, 2, SG_EDGE_RING), SG_ERR_NOT_FOUND, "rank 2 is not a member");
  /* Old-epoch messages are refused; the old member is refused. */
  sg_heartbeat hb = hb_of(0, 0, 9, 3, 1100);
  assert_status(sg_health_heartbeat(h, 0, 1100, &hb), SG_ERR_STATE, "sent epoch 0, the current epoch is 1");
  hb = hb_of(2, 1, 9, 3, 1100);
  assert_status(sg_health_heartbeat(h, 2, 1100, &hb), SG_ERR_STATE, "not a member of epoch 1");
  assert_status(sg_health_peer_failed(h, 2, 1100, "x"), SG_ERR_STATE, "not a member");
  hb = hb_of(0, 1, 9, 3, 1100);
  assert_status(sg_health_heartbeat(h, 0, 1100, &hb), SG_OK, NULL);
  /* The timeout counts from the reset: rank 3 silent since 1000. */
  assert_status(sg_health_tick(h, 1999), SG_OK, NULL);
  assert_int_equal(state(h, 3), SG_HEALTH_HEALTHY);
  assert_status(sg_health_tick(h, 2000), SG_OK, NULL);
  assert_int_equal(state(h, 3), SG_HEALTH_UNREACHABLE);
  assert_int_equal(state(h, 0), SG_HEALTH_HEALTHY); /* heard at 1100 */
  assert_status(sg_health_tick(h, 2100), SG_OK, NULL);
  assert_int_equal(state(h, 0), SG_HEALTH_UNREACHABLE);
  sg_health_destroy(h);
}

static void test_peer_info_and_restart(void **state_) {
  (void)state_;
  sg_health *h;
  assert_status(sg_health_create(3, 0, NULL, 0, &h), SG_OK, NULL);
  sg_checkin ci = ci_of(1, 0, 120, 100);
  ci.n_deps = 2;
  ci.deps[0] = 0;
  ci.deps[1] = 2;
  assert_status(sg_health_checkin(h, 1, 100, &ci), SG_OK, NULL);
  sg_heartbeat hb = hb_of(1, 0, 7, 4, 150);
  assert_status(sg_health_heartbeat(h, 1, 150, &hb), SG_OK, NULL);
  sg_health_peer info;
  assert_status(sg_health_peer_info(h, 1, &info), SG_OK, NULL);
  assert_int_equal(info.last_heard_ms, 150);
  assert_int_equal(info.last_checkin_ms, 100);
  assert_true(info.has_checkin && info.has_heartbeat);
  assert_int_equal(info.checkin.n_deps, 2);
  assert_int_equal(info.checkin.deps[1], 2);
  assert_int_equal(info.heartbeat.collective, 4);
  assert_status(sg_health_peer_info(h, 2, &info), SG_OK, NULL);
  assert_false(info.has_checkin || info.has_heartbeat);
  /* Another instance id: the process we knew is gone. */
  ci.instance_id = 77;
  assert_status(sg_health_checkin(h, 1, 200, &ci), SG_OK, NULL);
  assert_int_equal(state(h, 1), SG_HEALTH_UNREACHABLE);
  sg_health_transition tr;
  assert_status(sg_health_log_get(h, 0, &tr), SG_OK, NULL);
  assert_string_equal(tr.reason, "restarted: instance 0x4d replaced 0x3e9");
  sg_health_destroy(h);
}

static void test_input_validation(void **state_) {
  (void)state_;
  sg_health *h = (sg_health *)1;
  /* create */
  assert_status(sg_health_create(0, 0, NULL, 0, &h), SG_ERR_INVALID_ARG, "world_size 0");
  assert_null(h);
  assert_status(sg_health_create(65537, 0, NULL, 0, &h), SG_ERR_INVALID_ARG, "world_size 65537");
  assert_status(sg_health_create(2, 2, NULL, 0, &h), SG_ERR_INVALID_ARG, "self_rank 2");
  assert_status(sg_health_create(2, -1, NULL, 0, &h), SG_ERR_INVALID_ARG, "self_rank -1");
  assert_status(sg_health_create(2, 0, NULL, -5, &h), SG_ERR_INVALID_ARG, "negative");
  assert_status(sg_health_create(2, 0, NULL, 0, NULL), SG_ERR_INVALID_ARG, "out is NULL");
  static const struct {
    const char *field;
    int which;
    double value;
  } bad[] = {
      {"size", 0, 3},
      {"heartbeat_ms", 1, 0},
      {"heartbeat_ms", 1, 86400001},
      {"checkin_ms", 2, -1},
      {"unreachable_ms", 3, 0},
      {"must exceed heartbeat_ms", 3, 100},
      {"degraded_missed", 4, 0},
      {"degraded_missed", 4, 1001},
      {"slow_factor", 5, 1.0},
      {"slow_factor", 5, -2},
      {"slow_factor", 5, 1001},
      {"log_capacity", 6, 0},
      {"slow_min_ms", 7, -1},
      {"slow_min_ms", 7, 86400001},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    sg_health_config c = sg_health_config_init();
    switch (bad[i].which) {
      case 0: c.size = (size_t)bad[i].value; break;
      case 1: c.heartbeat_ms = (int)bad[i].value; break;
      case 2: c.checkin_ms = (int)bad[i].value; break;
      case 3: c.unreachable_ms = (int)bad[i].value; break;
      case 4: c.degraded_missed_checkins = (int)bad[i].value; break;
      case 5: c.slow_factor = bad[i].value; break;
      case 6: c.log_capacity = (int)bad[i].value; break;
      case 7: c.slow_min_ms = (int)bad[i].value; break;
    }
    assert_status(sg_health_create(2, 0, &c, 0, &h), SG_ERR_INVALID_ARG, bad[i].field);
  }
  sg_health_config nan_cfg = SG_HEALTH_CONFIG_INIT;
  nan_cfg.slow_factor = __builtin_nan("");
  assert_status(sg_health_create(2, 0, &nan_cfg, 0, &h), SG_ERR_INVALID_ARG, "slow_factor");

  assert_status(sg_health_create(3, 0, NULL, 100, &h), SG_OK, NULL);
  /* time */
  assert_status(sg_health_tick(h, 99), SG_ERR_INVALID_ARG, "time went backwards: now_ms 99 after 100");
  assert_status(sg_health_tick(h, 200), SG_OK, NULL);
  sg_heartbeat hb = hb_of(1, 0, 1, 1, 0);
  assert_status(sg_health_heartbeat(h, 1, 150, &hb), SG_ERR_INVALID_ARG, "time went backwards");
  /* ranks and messages */
  assert_status(sg_health_heartbeat(h, 3, 300, &hb), SG_ERR_INVALID_ARG, "rank 3 is outside the job of 3");
  assert_status(sg_health_heartbeat(h, -1, 300, &hb), SG_ERR_INVALID_ARG, "rank -1");
  assert_status(sg_health_heartbeat(h, 1, 300, NULL), SG_ERR_INVALID_ARG, "NULL");
  assert_status(sg_health_heartbeat(h, 2, 300, &hb), SG_ERR_FORMAT, "from rank 2 claims to be from rank 1");
  hb.step = (uint64_t)INT64_MAX + 1;
  assert_status(sg_health_heartbeat(h, 1, 300, &hb), SG_ERR_RANGE, "step");
  hb = hb_of(1, 3, 1, 1, 0);
  assert_status(sg_health_heartbeat(h, 1, 300, &hb), SG_ERR_STATE, "sent epoch 3");
  sg_checkin ci = ci_of(1, 0, 0, 300);
  ci.n_deps = 1;
  ci.deps[0] = 1;
  assert_status(sg_health_checkin(h, 1, 300, &ci), SG_ERR_FORMAT, "the sender itself");
  ci.deps[0] = 5;
  assert_status(sg_health_checkin(h, 1, 300, &ci), SG_ERR_FORMAT, "outside the job of 3");
  ci.n_deps = 65;
  assert_status(sg_health_checkin(h, 1, 300, &ci), SG_ERR_RANGE, "65 dependencies");
  ci.n_deps = 0;
  ci.cpu_permille = 1001;
  assert_status(sg_health_checkin(h, 1, 300, &ci), SG_ERR_RANGE, "CPU use 1001");
  /* NULL handles */
  assert_status(sg_health_tick(NULL, 0), SG_ERR_INVALID_ARG, "NULL");
  assert_status(sg_health_set_callback(NULL, NULL, NULL), SG_ERR_INVALID_ARG, "NULL");
  sg_health_state st;
  assert_status(sg_health_state_of(NULL, 0, &st), SG_ERR_INVALID_ARG, "NULL");
  assert_status(sg_health_state_of(h, 0, NULL), SG_ERR_INVALID_ARG, "NULL");
  assert_int_equal(sg_health_count(NULL, SG_HEALTH_HEALTHY), -1);
  assert_int_equal(sg_health_world_size(h), 3);
  assert_int_equal(sg_health_self(h), 0);
  assert_int_equal(sg_health_world_size(NULL), 0);
  assert_int_equal(sg_health_self(NULL), -1);
  assert_false(sg_health_is_member(h, 3));
  assert_string_equal(sg_health_state_str(SG_HEALTH_DEGRADED), "DEGRADED");
  assert_string_equal(sg_health_state_str((sg_health_state)9), "?");
  sg_health_destroy(h);
  sg_health_destroy(NULL);
}

/* Every allocation of create, graph building and diagnosis fails in turn:
 * each failure is SG_ERR_NO_MEMORY with a message and leaks nothing (ASan). */
static sg_status sequence(void) {
  sg_health *h = NULL;
  char buf[256];
  sg_status st;
  SG_CHECK_GOTO(sg_health_create(6, 0, NULL, 0, &h), st, out);
  SG_CHECK_GOTO(sg_health_add_ring(h, NULL, 6), st, out);
  SG_CHECK_GOTO(sg_health_add_edge(h, 0, 3, SG_EDGE_PIPELINE), st, out);
  SG_CHECK_GOTO(sg_health_diagnose(h, buf, sizeof buf, NULL), st, out);
out:
  sg_health_destroy(h);
  return st;
}

static void test_alloc_failures(void **state_) {
  (void)state_;
  long n;
  for (n = 0; n < 1000; n++) {
    sg_clear_error();
    sg__alloc_fail_after(n);
    sg_status st = sequence();
    sg__alloc_fail_after(-1);
    if (st == SG_OK) break;
    if (st != SG_ERR_NO_MEMORY)
      fail_msg("failing allocation %ld gave %s: %s", n, sg_status_str(st), sg_last_error());
    if (strstr(sg_last_error(), "out of memory") == NULL)
      fail_msg("failing allocation %ld: message '%s'", n, sg_last_error());
  }
  assert_true(n >= 5 && n < 1000);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_silent_peer_timeline),
      cmocka_unit_test(test_silent_from_start),
      cmocka_unit_test(test_dead_peer_at_once),
      cmocka_unit_test(test_missed_checkins_and_back),
      cmocka_unit_test(test_too_slow),
      cmocka_unit_test(test_callback_order_and_log_ring),
      cmocka_unit_test(test_epoch_reset),
      cmocka_unit_test(test_peer_info_and_restart),
      cmocka_unit_test(test_input_validation),
      cmocka_unit_test(test_alloc_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
