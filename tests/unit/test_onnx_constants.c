/* sg_onnx_params.constants: buffers that arithmetic reads, named by the
 * caller, import as constants (docs/onnx.md "Tensors").
 *
 * buffer_pe.onnx (tests/data/onnx/make_onnx_constants.py, PyTorch 1.13) adds
 * a registered sinusoidal positional encoding `pe` to a linear layer's
 * output and multiplies by (1 + pe / 2): PyTorch exports the buffer as an
 * initializer, as it exports the weights.
 *  - By default `pe` is a parameter: the logits are PyTorch's, but SGD
 *    trains it, so the losses leave PyTorch's (where a buffer is not
 *    trained) from the second step on;
 *  - named in `constants` it is a constant: the logits and three SGD steps'
 *    losses are PyTorch's;
 *  - a name that is no initializer, a value computed by a node, and a batch
 *    norm's running statistic are refused, naming them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#define B 2
#define T 6
#define D 8
#define K 5

static const char *onnx_path(const char *name) {
  static char buf[4096];
  snprintf(buf, sizeof buf, "%s/onnx/%s", SG_TEST_DATA_DIR, name);
  return buf;
}

static void *read_data(const char *name, size_t bytes) {
  size_t n;
  void *p = sg_test_read_file(onnx_path(name), &n);
  assert_int_equal(n, bytes);
  return p;
}

static sg_status import(const char *file, const char *const *constants, sg_graph **g) {
  sg_onnx_params p = sg_onnx_params_init();
  p.constants = constants;
  *g = NULL;
  return sg_onnx_import(onnx_path(file), &p, g);
}

static sg_role role_of(const sg_graph *g, const char *name) {
  sg_tensor t;
  if (sg_graph_find_tensor(g, name, &t) != SG_OK) return SG_ROLE_CONSTANT; /* folded away: a constant */
  sg_tensor_info info;
  assert_status(sg_graph_tensor_info(g, t, &info), SG_OK, NULL);
  return info.role;
}

static int count_parameters(const sg_graph *g) {
  int n = 0;
  for (int32_t i = 0; i < sg_graph_num_tensors(g); i++) {
    sg_tensor_info info;
    assert_status(sg_graph_tensor_info(g, (sg_tensor){i}, &info), SG_OK, NULL);
    n += info.role == SG_ROLE_PARAMETER;
  }
  return n;
}

/* The import's logits, then the losses of three steps of SGD (lr 0.1,
 * momentum 0.9) on cross entropy over them, as make_onnx_constants.py runs
 * PyTorch's. */
static void run(const sg_graph *imported, float *logits, float losses[3]) {
  float *x = read_data("buffer_pe_x.bin", B * T * D * sizeof(float));
  int64_t *labels = read_data("buffer_pe_labels.bin", B * T * sizeof(int64_t));
  sg_graph *g = NULL;
  assert_status(sg_graph_clone(imported, &g), SG_OK, NULL);
  sg_tensor out;
  assert_status(sg_graph_find_tensor(g, "logits", &out), SG_OK, NULL);
  int64_t rows = B * T, rc[] = {B * T, K};
  sg_tensor y = sg_input(g, "labels", SG_I64, 1, &rows), lr = sg_input(g, "lr", SG_F32, 0, NULL);
  sg_tensor loss = sg_cross_entropy(g, sg_reshape(g, out, 2, rc), y, SG_REDUCTION_MEAN);
  assert_status(sg_tensor_set_name(g, loss, "loss"), SG_OK, NULL);
  assert_status(sg_graph_mark_output(g, loss), SG_OK, NULL);
  assert_status(sg_graph_backward(g, loss), SG_OK, NULL);
  sg_sgd_params sgd = sg_sgd_params_init();
  sgd.momentum = 0.9;
  assert_status(sg_graph_add_sgd(g, lr, &sgd), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  sg_session_params sp = sg_session_params_init();
  sp.threads = 2;
  sg_session *s = NULL;
  assert_status(sg_session_create(g, &sp, &s), SG_OK, NULL);
  assert_status(sg_session_compile(s), SG_OK, NULL);
  const int64_t xd[] = {B, T, D};
  const float rate = 0.1f;
  assert_status(sg_session_set_input(s, "x", SG_F32, 3, xd, x), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "labels", SG_I64, 1, &rows, labels), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "lr", SG_F32, 0, NULL, &rate), SG_OK, NULL);
  assert_status(sg_session_forward(s), SG_OK, NULL);
  assert_status(sg_session_read(s, "logits", logits, B * T * K * sizeof(float)), SG_OK, NULL);
  for (int i = 0; i < 3; i++) {
    assert_status(sg_session_step(s), SG_OK, NULL);
    assert_status(sg_session_read(s, "loss", &losses[i], sizeof(float)), SG_OK, NULL);
  }
  sg_session_destroy(s);
  sg_graph_destroy(g);
  free(x);
  free(labels);
}

/* The largest relative difference of the three losses from PyTorch's. */
static double check(const char *what, const sg_graph *g, const float *ref) {
  float logits[B * T * K], losses[3];
  run(g, logits, losses);
  double dl = 0, dloss = 0;
  for (int i = 0; i < B * T * K; i++) dl = fmax(dl, fabs((double)logits[i] - ref[i]));
  for (int i = 0; i < 3; i++)
    dloss = fmax(dloss, fabs((double)losses[i] - ref[B * T * K + i]) / ref[B * T * K + i]);
  printf("%s: logits max |diff| %.2e; losses %.6f %.6f %.6f (PyTorch %.6f %.6f %.6f), worst %.2e relative\n",
         what, dl, losses[0], losses[1], losses[2], ref[B * T * K], ref[B * T * K + 1], ref[B * T * K + 2],
         dloss);
  assert_true(dl <= 1e-5); /* the forward pass is PyTorch's either way */
  return dloss;
}

static void test_buffer_as_constant(void **state) {
  (void)state;
  float *ref = read_data("buffer_pe_ref.bin", (B * T * K + 3) * sizeof(float));
  sg_graph *g;
  assert_status(import("buffer_pe.onnx", NULL, &g), SG_OK, NULL);
  assert_int_equal(role_of(g, "pe"), SG_ROLE_PARAMETER);
  assert_int_equal(count_parameters(g), 5);
  double trained = check("pe a parameter (the default)", g, ref);
  assert_true(trained > 1e-3); /* SGD moved pe, which PyTorch does not train */
  sg_graph_destroy(g);

  const char *const constants[] = {"pe", NULL};
  assert_status(import("buffer_pe.onnx", constants, &g), SG_OK, NULL);
  assert_int_equal(role_of(g, "pe"), SG_ROLE_CONSTANT);
  assert_int_equal(count_parameters(g), 4);
  double kept = check("pe a constant", g, ref);
  assert_true(kept <= 1e-5);
  sg_graph_destroy(g);
  free(ref);
}

static void test_bad_names(void **state) {
  (void)state;
  sg_graph *g = (sg_graph *)&g;
  const char *const unknown[] = {"pe", "rope.cos", NULL};
  assert_status(import("buffer_pe.onnx", unknown, &g), SG_ERR_NOT_FOUND,
                "constants[1]: 'rope.cos' is no initializer of the model");
  assert_null(g);
  const char *const computed[] = {"logits", NULL};
  assert_status(import("buffer_pe.onnx", computed, &g), SG_ERR_NOT_FOUND,
                "computed by a node or is a graph input");
  const char *const input[] = {"x", NULL};
  assert_status(import("buffer_pe.onnx", input, &g), SG_ERR_NOT_FOUND, "'x' is no initializer");
  const char *const state_name[] = {"bn1.running_mean", NULL};
  assert_status(import("cnn_train.onnx", state_name, &g), SG_ERR_INVALID_ARG, "running statistic (state)");
  assert_null(g);
  /* An empty list is no list. */
  const char *const none[] = {NULL};
  assert_status(import("buffer_pe.onnx", none, &g), SG_OK, NULL);
  assert_int_equal(role_of(g, "pe"), SG_ROLE_PARAMETER);
  sg_graph_destroy(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_buffer_as_constant),
      cmocka_unit_test(test_bad_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
