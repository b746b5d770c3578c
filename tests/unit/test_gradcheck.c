/* Gradient checks (SPEC G6): for every differentiable op and its variants,
 * sgrt's analytic gradients (autodiff + CPU kernels, f32) against central
 * finite differences of an independent double-precision evaluation of the
 * same forward graph (ref_ops.c, which never calls the backend).
 *
 * Each case builds out = op(params...), then loss = sum(out * R) with a
 * fixed random R so every output element matters, differentiates, and
 * compares d loss / d param for every parameter element (up to MAX_CHECKED
 * per parameter, spread evenly). Tolerance: max |analytic - numeric| /
 * max(max |numeric|, 1e-3) <= 1e-2 (f32 kernels; most cases reach 1e-4). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "ref_ops.h"
#include "test_util.h"

#define MAX_PARAMS 4
#define MAX_CHECKED 48
#define TOL 1e-2

typedef struct gcase {
  const char *name;
  sg_graph *g;
  sg_tensor params[MAX_PARAMS];
  int n_params;
  sg_tensor out;
  /* Integer inputs (labels): name, and values. */
  const char *label_name;
  int64_t labels[16];
  int n_labels;
} gcase;

static uint64_t fill_seed = 1;

static sg_tensor P(gcase *c, int ndim, const int64_t *dims) {
  char name[32];
  snprintf(name, sizeof name, "p%d", c->n_params);
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= dims[i];
  float *v = malloc((size_t)n * sizeof *v);
  assert_non_null(v);
  sg_test_fill(v, (size_t)n, fill_seed++);
  /* Keep values away from 0 so that relu/clip/abs kinks are not hit. */
  for (int64_t i = 0; i < n; i++) v[i] = v[i] >= 0 ? v[i] * 0.9f + 0.1f : v[i] * 0.9f - 0.1f;
  sg_tensor t = sg_parameter(c->g, name, SG_F32, ndim, dims, v);
  free(v);
  c->params[c->n_params++] = t;
  return t;
}
#define D(...) ((const int64_t[]){__VA_ARGS__})
#define NDIM(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define PARAM(c, ...) P(c, NDIM(__VA_ARGS__), D(__VA_ARGS__))

static void begin(gcase *c, const char *name) {
  memset(c, 0, sizeof *c);
  c->name = name;
  assert_int_equal(sg_graph_create(&c->g), SG_OK);
}

/* Double-precision forward of the ops that `loss` needs, with the current
 * values in vals (one buffer per tensor); returns the loss. */
static double ref_loss(const sg_graph *g, double **vals, int32_t loss) {
  bool *needed = calloc(g->n_ops + 1, 1);
  assert_non_null(needed);
  needed[g->tensors[loss].producer] = true;
  for (int32_t k = (int32_t)g->n_ops - 1; k >= 0; k--) {
    if (!needed[k]) continue;
    for (int i = 0; i < g->ops[k].n_inputs; i++) {
      int32_t t = g->ops[k].inputs[i];
      if (t >= 0 && g->tensors[t].producer >= 0) needed[g->tensors[t].producer] = true;
    }
  }
  for (uint32_t k = 0; k < g->n_ops; k++) {
    if (!needed[k]) continue;
    const sg__op *op = &g->ops[k];
    double *in[16] = {0}, *out[4] = {0};
    for (int i = 0; i < op->n_inputs; i++) in[i] = op->inputs[i] >= 0 ? vals[op->inputs[i]] : NULL;
    for (int i = 0; i < op->n_outputs; i++) out[i] = vals[op->outputs[i]];
    assert_int_equal(ref_run_op(g, (int32_t)k, 1, in, out, 0, 0), SG_OK);
  }
  free(needed);
  return vals[loss][0];
}

static void run_case(gcase *c) {
  sg_graph *g = c->g;
  /* loss = sum(out * R) */
  sg_tensor_info oi;
  assert_int_equal(sg_graph_tensor_info(g, c->out, &oi), SG_OK);
  float *r = malloc(oi.nbytes);
  assert_non_null(r);
  sg_test_fill(r, (size_t)oi.numel, 777);
  sg_tensor R = sg_constant(g, "R", SG_F32, oi.ndim, oi.dims, r);
  free(r);
  sg_tensor loss = sg_reduce_sum(g, sg_mul(g, c->out, R), 0, NULL, 0);
  assert_int_equal(sg_tensor_set_name(g, loss, "loss"), SG_OK);
  assert_int_equal(sg_graph_mark_output(g, loss), SG_OK);
  assert_status(sg_graph_backward(g, loss), SG_OK, NULL);
  sg_tensor grads[MAX_PARAMS];
  for (int i = 0; i < c->n_params; i++) {
    assert_status(sg_graph_grad(g, c->params[i], &grads[i]), SG_OK, NULL);
    assert_int_equal(sg_graph_mark_output(g, grads[i]), SG_OK);
  }
  assert_status(sg_graph_finalize(g), SG_OK, NULL);

  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sp.threads = 2;
  sg_session *s;
  assert_status(sg_session_create(g, &sp, &s), SG_OK, NULL);
  assert_status(sg_session_compile(s), SG_OK, NULL);
  if (c->label_name) {
    int64_t ld[] = {c->n_labels};
    assert_status(sg_session_set_input(s, c->label_name, SG_I64, 1, ld, c->labels), SG_OK, NULL);
  }
  assert_status(sg_session_step(s), SG_OK, NULL);

  /* Reference values of every tensor, sources from their initializers. */
  double **vals = calloc(g->n_tensors, sizeof(double *));
  assert_non_null(vals);
  for (uint32_t t = 0; t < g->n_tensors; t++) {
    const sg__tensor *x = &g->tensors[t];
    int64_t n = sg__numel(x->ndim, x->dims);
    vals[t] = calloc((size_t)n, sizeof(double));
    assert_non_null(vals[t]);
    if (x->data && x->dtype == SG_F32)
      for (int64_t i = 0; i < n; i++) vals[t][i] = ((const float *)x->data)[i];
    if (x->data && x->dtype == SG_BOOL) /* where's condition */
      for (int64_t i = 0; i < n; i++) vals[t][i] = ((const uint8_t *)x->data)[i];
    if (x->data && x->dtype == SG_I32) /* embedding ids */
      for (int64_t i = 0; i < n; i++) vals[t][i] = ((const int32_t *)x->data)[i];
    if (x->data && x->dtype == SG_I64)
      for (int64_t i = 0; i < n; i++) vals[t][i] = (double)((const int64_t *)x->data)[i];
    if (c->label_name && strcmp(x->name, c->label_name) == 0)
      for (int64_t i = 0; i < n; i++) vals[t][i] = (double)c->labels[i];
  }
  double worst = 0;
  for (int p = 0; p < c->n_params; p++) {
    const sg__tensor *x = &g->tensors[c->params[p].id];
    int64_t n = sg__numel(x->ndim, x->dims);
    float *analytic = malloc((size_t)n * sizeof(float));
    assert_non_null(analytic);
    char gname[64];
    snprintf(gname, sizeof gname, "%s.grad", x->name);
    assert_status(sg_session_read(s, gname, analytic, (size_t)n * sizeof(float)), SG_OK, NULL);
    int64_t stride = n > MAX_CHECKED ? n / MAX_CHECKED : 1;
    double max_num = 0, max_err = 0;
    for (int64_t i = 0; i < n; i += stride) {
      double v = vals[c->params[p].id][i], h = 1e-6 * fmax(1.0, fabs(v));
      vals[c->params[p].id][i] = v + h;
      double lp = ref_loss(g, vals, loss.id);
      vals[c->params[p].id][i] = v - h;
      double lm = ref_loss(g, vals, loss.id);
      vals[c->params[p].id][i] = v;
      double num = (lp - lm) / (2 * h);
      max_num = fmax(max_num, fabs(num));
      max_err = fmax(max_err, fabs(num - analytic[i]));
    }
    double rel = max_err / fmax(max_num, 1e-3);
    if (rel > worst) worst = rel;
    if (rel > TOL)
      fail_msg("%s: gradient of %s: max abs error %.3g, max |numeric| %.3g, relative %.3g > %.0e", c->name,
               x->name, max_err, max_num, rel, TOL);
    free(analytic);
  }
  printf("  %-40s max relative error %.2e\n", c->name, worst);
  for (uint32_t t = 0; t < g->n_tensors; t++) free(vals[t]);
  free(vals);
  sg_session_destroy(s);
  sg_graph_destroy(g);
}

static sg_conv2d_params conv(int64_t s, int64_t pt, int64_t pl, int64_t pb, int64_t pr, int64_t d,
                             int64_t groups) {
  sg_conv2d_params p = {sizeof p, {s, s}, {pt, pl, pb, pr}, {d, d}, groups};
  return p;
}

static void test_conv2d(void **state) {
  (void)state;
  struct {
    const char *name;
    sg_conv2d_params p;
    int64_t c, k, h, r;
    int bias;
  } cases[] = {
      {"conv2d plain", conv(1, 0, 0, 0, 0, 1, 1), 3, 4, 6, 3, 1},
      {"conv2d stride 2 pad 1", conv(2, 1, 1, 1, 1, 1, 1), 2, 3, 7, 3, 1},
      {"conv2d dilation 2", conv(1, 2, 2, 2, 2, 2, 1), 2, 2, 6, 3, 0},
      {"conv2d groups 2", conv(1, 1, 1, 1, 1, 1, 2), 4, 6, 5, 3, 1},
      {"conv2d depthwise", conv(1, 1, 1, 1, 1, 1, 4), 4, 4, 5, 3, 0},
      {"conv2d asymmetric pad", conv(1, 1, 0, 0, 2, 1, 1), 2, 3, 5, 2, 1},
      {"conv2d 1x1 stride 2", conv(2, 0, 0, 0, 0, 1, 1), 3, 4, 6, 1, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    gcase c;
    begin(&c, cases[i].name);
    sg_tensor x = PARAM(&c, 2, cases[i].c, cases[i].h, cases[i].h);
    sg_tensor w = PARAM(&c, cases[i].k, cases[i].c / cases[i].p.groups, cases[i].r, cases[i].r);
    sg_tensor b = cases[i].bias ? PARAM(&c, cases[i].k) : SG_NO_TENSOR;
    c.out = sg_conv2d(c.g, x, w, b, &cases[i].p);
    run_case(&c);
  }
}

static void test_batch_norm(void **state) {
  (void)state;
  for (int training = 1; training >= 0; training--) {
    for (int rank = 2; rank <= 4; rank += 2) {
      gcase c;
      begin(&c, training ? (rank == 4 ? "batch_norm train NCHW" : "batch_norm train NC")
                         : (rank == 4 ? "batch_norm eval NCHW" : "batch_norm eval NC"));
      sg_tensor x = rank == 4 ? PARAM(&c, 3, 3, 4, 4) : PARAM(&c, 6, 3);
      sg_tensor gm = PARAM(&c, 3), bt = PARAM(&c, 3);
      float rm[3] = {0.1f, -0.2f, 0.3f}, rv[3] = {0.5f, 1.5f, 2.0f};
      sg_role role = training ? SG_ROLE_STATE : SG_ROLE_CONSTANT;
      sg_tensor m = sg_graph_add_tensor(c.g, "rm", SG_F32, role, 1, D(3), rm);
      sg_tensor v = sg_graph_add_tensor(c.g, "rv", SG_F32, role, 1, D(3), rv);
      sg_batch_norm_params p = SG_BATCH_NORM_PARAMS_INIT;
      p.training = training;
      c.out = sg_batch_norm(c.g, x, gm, bt, m, v, &p);
      run_case(&c);
    }
  }
}

static void test_pooling(void **state) {
  (void)state;
  struct {
    const char *name;
    int avg;
    int64_t k, s, pad;
    int ceil, cip, h;
  } cases[] = {
      {"max_pool2d 2x2", 0, 2, 2, 0, 0, 1, 6},         {"max_pool2d 3/2 pad 1", 0, 3, 2, 1, 0, 1, 7},
      {"max_pool2d ceil_mode", 0, 3, 2, 1, 1, 1, 6},   {"avg_pool2d 2x2", 1, 2, 2, 0, 0, 1, 6},
      {"avg_pool2d pad include", 1, 3, 2, 1, 0, 1, 7}, {"avg_pool2d pad exclude", 1, 3, 2, 1, 0, 0, 7},
      {"avg_pool2d ceil_mode", 1, 3, 2, 1, 1, 0, 6},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    gcase c;
    begin(&c, cases[i].name);
    sg_tensor x = PARAM(&c, 2, 2, cases[i].h, cases[i].h);
    sg_pool2d_params p = SG_POOL2D_PARAMS_INIT;
    p.kernel[0] = p.kernel[1] = cases[i].k;
    p.stride[0] = p.stride[1] = cases[i].s;
    p.padding[0] = p.padding[1] = p.padding[2] = p.padding[3] = cases[i].pad;
    p.ceil_mode = cases[i].ceil;
    p.count_include_pad = cases[i].cip;
    c.out = cases[i].avg ? sg_avg_pool2d(c.g, x, &p) : sg_max_pool2d(c.g, x, &p);
    run_case(&c);
  }
  gcase c;
  begin(&c, "global_avg_pool");
  c.out = sg_global_avg_pool(c.g, PARAM(&c, 2, 3, 4, 5));
  run_case(&c);
}

static void test_elementwise(void **state) {
  (void)state;
  gcase c;
  const char *unary[] = {"relu",    "relu6", "clip",       "gelu erf",   "gelu tanh",
                         "sigmoid", "tanh",  "add_scalar", "mul_scalar", "pow_scalar"};
  for (int i = 0; i < 10; i++) {
    begin(&c, unary[i]);
    sg_tensor x = PARAM(&c, 3, 4);
    /* relu6 and clip need values on both sides of their bounds. */
    if (i == 1) x = sg_mul_scalar(c.g, x, 8.0);
    switch (i) {
      case 0: c.out = sg_relu(c.g, x); break;
      case 1: c.out = sg_relu6(c.g, x); break;
      case 2: c.out = sg_clip(c.g, x, -0.5, 0.5); break;
      case 3: c.out = sg_gelu(c.g, x, 0); break;
      case 4: c.out = sg_gelu(c.g, x, 1); break;
      case 5: c.out = sg_sigmoid(c.g, x); break;
      case 6: c.out = sg_tanh(c.g, x); break;
      case 7: c.out = sg_add_scalar(c.g, x, 1.5); break;
      case 8: c.out = sg_mul_scalar(c.g, x, -2.5); break;
      case 9: c.out = sg_pow_scalar(c.g, x, 3.0); break;
    }
    run_case(&c);
  }
  /* Broadcasting binaries: both operands are parameters. */
  const char *bin[] = {"add broadcast", "sub broadcast", "mul broadcast", "div broadcast",
                       "mul scalar operand"};
  for (int i = 0; i < 5; i++) {
    begin(&c, bin[i]);
    sg_tensor a = PARAM(&c, 2, 3, 4);
    sg_tensor b = i == 4 ? PARAM(&c, 1) : PARAM(&c, 3, 1);
    switch (i) {
      case 0: c.out = sg_add(c.g, a, b); break;
      case 1: c.out = sg_sub(c.g, a, b); break;
      case 2:
      case 4: c.out = sg_mul(c.g, a, b); break;
      case 3: c.out = sg_div(c.g, a, b); break;
    }
    run_case(&c);
  }
  begin(&c, "add both broadcast");
  sg_tensor a = PARAM(&c, 4, 1), b = PARAM(&c, 1, 5);
  c.out = sg_add(c.g, a, b);
  run_case(&c);
}

static void test_matmul_gemm(void **state) {
  (void)state;
  gcase c;
  begin(&c, "matmul 2-D");
  sg_tensor a = PARAM(&c, 3, 4), b = PARAM(&c, 4, 5);
  c.out = sg_matmul(c.g, a, b);
  run_case(&c);
  begin(&c, "matmul batched broadcast");
  a = PARAM(&c, 2, 1, 3, 4);
  b = PARAM(&c, 3, 4, 2);
  c.out = sg_matmul(c.g, a, b);
  run_case(&c);
  begin(&c, "matmul 1-D operands");
  a = PARAM(&c, 4);
  b = PARAM(&c, 2, 4, 3);
  c.out = sg_matmul(c.g, a, b);
  run_case(&c);
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      char *name = malloc(64);
      assert_non_null(name);
      snprintf(name, 64, "gemm trans_a %d trans_b %d", ta, tb);
      begin(&c, name);
      sg_gemm_params p = {sizeof p, ta, tb, 0.7, 1.3};
      a = ta ? PARAM(&c, 4, 3) : PARAM(&c, 3, 4);
      b = tb ? PARAM(&c, 5, 4) : PARAM(&c, 4, 5);
      sg_tensor cc = PARAM(&c, 5);
      c.out = sg_gemm(c.g, a, b, cc, &p);
      run_case(&c);
      free(name);
    }
  begin(&c, "linear");
  c.out = sg_linear(c.g, PARAM(&c, 4, 6), PARAM(&c, 3, 6), PARAM(&c, 3));
  run_case(&c);
}

static void test_shape_ops(void **state) {
  (void)state;
  gcase c;
  begin(&c, "flatten");
  c.out = sg_relu(c.g, sg_flatten(c.g, PARAM(&c, 2, 3, 2, 2), 1));
  run_case(&c);
  begin(&c, "reshape");
  c.out = sg_tanh(c.g, sg_reshape(c.g, PARAM(&c, 4, 6), 3, D(2, -1, 3)));
  run_case(&c);
  begin(&c, "transpose");
  c.out = sg_sigmoid(c.g, sg_transpose(c.g, PARAM(&c, 2, 3, 4), 3, D(2, 0, 1)));
  run_case(&c);
  begin(&c, "concat");
  sg_tensor a = PARAM(&c, 2, 3), b = PARAM(&c, 2, 2);
  sg_tensor parts[] = {a, b, a};
  c.out = sg_concat(c.g, 3, parts, 1);
  run_case(&c);
}

static void test_softmax_losses_reductions(void **state) {
  (void)state;
  gcase c;
  begin(&c, "softmax");
  c.out = sg_softmax(c.g, PARAM(&c, 3, 5), -1);
  run_case(&c);
  begin(&c, "softmax axis 0");
  c.out = sg_softmax(c.g, PARAM(&c, 3, 5), 0);
  run_case(&c);
  begin(&c, "log_softmax");
  c.out = sg_log_softmax(c.g, PARAM(&c, 3, 5), 1);
  run_case(&c);
  for (int red = 0; red < 3; red++) {
    static const char *names[] = {"cross_entropy none", "cross_entropy mean", "cross_entropy sum"};
    begin(&c, names[red]);
    sg_tensor logits = PARAM(&c, 4, 5);
    sg_tensor labels = sg_input(c.g, "labels", SG_I64, 1, D(4));
    c.label_name = "labels";
    c.n_labels = 4;
    int64_t l[4] = {0, 3, 4, 1};
    memcpy(c.labels, l, sizeof l);
    c.out = sg_cross_entropy(c.g, logits, labels, (sg_reduction)red);
    run_case(&c);
  }
  begin(&c, "reduce_mean all");
  c.out = sg_reduce_mean(c.g, PARAM(&c, 3, 4), 0, NULL, 0);
  run_case(&c);
  begin(&c, "reduce_mean axes keepdims");
  c.out = sg_reduce_mean(c.g, PARAM(&c, 2, 3, 4), 2, D(0, 2), 1);
  run_case(&c);
  begin(&c, "reduce_sum axis");
  c.out = sg_reduce_sum(c.g, PARAM(&c, 2, 3, 4), 1, D(-2), 0);
  run_case(&c);
  begin(&c, "dropout");
  c.out = sg_dropout(c.g, PARAM(&c, 4, 8), 0.3, 11, 1);
  run_case(&c);
}

/* Embedding lookups through the CPU kernels: ids of both dtypes with
 * repeats, and GPT-2's input: token and position embeddings added, layer
 * norm, logits against the token table (tied weights: the table's gradient
 * comes from the lookup and from the matmul). */
static void test_embedding(void **state) {
  (void)state;
  static const int64_t tok[2 * 6] = {4, 0, 4, 9, 1, 4, 9, 9, 2, 0, 3, 4};
  static const int32_t pos[6] = {0, 1, 2, 3, 4, 5}, rep[7] = {2, 2, 0, 2, 1, 0, 2};
  gcase c;
  begin(&c, "embedding i32 ids, repeated");
  c.out = sg_embedding(c.g, PARAM(&c, 3, 5), sg_constant(c.g, "ids", SG_I32, 1, D(7), rep));
  run_case(&c);
  begin(&c, "embedding tok + pos, layer_norm, tied logits");
  sg_tensor wte = PARAM(&c, 10, 8), wpe = PARAM(&c, 6, 8);
  sg_tensor h = sg_add(c.g, sg_embedding(c.g, wte, sg_constant(c.g, "tok", SG_I64, 2, D(2, 6), tok)),
                       sg_embedding(c.g, wpe, sg_constant(c.g, "pos", SG_I32, 1, D(6), pos)));
  h = sg_layer_norm(c.g, h, PARAM(&c, 8), PARAM(&c, 8), -1, 1e-5);
  int64_t perm[2] = {1, 0};
  c.out = sg_matmul(c.g, h, sg_transpose(c.g, wte, 2, perm));
  run_case(&c);
}

/* Forward slices (issue 21): overlapping and adjacent ranges of one tensor, and GPT-2's attention: q, k
 * and v sliced from one projection, heads split by reshape and transpose, a causal additive mask,
 * softmax, the weighted sum and the heads merged again. */
static void test_slice_attention(void **state) {
  (void)state;
  gcase c;
  begin(&c, "slice: overlapping ranges, negative axis");
  sg_tensor w = PARAM(&c, 3, 7);
  c.out = sg_mul(c.g, sg_slice(c.g, w, -1, 0, 4), sg_slice(c.g, w, 1, 2, 4));
  run_case(&c);
  begin(&c, "causal attention from one qkv projection");
  enum { B = 2, T = 4, H = 2, D = 3, C = H * D };
  sg_tensor x = PARAM(&c, B * T, C), wqkv = PARAM(&c, 3 * C, C);
  sg_tensor qkv = sg_linear(c.g, x, wqkv, PARAM(&c, 3 * C));
  sg_tensor part[3];
  for (int i = 0; i < 3; i++) {
    int64_t perm_qv[4] = {0, 2, 1, 3}, perm_k[4] = {0, 2, 3, 1};
    part[i] = sg_reshape(c.g, sg_slice(c.g, qkv, 1, i * C, C), 4, D(B, T, H, D));
    part[i] = sg_transpose(c.g, part[i], 4, i == 1 ? perm_k : perm_qv);
  }
  float mask[T * T];
  for (int i = 0; i < T; i++)
    for (int j = 0; j < T; j++) mask[i * T + j] = j <= i ? 0.0f : -1e9f;
  sg_tensor att = sg_mul_scalar(c.g, sg_matmul(c.g, part[0], part[1]), 0.5);
  att = sg_softmax(c.g, sg_add(c.g, att, sg_constant(c.g, "mask", SG_F32, 2, D(T, T), mask)), -1);
  int64_t merge[4] = {0, 2, 1, 3};
  c.out = sg_reshape(c.g, sg_transpose(c.g, sg_matmul(c.g, att, part[2]), 4, merge), 2, D(B * T, C));
  run_case(&c);
}

/* A small network end to end: conv-BN-relu-pool-linear-CE with fan-out
 * (a weight used twice). */
/* The ops of issue 17 through their CPU kernels and gradient rules. */
static void test_math_and_layer_norm(void **state) {
  (void)state;
  gcase c;
  const char *unary[] = {"exp", "log", "sqrt", "reciprocal", "neg", "abs", "erf", "sign"};
  for (int i = 0; i < 8; i++) {
    begin(&c, unary[i]);
    sg_tensor x = PARAM(&c, 3, 4), pos = sg_exp(c.g, x); /* exp(x) > 0 for log, sqrt */
    switch (i) {
      case 0: c.out = sg_exp(c.g, x); break;
      case 1: c.out = sg_log(c.g, pos); break;
      case 2: c.out = sg_sqrt(c.g, pos); break;
      case 3: c.out = sg_reciprocal(c.g, pos); break;
      case 4: c.out = sg_neg(c.g, x); break;
      case 5: c.out = sg_abs(c.g, x); break;
      case 6: c.out = sg_erf(c.g, x); break;
      default: c.out = sg_add(c.g, sg_sign(c.g, x), x); break;
    }
    run_case(&c);
  }
  for (int i = 0; i < 3; i++) {
    begin(&c, i == 0 ? "max broadcast" : i == 1 ? "min broadcast" : "where broadcast");
    sg_tensor a = PARAM(&c, 2, 3, 4), b = PARAM(&c, 3, 1);
    static const uint8_t cond[4] = {1, 0, 0, 1};
    if (i == 0) c.out = sg_max(c.g, a, b);
    else if (i == 1) c.out = sg_min(c.g, b, a);
    else c.out = sg_where(c.g, sg_constant(c.g, "cond", SG_BOOL, 1, D(4), cond), a, b);
    run_case(&c);
  }
  begin(&c, "layer_norm last dim");
  sg_tensor x = PARAM(&c, 4, 6);
  c.out = sg_layer_norm(c.g, x, PARAM(&c, 6), PARAM(&c, 6), -1, 1e-5);
  run_case(&c);
  begin(&c, "layer_norm two dims, no bias");
  x = PARAM(&c, 2, 3, 4);
  c.out = sg_layer_norm(c.g, x, PARAM(&c, 3, 4), SG_NO_TENSOR, 1, 1e-3);
  run_case(&c);
  begin(&c, "linear-layer_norm-gelu");
  x = sg_linear(c.g, PARAM(&c, 3, 5), PARAM(&c, 4, 5), SG_NO_TENSOR);
  c.out = sg_gelu(c.g, sg_layer_norm(c.g, x, PARAM(&c, 4), PARAM(&c, 4), -1, 1e-5), 0);
  run_case(&c);
}

static void test_network(void **state) {
  (void)state;
  gcase c;
  begin(&c, "network conv-bn-relu-pool-fc-ce, fan-out");
  sg_tensor w = PARAM(&c, 3, 2, 3, 3);
  sg_tensor gm = PARAM(&c, 3);
  sg_tensor fc = PARAM(&c, 4, 3);
  float xv[2 * 2 * 5 * 5], zeros[3] = {0}, ones[3] = {1, 1, 1};
  sg_test_fill(xv, sizeof xv / sizeof xv[0], 4242);
  sg_tensor x = sg_constant(c.g, "images", SG_F32, 4, D(2, 2, 5, 5), xv);
  sg_tensor bt = sg_constant(c.g, "beta", SG_F32, 1, D(3), zeros);
  sg_tensor rm = sg_graph_add_tensor(c.g, "rm", SG_F32, SG_ROLE_STATE, 1, D(3), zeros);
  sg_tensor rv = sg_graph_add_tensor(c.g, "rv", SG_F32, SG_ROLE_STATE, 1, D(3), ones);
  sg_conv2d_params cp = conv(1, 1, 1, 1, 1, 1, 1);
  sg_tensor h =
      sg_relu(c.g, sg_batch_norm(c.g, sg_conv2d(c.g, x, w, SG_NO_TENSOR, &cp), gm, bt, rm, rv, NULL));
  sg_tensor pooled = sg_flatten(c.g, sg_global_avg_pool(c.g, h), 1);
  sg_tensor logits =
      sg_add(c.g, sg_linear(c.g, pooled, fc, SG_NO_TENSOR), sg_linear(c.g, pooled, fc, SG_NO_TENSOR));
  sg_tensor labels = sg_input(c.g, "labels", SG_I64, 1, D(2));
  c.label_name = "labels";
  c.n_labels = 2;
  c.labels[0] = 1;
  c.labels[1] = 3;
  c.out = sg_cross_entropy(c.g, logits, labels, SG_REDUCTION_MEAN);
  run_case(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conv2d),
      cmocka_unit_test(test_batch_norm),
      cmocka_unit_test(test_pooling),
      cmocka_unit_test(test_elementwise),
      cmocka_unit_test(test_matmul_gemm),
      cmocka_unit_test(test_shape_ops),
      cmocka_unit_test(test_softmax_losses_reductions),
      cmocka_unit_test(test_math_and_layer_norm),
      cmocka_unit_test(test_embedding),
      cmocka_unit_test(test_slice_attention),
      cmocka_unit_test(test_network),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
