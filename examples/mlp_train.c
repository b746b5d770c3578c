/* mlp_train: trains an MLP on a generated, learnable dataset with sgrt's
 * single-process session (SPEC U1).
 *
 *   mlp_train [--epochs N] [--batch N] [--threads N] [--lr X]
 *             [--optimizer sgd|adamw] [--seed N] [--json]
 *             [--features N] [--hidden N] [--depth N]
 *             [--activation relu|gelu|gelu-tanh] [--layernorm] [--decomposed]
 *             [--steps N] [--device cpu|cuda|cuda:N]
 *
 * The data: 10 classes, each a random template vector in R^features (64); a
 * sample is its class template plus Gaussian noise (sigma 1.0), so the
 * classes overlap but are separable. 4096 training samples, 1024 held out.
 * The net: `depth` (1) hidden layers, each linear(in->hidden (128)), then
 * with --layernorm a LayerNorm(hidden) (weight 1, bias 0, both trained),
 * then the activation (relu; gelu is the erf form, gelu-tanh the tanh
 * approximation); with --decomposed both LayerNorm and GELU (erf form) are
 * built from elementwise ops and reductions, as torch.onnx.export writes them
 * below opset 17 (what the fusion pass fuses); then linear(hidden->10) and
 * cross_entropy. Trained with
 * SGD (momentum 0.9) or AdamW; the graph is forward + backward + update,
 * built once, compiled once. --steps stops after that many training steps
 * in all (0: no limit; the epoch in progress is then evaluated and is the
 * last). The default options give the same net, numbers and params_hash as
 * before the options existed. One progress line per epoch, on stderr; with
 * --json stdout holds one JSON object (final accuracy, params_hash,
 * ms_per_step = the median wall time of sg_session_step over the
 * training steps after the first, ...). The fusion benchmark's PyTorch peer builds the same net. */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <sgrt/sgrt.h>

#include "example_digest.h"
#include "example_opts.h"
#include "example_report.h"

enum { CLASSES = 10, N_TRAIN = 4096, N_TEST = 1024, MAX_DEPTH = 64 };

typedef struct options {
  int epochs, batch, threads, json;
  double lr;
  const char *optimizer;
  uint64_t seed;
  int features, hidden, depth, layernorm, decomposed, steps;
  const char *activation;
  const char *device;
} options;

static int n_features = 64; /* --features: the data generators read it */

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
    for (int f = 0; f < n_features; f++)
      x[i * n_features + f] = templates[c * n_features + f] + (float)gaussian();
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

/* LayerNorm's affine parameters as torch.nn.LayerNorm starts them. */
static sg_tensor constant_param(sg_graph *g, const char *name, int64_t n, float v) {
  float *p = malloc((size_t)n * sizeof *p);
  if (p == NULL) return SG_NO_TENSOR;
  for (int64_t i = 0; i < n; i++) p[i] = v;
  sg_tensor t = sg_parameter(g, name, SG_F32, 1, &n, p);
  free(p);
  return t;
}

/* --decomposed: LayerNorm over the last dim and GELU (erf form) as the
 * elementwise ops and reductions that torch.onnx.export writes below opset
 * 17 (ReduceMean, Sub, Pow, Sqrt, Div, Mul, Add; Div, Erf, Add, Mul, Mul):
 * the same functions, for the fusion benchmark. */
static sg_tensor layer_norm_ops(sg_graph *g, sg_tensor x, sg_tensor w, sg_tensor b) {
  int64_t last = -1;
  sg_tensor d = sg_sub(g, x, sg_reduce_mean(g, x, 1, &last, 1));
  sg_tensor var = sg_reduce_mean(g, sg_pow_scalar(g, d, 2), 1, &last, 1);
  sg_tensor n = sg_div(g, d, sg_sqrt(g, sg_add_scalar(g, var, 1e-5)));
  return sg_add(g, sg_mul(g, n, w), b);
}
static sg_tensor gelu_ops(sg_graph *g, sg_tensor x) {
  sg_tensor e = sg_add_scalar(g, sg_erf(g, sg_mul_scalar(g, x, M_SQRT1_2)), 1);
  return sg_mul_scalar(g, sg_mul(g, x, e), 0.5);
}

static sg_status build(const options *o, sg_graph **out) {
  sg_graph *g;
  sg_status st = sg_graph_create(&g);
  if (st != SG_OK) return st;
  const int64_t H = o->hidden;
  int64_t xd[] = {o->batch, n_features}, yd[] = {o->batch};
  sg_tensor x = sg_input(g, "x", SG_F32, 2, xd);
  sg_tensor y = sg_input(g, "y", SG_I64, 1, yd);
  sg_tensor lr = sg_input(g, "lr", SG_F32, 0, NULL);
  /* Hidden layers fc1..fc<depth>, then fc<depth+1> to the classes; the
   * parameters are drawn in this order (weight, then bias, layer by layer). */
  sg_tensor h = x;
  int64_t in = n_features;
  char name[64];
  for (int l = 1; l <= o->depth; l++) {
    int64_t wd[] = {H, in};
    snprintf(name, sizeof name, "fc%d.weight", l);
    sg_tensor w = linear_param(g, name, 2, wd, in);
    snprintf(name, sizeof name, "fc%d.bias", l);
    sg_tensor b = linear_param(g, name, 1, &H, in);
    h = sg_linear(g, h, w, b);
    if (o->layernorm) {
      snprintf(name, sizeof name, "ln%d.weight", l);
      sg_tensor lw = constant_param(g, name, H, 1.0f);
      snprintf(name, sizeof name, "ln%d.bias", l);
      sg_tensor lb = constant_param(g, name, H, 0.0f);
      h = o->decomposed ? layer_norm_ops(g, h, lw, lb) : sg_layer_norm(g, h, lw, lb, -1, 1e-5);
    }
    if (strcmp(o->activation, "relu") == 0) h = sg_relu(g, h);
    else if (o->decomposed) h = gelu_ops(g, h);
    else h = sg_gelu(g, h, strcmp(o->activation, "gelu-tanh") == 0);
    in = H;
  }
  int64_t wd[] = {CLASSES, H}, bd[] = {CLASSES};
  snprintf(name, sizeof name, "fc%d.weight", o->depth + 1);
  sg_tensor w2 = linear_param(g, name, 2, wd, H);
  snprintf(name, sizeof name, "fc%d.bias", o->depth + 1);
  sg_tensor b2 = linear_param(g, name, 1, bd, H);
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

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int parse(int argc, char **argv, options *o) {
  *o = (options){5, 64, 2, 0, 0.05, "sgd", 1, 64, 128, 1, 0, 0, 0, "relu", "cpu"};
  /* The ranges are in the usage text and docs/examples.md. */
  const example_opt opts[] = {
      {"--epochs", EXAMPLE_OPT_INT, &o->epochs, 1, 100000, .help = "passes over the generated training set"},
      {"--batch", EXAMPLE_OPT_INT, &o->batch, 1, N_TEST, .help = "samples per step"},
      {"--threads", EXAMPLE_OPT_INT, &o->threads, 1, 4096, .help = "compute threads"},
      {"--lr", EXAMPLE_OPT_DOUBLE, &o->lr, 0, 100, .min_open = 1, .help = "learning rate"},
      {"--seed", EXAMPLE_OPT_U64, &o->seed, .help = "seed of the dataset and the initial weights"},
      {"--optimizer", EXAMPLE_OPT_STRING, &o->optimizer, .arg = "sgd|adamw",
       .help = "SGD with momentum 0.9, or AdamW"},
      {"--json", EXAMPLE_OPT_FLAG, &o->json,
       .help = "print one JSON object on stdout at the end (progress stays on stderr)"},
      {"--features", EXAMPLE_OPT_INT, &o->features, 1, 65536, .help = "input features"},
      {"--hidden", EXAMPLE_OPT_INT, &o->hidden, 1, 65536, .help = "width of the hidden layers"},
      {"--depth", EXAMPLE_OPT_INT, &o->depth, 1, MAX_DEPTH, .help = "hidden layers"},
      {"--activation", EXAMPLE_OPT_STRING, &o->activation, .arg = "relu|gelu|gelu-tanh",
       .help = "the hidden layers' activation"},
      {"--layernorm", EXAMPLE_OPT_FLAG, &o->layernorm, .help = "a LayerNorm before each activation"},
      {"--decomposed", EXAMPLE_OPT_FLAG, &o->decomposed,
       .help = "LayerNorm and GELU as the elementwise ops torch.onnx.export writes (for the fusion bench)"},
      {"--steps", EXAMPLE_OPT_INT, &o->steps, 0, 2147483647,
       .help = "stop after this many steps in all (0: no limit)"},
      {"--device", EXAMPLE_OPT_STRING, &o->device, .arg = "cpu|cuda|cuda:N", .help = "where to train"},
  };
  int rc =
      example_parse_opts("mlp_train",
                         "Trains a multi-layer perceptron on a generated classification dataset and reports "
                         "the held-out accuracy\nafter each epoch (on stderr).\n",
                         argc, argv, opts, (int)(sizeof opts / sizeof opts[0]));
  if (rc != 0) return rc;
  if (strcmp(o->activation, "relu") != 0 && strcmp(o->activation, "gelu") != 0 &&
      strcmp(o->activation, "gelu-tanh") != 0) {
    fprintf(stderr, "mlp_train: --activation '%s' is not relu, gelu or gelu-tanh\n", o->activation);
    return 2;
  }
  if (o->decomposed && strcmp(o->activation, "gelu-tanh") == 0) {
    fprintf(stderr, "mlp_train: --decomposed builds the erf form of GELU only, not gelu-tanh\n");
    return 2;
  }
  if (strcmp(o->optimizer, "sgd") != 0 && strcmp(o->optimizer, "adamw") != 0) {
    fprintf(stderr, "mlp_train: --optimizer '%s' is not sgd or adamw\n", o->optimizer);
    return 2;
  }
  return 0;
}

int main(int argc, char **argv) {
  options o;
  int rc = parse(argc, argv, &o);
  if (rc) return rc == EXAMPLE_OPTS_HELP ? 0 : rc; /* --help: printed, exit 0 */
  rng = 0x9E3779B97F4A7C15ull ^ o.seed;
  n_features = o.features;

  float *templates = malloc(sizeof(float) * CLASSES * (size_t)n_features);
  float *xtr = malloc(sizeof(float) * N_TRAIN * (size_t)n_features),
        *xte = malloc(sizeof(float) * N_TEST * (size_t)n_features);
  int64_t *ytr = malloc(sizeof(int64_t) * N_TRAIN), *yte = malloc(sizeof(int64_t) * N_TEST);
  float *logits = malloc(sizeof(float) * (size_t)o.batch * CLASSES);
  if (!templates || !xtr || !xte || !ytr || !yte || !logits)
    return fail("allocating the data", SG_ERR_NO_MEMORY);
  for (int i = 0; i < CLASSES * n_features; i++) templates[i] = (float)(gaussian() * 0.5);
  make_data(xtr, ytr, N_TRAIN, templates);
  make_data(xte, yte, N_TEST, templates);

  sg_graph *g = NULL;
  sg_session *s = NULL;
  sg_status st = build(&o, &g);
  if (st != SG_OK) return fail("building the graph", st);
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sp.threads = o.threads;
  sp.device = o.device;
  sp.seed = o.seed;
  if ((st = sg_session_create(g, &sp, &s)) != SG_OK || (st = sg_session_compile(s)) != SG_OK)
    return fail("compiling", st);
  sg_compile_report rep = SG_COMPILE_REPORT_INIT;
  sg_session_compile_report(s, &rep);
  /* Progress goes to stderr, with --json too (stdout keeps the JSON alone). */
  fprintf(stderr, "compiled: %d ops per step, planned memory %zu bytes (%zu without reuse)\n",
          rep.ops_scheduled, rep.planned_peak_bytes, rep.sum_tensor_bytes);

  int64_t xd[] = {o.batch, n_features}, yd[] = {o.batch};
  float lr = (float)o.lr;
  double acc = 0, last_loss = 0, t0 = now();
  int batches = N_TRAIN / o.batch, epochs_run = 0;
  int64_t steps_done = 0;
  /* Wall time of every sg_session_step after the first (not feeding the
   * batch or reading the loss, as resnet50_train), for ms_per_step. */
  double *step_ms = NULL;
  size_t n_ms = 0, cap_ms = 0;
  bool stop = false;
  for (int e = 0; e < o.epochs && !stop; e++) {
    double loss_sum = 0, te = now();
    int done = 0;
    for (int b = 0; b < batches; b++) {
      if (o.steps > 0 && steps_done >= o.steps) {
        stop = true;
        break;
      }
      float loss;
      double ts = 0, t_step = 0;
      if ((st = sg_session_set_input(s, "x", SG_F32, 2, xd, xtr + (size_t)b * o.batch * n_features)) !=
              SG_OK ||
          (st = sg_session_set_input(s, "y", SG_I64, 1, yd, ytr + (size_t)b * o.batch)) != SG_OK ||
          (st = sg_session_set_input(s, "lr", SG_F32, 0, NULL, &lr)) != SG_OK || (ts = now(), false) ||
          (st = sg_session_step(s)) != SG_OK || (t_step = now() - ts, false) ||
          (st = sg_session_read(s, "loss", &loss, sizeof loss)) != SG_OK)
        return fail("training", st);
      if (steps_done > 0) {
        if (n_ms == cap_ms) {
          cap_ms = cap_ms ? 2 * cap_ms : 1024;
          double *p = realloc(step_ms, cap_ms * sizeof *p);
          if (p == NULL) return fail("recording step times", SG_ERR_NO_MEMORY);
          step_ms = p;
        }
        step_ms[n_ms++] = t_step * 1e3;
      }
      steps_done++;
      done++;
      loss_sum += loss;
    }
    if (o.steps > 0 && steps_done >= o.steps) stop = true;
    if (done == 0) break;
    epochs_run++;
    last_loss = loss_sum / done;
    /* Held-out accuracy, evaluation pass. */
    int correct = 0, seen = 0;
    for (int b = 0; b + o.batch <= N_TEST; b += o.batch) {
      if ((st = sg_session_set_input(s, "x", SG_F32, 2, xd, xte + (size_t)b * n_features)) != SG_OK ||
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
    fprintf(stderr, "epoch %d  loss %.4f  test accuracy %.2f%%  %.0f samples/s\n", e + 1, last_loss,
            100 * acc, done * o.batch / (now() - te));
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
    cJSON_AddNumberToObject(j, "epochs", epochs_run);
    cJSON_AddNumberToObject(j, "batch", o.batch);
    cJSON_AddNumberToObject(j, "threads", o.threads);
    cJSON_AddStringToObject(j, "device", o.device);
    cJSON_AddNumberToObject(j, "steps", (double)sg_session_steps(s));
    cJSON_AddNumberToObject(j, "final_loss", last_loss);
    cJSON_AddNumberToObject(j, "accuracy", acc);
    cJSON_AddNumberToObject(j, "seconds", seconds);
    cJSON_AddNumberToObject(j, "samples_per_second", (double)steps_done * o.batch / seconds);
    if (n_ms > 0) {
      qsort(step_ms, n_ms, sizeof *step_ms, cmp_double);
      double med = n_ms % 2 ? step_ms[n_ms / 2] : 0.5 * (step_ms[n_ms / 2 - 1] + step_ms[n_ms / 2]);
      cJSON_AddNumberToObject(j, "ms_per_step", med);
    } else {
      cJSON_AddNullToObject(j, "ms_per_step"); /* a single step: none after the first */
    }
    cJSON_AddNumberToObject(j, "features", o.features);
    cJSON_AddNumberToObject(j, "hidden", o.hidden);
    cJSON_AddNumberToObject(j, "depth", o.depth);
    cJSON_AddStringToObject(j, "activation", o.activation);
    cJSON_AddBoolToObject(j, "layernorm", o.layernorm);
    cJSON_AddBoolToObject(j, "decomposed", o.decomposed);
    cJSON_AddNumberToObject(j, "compile_seconds", rep.compile_seconds);
    example_compile_json(j, &rep);
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
  free(step_ms);
  return 0;
}
