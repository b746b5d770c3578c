/* reduce_max, reduce_min (kinds 68, 69) and reduce_max_backward (70),
 * ONNX ReduceMax/ReduceMin and torch.amax/torch.amin:
 *  - forward through a CPU session against hand-computed values: ties,
 *    negative values, NaN (propagated, as PyTorch), -inf, keepdims, one,
 *    several and all axes, f32, i32 and i64;
 *  - the kernel against a double-precision reference written here (ref_ops.c
 *    is full) on pseudo-random inputs, every subset of axes of shapes up to
 *    rank 4, both keepdims, every dtype;
 *  - the gradient against central finite differences of the loss, computed
 *    in double by the same reference, on tie-free inputs, and PyTorch's
 *    tie-splitting rule (dy / count to each maximal element; NaN rows NaN)
 *    by hand;
 *  - the backward ops, builder errors naming the op and the .sgg round trip. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "sgrt/sgrt.h"
#include "test_util.h"

#define D(...) ((const int64_t[]){__VA_ARGS__})

/* ---- the reference ------------------------------------------------------- */

/* y = max (min) of x over the dims marked in `reduced`, in double, with NaN
 * propagating; y laid out as x with the reduced dims removed. */
static void ref_reduce(const double *x, int ndim, const int64_t *dims, const bool *reduced, bool min,
                       double *y, int64_t *out_n) {
  int64_t n = 1, ostride[8], s = 1;
  for (int a = ndim - 1; a >= 0; a--) {
    ostride[a] = reduced[a] ? 0 : s;
    s *= reduced[a] ? 1 : dims[a];
    n *= dims[a];
  }
  *out_n = s;
  bool *seen = calloc((size_t)s, 1);
  assert_non_null(seen);
  for (int64_t i = 0; i < n; i++) {
    int64_t o = 0, rest = i;
    for (int a = ndim - 1; a >= 0; a--) {
      o += rest % dims[a] * ostride[a];
      rest /= dims[a];
    }
    double v = x[i];
    if (!seen[o] || isnan(v) || (!isnan(y[o]) && (min ? v < y[o] : v > y[o]))) y[o] = v;
    seen[o] = true;
  }
  free(seen);
}

/* ---- a session around one op ---------------------------------------------- */

typedef struct rcase {
  sg_dtype dt;
  int ndim;
  int64_t dims[4];
  int naxes;
  int64_t axes[4];
  int keepdims, min;
} rcase;

/* y of the op on x (as doubles); y's shape into ydims/yndim. */
static void run_forward(const rcase *c, const double *x, double *y, int *yndim, int64_t *ydims) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  sg_tensor xt = sg_input(g, "x", c->dt, c->ndim, c->dims);
  sg_tensor yt = (c->min ? sg_reduce_min : sg_reduce_max)(g, xt, c->naxes, c->axes, c->keepdims);
  assert_status(sg_tensor_set_name(g, yt, "y"), SG_OK, NULL);
  assert_status(sg_graph_mark_output(g, yt), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  sg_tensor_info yi;
  assert_int_equal(sg_graph_tensor_info(g, yt, &yi), SG_OK);
  *yndim = yi.ndim;
  for (int i = 0; i < yi.ndim; i++) ydims[i] = yi.dims[i];
  int64_t n = 1;
  for (int i = 0; i < c->ndim; i++) n *= c->dims[i];
  size_t es = c->dt == SG_I64 ? 8 : 4;
  void *xb = malloc(es * (size_t)n), *yb = malloc(es * (size_t)yi.numel + 8);
  for (int64_t i = 0; i < n; i++) {
    if (c->dt == SG_F32) ((float *)xb)[i] = (float)x[i];
    else if (c->dt == SG_I32) ((int32_t *)xb)[i] = (int32_t)x[i];
    else ((int64_t *)xb)[i] = (int64_t)x[i];
  }
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sp.threads = 2;
  sg_session *s;
  assert_status(sg_session_create(g, &sp, &s), SG_OK, NULL);
  assert_status(sg_session_compile(s), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "x", c->dt, c->ndim, c->dims, xb), SG_OK, NULL);
  assert_status(sg_session_forward(s), SG_OK, NULL);
  assert_status(sg_session_read(s, "y", yb, es * (size_t)yi.numel), SG_OK, NULL);
  for (int64_t i = 0; i < yi.numel; i++)
    y[i] = c->dt == SG_F32   ? ((float *)yb)[i]
           : c->dt == SG_I32 ? ((int32_t *)yb)[i]
                             : (double)((int64_t *)yb)[i];
  free(xb);
  free(yb);
  sg_session_destroy(s);
  sg_graph_destroy(g);
}

static bool same_value(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

static void expect_values(const char *what, const double *got, const double *want, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (!same_value(got[i], want[i]))
      fail_msg("%s: element %lld is %.17g, expected %.17g", what, (long long)i, got[i], want[i]);
}

static void test_hand_computed(void **state) {
  (void)state;
  /* x = [[1, -2, 3], [3, -5, 3]]: ties in row 1 and column 0/2. */
  const double x[] = {1, -2, 3, 3, -5, 3};
  static const struct {
    int naxes;
    int64_t axis;
    int keepdims, min;
    int yndim;
    int64_t ydims[2];
    double want[3];
  } cases[] = {
      {1, 1, 0, 0, 1, {2}, {3, 3}},   {1, -1, 1, 0, 2, {2, 1}, {3, 3}},     {1, 0, 0, 0, 1, {3}, {3, -2, 3}},
      {1, 1, 0, 1, 1, {2}, {-2, -5}}, {1, -2, 1, 1, 2, {1, 3}, {1, -5, 3}}, {0, 0, 0, 0, 0, {0}, {3}},
      {0, 0, 1, 1, 2, {1, 1}, {-5}},
  };
  const sg_dtype dts[] = {SG_F32, SG_I32, SG_I64};
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
    for (int t = 0; t < 3; t++) {
      rcase c = {dts[t], 2, {2, 3}, cases[k].naxes, {cases[k].axis}, cases[k].keepdims, cases[k].min};
      double y[6];
      int yndim;
      int64_t ydims[4];
      char what[96];
      snprintf(what, sizeof what, "%s axes %d:%lld keepdims %d dtype %d", cases[k].min ? "min" : "max",
               cases[k].naxes, (long long)cases[k].axis, cases[k].keepdims, (int)dts[t]);
      run_forward(&c, x, y, &yndim, ydims);
      assert_int_equal(yndim, cases[k].yndim);
      for (int i = 0; i < yndim; i++) assert_int_equal(ydims[i], cases[k].ydims[i]);
      int64_t n = 1;
      for (int i = 0; i < yndim; i++) n *= ydims[i];
      expect_values(what, y, cases[k].want, n);
    }
  /* NaN propagates wherever it sits in its group (first, middle, last),
   * as torch.amax / torch.amin; -inf and +inf are ordinary values. */
  const double xn[] = {NAN, 1, 2, -1, NAN, -3, -INFINITY, -INFINITY, -INFINITY, 4, INFINITY, NAN};
  double y[4];
  int yndim;
  int64_t ydims[4];
  rcase c = {SG_F32, 2, {4, 3}, 1, {1}, 0, 0};
  run_forward(&c, xn, y, &yndim, ydims);
  expect_values("max with NaN", y, (const double[]){NAN, NAN, -INFINITY, NAN}, 4);
  c.min = 1;
  run_forward(&c, xn, y, &yndim, ydims);
  expect_values("min with NaN", y, (const double[]){NAN, NAN, -INFINITY, NAN}, 4);
  c = (rcase){SG_F32, 2, {4, 3}, 1, {0}, 0, 0};
  run_forward(&c, xn, y, &yndim, ydims);
  expect_values("max with NaN down columns", y, (const double[]){NAN, NAN, NAN}, 3);
  const double xm[] = {-7, -INFINITY, -2, INFINITY, -0.5, -3};
  c = (rcase){SG_F32, 2, {2, 3}, 1, {0}, 0, 1};
  run_forward(&c, xm, y, &yndim, ydims);
  expect_values("min with infinities", y, (const double[]){-7, -INFINITY, -3}, 3);
  /* Several axes of a [2, 3, 4] input: (0, 2) keeps the middle dim. */
  double x3[24], want[3];
  for (int i = 0; i < 24; i++) x3[i] = (double)((i * 7) % 24) - 11.5;
  c = (rcase){SG_F32, 3, {2, 3, 4}, 2, {0, -1}, 1, 0};
  run_forward(&c, x3, y, &yndim, ydims);
  assert_int_equal(yndim, 3);
  assert_true(ydims[0] == 1 && ydims[1] == 3 && ydims[2] == 1);
  for (int j = 0; j < 3; j++) {
    want[j] = -INFINITY;
    for (int a = 0; a < 2; a++)
      for (int b = 0; b < 4; b++) want[j] = fmax(want[j], x3[a * 12 + j * 4 + b]);
  }
  expect_values("max over axes 0 and 2", y, want, 3);
  /* A rank-0 x is its own max. */
  c = (rcase){SG_F32, 0, {0}, 0, {0}, 0, 0};
  run_forward(&c, (const double[]){-2.5}, y, &yndim, ydims);
  assert_int_equal(yndim, 0);
  expect_values("max of a scalar", y, (const double[]){-2.5}, 1);
  /* Integer extremes are values, not sentinels. */
  const double xi[] = {(double)INT64_MIN, (double)INT64_MIN, 5, -9};
  c = (rcase){SG_I64, 2, {2, 2}, 1, {1}, 0, 0};
  run_forward(&c, xi, y, &yndim, ydims);
  expect_values("i64 max of INT64_MIN", y, (const double[]){(double)INT64_MIN, 5}, 2);
}

static void test_kernel_against_reference(void **state) {
  (void)state;
  static const int64_t shapes[][4] = {{7}, {3, 5}, {2, 9, 4}, {2, 3, 300}, {600, 2}, {2, 5, 3, 17}};
  static const int ndims[] = {1, 2, 3, 3, 2, 4};
  const sg_dtype dts[] = {SG_F32, SG_I32, SG_I64};
  for (int s = 0; s < 6; s++) {
    int64_t n = 1;
    for (int i = 0; i < ndims[s]; i++) n *= shapes[s][i];
    float *f = malloc(sizeof(float) * (size_t)n);
    double *x = malloc(sizeof(double) * (size_t)n), *want = malloc(sizeof(double) * (size_t)n);
    double *got = malloc(sizeof(double) * (size_t)n);
    sg_test_fill(f, (size_t)n, 100 + (uint64_t)s);
    for (int mask = 0; mask < (1 << ndims[s]); mask++)
      for (int t = 0; t < 3; t++)
        for (int flags = 0; flags < 4; flags++) {
          rcase c = {dts[t], ndims[s], {0}, 0, {0}, flags & 1, flags >> 1};
          bool reduced[4] = {false};
          for (int i = 0; i < ndims[s]; i++) {
            c.dims[i] = shapes[s][i];
            /* Negative axes for odd dims; mask 0 means all dims. */
            if (mask & (1 << i)) c.axes[c.naxes++] = i % 2 ? i - ndims[s] : i;
            reduced[i] = mask == 0 || (mask & (1 << i));
          }
          for (int64_t i = 0; i < n; i++)
            x[i] = dts[t] == SG_F32 ? (double)f[i] : floor((double)f[i] * 1000.0 + 0.5) * (t == 2 ? 1e9 : 1);
          int64_t out_n;
          ref_reduce(x, ndims[s], shapes[s], reduced, c.min, want, &out_n);
          int yndim;
          int64_t ydims[4];
          run_forward(&c, x, got, &yndim, ydims);
          char what[96];
          snprintf(what, sizeof what, "shape %d axes mask %d dtype %d keepdims %d min %d", s, mask,
                   (int)dts[t], c.keepdims, c.min);
          expect_values(what, got, want, out_n);
        }
    free(f);
    free(x);
    free(want);
    free(got);
  }
}

/* ---- gradients ---------------------------------------------------------------- */

/* dloss/dx through a session: loss = sum(r * op(tanh(x)) [or op(x)]). */
static void session_grad(const rcase *c, bool through_tanh, const float *x, const float *r, int64_t nr,
                         float *dx) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  sg_tensor xt = sg_parameter(g, "x", SG_F32, c->ndim, c->dims, x);
  sg_tensor in = through_tanh ? sg_tanh(g, xt) : xt;
  sg_tensor y = (c->min ? sg_reduce_min : sg_reduce_max)(g, in, c->naxes, c->axes, c->keepdims);
  sg_tensor_info yi;
  assert_status(sg_graph_tensor_info(g, y, &yi), SG_OK, NULL);
  assert_int_equal(yi.numel, nr);
  sg_tensor rt = sg_constant(g, "r", SG_F32, yi.ndim, yi.dims, r);
  assert_status(sg_graph_backward(g, sg_reduce_sum(g, sg_mul(g, y, rt), 0, NULL, 0)), SG_OK, NULL);
  sg_tensor gt;
  assert_status(sg_graph_grad(g, xt, &gt), SG_OK, NULL);
  assert_status(sg_graph_mark_output(g, gt), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sp.threads = 2;
  sg_session *s;
  assert_status(sg_session_create(g, &sp, &s), SG_OK, NULL);
  assert_status(sg_session_compile(s), SG_OK, NULL);
  assert_status(sg_session_step(s), SG_OK, NULL);
  int64_t n = 1;
  for (int i = 0; i < c->ndim; i++) n *= c->dims[i];
  assert_status(sg_session_read(s, "x.grad", dx, sizeof(float) * (size_t)n), SG_OK, NULL);
  sg_session_destroy(s);
  sg_graph_destroy(g);
}

static double ref_loss(const rcase *c, const bool *reduced, bool through_tanh, const double *x, int64_t n,
                       const float *r) {
  double *t = malloc(sizeof(double) * (size_t)n), *y = malloc(sizeof(double) * (size_t)n);
  for (int64_t i = 0; i < n; i++) t[i] = through_tanh ? tanh(x[i]) : x[i];
  int64_t out_n;
  ref_reduce(t, c->ndim, c->dims, reduced, c->min, y, &out_n);
  double l = 0;
  for (int64_t j = 0; j < out_n; j++) l += (double)r[j] * y[j];
  free(t);
  free(y);
  return l;
}

static void test_gradients_against_finite_differences(void **state) {
  (void)state;
  static const struct {
    int naxes;
    int64_t axes[3];
    int keepdims;
  } red[] = {{1, {-1}, 0}, {1, {1}, 1}, {2, {0, 2}, 0}, {0, {0}, 0}, {3, {2, 0, 1}, 1}};
  const int64_t dims[3] = {3, 4, 5}, n = 60;
  double worst = 0;
  for (size_t k = 0; k < sizeof red / sizeof *red; k++)
    for (int variant = 0; variant < 4; variant++) {
      rcase c = {SG_F32, 3, {3, 4, 5}, red[k].naxes, {0}, red[k].keepdims, variant & 1};
      bool through_tanh = variant >> 1;
      bool reduced[3] = {false};
      for (int i = 0; i < c.naxes; i++) {
        c.axes[i] = red[k].axes[i];
        reduced[(c.axes[i] + 3) % 3] = true;
      }
      for (int i = 0; i < 3; i++) reduced[i] |= c.naxes == 0;
      /* Tie-free: a permutation of 0..59 spaced 0.03 apart (so a step of
       * 1e-3 never changes which element is the max), centred on 0. */
      float xf[60], r[60], dx[60];
      double x[60];
      for (int64_t i = 0; i < n; i++)
        xf[i] = (float)(((i * 37 + 11 * (int64_t)k + variant) % 60) - 29.5) * 0.03f;
      sg_test_fill(r, 60, 900 + k);
      int64_t nr = 1;
      for (int i = 0; i < 3; i++)
        if (!reduced[i]) nr *= dims[i];
      session_grad(&c, through_tanh, xf, r, nr, dx);
      for (int64_t i = 0; i < n; i++) x[i] = xf[i];
      for (int64_t i = 0; i < n; i++) {
        const double h = 1e-3, x0 = x[i];
        x[i] = x0 + h;
        double lp = ref_loss(&c, reduced, through_tanh, x, n, r);
        x[i] = x0 - h;
        double lm = ref_loss(&c, reduced, through_tanh, x, n, r);
        x[i] = x0;
        double fd = (lp - lm) / (2 * h), err = fabs(fd - (double)dx[i]);
        worst = fmax(worst, err);
        if (!(err <= 1e-4 + 1e-3 * fabs(fd)))
          fail_msg("case %zu variant %d: dx[%lld] is %.9g, finite differences %.9g", k, variant, (long long)i,
                   (double)dx[i], fd);
      }
    }
  print_message("reduce_max/min gradients vs central differences: max |error| %.3g\n", worst);
}

/* PyTorch's amax/amin rule by hand: dy / count to each tied element, NaN
 * over a group whose result is NaN. */
static void test_ties_split_evenly(void **state) {
  (void)state;
  /* max over the last dim of [[1, 3, 3], [2, 2, 2], [NaN, 1, 2], [-1, -4, 0]] with dy = r. */
  const float x[] = {1, 3, 3, 2, 2, 2, NAN, 1, 2, -1, -4, 0}, r[] = {1, 2, 3, -4};
  float dx[12];
  rcase c = {SG_F32, 2, {4, 3}, 1, {1}, 0, 0};
  session_grad(&c, false, x, r, 4, dx);
  const double want[] = {0, 0.5, 0.5, 2.0 / 3, 2.0 / 3, 2.0 / 3, NAN, NAN, NAN, 0, 0, -4};
  for (int i = 0; i < 12; i++)
    if (!(same_value(dx[i], (double)(float)want[i])))
      fail_msg("max ties: dx[%d] is %.9g, expected %.9g", i, (double)dx[i], want[i]);
  /* min with keepdims over both dims: the two -4s share dy. */
  const float xm[] = {1, -4, 3, 2, -4, 2}, rm[] = {3};
  float dm[6];
  c = (rcase){SG_F32, 2, {2, 3}, 0, {0}, 1, 1};
  session_grad(&c, false, xm, rm, 1, dm);
  const float wm[] = {0, 1.5f, 0, 0, 1.5f, 0};
  for (int i = 0; i < 6; i++)
    if (dm[i] != wm[i]) fail_msg("min ties: dx[%d] is %.9g, expected %.9g", i, (double)dm[i], (double)wm[i]);
}

/* The backward is one reduce_max_backward with the forward's axes and
 * keepdims and min telling the kinds apart; an integer x gets none. The
 * graph survives the .sgg round trip. */
static void test_backward_ops(void **state) {
  (void)state;
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  sg_tensor x = sg_parameter(g, "x", SG_F32, 2, D(2, 3), NULL);
  sg_tensor a = sg_reduce_max(g, x, 1, D(-1), 1);
  sg_tensor b = sg_reduce_min(g, x, 1, D(0), 0);
  sg_tensor ids = sg_input(g, "ids", SG_I64, 2, D(2, 3));
  sg_tensor m = sg_cast(g, sg_reduce_max(g, ids, 0, NULL, 0), SG_F32);
  sg_tensor l = sg_add(g, sg_reduce_sum(g, sg_mul(g, a, m), 0, NULL, 0), sg_reduce_sum(g, b, 0, NULL, 0));
  assert_status(sg_graph_backward(g, l), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  int n_bwd = 0, mins = 0;
  for (int32_t i = 0; i < sg_graph_num_ops(g); i++) {
    sg_op_info oi;
    assert_int_equal(sg_graph_op_info(g, i, &oi), SG_OK);
    if (oi.kind != SG_OP_REDUCE_MAX_BACKWARD) continue;
    n_bwd++;
    assert_int_equal(oi.n_inputs, 3);
    sg_attr at;
    assert_int_equal(sg_graph_op_attr(g, i, 2, &at), SG_OK);
    int64_t is_min = at.i;
    mins += (int)is_min;
    assert_int_equal(sg_graph_op_attr(g, i, 1, &at), SG_OK);
    assert_int_equal(at.i, !is_min); /* keepdims as the forward's: 1 for the max, 0 for the min */
  }
  assert_int_equal(n_bwd, 2);
  assert_int_equal(mins, 1);
  assert_string_equal(sg_op_kind_name(SG_OP_REDUCE_MAX), "reduce_max");
  assert_string_equal(sg_op_kind_name(SG_OP_REDUCE_MIN), "reduce_min");
  assert_string_equal(sg_op_kind_name(SG_OP_REDUCE_MAX_BACKWARD), "reduce_max_backward");
  sg_graph *h = sg_test_sgg_round_trip(g);
  assert_int_equal(sg_graph_num_ops(h), sg_graph_num_ops(g));
  sg_graph_destroy(h);
  sg_graph_destroy(g);
}

static void expect_error(sg_tensor (*build)(sg_graph *), sg_status st, const char *needle) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  assert_true(build(g).id < 0);
  assert_status(sg_graph_status(g), st, needle);
  sg_graph_destroy(g);
}
static sg_tensor bad_axis(sg_graph *g) {
  return sg_reduce_max(g, sg_input(g, "x", SG_F32, 2, D(2, 3)), 1, D(2), 0);
}
static sg_tensor bad_neg_axis(sg_graph *g) {
  return sg_reduce_min(g, sg_input(g, "x", SG_F32, 2, D(2, 3)), 1, D(-3), 0);
}
static sg_tensor bad_twice(sg_graph *g) {
  return sg_reduce_max(g, sg_input(g, "x", SG_F32, 2, D(2, 3)), 2, D(1, -1), 0);
}
static sg_tensor bad_keepdims(sg_graph *g) {
  return sg_reduce_max(g, sg_input(g, "x", SG_F32, 2, D(2, 3)), 1, D(0), 2);
}
static sg_tensor bad_dtype(sg_graph *g) {
  return sg_reduce_min(g, sg_input(g, "x", SG_BOOL, 1, D(3)), 0, NULL, 0);
}

static void test_builder_errors(void **state) {
  (void)state;
  expect_error(bad_axis, SG_ERR_ATTRIBUTE, "axis 2 is out of range for x 'x' [2,3] f32");
  expect_error(bad_neg_axis, SG_ERR_ATTRIBUTE, "reduce_min");
  expect_error(bad_twice, SG_ERR_ATTRIBUTE, "axis 1 is listed twice");
  expect_error(bad_keepdims, SG_ERR_ATTRIBUTE, "keepdims");
  expect_error(bad_dtype, SG_ERR_DTYPE, "must be a float type, i32 or i64");
  expect_error(bad_axis, SG_ERR_ATTRIBUTE, "reduce_max");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hand_computed),
      cmocka_unit_test(test_kernel_against_reference),
      cmocka_unit_test(test_gradients_against_finite_differences),
      cmocka_unit_test(test_ties_split_evenly),
      cmocka_unit_test(test_backward_ops),
      cmocka_unit_test(test_builder_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
