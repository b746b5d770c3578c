/* sgrt's own CUDA kernels as text (cuda_kernels.h): a prelude of shared
 * helpers, then cross entropy, softmax, layer norm, dropout, sums and
 * embedding. Definitions are the CPU backend's (cpu_loss.c,
 * dnnl_softmax.c, cpu_layer_norm.c, cpu_embedding.c):
 *
 *   cross entropy  loss_i = logsumexp(x_i) - x_i[label_i] (max-shifted,
 *                  sums in double); reduction none: [N], mean: sum / N,
 *                  sum: sum; dlogits_i = (softmax(x_i) - onehot) * g_i. A
 *                  label outside 0..C-1 is recorded in `err` (host-mapped)
 *                  by the row that meets it, whose loss becomes NaN.
 *   softmax        y = exp(x - max) / sum exp(x - max); log_softmax
 *                  y = x - max - log(sum exp(x - max)); sums in double.
 *                  Backward from y: softmax dx = y (dy - sum(dy y)),
 *                  log_softmax dx = dy - exp(y) sum(dy).
 *   layer norm     per row in double: mean, the biased variance as the
 *                  mean of (x - mean)^2, invstd = 1 / sqrt(var + eps),
 *                  y = (x - mean) invstd scale + bias rounded once.
 *                  Backward with xhat = (x - mean) invstd, g = dy scale:
 *                  dx = invstd (g - mean(g) - xhat mean(g xhat)); dscale =
 *                  sum over rows of dy xhat, dbias = sum of dy.
 *   sums           y = scale * sum of x over the reduced dims (reduce_sum,
 *                  reduce_mean, sum_to over any axes), in double.
 *   dropout        the keep bits of backend/dropout_rng.h, from the key
 *                  the host computes; y = x * scale (f32, as the CPU's:
 *                  bitwise the same) or 0; backward dy * scale or 0.
 *   embedding      y[i] = table[ids[i]]; backward dtable[v] = sum of dy[i]
 *                  over ids[i] = v in position order (f32, as the CPU's:
 *                  bitwise the same), each element of dtable written by
 *                  one thread, no atomics. An id outside 0..V-1 is
 *                  recorded in `err` as a bad label is; its forward row
 *                  becomes NaN and the backward skips it.
 *
 * A row's sums are one block's fixed tree (block_reduce), so results repeat
 * run to run; they differ from the CPU's sequential sums in rounding
 * only. */
#include <pthread.h>
#include <string.h>

#include "backend/cuda/cuda_kernels.h"
#include "core/core.h"

#define STR_(x) #x
#define STR(x) STR_(x)

static const char prelude[] =
    "typedef long long int64_t;\n"
    "#define BLOCK " STR(
        SG__CUDA_LIB_BLOCK) "\n"
                            /* Reduces v over the block (every thread calls it); every thread gets the result.
                             */
                            "template <typename T, typename F> __device__ T block_reduce(T v, T *sh, F f) {\n"
                            "  sh[threadIdx.x] = v;\n"
                            "  __syncthreads();\n"
                            "  for (int h = BLOCK / 2; h > 0; h >>= 1) {\n"
                            "    if (threadIdx.x < h) sh[threadIdx.x] = f(sh[threadIdx.x], sh[threadIdx.x + "
                            "h]);\n"
                            "    __syncthreads();\n"
                            "  }\n"
                            "  T r = sh[0];\n"
                            "  __syncthreads();\n"
                            "  return r;\n"
                            "}\n"
                            /* The maximum that propagates NaN, as the CPU's. */
                            "struct fmax_ { __device__ float operator()(float a, float b) const {\n"
                            "  return a != a ? a : b != b ? b : a > b ? a : b; } };\n"
                            "struct dsum_ { __device__ double operator()(double a, double b) const { return "
                            "a + b; } };\n";

static const char cross_entropy[] =
    "__device__ int64_t label_of(const void *labels, int l64, int64_t i) {\n"
    "  return l64 ? ((const int64_t *)labels)[i] : (int64_t)((const int *)labels)[i];\n"
    "}\n"
    /* max and log(sum(exp(x - max))) + max of the C contiguous values at x. */
    "__device__ void row_lse(const float *x, int64_t C, float *mx, double *lse) {\n"
    "  __shared__ float shf[BLOCK];\n"
    "  __shared__ double shd[BLOCK];\n"
    "  float m = -__int_as_float(0x7f800000);\n"
    "  for (int64_t j = threadIdx.x; j < C; j += BLOCK) m = fmax_()(m, x[j]);\n"
    "  m = block_reduce(m, shf, fmax_());\n"
    "  double s = 0;\n"
    "  for (int64_t j = threadIdx.x; j < C; j += BLOCK) s += exp((double)x[j] - (double)m);\n"
    "  s = block_reduce(s, shd, dsum_());\n"
    "  *mx = m;\n"
    "  *lse = log(s) + (double)m;\n"
    "}\n"
    "__device__ void bad_label(unsigned long long *err, int64_t row, int64_t label) {\n"
    "  if (atomicCAS(err, ~0ull, (unsigned long long)row) == ~0ull) err[1] = (unsigned long long)label;\n"
    "}\n"
    /* Row losses into rows[N] (the output itself for reduction none). */
    "extern \"C\" __global__ void __launch_bounds__(BLOCK) sgk_ce_rows(const float *x, const void *labels,\n"
    "    int l64, int64_t N, int64_t C, double *rows, float *out_none, unsigned long long *err) {\n"
    "  for (int64_t i = blockIdx.x; i < N; i += gridDim.x) {\n"
    "    float m;\n"
    "    double lse;\n"
    "    row_lse(x + i * C, C, &m, &lse);\n"
    "    if (threadIdx.x == 0) {\n"
    "      int64_t l = label_of(labels, l64, i);\n"
    "      double v;\n"
    "      if (l < 0 || l >= C) { bad_label(err, i, l); v = __longlong_as_double(0x7ff8000000000000LL); }\n"
    "      else v = lse - (double)x[i * C + l];\n"
    "      if (out_none) out_none[i] = (float)v; else rows[i] = v;\n"
    "    }\n"
    "  }\n"
    "}\n"
    /* One block: the rows' sum times scale into out[0]. */
    "extern \"C\" __global__ void __launch_bounds__(BLOCK) sgk_ce_total(const double *rows, int64_t N,\n"
    "    double scale, float *out) {\n"
    "  __shared__ double sh[BLOCK];\n"
    "  double s = 0;\n"
    "  for (int64_t i = threadIdx.x; i < N; i += BLOCK) s += rows[i];\n"
    "  s = block_reduce(s, sh, dsum_());\n"
    "  if (threadIdx.x == 0) out[0] = (float)(s * scale);\n"
    "}\n"
    /* dx_i = (softmax(x_i) - onehot(label_i)) * g_i; g from dloss. */
    "extern \"C\" __global__ void __launch_bounds__(BLOCK) sgk_ce_grad(const float *dloss, int per_row,\n"
    "    double scale, const float *x, const void *labels, int l64, int64_t N, int64_t C, float *dx,\n"
    "    unsigned long long *err) {\n"
    "  for (int64_t i = blockIdx.x; i < N; i += gridDim.x) {\n"
    "    float m;\n"
    "    double lse;\n"
    "    const float *xi = x + i * C;\n"
    "    row_lse(xi, C, &m, &lse);\n"
    "    int64_t l = label_of(labels, l64, i);\n"
    "    if ((l < 0 || l >= C) && threadIdx.x == 0) bad_label(err, i, l);\n"
    "    double g = (double)(per_row ? dloss[i] : dloss[0]) * scale;\n"
    "    for (int64_t j = threadIdx.x; j < C; j += BLOCK) {\n"
    "      double p = exp((double)xi[j] - lse);\n"
    "      dx[i * C + j] = (float)((p - (j == l ? 1.0 : 0.0)) * g);\n"
    "    }\n"
    "  }\n"
    "}\n";

static const char softmax[] =
    /* Row r of x seen as [outer, C, inner]: its C values are `inner` apart. */
    "__device__ int64_t row_base(int64_t r, int64_t C, int64_t inner) {\n"
    "  return (r / inner) * C * inner + r % inner;\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(BLOCK) sgk_softmax(const float *x, float *y,\n"
    "    int64_t outer, int64_t C, int64_t inner, int log_) {\n"
    "  __shared__ float shf[BLOCK];\n"
    "  __shared__ double shd[BLOCK];\n"
    "  for (int64_t r = blockIdx.x; r < outer * inner; r += gridDim.x) {\n"
    "    const float *xr = x + row_base(r, C, inner);\n"
    "    float *yr = y + row_base(r, C, inner);\n"
    "    float m = -__int_as_float(0x7f800000);\n"
    "    for (int64_t j = threadIdx.x; j < C; j += BLOCK) m = fmax_()(m, xr[j * inner]);\n"
    "    m = block_reduce(m, shf, fmax_());\n"
    "    double s = 0;\n"
    "    for (int64_t j = threadIdx.x; j < C; j += BLOCK) s += exp((double)xr[j * inner] - (double)m);\n"
    "    s = block_reduce(s, shd, dsum_());\n"
    "    double ls = log(s);\n"
    "    for (int64_t j = threadIdx.x; j < C; j += BLOCK) {\n"
    "      double t = (double)xr[j * inner] - (double)m;\n"
    "      yr[j * inner] = (float)(log_ ? t - ls : exp(t) / s);\n"
    "    }\n"
    "  }\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(BLOCK) sgk_softmax_grad(const float *dy, const float "
    "*y,\n"
    "    float *dx, int64_t outer, int64_t C, int64_t inner, int log_) {\n"
    "  __shared__ double shd[BLOCK];\n"
    "  for (int64_t r = blockIdx.x; r < outer * inner; r += gridDim.x) {\n"
    "    int64_t b = row_base(r, C, inner);\n"
    "    double s = 0;\n"
    "    for (int64_t j = threadIdx.x; j < C; j += BLOCK)\n"
    "      s += log_ ? (double)dy[b + j * inner] : (double)dy[b + j * inner] * (double)y[b + j * inner];\n"
    "    s = block_reduce(s, shd, dsum_());\n"
    "    for (int64_t j = threadIdx.x; j < C; j += BLOCK) {\n"
    "      double g = dy[b + j * inner], v = y[b + j * inner];\n"
    "      dx[b + j * inner] = (float)(log_ ? g - exp(v) * s : v * (g - s));\n"
    "    }\n"
    "  }\n"
    "}\n";

static const char layer_norm[] =
    "extern \"C\" __global__ void __launch_bounds__(BLOCK) sgk_layer_norm(const float *x, const float "
    "*scale,\n"
    "    const float *bias, float *y, float *mean, float *invstd, int64_t R, int64_t D, double eps) {\n"
    "  __shared__ double shd[BLOCK];\n"
    "  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {\n"
    "    const float *xr = x + r * D;\n"
    "    double s = 0;\n"
    "    for (int64_t i = threadIdx.x; i < D; i += BLOCK) s += xr[i];\n"
    "    double mu = block_reduce(s, shd, dsum_()) / (double)D;\n"
    "    double v = 0;\n"
    "    for (int64_t i = threadIdx.x; i < D; i += BLOCK) v += ((double)xr[i] - mu) * ((double)xr[i] - mu);\n"
    "    double is = 1.0 / sqrt(block_reduce(v, shd, dsum_()) / (double)D + eps);\n"
    "    for (int64_t i = threadIdx.x; i < D; i += BLOCK) {\n"
    "      double t = ((double)xr[i] - mu) * is;\n"
    "      if (scale) t *= scale[i];\n"
    "      if (bias) t += bias[i];\n"
    "      y[r * D + i] = (float)t;\n"
    "    }\n"
    "    if (threadIdx.x == 0) mean[r] = (float)mu, invstd[r] = (float)is;\n"
    "  }\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(BLOCK) sgk_ln_grad_rows(const float *dy, const float "
    "*x,\n"
    "    const float *scale, const float *mean, const float *invstd, float *dx, int64_t R, int64_t D) {\n"
    "  __shared__ double shd[BLOCK];\n"
    "  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {\n"
    "    const float *xr = x + r * D, *dyr = dy + r * D;\n"
    "    double mu = mean[r], is = invstd[r], sg = 0, sgx = 0;\n"
    "    for (int64_t i = threadIdx.x; i < D; i += BLOCK) {\n"
    "      double g = scale ? (double)dyr[i] * scale[i] : (double)dyr[i];\n"
    "      sg += g;\n"
    "      sgx += g * (((double)xr[i] - mu) * is);\n"
    "    }\n"
    "    sg = block_reduce(sg, shd, dsum_()) / (double)D;\n"
    "    sgx = block_reduce(sgx, shd, dsum_()) / (double)D;\n"
    "    for (int64_t i = threadIdx.x; i < D; i += BLOCK) {\n"
    "      double g = scale ? (double)dyr[i] * scale[i] : (double)dyr[i];\n"
    "      double xhat = ((double)xr[i] - mu) * is;\n"
    "      dx[r * D + i] = (float)(is * (g - sg - xhat * sgx));\n"
    "    }\n"
    "  }\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(BLOCK) sgk_ln_grad_cols(const float *dy, const float "
    "*x,\n"
    "    const float *mean, const float *invstd, float *dscale, float *dbias, int64_t R, int64_t D) {\n"
    "  for (int64_t c = (int64_t)blockIdx.x * BLOCK + threadIdx.x; c < D; c += (int64_t)gridDim.x * BLOCK) "
    "{\n"
    "    double as = 0, ab = 0;\n"
    "    for (int64_t r = 0; r < R; r++) {\n"
    "      as += (double)dy[r * D + c] * (((double)x[r * D + c] - (double)mean[r]) * (double)invstd[r]);\n"
    "      ab += dy[r * D + c];\n"
    "    }\n"
    "    if (dscale) dscale[c] = (float)as;\n"
    "    if (dbias) dbias[c] = (float)ab;\n"
    "  }\n"
    "}\n";

static const char dropout[] =
    "__device__ unsigned long long mix64(unsigned long long z) {\n"
    "  z += 0x9E3779B97F4A7C15ull;\n"
    "  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;\n"
    "  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;\n"
    "  return z ^ (z >> 31);\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(BLOCK) sgk_dropout(const float *x, float *y,\n"
    "    unsigned char *mask, int64_t n, unsigned long long key, unsigned threshold, float scale) {\n"
    "  for (int64_t i = (int64_t)blockIdx.x * BLOCK + threadIdx.x; i < n; i += (int64_t)gridDim.x * BLOCK) "
    "{\n"
    "    unsigned char keep = (unsigned)(mix64(key ^ mix64((unsigned long long)i)) >> 40) >= threshold;\n"
    "    mask[i] = keep;\n"
    "    y[i] = keep ? x[i] * scale : 0.0f;\n"
    "  }\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(BLOCK) sgk_dropout_grad(const float *dy,\n"
    "    const unsigned char *mask, float *dx, int64_t n, float scale) {\n"
    "  for (int64_t i = (int64_t)blockIdx.x * BLOCK + threadIdx.x; i < n; i += (int64_t)gridDim.x * BLOCK)\n"
    "    dx[i] = mask[i] ? dy[i] * scale : 0.0f;\n"
    "}\n";

static const char sum[] =
    "struct sgk_sum_geom { int64_t kd[8], ks[8], rd[8], rs[8], n_out, n_red; double scale; int nk, nr; };\n"
    "extern \"C\" __global__ void __launch_bounds__(BLOCK) sgk_sum(const sgk_sum_geom g, const float *x,\n"
    "    float *y) {\n"
    "  __shared__ double shd[BLOCK];\n"
    "  for (int64_t o = blockIdx.x; o < g.n_out; o += gridDim.x) {\n"
    "    int64_t base = 0, q = o;\n"
    "    for (int d = g.nk - 1; d >= 0; d--) { base += (q % g.kd[d]) * g.ks[d]; q /= g.kd[d]; }\n"
    "    double s = 0;\n"
    "    for (int64_t r = threadIdx.x; r < g.n_red; r += BLOCK) {\n"
    "      int64_t off = base, t = r;\n"
    "      for (int d = g.nr - 1; d >= 0; d--) { off += (t % g.rd[d]) * g.rs[d]; t /= g.rd[d]; }\n"
    "      s += x[off];\n"
    "    }\n"
    "    s = block_reduce(s, shd, dsum_());\n"
    "    if (threadIdx.x == 0) y[o] = (float)(s * g.scale);\n"
    "  }\n"
    "}\n";

/* After cross_entropy's text: ids are read and bad ones recorded as its
 * labels are (label_of, bad_label). */
static const char embedding[] =
    "extern \"C\" __global__ void __launch_bounds__(BLOCK) sgk_embedding(const float *table,\n"
    "    const void *ids, int l64, int64_t n, int64_t V, int64_t C, float *y, unsigned long long *err) {\n"
    "  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {\n"
    "    int64_t v = label_of(ids, l64, i);\n"
    "    bool bad = v < 0 || v >= V;\n"
    "    if (bad && threadIdx.x == 0) bad_label(err, i, v);\n"
    "    for (int64_t c = threadIdx.x; c < C; c += BLOCK)\n"
    "      y[i * C + c] = bad ? __int_as_float(0x7fc00000) : table[v * C + c];\n"
    "  }\n"
    "}\n"
    /* Unit u is column u % C of the table rows of slice u / C (slices split
     * V evenly): the only writer of those elements, which it zeroes and then
     * adds into in position order, so the result repeats bitwise. */
    "extern \"C\" __global__ void __launch_bounds__(BLOCK) sgk_embedding_grad(const float *dy,\n"
    "    const void *ids, int l64, int64_t n, int64_t V, int64_t C, int64_t slices, float *dt,\n"
    "    unsigned long long *err) {\n"
    "  int64_t q = V / slices, rem = V % slices;\n"
    "  for (int64_t u = (int64_t)blockIdx.x * BLOCK + threadIdx.x; u < C * slices;\n"
    "       u += (int64_t)gridDim.x * BLOCK) {\n"
    "    int64_t c = u % C, s = u / C;\n"
    "    int64_t lo = s * q + (s < rem ? s : rem), hi = lo + q + (s < rem ? 1 : 0);\n"
    "    for (int64_t v = lo; v < hi; v++) dt[v * C + c] = 0.0f;\n"
    "    for (int64_t i = 0; i < n; i++) {\n"
    "      int64_t v = label_of(ids, l64, i);\n"
    "      if (v >= lo && v < hi) dt[v * C + c] += dy[i * C + c];\n"
    "      else if (u == 0 && (v < 0 || v >= V)) bad_label(err, i, v);\n"
    "    }\n"
    "  }\n"
    "}\n";

static const char *const names[SG__CUDA_LIB_N] = {
    [SG__CUDA_CE_ROWS] = "sgk_ce_rows",
    [SG__CUDA_CE_TOTAL] = "sgk_ce_total",
    [SG__CUDA_CE_GRAD] = "sgk_ce_grad",
    [SG__CUDA_SOFTMAX] = "sgk_softmax",
    [SG__CUDA_SOFTMAX_GRAD] = "sgk_softmax_grad",
    [SG__CUDA_LN] = "sgk_layer_norm",
    [SG__CUDA_LN_GRAD_ROWS] = "sgk_ln_grad_rows",
    [SG__CUDA_LN_GRAD_COLS] = "sgk_ln_grad_cols",
    [SG__CUDA_DROPOUT] = "sgk_dropout",
    [SG__CUDA_DROPOUT_GRAD] = "sgk_dropout_grad",
    [SG__CUDA_SUM] = "sgk_sum",
    [SG__CUDA_EMBEDDING] = "sgk_embedding",
    [SG__CUDA_EMBEDDING_GRAD] = "sgk_embedding_grad",
};

const char *sg__cuda_library_name(sg__cuda_lib_kernel k) {
  return (unsigned)k < SG__CUDA_LIB_N ? names[k] : NULL;
}

static char *program;
static pthread_once_t program_once = PTHREAD_ONCE_INIT;

static void join_program(void) {
  const char *parts[] = {prelude, cross_entropy, softmax, layer_norm, dropout, sum, embedding};
  size_t n = 1;
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) n += strlen(parts[i]);
  program = sg__malloc(n);
  if (program == NULL) return;
  program[0] = '\0';
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) strcat(program, parts[i]);
}

const char *sg__cuda_library_program(void) {
  pthread_once(&program_once, join_program);
  return program;
}

bool sg__cuda_sum_geometry(const sg_graph *g, const sg__op *op, sg__cuda_sum_geom *out) {
  bool reduced[SG_MAX_DIMS];
  if (!sg__sum_dims(g, op, reduced)) return false;
  const sg__tensor *x = &g->tensors[op->inputs[0]];
  if (x->ndim > SG__CUDA_SUM_DIMS) return false;
  *out = (sg__cuda_sum_geom){.n_out = 1, .n_red = 1, .scale = 1};
  int64_t stride = 1, strides[SG_MAX_DIMS];
  for (int d = x->ndim - 1; d >= 0; d--) strides[d] = stride, stride *= x->dims[d];
  int last = -1; /* kind of the previous dim kept: 0 kept, 1 reduced (merging adjacent ones) */
  for (int d = 0; d < x->ndim; d++) {
    if (x->dims[d] == 1) continue; /* no position to walk */
    int kind = reduced[d] ? 1 : 0;
    int64_t *dims = kind ? out->rd : out->kd, *st = kind ? out->rs : out->ks;
    int32_t *n = kind ? &out->nr : &out->nk;
    if (last == kind && st[*n - 1] == x->dims[d] * strides[d]) { /* contiguous with the previous: merge */
      dims[*n - 1] *= x->dims[d];
      st[*n - 1] = strides[d];
    } else {
      dims[*n] = x->dims[d];
      st[(*n)++] = strides[d];
    }
    last = kind;
    if (kind) out->n_red *= x->dims[d];
    else out->n_out *= x->dims[d];
  }
  if (op->kind == SG_OP_REDUCE_MEAN) out->scale = 1.0 / (double)out->n_red;
  return true;
}
