/* The numeric check of gradient rules shared by test_autodiff.c and
 * test_ops_math.c: a graph of parameters and ops, loss = sum(out * R) for a
 * fixed random R, sg_graph_backward, then every parameter's gradient from
 * the double-precision reference (ref_ops.c) against central finite
 * differences of the loss. Static functions only, so each test file
 * includes its own copy. */
#ifndef SG_TEST_NCHECK_H
#define SG_TEST_NCHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ref_ops.h"
#include "test_util.h"

#ifndef D
#define D(...) ((const int64_t[]){__VA_ARGS__})
#endif
#ifndef NDIM
#define NDIM(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#endif

typedef struct ncase {
  sg_graph *g;
  sg_tensor params[4];
  int n_params;
  uint64_t seed;
} ncase;

/* A parameter with values in +-[0.1, 1] (or [0.2, 1.2] when positive), away
 * from the kinks of relu, clip and max. */
static sg_tensor nparam(ncase *c, int positive, int ndim, const int64_t *dims) {
  char name[16];
  snprintf(name, sizeof name, "p%d", c->n_params);
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= dims[i];
  float *v = malloc((size_t)n * sizeof *v);
  assert_non_null(v);
  sg_test_fill(v, (size_t)n, ++c->seed);
  for (int64_t i = 0; i < n; i++) {
    v[i] = v[i] >= 0 ? v[i] * 0.9f + 0.1f : v[i] * 0.9f - 0.1f;
    if (positive) v[i] = fabsf(v[i]) + 0.1f;
  }
  sg_tensor t = sg_parameter(c->g, name, SG_F32, ndim, dims, v);
  free(v);
  c->params[c->n_params++] = t;
  return t;
}
#define NP(c, ...) nparam(c, 0, NDIM(__VA_ARGS__), D(__VA_ARGS__))
#define NPOS(c, ...) nparam(c, 1, NDIM(__VA_ARGS__), D(__VA_ARGS__))

static ncase nbegin(void) {
  ncase c = {0};
  assert_int_equal(sg_graph_create(&c.g), SG_OK);
  return c;
}

/* loss = sum(out * R) for a fixed random R; differentiates, evaluates the
 * training graph in double precision and compares every parameter's
 * gradient with central differences of the loss. `labels` (may be NULL)
 * feeds the input "labels". */
static void ncheck(ncase *c, const char *what, sg_tensor out, const int64_t *labels) {
  sg_graph *g = c->g;
  sg_tensor_info oi;
  if (sg_graph_tensor_info(g, out, &oi) != SG_OK) fail_msg("%s: building failed: %s", what, sg_last_error());
  float *r = malloc(oi.nbytes);
  assert_non_null(r);
  sg_test_fill(r, (size_t)oi.numel, 777);
  sg_tensor R = sg_constant(g, "R", SG_F32, oi.ndim, oi.dims, r);
  free(r);
  sg_tensor loss = sg_reduce_sum(g, sg_mul(g, out, R), 0, NULL, 0);
  assert_status(sg_graph_backward(g, loss), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  ref_values *rv = NULL;
  assert_int_equal(ref_values_create(g, &rv), SG_OK);
  sg_tensor lab;
  if (labels && sg_graph_find_tensor(g, "labels", &lab) == SG_OK) ref_values_set_i64(rv, lab, labels);
  assert_status(ref_run_graph(g, 1, 0, 0, rv), SG_OK, NULL);
  for (int p = 0; p < c->n_params; p++) {
    sg_tensor gt;
    assert_status(sg_graph_grad(g, c->params[p], &gt), SG_OK, NULL);
    int32_t id = c->params[p].id;
    double max_num = 0, max_err = 0;
    for (int64_t i = 0; i < rv->numel[id]; i++) {
      ref_values *pert = NULL;
      assert_int_equal(ref_values_clone(rv, &pert), SG_OK);
      const double v = rv->v[id][i], h = 1e-5;
      pert->v[id][i] = v + h;
      assert_int_equal(ref_run_graph(g, 1, 0, 0, pert), SG_OK);
      double lp = pert->v[loss.id][0];
      pert->v[id][i] = v - h;
      assert_int_equal(ref_run_graph(g, 1, 0, 0, pert), SG_OK);
      double num = (lp - pert->v[loss.id][0]) / (2 * h);
      ref_values_destroy(pert);
      max_num = fmax(max_num, fabs(num));
      max_err = fmax(max_err, fabs(num - rv->v[gt.id][i]));
    }
    if (max_err / fmax(max_num, 1e-3) > 1e-6) {
      sg_tensor_info pi;
      assert_int_equal(sg_graph_tensor_info(g, c->params[p], &pi), SG_OK);
      fail_msg("%s: gradient of '%s' (rank %d, %lld elements) is off by %.3g (largest |numeric| %.3g)", what,
               pi.name, pi.ndim, (long long)pi.numel, max_err, max_num);
    }
  }
  ref_values_destroy(rv);
  sg_graph_destroy(g);
}

#endif /* SG_TEST_NCHECK_H */
