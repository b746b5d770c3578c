/* Tensor-parallel split plans (SPEC P7): a column-split linear followed
 * through an elementwise op by a row-split one needs one all-reduce for the
 * pair, and so does attention's QKV projection, cut by heads, with its
 * output projection; dims that do not divide stay replicated or fall back
 * to a row split; backward ops are not annotated (they follow their forward
 * op). */
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "parallel/tp.h"
#include "test_util.h"

/* x [8,64] -> linear w1 [128,64] -> gelu -> linear w2 [64,128] (+ bias)
 * -> relu -> linear w3 [10,64] -> cross-entropy; optionally trained. */
static sg_graph *mlp(bool train) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  int64_t xd[] = {8, 64}, w1d[] = {128, 64}, w2d[] = {64, 128}, b2d[] = {64}, w3d[] = {10, 64}, ld[] = {8};
  sg_tensor x = sg_input(g, "x", SG_F32, 2, xd);
  sg_tensor h = sg_gelu(g, sg_linear(g, x, sg_parameter(g, "w1", SG_F32, 2, w1d, NULL), SG_NO_TENSOR), 0);
  sg_tensor b2 = sg_parameter(g, "b2", SG_F32, 1, b2d, NULL);
  sg_tensor y = sg_relu(g, sg_linear(g, h, sg_parameter(g, "w2", SG_F32, 2, w2d, NULL), b2));
  sg_tensor logits = sg_linear(g, y, sg_parameter(g, "w3", SG_F32, 2, w3d, NULL), SG_NO_TENSOR);
  sg_tensor loss = sg_cross_entropy(g, logits, sg_input(g, "labels", SG_I64, 1, ld), SG_REDUCTION_MEAN);
  sg_graph_mark_output(g, loss);
  if (train) {
    assert_int_equal(sg_graph_backward(g, loss), SG_OK);
    assert_int_equal(sg_graph_add_sgd(g, sg_input(g, "lr", SG_F32, 0, NULL), NULL), SG_OK);
  }
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  return g;
}

static sg_tp_annotation get(const sg_tp_plan *p, int32_t i) {
  sg_tp_annotation a;
  assert_int_equal(sg_tp_plan_get(p, i, &a), SG_OK);
  return a;
}

static void test_pairs(void **state) {
  (void)state;
  for (int train = 0; train < 2; train++) {
    sg_graph *g = mlp(train);
    sg_tp_params tp = SG_TP_PARAMS_INIT;
    sg_tp_plan *p;
    assert_int_equal(sg_tp_plan_create(g, &tp, &p), SG_OK);
    assert_int_equal(sg_tp_plan_count(p), 3); /* the forward linears only */
    sg_tp_annotation a = get(p, 0), b = get(p, 1), c = get(p, 2);
    sg_tensor w1, w2, w3, b2;
    sg_graph_find_tensor(g, "w1", &w1);
    sg_graph_find_tensor(g, "w2", &w2);
    sg_graph_find_tensor(g, "w3", &w3);
    sg_graph_find_tensor(g, "b2", &b2);
    /* w1: column split (its 128 output features), output left split for w2. */
    assert_int_equal(a.split, SG_TP_COLUMN);
    assert_int_equal(a.weight.id, w1.id);
    assert_int_equal(a.weight_axis, 0);
    assert_int_equal(a.ways, 2);
    assert_int_equal(a.output_comm, SG_TP_COMM_NONE);
    assert_int_equal(a.backward_comm, SG_TP_COMM_ALLREDUCE);
    /* w2: row split on the split input; one all-reduce; bias after it. */
    assert_int_equal(b.split, SG_TP_ROW);
    assert_int_equal(b.weight.id, w2.id);
    assert_int_equal(b.weight_axis, 1);
    assert_true(b.input_sharded);
    assert_int_equal(b.bias.id, b2.id);
    assert_int_equal(b.output_comm, SG_TP_COMM_ALLREDUCE);
    assert_int_equal(b.backward_comm, SG_TP_COMM_NONE);
    /* w3: input is whole again: column split, gathered for the loss. */
    assert_int_equal(c.split, SG_TP_COLUMN);
    assert_int_equal(c.weight.id, w3.id);
    assert_int_equal(c.output_comm, SG_TP_COMM_ALLGATHER);
    assert_string_equal(c.reason, "");
    char *json;
    assert_int_equal(sg_tp_plan_json(p, &json), SG_OK);
    cJSON *arr = cJSON_Parse(json);
    assert_int_equal(cJSON_GetArraySize(arr), 3);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 1), "split")->valuestring, "row");
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 1), "weight")->valuestring, "w2");
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 0), "output_comm")->valuestring, "none");
    cJSON_Delete(arr);
    sg_free(json);
    sg_tp_plan_destroy(p);
    sg_graph_destroy(g);
  }
}

static void test_divisibility(void **state) {
  (void)state;
  sg_graph *g = mlp(false);
  sg_tp_params tp = SG_TP_PARAMS_INIT;
  sg_tp_plan *p;
  /* 4 ways: w3's 10 outputs do not divide, its 64 inputs do: a row split
   * that slices its (whole) input and gathers the input gradient. */
  tp.ways = 4;
  assert_int_equal(sg_tp_plan_create(g, &tp, &p), SG_OK);
  sg_tp_annotation c = get(p, 2);
  assert_int_equal(c.split, SG_TP_ROW);
  assert_false(c.input_sharded);
  assert_int_equal(c.output_comm, SG_TP_COMM_ALLREDUCE);
  assert_int_equal(c.backward_comm, SG_TP_COMM_ALLGATHER);
  sg_tp_plan_destroy(p);
  /* 3 ways: nothing divides 128 and 64: replicated, with the reason. */
  tp.ways = 3;
  assert_int_equal(sg_tp_plan_create(g, &tp, &p), SG_OK);
  for (int32_t i = 0; i < sg_tp_plan_count(p); i++) {
    sg_tp_annotation a = get(p, i);
    assert_int_equal(a.split, SG_TP_REPLICATE);
    assert_int_equal(a.weight_axis, -1);
    assert_non_null(strstr(a.reason, "divide"));
  }
  sg_tp_plan_destroy(p);
  /* Small weights stay whole. */
  tp.ways = 2;
  tp.min_weight_bytes = 20000; /* w1 and w2 are 32 KiB, w3 2.5 KiB */
  assert_int_equal(sg_tp_plan_create(g, &tp, &p), SG_OK);
  assert_int_equal(get(p, 0).split, SG_TP_COLUMN);
  assert_int_equal(get(p, 2).split, SG_TP_REPLICATE);
  assert_non_null(strstr(get(p, 2).reason, "min_weight_bytes"));
  sg_tp_plan_destroy(p);
  /* Errors. */
  tp.ways = 1;
  assert_status(sg_tp_plan_create(g, &tp, &p), SG_ERR_INVALID_ARG, "ways");
  assert_null(p);
  assert_status(sg_tp_plan_create(NULL, NULL, &p), SG_ERR_INVALID_ARG, NULL);
  sg_graph *open;
  assert_int_equal(sg_graph_create(&open), SG_OK);
  assert_status(sg_tp_plan_create(open, NULL, &p), SG_ERR_STATE, "finalized");
  sg_graph_destroy(open);
  assert_int_equal(sg_tp_plan_create(g, NULL, &p), SG_OK);
  sg_tp_annotation a;
  assert_status(sg_tp_plan_get(p, 3, &a), SG_ERR_RANGE, "annotation 3");
  sg_tp_plan_destroy(p);
  sg_tp_plan_destroy(NULL);
  sg_graph_destroy(g);
}

/* x [16,32] -> linear wqkv [96,32] (+ bias) -> q, k, v sliced, 4 heads of 8
 * over 2 sequences of 8 -> softmax(q k^T / sqrt 8 + mask) v -> merged ->
 * linear wo [32,32] -> `tail` -> linear w3 [10,32] -> cross-entropy. tail 0:
 * nothing; 1: a learned scale [1,1,1,8] multiplies the scores (a whole
 * operand with a gradient); 2: the softmax runs over the heads; 3: the
 * fused attention op instead of matmuls, mask and softmax; 4: the fused
 * attention with dropout, and a dropout on the output projection's y; 5:
 * a cumsum of the scores along the keys; 6: a cumsum over the heads; 7:
 * the scores less their max over the keys (reduce_max, keepdims); 8: less
 * their max over the heads. */
static sg_graph *attention(int tail) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  int64_t xd[] = {16, 32}, wqd[] = {96, 32}, bqd[] = {96}, wod[] = {32, 32}, w3d[] = {10, 32}, ld[] = {16},
          md[] = {8, 8}, sd[] = {1, 1, 1, 8}, hd[] = {2, 8, 4, 8};
  sg_tensor x = sg_input(g, "x", SG_F32, 2, xd);
  sg_tensor qkv = sg_linear(g, x, sg_parameter(g, "wqkv", SG_F32, 2, wqd, NULL),
                            sg_parameter(g, "bqkv", SG_F32, 1, bqd, NULL));
  sg_tensor h[3];
  for (int i = 0; i < 3; i++) {
    int64_t qv[] = {0, 2, 1, 3}, k[] = {0, 2, 3, 1};
    h[i] = sg_transpose(g, sg_reshape(g, sg_slice(g, qkv, -1, 32 * i, 32), 4, hd), 4,
                        i == 1 && tail != 3 ? k : qv);
  }
  sg_tensor heads;
  if (tail == 3) {
    heads = sg_attention(g, h[0], h[1], h[2], 0.0, 1);
  } else if (tail == 4) {
    heads = sg_attention_dropout(g, h[0], h[1], h[2], 0.0, 1, 0.1, 77);
  } else {
    sg_tensor att =
        sg_add(g, sg_mul_scalar(g, sg_matmul(g, h[0], h[1]), 0.35), sg_input(g, "mask", SG_F32, 2, md));
    if (tail == 1) att = sg_mul(g, att, sg_parameter(g, "scale", SG_F32, 4, sd, NULL));
    if (tail == 5 || tail == 6) att = sg_cumsum(g, att, tail == 5 ? -1 : 1, 0, 0);
    const int64_t max_axis[] = {tail == 7 ? -1 : 1};
    if (tail == 7 || tail == 8) att = sg_sub(g, att, sg_reduce_max(g, att, 1, max_axis, 1));
    att = sg_softmax(g, att, tail == 2 ? 1 : -1);
    heads = sg_matmul(g, att, h[2]);
  }
  int64_t perm[] = {0, 2, 1, 3};
  sg_tensor o = sg_reshape(g, sg_transpose(g, heads, 4, perm), 2, xd);
  sg_tensor y = sg_linear(g, o, sg_parameter(g, "wo", SG_F32, 2, wod, NULL), SG_NO_TENSOR);
  if (tail == 4) y = sg_dropout(g, y, 0.1, 78, 1); /* on the row split's whole (all-reduced) output */
  sg_tensor logits = sg_linear(g, y, sg_parameter(g, "w3", SG_F32, 2, w3d, NULL), SG_NO_TENSOR);
  sg_graph_mark_output(g,
                       sg_cross_entropy(g, logits, sg_input(g, "labels", SG_I64, 1, ld), SG_REDUCTION_MEAN));
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  return g;
}

/* Attention: the QKV projection is cut by heads (3 blocks), the heads run
 * apart, the output projection is a row split on its cut input: one
 * all-reduce for the pair. What cannot run cut gathers the projection. */
static void test_attention(void **state) {
  (void)state;
  sg_tp_params tp = SG_TP_PARAMS_INIT;
  for (int run = 0; run < 4; run++) { /* 2 and 4 ways, unfused and fused */
    tp.ways = run < 2 ? 2 : 4;
    sg_graph *g = attention(run % 2 ? 3 : 0);
    sg_tp_plan *p;
    assert_int_equal(sg_tp_plan_create(g, &tp, &p), SG_OK);
    sg_tp_annotation qkv = get(p, 0), out = get(p, 1);
    assert_int_equal(qkv.split, SG_TP_COLUMN);
    assert_int_equal(qkv.output_comm, SG_TP_COMM_NONE);
    assert_int_equal(out.split, SG_TP_ROW);
    assert_true(out.input_sharded);
    sg_tensor w, b, wo;
    sg_graph_find_tensor(g, "wqkv", &w);
    sg_graph_find_tensor(g, "bqkv", &b);
    sg_graph_find_tensor(g, "wo", &wo);
    int axis = 9, groups = 9;
    assert_int_equal(sg_tp_plan_tensor_split(p, w, &axis, &groups), SG_OK);
    assert_int_equal(axis, 0);
    assert_int_equal(groups, 3);
    assert_int_equal(sg_tp_plan_tensor_split(p, b, &axis, &groups), SG_OK);
    assert_int_equal(axis, 0);
    assert_int_equal(groups, 3);
    assert_int_equal(sg_tp_plan_tensor_split(p, wo, &axis, &groups), SG_OK);
    assert_int_equal(axis, 1);
    assert_int_equal(groups, 1);
    sg_tensor x;
    sg_graph_find_tensor(g, "x", &x);
    assert_int_equal(sg_tp_plan_tensor_split(p, x, &axis, &groups), SG_OK);
    assert_int_equal(axis, -1);
    char *json = NULL;
    assert_int_equal(sg_tp_plan_json(p, &json), SG_OK);
    assert_non_null(strstr(json, "\"groups\":3"));
    sg_free(json);
    assert_status(sg_tp_plan_tensor_split(p, (sg_tensor){99999}, &axis, &groups), SG_ERR_INVALID_ARG,
                  "not in the planned graph");
    assert_status(sg_tp_plan_tensor_split(NULL, w, &axis, &groups), SG_ERR_INVALID_ARG, "NULL");
    sg_tp_plan_destroy(p);
    sg_graph_destroy(g);
  }
  /* A cumsum or a max along the keys keeps the heads cut; one over the heads gathers them. */
  for (int tail = 5; tail <= 8; tail++) {
    sg_graph *g = attention(tail);
    sg_tp_plan *p;
    tp.ways = 2;
    assert_int_equal(sg_tp_plan_create(g, &tp, &p), SG_OK);
    sg_tp_annotation qkv = get(p, 0), out = get(p, 1);
    assert_int_equal(qkv.split, SG_TP_COLUMN);
    bool keys = tail == 5 || tail == 7;
    assert_int_equal(qkv.output_comm, keys ? SG_TP_COMM_NONE : SG_TP_COMM_ALLGATHER);
    assert_int_equal(out.split, keys ? SG_TP_ROW : SG_TP_COLUMN);
    sg_tp_plan_destroy(p);
    sg_graph_destroy(g);
  }
  /* 8 ways: 4 heads do not divide, so q, k and v cannot be cut by heads: gathered. */
  tp.ways = 8;
  for (int tail = 0; tail <= 2; tail++) {
    sg_graph *g = attention(tail);
    sg_tp_plan *p;
    tp.ways = tail == 0 ? 8 : 2;
    assert_int_equal(sg_tp_plan_create(g, &tp, &p), SG_OK);
    sg_tp_annotation qkv = get(p, 0), out = get(p, 1);
    /* Gathered: a learned whole operand (its gradient would be partial) or a softmax over the heads. */
    assert_int_equal(qkv.split, SG_TP_COLUMN);
    assert_int_equal(qkv.output_comm, SG_TP_COMM_ALLGATHER);
    assert_int_equal(out.split, SG_TP_COLUMN);
    sg_tensor w;
    sg_graph_find_tensor(g, "wqkv", &w);
    int axis = 9, groups = 9;
    assert_int_equal(sg_tp_plan_tensor_split(p, w, &axis, &groups), SG_OK);
    assert_int_equal(groups, 1);
    sg_tp_plan_destroy(p);
    sg_graph_destroy(g);
  }
}

/* The seed of the first op of `kind` in g. */
static int64_t seed_of(const sg_graph *g, sg_op_kind kind, int at) {
  for (uint32_t k = 0; k < g->n_ops; k++)
    if (g->ops[k].kind == kind) return sg__attr_i(&g->ops[k], at);
  fail_msg("no op of kind %s", sg_op_kind_name(kind));
  return 0;
}

/* Dropout under the rewrite: the attention's, on cut (per-head) weights, gets a seed of each rank's
 * own, so the shares do not drop their heads alike; the dropout on y, which every share holds whole,
 * keeps its seed, so they draw one mask. */
static void test_rewrite_dropout_seeds(void **state) {
  (void)state;
  sg_graph *g = attention(4);
  sg_tp_params tp = SG_TP_PARAMS_INIT;
  tp.ways = 2;
  sg_tp_plan *p;
  assert_int_equal(sg_tp_plan_create(g, &tp, &p), SG_OK);
  sg_tensor loss = {g->outputs[0]};
  int64_t att[2], drop[2];
  for (int rank = 0; rank < 2; rank++) {
    sg_graph *r;
    sg__tp_sync *syncs;
    int n_syncs;
    assert_int_equal(sg__tp_rewrite(g, loss, p, 2, rank, &r, &syncs, &n_syncs), SG_OK);
    att[rank] = seed_of(r, SG_OP_ATTENTION, 3);
    drop[rank] = seed_of(r, SG_OP_DROPOUT, 1);
    sg__tp_syncs_free(syncs, n_syncs);
    sg_graph_destroy(r);
  }
  assert_true(att[0] != att[1]);
  assert_true(att[0] != 77 && att[1] != 77);
  assert_int_equal(drop[0], 78);
  assert_int_equal(drop[1], 78);
  sg_tp_plan_destroy(p);
  sg_graph_destroy(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pairs),
      cmocka_unit_test(test_divisibility),
      cmocka_unit_test(test_attention),
      cmocka_unit_test(test_rewrite_dropout_seeds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
