/* A compiled plan for one graph on one device: which ops run in which order
 * (training and evaluation), which ops were folded into constants at compile
 * time, and where every tensor lives in the device memory. Built once by
 * sg__plan_build; the session then runs it step after step without
 * allocating. */
#ifndef SG_PLAN_H
#define SG_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "compile/cache.h"
#include "graph/graph.h"

/* Where a tensor's bytes live. */
typedef enum sg__buf_kind {
  SG__BUF_NONE = 0,       /* not needed by any scheduled op */
  SG__BUF_PERSISTENT = 1, /* own slot for the session's lifetime: sources, outputs, folded constants */
  SG__BUF_TRANSIENT = 2,  /* planned slot shared with tensors whose lifetimes do not overlap */
} sg__buf_kind;

/* A group of fused ops (plan.groups). */
typedef struct sg__fused_group {
  int32_t anchor;                 /* op id of its last member */
  uint32_t first_op, n_ops;       /* into plan.fused_ops */
  uint32_t first_io, n_in, n_out; /* into plan.fused_io */
  bool eval;                      /* its members run in evaluation passes too */
} sg__fused_group;

struct sg__kir_kernel;

typedef struct sg__plan {
  /* Ops run by a training step, in order; then the forward-only subset
   * run by an evaluation pass (same order, same memory). */
  int32_t *order;
  uint32_t n_order;
  int32_t *eval_order;
  uint32_t n_eval;
  /* Ops evaluated once at compile time because all their inputs are
   * constant; their outputs become persistent. In dependency order. */
  int32_t *fold_order;
  uint32_t n_fold;

  /* Per tensor. */
  uint8_t *buf_kind; /* sg__buf_kind */
  size_t *offset;    /* within its region (persistent or transient) */
  int32_t *last_use; /* position in `order` of its last reader (-1: none); transient tensors only */
  int32_t *alias_of; /* in-place: the tensor whose slot this one reuses, or -1 */
  size_t *bytes;     /* slot size: nbytes, or the backend's layout size (plan_layouts) */

  size_t persistent_bytes;    /* sum of persistent slots (aligned) */
  size_t transient_bytes;     /* planned peak of the transient region */
  size_t sum_transient_bytes; /* what the transient tensors would take without reuse */
  size_t sum_tensor_bytes;    /* every tensor used, without reuse */
  uint32_t n_eliminated;      /* ops removed as dead code */
  uint32_t n_inplace;         /* outputs that reuse their input's buffer */

  /* Fusion (fuse.c; docs/compiler.md): chains and trees of elementwise ops
   * that run as one generated kernel. A group runs at the position of its
   * last member, its anchor; the other members are not in `order` or
   * `eval_order`. Its operands are the tensors it reads from outside and
   * the members' outputs read outside it (or kept: graph outputs); every
   * other member output lives only inside the kernel (SG__BUF_NONE). */
  uint32_t n_groups;
  sg__fused_group *groups;
  int32_t *group_of;  /* per op: its group, or -1 */
  int32_t *fused_ops; /* members of all groups, each group's in schedule order */
  int32_t *fused_io;  /* per group: its inputs, then its outputs (tensor ids) */
  int8_t
      *fused_over; /* per entry of fused_io that is an output: the input (index) whose slot it takes, or -1 */
  struct sg__kir_kernel *kernels; /* per group: its kernel (after memory planning) */
  uint32_t n_fused_ops;           /* ops that run inside groups */
  /* The distinct kernels: groups whose kernels are the same program (the
   * same IR but for the name: an update of each of many parameters of one
   * shape) share the first one's function, named as it is. */
  const struct sg__kir_kernel **unique;
  uint32_t n_unique;
} sg__plan;

/* Choices a caller may make before scheduling. Zero is the default. */
typedef struct sg__plan_options {
  /* Run optimizer updates after the whole backward pass (in graph order)
   * instead of as soon as each gradient exists. A data-parallel step needs
   * this: an update must wait for its gradient's allreduce, which overlaps
   * the rest of backward (SPEC C5). */
  bool updates_last;
  /* Per tensor, or NULL: persistent tensors that get no slot (buf_kind
   * stays SG__BUF_PERSISTENT, offset is SG__NO_OFFSET) and no bytes of the
   * persistent region. The caller gives them memory of its own before an op
   * that reads them runs, or never runs such an op. A mark on any other
   * tensor is ignored. Read during sg__plan_build only. */
  const uint8_t *no_memory;
  /* Fuse chains of elementwise ops into generated kernels (when the
   * backend runs them: module_build). */
  bool fuse;
  /* Per tensor, or NULL: tensors a caller reads or writes between ops (the
   * parallel runtime's hooks: gradients to allreduce). No op that reads or
   * writes one joins a group, so each such tensor is in memory, produced
   * and read by ops at their own positions of the order. Read during
   * sg__plan_build only. */
  const uint8_t *fuse_barrier;
} sg__plan_options;

/* plan.offset of a persistent tensor left without a slot (no_memory). */
#define SG__NO_OFFSET SIZE_MAX

/* Builds the plan of a finalized graph for a backend (`be` may be NULL:
 * plain layouts; otherwise its plan_layouts, if any, sizes the transient
 * slots and is told the layouts are decided). Errors: SG_ERR_NO_MEMORY;
 * SG_ERR_CYCLE when an in-place update cannot be ordered after the readers
 * of the tensor it updates; the backend's plan_layouts errors. */
sg_status sg__plan_build(const sg_graph *g, const sg__backend_i *be, void *be_state,
                         const sg__plan_options *opt, sg__plan *out);
void sg__plan_free(sg__plan *p);

/* The training order that sg__plan_build gives `g` with `opt` (its
 * plan.order), without planning memory: for a caller that decides a layout
 * option from the schedule, such as which tensors get no memory. *order is
 * allocated with sg__malloc (the caller frees it). Errors as sg__plan_build's
 * scheduling: SG_ERR_STATE (not finalized), SG_ERR_NO_MEMORY, SG_ERR_CYCLE. */
sg_status sg__plan_schedule(const sg_graph *g, const sg__plan_options *opt, int32_t **order, uint32_t *n);

/* The tensors an entry of `order` reads and writes: op k's own, or for the
 * anchor of a fused group the group's operands. */
void sg__plan_io(const sg__plan *p, const sg_graph *g, int32_t k, const int32_t **in, int *n_in,
                 const int32_t **out, int *n_out);

/* What building a plan's generated kernels cost (sums over calls). */
typedef struct sg__compile_stats {
  double seconds;                /* in sg__compile_module: cache, code generation, compiler, loading */
  uint32_t kernels_generated;    /* kernels compiled (not loaded from the cache) */
  uint32_t compiler_invocations; /* compiler runs */
  uint32_t cache_hits, cache_misses;
} sg__compile_stats;

/* The module of p's fused kernels (NULL when it has none): loaded from the
 * compile cache when an entry for the same key is there and valid, else
 * generated, compiled and stored (compile/cache.h; a cache that cannot be
 * opened or written is a warning). Errors: the backend's module_build
 * (SG_ERR_COMPILER when the compiler is missing or fails), SG_ERR_NO_MEMORY. */
sg_status sg__compile_module(const sg_graph *g, const sg__plan *p, const sg__plan_options *opt,
                             const sg__backend_i *be, void *be_state, sg__module **out,
                             sg__compile_stats *stats);

/* The compile cache key of generated code: sgrt's version, the codegen
 * version, the backend's identity and the rest of the canonical encoding
 * (graph hash, options, the kernels' IR). */
sg__cache_key sg__compile_key_text(const char *sgrt_version, const char *identity, const char *rest);

/* Alignment of every slot: a cache line, and what oneDNN prefers. */
#define SG__SLOT_ALIGN 64

#endif /* SG_PLAN_H */
