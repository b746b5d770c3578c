/* Healing a tensor group (sg_dist_params.heal, docs/resilience.md "Healing a
 * tensor group"): the tensor strategy's part of model_heal.c. A share's copy
 * holds every parameter and state of its share (slices of the split ones,
 * the whole replicated ones), each with its optimizer state. After a loss
 * the group is split again, T' = the members ways: each split tensor is put
 * together from the generation's slices (a surviving share's own copy, or,
 * for a lost share, the copy the next share kept), each slice broadcast from
 * the rank that holds it, in the source graph's tensor order; every rank
 * cuts its new slice from the whole (a replicated tensor comes from its own
 * copy). The new split is the plan's for T' ways: a dim that T' does not
 * divide stays replicated, as sg_tp_plan_create decides for any job. With
 * copies (data > 1) the group may heal down to T' = 1: each copy's one rank
 * holds the whole model (no plan: every split tensor put together from the
 * slices, nothing cut), runs it with no syncs and still averages the
 * gradients over the copies. Without copies it never gets there: 1 of 2
 * ranks is not a strict majority. Two neighbouring shares lost at once
 * leave the first without a copy, which stops the job with an error naming
 * both. */
#include <stdio.h>
#include <string.h>

#include "graph/graph.h"
#include "parallel/model.h"
#include "runtime/hooks.h"

/* The recovery's broadcasts: below the pipeline's moves (pp_heal.c). */
#define HEAL_TAG 0x3ffffb00u

/* Every share holds every parameter and state (a slice, or the whole). */
static bool mine(const sg_dist *d, int32_t t) {
  (void)d, (void)t;
  return true;
}

/* How tensor `name` of src is cut under `plan` (sg_tp_plan_tensor_split): the axis, -1 when whole (or no
 * plan: one way), and its blocks. */
static int split_axis(const sg_graph *src, const sg_tp_plan *plan, const char *name, int *groups) {
  int32_t t = plan != NULL ? sg__tensor_lookup(src, name) : -1;
  int axis = -1;
  *groups = 1;
  if (t >= 0 && sg_tp_plan_tensor_split(plan, (sg_tensor){t}, &axis, groups) != SG_OK) axis = -1, *groups = 1;
  return axis;
}

sg_status sg__reshard_one(sg__reshard *c, int32_t t) {
  sg_dist *d = c->d;
  const sg_graph *fwd = MODEL(d)->fwd, *ng = d->g;
  const sg__tensor *p = &fwd->tensors[t];
  int T0 = c->T0, T1 = c->T1;
  int g0 = 1, g1 = 1;
  int a0 = split_axis(c->src, c->plan0, p->name, &g0), a1 = split_axis(c->src, c->plan1, p->name, &g1);
  int32_t ids[5];
  int n = sg__pp_state_group(ng, p->name, ids);
  if (n == 0) return sg__error(SG_ERR_INTERNAL, "tensor healing: '%s' is not in the new share", p->name);
  /* A member shaped as the parameter is split with it; another (AdamW's step count) is whole. */
  size_t old_bytes = 0;
  for (int i = 0; i < n; i++) {
    const sg__tensor *y = &ng->tensors[ids[i]];
    bool shaped = y->ndim == p->ndim;
    size_t whole = shaped ? p->nbytes : y->nbytes;
    old_bytes += a0 >= 0 && shaped ? whole / (size_t)T0 : whole;
  }
  SG_CHECK(sg__model_heal_reserve(&c->all, &c->all_cap, a0 >= 0 ? old_bytes * (size_t)T0 : old_bytes));
  if (a0 < 0) { /* whole in every share: this rank's own copy */
    uint64_t bytes = 0;
    const unsigned char *b = sg__model_copy_find(c->g->own, t, &bytes);
    if (b == NULL || bytes != old_bytes)
      return sg__error(SG_ERR_INTERNAL, "tensor healing: this rank's copy lacks '%s'", p->name);
    memcpy(c->all, b, old_bytes);
  } else { /* old share s's slices from the rank that holds them, to everyone */
    sg__xfer *x = c->x;
    for (int s = 0; s < T0; s++) {
      unsigned char *dst = c->all + (size_t)s * old_bytes;
      if (c->keeper[s] == c->me) {
        uint64_t bytes = 0;
        const unsigned char *b = sg__model_copy_find(c->from_own[s] ? c->g->own : c->g->prev, t, &bytes);
        if (b == NULL || bytes != old_bytes)
          return sg__error(SG_ERR_INTERNAL, "tensor healing: the copy of share %d lacks '%s'", s, p->name);
        memcpy(dst, b, old_bytes);
        for (int r = 0; r < T1; r++)
          if (r != c->me) SG_CHECK(x->send(x->ctx, r, HEAL_TAG, dst, old_bytes));
      } else {
        SG_CHECK(x->recv(x->ctx, c->keeper[s], HEAL_TAG, dst, old_bytes));
      }
    }
  }
  /* Each member: whole from the slices, then this rank's new slice. */
  size_t off_old = 0;
  for (int i = 0; i < n; i++) {
    const sg__tensor *y = &ng->tensors[ids[i]];
    bool shaped = y->ndim == p->ndim;
    size_t whole = shaped ? p->nbytes : y->nbytes, mine_old = a0 >= 0 && shaped ? whole / (size_t)T0 : whole;
    SG_CHECK(sg__model_heal_reserve(&c->whole, &c->whole_cap, whole));
    if (a0 >= 0 && shaped) {
      for (int s = 0; s < T0; s++)
        sg__tp_slice_copy(c->whole, c->all + (size_t)s * old_bytes + off_old, p->ndim, p->dims,
                          sg_dtype_size(y->dtype), a0, g0, T0, s, true);
    } else {
      memcpy(c->whole, c->all + off_old, whole);
    }
    off_old += mine_old;
    const unsigned char *out = c->whole;
    if (a1 >= 0 && shaped) {
      SG_CHECK(sg__model_heal_reserve(&c->part, &c->part_cap, whole / (size_t)T1));
      sg__tp_slice_copy(c->whole, c->part, p->ndim, p->dims, sg_dtype_size(y->dtype), a1, g1, T1, c->me,
                        false);
      out = c->part;
    }
    SG_CHECK(sg_session_write(d->s, y->name, out, y->nbytes));
  }
  return SG_OK;
}

void sg__reshard_free(sg__reshard *c) {
  sg_tp_plan_destroy(c->plan0);
  sg_tp_plan_destroy(c->plan1);
  sg__free(c->all);
  sg__free(c->whole);
  sg__free(c->part);
  c->plan0 = c->plan1 = NULL;
  c->all = c->whole = c->part = NULL;
}

/* The inputs every rank kept, into the new share's session (a micro-batched one is cut at every step). */
static sg_status give_inputs(sg_dist *d) {
  sg__par_model *m = MODEL(d);
  for (int i = 0; i < m->n_inputs; i++) {
    sg__model_input *in = &m->inputs[i];
    if (in->src == NULL || in->batched || !in->here) continue;
    SG_CHECK(sg_session_set_input(d->s, in->name, in->dtype, in->ndim, in->dims, in->src));
  }
  return SG_OK;
}

/* The new share over the agreed members from generation g (model.h's sg__model_heal_ops.rebuild). */
static sg_status rebuild(sg_dist *d, const sg__model_gen *g) {
  sg__par_tensor *P = TENSOR(d);
  sg__reshard c = {.d = d, .g = g, .src = P->micro_g != NULL ? P->micro_g : P->m.fwd, .T0 = g->K};
  sg_status st = SG_OK;
  for (int k = 0; k < g->K && st == SG_OK; k++)
    st = sg__model_gen_keeper(d, g, k, &c.keeper[k], &c.from_own[k]);
  /* One way splits nothing: no plan (sg__reshard_one puts every tensor together whole). */
  sg_tp_params tpp = SG_TP_PARAMS_INIT;
  tpp.ways = g->K;
  if (st == SG_OK && g->K > 1) st = sg_tp_plan_create(c.src, &tpp, &c.plan0);
  sg__tensor_free_share(d);
  P->m.tensor = d->size / P->m.data;
  if (st == SG_OK) st = sg__model_replace(d);
  tpp.ways = c.T1 = P->m.tensor;
  c.me = P->m.index;
  c.x = &P->m.xfer;
  if (st == SG_OK && c.T1 > 1) st = sg_tp_plan_create(c.src, &tpp, &c.plan1);
  if (st == SG_OK) st = sg__dist_inject_recovery(d, SG_RECOVERY_TRANSFER);
  if (st == SG_OK) st = sg__tensor_build_share(d);
  /* Every rank built its share, or all give up (a split the rewrite refuses fails everywhere). */
  char why[512] = "";
  if (st != SG_OK) snprintf(why, sizeof why, "%s", sg_last_error());
  int64_t ok = st == SG_OK;
  sg_status ast = st == SG_ERR_COMM ? st : sg__dist_world_allreduce(d, &ok, 1, SG_I64, SG_REDUCE_MIN);
  const sg_graph *fwd = P->m.fwd;
  for (uint32_t t = 0; t < fwd->n_tensors && ast == SG_OK && ok; t++) {
    if (!sg__model_heal_keeps(fwd, t)) continue;
    st = sg__reshard_one(&c, (int32_t)t);
    if (st != SG_OK) {
      snprintf(why, sizeof why, "%s", sg_last_error());
      ok = 0;
      if (st == SG_ERR_COMM) ast = st;
    }
  }
  sg__reshard_free(&c);
  if (ast != SG_OK) return ast; /* a death: the caller agrees again */
  if (!ok)
    return sg__error(st != SG_OK ? st : SG_ERR_COMM, "rank %d: tensor healing: %s", d->orig_rank,
                     st != SG_OK ? why : "another rank could not build its new share");
  return give_inputs(d);
}

/* Every share holds its copy's loss: the world's sum counts each copy `tensor` times (the ways now). */
static int copies(const sg_dist *d) { return MODEL(d)->data * MODEL(d)->tensor; }

const sg__model_heal_ops sg__tp_heal_ops = {
    .copies = copies, .part = sg__tensor_part_step, .after = NULL, .mine = mine, .rebuild = rebuild};
