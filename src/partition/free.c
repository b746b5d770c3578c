/* Free mode (SPEC P2): METIS k-way and recursive bisection with memory and
 * compute as constraints, the better of them kept, then memory balance and
 * capacity restored where METIS left them, the cut refined, and for
 * heterogeneous devices the placement score consulted. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "partition/partition_internal.h"

typedef struct outcome {
  bool mem_ok;  /* every part within its memory bound */
  bool comp_ok; /* compute within the tolerance (or not balanced) */
  double cut;
  double mem_ratio, comp_ratio;
  double limit; /* compute limit it was refined under */
} outcome;

/* Better: memory balanced, then compute balanced, then the smaller cut
 * (balance polishing comes after, on the winner). */
static bool better(const outcome *a, const outcome *b) {
  if (a->mem_ok != b->mem_ok) return a->mem_ok;
  if (a->comp_ok != b->comp_ok) return a->comp_ok;
  if (a->cut != b->cut) return a->cut < b->cut;
  return a->comp_ratio < b->comp_ratio;
}

static bool heterogeneous(const sg__solve *s) {
  for (int p = 1; p < s->k; p++)
    if (s->dev[p].peak != s->dev[0].peak || s->dev[p].bw != s->dev[0].bw ||
        s->dev[p].link_bw != s->dev[0].link_bw || s->dev[p].link_lat != s->dev[0].link_lat)
      return true;
  return false;
}

/* Balance polishing: the tightest memory bound, from perfect balance up to
 * the tolerance, that the vertices can be moved into while the cut stays
 * within SG__CUT_SLACK of what it was and compute within `limit`. */
static sg_status tighten(const sg__solve *s, int32_t *part, double limit) {
  const sg__pgraph *pg = s->pg;
  int32_t *trial = sg__malloc(((size_t)pg->n + 1) * sizeof *trial);
  double *bound = sg__malloc((size_t)s->k * sizeof *bound);
  sg_status st = SG_OK;
  if (trial == NULL || bound == NULL) goto out; /* an optimisation: skip it */
  double cut0 = sg__pgraph_cut(pg, part);
  static const double steps[] = {0.0, 0.25, 0.5, 0.75};
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    for (int p = 0; p < s->k; p++) {
      double b = s->mem_target[p] * (1.0 + steps[i] * sg__mem_eps(s));
      bound[p] = b < s->mem_bound[p] ? b : s->mem_bound[p];
    }
    sg__solve t = *s;
    t.mem_bound = bound;
    memcpy(trial, part, (size_t)pg->n * sizeof *trial);
    sg__loads l;
    if ((st = sg__loads_init(&l, &t, trial)) != SG_OK) break;
    bool ok = sg__rebalance(&t, trial, &l, limit, true);
    if (ok) {
      sg__refine_cut(&t, trial, &l, limit, 4);
      sg__refine_fm(&t, trial, &l, limit, 4);
    }
    sg__loads_free(&l);
    if (ok && sg__pgraph_cut(pg, trial) <= cut0 * (1.0 + SG__CUT_SLACK) + 1e-9) {
      memcpy(part, trial, (size_t)pg->n * sizeof *part);
      break;
    }
  }
out:
  sg__free(trial);
  sg__free(bound);
  return st;
}

/* Balance, refine and measure one METIS result in place. */
static sg_status polish(const sg__solve *s, int32_t *part, outcome *o) {
  sg__loads l;
  SG_CHECK(sg__loads_init(&l, s, part));
  double tol = 1.0 + s->eps;
  bool mem_ok = sg__rebalance(s, part, &l, INFINITY, false);
  if (s->balance_compute) sg__rebalance(s, part, &l, tol, true);
  double comp_ratio = sg__max_ratio(l.comp, s->comp_target, s->k);
  double limit = s->balance_compute ? (comp_ratio > tol ? comp_ratio : tol) : INFINITY;
  sg__refine_cut(s, part, &l, limit, 8);
  sg__refine_fm(s, part, &l, limit, 6);
  if (heterogeneous(s)) {
    sg__refine_score(s, part, &l, limit);
    sg__refine_cut(s, part, &l, limit, 4);
  }
  if (!mem_ok) mem_ok = sg__rebalance(s, part, &l, INFINITY, false);
  sg__loads_free(&l);
  SG_CHECK(sg__loads_init(&l, s, part));
  o->mem_ok = mem_ok;
  o->limit = limit;
  o->mem_ratio = sg__max_ratio(l.mem, s->mem_target, s->k);
  o->comp_ratio = sg__max_ratio(l.comp, s->comp_target, s->k);
  o->comp_ok = !s->balance_compute || o->comp_ratio <= tol * (1.0 + 1e-9);
  o->cut = sg__pgraph_cut(s->pg, part);
  sg__loads_free(&l);
  return SG_OK;
}

typedef struct weighted {
  double w;
  int32_t v;
} weighted;

static int heavier_first(const void *pa, const void *pb) {
  const weighted *a = pa, *b = pb;
  if (a->w != b->w) return a->w > b->w ? -1 : 1;
  return (a->v > b->v) - (a->v < b->v);
}

/* Capacity first: heaviest vertices first, each to the part with the most
 * room under its memory bound (or, failing that, under its capacity). The
 * fallback when no METIS result fits. */
static sg_status capacity_first(const sg__solve *s, int32_t *part) {
  const sg__pgraph *pg = s->pg;
  weighted *order = sg__malloc(((size_t)pg->n + 1) * sizeof *order);
  double *load = sg__calloc((size_t)s->k, sizeof *load);
  if (order == NULL || load == NULL) {
    sg__free(order);
    sg__free(load);
    return sg__error(SG_ERR_NO_MEMORY, "partition: out of memory");
  }
  for (int32_t v = 0; v < pg->n; v++) order[v] = (weighted){pg->mem[v], v};
  qsort(order, (size_t)pg->n, sizeof *order, heavier_first);
  for (int32_t i = 0; i < pg->n; i++) {
    int best = 0;
    double best_room = -INFINITY;
    for (int pass = 0; pass < 2 && best_room < order[i].w; pass++)
      for (int p = 0; p < s->k; p++) {
        double room = (pass == 0 ? s->mem_bound[p] : s->cap[p]) - load[p];
        if (room > best_room) best_room = room, best = p;
      }
    part[order[i].v] = best;
    load[best] += order[i].w;
  }
  sg__free(order);
  sg__free(load);
  return SG_OK;
}

typedef struct metis_run {
  sg__metis_method method;
  int ncon;
  uint64_t seed;
} metis_run;

sg_status sg__free_solve(const sg__solve *s, int32_t *part) {
  const sg__pgraph *pg = s->pg;
  int32_t *cand = sg__malloc(((size_t)pg->n + 1) * sizeof *cand);
  if (cand == NULL) return sg__error(SG_ERR_NO_MEMORY, "partition: out of memory");
  int ncon = s->balance_compute ? 2 : 1;
  /* K-way with both constraints, from a few seeds on small graphs;
   * recursive bisection, which often cuts less for K <= 8 (METIS's advice);
   * and a memory-only k-way run, a fallback when two constraints are too
   * tight for METIS to meet. */
  int seeds = pg->n <= 500 ? 4 : 1;
  metis_run runs[8];
  int n_runs = 0;
  for (int i = 0; i < seeds; i++)
    runs[n_runs++] = (metis_run){SG__METIS_KWAY, ncon, s->seed + 7919u * (uint64_t)i};
  if (s->k <= 8) runs[n_runs++] = (metis_run){SG__METIS_RECURSIVE, ncon, s->seed};
  if (ncon == 2) runs[n_runs++] = (metis_run){SG__METIS_KWAY, 1, s->seed};
  outcome best = {0};
  bool have = false;
  sg_status st = SG_OK, last = SG_OK;
  for (int r = 0; r < n_runs; r++) {
    /* METIS aims a little inside the tolerance: its results overshoot, and
     * the compute repairs need room. */
    st = sg__metis_partition(s, runs[r].method, runs[r].ncon, 0.7, runs[r].seed, cand);
    if (st == SG_ERR_NO_MEMORY) break;
    if (st != SG_OK) {
      /* METIS refuses some inputs for one method only; try the others. */
      SG_DEBUG("partition: METIS run %d failed: %s", r, sg_last_error());
      last = st;
      st = SG_OK;
      continue;
    }
    outcome o;
    if ((st = polish(s, cand, &o)) != SG_OK) break;
    if (!have || better(&o, &best)) {
      best = o;
      memcpy(part, cand, (size_t)pg->n * sizeof *part);
      have = true;
    }
  }
  if (st == SG_OK && (!have || !best.mem_ok)) {
    /* METIS's results do not fit: pack by memory, then refine. */
    outcome o;
    if ((st = capacity_first(s, cand)) == SG_OK && (st = polish(s, cand, &o)) == SG_OK &&
        (!have || better(&o, &best))) {
      best = o;
      memcpy(part, cand, (size_t)pg->n * sizeof *part);
      have = true;
    }
  }
  sg__free(cand);
  if (st != SG_OK) return st;
  if (!have) return last != SG_OK ? last : sg__error(SG_ERR_INTERNAL, "partition: METIS gave no result");
  return best.mem_ok ? tighten(s, part, best.limit) : SG_OK;
}
