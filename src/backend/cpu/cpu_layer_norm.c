/* layer_norm and layer_norm_backward (f32) over the trailing dims from
 * `axis`: x is seen as R rows of D elements.
 *
 * Forward, per row in double precision (each sum in sgk_math.h's eight
 * lanes): mean, the biased variance as the
 * mean of (x - mean)^2 (two passes, no cancellation), invstd = 1 /
 * sqrt(var + eps), y = (x - mean) invstd scale + bias rounded once.
 * Backward from the saved mean and invstd, with xhat = (x - mean) invstd and
 * g = dy scale: dx = invstd (g - mean(g) - xhat mean(g xhat)) per row (rows
 * split over threads); dscale = sum over rows of dy xhat and dbias = sum of
 * dy, per column (columns split over threads, rows added in order, in
 * double in the workspace). Results do not depend on the thread count. */
#include <math.h>

#include "backend/cpu/cpu_internal.h"
#include "backend/sgk_math.h"

typedef struct ln_kernel {
  sg__kernel base;
  int64_t rows, cols;
  double eps;
  bool has_scale, has_bias;
} ln_kernel;

typedef struct ln_job {
  const ln_kernel *k;
  const float *x, *dy, *scale, *bias, *mean, *invstd;
  float *y, *dx, *dscale, *dbias, *omean, *oinvstd;
  double *acc; /* backward: 2 * cols */
} ln_job;

/* Row sums in sgk_math.h's eight lanes (element i into lane i % 8, the
 * lanes combined in a fixed tree): eight independent chains the compiler
 * vectorizes, in an order that depends on neither the ISA nor the threads.
 * Every elementwise loop below is written in blocks of eight with a known
 * trip count for the same reason (GCC's -O2 vectorizes only those). */
#define L SGK_SUM_LANES

static double sum_centered_sq(const float *x, int64_t D, double mean) {
  double l[L] = {0};
  int64_t i = 0;
  for (; i + L <= D; i += L)
    for (int q = 0; q < L; q++) {
      double t = (double)x[i + q] - mean;
      l[q] += t * t;
    }
  for (int q = 0; i < D; i++, q++) {
    double t = (double)x[i] - mean;
    l[q] += t * t;
  }
  return sgk_sum_lanes(l);
}

static void fwd_rows(void *ctx, int64_t r0, int64_t r1) {
  const ln_job *j = ctx;
  const int64_t D = j->k->cols;
  const float *scale = j->scale, *bias = j->bias;
  for (int64_t r = r0; r < r1; r++) {
    const float *x = j->x + r * D;
    float *y = j->y + r * D;
    double l[L] = {0};
    sgk_sum_add(l, x, D);
    const double mean = sgk_sum_lanes(l) / (double)D;
    const double invstd = 1.0 / sqrt(sum_centered_sq(x, D, mean) / (double)D + j->k->eps);
    /* y = (x - mean) invstd scale + bias in double, rounded once. */
    int64_t i = 0;
    for (; i + L <= D; i += L)
      for (int q = 0; q < L; q++) {
        double t = ((double)x[i + q] - mean) * invstd;
        t = scale ? t * scale[i + q] : t;
        t = bias ? t + bias[i + q] : t;
        y[i + q] = (float)t;
      }
    for (; i < D; i++) {
      double t = ((double)x[i] - mean) * invstd;
      t = scale ? t * scale[i] : t;
      t = bias ? t + bias[i] : t;
      y[i] = (float)t;
    }
    j->omean[r] = (float)mean;
    j->oinvstd[r] = (float)invstd;
  }
}

/* dx of one row: with g = dy scale and xhat = (x - mean) invstd, the
 * means of g and of g xhat (in lanes), then dx = invstd (g - mean(g) -
 * xhat mean(g xhat)) in double, rounded once. */
static void bwd_rows(void *ctx, int64_t r0, int64_t r1) {
  const ln_job *j = ctx;
  const int64_t D = j->k->cols;
  const float *scale = j->scale;
  for (int64_t r = r0; r < r1; r++) {
    const float *x = j->x + r * D, *dy = j->dy + r * D;
    float *dx = j->dx + r * D;
    const double mean = j->mean[r], invstd = j->invstd[r];
    double lg[L] = {0}, lgx[L] = {0};
    int64_t i = 0;
    for (; i + L <= D; i += L)
      for (int q = 0; q < L; q++) {
        double g = scale ? (double)dy[i + q] * scale[i + q] : (double)dy[i + q];
        lg[q] += g;
        lgx[q] += g * (((double)x[i + q] - mean) * invstd);
      }
    for (int q = 0; i < D; i++, q++) {
      double g = scale ? (double)dy[i] * scale[i] : (double)dy[i];
      lg[q] += g;
      lgx[q] += g * (((double)x[i] - mean) * invstd);
    }
    const double sg = sgk_sum_lanes(lg) / (double)D, sgx = sgk_sum_lanes(lgx) / (double)D;
    for (i = 0; i + L <= D; i += L)
      for (int q = 0; q < L; q++) {
        double g = scale ? (double)dy[i + q] * scale[i + q] : (double)dy[i + q];
        double xhat = ((double)x[i + q] - mean) * invstd;
        dx[i + q] = (float)(invstd * (g - sg - xhat * sgx));
      }
    for (; i < D; i++) {
      double g = scale ? (double)dy[i] * scale[i] : (double)dy[i];
      double xhat = ((double)x[i] - mean) * invstd;
      dx[i] = (float)(invstd * (g - sg - xhat * sgx));
    }
  }
}

/* dscale and dbias of columns [c0, c1): each column adds its rows in order
 * (the same bits whatever the split); the columns go eight at a time. */
static void bwd_cols(void *ctx, int64_t c0, int64_t c1) {
  const ln_job *j = ctx;
  const int64_t D = j->k->cols, R = j->k->rows;
  double *restrict as = j->acc, *restrict ab = j->acc + D;
  for (int64_t c = c0; c < c1; c++) as[c] = ab[c] = 0;
  for (int64_t r = 0; r < R; r++) {
    const float *restrict x = j->x + r * D, *restrict dy = j->dy + r * D;
    const double mean = j->mean[r], invstd = j->invstd[r];
    int64_t c = c0;
    for (; c + L <= c1; c += L)
      for (int q = 0; q < L; q++) {
        as[c + q] += (double)dy[c + q] * (((double)x[c + q] - mean) * invstd);
        ab[c + q] += dy[c + q];
      }
    for (; c < c1; c++) {
      as[c] += (double)dy[c] * (((double)x[c] - mean) * invstd);
      ab[c] += dy[c];
    }
  }
  for (int64_t c = c0; c < c1; c++) {
    j->dscale[c] = (float)as[c];
    j->dbias[c] = (float)ab[c];
  }
}
#undef L

static sg_status ln_run(sg__cpu_state *st, sg__kernel *base, void *const *in, void *const *out,
                        const sg__run_ctx *ctx) {
  (void)ctx;
  const ln_kernel *k = (const ln_kernel *)base;
  ln_job j = {.k = k};
  int64_t per_row = 1 + 16384 / k->cols;
  if (k->base.kind == SG_OP_LAYER_NORM) {
    j.x = in[0];
    j.scale = k->has_scale ? in[1] : NULL;
    j.bias = k->has_bias ? in[2] : NULL;
    j.y = out[0];
    j.omean = out[1];
    j.oinvstd = out[2];
    sg__cpu_parallel_for(k->rows, per_row, fwd_rows, &j);
    return SG_OK;
  }
  j.dy = in[0];
  j.x = in[1];
  j.scale = k->has_scale ? in[2] : NULL;
  j.mean = in[3];
  j.invstd = in[4];
  j.dx = out[0];
  j.dscale = out[1];
  j.dbias = out[2];
  j.acc = (double *)st->ws;
  sg__cpu_parallel_for(k->rows, per_row, bwd_rows, &j);
  sg__cpu_parallel_for(k->cols, 1 + 16384 / k->rows, bwd_cols, &j);
  return SG_OK;
}

sg_status sg__cpu_create_layer_norm(sg__cpu_state *st, const sg_graph *g, const sg__op *op,
                                    sg__exec_mode mode, sg__kernel **out) {
  (void)mode;
  bool fwd = op->kind == SG_OP_LAYER_NORM;
  const sg__tensor *x = sg__cpu_in(g, op, fwd ? 0 : 1);
  for (int i = 0; i < op->n_inputs; i++) {
    const sg__tensor *t = sg__cpu_in(g, op, i);
    if (t && t->dtype != SG_F32) return sg__cpu_unsupported(g, op, " (layer norm takes f32)");
  }
  int axis;
  if (!sg__norm_axis(sg__attr_i(op, 0), x->ndim, &axis))
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "axis %lld is out of range", (long long)sg__attr_i(op, 0));
  sg__kernel *kb;
  SG_CHECK(sg__cpu_kernel_new(op, sizeof(ln_kernel), ln_run, &kb));
  ln_kernel *k = (ln_kernel *)kb;
  k->rows = sg__numel(axis, x->dims);
  k->cols = sg__numel(x->ndim - axis, x->dims + axis);
  k->eps = fwd ? sg__attr_f(op, 1) : 0;
  k->has_scale = sg__cpu_in(g, op, fwd ? 1 : 2) != NULL;
  k->has_bias = fwd && sg__cpu_in(g, op, 2) != NULL;
  if (!fwd) {
    sg_status s = sg__cpu_ws_reserve(st, sizeof(double) * 2 * (size_t)k->cols);
    if (s != SG_OK) {
      sg__free(kb);
      return s;
    }
  }
  *out = kb;
  return SG_OK;
}
