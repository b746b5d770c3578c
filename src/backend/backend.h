/* The backend interface (DESIGN.md "Backend interface"): a versioned table of
 * function pointers, like ggml-backend's ggml_backend_i or UCX's transport
 * ops. The compiler and the session only ever call through this table, so a
 * CUDA backend plugs in without changing them. */
#ifndef SG_BACKEND_H
#define SG_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "backend/kernel_ir.h"
#include "graph/graph.h"

/* Bumped on any change to the table's layout or contract.
 * 2: the optional plan_layouts entry (tensor storage layouts).
 * 3: the is_host and supports_op entries.
 * 4: the run context speaks of random draws (rng_subsequence) and batch
 *    statistics (batch_stats_only), no longer of a runtime's passes.
 * 5: the optional module entries (generated kernels of fused ops).
 * 6: the config's device number; supports_op false for an op the IR
 *    expresses gives that op a generated kernel of its own.
 * 7: the fail entry (the device fault of fault injection).
 * 8: the config's matmul_bf16 (sg_session_params.matmul_precision), which a
 *    backend honours or refuses at create. */
#define SG__BACKEND_VERSION 8u

/* A compiled op: backend-defined (oneDNN primitives, a C function, ...). */
typedef struct sg__kernel sg__kernel;
/* The generated kernels of one graph, compiled together (backend-defined:
 * a loaded shared object on the CPU). */
typedef struct sg__module sg__module;

/* Training runs batch norm on batch statistics (updating running stats) and
 * applies dropout; evaluation uses running stats and makes dropout the
 * identity. A kernel is compiled for one mode. */
typedef enum sg__exec_mode {
  SG__MODE_TRAIN = 1,
  SG__MODE_EVAL = 2,
} sg__exec_mode;

typedef struct sg__backend_config {
  int threads;   /* compute threads; >= 1 */
  uint64_t seed; /* session seed (dropout masks, ...) */
  int device;    /* the device's number ("cuda:1": 1); 0 for the CPU */
  /* sg_session_params.matmul_precision resolved to SG_MATMUL_BF16: products
   * round their operands to bf16; a backend that cannot honour it refuses
   * at create. */
  bool matmul_bf16;
} sg__backend_config;

/* What every kernel run gets besides its buffers. */
typedef struct sg__run_ctx {
  /* Training steps completed before this run: SGD's dampened momentum
   * treats step 0 specially, and random draws count with it. */
  uint64_t step;
  /* Random draws (dropout masks) are counter-based: a function of the op's
   * own seed, `seed`, `step`, `rng_subsequence` and the element index, and
   * of nothing else (not threads, not earlier runs). Repeating the values
   * repeats the draws; a different subsequence at the same (seed, step)
   * draws independently (cuRAND's Philox takes the same three: seed,
   * subsequence, offset). Subsequence 0 is the plain sequence. */
  uint64_t seed;
  uint64_t rng_subsequence;
  /* Training-form batch norm normalises with the batch statistics and,
   * when this is set, leaves its running statistics as they are (PyTorch's
   * batch_norm in training mode without running buffers). */
  bool batch_stats_only;
} sg__run_ctx;

typedef struct sg__backend_i {
  uint32_t version; /* SG__BACKEND_VERSION */
  const char *name; /* "cpu", "cuda" */

  sg_status (*create)(const sg__backend_config *cfg, void **state);
  void (*destroy)(void *state); /* accepts NULL */

  /* Device memory: 64-byte aligned and zeroed. */
  sg_status (*buffer_alloc)(void *state, size_t bytes, void **out);
  void (*buffer_free)(void *state, void *buf); /* accepts NULL */
  /* Copies between host memory and device memory (dst/src on the device). */
  sg_status (*upload)(void *state, void *dst, const void *src, size_t bytes);
  sg_status (*download)(void *state, void *dst, const void *src, size_t bytes);

  /* Compiles op `op` of a finalized graph for `mode`. Compile time: may
   * allocate, create primitives, reserve scratch memory. Fails with
   * SG_ERR_UNSUPPORTED (naming the op) for an op or dtype it cannot run. */
  sg_status (*kernel_create)(void *state, const sg_graph *g, int32_t op, sg__exec_mode mode,
                             sg__kernel **out);
  /* Runs a kernel. in[i] / out[i] are the device addresses of the op's
   * inputs and outputs in op order (in[i] is NULL for an absent optional
   * input); inputs the op updates in place (sg__op_mutated_inputs) are
   * written through in[i]. Never allocates. For ops where
   * sg__op_inplace_input() names input j, out[0] may be the same buffer as
   * in[j] and the kernel must be correct then. */
  sg_status (*kernel_run)(void *state, sg__kernel *k, void *const *in, void *const *out,
                          const sg__run_ctx *ctx);
  void (*kernel_destroy)(void *state, sg__kernel *k); /* accepts NULL */

  /* Waits until all submitted work is done. */
  sg_status (*synchronize)(void *state);

  /* Whether buffer_alloc's memory is host memory that the caller may read
   * and write directly (and whose buffers may be replaced by caller memory,
   * sg_session_bind_input / bind_state): true for the CPU backend. */
  bool (*is_host)(void *state);
  /* Whether kernel_create has kernels for op kind `kind` at all (like
   * ggml-backend's supports_op); kernel_create may still refuse an op of it
   * for its dtypes or attributes (SG_ERR_UNSUPPORTED). A backend with
   * module entries that says false for an op the kernel IR expresses gets
   * that op as a generated kernel, alone when it joins no group (the CUDA
   * backend's elementwise ops, sums and optimizer updates). */
  bool (*supports_op)(void *state, sg_op_kind kind);

  /* optional (NULL: every tensor is stored in the graph's plain row-major
   * layout). Called by the memory planner once per compile of `g`, before
   * any kernel_create for it. may_relayout[t] != 0 marks the tensors that
   * only kernels read and write (the planned transient region); every other
   * tensor is copied to and from the caller as plain bytes and must stay
   * plain. The backend picks a storage layout per tensor (e.g. channel-
   * blocked activations between convolutions), keeps the decision in its
   * state for the kernels it then creates for `g`, and writes each tensor's
   * slot size to bytes[t] (>= its nbytes; larger where the layout pads).
   * Kernels of ops whose output may share an input's slot
   * (sg__op_inplace_input) stay correct whatever layouts it picks. */
  sg_status (*plan_layouts)(void *state, const sg_graph *g, const uint8_t *may_relayout, size_t *bytes);

  /* optional, all or none (NULL: the backend runs no generated kernels and
   * the compiler does not fuse for it). Kernels of the IR
   * (backend/kernel_ir.h) compiled into one module per graph. */
  /* What the generated code depends on besides the IR: the compiler, its
   * flags, the device (ISA, layouts): NUL-terminated text in buf[cap], part
   * of the compile cache's key. */
  sg_status (*module_identity)(void *state, char *buf, size_t cap);
  /* Generates and compiles *kernels[0..n) into a module, or when `artifact`
   * is not NULL, loads that file instead (what module_artifact gave for the
   * same kernels and identity, kept by the compile cache). Errors:
   * SG_ERR_COMPILER (the compiler is missing or failed, naming the command
   * and its output), SG_ERR_IO, SG_ERR_NO_MEMORY. */
  sg_status (*module_build)(void *state, const sg__kir_kernel *const *kernels, uint32_t n,
                            const char *artifact, sg__module **out);
  /* The file that module_build can load again (the compiled object). */
  const char *(*module_artifact)(void *state, const sg__module *m);
  /* A kernel that runs k, one of the module's kernels or a kernel of the
   * same program and name (kernel_run then takes its inputs and outputs in
   * the IR's order); `op_name` names it in messages. */
  sg_status (*module_kernel)(void *state, sg__module *m, const sg__kir_kernel *k, const char *op_name,
                             sg__kernel **out);
  void (*module_free)(void *state, sg__module *m); /* accepts NULL; after its kernels are destroyed */

  /* Fault injection's device failure (SPEC H6): puts the state in the
   * state a sticky device error leaves it in (on CUDA, the lost context of
   * an illegal address or an ECC error), with `why` as the cause; from then
   * on every kernel_run, upload, download and synchronize fails with
   * SG_ERR_DEVICE naming it, as after the real error. */
  void (*fail)(void *state, const char *why);
} sg__backend_i;

extern const sg__backend_i sg__cpu_backend;
#if defined(SG_HAVE_CUDA_BACKEND)
extern const sg__backend_i sg__cuda_backend;
#endif

/* The backend called `name` ("cpu", "cuda"), or NULL. */
const sg__backend_i *sg__backend_find(const char *name);
/* A device string as users write it: "cpu", "cuda" (device 0) or "cuda:N".
 * Errors: SG_ERR_NOT_FOUND naming the devices this build has (and, for
 * "cuda" in a build without the CUDA backend, saying so);
 * SG_ERR_INVALID_ARG for a malformed number. `who` starts the message. */
sg_status sg__backend_parse(const char *who, const char *spec, const sg__backend_i **be, int *device);

/* Index of the input whose buffer output 0 may share (elementwise ops whose
 * output has that input's shape and dtype), or -1. Decided per op kind here
 * so that the memory planner and every backend agree. */
int sg__op_inplace_input(const sg_graph *g, const sg__op *op);

#endif /* SG_BACKEND_H */
