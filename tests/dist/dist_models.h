/* Models, data and single-process references for the data-parallel tests
 * (tests/dist). Everything here is deterministic: a sample's values depend on
 * (step, global sample index) only, so rank r's shard of a step is samples
 * [r*B, (r+1)*B) of the same global batch a single process would use. */
#ifndef DIST_MODELS_H
#define DIST_MODELS_H

#include <stdint.h>

#include "sgrt/sgrt.h"

/* ---- an MLP: linear - relu - ... - linear - cross entropy ---------------- */

typedef struct mlp_cfg {
  int batch, in, hidden, layers, classes;
  uint64_t init_seed; /* parameters: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) from this seed */
  int optimizer;      /* 1: SGD with momentum 0.9 appended; 2: AdamW (defaults); 0: gradients marked as
                         outputs instead */
  double dropout;     /* > 0: dropout with this probability after each hidden layer's relu */
} mlp_cfg;

/* Inputs "x" [batch, in] f32, "y" [batch] i64, "lr" f32 scalar; output
 * "loss"; parameters "fcK.weight", "fcK.bias" (K = 1..layers). */
sg_status mlp_build(const mlp_cfg *c, sg_graph **out);
/* Samples [first, first+n) of `step`: x [n, in], y [n]. */
void mlp_data(int step, int first, int n, int in, int classes, float *x, int64_t *y);

/* ---- ResNet-50 (examples/resnet50/resnet50_model.c) at a small size ------ */

typedef struct rn_cfg {
  int batch, res, width, classes;
  int optimizer; /* as mlp_cfg */
} rn_cfg;

/* Inputs "images", "labels", "lr"; output "loss". */
sg_status rn_build(const rn_cfg *c, sg_graph **out);
/* Samples [first, first+n) of `step`: images [n, 3, res, res], labels [n]. */
void rn_data(int step, int first, int n, int res, int classes, float *x, int64_t *y);

/* ---- comparing parameters ------------------------------------------------- */

/* A copy of every parameter (role PARAMETER) of a session, in tensor order. */
typedef struct param_set {
  int n;
  char **names;
  float **values;
  int64_t *numel;
} param_set;

sg_status params_read(const sg_graph *g, const sg_session *s, param_set *out);
void params_free(param_set *p);
/* How far two sets of parameters are apart, matched by name. */
typedef struct param_diff {
  double max_rel;       /* largest per-tensor max|a-b| / max|b| */
  double max_rel_l2;    /* largest per-tensor ||a-b|| / ||b|| (L2) */
  double global_rel_l2; /* ||a-b|| / ||b|| over all parameters together */
  double max_abs;       /* largest |a-b| */
  const char *worst, *worst_l2;
} param_diff;

/* Fills `out` for the tensors of `a` (found by name in `b`); returns
 * out->max_rel: -1 when a tensor is missing or its size differs, NaN for a
 * NaN anywhere. */
double params_max_rel_diff(const param_set *a, const param_set *b, param_diff *out);

/* FNV-1a over the parameters in tensor order (as sg_dist_params_hash). */
uint64_t params_fnv(const param_set *p);

#endif /* DIST_MODELS_H */
