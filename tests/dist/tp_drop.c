/* Dropout under tensor parallelism with micro-batches and copies, against
 * one process (sg_dist_create_model; docs/tensor_parallel.md "Dropout"), as
 * every rank of `sgrt launch -n K*T*D -- tp_drop_worker K T M D`:
 *
 *   rank = replica * (K * T) + stage * T + share. Copy r trains on rows
 *   [r*B/D, (r+1)*B/D) of the global batch B = 16, cut into M micro-batches;
 *   micro-batch j of copy r is micro-batch g = r*M + j of the step and draws
 *   its masks from stream g + 1.
 *
 * The model is the MLP 32-64-64-64-10 (relu) with dropout 0.3 on its input
 * (a whole tensor in any plan) and, with K = 1, on fc1's output (cut by
 * fc1's column split: each share draws from its own seed, the op's seed +
 * 0x9E3779B97F4A7C15 * (share + 1), as Megatron's tensor-parallel region
 * does) and on fc2's output (whole after the row split's allreduce: one mask
 * for the group).
 *
 * The reference is one process, written independently of the split: the
 * whole MLP at micro-batch size, where fc1's dropout is T dropouts of its T
 * column slices with the shares' seeds, concatenated; forward and backward
 * of the D*M micro-batches in order with streams g + 1 (partial passes,
 * sg__session_run_pass), the gradients summed and divided by D*M, then the
 * update (SGD, momentum 0.9). 5 steps; every parameter part a rank holds
 * within 1e-4 relative of the reference's, and the loss each step.
 * Before the change that gave each micro-batch its own stream, these jobs
 * were refused (and every copy drew the same masks). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../worker_check.h"
#include "compare.h"
#include "runtime/hooks.h"
#include "sgrt/sgrt.h"

enum { IN = 32, HIDDEN = 64, CLASSES = 10, LAYERS = 4, BATCH = 16, STEPS = 5 };
#define TOL 1e-4
#define P_DROP 0.3
#define LR 0.05f
#define SEED_X 11u
#define SEED_H1 12u
#define SEED_H2 13u

/* Share t's seed for a dropout on a cut tensor (tp_rewrite.c's cut_attrs). */
static uint64_t share_seed(uint64_t seed, int share) {
  return seed + 0x9E3779B97F4A7C15ull * (uint64_t)(share + 1);
}

/* The forward graph at `batch` rows (no "lr": the optimizer adds it).
 * `ref_ways` > 0 builds the reference:
 * fc1's dropout as ref_ways slices with the shares' seeds. `input_only`
 * keeps just the input's dropout (a pipeline's stages plan their own
 * splits). */
static sg_graph *build(int batch, int ref_ways, int input_only) {
  sg_graph *g;
  OK(sg_graph_create(&g));
  int64_t xd[] = {batch, IN}, yd[] = {batch};
  sg_tensor h = sg_input(g, "x", SG_F32, 2, xd);
  sg_tensor y = sg_input(g, "y", SG_I64, 1, yd);
  h = sg_dropout(g, h, P_DROP, SEED_X, 1);
  int fan_in = IN;
  for (int l = 1; l <= LAYERS; l++) {
    int out_f = l == LAYERS ? CLASSES : HIDDEN;
    sg_tensor w, b;
    mlp_layer_params(g, l, fan_in, out_f, false, true, &w, &b);
    h = sg_linear(g, h, w, b);
    if (l < LAYERS) h = sg_relu(g, h);
    if (l == 1 && !input_only) {
      if (ref_ways > 0) {
        sg_tensor parts[8];
        int64_t cols = HIDDEN / ref_ways;
        for (int t = 0; t < ref_ways; t++)
          parts[t] = sg_dropout(g, sg_slice(g, h, 1, t * cols, cols), P_DROP, share_seed(SEED_H1, t), 1);
        h = sg_concat(g, ref_ways, parts, 1);
      } else {
        h = sg_dropout(g, h, P_DROP, SEED_H1, 1);
      }
    }
    if (l == 2 && !input_only) h = sg_dropout(g, h, P_DROP, SEED_H2, 1);
    fan_in = out_f;
  }
  finish_forward(g, h, y);
  return g;
}

/* ---- the single-process reference ------------------------------------------ */

typedef struct grad_slot {
  float *addr, *sum;
  size_t n;
} grad_slot;

/* Trains the reference for STEPS steps of D*M micro-batches; its session
 * (graph in *gout) holds the result; losses[step] is the mean micro-batch
 * loss. */
static sg_session *reference(int T, int M, int D, int input_only, sg_graph **gout, float *losses) {
  int n_mb = D * M, mb = BATCH / n_mb;
  sg_graph *fwd = build(mb, input_only ? 0 : T, input_only), *g;
  sg_session *s = open_training(fwd, &g);
  sg_graph_destroy(fwd);
  uint32_t n_order = 0, first_upd = 0;
  const int32_t *order = sg__session_order(s, &n_order);
  for (; first_upd < n_order; first_upd++) {
    sg_op_info oi;
    OK(sg_graph_op_info(g, order[first_upd], &oi));
    if (oi.kind == SG_OP_SGD_UPDATE) break;
  }
  CHECK(first_upd < n_order, "the reference has no update");
  grad_slot sl[2 * LAYERS];
  int n_sl = 0;
  for (int32_t t = 0; t < sg_graph_num_tensors(g); t++) {
    sg_tensor_info ti;
    OK(sg_graph_tensor_info(g, (sg_tensor){t}, &ti));
    if (ti.role != SG_ROLE_PARAMETER) continue;
    CHECK(n_sl < 2 * LAYERS, "more parameters than the MLP has");
    sg_tensor gr;
    OK(sg_graph_grad(g, (sg_tensor){t}, &gr));
    size_t bytes = 0;
    grad_slot *x = &sl[n_sl++];
    x->addr = sg__session_tensor_addr(s, gr.id, &bytes);
    x->n = (size_t)ti.numel;
    CHECK(x->addr != NULL && bytes >= x->n * 4, "no gradient slot for '%s'", ti.name);
    x->sum = malloc(x->n * 4);
    CHECK(x->sum != NULL, "out of memory");
  }
  float *x = malloc(sizeof(float) * BATCH * IN), lr = LR;
  int64_t *y = malloc(sizeof(int64_t) * BATCH);
  CHECK(x && y, "out of memory");
  int64_t xd[] = {mb, IN}, yd[] = {mb};
  for (int step = 0; step < STEPS; step++) {
    sg_worker_mlp_batch(BATCH, IN, CLASSES, step, x, y);
    OK(sg_session_set_input(s, "lr", SG_F32, 0, NULL, &lr));
    double loss_sum = 0;
    for (int gm = 0; gm < n_mb; gm++) {
      OK(sg_session_set_input(s, "x", SG_F32, 2, xd, x + (size_t)gm * mb * IN));
      OK(sg_session_set_input(s, "y", SG_I64, 1, yd, y + (size_t)gm * mb));
      sg__session_pass pass = {.begin = 0, .end = first_upd, .stream = (uint64_t)gm + 1};
      OK(sg__session_run_pass(s, &pass));
      for (int i = 0; i < n_sl; i++)
        for (size_t k = 0; k < sl[i].n; k++) sl[i].sum[k] = (gm == 0 ? 0 : sl[i].sum[k]) + sl[i].addr[k];
      float l;
      OK(sg_session_read(s, "loss", &l, sizeof l));
      loss_sum += l;
    }
    losses[step] = (float)(loss_sum / n_mb);
    for (int i = 0; i < n_sl; i++)
      for (size_t k = 0; k < sl[i].n; k++) sl[i].addr[k] = sl[i].sum[k] / (float)n_mb;
    sg__session_pass update = {.begin = first_upd, .end = n_order, .count_step = true};
    OK(sg__session_run_pass(s, &update));
  }
  for (int i = 0; i < n_sl; i++) free(sl[i].sum);
  free(x);
  free(y);
  *gout = g;
  return s;
}

/* ---- the job ------------------------------------------------------------------ */

static int env_int(const char *a, const char *b) {
  const char *s = getenv(a);
  if (s == NULL) s = getenv(b);
  return s ? atoi(s) : -1;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: tp_drop_worker K T M D (as every rank of K*T*D)\n");
    return 2;
  }
  int K = atoi(argv[1]), T = atoi(argv[2]), M = atoi(argv[3]), D = atoi(argv[4]);
  int world = env_int("SG_WORLD_SIZE", "WORLD_SIZE");
  CHECK(K >= 1 && T >= 2 && T <= 8 && M >= 1 && D >= 1 && BATCH % (D * M) == 0 && world == K * T * D,
        "K %d x T %d x D %d for a world of %d, M %d", K, T, D, world, M);
  int input_only = K > 1;
  sg_graph *ref_g;
  float ref_loss[STEPS];
  sg_session *ref = reference(T, M, D, input_only, &ref_g, ref_loss);

  sg_graph *fwd = build(BATCH / D, 0, input_only);
  sg_tensor loss;
  OK(sg_graph_find_tensor(fwd, "loss", &loss));
  if (K == 1) { /* the splits the reference assumes: fc1 by columns, fc2 by rows */
    sg_tp_params tpp = SG_TP_PARAMS_INIT;
    tpp.ways = T;
    sg_tp_plan *plan;
    OK(sg_tp_plan_create(fwd, &tpp, &plan));
    sg_tensor w1, w2;
    OK(sg_graph_find_tensor(fwd, "fc1.weight", &w1));
    OK(sg_graph_find_tensor(fwd, "fc2.weight", &w2));
    int seen = 0;
    for (int32_t i = 0; i < sg_tp_plan_count(plan); i++) {
      sg_tp_annotation a;
      OK(sg_tp_plan_get(plan, i, &a));
      seen += a.weight.id == w1.id && a.split == SG_TP_COLUMN;
      seen += a.weight.id == w2.id && a.split == SG_TP_ROW;
    }
    CHECK(seen == 2, "the plan does not split fc1 by columns and fc2 by rows (%d of 2)", seen);
    sg_tp_plan_destroy(plan);
  }
  sg_sgd_params sgd = SG_SGD_PARAMS_INIT;
  sgd.momentum = 0.9;
  sg_dist_optimizer opt = SG_DIST_OPTIMIZER_INIT;
  opt.sgd = &sgd;
  sg_dist_params dp = SG_DIST_PARAMS_INIT;
  dp.threads = 1;
  dp.pipeline = K, dp.tensor = T, dp.data = D, dp.micro_batches = M;
  sg_dist *d;
  OK(sg_dist_create_model(fwd, loss, &opt, &dp, &d));
  int rank = sg_dist_rank(d), share = rank % T, replica = rank / (K * T);

  int rows = BATCH / D;
  float *x = malloc(sizeof(float) * BATCH * IN), lr = LR;
  int64_t *y = malloc(sizeof(int64_t) * BATCH);
  CHECK(x && y, "out of memory");
  int64_t xd[] = {rows, IN}, yd[] = {rows};
  double worst_loss = 0;
  for (int step = 0; step < STEPS; step++) {
    sg_worker_mlp_batch(BATCH, IN, CLASSES, step, x, y);
    OK(sg_dist_set_input(d, "x", SG_F32, 2, xd, x + (size_t)replica * rows * IN));
    OK(sg_dist_set_input(d, "y", SG_I64, 1, yd, y + (size_t)replica * rows));
    OK(sg_dist_set_input(d, "lr", SG_F32, 0, NULL, &lr));
    OK(sg_dist_step(d));
    sg_dist_stats st = SG_DIST_STATS_INIT;
    OK(sg_dist_get_stats(d, &st));
    double e = fabs((double)st.loss_mean - ref_loss[step]) / fabs((double)ref_loss[step]);
    CHECK(e <= TOL, "step %d: loss_mean %.9g, one process %.9g", step, st.loss_mean, ref_loss[step]);
    worst_loss = fmax(worst_loss, e);
  }
  double worst = 0;
  int held = 0, split = 0;
  char at[64] = "-";
  for (int32_t t = 0; t < sg_graph_num_tensors(fwd); t++) {
    sg_tensor_info a;
    OK(sg_graph_tensor_info(fwd, (sg_tensor){t}, &a));
    if (a.role != SG_ROLE_PARAMETER) continue;
    float *want = malloc(a.nbytes);
    CHECK(want != NULL, "out of memory");
    OK(sg_session_read(ref, a.name, want, a.nbytes));
    int is_split;
    double e = compare_dist_part(d, &a, want, T, share, NULL, &is_split);
    free(want);
    if (e < 0) continue; /* on another stage */
    CHECK(e <= TOL, "'%s' (%s) differs from one process by %.3g", a.name, is_split ? "a slice" : "whole", e);
    held++, split += is_split;
    if (e >= worst) worst = e, snprintf(at, sizeof at, "%s", a.name);
  }
  CHECK(held > 0, "rank %d holds no parameter", rank);
  CHECK(K > 1 || split >= 3, "rank %d holds %d split parameters (fc1's two and fc2's weight at least)", rank,
        split);
  printf("rank %d: MLP with dropout %.1f, pipeline=%d x tensor=%d x data=%d, M=%d: %d parameters here (%d "
         "split), worst rel diff %.3g (%s), worst loss rel diff %.3g\n",
         rank, P_DROP, K, T, D, M, held, split, worst, at, worst_loss);
  OK(sg_dist_destroy(d));
  sg_graph_destroy(fwd);
  sg_session_destroy(ref);
  sg_graph_destroy(ref_g);
  free(x);
  free(y);
  return 0;
}
