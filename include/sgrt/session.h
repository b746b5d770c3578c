/**
 * @file session.h
 * Running a graph: a session compiles a finalized graph for one
 * device once, then runs training steps (forward + backward + update, as one
 * graph) or evaluation passes again and again.
 *
 * @code
 *   sg_session_params sp = SG_SESSION_PARAMS_INIT;
 *   sp.threads = 2;
 *   sg_session *s;
 *   if (sg_session_create(g, &sp, &s) != SG_OK || sg_session_compile(s) != SG_OK) return 1;
 *   for (int step = 0; step < n; step++) {
 *     sg_session_set_input(s, "images", SG_F32, 4, xdims, images);
 *     sg_session_set_input(s, "labels", SG_I64, 1, ydims, labels);
 *     sg_session_set_input(s, "lr", SG_F32, 0, NULL, &lr);
 *     if (sg_session_step(s) != SG_OK) { fprintf(stderr, "%s\n", sg_last_error()); break; }
 *     float loss;
 *     sg_session_read(s, "loss", &loss, sizeof loss);
 *   }
 *   sg_session_destroy(s);
 * @endcode
 *
 * Memory: parameters, state, inputs and outputs have their own slots; every
 * other tensor lives in one planned region whose slots are reused once a
 * tensor is dead. After compile, steps allocate nothing.
 *
 * Threads: a session is used from one thread at a time.
 */
#ifndef SGRT_SESSION_H
#define SGRT_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "sgrt/devices.h"
#include "sgrt/graph.h"

SG_EXTERN_C_BEGIN

typedef struct sg_session sg_session;

/** Options of sg_session_create(). Initialise from SG_SESSION_PARAMS_INIT or
 * sg_session_params_init(); a program built against an older, shorter
 * version gets the defaults for the fields it lacks (docs/api.md). */
typedef struct sg_session_params {
  size_t size; /**< sizeof(sg_session_params) */
  const char
      *device;   /**< "cpu" (default; NULL means "cpu"), "cuda" (= "cuda:0") or "cuda:N" (docs/cuda.md) */
  int threads;   /**< compute threads; 0 (default) = all online CPUs */
  uint64_t seed; /**< seeds dropout masks; default 0 (a seed like any other, not "unset") */
  int poison;    /**< debug: fill each transient buffer with NaN bytes when its tensor dies; default 0; device
                    "cpu" only */
  /** Fusion of elementwise ops into generated kernels (docs/compiler.md):
   * 0 (default) or 1 on, -1 off. The environment's SG_FUSION=0 turns it off
   * too (for comparisons). */
  int fusion;
  /** Record a timeline of every op of every step and evaluation pass for
   * sg_session_write_trace(): 1 on, 0 (default) off. The backend is then
   * synchronized after each op, so that its time is its own. */
  int trace;
  /** Timeline capacity, in events (the latest are kept); 0 = 262144. */
  size_t trace_events;
  /** The arithmetic of matrix products (gemm, matmul): an sg_matmul_precision.
   * Default SG_MATMUL_DEFAULT: what the environment's SG_MATMUL_PRECISION
   * says ("f32" or "bf16"), else f32. */
  int matmul_precision;
} sg_session_params;
#define SG_SESSION_PARAMS_INIT \
  { sizeof(sg_session_params), "cpu", 0, 0, 0, 0, 0, 0, 0 }

/** How matrix products compute (sg_session_params.matmul_precision;
 * docs/precision.md). Every tensor stays f32 either way: parameters, their
 * gradients, the optimizer's state and all other ops keep full precision. */
typedef enum sg_matmul_precision {
  /** SG_MATMUL_PRECISION from the environment ("f32" or "bf16"), else f32. */
  SG_MATMUL_DEFAULT = 0,
  /** f32 operands, f32 products and sums (PyTorch's "highest"). */
  SG_MATMUL_F32 = 1,
  /** Each operand rounded to bfloat16 (to nearest even), the products summed
   * in f32, the result f32: what PyTorch's set_float32_matmul_precision
   * ("medium") asks of its CPU matmuls (which oneDNN grants there only with
   * AMX; docs/precision.md). Device "cpu" with bf16 dot-product instructions (AVX512_BF16 or
   * AMX) only; twice the f32 FMA rate there. Elsewhere session create
   * refuses it (SG_ERR_UNSUPPORTED) rather than run it slower than f32. */
  SG_MATMUL_BF16 = 2,
} sg_matmul_precision;
/** SG_SESSION_PARAMS_INIT as a function (for ctypes). Any thread. */
SG_API sg_session_params sg_session_params_init(void);

/**
 * Creates a session for a finalized graph. The graph must outlive the
 * session (it is not copied). Parameters, state and constants start from the
 * graph's initializers, or zero where a tensor has none.
 * @param p  NULL for the defaults.
 * @return SG_OK; SG_ERR_STATE if the graph is not finalized;
 *         SG_ERR_NOT_FOUND for an unknown device; SG_ERR_DEVICE for "cuda"
 *         when there is no usable GPU (the message says why: no driver, no
 *         GPU, no such device number); SG_ERR_INVALID_ARG for a
 *         NULL graph or out, negative threads, or a p->size this library
 *         does not know (the message names the struct and both sizes).
 */
SG_API sg_status sg_session_create(const sg_graph *g, const sg_session_params *p, sg_session **out);

/** Destroys a session and its device memory. Accepts NULL. */
SG_API void sg_session_destroy(sg_session *s);

/**
 * Compiles: dead-code elimination, constant folding, scheduling, in-place
 * reuse, memory planning, kernel creation (primitives are created here, never
 * inside a step). Call once, before the first step.
 */
SG_API sg_status sg_session_compile(sg_session *s);

/** What compile decided. An output: the caller sets `size` (SG_COMPILE_REPORT_INIT). */
typedef struct sg_compile_report {
  size_t size;                  /**< set by the caller; on return the bytes filled */
  size_t planned_peak_bytes;    /**< persistent slots + the planned transient region */
  size_t persistent_bytes;      /**< parameters, state, inputs, outputs, folded constants */
  size_t transient_bytes;       /**< peak of the planned region */
  size_t sum_tensor_bytes;      /**< every tensor in its own buffer, for comparison */
  int32_t ops_scheduled;        /**< ops a training step runs */
  int32_t ops_eval;             /**< ops an evaluation pass runs */
  int32_t ops_eliminated;       /**< dead code */
  int32_t ops_folded;           /**< constant-folded at compile time */
  int32_t ops_inplace;          /**< outputs that reuse their input's buffer */
  int32_t ops_fused;            /**< ops (of ops_scheduled) that run inside generated kernels */
  int32_t fused_kernels;        /**< the generated kernels they form (fused groups, optimizer updates) */
  double compile_seconds;       /**< wall time of sg_session_compile */
  int32_t kernels_generated;    /**< distinct kernel programs compiled by this compile (kernels of one
                                     program share it; none when loaded from the compile cache) */
  int32_t compiler_invocations; /**< C compiler runs */
  int32_t cache_hits;           /**< compile cache entries used */
  int32_t cache_misses;         /**< compile cache lookups that found no valid entry */
} sg_compile_report;
#define SG_COMPILE_REPORT_INIT \
  { .size = sizeof(sg_compile_report) }

/** Fills the first out->size bytes of `out` (initialised with
 * SG_COMPILE_REPORT_INIT: an older caller's shorter report gets the fields
 * it knows, and out->size becomes the bytes written). SG_ERR_INVALID_ARG for
 * NULL or a size below the first version's; SG_ERR_STATE before compile. */
SG_API sg_status sg_session_compile_report(const sg_session *s, sg_compile_report *out);

/**
 * Copies an input's value into the session. dtype and shape must be the
 * input tensor's exactly (SG_ERR_DTYPE / SG_ERR_SHAPE otherwise, naming both).
 * A scalar has ndim 0.
 */
SG_API sg_status sg_session_set_input(sg_session *s, const char *name, sg_dtype dtype, int ndim,
                                      const int64_t *dims, const void *data);

/**
 * Binds caller memory as an input without copying: steps read `data` directly
 * until the input is set or bound again. `data` must stay valid and be
 * 64-byte aligned (SG_ERR_INVALID_ARG otherwise); CPU device only.
 */
SG_API sg_status sg_session_bind_input(sg_session *s, const char *name, sg_dtype dtype, int ndim,
                                       const int64_t *dims, void *data);

/**
 * One training step: forward, backward and update as one graph. Every input
 * must have been set or bound (SG_ERR_STATE names the first missing one).
 */
SG_API sg_status sg_session_step(sg_session *s);

/** An evaluation pass: the forward ops behind the graph's non-gradient
 * outputs, batch norm on running statistics, dropout off, no updates. */
SG_API sg_status sg_session_forward(sg_session *s);

/**
 * Writes the recorded timeline (sg_session_params.trace) as Chrome trace JSON
 * (chrome://tracing, Perfetto), in the form sg_dist_write_trace() writes a
 * rank's: process "session", thread 0 "compute", one complete event per op
 * (its name; category forward, backward or update; args kind, pos, step: the
 * step it is in, or for an evaluation pass the steps done before it) and one
 * per step ("step N") or evaluation pass. Times are microseconds since the first
 * recorded event.
 * @return SG_OK; SG_ERR_INVALID_ARG for NULL; SG_ERR_STATE when tracing is
 *   off; SG_ERR_IO naming the file; SG_ERR_NO_MEMORY.
 */
SG_API sg_status sg_session_write_trace(const sg_session *s, const char *path);

/** Number of training steps run so far. */
SG_API uint64_t sg_session_steps(const sg_session *s);

/**
 * Copies a tensor's current value out: a parameter, state, optimizer state,
 * input, constant or graph output. `bytes` must equal the tensor's size.
 * SG_ERR_STATE for a tensor the session does not keep (mark it an output).
 */
SG_API sg_status sg_session_read(const sg_session *s, const char *name, void *out, size_t bytes);

/** Overwrites a parameter, state or optimizer-state tensor. */
SG_API sg_status sg_session_write(sg_session *s, const char *name, const void *data, size_t bytes);

/**
 * Moves a parameter, state or optimizer-state tensor into caller memory (a
 * memory tier: a PMEM or file mapping, shared or pinned memory): its current
 * value is copied there, and from then on steps read and update it in place,
 * and read, write and checkpoints use it. `data` must be 64-byte aligned,
 * `bytes` the tensor's size, and the memory must stay valid until the session
 * is destroyed; CPU device only. Binding again moves it again.
 * @return SG_OK; SG_ERR_STATE before compile or on another device;
 *   SG_ERR_NOT_FOUND / SG_ERR_SHAPE / SG_ERR_INVALID_ARG naming the tensor.
 */
SG_API sg_status sg_session_bind_state(sg_session *s, const char *name, void *data, size_t bytes);

/** Saves parameters, state and optimizer state with the graph as a .sgg file
 * (the graph's initializers replaced by the current values). */
SG_API sg_status sg_session_save_checkpoint(const sg_session *s, const char *path);

/** Restores parameters, state and optimizer state from a checkpoint of a
 * graph with the same tensors; every one of them must be present with the
 * same dtype and shape (SG_ERR_NOT_FOUND / SG_ERR_SHAPE naming it). */
SG_API sg_status sg_session_load_checkpoint(sg_session *s, const char *path);

SG_EXTERN_C_END

#endif /* SGRT_SESSION_H */
