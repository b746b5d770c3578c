/* gpt2_train: trains a byte-level GPT-2 (examples/gpt2/gpt2_model.h) on a
 * text every Debian machine has, the licence texts of base-files
 * (/usr/share/common-licenses), with sgrt's single-process session, then
 * samples text from it.
 *
 *   gpt2_train [--preset tiny|mini|small] [--layers N] [--heads N] [--width N]
 *              [--context N] [--batch N] [--seq N] [--steps N] [--lr X]
 *              [--min-lr X] [--warmup N] [--weight-decay X] [--dropout X]
 *              [--data PATH] [--sample N] [--prompt TEXT] [--temperature X]
 *              [--threads N] [--matmul-precision f32|bf16] [--seed N]
 *              [--log-every N] [--json]
 *
 * The data: every regular file of --data (a folder, in name order, or one
 * file) as bytes, the last tenth held out. A step takes `batch` windows of
 * seq + 1 bytes at random offsets of the training part: the first seq are
 * the tokens, the last seq the targets. AdamW (betas 0.9, 0.95; weight decay
 * on matrices and embeddings only), the learning rate warmed up linearly for
 * --warmup steps, then decayed to --min-lr along a cosine: fed every step as
 * the graph's "lr" input. Progress on stderr every --log-every steps (loss,
 * learning rate, tokens/s); at the end the held-out loss and --sample bytes
 * generated after --prompt (temperature sampling, seeded). With --json,
 * stdout holds one JSON object; else the sample. */
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
#include "gpt2_data.h"
#include "gpt2_model.h"

typedef struct options {
  const char *preset, *attention, *data, *prompt, *matmul;
  int layers, heads, width, context, batch, seq, steps, warmup, sample, threads, log_every, json;
  double lr, min_lr, weight_decay, dropout, temperature;
  uint64_t seed;
} options;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng_state;
static uint64_t next_u64(void) {
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static double uniform01(void) { return (double)(next_u64() >> 11) / 9007199254740992.0; }

static int fail(const char *what, sg_status st) {
  fprintf(stderr, "gpt2_train: %s failed: %s (%s)\n", what, sg_last_error(), sg_status_str(st));
  return 1;
}

/* Step `step`'s batch of the text: windows 0..batch-1 (gpt2_window). */
static void fill_batch(const unsigned char *text, size_t n, const gpt2_config *c, uint64_t seed,
                       uint64_t step, int64_t *tok, int64_t *tgt) {
  for (int64_t b = 0; b < c->batch; b++)
    gpt2_window(text, n, c->seq, seed, step, (uint64_t)b, tok + b * c->seq, tgt + b * c->seq);
}

static int parse(int argc, char **argv, options *o) {
  *o = (options){.preset = "mini",
                 .data = "/usr/share/common-licenses",
                 .prompt = "The ",
                 .steps = 300,
                 .warmup = 30,
                 .sample = 300,
                 .threads = 2,
                 .log_every = 10,
                 .lr = 1e-3,
                 .min_lr = 1e-4,
                 .weight_decay = 0.1,
                 .temperature = 0.8,
                 .seed = 1};
  const example_opt opts[] = {
      {"--preset", EXAMPLE_OPT_STRING, &o->preset, .arg = "tiny|mini|small",
       .help = "the model's sizes: tiny (2 layers, width 64, context 64), mini (6 layers, width 384, context "
               "256) or small (GPT-2 small, 124 M parameters)"},
      {"--layers", EXAMPLE_OPT_INT, &o->layers, 0, 1024, .help = "blocks (0: the preset's)"},
      {"--heads", EXAMPLE_OPT_INT, &o->heads, 0, 1024, .help = "attention heads (0: the preset's)"},
      {"--width", EXAMPLE_OPT_INT, &o->width, 0, 65536, .help = "embedding width (0: the preset's)"},
      {"--context", EXAMPLE_OPT_INT, &o->context, 0, 65536, .help = "positions (0: the preset's)"},
      {"--batch", EXAMPLE_OPT_INT, &o->batch, 0, 65536, .help = "sequences per step (0: the preset's, 4)"},
      {"--seq", EXAMPLE_OPT_INT, &o->seq, 0, 65536, .help = "tokens per sequence (0: the context)"},
      {"--steps", EXAMPLE_OPT_INT, &o->steps, 0, 100000000, .help = "training steps"},
      {"--lr", EXAMPLE_OPT_DOUBLE, &o->lr, 0, 10, .min_open = 1, .help = "peak learning rate"},
      {"--min-lr", EXAMPLE_OPT_DOUBLE, &o->min_lr, 0, 10, .help = "learning rate at the last step"},
      {"--warmup", EXAMPLE_OPT_INT, &o->warmup, 1, 100000000, .help = "warm-up steps"},
      {"--weight-decay", EXAMPLE_OPT_DOUBLE, &o->weight_decay, 0, 100,
       .help = "AdamW weight decay (matrices and embeddings)"},
      {"--attention", EXAMPLE_OPT_STRING, &o->attention, .arg = "fused|unfused",
       .help = "attention as the fused op (the default: scores and dropout masks recomputed in backward, "
               "not kept) or as matmuls, a causal mask, softmax and dropout"},
      {"--dropout", EXAMPLE_OPT_DOUBLE, &o->dropout, 0, 0.99, .help = "dropout (attention and residuals)"},
      {"--data", EXAMPLE_OPT_STRING, &o->data, .arg = "PATH", .help = "a text file, or a folder of them"},
      {"--sample", EXAMPLE_OPT_INT, &o->sample, 0, 1000000, .help = "bytes to generate at the end"},
      {"--prompt", EXAMPLE_OPT_STRING, &o->prompt, .arg = "TEXT", .help = "what the sample starts from"},
      {"--temperature", EXAMPLE_OPT_DOUBLE, &o->temperature, 0, 100, .min_open = 1,
       .help = "sampling temperature"},
      {"--threads", EXAMPLE_OPT_INT, &o->threads, 1, 4096, .help = "compute threads"},
      {"--matmul-precision", EXAMPLE_OPT_STRING, &o->matmul, .arg = "f32|bf16",
       .help = "products in f32, or of bf16-rounded operands summed in f32 (docs/precision.md; default: the "
               "environment's SG_MATMUL_PRECISION, else f32)"},
      {"--seed", EXAMPLE_OPT_U64, &o->seed, .help = "seed of the weights, the batches and the sample"},
      {"--log-every", EXAMPLE_OPT_INT, &o->log_every, 1, 100000000, .help = "steps between progress lines"},
      {"--json", EXAMPLE_OPT_FLAG, &o->json,
       .help = "print one JSON object on stdout at the end (progress stays on stderr)"},
  };
  int rc = example_parse_opts("gpt2_train",
                              "Trains a byte-level GPT-2 on the licence texts of base-files and samples text "
                              "from it.\n",
                              argc, argv, opts, (int)(sizeof opts / sizeof opts[0]));
  if (rc != 0) return rc;
  if (o->prompt[0] == '\0') {
    fprintf(stderr, "gpt2_train: --prompt must not be empty\n");
    return 2;
  }
  if (o->matmul && strcmp(o->matmul, "f32") != 0 && strcmp(o->matmul, "bf16") != 0) {
    fprintf(stderr, "gpt2_train: --matmul-precision '%s' is not f32 or bf16\n", o->matmul);
    return 2;
  }
  return 0;
}

/* sg_session_params.matmul_precision of --matmul-precision (unset: the session's default). */
static int matmul_precision(const options *o) {
  if (o->matmul == NULL) return SG_MATMUL_DEFAULT;
  return strcmp(o->matmul, "bf16") == 0 ? SG_MATMUL_BF16 : SG_MATMUL_F32;
}

/* The precision the sessions run at, for the report. */
static const char *matmul_precision_name(const options *o) {
  if (o->matmul) return o->matmul;
  const char *env = getenv("SG_MATMUL_PRECISION");
  return env && *env ? env : "f32";
}

/* The configuration: the preset, with the options that are set over it. */
static int configure(const options *o, gpt2_config *c) {
  char err[160];
  if (gpt2_configure(o->preset, o->layers, o->heads, o->width, o->context, o->seq, c, err, sizeof err) != 0) {
    fprintf(stderr, "gpt2_train: %s\n", err);
    return 2;
  }
  if (o->batch) c->batch = o->batch;
  c->dropout = o->dropout;
  c->seed = o->seed;
  c->fused_attention = 1; /* the default */
  if (o->attention && gpt2_parse_attention(o->attention, &c->fused_attention, err, sizeof err) != 0) {
    fprintf(stderr, "gpt2_train: %s\n", err);
    return 2;
  }
  if (gpt2_check(c, err, sizeof err) != 0) {
    fprintf(stderr, "gpt2_train: %s\n", err);
    return 2;
  }
  if (c->vocab < 256) {
    fprintf(stderr, "gpt2_train: a byte-level model needs a vocabulary of 256 or more\n");
    return 2;
  }
  return 0;
}

/* Copies every parameter of the training session into the sampling one (same names and shapes). */
static sg_status copy_params(const sg_graph *g, const sg_session *from, sg_session *to) {
  sg_status st = SG_OK;
  for (int32_t i = 0; st == SG_OK && i < sg_graph_num_tensors(g); i++) {
    sg_tensor_info info;
    if (sg_graph_tensor_info(g, (sg_tensor){i}, &info) != SG_OK || info.role != SG_ROLE_PARAMETER) continue;
    void *buf = malloc(info.nbytes);
    if (buf == NULL) return SG_ERR_NO_MEMORY;
    st = sg_session_read(from, info.name, buf, info.nbytes);
    if (st == SG_OK) st = sg_session_write(to, info.name, buf, info.nbytes);
    free(buf);
  }
  return st;
}

/* Generates o->sample bytes after the prompt with a batch-1 forward graph of the same model: the window
 * is the last seq bytes (right-padded while shorter: the causal mask keeps the padding out of the
 * positions that are read). Returns the text (prompt included), or NULL. */
static char *sample_text(const options *o, const gpt2_config *train_cfg, const sg_graph *tg,
                         const sg_session *ts, sg_status *st) {
  gpt2_config c = *train_cfg;
  c.batch = 1, c.dropout = 0;
  gpt2_train_options go = GPT2_TRAIN_OPTIONS_INIT;
  go.training = 0;
  sg_graph *g = NULL;
  sg_session *s = NULL;
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sp.threads = o->threads;
  sp.matmul_precision = matmul_precision(o);
  size_t plen = strlen(o->prompt), n = plen + (size_t)o->sample;
  char *text = malloc(n + 1);
  int64_t *win = calloc((size_t)c.seq, sizeof *win);
  float *logits = malloc((size_t)(c.seq * c.vocab) * sizeof *logits);
  double *p = malloc((size_t)c.vocab * sizeof *p);
  if (!text || !win || !logits || !p) *st = SG_ERR_NO_MEMORY;
  else if ((*st = gpt2_build_training(&c, &go, &g)) == SG_OK &&
           (*st = sg_session_create(g, &sp, &s)) == SG_OK && (*st = sg_session_compile(s)) == SG_OK)
    *st = copy_params(tg, ts, s);
  if (*st == SG_OK) memcpy(text, o->prompt, plen);
  int64_t td[] = {1, c.seq};
  for (size_t len = plen; *st == SG_OK && len < n; len++) {
    size_t from = len > (size_t)c.seq ? len - (size_t)c.seq : 0, w = len - from;
    for (size_t i = 0; i < (size_t)c.seq; i++) win[i] = i < w ? (unsigned char)text[from + i] : 0;
    if ((*st = sg_session_set_input(s, "tokens", SG_I64, 2, td, win)) != SG_OK ||
        (*st = sg_session_forward(s)) != SG_OK ||
        (*st = sg_session_read(s, "logits", logits, (size_t)(c.seq * c.vocab) * sizeof *logits)) != SG_OK)
      break;
    const float *row = logits + (w - 1) * (size_t)c.vocab;
    double mx = -INFINITY, sum = 0;
    for (int64_t v = 0; v < 256; v++) mx = fmax(mx, row[v] / o->temperature);
    for (int64_t v = 0; v < 256; v++) sum += p[v] = exp(row[v] / o->temperature - mx);
    double u = uniform01() * sum;
    int64_t pick = 255;
    for (int64_t v = 0; v < 256; v++)
      if ((u -= p[v]) <= 0) {
        pick = v;
        break;
      }
    text[len] = (char)pick;
  }
  sg_session_destroy(s);
  sg_graph_destroy(g);
  free(win);
  free(logits);
  free(p);
  if (*st != SG_OK) {
    free(text);
    return NULL;
  }
  text[n] = '\0';
  return text;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  options o;
  int rc = parse(argc, argv, &o);
  if (rc) return rc == EXAMPLE_OPTS_HELP ? 0 : rc;
  gpt2_config c;
  if ((rc = configure(&o, &c)) != 0) return rc;
  rng_state = o.seed ^ 0x5851F42D4C957F2Dull;
  size_t n_text;
  unsigned char *text = gpt2_load_text("gpt2_train", o.data, &n_text);
  if (text == NULL) return 1;
  size_t n_train = n_text - n_text / 10, n_val = n_text - n_train;
  if (n_val < (size_t)c.seq + 2) {
    fprintf(stderr,
            "gpt2_train: --data '%s' has %zu bytes: too few for windows of %lld (a tenth is held out)\n",
            o.data, n_text, (long long)c.seq + 1);
    return 1;
  }
  fprintf(stderr, "data: %zu bytes from %s (%zu for training, %zu held out)\n", n_text, o.data, n_train,
          n_val);

  gpt2_train_options go = GPT2_TRAIN_OPTIONS_INIT;
  go.weight_decay = o.weight_decay;
  sg_graph *g = NULL;
  sg_session *s = NULL;
  sg_status st = gpt2_build_training(&c, &go, &g);
  if (st != SG_OK) return fail("building the graph", st);
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sp.threads = o.threads;
  sp.seed = o.seed;
  sp.matmul_precision = matmul_precision(&o);
  double tc = now();
  if ((st = sg_session_create(g, &sp, &s)) != SG_OK || (st = sg_session_compile(s)) != SG_OK)
    return fail("compiling", st);
  if ((st = gpt2_init_session(g, s, c.layers, o.seed)) != SG_OK) return fail("initialising the weights", st);
  int64_t n_params = gpt2_count_parameters(g);
  fprintf(stderr,
          "model: %lld layers, %lld heads, width %lld, context %lld: %lld parameters; batch %lld x %lld "
          "tokens; compiled in %.1f s\n",
          (long long)c.layers, (long long)c.heads, (long long)c.width, (long long)c.context,
          (long long)n_params, (long long)c.batch, (long long)c.seq, now() - tc);

  size_t rows = (size_t)(c.batch * c.seq);
  int64_t *tok = malloc(rows * sizeof *tok), *tgt = malloc(rows * sizeof *tgt);
  double *step_s = malloc(((size_t)o.steps + 1) * sizeof *step_s);
  if (!tok || !tgt || !step_s) return fail("allocating batches", SG_ERR_NO_MEMORY);
  int64_t td[] = {c.batch, c.seq};
  double first_loss = NAN, window = 0, final_loss = NAN;
  int in_window = 0;
  for (int step = 0; step < o.steps; step++) {
    fill_batch(text, n_train, &c, o.seed, (uint64_t)step, tok, tgt);
    float lr = (float)gpt2_lr_at(o.lr, o.min_lr, o.warmup, o.steps, step), loss;
    double t0 = now();
    if ((st = sg_session_set_input(s, "tokens", SG_I64, 2, td, tok)) != SG_OK ||
        (st = sg_session_set_input(s, "targets", SG_I64, 2, td, tgt)) != SG_OK ||
        (st = sg_session_set_input(s, "lr", SG_F32, 0, NULL, &lr)) != SG_OK ||
        (st = sg_session_step(s)) != SG_OK || (st = sg_session_read(s, "loss", &loss, sizeof loss)) != SG_OK)
      return fail("training", st);
    step_s[step] = now() - t0;
    if (step == 0) first_loss = loss;
    window += loss, in_window++;
    if ((step + 1) % o.log_every == 0 || step == 0 || step + 1 == o.steps) {
      final_loss = window / in_window;
      fprintf(stderr, "step %d/%d  loss %.4f  lr %.2e  %.0f tokens/s  (%.0f ms)\n", step + 1, o.steps,
              final_loss, lr, (double)rows / step_s[step], step_s[step] * 1e3);
      window = 0, in_window = 0;
    }
  }
  /* Held-out loss: 8 batches of the last tenth, evaluation passes. */
  double val = 0;
  int n_eval = o.steps > 0 ? 8 : 0;
  for (int i = 0; i < n_eval; i++) {
    float loss;
    fill_batch(text + n_train, n_val, &c, o.seed, (uint64_t)i, tok, tgt);
    if ((st = sg_session_set_input(s, "tokens", SG_I64, 2, td, tok)) != SG_OK ||
        (st = sg_session_set_input(s, "targets", SG_I64, 2, td, tgt)) != SG_OK ||
        (st = sg_session_forward(s)) != SG_OK ||
        (st = sg_session_read(s, "loss", &loss, sizeof loss)) != SG_OK)
      return fail("evaluating", st);
    val += loss / n_eval;
  }
  if (n_eval) fprintf(stderr, "held-out loss %.4f (ln 256 = %.4f)\n", val, log(256.0));
  char *sample = NULL;
  if (o.sample > 0) {
    sample = sample_text(&o, &c, g, s, &st);
    if (sample == NULL) return fail("sampling", st);
    fprintf(stderr, "sample:\n%s\n", sample);
  }
  /* Median step time, the first step (warm-up) excluded when there are others. */
  int from = o.steps > 1 ? 1 : 0, n_med = o.steps - from;
  double med = 0;
  if (n_med > 0) {
    qsort(step_s + from, (size_t)n_med, sizeof *step_s, cmp_double);
    med = step_s[from + n_med / 2];
  }
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  if (o.json) {
    uint64_t hash = 0;
    double sum = 0, l2 = 0;
    example_param_digest(g, s, &hash, &sum, &l2);
    char hs[17];
    snprintf(hs, sizeof hs, "%016llx", (unsigned long long)hash);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "preset", o.preset);
    cJSON_AddNumberToObject(j, "layers", (double)c.layers);
    cJSON_AddNumberToObject(j, "heads", (double)c.heads);
    cJSON_AddNumberToObject(j, "width", (double)c.width);
    cJSON_AddNumberToObject(j, "context", (double)c.context);
    cJSON_AddNumberToObject(j, "batch", (double)c.batch);
    cJSON_AddNumberToObject(j, "seq", (double)c.seq);
    cJSON_AddNumberToObject(j, "parameters", (double)n_params);
    cJSON_AddNumberToObject(j, "steps", o.steps);
    cJSON_AddNumberToObject(j, "threads", o.threads);
    cJSON_AddStringToObject(j, "matmul_precision", matmul_precision_name(&o));
    cJSON_AddNumberToObject(j, "first_loss", first_loss);
    cJSON_AddNumberToObject(j, "final_loss", final_loss);
    cJSON_AddNumberToObject(j, "val_loss", n_eval ? val : NAN);
    cJSON_AddNumberToObject(j, "ms_per_step", med * 1e3);
    cJSON_AddNumberToObject(j, "tokens_per_second", med > 0 ? (double)rows / med : 0);
    cJSON_AddNumberToObject(j, "peak_rss_mb", (double)ru.ru_maxrss / 1024.0);
    cJSON_AddStringToObject(j, "params_hash", hs);
    /* Bytes are sampled, not characters: a byte outside ASCII may not be valid UTF-8, which JSON text
     * must be; the JSON copy has '?' for each. */
    for (char *q = sample; q != NULL && *q; q++)
      if ((unsigned char)*q >= 0x80) *q = '?';
    cJSON_AddStringToObject(j, "sample", sample ? sample : "");
    sg_compile_report rep = SG_COMPILE_REPORT_INIT;
    if (sg_session_compile_report(s, &rep) == SG_OK) example_compile_json(j, &rep);
    char *out = cJSON_PrintUnformatted(j);
    if (out) printf("%s\n", out);
    free(out);
    cJSON_Delete(j);
  } else if (sample != NULL) {
    printf("%s\n", sample);
  }
  free(sample);
  free(tok);
  free(tgt);
  free(step_s);
  free(text);
  sg_session_destroy(s);
  sg_graph_destroy(g);
  return 0;
}
