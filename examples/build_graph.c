/* build_graph: builds a small CNN through the builder API, saves it as .sgg,
 * loads it back and checks that the round trip is exact.
 *
 *   build_graph [--json] [PATH]        (PATH defaults to model.sgg)
 *
 * The network: conv(3->16, 3x3) - batch_norm - relu - max_pool(2) -
 * conv(16->32, 3x3) - batch_norm - relu - global_avg_pool - flatten -
 * linear(32->10) - cross_entropy, on 8 images of 3x32x32. Uses only the
 * public API. With --json the last line of stdout is one JSON object. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <sgrt/sgrt.h>

enum { BATCH = 8, CLASSES = 10 };

/* Deterministic initial weights: uniform in [-bound, bound) from a 64-bit LCG,
 * bound = 1/sqrt(fan_in) as PyTorch's default for conv and linear layers. */
static uint64_t rng_state = 0x5eed5eed5eedULL;
static float next_uniform(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((rng_state >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

/* Set when a weight buffer cannot be allocated. */
static int out_of_memory;

/* A source tensor of role `role` filled with uniform(-bound, bound), or with
 * `fill` when bound is 0. */
static sg_tensor make_source(sg_graph *g, const char *name, sg_role role, int ndim, const int64_t *dims,
                             double bound, float fill) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= dims[i];
  float *data = malloc((size_t)n * sizeof *data);
  if (data == NULL) {
    out_of_memory = 1;
    return SG_NO_TENSOR;
  }
  for (int64_t i = 0; i < n; i++) data[i] = bound > 0 ? (float)(bound * next_uniform()) : fill;
  sg_tensor t = sg_graph_add_tensor(g, name, SG_F32, role, ndim, dims, data);
  free(data);
  return t;
}

/* conv(3x3, padding 1) + batch_norm + relu, with parameters named prefix.*. */
static sg_tensor conv_bn_relu(sg_graph *g, sg_tensor x, const char *prefix, int64_t cin, int64_t cout) {
  char name[64];
  int64_t wdims[4] = {cout, cin, 3, 3}, cdims[1] = {cout};
  double bound = 1.0 / sqrt((double)(cin * 9));
  snprintf(name, sizeof name, "%s.weight", prefix);
  sg_tensor w = make_source(g, name, SG_ROLE_PARAMETER, 4, wdims, bound, 0);
  snprintf(name, sizeof name, "%s.bias", prefix);
  sg_tensor b = make_source(g, name, SG_ROLE_PARAMETER, 1, cdims, bound, 0);
  snprintf(name, sizeof name, "%s.bn.weight", prefix);
  sg_tensor gamma = make_source(g, name, SG_ROLE_PARAMETER, 1, cdims, 0, 1.0f);
  snprintf(name, sizeof name, "%s.bn.bias", prefix);
  sg_tensor beta = make_source(g, name, SG_ROLE_PARAMETER, 1, cdims, 0, 0.0f);
  snprintf(name, sizeof name, "%s.bn.running_mean", prefix);
  sg_tensor mean = make_source(g, name, SG_ROLE_STATE, 1, cdims, 0, 0.0f);
  snprintf(name, sizeof name, "%s.bn.running_var", prefix);
  sg_tensor var = make_source(g, name, SG_ROLE_STATE, 1, cdims, 0, 1.0f);

  sg_conv2d_params cp = sg_conv2d_params_init();
  cp.padding[0] = cp.padding[1] = cp.padding[2] = cp.padding[3] = 1;
  sg_tensor y = sg_conv2d(g, x, w, b, &cp);
  y = sg_batch_norm(g, y, gamma, beta, mean, var, NULL);
  return sg_relu(g, y);
}

static sg_status build(sg_graph *g) {
  int64_t xdims[4] = {BATCH, 3, 32, 32}, ydims[1] = {BATCH};
  sg_tensor x = sg_input(g, "images", SG_F32, 4, xdims);
  sg_tensor labels = sg_input(g, "labels", SG_I64, 1, ydims);
  sg_tensor h = conv_bn_relu(g, x, "conv1", 3, 16);
  sg_pool2d_params pp = sg_pool2d_params_init();
  pp.kernel[0] = pp.kernel[1] = 2;
  h = sg_max_pool2d(g, h, &pp);
  h = conv_bn_relu(g, h, "conv2", 16, 32);
  h = sg_flatten(g, sg_global_avg_pool(g, h), 1);
  int64_t wdims[2] = {CLASSES, 32}, bdims[1] = {CLASSES};
  double bound = 1.0 / sqrt(32.0);
  sg_tensor w = make_source(g, "fc.weight", SG_ROLE_PARAMETER, 2, wdims, bound, 0);
  sg_tensor b = make_source(g, "fc.bias", SG_ROLE_PARAMETER, 1, bdims, bound, 0);
  sg_tensor logits = sg_linear(g, h, w, b);
  sg_tensor loss = sg_cross_entropy(g, logits, labels, SG_REDUCTION_MEAN);
  if (out_of_memory) {
    fprintf(stderr, "build_graph: out of memory for the initial weights\n");
    return SG_ERR_NO_MEMORY;
  }
  /* Builder errors are sticky: check once, here. */
  sg_status st = sg_graph_status(g);
  if (st != SG_OK) return st;
  if ((st = sg_tensor_set_name(g, logits, "logits")) != SG_OK) return st;
  if ((st = sg_tensor_set_name(g, loss, "loss")) != SG_OK) return st;
  if ((st = sg_graph_mark_output(g, logits)) != SG_OK) return st;
  return sg_graph_mark_output(g, loss);
}

/* Parameter tensors, elements and bytes. */
typedef struct param_total {
  int32_t tensors;
  int64_t elements;
  uint64_t bytes;
} param_total;

static param_total count_parameters(const sg_graph *g) {
  param_total t = {0, 0, 0};
  for (int32_t i = 0; i < sg_graph_num_tensors(g); i++) {
    sg_tensor_info info;
    if (sg_graph_tensor_info(g, (sg_tensor){i}, &info) != SG_OK || info.role != SG_ROLE_PARAMETER) continue;
    t.tensors++;
    t.elements += info.numel;
    t.bytes += info.nbytes;
  }
  return t;
}

/* 1 when every initializer of `a` has the same bytes in `b` (found by name). */
static int same_initializers(const sg_graph *a, const sg_graph *b) {
  for (int32_t i = 0; i < sg_graph_num_tensors(a); i++) {
    sg_tensor_info ia, ib;
    sg_tensor tb;
    if (sg_graph_tensor_info(a, (sg_tensor){i}, &ia) != SG_OK) return 0;
    if (ia.data == NULL) continue;
    if (sg_graph_find_tensor(b, ia.name, &tb) != SG_OK || sg_graph_tensor_info(b, tb, &ib) != SG_OK) return 0;
    if (ib.data == NULL || ib.nbytes != ia.nbytes || memcmp(ia.data, ib.data, ia.nbytes) != 0) return 0;
  }
  return 1;
}

static int fail(const char *stage, sg_status st) {
  fprintf(stderr, "build_graph: %s failed: %s: %s\n", stage, sg_status_str(st), sg_last_error());
  return 1;
}

static int print_json(const char *path, uint64_t hash, uint64_t hash_w, const sg_graph *g, param_total p,
                      long file_bytes) {
  char h[17], hw[17];
  snprintf(h, sizeof h, "%016" PRIx64, hash);
  snprintf(hw, sizeof hw, "%016" PRIx64, hash_w);
  cJSON *o = cJSON_CreateObject();
  int ok = o != NULL;
  ok = ok && cJSON_AddStringToObject(o, "path", path) != NULL;
  ok = ok && cJSON_AddStringToObject(o, "hash", h) != NULL;
  ok = ok && cJSON_AddStringToObject(o, "hash_with_weights", hw) != NULL;
  ok = ok && cJSON_AddNumberToObject(o, "num_ops", sg_graph_num_ops(g)) != NULL;
  ok = ok && cJSON_AddNumberToObject(o, "num_tensors", sg_graph_num_tensors(g)) != NULL;
  ok = ok && cJSON_AddNumberToObject(o, "parameter_tensors", p.tensors) != NULL;
  ok = ok && cJSON_AddNumberToObject(o, "parameters", (double)p.elements) != NULL;
  ok = ok && cJSON_AddNumberToObject(o, "parameter_bytes", (double)p.bytes) != NULL;
  ok = ok && cJSON_AddNumberToObject(o, "file_bytes", (double)file_bytes) != NULL;
  ok = ok && cJSON_AddTrueToObject(o, "round_trip_exact") != NULL;
  char *text = ok ? cJSON_PrintUnformatted(o) : NULL;
  cJSON_Delete(o);
  if (text == NULL) {
    fprintf(stderr, "build_graph: out of memory building the JSON summary\n");
    return 1;
  }
  puts(text);
  cJSON_free(text);
  return 0;
}

static long file_size(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return -1;
  long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
  fclose(f);
  return n;
}

int main(int argc, char **argv) {
  const char *path = NULL;
  int json = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) {
      json = 1;
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf("usage: build_graph [--json] [PATH]\n"
             "Builds a small CNN, saves it to PATH (default model.sgg), loads it back and checks it.\n");
      return 0;
    } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
      fprintf(stderr, "build_graph: unknown option '%s' (usage: build_graph [--json] [PATH])\n", argv[i]);
      return 2;
    } else if (path != NULL) {
      fprintf(stderr, "build_graph: more than one PATH given\n");
      return 2;
    } else {
      path = argv[i];
    }
  }
  if (path == NULL) path = "model.sgg";

  sg_graph *g = NULL, *loaded = NULL;
  uint64_t hash = 0, hash_w = 0, hash2 = 0, hash2_w = 0;
  int rc = 1;
  sg_status st = sg_graph_create(&g);
  if (st != SG_OK) return fail("create", st);

  if ((st = build(g)) != SG_OK) {
    rc = fail("build", st);
    goto out;
  }
  printf("build:    %d ops, %d tensors\n", (int)sg_graph_num_ops(g), (int)sg_graph_num_tensors(g));
  if ((st = sg_graph_finalize(g)) != SG_OK) {
    rc = fail("finalize", st);
    goto out;
  }
  if ((st = sg_graph_hash(g, 0, &hash)) != SG_OK ||
      (st = sg_graph_hash(g, SG_HASH_WEIGHTS, &hash_w)) != SG_OK) {
    rc = fail("hash", st);
    goto out;
  }
  printf("finalize: verified, hash %016" PRIx64 ", with weights %016" PRIx64 "\n", hash, hash_w);
  if ((st = sg_graph_save(g, path)) != SG_OK) {
    rc = fail("save", st);
    goto out;
  }
  long bytes = file_size(path);
  printf("save:     %s (%ld bytes)\n", path, bytes);
  if ((st = sg_graph_load(path, &loaded)) != SG_OK) {
    rc = fail("load", st);
    goto out;
  }
  if ((st = sg_graph_hash(loaded, 0, &hash2)) != SG_OK ||
      (st = sg_graph_hash(loaded, SG_HASH_WEIGHTS, &hash2_w)) != SG_OK) {
    rc = fail("hash of the loaded graph", st);
    goto out;
  }
  if (hash2 != hash || hash2_w != hash_w || sg_graph_num_ops(loaded) != sg_graph_num_ops(g) ||
      sg_graph_num_tensors(loaded) != sg_graph_num_tensors(g) || !same_initializers(g, loaded)) {
    fprintf(stderr,
            "build_graph: the loaded graph differs from the saved one (hash %016" PRIx64 " vs %016" PRIx64
            ")\n",
            hash2, hash);
    goto out;
  }
  printf("load:     %s: same hashes, ops, tensors and weights\n", path);

  param_total p = count_parameters(loaded);
  printf("summary:  %d ops, %d tensors, %d parameter tensors, %lld parameters (%llu bytes), file %ld bytes\n",
         (int)sg_graph_num_ops(loaded), (int)sg_graph_num_tensors(loaded), (int)p.tensors,
         (long long)p.elements, (unsigned long long)p.bytes, bytes);
  rc = json ? print_json(path, hash, hash_w, loaded, p, bytes) : 0;

out:
  sg_graph_destroy(loaded);
  sg_graph_destroy(g);
  return rc;
}
