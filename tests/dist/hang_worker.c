/* A rank of the hang-diagnosis tests (SPEC H7, tests/dist/run_hang.sh,
 * docs/resilience.md "Hang diagnosis"): the MLP of dist_models.c, 4 ranks,
 * heartbeat 100 ms, dead after 400 ms, hang timeout HANG_MS (default 2000);
 * a hang comes from SG_INJECT ("hang:rank=R,step=S").
 *
 *   hang_worker heal DIR [REF]  inputs through the feed callback (the job
 *                               heals without a stuck rank); writes
 *                               DIR/params.<rank>; with REF (a failure-free
 *                               run's DIR) fails beyond 1e-5 relative to
 *                               REF/params.0. Prints "HANG rank R ...
 *                               recoveries N detection_ms X". Exits 75 when
 *                               excluded.
 *   hang_worker fail DIR        inputs set by hand (no healing): a failed
 *                               step prints "HANGFAIL rank R wall S: MESSAGE"
 *                               (S: CLOCK_REALTIME seconds) and exits 1.
 *   hang_worker slow DIR        no false positive: every rank pauses
 *                               HANG_SLEEP_MS before each step (longer than
 *                               the hang timeout: nobody waits in a
 *                               collective meanwhile), rank 1 HANG_LAG_MS
 *                               more (the others wait that long in the
 *                               step's first collective); 4 steps; every
 *                               rank must finish with 0 recoveries.
 *   hang_worker api             sg_comm_label / sg_comm_set_hang_timeout /
 *                               sg__comm_peer_position on a live communicator,
 *                               and hang_ms validation. */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SG_WORKER_FAIL_STATUS 2 /* 1 is a failed step (see main) */
#include "../worker_check.h"
#include "comm/comm.h"
#include "dist_models.h"
#include "sgrt/sgrt.h"

#define STEPS 10
enum { B = 8, IN = 32, HID = 64, LAYERS = 3, CL = 10 };

static double wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int env_int(const char *name, int fallback, int lo, int hi) {
  const char *s = getenv(name);
  if (s == NULL || *s == '\0') return fallback;
  int v = atoi(s);
  if (v < lo || v > hi) FAIL("%s=%s is not in %d..%d", name, s, lo, hi);
  return v;
}

/* The inputs (mlp_feed): shard k of a step is samples [k*B, (k+1)*B) of the global batch. */
static float feed_x[B * IN];
static int64_t feed_y[B];
static mlp_feed_ctx feed_ctx = {B, IN, CL, 0.1f, feed_x, feed_y};

/* `api`: the position API on a live 2-rank communicator. */
static int api(void) {
  sg_comm_params cp = SG_COMM_PARAMS_INIT;
  sg_comm *c;
  CHECK_OK(sg_comm_create(&cp, &c));
  int me = sg_comm_rank(c), n = sg_comm_size(c);
  CHECK_OK(sg_comm_set_liveness(c, 20, 2000));
  CHECK_OK(sg_comm_set_hang_timeout(c, 5000));
  if (sg_comm_set_hang_timeout(c, -1) != SG_ERR_INVALID_ARG || !strstr(sg_last_error(), "hang_ms -1"))
    FAIL("hang_ms -1 accepted or badly reported");
  char big[SG_COMM_LABEL_MAX + 2];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  if (sg_comm_label(c, big) != SG_ERR_INVALID_ARG || !strstr(sg_last_error(), "longer than 96"))
    FAIL("a 97-byte label accepted or badly reported");
  if (sg_comm_label(c, "tab\there") != SG_ERR_INVALID_ARG || !strstr(sg_last_error(), "byte 3"))
    FAIL("a tab in a label accepted or badly reported");
  sg_comm_position p;
  if (sg__comm_peer_position(c, n, &p) != SG_ERR_INVALID_ARG) FAIL("rank %d accepted", n);
  CHECK_OK(sg__comm_peer_position(c, me, &p));
  if (p.collective != 0 || p.inside) FAIL("fresh position #%" PRIu64 " inside %d", p.collective, p.inside);
  /* Three collectives, labelled; the barrier takes the label "third". */
  int32_t v = 1;
  CHECK_OK(sg_comm_label(c, "first"));
  CHECK_OK(sg_comm_allreduce(c, &v, &v, 1, SG_I32, SG_REDUCE_SUM));
  CHECK_OK(sg_comm_label(c, NULL));
  CHECK_OK(sg_comm_allreduce(c, &v, &v, 1, SG_I32, SG_REDUCE_SUM));
  CHECK_OK(sg_comm_label(c, "third"));
  CHECK_OK(sg_comm_barrier(c));
  CHECK_OK(sg__comm_peer_position(c, me, &p));
  if (p.collective != 3 || strcmp(p.label, "third") != 0 || !p.inside)
    FAIL("own position #%" PRIu64 " '%s' inside %d, expected #3 'third' inside", p.collective, p.label,
         p.inside);
  /* The peer's heartbeats bring its position: #3, "third", no longer inside (it polls). */
  int peer = (me + 1) % n;
  for (int i = 0; i < 500; i++) {
    CHECK_OK(sg_comm_poll(c));
    CHECK_OK(sg__comm_peer_position(c, peer, &p));
    if (p.known && p.collective == 3 && !p.inside) break;
    usleep(2000);
  }
  if (!p.known || p.collective != 3 || strcmp(p.label, "third") != 0 || p.inside)
    FAIL("peer %d's position #%" PRIu64 " '%s' inside %d known %d, expected #3 'third' finished", peer,
         p.collective, p.label, p.inside, p.known);
  CHECK_OK(sg__comm_peer_position(c, me, &p));
  if (p.inside) FAIL("still inside #3 after sg_comm_poll");
  /* Keep heartbeating "#3, finished" a while: the peer may not have seen it yet
   * (sg_comm_destroy's barrier would make it #4). */
  for (int i = 0; i < 100; i++) {
    CHECK_OK(sg_comm_poll(c));
    usleep(5000);
  }
  if (sg__comm_heartbeats_rejected(c) != 0)
    FAIL("%" PRIu64 " heartbeats rejected", sg__comm_heartbeats_rejected(c));
  CHECK_OK(sg_comm_destroy(c));
  printf("api: rank %d: positions and labels travel in heartbeats\n", me);
  return 0;
}

/* `sgrt launch` stops every rank once one exits non-zero, as torchrun does: a survivor that
 * reported its failure waits (a marker file per survivor in DIR, up to the hang timeout and 2 s)
 * until the others have reported theirs too, so a slower survivor is not killed first. */
static void wait_for_survivors(const char *dir, int rank, int size, int hang_ms) {
  char path[4096];
  snprintf(path, sizeof path, "%s/hangfail.%d", dir, rank);
  FILE *f = fopen(path, "w");
  if (f) fclose(f);
  for (int waited = 0; waited < hang_ms + 2000; waited += 20) {
    int n = 0;
    for (int r = 0; r < size; r++) {
      snprintf(path, sizeof path, "%s/hangfail.%d", dir, r);
      n += access(path, F_OK) == 0;
    }
    if (n >= size - 1) return; /* every rank but the stuck one */
    usleep(20000);
  }
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: hang_worker heal|fail|slow DIR [REF] | hang_worker api\n");
    return 2;
  }
  const char *mode = argv[1];
  if (strcmp(mode, "api") == 0) return api();
  if (argc < 3) FAIL("%s needs DIR", mode);
  bool heal = strcmp(mode, "heal") == 0, fail = strcmp(mode, "fail") == 0, slow = strcmp(mode, "slow") == 0;
  if (!heal && !fail && !slow) FAIL("unknown mode '%s'", mode);
  const char *dir = argv[2], *ref = heal && argc > 3 ? argv[3] : NULL;
  mlp_cfg c = {B, IN, HID, LAYERS, CL, 1, 1};
  sg_graph *g;
  CHECK_OK(mlp_build(&c, &g));
  sg_dist_params dp = SG_DIST_PARAMS_INIT;
  dp.threads = 1;
  dp.bucket_bytes = 4096; /* several buckets */
  dp.heartbeat_ms = 100;
  dp.dead_ms = 400;
  dp.hang_ms = env_int("HANG_MS", 2000, -1, 600000);
  dp.feed = fail ? NULL : mlp_feed;
  dp.feed_ctx = &feed_ctx;
  if (slow) {
    /* hang_ms is validated: not above 0 and not at or below heartbeat_ms. */
    sg_dist_params bad = dp;
    bad.hang_ms = 100;
    sg_dist *x = NULL;
    if (sg_dist_create(g, &bad, &x) != SG_ERR_INVALID_ARG || !strstr(sg_last_error(), "hang_ms is 100"))
      FAIL("hang_ms 100 (= heartbeat_ms) accepted or badly reported");
  }
  sg_dist *d;
  CHECK_OK(sg_dist_create(g, &dp, &d));
  int rank = sg_dist_rank(d);
  int steps = slow ? 4 : STEPS;
  int pause = slow ? env_int("HANG_SLEEP_MS", 2500, 0, 20000) : 0;
  int lag = slow && rank == 1 ? env_int("HANG_LAG_MS", 1200, 0, 20000) : 0;
  sg_dist_stats st = SG_DIST_STATS_INIT;
  for (int s = 0; s < steps; s++) {
    if (pause + lag > 0) usleep((useconds_t)(pause + lag) * 1000);
    if (fail) CHECK_OK(mlp_feed(&feed_ctx, d, (uint64_t)s, rank, sg_dist_size(d)));
    sg_status rc = sg_dist_step(d);
    CHECK_OK(sg_dist_get_stats(d, &st));
    if (rc != SG_OK) {
      if (fail) {
        printf("HANGFAIL rank %d wall %.3f: %s\n", rank, wall_s(), sg_last_error());
        fflush(stdout);
        wait_for_survivors(dir, rank, sg_dist_size(d), dp.hang_ms);
      }
      fprintf(stderr, "rank %d: step %d: %s\n", rank, s + 1, sg_last_error());
      int excluded = st.excluded;
      sg_dist_destroy(d);
      sg_graph_destroy(g);
      return excluded ? SG_DIST_EXIT_EXCLUDED : 1;
    }
    if (st.steps != (uint64_t)s + 1) FAIL("after step %d: %" PRIu64 " steps completed", s + 1, st.steps);
  }
  double rel;
  CHECK_OK(params_save_compare(g, sg_dist_session(d), dir, st.original_rank, ref, &rel));
  printf("HANG rank %d (now %d of %d): steps %" PRIu64
         " recoveries %d epoch %d detection_ms %.1f rto_ms %.1f rto_step_ms %.1f "
         "max_rel %.3g\n",
         st.original_rank, sg_dist_rank(d), st.world_size, st.steps, st.recoveries, st.epoch, st.detection_ms,
         st.rto_ms, st.rto_step_ms, rel);
  if (!(rel <= 1e-5)) FAIL("parameters differ from the failure-free run by %.3g relative", rel);
  if (slow && st.recoveries != 0) FAIL("%d recoveries in a run without a fault", st.recoveries);
  CHECK_OK(sg_dist_destroy(d));
  sg_graph_destroy(g);
  return 0;
}
