/* mlp_dist: data-parallel training of a small MLP, one process per rank,
 * the C twin of examples/python/train_dist.py: the same graph (built in the
 * same order: linear-relu-linear, mean cross entropy, SGD with momentum 0.9),
 * the same initial weights and the same data, all from one counter-based
 * generator that needs no floating-point library call (so C and numpy make
 * the same bits), and so the same params_hash.
 *
 *   sgrt launch -n 4 -- build/examples/mlp_dist --steps 20 --json | tail -n 1
 *
 * Each step's global batch (--batch samples) is split into one shard per
 * original rank; the feed callback sets a shard's inputs, so the job heals
 * around a lost rank. Rank 0 prints one line per step on stderr and, with
 * --json, one JSON object on stdout. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <sgrt/sgrt.h>

#include "example_opts.h"

enum { FEATURES = 16, HIDDEN = 32, CLASSES = 4 };

/* Returns a failed call's status (the public headers have no such macro: SG_CHECK is the library's own). */
#define TRY(call)                         \
  do {                                    \
    sg_status try_st_ = (call);           \
    if (try_st_ != SG_OK) return try_st_; \
  } while (0)

typedef struct options {
  int steps, batch, threads, json;
  double lr;
  uint64_t seed;
} options;

/* The generator (also in train_dist.py): element i of stream `key` is
 * splitmix64's finalizer of key + (i + 1) * golden, its top 24 bits scaled
 * into [-1, 1) exactly (every value is a float32). */
static float rnd(uint64_t key, uint64_t i) {
  uint64_t z = key + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (float)(z >> 40) * 0x1p-23f - 1.0f;
}

/* The streams: one per weight, one per step's data. */
static uint64_t stream(uint64_t seed, uint64_t what) { return seed * 0x100000001B3ull + what * 0x51ED27ull; }

static sg_tensor weight(sg_graph *g, const char *name, int64_t rows, int64_t cols, uint64_t key,
                        float scale) {
  float *w = malloc((size_t)(rows * cols) * sizeof *w);
  if (w == NULL) return SG_NO_TENSOR;
  for (int64_t i = 0; i < rows * cols; i++) w[i] = rnd(key, (uint64_t)i) * scale;
  int64_t dims[] = {rows, cols};
  sg_tensor t = sg_parameter(g, name, SG_F32, 2, dims, w);
  free(w);
  return t;
}

static sg_tensor zeros(sg_graph *g, const char *name, int64_t n) {
  float *z = calloc((size_t)n, sizeof *z);
  if (z == NULL) return SG_NO_TENSOR;
  sg_tensor t = sg_parameter(g, name, SG_F32, 1, &n, z);
  free(z);
  return t;
}

static sg_status build(int64_t batch, uint64_t seed, sg_graph **out) {
  sg_graph *g;
  TRY(sg_graph_create(&g));
  int64_t xd[] = {batch, FEATURES};
  sg_tensor x = sg_input(g, "x", SG_F32, 2, xd);
  sg_tensor y = sg_input(g, "y", SG_I64, 1, &batch);
  sg_tensor lr = sg_input(g, "lr", SG_F32, 0, NULL);
  sg_tensor w1 = weight(g, "fc1.weight", HIDDEN, FEATURES, stream(seed, 1), 0.25f);
  sg_tensor b1 = zeros(g, "fc1.bias", HIDDEN);
  sg_tensor w2 = weight(g, "fc2.weight", CLASSES, HIDDEN, stream(seed, 2), 0.125f);
  sg_tensor b2 = zeros(g, "fc2.bias", CLASSES);
  sg_tensor logits = sg_linear(g, sg_relu(g, sg_linear(g, x, w1, b1)), w2, b2);
  sg_tensor_set_name(g, logits, "logits");
  sg_graph_mark_output(g, logits);
  sg_tensor loss = sg_cross_entropy(g, logits, y, SG_REDUCTION_MEAN);
  sg_tensor_set_name(g, loss, "loss");
  sg_graph_mark_output(g, loss);
  sg_graph_backward(g, loss);
  sg_sgd_params sgd = SG_SGD_PARAMS_INIT;
  sgd.momentum = 0.9;
  sg_graph_add_sgd(g, lr, &sgd);
  sg_status st = sg_graph_finalize(g); /* builder errors are sticky: one check */
  if (st != SG_OK) {
    sg_graph_destroy(g);
    return st;
  }
  *out = g;
  return SG_OK;
}

typedef struct feed_ctx {
  const options *o;
  float *x;
  int64_t *y;
} feed_ctx;

/* Shard `shard` of `n` of step `step`'s global batch: sample b's features are elements b*F.. of the
 * step's stream; its class is the index of the largest of its first CLASSES features (comparisons
 * only: no arithmetic to round differently anywhere). */
static sg_status feed(void *ctx, sg_dist *d, uint64_t step, int shard, int n) {
  feed_ctx *c = ctx;
  int per = c->o->batch / n;
  uint64_t key = stream(c->o->seed, 1000 + step);
  for (int b = 0; b < per; b++) {
    uint64_t sample = (uint64_t)shard * (uint64_t)per + (uint64_t)b;
    int best = 0;
    for (int j = 0; j < FEATURES; j++) {
      c->x[b * FEATURES + j] = rnd(key, sample * FEATURES + (uint64_t)j);
      if (j < CLASSES && c->x[b * FEATURES + j] > c->x[b * FEATURES + best]) best = j;
    }
    c->y[b] = best;
  }
  int64_t xd[] = {per, FEATURES}, yd[] = {per};
  float lr = (float)c->o->lr;
  TRY(sg_dist_set_input(d, "x", SG_F32, 2, xd, c->x));
  TRY(sg_dist_set_input(d, "y", SG_I64, 1, yd, c->y));
  return sg_dist_set_input(d, "lr", SG_F32, 0, NULL, &lr);
}

static int fail(const char *what, sg_status st) {
  fprintf(stderr, "mlp_dist: %s: %s: %s\n", what, sg_status_str(st), sg_last_error());
  return 1;
}

int main(int argc, char **argv) {
  options o = {.steps = 20, .batch = 64, .threads = 1, .lr = 0.05, .seed = 0};
  const example_opt opts[] = {
      {"--steps", EXAMPLE_OPT_INT, &o.steps, 1, 1000000, .help = "training steps"},
      {"--batch", EXAMPLE_OPT_INT, &o.batch, 1, 65536, .help = "global batch, split over the ranks"},
      {"--lr", EXAMPLE_OPT_DOUBLE, &o.lr, 0, 100, .min_open = 1, .help = "learning rate (SGD, momentum 0.9)"},
      {"--threads", EXAMPLE_OPT_INT, &o.threads, 0, 4096, .help = "compute threads per rank (0: all CPUs)"},
      {"--seed", EXAMPLE_OPT_U64, &o.seed, .help = "seed of the weights and the data"},
      {"--json", EXAMPLE_OPT_FLAG, &o.json, .help = "rank 0 prints one JSON object on stdout at the end"},
  };
  int rc =
      example_parse_opts("mlp_dist",
                         "Data-parallel training of a small MLP, one process per rank (sgrt launch -n N -- "
                         "mlp_dist): the C twin of\nexamples/python/train_dist.py, with the same "
                         "params_hash for the same options.\n",
                         argc, argv, opts, (int)(sizeof opts / sizeof opts[0]));
  if (rc) return rc == EXAMPLE_OPTS_HELP ? 0 : rc;
  const char *ws = getenv("SG_WORLD_SIZE") ? getenv("SG_WORLD_SIZE") : getenv("WORLD_SIZE");
  int world = ws ? atoi(ws) : 1;
  if (world < 1 || o.batch % world != 0) {
    fprintf(stderr, "mlp_dist: --batch %d is not a multiple of the %d ranks\n", o.batch, world);
    return 2;
  }
  sg_graph *g;
  sg_status st = build(o.batch / world, o.seed, &g);
  if (st != SG_OK) return fail("building the graph", st);
  feed_ctx fc = {&o, malloc((size_t)o.batch * FEATURES * sizeof(float)),
                 malloc((size_t)o.batch * sizeof(int64_t))};
  if (fc.x == NULL || fc.y == NULL) return fail("allocating the batch", SG_ERR_NO_MEMORY);
  sg_dist_params dp = SG_DIST_PARAMS_INIT;
  dp.threads = o.threads;
  dp.seed = o.seed;
  dp.feed = feed;
  dp.feed_ctx = &fc;
  sg_dist *d;
  if ((st = sg_dist_create(g, &dp, &d)) != SG_OK) return fail("creating the job", st);
  sg_dist_stats stats = SG_DIST_STATS_INIT;
  for (int step = 0; step < o.steps; step++) {
    if ((st = sg_dist_step(d)) != SG_OK) {
      fail("training", st);
      sg_dist_get_stats(d, &stats);
      int excluded = stats.excluded;
      sg_dist_destroy(d);
      return excluded ? SG_DIST_EXIT_EXCLUDED : 1;
    }
    sg_dist_get_stats(d, &stats);
    if (sg_dist_rank(d) == 0)
      fprintf(stderr, "step %d/%d  loss %.4f  %.0f samples/s  healthy %d/%d\n", step + 1, o.steps,
              stats.loss_mean, o.batch / (stats.step_ms / 1e3), stats.healthy_ranks, world);
  }
  uint64_t hash;
  if ((st = sg_dist_params_hash(d, &hash)) != SG_OK) return fail("hashing the parameters", st);
  if (sg_dist_rank(d) == 0) {
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, hash);
    if (o.json) {
      cJSON *j = cJSON_CreateObject();
      cJSON_AddStringToObject(j, "example", "mlp_dist");
      cJSON_AddNumberToObject(j, "world_size", sg_dist_size(d));
      cJSON_AddNumberToObject(j, "steps", o.steps);
      cJSON_AddNumberToObject(j, "batch", o.batch);
      cJSON_AddNumberToObject(j, "final_loss", stats.loss_mean);
      cJSON_AddNumberToObject(j, "recoveries", stats.recoveries);
      cJSON_AddStringToObject(j, "params_hash", hex);
      char *text = cJSON_PrintUnformatted(j);
      if (text) puts(text);
      free(text);
      cJSON_Delete(j);
    } else {
      printf("done: %d ranks, %d steps, final loss %.4f, params_hash %s\n", sg_dist_size(d), o.steps,
             stats.loss_mean, hex);
    }
  }
  st = sg_dist_destroy(d);
  sg_graph_destroy(g);
  free(fc.x);
  free(fc.y);
  return st == SG_OK ? 0 : fail("leaving the job", st);
}
