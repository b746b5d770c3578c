/* Hugging Face transformers models exported to ONNX (tiny configs with
 * random weights; models and PyTorch 2.15's results written by
 * tests/data/onnx/make_onnx_dynamo.py's make_hf, forms by make_dyn_forms2):
 *  - Llama (RoPE, grouped-query attention, RMSNorm, SwiGLU) exported by the
 *    dynamo exporter unoptimised, with an attention_mask: the causal mask
 *    And the padding mask (at run time), the padding mask indexed by
 *    GatherND, the rotary tables as Cos and Sin of constant angles; trains
 *    with PyTorch's logits, gradients and losses;
 *  - RoBERTa by the default (optimised) dynamo export: GatherElements of its
 *    all-zero token_type_ids buffer by the run-time position ids; PyTorch's
 *    logits;
 *  - GPT-2 by torch 2.15's TorchScript exporter: the masks' And at run time;
 *    PyTorch's logits;
 *  - hand-made And, Or, Xor (at run time, broadcast, and folded), Sin and
 *    Cos of constants, GatherND of a tensor and of a constant, GatherElements
 *    folded and of a uniform buffer, against NumPy; and the refused forms. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_parity.h"
#include "test_util.h"

typedef struct hf_inputs {
  int64_t *ids, *mask;
} hf_inputs;

static hf_inputs read_inputs(const char *ids, const char *mask) {
  return (hf_inputs){onnx_test_read(ids, 16 * sizeof(int64_t)), onnx_test_read(mask, 16 * sizeof(int64_t))};
}

static void free_inputs(hf_inputs in) {
  free(in.ids);
  free(in.mask);
}

static void test_llama(void **state) {
  (void)state;
  hf_inputs in = read_inputs("hf_llama_ids.i64", "hf_llama_mask.i64");
  sg_graph *g = onnx_test_import("hf_llama_noopt.onnx");
  assert_true(onnx_test_count_ops(g, SG_OP_MUL) > 0);
  sg_graph_destroy(g);
  int64_t labels[16];
  for (int i = 0; i < 16; i++) labels[i] = i % 5;
  transformer_case k = {.file = "hf_llama_noopt.onnx",
                        .ref = "hf_llama_ref.f32",
                        .input = "input_ids",
                        .dtype = SG_I64,
                        .ndim = 2,
                        .dims = {2, 8},
                        .x = in.ids,
                        .input2 = "attention_mask",
                        .dtype2 = SG_I64,
                        .ndim2 = 2,
                        .dims2 = {2, 8},
                        .x2 = in.mask,
                        .labels = labels,
                        .rows = 16,
                        .classes = 64,
                        .n_params = 21,
                        .n_weights = 22688,
                        .output = "linear_14"};
  transformer_parity(&k);
  free_inputs(in);
}

static void logits_match(const char *file, const char *ids, const char *mask, const char *output,
                         const char *ref) {
  hf_inputs in = read_inputs(ids, mask);
  sg_graph *g = onnx_test_import(file);
  onnx_input x[2] = {{"input_ids", SG_I64, 2, {2, 8}, in.ids},
                     {"attention_mask", SG_I64, 2, {2, 8}, in.mask}};
  onnx_forward_matches(g, 2, x, output, ref, 2 * 8 * 64);
  sg_graph_destroy(g);
  free_inputs(in);
}

static void test_roberta(void **state) {
  (void)state;
  logits_match("hf_roberta_dyn.onnx", "hf_roberta_ids.i64", "hf_roberta_mask.i64", "linear_13",
               "hf_roberta_logits.f32");
}

static void test_gpt2_torchscript(void **state) {
  (void)state;
  logits_match("hf_gpt2_ts.onnx", "hf_gpt2_ids.i64", "hf_gpt2_mask.i64", "logits", "hf_gpt2_logits.f32");
}

/* Every value as NumPy's, bit for bit; Sin and Cos within 2 ulp (the C
 * library's sinf and NumPy's float32 sine differ by one at sin(3.14159)). */
static void test_forms(void **state) {
  (void)state;
  static const char *const names[] = {"and_ab", "or_ab", "xor_ab", "and_c", "or_ac", "sin_c",
                                      "cos_c",  "gnd_x", "gnd_x3", "gnd_c", "ge_c",  "ge_uniform"};
  static const size_t counts[] = {6, 6, 6, 4, 6, 6, 6, 12, 2, 3, 4, 10};
  uint8_t *a = onnx_test_read("dyn_forms2_a.u8", 6), *b = onnx_test_read("dyn_forms2_b.u8", 3);
  float *x = onnx_test_read("dyn_forms2_x.f32", 24 * sizeof(float));
  int64_t *ids = onnx_test_read("dyn_forms2_ids.i64", 10 * sizeof(int64_t));
  float *y = onnx_test_read("dyn_forms2_y.f32", 71 * sizeof(float)), got[12];
  sg_graph *g = onnx_test_import("dyn_forms2.onnx");
  sg_session *s = onnx_test_session(g);
  int64_t da[] = {2, 3}, db[] = {3}, dx[] = {2, 3, 4}, dids[] = {2, 5};
  assert_status(sg_session_set_input(s, "a", SG_BOOL, 2, da, a), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "b", SG_BOOL, 1, db, b), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "x", SG_F32, 3, dx, x), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "ids", SG_I64, 2, dids, ids), SG_OK, NULL);
  assert_status(sg_session_forward(s), SG_OK, NULL);
  size_t off = 0;
  for (size_t k = 0; k < sizeof counts / sizeof *counts; off += counts[k++]) {
    assert_status(sg_session_read(s, names[k], got, counts[k] * sizeof(float)), SG_OK, names[k]);
    bool trig = strcmp(names[k], "sin_c") == 0 || strcmp(names[k], "cos_c") == 0;
    for (size_t e = 0; e < counts[k]; e++) {
      bool ok = trig ? sg_test_close_ulp(got[e], y[off + e]) : sg_test_same_bits(got[e], y[off + e]);
      if (!ok) fail_msg("%s[%zu] is %.9g, expected %.9g", names[k], e, (double)got[e], (double)y[off + e]);
    }
  }
  assert_int_equal(off, 71);
  sg_session_destroy(s);
  sg_graph_destroy(g);
  free(a);
  free(b);
  free(x);
  free(ids);
  free(y);
}

/* Sin of a run-time input: the sin op, within an ulp of sin in double. */
static void test_sin_runtime(void **state) {
  (void)state;
  const float x[] = {0.0f, 1.0f, -2.5f, 3.14159265f, 100.0f, -0.125f};
  float y[6];
  sg_graph *g = onnx_test_import("sin_runtime.onnx");
  assert_int_equal(onnx_test_count_ops(g, SG_OP_SIN), 1);
  sg_session *s = onnx_test_session(g);
  int64_t dx[] = {2, 3};
  assert_status(sg_session_set_input(s, "x", SG_F32, 2, dx, x), SG_OK, NULL);
  assert_status(sg_session_forward(s), SG_OK, NULL);
  assert_status(sg_session_read(s, "y", y, sizeof y), SG_OK, NULL);
  for (int i = 0; i < 6; i++)
    if (!sg_test_close_ulp(y[i], (float)sin((double)x[i])))
      fail_msg("sin(%g) is %.9g, expected %.9g", (double)x[i], (double)y[i], sin((double)x[i]));
  sg_session_destroy(s);
  sg_graph_destroy(g);
}

static void test_refused(void **state) {
  (void)state;
  static const onnx_refusal bad[] = {
      {"bad_gathernd_runtime_idx.onnx", SG_ERR_UNSUPPORTED,
       "(GatherND): indices 'idx' are computed at run time with tuples of 2; sgrt gathers by run-time "
       "indices "
       "only rows of the first dim"},
      {"bad_gathernd_batch_dims.onnx", SG_ERR_UNSUPPORTED, "batch_dims is 1; sgrt's GatherND takes 0"},
      {"bad_gather_elements_runtime.onnx", SG_ERR_UNSUPPORTED, "every element of data 'ge_d' is one value"},
      {"bad_and_float.onnx", SG_ERR_DTYPE, "(And): input 'x' has data type 1; And takes BOOL (9)"},
  };
  onnx_expect_refusals(bad, sizeof bad / sizeof *bad);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_llama),
      cmocka_unit_test(test_roberta),
      cmocka_unit_test(test_gpt2_torchscript),
      cmocka_unit_test(test_forms),
      cmocka_unit_test(test_sin_runtime),
      cmocka_unit_test(test_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
