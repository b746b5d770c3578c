/* The solver's entry point: trivial cases, then free or pipeline mode, then
 * the checks every result must pass (capacity, acyclicity). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "partition/partition_internal.h"

/* Fewer vertices than parts: one per part in topological order (monotone,
 * so also a valid pipeline), then capacity repairs if needed. */
static void spread(const sg__solve *s, int32_t *part) {
  for (int32_t i = 0; i < s->pg->n; i++) part[s->pg->topo[i]] = i < s->k ? i : s->k - 1;
}

static sg_status check_capacity(const sg__solve *s, const int32_t *part) {
  sg__loads l;
  SG_CHECK(sg__loads_init(&l, s, part));
  sg_status st = SG_OK;
  for (int p = 0; p < s->k && st == SG_OK; p++)
    if (l.mem[p] > s->cap[p] * (1.0 + 1e-12)) {
      double cap_sum = 0.0;
      for (int q = 0; q < s->k; q++) cap_sum += s->cap[q];
      st = sg__error(
          SG_ERR_RANGE,
          "partition: part %d needs %.0f bytes of memory, more than the capacity of device '%s' (%.0f "
          "bytes); no placement of the ops fits (the graph needs %.0f bytes, the devices' capacity is %.0f "
          "bytes in all)%s",
          p, l.mem[p], s->dev[p].name ? s->dev[p].name : "?", s->cap[p], s->pg->total_mem, cap_sum,
          s->pipeline ? " in pipeline order" : "");
    }
  sg__loads_free(&l);
  return st;
}

sg_status sg__solve_run(sg__solve *s, int32_t *part) {
  const sg__pgraph *pg = s->pg;
  bool own_targets = s->mem_target == NULL;
  if (own_targets) SG_CHECK(sg__targets_init(s));
  sg_status st = SG_OK;
  if (pg->n == 0) goto out;
  if (s->k == 1) {
    memset(part, 0, (size_t)pg->n * sizeof *part);
  } else if (pg->n <= s->k) {
    spread(s, part);
    sg__loads l;
    if ((st = sg__loads_init(&l, s, part)) != SG_OK) goto out;
    sg__rebalance(s, part, &l, INFINITY, false);
    sg__loads_free(&l);
  } else if (s->pipeline) {
    st = sg__pipeline_solve(s, part);
  } else {
    st = sg__free_solve(s, part);
  }
  if (st == SG_OK) st = check_capacity(s, part);
  if (st == SG_OK && s->pipeline && !sg__pipeline_monotone(pg, part))
    st = sg__error(SG_ERR_INTERNAL, "partition: pipeline stages are not in topological order");
out:
  if (own_targets && st != SG_OK) sg__targets_free(s);
  return st;
}
