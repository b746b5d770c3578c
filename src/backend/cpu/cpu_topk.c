/* topk and topk_backward (f32), one row of the last axis at a time.
 *
 * The forward keeps the k best elements seen so far in a binary heap whose
 * root is the worst of them (O(n log k) per row, whatever the order of x),
 * then sorts them best first by popping the worst to the back. "Best":
 * larger (smaller with largest 0) first, NaN above every number (as
 * torch.topk), and of equal values the lower index first (as ONNX). The workspace
 * holds one row's heap.
 *
 * The backward zeroes dx and adds each dy element at the position its
 * index names; an index outside the row is SG_ERR_RANGE (a graph file may
 * feed topk_backward any i64 tensor). */
#include <math.h>
#include <stdint.h>

#include "backend/cpu/cpu_internal.h"

typedef struct topk_kernel {
  sg__kernel base;
  int64_t rows, n, k;
  bool largest;
} topk_kernel;

typedef struct entry {
  float v;
  int64_t i;
} entry;

/* Whether a ranks before b: NaN is above every number, so first when largest and last when not. */
static inline bool before(const entry *a, const entry *b, bool largest) {
  bool an = isnan(a->v), bn = isnan(b->v);
  if (an != bn) return an == largest;
  if (!an && a->v != b->v) return largest ? a->v > b->v : a->v < b->v;
  return a->i < b->i;
}

/* Restores the heap (root: the entry ranked last) below position at. */
static void sift_down(entry *h, int64_t size, int64_t at, bool largest) {
  for (;;) {
    int64_t l = 2 * at + 1, r = l + 1, worst = at;
    if (l < size && before(&h[worst], &h[l], largest)) worst = l;
    if (r < size && before(&h[worst], &h[r], largest)) worst = r;
    if (worst == at) return;
    entry t = h[at];
    h[at] = h[worst];
    h[worst] = t;
    at = worst;
  }
}

static void sift_up(entry *h, int64_t at, bool largest) {
  while (at > 0) {
    int64_t up = (at - 1) / 2;
    if (!before(&h[up], &h[at], largest)) return;
    entry t = h[at];
    h[at] = h[up];
    h[up] = t;
    at = up;
  }
}

static sg_status topk_run(sg__cpu_state *st, sg__kernel *base, void *const *in, void *const *out,
                          const sg__run_ctx *ctx) {
  (void)ctx;
  const topk_kernel *k = (const topk_kernel *)base;
  const float *x = in[0];
  float *values = out[0];
  int64_t *indices = out[1];
  entry *h = (entry *)(void *)st->ws;
  for (int64_t r = 0; r < k->rows; r++) {
    const float *xr = x + r * k->n;
    int64_t size = 0;
    for (int64_t i = 0; i < k->n; i++) {
      entry e = {xr[i], i};
      if (size < k->k) {
        h[size] = e;
        sift_up(h, size++, k->largest);
      } else if (before(&e, &h[0], k->largest)) {
        h[0] = e;
        sift_down(h, size, 0, k->largest);
      }
    }
    for (int64_t last = size - 1; last > 0; last--) { /* the worst to the back, best first */
      entry t = h[0];
      h[0] = h[last];
      h[last] = t;
      sift_down(h, last, 0, k->largest);
    }
    for (int64_t j = 0; j < k->k; j++) {
      values[r * k->k + j] = h[j].v;
      indices[r * k->k + j] = h[j].i;
    }
  }
  return SG_OK;
}

/* Inputs dy, indices; output dx. */
static sg_status topk_backward_run(sg__cpu_state *st, sg__kernel *base, void *const *in, void *const *out,
                                   const sg__run_ctx *ctx) {
  (void)st;
  (void)ctx;
  const topk_kernel *k = (const topk_kernel *)base;
  const float *dy = in[0];
  const int64_t *idx = in[1];
  float *dx = out[0];
  for (int64_t i = 0; i < k->rows * k->n; i++) dx[i] = 0.0f;
  for (int64_t r = 0; r < k->rows; r++)
    for (int64_t j = 0; j < k->k; j++) {
      int64_t i = idx[r * k->k + j];
      if (i < 0 || i >= k->n)
        return sg__error(SG_ERR_RANGE, "%s '%s': index %lld of row %lld is outside 0..%lld",
                         sg_op_kind_name(base->kind), base->name, (long long)i, (long long)r,
                         (long long)(k->n - 1));
      dx[r * k->n + i] += dy[r * k->k + j];
    }
  return SG_OK;
}

sg_status sg__cpu_create_topk(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                              sg__kernel **out) {
  (void)mode;
  bool backward = op->kind == SG_OP_TOPK_BACKWARD;
  const sg__tensor *x = backward ? sg__cpu_out(g, op, 0) : sg__cpu_in(g, op, 0),
                   *y = backward ? sg__cpu_in(g, op, 0) : sg__cpu_out(g, op, 0);
  if (x->dtype != SG_F32) return sg__cpu_unsupported(g, op, " (takes f32)");
  sg__kernel *kb;
  SG_CHECK(sg__cpu_kernel_new(op, sizeof(topk_kernel), backward ? topk_backward_run : topk_run, &kb));
  topk_kernel *k = (topk_kernel *)kb;
  k->n = x->dims[x->ndim - 1];
  k->k = y->dims[y->ndim - 1];
  k->rows = k->n > 0 ? sg__cpu_numel(x) / k->n : 0;
  k->largest = backward || sg__attr_i(op, 1) != 0;
  if (!backward) {
    sg_status ws = sg__cpu_ws_reserve(st, sizeof(entry) * (size_t)k->k);
    if (ws != SG_OK) {
      sg__free(kb);
      return ws;
    }
  }
  *out = kb;
  return SG_OK;
}
