/* Every fusion rule (src/compile/fuse_rules.c) against the op it stands for:
 * the op alone in a graph, run by a CPU session (the unfused reference:
 * oneDNN eltwise, cpu_binary.c, cpu_scalar.c), and the same op as one
 * generated kernel (IR -> C -> compiler -> dlopen), on the same random
 * inputs with NaN, infinities and -0 among them, over 1, 7 and 1009
 * elements, binary ops also with a broadcast operand. Equal within a few
 * f32 ulp (oneDNN computes erf, exp and tanh by its own approximations);
 * exactly where the arithmetic is IEEE (add, sub, mul, div, relu, clip, the
 * scalar ops). NaN must stay NaN. broadcast_to, whose input is smaller than
 * its output, has a test of its own. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_internal.h"
#include "compile/plan_internal.h"
#include "sgrt/sgrt.h"
#include "test_util.h"

typedef struct rule_case {
  sg_op_kind kind;
  int n_in;
  int n_attrs;
  sg_attr attrs[2];
  double tol;        /* relative, in units of FLT_EPSILON; 0: exact */
  bool positive_in1; /* the second input is an output in (0, 1) (sigmoid's y) or (-1, 1) */
  sg_dtype dt[3];    /* input dtypes; 0: f32 */
} rule_case;

static sg_dtype in_dtype(const rule_case *c, int i) { return c->dt[i] ? c->dt[i] : SG_F32; }

static uint64_t rng = 0x243f6a8885a308d3ull;
static float uniform(float lo, float hi) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return lo + (hi - lo) * (float)(rng >> 40) / 16777216.0f;
}

static void fill(float *x, int64_t n, float lo, float hi, bool specials) {
  static const float special[] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f, 3e9f, -3e9f, 2.5e19f};
  for (int64_t i = 0; i < n; i++) {
    x[i] = uniform(lo, hi);
    if (specials && i % 11 == 3) x[i] = special[(i / 11) % 8];
  }
}

/* Integers in -50..50 with the extremes among them (wrap-around of neg and
 * abs, i64 -> i32); bools 0 or 1. */
static void fill_typed(void *p, sg_dtype dt, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    int64_t v = (int64_t)uniform(-50, 50);
    if (i % 13 == 5) v = i % 2 ? INT32_MIN : INT64_MIN;
    if (i % 13 == 9) v = i % 2 ? INT32_MAX : (int64_t)1 << 40;
    if (dt == SG_I32) ((int32_t *)p)[i] = (int32_t)(v < INT32_MIN || v > INT32_MAX ? 7 : v);
    else if (dt == SG_I64) ((int64_t *)p)[i] = v;
    else ((uint8_t *)p)[i] = uniform(0, 1) < 0.5f;
  }
}

static double get(const void *p, sg_dtype dt, int64_t i) {
  switch (dt) {
    case SG_F32: return ((const float *)p)[i];
    case SG_I32: return ((const int32_t *)p)[i];
    case SG_I64: return (double)((const int64_t *)p)[i];
    default: return ((const uint8_t *)p)[i];
  }
}

/* A graph of the op alone: inputs "a" (dims) and, for two operands, "b"
 * (dims_b; broadcast when they differ); output "y". */
static sg_graph *one_op(const rule_case *c, int ndim, const int64_t *dims, int ndim_b,
                        const int64_t *dims_b) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  sg_tensor in[3] = {sg_input(g, "a", in_dtype(c, 0), ndim, dims), SG_NO_TENSOR, SG_NO_TENSOR};
  if (c->n_in >= 2) in[1] = sg_input(g, "b", in_dtype(c, 1), ndim_b, dims_b);
  if (c->n_in == 3) in[2] = sg_input(g, "c", in_dtype(c, 2), ndim, dims);
  sg_tensor out;
  assert_status(sg_graph_add_op(g, c->kind, c->n_in, in, c->n_attrs, c->attrs, 1, &out, NULL), SG_OK, NULL);
  assert_status(sg_tensor_set_name(g, out, "y"), SG_OK, NULL);
  assert_status(sg_graph_mark_output(g, out), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  return g;
}

/* The reference: the op alone in a session. */
static void reference(const rule_case *c, int ndim, const int64_t *dims, int ndim_b, const int64_t *dims_b,
                      const void *a, const void *b, const void *cc, void *y, size_t ybytes) {
  sg_graph *g = one_op(c, ndim, dims, ndim_b, dims_b);
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sp.threads = 1;
  sg_session *s;
  assert_status(sg_session_create(g, &sp, &s), SG_OK, NULL);
  assert_status(sg_session_compile(s), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "a", in_dtype(c, 0), ndim, dims, a), SG_OK, NULL);
  if (c->n_in >= 2)
    assert_status(sg_session_set_input(s, "b", in_dtype(c, 1), ndim_b, dims_b, b), SG_OK, NULL);
  if (c->n_in == 3) assert_status(sg_session_set_input(s, "c", in_dtype(c, 2), ndim, dims, cc), SG_OK, NULL);
  /* A step runs every op (the evaluation pass, sg_session_forward, only
   * the forward ones); with no parameters it updates nothing. */
  assert_status(sg_session_step(s), SG_OK, NULL);
  assert_status(sg_session_read(s, "y", y, ybytes), SG_OK, NULL);
  sg_session_destroy(s);
  sg_graph_destroy(g);
}

/* Element strides of an input of dims_x read over an iteration shape of ny
 * dims, NumPy broadcasting: dims align to the right, 0 where x has 1. */
static void broadcast_strides(int ny, int nx, const int64_t *dims_x, int64_t strides[SG__KIR_MAX_DIMS]) {
  int64_t s = 1;
  for (int d = ny - 1, e = nx - 1; d >= 0; d--, e--) {
    int64_t len = e >= 0 ? dims_x[e] : 1;
    strides[d] = len == 1 ? 0 : s;
    s *= len;
  }
}

/* Finishes kernel k ("rule": the op's expression stored), emits, compiles
 * and runs it over its whole range, and frees it. */
static void run_rule_kernel(sg__kir_kernel *k, const void *const *ins, void *const *outs) {
  assert_status(sg__kir_finish(k), SG_OK, NULL);
  const sg__kir_kernel *ks[] = {k};
  char *src;
  size_t len;
  assert_status(sg__cpu_emit_c(ks, 1, &src, &len), SG_OK, NULL);
  sg__jit_lib *lib;
  assert_status(sg__jit_build(src, len, &lib), SG_OK, NULL);
  sg__free(src);
  sg__jit_symbol(lib, "rule")(0, k->numel, ins, outs);
  sg__jit_close(lib);
  sg__kir_free(k);
}

/* The same op as one generated kernel. */
static void generated(const rule_case *c, int ndim, const int64_t *dims, int ndim_b, const int64_t *dims_b,
                      const void *a, const void *b, const void *cc, void *y) {
  sg_graph *g = one_op(c, ndim, dims, ndim_b, dims_b); /* for the op's kind and attributes */
  const sg__op *op = &g->ops[0];
  sg__kir_kernel k;
  sg__kir_init(&k, "rule", ndim, dims);
  int v[3];
  v[0] = sg__kir_load(&k, sg__kir_input_add(&k, in_dtype(c, 0), NULL));
  if (c->n_in >= 2) {
    int64_t strides[SG__KIR_MAX_DIMS] = {0};
    broadcast_strides(ndim, ndim_b, dims_b, strides);
    v[1] = sg__kir_load(&k, sg__kir_input_add(&k, in_dtype(c, 1), strides));
  }
  if (c->n_in == 3) v[2] = sg__kir_load(&k, sg__kir_input_add(&k, in_dtype(c, 2), NULL));
  assert_true(sg__fuse_has_rule(c->kind));
  int r = sg__fuse_op_expr(&k, op, v);
  assert_true(r >= 0);
  sg__kir_store(&k, r);
  const void *ins[] = {a, b, cc};
  void *outs[] = {y};
  run_rule_kernel(&k, ins, outs);
  sg_graph_destroy(g);
}

static void check(const rule_case *c, int ndim, const int64_t *dims, int ndim_b, const int64_t *dims_b) {
  int64_t n = 1, nb = 1;
  for (int d = 0; d < ndim; d++) n *= dims[d];
  for (int d = 0; d < ndim_b; d++) nb *= dims_b[d];
  sg_graph *g = one_op(c, ndim, dims, ndim_b, dims_b);
  sg_tensor_info yi;
  assert_status(sg_graph_tensor_info(g, (sg_tensor){g->ops[0].outputs[0]}, &yi), SG_OK, NULL);
  sg_graph_destroy(g);
  sg_dtype ydt = yi.dtype;
  void *in[3];
  for (int i = 0; i < 3; i++) {
    int64_t m = i == 1 ? nb : n;
    sg_dtype dt = in_dtype(c, i);
    in[i] = malloc((size_t)m * 8);
    if (dt != SG_F32) fill_typed(in[i], dt, m);
    else if (i == 1 && c->positive_in1)
      fill(in[i], m, c->kind == SG_OP_TANH_BACKWARD ? -0.999f : 0.001f, 0.999f, false);
    else if (i == 1) fill(in[i], m, c->kind == SG_OP_DIV ? 0.25f : -4, 4, true);
    else fill(in[i], m, -4, 4, true);
  }
  /* Equal operands (ties of max and min) now and then. */
  if (c->n_in >= 2 && n == nb && in_dtype(c, 0) == in_dtype(c, 1))
    for (int64_t i = 0; i < n; i += 5)
      memcpy((char *)in[1] + i * sg_dtype_size(in_dtype(c, 1)),
             (char *)in[0] + i * sg_dtype_size(in_dtype(c, 0)), sg_dtype_size(in_dtype(c, 0)));
  void *want = malloc((size_t)n * 8), *got = malloc((size_t)n * 8);
  reference(c, ndim, dims, ndim_b, dims_b, in[0], in[1], in[2], want, (size_t)n * sg_dtype_size(ydt));
  generated(c, ndim, dims, ndim_b, dims_b, in[0], in[1], in[2], got);
  int bad = 0;
  for (int64_t i = 0; i < n && bad < 5; i++) {
    double w = get(want, ydt, i), o = get(got, ydt, i), a = get(in[0], in_dtype(c, 0), i);
    bool ok;
    if (isnan(w)) ok = isnan(o);
    else if (isinf(w)) ok = o == w;
    else if (c->tol == 0) ok = o == w && signbit(o) == signbit(w);
    else /* relative to the result, or to dy for gradients (cancellation in f'(x)) */
      ok = fabs(o - w) <= c->tol * FLT_EPSILON * fmax(1.0, fmax(fabs(w), fabs(a)));
    if (!ok) {
      print_error("%s over %lld elements: element %lld (a %a, b %a): generated %a, reference %a\n",
                  sg_op_kind_name(c->kind), (long long)n, (long long)i, a, get(in[1], in_dtype(c, 1), i % nb),
                  o, w);
      bad++;
    }
  }
  for (int i = 0; i < 3; i++) free(in[i]);
  free(want), free(got);
  if (bad) fail_msg("%s: %d mismatches", sg_op_kind_name(c->kind), bad);
}

#define AF(n, v) \
  { .name = (n), .type = SG_ATTR_FLOAT, .f = (v) }
#define AI(n, v) \
  { .name = (n), .type = SG_ATTR_INT, .i = (v) }
static const rule_case cases[] = {
    {SG_OP_RELU, 1, 0, {{0}}, 0, false},
    {SG_OP_CLIP, 1, 2, {AF("min", -1.5), AF("max", 2.25)}, 0, false},
    {SG_OP_GELU, 1, 1, {AI("approximate", 0)}, 8, false},
    {SG_OP_GELU, 1, 1, {AI("approximate", 1)}, 8, false},
    {SG_OP_SIGMOID, 1, 0, {{0}}, 8, false},
    {SG_OP_TANH, 1, 0, {{0}}, 8, false},
    {SG_OP_RELU_BACKWARD, 2, 0, {{0}}, 0, false},
    {SG_OP_CLIP_BACKWARD, 2, 2, {AF("min", -1.5), AF("max", 2.25)}, 0, false},
    {SG_OP_GELU_BACKWARD, 2, 1, {AI("approximate", 0)}, 16, false},
    {SG_OP_GELU_BACKWARD, 2, 1, {AI("approximate", 1)}, 16, false},
    {SG_OP_SIGMOID_BACKWARD, 2, 0, {{0}}, 4, true},
    {SG_OP_TANH_BACKWARD, 2, 0, {{0}}, 4, true},
    {SG_OP_ADD, 2, 0, {{0}}, 0, false},
    {SG_OP_SUB, 2, 0, {{0}}, 0, false},
    {SG_OP_MUL, 2, 0, {{0}}, 0, false},
    {SG_OP_DIV, 2, 0, {{0}}, 0, false},
    {SG_OP_ADD_SCALAR, 1, 1, {AF("value", 0.3)}, 0, false},
    {SG_OP_MUL_SCALAR, 1, 1, {AF("value", -1.7)}, 0, false},
    {SG_OP_POW_SCALAR, 1, 1, {AF("value", 2)}, 0, false},
    {SG_OP_POW_SCALAR, 1, 1, {AF("value", -0.5)}, 0, false},
    {SG_OP_POW_SCALAR, 1, 1, {AF("value", 1.5)}, 0, false},
    {SG_OP_EXP, 1, 0, {{0}}, 0, false},
    {SG_OP_LOG, 1, 0, {{0}}, 0, false},
    {SG_OP_SQRT, 1, 0, {{0}}, 0, false},
    {SG_OP_RECIPROCAL, 1, 0, {{0}}, 0, false},
    {SG_OP_ERF, 1, 0, {{0}}, 0, false},
    {SG_OP_SIN, 1, 0, {{0}}, 0, false},
    {SG_OP_COS, 1, 0, {{0}}, 0, false},
    {SG_OP_ACOS, 1, 0, {{0}}, 0, false},
    {SG_OP_NEG, 1, 0, {{0}}, 0, false},
    {SG_OP_NEG, 1, 0, {{0}}, 0, false, {SG_I32}},
    {SG_OP_ABS, 1, 0, {{0}}, 0, false},
    {SG_OP_ABS, 1, 0, {{0}}, 0, false, {SG_I64}},
    {SG_OP_SIGN, 1, 0, {{0}}, 0, false},
    {SG_OP_SIGN, 1, 0, {{0}}, 0, false, {SG_I32}},
    {SG_OP_MAX, 2, 0, {{0}}, 0, false},
    {SG_OP_MIN, 2, 0, {{0}}, 0, false},
    {SG_OP_MAX, 2, 0, {{0}}, 0, false, {SG_I64, SG_I64}},
    {SG_OP_MIN, 2, 0, {{0}}, 0, false, {SG_I32, SG_I32}},
    {SG_OP_WHERE, 3, 0, {{0}}, 0, false, {SG_BOOL, SG_F32, SG_F32}},
    {SG_OP_WHERE, 3, 0, {{0}}, 0, false, {SG_BOOL, SG_I64, SG_I64}},
    {SG_OP_CAST, 1, 1, {AI("to", SG_I32)}, 0, false},
    {SG_OP_CAST, 1, 1, {AI("to", SG_I64)}, 0, false},
    {SG_OP_CAST, 1, 1, {AI("to", SG_BOOL)}, 0, false},
    {SG_OP_CAST, 1, 1, {AI("to", SG_F32)}, 0, false, {SG_I64}},
    {SG_OP_CAST, 1, 1, {AI("to", SG_I32)}, 0, false, {SG_I64}},
    {SG_OP_CAST, 1, 1, {AI("to", SG_F32)}, 0, false, {SG_BOOL}},
    {SG_OP_CAST, 1, 1, {AI("to", SG_I64)}, 0, false, {SG_I32}},
    {SG_OP_CAST, 1, 1, {AI("to", SG_BOOL)}, 0, false, {SG_I64}},
};

static void test_rules_flat(void **state) {
  (void)state;
  const int64_t sizes[] = {1, 7, 1009};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    for (size_t s = 0; s < 3; s++) check(&cases[i], 1, &sizes[s], 1, &sizes[s]);
}

/* Binary ops with the second operand broadcast: per column, per row, a scalar. */
static void test_rules_broadcast(void **state) {
  (void)state;
  const int64_t dims[2] = {7, 1009}, col[1] = {1009}, row[2] = {7, 1}, one[1] = {1};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const rule_case *c = &cases[i];
    bool binary = (c->kind >= SG_OP_ADD && c->kind <= SG_OP_DIV) || c->kind == SG_OP_MAX ||
                  c->kind == SG_OP_MIN || c->kind == SG_OP_WHERE;
    if (!binary) continue;
    check(c, 2, dims, 1, col);
    check(c, 2, dims, 2, row);
    check(c, 2, dims, 1, one);
  }
}

/* Every kind with a rule (the op table's elementwise kinds but dropout and
 * its backward) is among the cases above, so every rule is run against its
 * op; dropout and its backward have none. */
/* broadcast_to: its input has fewer elements than its output, which the
 * harness above does not build; checked here, bitwise (a copy), input
 * specials included, against the op alone in a session. */
static void test_broadcast_to_rule(void **state) {
  (void)state;
  static const struct {
    int nx, ny;
    int64_t x[2], y[2];
  } shapes[] = {
      {1, 2, {1009}, {7, 1009}}, {2, 2, {7, 1}, {7, 1009}}, {2, 2, {1, 1}, {3, 7}}, {1, 1, {1}, {1}}};
  for (size_t t = 0; t < sizeof shapes / sizeof *shapes; t++) {
    int64_t nx = 1, ny = 1;
    for (int d = 0; d < shapes[t].nx; d++) nx *= shapes[t].x[d];
    for (int d = 0; d < shapes[t].ny; d++) ny *= shapes[t].y[d];
    float *x = malloc((size_t)nx * sizeof(float)), *want = malloc((size_t)ny * sizeof(float)),
          *got = malloc((size_t)ny * sizeof(float));
    fill(x, nx, -4, 4, true);
    sg_graph *g;
    assert_int_equal(sg_graph_create(&g), SG_OK);
    sg_tensor in = sg_input(g, "a", SG_F32, shapes[t].nx, shapes[t].x), out;
    sg_attr shape = {.name = "shape", .type = SG_ATTR_INTS, .count = shapes[t].ny, .ints = shapes[t].y};
    assert_status(sg_graph_add_op(g, SG_OP_BROADCAST_TO, 1, &in, 1, &shape, 1, &out, NULL), SG_OK, NULL);
    assert_status(sg_tensor_set_name(g, out, "y"), SG_OK, NULL);
    assert_status(sg_graph_mark_output(g, out), SG_OK, NULL);
    assert_status(sg_graph_finalize(g), SG_OK, NULL);
    sg_session_params sp = SG_SESSION_PARAMS_INIT;
    sp.threads = 1;
    sg_session *s;
    assert_status(sg_session_create(g, &sp, &s), SG_OK, NULL);
    assert_status(sg_session_compile(s), SG_OK, NULL);
    assert_status(sg_session_set_input(s, "a", SG_F32, shapes[t].nx, shapes[t].x, x), SG_OK, NULL);
    assert_status(sg_session_step(s), SG_OK, NULL);
    assert_status(sg_session_read(s, "y", want, (size_t)ny * sizeof(float)), SG_OK, NULL);
    sg_session_destroy(s);
    /* The rule as one generated kernel over y's shape, x read broadcast. */
    sg__kir_kernel k;
    sg__kir_init(&k, "rule", shapes[t].ny, shapes[t].y);
    int64_t strides[SG__KIR_MAX_DIMS] = {0};
    broadcast_strides(shapes[t].ny, shapes[t].nx, shapes[t].x, strides);
    int v = sg__kir_load(&k, sg__kir_input_add(&k, SG_F32, strides));
    int r = sg__fuse_op_expr(&k, &g->ops[0], &v);
    assert_true(r >= 0);
    sg__kir_store(&k, r);
    const void *ins[] = {x};
    void *outs[] = {got};
    run_rule_kernel(&k, ins, outs);
    sg_graph_destroy(g);
    if (memcmp(got, want, (size_t)ny * sizeof(float)) != 0) fail_msg("broadcast_to case %zu differs", t);
    free(x), free(want), free(got);
  }
}

static void test_every_rule_checked(void **state) {
  (void)state;
  for (int kind = 1; kind < 128; kind++) {
    /* Their own tests: broadcast_to above; transpose, whose strides the plan builder permutes, in
     * test_cuda_emit (test_transpose_kernels: C and CUDA against the CPU's transpose). */
    if (!sg__fuse_has_rule((sg_op_kind)kind) || kind == SG_OP_BROADCAST_TO || kind == SG_OP_TRANSPOSE)
      continue;
    bool found = false;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) found |= (int)cases[i].kind == kind;
    if (!found) fail_msg("%s has a fusion rule that no case checks", sg_op_kind_name((sg_op_kind)kind));
  }
  assert_false(sg__fuse_has_rule(SG_OP_DROPOUT));
  assert_false(sg__fuse_has_rule(SG_OP_DROPOUT_BACKWARD));
  assert_true(sg__fuse_has_rule(SG_OP_GELU_BACKWARD));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rules_flat),
      cmocka_unit_test(test_rules_broadcast),
      cmocka_unit_test(test_broadcast_to_rule),
      cmocka_unit_test(test_every_rule_checked),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
