/* The 1F1B schedule of one pipeline stage (pp.h), as a list of actions the
 * runner executes in order.
 *
 * Stage k of K runs w = min(K-k-1, M) forwards ahead (warm-up), then
 * alternates one forward and one backward, then drains the w outstanding
 * backwards (cool-down), so at most K-k micro-batches are in flight on it
 * (PipeDream-Flush / Megatron's non-interleaved schedule).
 *
 * Ordering of the communication: a send returns only when its buffer may be
 * reused, which for a large message can mean "when the receiver posted its
 * receive". In the steady state stage k sends F(f) to k+1 while k+1 sends
 * B(b) to k; if both sent first they would wait on each other. So on every
 * link the lower stage sends first and then receives, and the higher stage
 * receives first and then sends. With that, both ends of a link list its
 * messages in the same order (F^w (F B)^r B^w, r = M - w), and a chain of
 * stages whose links agree in order cannot deadlock: the last stage can only
 * wait on its one link, whose other end, being at the same position, is
 * ready (docs/pipeline_parallel.md spells this out; pp_worker's `badargs`
 * mode checks it by simulating every K <= 8, M <= 12 with rendezvous
 * sends). */
#include "core/core.h"
#include "parallel/pp.h"

typedef struct prog {
  sg__pp_slot *out;
  int cap, n;
} prog;

static void put(prog *p, sg__pp_action a, int micro) {
  if (p->n < p->cap) p->out[p->n] = (sg__pp_slot){a, micro};
  p->n++;
}

sg_status sg__pp_schedule(int stages, int stage, int micro, sg__pp_slot *out, int cap, int *n) {
  if (n) *n = 0;
  if (out == NULL || n == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg__pp_schedule: NULL %s", out == NULL ? "out" : "n");
  if (stages < 1 || stages > SG__PP_MAX_STAGES || stage < 0 || stage >= stages || micro < 1 ||
      micro > SG__PP_MAX_MICRO)
    return sg__error(SG_ERR_INVALID_ARG,
                     "sg__pp_schedule: stage %d of %d stages with %d micro-batches (stages 1..%d, "
                     "micro-batches 1..%d)",
                     stage, stages, micro, SG__PP_MAX_STAGES, SG__PP_MAX_MICRO);
  prog p = {out, cap, 0};
  bool first = stage == 0, last = stage == stages - 1;
  int w = stages - stage - 1 < micro ? stages - stage - 1 : micro, r = micro - w;
  for (int i = 0; i < w; i++) { /* warm-up: never on the last stage (w = 0 there) */
    if (!first) put(&p, SG__PP_RECV_FWD, i);
    put(&p, SG__PP_FORWARD, i);
    put(&p, SG__PP_SEND_FWD, i);
  }
  if (r > 0 && !first) put(&p, SG__PP_RECV_FWD, w);
  for (int i = 0; i < r; i++) {
    int f = w + i, b = i;
    if (!last) { /* the last stage's forward is part of its backward pass */
      put(&p, SG__PP_FORWARD, f);
      put(&p, SG__PP_SEND_FWD, f); /* lower end of link (k, k+1): send, then receive */
      put(&p, SG__PP_RECV_BWD, b);
    }
    put(&p, SG__PP_BACKWARD, b);
    if (first) continue;
    if (i + 1 < r) put(&p, SG__PP_RECV_FWD, f + 1); /* higher end of (k-1, k): receive, then send */
    put(&p, SG__PP_SEND_BWD, b);
  }
  for (int b = r; b < micro; b++) { /* cool-down */
    put(&p, SG__PP_RECV_BWD, b);
    put(&p, SG__PP_BACKWARD, b);
    if (!first) put(&p, SG__PP_SEND_BWD, b);
  }
  if (p.n > cap)
    return sg__error(SG_ERR_INVALID_ARG, "sg__pp_schedule: %d actions do not fit in %d", p.n, cap);
  *n = p.n;
  return SG_OK;
}
