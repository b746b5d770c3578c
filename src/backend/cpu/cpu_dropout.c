/* dropout and dropout_backward.
 *
 * Training (attribute training = 1 and SG__MODE_TRAIN): element i is kept
 * when sg__dropout_bits(key, i) >= ceil(p * 2^24), with
 * key = sg__dropout_key(op seed, seed, step, rng_subsequence) (the run
 * context's; backend/dropout_rng.h, which the CUDA backend shares): a
 * counter-based hash, so the mask depends on nothing but those values and
 * the index (not on threads or on earlier runs). y = x * mask / (1 - p),
 * with the scale rounded to f32 once; output 1 is the mask (u8, 1 = kept).
 * Otherwise dropout is the identity and the mask output is left untouched.
 * dropout_backward: dx = dy * mask / (1 - p); dx may alias dy. */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_internal.h"
#include "backend/dropout_rng.h"

enum { P, SEED, TRAINING };

typedef struct dropout_kernel {
  sg__kernel base;
  int64_t n;
  bool active;
  uint64_t seed;
  uint32_t threshold;
  float scale;
} dropout_kernel;

typedef struct dropout_job {
  const dropout_kernel *k;
  const float *x;
  const uint8_t *mask_in;
  float *y;
  uint8_t *mask;
  uint64_t key;
} dropout_job;

static void dropout_range(void *ctx, int64_t b, int64_t e) {
  const dropout_job *j = ctx;
  const uint32_t thr = j->k->threshold;
  const float scale = j->k->scale;
  for (int64_t i = b; i < e; i++) {
    uint8_t keep = sg__dropout_bits(j->key, (uint64_t)i) >= thr;
    j->mask[i] = keep;
    j->y[i] = keep ? j->x[i] * scale : 0.0f;
  }
}

static void dropout_backward_range(void *ctx, int64_t b, int64_t e) {
  const dropout_job *j = ctx;
  const float scale = j->k->scale;
  for (int64_t i = b; i < e; i++) j->y[i] = j->mask_in[i] ? j->x[i] * scale : 0.0f;
}

static void copy_range(void *ctx, int64_t b, int64_t e) {
  const dropout_job *j = ctx;
  memcpy(j->y + b, j->x + b, sizeof(float) * (size_t)(e - b));
}

static sg_status dropout_run(sg__cpu_state *st, sg__kernel *base, void *const *in, void *const *out,
                             const sg__run_ctx *ctx) {
  (void)st;
  const dropout_kernel *k = (const dropout_kernel *)base;
  dropout_job j = {k, in[0], NULL, out[0], NULL, 0};
  if (!k->active) {
    if (j.y != j.x) sg__cpu_parallel_for(k->n, 262144, copy_range, &j);
    return SG_OK;
  }
  j.mask = out[1];
  j.key = sg__dropout_key(k->seed, ctx->seed, ctx->step, ctx->rng_subsequence);
  sg__cpu_parallel_for(k->n, 32768, dropout_range, &j);
  return SG_OK;
}

static sg_status dropout_backward_run(sg__cpu_state *st, sg__kernel *base, void *const *in, void *const *out,
                                      const sg__run_ctx *ctx) {
  (void)st;
  (void)ctx;
  const dropout_kernel *k = (const dropout_kernel *)base;
  dropout_job j = {k, in[0], in[1], out[0], NULL, 0};
  sg__cpu_parallel_for(k->n, 65536, dropout_backward_range, &j);
  return SG_OK;
}

sg_status sg__cpu_create_dropout(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                                 sg__kernel **out) {
  (void)st;
  const sg__tensor *x = sg__cpu_in(g, op, 0);
  bool fwd = op->kind == SG_OP_DROPOUT;
  if (x->dtype != SG_F32 || (!fwd && sg__cpu_in(g, op, 1)->dtype != SG_U8))
    return sg__cpu_unsupported(g, op, " (takes f32 data and a u8 mask)");
  sg__kernel *kb;
  SG_CHECK(sg__cpu_kernel_new(op, sizeof(dropout_kernel), fwd ? dropout_run : dropout_backward_run, &kb));
  dropout_kernel *k = (dropout_kernel *)kb;
  double p = sg__attr_f(op, P);
  k->n = sg__cpu_numel(x);
  k->scale = (float)(1.0 / (1.0 - p));
  k->threshold = sg__dropout_threshold(p);
  if (fwd) {
    k->active = sg__attr_i(op, TRAINING) != 0 && mode == SG__MODE_TRAIN;
    k->seed = (uint64_t)sg__attr_i(op, SEED);
  }
  *out = kb;
  return SG_OK;
}
