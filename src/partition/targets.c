/* Heterogeneous targets (SPEC P3): what share of the memory and compute each
 * part should get, the capacity checks that fail before any work, and the
 * alpha-weighted placement score. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "partition/partition_internal.h"

double sg__vertex_time(const sg__pgraph *pg, int32_t v, const sg__device *d) {
  double t = d->peak > 0.0 ? pg->flops[v] / d->peak : 0.0;
  double m = d->bw > 0.0 ? pg->traffic[v] / d->bw : 0.0;
  return t > m ? t : m;
}

static bool same_speed(const sg__device *a, const sg__device *b) {
  return a->peak == b->peak && a->bw == b->bw;
}

static const char *vname(const sg__solve *s, int32_t v, char *buf, size_t cap) {
  if (s->vertex_name) return s->vertex_name(s->name_ctx, v, buf, cap);
  snprintf(buf, cap, "vertex %d", (int)v);
  return buf;
}

/* Capacity is a hard limit; the targets leave room for the tolerance when
 * they can: a part whose capability share would not fit keeps
 * capacity / (1 + eps), and the rest is spread over the others (water
 * filling). */
static void memory_targets(sg__solve *s, const double *share) {
  int k = s->k;
  double total = s->pg->total_mem, eps = sg__mem_eps(s);
  bool fixed[SG_PARTITION_MAX_PARTS] = {false};
  for (int round = 0; round <= k; round++) {
    double left = total, free_share = 0.0;
    for (int p = 0; p < k; p++) {
      if (fixed[p]) left -= s->cap[p] / (1.0 + eps);
      else free_share += share[p];
    }
    bool changed = false;
    for (int p = 0; p < k; p++) {
      if (fixed[p]) {
        s->mem_target[p] = s->cap[p] / (1.0 + eps);
        continue;
      }
      s->mem_target[p] = free_share > 0.0 && left > 0.0 ? left * share[p] / free_share : 0.0;
      if (s->mem_target[p] * (1.0 + eps) > s->cap[p]) {
        fixed[p] = true;
        changed = true;
      }
    }
    if (!changed) break;
  }
  double sum = 0.0, cap_sum = 0.0;
  for (int p = 0; p < k; p++) sum += s->mem_target[p], cap_sum += s->cap[p];
  if (sum < total * (1.0 - 1e-12) && isfinite(cap_sum) && cap_sum > 0.0) {
    /* Tight: even the tolerance does not fit. Every part the same fill. */
    for (int p = 0; p < k; p++) s->mem_target[p] = s->cap[p] * total / cap_sum;
  }
}

sg_status sg__targets_init(sg__solve *s) {
  int k = s->k;
  const sg__pgraph *pg = s->pg;
  s->mem_target = sg__calloc((size_t)k, sizeof(double));
  s->comp_target = sg__calloc((size_t)k, sizeof(double));
  s->cap = sg__calloc((size_t)k, sizeof(double));
  s->mem_bound = sg__calloc((size_t)k, sizeof(double));
  double *share = sg__calloc((size_t)k, sizeof(double));
  if (!s->mem_target || !s->comp_target || !s->cap || !s->mem_bound || !share) {
    sg__free(share);
    sg__targets_free(s);
    return sg__error(SG_ERR_NO_MEMORY, "partition: out of memory");
  }
  /* Capability: how fast a device runs this graph (roofline time of all of
   * it), so memory-bound graphs follow bandwidth and compute-bound ones
   * FLOP/s. Devices with equal figures share the sum. */
  double share_sum = 0.0;
  for (int p = 0; p < k; p++) {
    int same = -1;
    for (int q = 0; q < p && same < 0; q++)
      if (same_speed(&s->dev[p], &s->dev[q])) same = q;
    if (same >= 0) {
      share[p] = share[same];
    } else {
      double t = 0.0;
      for (int32_t v = 0; v < pg->n; v++) t += sg__vertex_time(pg, v, &s->dev[p]);
      share[p] = t > 0.0 ? 1.0 / t : (s->dev[p].peak > 0.0 ? s->dev[p].peak : 1.0);
    }
    share_sum += share[p];
  }
  if (!(share_sum > 0.0) || !isfinite(share_sum)) {
    for (int p = 0; p < k; p++) share[p] = 1.0;
    share_sum = k;
  }
  for (int p = 0; p < k; p++) {
    share[p] /= share_sum;
    s->comp_target[p] = pg->total_flops * share[p];
    s->cap[p] = s->dev[p].memory > 0.0 ? s->dev[p].memory : INFINITY;
  }

  /* What cannot fit at all. */
  sg_status st = SG_OK;
  double cap_sum = 0.0, cap_max = 0.0;
  int p_max = 0;
  for (int p = 0; p < k; p++) {
    cap_sum += s->cap[p];
    if (s->cap[p] > cap_max) cap_max = s->cap[p], p_max = p;
  }
  for (int32_t v = 0; v < pg->n && st == SG_OK; v++)
    if (pg->mem[v] > cap_max) {
      char buf[300];
      st = sg__error(SG_ERR_RANGE,
                     "partition: %s needs %.0f bytes of memory, more than the capacity of the largest device "
                     "('%s', %.0f bytes)",
                     vname(s, v, buf, sizeof buf), pg->mem[v], s->dev[p_max].name ? s->dev[p_max].name : "?",
                     cap_max);
    }
  if (st == SG_OK && pg->total_mem > cap_sum)
    st = sg__error(
        SG_ERR_RANGE,
        "partition: the graph needs %.0f bytes of memory but the capacity of the %d devices is %.0f bytes "
        "in all",
        pg->total_mem, k, cap_sum);
  if (st == SG_OK) {
    memory_targets(s, share);
    for (int p = 0; p < k; p++) {
      double b = s->mem_target[p] * (1.0 + sg__mem_eps(s));
      s->mem_bound[p] = b < s->cap[p] ? b : s->cap[p];
    }
  }
  sg__free(share);
  if (st != SG_OK) sg__targets_free(s);
  return st;
}

void sg__targets_free(sg__solve *s) {
  sg__free(s->mem_target);
  sg__free(s->comp_target);
  sg__free(s->cap);
  sg__free(s->mem_bound);
  s->mem_target = s->comp_target = s->cap = s->mem_bound = NULL;
}

/* ---- loads ---------------------------------------------------------------- */

sg_status sg__loads_init(sg__loads *l, const sg__solve *s, const int32_t *part) {
  l->k = s->k;
  l->mem = sg__calloc((size_t)s->k, sizeof(double));
  l->comp = sg__calloc((size_t)s->k, sizeof(double));
  l->count = sg__calloc((size_t)s->k, sizeof(int32_t));
  if (!l->mem || !l->comp || !l->count) {
    sg__loads_free(l);
    return sg__error(SG_ERR_NO_MEMORY, "partition: out of memory");
  }
  for (int32_t v = 0; v < s->pg->n; v++) {
    l->mem[part[v]] += s->pg->mem[v];
    l->comp[part[v]] += s->pg->flops[v];
    l->count[part[v]]++;
  }
  return SG_OK;
}

void sg__loads_free(sg__loads *l) {
  sg__free(l->mem);
  sg__free(l->comp);
  sg__free(l->count);
  l->mem = l->comp = NULL;
  l->count = NULL;
}

void sg__loads_move(sg__loads *l, const sg__pgraph *pg, int32_t v, int from, int to) {
  l->mem[from] -= pg->mem[v];
  l->comp[from] -= pg->flops[v];
  l->count[from]--;
  l->mem[to] += pg->mem[v];
  l->comp[to] += pg->flops[v];
  l->count[to]++;
}

/* ---- placement score (seed sec. 2.2) -------------------------------------- */

double sg__placement_score(const sg__solve *s, const int32_t *part, int32_t v, int p) {
  const sg__pgraph *pg = s->pg;
  const sg__device *d = &s->dev[p];
  double t = sg__vertex_time(pg, v, d), best = t;
  for (int q = 0; q < s->k; q++) {
    double tq = sg__vertex_time(pg, v, &s->dev[q]);
    if (tq < best) best = tq;
  }
  double efficiency = t > 0.0 ? best / t : 1.0;
  /* Transfer: latency plus bytes over the slower end of each link, for
   * every neighbour that would sit on another device. */
  double x = 0.0;
  for (int32_t i = pg->xadj[v]; i < pg->xadj[v + 1]; i++) {
    int q = part[pg->adj[i]];
    if (q == p) continue;
    const sg__device *e = &s->dev[q];
    double bw = d->link_bw < e->link_bw ? d->link_bw : e->link_bw;
    double lat = d->link_lat > e->link_lat ? d->link_lat : e->link_lat;
    x += lat + (bw > 0.0 ? pg->adjw[i] / bw : 0.0);
  }
  double transfer = x + t > 0.0 ? x / (x + t) : 0.0;
  return efficiency - s->alpha * transfer;
}
