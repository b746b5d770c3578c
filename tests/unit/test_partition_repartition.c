/* Profile-guided repartitioning (SPEC P6): a partition recomputed from
 * measured op times balances them, prices migration, and stays put when
 * nothing needs to move; the trigger fires on sustained high CPU and p99
 * latency over consecutive profile samples, and only then. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

/* A residual MLP training graph with SGD and momentum (state to migrate). */
static sg_graph *mlp(int blocks) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  int64_t xd[] = {32, 64}, wd[] = {64, 64}, ld[] = {32}, cd[] = {10, 64};
  sg_tensor x = sg_input(g, "x", SG_F32, 2, xd);
  for (int i = 0; i < blocks; i++) {
    char name[32];
    snprintf(name, sizeof name, "w%d", i);
    x = sg_add(g, x, sg_relu(g, sg_linear(g, x, sg_parameter(g, name, SG_F32, 2, wd, NULL), SG_NO_TENSOR)));
  }
  sg_tensor logits = sg_linear(g, x, sg_parameter(g, "wc", SG_F32, 2, cd, NULL), SG_NO_TENSOR);
  sg_tensor loss = sg_cross_entropy(g, logits, sg_input(g, "labels", SG_I64, 1, ld), SG_REDUCTION_MEAN);
  sg_graph_mark_output(g, loss);
  assert_int_equal(sg_graph_backward(g, loss), SG_OK);
  sg_sgd_params sp = SG_SGD_PARAMS_INIT;
  sp.momentum = 0.9;
  assert_int_equal(sg_graph_add_sgd(g, sg_input(g, "lr", SG_F32, 0, NULL), &sp), SG_OK);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  return g;
}

/* Largest over parts of the summed op times, over their mean. */
static double time_ratio(const sg_partition *p, const double *t, int32_t n) {
  int k = sg_partition_num_parts(p);
  double sum[16] = {0}, total = 0.0, worst = 0.0;
  for (int32_t op = 0; op < n; op++) {
    int q;
    assert_int_equal(sg_partition_op_part(p, op, &q), SG_OK);
    sum[q] += t[op];
    total += t[op];
  }
  for (int q = 0; q < k; q++) worst = fmax(worst, sum[q]);
  return worst / (total / k);
}

static void test_repartition(void **state) {
  (void)state;
  sg_graph *g = mlp(64);
  int32_t n = sg_graph_num_ops(g);
  for (int m = 0; m < 2; m++) {
    sg_partition_params pp = SG_PARTITION_PARAMS_INIT;
    pp.parts = 4;
    pp.mode = m ? SG_PARTITION_PIPELINE : SG_PARTITION_FREE;
    sg_partition *cur;
    assert_int_equal(sg_partition_create(g, &pp, NULL, &cur), SG_OK);
    /* Measured: every op takes 1 ms, except that the ops on part 0 run on
     * a node that is twice as slow. */
    double *t = malloc((size_t)n * sizeof *t);
    for (int32_t op = 0; op < n; op++) {
      int q;
      sg_partition_op_part(cur, op, &q);
      t[op] = q == 0 ? 2e-3 : 1e-3;
    }
    double before = time_ratio(cur, t, n);
    sg_partition *next, *stay;
    sg_repartition_params rp = SG_REPARTITION_PARAMS_INIT;
    rp.migration_cost = 0.0;
    assert_status(sg_partition_repartition(cur, t, n, &rp, &next), SG_OK, NULL);
    double after = time_ratio(next, t, n);
    double moved;
    assert_int_equal(sg_partition_migration_bytes(cur, next, &moved), SG_OK);
    printf("repartition (%s): measured time max/mean %.2f -> %.2f, %.0f bytes of state migrate\n",
           m ? "pipeline" : "free", before, after, moved);
    assert_true(before > 1.4);
    assert_true(after <= 1.15);
    assert_true(moved > 0.0);
    sg_partition_report r = SG_PARTITION_REPORT_INIT;
    assert_int_equal(sg_partition_get_report(next, &r), SG_OK);
    assert_true(r.acyclic || !m);
    /* Costly migration: the repartition still balances, moving no more
     * state than the free one did. */
    rp.migration_cost = 1e6;
    assert_status(sg_partition_repartition(cur, t, n, &rp, &stay), SG_OK, NULL);
    double moved_costly;
    assert_int_equal(sg_partition_migration_bytes(cur, stay, &moved_costly), SG_OK);
    assert_true(moved_costly <= 1.1 * moved);
    assert_true(time_ratio(stay, t, n) <= 1.15);
    sg_partition_destroy(stay);
    /* Times that match the placement: nothing moves when moving costs. */
    for (int32_t op = 0; op < n; op++) t[op] = 1e-3;
    sg_partition *same;
    double ratio_now = time_ratio(cur, t, n);
    assert_status(sg_partition_repartition(cur, t, n, &rp, &same), SG_OK, NULL);
    if (ratio_now <= 1.05) {
      assert_int_equal(sg_partition_migration_bytes(cur, same, &moved_costly), SG_OK);
      assert_float_equal(moved_costly, 0.0, 0.0);
    }
    sg_partition_destroy(same);
    /* Bad times name the op. */
    t[5] = -1.0;
    assert_status(sg_partition_repartition(cur, t, n, &rp, &same), SG_ERR_INVALID_ARG, "op_seconds[5]");
    t[5] = NAN;
    assert_status(sg_partition_repartition(cur, t, n, &rp, &same), SG_ERR_INVALID_ARG, "op_seconds[5]");
    assert_status(sg_partition_repartition(cur, t, n - 1, &rp, &same), SG_ERR_INVALID_ARG, "op times");
    rp.migration_cost = -1;
    assert_status(sg_partition_repartition(cur, t, n, &rp, &same), SG_ERR_INVALID_ARG, "migration_cost");
    assert_null(same);
    free(t);
    sg_partition_destroy(next);
    sg_partition_destroy(cur);
  }
  sg_graph_destroy(g);
}

/* ---- the trigger: a pure function --------------------------------------- */

static sg_profile_sample sample(int32_t node, double t, double cpu, double p99) {
  return (sg_profile_sample){node, t, cpu, p99, 10.0};
}

static int fires(const sg_profile_sample *s, size_t n, int32_t *node) {
  int fire = -1;
  assert_int_equal(sg_repartition_trigger(s, n, NULL, &fire, node), SG_OK);
  return fire;
}

static void test_trigger(void **state) {
  (void)state;
  int32_t node;
  /* Defaults: above 85% CPU and 200 ms p99 in 3 consecutive 500 ms samples. */
  sg_repartition_trigger_params d = sg_repartition_trigger_params_init();
  assert_float_equal(d.cpu_util, 0.85, 0.0);
  assert_float_equal(d.latency_p99_ms, 200.0, 0.0);
  assert_float_equal(d.sample_period_ms, 500.0, 0.0);
  assert_int_equal(d.sustain_samples, 3);
  sg_profile_sample hot[] = {sample(2, 0, 0.90, 250), sample(2, 500, 0.95, 300), sample(2, 1000, 0.86, 201)};
  assert_int_equal(fires(hot, 3, &node), 1);
  assert_int_equal(node, 2);
  /* Two hot samples are not "sustained". */
  assert_int_equal(fires(hot + 1, 2, &node), 0);
  assert_int_equal(node, -1);
  /* Exactly at a threshold is not above it. */
  sg_profile_sample edge[] = {sample(1, 0, 0.90, 250), sample(1, 500, 0.85, 250), sample(1, 1000, 0.90, 250)};
  assert_int_equal(fires(edge, 3, &node), 0);
  sg_profile_sample lat[] = {sample(1, 0, 0.90, 250), sample(1, 500, 0.90, 200), sample(1, 1000, 0.90, 250)};
  assert_int_equal(fires(lat, 3, &node), 0);
  /* High CPU alone, or high latency alone, is not enough. */
  sg_profile_sample cpu_only[] = {sample(1, 0, 0.99, 50), sample(1, 500, 0.99, 50),
                                  sample(1, 1000, 0.99, 50)};
  assert_int_equal(fires(cpu_only, 3, &node), 0);
  /* A gap (a missing sample) breaks the run; only the latest samples count. */
  sg_profile_sample gap[] = {sample(3, 0, 0.9, 300), sample(3, 500, 0.9, 300), sample(3, 2000, 0.9, 300)};
  assert_int_equal(fires(gap, 3, &node), 0);
  sg_profile_sample cooled[] = {sample(3, 0, 0.9, 300), sample(3, 500, 0.9, 300), sample(3, 1000, 0.9, 300),
                                sample(3, 1500, 0.5, 100)};
  assert_int_equal(fires(cooled, 4, &node), 0);
  /* Any order, several nodes: the lowest hot node is named. */
  sg_profile_sample mixed[] = {sample(7, 1000, 0.9, 300), sample(4, 0, 0.2, 10),    sample(7, 0, 0.9, 300),
                               sample(5, 500, 0.95, 999), sample(7, 500, 0.9, 300), sample(5, 0, 0.95, 999),
                               sample(5, 1000, 0.95, 999)};
  assert_int_equal(fires(mixed, 7, &node), 1);
  assert_int_equal(node, 5);
  /* Configurable thresholds. */
  sg_repartition_trigger_params p = SG_REPARTITION_TRIGGER_PARAMS_INIT;
  p.cpu_util = 0.5;
  p.latency_p99_ms = 20;
  p.sustain_samples = 1;
  int fire;
  assert_int_equal(sg_repartition_trigger(mixed + 1, 1, &p, &fire, &node), SG_OK);
  assert_int_equal(fire, 0);
  sg_profile_sample one = sample(9, 0, 0.6, 30);
  assert_int_equal(sg_repartition_trigger(&one, 1, &p, &fire, &node), SG_OK);
  assert_true(fire == 1 && node == 9);
  assert_int_equal(sg_repartition_trigger(NULL, 0, NULL, &fire, &node), SG_OK);
  assert_int_equal(fire, 0);
  /* Bad input names the sample and field. */
  sg_profile_sample bad = sample(1, 0, 1.5, 10);
  assert_status(sg_repartition_trigger(&bad, 1, NULL, &fire, &node), SG_ERR_INVALID_ARG,
                "samples[0].cpu_util");
  bad = sample(1, 0, 0.5, NAN);
  assert_status(sg_repartition_trigger(&bad, 1, NULL, &fire, &node), SG_ERR_INVALID_ARG,
                "samples[0].latency_p99_ms");
  bad = sample(1, -5, 0.5, 1);
  assert_status(sg_repartition_trigger(&bad, 1, NULL, &fire, &node), SG_ERR_INVALID_ARG,
                "samples[0].timestamp_ms");
  p.sustain_samples = 0;
  assert_status(sg_repartition_trigger(&one, 1, &p, &fire, &node), SG_ERR_INVALID_ARG, "sustain_samples");
  p = sg_repartition_trigger_params_init();
  p.sample_period_ms = 0;
  assert_status(sg_repartition_trigger(&one, 1, &p, &fire, &node), SG_ERR_INVALID_ARG, "sample_period_ms");
  assert_status(sg_repartition_trigger(NULL, 2, NULL, &fire, &node), SG_ERR_INVALID_ARG, NULL);
  assert_status(sg_repartition_trigger(&one, 1, NULL, NULL, &node), SG_ERR_INVALID_ARG, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_repartition),
      cmocka_unit_test(test_trigger),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
