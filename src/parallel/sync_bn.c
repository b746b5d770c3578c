/* Synchronized batch norm (SPEC P7, sg_dist_params.sync_batch_norm,
 * docs/dist.md "Synchronized batch norm"): data parallelism whose batch norms
 * normalise with the statistics of the whole global batch, as one process
 * does on it, rather than each rank's own.
 *
 * The forward graph is rebuilt with every training-form batch_norm spelled
 * out in ops: the sum of x over every axis but the channels' (a sync point:
 * summed over the ranks right after it is computed), the mean, the squared
 * deviations' sum (a second sync point), the variance, and the affine
 * normalisation. Autodiff then gives the backward; the gradient of each sync
 * point is summed over the ranks too before backward goes on, which is what
 * makes a rank's input gradient include the other ranks' losses through the
 * shared statistics. (Each rank's loss is its local mean; the gradients'
 * average over the ranks, which data parallelism takes anyway, scales both
 * paths alike.) The two-pass variance (deviations from the global mean) is as
 * stable as the fused kernel's. The running statistics are not in the graph:
 * the data strategy updates them from the global mean and variance after each
 * step's forward (step.c), with the unbiased variance as the op does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "parallel/dist_internal.h"

static const char *FN = "sync_batch_norm";

typedef struct rw {
  const sg_graph *src;
  sg_graph *g;
  int32_t *map; /* source tensor -> new */
  sg__sync_bn *bns;
  int n_bns;
  int ranks;
} rw;

static sg_status named(rw *c, sg_tensor t, const char *base, const char *suffix) {
  if (t.id < 0) return sg_graph_status(c->g);
  char name[SG__MAX_NAME];
  int n = snprintf(name, sizeof name, "%s%s", base, suffix);
  if (n < 0 || (size_t)n >= sizeof name)
    return sg__error(SG_ERR_INVALID_ARG, "%s: the name '%s%s' is too long", FN, base, suffix);
  return sg_tensor_set_name(c->g, t, name);
}

static sg_status keep_name(char **slot, const sg_graph *g, sg_tensor t) {
  if ((*slot = sg__strdup(g->tensors[t.id].name)) == NULL)
    return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", FN);
  return SG_OK;
}

/* batch_norm op k of the source, in training form, spelled out. */
static sg_status spell_out(rw *c, uint32_t k) {
  const sg__op *op = &c->src->ops[k];
  const sg__tensor *x = &c->src->tensors[op->inputs[0]];
  if (x->ndim < 2 || x->dtype != SG_F32)
    return sg__error(SG_ERR_UNSUPPORTED, "%s: batch norm '%s' of a %s input of %d dims (f32 [N,C,...] only)",
                     FN, op->name, sg_dtype_name(x->dtype), x->ndim);
  sg_graph *g = c->g;
  sg_tensor xi = {c->map[op->inputs[0]]}, gamma = {c->map[op->inputs[1]]}, beta = {c->map[op->inputs[2]]};
  double eps = op->attrs[0].f, momentum = op->attrs[1].f;
  int64_t axes[SG_MAX_DIMS], shape[SG_MAX_DIMS];
  int naxes = 0;
  double local = 1;
  for (int i = 0; i < x->ndim; i++) {
    shape[i] = i == 1 ? x->dims[1] : 1;
    if (i != 1) axes[naxes++] = i, local *= (double)x->dims[i];
  }
  double count = local * c->ranks;
  sg__sync_bn *b = &c->bns[c->n_bns++];
  *b = (sg__sync_bn){.momentum = momentum, .count = count};
  sg_tensor sum = sg_reduce_sum(g, xi, naxes, axes, 1);
  SG_CHECK(named(c, sum, op->name, ".sync_sum"));
  sg_tensor mean = sg_mul_scalar(g, sum, 1.0 / count);
  SG_CHECK(named(c, mean, op->name, ".sync_mean"));
  sg_tensor dev = sg_sub(g, xi, mean);
  sg_tensor sq = sg_mul(g, dev, dev);
  sg_tensor sqsum = sg_reduce_sum(g, sq, naxes, axes, 1);
  SG_CHECK(named(c, sqsum, op->name, ".sync_sqdev"));
  sg_tensor var = sg_mul_scalar(g, sqsum, 1.0 / count);
  SG_CHECK(named(c, var, op->name, ".sync_var"));
  sg_tensor inv = sg_reciprocal(g, sg_sqrt(g, sg_add_scalar(g, var, eps)));
  sg_tensor xhat = sg_mul(g, dev, inv);
  sg_tensor y =
      sg_add(g, sg_mul(g, xhat, sg_reshape(g, gamma, x->ndim, shape)), sg_reshape(g, beta, x->ndim, shape));
  SG_CHECK(sg_graph_status(g));
  SG_CHECK(sg_tensor_set_name(g, y, c->src->tensors[op->outputs[0]].name));
  c->map[op->outputs[0]] = y.id;
  SG_CHECK(keep_name(&b->sum, g, sum));
  SG_CHECK(keep_name(&b->sqdev, g, sqsum));
  SG_CHECK(keep_name(&b->mean, g, mean));
  SG_CHECK(keep_name(&b->var, g, var));
  SG_CHECK(keep_name(&b->running_mean, c->src, (sg_tensor){op->inputs[3]}));
  return keep_name(&b->running_var, c->src, (sg_tensor){op->inputs[4]});
}

static sg_status copy_op(rw *c, uint32_t k) {
  const sg__op *op = &c->src->ops[k];
  sg_tensor in[16], outs[SG__MAX_OUTPUTS];
  if (op->n_inputs > 16)
    return sg__error(SG_ERR_UNSUPPORTED, "%s: op '%s' has %d inputs (at most 16 here)", FN, op->name,
                     op->n_inputs);
  for (int i = 0; i < op->n_inputs; i++) in[i] = (sg_tensor){op->inputs[i] < 0 ? -1 : c->map[op->inputs[i]]};
  int n_outs = 0;
  SG_CHECK(sg_graph_add_op(c->g, op->kind, op->n_inputs, in, op->n_attrs, op->attrs, SG__MAX_OUTPUTS, outs,
                           &n_outs));
  for (int i = 0; i < n_outs && i < op->n_outputs; i++) {
    SG_CHECK(sg_tensor_set_name(c->g, outs[i], c->src->tensors[op->outputs[i]].name));
    c->map[op->outputs[i]] = outs[i].id;
  }
  return SG_OK;
}

static bool is_training_bn(const sg__op *op) { return op->kind == SG_OP_BATCH_NORM && op->attrs[2].i != 0; }

static sg_status rewrite(rw *c) {
  const sg_graph *src = c->src;
  for (uint32_t t = 0; t < src->n_tensors; t++) {
    const sg__tensor *x = &src->tensors[t];
    if (x->producer >= 0) continue;
    sg_tensor n = sg_graph_add_tensor(c->g, x->name, x->dtype, x->role, x->ndim, x->dims, x->data);
    if (n.id < 0) return sg_graph_status(c->g);
    c->map[t] = n.id;
  }
  for (uint32_t k = 0; k < src->n_ops; k++) {
    const sg__op *op = &src->ops[k];
    if (!is_training_bn(op)) {
      SG_CHECK(copy_op(c, k));
      continue;
    }
    /* Its batch mean and inverse std (outputs 1 and 2) are for its own backward only. */
    for (int i = 1; i < op->n_outputs; i++)
      for (uint32_t j = 0; j < src->n_ops; j++)
        for (int q = 0; q < src->ops[j].n_inputs; q++)
          if (src->ops[j].inputs[q] == op->outputs[i])
            return sg__error(SG_ERR_UNSUPPORTED, "%s: op '%s' reads batch norm '%s''s batch statistics", FN,
                             src->ops[j].name, op->name);
    SG_CHECK(spell_out(c, k));
  }
  for (uint32_t i = 0; i < src->n_outputs; i++)
    SG_CHECK(sg_graph_mark_output(c->g, (sg_tensor){c->map[src->outputs[i]]}));
  /* No op reads the running statistics now: as outputs they keep their slots, which the step updates. */
  for (int i = 0; i < c->n_bns; i++) {
    const char *state[] = {c->bns[i].running_mean, c->bns[i].running_var};
    for (int j = 0; j < 2; j++)
      SG_CHECK(sg_graph_mark_output(c->g, (sg_tensor){sg__tensor_lookup(c->g, state[j])}));
  }
  return SG_OK;
}

sg_status sg__sync_bn_rewrite(const sg_graph *fwd, int ranks, sg_graph **out, sg__sync_bn **bns, int *n_bns) {
  *out = NULL, *bns = NULL, *n_bns = 0;
  rw c = {.src = fwd, .ranks = ranks};
  int n = 0;
  for (uint32_t k = 0; k < fwd->n_ops; k++) n += is_training_bn(&fwd->ops[k]);
  if (n == 0)
    return sg__error(SG_ERR_INVALID_ARG, "%s: the graph has no batch norm in training form to synchronize",
                     FN);
  c.map = sg__calloc(fwd->n_tensors + 1, sizeof *c.map);
  c.bns = sg__calloc((size_t)n, sizeof *c.bns);
  sg_status st =
      c.map && c.bns ? sg_graph_create(&c.g) : sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", FN);
  if (st == SG_OK) st = rewrite(&c);
  sg__free(c.map);
  if (st != SG_OK) {
    char why[512];
    snprintf(why, sizeof why, "%s", sg_last_error());
    sg_graph_destroy(c.g);
    sg__sync_bn_free(c.bns, c.n_bns);
    return sg__error(st, "%s", why);
  }
  *out = c.g, *bns = c.bns, *n_bns = c.n_bns;
  return SG_OK;
}

void sg__sync_bn_free(sg__sync_bn *b, int n) {
  for (int i = 0; b != NULL && i < n; i++) {
    sg__free(b[i].sum);
    sg__free(b[i].sqdev);
    sg__free(b[i].mean);
    sg__free(b[i].var);
    sg__free(b[i].running_mean);
    sg__free(b[i].running_var);
  }
  sg__free(b);
}

/* ---- in the data-parallel step ------------------------------------------------------------------ */

/* The gradient of activation t once backward ran: what its producer's backward ops ("<op>/grad...",
 * autodiff.c) read of t's shape; -1 when nothing upstream needs one. (sg_graph_grad names parameters'
 * gradients only.) */
static int32_t activation_grad(const sg_graph *g, int32_t t) {
  const sg__tensor *x = &g->tensors[t];
  if (x->producer < 0) return -1;
  const char *pn = g->ops[x->producer].name;
  size_t n = strlen(pn);
  for (uint32_t k = 0; k < g->n_ops; k++) {
    const sg__op *op = &g->ops[k];
    if (strncmp(op->name, pn, n) != 0 || strncmp(op->name + n, "/grad", 5) != 0) continue;
    for (int i = 0; i < op->n_inputs; i++) {
      const sg__tensor *y = op->inputs[i] >= 0 ? &g->tensors[op->inputs[i]] : NULL;
      bool same = y != NULL && y->role == SG_ROLE_GRADIENT && y->ndim == x->ndim;
      for (int j = 0; same && j < x->ndim; j++) same = y->dims[j] == x->dims[j];
      if (same) return op->inputs[i];
    }
  }
  return -1;
}

void sg__dist_sync_bn_barrier(const sg_graph *g, const sg__sync_bn *bns, int n, uint8_t *mask) {
  for (int i = 0; i < n; i++) {
    const char *names[] = {bns[i].sum, bns[i].sqdev, bns[i].mean, bns[i].var};
    for (int j = 0; j < 4; j++) {
      int32_t t = sg__tensor_lookup(g, names[j]);
      if (t < 0) continue;
      mask[t] = 1;
      int32_t grad = j < 2 ? activation_grad(g, t) : -1;
      if (grad >= 0) mask[grad] = 1;
    }
  }
}

static int by_pos(const void *a, const void *b) {
  const sg__dist_sync_point *x = a, *y = b;
  return (x->pos > y->pos) - (x->pos < y->pos);
}

/* Tensor t's slot, its floats and the schedule position of its producer; -1 when the schedule does not
 * compute it. */
static int64_t point(sg_dist *d, const int32_t *pos_of_op, int32_t t, float **addr, size_t *count) {
  const sg__tensor *x = &d->g->tensors[t];
  size_t bytes = 0;
  *addr = sg__session_tensor_addr(d->s, t, &bytes);
  *count = x->nbytes / 4;
  if (x->producer < 0 || pos_of_op[x->producer] < 0 || *addr == NULL || bytes < x->nbytes) return -1;
  return pos_of_op[x->producer];
}

static int stat_by_pos(const void *a, const void *b) {
  const sg__dist_sync_stat *x = a, *y = b;
  return (x->pos > y->pos) - (x->pos < y->pos);
}

static sg_status start(sg_dist *d, const sg__sync_bn *bns, int n, int32_t *pos_of_op) {
  sg__dist_sync_bns *s = &DP(d)->sbn;
  s->pts = sg__calloc((size_t)n * 4, sizeof *s->pts);
  s->stats = sg__calloc((size_t)n * 2, sizeof *s->stats);
  if (!s->pts || !s->stats) return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", FN);
  const sg_graph *g = d->g;
  for (int i = 0; i < n; i++) {
    const sg__sync_bn *b = &bns[i];
    const char *syncs[] = {b->sum, b->sqdev};
    for (int j = 0; j < 2; j++) {
      int32_t t = sg__tensor_lookup(g, syncs[j]), grad = t >= 0 ? activation_grad(g, t) : -1;
      if (t < 0) return sg__error(SG_ERR_INTERNAL, "%s: no tensor '%s'", FN, syncs[j]);
      sg__dist_sync_point *p = &s->pts[s->n_pts];
      int64_t at = point(d, pos_of_op, t, &p->addr, &p->count);
      if (at < 0) return sg__error(SG_ERR_INTERNAL, "%s: the step does not compute '%s'", FN, syncs[j]);
      p->pos = (uint32_t)at, s->n_pts++;
      if (grad < 0) continue; /* nothing upstream needs a gradient */
      p = &s->pts[s->n_pts];
      at = point(d, pos_of_op, grad, &p->addr, &p->count);
      if (at >= 0) p->pos = (uint32_t)at, s->n_pts++;
    }
    const char *batch[] = {b->mean, b->var}, *running[] = {b->running_mean, b->running_var};
    for (int j = 0; j < 2; j++) {
      int32_t t = sg__tensor_lookup(g, batch[j]), r = sg__tensor_lookup(g, running[j]);
      float *addr = NULL, *run = NULL;
      size_t bytes = 0, count = 0;
      int64_t at = t >= 0 ? point(d, pos_of_op, t, &addr, &count) : -1;
      if (r >= 0) run = sg__session_tensor_addr(d->s, r, &bytes);
      if (at < 0 || run == NULL || bytes / 4 != count)
        return sg__error(SG_ERR_INTERNAL, "%s: '%s' or '%s' has no slot", FN, batch[j], running[j]);
      s->stats[s->n_stats++] = (sg__dist_sync_stat){
          (uint32_t)at, addr,        run,
          count,        b->momentum, j == 1 && b->count > 1 ? b->count / (b->count - 1) : 1};
    }
    s->n_bns++;
  }
  qsort(s->pts, (size_t)s->n_pts, sizeof *s->pts, by_pos);
  qsort(s->stats, (size_t)s->n_stats, sizeof *s->stats, stat_by_pos);
  for (int i = 0; i < s->n_pts; i++) DP(d)->plan.after_at[s->pts[i].pos] = 1;
  for (int i = 0; i < s->n_stats; i++) DP(d)->plan.after_at[s->stats[i].pos] = 1;
  return SG_OK;
}

sg_status sg__dist_sync_bn_start(sg_dist *d, const sg__sync_bn *bns, int n) {
  if (n == 0) return SG_OK;
  uint32_t n_order = 0;
  const int32_t *order = sg__session_order(d->s, &n_order);
  int32_t *pos_of_op = sg__malloc((d->g->n_ops + 1) * sizeof *pos_of_op);
  if (pos_of_op == NULL) return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", FN);
  for (uint32_t k = 0; k < d->g->n_ops; k++) pos_of_op[k] = -1;
  for (uint32_t i = 0; i < n_order; i++) pos_of_op[order[i]] = (int32_t)i;
  sg_status st = start(d, bns, n, pos_of_op);
  sg__free(pos_of_op);
  return st;
}

typedef struct sum_job {
  const sg__dist_sync_point *p;
} sum_job;

static sg_status run_sum(sg_dist *d, void *arg) {
  const sum_job *j = arg;
  sg_comm_label(d->comm, "sync_batch_norm statistics");
  return sg_comm_allreduce(d->comm, j->p->addr, j->p->addr, j->p->count, SG_F32, SG_REDUCE_SUM);
}

sg_status sg__dist_sync_bn_after(sg_dist *d, uint32_t pos) {
  const sg__dist_sync_bns *s = &DP(d)->sbn;
  for (int i = 0; i < s->n_pts; i++) {
    if (s->pts[i].pos != pos) continue;
    /* The buckets handed over so far first: every rank's scheduler then runs the same collectives in the
     * same order. */
    pthread_mutex_lock(&d->mu);
    while (DP(d)->done < DP(d)->posted && d->failed == SG_OK) pthread_cond_wait(&d->wake_compute, &d->mu);
    bool failed = d->failed != SG_OK;
    pthread_mutex_unlock(&d->mu);
    if (failed) return sg__dist_failure(d);
    sum_job j = {&s->pts[i]};
    SG_CHECK(sg__dist_run_job(d, run_sum, &j));
  }
  for (int i = 0; i < s->n_stats; i++) {
    const sg__dist_sync_stat *st = &s->stats[i];
    if (st->pos != pos) continue;
    for (size_t c = 0; c < st->channels; c++)
      st->running[c] = (float)((1 - st->momentum) * st->running[c] + st->momentum * st->batch[c] * st->scale);
  }
  return SG_OK;
}

void sg__dist_sync_bn_free(sg__dist_sync_bns *s) {
  sg__free(s->pts);
  sg__free(s->stats);
  *s = (sg__dist_sync_bns){0};
}
