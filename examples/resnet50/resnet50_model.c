/* ResNet-50 with sgrt's builder API; see resnet50_model.h. The structure
 * follows torchvision/models/resnet.py (ResNet, Bottleneck, _make_layer)
 * line by line, so the names below are its attribute names. */
#include "resnet50_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* in_features of fc: 512 planes times the expansion 4, for every width. */
#define FC_IN 2048

typedef struct builder {
  sg_graph *g;
  const resnet50_config *cfg;
} builder;

static sg_tensor conv(builder *b, const char *prefix, sg_tensor x, int64_t cin, int64_t cout, int64_t k,
                      int64_t stride, int64_t pad) {
  char name[160]; /* callers' prefixes are at most 127 characters: room for ".weight" */
  snprintf(name, sizeof name, "%s.weight", prefix);
  int64_t wd[] = {cout, cin, k, k};
  sg_tensor w = sg_parameter(b->g, name, SG_F32, 4, wd, NULL);
  sg_conv2d_params p = SG_CONV2D_PARAMS_INIT;
  p.stride[0] = p.stride[1] = stride;
  p.padding[0] = p.padding[1] = p.padding[2] = p.padding[3] = pad;
  return sg_conv2d(b->g, x, w, SG_NO_TENSOR, &p);
}

static sg_tensor bn(builder *b, const char *prefix, sg_tensor x, int64_t c) {
  static const char *const parts[] = {"weight", "bias", "running_mean", "running_var"};
  sg_tensor t[4];
  int64_t d[] = {c};
  for (int i = 0; i < 4; i++) {
    char name[128];
    snprintf(name, sizeof name, "%s.%s", prefix, parts[i]);
    t[i] = sg_graph_add_tensor(b->g, name, SG_F32, i < 2 ? SG_ROLE_PARAMETER : SG_ROLE_STATE, 1, d, NULL);
  }
  sg_batch_norm_params p = SG_BATCH_NORM_PARAMS_INIT; /* eps 1e-5, momentum 0.1, as nn.BatchNorm2d */
  p.training = b->cfg->bn_training;
  return sg_batch_norm(b->g, x, t[0], t[1], t[2], t[3], &p);
}

/* torchvision's Bottleneck: conv1x1 - bn - relu - conv3x3(stride) - bn - relu
 * - conv1x1 - bn, plus the identity or downsample(x), then relu. */
static sg_tensor bottleneck(builder *b, const char *prefix, sg_tensor x, int64_t inplanes, int64_t planes,
                            int64_t stride) {
  char n[128];
  int64_t width = planes * b->cfg->width / 64, out_c = planes * 4;
  snprintf(n, sizeof n, "%s.conv1", prefix);
  sg_tensor y = conv(b, n, x, inplanes, width, 1, 1, 0);
  snprintf(n, sizeof n, "%s.bn1", prefix);
  y = sg_relu(b->g, bn(b, n, y, width));
  snprintf(n, sizeof n, "%s.conv2", prefix);
  y = conv(b, n, y, width, width, 3, stride, 1);
  snprintf(n, sizeof n, "%s.bn2", prefix);
  y = sg_relu(b->g, bn(b, n, y, width));
  snprintf(n, sizeof n, "%s.conv3", prefix);
  y = conv(b, n, y, width, out_c, 1, 1, 0);
  snprintf(n, sizeof n, "%s.bn3", prefix);
  y = bn(b, n, y, out_c);
  sg_tensor identity = x;
  if (stride != 1 || inplanes != out_c) {
    snprintf(n, sizeof n, "%s.downsample.0", prefix);
    identity = conv(b, n, x, inplanes, out_c, 1, stride, 0);
    snprintf(n, sizeof n, "%s.downsample.1", prefix);
    identity = bn(b, n, identity, out_c);
  }
  return sg_relu(b->g, sg_add(b->g, y, identity));
}

sg_status resnet50_build(sg_graph *g, const resnet50_config *cfg, sg_tensor images, sg_tensor *logits) {
  if (g == NULL || cfg == NULL || logits == NULL) return SG_ERR_INVALID_ARG;
  *logits = SG_NO_TENSOR;
  if (cfg->batch < 1 || cfg->image_size < 1 || cfg->classes < 1 || cfg->width < 1) return SG_ERR_INVALID_ARG;
  builder b = {g, cfg};
  sg_tensor x = conv(&b, "conv1", images, 3, 64, 7, 2, 3);
  x = sg_relu(g, bn(&b, "bn1", x, 64));
  sg_pool2d_params mp = SG_POOL2D_PARAMS_INIT;
  mp.kernel[0] = mp.kernel[1] = 3;
  mp.stride[0] = mp.stride[1] = 2;
  mp.padding[0] = mp.padding[1] = mp.padding[2] = mp.padding[3] = 1;
  x = sg_max_pool2d(g, x, &mp);
  static const int blocks[4] = {3, 4, 6, 3};
  int64_t inplanes = 64;
  for (int l = 0; l < 4; l++) {
    int64_t planes = 64 << l;
    for (int i = 0; i < blocks[l]; i++) {
      char prefix[32];
      snprintf(prefix, sizeof prefix, "layer%d.%d", l + 1, i);
      x = bottleneck(&b, prefix, x, inplanes, planes, i == 0 && l > 0 ? 2 : 1);
      inplanes = planes * 4;
    }
  }
  x = sg_flatten(g, sg_global_avg_pool(g, x), 1);
  int64_t wd[] = {cfg->classes, inplanes}, bd[] = {cfg->classes};
  sg_tensor w = sg_parameter(g, "fc.weight", SG_F32, 2, wd, NULL);
  sg_tensor bias = sg_parameter(g, "fc.bias", SG_F32, 1, bd, NULL);
  *logits = sg_linear(g, x, w, bias);
  return sg_graph_status(g);
}

/* ---- torchvision's initialisation ---------------------------------------- */

static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Uniform in (0, 1): 53 random bits, never 0. */
static double uniform01(uint64_t *s) { return ((double)(splitmix64(s) >> 11) + 0.5) / 9007199254740992.0; }

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

int resnet50_init_values(const sg_tensor_info *info, uint64_t seed, float *out) {
  if (info == NULL || out == NULL || info->dtype != SG_F32) return -1;
  uint64_t s = seed ^ 0x243F6A8885A308D3ull;
  for (const char *c = info->name; *c; c++) s = (s ^ (unsigned char)*c) * 1099511628211ull;
  const int64_t n = info->numel;
  const char *name = info->name;
  if (strncmp(name, "fc.", 3) == 0) {
    /* nn.Linear.reset_parameters: kaiming_uniform_(a=sqrt(5)) for the weight,
     * which is U(-1/sqrt(fan_in), 1/sqrt(fan_in)); the same bound for the bias. */
    if (info->role != SG_ROLE_PARAMETER) return -1;
    double bound = 1.0 / sqrt((double)FC_IN);
    for (int64_t i = 0; i < n; i++) out[i] = (float)((2.0 * uniform01(&s) - 1.0) * bound);
    return 0;
  }
  if (info->role == SG_ROLE_PARAMETER && info->ndim == 4) {
    /* kaiming_normal_(mode="fan_out", nonlinearity="relu"): std = sqrt(2 / fan_out). */
    double fan_out = (double)(info->dims[0] * info->dims[2] * info->dims[3]);
    double std = sqrt(2.0 / fan_out);
    for (int64_t i = 0; i < n; i += 2) {
      double r = sqrt(-2.0 * log(uniform01(&s))), a = 6.283185307179586 * uniform01(&s);
      out[i] = (float)(std * r * cos(a));
      if (i + 1 < n) out[i + 1] = (float)(std * r * sin(a));
    }
    return 0;
  }
  float v;
  if (ends_with(name, ".running_var") && info->role == SG_ROLE_STATE) v = 1.0f;
  else if (ends_with(name, ".running_mean") && info->role == SG_ROLE_STATE) v = 0.0f;
  /* zero_init_residual=True: each bottleneck starts as the identity, so
   * the first steps do not blow up (Goyal et al., "Accurate, Large Minibatch
   * SGD"; torchvision's option). With every bn weight at 1, SGD with
   * momentum at the examples' learning rates raised the loss for steps. */
  else if (ends_with(name, ".bn3.weight") && info->role == SG_ROLE_PARAMETER && info->ndim == 1) v = 0.0f;
  else if (ends_with(name, ".weight") && info->role == SG_ROLE_PARAMETER && info->ndim == 1) v = 1.0f;
  else if (ends_with(name, ".bias") && info->role == SG_ROLE_PARAMETER && info->ndim == 1) v = 0.0f;
  else return -1;
  for (int64_t i = 0; i < n; i++) out[i] = v;
  return 0;
}

sg_status resnet50_init_session(const sg_graph *g, sg_session *s, uint64_t seed) {
  float *buf = NULL;
  size_t cap = 0;
  sg_status st = SG_OK;
  for (int32_t i = 0; i < sg_graph_num_tensors(g) && st == SG_OK; i++) {
    sg_tensor_info info;
    if ((st = sg_graph_tensor_info(g, (sg_tensor){i}, &info)) != SG_OK) break;
    if (info.role != SG_ROLE_PARAMETER && info.role != SG_ROLE_STATE) continue;
    if (info.nbytes > cap) {
      free(buf);
      cap = info.nbytes;
      if ((buf = malloc(cap)) == NULL) return SG_ERR_NO_MEMORY;
    }
    if (resnet50_init_values(&info, seed, buf) != 0) {
      st = SG_ERR_NOT_FOUND;
      break;
    }
    st = sg_session_write(s, info.name, buf, info.nbytes);
  }
  free(buf);
  return st;
}

int64_t resnet50_count_parameters(const sg_graph *g) {
  int64_t n = 0;
  for (int32_t i = 0; i < sg_graph_num_tensors(g); i++) {
    sg_tensor_info info;
    if (sg_graph_tensor_info(g, (sg_tensor){i}, &info) == SG_OK && info.role == SG_ROLE_PARAMETER)
      n += info.numel;
  }
  return n;
}

sg_status resnet50_build_training(const resnet50_config *cfg, const char *optimizer, int mark_logits,
                                  sg_graph **out) {
  sg_graph *g;
  sg_status st = sg_graph_create(&g);
  if (st != SG_OK) return st;
  int64_t xd[] = {cfg->batch, 3, cfg->image_size, cfg->image_size}, yd[] = {cfg->batch};
  sg_tensor x = sg_input(g, "images", SG_F32, 4, xd);
  sg_tensor y = sg_input(g, "labels", SG_I64, 1, yd);
  sg_tensor lr = sg_input(g, "lr", SG_F32, 0, NULL);
  sg_tensor logits;
  st = resnet50_build(g, cfg, x, &logits);
  sg_tensor loss = sg_cross_entropy(g, logits, y, SG_REDUCTION_MEAN);
  if (mark_logits) {
    sg_tensor_set_name(g, logits, "logits");
    sg_graph_mark_output(g, logits);
  }
  sg_tensor_set_name(g, loss, "loss");
  sg_graph_mark_output(g, loss);
  /* Builder errors are sticky: the first one comes back from here on. */
  if (st == SG_OK) st = sg_graph_backward(g, loss);
  if (st == SG_OK && optimizer != NULL && strcmp(optimizer, "adamw") == 0) {
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
