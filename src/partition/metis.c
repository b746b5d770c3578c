/* The METIS boundary (SPEC P2): the only file that includes metis.h. It
 * turns the weighted graph into METIS's CSR arrays with integer weights,
 * passes the targets as tpwgts and the tolerance as ubvec, and translates
 * METIS's return codes (METIS_OK is 1) in one place. */
#include <math.h>
#include <metis.h>
#include <string.h>

#include "partition/partition_internal.h"

/* Debian builds METIS with 32-bit indices and single-precision reals; the
 * arrays below rely on both. */
_Static_assert(sizeof(idx_t) == sizeof(int32_t), "METIS must be built with IDXTYPEWIDTH 32");
_Static_assert(sizeof(real_t) == sizeof(float), "METIS must be built with REALTYPEWIDTH 32");

static sg_status translate(int rc, const char *fn) {
  switch (rc) {
    case METIS_OK: return SG_OK;
    case METIS_ERROR_INPUT:
      return sg__error(SG_ERR_INTERNAL, "%s rejected its input (METIS_ERROR_INPUT)", fn);
    case METIS_ERROR_MEMORY:
      return sg__error(SG_ERR_NO_MEMORY, "%s ran out of memory (METIS_ERROR_MEMORY)", fn);
    case METIS_ERROR: return sg__error(SG_ERR_INTERNAL, "%s failed (METIS_ERROR)", fn);
  }
  return sg__error(SG_ERR_INTERNAL, "%s returned the unknown code %d", fn, rc);
}

/* Integer weights: METIS sums them in idx_t, so totals are scaled to at
 * most `budget`; every weight is at least 1 (zero-weight vertices and edges
 * would let METIS ignore them entirely). */
static idx_t scaled(double x, double scale) {
  double r = floor(x * scale + 0.5);
  return r < 1.0 ? 1 : (idx_t)r;
}

/* Target fractions of one constraint, each > 0 and summing to 1. */
static void fractions(const double *target, int k, int ncon, int c, real_t *tp) {
  double sum = 0.0;
  for (int p = 0; p < k; p++) sum += target[p];
  double floor_frac = 1e-6, norm = 0.0;
  double f[SG_PARTITION_MAX_PARTS];
  for (int p = 0; p < k; p++) {
    f[p] = sum > 0.0 ? target[p] / sum : 1.0 / k;
    if (f[p] < floor_frac) f[p] = floor_frac;
    norm += f[p];
  }
  for (int p = 0; p < k; p++) tp[p * ncon + c] = (real_t)(f[p] / norm);
}

/* METIS prints to stdout (and gives up) when a bisection leaves a side
 * empty: with few vertices per part, or a vertex heavier than a part should
 * be. Such inputs are declined here; the callers have other ways. */
static bool metis_suits(const sg__solve *s, sg__metis_method method, int ncon) {
  const sg__pgraph *pg = s->pg;
  int32_t per_part = method == SG__METIS_KWAY ? 4 : 16;
  if (pg->n < per_part * s->k) return false;
  double max_mem = 0.0, max_flops = 0.0;
  for (int32_t v = 0; v < pg->n; v++) {
    if (pg->mem[v] > max_mem) max_mem = pg->mem[v];
    if (pg->flops[v] > max_flops) max_flops = pg->flops[v];
  }
  if (max_mem > pg->total_mem / s->k) return false;
  return ncon < 2 || max_flops <= pg->total_flops / s->k;
}

sg_status sg__metis_partition(const sg__solve *s, sg__metis_method method, int ncon, double ub_scale,
                              uint64_t seed, int32_t *part) {
  const sg__pgraph *pg = s->pg;
  int32_t n = pg->n;
  if (!metis_suits(s, method, ncon))
    return sg__error(SG_ERR_UNSUPPORTED, "partition: %d vertices into %d parts do not suit METIS", (int)n,
                     s->k);
  int32_t m = pg->xadj[n];
  sg_status st = SG_ERR_NO_MEMORY;
  idx_t *xadj = sg__malloc(((size_t)n + 1) * sizeof *xadj);
  idx_t *adjncy = sg__malloc(((size_t)m + 1) * sizeof *adjncy);
  idx_t *adjwgt = sg__malloc(((size_t)m + 1) * sizeof *adjwgt);
  idx_t *vwgt = sg__malloc(((size_t)n * (size_t)ncon + 1) * sizeof *vwgt);
  idx_t *where = sg__malloc(((size_t)n + 1) * sizeof *where);
  real_t *tpwgts = sg__malloc(((size_t)s->k * (size_t)ncon) * sizeof *tpwgts);
  real_t ubvec[2];
  if (!xadj || !adjncy || !adjwgt || !vwgt || !where || !tpwgts) {
    st = sg__error(SG_ERR_NO_MEMORY, "partition: out of memory for METIS's arrays");
    goto out;
  }
  double vscale[2] = {pg->total_mem > 0.0 ? 1e7 / pg->total_mem : 1.0,
                      pg->total_flops > 0.0 ? 1e7 / pg->total_flops : 1.0};
  double escale = pg->total_w > 0.0 ? 2e8 / pg->total_w : 1.0;
  memcpy(xadj, pg->xadj, ((size_t)n + 1) * sizeof *xadj);
  for (int32_t i = 0; i < m; i++) {
    adjncy[i] = pg->adj[i];
    adjwgt[i] = scaled(pg->adjw[i], escale);
  }
  for (int32_t v = 0; v < n; v++) {
    vwgt[(size_t)v * (size_t)ncon] = scaled(pg->mem[v], vscale[0]);
    if (ncon > 1) vwgt[(size_t)v * (size_t)ncon + 1] = scaled(pg->flops[v], vscale[1]);
  }
  fractions(s->mem_target, s->k, ncon, 0, tpwgts);
  if (ncon > 1) fractions(s->comp_target, s->k, ncon, 1, tpwgts);
  ubvec[0] = (real_t)(1.0 + ub_scale * sg__mem_eps(s));
  ubvec[1] = (real_t)(1.0 + ub_scale * s->eps);

  idx_t options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options);
  options[METIS_OPTION_OBJTYPE] = METIS_OBJTYPE_CUT;
  options[METIS_OPTION_NUMBERING] = 0;
  options[METIS_OPTION_SEED] = (idx_t)(seed & 0x3fffffff);
  idx_t nvtxs = n, nc = ncon, nparts = s->k, objval = 0;
  int rc;
  const char *fn;
  if (method == SG__METIS_KWAY) {
    fn = "METIS_PartGraphKway";
    rc = METIS_PartGraphKway(&nvtxs, &nc, xadj, adjncy, vwgt, NULL, adjwgt, &nparts, tpwgts, ubvec, options,
                             &objval, where);
  } else {
    fn = "METIS_PartGraphRecursive";
    rc = METIS_PartGraphRecursive(&nvtxs, &nc, xadj, adjncy, vwgt, NULL, adjwgt, &nparts, tpwgts, ubvec,
                                  options, &objval, where);
  }
  st = translate(rc, fn);
  for (int32_t v = 0; st == SG_OK && v < n; v++) {
    if (where[v] < 0 || where[v] >= s->k)
      st = sg__error(SG_ERR_INTERNAL, "%s placed vertex %d in part %d", fn, (int)v, (int)where[v]);
    else part[v] = where[v];
  }
out:
  sg__free(xadj);
  sg__free(adjncy);
  sg__free(adjwgt);
  sg__free(vwgt);
  sg__free(where);
  sg__free(tpwgts);
  return st;
}
