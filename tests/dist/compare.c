/* See compare.h. */
#include "compare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../worker_check.h"
#include "comm/comm.h"
#include "parallel/pp.h"
#include "runtime/hooks.h"

void mlp_layer_params(sg_graph *g, int l, int fan_in, int out_f, bool in_out, bool bias, sg_tensor *w,
                      sg_tensor *b) {
  int64_t wd[2] = {out_f, fan_in}, bd[] = {out_f};
  if (in_out) wd[0] = fan_in, wd[1] = out_f;
  size_t nw = (size_t)out_f * (size_t)fan_in;
  float *wv = malloc(nw * sizeof *wv), *bv = malloc((size_t)out_f * sizeof *bv);
  CHECK(wv && bv, "out of memory");
  float bound = 1.0f / sqrtf((float)fan_in);
  for (size_t i = 0; i < nw; i++) wv[i] = bound * sg_worker_unit(7, (uint64_t)l, i);
  for (int i = 0; i < out_f; i++) bv[i] = bound * sg_worker_unit(7, 1000u + (uint64_t)l, (uint64_t)i);
  char wn[32], bn[32];
  snprintf(wn, sizeof wn, "fc%d.weight", l);
  snprintf(bn, sizeof bn, "fc%d.bias", l);
  *w = sg_parameter(g, wn, SG_F32, 2, wd, wv);
  *b = bias ? sg_parameter(g, bn, SG_F32, 1, bd, bv) : SG_NO_TENSOR;
  free(wv);
  free(bv);
}

sg_tensor finish_forward(sg_graph *g, sg_tensor logits, sg_tensor y) {
  sg_tensor loss = sg_cross_entropy(g, logits, y, SG_REDUCTION_MEAN);
  OK(sg_tensor_set_name(g, loss, "loss"));
  OK(sg_graph_mark_output(g, loss));
  OK(sg_graph_finalize(g));
  return loss;
}

void add_optimizer(sg_graph *g) {
  sg_tensor lr;
  if (sg_graph_find_tensor(g, "lr", &lr) != SG_OK) lr = sg_input(g, "lr", SG_F32, 0, NULL);
  sg_sgd_params p = SG_SGD_PARAMS_INIT;
  p.momentum = 0.9;
  OK(sg_graph_add_sgd(g, lr, &p));
  OK(sg_graph_finalize(g));
}

sg_session *open_session(const sg_graph *g) {
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sp.threads = 1; /* the ranks share two cores */
  sg_session *s;
  OK(sg_session_create(g, &sp, &s));
  OK(sg__session_set_updates_last(s, true));
  OK(sg_session_compile(s));
  return s;
}

sg_session *open_training(const sg_graph *fwd, sg_graph **g) {
  OK(sg_graph_clone(fwd, g));
  sg_tensor loss;
  OK(sg_graph_find_tensor(*g, "loss", &loss));
  OK(sg_graph_backward(*g, loss));
  add_optimizer(*g);
  return open_session(*g);
}

void stages_from_metis(const sg_graph *fwd, int stages, int *stage_of) {
  sg_partition_params pp = SG_PARTITION_PARAMS_INIT;
  pp.parts = stages;
  pp.mode = SG_PARTITION_PIPELINE;
  sg_partition *part;
  OK(sg_partition_create(fwd, &pp, NULL, &part));
  OK(sg__pp_stages_from_partition(part, sg_graph_num_ops(fwd), stage_of));
  sg_partition_destroy(part);
}

void train_mlp(sg_session *s, int batch, int in, int classes, float lr, int steps, float *losses) {
  train_mlp_tp(s, NULL, batch, in, classes, lr, steps, losses);
}

void train_mlp_tp(sg_session *s, sg__tp_runner *tp, int batch, int in, int classes, float lr, int steps,
                  float *losses) {
  float *x = malloc(sizeof(float) * (size_t)batch * (size_t)in);
  int64_t *y = malloc(sizeof(int64_t) * (size_t)batch), xd[] = {batch, in}, yd[] = {batch};
  CHECK(x && y, "out of memory");
  for (int step = 0; step < steps; step++) {
    sg_worker_mlp_batch(batch, in, classes, step, x, y);
    OK(sg_session_set_input(s, "x", SG_F32, 2, xd, x));
    OK(sg_session_set_input(s, "y", SG_I64, 1, yd, y));
    OK(sg_session_set_input(s, "lr", SG_F32, 0, NULL, &lr));
    OK(tp ? sg__tp_runner_step(tp) : sg_session_step(s));
    OK(sg_session_read(s, "loss", &losses[step], sizeof(float)));
  }
  free(x);
  free(y);
}

double rel_diff(const float *a, const float *b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    num = fmax(num, fabs((double)a[i] - (double)b[i]));
    den = fmax(den, fabs((double)b[i]));
  }
  return den > 0 ? num / den : num;
}

double compare_losses(const char *who, const float *got, const float *want, int steps, double tol) {
  double worst = 0;
  for (int k = 0; k < steps; k++) {
    double d = fabs((double)got[k] - want[k]) / fabs((double)want[k]);
    if (who != NULL) printf("%s: step %d loss %.7f reference %.7f\n", who, k, got[k], want[k]);
    CHECK(d <= tol, "%s%sstep %d: loss %.9g, single process %.9g", who ? who : "", who ? ": " : "", k, got[k],
          want[k]);
    worst = fmax(worst, d);
  }
  return worst;
}

sg_comm *group_comm(const char *prefix, int index, int rank, int size) {
  sg_comm_params cp = SG_COMM_PARAMS_INIT;
  cp.rank = rank;
  cp.world_size = size;
  char name[32];
  snprintf(name, sizeof name, "%s%d", prefix, index);
  sg_comm *c;
  OK(sg__comm_create_group(&cp, name, &c));
  return c;
}

void slice_part(const float *full, const sg_tensor_info *info, int axis, int ways, int rank, float *out) {
  int64_t outer = 1, inner = 1, n = info->dims[axis], part = n / ways;
  for (int i = 0; i < axis; i++) outer *= info->dims[i];
  for (int i = axis + 1; i < info->ndim; i++) inner *= info->dims[i];
  for (int64_t o = 0; o < outer; o++)
    memcpy(out + o * part * inner, full + (o * n + (int64_t)rank * part) * inner,
           sizeof(float) * (size_t)(part * inner));
}

static double rel_diff_n(const float *a, const float *b, int64_t n) { return rel_diff(a, b, (size_t)n); }

double compare_dist_part(sg_dist *d, const sg_tensor_info *a, const float *want, int ways, int share,
                         double (*diff)(const float *, const float *, int64_t), int *split) {
  if (diff == NULL) diff = rel_diff_n;
  float *mine = malloc(a->nbytes), *part = malloc(a->nbytes);
  CHECK(mine && part, "out of memory");
  double e = -1;
  *split = 0;
  sg_status st = sg_dist_read(d, a->name, mine, a->nbytes);
  if (st == SG_OK) {
    e = diff(mine, want, (int64_t)(a->nbytes / 4));
  } else if (st != SG_ERR_NOT_FOUND && ways > 1) {
    size_t bytes = a->nbytes / (size_t)ways;
    CHECK(sg_dist_read(d, a->name, mine, bytes) == SG_OK, "'%s' reads neither whole nor as 1/%d: %s", a->name,
          ways, sg_last_error());
    *split = 1;
    e = INFINITY;
    for (int axis = 0; axis < a->ndim; axis++) {
      if (a->dims[axis] % ways != 0) continue;
      slice_part(want, a, axis, ways, share, part);
      e = fmin(e, diff(mine, part, (int64_t)(bytes / 4)));
    }
  } else {
    CHECK(strstr(sg_last_error(), "pipeline stage") != NULL, "'%s': %s", a->name, sg_last_error());
  }
  free(mine);
  free(part);
  return e;
}
