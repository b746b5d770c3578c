/* Pipeline x data parallelism against one process (pp.h, sg__pp_dp;
 * docs/pipeline_parallel.md), as every rank of `sgrt launch -n K*D --
 * pp_worker equiv MODEL D M [metis]`:
 *
 *   rank = replica*K + stage: each pipeline is K consecutive ranks; the
 *   pipeline's stages talk over a group communicator "pp.r<replica>" (rank =
 *   stage), a stage's D copies average their gradients over "dp.s<stage>"
 *   (rank = replica). Replica r trains on rows [r*B/D, (r+1)*B/D) of the
 *   global batch B, cut into M micro-batches; micro-batch m of replica r is
 *   micro-batch g = r*M + m of the step and draws dropout stream g+1.
 *
 * The reference (rank 0, then broadcast) is one process running the whole,
 * un-split training graph at micro-batch size: forward and backward of the
 * D*M micro-batches in that order with the same streams (gradient
 * accumulation through partial passes, sg__session_run_pass), each
 * replica's sum scaled by 1/M, their sum divided by D (the pipeline's own
 * order of operations),
 * then one update; batch norm's running statistics are carried per replica
 * (each copy of a pipeline sees only its own micro-batches). Every rank
 * compares its stage's parameters and running statistics with it (per
 * tensor max|a-b| / max|b| <= 1e-4), the last stages their losses, and the
 * copies of a stage their parameters bitwise (an FNV hash over the replica
 * group). */
#include "pp_equiv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../examples/resnet50/resnet50_model.h"
#include "../worker_check.h"
#include "comm/comm_internal.h"
#include "compare.h"
#include "core/core.h"
#include "dist_models.h"
#include "parallel/pp.h"
#include "runtime/hooks.h"
#include "sgrt/sgrt.h"

#define MAX_STEPS 16
static int STEPS = 5; /* PP_EQUIV_STEPS overrides it (diagnosis) */
#define TOL 1e-4

/* ---- the models -------------------------------------------------------------- */

typedef struct model {
  const char *x, *y; /* the batched inputs */
  int64_t x_row;     /* floats per sample of x */
  int batch;         /* global batch */
  float lr;
  int dropout, resnet;
} model;

enum { MLP_IN = 32, MLP_HIDDEN = 64, MLP_CLASSES = 10, MLP_LAYERS = 4 };
enum { RN_RES = 32, RN_WIDTH = 16, RN_CLASSES = 10 };

/* Forward graph at `batch` rows: inputs x, y, "lr"; output "loss". The MLP
 * is pp_worker's (32-64-64-64-10, relu) with, for `drop`, dropout 0.25
 * after the first two relus (seeds 101, 102). */
static sg_graph *build_mlp(const model *m, int batch) {
  sg_graph *g;
  OK(sg_graph_create(&g));
  int64_t xd[] = {batch, MLP_IN}, yd[] = {batch};
  sg_tensor h = sg_input(g, "x", SG_F32, 2, xd);
  sg_tensor y = sg_input(g, "y", SG_I64, 1, yd);
  sg_input(g, "lr", SG_F32, 0, NULL);
  int fan_in = MLP_IN;
  for (int l = 1; l <= MLP_LAYERS; l++) {
    int out_f = l == MLP_LAYERS ? MLP_CLASSES : MLP_HIDDEN;
    int64_t wd[2] = {out_f, fan_in}, bd[] = {out_f};
    size_t nw = (size_t)out_f * (size_t)fan_in;
    float *w = malloc(nw * sizeof *w), *b = malloc((size_t)out_f * sizeof *b);
    CHECK(w && b, "out of memory");
    float bound = 1.0f / sqrtf((float)fan_in);
    for (size_t i = 0; i < nw; i++) w[i] = bound * sg_worker_unit(7, (uint64_t)l, i);
    for (int i = 0; i < out_f; i++) b[i] = bound * sg_worker_unit(7, 1000u + (uint64_t)l, (uint64_t)i);
    char wn[32], bn[32];
    snprintf(wn, sizeof wn, "fc%d.weight", l);
    snprintf(bn, sizeof bn, "fc%d.bias", l);
    h = sg_linear(g, h, sg_parameter(g, wn, SG_F32, 2, wd, w), sg_parameter(g, bn, SG_F32, 1, bd, b));
    free(w);
    free(b);
    if (l < MLP_LAYERS) h = sg_relu(g, h);
    if (m->dropout && l <= 2) h = sg_dropout(g, h, 0.25, 100 + (uint64_t)l, 1);
    fan_in = out_f;
  }
  finish_forward(g, h, y);
  return g;
}

/* ResNet-50 (torchvision layout) at 32x32, bottleneck width 16, 10
 * classes, batch norm in training form. */
static sg_graph *build_resnet(int batch) {
  sg_graph *g;
  OK(sg_graph_create(&g));
  int64_t xd[] = {batch, 3, RN_RES, RN_RES}, yd[] = {batch};
  sg_tensor x = sg_input(g, "images", SG_F32, 4, xd);
  sg_tensor y = sg_input(g, "labels", SG_I64, 1, yd);
  sg_input(g, "lr", SG_F32, 0, NULL);
  resnet50_config rc = RESNET50_CONFIG_INIT;
  rc.batch = batch;
  rc.image_size = RN_RES;
  rc.classes = RN_CLASSES;
  rc.width = RN_WIDTH;
  sg_tensor logits;
  OK(resnet50_build(g, &rc, x, &logits));
  finish_forward(g, logits, y);
  return g;
}

static sg_graph *build(const model *m, int batch) {
  return m->resnet ? build_resnet(batch) : build_mlp(m, batch);
}

/* The whole global batch of a step. */
static void data(const model *m, int step, float *x, int64_t *y) {
  if (m->resnet) rn_data(step, 0, m->batch, RN_RES, RN_CLASSES, x, y);
  else sg_worker_mlp_batch(m->batch, MLP_IN, MLP_CLASSES, step, x, y);
}

static bool in_list(const int32_t *ids, int n, int32_t t) {
  for (int i = 0; i < n; i++)
    if (ids[i] == t) return true;
  return false;
}

/* ResNet's tensors have no initializers: torchvision's initial values by
 * name (the same for a stage graph and the whole graph), except the
 * boundary inputs (`skip`), which are parameters only to get gradients. */
static void init_session(const model *m, const sg_graph *g, sg_session *s, const int32_t *skip, int n_skip) {
  if (!m->resnet) return;
  for (int32_t t = 0; t < sg_graph_num_tensors(g); t++) {
    sg_tensor_info ti;
    OK(sg_graph_tensor_info(g, (sg_tensor){t}, &ti));
    if ((ti.role != SG_ROLE_PARAMETER && ti.role != SG_ROLE_STATE) || in_list(skip, n_skip, t)) continue;
    float *v = malloc(ti.nbytes);
    CHECK(v != NULL, "out of memory");
    CHECK(resnet50_init_values(&ti, 1234, v) == 0, "no initial value for '%s'", ti.name);
    OK(sg_session_write(s, ti.name, v, ti.nbytes));
    free(v);
  }
}

/* ---- what is compared ---------------------------------------------------------- */

/* Every parameter, then every running statistic of the forward graph, in
 * tensor order: offsets into one flat buffer, the statistics once per
 * replica. */
typedef struct layout {
  int n;
  char **names;
  size_t *off, *numel;
  bool *state;
  size_t params, states, total; /* floats: parameters, statistics of one replica, all */
} layout;

static void layout_of(const sg_graph *fwd, int replicas, layout *l) {
  int nt = sg_graph_num_tensors(fwd);
  *l = (layout){0};
  l->names = calloc((size_t)nt, sizeof *l->names);
  l->off = calloc((size_t)nt, sizeof *l->off);
  l->numel = calloc((size_t)nt, sizeof *l->numel);
  l->state = calloc((size_t)nt, sizeof *l->state);
  CHECK(l->names && l->off && l->numel && l->state, "out of memory");
  for (int pass = 0; pass < 2; pass++)
    for (int32_t t = 0; t < nt; t++) {
      sg_tensor_info ti;
      OK(sg_graph_tensor_info(fwd, (sg_tensor){t}, &ti));
      if (ti.role != (pass == 0 ? SG_ROLE_PARAMETER : SG_ROLE_STATE)) continue;
      CHECK(ti.dtype == SG_F32, "'%s' is not f32", ti.name);
      int k = l->n++;
      l->names[k] = strdup(ti.name);
      l->numel[k] = (size_t)ti.numel;
      l->state[k] = pass == 1;
      l->off[k] = pass == 0 ? l->params : l->params + l->states;
      if (pass == 0) l->params += (size_t)ti.numel;
      else l->states += (size_t)ti.numel;
    }
  l->total = l->params + l->states * (size_t)replicas;
}

static int find(const layout *l, const char *name) {
  for (int k = 0; k < l->n; k++)
    if (strcmp(l->names[k], name) == 0) return k;
  return -1;
}

static void layout_free(layout *l) {
  for (int k = 0; k < l->n; k++) free(l->names[k]);
  free(l->names);
  free(l->off);
  free(l->numel);
  free(l->state);
}

/* ---- the single-process reference ----------------------------------------------- */

typedef struct slot {
  float *addr, *acc, *tot;
  size_t n;
} slot;

/* Trains the whole graph at micro-batch size over the D*M micro-batches of
 * each step; fills ref[l->total] (parameters, then each replica's running
 * statistics) and losses[D][STEPS] (each replica's mean micro-batch loss). */
static void reference(const model *m, int D, int M, const layout *l, float *ref, float *losses) {
  int mb = m->batch / (D * M);
  sg_graph *fwd = build(m, mb), *g;
  sg_session *s = open_training(fwd, &g);
  sg_graph_destroy(fwd);
  init_session(m, g, s, NULL, 0);
  uint32_t n_order = 0, first_upd = 0;
  const int32_t *order = sg__session_order(s, &n_order);
  while (first_upd < n_order) {
    sg_op_info oi;
    OK(sg_graph_op_info(g, order[first_upd], &oi));
    if (oi.kind == SG_OP_SGD_UPDATE) break;
    first_upd++;
  }
  CHECK(first_upd < n_order, "the reference has no update");
  /* The gradient slots, and two sums: over one replica's micro-batches, and
   * over the replicas. */
  slot *sl = calloc((size_t)l->n, sizeof *sl);
  int n_sl = 0;
  CHECK(sl != NULL, "out of memory");
  for (int k = 0; k < l->n; k++) {
    if (l->state[k]) continue;
    sg_tensor p, gr;
    OK(sg_graph_find_tensor(g, l->names[k], &p));
    OK(sg_graph_grad(g, p, &gr));
    size_t bytes = 0;
    slot *x = &sl[n_sl++];
    x->addr = sg__session_tensor_addr(s, gr.id, &bytes);
    x->n = l->numel[k];
    CHECK(x->addr != NULL && bytes >= x->n * 4, "no gradient slot for '%s'", l->names[k]);
    x->acc = malloc(x->n * 4);
    x->tot = malloc(x->n * 4);
    CHECK(x->acc && x->tot, "out of memory");
  }
  /* Each replica's running statistics, starting from the initial ones. */
  float *stats = ref + l->params;
  for (int k = 0; k < l->n; k++)
    if (l->state[k])
      for (int r = 0; r < D; r++)
        OK(sg_session_read(s, l->names[k], stats + l->states * (size_t)r + (l->off[k] - l->params),
                           l->numel[k] * 4));
  float *x = malloc(sizeof(float) * (size_t)m->batch * (size_t)m->x_row), lr = m->lr;
  int64_t *y = malloc(sizeof(int64_t) * (size_t)m->batch);
  CHECK(x && y, "out of memory");
  sg_tensor_info xi, yi;
  sg_tensor xt, yt;
  OK(sg_graph_find_tensor(g, m->x, &xt));
  OK(sg_graph_find_tensor(g, m->y, &yt));
  OK(sg_graph_tensor_info(g, xt, &xi));
  OK(sg_graph_tensor_info(g, yt, &yi));
  for (int step = 0; step < STEPS; step++) {
    data(m, step, x, y);
    OK(sg_session_set_input(s, "lr", SG_F32, 0, NULL, &lr));
    for (int r = 0; r < D; r++) {
      for (int k = 0; k < l->n; k++)
        if (l->state[k])
          OK(sg_session_write(s, l->names[k], stats + l->states * (size_t)r + (l->off[k] - l->params),
                              l->numel[k] * 4));
      double loss_sum = 0;
      for (int mi = 0; mi < M; mi++) {
        size_t gm = (size_t)r * (size_t)M + (size_t)mi;
        OK(sg_session_set_input(s, m->x, SG_F32, xi.ndim, xi.dims, x + gm * (size_t)mb * (size_t)m->x_row));
        OK(sg_session_set_input(s, m->y, SG_I64, yi.ndim, yi.dims, y + gm * (size_t)mb));
        sg__session_pass mb_pass = {.begin = 0, .end = first_upd, .stream = gm + 1};
        OK(sg__session_run_pass(s, &mb_pass));
        for (int i = 0; i < n_sl; i++) {
          if (mi == 0) memcpy(sl[i].acc, sl[i].addr, sl[i].n * 4);
          else
            for (size_t k = 0; k < sl[i].n; k++) sl[i].acc[k] += sl[i].addr[k];
        }
        float lv;
        OK(sg_session_read(s, "loss", &lv, sizeof lv));
        loss_sum += (double)lv;
      }
      losses[r * STEPS + step] = (float)(loss_sum / M);
      for (int k = 0; k < l->n; k++)
        if (l->state[k])
          OK(sg_session_read(s, l->names[k], stats + l->states * (size_t)r + (l->off[k] - l->params),
                             l->numel[k] * 4));
      /* The pipeline's order: each replica's mean, then their sum. */
      float scale = 1.0f / (float)M;
      for (int i = 0; i < n_sl; i++)
        for (size_t k = 0; k < sl[i].n; k++) {
          float a = sl[i].acc[k] * scale;
          sl[i].tot[k] = r == 0 ? a : sl[i].tot[k] + a;
        }
    }
    for (int i = 0; i < n_sl; i++)
      for (size_t k = 0; k < sl[i].n; k++) sl[i].addr[k] = D > 1 ? sl[i].tot[k] / (float)D : sl[i].tot[k];
    sg__session_pass update_pass = {.begin = first_upd, .end = n_order, .count_step = true};
    OK(sg__session_run_pass(s, &update_pass));
  }
  for (int k = 0; k < l->n; k++)
    if (!l->state[k]) OK(sg_session_read(s, l->names[k], ref + l->off[k], l->numel[k] * 4));
  for (int i = 0; i < n_sl; i++) {
    free(sl[i].acc);
    free(sl[i].tot);
  }
  free(sl);
  free(x);
  free(y);
  sg_session_destroy(s);
  sg_graph_destroy(g);
}

/* ---- the pipeline ------------------------------------------------------------------ */

/* Equal op counts, each cut moved to the nearest end of a residual block
 * (a relu of an add; for the MLP, which has none, any op): a cut inside a
 * bottleneck can leave a batch-norm or pooling op reading a boundary tensor,
 * which the session stores plain where the whole graph keeps it
 * channel-blocked, and oneDNN's plain and blocked batch norm sum in other
 * orders: last-bit differences that ResNet-50 amplifies past 1e-4 within a
 * step (`metis` shows it). At a block end only convolutions and adds read
 * the boundary, and they compute the same bits in either layout. */
static void cut_at_blocks(const sg_graph *fwd, int K, int *stage_of) {
  int n_ops = sg_graph_num_ops(fwd), n_ends = 0;
  int *ends = calloc((size_t)n_ops + 1, sizeof *ends); /* op index after which a cut may go */
  CHECK(ends != NULL, "out of memory");
  bool residual = false;
  for (int k = 0; k < n_ops; k++) {
    sg_op_info oi;
    OK(sg_graph_op_info(fwd, k, &oi));
    if (oi.kind != SG_OP_RELU) continue;
    sg_tensor_info ti;
    OK(sg_graph_tensor_info(fwd, (sg_tensor){oi.inputs[0]}, &ti));
    sg_op_info pi;
    if (ti.producer >= 0 && sg_graph_op_info(fwd, ti.producer, &pi) == SG_OK && pi.kind == SG_OP_ADD) {
      ends[n_ends++] = k;
      residual = true;
    }
  }
  if (!residual)
    for (int k = 0; k + 1 < n_ops; k++) ends[n_ends++] = k;
  int prev = -1, j = 0;
  for (int i = 1; i < K; i++) {
    int target = (int)((int64_t)i * n_ops / K) - 1, best = -1;
    for (int e = 0; e < n_ends; e++)
      if (ends[e] > prev && (best < 0 || abs(ends[e] - target) < abs(best - target))) best = ends[e];
    CHECK(best >= 0, "no place for cut %d of %d", i, K);
    for (; j <= best; j++) stage_of[j] = i - 1;
    prev = best;
  }
  for (; j < n_ops; j++) stage_of[j] = K - 1;
  free(ends);
}

static void stages_of(const sg_graph *fwd, int K, int metis, int *stage_of) {
  if (metis) stages_from_metis(fwd, K, stage_of);
  else cut_at_blocks(fwd, K, stage_of);
}

int pp_equiv_main(int argc, char **argv) {
  CHECK(argc >= 5, "usage: pp_worker equiv mlp|drop|resnet D M [blocks|metis [BATCH]]");
  model m = {"x", "y", MLP_IN, 16, 0.05f, 0, 0};
  if (strcmp(argv[2], "drop") == 0) m.dropout = 1;
  else if (strcmp(argv[2], "resnet") == 0)
    m = (model){"images", "labels", 3 * RN_RES * RN_RES, 16, 0.01f, 0, 1};
  else CHECK(strcmp(argv[2], "mlp") == 0, "unknown model '%s'", argv[2]);
  int D = atoi(argv[3]), M = atoi(argv[4]), metis = argc > 5 && strcmp(argv[5], "metis") == 0;
  CHECK(argc <= 5 || metis || strcmp(argv[5], "blocks") == 0, "unknown cut '%s'", argv[5]);
  if (argc > 6) m.batch = atoi(argv[6]);
  CHECK(m.batch >= 1 && m.batch <= 4096, "batch %d", m.batch);
  if (getenv("PP_EQUIV_STEPS")) STEPS = atoi(getenv("PP_EQUIV_STEPS"));
  CHECK(STEPS >= 1 && STEPS <= MAX_STEPS, "PP_EQUIV_STEPS=%d (1..%d)", STEPS, MAX_STEPS);
  sg_comm_params cp = SG_COMM_PARAMS_INIT;
  sg_comm *world;
  OK(sg_comm_create(&cp, &world));
  int W = sg_comm_size(world), rank = sg_comm_rank(world);
  CHECK(D >= 1 && W % D == 0 && M >= 1 && m.batch % (D * M) == 0, "%d ranks, D=%d, M=%d", W, D, M);
  int K = W / D, replica = rank / K, stage = rank % K;
  sg_comm *pc = group_comm("pp.r", replica, stage, K), *dc = group_comm("dp.s", stage, replica, D);
  sg__xfer px, dx;
  sg__xfer_direct(pc, &px);
  sg__xfer_direct(dc, &dx);

  /* This replica's pipeline: the model at batch B/D, cut into K stages. */
  int rb = m.batch / D;
  sg_graph *fwd = build(&m, rb);
  int n_ops = sg_graph_num_ops(fwd);
  int *stage_of = calloc((size_t)n_ops, sizeof *stage_of);
  CHECK(stage_of != NULL, "out of memory");
  stages_of(fwd, K, metis, stage_of);
  int count = 0;
  for (int k = 0; k < n_ops; k++) count += stage_of[k] == stage;
  sg_tensor loss_t;
  OK(sg_graph_find_tensor(fwd, "loss", &loss_t));
  sg__pp_stage *st;
  OK(sg__pp_split(fwd, loss_t, stage_of, n_ops, K, stage, M, &st));
  if (getenv("PP_EQUIV_VERBOSE")) {
    for (int j = 0; j < st->n_recv; j++) {
      sg_tensor_info ti;
      OK(sg_graph_tensor_info(st->g, (sg_tensor){st->recv[j]}, &ti));
      printf("rank %d stage %d receives '%s'\n", rank, stage, ti.name);
    }
    for (int j = 0; j < st->n_send; j++) {
      sg_tensor_info ti;
      OK(sg_graph_tensor_info(st->g, (sg_tensor){st->send[j]}, &ti));
      printf("rank %d stage %d sends '%s'\n", rank, stage, ti.name);
    }
  }
  add_optimizer(st->g);
  sg_session *s = open_session(st->g);
  init_session(&m, st->g, s, st->recv, st->n_recv);
  /* The replica group's transport must be the replica it claims to be. */
  sg__pp_runner *r = NULL;
  sg__pp_dp bad[] = {{&dx, replica, D + 1}, {&dx, D, D}, {&dx, -1, D}, {NULL, 0, 2}, {&dx, replica, 0}};
  const char *why[] = {"transport is rank", "replica", "replica", "no transport", "replica"};
  for (int i = 0; i < 5; i++) {
    sg_status got = sg__pp_runner_create(st, s, &px, stage - 1, stage + 1, &bad[i], &r);
    CHECK(got == SG_ERR_INVALID_ARG && r == NULL && strstr(sg_last_error(), why[i]),
          "replica group %d: %s (%s)", i, sg_status_str(got), sg_last_error());
  }
  sg__pp_dp one = {NULL, 0, 1}; /* one copy needs no transport */
  OK(sg__pp_runner_create(st, s, &px, stage - 1, stage + 1, &one, &r));
  sg__pp_runner_destroy(r);
  sg__pp_dp dp = {&dx, replica, D};
  for (long fail = 0;; fail++) { /* every allocation failure is reported and frees what was made */
    sg__alloc_fail_after(fail);
    sg_status got = sg__pp_runner_create(st, s, &px, stage - 1, stage + 1, &dp, &r);
    sg__alloc_fail_after(-1);
    if (got == SG_OK) break;
    CHECK(got == SG_ERR_NO_MEMORY && r == NULL, "allocation %ld failed: %s", fail, sg_status_str(got));
  }
  float *x = malloc(sizeof(float) * (size_t)m.batch * (size_t)m.x_row), lr = m.lr, losses[MAX_STEPS];
  int64_t *y = malloc(sizeof(int64_t) * (size_t)m.batch);
  CHECK(x && y, "out of memory");
  double busy = 0, idle = 0, total = 0;
  for (int step = 0; step < STEPS; step++) {
    data(&m, step, x, y);
    const float *xr = x + (size_t)replica * (size_t)rb * (size_t)m.x_row;
    const int64_t *yr = y + (size_t)replica * (size_t)rb;
    for (int i = 0; i < st->n_inputs; i++) {
      sg_tensor_info ti;
      OK(sg_graph_tensor_info(st->g, (sg_tensor){st->inputs[i]}, &ti));
      if (strcmp(ti.name, m.x) == 0)
        OK(sg__pp_set_input(r, m.x, xr, sizeof(float) * (size_t)rb * (size_t)m.x_row));
      if (strcmp(ti.name, m.y) == 0) OK(sg__pp_set_input(r, m.y, yr, sizeof(int64_t) * (size_t)rb));
    }
    OK(sg__pp_set_input(r, "lr", &lr, sizeof lr));
    OK(sg__pp_step(r, &losses[step]));
    sg__pp_stats ps;
    sg__pp_runner_stats(r, &ps);
    if (step > 0) {
      busy += ps.busy_ms;
      idle += ps.idle_ms;
      total += ps.step_ms;
    }
  }

  /* The reference, computed once and broadcast: it is the whole model's
   * training, too slow to repeat on every rank of two shared cores. */
  layout l;
  layout_of(fwd, D, &l);
  float *ref = malloc(l.total * sizeof(float) + 1), ref_losses[64 * MAX_STEPS];
  CHECK(ref != NULL && D <= 64, "out of memory");
  if (rank == 0) reference(&m, D, M, &l, ref, ref_losses);
  OK(sg_comm_broadcast(world, ref, l.total, SG_F32, 0));
  OK(sg_comm_broadcast(world, ref_losses, (size_t)D * STEPS, SG_F32, 0));

  double worst = 0, worst_state = 0;
  const char *worst_name = "-", *worst_state_name = "-";
  int64_t n_params = 0;
  int n_bad = 0;
  uint64_t h = SG__FNV1A64_SEED;
  for (int32_t t = 0; t < sg_graph_num_tensors(st->g); t++) {
    sg_tensor_info a;
    OK(sg_graph_tensor_info(st->g, (sg_tensor){t}, &a));
    if ((a.role != SG_ROLE_PARAMETER && a.role != SG_ROLE_STATE) || in_list(st->recv, st->n_recv, t))
      continue;
    int k = find(&l, a.name);
    CHECK(k >= 0 && l.numel[k] == (size_t)a.numel, "'%s' is not a tensor of the model", a.name);
    float *mine = malloc(a.nbytes);
    CHECK(mine != NULL, "out of memory");
    OK(sg_session_read(s, a.name, mine, a.nbytes));
    const float *want = ref + l.off[k] + (l.state[k] ? l.states * (size_t)replica : 0);
    double d = rel_diff(mine, want, l.numel[k]);
    if (getenv("PP_EQUIV_VERBOSE")) printf("rank %d: %-32s %.3g\n", rank, a.name, d);
    n_bad += d > TOL;
    if (d > TOL) printf("rank %d: '%s' differs by %.3g\n", rank, a.name, d);
    if (l.state[k]) {
      if (d > worst_state) worst_state = d, worst_state_name = l.names[k];
    } else {
      if (d > worst) worst = d, worst_name = l.names[k];
      h = sg__fnv1a64(h, mine, a.nbytes);
      n_params++;
    }
    free(mine);
  }
  /* Every rank reports its worst before any fails (the launcher stops the
   * others at the first failure). */
  printf(
      "rank %d = replica %d stage %d: %d tensors beyond %g; worst parameter %.3g ('%s'), running stats %.3g "
      "('%s')\n",
      rank, replica, stage, n_bad, TOL, worst, worst_name, worst_state, worst_state_name);
  fflush(stdout);
  int32_t bad_all = n_bad;
  OK(sg_comm_allreduce(world, &bad_all, &bad_all, 1, SG_I32, SG_REDUCE_SUM));
  CHECK(bad_all == 0, "%d tensors differ from the single-process run by more than %g (here %d)", bad_all, TOL,
        n_bad);
  double loss_diff = 0;
  if (stage == K - 1) {
    char who[64];
    snprintf(who, sizeof who, "rank %d (replica %d)", rank, replica);
    loss_diff = compare_losses(who, losses, ref_losses + replica * STEPS, STEPS, TOL);
  }
  /* The copies of a stage hold the same bits. */
  int64_t hashes[64], mine_h = (int64_t)h;
  OK(sg_comm_allgather(dc, &mine_h, hashes, 1, SG_I64));
  for (int i = 0; i < D; i++)
    CHECK(hashes[i] == mine_h, "replica %d's parameters of stage %d differ from replica %d's", i, stage,
          replica);
  /* Every parameter of the model is on exactly one stage of each pipeline. */
  int64_t all = n_params;
  OK(sg_comm_allreduce(world, &all, &all, 1, SG_I64, SG_REDUCE_SUM));
  int64_t model_params = 0;
  for (int k = 0; k < l.n; k++) model_params += !l.state[k];
  CHECK(all == model_params * D, "the stages hold %lld parameters, the model %lld x %d", (long long)all,
        (long long)model_params, D);
  double timed = STEPS > 1 ? STEPS - 1 : 1; /* the first step warms caches and connections */
  float w[3] = {(float)worst, (float)worst_state, (float)loss_diff};
  OK(sg_comm_allreduce(world, w, w, 3, SG_F32, SG_REDUCE_MAX));
  printf(
      "rank %d = replica %d stage %d of K=%d D=%d M=%d: %d ops, %lld parameters, loss rel diff %.3g; steps "
      "2-%d: busy %.1f ms, idle %.1f ms, step %.1f ms\n",
      rank, replica, stage, K, D, M, count, (long long)n_params, loss_diff, STEPS, busy / timed, idle / timed,
      total / timed);
  if (rank == 0)
    printf("all ranks: worst parameter rel diff %.3g, running statistics %.3g, loss %.3g; replicas bitwise "
           "equal\n",
           w[0], w[1], w[2]);
  free(x);
  free(y);
  free(ref);
  layout_free(&l);
  free(stage_of);
  sg__pp_runner_destroy(r);
  sg_session_destroy(s);
  sg__pp_stage_destroy(st);
  sg_graph_destroy(fwd);
  OK(sg_comm_destroy(dc));
  OK(sg_comm_destroy(pc));
  OK(sg_comm_destroy(world));
  return 0;
}
