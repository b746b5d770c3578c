/* resnet50_onnx_check: the C-built ResNet-50 (resnet50_model.c) against
 * sgrt's import of torchvision's own ResNet-50 exported to ONNX, on the same
 * weights and the same batch.
 *
 *   resnet50_onnx_check MODEL.onnx RES BATCH CLASSES [--threads N] [--json]
 *
 * MODEL.onnx comes from export_torchvision.py (training form, input
 * "images", output "logits"). Both graphs get the same cross-entropy loss
 * and run one training-form forward pass (sg_session_step on a graph
 * without backward: batch statistics, running statistics updated). The
 * C-built graph has no initializers: every parameter and running statistic
 * is copied into its session by name from the ONNX initializers
 * (sg_session_write), so the check also proves that the names and shapes
 * are torchvision's. Passes (exit 0) when the losses agree within 1e-5
 * relative and the logits and updated running statistics within 1e-5
 * (max|diff| / max|ref|); exit 1 otherwise, 2 for a bad command line. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <sgrt/onnx.h>
#include <sgrt/sgrt.h>

#include "cli_number.h"
#include "resnet50_model.h"

#define TOL 1e-5

static int fail(const char *what, sg_status st) {
  fprintf(stderr, "resnet50_onnx_check: %s: %s: %s\n", what, sg_status_str(st), sg_last_error());
  return 1;
}

/* Adds labels and a mean cross-entropy "loss" to a graph whose logits are
 * `logits`; marks both as outputs and finalizes. */
static sg_status add_loss(sg_graph *g, sg_tensor logits, int64_t batch) {
  sg_tensor labels = sg_input(g, "labels", SG_I64, 1, &batch);
  sg_tensor loss = sg_cross_entropy(g, logits, labels, SG_REDUCTION_MEAN);
  sg_tensor_set_name(g, loss, "loss");
  sg_graph_mark_output(g, loss);
  sg_graph_mark_output(g, logits);
  return sg_graph_finalize(g);
}

static double rel_err(const float *a, const float *ref, int64_t n) {
  double d = 0, m = 0;
  for (int64_t i = 0; i < n; i++) {
    double e = fabs((double)a[i] - ref[i]), r = fabs((double)ref[i]);
    if (e > d || e != e) d = e != e ? INFINITY : e;
    if (r > m) m = r;
  }
  return d / (m > 1e-30 ? m : 1e-30);
}

/* A whole number in [lo, hi] (tools/cli_number.h): 0, or 2 after naming it. */
static int number(const char *what, const char *s, int64_t lo, int64_t hi, int64_t *out) {
  char problem[512];
  if (cli_number_int(s, lo, hi, out)) return 0;
  fprintf(stderr, "resnet50_onnx_check: %s\n",
          cli_number_int_problem(problem, sizeof problem, what, s, lo, hi));
  return 2;
}

int main(int argc, char **argv) {
  int64_t threads = 2, res, batch, classes;
  int json = 0;
  if (argc < 5) {
    fprintf(stderr, "usage: resnet50_onnx_check MODEL.onnx RES BATCH CLASSES [--threads N] [--json]\n"
                    "       RES 32..4096, BATCH 2..65536, CLASSES 1..100000, threads 1..4096\n");
    return 2;
  }
  for (int i = 5; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) json = 1;
    else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      if (number("--threads", argv[++i], 1, 4096, &threads) != 0) return 2;
    } else return 2;
  }
  if (number("RES", argv[2], 32, 4096, &res) != 0 || number("BATCH", argv[3], 2, 65536, &batch) != 0 ||
      number("CLASSES", argv[4], 1, 100000, &classes) != 0)
    return 2;

  /* The ONNX side: import, add the loss. */
  sg_graph *imported = NULL, *og = NULL, *cg = NULL;
  sg_onnx_params op = SG_ONNX_PARAMS_INIT;
  sg_status st = sg_onnx_import(argv[1], &op, &imported);
  if (st != SG_OK) return fail("importing", st);
  if ((st = sg_graph_clone(imported, &og)) != SG_OK) return fail("cloning the import", st);
  sg_graph_destroy(imported);
  sg_tensor ologits;
  if ((st = sg_graph_find_tensor(og, "logits", &ologits)) != SG_OK)
    return fail("finding the ONNX logits", st);
  if ((st = add_loss(og, ologits, batch)) != SG_OK) return fail("the ONNX graph's loss", st);

  /* The C side: resnet50_build, the same loss. */
  if ((st = sg_graph_create(&cg)) != SG_OK) return fail("creating a graph", st);
  int64_t xd[] = {batch, 3, res, res};
  sg_tensor images = sg_input(cg, "images", SG_F32, 4, xd), clogits;
  resnet50_config cfg = RESNET50_CONFIG_INIT;
  cfg.batch = batch;
  cfg.image_size = res;
  cfg.classes = classes;
  if ((st = resnet50_build(cg, &cfg, images, &clogits)) != SG_OK) return fail("building ResNet-50", st);
  sg_tensor_set_name(cg, clogits, "logits");
  if ((st = add_loss(cg, clogits, batch)) != SG_OK) return fail("the C graph's loss", st);

  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sp.threads = (int)threads;
  sg_session *os = NULL, *cs = NULL;
  if ((st = sg_session_create(og, &sp, &os)) != SG_OK || (st = sg_session_compile(os)) != SG_OK)
    return fail("compiling the ONNX graph", st);
  if ((st = sg_session_create(cg, &sp, &cs)) != SG_OK || (st = sg_session_compile(cs)) != SG_OK)
    return fail("compiling the C graph", st);

  /* Weights by name: every parameter and running statistic of the C graph
   * must be an initializer of the import with the same shape, and the two
   * must have the same number of parameter elements. */
  int copied = 0;
  int64_t c_params = resnet50_count_parameters(cg), o_params = resnet50_count_parameters(og);
  for (int32_t i = 0; i < sg_graph_num_tensors(cg); i++) {
    sg_tensor_info ci, oi;
    sg_graph_tensor_info(cg, (sg_tensor){i}, &ci);
    if (ci.role != SG_ROLE_PARAMETER && ci.role != SG_ROLE_STATE) continue;
    sg_tensor ot;
    if (sg_graph_find_tensor(og, ci.name, &ot) != SG_OK || sg_graph_tensor_info(og, ot, &oi) != SG_OK ||
        oi.data == NULL || oi.nbytes != ci.nbytes || oi.role != ci.role) {
      fprintf(stderr,
              "resnet50_onnx_check: '%s' (%s) has no initializer of the same shape and role in the import\n",
              ci.name, sg_role_name(ci.role));
      return 1;
    }
    if ((st = sg_session_write(cs, ci.name, oi.data, ci.nbytes)) != SG_OK) return fail("copying weights", st);
    copied++;
  }
  if (c_params != o_params) {
    fprintf(stderr, "resnet50_onnx_check: %" PRId64 " parameters in the C graph, %" PRId64 " in the import\n",
            c_params, o_params);
    return 1;
  }

  /* The same batch for both. */
  size_t xn = (size_t)(batch * 3 * res * res);
  float *x = malloc(xn * sizeof(float));
  int64_t *y = malloc((size_t)batch * sizeof(int64_t));
  float *la = malloc((size_t)(batch * classes) * sizeof(float)),
        *lb = malloc((size_t)(batch * classes) * sizeof(float));
  if (!x || !y || !la || !lb) return fail("allocating", SG_ERR_NO_MEMORY);
  uint64_t r = 12345;
  for (size_t i = 0; i < xn; i++) {
    r = r * 6364136223846793005ull + 1442695040888963407ull;
    x[i] = (float)((double)(r >> 11) / 9007199254740992.0 * 4.0 - 2.0);
  }
  for (int64_t i = 0; i < batch; i++) y[i] = (i * 7 + 3) % classes;
  int64_t yd[] = {batch};
  sg_session *both[2] = {os, cs};
  float loss[2];
  for (int k = 0; k < 2; k++) {
    if ((st = sg_session_set_input(both[k], "images", SG_F32, 4, xd, x)) != SG_OK ||
        (st = sg_session_set_input(both[k], "labels", SG_I64, 1, yd, y)) != SG_OK ||
        (st = sg_session_step(both[k])) != SG_OK ||
        (st = sg_session_read(both[k], "loss", &loss[k], sizeof(float))) != SG_OK ||
        (st = sg_session_read(both[k], "logits", k ? lb : la, (size_t)(batch * classes) * sizeof(float))) !=
            SG_OK)
      return fail(k ? "running the C graph" : "running the ONNX graph", st);
  }
  double loss_rel = fabs((double)loss[1] - loss[0]) / fabs((double)loss[0]);
  double logits_rel = rel_err(lb, la, batch * classes), stats_rel = 0;
  const char *worst_stat = "";
  for (int32_t i = 0; i < sg_graph_num_tensors(cg); i++) {
    sg_tensor_info ci;
    sg_graph_tensor_info(cg, (sg_tensor){i}, &ci);
    if (ci.role != SG_ROLE_STATE) continue;
    float *a = malloc(ci.nbytes), *b = malloc(ci.nbytes);
    if (!a || !b || sg_session_read(os, ci.name, a, ci.nbytes) != SG_OK ||
        sg_session_read(cs, ci.name, b, ci.nbytes) != SG_OK)
      return fail("reading running statistics", SG_ERR_NO_MEMORY);
    double e = rel_err(b, a, ci.numel);
    if (e > stats_rel || e != e) stats_rel = e != e ? INFINITY : e, worst_stat = ci.name;
    free(a);
    free(b);
  }
  int ok = loss_rel <= TOL && logits_rel <= TOL && stats_rel <= TOL;
  if (json) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "check", "resnet50_onnx");
    cJSON_AddNumberToObject(j, "res", (double)res);
    cJSON_AddNumberToObject(j, "batch", (double)batch);
    cJSON_AddNumberToObject(j, "classes", (double)classes);
    cJSON_AddNumberToObject(j, "param_count", (double)c_params);
    cJSON_AddNumberToObject(j, "tensors_copied", copied);
    cJSON_AddNumberToObject(j, "loss_onnx", loss[0]);
    cJSON_AddNumberToObject(j, "loss_c", loss[1]);
    cJSON_AddNumberToObject(j, "loss_rel", loss_rel);
    cJSON_AddNumberToObject(j, "logits_rel", logits_rel);
    cJSON_AddNumberToObject(j, "running_stats_rel", stats_rel);
    cJSON_AddBoolToObject(j, "ok", ok);
    char *text = cJSON_PrintUnformatted(j);
    if (text) puts(text);
    free(text);
    cJSON_Delete(j);
  } else {
    printf("%d tensors copied by name, %" PRId64 " parameters on both sides\n", copied, c_params);
    printf("loss: ONNX import %.8f, C-built %.8f, relative difference %.2e\n", loss[0], loss[1], loss_rel);
    printf("logits max|diff|/max|ref| %.2e; running statistics after the step %.2e (%s)\n", logits_rel,
           stats_rel, worst_stat);
    printf("%s (tolerance %.0e)\n", ok ? "ok" : "MISMATCH", TOL);
  }
  sg_session_destroy(os);
  sg_session_destroy(cs);
  sg_graph_destroy(og);
  sg_graph_destroy(cg);
  free(x);
  free(y);
  free(la);
  free(lb);
  return ok ? 0 : 1;
}
