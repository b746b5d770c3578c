/* Pipeline parallelism (SPEC P7), first version: a forward graph with a
 * stage per op is cut into one training graph per stage (pp_split.c), and a
 * runner drives one stage through a 1F1B schedule of M micro-batches,
 * sending boundary activations forward and their gradients back with the
 * wire protocol of SPEC M4 (pp_run.c, pp_sched.c), optionally as one of D
 * data-parallel replicas of the pipeline (sg__pp_dp). Losses and parameters
 * equal a single-process run accumulating gradients over the same
 * micro-batches (with batch norm and dropout too: see sg__pp_step). See
 * docs/pipeline_parallel.md. Internal: nothing here is exported. */
#ifndef SG_DIST_PP_H
#define SG_DIST_PP_H

#include <stdint.h>

#include "parallel/xfer.h"
#include "sgrt/comm.h"
#include "sgrt/graph.h"
#include "sgrt/partition.h"
#include "sgrt/session.h"

struct sg__step_hooks; /* runtime/hooks.h */

/* Bounds that keep a message tag in 31 bits (pp_run.c packs direction,
 * step, boundary index and micro-batch into it). Boundary index 511 is the
 * tied weights' gradient exchange's (its micro-batch field: the weight's
 * key), so a stage sends or receives at most 511 boundary tensors. */
#define SG__PP_MAX_STAGES 1024
#define SG__PP_MAX_MICRO 4096
#define SG__PP_MAX_BOUNDARY 511

/* One stage's share of the model. Tensor ids are ids of `g`; they stay valid
 * when the caller appends the optimizer (graphs only grow). */
typedef struct sg__pp_stage {
  int stage, stages, micro_batches;
  int64_t batch, micro_batch; /* samples per step and per micro-batch */
  /* The stage's training graph, not finalized: its forward ops, then the
   * loss (last stage) or the surrogate loss sum_j sum(send_j * send_grad_j),
   * then sg_graph_backward. The caller appends an optimizer and finalizes.
   * Owned; freed by sg__pp_stage_destroy (after every session on it). */
  sg_graph *g;
  /* Boundary tensors from stage-1: every tensor produced before this stage
   * and read here or later (one read only later is relayed: received and
   * sent on), in tensor order of the source graph (the order stage-1 sends
   * them). Each is a PARAMETER of g without an initializer, so autodiff
   * gives it a gradient (recv_grad), which is what goes back to stage-1;
   * its update is never run. */
  int n_recv;
  int32_t *recv, *recv_grad;
  /* Boundary tensors to stage+1 (produced here or before, read after this
   * stage), in source tensor order, and the inputs of g carrying their
   * gradients back from stage+1 ("<name>.pp_grad"). */
  int n_send;
  int32_t *send, *send_grad;
  /* Inputs of the source graph this stage reads; batched[i] when their
   * first dim is the batch (then a micro-batch is fed, rows m*mb..). */
  int n_inputs;
  int32_t *inputs;
  uint8_t *batched;
  /* The loss (last stage) or the surrogate (others): a marked output. */
  int32_t loss;
  /* Weights tied across stages: parameters of the source graph that ops of several stages read (GPT-2's
   * token embedding, also its output layer), those this stage holds, in source tensor order (ids of g).
   * Every stage that reads one holds a copy with the same initial value and computes its part of the
   * gradient; the runner sums the holders' parts before the update (pp_run.c), so the copies stay
   * bitwise equal. tied_key[i]: the weight's place among all tied weights of the source graph (the same
   * on every holder: its messages' tag); its holders, ascending, are
   * tied_holders[tied_off[i] .. tied_off[i + 1]). */
  int n_tied;
  int32_t *tied;
  int32_t *tied_key, *tied_off, *tied_holders;
} sg__pp_stage;

/* At most this many weights tied across stages in one source graph (the key fits the micro-batch field
 * of a message tag, pp_run.c). */
#define SG__PP_MAX_TIED SG__PP_MAX_MICRO

/* holds[k] (k < stages) = whether stage k of `cut` (a stage per op of fwd) holds source tensor t: an op
 * of k reads or produces it. A parameter held by two stages or more is tied across them. */
void sg__pp_tensor_holders(const sg_graph *fwd, const int *cut, int stages, int32_t t, uint8_t *holds);

/* Builds stage `stage` of `fwd` (finalized, forward only) cut into `stages`
 * stages by stage_of_op (one entry per op of fwd, n_ops of them, values
 * 0..stages-1; e.g. sg_partition_op_part in SG_PARTITION_PIPELINE mode) and
 * run as `micro_batches` micro-batches: inputs whose first dim is the batch
 * (the first dim of fwd's first input of rank >= 1) are cut to batch/M rows,
 * and every shape is re-inferred from them.
 * Requirements, each an error naming what breaks it:
 *   SG_ERR_INVALID_ARG  NULL, stages outside 1..SG__PP_MAX_STAGES, stage
 *     outside 0..stages-1, n_ops != the graph's, an entry outside the range,
 *     M outside 1..SG__PP_MAX_MICRO, a batch M does not divide, a loss that
 *     is not one float element or not produced on the last stage, an empty
 *     stage, an edge from a later stage to an earlier one (not acyclic);
 *   SG_ERR_STATE        fwd not finalized or not forward-only;
 *   SG_ERR_UNSUPPORTED  a state tensor (running statistics) used on two
 *     stages, a non-f32 boundary tensor, a shape that does not follow the
 *     batch, a stage k < stages-1 that sends nothing, more than
 *     SG__PP_MAX_TIED tied weights;
 *   SG_ERR_NO_MEMORY, or a builder/autodiff error of the stage graph.
 * On error *out is NULL. A parameter read on several stages is tied: each
 * of them holds a copy (st->tied). A tensor read more than one stage after the one
 * producing it is relayed by the stages in between (messages go to the next
 * stage only). Batch norm and dropout are accepted: the runner gives their
 * recomputed passes the masks and statistics of the first (sg__pp_step).
 * Weights and running statistics keep their shape even when a dim equals
 * the batch (16 channels at batch 16). */
sg_status sg__pp_split(const sg_graph *fwd, sg_tensor loss, const int *stage_of_op, int32_t n_ops, int stages,
                       int stage, int micro_batches, sg__pp_stage **out);

/* The same stage without backward, finalized (a pipeline stage that is a tensor group plans and rewrites it
 * into its share first, pp_tp.c): its forward ops and the loss or surrogate, the boundary tensors and the
 * tied weights marked outputs (so a tensor plan keeps the tied weights whole); recv_grad is NULL. The errors
 * of sg__pp_split and sg_graph_finalize. */
sg_status sg__pp_split_forward(const sg_graph *fwd, sg_tensor loss, const int *stage_of_op, int32_t n_ops,
                               int stages, int stage, int micro_batches, sg__pp_stage **out);
/* Backward of st->g from st->loss, and recv_grad: each boundary input's gradient, a marked output (the
 * last part of sg__pp_split). SG_ERR_UNSUPPORTED when the loss does not depend on a boundary input. */
sg_status sg__pp_stage_backward(sg__pp_stage *st);

/* The whole of `fwd` (finalized, forward only) rebuilt at the shapes of one
 * of `micro_batches` micro-batches, forward only and finalized, every tensor
 * under its name (tensor parallelism's micro-batches: the share is cut from
 * it). *batch: the whole batch (the first dim of fwd's first input of rank
 * >= 1). The errors of sg__pp_split with one stage. */
sg_status sg__pp_micro_forward(const sg_graph *fwd, sg_tensor loss, int micro_batches, sg_graph **out,
                               int64_t *batch);
/* Frees a stage and its graph. Accepts NULL. */
void sg__pp_stage_destroy(sg__pp_stage *st);

/* Fills stage_of_op[n_ops] from a partition of fwd: each op's part mapped
 * through sg_partition_stage_order (the identity in pipeline mode).
 * SG_ERR_INVALID_ARG for NULL or a size mismatch; SG_ERR_CYCLE for parts
 * that are not a pipeline; the partition's own errors. */
sg_status sg__pp_stages_from_partition(const sg_partition *p, int32_t n_ops, int *stage_of_op);

/* ---- re-cutting a running pipeline from its profile (pp_recut.c) --------------- */

/* A new cut of the same `stages` stages from what a running pipeline
 * measured (SPEC P6). cost[n_ops]: every op's static cost estimate (any unit,
 * >= 0: sg_partition_op_cost's roofline time); stage_of_op: the current
 * cut; busy_ms[stages]: each stage's measured compute per step. Stage k's
 * speed is taken as busy_ms[k] over the cost it holds (a slow or shared CPU
 * shows as a higher time per unit of cost), and the new cut is contiguous
 * in op order (the graph's ops are topologically ordered, so it is
 * acyclic), every stage non-empty, minimising the slowest stage's predicted
 * time. out[n_ops]: the new cut; *gain: the measured slowest stage's time
 * over the predicted one (1 when nothing can be predicted: a stage with no
 * cost or no time, whose cut is then out = stage_of_op). SG_ERR_INVALID_ARG
 * for NULL, sizes, a negative or non-finite cost or time, an entry outside
 * 0..stages-1, or fewer ops than stages. */
sg_status sg__pp_recut(const double *cost, int32_t n_ops, const int *stage_of_op, const double *busy_ms,
                       int stages, int *out, double *gain);

/* ---- running one stage (pp_run.c) ------------------------------------------- */

typedef struct sg__pp_runner sg__pp_runner;

/* Per-step figures of one stage. */
typedef struct sg__pp_stats {
  double busy_ms; /* compute: forward, recompute, backward, copies, update */
  double idle_ms; /* waiting in send/receive: the bubble plus transfer */
  double step_ms;
  int forwards;  /* forward passes run (M, plus M recomputations on stages < K-1) */
  int messages;  /* boundary messages sent and received */
  int64_t bytes; /* their bytes, headers included */
} sg__pp_stats;

/* Data parallelism around a pipeline: `replicas` copies of the pipeline,
 * each fed its own part of the global batch; a stage's copies average their
 * gradients over `x` (a transport over the stage's replica group only: its
 * rank is `replica` and its size `replicas`) before the update. Suggested
 * layout (the tests', docs/pipeline_parallel.md): world rank = replica*K +
 * stage, so each pipeline is K consecutive ranks; a group communicator per
 * pipeline (rank = stage) carries the boundary tensors, one per stage
 * (rank = replica) the gradients. Replica r's micro-batch m is micro-batch
 * g = r*M + m of the global step (its dropout stream is g+1). */
typedef struct sg__pp_dp {
  const sg__xfer *x;
  int replica, replicas; /* this copy, 0..replicas-1, and their number */
} sg__pp_dp;

/* Drives stage st->stage with session `s` (of st->g after the optimizer was
 * appended and the graph finalized; created with updates last, compiled).
 * prev/next are the comm ranks of stages stage-1 and stage+1 (ignored at the
 * ends). The stages must be evenly spaced in x (stage j at rank
 * rank + (j - stage) * (next - rank), as rank = stage or stage * T + share
 * give): a weight tied across stages (st->tied) goes to and from the
 * holders' ranks found so, and a holder outside x is SG_ERR_INVALID_ARG; one
 * that gets no gradient here is SG_ERR_UNSUPPORTED. dp may be NULL (one copy); with dp->replicas > 1 its
 * transport must be the stage's replica group. SG_ERR_INVALID_ARG (also: replica outside 0..replicas-1, a
 * group transport of another rank or size, or none with an allreduce), SG_ERR_STATE (not compiled, not
 * updates last: an update before a gradient it must not see), SG_ERR_UNSUPPORTED (a non-f32 gradient),
 * SG_ERR_NO_MEMORY. */
sg_status sg__pp_runner_create(const sg__pp_stage *st, sg_session *s, const sg__xfer *x, int prev, int next,
                               const sg__pp_dp *dp, sg__pp_runner **out);
void sg__pp_runner_destroy(sg__pp_runner *r);

/* Sets an input of the stage graph for the next steps: a batched input of
 * the source graph is given whole (batch rows; the runner feeds each
 * micro-batch its rows, so `data` must stay valid until the step ran);
 * anything else (the learning rate) is copied into the session at once.
 * SG_ERR_NOT_FOUND for a name the stage does not read, SG_ERR_SHAPE for a
 * wrong byte size, SG_ERR_INVALID_ARG. */
sg_status sg__pp_set_input(sg__pp_runner *r, const char *name, const void *data, size_t bytes);

/* One training step: the 1F1B schedule over the M micro-batches (warm-up of
 * stages-stage-1 forwards, alternating forward/backward, cool-down), the
 * gradients summed over the micro-batches and scaled by 1/M (each
 * micro-batch loss is a mean over its samples), with replicas then summed
 * over the replica group in one allreduce and divided by their number (so
 * every copy holds the same bits), the parts of each weight tied across
 * stages summed over its holders (the lowest holder adds them in stage order
 * and sends the sum back, so every holder has the same bits), then one
 * optimizer update. Every stage
 * of every replica calls it once per step.
 * Batch norm and dropout: each micro-batch's passes (its FORWARD and its
 * recomputation) run on dropout stream g+1 (g = replica*M + m), so both
 * draw one mask, and the recomputation with frozen running statistics, so
 * these move once per micro-batch, in micro-batch order: what one process
 * accumulating gradients over the same micro-batches with those streams
 * computes (each pass says so itself: sg__session_pass). Afterwards the
 * session's step count (which seeds the masks) is one higher, as after
 * sg_session_step. *loss (may be NULL) receives the mean of this replica's
 * micro-batch losses on the last stage, NaN elsewhere. Communication blocks
 * this thread (first version). Errors of the transport, the wire decoder
 * (a malformed or unexpected message) and the session. */
sg_status sg__pp_step(sg__pp_runner *r, float *loss);

/* Hooks the runner's compute passes run with (a tensor group's allreduces: tp.h's
 * sg__tp_runner_hooks), or NULL. They must outlive the runner. */
void sg__pp_runner_set_hooks(sg__pp_runner *r, const struct sg__step_hooks *hooks);

/* Figures of the last step. */
void sg__pp_runner_stats(const sg__pp_runner *r, sg__pp_stats *out);

/* An injected 'slow' fault (sg_fault_plan_slow_factor): from the next step
 * on, each compute pass of the stage takes `factor` times as long (the
 * excess slept, as on a slower or shared CPU) and counts as busy time.
 * factor <= 1: full speed. */
void sg__pp_runner_set_slow(sg__pp_runner *r, double factor);

/* ---- the schedule (pp_sched.c) ---------------------------------------------- */

typedef enum sg__pp_action {
  SG__PP_RECV_FWD = 1, /* boundary activations of a micro-batch from stage-1 */
  SG__PP_FORWARD,      /* forward up to the boundary outputs */
  SG__PP_SEND_FWD,     /* ... to stage+1 */
  SG__PP_RECV_BWD,     /* their gradients from stage+1 */
  SG__PP_BACKWARD,     /* recompute the forward, then backward (the last stage: the only pass) */
  SG__PP_SEND_BWD,     /* the boundary inputs' gradients to stage-1 */
} sg__pp_action;

typedef struct sg__pp_slot {
  sg__pp_action action;
  int micro; /* micro-batch */
} sg__pp_slot;

/* The 1F1B program of stage `stage` of `stages` over `micro` micro-batches
 * into out[cap] (*n actions; cap >= 6*micro suffices). Sends to and
 * receives from one neighbour appear in the same order at both ends of the
 * link, and where a forward send crosses a backward send the lower stage
 * sends first: so the program cannot deadlock even when a send waits for
 * its receiver (docs/pipeline_parallel.md has the argument).
 * SG_ERR_INVALID_ARG for bad numbers or a short buffer. */
sg_status sg__pp_schedule(int stages, int stage, int micro, sg__pp_slot *out, int cap, int *n);

/* ---- the runner's layout (shared by pp_setup.c and pp_run.c) ------------------ */

typedef struct sg__pp_grad {
  float *slot, *acc; /* the session's gradient slot; the sum over micro-batches */
  size_t n;
} sg__pp_grad;

/* A weight tied across stages as the runner sums it (st->tied[i]): its gradient in g and the slot. */
typedef struct sg__pp_tied {
  int32_t grad;
  float *slot;
  size_t n;
} sg__pp_tied;

struct sg__pp_runner {
  const sg__pp_stage *st;
  sg_session *s;
  const sg_graph *g;
  sg__xfer x; /* the transport (a copy) */
  int prev, next;
  uint32_t fwd_end,
      bwd_end;   /* a pass over [0, fwd_end) computes what is sent; [0, bwd_end) forward+backward */
  uint32_t *upd; /* schedule positions of the updates to run (not the boundary inputs') */
  int n_upd;
  sg__pp_grad *grads;
  int n_grads;
  const void **send_addr, **rgrad_addr; /* kept slots of send[j], recv_grad[j] */
  const float *loss_addr;
  int depth;             /* slots for received activations of in-flight micro-batches */
  uint8_t **fwd_msg;     /* [depth * n_recv] whole messages */
  const void **fwd_data; /* their payloads after decoding */
  uint8_t *buf;          /* one outgoing message or incoming gradient message */
  size_t buf_bytes;
  const void **in_data; /* per batched input: the whole batch */
  /* Data parallelism (replicas > 1): the replica group's transport and one
   * flat buffer of every accumulated gradient, so the average over the
   * replicas is one allreduce per step. */
  sg__xfer dp_x;
  int replica, replicas;
  float *flat;
  size_t n_flat;
  sg__pp_slot *prog;
  int n_prog;
  uint64_t step;
  double loss_sum;
  sg__pp_stats stats;
  /* Weights tied across stages (st->tied): their gradient slots, and where stage j's rank is in x: rank
   * + (j - stage) * stride (the stages of a pipeline are evenly spaced in its transport). */
  sg__pp_tied *tied;
  int stride;
  double slow;                        /* > 1: an injected slow fault's factor (sg__pp_runner_set_slow) */
  const struct sg__step_hooks *hooks; /* of the compute passes (sg__pp_runner_set_hooks), or NULL */
};

#endif /* SG_DIST_PP_H */
