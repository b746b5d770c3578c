/* The fusion pass end to end (src/compile/fuse.c, module.c): graphs whose
 * elementwise ops fuse, run by a session with fusion and by one without
 * (params.fusion = -1, every op its own reference kernel), on the same
 * random inputs with NaN, infinities and -0 among them, over odd sizes and
 * broadcast operands. IEEE arithmetic must agree bitwise (same evaluation
 * order); oneDNN's transcendental functions within a few ulp. Also: the
 * counts of the compile report, a training graph's parameters after 5 steps,
 * chains that end in sums (reduce_mean, reduce_sum, sum_to) bitwise, the
 * optimizer updates as generated kernels against the hand-written ones,
 * the compile cache (a warm start compiles nothing; a corrupted entry is
 * rebuilt), and a missing compiler (fusion off with a warning, same
 * results). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/cpu/cpu_internal.h"
#include "compile/plan.h"
#include "graph/graph.h"
#include "sgrt/sgrt.h"
#include "test_util.h"

static uint64_t rng = 0x13198a2e03707344ull;
static float uniform(float lo, float hi) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return lo + (hi - lo) * (float)(rng >> 40) / 16777216.0f;
}

static void fill(float *x, int64_t n, bool specials) {
  static const float special[] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f};
  for (int64_t i = 0; i < n; i++) {
    x[i] = uniform(-3, 3);
    if (specials && i % 13 == 5) x[i] = special[(i / 13) % 5];
  }
}

static char cache_dir[] = "/tmp/sgrt-fusion-test-XXXXXX";

/* y1 = relu((a + bias) * 0.5) (kept: an output), y2 = (y1 - a) / col,
 * y3 = tanh(y1 * y2) + a: one tree of elementwise ops over [rows, cols]
 * with a per-column bias and a per-row divisor. `transcendental` adds the
 * tanh (else y3 = y1 * y2 + a). */
static sg_graph *tree_graph(int64_t rows, int64_t cols, bool transcendental) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  int64_t d[] = {rows, cols}, db[] = {cols}, dc[] = {rows, 1};
  sg_tensor a = sg_input(g, "a", SG_F32, 2, d);
  sg_tensor bias = sg_input(g, "bias", SG_F32, 1, db);
  sg_tensor col = sg_input(g, "col", SG_F32, 2, dc);
  sg_tensor y1 = sg_relu(g, sg_mul_scalar(g, sg_add(g, a, bias), 0.5));
  sg_tensor y2 = sg_div(g, sg_sub(g, y1, a), col);
  sg_tensor p = sg_mul(g, y1, y2);
  sg_tensor y3 = sg_add(g, transcendental ? sg_tanh(g, p) : p, a);
  assert_status(sg_tensor_set_name(g, y1, "y1"), SG_OK, NULL);
  assert_status(sg_tensor_set_name(g, y2, "y2"), SG_OK, NULL);
  assert_status(sg_tensor_set_name(g, y3, "y3"), SG_OK, NULL);
  assert_status(sg_graph_mark_output(g, y1), SG_OK, NULL);
  assert_status(sg_graph_mark_output(g, y2), SG_OK, NULL);
  assert_status(sg_graph_mark_output(g, y3), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  return g;
}

static sg_session *session(const sg_graph *g, int fusion, sg_compile_report *rep) {
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sp.threads = 2;
  sp.fusion = fusion;
  sg_session *s;
  assert_status(sg_session_create(g, &sp, &s), SG_OK, NULL);
  assert_status(sg_session_compile(s), SG_OK, NULL);
  *rep = (sg_compile_report)SG_COMPILE_REPORT_INIT;
  assert_status(sg_session_compile_report(s, rep), SG_OK, NULL);
  return s;
}

/* Runs the tree graph and reads y1, y2, y3 into y[3][n]. */
static void run_tree(const sg_graph *g, int fusion, int64_t rows, int64_t cols, const float *a,
                     const float *bias, const float *col, float *y, sg_compile_report *rep) {
  sg_session *s = session(g, fusion, rep);
  int64_t d[] = {rows, cols}, db[] = {cols}, dc[] = {rows, 1};
  assert_status(sg_session_set_input(s, "a", SG_F32, 2, d, a), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "bias", SG_F32, 1, db, bias), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "col", SG_F32, 2, dc, col), SG_OK, NULL);
  assert_status(sg_session_forward(s), SG_OK, NULL);
  size_t n = (size_t)(rows * cols);
  assert_status(sg_session_read(s, "y1", y, n * sizeof(float)), SG_OK, NULL);
  assert_status(sg_session_read(s, "y2", y + n, n * sizeof(float)), SG_OK, NULL);
  assert_status(sg_session_read(s, "y3", y + 2 * n, n * sizeof(float)), SG_OK, NULL);
  sg_session_destroy(s);
}

/* Equal within `ulps` f32 ulp of the larger of the result and `scale`. */
static bool close_enough(float got, float want, double ulps, double scale) {
  if (isnan(want)) return isnan(got);
  if (ulps == 0) return memcmp(&got, &want, sizeof got) == 0;
  if (isinf(want)) return got == want;
  double tol = ulps * FLT_EPSILON * fmax(fabs(want), scale);
  return fabs((double)got - (double)want) <= tol;
}

static void check_tree(int64_t rows, int64_t cols, bool transcendental) {
  size_t n = (size_t)(rows * cols);
  float *a = malloc(n * sizeof *a), *bias = malloc((size_t)cols * sizeof *bias),
        *col = malloc((size_t)rows * sizeof *col);
  float *want = malloc(3 * n * sizeof *want), *got = malloc(3 * n * sizeof *got);
  fill(a, (int64_t)n, true);
  fill(bias, cols, true);
  fill(col, rows, rows > 1);
  sg_graph *g = tree_graph(rows, cols, transcendental);
  sg_compile_report ref, fused;
  run_tree(g, -1, rows, cols, a, bias, col, want, &ref);
  run_tree(g, 1, rows, cols, a, bias, col, got, &fused);
  assert_int_equal(ref.ops_fused, 0);
  assert_int_equal(ref.fused_kernels, 0);
  /* All 7 (8 with tanh) ops in one kernel; the report still counts them. */
  assert_int_equal(fused.fused_kernels, 1);
  assert_int_equal(fused.ops_fused, transcendental ? 8 : 7);
  assert_int_equal(fused.ops_scheduled, ref.ops_scheduled);
  assert_int_equal(fused.ops_eval, ref.ops_eval);
  for (size_t i = 0; i < 3 * n; i++) {
    /* y3 = tanh(p) + a passes through oneDNN's tanh in the reference,
     * libm's in the kernel: within a few ulp of |tanh| <= 1 (the sum may
     * cancel to a much smaller result). */
    double ulps = transcendental && i >= 2 * n ? 16 : 0;
    if (!close_enough(got[i], want[i], ulps, 1.0))
      fail_msg("[%lld x %lld] output y%zu[%zu]: fused %.9g, unfused %.9g", (long long)rows, (long long)cols,
               i / n + 1, i % n, (double)got[i], (double)want[i]);
  }
  sg_graph_destroy(g);
  free(a), free(bias), free(col), free(want), free(got);
}

static void test_tree_matches_unfused(void **state) {
  (void)state;
  const int64_t shapes[][2] = {{1, 1}, {1, 7}, {7, 1}, {3, 1009}, {7, 1009}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    check_tree(shapes[i][0], shapes[i][1], false);
    check_tree(shapes[i][0], shapes[i][1], true);
  }
}

/* A small MLP with GELU and a residual sum, trained 5 steps with SGD and
 * momentum: the parameters with and without fusion. */
static sg_graph *train_graph(void) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  enum { B = 16, F = 24, H = 40, C = 5 };
  int64_t xs[] = {B, F}, ys[] = {B}, w1s[] = {H, F}, b1s[] = {H}, w2s[] = {C, H};
  float w1[H * F], b1[H], w2[C * H];
  sg_test_fill(w1, H * F, 1);
  sg_test_fill(b1, H, 2);
  sg_test_fill(w2, C * H, 3);
  sg_tensor x = sg_input(g, "x", SG_F32, 2, xs), y = sg_input(g, "y", SG_I64, 1, ys);
  sg_tensor lr = sg_input(g, "lr", SG_F32, 0, NULL);
  sg_tensor W1 = sg_parameter(g, "w1", SG_F32, 2, w1s, w1), B1 = sg_parameter(g, "b1", SG_F32, 1, b1s, b1);
  sg_tensor W2 = sg_parameter(g, "w2", SG_F32, 2, w2s, w2);
  sg_tensor h = sg_linear(g, x, W1, SG_NO_TENSOR);
  /* bias, scale, relu and a residual: elementwise chains forward and back. */
  sg_tensor a = sg_relu(g, sg_mul_scalar(g, sg_add(g, h, B1), 0.7));
  sg_tensor r = sg_add(g, sg_sigmoid(g, a), a);
  sg_tensor loss = sg_cross_entropy(g, sg_linear(g, r, W2, SG_NO_TENSOR), y, SG_REDUCTION_MEAN);
  assert_status(sg_tensor_set_name(g, loss, "loss"), SG_OK, NULL);
  assert_status(sg_graph_mark_output(g, loss), SG_OK, NULL);
  assert_status(sg_graph_backward(g, loss), SG_OK, NULL);
  sg_sgd_params sgd = SG_SGD_PARAMS_INIT;
  sgd.momentum = 0.9;
  sgd.weight_decay = 1e-3;
  assert_status(sg_graph_add_sgd(g, lr, &sgd), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  return g;
}

static void train(const sg_graph *g, int fusion, float *params, sg_compile_report *rep) {
  sg_session *s = session(g, fusion, rep);
  enum { B = 16, F = 24, H = 40, C = 5 };
  float x[B * F], lr = 0.05f;
  int64_t y[B], xs[] = {B, F}, ys[] = {B};
  for (int step = 0; step < 5; step++) {
    sg_test_fill(x, B * F, 100 + (uint64_t)step);
    for (int i = 0; i < B; i++) y[i] = (i * 7 + step) % C;
    assert_status(sg_session_set_input(s, "x", SG_F32, 2, xs, x), SG_OK, NULL);
    assert_status(sg_session_set_input(s, "y", SG_I64, 1, ys, y), SG_OK, NULL);
    assert_status(sg_session_set_input(s, "lr", SG_F32, 0, NULL, &lr), SG_OK, NULL);
    assert_status(sg_session_step(s), SG_OK, NULL);
  }
  assert_status(sg_session_read(s, "w1", params, H * F * sizeof(float)), SG_OK, NULL);
  assert_status(sg_session_read(s, "b1", params + H * F, H * sizeof(float)), SG_OK, NULL);
  assert_status(sg_session_read(s, "w2", params + H * F + H, C * H * sizeof(float)), SG_OK, NULL);
  sg_session_destroy(s);
}

static void test_training_matches_unfused(void **state) {
  (void)state;
  enum { N = 40 * 24 + 40 + 5 * 40 };
  float want[N], got[N];
  sg_graph *g = train_graph();
  sg_compile_report ref, fused;
  train(g, -1, want, &ref);
  train(g, 0, got, &fused);
  assert_true(fused.fused_kernels >= 2); /* forward and backward chains */
  assert_true(fused.ops_fused >= 4);
  assert_int_equal(fused.ops_scheduled, ref.ops_scheduled);
  /* The sigmoid goes through oneDNN unfused, libm fused: a few ulp, then 5
   * steps of training; every other op is IEEE arithmetic in the same order. */
  double num = 0, den = 0;
  for (int i = 0; i < N; i++) {
    num += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
    den += (double)want[i] * want[i];
  }
  assert_true(sqrt(num / den) < 1e-6);
  sg_graph_destroy(g);
}

/* Chains that end in sums: h = x * w + b; d = h - mean(h) over the last
 * dim; v = mean(d * d) over it; n = d / sqrt(v + 1e-5); c = sum over the
 * rows of n * x; loss = sum of c * c; trained 3 steps with SGD, so that
 * the backward adds the sums of broadcasting (sum_to over the rows for w,
 * over the columns for b). Every op is IEEE arithmetic or a sum, so fused
 * and unfused agree bitwise: outputs, gradients and parameters. */
static sg_graph *sum_graph(int64_t rows, int64_t cols) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  int64_t xs[] = {rows, cols}, ws[] = {cols}, bs[] = {rows, 1}, last = -1, first = 0;
  float *w = malloc((size_t)cols * sizeof *w), *b = malloc((size_t)rows * sizeof *b);
  fill(w, cols, false);
  fill(b, rows, false);
  sg_tensor x = sg_input(g, "x", SG_F32, 2, xs), lr = sg_input(g, "lr", SG_F32, 0, NULL);
  sg_tensor W = sg_parameter(g, "w", SG_F32, 1, ws, w), B = sg_parameter(g, "b", SG_F32, 2, bs, b);
  free(w), free(b);
  sg_tensor h = sg_add(g, sg_mul(g, x, W), B);
  sg_tensor d = sg_sub(g, h, sg_reduce_mean(g, h, 1, &last, 1));
  sg_tensor v = sg_reduce_mean(g, sg_mul(g, d, d), 1, &last, 1);
  sg_tensor n = sg_div(g, d, sg_sqrt(g, sg_add_scalar(g, v, 1e-5)));
  sg_tensor c = sg_reduce_sum(g, sg_mul(g, n, x), 1, &first, 0);
  sg_tensor loss = sg_reduce_sum(g, sg_mul(g, c, c), 0, NULL, 0);
  const char *names[] = {"v", "c", "loss"};
  sg_tensor outs[] = {v, c, loss};
  for (int i = 0; i < 3; i++) {
    assert_status(sg_tensor_set_name(g, outs[i], names[i]), SG_OK, NULL);
    assert_status(sg_graph_mark_output(g, outs[i]), SG_OK, NULL);
  }
  assert_status(sg_graph_backward(g, loss), SG_OK, NULL);
  sg_tensor gw, gb;
  assert_status(sg_graph_grad(g, W, &gw), SG_OK, NULL);
  assert_status(sg_graph_grad(g, B, &gb), SG_OK, NULL);
  sg_sgd_params sgd = SG_SGD_PARAMS_INIT;
  assert_status(sg_graph_add_sgd(g, lr, &sgd), SG_OK, NULL);
  assert_status(sg_tensor_set_name(g, gw, "gw"), SG_OK, NULL);
  assert_status(sg_tensor_set_name(g, gb, "gb"), SG_OK, NULL);
  assert_status(sg_graph_mark_output(g, gw), SG_OK, NULL);
  assert_status(sg_graph_mark_output(g, gb), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  return g;
}

/* Runs 3 steps; out: v, c, loss, gw, gb of the last step, then w and b. */
static void run_sums(const sg_graph *g, int fusion, int64_t rows, int64_t cols, const float *x, float *out,
                     sg_compile_report *rep) {
  sg_session *s = session(g, fusion, rep);
  int64_t xs[] = {rows, cols};
  float lr = 1e-3f;
  for (int step = 0; step < 3; step++) {
    assert_status(sg_session_set_input(s, "x", SG_F32, 2, xs, x + step * rows * cols), SG_OK, NULL);
    assert_status(sg_session_set_input(s, "lr", SG_F32, 0, NULL, &lr), SG_OK, NULL);
    assert_status(sg_session_step(s), SG_OK, NULL);
  }
  const char *names[] = {"v", "c", "loss", "gw", "gb", "w", "b"};
  const int64_t sizes[] = {rows, cols, 1, cols, rows, cols, rows};
  for (int i = 0; i < 7; i++) {
    assert_status(sg_session_read(s, names[i], out, (size_t)sizes[i] * sizeof(float)), SG_OK, NULL);
    out += sizes[i];
  }
  sg_session_destroy(s);
}

static void test_sums_match_unfused(void **state) {
  (void)state;
  const int64_t shapes[][2] = {{1, 1}, {1, 7}, {7, 1}, {3, 1009}, {1009, 7}, {64, 300}};
  for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
    int64_t rows = shapes[t][0], cols = shapes[t][1], n = 3 * rows + 3 * cols + 1;
    float *x = malloc((size_t)(3 * rows * cols) * sizeof *x);
    float *want = malloc((size_t)n * sizeof *want), *got = malloc((size_t)n * sizeof *got);
    fill(x, 3 * rows * cols, false);
    x[0] = -0.0f;
    sg_graph *g = sum_graph(rows, cols);
    sg_compile_report ref, fused;
    run_sums(g, -1, rows, cols, x, want, &ref);
    run_sums(g, 1, rows, cols, x, got, &fused);
    assert_int_equal(ref.fused_kernels, 0);
    assert_true(fused.fused_kernels >= 1);
    for (int64_t i = 0; i < n; i++)
      if (!close_enough(got[i], want[i], 0, 1.0))
        fail_msg("[%lld x %lld] value %lld (v, c, loss, gw, gb, w, b): fused %.9g, unfused %.9g",
                 (long long)rows, (long long)cols, (long long)i, (double)got[i], (double)want[i]);
    if (rows == 3 && cols == 1009) {
      /* Forward: {mul, add, mean}, {sub, mul, mean}, {add_scalar, sqrt},
       * {div, mul, sum}, {mul, sum}: every forward op in a kernel; the
       * backward's sum_to ops of w and b end chains too. */
      assert_true(fused.fused_kernels >= 5);
      assert_true(fused.ops_fused >= 13 + 2);
    }
    sg_graph_destroy(g);
    free(x), free(want), free(got);
  }
}

/* The order of a row sum, by hand: [1e20, 1 x 7, -1e20] sums to 7 in
 * sgk_math.h's eight lanes (lane 0 holds 1e20 - 1e20, lanes 1..7 a 1 each;
 * one chain would lose the 1s to 1e20 and give 0), and [1..9] to 45; the
 * op's kernel (fusion off) and a generated kernel that ends in the sum
 * (x * 1 fused with it) alike. */
static void test_row_sum_order(void **state) {
  (void)state;
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  int64_t d[] = {2, 9}, last = -1;
  sg_tensor x = sg_input(g, "x", SG_F32, 2, d);
  sg_tensor direct = sg_reduce_sum(g, x, 1, &last, 0);
  sg_tensor chained = sg_reduce_sum(g, sg_add_scalar(g, sg_mul_scalar(g, x, 1), 0), 1, &last, 0);
  assert_status(sg_tensor_set_name(g, direct, "direct"), SG_OK, NULL);
  assert_status(sg_tensor_set_name(g, chained, "chained"), SG_OK, NULL);
  assert_status(sg_graph_mark_output(g, direct), SG_OK, NULL);
  assert_status(sg_graph_mark_output(g, chained), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  float in[18] = {1e20f, 1, 1, 1, 1, 1, 1, 1, -1e20f, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  for (int fusion = -1; fusion <= 1; fusion += 2) {
    sg_compile_report rep;
    sg_session *s = session(g, fusion, &rep);
    assert_int_equal(rep.fused_kernels, fusion > 0 ? 1 : 0);
    assert_status(sg_session_set_input(s, "x", SG_F32, 2, d, in), SG_OK, NULL);
    assert_status(sg_session_forward(s), SG_OK, NULL);
    float y[2], z[2];
    assert_status(sg_session_read(s, "direct", y, sizeof y), SG_OK, NULL);
    assert_status(sg_session_read(s, "chained", z, sizeof z), SG_OK, NULL);
    assert_true(y[0] == 7.0f && y[1] == 45.0f);
    assert_true(z[0] == 7.0f && z[1] == 45.0f);
    sg_session_destroy(s);
  }
  sg_graph_destroy(g);
}

/* The optimizer updates as generated kernels (fuse_updates.c): a linear
 * model trained 4 steps, the learning rate changed at every step, under
 * each optimizer; the parameters and every state tensor (AdamW's step
 * count too) must equal the hand-written kernels' to the bit. SGD with
 * momentum and dampening keeps its own kernel (its first step is special). */
enum { UB = 5, UF = 1009, UC = 7 };

typedef struct upd_case {
  const char *what;
  bool adamw;
  double momentum, dampening, weight_decay;
  int nesterov;
  int generated;  /* update kernels expected: one per parameter, or 0 */
  bool nonfinite; /* the last step's input holds an infinity and a NaN */
} upd_case;

static sg_graph *update_graph(const upd_case *u) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  int64_t xs[] = {UB, UF}, ys[] = {UB}, ws[] = {UC, UF}, bs[] = {UC};
  float *w = malloc(UC * UF * sizeof *w), b[UC];
  fill(w, UC * UF, false);
  fill(b, UC, false);
  sg_tensor x = sg_input(g, "x", SG_F32, 2, xs), y = sg_input(g, "y", SG_I64, 1, ys);
  sg_tensor lr = sg_input(g, "lr", SG_F32, 0, NULL);
  sg_tensor W = sg_parameter(g, "w", SG_F32, 2, ws, w), B = sg_parameter(g, "b", SG_F32, 1, bs, b);
  free(w);
  sg_tensor loss = sg_cross_entropy(g, sg_linear(g, x, W, B), y, SG_REDUCTION_MEAN);
  assert_status(sg_tensor_set_name(g, loss, "loss"), SG_OK, NULL);
  assert_status(sg_graph_mark_output(g, loss), SG_OK, NULL);
  assert_status(sg_graph_backward(g, loss), SG_OK, NULL);
  if (u->adamw) {
    sg_adamw_params ap = SG_ADAMW_PARAMS_INIT;
    ap.weight_decay = u->weight_decay;
    assert_status(sg_graph_add_adamw(g, lr, &ap), SG_OK, NULL);
  } else {
    sg_sgd_params sp = SG_SGD_PARAMS_INIT;
    sp.momentum = u->momentum;
    sp.dampening = u->dampening;
    sp.weight_decay = u->weight_decay;
    sp.nesterov = u->nesterov;
    assert_status(sg_graph_add_sgd(g, lr, &sp), SG_OK, NULL);
  }
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  return g;
}

/* 4 steps; out: w, b and each state tensor of both, in a fixed order. */
static size_t run_updates(const sg_graph *g, const upd_case *u, int fusion, float *out,
                          sg_compile_report *rep) {
  sg_session *s = session(g, fusion, rep);
  float x[UB * UF];
  int64_t y[UB], xs[] = {UB, UF}, ys[] = {UB};
  for (int step = 0; step < 4; step++) {
    float lr = 0.05f / (float)(step + 1);
    sg_test_fill(x, UB * UF, 200 + (uint64_t)step);
    if (u->nonfinite && step == 3) x[3] = INFINITY, x[UF + 10] = NAN, x[2 * UF + 5] = -0.0f;
    for (int i = 0; i < UB; i++) y[i] = (i * 3 + step) % UC;
    assert_status(sg_session_set_input(s, "x", SG_F32, 2, xs, x), SG_OK, NULL);
    assert_status(sg_session_set_input(s, "y", SG_I64, 1, ys, y), SG_OK, NULL);
    assert_status(sg_session_set_input(s, "lr", SG_F32, 0, NULL, &lr), SG_OK, NULL);
    assert_status(sg_session_step(s), SG_OK, NULL);
  }
  const char *params[] = {"w", "b"};
  const char *sgd_states[] = {".momentum_buffer"}, *adam_states[] = {".exp_avg", ".exp_avg_sq", ".step"};
  size_t n = 0;
  for (int i = 0; i < 2; i++) {
    size_t count = i == 0 ? UC * UF : UC;
    assert_status(sg_session_read(s, params[i], out + n, count * sizeof(float)), SG_OK, NULL);
    n += count;
    int ns = u->adamw ? 3 : u->momentum > 0 ? 1 : 0;
    for (int j = 0; j < ns; j++) {
      char name[32];
      snprintf(name, sizeof name, "%s%s", params[i], u->adamw ? adam_states[j] : sgd_states[j]);
      size_t c = u->adamw && j == 2 ? 1 : count;
      assert_status(sg_session_read(s, name, out + n, c * sizeof(float)), SG_OK, name);
      n += c;
    }
  }
  sg_session_destroy(s);
  return n;
}

static void test_updates_match_unfused(void **state) {
  (void)state;
  const upd_case cases[] = {
      {"sgd", false, 0, 0, 0, 0, 2},
      {"sgd weight decay", false, 0, 0, 1e-2, 0, 2},
      {"sgd momentum, weight decay", false, 0.9, 0, 1e-3, 0, 2},
      {"sgd nesterov", false, 0.9, 0, 0, 1, 2},
      {"sgd momentum with dampening (own kernel)", false, 0.9, 0.5, 0, 0, 0},
      {"adamw", true, 0, 0, 0.01, 0, 2},
      {"adamw without weight decay", true, 0, 0, 0, 0, 2},
      {"sgd momentum, non-finite gradients", false, 0.9, 0, 1e-3, 0, 2, true},
      {"adamw, non-finite gradients", true, 0, 0, 0.01, 0, 2, true},
  };
  size_t cap = 4 * (UC * UF + UC) + 2;
  float *want = malloc(cap * sizeof *want), *got = malloc(cap * sizeof *got);
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    const upd_case *u = &cases[c];
    sg_graph *g = update_graph(u);
    sg_compile_report ref, fused;
    size_t n = run_updates(g, u, -1, want, &ref);
    assert_int_equal(run_updates(g, u, 1, got, &fused), n);
    /* Nothing else in this graph fuses: the generated kernels are the updates. */
    if (fused.fused_kernels != u->generated)
      fail_msg("%s: %d generated kernels, want %d", u->what, (int)fused.fused_kernels, u->generated);
    for (size_t i = 0; i < n; i++)
      if (!close_enough(got[i], want[i], 0, 1.0))
        fail_msg("%s: value %zu: generated %.9g, hand-written %.9g", u->what, i, (double)got[i],
                 (double)want[i]);
    if (u->adamw) assert_true(want[n - 1] == 4.0f); /* b's step count */
    sg_graph_destroy(g);
  }
  free(want), free(got);
}

/* Kernels that are one program but for their name are compiled once: the
 * SGD updates of two parameters of one shape share a function. The
 * parameters still match the unfused run's bits. */
static void test_same_programs_share_a_function(void **state) {
  (void)state;
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  int64_t d[] = {4, 33};
  float a0[4 * 33], b0[4 * 33], x[4 * 33], lr = 0.1f;
  sg_test_fill(a0, 4 * 33, 7);
  sg_test_fill(b0, 4 * 33, 8);
  sg_test_fill(x, 4 * 33, 9);
  sg_tensor X = sg_input(g, "x", SG_F32, 2, d), LR = sg_input(g, "lr", SG_F32, 0, NULL);
  sg_tensor A = sg_parameter(g, "a", SG_F32, 2, d, a0), B = sg_parameter(g, "b", SG_F32, 2, d, b0);
  sg_tensor loss = sg_reduce_sum(g, sg_mul(g, sg_mul(g, X, A), B), 0, NULL, 0);
  assert_status(sg_tensor_set_name(g, loss, "loss"), SG_OK, NULL);
  assert_status(sg_graph_mark_output(g, loss), SG_OK, NULL);
  assert_status(sg_graph_backward(g, loss), SG_OK, NULL);
  sg_sgd_params sgd = SG_SGD_PARAMS_INIT;
  assert_status(sg_graph_add_sgd(g, LR, &sgd), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  float want[2][4 * 33], got[2][4 * 33];
  setenv("SG_CACHE", "0", 1);
  for (int fusion = -1; fusion <= 1; fusion += 2) {
    sg_compile_report rep;
    sg_session *s = session(g, fusion, &rep);
    if (fusion > 0) {
      /* Two updates of one program, and the fused groups of the chain. */
      assert_true(rep.fused_kernels >= 3);
      assert_true(rep.kernels_generated >= 1 && rep.kernels_generated < rep.fused_kernels);
    }
    for (int step = 0; step < 3; step++) {
      assert_status(sg_session_set_input(s, "x", SG_F32, 2, d, x), SG_OK, NULL);
      assert_status(sg_session_set_input(s, "lr", SG_F32, 0, NULL, &lr), SG_OK, NULL);
      assert_status(sg_session_step(s), SG_OK, NULL);
    }
    float(*out)[4 * 33] = fusion > 0 ? got : want;
    assert_status(sg_session_read(s, "a", out[0], sizeof out[0]), SG_OK, NULL);
    assert_status(sg_session_read(s, "b", out[1], sizeof out[1]), SG_OK, NULL);
    sg_session_destroy(s);
  }
  unsetenv("SG_CACHE");
  assert_memory_equal(want, got, sizeof want);
  sg_graph_destroy(g);
}

/* A sum over a middle dim (neither the trailing nor the leading ones)
 * does not end a chain: it keeps cpu_reduce.c's kernel, and the op before
 * it, alone, its own; the result is the unfused one. */
static void test_middle_sum_keeps_its_kernel(void **state) {
  (void)state;
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  int64_t d[] = {3, 4, 5}, mid = 1;
  sg_tensor x = sg_input(g, "x", SG_F32, 3, d);
  sg_tensor y = sg_reduce_sum(g, sg_mul_scalar(g, x, 2), 1, &mid, 0);
  assert_status(sg_tensor_set_name(g, y, "y"), SG_OK, NULL);
  assert_status(sg_graph_mark_output(g, y), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  float in[60], out[2][15];
  fill(in, 60, true);
  for (int fusion = -1; fusion <= 1; fusion += 2) {
    sg_compile_report rep;
    sg_session *s = session(g, fusion, &rep);
    assert_int_equal(rep.fused_kernels, 0);
    assert_status(sg_session_set_input(s, "x", SG_F32, 3, d, in), SG_OK, NULL);
    assert_status(sg_session_forward(s), SG_OK, NULL);
    assert_status(sg_session_read(s, "y", out[fusion > 0], sizeof out[0]), SG_OK, NULL);
    sg_session_destroy(s);
  }
  for (int i = 0; i < 15; i++) assert_true(close_enough(out[1][i], out[0][i], 0, 1.0));
  sg_graph_destroy(g);
}

/* A backend without kernels of its own for relu and reduce_sum (as the CUDA
 * backend has none for elementwise ops): the CPU backend's table with
 * another supports_op. */
static bool no_relu_nor_sum(void *state, sg_op_kind kind) {
  return kind != SG_OP_RELU && kind != SG_OP_REDUCE_SUM && sg__cpu_backend.supports_op(state, kind);
}

/* Such ops get a generated kernel each even alone: with fusion off, and
 * with fusion on when a barrier keeps them from joining; an op the backend
 * runs itself (mul_scalar) stays unfused with fusion off. */
static void test_alone_when_the_backend_has_no_kernel(void **state) {
  (void)state;
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  int64_t d[] = {6, 10};
  sg_tensor x = sg_input(g, "x", SG_F32, 2, d);
  sg_tensor r = sg_relu(g, sg_mul_scalar(g, x, 2));
  int64_t rows = 0;
  sg_tensor y = sg_relu(g, sg_reduce_sum(g, r, 1, &rows, 0));
  assert_status(sg_graph_mark_output(g, y), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  sg__backend_i be = sg__cpu_backend;
  be.supports_op = no_relu_nor_sum;
  void *st = NULL;
  sg__backend_config cfg = {1, 1, 0};
  assert_status(be.create(&cfg, &st), SG_OK, NULL);
  sg__plan p;
  sg__plan_options opt = {0};
  assert_status(sg__plan_build(g, &be, st, &opt, &p), SG_OK, NULL);
  assert_int_equal(p.n_groups, 3); /* relu, reduce_sum, relu; mul_scalar keeps its kernel */
  for (uint32_t i = 0; i < p.n_groups; i++) assert_int_equal(p.groups[i].n_ops, 1);
  sg__plan_free(&p);
  /* Fusion on: mul_scalar, relu and the sum join; the last relu alone. */
  opt.fuse = true;
  assert_status(sg__plan_build(g, &be, st, &opt, &p), SG_OK, NULL);
  assert_int_equal(p.n_groups, 2);
  assert_int_equal(p.groups[0].n_ops, 3);
  assert_int_equal(p.groups[1].n_ops, 1);
  sg__plan_free(&p);
  /* A barrier on r: nothing joins over it, each op the backend lacks alone. */
  uint8_t *barrier = calloc(g->n_tensors, 1);
  barrier[r.id] = 1;
  opt.fuse_barrier = barrier;
  assert_status(sg__plan_build(g, &be, st, &opt, &p), SG_OK, NULL);
  assert_int_equal(p.n_groups, 3);
  sg__plan_free(&p);
  free(barrier);
  be.destroy(st);
  sg_graph_destroy(g);
}

/* The compile cache: the first session compiles and stores, the second
 * loads (no compiler), a corrupted entry is a warning and a rebuild. */
static void test_cache_warm_start(void **state) {
  (void)state;
  /* A shape no other case compiled: a fresh key. */
  int64_t rows = 5, cols = 333;
  size_t n = (size_t)(rows * cols);
  float *a = malloc(n * sizeof *a), bias[333], col[5];
  float *y0 = malloc(3 * n * sizeof *y0), *y1 = malloc(3 * n * sizeof *y1);
  fill(a, (int64_t)n, true);
  fill(bias, cols, false);
  fill(col, rows, false);
  sg_graph *g = tree_graph(rows, cols, false);
  sg_compile_report cold, warm, again;
  run_tree(g, 1, rows, cols, a, bias, col, y0, &cold);
  assert_int_equal(cold.cache_misses, 1);
  assert_int_equal(cold.cache_hits, 0);
  assert_int_equal(cold.compiler_invocations, 1);
  assert_int_equal(cold.kernels_generated, 1);
  run_tree(g, 1, rows, cols, a, bias, col, y1, &warm);
  assert_int_equal(warm.cache_hits, 1);
  assert_int_equal(warm.cache_misses, 0);
  assert_int_equal(warm.compiler_invocations, 0);
  assert_int_equal(warm.kernels_generated, 0);
  assert_memory_equal(y0, y1, 3 * n * sizeof(float));
  /* Flip a byte in the middle of the stored object of every entry. */
  char cmd[512];
  snprintf(
      cmd, sizeof cmd,
      "for f in %s/*/kernels.so; do printf '\\377' | dd of=$f bs=1 seek=1000 conv=notrunc status=none; done",
      cache_dir);
  assert_int_equal(system(cmd), 0);
  memset(y1, 0, 3 * n * sizeof(float));
  run_tree(g, 1, rows, cols, a, bias, col, y1, &again);
  assert_int_equal(again.cache_hits, 0);
  assert_int_equal(again.cache_misses, 1);
  assert_int_equal(again.compiler_invocations, 1);
  assert_memory_equal(y0, y1, 3 * n * sizeof(float));
  /* A different compiler (the same one under another name) is another key. */
  setenv("SG_CC", "gcc", 1);
  run_tree(g, 1, rows, cols, a, bias, col, y1, &again);
  unsetenv("SG_CC");
  assert_int_equal(again.cache_misses, 1);
  assert_int_equal(again.compiler_invocations, 1);
  assert_memory_equal(y0, y1, 3 * n * sizeof(float));
  sg_graph_destroy(g);
  free(a), free(y0), free(y1);
}

/* The key covers sgrt's version and the compiler's flags. */
static void test_key_inputs(void **state) {
  (void)state;
  sg__cache_key k0 = sg__compile_key_text("1.0.0", "cpu cc=/usr/bin/cc flags=-O3", "graph");
  sg__cache_key k1 = sg__compile_key_text("1.0.1", "cpu cc=/usr/bin/cc flags=-O3", "graph");
  sg__cache_key k2 = sg__compile_key_text("1.0.0", "cpu cc=/usr/bin/cc flags=-O2", "graph");
  sg__cache_key k3 = sg__compile_key_text("1.0.0", "cpu cc=/usr/bin/cc flags=-O3", "graph");
  assert_true(k0.hi != k1.hi || k0.lo != k1.lo);
  assert_true(k0.hi != k2.hi || k0.lo != k2.lo);
  assert_true(k0.hi == k3.hi && k0.lo == k3.lo);
}

/* No compiler: a warning, fusion off, the same results. */
static void test_missing_compiler_falls_back(void **state) {
  (void)state;
  int64_t rows = 7, cols = 7;
  size_t n = (size_t)(rows * cols);
  float a[49], bias[7], col[7], want[3 * 49], got[3 * 49];
  fill(a, (int64_t)n, true);
  fill(bias, cols, false);
  fill(col, rows, false);
  sg_graph *g = tree_graph(rows, cols, false);
  sg_compile_report ref, rep;
  run_tree(g, -1, rows, cols, a, bias, col, want, &ref);
  setenv("SG_CC", "/nonexistent/sgrt-cc", 1);
  setenv("SG_CACHE", "0", 1);
  run_tree(g, 1, rows, cols, a, bias, col, got, &rep);
  unsetenv("SG_CC");
  unsetenv("SG_CACHE");
  assert_int_equal(rep.ops_fused, 0);
  assert_int_equal(rep.fused_kernels, 0);
  assert_int_equal(rep.compiler_invocations, 1);
  assert_memory_equal(want, got, sizeof want);
  sg_graph_destroy(g);
}

/* SG_FUSION=0 turns fusion off whatever the parameters say. */
static void test_env_switch(void **state) {
  (void)state;
  sg_graph *g = tree_graph(2, 3, false);
  setenv("SG_FUSION", "0", 1);
  sg_compile_report rep;
  sg_session *s = session(g, 1, &rep);
  unsetenv("SG_FUSION");
  assert_int_equal(rep.ops_fused, 0);
  sg_session_destroy(s);
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sp.fusion = 2;
  assert_status(sg_session_create(g, &sp, &s), SG_ERR_INVALID_ARG, "fusion is 2");
  sg_graph_destroy(g);
}

static int setup(void **state) {
  (void)state;
  if (mkdtemp(cache_dir) == NULL) return -1;
  setenv("SG_CACHE_DIR", cache_dir, 1);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf %s", cache_dir);
  return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tree_matches_unfused),
      cmocka_unit_test(test_training_matches_unfused),
      cmocka_unit_test(test_sums_match_unfused),
      cmocka_unit_test(test_row_sum_order),
      cmocka_unit_test(test_updates_match_unfused),
      cmocka_unit_test(test_same_programs_share_a_function),
      cmocka_unit_test(test_middle_sum_keeps_its_kernel),
      cmocka_unit_test(test_alone_when_the_backend_has_no_kernel),
      cmocka_unit_test(test_cache_warm_start),
      cmocka_unit_test(test_key_inputs),
      cmocka_unit_test(test_missing_compiler_falls_back),
      cmocka_unit_test(test_env_switch),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
