/* Pipeline mode (SPEC P4): K stages whose quotient graph over the forward
 * edges is acyclic, numbered in topological order.
 *
 * Any topological order of the vertices cut into K contiguous segments gives
 * such stages. For each of a few orders -- the graph's own (builder) order,
 * a depth-first order that keeps branches together, and the order METIS's
 * k-way parts suggest (parts ranked by their mean position, a topological
 * order that keeps each part contiguous where the edges allow) -- a dynamic
 * program picks the K - 1 cut positions that minimise the bytes crossing
 * them subject to every stage's memory (and, as tightly as it can, compute)
 * bound. Acyclicity-preserving boundary moves then refine the best stages;
 * they never move a vertex before its last forward predecessor's stage or
 * after its first successor's. */
#include <math.h>
#include <string.h>

#include "partition/partition_internal.h"

#define INF_COST INFINITY

typedef struct dp_scratch {
  int32_t n;
  int k;
  double *mem_pre, *comp_pre; /* prefix sums along the order, n + 1 */
  double *cross;              /* cross[i]: weight of edges spanning positions i-1 | i */
  double *prev, *cur;         /* n + 1 */
  int32_t *arg;               /* k x (n + 1) */
  int32_t *deque;             /* n + 1 */
  int32_t *pos;               /* vertex -> position */
  bool allow_empty;           /* stages may be empty (when nothing else fits) */
} dp_scratch;

static void scratch_free(dp_scratch *d) {
  sg__free(d->mem_pre);
  sg__free(d->comp_pre);
  sg__free(d->cross);
  sg__free(d->prev);
  sg__free(d->cur);
  sg__free(d->arg);
  sg__free(d->deque);
  sg__free(d->pos);
}

static sg_status scratch_init(dp_scratch *d, int32_t n, int k) {
  memset(d, 0, sizeof *d);
  d->n = n;
  d->k = k;
  size_t n1 = (size_t)n + 1;
  d->mem_pre = sg__malloc(n1 * sizeof(double));
  d->comp_pre = sg__malloc(n1 * sizeof(double));
  d->cross = sg__malloc((n1 + 1) * sizeof(double));
  d->prev = sg__malloc(n1 * sizeof(double));
  d->cur = sg__malloc(n1 * sizeof(double));
  d->arg = sg__malloc((size_t)k * n1 * sizeof(int32_t));
  d->deque = sg__malloc(n1 * sizeof(int32_t));
  d->pos = sg__malloc(n1 * sizeof(int32_t));
  if (!d->mem_pre || !d->comp_pre || !d->cross || !d->prev || !d->cur || !d->arg || !d->deque || !d->pos) {
    scratch_free(d);
    return sg__error(SG_ERR_NO_MEMORY, "partition: out of memory for pipeline stages");
  }
  return SG_OK;
}

/* Prefix sums and crossing weights of one order. */
static void prepare(const sg__pgraph *pg, const int32_t *order, dp_scratch *d) {
  int32_t n = pg->n;
  d->mem_pre[0] = d->comp_pre[0] = 0.0;
  for (int32_t i = 0; i < n; i++) {
    d->pos[order[i]] = i;
    d->mem_pre[i + 1] = d->mem_pre[i] + pg->mem[order[i]];
    d->comp_pre[i + 1] = d->comp_pre[i] + pg->flops[order[i]];
  }
  for (int32_t i = 0; i <= n + 1; i++) d->cross[i] = 0.0;
  for (int32_t v = 0; v < n; v++)
    for (int32_t e = pg->xadj[v]; e < pg->xadj[v + 1]; e++) {
      int32_t u = pg->adj[e];
      if (u < v) continue;
      int32_t a = d->pos[v], b = d->pos[u];
      if (a > b) {
        int32_t t = a;
        a = b;
        b = t;
      }
      d->cross[a + 1] += pg->adjw[e];
      d->cross[b + 1] -= pg->adjw[e];
    }
  for (int32_t i = 1; i <= n; i++) d->cross[i] += d->cross[i - 1];
}

/* Stage q's bounds at the given scales, with a little slack for sums taken
 * in a different order. */
static void stage_bounds(const sg__solve *s, int q, double mem_scale, double comp_scale, double *um,
                         double *uc) {
  double m = mem_scale * s->mem_target[q];
  if (m > s->cap[q]) m = s->cap[q];
  *um = m * (1.0 + 1e-12) + 1e-9;
  *uc = isfinite(comp_scale) ? comp_scale * s->comp_target[q] * (1.0 + 1e-12) + 1e-9 : INFINITY;
}

/* Whether any segmentation meets the bounds: filling every stage as far as
 * it goes (leaving one vertex for each later stage when stages must not be
 * empty) is optimal for feasibility, in O(n + K). */
static bool feasible(const sg__solve *s, const dp_scratch *d, double mem_scale, double comp_scale) {
  int32_t n = d->n, i = 0;
  int k = d->k;
  bool nonempty = n >= k && !d->allow_empty;
  for (int q = 0; q < k; q++) {
    double um, uc;
    stage_bounds(s, q, mem_scale, comp_scale, &um, &uc);
    int32_t start = i, limit = nonempty ? n - (k - 1 - q) : n;
    while (i < limit && d->mem_pre[i + 1] - d->mem_pre[start] <= um &&
           d->comp_pre[i + 1] - d->comp_pre[start] <= uc)
      i++;
    if (nonempty && i == start) return false;
  }
  return i == n;
}

/* Minimum crossing weight of K contiguous segments with segment p's memory
 * at most min(mem_scale x target, capacity) and compute at most
 * comp_scale x target. Writes the K + 1 boundaries and returns the cost, or
 * INF_COST when no such segmentation exists. */
static double segment(const sg__solve *s, dp_scratch *d, double mem_scale, double comp_scale,
                      int32_t *bounds) {
  int32_t n = d->n;
  int k = d->k;
  bool nonempty = n >= k && !d->allow_empty;
  for (int32_t i = 0; i <= n; i++) d->prev[i] = INF_COST;
  d->prev[0] = 0.0;
  for (int p = 1; p <= k; p++) {
    int q = p - 1; /* the segment that ends at i */
    double um, uc;
    stage_bounds(s, q, mem_scale, comp_scale, &um, &uc);
    int32_t *arg = d->arg + (size_t)q * ((size_t)n + 1);
    int32_t head = 0, tail = 0, lo = 0, next = 0; /* next: first j not yet offered to the deque */
    for (int32_t i = 0; i <= n; i++) {
      d->cur[i] = INF_COST;
      arg[i] = -1;
      int32_t hi_j = nonempty ? i - 1 : i;
      /* Offer j up to hi_j. */
      while (next <= hi_j) {
        if (d->prev[next] < INF_COST) {
          while (tail > head && d->prev[d->deque[tail - 1]] >= d->prev[next]) tail--;
          d->deque[tail++] = next;
        }
        next++;
      }
      while (lo < i && (d->mem_pre[i] - d->mem_pre[lo] > um || d->comp_pre[i] - d->comp_pre[lo] > uc)) lo++;
      while (tail > head && d->deque[head] < lo) head++;
      if (tail == head) continue;
      int32_t j = d->deque[head];
      if (d->mem_pre[i] - d->mem_pre[j] > um || d->comp_pre[i] - d->comp_pre[j] > uc) continue;
      if (p == k && i != n) continue;
      d->cur[i] = d->prev[j] + (p < k ? d->cross[i] : 0.0);
      arg[i] = j;
    }
    double *t = d->prev;
    d->prev = d->cur;
    d->cur = t;
  }
  double cost = d->prev[n];
  if (!(cost < INF_COST)) return INF_COST;
  if (bounds) {
    bounds[k] = n;
    int32_t i = n;
    for (int q = k - 1; q >= 0; q--) {
      i = d->arg[(size_t)q * ((size_t)n + 1) + i];
      bounds[q] = i;
    }
  }
  return cost;
}

/* Smallest memory (compute INFINITY) or compute (memory fixed at mem) scale
 * in [1, 2^k] that admits a segmentation, by bisection; INFINITY if none. */
static double min_scale(const sg__solve *s, dp_scratch *d, bool compute, double mem) {
  double hi = 1.0 + (compute ? s->eps : sg__mem_eps(s));
  int i = 0;
  while (i++ < 60 && !(compute ? feasible(s, d, mem, hi) : feasible(s, d, hi, INFINITY)))
    hi = 1.0 + 2.0 * (hi - 1.0);
  if (i > 60) return INFINITY;
  double lo = 1.0;
  for (int k = 0; k < 60 && hi - lo > 1e-5; k++) {
    double mid = 0.5 * (lo + hi);
    if (compute ? feasible(s, d, mem, mid) : feasible(s, d, mid, INFINITY)) hi = mid;
    else lo = mid;
  }
  return hi * (1.0 + 1e-9);
}

/* The compute bound that goes with memory scale m: as tight as that memory
 * bound allows, plus a quarter of the tolerance of room for the cut. */
static double compute_bound(const sg__solve *s, dp_scratch *d, double m) {
  if (!s->balance_compute) return INFINITY;
  double lam_c = min_scale(s, d, true, m);
  if (!isfinite(lam_c)) return INFINITY;
  double bc = lam_c * (1.0 + 0.25 * s->eps);
  return bc < 1.0 + s->eps ? 1.0 + s->eps : bc;
}

/* Bounds for this order. Memory: the tolerance, or the least that fits;
 * compute: as tight as memory allows (compute_bound). Then balance
 * polishing: the tightest memory bound between the least feasible and the
 * tolerance whose cut stays within SG__CUT_SLACK of the cut at the
 * tolerance. Returns false when nothing fits (capacity). */
static bool segment_best(const sg__solve *s, dp_scratch *d, int32_t *bounds) {
  double tol = 1.0 + sg__mem_eps(s);
  d->allow_empty = false;
  double lam_m = min_scale(s, d, false, 0.0);
  if (!isfinite(lam_m)) {
    /* Capacities may leave some stage nothing it can hold. */
    d->allow_empty = true;
    lam_m = min_scale(s, d, false, 0.0);
  }
  if (!isfinite(lam_m)) return false;
  double bm = lam_m > tol ? lam_m : tol, bc0 = compute_bound(s, d, bm);
  double best = segment(s, d, bm, bc0, bounds);
  if (best == INF_COST) return false;
  static const double steps[] = {0.0, 0.25, 0.5, 0.75};
  for (size_t i = 0; i < sizeof steps / sizeof steps[0] && lam_m < bm; i++) {
    double m = lam_m + steps[i] * (bm - lam_m), bc = s->compute_first ? bc0 : compute_bound(s, d, m);
    double c = segment(s, d, m, bc, NULL);
    if (c <= best * (1.0 + SG__CUT_SLACK) + 1e-9) {
      segment(s, d, m, bc, bounds);
      break;
    }
  }
  return true;
}

/* ---- orders --------------------------------------------------------------- */

/* Kahn's algorithm with a stack: the most recently freed vertex first, so a
 * branch is finished before the next starts. */
static sg_status dfs_order(const sg__pgraph *pg, int32_t *order) {
  int32_t n = pg->n;
  int32_t *indeg = sg__malloc(((size_t)n + 1) * sizeof *indeg);
  int32_t *stack = sg__malloc(((size_t)n + 1) * sizeof *stack);
  if (indeg == NULL || stack == NULL) {
    sg__free(indeg);
    sg__free(stack);
    return sg__error(SG_ERR_NO_MEMORY, "partition: out of memory");
  }
  int32_t sp = 0, done = 0;
  for (int32_t v = 0; v < n; v++) indeg[v] = pg->pxadj[v + 1] - pg->pxadj[v];
  for (int32_t v = n; v-- > 0;)
    if (indeg[v] == 0) stack[sp++] = v;
  while (sp > 0) {
    int32_t v = stack[--sp];
    order[done++] = v;
    for (int32_t i = pg->sxadj[v + 1]; i-- > pg->sxadj[v];)
      if (--indeg[pg->succ[i]] == 0) stack[sp++] = pg->succ[i];
  }
  sg__free(indeg);
  sg__free(stack);
  return SG_OK;
}

/* A topological order that follows METIS's parts: Kahn's algorithm taking
 * the ready vertex whose part ranks first (parts ranked by the mean position
 * of their vertices in the builder order), then the earliest. */
static sg_status metis_order(const sg__solve *s, int32_t *order) {
  const sg__pgraph *pg = s->pg;
  int32_t n = pg->n;
  int k = s->k;
  sg_status st;
  int32_t *part = sg__malloc(((size_t)n + 1) * sizeof *part);
  int32_t *pos = sg__malloc(((size_t)n + 1) * sizeof *pos);
  int32_t *indeg = sg__malloc(((size_t)n + 1) * sizeof *indeg);
  int64_t *heap = sg__malloc(((size_t)n + 1) * sizeof *heap);
  double *mean = sg__calloc((size_t)k, sizeof *mean);
  int32_t *cnt = sg__calloc((size_t)k, sizeof *cnt);
  int32_t *rank = sg__malloc((size_t)k * sizeof *rank);
  if (!part || !pos || !indeg || !heap || !mean || !cnt || !rank) {
    st = sg__error(SG_ERR_NO_MEMORY, "partition: out of memory");
    goto out;
  }
  st = sg__metis_partition(s, SG__METIS_KWAY, 1, 1.0, s->seed, part);
  if (st != SG_OK) goto out;
  for (int32_t i = 0; i < n; i++) pos[pg->topo[i]] = i;
  for (int32_t v = 0; v < n; v++) mean[part[v]] += pos[v], cnt[part[v]]++;
  for (int p = 0; p < k; p++) mean[p] = cnt[p] ? mean[p] / cnt[p] : INFINITY;
  /* rank by mean position (insertion sort: K is small) */
  int32_t *byrank = sg__malloc((size_t)k * sizeof *byrank);
  if (byrank == NULL) {
    st = sg__error(SG_ERR_NO_MEMORY, "partition: out of memory");
    goto out;
  }
  for (int p = 0; p < k; p++) {
    int q = p;
    while (q > 0 && mean[byrank[q - 1]] > mean[p]) byrank[q] = byrank[q - 1], q--;
    byrank[q] = p;
  }
  for (int r = 0; r < k; r++) rank[byrank[r]] = r;
  sg__free(byrank);
  /* Heap keyed by rank * (n + 1) + position. */
  int32_t hn = 0, done = 0;
  for (int32_t v = 0; v < n; v++) indeg[v] = pg->pxadj[v + 1] - pg->pxadj[v];
#define KEY(v) ((int64_t)rank[part[v]] * ((int64_t)n + 1) + pos[v])
  for (int32_t v = 0; v < n; v++) {
    if (indeg[v] != 0) continue;
    int64_t key = KEY(v);
    int32_t i = hn++;
    while (i > 0 && heap[(i - 1) / 2] > key) heap[i] = heap[(i - 1) / 2], i = (i - 1) / 2;
    heap[i] = key;
  }
  while (hn > 0) {
    int64_t top = heap[0], last = heap[--hn];
    int32_t i = 0;
    for (;;) {
      int32_t c = 2 * i + 1;
      if (c >= hn) break;
      if (c + 1 < hn && heap[c + 1] < heap[c]) c++;
      if (heap[c] >= last) break;
      heap[i] = heap[c];
      i = c;
    }
    if (hn > 0) heap[i] = last;
    int32_t v = pg->topo[top % ((int64_t)n + 1)];
    order[done++] = v;
    for (int32_t e = pg->sxadj[v]; e < pg->sxadj[v + 1]; e++) {
      int32_t u = pg->succ[e];
      if (--indeg[u] != 0) continue;
      int64_t key = KEY(u);
      int32_t j = hn++;
      while (j > 0 && heap[(j - 1) / 2] > key) heap[j] = heap[(j - 1) / 2], j = (j - 1) / 2;
      heap[j] = key;
    }
  }
#undef KEY
out:
  sg__free(part);
  sg__free(pos);
  sg__free(indeg);
  sg__free(heap);
  sg__free(mean);
  sg__free(cnt);
  sg__free(rank);
  return st;
}

/* Kahn's algorithm taking the ready vertex of least key. */
static sg_status keyed_order(const sg__pgraph *pg, const double *key, int32_t *order) {
  int32_t n = pg->n;
  int32_t *indeg = sg__malloc(((size_t)n + 1) * sizeof *indeg);
  int32_t *heap = sg__malloc(((size_t)n + 1) * sizeof *heap);
  if (indeg == NULL || heap == NULL) {
    sg__free(indeg);
    sg__free(heap);
    return sg__error(SG_ERR_NO_MEMORY, "partition: out of memory");
  }
  int32_t hn = 0, done = 0;
#define LESS(a, b) (key[a] < key[b] || (key[a] == key[b] && (a) < (b)))
  for (int32_t v = 0; v < n; v++) {
    indeg[v] = pg->pxadj[v + 1] - pg->pxadj[v];
    if (indeg[v] != 0) continue;
    int32_t i = hn++;
    while (i > 0 && LESS(v, heap[(i - 1) / 2])) heap[i] = heap[(i - 1) / 2], i = (i - 1) / 2;
    heap[i] = v;
  }
  while (hn > 0) {
    int32_t top = heap[0], last = heap[--hn], i = 0;
    for (;;) {
      int32_t c = 2 * i + 1;
      if (c >= hn) break;
      if (c + 1 < hn && LESS(heap[c + 1], heap[c])) c++;
      if (!LESS(heap[c], last)) break;
      heap[i] = heap[c];
      i = c;
    }
    if (hn > 0) heap[i] = last;
    order[done++] = top;
    for (int32_t e = pg->sxadj[top]; e < pg->sxadj[top + 1]; e++) {
      int32_t u = pg->succ[e];
      if (--indeg[u] != 0) continue;
      int32_t j = hn++;
      while (j > 0 && LESS(u, heap[(j - 1) / 2])) heap[j] = heap[(j - 1) / 2], j = (j - 1) / 2;
      heap[j] = u;
    }
  }
#undef LESS
  sg__free(indeg);
  sg__free(heap);
  return SG_OK;
}

/* The builder order with each vertex's position jittered by up to `width`
 * places: other interleavings of parallel branches, close to the original. */
static sg_status jittered_order(const sg__pgraph *pg, double width, uint64_t seed, int32_t *order) {
  double *key = sg__malloc(((size_t)pg->n + 1) * sizeof *key);
  if (key == NULL) return sg__error(SG_ERR_NO_MEMORY, "partition: out of memory");
  sg__rng r = {seed};
  for (int32_t i = 0; i < pg->n; i++) key[pg->topo[i]] = (double)i + width * sg__rng_unit(&r);
  sg_status st = keyed_order(pg, key, order);
  sg__free(key);
  return st;
}

/* ---- the search ----------------------------------------------------------- */

typedef struct outcome {
  bool mem_ok;
  double mem_ratio, comp_ratio;
  double cut;
} outcome;

/* Memory balance first; between results whose cuts are within
 * SG__CUT_SLACK of each other the better memory balance, then the better
 * compute balance; otherwise the smaller cut. Repartitioning (compute
 * first) puts compute within the tolerance ahead of everything else. */
static bool better(const sg__solve *s, const outcome *a, const outcome *b) {
  if (a->mem_ok != b->mem_ok) return a->mem_ok;
  /* Neither within the tolerance: the closer one. */
  if (!a->mem_ok && fabs(a->mem_ratio - b->mem_ratio) > 1e-3) return a->mem_ratio < b->mem_ratio;
  if (s->compute_first && s->balance_compute) {
    double tol = (1.0 + s->eps) * (1.0 + 1e-9);
    bool ca = a->comp_ratio <= tol, cb = b->comp_ratio <= tol;
    if (ca != cb) return ca;
    if (!ca && fabs(a->comp_ratio - b->comp_ratio) > 1e-3) return a->comp_ratio < b->comp_ratio;
  }
  double lo = a->cut < b->cut ? a->cut : b->cut, hi = a->cut < b->cut ? b->cut : a->cut;
  if (hi <= lo * (1.0 + SG__CUT_SLACK) + 1e-9) {
    if (fabs(a->mem_ratio - b->mem_ratio) > 1e-3) return a->mem_ratio < b->mem_ratio;
    if (fabs(a->comp_ratio - b->comp_ratio) > 1e-3) return a->comp_ratio < b->comp_ratio;
  }
  return a->cut < b->cut;
}

/* Segments one order, refines and measures it. */
static sg_status try_order(const sg__solve *s, dp_scratch *d, const int32_t *order, int32_t *bounds,
                           int32_t *part, outcome *o, bool *feasible) {
  const sg__pgraph *pg = s->pg;
  prepare(pg, order, d);
  *feasible = segment_best(s, d, bounds);
  if (!*feasible) return SG_OK;
  for (int q = 0; q < s->k; q++)
    for (int32_t i = bounds[q]; i < bounds[q + 1]; i++) part[order[i]] = q;
  sg__loads l;
  SG_CHECK(sg__loads_init(&l, s, part));
  double tol = 1.0 + s->eps;
  double comp_ratio = sg__max_ratio(l.comp, s->comp_target, s->k);
  double limit = s->balance_compute ? (comp_ratio > tol ? comp_ratio : tol) : INFINITY;
  bool mem_ok = true;
  for (int p = 0; p < s->k; p++)
    if (l.mem[p] > s->mem_bound[p] * (1.0 + 1e-9) + 1e-9) mem_ok = false;
  if (!mem_ok) mem_ok = sg__rebalance(s, part, &l, limit, false);
  sg__refine_cut_balanced(s, part, &l, limit, 8);
  o->mem_ok = mem_ok;
  o->mem_ratio = sg__max_ratio(l.mem, s->mem_target, s->k);
  o->comp_ratio = sg__max_ratio(l.comp, s->comp_target, s->k);
  o->cut = sg__pgraph_cut(pg, part);
  sg__loads_free(&l);
  return SG_OK;
}

sg_status sg__pipeline_solve(const sg__solve *s, int32_t *part) {
  const sg__pgraph *pg = s->pg;
  int32_t n = pg->n;
  int k = s->k;
  dp_scratch d;
  SG_CHECK(scratch_init(&d, n, k));
  sg_status st = SG_OK;
  int32_t *order = sg__malloc(((size_t)n + 1) * sizeof *order);
  int32_t *cand = sg__malloc(((size_t)n + 1) * sizeof *cand);
  int32_t *bounds = sg__malloc(((size_t)k + 1) * sizeof *bounds);
  if (!order || !cand || !bounds) {
    st = sg__error(SG_ERR_NO_MEMORY, "partition: out of memory for pipeline stages");
    goto out;
  }
  outcome best = {0};
  bool have = false;
  /* The builder order, a depth-first one, METIS's, and jittered builder
   * orders (widths 2 to 32): many for small graphs, a few for large ones. */
  int jittered = n <= 250 ? 6 : n <= 1000 ? 3 : 2;
  for (int which = 0; which < 3 + jittered && st == SG_OK; which++) {
    if (which == 0) memcpy(order, pg->topo, (size_t)n * sizeof *order);
    else if (which == 1) st = dfs_order(pg, order);
    else if (which >= 3)
      st = jittered_order(pg, (double)(1 << ((which - 3) % 5 + 1)), s->seed * 31 + (uint64_t)which, order);
    else {
      st = metis_order(s, order);
      if (st != SG_OK && st != SG_ERR_NO_MEMORY) {
        SG_DEBUG("partition: METIS-guided order skipped: %s", sg_last_error());
        st = SG_OK;
        continue;
      }
    }
    if (st != SG_OK) break;
    outcome o;
    bool feasible;
    st = try_order(s, &d, order, bounds, cand, &o, &feasible);
    SG_DEBUG("pipeline order %d: feasible %d, memory %.4f, compute %.4f, cut %g", which, (int)feasible,
             feasible ? o.mem_ratio : 0.0, feasible ? o.comp_ratio : 0.0, feasible ? o.cut : 0.0);
    if (st != SG_OK || !feasible) continue;
    if (!have || better(s, &o, &best)) {
      best = o;
      memcpy(part, cand, (size_t)n * sizeof *part);
      have = true;
    }
  }
  if (st == SG_OK && !have) {
    double cap = 0.0;
    for (int p = 0; p < k; p++) cap += s->cap[p];
    st = sg__error(
        SG_ERR_RANGE,
        "partition: no %d pipeline stages in topological order fit the devices' memory: the graph needs "
        "%.0f bytes, the devices' capacity is %.0f bytes in all",
        k, pg->total_mem, cap);
  }
out:
  scratch_free(&d);
  sg__free(order);
  sg__free(cand);
  sg__free(bounds);
  return st;
}
