/* Re-cutting a running pipeline from what it measured (pp.h, SPEC P6).
 *
 * The static cost model says how an op's time compares with another's on
 * one device; only the run says how fast each stage's rank really is (a
 * slow or shared CPU, a thermal limit). So each stage's speed is its
 * measured compute over the cost it holds, and the new cut balances the
 * predicted time speed x cost. The cut is contiguous in op order: the
 * graph's ops are in a topological order, so every edge goes forward and
 * the stages stay a pipeline; stage k keeps its rank, so only the ops at
 * the moved boundaries change hands.
 *
 * Search: the smallest bound T for which a greedy sweep (fill stage k while
 * its predicted time stays within T, leaving one op for each later stage)
 * places every op, by bisection on T; the sweep is exact for contiguous
 * cuts with per-stage speeds (a later boundary never helps an earlier
 * stage), so the bound found is the optimum within the bisection's
 * tolerance. */
#include <math.h>
#include <stdbool.h>

#include "core/core.h"
#include "parallel/pp.h"

/* Whether every op fits under `bound` with stages filled greedily; the cut in out. */
static bool sweep(const double *cost, int32_t n, const double *speed, int stages, double bound, int *out) {
  int k = 0;
  double load = 0;
  int32_t in_stage = 0;
  for (int32_t i = 0; i < n; i++) {
    bool must_close = in_stage > 0 && n - i == stages - 1 - k; /* one op left per later stage */
    bool over = in_stage > 0 && (load + cost[i]) * speed[k] > bound;
    if ((must_close || over) && k + 1 < stages) {
      k++;
      load = 0;
      in_stage = 0;
    }
    load += cost[i];
    in_stage++;
    out[i] = k;
    if (load * speed[k] > bound) return false;
  }
  return k == stages - 1;
}

static double predicted(const double *cost, int32_t n, const double *speed, int stages, const int *cut) {
  double load[SG__PP_MAX_STAGES] = {0}, worst = 0;
  for (int32_t i = 0; i < n; i++) load[cut[i]] += cost[i];
  for (int k = 0; k < stages; k++)
    if (load[k] * speed[k] > worst) worst = load[k] * speed[k];
  return worst;
}

sg_status sg__pp_recut(const double *cost, int32_t n_ops, const int *stage_of_op, const double *busy_ms,
                       int stages, int *out, double *gain) {
  if (cost == NULL || stage_of_op == NULL || busy_ms == NULL || out == NULL || gain == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg__pp_recut: NULL argument");
  if (stages < 1 || stages > SG__PP_MAX_STAGES || n_ops < stages)
    return sg__error(SG_ERR_INVALID_ARG,
                     "sg__pp_recut: %d stages for %d ops (1..%d stages, at most one per op)", stages,
                     (int)n_ops, SG__PP_MAX_STAGES);
  double held[SG__PP_MAX_STAGES] = {0}, speed[SG__PP_MAX_STAGES], measured = 0;
  for (int32_t i = 0; i < n_ops; i++) {
    if (!(cost[i] >= 0) || !isfinite(cost[i]))
      return sg__error(SG_ERR_INVALID_ARG, "sg__pp_recut: cost[%d] is %g", (int)i, cost[i]);
    if (stage_of_op[i] < 0 || stage_of_op[i] >= stages)
      return sg__error(SG_ERR_INVALID_ARG, "sg__pp_recut: stage_of_op[%d] is %d, not in 0..%d", (int)i,
                       stage_of_op[i], stages - 1);
    held[stage_of_op[i]] += cost[i];
  }
  for (int32_t i = 0; i < n_ops; i++) out[i] = stage_of_op[i];
  *gain = 1;
  bool known = true;
  for (int k = 0; k < stages; k++) {
    if (!(busy_ms[k] >= 0) || !isfinite(busy_ms[k]))
      return sg__error(SG_ERR_INVALID_ARG, "sg__pp_recut: busy_ms[%d] is %g", k, busy_ms[k]);
    if (busy_ms[k] > measured) measured = busy_ms[k];
    known = known && held[k] > 0 && busy_ms[k] > 0;
    speed[k] = held[k] > 0 ? busy_ms[k] / held[k] : 0;
  }
  if (!known) return SG_OK; /* a stage whose speed cannot be told: keep the cut */
  double total = 0, fastest = INFINITY;
  for (int32_t i = 0; i < n_ops; i++) total += cost[i];
  for (int k = 0; k < stages; k++) fastest = fmin(fastest, speed[k]);
  int *trial = out; /* the sweep writes into out; the best cut is rebuilt at the end */
  double lo = total * fastest / stages, hi = 0;
  for (int k = 0; k < stages; k++) hi = fmax(hi, total * speed[k]);
  if (!sweep(cost, n_ops, speed, stages, hi, trial)) return SG_OK; /* cannot happen: hi holds everything */
  for (int it = 0; it < 60 && hi - lo > 1e-9 * hi; it++) {
    double mid = 0.5 * (lo + hi);
    if (sweep(cost, n_ops, speed, stages, mid, trial)) hi = mid;
    else lo = mid;
  }
  sweep(cost, n_ops, speed, stages, hi, out);
  double best = predicted(cost, n_ops, speed, stages, out);
  if (best <= 0 || best >= measured) { /* no better than what runs */
    for (int32_t i = 0; i < n_ops; i++) out[i] = stage_of_op[i];
    return SG_OK;
  }
  *gain = measured / best;
  return SG_OK;
}
