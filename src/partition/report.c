/* Reports (SPEC P5, O3): cut bytes, per-part memory and compute, imbalance,
 * boundary tensors and acyclicity of a partition and of its random
 * baseline, as structs, JSON (cJSON), a text table and Graphviz DOT. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "partition/partition_internal.h"

typedef struct use {
  int32_t tensor;
  int32_t part;
} use;

static int use_cmp(const void *pa, const void *pb) {
  const use *a = pa, *b = pb;
  if (a->tensor != b->tensor) return (a->tensor > b->tensor) - (a->tensor < b->tensor);
  return (a->part > b->part) - (a->part < b->part);
}

void sg__partition_free_report(sg_partition *p) {
  sg__free(p->parts);
  sg__free(p->boundary);
  sg__free(p->boundary_to);
  p->parts = NULL;
  p->boundary = NULL;
  p->boundary_to = NULL;
  p->n_boundary = 0;
}

/* Boundary tensors: every (tensor, consuming part) pair other than the
 * producer's part, sorted and made unique. */
static sg_status boundaries(sg_partition *p) {
  const sg_graph *g = p->g;
  size_t n_uses = 0;
  for (uint32_t k = 0; k < g->n_ops; k++) n_uses += (size_t)g->ops[k].n_inputs;
  use *u = sg__malloc((n_uses + 1) * sizeof *u);
  if (u == NULL) return SG_ERR_NO_MEMORY;
  size_t m = 0;
  for (uint32_t k = 0; k < g->n_ops; k++)
    for (int i = 0; i < g->ops[k].n_inputs; i++) {
      int32_t t = g->ops[k].inputs[i];
      if (t < 0 || g->tensors[t].producer < 0) continue;
      if (p->op_part[g->tensors[t].producer] == p->op_part[k]) continue;
      u[m++] = (use){t, p->op_part[k]};
    }
  qsort(u, m, sizeof *u, use_cmp);
  size_t uniq = 0;
  for (size_t i = 0; i < m; i++)
    if (uniq == 0 || u[uniq - 1].tensor != u[i].tensor || u[uniq - 1].part != u[i].part) u[uniq++] = u[i];
  int32_t nb = 0;
  for (size_t i = 0; i < uniq; i++)
    if (i == 0 || u[i].tensor != u[i - 1].tensor) nb++;
  p->boundary = sg__malloc(((size_t)nb + 1) * sizeof *p->boundary);
  p->boundary_to = sg__malloc((uniq + 1) * sizeof *p->boundary_to);
  if (p->boundary == NULL || p->boundary_to == NULL) {
    sg__free(u);
    return SG_ERR_NO_MEMORY;
  }
  p->n_boundary = 0;
  for (size_t i = 0; i < uniq; i++) {
    const sg__tensor *t = &g->tensors[u[i].tensor];
    if (i == 0 || u[i].tensor != u[i - 1].tensor) {
      sg__boundary *b = &p->boundary[p->n_boundary++];
      b->tensor = u[i].tensor;
      b->from = p->op_part[t->producer];
      b->bytes = (double)t->nbytes;
      b->to_off = (int32_t)i;
      b->n_to = 0;
    }
    sg__boundary *b = &p->boundary[p->n_boundary - 1];
    p->boundary_to[i] = u[i].part;
    b->n_to++;
    p->parts[b->from].send += b->bytes;
    p->parts[u[i].part].recv += b->bytes;
    p->report.cut_bytes += b->bytes;
  }
  sg__free(u);
  return SG_OK;
}

sg_status sg__partition_compute_report(sg_partition *p) {
  const sg__pmodel *m = p->model;
  const sg__pgraph *pg = &m->pg;
  const sg__solve *s = &p->solve;
  int k = p->k;
  sg__partition_free_report(p);
  p->parts = sg__calloc((size_t)k, sizeof *p->parts);
  double *mem = sg__calloc((size_t)k, sizeof *mem), *comp = sg__calloc((size_t)k, sizeof *comp);
  int32_t *groups = sg__calloc((size_t)k, sizeof *groups);
  sg_status st = SG_ERR_NO_MEMORY;
  if (p->parts == NULL || mem == NULL || comp == NULL || groups == NULL) goto out;
  sg_partition_report *r = &p->report;
  memset(r, 0, sizeof *r);
  r->size = sizeof *r;
  r->parts = k;
  r->mode = p->params.mode;
  r->ops = m->n_ops;
  r->groups = pg->n;
  r->training = m->training;
  r->total_memory_bytes = pg->total_mem;
  r->total_flops = 0.0;
  for (int32_t op = 0; op < m->n_ops; op++) {
    p->parts[p->op_part[op]].ops++;
    r->total_flops += m->op_flops[op];
  }
  for (int32_t v = 0; v < pg->n; v++) {
    int q = p->group_part[v];
    mem[q] += pg->mem[v];
    comp[q] += pg->flops[v];
    groups[q]++;
    p->parts[q].est_seconds += sg__vertex_time(pg, v, &p->dev[q]);
    p->parts[q].score += sg__placement_score(s, p->group_part, v, q);
  }
  /* The ideal: the whole graph spread so that every device finishes at
   * once, 1 / sum(1 / T_p) with T_p the graph's time on device p. */
  double inv = 0.0;
  for (int q = 0; q < k; q++) {
    double t = 0.0;
    for (int32_t v = 0; v < pg->n; v++) t += sg__vertex_time(pg, v, &p->dev[q]);
    if (t > 0.0) inv += 1.0 / t;
  }
  double ideal = inv > 0.0 ? 1.0 / inv : 0.0, slowest = 0.0;
  for (int q = 0; q < k; q++) {
    p->parts[q].mem = mem[q];
    p->parts[q].comp = comp[q];
    if (groups[q] > 0) p->parts[q].score /= groups[q];
    if (p->parts[q].est_seconds > slowest) slowest = p->parts[q].est_seconds;
  }
  r->bottleneck_ratio = ideal > 0.0 ? slowest / ideal : 1.0;
  r->imbalance_pct = pg->total_mem > 0.0 ? (sg__max_ratio(mem, s->mem_target, k) - 1.0) * 100.0 : 0.0;
  r->compute_imbalance_pct =
      pg->total_flops > 0.0 ? (sg__max_ratio(comp, s->comp_target, k) - 1.0) * 100.0 : 0.0;
  r->acyclic = sg__quotient_acyclic(pg, p->group_part, k, NULL);
  r->seconds = p->seconds;
  if ((st = boundaries(p)) != SG_OK) goto out;
  r->boundary_tensors = p->n_boundary;
  st = SG_OK;
out:
  if (st == SG_ERR_NO_MEMORY) sg__error(st, "partition: out of memory for the report");
  sg__free(mem);
  sg__free(comp);
  sg__free(groups);
  return st;
}

sg_status sg_partition_get_report(const sg_partition *p, sg_partition_report *out) {
  if (p == NULL || out == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg_partition_get_report: NULL argument");
  size_t size = out->size;
  if (size < offsetof(sg_partition_report, mode))
    return sg__error(
        SG_ERR_INVALID_ARG,
        "sg_partition_get_report: report.size is %zu; initialise it with SG_PARTITION_REPORT_INIT", size);
  if (size > sizeof *out) size = sizeof *out;
  memcpy(out, &p->report, size);
  out->size = size;
  return SG_OK;
}

sg_status sg_partition_part(const sg_partition *p, int part, sg_partition_part_info *out) {
  if (p == NULL || out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_partition_part: NULL argument");
  size_t size = out->size;
  if (size < offsetof(sg_partition_part_info, memory_bytes))
    return sg__error(SG_ERR_INVALID_ARG,
                     "sg_partition_part: info.size is %zu; initialise it with SG_PARTITION_PART_INFO_INIT",
                     size);
  if (part < 0 || part >= p->k)
    return sg__error(SG_ERR_RANGE, "sg_partition_part: part %d of %d", part, p->k);
  const sg__part_stats *ps = &p->parts[part];
  sg_partition_part_info info = {sizeof info,
                                 ps->ops,
                                 ps->mem,
                                 p->solve.mem_target[part],
                                 isinf(p->solve.cap[part]) ? 0.0 : p->solve.cap[part],
                                 ps->comp,
                                 ps->est_seconds,
                                 ps->send,
                                 ps->recv,
                                 ps->score};
  if (size > sizeof info) size = sizeof info;
  memcpy(out, &info, size);
  out->size = size;
  return SG_OK;
}

int32_t sg_partition_num_boundary(const sg_partition *p) { return p ? p->n_boundary : 0; }

sg_status sg_partition_boundary(const sg_partition *p, int32_t i, sg_tensor *tensor, int *from, double *bytes,
                                const int **to, int *n_to) {
  if (p == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_partition_boundary: NULL partition");
  if (i < 0 || i >= p->n_boundary)
    return sg__error(SG_ERR_RANGE, "sg_partition_boundary: boundary tensor %d of %d", (int)i,
                     (int)p->n_boundary);
  const sg__boundary *b = &p->boundary[i];
  if (tensor) *tensor = (sg_tensor){b->tensor};
  if (from) *from = b->from;
  if (bytes) *bytes = b->bytes;
  if (to) *to = p->boundary_to + b->to_off;
  if (n_to) *n_to = b->n_to;
  return SG_OK;
}

/* ---- JSON ----------------------------------------------------------------- */

static const char *mode_name(sg_partition_mode m) { return m == SG_PARTITION_PIPELINE ? "pipeline" : "free"; }

/* The summary figures: what the CLI's --json and the random baseline share. */
static bool add_figures(cJSON *o, const sg_partition *p) {
  const sg_partition_report *r = &p->report;
  bool ok = cJSON_AddNumberToObject(o, "parts", r->parts) &&
            cJSON_AddStringToObject(o, "mode", mode_name(r->mode)) &&
            cJSON_AddNumberToObject(o, "cut_bytes", r->cut_bytes) &&
            cJSON_AddNumberToObject(o, "imbalance_pct", r->imbalance_pct) &&
            cJSON_AddNumberToObject(o, "compute_imbalance_pct", r->compute_imbalance_pct) &&
            cJSON_AddNumberToObject(o, "bottleneck_ratio", r->bottleneck_ratio) &&
            cJSON_AddBoolToObject(o, "acyclic", r->acyclic) &&
            cJSON_AddNumberToObject(o, "boundary_tensors", r->boundary_tensors) &&
            cJSON_AddNumberToObject(o, "seconds", r->seconds);
  cJSON *parts = ok ? cJSON_AddArrayToObject(o, "per_part") : NULL;
  if (parts == NULL) return false;
  for (int q = 0; q < p->k; q++) {
    const sg__part_stats *ps = &p->parts[q];
    cJSON *e = cJSON_CreateObject();
    if (e == NULL || !cJSON_AddItemToArray(parts, e)) {
      cJSON_Delete(e);
      return false;
    }
    double cap = isinf(p->solve.cap[q]) ? 0.0 : p->solve.cap[q];
    if (!cJSON_AddNumberToObject(e, "part", q) || !cJSON_AddStringToObject(e, "device", p->dev[q].name) ||
        !cJSON_AddNumberToObject(e, "ops", ps->ops) || !cJSON_AddNumberToObject(e, "memory_bytes", ps->mem) ||
        !cJSON_AddNumberToObject(e, "memory_target", p->solve.mem_target[q]) ||
        !cJSON_AddNumberToObject(e, "capacity_bytes", cap) ||
        !cJSON_AddNumberToObject(e, "flops", ps->comp) ||
        !cJSON_AddNumberToObject(e, "est_seconds", ps->est_seconds) ||
        !cJSON_AddNumberToObject(e, "send_bytes", ps->send) ||
        !cJSON_AddNumberToObject(e, "recv_bytes", ps->recv) ||
        !cJSON_AddNumberToObject(e, "score", ps->score))
      return false;
  }
  return true;
}

static bool add_boundary(cJSON *o, const sg_partition *p) {
  cJSON *list = cJSON_AddArrayToObject(o, "boundary");
  if (list == NULL) return false;
  for (int32_t i = 0; i < p->n_boundary; i++) {
    const sg__boundary *b = &p->boundary[i];
    cJSON *e = cJSON_CreateObject();
    if (e == NULL || !cJSON_AddItemToArray(list, e)) {
      cJSON_Delete(e);
      return false;
    }
    cJSON *to = cJSON_CreateIntArray(p->boundary_to + b->to_off, b->n_to);
    if (!cJSON_AddStringToObject(e, "tensor", p->g->tensors[b->tensor].name) ||
        !cJSON_AddNumberToObject(e, "bytes", b->bytes) || !cJSON_AddNumberToObject(e, "from", b->from) ||
        to == NULL || !cJSON_AddItemToObject(e, "to", to)) {
      cJSON_Delete(to);
      return false;
    }
  }
  return true;
}

static bool add_devices(cJSON *o, const sg_partition *p) {
  cJSON *list = cJSON_AddArrayToObject(o, "devices");
  if (list == NULL) return false;
  for (int q = 0; q < p->k; q++) {
    const sg__device *d = &p->dev[q];
    cJSON *e = cJSON_CreateObject();
    if (e == NULL || !cJSON_AddItemToArray(list, e)) {
      cJSON_Delete(e);
      return false;
    }
    if (!cJSON_AddStringToObject(e, "name", d->name) ||
        !cJSON_AddStringToObject(e, "kind", sg_device_kind_name(d->kind)) ||
        !cJSON_AddNumberToObject(e, "peak_flops", d->peak) ||
        !cJSON_AddNumberToObject(e, "memory_bytes", isinf(d->memory) ? 0.0 : d->memory) ||
        !cJSON_AddNumberToObject(e, "memory_bandwidth", d->bw) ||
        !cJSON_AddNumberToObject(e, "link_bandwidth", d->link_bw) ||
        !cJSON_AddNumberToObject(e, "link_latency_us", d->link_lat * 1e6))
      return false;
  }
  return true;
}

static sg_status print_json(cJSON *o, char **out) {
  char *text = o ? cJSON_PrintUnformatted(o) : NULL;
  cJSON_Delete(o);
  if (text == NULL) return sg__error(SG_ERR_NO_MEMORY, "partition report: out of memory");
  /* cJSON allocates with malloc; callers free with sg_free. */
  *out = sg__strdup(text);
  free(text);
  return *out ? SG_OK : sg__error(SG_ERR_NO_MEMORY, "partition report: out of memory");
}

sg_status sg_partition_report_json(const sg_partition *p, char **out) {
  if (out) *out = NULL;
  if (p == NULL || out == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg_partition_report_json: NULL argument");
  const sg_partition_report *r = &p->report;
  cJSON *o = cJSON_CreateObject();
  bool ok =
      o && add_figures(o, p) && cJSON_AddNumberToObject(o, "ops", r->ops) &&
      cJSON_AddNumberToObject(o, "groups", r->groups) && cJSON_AddBoolToObject(o, "training", r->training) &&
      cJSON_AddNumberToObject(o, "total_memory_bytes", r->total_memory_bytes) &&
      cJSON_AddNumberToObject(o, "total_flops", r->total_flops) &&
      cJSON_AddNumberToObject(o, "imbalance_tolerance_pct", p->params.imbalance * 100.0) &&
      cJSON_AddNumberToObject(o, "alpha", p->params.alpha) &&
      cJSON_AddNumberToObject(o, "seed", (double)p->params.seed) && add_devices(o, p) && add_boundary(o, p);
  if (ok && p->baseline) {
    cJSON *rnd = cJSON_AddObjectToObject(o, "random");
    ok = rnd && add_figures(rnd, p->baseline);
  }
  if (!ok) {
    cJSON_Delete(o);
    o = NULL;
  }
  return print_json(o, out);
}

/* ---- text table ----------------------------------------------------------- */

/* Decimal units, as the seed's "128.4 MB". */
static const char *human(double x, const char *unit, char *buf, size_t cap) {
  static const char *const prefix[] = {"", "k", "M", "G", "T", "P"};
  int i = 0;
  while (fabs(x) >= 1000.0 && i < 5) x /= 1000.0, i++;
  snprintf(buf, cap, i == 0 ? "%.0f %s%s" : "%.1f %s%s", x, prefix[i], unit);
  return buf;
}

static void figures_row(sg__strbuf *b, const char *label, const sg_partition *p) {
  const sg_partition_report *r = &p->report;
  char cut[32];
  sg__strbuf_put(b, "%-10s %12s %10.1f%% %11.1f%% %11.2f %8s %9d\n", label,
                 human(r->cut_bytes, "B", cut, sizeof cut), r->imbalance_pct, r->compute_imbalance_pct,
                 r->bottleneck_ratio, r->acyclic ? "yes" : "no", (int)r->boundary_tensors);
}

sg_status sg_partition_report_text(const sg_partition *p, char **out) {
  if (out) *out = NULL;
  if (p == NULL || out == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg_partition_report_text: NULL argument");
  const sg_partition_report *r = &p->report;
  sg__strbuf b = {0};
  char x[32], y[32], z[32], w[32], v[32];
  sg__strbuf_put(&b, "%d parts, %s mode: %d ops in %d groups (%s graph), %s of memory, %s per step, %.3f s\n",
                 r->parts, mode_name(r->mode), (int)r->ops, (int)r->groups,
                 r->training ? "training" : "forward", human(r->total_memory_bytes, "B", x, sizeof x),
                 human(r->total_flops, "FLOP", y, sizeof y), r->seconds);
  sg__strbuf_put(&b, "\n%-10s %12s %11s %12s %11s %8s %9s\n", "", "cut", "memory imb.", "compute imb.",
                 "bottleneck", "acyclic", "boundary");
  figures_row(&b, "partition", p);
  if (p->baseline) figures_row(&b, "random", p->baseline);
  sg__strbuf_put(&b, "\n%4s  %-16s %6s %11s %11s %11s %12s %10s %11s %11s %6s\n", "part", "device", "ops",
                 "memory", "target", "capacity", "compute", "est. time", "send", "recv", "score");
  for (int q = 0; q < p->k; q++) {
    const sg__part_stats *ps = &p->parts[q];
    char cap[32], t[32];
    if (isinf(p->solve.cap[q])) snprintf(cap, sizeof cap, "-");
    else human(p->solve.cap[q], "B", cap, sizeof cap);
    snprintf(t, sizeof t, "%.3g s", ps->est_seconds);
    sg__strbuf_put(&b, "%4d  %-16.16s %6d %11s %11s %11s %12s %10s %11s %11s %6.3f\n", q, p->dev[q].name,
                   (int)ps->ops, human(ps->mem, "B", x, sizeof x),
                   human(p->solve.mem_target[q], "B", y, sizeof y), cap, human(ps->comp, "FLOP", z, sizeof z),
                   t, human(ps->send, "B", w, sizeof w), human(ps->recv, "B", v, sizeof v), ps->score);
  }
  if (b.failed || b.s == NULL) {
    sg__free(b.s);
    return sg__error(SG_ERR_NO_MEMORY, "partition report: out of memory");
  }
  *out = b.s;
  return SG_OK;
}

/* ---- DOT ------------------------------------------------------------------ */

static void put_escaped(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    fputc(*s, f);
  }
}

/* Twelve distinct pastel fills, then evenly spread hues. */
static void put_color(FILE *f, int part, int k) {
  static const char *const palette[] = {"#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462",
                                        "#b3de69", "#fccde5", "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f"};
  if (k <= 12) fprintf(f, "%s", palette[part]);
  else fprintf(f, "%.3f 0.45 0.95", (double)part / (double)k);
}

static void write_dot(const sg_partition *p, FILE *f) {
  const sg_graph *g = p->g;
  fprintf(f,
          "digraph partition {\n"
          "  rankdir=TB;\n"
          "  label=\"%d parts (%s), cut %.0f bytes\";\n"
          "  node [shape=box, style=filled, fontname=\"Helvetica\", fontsize=10];\n"
          "  edge [fontname=\"Helvetica\", fontsize=9];\n",
          p->k, mode_name(p->params.mode), p->report.cut_bytes);
  for (uint32_t k = 0; k < g->n_ops; k++) {
    const sg__op *op = &g->ops[k];
    int q = p->op_part[k];
    fprintf(f, "  op%u [fillcolor=\"", k);
    put_color(f, q, p->k);
    fprintf(f, "\", label=\"%s\\n", sg_op_kind_name(op->kind));
    put_escaped(f, op->name);
    fprintf(f, "\\npart %d\"];\n", q);
  }
  for (uint32_t k = 0; k < g->n_ops; k++) {
    const sg__op *op = &g->ops[k];
    for (int i = 0; i < op->n_inputs; i++) {
      int32_t t = op->inputs[i];
      if (t < 0 || g->tensors[t].producer < 0) continue;
      /* One edge per tensor and consumer, even if read twice. */
      bool dup = false;
      for (int j = 0; j < i; j++) dup = dup || op->inputs[j] == t;
      if (dup) continue;
      int32_t src = g->tensors[t].producer;
      if (p->op_part[src] == p->op_part[k]) {
        fprintf(f, "  op%d -> op%u;\n", (int)src, k);
      } else {
        char b[32];
        fprintf(f, "  op%d -> op%u [color=\"#d62728\", penwidth=2.5, label=\"%s\"];\n", (int)src, k,
                human((double)g->tensors[t].nbytes, "B", b, sizeof b));
      }
    }
  }
  fputs("}\n", f);
}

sg_status sg_partition_write_dot(const sg_partition *p, const char *path) {
  if (p == NULL || path == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg_partition_write_dot: NULL argument");
  bool to_stdout = strcmp(path, "-") == 0;
  FILE *f = stdout;
  /* A FIFO, a device or a directory is refused, not waited on ("-" is stdout). */
  if (!to_stdout) SG_CHECK(sg__fopen_regular(path, true, &f));
  write_dot(p, f);
  int bad = ferror(f);
  if (to_stdout) bad = fflush(f) != 0 || bad;
  else bad = fclose(f) != 0 || bad;
  return bad ? sg__error(SG_ERR_IO, "writing '%s' failed", path) : SG_OK;
}
