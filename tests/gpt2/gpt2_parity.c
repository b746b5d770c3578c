/* GPT-2 parity with PyTorch, as llm.c's test_gpt2 checks it: the model of
 * examples/gpt2 built from the configuration tests/gpt2/gpt2_ref.py wrote,
 * given that script's initial weights and batch, must give PyTorch's logits,
 * loss and every parameter's gradient in the first step, the loss of every
 * AdamW step after it, and the parameters after the last.
 *
 *   usage: gpt2_parity DIR [--threads N] [--json]
 *
 * Bars (issue 21): logits max |diff| <= 1e-5, loss relative diff <= 1e-6,
 * gradients relative L2 diff <= 1e-4 per tensor, each step's loss relative
 * diff <= 1e-4; beyond the issue, the final parameters' relative L2 diff <=
 * 1e-3 per tensor (AdamW divides each gradient by its own running scale, so
 * a bias whose gradient is small turns rounding differences into visible
 * ones over 10 steps: 1.5e-4 on the mini model; the attention's key biases are
 * left out, their gradient is 0 but for rounding, see compare_params). Exit 0
 * when all hold, 1 otherwise, 2 for bad usage or files. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2_model.h"

typedef struct ref_config {
  gpt2_config model;
  int steps;
  double lr, weight_decay, beta1, beta2, eps;
} ref_config;

static int read_config(const char *dir, ref_config *r) {
  char path[1024];
  snprintf(path, sizeof path, "%s/config.txt", dir);
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    fprintf(stderr, "gpt2_parity: cannot open %s\n", path);
    return -1;
  }
  long long v[8];
  int n = fscanf(f, "%lld %lld %lld %lld %lld %lld %lld %lld %lf %lf %lf %lf %lf", &v[0], &v[1], &v[2], &v[3],
                 &v[4], &v[5], &v[6], &v[7], &r->lr, &r->weight_decay, &r->beta1, &r->beta2, &r->eps);
  fclose(f);
  if (n != 13 || v[7] < 1 || v[7] > 1000) {
    fprintf(stderr, "gpt2_parity: %s: malformed (%d fields read)\n", path, n);
    return -1;
  }
  r->model = (gpt2_config){v[0], v[1], v[2], v[3], v[4], v[5], v[6], 0.0, 0, 0, 0};
  r->steps = (int)v[7];
  char err[160];
  if (gpt2_check(&r->model, err, sizeof err) != 0) {
    fprintf(stderr, "gpt2_parity: %s: %s\n", path, err);
    return -1;
  }
  return 0;
}

/* Reads exactly `bytes` bytes of dir/name into a new buffer; NULL (with a message) otherwise. */
static void *read_exact(const char *dir, const char *name, size_t bytes) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    fprintf(stderr, "gpt2_parity: cannot open %s\n", path);
    return NULL;
  }
  void *buf = malloc(bytes + 1);
  size_t got = buf ? fread(buf, 1, bytes + 1, f) : 0;
  fclose(f);
  if (buf == NULL || got != bytes) {
    fprintf(stderr, "gpt2_parity: %s has %zu bytes, expected %zu\n", path, got, bytes);
    free(buf);
    return NULL;
  }
  return buf;
}

/* ||a - b|| / ||b|| (0 when both are 0). */
static double rel_l2(const float *a, const float *b, int64_t n) {
  double d = 0, r = 0;
  for (int64_t i = 0; i < n; i++) {
    double e = (double)a[i] - (double)b[i];
    d += e * e;
    r += (double)b[i] * (double)b[i];
  }
  return r > 0 ? sqrt(d / r) : sqrt(d);
}

typedef struct worst {
  double value;
  char name[160];
} worst;

static void note(worst *w, double v, const char *name) {
  if (v > w->value || w->name[0] == '\0') {
    w->value = v;
    snprintf(w->name, sizeof w->name, "%s", name);
  }
}

/* Compares each parameter's tensor in the session (`suffix` "" for the parameter, ".grad" for its
 * gradient) with dir/<sub>/<name>.bin. */
static int compare_params(const sg_graph *g, const sg_session *s, const char *dir, const char *sub,
                          const char *suffix, worst *w) {
  for (int32_t i = 0; i < sg_graph_num_tensors(g); i++) {
    sg_tensor_info info;
    if (sg_graph_tensor_info(g, (sg_tensor){i}, &info) != SG_OK || info.role != SG_ROLE_PARAMETER) continue;
    char file[300], tname[300];
    snprintf(file, sizeof file, "%s/%s.bin", sub, info.name);
    snprintf(tname, sizeof tname, "%s%s", info.name, suffix);
    float *want = read_exact(dir, file, info.nbytes), *got = malloc(info.nbytes);
    if (want == NULL || got == NULL || sg_session_read(s, tname, got, info.nbytes) != SG_OK) {
      if (want != NULL) fprintf(stderr, "gpt2_parity: reading '%s': %s\n", tname, sg_last_error());
      free(want);
      free(got);
      return -1;
    }
    /* The key bias's gradient is 0 in exact arithmetic (a shift of every key by q.b_k moves a softmax row
     * by a constant), so both sides' AdamW move it by rounding noise divided by eps: its final values are
     * noise, compared by nobody. Its gradient is compared (as ~0), and q's and v's biases always. */
    int64_t n = info.numel;
    if (strstr(info.name, ".attn.c_attn.bias") != NULL && strcmp(sub, "final") == 0) {
      int64_t third = n / 3;
      double q = rel_l2(got, want, third), v = rel_l2(got + 2 * third, want + 2 * third, third);
      note(w, fmax(q, v), info.name);
    } else {
      note(w, rel_l2(got, want, n), info.name);
    }
    free(want);
    free(got);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "--help") == 0) {
    fprintf(argc < 2 ? stderr : stdout,
            "usage: gpt2_parity DIR [--threads N] [--fused-attention] [--json]\n");
    return argc < 2 ? 2 : 0;
  }
  const char *dir = argv[1];
  int threads = 2, json = 0, fused = 0;
  for (int i = 2; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) json = 1;
    else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = atoi(argv[++i]);
    else if (strcmp(argv[i], "--fused-attention") == 0) fused = 1;
    else {
      fprintf(stderr, "gpt2_parity: unknown option '%s'\n", argv[i]);
      return 2;
    }
  }
  ref_config rc;
  if (read_config(dir, &rc) != 0) return 2;
  rc.model.fused_attention = fused; /* the same model: only how attention is computed differs */
  const gpt2_config *c = &rc.model;
  gpt2_train_options o = GPT2_TRAIN_OPTIONS_INIT;
  o.weight_decay = rc.weight_decay, o.beta1 = rc.beta1, o.beta2 = rc.beta2, o.eps = rc.eps;
  o.mark_logits = 1, o.mark_grads = 1;
  sg_graph *g = NULL;
  sg_session *s = NULL;
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sp.threads = threads;
  if (gpt2_build_training(c, &o, &g) != SG_OK || sg_session_create(g, &sp, &s) != SG_OK ||
      sg_session_compile(s) != SG_OK) {
    fprintf(stderr, "gpt2_parity: %s\n", sg_last_error());
    return 2;
  }
  int rc_exit = 2;
  int64_t rows = c->batch * c->seq, td[] = {c->batch, c->seq};
  size_t tok_bytes = (size_t)rows * sizeof(int64_t), logit_n = (size_t)(rows * c->vocab);
  void *tokens = read_exact(dir, "tokens.bin", tok_bytes),
       *targets = read_exact(dir, "targets.bin", tok_bytes);
  float *want_logits = read_exact(dir, "logits.bin", logit_n * sizeof(float));
  double *want_losses = read_exact(dir, "losses.bin", (size_t)rc.steps * sizeof(double));
  float *logits = malloc(logit_n * sizeof(float));
  if (!tokens || !targets || !want_logits || !want_losses || !logits) goto done;
  /* The reference's initial weights. */
  for (int32_t i = 0; i < sg_graph_num_tensors(g); i++) {
    sg_tensor_info info;
    if (sg_graph_tensor_info(g, (sg_tensor){i}, &info) != SG_OK || info.role != SG_ROLE_PARAMETER) continue;
    char file[300];
    snprintf(file, sizeof file, "params/%s.bin", info.name);
    float *w = read_exact(dir, file, info.nbytes);
    sg_status st = w ? sg_session_write(s, info.name, w, info.nbytes) : SG_ERR_NOT_FOUND;
    free(w);
    if (st != SG_OK) goto done;
  }
  float lr = (float)rc.lr;
  double worst_loss_step = 0, loss0 = NAN, logit_diff = 0;
  int worst_step = 0;
  worst grads = {0, ""}, finals = {0, ""};
  for (int step = 0; step < rc.steps; step++) {
    float loss;
    if (sg_session_set_input(s, "tokens", SG_I64, 2, td, tokens) != SG_OK ||
        sg_session_set_input(s, "targets", SG_I64, 2, td, targets) != SG_OK ||
        sg_session_set_input(s, "lr", SG_F32, 0, NULL, &lr) != SG_OK || sg_session_step(s) != SG_OK ||
        sg_session_read(s, "loss", &loss, sizeof loss) != SG_OK) {
      fprintf(stderr, "gpt2_parity: step %d: %s\n", step + 1, sg_last_error());
      goto done;
    }
    if (step == 0) {
      loss0 = loss;
      if (sg_session_read(s, "logits", logits, logit_n * sizeof(float)) != SG_OK) goto done;
      for (size_t i = 0; i < logit_n; i++)
        logit_diff = fmax(logit_diff, fabs((double)logits[i] - want_logits[i]));
      if (compare_params(g, s, dir, "grads", ".grad", &grads) != 0) goto done;
    }
    double d = fabs((double)loss - want_losses[step]) / fabs(want_losses[step]);
    if (d > worst_loss_step) worst_loss_step = d, worst_step = step + 1;
    fprintf(stderr, "step %d/%d  loss %.7f  (PyTorch %.7f, relative diff %.2e)\n", step + 1, rc.steps, loss,
            want_losses[step], d);
  }
  if (compare_params(g, s, dir, "final", "", &finals) != 0) goto done;
  double loss_diff = fabs(loss0 - want_losses[0]) / fabs(want_losses[0]);
  int ok_logits = logit_diff <= 1e-5, ok_loss = loss_diff <= 1e-6, ok_grads = grads.value <= 1e-4;
  int ok_curve = worst_loss_step <= 1e-4, ok_final = finals.value <= 1e-3;
  printf("logits: max |diff| %.3e (bar 1e-5) %s\n", logit_diff, ok_logits ? "ok" : "FAIL");
  printf("loss: %.7f vs %.7f, relative diff %.3e (bar 1e-6) %s\n", loss0, want_losses[0], loss_diff,
         ok_loss ? "ok" : "FAIL");
  printf("gradients: worst relative L2 diff %.3e in %s (bar 1e-4) %s\n", grads.value, grads.name,
         ok_grads ? "ok" : "FAIL");
  printf("loss curve: %d AdamW steps, worst relative diff %.3e at step %d (bar 1e-4) %s\n", rc.steps,
         worst_loss_step, worst_step, ok_curve ? "ok" : "FAIL");
  printf("final parameters: worst relative L2 diff %.3e in %s (bar 1e-3) %s\n", finals.value, finals.name,
         ok_final ? "ok" : "FAIL");
  rc_exit = ok_logits && ok_loss && ok_grads && ok_curve && ok_final ? 0 : 1;
  if (json)
    printf("{\"parameters\": %lld, \"logits_max_abs_diff\": %.6e, \"loss_rel_diff\": %.6e, "
           "\"grad_worst_rel_l2\": %.6e, \"grad_worst_tensor\": \"%s\", \"curve_worst_rel_diff\": %.6e, "
           "\"final_worst_rel_l2\": %.6e, \"steps\": %d, \"ok\": %s}\n",
           (long long)gpt2_count_parameters(g), logit_diff, loss_diff, grads.value, grads.name,
           worst_loss_step, finals.value, rc.steps, rc_exit == 0 ? "true" : "false");
done:
  if (rc_exit == 2) fprintf(stderr, "gpt2_parity: %s\n", sg_last_error());
  free(tokens);
  free(targets);
  free(want_logits);
  free(want_losses);
  free(logits);
  sg_session_destroy(s);
  sg_graph_destroy(g);
  return rc_exit;
}
