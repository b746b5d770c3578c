/* topk (kind 71) and topk_backward (72), ONNX TopK and torch.topk:
 *  - forward through a CPU session against hand-computed values: ties (the
 *    lower index first), NaN (above every number), -inf, k = 1 and k = n,
 *    largest and smallest;
 *  - the kernel against a reference written here (every index sorted by
 *    the same order with qsort) on pseudo-random rows with many ties, rows
 *    in ascending and descending order (the heap's worst cases);
 *  - the gradient against central finite differences of a loss through
 *    tanh (tie-free inputs), and a hand-computed scatter;
 *  - topk_backward's run-time index check, builder errors naming the op and
 *    the .sgg round trip. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "sgrt/sgrt.h"
#include "test_util.h"

#define D(...) ((const int64_t[]){__VA_ARGS__})

/* ---- the reference ----------------------------------------------------- */

typedef struct ref_row {
  const float *x;
  int largest;
} ref_row;
static ref_row g_row; /* qsort has no context argument */

/* The order: larger (smaller) values first, NaN counted above every number (torch.topk's), then the
 * lower index (ONNX's). */
static int ref_cmp(const void *pa, const void *pb) {
  int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
  float va = g_row.x[a], vb = g_row.x[b];
  if (isnan(va) != isnan(vb)) return isnan(va) == (g_row.largest != 0) ? -1 : 1;
  if (!isnan(va) && va != vb) return (g_row.largest ? va > vb : va < vb) ? -1 : 1;
  return a < b ? -1 : 1;
}

static void ref_topk(const float *x, int64_t rows, int64_t n, int64_t k, int largest, float *v,
                     int64_t *idx) {
  int64_t *order = malloc(sizeof *order * (size_t)n);
  assert_non_null(order);
  for (int64_t r = 0; r < rows; r++) {
    for (int64_t i = 0; i < n; i++) order[i] = i;
    g_row = (ref_row){x + r * n, largest};
    qsort(order, (size_t)n, sizeof *order, ref_cmp);
    for (int64_t j = 0; j < k; j++) {
      idx[r * k + j] = order[j];
      v[r * k + j] = x[r * n + order[j]];
    }
  }
  free(order);
}

/* ---- a session around one op --------------------------------------------- */

/* values and indices of topk(x [rows, n]) through a compiled session. */
static void run_topk(const float *x, int64_t rows, int64_t n, int64_t k, int largest, float *v,
                     int64_t *idx) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  sg_tensor xt = sg_input(g, "x", SG_F32, 2, D(rows, n)), it;
  sg_tensor vt = sg_topk(g, xt, k, largest, &it);
  assert_status(sg_tensor_set_name(g, vt, "v"), SG_OK, NULL);
  assert_status(sg_tensor_set_name(g, it, "i"), SG_OK, NULL);
  assert_status(sg_graph_mark_output(g, vt), SG_OK, NULL);
  assert_status(sg_graph_mark_output(g, it), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sp.threads = 2;
  sg_session *s;
  assert_status(sg_session_create(g, &sp, &s), SG_OK, NULL);
  assert_status(sg_session_compile(s), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "x", SG_F32, 2, D(rows, n), x), SG_OK, NULL);
  assert_status(sg_session_forward(s), SG_OK, NULL);
  assert_status(sg_session_read(s, "v", v, sizeof(float) * (size_t)(rows * k)), SG_OK, NULL);
  assert_status(sg_session_read(s, "i", idx, sizeof(int64_t) * (size_t)(rows * k)), SG_OK, NULL);
  sg_session_destroy(s);
  sg_graph_destroy(g);
}

static bool same_value(float a, float b) { return a == b || (isnan(a) && isnan(b)); }

static void test_hand_computed(void **state) {
  (void)state;
  /* row 0: ties of 5 at 1, 4 and 6; row 1: a NaN and -inf */
  const float x[] = {1, 5, -2, 3, 5, 0, 5, 2, -1, NAN, 4, -INFINITY, 4, 0};
  float v[14];
  int64_t i[14];
  run_topk(x, 2, 7, 3, 1, v, i);
  const float v_large[] = {5, 5, 5, NAN, 4, 4};
  const int64_t i_large[] = {1, 4, 6, 2, 3, 5};
  for (int j = 0; j < 6; j++) {
    assert_true(same_value(v[j], v_large[j]));
    assert_int_equal(i[j], i_large[j]);
  }
  run_topk(x, 2, 7, 2, 0, v, i);
  const float v_small[] = {-2, 0, -INFINITY, -1};
  const int64_t i_small[] = {2, 5, 4, 1};
  for (int j = 0; j < 4; j++) {
    assert_true(v[j] == v_small[j]);
    assert_int_equal(i[j], i_small[j]);
  }
  run_topk(x, 2, 7, 1, 1, v, i); /* k = 1: the first of the tied maxima */
  assert_int_equal(i[0], 1);
  assert_int_equal(i[1], 2);
  run_topk(x, 2, 7, 7, 0, v, i); /* k = n, smallest first: the NaN last */
  const int64_t i_all[] = {2, 5, 0, 3, 1, 4, 6};
  for (int j = 0; j < 7; j++) assert_int_equal(i[j], i_all[j]);
  assert_true(isnan(v[13]) && i[13] == 2);
}

static void test_kernel_against_reference(void **state) {
  (void)state;
  const int64_t rows = 5, n = 97;
  float *x = malloc(sizeof(float) * (size_t)(rows * n));
  float *v = malloc(sizeof(float) * (size_t)(rows * n)), *rv = malloc(sizeof(float) * (size_t)(rows * n));
  int64_t *i = malloc(sizeof(int64_t) * (size_t)(rows * n)),
          *ri = malloc(sizeof(int64_t) * (size_t)(rows * n));
  assert_true(x && v && rv && i && ri);
  uint64_t s = 12345;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < n; j++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      float rnd = (float)((s >> 40) % 13) - 6.0f;                       /* 13 values: many ties */
      x[r * n + j] = r == 3 ? (float)j : r == 4 ? (float)(n - j) : rnd; /* ascending, descending */
    }
  x[2 * n + 50] = NAN;
  const int64_t ks[] = {1, 2, 7, 40, 97};
  for (int kk = 0; kk < 5; kk++)
    for (int largest = 0; largest <= 1; largest++) {
      run_topk(x, rows, n, ks[kk], largest, v, i);
      ref_topk(x, rows, n, ks[kk], largest, rv, ri);
      for (int64_t j = 0; j < rows * ks[kk]; j++) {
        assert_int_equal(i[j], ri[j]);
        assert_true(same_value(v[j], rv[j]));
      }
    }
  free(x);
  free(v);
  free(rv);
  free(i);
  free(ri);
}

/* dx of sum(topk(tanh(x)) * w) through a session. */
static void session_grad(const float *x, int64_t rows, int64_t n, int64_t k, int largest, const float *w,
                         float *dx) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  sg_tensor xt = sg_parameter(g, "x", SG_F32, 2, D(rows, n), x);
  sg_tensor v = sg_topk(g, sg_tanh(g, xt), k, largest, NULL);
  sg_tensor wt = sg_constant(g, "w", SG_F32, 2, D(rows, k), w);
  assert_status(sg_graph_backward(g, sg_reduce_sum(g, sg_mul(g, v, wt), 0, NULL, 0)), SG_OK, NULL);
  sg_tensor gt;
  assert_status(sg_graph_grad(g, xt, &gt), SG_OK, NULL);
  assert_status(sg_graph_mark_output(g, gt), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sg_session *s;
  assert_status(sg_session_create(g, &sp, &s), SG_OK, NULL);
  assert_status(sg_session_compile(s), SG_OK, NULL);
  assert_status(sg_session_step(s), SG_OK, NULL);
  assert_status(sg_session_read(s, "x.grad", dx, sizeof(float) * (size_t)(rows * n)), SG_OK, NULL);
  sg_session_destroy(s);
  sg_graph_destroy(g);
}

/* The same loss in double, by the reference's selection (the order of tanh is x's). */
static double ref_loss(const double *x, int64_t rows, int64_t n, int64_t k, int largest, const float *w) {
  float *xf = malloc(sizeof(float) * (size_t)(rows * n)), *v = malloc(sizeof(float) * (size_t)(rows * k));
  int64_t *idx = malloc(sizeof(int64_t) * (size_t)(rows * k));
  assert_true(xf && v && idx);
  for (int64_t j = 0; j < rows * n; j++) xf[j] = (float)x[j];
  ref_topk(xf, rows, n, k, largest, v, idx);
  double l = 0;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < k; j++) l += tanh(x[r * n + idx[r * k + j]]) * w[r * k + j];
  free(xf);
  free(v);
  free(idx);
  return l;
}

static void test_gradients(void **state) {
  (void)state;
  enum { ROWS = 3, N = 9, K = 4 };
  float x[ROWS * N], w[ROWS * K], dx[ROWS * N];
  double xd[ROWS * N];
  for (int j = 0; j < ROWS * N; j++) x[j] = (float)((j * 7919 % 101) - 50) / 40.0f; /* distinct */
  for (int j = 0; j < ROWS * K; j++) w[j] = 0.25f * (float)(j % 5) - 0.4f;
  for (int largest = 0; largest <= 1; largest++) {
    session_grad(x, ROWS, N, K, largest, w, dx);
    for (int j = 0; j < ROWS * N; j++) xd[j] = x[j];
    for (int j = 0; j < ROWS * N; j++) {
      const double h = 1e-4;
      xd[j] = x[j] + h;
      double up = ref_loss(xd, ROWS, N, K, largest, w);
      xd[j] = x[j] - h;
      double down = ref_loss(xd, ROWS, N, K, largest, w);
      xd[j] = x[j];
      double fd = (up - down) / (2 * h);
      assert_true(fabs(fd - dx[j]) <= 1e-4 * (1 + fabs(fd)));
    }
  }
  /* By hand: row [3, 1, 2] with k 2 takes 3 (index 0) then 2 (index 2); dy 10, 20 lands there. */
  const float x1[] = {3, 1, 2}, w1[] = {10, 20};
  float d1[3];
  session_grad(x1, 1, 3, 2, 1, w1, d1);
  const double t0 = 1 - tanh(3.0) * tanh(3.0), t2 = 1 - tanh(2.0) * tanh(2.0);
  assert_true(fabs(d1[0] - 10 * t0) < 1e-5 && d1[1] == 0 && fabs(d1[2] - 20 * t2) < 1e-5);
}

/* topk_backward given indices outside the row by a program: SG_ERR_RANGE at run time, naming the op. */
static void test_backward_index_check(void **state) {
  (void)state;
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  sg_tensor in[] = {sg_input(g, "dy", SG_F32, 2, D(2, 2)), sg_input(g, "i", SG_I64, 2, D(2, 2))}, dx;
  sg_attr n = {.name = "n", .type = SG_ATTR_INT, .i = 3};
  assert_status(sg_graph_add_op(g, SG_OP_TOPK_BACKWARD, 2, in, 1, &n, 1, &dx, NULL), SG_OK, NULL);
  assert_status(sg_tensor_set_name(g, dx, "dx"), SG_OK, NULL);
  assert_status(sg_graph_mark_output(g, dx), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sg_session *s;
  assert_status(sg_session_create(g, &sp, &s), SG_OK, NULL);
  assert_status(sg_session_compile(s), SG_OK, NULL);
  const float dy[] = {1, 2, 3, 4};
  const int64_t good[] = {2, 0, 1, 1}, bad[] = {2, 0, 3, 1};
  assert_status(sg_session_set_input(s, "dy", SG_F32, 2, D(2, 2), dy), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "i", SG_I64, 2, D(2, 2), good), SG_OK, NULL);
  assert_status(sg_session_forward(s), SG_OK, NULL);
  float got[6];
  assert_status(sg_session_read(s, "dx", got, sizeof got), SG_OK, NULL);
  const float want[] = {2, 0, 1, 0, 7, 0}; /* a repeated index adds up */
  for (int j = 0; j < 6; j++) assert_true(got[j] == want[j]);
  assert_status(sg_session_set_input(s, "i", SG_I64, 2, D(2, 2), bad), SG_OK, NULL);
  assert_status(sg_session_forward(s), SG_ERR_RANGE, "index 3 of row 1 is outside 0..2");
  sg_session_destroy(s);
  sg_graph_destroy(g);
}

static void test_backward_op_and_round_trip(void **state) {
  (void)state;
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  sg_tensor x = sg_parameter(g, "x", SG_F32, 3, D(2, 3, 5), NULL), idx;
  sg_tensor v = sg_topk(g, x, 2, 0, &idx);
  sg_tensor_info vi, ii;
  assert_int_equal(sg_graph_tensor_info(g, v, &vi), SG_OK);
  assert_int_equal(sg_graph_tensor_info(g, idx, &ii), SG_OK);
  assert_int_equal(vi.dims[2], 2);
  assert_int_equal(ii.dtype, SG_I64);
  assert_int_equal(ii.producer, vi.producer);
  assert_status(sg_graph_backward(g, sg_reduce_sum(g, v, 0, NULL, 0)), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  int n_bwd = 0;
  for (int32_t i = 0; i < sg_graph_num_ops(g); i++) {
    sg_op_info oi;
    assert_int_equal(sg_graph_op_info(g, i, &oi), SG_OK);
    if (oi.kind != SG_OP_TOPK_BACKWARD) continue;
    n_bwd++;
    assert_int_equal(oi.inputs[1], idx.id);
    sg_attr at;
    assert_int_equal(sg_graph_op_attr(g, i, 0, &at), SG_OK);
    assert_int_equal(at.i, 5);
  }
  assert_int_equal(n_bwd, 1);
  assert_string_equal(sg_op_kind_name(SG_OP_TOPK), "topk");
  assert_string_equal(sg_op_kind_name(SG_OP_TOPK_BACKWARD), "topk_backward");
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
static sg_tensor bad_k(sg_graph *g) { return sg_topk(g, sg_input(g, "x", SG_F32, 2, D(2, 3)), 4, 1, NULL); }
static sg_tensor zero_k(sg_graph *g) { return sg_topk(g, sg_input(g, "x", SG_F32, 2, D(2, 3)), 0, 1, NULL); }
static sg_tensor bad_largest(sg_graph *g) {
  return sg_topk(g, sg_input(g, "x", SG_F32, 2, D(2, 3)), 1, 2, NULL);
}
static sg_tensor bad_dtype(sg_graph *g) { return sg_topk(g, sg_input(g, "x", SG_I64, 1, D(3)), 1, 1, NULL); }
static sg_tensor scalar(sg_graph *g) { return sg_topk(g, sg_input(g, "x", SG_F32, 0, NULL), 1, 1, NULL); }

static void test_builder_errors(void **state) {
  (void)state;
  expect_error(bad_k, SG_ERR_SHAPE, "k 4 is more than the last dim of x 'x' [2,3] f32");
  expect_error(zero_k, SG_ERR_ATTRIBUTE, "topk");
  expect_error(bad_largest, SG_ERR_ATTRIBUTE, "largest");
  expect_error(bad_dtype, SG_ERR_DTYPE, "must be f32");
  expect_error(scalar, SG_ERR_SHAPE, "no axis");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hand_computed),
      cmocka_unit_test(test_kernel_against_reference),
      cmocka_unit_test(test_gradients),
      cmocka_unit_test(test_backward_index_check),
      cmocka_unit_test(test_backward_op_and_round_trip),
      cmocka_unit_test(test_builder_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
