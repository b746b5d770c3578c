/* avg_pool2d and avg_pool2d_backward in C for the one case oneDNN's pooling
 * does not express (dnnl_pool.c): count_include_pad with a ceil_mode window
 * that hangs past the bottom/right padding. PyTorch divides such a window by
 * its part inside input + padding:
 *   h0 = oh*s - top, h1 = min(h0 + k, H + bottom), size = (h1-h0)(w1-w0),
 * then clips [h0, h1) to the input for the sum. */
#include "backend/cpu/cpu_internal.h"

enum { KERNEL, STRIDE, PADDING, CEIL_MODE, COUNT_INCLUDE_PAD, INPUT_SHAPE };

typedef struct avgpool_kernel {
  sg__kernel base;
  int64_t N, C, H, W, OH, OW;
  int64_t k[2], s[2], pad[4];
} avgpool_kernel;

/* The window of output (oh, ow): clipped bounds and divisor. */
static void window(const avgpool_kernel *k, int64_t oh, int64_t ow, int64_t *h0, int64_t *h1, int64_t *w0,
                   int64_t *w1, float *inv) {
  int64_t hs = oh * k->s[0] - k->pad[0], ws = ow * k->s[1] - k->pad[1];
  int64_t he = hs + k->k[0], we = ws + k->k[1];
  if (he > k->H + k->pad[2]) he = k->H + k->pad[2];
  if (we > k->W + k->pad[3]) we = k->W + k->pad[3];
  *inv = 1.0f / (float)((he - hs) * (we - ws));
  *h0 = hs < 0 ? 0 : hs;
  *w0 = ws < 0 ? 0 : ws;
  *h1 = he > k->H ? k->H : he;
  *w1 = we > k->W ? k->W : we;
}

static sg_status avgpool_forward(sg__cpu_state *st, sg__kernel *base, void *const *in, void *const *out,
                                 const sg__run_ctx *ctx) {
  (void)st;
  (void)ctx;
  const avgpool_kernel *k = (const avgpool_kernel *)base;
  for (int64_t nc = 0; nc < k->N * k->C; nc++) {
    const float *x = (const float *)in[0] + nc * k->H * k->W;
    float *y = (float *)out[0] + nc * k->OH * k->OW;
    for (int64_t oh = 0; oh < k->OH; oh++)
      for (int64_t ow = 0; ow < k->OW; ow++) {
        int64_t h0, h1, w0, w1;
        float inv;
        window(k, oh, ow, &h0, &h1, &w0, &w1, &inv);
        float sum = 0;
        for (int64_t h = h0; h < h1; h++)
          for (int64_t w = w0; w < w1; w++) sum += x[h * k->W + w];
        y[oh * k->OW + ow] = sum * inv;
      }
  }
  return SG_OK;
}

static sg_status avgpool_backward(sg__cpu_state *st, sg__kernel *base, void *const *in, void *const *out,
                                  const sg__run_ctx *ctx) {
  (void)st;
  (void)ctx;
  const avgpool_kernel *k = (const avgpool_kernel *)base;
  for (int64_t nc = 0; nc < k->N * k->C; nc++) {
    const float *dy = (const float *)in[0] + nc * k->OH * k->OW;
    float *dx = (float *)out[0] + nc * k->H * k->W;
    for (int64_t i = 0; i < k->H * k->W; i++) dx[i] = 0;
    for (int64_t oh = 0; oh < k->OH; oh++)
      for (int64_t ow = 0; ow < k->OW; ow++) {
        int64_t h0, h1, w0, w1;
        float inv;
        window(k, oh, ow, &h0, &h1, &w0, &w1, &inv);
        float g = dy[oh * k->OW + ow] * inv;
        for (int64_t h = h0; h < h1; h++)
          for (int64_t w = w0; w < w1; w++) dx[h * k->W + w] += g;
      }
  }
  return SG_OK;
}

sg_status sg__cpu_create_pool_c(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                                sg__kernel **out) {
  (void)st;
  (void)mode;
  bool fwd = op->kind == SG_OP_AVG_POOL2D;
  const sg__tensor *a = sg__cpu_in(g, op, 0), *y = sg__cpu_out(g, op, 0);
  if (a->dtype != SG_F32) return sg__cpu_unsupported(g, op, " (takes f32)");
  const sg__tensor *x = fwd ? a : y, *py = fwd ? y : a;
  sg__kernel *kb;
  SG_CHECK(sg__cpu_kernel_new(op, sizeof(avgpool_kernel), fwd ? avgpool_forward : avgpool_backward, &kb));
  avgpool_kernel *k = (avgpool_kernel *)kb;
  k->N = x->dims[0], k->C = x->dims[1], k->H = x->dims[2], k->W = x->dims[3];
  k->OH = py->dims[2], k->OW = py->dims[3];
  for (int i = 0; i < 2; i++) {
    k->k[i] = sg__attr_ints(op, KERNEL)[i];
    k->s[i] = sg__attr_ints(op, STRIDE)[i];
  }
  for (int i = 0; i < 4; i++) k->pad[i] = sg__attr_ints(op, PADDING)[i];
  *out = kb;
  return SG_OK;
}
