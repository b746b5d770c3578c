/* One rank of the micro-batch and ZeRO-1 tests (tests/dist/tests.cmake,
 * docs/dist.md), started N times by `sgrt launch`. The MLP of dist_models.c,
 * inputs through the feed callback: shard k of a step is samples
 * [k*B, (k+1)*B) of the global batch.
 *
 *   zero_worker micro DIR M        DP=N x M micro-batches over 5 SGD-momentum
 *                                  steps equals one process training the
 *                                  whole global batch (N*M*B samples) in one
 *                                  graph (1e-6 relative)
 *   zero_worker zero DIR OPT Z [REF]  OPT sgd|adamw, Z 0|1 (ZeRO-1): 5 steps,
 *                                  writes DIR/params.<rank> and the stats;
 *                                  every rank's parameters bitwise equal; on
 *                                  rank 0 compared with one process (1e-4) and,
 *                                  with REF (the Z=0 run's DIR), with the
 *                                  plain DP run (1e-6); with Z=1 the
 *                                  optimizer state per rank is about 1/N of
 *                                  REF's, and the buddy replicas' slots are
 *                                  on the buddy's node at version step + 2 */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_models.h"
#include "parallel/dist_internal.h" /* the buddy replicas' slots (sg__dist_replica_probe_get) */
#include "sgrt/sgrt.h"
#include "worker_check.h"

enum { B = 8, IN = 32, HID = 64, LAYERS = 3, CL = 10, STEPS = 5 };
static const float lr_sgd = 0.1f, lr_adamw = 0.01f;

/* The ZeRO test's MLP: 8 equal hidden layers, so that the 4 ranges (cut at
 * parameters) hold about a quarter of the optimizer state each. */
enum { Z_IN = 64, Z_HID = 64, Z_LAYERS = 9 };

/* The inputs (mlp_feed) of `micro` (IN features) and `zero` (Z_IN): B samples per shard. */
_Static_assert((int)Z_IN >= (int)IN, "feed_x holds B rows of either MLP");
static float feed_x[B * Z_IN];
static int64_t feed_y[B];

/* One process, the whole global batch of n_shards*B samples in one graph,
 * the same initial weights: the mean loss over all samples has the mean of
 * the shards' gradients as its gradient. */
static void reference(int in, int hid, int layers, int optimizer, int n_shards, float lr, param_set *out) {
  mlp_cfg rc = {B * n_shards, in, hid, layers, CL, 1, optimizer};
  CHECK_OK(mlp_reference(&rc, STEPS, lr, NULL, out));
}

static int run_micro(int m) {
  CHECK(m >= 2 && m <= 64, "micro-batches %d not in 2..64", m);
  mlp_cfg c = {B, IN, HID, LAYERS, CL, 1, 1};
  sg_graph *g;
  CHECK_OK(mlp_build(&c, &g));
  mlp_feed_ctx fc = {B, IN, CL, lr_sgd, feed_x, feed_y};
  sg_dist_params dp = SG_DIST_PARAMS_INIT;
  dp.threads = 1;
  dp.bucket_bytes = 4096; /* several buckets */
  dp.micro_batches = m;
  dp.feed = mlp_feed;
  dp.feed_ctx = &fc;
  sg_dist *d;
  CHECK_OK(sg_dist_create(g, &dp, &d));
  int rank = sg_dist_rank(d), size = sg_dist_size(d);
  sg_dist_stats st = SG_DIST_STATS_INIT;
  for (int s = 0; s < STEPS; s++) {
    CHECK_OK(sg_dist_step(d));
    CHECK_OK(sg_dist_get_stats(d, &st));
    CHECK(st.shards == m, "step %d ran %d shards on this rank, expected %d", s + 1, st.shards, m);
  }
  param_set got = {0};
  CHECK_OK(params_read(g, sg_dist_session(d), &got));
  CHECK_OK(sg_dist_destroy(d));
  sg_graph_destroy(g);
  if (rank == 0) {
    param_set want = {0};
    reference(IN, HID, LAYERS, 1, size * m, lr_sgd, &want);
    param_diff pd;
    double rel = params_max_rel_diff(&got, &want, &pd);
    printf("micro: DP=%d x %d micro-batches of %d vs one process x batch %d, %d SGD-momentum steps: max "
           "relative difference %.3g (worst %s), max absolute %.3g, step_ms %.2f wait_ms %.3f\n",
           size, m, B, B * size * m, STEPS, rel, pd.worst, pd.max_abs, st.step_ms, st.wait_ms);
    CHECK(rel >= 0 && rel <= 1e-6, "parameters differ from the single process by %.3g relative", rel);
    params_free(&want);
  }
  params_free(&got);
  return 0;
}

/* The buddy replicas in the global page table after STEPS steps: the slots this rank writes are
 * on its buddy's node, their versions are the steps they hold + 2 (slot k: the latest step s with
 * s mod 2 == k), what they hold read back equals this rank's snapshot of that step; the slots it
 * holds read at their version give their step, and at another version SG_ERR_STALE. */
static void check_replicas(sg_dist *d, int rank, int size) {
  sg__dist_replica_probe p;
  CHECK_OK(sg__dist_replica_probe_get(d, &p));
  for (int k = 0; k < 2; k++) {
    uint64_t step = (STEPS - 1) % 2 == k ? STEPS - 1 : STEPS - 2; /* steps 0..STEPS-1 were pushed */
    uint32_t want = (uint32_t)step + 2;
    CHECK(p.push_node[k] == (rank + 1) % size && p.push_pay_node[k] == (rank + 1) % size,
          "slot %d (GVA %s) is on node %d, payload on %d: not buddy rank %d", k, p.push_gva[k],
          p.push_node[k], p.push_pay_node[k], (rank + 1) % size);
    CHECK(p.push_open[k] && p.push_version[k] == want,
          "slot %d (GVA %s): version %u (%s), want step %" PRIu64 " + 2", k, p.push_gva[k], p.push_version[k],
          p.push_open[k] ? "readable" : "closed", step);
    CHECK(p.push_matches[k],
          "slot %d (GVA %s): what the buddy holds differs from step %" PRIu64 "'s snapshot", k, p.push_gva[k],
          step);
    CHECK(p.held_node[k] == rank && p.held_version[k] == want,
          "held slot %d: node %d version %u, want %d and %u", k, p.held_node[k], p.held_version[k], rank,
          want);
    CHECK(p.held_read[k] == SG_OK && p.held_step[k] == step,
          "held slot %d read at version %u: %s, step %" PRIu64, k, want, sg_status_str(p.held_read[k]),
          p.held_step[k]);
    CHECK(p.held_stale[k] == SG_ERR_STALE, "held slot %d read at version %u: %s, not SG_ERR_STALE", k,
          want + 2, sg_status_str(p.held_stale[k]));
  }
  printf(
      "zero: rank %d: replica slots %s and %s on buddy rank %d at versions %u and %u (steps %d and %d + 2); "
      "a wrong version reads SG_ERR_STALE\n",
      rank, p.push_gva[0], p.push_gva[1], (rank + 1) % size, p.push_version[0], p.push_version[1],
      (STEPS - 1) % 2 == 0 ? STEPS - 1 : STEPS - 2, (STEPS - 1) % 2 == 1 ? STEPS - 1 : STEPS - 2);
}

/* zero DIR OPT Z [REF]: see the top of the file. Writes DIR/params.<rank>
 * and DIR/stats.<rank> ("state_bytes state_total"); rank 0 checks. */
static int run_zero(int argc, char **argv) {
  CHECK(argc >= 5, "usage: zero_worker zero DIR sgd|adamw 0|1 [REF]");
  const char *dir = argv[2], *opt = argv[3], *ref = argc > 5 ? argv[5] : NULL;
  int z = atoi(argv[4]);
  int optimizer = strcmp(opt, "adamw") == 0 ? 2 : 1;
  CHECK(optimizer == 2 || strcmp(opt, "sgd") == 0, "optimizer '%s' is not sgd or adamw", opt);
  mlp_feed_ctx fc = {B, Z_IN, CL, optimizer == 2 ? lr_adamw : lr_sgd, feed_x, feed_y};
  mlp_cfg c = {B, Z_IN, Z_HID, Z_LAYERS, CL, 1, optimizer};
  sg_graph *g;
  CHECK_OK(mlp_build(&c, &g));
  sg_dist_params dp = SG_DIST_PARAMS_INIT;
  dp.threads = 1;
  dp.bucket_bytes = 16384; /* several buckets */
  dp.feed = mlp_feed;
  dp.feed_ctx = &fc;
  dp.zero = z;
  sg_dist *d;
  CHECK_OK(sg_dist_create(g, &dp, &d));
  int rank = sg_dist_rank(d), size = sg_dist_size(d);
  sg_dist_stats st = SG_DIST_STATS_INIT;
  double step_ms = 0, wait_ms = 0;
  for (int s = 0; s < STEPS; s++) {
    CHECK_OK(sg_dist_step(d));
    CHECK_OK(sg_dist_get_stats(d, &st));
    CHECK(st.steps == (uint64_t)s + 1, "after step %d: %" PRIu64 " steps", s + 1, st.steps);
    CHECK(isfinite(st.loss_mean), "step %d: loss_mean %g", s + 1, st.loss_mean);
    if (s > 0) {
      step_ms += st.step_ms;
      wait_ms += st.wait_ms;
    }
  }
  param_set got = {0};
  CHECK_OK(params_read(g, sg_dist_session(d), &got));
  char path[4096];
  snprintf(path, sizeof path, "%s/params.%d", dir, rank);
  CHECK_OK(params_save(path, &got));
  snprintf(path, sizeof path, "%s/stats.%d", dir, rank);
  FILE *f = fopen(path, "w");
  CHECK(f != NULL, "cannot write %s", path);
  sg_compile_report rep = SG_COMPILE_REPORT_INIT;
  CHECK_OK(sg_session_compile_report(sg_dist_session(d), &rep));
  fprintf(f, "%zu %zu %zu\n", st.optimizer_state_bytes, st.optimizer_state_total, rep.persistent_bytes);
  fclose(f);
  printf("zero: rank %d of %d, %s, zero %d: optimizer state %zu of %zu bytes (%.3f), loss %.6f, step_ms %.3f "
         "wait_ms %.3f (mean of steps 2..%d)\n",
         rank, size, opt, z, st.optimizer_state_bytes, st.optimizer_state_total,
         (double)st.optimizer_state_bytes / (double)st.optimizer_state_total, st.loss_mean,
         step_ms / (STEPS - 1), wait_ms / (STEPS - 1), STEPS);
  if (z == 1) {
    CHECK(st.optimizer_state_bytes * (size_t)size <= st.optimizer_state_total * 13 / 10,
          "rank %d keeps %zu of %zu bytes of optimizer state: not about 1/%d", rank, st.optimizer_state_bytes,
          st.optimizer_state_total, size);
    /* Another rank's state has no memory here: reading it is refused, naming why. */
    int refused = 0;
    float one[1];
    for (int32_t t = 0; t < sg_graph_num_tensors(g); t++) {
      sg_tensor_info info;
      CHECK_OK(sg_graph_tensor_info(g, (sg_tensor){t}, &info));
      if (info.role != SG_ROLE_OPTIMIZER_STATE || info.nbytes != sizeof one) continue;
      sg_status rs = sg_dist_read(d, info.name, one, sizeof one);
      CHECK(rs == SG_OK || (rs == SG_ERR_STATE && strstr(sg_last_error(), "has no memory") != NULL),
            "reading '%s': %s", info.name, sg_last_error());
      refused += rs != SG_OK;
    }
    CHECK(optimizer != 2 || size == 1 || refused > 0,
          "no AdamW step counter of another rank's range was refused");
    check_replicas(d, rank, size);
  } else {
    CHECK(st.optimizer_state_bytes == st.optimizer_state_total, "without ZeRO: %zu of %zu bytes",
          st.optimizer_state_bytes, st.optimizer_state_total);
  }
  param_set other = {0};
  CHECK_OK(params_read(g, sg_dist_session(d), &other)); /* the same layout, overwritten below */
  CHECK_OK(sg_dist_destroy(d));                         /* collective: every rank wrote its files before */
  sg_graph_destroy(g);
  if (rank != 0) {
    params_free(&got);
    params_free(&other);
    return 0;
  }
  /* Every rank's parameters bitwise equal to rank 0's. */
  for (int r = 1; r < size; r++) {
    snprintf(path, sizeof path, "%s/params.%d", dir, r);
    CHECK_OK(params_load(path, &other));
    CHECK(params_fnv(&other) == params_fnv(&got), "rank %d's parameters differ from rank 0's", r);
  }
  param_set want = {0};
  reference(Z_IN, Z_HID, Z_LAYERS, optimizer, size, fc.lr, &want);
  param_diff pd;
  double rel = params_max_rel_diff(&got, &want, &pd);
  printf(
      "zero: DP=%d zero %d %s vs one process x batch %d, %d steps: max relative difference %.3g (worst %s)\n",
      size, z, opt, B * size, STEPS, rel, pd.worst);
  CHECK(rel >= 0 && rel <= 1e-4, "parameters differ from the single process by %.3g relative", rel);
  if (ref != NULL) {
    snprintf(path, sizeof path, "%s/params.0", ref);
    CHECK_OK(params_load(path, &other));
    double rel_dp = params_max_rel_diff(&got, &other, &pd);
    printf(
        "zero: DP=%d zero %d %s vs plain DP (zero 0): max relative difference %.3g (worst %s), L2 per tensor "
        "%.3g, all parameters %.3g\n",
        size, z, opt, rel_dp, pd.worst, pd.max_rel_l2, pd.global_rel_l2);
    /* AdamW's first steps move each weight by about lr * sign(g): an element whose averaged gradient is
     * rounding noise around 0 moves by up to lr either way, so any other summation order (the
     * reduce-scatter's ring against the small allreduce's) shows in a few elements (plain DP is 1.5e-5 off
     * one process the same way). There the tensors are compared as a whole (L2) at 1e-6, elements at 1e-4. */
    if (optimizer == 2) {
      CHECK(rel_dp >= 0 && rel_dp <= 1e-4 && pd.max_rel_l2 <= 1e-6,
            "parameters differ from plain DP by %.3g relative (L2 per tensor %.3g)", rel_dp, pd.max_rel_l2);
    } else {
      CHECK(rel_dp >= 0 && rel_dp <= 1e-6, "parameters differ from plain DP by %.3g relative", rel_dp);
    }
    /* The memory saving is real: the session's persistent region lost the other ranks' state. */
    size_t keep, total, pers, ref_keep, ref_total, ref_pers;
    snprintf(path, sizeof path, "%s/stats.0", dir);
    FILE *a = fopen(path, "r");
    snprintf(path, sizeof path, "%s/stats.0", ref);
    FILE *b = fopen(path, "r");
    CHECK(a != NULL && b != NULL, "no stats.0");
    CHECK(fscanf(a, "%zu %zu %zu", &keep, &total, &pers) == 3 &&
              fscanf(b, "%zu %zu %zu", &ref_keep, &ref_total, &ref_pers) == 3,
          "malformed stats.0");
    fclose(a);
    fclose(b);
    printf("zero: rank 0: persistent memory %zu bytes with ZeRO-1, %zu without; optimizer state %zu of %zu\n",
           pers, ref_pers, keep, total);
    CHECK(ref_pers >= pers && ref_pers - pers >= total - keep,
          "the session's persistent region shrank by %zu bytes, less than the %zu bytes of others' state",
          ref_pers - pers, total - keep);
  }
  params_free(&want);
  params_free(&other);
  params_free(&got);
  return 0;
}

/* bench HID Z FEED OPT [BATCH]: a wider MLP (8 hidden layers of HID), batch BATCH (32) per rank, 12 steps;
 * the means of steps 3..12 of what a step costs (docs/dist.md "ZeRO-1"). With FEED=1 and Z=1 the buddy
 * replicas run; FEED=0 sets the inputs without a feed (no snapshots, no replicas). */
static int run_bench(int argc, char **argv) {
  CHECK(argc >= 6, "usage: zero_worker bench HID 0|1 0|1 sgd|adamw [BATCH]");
  int hid = atoi(argv[2]), z = atoi(argv[3]), with_feed = atoi(argv[4]);
  int optimizer = strcmp(argv[5], "adamw") == 0 ? 2 : 1;
  CHECK(hid >= 8 && hid <= 4096, "HID %d not in 8..4096", hid);
  enum { BSTEPS = 12, BWARM = 2 };
  const int BB = argc > 6 ? atoi(argv[6]) : 32;
  CHECK(BB >= 1 && BB <= 1024, "batch %d not in 1..1024", BB);
  mlp_cfg c = {BB, hid, hid, Z_LAYERS, CL, 1, optimizer};
  sg_graph *g;
  CHECK_OK(mlp_build(&c, &g));
  float *x = malloc((size_t)BB * hid * sizeof(float));
  int64_t *y = malloc((size_t)BB * sizeof(int64_t));
  CHECK(x != NULL && y != NULL, "out of memory");
  mlp_feed_ctx fc = {BB, hid, CL, optimizer == 2 ? lr_adamw : lr_sgd, x, y};
  sg_dist_params dp = SG_DIST_PARAMS_INIT;
  dp.threads = 1;
  dp.bucket_bytes = (size_t)hid * hid * 4 * 2;
  dp.zero = z;
  if (with_feed) dp.feed = mlp_feed, dp.feed_ctx = &fc;
  sg_dist *d;
  CHECK_OK(sg_dist_create(g, &dp, &d));
  int rank = sg_dist_rank(d), size = sg_dist_size(d);
  double sum[6] = {0};
  sg_dist_stats st = SG_DIST_STATS_INIT;
  for (int s = 0; s < BSTEPS; s++) {
    if (!with_feed) CHECK_OK(mlp_feed(&fc, d, (uint64_t)s, rank, size));
    CHECK_OK(sg_dist_step(d));
    CHECK_OK(sg_dist_get_stats(d, &st));
    if (s < BWARM) continue;
    double v[6] = {st.step_ms,           st.wait_ms,      st.comm_ms,
                   st.reduce_scatter_ms, st.allgather_ms, st.replication_ms};
    for (int k = 0; k < 6; k++) sum[k] += v[k] / (BSTEPS - BWARM);
  }
  printf("bench: rank %d of %d hid %d %s zero %d feed %d: step_ms %.2f wait_ms %.2f comm_ms %.2f "
         "reduce_scatter_ms %.2f "
         "allgather_ms %.2f replication_ms %.2f; optimizer state %zu of %zu bytes, replica %zu bytes\n",
         rank, size, hid, argv[5], z, with_feed, sum[0], sum[1], sum[2], sum[3], sum[4], sum[5],
         st.optimizer_state_bytes, st.optimizer_state_total, st.replica_bytes);
  CHECK_OK(sg_dist_destroy(d));
  sg_graph_destroy(g);
  free(x);
  free(y);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: zero_worker micro DIR M | zero DIR OPT Z [REF]\n");
    return 2;
  }
  if (strcmp(argv[1], "micro") == 0) return run_micro(argc > 3 ? atoi(argv[3]) : 4);
  if (strcmp(argv[1], "zero") == 0) return run_zero(argc, argv);
  if (strcmp(argv[1], "bench") == 0) return run_bench(argc, argv);
  fprintf(stderr, "zero_worker: unknown mode '%s'\n", argv[1]);
  return 2;
}
