/* sg_dist_save_checkpoint (include/sgrt/dist.h): one checkpoint of the whole
 * model, written by rank 0 in the format of sg_session_save_checkpoint, from
 * whatever parts the ranks hold.
 *
 * Every rank packs what only it can give ("pieces": a tensor whole, or one
 * slice of a split one with the split's geometry) into one message; rank 0
 * receives the messages one rank after another, puts each tensor together in
 * a buffer of the one-process training graph, and writes that graph with the
 * values (sg__checkpoint_write, runtime/hooks.h). Who gives what:
 *   - data parallelism: rank 0 everything its session holds; with ZeRO-1
 *     each rank also the optimizer state of the parameters it owns (rank 0
 *     has no memory for the others');
 *   - pipeline and tensor modes: the ranks of copy 0 only (world ranks
 *     0..W-1, W the stages x shares); each stage's parameters and state, each
 *     with its optimizer state; a tensor that the plan of the share splits
 *     comes as one slice from every share, a whole one from share 0.
 * The geometry of a slice is the sender's: the axis and blocks that the
 * plan its share was cut by gives (sg_tp_plan_tensor_split), the ways and
 * the share, so rank 0 needs no plan of its own and follows a healed group's
 * layout (T' ways) as well.
 *
 * The ranks agree three times (each an allgather of every rank's verdict):
 * after packing, after rank 0 made room, and after the write; a failure
 * anywhere makes every rank return that failure, and no rank waits for a
 * message that will not come: rank 0 receives every announced message even
 * when one it already got was bad. Every transfer is a job of the
 * scheduler thread, which owns the communicator (xfer_sched.c). */
#include <stdio.h>
#include <string.h>

#include "graph/graph.h"
#include "parallel/model.h"
#include "runtime/hooks.h"
#include "sgrt/train.h"

/* The messages to rank 0: below the tensor group's healing (tp_heal.c, 0x3ffffb00). */
#define CKPT_TAG 0x3ffffa00u

static const char FN[] = "sg_dist_save_checkpoint";

/* One piece of a tensor in a message: [n][n pieces][their bytes, in order]. */
typedef struct piece {
  int64_t t;      /* data: a tensor of the training graph; model modes: a parameter or state of fwd */
  int32_t member; /* model modes: t (0) or its optimizer state (1..): sg__pp_state_group's order; data: 0 */
  int32_t axis;   /* -1: the whole tensor; else a slice along this axis */
  int32_t groups; /* ... which consists of `groups` equal blocks, each cut in `ways` slices */
  int32_t ways;
  int32_t slice; /* ... of which this is slice `slice` of every block, in block order */
  int32_t pad;
  uint64_t bytes;
} piece;

/* A message being packed: counted first (buf NULL), then filled. */
typedef struct pack {
  sg_dist *d;
  unsigned char *buf;
  uint64_t n;     /* pieces so far */
  size_t data;    /* bytes of tensor data so far */
  uint64_t total; /* pieces in all, once counted */
  size_t size;    /* the whole message, once counted */
} pack;

static size_t head_bytes(uint64_t n) { return sizeof n + (size_t)n * sizeof(piece); }

/* Adds tensor `name` of this rank's part as piece p (its bytes read from the session when filling). */
static sg_status add(pack *k, const char *name, piece p) {
  if (k->buf != NULL) {
    memcpy(k->buf + sizeof k->n + (size_t)k->n * sizeof p, &p, sizeof p);
    SG_CHECK(sg_session_read(k->d->s, name, k->buf + head_bytes(k->total) + k->data, p.bytes));
  }
  k->n++;
  k->data += p.bytes;
  return SG_OK;
}

/* ---- what each rank gives -------------------------------------------------------------------- */

/* Data parallelism: the rank that gives each optimizer state tensor (ZeRO-1: its parameter's owner), else
 * rank 0; per tensor of the training graph, into owner[] (n_tensors of room, zeroed). */
static void data_owners(const sg_dist *d, int *owner) {
  const sg_graph *g = d->g;
  const sg__par_data *P = DP(d);
  if (!P->zero.on) return;
  for (uint32_t i = 0; i < P->plan.n_grads; i++) owner[P->plan.grads[i].param] = P->zero.owner[i];
  /* The state an update reads goes with the parameter it updates (zero.c leaves the others' unbacked). */
  for (uint32_t o = 0; o < g->n_ops; o++) {
    const sg__op *op = &g->ops[o];
    if ((op->kind != SG_OP_SGD_UPDATE && op->kind != SG_OP_ADAMW_UPDATE) || op->n_inputs < 1 ||
        op->inputs[0] < 0)
      continue;
    for (int j = 1; j < op->n_inputs; j++)
      if (op->inputs[j] >= 0 && g->tensors[op->inputs[j]].role == SG_ROLE_OPTIMIZER_STATE)
        owner[op->inputs[j]] = owner[op->inputs[0]];
  }
  /* The parameters themselves are the same everywhere: rank 0's. */
  for (uint32_t i = 0; i < P->plan.n_grads; i++) owner[P->plan.grads[i].param] = 0;
}

static bool checkpointed(sg_role r) {
  return r == SG_ROLE_PARAMETER || r == SG_ROLE_STATE || r == SG_ROLE_OPTIMIZER_STATE;
}

static sg_status pack_data(pack *k, const int *owner) {
  const sg_graph *g = k->d->g;
  for (uint32_t t = 0; t < g->n_tensors; t++) {
    const sg__tensor *x = &g->tensors[t];
    if (!checkpointed(x->role) || owner[t] != k->d->rank ||
        sg__session_tensor_addr(k->d->s, (int32_t)t, NULL) == NULL)
      continue;
    SG_CHECK(add(k, x->name, (piece){.t = t, .axis = -1, .groups = 1, .ways = 1, .bytes = x->nbytes}));
  }
  return SG_OK;
}

/* Model modes: the graph the plan of this rank's share was made from and the plan (NULL: nothing split),
 * as the strategy made them: the forward graph (at the micro-batch shapes with micro-batches) for a tensor
 * group, the stage's forward graph for a stage that is one. */
typedef struct share_plan {
  sg__pp_stage *fst; /* the stage's forward graph, when that is what was planned */
  const sg_graph *src;
  sg_tp_plan *plan;
} share_plan;

static sg_status make_plan(sg_dist *d, share_plan *sp) {
  sg__par_model *m = MODEL(d);
  *sp = (share_plan){0};
  if (m->tensor == 1) return SG_OK;
  if (d->strategy == &sg__par_tensor_strategy) {
    sp->src = TENSOR(d)->micro_g != NULL ? TENSOR(d)->micro_g : m->fwd;
  } else {
    sg_tensor loss = {sg__tensor_lookup(m->fwd, m->loss_name)};
    SG_CHECK(sg__pp_split_forward(m->fwd, loss, PIPELINE(d)->stage_of_op, sg_graph_num_ops(m->fwd),
                                  m->pipeline, sg__pipeline_stage(m), m->micro, &sp->fst));
    sp->src = sp->fst->g;
  }
  sg_tp_params tpp = SG_TP_PARAMS_INIT;
  tpp.ways = m->tensor;
  return sg_tp_plan_create(sp->src, &tpp, &sp->plan);
}

static void free_plan(share_plan *sp) {
  sg_tp_plan_destroy(sp->plan);
  sg__pp_stage_destroy(sp->fst);
  *sp = (share_plan){0};
}

/* Whether source tensor t is on this rank's stage (every share of a tensor group holds every one). A weight
 * tied across stages is held by each stage that reads it, bitwise equal (pp_run.c sums its gradients): only
 * the stage sg__pp_tensor_stage names, its first reader's, gives it, so it is written once. */
static bool on_this_stage(const sg_dist *d, int32_t t) {
  if (d->strategy != &sg__par_pipeline_strategy) return true;
  const sg__par_pipeline *P = PIPELINE(d);
  return sg__pp_tensor_stage(P->m.fwd, P->stage_of_op, t) == sg__pipeline_stage(&P->m);
}

static sg_status pack_model(pack *k, const share_plan *sp) {
  sg_dist *d = k->d;
  const sg__par_model *m = MODEL(d);
  const sg_graph *fwd = m->fwd, *g = d->g;
  int T = m->tensor, share = m->index % T;
  for (uint32_t t = 0; t < fwd->n_tensors; t++) {
    if (!sg__model_heal_keeps(fwd, t) || !on_this_stage(d, (int32_t)t)) continue;
    const char *name = fwd->tensors[t].name;
    int32_t ids[5];
    int n = sg__pp_state_group(g, name, ids);
    if (n == 0) return sg__error(SG_ERR_INTERNAL, "%s: '%s' is not in rank %d's part", FN, name, d->rank);
    int axis = -1, groups = 1;
    sg_tensor pt;
    if (sp->plan != NULL && sg_graph_find_tensor(sp->src, name, &pt) == SG_OK)
      SG_CHECK(sg_tp_plan_tensor_split(sp->plan, pt, &axis, &groups));
    const sg__tensor *p = &g->tensors[ids[0]];
    for (int i = 0; i < n; i++) {
      const sg__tensor *y = &g->tensors[ids[i]];
      /* Optimizer state shaped as its parameter is cut with it; other state (AdamW's step) is whole. */
      bool cut = axis >= 0 && y->ndim == p->ndim;
      for (int a = 0; cut && a < p->ndim; a++) cut = y->dims[a] == p->dims[a];
      if (!cut && share != 0) continue; /* whole in every share: share 0's */
      piece pc = {.t = t,
                  .member = i,
                  .axis = cut ? axis : -1,
                  .groups = cut ? groups : 1,
                  .ways = cut ? T : 1,
                  .slice = cut ? share : 0,
                  .bytes = y->nbytes};
      SG_CHECK(add(k, y->name, pc));
    }
  }
  return SG_OK;
}

/* This rank's message into k (empty when it gives nothing). */
static sg_status pack_mine(pack *k) {
  sg_dist *d = k->d;
  bool data = d->strategy == &sg__par_data_strategy;
  int *owner = NULL;
  share_plan sp = {0};
  sg_status st = SG_OK;
  if (data) {
    if ((owner = sg__calloc(d->g->n_tensors + 1, sizeof *owner)) == NULL)
      return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", FN);
    data_owners(d, owner);
  } else if (d->rank >= d->size / MODEL(d)->data) {
    return SG_OK; /* a copy other than copy 0: its parameters are copy 0's */
  } else {
    st = make_plan(d, &sp);
  }
  /* Count, then fill. */
  for (int pass = 0; pass < 2 && st == SG_OK; pass++) {
    if (pass == 1) {
      k->total = k->n;
      k->size = head_bytes(k->n) + k->data;
      if (k->n == 0) break;
      if ((k->buf = sg__malloc(k->size)) == NULL) {
        st = sg__error(SG_ERR_NO_MEMORY, "%s: out of memory for %zu bytes of rank %d's part", FN, k->size,
                       d->rank);
        break;
      }
      memcpy(k->buf, &k->n, sizeof k->n);
      k->n = 0;
      k->data = 0;
    }
    st = data ? pack_data(k, owner) : pack_model(k, &sp);
  }
  sg__free(owner);
  free_plan(&sp);
  return st;
}

/* ---- rank 0: the whole model ------------------------------------------------------------------ */

typedef struct whole {
  sg_graph *own;          /* model modes: the one-process training graph (data: d->g) */
  const sg_graph *g;      /* the graph written */
  unsigned char **values; /* per tensor of g */
  size_t *filled;         /* bytes put there */
} whole;

/* What one process trains: the forward graph, backward from its loss, the job's optimizer (as
 * sg_dist_create_model builds it for pipeline = tensor = 1). */
static sg_status training_graph(const sg_dist *d, sg_graph **out) {
  const sg__par_model *m = MODEL(d);
  SG_CHECK(sg_graph_clone(m->fwd, out));
  sg_tensor loss;
  SG_CHECK(sg_graph_find_tensor(*out, m->loss_name, &loss));
  bool marked = false;
  for (int32_t i = 0; i < sg_graph_num_outputs(*out); i++) marked |= sg_graph_output(*out, i).id == loss.id;
  if (!marked) SG_CHECK(sg_graph_mark_output(*out, loss));
  SG_CHECK(sg_graph_backward(*out, loss));
  return sg__model_add_optimizer(*out, &m->opt);
}

static sg_status whole_init(sg_dist *d, whole *w) {
  if (d->strategy == &sg__par_data_strategy) w->g = d->g;
  else {
    SG_CHECK(training_graph(d, &w->own));
    w->g = w->own;
  }
  size_t n = w->g->n_tensors + 1;
  w->values = sg__calloc(n, sizeof *w->values);
  w->filled = sg__calloc(n, sizeof *w->filled);
  if (w->values == NULL || w->filled == NULL) return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", FN);
  for (uint32_t t = 0; t < w->g->n_tensors; t++) {
    const sg__tensor *x = &w->g->tensors[t];
    if (!checkpointed(x->role)) continue;
    if ((w->values[t] = sg__malloc(x->nbytes ? x->nbytes : 1)) == NULL)
      return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory for '%s' (%zu bytes)", FN, x->name, x->nbytes);
  }
  return SG_OK;
}

static void whole_free(whole *w) {
  for (uint32_t t = 0; w->values != NULL && t < w->g->n_tensors; t++) sg__free(w->values[t]);
  sg__free(w->values);
  sg__free(w->filled);
  sg_graph_destroy(w->own);
  *w = (whole){0};
}

/* The tensor of w->g that piece p is a part of, -1 when none. */
static int32_t target(const sg_dist *d, const whole *w, const piece *p) {
  if (d->strategy == &sg__par_data_strategy)
    return p->t >= 0 && p->t < (int64_t)w->g->n_tensors && p->member == 0 ? (int32_t)p->t : -1;
  const sg_graph *fwd = MODEL(d)->fwd;
  if (p->t < 0 || p->t >= (int64_t)fwd->n_tensors) return -1;
  int32_t ids[5];
  int n = sg__pp_state_group(w->g, fwd->tensors[p->t].name, ids);
  return p->member >= 0 && p->member < n ? ids[p->member] : -1;
}

/* Slice p->slice of every block along p->axis of the whole tensor x, from `part`. */
static sg_status place(whole *w, int32_t t, const piece *p, const unsigned char *part, int from) {
  const sg__tensor *x = &w->g->tensors[t];
  if (p->axis < 0) {
    if (p->bytes != x->nbytes) goto bad;
    memcpy(w->values[t], part, x->nbytes);
  } else {
    if (p->axis >= x->ndim || p->groups < 1 || p->ways < 1 || p->slice < 0 || p->slice >= p->ways) goto bad;
    int64_t len = x->dims[p->axis], cuts = (int64_t)p->groups * p->ways;
    if (len % cuts != 0 || p->bytes != x->nbytes / (uint64_t)p->ways) goto bad;
    sg__tp_slice_copy(w->values[t], (unsigned char *)part, x->ndim, x->dims, sg_dtype_size(x->dtype), p->axis,
                      p->groups, p->ways, p->slice, true); /* part is only read */
  }
  w->filled[t] += p->bytes;
  if (w->filled[t] <= x->nbytes) return SG_OK;
bad:
  return sg__error(
      SG_ERR_FORMAT,
      "%s: rank %d sent a piece of '%s' that does not fit it (%llu bytes, axis %d, %d blocks, slice "
      "%d of %d; the tensor has %zu bytes, %zu already put together)",
      FN, from, x->name, (unsigned long long)p->bytes, p->axis, p->groups, p->slice, p->ways, x->nbytes,
      w->filled[t]);
}

/* One rank's message, checked before it is used (SPEC S1). */
static sg_status take(sg_dist *d, whole *w, const unsigned char *msg, size_t bytes, int from) {
  uint64_t n;
  if (bytes < sizeof n) goto bad;
  memcpy(&n, msg, sizeof n);
  if (n > (bytes - sizeof n) / sizeof(piece)) goto bad;
  size_t off = head_bytes(n);
  for (uint64_t i = 0; i < n; i++) {
    piece p;
    memcpy(&p, msg + sizeof n + (size_t)i * sizeof p, sizeof p);
    if (p.bytes > bytes - off) goto bad;
    int32_t t = target(d, w, &p);
    if (t < 0 || w->values[t] == NULL)
      return sg__error(SG_ERR_FORMAT,
                       "%s: rank %d sent a piece of tensor %lld (member %d), which is not state "
                       "of the model",
                       FN, from, (long long)p.t, p.member);
    SG_CHECK(place(w, t, &p, msg + off, from));
    off += p.bytes;
  }
  if (off == bytes) return SG_OK;
bad:
  return sg__error(SG_ERR_FORMAT, "%s: rank %d's part (%zu bytes) is malformed", FN, from, bytes);
}

/* Whether no op of g reads tensor t. */
static bool unread(const sg_graph *g, int32_t t) {
  for (uint32_t o = 0; o < g->n_ops; o++)
    for (int i = 0; i < g->ops[o].n_inputs; i++)
      if (g->ops[o].inputs[i] == t) return false;
  return true;
}

/* Every tensor complete. A parameter no op reads is in no part (no stage holds it, nothing updates it):
 * it keeps the graph's initializer, if any. */
static sg_status complete(whole *w) {
  for (uint32_t t = 0; t < w->g->n_tensors; t++) {
    const sg__tensor *x = &w->g->tensors[t];
    if (w->values[t] == NULL || w->filled[t] == x->nbytes) continue;
    if (w->filled[t] == 0 && unread(w->g, (int32_t)t)) {
      sg__free(w->values[t]);
      w->values[t] = NULL;
      continue;
    }
    return sg__error(SG_ERR_INTERNAL, "%s: %zu of the %zu bytes of %s '%s' were sent to rank 0", FN,
                     w->filled[t], x->nbytes, sg_role_name(x->role), x->name);
  }
  return SG_OK;
}

/* ---- agreeing -------------------------------------------------------------------------------- */

/* What each rank tells the others: its status, how many bytes it sends to rank 0, and why it failed. */
typedef struct verdict {
  int64_t status;
  int64_t bytes;
  char why[496];
} verdict;

/* Every rank's verdict; the first failure becomes every rank's error. sent: each rank's bytes (or NULL). */
static sg_status agree(sg_dist *d, sg__xfer *world, sg_status mine, int64_t bytes, int64_t *sent) {
  verdict v = {.status = mine, .bytes = bytes};
  char own[1024] = "";
  if (mine != SG_OK) {
    snprintf(own, sizeof own, "%s", sg_last_error());
    snprintf(v.why, sizeof v.why, "%s", own);
  }
  verdict *all = sg__calloc((size_t)d->size, sizeof *all);
  if (all == NULL) return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", FN);
  sg_status st = world->allgather(world->ctx, &v, all, sizeof v / sizeof(int64_t), SG_I64);
  for (int r = 0; r < d->size && st == SG_OK; r++) {
    if (all[r].status != SG_OK) {
      all[r].why[sizeof all[r].why - 1] = '\0';
      if (r == d->rank) st = sg__error(mine, "%s", own);
      else st = sg__error((sg_status)all[r].status, "%s: rank %d failed: %s", FN, r, all[r].why);
    } else if (sent != NULL) {
      sent[r] = all[r].bytes;
    }
  }
  sg__free(all);
  return st;
}

/* ---- the call -------------------------------------------------------------------------------- */

/* Rank 0: every other rank's message, in rank order, each put into w. A bad one is the result, but the
 * rest are still received: their senders wait in the transfer until it is. */
static sg_status gather(sg_dist *d, sg__xfer *world, whole *w, const int64_t *sent, unsigned char *buf) {
  sg_status bad = SG_OK;
  char why[1024] = "";
  for (int r = 1; r < d->size; r++) {
    if (sent[r] <= 0) continue;
    SG_CHECK(world->recv(world->ctx, r, CKPT_TAG, buf, (size_t)sent[r]));
    if (bad != SG_OK) continue;
    if ((bad = take(d, w, buf, (size_t)sent[r], r)) != SG_OK)
      snprintf(why, sizeof why, "%s", sg_last_error());
  }
  return bad == SG_OK ? SG_OK : sg__error(bad, "%s", why);
}

sg_status sg_dist_save_checkpoint(sg_dist *d, const char *path) {
  if (d == NULL) return sg__error(SG_ERR_INVALID_ARG, "%s: d is NULL", FN);
  sg__xfer_sched ctx;
  sg__xfer world;
  sg__xfer_sched_init(&ctx, d, NULL, 0, 0, "checkpoint", &world);
  pack k = {.d = d};
  whole w = {0};
  int64_t *sent = sg__calloc((size_t)d->size, sizeof *sent);
  unsigned char *buf = NULL;
  /* 1. This rank's part (rank 0: also room for the whole model). */
  sg_status st = sent == NULL ? sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", FN) : SG_OK;
  if (st == SG_OK && path == NULL)
    st = sg__error(SG_ERR_INVALID_ARG, "%s: path is NULL on rank %d", FN, d->rank);
  if (st == SG_OK) st = pack_mine(&k);
  if (st == SG_OK && d->rank == 0) st = whole_init(d, &w);
  sg_status agreed = agree(d, &world, st, d->rank == 0 ? 0 : (int64_t)(k.n ? k.size : 0), sent);
  /* 2. Rank 0: its own part, and room for the largest message. */
  if (agreed == SG_OK) {
    st = SG_OK;
    if (d->rank == 0) {
      int64_t most = 0;
      for (int r = 1; r < d->size; r++) most = sent[r] > most ? sent[r] : most;
      if (k.n > 0) st = take(d, &w, k.buf, k.size, 0);
      if (st == SG_OK && most > 0 && (buf = sg__malloc((size_t)most)) == NULL)
        st =
            sg__error(SG_ERR_NO_MEMORY, "%s: out of memory for a message of %lld bytes", FN, (long long)most);
    }
    agreed = agree(d, &world, st, 0, NULL);
  }
  /* 3. The messages to rank 0, which puts the model together and writes it. */
  if (agreed == SG_OK) {
    if (d->rank == 0) {
      st = gather(d, &world, &w, sent, buf);
      if (st == SG_OK) st = complete(&w);
      if (st == SG_OK)
        st = sg__checkpoint_write(w.g, (const void *const *)w.values, d->stats.steps, FN, path);
    } else {
      st = k.n > 0 ? world.send(world.ctx, 0, CKPT_TAG, k.buf, k.size) : SG_OK;
    }
    /* A transfer that failed failed the job: nobody is left to agree with. */
    agreed = __atomic_load_n(&d->failed_flag, __ATOMIC_ACQUIRE) ? st : agree(d, &world, st, 0, NULL);
  }
  sg__free(buf);
  sg__free(k.buf);
  sg__free(sent);
  whole_free(&w);
  sg__xfer_sched_free(&ctx);
  return agreed;
}
