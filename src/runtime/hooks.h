/* How another layer joins a session's steps without the session knowing
 * about it: the distributed runtime (src/parallel) starts gradient allreduces
 * as soon as a bucket's last gradient exists and waits for them before the
 * first update that reads them; a tracer records when each op ran.
 *
 * Everything here is internal (not exported). Call order: create the
 * session, set the compile options, compile, then read the schedule and set
 * the hooks. The hooks run on the thread that calls sg_session_step(). */
#ifndef SG_RUNTIME_HOOKS_H
#define SG_RUNTIME_HOOKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sgrt/session.h"

typedef struct sg__step_hooks {
  void *ctx;
  /* Called before the op at schedule position `pos` runs, for the positions
   * with before_at[pos] != 0 (every position when before_at is NULL). An
   * error aborts the step and is returned by sg_session_step(). NULL: none. */
  sg_status (*before)(void *ctx, uint32_t pos);
  /* Called after the op at `pos` ran (its outputs are written). */
  sg_status (*after)(void *ctx, uint32_t pos);
  const uint8_t *before_at;
  const uint8_t *after_at;
} sg__step_hooks;

/* Before compile: run optimizer updates after the whole backward pass
 * (sg__plan_options.updates_last). SG_ERR_STATE once compiled. */
sg_status sg__session_set_updates_last(sg_session *s, bool updates_last);

/* After compile: installs hooks (copied; the arrays they point to must stay
 * valid), or removes them with NULL. SG_ERR_STATE before compile. */
sg_status sg__session_set_hooks(sg_session *s, const sg__step_hooks *hooks);

/* Runs schedule positions [begin, end) of a training step, with the hooks,
 * without counting a step: with updates last, [0, first update) is forward
 * and backward only, which leaves this micro-batch's gradients in their
 * slots for the caller to accumulate (gradient accumulation, a lost rank's
 * shard redone by a survivor). Inputs read by those positions must be set.
 * SG_ERR_STATE before compile; SG_ERR_RANGE for a bad range. */
sg_status sg__session_run_partial(sg_session *s, uint32_t begin, uint32_t end);

/* Sets the count of steps run (sg_session_steps), which also seeds dropout
 * masks: a distributed runtime that rolls back to the state after step n
 * rolls this back too, so a redone step draws the masks it drew the first
 * time. */
void sg__session_set_steps(sg_session *s, uint64_t steps);

/* Sets the dropout stream of the passes that follow (0, the default, is a
 * plain step): a runtime that runs a step as several micro-batches or shards
 * sets each its own stream (e.g. its index + 1), so their masks differ, and
 * the same stream again when it recomputes or redoes that pass, so it draws
 * the same masks. Masks depend on (session seed, op, steps, stream). */
void sg__session_set_stream(sg_session *s, uint64_t stream);

/* While on, training-form batch norm normalises with the batch statistics
 * as always but does not update its running statistics: for a pass that
 * recomputes a forward already run (pipeline recomputation), which would
 * otherwise apply the momentum update twice. Off by default. */
void sg__session_set_freeze_stats(sg_session *s, bool freeze);

/* Before compile: per tensor (or NULL), optimizer state that gets no memory,
 * because the update ops that read it will never run on this session
 * (ZeRO-1: another rank updates those parameters). The mask must stay valid
 * until compile returns. Such a tensor has no address (sg__session_tensor_addr
 * is NULL); reading, writing or checkpointing it is an error or skipped
 * until sg_session_bind_state gives it memory (zero-filled). SG_ERR_STATE
 * once compiled. */
sg_status sg__session_set_unallocated(sg_session *s, const uint8_t *mask);

/* The training schedule: op ids in the order a step runs them. */
const int32_t *sg__session_order(const sg_session *s, uint32_t *n);

/* The graph the session runs. */
const sg_graph *sg__session_graph(const sg_session *s);

/* Device address of tensor t's slot and its size in bytes (the backend's
 * layout size, which may exceed the plain size), or NULL when the tensor has
 * no slot. Valid from compile until destroy; host memory on the cpu device. */
void *sg__session_tensor_addr(const sg_session *s, int32_t t, size_t *bytes);

#endif /* SG_RUNTIME_HOOKS_H */
