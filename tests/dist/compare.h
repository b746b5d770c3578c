/* What the pipeline and tensor-parallel workers (pp_worker.c, pp_equiv.c,
 * tp_worker.c, model_worker.c) share: the MLP's parameters, the training
 * graph and session of a run, and the comparisons with the single-process
 * reference. Failures exit through worker_check.h's FAIL. */
#ifndef SG_TEST_DIST_COMPARE_H
#define SG_TEST_DIST_COMPARE_H

#include <stdbool.h>
#include <stddef.h>

#include "parallel/tp.h"
#include "sgrt/sgrt.h"

/* Layer l's parameters "fc<l>.weight" ([out_f, fan_in], or [fan_in, out_f]
 * with `in_out`) and, with `bias`, "fc<l>.bias" [out_f] (else SG_NO_TENSOR),
 * U(-1/sqrt(fan_in), 1/sqrt(fan_in)) from sg_worker_unit(7, ...): the same
 * initial values in every worker and rank. */
void mlp_layer_params(sg_graph *g, int l, int fan_in, int out_f, bool in_out, bool bias, sg_tensor *w,
                      sg_tensor *b);

/* The forward graph's end: cross entropy (mean) of `logits` against the
 * labels `y`, named "loss" and marked as an output; finalizes `g` and
 * returns the loss. */
sg_tensor finish_forward(sg_graph *g, sg_tensor logits, sg_tensor y);

/* Appends SGD with momentum 0.9 (and an "lr" input if there is none) and
 * finalizes. */
void add_optimizer(sg_graph *g);
/* A compiled one-thread session of `g` whose updates run last
 * (sg__session_set_updates_last). */
sg_session *open_session(const sg_graph *g);

/* The training graph of the forward graph `fwd` (a copy, backward from its
 * "loss", add_optimizer) in *g, and its session (open_session). */
sg_session *open_training(const sg_graph *fwd, sg_graph **g);

/* The stage of each op of `fwd` (stage_of[sg_graph_num_ops(fwd)]) for a
 * pipeline of `stages`, from the partitioner's pipeline mode. */
void stages_from_metis(const sg_graph *fwd, int stages, int *stage_of);

/* `steps` steps of `s` (an MLP with inputs "x", "y", "lr") on
 * sg_worker_mlp_batch(batch, in, classes, step) at learning rate `lr`,
 * reading each step's "loss" into losses[]. */
void train_mlp(sg_session *s, int batch, int in, int classes, float lr, int steps, float *losses);
/* train_mlp with each step run by the tensor-parallel runner `tp` of `s`
 * (its syncs), or by sg_session_step when tp is NULL. */
void train_mlp_tp(sg_session *s, sg__tp_runner *tp, int batch, int in, int classes, float lr, int steps,
                  float *losses);

/* max|a-b| / max|b| over n values (max|a-b| when b is all 0). */
double rel_diff(const float *a, const float *b, size_t n);
/* Each of `steps` losses against the reference's: fails beyond `tol`
 * relative; with `who` (e.g. "rank 1") prints each pair, prefixed by it.
 * Returns the largest relative difference. */
double compare_losses(const char *who, const float *got, const float *want, int steps, double tol);

/* Slice `rank` of `ways` of full (info's dims) along axis into out. */
void slice_part(const float *full, const sg_tensor_info *info, int axis, int ways, int rank, float *out);

/* This rank's part of parameter `a` of a job against the reference's values `want`: whole (a replicated
 * tensor of this rank's stage), a slice of `ways` (split by the stage's own plan, which the public API
 * does not show: the slice is compared with the reference's slice `share` along each axis it divides, and
 * the closest must match), or absent (another stage). `diff` measures (NULL: rel_diff). Returns the
 * error, -1 when absent; *split 1 for a slice. */
double compare_dist_part(sg_dist *d, const sg_tensor_info *a, const float *want, int ways, int share,
                         double (*diff)(const float *, const float *, int64_t), int *split);

/* The group "<prefix><index>" of `size` ranks, this process its rank `rank` (sg__comm_create_group): a
 * pipeline's ranks of one replica, or one stage's replicas. */
sg_comm *group_comm(const char *prefix, int index, int rank, int size);

#endif /* SG_TEST_DIST_COMPARE_H */
