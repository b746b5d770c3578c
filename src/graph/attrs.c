/* The generic op constructor: arity, attributes against the kind's schema,
 * shape inference, and creation of the output tensors. Every typed builder
 * in ops_*.c ends here, and so do importers. */
#include <stdio.h>
#include <string.h>

#include "graph/graph_internal.h"

/* A bound as messages write it: 2^30 rather than 1073741824. */
static const char *bound_str(char *buf, size_t cap, int64_t v) {
  if (v == SG__MAX_ATTR_DIM) snprintf(buf, cap, "2^30");
  else if (v == SG__MAX_NUMEL) snprintf(buf, cap, "2^56");
  else snprintf(buf, cap, "%lld", (long long)v);
  return buf;
}

sg_status sg__attr_check_bounds(const char *kind, const char *op_name, const sg__attr_schema *s,
                                const sg_attr *a) {
  if (!s->bounded || (s->type != SG_ATTR_INT && s->type != SG_ATTR_INTS)) return SG_OK;
  int n = s->type == SG_ATTR_INT ? 1 : a->count;
  const int64_t *v = s->type == SG_ATTR_INT ? &a->i : a->ints;
  for (int i = 0; i < n; i++) {
    if (v[i] >= s->min_value && v[i] <= s->max_value) continue;
    char lo[32], hi[32];
    bound_str(lo, sizeof lo, s->min_value);
    bound_str(hi, sizeof hi, s->max_value);
    if (s->type == SG_ATTR_INT)
      return sg__error(SG_ERR_ATTRIBUTE, "%s '%s': %s is %lld; must be in %s..%s", kind, op_name, s->name,
                       (long long)v[i], lo, hi);
    /* All values first ("stride (2147483648,1)"), then the offending one. */
    char all[160];
    size_t o = (size_t)snprintf(all, sizeof all, "(");
    for (int k = 0; k < n && o < sizeof all; k++)
      o += (size_t)snprintf(all + o, sizeof all - o, "%s%lld", k ? "," : "", (long long)v[k]);
    if (o < sizeof all) snprintf(all + o, sizeof all - o, ")");
    return sg__error(SG_ERR_ATTRIBUTE, "%s '%s': %s %s: %s[%d] is %lld; must be in %s..%s", kind, op_name,
                     s->name, all, s->name, i, (long long)v[i], lo, hi);
  }
  return SG_OK;
}

sg_status sg__canon_attrs(sg_graph *g, const sg__op_def *def, const char *op_name, int n_attrs,
                          const sg_attr *attrs, sg_attr **out) {
  *out = NULL;
  if (n_attrs < 0 || (n_attrs > 0 && attrs == NULL))
    return sg__error(SG_ERR_INVALID_ARG, "%s '%s': attrs is NULL or n_attrs < 0", def->name, op_name);
  /* Every given attribute must exist in the schema, once. */
  for (int i = 0; i < n_attrs; i++) {
    if (attrs[i].name == NULL)
      return sg__error(SG_ERR_ATTRIBUTE, "%s '%s': attribute %d has no name", def->name, op_name, i);
    int k = 0;
    while (k < def->n_attrs && strcmp(def->attrs[k].name, attrs[i].name) != 0) k++;
    if (k == def->n_attrs)
      return sg__error(SG_ERR_ATTRIBUTE, "%s '%s': unknown attribute '%s'", def->name, op_name,
                       attrs[i].name);
    for (int j = 0; j < i; j++)
      if (strcmp(attrs[j].name, attrs[i].name) == 0)
        return sg__error(SG_ERR_ATTRIBUTE, "%s '%s': attribute '%s' given twice", def->name, op_name,
                         attrs[i].name);
  }
  sg_attr *canon = NULL;
  if (def->n_attrs > 0) {
    canon = sg__arena_alloc(&g->arena, sizeof *canon * (size_t)def->n_attrs, 8);
    if (canon == NULL) return sg__error(SG_ERR_NO_MEMORY, "%s '%s': out of memory", def->name, op_name);
  }
  for (int k = 0; k < def->n_attrs; k++) {
    const sg__attr_schema *s = &def->attrs[k];
    const sg_attr *given = NULL;
    for (int i = 0; i < n_attrs; i++)
      if (strcmp(attrs[i].name, s->name) == 0) given = &attrs[i];
    sg_attr a = {.name = s->name, .type = s->type};
    if (given == NULL) {
      if (s->required)
        return sg__error(SG_ERR_ATTRIBUTE, "%s '%s': required attribute '%s' is missing", def->name, op_name,
                         s->name);
      a.i = s->def_i;
      a.f = s->def_f;
      a.count = s->def_count;
      a.ints = s->def_ints;
    } else {
      if (given->type != s->type)
        return sg__error(SG_ERR_ATTRIBUTE, "%s '%s': attribute '%s' has type %d, expected %d", def->name,
                         op_name, s->name, (int)given->type, (int)s->type);
      a.i = given->i;
      a.f = given->f;
      a.count = given->count;
      a.ints = given->ints;
    }
    if (s->type == SG_ATTR_INTS) {
      if (a.count < s->min_count || a.count > s->max_count || (a.count > 0 && a.ints == NULL))
        return sg__error(SG_ERR_ATTRIBUTE, "%s '%s': attribute '%s' needs %d..%d values, got %d", def->name,
                         op_name, s->name, s->min_count, s->max_count, a.count);
      a.ints = a.count ? sg__arena_memdup(&g->arena, a.ints, sizeof(int64_t) * (size_t)a.count, 8) : NULL;
      if (a.count && a.ints == NULL)
        return sg__error(SG_ERR_NO_MEMORY, "%s '%s': out of memory", def->name, op_name);
    } else {
      a.count = 0;
      a.ints = NULL;
    }
    if (s->type != SG_ATTR_INT) a.i = 0;
    if (s->type != SG_ATTR_FLOAT) a.f = 0;
    SG_CHECK(sg__attr_check_bounds(def->name, op_name, s, &a));
    canon[k] = a;
  }
  *out = canon;
  return SG_OK;
}

/* A name not yet used by any tensor: `base`, else base_1, base_2, ... */
static char *unique_tensor_name(sg_graph *g, const char *base) {
  if (sg__tensor_lookup(g, base) < 0) return sg__arena_strdup(&g->arena, base);
  char buf[SG__MAX_NAME + 16];
  for (uint32_t k = 1;; k++) {
    snprintf(buf, sizeof buf, "%s_%u", base, k);
    if (sg__tensor_lookup(g, buf) < 0) return sg__arena_strdup(&g->arena, buf);
  }
}

static char *unique_op_name(sg_graph *g, const char *kind) {
  char buf[64];
  for (uint32_t k = g->n_ops;; k++) {
    snprintf(buf, sizeof buf, "%s_%u", kind, k);
    if (sg__op_lookup(g, buf) < 0) return sg__arena_strdup(&g->arena, buf);
  }
}

static sg_status add_op(sg_graph *g, sg_op_kind kind, int n_inputs, const sg_tensor *inputs, int n_attrs,
                        const sg_attr *attrs, int max_outputs, sg_tensor *outputs, int *n_outputs) {
  const sg__op_def *def = sg__op_def_get(kind);
  if (def == NULL) return sg__error(SG_ERR_UNSUPPORTED, "unknown op kind %d", (int)kind);
  if (n_inputs < def->min_inputs || (def->max_inputs >= 0 && n_inputs > def->max_inputs) ||
      n_inputs > SG__MAX_OP_IO) {
    if (def->max_inputs == def->min_inputs)
      return sg__error(SG_ERR_ARITY, "%s takes %d inputs, got %d", def->name, def->min_inputs, n_inputs);
    return sg__error(SG_ERR_ARITY, "%s takes %d..%d inputs, got %d", def->name, def->min_inputs,
                     def->max_inputs < 0 ? SG__MAX_OP_IO : def->max_inputs, n_inputs);
  }
  if (n_inputs > 0 && inputs == NULL) return sg__error(SG_ERR_INVALID_ARG, "%s: inputs is NULL", def->name);
  sg__op op = {.kind = kind, .n_inputs = n_inputs};
  op.name = unique_op_name(g, def->name);
  if (op.name == NULL) return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", def->name);
  for (int i = 0; i < n_inputs; i++) {
    int32_t id = inputs[i].id;
    bool optional = i < 32 && (def->optional_inputs >> i & 1u);
    if (id < 0 && optional) continue;
    if (id < 0 || (uint32_t)id >= g->n_tensors)
      return sg__error(SG_ERR_INVALID_ARG, "%s '%s': input %d is %s (tensor id %d)", def->name, op.name, i,
                       id < 0 ? "missing" : "not a tensor of this graph", id);
  }
  op.inputs = sg__arena_alloc(&g->arena, sizeof(int32_t) * (size_t)(n_inputs ? n_inputs : 1), 4);
  if (op.inputs == NULL) return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", def->name);
  for (int i = 0; i < n_inputs; i++) op.inputs[i] = inputs[i].id < 0 ? -1 : inputs[i].id;
  SG_CHECK(sg__canon_attrs(g, def, op.name, n_attrs, attrs, &op.attrs));
  op.n_attrs = def->n_attrs;

  sg__shape outs[SG__MAX_OUTPUTS];
  int n_outs = 0;
  SG_CHECK(def->infer(g, &op, outs, &n_outs));
  for (int k = 0; k < n_outs; k++) {
    int64_t numel;
    if (!sg__numel_checked(outs[k].ndim, outs[k].dims, &numel))
      return sg__error(SG_ERR_RANGE, "%s '%s': output %d would have more than 2^56 elements", def->name,
                       op.name, k);
  }

  op.n_outputs = n_outs;
  op.outputs = sg__arena_alloc(&g->arena, sizeof(int32_t) * (size_t)(n_outs ? n_outs : 1), 4);
  if (op.outputs == NULL) return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", def->name);
  int32_t op_index = (int32_t)g->n_ops;
  for (int k = 0; k < n_outs; k++) {
    char base[SG__MAX_NAME];
    if (n_outs == 1) snprintf(base, sizeof base, "%s", op.name);
    else snprintf(base, sizeof base, "%s:%d", op.name, k);
    sg__tensor t = {.dtype = outs[k].dtype,
                    .role = g->grad_mode ? SG_ROLE_GRADIENT : def->output_role,
                    .ndim = outs[k].ndim,
                    .producer = op_index};
    memcpy(t.dims, outs[k].dims, sizeof t.dims);
    t.nbytes = (size_t)sg__numel(t.ndim, t.dims) * sg_dtype_size(t.dtype);
    t.name = unique_tensor_name(g, base);
    if (t.name == NULL) return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", def->name);
    SG_CHECK(sg__graph_push_tensor(g, &t, &op.outputs[k]));
    if (sg__names_insert(g, false, op.outputs[k]) != SG_OK)
      return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", def->name);
  }
  SG_CHECK(sg__graph_push_op(g, &op));
  if (sg__names_insert(g, true, op_index) != SG_OK)
    return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", def->name);
  for (int k = 0; k < n_outs && k < max_outputs && outputs; k++) outputs[k] = (sg_tensor){op.outputs[k]};
  if (n_outputs) *n_outputs = n_outs;
  return SG_OK;
}

sg_status sg_graph_add_op(sg_graph *g, sg_op_kind kind, int n_inputs, const sg_tensor *inputs, int n_attrs,
                          const sg_attr *attrs, int max_outputs, sg_tensor *outputs, int *n_outputs) {
  for (int k = 0; k < max_outputs && outputs; k++) outputs[k] = SG_NO_TENSOR;
  if (n_outputs) *n_outputs = 0;
  if (g == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_graph_add_op: graph is NULL");
  /* Sticky: the first error's message stays in sg_last_error(). */
  if (g->error != SG_OK) return g->error;
  if (g->finalized)
    return sg__error(SG_ERR_STATE, "cannot add %s: the graph is finalized", sg_op_kind_name(kind));
  sg_status st = add_op(g, kind, n_inputs, inputs, n_attrs, attrs, max_outputs, outputs, n_outputs);
  return st == SG_OK ? SG_OK : sg__graph_fail(g, st);
}

sg_tensor sg__build1(sg_graph *g, sg_op_kind kind, int n_inputs, const sg_tensor *inputs, int n_attrs,
                     const sg_attr *attrs) {
  sg_tensor out = SG_NO_TENSOR;
  sg_graph_add_op(g, kind, n_inputs, inputs, n_attrs, attrs, 1, &out, NULL);
  return out;
}
