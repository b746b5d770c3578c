/* The CPU backend's table (backend.h): buffers in host memory, kernels from
 * oneDNN primitives (convolution, matmul/gemm, batch norm, pooling, eltwise
 * activations, softmax) and plain C (everything else). docs/backend.md has
 * the kernel table, the layout decisions and the threading rules. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/dnnl_common.h"

/* GNU OpenMP, the runtime oneDNN is built on (linked as SG_GOMP_LIBRARY);
 * declared here so that sgrt itself is not compiled with -fopenmp. */
extern void omp_set_num_threads(int);
extern int omp_get_thread_num(void);
extern int omp_get_num_threads(void);
extern int omp_get_max_threads(void);
/* What `#pragma omp parallel` compiles to (libgomp >= 4.9). num_threads 0
 * means the thread count set with omp_set_num_threads. */
extern void GOMP_parallel(void (*fn)(void *), void *data, unsigned num_threads, unsigned flags);

void sg__cpu_set_threads(int threads) { omp_set_num_threads(threads); }

typedef struct par_job {
  int64_t n;
  sg__cpu_range_fn fn;
  void *ctx;
} par_job;

static void par_body(void *data) {
  const par_job *j = data;
  int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
  int64_t b = j->n * t / nt, e = j->n * (t + 1) / nt;
  if (b < e) j->fn(j->ctx, b, e);
}

void sg__cpu_parallel_for(int64_t n, int64_t min_parallel, sg__cpu_range_fn fn, void *ctx) {
  if (n <= 0) return;
  if (n < min_parallel || omp_get_max_threads() < 2) {
    fn(ctx, 0, n);
    return;
  }
  par_job j = {n, fn, ctx};
  GOMP_parallel(par_body, &j, 0, 0);
}

/* ---- helpers shared by the families ------------------------------------- */

void *sg__cpu_aligned_alloc(size_t bytes) {
  size_t total;
  if (!sg__add_size(bytes, 64 + sizeof(void *), &total)) return NULL;
  unsigned char *raw = sg__malloc(total);
  if (raw == NULL) return NULL;
  uintptr_t a = ((uintptr_t)raw + sizeof(void *) + 63) & ~(uintptr_t)63;
  void *p = (void *)a;
  ((void **)p)[-1] = raw;
  memset(p, 0, bytes);
  return p;
}

void sg__cpu_aligned_free(void *p) {
  if (p) sg__free(((void **)p)[-1]);
}

sg_status sg__cpu_unsupported(const sg_graph *g, const sg__op *op, const char *why) {
  const sg__tensor *x = op->n_inputs > 0 && op->inputs[0] >= 0 ? &g->tensors[op->inputs[0]] : NULL;
  return sg__op_error(op, SG_ERR_UNSUPPORTED, "the cpu backend has no kernel for op kind %d (%s) with %s%s",
                      (int)op->kind, sg_op_kind_name(op->kind), x ? sg_dtype_name(x->dtype) : "no inputs",
                      why ? why : "");
}

sg_status sg__cpu_kernel_new(const sg__op *op, size_t size, sg__cpu_run_fn run, sg__kernel **out) {
  SG_ASSERT(size >= sizeof(sg__kernel));
  sg__kernel *k = sg__calloc(1, size);
  if (k == NULL) return sg__op_error(op, SG_ERR_NO_MEMORY, "out of memory creating its kernel");
  k->run = run;
  k->kind = op->kind;
  snprintf(k->name, sizeof k->name, "%s", op->name ? op->name : "?");
  *out = k;
  return SG_OK;
}

sg_status sg__cpu_ws_reserve(sg__cpu_state *st, size_t bytes) {
  if (bytes <= st->ws_size) return SG_OK;
  /* Grow by at least half, so that a graph's kernels rarely reallocate. */
  size_t want = st->ws_size + st->ws_size / 2;
  if (want < bytes) want = bytes;
  unsigned char *p = sg__cpu_aligned_alloc(want);
  if (p == NULL)
    return sg__error(SG_ERR_NO_MEMORY, "cpu backend: out of memory for %zu bytes of workspace", want);
  sg__cpu_aligned_free(st->ws);
  st->ws = p;
  st->ws_size = want;
  return SG_OK;
}

/* ---- table entries ------------------------------------------------------ */

static sg_status cpu_create(const sg__backend_config *cfg, void **state) {
  if (cfg == NULL || state == NULL || cfg->threads < 1)
    return sg__error(SG_ERR_INVALID_ARG, "cpu backend: config with threads >= 1 required");
  sg__cpu_state *st = sg__calloc(1, sizeof *st);
  if (st == NULL) return sg__error(SG_ERR_NO_MEMORY, "cpu backend: out of memory");
  st->threads = cfg->threads;
  st->seed = cfg->seed;
  st->matmul_bf16 = cfg->matmul_bf16;
  if (st->matmul_bf16 && !sg__dnnl_native_bf16()) {
    sg__free(st);
    return sg__error(SG_ERR_UNSUPPORTED,
                     "cpu backend: matmul_precision bf16 needs bf16 dot-product instructions (AVX512_BF16 or "
                     "AMX), which this CPU%s lacks; without them bf16 products run slower than f32",
                     getenv("ONEDNN_MAX_CPU_ISA") ? " (as limited by ONEDNN_MAX_CPU_ISA)" : "");
  }
  sg__cpu_set_threads(st->threads);
  sg_status s = sg__dnnl_state_init(st);
  if (s != SG_OK) {
    sg__free(st);
    return s;
  }
  sg__cpu_layout_init(st);
  *state = st;
  return SG_OK;
}

static void cpu_destroy(void *state) {
  sg__cpu_state *st = state;
  if (st == NULL) return;
  sg__cpu_layout_fini(st);
  sg__dnnl_state_fini(st);
  sg__cpu_aligned_free(st->ws);
  sg__free(st);
}

static sg_status cpu_buffer_alloc(void *state, size_t bytes, void **out) {
  (void)state;
  if (out == NULL) return sg__error(SG_ERR_INVALID_ARG, "cpu buffer_alloc: out is NULL");
  void *p = sg__cpu_aligned_alloc(bytes);
  if (p == NULL) return sg__error(SG_ERR_NO_MEMORY, "cpu buffer_alloc: out of memory for %zu bytes", bytes);
  *out = p;
  return SG_OK;
}

static void cpu_buffer_free(void *state, void *buf) {
  (void)state;
  sg__cpu_aligned_free(buf);
}

/* After fail: what a lost device reports (the CPU itself never loses one). */
static sg_status failed(const sg__cpu_state *st) {
  return sg__error(SG_ERR_DEVICE, "cpu: the device failed earlier: %s", st->failure);
}

static void cpu_fail(void *state, const char *why) {
  sg__cpu_state *st = state;
  if (st != NULL && st->failure[0] == '\0') snprintf(st->failure, sizeof st->failure, "%s", why ? why : "?");
}

static sg_status cpu_copy(void *state, void *dst, const void *src, size_t bytes) {
  const sg__cpu_state *st = state;
  if (st != NULL && st->failure[0]) return failed(st);
  if (bytes == 0) return SG_OK;
  if (dst == NULL || src == NULL) return sg__error(SG_ERR_INVALID_ARG, "cpu copy: NULL buffer");
  memmove(dst, src, bytes);
  return SG_OK;
}

/* Which family compiles which op kind. */
static sg__cpu_create_fn family(sg_op_kind kind) {
  switch (kind) {
    case SG_OP_CONV2D:
    case SG_OP_CONV2D_BACKWARD_DATA:
    case SG_OP_CONV2D_BACKWARD_WEIGHT: return sg__cpu_create_conv;
    case SG_OP_BATCH_NORM:
    case SG_OP_BATCH_NORM_BACKWARD: return sg__cpu_create_bnorm;
    case SG_OP_RELU:
    case SG_OP_CLIP:
    case SG_OP_GELU:
    case SG_OP_SIGMOID:
    case SG_OP_TANH:
    case SG_OP_RELU_BACKWARD:
    case SG_OP_CLIP_BACKWARD:
    case SG_OP_GELU_BACKWARD:
    case SG_OP_SIGMOID_BACKWARD:
    case SG_OP_TANH_BACKWARD: return sg__cpu_create_eltwise;
    case SG_OP_ADD:
    case SG_OP_SUB:
    case SG_OP_MUL:
    case SG_OP_DIV:
    case SG_OP_MAX:
    case SG_OP_MIN: return sg__cpu_create_binary;
    case SG_OP_EXP:
    case SG_OP_LOG:
    case SG_OP_SQRT:
    case SG_OP_RECIPROCAL:
    case SG_OP_NEG:
    case SG_OP_ABS:
    case SG_OP_SIGN:
    case SG_OP_ERF:
    case SG_OP_SIN:
    case SG_OP_COS:
    case SG_OP_ACOS:
    case SG_OP_WHERE:
    case SG_OP_CAST: return sg__cpu_create_math;
    case SG_OP_LAYER_NORM:
    case SG_OP_LAYER_NORM_BACKWARD: return sg__cpu_create_layer_norm;
    case SG_OP_EMBEDDING:
    case SG_OP_EMBEDDING_BACKWARD: return sg__cpu_create_embedding;
    case SG_OP_ATTENTION:
    case SG_OP_ATTENTION_BACKWARD: return sg__cpu_create_attention;
    case SG_OP_CUMSUM: return sg__cpu_create_cumsum;
    case SG_OP_REDUCE_MAX:
    case SG_OP_REDUCE_MIN:
    case SG_OP_REDUCE_MAX_BACKWARD: return sg__cpu_create_reduce_max;
    case SG_OP_TOPK:
    case SG_OP_TOPK_BACKWARD: return sg__cpu_create_topk;
    case SG_OP_ADD_SCALAR:
    case SG_OP_MUL_SCALAR:
    case SG_OP_POW_SCALAR: return sg__cpu_create_scalar;
    case SG_OP_MATMUL:
    case SG_OP_GEMM: return sg__cpu_create_matmul;
    case SG_OP_MAX_POOL2D:
    case SG_OP_AVG_POOL2D:
    case SG_OP_MAX_POOL2D_BACKWARD:
    case SG_OP_AVG_POOL2D_BACKWARD: return sg__cpu_create_pool;
    case SG_OP_FLATTEN:
    case SG_OP_RESHAPE:
    case SG_OP_TRANSPOSE:
    case SG_OP_CONCAT:
    case SG_OP_SLICE:
    case SG_OP_BROADCAST_TO: return sg__cpu_create_shape;
    case SG_OP_SOFTMAX:
    case SG_OP_LOG_SOFTMAX:
    case SG_OP_SOFTMAX_BACKWARD:
    case SG_OP_LOG_SOFTMAX_BACKWARD: return sg__cpu_create_softmax;
    case SG_OP_CROSS_ENTROPY:
    case SG_OP_CROSS_ENTROPY_BACKWARD: return sg__cpu_create_loss;
    case SG_OP_GLOBAL_AVG_POOL:
    case SG_OP_REDUCE_MEAN:
    case SG_OP_REDUCE_SUM:
    case SG_OP_SUM_TO: return sg__cpu_create_reduce;
    case SG_OP_DROPOUT:
    case SG_OP_DROPOUT_BACKWARD: return sg__cpu_create_dropout;
    case SG_OP_SGD_UPDATE:
    case SG_OP_ADAMW_UPDATE: return sg__cpu_create_optim;
  }
  return NULL;
}

static sg_status cpu_kernel_create(void *state, const sg_graph *g, int32_t op, sg__exec_mode mode,
                                   sg__kernel **out) {
  sg__cpu_state *st = state;
  if (st == NULL || g == NULL || out == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "cpu kernel_create: NULL argument");
  *out = NULL;
  if (!g->finalized) return sg__error(SG_ERR_STATE, "cpu kernel_create: the graph is not finalized");
  if (op < 0 || (uint32_t)op >= g->n_ops)
    return sg__error(SG_ERR_RANGE, "cpu kernel_create: op %d out of range (graph has %u ops)", (int)op,
                     g->n_ops);
  if (mode != SG__MODE_TRAIN && mode != SG__MODE_EVAL)
    return sg__error(SG_ERR_INVALID_ARG, "cpu kernel_create: unknown mode %d", (int)mode);
  const sg__op *o = &g->ops[op];
  sg__cpu_create_fn fn = family(o->kind);
  int n_attrs = sg__op_attr_count(o->kind);
  if (fn == NULL || n_attrs < 0) return sg__cpu_unsupported(g, o, "");
  if (o->n_attrs != n_attrs)
    return sg__op_error(o, SG_ERR_ATTRIBUTE, "has %d attributes, its kind defines %d", o->n_attrs, n_attrs);
  /* One float dtype (f32) everywhere in this backend; integer dtypes only
   * where a family accepts them (it checks its inputs itself). */
  for (int i = 0; i < o->n_inputs + o->n_outputs; i++) {
    int32_t t = i < o->n_inputs ? o->inputs[i] : o->outputs[i - o->n_inputs];
    if (t < 0) continue;
    sg_dtype dt = g->tensors[t].dtype;
    if (dt == SG_F16 || dt == SG_BF16) {
      char why[64];
      snprintf(why, sizeof why, " (tensor '%s' is %s; only f32 floats are supported)", g->tensors[t].name,
               sg_dtype_name(dt));
      return sg__cpu_unsupported(g, o, why);
    }
  }
  sg__cpu_set_threads(st->threads);
  if (!sg__cpu_layout_native(st, g, o)) return sg__cpu_create_adapted(st, g, o, mode, fn, out);
  return fn(st, g, o, mode, out);
}

static bool cpu_is_host(void *state) {
  (void)state;
  return true;
}

static bool cpu_supports_op(void *state, sg_op_kind kind) {
  (void)state;
  return family(kind) != NULL && sg__op_attr_count(kind) >= 0;
}

static sg_status cpu_kernel_run(void *state, sg__kernel *k, void *const *in, void *const *out,
                                const sg__run_ctx *ctx) {
  sg__cpu_state *st = state;
  if (st == NULL || k == NULL || ctx == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "cpu kernel_run: NULL argument");
  if (st->failure[0]) return failed(st);
  sg__cpu_set_threads(st->threads);
  return k->run(st, k, in, out, ctx);
}

static void cpu_kernel_destroy(void *state, sg__kernel *k) {
  (void)state;
  if (k == NULL) return;
  if (k->destroy) k->destroy(k);
  sg__free(k);
}

static sg_status cpu_synchronize(void *state) {
  sg__cpu_state *st = state;
  if (st == NULL) return sg__error(SG_ERR_INVALID_ARG, "cpu synchronize: NULL state");
  if (st->failure[0]) return failed(st);
  return sg__dnnl_state_wait(st);
}

const sg__backend_i sg__cpu_backend = {
    .version = SG__BACKEND_VERSION,
    .name = "cpu",
    .create = cpu_create,
    .destroy = cpu_destroy,
    .buffer_alloc = cpu_buffer_alloc,
    .buffer_free = cpu_buffer_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .kernel_create = cpu_kernel_create,
    .kernel_run = cpu_kernel_run,
    .kernel_destroy = cpu_kernel_destroy,
    .synchronize = cpu_synchronize,
    .is_host = cpu_is_host,
    .supports_op = cpu_supports_op,
    .plan_layouts = sg__cpu_plan_layouts,
    .module_identity = sg__cpu_module_identity,
    .module_build = sg__cpu_module_build,
    .module_artifact = sg__cpu_module_artifact,
    .module_kernel = sg__cpu_module_kernel,
    .module_free = sg__cpu_module_free,
    .fail = cpu_fail,
};
