/* Verifier errors. Graphs are built with the builder, then their internals
 * are damaged the way a hostile or corrupt file could, and the verifier must
 * name the problem. */
#include <string.h>

#include "graph/graph_internal.h"
#include "test_util.h"

/* x -> relu -> add(., w) -> relu -> out, plus a batch norm in training form. */
static sg_graph *build(void) {
  sg_graph *g = NULL;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  int64_t xs[] = {2, 3, 4, 4}, cs[] = {3};
  sg_tensor x = sg_input(g, "x", SG_F32, 4, xs);
  sg_tensor w = sg_parameter(g, "w", SG_F32, 1, (int64_t[]){4}, NULL);
  sg_tensor h = sg_relu(g, x);   /* op 0 */
  sg_tensor a = sg_add(g, h, w); /* op 1 */
  sg_tensor r = sg_relu(g, a);   /* op 2 */
  sg_tensor gm = sg_parameter(g, "gamma", SG_F32, 1, cs, NULL);
  sg_tensor bt = sg_parameter(g, "beta", SG_F32, 1, cs, NULL);
  sg_tensor rm = sg_graph_add_tensor(g, "rm", SG_F32, SG_ROLE_STATE, 1, cs, NULL);
  sg_tensor rv = sg_graph_add_tensor(g, "rv", SG_F32, SG_ROLE_STATE, 1, cs, NULL);
  sg_tensor y = sg_batch_norm(g, r, gm, bt, rm, rv, NULL); /* op 3 */
  assert_int_equal(sg_graph_mark_output(g, y), SG_OK);
  assert_int_equal(sg_graph_status(g), SG_OK);
  assert_int_equal(sg_graph_verify(g), SG_OK);
  return g;
}

static void test_valid(void **state) {
  (void)state;
  sg_graph *g = build();
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  sg_graph_destroy(g);
}

static void test_cycle(void **state) {
  (void)state;
  sg_graph *g = build();
  /* relu_0 now consumes the output of relu_2, which depends on relu_0. */
  g->ops[0].inputs[0] = g->ops[2].outputs[0];
  assert_status(sg_graph_verify(g), SG_ERR_CYCLE, "cycle");
  assert_non_null(strstr(sg_last_error(), "relu_"));
  sg_graph_destroy(g);
  /* A self-loop. */
  g = build();
  g->ops[1].inputs[1] = g->ops[1].outputs[0];
  assert_status(sg_graph_verify(g), SG_ERR_CYCLE, "op 'add_1' consumes tensor 'add_1'");
  sg_graph_destroy(g);
}

static void test_ids_and_arity(void **state) {
  (void)state;
  sg_graph *g = build();
  g->ops[1].inputs[0] = 999;
  assert_status(sg_graph_verify(g), SG_ERR_RANGE, "add 'add_1': input 0 refers to tensor id 999");
  sg_graph_destroy(g);
  g = build();
  g->ops[1].inputs[0] = -1;
  assert_status(sg_graph_verify(g), SG_ERR_RANGE, "not optional");
  sg_graph_destroy(g);
  g = build();
  g->ops[0].outputs[0] = -7;
  assert_status(sg_graph_verify(g), SG_ERR_RANGE, "output 0 refers to tensor id -7");
  sg_graph_destroy(g);
  g = build();
  g->ops[1].n_inputs = 1;
  assert_status(sg_graph_verify(g), SG_ERR_ARITY, "add 'add_1': has 1 inputs");
  sg_graph_destroy(g);
  g = build();
  g->ops[3].n_outputs = 1; /* training batch norm has 3 outputs */
  assert_status(sg_graph_verify(g), SG_ERR_DANGLING, "has no producing op");
  sg_graph_destroy(g);
  g = build();
  g->outputs[0] = 4242;
  assert_status(sg_graph_verify(g), SG_ERR_RANGE, "graph output 0");
  sg_graph_destroy(g);
}

static void test_kinds_types_roles(void **state) {
  (void)state;
  sg_graph *g = build();
  g->ops[2].kind = (sg_op_kind)200;
  assert_status(sg_graph_verify(g), SG_ERR_UNSUPPORTED, "op 'relu_2': unknown op kind 200");
  sg_graph_destroy(g);
  g = build();
  g->tensors[0].dtype = (sg_dtype)42;
  assert_status(sg_graph_verify(g), SG_ERR_UNSUPPORTED, "tensor 'x': unknown dtype 42");
  sg_graph_destroy(g);
  g = build();
  g->tensors[1].role = (sg_role)0;
  assert_status(sg_graph_verify(g), SG_ERR_UNSUPPORTED, "tensor 'w': unknown role 0");
  sg_graph_destroy(g);
  g = build();
  g->tensors[g->ops[0].outputs[0]].role = SG_ROLE_PARAMETER;
  assert_status(sg_graph_verify(g), SG_ERR_FORMAT, "role parameter but is produced by op 'relu_0'");
  sg_graph_destroy(g);
  g = build();
  /* An activation that nothing produces. */
  sg__tensor t = {.name = "orphan",
                  .dtype = SG_F32,
                  .role = SG_ROLE_ACTIVATION,
                  .ndim = 1,
                  .dims = {2},
                  .producer = -1,
                  .nbytes = 8};
  int32_t id;
  assert_int_equal(sg__graph_push_tensor(g, &t, &id), SG_OK);
  assert_status(sg_graph_verify(g), SG_ERR_DANGLING, "tensor 'orphan' (activation) has no producing op");
  sg_graph_destroy(g);
  g = build();
  /* Running stats of a training batch norm must be state. */
  g->tensors[sg__tensor_lookup(g, "rm")].role = SG_ROLE_INPUT;
  g->n_inputs = 0; /* keep the input list consistent with the roles */
  g->inputs[g->n_inputs++] = 0;
  g->inputs[g->n_inputs++] = sg__tensor_lookup(g, "rm");
  assert_status(sg_graph_verify(g), SG_ERR_INVALID_ARG, "updates tensor 'rm' in place");
  sg_graph_destroy(g);
}

static void test_names_and_producers(void **state) {
  (void)state;
  sg_graph *g = build();
  g->tensors[1].name = "x";
  assert_status(sg_graph_verify(g), SG_ERR_DUPLICATE, "both named 'x'");
  sg_graph_destroy(g);
  g = build();
  g->ops[2].name = "relu_0";
  assert_status(sg_graph_verify(g), SG_ERR_DUPLICATE, "ops 0 and 2 are both named 'relu_0'");
  sg_graph_destroy(g);
  g = build();
  g->tensors[0].name = "";
  assert_status(sg_graph_verify(g), SG_ERR_FORMAT, "tensor 0: its name is empty");
  sg_graph_destroy(g);
  g = build();
  g->tensors[0].name = "bad\x01name";
  assert_status(sg_graph_verify(g), SG_ERR_FORMAT, "tensor 0: its name contains a control character");
  sg_graph_destroy(g);
  g = build();
  g->ops[0].name = "caf\xc3";
  assert_status(sg_graph_verify(g), SG_ERR_FORMAT, "op 0: its name is not valid UTF-8");
  sg_graph_destroy(g);
  g = build();
  /* Two ops claim the same output. */
  g->ops[2].outputs[0] = g->ops[0].outputs[0];
  assert_status(sg_graph_verify(g), SG_ERR_DUPLICATE, "is produced by both op 'relu_0' and op 'relu_2'");
  sg_graph_destroy(g);
}

static void test_shapes_and_attrs(void **state) {
  (void)state;
  sg_graph *g = build();
  g->tensors[g->ops[0].outputs[0]].dims[3] = 5;
  g->tensors[g->ops[0].outputs[0]].nbytes = 2 * 3 * 4 * 5 * 4;
  assert_status(sg_graph_verify(g), SG_ERR_SHAPE, "");
  sg_graph_destroy(g);
  g = build();
  sg__tensor *out = &g->tensors[g->ops[2].outputs[0]];
  out->dtype = SG_F16;
  out->nbytes /= 2;
  assert_status(sg_graph_verify(g), SG_ERR_DTYPE, "");
  sg_graph_destroy(g);
  /* Recorded shape of relu_2's output differs from what the op produces. */
  g = build();
  out = &g->tensors[g->ops[2].outputs[0]];
  out->ndim = 3;
  out->nbytes = 2 * 3 * 16 * 4;
  out->dims[2] = 16;
  assert_status(
      sg_graph_verify(g), SG_ERR_SHAPE,
      "relu 'relu_2': output 0 'relu_2' is recorded as [2,3,16] f32 but the op produces [2,3,4,4] f32");
  sg_graph_destroy(g);
  g = build();
  g->ops[3].attrs[0].type = SG_ATTR_INT;
  assert_status(sg_graph_verify(g), SG_ERR_ATTRIBUTE, "batch_norm 'batch_norm_3': attribute 0 is not 'eps'");
  sg_graph_destroy(g);
  g = build();
  g->ops[3].attrs[0].f = -1;
  assert_status(sg_graph_verify(g), SG_ERR_ATTRIBUTE, "eps is -1");
  sg_graph_destroy(g);
  g = build();
  g->ops[3].n_attrs = 2;
  assert_status(sg_graph_verify(g), SG_ERR_ATTRIBUTE, "has 2 attributes; the op has 3");
  sg_graph_destroy(g);
  g = build();
  g->tensors[0].dims[0] = -3;
  assert_status(sg_graph_verify(g), SG_ERR_SHAPE, "tensor 'x': dim 0 is -3");
  sg_graph_destroy(g);
  g = build();
  g->tensors[0].ndim = 9;
  assert_status(sg_graph_verify(g), SG_ERR_RANGE, "rank 9");
  sg_graph_destroy(g);
  g = build();
  /* 2^63 elements. */
  g->tensors[0].ndim = 2;
  g->tensors[0].dims[0] = (int64_t)1 << 32;
  g->tensors[0].dims[1] = (int64_t)1 << 31;
  assert_status(sg_graph_verify(g), SG_ERR_RANGE, "tensor 'x': element count exceeds 2^56");
  sg_graph_destroy(g);
  g = build();
  g->tensors[0].nbytes = 12;
  assert_status(sg_graph_verify(g), SG_ERR_FORMAT, "byte size 12 does not match");
  sg_graph_destroy(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_valid),
      cmocka_unit_test(test_cycle),
      cmocka_unit_test(test_ids_and_arity),
      cmocka_unit_test(test_kinds_types_roles),
      cmocka_unit_test(test_names_and_producers),
      cmocka_unit_test(test_shapes_and_attrs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
