/* sg_dist_create_model (include/sgrt/dist.h, docs/dist.md "Pipeline and
 * tensor parallelism through sg_dist"), through the public API only, run as
 * every rank by `sgrt launch -n N -- model_worker MODE ...`:
 *
 *   pp M [TRACE] a 4-layer MLP (32-64-64-64-10, batch 16) as an N-stage
 *               pipeline of M micro-batches (and the timeline written to
 *               TRACE and checked);
 *   ppdp M [TRACE] the same as 2 replicas of an N/2-stage pipeline, each
 *               fed 8 of the 16 samples (data x pipeline);
 *   tp [TRACE]  the same MLP split N ways (tensor parallelism);
 *   tpdp        2 replicas of an N/2-way split, each fed 8 of the 16 samples;
 *   tpm M       the N-way split running M micro-batches per step (gradients
 *               accumulated: equal to the whole-batch step of one process);
 *   tpmdp M     2 replicas of an N/2-way split, M micro-batches each;
 *   recut       the MLP as an N-stage pipeline whose rank 1 is slowed 4x
 *               (a 'slow' fault): the ranks re-cut the stages from the
 *               profile and move the state (repartitioning, SPEC P6);
 *   recutdp     the same with 2 copies of an N/2-stage pipeline;
 *   dp          the same MLP, data-parallel over N ranks (pipeline = tensor
 *               = 1): equal to the single-process run, and bitwise equal to
 *               sg_dist_create() on the training graph built by hand;
 *   rn_tp       ResNet-50 (examples/resnet50, width 16, 32x32, 10 classes,
 *               batch 8) split N ways: only the final linear is split;
 *   rn_pp M     the same ResNet-50 as an N-stage pipeline;
 *   pptp T M [D] the MLP as a pipeline of N / (T x D) stages, each a tensor
 *               group of T shares (pipeline x tensor), M micro-batches, D
 *               copies (1);
 *   rn_pptp T M the same with ResNet-50 (one copy; in lockstep, as rn_tp);
 *   death DIR   a 4-stage pipeline (MODEL_DEATH_DATA=2: 2 copies of 2
 *               stages) whose rank 2 SIGKILLs itself in step 3:
 *               every other rank's step fails with SG_ERR_COMM naming rank 2
 *               within 5 s (run_death.sh checks the exits);
 *   badargs     argument errors (under 4 ranks, nothing joins);
 *   mismatch    rank 1 builds a narrower MLP: every rank's create fails
 *               with SG_ERR_SHAPE (the consistency check).
 *
 * Every training mode runs 5 steps of SGD with momentum 0.9 and compares
 * every parameter with a single-process session of the whole model on the
 * same global batch (an independent computation: no split, no runner, no
 * communication): worst per-tensor max|a-b|/max|b| <= 1e-4, and the loss
 * sg_dist_get_stats reports on every rank with the reference's. After the
 * sg_dist is gone the ranks meet again on a plain communicator (epoch 1) to
 * check what needs more than one rank: every parameter held by exactly one
 * stage, replicated parameters bitwise equal across a tensor group. */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../examples/resnet50/resnet50_model.h"
#define SG_WORKER_FAIL_STATUS 2 /* 1 is a survivor that detected the death (run_death.sh) */
#include "../worker_check.h"
#include "compare.h"
#include "dist_models.h"
#include "parallel/model.h" /* the copies' slots in the global page table (sg__model_copy_probe_get) */
#include "sgrt/sgrt.h"

#define STEPS 5
#define TOL 1e-4
#define SEED 1

/* ---- the models ------------------------------------------------------------- */

typedef struct model {
  int resnet;
  int batch, in, hidden, classes, res, width;
  sg_graph *fwd;
  sg_tensor loss;
} model;

static void add_loss(sg_graph *g, sg_tensor logits, sg_tensor y, model *m) {
  sg_tensor loss = finish_forward(g, logits, y);
  m->fwd = g;
  m->loss = loss;
}

/* `mismatch`: rank 1 builds a narrower model. */
static int mlp_hidden = 64;
/* Forward only; no "lr" input: the optimizer of each rank's part adds it. */
static void build_mlp(model *m, int batch) {
  *m = (model){0, batch, 32, mlp_hidden, 10, 0, 0, NULL, {0}};
  sg_graph *g;
  OK(sg_graph_create(&g));
  int64_t xd[] = {batch, m->in}, yd[] = {batch};
  sg_tensor h = sg_input(g, "x", SG_F32, 2, xd);
  sg_tensor y = sg_input(g, "y", SG_I64, 1, yd);
  int fan_in = m->in;
  for (int l = 1; l <= 4; l++) {
    int out_f = l == 4 ? m->classes : m->hidden;
    int64_t wd[] = {out_f, fan_in}, bd[] = {out_f};
    float *w = malloc(sizeof(float) * (size_t)out_f * (size_t)fan_in),
          *b = malloc(sizeof(float) * (size_t)out_f);
    CHECK(w && b, "out of memory");
    float bound = 1.0f / sqrtf((float)fan_in);
    for (int i = 0; i < out_f * fan_in; i++) w[i] = bound * sg_worker_unit(7, (uint64_t)l, (uint64_t)i);
    for (int i = 0; i < out_f; i++) b[i] = bound * sg_worker_unit(7, 1000u + (uint64_t)l, (uint64_t)i);
    char wn[32], bn[32];
    snprintf(wn, sizeof wn, "fc%d.weight", l);
    snprintf(bn, sizeof bn, "fc%d.bias", l);
    h = sg_linear(g, h, sg_parameter(g, wn, SG_F32, 2, wd, w), sg_parameter(g, bn, SG_F32, 1, bd, b));
    free(w);
    free(b);
    if (l < 4) h = sg_relu(g, h);
    fan_in = out_f;
  }
  add_loss(g, h, y, m);
}

static void build_resnet(model *m, int batch) {
  *m = (model){1, batch, 0, 0, 10, 32, 16, NULL, {0}};
  sg_graph *g;
  OK(sg_graph_create(&g));
  int64_t xd[] = {batch, 3, m->res, m->res}, yd[] = {batch};
  sg_tensor x = sg_input(g, "images", SG_F32, 4, xd);
  sg_tensor y = sg_input(g, "labels", SG_I64, 1, yd);
  resnet50_config rc = RESNET50_CONFIG_INIT;
  rc.batch = batch;
  rc.image_size = m->res;
  rc.classes = m->classes;
  rc.width = m->width;
  sg_tensor logits;
  OK(resnet50_build(g, &rc, x, &logits));
  add_loss(g, logits, y, m);
}

static size_t x_count(const model *m, int n) {
  return (size_t)n * (m->resnet ? 3 * (size_t)m->res * (size_t)m->res : (size_t)m->in);
}

/* Samples [first, first+n) of `step` into x and y, and x's shape into xd
 * (2 dims for the MLP, 4 for ResNet-50). */
static void fill(const model *m, int step, int first, int n, float *x, int64_t *y, int64_t xd[4]) {
  xd[0] = n, xd[1] = m->in, xd[2] = xd[3] = 0;
  if (m->resnet) {
    rn_data(step, first, n, m->res, m->classes, x, y);
    xd[1] = 3, xd[2] = xd[3] = m->res;
  } else {
    mlp_data(step, first, n, m->in, m->classes, x, y);
  }
}

/* Samples [first, first+n) of `step`, set as the inputs (whole batch of the graph). */
/* Odd steps of the pipeline and tensor runs bind their inputs instead
 * (sg_dist_bind_input: not copied, so they live here until the next feed). */
static float *bound_x;
static int64_t *bound_y;

static void feed_bound(const model *m, sg_dist *d, int step, int first, int n) {
  free(bound_x);
  free(bound_y);
  /* sg_session_bind_input (the tensor mode) takes 64-byte aligned memory. */
  bound_x = aligned_alloc(64, (sizeof(float) * x_count(m, n) + 63) / 64 * 64);
  bound_y = aligned_alloc(64, (sizeof(int64_t) * (size_t)n + 63) / 64 * 64);
  CHECK(bound_x && bound_y, "out of memory");
  int64_t xd[4], yd[] = {n};
  fill(m, step, first, n, bound_x, bound_y, xd);
  float lr = m->resnet ? 0.01f : 0.05f;
  OK(sg_dist_bind_input(d, m->resnet ? "images" : "x", SG_F32, m->resnet ? 4 : 2, xd, bound_x));
  OK(sg_dist_bind_input(d, m->resnet ? "labels" : "y", SG_I64, 1, yd, bound_y));
  OK(sg_dist_set_input(d, "lr", SG_F32, 0, NULL, &lr)); /* lr is a local */
}

static void feed(const model *m, sg_dist *d, sg_session *s, int step, int first, int n) {
  /* ResNet-50 with batch norm over 8 samples diverges at the MLP's rate (as in dist_worker). */
  float *x = malloc(sizeof(float) * x_count(m, n)), lr = m->resnet ? 0.01f : 0.05f;
  int64_t *y = malloc(sizeof(int64_t) * (size_t)n);
  CHECK(x && y, "out of memory");
  int64_t xd[4], yd[] = {n};
  fill(m, step, first, n, x, y, xd);
  const char *xn = m->resnet ? "images" : "x", *yn = m->resnet ? "labels" : "y";
  int xnd = m->resnet ? 4 : 2;
  if (d) {
    OK(sg_dist_set_input(d, xn, SG_F32, xnd, xd, x));
    OK(sg_dist_set_input(d, yn, SG_I64, 1, yd, y));
    OK(sg_dist_set_input(d, "lr", SG_F32, 0, NULL, &lr));
  } else {
    OK(sg_session_set_input(s, xn, SG_F32, xnd, xd, x));
    OK(sg_session_set_input(s, yn, SG_I64, 1, yd, y));
    OK(sg_session_set_input(s, "lr", SG_F32, 0, NULL, &lr));
  }
  free(x); /* sg_dist_set_input copies */
  free(y);
}

/* The training graph of the single-process reference (and of sg_dist_create
 * in `dp`), built by hand: backward, an "lr" input, SGD with momentum 0.9. */
static sg_graph *training_graph(const model *m) {
  sg_graph *g;
  OK(sg_graph_clone(m->fwd, &g));
  OK(sg_graph_backward(g, m->loss));
  sg_sgd_params p = SG_SGD_PARAMS_INIT;
  p.momentum = 0.9;
  OK(sg_graph_add_sgd(g, sg_input(g, "lr", SG_F32, 0, NULL), &p));
  OK(sg_graph_finalize(g));
  return g;
}

static sg_session *reference(const model *m, sg_graph **gout, float *losses) {
  sg_graph *g = training_graph(m);
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sp.threads = 1;
  sg_session *s;
  OK(sg_session_create(g, &sp, &s));
  OK(sg_session_compile(s));
  if (m->resnet) OK(resnet50_init_session(g, s, SEED));
  for (int step = 0; step < STEPS; step++) {
    feed(m, NULL, s, step, 0, m->batch);
    OK(sg_session_step(s));
    OK(sg_session_read(s, "loss", &losses[step], sizeof(float)));
  }
  *gout = g;
  return s;
}

/* ---- tensor-parallel shapes (from the public plan) ----------------------------- */

/* The axis along which `name` is split by the TP plan, or -1 (replicated). */
static int split_axis(const sg_tp_plan *plan, const sg_graph *g, const char *name) {
  if (plan == NULL) return -1;
  sg_tensor t;
  OK(sg_graph_find_tensor(g, name, &t));
  for (int32_t i = 0; i < sg_tp_plan_count(plan); i++) {
    sg_tp_annotation a;
    OK(sg_tp_plan_get(plan, i, &a));
    if (a.split == SG_TP_REPLICATE) continue;
    if (a.weight.id == t.id) return a.weight_axis;
    if (a.split == SG_TP_COLUMN && a.bias.id == t.id) {
      sg_tensor_info bi;
      OK(sg_graph_tensor_info(g, a.bias, &bi));
      return bi.ndim - 1;
    }
  }
  return -1;
}

/* ResNet-50's weights have no initializers: every rank writes its part of
 * torchvision's initial values (its slice of a split tensor; nothing for a
 * tensor on another stage). */
static void init_weights(const model *m, sg_dist *d, const sg_tp_plan *plan, int ways, int rank) {
  if (!m->resnet) return;
  sg_session *s = sg_dist_session(d);
  for (int32_t t = 0; t < sg_graph_num_tensors(m->fwd); t++) {
    sg_tensor_info info;
    OK(sg_graph_tensor_info(m->fwd, (sg_tensor){t}, &info));
    if (info.role != SG_ROLE_PARAMETER && info.role != SG_ROLE_STATE) continue;
    float *full = malloc(info.nbytes), *part = malloc(info.nbytes);
    CHECK(full && part, "out of memory");
    CHECK(resnet50_init_values(&info, SEED, full) == 0, "no initial value for '%s'", info.name);
    int axis = split_axis(plan, m->fwd, info.name);
    size_t bytes = info.nbytes;
    if (axis >= 0) {
      slice_part(full, &info, axis, ways, rank, part);
      bytes /= (size_t)ways;
    }
    sg_status st = sg_session_write(s, info.name, axis >= 0 ? part : full, bytes);
    CHECK(st == SG_OK || st == SG_ERR_NOT_FOUND, "writing '%s': %s", info.name, sg_status_str(st));
    free(full);
    free(part);
  }
}

/* The job of m's forward graph with SGD, momentum 0.9 (the reference's optimizer). */
static sg_dist *create_momentum(const model *m, const sg_dist_params *dp) {
  sg_sgd_params sgd = SG_SGD_PARAMS_INIT;
  sgd.momentum = 0.9;
  sg_dist_optimizer opt = SG_DIST_OPTIMIZER_INIT;
  opt.sgd = &sgd;
  sg_dist *d;
  OK(sg_dist_create_model(m->fwd, m->loss, &opt, dp, &d));
  return d;
}

/* ---- pipeline and tensor runs ------------------------------------------------------ */

/* The world size the launcher set (sgrt launch, or torchrun-style). */
static int env_world(void) {
  const char *s = getenv("SG_WORLD_SIZE");
  if (s == NULL) s = getenv("WORLD_SIZE");
  return s ? atoi(s) : 1;
}

/* A plain communicator over the same ranks, after the sg_dist left (epoch 1:
 * fresh store keys; `sgrt launch` hosts the store). */
static sg_comm *rejoin(void) {
  sg_comm_params cp = SG_COMM_PARAMS_INIT;
  cp.epoch = 1;
  sg_comm *c;
  OK(sg_comm_create(&cp, &c));
  return c;
}

/* Usage errors on a pipeline stage: nothing is communicated for them. */
static void pp_usage_errors(const model *m, sg_dist *d, int rank, int stages) {
  float lr = 0.05f;
  int64_t bad[] = {m->batch + 1, m->in};
  float *x = calloc((size_t)(m->batch + 1) * (size_t)m->in, sizeof(float));
  CHECK(x != NULL, "out of memory");
  CHECK_ERR(sg_dist_set_input(d, "x", SG_F32, 2, bad, x), SG_ERR_SHAPE, "the whole batch on every rank");
  CHECK_ERR(sg_dist_set_input(d, "nope", SG_F32, 0, NULL, &lr), SG_ERR_NOT_FOUND, "no input 'nope'");
  CHECK_ERR(sg_dist_set_input(d, "lr", SG_F32, 0, NULL, NULL), SG_ERR_INVALID_ARG, "NULL");
  CHECK_ERR(sg_dist_step(d), SG_ERR_STATE, "was not set");
  free(x);
  /* fc1 is on stage 0, fc4 on the last stage. */
  float w[64 * 32];
  if (rank != 0) {
    CHECK_ERR(sg_dist_read(d, "fc1.weight", w, sizeof w), SG_ERR_NOT_FOUND, "is on pipeline stage 0");
    CHECK_ERR(sg_dist_read(d, "fc1.weight.momentum_buffer", w, sizeof w), SG_ERR_NOT_FOUND,
              "is on pipeline stage 0");
  }
  if (rank != stages - 1) {
    char want[64];
    snprintf(want, sizeof want, "is on pipeline stage %d", stages - 1);
    CHECK_ERR(sg_dist_read(d, "fc4.bias", w, 40), SG_ERR_NOT_FOUND, want);
  }
  printf("stage %d: usage errors reported without communicating\n", rank);
}

/* The opposite of slice_part(): the whole tensor from every rank's part (all[r]). */
static void unslice(const float *all, const sg_tensor_info *info, int axis, int ways, float *full) {
  int64_t outer = 1, inner = 1, n = info->dims[axis], part = n / ways;
  for (int i = 0; i < axis; i++) outer *= info->dims[i];
  for (int i = axis + 1; i < info->ndim; i++) inner *= info->dims[i];
  size_t per_rank = (size_t)(info->numel / ways);
  for (int r = 0; r < ways; r++)
    for (int64_t o = 0; o < outer; o++)
      memcpy(full + (o * n + (int64_t)r * part) * inner,
             all + (size_t)r * per_rank + (size_t)(o * part * inner), sizeof(float) * (size_t)(part * inner));
}

/* The split axis of a tensor of the training graph: its parameter's (a
 * momentum buffer is split as its parameter is). */
static int train_axis(const sg_tp_plan *plan, const model *m, const char *name) {
  char base[256];
  snprintf(base, sizeof base, "%s", name);
  char *suffix = strstr(base, ".momentum_buffer");
  if (suffix) *suffix = '\0';
  sg_tensor t;
  if (sg_graph_find_tensor(m->fwd, base, &t) != SG_OK) return -1;
  return split_axis(plan, m->fwd, base);
}

/* Lockstep (ResNet-50 under tensor parallelism): the reference takes the
 * distributed run's whole state before each step, so each step is compared
 * on its own. ResNet-50 at this size is chaotic in floating point
 * (docs/dist.md, "Equivalence with one process"): the split's partial sums
 * round differently in the last bit, and free-running runs part ways after
 * 2-3 steps whatever the runtime does. Split tensors are gathered over `c`;
 * a stage's tensors are broadcast from it (pipelines run free, but the
 * function serves both). */
static void sync_reference(const model *m, const sg_graph *ref_g, sg_session *ref, sg_dist *d,
                           const sg_tp_plan *plan, sg_comm *c, int ways) {
  for (int32_t t = 0; t < sg_graph_num_tensors(ref_g); t++) {
    sg_tensor_info a;
    OK(sg_graph_tensor_info(ref_g, (sg_tensor){t}, &a));
    if (a.role != SG_ROLE_PARAMETER && a.role != SG_ROLE_STATE && a.role != SG_ROLE_OPTIMIZER_STATE) continue;
    int axis = train_axis(plan, m, a.name);
    float *full = malloc(a.nbytes), *all = malloc(a.nbytes), *mine = malloc(a.nbytes);
    CHECK(full && all && mine, "out of memory");
    if (plan == NULL) { /* pipeline: the stage that holds it sends it to everybody */
      sg_status st = sg_dist_read(d, a.name, full, a.nbytes);
      CHECK(st == SG_OK || st == SG_ERR_NOT_FOUND, "'%s': %s", a.name, sg_status_str(st));
      int32_t owner = st == SG_OK ? sg_dist_rank(d) + 1 : 0;
      OK(sg_comm_allreduce(c, &owner, &owner, 1, SG_I32, SG_REDUCE_MAX));
      CHECK(owner > 0, "no stage holds '%s'", a.name);
      OK(sg_comm_broadcast(c, full, (size_t)a.numel, SG_F32, owner - 1));
    } else if (axis < 0) {
      OK(sg_dist_read(d, a.name, full, a.nbytes));
    } else {
      OK(sg_dist_read(d, a.name, mine, a.nbytes / (size_t)ways));
      OK(sg_comm_allgather(c, mine, all, (size_t)a.numel / (size_t)ways, SG_F32));
      unslice(all, &a, axis, ways, full);
    }
    OK(sg_session_write(ref, a.name, full, a.nbytes));
    free(full);
    free(all);
    free(mine);
  }
}

/* Step `step` of the reference on the whole batch (its loss returned) and of the job on this copy's part
 * (`replica`; odd steps bind the inputs, even ones copy them). */
static float step_both(const model *full, sg_session *ref, const model *m, sg_dist *d, int step,
                       int replica) {
  float ref_loss;
  feed(full, NULL, ref, step, 0, full->batch);
  OK(sg_session_step(ref));
  OK(sg_session_read(ref, "loss", &ref_loss, sizeof ref_loss));
  if (step % 2) feed_bound(m, d, step, replica * m->batch, m->batch);
  else feed(m, d, NULL, step, replica * m->batch, m->batch);
  OK(sg_dist_step(d));
  return ref_loss;
}

/* The run's worst figure of compare() so far, and its tensor. */
static double run_worst;
static char worst_name[256] = "-";

/* Every parameter this rank holds against the reference; the worst
 * per-tensor relative error. *held counts them, *repl_bytes the bytes of
 * the whole (replicated) ones. */
static double compare(const model *m, sg_session *ref, sg_dist *d, const sg_tp_plan *plan, int pipeline,
                      int ways, int rank, int verbose, int64_t *held, int64_t *n_params, size_t *repl_bytes) {
  double worst = 0;
  *held = *n_params = 0;
  *repl_bytes = 0;
  for (int32_t t = 0; t < sg_graph_num_tensors(m->fwd); t++) {
    sg_tensor_info a;
    OK(sg_graph_tensor_info(m->fwd, (sg_tensor){t}, &a));
    if (a.role != SG_ROLE_PARAMETER) continue;
    ++*n_params;
    float *want = malloc(a.nbytes), *mine = malloc(a.nbytes), *ref_part = malloc(a.nbytes);
    CHECK(want && mine && ref_part, "out of memory");
    OK(sg_session_read(ref, a.name, want, a.nbytes));
    int axis = split_axis(plan, m->fwd, a.name);
    size_t bytes = axis >= 0 ? a.nbytes / (size_t)ways : a.nbytes;
    sg_status st = sg_dist_read(d, a.name, mine, bytes);
    if (st == SG_ERR_NOT_FOUND && pipeline) {
      CHECK(strstr(sg_last_error(), "pipeline stage") != NULL, "'%s': %s", a.name, sg_last_error());
    } else {
      OK(st);
      if (axis >= 0) slice_part(want, &a, axis, ways, rank, ref_part);
      else memcpy(ref_part, want, a.nbytes);
      double e = rel_diff(mine, ref_part, (int64_t)(bytes / 4));
      if (verbose)
        printf("rank %d: %-32s %s max rel diff %.3g\n", rank, a.name, axis >= 0 ? "split" : "whole", e);
      CHECK(e <= TOL, "'%s' differs from the single-process run by %.3g", a.name, e);
      if (e > run_worst) run_worst = e, snprintf(worst_name, sizeof worst_name, "%s", a.name);
      worst = fmax(worst, e);
      ++*held;
      if (axis < 0) *repl_bytes += a.nbytes;
    }
    free(want);
    free(mine);
    free(ref_part);
  }
  return worst;
}

/* The timeline (collective): rank 0 writes every rank's steps and transfers. */
static void check_trace(sg_dist *d, const char *path, int pipeline, int rank, int ways) {
  OK(sg_dist_write_trace(d, path));
  if (rank != 0) return;
  FILE *f = fopen(path, "r");
  CHECK(f != NULL, "no trace at %s", path);
  static char text[1 << 20];
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = '\0';
  fclose(f);
  char last[32], want[64];
  snprintf(last, sizeof last, "\"rank %d\"", ways - 1);
  snprintf(want, sizeof want, "%s", pipeline ? "pipeline send to rank 1" : "tensor allreduce");
  const char *need[] = {last,
                        "\"step 5\"",
                        "consistency check",
                        want,
                        pipeline ? "pipeline receive from rank 0" : "tensor allreduce",
                        "loss allreduce"};
  for (int i = 0; i < 6; i++)
    CHECK(strstr(text, need[i]) != NULL || (!pipeline && i == 5), "trace %s lacks %s", path, need[i]);
  printf("rank 0: trace %s (%zu bytes) has every rank's steps and transfers\n", path, n);
}

/* The single-process reference of the whole model (one thread), compiled, before any step. */
static sg_session *reference_session(const model *full, sg_graph **g) {
  *g = training_graph(full);
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sp.threads = 1;
  sg_session *ref;
  OK(sg_session_create(*g, &sp, &ref));
  OK(sg_session_compile(ref));
  return ref;
}

/* What a run of the parts and its reference leave: the reference, both models, the bound inputs. */
static void free_run(sg_session *ref, sg_graph *ref_g, model *m, model *full) {
  sg_session_destroy(ref);
  sg_graph_destroy(ref_g);
  sg_graph_destroy(m->fwd);
  sg_graph_destroy(full->fwd);
  free(bound_x);
  free(bound_y);
  bound_x = NULL, bound_y = NULL;
}

/* pipeline K (> 1) or tensor T (> 1); with data D > 1 (pipeline only) D
 * copies of the pipeline, each fed its part of the global batch. */
static int run_parts(int resnet, int pipeline, int micro, const char *trace, int data) {
  model m, full; /* this replica's batch; the whole batch, for the reference */
  int global = resnet ? 8 : 16;
  if (resnet) build_resnet(&m, global / data), build_resnet(&full, global);
  else build_mlp(&m, global / data), build_mlp(&full, global);
  float ref_loss[STEPS], loss[STEPS];
  sg_graph *ref_g;
  sg_session *ref = reference_session(&full, &ref_g);
  if (m.resnet) OK(resnet50_init_session(ref_g, ref, SEED));

  sg_dist_params dp = SG_DIST_PARAMS_INIT;
  dp.threads = 1;
  /* Rank 0 computes the single-process reference between steps: under the
   * sanitizers on 2 loaded cores its scheduler can miss heartbeats for over a
   * second, and detection is not what these tests are about (model_death_*). */
  if (m.resnet) dp.dead_ms = 10000;
  int world = env_world();
  int stages = world / data;
  if (pipeline) dp.pipeline = stages, dp.micro_batches = micro, dp.data = data;
  else dp.tensor = stages, dp.data = data, dp.micro_batches = micro; /* "stages": the group, K or T */
  dp.trace = trace != NULL;
  sg_dist *d = create_momentum(&m, &dp);
  int rank = sg_dist_rank(d), ways = sg_dist_size(d);
  CHECK(ways == world, "world %d, sg_dist_size %d", world, ways);
  sg_tp_plan *plan = NULL;
  if (!pipeline) {
    sg_tp_params tpp = SG_TP_PARAMS_INIT;
    tpp.ways = stages;
    OK(sg_tp_plan_create(m.fwd, &tpp, &plan));
  }
  /* ResNet-50 under tensor parallelism sums the split in another order than
   * one process: lockstep (see sync_reference). A pipeline computes the same
   * bits as one process (batch norm and pooling run in one layout whatever
   * the storage, sg__dk_compute_md), so it runs free. With data 1: the side
   * communicator's gathers span one group. */
  int lockstep = resnet && !pipeline;
  /* A second communicator beside the sg_dist's (epoch 1: its own store keys). */
  sg_comm *side = lockstep ? rejoin() : NULL;
  init_weights(&m, d, plan, stages, rank % stages);
  if (pipeline && !resnet) pp_usage_errors(&m, d, rank % stages, stages);
  int replica = rank / stages;
  double step_ms = 0, worst = 0;
  int64_t held = 0, n_params = 0;
  size_t repl_bytes = 0;
  for (int step = 0; step < STEPS; step++) {
    if (lockstep) sync_reference(&m, ref_g, ref, d, plan, side, stages);
    feed(&full, NULL, ref, step, 0, full.batch);
    OK(sg_session_step(ref));
    OK(sg_session_read(ref, "loss", &ref_loss[step], sizeof(float)));
    if (step % 2) feed_bound(&m, d, step, replica * m.batch, m.batch);
    else feed(&m, d, NULL, step, replica * m.batch, m.batch);
    OK(sg_dist_step(d));
    sg_dist_stats st = SG_DIST_STATS_INIT;
    OK(sg_dist_get_stats(d, &st));
    CHECK(st.steps == (uint64_t)step + 1 && st.world_size == ways, "stats: %llu steps, world %d",
          (unsigned long long)st.steps, st.world_size);
    loss[step] = st.loss_mean;
    if (step > 0) step_ms += st.step_ms;
    double e = fabs((double)loss[step] - ref_loss[step]) / fabs((double)ref_loss[step]);
    CHECK(e <= TOL, "step %d: loss_mean %.9g, single process %.9g", step, loss[step], ref_loss[step]);
    if (lockstep || step == STEPS - 1)
      worst = fmax(worst, compare(&m, ref, d, plan, pipeline, stages, rank % stages,
                                  step == STEPS - 1 && !resnet, &held, &n_params, &repl_bytes));
  }
  if (trace != NULL) check_trace(d, trace, pipeline, rank, ways);
  uint64_t h1, h2;
  OK(sg_dist_params_hash(d, &h1));
  OK(sg_dist_params_hash(d, &h2));
  CHECK(h1 == h2, "params hash not stable");
  /* Replicated parameters of a tensor group, for the bitwise check below. */
  unsigned char *repl = malloc(repl_bytes ? repl_bytes : 1);
  CHECK(repl != NULL, "out of memory");
  size_t off = 0;
  for (int32_t t = 0; t < sg_graph_num_tensors(m.fwd) && !pipeline; t++) {
    sg_tensor_info a;
    OK(sg_graph_tensor_info(m.fwd, (sg_tensor){t}, &a));
    if (a.role != SG_ROLE_PARAMETER || split_axis(plan, m.fwd, a.name) >= 0) continue;
    OK(sg_dist_read(d, a.name, repl + off, a.nbytes));
    off += a.nbytes;
  }
  OK(sg_dist_destroy(d));

  sg_comm *c = side ? side : rejoin();
  int64_t sum = held;
  OK(sg_comm_allreduce(c, &sum, &sum, 1, SG_I64, SG_REDUCE_SUM));
  if (pipeline)
    CHECK(sum == n_params * data, "the stages hold %lld parameters, the model has %lld (x %d replicas)",
          (long long)sum, (long long)n_params, data);
  else CHECK(sum == n_params * ways, "%lld parameter reads over %d ranks", (long long)sum, ways);
  int n_repl_equal = 0;
  if (!pipeline) {
    unsigned char *all = malloc(repl_bytes * (size_t)ways + 1);
    CHECK(all != NULL, "out of memory");
    OK(sg_comm_allgather(c, repl, all, repl_bytes / 4, SG_I32)); /* f32 bits */
    for (int r = 0; r < ways; r++)
      CHECK(memcmp(all + (size_t)r * repl_bytes, repl, repl_bytes) == 0,
            "replicated parameters differ between rank %d and rank %d", rank, r);
    n_repl_equal = 1;
    free(all);
  }
  float w = (float)worst;
  OK(sg_comm_allreduce(c, &w, &w, 1, SG_F32, SG_REDUCE_MAX));
  printf(
      "rank %d: %s %s=%d x data=%d, M=%d%s: %lld of %lld parameters here, worst rel diff %.3g (%s; all ranks "
      "%.3g), loss %.6f -> %.6f (reference %.6f -> %.6f), steps 2-%d %.1f ms each%s\n",
      rank, resnet ? "ResNet-50" : "MLP", pipeline ? "pipeline" : "tensor", stages, data, micro,
      lockstep ? " (lockstep)" : " (free-running)", (long long)held, (long long)n_params, worst, worst_name,
      w, loss[0], loss[STEPS - 1], ref_loss[0], ref_loss[STEPS - 1], STEPS, step_ms / (STEPS - 1),
      n_repl_equal ? ", replicated parameters bitwise equal on every rank" : "");
  OK(sg_comm_destroy(c));
  free(repl);
  sg_tp_plan_destroy(plan);
  free_run(ref, ref_g, &m, &full);
  return 0;
}

/* ---- repartitioning a running pipeline from its profile ----------------------------- */

#define RECUT_MAX_STEPS 6000

/* An N/data-stage pipeline of 4 micro-batches whose rank 1 computes 4 times
 * slower from step 2 on (a 'slow' fault), with the profile's thresholds low
 * enough for the MLP's millisecond steps: the ranks must re-cut the stages
 * at a step boundary (sg_dist_stats.repartitions), move the state that
 * changes stage, and go on computing what one process computes on the same
 * global batch: every parameter held by exactly one stage afterwards, each
 * within TOL of the reference, the loss too. Runs until 3 steps after the
 * first switch (the same step on every rank: the decision is collective). */
static int run_recut(int data) {
  model m, full;
  int global = 16;
  build_mlp(&m, global / data), build_mlp(&full, global);
  sg_graph *ref_g;
  sg_session *ref = reference_session(&full, &ref_g);
  sg_dist_params dp = SG_DIST_PARAMS_INIT;
  dp.threads = 1;
  int world = env_world(), stages = world / data;
  dp.pipeline = stages, dp.micro_batches = 4, dp.data = data;
  dp.inject = "slow:rank=1,step=2,factor=4";
  dp.repartition_p99_ms = 0.001;
  dp.repartition_cpu = 0.01;
  sg_dist *d = create_momentum(&m, &dp);
  int rank = sg_dist_rank(d), replica = rank / stages;
  init_weights(&m, d, NULL, stages, rank % stages);
  sg_dist_stats st = SG_DIST_STATS_INIT;
  int step = 0, after = -1;
  float ref_loss = 0;
  for (; step < RECUT_MAX_STEPS && after < 3; step++) {
    ref_loss = step_both(&full, ref, &m, d, step, replica);
    OK(sg_dist_get_stats(d, &st));
    if (st.repartitions > 0) after++;
  }
  CHECK(st.repartitions >= 1, "no repartition in %d steps (rank 1 slowed 4x from step 2)", RECUT_MAX_STEPS);
  /* One copy slowed 4x moves a linear layer at least; with two copies (the stage's times averaged, 2.5x)
   * the re-cut may move only ops without state. */
  CHECK(data > 1 || st.migrated_bytes_total > 0, "a re-cut moved no state");
  CHECK(st.steps_per_s_before_repartition > 0, "no steps/s before the switch");
  double le = fabs((double)st.loss_mean - ref_loss) / fabs((double)ref_loss);
  CHECK(le <= TOL, "step %d: loss_mean %.9g, single process %.9g", step, st.loss_mean, ref_loss);
  int64_t held = 0, n_params = 0;
  size_t repl_bytes = 0;
  double worst = compare(&m, ref, d, NULL, 1, stages, rank % stages, 0, &held, &n_params, &repl_bytes);
  OK(sg_dist_destroy(d));
  sg_comm *c = rejoin();
  int64_t sum = held;
  OK(sg_comm_allreduce(c, &sum, &sum, 1, SG_I64, SG_REDUCE_SUM));
  CHECK(sum == n_params * data, "after the re-cut the stages hold %lld parameters, the model has %lld (x %d)",
        (long long)sum, (long long)n_params, data);
  printf(
      "rank %d: pipeline %d x data %d re-cut %d time(s) by step %d (rank 1 slowed 4x): %lld bytes moved in "
      "all, %lld of %lld parameters here, worst rel diff %.3g, steps/s %.0f before the switch, %.0f after\n",
      rank, stages, data, st.repartitions, step, (long long)st.migrated_bytes_total, (long long)held,
      (long long)n_params, worst, st.steps_per_s_before_repartition, st.steps_per_s);
  OK(sg_comm_destroy(c));
  free_run(ref, ref_g, &m, &full);
  return 0;
}

/* ---- pipeline x tensor ------------------------------------------------------------------- */

/* rel_diff (compare.h) in compare_part's signature. */

/* ||a - b|| / max(||b||, L2_FLOOR * sqrt(n)) over n floats: relative, except for a tensor whose values are
 * all but zero (root mean square under L2_FLOOR), which is compared absolutely at that scale. Why: a
 * batch-norm bias that starts at 0 and sits in front of the next batch norm gets gradients of ~1e-7, so after
 * a few steps its norm is ~1e-6 and a last-bit difference in a summation order (a tensor group split 2 ways
 * before a heal and 1 way after) is 1e-2 of it, while its absolute difference (~1e-8) is four orders of
 * magnitude under the float rounding of the weights (RMS >= 1e-2) it is trained with. */
#define L2_FLOOR 1e-3
static double l2_rel(const float *a, const float *b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; i++) {
    double e = (double)a[i] - b[i];
    num += e * e;
    den += (double)b[i] * b[i];
  }
  double floor = L2_FLOOR * L2_FLOOR * (double)n;
  return sqrt(num / (den > floor ? den : floor));
}

/* sync_reference for a pipeline of tensor groups (one copy): a whole tensor goes from the first rank that
 * holds it to everybody; a split one (ResNet-50's last layer and its momentum, split as the whole graph's
 * plan says: the last stage's plan is the same there) is gathered from the T consecutive ranks of its
 * stage. */
static void sync_pptp(const model *m, const sg_graph *ref_g, sg_session *ref, sg_dist *d,
                      const sg_tp_plan *plan, sg_comm *c, int T) {
  int world = sg_comm_size(c), me = sg_comm_rank(c);
  for (int32_t t = 0; t < sg_graph_num_tensors(ref_g); t++) {
    sg_tensor_info a;
    OK(sg_graph_tensor_info(ref_g, (sg_tensor){t}, &a));
    if (a.role != SG_ROLE_PARAMETER && a.role != SG_ROLE_STATE && a.role != SG_ROLE_OPTIMIZER_STATE) continue;
    int axis = train_axis(plan, m, a.name);
    size_t bytes = axis < 0 ? a.nbytes : a.nbytes / (size_t)T;
    float *full = malloc(a.nbytes), *all = calloc((size_t)world, bytes), *mine = calloc(1, bytes);
    CHECK(full && all && mine, "out of memory");
    sg_status st = sg_dist_read(d, a.name, axis < 0 ? full : mine, bytes);
    CHECK(st == SG_OK || st == SG_ERR_NOT_FOUND, "'%s': %s", a.name, sg_status_str(st));
    int32_t first = st == SG_OK ? me : world;
    OK(sg_comm_allreduce(c, &first, &first, 1, SG_I32, SG_REDUCE_MIN));
    CHECK(first < world, "no rank holds '%s'", a.name);
    if (axis < 0) {
      OK(sg_comm_broadcast(c, full, (size_t)a.numel, SG_F32, first));
    } else {
      OK(sg_comm_allgather(c, mine, all, bytes / 4, SG_F32));
      unslice(all + (size_t)first * (bytes / 4), &a, axis, T, full);
    }
    OK(sg_session_write(ref, a.name, full, a.nbytes));
    free(full);
    free(all);
    free(mine);
  }
}

/* The MLP (or ResNet-50) as a pipeline of world / (T x data) stages, each a tensor group of T shares, with
 * M micro-batches (and `data` copies, each fed its part of the global batch): every step's loss and, at the
 * end, every parameter (each rank's stage's, whole or its slice) against one process on the whole batch;
 * afterwards every parameter is held by exactly T ranks of each copy. */
static int run_pptp(int resnet, int T, int micro, int data) {
  model m, full;
  int global = resnet ? 8 : 16;
  if (resnet) build_resnet(&m, global / data), build_resnet(&full, global);
  else build_mlp(&m, global / data), build_mlp(&full, global);
  sg_graph *ref_g;
  sg_session *ref = reference_session(&full, &ref_g);
  if (m.resnet) OK(resnet50_init_session(ref_g, ref, SEED));
  int world = env_world(), K = world / (T * data);
  CHECK(K >= 2 && K * T * data == world, "world %d is not data %d x (pipeline >= 2) x tensor %d", world, data,
        T);
  sg_dist_params dp = SG_DIST_PARAMS_INIT;
  dp.threads = 1;
  dp.pipeline = K, dp.tensor = T, dp.data = data, dp.micro_batches = micro;
  if (m.resnet) dp.dead_ms = 10000; /* as run_parts: rank 0 computes the reference between steps */
  sg_dist *d = create_momentum(&m, &dp);
  int rank = sg_dist_rank(d), replica = rank / (K * T), share = rank % T;
  /* ResNet-50's weights have no initializers: the whole-graph plan's split of its last layer is the last
   * stage's (the only matmul with a parameter weight). */
  sg_tp_plan *plan = NULL;
  sg_tp_params tpp = SG_TP_PARAMS_INIT;
  tpp.ways = T;
  OK(sg_tp_plan_create(m.fwd, &tpp, &plan));
  init_weights(&m, d, plan, T, share);
  /* ResNet-50 runs in lockstep with the reference, as under tensor parallelism (sync_reference says why). */
  sg_comm *side = resnet ? rejoin() : NULL;
  double worst_loss = 0;
  float loss0 = 0, lossN = 0;
  for (int step = 0; step < STEPS; step++) {
    if (side != NULL) sync_pptp(&m, ref_g, ref, d, plan, side, T);
    float ref_loss = step_both(&full, ref, &m, d, step, replica);
    sg_dist_stats st = SG_DIST_STATS_INIT;
    OK(sg_dist_get_stats(d, &st));
    CHECK(st.steps == (uint64_t)step + 1, "stats: %llu steps", (unsigned long long)st.steps);
    double e = fabs((double)st.loss_mean - ref_loss) / fabs((double)ref_loss);
    CHECK(e <= TOL, "step %d: loss_mean %.9g, single process %.9g", step + 1, st.loss_mean, ref_loss);
    worst_loss = fmax(worst_loss, e);
    if (step == 0) loss0 = st.loss_mean;
    lossN = st.loss_mean;
  }
  double worst = 0;
  int64_t held = 0, n_params = 0, n_split = 0;
  char at[256] = "-";
  for (int32_t t = 0; t < sg_graph_num_tensors(m.fwd); t++) {
    sg_tensor_info a;
    OK(sg_graph_tensor_info(m.fwd, (sg_tensor){t}, &a));
    if (a.role != SG_ROLE_PARAMETER) continue;
    n_params++;
    float *want = malloc(a.nbytes);
    CHECK(want != NULL, "out of memory");
    OK(sg_session_read(ref, a.name, want, a.nbytes));
    int split;
    double e = compare_dist_part(d, &a, want, T, share, NULL, &split);
    free(want);
    if (e < 0) continue;
    CHECK(e <= TOL, "'%s' (%s) differs from the single-process run by %.3g", a.name,
          split ? "a slice" : "whole", e);
    held++, n_split += split;
    if (e >= worst) worst = e, snprintf(at, sizeof at, "%s", a.name);
  }
  uint64_t h1, h2;
  OK(sg_dist_params_hash(d, &h1));
  OK(sg_dist_params_hash(d, &h2));
  CHECK(h1 == h2, "params hash not stable");
  OK(sg_dist_destroy(d));
  sg_tp_plan_destroy(plan);
  sg_comm *c = side != NULL ? side : rejoin();
  int64_t sum = held;
  OK(sg_comm_allreduce(c, &sum, &sum, 1, SG_I64, SG_REDUCE_SUM));
  CHECK(sum == n_params * T * data,
        "the ranks hold %lld parameter parts, expected %lld (%d shares x %d copies)", (long long)sum,
        (long long)(n_params * T * data), T, data);
  OK(sg_comm_destroy(c));
  printf("rank %d: %s pipeline=%d x tensor=%d x data=%d, M=%d: %lld of %lld parameters here (%lld split), "
         "worst rel diff %.3g (%s), loss %.6f -> %.6f, worst loss rel diff %.3g\n",
         rank, resnet ? "ResNet-50" : "MLP", K, T, data, micro, (long long)held, (long long)n_params,
         (long long)n_split, worst, at, loss0, lossN, worst_loss);
  free_run(ref, ref_g, &m, &full);
  return 0;
}

/* ---- healing a pipeline ------------------------------------------------------------------ */

#define HEAL_TOL 1e-5

/* Tensor t's values from a failure-free run's DIR/params.<rank> files (records: tensor id, bytes, the
 * bytes; every rank writes the parameters it holds whole) into out; 0 when no rank held it whole. */
static int ref_param(const char *dir, int32_t t, float *out, size_t bytes) {
  int found = 0;
  for (int r = 0; r < 64 && !found; r++) {
    char path[512];
    snprintf(path, sizeof path, "%s/params.%d", dir, r);
    FILE *f = fopen(path, "rb");
    if (f == NULL) continue;
    int32_t id;
    uint64_t n;
    while (!found && fread(&id, sizeof id, 1, f) == 1 && fread(&n, sizeof n, 1, f) == 1) {
      if (id == t) {
        CHECK(n == bytes, "%s: tensor %d has %llu bytes, expected %zu", path, t, (unsigned long long)n,
              bytes);
        found = fread(out, bytes, 1, f) == 1;
        CHECK(found, "%s is truncated", path);
      } else {
        CHECK(fseek(f, (long)n, SEEK_CUR) == 0, "%s is malformed", path);
      }
    }
    fclose(f);
  }
  return found;
}

/* A parameter this rank holds whole (mine, `bytes`): written to the failure-free run's file `saved` (records:
 * tensor id, bytes, the bytes), or, with `refdir`, compared with that run's value when some rank held it
 * whole there (within HEAL_TOL; *e gets the difference, ++*n counts it; scratch: room for `bytes`). Whether
 * it was compared. */
static bool vs_failure_free(FILE *saved, const char *refdir, int32_t t, const char *name, const float *mine,
                            size_t bytes, float *scratch, double *e, int *n) {
  if (saved != NULL)
    CHECK(fwrite(&t, sizeof t, 1, saved) == 1 &&
              fwrite(&(uint64_t){bytes}, sizeof(uint64_t), 1, saved) == 1 &&
              fwrite(mine, bytes, 1, saved) == 1,
          "writing the parameters");
  if (refdir == NULL || !ref_param(refdir, t, scratch, bytes)) return false;
  *e = l2_rel(mine, scratch, (int64_t)(bytes / 4));
  const char *tol_env = getenv("HEAL_REF_TOL");
  const double tol = tol_env != NULL ? strtod(tol_env, NULL) : HEAL_TOL;
  CHECK(*e <= tol, "'%s' differs from the failure-free run of the same job by %.3g (L2, relative)", name, *e);
  ++*n;
  return true;
}

/* The copies in the global page table (model_copy.c) at the end of a run, the layout being `ring`-member
 * rings of consecutive ranks: the slot this rank wrote its latest generation into is on the next member's
 * node, open at the generation's number + 2, and holds, read back remotely, this rank's copy; the slot of
 * that generation this rank holds is on its own node at the same version, is the very memory the recovery
 * would read the previous member's copy from, and read at another version gives SG_ERR_STALE. With rings
 * of one member there are no copies. */
static void check_copies(sg_dist *d, int ring) {
  sg__model_copy_probe p;
  sg_status rs = sg__model_copy_probe_get(d, &p);
  int r = sg_dist_rank(d), next = r / ring * ring + (r % ring + 1) % ring;
  if (ring < 2) {
    CHECK(rs == SG_ERR_STATE, "rings of one member: the probe says %s", sg_status_str(rs));
    sg_clear_error();
    return;
  }
  OK(rs);
  uint32_t want = (uint32_t)p.label + 2;
  CHECK(p.push_node == next && p.push_pay_node == next,
        "copy slot %s is on node %d, its payload on %d, not %d", p.push_gva, p.push_node, p.push_pay_node,
        next);
  CHECK(p.push_open && p.push_version == want,
        "copy slot %s: version %u (%s), want generation %" PRIu64 " + 2", p.push_gva, p.push_version,
        p.push_open ? "readable" : "closed", p.label);
  CHECK(p.push_matches, "copy slot %s on rank %d does not hold this rank's copy of generation %" PRIu64,
        p.push_gva, next, p.label);
  CHECK(p.held_node == r && p.held_version == want && p.prev_in_slot,
        "held slot of generation %" PRIu64 ": node %d, version %u, %s", p.label, p.held_node, p.held_version,
        p.prev_in_slot ? "in place" : "not the copy the recovery reads");
  CHECK(p.held_stale == SG_ERR_STALE, "held slot read at version %u: %s, not SG_ERR_STALE", want + 2,
        sg_status_str(p.held_stale));
  printf("COPIES rank %d: generation %" PRIu64 " in slot %s on rank %d at version %u, read back equal; the "
         "previous member's in this rank's slot, in place\n",
         r, p.label, p.push_gva, next, p.push_version);
}

/* HEAL_SAVE_DIR / HEAL_REF_DIR: the failure-free run's loss of each step (DIR/losses, rank 0's). */
static void ref_losses(const char *dir, float *loss, int steps, bool write) {
  char path[512];
  snprintf(path, sizeof path, "%s/losses", dir);
  FILE *f = fopen(path, write ? "wb" : "rb");
  CHECK(f != NULL, "cannot open %s", path);
  size_t n =
      write ? fwrite(loss, sizeof *loss, (size_t)steps, f) : fread(loss, sizeof *loss, (size_t)steps, f);
  CHECK(n == (size_t)steps && fclose(f) == 0, "%s: %zu of %d losses", path, n, steps);
}

/* A pipeline of one stage per rank (4 micro-batches; ResNet-50: 1) or a tensor group of one share per
 * rank, with heal 1, under a fault plan from `sgrt launch --inject` (SG_INJECT): every step must complete
 * on every survivor (RPO 0: the step count and the loss of each step are the failure-free run's), and the
 * parameters each survivor holds at the end (a stage's, or its slice of a split one under the group's
 * current split) must be within 1e-5 (l2_rel: L2, relative, per tensor) of one process trained on the same
 * global batches. HEAL_STEPS steps (12). Prints "HEALED rank R: ... recoveries N" for run_model_heal.sh; a
 * rank the others healed around while it lived exits 75 (SG_DIST_EXIT_EXCLUDED). The tensor group's MLP is 96
 * wide, so that 4, 3 and 2 ways all split it. */
static int run_model_heal(int resnet, int pipeline) {
  model m, full;
  int global = resnet ? 8 : 16;
  /* HEAL_DATA=D: D copies of the pipeline or the group, each fed its part of the global batch. */
  const char *nd = getenv("HEAL_DATA");
  int data = nd ? atoi(nd) : 1, world = env_world();
  CHECK(data >= 1 && world % data == 0 && global % data == 0,
        "HEAL_DATA=%s does not divide the world or batch", nd);
  int width = world / data;
  /* HEAL_TENSOR=T (pipeline): each stage a tensor group of T shares. */
  const char *nt = getenv("HEAL_TENSOR");
  int tensor = pipeline && nt ? atoi(nt) : 1;
  CHECK(tensor >= 1 && width % tensor == 0, "HEAL_TENSOR=%s does not divide the group of %d", nt, width);
  if (!pipeline || tensor > 1) mlp_hidden = 96;
  if (resnet) build_resnet(&m, global / data), build_resnet(&full, global);
  else build_mlp(&m, global / data), build_mlp(&full, global);
  const char *ns = getenv("HEAL_STEPS");
  int steps = ns ? atoi(ns) : 12;
  CHECK(steps >= 1 && steps <= 1000, "HEAL_STEPS=%s is not in 1..1000", ns);
  sg_graph *ref_g;
  sg_session *ref = reference_session(&full, &ref_g);
  if (resnet) OK(resnet50_init_session(ref_g, ref, SEED));
  sg_dist_params dp = SG_DIST_PARAMS_INIT;
  dp.threads = 1;
  dp.data = data, dp.heal = 1;
  /* Batch norm over micro-batches is not batch norm over the batch: ResNet-50 runs one. */
  if (pipeline) dp.pipeline = width / tensor, dp.tensor = tensor, dp.micro_batches = resnet ? 1 : 4;
  else dp.tensor = width;
  sg_dist *d = create_momentum(&m, &dp);
  int rank = sg_dist_rank(d), replica = rank / width; /* this rank's copy feeds its part of the batch */
  sg_tp_plan *plan = NULL;
  /* ResNet-50's initial values: a tensor group's slices (a pipeline of tensor groups: ResNet-50's last layer
   * is split in the last stage as the whole graph's plan splits it). */
  int ways0 = pipeline ? tensor : width;
  if (ways0 > 1) {
    sg_tp_params tpp = SG_TP_PARAMS_INIT;
    tpp.ways = ways0;
    OK(sg_tp_plan_create(m.fwd, &tpp, &plan));
  }
  init_weights(&m, d, plan, ways0, rank % ways0);
  sg_tp_plan_destroy(plan);
  plan = NULL;
  sg_dist_stats st = SG_DIST_STATS_INIT;
  /* ResNet-50's tensor split sums its last layer's partial products in another order than one process,
   * which batch norm amplifies (a failure-free 4-way run is 0.04 (L2) from one process on some batch-norm
   * biases after 6 steps: why model_resnet_tp2 runs in lockstep), and copies of ResNet-50 normalise over
   * their own part of the batch: there the failure-free run of the same job is the reference.
   * HEAL_SAVE_DIR=DIR: every rank writes the parameters it holds whole to DIR/params.<rank>, rank 0 the
   * losses; HEAL_REF_DIR=DIR: the losses and the parameters this rank holds whole that some rank held whole
   * there are compared with them (1e-5), and nothing with one process. */
  const char *save = getenv("HEAL_SAVE_DIR"), *refdir = getenv("HEAL_REF_DIR");
  float *losses = calloc((size_t)steps, sizeof *losses);
  CHECK(losses != NULL, "out of memory");
  if (refdir != NULL) ref_losses(refdir, losses, steps, false);
  for (int step = 0; step < steps; step++) {
    float ref_loss;
    feed(&full, NULL, ref, step, 0, full.batch);
    OK(sg_session_step(ref));
    OK(sg_session_read(ref, "loss", &ref_loss, sizeof ref_loss));
    if (refdir != NULL) ref_loss = losses[step];
    if (step % 2) feed_bound(&m, d, step, replica * m.batch, m.batch);
    else feed(&m, d, NULL, step, replica * m.batch, m.batch);
    sg_status rc = sg_dist_step(d);
    OK(sg_dist_get_stats(d, &st));
    if (rc != SG_OK) {
      fprintf(stderr, "rank %d: step %d: %s\n", st.original_rank, step + 1, sg_last_error());
      int excluded = st.excluded;
      sg_dist_destroy(d);
      free(losses);
      free_run(ref, ref_g, &m, &full);
      return excluded ? SG_DIST_EXIT_EXCLUDED : 1;
    }
    CHECK(st.steps == (uint64_t)step + 1, "after step %d: %llu steps completed", step + 1,
          (unsigned long long)st.steps);
    losses[step] = st.loss_mean;
    double e = fabs((double)st.loss_mean - ref_loss) / fabs((double)ref_loss);
    CHECK(save != NULL || e <= HEAL_TOL, "step %d: loss_mean %.9g, %s %.9g", step + 1, st.loss_mean,
          refdir ? "the failure-free run" : "single process", ref_loss);
  }
  if (save != NULL && sg_dist_rank(d) == 0) ref_losses(save, losses, steps, true);
  free(losses);
  /* The parameters this rank holds now (a tensor group's: its slice under the current split), against the
   * reference. */
  int ways = sg_dist_size(d) / data, me = sg_dist_rank(d) % ways;
  /* A group with copies may have healed down to one share per copy: it holds the whole model (no plan). */
  if (!pipeline && ways > 1) {
    sg_tp_params tpp = SG_TP_PARAMS_INIT;
    tpp.ways = ways;
    OK(sg_tp_plan_create(m.fwd, &tpp, &plan));
  }
  FILE *saved = NULL;
  if (save != NULL) {
    char path[512];
    snprintf(path, sizeof path, "%s/params.%d", save, st.original_rank);
    CHECK((saved = fopen(path, "wb")) != NULL, "cannot write %s", path);
  }
  double worst = 0, tol = refdir != NULL || save != NULL ? INFINITY : HEAL_TOL;
  int held = 0, split = 0, vs_ref = 0;
  char worst_at[256] = "-";
  for (int32_t t = 0; t < sg_graph_num_tensors(m.fwd); t++) {
    sg_tensor_info a;
    OK(sg_graph_tensor_info(m.fwd, (sg_tensor){t}, &a));
    if (a.role != SG_ROLE_PARAMETER) continue;
    float *want = malloc(a.nbytes), *mine = malloc(a.nbytes), *part = malloc(a.nbytes);
    CHECK(want && mine && part, "out of memory");
    OK(sg_session_read(ref, a.name, want, a.nbytes));
    if (tensor > 1) { /* stages of tensor groups: split by each stage's own plan (compare_part) */
      int tn = sg_dist_size(d) / (data * (width / tensor)), sp;
      double e = compare_dist_part(d, &a, want, tn, sg_dist_rank(d) % tn, l2_rel, &sp);
      CHECK(e <= tol, "'%s' differs from the failure-free single-process run by %.3g (L2, relative)", a.name,
            e);
      bool compared = e >= 0 && refdir == NULL && save == NULL;
      if (e >= 0) held++, split += sp;
      if (e >= 0 && !sp && (saved != NULL || refdir != NULL)) {
        OK(sg_dist_read(d, a.name, mine, a.nbytes));
        compared |= vs_failure_free(saved, refdir, t, a.name, mine, a.nbytes, part, &e, &vs_ref);
      }
      if (compared && e >= worst) worst = e, snprintf(worst_at, sizeof worst_at, "%s", a.name);
      free(want);
      free(mine);
      free(part);
      continue;
    }
    int axis = split_axis(plan, m.fwd, a.name);
    size_t bytes = axis >= 0 ? a.nbytes / (size_t)ways : a.nbytes;
    if (axis >= 0) slice_part(want, &a, axis, ways, me, part), split++;
    else memcpy(part, want, a.nbytes);
    sg_status rs = sg_dist_read(d, a.name, mine, bytes);
    if (rs == SG_OK) {
      double e = l2_rel(mine, part, (int64_t)(bytes / 4));
      CHECK(e <= tol, "'%s' differs from the failure-free single-process run by %.3g (L2, relative)", a.name,
            e);
      bool compared = refdir == NULL && save == NULL;
      if (axis < 0) compared |= vs_failure_free(saved, refdir, t, a.name, mine, bytes, part, &e, &vs_ref);
      if (compared && e >= worst) worst = e, snprintf(worst_at, sizeof worst_at, "%s", a.name);
      held++;
    } else {
      CHECK(pipeline && rs == SG_ERR_NOT_FOUND, "reading '%s': %s", a.name, sg_last_error());
    }
    free(want);
    free(mine);
    free(part);
  }
  sg_tp_plan_destroy(plan);
  if (saved != NULL) CHECK(fclose(saved) == 0, "writing the parameters");
  CHECK(refdir == NULL || vs_ref > 0, "no parameter compared with %s", refdir);
  CHECK(st.recoveries == 0 || st.rpo_steps == 0, "RPO %llu steps", (unsigned long long)st.rpo_steps);
  /* The RTO ends where the job resumes, before the step it resumes with ends. */
  CHECK(st.recoveries == 0 || (st.detection_ms <= st.rto_ms && st.rto_ms > 0 && st.rto_ms <= st.rto_step_ms),
        "recovery times out of order: detection %.1f ms, RTO %.1f ms, to the step's end %.1f ms",
        st.detection_ms, st.rto_ms, st.rto_step_ms);
  printf(
      "HEALED rank %d (now %d of %d): %s %s, %d steps, recoveries %d, epoch %d, %d parameters held (%d split "
      "%d ways), worst L2 rel diff %.3g (%s; vs %s), detection %.1f ms, RTO %.1f ms (%.1f ms to the "
      "step's end), %llu steps redone, copy %zu bytes %.2f ms per step\n",
      st.original_rank, me, ways, resnet ? "ResNet-50" : "MLP",
      pipeline ? (tensor > 1 ? "pipeline of tensor groups" : "pipeline") : "tensor group", steps,
      st.recoveries, st.epoch, held, split, tensor > 1 ? sg_dist_size(d) / (data * (width / tensor)) : ways,
      worst, worst_at, refdir ? "the failure-free run of the job" : "one process", st.detection_ms, st.rto_ms,
      st.rto_step_ms, (unsigned long long)st.redone_steps, st.replica_bytes, st.replication_ms);
  int tn = tensor > 1 ? sg_dist_size(d) / (data * (width / tensor)) : 1;
  check_copies(d, tn > 1 ? tn : ways);
  OK(sg_dist_destroy(d));
  free_run(ref, ref_g, &m, &full);
  return 0;
}

/* ---- synchronized batch norm ------------------------------------------------------------------- */

/* The worst per-tensor difference of this rank's parameters and running statistics from the reference
 * session's (l2_rel: relative, a tensor whose values are below L2_FLOOR on average taken at that scale),
 * and its tensor. */
/* Each parameter and state tensor of the job against the one-process references: per tensor the
 * closer of the two (L2 relative), worst over the tensors. With ref[1] == NULL only ref[0]. */
static double state_diff(const model *m, sg_session *const ref[2], sg_dist *d, char *at, size_t cap) {
  double worst = 0;
  for (int32_t t = 0; t < sg_graph_num_tensors(m->fwd); t++) {
    sg_tensor_info a;
    OK(sg_graph_tensor_info(m->fwd, (sg_tensor){t}, &a));
    if (a.role != SG_ROLE_PARAMETER && a.role != SG_ROLE_STATE) continue;
    float *want = malloc(a.nbytes), *mine = malloc(a.nbytes);
    CHECK(want && mine, "out of memory");
    if (d != NULL) OK(sg_dist_read(d, a.name, mine, a.nbytes));
    else OK(sg_session_read(ref[1], a.name, mine, a.nbytes));
    double e = INFINITY;
    for (int r = 0; r < (d != NULL ? 2 : 1) && ref[r] != NULL; r++) {
      OK(sg_session_read(ref[r], a.name, want, a.nbytes));
      double er = l2_rel(mine, want, (int64_t)(a.nbytes / 4));
      e = er < e ? er : e;
    }
    if (e >= worst) worst = e, snprintf(at, cap, "%s", a.name);
    free(want);
    free(mine);
  }
  return worst;
}

/* ResNet-50 (width 16, 32x32) on D ranks, each fed its part of a global batch of 8, with
 * sync_batch_norm: every batch norm normalises with the global batch's statistics, so the parameters and
 * the running statistics equal one process's on the whole batch (1e-3, L2 relative per tensor, after 5
 * steps). The same job without it must differ (each rank's statistics over 8 / D samples): the check can
 * fail.
 *
 * "One process's" result is itself only defined to rounding, and this model amplifies rounding: with
 * AVX-512 (16-channel blocks) one process under the blocked layout and under the plain one
 * (SG_CPU_LAYOUT=plain) agree to 3e-6 for 3 steps and then part, 9e-4 after the fourth and 1.2e-2 after
 * the fifth (bn1.bias, layer1.2.bn3.weight: a jump, as when a max-pool or ReLU takes the other side of a
 * near tie, then growth). So there are two references, one per layout, and each tensor is compared with
 * the closer; their own distance is printed. */
static int run_sync_bn(void) {
  int world = env_world(), global = 8;
  CHECK(global % world == 0, "the world of %d does not divide the batch of %d", world, global);
  model m, full;
  build_resnet(&m, global / world), build_resnet(&full, global);
  double worst[2] = {0, 0}, layouts = 0;
  char at[2][256] = {"-", "-"}, layouts_at[256] = "-";
  for (int sync = 1; sync >= 0; sync--) {
    sg_graph *ref_g[2];
    sg_session *ref[2];
    const char *env = getenv("SG_CPU_LAYOUT");
    char *layout = env != NULL ? strdup(env) : NULL;
    for (int r = 0; r < 2; r++) {
      if (r == 1) setenv("SG_CPU_LAYOUT", "plain", 1); /* read when the session's backend starts */
      ref[r] = reference_session(&full, &ref_g[r]);
      OK(resnet50_init_session(ref_g[r], ref[r], SEED));
    }
    if (layout != NULL) setenv("SG_CPU_LAYOUT", layout, 1); /* the job's as the caller set it */
    else unsetenv("SG_CPU_LAYOUT");
    free(layout);
    sg_dist_params dp = SG_DIST_PARAMS_INIT;
    dp.threads = 1, dp.sync_batch_norm = sync;
    sg_comm_params cp = SG_COMM_PARAMS_INIT;
    cp.epoch = 1 - sync; /* the second job its own store keys */
    dp.comm = &cp;
    if (m.resnet) dp.dead_ms = 10000; /* rank 0 also runs the reference: see run_parts */
    sg_dist *d = create_momentum(&m, &dp);
    int rank = sg_dist_rank(d);
    OK(resnet50_init_session(m.fwd, sg_dist_session(d), SEED));
    for (int step = 0; step < STEPS; step++) {
      for (int r = 0; r < 2; r++) {
        feed(&full, NULL, ref[r], step, 0, full.batch);
        OK(sg_session_step(ref[r]));
      }
      feed(&m, d, NULL, step, rank * m.batch, m.batch);
      OK(sg_dist_step(d));
    }
    worst[sync] = state_diff(&m, ref, d, at[sync], sizeof at[sync]);
    if (sync) layouts = state_diff(&full, ref, NULL, layouts_at, sizeof layouts_at);
    OK(sg_dist_destroy(d));
    for (int r = 0; r < 2; r++) {
      sg_session_destroy(ref[r]);
      sg_graph_destroy(ref_g[r]);
    }
  }
  CHECK(worst[1] <= 1e-3, "with sync_batch_norm '%s' differs from one process on the global batch by %.3g",
        at[1], worst[1]);
  CHECK(worst[0] > 1e-2,
        "without sync_batch_norm the ranks' own statistics gave one process's result (%.3g): "
        "the check cannot fail",
        worst[0]);
  printf("rank %d: ResNet-50 on %d ranks, batch %d each: with sync_batch_norm worst L2 rel diff %.3g (%s) "
         "from one process on the batch of %d (the closer of its blocked and plain layouts, which differ by "
         "%.3g at %s); without it %.3g (%s)\n",
         sg_worker_rank(), world, m.batch, worst[1], at[1], global, layouts, layouts_at, worst[0], at[0]);
  sg_graph_destroy(m.fwd);
  sg_graph_destroy(full.fwd);
  return 0;
}

/* ---- data parallelism: the same as sg_dist_create --------------------------------- */

static param_set dp_run(const model *m, const model *full, sg_dist *d, float *losses) {
  int rank = sg_dist_rank(d), n = sg_dist_size(d);
  for (int step = 0; step < STEPS; step++) {
    feed(m, d, NULL, step, rank * m->batch, m->batch);
    OK(sg_dist_step(d));
    sg_dist_stats st = SG_DIST_STATS_INIT;
    OK(sg_dist_get_stats(d, &st));
    losses[step] = st.loss_mean;
  }
  (void)full;
  (void)n;
  param_set p;
  OK(params_read(m->fwd, sg_dist_session(d), &p));
  return p;
}

static int run_dp(void) {
  int world = env_world();
  model m, full;
  build_mlp(&m, 16 / world);
  build_mlp(&full, 16);
  float ref_loss[STEPS], a_loss[STEPS], b_loss[STEPS];
  sg_graph *ref_g;
  sg_session *ref = reference(&full, &ref_g, ref_loss);
  param_set want;
  OK(params_read(ref_g, ref, &want));

  sg_dist_params dp = SG_DIST_PARAMS_INIT;
  dp.threads = 1;
  sg_dist *d = create_momentum(&m, &dp);
  int rank = sg_dist_rank(d);
  param_set a = dp_run(&m, &full, d, a_loss);
  uint64_t ha;
  OK(sg_dist_params_hash(d, &ha));
  OK(sg_dist_destroy(d));

  /* sg_dist_create on the training graph built by hand, at a fresh epoch. */
  sg_graph *g = training_graph(&m);
  sg_comm_params epoch1 = SG_COMM_PARAMS_INIT;
  epoch1.epoch = 1;
  dp.comm = &epoch1;
  OK(sg_dist_create(g, &dp, &d));
  param_set b = dp_run(&m, &full, d, b_loss);
  uint64_t hb;
  OK(sg_dist_params_hash(d, &hb));
  OK(sg_dist_destroy(d));

  param_diff pd;
  double e = params_max_rel_diff(&a, &b, &pd);
  CHECK(e == 0 && ha == hb, "sg_dist_create_model differs from sg_dist_create: %.3g (%s)", e, pd.worst);
  for (int s = 0; s < STEPS; s++)
    CHECK(memcmp(&a_loss[s], &b_loss[s], sizeof(float)) == 0, "step %d: loss %.9g vs %.9g", s, a_loss[s],
          b_loss[s]);
  double r = params_max_rel_diff(&a, &want, &pd);
  CHECK(r >= 0 && r <= TOL, "DP=%d differs from the single-process run by %.3g (%s)", world, r, pd.worst);
  double le = fabs((double)a_loss[STEPS - 1] - ref_loss[STEPS - 1]) / fabs((double)ref_loss[STEPS - 1]);
  CHECK(le <= TOL, "last loss %.9g, single process %.9g", a_loss[STEPS - 1], ref_loss[STEPS - 1]);
  printf("rank %d: DP=%d through sg_dist_create_model: bitwise equal to sg_dist_create (params hash "
         "%016" PRIx64 "), worst rel diff to one process %.3g (%s)\n",
         rank, world, ha, r, pd.worst);
  params_free(&a);
  params_free(&b);
  params_free(&want);
  sg_graph_destroy(g);
  sg_session_destroy(ref);
  sg_graph_destroy(ref_g);
  sg_graph_destroy(m.fwd);
  sg_graph_destroy(full.fwd);
  return 0;
}

/* ---- death ------------------------------------------------------------------------ */

enum { VICTIM = 2, DEATH_STEP = 3, DEATH_LIMIT_MS = 5000 };
static int detected;

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void write_text(const char *dir, const char *name, const char *text) {
  char path[1024], tmp[1100];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  CHECK(f != NULL, "cannot write %s", tmp);
  fputs(text, f);
  fclose(f);
  CHECK(rename(tmp, path) == 0, "cannot rename %s", tmp);
}

static void *kill_me(void *arg) {
  const char *dir = arg;
  struct timespec ts = {0, 2000000}; /* inside the step: the others are mid-schedule */
  nanosleep(&ts, NULL);
  char buf[32];
  snprintf(buf, sizeof buf, "%" PRId64, mono_ns());
  write_text(dir, "death_ns", buf);
  fprintf(stderr, "rank %d: SIGKILL to myself now, in step %d\n", VICTIM, DEATH_STEP);
  raise(SIGKILL);
  return NULL;
}

/* A survivor that has not failed DEATH_LIMIT_MS after the death hangs: fail. */
static void *watchdog(void *arg) {
  const char *dir = arg;
  char buf[64];
  while (read_text(dir, "death_ns", buf, sizeof buf) != 0 || buf[0] == '\0') usleep(10000);
  int64_t death = strtoll(buf, NULL, 10);
  while (!__atomic_load_n(&detected, __ATOMIC_ACQUIRE)) {
    if (mono_ns() - death > (int64_t)DEATH_LIMIT_MS * 1000000) {
      fprintf(stderr, "HANG: rank %d saw no error %d ms after rank %d died\n", sg_worker_rank(),
              DEATH_LIMIT_MS, VICTIM);
      fflush(stderr);
      _exit(4);
    }
    usleep(10000);
  }
  return NULL;
}

static int run_death(const char *dir) {
  model m;
  build_mlp(&m, 16);
  sg_dist_params dp = SG_DIST_PARAMS_INIT;
  dp.threads = 1;
  /* MODEL_DEATH_DATA=2: 2 copies of a 2-stage pipeline instead (rank 2 is
   * then stage 0 of copy 1: ranks 0 and 1 meet it only in the replicas'
   * gradient averaging). */
  const char *dd = getenv("MODEL_DEATH_DATA");
  dp.data = dd ? atoi(dd) : 1;
  dp.pipeline = 4 / dp.data;
  dp.micro_batches = 4;
  dp.heartbeat_ms = 100;
  dp.dead_ms = 1000;
  sg_dist *d;
  OK(sg_dist_create_model(m.fwd, m.loss, NULL, &dp, &d));
  int rank = sg_dist_rank(d);
  pthread_t th;
  if (rank != VICTIM) pthread_create(&th, NULL, watchdog, (void *)dir);
  for (int s = 0; s < 10; s++) {
    if (rank == VICTIM && s + 1 == DEATH_STEP) {
      pthread_t kt;
      pthread_create(&kt, NULL, kill_me, (void *)dir);
    }
    /* A step can take less than kill_me's 2 ms: the victim never starts the step after it, so
     * the others always meet its death however fast the steps run. */
    if (rank == VICTIM && s + 1 > DEATH_STEP)
      for (;;) pause();
    feed(&m, d, NULL, s, 0, m.batch);
    sg_status st = sg_dist_step(d);
    if (st == SG_OK) continue;
    int64_t found = mono_ns();
    __atomic_store_n(&detected, 1, __ATOMIC_RELEASE);
    char msg[1024], buf[64];
    snprintf(msg, sizeof msg, "%s", sg_last_error());
    if (read_text(dir, "death_ns", buf, sizeof buf) != 0)
      FAIL("step %d failed before rank %d died: %s", s + 1, VICTIM, msg);
    double after = (double)(found - strtoll(buf, NULL, 10)) * 1e-6;
    int64_t t0 = mono_ns();
    sg_status dst = sg_dist_destroy(d);
    double destroy_ms = (double)(mono_ns() - t0) * 1e-6;
    printf(
        "DETECTED rank %d: step %d returned %s %.0f ms after rank %d died (destroy took %.0f ms, %s): %s\n",
        rank, s + 1, sg_status_str(st), after, VICTIM, destroy_ms, sg_status_str(dst), msg);
    if (st != SG_ERR_COMM) FAIL("expected SG_ERR_COMM, got %s", sg_status_str(st));
    if (strstr(msg, "rank 2 ") == NULL) FAIL("the message does not name rank 2: %s", msg);
    if (strstr(msg, "step ") == NULL) FAIL("the message does not name the step: %s", msg);
    if (after > DEATH_LIMIT_MS) FAIL("detected after %.0f ms", after);
    if (destroy_ms > 3000) FAIL("destroy after the failure took %.0f ms", destroy_ms);
    pthread_join(th, NULL);
    sg_graph_destroy(m.fwd);
    return 1; /* what run_death.sh expects of a survivor */
  }
  FAIL("all steps completed although rank %d was killed", VICTIM);
}

/* ---- argument errors ------------------------------------------------------------------ */

static sg_status feed_none(void *ctx, sg_dist *d, uint64_t step, int shard, int n_shards) {
  (void)ctx, (void)d, (void)step, (void)shard, (void)n_shards;
  return SG_OK;
}

#define EXPECT(call, status, text)                                                                        \
  do {                                                                                                    \
    sg_dist *d_ = (sg_dist *)1;                                                                           \
    out = &d_;                                                                                            \
    sg_status got_ = (call);                                                                              \
    CHECK(got_ == (status), "%s returned %s, expected %s (%s)", #call, sg_status_str(got_),               \
          sg_status_str(status), sg_last_error());                                                        \
    CHECK(strstr(sg_last_error(), (text)) != NULL, "%s: message '%s' lacks '%s'", #call, sg_last_error(), \
          (text));                                                                                        \
    CHECK(d_ == NULL, "%s: out not cleared", #call);                                                      \
    printf("ok: %s -> %s: %s\n", #call, sg_status_str(got_), sg_last_error());                            \
  } while (0)

static int run_badargs(void) {
  model m;
  build_mlp(&m, 16);
  sg_dist **out;
  sg_dist_optimizer opt = SG_DIST_OPTIMIZER_INIT, o;
  sg_dist_optimizer oi = sg_dist_optimizer_init();
  CHECK(oi.size == sizeof opt && oi.kind == SG_DIST_OPT_SGD && strcmp(oi.lr_input, "lr") == 0 &&
            oi.sgd == NULL && oi.adamw == NULL && opt.kind == oi.kind,
        "SG_DIST_OPTIMIZER_INIT");
  sg_dist_params p0 = SG_DIST_PARAMS_INIT, p;
  p0.threads = 1;
  CHECK(sg_dist_create_model(m.fwd, m.loss, &opt, &p0, NULL) == SG_ERR_INVALID_ARG, "NULL out accepted");
  EXPECT(sg_dist_create_model(NULL, m.loss, &opt, &p0, out), SG_ERR_INVALID_ARG, "graph is NULL");
  o = opt, o.size = 0;
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &o, &p0, out), SG_ERR_INVALID_ARG, "opt->size");
  o = opt, o.kind = 7;
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &o, &p0, out), SG_ERR_INVALID_ARG, "opt->kind is 7");
  o = opt, o.lr_input = NULL;
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &o, &p0, out), SG_ERR_INVALID_ARG, "lr_input");
  p = p0, p.size = 8;
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &opt, &p, out), SG_ERR_INVALID_ARG, "params.size is 8");
  p = p0, p.pipeline = 0;
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &opt, &p, out), SG_ERR_INVALID_ARG, "pipeline is 0");
  p = p0, p.tensor = -1;
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &opt, &p, out), SG_ERR_INVALID_ARG, "tensor is -1");
  p = p0, p.data = 0;
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &opt, &p, out), SG_ERR_INVALID_ARG, "data is 0");
  p = p0, p.micro_batches = 0;
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &opt, &p, out), SG_ERR_INVALID_ARG, "micro_batches is 0");
  /* The world has 4 ranks. */
  p = p0, p.pipeline = 3;
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &opt, &p, out), SG_ERR_INVALID_ARG,
         "pipeline 3 x tensor 1 = 3 ranks does not divide the world of 4");
  p = p0, p.data = 2, p.pipeline = 4;
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &opt, &p, out), SG_ERR_INVALID_ARG,
         "data 2 x pipeline 4 x tensor 1 = 8 ranks, but the world has 4");
  p = p0, p.data = 3;
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &opt, &p, out), SG_ERR_INVALID_ARG, "but the world has 4");
  /* Pipeline x tensor heals under strict QoS only, and its stages are not re-cut ('slow' faults). */
  p = p0, p.pipeline = 2, p.tensor = 2, p.heal = 1, p.qos = SG_QOS_BEST_EFFORT;
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &opt, &p, out), SG_ERR_UNSUPPORTED,
         "QoS tier best-effort with pipeline x tensor parallelism: it heals under strict QoS only");
  p = p0, p.pipeline = 2, p.tensor = 2, p.inject = "slow:rank=1,factor=4,step=2";
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &opt, &p, out), SG_ERR_UNSUPPORTED,
         "fault injection (sg_dist_params.inject) is not supported with pipeline x tensor parallelism "
         "(pipeline=2, tensor=2) without heal 1");
  p = p0, p.tensor = 4, p.micro_batches = 3;
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &opt, &p, out), SG_ERR_INVALID_ARG,
         "the batch of 16 (first dim of input 'x') does not divide into micro_batches 3");
  p = p0, p.pipeline = 4, p.feed = feed_none;
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &opt, &p, out), SG_ERR_UNSUPPORTED,
         "feed callback is not supported with pipeline parallelism (pipeline=4): set feed to NULL and heal "
         "to 1");
  p = p0, p.pipeline = 4, p.inject = "slow:rank=1,step=2,factor=3;kill:rank=2,step=3";
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &opt, &p, out), SG_ERR_UNSUPPORTED,
         "fault 1 of sg_dist_params.inject ('kill') is not injected with pipeline parallelism without heal");
  p = p0, p.pipeline = 4, p.heal = 1, p.inject = "kill:rank=2,step=3;device:rank=1,step=2";
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &opt, &p, out), SG_ERR_UNSUPPORTED,
         "fault 1 of sg_dist_params.inject ('device') is not injected with pipeline parallelism: it takes");
  p = p0, p.pipeline = 4, p.heal = 1, p.inject = "kill:rank=2,at=create";
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &opt, &p, out), SG_ERR_UNSUPPORTED,
         "('kill at=create') is not injected");
  p = p0, p.pipeline = 4, p.heal = 2;
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &opt, &p, out), SG_ERR_INVALID_ARG, "heal is 2");
  /* Healing needs 3 ranks at least (1 survivor of 2 is not a strict majority): seen as a world of 2 (the
   * refusal comes before joining); in this world of 4, 2 copies of 2 stages or shares heal. */
  sg_comm_params two = SG_COMM_PARAMS_INIT;
  const char *env_rank = getenv("SG_RANK");
  two.world_size = 2, two.rank = (env_rank != NULL ? atoi(env_rank) : 0) % 2;
  p = p0, p.comm = &two, p.pipeline = 2, p.heal = 1;
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &opt, &p, out), SG_ERR_INVALID_ARG,
         "heal 1 with data 1 x pipeline 2 x tensor 1 = 2 ranks: a lost rank must leave a strict majority");
  p = p0, p.comm = &two, p.tensor = 2, p.heal = 1;
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &opt, &p, out), SG_ERR_INVALID_ARG,
         "heal 1 with data 1 x pipeline 1 x tensor 2 = 2 ranks: a lost rank must leave a strict majority");
  p = p0, p.tensor = 4, p.heal = 1, p.inject = "slow:rank=1,step=2,factor=3";
  EXPECT(
      sg_dist_create_model(m.fwd, m.loss, &opt, &p, out), SG_ERR_UNSUPPORTED,
      "fault 0 of sg_dist_params.inject ('slow') is not injected with tensor parallelism: it takes 'kill'");
  p = p0, p.pipeline = 4, p.heal = 1, p.qos = SG_QOS_GRACEFUL_DEGRADE;
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &opt, &p, out), SG_ERR_UNSUPPORTED,
         "with pipeline parallelism: it heals under strict QoS only");
  p = p0, p.heal = 1;
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &opt, &p, out), SG_ERR_INVALID_ARG,
         "heal 1 without a feed callback");
  p = p0, p.sync_batch_norm = 1;
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &opt, &p, out), SG_ERR_INVALID_ARG,
         "sync_batch_norm: the graph has no batch norm in training form");
  p = p0, p.sync_batch_norm = 2;
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &opt, &p, out), SG_ERR_INVALID_ARG, "sync_batch_norm is 2");
  p = p0, p.pipeline = 4, p.sync_batch_norm = 1;
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &opt, &p, out), SG_ERR_UNSUPPORTED,
         "synchronized batch norm is data parallelism's");
  sg_graph *tg = training_graph(&m);
  p = p0, p.sync_batch_norm = 1;
  EXPECT(sg_dist_create(tg, &p, out), SG_ERR_INVALID_ARG, "sync_batch_norm 1 needs the forward graph");
  sg_graph_destroy(tg);
  p = p0, p.tensor = 4, p.inject = "slow:rank=1,step=2,factor=3";
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &opt, &p, out), SG_ERR_UNSUPPORTED,
         "fault injection (sg_dist_params.inject) is not supported with tensor parallelism");
  p = p0, p.pipeline = 4, p.repartition_cpu = 2;
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &opt, &p, out), SG_ERR_INVALID_ARG, "repartition_cpu is 2");
  p = p0, p.pipeline = 4, p.repartition_p99_ms = NAN;
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &opt, &p, out), SG_ERR_INVALID_ARG, "repartition_p99_ms is nan");
  p = p0, p.tensor = 4, p.feed = feed_none;
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &opt, &p, out), SG_ERR_UNSUPPORTED,
         "not supported with tensor parallelism (tensor=4)");
  p = p0, p.tensor = 4, p.zero = 1;
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &opt, &p, out), SG_ERR_UNSUPPORTED,
         "zero 1 (sharded optimizer state)");
  p = p0, p.pipeline = 4, p.offload = "dram";
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &opt, &p, out), SG_ERR_UNSUPPORTED, "offload 'dram'");
  p = p0, p.pipeline = 4, p.heartbeat_ms = 100, p.dead_ms = 50;
  EXPECT(sg_dist_create_model(m.fwd, m.loss, &opt, &p, out), SG_ERR_INVALID_ARG, "dead_ms 50 must exceed");
  /* The graph and the loss. */
  EXPECT(sg_dist_create_model(m.fwd, (sg_tensor){9999}, &opt, &p0, out), SG_ERR_INVALID_ARG,
         "loss 9999 is not a tensor");
  sg_tensor x;
  OK(sg_graph_find_tensor(m.fwd, "x", &x));
  EXPECT(sg_dist_create_model(m.fwd, x, &opt, &p0, out), SG_ERR_INVALID_ARG, "must be one f32 element");
  sg_graph *open_g;
  OK(sg_graph_clone(m.fwd, &open_g));
  EXPECT(sg_dist_create_model(open_g, m.loss, &opt, &p0, out), SG_ERR_STATE, "finalize the forward graph");
  sg_graph *train = training_graph(&m);
  EXPECT(sg_dist_create_model(train, m.loss, &opt, &p0, out), SG_ERR_STATE, "not forward-only");
  sg_graph_destroy(train);
  sg_graph_destroy(open_g);
  /* The dispatch of the other functions stays as it was for NULL. */
  CHECK(sg_dist_step(NULL) == SG_ERR_INVALID_ARG && sg_dist_destroy(NULL) == SG_OK, "NULL handle");
  sg_graph_destroy(m.fwd);
  printf("badargs: every bad argument rejected before joining\n");
  return 0;
}

/* Ranks that disagree fail at create, every one of them, before building
 * anything: the message contains `text`. */
static int refused_at_create(const char *text, const char *what) {
  model m;
  build_mlp(&m, 16);
  sg_dist_params dp = SG_DIST_PARAMS_INIT;
  dp.threads = 1;
  dp.pipeline = env_world();
  sg_dist *d = (sg_dist *)1;
  CHECK_ERR(sg_dist_create_model(m.fwd, m.loss, NULL, &dp, &d), SG_ERR_SHAPE, text);
  CHECK(d == NULL, "out not cleared");
  printf("rank %d: %s are refused: %s\n", sg_worker_rank(), what, sg_last_error());
  sg_graph_destroy(m.fwd);
  return 0;
}

static int run_mismatch(void) {
  if (sg_worker_rank() == 1) mlp_hidden = 32;
  return refused_at_create("mismatch", "models that differ");
}

/* SG_MATMUL_PRECISION differs: refused before any session exists, so on any
 * CPU (none runs bf16 products). */
static int run_precision(void) {
  if (sg_worker_rank() == 1) setenv("SG_MATMUL_PRECISION", "bf16", 1);
  else unsetenv("SG_MATMUL_PRECISION");
  return refused_at_create("SG_MATMUL_PRECISION", "products of different precisions");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: model_worker pp M | tp | dp | rn_tp | rn_pp M | death DIR | badargs | mismatch | "
                    "precision\n");
    return 2;
  }
  const char *mode = argv[1];
  int micro = argc > 2 ? atoi(argv[2]) : 1;
  if (strcmp(mode, "pp") == 0) return run_parts(0, 1, micro, argc > 3 ? argv[3] : NULL, 1);
  if (strcmp(mode, "ppdp") == 0) return run_parts(0, 1, micro, argc > 3 ? argv[3] : NULL, 2);
  if (strcmp(mode, "tp") == 0) return run_parts(0, 0, 1, argc > 2 ? argv[2] : NULL, 1);
  if (strcmp(mode, "tpdp") == 0) return run_parts(0, 0, 1, NULL, 2);
  if (strcmp(mode, "tpm") == 0) return run_parts(0, 0, micro, NULL, 1);
  if (strcmp(mode, "tpmdp") == 0) return run_parts(0, 0, micro, NULL, 2);
  if (strcmp(mode, "rn_tp") == 0) return run_parts(1, 0, 1, NULL, 1);
  if (strcmp(mode, "rn_pp") == 0) return run_parts(1, 1, micro, NULL, 1);
  /* pptp T M [D]: a pipeline of tensor groups of T shares, M micro-batches, D copies (1). */
  if (strcmp(mode, "pptp") == 0 && argc > 3)
    return run_pptp(0, atoi(argv[2]), atoi(argv[3]), argc > 4 ? atoi(argv[4]) : 1);
  if (strcmp(mode, "rn_pptp") == 0 && argc > 3) return run_pptp(1, atoi(argv[2]), atoi(argv[3]), 1);
  if (strcmp(mode, "dp") == 0) return run_dp();
  if (strcmp(mode, "recut") == 0) return run_recut(1);
  if (strcmp(mode, "recutdp") == 0) return run_recut(2);
  if (strcmp(mode, "syncbn") == 0) return run_sync_bn();
  if (strcmp(mode, "ppheal") == 0) return run_model_heal(0, 1);
  if (strcmp(mode, "rn_ppheal") == 0) return run_model_heal(1, 1);
  if (strcmp(mode, "tpheal") == 0) return run_model_heal(0, 0);
  if (strcmp(mode, "rn_tpheal") == 0) return run_model_heal(1, 0);
  if (strcmp(mode, "death") == 0 && argc > 2) return run_death(argv[2]);
  if (strcmp(mode, "badargs") == 0) return run_badargs();
  if (strcmp(mode, "mismatch") == 0) return run_mismatch();
  if (strcmp(mode, "precision") == 0) return run_precision();
  fprintf(stderr, "model_worker: unknown mode '%s'\n", mode);
  return 2;
}
