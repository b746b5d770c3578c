/* Profile-guided repartitioning (SPEC P6, seed sec. 2.3): a new partition
 * from measured op times that minimises cut bytes plus the cost of
 * migrating state, and the trigger that decides when to compute one.
 *
 * Two candidates, as ParMETIS's adaptive repartitioning weighs them: a
 * diffusion from the current placement (move what the new weights
 * overload, refine with migration priced in) and a fresh partition whose
 * parts are relabelled to overlap the current ones most. The cheaper
 * balanced one wins. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "partition/partition_internal.h"

sg_repartition_params sg_repartition_params_init(void) {
  return (sg_repartition_params)SG_REPARTITION_PARAMS_INIT;
}

sg_repartition_trigger_params sg_repartition_trigger_params_init(void) {
  return (sg_repartition_trigger_params)SG_REPARTITION_TRIGGER_PARAMS_INIT;
}

static bool same_device(const sg__device *a, const sg__device *b) {
  return a->peak == b->peak && a->bw == b->bw && a->memory == b->memory && a->link_bw == b->link_bw &&
         a->link_lat == b->link_lat;
}

static double migrated(const sg__pgraph *pg, const int32_t *home, const int32_t *part) {
  double bytes = 0.0;
  for (int32_t v = 0; v < pg->n; v++)
    if (home[v] != part[v]) bytes += pg->persist[v];
  return bytes;
}

typedef struct pair {
  double overlap;
  int a, b;
} pair;

static int pair_cmp(const void *pa, const void *pb) {
  const pair *x = pa, *y = pb;
  if (x->overlap != y->overlap) return x->overlap > y->overlap ? -1 : 1;
  if (x->a != y->a) return x->a - y->a;
  return x->b - y->b;
}

/* Free mode: renames the new parts so that as much state as possible stays
 * where it is, only ever swapping parts whose devices are identical. */
static sg_status relabel(const sg__solve *s, const int32_t *home, int32_t *part) {
  int k = s->k;
  size_t kk = (size_t)k * (size_t)k;
  pair *pairs = sg__malloc(kk * sizeof *pairs);
  double *ov = sg__calloc(kk, sizeof *ov);
  int *map = sg__malloc((size_t)k * sizeof *map);
  bool *used = sg__calloc((size_t)k, sizeof *used);
  if (!pairs || !ov || !map || !used) {
    sg__free(pairs);
    sg__free(ov);
    sg__free(map);
    sg__free(used);
    return sg__error(SG_ERR_NO_MEMORY, "repartition: out of memory");
  }
  for (int32_t v = 0; v < s->pg->n; v++)
    ov[(size_t)part[v] * (size_t)k + (size_t)home[v]] += s->pg->persist[v] + 1e-9;
  size_t np = 0;
  for (int a = 0; a < k; a++)
    for (int b = 0; b < k; b++)
      if (same_device(&s->dev[a], &s->dev[b]))
        pairs[np++] = (pair){ov[(size_t)a * (size_t)k + (size_t)b], a, b};
  qsort(pairs, np, sizeof *pairs, pair_cmp);
  for (int a = 0; a < k; a++) map[a] = -1;
  for (size_t i = 0; i < np; i++)
    if (map[pairs[i].a] < 0 && !used[pairs[i].b]) {
      map[pairs[i].a] = pairs[i].b;
      used[pairs[i].b] = true;
    }
  for (int a = 0; a < k; a++)
    if (map[a] < 0) map[a] = a; /* cannot happen: every part matches itself */
  for (int32_t v = 0; v < s->pg->n; v++) part[v] = map[part[v]];
  sg__free(pairs);
  sg__free(ov);
  sg__free(map);
  sg__free(used);
  return SG_OK;
}

/* A candidate: cut plus priced migration, and whether memory (and compute,
 * when balanced) is within bounds. */
typedef struct candidate {
  const int32_t *part;
  bool mem_ok, comp_ok;
  double cost;
} candidate;

static candidate judge(const sg__solve *s, const int32_t *home, const int32_t *part) {
  candidate c = {part, false, false, INFINITY};
  sg__loads l;
  if (part == NULL || sg__loads_init(&l, s, part) != SG_OK) return c;
  c.mem_ok = true;
  for (int p = 0; p < s->k; p++)
    if (l.mem[p] > s->mem_bound[p] * (1.0 + 1e-9) + 1e-9) c.mem_ok = false;
  if (s->pipeline && !sg__pipeline_monotone(s->pg, part)) c.mem_ok = false;
  c.comp_ok =
      !s->balance_compute || sg__max_ratio(l.comp, s->comp_target, s->k) <= (1.0 + s->eps) * (1.0 + 1e-9);
  sg__loads_free(&l);
  c.cost = sg__pgraph_cut(s->pg, part) + s->migration_cost * migrated(s->pg, home, part);
  return c;
}

/* Balanced memory, then balanced compute, then the lower cost. */
static bool preferred(const candidate *a, const candidate *b) {
  if (a->part == NULL) return false;
  if (b->part == NULL) return true;
  if (a->mem_ok != b->mem_ok) return a->mem_ok;
  if (a->comp_ok != b->comp_ok) return a->comp_ok;
  return a->cost < b->cost;
}

static sg_status check_times(const sg_partition *cur, const double *t, int32_t n) {
  if (n != cur->model->n_ops)
    return sg__error(SG_ERR_INVALID_ARG, "sg_partition_repartition: %d op times for a graph of %d ops",
                     (int)n, (int)cur->model->n_ops);
  for (int32_t k = 0; k < n; k++)
    if (!isfinite(t[k]) || t[k] < 0.0)
      return sg__error(SG_ERR_INVALID_ARG, "sg_partition_repartition: op_seconds[%d] (op '%.200s') is %g",
                       (int)k, cur->g->ops[k].name, t[k]);
  return SG_OK;
}

sg_status sg_partition_repartition(const sg_partition *cur, const double *op_seconds, int32_t n,
                                   const sg_repartition_params *params, sg_partition **out) {
  if (out) *out = NULL;
  if (cur == NULL || op_seconds == NULL || out == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg_partition_repartition: NULL argument");
  sg_repartition_params rp = sg_repartition_params_init();
  SG_CHECK(sg__params_read("sg_partition_repartition",
                           SG__VERSIONED(sg_repartition_params, migration_cost, "SG_REPARTITION_PARAMS_INIT"),
                           &rp, params));
  if (!(rp.migration_cost >= 0.0 && isfinite(rp.migration_cost)))
    return sg__error(SG_ERR_INVALID_ARG,
                     "sg_partition_repartition: params.migration_cost is %g (finite, >= 0)",
                     rp.migration_cost);
  if (!(rp.memory_imbalance > 0.0 && rp.memory_imbalance <= 100.0))
    return sg__error(SG_ERR_INVALID_ARG,
                     "sg_partition_repartition: params.memory_imbalance is %g (in (0, 100])",
                     rp.memory_imbalance);
  SG_CHECK(check_times(cur, op_seconds, n));
  int64_t t0 = sg__now_ns();

  /* Seconds become FLOPs of the first device, so targets and the roofline
   * keep their meaning. */
  double scale = cur->dev[0].peak > 0.0 ? cur->dev[0].peak : 1e12;
  sg__pmodel *model = sg__calloc(1, sizeof *model);
  if (model == NULL) return sg__error(SG_ERR_NO_MEMORY, "repartition: out of memory");
  sg_status st = sg__pmodel_build(cur->g, op_seconds, scale, model);
  if (st != SG_OK) {
    sg__free(model);
    return st;
  }
  const int32_t *home = cur->group_part;
  int32_t ng = model->pg.n;
  SG_ASSERT(ng == cur->model->pg.n);
  sg__solve s = cur->solve;
  s.pg = &model->pg;
  s.mem_target = s.comp_target = s.cap = s.mem_bound = NULL;
  s.home = home;
  s.migration_cost = rp.migration_cost;
  s.mem_eps = rp.memory_imbalance > s.eps ? rp.memory_imbalance : s.eps;
  s.compute_first = true;
  int32_t *diffuse = sg__malloc(((size_t)ng + 1) * sizeof *diffuse);
  int32_t *fresh = sg__malloc(((size_t)ng + 1) * sizeof *fresh);
  sg__loads l = {0};
  if (diffuse == NULL || fresh == NULL) {
    st = sg__error(SG_ERR_NO_MEMORY, "repartition: out of memory");
    goto out;
  }
  if ((st = sg__targets_init(&s)) != SG_OK) goto out;

  /* Diffusion: the current placement, rebalanced under the new weights. */
  memcpy(diffuse, home, (size_t)ng * sizeof *diffuse);
  if ((st = sg__loads_init(&l, &s, diffuse)) != SG_OK) goto out;
  double tol = 1.0 + s.eps;
  sg__rebalance(&s, diffuse, &l, INFINITY, false);
  if (s.balance_compute) sg__rebalance(&s, diffuse, &l, tol, true);
  double ratio = sg__max_ratio(l.comp, s.comp_target, s.k);
  sg__refine_cut(&s, diffuse, &l, s.balance_compute ? (ratio > tol ? ratio : tol) : INFINITY, 8);
  sg__loads_free(&l);

  /* Fresh: partition from scratch, relabel, refine with migration priced. */
  sg_status fresh_st = sg__solve_run(&s, fresh);
  if (fresh_st == SG_ERR_NO_MEMORY) {
    st = fresh_st;
    goto out;
  }
  bool have_fresh = fresh_st == SG_OK;
  if (have_fresh && !s.pipeline && (st = relabel(&s, home, fresh)) != SG_OK) goto out;
  if (have_fresh) {
    if ((st = sg__loads_init(&l, &s, fresh)) != SG_OK) goto out;
    ratio = sg__max_ratio(l.comp, s.comp_target, s.k);
    sg__refine_cut(&s, fresh, &l, s.balance_compute ? (ratio > tol ? ratio : tol) : INFINITY, 4);
    sg__loads_free(&l);
  }

  /* Staying put is a candidate too: it migrates nothing. */
  candidate cands[3] = {judge(&s, home, home), judge(&s, home, diffuse),
                        judge(&s, home, have_fresh ? fresh : NULL)};
  for (int i = 0; i < 3; i++)
    SG_DEBUG("repartition: candidate %d: %s, memory %s, compute %s, cost %g", i,
             cands[i].part ? "made" : "none", cands[i].mem_ok ? "ok" : "over",
             cands[i].comp_ok ? "ok" : "over", cands[i].cost);
  candidate best = cands[0];
  for (int i = 1; i < 3; i++)
    if (preferred(&cands[i], &best)) best = cands[i];
  if (!best.mem_ok && !have_fresh) {
    /* Nothing within the bounds and the solver found no fit. */
    bool fits = true;
    sg__loads fl;
    if ((st = sg__loads_init(&fl, &s, best.part)) != SG_OK) goto out;
    for (int p = 0; p < s.k; p++) fits = fits && fl.mem[p] <= s.cap[p];
    sg__loads_free(&fl);
    if (!fits) {
      st = fresh_st; /* the solver's message says what does not fit */
      goto out;
    }
  }
  sg__targets_free(&s);
  st = sg__partition_make_migrating(cur->g, model, &cur->params, cur->dev, cur->k, best.part, NULL, 0.0, out);
  model = NULL; /* taken over */
  if (st == SG_OK) {
    (*out)->seconds = (double)(sg__now_ns() - t0) * 1e-9;
    (*out)->report.seconds = (*out)->seconds;
  }
out:
  sg__targets_free(&s);
  sg__free(diffuse);
  sg__free(fresh);
  if (model) {
    sg__pmodel_free(model);
    sg__free(model);
  }
  return st;
}

sg_status sg_partition_migration_bytes(const sg_partition *from, const sg_partition *to, double *bytes) {
  if (from == NULL || to == NULL || bytes == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg_partition_migration_bytes: NULL argument");
  if (from->g != to->g)
    return sg__error(SG_ERR_INVALID_ARG,
                     "sg_partition_migration_bytes: the partitions are of different graphs");
  const sg_graph *g = from->g;
  double sum = 0.0;
  for (uint32_t t = 0; t < g->n_tensors; t++) {
    const sg__tensor *x = &g->tensors[t];
    if (x->role != SG_ROLE_PARAMETER && x->role != SG_ROLE_OPTIMIZER_STATE && x->role != SG_ROLE_STATE)
      continue;
    int32_t a = from->model->tensor_group[t], b = to->model->tensor_group[t];
    if (a < 0 || b < 0) continue;
    if (from->group_part[a] != to->group_part[b]) sum += (double)x->nbytes;
  }
  *bytes = sum;
  return SG_OK;
}

/* ---- the trigger ---------------------------------------------------------- */

typedef struct sample_ref {
  const sg_profile_sample *s;
  size_t index;
} sample_ref;

static int sample_cmp(const void *pa, const void *pb) {
  const sample_ref *a = pa, *b = pb;
  if (a->s->node_id != b->s->node_id) return a->s->node_id < b->s->node_id ? -1 : 1;
  if (a->s->timestamp_ms != b->s->timestamp_ms) return a->s->timestamp_ms < b->s->timestamp_ms ? -1 : 1;
  return (a->index > b->index) - (a->index < b->index);
}

static sg_status check_sample(const sg_profile_sample *s, size_t i) {
  struct {
    const char *name;
    double v;
  } f[] = {{"timestamp_ms", s->timestamp_ms},
           {"cpu_util", s->cpu_util},
           {"latency_p99_ms", s->latency_p99_ms},
           {"steps_per_s", s->steps_per_s}};
  for (size_t k = 0; k < sizeof f / sizeof f[0]; k++)
    if (!isfinite(f[k].v) || f[k].v < 0.0)
      return sg__error(SG_ERR_INVALID_ARG, "sg_repartition_trigger: samples[%zu].%s is %g (finite, >= 0)", i,
                       f[k].name, f[k].v);
  if (s->cpu_util > 1.0)
    return sg__error(SG_ERR_INVALID_ARG,
                     "sg_repartition_trigger: samples[%zu].cpu_util is %g (a fraction, 0..1)", i,
                     s->cpu_util);
  return SG_OK;
}

sg_status sg_repartition_trigger(const sg_profile_sample *samples, size_t n,
                                 const sg_repartition_trigger_params *params, int *fire, int32_t *node) {
  if (fire) *fire = 0;
  if (node) *node = -1;
  if (fire == NULL || node == NULL || (samples == NULL && n > 0))
    return sg__error(SG_ERR_INVALID_ARG, "sg_repartition_trigger: NULL argument");
  sg_repartition_trigger_params p = sg_repartition_trigger_params_init();
  SG_CHECK(sg__params_read(
      "sg_repartition_trigger",
      SG__VERSIONED(sg_repartition_trigger_params, cpu_util, "SG_REPARTITION_TRIGGER_PARAMS_INIT"), &p,
      params));
  if (!(p.cpu_util >= 0.0 && p.cpu_util <= 1.0))
    return sg__error(SG_ERR_INVALID_ARG, "sg_repartition_trigger: params.cpu_util is %g (0..1)", p.cpu_util);
  if (!(p.latency_p99_ms >= 0.0 && isfinite(p.latency_p99_ms)))
    return sg__error(SG_ERR_INVALID_ARG, "sg_repartition_trigger: params.latency_p99_ms is %g (finite, >= 0)",
                     p.latency_p99_ms);
  if (!(p.sample_period_ms > 0.0 && isfinite(p.sample_period_ms)))
    return sg__error(SG_ERR_INVALID_ARG,
                     "sg_repartition_trigger: params.sample_period_ms is %g (finite, > 0)",
                     p.sample_period_ms);
  if (p.sustain_samples < 1)
    return sg__error(SG_ERR_INVALID_ARG, "sg_repartition_trigger: params.sustain_samples is %d (>= 1)",
                     p.sustain_samples);
  for (size_t i = 0; i < n; i++) SG_CHECK(check_sample(&samples[i], i));
  if (n == 0) return SG_OK;
  sample_ref *r = sg__malloc(n * sizeof *r);
  if (r == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_repartition_trigger: out of memory");
  for (size_t i = 0; i < n; i++) r[i] = (sample_ref){&samples[i], i};
  qsort(r, n, sizeof *r, sample_cmp);
  size_t need = (size_t)p.sustain_samples;
  for (size_t b = 0; b < n && !*fire;) {
    size_t e = b;
    while (e < n && r[e].s->node_id == r[b].s->node_id) e++;
    /* The node's latest `need` samples: consecutive and all hot. */
    if (e - b >= need) {
      bool hot = true;
      for (size_t i = e - need; i < e && hot; i++) {
        const sg_profile_sample *s = r[i].s;
        hot = s->cpu_util > p.cpu_util && s->latency_p99_ms > p.latency_p99_ms;
        if (hot && i > e - need) hot = s->timestamp_ms - r[i - 1].s->timestamp_ms <= 1.5 * p.sample_period_ms;
      }
      if (hot) {
        *fire = 1;
        *node = r[b].s->node_id;
      }
    }
    b = e;
  }
  sg__free(r);
  return SG_OK;
}
