/* Running one pipeline stage (pp.h): the 1F1B program of pp_sched.c over a
 * session of the stage's training graph.
 *
 * One session per stage keeps one set of activation buffers, so a stage
 * that must send micro-batch f's output now and run its backward later
 * recomputes: FORWARD runs the schedule up to the last op producing a
 * boundary output, BACKWARD runs forward and backward again up to the first
 * update once the gradient arrived (the last stage, which needs no early
 * output, runs only the latter). Received activations of in-flight
 * micro-batches (at most K-k on stage k) wait in preallocated message slots.
 * Gradients are summed over the micro-batches in our own buffers and copied
 * back, scaled by 1/M, into the gradient slots before the update ops run,
 * once per step; with replicas of the pipeline, averaged over the stage's
 * copies first (one allreduce of a flat buffer).
 *
 * Batch norm and dropout: each micro-batch's passes run with its own
 * dropout stream, and a recomputation with frozen running statistics
 * (run), so masks and statistics are those of one pass per micro-batch.
 *
 * First version: the sends and receives block the thread that calls
 * sg__pp_step (DESIGN.md gives communication to the scheduler thread; it
 * takes them over when pipelines join sg_dist). After create, a step
 * allocates nothing. */
#include <math.h>
#include <string.h>
#include <time.h>

#include "comm/wire.h"
#include "graph/graph.h"
#include "parallel/pp.h"
#include "runtime/hooks.h"

static size_t msg_bytes(const sg__tensor *x) { return sg__wire_header_size((unsigned)x->ndim) + x->nbytes; }

/* Direction, step, boundary index and micro-batch in 31 bits: bit 30 marks
 * the pipeline's messages; the step (mod 256) keeps a late message of one
 * step from matching a receive of the next. */
static uint32_t tag_of(const sg__pp_runner *r, int backward, int j, int m) {
  return (1u << 30) | ((uint32_t)backward << 29) | ((uint32_t)(r->step & 0xff) << 21) | ((uint32_t)j << 12) |
         (uint32_t)m;
}

static sg__wire_header header_of(const sg__pp_runner *r, const sg__tensor *x, int sender, int backward,
                                 int m) {
  sg__wire_header h = {0};
  h.count = (uint64_t)(x->nbytes / sg_dtype_size(x->dtype));
  h.dtype = (uint8_t)x->dtype;
  h.ndims = (uint8_t)x->ndim;
  /* The slice's start in the whole batch's tensor: micro-batch m's rows. */
  if (x->ndim >= 1 && x->dims[0] == r->st->micro_batch) h.offsets[0] = (uint32_t)(m * r->st->micro_batch);
  h.partition = (uint32_t)sender;
  /* A gradient's place in the whole batch's flat gradient of the tensor. */
  h.grad_offset = backward ? (uint64_t)m * h.count : 0;
  return h;
}

static sg_status send_framed(sg__pp_runner *r, int peer, uint32_t tag, const sg__wire_header *h,
                             const void *addr) {
  size_t n;
  SG_CHECK(sg__wire_encode(h, addr, r->buf, r->buf_bytes, &n));
  int64_t t0 = sg__now_ns();
  sg_status st = r->x.send(r->x.ctx, peer, tag, r->buf, n);
  r->stats.idle_ms += (double)(sg__now_ns() - t0) * 1e-6;
  r->stats.messages++;
  r->stats.bytes += (int64_t)n;
  return st;
}

static sg_status send_tensor(sg__pp_runner *r, int peer, int backward, int j, int m, int32_t t,
                             const void *addr) {
  sg__wire_header h = header_of(r, &r->g->tensors[t], r->st->stage, backward, m);
  return send_framed(r, peer, tag_of(r, backward, j, m), &h, addr);
}

/* Receives x's message (tag) from peer into msg and validates every header field against `want`. */
static sg_status recv_framed(sg__pp_runner *r, int peer, uint32_t tag, const sg__tensor *x,
                             const sg__wire_header *want, uint8_t *msg, const void **payload) {
  size_t n = msg_bytes(x);
  int64_t t0 = sg__now_ns();
  sg_status st = r->x.recv(r->x.ctx, peer, tag, msg, n);
  r->stats.idle_ms += (double)(sg__now_ns() - t0) * 1e-6;
  if (st != SG_OK) return st;
  r->stats.messages++;
  r->stats.bytes += (int64_t)n;
  sg__wire_header got;
  return sg__wire_decode(msg, n, want, peer, &got, payload);
}

/* Receives boundary tensor t (of g) for micro-batch m into msg, sent by the neighbouring stage. */
static sg_status recv_tensor(sg__pp_runner *r, int peer, int backward, int j, int m, int32_t t, uint8_t *msg,
                             const void **payload) {
  const sg__tensor *x = &r->g->tensors[t];
  sg__wire_header want = header_of(r, x, backward ? r->st->stage + 1 : r->st->stage - 1, backward, m);
  return recv_framed(r, peer, tag_of(r, backward, j, m), x, &want, msg, payload);
}

/* A tied weight's gradient (x, of g) from the holder `stage` at comm rank `peer` into r->buf; its header
 * is validated as a boundary gradient's (the weight's key in the micro-batch's place, offset 0). */
static sg_status recv_grad(sg__pp_runner *r, int peer, int stage, int key, const sg__tensor *x,
                           const void **payload) {
  sg__wire_header want = header_of(r, x, stage, 1, 0);
  return recv_framed(r, peer, tag_of(r, 1, SG__PP_MAX_BOUNDARY, key), x, &want, r->buf, payload);
}

/* Micro-batch m's inputs and received activations into the session. */
static sg_status feed(sg__pp_runner *r, int m) {
  const sg__pp_stage *st = r->st;
  for (int i = 0; i < st->n_inputs; i++) {
    if (!st->batched[i]) continue;
    const sg__tensor *x = &r->g->tensors[st->inputs[i]];
    if (r->in_data[i] == NULL)
      return sg__error(SG_ERR_STATE, "sg__pp_step: input '%s' was not set (sg__pp_set_input)", x->name);
    const char *rows = (const char *)r->in_data[i] + (size_t)m * x->nbytes;
    SG_CHECK(sg_session_set_input(r->s, x->name, x->dtype, x->ndim, x->dims, rows));
  }
  for (int j = 0; j < st->n_recv; j++) {
    const sg__tensor *x = &r->g->tensors[st->recv[j]];
    SG_CHECK(sg_session_write(r->s, x->name, r->fwd_data[(m % r->depth) * st->n_recv + j], x->nbytes));
  }
  return SG_OK;
}

void sg__pp_runner_set_hooks(sg__pp_runner *r, const sg__step_hooks *hooks) {
  if (r != NULL) r->hooks = hooks;
}

void sg__pp_runner_set_slow(sg__pp_runner *r, double factor) {
  if (r != NULL) r->slow = factor > 1 ? factor : 0;
}

/* Micro-batch m's pass over schedule positions [0, end). Micro-batch m of
 * this replica is micro-batch g = replica*M + m of the global step; its
 * passes draw dropout stream g+1 (0 is a plain step), the same for its
 * FORWARD and its recomputation, so both see one mask, and the mask a single
 * process accumulating the same micro-batches with those streams draws.
 * `recompute` freezes the batch-norm running statistics: they move once per
 * micro-batch, in micro-batch order (FORWARDs, and the last stage's single
 * passes, run in that order). */
static sg_status run(sg__pp_runner *r, int m, uint32_t end, bool recompute) {
  uint64_t g = (uint64_t)r->replica * (uint64_t)r->st->micro_batches + (uint64_t)m;
  sg__session_pass pass = {
      .begin = 0, .end = end, .stream = g + 1, .freeze_stats = recompute, .hooks = r->hooks};
  int64_t t0 = sg__now_ns();
  sg_status st = sg__session_run_pass(r->s, &pass);
  /* An injected slow fault: the pass's excess time, slept (bounded: a stall, never a hang). */
  if (r->slow > 1) sg__sleep_ms(fmin((double)(sg__now_ns() - t0) * 1e-6 * (r->slow - 1), 60000));
  r->stats.busy_ms += (double)(sg__now_ns() - t0) * 1e-6;
  r->stats.forwards++;
  return st;
}

static void accumulate(sg__pp_runner *r, bool first) {
  for (int i = 0; i < r->n_grads; i++) {
    sg__pp_grad *g = &r->grads[i];
    if (first) memcpy(g->acc, g->slot, g->n * sizeof(float));
    else
      for (size_t k = 0; k < g->n; k++) g->acc[k] += g->slot[k];
  }
  if (r->loss_addr) r->loss_sum = (first ? 0 : r->loss_sum) + (double)*r->loss_addr;
}

static sg_status act(sg__pp_runner *r, sg__pp_slot a, int *backwards_done) {
  const sg__pp_stage *st = r->st;
  int m = a.micro;
  switch (a.action) {
    case SG__PP_RECV_FWD:
      for (int j = 0; j < st->n_recv; j++) {
        int k = (m % r->depth) * st->n_recv + j;
        SG_CHECK(recv_tensor(r, r->prev, 0, j, m, st->recv[j], r->fwd_msg[k], &r->fwd_data[k]));
      }
      return SG_OK;
    case SG__PP_FORWARD: SG_CHECK(feed(r, m)); return run(r, m, r->fwd_end, false);
    case SG__PP_SEND_FWD:
      for (int j = 0; j < st->n_send; j++)
        SG_CHECK(send_tensor(r, r->next, 0, j, m, st->send[j], r->send_addr[j]));
      return SG_OK;
    case SG__PP_RECV_BWD:
      for (int j = 0; j < st->n_send; j++) {
        const sg__tensor *x = &r->g->tensors[st->send_grad[j]];
        const void *payload;
        SG_CHECK(recv_tensor(r, r->next, 1, j, m, st->send[j], r->buf, &payload));
        SG_CHECK(sg_session_set_input(r->s, x->name, x->dtype, x->ndim, x->dims, payload));
      }
      return SG_OK;
    case SG__PP_BACKWARD:
      SG_CHECK(feed(r, m));
      /* Stages before the last ran this micro-batch's FORWARD already: this
       * pass recomputes it, so it must not move the running statistics. */
      SG_CHECK(run(r, m, r->bwd_end, st->stage + 1 < st->stages));
      accumulate(r, (*backwards_done)++ == 0);
      return SG_OK;
    case SG__PP_SEND_BWD:
      for (int j = 0; j < st->n_recv; j++)
        SG_CHECK(send_tensor(r, r->prev, 1, j, m, st->recv_grad[j], r->rgrad_addr[j]));
      return SG_OK;
  }
  return sg__error(SG_ERR_INTERNAL, "sg__pp_step: unknown action %d", (int)a.action);
}

/* The step's gradient, the mean over the micro-batches (and the replicas),
 * into the gradient slots. With replicas, every stage's copies add their
 * means in one allreduce of a flat buffer and divide by the count, so every
 * copy holds the same bits and takes the same update. */
static sg_status average(sg__pp_runner *r) {
  /* Each micro-batch loss is a mean over its samples: the whole batch's
   * gradient is the mean of the micro-batch gradients. */
  float scale = 1.0f / (float)r->st->micro_batches;
  if (r->replicas == 1) {
    for (int i = 0; i < r->n_grads; i++)
      for (size_t k = 0; k < r->grads[i].n; k++) r->grads[i].slot[k] = r->grads[i].acc[k] * scale;
    return SG_OK;
  }
  if (r->n_flat == 0) return SG_OK; /* a relay stage: no weights on any copy */
  size_t off = 0;
  for (int i = 0; i < r->n_grads; i++)
    for (size_t k = 0; k < r->grads[i].n; k++) r->flat[off++] = r->grads[i].acc[k] * scale;
  int64_t t0 = sg__now_ns();
  sg_status st = r->dp_x.allreduce(r->dp_x.ctx, r->flat, r->n_flat, SG_F32, SG_REDUCE_SUM);
  r->stats.idle_ms += (double)(sg__now_ns() - t0) * 1e-6;
  if (st != SG_OK) return st;
  float d = (float)r->replicas;
  off = 0;
  for (int i = 0; i < r->n_grads; i++)
    for (size_t k = 0; k < r->grads[i].n; k++) r->grads[i].slot[k] = r->flat[off++] / d;
  return SG_OK;
}

/* Weights tied across stages: each holder's slot has its own uses' part of the step's gradient (already
 * averaged over the replicas: every copy of the pipeline sums the same parts). The lowest holder receives
 * the others' parts in stage order, adds them to its own and sends the sum back; every holder then has
 * the same bits and runs the same update, so the copies stay equal. The messages of all tied weights go
 * in one order (their keys ascending, then the holders') on every rank, so blocking sends cannot deadlock;
 * their tag is the boundary index SG__PP_MAX_BOUNDARY, which no boundary tensor uses, with the weight's
 * key as the micro-batch. */
static sg_status tied_sum(sg__pp_runner *r) {
  const sg__pp_stage *st = r->st;
  int me = st->stage;
  for (int i = 0; i < st->n_tied; i++) {
    const sg__pp_tied *t = &r->tied[i];
    const sg__tensor *x = &r->g->tensors[t->grad];
    const int32_t *holders = st->tied_holders + st->tied_off[i];
    const int n = st->tied_off[i + 1] - st->tied_off[i];
    int owner = holders[0], key = st->tied_key[i];
    int owner_rank = r->x.rank + (owner - me) * r->stride;
    uint32_t tag = tag_of(r, 1, SG__PP_MAX_BOUNDARY, key);
    sg__wire_header hd = header_of(r, x, me, 1, 0); /* as a gradient of micro-batch 0: offsets 0 */
    const void *payload;
    if (me != owner) {
      SG_CHECK(send_framed(r, owner_rank, tag, &hd, t->slot));
      SG_CHECK(recv_grad(r, owner_rank, owner, key, x, &payload));
      memcpy(t->slot, payload, t->n * sizeof(float));
      continue;
    }
    for (int h = 1; h < n; h++) {
      SG_CHECK(recv_grad(r, r->x.rank + (holders[h] - me) * r->stride, holders[h], key, x, &payload));
      const unsigned char *part = payload; /* after the header: not necessarily float-aligned */
      for (size_t k = 0; k < t->n; k++) {
        float v;
        memcpy(&v, part + k * sizeof v, sizeof v);
        t->slot[k] += v;
      }
    }
    for (int h = 1; h < n; h++)
      SG_CHECK(send_framed(r, r->x.rank + (holders[h] - me) * r->stride, tag, &hd, t->slot));
  }
  return SG_OK;
}

static sg_status step(sg__pp_runner *r) {
  int done = 0;
  for (int i = 0; i < r->n_prog; i++) SG_CHECK(act(r, r->prog[i], &done));
  int64_t t1 = sg__now_ns();
  double idle = r->stats.idle_ms; /* the allreduce's wait is idle time */
  SG_CHECK(average(r));
  SG_CHECK(tied_sum(r));
  for (int i = 0; i < r->n_upd; i++) {
    sg__session_pass update = {.begin = r->upd[i], .end = r->upd[i] + 1};
    SG_CHECK(sg__session_run_pass(r->s, &update));
  }
  /* The step ran in parts: count it, as sg_session_step does (dropout masks
   * are drawn per (step, stream) and SGD's dampened first step reads the
   * count). An empty pass counts without running anything. */
  sg__session_pass count = {.count_step = true};
  SG_CHECK(sg__session_run_pass(r->s, &count));
  r->stats.busy_ms += (double)(sg__now_ns() - t1) * 1e-6 - (r->stats.idle_ms - idle);
  return SG_OK;
}

sg_status sg__pp_step(sg__pp_runner *r, float *loss) {
  if (loss) *loss = NAN;
  if (r == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg__pp_step: runner is NULL");
  int64_t t0 = sg__now_ns();
  r->stats = (sg__pp_stats){0};
  SG_CHECK(step(r));
  r->stats.step_ms = (double)(sg__now_ns() - t0) * 1e-6;
  r->step++;
  if (loss && r->loss_addr) *loss = (float)(r->loss_sum / r->st->micro_batches);
  return SG_OK;
}

void sg__pp_runner_stats(const sg__pp_runner *r, sg__pp_stats *out) {
  if (out) *out = r ? r->stats : (sg__pp_stats){0};
}
