/* The session's state, shared by its files (lifecycle, compile, step, I/O,
 * checkpoints). */
#ifndef SG_SESSION_INTERNAL_H
#define SG_SESSION_INTERNAL_H

#include "backend/backend.h"
#include "compile/plan.h"
#include "runtime/hooks.h"
#include "sgrt/session.h"

struct sg_session {
  const sg_graph *g;
  const sg__backend_i *be;
  void *be_state;
  int threads;
  uint64_t seed;
  int poison;
  bool fusion;      /* fuse elementwise ops into generated kernels (plan_options.fuse at compile) */
  bool matmul_bf16; /* sg_session_params.matmul_precision resolved to SG_MATMUL_BF16 */
  bool compiled;
  uint64_t steps;
  sg__plan_options plan_options; /* the layout, set before compile (hooks.h) */
  uint8_t *unbacked;             /* per tensor, or NULL: plan_options.no_memory, the session's copy */
  uint8_t *fuse_barrier;         /* per tensor, or NULL: plan_options.fuse_barrier, the session's copy */

  sg__plan plan;
  void *persistent;  /* device memory of the persistent slots */
  void *transient;   /* device memory of the planned region */
  void **tensor_ptr; /* per tensor: device address of its slot, or NULL */
  void **bound;      /* per tensor: caller memory bound as this input, or NULL */
  bool *input_set;   /* per tensor: an input has been set or bound */
  void **host_views; /* per tensor: its host copy (host_view.c), or NULL; NULL when views are slots */

  /* Per op index: its input and output addresses, in op order, pointing
   * into flat arrays so that a step only reads them. */
  void ***op_in;
  void ***op_out;
  void **flat;

  sg__module *module;        /* the generated kernels of the plan's fused groups, or NULL */
  sg__compile_stats cstats;  /* what building it cost */
  double compile_seconds;    /* the whole of the last compile */
  sg__kernel **kernels;      /* per position in plan.order */
  sg__kernel **eval_kernels; /* per position in plan.eval_order */

  /* SG_PROFILE (debug, step.c): per-op-kind times, or NULL when off. */
  struct sg__profile *profile;

  /* The timeline (sg_session_params.trace, trace.c): a ring of `tr_cap` events, `tr_n` recorded in all. */
  struct sg__session_event *tr;
  size_t tr_cap;
  uint64_t tr_n;

  /* Poisoning (debug): slots to fill after each position of plan.order. */
  uint32_t *poison_start; /* n_order + 1 */
  int32_t *poison_tensor;
};

/* The timeline (trace.c): an op at schedule position `pos` (of plan.order, or
 * of plan.eval_order when `eval`), or a whole step / pass (pos -1). */
typedef struct sg__session_event {
  int64_t t0_ns, t1_ns;
  uint64_t step;
  int32_t pos;
  bool eval;
} sg__session_event;
void sg__session_trace(sg_session *s, int64_t t0_ns, int32_t pos, bool eval);

/* SG_PROFILE=N: after the N-th step, print per-op-kind total times over
 * steps 2..N (step 1 is warm-up) to stderr. Set up at compile (allocates),
 * freed by destroy. */
sg_status sg__profile_init(sg_session *s);
void sg__profile_free(sg_session *s);

/* Host views (host_view.c): separate ones on a device, or with
 * SG_HOST_MIRROR=1; at compile and in release. */
sg_status sg__session_views_init(sg_session *s);
void sg__session_views_free(sg_session *s);

/* Points every op's input/output arrays at the current slots and bindings. */
void sg__session_wire(sg_session *s);

/* The tensor called `name`, checked to exist; SG_ERR_NOT_FOUND otherwise. */
sg_status sg__session_tensor(const sg_session *s, const char *name, const char *what, int32_t *id);

#endif /* SG_SESSION_INTERNAL_H */
