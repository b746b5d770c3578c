/* Free mode (SPEC P2): METIS k-way and recursive bisection with memory and
 * compute as constraints, the better of them kept, then memory balance and
 * capacity restored where METIS left them, the cut refined, and for
 * heterogeneous devices the placement score consulted.
 *
 * On small graphs (SG__EXCHANGE_MAX_VERTICES) exchange refinement
 * (exchange.c) joins the boundary passes, and an iterated local search
 * follows: random moves of connected groups of vertices, each repaired back
 * within the bounds and refined, kept when the cut is no larger. With two
 * constraints METIS's results differ by a fifth and more from seed to seed;
 * the search takes most of that spread away (docs/partitioning.md,
 * Results). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "partition/partition_internal.h"

/* Memory is balanced to AIM of the tolerance where the vertices allow it
 * (METIS is aimed at 0.7 of it), else to the tolerance: results keep room
 * below the bound they are held to. */
#define AIM 0.75

/* The search: at most s->search_rounds rounds and SEARCH_WORK moves and
 * pairs priced by exchange.c, moving up to SEARCH_CHUNK connected vertices
 * a round. ResNet-50's training graph (176 groups into 8 parts) takes its
 * SG__SEARCH_ROUNDS rounds in about 0.05 s and 2-3e7 of the work; the work
 * bound stops larger graphs sooner. */
#define SEARCH_WORK 60000000ull
#define SEARCH_CHUNK 8

typedef struct outcome {
  bool mem_ok;  /* every part within its memory bound */
  bool snug;    /* ... and within AIM of the tolerance */
  bool comp_ok; /* compute within the tolerance (or not balanced) */
  double cut;   /* bytes, as a report counts them */
  double mem_ratio, comp_ratio;
  double limit; /* compute limit it was refined under */
} outcome;

/* Better: memory balanced, then compute balanced, then memory snug, then
 * the smaller cut (balance polishing comes after, on the winner). */
static bool better(const outcome *a, const outcome *b) {
  if (a->mem_ok != b->mem_ok) return a->mem_ok;
  if (a->comp_ok != b->comp_ok) return a->comp_ok;
  if (a->snug != b->snug) return a->snug;
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

/* Scratch of one free-mode solve. */
typedef struct work {
  sg__exchange *x; /* NULL: a large graph, or no memory for it (then no exchanges) */
  int32_t *keep;   /* n */
  uint64_t priced; /* moves and pairs exchange.c priced in the search */
} work;

/* Balance polishing: the tightest memory bound, from perfect balance up to
 * the tolerance, that the vertices can be moved into while the cut stays
 * within SG__CUT_SLACK of what it was and compute within `limit`. `reached`
 * (k) gets that bound; it holds the bound part meets on entry. */
static sg_status tighten(const sg__solve *s, int32_t *part, double limit, double *reached) {
  const sg__pgraph *pg = s->pg;
  int32_t *trial = sg__malloc(((size_t)pg->n + 1) * sizeof *trial);
  double *bound = sg__malloc((size_t)s->k * sizeof *bound);
  sg_status st = SG_OK;
  if (trial == NULL || bound == NULL) goto out; /* an optimisation: skip it */
  double cut0 = sg__pgraph_cut_bytes(pg, part);
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
    if (ok && sg__pgraph_cut_bytes(pg, trial) <= cut0 * (1.0 + SG__CUT_SLACK) + 1e-9) {
      memcpy(part, trial, (size_t)pg->n * sizeof *part);
      memcpy(reached, bound, (size_t)s->k * sizeof *bound);
      break;
    }
  }
out:
  sg__free(trial);
  sg__free(bound);
  return st;
}

static bool memory_fits(const sg__solve *s, const sg__loads *l) {
  for (int p = 0; p < s->k; p++)
    if (l->mem[p] > s->mem_bound[p] * (1.0 + 1e-9) + 1e-9) return false;
  return true;
}

/* Boundary passes, then (with exchanges) exchanges and passes while they
 * still gain. */
static void refine(const sg__solve *s, work *w, int32_t *part, sg__loads *l, double limit, int passes,
                   uint64_t *priced) {
  sg__refine_cut(s, part, l, limit, passes);
  sg__refine_fm(s, part, l, limit, passes);
  for (int round = 0; w->x != NULL && round < 4; round++) {
    double cut = sg__pgraph_cut(s->pg, part);
    sg__exchange_refine(w->x, s, part, l, limit, priced);
    sg__refine_fm(s, part, l, limit, passes);
    if (!(sg__pgraph_cut(s->pg, part) < cut * (1.0 - 1e-9))) break;
  }
}

/* Balance, refine and measure one METIS result in place, within s's
 * memory bounds. */
static sg_status polish_within(const sg__solve *s, work *w, int32_t *part, outcome *o) {
  int32_t n = s->pg->n;
  sg__loads l;
  SG_CHECK(sg__loads_init(&l, s, part));
  double tol = 1.0 + s->eps;
  sg__rebalance(s, part, &l, INFINITY, false);
  /* Both constraints at once, by moves to any part and exchanges, where the
   * boundary moves below stall; kept only when it meets them (on the way it
   * may trade one part's excess for another's). */
  if (w->x != NULL) {
    memcpy(w->keep, part, (size_t)n * sizeof *part);
    if (!sg__exchange_repair(w->x, s, part, &l, s->balance_compute ? tol : INFINITY, NULL)) {
      memcpy(part, w->keep, (size_t)n * sizeof *part);
      sg__loads_free(&l);
      SG_CHECK(sg__loads_init(&l, s, part));
    }
  }
  if (s->balance_compute) sg__rebalance(s, part, &l, tol, true);
  double comp_ratio = sg__max_ratio(l.comp, s->comp_target, s->k);
  double limit = s->balance_compute ? (comp_ratio > tol ? comp_ratio : tol) : INFINITY;
  sg__refine_cut(s, part, &l, limit, 8);
  sg__refine_fm(s, part, &l, limit, 6);
  if (w->x != NULL) refine(s, w, part, &l, limit, 6, NULL);
  if (heterogeneous(s)) {
    sg__refine_score(s, part, &l, limit);
    sg__refine_cut(s, part, &l, limit, 4);
  }
  bool mem_ok = memory_fits(s, &l) || sg__rebalance(s, part, &l, INFINITY, false);
  sg__loads_free(&l);
  SG_CHECK(sg__loads_init(&l, s, part));
  o->mem_ok = mem_ok;
  o->limit = limit;
  o->mem_ratio = sg__max_ratio(l.mem, s->mem_target, s->k);
  o->comp_ratio = sg__max_ratio(l.comp, s->comp_target, s->k);
  o->comp_ok = !s->balance_compute || o->comp_ratio <= tol * (1.0 + 1e-9);
  o->cut = sg__pgraph_cut_bytes(s->pg, part);
  sg__loads_free(&l);
  return SG_OK;
}

/* Within `aim`'s bounds if the result fits them, else within s's. */
static sg_status polish(const sg__solve *s, const sg__solve *aim, work *w, int32_t *part, int32_t *start,
                        outcome *o) {
  memcpy(start, part, (size_t)s->pg->n * sizeof *part);
  SG_CHECK(polish_within(aim, w, part, o));
  o->snug = o->mem_ok;
  if (o->mem_ok) return SG_OK;
  memcpy(part, start, (size_t)s->pg->n * sizeof *part);
  return polish_within(s, w, part, o);
}

/* ---- iterated local search ---------------------------------------------- */

/* Moves a connected group of up to SEARCH_CHUNK vertices of one part, grown
 * breadth first from a random vertex, to another random part. */
static void perturb(const sg__solve *s, int32_t *part, int32_t *queue, sg__rng *rng) {
  const sg__pgraph *pg = s->pg;
  int32_t v = (int32_t)sg__rng_below(rng, (uint32_t)pg->n);
  int from = part[v];
  int to = (int)sg__rng_below(rng, (uint32_t)s->k - 1);
  if (to >= from) to++;
  int32_t size = 1 + (int32_t)sg__rng_below(rng, SEARCH_CHUNK);
  int32_t head = 0, tail = 0;
  queue[tail++] = v;
  part[v] = to;
  while (head < tail && tail < size) {
    int32_t u = queue[head++];
    for (int32_t i = pg->xadj[u]; i < pg->xadj[u + 1] && tail < size; i++) {
      int32_t x = pg->adj[i];
      if (part[x] == from) {
        part[x] = to;
        queue[tail++] = x;
      }
    }
  }
}

/* Rounds of: perturb the best assignment, repair it within s's bounds and
 * compute `limit`, refine; keep the result when its cut is no larger (equal
 * cuts move the search along a plateau). Deterministic for the seed. */
static sg_status search(const sg__solve *s, work *w, int32_t *part, double limit) {
  const sg__pgraph *pg = s->pg;
  int32_t n = pg->n;
  int32_t *trial = sg__malloc(((size_t)n + 1) * sizeof *trial);
  int32_t *queue = sg__malloc(((size_t)n + 1) * sizeof *queue);
  sg_status st = SG_OK;
  if (trial == NULL || queue == NULL) goto out; /* an optimisation: skip it */
  sg__rng rng = {s->seed ^ 0x5ea4c4ed5ea4c4edull};
  double best = sg__pgraph_cut_bytes(pg, part);
  int round = 0, idle = 0;
  /* Small graphs run out of moves worth trying: the search stops after n +
   * 16 rounds in a row without a smaller cut. */
  for (; round < s->search_rounds && w->priced < SEARCH_WORK && idle < n + 16; round++) {
    memcpy(trial, part, (size_t)n * sizeof *trial);
    perturb(s, trial, queue, &rng);
    sg__loads l;
    if ((st = sg__loads_init(&l, s, trial)) != SG_OK) break;
    bool ok = sg__exchange_repair(w->x, s, trial, &l, limit, &w->priced);
    if (ok) refine(s, w, trial, &l, limit, 4, &w->priced);
    sg__loads_free(&l);
    double cut = ok ? sg__pgraph_cut_bytes(pg, trial) : INFINITY;
    idle = cut < best ? 0 : idle + 1;
    if (cut <= best) {
      best = cut;
      memcpy(part, trial, (size_t)n * sizeof *part);
    }
  }
  SG_DEBUG("partition: search: %d rounds, %llu moves and pairs priced, cut %.0f bytes", round,
           (unsigned long long)w->priced, best);
out:
  sg__free(trial);
  sg__free(queue);
  return st;
}

/* ---- fallback and entry point ------------------------------------------- */

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
  int32_t n = pg->n;
  int32_t *cand = sg__malloc(((size_t)n + 1) * sizeof *cand);
  int32_t *start = sg__malloc(((size_t)n + 1) * sizeof *start);
  double *bound = sg__malloc((size_t)s->k * sizeof *bound);
  work w = {NULL, NULL, 0};
  sg_status st = SG_OK, last = SG_OK;
  if (cand == NULL || start == NULL || bound == NULL) {
    st = sg__error(SG_ERR_NO_MEMORY, "partition: out of memory");
    goto out;
  }
  if (n <= SG__EXCHANGE_MAX_VERTICES) { /* an optimisation: without it, no exchanges */
    w.x = sg__exchange_create(n, s->k);
    w.keep = sg__malloc(((size_t)n + 1) * sizeof *w.keep);
    if (w.x == NULL || w.keep == NULL) {
      sg__exchange_destroy(w.x);
      w.x = NULL;
    }
  }
  sg__solve aim = *s;
  aim.mem_bound = bound;
  for (int p = 0; p < s->k; p++) {
    double b = s->mem_target[p] * (1.0 + AIM * sg__mem_eps(s));
    bound[p] = b < s->mem_bound[p] ? b : s->mem_bound[p];
  }
  int ncon = s->balance_compute ? 2 : 1;
  /* K-way with both constraints, from a few seeds on small graphs;
   * recursive bisection, which often cuts less for K <= 8 (METIS's advice);
   * and a memory-only k-way run, a fallback when two constraints are too
   * tight for METIS to meet. */
  int seeds = n <= 500 ? 4 : 1;
  metis_run runs[8];
  int n_runs = 0;
  for (int i = 0; i < seeds; i++)
    runs[n_runs++] = (metis_run){SG__METIS_KWAY, ncon, s->seed + 7919u * (uint64_t)i};
  if (s->k <= 8) runs[n_runs++] = (metis_run){SG__METIS_RECURSIVE, ncon, s->seed};
  if (ncon == 2) runs[n_runs++] = (metis_run){SG__METIS_KWAY, 1, s->seed};
  outcome best = {0};
  bool have = false;
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
    if ((st = polish(s, &aim, &w, cand, start, &o)) != SG_OK) break;
    SG_DEBUG("partition: METIS run %d: memory %s%s, compute %s, cut %.0f bytes", r, o.mem_ok ? "ok" : "over",
             o.snug ? " (snug)" : "", o.comp_ok ? "ok" : "over", o.cut);
    if (!have || better(&o, &best)) {
      best = o;
      memcpy(part, cand, (size_t)n * sizeof *part);
      have = true;
    }
  }
  if (st == SG_OK && (!have || !best.mem_ok)) {
    /* METIS's results do not fit: pack by memory, then refine. */
    outcome o;
    if ((st = capacity_first(s, cand)) == SG_OK && (st = polish(s, &aim, &w, cand, start, &o)) == SG_OK &&
        (!have || better(&o, &best))) {
      best = o;
      memcpy(part, cand, (size_t)n * sizeof *part);
      have = true;
    }
  }
  if (st == SG_OK && !have)
    st = last != SG_OK ? last : sg__error(SG_ERR_INTERNAL, "partition: METIS gave no result");
  if (st == SG_OK && best.mem_ok) {
    if (!best.snug) memcpy(bound, s->mem_bound, (size_t)s->k * sizeof *bound);
    st = tighten(s, part, best.limit, bound);
    /* The search is for the two constraints' spread; it keeps to the bound
     * polishing reached. It prices cut bytes only, so it leaves
     * heterogeneous placements (scores) and repartitioning (migration)
     * alone. */
    if (st == SG_OK && s->search_rounds > 0 && s->balance_compute && w.x != NULL && !heterogeneous(s) &&
        s->home == NULL)
      st = search(&aim, &w, part, best.limit);
  }
out:
  sg__exchange_destroy(w.x);
  sg__free(w.keep);
  sg__free(cand);
  sg__free(start);
  sg__free(bound);
  return st;
}
