/* Internals of the CPU backend shared by its kernel families: the backend
 * state, the kernel header every family embeds, and small helpers.
 *
 * A kernel is a struct that starts with `sg__kernel` (the header below) and
 * carries everything its run function needs, precomputed at kernel_create:
 * sizes, strides, attribute values, oneDNN primitives and their memory
 * objects, scratch buffers. Kernels never keep a pointer into the graph, so a
 * compiled kernel outlives the graph it was made from. kernel_run only binds
 * the caller's buffers and computes: it never allocates through sg__malloc. */
#ifndef SG_BACKEND_CPU_INTERNAL_H
#define SG_BACKEND_CPU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/kernel_ir.h"

typedef struct sg__cpu_state sg__cpu_state;

typedef sg_status (*sg__cpu_run_fn)(sg__cpu_state *st, sg__kernel *k, void *const *in, void *const *out,
                                    const sg__run_ctx *ctx);

struct sg__kernel {
  sg__cpu_run_fn run;
  void (*destroy)(sg__kernel *k); /* frees what the family added; NULL: nothing */
  sg_op_kind kind;
  char name[64]; /* the op's name (truncated), for run-time messages */
};

/* Backend state: the thread count, one oneDNN engine and stream, and the
 * workspace. The oneDNN types stay out of this header.
 *
 * The workspace holds everything a kernel needs only while it runs: blocked
 * copies of operands, oneDNN scratchpads, the recomputed forward of
 * max-pool backward, accumulators. Kernels reserve their size at
 * kernel_create (the buffer grows then, never in kernel_run) and address it
 * by offset at run time, so a graph needs the largest single kernel's
 * scratch once instead of the sum over its kernels. The price: kernel_run
 * calls on one state must not overlap (they share the stream anyway); use
 * one backend state per concurrent compute thread. */
struct sg__cpu_state {
  int threads;
  uint64_t seed;
  /* sg_session_params.matmul_precision is SG_MATMUL_BF16: matmul kernels
   * round their operands to bf16 (dnnl_matmul.c). */
  bool matmul_bf16;
  void *engine; /* dnnl_engine_t */
  void *stream; /* dnnl_stream_t */
  unsigned char *ws;
  size_t ws_size;

  /* Storage layouts (cpu_layout.c), decided by plan_layouts for one graph:
   * per tensor an sg__cpu_layout. Kernels created for any other graph, or
   * while `plain_only` is set, see every tensor plain. */
  const void *lay_graph;
  uint32_t n_lay;
  uint8_t *lay;
  int block;       /* channels per block of SG__CPU_BLOCKED (8 on AVX2, 16 on AVX-512); 0: none */
  bool plain_only; /* creating the inner kernel of a layout adapter */
  /* Plain copies of blocked operands made by layout adapters; separate
   * from `ws` because the adapted kernel uses that. */
  unsigned char *ws2;
  size_t ws2_size;
  /* Set by fail (fault injection): every later run or copy reports it. */
  char failure[256];
};

/* ---- storage layouts (cpu_layout.c) -------------------------------------
 *
 * SG__CPU_PLAIN is the graph's row-major layout. SG__CPU_BLOCKED is oneDNN's
 * channel-blocked activation layout nChw<block>c for 4-D f32 tensors
 * [N,C,H,W]: channels in blocks of `block`, the last block zero-padded, the
 * fastest layout of oneDNN's convolution, batch-norm and pooling kernels on
 * this CPU. plan_layouts makes every transient activation that flows
 * between such ops blocked, so that they stop reordering to plain and back;
 * the elementwise ops between them (relu, residual add, ...) work on blocked
 * tensors as they are, and any other op touching a blocked tensor runs
 * behind a layout adapter that reorders its operands. */
typedef enum sg__cpu_layout { SG__CPU_PLAIN = 0, SG__CPU_BLOCKED = 1 } sg__cpu_layout;

/* The layout of tensor `t` (-1 allowed: plain) for kernels created now. */
sg__cpu_layout sg__cpu_tensor_layout(const sg__cpu_state *st, const sg_graph *g, int32_t t);
/* Elements a kernel walks when it treats tensor t as a flat array: numel,
 * or the padded count of a blocked layout. */
int64_t sg__cpu_tensor_flat(const sg__cpu_state *st, const sg_graph *g, int32_t t);
/* The backend entry (backend.h). */
sg_status sg__cpu_plan_layouts(void *state, const sg_graph *g, const uint8_t *may_relayout, size_t *bytes);
/* Finds the channel block oneDNN's convolutions pick here (state create). */
void sg__cpu_layout_init(sg__cpu_state *st);
void sg__cpu_layout_fini(sg__cpu_state *st);
/* True when op `op`'s kernel family handles the layouts its operands have;
 * otherwise kernel_create wraps it in a layout adapter. */
bool sg__cpu_layout_native(const sg__cpu_state *st, const sg_graph *g, const sg__op *op);
/* Creates the kernel of `op` with `create` as if every operand were plain,
 * and wraps it: blocked inputs are reordered into plain copies before it
 * runs, its plain results into the blocked outputs after. */
sg_status sg__cpu_create_adapted(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                                 sg_status (*create)(sg__cpu_state *, const sg_graph *, const sg__op *,
                                                     sg__exec_mode, sg__kernel **),
                                 sg__kernel **out);

/* Makes the workspace at least `bytes` long (kernel_create only). */
sg_status sg__cpu_ws_reserve(sg__cpu_state *st, size_t bytes);

/* Sets the OpenMP thread count of the calling thread (oneDNN uses GNU
 * OpenMP; the count is a per-thread setting, hence called on every run). */
void sg__cpu_set_threads(int threads);

/* Runs fn(ctx, begin, end) over [0, n) split into one contiguous range per
 * OpenMP thread (GNU OpenMP, the runtime oneDNN uses, with the backend's
 * thread count), or inline when n < min_parallel. Ranges depend only on n
 * and the thread count, and the kernels using this compute every element
 * independently, so results do not depend on the thread count. */
typedef void (*sg__cpu_range_fn)(void *ctx, int64_t begin, int64_t end);
void sg__cpu_parallel_for(int64_t n, int64_t min_parallel, sg__cpu_range_fn fn, void *ctx);

/* Allocates a zeroed kernel struct of `size` bytes with the header filled. */
sg_status sg__cpu_kernel_new(const sg__op *op, size_t size, sg__cpu_run_fn run, sg__kernel **out);

/* 64-byte aligned, zeroed memory through sg__malloc; free with
 * sg__cpu_aligned_free. */
void *sg__cpu_aligned_alloc(size_t bytes);
void sg__cpu_aligned_free(void *p);

/* Messages: "<kind> '<name>': ..." (an op's own failure: sg__op_error, graph/graph.h) */
sg_status sg__cpu_unsupported(const sg_graph *g, const sg__op *op, const char *why);

/* Convenience accessors. */
static inline const sg__tensor *sg__cpu_in(const sg_graph *g, const sg__op *op, int i) {
  return (i < op->n_inputs && op->inputs[i] >= 0) ? &g->tensors[op->inputs[i]] : NULL;
}
static inline const sg__tensor *sg__cpu_out(const sg_graph *g, const sg__op *op, int i) {
  return (i < op->n_outputs && op->outputs[i] >= 0) ? &g->tensors[op->outputs[i]] : NULL;
}
static inline int64_t sg__cpu_numel(const sg__tensor *t) { return sg__numel(t->ndim, t->dims); }

/* ---- strided views for broadcasting, reductions and transposes ---------- */

/* Up to three operands walked together over `dims` (row-major), each with
 * its own element strides (0 where it is broadcast). Dims of size 1 are
 * dropped and neighbours that are contiguous for every operand are merged,
 * so the innermost dim is as long as possible. */
typedef struct sg__cpu_iter {
  int nd; /* >= 1 */
  int64_t dims[SG_MAX_DIMS];
  int64_t strides[3][SG_MAX_DIMS];
} sg__cpu_iter;

/* `nops` operands; strides[k] gives operand k's strides over dims. */
void sg__cpu_iter_init(sg__cpu_iter *it, int ndim, const int64_t *dims, int nops,
                       const int64_t (*strides)[SG_MAX_DIMS]);
/* Strides of a tensor of shape (nd, d) broadcast to (ndim, dims): right
 * aligned, 0 for dims it lacks or has as 1. */
void sg__cpu_bcast_strides(int ndim, const int64_t *dims, int nd, const int64_t *d, int64_t *strides);
/* Number of rows (product of all but the innermost dim). */
int64_t sg__cpu_iter_rows(const sg__cpu_iter *it);
/* A position: the index of the current row and each operand's offset. */
typedef struct sg__cpu_pos {
  int64_t idx[SG_MAX_DIMS];
  int64_t off[3];
} sg__cpu_pos;
/* Positions at row `r`; then steps to the next row. */
void sg__cpu_iter_seek(const sg__cpu_iter *it, int64_t r, sg__cpu_pos *p);
static inline void sg__cpu_iter_next(const sg__cpu_iter *it, sg__cpu_pos *p) {
  for (int d = it->nd - 2; d >= 0; d--) {
    p->off[0] += it->strides[0][d];
    p->off[1] += it->strides[1][d];
    p->off[2] += it->strides[2][d];
    if (++p->idx[d] < it->dims[d]) return;
    p->off[0] -= it->strides[0][d] * it->dims[d];
    p->off[1] -= it->strides[1][d] * it->dims[d];
    p->off[2] -= it->strides[2][d] * it->dims[d];
    p->idx[d] = 0;
  }
}

/* Walks all elements of `it` in parallel: row(ctx, pos, i0, len) handles
 * elements [i0, i0 + len) of the innermost dim at position pos. Long rows
 * are cut into pieces so that one long row still spreads over threads. */
typedef void (*sg__cpu_row_fn)(void *ctx, const sg__cpu_pos *p, int64_t i0, int64_t len);
void sg__cpu_iter_for(const sg__cpu_iter *it, sg__cpu_row_fn row, void *ctx);

/* ---- kernel families: each creates the kernel for the kinds it knows ---- */

typedef sg_status (*sg__cpu_create_fn)(sg__cpu_state *st, const sg_graph *g, const sg__op *op,
                                       sg__exec_mode mode, sg__kernel **out);

/* Plain C kernels. */
sg_status sg__cpu_create_binary(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                                sg__kernel **out);
sg_status sg__cpu_create_math(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                              sg__kernel **out);
sg_status sg__cpu_create_layer_norm(sg__cpu_state *st, const sg_graph *g, const sg__op *op,
                                    sg__exec_mode mode, sg__kernel **out);
sg_status sg__cpu_create_embedding(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                                   sg__kernel **out);
sg_status sg__cpu_create_attention(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                                   sg__kernel **out);
sg_status sg__cpu_create_cumsum(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                                sg__kernel **out);
sg_status sg__cpu_create_reduce_max(sg__cpu_state *st, const sg_graph *g, const sg__op *op,
                                    sg__exec_mode mode, sg__kernel **out);
sg_status sg__cpu_create_scalar(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                                sg__kernel **out);
sg_status sg__cpu_create_topk(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                              sg__kernel **out);
sg_status sg__cpu_create_shape(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                               sg__kernel **out);
sg_status sg__cpu_create_reduce(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                                sg__kernel **out);
sg_status sg__cpu_create_loss(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                              sg__kernel **out);
sg_status sg__cpu_create_dropout(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                                 sg__kernel **out);
sg_status sg__cpu_create_optim(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                               sg__kernel **out);
sg_status sg__cpu_create_pool_c(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                                sg__kernel **out);
/* oneDNN kernels. */
sg_status sg__cpu_create_conv(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                              sg__kernel **out);
sg_status sg__cpu_create_matmul(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                                sg__kernel **out);
sg_status sg__cpu_create_bnorm(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                               sg__kernel **out);
sg_status sg__cpu_create_pool(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                              sg__kernel **out);
sg_status sg__cpu_create_eltwise(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                                 sg__kernel **out);
sg_status sg__cpu_create_softmax(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                                 sg__kernel **out);

/* True when pooling op `op` runs the C kernel of cpu_pool.c (average
 * pooling with count_include_pad and a window past the padding). */
bool sg__cpu_pool_uses_c(const sg_graph *g, const sg__op *op);

/* ---- generated kernels (cpu_emit.c, cpu_jit.c) ------------------------------ */

/* One C translation unit for `n` finished kernels (backend/kernel_ir.h);
 * *src (free with sg__free) holds *len bytes plus a NUL. */
sg_status sg__cpu_emit_c(const sg__kir_kernel *const *kernels, int n, char **src, size_t *len);
/* A hash of the text every translation unit starts with (helpers and
 * sgk_math.h): part of the compile cache's key, so that a changed helper
 * never meets an object built with the old one. */
uint64_t sg__cpu_emit_prelude_hash(void);

/* A shared object built from generated C and loaded (RTLD_NOW | RTLD_LOCAL). */
typedef struct sg__jit_lib sg__jit_lib;
/* The compiler: $SG_CC when set, else the C compiler sgrt was built with. */
const char *sg__jit_compiler(void);
/* The flags it is given (without -o and file names), one string. */
const char *sg__jit_flags(void);
/* Compiles src[len] with the compiler into a shared object under a private
 * temporary directory, renames it into place and loads it. A missing
 * compiler or a failed compile: SG_ERR_COMPILER naming the command, its exit
 * status and the first lines of its stderr. */
sg_status sg__jit_build(const char *src, size_t len, sg__jit_lib **out);
/* Loads an existing shared object (a compile cache entry). */
sg_status sg__jit_open(const char *path, sg__jit_lib **out);
/* The shared object's path (its directory is removed at close unless the
 * object came from sg__jit_open). */
const char *sg__jit_path(const sg__jit_lib *lib);
/* An exported kernel, or NULL with SG_ERR_NOT_FOUND set. */
typedef void (*sg__jit_kernel_fn)(int64_t begin, int64_t end, const void *const *in, void *const *out);
sg__jit_kernel_fn sg__jit_symbol(sg__jit_lib *lib, const char *name);
void sg__jit_close(sg__jit_lib *lib); /* accepts NULL */

/* The backend's module entries (cpu_module.c; backend.h). */
sg_status sg__cpu_module_identity(void *state, char *buf, size_t cap);
sg_status sg__cpu_module_build(void *state, const sg__kir_kernel *const *kernels, uint32_t n,
                               const char *artifact, sg__module **out);
const char *sg__cpu_module_artifact(void *state, const sg__module *m);
sg_status sg__cpu_module_kernel(void *state, sg__module *m, const sg__kir_kernel *k, const char *op_name,
                                sg__kernel **out);
void sg__cpu_module_free(void *state, sg__module *m);

#endif /* SG_BACKEND_CPU_INTERNAL_H */
