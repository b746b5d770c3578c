/* Exchange refinement (free mode): moves to any part and pair exchanges.
 *
 * The boundary passes of refine.c move one vertex at a time to a part it
 * already touches, within the bounds. With two constraints they stall once
 * every part sits near both its memory bound and its compute limit: taking
 * compute off a part means giving it memory back in the same step. In
 * ResNet's training graph, for one, the early layers hold most of the
 * activations and the late ones most of the FLOPs, so the parts of the
 * early layers balance compute by hosting a few late convolutions and
 * handing memory on. An exchange (v from part a to b, u from b to a) does
 * both at once; a move may go to any part, touched or not.
 *
 * sg__exchange_repair() brings an assignment within the bounds, taking at
 * every step the move or exchange that removes the most excess per byte of
 * cut it adds; sg__exchange_refine() takes the best cut-reducing move or
 * exchange that stays within them until none is left. Exchanges are pairs,
 * so a step is quadratic in the worst case: callers keep both to small
 * graphs (SG__EXCHANGE_MAX_VERTICES). */
#include <math.h>
#include <string.h>

#include "partition/partition_internal.h"

/* Relative slack on bounds, as in refine.c. */
#define SLACK 1e-9

struct sg__exchange {
  int32_t n;
  int k;
  double *conn;     /* n x k: edge weight from v to the vertices of part p */
  double *cost;     /* n x k: cut added by moving v to part p */
  double *over;     /* k: excess of each part */
  double *mem_lim;  /* k */
  double *comp_lim; /* k; INFINITY: compute not bounded */
  double *pair_w;   /* n: weight to the vertex whose neighbours are marked */
  int32_t *mark;    /* n: the vertex whose neighbours they are, or -1 */
  /* the call in progress */
  const sg__solve *s;
  const sg__pgraph *pg;
  int32_t *part;
  sg__loads *l;
  double mem_unit, comp_unit; /* for parts whose bound is 0 */
};

sg__exchange *sg__exchange_create(int32_t n, int k) {
  sg__exchange *x = sg__calloc(1, sizeof *x);
  if (x == NULL) return NULL;
  size_t nk = (size_t)n * (size_t)k + 1;
  x->n = n;
  x->k = k;
  x->conn = sg__malloc(nk * sizeof *x->conn);
  x->cost = sg__malloc(nk * sizeof *x->cost);
  x->over = sg__malloc((size_t)k * sizeof *x->over);
  x->mem_lim = sg__malloc((size_t)k * sizeof *x->mem_lim);
  x->comp_lim = sg__malloc((size_t)k * sizeof *x->comp_lim);
  x->pair_w = sg__malloc(((size_t)n + 1) * sizeof *x->pair_w);
  x->mark = sg__malloc(((size_t)n + 1) * sizeof *x->mark);
  if (!x->conn || !x->cost || !x->over || !x->mem_lim || !x->comp_lim || !x->pair_w || !x->mark) {
    sg__exchange_destroy(x);
    return NULL;
  }
  return x;
}

void sg__exchange_destroy(sg__exchange *x) {
  if (x == NULL) return;
  sg__free(x->conn);
  sg__free(x->cost);
  sg__free(x->over);
  sg__free(x->mem_lim);
  sg__free(x->comp_lim);
  sg__free(x->pair_w);
  sg__free(x->mark);
  sg__free(x);
}

static void begin(sg__exchange *x, const sg__solve *s, int32_t *part, sg__loads *l, double comp_limit) {
  const sg__pgraph *pg = s->pg;
  int k = x->k;
  SG_ASSERT(pg->n == x->n && s->k == k);
  x->s = s;
  x->pg = pg;
  x->part = part;
  x->l = l;
  bool bounded = s->balance_compute && isfinite(comp_limit);
  for (int p = 0; p < k; p++) {
    x->mem_lim[p] = s->mem_bound[p] * (1.0 + SLACK) + 1e-9;
    x->comp_lim[p] = bounded ? comp_limit * s->comp_target[p] * (1.0 + SLACK) + 1e-9 : INFINITY;
  }
  x->mem_unit = pg->total_mem > 0.0 ? pg->total_mem / k : 1.0;
  x->comp_unit = pg->total_flops > 0.0 ? pg->total_flops / k : 1.0;
  memset(x->conn, 0, (size_t)pg->n * (size_t)k * sizeof *x->conn);
  for (int32_t v = 0; v < pg->n; v++) {
    x->mark[v] = -1;
    for (int32_t i = pg->xadj[v]; i < pg->xadj[v + 1]; i++)
      x->conn[(size_t)v * (size_t)k + (size_t)part[pg->adj[i]]] += pg->adjw[i];
  }
}

static double conn(const sg__exchange *x, int32_t v, int p) {
  return x->conn[(size_t)v * (size_t)x->k + (size_t)p];
}

/* Migration cost of v sitting on part t rather than its home (P6). */
static double migration(const sg__solve *s, int32_t v, int t) {
  if (s->home == NULL || s->home[v] == t) return 0.0;
  return s->migration_cost * s->pg->persist[v];
}

/* Cut added by moving v to part t (negative: removed). */
static double move_cost(const sg__exchange *x, int32_t v, int t) {
  int a = x->part[v];
  return conn(x, v, a) - conn(x, v, t) + migration(x->s, v, t) - migration(x->s, v, a);
}

/* How far part p would be over its bounds with loads mem, comp: 0 within
 * them, else the relative excess of memory plus that of compute. */
static double excess(const sg__exchange *x, int p, double mem, double comp) {
  double e = 0.0;
  if (mem > x->mem_lim[p]) e += (mem - x->mem_lim[p]) / (x->mem_lim[p] > 0.0 ? x->mem_lim[p] : x->mem_unit);
  if (comp > x->comp_lim[p])
    e += (comp - x->comp_lim[p]) / (x->comp_lim[p] > 0.0 ? x->comp_lim[p] : x->comp_unit);
  return e;
}

static bool fits(const sg__exchange *x, int p, double mem, double comp) {
  return mem <= x->mem_lim[p] && comp <= x->comp_lim[p];
}

static void apply_move(sg__exchange *x, int32_t v, int t) {
  const sg__pgraph *pg = x->pg;
  int a = x->part[v];
  for (int32_t i = pg->xadj[v]; i < pg->xadj[v + 1]; i++) {
    double *c = &x->conn[(size_t)pg->adj[i] * (size_t)x->k];
    c[a] -= pg->adjw[i];
    c[t] += pg->adjw[i];
  }
  sg__loads_move(x->l, pg, v, a, t);
  x->part[v] = t;
}

/* Marks v's neighbours with their edge weight to v: an exchange of two
 * neighbours keeps the edge between them cut. */
static void mark_neighbours(sg__exchange *x, int32_t v) {
  const sg__pgraph *pg = x->pg;
  for (int32_t i = pg->xadj[v]; i < pg->xadj[v + 1]; i++) {
    x->mark[pg->adj[i]] = v;
    x->pair_w[pg->adj[i]] = pg->adjw[i];
  }
}

static double pair_weight(const sg__exchange *x, int32_t v, int32_t u) {
  return x->mark[u] == v ? x->pair_w[u] : 0.0;
}

typedef struct step {
  int32_t v, u; /* u < 0: a move of v to `to` */
  int to;
  double score;
} step;

static void apply_step(sg__exchange *x, const step *st) {
  if (st->u < 0) {
    apply_move(x, st->v, st->to);
    return;
  }
  int a = x->part[st->v], b = x->part[st->u];
  apply_move(x, st->v, b);
  apply_move(x, st->u, a);
}

bool sg__exchange_repair(sg__exchange *x, const sg__solve *s, int32_t *part, sg__loads *l, double comp_limit,
                         uint64_t *work) {
  const sg__pgraph *pg = s->pg;
  int32_t n = pg->n;
  int k = s->k;
  begin(x, s, part, l, comp_limit);
  bool keep_nonempty = n >= k;
  double *over = x->over, *cost = x->cost;
  /* Every step lowers the total excess; the cap only guards against
   * rounding. */
  for (int64_t round = 0; round < 4 * (int64_t)n + 64; round++) {
    double total = 0.0;
    for (int p = 0; p < k; p++) total += over[p] = excess(x, p, l->mem[p], l->comp[p]);
    if (total <= 0.0) return true;
    for (int32_t v = 0; v < n; v++)
      for (int t = 0; t < k; t++) cost[(size_t)v * (size_t)k + (size_t)t] = move_cost(x, v, t);
    /* Moves first: the best of them bounds the exchanges worth pricing. */
    step best = {-1, -1, -1, INFINITY};
    for (int32_t v = 0; v < n; v++) {
      int a = part[v];
      if (keep_nonempty && l->count[a] <= 1) continue;
      double mv = pg->mem[v], fv = pg->flops[v];
      double off = excess(x, a, l->mem[a] - mv, l->comp[a] - fv) - over[a];
      for (int t = 0; t < k; t++) {
        if (t == a) continue;
        double gain = -(off + excess(x, t, l->mem[t] + mv, l->comp[t] + fv) - over[t]);
        if (gain <= 1e-12) continue;
        double score = cost[(size_t)v * (size_t)k + (size_t)t] / gain;
        if (score < best.score) best = (step){v, -1, t, score};
      }
    }
    uint64_t pairs = 0;
    for (int32_t v = 0; v < n; v++) {
      int a = part[v];
      if (over[a] <= 0.0) continue; /* an exchange helps only if one side is over */
      double mv = pg->mem[v], fv = pg->flops[v];
      const double *cv = &cost[(size_t)v * (size_t)k];
      mark_neighbours(x, v);
      pairs += (uint64_t)n;
      for (int32_t u = 0; u < n; u++) {
        int b = part[u];
        if (b == a || (over[b] > 0.0 && u < v)) continue; /* each pair of two over parts once */
        double c = cv[b] + cost[(size_t)u * (size_t)k + (size_t)a] + 2.0 * pair_weight(x, v, u);
        /* The gain is at most over[a] + over[b]. */
        if (c > 0.0 && c >= best.score * (over[a] + over[b])) continue;
        double dm = pg->mem[u] - mv, df = pg->flops[u] - fv;
        double ea = excess(x, a, l->mem[a] + dm, l->comp[a] + df);
        if (ea >= over[a] && over[b] <= 0.0) continue;
        double gain = over[a] + over[b] - ea - excess(x, b, l->mem[b] - dm, l->comp[b] - df);
        if (gain <= 1e-12) continue;
        double score = c / gain;
        if (score < best.score) best = (step){v, u, -1, score};
      }
    }
    if (work) *work += pairs + (uint64_t)n * (uint64_t)k;
    if (best.v < 0) return false;
    apply_step(x, &best);
  }
  return false;
}

void sg__exchange_refine(sg__exchange *x, const sg__solve *s, int32_t *part, sg__loads *l, double comp_limit,
                         uint64_t *work) {
  const sg__pgraph *pg = s->pg;
  int32_t n = pg->n;
  int k = s->k;
  begin(x, s, part, l, comp_limit);
  bool keep_nonempty = n >= k;
  double eps = 1e-9 * (pg->total_w > 0.0 ? pg->total_w : 1.0);
  /* Every step lowers the cut; the cap only guards against rounding. */
  for (int64_t round = 0; round < 8 * (int64_t)n + 64; round++) {
    step best = {-1, -1, -1, -eps};
    uint64_t pairs = 0;
    for (int32_t v = 0; v < n; v++) {
      int a = part[v];
      double mv = pg->mem[v], fv = pg->flops[v];
      for (int t = 0; t < k; t++) {
        if (t == a || conn(x, v, t) <= 0.0) continue;
        double c = move_cost(x, v, t);
        if (c >= 0.0) continue;
        /* The move alone, when the bounds allow it. */
        if (c < best.score && !(keep_nonempty && l->count[a] <= 1) &&
            fits(x, t, l->mem[t] + mv, l->comp[t] + fv))
          best = (step){v, -1, t, c};
        /* Else an exchange with a vertex of t that pays for itself. */
        mark_neighbours(x, v);
        pairs += (uint64_t)n;
        for (int32_t u = 0; u < n; u++) {
          if (part[u] != t) continue;
          double sc = c + move_cost(x, u, a) + 2.0 * pair_weight(x, v, u);
          if (!(sc < best.score)) continue;
          double dm = pg->mem[u] - mv, df = pg->flops[u] - fv;
          if (fits(x, a, l->mem[a] + dm, l->comp[a] + df) && fits(x, t, l->mem[t] - dm, l->comp[t] - df))
            best = (step){v, u, -1, sc};
        }
      }
    }
    if (work) *work += pairs + (uint64_t)n * (uint64_t)k;
    if (best.v < 0) break;
    apply_step(x, &best);
  }
}
