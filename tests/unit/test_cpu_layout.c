/* Storage layouts of the CPU backend (src/backend/cpu/cpu_layout.c): which
 * tensors plan_layouts makes channel-blocked, the planner's slot sizes with
 * padded channels, and that training, evaluation and poisoning give the same
 * results with blocked layouts as with the plain layout everywhere
 * (SG_CPU_LAYOUT=plain) — through every kind of boundary: convolution, batch
 * norm and pooling taking blocked operands natively, elementwise ops on
 * blocked tensors as they are, and layout adapters around other ops. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_internal.h"
#include "compile/plan.h"
#include "core/core.h"
#include "test_util.h"

/* Neither 12 nor 20 channels is a multiple of a channel block (8 or 16). */
enum { N = 4, CIN = 3, S = 12, C1 = 12, C2 = 20, K = 5 };

static sg_tensor param(sg_graph *g, const char *name, int ndim, const int64_t *dims, uint64_t seed,
                       float scale) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= dims[i];
  float *v = malloc((size_t)n * sizeof *v);
  assert_non_null(v);
  sg_test_fill(v, (size_t)n, seed);
  for (int64_t i = 0; i < n; i++) v[i] *= scale;
  sg_tensor t = sg_parameter(g, name, SG_F32, ndim, dims, v);
  free(v);
  return t;
}

static sg_tensor conv(sg_graph *g, const char *name, sg_tensor x, int64_t cin, int64_t cout, int64_t k,
                      uint64_t seed) {
  int64_t wd[] = {cout, cin, k, k};
  sg_conv2d_params p = SG_CONV2D_PARAMS_INIT;
  p.padding[0] = p.padding[1] = p.padding[2] = p.padding[3] = k / 2;
  return sg_conv2d(g, x, param(g, name, 4, wd, seed, 0.4f), SG_NO_TENSOR, &p);
}

static sg_tensor bn(sg_graph *g, const char *name, sg_tensor x, int64_t c) {
  float ones[C2], zeros[C2] = {0};
  for (int i = 0; i < C2; i++) ones[i] = 1.0f;
  char n[64];
  int64_t d[] = {c};
  snprintf(n, sizeof n, "%s.weight", name);
  sg_tensor gm = sg_parameter(g, n, SG_F32, 1, d, ones);
  snprintf(n, sizeof n, "%s.bias", name);
  sg_tensor bt = param(g, n, 1, d, 77, 0.1f);
  snprintf(n, sizeof n, "%s.running_mean", name);
  sg_tensor rm = sg_graph_add_tensor(g, n, SG_F32, SG_ROLE_STATE, 1, d, zeros);
  snprintf(n, sizeof n, "%s.running_var", name);
  sg_tensor rv = sg_graph_add_tensor(g, n, SG_F32, SG_ROLE_STATE, 1, d, ones);
  return sg_batch_norm(g, x, gm, bt, rm, rv, NULL);
}

static void name(sg_graph *g, sg_tensor t, const char *n) {
  assert_int_equal(sg_tensor_set_name(g, t, n), SG_OK);
}

/* A residual CNN whose 12-channel activations pad to the block, with ops of
 * every layout kind on blocked tensors:
 *   x[4,3,12,12] -> conv 3->12 -> bn -> relu ("a") -> max_pool 2 ("p")
 *   p -> conv 12->20 -> bn -> relu -> conv 20->20 -> bn ("b");  p -> conv 1x1 12->20 ("s")
 *   relu(b + s) ("r") -> mul_scalar 0.5 ("m") -> sigmoid ("sig") -> add_scalar 0.1 ("as")
 *   -> avg_pool 2 ("ap") -> global_avg_pool -> flatten -> linear -> cross entropy, SGD. */
static sg_graph *rescnn(void) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  int64_t xd[] = {N, CIN, S, S}, yd[] = {N}, fd[] = {K, C2}, fb[] = {K};
  sg_tensor x = sg_input(g, "x", SG_F32, 4, xd);
  sg_tensor y = sg_input(g, "y", SG_I64, 1, yd);
  sg_tensor lr = sg_input(g, "lr", SG_F32, 0, NULL);
  sg_tensor a = sg_relu(g, bn(g, "bn1", conv(g, "conv1.weight", x, CIN, C1, 3, 1), C1));
  name(g, a, "a");
  sg_pool2d_params pp = SG_POOL2D_PARAMS_INIT;
  pp.kernel[0] = pp.kernel[1] = 2;
  sg_tensor p = sg_max_pool2d(g, a, &pp);
  name(g, p, "p");
  sg_tensor b = sg_relu(g, bn(g, "bn2", conv(g, "conv2.weight", p, C1, C2, 3, 2), C2));
  b = bn(g, "bn3", conv(g, "conv3.weight", b, C2, C2, 3, 3), C2);
  name(g, b, "b");
  sg_tensor s = conv(g, "conv4.weight", p, C1, C2, 1, 4);
  name(g, s, "s");
  sg_tensor r = sg_relu(g, sg_add(g, b, s));
  name(g, r, "r");
  sg_tensor m = sg_mul_scalar(g, r, 0.5);
  name(g, m, "m");
  sg_tensor sig = sg_sigmoid(g, m);
  name(g, sig, "sig");
  sg_tensor as = sg_add_scalar(g, sig, 0.1);
  name(g, as, "as");
  sg_tensor ap = sg_avg_pool2d(g, as, &pp);
  name(g, ap, "ap");
  sg_tensor logits = sg_linear(g, sg_flatten(g, sg_global_avg_pool(g, ap), 1),
                               param(g, "fc.weight", 2, fd, 5, 0.5f), param(g, "fc.bias", 1, fb, 6, 0.1f));
  name(g, logits, "logits");
  sg_tensor loss = sg_cross_entropy(g, logits, y, SG_REDUCTION_MEAN);
  name(g, loss, "loss");
  assert_int_equal(sg_graph_mark_output(g, logits), SG_OK);
  assert_int_equal(sg_graph_mark_output(g, loss), SG_OK);
  assert_int_equal(sg_graph_backward(g, loss), SG_OK);
  sg_sgd_params sp = SG_SGD_PARAMS_INIT;
  sp.momentum = 0.9;
  sp.weight_decay = 1e-3;
  assert_int_equal(sg_graph_add_sgd(g, lr, &sp), SG_OK);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  return g;
}

static sg_session *session(const sg_graph *g, bool plain, int poison) {
  if (plain) setenv("SG_CPU_LAYOUT", "plain", 1);
  sg_session_params p = SG_SESSION_PARAMS_INIT;
  p.threads = 2;
  p.poison = poison;
  sg_session *s;
  assert_status(sg_session_create(g, &p, &s), SG_OK, NULL);
  unsetenv("SG_CPU_LAYOUT");
  assert_status(sg_session_compile(s), SG_OK, NULL);
  return s;
}

static void feed(sg_session *s, int k) {
  float x[N * CIN * S * S];
  int64_t y[N];
  sg_test_fill(x, sizeof x / sizeof x[0], 500 + (uint64_t)k);
  for (int i = 0; i < N; i++) y[i] = (i * 2 + k) % K;
  float lr = 0.1f;
  int64_t xd[] = {N, CIN, S, S}, yd[] = {N};
  assert_status(sg_session_set_input(s, "x", SG_F32, 4, xd, x), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "y", SG_I64, 1, yd, y), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "lr", SG_F32, 0, NULL, &lr), SG_OK, NULL);
}

/* max|a - b| / max|b| over every parameter, state and optimizer state. */
static double state_diff(const sg_graph *g, const sg_session *a, const sg_session *b, bool exact) {
  double worst = 0;
  for (int32_t i = 0; i < sg_graph_num_tensors(g); i++) {
    sg_tensor_info in;
    sg_graph_tensor_info(g, (sg_tensor){i}, &in);
    if (in.role != SG_ROLE_PARAMETER && in.role != SG_ROLE_STATE && in.role != SG_ROLE_OPTIMIZER_STATE)
      continue;
    float *va = malloc(in.nbytes), *vb = malloc(in.nbytes);
    assert_non_null(va);
    assert_non_null(vb);
    assert_status(sg_session_read(a, in.name, va, in.nbytes), SG_OK, NULL);
    assert_status(sg_session_read(b, in.name, vb, in.nbytes), SG_OK, NULL);
    if (exact) assert_memory_equal(va, vb, in.nbytes);
    double d = 0, m = 1e-30;
    for (int64_t k = 0; k < in.numel; k++) {
      double e = fabs((double)va[k] - vb[k]);
      d = e > d || e != e ? e : d;
      m = fabs((double)vb[k]) > m ? fabs((double)vb[k]) : m;
    }
    if (d / m > worst || d != d) worst = d != d ? INFINITY : d / m;
    free(va);
    free(vb);
  }
  return worst;
}

static sg__cpu_layout layout_of(const sg__cpu_state *st, const sg_graph *g, const char *n) {
  sg_tensor t;
  assert_int_equal(sg_graph_find_tensor(g, n, &t), SG_OK);
  return sg__cpu_tensor_layout(st, g, t.id);
}

/* The pass: which tensors are blocked, and the padded slot sizes. */
static void test_pass(void **state) {
  (void)state;
  sg_graph *g = rescnn();
  sg__backend_config cfg = {2, 0};
  void *be;
  assert_int_equal(sg__cpu_backend.create(&cfg, &be), SG_OK);
  sg__cpu_state *st = be;
  sg__plan plan;
  assert_status(sg__plan_build(g, &sg__cpu_backend, be, NULL, &plan), SG_OK, NULL);
  if (st->block == 0) {
    print_message("oneDNN picks no channel-blocked layout here: everything stays plain\n");
  } else {
    /* Activations between convolution, batch norm and pooling, and the
     * elementwise ops joining them (relu, add, mul_scalar). */
    static const char *const blocked[] = {"a", "p", "b", "s", "r", "m", "as", "ap"};
    for (size_t i = 0; i < sizeof blocked / sizeof blocked[0]; i++)
      assert_int_equal(layout_of(st, g, blocked[i]), SG__CPU_BLOCKED);
    /* The sigmoid output touches no such op: plain, and the sigmoid and
     * add_scalar kernels run behind adapters. Inputs, parameters, graph
     * outputs and the classifier stay plain. */
    static const char *const plain[] = {"sig", "x", "conv1.weight", "logits", "loss", "fc.weight"};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
      assert_int_equal(layout_of(st, g, plain[i]), SG__CPU_PLAIN);
    /* 12 channels pad to the next block. */
    sg_tensor a;
    assert_int_equal(sg_graph_find_tensor(g, "a", &a), SG_OK);
    int64_t padded = (C1 + st->block - 1) / st->block * st->block;
    assert_int_equal(plan.bytes[a.id], (size_t)(N * padded * S * S * 4));
    assert_true(plan.bytes[a.id] > g->tensors[a.id].nbytes);
    sg_tensor r;
    assert_int_equal(sg_graph_find_tensor(g, "r", &r), SG_OK);
    padded = (C2 + st->block - 1) / st->block * st->block;
    assert_int_equal(plan.bytes[r.id], (size_t)(N * padded * (S / 2) * (S / 2) * 4));
    /* The adapters' questions. */
    for (uint32_t k = 0; k < g->n_ops; k++) {
      sg_op_kind kind = g->ops[k].kind;
      bool native = sg__cpu_layout_native(st, g, &g->ops[k]);
      if (kind == SG_OP_SIGMOID || kind == SG_OP_ADD_SCALAR || kind == SG_OP_GLOBAL_AVG_POOL)
        assert_false(native);
      if (kind == SG_OP_CONV2D || kind == SG_OP_BATCH_NORM || kind == SG_OP_RELU || kind == SG_OP_MAX_POOL2D)
        assert_true(native);
    }
  }
  sg__plan_free(&plan);
  sg__cpu_backend.destroy(be);
  sg_graph_destroy(g);
}

/* Training and evaluation agree with the plain layout everywhere. */
static void test_same_as_plain(void **state) {
  (void)state;
  sg_graph *g = rescnn();
  sg_session *blk = session(g, false, 0), *pln = session(g, true, 0);
  sg_compile_report rb = SG_COMPILE_REPORT_INIT, rp = SG_COMPILE_REPORT_INIT;
  assert_int_equal(sg_session_compile_report(blk, &rb), SG_OK);
  assert_int_equal(sg_session_compile_report(pln, &rp), SG_OK);
  /* Padded channels make the blocked plan larger (when there is one). */
  assert_true(rb.sum_tensor_bytes >= rp.sum_tensor_bytes);
  for (int k = 0; k < 4; k++) {
    float lb, lp;
    feed(blk, k);
    feed(pln, k);
    assert_status(sg_session_step(blk), SG_OK, NULL);
    assert_status(sg_session_step(pln), SG_OK, NULL);
    assert_status(sg_session_read(blk, "loss", &lb, sizeof lb), SG_OK, NULL);
    assert_status(sg_session_read(pln, "loss", &lp, sizeof lp), SG_OK, NULL);
    assert_true(isfinite(lb));
    assert_true(fabs((double)lb - lp) <= 1e-5 * fabs((double)lp));
  }
  double d = state_diff(g, blk, pln, false);
  print_message("after 4 steps, blocked vs plain layouts: max relative difference %.2e\n", d);
  assert_true(d <= 1e-4);
  /* Evaluation pass (batch norm on running statistics). */
  float eb[N * K], ep[N * K];
  feed(blk, 9);
  feed(pln, 9);
  assert_status(sg_session_forward(blk), SG_OK, NULL);
  assert_status(sg_session_forward(pln), SG_OK, NULL);
  assert_status(sg_session_read(blk, "logits", eb, sizeof eb), SG_OK, NULL);
  assert_status(sg_session_read(pln, "logits", ep, sizeof ep), SG_OK, NULL);
  for (int i = 0; i < N * K; i++)
    assert_true(fabs((double)eb[i] - ep[i]) <= 1e-4 * (1 + fabs((double)ep[i])));
  sg_session_destroy(blk);
  sg_session_destroy(pln);
  sg_graph_destroy(g);
}

/* Poisoning every dead slot (NaN bytes over the whole padded slot) changes
 * nothing: no kernel reads a blocked tensor's padding after its slot was
 * reused, and padding is rewritten as zeros by whoever writes the slot. */
static void test_poison(void **state) {
  (void)state;
  sg_graph *g = rescnn();
  sg_session *a = session(g, false, 0), *b = session(g, false, 1);
  for (int k = 0; k < 3; k++) {
    feed(a, k);
    feed(b, k);
    assert_status(sg_session_step(a), SG_OK, NULL);
    assert_status(sg_session_step(b), SG_OK, NULL);
  }
  assert_true(state_diff(g, a, b, true) == 0.0);
  sg_session_destroy(a);
  sg_session_destroy(b);
  sg_graph_destroy(g);
}

/* Every allocation of compile — the layout pass, padded slots, adapters and
 * their plain copies — fails cleanly with SG_ERR_NO_MEMORY (no leak under
 * LeakSanitizer), and a step without the injection allocates nothing. */
static void test_allocation_failures(void **state) {
  (void)state;
  sg_graph *g = rescnn();
  long n = 0;
  for (;; n++) {
    sg_session_params p = SG_SESSION_PARAMS_INIT;
    p.threads = 1;
    sg_session *s = NULL;
    sg__alloc_fail_after(n);
    sg_status st = sg_session_create(g, &p, &s);
    if (st == SG_OK) st = sg_session_compile(s);
    sg__alloc_fail_after(-1);
    if (st == SG_OK) {
      feed(s, 0);
      unsigned long before = sg__alloc_count();
      assert_status(sg_session_step(s), SG_OK, NULL);
      assert_true(sg__alloc_count() == before);
      sg_session_destroy(s);
      break;
    }
    assert_int_equal(st, SG_ERR_NO_MEMORY);
    sg_session_destroy(s);
    assert_true(n < 100000);
  }
  print_message("create + compile with blocked layouts: %ld allocation points, each failing cleanly\n", n);
  assert_true(n > 10);
  sg_graph_destroy(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pass),
      cmocka_unit_test(test_same_as_plain),
      cmocka_unit_test(test_poison),
      cmocka_unit_test(test_allocation_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
