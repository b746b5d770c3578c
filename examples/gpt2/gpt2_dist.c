/* gpt2_dist: data-parallel training of the byte-level GPT-2 of gpt2_train,
 * one process per rank (sgrt launch, torchrun-style variables, srun, mpirun).
 *
 *   sgrt launch -n 4 -- build/examples/gpt2_dist --preset tiny --steps 20 --json | tail -n 1
 *
 * Every step's global batch (--batch windows of the text, gpt2_window: the
 * same windows whatever the world size) is cut into one shard per rank and
 * micro-batch; the feed callback sets a shard's tokens, targets and learning
 * rate, so gradients are accumulated over --micro-batches and the job heals
 * around a lost rank (strict QoS: the same global batch, no step lost) unless
 * --no-heal. --zero shards the AdamW state (ZeRO-1). Rank 0 prints progress on
 * stderr and, with --json, one JSON object on stdout; --save FILE writes its
 * parameters as a checkpoint (.sgg) at the end, for comparisons. Pipeline and
 * tensor parallelism of GPT-2 are not there yet. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <sgrt/sgrt.h>

#include "example_opts.h"
#include "gpt2_data.h"
#include "gpt2_model.h"

typedef struct options {
  const char *preset, *data, *save;
  int layers, heads, width, context, seq, batch, steps, warmup, micro, zero, no_heal, threads, json;
  double lr, min_lr, weight_decay;
  uint64_t seed;
} options;

typedef struct feeder {
  const options *o;
  const unsigned char *text;
  size_t n_train;
  int64_t per, seq; /* windows per shard, tokens per window */
  int64_t *tok, *tgt;
} feeder;

/* Shard `shard` of `n` of step `step`: windows shard * per .. of the step's global batch. */
static sg_status feed(void *ctx, sg_dist *d, uint64_t step, int shard, int n) {
  (void)n;
  feeder *f = ctx;
  for (int64_t b = 0; b < f->per; b++)
    gpt2_window(f->text, f->n_train, f->seq, f->o->seed, step, (uint64_t)(shard * f->per + b),
                f->tok + b * f->seq, f->tgt + b * f->seq);
  int64_t td[] = {f->per, f->seq};
  float lr = (float)gpt2_lr_at(f->o->lr, f->o->min_lr, f->o->warmup, f->o->steps, (int)step);
  sg_status st = sg_dist_set_input(d, "tokens", SG_I64, 2, td, f->tok);
  if (st == SG_OK) st = sg_dist_set_input(d, "targets", SG_I64, 2, td, f->tgt);
  if (st == SG_OK) st = sg_dist_set_input(d, "lr", SG_F32, 0, NULL, &lr);
  return st;
}

static int fail(const char *what, sg_status st) {
  fprintf(stderr, "gpt2_dist: %s failed: %s (%s)\n", what, sg_last_error(), sg_status_str(st));
  return 1;
}

static int parse(int argc, char **argv, options *o) {
  *o = (options){.preset = "tiny",
                 .data = "/usr/share/common-licenses",
                 .batch = 8,
                 .steps = 20,
                 .warmup = 5,
                 .micro = 1,
                 .threads = 1,
                 .lr = 1e-3,
                 .min_lr = 1e-4,
                 .weight_decay = 0.1,
                 .seed = 1};
  const example_opt opts[] = {
      {"--preset", EXAMPLE_OPT_STRING, &o->preset, .arg = "tiny|mini|small",
       .help = "the model's sizes (gpt2_train)"},
      {"--layers", EXAMPLE_OPT_INT, &o->layers, 0, 1024, .help = "blocks (0: the preset's)"},
      {"--heads", EXAMPLE_OPT_INT, &o->heads, 0, 1024, .help = "attention heads (0: the preset's)"},
      {"--width", EXAMPLE_OPT_INT, &o->width, 0, 65536, .help = "embedding width (0: the preset's)"},
      {"--context", EXAMPLE_OPT_INT, &o->context, 0, 65536, .help = "positions (0: the preset's)"},
      {"--seq", EXAMPLE_OPT_INT, &o->seq, 0, 65536, .help = "tokens per window (0: the context)"},
      {"--batch", EXAMPLE_OPT_INT, &o->batch, 1, 1 << 20,
       .help = "windows per step in all, split over ranks and micro-batches"},
      {"--steps", EXAMPLE_OPT_INT, &o->steps, 1, 100000000, .help = "training steps"},
      {"--lr", EXAMPLE_OPT_DOUBLE, &o->lr, 0, 10, .min_open = 1, .help = "peak learning rate"},
      {"--min-lr", EXAMPLE_OPT_DOUBLE, &o->min_lr, 0, 10, .help = "learning rate at the last step"},
      {"--warmup", EXAMPLE_OPT_INT, &o->warmup, 1, 100000000, .help = "warm-up steps"},
      {"--weight-decay", EXAMPLE_OPT_DOUBLE, &o->weight_decay, 0, 100,
       .help = "AdamW weight decay (matrices and embeddings)"},
      {"--micro-batches", EXAMPLE_OPT_INT, &o->micro, 1, 65536,
       .help = "micro-batches per rank and step (gradient accumulation)"},
      {"--zero", EXAMPLE_OPT_FLAG, &o->zero, .help = "shard the optimizer state over the ranks (ZeRO-1)"},
      {"--no-heal", EXAMPLE_OPT_FLAG, &o->no_heal, .help = "no self-healing: a lost rank ends the job"},
      {"--data", EXAMPLE_OPT_STRING, &o->data, .arg = "PATH", .help = "a text file, or a folder of them"},
      {"--threads", EXAMPLE_OPT_INT, &o->threads, 0, 4096, .help = "compute threads per rank (0: all CPUs)"},
      {"--seed", EXAMPLE_OPT_U64, &o->seed, .help = "seed of the weights and the windows"},
      {"--save", EXAMPLE_OPT_STRING, &o->save, .arg = "FILE",
       .help = "rank 0 writes the trained parameters as a checkpoint (.sgg)"},
      {"--json", EXAMPLE_OPT_FLAG, &o->json, .help = "rank 0 prints one JSON object on stdout at the end"},
  };
  return example_parse_opts(
      "gpt2_dist",
      "Data-parallel training of a byte-level GPT-2 on the licence texts of base-files, "
      "one process per rank\n(sgrt launch -n N -- gpt2_dist).\n",
      argc, argv, opts, (int)(sizeof opts / sizeof opts[0]));
}

int main(int argc, char **argv) {
  options o;
  int rc = parse(argc, argv, &o);
  if (rc) return rc == EXAMPLE_OPTS_HELP ? 0 : rc;
  gpt2_config c;
  char err[160];
  if (gpt2_configure(o.preset, o.layers, o.heads, o.width, o.context, o.seq, &c, err, sizeof err) != 0) {
    fprintf(stderr, "gpt2_dist: %s\n", err);
    return 2;
  }
  if (o.no_heal && o.micro > 1) { /* micro-batches come through the feed callback, and with it the healing */
    fprintf(stderr,
            "gpt2_dist: --micro-batches %d needs the feed callback, which heals: not with --no-heal\n",
            o.micro);
    return 2;
  }
  const char *ws = getenv("SG_WORLD_SIZE") ? getenv("SG_WORLD_SIZE") : getenv("WORLD_SIZE");
  int world = ws ? atoi(ws) : 1, shards = world * o.micro;
  if (world < 1 || o.batch % shards != 0) {
    fprintf(stderr, "gpt2_dist: --batch %d is not a multiple of %d ranks x %d micro-batches\n", o.batch,
            world, o.micro);
    return 2;
  }
  c.batch = o.batch / shards;
  if (gpt2_check(&c, err, sizeof err) != 0) {
    fprintf(stderr, "gpt2_dist: %s\n", err);
    return 2;
  }
  size_t n_text;
  unsigned char *text = gpt2_load_text("gpt2_dist", o.data, &n_text);
  if (text == NULL) return 1;
  if (n_text < (size_t)c.seq + 2) {
    fprintf(stderr, "gpt2_dist: --data '%s' has %zu bytes: too few for windows of %lld\n", o.data, n_text,
            (long long)c.seq + 1);
    return 1;
  }
  gpt2_train_options go = GPT2_TRAIN_OPTIONS_INIT;
  go.weight_decay = o.weight_decay;
  sg_graph *g;
  sg_status st = gpt2_build_training(&c, &go, &g);
  if (st != SG_OK) return fail("building the graph", st);
  feeder f = {&o,
              text,
              n_text - n_text / 10,
              c.batch,
              c.seq,
              malloc((size_t)(c.batch * c.seq) * sizeof(int64_t)),
              malloc((size_t)(c.batch * c.seq) * sizeof(int64_t))};
  if (f.tok == NULL || f.tgt == NULL) return fail("allocating the batch", SG_ERR_NO_MEMORY);
  sg_dist_params dp = SG_DIST_PARAMS_INIT; /* rank, world size, master: from the launcher's environment */
  dp.threads = o.threads;
  dp.seed = o.seed;
  dp.micro_batches = o.micro;
  dp.zero = o.zero;
  dp.feed = o.no_heal ? NULL : feed;
  dp.feed_ctx = &f;
  sg_dist *d;
  if ((st = sg_dist_create(g, &dp, &d)) != SG_OK) return fail("creating the job", st);
  sg_dist_stats stats = SG_DIST_STATS_INIT;
  sg_dist_get_stats(d, &stats);
  /* A rank restarted into a running job (SG_REJOIN) received the state: it must not initialise. */
  if (stats.steps == 0 && (st = gpt2_init_session(g, sg_dist_session(d), c.layers, o.seed)) != SG_OK)
    return fail("initialising the weights", st);
  int rank = sg_dist_rank(d);
  if (rank == 0)
    fprintf(stderr,
            "gpt2_dist: %d ranks, %lld parameters, %d windows of %lld tokens per step (%lld per shard)\n",
            world, (long long)gpt2_count_parameters(g), o.batch, (long long)c.seq, (long long)c.batch);
  double ms_sum = 0;
  int timed = 0;
  for (int step = (int)stats.steps; step < o.steps; step++) {
    if (dp.feed == NULL && (st = feed(&f, d, (uint64_t)step, rank, world)) != SG_OK)
      return fail("feeding", st);
    if ((st = sg_dist_step(d)) != SG_OK) {
      fail("training", st);
      sg_dist_get_stats(d, &stats);
      int excluded = stats.excluded;
      sg_dist_destroy(d);
      return excluded ? SG_DIST_EXIT_EXCLUDED : 1;
    }
    sg_dist_get_stats(d, &stats);
    if (step > 0) ms_sum += stats.step_ms, timed++;
    if (rank == 0)
      fprintf(stderr, "step %d/%d  loss %.4f  %.0f tokens/s  healthy %d/%d%s\n", step + 1, o.steps,
              stats.loss_mean, (double)o.batch * (double)c.seq / (stats.step_ms / 1e3), stats.healthy_ranks,
              world, stats.recoveries ? "  (recovered)" : "");
  }
  uint64_t hash;
  if ((st = sg_dist_params_hash(d, &hash)) != SG_OK) return fail("hashing the parameters", st);
  if (rank == 0 && o.save != NULL && (st = sg_session_save_checkpoint(sg_dist_session(d), o.save)) != SG_OK)
    return fail("saving the checkpoint", st);
  if (rank == 0 && o.json) {
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, hash);
    double ms = timed ? ms_sum / timed : stats.step_ms;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "example", "gpt2_dist");
    cJSON_AddStringToObject(j, "preset", o.preset);
    cJSON_AddNumberToObject(j, "world_size", sg_dist_size(d));
    cJSON_AddNumberToObject(j, "original_world_size", world);
    cJSON_AddNumberToObject(j, "steps", o.steps);
    cJSON_AddNumberToObject(j, "batch", o.batch);
    cJSON_AddNumberToObject(j, "seq", (double)c.seq);
    cJSON_AddNumberToObject(j, "micro_batches", o.micro);
    cJSON_AddBoolToObject(j, "zero", o.zero);
    cJSON_AddNumberToObject(j, "final_loss", stats.loss_mean);
    cJSON_AddNumberToObject(j, "ms_per_step", ms);
    cJSON_AddNumberToObject(j, "tokens_per_second",
                            ms > 0 ? (double)o.batch * (double)c.seq / (ms / 1e3) : 0);
    cJSON_AddNumberToObject(j, "recoveries", stats.recoveries);
    cJSON_AddNumberToObject(j, "detection_ms", stats.detection_ms);
    cJSON_AddNumberToObject(j, "rto_ms", stats.rto_ms);
    cJSON_AddStringToObject(j, "params_hash", hex);
    char *s = cJSON_PrintUnformatted(j);
    if (s) printf("%s\n", s);
    free(s);
    cJSON_Delete(j);
  }
  free(f.tok);
  free(f.tgt);
  free(text);
  st = sg_dist_destroy(d);
  sg_graph_destroy(g);
  return st == SG_OK ? 0 : fail("leaving the job", st);
}
