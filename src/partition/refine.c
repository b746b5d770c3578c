/* Local improvement of an assignment: greedy boundary moves that cut edge
 * weight (a one-sided Fiduccia-Mattheyses pass), moves that restore balance
 * and capacity, and score-driven moves for heterogeneous devices. In
 * pipeline mode a vertex only moves between the stage of its last forward
 * predecessor and that of its first forward successor, so every forward
 * edge keeps going from a stage to the same or a later one (SPEC P4). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "partition/partition_internal.h"

/* Relative slack on bounds, so sums in a different order do not flip a
 * comparison. */
#define SLACK 1e-9

static void stage_range(const sg__solve *s, const int32_t *part, int32_t v, int *lo, int *hi) {
  const sg__pgraph *pg = s->pg;
  *lo = 0;
  *hi = s->k - 1;
  if (!s->pipeline) return;
  for (int32_t i = pg->pxadj[v]; i < pg->pxadj[v + 1]; i++)
    if (part[pg->pred[i]] > *lo) *lo = part[pg->pred[i]];
  for (int32_t i = pg->sxadj[v]; i < pg->sxadj[v + 1]; i++)
    if (part[pg->succ[i]] < *hi) *hi = part[pg->succ[i]];
}

static bool mem_fits(const sg__solve *s, const sg__loads *l, int t, double w) {
  return l->mem[t] + w <= s->mem_bound[t] * (1.0 + SLACK) + 1e-9;
}

static bool comp_fits(const sg__solve *s, const sg__loads *l, int t, double w, double comp_limit) {
  if (!s->balance_compute || !isfinite(comp_limit)) return true;
  return l->comp[t] + w <= comp_limit * s->comp_target[t] * (1.0 + SLACK) + 1e-9;
}

/* A shuffled visiting order, deterministic for the seed. */
static int32_t *visit_order(int32_t n, uint64_t seed) {
  int32_t *o = sg__malloc(((size_t)n + 1) * sizeof *o);
  if (o == NULL) return NULL;
  for (int32_t i = 0; i < n; i++) o[i] = i;
  sg__rng r = {seed};
  for (int32_t i = n - 1; i > 0; i--) {
    int32_t j = (int32_t)sg__rng_below(&r, (uint32_t)i + 1);
    int32_t t = o[i];
    o[i] = o[j];
    o[j] = t;
  }
  return o;
}

/* conn[p] = edge weight from v to part p, for the parts listed in touched. */
static int connections(const sg__pgraph *pg, const int32_t *part, int32_t v, double *conn, int *touched) {
  int nt = 0;
  for (int32_t i = pg->xadj[v]; i < pg->xadj[v + 1]; i++) {
    int p = part[pg->adj[i]];
    if (conn[p] == 0.0) touched[nt++] = p;
    conn[p] += pg->adjw[i] > 0.0 ? pg->adjw[i] : 1e-300;
  }
  return nt;
}

/* Migration cost of v sitting on part t rather than its home (P6). */
static double migration(const sg__solve *s, int32_t v, int t) {
  if (s->home == NULL || s->home[v] == t) return 0.0;
  return s->migration_cost * s->pg->persist[v];
}

static void clear(double *conn, const int *touched, int nt) {
  for (int i = 0; i < nt; i++) conn[touched[i]] = 0.0;
}

void sg__refine_cut(const sg__solve *s, int32_t *part, sg__loads *l, double comp_limit, int passes) {
  const sg__pgraph *pg = s->pg;
  int k = s->k;
  double *conn = sg__calloc((size_t)k, sizeof *conn);
  int *touched = sg__malloc((size_t)k * sizeof *touched);
  int32_t *order = visit_order(pg->n, s->seed ^ 0x9e3779b97f4a7c15ull);
  bool keep_nonempty = pg->n >= k;
  if (conn == NULL || touched == NULL || order == NULL) goto out; /* an optimisation: skip it */
  for (int pass = 0; pass < passes; pass++) {
    int32_t moved = 0;
    for (int32_t oi = 0; oi < pg->n; oi++) {
      int32_t v = order[oi];
      int from = part[v];
      if (keep_nonempty && l->count[from] <= 1) continue;
      int nt = connections(pg, part, v, conn, touched);
      int lo, hi;
      stage_range(s, part, v, &lo, &hi);
      double internal = conn[from], best_gain = 0.0;
      int best = -1;
      for (int i = 0; i < nt; i++) {
        int t = touched[i];
        if (t == from || t < lo || t > hi) continue;
        double gain = conn[t] - internal - migration(s, v, t) + migration(s, v, from);
        if (gain <= best_gain * (1.0 + SLACK) + 1e-12) continue;
        if (!mem_fits(s, l, t, pg->mem[v]) || !comp_fits(s, l, t, pg->flops[v], comp_limit)) continue;
        best_gain = gain;
        best = t;
      }
      clear(conn, touched, nt);
      if (best >= 0) {
        sg__loads_move(l, pg, v, from, best);
        part[v] = best;
        moved++;
      }
    }
    if (moved == 0) break;
  }
out:
  sg__free(conn);
  sg__free(touched);
  sg__free(order);
}

/* ---- Fiduccia-Mattheyses ------------------------------------------------ */

typedef struct fm_entry {
  double gain;
  int32_t v;
  int32_t to;
  uint32_t stamp;
} fm_entry;

typedef struct fm_heap {
  fm_entry *e;
  size_t n, cap;
} fm_heap;

static bool fm_push(fm_heap *h, fm_entry x) {
  if (h->n == h->cap) {
    size_t cap = h->cap ? h->cap * 2 : 1024;
    fm_entry *e = sg__realloc(h->e, cap * sizeof *e);
    if (e == NULL) return false;
    h->e = e;
    h->cap = cap;
  }
  size_t i = h->n++;
  while (i > 0 && h->e[(i - 1) / 2].gain < x.gain) {
    h->e[i] = h->e[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h->e[i] = x;
  return true;
}

static fm_entry fm_pop(fm_heap *h) {
  fm_entry top = h->e[0], last = h->e[--h->n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= h->n) break;
    if (c + 1 < h->n && h->e[c + 1].gain > h->e[c].gain) c++;
    if (h->e[c].gain <= last.gain) break;
    h->e[i] = h->e[c];
    i = c;
  }
  if (h->n > 0) h->e[i] = last;
  return top;
}

/* Best legal, balance-respecting move of v and its gain (may be negative);
 * -1 when there is none. */
static int fm_best(const sg__solve *s, const int32_t *part, const sg__loads *l, int32_t v, double comp_limit,
                   bool keep_nonempty, double *conn, int *touched, double *gain) {
  const sg__pgraph *pg = s->pg;
  int from = part[v];
  if (keep_nonempty && l->count[from] <= 1) return -1;
  int nt = connections(pg, part, v, conn, touched);
  int lo, hi;
  stage_range(s, part, v, &lo, &hi);
  double internal = conn[from];
  int best = -1;
  for (int i = 0; i < nt; i++) {
    int t = touched[i];
    if (t == from || t < lo || t > hi) continue;
    if (!mem_fits(s, l, t, pg->mem[v]) || !comp_fits(s, l, t, pg->flops[v], comp_limit)) continue;
    double g = conn[t] - internal - migration(s, v, t) + migration(s, v, from);
    if (best < 0 || g > *gain) *gain = g, best = t;
  }
  clear(conn, touched, nt);
  return best;
}

void sg__refine_fm(const sg__solve *s, int32_t *part, sg__loads *l, double comp_limit, int passes) {
  const sg__pgraph *pg = s->pg;
  int32_t n = pg->n;
  int k = s->k;
  bool keep_nonempty = n >= k;
  double *conn = sg__calloc((size_t)k, sizeof *conn);
  int *touched = sg__malloc((size_t)k * sizeof *touched);
  uint32_t *stamp = sg__calloc((size_t)n + 1, sizeof *stamp);
  uint8_t *locked = sg__calloc((size_t)n + 1, 1);
  int32_t *log_v = sg__malloc(((size_t)n + 1) * sizeof *log_v);
  int32_t *log_from = sg__malloc(((size_t)n + 1) * sizeof *log_from);
  fm_heap h = {0};
  if (!conn || !touched || !stamp || !locked || !log_v || !log_from) goto out; /* an optimisation: skip it */
  /* A pass gives up after this many moves without a new best. */
  int32_t patience = n < 100 ? n : 100 + n / 20;
  for (int pass = 0; pass < passes; pass++) {
    h.n = 0;
    memset(locked, 0, (size_t)n);
    bool ok = true;
    for (int32_t v = 0; v < n && ok; v++) {
      if (pg->xadj[v] == pg->xadj[v + 1]) continue;
      double g;
      int t = fm_best(s, part, l, v, comp_limit, keep_nonempty, conn, touched, &g);
      if (t >= 0) ok = fm_push(&h, (fm_entry){g, v, t, ++stamp[v]});
    }
    int32_t moves = 0, best_len = 0, since = 0;
    double cum = 0.0, best_cum = 0.0;
    while (ok && h.n > 0 && since < patience) {
      fm_entry e = fm_pop(&h);
      if (locked[e.v] || e.stamp != stamp[e.v]) continue;
      double g;
      int t = fm_best(s, part, l, e.v, comp_limit, keep_nonempty, conn, touched, &g);
      if (t < 0) continue;
      if (t != e.to || g < e.gain - 1e-9 * (1.0 + fabs(e.gain))) {
        ok = fm_push(&h, (fm_entry){g, e.v, t, ++stamp[e.v]});
        continue;
      }
      int from = part[e.v];
      sg__loads_move(l, pg, e.v, from, t);
      part[e.v] = t;
      locked[e.v] = 1;
      log_v[moves] = e.v;
      log_from[moves++] = from;
      cum += g;
      if (cum > best_cum + 1e-9 * (1.0 + fabs(best_cum))) {
        best_cum = cum;
        best_len = moves;
        since = 0;
      } else {
        since++;
      }
      for (int32_t i = pg->xadj[e.v]; i < pg->xadj[e.v + 1] && ok; i++) {
        int32_t u = pg->adj[i];
        if (locked[u]) continue;
        int tu = fm_best(s, part, l, u, comp_limit, keep_nonempty, conn, touched, &g);
        ++stamp[u];
        if (tu >= 0) ok = fm_push(&h, (fm_entry){g, u, tu, stamp[u]});
      }
    }
    /* Undo the moves after the best prefix. */
    while (moves > best_len) {
      moves--;
      int32_t v = log_v[moves];
      sg__loads_move(l, pg, v, part[v], log_from[moves]);
      part[v] = log_from[moves];
    }
    if (!ok || best_len == 0) break;
  }
out:
  sg__free(conn);
  sg__free(touched);
  sg__free(stamp);
  sg__free(locked);
  sg__free(log_v);
  sg__free(log_from);
  sg__free(h.e);
}

void sg__refine_cut_balanced(const sg__solve *s, int32_t *part, sg__loads *l, double comp_limit, int passes) {
  double r = sg__max_ratio(l->mem, s->mem_target, s->k);
  double *bound = sg__malloc((size_t)s->k * sizeof *bound);
  if (bound == NULL) return; /* an optimisation: skip it */
  for (int p = 0; p < s->k; p++) {
    double b = s->mem_target[p] * r;
    bound[p] = b < s->mem_bound[p] ? b : s->mem_bound[p];
  }
  sg__solve t = *s;
  t.mem_bound = bound;
  sg__refine_cut(&t, part, l, comp_limit, passes);
  sg__refine_fm(&t, part, l, comp_limit, passes);
  sg__free(bound);
}

/* How far part p is over its limits: > 1 is a violation. */
static double overload(const sg__solve *s, const sg__loads *l, int p, double comp_limit, bool with_compute,
                       bool *is_mem) {
  double vm = s->mem_bound[p] > 0.0 ? l->mem[p] / s->mem_bound[p] : (l->mem[p] > 0.0 ? INFINITY : 0.0);
  double vc = 0.0;
  if (with_compute && s->balance_compute && isfinite(comp_limit)) {
    double b = comp_limit * s->comp_target[p];
    vc = b > 0.0 ? l->comp[p] / b : (l->comp[p] > 0.0 ? INFINITY : 0.0);
  }
  *is_mem = vm >= vc;
  return vm >= vc ? vm : vc;
}

typedef struct candidate {
  int32_t v;
  int to;
  double gain;
} candidate;

static int by_gain(const void *pa, const void *pb) {
  const candidate *a = pa, *b = pb;
  if (a->gain != b->gain) return a->gain > b->gain ? -1 : 1;
  return (a->v > b->v) - (a->v < b->v);
}

/* Whether moving v from p to t relieves p without making t worse off than
 * p was, for the resource at fault. */
static bool relieves(const sg__solve *s, const sg__loads *l, int32_t v, int p, int t, bool is_mem,
                     double comp_limit, bool with_compute) {
  const sg__pgraph *pg = s->pg;
  if (l->mem[t] + pg->mem[v] > s->cap[t]) return false; /* capacity is hard */
  if (is_mem) {
    if (pg->mem[v] <= 0.0) return false;
    /* Over capacity: anywhere it fits helps (the excess over capacity
     * shrinks), whatever the tolerance says. */
    if (l->mem[p] > s->cap[p]) return true;
    double before = l->mem[p] / s->mem_bound[p];
    double after = s->mem_bound[t] > 0.0 ? (l->mem[t] + pg->mem[v]) / s->mem_bound[t] : INFINITY;
    if (!(after < before * (1.0 - SLACK))) return false;
    return !with_compute || comp_fits(s, l, t, pg->flops[v], comp_limit);
  }
  if (pg->flops[v] <= 0.0) return false;
  double bp = comp_limit * s->comp_target[p], bt = comp_limit * s->comp_target[t];
  double before = bp > 0.0 ? l->comp[p] / bp : INFINITY;
  double after = bt > 0.0 ? (l->comp[t] + pg->flops[v]) / bt : INFINITY;
  return after < before * (1.0 - SLACK) && mem_fits(s, l, t, pg->mem[v]);
}

bool sg__rebalance(const sg__solve *s, int32_t *part, sg__loads *l, double comp_limit, bool with_compute) {
  const sg__pgraph *pg = s->pg;
  int k = s->k;
  bool keep_nonempty = pg->n >= k;
  double *conn = sg__calloc((size_t)k, sizeof *conn);
  int *touched = sg__malloc((size_t)k * sizeof *touched);
  candidate *cand = sg__malloc(((size_t)pg->n + 1) * sizeof *cand);
  bool *stuck = sg__calloc((size_t)k, sizeof *stuck);
  bool ok = false;
  if (conn == NULL || touched == NULL || cand == NULL || stuck == NULL) goto out;
  /* Each round moves at least one vertex; the cap only guards against
   * cycling between heterogeneous parts. A part that cannot shed anything
   * is skipped until some other move changes the picture. */
  for (int64_t round = 0; round < 4 * (int64_t)pg->n + 64; round++) {
    int worst = -1;
    bool worst_mem = true;
    double worst_v = 1.0 + SLACK;
    for (int p = 0; p < k; p++) {
      bool is_mem;
      double o = overload(s, l, p, comp_limit, with_compute, &is_mem);
      /* Over capacity comes before over the tolerance. */
      if (l->mem[p] > s->cap[p]) o += 1e6, is_mem = true;
      if (!stuck[p] && o > worst_v) worst_v = o, worst = p, worst_mem = is_mem;
    }
    if (worst < 0) break;
    /* Every vertex of the worst part with the best place it may go. */
    int32_t nc = 0;
    for (int32_t v = 0; v < pg->n; v++) {
      if (part[v] != worst) continue;
      int lo, hi;
      stage_range(s, part, v, &lo, &hi);
      int nt = connections(pg, part, v, conn, touched);
      double internal = conn[worst];
      candidate c = {v, -1, -INFINITY};
      /* Neighbouring parts first (cheaper), then any legal part. */
      for (int t = lo; t <= hi; t++) {
        if (t == worst || !relieves(s, l, v, worst, t, worst_mem, comp_limit, with_compute)) continue;
        double gain = conn[t] - internal - migration(s, v, t) + migration(s, v, worst);
        if (gain > c.gain) c.gain = gain, c.to = t;
      }
      clear(conn, touched, nt);
      if (c.to >= 0) cand[nc++] = c;
    }
    if (nc == 0) {
      stuck[worst] = true;
      continue;
    }
    qsort(cand, (size_t)nc, sizeof *cand, by_gain);
    int32_t moved = 0;
    for (int32_t i = 0; i < nc; i++) {
      int32_t v = cand[i].v;
      if (keep_nonempty && l->count[worst] <= 1) break;
      bool is_mem;
      if (overload(s, l, worst, comp_limit, with_compute, &is_mem) <= 1.0 + SLACK || is_mem != worst_mem)
        break;
      int lo, hi;
      stage_range(s, part, v, &lo, &hi);
      int t = cand[i].to;
      if (t < lo || t > hi || !relieves(s, l, v, worst, t, worst_mem, comp_limit, with_compute)) continue;
      sg__loads_move(l, pg, v, worst, t);
      part[v] = t;
      moved++;
    }
    if (moved == 0) stuck[worst] = true;
    else memset(stuck, 0, (size_t)k * sizeof *stuck);
  }
  ok = true;
  for (int p = 0; p < k; p++)
    if (l->mem[p] > s->mem_bound[p] * (1.0 + SLACK) + 1e-9) ok = false;
out:
  sg__free(conn);
  sg__free(touched);
  sg__free(cand);
  sg__free(stuck);
  return ok;
}

void sg__refine_score(const sg__solve *s, int32_t *part, sg__loads *l, double comp_limit) {
  const sg__pgraph *pg = s->pg;
  int k = s->k;
  bool keep_nonempty = pg->n >= k;
  double *conn = sg__calloc((size_t)k, sizeof *conn);
  int *touched = sg__malloc((size_t)k * sizeof *touched);
  if (conn == NULL || touched == NULL) goto out;
  for (int pass = 0; pass < 2; pass++) {
    int32_t moved = 0;
    for (int32_t v = 0; v < pg->n; v++) {
      int from = part[v];
      if (keep_nonempty && l->count[from] <= 1) continue;
      int nt = connections(pg, part, v, conn, touched);
      int lo, hi;
      stage_range(s, part, v, &lo, &hi);
      double here = sg__placement_score(s, part, v, from), best_score = here + 1e-9;
      int best = -1;
      for (int i = 0; i < nt; i++) {
        int t = touched[i];
        if (t == from || t < lo || t > hi) continue;
        if (!mem_fits(s, l, t, pg->mem[v]) || !comp_fits(s, l, t, pg->flops[v], comp_limit)) continue;
        double sc = sg__placement_score(s, part, v, t);
        if (sc > best_score) best_score = sc, best = t;
      }
      clear(conn, touched, nt);
      if (best >= 0) {
        sg__loads_move(l, pg, v, from, best);
        part[v] = best;
        moved++;
      }
    }
    if (moved == 0) break;
  }
out:
  sg__free(conn);
  sg__free(touched);
}
