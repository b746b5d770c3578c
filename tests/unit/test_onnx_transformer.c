/* Transformers through the ONNX importer (issue 21): torch.onnx.export of a
 * nanoGPT-style GPT-2 and of nn.TransformerEncoderLayer (training exports,
 * written by tests/data/onnx/make_onnx.py with PyTorch's results) import,
 * give PyTorch's logits (max |diff| <= 1e-5, logits of order 1), and, with
 * cross entropy, sg_graph_backward and SGD added, every parameter's gradient
 * (relative L2 <= 1e-4) and the losses of three steps (relative <= 1e-4).
 * Also the ops those exports need, on models written with onnx.helper
 * against NumPy: Slice and Split of run-time tensors (sg_slice), and the
 * mask ops Range, Trilu, Equal, Not (folded) and Expand (folded, and
 * broadcast_to at run time). Further forms of unseen exports: padding masks
 * (a BOOL input, `ids == 0`), h[:, 0], T5's position buckets, Hugging
 * Face's causal mask, expand(B, -1), .repeat, F.normalize, a DOUBLE
 * constant (two more training exports against PyTorch, and a hand-made
 * model against NumPy). Einsum (attention written with torch.einsum) and
 * CumSum (RoBERTa's position ids from the run-time ids) against PyTorch,
 * and their forms against NumPy. The refused forms are in
 * test_onnx_import.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_parity.h"
#include "test_util.h"

/* ---- GPT-2 and TransformerEncoderLayer against PyTorch ------------------------- */

/* GPT-2 (nanoGPT): token and position embeddings, attention with c_attn
 * split into q, k, v (Split -> three sg_slice per layer), the causal mask
 * `bias[:, :, :T, :T] == 0` folded at import (the buffer `bias` is a
 * constant, not a parameter), tanh GELU, LayerNorm decomposed (opset 14),
 * lm_head tied to wte: one parameter that gets both gradients. */
static void test_gpt2(void **state) {
  (void)state;
  int64_t *ids = onnx_test_read("gpt2_ids.i64", (32 + 32) * sizeof(int64_t));
  sg_graph *g = onnx_test_import("gpt2_train.onnx");
  sg_tensor t;
  assert_status(sg_graph_find_tensor(g, "h.0.attn.bias", &t), SG_ERR_NOT_FOUND, NULL);
  assert_int_equal(onnx_test_count_ops(g, SG_OP_SLICE), 2 * 3);
  assert_int_equal(onnx_test_count_ops(g, SG_OP_EMBEDDING), 2);
  assert_int_equal(onnx_test_count_ops(g, SG_OP_WHERE), 2);
  sg_graph_destroy(g);
  /* wte, wpe, ln_f and 12 per layer; lm_head.weight is wte.weight */
  size_t weights = 64 * 32 + 16 * 32 + 2 * 32 +
                   2 * (4 * 32 + 96 * 32 + 96 + 32 * 32 + 32 + 128 * 32 + 128 + 32 * 128 + 32);
  transformer_case k = {.file = "gpt2_train.onnx",
                        .ref = "gpt2_ref.f32",
                        .input = "ids",
                        .dtype = SG_I64,
                        .ndim = 2,
                        .dims = {2, 16},
                        .x = ids,
                        .labels = ids + 32,
                        .rows = 32,
                        .classes = 64,
                        .n_params = 28,
                        .n_weights = weights};
  transformer_parity(&k);
  free(ids);
}

/* nn.TransformerEncoderLayer (batch_first, dropout 0: identity Dropouts)
 * and a Linear head at opset 17: in_proj's output cut into q, k and v by
 * Slices whose bounds come from Shape arithmetic (folded), heads by
 * Reshape and Transpose, LayerNormalization. */
static void test_transformer_encoder_layer(void **state) {
  (void)state;
  float *x = onnx_test_read("encoder_x.f32", 2 * 8 * 32 * sizeof(float));
  sg_graph *g = onnx_test_import("encoder_train.onnx");
  assert_int_equal(onnx_test_count_ops(g, SG_OP_SLICE), 3);
  assert_int_equal(onnx_test_count_ops(g, SG_OP_LAYER_NORM), 2);
  assert_int_equal(onnx_test_count_ops(g, SG_OP_DROPOUT), 0);
  sg_graph_destroy(g);
  int64_t labels[16];
  for (int i = 0; i < 16; i++) labels[i] = i % 5;
  size_t weights = 96 * 32 + 96 + 32 * 32 + 32 + 64 * 32 + 64 + 32 * 64 + 32 + 4 * 32 + 5 * 32 + 5;
  transformer_case k = {.file = "encoder_train.onnx",
                        .ref = "encoder_ref.f32",
                        .input = "x",
                        .dtype = SG_F32,
                        .ndim = 3,
                        .dims = {2, 8, 32},
                        .x = x,
                        .labels = labels,
                        .rows = 16,
                        .classes = 5,
                        .n_params = 14,
                        .n_weights = weights};
  transformer_parity(&k);
  free(x);
}

/* Two nn.TransformerEncoderLayers (opset 14) whose keys are masked by the
 * BOOL input `pad` (src_key_padding_mask: the mask passes Reshape and
 * Expand as f32 and is cast back to bool for Where) and by `ids == 0`
 * (Equal of the run-time ids: a sub, a cast to bool and Not), and a head on
 * h[:, 0] (a Gather of a run-time tensor by a constant index: a slice). */
static void test_pad_masks(void **state) {
  (void)state;
  int64_t *ids = onnx_test_read("padmask_ids.i64", 12 * sizeof(int64_t));
  uint8_t *pad = onnx_test_read("padmask_pad.u8", 12);
  sg_graph *g = onnx_test_import("padmask_train.onnx");
  sg_tensor_info info;
  sg_tensor t;
  assert_status(sg_graph_find_tensor(g, "pad", &t), SG_OK, NULL);
  assert_status(sg_graph_tensor_info(g, t, &info), SG_OK, NULL);
  assert_int_equal(info.dtype, SG_BOOL);
  assert_int_equal(onnx_test_count_ops(g, SG_OP_EMBEDDING), 1);
  sg_graph_destroy(g);
  int64_t labels[12];
  for (int i = 0; i < 12; i++) labels[i] = i % 5;
  transformer_case k = {.file = "padmask_train.onnx",
                        .ref = "padmask_ref.f32",
                        .input = "ids",
                        .dtype = SG_I64,
                        .ndim = 2,
                        .dims = {2, 6},
                        .x = ids,
                        .input2 = "pad",
                        .dtype2 = SG_BOOL,
                        .ndim2 = 2,
                        .dims2 = {2, 6},
                        .x2 = pad,
                        .labels = labels,
                        .rows = 12,
                        .classes = 5,
                        .n_params = 29,
                        .n_weights = 4938};
  transformer_parity(&k);
  free(ids);
  free(pad);
}

/* Hugging Face-era forms at opset 17: T5's relative position buckets and
 * _make_causal_mask (Abs, Less, Log, Cast, Min, Where of constants: folded;
 * the -inf of log(0) cast to int64 is 0, as the cast op gives, and a Where
 * discards it), arange(T).expand(B, -1) (a Where over the shape, folded), a
 * class token by .repeat (Tile of a parameter: broadcast_to, gradient
 * sum_to), F.normalize (ReduceL2) and clamp(min=1e-9) (a DOUBLE Constant). */
static void test_t5_forms(void **state) {
  (void)state;
  float *x = onnx_test_read("t5mix_x.f32", 2 * 6 * 16 * sizeof(float));
  sg_graph *g = onnx_test_import("t5mix_train.onnx");
  assert_int_equal(onnx_test_count_ops(g, SG_OP_BROADCAST_TO),
                   1 + 2); /* the Tile; the two F.normalize Expands */
  assert_int_equal(onnx_test_count_ops(g, SG_OP_EMBEDDING), 2);
  sg_graph_destroy(g);
  int64_t labels[14];
  for (int i = 0; i < 14; i++) labels[i] = i % 5;
  transformer_case k = {.file = "t5mix_train.onnx",
                        .ref = "t5mix_ref.f32",
                        .input = "x",
                        .dtype = SG_F32,
                        .ndim = 3,
                        .dims = {2, 6, 16},
                        .x = x,
                        .labels = labels,
                        .rows = 14,
                        .classes = 5,
                        .n_params = 9,
                        .n_weights = 1077};
  transformer_parity(&k);
  free(x);
}

/* Hand-made forms (opset 14) against NumPy (forms_y.f32; every output is
 * float): Gather of a run-time tensor by a scalar, by indices of three runs
 * (-1 counting from the end) and by 2-D indices; Where, Less,
 * GreaterOrEqual, Greater and LessOrEqual (NaN: false), Abs, Neg, Min, Log
 * and Cast (-inf to 0) of constants, a DOUBLE Constant (as float32 and cast
 * to int64), folded; Equal and Not of the run-time ids; the BOOL input `pad`
 * through Unsqueeze, Expand, Transpose, Slice, Concat into Where, through
 * Gather, through Tile; Tile of x; ReduceL2; Less, Greater, LessOrEqual and
 * GreaterOrEqual at run time for every pair of special floats (NaN,
 * infinities, signed zeros, subnormals, extremes) and of extreme int64s
 * (whose difference overflows), and of x against a constant. BOOL graph
 * outputs. And ReduceL2 with axes as an input (opset 18). */
static void test_forms(void **state) {
  (void)state;
  static const char *const names[] = {"g0",
                                      "g1",
                                      "g2",
                                      "yw",
                                      "yge",
                                      "ygt",
                                      "yle",
                                      "ymi",
                                      "ylg",
                                      "yd",
                                      "ydi",
                                      "yeq",
                                      "yne",
                                      "yb",
                                      "ypg",
                                      "ytb",
                                      "yt",
                                      "yl2",
                                      "yfLess",
                                      "yfGreater",
                                      "yfLessOrEqual",
                                      "yfGreaterOrEqual",
                                      "yiLess",
                                      "yiGreater",
                                      "yiLessOrEqual",
                                      "yiGreaterOrEqual",
                                      "ygt_half"};
  static const size_t counts[] = {6, 24, 32, 9, 9,   3,   3,   3,   3,  2,  2,  8,  8, 24,
                                  2, 16, 96, 8, 144, 144, 144, 144, 49, 49, 49, 49, 24};
  enum { N = sizeof counts / sizeof *counts };
  size_t total = 0;
  for (int i = 0; i < N; i++) total += counts[i];
  float *x = onnx_test_read("forms_x.f32", 24 * sizeof(float)),
        *ref = onnx_test_read("forms_y.f32", total * sizeof(float));
  int64_t *ids = onnx_test_read("forms_ids.i64", 8 * sizeof(int64_t)),
          *is = onnx_test_read("forms_is.i64", 7 * 8);
  uint8_t *pad = onnx_test_read("forms_pad.u8", 8);
  float *fs = onnx_test_read("forms_fs.f32", 12 * sizeof(float));
  static const int64_t xd[] = {2, 4, 3}, id[] = {2, 4}, fsd[] = {12}, isd[] = {7};
  sg_graph *g = onnx_test_import("forms_opset14.onnx");
  assert_int_equal(onnx_test_count_ops(g, SG_OP_CONCAT), 2 + 1); /* gather_runs, gather_2d; pad_concat */
  sg_session *s = onnx_test_session(g);
  assert_status(sg_session_set_input(s, "x", SG_F32, 3, xd, x), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "ids", SG_I64, 2, id, ids), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "pad", SG_BOOL, 2, id, pad), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "fs", SG_F32, 1, fsd, fs), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "is", SG_I64, 1, isd, is), SG_OK, NULL);
  assert_status(sg_session_forward(s), SG_OK, NULL);
  const float *r = ref;
  for (int i = 0; i < N; i++) {
    float got[144];
    assert_true(counts[i] <= 144);
    assert_status(sg_session_read(s, names[i], got, counts[i] * sizeof(float)), SG_OK, NULL);
    for (size_t j = 0; j < counts[i]; j++)
      if (!(fabs((double)got[j] - r[j]) <= 1e-6 * fmax(1.0, fabs((double)r[j]))))
        fail_msg("forms_opset14.onnx: %s[%zu] is %.9g, expected %.9g", names[i], j, got[j], r[j]);
    r += counts[i];
  }
  sg_session_destroy(s);
  sg_graph_destroy(g);

  /* BOOL graph outputs (declared BOOL): the input under a second name, a
   * copy, and its Not at run time. */
  g = onnx_test_import("bool_io_opset14.onnx");
  s = onnx_test_session(g);
  assert_status(sg_session_set_input(s, "pad", SG_BOOL, 2, id, pad), SG_OK, NULL);
  assert_status(sg_session_forward(s), SG_OK, NULL);
  uint8_t same[8], inverse[8];
  assert_status(sg_session_read(s, "same", same, sizeof same), SG_OK, NULL);
  assert_status(sg_session_read(s, "inverse", inverse, sizeof inverse), SG_OK, NULL);
  for (int j = 0; j < 8; j++) {
    assert_int_equal(same[j], pad[j] != 0);
    assert_int_equal(inverse[j], pad[j] == 0);
  }
  sg_session_destroy(s);
  sg_graph_destroy(g);

  float *l2 = onnx_test_read("reduce_l2_y.f32", 6 * sizeof(float)), got[6];
  g = onnx_test_import("reduce_l2_opset18.onnx");
  s = onnx_test_session(g);
  assert_status(sg_session_set_input(s, "x", SG_F32, 3, xd, x), SG_OK, NULL);
  assert_status(sg_session_forward(s), SG_OK, NULL);
  assert_status(sg_session_read(s, "y", got, sizeof got), SG_OK, NULL);
  for (int j = 0; j < 6; j++)
    if (!(fabs((double)got[j] - l2[j]) <= 1e-6 * fabs((double)l2[j])))
      fail_msg("reduce_l2_opset18.onnx: y[%d] is %.9g, expected %.9g", j, got[j], l2[j]);
  sg_session_destroy(s);
  sg_graph_destroy(g);
  free(l2);
  free(x);
  free(ref);
  free(ids);
  free(is);
  free(fs);
  free(pad);
}

/* ---- Einsum and CumSum ----------------------------------------------------------- */

/* Attention written with torch.einsum (tests/data/onnx/make_onnx_einsum.py,
 * opset 14): "bhid,bhjd->bhij", "...ij,...jd->...id", "bhid->bihd",
 * "bid,jd->bij" (a weight), "bid,d->bi", "bi,bj->bij", "bij,bjd->bid",
 * "bij->bi" and "bid,bid" (implicit output), lowered to transpose, reshape,
 * matmul and reduce_sum: no op of its own. */
static void test_einsum_attention(void **state) {
  (void)state;
  float *x = onnx_test_read("einsum_x.f32", 2 * 5 * 16 * sizeof(float));
  sg_graph *g = onnx_test_import("einsum_train.onnx");
  /* Every two-operand Einsum is one matmul, besides the Linear layers' (gemm or matmul). */
  assert_true(onnx_test_count_ops(g, SG_OP_MATMUL) >= 7);
  assert_int_equal(onnx_test_count_ops(g, SG_OP_REDUCE_SUM), 1); /* "bij->bi" */
  sg_graph_destroy(g);
  int64_t labels[10];
  for (int i = 0; i < 10; i++) labels[i] = i % 5;
  /* gate, head, ln, proj, qkv */
  size_t weights = 16 + 5 * 16 + 5 + 16 + 16 + 16 * 16 + 48 * 16 + 48;
  transformer_case k = {.file = "einsum_train.onnx",
                        .ref = "einsum_ref.f32",
                        .input = "x",
                        .dtype = SG_F32,
                        .ndim = 3,
                        .dims = {2, 5, 16},
                        .x = x,
                        .labels = labels,
                        .rows = 10,
                        .classes = 5,
                        .n_params = 8,
                        .n_weights = weights};
  transformer_parity(&k);
  free(x);
}

/* The Einsum forms once refused, in a model that trains (make_onnx_einsum.py's
 * EinsumForms2): three operands, a diagonal and a trace, parameters
 * broadcast against the batch (a label of size 1, also contracted), an
 * output that drops the ellipsis. A diagonal is a product with a constant
 * identity mask and a reduce_sum, so its gradient is the mask's scatter. */
static void test_einsum_forms_train(void **state) {
  (void)state;
  float *x = onnx_test_read("einsum2_x.f32", 2 * 5 * 16 * sizeof(float));
  sg_graph *g = onnx_test_import("einsum2_train.onnx");
  /* Two of the Einsums take a diagonal: two masks, one per node. */
  assert_true(onnx_test_count_ops(g, SG_OP_MUL) >= 2);
  sg_graph_destroy(g);
  int64_t labels[10];
  for (int i = 0; i < 10; i++) labels[i] = i % 5;
  transformer_case k = {.file = "einsum2_train.onnx",
                        .ref = "einsum2_ref.f32",
                        .input = "x",
                        .dtype = SG_F32,
                        .ndim = 3,
                        .dims = {2, 5, 16},
                        .x = x,
                        .labels = labels,
                        .rows = 10,
                        .classes = 5,
                        .n_params = 5,
                        .n_weights = 8 + 16 * 8 + 8 * 8 + 8 * 5 + 8}; /* c, w1, w2, w3, s */
  transformer_parity(&k);
  free(x);
}

/* RoBERTa's position ids from the run-time input ids (padding 1):
 * cumsum(ids.ne(1).int(), 1).type_as(mask) * mask + 1 is Equal, Not, Cast
 * to INT32, the cumsum op (i32), Mul, Cast to INT64 and Add, feeding the
 * position embedding's Gather. */
static void test_roberta_positions(void **state) {
  (void)state;
  int64_t *ids = onnx_test_read("roberta_ids.i64", 14 * sizeof(int64_t));
  sg_graph *g = onnx_test_import("roberta_pos_train.onnx");
  assert_int_equal(onnx_test_count_ops(g, SG_OP_CUMSUM), 1);
  assert_int_equal(onnx_test_count_ops(g, SG_OP_EMBEDDING), 2);
  sg_graph_destroy(g);
  int64_t labels[14];
  for (int i = 0; i < 14; i++) labels[i] = i % 5;
  transformer_case k = {.file = "roberta_pos_train.onnx",
                        .ref = "roberta_ref.f32",
                        .input = "ids",
                        .dtype = SG_I64,
                        .ndim = 2,
                        .dims = {2, 7},
                        .x = ids,
                        .labels = labels,
                        .rows = 14,
                        .classes = 5,
                        .n_params = 6,
                        .n_weights = 5 * 16 + 5 + 16 + 16 + 10 * 16 + 20 * 16};
  transformer_parity(&k);
  free(ids);
}

/* ---- ReduceMax and ReduceMin ------------------------------------------------------ */

/* A transformer block pooled over the sequence by torch.amax and torch.amin
 * (tests/data/onnx/make_onnx_reduce_max.py, opset 14), plus h.max(dim=2)[0],
 * which torch 1.13 exports as ReduceMax too: the reduce_max and reduce_min
 * ops, whose gradients reach every layer below them. */
static void test_reduce_max_pooling(void **state) {
  (void)state;
  float *x = onnx_test_read("reduce_max_x.f32", 2 * 6 * 16 * sizeof(float));
  sg_graph *g = onnx_test_import("reduce_max_train.onnx");
  assert_int_equal(onnx_test_count_ops(g, SG_OP_REDUCE_MAX), 2);
  assert_int_equal(onnx_test_count_ops(g, SG_OP_REDUCE_MIN), 1);
  sg_graph_destroy(g);
  int64_t labels[2] = {0, 1};
  transformer_case k = {.file = "reduce_max_train.onnx",
                        .ref = "reduce_max_ref.f32",
                        .input = "x",
                        .dtype = SG_F32,
                        .ndim = 3,
                        .dims = {2, 6, 16},
                        .x = x,
                        .labels = labels,
                        .rows = 2,
                        .classes = 5,
                        .n_params = 14,
                        .n_weights = 2389};
  transformer_parity(&k);
  free(x);
}

/* Hand-made ReduceMax/ReduceMin forms against NumPy (make_onnx_reduce_max.py):
 * axes as an attribute (opset 13) or an input (18), negative, several or
 * none, keepdims default 1 and 0, noop_with_empty_axes (18), a tie, and the
 * folded reductions of a float constant with a NaN and of int64s. */
static void reduce_max_forms(int opset) {
  static const char *const names[] = {"r_max_last", "r_min_02", "r_max_all", "r_min_all_keep",
                                      "r_cflt",     "r_cint64", "r_noop"};
  static const size_t counts[] = {6, 3, 1, 1, 2, 2, 24};
  /* The noop (opset 18 only) is the last output of the file's list but the fifth written. */
  const int order[] = {0, 1, 2, 3, 6, 4, 5}, n = opset >= 18 ? 7 : 6;
  char file[64], yname[64];
  snprintf(file, sizeof file, "reduce_max_forms_opset%d.onnx", opset);
  snprintf(yname, sizeof yname, "reduce_max_forms_opset%d_y.f32", opset);
  float *a = onnx_test_read("reduce_max_a.f32", 24 * sizeof(float)),
        *ref = onnx_test_read(yname, (opset >= 18 ? 39 : 15) * 4);
  sg_graph *g = onnx_test_import(file);
  assert_int_equal(onnx_test_count_ops(g, SG_OP_REDUCE_MAX) + onnx_test_count_ops(g, SG_OP_REDUCE_MIN),
                   4); /* the constants' folded */
  sg_session *s = onnx_test_session(g);
  static const int64_t ad[] = {2, 3, 4};
  assert_status(sg_session_set_input(s, "a", SG_F32, 3, ad, a), SG_OK, NULL);
  assert_status(sg_session_forward(s), SG_OK, NULL);
  const float *r = ref;
  for (int k = 0; k < n; k++) {
    int i = order[k];
    if (i == 6 && opset < 18) continue;
    float got[24];
    assert_status(sg_session_read(s, names[i], got, counts[i] * sizeof(float)), SG_OK, NULL);
    for (size_t j = 0; j < counts[i]; j++)
      if (!(got[j] == r[j] || (isnan(got[j]) && isnan(r[j]))))
        fail_msg("%s: %s[%zu] is %.9g, expected %.9g", file, names[i], j, got[j], r[j]);
    r += counts[i];
  }
  sg_session_destroy(s);
  sg_graph_destroy(g);
  free(a);
  free(ref);
}

static void test_reduce_max_forms(void **state) {
  (void)state;
  reduce_max_forms(13);
  reduce_max_forms(18);
}

/* Hand-made Einsum forms and CumSum (opset 14) against NumPy
 * (make_onnx_einsum.py's make_einsum_forms; every output float32). */
static void test_einsum_forms(void **state) {
  (void)state;
  static const char *const names[] = {
      "e_transpose",  "e_sum",        "e_sum_mid", "e_identity", "e_implicit1", "e_bmm",      "e_bmm_t",
      "e_ellipsis",   "e_weight",     "e_vec",     "e_dot",      "e_outer",     "e_sum_both", "e_implicit2",
      "e_batch_only", "e_free_const", "c_f0",      "c_f1",       "c_f2",        "c_f3",       "c_f4",
      "c_f5",         "c_f6",         "c_f7",      "c_i64",      "c_i32",       "c_cint",     "c_cflt"};
  static const size_t counts[] = {24, 2,  8,  24, 24, 30, 30, 30, 30, 6,  1,  30, 40, 15,
                                  24, 15, 24, 24, 24, 24, 24, 24, 24, 24, 12, 12, 6,  4};
  float *a = onnx_test_read("einsum_a.f32", 24 * sizeof(float)),
        *b = onnx_test_read("einsum_b.f32", 40 * sizeof(float));
  int64_t *ids = onnx_test_read("einsum_ids.i64", 12 * sizeof(int64_t));
  sg_graph *g = onnx_test_import("einsum_forms_opset14.onnx");
  /* Run-time CumSums: eight of a, one of int64s, one of int32s; the constants' are folded. */
  assert_int_equal(onnx_test_count_ops(g, SG_OP_CUMSUM), 8 + 2);
  const onnx_input in[] = {
      {"a", SG_F32, 3, {2, 3, 4}, a}, {"b", SG_F32, 3, {2, 4, 5}, b}, {"ids", SG_I64, 2, {2, 6}, ids}};
  onnx_outputs_match(g, "einsum_forms_opset14.onnx", 3, in, (int)(sizeof counts / sizeof *counts), names,
                     counts, "einsum_forms_y.f32", 1e-5);
  sg_graph_destroy(g);
  free(a);
  free(b);
  free(ids);
}

/* The forms of einsum_forms2_opset14.onnx against NumPy: three and four
 * operands, diagonals and traces (with a contraction, an outer product),
 * labels of size 1 broadcast (free and contracted), the ellipsis summed. */
static void test_einsum_forms2(void **state) {
  (void)state;
  static const char *const names[] = {"f_three",    "f_four",           "f_three_sum",  "f_diag",
                                      "f_trace",    "f_trace2",         "f_diag_dot",   "f_diag_outer",
                                      "f_bcast",    "f_bcast_contract", "f_bcast_both", "f_ell_sum",
                                      "f_ell_sum2", "f_ell_keep1"};
  static const size_t counts[] = {42, 54, 2, 6, 2, 1, 2, 6, 30, 9, 24, 12, 15, 6};
  float *a = onnx_test_read("einsum_a.f32", 24 * sizeof(float)),
        *b = onnx_test_read("einsum_b.f32", 40 * sizeof(float));
  sg_graph *g = onnx_test_import("einsum_forms2_opset14.onnx");
  const onnx_input in[] = {{"a", SG_F32, 3, {2, 3, 4}, a}, {"b", SG_F32, 3, {2, 4, 5}, b}};
  onnx_outputs_match(g, "einsum_forms2_opset14.onnx", 2, in, (int)(sizeof counts / sizeof *counts), names,
                     counts, "einsum_forms2_y.f32", 1e-5);
  sg_graph_destroy(g);
  free(a);
  free(b);
}

/* ---- Slice, Split --------------------------------------------------------------- */

/* Reads each output and checks it equals `ref` exactly (slices copy). */
static void expect_outputs(sg_session *s, int n, const char *const *names, const size_t *counts,
                           const float *ref, const char *what) {
  for (int i = 0; i < n; i++) {
    float got[64];
    assert_true(counts[i] <= 64);
    assert_status(sg_session_read(s, names[i], got, counts[i] * sizeof(float)), SG_OK, NULL);
    for (size_t j = 0; j < counts[i]; j++)
      if (got[j] != ref[j]) fail_msg("%s: %s[%zu] is %g, expected %g", what, names[i], j, got[j], ref[j]);
    ref += counts[i];
  }
}

/* Runs a model of input x [2,3,8] (slice_x.f32). */
static sg_session *run_slice_model(sg_graph *g, const float *x) {
  static const int64_t dims[] = {2, 3, 8};
  sg_session *s = onnx_test_session(g);
  assert_status(sg_session_set_input(s, "x", SG_F32, 3, dims, x), SG_OK, NULL);
  assert_status(sg_session_forward(s), SG_OK, NULL);
  return s;
}

/* Slices of a run-time input: a negative start with an end past the dim,
 * two axes (one negative, its range the whole dim), default axes, explicit
 * steps of 1 cutting nothing; Split by sizes (an input at opset 13, an
 * attribute at 11) and in equal parts; opset 18's num_outputs. */
static void test_slice_split(void **state) {
  (void)state;
  float *x = onnx_test_read("slice_x.f32", 48 * sizeof(float)),
        *ref = onnx_test_read("slice_y.f32", 230 * sizeof(float));
  static const char *const names[] = {"s1", "s2", "s3", "s4", "p0", "p1", "e0", "e1", "e2"};
  static const size_t counts[] = {30, 32, 24, 48, 12, 36, 16, 16, 16};
  sg_graph *g = onnx_test_import("slice_split_opset13.onnx");
  /* One slice each for s1, s2 (the whole axis 0 is not cut), s3; none for
   * s4; one per output of the splits. */
  assert_int_equal(onnx_test_count_ops(g, SG_OP_SLICE), 3 + 2 + 3);
  sg_session *s = run_slice_model(g, x);
  expect_outputs(s, 9, names, counts, ref, "slice_split_opset13.onnx");
  sg_session_destroy(s);
  sg_graph_destroy(g);

  g = onnx_test_import("split_opset11.onnx");
  s = run_slice_model(g, x);
  expect_outputs(s, 5, names + 4, counts + 4, ref + 30 + 32 + 24 + 48, "split_opset11.onnx");
  sg_session_destroy(s);
  sg_graph_destroy(g);

  /* num_outputs 3 of 8: parts of ceil(8/3) = 3, the last one 2. */
  float q[48];
  size_t n = 0;
  for (int part = 0; part < 3; part++)
    for (int i = 0; i < 6; i++)
      for (int j = 3 * part; j < 3 * part + 3 && j < 8; j++) q[n++] = x[i * 8 + j];
  static const char *const qnames[] = {"q0", "q1", "q2"};
  static const size_t qcounts[] = {18, 18, 12};
  g = onnx_test_import("split_opset18.onnx");
  s = run_slice_model(g, x);
  expect_outputs(s, 3, qnames, qcounts, q, "split_opset18.onnx");
  sg_session_destroy(s);
  sg_graph_destroy(g);
  free(x);
  free(ref);
}

/* ---- mask ops ----------------------------------------------------------------------- */

/* Range, Trilu (lower; upper with k = 1), Equal of floats and of integers,
 * Not, Expand of constants: all folded. Expand of the run-time input xr
 * [1,4] to [3,1,4] is a broadcast_to that the forward pass runs; an Expand
 * that keeps the shape is no op. */
static void test_mask_ops(void **state) {
  (void)state;
  sg_graph *g = onnx_test_import("mask_opset14.onnx");
  assert_int_equal(onnx_test_count_ops(g, SG_OP_BROADCAST_TO), 1);
  assert_int_equal(onnx_test_count_ops(g, SG_OP_WHERE), 2);
  float *x = onnx_test_read("mask_x.f32", 16 * sizeof(float)),
        *xr = onnx_test_read("mask_xr.f32", 4 * sizeof(float));
  float *ref = onnx_test_read("mask_y.f32", 82 * sizeof(float));
  static const int64_t xd[] = {4, 4}, xrd[] = {1, 4};
  sg_session *s = onnx_test_session(g);
  assert_status(sg_session_set_input(s, "x", SG_F32, 2, xd, x), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "xr", SG_F32, 2, xrd, xr), SG_OK, NULL);
  assert_status(sg_session_forward(s), SG_OK, NULL);
  static const char *const names[] = {"y1", "y2", "y3", "y4", "y5", "y6", "y7"};
  static const size_t counts[] = {16, 16, 12, 16, 16, 3, 3};
  expect_outputs(s, 7, names, counts, ref, "mask_opset14.onnx");
  sg_session_destroy(s);
  sg_graph_destroy(g);
  free(x);
  free(xr);
  free(ref);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gpt2),
      cmocka_unit_test(test_transformer_encoder_layer),
      cmocka_unit_test(test_pad_masks),
      cmocka_unit_test(test_t5_forms),
      cmocka_unit_test(test_forms),
      cmocka_unit_test(test_slice_split),
      cmocka_unit_test(test_mask_ops),
      cmocka_unit_test(test_einsum_attention),
      cmocka_unit_test(test_roberta_positions),
      cmocka_unit_test(test_reduce_max_pooling),
      cmocka_unit_test(test_reduce_max_forms),
      cmocka_unit_test(test_einsum_forms),
      cmocka_unit_test(test_einsum_forms2),
      cmocka_unit_test(test_einsum_forms_train),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
