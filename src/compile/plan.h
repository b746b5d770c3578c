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
#include "graph/graph.h"

/* Where a tensor's bytes live. */
typedef enum sg__buf_kind {
  SG__BUF_NONE = 0,       /* not needed by any scheduled op */
  SG__BUF_PERSISTENT = 1, /* own slot for the session's lifetime: sources, outputs, folded constants */
  SG__BUF_TRANSIENT = 2,  /* planned slot shared with tensors whose lifetimes do not overlap */
} sg__buf_kind;

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

/* Alignment of every slot: a cache line, and what oneDNN prefers. */
#define SG__SLOT_ALIGN 64

#endif /* SG_PLAN_H */
