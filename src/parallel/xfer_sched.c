/* The transport of sg_dist's pipeline and tensor modes (model.h): every
 * call is a job on the scheduler thread, which owns the communicator (SPEC
 * H1, DESIGN.md "How a step flows"), so the compute thread that drives a
 * runner never calls UCX, and between calls the scheduler goes on sending
 * heartbeats and watching the peers.
 *
 * A group (a pipeline's stages, a stage's replicas) is a list of world
 * ranks, and its traffic goes over the world communicator too, rather than
 * over a communicator of its own: a scheduler thread blocked in one
 * communicator's wait sends no heartbeats on any other, so with several
 * communicators a rank waiting in the pipeline would look dead to its
 * replicas. On the one world communicator every wait heartbeats and watches
 * every rank. */
#include <stdio.h>
#include <string.h>

#include "parallel/model.h"

typedef enum xfer_op { OP_SEND, OP_RECV, OP_ALLREDUCE, OP_ALLGATHER, OP_BCAST } xfer_op;

/* One tag for a group's collective messages: messages between a pair under
 * one tag are matched in order, and a collective's pairs are its own (a
 * pipeline's messages go between neighbouring stages, a replica group's
 * between copies of one stage). Apart from the pipeline runner's tags
 * (below 2^30 + its fields) and the trace's (0x7ffffff0). */
#define GROUP_TAG 0x7fffff00u

typedef struct xfer_call {
  sg__xfer_sched *x;
  xfer_op op;
  int peer;
  uint32_t tag;
  const void *src;
  void *dst;
  size_t bytes, count;
  sg_dtype dtype;
  sg_reduce_op red;
} xfer_call;

static const char *op_name(xfer_op op) {
  switch (op) {
    case OP_SEND: return "send to";
    case OP_RECV: return "receive from";
    case OP_ALLREDUCE: return "allreduce";
    case OP_ALLGATHER: return "allgather";
    case OP_BCAST: return "broadcast";
  }
  return "?";
}

/* ---- a group's collectives over world point-to-point ------------------------- */

/* The group's root (member 0) gathers, then sends the result to every
 * member: the sum is taken in member order on one rank, so every member
 * gets the same bits. First version: the root moves (n-1) x bytes each way
 * (a ring is the way to scale it). Scheduler thread. */
static sg_status scratch(sg__xfer_sched *x, size_t bytes, void **out) {
  if (bytes > x->scratch_bytes) {
    void *p = sg__realloc(x->scratch, bytes);
    if (p == NULL)
      return sg__error(SG_ERR_NO_MEMORY, "%s allreduce: no memory for %zu bytes", x->what, bytes);
    x->scratch = p;
    x->scratch_bytes = bytes;
  }
  *out = x->scratch;
  return SG_OK;
}

static sg_status to_all(sg_comm *c, const sg__xfer_sched *x, void *buf, size_t bytes) {
  for (int r = 1; r < x->n_members; r++)
    SG_CHECK(sg__comm_p2p_all(c, true, x->members[r], GROUP_TAG, buf, bytes));
  return SG_OK;
}

static sg_status group_allreduce(sg_comm *c, sg__xfer_sched *x, void *buf, size_t count, sg_dtype dtype,
                                 sg_reduce_op op) {
  size_t es = sg__comm_dtype_size(dtype), bytes = count * es;
  if (es == 0)
    return sg__error(SG_ERR_INVALID_ARG, "%s allreduce: unsupported dtype %d", x->what, (int)dtype);
  if (x->me != 0) {
    SG_CHECK(sg__comm_p2p_all(c, true, x->members[0], GROUP_TAG, buf, bytes));
    return sg__comm_p2p_all(c, false, x->members[0], GROUP_TAG, buf, bytes);
  }
  void *tmp = NULL;
  SG_CHECK(scratch(x, bytes, &tmp));
  for (int r = 1; r < x->n_members; r++) {
    SG_CHECK(sg__comm_p2p_all(c, false, x->members[r], GROUP_TAG, tmp, bytes));
    sg__reduce(buf, tmp, count, dtype, op);
  }
  sg__reduce_finish(buf, count, dtype, op, x->n_members);
  return to_all(c, x, buf, bytes);
}

static sg_status group_allgather(sg_comm *c, const sg__xfer_sched *x, const void *send, void *recv,
                                 size_t count, sg_dtype dtype) {
  size_t es = sg__comm_dtype_size(dtype), bytes = count * es;
  if (es == 0)
    return sg__error(SG_ERR_INVALID_ARG, "%s allgather: unsupported dtype %d", x->what, (int)dtype);
  size_t all = bytes * (size_t)x->n_members;
  if (x->me != 0) {
    SG_CHECK(sg__comm_p2p_all(c, true, x->members[0], GROUP_TAG, (void *)send, bytes));
    return sg__comm_p2p_all(c, false, x->members[0], GROUP_TAG, recv, all);
  }
  memmove(recv, send, bytes);
  for (int r = 1; r < x->n_members; r++)
    SG_CHECK(sg__comm_p2p_all(c, false, x->members[r], GROUP_TAG, (char *)recv + (size_t)r * bytes, bytes));
  return to_all(c, x, recv, all);
}

static sg_status group_bcast(sg_comm *c, const sg__xfer_sched *x, void *buf, size_t bytes) {
  if (x->me != 0) return sg__comm_p2p_all(c, false, x->members[0], GROUP_TAG, buf, bytes);
  return to_all(c, x, buf, bytes);
}

/* ---- jobs ------------------------------------------------------------------------- */

/* The scheduler's ring is read under mu (trace.c), so it is written under mu. */
static void record(sg_dist *d, const xfer_call *k, int64_t t0) {
  int mode = k->x->mode;
  int peer = k->op == OP_SEND || k->op == OP_RECV ? k->peer : -1;
  pthread_mutex_lock(&d->mu);
  sg__dist_event e = {t0 - d->origin_ns,
                      sg__now_ns() - d->origin_ns,
                      sg__dist_xfer_id((int)k->op, mode, peer),
                      (uint32_t)d->step,
                      (uint8_t)SG__EV_XFER,
                      1,
                      {0}};
  sg__dist_ring_put(&d->sched_ring, &e);
  pthread_mutex_unlock(&d->mu);
}

static sg_status run_call(sg_comm *c, xfer_call *k) {
  sg__xfer_sched *x = k->x;
  bool group = x->members != NULL;
  if ((k->op == OP_SEND || k->op == OP_RECV) && group) {
    if (k->peer < 0 || k->peer >= x->n_members || k->peer == x->me)
      return sg__error(SG_ERR_INVALID_ARG, "%s transfer: peer %d is not another member of %d", x->what,
                       k->peer, x->n_members);
    k->peer = x->members[k->peer];
  }
  switch (k->op) {
    case OP_SEND: return sg__comm_p2p_all(c, true, k->peer, k->tag, (void *)k->src, k->bytes);
    case OP_RECV: return sg__comm_p2p_all(c, false, k->peer, k->tag, k->dst, k->bytes);
    case OP_ALLREDUCE:
      return group ? group_allreduce(c, x, k->dst, k->count, k->dtype, k->red)
                   : sg_comm_allreduce(c, k->dst, k->dst, k->count, k->dtype, k->red);
    case OP_ALLGATHER:
      return group ? group_allgather(c, x, k->src, k->dst, k->count, k->dtype)
                   : sg_comm_allgather(c, k->src, k->dst, k->count, k->dtype);
    case OP_BCAST:
      if (group) return group_bcast(c, x, k->dst, k->bytes);
      return sg__error(SG_ERR_INVALID_ARG, "%s broadcast: only within a group", x->what);
  }
  return sg__error(SG_ERR_INTERNAL, "%s: unknown transfer %d", x->what, (int)k->op);
}

static sg_status call_job(sg_dist *d, void *arg) {
  xfer_call *k = arg;
  /* A failure found earlier (by the idle poll, or another call) is the cause. */
  if (__atomic_load_n(&d->failed_flag, __ATOMIC_ACQUIRE)) return sg__dist_failure(d);
  sg_comm *c = d->comm; /* the world: read on the thread that owns it */
  int64_t t0 = sg__now_ns();
  int peer = k->peer; /* as the caller named it (a member index in a group) */
  sg_status st = run_call(c, k);
  k->peer = peer;
  if (d->tracing) record(d, k, t0);
  if (st == SG_OK || st == SG_ERR_INVALID_ARG) return st;
  /* The job cannot go on: make it sticky (the compute thread and every
   * later call see it) and abort, so nothing waits for this rank. */
  uint64_t step;
  pthread_mutex_lock(&d->mu);
  step = d->step;
  pthread_mutex_unlock(&d->mu);
  char who[48] = "";
  if (k->op == OP_SEND || k->op == OP_RECV)
    snprintf(who, sizeof who, " rank %d", k->x->members ? k->x->members[k->peer] : k->peer);
  sg__dist_fail(d, SG_ERR_COMM, "rank %d, step %llu: %s %s%s failed: %s", d->rank, (unsigned long long)step,
                k->x->what, op_name(k->op), who, sg_last_error());
  return sg__dist_failure(d);
}

static sg_status run(sg__xfer_sched *x, xfer_call *k) {
  k->x = x;
  return sg__dist_run_job(x->d, call_job, k);
}

static sg_status sched_send(void *ctx, int peer, uint32_t tag, const void *buf, size_t bytes) {
  xfer_call k = {.op = OP_SEND, .peer = peer, .tag = tag, .src = buf, .bytes = bytes};
  return run(ctx, &k);
}

static sg_status sched_recv(void *ctx, int peer, uint32_t tag, void *buf, size_t bytes) {
  xfer_call k = {.op = OP_RECV, .peer = peer, .tag = tag, .dst = buf, .bytes = bytes};
  return run(ctx, &k);
}

static sg_status sched_allreduce(void *ctx, void *buf, size_t count, sg_dtype dtype, sg_reduce_op op) {
  xfer_call k = {.op = OP_ALLREDUCE, .dst = buf, .count = count, .dtype = dtype, .red = op};
  return run(ctx, &k);
}

static sg_status sched_allgather(void *ctx, const void *send, void *recv, size_t count, sg_dtype dtype) {
  xfer_call k = {.op = OP_ALLGATHER, .src = send, .dst = recv, .count = count, .dtype = dtype};
  return run(ctx, &k);
}

static int mode_of(const char *what) {
  if (strcmp(what, "tensor") == 0) return 1;
  if (strcmp(what, "checkpoint") == 0) return 4;
  if (strcmp(what, "replica") == 0) return 3;
  return strcmp(what, "loss") == 0 ? 2 : 0;
}

void sg__xfer_sched_init(sg__xfer_sched *ctx, sg_dist *d, const int *members, int n_members, int me,
                         const char *what, sg__xfer *out) {
  *ctx = (sg__xfer_sched){d, what, mode_of(what), members, n_members, me, NULL, 0};
  int rank = members ? me : d->rank, size = members ? n_members : d->size;
  *out = (sg__xfer){ctx, rank, size, sched_send, sched_recv, sched_allreduce, sched_allgather};
}

void sg__xfer_sched_free(sg__xfer_sched *ctx) {
  sg__free(ctx->scratch);
  ctx->scratch = NULL;
  ctx->scratch_bytes = 0;
}

sg_status sg__xfer_sched_bcast(sg__xfer_sched *ctx, void *buf, size_t bytes) {
  xfer_call k = {.op = OP_BCAST, .dst = buf, .bytes = bytes};
  return run(ctx, &k);
}

sg_status sg__dist_world_allreduce(sg_dist *d, void *buf, size_t count, sg_dtype dtype, sg_reduce_op op) {
  sg__xfer_sched x;
  sg__xfer unused;
  sg__xfer_sched_init(&x, d, NULL, 0, 0, "loss", &unused);
  xfer_call k = {.op = OP_ALLREDUCE, .dst = buf, .count = count, .dtype = dtype, .red = op};
  return run(&x, &k);
}
