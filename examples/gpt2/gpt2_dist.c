/* gpt2_dist: training of the byte-level GPT-2 of gpt2_train over several
 * processes, one per rank (sgrt launch, torchrun-style variables, srun,
 * mpirun): data parallelism by default, or a pipeline (--pipeline K), tensor
 * groups (--tensor T) or both, with D = ranks / (K x T) copies of the model.
 *
 *   sgrt launch -n 4 -- build/examples/gpt2_dist --preset tiny --steps 20 --json | tail -n 1
 *   sgrt launch -n 4 -- build/examples/gpt2_dist --tensor 2 --json | tail -n 1      (2 copies x 2 shares)
 *
 * Every step's global batch is --batch windows of the text (gpt2_window: the
 * same windows whatever the world size and mode), so every mode trains what one
 * process trains on the whole batch.
 *
 * Data parallelism (sg_dist_create): the batch is cut into one shard per rank
 * and micro-batch; the feed callback sets a shard's tokens, targets and
 * learning rate, so gradients are accumulated over --micro-batches and the job
 * heals around a lost rank (strict QoS: the same global batch, no step lost)
 * unless --no-heal. --zero shards the AdamW state (ZeRO-1).
 *
 * Pipeline and tensor parallelism (sg_dist_create_model, docs/dist.md): the
 * forward graph of gpt2_build_forward, every parameter's initial value in it
 * (the tensor split slices them), is cut into K stages or split T ways (both:
 * K stages of T shares each); copy d of the model takes windows d x B/D .. of
 * each step, set by the program (sg_dist_set_input). The tensor plan splits
 * each block Megatron-style (docs/tensor_parallel.md): c_attn by columns in 3
 * blocks (q, k, v by heads), the heads apart, attn.c_proj by rows; c_fc by
 * columns, c_proj by rows; the embeddings, layer norms and tied output layer
 * stay replicated. A pipeline of K >= 3 stages, a tensor group of T >= 3
 * shares or a pipeline of tensor groups heals a lost rank
 * (sg_dist_params.heal: each part's state is copied to the next rank of its
 * group after every step; a lost stage is merged into a neighbour, a group
 * split again over fewer ways; with several copies the others release the
 * rank at the same place, which exits 75); a group of 2 or a pipeline of 2
 * does not (the library needs a strict majority left), nor any with
 * --no-heal. Refused before joining (exit status 2): --zero (data
 * parallelism's). GPT-2's output layer is its token embedding (weight
 * tying): a pipeline holds a copy of it on its first and its last stage and
 * sums the two stages' gradients of it before each update
 * (docs/pipeline_parallel.md "Tied weights"); --untied trains the model with
 * an lm_head.weight of its own instead (as GPT-2 configurations with
 * tie_word_embeddings off have). In a pipeline of tensor groups every share
 * of those stages holds the tied embedding whole.
 *
 * Rank 0 prints progress on stderr and, with --json, one JSON object on
 * stdout (the last line: world size, pipeline, tensor, data copies,
 * recoveries, detection and RTO); --save FILE writes the whole model as one
 * process's checkpoint (.sgg, sg_dist_save_checkpoint: every rank takes part)
 * at the end, in every mode, for comparisons. */
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
  const char *preset, *attention, *data, *save, *matmul;
  int layers, heads, width, context, seq, batch, steps, warmup, micro, zero, no_heal, threads, json;
  int pipeline, tensor, untied; /* > 1: sg_dist_create_model's modes */
  double lr, min_lr, weight_decay, dropout;
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
                 .pipeline = 1,
                 .tensor = 1,
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
       .help =
           "windows per step in all, shared out over the copies of the model (data parallelism: the ranks "
           "and micro-batches)"},
      {"--steps", EXAMPLE_OPT_INT, &o->steps, 1, 100000000, .help = "training steps"},
      {"--lr", EXAMPLE_OPT_DOUBLE, &o->lr, 0, 10, .min_open = 1, .help = "peak learning rate"},
      {"--min-lr", EXAMPLE_OPT_DOUBLE, &o->min_lr, 0, 10, .help = "learning rate at the last step"},
      {"--warmup", EXAMPLE_OPT_INT, &o->warmup, 1, 100000000, .help = "warm-up steps"},
      {"--weight-decay", EXAMPLE_OPT_DOUBLE, &o->weight_decay, 0, 100,
       .help = "AdamW weight decay (matrices and embeddings)"},
      {"--dropout", EXAMPLE_OPT_DOUBLE, &o->dropout, 0, 0.99,
       .help = "dropout (attention and residuals), as gpt2_train's: each micro-batch draws its own masks, a "
               "tensor group's shares their own on split heads"},
      {"--micro-batches", EXAMPLE_OPT_INT, &o->micro, 1, 65536,
       .help = "micro-batches per rank and step (gradient accumulation; a pipeline's micro-batches)"},
      {"--pipeline", EXAMPLE_OPT_INT, &o->pipeline, 1, 1024,
       .help = "pipeline stages (the tied embedding is held by the first and the last stage, its gradients "
               "summed)"},
      {"--tensor", EXAMPLE_OPT_INT, &o->tensor, 1, 1024,
       .help =
           "tensor-parallel shares (of each stage); the copies of the model are ranks / (pipeline x tensor)"},
      {"--attention", EXAMPLE_OPT_STRING, &o->attention, .arg = "fused|unfused",
       .help = "attention as the fused op (scores recomputed in backward, not kept: the default) or as "
               "matmuls, a causal mask and softmax"},
      {"--untied", EXAMPLE_OPT_FLAG, &o->untied,
       .help = "the logits through lm_head.weight of their own instead of the token embedding"},
      {"--zero", EXAMPLE_OPT_FLAG, &o->zero,
       .help = "shard the optimizer state over the ranks (ZeRO-1; data parallelism only)"},
      {"--no-heal", EXAMPLE_OPT_FLAG, &o->no_heal,
       .help = "no self-healing: a lost rank ends the job (a pipeline or tensor group heals with 3 or more "
               "stages or shares, or both > 1)"},
      {"--data", EXAMPLE_OPT_STRING, &o->data, .arg = "PATH", .help = "a text file, or a folder of them"},
      {"--threads", EXAMPLE_OPT_INT, &o->threads, 0, 4096, .help = "compute threads per rank (0: all CPUs)"},
      {"--matmul-precision", EXAMPLE_OPT_STRING, &o->matmul, .arg = "f32|bf16",
       .help =
           "products in f32, or of bf16-rounded operands summed in f32 (docs/precision.md; sets this "
           "rank's SG_MATMUL_PRECISION, which every rank must share; default: the environment's, else f32)"},
      {"--seed", EXAMPLE_OPT_U64, &o->seed, .help = "seed of the weights and the windows"},
      {"--save", EXAMPLE_OPT_STRING, &o->save, .arg = "FILE",
       .help = "writes the whole trained model as one process's checkpoint (.sgg; rank 0 writes it)"},
      {"--json", EXAMPLE_OPT_FLAG, &o->json, .help = "rank 0 prints one JSON object on stdout at the end"},
  };
  return example_parse_opts(
      "gpt2_dist",
      "Trains a byte-level GPT-2 on the licence texts of base-files, one process per rank (sgrt launch -n N\n"
      "-- gpt2_dist): data parallel by default, or a pipeline (--pipeline), tensor groups (--tensor) or "
      "both,\n"
      "ranks / (pipeline x tensor) copies of the model, healing around lost ranks.\n",
      argc, argv, opts, (int)(sizeof opts / sizeof opts[0]));
}

/* The mode's refusals, before anything is built (exit status 2): what sg_dist_create and
 * sg_dist_create_model would refuse, said in the example's terms. */
static int check_mode(const options *o, int world, int *copies) {
  int parts = o->pipeline > 1 || o->tensor > 1;
  if (world < 1 || world % (o->pipeline * o->tensor) != 0) {
    fprintf(stderr,
            "gpt2_dist: --pipeline %d x --tensor %d = %d ranks per copy of the model does not divide the "
            "%d ranks\n",
            o->pipeline, o->tensor, o->pipeline * o->tensor, world);
    return 2;
  }
  *copies = world / (o->pipeline * o->tensor);
  if (!parts) {
    /* Micro-batches come through the feed callback, and with it the healing. */
    if (o->no_heal && o->micro > 1) {
      fprintf(stderr,
              "gpt2_dist: --micro-batches %d needs the feed callback, which heals: not with --no-heal\n",
              o->micro);
      return 2;
    }
    if (o->batch % (world * o->micro) != 0) {
      fprintf(stderr, "gpt2_dist: --batch %d is not a multiple of %d ranks x %d micro-batches\n", o->batch,
              world, o->micro);
      return 2;
    }
    return 0;
  }
  if (o->zero) {
    fprintf(stderr, "gpt2_dist: --zero shards data parallelism's optimizer state: not with --pipeline or "
                    "--tensor\n");
    return 2;
  }
  if (o->batch % *copies != 0) {
    fprintf(stderr, "gpt2_dist: --batch %d is not a multiple of %d copies of the model\n", o->batch, *copies);
    return 2;
  }
  return 0;
}

/* Model modes: copy `copy` of `copies` takes windows copy * per .. of step `step`'s global batch. */
static sg_status set_inputs(feeder *f, sg_dist *d, int step, int copy) {
  for (int64_t b = 0; b < f->per; b++)
    gpt2_window(f->text, f->n_train, f->seq, f->o->seed, (uint64_t)step, (uint64_t)(copy * f->per + b),
                f->tok + b * f->seq, f->tgt + b * f->seq);
  int64_t td[] = {f->per, f->seq};
  float lr = (float)gpt2_lr_at(f->o->lr, f->o->min_lr, f->o->warmup, f->o->steps, step);
  sg_status st = sg_dist_set_input(d, "tokens", SG_I64, 2, td, f->tok);
  if (st == SG_OK) st = sg_dist_set_input(d, "targets", SG_I64, 2, td, f->tgt);
  if (st == SG_OK) st = sg_dist_set_input(d, "lr", SG_F32, 0, NULL, &lr);
  return st;
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
  c.untied = o.untied;
  c.fused_attention = 1; /* the default */
  c.dropout = o.dropout;
  if (o.attention && gpt2_parse_attention(o.attention, &c.fused_attention, err, sizeof err) != 0) {
    fprintf(stderr, "gpt2_dist: %s\n", err);
    return 2;
  }
  if (o.matmul) {
    if (strcmp(o.matmul, "f32") != 0 && strcmp(o.matmul, "bf16") != 0) {
      fprintf(stderr, "gpt2_dist: --matmul-precision '%s' is not f32 or bf16\n", o.matmul);
      return 2;
    }
    /* The job makes its sessions itself: they read the precision from the environment. */
    setenv("SG_MATMUL_PRECISION", o.matmul, 1);
  }
  const char *ws = getenv("SG_WORLD_SIZE") ? getenv("SG_WORLD_SIZE") : getenv("WORLD_SIZE");
  int world = ws ? atoi(ws) : 1, copies = 1;
  if ((rc = check_mode(&o, world, &copies)) != 0) return rc;
  int parts = o.pipeline > 1 || o.tensor > 1; /* sg_dist_create_model's pipeline or tensor mode */
  /* The graph's batch: a rank's shard (data parallelism), or a copy's part of the step. */
  c.batch = parts ? o.batch / copies : o.batch / (world * o.micro);
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
  sg_tensor loss = SG_NO_TENSOR;
  sg_status st = parts ? gpt2_build_forward(&c, o.seed, &g, &loss) : gpt2_build_training(&c, &go, &g);
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
  dp.feed = o.no_heal || parts ? NULL : feed; /* the model modes take their inputs every step instead */
  dp.feed_ctx = &f;
  dp.pipeline = o.pipeline;
  dp.tensor = o.tensor;
  /* The model modes heal when a loss leaves a strict majority of the ranks and a layout to go on with
   * (sg_dist_params.heal): 3 stages or shares, a pipeline of tensor groups, or 2 copies or more. */
  dp.heal = parts && !o.no_heal &&
            (o.pipeline >= 3 || o.tensor >= 3 || (o.pipeline > 1 && o.tensor > 1) || copies > 1);
  sg_adamw_params adamw;
  gpt2_adamw_params(&go, &adamw);
  sg_dist_optimizer opt = SG_DIST_OPTIMIZER_INIT; /* the learning rate from the input "lr" */
  opt.kind = SG_DIST_OPT_ADAMW;
  opt.adamw = &adamw;
  sg_dist *d;
  st = parts ? sg_dist_create_model(g, loss, &opt, &dp, &d) : sg_dist_create(g, &dp, &d);
  if (st != SG_OK) return fail("creating the job", st);
  sg_dist_stats stats = SG_DIST_STATS_INIT;
  sg_dist_get_stats(d, &stats);
  /* A rank restarted into a running job (SG_REJOIN) received the state: it must not initialise. The model
   * modes' parts start from the forward graph's initializers. */
  if (!parts && stats.steps == 0 &&
      (st = gpt2_init_session(g, sg_dist_session(d), c.layers, o.seed)) != SG_OK)
    return fail("initialising the weights", st);
  int rank = sg_dist_rank(d);
  if (rank == 0)
    fprintf(
        stderr,
        "gpt2_dist: %d ranks (data %d x pipeline %d x tensor %d), %lld parameters, %d windows of %lld tokens "
        "per step (%lld per %s%s); a lost rank %s\n",
        world, copies, o.pipeline, o.tensor, (long long)gpt2_count_parameters(g), o.batch, (long long)c.seq,
        (long long)c.batch, parts ? "copy" : "shard", o.micro > 1 ? ", in micro-batches" : "",
        dp.heal || dp.feed ? "heals" : "ends the job");
  double ms_sum = 0;
  int timed = 0;
  for (int step = (int)stats.steps; step < o.steps; step++) {
    if (parts) st = set_inputs(&f, d, step, sg_dist_rank(d) / (sg_dist_size(d) / copies));
    else if (dp.feed == NULL) st = feed(&f, d, (uint64_t)step, rank, world);
    if (st != SG_OK) return fail("feeding", st);
    if ((st = sg_dist_step(d)) != SG_OK) {
      fail("training", st);
      sg_dist_get_stats(d, &stats);
      int excluded = stats.excluded;
      sg_dist_destroy(d);
      return excluded ? SG_DIST_EXIT_EXCLUDED : 1;
    }
    rank = sg_dist_rank(d); /* a recovery renumbers the ranks */
    sg_dist_get_stats(d, &stats);
    if (step > 0) ms_sum += stats.step_ms, timed++;
    if (rank == 0)
      fprintf(stderr, "step %d/%d  loss %.4f  %.0f tokens/s  healthy %d/%d%s\n", step + 1, o.steps,
              stats.loss_mean, (double)o.batch * (double)c.seq / (stats.step_ms / 1e3), stats.healthy_ranks,
              world, stats.recoveries ? "  (recovered)" : "");
  }
  uint64_t hash;
  if ((st = sg_dist_params_hash(d, &hash)) != SG_OK) return fail("hashing the parameters", st);
  if (o.save != NULL && (st = sg_dist_save_checkpoint(d, o.save)) != SG_OK)
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
    cJSON_AddNumberToObject(j, "pipeline", o.pipeline);
    cJSON_AddNumberToObject(j, "tensor", o.tensor);
    cJSON_AddNumberToObject(j, "data_copies", copies);
    cJSON_AddNumberToObject(j, "steps", o.steps);
    cJSON_AddNumberToObject(j, "batch", o.batch);
    cJSON_AddNumberToObject(j, "seq", (double)c.seq);
    cJSON_AddNumberToObject(j, "micro_batches", o.micro);
    cJSON_AddNumberToObject(j, "dropout", o.dropout);
    cJSON_AddBoolToObject(j, "zero", o.zero);
    const char *mp = getenv("SG_MATMUL_PRECISION");
    cJSON_AddStringToObject(j, "matmul_precision", mp && *mp ? mp : "f32");
    cJSON_AddBoolToObject(j, "untied", o.untied);
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
