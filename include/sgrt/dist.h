/**
 * @file dist.h
 * Data-parallel training across ranks: every rank runs
 * the same training graph on its own shard of the batch, and the gradients
 * are averaged over the ranks before the optimizer update, as PyTorch's
 * DistributedDataParallel does. Gradients are grouped into buckets in the
 * order backward produces them (last layers first); a bucket's allreduce
 * starts as soon as its last gradient exists, on the rank's scheduler
 * thread, while the backward pass goes on, and the updates wait for all of
 * them. Pipeline and tensor parallelism are selected with
 * sg_dist_create_model(), which takes the forward graph and builds each
 * rank's part of it ("one compiled plan, many ranks"): with pipeline = K > 1
 * rank k runs stage k of a K-stage 1F1B pipeline (docs/pipeline_parallel.md),
 * with tensor = T > 1 rank t runs share t of the Megatron-style split
 * (docs/tensor_parallel.md); the rest of this API works in those modes as
 * described at each function (docs/dist.md, "Pipeline and tensor parallelism
 * through sg_dist").
 *
 * The graph is built with the per-rank batch, exactly as for a single
 * process (forward + sg_graph_backward() + an optimizer); nothing in it is
 * distributed. Launch the program once per rank (`sgrt launch -n 4 prog`,
 * torchrun-style variables, `srun`, `mpirun`; docs/dist.md).
 *
 * @code
 *   sg_dist_params dp = SG_DIST_PARAMS_INIT;   // rank, size, master from the environment
 *   dp.threads = 1;
 *   sg_dist *d;
 *   if (sg_dist_create(g, &dp, &d) != SG_OK) {   // collective: every rank calls it
 *     fprintf(stderr, "%s\n", sg_last_error());
 *     return 1;
 *   }
 *   // Initialise or load the weights (on rank 0 or everywhere) through the
 *   // session; the first step broadcasts them from rank 0.
 *   my_init_weights(sg_dist_session(d));
 *   for (int step = 0; step < n; step++) {
 *     load_shard(sg_dist_rank(d), sg_dist_size(d), step, images, labels);   // this rank's shard
 *     sg_dist_set_input(d, "images", SG_F32, 4, xdims, images);
 *     sg_dist_set_input(d, "labels", SG_I64, 1, ydims, labels);
 *     sg_dist_set_input(d, "lr", SG_F32, 0, NULL, &lr);
 *     if (sg_dist_step(d) != SG_OK) {   // e.g. SG_ERR_COMM "... rank 2 is unreachable ..."
 *       fprintf(stderr, "%s\n", sg_last_error());
 *       break;
 *     }
 *     sg_dist_stats st = SG_DIST_STATS_INIT;
 *     sg_dist_get_stats(d, &st);   // st.loss_mean: "loss" averaged over the ranks
 *   }
 *   sg_dist_destroy(d);   // collective unless the job failed
 * @endcode
 *
 * Threads: an sg_dist is used from one thread at a time, the "compute
 * thread" (the one that created it, or any other, one at a time). It owns a
 * scheduler thread of its own, which owns the communicator (sg_comm) and runs
 * the allreduces, heartbeats and failure detection; the compute thread never
 * calls the transport, and a long step never delays a heartbeat.
 *
 * Failures: a peer whose process exits is detected by the scheduler thread
 * at once (a pidfd under the same kernel, UCX's peer-error handling across
 * hosts), one that goes silent after dead_ms. Without a feed callback the step waiting for the
 * gradients then returns SG_ERR_COMM with a message naming the unreachable
 * rank and the step, and so does every later call that communicates: the
 * program should report and exit. With a feed callback (sg_dist_params.feed)
 * the job heals itself (docs/resilience.md): the survivors agree on
 * a new membership through the rendezvous store, rebuild the communicator,
 * resume from the most advanced member's state (every member holds the
 * whole state; a member that completed one step more than another sends it
 * to the others) and redo the lost work, so sg_dist_step() returns SG_OK
 * and the global batch is unchanged (strict QoS, RPO 0). A rank left out of
 * the new membership gets SG_ERR_COMM "... excluded from the job ..." and
 * sg_dist_stats.excluded = 1; it should exit (SG_DIST_EXIT_EXCLUDED is the
 * status `sgrt launch --heal` does not count as a failure).
 *
 * Rejoin: `sgrt launch --heal --restart-failed K` restarts a rank that died
 * with SG_REJOIN=1. Its sg_dist_create (same program, same model, a feed
 * callback) then does not join epoch 0: it asks the running ranks to admit
 * it, and they do at their next step boundary (the next epoch, everyone back
 * to its own shard); create returns with the parameters, state, optimizer
 * state and step counter received from a member, and
 * sg_dist_get_stats().steps tells the program the step to go on from
 * (docs/resilience.md, "Rejoin").
 */
#ifndef SGRT_DIST_H
#define SGRT_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "sgrt/comm.h"
#include "sgrt/graph.h"
#include "sgrt/health.h"
#include "sgrt/ops.h"
#include "sgrt/session.h"

SG_EXTERN_C_BEGIN

typedef struct sg_dist sg_dist;

/** Exit status for a rank excluded from the job by a recovery (EX_TEMPFAIL). */
#define SG_DIST_EXIT_EXCLUDED 75

/**
 * Sets the inputs of shard `shard` of `n_shards` for step `step` (0-based)
 * with sg_dist_set_input()/sg_dist_bind_input(). n_shards is the original
 * world size times micro_batches (M), fixed for the job: the step's global
 * batch. Member i of m runs the shards {k : k mod m == i}, in increasing
 * order: before any failure rank r runs r, r + size, ... (M of them); after a
 * recovery to m members (strict QoS) the members share all n_shards, so the
 * global batch stays the same (graceful-degrade: each keeps its original
 * shards). Each shard has its own dropout stream (masks differ across
 * shards, and a shard redone on another member draws the same masks). The
 * gradients are summed over the shards and divided by n_shards; the last
 * shard's backward overlaps the allreduces. Called on the compute thread
 * inside sg_dist_step(); a step may be fed again when it is redone. Return
 * SG_OK, or an error that sg_dist_step() returns (this rank then leaves).
 */
typedef sg_status (*sg_dist_feed_fn)(void *ctx, sg_dist *d, uint64_t step, int shard, int n_shards);

/**
 * Parameters of sg_dist_create() and sg_dist_create_model(). Initialise from
 * SG_DIST_PARAMS_INIT; the create functions read the first `size` bytes
 * (a program built against an older header gets the defaults of the fields
 * it lacks).
 *
 * "Unset" values differ by field, and the same value can mean different
 * things: -1 means "from the environment" for qos (and for comm.rank and
 * comm.world_size), "derived" for data (the world size over pipeline x
 * tensor) and "off" for hang_ms; 0 means "automatic" for threads,
 * trace_events and hang_ms, but "off" for zero and trace; NULL means the
 * default for the strings (device "cpu", no trace file, no offload).
 */
typedef struct sg_dist_params {
  size_t size;                /**< sizeof(sg_dist_params) */
  const sg_comm_params *comm; /**< rank, world size, master, token, timeout; NULL: SG_COMM_PARAMS_INIT (the
                                   environment). Read by create only */
  const char *device; /**< "cpu" (NULL means "cpu"); "cuda" (GPU local rank mod GPU count) or "cuda:N" for
                         plain data parallelism, without zero or offload (docs/cuda.md "Data parallelism") */
  int threads;        /**< compute threads of this rank; 0 = all online CPUs (as sg_session) */
  uint64_t seed;      /**< session seed (dropout masks); use the same on every rank */
  int data;           /**< data-parallel degree; -1 = the world size */
  int pipeline;       /**< pipeline-parallel degree K: sg_dist_create_model() only (sg_dist_create: 1) */
  int tensor;         /**< tensor-parallel degree T: sg_dist_create_model() only (sg_dist_create: 1) */
  /** micro-batches per step; with sg_dist_create_model() and pipeline > 1 the pipeline's M, with tensor > 1
   *  the batch cut into M parts whose gradients are accumulated (M must divide the batch); data parallelism
   * (sg_dist_create): M micro-batches per rank and step, gradients accumulated over them (needs feed, which
   * then sets each micro-batch's inputs; see sg_dist_feed_fn for which shards a rank runs); 1 = none */
  int micro_batches;
  size_t bucket_bytes;    /**< gradient bucket size; 25 MiB as PyTorch DDP's bucket_cap_mb */
  int heartbeat_ms;       /**< heartbeat period of the scheduler thread (sg_comm_set_liveness); 100 */
  int dead_ms;            /**< a peer silent this long is unreachable; 600; must exceed heartbeat_ms */
  int trace;              /**< record a timeline for sg_dist_write_trace() (also on when trace_path is set) */
  const char *trace_path; /**< Chrome trace JSON written by sg_dist_destroy(); NULL: none */
  size_t trace_events;    /**< timeline capacity per thread, in events (the latest are kept); 0 = 262144 */
  sg_dist_feed_fn feed;   /**< inputs per shard; NULL: the program sets inputs itself (no recovery) */
  void *feed_ctx;         /**< passed to feed */
  /** QoS tier (health.h's sg_qos) when a peer fails: -1 = SG_QOS or strict; 0 strict (recover and redo the
   * step, the global batch kept, RPO 0); 1 best-effort (a rank that found a link cut probes it 100 and
   *  200 ms later: a pair both of whose ends find it up again stays in and the step's allreduce is retried
   *  over the same members, counted in collective_retries; still down: recovered as strict; not with
   *  zero); 2 graceful-degrade (recover, but each member keeps only its
   *  own shard: the lost ranks' samples are skipped). Needs feed. */
  int qos;
  /** Where optimizer state lives: NULL or "none" (the session's memory), "dram" or "pmem" —
   *  a tier of this rank's global page table (docs/gmem.md), bound with sg_session_bind_state; the
   *  results are bit-identical. */
  const char *offload;
  /** PMEM tier: a file, directory or DAX device; NULL: SG_GMEM_PMEM_PATH. */
  const char *offload_path;
  /** ZeRO stage: 0 off; 1 = ZeRO-1, the optimizer state sharded over the ranks (docs/dist.md "ZeRO-1"):
   *  each rank owns a contiguous range of the parameters (gradient order, cut at parameters, balanced by
   *  bytes) and keeps optimizer state only for those; gradients are reduce-scattered, each rank updates
   *  its range, the parameters are allgathered. Results equal plain data parallelism (to rounding).
   *  Needs an optimizer whose updates are the only ops after backward; not with offload. The initial
   *  broadcast moves parameters and state only: each rank's optimizer state starts as its session's. */
  int zero;
  /** Hang diagnosis (sg_comm_set_hang_timeout(), docs/resilience.md "Hang diagnosis"): a rank
   *  that has waited this long in a collective (gradient bucket, broadcast, check) since the last peer
   *  arrived in it names the peers that have not entered it but still heartbeat as stuck, with their
   *  positions; the step fails with SG_ERR_COMM, or heals without them with a feed callback.
   *  0 = max(10 x dead_ms, 10000); -1 = off; else heartbeat_ms < hang_ms <= 86400000. Needs heartbeats. */
  int hang_ms;
  /** Fault injection, a debug facility for resilience tests (docs/resilience.md "Fault injection"):
   *  a fault plan such as "kill:rank=2,step=20"; NULL: none, or the environment's SG_INJECT in a
   *  library built with -DSG_FAULT_INJECTION=ON (in any other build SG_INJECT is refused, never
   *  ignored). Data parallelism only. */
  const char *inject;
  uint64_t inject_seed; /**< draws the steps of inject's random(a-b) faults */
  /** Profile-guided repartitioning of a pipeline (SPEC P6, docs/pipeline_parallel.md "Repartitioning a
   *  running pipeline"): when a stage's samples show CPU utilisation above repartition_cpu and a p99 step
   *  time above repartition_p99_ms for 3 samples in a row (sg_repartition_trigger), the ranks re-cut the
   *  stages from each stage's measured compute time at a step boundary and move the parameters and
   *  optimizer state that change stage. 0 = the defaults (200 ms, 0.85); repartition_p99_ms < 0: never
   *  (the trigger is still reported in sg_dist_stats.repartition_due). Pipeline mode only; elsewhere it
   *  has nothing to re-cut and is ignored. */
  double repartition_p99_ms;
  double repartition_cpu; /**< 0..1; 0 = 0.85 */
  /** Self-healing of a pipeline or a tensor group (sg_dist_create_model with pipeline or tensor >= 3, or
   *  both > 1; docs/resilience.md "Healing a pipeline", "Healing a tensor group", "Healing a pipeline of
   *  tensor groups"): 1 = after every step each
   *  stage's or share's parameters, statistics and optimizer state are also copied to the next rank of the
   *  group (a ring, into a slot of the global page table that rank holds; sg_dist_stats.replica_bytes,
   *  replication_ms), and when a rank is lost the survivors
   *  agree on a new membership, rebuild the model over themselves (a lost stage merged into a neighbour; a
   *  tensor group split again over fewer ways; every stage's group one share narrower) from those copies, and
   * redo the failed step (strict QoS: RPO 0; at least 3 ranks, so that a majority survives). 0 = off: a
   * failure fails the step with SG_ERR_COMM. With data > 1 every copy keeps one layout: the other copies
   * release their rank at the lost one's place (its step fails with SG_ERR_COMM "released", stats.excluded =
   * 1). Data parallelism heals when it has a feed callback (heal = 1 without one is refused). */
  int heal;
  /** Synchronized batch norm (SPEC P7; docs/dist.md "Synchronized batch norm"): 1 = every training-form batch
   *  norm normalises with the mean and variance of the whole global batch (summed over the data-parallel
   *  ranks inside the step, forward and backward), and its running statistics follow them, as one process
   *  on the global batch computes. sg_dist_create_model with pipeline = tensor = 1 only (it rewrites the
   *  forward graph); not with a feed callback or micro_batches > 1 (a rank's shards would not meet their
   *  peers' in the sums), nor on a GPU. 0 = each rank's own statistics (PyTorch DDP's default). */
  int sync_batch_norm;
} sg_dist_params;

#define SG_DIST_PARAMS_INIT                                                                                \
  {                                                                                                        \
    .size = sizeof(sg_dist_params), .comm = NULL, .device = "cpu", .threads = 0, .seed = 0, .data = -1,    \
    .pipeline = 1, .tensor = 1, .micro_batches = 1, .bucket_bytes = (size_t)25 << 20, .heartbeat_ms = 100, \
    .dead_ms = 600, .trace = 0, .trace_path = NULL, .trace_events = 0, .feed = NULL, .feed_ctx = NULL,     \
    .qos = -1, .offload = NULL, .offload_path = NULL, .zero = 0, .hang_ms = 0, .inject = NULL,             \
    .inject_seed = 0, .repartition_p99_ms = 0, .repartition_cpu = 0, .heal = 0, .sync_batch_norm = 0       \
  }
SG_API sg_dist_params sg_dist_params_init(void);

/**
 * Joins the job and prepares data-parallel steps of a finalized training
 * graph (forward, sg_graph_backward() and an optimizer; the graph must
 * outlive the sg_dist). Collective: every rank calls it with the same model.
 *
 * In order: starts the scheduler thread, which joins the job
 * (sg_comm_create() with p->comm) and turns heartbeats on; creates and
 * compiles a session (optimizer updates after the whole backward pass, so
 * they can wait for the allreduces); groups the parameters' gradients into
 * buckets; and checks with every other rank that the gradient topology (the
 * shapes and dtypes of every parameter and gradient, and the buckets) is the
 * same. Parameters, state and optimizer state are broadcast from
 * rank 0 by the first sg_dist_step(), so they may be set between create and
 * the first step on rank 0 alone.
 *
 * @param g    a finalized graph with at least one f32 parameter gradient.
 * @param p    NULL for the defaults.
 * @param out  receives the handle; NULL on error.
 * @return SG_OK;
 *   SG_ERR_INVALID_ARG for a NULL argument, a bad p->size, a bad value (the
 *     message names the field), micro_batches > 1 without feed, or a data
 *     degree other than the world size;
 *   SG_ERR_UNSUPPORTED for pipeline or tensor degrees > 1 ("pipeline
 *     parallelism (pp=2) does not run through sg_dist yet ..."), a
 *     gradient that is not f32, or zero = 1 with an op after backward other
 *     than the optimizer's updates, or with offload;
 *   SG_ERR_STATE if the graph is not finalized;
 *   SG_ERR_SHAPE "Gradient topology mismatch ..." on every rank when the
 *     ranks' models differ;
 *   SG_ERR_TIMEOUT / SG_ERR_DENIED / SG_ERR_COMM from joining the job;
 *   with SG_REJOIN=1 (a restarted rank, see "Rejoin" above):
 *     SG_ERR_INVALID_ARG for a value other than 1 or 0, no feed callback
 *     or a one-rank job, SG_ERR_UNSUPPORTED with ZeRO-1 (p->zero), and
 *     SG_ERR_TIMEOUT "not admitted within ..." when the running ranks did
 *     not admit it within the comm timeout, SG_ERR_COMM when they abandoned
 *     the admission (a recovery came first);
 *   the session's compile errors; SG_ERR_NO_MEMORY.
 * A rank that fails alone (a local error after joining) aborts its
 * communicator; the other ranks then fail within dead_ms.
 */
SG_API sg_status sg_dist_create(const sg_graph *g, const sg_dist_params *p, sg_dist **out);

/** Optimizer kinds of sg_dist_optimizer. */
#define SG_DIST_OPT_SGD 1
#define SG_DIST_OPT_ADAMW 2

/** The optimizer sg_dist_create_model() appends to each rank's part. Initialise from
 *  SG_DIST_OPTIMIZER_INIT (SGD, no momentum, learning rate from the input "lr"). */
typedef struct sg_dist_optimizer {
  size_t size;                  /**< sizeof(sg_dist_optimizer) */
  int kind;                     /**< SG_DIST_OPT_SGD or SG_DIST_OPT_ADAMW */
  const char *lr_input;         /**< the learning rate: a scalar f32 input of the graph, added when missing
                                     ("lr") */
  const sg_sgd_params *sgd;     /**< for SG_DIST_OPT_SGD; NULL: SG_SGD_PARAMS_INIT */
  const sg_adamw_params *adamw; /**< for SG_DIST_OPT_ADAMW; NULL: SG_ADAMW_PARAMS_INIT */
} sg_dist_optimizer;
#define SG_DIST_OPTIMIZER_INIT \
  { .size = sizeof(sg_dist_optimizer), .kind = SG_DIST_OPT_SGD, .lr_input = "lr", .sgd = NULL, .adamw = NULL }
SG_API sg_dist_optimizer sg_dist_optimizer_init(void);

/**
 * Joins the job and builds this rank's part of a model given as its forward
 * graph: "one compiled plan, many ranks". Collective: every rank calls it
 * with the same graph, loss, optimizer and degrees. The degrees p->data (D),
 * p->pipeline (K) and p->tensor (T) must multiply to the world size (D = -1:
 * the world size / (K*T)). Rank layout: rank = (d*K + k)*T + t.
 *
 *   K = T = 1: data parallelism. The graph is cloned, sg_graph_backward()
 *     and the optimizer are appended, and the result goes to
 *     sg_dist_create() (the sg_dist owns it): the same as calling
 *     sg_dist_create() on that training graph.
 *   K > 1 (T = 1): pipeline parallelism, D copies of the pipeline. The
 *     stages are chosen by the partitioner in pipeline mode (METIS; when it
 *     cannot make K stages the split accepts, evenly by op count), rank
 *     d*K + k builds stage k (docs/pipeline_parallel.md), appends the
 *     optimizer, and each
 *     sg_dist_step() runs the 1F1B schedule over p->micro_batches
 *     micro-batches. Inputs take the whole batch of `fwd` (a copy's part
 *     of the global batch when D > 1); the runner cuts the micro-batches.
 *     With D > 1 a stage's copies average their gradients before the
 *     update, and the first step gives them replica 0's state.
 *   T > 1 (K = 1): tensor parallelism, D copies of the
 *     group. The graph is rewritten by its sg_tp_plan (sg_tp_plan_create
 *     with T ways: linear and matmul weights split, everything else
 *     replicated) into rank d*T + t's share t, backward and the optimizer
 *     appended; every rank of a copy feeds that copy's whole batch. With
 *     micro_batches M > 1 the share is built at the micro-batch shapes and
 *     a step runs forward and backward on each of the M cuts of the batch,
 *     accumulating the gradients (dropout is refused). With D > 1 a
 *     share's copies average their gradients before the update.
 *   K > 1 and T > 1: pipeline x tensor. The stages are chosen as for K > 1,
 *     and each is a tensor group: rank (d*K + k)*T + t rewrites stage k's
 *     graph by the stage's own sg_tp_plan into share t
 *     (docs/pipeline_parallel.md "Stages that are tensor groups"); share t
 *     exchanges the boundary tensors (whole on every share) with share t of
 *     the neighbouring stages, and the runner's passes allreduce the
 *     split's partial results over the stage's group. With heal 1 a loss
 *     re-splits every stage's group over one share fewer; the stages are
 *     not re-cut from the profile.
 * In the K > 1 and T > 1 modes every transfer runs on the scheduler thread,
 * which owns the communicator, and a rank that dies makes every other rank's
 * sg_dist_step() fail with SG_ERR_COMM naming it (within dead_ms plus a
 * little). sg_dist_session() is then this rank's stage or share.
 *
 * @param fwd  a finalized forward-only graph (no gradients, no optimizer);
 *             copied: the caller may destroy it once create returned.
 * @param loss a one-element f32 tensor of fwd.
 * @param opt  NULL for SG_DIST_OPTIMIZER_INIT.
 * @param p    as sg_dist_create() (NULL for the defaults).
 * @return SG_OK; SG_ERR_INVALID_ARG for NULL, bad sizes or values (the
 *   message names the field) or degrees whose product is not the world
 *   size ("data 1 x pipeline 2 x tensor 2 = 4 ranks, but the world has 2");
 *   SG_ERR_UNSUPPORTED for combinations this version does not run (the
 *   message says which): a slow fault with pipeline x tensor, tensor with
 *   micro-batches and dropout, a feed callback (self-healing), zero or
 *   an offload tier with pipeline or tensor > 1, a graph the split or the
 *   rewrite does not handle;
 *   SG_ERR_STATE when fwd is not finalized or not forward-only;
 *   SG_ERR_SHAPE on every rank when the ranks' graphs or degrees differ;
 *   otherwise as sg_dist_create().
 */
SG_API sg_status sg_dist_create_model(const sg_graph *fwd, sg_tensor loss, const sg_dist_optimizer *opt,
                                      const sg_dist_params *p, sg_dist **out);

/**
 * Leaves the job and frees everything; writes the timeline first when
 * trace_path was set. Collective while the job is healthy (the trace is
 * gathered on rank 0 and the communicator closes with a barrier); after a
 * failure it closes at once without waiting for peers. Accepts NULL.
 * @return SG_OK, or the first error of writing the trace or closing the
 *   communicator (everything is freed either way).
 */
SG_API sg_status sg_dist_destroy(sg_dist *d);

/** This rank, 0..size-1 (-1 for NULL). Any thread. */
SG_API int sg_dist_rank(const sg_dist *d);
/** Number of ranks in the job (0 for NULL). Any thread. After a recovery: the members. */
SG_API int sg_dist_size(const sg_dist *d);

/**
 * The underlying session, to write initial weights, read any tensor, save or
 * load checkpoints. Do not run sg_session_step() or sg_session_forward() on
 * it while the sg_dist exists (only sg_dist_step() keeps the ranks in step).
 * NULL for NULL.
 */
SG_API sg_session *sg_dist_session(sg_dist *d);

/**
 * The health monitor of the job's original ranks (include/sgrt/health.h),
 * kept when recovery is on (a feed callback and heartbeats): each recovery
 * marks the ranks it left out UNREACHABLE (the log has the reason and the
 * time) and installs the new epoch's members. Query it on the compute thread
 * between steps. NULL for NULL or when recovery is off.
 */
SG_API const sg_health *sg_dist_health(const sg_dist *d);

/** This rank's shard of an input: as sg_session_set_input(). With sg_dist_create_model() and
 *  pipeline or tensor > 1: the whole batch of the forward graph on every rank (SG_ERR_SHAPE
 *  otherwise; ignored by a rank whose part does not read it; copied). */
SG_API sg_status sg_dist_set_input(sg_dist *d, const char *name, sg_dtype dtype, int ndim,
                                   const int64_t *dims, const void *data);
/** Binds this rank's shard without copying: as sg_session_bind_input() (pipeline: the data must
 *  stay valid until the step ran). */
SG_API sg_status sg_dist_bind_input(sg_dist *d, const char *name, sg_dtype dtype, int ndim,
                                    const int64_t *dims, void *data);

/**
 * One data-parallel training step: (with a feed callback: the feed, and
 * the rollback snapshot) forward and backward on this rank's shard; each gradient bucket is averaged over the
 * ranks (allreduce, sum / size) as soon as backward has produced it, overlapping the rest of backward; then
 * the optimizer updates run on the averaged gradients, the same on every rank. The first step first
 * broadcasts parameters, state and optimizer state from rank 0. After the first step the compute thread
 * allocates nothing (the communicator's collectives still allocate a request
 * array each, on the scheduler thread).
 * @return SG_OK;
 *   SG_ERR_INVALID_ARG for NULL;
 *   SG_ERR_STATE for an input not set (nothing is communicated then);
 *   SG_ERR_COMM when the job failed: a peer unreachable or a collective
 *     timed out, in this step or earlier ("rank 0, step 3: allreduce of
 *     gradient bucket 1 of 4 failed: rank 2 is unreachable: ..."); the
 *     optimizer updates of the step have not run then. With a feed
 *     callback such a failure is healed instead (the step then returns
 *     SG_OK, stats.recoveries counts it), and SG_ERR_COMM means the
 *     recovery failed: this rank was excluded ("rank 3: excluded from the
 *     job at epoch 1 (...)", stats.excluded), the store was unreachable, or
 *     the survivors were not a strict majority;
 *   a kernel's error (this rank then aborts the job, as its peers could not
 *     complete the step without it).
 */
SG_API sg_status sg_dist_step(sg_dist *d);

/**
 * Copies this rank's value of a tensor out, as sg_session_read(). Parameters
 * and optimizer state are the same on every rank after a step; outputs
 * (the loss) and batch-norm statistics are this rank's own. Pipeline mode
 * (sg_dist_create_model): SG_ERR_NOT_FOUND "'fc1.weight' is on pipeline
 * stage 0 (rank 0) ..." for a tensor of another stage; tensor mode: a split
 * tensor reads as this rank's slice.
 */
SG_API sg_status sg_dist_read(const sg_dist *d, const char *name, void *out, size_t bytes);

/**
 * FNV-1a (64-bit) over the bytes of every parameter (role
 * SG_ROLE_PARAMETER) in tensor order: the same digest as the examples'
 * params_hash. Equal on every rank after every completed step (the averaged
 * gradients are bitwise identical everywhere). Local; compute thread.
 * Pipeline and tensor modes (sg_dist_create_model): collective; FNV-1a over
 * the digests of every rank's part (a stage's received activations
 * excluded) in rank order: one value for the whole model, equal on every
 * rank.
 * @return SG_OK; SG_ERR_INVALID_ARG for NULL.
 */
SG_API sg_status sg_dist_params_hash(const sg_dist *d, uint64_t *out);

/**
 * Writes the whole model's checkpoint: rank 0 writes to `path` the file
 * that sg_session_save_checkpoint() writes for one process training the same
 * model, whatever the parallel mode, so that sg_session_load_checkpoint() on
 * a one-process session of that model (or sg_graph_load()) reads it.
 * Collective: every rank of the job calls it, between steps (after the last
 * one, say); the job goes on afterwards.
 *
 * The file holds the one-process training graph (sg_dist_create: the job's
 * own; sg_dist_create_model: the forward graph with backward and the
 * optimizer appended, as pipeline = tensor = 1 builds it), every parameter,
 * state (batch-norm statistics) and optimizer state (momentum buffers,
 * AdamW's moments and step counts) as the job holds them, and the steps
 * completed (sg_dist_stats.steps). The optimizer state is there so that one
 * process can go on training from the file exactly as the job would, and
 * because sg_session_load_checkpoint() refuses a file that lacks any of it.
 * Where each value comes from:
 *  - data parallelism (sg_dist_create, or sg_dist_create_model with pipeline
 *    = tensor = 1): rank 0's session, whose parameters every rank shares.
 *    With zero = 1 (ZeRO-1) rank 0 keeps the optimizer state of its own
 *    range of parameters only, so every rank sends rank 0 the state of the
 *    parameters it owns: the file is complete (a sg_session_save_checkpoint
 *    of rank 0's session alone is not);
 *  - pipeline: each stage's parameters and their state from the rank that
 *    runs the stage;
 *  - tensor: a tensor the shares' plan splits is put together from every
 *    share's slice as sg_tp_plan_tensor_split() of that plan says (the axis,
 *    its blocks, slice k of every block on share k); a replicated one comes
 *    from share 0;
 *  - data > 1 copies of a pipeline or tensor group: copy 0's (the copies are
 *    equal after a step).
 * After a recovery the layout now is saved (stages merged, a group split
 * T' ways) and "rank 0" is the rank that is 0 now. Rank 0 holds the whole
 * model's state in host memory while it writes, plus one rank's part.
 * Every transfer runs on the scheduler threads (SPEC H1).
 *
 * @param path the file rank 0 writes (the other ranks only check that it
 *   is not NULL).
 * @return SG_OK on every rank once the file is written; otherwise an error
 *   on every rank, the same status everywhere: SG_ERR_INVALID_ARG for d NULL
 *   (at once: nothing is communicated) or a NULL path on any rank ("rank 1
 *   failed: ... path is NULL on rank 1"); rank 0's error writing the file
 *   (SG_ERR_IO naming it), which the others report as "rank 0 failed: ...";
 *   SG_ERR_NO_MEMORY; SG_ERR_COMM when the job failed, before or during the
 *   call (a lost peer is not healed here: the next sg_dist_step() of a
 *   healing job heals, and the checkpoint can be written again after it).
 *   Compute thread.
 */
SG_API sg_status sg_dist_save_checkpoint(sg_dist *d, const char *path);

/** What the last step did. Initialise from SG_DIST_STATS_INIT. */
typedef struct sg_dist_stats {
  size_t size;
  uint64_t steps;        /**< steps completed */
  int world_size;        /**< ranks in the job */
  int healthy_ranks;     /**< ranks heard from within dead_ms, this one included */
  int has_loss;          /**< the graph has a one-element f32 output named "loss" */
  float loss_mean;       /**< "loss" of the last step averaged over the ranks (NaN without one); pipeline: the
                              last stage's loss (sg_dist_create_model's), on every rank */
  uint32_t buckets;      /**< gradient buckets per step */
  size_t gradient_bytes; /**< bytes allreduced per step */
  double step_ms;        /**< wall time of the last step */
  double comm_ms;        /**< time the scheduler spent in the last step's allreduces (copies included) */
  double wait_ms;        /**< time the compute thread waited for them: the part not hidden by backward */
  /* Self-healing (docs/resilience.md). */
  int original_rank;     /**< this rank at epoch 0 (the shard it normally feeds) */
  int epoch;             /**< membership epoch: recoveries this rank took part in */
  int recoveries;        /**< recoveries completed */
  int shards;            /**< shards this rank ran in the last step (1 unless peers were lost) */
  int excluded;          /**< 1: this rank was left out of a new membership (it must exit) */
  double detection_ms;   /**< last recovery: from the lost rank's last sign of life (the last message or
                              heartbeat received from it) to the failure's detection here; 0 when
                              nobody was lost */
  double recovery_ms;    /**< last recovery: from detection to the job's resumption (SPEC H4: new
                              membership agreed, communicator rebuilt, state restored or rolled back,
                              the lost ranks' work given to the members; the step it resumes with
                              begins); rto_step_ms adds that step */
  double rto_ms;         /**< last recovery: detection_ms + recovery_ms (SPEC H6's RTO) */
  uint64_t rpo_steps;    /**< steps lost for good (0 under strict QoS: rolled back steps are redone) */
  uint64_t redone_steps; /**< steps run again after rollbacks, in total */
  double snapshot_ms;    /**< last step: time spent copying its snapshot (state such as batch-norm
                              statistics on the compute thread; with ZeRO-1 also parameters and optimizer
                              state, on the scheduler during forward: plain data parallelism rolls
                              forward from a member's state instead, docs/resilience.md) */
  double
      snapshot_wait_ms; /**< last step: how long the first update waited for that copy (its exposed part) */
  uint64_t snapshot_restores; /**< recoveries that restored a snapshot */
  size_t offload_bytes;       /**< optimizer state kept in a memory tier (sg_dist_params.offload); 0: none */
  /* ZeRO-1 (sg_dist_params.zero; docs/dist.md "ZeRO-1"). */
  size_t optimizer_state_bytes; /**< optimizer state this rank keeps in memory (all of it without ZeRO) */
  size_t optimizer_state_total; /**< the whole model's optimizer state (every rank's share together) */
  double reduce_scatter_ms;     /**< last step: the gradients' reduce-scatter (ZeRO-1; 0 otherwise) */
  double allgather_ms;          /**< last step: the parameters' allgather, copies included (ZeRO-1) */
  size_t replica_bytes;  /**< ZeRO-1 with a feed callback: optimizer state this rank copies to its buddy each
                            step; a healing pipeline or tensor group (sg_dist_params.heal): its part's state
                            copied to the next rank of the group after each step */
  double replication_ms; /**< last step: that copy (ZeRO-1: one-sided puts on the scheduler thread,
                            overlapping forward and backward, its exposed part in wait_ms; a pipeline: after
                            the step, all of it exposed) */
  /** Rejoin (docs/resilience.md "Rejoin"): admissions of restarted ranks this rank took part in, its own
   *  included (a rejoined rank starts at 1; its epoch is the one it joined). */
  int rejoins;
  /** Original ranks the health monitor (sg_dist_health) had DEGRADED at the start of the last step: two
   *  check-ins missed (they come every second) or a step's busy time over 3x the median. Reported only;
   *  a rank that stops altogether is found by the failure detector and healed around. 0 without
   *  recovery (no monitor). */
  int degraded_ranks;
  /** Graceful-degrade (sg_dist_params.qos): shards of the global batch skipped since the first loss, in
   *  total (the lost ranks' shards of the step in flight, which is averaged over the survivors instead of
   *  redone, and of every later step). 0 under strict QoS. */
  uint64_t dropped_shards;
  /** Graceful-degrade: steps completed by averaging them again over the survivors after a loss, instead
   *  of redoing them; best-effort: over the same members after a cut link came back (its retry). */
  int rereduced_steps;
  /** Best-effort (sg_dist_params.qos): probes of a cut link made before recovering, in total. A probe that
   *  finds the link up again retries the step's allreduce over the same members (no membership change);
   *  when the tier's retries (2, within 200 ms) find it down, the recovery goes on as strict. */
  int collective_retries;
  /** The profile sampler (SPEC P6), its latest sample, taken after a step at most every 500 ms: the CPU
   *  utilisation of the threads this rank computes with (0..1, from /proc/self/stat), the p99 step time
   *  and the steps per second over the last 64 steps; 0 before the first sample. */
  double cpu_util;
  double step_p99_ms;
  double steps_per_s;
  /** Pipeline parallelism: 1 when sg_repartition_trigger() fires on this stage's samples (CPU above
   *  repartition_cpu and p99 above repartition_p99_ms for 3 samples in a row); 0 in the other modes, which
   *  have nothing to re-cut. A firing on any stage makes every rank evaluate a re-cut at the next step
   *  boundary (below). */
  int repartition_due;
  /** Pipeline parallelism: re-cuts switched to at a step boundary (each predicted to make the slowest stage
   *  at least 1.1x faster; an evaluation that predicts less keeps the cut), the bytes of parameters and
   *  optimizer state this rank sent to their new stages (all of them, summed over the job's ranks, in
   *  migrated_bytes_total), and the sampler's steps per second just before the latest switch (the window
   *  restarts at a switch, so steps_per_s is measured after it). */
  int repartitions;
  uint64_t migrated_bytes;
  uint64_t migrated_bytes_total;
  double steps_per_s_before_repartition;
  /** Last recovery: detection_ms plus the time from the detection to the end of the first step completed
   *  after the recovery -- rto_ms and the step the job resumed with (the redone step under strict QoS,
   *  the re-averaged one under graceful-degrade), so never under a step's time. */
  double rto_step_ms;
} sg_dist_stats;
#define SG_DIST_STATS_INIT \
  { .size = sizeof(sg_dist_stats) }

/** Fills `out`. SG_ERR_INVALID_ARG for NULL or a bad out->size. Compute thread. */
SG_API sg_status sg_dist_get_stats(const sg_dist *d, sg_dist_stats *out);

/**
 * Writes the recorded timeline as Chrome trace JSON (chrome://tracing,
 * Perfetto): one process per rank ("rank R"), thread 0 the compute thread
 * (every op of every step, category forward / backward / update, and the
 * waits for gradients), thread 1 the scheduler (bucket allreduces, the
 * initial broadcast, the consistency check, changes of the healthy-rank
 * count). Collective while the job is healthy: every rank sends its events
 * to rank 0, which writes `path` (the other ranks write nothing); after a
 * failure each rank writes its own events to `path` with ".rank<R>" before
 * a ".json" extension (or at the end). Times are microseconds since the
 * ranks left the consistency check together at create.
 * @return SG_OK; SG_ERR_INVALID_ARG for NULL; SG_ERR_STATE when tracing is
 *   off; SG_ERR_IO naming the file; SG_ERR_COMM; SG_ERR_NO_MEMORY.
 */
SG_API sg_status sg_dist_write_trace(sg_dist *d, const char *path);

SG_EXTERN_C_END

#endif /* SGRT_DIST_H */
