/* sgrt's own CUDA kernels (backend/cuda/cuda_kernels.c: cross entropy,
 * softmax, log_softmax, layer norm, dropout, embedding, forward and backward) without a GPU:
 * the program runs on the host (cuda_emu.h), each kernel launched with the
 * arguments the backend's launchers give it, on the ops of a small training
 * graph, and compared with the double-precision reference (ref_ops.c) run
 * on the same f32 inputs: max |got - want| <= 2e-6 max |want| per output.
 * Shapes put a row's length over the block (300 > 256 threads) and the
 * softmax axis in the middle ([3, 5, 4] over axis 1), and grids of fewer
 * blocks than rows walk the grid-stride loops. A label out of range is
 * recorded (row and label) and gives that row a NaN loss. Dropout draws
 * the reference rule's masks, element for element. Sums over any axes
 * with the launcher's geometry. Embedding rows of 300 (over the block)
 * with repeated ids, i32 and i64; its backward over 1 and 3 slices of the
 * table's rows is bitwise the CPU's order of f32 additions; an id out of
 * range is recorded (position and id), its row NaN, and skipped by the
 * backward. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_kernels.h"
#include "backend/dropout_rng.h"
#include "cuda_emu.h"
#include "graph/graph.h"
#include "test_util.h"
/* After test_util.h (cmocka's includes first). */
#include "ref_ops.h"

/* Host wrappers that launch each kernel as the backend does. */
static const char wrappers[] =
    "\n#define W extern \"C\" int\n"
    "W run_softmax(const float *x, float *y, long long o, long long C, long long in, int lg, unsigned grid) "
    "{\n"
    "  return cuda_emu_launch([=] { sgk_softmax(x, y, o, C, in, lg); }, grid, BLOCK);\n"
    "}\n"
    "W run_softmax_grad(const float *dy, const float *y, float *dx, long long o, long long C, long long in,\n"
    "    int lg, unsigned grid) {\n"
    "  return cuda_emu_launch([=] { sgk_softmax_grad(dy, y, dx, o, C, in, lg); }, grid, BLOCK);\n"
    "}\n"
    "W run_layer_norm(const float *x, const float *s, const float *b, float *y, float *m, float *is,\n"
    "    long long R, long long D, double eps, unsigned grid) {\n"
    "  return cuda_emu_launch([=] { sgk_layer_norm(x, s, b, y, m, is, R, D, eps); }, grid, BLOCK);\n"
    "}\n"
    "W run_ln_grad(const float *dy, const float *x, const float *s, const float *m, const float *is,\n"
    "    float *dx, float *ds, float *db, long long R, long long D, unsigned grid, unsigned col_grid) {\n"
    "  int r = cuda_emu_launch([=] { sgk_ln_grad_rows(dy, x, s, m, is, dx, R, D); }, grid, BLOCK);\n"
    "  return r ? r : cuda_emu_launch([=] { sgk_ln_grad_cols(dy, x, m, is, ds, db, R, D); }, col_grid, "
    "BLOCK);\n"
    "}\n"
    "W run_ce(const float *x, const long long *lab, long long N, long long C, double *rows, double scale,\n"
    "    float *out, unsigned long long *err, unsigned grid) {\n"
    "  int r = cuda_emu_launch([=] { sgk_ce_rows(x, lab, 1, N, C, rows, 0, err); }, grid, BLOCK);\n"
    "  return r ? r : cuda_emu_launch([=] { sgk_ce_total(rows, N, scale, out); }, 1, BLOCK);\n"
    "}\n"
    "W run_dropout(const float *x, float *y, unsigned char *m, long long n, unsigned long long key,\n"
    "    unsigned thr, float scale, unsigned grid) {\n"
    "  return cuda_emu_launch([=] { sgk_dropout(x, y, m, n, key, thr, scale); }, grid, BLOCK);\n"
    "}\n"
    "W run_dropout_grad(const float *dy, const unsigned char *m, float *dx, long long n, float scale,\n"
    "    unsigned grid) {\n"
    "  return cuda_emu_launch([=] { sgk_dropout_grad(dy, m, dx, n, scale); }, grid, BLOCK);\n"
    "}\n"
    "W run_sum(const sgk_sum_geom *g, const float *x, float *y, unsigned grid) {\n"
    "  sgk_sum_geom geom = *g;\n"
    "  return cuda_emu_launch([=] { sgk_sum(geom, x, y); }, grid, BLOCK);\n"
    "}\n"
    "W run_ce_grad(const float *dl, double scale, const float *x, const long long *lab, long long N,\n"
    "    long long C, float *dx, unsigned long long *err, unsigned grid) {\n"
    "  return cuda_emu_launch([=] { sgk_ce_grad(dl, 0, scale, x, lab, 1, N, C, dx, err); }, grid, BLOCK);\n"
    "}\n"
    "W run_embedding(const float *t, const void *ids, int l64, long long n, long long V, long long C, float "
    "*y,\n"
    "    unsigned long long *err, unsigned grid) {\n"
    "  return cuda_emu_launch([=] { sgk_embedding(t, ids, l64, n, V, C, y, err); }, grid, BLOCK);\n"
    "}\n"
    "W run_embedding_grad(const float *dy, const void *ids, int l64, long long n, long long V, long long C,\n"
    "    long long slices, float *dt, unsigned long long *err, unsigned grid) {\n"
    "  return cuda_emu_launch([=] { sgk_embedding_grad(dy, ids, l64, n, V, C, slices, dt, err); }, grid, "
    "BLOCK);\n"
    "}\n";

typedef int (*softmax_fn)(const float *, float *, long long, long long, long long, int, unsigned);
typedef int (*softmax_grad_fn)(const float *, const float *, float *, long long, long long, long long, int,
                               unsigned);
typedef int (*ln_fn)(const float *, const float *, const float *, float *, float *, float *, long long,
                     long long, double, unsigned);
typedef int (*ln_grad_fn)(const float *, const float *, const float *, const float *, const float *, float *,
                          float *, float *, long long, long long, unsigned, unsigned);
typedef int (*ce_fn)(const float *, const long long *, long long, long long, double *, double, float *,
                     unsigned long long *, unsigned);
typedef int (*dropout_fn)(const float *, float *, unsigned char *, long long, unsigned long long, unsigned,
                          float, unsigned);
typedef int (*dropout_grad_fn)(const float *, const unsigned char *, float *, long long, float, unsigned);
typedef int (*sum_fn)(const sg__cuda_sum_geom *, const float *, float *, unsigned);
typedef int (*ce_grad_fn)(const float *, double, const float *, const long long *, long long, long long,
                          float *, unsigned long long *, unsigned);
typedef int (*emb_fn)(const float *, const void *, int, long long, long long, long long, float *,
                      unsigned long long *, unsigned);
typedef int (*emb_grad_fn)(const float *, const void *, int, long long, long long, long long, long long,
                           float *, unsigned long long *, unsigned);

static void *prog; /* the emulated program */

static void *sym(const char *name) { return cuda_emu_symbol(prog, name); }

static int setup(void **state) {
  (void)state;
  const char *src = sg__cuda_library_program();
  if (src == NULL) return -1;
  prog = cuda_emu_load(src, wrappers);
  return 0;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double uniform(double lo, double hi) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return lo + (hi - lo) * (double)(rng >> 11) / 9007199254740992.0;
}

/* The graph: softmax over the middle axis of [3, 5, 4], log_softmax over
 * rows of 300, layer norm of [5, 300] with scale and bias, cross entropy of
 * [7, 300] logits (mean), an embedding of [5, 6] ids (repeated) into a
 * [11, 300] table, all of parameters; loss = sum of each output times a
 * random weight plus the cross entropy; backward. */
static sg_graph *graph(void) {
  sg_graph *g;
  assert_status(sg_graph_create(&g), SG_OK, NULL);
  int64_t d1[] = {3, 5, 4}, d2[] = {6, 300}, d3[] = {5, 300}, d4[] = {7, 300}, dl4[] = {7}, ds[] = {300};
  static float sc[300], bi[300];
  for (int i = 0; i < 300; i++) sc[i] = 0.5f + (float)(i % 7) * 0.1f, bi[i] = (float)(i % 5) * 0.2f - 0.4f;
  /* Parameters, so that backward differentiates through every op. */
  static float v1[60], v2[1800], v3[1500], v4[2100];
  float *vs[] = {v1, v2, v3, v4};
  int ns[] = {60, 1800, 1500, 2100};
  for (int k = 0; k < 4; k++)
    for (int i = 0; i < ns[k]; i++) vs[k][i] = (float)uniform(-4, 4);
  sg_tensor x1 = sg_parameter(g, "x1", SG_F32, 3, d1, v1), x2 = sg_parameter(g, "x2", SG_F32, 2, d2, v2);
  sg_tensor x3 = sg_parameter(g, "x3", SG_F32, 2, d3, v3), x4 = sg_parameter(g, "x4", SG_F32, 2, d4, v4);
  sg_tensor y4 = sg_input(g, "y4", SG_I64, 1, dl4);
  sg_tensor r1 = sg_input(g, "r1", SG_F32, 3, d1), r2 = sg_input(g, "r2", SG_F32, 2, d2);
  sg_tensor r3 = sg_input(g, "r3", SG_F32, 2, d3);
  sg_tensor s1 = sg_softmax(g, x1, 1), s2 = sg_log_softmax(g, x2, -1);
  sg_tensor s3 = sg_layer_norm(g, x3, sg_parameter(g, "scale", SG_F32, 1, ds, sc),
                               sg_parameter(g, "bias", SG_F32, 1, ds, bi), -1, 1e-5);
  sg_tensor loss = sg_add(g,
                          sg_add(g, sg_reduce_sum(g, sg_mul(g, s1, r1), 0, NULL, 0),
                                 sg_reduce_sum(g, sg_mul(g, s2, r2), 0, NULL, 0)),
                          sg_add(g, sg_reduce_sum(g, sg_mul(g, s3, r3), 0, NULL, 0),
                                 sg_cross_entropy(g, x4, y4, SG_REDUCTION_MEAN)));
  static float v5[11 * 300];
  static int32_t ids[30];
  for (int i = 0; i < 11 * 300; i++) v5[i] = (float)uniform(-4, 4);
  for (int i = 0; i < 30; i++) ids[i] = (i * 7) % 11 % 8; /* 0..7 of 11, most twice or more */
  int64_t d5[] = {11, 300}, di[] = {5, 6}, de[] = {5, 6, 300};
  sg_tensor e =
      sg_embedding(g, sg_parameter(g, "x5", SG_F32, 2, d5, v5), sg_constant(g, "ids", SG_I32, 2, di, ids));
  loss = sg_add(g, loss, sg_reduce_sum(g, sg_mul(g, e, sg_input(g, "r5", SG_F32, 3, de)), 0, NULL, 0));
  assert_status(sg_graph_backward(g, loss), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  return g;
}

/* The graph evaluated by the reference, inputs rounded to f32 first, so
 * that every tensor's value is what an f32 kernel would be given. */
static ref_values *evaluate(const sg_graph *g) {
  ref_values *rv;
  assert_status(ref_values_create(g, &rv), SG_OK, NULL);
  for (int32_t t = 0; t < sg_graph_num_tensors(g); t++) {
    sg_tensor_info info;
    assert_status(sg_graph_tensor_info(g, (sg_tensor){t}, &info), SG_OK, NULL);
    if (info.role != SG_ROLE_INPUT) continue;
    for (int64_t i = 0; i < rv->numel[t]; i++)
      rv->v[t][i] = info.dtype == SG_I64 ? (double)((i * 37 + 11) % 300) : (double)(float)uniform(-4, 4);
  }
  assert_status(ref_run_graph(g, 1, 0, 0, rv), SG_OK, NULL);
  return rv;
}

/* Tensor t's reference values as f32 (a fresh buffer). */
static float *f32_of(const ref_values *rv, int32_t t) {
  float *p = malloc((size_t)(rv->numel[t] > 0 ? rv->numel[t] : 1) * sizeof *p);
  for (int64_t i = 0; i < rv->numel[t]; i++) p[i] = (float)rv->v[t][i];
  return p;
}

/* The reference outputs of op k from its inputs rounded to f32 (as the
 * kernel got them), compared with the kernel's. */
static void compare(const sg_graph *g, const ref_values *rv, int32_t k, float *const *got) {
  const sg__op *op = &g->ops[k];
  double *in[8] = {0}, *out[4] = {0};
  for (int i = 0; i < op->n_inputs; i++) {
    if (op->inputs[i] < 0) continue;
    int64_t n = rv->numel[op->inputs[i]];
    in[i] = malloc((size_t)n * sizeof(double));
    for (int64_t j = 0; j < n; j++) in[i][j] = (double)(float)rv->v[op->inputs[i]][j];
  }
  for (int o = 0; o < op->n_outputs; o++) out[o] = calloc((size_t)rv->numel[op->outputs[o]], sizeof(double));
  assert_status(ref_run_op(g, k, 1, in, out, 0, 0), SG_OK, NULL);
  for (int o = 0; o < op->n_outputs; o++) {
    if (got[o] == NULL) continue;
    int64_t n = rv->numel[op->outputs[o]];
    double worst = 0, scale = 0;
    for (int64_t j = 0; j < n; j++) {
      scale = fmax(scale, fabs(out[o][j]));
      worst = fmax(worst, fabs((double)got[o][j] - out[o][j]));
    }
    if (!(worst <= 2e-6 * fmax(scale, 1e-30)))
      fail_msg("%s '%s' output %d: max error %.3g of max %.3g", sg_op_kind_name(op->kind), op->name, o, worst,
               scale);
  }
  for (int i = 0; i < op->n_inputs; i++) free(in[i]);
  for (int o = 0; o < op->n_outputs; o++) free(out[o]);
}

static int32_t in_id(const sg__op *op, int i) { return op->inputs[i]; }

/* [outer, C, inner] around op's axis of tensor t. */
static void around_axis(const sg_graph *g, const sg__op *op, int32_t t, long long *outer, long long *C,
                        long long *inner) {
  const sg__tensor *x = &g->tensors[t];
  int axis;
  assert_true(sg__norm_axis(sg__attr_i(op, 0), x->ndim, &axis));
  *outer = sg__numel(axis, x->dims);
  *C = x->dims[axis];
  *inner = sg__numel(x->ndim - axis - 1, x->dims + axis + 1);
}

/* Every op of the kernels' kinds, each on a grid of 2 blocks (fewer than
 * its rows: the grid-stride loops walk) and of one block per row. */
static void test_graph_ops(void **state) {
  (void)state;
  sg_graph *g = graph();
  ref_values *rv = evaluate(g);
  int seen[SG__CUDA_LIB_N] = {0};
  for (uint32_t k = 0; k < g->n_ops; k++) {
    const sg__op *op = &g->ops[k];
    float *in[5] = {0}, *out[3] = {0};
    for (int i = 0; i < op->n_inputs && i < 5; i++)
      if (op->inputs[i] >= 0) in[i] = f32_of(rv, op->inputs[i]);
    for (int o = 0; o < op->n_outputs && o < 3; o++)
      out[o] = calloc((size_t)rv->numel[op->outputs[o]], sizeof(float));
    bool ran = true;
    for (unsigned pass = 0; pass < 2 && ran; pass++) {
      long long outer, C, inner;
      switch (op->kind) {
        case SG_OP_SOFTMAX:
        case SG_OP_LOG_SOFTMAX: {
          around_axis(g, op, in_id(op, 0), &outer, &C, &inner);
          unsigned grid = pass == 0 ? 2 : (unsigned)(outer * inner);
          softmax_fn f = (softmax_fn)sym("run_softmax");
          assert_int_equal(f(in[0], out[0], outer, C, inner, op->kind == SG_OP_LOG_SOFTMAX, grid), 0);
          seen[SG__CUDA_SOFTMAX]++;
          break;
        }
        case SG_OP_SOFTMAX_BACKWARD:
        case SG_OP_LOG_SOFTMAX_BACKWARD: {
          around_axis(g, op, in_id(op, 1), &outer, &C, &inner);
          unsigned grid = pass == 0 ? 2 : (unsigned)(outer * inner);
          softmax_grad_fn f = (softmax_grad_fn)sym("run_softmax_grad");
          assert_int_equal(
              f(in[0], in[1], out[0], outer, C, inner, op->kind == SG_OP_LOG_SOFTMAX_BACKWARD, grid), 0);
          seen[SG__CUDA_SOFTMAX_GRAD]++;
          break;
        }
        case SG_OP_LAYER_NORM: {
          const sg__tensor *x = &g->tensors[in_id(op, 0)];
          long long R = x->dims[0], D = x->dims[1];
          ln_fn f = (ln_fn)sym("run_layer_norm");
          assert_int_equal(f(in[0], in[1], in[2], out[0], out[1], out[2], R, D, sg__attr_f(op, 1),
                             pass == 0 ? 2 : (unsigned)R),
                           0);
          seen[SG__CUDA_LN]++;
          break;
        }
        case SG_OP_LAYER_NORM_BACKWARD: {
          const sg__tensor *x = &g->tensors[in_id(op, 1)];
          long long R = x->dims[0], D = x->dims[1];
          ln_grad_fn f = (ln_grad_fn)sym("run_ln_grad");
          assert_int_equal(f(in[0], in[1], in[2], in[3], in[4], out[0], out[1], out[2], R, D,
                             pass == 0 ? 2 : (unsigned)R, pass == 0 ? 1 : 2),
                           0);
          seen[SG__CUDA_LN_GRAD_ROWS]++;
          break;
        }
        case SG_OP_CROSS_ENTROPY: {
          const sg__tensor *x = &g->tensors[in_id(op, 0)];
          long long N = x->dims[0], Cc = x->dims[1], labels[16];
          for (long long i = 0; i < N; i++) labels[i] = (long long)rv->v[in_id(op, 1)][i];
          double rows[16];
          unsigned long long err[2] = {~0ull, 0};
          ce_fn f = (ce_fn)sym("run_ce");
          assert_int_equal(
              f(in[0], labels, N, Cc, rows, 1.0 / (double)N, out[0], err, pass == 0 ? 2 : (unsigned)N), 0);
          assert_true(err[0] == ~0ull);
          seen[SG__CUDA_CE_ROWS]++;
          break;
        }
        case SG_OP_CROSS_ENTROPY_BACKWARD: {
          const sg__tensor *x = &g->tensors[in_id(op, 1)];
          long long N = x->dims[0], Cc = x->dims[1], labels[16];
          for (long long i = 0; i < N; i++) labels[i] = (long long)rv->v[in_id(op, 2)][i];
          unsigned long long err[2] = {~0ull, 0};
          ce_grad_fn f = (ce_grad_fn)sym("run_ce_grad");
          assert_int_equal(
              f(in[0], 1.0 / (double)N, in[1], labels, N, Cc, out[0], err, pass == 0 ? 2 : (unsigned)N), 0);
          assert_true(err[0] == ~0ull);
          seen[SG__CUDA_CE_GRAD]++;
          break;
        }
        case SG_OP_EMBEDDING:
        case SG_OP_EMBEDDING_BACKWARD: {
          /* Pass 0: i32 ids, 2 blocks (one slice); pass 1: i64, a block per row (3 slices). */
          bool fwd = op->kind == SG_OP_EMBEDDING;
          const sg__tensor *t = &g->tensors[fwd ? in_id(op, 0) : op->outputs[0]];
          long long n = rv->numel[in_id(op, 1)], V = t->dims[0], Cc = t->dims[1], slices = pass ? 3 : 1;
          int32_t i32[64];
          int64_t i64[64];
          for (long long i = 0; i < n; i++) i32[i] = (int32_t)(i64[i] = (int64_t)rv->v[in_id(op, 1)][i]);
          const void *ids = pass ? (const void *)i64 : (const void *)i32;
          unsigned long long err[2] = {~0ull, 0};
          if (fwd) {
            emb_fn f = (emb_fn)sym("run_embedding");
            assert_int_equal(f(in[0], ids, (int)pass, n, V, Cc, out[0], err, pass == 0 ? 2 : (unsigned)n), 0);
          } else {
            emb_grad_fn f = (emb_grad_fn)sym("run_embedding_grad");
            unsigned grid = pass == 0 ? 2 : (unsigned)((Cc * slices + 255) / 256);
            assert_int_equal(f(in[0], ids, (int)pass, n, V, Cc, slices, out[0], err, grid), 0);
            /* dy's rows added in position order in f32: the CPU kernel's sums, bitwise. */
            for (long long v = 0; v < V; v++)
              for (long long c = 0; c < Cc; c++) {
                float want = 0;
                for (long long i = 0; i < n; i++)
                  if (i64[i] == v) want += in[0][i * Cc + c];
                assert_true(sg_test_same_bits(out[0][v * Cc + c], want));
              }
          }
          assert_true(err[0] == ~0ull);
          seen[fwd ? SG__CUDA_EMBEDDING : SG__CUDA_EMBEDDING_GRAD]++;
          break;
        }
        default: ran = false; break;
      }
      if (ran) compare(g, rv, (int32_t)k, out);
    }
    for (int i = 0; i < 5; i++) free(in[i]);
    for (int o = 0; o < 3; o++) free(out[o]);
  }
  /* Each kind ran (twice: two grids), two of the softmax pair. */
  assert_int_equal(seen[SG__CUDA_SOFTMAX], 4);
  assert_int_equal(seen[SG__CUDA_SOFTMAX_GRAD], 4);
  assert_int_equal(seen[SG__CUDA_LN], 2);
  assert_int_equal(seen[SG__CUDA_LN_GRAD_ROWS], 2);
  assert_int_equal(seen[SG__CUDA_CE_ROWS], 2);
  assert_int_equal(seen[SG__CUDA_CE_GRAD], 2);
  assert_int_equal(seen[SG__CUDA_EMBEDDING], 2);
  assert_int_equal(seen[SG__CUDA_EMBEDDING_GRAD], 2);
  ref_values_destroy(rv);
  sg_graph_destroy(g);
}

/* A label out of range: the first row to meet it records itself and the
 * label, its loss is NaN (so the mean is), and the gradient kernel records
 * it too; the other rows' values stay right. */
static void test_bad_label(void **state) {
  (void)state;
  enum { N = 4, C = 3 };
  float x[N * C], out = 0, dl = 1, dx[N * C];
  for (int i = 0; i < N * C; i++) x[i] = (float)(i % 5) - 2.0f;
  long long labels[N] = {0, 2, 7, 1};
  double rows[N];
  unsigned long long err[2] = {~0ull, 0};
  ce_fn f = (ce_fn)sym("run_ce");
  assert_int_equal(f(x, labels, N, C, rows, 1.0 / N, &out, err, 2), 0);
  assert_true(err[0] == 2 && err[1] == 7);
  assert_true(isnan(out) && isnan(rows[2]));
  /* Row 1 by hand: logsumexp(x) - x[label]. */
  double lse = log(exp((double)x[3]) + exp((double)x[4]) + exp((double)x[5]));
  assert_true(fabs(rows[1] - (lse - (double)x[5])) < 1e-12);
  err[0] = ~0ull, err[1] = 0;
  ce_grad_fn fg = (ce_grad_fn)sym("run_ce_grad");
  assert_int_equal(fg(&dl, 1.0 / N, x, labels, N, C, dx, err, 4), 0);
  assert_true(err[0] == 2 && err[1] == 7);
}

/* An id out of range: the forward records its position and value, writes
 * NaN in its row and the right rows elsewhere; the backward records it
 * too and leaves it out of the sums. */
static void test_bad_id(void **state) {
  (void)state;
  enum { N = 4, V = 3, C = 5 };
  float table[V * C], y[N * C], dy[N * C], dt[V * C];
  for (int i = 0; i < V * C; i++) table[i] = (float)i;
  for (int i = 0; i < N * C; i++) dy[i] = (float)(i % 7) - 3.0f;
  long long ids[N] = {2, 0, 3, 2};
  unsigned long long err[2] = {~0ull, 0};
  emb_fn f = (emb_fn)sym("run_embedding");
  assert_int_equal(f(table, ids, 1, N, V, C, y, err, 2), 0);
  assert_true(err[0] == 2 && err[1] == 3);
  for (int c = 0; c < C; c++) {
    assert_true(isnan(y[2 * C + c]));
    assert_true(y[c] == table[2 * C + c] && y[C + c] == (float)c && y[3 * C + c] == table[2 * C + c]);
  }
  err[0] = ~0ull, err[1] = 0;
  int32_t neg[N] = {1, -1, 1, 0};
  emb_grad_fn fg = (emb_grad_fn)sym("run_embedding_grad");
  assert_int_equal(fg(dy, neg, 0, N, V, C, 2, dt, err, 1), 0);
  assert_true(err[0] == 1 && err[1] == (unsigned long long)-1);
  for (int c = 0; c < C; c++) {
    assert_true(dt[c] == dy[3 * C + c]);
    assert_true(dt[C + c] == dy[c] + dy[2 * C + c]);
    assert_true(dt[2 * C + c] == 0);
  }
}

/* Dropout draws the masks of the reference rule (ref_dropout_keep, written
 * from docs/backend.md), element for element, over a grid of 2 blocks for
 * 1000 elements; y and the backward's dx are x * scale in f32, bitwise; a
 * subsequence gives another mask. */
static void test_dropout(void **state) {
  (void)state;
  enum { N = 1000 };
  const double p = 0.3;
  const uint64_t op_seed = 7, seed = 123, step = 5;
  static float x[N], y[N], dx[N];
  static unsigned char mask[N], mask3[N];
  for (int i = 0; i < N; i++) x[i] = (float)uniform(-4, 4);
  float scale = (float)(1.0 / (1.0 - p));
  dropout_fn f = (dropout_fn)sym("run_dropout");
  assert_int_equal(
      f(x, y, mask, N, sg__dropout_key(op_seed, seed, step, 0), sg__dropout_threshold(p), scale, 2), 0);
  int kept = 0;
  for (int i = 0; i < N; i++) {
    int keep = ref_dropout_keep(op_seed, seed, step, (uint64_t)i, p);
    if (mask[i] != keep || !sg_test_same_bits(y[i], keep ? x[i] * scale : 0.0f))
      fail_msg("element %d: mask %d y %g, want %d %g", i, mask[i], (double)y[i], keep,
               (double)(keep ? x[i] * scale : 0));
    kept += keep;
  }
  assert_true(kept > 600 && kept < 800); /* about 70% */
  dropout_grad_fn fg = (dropout_grad_fn)sym("run_dropout_grad");
  assert_int_equal(fg(x, mask, dx, N, scale, 3), 0);
  for (int i = 0; i < N; i++) assert_true(sg_test_same_bits(dx[i], mask[i] ? x[i] * scale : 0.0f));
  assert_int_equal(
      f(x, y, mask3, N, sg__dropout_key(op_seed, seed, step, 3), sg__dropout_threshold(p), scale, 4), 0);
  assert_true(memcmp(mask, mask3, N) != 0);
}

/* Sums over any axes (reduce_sum, reduce_mean, sum_to), with the geometry
 * the launcher computes (sg__cuda_sum_geometry, which merges adjacent dims
 * of one kind), against the reference on the same f32 inputs: a middle
 * axis, the outer two of three around a kept one, everything (a mean),
 * sum_to [4, 5, 6] -> [5, 1], and kept dims over 256 elements each. */
static void test_sums(void **state) {
  (void)state;
  sg_graph *g;
  assert_status(sg_graph_create(&g), SG_OK, NULL);
  int64_t d1[] = {3, 5, 4}, d2[] = {7, 300}, d3[] = {4, 5, 6}, d4[] = {300, 2, 3}, mid[] = {1},
          outer[] = {0, 2};
  int64_t first[] = {0}, to[] = {5, 1};
  sg_tensor x1 = sg_input(g, "x1", SG_F32, 3, d1), x2 = sg_input(g, "x2", SG_F32, 2, d2);
  sg_tensor x3 = sg_input(g, "x3", SG_F32, 3, d3), x4 = sg_input(g, "x4", SG_F32, 3, d4);
  sg_tensor ys[6];
  ys[0] = sg_reduce_sum(g, x1, 1, mid, 0);
  ys[1] = sg_reduce_sum(g, x1, 2, outer, 1);
  ys[2] = sg_reduce_mean(g, x2, 0, NULL, 0);
  ys[3] = sg_reduce_sum(g, x4, 1, first, 0);
  ys[4] = sg_reduce_mean(g, x4, 2, outer, 0);
  sg_attr shape = {.name = "shape", .type = SG_ATTR_INTS, .count = 2, .ints = to};
  assert_status(sg_graph_add_op(g, SG_OP_SUM_TO, 1, &x3, 1, &shape, 1, &ys[5], NULL), SG_OK, NULL);
  for (int i = 0; i < 6; i++) assert_status(sg_graph_mark_output(g, ys[i]), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  ref_values *rv = evaluate(g);
  sum_fn f = (sum_fn)sym("run_sum");
  int ran = 0;
  for (uint32_t k = 0; k < g->n_ops; k++) {
    sg__cuda_sum_geom geom;
    if (!sg__cuda_sum_geometry(g, &g->ops[k], &geom)) continue;
    assert_int_equal(geom.n_out, rv->numel[g->ops[k].outputs[0]]);
    float *x = f32_of(rv, g->ops[k].inputs[0]), *y = calloc((size_t)geom.n_out, sizeof *y);
    for (unsigned grid = 1; grid <= 3; grid += 2) {
      assert_int_equal(f(&geom, x, y, grid), 0);
      float *got[] = {y};
      compare(g, rv, (int32_t)k, got);
    }
    free(x), free(y);
    ran++;
  }
  assert_int_equal(ran, 6);
  /* Adjacent dims of one kind merge: [3, 5, 4] over {0, 2} stays two reduced runs around the kept 5. */
  sg__cuda_sum_geom geom;
  assert_true(sg__cuda_sum_geometry(g, &g->ops[g->tensors[ys[1].id].producer], &geom));
  assert_int_equal(geom.nr, 2);
  assert_int_equal(geom.nk, 1);
  assert_true(sg__cuda_sum_geometry(g, &g->ops[g->tensors[ys[2].id].producer], &geom)); /* all: one run */
  assert_int_equal(geom.nr, 1);
  assert_int_equal(geom.nk, 0);
  assert_true(geom.scale == 1.0 / 2100);
  ref_values_destroy(rv);
  sg_graph_destroy(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_graph_ops), cmocka_unit_test(test_bad_label), cmocka_unit_test(test_bad_id),
      cmocka_unit_test(test_dropout),   cmocka_unit_test(test_sums),
  };
  return cmocka_run_group_tests(tests, setup, NULL); /* the program stays loaded until exit */
}
