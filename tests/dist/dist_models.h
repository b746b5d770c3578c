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

/* ---- the workers' files and feeds ------------------------------------------ */

/* Every parameter's raw f32 values, in tensor order, to `path`; SG_ERR_IO
 * naming the file. */
sg_status params_save(const char *path, const param_set *p);
/* The values params_save wrote into `p`, which already has their layout (a
 * params_read of the same graph); SG_ERR_IO when the file cannot be opened
 * or is short. */
sg_status params_load(const char *path, param_set *p);
/* The session's parameters to dir/params.<rank>; with `ref` (another run's
 * dir) *rel = params_max_rel_diff against ref/params.0, else 0. */
sg_status params_save_compare(const sg_graph *g, const sg_session *s, const char *dir, int rank,
                              const char *ref, double *rel);
/* dir/name's text into buf (at most cap-1 bytes, NUL-terminated); -1 when
 * the file cannot be opened. */
int read_text(const char *dir, const char *name, char *buf, size_t cap);

/* A feed callback (sg_dist_params.feed) for the MLP, with an mlp_feed_ctx as
 * feed_ctx: shard k of a step is samples [k*batch, (k+1)*batch) of the
 * global batch (mlp_data), set as "x" and "y", and `lr` as "lr";
 * SG_ERR_RANGE for a shard outside 0..n_shards-1. */
typedef struct mlp_feed_ctx {
  int batch, in, classes;
  float lr;
  float *x;   /* room for batch*in floats */
  int64_t *y; /* room for batch labels */
} mlp_feed_ctx;
sg_status mlp_feed(void *ctx, sg_dist *d, uint64_t step, int shard, int n_shards);

/* The single-process reference of the MLP workers: `c` (c->batch rows: the
 * whole global batch) trained for `steps` steps in one session (1 thread)
 * on samples [0, c->batch) of each step at learning rate `lr`; its
 * parameters into `out`, and each step's loss into losses[] unless NULL. */
sg_status mlp_reference(const mlp_cfg *c, int steps, float lr, float *losses, param_set *out);

#endif /* DIST_MODELS_H */
