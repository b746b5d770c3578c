/* cross_entropy and cross_entropy_backward on CUDA: kernels of sgrt's own
 * (a small CUDA C program compiled by NVRTC once per backend state, for the
 * device's compute capability), with cpu_loss.c's definition:
 *   loss_i = logsumexp(x_i) - x_i[label_i]   (max-shifted, sums in double)
 *   reduction none: [N]; mean: sum / N; sum: sum
 *   dlogits_i = (softmax(x_i) - onehot(label_i)) * g_i.
 * One block per row, fixed reduction trees: the result is the same on
 * every run. A label outside 0..C-1 is recorded in host-mapped memory by
 * the row that meets it (its loss becomes NaN) and reported by the next
 * synchronize as SG_ERR_RANGE naming the op, the row and the label, as the
 * CPU kernel reports it. */
#include <stdio.h>
#include <string.h>

#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_nvrtc.h"

#define BLOCK 256
#define STR_(x) #x
#define STR(x) STR_(x)

static const char program[] =
    "typedef long long int64_t;\n"
    "#define BLOCK " STR(
        BLOCK) "\n"
               /* Reduces v over the block into sh[0] (every thread must call it). */
               "template <typename T, typename F> __device__ T block_reduce(T v, T *sh, F f) {\n"
               "  sh[threadIdx.x] = v;\n"
               "  __syncthreads();\n"
               "  for (int h = BLOCK / 2; h > 0; h >>= 1) {\n"
               "    if (threadIdx.x < h) sh[threadIdx.x] = f(sh[threadIdx.x], sh[threadIdx.x + h]);\n"
               "    __syncthreads();\n"
               "  }\n"
               "  T r = sh[0];\n"
               "  __syncthreads();\n"
               "  return r;\n"
               "}\n"
               "struct fmax_ { __device__ float operator()(float a, float b) const { return a != a ? a : b "
               "!= b ? b : a > b ? a : b; } };\n"
               "struct dsum_ { __device__ double operator()(double a, double b) const { return a + b; } };\n"
               "__device__ int64_t label_of(const void *labels, int l64, int64_t i) {\n"
               "  return l64 ? ((const int64_t *)labels)[i] : (int64_t)((const int *)labels)[i];\n"
               "}\n"
               /* max and log(sum(exp(x - max))) + max of row i. */
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
               "  if (atomicCAS(err, ~0ull, (unsigned long long)row) == ~0ull) err[1] = (unsigned long "
               "long)label;\n"
               "}\n"
               /* Row losses into rows[N] (the output for reduction none). */
               "extern \"C\" __global__ void __launch_bounds__(BLOCK) sgk_ce_rows(const float *x, const void "
               "*labels, int l64,\n"
               "    int64_t N, int64_t C, double *rows, float *out_none, unsigned long long *err) {\n"
               "  for (int64_t i = blockIdx.x; i < N; i += gridDim.x) {\n"
               "    float m;\n"
               "    double lse;\n"
               "    row_lse(x + i * C, C, &m, &lse);\n"
               "    if (threadIdx.x == 0) {\n"
               "      int64_t l = label_of(labels, l64, i);\n"
               "      double v;\n"
               "      if (l < 0 || l >= C) { bad_label(err, i, l); v = "
               "__longlong_as_double(0x7ff8000000000000LL); }\n"
               "      else v = lse - (double)x[i * C + l];\n"
               "      if (out_none) out_none[i] = (float)v; else rows[i] = v;\n"
               "    }\n"
               "  }\n"
               "}\n"
               /* One block: the rows' sum times scale into out[0]. */
               "extern \"C\" __global__ void __launch_bounds__(BLOCK) sgk_ce_total(const double *rows, "
               "int64_t N, double scale,\n"
               "    float *out) {\n"
               "  __shared__ double sh[BLOCK];\n"
               "  double s = 0;\n"
               "  for (int64_t i = threadIdx.x; i < N; i += BLOCK) s += rows[i];\n"
               "  s = block_reduce(s, sh, dsum_());\n"
               "  if (threadIdx.x == 0) out[0] = (float)(s * scale);\n"
               "}\n"
               /* dx_i = (softmax(x_i) - onehot(label_i)) * g_i; g from dloss. */
               "extern \"C\" __global__ void __launch_bounds__(BLOCK) sgk_ce_grad(const float *dloss, int "
               "per_row,\n"
               "    double scale, const float *x, const void *labels, int l64, int64_t N, int64_t C, float "
               "*dx,\n"
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

const char *sg__cuda_loss_program(void) { return program; }

/* The program's kernels: from the graph's module, whose program carries
 * this one too (cuda_module.c: so the compile cache keeps it and a warm
 * start compiles nothing), or compiled on their own for a graph without
 * generated kernels. */
typedef struct loss_lib {
  cudaLibrary_t lib;
  bool owned; /* compiled here (else the module's library) */
  cudaKernel_t rows, total, grad;
} loss_lib;

static sg_status find_kernels(sg__cuda_state *st, loss_lib *l) {
  cudaError_t e;
  if ((e = cudaLibraryGetKernel(&l->rows, l->lib, "sgk_ce_rows")) != cudaSuccess ||
      (e = cudaLibraryGetKernel(&l->total, l->lib, "sgk_ce_total")) != cudaSuccess ||
      (e = cudaLibraryGetKernel(&l->grad, l->lib, "sgk_ce_grad")) != cudaSuccess)
    return sg__cuda_error(st, e, "finding the loss kernels");
  return SG_OK;
}

static sg_status loss_program(sg__cuda_state *st, loss_lib **out) {
  if (st->loss != NULL) {
    *out = st->loss;
    return SG_OK;
  }
  loss_lib *l = sg__calloc(1, sizeof *l);
  if (l == NULL) return sg__error(SG_ERR_NO_MEMORY, "cuda: out of memory");
  sg_status s = SG_OK;
  if (st->module_lib != NULL) {
    l->lib = st->module_lib;
    s = find_kernels(st, l);
  } else {
    void *cubin = NULL;
    size_t size = 0;
    s = sg__cuda_nvrtc_compile(program, "sgrt_loss.cu", st->cc, &cubin, &size);
    cudaError_t e;
    if (s == SG_OK && (e = cudaLibraryLoadData(&l->lib, cubin, NULL, NULL, 0, NULL, NULL, 0)) != cudaSuccess)
      s = sg__cuda_error(st, e, "loading the loss kernels");
    else if (s == SG_OK) l->owned = true, s = find_kernels(st, l);
    sg__free(cubin);
  }
  if (s != SG_OK) {
    if (l->owned) cudaLibraryUnload(l->lib);
    sg__free(l);
    return s;
  }
  st->loss = l;
  *out = l;
  return SG_OK;
}

void sg__cuda_loss_release(sg__cuda_state *st, cudaLibrary_t lib) {
  loss_lib *l = st->loss;
  if (l == NULL || (lib != NULL && l->lib != lib)) return;
  if (l->owned) cudaLibraryUnload(l->lib);
  sg__free(l);
  st->loss = NULL;
}

enum { NONE = 0, MEAN = 1, SUM = 2 };

typedef struct ce_kernel {
  sg__kernel base;
  sg__cuda_check check; /* the label error of this op */
  loss_lib *lib;
  int64_t N, C;
  int reduction, l64;
  unsigned grid;
  bool backward;
} ce_kernel;

static sg_status ce_run(sg__cuda_state *st, sg__kernel *base, void *const *in, void *const *out,
                        const sg__run_ctx *ctx) {
  (void)ctx;
  ce_kernel *k = (ce_kernel *)base;
  dim3 grid = {k->grid, 1, 1}, block = {BLOCK, 1, 1}, one = {1, 1, 1};
  unsigned long long *err = k->check.dflag;
  /* Kernel arguments are read through pointers to them: locals. */
  const void *a0 = in[0], *a1 = in[1];
  void *y = out[0];
  if (k->backward) { /* dloss, logits, labels -> dlogits */
    const void *labels = in[2];
    int per_row = k->reduction == NONE;
    double scale = k->reduction == MEAN ? 1.0 / (double)k->N : 1.0;
    void *args[] = {&a0, &per_row, &scale, &a1, &labels, &k->l64, &k->N, &k->C, &y, &err};
    SG_CUDA(st, cudaLaunchKernel((const void *)k->lib->grad, grid, block, args, 0, st->compute),
            k->base.name);
    return SG_OK;
  }
  /* logits, labels -> loss; row losses in the workspace when reduced */
  double *rows = st->workspace;
  float *none = k->reduction == NONE ? y : NULL;
  void *args[] = {&a0, &a1, &k->l64, &k->N, &k->C, &rows, &none, &err};
  SG_CUDA(st, cudaLaunchKernel((const void *)k->lib->rows, grid, block, args, 0, st->compute), k->base.name);
  if (k->reduction != NONE) {
    double scale = k->reduction == MEAN ? 1.0 / (double)k->N : 1.0;
    void *targs[] = {&rows, &k->N, &scale, &y};
    SG_CUDA(st, cudaLaunchKernel((const void *)k->lib->total, one, block, targs, 0, st->compute),
            k->base.name);
  }
  return SG_OK;
}

static void ce_destroy(sg__cuda_state *st, sg__kernel *base) {
  ce_kernel *k = (ce_kernel *)base;
  sg__cuda_check_remove(st, &k->check);
}

sg_status sg__cuda_create_cross_entropy(sg__cuda_state *st, const sg_graph *g, const sg__op *op,
                                        sg__kernel **out) {
  bool backward = op->kind == SG_OP_CROSS_ENTROPY_BACKWARD;
  const sg__tensor *x = sg__cuda_in(g, op, backward ? 1 : 0), *labels = sg__cuda_in(g, op, backward ? 2 : 1);
  if (x->dtype != SG_F32 || x->ndim != 2 || (labels->dtype != SG_I32 && labels->dtype != SG_I64))
    return sg__cuda_unsupported(g, op, "");
  loss_lib *lib = NULL;
  SG_CHECK(loss_program(st, &lib));
  SG_CHECK(sg__cuda_kernel_new(op, sizeof(ce_kernel), ce_run, out));
  ce_kernel *k = (ce_kernel *)*out;
  k->base.destroy = ce_destroy;
  k->lib = lib;
  k->backward = backward;
  k->N = x->dims[0], k->C = x->dims[1];
  k->reduction = (int)sg__attr_i(op, 0);
  k->l64 = labels->dtype == SG_I64;
  int64_t cap = (int64_t)st->sm_count * 32;
  k->grid = (unsigned)(k->N < 1 ? 1 : k->N > cap ? cap : k->N);
  snprintf(k->check.what, sizeof k->check.what, "%s '%s'", sg_op_kind_name(op->kind), k->base.name);
  k->check.limit = k->C - 1;
  sg_status s = sg__cuda_check_add(st, &k->check);
  if (s == SG_OK && !backward && k->reduction != NONE)
    s = sg__cuda_workspace_reserve(st, (size_t)k->N * sizeof(double));
  if (s != SG_OK) {
    ce_destroy(st, &k->base);
    sg__free(k);
    *out = NULL;
  }
  return s;
}
