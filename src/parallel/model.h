/* sg_dist_create_model (include/sgrt/dist.h): one forward graph, and each
 * rank builds and runs its own part of it. Data parallelism goes down the
 * sg_dist_create path (model.c); pipeline (model_pp.c) and tensor
 * parallelism (model_tp.c) reuse sg_dist's scheduler thread, which owns the
 * communicator and runs every transfer the runners ask for (xfer_sched.c),
 * and hang their state off sg_dist.model. The public functions of dist.c and
 * step.c dispatch here when sg_dist.model is set. Internal. */
#ifndef SG_DIST_MODEL_H
#define SG_DIST_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "parallel/dist_internal.h"
#include "parallel/pp.h"
#include "parallel/tp.h"
#include "parallel/xfer.h"

/* ---- a transport through the scheduler thread (xfer_sched.c) ----------------- */

/* What the transport needs: the dist (its scheduler thread runs every call
 * over the world communicator, which it owns) and, for a group, its
 * members' world ranks (the transport's ranks are then member indices). */
typedef struct sg__xfer_sched {
  sg_dist *d;
  const char *what;   /* "pipeline", "tensor", "replica", "loss": for messages and the timeline */
  int mode;           /* sg__dist_xfer_id's mode */
  const int *members; /* world ranks of the group in group order, or NULL: the whole world */
  int n_members, me;  /* the group's size and this rank's index in it */
  void *scratch;      /* scheduler thread: the root's staging buffer of a group allreduce */
  size_t scratch_bytes;
} sg__xfer_sched;

/* A transport whose send, recv, allreduce and allgather are each an
 * sg__dist_run_job on d's scheduler thread over the world communicator (a
 * group's collectives as point-to-point messages between its members). A
 * point-to-point wait fails as soon as any rank of the world is unreachable
 * (not only the peer): in a pipeline every rank's failure dooms the step,
 * and the stage waiting on a live neighbour would otherwise learn of it only
 * when that neighbour gives up in turn. Every failure is recorded with
 * sg__dist_fail (sticky, the communicator aborted) with a message naming
 * this rank, the step and the cause. ctx and members must outlive the
 * transport; free ctx with sg__xfer_sched_free. */
void sg__xfer_sched_init(sg__xfer_sched *ctx, sg_dist *d, const int *members, int n_members, int me,
                         const char *what, sg__xfer *out);
void sg__xfer_sched_free(sg__xfer_sched *ctx);
/* Member 0's `bytes` at buf to every member of ctx's group (collective over the group). */
sg_status sg__xfer_sched_bcast(sg__xfer_sched *ctx, void *buf, size_t bytes);

/* Allreduce of `count` elements in place over the world communicator, on
 * the scheduler thread (the per-step loss, the choice of stages). */
sg_status sg__dist_world_allreduce(sg_dist *d, void *buf, size_t count, sg_dtype dtype, sg_reduce_op op);

/* ---- the mode ------------------------------------------------------------------ */

typedef enum sg__model_kind { SG__MODEL_PIPELINE = 1, SG__MODEL_TENSOR = 2 } sg__model_kind;

/* An input of the source graph as the user sets it on every rank. */
typedef struct sg__model_input {
  char *name;
  sg_dtype dtype; /* and shape: as in the source graph (the learning rate: a scalar f32) */
  int ndim;
  int64_t dims[SG_MAX_DIMS];
  size_t bytes;
  bool here;    /* this rank's part reads it */
  bool batched; /* pipeline: the whole batch is given, the runner cuts the micro-batches */
  bool set;     /* set at least once */
  void *copy;   /* pipeline, batched: sg_dist_set_input's copy (the runner keeps a pointer) */
} sg__model_input;

/* Lists the source graph's inputs (and the learning rate when the source
 * graph lacks it) into m->inputs; `part` is this rank's graph, for `here`. */
struct sg__dist_model;
sg_status sg__model_list_inputs(struct sg__dist_model *m, const sg_graph *part, const char *lr_name);

typedef struct sg__dist_model {
  sg__model_kind kind;
  int data, pipeline, tensor, micro;
  /* A copy of the source graph (the user's may go away): names, shapes and
   * which stage holds what. */
  sg_graph *fwd;
  char *loss_name;
  sg__model_input *inputs;
  int n_inputs;
  sg__xfer_sched xctx; /* the part's group: the pipeline's stages, or the tensor group */
  sg__xfer xfer;
  int *group;          /* its members' world ranks */
  sg__xfer_sched rctx; /* pipeline with data > 1: this stage's replicas */
  sg__xfer rxfer;
  int *replicas; /* their world ranks */
  int replica;   /* this rank's replica (0..data-1), stage (0..pipeline-1) */
  int stage;
  bool broadcast_done;      /* data > 1: the replicas took replica 0's state (first step) */
  sg_session *part_session; /* this rank's part, compiled (sg_dist.s points to it) */
  /* Pipeline. */
  int *stage_of_op; /* per op of fwd */
  bool metis;       /* the stages came from the partitioner (else: evenly by op count) */
  sg__pp_stage *st;
  sg__pp_runner *pp;
  /* Tensor. */
  sg_graph *tp_g; /* the rewritten training graph */
  sg__tp_sync *syncs;
  int n_syncs;
  sg__tp_runner *tp;
  int32_t tp_loss; /* the loss in tp_g */
  /* Tensor with data > 1: the gradients averaged between backward and the updates. */
  uint32_t upd_pos, n_order; /* the first update's schedule position; the schedule's length */
  float **grad_addr;         /* per parameter gradient: its slot */
  size_t *grad_count;        /* its floats */
  int n_grads;
  float *flat; /* all of them, for one allreduce */
  size_t n_flat;
} sg__dist_model;

/* The pipeline or tensor strategy's state of a job. */
#define MODEL(d) ((sg__dist_model *)(d)->impl)

/* model_pp.c / model_tp.c: build this rank's part after the scheduler
 * joined the job; d->s and d->g are set on success. */
sg_status sg__model_pp_build(sg_dist *d, const sg_dist_optimizer *opt);
sg_status sg__model_tp_build(sg_dist *d, const sg_dist_optimizer *opt);
/* One step of the part (compute thread); *loss: the last stage's (pipeline)
 * or every rank's (tensor) loss, NaN where there is none. */
sg_status sg__model_pp_step(sg_dist *d, float *loss);
sg_status sg__model_tp_step(sg_dist *d, float *loss);
void sg__model_pp_free(sg__dist_model *m);
void sg__model_tp_free(sg__dist_model *m);
/* The stage that holds tensor `name` of the source graph (pipeline), -1 when none. */
int sg__model_pp_stage_of(const sg__dist_model *m, const char *name);

/* Appends `opt` to an editable training graph (its "lr" input added when
 * missing) and finalizes it. */
sg_status sg__model_add_optimizer(sg_graph *g, const sg_dist_optimizer *opt);

/* Replicas start from replica 0's parameters, state and optimizer state, as
 * data parallelism starts from rank 0's: each such tensor of this rank's
 * part but skip[0..n_skip) goes from replica 0 to the others over m->rctx
 * (collective over the replicas; compute thread). */
sg_status sg__model_broadcast_state(sg_dist *d, const int32_t *skip, int n_skip);

#endif /* SG_DIST_MODEL_H */
