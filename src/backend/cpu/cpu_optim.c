/* sgd_update and adamw_update, in place, with the arithmetic of PyTorch
 * 1.13's single-tensor torch.optim.SGD and torch.optim.AdamW (f32 tensor
 * math with scalars rounded to f32, bias corrections in double):
 *
 * SGD:   d = g + wd p
 *        momentum: buf = d on the first step (ctx->step == 0),
 *                  else buf = momentum buf + (1 - dampening) d
 *                  (without dampening both are the same for a zeroed
 *                  buffer, so the first-step rule is applied only with
 *                  dampening: a session resumed from a checkpoint then
 *                  continues right even if its step count restarts)
 *                  d = nesterov ? d + momentum buf : buf
 *        p = p - lr d
 * AdamW: p = p (1 - lr wd); step += 1
 *        m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
 *        p = p - lr/(1 - b1^step) m / (sqrt(v) / sqrt(1 - b2^step) + eps)
 * lr is read from its one-element tensor at every run (a schedule may
 * change it); AdamW's step count lives in its f32 state tensor. */
#include <math.h>

#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/cpu_simd.h"

enum { MOMENTUM, DAMPENING, WEIGHT_DECAY, NESTEROV };
enum { BETA1, BETA2, EPS, ADAM_WEIGHT_DECAY };

typedef struct optim_kernel {
  sg__kernel base;
  int64_t n;
  double a[4]; /* the attributes in schema order */
  bool nesterov;
} optim_kernel;

/* Scalars of one update, rounded to f32 once per run as PyTorch does. */
typedef struct optim_job {
  float *p, *buf, *m, *v;
  const float *g;
  float wd, mom, damp1, neg_lr; /* SGD */
  bool first, use_mom, nesterov;
  float decay, b1, b2, c1, c2, neg_step_size, bc2_sqrt, eps; /* AdamW */
} optim_job;

/* One SGD variant, specialised by the constant flags of its call in
 * sgd_range (so the loop carries no branches): four lanes at a time, then
 * the same arithmetic one element at a time. */
#define SGD_ELEM(T, LD, ST, SET)                                        \
  do {                                                                  \
    T d = LD(g + i);                                                    \
    if (wd) d = d + SET(j->wd) * LD(p + i);                             \
    if (mom) {                                                          \
      T bv = first ? d : LD(buf + i) * SET(j->mom) + SET(j->damp1) * d; \
      ST(buf + i, bv);                                                  \
      d = nesterov ? d + SET(j->mom) * bv : bv;                         \
    }                                                                   \
    ST(p + i, LD(p + i) + SET(j->neg_lr) * d);                          \
  } while (0)

static inline float ld1(const float *x) { return *x; }
static inline void st1(float *x, float v) { *x = v; }
static inline float set1(float v) { return v; }

static inline __attribute__((always_inline)) void sgd_loop(const optim_job *j, int64_t b, int64_t e, bool wd,
                                                           bool mom, bool first, bool nesterov) {
  float *restrict p = j->p, *restrict buf = j->buf;
  const float *restrict g = j->g;
  int64_t i = b;
  for (; i + 4 <= e; i += 4) SGD_ELEM(sg__v4f, sg__v4f_load, sg__v4f_store, sg__v4f_set1);
  for (; i < e; i++) SGD_ELEM(float, ld1, st1, set1);
}

static void sgd_range(void *ctx, int64_t b, int64_t e) {
  const optim_job *j = ctx;
  const bool wd = j->wd != 0.0f;
  if (!j->use_mom) {
    if (wd) sgd_loop(j, b, e, true, false, false, false);
    else sgd_loop(j, b, e, false, false, false, false);
  } else if (j->first) {
    if (j->nesterov) sgd_loop(j, b, e, wd, true, true, true);
    else sgd_loop(j, b, e, wd, true, true, false);
  } else if (j->nesterov) {
    if (wd) sgd_loop(j, b, e, true, true, false, true);
    else sgd_loop(j, b, e, false, true, false, true);
  } else {
    if (wd) sgd_loop(j, b, e, true, true, false, false);
    else sgd_loop(j, b, e, false, true, false, false);
  }
}

static sg_status sgd_run(sg__cpu_state *st, sg__kernel *base, void *const *in, void *const *out,
                         const sg__run_ctx *ctx) {
  (void)st;
  (void)out;
  optim_kernel *k = (optim_kernel *)base;
  const double lr = *(const float *)in[2];
  optim_job j = {.p = in[0],
                 .g = in[1],
                 .buf = in[3],
                 .wd = (float)k->a[WEIGHT_DECAY],
                 .mom = (float)k->a[MOMENTUM],
                 .damp1 = (float)(1.0 - k->a[DAMPENING]),
                 .neg_lr = (float)-lr,
                 .first = ctx->step == 0 && k->a[DAMPENING] != 0.0,
                 .use_mom = k->a[MOMENTUM] != 0.0,
                 .nesterov = k->nesterov};
  sg__cpu_parallel_for(k->n, 32768, sgd_range, &j);
  return SG_OK;
}

static void adamw_range(void *ctx, int64_t b, int64_t e) {
  const optim_job *j = ctx;
  float *restrict p = j->p, *restrict m = j->m, *restrict v = j->v;
  const float *restrict g = j->g;
  for (int64_t i = b; i < e; i++) {
    float pi = p[i] * j->decay;
    float mi = m[i] * j->b1 + g[i] * j->c1;
    float vi = v[i] * j->b2 + j->c2 * g[i] * g[i];
    m[i] = mi;
    v[i] = vi;
    float denom = sqrtf(vi) / j->bc2_sqrt + j->eps;
    p[i] = pi + j->neg_step_size * (mi / denom);
  }
}

static sg_status adamw_run(sg__cpu_state *st, sg__kernel *base, void *const *in, void *const *out,
                           const sg__run_ctx *ctx) {
  (void)st;
  (void)out;
  (void)ctx;
  optim_kernel *k = (optim_kernel *)base;
  float *step_t = in[5];
  const double lr = *(const float *)in[2];
  const double b1 = k->a[BETA1], b2 = k->a[BETA2];
  const float step = *step_t + 1.0f;
  *step_t = step;
  const double bc1 = 1.0 - pow(b1, step), bc2 = 1.0 - pow(b2, step);
  optim_job j = {.p = in[0],
                 .g = in[1],
                 .m = in[3],
                 .v = in[4],
                 .decay = (float)(1.0 - lr * k->a[ADAM_WEIGHT_DECAY]),
                 .b1 = (float)b1,
                 .b2 = (float)b2,
                 .c1 = (float)(1.0 - b1),
                 .c2 = (float)(1.0 - b2),
                 .neg_step_size = (float)-(lr / bc1),
                 .bc2_sqrt = (float)sqrt(bc2),
                 .eps = (float)k->a[EPS]};
  sg__cpu_parallel_for(k->n, 32768, adamw_range, &j);
  return SG_OK;
}

sg_status sg__cpu_create_optim(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                               sg__kernel **out) {
  (void)st;
  (void)mode;
  for (int i = 0; i < op->n_inputs; i++) {
    const sg__tensor *t = sg__cpu_in(g, op, i);
    if (t && t->dtype != SG_F32) return sg__cpu_unsupported(g, op, " (takes f32 tensors)");
  }
  bool sgd = op->kind == SG_OP_SGD_UPDATE;
  sg__kernel *kb;
  SG_CHECK(sg__cpu_kernel_new(op, sizeof(optim_kernel), sgd ? sgd_run : adamw_run, &kb));
  optim_kernel *k = (optim_kernel *)kb;
  k->n = sg__cpu_numel(sg__cpu_in(g, op, 0));
  for (int i = 0; i < 4; i++) k->a[i] = sg__attr_f(op, i);
  if (sgd) {
    k->a[NESTEROV] = 0;
    k->nesterov = sg__attr_i(op, NESTEROV) != 0;
  }
  *out = kb;
  return SG_OK;
}
