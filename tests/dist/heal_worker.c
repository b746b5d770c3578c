/* A rank of the self-healing tests (tests/dist/run_heal.sh,
 * docs/resilience.md): the MLP of dist_models.c, 4 ranks, 10 steps, inputs
 * given through the feed callback so that the job can heal; faults come from
 * SG_INJECT (`sgrt launch --inject`).
 *
 *   heal_worker DIR [REF]   trains, writes DIR/params.<rank> (raw f32 of
 *                           every parameter); with REF (a failure-free run's
 *                           DIR) compares its parameters with REF/params.0
 *                           and fails beyond 1e-5 relative; checks that a
 *                           recovery lost no step (RPO 0) and that detection
 *                           took < 1 s. Exits SG_DIST_EXIT_EXCLUDED (75) when
 *                           a recovery left it out. HEAL_STEP_SLEEP_MS
 *                           pauses before each step; HEAL_MICRO_BATCHES
 *                           sets sg_dist_params.micro_batches, HEAL_ZERO
 *                           sg_dist_params.zero, HEAL_DROPOUT a dropout
 *                           probability after each hidden layer;
 *                           HEAL_SLOW_START=R:MS makes rank R start MS ms
 *                           late, HEAL_SLOW_RANK=R:MS rank R's steps MS ms
 *                           longer; HEAL_DEAD_MS sets dead_ms. The last
 *                           line says how many ranks were DEGRADED at most.
 *                           Rejoin (tests/dist/run_rejoin.sh): HEAL_STEPS
 *                           sets the steps (default 10); a rank restarted
 *                           with SG_REJOIN=1 goes on from the step its
 *                           create was admitted at (stats.steps).
 *   heal_worker badargs     checks the validation of the recovery parameters
 *                           (run with SG_INJECT set to a bad spec).
 *   heal_worker rejoin_badargs  checks the validation of SG_REJOIN.
 *   heal_worker inject_gate  fault injection: sg_dist_params.inject arms it
 *                           in every build; SG_INJECT only in a library built
 *                           with SG_FAULT_INJECTION, and is refused in any
 *                           other (sgrt launch -n 1). */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SG_WORKER_FAIL_STATUS 2 /* 1 is a failed step (see main) */
#include "../worker_check.h"
#include "dist_models.h"
#include "sgrt/sgrt.h"

#define STEPS 10
enum { B = 8, IN = 32, HID = 64, LAYERS = 3, CL = 10 };

/* HEAL_SLOW_RANK=R:MS: the feed of rank R sleeps MS ms in every step (inside the step: busy time,
 * as a slow CPU), for the health monitor's "too slow" (checkin.c). */
static int slow_feed_ms;
static sg_status slow_feed(void *ctx, sg_dist *d, uint64_t step, int shard, int n_shards) {
  usleep((useconds_t)slow_feed_ms * 1000);
  return mlp_feed(ctx, d, step, shard, n_shards);
}

/* The inputs (mlp_feed): shard k of a step is samples [k*B, (k+1)*B) of the global batch. */
static float feed_x[B * IN];
static int64_t feed_y[B];
static mlp_feed_ctx feed_ctx = {B, IN, CL, 0.1f, feed_x, feed_y};

/* Graceful-degrade's expected result, from one process (HEAL_EXPECT_DROP=R:S): the whole global
 * batch (4 x micro-batches shards) up to 0-based step S, then the batch without rank R's shards (its
 * mean loss is the mean of the kept shards' losses, so its gradient is what the survivors average).
 * Parameters and momentum go over from the 4-shard session to the 3-shard one by name. */
static sg_status run_ref_steps(sg_session *s, int first, int end, int lost, int shards, int kept, float lr) {
  float *x = malloc((size_t)kept * B * IN * sizeof(float));
  int64_t *y = malloc((size_t)kept * B * sizeof(int64_t)), xd[] = {(int64_t)kept * B, IN},
          yd[] = {(int64_t)kept * B};
  sg_status st = x != NULL && y != NULL ? SG_OK : SG_ERR_NO_MEMORY;
  for (int k = first; k < end && st == SG_OK; k++) {
    for (int j = 0, at = 0; j < shards; j++)
      if (lost < 0 || j % 4 != lost)
        mlp_data(k, j * B, B, IN, CL, x + (size_t)(at * B * IN), y + (size_t)(at * B)), at++;
    st = sg_session_set_input(s, "x", SG_F32, 2, xd, x);
    if (st == SG_OK) st = sg_session_set_input(s, "y", SG_I64, 1, yd, y);
    if (st == SG_OK) st = sg_session_set_input(s, "lr", SG_F32, 0, NULL, &lr);
    if (st == SG_OK) st = sg_session_step(s);
  }
  free(x);
  free(y);
  return st;
}

static sg_status copy_state(const sg_graph *g, const sg_session *from, sg_session *to) {
  sg_status st = SG_OK;
  for (int32_t t = 0; t < sg_graph_num_tensors(g) && st == SG_OK; t++) {
    sg_tensor_info ti;
    st = sg_graph_tensor_info(g, (sg_tensor){t}, &ti);
    if (st != SG_OK ||
        (ti.role != SG_ROLE_PARAMETER && ti.role != SG_ROLE_OPTIMIZER_STATE && ti.role != SG_ROLE_STATE))
      continue;
    void *buf = malloc(ti.nbytes ? ti.nbytes : 1);
    st = buf != NULL ? sg_session_read(from, ti.name, buf, ti.nbytes) : SG_ERR_NO_MEMORY;
    if (st == SG_OK) st = sg_session_write(to, ti.name, buf, ti.nbytes);
    free(buf);
  }
  return st;
}

static sg_status degrade_reference(const mlp_cfg *c, int steps, int micro, int lost, int from, float lr,
                                   param_set *out) {
  mlp_cfg c_all = *c, c_kept = *c;
  int shards = 4 * micro, kept = shards - micro; /* rank r's shards: r, r + 4, ... */
  c_all.batch = shards * B;
  c_kept.batch = kept * B;
  sg_graph *g_all = NULL, *g_kept = NULL;
  sg_session *s_all = NULL, *s_kept = NULL;
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sp.threads = 1;
  sg_status st = mlp_build(&c_all, &g_all);
  if (st == SG_OK) st = mlp_build(&c_kept, &g_kept);
  if (st == SG_OK) st = sg_session_create(g_all, &sp, &s_all);
  if (st == SG_OK) st = sg_session_create(g_kept, &sp, &s_kept);
  if (st == SG_OK) st = sg_session_compile(s_all);
  if (st == SG_OK) st = sg_session_compile(s_kept);
  if (st == SG_OK) st = run_ref_steps(s_all, 0, from, -1, shards, shards, lr);
  if (st == SG_OK) st = copy_state(g_all, s_all, s_kept);
  if (st == SG_OK) st = run_ref_steps(s_kept, from, steps, lost, shards, kept, lr);
  if (st == SG_OK) st = params_read(g_kept, s_kept, out);
  sg_session_destroy(s_all);
  sg_session_destroy(s_kept);
  sg_graph_destroy(g_all);
  sg_graph_destroy(g_kept);
  return st;
}

/* `heal_worker badargs` (run with SG_INJECT set to a bad spec): the
 * recovery parameters are validated, each error naming what was wrong. */
static int badargs(sg_graph *g) {
  sg_dist_params dp = SG_DIST_PARAMS_INIT;
  dp.threads = 1;
  dp.feed = mlp_feed;
  dp.feed_ctx = &feed_ctx;
  dp.qos = 7;
  sg_dist *d = NULL;
  if (sg_dist_create(g, &dp, &d) != SG_ERR_INVALID_ARG || strstr(sg_last_error(), "qos is 7") == NULL)
    FAIL("qos 7 accepted or badly reported");
  dp.qos = -1;
  if (sg_dist_create(g, &dp, &d) != SG_ERR_INVALID_ARG || strstr(sg_last_error(), "SG_INJECT") == NULL ||
      d != NULL)
    FAIL("a bad SG_INJECT accepted or badly reported");
  printf("badargs: %s\n", sg_last_error());
  /* A tier the runtime cannot honour is refused, not run as another. */
  unsetenv("SG_INJECT");
  dp.qos = SG_QOS_BEST_EFFORT;
  dp.zero = 1;
  if (sg_dist_create(g, &dp, &d) != SG_ERR_UNSUPPORTED || strstr(sg_last_error(), "best-effort") == NULL ||
      strstr(sg_last_error(), "zero 1") == NULL || d != NULL)
    FAIL("QoS best-effort with ZeRO-1 accepted or badly reported");
  printf("badargs: %s\n", sg_last_error());
  sg_graph_destroy(g);
  return 0;
}

/* `heal_worker rejoin_badargs` (one process, no launcher): SG_REJOIN is
 * validated at create, before anything joins, each error naming the cause. */
static int rejoin_badargs(sg_graph *g) {
  sg_dist_params dp = SG_DIST_PARAMS_INIT;
  dp.threads = 1;
  dp.feed = mlp_feed;
  dp.feed_ctx = &feed_ctx;
  sg_dist *d = NULL;
  setenv("SG_REJOIN", "yes", 1);
  if (sg_dist_create(g, &dp, &d) != SG_ERR_INVALID_ARG ||
      strstr(sg_last_error(), "SG_REJOIN='yes'") == NULL || d != NULL)
    FAIL("SG_REJOIN=yes accepted or badly reported");
  setenv("SG_REJOIN", "1", 1);
  dp.feed = NULL;
  if (sg_dist_create(g, &dp, &d) != SG_ERR_INVALID_ARG || strstr(sg_last_error(), "feed callback") == NULL ||
      d != NULL)
    FAIL("SG_REJOIN=1 without a feed accepted or badly reported");
  printf("rejoin_badargs: %s\n", sg_last_error());
  dp.feed = mlp_feed;
  dp.feed_ctx = &feed_ctx;
  dp.zero = 1;
  if (sg_dist_create(g, &dp, &d) != SG_ERR_UNSUPPORTED || strstr(sg_last_error(), "ZeRO-1") == NULL ||
      d != NULL)
    FAIL("SG_REJOIN=1 with ZeRO-1 accepted or badly reported");
  printf("rejoin_badargs: %s\n", sg_last_error());
  dp.zero = 0;
  setenv("SG_RANK", "0", 1);
  setenv("SG_WORLD_SIZE", "1", 1);
  if (sg_dist_create(g, &dp, &d) != SG_ERR_INVALID_ARG || strstr(sg_last_error(), "nobody to join") == NULL ||
      d != NULL)
    FAIL("SG_REJOIN=1 in a one-rank job accepted or badly reported");
  printf("rejoin_badargs: %s\n", sg_last_error());
  sg_graph_destroy(g);
  return 0;
}

/* The job's one rank fails with the injected device fault in its call `at` of sg_dist_step (a plan's
 * step=S fires at the start of step S, 0-based: call S + 1). */
static void expect_device_fault(sg_dist *d, int at, const char *what) {
  for (int s = 1; s <= at; s++) {
    sg_status st = sg_dist_step(d);
    if (s < at && st != SG_OK) FAIL("%s: step %d: %s", what, s, sg_last_error());
    if (s == at && (st != SG_ERR_DEVICE || strstr(sg_last_error(), "injected device failure") == NULL))
      FAIL("%s: step %d did not fail with the injected device fault (%s)", what, s,
           st == SG_OK ? "it succeeded" : sg_last_error());
  }
  printf("inject_gate: %s: step %d failed as injected: %s\n", what, at, sg_last_error());
}

static int inject_gate(sg_graph *g) {
  sg_dist_params dp = SG_DIST_PARAMS_INIT; /* a job of one rank (sgrt launch -n 1) */
  dp.threads = 1;
  dp.feed = mlp_feed;
  dp.feed_ctx = &feed_ctx;
  sg_dist *d = NULL;
  setenv("SG_INJECT", "device:rank=0,step=2", 1);
  sg_status st = sg_dist_create(g, &dp, &d);
#ifdef SG_TEST_FAULT_INJECTION
  if (st != SG_OK) FAIL("SG_INJECT refused in a build with SG_FAULT_INJECTION: %s", sg_last_error());
  expect_device_fault(d, 3, "SG_INJECT");
  sg_dist_destroy(d);
#else
  if (st != SG_ERR_UNSUPPORTED || strstr(sg_last_error(), "-DSG_FAULT_INJECTION=ON") == NULL || d != NULL)
    FAIL("SG_INJECT accepted or badly reported in a build without SG_FAULT_INJECTION (%s)", sg_last_error());
  printf("inject_gate: %s\n", sg_last_error());
#endif
  /* The API arms it in every build, and a plan given there wins over the environment's. */
  setenv("SG_INJECT", "not a plan", 1);
  dp.inject = "device:rank=0,step=1";
  d = NULL;
  if (sg_dist_create(g, &dp, &d) != SG_OK) FAIL("sg_dist_params.inject: %s", sg_last_error());
  expect_device_fault(d, 2, "sg_dist_params.inject");
  sg_dist_destroy(d);
  d = NULL;
  dp.inject = "device:rank=4,step=1"; /* a world of one has no rank 4 */
  if (sg_dist_create(g, &dp, &d) != SG_ERR_INVALID_ARG ||
      strstr(sg_last_error(), "sg_dist_params.inject") == NULL || d != NULL)
    FAIL("a bad sg_dist_params.inject accepted or badly reported (%s)", sg_last_error());
  printf("inject_gate: %s\n", sg_last_error());
  unsetenv("SG_INJECT");
  sg_graph_destroy(g);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: heal_worker DIR [REF_DIR]\n");
    return 2;
  }
  const char *dir = argv[1], *ref = argc > 2 ? argv[2] : NULL;
  mlp_cfg c = {B, IN, HID, LAYERS, CL, 1, 1};
  sg_graph *g;
  /* HEAL_DROPOUT: dropout after the hidden layers; a shard redone on a survivor must draw the masks
   * of its first attempt (per-shard streams), or the parameters part from the failure-free run. */
  const char *drop = getenv("HEAL_DROPOUT");
  if (drop != NULL && !(atof(drop) >= 0 && atof(drop) < 1)) FAIL("HEAL_DROPOUT=%s is not in [0, 1)", drop);
  if (drop != NULL) c.dropout = atof(drop);
  CHECK_OK(mlp_build(&c, &g));
  if (strcmp(dir, "badargs") == 0) return badargs(g);
  if (strcmp(dir, "rejoin_badargs") == 0) return rejoin_badargs(g);
  if (strcmp(dir, "inject_gate") == 0) return inject_gate(g);
  sg_dist_params dp = SG_DIST_PARAMS_INIT;
  dp.threads = 1;
  dp.bucket_bytes = 4096; /* several buckets */
  dp.heartbeat_ms = 100;
  dp.dead_ms = 400;
  /* HEAL_DEAD_MS: a longer silence limit, so that a failure found within it was found another way
   * (a process exit through the pidfd watch, a UCX endpoint error). */
  const char *dead = getenv("HEAL_DEAD_MS");
  if (dead != NULL && (atoi(dead) <= dp.heartbeat_ms || atoi(dead) > 3600000))
    FAIL("HEAL_DEAD_MS=%s is not in (100, 3600000]", dead);
  if (dead != NULL) dp.dead_ms = atoi(dead);
  dp.feed = mlp_feed;
  dp.feed_ctx = &feed_ctx;
  /* HEAL_MICRO_BATCHES: micro-batches per rank and step (the shards of a lost rank's micro-batches
   * then spread over the survivors). */
  const char *micro = getenv("HEAL_MICRO_BATCHES");
  if (micro != NULL && (atoi(micro) < 1 || atoi(micro) > 16))
    FAIL("HEAL_MICRO_BATCHES=%s is not in 1..16", micro);
  if (micro != NULL) dp.micro_batches = atoi(micro);
  /* HEAL_ZERO=1: ZeRO-1, the optimizer state sharded, each range replicated to a buddy rank. */
  const char *zero = getenv("HEAL_ZERO");
  if (zero != NULL && strcmp(zero, "0") != 0 && strcmp(zero, "1") != 0)
    FAIL("HEAL_ZERO=%s is not 0 or 1", zero);
  if (zero != NULL) dp.zero = atoi(zero);
  /* HEAL_SLOW_START=R:MS: rank R starts MS ms late (a slow start, not a
   * failure: the others wait for it at create). */
  const char *slow = getenv("HEAL_SLOW_START");
  if (slow != NULL) {
    int slow_rank = -1, slow_ms = -1;
    if (sscanf(slow, "%d:%d", &slow_rank, &slow_ms) != 2 || slow_ms < 0 || slow_ms > 60000)
      FAIL("HEAL_SLOW_START=%s is not RANK:MS with MS in 0..60000", slow);
    const char *me = getenv("SG_RANK");
    if (me != NULL && atoi(me) == slow_rank) usleep((useconds_t)slow_ms * 1000);
  }
  const char *slow_rank = getenv("HEAL_SLOW_RANK");
  if (slow_rank != NULL) {
    int r = -1, ms = -1;
    if (sscanf(slow_rank, "%d:%d", &r, &ms) != 2 || ms < 0 || ms > 10000)
      FAIL("HEAL_SLOW_RANK=%s is not RANK:MS with MS in 0..10000", slow_rank);
    const char *me = getenv("SG_RANK");
    if (me != NULL && atoi(me) == r) slow_feed_ms = ms, dp.feed = slow_feed;
  }
  sg_dist *d;
  CHECK_OK(sg_dist_create(g, &dp, &d));
  int first_size = sg_dist_size(d); /* a joiner: the size it joined */
  int rank = sg_dist_rank(d);
  sg_dist_stats st = SG_DIST_STATS_INIT;
  /* HEAL_STEP_SLEEP_MS: a pause before each step, so that an outside fault
   * (tests/netns/netns_heal.sh takes a link down) lands in the middle of the run. */
  const char *pause = getenv("HEAL_STEP_SLEEP_MS");
  int pause_ms = pause ? atoi(pause) : 0;
  if (pause_ms < 0 || pause_ms > 10000) FAIL("HEAL_STEP_SLEEP_MS=%s is not in 0..10000", pause);
  const char *nsteps = getenv("HEAL_STEPS");
  int steps = nsteps ? atoi(nsteps) : STEPS;
  if (steps < 1 || steps > 100) FAIL("HEAL_STEPS=%s is not in 1..100", nsteps);
  /* A rejoined rank was admitted after some steps: it goes on from there. */
  CHECK_OK(sg_dist_get_stats(d, &st));
  if (getenv("SG_REJOIN") == NULL && st.steps != 0) FAIL("%" PRIu64 " steps done at create", st.steps);
  int max_degraded = 0;
  for (int s = (int)st.steps; s < steps; s++) {
    if (pause_ms > 0) usleep((useconds_t)pause_ms * 1000);
    sg_status rc = sg_dist_step(d);
    CHECK_OK(sg_dist_get_stats(d, &st));
    if (rc != SG_OK) {
      fprintf(stderr, "rank %d: step %d: %s\n", rank, s + 1, sg_last_error());
      int excluded = st.excluded;
      sg_dist_destroy(d);
      sg_graph_destroy(g);
      return excluded ? SG_DIST_EXIT_EXCLUDED : 1;
    }
    if (st.steps != (uint64_t)s + 1) FAIL("after step %d: %" PRIu64 " steps completed", s + 1, st.steps);
    if (st.degraded_ranks > max_degraded) max_degraded = st.degraded_ranks;
  }
  double rel;
  CHECK_OK(params_save_compare(g, sg_dist_session(d), dir, st.original_rank, ref, &rel));
  rank = sg_dist_rank(d);
  printf("HEAL rank %d (now %d of %d): recoveries %d epoch %d shards %d detection_ms %.1f rto_ms %.1f "
         "rto_step_ms %.1f rpo_steps %" PRIu64 " redone %" PRIu64
         " snapshot_ms %.3f step_ms %.3f max_rel %.3g rejoins %d "
         "replica_bytes %zu replication_ms %.3f state_bytes %zu of %zu\n",
         st.original_rank, rank, st.world_size, st.recoveries, st.epoch, st.shards, st.detection_ms,
         st.rto_ms, st.rto_step_ms, st.rpo_steps, st.redone_steps, st.snapshot_ms, st.step_ms, rel,
         st.rejoins, st.replica_bytes, st.replication_ms, st.optimizer_state_bytes, st.optimizer_state_total);
  /* The RTO ends where the job resumes, before the step it resumes with ends. */
  if (st.recoveries > 0 && !(st.detection_ms <= st.rto_ms && st.rto_ms > 0 && st.rto_ms <= st.rto_step_ms))
    FAIL("recovery times out of order: detection %.1f ms, RTO %.1f ms, to the step's end %.1f ms",
         st.detection_ms, st.rto_ms, st.rto_step_ms);
  /* graceful-degrade skips the lost ranks' samples: not the failure-free result, one shard each. */
  const char *qos = getenv("SG_QOS");
  bool degrade = qos != NULL && strcmp(qos, "graceful-degrade") == 0;
  if (degrade && st.shards != dp.micro_batches)
    FAIL("graceful-degrade: %d shards on this rank, expected %d", st.shards, dp.micro_batches);
  /* HEAL_EXPECT_RETRY=W:LO:HI (best-effort): the job ends with W ranks, this rank counted LO..HI probes
   * of the cut link, and with W = 4 (the link came back) no completed step was redone: the failed
   * step's allreduce was retried (or, when a member had not begun the step, the step run over the same
   * members). The parameters are checked against the failure-free run below. */
  const char *expect_retry = getenv("HEAL_EXPECT_RETRY");
  if (expect_retry != NULL && st.recoveries > 0) {
    int w = -1, lo = -1, hi = -1;
    if (sscanf(expect_retry, "%d:%d:%d", &w, &lo, &hi) != 3 || w < 1 || lo < 0 || hi < lo)
      FAIL("HEAL_EXPECT_RETRY=%s is not WORLD:LO:HI", expect_retry);
    printf("HEAL rank %d: best-effort: %d ranks, %d probe(s) of the cut link, %d step(s) retried, %" PRIu64
           " redone\n",
           st.original_rank, st.world_size, st.collective_retries, st.rereduced_steps, st.redone_steps);
    if (st.world_size != w || st.collective_retries < lo || st.collective_retries > hi)
      FAIL("best-effort: %d ranks and %d probes, expected %d ranks and %d..%d probes", st.world_size,
           st.collective_retries, w, lo, hi);
    if (w == 4 && (st.rereduced_steps > 1 || st.redone_steps != 0))
      FAIL("best-effort: %d step(s) retried and %" PRIu64 " redone, expected at most 1 and 0",
           st.rereduced_steps, st.redone_steps);
  }
  /* HEAL_EXPECT_DROP=R:S: graceful-degrade lost rank R at (0-based) step S; the survivors averaged that
   * step over their own shards instead of redoing it, and dropped R's shard from every step since. */
  const char *expect_drop = getenv("HEAL_EXPECT_DROP");
  if (expect_drop != NULL && st.recoveries > 0) {
    int lost = -1, from = -1;
    if (sscanf(expect_drop, "%d:%d", &lost, &from) != 2 || lost < 0 || lost >= 4 || from < 0 || from >= steps)
      FAIL("HEAL_EXPECT_DROP=%s is not RANK:STEP", expect_drop);
    if (st.rereduced_steps != 1 || st.redone_steps != 0)
      FAIL("graceful-degrade: %d step(s) averaged again and %" PRIu64 " redone, expected 1 and 0",
           st.rereduced_steps, st.redone_steps);
    if (st.dropped_shards != (uint64_t)((steps - from) * dp.micro_batches))
      FAIL("graceful-degrade: %" PRIu64 " shards dropped, expected %d", st.dropped_shards,
           (steps - from) * dp.micro_batches);
    param_set got = {0}, want = {0};
    CHECK_OK(params_read(g, sg_dist_session(d), &got));
    CHECK_OK(degrade_reference(&c, steps, dp.micro_batches, lost, from, feed_ctx.lr, &want));
    param_diff diff;
    double drel = params_max_rel_diff(&got, &want, &diff);
    params_free(&got);
    params_free(&want);
    printf(
        "HEAL rank %d: graceful-degrade: %d step averaged again, %" PRIu64
        " shards dropped, parameters vs one process without rank %d's shards from step %d: %.3g relative\n",
        st.original_rank, st.rereduced_steps, st.dropped_shards, lost, from, drel);
    if (!(drel <= 1e-5)) FAIL("graceful-degrade: parameters differ from one process by %.3g relative", drel);
  }
  if (!degrade && !(rel <= 1e-5)) FAIL("parameters differ from the failure-free run by %.3g relative", rel);
  if (st.recoveries > 0 && st.rpo_steps != 0) FAIL("rpo_steps %" PRIu64 ", expected 0", st.rpo_steps);
  if (st.recoveries > 0 && !(st.detection_ms < 1000)) FAIL("detection took %.1f ms", st.detection_ms);
  /* The health monitor saw the lost rank go UNREACHABLE (logged) and has the new epoch. A
   * 'behind' fault loses nobody: every rank is still a member. */
  const sg_health *h = sg_dist_health(d);
  if (h == NULL) FAIL("no health monitor");
  bool behind = strstr(getenv("SG_INJECT") ? getenv("SG_INJECT") : "", "behind") != NULL;
  if (behind && st.world_size != first_size)
    FAIL("a 'behind' fault lost a rank: %d of %d ranks", st.world_size, first_size);
  if (st.recoveries > 0 && !behind && st.world_size < first_size) {
    /* The first transition to UNREACHABLE (a loaded machine may have logged DEGRADED ranks before). */
    sg_health_transition t = {0};
    size_t i = 0;
    while (i < sg_health_log_size(h) && sg_health_log_get(h, i, &t) == SG_OK && t.to != SG_HEALTH_UNREACHABLE)
      i++;
    if (i == sg_health_log_size(h)) FAIL("the health log lacks the lost rank's transition to UNREACHABLE");
    if ((int)sg_health_epoch(h) != st.epoch)
      FAIL("health epoch %u, expected %d", sg_health_epoch(h), st.epoch);
    printf("HEAL rank %d: health log: rank %d %s -> %s (%s)\n", st.original_rank, t.rank,
           sg_health_state_str(t.from), sg_health_state_str(t.to), t.reason);
  }
  printf("HEAL rank %d: at most %d rank(s) DEGRADED\n", st.original_rank, max_degraded);
  CHECK_OK(sg_dist_destroy(d));
  sg_graph_destroy(g);
  return 0;
}
