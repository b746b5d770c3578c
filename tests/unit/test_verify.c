/* Verifier errors. Graphs are built with the builder, then their internals
 * are damaged the way a hostile or corrupt file could, and the verifier must
 * name the problem. */
#include <string.h>

#include <xxhash.h>

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

/* x [1,1,1,5] -> conv2d with a [2,1,1,3] weight and stride (3,1) -> out
 * [1,2,1,3]. Along the height both the input and the kernel are 1, so any
 * stride or dilation there gives the same shapes: only attribute bounds can
 * refuse them. */
static sg_graph *build_conv(void) {
  sg_graph *g = NULL;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  sg_tensor x = sg_input(g, "x", SG_F32, 4, (int64_t[]){1, 1, 1, 5});
  sg_tensor w = sg_parameter(g, "w", SG_F32, 4, (int64_t[]){2, 1, 1, 3}, NULL);
  sg_conv2d_params p = SG_CONV2D_PARAMS_INIT;
  p.stride[0] = 3;
  sg_tensor y = sg_conv2d(g, x, w, SG_NO_TENSOR, &p);
  assert_int_equal(sg_graph_mark_output(g, y), SG_OK);
  assert_status(sg_graph_verify(g), SG_OK, NULL);
  return g;
}

static uint64_t rd64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}
static void wr64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> 8 * i);
}

/* Recomputes every checksum of an .sgg image (docs/format.md). */
static void fix_checksums(uint8_t *f, size_t size) {
  uint32_t count = (uint32_t)rd64(f + 16);
  uint64_t table = rd64(f + 24);
  assert_true(table + 32ull * count <= size);
  for (uint32_t i = 0; i < count; i++) {
    uint8_t *e = f + table + 32ull * i;
    wr64(e + 24, XXH64(f + rd64(e + 8), (size_t)rd64(e + 16), 0));
  }
  wr64(f + 48, XXH64(f + table, 32ull * count, 0));
  wr64(f + 56, XXH64(f, 56, 0));
}

/* Strides and dilations beyond 2^30 fit no kernel's arithmetic (oneDNN
 * refused a stride of 2^31 at run time): the builder, the verifier and the
 * .sgg reader refuse them first, naming the op, the attribute and the value. */
static void test_conv_attr_bounds(void **state) {
  (void)state;
  /* The C API. */
  sg_graph *g = NULL;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  sg_tensor x = sg_input(g, "x", SG_F32, 4, (int64_t[]){1, 1, 1, 5});
  sg_tensor w = sg_parameter(g, "w", SG_F32, 4, (int64_t[]){2, 1, 1, 3}, NULL);
  sg_conv2d_params p = SG_CONV2D_PARAMS_INIT;
  p.stride[0] = (int64_t)1 << 31;
  assert_true(sg_conv2d(g, x, w, SG_NO_TENSOR, &p).id < 0);
  assert_status(sg_graph_status(g), SG_ERR_ATTRIBUTE,
                "conv2d 'conv2d_0': stride (2147483648,1): stride[0] is 2147483648; must be in 1..2^30");
  assert_status(sg_graph_finalize(g), SG_ERR_ATTRIBUTE, "stride[0] is 2147483648");
  sg_graph_destroy(g);
  assert_int_equal(sg_graph_create(&g), SG_OK);
  x = sg_input(g, "x", SG_F32, 4, (int64_t[]){1, 1, 1, 5});
  w = sg_parameter(g, "w", SG_F32, 4, (int64_t[]){2, 1, 1, 3}, NULL);
  p = (sg_conv2d_params)SG_CONV2D_PARAMS_INIT;
  p.dilation[0] = (int64_t)1 << 62;
  assert_true(sg_conv2d(g, x, w, SG_NO_TENSOR, &p).id < 0);
  assert_status(sg_graph_status(g), SG_ERR_ATTRIBUTE,
                "dilation[0] is 4611686018427387904; must be in 1..2^30");
  sg_graph_destroy(g);

  /* The verifier, on a graph damaged after building. */
  g = build_conv();
  ((int64_t *)g->ops[0].attrs[0].ints)[0] = (int64_t)1 << 31; /* stride */
  assert_status(sg_graph_verify(g), SG_ERR_ATTRIBUTE, "conv2d 'conv2d_0': stride (2147483648,1)");
  sg_graph_destroy(g);
  g = build_conv();
  ((int64_t *)g->ops[0].attrs[2].ints)[0] = (int64_t)1 << 62; /* dilation */
  assert_status(sg_graph_verify(g), SG_ERR_ATTRIBUTE, "dilation[0] is 4611686018427387904");
  sg_graph_destroy(g);
  g = build_conv();
  g->ops[0].attrs[3].i = (int64_t)1 << 40; /* groups */
  assert_status(sg_graph_verify(g), SG_ERR_ATTRIBUTE, "groups is 1099511627776; must be in 1..2^30");
  sg_graph_destroy(g);

  /* A file: the stride (3,1) patched to (2^31,1), checksums made valid. */
  g = build_conv();
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  void *data = NULL;
  size_t n = 0;
  assert_status(sg_graph_save_to_memory(g, &data, &n), SG_OK, NULL);
  sg_graph_destroy(g);
  uint8_t *f = data, *at = NULL;
  for (size_t i = 64; i + 16 <= n; i++)
    if (rd64(f + i) == 3 && rd64(f + i + 8) == 1) {
      assert_null(at); /* the pattern is the stride, and only the stride */
      at = f + i;
    }
  assert_non_null(at);
  wr64(at, (uint64_t)1 << 31);
  fix_checksums(f, n);
  g = (sg_graph *)&n;
  assert_status(sg_graph_load_from_memory(f, n, &g), SG_ERR_ATTRIBUTE, "stride[0] is 2147483648");
  assert_null(g);
  /* The same bytes with the stride back are a valid file (the patch and
   * checksums are right). */
  wr64(at, 3);
  fix_checksums(f, n);
  assert_status(sg_graph_load_from_memory(f, n, &g), SG_OK, NULL);
  sg_graph_destroy(g);
  sg_free(data);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_valid),
      cmocka_unit_test(test_cycle),
      cmocka_unit_test(test_ids_and_arity),
      cmocka_unit_test(test_kinds_types_roles),
      cmocka_unit_test(test_names_and_producers),
      cmocka_unit_test(test_shapes_and_attrs),
      cmocka_unit_test(test_conv_attr_bounds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
