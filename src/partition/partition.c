/* The sg_partition handle: argument checks, devices per part, running the
 * solver, the random baseline, and the queries. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "partition/partition_internal.h"

sg_partition_params sg_partition_params_init(void) { return (sg_partition_params)SG_PARTITION_PARAMS_INIT; }

static double now_seconds(void) { return (double)sg__now_ns() * 1e-9; }

/* Names a vertex after the op it is named after, for error messages. */
static const char *vertex_name(const void *ctx, int32_t v, char *buf, size_t cap) {
  const sg_partition *p = ctx;
  const sg__op *op = &p->g->ops[p->model->leader[v]];
  snprintf(buf, cap, "op '%.200s' (%s)", op->name, sg_op_kind_name(op->kind));
  return buf;
}

sg_status sg__partition_devices(const sg_device_table *t, int k, sg__device **out) {
  *out = NULL;
  if (t == NULL) {
    sg__device *d = sg__calloc((size_t)k, sizeof *d);
    if (d == NULL) return sg__error(SG_ERR_NO_MEMORY, "partition: out of memory");
    for (int p = 0; p < k; p++) {
      char buf[32];
      snprintf(buf, sizeof buf, "host-%d", p);
      d[p] = sg__device_host();
      d[p].memory = INFINITY;
      d[p].name = sg__strdup(buf);
      if (d[p].name == NULL) {
        sg__devices_free(d, p);
        return sg__error(SG_ERR_NO_MEMORY, "partition: out of memory");
      }
    }
    *out = d;
    return SG_OK;
  }
  if (t->n == k) return sg__devices_copy(t->dev, k, out);
  if (t->n != 1)
    return sg__error(
        SG_ERR_INVALID_ARG,
        "sg_partition_create: parts is %d but the device table has %d devices (give one device per "
        "part, or one device to repeat)",
        k, t->n);
  sg__device *d = sg__calloc((size_t)k, sizeof *d);
  if (d == NULL) return sg__error(SG_ERR_NO_MEMORY, "partition: out of memory");
  for (int p = 0; p < k; p++) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s-%d", t->dev[0].name, p);
    d[p] = t->dev[0];
    d[p].name = sg__strdup(buf);
    if (d[p].name == NULL) {
      sg__devices_free(d, p);
      return sg__error(SG_ERR_NO_MEMORY, "partition: out of memory");
    }
  }
  *out = d;
  return SG_OK;
}

static void free_partition(sg_partition *p) {
  if (p == NULL) return;
  free_partition(p->baseline);
  sg__partition_free_report(p);
  sg__targets_free(&p->solve);
  sg__devices_free(p->dev, p->k);
  sg__free(p->group_part);
  sg__free(p->op_part);
  if (p->owns_model) {
    sg__pmodel_free(p->model);
    sg__free(p->model);
  }
  sg__free(p);
}

void sg_partition_destroy(sg_partition *p) { free_partition(p); }

/* A partition over `dev` (taken over) of the model (taken over when
 * owns_model). `fixed` (group -> part) skips the solver; `baseline` adds the
 * random partition. */
static sg_status make(const sg_graph *g, sg__pmodel *model, bool owns_model, const sg_partition_params *pp,
                      sg__device *dev, int k, const int32_t *fixed, const int32_t *home,
                      double migration_cost, bool baseline, sg_partition **out) {
  *out = NULL;
  sg_partition *p = sg__calloc(1, sizeof *p);
  if (p == NULL) {
    sg__devices_free(dev, k);
    if (owns_model) {
      sg__pmodel_free(model);
      sg__free(model);
    }
    return sg__error(SG_ERR_NO_MEMORY, "partition: out of memory");
  }
  p->g = g;
  p->model = model;
  p->owns_model = owns_model;
  p->params = *pp;
  p->k = k;
  p->dev = dev;
  sg__solve *s = &p->solve;
  s->pg = &model->pg;
  s->k = k;
  s->dev = dev;
  s->pipeline = pp->mode == SG_PARTITION_PIPELINE;
  s->balance_compute = pp->balance_compute != 0;
  s->eps = pp->imbalance;
  s->alpha = pp->alpha;
  s->seed = pp->seed;
  s->search_rounds = SG__SEARCH_ROUNDS;
  s->vertex_name = vertex_name;
  s->name_ctx = p;
  s->home = home;
  s->migration_cost = migration_cost;
  int32_t ng = model->pg.n;
  sg_status st;
  p->group_part = sg__calloc((size_t)ng + 1, sizeof *p->group_part);
  p->op_part = sg__calloc((size_t)model->n_ops + 1, sizeof *p->op_part);
  if (p->group_part == NULL || p->op_part == NULL) {
    st = sg__error(SG_ERR_NO_MEMORY, "partition: out of memory");
    goto fail;
  }
  double t0 = now_seconds();
  if ((st = sg__targets_init(s)) != SG_OK) goto fail;
  if (fixed) memcpy(p->group_part, fixed, (size_t)ng * sizeof *p->group_part);
  else if ((st = sg__solve_run(s, p->group_part)) != SG_OK) goto fail;
  p->seconds = now_seconds() - t0;
  s->home = NULL; /* borrowed for the solve only */
  for (int32_t k2 = 0; k2 < model->n_ops; k2++) p->op_part[k2] = p->group_part[model->op_group[k2]];
  if ((st = sg__partition_compute_report(p)) != SG_OK) goto fail;
  if (baseline) {
    double t1 = now_seconds();
    int32_t *rnd = sg__malloc(((size_t)ng + 1) * sizeof *rnd);
    sg__device *dev2 = NULL;
    if (rnd == NULL) {
      st = sg__error(SG_ERR_NO_MEMORY, "partition: out of memory");
      goto fail;
    }
    sg__random_partition(s, pp->seed, rnd);
    st = sg__devices_copy(dev, k, &dev2);
    if (st == SG_OK) st = make(g, model, false, pp, dev2, k, rnd, NULL, 0.0, false, &p->baseline);
    sg__free(rnd);
    if (st != SG_OK) goto fail;
    p->baseline->seconds = now_seconds() - t1;
    p->baseline->report.seconds = p->baseline->seconds;
  }
  *out = p;
  return SG_OK;
fail:
  free_partition(p);
  return st;
}

/* Validates params (NULL: defaults) into *pp and the part count into *k. */
static sg_status check_params(const sg_partition_params *params, const sg_device_table *devices,
                              sg_partition_params *pp, int *k) {
  *pp = sg_partition_params_init();
  SG_CHECK(sg__params_read("sg_partition_create",
                           SG__VERSIONED(sg_partition_params, parts, "SG_PARTITION_PARAMS_INIT"), pp,
                           params));
  if (pp->mode != SG_PARTITION_FREE && pp->mode != SG_PARTITION_PIPELINE)
    return sg__error(SG_ERR_INVALID_ARG, "sg_partition_create: params.mode is %d (free 0, pipeline 1)",
                     (int)pp->mode);
  if (!(pp->imbalance > 0.0 && pp->imbalance <= 1.0))
    return sg__error(SG_ERR_INVALID_ARG, "sg_partition_create: params.imbalance is %g; it must be in (0, 1]",
                     pp->imbalance);
  if (!(pp->alpha >= 0.0 && isfinite(pp->alpha)))
    return sg__error(SG_ERR_INVALID_ARG,
                     "sg_partition_create: params.alpha is %g; it must be finite and >= 0", pp->alpha);
  int parts = pp->parts ? pp->parts : sg_device_table_count(devices);
  if (parts == 0)
    return sg__error(SG_ERR_INVALID_ARG,
                     "sg_partition_create: params.parts is 0 and there is no device table");
  if (parts < 1 || parts > SG_PARTITION_MAX_PARTS)
    return sg__error(SG_ERR_INVALID_ARG, "sg_partition_create: params.parts is %d; it must be in 1..%d",
                     parts, SG_PARTITION_MAX_PARTS);
  pp->parts = parts;
  *k = parts;
  return SG_OK;
}

sg_status sg_partition_create(const sg_graph *g, const sg_partition_params *params,
                              const sg_device_table *devices, sg_partition **out) {
  if (out) *out = NULL;
  if (g == NULL || out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_partition_create: NULL argument");
  if (!g->finalized)
    return sg__error(SG_ERR_STATE,
                     "sg_partition_create: the graph is not finalized (call sg_graph_finalize first)");
  sg_partition_params pp;
  int k = 0;
  SG_CHECK(check_params(params, devices, &pp, &k));
  /* A part without an op is a device left idle: more parts than ops is a mistake, not a plan. */
  int32_t n_ops = sg_graph_num_ops(g);
  if (k > n_ops)
    return sg__error(
        SG_ERR_RANGE,
        "sg_partition_create: %d parts for a graph of %d ops would leave %d parts empty; ask for at "
        "most %d",
        k, n_ops, k - n_ops, n_ops);
  sg__device *dev;
  SG_CHECK(sg__partition_devices(devices, k, &dev));
  sg__pmodel *model = sg__calloc(1, sizeof *model);
  if (model == NULL) {
    sg__devices_free(dev, k);
    return sg__error(SG_ERR_NO_MEMORY, "partition: out of memory");
  }
  sg_status st = sg__pmodel_build(g, NULL, 0.0, model);
  if (st != SG_OK) {
    sg__free(model);
    sg__devices_free(dev, k);
    return st;
  }
  return make(g, model, true, &pp, dev, k, NULL, NULL, 0.0, true, out);
}

sg_status sg__partition_make_migrating(const sg_graph *g, sg__pmodel *model, const sg_partition_params *pp,
                                       const sg__device *dev, int k, const int32_t *fixed,
                                       const int32_t *home, double migration_cost, sg_partition **out) {
  sg__device *copy;
  sg_status st = sg__devices_copy(dev, k, &copy);
  if (st != SG_OK) {
    sg__pmodel_free(model);
    sg__free(model);
    return st;
  }
  return make(g, model, true, pp, copy, k, fixed, home, migration_cost, true, out);
}

/* ---- queries -------------------------------------------------------------- */

int sg_partition_num_parts(const sg_partition *p) { return p ? p->k : 0; }

const sg_graph *sg_partition_graph(const sg_partition *p) { return p ? p->g : NULL; }

const sg_partition *sg_partition_baseline(const sg_partition *p) { return p ? p->baseline : NULL; }

sg_status sg_partition_op_part(const sg_partition *p, int32_t op, int *part) {
  if (p == NULL || part == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_partition_op_part: NULL argument");
  if (op < 0 || op >= p->model->n_ops)
    return sg__error(SG_ERR_RANGE, "sg_partition_op_part: op %d of a graph of %d ops", (int)op,
                     (int)p->model->n_ops);
  *part = p->op_part[op];
  return SG_OK;
}

sg_status sg_partition_stage_order(const sg_partition *p, int *order, int n) {
  if (p == NULL || order == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg_partition_stage_order: NULL argument");
  if (n < p->k)
    return sg__error(SG_ERR_INVALID_ARG, "sg_partition_stage_order: room for %d parts, need %d", n, p->k);
  if (!sg__quotient_acyclic(&p->model->pg, p->group_part, p->k, order))
    return sg__error(SG_ERR_CYCLE,
                     "sg_partition_stage_order: the parts' quotient graph has a cycle (free mode); "
                     "use pipeline mode for stages");
  return SG_OK;
}

sg_status sg_partition_device(const sg_partition *p, int part, sg_device_info *out) {
  if (p == NULL || out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_partition_device: NULL argument");
  if (part < 0 || part >= p->k)
    return sg__error(SG_ERR_RANGE, "sg_partition_device: part %d of %d", part, p->k);
  sg__device_info_of(&p->dev[part], out);
  return SG_OK;
}

sg_status sg_partition_placement_score(const sg_partition *p, int32_t op, int part, double *score) {
  if (p == NULL || score == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg_partition_placement_score: NULL argument");
  if (op < 0 || op >= p->model->n_ops)
    return sg__error(SG_ERR_RANGE, "sg_partition_placement_score: op %d of a graph of %d ops", (int)op,
                     (int)p->model->n_ops);
  if (part < 0 || part >= p->k)
    return sg__error(SG_ERR_RANGE, "sg_partition_placement_score: part %d of %d", part, p->k);
  *score = sg__placement_score(&p->solve, p->group_part, p->model->op_group[op], part);
  return SG_OK;
}
