/* Reverse-mode automatic differentiation on the static graph (SPEC G6).
 *
 * sg_graph_backward() works in three passes over the ops as they are, which
 * for a graph under construction is a topological order:
 *  1. forward: which tensors depend on a parameter through differentiable
 *     inputs (AD_DEPENDS); backward from the loss: which tensors the loss
 *     depends on (AD_REACHES). A tensor needs a gradient when both hold, so
 *     nothing is computed for graph inputs, labels, running statistics or
 *     branches that do not reach the loss.
 *  2. checks, before anything is appended: every op on the way has a rule,
 *     and the names to be created are free.
 *  3. in reverse op order, each op with an output that needs a gradient
 *     gets the sum of its output's gradient contributions and runs its rule
 *     (autodiff_rules.c), which contributes to its inputs' gradients.
 * Finally each parameter's summed gradient becomes "<param>.grad". */
#include <stdio.h>
#include <string.h>

#include "graph/autodiff.h"
#include "sgrt/train.h"

enum { AD_DEPENDS = 1, AD_REACHES = 2, AD_NEEDS = AD_DEPENDS | AD_REACHES };

/* Input i of op carries a gradient if it is a float tensor and the op's rule
 * differentiates it. A kind without a rule lets every input through, so
 * that it is found, and reported, when it lies between a parameter and the
 * loss. */
static bool diff_input(const sg__ad *c, const sg__op *op, int i) {
  int32_t id = op->inputs[i];
  if (id < 0 || (uint32_t)id >= c->n_fwd_tensors || !sg__is_float(c->g->tensors[id].dtype)) return false;
  const sg__grad_def *d = sg__grad_def_get(op->kind);
  return d == NULL || i >= 32 || (d->diff_inputs >> i & 1u);
}

static bool tensor_needs(const sg__ad *c, int32_t t) {
  return t >= 0 && (uint32_t)t < c->n_fwd_tensors && (c->flags[t] & AD_NEEDS) == AD_NEEDS;
}

bool sg__ad_needs(const sg__ad *c, const sg__op *op, int i) {
  return i >= 0 && i < op->n_inputs && diff_input(c, op, i) && tensor_needs(c, op->inputs[i]);
}

/* An op is differentiated when one of its outputs needs a gradient. */
static bool op_active(const sg__ad *c, const sg__op *op) {
  for (int o = 0; o < op->n_outputs; o++)
    if (tensor_needs(c, op->outputs[o])) return true;
  return false;
}

static sg_status analyse(sg__ad *c, int32_t loss) {
  const sg_graph *g = c->g;
  for (uint32_t t = 0; t < c->n_fwd_tensors; t++) {
    const sg__tensor *x = &g->tensors[t];
    c->flags[t] = x->role == SG_ROLE_PARAMETER && sg__is_float(x->dtype) ? AD_DEPENDS : 0;
  }
  for (uint32_t k = 0; k < c->n_fwd_ops; k++) {
    const sg__op *op = &g->ops[k];
    bool depends = false;
    for (int i = 0; i < op->n_inputs; i++) {
      int32_t t = op->inputs[i];
      /* The passes rely on op order being topological, which the builder
       * guarantees: an op's inputs exist before it does. */
      if (t >= 0 && g->tensors[t].producer >= (int32_t)k)
        return sg__error(SG_ERR_INTERNAL, "op '%s' consumes tensor '%s' produced later; ops are not in order",
                         op->name, g->tensors[t].name);
      if (diff_input(c, op, i) && (c->flags[t] & AD_DEPENDS)) depends = true;
    }
    for (int o = 0; depends && o < op->n_outputs; o++)
      if (sg__is_float(g->tensors[op->outputs[o]].dtype)) c->flags[op->outputs[o]] |= AD_DEPENDS;
  }
  c->flags[loss] |= AD_REACHES;
  for (uint32_t k = c->n_fwd_ops; k-- > 0;) {
    const sg__op *op = &g->ops[k];
    bool reaches = false;
    for (int o = 0; o < op->n_outputs; o++)
      if (c->flags[op->outputs[o]] & AD_REACHES) reaches = true;
    for (int i = 0; reaches && i < op->n_inputs; i++)
      if (diff_input(c, op, i)) c->flags[op->inputs[i]] |= AD_REACHES;
  }
  return SG_OK;
}

/* "<param>.grad", or an error when it cannot be created. */
static sg_status grad_name(const sg_graph *g, const sg__tensor *param, char *buf, size_t size) {
  if ((size_t)snprintf(buf, size, "%s.grad", param->name) >= size || strlen(buf) >= SG__MAX_NAME)
    return sg__error(SG_ERR_INVALID_ARG,
                     "parameter '%.60s...': the name of its gradient would exceed %d bytes", param->name,
                     SG__MAX_NAME - 1);
  if (sg__tensor_lookup(g, buf) >= 0)
    return sg__error(
        SG_ERR_DUPLICATE,
        "tensor name '%s' is already used, but sg_graph_backward names the gradient of parameter "
        "'%s' so (has backward already run on this graph?)",
        buf, param->name);
  return SG_OK;
}

/* Everything that could fail for a reason the caller can fix, before the
 * graph is touched. */
static sg_status precheck(const sg__ad *c, int32_t loss) {
  const sg_graph *g = c->g;
  for (uint32_t k = 0; k < c->n_fwd_ops; k++) {
    const sg__op *op = &g->ops[k];
    if (!op_active(c, op)) continue;
    if (sg__grad_def_get(op->kind) == NULL)
      return sg__error(SG_ERR_UNSUPPORTED,
                       "no gradient for op '%s' (%s), which lies between a parameter and loss '%s'", op->name,
                       sg_op_kind_name(op->kind), g->tensors[loss].name);
    for (int o = 1; o < op->n_outputs; o++)
      if (tensor_needs(c, op->outputs[o]))
        return sg__error(SG_ERR_UNSUPPORTED,
                         "no gradient through output %d '%s' of op '%s' (%s): loss '%s' depends on it; only "
                         "output 0 is differentiated",
                         o, g->tensors[op->outputs[o]].name, op->name, sg_op_kind_name(op->kind),
                         g->tensors[loss].name);
  }
  char name[SG__MAX_NAME + 8];
  for (uint32_t t = 0; t < c->n_fwd_tensors; t++)
    if (g->tensors[t].role == SG_ROLE_PARAMETER && tensor_needs(c, (int32_t)t))
      SG_CHECK(grad_name(g, &g->tensors[t], name, sizeof name));
  return SG_OK;
}

/* ---- gradient contributions --------------------------------------------- */

static sg_status push(sg__ad *c, int32_t t, int32_t grad) {
  if (sg__grow((void **)&c->contribs, &c->cap_contribs, c->n_contribs + 1, sizeof *c->contribs) != SG_OK)
    return sg__error(SG_ERR_NO_MEMORY, "sg_graph_backward: out of memory");
  c->contribs[c->n_contribs] = (struct sg__ad_contrib){grad, c->head[t]};
  c->head[t] = (int32_t)c->n_contribs++;
  return SG_OK;
}

sg_status sg__ad_give(sg__ad *c, const sg__op *op, int i, sg_tensor grad) {
  sg_graph *g = c->g;
  if (grad.id < 0)
    return g->error != SG_OK
               ? g->error
               : sg__error(SG_ERR_INTERNAL, "gradient rule of op '%s' produced no tensor for input %d",
                           op->name, i);
  if (!sg__ad_needs(c, op, i))
    return sg__error(SG_ERR_INTERNAL, "gradient rule of op '%s' gave input %d a gradient it does not need",
                     op->name, i);
  const sg__tensor *x = &g->tensors[op->inputs[i]], *d = &g->tensors[grad.id];
  bool same = x->dtype == d->dtype && x->ndim == d->ndim;
  for (int k = 0; same && k < x->ndim; k++) same = x->dims[k] == d->dims[k];
  if (!same) {
    char sx[SG__SHAPE_STR], sd[SG__SHAPE_STR];
    return sg__error(SG_ERR_INTERNAL, "gradient rule of op '%s' gave input %s the gradient %s", op->name,
                     sg__tstr(sx, x), sg__tstr(sd, d));
  }
  return push(c, op->inputs[i], grad.id);
}

/* Names op k "<group>/grad", "<group>/grad_1", ... */
static sg_status name_op(sg__ad *c, int32_t k) {
  sg_graph *g = c->g;
  char buf[SG__MAX_NAME];
  /* A group name near the limit keeps the automatic op name. */
  if (strlen(c->group) + 24 >= sizeof buf) return SG_OK;
  for (;; c->group_seq++) {
    if (c->group_seq == 0) snprintf(buf, sizeof buf, "%s/grad", c->group);
    else snprintf(buf, sizeof buf, "%s/grad_%u", c->group, c->group_seq);
    if (sg__op_lookup(g, buf) < 0) break;
  }
  c->group_seq++;
  char *name = sg__arena_strdup(&g->arena, buf);
  if (name == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_graph_backward: out of memory");
  /* The map entry under the automatic name goes stale: lookups compare the
   * current name, so it only costs a slot -- and when it happens to lie on
   * the probe path of the new name, it already finds the op. */
  const char *old = g->ops[k].name;
  g->ops[k].name = name;
  if (sg__op_lookup(g, name) != k && sg__names_insert(g, true, k) != SG_OK) {
    g->ops[k].name = old;
    return sg__error(SG_ERR_NO_MEMORY, "sg_graph_backward: out of memory");
  }
  return SG_OK;
}

sg_tensor sg__ad_emit(sg__ad *c, sg_op_kind kind, int n_inputs, const sg_tensor *inputs, int n_attrs,
                      const sg_attr *attrs, int max_outputs, sg_tensor *outputs) {
  sg_tensor out[SG__MAX_OUTPUTS] = {SG_NO_TENSOR, SG_NO_TENSOR, SG_NO_TENSOR, SG_NO_TENSOR};
  sg_graph *g = c->g;
  if (sg_graph_add_op(g, kind, n_inputs, inputs, n_attrs, attrs, SG__MAX_OUTPUTS, out, NULL) != SG_OK)
    return SG_NO_TENSOR;
  sg_status st = name_op(c, (int32_t)g->n_ops - 1);
  if (st != SG_OK) {
    sg__graph_fail(g, st);
    return SG_NO_TENSOR;
  }
  for (int i = 0; i < max_outputs && i < SG__MAX_OUTPUTS && outputs; i++) outputs[i] = out[i];
  return out[0];
}

static void set_group(sg__ad *c, const char *name) {
  c->group = name;
  c->group_seq = 0;
}

/* The sum of the contributions to tensor t, in op order (they arrive in
 * reverse op order and are pushed to the front). The list is then replaced
 * by the sum, so asking again appends nothing. */
static sg_tensor gradient_of(sg__ad *c, int32_t t) {
  int32_t n = c->head[t];
  if (n < 0) {
    sg__error(SG_ERR_INTERNAL, "sg_graph_backward: no gradient reached tensor '%s'", c->g->tensors[t].name);
    return SG_NO_TENSOR;
  }
  sg_tensor acc = {c->contribs[n].tensor};
  if (c->contribs[n].next < 0) return acc;
  for (int32_t m = c->contribs[n].next; m >= 0; m = c->contribs[m].next) {
    sg_tensor in[] = {acc, {c->contribs[m].tensor}};
    acc = sg__ad_emit(c, SG_OP_ADD, 2, in, 0, NULL, 0, NULL);
    if (acc.id < 0) return acc;
  }
  c->head[t] = -1;
  if (push(c, t, acc.id) != SG_OK) return SG_NO_TENSOR;
  return acc;
}

/* The status to return after a failed step: the graph's sticky error, or
 * the one just raised. */
static sg_status failed(const sg_graph *g) {
  if (g->error != SG_OK) return g->error;
  sg_status st = sg__last_status();
  return st != SG_OK ? st : SG_ERR_INTERNAL;
}

/* A one-element constant of ones, dL/dL. */
static sg_status add_seed(sg__ad *c, int32_t loss, sg_tensor *seed) {
  sg_graph *g = c->g;
  const sg__tensor *l = &g->tensors[loss];
  /* Named after the loss unless that is too long; made unique with _k. */
  char base[SG__MAX_NAME], name[SG__MAX_NAME + 16];
  if (strlen(l->name) + 24 < SG__MAX_NAME) snprintf(base, sizeof base, "%s.grad_seed", l->name);
  else snprintf(base, sizeof base, "grad_seed");
  snprintf(name, sizeof name, "%s", base);
  for (uint32_t k = 1; sg__tensor_lookup(g, name) >= 0; k++) snprintf(name, sizeof name, "%s_%u", base, k);
  union {
    float f32;
    uint16_t half;
  } one;
  switch (l->dtype) {
    case SG_F16: one.half = 0x3c00; break;
    case SG_BF16: one.half = 0x3f80; break;
    default: one.f32 = 1.0f; break;
  }
  *seed = sg_graph_add_tensor(g, name, l->dtype, SG_ROLE_CONSTANT, l->ndim, l->dims, &one);
  if (seed->id < 0) return failed(g);
  return push(c, loss, seed->id);
}

static sg_status rename_tensor(sg_graph *g, int32_t id, const char *name) {
  char *copy = sg__arena_strdup(&g->arena, name);
  if (copy == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_graph_backward: out of memory");
  const char *old = g->tensors[id].name;
  g->tensors[id].name = copy;
  /* As for ops (name_op): the stale entry may already find the new name. */
  sg_status st = sg__tensor_lookup(g, name) == id ? SG_OK : sg__names_insert(g, false, id);
  if (st != SG_OK) {
    g->tensors[id].name = old;
    return st == SG_ERR_DUPLICATE ? sg__error(SG_ERR_INTERNAL, "sg_graph_backward: '%s' appeared twice", name)
                                  : sg__error(SG_ERR_NO_MEMORY, "sg_graph_backward: out of memory");
  }
  return SG_OK;
}

/* Gives every parameter's gradient its name. The tensor must be the
 * parameter's own: produced by a backward op, consumed by no other backward
 * op and not another parameter's gradient (a pass-through gradient, as of
 * y = p + q, is one tensor for both) -- else a copy (a reshape to the same
 * shape) is named instead. So "<param>.grad" can be synchronized or
 * consumed by the update as soon as it exists. */
static sg_status name_gradients(sg__ad *c) {
  sg_graph *g = c->g;
  enum { CONSUMED = 1, CLAIMED = 2 };
  uint32_t nt = g->n_tensors;
  uint8_t *used = sg__calloc(nt ? nt : 1, 1);
  if (used == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_graph_backward: out of memory");
  for (uint32_t k = c->n_fwd_ops; k < g->n_ops; k++)
    for (int i = 0; i < g->ops[k].n_inputs; i++)
      if (g->ops[k].inputs[i] >= 0) used[g->ops[k].inputs[i]] |= CONSUMED;
  sg_status st = SG_OK;
  char name[SG__MAX_NAME + 8];
  for (uint32_t t = 0; t < c->n_fwd_tensors && st == SG_OK; t++) {
    if (g->tensors[t].role != SG_ROLE_PARAMETER || !tensor_needs(c, (int32_t)t)) continue;
    set_group(c, g->tensors[t].name);
    sg_tensor grad = gradient_of(c, (int32_t)t);
    if (grad.id < 0) {
      st = failed(g);
      break;
    }
    const sg__tensor *d = &g->tensors[grad.id];
    bool own = d->role == SG_ROLE_GRADIENT && d->producer >= (int32_t)c->n_fwd_ops &&
               ((uint32_t)grad.id >= nt || used[grad.id] == 0);
    if (own && (uint32_t)grad.id < nt) used[grad.id] |= CLAIMED;
    if (!own) {
      sg__tensor p = g->tensors[t];
      sg_attr a = SG__AS("shape", p.ndim, p.dims);
      grad = sg__ad_emit(c, SG_OP_RESHAPE, 1, &grad, 1, &a, 0, NULL);
      if (grad.id < 0) {
        st = failed(g);
        break;
      }
    }
    st = grad_name(g, &g->tensors[t], name, sizeof name);
    if (st == SG_OK) st = rename_tensor(g, grad.id, name);
  }
  sg__free(used);
  return st;
}

static sg_status run(sg__ad *c, int32_t loss) {
  sg_graph *g = c->g;
  sg_tensor seed;
  SG_CHECK(add_seed(c, loss, &seed));
  for (uint32_t k = c->n_fwd_ops; k-- > 0;) {
    if (!op_active(c, &g->ops[k])) continue;
    sg__op op = g->ops[k]; /* a copy: g->ops moves as ops are appended */
    set_group(c, op.name);
    sg_tensor dy = gradient_of(c, op.outputs[0]);
    if (dy.id < 0) return failed(g);
    SG_CHECK(sg__grad_def_get(op.kind)->rule(c, &op, dy));
    if (g->error != SG_OK) return g->error;
  }
  return name_gradients(c);
}

static sg_status check_loss(const sg_graph *g, sg_tensor loss) {
  if (loss.id < 0 || (uint32_t)loss.id >= g->n_tensors)
    return sg__error(SG_ERR_INVALID_ARG, "sg_graph_backward: loss %s (tensor id %d)",
                     loss.id < 0 ? "is SG_NO_TENSOR" : "is not a tensor of this graph", loss.id);
  const sg__tensor *l = &g->tensors[loss.id];
  char s[SG__SHAPE_STR];
  if (!sg__is_float(l->dtype))
    return sg__error(SG_ERR_DTYPE, "sg_graph_backward: loss %s must be a float tensor", sg__tstr(s, l));
  if (sg__numel(l->ndim, l->dims) != 1)
    return sg__error(SG_ERR_SHAPE,
                     "sg_graph_backward: loss %s must have exactly one element (reduce it first, e.g. with "
                     "sg_reduce_mean)",
                     sg__tstr(s, l));
  return SG_OK;
}

sg_status sg_graph_backward(sg_graph *g, sg_tensor loss) {
  if (g == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_graph_backward: graph is NULL");
  if (g->error != SG_OK) return g->error;
  if (g->finalized)
    return sg__error(SG_ERR_STATE, "sg_graph_backward: the graph is finalized; differentiate it before "
                                   "sg_graph_finalize()");
  sg_status st = check_loss(g, loss);
  if (st != SG_OK) return sg__graph_fail(g, st);

  sg__ad c = {.g = g, .n_fwd_tensors = g->n_tensors, .n_fwd_ops = g->n_ops};
  c.flags = sg__calloc(c.n_fwd_tensors, 1);
  c.head = sg__malloc(sizeof(int32_t) * c.n_fwd_tensors);
  if (c.flags == NULL || c.head == NULL) {
    st = sg__error(SG_ERR_NO_MEMORY, "sg_graph_backward: out of memory");
    goto out;
  }
  for (uint32_t t = 0; t < c.n_fwd_tensors; t++) c.head[t] = -1;
  SG_CHECK_GOTO(analyse(&c, loss.id), st, out);
  if (!(c.flags[loss.id] & AD_DEPENDS)) {
    char s[SG__SHAPE_STR];
    st = sg__error(SG_ERR_INVALID_ARG,
                   "sg_graph_backward: loss %s depends on no parameter through differentiable ops; there is "
                   "nothing to differentiate",
                   sg__tstr(s, &g->tensors[loss.id]));
    goto out;
  }
  SG_CHECK_GOTO(precheck(&c, loss.id), st, out);
  g->grad_mode = true;
  st = run(&c, loss.id);
  g->grad_mode = false;
out:
  sg__free(c.flags);
  sg__free(c.head);
  sg__free(c.contribs);
  return st == SG_OK ? SG_OK : sg__graph_fail(g, st);
}

sg_status sg_graph_grad(const sg_graph *g, sg_tensor param, sg_tensor *grad) {
  if (grad) *grad = SG_NO_TENSOR;
  if (g == NULL || grad == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_graph_grad: NULL argument");
  if (param.id < 0 || (uint32_t)param.id >= g->n_tensors)
    return sg__error(SG_ERR_RANGE, "sg_graph_grad: tensor id %d is out of range (graph has %u)", param.id,
                     g->n_tensors);
  const sg__tensor *p = &g->tensors[param.id];
  char name[SG__MAX_NAME + 8];
  snprintf(name, sizeof name, "%s.grad", p->name);
  int32_t id = sg__tensor_lookup(g, name);
  const sg__tensor *d = id >= 0 ? &g->tensors[id] : NULL;
  bool same = d && d->role == SG_ROLE_GRADIENT && d->dtype == p->dtype && d->ndim == p->ndim;
  for (int i = 0; same && i < p->ndim; i++) same = d->dims[i] == p->dims[i];
  if (!same)
    return sg__error(SG_ERR_NOT_FOUND,
                     "tensor '%s' has no gradient (no gradient tensor '%s'): it does not affect the loss, or "
                     "sg_graph_backward was not run",
                     p->name, name);
  *grad = (sg_tensor){id};
  return SG_OK;
}
