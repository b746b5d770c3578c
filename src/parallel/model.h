/* sg_dist_create_model (include/sgrt/dist.h): one forward graph, and each
 * rank builds and runs its own part of it. Data parallelism goes down the
 * sg_dist_create path (model.c); the pipeline (model_pp.c) and tensor
 * (model_tp.c) strategies share sg_dist's core, whose scheduler thread owns
 * the communicator and runs every transfer their runners ask for
 * (xfer_sched.c), and keep their state in sg_dist.impl. Internal. */
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
  const char *what;   /* "pipeline", "tensor", "replica", "loss", "checkpoint": messages, the timeline */
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

/* ---- what the pipeline and tensor strategies share (model.c) ------------------- */

/* An input of the source graph as the user sets it on every rank. */
typedef struct sg__model_input {
  char *name;
  sg_dtype dtype; /* and shape: as in the source graph (the learning rate: a scalar f32) */
  int ndim;
  int64_t dims[SG_MAX_DIMS];
  size_t bytes;
  bool here;       /* this rank's part reads it */
  bool batched;    /* pipeline: the whole batch is given, the runner cuts the micro-batches */
  bool set;        /* set at least once */
  void *copy;      /* pipeline, batched: sg_dist_set_input's copy (the runner keeps a pointer) */
  const void *src; /* tensor with micro-batches, batched: copy, or the caller's buffer when bound */
} sg__model_input;

/* Healing (model_heal.c): after every step (and before the first) each rank packs the state of its part
 * into `own` and writes it into the slot the next rank of its group holds in the global page table
 * (model_copy.c), which keeps it there as `prev`: one generation of copies. Two generations are kept, since
 * a rank may hold one more complete generation than another when a failure cuts the exchange short; each
 * records the layout it was taken in. */
typedef struct sg__model_gen {
  int64_t seq;                 /* 1, 2, ...: its number; 0: none */
  uint64_t step;               /* the steps completed when it was taken */
  int K;                       /* the group's width then (the stages, the shares; stages x shares) */
  int ring;                    /* the copies went round blocks of `ring` members (a stage's shares, or K) */
  int *cut;                    /* pipeline: the stage of each op of fwd then; else NULL */
  int orig[SG__PP_MAX_STAGES]; /* the original rank of each stage or share then */
  /* Packed (model_heal.c's format): this rank's part, and the previous member's, in this rank's slot in the
   * global page table (model_copy.c) or, once the slots were set up again, in prev_heap. */
  unsigned char *own, *prev_heap;
  const unsigned char *prev;
  size_t own_bytes, prev_bytes, own_cap, prev_cap;
} sg__model_gen;

typedef struct sg__model_heal {
  bool on;              /* sg_dist_params.heal */
  int64_t seq;          /* the latest generation this rank holds complete (own and prev); 0: none */
  sg__model_gen gen[2]; /* gen[seq % 2] is the latest */
  int64_t t0_ns;        /* detection of the failure being healed, until the first step after it; 0: none */
  /* Where the copies are kept (model_copy.c): the slots in the global page table (labels: generation
   * numbers), set up for the layout of epoch slots_epoch (-1: none). */
  sg__slots slots;
  int slots_epoch;
  /* The slots of the layout before, kept (not copied out) until no generation is in them: a recovery cut
   * short restores from them, and freeing them (with the copy of what a recovery still needs) stays out
   * of the recovery's time. */
  sg__slots stash;
} sg__model_heal;

/* The member after (before) k in its ring: blocks of `ring` consecutive members of the group (a stage's
 * tensor group in a pipeline of tensor groups, else the whole group). */
static inline int sg__model_ring_next(int k, int ring) { return k / ring * ring + (k % ring + 1) % ring; }
static inline int sg__model_ring_prev(int k, int ring) {
  return k / ring * ring + (k % ring + ring - 1) % ring;
}

/* The copies in the global page table (model_copy.c), generation g's (g->own packed, the label g's number
 * to be): writes g->own into the slot the ring's next member holds for this rank (setting the slots up
 * first, collectively, when the layout or a copy's size changed since: gens still in the old slots are
 * moved to the heap), then, after a barrier over the world, takes the copy the previous member wrote as
 * g->prev (a pointer into this rank's slot). Compute thread. */
sg_status sg__model_copy_push(sg_dist *d, sg__model_gen *g, uint64_t label);
sg_status sg__model_copy_take(sg_dist *d, sg__model_gen *g, uint64_t label);
/* Scheduler thread, at exit: the slots' sg_gmem. */
void sg__model_sched_fini(sg_dist *d);
/* For tests: the slots of this rank's latest generation as it sees them, as writer (push_*) and holder. */
typedef struct sg__model_copy_probe {
  uint64_t label;                /* the generation's number (0: none) */
  int push_node, push_pay_node;  /* the nodes of the target's slot header entry and of its payload */
  uint32_t push_version;         /* that entry's version, and whether it is readable */
  bool push_open;                /*   */
  bool push_matches;             /* the target's slot read back (remote reads) equals this rank's copy */
  char push_gva[SG_GVA_STR_MAX]; /* the slot's header */
  int held_node;                 /* this rank's slot of the generation: its header entry's node, version */
  uint32_t held_version;         /*   */
  bool prev_in_slot;             /* the generation's copy of the previous member is that slot, in place */
  sg_status held_stale;          /* reading the held header at version + 2 */
} sg__model_copy_probe;
sg_status sg__model_copy_probe_get(sg_dist *d, sg__model_copy_probe *out);

/* The state both model strategies keep: the first member of each one's
 * state (sg__par_pipeline, sg__par_tensor), so MODEL(d) reaches it. */
typedef struct sg__par_model {
  int data, pipeline, tensor, micro; /* the job's shape: data x pipeline x tensor ranks */
  /* A copy of the source graph (the user's may go away): names, shapes and
   * which stage holds what. */
  sg_graph *fwd;
  char *loss_name;
  sg__model_input *inputs;
  int n_inputs;
  /* Rank layout (dist.h): rank = replica * width + index, width the pipeline's stages or the tensor
   * group's shares. */
  int replica;         /* 0..data-1 */
  int index;           /* the stage (pipeline) or the share (tensor) */
  int *group;          /* the part's group: world ranks of this replica's stages or shares */
  sg__xfer_sched xctx; /* ... as a transport */
  sg__xfer xfer;
  int *replicas;       /* world ranks of this stage's or share's copies */
  sg__xfer_sched rctx; /* ... as a transport */
  sg__xfer rxfer;
  bool broadcast_done;      /* data > 1: the replicas took replica 0's state (first step) */
  sg_session *part_session; /* this rank's part, compiled (sg_dist.s points to it) */
  /* Figures a strategy sums over the world with each step's loss (one allreduce: loss, then these):
   * the part's step writes them, the sums are here after sg__model_step. */
  float *step_sums;
  int n_step_sums;
  /* The optimizer, kept for a part built again (the caller's may go away; sg__model_keep_optimizer). */
  sg_dist_optimizer opt;
  sg_sgd_params sgd;
  sg_adamw_params adamw;
  char *lr_input;
  sg__model_heal heal; /* model_heal.c */
} sg__par_model;

#define MODEL(d) ((sg__par_model *)(d)->impl)

/* The pipeline strategy's state (model_pp.c). */
typedef struct sg__par_pipeline {
  sg__par_model m;
  int *stage_of_op; /* per op of fwd */
  bool metis;       /* the stages came from the partitioner (else: evenly by op count) */
  sg__pp_stage *st;
  sg__pp_runner *pp;
  /* Pipeline x tensor (m.tensor > 1, pp_tp.c): each stage is a tensor group of m.tensor shares, rank =
   * replica * (K * T) + stage * T + share (m.index = stage * T + share); the stage's share of the split
   * and the runner of its allreduces, over the stage's group. */
  sg__tp_sync *syncs;
  int n_syncs;
  sg__tp_runner *tp;
  int *tgroup;         /* world ranks of this stage's shares */
  sg__xfer_sched tctx; /* ... as a transport */
  sg__xfer txfer;
  /* Repartitioning from the profile (model_pp_replan.c). step_sums: [firing ranks, busy ms of stage 0..K-1
   * summed over the replicas]; this stage's busy time is averaged since the last evaluation. */
  double busy_sum;
  int busy_steps;
  double *cost;       /* per op of fwd: the cost model's estimate (sg__pp_recut) */
  bool recut_refused; /* pipeline x tensor: a profile fired, and the re-cut was said not to apply */
} sg__par_pipeline;

#define PIPELINE(d) ((sg__par_pipeline *)(d)->impl)

/* A pipeline rank's stage and its share in the stage's tensor group (0 without one). */
static inline int sg__pipeline_stage(const sg__par_model *m) { return m->index / m->tensor; }
static inline int sg__pipeline_share(const sg__par_model *m) { return m->index % m->tensor; }

/* The tensor strategy's state (model_tp.c). */
typedef struct sg__par_tensor {
  sg__par_model m;
  sg_graph *tp_g;    /* the rewritten training graph */
  sg_graph *micro_g; /* micro_batches > 1: the forward graph at the micro-batch shapes, which is cut */
  int64_t batch;     /* ... and the whole batch, of which micro-batch j is rows [j*batch/M, (j+1)*batch/M) */
  sg__tp_sync *syncs;
  int n_syncs;
  sg__tp_runner *tp;
  /* With data > 1 or micro-batches: the gradients accumulated and averaged between backward and the
   * updates. */
  uint32_t upd_pos, n_order; /* the first update's schedule position; the schedule's length */
  float **grad_addr;         /* per parameter gradient: its slot */
  size_t *grad_count;        /* its floats */
  int n_grads;
  float *flat; /* all of them, for one allreduce */
  size_t n_flat;
} sg__par_tensor;

#define TENSOR(d) ((sg__par_tensor *)(d)->impl)

/* The first half of both strategies' build: the shape and the model from
 * the create's arguments, the check that every rank runs the same mode,
 * degrees and forward graph (SPEC M5). The part is built after it, so its
 * collectives (the pipeline's choice of stages) meet their like on every
 * rank. */
sg_status sg__model_prepare(sg_dist *d, const sg__par_create_args *a);
/* This rank's place: replica and index for a group of `width` (stages or
 * shares), the group's and the replicas' world ranks. */
sg_status sg__model_place(sg_dist *d, int width);
/* What the model strategies' hooks touch between ops, as a fusion barrier
 * (runtime/hooks.h): every parameter's gradient (averaged over replicas,
 * summed over micro-batches; a pipeline stage's received activations are
 * parameters only to get theirs, which go back upstream) and every input
 * and output of the part's graph (the boundary tensors a stage sends and
 * receives, the loss). Tensor parallelism adds the partial sums it
 * allreduces. A mask of g's tensors (sg__free), or NULL when out of memory. */
uint8_t *sg__model_fuse_barrier(const sg_graph *g);
/* Creates and compiles the session of this rank's part (the updates last),
 * fusing what `barrier` (sg__model_fuse_barrier's, or NULL: no fusion)
 * leaves: d->s and d->g. */
sg_status sg__model_compile(sg_dist *d, const sg_graph *part, const uint8_t *barrier);
/* The same session into *out without touching d (on error *out may hold it: destroy it). */
sg_status sg__model_new_session(const sg_dist *d, const sg_graph *part, const uint8_t *barrier,
                                sg_session **out);
/* Lists the source graph's inputs (and the learning rate when the source
 * graph lacks it) into m->inputs; `part` is this rank's graph, for `here`. */
sg_status sg__model_list_inputs(sg__par_model *m, const sg_graph *part, const char *lr_name);
/* Destroys the part's session (d->s): after what runs it, before the graph it was compiled from. */
void sg__model_release_session(sg_dist *d);
/* Frees what sg__model_prepare, _place and _list_inputs made, and the session if still there, last:
 * after the strategy freed its own state. Idempotent. */
void sg__model_release(sg_dist *d);
/* The checks of sg_dist_set_input/bind_input: the input exists and has the
 * source graph's dtype and shape. *in: the input, NULL when this rank's part
 * does not read it (it is then marked set). */
sg_status sg__model_check_input(sg_dist *d, const char *fn, const char *name, sg_dtype dtype, int ndim,
                                const int64_t *dims, const void *data, sg__model_input **in);
/* One step: refuses a step before every input was set, runs the part's
 * step (`part`: its loss, NaN where there is none), and makes the loss known
 * to every rank: with `reduce`, the world's sum of the ranks' losses (NaN
 * counting 0) divided by `copies`. */
sg_status sg__model_step(sg_dist *d, sg_status (*part)(sg_dist *d, float *loss), bool reduce, int copies);
/* sg_dist_params_hash: the parameters of this rank's part but skip[0..n_skip), digested, then every
 * rank's digest in rank order (one value for the whole model, the same on every rank). */
sg_status sg__model_params_hash(const sg_dist *d, const int32_t *skip, int n_skip, uint64_t *out);

/* The source graph's input `name`, or NULL. */
sg__model_input *sg__model_find_input(sg__par_model *m, const char *name);

/* ---- repartitioning a running pipeline (model_pp_replan.c) ---------------------------- */

/* This rank's stage of the forward graph cut by `cut`, split (sg__pp_split), with the optimizer,
 * compiled, and its runner over the pipeline's transports; d is not touched (the caller swaps). */
typedef struct sg__pp_built {
  sg__pp_stage *st;
  sg_session *s;
  sg__pp_runner *pp;
  sg__tp_sync *syncs; /* a stage that is a tensor group: its share's syncs and their runner */
  int n_syncs;
  sg__tp_runner *tp;
} sg__pp_built;
/* The pipeline's transports for this rank's place now (model.h's group and replicas; with tensor > 1 the
 * stage's group too), made anew. */
sg_status sg__pipeline_transports(sg_dist *d);
/* This rank's stage of the forward graph cut by `cut` into `stages`, split (with a tensor group: its share,
 * pp_tp.c) into b->st and b->syncs. */
sg_status sg__pipeline_split(sg_dist *d, const int *cut, int stages, sg__pp_built *b);
/* Stage `stage` of `stages` of fwd cut by stage_of_op, as share `share` of `ways` (pp_tp.c): the stage's
 * forward graph rewritten by its own tensor plan, then backward; *syncs the allreduces the share needs
 * (resolve them after the optimizer). ways 1: sg__pp_split. The errors of sg__pp_split, sg_tp_plan_create
 * and sg__tp_rewrite; SG_ERR_UNSUPPORTED when the plan would split a received activation. */
sg_status sg__pp_split_tp(const sg_graph *fwd, sg_tensor loss, const int *stage_of_op, int stages, int stage,
                          int micro_batches, int ways, int share, sg__pp_stage **out, sg__tp_sync **syncs,
                          int *n_syncs);
/* From an already split stage (b->st set): the optimizer, the session and the runner. On error b keeps
 * what was made (sg__pp_built_free). */
sg_status sg__pipeline_finish_stage(sg_dist *d, sg__pp_built *b);
/* b's stage in place of this rank's (b is emptied), the cut `cut`, the inputs given to its runner again;
 * the runner's message tags continue at `tag_step`. The caller sets the session's step count. */
sg_status sg__pipeline_install(sg_dist *d, const int *cut, sg__pp_built *b, uint64_t tag_step);
void sg__pp_built_free(sg__pp_built *b);
/* Every input of the source graph that this rank's stage reads gets `here` and `batched` from st; the
 * ones set before go to the runner again (a new stage's runner). */
sg_status sg__pipeline_bind_inputs(sg_dist *d, bool resend);
/* The stage's step: the runner's 1F1B passes over the micro-batches (*loss: the last stage's). */
sg_status sg__pipeline_part_step(sg_dist *d, float *loss);
/* After a step of every rank (the step sums known): when a stage's profile fired, evaluates a re-cut
 * from the stages' measured compute and switches to it when it predicts at least a 1.1x faster slowest
 * stage. Collective over the world; a failure is the step's. */
sg_status sg__pipeline_maybe_replan(sg_dist *d);

/* The stage of source tensor t under `cut` (a stage per op of fwd): its producer's, else its first
 * reader's; -1 when none. */
int sg__pp_tensor_stage(const sg_graph *fwd, const int *cut, int32_t t);
/* What goes with source tensor `name` in stage graph g: the tensor, then the optimizer state named after it
 * (optimizer.c's names), as stage-graph ids; the count (0: not in g). */
int sg__pp_state_group(const sg_graph *g, const char *name, int32_t out[5]);
size_t sg__pp_group_bytes(const sg_graph *g, const int32_t *ids, int n);
/* Every parameter, state and optimizer state of stage `to` was written (written: per tensor of to->g), a
 * received boundary tensor and its never-run update's state excepted; `what` names the caller. */
sg_status sg__pp_check_written(const sg__pp_stage *to, const uint8_t *written, const char *what);

/* ---- healing (model_heal.c; the strategies' parts in pp_heal.c and tp_heal.c) ---------------------- */

/* What a healing strategy gives model_heal.c. */
typedef struct sg__model_heal_ops {
  sg_status (*part)(sg_dist *d, float *loss); /* the part's step (sg__model_step's) */
  int (*copies)(const sg_dist *d);            /* sg__model_step's `copies` now (a recovery changes it) */
  sg_status (*after)(sg_dist *d);             /* after a completed step (a re-cut), or NULL */
  /* Whether source tensor t (a parameter or state of fwd) is in this rank's part now. */
  bool (*mine)(const sg_dist *d, int32_t t);
  /* The new part over the agreed members from generation g: built, its state from the copies, in place
   * of the old one (model_heal.c then sets the step count). A death meanwhile: SG_ERR_COMM with the job
   * failed. */
  sg_status (*rebuild)(sg_dist *d, const sg__model_gen *g);
} sg__model_heal_ops;

/* One step of a healing part: sg__model_step(d, ops->part, reduce, ops->copies(d)), ops->after, a generation
 * of copies (before the first step too); after a peer's loss, the recovery (the agreement, ops->rebuild, a
 * generation of the new layout) and the steps after the restored generation again, until the step this
 * call is for is done. Compute thread. */
sg_status sg__model_heal_step(sg_dist *d, const sg__model_heal_ops *ops, bool reduce);
/* A generation (the caller's part, ops->mine): this part's state into own, own to the next rank of the
 * group, the previous one's into prev, then an allreduce, after which every rank holds the generation.
 * Collective over the world. */
sg_status sg__model_replicate(sg_dist *d, const sg__model_heal_ops *ops);
/* Where source tensor t's bytes (the tensor, then its optimizer state) are in a packed copy, and how many;
 * NULL when it is not there. */
const unsigned char *sg__model_copy_find(const unsigned char *copy, int64_t t, uint64_t *bytes);
/* The tensors of the source graph a copy holds: parameters and state (each with its optimizer state). */
bool sg__model_heal_keeps(const sg_graph *fwd, uint32_t t);
/* *buf grown to at least `bytes` (its capacity *cap). */
sg_status sg__model_heal_reserve(unsigned char **buf, size_t *cap, size_t bytes);
/* The per-rank index of generation g's stage or share k among the members now, -1 when lost. */
int sg__model_gen_member(const sg_dist *d, const sg__model_gen *g, int k);
/* Generation g's stage or share k: its index in this rank's group now (this copy), -1 when it is not in
 * it (lost, or released to keep the copies alike). */
int sg__model_gen_index(const sg_dist *d, const sg__model_gen *g, int k);
/* Who holds generation g's copy of stage or share k now: *index, in this rank's group (the rank of k itself,
 * *from_own; else the next one, which kept it as its prev). SG_ERR_COMM naming both when both were lost. */
sg_status sg__model_gen_keeper(const sg_dist *d, const sg__model_gen *g, int k, int *index, bool *from_own);
/* After a recovery: this rank's place among m->data copies of d->size / data ranks each (rank = replica *
 * width + index), the group's and the replicas' world ranks. The caller sets the width and transports. */
sg_status sg__model_replace(sg_dist *d);
/* heal.on from sg_dist_params.heal; with several copies, the recovery releases the ranks at the lost
 * ones' places in the other copies (sg__dist_healing.keep). */
void sg__model_heal_init(sg_dist *d);
/* sg__dist_healing.keep for the layout now (a pipeline of tensor groups that healed down to one share per
 * stage is a plain pipeline). */
void sg__model_heal_keep(sg_dist *d);
void sg__model_heal_free(sg__model_heal *h);

/* The pipeline's part (pp_heal.c). */
extern const sg__model_heal_ops sg__pp_heal_ops;
/* The tensor group's part (tp_heal.c), and what it needs of model_tp.c: this rank's share for m->tensor
 * ways at m->index built (plan, rewrite, backward, optimizer, session, transports, runner) and freed, and
 * the share's step. */
sg_status sg__tensor_build_share(sg_dist *d);
void sg__tensor_free_share(sg_dist *d);
sg_status sg__tensor_part_step(sg_dist *d, float *loss);
extern const sg__model_heal_ops sg__tp_heal_ops;

/* Re-splitting a tensor group's state from generation g's copies (tp_heal.c; a pipeline of tensor groups'
 * heal, pptp_heal.c, per stage): old share s's slices come from keeper[s] (from its own copy, or the prev it
 * kept), each broadcast over x (the group now, this rank `me` of T1) in the source graph's tensor order,
 * and every member cuts its new slice; a tensor whole under plan0 comes from this rank's own copy. */
typedef struct sg__reshard {
  sg_dist *d;
  const sg__model_gen *g;
  const sg_graph *src;              /* the graph the plans are of */
  sg_tp_plan *plan0, *plan1;        /* T0 ways then, T1 now (NULL: one way, nothing split) */
  int T0, T1, me;                   /* ... and this rank's share now */
  sg__xfer *x;                      /* the group now */
  int keeper[SG__PP_MAX_STAGES];    /* per old share: the share now holding its copy */
  bool from_own[SG__PP_MAX_STAGES]; /* ... as its own (else as the next share's prev) */
  unsigned char *all, *whole, *part;
  size_t all_cap, whole_cap, part_cap;
} sg__reshard;
/* Source tensor t (a parameter or state in this rank's new part d->g) and its optimizer state, into the
 * session. Collective over c->x. */
sg_status sg__reshard_one(sg__reshard *c, int32_t t);
/* Frees the plans and buffers. */
void sg__reshard_free(sg__reshard *c);
/* The pipeline of tensor groups' part (pptp_heal.c). */
extern const sg__model_heal_ops sg__pptp_heal_ops;

/* The optimizer kept in m (its params copied: the caller's may go away before a part is built again). */
sg_status sg__model_keep_optimizer(sg__par_model *m, const sg_dist_optimizer *o);
/* The resolved QoS, the store's address (with heal) and the fault plan, for a model strategy's build. */
sg_status sg__model_read_heal(sg_dist *d);

/* Appends `opt` to an editable training graph (its "lr" input added when
 * missing) and finalizes it. */
sg_status sg__model_add_optimizer(sg_graph *g, const sg_dist_optimizer *opt);

/* Replicas start from replica 0's parameters, state and optimizer state, as
 * data parallelism starts from rank 0's: each such tensor of this rank's
 * part but skip[0..n_skip) goes from replica 0 to the others over m->rctx
 * (collective over the replicas; compute thread). */
sg_status sg__model_broadcast_state(sg_dist *d, const int32_t *skip, int n_skip);

#endif /* SG_DIST_MODEL_H */
