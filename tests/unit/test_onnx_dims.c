/* Symbolic input dims sized by name (sg_onnx_params.dims): nanoGPT exported
 * with batch AND sequence dynamic, by torch.export (Dim "batch", Dim "seq")
 * and by the TorchScript exporter (dynamic_axes), models and PyTorch 2.15's
 * results written by tests/data/onnx/make_onnx_dynamo.py (make_dyn_gpt_bs):
 *  - one file trains with PyTorch's logits, 28 gradients and 3 SGD losses at
 *    [3,5] and at [2,16] (two references of one set of weights), so the
 *    sequence length reaches the causal mask, the position ids and the
 *    reshapes that read it through Shape;
 *  - the TorchScript export gives PyTorch's logits at [3,5];
 *  - `batch` sizes whatever `dims` does not name;
 *  - every bad entry is refused with its status and a message naming it:
 *    no size for a symbol (which says how to give one), a name the model
 *    lacks (listing those it has), malformed entries, a size out of range, a
 *    name given twice; a sequence past the model's block size fails at its
 *    position table. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_parity.h"
#include "test_util.h"

/* The tied weight is written once, as "lm_head.weight"; PyTorch's reference names it wte.weight. */
static const char *const gpt_renames[] = {"lm_head.weight", "wte.weight", NULL};

static transformer_case gpt_case(const char *ref, const int64_t *ids, int64_t b, int64_t t,
                                 const char *const *dims) {
  return (transformer_case){.file = "dyn_gpt_bs_noopt.onnx",
                            .ref = ref,
                            .input = "idx",
                            .dtype = SG_I64,
                            .ndim = 2,
                            .dims = {b, t},
                            .x = ids,
                            .labels = ids + b * t,
                            .rows = b * t,
                            .classes = 64,
                            .n_params = 28,
                            .n_weights = 28032,
                            .output = "linear_8",
                            .renames = gpt_renames,
                            .sym_dims = dims};
}

static void test_train_two_shapes(void **state) {
  (void)state;
  static const char *const dims35[] = {"batch=3", "seq=5", NULL}, *const dims216[] = {"seq=16", "batch=2",
                                                                                      NULL};
  int64_t *ids35 = onnx_test_read("dyn_gpt_bs_ids.i64", 30 * sizeof(int64_t));
  int64_t *ids216 = onnx_test_read("dyn_gpt_ids.i64", 64 * sizeof(int64_t));
  sg_graph *g = onnx_test_import_dims("dyn_gpt_bs_noopt.onnx", dims35);
  sg_tensor_info info;
  assert_status(sg_graph_tensor_info(g, sg_graph_input(g, 0), &info), SG_OK, NULL);
  assert_int_equal(info.ndim, 2);
  assert_int_equal(info.dims[0], 3);
  assert_int_equal(info.dims[1], 5);
  sg_graph_destroy(g);
  transformer_case k = gpt_case("dyn_gpt_bs_ref.f32", ids35, 3, 5, dims35);
  transformer_parity(&k);
  k = gpt_case("dyn_gpt_ref.f32", ids216, 2, 16, dims216);
  transformer_parity(&k);
  free(ids35);
  free(ids216);
}

/* The TorchScript exporter's dynamic_axes name the same symbols. */
static void test_torchscript(void **state) {
  (void)state;
  static const char *const dims[] = {"batch=3", "seq=5", NULL};
  int64_t *ids = onnx_test_read("dyn_gpt_bs_ids.i64", 30 * sizeof(int64_t));
  sg_graph *g = onnx_test_import_dims("dyn_gpt_bs_ts.onnx", dims);
  onnx_input in = {"idx", SG_I64, 2, {3, 5}, ids};
  onnx_forward_matches(g, 1, &in, "logits", "dyn_gpt_bs_logits.f32", 3 * 5 * 64);
  sg_graph_destroy(g);
  free(ids);
}

static sg_status import_with(const char *const *dims, int64_t batch, sg_graph **g) {
  sg_onnx_params p = sg_onnx_params_init();
  p.dims = dims;
  p.batch = batch;
  *g = NULL;
  return sg_onnx_import(onnx_test_path("dyn_gpt_bs_ts.onnx"), &p, g);
}

static void expect_input_dims(const sg_graph *g, int64_t b, int64_t t) {
  sg_tensor_info info;
  assert_status(sg_graph_tensor_info(g, sg_graph_input(g, 0), &info), SG_OK, NULL);
  assert_int_equal(info.dims[0], b);
  assert_int_equal(info.dims[1], t);
}

/* `batch` sizes every symbolic dim that `dims` does not name (both, without dims). */
static void test_batch_sizes_the_rest(void **state) {
  (void)state;
  static const char *const seq[] = {"seq=5", NULL}, *const none[] = {NULL};
  sg_graph *g;
  assert_status(import_with(seq, 4, &g), SG_OK, NULL);
  expect_input_dims(g, 4, 5);
  sg_graph_destroy(g);
  assert_status(import_with(NULL, 4, &g), SG_OK, NULL);
  expect_input_dims(g, 4, 4);
  sg_graph_destroy(g);
  assert_status(import_with(none, 6, &g), SG_OK, NULL); /* an empty list is no list */
  expect_input_dims(g, 6, 6);
  sg_graph_destroy(g);
}

static void test_refusals(void **state) {
  (void)state;
  static const struct {
    const char *dims[4];
    int64_t batch;
    sg_status st;
    const char *needle;
  } bad[] = {
      /* a symbol left without a size: the message says how to give it */
      {{NULL}, 0, SG_ERR_SHAPE, "dim 0 is symbolic ('batch'); give its size with sg_onnx_params.dims"},
      {{"batch=3", NULL}, 0, SG_ERR_SHAPE, "(\"seq=N\"; sgrt --dim seq=N)"},
      /* a name the model lacks, with the names it has */
      {{"batch=3", "seq=5", "sq=2", NULL},
       0,
       SG_ERR_NOT_FOUND,
       "names 'sq', which no graph input has; the model's "
       "named symbolic dims: 'batch', 'seq'"},
      {{"Seq=5", NULL}, 3, SG_ERR_NOT_FOUND, "'Seq'"},
      /* past the model's block size (16): the position table has no row 16 */
      {{"batch=2", "seq=17", NULL},
       0,
       SG_ERR_RANGE,
       "index 16 of indices '/Range_output_0' is outside 0..15"},
      /* malformed entries, checked before the file is read */
      {{"seq", NULL}, 0, SG_ERR_INVALID_ARG, "dims[0] is 'seq'; each entry is NAME=SIZE"},
      {{"batch=2", "=5", NULL}, 0, SG_ERR_INVALID_ARG, "dims[1] is '=5'"},
      {{"seq=", NULL}, 0, SG_ERR_INVALID_ARG, "NAME=SIZE"},
      {{"seq=0", NULL}, 0, SG_ERR_INVALID_ARG, "dims[0] is 'seq=0'; the size must be in 1..2^56"},
      {{"seq=-5", NULL}, 0, SG_ERR_INVALID_ARG, "whole number"},
      {{"seq=5x", NULL}, 0, SG_ERR_INVALID_ARG, "whole number"},
      {{"seq= 5", NULL}, 0, SG_ERR_INVALID_ARG, "whole number"},
      {{"seq=99999999999999999999", NULL}, 0, SG_ERR_INVALID_ARG, "1..2^56"},
      {{"seq=72057594037927937", NULL}, 0, SG_ERR_INVALID_ARG, "1..2^56"},
      {{"seq=5", "batch=2", "seq=6", NULL}, 0, SG_ERR_INVALID_ARG, "names 'seq' twice (dims[0] and dims[2])"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    sg_graph *g;
    assert_status(import_with(bad[i].dims, bad[i].batch, &g), bad[i].st, bad[i].needle);
    assert_null(g);
  }
  /* A name of 128 bytes or more cannot be a dim of this model: refused as too long. */
  char longname[200];
  memset(longname, 'a', 150);
  strcpy(longname + 150, "=3");
  const char *const too_long[] = {longname, NULL};
  sg_graph *g;
  assert_status(import_with(too_long, 0, &g), SG_ERR_INVALID_ARG, "the name is 150 bytes; at most 127");
  /* More than 64 entries: a list that is not NULL-terminated is caught there. */
  const char *many[70];
  for (int i = 0; i < 69; i++) many[i] = "seq=5";
  many[69] = NULL;
  assert_status(import_with(many, 0, &g), SG_ERR_INVALID_ARG, "more than 64 entries");
  /* The same checks from memory, where there is no file to read first. */
  size_t n;
  void *bytes = sg_test_read_file(onnx_test_path("dyn_gpt_bs_ts.onnx"), &n);
  sg_onnx_params p = sg_onnx_params_init();
  static const char *const bad_seq[] = {"seq=0", NULL}, *const good[] = {"batch=3", "seq=5", NULL};
  p.dims = bad_seq;
  assert_status(sg_onnx_import_from_memory(bytes, n, &p, &g), SG_ERR_INVALID_ARG,
                "sg_onnx_import_from_memory");
  p.dims = good;
  assert_status(sg_onnx_import_from_memory(bytes, n, &p, &g), SG_OK, NULL);
  expect_input_dims(g, 3, 5);
  sg_graph_destroy(g);
  free(bytes);
}

/* A caller built against the struct before `dims` existed passes a shorter size: it gets the old
 * behaviour (no names; batch sizes every symbolic dim). */
static void test_older_caller(void **state) {
  (void)state;
  sg_onnx_params p = sg_onnx_params_init();
  static const char *const dims[] = {"seq=5", NULL};
  p.dims = dims; /* past the older size: not read */
  p.batch = 2;
  p.size = offsetof(sg_onnx_params, dims);
  sg_graph *g = NULL;
  assert_status(sg_onnx_import(onnx_test_path("dyn_gpt_bs_ts.onnx"), &p, &g), SG_OK, NULL);
  expect_input_dims(g, 2, 2);
  sg_graph_destroy(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_train_two_shapes),     cmocka_unit_test(test_torchscript),
      cmocka_unit_test(test_batch_sizes_the_rest), cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_older_caller),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
