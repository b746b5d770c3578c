/* What the parallel runtime (src/parallel) needs from a session beyond the
 * public API, and nothing more: how to lay the session out before compile,
 * where its tensors live, and one way to run part of a step -- a pass,
 * described by one struct.
 *
 * A data-parallel step, say, runs its last micro-batch as one pass with
 * hooks that hand each gradient bucket to the scheduler thread as soon as
 * backward produced it and hold the first optimizer update until the
 * buckets are averaged; a pipeline stage runs each micro-batch's forward and
 * backward as passes of their own and the updates as a last one.
 *
 * Everything here is internal (not exported). Call order: create the
 * session, set the layout (updates last, unbacked state), compile, then run
 * passes. Passes and their hooks run on the calling thread. */
#ifndef SG_RUNTIME_HOOKS_H
#define SG_RUNTIME_HOOKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sgrt/session.h"

/* ---- precision ------------------------------------------------------------ */

/* sg_session_params.matmul_precision `asked` as a session resolves it
 * (SG_MATMUL_DEFAULT: the environment's SG_MATMUL_PRECISION, else f32):
 * *out is SG_MATMUL_F32 or SG_MATMUL_BF16; SG_ERR_INVALID_ARG naming a bad
 * value of either. The ranks of a job must agree on it: products of
 * different precisions drift apart. */
sg_status sg__matmul_precision_resolve(int asked, int *out);
/* Whether session s rounds its products' operands to bf16. */
bool sg__session_matmul_bf16(const sg_session *s);

/* ---- layout: before compile ---------------------------------------------- */

/* Run optimizer updates after the whole backward pass (sg__plan_options.
 * updates_last): a data-parallel update waits for its gradient's allreduce
 * while the rest of backward runs. Such a session runs unfused (every op
 * its own kernel at its own schedule position, as the passes' hooks
 * expect) unless the caller sets a fusion barrier (below). SG_ERR_STATE
 * once compiled. */
sg_status sg__session_set_updates_last(sg_session *s, bool updates_last);

/* Per tensor (or NULL: none, and no fusion with updates last): the tensors
 * the caller's hooks read or write between ops. With a barrier, a session
 * with updates last fuses elementwise ops too, but no op that touches a
 * barrier tensor joins a generated kernel: each such tensor has a slot, and
 * its producer and readers keep their own schedule positions (the order then
 * holds only one position per generated kernel, which the hooks never
 * name). The mask is copied. SG_ERR_STATE once compiled. */
sg_status sg__session_set_fuse_barrier(sg_session *s, const uint8_t *mask);

/* Per tensor (or NULL: none), parameters, state or optimizer state that
 * compile gives no memory, for a caller that never runs an op reading such
 * a tensor on this session (with sharded optimizer state, the updates of
 * another rank's parameters), or that gives it memory first with
 * sg_session_bind_state (which then zero-fills it). Such a tensor has no
 * address (sg__session_tensor_addr is NULL) and reading or writing it is
 * SG_ERR_STATE. The mask is copied. SG_ERR_STATE once compiled;
 * SG_ERR_INVALID_ARG when it marks a tensor of another role. */
sg_status sg__session_set_unbacked(sg_session *s, const uint8_t *mask);

/* ---- after compile: the schedule and the slots ----------------------------- */

/* The training schedule: op ids in the order a step runs them (NULL and 0
 * before compile). Schedule positions index this array. */
const int32_t *sg__session_order(const sg_session *s, uint32_t *n);

/* The graph the session runs. */
const sg_graph *sg__session_graph(const sg_session *s);

/* Device address of tensor t's slot and its size in bytes (the backend's
 * layout size, which may exceed the plain size), or NULL when the tensor has
 * no slot. Valid from compile until destroy, or until sg_session_bind_state
 * moves the tensor; host memory on the cpu device. */
void *sg__session_tensor_addr(const sg_session *s, int32_t t, size_t *bytes);

/* ---- host views: the parallel runtime's way to the slots ---------------------- */

/* Tensor t as host memory that the caller may read and write (NULL and 0
 * when it has no slot, or, on a device, when the copy cannot be allocated:
 * sg_last_error() says so). On the cpu device it is the slot itself. On a
 * device, or with SG_HOST_MIRROR=1 in the environment (host_view.c), it is
 * a separate host copy of the slot that only the two calls below keep in
 * step: the slot is the truth. Stable from its first call until destroy. */
void *sg__session_tensor_host(sg_session *s, int32_t t, size_t *bytes);
/* Whether host views are copies (then pull and push copy; else they do
 * nothing): true on a device and with SG_HOST_MIRROR=1. After compile. */
bool sg__session_views_separate(const sg_session *s);
/* SG_HOST_MIRROR=1 is set (before a session exists, for the checks). */
bool sg__session_host_mirror_env(void);
/* Slot -> host view (before reading the view), host view -> slot (after
 * writing it), for a tensor whose view was asked for; otherwise nothing.
 * Errors: the backend's (SG_ERR_DEVICE), with the tensor named. */
sg_status sg__session_pull(sg_session *s, int32_t t);
sg_status sg__session_push(sg_session *s, int32_t t);

/* ---- passes ------------------------------------------------------------------ */

typedef struct sg__step_hooks {
  void *ctx;
  /* Called before the op at schedule position `pos` runs, for the positions
   * with before_at[pos] != 0 (every position when before_at is NULL). An
   * error ends the pass with that status. NULL: none. */
  sg_status (*before)(void *ctx, uint32_t pos);
  /* Called after the op at `pos` ran; the backend is synchronized first, so
   * what the hook reads (a gradient to allreduce, a time stamp) is complete. */
  sg_status (*after)(void *ctx, uint32_t pos);
  const uint8_t *before_at;
  const uint8_t *after_at;
} sg__step_hooks;

/* One run over part of a training step. Zero is the default of every field
 * but the range: a plain pass, no hooks, not counted. */
typedef struct sg__session_pass {
  /* Schedule positions [begin, end). With updates last, [0, first update)
   * is one micro-batch's forward and backward, which leaves its gradients
   * in their slots for the caller to accumulate. begin == end runs nothing
   * (with count_step: it counts a step run in earlier passes). */
  uint32_t begin, end;
  /* Dropout masks depend on (session seed, op, steps, stream). A runtime
   * that runs one step as several micro-batches or shards gives each its
   * own stream (its index + 1, say) so their masks differ, and the same
   * stream again when it recomputes or redoes that pass, so it draws the
   * same masks. 0 is what sg_session_step draws. */
  uint64_t stream;
  /* Training-form batch norm normalises with the batch statistics as ever
   * but leaves its running statistics alone: for a pass that recomputes a
   * forward already run (pipeline recomputation), which would otherwise
   * apply the momentum update twice. */
  bool freeze_stats;
  /* Called around the pass's ops (not copied; NULL: none). */
  const sg__step_hooks *hooks;
  /* Once the pass ran, count a step (sg_session_steps + 1), as
   * sg_session_step does: for the last pass of a step run in parts. SGD's
   * dampened first step and the next step's dropout masks read the count. */
  bool count_step;
} sg__session_pass;

/* Runs pass *p. Every input that an op of the range reads must be set. An
 * error from an op or a hook ends the pass there, uncounted. SG_ERR_STATE
 * before compile; SG_ERR_RANGE for a range outside the schedule;
 * SG_ERR_INVALID_ARG for a NULL pass. */
sg_status sg__session_run_pass(sg_session *s, const sg__session_pass *p);

/* Sets the count of steps run (sg_session_steps): a runtime that rolls its
 * state back to the one after step n rolls the count back too, so a redone
 * step draws the masks it drew the first time. */
void sg__session_set_steps(sg_session *s, uint64_t steps);

/* Fault injection's device failure (SPEC H6): the session's device fails
 * as after a sticky device error (the backend's fail entry), `why` its
 * cause; every later pass, read or write returns SG_ERR_DEVICE. */
void sg__session_fail_device(sg_session *s, const char *why);

/* ---- checkpoints: without a session ------------------------------------------- */

/* Writes the checkpoint sg_session_save_checkpoint writes for a session of
 * `g` that has run `steps` steps, with the value of each parameter, state and
 * optimizer state tensor t taken from values[t] (its nbytes, host memory, the
 * graph's own layout); NULL keeps the graph's initializer, if any. A job
 * whose parts live on several ranks (sg_dist_save_checkpoint) puts the whole
 * model's values together on one rank and writes them with the format of
 * one. `fn` names the caller in messages. Errors are sg_graph_save's, and
 * SG_ERR_DUPLICATE when g already has a tensor of the step count's name. */
sg_status sg__checkpoint_write(const sg_graph *g, const void *const *values, uint64_t steps, const char *fn,
                               const char *path);

#endif /* SG_RUNTIME_HOOKS_H */
