/* The session layout of runtime/hooks.h, set before compile: unbacked state
 * (sg__session_set_unbacked). A tensor left without memory costs no bytes of
 * the persistent region, has no address, refuses reads and writes naming
 * why, and once bound to caller memory starts at zero; a session trained so
 * ends bit-identical to a plain one (an independent run: nothing unbacked).
 * Only parameters and state may be unbacked, and only before compile. Also:
 * the schedule that sg__plan_schedule gives without planning memory is the
 * one the session runs. */
#include <stdlib.h>
#include <string.h>

#include "compile/plan.h"
#include "core/core.h"
#include "runtime/hooks.h"
#include "test_util.h"

enum { B = 4, F = 6, H = 8, C = 3, STEPS = 3 };

static sg_tensor param(sg_graph *g, const char *name, int64_t rows, int64_t cols, uint64_t seed) {
  float v[H * F];
  sg_test_fill(v, (size_t)(rows * cols), seed);
  for (int64_t i = 0; i < rows * cols; i++) v[i] *= 0.4f;
  int64_t d[] = {rows, cols};
  return sg_parameter(g, name, SG_F32, 2, d, v);
}

/* x -> linear(w1) -> relu -> linear(w2) -> cross entropy; SGD, momentum 0.9. */
static sg_graph *mlp(void) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  int64_t xd[] = {B, F}, yd[] = {B};
  sg_tensor x = sg_input(g, "x", SG_F32, 2, xd);
  sg_tensor y = sg_input(g, "y", SG_I64, 1, yd);
  sg_tensor lr = sg_input(g, "lr", SG_F32, 0, NULL);
  sg_tensor h = sg_relu(g, sg_linear(g, x, param(g, "w1", H, F, 1), SG_NO_TENSOR));
  sg_tensor logits = sg_linear(g, h, param(g, "w2", C, H, 2), SG_NO_TENSOR);
  sg_tensor loss = sg_cross_entropy(g, logits, y, SG_REDUCTION_MEAN);
  assert_int_equal(sg_tensor_set_name(g, loss, "loss"), SG_OK);
  assert_int_equal(sg_graph_mark_output(g, loss), SG_OK);
  assert_int_equal(sg_graph_backward(g, loss), SG_OK);
  sg_sgd_params sp = SG_SGD_PARAMS_INIT;
  sp.momentum = 0.9;
  assert_int_equal(sg_graph_add_sgd(g, lr, &sp), SG_OK);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  return g;
}

static int32_t id_of(const sg_graph *g, const char *name) {
  sg_tensor t;
  assert_status(sg_graph_find_tensor(g, name, &t), SG_OK, NULL);
  return t.id;
}

/* A compiled one-thread session, updates last, with `unbacked` (may be NULL). */
static sg_session *open_session(const sg_graph *g, const uint8_t *unbacked) {
  sg_session_params p = SG_SESSION_PARAMS_INIT;
  p.threads = 1;
  sg_session *s;
  assert_status(sg_session_create(g, &p, &s), SG_OK, NULL);
  assert_status(sg__session_set_updates_last(s, true), SG_OK, NULL);
  assert_status(sg__session_set_unbacked(s, unbacked), SG_OK, NULL);
  assert_status(sg_session_compile(s), SG_OK, NULL);
  return s;
}

static void train(sg_session *s) {
  float x[B * F], lr = 0.1f;
  int64_t y[B] = {0, 1, 2, 1}, xd[] = {B, F}, yd[] = {B};
  for (int k = 0; k < STEPS; k++) {
    sg_test_fill(x, B * F, 10 + (uint64_t)k);
    assert_status(sg_session_set_input(s, "x", SG_F32, 2, xd, x), SG_OK, NULL);
    assert_status(sg_session_set_input(s, "y", SG_I64, 1, yd, y), SG_OK, NULL);
    assert_status(sg_session_set_input(s, "lr", SG_F32, 0, NULL, &lr), SG_OK, NULL);
    assert_status(sg_session_step(s), SG_OK, NULL);
  }
}

static void test_unbacked_state(void **state) {
  (void)state;
  sg_graph *g = mlp();
  int32_t nt = sg_graph_num_tensors(g), buf = id_of(g, "w1.momentum_buffer");
  uint8_t *mask = calloc((size_t)nt, 1);
  assert_non_null(mask);

  /* Only parameters and state; only before compile. */
  mask[id_of(g, "x")] = 1;
  sg_session_params p = SG_SESSION_PARAMS_INIT;
  p.threads = 1;
  sg_session *s;
  assert_status(sg_session_create(g, &p, &s), SG_OK, NULL);
  assert_status(sg__session_set_unbacked(s, mask), SG_ERR_INVALID_ARG, "not 'x' (input)");
  sg_session_destroy(s);
  memset(mask, 0, (size_t)nt);
  mask[buf] = 1;

  sg_session *plain = open_session(g, NULL);
  s = open_session(g, mask);
  mask[buf] = 0; /* the session keeps a copy */
  assert_status(sg__session_set_unbacked(s, NULL), SG_ERR_STATE, "before compile");

  /* No bytes, no address, reads and writes refused. */
  sg_compile_report rp = SG_COMPILE_REPORT_INIT, ru = SG_COMPILE_REPORT_INIT;
  assert_status(sg_session_compile_report(plain, &rp), SG_OK, NULL);
  assert_status(sg_session_compile_report(s, &ru), SG_OK, NULL);
  assert_int_equal(rp.persistent_bytes - ru.persistent_bytes, (H * F * 4 + 63) / 64 * 64);
  size_t bytes = 1;
  assert_null(sg__session_tensor_addr(s, buf, &bytes));
  assert_int_equal(bytes, 0);
  float m[H * F];
  assert_status(sg_session_read(s, "w1.momentum_buffer", m, sizeof m), SG_ERR_STATE, "has no memory");
  assert_status(sg_session_write(s, "w1.momentum_buffer", m, sizeof m), SG_ERR_STATE, "has no memory");

  /* Bound to caller memory, it starts at zero and trains as in a plain session. */
  float *mem = aligned_alloc(64, sizeof m);
  assert_non_null(mem);
  for (int i = 0; i < H * F; i++) mem[i] = 99.0f;
  assert_status(sg_session_bind_state(s, "w1.momentum_buffer", mem, sizeof m), SG_OK, NULL);
  for (int i = 0; i < H * F; i++) assert_true(mem[i] == 0.0f);
  assert_ptr_equal(sg__session_tensor_addr(s, buf, NULL), mem);
  train(plain);
  train(s);
  const char *kept[] = {"w1", "w2", "w1.momentum_buffer", "w2.momentum_buffer"};
  for (int k = 0; k < 4; k++) {
    float a[H * F], b[H * F];
    sg_tensor_info in;
    assert_status(sg_graph_tensor_info(g, (sg_tensor){id_of(g, kept[k])}, &in), SG_OK, NULL);
    assert_status(sg_session_read(plain, kept[k], a, in.nbytes), SG_OK, NULL);
    assert_status(sg_session_read(s, kept[k], b, in.nbytes), SG_OK, NULL);
    assert_memory_equal(a, b, in.nbytes);
  }
  sg_session_destroy(s);
  sg_session_destroy(plain);
  free(mem);
  free(mask);
  sg_graph_destroy(g);
}

static void test_schedule_without_memory(void **state) {
  (void)state;
  sg_graph *g = mlp();
  sg_session *s = open_session(g, NULL);
  sg__plan_options opt = {0};
  opt.updates_last = true;
  int32_t *order;
  uint32_t n, n_s;
  assert_status(sg__plan_schedule(g, &opt, &order, &n), SG_OK, NULL);
  const int32_t *session_order = sg__session_order(s, &n_s);
  assert_int_equal(n, n_s);
  assert_memory_equal(order, session_order, n * sizeof *order);
  sg__free(order);
  sg_session_destroy(s);
  sg_graph_destroy(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unbacked_state),
      cmocka_unit_test(test_schedule_without_memory),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
