/* Running the tensor-parallel syncs (tp.h): passes of the session whose
 * hooks all-reduce each sync tensor in its slot right after the op that
 * produces it, so its consumers read the group's sum.
 *
 * First version: the all-reduces run on the stepping thread, blocking, in
 * schedule order -- every rank of the group runs the same schedule, so they
 * meet in the same order. The data-parallel runtime's scheduler thread (which
 * owns the communicator there, DESIGN.md) takes them over when TP joins
 * sg_dist as its tensor degree. Nothing here allocates during a step. */
#include <string.h>

#include "graph/graph.h"
#include "parallel/tp.h"
#include "runtime/hooks.h"

typedef struct tp_slot {
  uint32_t pos; /* schedule position of the producing op */
  void *addr;
  size_t count; /* elements (the slot's layout size, which may pad) */
  sg_dtype dtype;
} tp_slot;

struct sg__tp_runner {
  sg_session *s;
  sg__xfer x;
  tp_slot *slots; /* sorted by pos */
  int n_slots;
  uint8_t *after_at;
  sg__step_hooks hooks; /* after_op at after_at */
  uint32_t n_order;
  int64_t elements;
};

static sg_status after_op(void *ctx, uint32_t pos) {
  sg__tp_runner *r = ctx;
  for (int i = 0; i < r->n_slots; i++) {
    tp_slot *t = &r->slots[i];
    if (t->pos == pos) SG_CHECK(r->x.allreduce(r->x.ctx, t->addr, t->count, t->dtype, SG_REDUCE_SUM));
  }
  return SG_OK;
}

static sg_status add_slot(sg__tp_runner *r, const sg_graph *g, const int32_t *order, uint32_t n_order,
                          const char *name) {
  int32_t t = sg__tensor_lookup(g, name);
  if (t < 0)
    return sg__error(SG_ERR_NOT_FOUND, "sg__tp_runner_create: no tensor '%s' in the session's graph", name);
  const sg__tensor *x = &g->tensors[t];
  size_t bytes = 0, es = sg_dtype_size(x->dtype);
  void *addr = sg__session_tensor_addr(r->s, t, &bytes);
  if (addr == NULL || x->producer < 0)
    return sg__error(SG_ERR_NOT_FOUND, "sg__tp_runner_create: tensor '%s' has no slot or no producer", name);
  if (x->dtype != SG_F32 && x->dtype != SG_F16 && x->dtype != SG_BF16)
    return sg__error(SG_ERR_DTYPE, "sg__tp_runner_create: tensor '%s' is %s; only float tensors are summed",
                     name, sg_dtype_name(x->dtype));
  uint32_t pos = n_order;
  for (uint32_t p = 0; p < n_order; p++)
    if (order[p] == x->producer) pos = p;
  if (pos == n_order)
    return sg__error(SG_ERR_NOT_FOUND, "sg__tp_runner_create: the producer of '%s' is not scheduled", name);
  /* Slots are kept in schedule order; every rank runs the same schedule, so
   * two syncs after one op are still met in one order everywhere. */
  int i = r->n_slots++;
  for (; i > 0 && r->slots[i - 1].pos > pos; i--) r->slots[i] = r->slots[i - 1];
  r->slots[i] = (tp_slot){pos, addr, bytes / es, x->dtype};
  r->after_at[pos] = 1;
  r->elements += (int64_t)(bytes / es);
  return SG_OK;
}

static sg_status setup(sg__tp_runner *r, const sg__tp_sync *syncs, int n_syncs) {
  uint32_t n_order = 0;
  const int32_t *order = sg__session_order(r->s, &n_order);
  const sg_graph *g = sg__session_graph(r->s);
  if (order == NULL || g == NULL)
    return sg__error(SG_ERR_STATE, "sg__tp_runner_create: compile the session first");
  r->slots = sg__calloc((size_t)n_syncs + 1, sizeof *r->slots);
  r->after_at = sg__calloc((size_t)n_order + 1, 1);
  if (r->slots == NULL || r->after_at == NULL)
    return sg__error(SG_ERR_NO_MEMORY, "sg__tp_runner_create: out of memory");
  for (int i = 0; i < n_syncs; i++) {
    const sg__tp_sync *s = &syncs[i];
    if (s->kind != SG__TP_SYNC_FWD_ALLREDUCE && s->kind != SG__TP_SYNC_BWD_ALLREDUCE)
      return sg__error(SG_ERR_INVALID_ARG, "sg__tp_runner_create: sync %d has kind %d", i, (int)s->kind);
    if (!s->resolved)
      return sg__error(SG_ERR_STATE,
                       "sg__tp_runner_create: backward sync of op '%s' is unresolved: call "
                       "sg__tp_resolve_backward after sg_graph_backward",
                       s->op ? s->op : "?");
    if (s->tensor) SG_CHECK(add_slot(r, g, order, n_order, s->tensor));
  }
  r->hooks = (sg__step_hooks){r, NULL, after_op, NULL, r->after_at};
  r->n_order = n_order;
  return SG_OK;
}

sg_status sg__tp_runner_create(sg_session *s, const sg__xfer *x, const sg__tp_sync *syncs, int n_syncs,
                               sg__tp_runner **out) {
  if (out) *out = NULL;
  if (s == NULL || x == NULL || out == NULL || (syncs == NULL && n_syncs > 0) || n_syncs < 0)
    return sg__error(SG_ERR_INVALID_ARG, "sg__tp_runner_create: NULL argument or n_syncs %d", n_syncs);
  sg__tp_runner *r = sg__calloc(1, sizeof *r);
  if (r == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg__tp_runner_create: out of memory");
  r->s = s;
  r->x = *x;
  sg_status st = setup(r, syncs, n_syncs);
  if (st != SG_OK) {
    sg__free(r->slots);
    sg__free(r->after_at);
    sg__free(r);
    return st;
  }
  *out = r;
  return SG_OK;
}

sg_status sg__tp_runner_run(sg__tp_runner *r, uint32_t begin, uint32_t end, uint64_t stream,
                            bool count_step) {
  if (r == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg__tp_runner_run: runner is NULL");
  sg__session_pass p = {
      .begin = begin, .end = end, .stream = stream, .hooks = &r->hooks, .count_step = count_step};
  return sg__session_run_pass(r->s, &p);
}

sg_status sg__tp_runner_step(sg__tp_runner *r) {
  if (r == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg__tp_runner_step: runner is NULL");
  return sg__tp_runner_run(r, 0, r->n_order, 0, true);
}

const sg__step_hooks *sg__tp_runner_hooks(const sg__tp_runner *r) { return r ? &r->hooks : NULL; }

void sg__tp_runner_destroy(sg__tp_runner *r) {
  if (r == NULL) return;
  sg__free(r->slots);
  sg__free(r->after_at);
  sg__free(r);
}

void sg__tp_runner_stats(const sg__tp_runner *r, int *n_allreduce, int64_t *elements) {
  if (n_allreduce) *n_allreduce = r ? r->n_slots : 0;
  if (elements) *elements = r ? r->elements : 0;
}

sg_status sg__tp_gather(const sg__xfer *x, int ndim, const int64_t *full_dims, int axis, int groups,
                        const float *slice, float *full) {
  if (x == NULL || full_dims == NULL || slice == NULL || full == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg__tp_gather: NULL argument");
  int ways = x->size;
  if (ndim < 1 || ndim > SG_MAX_DIMS || axis < 0 || axis >= ndim || ways < 1 || groups < 1 ||
      full_dims[axis] % ((int64_t)groups * ways) != 0)
    return sg__error(SG_ERR_INVALID_ARG,
                     "sg__tp_gather: axis %d of a %d-D tensor does not split into %d blocks of %d slices",
                     axis, ndim, groups, ways);
  size_t piece = (size_t)sg__numel(ndim, full_dims) / (size_t)ways;
  /* allgather stacks the slices rank after rank; each goes back to its place along axis. */
  float *stacked = sg__malloc(piece * (size_t)ways * sizeof *stacked + 1);
  if (stacked == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg__tp_gather: out of memory");
  sg_status st = x->allgather(x->ctx, slice, stacked, piece, SG_F32);
  for (int r = 0; r < ways && st == SG_OK; r++)
    sg__tp_slice_copy((unsigned char *)full, (unsigned char *)(stacked + (size_t)r * piece), ndim, full_dims,
                      sizeof *full, axis, groups, ways, r, true);
  sg__free(stacked);
  return st;
}
