/* A small harness shared by the CPU backend tests: runs one op of a
 * finalized graph on the cpu backend (create the backend, a buffer per
 * tensor, upload, kernel_create, kernel_run, download) and compares it with
 * the double-precision reference of ref_ops.c. Static functions only, so
 * each test file includes its own copy. */
#ifndef SG_TEST_CPU_HARNESS_H
#define SG_TEST_CPU_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "ref_ops.h"
#include "test_util.h"

#define D(...) ((const int64_t[]){__VA_ARGS__})
#define NDIM(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))

static int h_counter;

/* A source tensor with an automatic name. */
static sg_tensor h_src(sg_graph *g, sg_role role, sg_dtype dt, int ndim, const int64_t *dims,
                       const void *data) {
  char name[32];
  snprintf(name, sizeof name, "s%d", h_counter++);
  sg_tensor t = sg_graph_add_tensor(g, name, dt, role, ndim, dims, data);
  if (t.id < 0) fprintf(stderr, "h_src: %s\n", sg_last_error());
  assert_true(t.id >= 0);
  return t;
}
#define IN(g, ...) h_src(g, SG_ROLE_INPUT, SG_F32, NDIM(__VA_ARGS__), D(__VA_ARGS__), NULL)

static sg_graph *h_graph(void) {
  sg_graph *g = NULL;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  h_counter = 0;
  return g;
}

/* Host copies of every tensor, as raw bytes of its dtype. */
typedef struct h_host {
  int32_t n;
  void **p;
} h_host;

static size_t h_nbytes(const sg_graph *g, int32_t t) {
  sg_tensor_info ti;
  assert_int_equal(sg_graph_tensor_info(g, (sg_tensor){t}, &ti), SG_OK);
  return ti.nbytes ? ti.nbytes : 1;
}

static double h_get(const sg_graph *g, const h_host *h, int32_t t, int64_t i) {
  sg_tensor_info ti;
  sg_graph_tensor_info(g, (sg_tensor){t}, &ti);
  switch (ti.dtype) {
    case SG_F32: return ((const float *)h->p[t])[i];
    case SG_I32: return ((const int32_t *)h->p[t])[i];
    case SG_I64: return (double)((const int64_t *)h->p[t])[i];
    case SG_U8:
    case SG_BOOL: return ((const uint8_t *)h->p[t])[i];
    default: fail_msg("unexpected dtype");
  }
  return 0;
}

static void h_set(const sg_graph *g, h_host *h, int32_t t, int64_t i, double v) {
  sg_tensor_info ti;
  sg_graph_tensor_info(g, (sg_tensor){t}, &ti);
  switch (ti.dtype) {
    case SG_F32: ((float *)h->p[t])[i] = (float)v; break;
    case SG_I32: ((int32_t *)h->p[t])[i] = (int32_t)v; break;
    case SG_I64: ((int64_t *)h->p[t])[i] = (int64_t)v; break;
    case SG_U8:
    case SG_BOOL: ((uint8_t *)h->p[t])[i] = (uint8_t)v; break;
    default: fail_msg("unexpected dtype");
  }
}

/* Source tensors: their initializer, else pseudo-random values (f32 in
 * [-1, 1), integers in -7..7); then every op before `upto` is evaluated with
 * the reference so that op `upto` sees consistent inputs (e.g. a backward op
 * gets the forward output), rounded to the tensors' dtypes. */
static h_host h_prepare(const sg_graph *g, int32_t upto, int train, uint64_t seed) {
  h_host h = {sg_graph_num_tensors(g), NULL};
  h.p = calloc((size_t)h.n, sizeof(void *));
  assert_non_null(h.p);
  ref_values *rv;
  assert_int_equal(ref_values_create(g, &rv), SG_OK);
  for (int32_t t = 0; t < h.n; t++) {
    sg_tensor_info ti;
    sg_graph_tensor_info(g, (sg_tensor){t}, &ti);
    h.p[t] = calloc(1, h_nbytes(g, t));
    assert_non_null(h.p[t]);
    if (ti.producer >= 0 || ti.data) continue;
    float *f = malloc(sizeof(float) * (size_t)ti.numel);
    sg_test_fill(f, (size_t)ti.numel, seed * 1000 + (uint64_t)t + 1);
    for (int64_t i = 0; i < ti.numel; i++)
      rv->v[t][i] = ti.dtype == SG_F32                         ? (double)f[i]
                    : ti.dtype == SG_U8 || ti.dtype == SG_BOOL ? (double)(f[i] > 0)
                                                               : floor((double)f[i] * 7.5 + 0.5);
    free(f);
  }
  /* Evaluate ops before `upto` with values rounded to each dtype. */
  for (int32_t t = 0; t < h.n; t++)
    for (int64_t i = 0; i < rv->numel[t]; i++) h_set(g, &h, t, i, rv->v[t][i]);
  for (int32_t o = 0; o < upto; o++) {
    sg_op_info info;
    sg_graph_op_info(g, o, &info);
    double *in[64], *out[4];
    for (int i = 0; i < info.n_inputs; i++) in[i] = info.inputs[i] >= 0 ? rv->v[info.inputs[i]] : NULL;
    for (int i = 0; i < info.n_outputs; i++) out[i] = rv->v[info.outputs[i]];
    assert_int_equal(ref_run_op(g, o, train, in, out, 0, seed), SG_OK);
    for (int i = 0; i < info.n_outputs; i++) {
      int32_t t = info.outputs[i];
      for (int64_t e = 0; e < rv->numel[t]; e++) {
        h_set(g, &h, t, e, rv->v[t][e]);
        rv->v[t][e] = h_get(g, &h, t, e);
      }
    }
  }
  ref_values_destroy(rv);
  return h;
}

static void h_free(h_host *h) {
  for (int32_t t = 0; t < h->n; t++) free(h->p[t]);
  free(h->p);
  h->p = NULL;
}

/* The backend side of one op: state, device buffers, kernel. */
typedef struct h_dev {
  const sg__backend_i *be;
  void *st;
  void **buf; /* per tensor */
  int32_t n;
  sg__kernel *k;
  void *in[64], *out[4];
} h_dev;

static sg_status h_dev_open(const sg_graph *g, int32_t op, sg__exec_mode mode, int threads, const h_host *h,
                            h_dev *d) {
  memset(d, 0, sizeof *d);
  d->be = &sg__cpu_backend;
  sg__backend_config cfg = {threads, 42};
  assert_int_equal(d->be->create(&cfg, &d->st), SG_OK);
  d->n = sg_graph_num_tensors(g);
  d->buf = calloc((size_t)d->n, sizeof(void *));
  for (int32_t t = 0; t < d->n; t++) {
    assert_int_equal(d->be->buffer_alloc(d->st, h_nbytes(g, t), &d->buf[t]), SG_OK);
    assert_int_equal((uintptr_t)d->buf[t] % 64, 0);
    assert_int_equal(d->be->upload(d->st, d->buf[t], h->p[t], h_nbytes(g, t)), SG_OK);
  }
  sg_op_info info;
  sg_graph_op_info(g, op, &info);
  for (int i = 0; i < info.n_inputs; i++) d->in[i] = info.inputs[i] >= 0 ? d->buf[info.inputs[i]] : NULL;
  for (int i = 0; i < info.n_outputs; i++) d->out[i] = d->buf[info.outputs[i]];
  return d->be->kernel_create(d->st, g, op, mode, &d->k);
}

static sg_status h_dev_run(h_dev *d, uint64_t step, uint64_t seed) {
  sg__run_ctx ctx = {step, seed};
  return d->be->kernel_run(d->st, d->k, d->in, d->out, &ctx);
}

static void h_dev_download(const sg_graph *g, h_dev *d, h_host *h) {
  assert_int_equal(d->be->synchronize(d->st), SG_OK);
  for (int32_t t = 0; t < d->n; t++)
    assert_int_equal(d->be->download(d->st, h->p[t], d->buf[t], h_nbytes(g, t)), SG_OK);
}

static void h_dev_close(h_dev *d) {
  d->be->kernel_destroy(d->st, d->k);
  for (int32_t t = 0; t < d->n; t++) d->be->buffer_free(d->st, d->buf[t]);
  free(d->buf);
  d->be->destroy(d->st);
  memset(d, 0, sizeof *d);
}

/* Largest violation of |got - want| <= atol + rtol |want| over tensor t,
 * reported with the tensor's name; fails the test when it exceeds 1. */
static double h_compare(const sg_graph *g, int32_t t, const h_host *got, const double *want, double rtol,
                        double atol, const char *what) {
  sg_tensor_info ti;
  sg_graph_tensor_info(g, (sg_tensor){t}, &ti);
  double worst = 0;
  int64_t at = -1;
  for (int64_t i = 0; i < ti.numel; i++) {
    double a = h_get(g, got, t, i), b = want[i];
    double r = a == b ? 0.0 : fabs(a - b) / (atol + rtol * fabs(b));
    if (!(r <= worst)) {
      worst = r;
      at = i;
    }
  }
  if (!(worst <= 1.0)) {
    fprintf(stderr, "%s: tensor '%s' element %lld: got %.9g want %.9g (rtol %g atol %g)\n", what, ti.name,
            (long long)at, h_get(g, got, t, at), want[at], rtol, atol);
    fail();
  }
  return worst;
}

/* Runs op `op` (earlier ops evaluated by the reference) on the backend
 * `runs` times (steps 0, 1, ...) and the reference as often, and compares
 * every tensor the op writes, including inputs it updates in place. */
static void h_check_op_runs(const sg_graph *g, int32_t op, int train, double rtol, double atol, int runs,
                            const char *what) {
  const uint64_t seed = 7;
  h_host h = h_prepare(g, op, train, seed);
  /* Reference inputs: the host values (already rounded to their dtypes). */
  ref_values *rv;
  assert_int_equal(ref_values_create(g, &rv), SG_OK);
  for (int32_t t = 0; t < h.n; t++)
    for (int64_t i = 0; i < rv->numel[t]; i++) rv->v[t][i] = h_get(g, &h, t, i);
  h_dev d;
  sg_status s = h_dev_open(g, op, train ? SG__MODE_TRAIN : SG__MODE_EVAL, 2, &h, &d);
  if (s != SG_OK) fprintf(stderr, "%s: kernel_create: %s\n", what, sg_last_error());
  assert_int_equal(s, SG_OK);
  sg_op_info info;
  sg_graph_op_info(g, op, &info);
  double *in[64], *out[4];
  for (int i = 0; i < info.n_inputs; i++) in[i] = info.inputs[i] >= 0 ? rv->v[info.inputs[i]] : NULL;
  for (int i = 0; i < info.n_outputs; i++) out[i] = rv->v[info.outputs[i]];
  for (int r = 0; r < runs; r++) {
    s = h_dev_run(&d, (uint64_t)r, seed);
    if (s != SG_OK) fprintf(stderr, "%s: kernel_run: %s\n", what, sg_last_error());
    assert_int_equal(s, SG_OK);
    assert_int_equal(ref_run_op(g, op, train, in, out, (uint64_t)r, seed), SG_OK);
  }
  h_dev_download(g, &d, &h);
  for (int i = 0; i < info.n_outputs; i++)
    h_compare(g, info.outputs[i], &h, rv->v[info.outputs[i]], rtol, atol, what);
  for (int i = 0; i < info.n_inputs; i++)
    if (info.inputs[i] >= 0) h_compare(g, info.inputs[i], &h, rv->v[info.inputs[i]], rtol, atol, what);
  h_dev_close(&d);
  ref_values_destroy(rv);
  h_free(&h);
}

static void h_check_op(const sg_graph *g, int32_t op, int train, double rtol, double atol, const char *what) {
  h_check_op_runs(g, op, train, rtol, atol, 1, what);
}

/* Finalizes g and checks its last op. */
static void h_check_last(sg_graph *g, int train, double rtol, double atol, const char *what) {
  sg_status s = sg_graph_finalize(g);
  if (s != SG_OK) fprintf(stderr, "%s: finalize: %s\n", what, sg_last_error());
  assert_int_equal(s, SG_OK);
  h_check_op(g, sg_graph_num_ops(g) - 1, train, rtol, atol, what);
}

#endif /* SG_TEST_CPU_HARNESS_H */
