/* The session: memory planning, poisoning of dead buffers, determinism, no
 * allocation in a step, evaluation passes, constant folding, dead code,
 * checkpoints, and misuse. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "graph/graph_internal.h"
#include "runtime/hooks.h"
#include "test_util.h"

enum { B = 8, F = 12, H = 16, C = 5 };

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

/* x[B,F] -> linear -> relu -> dropout -> linear -> CE, with SGD or AdamW. */
static sg_graph *mlp(int adamw, int with_dropout) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  int64_t xd[] = {B, F}, yd[] = {B}, w1[] = {H, F}, b1[] = {H}, w2[] = {C, H}, b2[] = {C};
  sg_tensor x = sg_input(g, "x", SG_F32, 2, xd);
  sg_tensor y = sg_input(g, "y", SG_I64, 1, yd);
  sg_tensor lr = sg_input(g, "lr", SG_F32, 0, NULL);
  sg_tensor W1 = param(g, "w1", 2, w1, 1, 0.3f), B1 = param(g, "b1", 1, b1, 2, 0.1f);
  sg_tensor W2 = param(g, "w2", 2, w2, 3, 0.3f), B2 = param(g, "b2", 1, b2, 4, 0.1f);
  sg_tensor h = sg_relu(g, sg_linear(g, x, W1, B1));
  if (with_dropout) h = sg_dropout(g, h, 0.25, 7, 1);
  sg_tensor logits = sg_linear(g, h, W2, B2);
  sg_tensor loss = sg_cross_entropy(g, logits, y, SG_REDUCTION_MEAN);
  assert_int_equal(sg_tensor_set_name(g, logits, "logits"), SG_OK);
  assert_int_equal(sg_tensor_set_name(g, loss, "loss"), SG_OK);
  assert_int_equal(sg_graph_mark_output(g, logits), SG_OK);
  assert_int_equal(sg_graph_mark_output(g, loss), SG_OK);
  assert_int_equal(sg_graph_backward(g, loss), SG_OK);
  if (adamw) {
    assert_int_equal(sg_graph_add_adamw(g, lr, NULL), SG_OK);
  } else {
    sg_sgd_params p = SG_SGD_PARAMS_INIT;
    p.momentum = 0.9;
    p.weight_decay = 1e-3;
    assert_int_equal(sg_graph_add_sgd(g, lr, &p), SG_OK);
  }
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  return g;
}

/* A CNN of `blocks` conv-BN-relu blocks, global pooling, linear, CE, SGD. */
static sg_graph *cnn(int blocks) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  int64_t xd[] = {2, 4, 8, 8}, yd[] = {2}, wd[] = {4, 4, 3, 3}, cd[] = {4}, fd[] = {C, 4}, bd[] = {C};
  sg_tensor x = sg_input(g, "x", SG_F32, 4, xd);
  sg_tensor y = sg_input(g, "y", SG_I64, 1, yd);
  sg_tensor lr = sg_input(g, "lr", SG_F32, 0, NULL);
  sg_conv2d_params cp = SG_CONV2D_PARAMS_INIT;
  cp.padding[0] = cp.padding[1] = cp.padding[2] = cp.padding[3] = 1;
  float ones[4] = {1, 1, 1, 1}, zeros[4] = {0};
  for (int b = 0; b < blocks; b++) {
    char n[64];
    snprintf(n, sizeof n, "block%d.conv", b);
    sg_tensor w = param(g, n, 4, wd, 10 + (uint64_t)b, 0.3f);
    snprintf(n, sizeof n, "block%d.gamma", b);
    sg_tensor gm = sg_parameter(g, n, SG_F32, 1, cd, ones);
    snprintf(n, sizeof n, "block%d.beta", b);
    sg_tensor bt = sg_parameter(g, n, SG_F32, 1, cd, zeros);
    snprintf(n, sizeof n, "block%d.running_mean", b);
    sg_tensor rm = sg_graph_add_tensor(g, n, SG_F32, SG_ROLE_STATE, 1, cd, zeros);
    snprintf(n, sizeof n, "block%d.running_var", b);
    sg_tensor rv = sg_graph_add_tensor(g, n, SG_F32, SG_ROLE_STATE, 1, cd, ones);
    x = sg_relu(g, sg_batch_norm(g, sg_conv2d(g, x, w, SG_NO_TENSOR, &cp), gm, bt, rm, rv, NULL));
  }
  sg_tensor logits = sg_linear(g, sg_flatten(g, sg_global_avg_pool(g, x), 1),
                               param(g, "fc.w", 2, fd, 99, 0.3f), param(g, "fc.b", 1, bd, 98, 0.1f));
  sg_tensor loss = sg_cross_entropy(g, logits, y, SG_REDUCTION_MEAN);
  assert_int_equal(sg_tensor_set_name(g, loss, "loss"), SG_OK);
  assert_int_equal(sg_graph_mark_output(g, loss), SG_OK);
  assert_int_equal(sg_graph_backward(g, loss), SG_OK);
  sg_sgd_params p = SG_SGD_PARAMS_INIT;
  p.momentum = 0.9;
  assert_int_equal(sg_graph_add_sgd(g, lr, &p), SG_OK);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  return g;
}

static sg_session *session(const sg_graph *g, int poison, uint64_t seed) {
  sg_session_params p = SG_SESSION_PARAMS_INIT;
  p.threads = 2;
  p.poison = poison;
  p.seed = seed;
  sg_session *s;
  assert_status(sg_session_create(g, &p, &s), SG_OK, NULL);
  assert_status(sg_session_compile(s), SG_OK, NULL);
  return s;
}

/* Feeds the MLP's inputs for step k (deterministic). */
static void feed_mlp(sg_session *s, int k) {
  float x[B * F];
  int64_t y[B];
  sg_test_fill(x, B * F, 1000 + (uint64_t)k);
  for (int i = 0; i < B; i++) y[i] = (i * 3 + k) % C;
  float lr = 0.1f;
  int64_t xd[] = {B, F}, yd[] = {B};
  assert_status(sg_session_set_input(s, "x", SG_F32, 2, xd, x), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "y", SG_I64, 1, yd, y), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "lr", SG_F32, 0, NULL, &lr), SG_OK, NULL);
}

static void feed_cnn(sg_session *s, int k) {
  float x[2 * 4 * 8 * 8];
  int64_t y[2] = {k % C, (k + 2) % C};
  sg_test_fill(x, sizeof x / sizeof x[0], 2000 + (uint64_t)k);
  float lr = 0.05f;
  int64_t xd[] = {2, 4, 8, 8}, yd[] = {2};
  assert_status(sg_session_set_input(s, "x", SG_F32, 4, xd, x), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "y", SG_I64, 1, yd, y), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "lr", SG_F32, 0, NULL, &lr), SG_OK, NULL);
}

/* All parameters, state and optimizer state, concatenated. */
static unsigned char *snapshot(const sg_graph *g, const sg_session *s, size_t *bytes) {
  size_t total = 0;
  for (int32_t i = 0; i < sg_graph_num_tensors(g); i++) {
    sg_tensor_info in;
    sg_graph_tensor_info(g, (sg_tensor){i}, &in);
    if (in.role == SG_ROLE_PARAMETER || in.role == SG_ROLE_STATE || in.role == SG_ROLE_OPTIMIZER_STATE)
      total += in.nbytes;
  }
  unsigned char *buf = malloc(total ? total : 1), *at = buf;
  assert_non_null(buf);
  for (int32_t i = 0; i < sg_graph_num_tensors(g); i++) {
    sg_tensor_info in;
    sg_graph_tensor_info(g, (sg_tensor){i}, &in);
    if (in.role != SG_ROLE_PARAMETER && in.role != SG_ROLE_STATE && in.role != SG_ROLE_OPTIMIZER_STATE)
      continue;
    assert_status(sg_session_read(s, in.name, at, in.nbytes), SG_OK, NULL);
    at += in.nbytes;
  }
  *bytes = total;
  return buf;
}

static void test_planner(void **state) {
  (void)state;
  sg_graph *graphs[] = {mlp(0, 0), cnn(10)};
  for (int i = 0; i < 2; i++) {
    sg_session *s = session(graphs[i], 0, 0);
    sg_compile_report r = SG_COMPILE_REPORT_INIT;
    assert_status(sg_session_compile_report(s, &r), SG_OK, NULL);
    printf("graph %d: planned peak %zu bytes (persistent %zu + transient %zu) vs sum of tensors %zu; %d ops, "
           "%d in "
           "place\n",
           i, r.planned_peak_bytes, r.persistent_bytes, r.transient_bytes, r.sum_tensor_bytes,
           r.ops_scheduled, r.ops_inplace);
    assert_true(r.planned_peak_bytes < r.sum_tensor_bytes);
    assert_true(r.transient_bytes > 0);
    assert_true(r.ops_scheduled > 0);
    /* The 10-block CNN reuses most of its activation memory. */
    if (i == 1) assert_true(r.planned_peak_bytes * 2 < r.sum_tensor_bytes);
    sg_session_destroy(s);
    sg_graph_destroy(graphs[i]);
  }
}

/* Every buffer is filled with NaN when its tensor dies; if any op read a
 * tensor after its slot was reused or poisoned, the results would differ
 * from an unpoisoned run (NaN spreads). */
static void test_poison(void **state) {
  (void)state;
  sg_graph *graphs[] = {mlp(0, 1), cnn(10)};
  for (int i = 0; i < 2; i++) {
    sg_session *a = session(graphs[i], 0, 5), *b = session(graphs[i], 1, 5);
    for (int k = 0; k < 3; k++) {
      if (i == 0) feed_mlp(a, k), feed_mlp(b, k);
      else feed_cnn(a, k), feed_cnn(b, k);
      assert_status(sg_session_step(a), SG_OK, NULL);
      assert_status(sg_session_step(b), SG_OK, NULL);
      float la, lb;
      assert_status(sg_session_read(a, "loss", &la, sizeof la), SG_OK, NULL);
      assert_status(sg_session_read(b, "loss", &lb, sizeof lb), SG_OK, NULL);
      assert_true(isfinite(la));
      assert_memory_equal(&la, &lb, sizeof la);
    }
    size_t na, nb;
    unsigned char *pa = snapshot(graphs[i], a, &na), *pb = snapshot(graphs[i], b, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(pa, pb, na);
    free(pa);
    free(pb);
    sg_session_destroy(a);
    sg_session_destroy(b);
    sg_graph_destroy(graphs[i]);
  }
}

static void test_determinism_and_no_alloc(void **state) {
  (void)state;
  sg_graph *g = mlp(1, 1);
  unsigned char *snaps[2];
  size_t n[2];
  for (int run = 0; run < 2; run++) {
    sg_session *s = session(g, 0, 42);
    unsigned long before = 0;
    for (int k = 0; k < 5; k++) {
      feed_mlp(s, k);
      if (k == 1) before = sg__alloc_count();
      assert_status(sg_session_step(s), SG_OK, NULL);
    }
    /* Steps 2..5 (and their set_input calls) allocated nothing. */
    assert_int_equal(sg__alloc_count() - before, 0);
    snaps[run] = snapshot(g, s, &n[run]);
    assert_int_equal(sg_session_steps(s), 5);
    sg_session_destroy(s);
  }
  assert_int_equal(n[0], n[1]);
  assert_memory_equal(snaps[0], snaps[1], n[0]);
  free(snaps[0]);
  free(snaps[1]);
  sg_graph_destroy(g);
}

static void test_eval_and_binding(void **state) {
  (void)state;
  sg_graph *g = cnn(2);
  sg_session *s = session(g, 0, 0);
  feed_cnn(s, 0);
  size_t n0, n1;
  unsigned char *before = snapshot(g, s, &n0);
  float l1, l2;
  assert_status(sg_session_forward(s), SG_OK, NULL);
  assert_status(sg_session_read(s, "loss", &l1, sizeof l1), SG_OK, NULL);
  assert_status(sg_session_forward(s), SG_OK, NULL);
  assert_status(sg_session_read(s, "loss", &l2, sizeof l2), SG_OK, NULL);
  assert_true(isfinite(l1));
  assert_memory_equal(&l1, &l2, sizeof l1);
  /* Evaluation changes no parameter and no running statistic. */
  unsigned char *after = snapshot(g, s, &n1);
  assert_memory_equal(before, after, n0);
  assert_int_equal(sg_session_steps(s), 0);
  free(after);
  /* A step does change them. */
  assert_status(sg_session_step(s), SG_OK, NULL);
  after = snapshot(g, s, &n1);
  assert_memory_not_equal(before, after, n0);
  free(after);
  free(before);
  /* Bound caller memory gives the same result as copied input. */
  float *x = aligned_alloc(64, sizeof(float) * 2 * 4 * 8 * 8);
  assert_non_null(x);
  sg_test_fill(x, 2 * 4 * 8 * 8, 2000);
  int64_t xd[] = {2, 4, 8, 8};
  assert_status(sg_session_forward(s), SG_OK, NULL);
  assert_status(sg_session_read(s, "loss", &l1, sizeof l1), SG_OK, NULL);
  assert_status(sg_session_bind_input(s, "x", SG_F32, 4, xd, x), SG_OK, NULL);
  assert_status(sg_session_forward(s), SG_OK, NULL);
  assert_status(sg_session_read(s, "loss", &l2, sizeof l2), SG_OK, NULL);
  assert_memory_equal(&l1, &l2, sizeof l1);
  assert_status(sg_session_bind_input(s, "x", SG_F32, 4, xd, (char *)x + 4), SG_ERR_INVALID_ARG, "aligned");
  sg_session_destroy(s);
  free(x);
  sg_graph_destroy(g);
}

/* y = x + (c + 1) * 2, and an op nobody needs: folding and dead code. */
static void test_folding_and_dce(void **state) {
  (void)state;
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  int64_t d[] = {4};
  float c[4] = {1, 2, 3, 4};
  sg_tensor x = sg_input(g, "x", SG_F32, 1, d);
  sg_tensor k = sg_mul_scalar(g, sg_add_scalar(g, sg_constant(g, "c", SG_F32, 1, d, c), 1), 2);
  sg_tensor y = sg_add(g, x, k);
  sg_tanh(g, x); /* dead */
  assert_int_equal(sg_tensor_set_name(g, y, "y"), SG_OK);
  assert_int_equal(sg_graph_mark_output(g, y), SG_OK);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  sg_session *s = session(g, 0, 0);
  sg_compile_report r = SG_COMPILE_REPORT_INIT;
  assert_status(sg_session_compile_report(s, &r), SG_OK, NULL);
  assert_int_equal(r.ops_folded, 2);
  assert_int_equal(r.ops_eliminated, 1);
  assert_int_equal(r.ops_scheduled, 1);
  float xv[4] = {10, 20, 30, 40}, out[4];
  assert_status(sg_session_set_input(s, "x", SG_F32, 1, d, xv), SG_OK, NULL);
  assert_status(sg_session_step(s), SG_OK, NULL);
  assert_status(sg_session_read(s, "y", out, sizeof out), SG_OK, NULL);
  for (int i = 0; i < 4; i++) assert_true(out[i] == xv[i] + (c[i] + 1) * 2);
  sg_session_destroy(s);
  sg_graph_destroy(g);
}

static void test_checkpoint(void **state) {
  (void)state;
  char path[] = "/tmp/sgrt-ckpt-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  for (int adamw = 0; adamw < 2; adamw++) {
    sg_graph *g = mlp(adamw, 1); /* with dropout: masks depend on the step */
    sg_session *a = session(g, 0, 3);
    for (int k = 0; k < 2; k++) feed_mlp(a, k), assert_status(sg_session_step(a), SG_OK, NULL);
    assert_status(sg_session_save_checkpoint(a, path), SG_OK, NULL);
    for (int k = 2; k < 4; k++) feed_mlp(a, k), assert_status(sg_session_step(a), SG_OK, NULL);
    size_t na, nb;
    unsigned char *pa = snapshot(g, a, &na);
    /* A fresh session from the checkpoint continues identically: state,
     * optimizer state and the step count are restored. */
    sg_session *b = session(g, 0, 3);
    assert_status(sg_session_load_checkpoint(b, path), SG_OK, NULL);
    assert_int_equal(sg_session_steps(b), 2);
    for (int k = 2; k < 4; k++) feed_mlp(b, k), assert_status(sg_session_step(b), SG_OK, NULL);
    unsigned char *pb = snapshot(g, b, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(pa, pb, na);
    free(pa);
    free(pb);
    sg_session_destroy(a);
    sg_session_destroy(b);
    sg_graph_destroy(g);
  }
  /* A checkpoint of another graph is refused, naming the missing tensor. */
  sg_graph *other = cnn(1);
  sg_session *c = session(other, 0, 0);
  assert_status(sg_session_load_checkpoint(c, path), SG_ERR_NOT_FOUND, "block0.conv");
  assert_status(sg_session_load_checkpoint(c, "/nonexistent/ckpt.sgg"), SG_ERR_IO, NULL);
  sg_session_destroy(c);
  sg_graph_destroy(other);
  remove(path);
}

static void test_misuse(void **state) {
  (void)state;
  sg_graph *g = mlp(0, 0);
  sg_session_params p = SG_SESSION_PARAMS_INIT;
  sg_session *s;
  assert_status(sg_session_create(g, &p, &s), SG_OK, NULL);
  assert_status(sg_session_step(s), SG_ERR_STATE, "compile the session first");
  float lr = 0.1f;
  assert_status(sg_session_set_input(s, "lr", SG_F32, 0, NULL, &lr), SG_ERR_STATE, "compile");
  assert_status(sg_session_compile(s), SG_OK, NULL);
  assert_status(sg_session_compile(s), SG_ERR_STATE, "already compiled");
  float x[B * F] = {0};
  int64_t bad[] = {B + 1, F}, xd[] = {B, F};
  assert_status(sg_session_set_input(s, "x", SG_F32, 2, bad, x), SG_ERR_SHAPE,
                "input 'x' is [8,12] f32, given [9,12] f32");
  assert_status(sg_session_set_input(s, "x", SG_F16, 2, xd, x), SG_ERR_DTYPE, "given [8,12] f16");
  assert_status(sg_session_set_input(s, "nope", SG_F32, 2, xd, x), SG_ERR_NOT_FOUND,
                "no tensor named 'nope'");
  assert_status(sg_session_set_input(s, "w1", SG_F32, 2, xd, x), SG_ERR_INVALID_ARG,
                "is a parameter, not an input");
  assert_status(sg_session_set_input(s, "x", SG_F32, 2, xd, NULL), SG_ERR_INVALID_ARG, "NULL");
  assert_status(sg_session_set_input(s, "x", SG_F32, 2, xd, x), SG_OK, NULL);
  assert_status(sg_session_step(s), SG_ERR_STATE, "input 'y' has not been set");
  /* An evaluation pass reads x (and y for the loss) but not the learning rate. */
  int64_t yv[B] = {0}, yd[] = {B};
  assert_status(sg_session_set_input(s, "y", SG_I64, 1, yd, yv), SG_OK, NULL);
  assert_status(sg_session_forward(s), SG_OK, NULL);
  assert_status(sg_session_step(s), SG_ERR_STATE, "input 'lr' has not been set");
  float w[H * F];
  assert_status(sg_session_read(s, "nope", w, sizeof w), SG_ERR_NOT_FOUND, "'nope'");
  assert_status(sg_session_read(s, "w1", w, sizeof w - 4), SG_ERR_SHAPE, "given 764 bytes");
  assert_status(sg_session_read(s, "w1", w, sizeof w), SG_OK, NULL);
  assert_status(sg_session_write(s, "x", x, sizeof x), SG_ERR_INVALID_ARG, "only parameters and state");
  assert_status(sg_session_write(s, "w1", w, sizeof w), SG_OK, NULL);
  sg_session_destroy(s);
  sg_session_destroy(NULL);

  p.device = "tpu";
  assert_status(sg_session_create(g, &p, &s), SG_ERR_NOT_FOUND, "no device 'tpu'");
  p = (sg_session_params)SG_SESSION_PARAMS_INIT;
  p.size = 8;
  assert_status(sg_session_create(g, &p, &s), SG_ERR_INVALID_ARG, "SG_SESSION_PARAMS_INIT");
  sg_graph_destroy(g);

  /* An unfinalized graph, and a loss that is not a scalar. */
  sg_graph *h;
  assert_int_equal(sg_graph_create(&h), SG_OK);
  int64_t d[] = {3};
  float v[3] = {1, 2, 3};
  sg_tensor pp = sg_parameter(h, "p", SG_F32, 1, d, v);
  sg_tensor sq = sg_mul(h, pp, pp);
  assert_status(sg_session_create(h, NULL, &s), SG_ERR_STATE, "finalize");
  assert_status(sg_graph_backward(h, sq), SG_ERR_SHAPE, "[3] f32");
  sg_graph_destroy(h);
}

/* A loaded graph is immutable; its clone can be trained. */
static void test_clone_loaded_graph(void **state) {
  (void)state;
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  int64_t xd[] = {B, F}, yd[] = {B}, wd[] = {C, F};
  sg_tensor x = sg_input(g, "x", SG_F32, 2, xd);
  sg_tensor y = sg_input(g, "y", SG_I64, 1, yd);
  sg_tensor logits = sg_linear(g, x, param(g, "w", 2, wd, 5, 0.3f), SG_NO_TENSOR);
  assert_int_equal(sg_tensor_set_name(g, logits, "logits"), SG_OK);
  assert_int_equal(sg_graph_mark_output(g, logits), SG_OK);
  (void)y;
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  void *bytes;
  size_t n;
  assert_status(sg_graph_save_to_memory(g, &bytes, &n), SG_OK, NULL);
  sg_graph *loaded, *copy;
  assert_status(sg_graph_load_from_memory(bytes, n, &loaded), SG_OK, NULL);
  sg_free(bytes);
  assert_status(sg_graph_clone(loaded, &copy), SG_OK, NULL);
  sg_graph_destroy(loaded);
  assert_false(sg_graph_is_finalized(copy));
  /* The copy is the same graph... */
  sg_graph *check;
  assert_status(sg_graph_clone(copy, &check), SG_OK, NULL);
  assert_status(sg_graph_finalize(check), SG_OK, NULL);
  uint64_t h1, h2;
  assert_status(sg_graph_hash(g, SG_HASH_WEIGHTS, &h1), SG_OK, NULL);
  assert_status(sg_graph_hash(check, SG_HASH_WEIGHTS, &h2), SG_OK, NULL);
  assert_true(h1 == h2);
  sg_graph_destroy(check);
  /* ...and it takes a loss, a backward pass and an optimizer. */
  sg_tensor lt, yt;
  assert_status(sg_graph_find_tensor(copy, "logits", &lt), SG_OK, NULL);
  assert_status(sg_graph_find_tensor(copy, "y", &yt), SG_OK, NULL);
  sg_tensor loss = sg_cross_entropy(copy, lt, yt, SG_REDUCTION_MEAN);
  assert_int_equal(sg_tensor_set_name(copy, loss, "loss"), SG_OK);
  assert_int_equal(sg_graph_mark_output(copy, loss), SG_OK);
  assert_status(sg_graph_backward(copy, loss), SG_OK, NULL);
  assert_status(sg_graph_add_sgd(copy, sg_input(copy, "lr", SG_F32, 0, NULL), NULL), SG_OK, NULL);
  assert_status(sg_graph_finalize(copy), SG_OK, NULL);
  sg_session *s = session(copy, 0, 0);
  float xv[B * F], lr = 0.5f, w0[C * F], w1[C * F];
  int64_t yv[B] = {0, 1, 2, 3, 4, 0, 1, 2};
  sg_test_fill(xv, B * F, 9);
  assert_status(sg_session_set_input(s, "x", SG_F32, 2, xd, xv), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "y", SG_I64, 1, yd, yv), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "lr", SG_F32, 0, NULL, &lr), SG_OK, NULL);
  assert_status(sg_session_read(s, "w", w0, sizeof w0), SG_OK, NULL);
  assert_status(sg_session_step(s), SG_OK, NULL);
  assert_status(sg_session_read(s, "w", w1, sizeof w1), SG_OK, NULL);
  assert_memory_not_equal(w0, w1, sizeof w0);
  sg_session_destroy(s);
  sg_graph_destroy(copy);
  sg_graph_destroy(g);
  assert_status(sg_graph_clone(NULL, &copy), SG_ERR_INVALID_ARG, "NULL");
}

/* Creating and compiling a session with the Nth allocation failing, for
 * every N until it succeeds: SG_ERR_NO_MEMORY, no crash, no leak (LSan). */
/* What the hooks of runtime/hooks.h saw. */
typedef struct hook_log {
  uint32_t n_before, n_after, next; /* next: the position the next `before` must be */
  uint32_t n;                       /* positions per step */
  bool in_order;
  uint32_t fail_at; /* `after` fails at this position (UINT32_MAX: never) */
} hook_log;

static sg_status log_before(void *ctx, uint32_t pos) {
  hook_log *h = ctx;
  h->in_order = h->in_order && pos == h->next;
  h->n_before++;
  return SG_OK;
}

static sg_status log_after(void *ctx, uint32_t pos) {
  hook_log *h = ctx;
  h->in_order = h->in_order && pos == h->next;
  h->next = (pos + 1) % h->n;
  h->n_after++;
  return pos == h->fail_at ? sg__error(SG_ERR_COMM, "hook failed at %u", pos) : SG_OK;
}

/* Updates scheduled last, hooks around every op and state moved into caller
 * memory change nothing in the arithmetic: three sessions end bitwise equal.
 * The hooks see every position in order, and an error from a hook aborts
 * the step with its status. */
static void test_hooks_and_bound_state(void **state) {
  (void)state;
  sg_graph *g = cnn(3);
  sg_session *a = session(g, 0, 0), *c = session(g, 0, 0), *b;
  sg_session_params p = SG_SESSION_PARAMS_INIT;
  p.threads = 2; /* as session(): oneDNN's results may depend on the thread count */
  assert_status(sg_session_create(g, &p, &b), SG_OK, NULL);
  assert_status(sg__session_set_updates_last(b, true), SG_OK, NULL);
  assert_status(sg_session_compile(b), SG_OK, NULL);
  assert_status(sg__session_set_updates_last(b, false), SG_ERR_STATE, "before compile");

  /* b: every update runs after every other op. */
  uint32_t n;
  const int32_t *order = sg__session_order(b, &n);
  assert_true(n > 0);
  bool seen_update = false;
  for (uint32_t i = 0; i < n; i++) {
    sg_op_kind k = g->ops[order[i]].kind;
    bool upd = k == SG_OP_SGD_UPDATE || k == SG_OP_ADAMW_UPDATE;
    assert_false(seen_update && !upd);
    seen_update = seen_update || upd;
  }
  assert_true(seen_update);
  hook_log log = {0, 0, 0, n, true, UINT32_MAX};
  sg__step_hooks h = {&log, log_before, log_after, NULL, NULL};
  /* A whole step as one pass with the hooks, counted as sg_session_step counts. */
  sg__session_pass hooked = {.begin = 0, .end = n, .hooks = &h, .count_step = true};

  /* c: every parameter, state and optimizer state in caller memory. */
  void *mem[64];
  int n_mem = 0;
  for (int32_t i = 0; i < sg_graph_num_tensors(g); i++) {
    sg_tensor_info in;
    sg_graph_tensor_info(g, (sg_tensor){i}, &in);
    if (in.role != SG_ROLE_PARAMETER && in.role != SG_ROLE_STATE && in.role != SG_ROLE_OPTIMIZER_STATE)
      continue;
    assert_true(n_mem < 64);
    mem[n_mem] = aligned_alloc(64, (in.nbytes + 63) / 64 * 64);
    assert_non_null(mem[n_mem]);
    assert_status(sg_session_bind_state(c, in.name, mem[n_mem], in.nbytes), SG_OK, NULL);
    n_mem++;
  }
  for (int k = 0; k < 3; k++) {
    feed_cnn(a, k), feed_cnn(b, k), feed_cnn(c, k);
    assert_status(sg_session_step(a), SG_OK, NULL);
    assert_status(sg__session_run_pass(b, &hooked), SG_OK, NULL);
    assert_status(sg_session_step(c), SG_OK, NULL);
  }
  assert_true(log.in_order);
  assert_int_equal(log.n_before, 3 * n);
  assert_int_equal(log.n_after, 3 * n);
  size_t na, nb, nc;
  unsigned char *sa = snapshot(g, a, &na), *sb = snapshot(g, b, &nb), *sc = snapshot(g, c, &nc);
  assert_int_equal(na, nb);
  assert_int_equal(na, nc);
  assert_memory_equal(sa, sb, na);
  assert_memory_equal(sa, sc, na);
  /* The bound memory is what the session uses: a write shows there. */
  float w[4 * 4 * 3 * 3];
  memset(w, 0, sizeof w);
  w[5] = 42.0f;
  assert_status(sg_session_write(c, "block0.conv", w, sizeof w), SG_OK, NULL);
  bool found = false;
  for (int i = 0; i < n_mem; i++) found = found || memcmp(mem[i], w, sizeof w) == 0;
  assert_true(found);

  /* A failing hook stops the step with its status. */
  log = (hook_log){0, 0, 0, n, true, 2};
  feed_cnn(b, 3);
  assert_status(sg__session_run_pass(b, &hooked), SG_ERR_COMM, "hook failed at 2");
  assert_int_equal(log.n_after, 3);
  /* Hooks belong to a pass: a plain step after it runs none. */
  assert_status(sg_session_step(b), SG_OK, NULL);

  /* A step run as two partial runs, [0, first update) and the rest, is the
   * same step; a bad range is refused. */
  {
    sg_session *e, *f = session(g, 0, 0);
    assert_status(sg_session_create(g, &p, &e), SG_OK, NULL);
    assert_status(sg__session_set_updates_last(e, true), SG_OK, NULL);
    assert_status(sg_session_compile(e), SG_OK, NULL);
    uint32_t ne, first_update = 0;
    const int32_t *oe = sg__session_order(e, &ne);
    while (first_update < ne && g->ops[oe[first_update]].kind != SG_OP_SGD_UPDATE) first_update++;
    assert_true(first_update > 0 && first_update < ne);
    for (int k = 0; k < 2; k++) {
      feed_cnn(e, k), feed_cnn(f, k);
      sg__session_pass fwd_bwd = {.begin = 0, .end = first_update},
                       updates = {.begin = first_update, .end = ne};
      assert_status(sg__session_run_pass(e, &fwd_bwd), SG_OK, NULL);
      assert_status(sg__session_run_pass(e, &updates), SG_OK, NULL);
      assert_status(sg_session_step(f), SG_OK, NULL);
    }
    size_t n_e, n_f;
    unsigned char *se = snapshot(g, e, &n_e), *sf = snapshot(g, f, &n_f);
    assert_int_equal(n_e, n_f);
    assert_memory_equal(se, sf, n_e);
    free(se);
    free(sf);
    sg__session_pass backwards = {.begin = 3, .end = 2}, too_far = {.begin = 0, .end = ne + 1};
    assert_status(sg__session_run_pass(e, &backwards), SG_ERR_RANGE, "outside");
    assert_status(sg__session_run_pass(e, &too_far), SG_ERR_RANGE, "outside");
    sg_session_destroy(e);
    sg_session_destroy(f);
  }

  /* Bad bindings name what is wrong. */
  float *buf = mem[0];
  assert_status(sg_session_bind_state(c, "block0.conv", buf + 1, sizeof w), SG_ERR_INVALID_ARG, "aligned");
  assert_status(sg_session_bind_state(c, "block0.conv", buf, sizeof w - 4), SG_ERR_SHAPE, "block0.conv");
  assert_status(sg_session_bind_state(c, "x", buf, 2 * 4 * 8 * 8 * 4), SG_ERR_INVALID_ARG, "only parameters");
  assert_status(sg_session_bind_state(c, "nope", buf, 4), SG_ERR_NOT_FOUND, "nope");
  sg_session *fresh;
  assert_status(sg_session_create(g, &p, &fresh), SG_OK, NULL);
  assert_status(sg_session_bind_state(fresh, "block0.conv", buf, sizeof w), SG_ERR_STATE, "compile");
  assert_status(sg__session_run_pass(fresh, &hooked), SG_ERR_STATE, "compiled");
  sg_session_destroy(fresh);

  free(sa);
  free(sb);
  free(sc);
  sg_session_destroy(a);
  sg_session_destroy(b);
  sg_session_destroy(c);
  for (int i = 0; i < n_mem; i++) free(mem[i]);
  sg_graph_destroy(g);
}

static void test_allocation_failures(void **state) {
  (void)state;
  sg_graph *g = mlp(1, 1);
  long n = 0;
  for (;; n++) {
    sg_session_params p = SG_SESSION_PARAMS_INIT;
    p.threads = 1;
    p.poison = 1;
    sg_session *s = NULL;
    sg__alloc_fail_after(n);
    sg_status st = sg_session_create(g, &p, &s);
    if (st == SG_OK) st = sg_session_compile(s);
    sg__alloc_fail_after(-1);
    if (st == SG_OK) {
      feed_mlp(s, 0);
      assert_status(sg_session_step(s), SG_OK, NULL);
      sg_session_destroy(s);
      break;
    }
    assert_int_equal(st, SG_ERR_NO_MEMORY);
    sg_session_destroy(s);
    assert_true(n < 100000);
  }
  printf("session create + compile: %ld allocation points, each failing cleanly\n", n);
  assert_true(n > 10);
  sg_graph_destroy(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_planner),
      cmocka_unit_test(test_poison),
      cmocka_unit_test(test_determinism_and_no_alloc),
      cmocka_unit_test(test_eval_and_binding),
      cmocka_unit_test(test_folding_and_dce),
      cmocka_unit_test(test_checkpoint),
      cmocka_unit_test(test_misuse),
      cmocka_unit_test(test_clone_loaded_graph),
      cmocka_unit_test(test_hooks_and_bound_state),
      cmocka_unit_test(test_allocation_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
