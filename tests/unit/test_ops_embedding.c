/* embedding and embedding_backward (kinds 63, 64):
 *  - forward through a CPU session against hand-computed rows, ids of rank
 *    0 to 3, i32 and i64;
 *  - the CPU kernels of both kinds against the double-precision reference
 *    of ref_ops.c, repeated ids, both id dtypes, row and column counts that
 *    put the kernels on their threaded paths;
 *  - the backward's result does not depend on the thread count (bitwise)
 *    and matches sums written out here;
 *  - an id outside 0..V-1 fails the run with SG_ERR_RANGE naming the op,
 *    the id, its position and V, in both kernels;
 *  - the gradient rule: one embedding_backward per lookup, V as its
 *    attribute, no gradient for the ids, and a table used twice (tied
 *    input and output embeddings) against central finite differences of
 *    the reference (test_ncheck.h);
 *  - builder errors, the .sgg round trip and the cost model's entry. */
#include <float.h>

#include "graph/graph_internal.h"
#include "test_cpu_harness.h"
#include "test_ncheck.h"

/* ---- forward through a session -------------------------------------------- */

static void test_hand_computed(void **state) {
  (void)state;
  /* table [4,3]: row v is (10v, 10v + 1, 10v + 2). */
  float table[12];
  for (int v = 0; v < 4; v++)
    for (int c = 0; c < 3; c++) table[v * 3 + c] = (float)(10 * v + c);
  const int64_t ids64[6] = {3, 0, 3, 1, 1, 2};
  const int32_t ids32[6] = {3, 0, 3, 1, 1, 2};
  /* ids [6], [2,3], [1,2,3] and a scalar (rank 0: one row of C). */
  const int64_t shapes[4][3] = {{6}, {2, 3}, {1, 2, 3}, {0}};
  const int ranks[4] = {1, 2, 3, 0};
  for (int dt = 0; dt < 2; dt++)
    for (int s = 0; s < 4; s++) {
      sg_graph *g;
      assert_status(sg_graph_create(&g), SG_OK, NULL);
      sg_dtype idt = dt ? SG_I64 : SG_I32;
      sg_tensor ids = sg_input(g, "ids", idt, ranks[s], shapes[s]);
      sg_tensor y = sg_embedding(g, sg_constant(g, "table", SG_F32, 2, D(4, 3), table), ids);
      sg_tensor_info yi;
      assert_status(sg_graph_tensor_info(g, y, &yi), SG_OK, NULL);
      assert_int_equal(yi.ndim, ranks[s] + 1);
      for (int i = 0; i < ranks[s]; i++) assert_int_equal(yi.dims[i], shapes[s][i]);
      assert_int_equal(yi.dims[ranks[s]], 3);
      assert_int_equal(yi.dtype, SG_F32);
      assert_status(sg_tensor_set_name(g, y, "y"), SG_OK, NULL);
      assert_status(sg_graph_mark_output(g, y), SG_OK, NULL);
      assert_status(sg_graph_finalize(g), SG_OK, NULL);
      sg_session_params sp = SG_SESSION_PARAMS_INIT;
      sp.threads = 1;
      sg_session *ss;
      assert_status(sg_session_create(g, &sp, &ss), SG_OK, NULL);
      assert_status(sg_session_compile(ss), SG_OK, NULL);
      assert_status(sg_session_set_input(ss, "ids", idt, ranks[s], shapes[s],
                                         dt ? (const void *)ids64 : (const void *)ids32),
                    SG_OK, NULL);
      assert_status(sg_session_forward(ss), SG_OK, NULL);
      float got[18];
      int64_t n = ranks[s] == 0 ? 1 : 6;
      assert_status(sg_session_read(ss, "y", got, (size_t)n * 3 * sizeof(float)), SG_OK, NULL);
      for (int64_t i = 0; i < n; i++)
        for (int c = 0; c < 3; c++)
          if (got[i * 3 + c] != (float)(10 * ids64[i] + c))
            fail_msg("ids rank %d %s: y[%lld][%d] is %g, expected %g", ranks[s], dt ? "i64" : "i32",
                     (long long)i, c, (double)got[i * 3 + c], (double)(10 * ids64[i] + c));
      sg_session_destroy(ss);
      sg_graph_destroy(g);
    }
}

/* ---- kernels against the reference ------------------------------------------ */

/* n ids in 0..V-1 with repeats (every id below V/2 at least twice when n
 * is large enough), as the dtype asks. */
static void fill_ids(sg_dtype dt, int64_t n, int64_t V, void *out) {
  for (int64_t i = 0; i < n; i++) {
    int64_t v = (i * 7 + i / 3) % (V / 2 + 1);
    if (i % 5 == 4) v = V - 1 - i % V; /* the upper half too */
    if (dt == SG_I64) ((int64_t *)out)[i] = v;
    else ((int32_t *)out)[i] = (int32_t)v;
  }
}

/* embedding (table [V,C], ids of `ndim` dims) and, with `backward`, an
 * embedding_backward of a random dy: each checked with the reference. */
static void check_kernels(sg_dtype dt, int ndim, const int64_t *dims, int64_t V, int64_t C) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= dims[i];
  void *ids = malloc((size_t)n * 8);
  fill_ids(dt, n, V, ids);
  char what[96];
  snprintf(what, sizeof what, "embedding %s ids rank %d, V %lld, C %lld", dt == SG_I64 ? "i64" : "i32", ndim,
           (long long)V, (long long)C);
  sg_graph *g = h_graph();
  sg_tensor idt = h_src(g, SG_ROLE_CONSTANT, dt, ndim, dims, ids);
  sg_embedding(g, IN(g, V, C), idt);
  h_check_last(g, 1, 0, 0, what); /* copies: exact */
  sg_graph_destroy(g);

  g = h_graph();
  idt = h_src(g, SG_ROLE_CONSTANT, dt, ndim, dims, ids);
  int64_t ddims[SG_MAX_DIMS];
  memcpy(ddims, dims, sizeof(int64_t) * (size_t)ndim);
  ddims[ndim] = C;
  sg_tensor in[] = {h_src(g, SG_ROLE_INPUT, SG_F32, ndim + 1, ddims, NULL), idt};
  sg_attr a = {.name = "num_embeddings", .type = SG_ATTR_INT, .i = V};
  assert_status(sg_graph_add_op(g, SG_OP_EMBEDDING_BACKWARD, 2, in, 1, &a, 0, NULL, NULL), SG_OK, NULL);
  /* f32 sums of up to a few dozen rows against double ones. */
  snprintf(what, sizeof what, "embedding_backward %s ids rank %d, V %lld, C %lld",
           dt == SG_I64 ? "i64" : "i32", ndim, (long long)V, (long long)C);
  h_check_last(g, 1, 1e-5, 1e-6, what);
  sg_graph_destroy(g);
  free(ids);
}

static void test_kernels_against_reference(void **state) {
  (void)state;
  for (int k = 0; k < 2; k++) {
    sg_dtype dt = k ? SG_I64 : SG_I32;
    check_kernels(dt, 1, D(9), 5, 3);
    check_kernels(dt, 2, D(3, 4), 7, 40);
    check_kernels(dt, 3, D(2, 3, 5), 11, 17);
    check_kernels(dt, 0, D(0), 4, 6);
    /* 512 rows of 72: the forward's rows and the backward's five column
     * blocks split over the harness's two threads. */
    check_kernels(dt, 2, D(8, 64), 50, 72);
  }
}

/* The table's gradient from a session with 1 and with 2 threads: bitwise
 * the same, and the sums of R's rows by id written out here (in double, so
 * within f32 rounding). */
static void test_backward_deterministic(void **state) {
  (void)state;
  enum { V = 37, C = 100, N = 600 };
  static float r[N * C], got[2][V * C];
  static int64_t ids[N];
  sg_test_fill(r, N * C, 99);
  fill_ids(SG_I64, N, V, ids);
  for (int run = 0; run < 2; run++) {
    sg_graph *g;
    assert_status(sg_graph_create(&g), SG_OK, NULL);
    sg_tensor table = sg_parameter(g, "table", SG_F32, 2, D(V, C), NULL);
    sg_tensor y = sg_embedding(g, table, sg_constant(g, "ids", SG_I64, 1, D(N), ids));
    sg_tensor loss = sg_reduce_sum(g, sg_mul(g, y, sg_constant(g, "r", SG_F32, 2, D(N, C), r)), 0, NULL, 0);
    assert_status(sg_graph_backward(g, loss), SG_OK, NULL);
    sg_tensor dt;
    assert_status(sg_graph_grad(g, table, &dt), SG_OK, NULL);
    assert_status(sg_graph_mark_output(g, dt), SG_OK, NULL);
    assert_status(sg_graph_finalize(g), SG_OK, NULL);
    sg_session_params sp = SG_SESSION_PARAMS_INIT;
    sp.threads = run + 1;
    sg_session *s;
    assert_status(sg_session_create(g, &sp, &s), SG_OK, NULL);
    assert_status(sg_session_compile(s), SG_OK, NULL);
    assert_status(sg_session_step(s), SG_OK, NULL);
    assert_status(sg_session_read(s, "table.grad", got[run], sizeof got[run]), SG_OK, NULL);
    sg_session_destroy(s);
    sg_graph_destroy(g);
  }
  assert_memory_equal(got[0], got[1], sizeof got[0]);
  static double want[V * C];
  memset(want, 0, sizeof want);
  for (int i = 0; i < N; i++)
    for (int c = 0; c < C; c++) want[ids[i] * C + c] += r[i * C + c];
  for (int e = 0; e < V * C; e++)
    if (fabs(got[0][e] - want[e]) > 1e-5 * (1 + fabs(want[e])))
      fail_msg("dtable element %d is %.9g, expected %.9g", e, (double)got[0][e], want[e]);
}

/* ---- ids out of range --------------------------------------------------------- */

static void expect_bad_id(sg_op_kind kind, sg_dtype dt, const void *ids, const char *needle) {
  sg_graph *g = h_graph();
  sg_tensor idt = h_src(g, SG_ROLE_CONSTANT, dt, 1, D(4), ids);
  if (kind == SG_OP_EMBEDDING) {
    sg_tensor y = sg_embedding(g, IN(g, 6, 3), idt);
    assert_status(sg_tensor_set_name(g, y, "y"), SG_OK, NULL);
  } else {
    sg_tensor in[] = {IN(g, 4, 3), idt};
    sg_attr a = {.name = "num_embeddings", .type = SG_ATTR_INT, .i = 6};
    assert_status(sg_graph_add_op(g, kind, 2, in, 1, &a, 0, NULL, NULL), SG_OK, NULL);
  }
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  /* The harness's reference refuses the ids too: prepare nothing before op 0. */
  h_host h = h_prepare(g, 0, 1, 1);
  h_dev d;
  assert_status(h_dev_open(g, 0, SG__MODE_TRAIN, 2, &h, &d), SG_OK, NULL);
  assert_status(h_dev_run(&d, 0, 0), SG_ERR_RANGE, needle);
  h_dev_close(&d);
  h_free(&h);
  sg_graph_destroy(g);
}

static void test_ids_out_of_range(void **state) {
  (void)state;
  const int32_t big[4] = {0, 5, 6, 1};
  const int64_t neg[4] = {2, -1, 7, 0};
  expect_bad_id(SG_OP_EMBEDDING, SG_I32, big, "id 6 at position 2 is outside 0..5 (the table has 6 rows)");
  /* The first bad id is reported; negative ids do not wrap (PyTorch raises). */
  expect_bad_id(SG_OP_EMBEDDING, SG_I64, neg, "id -1 at position 1 is outside 0..5");
  expect_bad_id(SG_OP_EMBEDDING_BACKWARD, SG_I32, big,
                "embedding_backward 'embedding_backward_0': id 6 at position 2 is outside 0..5");
  expect_bad_id(SG_OP_EMBEDDING_BACKWARD, SG_I64, neg, "id -1 at position 1 is outside 0..5");
  /* Through a session, with the op's name. */
  sg_graph *g;
  assert_status(sg_graph_create(&g), SG_OK, NULL);
  sg_tensor ids = sg_input(g, "ids", SG_I64, 1, D(4));
  sg_tensor y = sg_embedding(g, sg_parameter(g, "wte", SG_F32, 2, D(6, 3), NULL), ids);
  assert_status(sg_graph_mark_output(g, y), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  sg_session *s;
  assert_status(sg_session_create(g, NULL, &s), SG_OK, NULL);
  assert_status(sg_session_compile(s), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "ids", SG_I64, 1, D(4), neg), SG_OK, NULL);
  assert_status(sg_session_forward(s), SG_ERR_RANGE, "embedding 'embedding_0': id -1 at position 1");
  sg_session_destroy(s);
  sg_graph_destroy(g);
}

/* ---- gradient rule ------------------------------------------------------------- */

static int count_kind(const sg_graph *g, sg_op_kind kind) {
  int n = 0;
  for (int32_t i = 0; i < sg_graph_num_ops(g); i++) {
    sg_op_info op;
    assert_status(sg_graph_op_info(g, i, &op), SG_OK, NULL);
    n += op.kind == kind;
  }
  return n;
}

/* One embedding_backward per lookup, of [V, C] with V as its attribute;
 * ids (an input) get no gradient; a lookup of a constant table none at
 * all. */
static void test_rule(void **state) {
  (void)state;
  sg_graph *g;
  assert_status(sg_graph_create(&g), SG_OK, NULL);
  sg_tensor wte = sg_parameter(g, "wte", SG_F32, 2, D(10, 4), NULL);
  static const float zeros[5 * 4] = {0};
  sg_tensor fixed = sg_constant(g, "fixed", SG_F32, 2, D(5, 4), zeros);
  sg_tensor ids = sg_input(g, "ids", SG_I32, 2, D(2, 3)), pos = sg_input(g, "pos", SG_I64, 1, D(3));
  sg_tensor h = sg_add(g, sg_embedding(g, wte, ids), sg_embedding(g, fixed, pos));
  assert_status(sg_graph_backward(g, sg_reduce_sum(g, h, 0, NULL, 0)), SG_OK, NULL);
  assert_int_equal(count_kind(g, SG_OP_EMBEDDING_BACKWARD), 1);
  sg_tensor gw, gi;
  assert_status(sg_graph_grad(g, wte, &gw), SG_OK, NULL);
  sg_tensor_info info;
  assert_status(sg_graph_tensor_info(g, gw, &info), SG_OK, NULL);
  assert_int_equal(info.role, SG_ROLE_GRADIENT);
  assert_int_equal(info.ndim, 2);
  assert_int_equal(info.dims[0], 10);
  assert_int_equal(info.dims[1], 4);
  sg_op_info op;
  assert_status(sg_graph_op_info(g, info.producer, &op), SG_OK, NULL);
  assert_int_equal(op.kind, SG_OP_EMBEDDING_BACKWARD);
  assert_int_equal(op.inputs[1], ids.id);
  sg_attr a;
  assert_status(sg_graph_op_attr(g, info.producer, 0, &a), SG_OK, NULL);
  assert_string_equal(a.name, "num_embeddings");
  assert_int_equal(a.i, 10);
  assert_true(sg_graph_grad(g, ids, &gi) != SG_OK);
  const sg__op_def *def = sg__op_def_get(SG_OP_EMBEDDING_BACKWARD);
  assert_int_equal(def->output_role, SG_ROLE_GRADIENT);
  assert_int_equal(def->mutated_inputs, 0);
  assert_int_equal(def->optional_inputs, 0);
  assert_int_equal(sg__op_flags(SG_OP_EMBEDDING) & (SG__OP_ELEMENTWISE | SG__OP_VIEW), 0);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  sg_graph_destroy(g);
}

/* GPT-2's pattern: token and position embeddings added, layer norm, and
 * logits against the token table itself (tied weights), so the table's
 * gradient is the sum of two paths. */
static void test_gradients_against_finite_differences(void **state) {
  (void)state;
  static const int64_t tok[2 * 5] = {3, 0, 3, 6, 1, 6, 6, 2, 0, 3};
  static const int32_t pos[5] = {0, 1, 2, 3, 4};
  ncase c = nbegin();
  sg_tensor wte = NP(&c, 7, 4), wpe = NP(&c, 5, 4);
  sg_tensor h = sg_add(c.g, sg_embedding(c.g, wte, sg_constant(c.g, "tok", SG_I64, 2, D(2, 5), tok)),
                       sg_embedding(c.g, wpe, sg_constant(c.g, "pos", SG_I32, 1, D(5), pos)));
  h = sg_layer_norm(c.g, h, NP(&c, 4), SG_NO_TENSOR, -1, 1e-5);
  int64_t perm[2] = {1, 0};
  ncheck(&c, "tok + pos embedding, layer norm, tied logits",
         sg_matmul(c.g, h, sg_transpose(c.g, wte, 2, perm)), NULL);
  c = nbegin();
  static const int32_t one[1] = {2};
  ncheck(&c, "scalar id", sg_embedding(c.g, NP(&c, 3, 6), sg_constant(c.g, "id", SG_I32, 0, NULL, one)),
         NULL);
}

/* ---- builder errors, .sgg, cost ------------------------------------------------- */

static void expect_error(sg_graph *g, sg_tensor t, sg_status st, const char *needle) {
  assert_true(t.id < 0);
  assert_status(sg_graph_status(g), st, needle);
  sg_graph_destroy(g);
}

static sg_graph *graph(void) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  return g;
}

static void test_builder_errors(void **state) {
  (void)state;
  sg_graph *g = graph();
  expect_error(g, sg_embedding(g, sg_input(g, "t", SG_I32, 2, D(5, 3)), sg_input(g, "i", SG_I64, 1, D(2))),
               SG_ERR_DTYPE, "embedding 'embedding_0': table 't' [5,3] i32 must be a float type");
  g = graph();
  expect_error(g, sg_embedding(g, sg_input(g, "t", SG_F32, 3, D(5, 3, 2)), sg_input(g, "i", SG_I64, 1, D(2))),
               SG_ERR_SHAPE, "table 't' [5,3,2] f32 must be 2-D [V,C]");
  g = graph();
  expect_error(g, sg_embedding(g, sg_input(g, "t", SG_F32, 2, D(5, 3)), sg_input(g, "i", SG_F32, 1, D(2))),
               SG_ERR_DTYPE, "ids 'i' [2] f32 must be i32 or i64");
  g = graph();
  expect_error(g, sg_embedding(g, sg_input(g, "t", SG_F32, 2, D(5, 3)), sg_input(g, "i", SG_U8, 1, D(2))),
               SG_ERR_DTYPE, "ids 'i' [2] u8 must be i32 or i64");
  g = graph();
  expect_error(g,
               sg_embedding(g, sg_input(g, "t", SG_F32, 2, D(5, 3)),
                            sg_input(g, "i", SG_I32, 8, D(1, 1, 1, 1, 1, 1, 1, 2))),
               SG_ERR_SHAPE, "has rank 8; at most 7, so that [ids..., C] has at most 8");
  /* The backward op: dy against the ids, V as an attribute. */
  static const struct {
    sg_dtype dyt;
    int dyn;
    int64_t dy[3];
    int64_t v;
    sg_status st;
    const char *needle;
  } bad[] = {
      {SG_I32, 3, {2, 3, 4}, 5, SG_ERR_DTYPE, "dy 'dy' [2,3,4] i32 must be a float type"},
      {SG_F32,
       2,
       {2, 3},
       5,
       SG_ERR_SHAPE,
       "dy 'dy' [2,3] f32 must have the dims of ids 'i' [2,3] i64 and one more, C"},
      {SG_F32, 3, {2, 4, 4}, 5, SG_ERR_SHAPE, "must have the dims of ids"},
      {SG_F32, 3, {2, 3, 4}, 0, SG_ERR_ATTRIBUTE, "num_embeddings is 0; must be in 1..2^56"},
      {SG_F32,
       3,
       {2, 3, 1 << 20},
       (int64_t)1 << 40,
       SG_ERR_ATTRIBUTE,
       "num_embeddings 1099511627776 times C"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
    g = graph();
    sg_tensor in[] = {sg_input(g, "dy", bad[k].dyt, bad[k].dyn, bad[k].dy),
                      sg_input(g, "i", SG_I64, 2, D(2, 3))};
    sg_attr a = {.name = "num_embeddings", .type = SG_ATTR_INT, .i = bad[k].v};
    assert_status(sg_graph_add_op(g, SG_OP_EMBEDDING_BACKWARD, 2, in, 1, &a, 0, NULL, NULL), bad[k].st,
                  bad[k].needle);
    sg_graph_destroy(g);
  }
  g = graph();
  sg_tensor in[] = {sg_input(g, "dy", SG_F32, 2, D(2, 3)), sg_input(g, "i", SG_I64, 1, D(2))};
  assert_status(sg_graph_add_op(g, SG_OP_EMBEDDING_BACKWARD, 2, in, 0, NULL, 0, NULL, NULL), SG_ERR_ATTRIBUTE,
                "num_embeddings");
  sg_graph_destroy(g);
}

/* Both kinds survive the .sgg round trip (the reader re-runs inference):
 * same content hash, the graph verifies. */
static void test_sgg_round_trip(void **state) {
  (void)state;
  static const int64_t ids[3] = {1, 0, 1};
  sg_graph *g = graph();
  sg_tensor wte = sg_parameter(g, "wte", SG_F32, 2, D(4, 2), NULL);
  sg_tensor y = sg_embedding(g, wte, sg_constant(g, "ids", SG_I64, 1, D(3), ids));
  assert_status(sg_graph_backward(g, sg_reduce_sum(g, y, 0, NULL, 0)), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  sg_graph *h = sg_test_sgg_round_trip(g);
  assert_int_equal(count_kind(h, SG_OP_EMBEDDING), 1);
  assert_int_equal(count_kind(h, SG_OP_EMBEDDING_BACKWARD), 1);
  sg_graph_destroy(h);
  sg_graph_destroy(g);
}

/* The lookup moves rows and computes nothing; it reads the ids and only as
 * many table bytes as it writes (GPT-2's table is 150 MB, a batch's rows a
 * few MB). The backward adds each dy element once. */
static void test_cost(void **state) {
  (void)state;
  sg_graph *g = graph();
  sg_tensor wte = sg_parameter(g, "wte", SG_F32, 2, D(1000, 8), NULL);
  sg_tensor y = sg_embedding(g, wte, sg_input(g, "ids", SG_I64, 2, D(2, 3)));
  assert_status(sg_graph_backward(g, sg_reduce_sum(g, y, 0, NULL, 0)), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  double flops, bytes;
  assert_status(sg_partition_op_cost(g, 0, &flops, &bytes), SG_OK, NULL);
  assert_true(flops == 0);
  assert_true(bytes == 6 * 8 + 2 * 6 * 8 * 4);
  for (int32_t k = 0; k < sg_graph_num_ops(g); k++) {
    sg_op_info op;
    assert_status(sg_graph_op_info(g, k, &op), SG_OK, NULL);
    if (op.kind != SG_OP_EMBEDDING_BACKWARD) continue;
    assert_status(sg_partition_op_cost(g, k, &flops, &bytes), SG_OK, NULL);
    assert_true(flops == 6 * 8);
  }
  sg_graph_destroy(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hand_computed),
      cmocka_unit_test(test_kernels_against_reference),
      cmocka_unit_test(test_backward_deterministic),
      cmocka_unit_test(test_ids_out_of_range),
      cmocka_unit_test(test_rule),
      cmocka_unit_test(test_gradients_against_finite_differences),
      cmocka_unit_test(test_builder_errors),
      cmocka_unit_test(test_sgg_round_trip),
      cmocka_unit_test(test_cost),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
