/* Issue 19's bar for free mode, with the default parameters: ResNet-50's
 * training graph (torchvision's, examples/resnet50; batch 32, mean
 * cross-entropy, SGD with PyTorch's defaults, as bench/partition_bench
 * builds it) into 8 parts keeps memory within 4.1 % of the targets and cuts
 * at most 0.17 of the bytes the seeded random partition cuts, at 64x64 and
 * 224x224 and for seeds 1-4. Compute stays within the tolerance (5 %).
 *
 * The cut of both partitions is recounted here from the op placement (each
 * tensor once per part, other than its producer's, that reads it) and must
 * agree with the reports; memory imbalance comes from the parts' loads and
 * targets. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../examples/resnet50/resnet50_model.h"
#include "partition/partition_internal.h"
#include "test_util.h"

#define PARTS 8
#define MAX_MEMORY_IMBALANCE_PCT 4.1
#define MAX_CUT_VS_RANDOM 0.17

static sg_graph *resnet50_training(int64_t image) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  resnet50_config cfg = RESNET50_CONFIG_INIT;
  cfg.batch = 32;
  cfg.image_size = image;
  int64_t xd[] = {cfg.batch, 3, image, image}, ld[] = {cfg.batch};
  sg_tensor images = sg_input(g, "images", SG_F32, 4, xd);
  sg_tensor labels = sg_input(g, "labels", SG_I64, 1, ld);
  sg_tensor lr = sg_input(g, "lr", SG_F32, 0, NULL);
  sg_tensor logits;
  assert_int_equal(resnet50_build(g, &cfg, images, &logits), SG_OK);
  sg_tensor loss = sg_cross_entropy(g, logits, labels, SG_REDUCTION_MEAN);
  assert_int_equal(sg_graph_mark_output(g, loss), SG_OK);
  assert_int_equal(sg_graph_backward(g, loss), SG_OK);
  assert_int_equal(sg_graph_add_sgd(g, lr, NULL), SG_OK);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  return g;
}

/* Bytes of the tensors that cross parts, each once per reading part other
 * than its producer's. */
static double recount_cut(const sg_graph *g, const sg_partition *p) {
  double cut = 0.0;
  for (uint32_t t = 0; t < g->n_tensors; t++) {
    int32_t producer = g->tensors[t].producer;
    if (producer < 0) continue;
    int from;
    assert_int_equal(sg_partition_op_part(p, producer, &from), SG_OK);
    bool counted[PARTS] = {false};
    for (uint32_t k = 0; k < g->n_ops; k++)
      for (int i = 0; i < g->ops[k].n_inputs; i++) {
        if (g->ops[k].inputs[i] != (int32_t)t) continue;
        int to;
        assert_int_equal(sg_partition_op_part(p, (int32_t)k, &to), SG_OK);
        if (to != from && !counted[to]) {
          counted[to] = true;
          cut += (double)g->tensors[t].nbytes;
        }
      }
  }
  return cut;
}

static double memory_imbalance_pct(const sg_partition *p) {
  double worst = 0.0;
  for (int q = 0; q < PARTS; q++) {
    sg_partition_part_info info = SG_PARTITION_PART_INFO_INIT;
    assert_int_equal(sg_partition_part(p, q, &info), SG_OK);
    double r = info.memory_bytes / info.memory_target;
    if (r > worst) worst = r;
  }
  return (worst - 1.0) * 100.0;
}

static void check_resolution(int64_t image) {
  sg_graph *g = resnet50_training(image);
  for (uint64_t seed = 1; seed <= 4; seed++) {
    sg_partition_params pp = SG_PARTITION_PARAMS_INIT;
    pp.parts = PARTS;
    pp.seed = seed;
    sg_partition *p;
    assert_int_equal(sg_partition_create(g, &pp, NULL, &p), SG_OK);
    const sg_partition *rnd = sg_partition_baseline(p);
    sg_partition_report r = SG_PARTITION_REPORT_INIT, rr = SG_PARTITION_REPORT_INIT;
    assert_int_equal(sg_partition_get_report(p, &r), SG_OK);
    assert_int_equal(sg_partition_get_report(rnd, &rr), SG_OK);
    double cut = recount_cut(g, p), random_cut = recount_cut(g, rnd);
    double mem = memory_imbalance_pct(p);
    printf("%lldx%lld seed %llu: memory imbalance %.2f%%, compute %.2f%%, cut %.1f MB = %.3f of random "
           "(%.1f MB)\n",
           (long long)image, (long long)image, (unsigned long long)seed, mem, r.compute_imbalance_pct,
           cut / 1e6, cut / random_cut, random_cut / 1e6);
    assert_true(fabs(cut - r.cut_bytes) <= 0.5);
    assert_true(fabs(random_cut - rr.cut_bytes) <= 0.5);
    assert_true(fabs(mem - r.imbalance_pct) < 1e-9);
    assert_true(mem <= MAX_MEMORY_IMBALANCE_PCT);
    assert_true(cut <= MAX_CUT_VS_RANDOM * random_cut);
    assert_true(r.compute_imbalance_pct <= pp.imbalance * 100.0 + 1e-9);
    sg_partition_destroy(p);
  }
  sg_graph_destroy(g);
}

static void test_resnet50_64(void **state) {
  (void)state;
  check_resolution(64);
}

static void test_resnet50_224(void **state) {
  (void)state;
  check_resolution(224);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_resnet50_64),
      cmocka_unit_test(test_resnet50_224),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
