/* Creating a pipeline stage runner (pp.h): everything a step needs is found
 * and allocated here, so a step allocates nothing: the schedule positions
 * that end the forward and the backward pass, the update ops to run, the
 * gradient slots and their accumulators, the kept slots of the boundary
 * tensors, the message buffers. */
#include <string.h>

#include "comm/wire.h"
#include "graph/graph.h"
#include "parallel/pp.h"
#include "runtime/hooks.h"
#include "sgrt/train.h"

static size_t msg_bytes(const sg__tensor *x) { return sg__wire_header_size((unsigned)x->ndim) + x->nbytes; }

static bool is_update(sg_op_kind k) { return k == SG_OP_SGD_UPDATE || k == SG_OP_ADAMW_UPDATE; }

static bool in_list(const int32_t *ids, int n, int32_t t) {
  for (int i = 0; i < n; i++)
    if (ids[i] == t) return true;
  return false;
}

/* A kept (persistent) slot of an f32 tensor: marked outputs have one. */
static sg_status kept_addr(sg__pp_runner *r, int32_t t, const void **addr) {
  size_t bytes = 0;
  *addr = sg__session_tensor_addr(r->s, t, &bytes);
  const sg__tensor *x = &r->g->tensors[t];
  if (*addr == NULL || bytes < x->nbytes)
    return sg__error(SG_ERR_STATE, "sg__pp_runner_create: tensor '%s' has no slot in the session", x->name);
  return SG_OK;
}

/* Where the passes end in the schedule, and which updates to run. */
static sg_status find_positions(sg__pp_runner *r) {
  const sg__pp_stage *st = r->st;
  const sg_graph *g = r->g;
  uint32_t n = 0;
  const int32_t *order = sg__session_order(r->s, &n);
  if (order == NULL) return sg__error(SG_ERR_STATE, "sg__pp_runner_create: compile the session first");
  r->upd = sg__calloc((size_t)n + 1, sizeof *r->upd);
  if (r->upd == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg__pp_runner_create: out of memory");
  r->bwd_end = n;
  for (uint32_t p = 0; p < n; p++) {
    const sg__op *op = &g->ops[order[p]];
    if (is_update(op->kind)) {
      if (r->bwd_end == n) r->bwd_end = p;
      /* A boundary input is a parameter only to get its gradient. */
      if (!in_list(st->recv, st->n_recv, op->inputs[0])) r->upd[r->n_upd++] = p;
    } else if (r->bwd_end < n) {
      return sg__error(SG_ERR_STATE,
                       "sg__pp_runner_create: op '%s' runs after an update: create the session with "
                       "sg__session_set_updates_last",
                       op->name);
    }
    for (int j = 0; j < st->n_send; j++)
      if (order[p] == g->tensors[st->send[j]].producer && p + 1 > r->fwd_end) r->fwd_end = p + 1;
  }
  /* A stage without weights of its own (only boundary inputs) has nothing
   * to update, but its graph still ends in their (skipped) updates. */
  if (r->bwd_end == n)
    return sg__error(SG_ERR_STATE, "sg__pp_runner_create: stage %d's graph has no optimizer update",
                     st->stage);
  /* The early forward must not need the gradient that arrives later. */
  for (uint32_t p = 0; p < r->fwd_end; p++) {
    const sg__op *op = &g->ops[order[p]];
    for (int i = 0; i < op->n_inputs; i++)
      if (op->inputs[i] >= 0 && in_list(st->send_grad, st->n_send, op->inputs[i]))
        return sg__error(SG_ERR_INTERNAL,
                         "sg__pp_runner_create: op '%s' reads a boundary gradient before the last boundary "
                         "output is computed",
                         op->name);
  }
  return SG_OK;
}

static sg_status find_grads(sg__pp_runner *r) {
  const sg_graph *g = r->g;
  r->grads = sg__calloc(g->n_tensors + 1, sizeof *r->grads);
  if (r->grads == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg__pp_runner_create: out of memory");
  for (uint32_t t = 0; t < g->n_tensors; t++) {
    if (g->tensors[t].role != SG_ROLE_PARAMETER || in_list(r->st->recv, r->st->n_recv, (int32_t)t)) continue;
    sg_tensor gr;
    if (sg_graph_grad(g, (sg_tensor){(int32_t)t}, &gr) != SG_OK) continue; /* not trained */
    const sg__tensor *x = &g->tensors[gr.id];
    size_t bytes = 0;
    float *slot = sg__session_tensor_addr(r->s, gr.id, &bytes);
    if (slot == NULL) continue; /* dead code: never computed */
    if (x->dtype != SG_F32 || bytes < x->nbytes)
      return sg__error(SG_ERR_UNSUPPORTED, "sg__pp_runner_create: gradient '%s' is %s; f32 only (for now)",
                       x->name, sg_dtype_name(x->dtype));
    sg__pp_grad *pg = &r->grads[r->n_grads++];
    pg->slot = slot;
    pg->n = x->nbytes / sizeof(float);
    pg->acc = sg__malloc(x->nbytes + 1);
    if (pg->acc == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg__pp_runner_create: out of memory");
  }
  return SG_OK;
}

/* Each tied weight's gradient slot, and whether its holders are in x (stage j at rank + (j - stage) *
 * stride). Every holder must train it: a copy without a gradient would keep its old value while the others
 * move. */
static sg_status find_tied(sg__pp_runner *r) {
  const sg__pp_stage *st = r->st;
  if (st->n_tied == 0) return SG_OK;
  r->stride = st->stage > 0 ? r->x.rank - r->prev : r->next - r->x.rank;
  r->tied = sg__calloc((size_t)st->n_tied, sizeof *r->tied);
  if (r->tied == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg__pp_runner_create: out of memory");
  for (int i = 0; i < st->n_tied; i++) {
    const char *name = r->g->tensors[st->tied[i]].name;
    for (int h = st->tied_off[i]; h < st->tied_off[i + 1]; h++) {
      int j = st->tied_holders[h], peer = r->x.rank + (j - st->stage) * r->stride;
      if (peer < 0 || peer >= r->x.size)
        return sg__error(
            SG_ERR_INVALID_ARG,
            "sg__pp_runner_create: tied weight '%s' is held by stage %d, which would be rank %d of "
            "%d (stages evenly spaced from neighbours %d and %d)",
            name, j, peer, r->x.size, r->prev, r->next);
    }
    sg_tensor gr;
    size_t bytes = 0;
    float *slot = NULL;
    if (sg_graph_grad(r->g, (sg_tensor){st->tied[i]}, &gr) == SG_OK)
      slot = sg__session_tensor_addr(r->s, gr.id, &bytes);
    if (slot == NULL)
      return sg__error(
          SG_ERR_UNSUPPORTED,
          "sg__pp_runner_create: tied weight '%s' gets no gradient on stage %d; every stage that "
          "reads it must train it",
          name, st->stage);
    const sg__tensor *x = &r->g->tensors[gr.id];
    if (x->dtype != SG_F32 || bytes < x->nbytes)
      return sg__error(SG_ERR_UNSUPPORTED, "sg__pp_runner_create: gradient '%s' is %s; f32 only (for now)",
                       x->name, sg_dtype_name(x->dtype));
    r->tied[i] = (sg__pp_tied){.grad = gr.id, .slot = slot, .n = x->nbytes / sizeof(float)};
    size_t b = msg_bytes(x);
    r->buf_bytes = b > r->buf_bytes ? b : r->buf_bytes;
  }
  return SG_OK;
}

static sg_status find_buffers(sg__pp_runner *r) {
  const sg__pp_stage *st = r->st;
  const sg_graph *g = r->g;
  int nr = st->n_recv, ns = st->n_send;
  r->depth = st->stages - st->stage < st->micro_batches ? st->stages - st->stage : st->micro_batches;
  size_t slots = (size_t)r->depth * (size_t)nr + 1;
  r->fwd_msg = sg__calloc(slots, sizeof *r->fwd_msg);
  r->fwd_data = sg__calloc(slots, sizeof *r->fwd_data);
  r->send_addr = sg__calloc((size_t)ns + 1, sizeof *r->send_addr);
  r->rgrad_addr = sg__calloc((size_t)nr + 1, sizeof *r->rgrad_addr);
  r->in_data = sg__calloc((size_t)st->n_inputs + 1, sizeof *r->in_data);
  if (!r->fwd_msg || !r->fwd_data || !r->send_addr || !r->rgrad_addr || !r->in_data)
    return sg__error(SG_ERR_NO_MEMORY, "sg__pp_runner_create: out of memory");
  for (int d = 0; d < r->depth; d++)
    for (int j = 0; j < nr; j++) {
      r->fwd_msg[d * nr + j] = sg__malloc(msg_bytes(&g->tensors[st->recv[j]]));
      if (r->fwd_msg[d * nr + j] == NULL)
        return sg__error(SG_ERR_NO_MEMORY, "sg__pp_runner_create: out of memory");
    }
  for (int j = 0; j < ns; j++) {
    SG_CHECK(kept_addr(r, st->send[j], &r->send_addr[j]));
    size_t b = msg_bytes(&g->tensors[st->send[j]]);
    r->buf_bytes = b > r->buf_bytes ? b : r->buf_bytes;
  }
  for (int j = 0; j < nr; j++) {
    SG_CHECK(kept_addr(r, st->recv_grad[j], &r->rgrad_addr[j]));
    size_t b = msg_bytes(&g->tensors[st->recv_grad[j]]);
    r->buf_bytes = b > r->buf_bytes ? b : r->buf_bytes;
  }
  r->buf = sg__malloc(r->buf_bytes + 1);
  if (r->buf == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg__pp_runner_create: out of memory");
  if (st->stage == st->stages - 1) {
    const void *a;
    SG_CHECK(kept_addr(r, st->loss, &a));
    if (g->tensors[st->loss].dtype != SG_F32)
      return sg__error(SG_ERR_UNSUPPORTED, "sg__pp_runner_create: the loss is %s; f32 only",
                       sg_dtype_name(g->tensors[st->loss].dtype));
    r->loss_addr = a;
  }
  return SG_OK;
}

static sg_status setup(sg__pp_runner *r) {
  const sg__pp_stage *st = r->st;
  int size = r->x.size, me = r->x.rank;
  bool need_prev = st->stage > 0, need_next = st->stage + 1 < st->stages;
  if ((need_prev && (r->prev < 0 || r->prev >= size || r->prev == me)) ||
      (need_next && (r->next < 0 || r->next >= size || r->next == me)))
    return sg__error(SG_ERR_INVALID_ARG,
                     "sg__pp_runner_create: stage %d of %d on rank %d of %d: neighbour ranks %d and %d",
                     st->stage, st->stages, me, size, r->prev, r->next);
  if (sg__session_graph(r->s) != st->g)
    return sg__error(SG_ERR_INVALID_ARG, "sg__pp_runner_create: the session does not run the stage's graph");
  SG_CHECK(find_positions(r));
  SG_CHECK(find_grads(r));
  SG_CHECK(find_tied(r)); /* before find_buffers: the message buffer fits its gradients too */
  if (r->replicas > 1) {
    for (int i = 0; i < r->n_grads; i++) r->n_flat += r->grads[i].n;
    r->flat = sg__malloc(r->n_flat * sizeof(float) + 1);
    if (r->flat == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg__pp_runner_create: out of memory");
  }
  SG_CHECK(find_buffers(r));
  int cap = 6 * st->micro_batches + 1;
  r->prog = sg__calloc((size_t)cap, sizeof *r->prog);
  if (r->prog == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg__pp_runner_create: out of memory");
  return sg__pp_schedule(st->stages, st->stage, st->micro_batches, r->prog, cap, &r->n_prog);
}

/* The replica group's transport must be this stage's copies only: its rank
 * is the replica and its size the number of replicas (the allreduce goes to
 * every rank of it). */
static sg_status check_dp(const sg__pp_dp *dp) {
  if (dp == NULL) return SG_OK;
  if (dp->replicas < 1 || dp->replica < 0 || dp->replica >= dp->replicas)
    return sg__error(SG_ERR_INVALID_ARG, "sg__pp_runner_create: replica %d of %d replicas", dp->replica,
                     dp->replicas);
  if (dp->replicas == 1) return SG_OK; /* nothing to average; x is not used */
  if (dp->x == NULL || dp->x->allreduce == NULL)
    return sg__error(SG_ERR_INVALID_ARG,
                     "sg__pp_runner_create: %d replicas but no transport with an allreduce", dp->replicas);
  if (dp->x->size != dp->replicas || dp->x->rank != dp->replica)
    return sg__error(
        SG_ERR_INVALID_ARG,
        "sg__pp_runner_create: the replica group's transport is rank %d of %d, expected replica %d "
        "of %d",
        dp->x->rank, dp->x->size, dp->replica, dp->replicas);
  return SG_OK;
}

sg_status sg__pp_runner_create(const sg__pp_stage *st, sg_session *s, const sg__xfer *x, int prev, int next,
                               const sg__pp_dp *dp, sg__pp_runner **out) {
  if (out) *out = NULL;
  if (st == NULL || s == NULL || x == NULL || out == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg__pp_runner_create: NULL argument");
  SG_CHECK(check_dp(dp));
  sg__pp_runner *r = sg__calloc(1, sizeof *r);
  if (r == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg__pp_runner_create: out of memory");
  *r = (sg__pp_runner){.st = st, .s = s, .g = st->g, .x = *x, .prev = prev, .next = next, .replicas = 1};
  if (dp != NULL && dp->replicas > 1) { /* one copy needs no transport (it may be NULL) */
    r->dp_x = *dp->x;
    r->replica = dp->replica;
    r->replicas = dp->replicas;
  }
  sg_status rc = setup(r);
  if (rc != SG_OK) {
    sg__pp_runner_destroy(r);
    return rc;
  }
  *out = r;
  return SG_OK;
}

void sg__pp_runner_destroy(sg__pp_runner *r) {
  if (r == NULL) return;
  for (int i = 0; i < r->n_grads; i++) sg__free(r->grads[i].acc);
  if (r->fwd_msg)
    for (int i = 0; i < r->depth * r->st->n_recv; i++) sg__free(r->fwd_msg[i]);
  sg__free(r->grads);
  sg__free(r->upd);
  sg__free(r->fwd_msg);
  sg__free(r->fwd_data);
  sg__free(r->send_addr);
  sg__free(r->rgrad_addr);
  sg__free(r->in_data);
  sg__free(r->buf);
  sg__free(r->flat);
  sg__free(r->prog);
  sg__free(r->tied);
  sg__free(r);
}

sg_status sg__pp_set_input(sg__pp_runner *r, const char *name, const void *data, size_t bytes) {
  if (r == NULL || name == NULL || data == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg__pp_set_input: NULL argument");
  const sg__pp_stage *st = r->st;
  int32_t t = sg__tensor_lookup(r->g, name);
  if (t < 0 || r->g->tensors[t].role != SG_ROLE_INPUT || in_list(st->send_grad, st->n_send, t))
    return sg__error(SG_ERR_NOT_FOUND, "sg__pp_set_input: stage %d reads no input '%s'", st->stage, name);
  const sg__tensor *x = &r->g->tensors[t];
  for (int i = 0; i < st->n_inputs; i++) {
    if (st->inputs[i] != t || !st->batched[i]) continue;
    size_t want = x->nbytes * (size_t)st->micro_batches;
    if (bytes != want)
      return sg__error(SG_ERR_SHAPE,
                       "sg__pp_set_input: input '%s' takes the whole batch, %zu bytes; given %zu", name, want,
                       bytes);
    r->in_data[i] = data;
    return SG_OK;
  }
  if (bytes != x->nbytes)
    return sg__error(SG_ERR_SHAPE, "sg__pp_set_input: input '%s' is %zu bytes; given %zu", name, x->nbytes,
                     bytes);
  return sg_session_set_input(r->s, name, x->dtype, x->ndim, x->dims, data);
}
