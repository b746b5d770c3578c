/* Tensor parallelism (SPEC P7), first version: a rewrite of a forward graph
 * into one rank's share of it, following an sg_tp_plan (Megatron-style
 * column/row splits of linear/matmul weights), and a runner that performs the
 * all-reduces the split needs through session hooks. See
 * docs/tensor_parallel.md. Internal: nothing here is exported. */
#ifndef SG_DIST_TP_H
#define SG_DIST_TP_H

#include <stdint.h>

#include "parallel/xfer.h"
#include "sgrt/comm.h"
#include "sgrt/graph.h"
#include "sgrt/partition.h"
#include "sgrt/session.h"

struct sg__step_hooks; /* runtime/hooks.h */

/* What a sync point does with its tensor, in place, across the TP group. */
typedef enum sg__tp_sync_kind {
  /* Forward: sum a row-split op's partial output, or a column-split output
   * zero-padded to the whole width (a gather), before its consumers run. */
  SG__TP_SYNC_FWD_ALLREDUCE = 1,
  /* Backward: sum a column-split op's contribution to its input's gradient
   * (each rank only back-propagates through its slice of the weight), or
   * the zero-padded gradient of a row split's sliced input. */
  SG__TP_SYNC_BWD_ALLREDUCE = 2,
} sg__tp_sync_kind;

/* One sync point, by name so it survives sg_graph_backward() appending to
 * the graph (ids stay, but the backward tensor does not exist yet). */
typedef struct sg__tp_sync {
  sg__tp_sync_kind kind;
  /* The tensor to all-reduce in the rewritten graph. Backward: NULL until
   * sg__tp_resolve_backward() names it (and NULL after it when the input
   * needs no gradient: then there is nothing to sync). */
  char *tensor;
  /* Backward only: the column-split op (in the rewritten graph) and its
   * weight slice, which identify the op autodiff appends for its input
   * gradient ("<op>/grad..." reading the weight). */
  char *op;
  char *weight;
  int resolved; /* backward: 1 once sg__tp_resolve_backward() looked */
} sg__tp_sync;

/* Builds rank `rank`'s forward graph of `fwd` (finalized, forward only: no
 * gradient or optimizer tensors) for a TP group of `ways` ranks, from `plan`
 * (made by sg_tp_plan_create on `fwd` with the same ways). Split weights and
 * their column biases are sliced, initializers included, so every rank starts
 * from the single-process weights; everything else is replicated under its
 * original name. Row-split outputs get the tensor "<name>.tp_partial" (the
 * partial sum, synced forward) and a bias is added after the sum.
 * `loss` must stay whole (replicated). The result is not finalized: the caller
 * appends backward and an optimizer, then calls sg__tp_resolve_backward().
 * ways 1 with plan NULL: nothing is split, the result is a copy of `fwd`
 * with no syncs (a group healed down to one share per copy, tp_heal.c).
 * Returns SG_ERR_INVALID_ARG (NULL, rank/ways, foreign loss or plan, a plan
 * with ways 1 or none with more),
 * SG_ERR_STATE (not finalized, not forward-only), SG_ERR_UNSUPPORTED (a split
 * this version does not run: the message names the op), SG_ERR_NO_MEMORY. On
 * error *out is NULL and *syncs NULL. Free syncs with sg__tp_syncs_free. */
sg_status sg__tp_rewrite(const sg_graph *fwd, sg_tensor loss, const sg_tp_plan *plan, int ways, int rank,
                         sg_graph **out, sg__tp_sync **syncs, int *n_syncs);

/* Names the backward sync tensors in `train` (the rewritten graph after
 * sg_graph_backward). SG_ERR_INVALID_ARG; SG_ERR_NOT_FOUND when a named op or
 * weight is missing; SG_ERR_INTERNAL when the gradient op is ambiguous. */
sg_status sg__tp_resolve_backward(const sg_graph *train, sg__tp_sync *syncs, int n_syncs);

void sg__tp_syncs_free(sg__tp_sync *syncs, int n_syncs);

/* ---- resharding with graph ops (tp_reshard.c), used by the rewrite ------------ */

/* Zero-pads `shard` (split along its last dim, this rank's part) to the whole
 * width; the result, named `name` (the shard is renamed "<name>.tp_shard"),
 * becomes the whole tensor once summed over the group (a forward sync). */
sg_status sg__tp_gather_last(sg_graph *g, sg_tensor shard, int ways, int rank, const char *name,
                             sg_tensor *out);
/* This rank's part of `whole` along its last dim, "<name>.tp_slice", as a
 * product with the constant selector "<name>.tp_select" (*selector): its
 * input gradient needs a backward sync. f32 only. */
sg_status sg__tp_slice_last(sg_graph *g, sg_tensor whole, int ways, int rank, const char *name,
                            sg_tensor *out, sg_tensor *selector);

/* Slice k of `ways` of a tensor (dims, element bytes es) cut along `axis` in `groups` blocks
 * (sg_tp_plan_tensor_split: slice k is its part of every block, in block order): copied from
 * `whole` into `part`, or with put, from `part` into its place in `whole`. The caller checked
 * that dims[axis] divides by groups * ways. */
void sg__tp_slice_copy(unsigned char *whole, unsigned char *part, int ndim, const int64_t *dims, size_t es,
                       int axis, int groups, int ways, int k, bool put);

/* ---- running (tp_run.c) ---------------------------------------------------- */

typedef struct sg__tp_runner sg__tp_runner;

/* A runner of compiled session `s` (of the rewritten training graph) whose
 * passes all-reduce every sync tensor right after the op producing it, over
 * `x` (the TP group: its size is the number of ways). SG_ERR_INVALID_ARG,
 * SG_ERR_STATE (not compiled, backward unresolved), SG_ERR_NOT_FOUND (a sync
 * tensor without a slot or producer), SG_ERR_NO_MEMORY. */
sg_status sg__tp_runner_create(sg_session *s, const sg__xfer *x, const sg__tp_sync *syncs, int n_syncs,
                               sg__tp_runner **out);
/* Runs schedule positions [begin, end) of the session with the syncs, on
 * the calling thread, drawing dropout masks from `stream` (0: the step's
 * own; g + 1: micro-batch g, as a pipeline's passes), and counts a step
 * after them with `count_step` (sg__session_run_pass; its errors and the
 * transport's). */
sg_status sg__tp_runner_run(sg__tp_runner *r, uint32_t begin, uint32_t end, uint64_t stream, bool count_step);
/* A whole training step with the syncs: sg_session_step's counterpart. */
sg_status sg__tp_runner_step(sg__tp_runner *r);
/* The hooks that run the syncs, for passes run by another runner (a pipeline stage that is a tensor
 * group: every share runs the same passes, so the allreduces meet). Live as long as r. */
const struct sg__step_hooks *sg__tp_runner_hooks(const sg__tp_runner *r);
/* Frees. Accepts NULL. */
void sg__tp_runner_destroy(sg__tp_runner *r);
/* Number of all-reduces per step and the elements they move (for reports). */
void sg__tp_runner_stats(const sg__tp_runner *r, int *n_allreduce, int64_t *elements);

/* Gathers a weight sliced along `axis` (`groups` blocks, each cut in the
 * group's ways: sg_tp_plan_tensor_split) into the whole tensor `full` (dims
 * `full_dims`, f32) from every rank's `slice`: collective over the group.
 * SG_ERR_INVALID_ARG for a bad axis or dims that do not divide. */
sg_status sg__tp_gather(const sg__xfer *x, int ndim, const int64_t *full_dims, int axis, int groups,
                        const float *slice, float *full);

#endif /* SG_DIST_TP_H */
