/* oneDNN plumbing shared by the dnnl_*.c kernel families.
 *
 * A oneDNN kernel ("dk") is a list of memory objects and a list of steps
 * (primitives with their argument lists), all made at kernel_create:
 *   - user memories wrap the caller's buffers (input i or output j) in the
 *     plain layout the graph stores (NCHW / row-major); kernel_run only sets
 *     their data handles;
 *   - scratch memories live in the backend state's workspace
 *     (cpu_internal.h) at offsets fixed at create time: blocked copies of
 *     operands (when a primitive picked a faster layout through
 *     format_tag any), oneDNN scratchpads (every primitive uses
 *     dnnl_scratchpad_mode_user, so oneDNN keeps no hidden scratch of its
 *     own), pooling workspaces and small temporaries; their contents last
 *     for one kernel_run only;
 *   - steps run in order: reorders into blocked layouts, the primitive,
 *     reorders back.
 * kernel_run = bind handles + execute the steps; nothing is allocated. */
#ifndef SG_BACKEND_CPU_DNNL_COMMON_H
#define SG_BACKEND_CPU_DNNL_COMMON_H

#include <dnnl.h>

#include "backend/cpu/cpu_internal.h"

#define SG__DK_MAX_MEMS 24
#define SG__DK_MAX_STEPS 8
#define SG__DK_MAX_ARGS 12

/* What a memory object is bound to at run time. */
#define SG__DK_SCRATCH (-1)
#define SG__DK_IN(i) (i)
#define SG__DK_OUT(j) (1000 + (j))

typedef struct sg__dk_step {
  dnnl_primitive_t prim;
  int nargs;
  dnnl_exec_arg_t args[SG__DK_MAX_ARGS];
} sg__dk_step;

typedef struct sg__dk {
  sg__kernel base;
  sg__cpu_state *st;
  dnnl_engine_t engine;
  dnnl_stream_t stream;
  const sg__op *op; /* only valid during kernel_create (messages) */
  int nmems;
  dnnl_memory_t mems[SG__DK_MAX_MEMS];
  int bind[SG__DK_MAX_MEMS];
  size_t off[SG__DK_MAX_MEMS]; /* scratch memories: offset in the workspace */
  size_t ws_need;              /* bytes of workspace this kernel uses */
  int nsteps;
  sg__dk_step steps[SG__DK_MAX_STEPS];
  /* Reorders from blocked outputs back to the user's layout, appended after
   * the main primitive by sg__dk_finish. */
  int npost;
  int post_src[4], post_dst[4];
  dnnl_primitive_attr_t attr; /* user scratchpad mode */
  void (*fini)(struct sg__dk *k);
} sg__dk;

/* Backend-state lifecycle (engine + stream). */
sg_status sg__dnnl_state_init(sg__cpu_state *st);
void sg__dnnl_state_fini(sg__cpu_state *st);
sg_status sg__dnnl_state_wait(sg__cpu_state *st);
/* True when oneDNN runs bf16 products natively here (AVX512_BF16 or AMX). */
bool sg__dnnl_native_bf16(void);

/* Translates a oneDNN status into an sgrt status with a message naming the
 * op and what failed. */
sg_status sg__dnnl_fail(const sg__op *op, dnnl_status_t s, const char *what);
#define SG_DNNL(k, call, what)                                               \
  do {                                                                       \
    dnnl_status_t sg__ds = (call);                                           \
    if (sg__ds != dnnl_success) return sg__dnnl_fail((k)->op, sg__ds, what); \
  } while (0)

/* Allocates a dk of `size` bytes (>= sizeof(sg__dk), a family struct that
 * starts with sg__dk) with `run` and the family's destroy hook `fini` (may be
 * NULL; called before the dk's own cleanup). */
sg_status sg__dk_new(sg__cpu_state *st, const sg__op *op, size_t size, sg__cpu_run_fn run,
                     void (*fini)(sg__dk *k), sg__dk **out);

/* Creates a dk and fills it with `build`; on failure destroys it. Every
 * tensor of the op must be f32 (else SG_ERR_UNSUPPORTED naming the op). */
typedef sg_status (*sg__dk_build_fn)(sg__dk *k, const sg_graph *g, const sg__op *op, sg__exec_mode mode);
sg_status sg__dk_create(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                        size_t size, sg__cpu_run_fn run, void (*fini)(sg__dk *k), sg__dk_build_fn build,
                        sg__kernel **out);

/* Plain (row-major) f32 descriptor of `ndims` dims. */
void sg__dk_plain_md(dnnl_memory_desc_t *md, int ndims, const dnnl_dim_t *dims);
/* A descriptor with the given strides (elements). */
void sg__dk_strided_md(dnnl_memory_desc_t *md, int ndims, const dnnl_dim_t *dims, const dnnl_dim_t *strides);

/* nChw<block>c f32 descriptor of 4-D dims (block 8 or 16). */
void sg__dk_blocked_md(dnnl_memory_desc_t *md, const dnnl_dim_t *dims, int block);
/* The layout a batch-norm or pooling primitive computes in, whatever its
 * operands' storage: the backend's channel block for 4-D dims when it has
 * one, else plain. oneDNN's plain and blocked kernels of these ops sum in
 * different orders, so a kernel that followed its operands' storage would
 * round differently where a tensor is kept plain (a graph output, a
 * pipeline stage's boundary tensor) than where the same tensor is a
 * blocked activation; with one compute layout, storage changes only the
 * (exact) reorders around the primitive. */
void sg__dk_compute_md(const sg__dk *k, int ndims, const dnnl_dim_t *dims, dnnl_memory_desc_t *md);
/* The descriptor of tensor t of g as it is stored for this kernel: blocked
 * (4-D only) or plain, with the given dims (a view of t's dims). */
void sg__dk_tensor_md(sg__dk *k, const sg_graph *g, int32_t t, int ndims, const dnnl_dim_t *dims,
                      dnnl_memory_desc_t *md);

/* A memory bound to the caller's buffer `bind` (SG__DK_IN / SG__DK_OUT);
 * returns its index through *idx. */
sg_status sg__dk_user(sg__dk *k, const dnnl_memory_desc_t *md, int bind, int *idx);
/* A scratch memory in the workspace, sized by md (contents undefined at the
 * start of every run). */
sg_status sg__dk_scratch(sg__dk *k, const dnnl_memory_desc_t *md, int *idx);
/* An input whose primitive wants `want`: the user memory itself if `want`
 * equals `user`, else a scratch memory in `want` plus a reorder step (appended
 * now, so call this before adding the main step). */
sg_status sg__dk_input(sg__dk *k, const dnnl_memory_desc_t *user, const dnnl_memory_desc_t *want, int bind,
                       int *idx);
/* The mirror for outputs: the reorder back is appended by sg__dk_finish. */
sg_status sg__dk_output(sg__dk *k, const dnnl_memory_desc_t *user, const dnnl_memory_desc_t *want, int bind,
                        int *idx);
/* Creates the primitive of `pd` as the next step with the given (arg kind,
 * memory index) pairs, plus its scratchpad when it needs one. Takes
 * ownership of pd (destroys it). */
sg_status sg__dk_step_add(sg__dk *k, dnnl_primitive_desc_t pd, int nargs, const int *arg_kinds,
                          const int *mem_idx);
/* sg__dk_step_add for a primitive whose operands all have descriptor md:
 * the op's inputs 0..n_in-1, then its output 0, bound as user memories in
 * that order and passed as arguments arg_kinds[0..n_in]. Takes ownership of
 * pd (destroys it). */
sg_status sg__dk_step_user(sg__dk *k, dnnl_primitive_desc_t pd, const dnnl_memory_desc_t *md, int n_in,
                           const int *arg_kinds);
/* Appends the pending output reorders. */
sg_status sg__dk_finish(sg__dk *k);

/* Binds the caller's buffers and the workspace, then executes steps
 * [first, last). */
sg_status sg__dk_bind(sg__dk *k, void *const *in, void *const *out);
sg_status sg__dk_exec(sg__dk *k, int first, int last);
/* Bind + all steps: the run function of kernels with no C parts. */
sg_status sg__dk_run(sg__cpu_state *st, sg__kernel *base, void *const *in, void *const *out,
                     const sg__run_ctx *ctx);

/* Destroys a dk that failed half-way through its creation. */
static inline void sg__dk_free(sg__dk *k) {
  k->base.destroy(&k->base);
  sg__free(k);
}

/* The buffer of a scratch memory during a run. */
static inline void *sg__dk_buf(sg__dk *k, int idx) { return k->st->ws + k->off[idx]; }

#endif /* SG_BACKEND_CPU_DNNL_COMMON_H */
