/* The CUDA backend on a GPU, against the CPU backend (oneDNN) on the same
 * graphs and values. Without a GPU it prints why and exits 77 (CTest's
 * SKIP_RETURN_CODE). scripts/gpu-check.sh runs it on a GPU machine.
 *
 *   test_cuda_gpu [--json] [--dump DIR] [--resnet-batch N] [--resnet-res N]
 *
 * 1. Per-op parity on ResNet-50's shapes (batch 8): each op (convolutions of
 *    every kind of block, batch norm, max pooling, global average pooling,
 *    the classifier, cross-entropy, a fused relu(x + y); and softmax,
 *    log_softmax, layer norm, a transpose, dropout, concat and slices, an embedding) in a graph of its
 *    own with loss sum(op(...) * r), r random; forward value and the
 *    gradient of every input, normwise: max|cuda - cpu| / max|cpu|, at most
 *    1e-5 in strict fp32 and 1e-3 with TF32 (SG_CUDA_TF32=1).
 * 2. Training: an MLP (SGD), the same MLP with LayerNorm and GELU written out
 *    (AdamW), and ResNet-50 (SGD, momentum 0.9; batch 32 at 224 x 224 by
 *    default), 5 steps on each device from the same values; every step's
 *    loss within 1e-4 relative, the parameters after the last step
 *    normwise within 1e-3 (ResNet: 5e-3; errors grow through 53 layers of
 *    batch norm).
 * 3. Deterministic mode (SG_CUDA_DETERMINISTIC=1): two runs of ResNet-50
 *    training end in bitwise equal parameters.
 * 4. A warm start: a second session of the same graph loads its kernels
 *    from the compile cache and runs NVRTC zero times.
 * 5. The VRAM tier of the global page table (SPEC A3, docs/gmem.md): an
 *    allocation written in DRAM, migrated to VRAM and back (same GVA, the
 *    version up by one each time, the bytes kept), written and read while in
 *    VRAM, one made in VRAM directly; VRAM has no host pointer.
 * With --dump DIR, ResNet-50's initial parameters and state, the batches
 * and the losses of both devices are written there (raw little-endian
 * arrays and manifest.json) for bench/cuda/torch_check.py, which trains
 * torchvision's ResNet-50 from the same values on the same GPU.
 *
 * The last line of stdout is a JSON object with every figure (--json). */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sgrt/sgrt.h>

#include "../../examples/resnet50/resnet50_model.h"

static int failures;
static FILE *json_items; /* the JSON object's members, collected */

#define CHECK(cond, ...)            \
  do {                              \
    if (!(cond)) {                  \
      printf("FAIL: " __VA_ARGS__); \
      printf("\n");                 \
      failures++;                   \
    }                               \
  } while (0)

static void die(const char *what, sg_status st) {
  printf("FAIL: %s: %s: %s\n", what, sg_status_str(st), sg_last_error());
  exit(1);
}
#define OK(call, what)              \
  do {                              \
    sg_status s_ = (call);          \
    if (s_ != SG_OK) die(what, s_); \
  } while (0)

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float uniform(float lo, float hi) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return lo + (hi - lo) * (float)((rng >> 40) & 0xffffff) / 16777216.0f;
}
static float *random_array(size_t n, float lo, float hi) {
  float *p = malloc(n * sizeof *p);
  for (size_t i = 0; i < n; i++) p[i] = uniform(lo, hi);
  return p;
}

static double normwise(const float *got, const float *want, size_t n) {
  double diff = 0, ref = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)got[i] - (double)want[i]), r = fabs((double)want[i]);
    if (!(d <= diff)) diff = d; /* NaN counts */
    if (r > ref) ref = r;
  }
  return ref > 0 ? diff / ref : diff;
}

static size_t numel(const sg_tensor_info *ti) {
  size_t n = 1;
  for (int i = 0; i < ti->ndim; i++) n *= (size_t)ti->dims[i];
  return n;
}

static sg_session *session(const sg_graph *g, const char *device) {
  sg_session_params p = sg_session_params_init();
  p.device = device;
  sg_session *s;
  OK(sg_session_create(g, &p, &s), device);
  OK(sg_session_compile(s), device);
  return s;
}

/* ---- 1. per-op parity ---------------------------------------------------------- */

typedef struct op_case {
  const char *name;
  /* 0 conv, 1 batch norm, 2 max pool, 3 global avg pool, 4 linear, 5 cross-entropy, 6 relu(x + y), 7 softmax
   * over axis 1 ([n, c] or [n, c, w]), 8 log_softmax, 9 layer norm over the last dim, 10 transpose (0 2 3 1),
   * 11 dropout (p = 0.3: the CPU's masks), 12 concat of x and z along axis 1 (its backward: slices), 13
   * embedding of ids [n, c] (repeated) into a table [k, w] */
  int kind;
  int64_t n, c, h, w, k, r, stride, pad;
} op_case;

static const op_case cases[] = {
    {"conv1 7x7/2 3->64 @224", 0, 8, 3, 224, 224, 64, 7, 2, 3},
    {"conv 3x3 64->64 @56", 0, 8, 64, 56, 56, 64, 3, 1, 1},
    {"conv 1x1 256->64 @56", 0, 8, 256, 56, 56, 64, 1, 1, 0},
    {"conv 3x3/2 128->128 @56", 0, 8, 128, 56, 56, 128, 3, 2, 1},
    {"downsample 1x1/2 512->1024 @28", 0, 8, 512, 28, 28, 1024, 1, 2, 0},
    {"conv 3x3 512->512 @7", 0, 8, 512, 7, 7, 512, 3, 1, 1},
    {"batch_norm 64 @56", 1, 8, 64, 56, 56, 0, 0, 0, 0},
    {"max_pool 3x3/2 64 @112", 2, 8, 64, 112, 112, 0, 3, 2, 1},
    {"global_avg_pool 2048 @7", 3, 8, 2048, 7, 7, 0, 0, 0, 0},
    {"fc 2048->1000", 4, 8, 2048, 1, 1, 1000, 0, 0, 0},
    {"cross_entropy 1000", 5, 8, 1000, 1, 1, 0, 0, 0, 0},
    {"relu(x + y) 256 @56", 6, 8, 256, 56, 56, 0, 0, 0, 0},
    {"softmax 1000", 7, 8, 1000, 1, 1, 0, 0, 0, 0},
    {"softmax over the middle axis 64 @7x7", 7, 8, 64, 1, 49, 0, 0, 0, 0},
    {"log_softmax 1000", 8, 8, 1000, 1, 1, 0, 0, 0, 0},
    {"layer_norm 768 x 8 x 196", 9, 8, 196, 1, 768, 0, 0, 0, 0},
    {"transpose NCHW->NHWC 256 @56", 10, 8, 256, 56, 56, 0, 0, 0, 0},
    {"dropout 0.3 256 @56", 11, 8, 256, 56, 56, 0, 0, 0, 0},
    {"concat 2 x 128 @28 (slices back)", 12, 8, 128, 28, 28, 0, 0, 0, 0},
    {"embedding 8 x 128 ids, 4096 x 768", 13, 8, 128, 1, 768, 4096, 0, 0, 0},
};

static sg_tensor param(sg_graph *g, const char *name, int nd, const int64_t *dims, float lo, float hi) {
  size_t n = 1;
  for (int i = 0; i < nd; i++) n *= (size_t)dims[i];
  float *v = random_array(n, lo, hi);
  sg_tensor t = sg_parameter(g, name, SG_F32, nd, dims, v);
  free(v);
  return t;
}

/* The case's graph: parameters, y = op(...), loss = sum(y * r) (or the
 * cross-entropy itself), backward, SGD at lr 0 (the gradients are the
 * point). Returns the names to compare in *names (y and the gradients). */
static sg_graph *case_graph(const op_case *c, const char **names, int *n_names) {
  sg_graph *g;
  OK(sg_graph_create(&g), "graph");
  int64_t x4[] = {c->n, c->c, c->h, c->w}, x2[] = {c->n, c->c};
  sg_tensor y = {-1}, loss;
  int n = 0;
  names[n++] = "y";
  switch (c->kind) {
    case 0: {
      int64_t wd[] = {c->k, c->c, c->r, c->r};
      sg_conv2d_params p = SG_CONV2D_PARAMS_INIT;
      p.stride[0] = p.stride[1] = c->stride;
      for (int i = 0; i < 4; i++) p.padding[i] = c->pad;
      y = sg_conv2d(g, param(g, "x", 4, x4, -1, 1), param(g, "w", 4, wd, -0.1f, 0.1f), SG_NO_TENSOR, &p);
      names[n++] = "x.grad", names[n++] = "w.grad";
      break;
    }
    case 1: {
      int64_t cd[] = {c->c};
      sg_tensor rm = sg_graph_add_tensor(g, "rm", SG_F32, SG_ROLE_STATE, 1, cd, NULL);
      float *ones = malloc((size_t)c->c * sizeof *ones);
      for (int64_t i = 0; i < c->c; i++) ones[i] = 1;
      sg_tensor rv = sg_graph_add_tensor(g, "rv", SG_F32, SG_ROLE_STATE, 1, cd, ones);
      free(ones);
      sg_batch_norm_params p = SG_BATCH_NORM_PARAMS_INIT;
      y = sg_batch_norm(g, param(g, "x", 4, x4, -2, 3), param(g, "gamma", 1, cd, 0.5f, 1.5f),
                        param(g, "beta", 1, cd, -0.5f, 0.5f), rm, rv, &p);
      names[n++] = "x.grad", names[n++] = "gamma.grad", names[n++] = "beta.grad", names[n++] = "rm",
      names[n++] = "rv";
      break;
    }
    case 2: {
      sg_pool2d_params p = SG_POOL2D_PARAMS_INIT;
      p.kernel[0] = p.kernel[1] = c->r;
      p.stride[0] = p.stride[1] = c->stride;
      for (int i = 0; i < 4; i++) p.padding[i] = c->pad;
      y = sg_max_pool2d(g, param(g, "x", 4, x4, -1, 1), &p);
      names[n++] = "x.grad";
      break;
    }
    case 3:
      y = sg_global_avg_pool(g, param(g, "x", 4, x4, -1, 1));
      names[n++] = "x.grad";
      break;
    case 4: {
      int64_t wd[] = {c->k, c->c}, bd[] = {c->k};
      y = sg_linear(g, param(g, "x", 2, x2, -1, 1), param(g, "w", 2, wd, -0.05f, 0.05f),
                    param(g, "b", 1, bd, -0.1f, 0.1f));
      names[n++] = "x.grad", names[n++] = "w.grad", names[n++] = "b.grad";
      break;
    }
    case 5: {
      int64_t ld[] = {c->n};
      y = sg_cross_entropy(g, param(g, "x", 2, x2, -4, 4), sg_input(g, "labels", SG_I64, 1, ld),
                           SG_REDUCTION_MEAN);
      names[n++] = "x.grad";
      break;
    }
    case 6:
      y = sg_relu(g, sg_add(g, param(g, "x", 4, x4, -1, 1), param(g, "z", 4, x4, -1, 1)));
      names[n++] = "x.grad", names[n++] = "z.grad";
      break;
    case 7:
    case 8: { /* [n, c, w] over axis 1 (h = 1: [n, c], the last) */
      int64_t x3[] = {c->n, c->c, c->w};
      sg_tensor x = c->w > 1 ? param(g, "x", 3, x3, -4, 4) : param(g, "x", 2, x2, -4, 4);
      y = c->kind == 7 ? sg_softmax(g, x, 1) : sg_log_softmax(g, x, 1);
      names[n++] = "x.grad";
      break;
    }
    case 9: { /* [n, c, w] normalised over w */
      int64_t x3[] = {c->n, c->c, c->w}, wd[] = {c->w};
      y = sg_layer_norm(g, param(g, "x", 3, x3, -2, 3), param(g, "scale", 1, wd, 0.5f, 1.5f),
                        param(g, "bias", 1, wd, -0.5f, 0.5f), -1, 1e-5);
      names[n++] = "x.grad", names[n++] = "scale.grad", names[n++] = "bias.grad";
      break;
    }
    case 11:
      y = sg_dropout(g, param(g, "x", 4, x4, -1, 1), 0.3, 11, 1);
      names[n++] = "x.grad";
      break;
    case 12: {
      sg_tensor two[] = {param(g, "x", 4, x4, -1, 1), param(g, "z", 4, x4, -1, 1)};
      y = sg_concat(g, 2, two, 1);
      names[n++] = "x.grad", names[n++] = "z.grad";
      break;
    }
    case 13: {
      int64_t td[] = {c->k, c->w};
      y = sg_embedding(g, param(g, "wte", 2, td, -1, 1), sg_input(g, "ids", SG_I64, 2, x2));
      names[n++] = "wte.grad";
      break;
    }
    default: {
      int64_t perm[] = {0, 2, 3, 1};
      y = sg_transpose(g, param(g, "x", 4, x4, -1, 1), 4, perm);
      names[n++] = "x.grad";
      break;
    }
  }
  OK(sg_tensor_set_name(g, y, "y"), "name y");
  if (c->kind == 5) {
    loss = y;
  } else {
    sg_tensor_info ti;
    OK(sg_graph_tensor_info(g, y, &ti), "info");
    loss = sg_reduce_sum(g, sg_mul(g, y, sg_input(g, "r", SG_F32, ti.ndim, ti.dims)), 0, NULL, 0);
  }
  OK(sg_graph_mark_output(g, y), "output y");
  OK(sg_graph_backward(g, loss), "backward");
  sg_sgd_params sgd = SG_SGD_PARAMS_INIT;
  OK(sg_graph_add_sgd(g, sg_input(g, "lr", SG_F32, 0, NULL), &sgd), "sgd");
  for (int i = 1; i < n; i++) {
    sg_tensor t;
    OK(sg_graph_find_tensor(g, names[i], &t), names[i]);
    OK(sg_graph_mark_output(g, t), names[i]);
  }
  OK(sg_graph_finalize(g), "finalize");
  *n_names = n;
  return g;
}

/* Sets the case's inputs (r, labels, lr) on s, the same on every device. */
static void case_inputs(const sg_graph *g, sg_session *s, const op_case *c) {
  float lr = 0;
  OK(sg_session_set_input(s, "lr", SG_F32, 0, NULL, &lr), "lr");
  sg_tensor t;
  if (sg_graph_find_tensor(g, "r", &t) == SG_OK) {
    sg_tensor_info ti;
    OK(sg_graph_tensor_info(g, t, &ti), "r");
    uint64_t keep = rng;
    rng = 12345;
    float *r = random_array(numel(&ti), -1, 1);
    rng = keep;
    OK(sg_session_set_input(s, "r", SG_F32, ti.ndim, ti.dims, r), "r");
    free(r);
  }
  if (c->kind == 5) {
    int64_t *l = malloc((size_t)c->n * sizeof *l), d[] = {c->n};
    for (int64_t i = 0; i < c->n; i++) l[i] = (i * 379) % c->c;
    OK(sg_session_set_input(s, "labels", SG_I64, 1, d, l), "labels");
    free(l);
  }
  if (c->kind == 13) { /* 1024 ids among the table's first 256 rows: each 4 times */
    int64_t *ids = malloc((size_t)(c->n * c->c) * sizeof *ids), d[] = {c->n, c->c};
    for (int64_t i = 0; i < c->n * c->c; i++) ids[i] = (i * 379) % (c->k / 16);
    OK(sg_session_set_input(s, "ids", SG_I64, 2, d, ids), "ids");
    free(ids);
  }
}

static void parity(bool tf32) {
  setenv("SG_CUDA_TF32", tf32 ? "1" : "0", 1);
  const double tol = tf32 ? 1e-3 : 1e-5;
  double worst = 0;
  fprintf(json_items, "\"parity_%s\":[", tf32 ? "tf32" : "fp32");
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const char *names[8];
    int n;
    sg_graph *g = case_graph(&cases[i], names, &n);
    sg_session *cpu = session(g, "cpu"), *gpu = session(g, "cuda");
    case_inputs(g, cpu, &cases[i]);
    case_inputs(g, gpu, &cases[i]);
    OK(sg_session_step(cpu), "cpu step");
    OK(sg_session_step(gpu), "cuda step");
    double err = 0;
    for (int j = 0; j < n; j++) {
      sg_tensor t;
      sg_tensor_info ti;
      OK(sg_graph_find_tensor(g, names[j], &t), names[j]);
      OK(sg_graph_tensor_info(g, t, &ti), names[j]);
      size_t m = numel(&ti);
      float *a = malloc(m * 4), *b = malloc(m * 4);
      OK(sg_session_read(cpu, names[j], a, m * 4), names[j]);
      OK(sg_session_read(gpu, names[j], b, m * 4), names[j]);
      double e = normwise(b, a, m);
      CHECK(e <= tol, "%s %s: %s differs by %.3g (normwise; limit %g)", cases[i].name, tf32 ? "TF32" : "fp32",
            names[j], e, tol);
      if (!(e <= err)) err = e;
      free(a), free(b);
    }
    printf("parity %-32s %s: %.3g\n", cases[i].name, tf32 ? "tf32" : "fp32", err);
    fprintf(json_items, "%s{\"op\":\"%s\",\"error\":%.4g}", i ? "," : "", cases[i].name, err);
    if (!(err <= worst)) worst = err;
    sg_session_destroy(cpu), sg_session_destroy(gpu);
    sg_graph_destroy(g);
  }
  fprintf(json_items, "],\"parity_%s_worst\":%.4g,", tf32 ? "tf32" : "fp32", worst);
  setenv("SG_CUDA_TF32", "0", 1);
}

/* ---- 2. training ------------------------------------------------------------------ */

enum { STEPS = 5 };

static sg_graph *mlp_graph(bool decomposed) {
  sg_graph *g;
  OK(sg_graph_create(&g), "graph");
  enum { B = 64, F = 256, H = 512, C = 10 };
  int64_t xs[] = {B, F}, ys[] = {B}, last = -1;
  sg_tensor x = sg_input(g, "x", SG_F32, 2, xs), y = sg_input(g, "y", SG_I64, 1, ys);
  sg_tensor lr = sg_input(g, "lr", SG_F32, 0, NULL);
  int64_t w1[] = {H, F}, b1[] = {H}, w2[] = {C, H};
  sg_tensor h = sg_linear(g, x, param(g, "w1", 2, w1, -0.06f, 0.06f), param(g, "b1", 1, b1, -0.1f, 0.1f)), r;
  if (decomposed) {
    sg_tensor mean = sg_reduce_mean(g, h, 1, &last, 1), d = sg_sub(g, h, mean);
    sg_tensor var = sg_reduce_mean(g, sg_mul(g, d, d), 1, &last, 1);
    sg_tensor nrm = sg_div(g, d, sg_sqrt(g, sg_add_scalar(g, var, 1e-5)));
    r = sg_mul(g, sg_mul_scalar(g, nrm, 0.5),
               sg_add_scalar(g, sg_erf(g, sg_mul_scalar(g, nrm, M_SQRT1_2)), 1.0));
  } else {
    r = sg_relu(g, h);
  }
  sg_tensor loss = sg_cross_entropy(g, sg_linear(g, r, param(g, "w2", 2, w2, -0.04f, 0.04f), SG_NO_TENSOR), y,
                                    SG_REDUCTION_MEAN);
  OK(sg_tensor_set_name(g, loss, "loss"), "loss");
  OK(sg_graph_mark_output(g, loss), "loss");
  OK(sg_graph_backward(g, loss), "backward");
  if (decomposed) {
    sg_adamw_params p = SG_ADAMW_PARAMS_INIT;
    OK(sg_graph_add_adamw(g, lr, &p), "adamw");
  } else {
    sg_sgd_params p = SG_SGD_PARAMS_INIT;
    p.momentum = 0.9;
    OK(sg_graph_add_sgd(g, lr, &p), "sgd");
  }
  OK(sg_graph_finalize(g), "finalize");
  return g;
}

/* One run's data: `steps` batches of the graph's x/images and labels. */
typedef struct batches {
  const char *xname, *yname;
  int nd;
  int64_t dims[4], n;
  int64_t classes;
  float *x;
  int64_t *y;
  float lr;
} batches;

static void make_batches(batches *b, const sg_graph *g, const char *xname, const char *yname, int64_t classes,
                         float lr) {
  sg_tensor t;
  sg_tensor_info ti;
  OK(sg_graph_find_tensor(g, xname, &t), xname);
  OK(sg_graph_tensor_info(g, t, &ti), xname);
  b->xname = xname, b->yname = yname, b->nd = ti.ndim, b->classes = classes, b->lr = lr;
  memcpy(b->dims, ti.dims, (size_t)ti.ndim * sizeof *ti.dims);
  b->n = (int64_t)numel(&ti);
  b->x = random_array((size_t)b->n * STEPS, -1, 1);
  b->y = malloc((size_t)ti.dims[0] * STEPS * sizeof *b->y);
  for (int64_t i = 0; i < ti.dims[0] * STEPS; i++) b->y[i] = (i * 7919) % classes;
}

static void run_steps(sg_session *s, const batches *b, float *losses) {
  for (int i = 0; i < STEPS; i++) {
    OK(sg_session_set_input(s, b->xname, SG_F32, b->nd, b->dims, b->x + (size_t)i * (size_t)b->n), "x");
    OK(sg_session_set_input(s, b->yname, SG_I64, 1, b->dims, b->y + i * b->dims[0]), "labels");
    OK(sg_session_set_input(s, "lr", SG_F32, 0, NULL, &b->lr), "lr");
    OK(sg_session_step(s), "step");
    OK(sg_session_read(s, "loss", &losses[i], sizeof losses[i]), "loss");
  }
}

/* The parameters and state of g as one array, in tensor order. */
static float *all_params(const sg_graph *g, sg_session *s, size_t *count) {
  size_t n = 0;
  for (int32_t t = 0; t < sg_graph_num_tensors(g); t++) {
    sg_tensor_info ti;
    OK(sg_graph_tensor_info(g, (sg_tensor){t}, &ti), "info");
    if ((ti.role == SG_ROLE_PARAMETER || ti.role == SG_ROLE_STATE) && ti.dtype == SG_F32) n += numel(&ti);
  }
  float *p = malloc(n * 4), *at = p;
  for (int32_t t = 0; t < sg_graph_num_tensors(g); t++) {
    sg_tensor_info ti;
    OK(sg_graph_tensor_info(g, (sg_tensor){t}, &ti), "info");
    if ((ti.role != SG_ROLE_PARAMETER && ti.role != SG_ROLE_STATE) || ti.dtype != SG_F32) continue;
    OK(sg_session_read(s, ti.name, at, numel(&ti) * 4), ti.name);
    at += numel(&ti);
  }
  *count = n;
  return p;
}

static void train_compare(const char *what, const sg_graph *g, const batches *b, bool resnet, uint64_t seed,
                          double param_tol, float *cuda_losses_out) {
  float lc[STEPS], lg[STEPS];
  sg_session *cpu = session(g, "cpu"), *gpu = session(g, "cuda");
  if (resnet) {
    OK(resnet50_init_session(g, cpu, seed), "init");
    OK(resnet50_init_session(g, gpu, seed), "init");
  }
  run_steps(cpu, b, lc);
  run_steps(gpu, b, lg);
  double worst = 0;
  for (int i = 0; i < STEPS; i++) {
    double e = fabs((double)lg[i] - lc[i]) / fabs((double)lc[i]);
    CHECK(e <= 1e-4, "%s step %d: loss %.7g on cuda, %.7g on cpu (%.3g relative)", what, i, lg[i], lc[i], e);
    if (!(e <= worst)) worst = e;
  }
  size_t n;
  float *pc = all_params(g, cpu, &n), *pg = all_params(g, gpu, &n);
  double pe = normwise(pg, pc, n);
  CHECK(pe <= param_tol, "%s: parameters after %d steps differ by %.3g (limit %g)", what, STEPS, pe,
        param_tol);
  printf("train %-40s losses cuda %.6f..%.6f cpu %.6f..%.6f, worst %.3g, params %.3g\n", what, lg[0],
         lg[STEPS - 1], lc[0], lc[STEPS - 1], worst, pe);
  fprintf(json_items, "\"train_%s\":{\"loss_error\":%.4g,\"param_error\":%.4g,\"cuda_losses\":[", what, worst,
          pe);
  for (int i = 0; i < STEPS; i++) fprintf(json_items, "%s%.8g", i ? "," : "", lg[i]);
  fprintf(json_items, "],\"cpu_losses\":[");
  for (int i = 0; i < STEPS; i++) fprintf(json_items, "%s%.8g", i ? "," : "", lc[i]);
  fprintf(json_items, "]},");
  if (cuda_losses_out) memcpy(cuda_losses_out, lg, sizeof lg);
  free(pc), free(pg);
  sg_session_destroy(cpu), sg_session_destroy(gpu);
}

/* ---- 3. determinism and 4. warm start ----------------------------------------- */

static void deterministic(const sg_graph *g, const batches *b) {
  setenv("SG_CUDA_DETERMINISTIC", "1", 1);
  float *p[2];
  size_t n = 0;
  for (int r = 0; r < 2; r++) {
    float l[STEPS];
    sg_session *s = session(g, "cuda");
    OK(resnet50_init_session(g, s, 7), "init");
    run_steps(s, b, l);
    p[r] = all_params(g, s, &n);
    sg_session_destroy(s);
  }
  bool same = memcmp(p[0], p[1], n * 4) == 0;
  CHECK(same, "deterministic mode: two runs of ResNet-50 differ");
  printf("deterministic: two runs %s\n", same ? "bitwise equal" : "DIFFER");
  fprintf(json_items, "\"deterministic_bitwise_equal\":%s,", same ? "true" : "false");
  free(p[0]), free(p[1]);
  setenv("SG_CUDA_DETERMINISTIC", "0", 1);
}

static void warm_start(const sg_graph *g) {
  sg_compile_report r[2];
  for (int i = 0; i < 2; i++) {
    sg_session *s = session(g, "cuda");
    OK(sg_session_compile_report(s, &r[i]), "report");
    sg_session_destroy(s);
  }
  CHECK(r[1].compiler_invocations == 0, "warm start ran NVRTC %u times", r[1].compiler_invocations);
  printf("warm start: cold %.2f s (%u NVRTC runs), warm %.2f s (%u NVRTC runs, %u cache hits)\n",
         r[0].compile_seconds, r[0].compiler_invocations, r[1].compile_seconds, r[1].compiler_invocations,
         r[1].cache_hits);
  fprintf(json_items, "\"cold_compile_s\":%.3f,\"warm_compile_s\":%.3f,\"warm_nvrtc_runs\":%u,",
          r[0].compile_seconds, r[1].compile_seconds, r[1].compiler_invocations);
}

/* ---- the dump for PyTorch --------------------------------------------------------- */

static void write_raw(const char *dir, const char *name, const void *p, size_t bytes) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.bin", dir, name);
  FILE *f = fopen(path, "wb");
  if (f == NULL || fwrite(p, 1, bytes, f) != bytes) die(path, SG_ERR_IO);
  fclose(f);
}

static void dump(const char *dir, const sg_graph *g, const batches *b, const float *cuda_losses) {
  mkdir(dir, 0755);
  sg_session *s = session(g, "cpu");
  OK(resnet50_init_session(g, s, 7), "init");
  char path[4096];
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  FILE *m = fopen(path, "w");
  fprintf(m, "{\"steps\":%d,\"lr\":%.9g,\"images\":[%lld,%lld,%lld,%lld],\"classes\":%lld,\"tensors\":[",
          STEPS, (double)b->lr, (long long)b->dims[0], (long long)b->dims[1], (long long)b->dims[2],
          (long long)b->dims[3], (long long)b->classes);
  int first = 1;
  for (int32_t t = 0; t < sg_graph_num_tensors(g); t++) {
    sg_tensor_info ti;
    OK(sg_graph_tensor_info(g, (sg_tensor){t}, &ti), "info");
    if ((ti.role != SG_ROLE_PARAMETER && ti.role != SG_ROLE_STATE) || ti.dtype != SG_F32) continue;
    size_t n = numel(&ti);
    float *v = malloc(n * 4);
    OK(sg_session_read(s, ti.name, v, n * 4), ti.name);
    write_raw(dir, ti.name, v, n * 4);
    free(v);
    fprintf(m, "%s{\"name\":\"%s\",\"shape\":[", first ? "" : ",", ti.name);
    for (int i = 0; i < ti.ndim; i++) fprintf(m, "%s%lld", i ? "," : "", (long long)ti.dims[i]);
    fprintf(m, "]}");
    first = 0;
  }
  fprintf(m, "],\"sgrt_cuda_losses\":[");
  for (int i = 0; i < STEPS; i++) fprintf(m, "%s%.9g", i ? "," : "", cuda_losses[i]);
  fprintf(m, "]}\n");
  fclose(m);
  write_raw(dir, "images", b->x, (size_t)b->n * STEPS * 4);
  write_raw(dir, "labels", b->y, (size_t)b->dims[0] * STEPS * 8);
  sg_session_destroy(s);
}

/* The VRAM tier (item 5): a page table of one node with DRAM and 64 MiB of VRAM on cuda:0. */
static void vram_tier(void) {
  sg_gmem_params p = SG_GMEM_PARAMS_INIT;
  p.vram_bytes = (size_t)64 << 20;
  sg_gmem *gm = NULL;
  OK(sg_gmem_create(NULL, &p, &gm), "sg_gmem_create with VRAM");
  enum { BYTES = 3 * 4096 + 100 };
  static unsigned char data[BYTES], got[BYTES];
  for (size_t i = 0; i < BYTES; i++) data[i] = (unsigned char)(i * 131u + 7u);
  sg_gva a, v;
  OK(sg_gmem_alloc(gm, SG_GMEM_DRAM, BYTES, SG_GMEM_READ | SG_GMEM_WRITE, &a), "alloc in DRAM");
  OK(sg_gmem_write(gm, a, data, BYTES, NULL), "write in DRAM");
  sg_gmem_loc before, after;
  OK(sg_gmem_translate(gm, a, SG_GMEM_READ, &before), "translate");
  OK(sg_gmem_migrate(gm, a, SG_GMEM_VRAM), "migrate to VRAM");
  OK(sg_gmem_translate(gm, a, SG_GMEM_READ, &after), "translate");
  bool ok = after.tier == SG_GMEM_VRAM && after.ptr == NULL && after.version == before.version + 1;
  memset(got, 0, BYTES);
  OK(sg_gmem_read(gm, a, got, BYTES, NULL), "read in VRAM");
  ok = ok && memcmp(got, data, BYTES) == 0;
  void *ptr = NULL;
  sg_status st = sg_gmem_ptr(gm, a, 8, SG_GMEM_READ, &ptr);
  ok = ok && st == SG_ERR_UNSUPPORTED && strstr(sg_last_error(), "VRAM") != NULL;
  for (size_t i = 0; i < BYTES; i++) data[i] ^= 0x5a;
  OK(sg_gmem_write(gm, a, data, BYTES, NULL), "write in VRAM");
  OK(sg_gmem_migrate(gm, a, SG_GMEM_DRAM), "migrate back to DRAM");
  OK(sg_gmem_translate(gm, a, SG_GMEM_READ, &after), "translate");
  ok = ok && after.tier == SG_GMEM_DRAM && after.ptr != NULL;
  memset(got, 0, BYTES);
  OK(sg_gmem_read(gm, a, got, BYTES, NULL), "read in DRAM");
  ok = ok && memcmp(got, data, BYTES) == 0;
  OK(sg_gmem_alloc(gm, SG_GMEM_VRAM, BYTES, SG_GMEM_READ | SG_GMEM_WRITE, &v), "alloc in VRAM");
  memset(got, 1, BYTES);
  OK(sg_gmem_read(gm, v, got, BYTES, NULL), "read a new VRAM allocation");
  bool zero = true;
  for (size_t i = 0; i < BYTES; i++) zero = zero && got[i] == 0;
  OK(sg_gmem_write(gm, v, data, BYTES, NULL), "write in VRAM");
  OK(sg_gmem_read(gm, v, got, BYTES, NULL), "read in VRAM");
  ok = ok && zero && memcmp(got, data, BYTES) == 0;
  OK(sg_gmem_free(gm, v), "free in VRAM");
  OK(sg_gmem_free(gm, a), "free");
  OK(sg_gmem_destroy(gm), "sg_gmem_destroy");
  CHECK(ok, "the VRAM tier lost or misplaced bytes, or kept a host pointer");
  fprintf(json_items, "\"vram_tier_ok\":%s,", ok ? "true" : "false");
}

int main(int argc, char **argv) {
  int json = 0;
  const char *dump_dir = NULL;
  long batch = 32, res = 224;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) json = 1;
    else if (strcmp(argv[i], "--dump") == 0 && i + 1 < argc) dump_dir = argv[++i];
    else if (strcmp(argv[i], "--resnet-batch") == 0 && i + 1 < argc) batch = strtol(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--resnet-res") == 0 && i + 1 < argc) res = strtol(argv[++i], NULL, 10);
    else {
      fprintf(stderr, "usage: test_cuda_gpu [--json] [--dump DIR] [--resnet-batch N] [--resnet-res N]\n");
      return 2;
    }
  }
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    printf("no GPU (%s): skipped\n", e != cudaSuccess ? cudaGetErrorName(e) : "no device");
    return 77;
  }
  {
    /* What CUDA cannot honour is refused: poisoning dead slots from the host. */
    sg_graph *g = mlp_graph(false);
    sg_session_params p = sg_session_params_init();
    p.device = "cuda";
    p.poison = 1;
    sg_session *s = NULL;
    sg_status st = sg_session_create(g, &p, &s);
    CHECK(st == SG_ERR_UNSUPPORTED && strstr(sg_last_error(), "poison") != NULL, "poison on cuda: %s: %s",
          sg_status_str(st), sg_last_error());
    sg_session_destroy(s);
    sg_graph_destroy(g);
  }
  {
    /* Fused attention has no CUDA kernel: compile refuses it, naming the op and the way out. */
    sg_graph *g;
    OK(sg_graph_create(&g), "graph");
    const int64_t dims[] = {2, 8, 16};
    sg_tensor q = sg_input(g, "q", SG_F32, 3, dims);
    sg_graph_mark_output(g, sg_attention(g, q, q, q, 0, 1));
    OK(sg_graph_finalize(g), "attention graph");
    sg_session_params p = sg_session_params_init();
    p.device = "cuda";
    sg_session *s = NULL;
    sg_status st = sg_session_create(g, &p, &s);
    if (st == SG_OK) st = sg_session_compile(s);
    CHECK(st == SG_ERR_UNSUPPORTED && strstr(sg_last_error(), "attention") != NULL &&
              strstr(sg_last_error(), "fused attention runs on the CPU backend") != NULL,
          "attention on cuda: %s: %s", sg_status_str(st), sg_last_error());
    sg_session_destroy(s);
    sg_graph_destroy(g);
  }
  char *items = NULL;
  size_t items_len = 0;
  json_items = open_memstream(&items, &items_len);
  parity(false);
  parity(true);

  sg_graph *mlp = mlp_graph(false), *mlp_dec = mlp_graph(true);
  batches bm, bd;
  make_batches(&bm, mlp, "x", "y", 10, 0.05f);
  make_batches(&bd, mlp_dec, "x", "y", 10, 1e-3f);
  train_compare("mlp_sgd", mlp, &bm, false, 0, 1e-3, NULL);
  train_compare("mlp_layernorm_gelu_adamw", mlp_dec, &bd, false, 0, 1e-3, NULL);
  warm_start(mlp_dec);

  resnet50_config cfg = RESNET50_CONFIG_INIT;
  cfg.batch = batch, cfg.image_size = res, cfg.classes = 10;
  sg_graph *rn;
  OK(resnet50_build_training(&cfg, "sgd", 0, &rn), "resnet50");
  batches br;
  make_batches(&br, rn, "images", "labels", 10, 0.02f);
  float rl[STEPS];
  train_compare("resnet50_sgd", rn, &br, true, 7, 5e-3, rl);
  deterministic(rn, &br);
  vram_tier();
  if (dump_dir) dump(dump_dir, rn, &br, rl);

  fclose(json_items);
  printf("%s: %d failure%s\n", failures ? "FAILED" : "passed", failures, failures == 1 ? "" : "s");
  if (json) printf("{\"test\":\"test_cuda_gpu\",%s\"failures\":%d}\n", items, failures);
  free(items);
  sg_graph_destroy(mlp), sg_graph_destroy(mlp_dec), sg_graph_destroy(rn);
  return failures ? 1 : 0;
}
