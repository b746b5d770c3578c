/* Weights tied across pipeline stages (src/parallel/pp.h's st->tied,
 * docs/pipeline_parallel.md "Tied weights"), run as every rank by
 * `sgrt launch -n K*D -- pp_tied_worker D M [no-tied-sum]`:
 *
 * A small language-model-shaped net whose token embedding is also its output
 * layer, as GPT-2's: tokens [B] -> embedding E [V, H] -> two relu linears
 * H -> H -> logits = h E^T [B, V] -> cross entropy. Cut evenly by op count
 * into K stages, E is read on stage 0 (the lookup) and on stage K-1 (the
 * logits). D copies of the pipeline (rank = replica*K + stage) train on
 * their rows of the global batch B in M micro-batches, 5 steps of SGD with
 * momentum; every parameter of every stage must match one process running
 * the whole batch in one graph within 1e-5 relative, and the losses too,
 * and the two copies of E must be bitwise equal.
 *
 * `no-tied-sum` is the mutant: the stages forget their tied list before the
 * runner is made (st->n_tied = 0), so each copy of E trains on its own uses'
 * part of the gradient only. It passes only if the comparison then fails, so
 * the check is known to be able to fail.
 *
 * `recut` runs the net through sg_dist_create_model and re-cuts its stages from the profile (run_recut).
 *
 * The reference is a plain session of the whole graph, in which autodiff adds
 * both uses' contributions to E's gradient itself: it shares no code with the
 * split, the runner or the exchange. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../worker_check.h"
#include "comm/comm.h"
#include "compare.h"
#include "core/core.h"
#include "parallel/model.h"
#include "parallel/pp.h"
#include "sgrt/sgrt.h"

#define BATCH 24
#define VOCAB 20
#define HIDDEN 32
#define STEPS 5
#define TOL 1e-5
#define TIED "fc1.weight"

/* Forward graph at `batch` rows: inputs "x" (token ids), "y" (labels), "lr"; output "loss". */
static sg_graph *build(int batch) {
  sg_graph *g;
  OK(sg_graph_create(&g));
  int64_t d[] = {batch};
  sg_tensor x = sg_input(g, "x", SG_I64, 1, d), y = sg_input(g, "y", SG_I64, 1, d);
  sg_input(g, "lr", SG_F32, 0, NULL);
  sg_tensor E, W2, B2, W3, B3, none;
  mlp_layer_params(g, 1, HIDDEN, VOCAB, false, false, &E, &none); /* [VOCAB, HIDDEN] */
  mlp_layer_params(g, 2, HIDDEN, HIDDEN, false, true, &W2, &B2);
  mlp_layer_params(g, 3, HIDDEN, HIDDEN, false, true, &W3, &B3);
  sg_tensor h = sg_embedding(g, E, x);
  h = sg_relu(g, sg_linear(g, h, W2, B2));
  h = sg_relu(g, sg_linear(g, h, W3, B3));
  finish_forward(g, sg_linear(g, h, E, SG_NO_TENSOR), y); /* the tied output layer */
  return g;
}

/* The global batch of a step: token ids and labels that depend on them (learnable). */
static void data(int step, int64_t *x, int64_t *y) {
  for (int i = 0; i < BATCH; i++) {
    x[i] = (int64_t)(sg_worker_mix64((uint64_t)i * 131u + (uint64_t)step * 7u + 3u) % VOCAB);
    y[i] = (x[i] * 3 + (int64_t)(sg_worker_mix64((uint64_t)i + 97u * (uint64_t)step) % 2)) % VOCAB;
  }
}

static sg_session *reference(sg_graph **gout, float *losses) {
  sg_graph *fwd = build(BATCH), *g;
  sg_session *s = open_training(fwd, &g);
  sg_graph_destroy(fwd);
  int64_t x[BATCH], y[BATCH], d[] = {BATCH};
  float lr = 0.1f;
  for (int step = 0; step < STEPS; step++) {
    data(step, x, y);
    OK(sg_session_set_input(s, "x", SG_I64, 1, d, x));
    OK(sg_session_set_input(s, "y", SG_I64, 1, d, y));
    OK(sg_session_set_input(s, "lr", SG_F32, 0, NULL, &lr));
    OK(sg_session_step(s));
    OK(sg_session_read(s, "loss", &losses[step], sizeof(float)));
  }
  *gout = g;
  return s;
}

static bool has_name(const sg_graph *g, const int32_t *ids, int n, const char *name);

/* Checked in one process: a state tensor (running statistics) read on two stages is refused, naming it;
 * the shares of a pipeline of tensor groups (2 ways) hold the tied weight whole on both stages. */
static void one_process_checks(void) {
  sg_graph *g;
  OK(sg_graph_create(&g));
  int64_t d[] = {4, 8}, sd[] = {8};
  sg_tensor x = sg_input(g, "x", SG_F32, 2, d), y = sg_input(g, "y", SG_I64, 1, (int64_t[]){4});
  float zero[8] = {0};
  sg_tensor stat = sg_graph_add_tensor(g, "bn.running_mean", SG_F32, SG_ROLE_STATE, 1, sd, zero);
  sg_tensor W, none;
  mlp_layer_params(g, 1, 8, 8, false, false, &W, &none);
  sg_tensor h = sg_relu(g, sg_add(g, sg_linear(g, x, W, SG_NO_TENSOR), stat));
  sg_tensor logits = sg_add(g, h, stat);
  sg_tensor loss = finish_forward(g, logits, y);
  int n = sg_graph_num_ops(g), *cut = calloc((size_t)n, sizeof *cut);
  CHECK(cut != NULL, "out of memory");
  for (int k = 0; k < n; k++) cut[k] = k * 2 / n;
  sg__pp_stage *st = NULL;
  CHECK_ERR(sg__pp_split(g, loss, cut, n, 2, 0, 1, &st), SG_ERR_UNSUPPORTED, "bn.running_mean");
  CHECK(st == NULL, "a refused split returned a stage");
  free(cut);
  sg_graph_destroy(g);

  sg_graph *fwd = build(BATCH);
  n = sg_graph_num_ops(fwd);
  cut = calloc((size_t)n, sizeof *cut);
  CHECK(cut != NULL, "out of memory");
  for (int k = 0; k < n; k++) cut[k] = k * 2 / n;
  sg_tensor loss_t;
  OK(sg_graph_find_tensor(fwd, "loss", &loss_t));
  sg__tp_sync *syncs = NULL;
  int n_syncs = 0;
  /* The last stage's plan alone would column-split its logits layer, E; the stage graph marks E an output
   * (pp_split.c), so the plan keeps it replicated and every share holds it whole. */
  sg__pp_stage *fst;
  OK(sg__pp_split_forward(fwd, loss_t, cut, n, 2, 1, 1, &fst));
  sg_tp_params tpp = SG_TP_PARAMS_INIT;
  sg_tp_plan *plan;
  OK(sg_tp_plan_create(fst->g, &tpp, &plan));
  int axis = 0, groups = 0;
  OK(sg_tp_plan_tensor_split(plan, (sg_tensor){fst->tied[0]}, &axis, &groups));
  CHECK(fst->n_tied == 1 && axis == -1, "the last stage's plan splits " TIED " along axis %d", axis);
  sg_tp_plan_destroy(plan);
  sg__pp_stage_destroy(fst);
  for (int k = 0; k < 2; k++) {
    OK(sg__pp_split_tp(fwd, loss_t, cut, 2, k, 1, 2, 0, &st, &syncs, &n_syncs));
    sg_tensor_info ti;
    CHECK(st->n_tied == 1 && has_name(st->g, st->tied, 1, TIED), "stage %d's share lost its tied weight", k);
    OK(sg_graph_tensor_info(st->g, (sg_tensor){st->tied[0]}, &ti));
    CHECK(ti.ndim == 2 && ti.dims[0] == VOCAB && ti.dims[1] == HIDDEN,
          "stage %d's share holds a slice of " TIED, k);
    if (k == 0) {
      sg__pp_stage_destroy(st);
      sg__tp_syncs_free(syncs, n_syncs);
    }
  }
  sg__pp_stage_destroy(st);
  sg__tp_syncs_free(syncs, n_syncs);
  free(cut);
  sg_graph_destroy(fwd);
}

static bool has_name(const sg_graph *g, const int32_t *ids, int n, const char *name) {
  for (int i = 0; i < n; i++) {
    sg_tensor_info ti;
    OK(sg_graph_tensor_info(g, (sg_tensor){ids[i]}, &ti));
    if (strcmp(ti.name, name) == 0) return true;
  }
  return false;
}

/* `recut`: the same net through sg_dist_create_model as a pipeline of all ranks with 4 micro-batches, rank 1
 * slowed 4x from step 2 on (a 'slow' fault) and the profile's thresholds low enough for millisecond steps, so
 * the stages are re-cut while the job runs (model_pp_replan.c): E stays on the first stage, and its second
 * copy (with its momentum) goes to the stage that holds the logits layer after the re-cut. Runs until 3 steps
 * after the first switch in lockstep with one process; then every parameter each rank holds must be within
 * 1e-4 of the reference (the recut tests' bar: over ~1000 steps), the losses too, the copies of E bitwise
 * equal, and the stages hold the 5 parameters plus E's second copy. */
#define RECUT_MAX_STEPS 6000
#define RECUT_TOL 1e-4
static int run_recut(void) {
  sg_comm_params cp = SG_COMM_PARAMS_INIT;
  sg_graph *fwd = build(BATCH), *ref_g;
  sg_session *ref = open_training(fwd, &ref_g);
  sg_sgd_params sgd = SG_SGD_PARAMS_INIT;
  sgd.momentum = 0.9;
  sg_dist_optimizer opt = SG_DIST_OPTIMIZER_INIT;
  opt.sgd = &sgd;
  sg_dist_params dp = SG_DIST_PARAMS_INIT;
  const char *ws = getenv("SG_WORLD_SIZE");
  dp.threads = 1;
  dp.pipeline = ws ? atoi(ws) : 1;
  dp.micro_batches = 4;
  dp.inject = "slow:rank=1,step=2,factor=4";
  dp.repartition_p99_ms = 0.001;
  dp.repartition_cpu = 0.01;
  CHECK(dp.pipeline >= 2, "recut runs on 2 ranks or more");
  sg_tensor loss_t;
  OK(sg_graph_find_tensor(fwd, "loss", &loss_t));
  sg_dist *d;
  OK(sg_dist_create_model(fwd, loss_t, &opt, &dp, &d));
  int rank = sg_dist_rank(d);
  sg_dist_stats st = SG_DIST_STATS_INIT;
  int64_t x[BATCH], y[BATCH], dims[] = {BATCH};
  float lr = 0.1f, ref_loss = 0;
  double worst_loss = 0;
  int step = 0, after = -1;
  for (; step < RECUT_MAX_STEPS && after < 3; step++) {
    data(step, x, y);
    OK(sg_session_set_input(ref, "x", SG_I64, 1, dims, x));
    OK(sg_session_set_input(ref, "y", SG_I64, 1, dims, y));
    OK(sg_session_set_input(ref, "lr", SG_F32, 0, NULL, &lr));
    OK(sg_session_step(ref));
    OK(sg_session_read(ref, "loss", &ref_loss, sizeof ref_loss));
    OK(sg_dist_set_input(d, "x", SG_I64, 1, dims, x));
    OK(sg_dist_set_input(d, "y", SG_I64, 1, dims, y));
    OK(sg_dist_set_input(d, "lr", SG_F32, 0, NULL, &lr));
    OK(sg_dist_step(d));
    OK(sg_dist_get_stats(d, &st));
    worst_loss = fmax(worst_loss, fabs((double)st.loss_mean - ref_loss) / fabs((double)ref_loss));
    if (st.repartitions > 0) after++;
  }
  CHECK(st.repartitions >= 1, "no repartition in %d steps (rank 1 slowed 4x from step 2)", RECUT_MAX_STEPS);
  double worst = 0;
  int64_t held = 0;
  uint64_t tied_hash = 0;
  for (int32_t t = 0; t < sg_graph_num_tensors(fwd); t++) {
    sg_tensor_info a;
    OK(sg_graph_tensor_info(fwd, (sg_tensor){t}, &a));
    if (a.role != SG_ROLE_PARAMETER) continue;
    float *want = malloc(a.nbytes), *mine = malloc(a.nbytes);
    CHECK(want && mine, "out of memory");
    OK(sg_session_read(ref, a.name, want, a.nbytes));
    sg_status rs = sg_dist_read(d, a.name, mine, a.nbytes);
    CHECK(rs == SG_OK || rs == SG_ERR_NOT_FOUND, "reading '%s': %s", a.name, sg_status_str(rs));
    if (rs == SG_OK) {
      double e = rel_diff(mine, want, a.numel);
      printf("rank %d: %-12s max rel diff %.3g\n", rank, a.name, e);
      worst = fmax(worst, e);
      held++;
      if (strcmp(a.name, TIED) == 0) tied_hash = sg__fnv1a64(SG__FNV1A64_SEED, mine, a.nbytes);
    }
    free(want);
    free(mine);
  }
  OK(sg_dist_destroy(d));
  cp.epoch = 1; /* a plain communicator over the same ranks: fresh store keys */
  sg_comm *c;
  OK(sg_comm_create(&cp, &c));
  int W = sg_comm_size(c);
  OK(sg_comm_allreduce(c, &held, &held, 1, SG_I64, SG_REDUCE_SUM));
  int64_t hashes[64], mine_h = (int64_t)tied_hash;
  CHECK(W <= 64, "%d ranks", W);
  OK(sg_comm_allgather(c, &mine_h, hashes, 1, SG_I64));
  float all[2] = {(float)worst, (float)worst_loss};
  OK(sg_comm_allreduce(c, all, all, 2, SG_F32, SG_REDUCE_MAX));
  printf("rank %d: pipeline of %d re-cut %d time(s) by step %d (rank 1 slowed 4x), %llu bytes moved in all; "
         "%s; worst rel diff %.3g over all ranks, loss %.3g\n",
         rank, W, st.repartitions, step, (unsigned long long)st.migrated_bytes_total,
         tied_hash != 0 ? "holds " TIED : "does not hold " TIED, all[0], all[1]);
  CHECK(held == 6, "after the re-cut the stages hold %lld parameters; 5 in the model, " TIED " on 2 stages",
        (long long)held);
  /* E's holders: the first stage (the lookup) and the one with the logits layer, which the re-cut may move
   * off the last stage (ops 1/2/4 -> 5/1/1: the logits alone on stage 1, which then gets E from stage 0). */
  int holders = 0;
  for (int i = 0; i < W; i++) {
    if (hashes[i] == 0) continue;
    holders++;
    CHECK(hashes[i] == hashes[0], "rank %d's copy of " TIED " differs from rank 0's", i);
  }
  CHECK(hashes[0] != 0 && holders == 2, "%d ranks hold " TIED ", rank 0 %s", holders,
        hashes[0] ? "among them" : "not");
  CHECK(all[0] <= RECUT_TOL && all[1] <= RECUT_TOL, "parameters %.3g, loss %.3g off the single-process run",
        all[0], all[1]);
  OK(sg_comm_destroy(c));
  sg_session_destroy(ref);
  sg_graph_destroy(ref_g);
  sg_graph_destroy(fwd);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "recut") == 0) return run_recut();
  CHECK(argc >= 3, "usage: pp_tied_worker D M [no-tied-sum] | recut");
  int D = atoi(argv[1]), M = atoi(argv[2]);
  bool mutant = argc > 3 && strcmp(argv[3], "no-tied-sum") == 0;
  CHECK(argc <= 3 || mutant, "unknown mode '%s'", argv[3]);
  sg_comm_params cp = SG_COMM_PARAMS_INIT;
  sg_comm *world;
  OK(sg_comm_create(&cp, &world));
  int W = sg_comm_size(world), rank = sg_comm_rank(world);
  CHECK(D >= 1 && W % D == 0 && W / D >= 2 && M >= 1 && BATCH % (D * M) == 0, "%d ranks, D=%d, M=%d", W, D,
        M);
  int K = W / D, replica = rank / K, stage = rank % K, rb = BATCH / D;
  if (rank == 0) one_process_checks();
  sg_comm *pc = group_comm("pp.r", replica, stage, K), *dc = group_comm("dp.s", stage, replica, D);
  sg__xfer px, dx;
  sg__xfer_direct(pc, &px);
  sg__xfer_direct(dc, &dx);

  sg_graph *fwd = build(rb);
  int n_ops = sg_graph_num_ops(fwd);
  int *stage_of = calloc((size_t)n_ops, sizeof *stage_of);
  CHECK(stage_of != NULL, "out of memory");
  for (int k = 0; k < n_ops; k++) stage_of[k] = (int)((int64_t)k * K / n_ops);
  sg_tensor loss_t;
  OK(sg_graph_find_tensor(fwd, "loss", &loss_t));
  sg__pp_stage *st;
  for (long fail = 0;; fail++) { /* the tied lists' allocations fail too, each reported, nothing leaked */
    sg__alloc_fail_after(fail);
    sg_status got = sg__pp_split(fwd, loss_t, stage_of, n_ops, K, stage, M, &st);
    sg__alloc_fail_after(-1);
    if (got == SG_OK) break;
    CHECK(got == SG_ERR_NO_MEMORY && st == NULL, "split allocation %ld failed: %s", fail, sg_status_str(got));
  }
  /* The split: E is tied on the first and the last stage, held by both, by no stage in between. */
  bool holder = stage == 0 || stage == K - 1;
  CHECK(st->n_tied == (holder ? 1 : 0), "stage %d: %d tied weights", stage, st->n_tied);
  if (holder) {
    CHECK(has_name(st->g, st->tied, 1, TIED), "stage %d's tied weight is not " TIED, stage);
    CHECK(st->tied_off[1] - st->tied_off[0] == 2 && st->tied_holders[0] == 0 &&
              st->tied_holders[1] == K - 1 && st->tied_key[0] == 0,
          "stage %d: holders of " TIED " are not {0, %d}", stage, K - 1);
  }
  add_optimizer(st->g);
  sg_session *s = open_session(st->g);
  sg__pp_dp dp = {&dx, replica, D};
  sg__pp_runner *r;
  if (mutant) st->n_tied = 0;    /* the stage forgets its tied weight: no gradient sum */
  for (long fail = 0;; fail++) { /* every allocation failure is reported and frees what was made */
    sg__alloc_fail_after(fail);
    sg_status got = sg__pp_runner_create(st, s, &px, stage - 1, stage + 1, &dp, &r);
    sg__alloc_fail_after(-1);
    if (got == SG_OK) break;
    CHECK(got == SG_ERR_NO_MEMORY && r == NULL, "allocation %ld failed: %s", fail, sg_status_str(got));
  }
  int64_t x[BATCH], y[BATCH];
  float lr = 0.1f, losses[STEPS];
  OK(sg__pp_set_input(r, "lr", &lr, sizeof lr));
  for (int step = 0; step < STEPS; step++) {
    data(step, x, y);
    /* This replica's rows of the global batch. */
    if (stage == 0) OK(sg__pp_set_input(r, "x", x + replica * rb, sizeof(int64_t) * (size_t)rb));
    if (stage == K - 1) OK(sg__pp_set_input(r, "y", y + replica * rb, sizeof(int64_t) * (size_t)rb));
    unsigned long allocs = sg__alloc_count();
    OK(sg__pp_step(r, &losses[step]));
    allocs = sg__alloc_count() - allocs;
    /* The replica allreduce of sg_comm allocates; the runner itself must not. */
    CHECK(step == 0 || D > 1 || allocs == 0, "step %d made %lu allocations", step, allocs);
  }

  sg_graph *ref_g;
  float ref_losses[STEPS];
  sg_session *ref = reference(&ref_g, ref_losses);
  double worst = 0, worst_tied = 0;
  int64_t held = 0;
  uint64_t tied_hash = 0;
  for (int32_t t = 0; t < sg_graph_num_tensors(st->g); t++) {
    sg_tensor_info a;
    OK(sg_graph_tensor_info(st->g, (sg_tensor){t}, &a));
    if (a.role != SG_ROLE_PARAMETER || has_name(st->g, st->recv, st->n_recv, a.name)) continue;
    float *want = malloc(a.nbytes), *mine = malloc(a.nbytes);
    CHECK(want && mine, "out of memory");
    OK(sg_session_read(ref, a.name, want, a.nbytes));
    OK(sg_session_read(s, a.name, mine, a.nbytes));
    double d = rel_diff(mine, want, a.numel);
    printf("rank %d stage %d: %-12s max rel diff %.3g\n", rank, stage, a.name, d);
    worst = fmax(worst, d);
    if (strcmp(a.name, TIED) == 0) {
      worst_tied = d;
      tied_hash = sg__fnv1a64(SG__FNV1A64_SEED, mine, a.nbytes);
    }
    held++;
    free(want);
    free(mine);
  }
  double loss_diff = 0;
  if (stage == K - 1) {
    /* Replica r's loss is the mean over its own rows: the reference's loss is the mean over the replicas'. */
    float mean[STEPS];
    for (int i = 0; i < STEPS; i++) mean[i] = losses[i] / (float)D;
    OK(sg_comm_allreduce(dc, mean, mean, STEPS, SG_F32, SG_REDUCE_SUM));
    for (int i = 0; i < STEPS; i++)
      loss_diff = fmax(loss_diff, fabs(mean[i] - ref_losses[i]) / fabs(ref_losses[i]));
    printf("rank %d: loss max rel diff %.3g (step %d: %.6f, reference %.6f)\n", rank, loss_diff, STEPS - 1,
           mean[STEPS - 1], ref_losses[STEPS - 1]);
  }
  /* Every parameter on one stage, E on two: 5 in the model, 6 held by the stages of one pipeline. */
  OK(sg_comm_allreduce(pc, &held, &held, 1, SG_I64, SG_REDUCE_SUM));
  CHECK(held == 6, "the stages hold %lld parameters; the model has 5, one tied on 2 stages", (long long)held);
  /* The two copies of E, bitwise: the first stage's hash against the last's. */
  int64_t hashes[64];
  CHECK(K <= 64, "%d stages", K);
  int64_t mine_h = (int64_t)tied_hash;
  OK(sg_comm_allgather(pc, &mine_h, hashes, 1, SG_I64));
  bool copies_equal = hashes[0] == hashes[K - 1];
  float all[2] = {(float)fmax(worst, loss_diff), (float)worst_tied};
  OK(sg_comm_allreduce(world, all, all, 2, SG_F32, SG_REDUCE_MAX));
  int64_t eq = copies_equal;
  OK(sg_comm_allreduce(world, &eq, &eq, 1, SG_I64, SG_REDUCE_MIN));
  printf("rank %d stage %d/%d replica %d/%d M=%d%s: max rel diff %.3g over all ranks (" TIED
         ": %.3g), copies of " TIED " %s\n",
         rank, stage, K, replica, D, M, mutant ? " (mutant: no tied sum)" : "", all[0], all[1],
         eq ? "bitwise equal" : "differ");
  sg__pp_runner_destroy(r);
  sg_session_destroy(s);
  sg__pp_stage_destroy(st);
  sg_session_destroy(ref);
  sg_graph_destroy(ref_g);
  sg_graph_destroy(fwd);
  free(stage_of);
  OK(sg_comm_destroy(dc));
  OK(sg_comm_destroy(pc));
  OK(sg_comm_destroy(world));
  if (mutant) {
    CHECK(all[0] > TOL && !eq,
          "without the tied gradient sum the run still matched (%.3g) or the copies agree", all[0]);
    printf("rank %d: mutant detected as it must be\n", rank);
    return 0;
  }
  CHECK(all[0] <= TOL, "a parameter or loss differs from the single-process run by %.3g (1e-5 allowed)",
        all[0]);
  CHECK(eq, "the stages' copies of " TIED " differ");
  return 0;
}
