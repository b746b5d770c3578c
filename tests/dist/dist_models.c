/* See dist_models.h. */
#include "dist_models.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../examples/resnet50/resnet50_model.h"
#include "../worker_check.h" /* sg_worker_mix64, sg_worker_unit */
#include "core/core.h"

/* Marks every parameter's gradient as an output (the reference reads them). */
static sg_status mark_grads(sg_graph *g) {
  for (int32_t t = 0; t < sg_graph_num_tensors(g); t++) {
    sg_tensor_info info;
    sg_tensor grad;
    if (sg_graph_tensor_info(g, (sg_tensor){t}, &info) != SG_OK || info.role != SG_ROLE_PARAMETER) continue;
    if (sg_graph_grad(g, (sg_tensor){t}, &grad) == SG_OK) sg_graph_mark_output(g, grad);
  }
  return sg_graph_status(g);
}

static sg_status finish(sg_graph *g, sg_tensor loss, sg_tensor lr, int optimizer, sg_graph **out) {
  sg_tensor_set_name(g, loss, "loss");
  sg_graph_mark_output(g, loss);
  sg_status st = sg_graph_backward(g, loss);
  if (st == SG_OK && optimizer == 2) {
    sg_adamw_params p = SG_ADAMW_PARAMS_INIT;
    st = sg_graph_add_adamw(g, lr, &p);
  } else if (st == SG_OK && optimizer) {
    sg_sgd_params p = SG_SGD_PARAMS_INIT;
    p.momentum = 0.9;
    st = sg_graph_add_sgd(g, lr, &p);
  } else if (st == SG_OK) {
    st = mark_grads(g);
  }
  if (st == SG_OK) st = sg_graph_finalize(g);
  if (st != SG_OK) {
    sg_graph_destroy(g);
    return st;
  }
  *out = g;
  return SG_OK;
}

sg_status mlp_build(const mlp_cfg *c, sg_graph **out) {
  sg_graph *g;
  sg_status st = sg_graph_create(&g);
  if (st != SG_OK) return st;
  int64_t xd[] = {c->batch, c->in}, yd[] = {c->batch};
  sg_tensor h = sg_input(g, "x", SG_F32, 2, xd);
  sg_tensor y = sg_input(g, "y", SG_I64, 1, yd);
  sg_tensor lr = c->optimizer ? sg_input(g, "lr", SG_F32, 0, NULL) : SG_NO_TENSOR;
  int fan_in = c->in;
  for (int l = 1; l <= c->layers; l++) {
    int out_f = l == c->layers ? c->classes : c->hidden;
    int64_t wd[] = {out_f, fan_in}, bd[] = {out_f};
    size_t nw = (size_t)out_f * (size_t)fan_in;
    float *w = malloc(nw * sizeof(float)), *b = malloc((size_t)out_f * sizeof(float));
    if (w == NULL || b == NULL) {
      free(w);
      free(b);
      sg_graph_destroy(g);
      return SG_ERR_NO_MEMORY;
    }
    float bound = 1.0f / sqrtf((float)fan_in);
    for (size_t i = 0; i < nw; i++) w[i] = bound * sg_worker_unit(c->init_seed, (uint64_t)l, i);
    for (int i = 0; i < out_f; i++)
      b[i] = bound * sg_worker_unit(c->init_seed, 1000u + (uint64_t)l, (uint64_t)i);
    char wn[32], bn[32];
    snprintf(wn, sizeof wn, "fc%d.weight", l);
    snprintf(bn, sizeof bn, "fc%d.bias", l);
    sg_tensor W = sg_parameter(g, wn, SG_F32, 2, wd, w);
    sg_tensor B = sg_parameter(g, bn, SG_F32, 1, bd, b);
    free(w);
    free(b);
    h = sg_linear(g, h, W, B);
    if (l < c->layers) h = sg_relu(g, h);
    if (l < c->layers && c->dropout > 0) h = sg_dropout(g, h, c->dropout, 100u + (uint64_t)l, 1);
    fan_in = out_f;
  }
  sg_tensor loss = sg_cross_entropy(g, h, y, SG_REDUCTION_MEAN);
  return finish(g, loss, lr, c->optimizer, out);
}

void mlp_data(int step, int first, int n, int in, int classes, float *x, int64_t *y) {
  for (int i = 0; i < n; i++) {
    uint64_t s = (uint64_t)(first + i);
    int label = (int)(sg_worker_mix64(s * 7919u + (uint64_t)step) % (uint64_t)classes);
    y[i] = label;
    /* A class-dependent offset on a few features makes it learnable. */
    for (int k = 0; k < in; k++)
      x[(size_t)i * in + k] =
          sg_worker_unit(42, (uint64_t)step, s * (uint64_t)in + (uint64_t)k) + (k % classes == label);
  }
}

sg_status rn_build(const rn_cfg *c, sg_graph **out) {
  sg_graph *g;
  sg_status st = sg_graph_create(&g);
  if (st != SG_OK) return st;
  int64_t xd[] = {c->batch, 3, c->res, c->res}, yd[] = {c->batch};
  sg_tensor x = sg_input(g, "images", SG_F32, 4, xd);
  sg_tensor y = sg_input(g, "labels", SG_I64, 1, yd);
  sg_tensor lr = c->optimizer ? sg_input(g, "lr", SG_F32, 0, NULL) : SG_NO_TENSOR;
  resnet50_config rc = RESNET50_CONFIG_INIT;
  rc.batch = c->batch;
  rc.image_size = c->res;
  rc.classes = c->classes;
  rc.width = c->width;
  sg_tensor logits;
  resnet50_build(g, &rc, x, &logits);
  sg_tensor loss = sg_cross_entropy(g, logits, y, SG_REDUCTION_MEAN);
  return finish(g, loss, lr, c->optimizer, out);
}

void rn_data(int step, int first, int n, int res, int classes, float *x, int64_t *y) {
  /* Samples must differ well beyond noise: with near-identical images the
   * deep features of a freshly initialised network are nearly equal across
   * the batch, and batch norm over a few such values amplifies rounding
   * (the training would be chaotic and no two summation orders would agree).
   * So each sample gets its own colour, a plane wave of its own and noise. */
  size_t plane = (size_t)res * res;
  for (int i = 0; i < n; i++) {
    uint64_t s = (uint64_t)(first + i);
    int label = (int)(sg_worker_mix64(s * 104729u + (uint64_t)step) % (uint64_t)classes);
    y[i] = label;
    for (int c = 0; c < 3; c++) {
      float colour =
          1.5f * sg_worker_unit(11, (uint64_t)step, s * 3 + (uint64_t)c) + 0.5f * (float)(label % 3 == c);
      float fx = 0.3f * sg_worker_unit(12, (uint64_t)step, s * 3 + (uint64_t)c),
            fy = 0.3f * sg_worker_unit(13, (uint64_t)step, s * 3 + (uint64_t)c);
      float *p = x + ((size_t)i * 3 + (size_t)c) * plane;
      for (int py = 0; py < res; py++)
        for (int px = 0; px < res; px++)
          p[py * res + px] = colour + sinf(fx * (float)px + fy * (float)py) +
                             0.5f * sg_worker_unit(7, (uint64_t)step,
                                                   (s * 3 + (uint64_t)c) * plane + (size_t)(py * res + px));
    }
  }
}

sg_status params_read(const sg_graph *g, const sg_session *s, param_set *out) {
  memset(out, 0, sizeof *out);
  int nt = sg_graph_num_tensors(g);
  out->names = calloc((size_t)nt, sizeof(char *));
  out->values = calloc((size_t)nt, sizeof(float *));
  out->numel = calloc((size_t)nt, sizeof(int64_t));
  if (!out->names || !out->values || !out->numel) return SG_ERR_NO_MEMORY;
  for (int32_t t = 0; t < nt; t++) {
    sg_tensor_info info;
    sg_status st = sg_graph_tensor_info(g, (sg_tensor){t}, &info);
    if (st != SG_OK) return st;
    if (info.role != SG_ROLE_PARAMETER) continue;
    int k = out->n++;
    out->names[k] = strdup(info.name);
    out->values[k] = malloc(info.nbytes);
    out->numel[k] = info.numel;
    if (!out->names[k] || !out->values[k]) return SG_ERR_NO_MEMORY;
    if ((st = sg_session_read(s, info.name, out->values[k], info.nbytes)) != SG_OK) return st;
  }
  return SG_OK;
}

void params_free(param_set *p) {
  for (int i = 0; i < p->n; i++) {
    free(p->names[i]);
    free(p->values[i]);
  }
  free(p->names);
  free(p->values);
  free(p->numel);
  memset(p, 0, sizeof *p);
}

double params_max_rel_diff(const param_set *a, const param_set *b, param_diff *out) {
  memset(out, 0, sizeof *out);
  out->worst = out->worst_l2 = "";
  double num = 0, den = 0; /* over every parameter: the global relative L2 */
  for (int i = 0; i < a->n; i++) {
    int j = 0;
    while (j < b->n && strcmp(a->names[i], b->names[j]) != 0) j++;
    if (j == b->n || a->numel[i] != b->numel[j]) {
      out->worst = a->names[i];
      return out->max_rel = -1;
    }
    double diff = 0, scale = 0, d2 = 0, b2 = 0;
    for (int64_t k = 0; k < a->numel[i]; k++) {
      double bv = b->values[j][k], d = fabs((double)a->values[i][k] - bv);
      if (isnan(d) || d > diff) diff = d; /* a NaN sticks */
      if (fabs(bv) > scale) scale = fabs(bv);
      d2 += d * d;
      b2 += bv * bv;
    }
    double r = scale > 0 ? diff / scale : diff, r2 = b2 > 0 ? sqrt(d2 / b2) : sqrt(d2);
    if (isnan(r) || isnan(r2)) {
      out->worst = a->names[i];
      return out->max_rel = NAN;
    }
    if (r > out->max_rel) {
      out->max_rel = r;
      out->worst = a->names[i];
    }
    if (r2 > out->max_rel_l2) {
      out->max_rel_l2 = r2;
      out->worst_l2 = a->names[i];
    }
    if (diff > out->max_abs) out->max_abs = diff;
    num += d2;
    den += b2;
  }
  out->global_rel_l2 = den > 0 ? sqrt(num / den) : sqrt(num);
  return out->max_rel;
}

uint64_t params_fnv(const param_set *p) {
  uint64_t h = SG__FNV1A64_SEED;
  for (int i = 0; i < p->n; i++) h = sg__fnv1a64(h, p->values[i], (size_t)p->numel[i] * sizeof(float));
  return h;
}

sg_status params_save(const char *path, const param_set *p) {
  FILE *f = fopen(path, "wb");
  if (f == NULL) return sg__error(SG_ERR_IO, "cannot write %s", path);
  bool ok = true;
  for (int i = 0; i < p->n && ok; i++)
    ok = fwrite(p->values[i], sizeof(float), (size_t)p->numel[i], f) == (size_t)p->numel[i];
  if (fclose(f) != 0 || !ok) return sg__error(SG_ERR_IO, "write %s", path);
  return SG_OK;
}

sg_status params_load(const char *path, param_set *p) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return sg__error(SG_ERR_IO, "cannot read %s", path);
  for (int i = 0; i < p->n; i++)
    if (fread(p->values[i], sizeof(float), (size_t)p->numel[i], f) != (size_t)p->numel[i]) {
      fclose(f);
      return sg__error(SG_ERR_IO, "%s is short", path);
    }
  fclose(f);
  return SG_OK;
}

sg_status params_save_compare(const sg_graph *g, const sg_session *s, const char *dir, int rank,
                              const char *ref, double *rel) {
  param_set got = {0}, want = {0};
  char path[4096];
  *rel = 0;
  sg_status st = params_read(g, s, &got);
  if (st == SG_OK) {
    snprintf(path, sizeof path, "%s/params.%d", dir, rank);
    st = params_save(path, &got);
  }
  if (st == SG_OK && ref != NULL) {
    snprintf(path, sizeof path, "%s/params.0", ref);
    st = params_read(g, s, &want); /* the layout, overwritten by the reference's values */
    if (st == SG_OK) st = params_load(path, &want);
    param_diff diff;
    if (st == SG_OK) *rel = params_max_rel_diff(&got, &want, &diff);
  }
  params_free(&got);
  params_free(&want);
  return st;
}

int read_text(const char *dir, const char *name, char *buf, size_t cap) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "r");
  if (f == NULL) return -1;
  size_t n = fread(buf, 1, cap - 1, f);
  buf[n] = '\0';
  fclose(f);
  return 0;
}

sg_status mlp_feed(void *ctx, sg_dist *d, uint64_t step, int shard, int n_shards) {
  const mlp_feed_ctx *c = ctx;
  const int64_t xd[] = {c->batch, c->in}, yd[] = {c->batch};
  if (shard < 0 || shard >= n_shards) return SG_ERR_RANGE;
  mlp_data((int)step, shard * c->batch, c->batch, c->in, c->classes, c->x, c->y);
  sg_status st = sg_dist_set_input(d, "x", SG_F32, 2, xd, c->x);
  if (st == SG_OK) st = sg_dist_set_input(d, "y", SG_I64, 1, yd, c->y);
  if (st != SG_OK) return st;
  return sg_dist_set_input(d, "lr", SG_F32, 0, NULL, &c->lr);
}

sg_status mlp_reference(const mlp_cfg *c, int steps, float lr, float *losses, param_set *out) {
  memset(out, 0, sizeof *out);
  sg_graph *g = NULL;
  sg_session *s = NULL;
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sp.threads = 1;
  float *x = malloc((size_t)c->batch * (size_t)c->in * sizeof(float));
  int64_t *y = malloc((size_t)c->batch * sizeof(int64_t)), xd[] = {c->batch, c->in}, yd[] = {c->batch};
  sg_status st = x != NULL && y != NULL ? SG_OK : SG_ERR_NO_MEMORY;
  if (st == SG_OK) st = mlp_build(c, &g);
  if (st == SG_OK) st = sg_session_create(g, &sp, &s);
  if (st == SG_OK) st = sg_session_compile(s);
  for (int k = 0; k < steps && st == SG_OK; k++) {
    mlp_data(k, 0, c->batch, c->in, c->classes, x, y);
    st = sg_session_set_input(s, "x", SG_F32, 2, xd, x);
    if (st == SG_OK) st = sg_session_set_input(s, "y", SG_I64, 1, yd, y);
    if (st == SG_OK) st = sg_session_set_input(s, "lr", SG_F32, 0, NULL, &lr);
    if (st == SG_OK) st = sg_session_step(s);
    if (st == SG_OK && losses != NULL) st = sg_session_read(s, "loss", &losses[k], sizeof(float));
  }
  if (st == SG_OK) st = params_read(g, s, out);
  free(x);
  free(y);
  sg_session_destroy(s);
  sg_graph_destroy(g);
  return st;
}
