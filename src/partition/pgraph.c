/* The weighted graph the partitioning algorithms work on: vertex weights,
 * a symmetric merged adjacency (what METIS wants) and the forward DAG with
 * a topological order (what pipeline stages must respect). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "partition/partition_internal.h"

typedef struct arc {
  int32_t to;
  double w;
} arc;

static int arc_cmp(const void *pa, const void *pb) {
  const arc *a = pa, *b = pb;
  return (a->to > b->to) - (a->to < b->to);
}

/* CSR from `m` arcs src[i] -> arcs[i], merging parallel arcs (weights add).
 * xadj gets n + 1 entries. */
static sg_status build_csr(int32_t n, size_t m, const int32_t *src, const arc *arcs, int32_t **xadj_out,
                           int32_t **adj_out, double **w_out) {
  sg_status st = SG_ERR_NO_MEMORY;
  int32_t *xadj = sg__calloc((size_t)n + 1, sizeof *xadj);
  arc *tmp = sg__malloc((m ? m : 1) * sizeof *tmp);
  int32_t *fill = sg__calloc((size_t)n + 1, sizeof *fill);
  int32_t *adj = NULL;
  double *w = NULL;
  if (xadj == NULL || tmp == NULL || fill == NULL) goto out;
  for (size_t i = 0; i < m; i++) xadj[src[i] + 1]++;
  for (int32_t v = 0; v < n; v++) xadj[v + 1] += xadj[v];
  for (size_t i = 0; i < m; i++) tmp[xadj[src[i]] + fill[src[i]]++] = arcs[i];
  /* Sort and merge each vertex's arcs in place; then compact. */
  int32_t out_n = 0;
  for (int32_t v = 0; v < n; v++) {
    int32_t b = xadj[v], e = xadj[v + 1];
    qsort(tmp + b, (size_t)(e - b), sizeof *tmp, arc_cmp);
    int32_t start = out_n;
    for (int32_t i = b; i < e; i++) {
      if (out_n > start && tmp[out_n - 1].to == tmp[i].to) tmp[out_n - 1].w += tmp[i].w;
      else tmp[out_n++] = tmp[i];
    }
    xadj[v] = start;
  }
  xadj[n] = out_n;
  adj = sg__malloc((size_t)(out_n ? out_n : 1) * sizeof *adj);
  w = sg__malloc((size_t)(out_n ? out_n : 1) * sizeof *w);
  if (adj == NULL || w == NULL) goto out;
  for (int32_t i = 0; i < out_n; i++) {
    adj[i] = tmp[i].to;
    w[i] = tmp[i].w;
  }
  *xadj_out = xadj;
  *adj_out = adj;
  if (w_out) *w_out = w;
  else sg__free(w);
  xadj = NULL;
  adj = NULL;
  w = NULL;
  st = SG_OK;
out:
  sg__free(xadj);
  sg__free(tmp);
  sg__free(fill);
  sg__free(adj);
  sg__free(w);
  return st;
}

/* Binary min-heap of vertex ids for Kahn's algorithm. */
static void heap_push(int32_t *h, int32_t *n, int32_t v) {
  int32_t i = (*n)++;
  while (i > 0) {
    int32_t p = (i - 1) / 2;
    if (h[p] <= v) break;
    h[i] = h[p];
    i = p;
  }
  h[i] = v;
}

static int32_t heap_pop(int32_t *h, int32_t *n) {
  int32_t top = h[0], v = h[--(*n)], i = 0;
  for (;;) {
    int32_t c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && h[c + 1] < h[c]) c++;
    if (h[c] >= v) break;
    h[i] = h[c];
    i = c;
  }
  if (*n > 0) h[i] = v;
  return top;
}

static sg_status topo_sort(sg__pgraph *pg) {
  int32_t n = pg->n;
  int32_t *indeg = sg__calloc((size_t)n + 1, sizeof *indeg);
  int32_t *heap = sg__malloc(((size_t)n + 1) * sizeof *heap);
  pg->topo = sg__malloc(((size_t)n + 1) * sizeof *pg->topo);
  pg->level = sg__calloc((size_t)n + 1, sizeof *pg->level);
  sg_status st = SG_ERR_NO_MEMORY;
  if (indeg == NULL || heap == NULL || pg->topo == NULL || pg->level == NULL) goto out;
  for (int32_t v = 0; v < n; v++) indeg[v] = pg->pxadj[v + 1] - pg->pxadj[v];
  int32_t hn = 0, done = 0;
  for (int32_t v = 0; v < n; v++)
    if (indeg[v] == 0) heap_push(heap, &hn, v);
  while (hn > 0) {
    int32_t v = heap_pop(heap, &hn);
    pg->topo[done++] = v;
    for (int32_t i = pg->sxadj[v]; i < pg->sxadj[v + 1]; i++) {
      int32_t u = pg->succ[i];
      if (pg->level[u] < pg->level[v] + 1) pg->level[u] = pg->level[v] + 1;
      if (--indeg[u] == 0) heap_push(heap, &hn, u);
    }
  }
  st = done == n ? SG_OK : sg__error(SG_ERR_CYCLE, "partition graph: the forward edges form a cycle");
out:
  sg__free(indeg);
  sg__free(heap);
  return st;
}

static sg_status copy_weights(double **dst, const double *src, int32_t n, const char *what, double *total) {
  *dst = sg__calloc((size_t)n + 1, sizeof **dst);
  if (*dst == NULL) return SG_ERR_NO_MEMORY;
  double sum = 0.0;
  for (int32_t v = 0; src && v < n; v++) {
    if (!isfinite(src[v]) || src[v] < 0.0)
      return sg__error(SG_ERR_RANGE, "partition graph: %s of vertex %d is %g (must be finite and >= 0)", what,
                       (int)v, src[v]);
    (*dst)[v] = src[v];
    sum += src[v];
  }
  if (total) *total = sum;
  return SG_OK;
}

sg_status sg__pgraph_init(sg__pgraph *pg, int32_t n, const double *mem, const double *flops,
                          const double *traffic, const double *persist, size_t n_edges,
                          const sg__pedge *edges) {
  memset(pg, 0, sizeof *pg);
  if (n < 0) return sg__error(SG_ERR_RANGE, "partition graph: %d vertices", (int)n);
  pg->n = n;
  sg_status st;
  if ((st = copy_weights(&pg->mem, mem, n, "memory", &pg->total_mem)) != SG_OK ||
      (st = copy_weights(&pg->flops, flops, n, "compute", &pg->total_flops)) != SG_OK ||
      (st = copy_weights(&pg->traffic, traffic, n, "traffic", NULL)) != SG_OK ||
      (st = copy_weights(&pg->persist, persist, n, "state", NULL)) != SG_OK)
    goto fail;
  size_t m = 0, mf = 0;
  for (size_t i = 0; i < n_edges; i++) {
    const sg__pedge *e = &edges[i];
    if (e->u < 0 || e->u >= n || e->v < 0 || e->v >= n) {
      st = sg__error(SG_ERR_RANGE, "partition graph: edge %zu joins %d and %d of %d vertices", i, (int)e->u,
                     (int)e->v, (int)n);
      goto fail;
    }
    if (!isfinite(e->w) || e->w < 0.0) {
      st = sg__error(SG_ERR_RANGE, "partition graph: edge %zu has weight %g", i, e->w);
      goto fail;
    }
    if (e->u == e->v) continue;
    m += 2;
    if (e->forward) mf++;
  }
  st = SG_ERR_NO_MEMORY;
  int32_t *src = sg__malloc((m + mf * 2 + 1) * sizeof *src);
  arc *arcs = sg__malloc((m + mf * 2 + 1) * sizeof *arcs);
  if (src == NULL || arcs == NULL) {
    sg__free(src);
    sg__free(arcs);
    goto fail;
  }
  size_t k = 0;
  for (size_t i = 0; i < n_edges; i++) {
    const sg__pedge *e = &edges[i];
    if (e->u == e->v) continue;
    src[k] = e->u, arcs[k++] = (arc){e->v, e->w};
    src[k] = e->v, arcs[k++] = (arc){e->u, e->w};
    pg->total_w += e->w;
  }
  st = build_csr(n, m, src, arcs, &pg->xadj, &pg->adj, &pg->adjw);
  /* Forward successors, then predecessors (weights unused). */
  size_t kf = 0;
  for (size_t i = 0; st == SG_OK && i < n_edges; i++)
    if (edges[i].forward && edges[i].u != edges[i].v)
      src[kf] = edges[i].u, arcs[kf++] = (arc){edges[i].v, 0.0};
  if (st == SG_OK) st = build_csr(n, kf, src, arcs, &pg->sxadj, &pg->succ, NULL);
  kf = 0;
  for (size_t i = 0; st == SG_OK && i < n_edges; i++)
    if (edges[i].forward && edges[i].u != edges[i].v)
      src[kf] = edges[i].v, arcs[kf++] = (arc){edges[i].u, 0.0};
  if (st == SG_OK) st = build_csr(n, kf, src, arcs, &pg->pxadj, &pg->pred, NULL);
  sg__free(src);
  sg__free(arcs);
  if (st == SG_ERR_NO_MEMORY) st = sg__error(st, "partition graph: out of memory");
  if (st == SG_OK) st = topo_sort(pg);
  if (st == SG_ERR_NO_MEMORY) st = sg__error(st, "partition graph: out of memory");
  if (st == SG_OK) return SG_OK;
fail:
  if (st == SG_ERR_NO_MEMORY) sg__error(st, "partition graph: out of memory");
  sg__pgraph_free(pg);
  return st;
}

void sg__pgraph_free(sg__pgraph *pg) {
  if (pg == NULL) return;
  sg__free(pg->mem);
  sg__free(pg->flops);
  sg__free(pg->traffic);
  sg__free(pg->persist);
  sg__free(pg->xadj);
  sg__free(pg->adj);
  sg__free(pg->adjw);
  sg__free(pg->sxadj);
  sg__free(pg->succ);
  sg__free(pg->pxadj);
  sg__free(pg->pred);
  sg__free(pg->topo);
  sg__free(pg->level);
  sg__free(pg->net_x);
  sg__free(pg->net_pin);
  sg__free(pg->net_w);
  memset(pg, 0, sizeof *pg);
}

sg_status sg__pgraph_set_nets(sg__pgraph *pg, int32_t n_nets, const int32_t *net_x, const int32_t *net_pin,
                              const double *net_w) {
  int32_t pins = n_nets > 0 ? net_x[n_nets] : 0;
  for (int32_t i = 0; i < n_nets; i++) {
    if (!(net_w[i] >= 0.0) || !isfinite(net_w[i]) || net_x[i + 1] <= net_x[i])
      return sg__error(SG_ERR_RANGE, "partition graph: net %d has weight %g and %d pins", (int)i, net_w[i],
                       (int)(net_x[i + 1] - net_x[i]));
  }
  for (int32_t j = 0; j < pins; j++)
    if (net_pin[j] < 0 || net_pin[j] >= pg->n)
      return sg__error(SG_ERR_RANGE, "partition graph: net pin %d is vertex %d of %d", (int)j,
                       (int)net_pin[j], (int)pg->n);
  int32_t *x = sg__malloc(((size_t)n_nets + 1) * sizeof *x);
  int32_t *pin = sg__malloc(((size_t)pins + 1) * sizeof *pin);
  double *w = sg__malloc(((size_t)n_nets + 1) * sizeof *w);
  if (x == NULL || pin == NULL || w == NULL) {
    sg__free(x);
    sg__free(pin);
    sg__free(w);
    return sg__error(SG_ERR_NO_MEMORY, "partition graph: out of memory");
  }
  x[0] = 0;
  if (n_nets > 0) {
    memcpy(x, net_x, ((size_t)n_nets + 1) * sizeof *x);
    memcpy(pin, net_pin, (size_t)pins * sizeof *pin);
    memcpy(w, net_w, (size_t)n_nets * sizeof *w);
  }
  sg__free(pg->net_x);
  sg__free(pg->net_pin);
  sg__free(pg->net_w);
  pg->n_nets = n_nets;
  pg->net_x = x;
  pg->net_pin = pin;
  pg->net_w = w;
  return SG_OK;
}

double sg__pgraph_cut_bytes(const sg__pgraph *pg, const int32_t *part) {
  if (pg->n_nets == 0) return sg__pgraph_cut(pg, part);
  double cut = 0.0;
  for (int32_t i = 0; i < pg->n_nets; i++) {
    int32_t b = pg->net_x[i], e = pg->net_x[i + 1];
    int src = part[pg->net_pin[b]];
    for (int32_t j = b + 1; j < e; j++) {
      int p = part[pg->net_pin[j]];
      if (p == src) continue;
      /* Counted once per part: only at its first reader. */
      bool seen = false;
      for (int32_t q = b + 1; q < j && !seen; q++) seen = part[pg->net_pin[q]] == p;
      if (!seen) cut += pg->net_w[i];
    }
  }
  return cut;
}

double sg__pgraph_cut(const sg__pgraph *pg, const int32_t *part) {
  double cut = 0.0;
  for (int32_t v = 0; v < pg->n; v++)
    for (int32_t i = pg->xadj[v]; i < pg->xadj[v + 1]; i++)
      if (pg->adj[i] > v && part[pg->adj[i]] != part[v]) cut += pg->adjw[i];
  return cut;
}

bool sg__pipeline_monotone(const sg__pgraph *pg, const int32_t *part) {
  for (int32_t v = 0; v < pg->n; v++)
    for (int32_t i = pg->sxadj[v]; i < pg->sxadj[v + 1]; i++)
      if (part[pg->succ[i]] < part[v]) return false;
  return true;
}

bool sg__quotient_acyclic(const sg__pgraph *pg, const int32_t *part, int k, int *order) {
  /* K x K adjacency as a bit matrix is small enough (K <= 1024: 128 KiB). */
  size_t words = ((size_t)k + 63) / 64;
  uint64_t *bits = sg__calloc((size_t)k * words + 1, sizeof *bits);
  int32_t *indeg = sg__calloc((size_t)k + 1, sizeof *indeg);
  int32_t *queue = sg__malloc(((size_t)k + 1) * sizeof *queue);
  bool ok = false;
  if (bits == NULL || indeg == NULL || queue == NULL) {
    /* Without memory, fall back to the stricter monotone test. */
    ok = sg__pipeline_monotone(pg, part);
    if (ok && order)
      for (int p = 0; p < k; p++) order[p] = p;
    goto out;
  }
  for (int32_t v = 0; v < pg->n; v++)
    for (int32_t i = pg->sxadj[v]; i < pg->sxadj[v + 1]; i++) {
      int a = part[v], b = part[pg->succ[i]];
      if (a == b) continue;
      uint64_t *w = &bits[(size_t)a * words + (size_t)b / 64];
      uint64_t bit = (uint64_t)1 << (b % 64);
      if (!(*w & bit)) {
        *w |= bit;
        indeg[b]++;
      }
    }
  /* Kahn over parts, smallest part first: the identity when monotone. */
  int32_t head = 0, tail = 0;
  for (int p = 0; p < k; p++)
    if (indeg[p] == 0) queue[tail++] = p;
  while (head < tail) {
    /* Take the smallest ready part for a canonical order. */
    int32_t best = head;
    for (int32_t i = head + 1; i < tail; i++)
      if (queue[i] < queue[best]) best = i;
    int32_t a = queue[best];
    queue[best] = queue[head];
    queue[head++] = a;
    if (order) order[head - 1] = a;
    for (int b = 0; b < k; b++)
      if (bits[(size_t)a * words + (size_t)b / 64] >> (b % 64) & 1u)
        if (--indeg[b] == 0) queue[tail++] = b;
  }
  ok = head == k;
out:
  sg__free(bits);
  sg__free(indeg);
  sg__free(queue);
  return ok;
}

double sg__max_ratio(const double *load, const double *target, int k) {
  double worst = 0.0;
  for (int p = 0; p < k; p++) {
    double r = target[p] > 0.0 ? load[p] / target[p] : (load[p] > 0.0 ? INFINITY : 1.0);
    if (r > worst) worst = r;
  }
  return worst;
}
