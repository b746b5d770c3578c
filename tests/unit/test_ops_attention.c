/* attention and attention_backward (kinds 65, 66), the fused
 * scaled-dot-product attention:
 *  - the CPU kernels of both kinds against the double-precision reference
 *    of ref_ops.c (naive loops over the whole [T_q, T_k] matrix), in the
 *    AVX2 and the portable form, for causal and not, T not a multiple of
 *    the 64-row tile, T_k != T_q, odd d, d_v != d, leading dims [2, 3],
 *    [1] and none;
 *  - the fused op against the unfused graph (matmul, mul_scalar, additive
 *    causal mask, softmax, matmul) in sessions: y and the gradients of q, k
 *    and v of loss = sum(y * r), max difference relative to the largest
 *    value under 1e-5;
 *  - the gradient rule against central finite differences of the
 *    reference (test_ncheck.h), and a few gradient entries against finite
 *    differences of the CPU session's own f32 forward;
 *  - results do not depend on the thread count (bitwise), also where the
 *    backward switches from one unit per head to two passes over tiles;
 *  - memory: for T = 256 the fused training graph holds no tensor of
 *    [T, T] per head and its compiled plan is smaller than the unfused one's;
 *  - builder, verifier and attribute errors with their messages, the rule's
 *    shape (one backward op, no gradient through lse), the .sgg round trip,
 *    the cost model's traffic (no [T, T] bytes). */
#include <float.h>

#include "backend/cpu/cpu_attention.h"
#include "graph/graph_internal.h"
#include "test_cpu_harness.h"
#include "test_ncheck.h"

/* One attention problem: leading dims, positions, head dims, options. */
typedef struct acase {
  int nlead;
  int64_t lead[2];
  int64_t tq, tk, d, dv;
  int causal;
  double scale; /* 0: 1/sqrt(d) */
  const char *what;
  double dropout; /* on the attention weights (run_step: seed DROP_SEED) */
} acase;

#define DROP_SEED 4242

/* dims of q ([lead, tq, d]), k ([lead, tk, d]), v ([lead, tk, dv]), y ([lead, tq, dv]). */
static int dims_of(const acase *c, char which, int64_t *dims) {
  for (int i = 0; i < c->nlead; i++) dims[i] = c->lead[i];
  dims[c->nlead] = which == 'q' || which == 'y' ? c->tq : c->tk;
  dims[c->nlead + 1] = which == 'q' || which == 'k' ? c->d : c->dv;
  return c->nlead + 2;
}

static int64_t numel_of(const acase *c, char which) {
  int64_t dims[SG_MAX_DIMS], n = 1;
  int nd = dims_of(c, which, dims);
  for (int i = 0; i < nd; i++) n *= dims[i];
  return n;
}

static double resolved_scale(const acase *c) { return c->scale != 0 ? c->scale : 1.0 / sqrt((double)c->d); }

static const acase cases[] = {
    {2, {2, 3}, 100, 100, 64, 64, 0, 0, "[2,3] T 100 d 64"},
    {2, {2, 3}, 100, 100, 64, 64, 1, 0, "[2,3] T 100 d 64 causal"},
    {1, {1}, 130, 70, 33, 17, 0, 0, "[1] T_q 130 T_k 70 d 33 d_v 17"},
    {1, {1}, 150, 150, 33, 33, 1, 0, "[1] T 150 d 33 causal"},
    {2, {2, 3}, 64, 64, 64, 64, 1, 0.3, "[2,3] T 64 d 64 causal scale 0.3"},
    {0, {0}, 70, 45, 16, 24, 0, 0, "no leading dims, T_q 70 T_k 45 d 16 d_v 24"},
};
#define N_CASES (sizeof cases / sizeof cases[0])

/* ---- kernels against the reference -------------------------------------------- */

/* The attention op of g (the last forward op built) and its outputs. */
static sg_tensor lse_of(sg_graph *g, sg_tensor y) {
  sg_tensor_info yi;
  assert_status(sg_graph_tensor_info(g, y, &yi), SG_OK, NULL);
  sg_op_info op;
  assert_status(sg_graph_op_info(g, yi.producer, &op), SG_OK, NULL);
  assert_int_equal(op.kind, SG_OP_ATTENTION);
  assert_int_equal(op.n_outputs, 2);
  return (sg_tensor){op.outputs[1]};
}

static void check_kernels(const acase *c, int portable) {
  int64_t qd[SG_MAX_DIMS], kd[SG_MAX_DIMS], vd[SG_MAX_DIMS], yd[SG_MAX_DIMS];
  int n = dims_of(c, 'q', qd);
  dims_of(c, 'k', kd), dims_of(c, 'v', vd), dims_of(c, 'y', yd);
  char what[160];
  sg__attention_portable = portable;
  snprintf(what, sizeof what, "attention %s (%s)", c->what, sg__attn_ops_get()->name);
  sg_graph *g = h_graph();
  sg_tensor q = h_src(g, SG_ROLE_INPUT, SG_F32, n, qd, NULL),
            k = h_src(g, SG_ROLE_INPUT, SG_F32, n, kd, NULL);
  sg_tensor v = h_src(g, SG_ROLE_INPUT, SG_F32, n, vd, NULL);
  sg_attention(g, q, k, v, c->scale, c->causal);
  h_check_last(g, 1, 1e-5, 1e-6, what);
  sg_graph_destroy(g);

  snprintf(what, sizeof what, "attention_backward %s (%s)", c->what, sg__attn_ops_get()->name);
  g = h_graph();
  q = h_src(g, SG_ROLE_INPUT, SG_F32, n, qd, NULL), k = h_src(g, SG_ROLE_INPUT, SG_F32, n, kd, NULL);
  v = h_src(g, SG_ROLE_INPUT, SG_F32, n, vd, NULL);
  sg_tensor y = sg_attention(g, q, k, v, c->scale, c->causal);
  sg_tensor in[] = {h_src(g, SG_ROLE_INPUT, SG_F32, n, yd, NULL), q, k, v, y, lse_of(g, y)};
  sg_attr a[] = {{.name = "scale", .type = SG_ATTR_FLOAT, .f = c->scale},
                 {.name = "causal", .type = SG_ATTR_INT, .i = c->causal}};
  assert_status(sg_graph_add_op(g, SG_OP_ATTENTION_BACKWARD, 6, in, 2, a, 0, NULL, NULL), SG_OK, NULL);
  h_check_last(g, 1, 1e-5, 1e-5, what);
  sg_graph_destroy(g);
  sg__attention_portable = 0;
}

static void test_kernels_against_reference(void **state) {
  (void)state;
  for (size_t i = 0; i < N_CASES; i++) {
    check_kernels(&cases[i], 0);
    check_kernels(&cases[i], 1);
  }
}

/* ---- the fused op against the unfused graph ------------------------------------- */

/* softmax(q k^T scale + mask) v from matmul, transpose, mul_scalar, add,
 * softmax and matmul, as GPT-2's attention is built (examples/gpt2): the
 * mask is 0 on and below the diagonal and -1e9 above it. */
static sg_tensor unfused(sg_graph *g, const acase *c, sg_tensor q, sg_tensor k, sg_tensor v) {
  int64_t perm[SG_MAX_DIMS];
  int n = c->nlead + 2;
  for (int i = 0; i < n; i++) perm[i] = i;
  perm[n - 2] = n - 1, perm[n - 1] = n - 2;
  sg_tensor s = sg_mul_scalar(g, sg_matmul(g, q, sg_transpose(g, k, n, perm)), resolved_scale(c));
  if (c->causal) {
    float *m = malloc(sizeof(float) * (size_t)(c->tq * c->tk));
    assert_non_null(m);
    for (int64_t i = 0; i < c->tq; i++)
      for (int64_t j = 0; j < c->tk; j++) m[i * c->tk + j] = j <= i ? 0.0f : -1e9f;
    s = sg_add(g, s, sg_constant(g, "mask", SG_F32, 2, D(c->tq, c->tk), m));
    free(m);
  }
  s = sg_softmax(g, s, -1);
  if (c->dropout > 0) s = sg_dropout(g, s, c->dropout, DROP_SEED, 1);
  return sg_matmul(g, s, v);
}

/* What one training step of a graph gives. */
typedef struct step_out {
  float *y, *grad[3]; /* y; the gradients of q, k, v */
  sg_compile_report report;
} step_out;

static void step_out_free(step_out *o) {
  free(o->y);
  for (int i = 0; i < 3; i++) free(o->grad[i]);
}

static const char *const qkv_names[3] = {"q", "k", "v"};

/* q, k, v of case c as parameters of g, with fixed random values. */
static void add_qkv(sg_graph *g, const acase *c, sg_tensor *p) {
  const char which[3] = {'q', 'k', 'v'};
  for (int i = 0; i < 3; i++) {
    int64_t dims[SG_MAX_DIMS], ne = numel_of(c, which[i]);
    int nd = dims_of(c, which[i], dims);
    float *val = malloc(sizeof(float) * (size_t)ne);
    assert_non_null(val);
    sg_test_fill(val, (size_t)ne, 100 + (uint64_t)i);
    p[i] = sg_parameter(g, qkv_names[i], SG_F32, nd, dims, val);
    free(val);
  }
}

/* q, k, v parameters (add_qkv), y fused or not, loss = sum(y * r); one
 * step with `threads` threads: y and the three gradients. */
static step_out run_step(const acase *c, bool fused, int threads) {
  sg_graph *g;
  assert_status(sg_graph_create(&g), SG_OK, NULL);
  sg_tensor p[3];
  const char which[3] = {'q', 'k', 'v'};
  add_qkv(g, c, p);
  sg_tensor y = !fused ? unfused(g, c, p[0], p[1], p[2])
                : c->dropout > 0
                    ? sg_attention_dropout(g, p[0], p[1], p[2], c->scale, c->causal, c->dropout, DROP_SEED)
                    : sg_attention(g, p[0], p[1], p[2], c->scale, c->causal);
  assert_status(sg_tensor_set_name(g, y, "y"), SG_OK, NULL);
  assert_status(sg_graph_mark_output(g, y), SG_OK, NULL);
  int64_t yd[SG_MAX_DIMS], ny = numel_of(c, 'y');
  int nd = dims_of(c, 'y', yd);
  float *r = malloc(sizeof(float) * (size_t)ny);
  assert_non_null(r);
  sg_test_fill(r, (size_t)ny, 777);
  sg_tensor loss = sg_reduce_sum(g, sg_mul(g, y, sg_constant(g, "r", SG_F32, nd, yd, r)), 0, NULL, 0);
  free(r);
  assert_status(sg_graph_backward(g, loss), SG_OK, NULL);
  for (int i = 0; i < 3; i++) {
    sg_tensor gt;
    assert_status(sg_graph_grad(g, p[i], &gt), SG_OK, NULL);
    assert_status(sg_graph_mark_output(g, gt), SG_OK, NULL);
  }
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sp.threads = threads;
  sg_session *s;
  assert_status(sg_session_create(g, &sp, &s), SG_OK, NULL);
  assert_status(sg_session_compile(s), SG_OK, NULL);
  assert_status(sg_session_step(s), SG_OK, NULL);
  step_out o = {.report = SG_COMPILE_REPORT_INIT};
  assert_status(sg_session_compile_report(s, &o.report), SG_OK, NULL);
  o.y = malloc(sizeof(float) * (size_t)ny);
  assert_status(sg_session_read(s, "y", o.y, sizeof(float) * (size_t)ny), SG_OK, NULL);
  for (int i = 0; i < 3; i++) {
    int64_t ne = numel_of(c, which[i]);
    char name[16];
    snprintf(name, sizeof name, "%s.grad", qkv_names[i]);
    o.grad[i] = malloc(sizeof(float) * (size_t)ne);
    assert_status(sg_session_read(s, name, o.grad[i], sizeof(float) * (size_t)ne), SG_OK, NULL);
  }
  sg_session_destroy(s);
  sg_graph_destroy(g);
  return o;
}

/* max |a - b| / max |b|. */
static double rel_diff(const float *a, const float *b, int64_t n) {
  double dmax = 0, bmax = 0;
  for (int64_t i = 0; i < n; i++) {
    dmax = fmax(dmax, fabs((double)a[i] - (double)b[i]));
    bmax = fmax(bmax, fabs((double)b[i]));
  }
  return dmax / fmax(bmax, 1e-30);
}

static void compare_with_unfused(const acase *c, int portable) {
  sg__attention_portable = portable;
  step_out f = run_step(c, true, 2), u = run_step(c, false, 2);
  const char which[3] = {'q', 'k', 'v'};
  double dy = rel_diff(f.y, u.y, numel_of(c, 'y')), dg[3];
  for (int i = 0; i < 3; i++) dg[i] = rel_diff(f.grad[i], u.grad[i], numel_of(c, which[i]));
  print_message("fused vs unfused, %s (%s): y %.2e, dq %.2e, dk %.2e, dv %.2e (max |diff| / max |unfused|)\n",
                c->what, sg__attn_ops_get()->name, dy, dg[0], dg[1], dg[2]);
  if (!(dy <= 1e-5)) fail_msg("%s: y differs from the unfused graph's by %.3g", c->what, dy);
  for (int i = 0; i < 3; i++)
    if (!(dg[i] <= 1e-5))
      fail_msg("%s: %s.grad differs from the unfused graph's by %.3g", c->what, qkv_names[i], dg[i]);
  step_out_free(&f);
  step_out_free(&u);
  sg__attention_portable = 0;
}

static void test_against_unfused_graph(void **state) {
  (void)state;
  for (size_t i = 0; i < N_CASES; i++) compare_with_unfused(&cases[i], 0);
  compare_with_unfused(&cases[1], 1);
  compare_with_unfused(&cases[2], 1);
}

/* ---- dropout on the attention weights ---------------------------------------------- */

/* y of an evaluation pass (sg_session_forward) of the fused op with c's
 * dropout, on run_step's q, k, v. */
static float *eval_y(const acase *c) {
  sg_graph *g;
  assert_status(sg_graph_create(&g), SG_OK, NULL);
  sg_tensor p[3];
  add_qkv(g, c, p);
  sg_tensor y = sg_attention_dropout(g, p[0], p[1], p[2], c->scale, c->causal, c->dropout, DROP_SEED);
  assert_status(sg_tensor_set_name(g, y, "y"), SG_OK, NULL);
  assert_status(sg_graph_mark_output(g, y), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sp.threads = 2;
  sg_session *s;
  assert_status(sg_session_create(g, &sp, &s), SG_OK, NULL);
  assert_status(sg_session_compile(s), SG_OK, NULL);
  assert_status(sg_session_forward(s), SG_OK, NULL);
  size_t bytes = sizeof(float) * (size_t)numel_of(c, 'y');
  float *y_out = malloc(bytes);
  assert_non_null(y_out);
  assert_status(sg_session_read(s, "y", y_out, bytes), SG_OK, NULL);
  sg_session_destroy(s);
  sg_graph_destroy(g);
  return y_out;
}

/* With dropout, against the unfused graph with a dropout op on softmax's
 * output (the same seed: the same masks); for causal and not, T not a
 * multiple of the tile, several heads, p 0.1 and 0.5, the AVX2 and the
 * portable form. Then: the masks drop something (y differs from no
 * dropout's), p = 0 is sg_attention's bits, and the thread count changes no
 * bit. */
static void test_dropout(void **state) {
  (void)state;
  const acase cs[] = {
      {2, {2, 3}, 100, 100, 64, 64, 1, 0, "[2,3] T 100 d 64 causal, dropout 0.1", 0.1},
      {1, {1}, 130, 70, 33, 17, 0, 0, "[1] T_q 130 T_k 70 d 33 d_v 17, dropout 0.5", 0.5},
      {2, {2, 3}, 64, 64, 64, 64, 1, 0.3, "[2,3] T 64 causal scale 0.3, dropout 0.5", 0.5},
  };
  for (size_t k = 0; k < sizeof cs / sizeof *cs; k++) compare_with_unfused(&cs[k], 0);
  compare_with_unfused(&cs[1], 1);

  acase c = cs[0], none = cs[0];
  none.dropout = 0;
  step_out with = run_step(&c, true, 2), without = run_step(&none, true, 2);
  const double moved = rel_diff(with.y, without.y, numel_of(&c, 'y'));
  print_message("dropout 0.1 moves y by %.3g (max |diff| / max |y|)\n", moved);
  if (!(moved > 1e-3)) fail_msg("dropout 0.1 left y as it was (%.3g): nothing was dropped", moved);

  /* An evaluation pass drops nothing: the bits of the step's y without dropout. */
  float *eval = eval_y(&c);
  assert_memory_equal(eval, without.y, sizeof(float) * (size_t)numel_of(&c, 'y'));
  free(eval);

  /* Of constant q, k, v the op still draws new masks each step: it never folds at compile time
   * (sg__op_draws_random). A parameter keeps the graph a training graph. */
  {
    sg_graph *cg;
    assert_status(sg_graph_create(&cg), SG_OK, NULL);
    float qv[2 * 6 * 4];
    sg_test_fill(qv, 48, 5);
    sg_tensor cq = sg_constant(cg, "cq", SG_F32, 3, D(2, 6, 4), qv);
    sg_tensor cy = sg_attention_dropout(cg, cq, cq, cq, 0, 1, 0.5, 9);
    assert_true(sg__op_draws_random(&cg->ops[cg->tensors[cy.id].producer]));
    assert_status(sg_tensor_set_name(cg, cy, "y"), SG_OK, NULL);
    assert_status(sg_graph_mark_output(cg, cy), SG_OK, NULL);
    sg_tensor w = sg_parameter(cg, "w", SG_F32, 3, D(2, 6, 4), qv);
    assert_status(sg_graph_backward(cg, sg_reduce_sum(cg, sg_mul(cg, cy, w), 0, NULL, 0)), SG_OK, NULL);
    assert_status(sg_graph_finalize(cg), SG_OK, NULL);
    sg_session *sess;
    assert_status(sg_session_create(cg, NULL, &sess), SG_OK, NULL);
    assert_status(sg_session_compile(sess), SG_OK, NULL);
    float y1[48], y2[48];
    assert_status(sg_session_step(sess), SG_OK, NULL);
    assert_status(sg_session_read(sess, "y", y1, sizeof y1), SG_OK, NULL);
    assert_status(sg_session_step(sess), SG_OK, NULL);
    assert_status(sg_session_read(sess, "y", y2, sizeof y2), SG_OK, NULL);
    if (memcmp(y1, y2, sizeof y1) == 0)
      fail_msg("attention dropout of constants drew one mask for two steps");
    sg_session_destroy(sess);
    sg_graph_destroy(cg);
  }

  /* p = 0 through sg_attention_dropout: no draws, sg_attention's bits. */
  sg_graph *g;
  assert_status(sg_graph_create(&g), SG_OK, NULL);
  sg_tensor q = sg_input(g, "q", SG_F32, 3, D(2, 5, 4)), kk = sg_input(g, "k", SG_F32, 3, D(2, 5, 4));
  sg_tensor v = sg_input(g, "v", SG_F32, 3, D(2, 5, 4));
  sg_tensor y = sg_attention_dropout(g, q, kk, v, 0, 1, 0.0, 7);
  assert_true(y.id >= 0);
  const sg__op *op = &g->ops[g->tensors[y.id].producer];
  assert_true(sg__attr_f(op, 2) == 0.0 && sg__attr_i(op, 3) == 7);
  /* p out of [0, 1) is refused, naming the op and the value. */
  sg_tensor bad = sg_attention_dropout(g, q, kk, v, 0, 1, 1.0, 7);
  assert_true(bad.id < 0);
  assert_non_null(strstr(sg_last_error(), "dropout is 1; must be in [0, 1)"));
  sg_graph_destroy(g);
  step_out_free(&with);
  step_out_free(&without);

  for (size_t k = 0; k < sizeof cs / sizeof *cs; k++) {
    step_out a = run_step(&cs[k], true, 1), b = run_step(&cs[k], true, 2);
    const char which[3] = {'q', 'k', 'v'};
    assert_memory_equal(a.y, b.y, sizeof(float) * (size_t)numel_of(&cs[k], 'y'));
    for (int i = 0; i < 3; i++)
      assert_memory_equal(a.grad[i], b.grad[i], sizeof(float) * (size_t)numel_of(&cs[k], which[i]));
    step_out_free(&a);
    step_out_free(&b);
  }
}

/* ---- finite differences ------------------------------------------------------------ */

/* The rule against central differences of the double-precision reference
 * (sg_graph_backward's ops evaluated by ref_ops.c). */
static void test_rule_against_finite_differences(void **state) {
  (void)state;
  ncase c = nbegin();
  ncheck(&c, "attention [2,2] T 5 d 3",
         sg_attention(c.g, NP(&c, 2, 2, 5, 3), NP(&c, 2, 2, 5, 3), NP(&c, 2, 2, 5, 4), 0, 0), NULL);
  c = nbegin();
  ncheck(&c, "causal attention [3] T 6 d 4 scale 0.7",
         sg_attention(c.g, NP(&c, 3, 6, 4), NP(&c, 3, 6, 4), NP(&c, 3, 6, 2), 0.7, 1), NULL);
  c = nbegin();
  /* T_k != T_q, fed by a linear projection so the gradient passes on. */
  sg_tensor x = NP(&c, 4, 6);
  sg_tensor q = sg_reshape(c.g, sg_matmul(c.g, x, NP(&c, 6, 6)), 3, D(2, 4, 3));
  ncheck(&c, "attention of a projection, T_q 4 T_k 7",
         sg_attention(c.g, q, NP(&c, 2, 7, 3), NP(&c, 2, 7, 5), 0, 0), NULL);
}

/* A few gradient entries of the CPU session against central differences of
 * its own f32 forward (h = 1e-2: truncation ~1e-4, rounding ~1e-5). */
static void test_kernel_against_finite_differences(void **state) {
  (void)state;
  const acase c = {2, {1, 2}, 9, 9, 5, 5, 1, 0, "fd"};
  sg_graph *g;
  assert_status(sg_graph_create(&g), SG_OK, NULL);
  sg_tensor p[3];
  const char which[3] = {'q', 'k', 'v'};
  float *init[3];
  for (int i = 0; i < 3; i++) {
    int64_t dims[SG_MAX_DIMS], ne = numel_of(&c, which[i]);
    int nd = dims_of(&c, which[i], dims);
    init[i] = malloc(sizeof(float) * (size_t)ne);
    sg_test_fill(init[i], (size_t)ne, 300 + (uint64_t)i);
    for (int64_t e = 0; e < ne; e++) init[i][e] *= 2.0f;
    p[i] = sg_parameter(g, qkv_names[i], SG_F32, nd, dims, init[i]);
  }
  sg_tensor y = sg_attention(g, p[0], p[1], p[2], 0, 1);
  int64_t yd[SG_MAX_DIMS], ny = numel_of(&c, 'y');
  int nd = dims_of(&c, 'y', yd);
  float r[90];
  sg_test_fill(r, (size_t)ny, 5);
  sg_tensor loss = sg_reduce_sum(g, sg_mul(g, y, sg_constant(g, "r", SG_F32, nd, yd, r)), 0, NULL, 0);
  assert_status(sg_tensor_set_name(g, loss, "loss"), SG_OK, NULL);
  assert_status(sg_graph_mark_output(g, loss), SG_OK, NULL);
  assert_status(sg_graph_backward(g, loss), SG_OK, NULL);
  for (int i = 0; i < 3; i++) {
    sg_tensor gt;
    assert_status(sg_graph_grad(g, p[i], &gt), SG_OK, NULL);
    assert_status(sg_graph_mark_output(g, gt), SG_OK, NULL);
  }
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  sg_session *s;
  assert_status(sg_session_create(g, NULL, &s), SG_OK, NULL);
  assert_status(sg_session_compile(s), SG_OK, NULL);
  assert_status(sg_session_step(s), SG_OK, NULL);
  double worst = 0;
  for (int i = 0; i < 3; i++) {
    int64_t ne = numel_of(&c, which[i]);
    char name[16];
    snprintf(name, sizeof name, "%s.grad", qkv_names[i]);
    float grad[90], val[90];
    assert_status(sg_session_read(s, name, grad, sizeof(float) * (size_t)ne), SG_OK, NULL);
    double gmax = 0;
    for (int64_t e = 0; e < ne; e++) gmax = fmax(gmax, fabs(grad[e]));
    /* Entries spread over the tensor: first row, last row (the causal
     * corner), the middle. */
    const int64_t at[] = {0, 3, ne / 2, ne - 1, ne - 4};
    for (size_t a = 0; a < sizeof at / sizeof *at; a++) {
      const float h = 1e-2f;
      float lv[2];
      for (int sgn = 0; sgn < 2; sgn++) {
        memcpy(val, init[i], sizeof(float) * (size_t)ne);
        val[at[a]] += sgn ? -h : h;
        assert_status(sg_session_write(s, qkv_names[i], val, sizeof(float) * (size_t)ne), SG_OK, NULL);
        assert_status(sg_session_forward(s), SG_OK, NULL);
        assert_status(sg_session_read(s, "loss", &lv[sgn], sizeof(float)), SG_OK, NULL);
      }
      assert_status(sg_session_write(s, qkv_names[i], init[i], sizeof(float) * (size_t)ne), SG_OK, NULL);
      double num = ((double)lv[0] - (double)lv[1]) / (2.0 * h), err = fabs(num - grad[at[a]]) / gmax;
      worst = fmax(worst, err);
      if (!(err <= 2e-3))
        fail_msg("%s.grad[%lld] is %.6g, central difference %.6g", qkv_names[i], (long long)at[a],
                 (double)grad[at[a]], num);
    }
  }
  print_message("kernel gradients against f32 finite differences: worst %.2e of the largest gradient\n",
                worst);
  sg_session_destroy(s);
  sg_graph_destroy(g);
  for (int i = 0; i < 3; i++) free(init[i]);
}

/* ---- determinism ------------------------------------------------------------------- */

/* One head: 1 thread runs the backward per head, 2 threads in two passes
 * over tiles; six heads: per head with both. Same bits each time. */
static void test_thread_count_independent(void **state) {
  (void)state;
  const acase cs[] = {{1, {1}, 200, 200, 64, 64, 1, 0, "[1] T 200 causal"},
                      {1, {1}, 150, 90, 24, 40, 0, 0, "[1] T_q 150 T_k 90"},
                      {2, {2, 3}, 70, 70, 32, 32, 1, 0, "[2,3] T 70 causal"}};
  for (size_t k = 0; k < sizeof cs / sizeof *cs; k++) {
    const acase *c = &cs[k];
    step_out a = run_step(c, true, 1), b = run_step(c, true, 2), again = run_step(c, true, 2);
    const char which[3] = {'q', 'k', 'v'};
    assert_memory_equal(a.y, b.y, sizeof(float) * (size_t)numel_of(c, 'y'));
    assert_memory_equal(b.y, again.y, sizeof(float) * (size_t)numel_of(c, 'y'));
    for (int i = 0; i < 3; i++) {
      size_t bytes = sizeof(float) * (size_t)numel_of(c, which[i]);
      if (memcmp(a.grad[i], b.grad[i], bytes) != 0)
        fail_msg("%s: %s.grad with 1 thread and with 2 differ", c->what, qkv_names[i]);
      assert_memory_equal(b.grad[i], again.grad[i], bytes);
    }
    step_out_free(&a);
    step_out_free(&b);
    step_out_free(&again);
  }
}

/* ---- memory ---------------------------------------------------------------------------- */

static int64_t largest_tensor(sg_graph *g) {
  int64_t m = 0;
  for (int32_t t = 0; t < sg_graph_num_tensors(g); t++) {
    sg_tensor_info ti;
    assert_status(sg_graph_tensor_info(g, (sg_tensor){t}, &ti), SG_OK, NULL);
    if (ti.numel > m) m = ti.numel;
  }
  return m;
}

/* T = 256, [1, 2] heads, d = 64: the fused training graph has no tensor as
 * large as one head's [T, T] scores, and its compiled plan is smaller than
 * the unfused graph's by at least the [1, 2, T, T] probabilities it keeps. */
static void test_memory(void **state) {
  (void)state;
  const acase c = {2, {1, 2}, 256, 256, 64, 64, 1, 0, "memory"};
  step_out f = run_step(&c, true, 2), u = run_step(&c, false, 2);
  const size_t tt = sizeof(float) * 2 * 256 * 256;
  print_message("T 256, [1,2] heads, d 64, causal: planned peak %zu bytes fused vs %zu unfused (%.2fx); "
                "transient %zu vs %zu\n",
                f.report.planned_peak_bytes, u.report.planned_peak_bytes,
                (double)f.report.planned_peak_bytes / (double)u.report.planned_peak_bytes,
                f.report.transient_bytes, u.report.transient_bytes);
  assert_true(f.report.planned_peak_bytes + tt <= u.report.planned_peak_bytes);
  assert_true(f.report.transient_bytes < u.report.transient_bytes);
  step_out_free(&f);
  step_out_free(&u);
  /* The graphs themselves: the largest fused tensor is q, k, v or y. */
  sg_graph *g;
  assert_status(sg_graph_create(&g), SG_OK, NULL);
  sg_tensor p[3];
  for (int i = 0; i < 3; i++) p[i] = sg_parameter(g, qkv_names[i], SG_F32, 4, D(1, 2, 256, 64), NULL);
  sg_tensor y = sg_attention(g, p[0], p[1], p[2], 0, 1);
  assert_status(sg_graph_backward(g, sg_reduce_sum(g, y, 0, NULL, 0)), SG_OK, NULL);
  assert_true(largest_tensor(g) == 2 * 256 * 64);
  sg_graph_destroy(g);
}

/* ---- errors -------------------------------------------------------------------------------- */

static sg_graph *graph(void) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  return g;
}

static void expect_build_error(sg_dtype qt, int qn, const int64_t *qd, int kn, const int64_t *kd, int vn,
                               const int64_t *vd, double scale, int causal, sg_status st,
                               const char *needle) {
  sg_graph *g = graph();
  sg_tensor q = sg_input(g, "q", qt, qn, qd), k = sg_input(g, "k", SG_F32, kn, kd);
  sg_tensor v = sg_input(g, "v", SG_F32, vn, vd);
  sg_tensor y = sg_attention(g, q, k, v, scale, causal);
  assert_true(y.id < 0);
  assert_status(sg_graph_status(g), st, needle);
  sg_graph_destroy(g);
}

static void test_builder_errors(void **state) {
  (void)state;
  expect_build_error(SG_I32, 3, D(2, 4, 8), 3, D(2, 4, 8), 3, D(2, 4, 8), 0, 0, SG_ERR_DTYPE,
                     "attention 'attention_0': q 'q' [2,4,8] i32 must be f32");
  expect_build_error(SG_F16, 3, D(2, 4, 8), 3, D(2, 4, 8), 3, D(2, 4, 8), 0, 0, SG_ERR_DTYPE,
                     "q 'q' [2,4,8] f16 must be f32 (the dtype of the fused kernel)");
  expect_build_error(SG_F32, 1, D(8), 1, D(8), 1, D(8), 0, 0, SG_ERR_SHAPE,
                     "q 'q' [8] f32 must have at least 2 dims [..., T, d]");
  expect_build_error(SG_F32, 3, D(2, 4, 8), 3, D(3, 4, 8), 3, D(2, 4, 8), 0, 0, SG_ERR_SHAPE,
                     "k 'k' [3,4,8] f32 and q 'q' [2,4,8] f32 must have the same leading dims");
  expect_build_error(SG_F32, 3, D(2, 4, 8), 2, D(4, 8), 3, D(2, 4, 8), 0, 0, SG_ERR_SHAPE,
                     "k 'k' [4,8] f32 and q 'q' [2,4,8] f32 must have the same leading dims");
  expect_build_error(SG_F32, 3, D(2, 4, 8), 3, D(2, 4, 8), 3, D(1, 4, 8), 0, 0, SG_ERR_SHAPE,
                     "v 'v' [1,4,8] f32 and q 'q' [2,4,8] f32 must have the same leading dims");
  expect_build_error(SG_F32, 3, D(2, 4, 8), 3, D(2, 4, 6), 3, D(2, 4, 8), 0, 0, SG_ERR_SHAPE,
                     "k 'k' [2,4,6] f32 has head dim 6 but q 'q' [2,4,8] f32 has 8");
  expect_build_error(SG_F32, 3, D(2, 4, 8), 3, D(2, 5, 8), 3, D(2, 4, 8), 0, 0, SG_ERR_SHAPE,
                     "v 'v' [2,4,8] f32 has 4 positions but k 'k' [2,5,8] f32 has 5");
  expect_build_error(SG_F32, 3, D(2, 3, 8), 3, D(2, 4, 8), 3, D(2, 4, 8), 0, 1, SG_ERR_SHAPE,
                     "causal attention needs as many queries as keys: q 'q' [2,3,8] f32 has T = 3, k 'k' "
                     "[2,4,8] f32 has 4");
  expect_build_error(SG_F32, 3, D(2, 4, 8), 3, D(2, 4, 8), 3, D(2, 4, 8), -1, 0, SG_ERR_ATTRIBUTE,
                     "scale is -1; must be finite and > 0, or 0 for 1/sqrt(d)");
  expect_build_error(SG_F32, 3, D(2, 4, 8), 3, D(2, 4, 8), 3, D(2, 4, 8), NAN, 0, SG_ERR_ATTRIBUTE,
                     "scale is nan");
  expect_build_error(SG_F32, 3, D(2, 4, 8), 3, D(2, 4, 8), 3, D(2, 4, 8), INFINITY, 0, SG_ERR_ATTRIBUTE,
                     "scale is inf");
  expect_build_error(SG_F32, 3, D(2, 4, 8), 3, D(2, 4, 8), 3, D(2, 4, 8), 0, 2, SG_ERR_ATTRIBUTE,
                     "attention 'attention_0': causal is 2; must be in 0..1");
  /* T_k != T_q is fine without the mask; so is d_v != d. */
  sg_graph *g = graph();
  sg_tensor y =
      sg_attention(g, sg_input(g, "q", SG_F32, 3, D(2, 3, 8)), sg_input(g, "k", SG_F32, 3, D(2, 5, 8)),
                   sg_input(g, "v", SG_F32, 3, D(2, 5, 7)), 0, 0);
  sg_tensor_info yi;
  assert_status(sg_graph_tensor_info(g, y, &yi), SG_OK, NULL);
  assert_int_equal(yi.ndim, 3);
  assert_int_equal(yi.dims[1], 3);
  assert_int_equal(yi.dims[2], 7);
  sg_tensor_info li;
  assert_status(sg_graph_tensor_info(g, lse_of(g, y), &li), SG_OK, NULL);
  assert_int_equal(li.ndim, 2);
  assert_int_equal(li.dims[0], 2);
  assert_int_equal(li.dims[1], 3);
  assert_int_equal(li.dtype, SG_F32);
  sg_graph_destroy(g);
}

/* The backward op checks dy, y and lse against the forward shapes. */
static void test_backward_op_errors(void **state) {
  (void)state;
  static const struct {
    int dyn, yn, ln;
    int64_t dy[3], y[3], lse[3];
    const char *needle;
  } bad[] = {
      {3,
       3,
       2,
       {2, 4, 6},
       {2, 4, 7},
       {2, 4},
       "dy 'dy' [2,4,6] f32 must be [2,4,7] f32, the forward op's y for q 'q' [2,4,8] f32"},
      {3, 3, 2, {2, 4, 7}, {2, 5, 7}, {2, 4}, "y 'y' [2,5,7] f32 must be [2,4,7] f32, the forward op's y"},
      {3,
       3,
       3,
       {2, 4, 7},
       {2, 4, 7},
       {2, 4, 1},
       "lse 'lse' [2,4,1] f32 must be [2,4] f32, the forward op's lse"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
    sg_graph *g = graph();
    sg_tensor in[] = {
        sg_input(g, "dy", SG_F32, bad[k].dyn, bad[k].dy), sg_input(g, "q", SG_F32, 3, D(2, 4, 8)),
        sg_input(g, "k", SG_F32, 3, D(2, 5, 8)),          sg_input(g, "v", SG_F32, 3, D(2, 5, 7)),
        sg_input(g, "y", SG_F32, bad[k].yn, bad[k].y),    sg_input(g, "lse", SG_F32, bad[k].ln, bad[k].lse)};
    assert_status(sg_graph_add_op(g, SG_OP_ATTENTION_BACKWARD, 6, in, 0, NULL, 0, NULL, NULL), SG_ERR_SHAPE,
                  bad[k].needle);
    sg_graph_destroy(g);
  }
  /* Causal with T_q != T_k is refused by the backward op too. */
  sg_graph *g = graph();
  sg_tensor in[] = {sg_input(g, "dy", SG_F32, 3, D(2, 4, 7)), sg_input(g, "q", SG_F32, 3, D(2, 4, 8)),
                    sg_input(g, "k", SG_F32, 3, D(2, 5, 8)),  sg_input(g, "v", SG_F32, 3, D(2, 5, 7)),
                    sg_input(g, "y", SG_F32, 3, D(2, 4, 7)),  sg_input(g, "lse", SG_F32, 2, D(2, 4))};
  sg_attr a = {.name = "causal", .type = SG_ATTR_INT, .i = 1};
  assert_status(sg_graph_add_op(g, SG_OP_ATTENTION_BACKWARD, 6, in, 1, &a, 0, NULL, NULL), SG_ERR_SHAPE,
                "attention_backward 'attention_backward_0': causal attention needs as many queries as keys");
  sg_graph_destroy(g);
}

/* ---- the rule, .sgg ------------------------------------------------------------------------ */

static int count_kind(const sg_graph *g, sg_op_kind kind) {
  int n = 0;
  for (int32_t i = 0; i < sg_graph_num_ops(g); i++) {
    sg_op_info op;
    assert_status(sg_graph_op_info(g, i, &op), SG_OK, NULL);
    n += op.kind == kind;
  }
  return n;
}

/* One attention_backward with the forward inputs and outputs and the same
 * attributes; only v needing a gradient still gives one op; a loss through
 * lse is refused. */
static void test_rule(void **state) {
  (void)state;
  sg_graph *g = graph();
  sg_tensor q = sg_parameter(g, "q", SG_F32, 3, D(2, 4, 8), NULL),
            k = sg_input(g, "k", SG_F32, 3, D(2, 4, 8));
  sg_tensor v = sg_parameter(g, "v", SG_F32, 3, D(2, 4, 8), NULL);
  sg_tensor y = sg_attention(g, q, k, v, 0.5, 1);
  sg_tensor lse = lse_of(g, y);
  assert_status(sg_graph_backward(g, sg_reduce_sum(g, y, 0, NULL, 0)), SG_OK, NULL);
  assert_int_equal(count_kind(g, SG_OP_ATTENTION_BACKWARD), 1);
  sg_tensor gq;
  assert_status(sg_graph_grad(g, q, &gq), SG_OK, NULL);
  sg_tensor_info info;
  assert_status(sg_graph_tensor_info(g, gq, &info), SG_OK, NULL);
  sg_op_info op;
  assert_status(sg_graph_op_info(g, info.producer, &op), SG_OK, NULL);
  assert_int_equal(op.kind, SG_OP_ATTENTION_BACKWARD);
  assert_int_equal(op.n_inputs, 6);
  assert_int_equal(op.n_outputs, 3);
  assert_int_equal(op.inputs[1], q.id);
  assert_int_equal(op.inputs[2], k.id);
  assert_int_equal(op.inputs[3], v.id);
  assert_int_equal(op.inputs[4], y.id);
  assert_int_equal(op.inputs[5], lse.id);
  sg_attr a;
  assert_status(sg_graph_op_attr(g, info.producer, 0, &a), SG_OK, NULL);
  assert_string_equal(a.name, "scale");
  assert_true(a.f == 0.5);
  assert_status(sg_graph_op_attr(g, info.producer, 1, &a), SG_OK, NULL);
  assert_string_equal(a.name, "causal");
  assert_int_equal(a.i, 1);
  const sg__op_def *def = sg__op_def_get(SG_OP_ATTENTION_BACKWARD);
  assert_int_equal(def->output_role, SG_ROLE_GRADIENT);
  assert_int_equal(def->mutated_inputs, 0);
  assert_int_equal(sg__op_flags(SG_OP_ATTENTION) & (SG__OP_ELEMENTWISE | SG__OP_VIEW | SG__OP_INPLACE_INPUT0),
                   0);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  sg_graph_destroy(g);

  g = graph();
  q = sg_parameter(g, "q", SG_F32, 3, D(2, 4, 8), NULL);
  y = sg_attention(g, q, q, q, 0, 0);
  assert_status(sg_graph_backward(g, sg_reduce_sum(g, lse_of(g, y), 0, NULL, 0)), SG_ERR_UNSUPPORTED,
                "no gradient through output 1");
  sg_graph_destroy(g);
}

/* Both kinds survive the .sgg round trip (the reader re-runs inference). */
static void test_sgg_round_trip(void **state) {
  (void)state;
  sg_graph *g = graph();
  sg_tensor q = sg_parameter(g, "q", SG_F32, 4, D(1, 2, 5, 8), NULL);
  sg_tensor y = sg_attention(g, q, sg_parameter(g, "k", SG_F32, 4, D(1, 2, 5, 8), NULL),
                             sg_parameter(g, "v", SG_F32, 4, D(1, 2, 5, 3), NULL), 0.25, 1);
  assert_status(sg_graph_backward(g, sg_reduce_sum(g, y, 0, NULL, 0)), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  sg_graph *h = sg_test_sgg_round_trip(g);
  assert_int_equal(count_kind(h, SG_OP_ATTENTION), 1);
  assert_int_equal(count_kind(h, SG_OP_ATTENTION_BACKWARD), 1);
  assert_string_equal(sg_op_kind_name(SG_OP_ATTENTION), "attention");
  assert_string_equal(sg_op_kind_name(SG_OP_ATTENTION_BACKWARD), "attention_backward");
  sg_graph_destroy(h);
  sg_graph_destroy(g);
}

/* The cost model (partition/cost.c): the op moves its operands and nothing
 * of [T, T]; a causal mask halves the work. */
static void test_cost(void **state) {
  (void)state;
  double flops[2], bytes[2];
  for (int causal = 0; causal < 2; causal++) {
    sg_graph *g = graph();
    sg_tensor q = sg_input(g, "q", SG_F32, 4, D(2, 3, 256, 64));
    sg_attention(g, q, q, q, 0, causal);
    assert_status(sg_graph_finalize(g), SG_OK, NULL);
    assert_status(sg_partition_op_cost(g, 0, &flops[causal], &bytes[causal]), SG_OK, NULL);
    sg_graph_destroy(g);
  }
  const double qkv = 2 * 3 * 256 * 64 * 4.0, lse = 2 * 3 * 256 * 4.0;
  assert_true(bytes[0] == 4 * qkv + lse); /* q read three times, y and lse written */
  assert_true(bytes[1] == bytes[0]);
  /* At least q k^T and p v: 2 * 2 * T^2 * d per head. */
  assert_true(flops[0] >= 6 * 4.0 * 256 * 256 * 64);
  assert_true(flops[1] < 0.6 * flops[0]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kernels_against_reference),
      cmocka_unit_test(test_against_unfused_graph),
      cmocka_unit_test(test_dropout),
      cmocka_unit_test(test_rule_against_finite_differences),
      cmocka_unit_test(test_kernel_against_finite_differences),
      cmocka_unit_test(test_thread_count_independent),
      cmocka_unit_test(test_memory),
      cmocka_unit_test(test_builder_errors),
      cmocka_unit_test(test_backward_op_errors),
      cmocka_unit_test(test_rule),
      cmocka_unit_test(test_sgg_round_trip),
      cmocka_unit_test(test_cost),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
