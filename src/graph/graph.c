/* Graph lifecycle, source tensors, outputs and read-only queries. */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "graph/graph_internal.h"

sg_status sg_graph_create(sg_graph **out) {
  if (out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_graph_create: out is NULL");
  *out = NULL;
  sg_graph *g = sg__calloc(1, sizeof *g);
  if (g == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_graph_create: out of memory");
  sg__arena_init(&g->arena);
  *out = g;
  return SG_OK;
}

void sg_graph_destroy(sg_graph *g) {
  if (g == NULL) return;
  sg__arena_destroy(&g->arena);
  sg__free(g->tensors);
  sg__free(g->ops);
  sg__free(g->inputs);
  sg__free(g->outputs);
  sg__names_clear(&g->tensor_names);
  sg__names_clear(&g->op_names);
  sg__unmap_file(g->mapping, g->mapping_size);
  sg__free(g);
}

sg_status sg_graph_status(const sg_graph *g) { return g ? g->error : SG_ERR_INVALID_ARG; }

int sg_graph_is_finalized(const sg_graph *g) { return g && g->finalized; }

sg_status sg__graph_fail(sg_graph *g, sg_status st) {
  if (g && g->error == SG_OK && st != SG_OK) {
    g->error = st;
    snprintf(g->error_message, sizeof g->error_message, "%s", sg_last_error());
  }
  return st;
}

sg_status sg__graph_params(sg_graph *g, const char *fn, sg__versioned v, void *dst, const void *src) {
  return sg__graph_fail(g, sg__params_read(fn, v, dst, src));
}

sg_status sg__graph_sticky_error(const sg_graph *g) {
  if (g->error_message[0] != '\0') return sg__error(g->error, "%s", g->error_message);
  return sg__error(g->error, "the graph has an earlier builder error (%s)", sg_status_str(g->error));
}

sg_status sg_graph_finalize(sg_graph *g) {
  if (g == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_graph_finalize: graph is NULL");
  if (g->finalized) return SG_OK;
  if (g->error != SG_OK) return sg__graph_sticky_error(g);
  SG_CHECK(sg_graph_verify(g));
  g->finalized = true;
  return SG_OK;
}

sg_status sg__graph_push_tensor(sg_graph *g, const sg__tensor *t, int32_t *id) {
  if (g->n_tensors >= SG__MAX_TENSORS)
    return sg__error(SG_ERR_RANGE, "graph has the maximum of %u tensors", SG__MAX_TENSORS);
  if (sg__grow((void **)&g->tensors, &g->cap_tensors, g->n_tensors + 1, sizeof *g->tensors) != SG_OK)
    return sg__error(SG_ERR_NO_MEMORY, "out of memory adding tensor '%s'", t->name);
  sg__tensor *dst = &g->tensors[g->n_tensors];
  *dst = *t;
  dst->name = sg__arena_strdup(&g->arena, t->name);
  if (dst->name == NULL) return sg__error(SG_ERR_NO_MEMORY, "out of memory adding tensor '%s'", t->name);
  if (t->role == SG_ROLE_INPUT) {
    if (sg__grow((void **)&g->inputs, &g->cap_inputs, g->n_inputs + 1, sizeof *g->inputs) != SG_OK)
      return sg__error(SG_ERR_NO_MEMORY, "out of memory adding input '%s'", t->name);
    g->inputs[g->n_inputs++] = (int32_t)g->n_tensors;
  }
  *id = (int32_t)g->n_tensors++;
  return SG_OK;
}

sg_status sg__graph_push_op(sg_graph *g, const sg__op *op) {
  if (g->n_ops >= SG__MAX_OPS) return sg__error(SG_ERR_RANGE, "graph has the maximum of %u ops", SG__MAX_OPS);
  if (sg__grow((void **)&g->ops, &g->cap_ops, g->n_ops + 1, sizeof *g->ops) != SG_OK)
    return sg__error(SG_ERR_NO_MEMORY, "out of memory adding op '%s'", op->name);
  g->ops[g->n_ops++] = *op;
  return SG_OK;
}

/* Validates a shape given through the API; fills numel. */
static sg_status check_shape(const char *what, const char *name, int ndim, const int64_t *dims,
                             int64_t *numel) {
  if (ndim < 0 || ndim > SG_MAX_DIMS)
    return sg__error(SG_ERR_SHAPE, "%s '%s': rank %d is outside 0..%d", what, name, ndim, SG_MAX_DIMS);
  if (ndim > 0 && dims == NULL) return sg__error(SG_ERR_INVALID_ARG, "%s '%s': dims is NULL", what, name);
  for (int i = 0; i < ndim; i++)
    if (dims[i] < 1)
      return sg__error(SG_ERR_SHAPE, "%s '%s': dim %d is %lld; dims must be >= 1", what, name, i,
                       (long long)dims[i]);
  if (!sg__numel_checked(ndim, dims, numel))
    return sg__error(SG_ERR_RANGE, "%s '%s': element count exceeds 2^56", what, name);
  return SG_OK;
}

sg_tensor sg_graph_add_tensor(sg_graph *g, const char *name, sg_dtype dtype, sg_role role, int ndim,
                              const int64_t *dims, const void *data) {
  sg_status st;
  int32_t id = -1;
  if (g == NULL) {
    sg__error(SG_ERR_INVALID_ARG, "sg_graph_add_tensor: graph is NULL");
    return SG_NO_TENSOR;
  }
  if (g->finalized) {
    /* A finalized graph is immutable: the error is not recorded on it. */
    sg__error(SG_ERR_STATE, "cannot add tensor '%s': the graph is finalized", name ? name : "");
    return SG_NO_TENSOR;
  }
  const char *bad = sg__name_problem(name);
  if (bad) {
    st = sg__error(SG_ERR_INVALID_ARG, "sg_graph_add_tensor: the tensor name %s", bad);
    goto fail;
  }
  if (!sg__dtype_valid(dtype)) {
    st = sg__error(SG_ERR_DTYPE, "tensor '%s': unknown dtype %d", name, (int)dtype);
    goto fail;
  }
  if (!sg__role_valid(role) || role == SG_ROLE_ACTIVATION || role == SG_ROLE_GRADIENT) {
    st = sg__error(SG_ERR_INVALID_ARG,
                   "tensor '%s': role %d cannot be added directly (activations and gradients are "
                   "produced by ops)",
                   name, (int)role);
    goto fail;
  }
  int64_t numel;
  SG_CHECK_GOTO(check_shape("tensor", name, ndim, dims, &numel), st, fail);
  if (role == SG_ROLE_CONSTANT && data == NULL) {
    st = sg__error(SG_ERR_INVALID_ARG, "constant '%s' needs data", name);
    goto fail;
  }
  if (role == SG_ROLE_INPUT && data != NULL) {
    st = sg__error(SG_ERR_INVALID_ARG, "input '%s' cannot have data; inputs are fed each step", name);
    goto fail;
  }
  if (sg__tensor_lookup(g, name) >= 0) {
    st = sg__error(SG_ERR_DUPLICATE, "tensor name '%s' is already used", name);
    goto fail;
  }
  sg__tensor t = {.name = name, .dtype = dtype, .role = role, .ndim = ndim, .producer = -1};
  for (int i = 0; i < ndim; i++) t.dims[i] = dims[i];
  t.nbytes = (size_t)numel * sg_dtype_size(dtype);
  if (data) {
    t.data = sg__arena_memdup(&g->arena, data, t.nbytes, 64);
    if (t.data == NULL) {
      st = sg__error(SG_ERR_NO_MEMORY, "out of memory copying data of tensor '%s'", name);
      goto fail;
    }
  }
  SG_CHECK_GOTO(sg__graph_push_tensor(g, &t, &id), st, fail);
  if (sg__names_insert(g, false, id) != SG_OK) {
    st = sg__error(SG_ERR_NO_MEMORY, "out of memory indexing tensor '%s'", name);
    goto fail;
  }
  return (sg_tensor){id};
fail:
  sg__graph_fail(g, st);
  return SG_NO_TENSOR;
}

sg_tensor sg_input(sg_graph *g, const char *name, sg_dtype dtype, int ndim, const int64_t *dims) {
  return sg_graph_add_tensor(g, name, dtype, SG_ROLE_INPUT, ndim, dims, NULL);
}
sg_tensor sg_parameter(sg_graph *g, const char *name, sg_dtype dtype, int ndim, const int64_t *dims,
                       const void *data) {
  return sg_graph_add_tensor(g, name, dtype, SG_ROLE_PARAMETER, ndim, dims, data);
}
sg_tensor sg_constant(sg_graph *g, const char *name, sg_dtype dtype, int ndim, const int64_t *dims,
                      const void *data) {
  return sg_graph_add_tensor(g, name, dtype, SG_ROLE_CONSTANT, ndim, dims, data);
}

static bool valid_tensor(const sg_graph *g, sg_tensor t) {
  return g && t.id >= 0 && (uint32_t)t.id < g->n_tensors;
}

sg_status sg_tensor_set_name(sg_graph *g, sg_tensor t, const char *name) {
  if (g == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_tensor_set_name: graph is NULL");
  if (g->error) return g->error;
  if (g->finalized) return sg__error(SG_ERR_STATE, "cannot rename: the graph is finalized");
  if (!valid_tensor(g, t))
    return sg__error(SG_ERR_RANGE, "sg_tensor_set_name: tensor id %d is out of range", t.id);
  const char *bad = sg__name_problem(name);
  if (bad) return sg__error(SG_ERR_INVALID_ARG, "sg_tensor_set_name: the name %s", bad);
  int32_t other = sg__tensor_lookup(g, name);
  if (other == t.id) return SG_OK;
  if (other >= 0) return sg__error(SG_ERR_DUPLICATE, "tensor name '%s' is already used", name);
  char *copy = sg__arena_strdup(&g->arena, name);
  if (copy == NULL) return sg__error(SG_ERR_NO_MEMORY, "out of memory renaming to '%s'", name);
  /* Rebuild the map entry: remove by re-indexing all names (renames are rare). */
  const char *old = g->tensors[t.id].name;
  g->tensors[t.id].name = copy;
  sg__names_clear(&g->tensor_names);
  for (uint32_t i = 0; i < g->n_tensors; i++) {
    if (sg__names_insert(g, false, (int32_t)i) != SG_OK) {
      g->tensors[t.id].name = old;
      sg__names_clear(&g->tensor_names);
      return sg__graph_fail(g, sg__error(SG_ERR_NO_MEMORY, "out of memory renaming to '%s'", name));
    }
  }
  return SG_OK;
}

sg_status sg_graph_mark_output(sg_graph *g, sg_tensor t) {
  if (g == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_graph_mark_output: graph is NULL");
  if (g->error) return g->error;
  if (g->finalized) return sg__error(SG_ERR_STATE, "cannot mark an output: the graph is finalized");
  if (!valid_tensor(g, t))
    return sg__graph_fail(
        g, sg__error(SG_ERR_RANGE, "sg_graph_mark_output: tensor id %d is out of range", t.id));
  for (uint32_t i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] == t.id) return SG_OK;
  if (sg__grow((void **)&g->outputs, &g->cap_outputs, g->n_outputs + 1, sizeof *g->outputs) != SG_OK)
    return sg__graph_fail(g, sg__error(SG_ERR_NO_MEMORY, "out of memory marking an output"));
  g->outputs[g->n_outputs++] = t.id;
  return SG_OK;
}

/* ---- queries ------------------------------------------------------------ */

int32_t sg_graph_num_tensors(const sg_graph *g) { return g ? (int32_t)g->n_tensors : 0; }
int32_t sg_graph_num_ops(const sg_graph *g) { return g ? (int32_t)g->n_ops : 0; }
int32_t sg_graph_num_inputs(const sg_graph *g) { return g ? (int32_t)g->n_inputs : 0; }
int32_t sg_graph_num_outputs(const sg_graph *g) { return g ? (int32_t)g->n_outputs : 0; }

sg_tensor sg_graph_input(const sg_graph *g, int32_t i) {
  if (!g || i < 0 || (uint32_t)i >= g->n_inputs) return SG_NO_TENSOR;
  return (sg_tensor){g->inputs[i]};
}

sg_tensor sg_graph_output(const sg_graph *g, int32_t i) {
  if (!g || i < 0 || (uint32_t)i >= g->n_outputs) return SG_NO_TENSOR;
  return (sg_tensor){g->outputs[i]};
}

sg_status sg_graph_tensor_info(const sg_graph *g, sg_tensor t, sg_tensor_info *out) {
  if (g == NULL || out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_graph_tensor_info: NULL argument");
  if (!valid_tensor(g, t))
    return sg__error(SG_ERR_RANGE, "tensor id %d is out of range (graph has %u)", t.id, g->n_tensors);
  const sg__tensor *s = &g->tensors[t.id];
  memset(out, 0, sizeof *out);
  out->name = s->name;
  out->dtype = s->dtype;
  out->role = s->role;
  out->ndim = s->ndim;
  for (int i = 0; i < s->ndim; i++) out->dims[i] = s->dims[i];
  out->numel = sg__numel(s->ndim, s->dims);
  out->nbytes = s->nbytes;
  out->data = s->data;
  out->producer = s->producer;
  return SG_OK;
}

sg_status sg_graph_op_info(const sg_graph *g, int32_t op, sg_op_info *out) {
  if (g == NULL || out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_graph_op_info: NULL argument");
  if (op < 0 || (uint32_t)op >= g->n_ops)
    return sg__error(SG_ERR_RANGE, "op index %d is out of range (graph has %u)", op, g->n_ops);
  const sg__op *o = &g->ops[op];
  *out = (sg_op_info){o->kind, o->name, o->n_inputs, o->inputs, o->n_outputs, o->outputs, o->n_attrs};
  return SG_OK;
}

sg_status sg_graph_op_attr(const sg_graph *g, int32_t op, int index, sg_attr *out) {
  if (g == NULL || out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_graph_op_attr: NULL argument");
  if (op < 0 || (uint32_t)op >= g->n_ops)
    return sg__error(SG_ERR_RANGE, "op index %d is out of range (graph has %u)", op, g->n_ops);
  const sg__op *o = &g->ops[op];
  if (index < 0 || index >= o->n_attrs)
    return sg__error(SG_ERR_RANGE, "op '%s' has %d attributes; index %d is out of range", o->name, o->n_attrs,
                     index);
  *out = o->attrs[index];
  return SG_OK;
}

sg_status sg_graph_find_tensor(const sg_graph *g, const char *name, sg_tensor *out) {
  if (g == NULL || name == NULL || out == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg_graph_find_tensor: NULL argument");
  int32_t id = sg__tensor_lookup(g, name);
  *out = (sg_tensor){id};
  if (id < 0) return sg__error(SG_ERR_NOT_FOUND, "no tensor named '%s'", name);
  return SG_OK;
}
