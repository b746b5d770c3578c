/* ZeRO-1 (sg_dist_params.zero, docs/dist.md "ZeRO-1"): the optimizer state
 * is sharded over the ranks. Each rank owns a contiguous range of the
 * parameters, in the plan's gradient order (backward order), cut at
 * parameter boundaries and balanced by bytes; it keeps optimizer state for
 * those only and runs only their update ops. A step: forward and backward
 * as in plain data parallelism; the scheduler thread packs each bucket's
 * gradients into one buffer, rank r's range at segment r (while backward
 * goes on), then one reduce-scatter leaves each rank the averaged gradients
 * of its own range; the rank runs its updates; an allgather brings every
 * rank's updated range into every rank's parameter slots.
 *
 * The segments are padded to one count (the largest range), plus one float
 * where every rank puts its loss: the reduce-scatter then also averages the
 * loss for every rank, without a message of its own.
 *
 * The optimizer state of parameters another rank owns gets no memory: the
 * ownership is cut before the session compiles, from the schedule it will
 * run (sg__plan_schedule, which plans no memory), and the session is created
 * with those tensors unbacked (sg__session_set_unbacked): the compiler only
 * learns that some persistent tensors get no slot, not why. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile/plan.h"
#include "graph/graph.h"
#include "parallel/dist_internal.h"
#include "sgrt/train.h"

/* The order a plan produces the parameters' gradients in: as buckets.c
 * collects them (production position, then parameter id). */
typedef struct pg {
  int32_t param;
  uint32_t pos;
  size_t bytes;
} pg;

static int by_pos(const void *a, const void *b) {
  const pg *x = a, *y = b;
  if (x->pos != y->pos) return x->pos < y->pos ? -1 : 1;
  return (x->param > y->param) - (x->param < y->param);
}

static bool is_update(const sg__op *op) {
  return op->kind == SG_OP_SGD_UPDATE || op->kind == SG_OP_ADAMW_UPDATE;
}

/* Cuts n items of the given bytes, in order, into `ranks` contiguous ranges
 * balanced by bytes: an item goes to the rank whose share of the total holds
 * its middle byte. first[r] .. first[r+1] is rank r's range (ranks + 1
 * entries); a rank may get none when one item is larger than a share. */
static void cut(const size_t *bytes, uint32_t n, int ranks, uint32_t *first) {
  size_t total = 0;
  for (uint32_t i = 0; i < n; i++) total += bytes[i];
  int r = 0;
  size_t at = 0;
  first[0] = 0;
  for (uint32_t i = 0; i < n; i++) {
    double mid = (double)at + (double)bytes[i] / 2;
    int owner = total ? (int)(mid * ranks / (double)total) : 0;
    if (owner >= ranks) owner = ranks - 1;
    while (r < owner) first[++r] = i;
    at += bytes[i];
  }
  while (r < ranks) first[++r] = n;
}

/* The optimizer state that rank `rank` of `size` leaves without memory (per
 * tensor, into mask): the state read by the updates of the parameters
 * outside its range, the ranges cut as sg__dist_zero_layout cuts them once
 * the session is compiled, over the gradients in the order that schedule
 * produces them. */
static sg_status zero_mask(const sg_graph *g, const int32_t *order, uint32_t n_order, int rank, int size,
                           uint8_t *mask) {
  size_t nt = g->n_tensors ? g->n_tensors : 1;
  int32_t *pos_of_op = sg__malloc((g->n_ops ? g->n_ops : 1) * sizeof(int32_t));
  pg *grads = sg__malloc(nt * sizeof(pg));
  size_t *bytes = sg__malloc(nt * sizeof(size_t));
  uint32_t *first = sg__malloc(((size_t)size + 1) * sizeof(uint32_t));
  uint8_t *owned = sg__calloc(nt, 1);
  sg_status st = SG_OK;
  if (!pos_of_op || !grads || !bytes || !first || !owned) {
    st = sg__error(SG_ERR_NO_MEMORY, "sg_dist_create: out of memory for the ZeRO-1 layout");
    goto out;
  }
  for (uint32_t k = 0; k < g->n_ops; k++) pos_of_op[k] = -1;
  for (uint32_t i = 0; i < n_order; i++) pos_of_op[order[i]] = (int32_t)i;
  uint32_t n = 0;
  for (uint32_t t = 0; t < g->n_tensors; t++) {
    if (g->tensors[t].role != SG_ROLE_PARAMETER) continue;
    sg_tensor grad;
    if (sg_graph_grad(g, (sg_tensor){(int32_t)t}, &grad) != SG_OK) continue;
    const sg__tensor *gt = &g->tensors[grad.id];
    if (gt->producer < 0 || pos_of_op[gt->producer] < 0) continue;
    grads[n++] = (pg){(int32_t)t, (uint32_t)pos_of_op[gt->producer], gt->nbytes};
  }
  qsort(grads, n, sizeof *grads, by_pos);
  for (uint32_t i = 0; i < n; i++) bytes[i] = grads[i].bytes;
  cut(bytes, n, size, first);
  for (uint32_t i = first[rank]; i < first[rank + 1]; i++) owned[grads[i].param] = 1;
  /* The optimizer state an update op of a parameter this rank does not own reads. */
  for (uint32_t i = 0; i < n_order; i++) {
    const sg__op *op = &g->ops[order[i]];
    if (!is_update(op) || op->n_inputs < 1 || op->inputs[0] < 0 || owned[op->inputs[0]]) continue;
    for (int k = 1; k < op->n_inputs; k++)
      if (op->inputs[k] >= 0 && g->tensors[op->inputs[k]].role == SG_ROLE_OPTIMIZER_STATE)
        mask[op->inputs[k]] = 1;
  }
out:
  sg__free(pos_of_op);
  sg__free(grads);
  sg__free(bytes);
  sg__free(first);
  sg__free(owned);
  return st;
}

sg_status sg__dist_zero_unback(sg_dist *d) {
  const sg_graph *g = d->g;
  sg__plan_options opt = {0};
  opt.updates_last = true; /* as the session's (sg__session_set_updates_last) */
  int32_t *order;
  uint32_t n_order;
  SG_CHECK(sg__plan_schedule(g, &opt, &order, &n_order));
  uint8_t *mask = sg__calloc(g->n_tensors ? g->n_tensors : 1, 1);
  sg_status st = mask == NULL
                     ? sg__error(SG_ERR_NO_MEMORY, "sg_dist_create: out of memory for the ZeRO-1 layout")
                     : zero_mask(g, order, n_order, d->rank, d->size, mask);
  if (st == SG_OK) st = sg__session_set_unbacked(d->s, mask); /* copies it */
  sg__free(order);
  sg__free(mask);
  return st;
}

void sg__dist_zero_state_stats(const sg_dist *d, size_t *keep, size_t *total) {
  *keep = *total = 0;
  for (uint32_t t = 0; t < d->g->n_tensors; t++) {
    if (d->g->tensors[t].role != SG_ROLE_OPTIMIZER_STATE) continue;
    *total += d->g->tensors[t].nbytes;
    if (sg__session_tensor_addr(d->s, (int32_t)t, NULL) != NULL) *keep += d->g->tensors[t].nbytes;
  }
}

void sg__dist_zero_free(sg__dist_zero *z) {
  sg__dist_replica_free(z);
  sg__arena_destroy(&z->arena);
  sg__free(z->first);
  sg__free(z->owner);
  sg__free(z->off);
  sg__free(z->update_pos);
  sg__free(z->param_addr);
  sg__free(z->runs);
  sg__free(z->buf);
  *z = (sg__dist_zero){0};
}

/* Which schedule position updates each gradient's parameter; every op from
 * the first update on must be an update of a parameter of the plan (an op
 * that reads all gradients, such as clipping by the global norm, would see
 * only this rank's range averaged). */
static sg_status find_updates(sg_dist *d, sg__dist_zero *z) {
  const sg_graph *g = d->g;
  uint32_t n_order;
  const int32_t *order = sg__session_order(d->s, &n_order);
  for (uint32_t i = 0; i < DP(d)->plan.n_grads; i++) z->update_pos[i] = UINT32_MAX;
  for (uint32_t p = DP(d)->plan.wait_pos; p < n_order; p++) {
    const sg__op *op = &g->ops[order[p]];
    uint32_t i = 0;
    if (is_update(op) && op->n_inputs > 0)
      while (i < DP(d)->plan.n_grads && DP(d)->plan.grads[i].param != op->inputs[0]) i++;
    if (!is_update(op) || op->n_inputs == 0 || i == DP(d)->plan.n_grads)
      return sg__error(SG_ERR_UNSUPPORTED,
                       "sg_dist_create: ZeRO-1 runs only the optimizer updates after backward, one per "
                       "parameter, but op '%s' (%s) runs there too",
                       op->name, sg_op_kind_name(op->kind));
    z->update_pos[i] = p;
  }
  for (uint32_t i = 0; i < DP(d)->plan.n_grads; i++) {
    const sg__tensor *pt = &g->tensors[DP(d)->plan.grads[i].param];
    size_t pbytes = 0;
    z->param_addr[i] = sg__session_tensor_addr(d->s, DP(d)->plan.grads[i].param, &pbytes);
    if (z->update_pos[i] == UINT32_MAX)
      return sg__error(SG_ERR_UNSUPPORTED,
                       "sg_dist_create: ZeRO-1: parameter '%s' has a gradient but no update", pt->name);
    if (z->param_addr[i] == NULL || pbytes != DP(d)->plan.grads[i].bytes)
      return sg__error(SG_ERR_UNSUPPORTED,
                       "sg_dist_create: ZeRO-1: parameter '%s' is kept in %zu bytes, its gradient in %zu",
                       pt->name, pbytes, DP(d)->plan.grads[i].bytes);
  }
  return SG_OK;
}

sg_status sg__dist_zero_layout(sg_dist *d, int rank, int size) {
  sg__dist_zero *z = &DP(d)->zero;
  uint32_t n = DP(d)->plan.n_grads;
  size_t *bytes = sg__malloc((n ? n : 1) * sizeof(size_t));
  uint32_t *first = sg__malloc(((size_t)size + 1) * sizeof(uint32_t));
  if (bytes == NULL || first == NULL) {
    sg__free(bytes);
    sg__free(first);
    return sg__error(SG_ERR_NO_MEMORY, "ZeRO-1: out of memory for the layout");
  }
  for (uint32_t i = 0; i < n; i++) bytes[i] = d->g->tensors[DP(d)->plan.grads[i].param].nbytes;
  cut(bytes, n, size, first);
  sg__free(bytes);
  size_t most = 0;
  for (int r = 0; r < size; r++) {
    size_t off = 0;
    for (uint32_t i = first[r]; i < first[r + 1]; i++) {
      z->owner[i] = r;
      z->off[i] = off;
      off += DP(d)->plan.grads[i].bytes / 4;
    }
    if (off > most) most = off;
  }
  size_t count = most + 1; /* + the loss */
  float *buf = sg__calloc((size_t)size * count, sizeof(float));
  if (buf == NULL) {
    sg__free(first);
    return sg__error(SG_ERR_NO_MEMORY, "ZeRO-1: out of memory for the %zu-float exchange buffer",
                     (size_t)size * count);
  }
  sg__free(z->first);
  sg__free(z->buf);
  z->first = first;
  z->buf = buf;
  z->count = count;
  z->rank = rank;
  z->size = size;
  /* This rank's updates, merged into runs of consecutive positions. */
  uint32_t n_order;
  sg__session_order(d->s, &n_order);
  uint8_t *mine = sg__calloc(n_order ? n_order : 1, 1);
  if (mine == NULL) return sg__error(SG_ERR_NO_MEMORY, "ZeRO-1: out of memory");
  for (uint32_t i = first[rank]; i < first[rank + 1]; i++) mine[z->update_pos[i]] = 1;
  z->n_runs = 0;
  for (uint32_t p = DP(d)->plan.wait_pos; p < n_order; p++) {
    if (!mine[p]) continue;
    if (z->n_runs > 0 && z->runs[2 * z->n_runs - 1] == p) z->runs[2 * z->n_runs - 1] = p + 1;
    else {
      z->runs[2 * z->n_runs] = p;
      z->runs[2 * z->n_runs + 1] = p + 1;
      z->n_runs++;
    }
  }
  sg__free(mine);
  return SG_OK;
}

sg_status sg__dist_zero_init(sg_dist *d) {
  sg__dist_zero *z = &DP(d)->zero;
  uint32_t n = DP(d)->plan.n_grads ? DP(d)->plan.n_grads : 1;
  z->owner = sg__malloc(n * sizeof *z->owner);
  z->off = sg__malloc(n * sizeof *z->off);
  z->update_pos = sg__malloc(n * sizeof *z->update_pos);
  z->param_addr = sg__malloc(n * sizeof *z->param_addr);
  z->runs = sg__malloc(2 * n * sizeof *z->runs);
  sg__arena_init(&z->arena);
  if (!z->owner || !z->off || !z->update_pos || !z->param_addr || !z->runs)
    return sg__error(SG_ERR_NO_MEMORY, "sg_dist_create: out of memory for the ZeRO-1 layout");
  SG_CHECK(find_updates(d, z));
  SG_CHECK(sg__dist_zero_layout(d, d->rank, d->size));
  /* The session left out the state of the parameters outside this rank's
   * range as cut before compile; the plan's order must have cut the same. */
  uint32_t n_order;
  const int32_t *order = sg__session_order(d->s, &n_order);
  for (uint32_t i = 0; i < DP(d)->plan.n_grads; i++) {
    const sg__op *op = &d->g->ops[order[z->update_pos[i]]];
    for (int k = 1; k < op->n_inputs; k++) {
      int32_t t = op->inputs[k];
      if (t < 0 || d->g->tensors[t].role != SG_ROLE_OPTIMIZER_STATE) continue;
      bool has = sg__session_tensor_addr(d->s, t, NULL) != NULL;
      if (has != (z->owner[i] == d->rank))
        return sg__error(SG_ERR_INTERNAL,
                         "sg_dist_create: ZeRO-1: the state of '%s' is %sallocated on rank %d",
                         d->g->tensors[t].name, has ? "" : "not ", d->rank);
    }
  }
  return SG_OK;
}

/* ---- a step: on the scheduler thread ----------------------------------------- */

sg_status sg__dist_zero_bucket(sg_dist *d, uint32_t b, float *loss_mean) {
  sg__dist_zero *z = &DP(d)->zero;
  const sg__dist_bucket *bk = &DP(d)->plan.buckets[b];
  if (DP(d)->accum_on) sg__dist_add_accum(d, bk->first, bk->count);
  for (uint32_t i = bk->first; i < bk->first + bk->count; i++)
    memcpy(z->buf + (size_t)z->owner[i] * z->count + z->off[i], DP(d)->plan.grads[i].addr,
           DP(d)->plan.grads[i].bytes);
  if (b + 1 < DP(d)->plan.n_buckets) return SG_OK; /* the reduce-scatter waits for the whole backward */
  /* With replicas: the step's state is at the buddy before any rank can get past this reduce-scatter
   * (replica.c). */
  if (z->slots.gm != NULL) {
    pthread_mutex_lock(&d->mu);
    sg__dist_replica_flush_locked(d);
    bool failed = d->failed != SG_OK;
    pthread_mutex_unlock(&d->mu);
    if (failed) return sg__dist_failure(d);
  }
  float loss = 0;
  if (DP(d)->loss_addr) memcpy(&loss, DP(d)->loss_addr, 4);
  if (DP(d)->loss_addr && DP(d)->accum_on) loss += DP(d)->accum_loss;
  for (int r = 0; r < z->size; r++) z->buf[(size_t)r * z->count + z->count - 1] = loss;
  float *mine = z->buf + (size_t)z->rank * z->count;
  int64_t t0 = sg__now_ns();
  if (z->size > 1) {
    sg_reduce_op op = DP(d)->sum_div > 0 ? SG_REDUCE_SUM : SG_REDUCE_AVG;
    SG_CHECK(sg_comm_reduce_scatter(d->comm, z->buf, mine, z->count, SG_F32, op));
  }
  z->rs_ns = sg__now_ns() - t0;
  if (DP(d)->sum_div > 0)
    for (size_t k = 0; k < z->count; k++) mine[k] /= (float)DP(d)->sum_div;
  for (uint32_t i = z->first[z->rank]; i < z->first[z->rank + 1]; i++)
    memcpy(DP(d)->plan.grads[i].addr, mine + z->off[i], DP(d)->plan.grads[i].bytes);
  if (DP(d)->loss_addr) *loss_mean = mine[z->count - 1];
  return SG_OK;
}

sg_status sg__dist_zero_job_gather(sg_dist *d, void *arg) {
  const uint64_t *step = arg;
  sg__dist_zero *z = &DP(d)->zero;
  float *mine = z->buf + (size_t)z->rank * z->count;
  int64_t t0 = sg__now_ns();
  for (uint32_t i = z->first[z->rank]; i < z->first[z->rank + 1]; i++)
    memcpy(mine + z->off[i], z->param_addr[i], DP(d)->plan.grads[i].bytes);
  if (z->size > 1) {
    char label[SG_COMM_LABEL_MAX + 1]; /* hang diagnosis (SPEC H7) */
    snprintf(label, sizeof label, "step %llu: allgather of the updated parameters (ZeRO-1)",
             (unsigned long long)*step);
    sg_comm_label(d->comm, label);
    sg_status st = sg_comm_allgather(d->comm, mine, z->buf, z->count, SG_F32);
    if (st != SG_OK) {
      sg__dist_fail(d, SG_ERR_COMM,
                    "rank %d, step %llu: allgather of the updated parameters (ZeRO-1) failed: %s", d->rank,
                    (unsigned long long)*step, sg_last_error());
      return sg__dist_failure(d);
    }
  }
  for (uint32_t i = 0; i < DP(d)->plan.n_grads; i++)
    if (z->owner[i] != z->rank)
      memcpy(z->param_addr[i], z->buf + (size_t)z->owner[i] * z->count + z->off[i],
             DP(d)->plan.grads[i].bytes);
  z->ag_ns = sg__now_ns() - t0;
  return SG_OK;
}

/* ---- a step: on the compute thread ----------------------------------------- */

sg_status sg__dist_zero_update(sg_dist *d) {
  sg__dist_zero *z = &DP(d)->zero;
  sg__step_hooks h = sg__dist_step_hooks(d);
  for (uint32_t k = 0; k < z->n_runs; k++) {
    sg__session_pass updates = {.begin = z->runs[2 * k], .end = z->runs[2 * k + 1], .hooks = &h};
    SG_CHECK(sg__session_run_pass(d->s, &updates));
  }
  uint64_t step = d->stats.steps + 1;
  SG_CHECK(sg__dist_run_job(d, sg__dist_zero_job_gather, &step));
  /* A whole step ran, in parts: count it (dropout masks follow the count). */
  sg__session_pass count = {.count_step = true};
  SG_CHECK(sg__session_run_pass(d->s, &count));
  /* rs_ns was written before the last bucket was marked done, under mu. */
  d->stats.reduce_scatter_ms = (double)z->rs_ns * 1e-6;
  d->stats.allgather_ms = (double)z->ag_ns * 1e-6;
  pthread_mutex_lock(&d->mu);
  d->stats.replication_ms = (double)z->rep_ns * 1e-6;
  pthread_mutex_unlock(&d->mu);
  return SG_OK;
}
