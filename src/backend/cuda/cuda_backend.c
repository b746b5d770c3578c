/* The CUDA backend's table (backend.h, docs/cuda.md): device memory from
 * cudaMalloc, copies through pinned staging, kernels from cuBLASLt
 * (products), cuDNN (convolutions) and generated CUDA C (every op the
 * kernel IR expresses: elementwise chains, sums that end them, optimizer
 * updates; cuda_emit.c, cuda_module.c). The driver API is never called:
 * the runtime loads cubins itself (cudaLibraryLoadData), so libsgrt links
 * no libcuda and loads on machines without a GPU or a driver, where
 * creating this backend fails with SG_ERR_DEVICE saying why. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_nvrtc.h"

/* ---- errors ------------------------------------------------------------------- */

/* Errors after which the context is unusable (CUDA's documentation: "the
 * process must be terminated and relaunched"). */
static bool sticky(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorLaunchTimeout:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorECCUncorrectable:
    case cudaErrorAssert:
    case cudaErrorContextIsDestroyed:
    case cudaErrorDevicesUnavailable:
    case cudaErrorUnknown: return true;
    default: return false;
  }
}

sg_status sg__cuda_error(sg__cuda_state *st, cudaError_t e, const char *what) {
  if (e == cudaErrorMemoryAllocation)
    return sg__error(SG_ERR_NO_MEMORY, "cuda: %s: out of device memory (%s)", what, cudaGetErrorString(e));
  if (st != NULL && sticky(e) && !st->failed) {
    st->failed = true;
    snprintf(st->failure, sizeof st->failure, "%s: %s (%s)", what, cudaGetErrorName(e),
             cudaGetErrorString(e));
  }
  return sg__error(SG_ERR_DEVICE, "cuda: %s: %s (%s)%s", what, cudaGetErrorName(e), cudaGetErrorString(e),
                   sticky(e) ? "; the GPU context is lost" : "");
}

sg_status sg__cudnn_error(cudnnStatus_t s, const char *what) {
  char detail[512] = "";
  cudnnGetLastErrorString(detail, sizeof detail);
  return sg__error(s == CUDNN_STATUS_ALLOC_FAILED ? SG_ERR_NO_MEMORY : SG_ERR_DEVICE, "cudnn: %s: %s%s%s",
                   what, cudnnGetErrorString(s), detail[0] ? ": " : "", detail);
}

sg_status sg__cublas_error(cublasStatus_t s, const char *what) {
  return sg__error(s == CUBLAS_STATUS_ALLOC_FAILED ? SG_ERR_NO_MEMORY : SG_ERR_DEVICE,
                   "cublasLt: %s: %s (%s)", what, cublasLtGetStatusName(s), cublasLtGetStatusString(s));
}

/* Every entry starts here: a failed context stays failed, and the calling
 * thread works on this state's device. */
static sg_status enter(sg__cuda_state *st) {
  if (st->failed) return sg__error(SG_ERR_DEVICE, "cuda:%d failed earlier: %s", st->device, st->failure);
  SG_CUDA(st, cudaSetDevice(st->device), "cudaSetDevice");
  return SG_OK;
}

/* ---- helpers shared by the families ------------------------------------------------ */

sg_status sg__cuda_kernel_new(const sg__op *op, size_t size, sg__cuda_run_fn run, sg__kernel **out) {
  SG_ASSERT(size >= sizeof(sg__kernel));
  sg__kernel *k = sg__calloc(1, size);
  if (k == NULL) return sg__op_error(op, SG_ERR_NO_MEMORY, "out of memory creating its kernel");
  k->run = run;
  k->kind = op->kind;
  snprintf(k->name, sizeof k->name, "%s", op->name ? op->name : "?");
  *out = k;
  return SG_OK;
}

sg_status sg__cuda_unsupported(const sg_graph *g, const sg__op *op, const char *why) {
  const sg__tensor *x = op->n_inputs > 0 && op->inputs[0] >= 0 ? &g->tensors[op->inputs[0]] : NULL;
  return sg__op_error(op, SG_ERR_UNSUPPORTED, "the cuda backend has no kernel for op kind %s with %s%s",
                      sg_op_kind_name(op->kind), x ? sg_dtype_name(x->dtype) : "no inputs", why ? why : "");
}

const sg__tensor *sg__cuda_in(const sg_graph *g, const sg__op *op, int i) {
  return i < op->n_inputs && op->inputs[i] >= 0 ? &g->tensors[op->inputs[i]] : NULL;
}
const sg__tensor *sg__cuda_out(const sg_graph *g, const sg__op *op, int i) {
  return i < op->n_outputs && op->outputs[i] >= 0 ? &g->tensors[op->outputs[i]] : NULL;
}

unsigned sg__cuda_grid(const sg__cuda_state *st, int64_t units, int64_t per_block) {
  int64_t need = (units + per_block - 1) / per_block, cap = (int64_t)st->sm_count * 32;
  return (unsigned)(need < 1 ? 1 : need > cap ? cap : need);
}

sg_status sg__cuda_workspace_reserve(sg__cuda_state *st, size_t bytes) {
  if (bytes <= st->workspace_bytes) return SG_OK;
  /* Kernels created earlier read st->workspace when they run: replacing
   * it is safe at compile time, with nothing in flight. */
  SG_CUDA(st, cudaStreamSynchronize(st->compute), "synchronizing before growing the workspace");
  if (st->workspace) cudaFree(st->workspace);
  st->workspace = NULL;
  st->workspace_bytes = 0;
  SG_CUDA(st, cudaMalloc(&st->workspace, bytes), "the library workspace");
  st->workspace_bytes = bytes;
  return SG_OK;
}

sg_status sg__cuda_check_add(sg__cuda_state *st, sg__cuda_check *c) {
  void *host = NULL, *dev = NULL;
  SG_CUDA(st, cudaHostAlloc(&host, 2 * sizeof(unsigned long long), cudaHostAllocMapped), "mapped memory");
  cudaError_t e = cudaHostGetDevicePointer(&dev, host, 0);
  if (e != cudaSuccess) {
    cudaFreeHost(host);
    return sg__cuda_error(st, e, "mapped memory");
  }
  c->flag = host, c->dflag = dev;
  c->flag[0] = ~0ull, c->flag[1] = 0;
  c->next = st->checks;
  st->checks = c;
  return SG_OK;
}

void sg__cuda_check_remove(sg__cuda_state *st, sg__cuda_check *c) {
  for (sg__cuda_check **p = &st->checks; *p != NULL; p = &(*p)->next)
    if (*p == c) {
      *p = c->next;
      break;
    }
  if (c->flag) cudaFreeHost(c->flag);
  c->flag = c->dflag = NULL;
}

/* After the stream drained: the first check a kernel tripped. */
static sg_status report_checks(sg__cuda_state *st) {
  for (sg__cuda_check *c = st->checks; c != NULL; c = c->next) {
    if (c->flag[0] == ~0ull) continue;
    long long row = (long long)c->flag[0], value = (long long)c->flag[1];
    c->flag[0] = ~0ull;
    return sg__error(SG_ERR_RANGE, "%s: %s %lld %s %lld is outside 0..%lld", c->what,
                     c->value_name ? c->value_name : "label", value, c->index_name ? c->index_name : "of row",
                     row, (long long)c->limit);
  }
  return SG_OK;
}

/* ---- the table ---------------------------------------------------------------- */

/* What the user should know when there is no GPU to use. */
static const char *no_gpu_hint(cudaError_t e) {
  switch (e) {
    case cudaErrorInsufficientDriver:
    case cudaErrorStubLibrary:
      return " -- no NVIDIA driver is installed (libcuda.so.1 not found), or it is older than this CUDA "
             "runtime needs";
    case cudaErrorNoDevice: return " -- the driver sees no GPU (check nvidia-smi and CUDA_VISIBLE_DEVICES)";
    default: return "";
  }
}

static bool env_on(const char *name) {
  const char *v = getenv(name);
  return v != NULL && strcmp(v, "1") == 0;
}

static void cuda_destroy(void *state);

static sg_status cuda_create(const sg__backend_config *cfg, void **out) {
  *out = NULL;
  if (cfg->matmul_bf16)
    return sg__error(SG_ERR_UNSUPPORTED, "cuda: matmul_precision bf16 is implemented on device 'cpu' only; "
                                         "SG_CUDA_TF32=1 is the CUDA backend's reduced-precision products");
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess)
    return sg__error(SG_ERR_DEVICE, "cuda: no usable GPU: cudaGetDeviceCount: %s (%s)%s", cudaGetErrorName(e),
                     cudaGetErrorString(e), no_gpu_hint(e));
  if (cfg->device < 0 || cfg->device >= n)
    return sg__error(SG_ERR_DEVICE, "cuda: no device cuda:%d (this machine has %d GPU%s: cuda:0..cuda:%d)",
                     cfg->device, n, n == 1 ? "" : "s", n - 1);
  sg__cuda_state *st = sg__calloc(1, sizeof *st);
  if (st == NULL) return sg__error(SG_ERR_NO_MEMORY, "cuda: out of memory");
  st->device = cfg->device;
  sg_status s = SG_OK;
  struct cudaDeviceProp prop;
  if ((e = cudaSetDevice(st->device)) != cudaSuccess ||
      (e = cudaGetDeviceProperties(&prop, st->device)) != cudaSuccess) {
    s = sg__cuda_error(st, e, "opening the device");
    goto fail;
  }
  snprintf(st->name, sizeof st->name, "%s", prop.name);
  st->cc = 10 * prop.major + prop.minor;
  st->sm_count = prop.multiProcessorCount;
  st->memory = prop.totalGlobalMem;
  if ((e = cudaStreamCreateWithFlags(&st->compute, cudaStreamNonBlocking)) != cudaSuccess ||
      (e = cudaStreamCreateWithFlags(&st->copy, cudaStreamNonBlocking)) != cudaSuccess ||
      (e = cudaEventCreateWithFlags(&st->staged[0], cudaEventDisableTiming)) != cudaSuccess ||
      (e = cudaEventCreateWithFlags(&st->staged[1], cudaEventDisableTiming)) != cudaSuccess) {
    s = sg__cuda_error(st, e, "creating streams");
    goto fail;
  }
  cublasStatus_t b = cublasLtCreate(&st->lt);
  if (b != CUBLAS_STATUS_SUCCESS) {
    s = sg__cublas_error(b, "cublasLtCreate");
    goto fail;
  }
  cudnnStatus_t d = cudnnCreate(&st->dnn);
  if (d == CUDNN_STATUS_SUCCESS) d = cudnnSetStream(st->dnn, st->compute);
  if (d != CUDNN_STATUS_SUCCESS) {
    s = sg__cudnn_error(d, "cudnnCreate");
    goto fail;
  }
  /* Strict fp32 unless asked; NVIDIA's own override wins (as in cuBLAS). */
  const char *ov = getenv("NVIDIA_TF32_OVERRIDE");
  st->tf32 = env_on("SG_CUDA_TF32") && !(ov != NULL && strcmp(ov, "0") == 0);
  st->deterministic = env_on("SG_CUDA_DETERMINISTIC");
  if ((s = sg__cuda_nvrtc_version(st->nvrtc, sizeof st->nvrtc)) != SG_OK) goto fail;
  SG_INFO("cuda:%d: %s, compute capability %d.%d, %d SMs, %.1f GiB%s%s", st->device, st->name, st->cc / 10,
          st->cc % 10, st->sm_count, (double)st->memory / (1 << 30), st->tf32 ? ", TF32" : "",
          st->deterministic ? ", deterministic" : "");
  *out = st;
  return SG_OK;
fail:
  cuda_destroy(st);
  return s;
}

static void cuda_destroy(void *state) {
  sg__cuda_state *st = state;
  if (st == NULL) return;
  cudaSetDevice(st->device);
  if (st->compute && !st->failed) cudaStreamSynchronize(st->compute);
  sg__cuda_library_release(st, NULL);
  if (st->dnn) cudnnDestroy(st->dnn);
  if (st->lt) cublasLtDestroy(st->lt);
  if (st->workspace) cudaFree(st->workspace);
  if (st->staging) cudaFreeHost(st->staging);
  for (int i = 0; i < 2; i++)
    if (st->staged[i]) cudaEventDestroy(st->staged[i]);
  if (st->copy) cudaStreamDestroy(st->copy);
  if (st->compute) cudaStreamDestroy(st->compute);
  sg__free(st);
}

static sg_status cuda_buffer_alloc(void *state, size_t bytes, void **out) {
  sg__cuda_state *st = state;
  *out = NULL;
  SG_CHECK(enter(st));
  void *p = NULL;
  SG_CUDA(st, cudaMalloc(&p, bytes ? bytes : 256), "cudaMalloc");
  cudaError_t e = cudaMemsetAsync(p, 0, bytes, st->compute);
  if (e == cudaSuccess) e = cudaStreamSynchronize(st->compute);
  if (e != cudaSuccess) {
    cudaFree(p);
    return sg__cuda_error(st, e, "zeroing new device memory");
  }
  *out = p;
  return SG_OK;
}

static void cuda_buffer_free(void *state, void *buf) {
  sg__cuda_state *st = state;
  if (buf == NULL) return;
  cudaSetDevice(st->device);
  cudaFree(buf);
}

static sg_status staging(sg__cuda_state *st) {
  if (st->staging == NULL)
    SG_CUDA(st, cudaMallocHost(&st->staging, SG__CUDA_STAGING), "pinned staging memory");
  /* Whatever compute still does may read or write the tensor. */
  SG_CUDA(st, cudaStreamSynchronize(st->compute), "waiting for the compute stream");
  return SG_OK;
}

/* Host -> device in halves of the staging buffer: the host fills one half
 * while the other half's copy runs. */
static sg_status cuda_upload(void *state, void *dst, const void *src, size_t bytes) {
  sg__cuda_state *st = state;
  SG_CHECK(enter(st));
  SG_CHECK(staging(st));
  const size_t half = SG__CUDA_STAGING / 2;
  for (size_t off = 0, h = 0; off < bytes; off += half, h ^= 1) {
    size_t n = bytes - off < half ? bytes - off : half;
    uint8_t *buf = (uint8_t *)st->staging + h * half;
    SG_CUDA(st, cudaEventSynchronize(st->staged[h]), "waiting for staging");
    memcpy(buf, (const uint8_t *)src + off, n);
    SG_CUDA(st, cudaMemcpyAsync((uint8_t *)dst + off, buf, n, cudaMemcpyHostToDevice, st->copy),
            "copy to device");
    SG_CUDA(st, cudaEventRecord(st->staged[h], st->copy), "cudaEventRecord");
  }
  SG_CUDA(st, cudaStreamSynchronize(st->copy), "copy to device");
  return SG_OK;
}

/* Device -> host: chunk i is copied while the host takes chunk i - 1 out
 * of the other half. */
static sg_status cuda_download(void *state, void *dst, const void *src, size_t bytes) {
  sg__cuda_state *st = state;
  SG_CHECK(enter(st));
  SG_CHECK(staging(st));
  const size_t half = SG__CUDA_STAGING / 2;
  size_t prev_off = 0, prev_n = 0;
  for (size_t off = 0, h = 0; off < bytes; off += half, h ^= 1) {
    size_t n = bytes - off < half ? bytes - off : half;
    SG_CUDA(st,
            cudaMemcpyAsync((uint8_t *)st->staging + h * half, (const uint8_t *)src + off, n,
                            cudaMemcpyDeviceToHost, st->copy),
            "copy to host");
    SG_CUDA(st, cudaEventRecord(st->staged[h], st->copy), "cudaEventRecord");
    if (prev_n > 0) {
      SG_CUDA(st, cudaEventSynchronize(st->staged[h ^ 1]), "copy to host");
      memcpy((uint8_t *)dst + prev_off, (uint8_t *)st->staging + (h ^ 1) * half, prev_n);
    }
    prev_off = off, prev_n = n;
  }
  if (prev_n > 0) {
    size_t h = (prev_off / half) & 1;
    SG_CUDA(st, cudaEventSynchronize(st->staged[h]), "copy to host");
    memcpy((uint8_t *)dst + prev_off, (uint8_t *)st->staging + h * half, prev_n);
  }
  return SG_OK;
}

/* The families by op kind; NULL: no kernel of our own (generated kernels
 * take what the IR expresses, supports_op says false for the rest). */
typedef sg_status (*family_fn)(sg__cuda_state *st, const sg_graph *g, const sg__op *op, sg__kernel **out);

static family_fn family(sg_op_kind kind) {
  switch (kind) {
    case SG_OP_GEMM:
    case SG_OP_MATMUL: return sg__cuda_create_gemm;
    case SG_OP_CONV2D:
    case SG_OP_CONV2D_BACKWARD_DATA:
    case SG_OP_CONV2D_BACKWARD_WEIGHT: return sg__cuda_create_conv;
    case SG_OP_MAX_POOL2D:
    case SG_OP_MAX_POOL2D_BACKWARD:
    case SG_OP_AVG_POOL2D:
    case SG_OP_GLOBAL_AVG_POOL: return sg__cuda_create_pool;
    case SG_OP_CROSS_ENTROPY:
    case SG_OP_CROSS_ENTROPY_BACKWARD: return sg__cuda_create_cross_entropy;
    case SG_OP_SOFTMAX:
    case SG_OP_LOG_SOFTMAX:
    case SG_OP_SOFTMAX_BACKWARD:
    case SG_OP_LOG_SOFTMAX_BACKWARD:
    case SG_OP_LAYER_NORM:
    case SG_OP_LAYER_NORM_BACKWARD: return sg__cuda_create_rows;
    case SG_OP_CONCAT:
    case SG_OP_SLICE: return sg__cuda_create_runs;
    case SG_OP_REDUCE_SUM:
    case SG_OP_REDUCE_MEAN:
    case SG_OP_SUM_TO: return sg__cuda_create_sum;
    case SG_OP_EMBEDDING:
    case SG_OP_EMBEDDING_BACKWARD: return sg__cuda_create_embedding;
    default: return (sg__op_flags(kind) & SG__OP_VIEW) ? sg__cuda_create_view : NULL;
  }
}

/* Compiled for a mode (batch or running statistics; dropout on or off). */
static bool is_batch_norm(sg_op_kind kind) {
  return kind == SG_OP_BATCH_NORM || kind == SG_OP_BATCH_NORM_BACKWARD;
}
static bool is_dropout(sg_op_kind kind) { return kind == SG_OP_DROPOUT || kind == SG_OP_DROPOUT_BACKWARD; }

static sg_status cuda_kernel_create(void *state, const sg_graph *g, int32_t op, sg__exec_mode mode,
                                    sg__kernel **out) {
  sg__cuda_state *st = state;
  *out = NULL;
  if (op < 0 || (uint32_t)op >= g->n_ops)
    return sg__error(SG_ERR_INVALID_ARG, "cuda kernel_create: no op %d", op);
  SG_CHECK(enter(st));
  const sg__op *o = &g->ops[op];
  /* Batch norm is compiled for a mode (batch or running statistics). */
  if (is_batch_norm(o->kind)) return sg__cuda_create_batch_norm(st, g, o, mode, out);
  if (is_dropout(o->kind)) return sg__cuda_create_dropout(st, g, o, mode, out);
  /* No CUDA kernel yet (supports_op says false); said here in words, since the generic refusal below
   * would point at generated kernels, which cannot express it either. */
  if (o->kind == SG_OP_ATTENTION || o->kind == SG_OP_ATTENTION_BACKWARD)
    return sg__op_error(o, SG_ERR_UNSUPPORTED,
                        "the cuda backend has no kernel for op kind %s: fused attention runs on the CPU "
                        "backend; build attention from matmul/softmax for CUDA",
                        sg_op_kind_name(o->kind));
  family_fn f = family(o->kind);
  if (f == NULL)
    return sg__cuda_unsupported(g, o, " (what the kernel IR expresses runs as a generated kernel)");
  return f(st, g, o, out);
}

static sg_status cuda_kernel_run(void *state, sg__kernel *k, void *const *in, void *const *out,
                                 const sg__run_ctx *ctx) {
  sg__cuda_state *st = state;
  if (st == NULL || k == NULL || ctx == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "cuda kernel_run: NULL argument");
  SG_CHECK(enter(st));
  return k->run(st, k, in, out, ctx);
}

static void cuda_kernel_destroy(void *state, sg__kernel *k) {
  if (k == NULL) return;
  if (k->destroy) k->destroy(state, k);
  sg__free(k);
}

static sg_status cuda_synchronize(void *state) {
  sg__cuda_state *st = state;
  SG_CHECK(enter(st));
  SG_CUDA(st, cudaStreamSynchronize(st->compute), "running the step");
  /* A launch error surfaces here too (an asynchronous fault of a kernel). */
  SG_CUDA(st, cudaGetLastError(), "running the step");
  return report_checks(st);
}

static bool cuda_is_host(void *state) {
  (void)state;
  return false;
}

static bool cuda_supports_op(void *state, sg_op_kind kind) {
  (void)state;
  return family(kind) != NULL || is_batch_norm(kind) || is_dropout(kind);
}

/* Fault injection (SPEC H6): the state a sticky error leaves, without the error. */
static void cuda_fail(void *state, const char *why) {
  sg__cuda_state *st = state;
  if (st == NULL || st->failed) return;
  st->failed = true;
  snprintf(st->failure, sizeof st->failure, "%s", why ? why : "?");
}

const sg__backend_i sg__cuda_backend = {
    .version = SG__BACKEND_VERSION,
    .name = "cuda",
    .create = cuda_create,
    .destroy = cuda_destroy,
    .buffer_alloc = cuda_buffer_alloc,
    .buffer_free = cuda_buffer_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .kernel_create = cuda_kernel_create,
    .kernel_run = cuda_kernel_run,
    .kernel_destroy = cuda_kernel_destroy,
    .synchronize = cuda_synchronize,
    .is_host = cuda_is_host,
    .supports_op = cuda_supports_op,
    .plan_layouts = NULL,
    .module_identity = sg__cuda_module_identity,
    .module_build = sg__cuda_module_build,
    .module_artifact = sg__cuda_module_artifact,
    .module_kernel = sg__cuda_module_kernel,
    .module_free = sg__cuda_module_free,
    .fail = cuda_fail,
};
