/* Pipeline-parallel training (src/parallel/pp.h, docs/pipeline_parallel.md), run
 * as every rank by `sgrt launch -n K -- pp_worker MODE`:
 *
 *   mlp [M]    a 4-layer MLP (32-64-64-64-10, relu, biases, cross-entropy
 *              mean) cut into K stages (rank k = stage k, ops spread evenly),
 *              batch 16 in M micro-batches (default 4), 5 steps of SGD with
 *              momentum through the 1F1B schedule; every stage's parameters
 *              must match a single-process run of the whole batch in one
 *              graph within 1e-5 relative, and the losses too;
 *   metis [M]  the same with the stages from the partitioner's pipeline mode;
 *   res [M]    with a residual from layer 1 into layer 3: at 2 ranks stage 0
 *              sends two boundary tensors of one shape; at 4 ranks stage 1
 *              relays layer 1's output from stage 0 to stage 2;
 *   bench M BATCH WIDTH  the same check on a wider MLP (32-W-W-W-10), for
 *              bubble figures where compute, not message latency, dominates;
 *   corrupt    (2 ranks) stage 1 gets malformed boundary messages and must
 *              reject each (wire protocol validation, SPEC M4/S1);
 *   badargs    (one process, no communicator) argument checks of the split,
 *              the runner and the schedule, and a simulation of every
 *              schedule for K <= 8, M <= 12 with sends that wait for their
 *              receiver (no deadlock, every dependency met, in-flight bound);
 *   equiv MODEL D M [blocks|metis [BATCH]]  D replicas of a pipeline of
 *              ranks/D stages (PP x DP), with batch norm (resnet) or dropout
 *              (drop), against one process accumulating the same
 *              micro-batches: pp_equiv.c.
 *
 * The reference is a plain session on the whole-batch graph: an independent
 * computation that shares no code with the split, the runner or the wire
 * protocol. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../worker_check.h"
#include "comm/wire.h"
#include "compare.h"
#include "core/core.h"
#include "parallel/pp.h"
#include "pp_equiv.h"
#include "runtime/hooks.h"
#include "sgrt/sgrt.h"

#define IN 32
#define HIDDEN_TEST 64 /* HIDDEN outside `bench` */
#define CLASSES 10
#define LAYERS 4
#define STEPS 5
#define TOL 1e-5

/* The test's model; `bench` widens it so compute, not latency, dominates. */
static int BATCH = 16, HIDDEN = HIDDEN_TEST;
/* `res`: layer 3 adds layer 1's output back in, so stage 0 of 2 sends two
 * tensors of one shape (which must not swap) and gets two gradients. */
static int RESIDUAL = 0;

/* ---- the model ------------------------------------------------------------- */

/* Forward graph only: inputs "x", "y", "lr"; output "loss". */
static sg_graph *build(void) {
  sg_graph *g;
  OK(sg_graph_create(&g));
  int64_t xd[] = {BATCH, IN}, yd[] = {BATCH};
  sg_tensor h = sg_input(g, "x", SG_F32, 2, xd), h1 = SG_NO_TENSOR;
  sg_tensor y = sg_input(g, "y", SG_I64, 1, yd);
  sg_input(g, "lr", SG_F32, 0, NULL);
  int fan_in = IN;
  for (int l = 1; l <= LAYERS; l++) {
    int out_f = l == LAYERS ? CLASSES : HIDDEN;
    sg_tensor W, B;
    mlp_layer_params(g, l, fan_in, out_f, false, true, &W, &B);
    h = sg_linear(g, h, W, B);
    if (RESIDUAL && l == 3) h = sg_sub(g, h, h1); /* not symmetric: a swap shows */
    if (l < LAYERS) h = sg_relu(g, h);
    if (l == 1) h1 = h;
    fan_in = out_f;
  }
  finish_forward(g, h, y);
  return g;
}

static void data(int step, float *x, int64_t *y) { sg_worker_mlp_batch(BATCH, IN, CLASSES, step, x, y); }

/* The single-process reference: the whole batch, one graph, 5 steps. */
static sg_session *reference(sg_graph **gout, float *losses) {
  sg_graph *fwd = build(), *g;
  sg_session *s = open_training(fwd, &g);
  sg_graph_destroy(fwd);
  train_mlp(s, BATCH, IN, CLASSES, 0.05f, STEPS, losses);
  *gout = g;
  return s;
}

/* ---- the pipeline run ------------------------------------------------------ */

static void spread(int n_ops, int stages, int *stage_of) {
  for (int k = 0; k < n_ops; k++) stage_of[k] = (int)((int64_t)k * stages / n_ops);
}

static int run_pipeline(int metis, int micro) {
  sg_comm_params cp = SG_COMM_PARAMS_INIT;
  sg_comm *comm;
  OK(sg_comm_create(&cp, &comm));
  sg__xfer xfer;
  sg__xfer_direct(comm, &xfer);
  int stages = sg_comm_size(comm), rank = sg_comm_rank(comm);
  sg_graph *fwd = build();
  int n_ops = sg_graph_num_ops(fwd), stage_of[64];
  CHECK(n_ops <= 64, "%d ops", n_ops);
  if (metis) stages_from_metis(fwd, stages, stage_of);
  else spread(n_ops, stages, stage_of);
  if (rank == 0) {
    printf("stages:");
    for (int k = 0; k < n_ops; k++) {
      sg_op_info oi;
      OK(sg_graph_op_info(fwd, k, &oi));
      printf(" %s=%d", oi.name, stage_of[k]);
    }
    printf("\n");
  }
  sg_tensor loss_t;
  OK(sg_graph_find_tensor(fwd, "loss", &loss_t));
  sg__pp_stage *st;
  OK(sg__pp_split(fwd, loss_t, stage_of, n_ops, stages, rank, micro, &st));
  add_optimizer(st->g);
  sg_session *s = open_session(st->g);
  sg__pp_runner *r;
  for (long fail = 0;; fail++) { /* allocation failures, as in badargs */
    sg__alloc_fail_after(fail);
    sg_status got = sg__pp_runner_create(st, s, &xfer, rank - 1, rank + 1, NULL, &r);
    sg__alloc_fail_after(-1);
    if (got == SG_OK) break;
    CHECK(got == SG_ERR_NO_MEMORY && r == NULL, "allocation %ld failed: %s", fail, sg_status_str(got));
  }
  sg__pp_runner_destroy(r);
  sg__pp_runner *bad;
  CHECK(sg__pp_runner_create(st, s, &xfer, rank, rank, NULL, &bad) ==
            (stages > 1 ? SG_ERR_INVALID_ARG : SG_OK),
        "a stage that talks to itself was accepted");
  sg__pp_runner_destroy(bad);
  OK(sg__pp_runner_create(st, s, &xfer, rank - 1, rank + 1, NULL, &r));
  float *x = malloc(sizeof(float) * (size_t)BATCH * IN), lr = 0.05f, losses[STEPS], dummy = 0;
  int64_t *y = malloc(sizeof(int64_t) * (size_t)BATCH);
  CHECK(x && y, "out of memory");
  CHECK(sg__pp_set_input(r, "nope", &dummy, 4) == SG_ERR_NOT_FOUND, "unknown input accepted");
  CHECK(sg__pp_set_input(r, "lr", &dummy, 8) == SG_ERR_SHAPE, "wrong size accepted");
  CHECK(sg__pp_set_input(r, "lr", NULL, 4) == SG_ERR_INVALID_ARG, "NULL accepted");
  double busy = 0, idle = 0, total = 0;
  for (int step = 0; step < STEPS; step++) {
    data(step, x, y);
    for (int i = 0; i < st->n_inputs; i++) {
      sg_tensor_info ti;
      OK(sg_graph_tensor_info(st->g, (sg_tensor){st->inputs[i]}, &ti));
      if (strcmp(ti.name, "x") == 0) OK(sg__pp_set_input(r, "x", x, sizeof(float) * (size_t)BATCH * IN));
      if (strcmp(ti.name, "y") == 0) OK(sg__pp_set_input(r, "y", y, sizeof(int64_t) * (size_t)BATCH));
    }
    OK(sg__pp_set_input(r, "lr", &lr, sizeof lr));
    unsigned long allocs = sg__alloc_count();
    OK(sg__pp_step(r, &losses[step]));
    allocs = sg__alloc_count() - allocs;
    CHECK(step == 0 || allocs == 0, "step %d made %lu allocations", step, allocs);
    sg__pp_stats ps;
    sg__pp_runner_stats(r, &ps);
    CHECK(ps.forwards == (rank + 1 < stages ? 2 * micro : micro), "%d passes", ps.forwards);
    if (step > 0) { /* the first step pays for warming up caches and connections */
      busy += ps.busy_ms;
      idle += ps.idle_ms;
      total += ps.step_ms;
    }
  }
  /* Compare with the single-process run of the whole batch. */
  sg_graph *ref_g;
  float ref_losses[STEPS];
  sg_session *ref = reference(&ref_g, ref_losses);
  double worst = 0;
  int64_t n_params = 0;
  for (int32_t t = 0; t < sg_graph_num_tensors(st->g); t++) {
    sg_tensor_info a;
    OK(sg_graph_tensor_info(st->g, (sg_tensor){t}, &a));
    bool boundary = false;
    for (int j = 0; j < st->n_recv; j++) boundary |= st->recv[j] == t;
    if (a.role != SG_ROLE_PARAMETER || boundary) continue;
    float *want = malloc(a.nbytes), *mine = malloc(a.nbytes);
    CHECK(want && mine, "out of memory");
    OK(sg_session_read(ref, a.name, want, a.nbytes));
    OK(sg_session_read(s, a.name, mine, a.nbytes));
    double d = rel_diff(mine, want, a.numel);
    printf("rank %d: %-12s max rel diff %.3g\n", rank, a.name, d);
    CHECK(d <= TOL, "'%s' differs from the single-process run by %.3g", a.name, d);
    worst = fmax(worst, d);
    n_params++;
    free(want);
    free(mine);
  }
  double loss_diff = 0;
  if (rank == stages - 1) {
    char who[32];
    snprintf(who, sizeof who, "rank %d", rank);
    loss_diff = compare_losses(who, losses, ref_losses, STEPS, TOL);
  }
  /* Every parameter of the model is on exactly one stage. */
  OK(sg_comm_allreduce(comm, &n_params, &n_params, 1, SG_I64, SG_REDUCE_SUM));
  CHECK(n_params == 2 * LAYERS, "the stages hold %lld parameters, the model %d", (long long)n_params,
        2 * LAYERS);
  double theory = (double)(stages - 1) / (micro + stages - 1);
  printf("rank %d stage %d/%d M=%d: %d parameters, max rel diff %.3g, loss rel diff %.3g; steps 2-%d: "
         "busy %.3f ms, idle %.3f ms, step %.3f ms, idle fraction %.3f (1F1B theory (K-1)/(M+K-1) = "
         "%.3f)\n",
         rank, rank, stages, micro, (int)(n_params), worst, loss_diff, STEPS, busy / (STEPS - 1),
         idle / (STEPS - 1), total / (STEPS - 1), total > 0 ? idle / total : 0, theory);
  free(x);
  free(y);
  sg__pp_runner_destroy(r);
  sg_session_destroy(s);
  sg__pp_stage_destroy(st);
  sg_session_destroy(ref);
  sg_graph_destroy(ref_g);
  sg_graph_destroy(fwd);
  OK(sg_comm_destroy(comm));
  return 0;
}

/* ---- malformed boundary messages ---------------------------------------------- */

/* 2 ranks: rank 0 plays stage 0 by hand and sends stage 1 its first
 * boundary message with one field wrong at a time (on the tag the runner
 * documents: bit 30, forward, step 0, tensor 0, micro-batch 0); stage 1's
 * step must fail with the decoder's or the transport's error each time. */
static int run_corrupt(void) {
  sg_comm_params cp = SG_COMM_PARAMS_INIT;
  sg_comm *comm;
  OK(sg_comm_create(&cp, &comm));
  sg__xfer xfer;
  sg__xfer_direct(comm, &xfer);
  CHECK(sg_comm_size(comm) == 2, "corrupt runs on 2 ranks");
  int rank = sg_comm_rank(comm), n_ops, stage_of[64];
  sg_graph *fwd = build();
  n_ops = sg_graph_num_ops(fwd);
  spread(n_ops, 2, stage_of);
  enum { ROWS = 4, COUNT = ROWS * HIDDEN_TEST };
  static float payload[COUNT];
  uint8_t msg[64 + sizeof payload];
  sg__wire_header h = {.count = COUNT, .dtype = SG_F32, .ndims = 2, .partition = 0};
  size_t n;
  OK(sg__wire_encode(&h, payload, msg, sizeof msg, &n));
  const char *want[] = {"magic", "partition 1, expected 0", "offset of dim 0 is 4", "bytes"};
  sg_status codes[] = {SG_ERR_FORMAT, SG_ERR_FORMAT, SG_ERR_SHAPE, SG_ERR_TRUNCATED};
  if (rank == 0) {
    for (int i = 0; i < 4; i++) {
      uint8_t bad[sizeof msg];
      memcpy(bad, msg, n);
      size_t len = n;
      if (i == 0) bad[0] = 0x48;
      if (i == 1) bad[11 + 8 + 3] = 1; /* partition, after 2 offsets (big-endian u32) */
      if (i == 2) bad[11 + 3] = ROWS;  /* dim 0's offset: micro-batch 1's rows */
      if (i == 3) len = n - 1;         /* one byte short */
      OK(sg_comm_send(comm, 1, 1u << 30, bad, len));
    }
  } else {
    sg_tensor loss_t;
    OK(sg_graph_find_tensor(fwd, "loss", &loss_t));
    sg__pp_stage *st;
    OK(sg__pp_split(fwd, loss_t, stage_of, n_ops, 2, 1, 4, &st));
    CHECK(st->n_recv == 1 && sg_graph_num_tensors(st->g) > 0, "stage 1 receives %d tensors", st->n_recv);
    add_optimizer(st->g);
    sg_session *s = open_session(st->g);
    sg__pp_runner *r;
    OK(sg__pp_runner_create(st, s, &xfer, 0, 2, NULL, &r));
    for (int i = 0; i < 4; i++) {
      sg_status got = sg__pp_step(r, NULL);
      CHECK(got == codes[i], "message %d: %s, expected %s", i, sg_status_str(got), sg_status_str(codes[i]));
      CHECK(strstr(sg_last_error(), want[i]), "message %d: '%s' lacks '%s'", i, sg_last_error(), want[i]);
      printf("ok: malformed message %d rejected: %s (%s)\n", i, sg_status_str(got), sg_last_error());
    }
    sg__pp_runner_destroy(r);
    sg_session_destroy(s);
    sg__pp_stage_destroy(st);
  }
  sg_graph_destroy(fwd);
  OK(sg_comm_destroy(comm));
  return 0;
}

/* ---- argument checks and the schedule ---------------------------------------- */

#define EXPECT(call, status, text)                                                                        \
  do {                                                                                                    \
    sg_status got_ = (call);                                                                              \
    CHECK(got_ == (status), "%s returned %s, expected %s", #call, sg_status_str(got_),                    \
          sg_status_str(status));                                                                         \
    CHECK(strstr(sg_last_error(), (text)) != NULL, "%s: message '%s' lacks '%s'", #call, sg_last_error(), \
          (text));                                                                                        \
    printf("ok: %s -> %s\n", #call, sg_last_error());                                                     \
  } while (0)

/* Runs every stage's program with sends that complete only when the peer's
 * matching receive is reached (the strictest transport), checking that it
 * ends, that each micro-batch's data exists before it is used, and that no
 * stage holds more than K-k received micro-batches. */
static void simulate(int K, int M) {
  sg__pp_slot prog[8][6 * 12 + 1];
  int n[8], pc[8] = {0}, fwd_done[8][12] = {{0}}, grad_in[8][12] = {{0}}, bwd_done[8][12] = {{0}};
  int act_in[8][12] = {{0}}, held[8] = {0};
  for (int k = 0; k < K; k++) OK(sg__pp_schedule(K, k, M, prog[k], 6 * 12 + 1, &n[k]));
  for (bool moved = true; moved;) {
    moved = false;
    for (int k = 0; k < K; k++) {
      if (pc[k] == n[k]) continue;
      sg__pp_slot a = prog[k][pc[k]];
      int m = a.micro, peer = -1;
      sg__pp_action want = 0;
      switch (a.action) {
        case SG__PP_FORWARD:
          CHECK(k == 0 || act_in[k][m], "K=%d M=%d: stage %d forwards %d before receiving it", K, M, k, m);
          fwd_done[k][m]++;
          pc[k]++, moved = true;
          continue;
        case SG__PP_BACKWARD:
          CHECK(k == K - 1 || (fwd_done[k][m] == 1 && grad_in[k][m]), "K=%d M=%d: stage %d backward %d early",
                K, M, k, m);
          CHECK(k == 0 || act_in[k][m], "K=%d M=%d: stage %d backward %d without input", K, M, k, m);
          bwd_done[k][m]++;
          if (k > 0) held[k]--;
          pc[k]++, moved = true;
          continue;
        case SG__PP_SEND_FWD: peer = k + 1, want = SG__PP_RECV_FWD; break;
        case SG__PP_RECV_FWD: peer = k - 1, want = SG__PP_SEND_FWD; break;
        case SG__PP_SEND_BWD: peer = k - 1, want = SG__PP_RECV_BWD; break;
        case SG__PP_RECV_BWD: peer = k + 1, want = SG__PP_SEND_BWD; break;
      }
      CHECK(peer >= 0 && peer < K, "K=%d M=%d: stage %d talks to stage %d", K, M, k, peer);
      if (pc[peer] == n[peer]) continue;
      sg__pp_slot b = prog[peer][pc[peer]];
      if (b.action != want || b.micro != m) continue; /* wait for the peer */
      int lo = k < peer ? k : peer;
      if (a.action == SG__PP_SEND_FWD || b.action == SG__PP_SEND_FWD) {
        CHECK(fwd_done[lo][m] == 1, "K=%d M=%d: stage %d sends %d before computing it", K, M, lo, m);
        act_in[lo + 1][m] = 1;
        held[lo + 1]++;
        int depth = K - (lo + 1) < M ? K - (lo + 1) : M;
        CHECK(held[lo + 1] <= depth, "K=%d M=%d: stage %d holds %d micro-batches", K, M, lo + 1,
              held[lo + 1]);
      } else {
        CHECK(bwd_done[lo + 1][m] == 1, "K=%d M=%d: stage %d sends gradient %d early", K, M, lo + 1, m);
        grad_in[lo][m] = 1;
      }
      pc[k]++, pc[peer]++, moved = true;
    }
  }
  for (int k = 0; k < K; k++) {
    CHECK(pc[k] == n[k], "K=%d M=%d: deadlock, stage %d stopped at action %d of %d", K, M, k, pc[k], n[k]);
    for (int m = 0; m < M; m++)
      CHECK(bwd_done[k][m] == 1 && (k == K - 1 || fwd_done[k][m] == 1), "K=%d M=%d: stage %d micro %d", K, M,
            k, m);
  }
}

/* sg__pp_recut against cuts worked out by hand. */
static void recut_cases(void) {
  const double one[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  int cur[8] = {0, 0, 0, 0, 1, 1, 1, 1}, out[8];
  double gain = 0;
  /* Stage 1 takes 4 ms per unit of cost, stage 0 1 ms: x ops on stage 0 cost max(x, 4 (8 - x)), least at
   * x = 7 (7 ms against the measured 16). */
  OK(sg__pp_recut(one, 8, cur, (const double[]){4, 16}, 2, out, &gain));
  for (int i = 0; i < 8; i++) CHECK(out[i] == (i < 7 ? 0 : 1), "2 stages: op %d on stage %d", i, out[i]);
  CHECK(fabs(gain - 16.0 / 7.0) < 1e-9, "2 stages: gain %.9g, want 16/7", gain);
  /* Balanced already: the same cut, gain 1. */
  OK(sg__pp_recut(one, 8, cur, (const double[]){4, 4}, 2, out, &gain));
  for (int i = 0; i < 8; i++) CHECK(out[i] == cur[i], "balanced: op %d moved to stage %d", i, out[i]);
  CHECK(gain == 1, "balanced: gain %g", gain);
  /* 3 stages of speeds 1, 1, 4: the last stage's one op bounds it at 4 ms; the sweep fills stage 0 up
   * to that bound and leaves one op to each later stage. */
  int cur3[6] = {0, 0, 1, 1, 2, 2}, out3[6], want3[6] = {0, 0, 0, 0, 1, 2};
  OK(sg__pp_recut(one, 6, cur3, (const double[]){2, 2, 8}, 3, out3, &gain));
  for (int i = 0; i < 6; i++) CHECK(out3[i] == want3[i], "3 stages: op %d on stage %d", i, out3[i]);
  CHECK(fabs(gain - 2) < 1e-9, "3 stages: gain %.9g, want 2", gain);
  /* Costs that differ: op 0 is heavy (6 units); stage 1 is twice as slow. Cuts after op 0: max(6, 2 x 4)
   * = 8; after op 1: max(7, 2 x 3) = 7; after op 2: max(8, 4) = 8: the second. */
  const double heavy[5] = {6, 1, 1, 1, 1};
  int cur5[5] = {0, 0, 0, 1, 1}, out5[5], want5[5] = {0, 0, 1, 1, 1};
  OK(sg__pp_recut(heavy, 5, cur5, (const double[]){8, 4}, 2, out5, &gain));
  for (int i = 0; i < 5; i++) CHECK(out5[i] == want5[i], "heavy op: op %d on stage %d", i, out5[i]);
  CHECK(fabs(gain - 8.0 / 7.0) < 1e-9, "heavy op: gain %.9g, want 8/7", gain);
  /* A stage whose speed cannot be told (no cost or no time): the cut stays. */
  const double zero_on_1[8] = {1, 1, 1, 1, 0, 0, 0, 0};
  OK(sg__pp_recut(zero_on_1, 8, cur, (const double[]){4, 16}, 2, out, &gain));
  CHECK(gain == 1 && memcmp(out, cur, sizeof cur) == 0, "no cost on stage 1: the cut moved");
  OK(sg__pp_recut(one, 8, cur, (const double[]){4, 0}, 2, out, &gain));
  CHECK(gain == 1 && memcmp(out, cur, sizeof cur) == 0, "no time on stage 1: the cut moved");
  EXPECT(sg__pp_recut(NULL, 8, cur, (const double[]){4, 4}, 2, out, &gain), SG_ERR_INVALID_ARG, "NULL");
  EXPECT(sg__pp_recut(one, 1, cur, (const double[]){4, 4}, 2, out, &gain), SG_ERR_INVALID_ARG,
         "2 stages for 1");
  EXPECT(sg__pp_recut(one, 8, cur, (const double[]){4, -1}, 2, out, &gain), SG_ERR_INVALID_ARG, "busy_ms[1]");
  EXPECT(
      sg__pp_recut((const double[]){1, NAN, 1, 1, 1, 1, 1, 1}, 8, cur, (const double[]){4, 4}, 2, out, &gain),
      SG_ERR_INVALID_ARG, "cost[1]");
  int bad[8] = {0, 0, 0, 0, 1, 1, 1, 2};
  EXPECT(sg__pp_recut(one, 8, bad, (const double[]){4, 4}, 2, out, &gain), SG_ERR_INVALID_ARG,
         "stage_of_op[7] is 2");
  printf("ok: sg__pp_recut matches the hand-worked cuts and refuses bad arguments\n");
}

static int pp_badargs(void) {
  sg_graph *fwd = build();
  int n = sg_graph_num_ops(fwd), st2[64], bad[64];
  sg_tensor loss, logits;
  OK(sg_graph_find_tensor(fwd, "loss", &loss));
  sg_tensor_info li;
  OK(sg_graph_tensor_info(fwd, loss, &li));
  sg_op_info ce;
  OK(sg_graph_op_info(fwd, li.producer, &ce));
  logits = (sg_tensor){ce.inputs[0]};
  spread(n, 2, st2);
  sg__pp_stage *st = (sg__pp_stage *)1;
  EXPECT(sg__pp_split(NULL, loss, st2, n, 2, 0, 4, &st), SG_ERR_INVALID_ARG, "NULL graph");
  CHECK(st == NULL, "out not cleared");
  EXPECT(sg__pp_split(fwd, loss, NULL, n, 2, 0, 4, &st), SG_ERR_INVALID_ARG, "NULL stage_of_op");
  EXPECT(sg__pp_split(fwd, loss, st2, n, 2, 0, 4, NULL), SG_ERR_INVALID_ARG, "out is NULL");
  EXPECT(sg__pp_split(fwd, loss, st2, n, 2, 0, 0, &st), SG_ERR_INVALID_ARG, "0 micro-batches");
  EXPECT(sg__pp_split(fwd, loss, st2, n, 2, 0, -3, &st), SG_ERR_INVALID_ARG, "-3 micro-batches");
  EXPECT(sg__pp_split(fwd, loss, st2, n, 2, 0, 3, &st), SG_ERR_INVALID_ARG, "does not divide into 3");
  EXPECT(sg__pp_split(fwd, loss, st2, n, 2, 0, 32, &st), SG_ERR_INVALID_ARG, "does not divide into 32");
  EXPECT(sg__pp_split(fwd, loss, st2, n, 0, 0, 4, &st), SG_ERR_INVALID_ARG, "stage 0 of 0 stages");
  EXPECT(sg__pp_split(fwd, loss, st2, n, 2, 2, 4, &st), SG_ERR_INVALID_ARG, "stage 2 of 2 stages");
  EXPECT(sg__pp_split(fwd, loss, st2, n - 1, 2, 0, 4, &st), SG_ERR_INVALID_ARG, "stage entries");
  EXPECT(sg__pp_split(fwd, (sg_tensor){9999}, st2, n, 2, 0, 4, &st), SG_ERR_INVALID_ARG, "not a tensor");
  EXPECT(sg__pp_split(fwd, logits, st2, n, 2, 0, 4, &st), SG_ERR_INVALID_ARG, "one float element");
  memcpy(bad, st2, sizeof(int) * (size_t)n);
  bad[3] = 7;
  EXPECT(sg__pp_split(fwd, loss, bad, n, 2, 0, 4, &st), SG_ERR_INVALID_ARG, "has stage 7");
  /* Not acyclic: the first op on stage 1, the rest on stage 0. */
  for (int k = 0; k < n; k++) bad[k] = k == 0 ? 1 : 0;
  EXPECT(sg__pp_split(fwd, loss, bad, n, 2, 0, 4, &st), SG_ERR_INVALID_ARG, "not acyclic");
  /* Not contiguous: stage 0 feeds stage 2 directly; stage 1 is empty. */
  for (int k = 0; k < n; k++) bad[k] = k < 2 ? 0 : 2;
  EXPECT(sg__pp_split(fwd, loss, bad, n, 3, 0, 4, &st), SG_ERR_INVALID_ARG, "stage 1 has no op");
  /* An empty stage at the end. */
  EXPECT(sg__pp_split(fwd, loss, st2, n, 3, 0, 4, &st), SG_ERR_INVALID_ARG, "stage 2 has no op");
  /* A training graph is not a forward graph. */
  sg_graph *tg;
  OK(sg_graph_clone(fwd, &tg));
  EXPECT(sg__pp_split(tg, loss, st2, n, 2, 0, 4, &st), SG_ERR_STATE, "not finalized");
  OK(sg_graph_backward(tg, loss));
  OK(sg_graph_finalize(tg));
  int *stt = calloc((size_t)sg_graph_num_ops(tg), sizeof(int));
  CHECK(stt != NULL, "out of memory");
  spread(sg_graph_num_ops(tg), 2, stt);
  EXPECT(sg__pp_split(tg, loss, stt, sg_graph_num_ops(tg), 2, 0, 4, &st), SG_ERR_STATE, "forward graph");
  free(stt);
  sg_graph_destroy(tg);
  /* Allocation failures: every one is reported and frees what was built
   * (ASan's leak check watches the last part). */
  for (long fail = 0;; fail++) {
    sg__alloc_fail_after(fail);
    sg_status got = sg__pp_split(fwd, loss, st2, n, 2, 0, 4, &st);
    sg__alloc_fail_after(-1);
    if (got == SG_OK) {
      printf("ok: sg__pp_split survives allocation failure at each of its first %ld allocations\n", fail);
      sg__pp_stage_destroy(st);
      break;
    }
    CHECK(got == SG_ERR_NO_MEMORY && st == NULL, "allocation %ld failed: %s", fail, sg_status_str(got));
  }
  /* The runner. */
  OK(sg__pp_split(fwd, loss, st2, n, 2, 1, 4, &st));
  CHECK(st->n_recv == 1 && st->n_send == 0 && st->micro_batch == 4, "stage 1: %d in, %d out, %lld rows",
        st->n_recv, st->n_send, (long long)st->micro_batch);
  sg__pp_runner *r = (sg__pp_runner *)1;
  EXPECT(sg__pp_runner_create(st, NULL, NULL, 0, 2, NULL, &r), SG_ERR_INVALID_ARG, "NULL argument");
  CHECK(r == NULL, "out not cleared");
  EXPECT(sg__pp_step(NULL, NULL), SG_ERR_INVALID_ARG, "NULL");
  EXPECT(sg__pp_set_input(NULL, "x", st2, 4), SG_ERR_INVALID_ARG, "NULL");
  sg__pp_stage_destroy(st);
  sg__pp_stage_destroy(NULL);
  sg__pp_runner_destroy(NULL);
  /* The schedule. */
  sg__pp_slot prog[32];
  int np;
  EXPECT(sg__pp_schedule(2, 0, 0, prog, 32, &np), SG_ERR_INVALID_ARG, "0 micro-batches");
  EXPECT(sg__pp_schedule(2, 2, 4, prog, 32, &np), SG_ERR_INVALID_ARG, "stage 2 of 2");
  EXPECT(sg__pp_schedule(2, 0, 4, prog, 3, &np), SG_ERR_INVALID_ARG, "do not fit");
  EXPECT(sg__pp_schedule(2, 0, 4, NULL, 32, &np), SG_ERR_INVALID_ARG, "NULL out");
  for (int K = 1; K <= 8; K++)
    for (int M = 1; M <= 12; M++) simulate(K, M);
  printf("ok: 1F1B programs for K = 1..8, M = 1..12 run to completion with rendezvous sends\n");
  recut_cases();
  sg_graph_destroy(fwd);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: pp_worker mlp|metis|res [M] | corrupt | bench M BATCH WIDTH | badargs | equiv "
                    "mlp|drop|resnet D M [blocks|metis [BATCH]]\n");
    return 2;
  }
  int micro = argc > 2 ? atoi(argv[2]) : 4;
  if (strcmp(argv[1], "bench") == 0) {
    CHECK(argc == 5, "bench M BATCH WIDTH");
    BATCH = atoi(argv[3]);
    HIDDEN = atoi(argv[4]);
    CHECK(BATCH > 0 && HIDDEN > 0, "bad BATCH or WIDTH");
    return run_pipeline(0, micro);
  }
  if (strcmp(argv[1], "mlp") == 0) return run_pipeline(0, micro);
  if (strcmp(argv[1], "metis") == 0) return run_pipeline(1, micro);
  if (strcmp(argv[1], "res") == 0) {
    RESIDUAL = 1;
    return run_pipeline(0, micro);
  }
  if (strcmp(argv[1], "badargs") == 0) return pp_badargs();
  if (strcmp(argv[1], "equiv") == 0) return pp_equiv_main(argc, argv);
  if (strcmp(argv[1], "corrupt") == 0) return run_corrupt();
  fprintf(stderr, "pp_worker: unknown mode '%s'\n", argv[1]);
  return 2;
}
