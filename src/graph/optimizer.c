/* Optimizers as graph ops (SPEC G7): one update op per parameter that has a
 * gradient, with its state tensors named like PyTorch's optimizer state, so
 * the compiled step is forward + backward + update as one graph. */
#include <stdio.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "sgrt/train.h"

typedef enum { OPT_SGD, OPT_ADAMW } opt_kind;

typedef struct opt_request {
  opt_kind kind;
  const char *fn;         /* the API function */
  sg__versioned versions; /* of its params struct */
  const void *given;      /* the caller's params; NULL: the defaults */
  void *params;           /* holds the defaults and receives the caller's params: sgd or adamw */
  const sg_sgd_params *sgd;
  const sg_adamw_params *adamw;
} opt_request;

/* The gradient of parameter t, as sg_graph_backward() named it, or -1. */
static int32_t gradient_of(const sg_graph *g, uint32_t t) {
  const sg__tensor *p = &g->tensors[t];
  if (p->role != SG_ROLE_PARAMETER) return -1;
  char name[SG__MAX_NAME + 8];
  snprintf(name, sizeof name, "%s.grad", p->name);
  int32_t id = sg__tensor_lookup(g, name);
  if (id < 0 || g->tensors[id].role != SG_ROLE_GRADIENT) return -1;
  return id;
}

/* The state tensor names an update of parameter `p` creates. */
static int state_names(const opt_request *r, const char *p, char names[3][SG__MAX_NAME + 24]) {
  int n = 0;
  if (r->kind == OPT_SGD) {
    if (r->sgd->momentum > 0) snprintf(names[n++], sizeof names[0], "%s.momentum_buffer", p);
  } else {
    snprintf(names[n++], sizeof names[0], "%s.exp_avg", p);
    snprintf(names[n++], sizeof names[0], "%s.exp_avg_sq", p);
    snprintf(names[n++], sizeof names[0], "%s.step", p);
  }
  return n;
}

/* Checks made before the graph is touched: lr, that there is something to
 * update, that no parameter is updated already, and the state names. */
static sg_status precheck(const sg_graph *g, const opt_request *r, sg_tensor lr) {
  if (lr.id < 0 || (uint32_t)lr.id >= g->n_tensors)
    return sg__error(SG_ERR_INVALID_ARG, "%s: lr %s (tensor id %d)", r->fn,
                     lr.id < 0 ? "is SG_NO_TENSOR" : "is not a tensor of this graph", lr.id);
  const sg__tensor *l = &g->tensors[lr.id];
  char s[SG__SHAPE_STR];
  if (l->dtype != SG_F32 || sg__numel(l->ndim, l->dims) != 1)
    return sg__error(SG_ERR_SHAPE, "%s: lr %s must be a one-element f32 tensor", r->fn, sg__tstr(s, l));
  uint32_t n = 0;
  char names[3][SG__MAX_NAME + 24];
  for (uint32_t t = 0; t < g->n_tensors; t++) {
    if (gradient_of(g, t) < 0) continue;
    n++;
    const sg__tensor *p = &g->tensors[t];
    for (uint32_t k = 0; k < g->n_ops; k++)
      if ((sg__op_mutated_inputs(&g->ops[k]) & 1u) && g->ops[k].n_inputs > 0 &&
          g->ops[k].inputs[0] == (int32_t)t)
        return sg__error(SG_ERR_STATE, "%s: parameter '%s' already has an update op ('%s')", r->fn, p->name,
                         g->ops[k].name);
    int ns = state_names(r, p->name, names);
    for (int i = 0; i < ns; i++) {
      if (strlen(names[i]) >= SG__MAX_NAME)
        return sg__error(SG_ERR_INVALID_ARG, "%s: parameter '%.60s...': its state name would exceed %d bytes",
                         r->fn, p->name, SG__MAX_NAME - 1);
      if (sg__tensor_lookup(g, names[i]) >= 0)
        return sg__error(SG_ERR_DUPLICATE,
                         "%s: tensor name '%s' is already used, but it names optimizer state "
                         "of parameter '%s'",
                         r->fn, names[i], p->name);
    }
  }
  if (n == 0)
    return sg__error(SG_ERR_STATE, "%s: no parameter has a gradient; call sg_graph_backward() first", r->fn);
  return SG_OK;
}

/* A state tensor without initializer: a session starts every tensor that
 * has none at zero, which is where optimizer state starts. Storing the zeros
 * would cost a copy of every parameter in memory and in .sgg files. */
static sg_tensor zero_state(sg_graph *g, const char *name, sg_dtype dtype, int ndim, const int64_t *dims) {
  return sg_graph_add_tensor(g, name, dtype, SG_ROLE_OPTIMIZER_STATE, ndim, dims, NULL);
}

static sg_status add_updates(sg_graph *g, sg_tensor lr, const opt_request *r) {
  if (g == NULL) return sg__error(SG_ERR_INVALID_ARG, "%s: graph is NULL", r->fn);
  if (g->error != SG_OK) return g->error;
  if (g->finalized) return sg__error(SG_ERR_STATE, "%s: the graph is finalized", r->fn);
  sg_status st = sg__params_read(r->fn, r->versions, r->params, r->given);
  if (st != SG_OK) return sg__graph_fail(g, st);
  st = precheck(g, r, lr);
  if (st != SG_OK) return sg__graph_fail(g, st);
  char names[3][SG__MAX_NAME + 24];
  /* Only parameters that existed before: the loop adds state tensors. */
  uint32_t n = g->n_tensors;
  for (uint32_t t = 0; t < n; t++) {
    int32_t grad = gradient_of(g, t);
    if (grad < 0) continue;
    sg__tensor p = g->tensors[t];
    state_names(r, p.name, names);
    sg_tensor param = {(int32_t)t}, gt = {grad};
    if (r->kind == OPT_SGD) {
      sg_tensor buf = SG_NO_TENSOR;
      if (r->sgd->momentum > 0) buf = zero_state(g, names[0], p.dtype, p.ndim, p.dims);
      st = sg_sgd_update(g, param, gt, lr, buf, r->sgd);
    } else {
      sg_tensor m = zero_state(g, names[0], p.dtype, p.ndim, p.dims);
      sg_tensor v = zero_state(g, names[1], p.dtype, p.ndim, p.dims);
      sg_tensor step = zero_state(g, names[2], SG_F32, 0, NULL);
      st = sg_adamw_update(g, param, gt, lr, m, v, step, r->adamw);
    }
    if (st != SG_OK) return sg__graph_fail(g, st);
  }
  return SG_OK;
}

sg_status sg_graph_add_sgd(sg_graph *g, sg_tensor lr, const sg_sgd_params *p) {
  sg_sgd_params d = SG_SGD_PARAMS_INIT;
  opt_request r = {
      OPT_SGD, "sg_graph_add_sgd", SG__VERSIONED(sg_sgd_params, momentum, "SG_SGD_PARAMS_INIT"), p, &d, &d,
      NULL};
  return add_updates(g, lr, &r);
}

sg_status sg_graph_add_adamw(sg_graph *g, sg_tensor lr, const sg_adamw_params *p) {
  sg_adamw_params d = SG_ADAMW_PARAMS_INIT;
  opt_request r = {OPT_ADAMW,
                   "sg_graph_add_adamw",
                   SG__VERSIONED(sg_adamw_params, beta1, "SG_ADAMW_PARAMS_INIT"),
                   p,
                   &d,
                   NULL,
                   &d};
  return add_updates(g, lr, &r);
}
