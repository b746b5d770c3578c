/* Static memory planning (SPEC C1): liveness over the training schedule,
 * in-place reuse where an elementwise op's input dies at that op, and
 * greedy-by-size placement of the transient tensors in one region (the
 * approach of TFLite's arena planner). Evaluation runs a subsequence of the
 * same schedule, so the same placement is valid for it. */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "compile/plan.h"
#include "compile/plan_internal.h"

static size_t align_up(size_t n) { return (n + SG__SLOT_ALIGN - 1) & ~(size_t)(SG__SLOT_ALIGN - 1); }

typedef struct group {
  int32_t root; /* tensor id */
  size_t bytes;
  int32_t first, last; /* positions in the schedule */
} group;

static int cmp_groups(const void *a, const void *b) {
  const group *x = a, *y = b;
  if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
  if (x->first != y->first) return x->first < y->first ? -1 : 1;
  return x->root < y->root ? -1 : x->root > y->root;
}

/* Greedy by size: each group, largest first, goes to the lowest offset where
 * it overlaps no placed group that is alive at the same time. */
static sg_status place(group *gs, uint32_t n, size_t *offsets, size_t *peak) {
  qsort(gs, n, sizeof *gs, cmp_groups);
  /* Placed groups that overlap in time, sorted by offset, as candidates. */
  uint32_t *live = sg__malloc((n ? n : 1) * sizeof(uint32_t));
  if (live == NULL) return SG_ERR_NO_MEMORY;
  *peak = 0;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t n_live = 0;
    for (uint32_t j = 0; j < i; j++)
      if (gs[j].first <= gs[i].last && gs[i].first <= gs[j].last) {
        /* Insertion sort by offset: these lists are short. */
        uint32_t k = n_live++;
        while (k > 0 && offsets[live[k - 1]] > offsets[j]) {
          live[k] = live[k - 1];
          k--;
        }
        live[k] = j;
      }
    size_t at = 0, need = align_up(gs[i].bytes);
    for (uint32_t k = 0; k < n_live; k++) {
      size_t lo = offsets[live[k]], hi = lo + align_up(gs[live[k]].bytes);
      if (at + need <= lo) break;
      if (hi > at) at = hi;
    }
    offsets[i] = at;
    if (at + need > *peak) *peak = at + need;
  }
  sg__free(live);
  return SG_OK;
}

sg_status sg__memplan(const sg_graph *g, sg__plan *p, const bool *folded, const uint8_t *no_memory,
                      const sg__backend_i *be, void *be_state) {
  uint32_t nt = g->n_tensors;
  size_t ntt = nt ? nt : 1;
  p->buf_kind = sg__calloc(ntt, 1);
  p->offset = sg__calloc(ntt, sizeof(size_t));
  p->last_use = sg__malloc(ntt * sizeof(int32_t));
  p->alias_of = sg__malloc(ntt * sizeof(int32_t));
  p->bytes = sg__malloc(ntt * sizeof(size_t));
  int32_t *first = sg__malloc(ntt * sizeof(int32_t));
  int32_t *group_of = sg__malloc(ntt * sizeof(int32_t));
  group *gs = sg__malloc(ntt * sizeof(group));
  size_t *offsets = sg__malloc(ntt * sizeof(size_t));
  sg_status st = SG_OK;
  if (!p->buf_kind || !p->offset || !p->last_use || !p->alias_of || !p->bytes || !first || !group_of || !gs ||
      !offsets) {
    st = sg__error(SG_ERR_NO_MEMORY, "compile: out of memory planning %u tensors", nt);
    goto out;
  }
  for (uint32_t t = 0; t < nt; t++) p->last_use[t] = first[t] = p->alias_of[t] = group_of[t] = -1;

  /* Persistent: every source an op reads, graph outputs, folded results. */
  for (uint32_t i = 0; i < p->n_order; i++) {
    const int32_t *ins, *outs;
    int n_in, n_out;
    sg__plan_io(p, g, p->order[i], &ins, &n_in, &outs, &n_out);
    for (int k = 0; k < n_in; k++) {
      int32_t t = ins[k];
      if (t < 0) continue;
      if (g->tensors[t].producer < 0 || folded[g->tensors[t].producer]) p->buf_kind[t] = SG__BUF_PERSISTENT;
      p->last_use[t] = (int32_t)i;
    }
    for (int k = 0; k < n_out; k++) {
      int32_t t = outs[k];
      p->buf_kind[t] = SG__BUF_TRANSIENT;
      first[t] = (int32_t)i;
      if (p->last_use[t] < (int32_t)i) p->last_use[t] = (int32_t)i;
    }
  }
  for (uint32_t i = 0; i < p->n_fold; i++) {
    const sg__op *op = &g->ops[p->fold_order[i]];
    for (int k = 0; k < op->n_inputs; k++)
      if (op->inputs[k] >= 0) p->buf_kind[op->inputs[k]] = SG__BUF_PERSISTENT;
    for (int k = 0; k < op->n_outputs; k++) p->buf_kind[op->outputs[k]] = SG__BUF_PERSISTENT;
  }
  for (uint32_t i = 0; i < g->n_outputs; i++) p->buf_kind[g->outputs[i]] = SG__BUF_PERSISTENT;
  /* Inputs are always given a slot so that the caller can set them. */
  for (uint32_t i = 0; i < g->n_inputs; i++) p->buf_kind[g->inputs[i]] = SG__BUF_PERSISTENT;

  /* Slot sizes: the backend may store transient tensors in a layout of its
   * own (channel-blocked activations), which can be larger than plain. */
  for (uint32_t t = 0; t < nt; t++) p->bytes[t] = g->tensors[t].nbytes;
  if (be != NULL && be->plan_layouts != NULL) {
    uint8_t *may = sg__calloc(ntt, 1);
    if (may == NULL) {
      st = sg__error(SG_ERR_NO_MEMORY, "compile: out of memory planning %u tensors", nt);
      goto out;
    }
    for (uint32_t t = 0; t < nt; t++) may[t] = p->buf_kind[t] == SG__BUF_TRANSIENT;
    sg__fuse_layouts(g, p, may);
    st = be->plan_layouts(be_state, g, may, p->bytes);
    sg__free(may);
    if (st != SG_OK) goto out;
    for (uint32_t t = 0; t < nt; t++)
      if (p->bytes[t] < g->tensors[t].nbytes ||
          (p->buf_kind[t] == SG__BUF_PERSISTENT && p->bytes[t] != g->tensors[t].nbytes)) {
        st = sg__error(SG_ERR_INTERNAL,
                       "compile: backend %s gave tensor '%s' a slot of %zu bytes (nbytes %zu)", be->name,
                       g->tensors[t].name, p->bytes[t], g->tensors[t].nbytes);
        goto out;
      }
  }

  /* In-place: output 0 takes over its input's slot when that input is a
   * transient tensor read for the last time by this op. */
  for (uint32_t i = 0; i < p->n_order; i++) {
    const sg__op *op = &g->ops[p->order[i]];
    if (p->group_of && p->group_of[p->order[i]] >= 0) {
      p->n_inplace += sg__fuse_inplace(g, p, p->group_of[p->order[i]], (int32_t)i);
      continue;
    }
    int j = sg__op_inplace_input(g, op);
    if (j < 0) continue;
    int32_t in = op->inputs[j], out = op->outputs[0];
    if (p->buf_kind[in] != SG__BUF_TRANSIENT || p->buf_kind[out] != SG__BUF_TRANSIENT) continue;
    if (p->last_use[in] != (int32_t)i) continue;
    p->alias_of[out] = p->alias_of[in] >= 0 ? p->alias_of[in] : in;
    p->n_inplace++;
  }

  /* One group per slot: a tensor and everything that reuses it in place. */
  uint32_t n_groups = 0;
  for (uint32_t t = 0; t < nt; t++) {
    if (p->buf_kind[t] == SG__BUF_PERSISTENT && no_memory && no_memory[t]) {
      p->offset[t] = SG__NO_OFFSET;
    } else if (p->buf_kind[t] == SG__BUF_PERSISTENT) {
      p->offset[t] = p->persistent_bytes;
      p->persistent_bytes += align_up(g->tensors[t].nbytes);
    }
    if (p->buf_kind[t] != SG__BUF_NONE) p->sum_tensor_bytes += p->bytes[t];
    if (p->buf_kind[t] != SG__BUF_TRANSIENT) continue;
    p->sum_transient_bytes += align_up(p->bytes[t]);
    int32_t root = p->alias_of[t] >= 0 ? p->alias_of[t] : (int32_t)t;
    if (group_of[root] < 0) {
      group_of[root] = (int32_t)n_groups;
      gs[n_groups++] = (group){root, 0, first[root], first[root]};
    }
    group *gr = &gs[group_of[root]];
    if (p->bytes[t] > gr->bytes) gr->bytes = p->bytes[t];
    if (p->last_use[t] > gr->last) gr->last = p->last_use[t];
  }
  if (place(gs, n_groups, offsets, &p->transient_bytes) != SG_OK) {
    st = sg__error(SG_ERR_NO_MEMORY, "compile: out of memory planning %u tensors", nt);
    goto out;
  }
  /* place() sorted the groups; map roots back to their offsets. */
  for (uint32_t i = 0; i < n_groups; i++) group_of[gs[i].root] = (int32_t)i;
  for (uint32_t t = 0; t < nt; t++) {
    if (p->buf_kind[t] != SG__BUF_TRANSIENT) continue;
    int32_t root = p->alias_of[t] >= 0 ? p->alias_of[t] : (int32_t)t;
    p->offset[t] = offsets[group_of[root]];
  }
out:
  sg__free(first);
  sg__free(group_of);
  sg__free(gs);
  sg__free(offsets);
  return st;
}
