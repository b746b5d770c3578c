/* Tensor-parallel training (src/parallel/tp.h, docs/tensor_parallel.md), run as
 * every rank by `sgrt launch -n N -- tp_worker MODE`:
 *
 *   mlp     a 4-layer MLP (32-64-64-64-10, relu, biases) split N ways by its
 *           sg_tp_plan (column, row, column, row) and trained 5 steps with SGD
 *           momentum; every parameter, gathered whole, must match a
 *           single-process run of the original graph within 1e-5 relative,
 *           and the replicated ones must be bitwise equal on every rank;
 *   mlp3    32-64-64-10: at 2 ways the last layer is a column split whose
 *           logits are gathered for the loss; at 4 ways (10 does not divide)
 *           a row split on a sliced input;
 *   matmul  the same as mlp with matmul ops on [in, out] weights (biases only after
 *           the row splits, where the plan keeps them whole);
 *   attn    a GPT-2 block (layer norm, causal self-attention of 4 heads with a
 *           fused QKV projection, residuals, a GELU MLP) and a linear head:
 *           the QKV projection column-split by heads (3 blocks: q, k and v),
 *           the heads computed apart, the attention output row-split; the
 *           MLP column/row; one all-reduce each way per pair;
 *   attn_fused  the same with the fused attention op (sg_attention) cut by heads;
 *   badargs (one process, no communicator) argument checks of the rewrite,
 *           the resolver and the runner, and the slices the rewrite cuts.
 *
 * The reference is the plain session on the original graph: an independent
 * computation that shares no code with the rewrite, the hooks or the
 * collectives. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../worker_check.h"
#include "compare.h"
#include "core/core.h"
#include "parallel/tp.h"
#include "runtime/hooks.h"
#include "sgrt/sgrt.h"

#define BATCH 16
#define IN 32
#define HIDDEN 64
#define CLASSES 10
#define LAYERS 4
#define STEPS 5
#define TOL 1e-5

/* ---- the model ------------------------------------------------------------- */

/* Forward graph only: inputs "x", "y", "lr"; output "loss". With use_matmul
 * the weights are [in, out] for matmul and only the even layers (the row
 * splits) get a bias, added after the product. */
static sg_graph *build(int use_matmul, int layers) {
  sg_graph *g;
  OK(sg_graph_create(&g));
  int64_t xd[] = {BATCH, IN}, yd[] = {BATCH};
  sg_tensor h = sg_input(g, "x", SG_F32, 2, xd);
  sg_tensor y = sg_input(g, "y", SG_I64, 1, yd);
  sg_input(g, "lr", SG_F32, 0, NULL);
  int fan_in = IN;
  for (int l = 1; l <= layers; l++) {
    int out_f = l == layers ? CLASSES : HIDDEN;
    bool bias = !use_matmul || l % 2 == 0;
    sg_tensor W, B;
    mlp_layer_params(g, l, fan_in, out_f, use_matmul, bias, &W, &B);
    if (use_matmul) {
      h = sg_matmul(g, h, W);
      if (bias) h = sg_add(g, h, B);
    } else {
      h = sg_linear(g, h, W, B);
    }
    if (l < layers) h = sg_relu(g, h);
    fan_in = out_f;
  }
  finish_forward(g, h, y);
  return g;
}

/* The attn model: x [BATCH rows = 2 sequences of 8, IN = 32 features]. */
#define ATTN_SEQ 8
#define ATTN_HEADS 4

/* q, k or v as [sequences, heads, seq, d] (k as [..., d, seq] for q @ k^T unless fused). */
static sg_tensor attn_heads(sg_graph *g, sg_tensor qkv, int part, bool fused) {
  int64_t d = IN / ATTN_HEADS, shape[] = {BATCH / ATTN_SEQ, ATTN_SEQ, ATTN_HEADS, d};
  sg_tensor x = sg_reshape(g, sg_slice(g, qkv, 1, part * IN, IN), 4, shape);
  int64_t qv[] = {0, 2, 1, 3}, k[] = {0, 2, 3, 1};
  return sg_transpose(g, x, 4, part == 1 && !fused ? k : qv);
}

static sg_graph *build_attn(bool fused) {
  sg_graph *g;
  OK(sg_graph_create(&g));
  int64_t xd[] = {BATCH, IN}, yd[] = {BATCH}, nd[] = {IN}, md[] = {ATTN_SEQ, ATTN_SEQ};
  sg_tensor x = sg_input(g, "x", SG_F32, 2, xd), y = sg_input(g, "y", SG_I64, 1, yd);
  sg_input(g, "lr", SG_F32, 0, NULL);
  float ones[IN], zeros[IN], mask[ATTN_SEQ * ATTN_SEQ];
  for (int i = 0; i < IN; i++) ones[i] = 1, zeros[i] = 0;
  for (int i = 0; i < ATTN_SEQ * ATTN_SEQ; i++) mask[i] = i % ATTN_SEQ <= i / ATTN_SEQ ? 0.0f : -1e9f;
  sg_tensor a = sg_layer_norm(g, x, sg_parameter(g, "ln.weight", SG_F32, 1, nd, ones),
                              sg_parameter(g, "ln.bias", SG_F32, 1, nd, zeros), -1, 1e-5);
  sg_tensor W[6], B[6];
  const int dims[][2] = {{0, 0}, {IN, 3 * IN}, {IN, IN}, {IN, HIDDEN}, {HIDDEN, IN}, {IN, CLASSES}};
  for (int l = 1; l <= 5; l++) mlp_layer_params(g, l, dims[l][0], dims[l][1], false, true, &W[l], &B[l]);
  sg_tensor qkv = sg_linear(g, a, W[1], B[1]);
  sg_tensor q = attn_heads(g, qkv, 0, fused), k = attn_heads(g, qkv, 1, fused),
            v = attn_heads(g, qkv, 2, fused);
  sg_tensor heads;
  if (fused) {
    heads = sg_attention(g, q, k, v, 0.0, 1);
  } else {
    sg_tensor att = sg_mul_scalar(g, sg_matmul(g, q, k), 1.0 / sqrt((double)(IN / ATTN_HEADS)));
    att = sg_softmax(g, sg_add(g, att, sg_constant(g, "mask", SG_F32, 2, md, mask)), -1);
    heads = sg_matmul(g, att, v);
  }
  int64_t perm[] = {0, 2, 1, 3};
  sg_tensor o = sg_reshape(g, sg_transpose(g, heads, 4, perm), 2, xd);
  sg_tensor h = sg_add(g, x, sg_linear(g, o, W[2], B[2]));
  h = sg_add(g, h, sg_linear(g, sg_gelu(g, sg_linear(g, h, W[3], B[3]), 1), W[4], B[4]));
  finish_forward(g, sg_linear(g, h, W[5], B[5]), y);
  return g;
}

/* The attn model's fused QKV weight [3 * IN, IN] is cut by heads: this
 * rank's rows are its heads' rows of q, of k and of v, in that order. */
static void check_qkv_slice(const sg_tp_plan *plan, const sg_graph *fwd, const sg_graph *g, int ways,
                            int rank) {
  sg_tensor a, b;
  sg_tensor_info ia, ib;
  OK(sg_graph_find_tensor(fwd, "fc1.weight", &a));
  OK(sg_graph_find_tensor(g, "fc1.weight", &b));
  int axis = -1, groups = 0;
  OK(sg_tp_plan_tensor_split(plan, a, &axis, &groups));
  CHECK(axis == 0 && groups == 3, "fc1.weight: axis %d, %d blocks; want 0 and 3 (q, k, v)", axis, groups);
  OK(sg_graph_tensor_info(fwd, a, &ia));
  OK(sg_graph_tensor_info(g, b, &ib));
  int64_t rows = IN / ways;
  CHECK(ib.dims[0] == 3 * rows && ib.dims[1] == IN, "fc1.weight slice shape");
  const float *wa = ia.data, *wb = ib.data;
  for (int64_t r = 0; r < ib.dims[0]; r++) {
    int64_t src = r / rows * IN + rank * rows + r % rows; /* block r / rows, this rank's run in it */
    CHECK(memcmp(wb + r * IN, wa + src * IN, sizeof(float) * IN) == 0, "fc1.weight row %lld", (long long)r);
  }
}

/* Appends backward and SGD with momentum to an editable graph and finalizes. */
static void make_training(sg_graph *g) {
  sg_tensor loss, lr;
  OK(sg_graph_find_tensor(g, "loss", &loss));
  OK(sg_graph_find_tensor(g, "lr", &lr));
  OK(sg_graph_backward(g, loss));
  add_optimizer(g);
}

static void train(sg_session *s, sg__tp_runner *tp, float *losses) {
  train_mlp_tp(s, tp, BATCH, IN, CLASSES, 0.05f, STEPS, losses);
}

/* ---- the TP run against the reference ---------------------------------------- */

/* Compares every parameter of the reference with the TP run's (gathered
 * when split); returns the largest relative difference. */
static double compare(sg_comm *comm, const sg__xfer *xp, const sg_tp_plan *plan, const sg_graph *ref_g,
                      const sg_session *ref, const sg_graph *tp_g, const sg_session *tp, bool strict,
                      int *n_split, int *n_repl) {
  int ways = sg_comm_size(comm), rank = sg_comm_rank(comm);
  double worst = 0;
  for (int32_t t = 0; t < sg_graph_num_tensors(ref_g); t++) {
    sg_tensor_info a, b;
    sg_tensor bt;
    OK(sg_graph_tensor_info(ref_g, (sg_tensor){t}, &a));
    if (a.role != SG_ROLE_PARAMETER) continue;
    OK(sg_graph_find_tensor(tp_g, a.name, &bt));
    OK(sg_graph_tensor_info(tp_g, bt, &b));
    float *want = malloc(a.nbytes), *mine = malloc(b.nbytes), *full = malloc(a.nbytes * (size_t)ways);
    CHECK(want && mine && full, "out of memory");
    OK(sg_session_read(ref, a.name, want, a.nbytes));
    OK(sg_session_read(tp, a.name, mine, b.nbytes));
    /* The plan's graph is the reference's forward part: the same tensor ids. */
    int axis = -1, groups = 1;
    OK(sg_tp_plan_tensor_split(plan, (sg_tensor){t}, &axis, &groups));
    for (int i = 0; i < a.ndim; i++)
      CHECK(b.dims[i] == (i == axis ? a.dims[i] / ways : a.dims[i]), "'%s' is not cut as the plan says",
            a.name);
    if (axis >= 0) {
      OK(sg__tp_gather(xp, a.ndim, a.dims, axis, groups, mine, full));
      ++*n_split;
    } else {
      /* Replicated: TP computes its gradient from whole, already summed
       * tensors, so every rank must hold the same bits without any sync. */
      OK(sg_comm_allgather(comm, mine, full, (size_t)a.numel, SG_F32));
      for (int r = 0; r < ways && strict; r++)
        CHECK(memcmp(full + (size_t)r * (size_t)a.numel, mine, a.nbytes) == 0,
              "replicated '%s' differs between rank %d and rank %d", a.name, rank, r);
      memcpy(full, mine, a.nbytes);
      ++*n_repl;
    }
    double d = rel_diff(full, want, a.numel);
    printf("rank %d: %-12s %s max rel diff %.3g\n", rank, a.name, axis >= 0 ? "split" : "repl ", d);
    CHECK(d <= TOL || !strict, "'%s' differs from the single-process run by %.3g", a.name, d);
    worst = fmax(worst, d);
    free(want);
    free(mine);
    free(full);
  }
  return worst;
}

/* mutate: 0 runs as designed; 1 drops the backward syncs, 2 the forward
 * ones -- the comparison must then fail, which shows it can. */
static int run_tp(int use_matmul, int layers, int mutate, bool fused) {
  sg_comm *comm;
  sg_comm_params cp = SG_COMM_PARAMS_INIT;
  OK(sg_comm_create(&cp, &comm));
  sg__xfer x;
  sg__xfer_direct(comm, &x);
  int ways = sg_comm_size(comm), rank = sg_comm_rank(comm);
  CHECK(ways >= 2, "run with at least 2 ranks");

  bool attn = layers == 0;
  sg_graph *fwd = attn ? build_attn(fused) : build(use_matmul, layers);
  sg_tensor loss;
  OK(sg_graph_find_tensor(fwd, "loss", &loss));
  sg_tp_params tpp = SG_TP_PARAMS_INIT;
  tpp.ways = ways;
  sg_tp_plan *plan;
  OK(sg_tp_plan_create(fwd, &tpp, &plan));

  /* Reference: the original graph in one process, same data, same steps. */
  sg_graph *ref_g;
  OK(sg_graph_clone(fwd, &ref_g));
  make_training(ref_g);
  sg_session *ref = open_session(ref_g);
  float ref_loss[STEPS], tp_loss[STEPS];
  train(ref, NULL, ref_loss);

  sg_graph *tp_g;
  sg__tp_sync *syncs;
  int n_syncs;
  OK(sg__tp_rewrite(fwd, loss, plan, ways, rank, &tp_g, &syncs, &n_syncs));
  if (attn) check_qkv_slice(plan, fwd, tp_g, ways, rank);
  make_training(tp_g);
  OK(sg__tp_resolve_backward(tp_g, syncs, n_syncs));
  int n_fwd = 0, n_bwd = 0;
  for (int i = 0; i < n_syncs; i++) {
    CHECK(syncs[i].resolved, "sync %d unresolved", i);
    if (syncs[i].kind == SG__TP_SYNC_FWD_ALLREDUCE) n_fwd++;
    else if (syncs[i].tensor) n_bwd++;
  }
  /* Two forward all-reduces (two column/row pairs; or a pair and a gathered
   * column split or a row split on a sliced input) and one backward one (the
   * first column split reads the graph input, which needs no gradient). The
   * attn model: one each way for attention and for the MLP, and one each way
   * for the head (its logits gathered, or its input sliced); its first
   * column split reads the layer norm's output, which has a gradient. */
  int want_fwd = attn ? 3 : 2, want_bwd = attn ? 3 : 1;
  CHECK(n_fwd == want_fwd && n_bwd == want_bwd, "expected %d forward and %d backward syncs, got %d and %d",
        want_fwd, want_bwd, n_fwd, n_bwd);
  sg_session *tp = open_session(tp_g);
  sg__tp_runner *runner;
  /* Shallow copies: the strings stay owned by `syncs`. */
  sg__tp_sync run_syncs[8];
  int n_run = 0;
  CHECK(n_syncs <= 8, "%d syncs", n_syncs);
  sg__tp_sync_kind dropped = mutate == 1 ? SG__TP_SYNC_BWD_ALLREDUCE : SG__TP_SYNC_FWD_ALLREDUCE;
  for (int i = 0; i < n_syncs; i++)
    if (!mutate || syncs[i].kind != dropped) run_syncs[n_run++] = syncs[i];
  OK(sg__tp_runner_create(tp, &x, run_syncs, n_run, &runner));
  train(tp, runner, tp_loss);

  if (!mutate) compare_losses(NULL, tp_loss, ref_loss, STEPS, TOL);
  int n_split = 0, n_repl = 0;
  double worst = compare(comm, &x, plan, ref_g, ref, tp_g, tp, !mutate, &n_split, &n_repl);
  if (mutate) {
    printf("rank %d: without the %s syncs the max rel diff is %.3g\n", rank,
           mutate == 1 ? "backward" : "forward", worst);
    CHECK(worst > 1e-3, "dropping syncs went unnoticed");
  }
  int n_ar;
  int64_t elems;
  sg__tp_runner_stats(runner, &n_ar, &elems);
  printf("rank %d: TP=%d %s: %d split + %d replicated parameters after %d steps, max rel diff %.3g "
         "(loss %.6f -> %.6f), %d all-reduces of %lld elements per step\n",
         rank, ways,
         attn          ? (fused ? "attn_fused" : "attn")
         : use_matmul  ? "matmul"
         : layers == 3 ? "mlp3"
                       : "mlp",
         n_split, n_repl, STEPS, worst, tp_loss[0], tp_loss[STEPS - 1], n_ar, (long long)elems);
  /* Weights are always split; so are the biases of column splits, by
   * 2 and 4 ways alike, except mlp3's last layer: at 4 ways 10 classes do
   * not divide, so it is a row split (on a sliced input) with a whole bias. */
  int want_split = attn ? (ways == 2 ? 8 : 7) : use_matmul ? 4 : layers == 4 ? 6 : ways == 2 ? 5 : 4;
  int want_repl = attn ? 12 - want_split : use_matmul ? 2 : 2 * layers - want_split;
  CHECK(n_split == want_split && n_repl == want_repl, "%d split, %d replicated", n_split, n_repl);

  sg__tp_runner_destroy(runner);
  sg_session_destroy(tp);
  sg_session_destroy(ref);
  sg__tp_syncs_free(syncs, n_syncs);
  sg_graph_destroy(tp_g);
  sg_graph_destroy(ref_g);
  sg_tp_plan_destroy(plan);
  sg_graph_destroy(fwd);
  OK(sg_comm_destroy(comm));
  return 0;
}

/* ---- argument checks --------------------------------------------------------- */

static void expect(sg_status got, sg_status want, const char *what) {
  CHECK(got == want, "%s: got %s, want %s", what, sg_status_str(got), sg_status_str(want));
  printf("ok %-44s %s: %s\n", what, sg_status_str(got), got == SG_OK ? "" : sg_last_error());
}

static sg_tp_plan *plan_of(const sg_graph *g, int ways) {
  sg_tp_params p = SG_TP_PARAMS_INIT;
  p.ways = ways;
  sg_tp_plan *plan;
  OK(sg_tp_plan_create(g, &p, &plan));
  return plan;
}

/* The slices rank 1 of 2 gets, against the original initializers. */
static void check_slices(const sg_graph *fwd, const sg_graph *g) {
  for (int l = 1; l <= LAYERS; l++) {
    char wn[32];
    snprintf(wn, sizeof wn, "fc%d.weight", l);
    sg_tensor a, b;
    sg_tensor_info ia, ib;
    OK(sg_graph_find_tensor(fwd, wn, &a));
    OK(sg_graph_find_tensor(g, wn, &b));
    OK(sg_graph_tensor_info(fwd, a, &ia));
    OK(sg_graph_tensor_info(g, b, &ib));
    const float *wa = ia.data, *wb = ib.data;
    int64_t out = ia.dims[0], in = ia.dims[1];
    /* Odd layers are column splits (rows out/2.. of [out, in]), even ones row
     * splits (columns in/2.. ). */
    bool column = l % 2 == 1;
    CHECK(ib.dims[0] == (column ? out / 2 : out) && ib.dims[1] == (column ? in : in / 2), "%s shape", wn);
    for (int64_t r = 0; r < ib.dims[0]; r++)
      for (int64_t c = 0; c < ib.dims[1]; c++) {
        float want = column ? wa[(r + out / 2) * in + c] : wa[r * in + c + in / 2];
        CHECK(wb[r * ib.dims[1] + c] == want, "%s[%lld,%lld]", wn, (long long)r, (long long)c);
      }
  }
  printf("ok rank 1's weight slices are the original's\n");
}

/* Makes allocation n fail for n = 0, 1, ... until the rewrite (and the
 * backward resolution) succeeds: every failure must be a clean
 * SG_ERR_NO_MEMORY with nothing returned; LeakSanitizer checks the rest. */
static void torture(int layers, int ways, int rank) {
  sg_graph *fwd = build(0, layers);
  sg_tensor loss;
  OK(sg_graph_find_tensor(fwd, "loss", &loss));
  sg_tp_plan *plan = plan_of(fwd, ways);
  long n = 0;
  for (;; n++) {
    sg_graph *g = NULL;
    sg__tp_sync *syncs = NULL;
    int n_syncs = -1;
    sg__alloc_fail_after(n);
    sg_status st = sg__tp_rewrite(fwd, loss, plan, ways, rank, &g, &syncs, &n_syncs);
    sg__alloc_fail_after(-1);
    if (st == SG_OK) {
      make_training(g);
      sg__alloc_fail_after(0);
      st = sg__tp_resolve_backward(g, syncs, n_syncs);
      sg__alloc_fail_after(-1);
      CHECK(st == SG_ERR_NO_MEMORY, "resolve without memory: %s", sg_status_str(st));
      /* A failed resolution can be retried. */
      OK(sg__tp_resolve_backward(g, syncs, n_syncs));
      for (int i = 0; i < n_syncs; i++)
        CHECK(syncs[i].resolved && (syncs[i].tensor || syncs[i].kind != SG__TP_SYNC_BWD_ALLREDUCE),
              "sync %d unresolved after a retry", i);
      sg__tp_syncs_free(syncs, n_syncs);
      sg_graph_destroy(g);
      break;
    }
    CHECK(st == SG_ERR_NO_MEMORY, "allocation %ld failing: %s (%s)", n, sg_status_str(st), sg_last_error());
    CHECK(g == NULL && syncs == NULL && n_syncs == 0, "allocation %ld failing: outputs set", n);
  }
  printf("ok %d-layer rewrite, %d ways: each of its %ld allocations failing is SG_ERR_NO_MEMORY\n", layers,
         ways, n);
  sg_tp_plan_destroy(plan);
  sg_graph_destroy(fwd);
}

static int badargs(void) {
  torture(LAYERS, 2, 1);
  torture(3, 2, 0); /* gathers the logits */
  torture(3, 4, 3); /* slices the last layer's input */
  sg_graph *fwd = build(0, LAYERS), *g = NULL;
  sg_tensor loss;
  OK(sg_graph_find_tensor(fwd, "loss", &loss));
  sg_tp_plan *plan = plan_of(fwd, 2);
  sg__tp_sync *syncs = NULL;
  int n = 0;
  expect(sg__tp_rewrite(NULL, loss, plan, 2, 0, &g, &syncs, &n), SG_ERR_INVALID_ARG, "NULL graph");
  expect(sg__tp_rewrite(fwd, loss, NULL, 2, 0, &g, &syncs, &n), SG_ERR_INVALID_ARG, "NULL plan");
  expect(sg__tp_rewrite(fwd, loss, plan, 2, 0, NULL, &syncs, &n), SG_ERR_INVALID_ARG, "NULL out");
  expect(sg__tp_rewrite(fwd, loss, plan, 2, 0, &g, NULL, &n), SG_ERR_INVALID_ARG, "NULL syncs");
  expect(sg__tp_rewrite(fwd, loss, plan, 2, 2, &g, &syncs, &n), SG_ERR_INVALID_ARG, "rank 2 of 2");
  expect(sg__tp_rewrite(fwd, loss, plan, 2, -1, &g, &syncs, &n), SG_ERR_INVALID_ARG, "rank -1");
  expect(sg__tp_rewrite(fwd, loss, plan, 1, 0, &g, &syncs, &n), SG_ERR_INVALID_ARG, "ways 1");
  expect(sg__tp_rewrite(fwd, loss, plan, 4, 0, &g, &syncs, &n), SG_ERR_INVALID_ARG, "ways 4, plan of 2");
  expect(sg__tp_rewrite(fwd, (sg_tensor){99999}, plan, 2, 0, &g, &syncs, &n), SG_ERR_INVALID_ARG, "bad loss");
  CHECK(g == NULL && syncs == NULL && n == 0, "outputs set on failure");

  sg_graph *clone;
  OK(sg_graph_clone(fwd, &clone));
  expect(sg__tp_rewrite(clone, loss, plan, 2, 0, &g, &syncs, &n), SG_ERR_STATE, "graph not finalized");
  make_training(clone);
  expect(sg__tp_rewrite(clone, loss, plan, 2, 0, &g, &syncs, &n), SG_ERR_STATE, "training graph");
  sg_graph_destroy(clone);

  /* A plan of another graph: op 0 of the matmul model is a matmul too, but
   * the annotation's weight is not its input. */
  sg_graph *other = build(1, LAYERS);
  sg_tensor other_loss;
  OK(sg_graph_find_tensor(other, "loss", &other_loss));
  expect(sg__tp_rewrite(other, other_loss, plan, 2, 0, &g, &syncs, &n), SG_ERR_INVALID_ARG,
         "plan of another graph");
  sg_graph_destroy(other);

  /* 3 ways divide neither 64 nor 32 nor 10: the plan keeps every op
   * replicated, and so does the rewrite (no syncs, whole weights). */
  sg_tp_plan *plan3 = plan_of(fwd, 3);
  expect(sg__tp_rewrite(fwd, loss, plan3, 3, 1, &g, &syncs, &n), SG_OK, "3 ways: all replicated");
  CHECK(n == 0, "3 ways: %d syncs", n);
  for (int32_t t = 0; t < sg_graph_num_tensors(fwd); t++) {
    sg_tensor_info a, b;
    sg_tensor bt;
    OK(sg_graph_tensor_info(fwd, (sg_tensor){t}, &a));
    if (a.role != SG_ROLE_PARAMETER) continue;
    OK(sg_graph_find_tensor(g, a.name, &bt));
    OK(sg_graph_tensor_info(g, bt, &b));
    CHECK(a.nbytes == b.nbytes && memcmp(a.data, b.data, a.nbytes) == 0, "3 ways: '%s' changed", a.name);
  }
  sg__tp_syncs_free(syncs, n);
  sg_graph_destroy(g);
  sg_tp_plan_destroy(plan3);

  /* A weight used by two linear layers (tied): one slice cannot serve two
   * splits, so the plan keeps both ops replicated, with the reason, and the
   * rewrite builds the graph. */
  {
    sg_graph *g3;
    OK(sg_graph_create(&g3));
    int64_t xd[] = {BATCH, IN}, yd[] = {BATCH}, w1[] = {HIDDEN, IN}, w2[] = {HIDDEN, HIDDEN},
            w3[] = {CLASSES, HIDDEN};
    sg_tensor h = sg_input(g3, "x", SG_F32, 2, xd), y = sg_input(g3, "y", SG_I64, 1, yd);
    sg_tensor tied = sg_parameter(g3, "w2", SG_F32, 2, w2, NULL);
    h = sg_relu(g3, sg_linear(g3, h, sg_parameter(g3, "w1", SG_F32, 2, w1, NULL), SG_NO_TENSOR));
    h = sg_relu(g3, sg_linear(g3, h, tied, SG_NO_TENSOR));
    h = sg_relu(g3, sg_linear(g3, h, tied, SG_NO_TENSOR));
    h = sg_linear(g3, h, sg_parameter(g3, "w3", SG_F32, 2, w3, NULL), SG_NO_TENSOR);
    sg_tensor l3 = sg_cross_entropy(g3, h, y, SG_REDUCTION_MEAN);
    OK(sg_graph_mark_output(g3, l3));
    OK(sg_graph_finalize(g3));
    sg_tp_plan *p3 = plan_of(g3, 2);
    for (int32_t i = 1; i <= 2; i++) {
      sg_tp_annotation a;
      OK(sg_tp_plan_get(p3, i, &a));
      CHECK(a.split == SG_TP_REPLICATE && strstr(a.reason, "tied") != NULL,
            "tied op %d: split %d, reason '%s'", (int)i, (int)a.split, a.reason);
    }
    expect(sg__tp_rewrite(g3, l3, p3, 2, 0, &g, &syncs, &n), SG_OK, "tied weight: replicated");
    sg__tp_syncs_free(syncs, n);
    sg_graph_destroy(g);
    sg_tp_plan_destroy(p3);
    sg_graph_destroy(g3);
  }

  /* A good rewrite for rank 1: slices, syncs, resolution. */
  expect(sg__tp_rewrite(fwd, loss, plan, 2, 1, &g, &syncs, &n), SG_OK, "rank 1 of 2");
  check_slices(fwd, g);
  CHECK(n == 3, "%d syncs", n);
  sg__tp_runner *r = NULL;
  expect(sg__tp_resolve_backward(NULL, syncs, n), SG_ERR_INVALID_ARG, "resolve NULL graph");
  expect(sg__tp_resolve_backward(g, NULL, 1), SG_ERR_INVALID_ARG, "resolve NULL syncs");
  make_training(g);
  sg_session *s = open_session(g);
  expect(sg__tp_resolve_backward(g, syncs, n), SG_OK, "resolve");
  for (int i = 0; i < n; i++)
    if (syncs[i].kind == SG__TP_SYNC_BWD_ALLREDUCE)
      CHECK(syncs[i].tensor && strstr(syncs[i].tensor, "gemm"), "backward sync names %s",
            syncs[i].tensor ? syncs[i].tensor : "nothing");
  expect(sg__tp_runner_create(NULL, NULL, syncs, n, &r), SG_ERR_INVALID_ARG, "runner NULL session");
  expect(sg__tp_runner_create(s, NULL, syncs, n, &r), SG_ERR_INVALID_ARG, "runner NULL transport");
  sg__tp_runner_destroy(NULL);
  float slice[4] = {0};
  int64_t dims[] = {4, 2};
  expect(sg__tp_gather(NULL, 2, dims, 0, 1, slice, slice), SG_ERR_INVALID_ARG, "gather NULL transport");
  sg_session_destroy(s);
  sg__tp_syncs_free(syncs, n);
  sg_graph_destroy(g);
  sg_tp_plan_destroy(plan);
  sg_graph_destroy(fwd);
  printf("badargs: all passed\n");
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  int mutate = argc > 2 && strcmp(argv[2], "no-backward-sync") == 0  ? 1
               : argc > 2 && strcmp(argv[2], "no-forward-sync") == 0 ? 2
                                                                     : 0;
  if (strcmp(mode, "mlp") == 0) return run_tp(0, LAYERS, mutate, false);
  if (strcmp(mode, "mlp3") == 0) return run_tp(0, 3, mutate, false);
  if (strcmp(mode, "matmul") == 0) return run_tp(1, LAYERS, mutate, false);
  if (strcmp(mode, "attn") == 0) return run_tp(0, 0, mutate, false);
  if (strcmp(mode, "attn_fused") == 0) return run_tp(0, 0, mutate, true);
  if (strcmp(mode, "badargs") == 0) return badargs();
  fprintf(stderr,
          "usage: tp_worker mlp|mlp3|matmul|attn|attn_fused [no-backward-sync|no-forward-sync] | badargs\n");
  return 2;
}
