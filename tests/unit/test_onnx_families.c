/* The ops that further transformer families export (models and PyTorch 2.15's
 * and NumPy's results written by tests/data/onnx/make_onnx_families.py):
 *  - FamilyOps (GPT-J's rotate_every_two: Slice with step 2 of a run-time
 *    tensor; a step of 3 whose last element is short of a whole step;
 *    Conv1d with dilation and groups, and with a stride; Pad in modes
 *    replicate, reflect, constant with a value and negative pads; Ceil and
 *    Pow of constants) trains with PyTorch's logits, 8 gradients and 3 SGD
 *    losses, exported by the TorchScript exporter (whose pads are reversed
 *    by Slice and Transpose of constants) and by torch.export;
 *  - RemapOps (GatherElements, torch.flip, a slice assignment and
 *    Tensor.scatter of run-time tensors by indices known at export) trains
 *    with PyTorch's logits, gradients and losses, through both exporters;
 *  - MoEOps (Mixtral's router and batched experts: TopK, Gather and GatherND
 *    of weights by run-time indices, OneHot at run time) trains likewise;
 *  - hand-made forms against NumPy: strided and reversing slices, every Pad mode with
 *    negative pads and the axes input, Conv1d's attributes, Transpose, Ceil,
 *    Floor, Round and Pow folded;
 *  - constants models build in forward (ScatterND, ScatterElements, EyeLike,
 *    Flatten, ReduceSum, ReduceMean: folded), Resize to the input's own
 *    size, an empty slice that Concat drops, a GatherND of a weight's rows as
 *    one embedding lookup;
 *  - the forms still refused, with their status and message. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_parity.h"
#include "test_util.h"

/* A model of input "x" [2,8,16] and logits [2,8,5] trained on labels i % 5 over its 16 rows, against
 * PyTorch's logits, gradients and losses in REF. */
static transformer_case rows16_case(const char *file, const char *ref, const float *x, const int64_t *labels,
                                    int n_params, int64_t n_weights, const char *output) {
  return (transformer_case){.file = file,
                            .ref = ref,
                            .input = "x",
                            .dtype = SG_F32,
                            .ndim = 3,
                            .dims = {2, 8, 16},
                            .x = x,
                            .labels = labels,
                            .rows = 16,
                            .classes = 5,
                            .n_params = n_params,
                            .n_weights = n_weights,
                            .output = output};
}

/* FamilyOps: conv [16,8,3]+16, conv2 [8,16,3]+8, head [5,16]+5, inp [16,16]+16. */
static transformer_case family_case(const char *file, const float *x, const int64_t *labels,
                                    const char *output) {
  return rows16_case(file, "fam_ref.f32", x, labels, 8, 384 + 16 + 384 + 8 + 80 + 5 + 256 + 16, output);
}

static void test_train(void **state) {
  (void)state;
  float *x = onnx_test_read("fam_x.f32", 2 * 8 * 16 * sizeof(float));
  int64_t labels[16];
  for (int i = 0; i < 16; i++) labels[i] = i % 5;
  sg_graph *g = onnx_test_import("fam_train_ts.onnx");
  assert_int_equal(onnx_test_count_ops(g, SG_OP_CONV2D), 2); /* the two Conv1d, as height-1 2-D ones */
  sg_graph_destroy(g);
  transformer_case k = family_case("fam_train_ts.onnx", x, labels, "logits");
  transformer_parity(&k);
  k = family_case("fam_train_dyn.onnx", x, labels, "add_10");
  transformer_parity(&k);
  free(x);
}

/* RemapOps: GatherElements, a flip, ScatterND and ScatterElements of run-time tensors by indices known at
 * export, each an embedding lookup of the source's elements (onnx_remap.c), through both exporters. */
static void test_remap(void **state) {
  (void)state;
  float *x = onnx_test_read("remap_x.f32", 2 * 8 * 16 * sizeof(float));
  int64_t labels[16];
  for (int i = 0; i < 16; i++) labels[i] = i % 5;
  static const char *const files[] = {"remap_train_ts.onnx", "remap_train_dyn.onnx"};
  for (int f = 0; f < 2; f++) {
    sg_graph *g = onnx_test_import(files[f]);
    /* 2 gathers, 2 flips (one of two axes), 2 scatters: 6 lookups, none a run of slices */
    assert_int_equal(onnx_test_count_ops(g, SG_OP_EMBEDDING), 6);
    sg_graph_destroy(g);
    /* head [5,16]+5, inp [16,16]+16 */
    transformer_case k =
        rows16_case(files[f], "remap_ref.f32", x, labels, 4, 80 + 5 + 256 + 16, f == 0 ? "logits" : "add_4");
    transformer_parity(&k);
  }
  free(x);
}

/* MoEOps: Mixtral's router (softmax, TopK 2, renormalised) and batched experts (each pick's weights
 * gathered from [experts, ...] parameters by the run-time indices: Gather and GatherND of a weight as
 * an embedding lookup), F.one_hot of the picks (OneHot at run time; Equal of a Range from torch.export)
 * and a TopK of the smallest along axis 0, trained through both exporters. */
static void test_moe(void **state) {
  (void)state;
  float *x = onnx_test_read("moe_x.f32", 2 * 8 * 16 * sizeof(float));
  int64_t labels[16];
  for (int i = 0; i < 16; i++) labels[i] = i % 5;
  static const char *const files[] = {"moe_train_ts.onnx", "moe_train_dyn.onnx"}, *const outs[] = {"logits",
                                                                                                   "add_3"};
  for (int f = 0; f < 2; f++) {
    sg_graph *g = onnx_test_import(files[f]);
    assert_int_equal(onnx_test_count_ops(g, SG_OP_TOPK), 2);
    assert_int_equal(onnx_test_count_ops(g, SG_OP_EMBEDDING), 2); /* the two experts' weights */
    sg_graph_destroy(g);
    /* expert_bias [4,16], gate [4,16], head [5,16]+5, inp [16,16]+16, w_down [4,16,24], w_up [4,24,16] */
    transformer_case k =
        rows16_case(files[f], "moe_ref.f32", x, labels, 8, 64 + 64 + 85 + 272 + 1536 + 1536, outs[f]);
    transformer_parity(&k);
  }
  free(x);
}

/* Each output of tests/data/onnx/FILE on fam_forms_x.f32 against REF (NumPy's, float32), within 1e-5
 * (the convolutions sum in another order; copies and folds are exact or one rounding). */
static void forms_match(const char *file, const char *ref_file, int n, const char *const *names,
                        const size_t *counts) {
  float *x = onnx_test_read("fam_forms_x.f32", 48 * sizeof(float));
  sg_graph *g = onnx_test_import(file);
  const onnx_input in = {"x", SG_F32, 3, {2, 3, 8}, x};
  onnx_outputs_match(g, file, 1, &in, n, names, counts, ref_file, 1e-5);
  sg_graph_destroy(g);
  free(x);
}

static void test_forms(void **state) {
  (void)state;
  static const char *const names[] = {
      "s_even",      "s_odd",  "s_three", "s_two_axes", "s_one",     "s_rev",  "s_rev_two", "p_const",
      "p_zero",      "p_crop", "p_axes",  "p_edge",     "p_reflect", "p_wrap", "conv1d",    "conv1d_plain",
      "f_transpose", "f_ceil", "f_floor", "f_round",    "f_pow",     "f_ipow"};
  static const size_t counts[] = {24,  24, 18,  8,  6,  48, 24, 104, 81, 40, 66,
                                  156, 78, 126, 32, 48, 48, 48, 48,  48, 48, 4};
  forms_match("fam_forms.onnx", "fam_forms_y.f32", (int)(sizeof counts / sizeof *counts), names, counts);
}

/* Constants that models build in forward (BEiT's relative position index: ScatterND, Flatten,
 * ReduceSum; XLNet's EyeLike), Resize to the input's own size, an empty slice that Concat drops
 * (Phi-3's), and a GatherND of many scattered rows of a weight as one embedding lookup (Swin's
 * relative position bias). */
static void test_forms2(void **state) {
  (void)state;
  static const char *const names[] = {"g_concat_empty",
                                      "g_concat_two",
                                      "g_eye2",
                                      "g_eyem1",
                                      "g_resize_scales",
                                      "g_resize_sizes",
                                      "g_scatter_nd_none",
                                      "g_scatter_nd_add",
                                      "g_scatter_el_none",
                                      "g_scatter_el_max",
                                      "g_flatten",
                                      "g_reduce_sum",
                                      "g_reduce_mean",
                                      "g_gather_rows",
                                      "g_sin",
                                      "g_cos",
                                      "g_acos"};
  static const size_t counts[] = {48, 96, 48, 48, 48, 48, 12, 12, 12, 12, 24, 8, 6, 300, 48, 48, 48};
  sg_graph *g = onnx_test_import("fam_forms2.onnx");
  assert_int_equal(onnx_test_count_ops(g, SG_OP_EMBEDDING), 1);
  sg_graph_destroy(g);
  forms_match("fam_forms2.onnx", "fam_forms2_y.f32", (int)(sizeof counts / sizeof *counts), names, counts);
}

static void test_refusals(void **state) {
  (void)state;
  static const onnx_refusal bad[] = {
      {"bad_pad_reflect.onnx", SG_ERR_UNSUPPORTED,
       "node 'reflect3' (Pad): mode 'reflect' pads 3 along axis 1 of dim 3; sgrt reflects fewer than the "
       "dim"},
      {"bad_pad_empty.onnx", SG_ERR_UNSUPPORTED,
       "node 'crop_all' (Pad): pads -2 and -1 crop axis 1 of dim 3 to nothing"},
      {"bad_pow_negative.onnx", SG_ERR_RANGE,
       "node 'pow_neg' (Pow): 2 to the power -1: a negative integer exponent"},
      {"bad_ceil_runtime.onnx", SG_ERR_UNSUPPORTED,
       "node 'ceil_x' (Ceil): input 'x' is computed at run time; sgrt folds this op only for constants"},
      {"bad_resize_cubic.onnx", SG_ERR_UNSUPPORTED,
       "node 'upsample' (Resize): resizes 'x' [2,3,8] to [2,3,16] (mode 'cubic', half_pixel): sgrt resizes "
       "in "
       "modes nearest and linear"},
      {"bad_resize_huge.onnx", SG_ERR_UNSUPPORTED,
       "node 'huge' (Resize): scale 2 (1e+30) resizes dim 2 of 'x' from 8 to 8e+30; sgrt resizes dims of "
       "1..4096"},
      {"bad_empty_use.onnx", SG_ERR_UNSUPPORTED,
       "node 'relu_empty' (Relu): uses 'z', which sgrt cannot provide: it is empty (node 'nothing' (Slice) "
       "takes nothing along axis 2 of 'x' [2,3,8])"},
      {"bad_scatter_add_runtime.onnx", SG_ERR_UNSUPPORTED,
       "node 'scatter_add_x' (ScatterND): reduction 'add' of data 'x' computed at run time; sgrt scatters "
       "run-time tensors without a reduction only"},
      {"bad_topk_int.onnx", SG_ERR_DTYPE,
       "node 'topk_int' (TopK): input 'xi' must be float; sgrt's topk takes f32"},
      {"bad_gathernd_pairs.onnx", SG_ERR_UNSUPPORTED,
       "node 'gather_pairs' (GatherND): indices 'pairs' are computed at run time with tuples of 2; sgrt "
       "gathers "
       "by run-time indices only rows of the first dim (tuples of 1)"},
      {"bad_gather_elements_both.onnx", SG_ERR_UNSUPPORTED,
       "node 'gather_both' (GatherElements): data 'x' and indices 'ri' are both computed at run time"},
  };
  onnx_expect_refusals(bad, sizeof bad / sizeof bad[0]);
}

/* Resize in modes linear and nearest, each coordinate transformation and rounding, up and down,
 * against onnx.reference (make_onnx_families.py's make_family_resize). */
static void test_resize(void **state) {
  (void)state;
  static const char *const names[] = {"r_lin_up",     "r_lin_corners", "r_lin_torch_down", "r_lin_asym_half",
                                      "r_near_floor", "r_near_half",   "r_near_ceil",      "r_near_corners"};
  static const size_t counts[] = {96, 144, 30, 24, 192, 110, 96, 24};
  sg_graph *g = onnx_test_import("fam_resize.onnx");
  /* One matmul per resized axis: 1 + 2 + 1 + 1 + 2 + 2 + 2 + 2. */
  assert_int_equal(onnx_test_count_ops(g, SG_OP_MATMUL), 13);
  sg_graph_destroy(g);
  forms_match("fam_resize.onnx", "fam_resize_y.f32", (int)(sizeof counts / sizeof *counts), names, counts);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_train),  cmocka_unit_test(test_forms),    cmocka_unit_test(test_forms2),
      cmocka_unit_test(test_resize), cmocka_unit_test(test_refusals), cmocka_unit_test(test_remap),
      cmocka_unit_test(test_moe),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
