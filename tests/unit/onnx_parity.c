/* Helpers of the ONNX tests against PyTorch (onnx_parity.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_parity.h"
#include "test_util.h"

const char *onnx_test_path(const char *name) {
  static char buf[4096];
  snprintf(buf, sizeof buf, "%s/onnx/%s", SG_TEST_DATA_DIR, name);
  return buf;
}

void *onnx_test_read(const char *name, size_t bytes) {
  size_t n;
  void *p = sg_test_read_file(onnx_test_path(name), &n);
  assert_int_equal(n, bytes);
  return p;
}

sg_graph *onnx_test_import(const char *name) { return onnx_test_import_dims(name, NULL); }

sg_graph *onnx_test_import_dims(const char *name, const char *const *dims) {
  sg_onnx_params p = sg_onnx_params_init();
  p.dims = dims;
  sg_graph *g = NULL;
  assert_status(sg_onnx_import(onnx_test_path(name), &p, &g), SG_OK, NULL);
  assert_true(sg_graph_is_finalized(g));
  return g;
}

sg_session *onnx_test_session(const sg_graph *g) {
  sg_session_params sp = sg_session_params_init();
  sp.threads = 2;
  sg_session *s = NULL;
  assert_status(sg_session_create(g, &sp, &s), SG_OK, NULL);
  assert_status(sg_session_compile(s), SG_OK, NULL);
  return s;
}

int onnx_test_count_ops(const sg_graph *g, sg_op_kind kind) {
  int n = 0;
  for (int32_t i = 0; i < sg_graph_num_ops(g); i++) {
    sg_op_info op;
    assert_status(sg_graph_op_info(g, i, &op), SG_OK, NULL);
    n += op.kind == kind;
  }
  return n;
}

bool onnx_test_verbose(void) { return getenv("SG_TEST_VERBOSE") != NULL; }

/* PyTorch's name of the import's parameter `name`. */
static const char *torch_name(const transformer_case *k, const char *name) {
  for (const char *const *r = k->renames; r && r[0]; r += 2)
    if (strcmp(r[0], name) == 0) return r[1];
  return name;
}

/* The names of g's parameters in PyTorch's reference order (sorted by
 * PyTorch's names). */
static int sorted_parameters(const transformer_case *k, const sg_graph *g, char names[MAX_PARAMS][256]) {
  int n = 0;
  for (int32_t i = 0; i < sg_graph_num_tensors(g); i++) {
    sg_tensor_info info;
    assert_status(sg_graph_tensor_info(g, (sg_tensor){i}, &info), SG_OK, NULL);
    if (info.role != SG_ROLE_PARAMETER) continue;
    assert_true(n < MAX_PARAMS && strlen(info.name) < 256);
    int j = n++;
    for (; j > 0 && strcmp(torch_name(k, names[j - 1]), torch_name(k, info.name)) > 0; j--)
      strcpy(names[j], names[j - 1]);
    strcpy(names[j], info.name);
  }
  return n;
}

double onnx_rel_l2(const float *got, const float *ref, size_t n) {
  double d = 0, r = 0;
  for (size_t i = 0; i < n; i++) {
    d += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
    r += (double)ref[i] * ref[i];
  }
  return sqrt(d) / fmax(sqrt(r), 1e-30);
}

static void set_inputs(const transformer_case *k, sg_session *s) {
  assert_status(sg_session_set_input(s, k->input, k->dtype, k->ndim, k->dims, k->x), SG_OK, NULL);
  if (k->input2)
    assert_status(sg_session_set_input(s, k->input2, k->dtype2, k->ndim2, k->dims2, k->x2), SG_OK, NULL);
}

/* (1) The imported model's forward logits against PyTorch's. */
static void check_logits(const transformer_case *k, const sg_graph *g, const float *ref) {
  size_t n = (size_t)(k->rows * k->classes);
  float *got = malloc(n * sizeof *got);
  sg_session *s = onnx_test_session(g);
  set_inputs(k, s);
  assert_status(sg_session_forward(s), SG_OK, NULL);
  assert_status(sg_session_read(s, k->output ? k->output : "logits", got, n * sizeof *got), SG_OK, NULL);
  double maxdiff = 0, maxref = 0;
  for (size_t i = 0; i < n; i++) {
    maxdiff = fmax(maxdiff, fabs((double)got[i] - ref[i]));
    maxref = fmax(maxref, fabs((double)ref[i]));
  }
  if (onnx_test_verbose()) printf("%s: logits max |diff| %.3g (max |ref| %.3g)\n", k->file, maxdiff, maxref);
  if (!(maxdiff <= 1e-5)) fail_msg("%s: logits max |diff| %g (max |ref| %g)", k->file, maxdiff, maxref);
  sg_session_destroy(s);
  free(got);
}

/* The import with cross entropy over the logits as [rows, classes], its
 * backward, every gradient an output, and SGD (lr an input, momentum 0.9). */
static sg_graph *training_graph(const transformer_case *k, const sg_graph *imported,
                                char names[MAX_PARAMS][256]) {
  sg_graph *g = NULL;
  assert_status(sg_graph_clone(imported, &g), SG_OK, NULL);
  assert_int_equal(sorted_parameters(k, g, names), k->n_params);
  sg_tensor logits;
  assert_status(sg_graph_find_tensor(g, k->output ? k->output : "logits", &logits), SG_OK, NULL);
  int64_t rc[] = {k->rows, k->classes};
  sg_tensor labels = sg_input(g, "labels", SG_I64, 1, &k->rows), lr = sg_input(g, "lr", SG_F32, 0, NULL);
  sg_tensor loss = sg_cross_entropy(g, sg_reshape(g, logits, 2, rc), labels, SG_REDUCTION_MEAN);
  assert_status(sg_tensor_set_name(g, loss, "loss"), SG_OK, NULL);
  assert_status(sg_graph_mark_output(g, loss), SG_OK, NULL);
  assert_status(sg_graph_backward(g, loss), SG_OK, NULL);
  for (int i = 0; i < k->n_params; i++) {
    sg_tensor p, gp;
    assert_status(sg_graph_find_tensor(g, names[i], &p), SG_OK, NULL);
    assert_status(sg_graph_grad(g, p, &gp), SG_OK, NULL);
    assert_status(sg_graph_mark_output(g, gp), SG_OK, NULL);
  }
  sg_sgd_params sgd = sg_sgd_params_init();
  sgd.momentum = 0.9;
  assert_status(sg_graph_add_sgd(g, lr, &sgd), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  return g;
}

/* (2) Every gradient of the first step against PyTorch's (`ref`: the
 * gradients in sorted-name order, n_weights elements in all). */
static void check_gradients(const transformer_case *k, const sg_graph *g, sg_session *s,
                            char names[MAX_PARAMS][256], const float *ref) {
  size_t off = 0;
  double worst = 0;
  const char *worst_name = "";
  for (int i = 0; i < k->n_params; i++) {
    sg_tensor p, gp;
    sg_tensor_info info;
    assert_status(sg_graph_find_tensor(g, names[i], &p), SG_OK, NULL);
    assert_status(sg_graph_grad(g, p, &gp), SG_OK, NULL);
    assert_status(sg_graph_tensor_info(g, gp, &info), SG_OK, NULL);
    assert_true(off + (size_t)info.numel <= k->n_weights);
    float *grad = malloc(info.nbytes);
    assert_status(sg_session_read(s, info.name, grad, info.nbytes), SG_OK, NULL);
    double e = onnx_rel_l2(grad, ref + off, (size_t)info.numel);
    if (!(e <= 1e-4)) fail_msg("%s: d loss / d %s: relative L2 error %g", k->file, names[i], e);
    if (e > worst) worst = e, worst_name = names[i];
    off += (size_t)info.numel;
    free(grad);
  }
  assert_int_equal(off, k->n_weights);
  if (onnx_test_verbose())
    printf("%s: %d gradients, worst relative L2 %.3g (%s)\n", k->file, k->n_params, worst, worst_name);
}

void transformer_parity(const transformer_case *k) {
  size_t n_logits = (size_t)(k->rows * k->classes);
  float *ref = onnx_test_read(k->ref, (n_logits + k->n_weights + 3) * sizeof(float));
  sg_graph *imported = onnx_test_import_dims(k->file, k->sym_dims);
  check_logits(k, imported, ref);
  char names[MAX_PARAMS][256];
  sg_graph *g = training_graph(k, imported, names);
  sg_graph_destroy(imported);
  sg_session *s = onnx_test_session(g);
  const float *losses = ref + n_logits + k->n_weights;
  float rate = 0.1f;
  /* (3) Three SGD steps: each loss is computed before that step's update. */
  for (int step = 0; step < 3; step++) {
    set_inputs(k, s);
    assert_status(sg_session_set_input(s, "labels", SG_I64, 1, &k->rows, k->labels), SG_OK, NULL);
    assert_status(sg_session_set_input(s, "lr", SG_F32, 0, NULL, &rate), SG_OK, NULL);
    assert_status(sg_session_step(s), SG_OK, NULL);
    if (step == 0 && !k->no_gradients) check_gradients(k, g, s, names, ref + n_logits);
    float loss;
    assert_status(sg_session_read(s, "loss", &loss, sizeof loss), SG_OK, NULL);
    double e = fabs((double)loss - losses[step]) / fabs((double)losses[step]);
    if (onnx_test_verbose())
      printf("%s: step %d loss %.7g (PyTorch %.7g, relative %.3g)\n", k->file, step, loss, losses[step], e);
    if (!(e <= 1e-4)) fail_msg("%s: step %d loss %g, PyTorch's %g", k->file, step, loss, losses[step]);
  }
  sg_session_destroy(s);
  sg_graph_destroy(g);
  free(ref);
}

/* A session of g after one forward pass on the inputs (each must be accepted). */
static sg_session *forward_on(const sg_graph *g, int n_inputs, const onnx_input *inputs) {
  sg_session *s = onnx_test_session(g);
  for (int i = 0; i < n_inputs; i++)
    assert_status(sg_session_set_input(s, inputs[i].name, inputs[i].dtype, inputs[i].ndim, inputs[i].dims,
                                       inputs[i].data),
                  SG_OK, inputs[i].name);
  assert_status(sg_session_forward(s), SG_OK, NULL);
  return s;
}

void onnx_forward_matches(const sg_graph *g, int n_inputs, const onnx_input *inputs, const char *output,
                          const char *ref_file, size_t n) {
  float *ref = onnx_test_read(ref_file, n * sizeof(float)), *got = malloc(n * sizeof(float));
  sg_session *s = forward_on(g, n_inputs, inputs);
  assert_status(sg_session_read(s, output, got, n * sizeof(float)), SG_OK, NULL);
  double maxdiff = 0;
  for (size_t i = 0; i < n; i++) maxdiff = fmax(maxdiff, fabs((double)got[i] - ref[i]));
  if (onnx_test_verbose()) printf("%s: max |diff| %.3g\n", ref_file, maxdiff);
  if (!(maxdiff <= 1e-5)) fail_msg("%s: max |diff| %g", ref_file, maxdiff);
  sg_session_destroy(s);
  free(ref);
  free(got);
}

void onnx_outputs_match(const sg_graph *g, const char *what, int n_inputs, const onnx_input *inputs, int n,
                        const char *const *names, const size_t *counts, const char *ref_file, double tol) {
  size_t total = 0;
  for (int i = 0; i < n; i++) total += counts[i];
  float *ref = onnx_test_read(ref_file, total * sizeof(float));
  sg_session *s = forward_on(g, n_inputs, inputs);
  const float *r = ref;
  double worst = 0;
  for (int i = 0; i < n; i++) {
    float got[512];
    assert_true(counts[i] <= 512);
    assert_status(sg_session_read(s, names[i], got, counts[i] * sizeof(float)), SG_OK, names[i]);
    for (size_t j = 0; j < counts[i]; j++) {
      double e = fabs((double)got[j] - r[j]) / fmax(1.0, fabs((double)r[j]));
      worst = fmax(worst, e);
      if (!(e <= tol)) fail_msg("%s: %s[%zu] is %.9g, expected %.9g", what, names[i], j, got[j], r[j]);
    }
    r += counts[i];
  }
  if (onnx_test_verbose()) printf("%s: %d outputs, worst relative error %.3g\n", what, n, worst);
  sg_session_destroy(s);
  free(ref);
}

void onnx_expect_refusals(const onnx_refusal *bad, size_t n) {
  for (size_t k = 0; k < n; k++) {
    sg_onnx_params p = sg_onnx_params_init();
    sg_graph *g = NULL;
    assert_status(sg_onnx_import(onnx_test_path(bad[k].file), &p, &g), bad[k].st, bad[k].needle);
    assert_null(g);
  }
}
