/* PyTorch 2's default ONNX exporter (torch.onnx.export(..., dynamo=True);
 * models and PyTorch 2.15's results written by
 * tests/data/onnx/make_onnx_dynamo.py) and ONNX external data:
 *  - unoptimised exports (optimize=False: CastLike, SplitToSequence and
 *    SequenceAt) of nanoGPT, a llama-style stack (RoPE, grouped-query
 *    attention, RMSNorm, SwiGLU, scaled_dot_product_attention) and
 *    nn.TransformerEncoderLayer train with PyTorch's logits, gradients and
 *    losses (onnx_parity.h), their weights read from the exporter's .data;
 *  - the optimised export of the same GPT (the default): torch.export's
 *    metadata keeps lifted scalars and masks constant and re-ties lm_head's
 *    folded transposed copy to the token embedding, so it has PyTorch's 28
 *    parameters and trains with its losses;
 *  - an optimised export whose LayerNorms the exporter merged (equal initial
 *    values) gives PyTorch's logits and warns that merged parameters train
 *    as one;
 *  - a dynamic batch (causal mask built at run time from lifted constants),
 *    a bool attention mask (IsNaN), torch 2.15's TorchScript path (Mod);
 *  - hand-made IsNaN, Mod, CastLike and sequence forms against NumPy, and
 *    the refused ones;
 *  - external data: the same weights as inline, a model found by a relative
 *    path, refused from memory, a symbolic link out of the model's folder and
 *    every malformed entry refused with the status and words expected. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "onnx_parity.h"
#include "test_util.h"

/* ---- unoptimised exports against PyTorch ------------------------------------ */

/* nanoGPT: the tied weight is written once, as "lm_head.weight"; PyTorch's
 * reference names it wte.weight. x.split(n, 2) is SplitToSequence and three
 * SequenceAt per layer: three slices. */
static const char *const gpt_renames[] = {"lm_head.weight", "wte.weight", NULL};

static transformer_case gpt_case(const char *file, const int64_t *ids) {
  return (transformer_case){.file = file,
                            .ref = "dyn_gpt_ref.f32",
                            .input = "idx",
                            .dtype = SG_I64,
                            .ndim = 2,
                            .dims = {2, 16},
                            .x = ids,
                            .labels = ids + 32,
                            .rows = 32,
                            .classes = 64,
                            .n_params = 28,
                            .n_weights = 28032,
                            .output = "linear_8",
                            .renames = gpt_renames};
}

static void test_gpt_noopt(void **state) {
  (void)state;
  int64_t *ids = onnx_test_read("dyn_gpt_ids.i64", 64 * sizeof(int64_t));
  sg_graph *g = onnx_test_import("dyn_gpt_noopt.onnx");
  assert_int_equal(onnx_test_count_ops(g, SG_OP_SLICE), 2 * 3);
  assert_int_equal(onnx_test_count_ops(g, SG_OP_EMBEDDING), 2);
  sg_graph_destroy(g);
  transformer_case k = gpt_case("dyn_gpt_noopt.onnx", ids);
  transformer_parity(&k);
  free(ids);
}

/* The default export of the same model: its parameters are folded and
 * renamed (val_N), so gradients are not compared by name; the parameter
 * count (the tie kept), the logits and three SGD losses are. */
static void test_gpt_opt(void **state) {
  (void)state;
  int64_t *ids = onnx_test_read("dyn_gpt_ids.i64", 64 * sizeof(int64_t));
  sg_graph *g = onnx_test_import("dyn_gpt_opt.onnx");
  /* lm_head's folded copy is the embedding's transpose, not a weight. */
  sg_tensor t;
  sg_tensor_info info;
  assert_status(sg_graph_find_tensor(g, "val_84", &t), SG_OK, NULL);
  assert_status(sg_graph_tensor_info(g, t, &info), SG_OK, NULL);
  assert_true(info.role != SG_ROLE_PARAMETER && info.producer >= 0);
  sg_op_info op;
  assert_status(sg_graph_op_info(g, info.producer, &op), SG_OK, NULL);
  assert_int_equal(op.kind, SG_OP_TRANSPOSE);
  sg_graph_destroy(g);
  transformer_case k = gpt_case("dyn_gpt_opt.onnx", ids);
  k.no_gradients = true;
  transformer_parity(&k);
  free(ids);
}

static void test_llama_noopt(void **state) {
  (void)state;
  int64_t *ids = onnx_test_read("dyn_llama_x.i64", 64 * sizeof(int64_t));
  transformer_case k = {.file = "dyn_llama_noopt.onnx",
                        .ref = "dyn_llama_ref.f32",
                        .input = "idx",
                        .dtype = SG_I64,
                        .ndim = 2,
                        .dims = {2, 16},
                        .x = ids,
                        .labels = ids + 32,
                        .rows = 32,
                        .classes = 64,
                        .n_params = 21,
                        .n_weights = 22688,
                        .output = "linear_14"};
  transformer_parity(&k);
  free(ids);
}

static void test_encoder_noopt(void **state) {
  (void)state;
  float *x = onnx_test_read("dyn_encoder_x.f32", 2 * 8 * 32 * sizeof(float));
  int64_t labels[16];
  for (int i = 0; i < 16; i++) labels[i] = i % 5;
  transformer_case k = {.file = "dyn_encoder_noopt.onnx",
                        .ref = "dyn_encoder_ref.f32",
                        .input = "x",
                        .dtype = SG_F32,
                        .ndim = 3,
                        .dims = {2, 8, 32},
                        .x = x,
                        .labels = labels,
                        .rows = 16,
                        .classes = 5,
                        .n_params = 14,
                        .n_weights = 8709,
                        .output = "linear_4"};
  transformer_parity(&k);
  free(x);
}

/* scaled_dot_product_attention with a bool mask: the exporter adds
 * Where(mask, 0, float32's lowest) to the scores and zeroes NaN rows of the
 * softmax (IsNaN, Where). A wholly masked query row is uniform under the
 * graph's semantics, where PyTorch gives it no attention: the reference is
 * PyTorch's with that float mask (the graph's meaning), and the graph's
 * output differs from PyTorch's bool-mask one in that row only. The default
 * (optimised) export: gradients are not compared by name. */
static void test_sdpa_bool_mask(void **state) {
  (void)state;
  float *x = onnx_test_read("dyn_sdpa_boolmask_x.f32", 256 * sizeof(float));
  uint8_t *mask = onnx_test_read("dyn_sdpa_boolmask_mask.u8", 128);
  int64_t labels[16];
  for (int i = 0; i < 16; i++) labels[i] = i % 5;
  transformer_case k = {.file = "dyn_sdpa_boolmask.onnx",
                        .ref = "dyn_sdpa_boolmask_ref.f32",
                        .input = "x",
                        .dtype = SG_F32,
                        .ndim = 3,
                        .dims = {2, 8, 16},
                        .x = x,
                        .input2 = "mask",
                        .dtype2 = SG_BOOL,
                        .ndim2 = 4,
                        .dims2 = {2, 1, 8, 8},
                        .x2 = mask,
                        .labels = labels,
                        .rows = 16,
                        .classes = 16,
                        .n_params = 4,
                        .n_weights = 1088,
                        .output = "linear_1",
                        .no_gradients = true}; /* optimised: weights stored transposed as val_N */
  transformer_parity(&k);
  free(x);
  free(mask);
}

/* ---- eval outputs ------------------------------------------------------------- */

/* The forward output of g on one input against `ref_file`. */
static void forward_matches(const sg_graph *g, const char *input, sg_dtype dt, int ndim, const int64_t *dims,
                            const void *x, const char *output, const char *ref_file, size_t n) {
  onnx_input in = {input, dt, ndim, {0}, x};
  memcpy(in.dims, dims, (size_t)ndim * sizeof *dims);
  onnx_forward_matches(g, 1, &in, output, ref_file, n);
}

/* A batch dim exported dynamic ("batch"): the causal mask is built at run
 * time from lifted constants (Expand, Trilu, Equal, Where), which the
 * metadata marks as constants, so it folds once the batch is given. */
static void test_dynamic_batch(void **state) {
  (void)state;
  int64_t *ids = onnx_test_read("dyn_gpt_ids.i64", 64 * sizeof(int64_t));
  sg_onnx_params p = sg_onnx_params_init();
  sg_graph *g = NULL;
  assert_status(sg_onnx_import(onnx_test_path("dyn_gpt_sdpa_dynbatch.onnx"), &p, &g), SG_ERR_SHAPE, "batch");
  p.batch = 2;
  assert_status(sg_onnx_import(onnx_test_path("dyn_gpt_sdpa_dynbatch.onnx"), &p, &g), SG_OK, NULL);
  int64_t dims[] = {2, 16};
  forward_matches(g, "idx", SG_I64, 2, dims, ids, "linear_8", "dyn_gpt_sdpa_dynbatch_logits.f32", 2048);
  sg_graph_destroy(g);
  free(ids);
}

/* torch 2.15's TorchScript exporter writes Mod (of constants) in
 * nn.MultiheadAttention. */
static void test_torchscript_mod(void **state) {
  (void)state;
  float *x = onnx_test_read("dyn_mha_ts2_x.f32", 512 * sizeof(float));
  sg_graph *g = onnx_test_import("dyn_mha_ts2.onnx");
  int64_t dims[] = {2, 8, 32};
  forward_matches(g, "x", SG_F32, 3, dims, x, "y", "dyn_mha_ts2_y.f32", 80);
  sg_graph_destroy(g);
  free(x);
}

/* Hand-made forms (make_onnx_dynamo.py's make_dyn_forms, NumPy's values):
 * IsNaN at run time (NaN, infinities, zeros of both signs, a subnormal) and
 * folded, Mod folded with both sign rules and for floats, CastLike at run
 * time and folded, SplitToSequence (a scalar split, sizes, no split with
 * keepdims 0) with SequenceAt at positive and negative positions, of a
 * tensor and of a constant. Every value exact. */
static void test_forms(void **state) {
  (void)state;
  static const char *const names[] = {"isnan_x",    "isnan_c", "mod_py", "mod_c", "mod_f", "castlike_xi",
                                      "castlike_c", "seq_a",   "seq_b",  "seq_c", "seq_d", "seq_cast"};
  static const size_t counts[] = {12, 5, 6, 6, 4, 12, 3, 8, 4, 6, 2, 2};
  float *x = onnx_test_read("dyn_forms_x.f32", 12 * sizeof(float)),
        *z = onnx_test_read("dyn_forms_z.f32", 48);
  int64_t *i = onnx_test_read("dyn_forms_i.i64", 12 * sizeof(int64_t));
  float *y = onnx_test_read("dyn_forms_y.f32", 70 * sizeof(float)), got[12];
  sg_graph *g = onnx_test_import("dyn_forms.onnx");
  sg_session *s = onnx_test_session(g);
  int64_t dims[] = {2, 6};
  assert_status(sg_session_set_input(s, "x", SG_F32, 2, dims, x), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "i", SG_I64, 2, dims, i), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "z", SG_F32, 2, dims, z), SG_OK, NULL);
  assert_status(sg_session_forward(s), SG_OK, NULL);
  size_t off = 0;
  for (size_t k = 0; k < sizeof counts / sizeof *counts; off += counts[k++]) {
    assert_status(sg_session_read(s, names[k], got, counts[k] * sizeof(float)), SG_OK, names[k]);
    for (size_t e = 0; e < counts[k]; e++)
      if (!sg_test_same_bits(got[e], y[off + e]))
        fail_msg("%s[%zu] is %g, expected %g", names[k], e, (double)got[e], (double)y[off + e]);
  }
  assert_int_equal(off, 70);
  sg_session_destroy(s);
  sg_graph_destroy(g);
  free(x);
  free(z);
  free(i);
  free(y);
}

static void test_bad_forms(void **state) {
  (void)state;
  static const onnx_refusal bad[] = {
      {"bad_mod_runtime.onnx", SG_ERR_UNSUPPORTED, "(Mod): input A 'i' is computed at run time"},
      {"bad_mod_float_fmod0.onnx", SG_ERR_ATTRIBUTE, "Mod of floats needs fmod = 1"},
      {"bad_sequence_at_runtime.onnx", SG_ERR_UNSUPPORTED, "position 'pos' is computed at run time"},
      {"bad_sequence_use.onnx", SG_ERR_UNSUPPORTED,
       "(ConcatFromSequence): op 'ConcatFromSequence' is not supported"},
  };
  onnx_expect_refusals(bad, sizeof bad / sizeof *bad);
}

/* Runs fn with the library's stderr in a file; returns what it wrote (free it). */
static char *capture_stderr(void (*fn)(void *), void *arg) {
  char path[] = "/tmp/sg_test_stderr_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  fflush(stderr);
  int saved = dup(2);
  assert_true(saved >= 0 && dup2(fd, 2) >= 0);
  sg_log_level level = sg_log_get_level();
  sg_log_set_level(SG_LOG_WARN);
  fn(arg);
  sg_log_set_level(level);
  fflush(stderr);
  assert_true(dup2(saved, 2) >= 0);
  close(saved);
  close(fd);
  size_t n;
  char *text = (char *)sg_test_read_file(path, &n);
  unlink(path);
  char *z = realloc(text, n + 1);
  assert_non_null(z);
  z[n] = '\0';
  return z;
}

static void import_dedup(void *out) {
  sg_onnx_params p = sg_onnx_params_init();
  assert_status(sg_onnx_import(onnx_test_path("dyn_gpt_dedup.onnx"), &p, (sg_graph **)out), SG_OK, NULL);
}

/* LayerNorms at their initial 1 and 0 merged by the exporter's optimizer:
 * the logits are PyTorch's, but 8 of the parameters are gone, and the import
 * says so. */
static void test_merged_parameters(void **state) {
  (void)state;
  sg_graph *g = NULL;
  char *log = capture_stderr(import_dedup, &g);
  if (strstr(log, "optimize=False") == NULL || strstr(log, "9 of the 29 parameters") == NULL)
    fail_msg("no warning about merged parameters; stderr: %s", log);
  free(log);
  int n = 0;
  for (int32_t i = 0; i < sg_graph_num_tensors(g); i++) {
    sg_tensor_info info;
    assert_status(sg_graph_tensor_info(g, (sg_tensor){i}, &info), SG_OK, NULL);
    n += info.role == SG_ROLE_PARAMETER;
  }
  assert_int_equal(n, 20);
  int64_t *ids = onnx_test_read("dyn_gpt_ids.i64", 64 * sizeof(int64_t));
  int64_t dims[] = {2, 16};
  forward_matches(g, "idx", SG_I64, 2, dims, ids, "linear_8", "dyn_gpt_dedup_logits.f32", 2048);
  sg_graph_destroy(g);
  free(ids);
}

/* ---- external data -------------------------------------------------------------- */

static void same_parameters(const sg_graph *a, const sg_graph *b) {
  int n = 0;
  for (int32_t i = 0; i < sg_graph_num_tensors(a); i++) {
    sg_tensor_info ia, ib;
    sg_tensor t;
    assert_status(sg_graph_tensor_info(a, (sg_tensor){i}, &ia), SG_OK, NULL);
    if (ia.role != SG_ROLE_PARAMETER) continue;
    assert_status(sg_graph_find_tensor(b, ia.name, &t), SG_OK, ia.name);
    assert_status(sg_graph_tensor_info(b, t, &ib), SG_OK, NULL);
    assert_int_equal(ia.nbytes, ib.nbytes);
    assert_memory_equal(ia.data, ib.data, ia.nbytes);
    n++;
  }
  assert_int_equal(n, 2);
}

/* Linear(4, 3) with its weight and bias in dyn_linear_ext.onnx.data: the
 * same parameters and outputs as the inline copy; also found by a path
 * relative to the working directory; refused from memory, where no folder
 * holds the file. */
static void test_external_data(void **state) {
  (void)state;
  float *x = onnx_test_read("dyn_linear_x.f32", 8 * sizeof(float));
  sg_graph *ext = onnx_test_import("dyn_linear_ext.onnx"), *in = onnx_test_import("dyn_linear_inline.onnx");
  same_parameters(ext, in);
  int64_t dims[] = {2, 4};
  forward_matches(ext, "input", SG_F32, 2, dims, x, "linear", "dyn_linear_y.f32", 6);
  sg_graph_destroy(in);
  sg_graph_destroy(ext);

  char cwd[PATH_MAX];
  assert_non_null(getcwd(cwd, sizeof cwd));
  assert_int_equal(chdir(SG_TEST_DATA_DIR "/onnx"), 0);
  sg_onnx_params p = sg_onnx_params_init();
  assert_status(sg_onnx_import("dyn_linear_ext.onnx", &p, &ext), SG_OK, NULL);
  assert_status(sg_onnx_import("./dyn_linear_ext.onnx", &p, &in), SG_OK, NULL);
  assert_int_equal(chdir(cwd), 0);
  same_parameters(ext, in);
  sg_graph_destroy(in);
  sg_graph_destroy(ext);

  size_t n;
  unsigned char *bytes = sg_test_read_file(onnx_test_path("dyn_linear_ext.onnx"), &n);
  assert_status(sg_onnx_import_from_memory(bytes, n, &p, &ext), SG_ERR_UNSUPPORTED,
                "import it from its path");
  assert_null(ext);
  free(bytes);
  free(x);
}

static void copy_file(const char *from, const char *to) {
  size_t n;
  unsigned char *b = sg_test_read_file(from, &n);
  FILE *f = fopen(to, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(b, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
  free(b);
}

/* The data file as a symbolic link: to a file in the model's folder it is
 * read; to one outside it (here the committed data), refused. */
static void test_external_symlink(void **state) {
  (void)state;
  char dir[] = "/tmp/sg_test_ext_XXXXXX", model[512], link[512], inside[512], data[PATH_MAX];
  assert_non_null(mkdtemp(dir));
  snprintf(model, sizeof model, "%s/dyn_linear_ext.onnx", dir);
  snprintf(link, sizeof link, "%s/dyn_linear_ext.onnx.data", dir);
  snprintf(inside, sizeof inside, "%s/real.data", dir);
  assert_non_null(realpath(onnx_test_path("dyn_linear_ext.onnx.data"), data));
  copy_file(onnx_test_path("dyn_linear_ext.onnx"), model);
  sg_onnx_params p = sg_onnx_params_init();
  sg_graph *g = NULL;
  assert_int_equal(symlink(data, link), 0);
  assert_status(sg_onnx_import(model, &p, &g), SG_ERR_FORMAT, "outside the model's folder");
  assert_null(g);
  assert_int_equal(unlink(link), 0);
  copy_file(data, inside);
  assert_int_equal(symlink("real.data", link), 0);
  assert_status(sg_onnx_import(model, &p, &g), SG_OK, NULL);
  sg_graph_destroy(g);
  unlink(link);
  unlink(inside);
  unlink(model);
  rmdir(dir);
}

static void test_bad_external(void **state) {
  (void)state;
  static const onnx_refusal bad[] = {
      {"bad_ext_absolute.onnx", SG_ERR_FORMAT, "'/etc/passwd' is not a relative POSIX path"},
      {"bad_ext_dotdot.onnx", SG_ERR_FORMAT, "leaves the model's folder ('..')"},
      {"bad_ext_missing.onnx", SG_ERR_IO, "bad_ext_nonexistent.data', which cannot be opened"},
      {"bad_ext_past_end.onnx", SG_ERR_FORMAT, "runs past the end of 'bad_ext.data' (60 bytes)"},
      {"bad_ext_length.onnx", SG_ERR_FORMAT, "length is 44 bytes, the tensor needs 48"},
      {"bad_ext_checksum.onnx", SG_ERR_UNSUPPORTED, "key 'checksum' is not supported"},
      {"bad_ext_key.onnx", SG_ERR_UNSUPPORTED, "key 'basepath' is not supported"},
      {"bad_ext_no_location.onnx", SG_ERR_FORMAT, "external data without a location"},
      {"bad_ext_both.onnx", SG_ERR_FORMAT, "in an external file and in the model too"},
  };
  onnx_expect_refusals(bad, sizeof bad / sizeof *bad);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gpt_noopt),       cmocka_unit_test(test_gpt_opt),
      cmocka_unit_test(test_llama_noopt),     cmocka_unit_test(test_encoder_noopt),
      cmocka_unit_test(test_sdpa_bool_mask),  cmocka_unit_test(test_dynamic_batch),
      cmocka_unit_test(test_torchscript_mod), cmocka_unit_test(test_merged_parameters),
      cmocka_unit_test(test_external_data),   cmocka_unit_test(test_external_symlink),
      cmocka_unit_test(test_bad_external),    cmocka_unit_test(test_forms),
      cmocka_unit_test(test_bad_forms),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
