/* gemm and matmul through cuBLASLt.
 *
 * Row-major operands by operand swap: a row-major matrix is its transpose
 * in cuBLASLt's column-major view, so Y = op(A) op(B) (row-major, M x N) is
 * computed as Y^T = op(B)^T op(A)^T: cuBLASLt's A is our B, its B our A,
 * its D our Y seen as N x M with leading dimension N; a transposed operand
 * of ours is a non-transposed one of cuBLASLt's and the reverse. gemm's
 * beta * C is cuBLASLt's C when C has Y's shape, its bias epilogue when C
 * is a row vector and beta is 1 (the linear layer). NumPy matmul's batch
 * dims become a strided batch, an operand whose batch dims are all 1
 * repeating with stride 0.
 *
 * The algorithm is cuBLASLt's first heuristic choice, made once at compile
 * time with the shared workspace as its limit; strict fp32
 * (CUBLAS_COMPUTE_32F) unless TF32 is on, and in deterministic mode no
 * split-K reduction that adds in place (atomics). */
#include "backend/cuda/cuda_internal.h"

enum { TRANS_A, TRANS_B, ALPHA, BETA };

/* The most workspace one product may ask for. */
#define GEMM_WORKSPACE ((size_t)32 << 20)

typedef struct gemm_kernel {
  sg__kernel base;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, lc, ld; /* cuBLASLt's A (our B), B (our A), C, D (our Y) */
  cublasLtMatmulAlgo_t algo;
  size_t ws;
  float alpha, beta;
  bool use_c; /* beta * C with C of Y's shape */
  bool bias;  /* C as the bias epilogue */
} gemm_kernel;

#define LT(call, what)                                                  \
  do {                                                                  \
    cublasStatus_t s_ = (call);                                         \
    if (s_ != CUBLAS_STATUS_SUCCESS) return sg__cublas_error(s_, what); \
  } while (0)

static sg_status gemm_run(sg__cuda_state *st, sg__kernel *base, void *const *in, void *const *out,
                          const sg__run_ctx *ctx) {
  (void)ctx;
  gemm_kernel *k = (gemm_kernel *)base;
  if (k->bias)
    LT(cublasLtMatmulDescSetAttribute(k->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &in[2], sizeof in[2]),
       "bias pointer");
  const void *c = k->use_c ? in[2] : out[0];
  float beta = k->use_c ? k->beta : 0.0f;
  LT(cublasLtMatmul(st->lt, k->desc, &k->alpha, in[1], k->la, in[0], k->lb, &beta, c, k->lc, out[0], k->ld,
                    &k->algo, k->ws ? st->workspace : NULL, k->ws, st->compute),
     k->base.name);
  return SG_OK;
}

static void gemm_destroy(sg__cuda_state *st, sg__kernel *base) {
  (void)st;
  gemm_kernel *k = (gemm_kernel *)base;
  if (k->desc) cublasLtMatmulDescDestroy(k->desc);
  cublasLtMatrixLayout_t l[] = {k->la, k->lb, k->lc, k->ld};
  for (int i = 0; i < 4; i++)
    if (l[i]) cublasLtMatrixLayoutDestroy(l[i]);
}

/* A column-major layout rows x cols (ld = rows), `batch` of them `stride`
 * elements apart. */
static sg_status layout(cublasLtMatrixLayout_t *l, int64_t rows, int64_t cols, int64_t batch,
                        int64_t stride) {
  LT(cublasLtMatrixLayoutCreate(l, CUDA_R_32F, (uint64_t)rows, (uint64_t)cols, rows), "matrix layout");
  if (batch > 1) {
    int32_t b = (int32_t)batch;
    LT(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof b), "batch count");
    LT(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                        sizeof stride),
       "batch stride");
  }
  return SG_OK;
}

/* The product's shape: M, N, K, transposes, batch count and strides. */
typedef struct shape {
  int64_t M, N, K, batch, sa, sb; /* batch strides of A and B (0: repeated) */
  bool ta, tb;
} shape;

static bool matmul_shape(const sg__tensor *a, const sg__tensor *b, const sg__tensor *y, shape *s) {
  s->ta = s->tb = false;
  s->M = a->ndim == 1 ? 1 : a->dims[a->ndim - 2];
  s->K = a->dims[a->ndim - 1];
  s->N = b->ndim == 1 ? 1 : b->dims[b->ndim - 1];
  int64_t na = 1, nb = 1, ny = 1;
  for (int i = 0; i + 2 < a->ndim; i++) na *= a->dims[i];
  for (int i = 0; i + 2 < b->ndim; i++) nb *= b->dims[i];
  for (int i = 0; i + 2 < y->ndim; i++) ny *= y->dims[i];
  /* Each operand's batch is the output's or a single matrix repeated;
   * anything finer (broadcasting within batch dims) is not a strided batch. */
  if ((na != ny && na != 1) || (nb != ny && nb != 1) || ny > INT32_MAX) return false;
  if (na == ny && na > 1 && a->ndim != y->ndim) return false;
  if (nb == ny && nb > 1 && b->ndim != y->ndim) return false;
  s->batch = ny;
  s->sa = na > 1 ? s->M * s->K : 0;
  s->sb = nb > 1 ? s->K * s->N : 0;
  return true;
}

sg_status sg__cuda_create_gemm(sg__cuda_state *st, const sg_graph *g, const sg__op *op, sg__kernel **out) {
  const sg__tensor *a = sg__cuda_in(g, op, 0), *b = sg__cuda_in(g, op, 1), *c = sg__cuda_in(g, op, 2);
  const sg__tensor *y = sg__cuda_out(g, op, 0);
  if (a->dtype != SG_F32 || b->dtype != SG_F32 || y->dtype != SG_F32) return sg__cuda_unsupported(g, op, "");
  shape s = {0};
  float alpha = 1.0f, beta = 0.0f;
  bool use_c = false, bias = false;
  if (op->kind == SG_OP_GEMM) {
    s.ta = sg__attr_i(op, TRANS_A) != 0, s.tb = sg__attr_i(op, TRANS_B) != 0;
    s.M = a->dims[s.ta], s.K = a->dims[1 - s.ta], s.N = b->dims[1 - s.tb], s.batch = 1;
    alpha = (float)sg__attr_f(op, ALPHA), beta = (float)sg__attr_f(op, BETA);
    if (c != NULL && beta != 0.0f) {
      bool full = c->ndim == 2 && c->dims[0] == s.M && c->dims[1] == s.N;
      bool row = c->dims[c->ndim - 1] == s.N && (c->ndim == 1 || c->dims[0] == 1);
      if (full) use_c = true;
      else if (row && beta == 1.0f) bias = true;
      else return sg__cuda_unsupported(g, op, " (C broadcast with beta other than 1)");
    }
  } else if (!matmul_shape(a, b, y, &s)) {
    return sg__cuda_unsupported(g, op, " (batch dims that are not a strided batch)");
  }
  SG_CHECK(sg__cuda_kernel_new(op, sizeof(gemm_kernel), gemm_run, out));
  gemm_kernel *k = (gemm_kernel *)*out;
  k->base.destroy = gemm_destroy;
  k->alpha = alpha, k->beta = beta, k->use_c = use_c, k->bias = bias;
  sg_status r = SG_OK;
  cublasComputeType_t ct = st->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  cublasOperation_t opa = s.tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = s.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasStatus_t e = cublasLtMatmulDescCreate(&k->desc, ct, CUDA_R_32F);
  if (e == CUBLAS_STATUS_SUCCESS)
    e = cublasLtMatmulDescSetAttribute(k->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa);
  if (e == CUBLAS_STATUS_SUCCESS)
    e = cublasLtMatmulDescSetAttribute(k->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb);
  if (e == CUBLAS_STATUS_SUCCESS && bias) {
    cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
    cudaDataType_t bt = CUDA_R_32F;
    e = cublasLtMatmulDescSetAttribute(k->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep);
    if (e == CUBLAS_STATUS_SUCCESS)
      e = cublasLtMatmulDescSetAttribute(k->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt);
  }
  if (e != CUBLAS_STATUS_SUCCESS) {
    r = sg__cublas_error(e, "matmul descriptor");
    goto fail;
  }
  /* Stored shapes in the column-major view: our B is N x K (tb: K x N), our
   * A is K x M (ta: M x K), Y is N x M. */
  if ((r = layout(&k->la, s.tb ? s.K : s.N, s.tb ? s.N : s.K, s.batch, s.sb)) != SG_OK ||
      (r = layout(&k->lb, s.ta ? s.M : s.K, s.ta ? s.K : s.M, s.batch, s.sa)) != SG_OK ||
      (r = layout(&k->lc, s.N, s.M, s.batch, s.M * s.N)) != SG_OK ||
      (r = layout(&k->ld, s.N, s.M, s.batch, s.M * s.N)) != SG_OK)
    goto fail;
  cublasLtMatmulPreference_t pref = NULL;
  size_t max_ws = GEMM_WORKSPACE;
  uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_MASK & ~(uint32_t)CUBLASLT_REDUCTION_SCHEME_INPLACE;
  cublasLtMatmulHeuristicResult_t res;
  int found = 0;
  e = cublasLtMatmulPreferenceCreate(&pref);
  if (e == CUBLAS_STATUS_SUCCESS)
    e = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws,
                                             sizeof max_ws);
  if (e == CUBLAS_STATUS_SUCCESS && st->deterministic)
    e = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes,
                                             sizeof schemes);
  if (e == CUBLAS_STATUS_SUCCESS)
    e = cublasLtMatmulAlgoGetHeuristic(st->lt, k->desc, k->la, k->lb, k->lc, k->ld, pref, 1, &res, &found);
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (e != CUBLAS_STATUS_SUCCESS) {
    r = sg__cublas_error(e, "algorithm heuristic");
    goto fail;
  }
  if (found < 1) {
    r = sg__op_error(op, SG_ERR_UNSUPPORTED, "cublasLt has no algorithm for %lld x %lld x %lld (batch %lld)",
                     (long long)s.M, (long long)s.N, (long long)s.K, (long long)s.batch);
    goto fail;
  }
  k->algo = res.algo;
  k->ws = res.workspaceSize;
  if ((r = sg__cuda_workspace_reserve(st, k->ws)) != SG_OK) goto fail;
  return SG_OK;
fail:
  gemm_destroy(st, &k->base);
  sg__free(k);
  *out = NULL;
  return r;
}
