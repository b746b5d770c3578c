/* partition_bench: figures for docs/partitioning.md (SPEC P5, issue
 * "METIS partitioner").
 *
 *  1. Time to partition a 10,000-op graph (a forward graph of residual and
 *     branching MLP blocks) and a training graph of about 10,000 ops, in
 *     free and pipeline mode.
 *  2. ResNet-50 (torchvision's, examples/resnet50) as a training graph
 *     (batch 32, 224x224, SGD) into 8 parts, free and pipeline,
 *     beside a seeded random partition: the table to compare with the seed's
 *     (random 128.4 MB / 37.2%, topology-aware 21.6 MB / 4.1%).
 *
 * usage: partition_bench [--parts K] [--batch N] [--image N] [--seed S]
 *                        [--skip-10k] [--skip-resnet] [--json] [--save-model FILE]
 * --save-model also writes the ResNet-50 forward graph as .sgg, for
 * `sgrt partition FILE --parts 8 --train sgd`.
 * With --json every result is one JSON object per line (the last line is
 * the ResNet-50 summary). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sgrt/sgrt.h>

#include "../examples/resnet50/resnet50_model.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail(const char *what, sg_status st) {
  fprintf(stderr, "partition_bench: %s: %s: %s\n", what, sg_status_str(st), sg_last_error());
  return 1;
}

/* ---- the 10,000-op graph ------------------------------------------------- */

/* Blocks of a residual MLP, width 64, batch 32: residual (linear, relu, add),
 * branching (two linears, add, tanh) and plain (linear, gelu). Forward ops
 * are added until `ops` are reached; `train` adds a loss, backward and SGD
 * (then `ops` counts forward ops only). */
static sg_status build_mlp(int ops, int train, sg_graph **out) {
  sg_graph *g;
  sg_status st = sg_graph_create(&g);
  if (st != SG_OK) return st;
  int64_t xd[] = {32, 64}, wd[] = {64, 64}, ld[] = {32}, cd[] = {10, 64};
  sg_tensor x = sg_input(g, "x", SG_F32, 2, xd);
  int n = 0, i = 0;
  char name[64];
  while (n < ops - 2) {
    int kind = i % 5 == 4 ? 1 : (i % 7 == 6 ? 2 : 0);
    snprintf(name, sizeof name, "w%d.a", i);
    sg_tensor wa = sg_parameter(g, name, SG_F32, 2, wd, NULL);
    if (kind == 0) {
      x = sg_add(g, x, sg_relu(g, sg_linear(g, x, wa, SG_NO_TENSOR)));
      n += 3;
    } else if (kind == 1) {
      snprintf(name, sizeof name, "w%d.b", i);
      sg_tensor wb = sg_parameter(g, name, SG_F32, 2, wd, NULL);
      x = sg_tanh(g, sg_add(g, sg_linear(g, x, wa, SG_NO_TENSOR), sg_linear(g, x, wb, SG_NO_TENSOR)));
      n += 4;
    } else {
      x = sg_gelu(g, sg_linear(g, x, wa, SG_NO_TENSOR), 0);
      n += 2;
    }
    i++;
  }
  sg_tensor wc = sg_parameter(g, "classifier", SG_F32, 2, cd, NULL);
  sg_tensor logits = sg_linear(g, x, wc, SG_NO_TENSOR);
  if (train) {
    sg_tensor labels = sg_input(g, "labels", SG_I64, 1, ld);
    sg_tensor lr = sg_input(g, "lr", SG_F32, 0, NULL);
    sg_tensor loss = sg_cross_entropy(g, logits, labels, SG_REDUCTION_MEAN);
    sg_graph_mark_output(g, loss);
    st = sg_graph_backward(g, loss);
    if (st == SG_OK) st = sg_graph_add_sgd(g, lr, NULL);
  } else {
    sg_graph_mark_output(g, logits);
  }
  if (st == SG_OK) st = sg_graph_finalize(g);
  if (st != SG_OK) {
    sg_graph_destroy(g);
    return st;
  }
  *out = g;
  return SG_OK;
}

static int time_one(const char *label, const sg_graph *g, int parts, sg_partition_mode mode, uint64_t seed,
                    int json) {
  sg_partition_params pp = SG_PARTITION_PARAMS_INIT;
  pp.parts = parts;
  pp.mode = mode;
  pp.seed = seed;
  sg_partition *p;
  double t0 = now();
  sg_status st = sg_partition_create(g, &pp, NULL, &p);
  double dt = now() - t0;
  if (st != SG_OK) return fail(label, st);
  sg_partition_report r = SG_PARTITION_REPORT_INIT, rr = SG_PARTITION_REPORT_INIT;
  sg_partition_get_report(p, &r);
  sg_partition_get_report(sg_partition_baseline(p), &rr);
  const char *m = mode == SG_PARTITION_PIPELINE ? "pipeline" : "free";
  if (json)
    printf("{\"bench\":\"%s\",\"mode\":\"%s\",\"ops\":%d,\"groups\":%d,\"parts\":%d,\"seconds\":%.4f,"
           "\"partition_seconds\":%.4f,\"cut_bytes\":%.0f,\"random_cut_bytes\":%.0f,\"imbalance_pct\":%.2f,"
           "\"acyclic\":%s}\n",
           label, m, (int)r.ops, (int)r.groups, parts, dt, r.seconds, r.cut_bytes, rr.cut_bytes,
           r.imbalance_pct, r.acyclic ? "true" : "false");
  else
    printf("%-22s %-8s %6d ops %6d groups  K=%-2d  %.3f s (solver %.3f s)  cut %.2f MB (random %.2f MB)  "
           "memory imbalance %.1f%%\n",
           label, m, (int)r.ops, (int)r.groups, parts, dt, r.seconds, r.cut_bytes / 1e6, rr.cut_bytes / 1e6,
           r.imbalance_pct);
  sg_partition_destroy(p);
  return 0;
}

static int bench_10k(int parts, uint64_t seed, int json) {
  sg_graph *fwd, *train;
  sg_status st = build_mlp(10000, 0, &fwd);
  if (st != SG_OK) return fail("build 10k forward graph", st);
  st = build_mlp(3300, 1, &train);
  if (st != SG_OK) {
    sg_graph_destroy(fwd);
    return fail("build 10k training graph", st);
  }
  int rc = 0;
  for (int m = 0; m < 2 && rc == 0; m++) {
    sg_partition_mode mode = m ? SG_PARTITION_PIPELINE : SG_PARTITION_FREE;
    rc = time_one("mlp-10k-forward", fwd, parts, mode, seed, json);
    if (rc == 0) rc = time_one("mlp-10k-training", train, parts, mode, seed, json);
  }
  sg_graph_destroy(fwd);
  sg_graph_destroy(train);
  return rc;
}

/* ---- ResNet-50 ------------------------------------------------------------ */

static sg_status build_resnet50(int64_t batch, int64_t image, sg_graph **out) {
  sg_graph *g;
  sg_status st = sg_graph_create(&g);
  if (st != SG_OK) return st;
  resnet50_config cfg = RESNET50_CONFIG_INIT;
  cfg.batch = batch;
  cfg.image_size = image;
  int64_t xd[] = {batch, 3, image, image}, ld[] = {batch};
  sg_tensor images = sg_input(g, "images", SG_F32, 4, xd);
  sg_tensor labels = sg_input(g, "labels", SG_I64, 1, ld);
  sg_tensor lr = sg_input(g, "lr", SG_F32, 0, NULL);
  sg_tensor logits;
  st = resnet50_build(g, &cfg, images, &logits);
  sg_tensor loss = sg_cross_entropy(g, logits, labels, SG_REDUCTION_MEAN);
  sg_tensor_set_name(g, loss, "loss");
  sg_graph_mark_output(g, loss);
  if (st == SG_OK) st = sg_graph_backward(g, loss);
  if (st == SG_OK) st = sg_graph_add_sgd(g, lr, NULL); /* torch.optim.SGD's defaults */
  if (st == SG_OK) st = sg_graph_finalize(g);
  if (st != SG_OK) {
    sg_graph_destroy(g);
    return st;
  }
  *out = g;
  return SG_OK;
}

/* The forward graph alone (logits as output), for `sgrt partition FILE
 * --train sgd`, which adds the same loss and optimizer. */
static int save_resnet(const char *path, int64_t batch, int64_t image) {
  sg_graph *g;
  sg_status st = sg_graph_create(&g);
  if (st != SG_OK) return fail("create", st);
  resnet50_config cfg = RESNET50_CONFIG_INIT;
  cfg.batch = batch;
  cfg.image_size = image;
  int64_t xd[] = {batch, 3, image, image};
  sg_tensor logits;
  st = resnet50_build(g, &cfg, sg_input(g, "images", SG_F32, 4, xd), &logits);
  if (st == SG_OK) st = sg_graph_mark_output(g, logits);
  if (st == SG_OK) st = sg_graph_finalize(g);
  if (st == SG_OK) st = sg_graph_save(g, path);
  sg_graph_destroy(g);
  if (st != SG_OK) return fail("save ResNet-50", st);
  fprintf(stderr, "partition_bench: wrote the ResNet-50 forward graph (batch %lld, %lldx%lld) to %s\n",
          (long long)batch, (long long)image, (long long)image, path);
  return 0;
}

static int bench_resnet(int parts, int64_t batch, int64_t image, uint64_t seed, int json) {
  sg_graph *g;
  sg_status st = build_resnet50(batch, image, &g);
  if (st != SG_OK) return fail("build ResNet-50", st);
  if (!json) {
    printf("\nResNet-50 training graph (batch %lld, %lldx%lld, SGD) into %d parts\n", (long long)batch,
           (long long)image, (long long)image, parts);
    printf("%-9s %-10s %12s %10s %11s %12s %10s %8s %8s\n", "mode", "partition", "cut", "mem imb.",
           "cut/random", "comp imb.", "bottleneck", "acyclic", "seconds");
  }
  int rc = 0;
  for (int m = 0; m < 2 && rc == 0; m++) {
    sg_partition_params pp = SG_PARTITION_PARAMS_INIT;
    pp.parts = parts;
    pp.mode = m ? SG_PARTITION_PIPELINE : SG_PARTITION_FREE;
    pp.seed = seed;
    sg_partition *p;
    st = sg_partition_create(g, &pp, NULL, &p);
    if (st != SG_OK) {
      rc = fail("partition ResNet-50", st);
      break;
    }
    sg_partition_report r = SG_PARTITION_REPORT_INIT, rr = SG_PARTITION_REPORT_INIT;
    sg_partition_get_report(p, &r);
    sg_partition_get_report(sg_partition_baseline(p), &rr);
    const char *mode = m ? "pipeline" : "free";
    if (json) {
      char *text;
      if (sg_partition_report_json(p, &text) == SG_OK) {
        printf("%s\n", text);
        sg_free(text);
      }
    } else {
      printf("%-9s %-10s %9.1f MB %9.2f%% %11.3f %11.1f%% %10.2f %8s %8.3f\n", mode, "sgrt",
             r.cut_bytes / 1e6, r.imbalance_pct, r.cut_bytes / rr.cut_bytes, r.compute_imbalance_pct,
             r.bottleneck_ratio, r.acyclic ? "yes" : "no", r.seconds);
      printf("%-9s %-10s %9.1f MB %9.2f%% %11s %11.1f%% %10.2f %8s\n", "", "random", rr.cut_bytes / 1e6,
             rr.imbalance_pct, "", rr.compute_imbalance_pct, rr.bottleneck_ratio, rr.acyclic ? "yes" : "no");
    }
    sg_partition_destroy(p);
  }
  if (!json && rc == 0) {
    printf("%-9s %-10s %9.1f MB %9.2f%% %11.3f   (the seed's table)\n", "seed", "random", 128.4, 37.2, 1.0);
    printf("%-9s %-10s %9.1f MB %9.2f%% %11.3f\n", "seed", "topology", 21.6, 4.1, 21.6 / 128.4);
  }
  sg_graph_destroy(g);
  return rc;
}

int main(int argc, char **argv) {
  int parts = 8, json = 0, skip_10k = 0, skip_resnet = 0;
  const char *save = NULL;
  long long batch = 32, image = 224;
  unsigned long long seed = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--json") == 0) json = 1;
    else if (strcmp(a, "--skip-10k") == 0) skip_10k = 1;
    else if (strcmp(a, "--skip-resnet") == 0) skip_resnet = 1;
    else if (strcmp(a, "--parts") == 0 && v) parts = atoi(argv[++i]);
    else if (strcmp(a, "--batch") == 0 && v) batch = atoll(argv[++i]);
    else if (strcmp(a, "--image") == 0 && v) image = atoll(argv[++i]);
    else if (strcmp(a, "--seed") == 0 && v) seed = strtoull(argv[++i], NULL, 10);
    else if (strcmp(a, "--save-model") == 0 && v) save = argv[++i];
    else {
      fprintf(stderr, "usage: partition_bench [--parts K] [--batch N] [--image N] [--seed S] [--skip-10k] "
                      "[--skip-resnet] "
                      "[--json]\n");
      return 2;
    }
  }
  if (parts < 1 || batch < 1 || image < 32) {
    fprintf(stderr, "partition_bench: bad --parts, --batch or --image\n");
    return 2;
  }
  int rc = save ? save_resnet(save, batch, image) : 0;
  if (rc == 0 && !skip_10k) rc = bench_10k(parts, seed, json);
  if (rc == 0 && !skip_resnet) rc = bench_resnet(parts, batch, image, seed, json);
  return rc;
}
