/* resnet50_dist: trains torchvision's ResNet-50 (resnet50_model.c) on the
 * generated image dataset of resnet50_train (resnet50_data.c) with
 * data-parallel ranks (SPEC U3, P7; include/sgrt/dist.h). Start it once per
 * rank:
 *
 *   sgrt launch -n 4 build/examples/resnet50_dist [--steps N] [--batch N] [--res N]
 *       [--threads N] [--lr X] [--width N] [--classes N] [--seed N] [--warmup N]
 *       [--bucket-mb X] [--trace FILE] [--heartbeat-ms N] [--dead-ms N]
 *       [--offload dram|pmem] [--offload-path PATH] [--json]
 *       [--pipeline K] [--tensor T] [--micro-batches M] [--device cpu|cuda|cuda:N]
 *
 * --device cuda trains on a GPU (docs/cuda.md): every rank on the same one
 * unless each is given its own cuda:N; the gradients go from the GPU to
 * host memory, through the ranks' allreduce and back (plain data
 * parallelism only, without --offload).
 *
 * --pipeline K / --tensor T (with --micro-batches M: M micro-batches of the batch) train
 * the same model through sg_dist_create_model (docs/dist.md, "Pipeline and
 * tensor parallelism through sg_dist"): the forward graph of resnet50_build
 * is cut into K pipeline stages or split T ways (both: K stages, each split
 * T ways), the world being D copies
 * of that (D = ranks / (K x T)); --batch is then per copy, the inputs are
 * set by the program. A pipeline of K >= 3 stages, a tensor group of
 * T >= 3 shares or a pipeline of tensor groups heals itself
 * (sg_dist_params.heal: each part's state is copied to the next rank of its
 * group after every step; a lost stage is merged into a neighbour, a group
 * split again over fewer ways, every stage's group one share narrower; with
 * several copies the others release their rank at the same place);
 * --no-heal turns that off.
 *
 * --batch is per rank (the graph is built with it, as with PyTorch DDP); the
 * global batch is batch x ranks, times M with --micro-batches M in plain data
 * parallelism (each rank accumulates the gradients of M batches before the
 * allreduce, sg_dist_params.micro_batches). Every rank draws its own shard of each step
 * (the dataset's classes are the same everywhere, the samples are seeded by
 * step and rank). Rank 0 prints one line per step: the loss averaged over
 * the ranks, images/s of the whole job, and how many ranks are healthy, on
 * stderr (with --json too); with --json its stdout holds one JSON object. --trace writes a
 * Chrome trace (chrome://tracing, Perfetto) of every rank's ops, gradient
 * allreduces and waits.
 *
 * Inputs go through sg_dist's feed callback (shard k of step s is batch
 * s * ranks + k of the dataset), so the job heals itself when a rank fails
 * (docs/resilience.md): the survivors take over the lost shards, the global
 * batch stays the same, and the step line says "recovered ...". Faults can
 * be injected with `sgrt launch --inject SPEC` (bench/resilience.sh). A rank
 * left out by a recovery exits with status 75 (SG_DIST_EXIT_EXCLUDED); a job
 * that cannot heal ends every rank with status 1. The lines and the JSON come
 * from whichever rank is rank 0 now. With --no-heal the program sets the
 * inputs itself and sg_dist keeps no rollback snapshots (a failure then ends
 * the job): bench/replication_cost.sh measures what the snapshots cost. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <sgrt/sgrt.h>

#include "example_digest.h"
#include "example_metrics.h"
#include "example_opts.h"
#include "resnet50_data.h"
#include "resnet50_model.h"

typedef struct options {
  int batch, res, steps, threads, classes, width, warmup, json, heartbeat_ms, dead_ms, no_heal;
  int pipeline, tensor, micro; /* > 1: sg_dist_create_model's modes */
  int metrics_port;            /* 0: none (SG_METRICS_PORT gives the default) */
  const char *metrics_file, *tensorboard;
  double lr, bucket_mb;
  double repartition_p99_ms, repartition_cpu; /* pipeline: the profile's thresholds (0: the library's) */
  uint64_t seed;
  const char *trace, *offload, *offload_path, *device;
} options;

static const char about[] =
    "Trains torchvision's ResNet-50 layout on generated images, one process per rank: data parallel by\n"
    "default, or a pipeline (--pipeline), tensor groups (--tensor) or both, healing around lost ranks.\n"
    "Start it once per rank: sgrt launch -n 4 -- resnet50_dist [OPTIONS]. Rank 0 prints one line per step\n"
    "on stderr.\n";

static int parse(int argc, char **argv, options *o) {
  const sg_dist_params lib = SG_DIST_PARAMS_INIT; /* the failure detector's defaults are the library's */
  *o = (options){.batch = 8,
                 .res = 64,
                 .steps = 10,
                 .threads = 1,
                 .classes = 10,
                 .width = 64,
                 .warmup = 1,
                 .heartbeat_ms = lib.heartbeat_ms,
                 .dead_ms = lib.dead_ms,
                 .pipeline = 1,
                 .tensor = 1,
                 .micro = 1,
                 .lr = 0.01,
                 .bucket_mb = 25,
                 .seed = 1,
                 .device = "cpu"};
  o->metrics_port = example_metrics_env_port("resnet50_dist");
  if (o->metrics_port < 0) return 2;
  /* The ranges are in the usage text and docs/examples.md. */
  const example_opt opts[] = {
      {"--batch", EXAMPLE_OPT_INT, &o->batch, 2, 65536,
       .help = "images per rank and step (a pipeline or tensor group: per copy of the model)"},
      {"--res", EXAMPLE_OPT_INT, &o->res, 32, 4096, .help = "image height and width"},
      {"--steps", EXAMPLE_OPT_INT, &o->steps, 1, 1000000, .help = "training steps"},
      {"--threads", EXAMPLE_OPT_INT, &o->threads, 1, 4096, .help = "compute threads per rank"},
      {"--classes", EXAMPLE_OPT_INT, &o->classes, 1, 100000, .help = "output classes"},
      {"--width", EXAMPLE_OPT_INT, &o->width, 1, 4096,
       .help = "bottleneck width of the first stage (64: ResNet-50)"},
      {"--warmup", EXAMPLE_OPT_INT, &o->warmup, 0, 1000000, .help = "first steps left out of the timings"},
      {"--heartbeat-ms", EXAMPLE_OPT_INT, &o->heartbeat_ms, 1, 3600000,
       .help = "heartbeat period of the failure detector"},
      {"--dead-ms", EXAMPLE_OPT_INT, &o->dead_ms, 2, 3600000,
       .help = "silence after which a rank is declared dead (more than --heartbeat-ms)"},
      {"--lr", EXAMPLE_OPT_DOUBLE, &o->lr, 0, 100, .min_open = 1,
       .help = "learning rate (SGD, momentum 0.9)"},
      {"--bucket-mb", EXAMPLE_OPT_DOUBLE, &o->bucket_mb, 0, 4096, .min_open = 1,
       .help = "gradient bucket size of the allreduces, MB"},
      {"--seed", EXAMPLE_OPT_U64, &o->seed, .help = "seed of the images and the initial weights"},
      {"--trace", EXAMPLE_OPT_STRING, &o->trace, .arg = "FILE",
       .help = "write a Chrome trace of every rank's ops and allreduces"},
      {"--offload", EXAMPLE_OPT_STRING, &o->offload, .arg = "dram|pmem",
       .help = "keep the optimizer state in a tier of the global page table"},
      {"--offload-path", EXAMPLE_OPT_STRING, &o->offload_path, .arg = "PATH",
       .help = "the PMEM tier's file or directory (with --offload pmem)"},
      {"--json", EXAMPLE_OPT_FLAG, &o->json,
       .help = "rank 0 prints one JSON object on stdout at the end (progress stays on stderr)"},
      {"--no-heal", EXAMPLE_OPT_FLAG, &o->no_heal, .help = "fail instead of healing when a rank is lost"},
      {"--pipeline", EXAMPLE_OPT_INT, &o->pipeline, 1, 256, .help = "pipeline stages"},
      {"--tensor", EXAMPLE_OPT_INT, &o->tensor, 1, 256, .help = "tensor-parallel shares per stage"},
      {"--micro-batches", EXAMPLE_OPT_INT, &o->micro, 1, 65536, .help = "micro-batches per step"},
      {"--device", EXAMPLE_OPT_STRING, &o->device, .arg = "cpu|cuda|cuda:N", .help = "where to train"},
      {"--repartition-p99-ms", EXAMPLE_OPT_DOUBLE, &o->repartition_p99_ms, -1, 3600000,
       .help = "pipeline: re-cut when a stage's p99 step time stays above it (0: 200, -1: never)"},
      {"--metrics-file", EXAMPLE_OPT_STRING, &o->metrics_file, .arg = "FILE",
       .help =
           "rank 0 writes one JSON line per step to FILE (loss, images/s, compute and exposed communication, "
           "health, recoveries)"},
      {"--tensorboard", EXAMPLE_OPT_STRING, &o->tensorboard, .arg = "DIR",
       .help = "rank 0 writes TensorBoard scalars (loss, images/s, step time split, health) to an event file "
               "in DIR"},
      {"--metrics-port", EXAMPLE_OPT_INT, &o->metrics_port, 0, 65535,
       .help =
           "rank 0 serves Prometheus metrics on http://HOST:PORT/metrics (0: none; default SG_METRICS_PORT)"},
      {"--repartition-cpu", EXAMPLE_OPT_DOUBLE, &o->repartition_cpu, 0, 1,
       .help = "pipeline: ... while its CPU use is above this fraction too (0: 0.85)"},
  };
  int rc = example_parse_opts("resnet50_dist", about, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]));
  if (rc != 0) return rc;
  if (o->dead_ms <= o->heartbeat_ms) {
    fprintf(stderr, "resnet50_dist: --dead-ms %d must be more than --heartbeat-ms %d\n", o->dead_ms,
            o->heartbeat_ms);
    return 2;
  }
  return 0;
}

/* Forward, backward and SGD with momentum 0.9, for one rank's batch. */
static sg_status build(const options *o, sg_graph **out) {
  resnet50_config cfg = RESNET50_CONFIG_INIT;
  cfg.batch = o->batch;
  cfg.image_size = o->res;
  cfg.classes = o->classes;
  cfg.width = o->width;
  return resnet50_build_training(&cfg, "sgd", 0, out);
}

/* --pipeline / --tensor: the forward graph only (images -> ResNet-50 ->
 * mean cross-entropy "loss"); sg_dist_create_model cuts it per rank and
 * adds backward and the optimizer to each part. */
static sg_status build_forward(const options *o, sg_graph **out, sg_tensor *loss) {
  resnet50_config cfg = RESNET50_CONFIG_INIT;
  cfg.batch = o->batch;
  cfg.image_size = o->res;
  cfg.classes = o->classes;
  cfg.width = o->width;
  sg_graph *g;
  sg_status st = sg_graph_create(&g);
  if (st != SG_OK) return st;
  int64_t xd[] = {o->batch, 3, o->res, o->res}, yd[] = {o->batch};
  sg_tensor x = sg_input(g, "images", SG_F32, 4, xd), y = sg_input(g, "labels", SG_I64, 1, yd), logits;
  st = resnet50_build(g, &cfg, x, &logits);
  *loss = sg_cross_entropy(g, logits, y, SG_REDUCTION_MEAN);
  sg_tensor_set_name(g, *loss, "loss");
  sg_graph_mark_output(g, *loss);
  if (st == SG_OK) st = sg_graph_finalize(g);
  if (st != SG_OK) {
    sg_graph_destroy(g);
    return st;
  }
  *out = g;
  return SG_OK;
}

/* torchvision's initial values into this rank's part: a tensor on another
 * stage is not there (skipped); one split by the tensor-parallel plan gets
 * this rank's slice along the split axis. */
static sg_status init_part(const sg_graph *g, sg_dist *d, const options *o) {
  sg_tp_plan *plan = NULL;
  if (o->tensor > 1) {
    sg_tp_params tp = SG_TP_PARAMS_INIT;
    tp.ways = o->tensor;
    sg_status st = sg_tp_plan_create(g, &tp, &plan);
    if (st != SG_OK) return st;
  }
  int T = o->tensor, t_rank = sg_dist_rank(d) % T;
  sg_status st = SG_OK;
  for (int32_t t = 0; t < sg_graph_num_tensors(g) && st == SG_OK; t++) {
    sg_tensor_info info;
    if (sg_graph_tensor_info(g, (sg_tensor){t}, &info) != SG_OK) continue;
    if (info.role != SG_ROLE_PARAMETER && info.role != SG_ROLE_STATE) continue;
    int axis = -1;
    for (int32_t i = 0; plan != NULL && i < sg_tp_plan_count(plan); i++) {
      sg_tp_annotation a;
      if (sg_tp_plan_get(plan, i, &a) != SG_OK || a.split == SG_TP_REPLICATE) continue;
      if (a.weight.id == t) axis = a.weight_axis;
      if (a.split == SG_TP_COLUMN && a.bias.id == t) axis = info.ndim - 1;
    }
    float *v = malloc(info.nbytes), *part = malloc(info.nbytes);
    if (v == NULL || part == NULL || resnet50_init_values(&info, o->seed, v) != 0) {
      free(v);
      free(part);
      st = SG_ERR_NO_MEMORY;
      break;
    }
    size_t bytes = info.nbytes;
    if (axis >= 0) { /* this rank's block of every run of the axis */
      int64_t outer = 1, inner = 1, n = info.dims[axis], k = n / T;
      for (int i = 0; i < axis; i++) outer *= info.dims[i];
      for (int i = axis + 1; i < info.ndim; i++) inner *= info.dims[i];
      for (int64_t r = 0; r < outer; r++)
        memcpy(part + r * k * inner, v + (r * n + t_rank * k) * inner, sizeof(float) * (size_t)(k * inner));
      bytes /= (size_t)T;
    }
    st = sg_session_write(sg_dist_session(d), info.name, axis >= 0 ? part : v, bytes);
    if (st == SG_ERR_NOT_FOUND) st = SG_OK; /* another stage's */
    free(v);
    free(part);
  }
  sg_tp_plan_destroy(plan);
  return st;
}

static double clock_s(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
static double now(void) { return clock_s(CLOCK_MONOTONIC); }
/* CPU time of this rank's process, all threads: on a shared machine it
 * measures the rank's own work (compute and communication) whatever else
 * runs, where wall time also counts waiting for a core. */
static double cpu_now(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  if (n <= 0) return 0;
  qsort(v, (size_t)n, sizeof(double), cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* What the feed callback needs: the dataset and this rank's buffers. */
typedef struct feeder {
  resnet50_dataset data;
  float *x;
  int64_t *y;
  int64_t xd[4], yd[1];
  float lr;
  int batch;
} feeder;

/* Shard `shard` of step `step`: the dataset's batch step * n_shards + shard,
 * whichever rank runs it (after a recovery a rank runs several). */
static sg_status feed(void *ctx, sg_dist *d, uint64_t step, int shard, int n_shards) {
  feeder *f = ctx;
  resnet50_dataset_seek(&f->data, step * (uint64_t)n_shards + (uint64_t)shard);
  resnet50_dataset_batch(&f->data, f->batch, f->x, f->y);
  sg_status st = sg_dist_set_input(d, "images", SG_F32, 4, f->xd, f->x);
  if (st == SG_OK) st = sg_dist_set_input(d, "labels", SG_I64, 1, f->yd, f->y);
  if (st == SG_OK) st = sg_dist_set_input(d, "lr", SG_F32, 0, NULL, &f->lr);
  return st;
}

static int fail(int rank, const char *what, sg_status st) {
  fprintf(stderr, "resnet50_dist: rank %d: %s: %s: %s\n", rank, what, sg_status_str(st), sg_last_error());
  return 1;
}

/* One step's figures for --metrics-file and --metrics-port (example_metrics.h). */
static void record_metrics(example_metrics *m, const sg_dist *d, const sg_dist_stats *st, int step,
                           double images_per_s, double seconds) {
  example_step e = {.step = step + 1,
                    .loss = st->loss_mean,
                    .images_per_s = images_per_s,
                    .step_ms = 1e3 * seconds,
                    .exposed_comm_ms = st->wait_ms,
                    .allreduce_bytes = (double)st->gradient_bytes,
                    .world = st->world_size,
                    .healthy = st->healthy_ranks,
                    .degraded = st->degraded_ranks,
                    .recoveries = st->recoveries,
                    .rto_ms = st->rto_ms};
  const sg_health *h = sg_dist_health(d); /* NULL without healing: no per-peer figures then */
  e.unreachable = h ? sg_health_count(h, SG_HEALTH_UNREACHABLE) : 0;
  e.n_ranks = h ? sg_health_world_size(h) : 0;
  if (e.n_ranks > EXAMPLE_METRICS_MAX_RANKS) e.n_ranks = EXAMPLE_METRICS_MAX_RANKS;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts); /* the clock the monitor's times are on */
  int64_t now_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  for (int r = 0; r < e.n_ranks; r++) {
    sg_health_peer p;
    e.heartbeat_age_ms[r] = r != sg_health_self(h) && sg_health_peer_info(h, r, &p) == SG_OK
                                ? (double)(now_ms - p.last_heard_ms)
                                : -1;
  }
  example_metrics_step(m, &e);
}

int main(int argc, char **argv) {
  options o;
  int rc = parse(argc, argv, &o);
  if (rc) return rc == EXAMPLE_OPTS_HELP ? 0 : rc; /* --help: printed, exit 0 */

  double t0 = now();
  sg_graph *g = NULL;
  int parts = o.pipeline > 1 || o.tensor > 1; /* sg_dist_create_model's pipeline or tensor mode */
  sg_tensor loss = SG_NO_TENSOR;
  sg_status st = parts ? build_forward(&o, &g, &loss) : build(&o, &g);
  if (st != SG_OK) return fail(-1, "building the graph", st);
  sg_dist_params dp = SG_DIST_PARAMS_INIT; /* rank, world size, master: from the launcher's environment */
  dp.threads = o.threads;
  dp.device = o.device; /* validated by sg_dist_create */
  dp.seed = o.seed;
  dp.bucket_bytes = (size_t)(o.bucket_mb * 1048576.0);
  dp.trace_path = o.trace;
  dp.heartbeat_ms = o.heartbeat_ms;
  dp.dead_ms = o.dead_ms;
  static feeder fd;
  fd.batch = o.batch;
  fd.lr = (float)o.lr;
  fd.xd[0] = o.batch, fd.xd[1] = 3, fd.xd[2] = o.res, fd.xd[3] = o.res;
  fd.yd[0] = o.batch;
  fd.x = malloc((size_t)o.batch * 3 * o.res * o.res * sizeof(float));
  fd.y = malloc((size_t)o.batch * sizeof(int64_t));
  if (!fd.x || !fd.y || resnet50_dataset_init(&fd.data, o.classes, o.res, o.seed) != 0)
    return fail(-1, "allocating the data", SG_ERR_NO_MEMORY);
  dp.offload = o.offload; /* validated by sg_dist_create */
  dp.offload_path = o.offload_path;
  /* Without the feed callback sg_dist keeps no rollback snapshots and does
   * not heal (a peer's failure ends the job): the program sets each step's
   * inputs itself. bench/replication_cost.sh compares the two. */
  /* A pipeline of 3 or more stages, a tensor group of 3 or more shares, or a pipeline of tensor groups heals
   * through sg_dist_params.heal (copies of each part's state); the program sets its inputs in every mode but
   * data parallelism. */
  dp.heal = parts && (o.pipeline >= 3 || o.tensor >= 3 || (o.pipeline > 1 && o.tensor > 1)) && !o.no_heal;
  if (parts) o.no_heal = 1;
  dp.feed = o.no_heal ? NULL : feed;
  dp.feed_ctx = &fd;
  dp.pipeline = o.pipeline;
  dp.tensor = o.tensor;
  dp.repartition_p99_ms = o.repartition_p99_ms;
  dp.repartition_cpu = o.repartition_cpu;
  sg_sgd_params sgd = SG_SGD_PARAMS_INIT;
  sgd.momentum = 0.9;
  sg_dist_optimizer opt = SG_DIST_OPTIMIZER_INIT; /* SGD, momentum 0.9, from the input "lr" */
  opt.sgd = &sgd;
  dp.micro_batches = o.micro; /* data parallelism: accumulation through the feed; else cuts of the batch */
  sg_dist *d;
  st = parts ? sg_dist_create_model(g, loss, &opt, &dp, &d) : sg_dist_create(g, &dp, &d);
  if (st != SG_OK) return fail(-1, "joining the job", st);
  int rank = sg_dist_rank(d), world = sg_dist_size(d);
  /* Copies of the model, each fed its own batch: the ranks (data parallelism), or the pipelines. */
  int copies = world / (o.pipeline * o.tensor), copy = rank / (o.pipeline * o.tensor);
  /* Images per step: each copy's batch, M of them per rank with micro-batches in data parallelism. */
  int global_batch = o.batch * copies * (parts ? 1 : o.micro);
  sg_dist_stats stats = SG_DIST_STATS_INIT;
  sg_dist_get_stats(d, &stats);
  /* A rank restarted by `sgrt launch --heal --restart-failed` (SG_REJOIN=1) joined the running job
   * in sg_dist_create and received the state at step stats.steps: it must not initialise, and it
   * goes on from that step. Otherwise every rank initialises; the first step broadcasts rank 0's
   * weights anyway. */
  int start = (int)stats.steps;
  if (start == 0 &&
      (st = parts ? init_part(g, d, &o) : resnet50_init_session(g, sg_dist_session(d), o.seed)) != SG_OK)
    return fail(rank, "initialising the weights", st);
  double setup_s = now() - t0;
  int64_t n_params = resnet50_count_parameters(g);
  /* Progress goes to stderr, with --json too (a run is never silent; stdout keeps the JSON alone). */
  if (rank == 0)
    fprintf(stderr,
            "resnet50_dist: %d ranks x batch %d (global batch %d), %dx%d images, %d classes, width %d, %d "
            "thread%s "
            "per rank; %" PRId64 " parameters, %u gradient buckets (%.1f MB per step); ready in %.2f s\n",
            world, o.batch, global_batch, o.res, o.res, o.classes, o.width, o.threads,
            o.threads == 1 ? "" : "s", n_params, stats.buckets, stats.gradient_bytes / 1e6, setup_s);

  double *times = calloc((size_t)o.steps + 1, sizeof(double)),
         *comm = calloc((size_t)o.steps + 1, sizeof(double));
  double *waits = calloc((size_t)o.steps + 1, sizeof(double)),
         *cpu = calloc((size_t)o.steps + 1, sizeof(double));
  if (!times || !comm || !waits || !cpu) return fail(rank, "allocating the data", SG_ERR_NO_MEMORY);

  double train_s = 0, worst_rto = 0, worst_rto_step = 0, worst_detection = 0,
         *snap = calloc((size_t)o.steps + 1, sizeof(double));
  int max_degraded = 0; /* most ranks DEGRADED at once over the run */
  double *snap_wait = calloc((size_t)o.steps + 1, sizeof(double));
  double *repl = calloc((size_t)o.steps + 1, sizeof(double)); /* a healing pipeline's copies, or ZeRO-1's */
  if (snap == NULL || snap_wait == NULL || repl == NULL)
    return fail(rank, "allocating the data", SG_ERR_NO_MEMORY);
  /* Metrics: written and served by the rank that starts as rank 0, for its whole run. */
  example_metrics *metrics = NULL;
  if (rank == 0 &&
      example_metrics_open("resnet50_dist", o.metrics_file, o.metrics_port, o.tensorboard, &metrics) != 0)
    return 2;
  int recoveries = 0, repartitions = 0, recut_step = -1; /* the first re-cut of a pipeline: after this step */
  double first_loss = NAN;                               /* of the first step this rank ran */
  for (int step = start; step < o.steps; step++) {
    double ts = now(), cs = cpu_now();
    if (o.no_heal) st = feed(&fd, d, (uint64_t)step, parts ? copy : rank, parts ? copies : world);
    if (st != SG_OK || (st = sg_dist_step(d)) != SG_OK) {
      fail(sg_dist_rank(d), "training", st);
      sg_dist_get_stats(d, &stats);
      int excluded = stats.excluded;
      sg_dist_destroy(d); /* a failed job closes at once, without waiting for peers */
      return excluded ? SG_DIST_EXIT_EXCLUDED : 1;
    }
    rank = sg_dist_rank(d); /* a recovery renumbers the ranks */
    times[step] = now() - ts;
    cpu[step] = cpu_now() - cs;
    train_s += times[step];
    sg_dist_get_stats(d, &stats);
    if (step == start) first_loss = stats.loss_mean;
    comm[step] = stats.comm_ms;
    waits[step] = stats.wait_ms;
    snap[step] = stats.snapshot_ms;
    snap_wait[step] = stats.snapshot_wait_ms;
    repl[step] = stats.replication_ms;
    char healed[512] = "";
    if (stats.recoveries > recoveries) {
      recoveries = stats.recoveries;
      if (stats.rto_ms > worst_rto) worst_rto = stats.rto_ms;
      if (stats.rto_step_ms > worst_rto_step) worst_rto_step = stats.rto_step_ms;
      if (stats.detection_ms > worst_detection) worst_detection = stats.detection_ms;
      snprintf(healed, sizeof healed,
               "  [recovered: epoch %d, %d ranks, detection %.0f ms, RTO %.0f ms (%.0f ms to this step's "
               "end), %" PRIu64 " step(s) redone, %d shard(s) here]",
               stats.epoch, stats.world_size, stats.detection_ms, stats.rto_ms, stats.rto_step_ms,
               stats.redone_steps, stats.shards);
    }
    if (stats.repartitions > repartitions) {
      repartitions = stats.repartitions;
      if (recut_step < 0) recut_step = step;
      snprintf(healed + strlen(healed), sizeof healed - strlen(healed),
               "  [re-cut: the stages repartitioned from the profile, %" PRIu64 " bytes of state moved]",
               stats.migrated_bytes_total);
    }
    /* world: the original ranks, whose shards make the global batch (kept by a recovery). */
    if (stats.degraded_ranks > max_degraded) max_degraded = stats.degraded_ranks;
    char degraded[32] = "";
    if (stats.degraded_ranks > 0) snprintf(degraded, sizeof degraded, ", %d degraded", stats.degraded_ranks);
    if (rank == 0)
      fprintf(
          stderr,
          "step %d/%d  loss %.4f  %.1f images/s  healthy %d/%d%s  (%.0f ms; allreduce %.0f ms, %.0f ms not "
          "hidden by backward; snapshot %.1f ms, %.1f ms not hidden)%s\n",
          step + 1, o.steps, stats.loss_mean, global_batch / times[step], stats.healthy_ranks, world,
          degraded, 1e3 * times[step], stats.comm_ms, stats.wait_ms, stats.snapshot_ms,
          stats.snapshot_wait_ms, healed);
    if (metrics != NULL) record_metrics(metrics, d, &stats, step, global_batch / times[step], times[step]);
  }
  example_metrics_close(metrics);

  /* Summary: medians over the steps after the warm-up. */
  int first = o.steps > o.warmup ? o.warmup : 0;
  if (first < start) first = start < o.steps ? start : o.steps; /* a joiner timed only its own steps */
  int timed = o.steps - first;
  /* A pipeline that re-cut itself: steps/s before the first switch (after the warm-up) and after it (the
   * step after the switch left out), from this program's step times; before the medians below, which
   * sort in place. */
  double before = 0, after = 0;
  if (recut_step > first) before = 1.0 / median(times + first, recut_step - first);
  if (recut_step >= 0 && o.steps - recut_step - 2 > 0)
    after = 1.0 / median(times + recut_step + 2, o.steps - recut_step - 2);
  double med = median(times + first, timed), med_comm = median(comm + first, timed);
  double med_wait = median(waits + first, timed), med_cpu = median(cpu + first, timed);
  double ips = med > 0 ? global_batch / med : 0.0;
  double med_snap = median(snap + first, timed), med_snap_wait = median(snap_wait + first, timed);
  double med_repl = median(repl + first, timed);
  uint64_t hash = 0;
  double psum = 0, pl2 = 0;
  /* A rank's part holds only some of g's parameters: there, sg_dist_params_hash (collective) digests
   * every part's. */
  if (!parts && (st = example_param_digest(g, sg_dist_session(d), &hash, &psum, &pl2)) != SG_OK)
    return fail(rank, "reading parameters", st);
  uint64_t dist_hash;
  sg_dist_params_hash(d, &dist_hash);
  if (parts) hash = dist_hash;
  if (dist_hash != hash) return fail(rank, "params_hash differs from sg_dist_params_hash", SG_ERR_INTERNAL);
  if (rank == 0 && o.json) {
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, hash);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "example", "resnet50_dist");
    cJSON_AddNumberToObject(j, "world_size", world);
    cJSON_AddStringToObject(j, "device", o.device);
    cJSON_AddNumberToObject(j, "batch", o.batch);
    cJSON_AddNumberToObject(j, "global_batch", global_batch);
    cJSON_AddNumberToObject(j, "res", o.res);
    cJSON_AddNumberToObject(j, "classes", o.classes);
    cJSON_AddNumberToObject(j, "width", o.width);
    cJSON_AddNumberToObject(j, "threads", o.threads);
    cJSON_AddNumberToObject(j, "lr", o.lr);
    cJSON_AddNumberToObject(j, "steps", (double)stats.steps);
    cJSON_AddNumberToObject(j, "warmup_steps", first);
    cJSON_AddNumberToObject(j, "param_count", (double)n_params);
    cJSON_AddNumberToObject(j, "buckets", stats.buckets);
    cJSON_AddNumberToObject(j, "gradient_bytes", (double)stats.gradient_bytes);
    cJSON_AddNumberToObject(j, "ms_per_step", 1e3 * med);
    cJSON_AddNumberToObject(j, "allreduce_ms_per_step", med_comm);
    cJSON_AddNumberToObject(j, "exposed_comm_ms_per_step", med_wait);
    cJSON_AddNumberToObject(j, "cpu_ms_per_step", 1e3 * med_cpu);
    cJSON_AddNumberToObject(j, "images_per_s", ips);
    cJSON_AddNumberToObject(j, "first_loss", first_loss);
    cJSON_AddNumberToObject(j, "final_loss", stats.loss_mean);
    cJSON_AddNumberToObject(j, "healthy_ranks", stats.healthy_ranks);
    cJSON_AddNumberToObject(j, "degraded_ranks", stats.degraded_ranks);
    cJSON_AddNumberToObject(j, "max_degraded_ranks", max_degraded);
    cJSON_AddNumberToObject(j, "dropped_shards", (double)stats.dropped_shards);
    cJSON_AddNumberToObject(j, "rereduced_steps", stats.rereduced_steps);
    cJSON_AddNumberToObject(j, "collective_retries", stats.collective_retries);
    /* The profile sampler's latest sample (SPEC P6) and whether its trigger fired. */
    cJSON_AddNumberToObject(j, "cpu_util", stats.cpu_util);
    cJSON_AddNumberToObject(j, "step_p99_ms", stats.step_p99_ms);
    cJSON_AddNumberToObject(j, "steps_per_s", stats.steps_per_s);
    cJSON_AddBoolToObject(j, "repartition_due", stats.repartition_due != 0);
    cJSON_AddNumberToObject(j, "repartitions", stats.repartitions);
    cJSON_AddNumberToObject(j, "repartition_step", recut_step + 1); /* 0: none */
    cJSON_AddNumberToObject(j, "steps_per_s_before", before);
    cJSON_AddNumberToObject(j, "steps_per_s_after", after);
    cJSON_AddNumberToObject(j, "repartition_speedup", before > 0 && after > 0 ? after / before : 0.0);
    cJSON_AddNumberToObject(j, "migrated_bytes", (double)stats.migrated_bytes_total);
    cJSON_AddNumberToObject(j, "ranks_now", stats.world_size);
    cJSON_AddNumberToObject(j, "epoch", stats.epoch);
    cJSON_AddNumberToObject(j, "recoveries", stats.recoveries);
    cJSON_AddNumberToObject(j, "rejoins", stats.rejoins); /* restarted ranks admitted (docs/resilience.md) */
    cJSON_AddNumberToObject(j, "detection_ms", worst_detection); /* worst over the recoveries seen here */
    cJSON_AddNumberToObject(j, "rto_ms", worst_rto);
    cJSON_AddNumberToObject(j, "rto_step_ms", worst_rto_step);
    cJSON_AddNumberToObject(j, "rpo_steps", (double)stats.rpo_steps);
    cJSON_AddNumberToObject(j, "redone_steps", (double)stats.redone_steps);
    cJSON_AddNumberToObject(j, "snapshot_ms_per_step", med_snap);
    /* Rank 0's copy to its buddy (a healing pipeline: its stage's state, after each step). */
    cJSON_AddNumberToObject(j, "replica_bytes", (double)stats.replica_bytes);
    cJSON_AddNumberToObject(j, "replication_ms_per_step", med_repl);
    cJSON_AddNumberToObject(j, "offload_bytes", (double)stats.offload_bytes);
    /* The copy runs on the scheduler thread during forward; what the step pays is the wait. */
    cJSON_AddNumberToObject(j, "snapshot_exposed_ms_per_step", med_snap_wait);
    cJSON_AddNumberToObject(j, "snapshot_fraction", med > 0 ? med_snap_wait / (1e3 * med) : 0.0);
    cJSON_AddNumberToObject(j, "setup_seconds", setup_s);
    cJSON_AddNumberToObject(j, "train_seconds", train_s);
    cJSON_AddStringToObject(j, "params_hash", hex);
    cJSON_AddNumberToObject(j, "params_l2", pl2);
    cJSON_AddNumberToObject(j, "params_sum", psum);
    if (o.trace) cJSON_AddStringToObject(j, "trace", o.trace);
    char *text = cJSON_PrintUnformatted(j);
    if (text) puts(text);
    free(text);
    cJSON_Delete(j);
  } else if (rank == 0) {
    printf("done: %d ranks, %d steps, median %.1f ms/step (%.1f images/s; allreduce %.1f ms, %.1f ms not "
           "hidden; "
           "%d warm-up step%s excluded), final loss %.4f, params_hash %016" PRIx64 "%s%s\n",
           world, o.steps, 1e3 * med, ips, med_comm, med_wait, first, first == 1 ? "" : "s", stats.loss_mean,
           hash, o.trace ? ", trace " : "", o.trace ? o.trace : "");
  }
  fflush(stdout);
  if ((st = sg_dist_destroy(d)) != SG_OK) return fail(rank, "leaving the job", st);
  sg_graph_destroy(g);
  resnet50_dataset_free(&fd.data);
  free(fd.x);
  free(fd.y);
  free(snap);
  free(snap_wait);
  free(repl);
  free(times);
  free(comm);
  free(waits);
  free(cpu);
  return 0;
}
