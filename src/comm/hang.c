/* The hang diagnosis sentence (SPEC H7, docs/resilience.md "Hang
 * diagnosis"). In a synchronous schedule a collective completes only when
 * every rank has entered it, so when a rank waits in #N for too long, the
 * peers whose heartbeats say they have not entered #N are the cause. The
 * sentence names them with their last position and label, and the ranks
 * that did arrive with how long this one waited:
 *   "rank 2 is stuck before collective #42 (step 5: allreduce of gradient
 *    bucket 1 of 2); its last: #41 (step 4: allreduce of gradient bucket 2
 *    of 2), finished; ranks 0-1, 3 have entered #42, rank 0 waited 2.0 s in
 *    it (hang timeout 2000 ms)".
 * Pure: the transport (ucx.c) gathers the view, the tests hand-make one. It
 * lives in the comm layer because the collective that fails is there; the
 * health monitor's diagnosis (src/health/diagnose.c) compares (step,
 * collective) of sg_heartbeat and has no labels. */
#include <stdarg.h>
#include <stdio.h>

#include "comm/comm_internal.h"

/* "rank 4" or "ranks 1-3, 7": the ranks r with in[r], ascending. */
static void put_ranks(sg__writer *w, const uint8_t *in, int size) {
  int n = 0;
  for (int r = 0; r < size; r++) n += in[r] != 0;
  sg__put(w, n == 1 ? "rank " : "ranks ");
  int first = 1;
  for (int r = 0; r < size;) {
    if (!in[r]) {
      r++;
      continue;
    }
    int e = r;
    while (e + 1 < size && in[e + 1]) e++;
    sg__put(w, "%s%d", first ? "" : ", ", r);
    if (e > r) sg__put(w, "-%d", e);
    first = 0;
    r = e + 1;
  }
}

static const char *or_none(const char *label) { return label && *label ? label : "no label"; }

size_t sg__hang_text(const sg__hang_view *v, char *buf, size_t cap) {
  sg__writer w = {buf, cap, 0};
  if (cap > 0) buf[0] = '\0';
  uint8_t arrived_small[256];
  uint8_t *arrived = v->size <= 256 ? arrived_small : sg__calloc((size_t)v->size, 1);
  if (arrived == NULL) {
    sg__put(&w, "hang diagnosis: out of memory");
    return w.len;
  }
  int n_stuck = 0;
  for (int r = 0; r < v->size; r++) {
    n_stuck += v->stuck[r] != 0;
    arrived[r] =
        r == v->self ? !v->self_out : !v->stuck[r] && v->pos[r].known && v->pos[r].collective >= v->seq;
  }
  put_ranks(&w, v->stuck, v->size);
  sg__put(&w, " %s stuck before collective #%llu (%s)", n_stuck == 1 ? "is" : "are",
          (unsigned long long)v->seq, or_none(v->label));
  if (v->reporter >= 0) sg__put(&w, " (found by rank %d)", v->reporter);
  for (int r = 0; r < v->size; r++) {
    if (!v->stuck[r]) continue;
    const sg_comm_position *p = &v->pos[r];
    if (n_stuck == 1) sg__put(&w, "; its last: ");
    else sg__put(&w, "; rank %d's last: ", r);
    if (!p->known) sg__put(&w, "no position heard yet");
    else if (p->collective == 0) sg__put(&w, "no collective yet");
    else
      sg__put(&w, "#%llu (%s), %s", (unsigned long long)p->collective, or_none(p->label),
              p->inside ? "still inside it" : "finished");
  }
  int n_arrived = 0;
  for (int r = 0; r < v->size; r++) n_arrived += arrived[r] != 0;
  if (n_arrived > 0) {
    sg__put(&w, "; ");
    put_ranks(&w, arrived, v->size);
    sg__put(&w, " %s entered #%llu", n_arrived == 1 ? "has" : "have", (unsigned long long)v->seq);
  }
  if (v->self_out)
    sg__put(&w, "; rank %d had not entered it yet (hang timeout %lld ms)", v->self, (long long)v->hang_ms);
  else
    sg__put(&w, ", rank %d waited %.1f s in it (hang timeout %lld ms)", v->self,
            (double)v->waited_ms / 1000.0, (long long)v->hang_ms);
  if (arrived != arrived_small) sg__free(arrived);
  return w.len;
}
