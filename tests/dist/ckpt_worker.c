/* sg_dist_save_checkpoint (include/sgrt/dist.h), run as every rank by
 * `sgrt launch -n N -- ckpt_worker MODE DIR`:
 *
 *   dp      an MLP, data-parallel over N ranks (sg_dist_create_model, pipeline = tensor = 1), each rank
 *           fed its own part of the batch;
 *   zero    the same through sg_dist_create with ZeRO-1 (each rank keeps a range's optimizer state);
 *   pp      an N-stage pipeline, 2 micro-batches;
 *   tp      an N-way tensor split;
 *   pptp    2 stages, each a tensor group of N/2 shares;
 *   tpdp    2 copies of an N/2-way tensor split, each fed half of the batch;
 *   adamw   the N-way tensor split with AdamW (its per-parameter step counts are whole scalars).
 *
 * Each trains 3 steps, then every rank calls sg_dist_save_checkpoint(d, DIR/model.sgg). Rank 0 loads the
 * file into a one-process session of the model's training graph with sg_session_load_checkpoint (which
 * needs every parameter and optimizer state tensor there, at its whole shape) and compares every parameter
 * and optimizer state tensor with one process trained on the same global batch (an independent run: one
 * session, no split, no communication): worst per-tensor max|a-b| / max|b| <= 1e-5 (SGD with momentum;
 * AdamW, whose update turns rounding noise in near-zero gradients into steps of lr: 1e-4 in L2 per
 * tensor), and the step count 3. Then the errors, on every rank: a path that cannot be written (SG_ERR_IO
 * on rank 0, the same status on the others, nobody left waiting), a NULL path on one rank only
 * (SG_ERR_INVALID_ARG everywhere), a NULL handle; and a second save after them works. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../worker_check.h"
#include "dist_models.h"
#include "sgrt/sgrt.h"

#define STEPS 3
#define BATCH 16
#define IN 32
#define HIDDEN 64
#define CLASSES 10
#define TOL 1e-5
#define TOL_ADAMW 1e-4

typedef enum opt_kind { OPT_MOMENTUM, OPT_ADAMW } opt_kind;

/* Forward only: 32-64-64-64-10 with initial values as initializers (every rank and the reference start
 * alike; the tensor split slices them). */
static sg_graph *build_forward(int batch, sg_tensor *loss) {
  sg_graph *g;
  OK(sg_graph_create(&g));
  int64_t xd[] = {batch, IN}, yd[] = {batch};
  sg_tensor h = sg_input(g, "x", SG_F32, 2, xd), y = sg_input(g, "y", SG_I64, 1, yd);
  int fan_in = IN;
  for (int l = 1; l <= 4; l++) {
    int out_f = l == 4 ? CLASSES : HIDDEN;
    int64_t wd[] = {out_f, fan_in}, bd[] = {out_f};
    float *w = malloc(sizeof(float) * (size_t)out_f * (size_t)fan_in),
          *b = malloc(sizeof(float) * (size_t)out_f);
    CHECK(w && b, "out of memory");
    float bound = 1.0f / sqrtf((float)fan_in);
    for (int i = 0; i < out_f * fan_in; i++) w[i] = bound * sg_worker_unit(11, (uint64_t)l, (uint64_t)i);
    for (int i = 0; i < out_f; i++) b[i] = bound * sg_worker_unit(12, (uint64_t)l, (uint64_t)i);
    char wn[32], bn[32];
    snprintf(wn, sizeof wn, "fc%d.weight", l);
    snprintf(bn, sizeof bn, "fc%d.bias", l);
    h = sg_linear(g, h, sg_parameter(g, wn, SG_F32, 2, wd, w), sg_parameter(g, bn, SG_F32, 1, bd, b));
    free(w);
    free(b);
    if (l < 4) h = sg_relu(g, h);
    fan_in = out_f;
  }
  *loss = sg_cross_entropy(g, h, y, SG_REDUCTION_MEAN);
  OK(sg_tensor_set_name(g, *loss, "loss"));
  OK(sg_graph_mark_output(g, *loss));
  OK(sg_graph_finalize(g));
  return g;
}

/* The one-process training graph: backward, an "lr" input, the optimizer. */
static sg_graph *training_graph(int batch, opt_kind opt) {
  sg_tensor loss;
  sg_graph *fwd = build_forward(batch, &loss), *g;
  OK(sg_graph_clone(fwd, &g));
  sg_graph_destroy(fwd);
  OK(sg_graph_find_tensor(g, "loss", &loss));
  OK(sg_graph_backward(g, loss));
  sg_tensor lr = sg_input(g, "lr", SG_F32, 0, NULL);
  if (opt == OPT_ADAMW) {
    sg_adamw_params p = SG_ADAMW_PARAMS_INIT;
    OK(sg_graph_add_adamw(g, lr, &p));
  } else {
    sg_sgd_params p = SG_SGD_PARAMS_INIT;
    p.momentum = 0.9;
    OK(sg_graph_add_sgd(g, lr, &p));
  }
  OK(sg_graph_finalize(g));
  return g;
}

static sg_session *open_session(const sg_graph *g) {
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sp.threads = 1;
  sg_session *s;
  OK(sg_session_create(g, &sp, &s));
  OK(sg_session_compile(s));
  return s;
}

/* Samples [first, first + n) of `step` as the inputs of d (or, d NULL, of s). */
static void feed(sg_dist *d, sg_session *s, int step, int first, int n) {
  float *x = malloc(sizeof(float) * (size_t)n * IN), lr = 0.05f;
  int64_t *y = malloc(sizeof(int64_t) * (size_t)n), xd[] = {n, IN}, yd[] = {n};
  CHECK(x && y, "out of memory");
  mlp_data(step, first, n, IN, CLASSES, x, y);
  if (d != NULL) {
    OK(sg_dist_set_input(d, "x", SG_F32, 2, xd, x));
    OK(sg_dist_set_input(d, "y", SG_I64, 1, yd, y));
    OK(sg_dist_set_input(d, "lr", SG_F32, 0, NULL, &lr));
  } else {
    OK(sg_session_set_input(s, "x", SG_F32, 2, xd, x));
    OK(sg_session_set_input(s, "y", SG_I64, 1, yd, y));
    OK(sg_session_set_input(s, "lr", SG_F32, 0, NULL, &lr));
  }
  free(x);
  free(y);
}

static double max_rel(const float *a, const float *b, size_t n, bool l2) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double e = fabs((double)a[i] - b[i]), r = fabs((double)b[i]);
    if (l2) num += e * e, den += r * r;
    else num = fmax(num, e), den = fmax(den, r);
  }
  if (l2) num = sqrt(num), den = sqrt(den);
  return den > 0 ? num / den : num;
}

/* Rank 0: the checkpoint against one process's 3 steps on the whole batch. */
static void check_file(const char *path, opt_kind opt) {
  sg_graph *g = training_graph(BATCH, opt);
  sg_session *ref = open_session(g), *got = open_session(g);
  for (int step = 0; step < STEPS; step++) {
    feed(NULL, ref, step, 0, BATCH);
    OK(sg_session_step(ref));
  }
  OK(sg_session_load_checkpoint(got, path));
  CHECK(sg_session_steps(got) == STEPS, "the checkpoint says %llu steps, not %d",
        (unsigned long long)sg_session_steps(got), STEPS);
  double worst = 0;
  char where[256] = "-";
  int n = 0;
  for (int32_t t = 0; t < sg_graph_num_tensors(g); t++) {
    sg_tensor_info info;
    OK(sg_graph_tensor_info(g, (sg_tensor){t}, &info));
    if (info.role != SG_ROLE_PARAMETER && info.role != SG_ROLE_OPTIMIZER_STATE) continue;
    float *a = malloc(info.nbytes), *b = malloc(info.nbytes);
    CHECK(a && b, "out of memory");
    OK(sg_session_read(got, info.name, a, info.nbytes));
    OK(sg_session_read(ref, info.name, b, info.nbytes));
    double rel = max_rel(a, b, (size_t)info.numel, opt == OPT_ADAMW);
    if (rel > worst || n == 0) worst = rel, snprintf(where, sizeof where, "%s", info.name);
    n++;
    free(a);
    free(b);
  }
  double tol = opt == OPT_ADAMW ? TOL_ADAMW : TOL;
  printf("rank 0: checkpoint loaded into one process: %d parameters and optimizer state tensors, worst %s "
         "relative difference from one process %.3e in %s (bar %g)\n",
         n, opt == OPT_ADAMW ? "L2" : "max", worst, where, tol);
  CHECK(worst <= tol, "the checkpoint differs from one process by %.3e in '%s'", worst, where);
  sg_session_destroy(got);
  sg_session_destroy(ref);
  sg_graph_destroy(g);
}

int main(int argc, char **argv) {
  CHECK(argc == 3, "usage: ckpt_worker dp|zero|pp|tp|pptp|tpdp|adamw DIR");
  const char *mode = argv[1], *dir = argv[2];
  const char *ws = getenv("SG_WORLD_SIZE");
  int world = ws ? atoi(ws) : 1;
  sg_dist_params dp = SG_DIST_PARAMS_INIT;
  dp.threads = 1;
  opt_kind opt = strcmp(mode, "adamw") == 0 ? OPT_ADAMW : OPT_MOMENTUM;
  int copies = 1; /* copies of the model, each fed its own part of the batch */
  if (strcmp(mode, "dp") == 0 || strcmp(mode, "zero") == 0) copies = world;
  else if (strcmp(mode, "pp") == 0) dp.pipeline = world, dp.micro_batches = 2;
  else if (strcmp(mode, "tp") == 0 || strcmp(mode, "adamw") == 0) dp.tensor = world;
  else if (strcmp(mode, "pptp") == 0) dp.pipeline = 2, dp.tensor = world / 2;
  else if (strcmp(mode, "tpdp") == 0) dp.tensor = world / 2, copies = 2;
  else FAIL("unknown mode '%s'", mode);
  int batch = BATCH / copies;
  sg_dist *d;
  sg_graph *train = NULL;
  if (strcmp(mode, "zero") == 0) {
    dp.zero = 1;
    train = training_graph(batch, opt);
    OK(sg_dist_create(train, &dp, &d));
  } else {
    sg_tensor loss;
    sg_graph *fwd = build_forward(batch, &loss);
    sg_sgd_params sgd = SG_SGD_PARAMS_INIT;
    sgd.momentum = 0.9;
    sg_adamw_params adamw = SG_ADAMW_PARAMS_INIT;
    sg_dist_optimizer o = SG_DIST_OPTIMIZER_INIT;
    if (opt == OPT_ADAMW) o.kind = SG_DIST_OPT_ADAMW, o.adamw = &adamw;
    else o.sgd = &sgd;
    OK(sg_dist_create_model(fwd, loss, &o, &dp, &d));
    sg_graph_destroy(fwd);
  }
  int rank = sg_dist_rank(d), copy = rank / (world / copies);
  for (int step = 0; step < STEPS; step++) {
    feed(d, NULL, step, copy * batch, batch);
    OK(sg_dist_step(d));
  }
  char path[1024];
  snprintf(path, sizeof path, "%s/model.sgg", dir);
  OK(sg_dist_save_checkpoint(d, path));
  if (rank == 0) check_file(path, opt);

  /* Errors reach every rank, and the job goes on. */
  sg_status st = sg_dist_save_checkpoint(d, "/nonexistent-sgrt-dir/model.sgg");
  CHECK(st == SG_ERR_IO, "an unwritable path gave %s on rank %d (expected SG_ERR_IO)", sg_status_str(st),
        rank);
  CHECK(rank == 0 || strstr(sg_last_error(), "rank 0 failed") != NULL, "rank %d's message: %s", rank,
        sg_last_error());
  CHECK(strstr(sg_last_error(), "nonexistent-sgrt-dir") != NULL, "the message does not name the file");
  CHECK_ERR(sg_dist_save_checkpoint(d, rank == 1 ? NULL : path), SG_ERR_INVALID_ARG,
            "path is NULL on rank 1");
  CHECK_ERR(sg_dist_save_checkpoint(NULL, path), SG_ERR_INVALID_ARG, "d is NULL");
  remove(path);
  OK(sg_dist_save_checkpoint(d, path));
  if (rank == 0) check_file(path, opt);
  printf("rank %d: %s: the errors reached every rank; the checkpoint written again\n", rank, mode);
  OK(sg_dist_destroy(d));
  sg_graph_destroy(train);
  return 0;
}
