/* The health graph (SPEC H2): ranks are vertices, dependencies (ring and
 * pipeline neighbours) are undirected edges, so that the scheduler can ask
 * "which of my dependencies are unhealthy" when deciding whether a step can
 * go on. Adjacency lists stay sorted by rank: queries answer in a fixed
 * order, and lookups are binary searches. */
#include <string.h>

#include "core/core.h"
#include "health/health_internal.h"

#define KNOWN_KINDS ((unsigned)(SG_EDGE_RING | SG_EDGE_PIPELINE))

/* Index of `rank` in p's adjacency, or where it would go (then *found = false). */
static uint32_t adj_find(const sg__health_peer *p, int rank, bool *found) {
  uint32_t lo = 0, hi = p->n_adj;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (p->adj[mid].rank < rank) lo = mid + 1;
    else hi = mid;
  }
  *found = lo < p->n_adj && p->adj[lo].rank == rank;
  return lo;
}

/* Room for `extra` more neighbours, so that the insertions after it cannot
 * fail halfway through a two-sided edge or a ring. */
static sg_status adj_reserve(sg__health_peer *p, uint32_t extra, const char *fn) {
  if (sg__grow((void **)&p->adj, &p->cap_adj, p->n_adj + extra, sizeof *p->adj) != SG_OK)
    return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", fn);
  return SG_OK;
}

/* Needs the room adj_reserve made when the neighbour is new. */
static void adj_insert(sg__health_peer *p, int rank, unsigned kinds) {
  bool found;
  uint32_t i = adj_find(p, rank, &found);
  if (found) {
    p->adj[i].kinds |= kinds;
    return;
  }
  SG_ASSERT(p->n_adj < p->cap_adj);
  memmove(&p->adj[i + 1], &p->adj[i], (p->n_adj - i) * sizeof *p->adj);
  p->adj[i] = (sg__health_adj){rank, kinds};
  p->n_adj++;
}

static sg_status check_member(const sg_health *h, int rank, const char *fn) {
  SG_CHECK(sg__health_check_rank(h, rank, fn));
  if (!h->peers[rank].member)
    return sg__error(SG_ERR_NOT_FOUND, "%s: rank %d is not a member of epoch %u", fn, rank, h->epoch);
  return SG_OK;
}

sg_status sg_health_add_edge(sg_health *h, int a, int b, unsigned kinds) {
  static const char fn[] = "sg_health_add_edge";
  SG_CHECK(check_member(h, a, fn));
  SG_CHECK(check_member(h, b, fn));
  if (h->in_callback) return sg__error(SG_ERR_STATE, "%s: called from the health callback", fn);
  if (a == b) return sg__error(SG_ERR_INVALID_ARG, "%s: rank %d cannot depend on itself", fn, a);
  if (kinds == 0 || (kinds & ~KNOWN_KINDS) != 0)
    return sg__error(SG_ERR_INVALID_ARG,
                     "%s: kinds 0x%x: expected an OR of SG_EDGE_RING and SG_EDGE_PIPELINE", fn, kinds);
  SG_CHECK(adj_reserve(&h->peers[a], 1, fn));
  SG_CHECK(adj_reserve(&h->peers[b], 1, fn));
  adj_insert(&h->peers[a], b, kinds);
  adj_insert(&h->peers[b], a, kinds);
  return SG_OK;
}

static int ring_rank(const int *ranks, int i) { return ranks ? ranks[i] : i; }

sg_status sg_health_add_ring(sg_health *h, const int *ranks, int n) {
  static const char fn[] = "sg_health_add_ring";
  if (h == NULL) return sg__error(SG_ERR_INVALID_ARG, "%s: h is NULL", fn);
  if (h->in_callback) return sg__error(SG_ERR_STATE, "%s: called from the health callback", fn);
  if (n < 1 || n > h->world_size)
    return sg__error(SG_ERR_INVALID_ARG, "%s: %d ranks, expected 1..%d", fn, n, h->world_size);
  /* Everything is checked and every list has room before the first edge
   * goes in: a refused ring adds nothing. scratch marks the ring's ranks. */
  memset(h->scratch, 0, (size_t)h->world_size * sizeof *h->scratch);
  for (int i = 0; i < n; i++) {
    int r = ring_rank(ranks, i);
    SG_CHECK(check_member(h, r, fn));
    if (h->scratch[r]) return sg__error(SG_ERR_INVALID_ARG, "%s: rank %d appears twice in the ring", fn, r);
    h->scratch[r] = 1;
  }
  if (n == 1) return SG_OK;
  for (int i = 0; i < n; i++) SG_CHECK(adj_reserve(&h->peers[ring_rank(ranks, i)], 2, fn));
  for (int i = 0; i < n; i++) {
    int a = ring_rank(ranks, i), b = ring_rank(ranks, (i + 1) % n);
    adj_insert(&h->peers[a], b, SG_EDGE_RING);
    adj_insert(&h->peers[b], a, SG_EDGE_RING);
  }
  return SG_OK;
}

sg_status sg_health_edge(const sg_health *h, int a, int b, unsigned *kinds) {
  SG_CHECK(sg__health_check_rank(h, a, "sg_health_edge"));
  SG_CHECK(sg__health_check_rank(h, b, "sg_health_edge"));
  if (kinds == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_health_edge: kinds is NULL");
  bool found;
  uint32_t i = adj_find(&h->peers[a], b, &found);
  *kinds = found ? h->peers[a].adj[i].kinds : 0;
  return SG_OK;
}

/* Lists rank's neighbours, all of them or only those not HEALTHY. */
static sg_status list(const sg_health *h, int rank, int *out, size_t cap, size_t *n, bool unhealthy_only,
                      const char *fn) {
  SG_CHECK(sg__health_check_rank(h, rank, fn));
  if (n == NULL || (out == NULL && cap > 0)) return sg__error(SG_ERR_INVALID_ARG, "%s: NULL argument", fn);
  const sg__health_peer *p = &h->peers[rank];
  size_t k = 0;
  for (uint32_t i = 0; i < p->n_adj; i++) {
    int r = p->adj[i].rank;
    if (unhealthy_only && h->peers[r].pub.state == SG_HEALTH_HEALTHY) continue;
    if (k < cap) out[k] = r;
    k++;
  }
  *n = k;
  return SG_OK;
}

sg_status sg_health_neighbors(const sg_health *h, int rank, int *out, size_t cap, size_t *n) {
  return list(h, rank, out, cap, n, false, "sg_health_neighbors");
}

sg_status sg_health_unhealthy_deps(const sg_health *h, int rank, int *out, size_t cap, size_t *n) {
  return list(h, rank, out, cap, n, true, "sg_health_unhealthy_deps");
}
