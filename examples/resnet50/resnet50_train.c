/* resnet50_train: trains torchvision's ResNet-50 (resnet50_model.c) on a
 * generated image dataset with sgrt's single-process session (SPEC U1, U3).
 *
 *   resnet50_train [--batch N] [--res N] [--steps N] [--threads N]
 *                  [--classes N] [--width N] [--optimizer sgd|adamw] [--lr X]
 *                  [--warmup N] [--until-accuracy X] [--seed N] [--json]
 *                  [--device cpu|cuda|cuda:N]
 *
 * The data: class c is a colour (one offset per RGB channel) plus a plane
 * wave of its own frequency, orientation and phase per channel; a sample is
 * its class's pattern plus Gaussian pixel noise (sigma 1), freshly drawn for
 * every step, so the network cannot memorise samples but learns the classes
 * within tens of steps. The graph is forward + backward + update (SGD with
 * momentum 0.9, or AdamW), built and compiled once. One progress line per
 * step (loss, accuracy on that step's batch, images/s), on stderr; with
 * --json stdout holds one JSON object. --steps 0 builds, compiles and reports
 * the model (parameter count, planned memory) without training;
 * --until-accuracy X stops early once the training accuracy (over the last
 * ACC_WINDOW steps) reaches X. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <sgrt/sgrt.h>

#include "example_digest.h"
#include "example_opts.h"
#include "example_report.h"
#include "resnet50_data.h"
#include "resnet50_model.h"

typedef struct options {
  int batch, res, steps, threads, classes, width, warmup, json;
  double lr, until; /* until: stop once the train accuracy reaches it (0: run all steps) */
  const char *optimizer;
  uint64_t seed;
  const char *device;
  const char *trace; /* Chrome trace of every op (sg_session_write_trace), or NULL */
} options;

/* ---- graph, timing ----------------------------------------------- */

static sg_status build(const options *o, sg_graph **out) {
  resnet50_config cfg = RESNET50_CONFIG_INIT;
  cfg.batch = o->batch;
  cfg.image_size = o->res;
  cfg.classes = o->classes;
  cfg.width = o->width;
  return resnet50_build_training(&cfg, o->optimizer, 1, out);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static long peak_rss_mb(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024; /* Linux reports kilobytes */
}

static int fail(const char *what, sg_status st) {
  fprintf(stderr, "resnet50_train: %s: %s: %s\n", what, sg_status_str(st), sg_last_error());
  return 1;
}

static const char about[] =
    "Trains torchvision's ResNet-50 layout on generated images in one process and prints one line per step\n"
    "(loss, accuracy on the step's batch, images/s) on stderr.\n";

static int parse(int argc, char **argv, options *o) {
  *o = (options){16, 64, 30, 2, 10, 64, 1, 0, 0, 0, "sgd", 1, "cpu", NULL};
  /* The ranges are in the usage text and docs/examples.md. */
  const example_opt opts[] = {
      {"--batch", EXAMPLE_OPT_INT, &o->batch, 2, 65536, .help = "images per step"},
      {"--res", EXAMPLE_OPT_INT, &o->res, 32, 4096, .help = "image height and width"},
      {"--steps", EXAMPLE_OPT_INT, &o->steps, 0, 1000000,
       .help = "training steps (0: build, compile and report the model only)"},
      {"--threads", EXAMPLE_OPT_INT, &o->threads, 1, 4096, .help = "compute threads"},
      {"--classes", EXAMPLE_OPT_INT, &o->classes, 1, 100000, .help = "output classes"},
      {"--width", EXAMPLE_OPT_INT, &o->width, 1, 4096,
       .help = "bottleneck width of the first stage (64: ResNet-50)"},
      {"--warmup", EXAMPLE_OPT_INT, &o->warmup, 0, 1000000, .help = "first steps left out of the timings"},
      {"--lr", EXAMPLE_OPT_DOUBLE, &o->lr, 0, 100, .min_open = 1,
       .help = "learning rate (0 is not allowed; not given: 0.02 for SGD, 1e-3 for AdamW)"},
      {"--until-accuracy", EXAMPLE_OPT_DOUBLE, &o->until, 0, 1,
       .help = "stop once the training accuracy over the last 5 steps reaches it (0: never)"},
      {"--seed", EXAMPLE_OPT_U64, &o->seed, .help = "seed of the images and the initial weights"},
      {"--optimizer", EXAMPLE_OPT_STRING, &o->optimizer, .arg = "sgd|adamw",
       .help = "SGD with momentum 0.9, or AdamW"},
      {"--json", EXAMPLE_OPT_FLAG, &o->json,
       .help = "print one JSON object on stdout at the end (progress stays on stderr)"},
      {"--device", EXAMPLE_OPT_STRING, &o->device, .arg = "cpu|cuda|cuda:N", .help = "where to train"},
      {"--trace", EXAMPLE_OPT_STRING, &o->trace, .arg = "FILE",
       .help =
           "write a Chrome trace of every op of every step to FILE at the end (as resnet50_dist --trace)"},
  };
  int rc = example_parse_opts("resnet50_train", about, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]));
  if (rc != 0) return rc;
  if (strcmp(o->optimizer, "sgd") != 0 && strcmp(o->optimizer, "adamw") != 0) {
    fprintf(stderr, "resnet50_train: --optimizer '%s' is not sgd or adamw\n", o->optimizer);
    return 2;
  }
  if (o->lr == 0) o->lr = strcmp(o->optimizer, "adamw") == 0 ? 1e-3 : 0.02; /* not given */
  return 0;
}

/* Accuracy is measured on each step's own batch (the forward half of the
 * step, before its update); train_accuracy is over the last ACC_WINDOW
 * steps. */
#define ACC_WINDOW 5

int main(int argc, char **argv) {
  options o;
  int rc = parse(argc, argv, &o);
  if (rc) return rc == EXAMPLE_OPTS_HELP ? 0 : rc; /* --help: printed, exit 0 */

  double t0 = now();
  sg_graph *g = NULL;
  sg_session *s = NULL;
  sg_status st = build(&o, &g);
  if (st != SG_OK) return fail("building the graph", st);
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sp.threads = o.threads;
  sp.device = o.device;
  sp.seed = o.seed;
  sp.trace = o.trace != NULL;
  if ((st = sg_session_create(g, &sp, &s)) != SG_OK || (st = sg_session_compile(s)) != SG_OK)
    return fail("compiling", st);
  if ((st = resnet50_init_session(g, s, o.seed)) != SG_OK) return fail("initialising the weights", st);
  double setup_s = now() - t0; /* graph, autodiff, session, compile, weights */
  sg_compile_report rep = SG_COMPILE_REPORT_INIT;
  sg_session_compile_report(s, &rep);
  int64_t n_params = resnet50_count_parameters(g);
  /* Progress goes to stderr, with --json too (a run is never silent; stdout keeps the JSON alone). */
  fprintf(
      stderr,
      "resnet50: %" PRId64
      " parameters, %d classes, %dx%d images, batch %d, %d threads; set up in %.2f s, compiled in %.2f s: "
      "%d ops per step (%d in %d generated kernels: %d programs compiled, %d loads from the cache), "
      "planned memory %.1f MB (%.1f MB without reuse)\n",
      n_params, o.classes, o.res, o.res, o.batch, o.threads, setup_s, rep.compile_seconds, rep.ops_scheduled,
      rep.ops_fused, rep.fused_kernels, rep.kernels_generated, rep.cache_hits, rep.planned_peak_bytes / 1e6,
      rep.sum_tensor_bytes / 1e6);

  resnet50_dataset data;
  size_t xn = (size_t)o.batch * 3 * o.res * o.res;
  float *x = malloc(xn * sizeof(float)), *logits = malloc((size_t)o.batch * o.classes * sizeof(float));
  int64_t *y = malloc((size_t)o.batch * sizeof(int64_t));
  double *times = malloc(((size_t)o.steps + 1) * sizeof(double));
  int *correct = calloc((size_t)o.steps + 1, sizeof(int));
  if (!x || !logits || !y || !times || !correct ||
      resnet50_dataset_init(&data, o.classes, o.res, o.seed) != 0)
    return fail("allocating the data", SG_ERR_NO_MEMORY);

  int64_t xd[] = {o.batch, 3, o.res, o.res}, yd[] = {o.batch};
  float lr = (float)o.lr, loss = NAN, first_loss = NAN;
  double train_s = 0;
  int run = 0, reached = 0; /* steps run; the step at which --until-accuracy was reached */
  for (int step = 0; step < o.steps && !reached; step++) {
    resnet50_dataset_batch(&data, o.batch, x, y);
    if ((st = sg_session_set_input(s, "images", SG_F32, 4, xd, x)) != SG_OK ||
        (st = sg_session_set_input(s, "labels", SG_I64, 1, yd, y)) != SG_OK ||
        (st = sg_session_set_input(s, "lr", SG_F32, 0, NULL, &lr)) != SG_OK)
      return fail("setting inputs", st);
    double ts = now();
    if ((st = sg_session_step(s)) != SG_OK) return fail("training", st);
    times[step] = now() - ts;
    train_s += times[step];
    if ((st = sg_session_read(s, "loss", &loss, sizeof loss)) != SG_OK ||
        (st = sg_session_read(s, "logits", logits, (size_t)o.batch * o.classes * sizeof(float))) != SG_OK)
      return fail("reading the loss", st);
    if (step == 0) first_loss = loss;
    for (int i = 0; i < o.batch; i++) {
      int best = 0;
      for (int c = 1; c < o.classes; c++)
        if (logits[i * o.classes + c] > logits[i * o.classes + best]) best = c;
      correct[step] += best == y[i];
    }
    fprintf(stderr, "step %d  loss %.4f  accuracy %.2f%%  %.2f images/s  (%.1f ms)\n", step + 1, loss,
            100.0 * correct[step] / o.batch, o.batch / times[step], 1e3 * times[step]);
    run = step + 1;
    if (o.until > 0 && run >= ACC_WINDOW) {
      int hits = 0;
      for (int i = run - ACC_WINDOW; i < run; i++) hits += correct[i];
      if (hits >= o.until * ACC_WINDOW * o.batch) reached = run;
    }
  }

  /* Summary: median step time over the steps after the warm-up. */
  int first = run > o.warmup ? o.warmup : 0, timed = run - first;
  double med = 0;
  if (timed > 0) {
    qsort(times + first, (size_t)timed, sizeof(double), cmp_double);
    med = timed % 2 ? times[first + timed / 2]
                    : 0.5 * (times[first + timed / 2 - 1] + times[first + timed / 2]);
  }
  int win = run < ACC_WINDOW ? run : ACC_WINDOW, hits = 0;
  for (int i = run - win; i < run; i++) hits += correct[i];
  double acc = win > 0 ? (double)hits / ((double)win * o.batch) : 0.0;
  uint64_t hash;
  double psum, pl2;
  if ((st = example_param_digest(g, s, &hash, &psum, &pl2)) != SG_OK) return fail("reading parameters", st);
  double ips = med > 0 ? o.batch / med : 0.0;
  if (o.json) {
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, hash);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "example", "resnet50_train");
    cJSON_AddStringToObject(j, "optimizer", o.optimizer);
    cJSON_AddNumberToObject(j, "res", o.res);
    cJSON_AddNumberToObject(j, "batch", o.batch);
    cJSON_AddNumberToObject(j, "classes", o.classes);
    cJSON_AddNumberToObject(j, "width", o.width);
    cJSON_AddNumberToObject(j, "threads", o.threads);
    cJSON_AddStringToObject(j, "device", o.device);
    cJSON_AddNumberToObject(j, "lr", o.lr);
    cJSON_AddNumberToObject(j, "steps", (double)sg_session_steps(s));
    cJSON_AddNumberToObject(j, "warmup_steps", first);
    cJSON_AddNumberToObject(j, "param_count", (double)n_params);
    cJSON_AddNumberToObject(j, "ms_per_step", 1e3 * med);
    cJSON_AddNumberToObject(j, "images_per_second", ips);
    cJSON_AddNumberToObject(j, "first_loss", run > 0 ? first_loss : 0.0);
    cJSON_AddNumberToObject(j, "final_loss", run > 0 ? loss : 0.0);
    cJSON_AddNumberToObject(j, "train_accuracy", acc);
    cJSON_AddNumberToObject(j, "accuracy_window_steps", win);
    cJSON_AddNumberToObject(j, "until_accuracy", o.until);
    cJSON_AddNumberToObject(j, "reached_at_step", reached);
    cJSON_AddNumberToObject(j, "setup_seconds", setup_s);
    cJSON_AddNumberToObject(j, "compile_seconds", rep.compile_seconds);
    example_compile_json(j, &rep);
    cJSON_AddNumberToObject(j, "train_seconds", train_s);
    cJSON_AddNumberToObject(j, "planned_peak_bytes", (double)rep.planned_peak_bytes);
    cJSON_AddNumberToObject(j, "sum_tensor_bytes", (double)rep.sum_tensor_bytes);
    cJSON_AddNumberToObject(j, "peak_rss_mb", (double)peak_rss_mb());
    cJSON_AddStringToObject(j, "params_hash", hex);
    cJSON_AddNumberToObject(j, "params_l2", pl2);
    cJSON_AddNumberToObject(j, "params_sum", psum);
    char *text = cJSON_PrintUnformatted(j);
    if (text) puts(text);
    free(text);
    cJSON_Delete(j);
  } else {
    printf(
        "done: %d steps, median %.1f ms/step (%.2f images/s, %d warm-up step%s excluded), final loss %.4f, "
        "train accuracy %.2f%% (last %d steps), peak RSS %ld MB, params_hash %016" PRIx64 "\n",
        run, 1e3 * med, ips, first, first == 1 ? "" : "s", run > 0 ? loss : 0.0, 100 * acc, win,
        peak_rss_mb(), hash);
  }
  if (o.trace != NULL && (st = sg_session_write_trace(s, o.trace)) != SG_OK)
    return fail("writing the trace", st);
  sg_session_destroy(s);
  sg_graph_destroy(g);
  resnet50_dataset_free(&data);
  free(x);
  free(logits);
  free(y);
  free(times);
  free(correct);
  return 0;
}
