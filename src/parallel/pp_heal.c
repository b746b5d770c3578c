/* Healing a pipeline (sg_dist_params.heal, model.h, docs/resilience.md
 * "Healing a pipeline").
 *
 * Copies: after every step (and before the first) each stage packs its
 * parameters, state (batch-norm statistics) and optimizer state and sends
 * them to the next stage's rank (a ring), which keeps them; then an
 * allreduce. A rank that left that allreduce knows every rank holds the
 * generation; a failure before it can leave some ranks one generation
 * behind, so two are kept. A generation records the layout it was taken in
 * (the cut, the stages' original ranks) and the step.
 *
 * Recovery: the survivors agree on the membership through the store
 * (membership.c, as data parallelism does) and on the generation to restore:
 * the latest that all of them hold (the agreement's rollback is the least
 * generation number registered). Each lost stage is merged into its next
 * surviving neighbour (the previous one for the last stage): only its ops
 * move. The new stages are built, and every parameter with its optimizer
 * state goes from the generation's copy (its old stage's own copy, or, for
 * a lost stage, the copy its successor kept) to its new stage, in the source
 * graph's tensor order so that the blocking transfers cannot deadlock.
 * Nothing is taken from the sessions, which a failed step may have updated
 * halfway. Then a generation of the new layout, and the steps after the
 * restored one are redone with the inputs every rank kept: under strict QoS
 * no step is lost, and the result is a failure-free run's to rounding.
 * A rank that dies during all this sends the others back to the agreement,
 * from the same generation; two adjacent stages lost together leave one
 * stage without a copy, which stops the job with an error naming both. */
#include <stdio.h>
#include <string.h>

#include "graph/graph.h"
#include "parallel/model.h"
#include "runtime/hooks.h"

/* The copies' messages: a size, then the bytes; the recovery's moves. Below the runner's tags (bit 30
 * set), the groups' (0x7fffff00) and the re-cut's (0x3ffffe00). */
#define COPY_TAG 0x3ffffd00u
#define HEAL_TAG 0x3ffffc00u

/* ---- the packed format: [n][n x (tensor of fwd, bytes)][the bytes] (native byte order: one host's ranks
 * or hosts of one kind, as the communicator's other messages) ------------------------------------------- */

typedef struct entry {
  int64_t t;
  uint64_t bytes;
} entry;

static bool keeps(const sg_graph *fwd, uint32_t t) {
  sg_role r = fwd->tensors[t].role;
  return r == SG_ROLE_PARAMETER || r == SG_ROLE_STATE;
}

static sg_status reserve(unsigned char **buf, size_t *cap, size_t bytes) {
  if (bytes <= *cap) return SG_OK;
  unsigned char *b = sg__realloc(*buf, bytes);
  if (b == NULL)
    return sg__error(SG_ERR_NO_MEMORY, "pipeline healing: out of memory for a copy of %zu bytes", bytes);
  *buf = b;
  *cap = bytes;
  return SG_OK;
}

/* This rank's stage: every parameter and state of the source graph that the current cut puts here, each
 * with its optimizer state. */
static sg_status pack(sg_dist *d, sg__pp_gen *g) {
  sg__par_pipeline *P = PIPELINE(d);
  const sg_graph *fwd = P->m.fwd, *sg = P->st->g;
  uint64_t n = 0;
  size_t data = 0;
  int32_t ids[5];
  for (uint32_t t = 0; t < fwd->n_tensors; t++) {
    if (!keeps(fwd, t) || sg__pp_tensor_stage(fwd, P->stage_of_op, (int32_t)t) != P->m.index) continue;
    int k = sg__pp_state_group(sg, fwd->tensors[t].name, ids);
    if (k == 0)
      return sg__error(SG_ERR_INTERNAL, "pipeline healing: '%s' is not in stage %d's graph",
                       fwd->tensors[t].name, P->m.index);
    n++;
    data += sg__pp_group_bytes(sg, ids, k);
  }
  size_t head = sizeof n + n * sizeof(entry);
  SG_CHECK(reserve(&g->own, &g->own_cap, head + data));
  memcpy(g->own, &n, sizeof n);
  entry *e = (entry *)(void *)(g->own + sizeof n);
  size_t off = head;
  for (uint32_t t = 0; t < fwd->n_tensors; t++) {
    if (!keeps(fwd, t) || sg__pp_tensor_stage(fwd, P->stage_of_op, (int32_t)t) != P->m.index) continue;
    int k = sg__pp_state_group(sg, fwd->tensors[t].name, ids);
    size_t start = off;
    for (int i = 0; i < k; i++) {
      const sg__tensor *x = &sg->tensors[ids[i]];
      SG_CHECK(sg_session_read(d->s, x->name, g->own + off, x->nbytes));
      off += x->nbytes;
    }
    *e++ = (entry){t, off - start};
  }
  g->own_bytes = off;
  return SG_OK;
}

/* A copy from a peer, checked before it is kept (SPEC S1): its entries are parameters or state of the
 * source graph in increasing order, and their bytes fill it exactly. */
static sg_status check_copy(const sg_graph *fwd, const unsigned char *b, size_t bytes, int from) {
  uint64_t n;
  if (bytes < sizeof n) goto bad;
  memcpy(&n, b, sizeof n);
  if (n > fwd->n_tensors || sizeof n + n * sizeof(entry) > bytes) goto bad;
  size_t total = sizeof n + n * sizeof(entry);
  int64_t last = -1;
  for (uint64_t i = 0; i < n; i++) {
    entry e;
    memcpy(&e, b + sizeof n + i * sizeof e, sizeof e);
    if (e.t <= last || e.t >= (int64_t)fwd->n_tensors || !keeps(fwd, (uint32_t)e.t) || e.bytes > bytes)
      goto bad;
    last = e.t;
    total += e.bytes;
    if (total > bytes) goto bad;
  }
  if (total == bytes) return SG_OK;
bad:
  return sg__error(SG_ERR_FORMAT, "pipeline healing: the copy of stage %d's state (%zu bytes) is malformed",
                   from, bytes);
}

/* Where source tensor t's bytes are in a packed copy; NULL when it is not there. */
static const unsigned char *find(const unsigned char *b, int64_t t, uint64_t *bytes) {
  uint64_t n;
  memcpy(&n, b, sizeof n);
  size_t off = sizeof n + n * sizeof(entry);
  for (uint64_t i = 0; i < n; i++) {
    entry e;
    memcpy(&e, b + sizeof n + i * sizeof e, sizeof e);
    if (e.t == t) {
      *bytes = e.bytes;
      return b + off;
    }
    off += e.bytes;
  }
  return NULL;
}

/* ---- a generation ------------------------------------------------------------------------------- */

static sg_status exchange(sg_dist *d, sg__pp_gen *g) {
  sg__par_model *m = MODEL(d);
  int K = m->pipeline, k = m->index, next = (k + 1) % K, prev = (k + K - 1) % K;
  uint64_t out = g->own_bytes, in = 0;
  /* Even stages send first, odd ones receive first: the ring's blocking transfers form a chain. */
  for (int phase = 0; phase < 2; phase++) {
    if ((phase == 0) == (k % 2 == 0)) {
      SG_CHECK(m->xfer.send(m->xfer.ctx, next, COPY_TAG, &out, sizeof out));
      SG_CHECK(m->xfer.send(m->xfer.ctx, next, COPY_TAG + 1, g->own, g->own_bytes));
    } else {
      SG_CHECK(m->xfer.recv(m->xfer.ctx, prev, COPY_TAG, &in, sizeof in));
      if (in > ((uint64_t)1 << 40))
        return sg__error(SG_ERR_FORMAT, "pipeline healing: stage %d announces a copy of %llu bytes", prev,
                         (unsigned long long)in);
      SG_CHECK(reserve(&g->prev, &g->prev_cap, (size_t)in));
      SG_CHECK(m->xfer.recv(m->xfer.ctx, prev, COPY_TAG + 1, g->prev, (size_t)in));
      SG_CHECK(check_copy(m->fwd, g->prev, (size_t)in, prev));
      g->prev_bytes = (size_t)in;
    }
  }
  return SG_OK;
}

sg_status sg__pipeline_replicate(sg_dist *d) {
  sg__par_pipeline *P = PIPELINE(d);
  sg__par_model *m = &P->m;
  sg__pp_heal *H = &P->heal;
  int64_t t0 = sg__now_ns();
  /* The other generation is the older one (or none): it is overwritten. */
  sg__pp_gen *g = &H->gen[(H->seq + 1) % 2];
  g->seq = 0;
  int32_t n_ops = sg_graph_num_ops(m->fwd);
  if (g->cut == NULL && (g->cut = sg__calloc((size_t)n_ops + 1, sizeof *g->cut)) == NULL)
    return sg__error(SG_ERR_NO_MEMORY, "pipeline healing: out of memory");
  memcpy(g->cut, P->stage_of_op, (size_t)n_ops * sizeof *g->cut);
  g->K = m->pipeline;
  for (int k = 0; k < g->K; k++) g->orig[k] = d->members[m->group[k]];
  g->step = d->stats.steps;
  SG_CHECK(pack(d, g));
  if (m->pipeline > 1) SG_CHECK(exchange(d, g));
  g->seq = H->seq + 1;
  H->seq = g->seq; /* held complete here: what this rank registers in a recovery */
  int64_t one = 1;
  SG_CHECK(sg__dist_world_allreduce(d, &one, 1, SG_I64, SG_REDUCE_MIN));
  d->stats.replica_bytes = g->own_bytes;
  d->stats.replication_ms = (double)(sg__now_ns() - t0) * 1e-6;
  return SG_OK;
}

void sg__pp_heal_free(sg__pp_heal *H) {
  for (int i = 0; i < 2; i++) {
    sg__free(H->gen[i].cut);
    sg__free(H->gen[i].own);
    sg__free(H->gen[i].prev);
  }
  memset(H, 0, sizeof *H);
}

bool sg__pipeline_healable(sg_dist *d, sg_status st) {
  if (st != SG_ERR_COMM || !PIPELINE(d)->heal.on) return false;
  pthread_mutex_lock(&d->mu);
  bool ok = d->failed == SG_ERR_COMM; /* a peer's failure: a local error fails with its own status */
  pthread_mutex_unlock(&d->mu);
  return ok;
}

/* ---- the recovery ------------------------------------------------------------------------------- */

/* The new layout from generation g over the members: which old stages survive (their new index), where
 * each lost one's ops go, and who holds each old stage's copy. */
typedef struct layout {
  const sg__pp_gen *g;
  int K;                            /* new stages: the members */
  int idx[SG__PP_MAX_STAGES];       /* per old stage: its new index, -1 lost */
  int into[SG__PP_MAX_STAGES];      /* per old stage: the new stage its ops go to */
  int keeper[SG__PP_MAX_STAGES];    /* per old stage: the new rank holding its copy */
  bool from_own[SG__PP_MAX_STAGES]; /* ... as its own (else as the next stage's prev) */
  int *cut;                         /* per op of fwd: the new stage */
} layout;

static sg_status plan(sg_dist *d, const sg__pp_gen *g, layout *L) {
  int K0 = g->K;
  L->g = g;
  L->K = 0;
  for (int k = 0; k < K0; k++) {
    L->idx[k] = -1;
    for (int r = 0; r < d->size; r++)
      if (d->members[r] == g->orig[k]) L->idx[k] = r;
    if (L->idx[k] >= 0) L->K++;
  }
  /* A member that runs no stage of the generation (not in a pipeline of one copy) cannot happen: the
   * members are survivors of the stages' ranks. */
  if (L->K != d->size)
    return sg__error(SG_ERR_INTERNAL, "pipeline healing: %d members, %d surviving stages", d->size, L->K);
  for (int k = 0; k < K0; k++) {
    int next = (k + 1) % K0;
    if (L->idx[k] >= 0) {
      L->keeper[k] = L->idx[k], L->from_own[k] = true;
    } else if (K0 > 1 && L->idx[next] >= 0 && next != k) {
      L->keeper[k] = L->idx[next], L->from_own[k] = false;
    } else {
      return sg__error(
          SG_ERR_COMM,
          "pipeline healing: stage %d (rank %d) and stage %d (rank %d), which kept its copy, were "
          "both lost: stage %d's state is gone; the job stops",
          k, g->orig[k], next, g->orig[next], k);
    }
    int j = k;
    while (j < K0 && L->idx[j] < 0) j++; /* the next survivor, else the previous one */
    if (j == K0)
      for (j = k; j >= 0 && L->idx[j] < 0; j--) {
      }
    L->into[k] = L->idx[j];
  }
  return SG_OK;
}

/* Every parameter and state with its optimizer state, from the generation's copy to its new stage. */
static sg_status move_state(sg_dist *d, const layout *L, const sg__pp_built *b, uint64_t *sent) {
  const sg_graph *fwd = MODEL(d)->fwd, *to_g = b->st->g;
  sg__xfer *x = &MODEL(d)->xfer;
  uint8_t *written = sg__calloc(to_g->n_tensors + 1, 1);
  unsigned char *buf = NULL;
  size_t cap = 0;
  if (written == NULL) return sg__error(SG_ERR_NO_MEMORY, "pipeline healing: out of memory");
  sg_status st = SG_OK;
  *sent = 0;
  for (uint32_t t = 0; t < fwd->n_tensors && st == SG_OK; t++) {
    if (!keeps(fwd, t)) continue;
    int a = sg__pp_tensor_stage(fwd, L->g->cut, (int32_t)t),
        nb = sg__pp_tensor_stage(fwd, L->cut, (int32_t)t);
    if (a < 0 || nb < 0) continue;
    int src = L->keeper[a], me = d->rank;
    if (me != src && me != nb) continue;
    const char *name = fwd->tensors[t].name;
    const unsigned char *from = NULL;
    uint64_t bytes = 0;
    if (me == src) {
      const unsigned char *copy = L->from_own[a] ? L->g->own : L->g->prev;
      if (copy == NULL || (from = find(copy, t, &bytes)) == NULL) {
        st = sg__error(SG_ERR_INTERNAL, "pipeline healing: the copy of stage %d lacks '%s'", a, name);
        break;
      }
    }
    int32_t ids[5];
    int n = me == nb ? sg__pp_state_group(to_g, name, ids) : 0;
    if (me == nb && n == 0) {
      st = sg__error(SG_ERR_INTERNAL, "pipeline healing: '%s' is not in new stage %d's graph", name, nb);
      break;
    }
    if (me == nb) {
      size_t want = sg__pp_group_bytes(to_g, ids, n);
      if (me == src && want != bytes) {
        st = sg__error(SG_ERR_INTERNAL, "pipeline healing: '%s' and its state differ between the layouts",
                       name);
        break;
      }
      if (me != src) {
        if ((st = reserve(&buf, &cap, want)) != SG_OK) break;
        if ((st = x->recv(x->ctx, src, HEAL_TAG, buf, want)) != SG_OK) break;
        from = buf;
      }
      size_t off = 0;
      for (int i = 0; i < n && st == SG_OK; i++) {
        const sg__tensor *y = &to_g->tensors[ids[i]];
        st = sg_session_write(b->s, y->name, from + off, y->nbytes);
        written[ids[i]] = 1;
        off += y->nbytes;
      }
    } else {
      st = x->send(x->ctx, nb, HEAL_TAG, from, (size_t)bytes);
      *sent += bytes;
    }
  }
  if (st == SG_OK) st = sg__pp_check_written(b->st, written, "pipeline healing");
  sg__free(written);
  sg__free(buf);
  return st;
}

/* The pipeline's place and transports over the members: stage r on rank r (one copy). */
static void place(sg_dist *d, int K) {
  sg__par_model *m = MODEL(d);
  sg__xfer_sched_free(&m->xctx);
  sg__xfer_sched_free(&m->rctx);
  m->pipeline = K;
  m->index = d->rank;
  m->replica = 0;
  for (int j = 0; j < K; j++) m->group[j] = j;
  m->replicas[0] = d->rank;
  sg__xfer_sched_init(&m->xctx, d, m->group, K, m->index, "pipeline", &m->xfer);
  sg__xfer_sched_init(&m->rctx, d, m->replicas, 1, 0, "replica", &m->rxfer);
  m->n_step_sums = 1 + K;
}

/* One round on the agreed membership: the generation `seq` restored in the new layout. */
static sg_status rebuild(sg_dist *d, int64_t seq) {
  sg__par_pipeline *P = PIPELINE(d);
  sg__par_model *m = &P->m;
  sg__pp_gen *g = NULL;
  for (int i = 0; i < 2; i++)
    if (P->heal.gen[i].seq == seq && seq > 0) g = &P->heal.gen[i];
  if (g == NULL)
    return sg__error(SG_ERR_COMM,
                     "rank %d: pipeline healing: no copy of the stages' state to restore (generation %lld): "
                     "a rank was lost before the first copy was complete",
                     d->orig_rank, (long long)seq);
  int32_t n_ops = sg_graph_num_ops(m->fwd);
  layout L = {0};
  L.cut = sg__malloc(((size_t)n_ops + 1) * sizeof *L.cut);
  if (L.cut == NULL) return sg__error(SG_ERR_NO_MEMORY, "pipeline healing: out of memory");
  sg_status st = plan(d, g, &L);
  for (int32_t o = 0; o < n_ops && st == SG_OK; o++) L.cut[o] = L.into[g->cut[o]];
  if (st == SG_OK) {
    place(d, L.K);
    st = sg__dist_inject_recovery(d, SG_RECOVERY_TRANSFER);
  }
  sg__pp_built b = {0};
  sg_tensor loss = {sg__tensor_lookup(m->fwd, m->loss_name)};
  if (st == SG_OK) st = sg__pp_split(m->fwd, loss, L.cut, n_ops, L.K, m->index, m->micro, &b.st);
  if (st == SG_OK) st = sg__pipeline_finish_stage(d, &b);
  /* Every rank built its stage, or all give up (a stage the split refuses fails everywhere). */
  int64_t ok = st == SG_OK;
  char why[512] = "";
  if (st != SG_OK) snprintf(why, sizeof why, "%s", sg_last_error());
  sg_status ast = st == SG_ERR_COMM ? st : sg__dist_world_allreduce(d, &ok, 1, SG_I64, SG_REDUCE_MIN);
  uint64_t sent = 0;
  if (ast == SG_OK && ok) {
    st = move_state(d, &L, &b, &sent);
    if (st != SG_OK) snprintf(why, sizeof why, "%s", sg_last_error());
    ok = st == SG_OK;
    ast = st == SG_ERR_COMM ? st : sg__dist_world_allreduce(d, &ok, 1, SG_I64, SG_REDUCE_MIN);
  }
  if (ast != SG_OK || !ok) {
    sg__pp_built_free(&b);
    sg__free(L.cut);
    if (ast != SG_OK) return ast; /* a death: the caller agrees again */
    return sg__error(st != SG_OK ? st : SG_ERR_COMM, "rank %d: pipeline healing: %s", d->orig_rank,
                     st != SG_OK ? why : "another rank could not build its new stage");
  }
  /* The new stage in place of the old one, at the generation's step. */
  sg__session_set_steps(b.s, g->step); /* dropout masks and SGD's first step read it */
  b.pp->step = g->step;                /* the message tags' step */
  sg__pp_runner_destroy(P->pp);
  sg__model_release_session(d);
  sg__pp_stage_destroy(P->st);
  P->st = b.st;
  P->pp = b.pp;
  m->part_session = d->s = b.s;
  d->g = P->st->g;
  memcpy(P->stage_of_op, L.cut, (size_t)n_ops * sizeof *L.cut);
  P->busy_sum = 0;
  P->busy_steps = 0;
  char was[160] = "", now[160] = "";
  for (int k = 0, o = 0; k < g->K && o < (int)sizeof was; k++)
    o += snprintf(was + o, sizeof was - (size_t)o, "%s%d%s", k ? " " : "", g->orig[k],
                  L.idx[k] < 0 ? "x" : "");
  for (int k = 0, o = 0; k < L.K && o < (int)sizeof now; k++)
    o += snprintf(now + o, sizeof now - (size_t)o, "%s%d", k ? " " : "", d->members[k]);
  fprintf(
      stderr,
      "sgrt: rank %d: pipeline healed: stages on ranks [%s] -> [%s] (lost stages merged into a neighbour), "
      "state of step %llu restored from the copies (%llu bytes sent from here)\n",
      d->orig_rank, was, now, (unsigned long long)g->step, (unsigned long long)sent);
  uint64_t resume = g->step;
  sg__free(L.cut);
  /* The restored generation is the latest this rank holds: the next one (of the new layout) goes into the
   * other slot, and until every rank has it a recovery restores this one again. */
  P->heal.seq = seq;
  SG_CHECK(sg__pipeline_bind_inputs(d, true));
  if (resume < d->stats.steps) d->stats.redone_steps += d->stats.steps - resume;
  d->stats.steps = resume;
  return SG_OK;
}

sg_status sg__pipeline_heal(sg_dist *d) {
  sg__par_pipeline *P = PIPELINE(d);
  pthread_mutex_lock(&d->mu);
  int64_t t0 = d->fail_ns ? d->fail_ns : sg__now_ns();
  char cause[sizeof d->fail_msg];
  snprintf(cause, sizeof cause, "%s", d->fail_msg);
  pthread_mutex_unlock(&d->mu);
  fprintf(stderr, "sgrt: rank %d: recovering from: %s\n", d->orig_rank, cause);
  /* Each round that fails by a death loses a member: at most the stages' number of rounds. */
  for (int round = 0;; round++) {
    sg__dist_heal h = {.committed = (uint64_t)P->heal.seq};
    sg_status st = sg__dist_run_job(d, sg__dist_job_recover, &h);
    if (st != SG_OK) {
      if (h.excluded) d->stats.excluded = 1;
      return st;
    }
    sg_clear_error();
    st = rebuild(d, (int64_t)h.rollback);
    /* A generation of the new layout: the next failure restores from it. */
    if (st == SG_OK) st = sg__pipeline_replicate(d);
    if (st == SG_OK) {
      d->stats.recoveries++;
      d->stats.epoch = d->epoch;
      d->stats.world_size = d->size;
      d->stats.detection_ms = h.detection_ms;
      if (P->heal.t0_ns == 0) P->heal.t0_ns = t0;
      sg__dist_profile_restart(d, true);
      fprintf(stderr, "sgrt: rank %d: recovered: epoch %d, stage %d of %d, resuming after step %llu\n",
              d->orig_rank, d->epoch, MODEL(d)->index, MODEL(d)->pipeline,
              (unsigned long long)d->stats.steps);
      return SG_OK;
    }
    if (!sg__pipeline_healable(d, st) || round >= SG__PP_MAX_STAGES) return st;
    fprintf(stderr, "sgrt: rank %d: a rank was lost during the recovery; agreeing again without it\n",
            d->orig_rank);
  }
}
