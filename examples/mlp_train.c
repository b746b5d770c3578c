/* mlp_train: trains a two-layer MLP on a generated, learnable dataset with
 * sgrt's single-process session (SPEC U1).
 *
 *   mlp_train [--epochs N] [--batch N] [--threads N] [--lr X]
 *             [--optimizer sgd|adamw] [--seed N] [--json]
 *
 * The data: 10 classes, each a random template vector in R^64; a sample is
 * its class template plus Gaussian noise (sigma 1.0), so the classes
 * overlap but are separable. 4096 training samples, 1024 held out. The net:
 * linear(64->128) - relu - linear(128->10) - cross_entropy, trained with SGD
 * (momentum 0.9) or AdamW; the graph is forward + backward + update, built
 * once, compiled once. One progress line per epoch; with --json the last
 * line of stdout is one JSON object (final accuracy, params_hash, ...). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <sgrt/sgrt.h>

#include "example_digest.h"
#include "example_opts.h"

enum { FEATURES = 64, HIDDEN = 128, CLASSES = 10, N_TRAIN = 4096, N_TEST = 1024 };

typedef struct options {
  int epochs, batch, threads, json;
  double lr;
  const char *optimizer;
  uint64_t seed;
} options;

static uint64_t rng;
static double uniform01(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}
static double gaussian(void) {
  double u = uniform01(), v = uniform01();
  return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

/* Class templates plus noise. */
static void make_data(float *x, int64_t *y, int n, const float *templates) {
  for (int i = 0; i < n; i++) {
    int c = (int)(uniform01() * CLASSES) % CLASSES;
    y[i] = c;
    for (int f = 0; f < FEATURES; f++) x[i * FEATURES + f] = templates[c * FEATURES + f] + (float)gaussian();
  }
}

/* PyTorch's default init of nn.Linear: U(-1/sqrt(in), 1/sqrt(in)). */
static sg_tensor linear_param(sg_graph *g, const char *name, int ndim, const int64_t *dims, int64_t fan_in) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= dims[i];
  float *w = malloc((size_t)n * sizeof *w);
  if (w == NULL) return SG_NO_TENSOR;
  double bound = 1.0 / sqrt((double)fan_in);
  for (int64_t i = 0; i < n; i++) w[i] = (float)((uniform01() * 2 - 1) * bound);
  sg_tensor t = sg_parameter(g, name, SG_F32, ndim, dims, w);
  free(w);
  return t;
}

static sg_status build(const options *o, sg_graph **out) {
  sg_graph *g;
  sg_status st = sg_graph_create(&g);
  if (st != SG_OK) return st;
  int64_t xd[] = {o->batch, FEATURES}, yd[] = {o->batch};
  int64_t w1d[] = {HIDDEN, FEATURES}, b1d[] = {HIDDEN}, w2d[] = {CLASSES, HIDDEN}, b2d[] = {CLASSES};
  sg_tensor x = sg_input(g, "x", SG_F32, 2, xd);
  sg_tensor y = sg_input(g, "y", SG_I64, 1, yd);
  sg_tensor lr = sg_input(g, "lr", SG_F32, 0, NULL);
  sg_tensor w1 = linear_param(g, "fc1.weight", 2, w1d, FEATURES);
  sg_tensor b1 = linear_param(g, "fc1.bias", 1, b1d, FEATURES);
  sg_tensor w2 = linear_param(g, "fc2.weight", 2, w2d, HIDDEN);
  sg_tensor b2 = linear_param(g, "fc2.bias", 1, b2d, HIDDEN);
  sg_tensor h = sg_relu(g, sg_linear(g, x, w1, b1));
  sg_tensor logits = sg_linear(g, h, w2, b2);
  sg_tensor loss = sg_cross_entropy(g, logits, y, SG_REDUCTION_MEAN);
  sg_tensor_set_name(g, logits, "logits");
  sg_tensor_set_name(g, loss, "loss");
  sg_graph_mark_output(g, logits);
  sg_graph_mark_output(g, loss);
  st = sg_graph_backward(g, loss);
  if (st == SG_OK && strcmp(o->optimizer, "adamw") == 0) {
    sg_adamw_params p = SG_ADAMW_PARAMS_INIT;
    st = sg_graph_add_adamw(g, lr, &p);
  } else if (st == SG_OK) {
    sg_sgd_params p = SG_SGD_PARAMS_INIT;
    p.momentum = 0.9;
    st = sg_graph_add_sgd(g, lr, &p);
  }
  if (st == SG_OK) st = sg_graph_finalize(g);
  if (st != SG_OK) {
    sg_graph_destroy(g);
    return st;
  }
  *out = g;
  return SG_OK;
}

static int fail(const char *what, sg_status st) {
  fprintf(stderr, "mlp_train: %s: %s: %s\n", what, sg_status_str(st), sg_last_error());
  return 1;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int parse(int argc, char **argv, options *o) {
  *o = (options){5, 64, 2, 0, 0.05, "sgd", 1};
  /* The ranges are in the usage text and docs/examples.md. */
  const example_opt opts[] = {
      {"--epochs", EXAMPLE_OPT_INT, &o->epochs, 1, 100000},
      {"--batch", EXAMPLE_OPT_INT, &o->batch, 1, N_TEST},
      {"--threads", EXAMPLE_OPT_INT, &o->threads, 1, 4096},
      {"--lr", EXAMPLE_OPT_DOUBLE, &o->lr, 0, 100, .min_open = 1},
      {"--seed", EXAMPLE_OPT_U64, &o->seed},
      {"--optimizer", EXAMPLE_OPT_STRING, &o->optimizer},
      {"--json", EXAMPLE_OPT_FLAG, &o->json},
  };
  int rc = example_parse_opts(
      "mlp_train",
      "usage: mlp_train [--epochs N] [--batch N] [--threads N] [--lr X] [--optimizer sgd|adamw] [--seed N] "
      "[--json]\n"
      "       epochs 1..100000, batch 1..1024, threads 1..4096, lr in (0, 100], seed 0..2^64-1\n",
      argc, argv, opts, (int)(sizeof opts / sizeof opts[0]));
  if (rc != 0) return rc;
  if (strcmp(o->optimizer, "sgd") != 0 && strcmp(o->optimizer, "adamw") != 0) {
    fprintf(stderr, "mlp_train: --optimizer '%s' is not sgd or adamw\n", o->optimizer);
    return 2;
  }
  return 0;
}

int main(int argc, char **argv) {
  options o;
  int rc = parse(argc, argv, &o);
  if (rc) return rc;
  rng = 0x9E3779B97F4A7C15ull ^ o.seed;

  float *templates = malloc(sizeof(float) * CLASSES * FEATURES);
  float *xtr = malloc(sizeof(float) * N_TRAIN * FEATURES), *xte = malloc(sizeof(float) * N_TEST * FEATURES);
  int64_t *ytr = malloc(sizeof(int64_t) * N_TRAIN), *yte = malloc(sizeof(int64_t) * N_TEST);
  float *logits = malloc(sizeof(float) * (size_t)o.batch * CLASSES);
  if (!templates || !xtr || !xte || !ytr || !yte || !logits)
    return fail("allocating the data", SG_ERR_NO_MEMORY);
  for (int i = 0; i < CLASSES * FEATURES; i++) templates[i] = (float)(gaussian() * 0.5);
  make_data(xtr, ytr, N_TRAIN, templates);
  make_data(xte, yte, N_TEST, templates);

  sg_graph *g = NULL;
  sg_session *s = NULL;
  sg_status st = build(&o, &g);
  if (st != SG_OK) return fail("building the graph", st);
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sp.threads = o.threads;
  sp.seed = o.seed;
  if ((st = sg_session_create(g, &sp, &s)) != SG_OK || (st = sg_session_compile(s)) != SG_OK)
    return fail("compiling", st);
  sg_compile_report rep = SG_COMPILE_REPORT_INIT;
  sg_session_compile_report(s, &rep);
  if (!o.json)
    printf("compiled: %d ops per step, planned memory %zu bytes (%zu without reuse)\n", rep.ops_scheduled,
           rep.planned_peak_bytes, rep.sum_tensor_bytes);

  int64_t xd[] = {o.batch, FEATURES}, yd[] = {o.batch};
  float lr = (float)o.lr;
  double acc = 0, last_loss = 0, t0 = now();
  int batches = N_TRAIN / o.batch;
  for (int e = 0; e < o.epochs; e++) {
    double loss_sum = 0, te = now();
    for (int b = 0; b < batches; b++) {
      float loss;
      if ((st = sg_session_set_input(s, "x", SG_F32, 2, xd, xtr + (size_t)b * o.batch * FEATURES)) != SG_OK ||
          (st = sg_session_set_input(s, "y", SG_I64, 1, yd, ytr + (size_t)b * o.batch)) != SG_OK ||
          (st = sg_session_set_input(s, "lr", SG_F32, 0, NULL, &lr)) != SG_OK ||
          (st = sg_session_step(s)) != SG_OK ||
          (st = sg_session_read(s, "loss", &loss, sizeof loss)) != SG_OK)
        return fail("training", st);
      loss_sum += loss;
    }
    last_loss = loss_sum / batches;
    /* Held-out accuracy, evaluation pass. */
    int correct = 0, seen = 0;
    for (int b = 0; b + o.batch <= N_TEST; b += o.batch) {
      if ((st = sg_session_set_input(s, "x", SG_F32, 2, xd, xte + (size_t)b * FEATURES)) != SG_OK ||
          (st = sg_session_set_input(s, "y", SG_I64, 1, yd, yte + b)) != SG_OK ||
          (st = sg_session_forward(s)) != SG_OK ||
          (st = sg_session_read(s, "logits", logits, sizeof(float) * (size_t)o.batch * CLASSES)) != SG_OK)
        return fail("evaluating", st);
      for (int i = 0; i < o.batch; i++) {
        int best = 0;
        for (int c = 1; c < CLASSES; c++)
          if (logits[i * CLASSES + c] > logits[i * CLASSES + best]) best = c;
        correct += best == yte[b + i];
        seen++;
      }
    }
    acc = (double)correct / seen;
    if (!o.json)
      printf("epoch %d  loss %.4f  test accuracy %.2f%%  %.0f samples/s\n", e + 1, last_loss, 100 * acc,
             batches * o.batch / (now() - te));
  }
  double seconds = now() - t0;
  uint64_t hash;
  double psum, pl2;
  if ((st = example_param_digest(g, s, &hash, &psum, &pl2)) != SG_OK) return fail("reading parameters", st);
  if (o.json) {
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, hash);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "example", "mlp_train");
    cJSON_AddStringToObject(j, "optimizer", o.optimizer);
    cJSON_AddNumberToObject(j, "epochs", o.epochs);
    cJSON_AddNumberToObject(j, "batch", o.batch);
    cJSON_AddNumberToObject(j, "threads", o.threads);
    cJSON_AddNumberToObject(j, "steps", (double)sg_session_steps(s));
    cJSON_AddNumberToObject(j, "final_loss", last_loss);
    cJSON_AddNumberToObject(j, "accuracy", acc);
    cJSON_AddNumberToObject(j, "seconds", seconds);
    cJSON_AddNumberToObject(j, "samples_per_second", o.epochs * batches * o.batch / seconds);
    cJSON_AddNumberToObject(j, "planned_peak_bytes", (double)rep.planned_peak_bytes);
    cJSON_AddNumberToObject(j, "sum_tensor_bytes", (double)rep.sum_tensor_bytes);
    cJSON_AddStringToObject(j, "params_hash", hex);
    cJSON_AddNumberToObject(j, "params_l2", pl2);
    cJSON_AddNumberToObject(j, "params_sum", psum);
    char *text = cJSON_PrintUnformatted(j);
    if (text) puts(text);
    free(text);
    cJSON_Delete(j);
  } else {
    printf("done: %" PRIu64 " steps in %.2f s, final test accuracy %.2f%%, params_hash %016" PRIx64 "\n",
           sg_session_steps(s), seconds, 100 * acc, hash);
  }
  sg_session_destroy(s);
  sg_graph_destroy(g);
  free(templates);
  free(xtr);
  free(xte);
  free(ytr);
  free(yte);
  free(logits);
  return 0;
}
