/* conv2d, conv2d_backward_data and conv2d_backward_weight through cuDNN.
 *
 * First choice: the graph API. One operation graph per op (a convolution,
 * forward with its bias added by a pointwise op in the same graph), tensors
 * NCHW / KCRS as the graph stores them (groups follow from the filter's
 * channels), cuDNN's heuristics (mode A), and the first engine
 * configuration that both keeps our numerics and finalizes into a plan:
 * strict fp32 refuses tensor-core (TF32) engines and reduced-precision
 * reductions unless TF32 is on, deterministic mode refuses engines noted
 * non-deterministic. The plan's workspace comes from the backend's shared
 * workspace, sized here, at compile time. When no configuration finalizes,
 * the legacy API takes the op (cudnnConvolutionForward and the backward
 * pair with the algorithm cudnnGet*Algorithm_v7 ranks first under the same
 * rules); it needs symmetric padding.
 *
 * Inputs (the graph's order): conv2d x, w, bias -> y; backward data dy, w
 * -> dx; backward weight dy, x -> dw. */
#include <stdio.h>
#include <string.h>

#include "backend/cuda/cuda_internal.h"

enum { STRIDE, PADDING, DILATION, GROUPS };

/* Unique ids of the graph's tensors. */
enum { UID_X = 1, UID_W, UID_Y, UID_B, UID_CONV };

#define DNN(call, what)                                               \
  do {                                                                \
    cudnnStatus_t s_ = (call);                                        \
    if (s_ != CUDNN_STATUS_SUCCESS) return sg__cudnn_error(s_, what); \
  } while (0)

/* ---- the operation graph ---------------------------------------------------- */

/* Every descriptor made for one graph, destroyed together. */
typedef struct descs {
  cudnnBackendDescriptor_t d[12];
  int n;
} descs;

static sg_status make(descs *ds, cudnnBackendDescriptorType_t type, cudnnBackendDescriptor_t *out) {
  if (ds->n == (int)(sizeof ds->d / sizeof *ds->d))
    return sg__error(SG_ERR_INTERNAL, "cudnn: too many descriptors");
  DNN(cudnnBackendCreateDescriptor(type, out), "cudnnBackendCreateDescriptor");
  ds->d[ds->n++] = *out;
  return SG_OK;
}

static void descs_free(descs *ds) {
  for (int i = ds->n - 1; i >= 0; i--) cudnnBackendDestroyDescriptor(ds->d[i]);
  ds->n = 0;
}

#define SET(d, attr, type, n, ptr) DNN(cudnnBackendSetAttribute(d, attr, type, n, ptr), #attr)

static sg_status tensor(descs *ds, int64_t uid, const int64_t *dims, bool virt,
                        cudnnBackendDescriptor_t *out) {
  SG_CHECK(make(ds, CUDNN_BACKEND_TENSOR_DESCRIPTOR, out));
  int64_t strides[4] = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1}, align = 16;
  cudnnDataType_t t = CUDNN_DATA_FLOAT;
  bool v = virt;
  SET(*out, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &t);
  SET(*out, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
  SET(*out, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
  SET(*out, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  SET(*out, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
  if (virt) SET(*out, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &v);
  DNN(cudnnBackendFinalize(*out), "tensor descriptor");
  return SG_OK;
}

/* The dims of x, w and y of op, whatever its direction. */
static void conv_dims(const sg_graph *g, const sg__op *op, const int64_t **x, const int64_t **w,
                      const int64_t **y) {
  const sg__tensor *a = sg__cuda_in(g, op, 0), *b = sg__cuda_in(g, op, 1), *o = sg__cuda_out(g, op, 0);
  switch (op->kind) {
    case SG_OP_CONV2D: *x = a->dims, *w = b->dims, *y = o->dims; break;
    case SG_OP_CONV2D_BACKWARD_DATA: *y = a->dims, *w = b->dims, *x = o->dims; break;
    default: *y = a->dims, *x = b->dims, *w = o->dims; break;
  }
}

sg_status sg__cuda_conv_graph(const sg_graph *g, const sg__op *op, cudnnHandle_t handle, void *descs_out,
                              cudnnBackendDescriptor_t *graph) {
  descs *ds = descs_out;
  const int64_t *xd, *wd, *yd;
  conv_dims(g, op, &xd, &wd, &yd);
  const int64_t *s = sg__attr_ints(op, STRIDE), *p = sg__attr_ints(op, PADDING),
                *d = sg__attr_ints(op, DILATION);
  bool bias = op->kind == SG_OP_CONV2D && sg__cuda_in(g, op, 2) != NULL;
  cudnnBackendDescriptor_t x, w, y, conv, cop;
  SG_CHECK(tensor(ds, UID_X, xd, false, &x));
  SG_CHECK(tensor(ds, UID_W, wd, false, &w));
  SG_CHECK(tensor(ds, bias ? UID_CONV : UID_Y, yd, bias, &y));
  SG_CHECK(make(ds, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &conv));
  int64_t dims = 2, pre[2] = {p[0], p[1]}, post[2] = {p[2], p[3]};
  cudnnDataType_t ct = CUDNN_DATA_FLOAT;
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  SET(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims);
  SET(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &ct);
  SET(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  SET(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, d);
  SET(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, s);
  SET(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pre);
  SET(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, post);
  DNN(cudnnBackendFinalize(conv), "convolution descriptor");
  float one = 1.0f, zero = 0.0f;
  cudnnBackendDescriptor_t ops[2];
  int n_ops = 1;
  cudnnBackendDescriptorType_t type = op->kind == SG_OP_CONV2D
                                          ? CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR
                                      : op->kind == SG_OP_CONV2D_BACKWARD_DATA
                                          ? CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR
                                          : CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR;
  SG_CHECK(make(ds, type, &cop));
  const cudnnBackendAttributeType_t D = CUDNN_TYPE_BACKEND_DESCRIPTOR;
  if (op->kind == SG_OP_CONV2D) {
    SET(cop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, D, 1, &x);
    SET(cop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, D, 1, &w);
    SET(cop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, D, 1, &y);
    SET(cop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, D, 1, &conv);
    SET(cop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &one);
    SET(cop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &zero);
  } else if (op->kind == SG_OP_CONV2D_BACKWARD_DATA) {
    SET(cop, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, D, 1, &x);
    SET(cop, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, D, 1, &w);
    SET(cop, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, D, 1, &y);
    SET(cop, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, D, 1, &conv);
    SET(cop, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_TYPE_FLOAT, 1, &one);
    SET(cop, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA, CUDNN_TYPE_FLOAT, 1, &zero);
  } else {
    SET(cop, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, D, 1, &x);
    SET(cop, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, D, 1, &w);
    SET(cop, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, D, 1, &y);
    SET(cop, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, D, 1, &conv);
    SET(cop, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_TYPE_FLOAT, 1, &one);
    SET(cop, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA, CUDNN_TYPE_FLOAT, 1, &zero);
  }
  DNN(cudnnBackendFinalize(cop), "convolution operation");
  ops[0] = cop;
  if (bias) { /* y = conv + b, b [1, K, 1, 1] broadcast */
    cudnnBackendDescriptor_t b, out, add, pw;
    int64_t bd[4] = {1, yd[1], 1, 1};
    SG_CHECK(tensor(ds, UID_B, bd, false, &b));
    SG_CHECK(tensor(ds, UID_Y, yd, false, &out));
    SG_CHECK(make(ds, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, &pw));
    cudnnPointwiseMode_t pm = CUDNN_POINTWISE_ADD;
    SET(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &pm);
    SET(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &ct);
    DNN(cudnnBackendFinalize(pw), "pointwise descriptor");
    SG_CHECK(make(ds, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, &add));
    SET(add, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, D, 1, &pw);
    SET(add, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, D, 1, &y);
    SET(add, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, D, 1, &b);
    SET(add, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, D, 1, &out);
    DNN(cudnnBackendFinalize(add), "bias operation");
    ops[n_ops++] = add;
  }
  SG_CHECK(make(ds, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, graph));
  SET(*graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, D, n_ops, ops);
  if (handle != NULL) SET(*graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  DNN(cudnnBackendFinalize(*graph), "operation graph");
  return SG_OK;
}

size_t sg__cuda_conv_descs_size(void) { return sizeof(descs); }
void sg__cuda_conv_descs_free(void *ds) { descs_free(ds); }

/* ---- the kernel ---------------------------------------------------------------- */

typedef struct legacy {
  cudnnTensorDescriptor_t x, y, b;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
  int algo; /* cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t */
} legacy;

typedef struct conv_kernel {
  sg__kernel base;
  descs ds; /* the graph's descriptors, then the plan and the variant pack */
  cudnnBackendDescriptor_t plan, pack;
  int64_t uids[4];
  int slot[4]; /* per uid: in[i] (i >= 0) or out[-1 - i] */
  int n_uids;
  void *ptrs[4]; /* what the variant pack was made with */
  void *ws_ptr;  /* and the workspace it was made with (it moves when it grows) */
  size_t ws;
  bool use_legacy;
  legacy lg;
} conv_kernel;

/* Whether an engine configuration keeps the numerics asked for. */
static bool acceptable(const sg__cuda_state *st, cudnnBackendDescriptor_t cfg) {
  cudnnBackendDescriptor_t engine;
  if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine) != CUDNN_STATUS_SUCCESS)
    return false;
  int64_t n = 0;
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  bool ok = cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                     &engine) == CUDNN_STATUS_SUCCESS &&
            cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                     CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes) == CUDNN_STATUS_SUCCESS;
  for (int64_t i = 0; ok && i < n; i++) {
    if (!st->tf32 && (notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE ||
                      notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS ||
                      notes[i] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION))
      ok = false;
    if (st->deterministic && notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) ok = false;
  }
  cudnnBackendDestroyDescriptor(engine);
  return ok;
}

enum { MAX_CONFIGS = 16 };

/* The heuristics' configurations in order; the first acceptable one that
 * finalizes becomes k->plan. Returns false (no error) when none does. */
static sg_status choose_plan(sg__cuda_state *st, conv_kernel *k, cudnnBackendDescriptor_t graph,
                             bool *found) {
  *found = false;
  cudnnBackendDescriptor_t heur, cfgs[MAX_CONFIGS];
  SG_CHECK(make(&k->ds, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur));
  cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  SET(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
  SET(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  DNN(cudnnBackendFinalize(heur), "engine heuristics");
  int made = 0;
  sg_status s = SG_OK;
  for (; made < MAX_CONFIGS; made++)
    if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[made]) != CUDNN_STATUS_SUCCESS)
      break;
  int64_t n = 0;
  cudnnStatus_t e = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                             CUDNN_TYPE_BACKEND_DESCRIPTOR, made, &n, cfgs);
  if (e != CUDNN_STATUS_SUCCESS) s = sg__cudnn_error(e, "heuristics results");
  for (int64_t i = 0; s == SG_OK && i < n && !*found; i++) {
    if (!acceptable(st, cfgs[i])) continue;
    cudnnBackendDescriptor_t plan;
    if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan) != CUDNN_STATUS_SUCCESS)
      continue;
    int64_t ws = 0, got = 0;
    if (cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &st->dnn) ==
            CUDNN_STATUS_SUCCESS &&
        cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                 1, &cfgs[i]) == CUDNN_STATUS_SUCCESS &&
        cudnnBackendFinalize(plan) == CUDNN_STATUS_SUCCESS &&
        cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got,
                                 &ws) == CUDNN_STATUS_SUCCESS) {
      k->plan = plan;
      k->ws = (size_t)ws;
      *found = true;
    } else {
      cudnnBackendDestroyDescriptor(plan);
    }
  }
  for (int i = 0; i < made; i++) cudnnBackendDestroyDescriptor(cfgs[i]);
  return s;
}

/* ---- the legacy API ---------------------------------------------------------- */

static sg_status legacy_build(sg__cuda_state *st, const sg_graph *g, const sg__op *op, conv_kernel *k) {
  const int64_t *xd, *wd, *yd;
  conv_dims(g, op, &xd, &wd, &yd);
  const int64_t *s = sg__attr_ints(op, STRIDE), *p = sg__attr_ints(op, PADDING),
                *d = sg__attr_ints(op, DILATION);
  int64_t groups = sg__attr_i(op, GROUPS);
  if (p[0] != p[2] || p[1] != p[3])
    return sg__op_error(
        op, SG_ERR_UNSUPPORTED,
        "cuDNN found no engine for this convolution and its legacy API needs symmetric padding");
  legacy *l = &k->lg;
  DNN(cudnnCreateTensorDescriptor(&l->x), "tensor descriptor");
  DNN(cudnnCreateTensorDescriptor(&l->y), "tensor descriptor");
  DNN(cudnnCreateFilterDescriptor(&l->w), "filter descriptor");
  DNN(cudnnCreateConvolutionDescriptor(&l->conv), "convolution descriptor");
  DNN(cudnnSetTensor4dDescriptor(l->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, (int)xd[0], (int)xd[1],
                                 (int)xd[2], (int)xd[3]),
      "x");
  DNN(cudnnSetTensor4dDescriptor(l->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, (int)yd[0], (int)yd[1],
                                 (int)yd[2], (int)yd[3]),
      "y");
  DNN(cudnnSetFilter4dDescriptor(l->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, (int)wd[0], (int)wd[1],
                                 (int)wd[2], (int)wd[3]),
      "w");
  DNN(cudnnSetConvolution2dDescriptor(l->conv, (int)p[0], (int)p[1], (int)s[0], (int)s[1], (int)d[0],
                                      (int)d[1], CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
      "convolution");
  DNN(cudnnSetConvolutionGroupCount(l->conv, (int)(groups > 1 ? groups : 1)), "groups");
  DNN(cudnnSetConvolutionMathType(l->conv, st->tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH), "math type");
  if (op->kind == SG_OP_CONV2D && sg__cuda_in(g, op, 2) != NULL) {
    DNN(cudnnCreateTensorDescriptor(&l->b), "bias descriptor");
    DNN(cudnnSetTensor4dDescriptor(l->b, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, (int)yd[1], 1, 1), "bias");
  }
  int n = 0;
  size_t ws = 0;
  l->algo = -1;
  if (op->kind == SG_OP_CONV2D) {
    cudnnConvolutionFwdAlgoPerf_t perf[8];
    DNN(cudnnGetConvolutionForwardAlgorithm_v7(st->dnn, l->x, l->w, l->conv, l->y, 8, &n, perf),
        "algorithms");
    for (int i = 0; i < n && l->algo < 0; i++)
      if (perf[i].status == CUDNN_STATUS_SUCCESS &&
          (!st->deterministic || perf[i].determinism == CUDNN_DETERMINISTIC))
        l->algo = (int)perf[i].algo, ws = perf[i].memory;
  } else if (op->kind == SG_OP_CONV2D_BACKWARD_DATA) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[8];
    DNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(st->dnn, l->w, l->y, l->conv, l->x, 8, &n, perf),
        "algorithms");
    for (int i = 0; i < n && l->algo < 0; i++)
      if (perf[i].status == CUDNN_STATUS_SUCCESS &&
          (!st->deterministic || perf[i].determinism == CUDNN_DETERMINISTIC))
        l->algo = (int)perf[i].algo, ws = perf[i].memory;
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[8];
    DNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(st->dnn, l->x, l->y, l->conv, l->w, 8, &n, perf),
        "algorithms");
    for (int i = 0; i < n && l->algo < 0; i++)
      if (perf[i].status == CUDNN_STATUS_SUCCESS &&
          (!st->deterministic || perf[i].determinism == CUDNN_DETERMINISTIC))
        l->algo = (int)perf[i].algo, ws = perf[i].memory;
  }
  if (l->algo < 0) return sg__op_error(op, SG_ERR_UNSUPPORTED, "cuDNN has no algorithm for this convolution");
  k->ws = ws;
  k->use_legacy = true;
  return SG_OK;
}

static sg_status legacy_run(sg__cuda_state *st, conv_kernel *k, void *const *in, void *const *out) {
  legacy *l = &k->lg;
  float one = 1.0f, zero = 0.0f;
  void *ws = k->ws ? st->workspace : NULL;
  switch (k->base.kind) {
    case SG_OP_CONV2D:
      DNN(cudnnConvolutionForward(st->dnn, &one, l->x, in[0], l->w, in[1], l->conv,
                                  (cudnnConvolutionFwdAlgo_t)l->algo, ws, k->ws, &zero, l->y, out[0]),
          k->base.name);
      if (l->b) DNN(cudnnAddTensor(st->dnn, &one, l->b, in[2], &one, l->y, out[0]), k->base.name);
      return SG_OK;
    case SG_OP_CONV2D_BACKWARD_DATA:
      DNN(cudnnConvolutionBackwardData(st->dnn, &one, l->w, in[1], l->y, in[0], l->conv,
                                       (cudnnConvolutionBwdDataAlgo_t)l->algo, ws, k->ws, &zero, l->x,
                                       out[0]),
          k->base.name);
      return SG_OK;
    default:
      DNN(cudnnConvolutionBackwardFilter(st->dnn, &one, l->x, in[1], l->y, in[0], l->conv,
                                         (cudnnConvolutionBwdFilterAlgo_t)l->algo, ws, k->ws, &zero, l->w,
                                         out[0]),
          k->base.name);
      return SG_OK;
  }
}

static void conv_destroy(sg__cuda_state *st, sg__kernel *base) {
  (void)st;
  conv_kernel *k = (conv_kernel *)base;
  if (k->pack) cudnnBackendDestroyDescriptor(k->pack);
  if (k->plan) cudnnBackendDestroyDescriptor(k->plan);
  descs_free(&k->ds);
  legacy *l = &k->lg;
  if (l->x) cudnnDestroyTensorDescriptor(l->x);
  if (l->y) cudnnDestroyTensorDescriptor(l->y);
  if (l->b) cudnnDestroyTensorDescriptor(l->b);
  if (l->w) cudnnDestroyFilterDescriptor(l->w);
  if (l->conv) cudnnDestroyConvolutionDescriptor(l->conv);
}

/* The variant pack for these pointers and the workspace (remade only when
 * one of them changes). */
static sg_status variant_pack(sg__cuda_state *st, conv_kernel *k, void *const *in, void *const *out) {
  void *ptrs[4];
  for (int i = 0; i < k->n_uids; i++) ptrs[i] = k->slot[i] >= 0 ? in[k->slot[i]] : out[-1 - k->slot[i]];
  void *ws = k->ws ? st->workspace : NULL;
  if (k->pack != NULL && ws == k->ws_ptr && memcmp(ptrs, k->ptrs, (size_t)k->n_uids * sizeof *ptrs) == 0)
    return SG_OK;
  if (k->pack != NULL) cudnnBackendDestroyDescriptor(k->pack);
  k->pack = NULL;
  cudnnBackendDescriptor_t pack;
  DNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack), "variant pack");
  cudnnStatus_t e = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                                             k->n_uids, ptrs);
  if (e == CUDNN_STATUS_SUCCESS)
    e = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, k->n_uids,
                                 k->uids);
  if (e == CUDNN_STATUS_SUCCESS)
    e = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
  if (e == CUDNN_STATUS_SUCCESS) e = cudnnBackendFinalize(pack);
  if (e != CUDNN_STATUS_SUCCESS) {
    cudnnBackendDestroyDescriptor(pack);
    return sg__cudnn_error(e, "variant pack");
  }
  k->pack = pack;
  k->ws_ptr = ws;
  memcpy(k->ptrs, ptrs, sizeof ptrs);
  return SG_OK;
}

static sg_status conv_run(sg__cuda_state *st, sg__kernel *base, void *const *in, void *const *out,
                          const sg__run_ctx *ctx) {
  (void)ctx;
  conv_kernel *k = (conv_kernel *)base;
  if (k->use_legacy) return legacy_run(st, k, in, out);
  SG_CHECK(variant_pack(st, k, in, out));
  DNN(cudnnBackendExecute(st->dnn, k->plan, k->pack), k->base.name);
  return SG_OK;
}

sg_status sg__cuda_create_conv(sg__cuda_state *st, const sg_graph *g, const sg__op *op, sg__kernel **out) {
  const sg__tensor *y = sg__cuda_out(g, op, 0), *a = sg__cuda_in(g, op, 0), *b = sg__cuda_in(g, op, 1);
  if (y->dtype != SG_F32 || a->dtype != SG_F32 || b->dtype != SG_F32 || y->ndim != 4)
    return sg__cuda_unsupported(g, op, "");
  SG_CHECK(sg__cuda_kernel_new(op, sizeof(conv_kernel), conv_run, out));
  conv_kernel *k = (conv_kernel *)*out;
  k->base.destroy = conv_destroy;
  /* The pointers each tensor of the graph takes, in the graph's op order. */
  switch (op->kind) {
    case SG_OP_CONV2D: {
      int64_t u[] = {UID_X, UID_W, UID_Y, UID_B};
      int sl[] = {0, 1, -1, 2};
      k->n_uids = sg__cuda_in(g, op, 2) != NULL ? 4 : 3;
      memcpy(k->uids, u, sizeof u), memcpy(k->slot, sl, sizeof sl);
      break;
    }
    case SG_OP_CONV2D_BACKWARD_DATA: {
      int64_t u[] = {UID_Y, UID_W, UID_X};
      int sl[] = {0, 1, -1};
      k->n_uids = 3;
      memcpy(k->uids, u, sizeof u), memcpy(k->slot, sl, sizeof sl);
      break;
    }
    default: {
      int64_t u[] = {UID_Y, UID_X, UID_W};
      int sl[] = {0, 1, -1};
      k->n_uids = 3;
      memcpy(k->uids, u, sizeof u), memcpy(k->slot, sl, sizeof sl);
      break;
    }
  }
  cudnnBackendDescriptor_t graph;
  bool found = false;
  sg_status s = sg__cuda_conv_graph(g, op, st->dnn, &k->ds, &graph);
  if (s == SG_OK) s = choose_plan(st, k, graph, &found);
  if (s != SG_OK || !found) {
    /* The graph API could not take it: the legacy API may. */
    if (s != SG_OK)
      SG_INFO("cuda: %s: cuDNN graph API: %s; trying the legacy API", op->name, sg_last_error());
    s = legacy_build(st, g, op, k);
  }
  if (s == SG_OK) s = sg__cuda_workspace_reserve(st, k->ws);
  if (s != SG_OK) {
    conv_destroy(st, &k->base);
    sg__free(k);
    *out = NULL;
  }
  return s;
}
