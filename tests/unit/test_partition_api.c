/* The partitioner through its public API (SPEC P1-P5, O3) and its cost
 * model against hand-computed figures: memory per group and FLOPs per op,
 * the P4 placement rule, reports (struct, JSON, text, DOT), heterogeneous
 * targets, capacity errors, argument checks, determinism and allocation
 * failures. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "partition/partition_internal.h"
#include "test_util.h"

/* tests/data/cnn.sgg as a training graph: its "loss", backward, `opt`. */
static sg_graph *cnn_training(bool adamw) {
  sg_graph *g, *t;
  assert_int_equal(sg_graph_load(sg_test_data("cnn.sgg"), &g), SG_OK);
  assert_int_equal(sg_graph_clone(g, &t), SG_OK);
  sg_graph_destroy(g);
  sg_tensor loss, lr = sg_input(t, "lr", SG_F32, 0, NULL);
  assert_int_equal(sg_graph_find_tensor(t, "loss", &loss), SG_OK);
  assert_int_equal(sg_graph_backward(t, loss), SG_OK);
  if (adamw) assert_int_equal(sg_graph_add_adamw(t, lr, NULL), SG_OK);
  else assert_int_equal(sg_graph_add_sgd(t, lr, NULL), SG_OK);
  assert_int_equal(sg_graph_finalize(t), SG_OK);
  return t;
}

/* x [4,8] -> linear(w1 [16,8]) -> relu -> linear(w2 [3,16]) -> cross-entropy
 * with labels [4] i64; backward; SGD with momentum 0.9. */
static sg_graph *tiny_mlp(void) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  int64_t xd[] = {4, 8}, w1d[] = {16, 8}, w2d[] = {3, 16}, ld[] = {4};
  sg_tensor x = sg_input(g, "x", SG_F32, 2, xd);
  sg_tensor labels = sg_input(g, "labels", SG_I64, 1, ld);
  sg_tensor lr = sg_input(g, "lr", SG_F32, 0, NULL);
  sg_tensor w1 = sg_parameter(g, "w1", SG_F32, 2, w1d, NULL);
  sg_tensor w2 = sg_parameter(g, "w2", SG_F32, 2, w2d, NULL);
  sg_tensor h = sg_linear(g, x, w1, SG_NO_TENSOR);
  sg_tensor r = sg_relu(g, h);
  sg_tensor logits = sg_linear(g, r, w2, SG_NO_TENSOR);
  sg_tensor loss = sg_cross_entropy(g, logits, labels, SG_REDUCTION_MEAN);
  sg_tensor_set_name(g, loss, "loss");
  sg_graph_mark_output(g, loss);
  assert_int_equal(sg_graph_backward(g, loss), SG_OK);
  sg_sgd_params sp = SG_SGD_PARAMS_INIT;
  sp.momentum = 0.9;
  assert_int_equal(sg_graph_add_sgd(g, lr, &sp), SG_OK);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  return g;
}

static int32_t group_of(const sg_graph *g, const sg__pmodel *m, const char *leader) {
  for (int32_t v = 0; v < m->pg.n; v++)
    if (strcmp(g->ops[m->leader[v]].name, leader) == 0) return v;
  fail_msg("no group led by '%s'", leader);
  return -1;
}

/* Memory per group, by hand (f32 = 4 bytes):
 *   gemm_0 (x @ w1^T): x 128 + w1 512 + w1.grad 512 + w1.momentum 512
 *                      + lr 4 (its first consumer is w1's update) = 1668
 *   relu_1: half of r [4,16] = 128, which relu's backward and gemm_2's
 *           weight gradient both read
 *   gemm_2: w2 192 x 3 (param, grad, momentum) + the other half of r = 704
 *   cross_entropy_3: labels 32 + logits 48 (read by its backward) + the seed 4 + the
 *         loss itself 4 (a graph output) = 88
 * Edge gemm_0 - relu_1: h [4,16] forward and its gradient back, 256 + 256. */
static void test_memory_model(void **state) {
  (void)state;
  sg_graph *g = tiny_mlp();
  sg__pmodel m;
  assert_int_equal(sg__pmodel_build(g, NULL, 0.0, &m), SG_OK);
  assert_int_equal(m.pg.n, 4);
  assert_true(m.training);
  int32_t a = group_of(g, &m, "gemm_0"), b = group_of(g, &m, "relu_1"), c = group_of(g, &m, "gemm_2"),
          d = group_of(g, &m, "cross_entropy_3");
  assert_float_equal(m.pg.mem[a], 1668.0, 1e-9);
  assert_float_equal(m.pg.mem[b], 128.0, 1e-9);
  assert_float_equal(m.pg.mem[c], 704.0, 1e-9);
  assert_float_equal(m.pg.mem[d], 88.0, 1e-9);
  assert_float_equal(m.pg.total_mem, 2588.0, 1e-9);
  /* Persistent state: parameters and momentum buffers. */
  assert_float_equal(m.pg.persist[a], 1024.0, 1e-9);
  assert_float_equal(m.pg.persist[c], 384.0, 1e-9);
  double w_ab = 0.0;
  for (int32_t i = m.pg.xadj[a]; i < m.pg.xadj[a + 1]; i++)
    if (m.pg.adj[i] == b) w_ab = m.pg.adjw[i];
  assert_float_equal(w_ab, 512.0, 1e-9);
  /* Every backward op sits with the forward op it is named after, every
   * update with its parameter's first consumer. */
  for (int32_t k = 0; k < m.n_ops; k++) {
    const char *name = g->ops[k].name;
    if (m.op_class[k] == SG__PART_UPDATE) {
      int32_t p = g->ops[k].inputs[0];
      assert_int_equal(m.op_group[k], strcmp(g->tensors[p].name, "w1") == 0 ? a : c);
    } else if (m.op_class[k] == SG__PART_BACKWARD) {
      int32_t want = strncmp(name, "gemm_0/", 7) == 0             ? a
                     : strncmp(name, "relu_1/", 7) == 0           ? b
                     : strncmp(name, "gemm_2/", 7) == 0           ? c
                     : strncmp(name, "cross_entropy_3/", 16) == 0 ? d
                     : strncmp(name, "w1/", 3) == 0               ? a
                                                                  : c;
      if (m.op_group[k] != want)
        fail_msg("backward op '%s' in group %d, expected %d", name, m.op_group[k], want);
    }
  }
  sg__pmodel_free(&m);
  sg_graph_destroy(g);
}

/* FLOPs by hand: multiply-add = 2. */
static void test_flops(void **state) {
  (void)state;
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  int64_t xd[] = {2, 3, 8, 8}, wd[] = {4, 3, 3, 3}, bd[] = {4}, ad[] = {5, 7}, md[] = {7, 6};
  sg_tensor x = sg_input(g, "x", SG_F32, 4, xd);
  sg_tensor w = sg_parameter(g, "w", SG_F32, 4, wd, NULL), bias = sg_parameter(g, "b", SG_F32, 1, bd, NULL);
  sg_conv2d_params cp = SG_CONV2D_PARAMS_INIT;
  cp.padding[0] = cp.padding[1] = cp.padding[2] = cp.padding[3] = 1;
  sg_tensor y = sg_conv2d(g, x, w, bias, &cp); /* [2,4,8,8] = 512 elements */
  sg_pool2d_params pp = SG_POOL2D_PARAMS_INIT;
  pp.kernel[0] = pp.kernel[1] = 2;
  sg_tensor p = sg_max_pool2d(g, sg_relu(g, y), &pp); /* [2,4,4,4] = 128 */
  sg_tensor a = sg_input(g, "a", SG_F32, 2, ad), mm = sg_parameter(g, "m", SG_F32, 2, md, NULL);
  sg_tensor prod = sg_matmul(g, a, mm); /* [5,6]: 30 dot products of length 7 */
  sg_graph_mark_output(g, p);
  sg_graph_mark_output(g, prod);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  double want[] = {2.0 * 512 * 27 + 512, 512, 128 * 4, 2.0 * 30 * 7};
  for (int k = 0; k < 4; k++) {
    sg__op_cost c = sg__op_cost_of(g, &g->ops[k]);
    if (fabs(c.flops - want[k]) > 1e-9)
      fail_msg("op %d (%s): %g FLOPs, expected %g", k, g->ops[k].name, c.flops, want[k]);
  }
  /* Traffic of the relu: 512 floats in and out. */
  assert_float_equal(sg__op_cost_of(g, &g->ops[1]).traffic, 2.0 * 512 * 4, 1e-9);
  sg_graph_destroy(g);
}

/* The P4 rule through the public API on the CNN, in pipeline mode. */
static void test_cnn_pipeline(void **state) {
  (void)state;
  for (int opt = 0; opt < 2; opt++) {
    sg_graph *g = cnn_training(opt == 1);
    sg_partition_params pp = SG_PARTITION_PARAMS_INIT;
    pp.parts = 3;
    pp.mode = SG_PARTITION_PIPELINE;
    sg_partition *p;
    assert_status(sg_partition_create(g, &pp, NULL, &p), SG_OK, NULL);
    assert_int_equal(sg_partition_num_parts(p), 3);
    assert_ptr_equal(sg_partition_graph(p), g);
    sg_partition_report r = SG_PARTITION_REPORT_INIT;
    assert_int_equal(sg_partition_get_report(p, &r), SG_OK);
    assert_int_equal(r.ops, sg_graph_num_ops(g));
    assert_int_equal(r.groups, 9); /* the nine forward ops of cnn.sgg */
    assert_true(r.training);
    assert_true(r.acyclic);
    assert_int_equal(r.mode, SG_PARTITION_PIPELINE);
    int order[3];
    assert_int_equal(sg_partition_stage_order(p, order, 3), SG_OK);
    assert_true(order[0] == 0 && order[1] == 1 && order[2] == 2);
    /* Per-part figures add up; cut = sum over boundary tensors. */
    int32_t ops = 0;
    double mem = 0.0, send = 0.0, recv = 0.0;
    for (int q = 0; q < 3; q++) {
      sg_partition_part_info pi = SG_PARTITION_PART_INFO_INIT;
      assert_int_equal(sg_partition_part(p, q, &pi), SG_OK);
      ops += pi.ops;
      mem += pi.memory_bytes;
      send += pi.send_bytes;
      recv += pi.recv_bytes;
      assert_true(pi.score <= 1.0 && pi.score >= -pp.alpha);
    }
    assert_int_equal(ops, r.ops);
    assert_float_equal(mem, r.total_memory_bytes, 1e-6 * mem);
    double cut = 0.0;
    for (int32_t i = 0; i < sg_partition_num_boundary(p); i++) {
      sg_tensor t;
      int from, n_to;
      double bytes;
      const int *to;
      assert_int_equal(sg_partition_boundary(p, i, &t, &from, &bytes, &to, &n_to), SG_OK);
      sg_tensor_info ti;
      assert_int_equal(sg_graph_tensor_info(g, t, &ti), SG_OK);
      assert_float_equal(bytes, (double)ti.nbytes, 0.0);
      int producer_part;
      assert_int_equal(sg_partition_op_part(p, ti.producer, &producer_part), SG_OK);
      assert_int_equal(from, producer_part);
      for (int j = 0; j < n_to; j++) assert_true(to[j] != from);
      cut += bytes * n_to;
    }
    assert_int_equal(sg_partition_num_boundary(p), r.boundary_tensors);
    assert_float_equal(cut, r.cut_bytes, 1e-9);
    assert_float_equal(send, cut, 1e-9);
    assert_float_equal(recv, cut, 1e-9);
    /* The random baseline: same graph and parts, no baseline of its own. */
    const sg_partition *rnd = sg_partition_baseline(p);
    assert_non_null(rnd);
    assert_null(sg_partition_baseline(rnd));
    assert_int_equal(sg_partition_num_parts(rnd), 3);
    assert_status(sg_partition_op_part(p, sg_graph_num_ops(g), &order[0]), SG_ERR_RANGE, "op");
    sg_partition_destroy(p);
    sg_graph_destroy(g);
  }
}

static void test_determinism(void **state) {
  (void)state;
  sg_graph *g = cnn_training(false);
  for (int m = 0; m < 2; m++) {
    sg_partition_params pp = SG_PARTITION_PARAMS_INIT;
    pp.parts = 4;
    pp.mode = m ? SG_PARTITION_PIPELINE : SG_PARTITION_FREE;
    pp.seed = 42;
    sg_partition *a, *b;
    assert_int_equal(sg_partition_create(g, &pp, NULL, &a), SG_OK);
    assert_int_equal(sg_partition_create(g, &pp, NULL, &b), SG_OK);
    for (int32_t op = 0; op < sg_graph_num_ops(g); op++) {
      int pa, pb;
      sg_partition_op_part(a, op, &pa);
      sg_partition_op_part(b, op, &pb);
      assert_int_equal(pa, pb);
      sg_partition_op_part(sg_partition_baseline(a), op, &pa);
      sg_partition_op_part(sg_partition_baseline(b), op, &pb);
      assert_int_equal(pa, pb);
    }
    sg_partition_report ra = SG_PARTITION_REPORT_INIT, rb = SG_PARTITION_REPORT_INIT;
    sg_partition_get_report(a, &ra);
    sg_partition_get_report(b, &rb);
    assert_float_equal(ra.cut_bytes, rb.cut_bytes, 0.0);
    assert_float_equal(ra.imbalance_pct, rb.imbalance_pct, 0.0);
    sg_partition_destroy(a);
    sg_partition_destroy(b);
  }
  sg_graph_destroy(g);
}

/* A wide MLP training graph with many similar ops: compute can be split in
 * any proportion. */
static sg_graph *wide_mlp(int blocks) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  int64_t xd[] = {32, 64}, wd[] = {64, 64}, ld[] = {32}, cd[] = {10, 64};
  sg_tensor x = sg_input(g, "x", SG_F32, 2, xd);
  for (int i = 0; i < blocks; i++) {
    char name[32];
    snprintf(name, sizeof name, "w%d", i);
    sg_tensor w = sg_parameter(g, name, SG_F32, 2, wd, NULL);
    x = sg_add(g, x, sg_relu(g, sg_linear(g, x, w, SG_NO_TENSOR)));
  }
  sg_tensor logits = sg_linear(g, x, sg_parameter(g, "wc", SG_F32, 2, cd, NULL), SG_NO_TENSOR);
  sg_tensor loss = sg_cross_entropy(g, logits, sg_input(g, "labels", SG_I64, 1, ld), SG_REDUCTION_MEAN);
  sg_graph_mark_output(g, loss);
  assert_int_equal(sg_graph_backward(g, loss), SG_OK);
  assert_int_equal(sg_graph_add_sgd(g, sg_input(g, "lr", SG_F32, 0, NULL), NULL), SG_OK);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  return g;
}

/* One device twice as fast (FLOP/s and bandwidth) as the other three: its
 * part gets twice the compute of each of the others, within 10%. */
static void test_heterogeneous(void **state) {
  (void)state;
  sg_graph *g = wide_mlp(120);
  const char *json =
      "{\"devices\": ["
      "{\"name\": \"fast\", \"kind\": \"gpu\", \"peak_flops\": 2e12, \"memory_bytes\": 16e9,"
      " \"memory_bandwidth\": 2e11, \"link_bandwidth\": 1e10, \"link_latency_us\": 5},"
      "{\"name\": \"slow\", \"kind\": \"gpu\", \"peak_flops\": 1e12, \"memory_bytes\": 16e9,"
      " \"memory_bandwidth\": 1e11, \"link_bandwidth\": 1e10, \"link_latency_us\": 5, \"count\": 3}]}";
  sg_device_table *t;
  assert_status(sg_device_table_parse(json, &t), SG_OK, NULL);
  assert_int_equal(sg_device_table_count(t), 4);
  for (int m = 0; m < 2; m++) {
    sg_partition_params pp = SG_PARTITION_PARAMS_INIT;
    pp.mode = m ? SG_PARTITION_PIPELINE : SG_PARTITION_FREE;
    sg_partition *p;
    assert_status(sg_partition_create(g, &pp, t, &p), SG_OK, NULL);
    assert_int_equal(sg_partition_num_parts(p), 4);
    sg_device_info di;
    assert_int_equal(sg_partition_device(p, 0, &di), SG_OK);
    assert_string_equal(di.name, "fast");
    sg_partition_part_info pi[4];
    double others = 0.0;
    for (int q = 0; q < 4; q++) {
      pi[q] = (sg_partition_part_info)SG_PARTITION_PART_INFO_INIT;
      assert_int_equal(sg_partition_part(p, q, &pi[q]), SG_OK);
      if (q) others += pi[q].flops / 3.0;
    }
    double ratio = pi[0].flops / others;
    printf("heterogeneous (%s): the fast device's part has %.3fx the compute of the others' mean\n",
           m ? "pipeline" : "free", ratio);
    assert_true(ratio >= 1.8 && ratio <= 2.2);
    for (int q = 1; q < 4; q++)
      assert_true(pi[0].flops / pi[q].flops >= 1.8 && pi[0].flops / pi[q].flops <= 2.2);
    sg_partition_destroy(p);
  }
  sg_device_table_destroy(t);
  sg_graph_destroy(g);
}

/* Capacities: the whole graph too big; one op too big; big enough. */
static void test_capacity(void **state) {
  (void)state;
  sg_graph *g = cnn_training(false);
  sg_partition_params pp = SG_PARTITION_PARAMS_INIT;
  pp.parts = 2;
  sg_partition *p = NULL;
  sg_device_table *t;
  assert_int_equal(
      sg_device_table_parse("{\"devices\": [{\"preset\": \"cpu\", \"memory_bytes\": 1000}]}", &t), SG_OK);
  assert_status(sg_partition_create(g, &pp, t, &p), SG_ERR_RANGE, "capacity");
  assert_true(strstr(sg_last_error(), "needs") != NULL);
  assert_null(p);
  sg_device_table_destroy(t);
  /* Enough in all, but the convolution's group alone is more than any one
   * device has: the message names it. */
  assert_int_equal(
      sg_device_table_parse("{\"devices\": [{\"preset\": \"cpu\", \"memory_bytes\": 12000}]}", &t), SG_OK);
  pp.parts = 8;
  assert_status(sg_partition_create(g, &pp, t, &p), SG_ERR_RANGE, "op '");
  sg_device_table_destroy(t);
  /* Generous: every part within its device. */
  assert_int_equal(
      sg_device_table_parse("{\"devices\": [{\"preset\": \"cpu\", \"memory_bytes\": 40000}]}", &t), SG_OK);
  pp.parts = 2;
  for (int m = 0; m < 2; m++) {
    pp.mode = m ? SG_PARTITION_PIPELINE : SG_PARTITION_FREE;
    assert_status(sg_partition_create(g, &pp, t, &p), SG_OK, NULL);
    for (int q = 0; q < 2; q++) {
      sg_partition_part_info pi = SG_PARTITION_PART_INFO_INIT;
      assert_int_equal(sg_partition_part(p, q, &pi), SG_OK);
      assert_float_equal(pi.capacity_bytes, 40000.0, 0.0);
      assert_true(pi.memory_bytes <= 40000.0);
    }
    sg_partition_destroy(p);
  }
  sg_device_table_destroy(t);
  sg_graph_destroy(g);
}

static void test_arguments(void **state) {
  (void)state;
  sg_graph *g = cnn_training(false);
  sg_partition *p = NULL;
  sg_partition_params pp = SG_PARTITION_PARAMS_INIT;
  assert_status(sg_partition_create(NULL, &pp, NULL, &p), SG_ERR_INVALID_ARG, NULL);
  assert_status(sg_partition_create(g, &pp, NULL, NULL), SG_ERR_INVALID_ARG, NULL);
  assert_status(sg_partition_create(g, &pp, NULL, &p), SG_ERR_INVALID_ARG, "parts");
  assert_status(sg_partition_create(g, NULL, NULL, &p), SG_ERR_INVALID_ARG, "parts");
  pp.parts = 2;
  pp.imbalance = 0.0;
  assert_status(sg_partition_create(g, &pp, NULL, &p), SG_ERR_INVALID_ARG, "imbalance");
  pp.imbalance = 0.05;
  pp.alpha = -1;
  assert_status(sg_partition_create(g, &pp, NULL, &p), SG_ERR_INVALID_ARG, "alpha");
  pp.alpha = 0.3;
  /* More parts than ops: refused, naming both counts; as many parts as ops is a partition. */
  int32_t n_ops = sg_graph_num_ops(g);
  pp.parts = n_ops + 1;
  assert_status(sg_partition_create(g, &pp, NULL, &p), SG_ERR_RANGE, "parts for a graph of");
  assert_null(p);
  pp.parts = n_ops;
  assert_int_equal(sg_partition_create(g, &pp, NULL, &p), SG_OK);
  sg_partition_destroy(p);
  p = NULL;
  pp.parts = 2;
  pp.parts = SG_PARTITION_MAX_PARTS + 1;
  assert_status(sg_partition_create(g, &pp, NULL, &p), SG_ERR_INVALID_ARG, "parts");
  pp.parts = 2;
  pp.size = 8;
  assert_status(sg_partition_create(g, &pp, NULL, &p), SG_ERR_INVALID_ARG, "SG_PARTITION_PARAMS_INIT");
  pp = sg_partition_params_init();
  pp.parts = 3;
  sg_device_table *t;
  assert_int_equal(sg_device_table_preset("a100", 2, &t), SG_OK);
  assert_status(sg_partition_create(g, &pp, t, &p), SG_ERR_INVALID_ARG, "device table has 2");
  pp.parts = 0; /* one part per device */
  assert_status(sg_partition_create(g, &pp, t, &p), SG_OK, NULL);
  assert_int_equal(sg_partition_num_parts(p), 2);
  sg_partition_destroy(p);
  sg_device_table_destroy(t);
  /* An unfinished graph. */
  sg_graph *open;
  assert_int_equal(sg_graph_create(&open), SG_OK);
  pp.parts = 2;
  assert_status(sg_partition_create(open, &pp, NULL, &p), SG_ERR_STATE, "finalized");
  sg_graph_destroy(open);
  sg_partition_destroy(NULL);
  assert_int_equal(sg_partition_num_parts(NULL), 0);
  sg_graph_destroy(g);
}

static const char *const figure_keys[] = {"parts",
                                          "mode",
                                          "cut_bytes",
                                          "imbalance_pct",
                                          "compute_imbalance_pct",
                                          "bottleneck_ratio",
                                          "acyclic",
                                          "boundary_tensors",
                                          "seconds",
                                          "per_part"};

static void test_reports(void **state) {
  (void)state;
  sg_graph *g = cnn_training(false);
  sg_partition_params pp = SG_PARTITION_PARAMS_INIT;
  pp.parts = 2;
  pp.mode = SG_PARTITION_PIPELINE;
  sg_partition *p;
  assert_int_equal(sg_partition_create(g, &pp, NULL, &p), SG_OK);
  sg_partition_report r = SG_PARTITION_REPORT_INIT;
  assert_int_equal(sg_partition_get_report(p, &r), SG_OK);
  char *json;
  assert_int_equal(sg_partition_report_json(p, &json), SG_OK);
  assert_null(strchr(json, '\n'));
  cJSON *o = cJSON_Parse(json);
  assert_non_null(o);
  cJSON *rnd = cJSON_GetObjectItem(o, "random");
  assert_non_null(rnd);
  for (size_t i = 0; i < sizeof figure_keys / sizeof figure_keys[0]; i++) {
    if (!cJSON_GetObjectItem(o, figure_keys[i])) fail_msg("no '%s' in the report", figure_keys[i]);
    if (!cJSON_GetObjectItem(rnd, figure_keys[i])) fail_msg("no '%s' in the random report", figure_keys[i]);
  }
  assert_string_equal(cJSON_GetObjectItem(o, "mode")->valuestring, "pipeline");
  assert_float_equal(cJSON_GetObjectItem(o, "cut_bytes")->valuedouble, r.cut_bytes, 0.0);
  assert_true(cJSON_IsTrue(cJSON_GetObjectItem(o, "acyclic")));
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(o, "boundary")), r.boundary_tensors);
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(o, "per_part")), 2);
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(o, "devices")), 2);
  cJSON_Delete(o);
  sg_free(json);

  char *text;
  assert_int_equal(sg_partition_report_text(p, &text), SG_OK);
  assert_non_null(strstr(text, "random"));
  assert_non_null(strstr(text, "host-1"));
  sg_free(text);

  /* DOT: one filled box per op, the cut drawn bold. */
  char path[] = "/tmp/sgrt-partition-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(sg_partition_write_dot(p, path), SG_OK);
  size_t size;
  char *dot = (char *)sg_test_read_file(path, &size);
  dot[size] = '\0';
  int boxes = 0, bold = 0;
  for (const char *s = dot; (s = strstr(s, "fillcolor=")) != NULL; s++) boxes++;
  for (const char *s = dot; (s = strstr(s, "penwidth=")) != NULL; s++) bold++;
  assert_int_equal(boxes, sg_graph_num_ops(g));
  assert_true(bold >= r.boundary_tensors);
  assert_non_null(strstr(dot, "digraph partition"));
  free(dot);
  unlink(path);
  assert_status(sg_partition_write_dot(p, "/nonexistent/dir/x.dot"), SG_ERR_IO, "/nonexistent");

  double score;
  assert_int_equal(sg_partition_placement_score(p, 0, 1, &score), SG_OK);
  assert_true(score <= 1.0 && score >= -pp.alpha);
  assert_status(sg_partition_placement_score(p, 0, 7, &score), SG_ERR_RANGE, "part");
  sg_partition_report small = {offsetof(sg_partition_report, mode) - 1};
  assert_status(sg_partition_get_report(p, &small), SG_ERR_INVALID_ARG, "SG_PARTITION_REPORT_INIT");
  sg_partition_destroy(p);
  sg_graph_destroy(g);
}

/* Every allocation may fail: the result is SG_OK or SG_ERR_NO_MEMORY,
 * never a crash or a leak (LeakSanitizer in the ASan build). */
static void test_allocation_failures(void **state) {
  (void)state;
  sg_graph *g = cnn_training(false);
  for (int m = 0; m < 2; m++) {
    sg_partition_params pp = SG_PARTITION_PARAMS_INIT;
    pp.parts = 3;
    pp.mode = m ? SG_PARTITION_PIPELINE : SG_PARTITION_FREE;
    for (long n = 0;; n++) {
      sg__alloc_fail_after(n);
      sg_partition *p = NULL;
      sg_status st = sg_partition_create(g, &pp, NULL, &p);
      sg__alloc_fail_after(-1);
      if (st == SG_OK) {
        sg_partition_destroy(p);
        break;
      }
      if (st != SG_ERR_NO_MEMORY)
        fail_msg("allocation %ld failing gave %s: %s", n, sg_status_str(st), sg_last_error());
      assert_null(p);
      assert_true(n < 100000);
    }
  }
  sg_graph_destroy(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_memory_model),        cmocka_unit_test(test_flops),
      cmocka_unit_test(test_cnn_pipeline),        cmocka_unit_test(test_determinism),
      cmocka_unit_test(test_heterogeneous),       cmocka_unit_test(test_capacity),
      cmocka_unit_test(test_arguments),           cmocka_unit_test(test_reports),
      cmocka_unit_test(test_allocation_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
