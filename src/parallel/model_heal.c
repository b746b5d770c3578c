/* Healing the model strategies (sg_dist_params.heal, model.h, docs/resilience.md
 * "Healing a pipeline" and "Healing a tensor group"): what the pipeline and the
 * tensor group share; each one's rebuild is in pp_heal.c and tp_heal.c.
 *
 * Copies: after every step (and before the first) each rank packs the
 * parameters, state (batch-norm statistics) and optimizer state of its part
 * and writes them into a slot that the next rank of its group (a ring) holds
 * in the global page table (model_copy.c); then an allreduce, after which
 * each rank takes the copy written into its own slot. A rank that left that
 * allreduce knows every rank holds the generation; a failure before it can
 * leave some ranks one generation behind, so two are kept (the slots' two).
 * A generation records the layout it was taken in (the group's width, its
 * ranks, a pipeline's cut) and the step.
 *
 * Recovery: the survivors agree on the membership through the store
 * (membership.c, as data parallelism does) and on the generation to restore:
 * the latest that all of them hold (the agreement's rollback is the least
 * generation number registered). The strategy builds its new part over the
 * members and fills it from the generation's copies; nothing is taken from
 * the sessions, which a failed step may have updated halfway. Then a
 * generation of the new layout, and the steps after the restored one are
 * redone with the inputs every rank kept: under strict QoS no step is lost.
 * A rank that dies during all this sends the others back to the agreement,
 * from the same generation (the copies are only read until the new
 * generation is complete). */
#include <stdio.h>
#include <string.h>

#include "graph/graph.h"
#include "parallel/model.h"
#include "runtime/hooks.h"

/* ---- the packed format: [n][n x (tensor of fwd, bytes)][the bytes] (native byte order: one host's ranks
 * or hosts of one kind, as the communicator's other messages) ------------------------------------------- */

typedef struct entry {
  int64_t t;
  uint64_t bytes;
} entry;

bool sg__model_heal_keeps(const sg_graph *fwd, uint32_t t) {
  sg_role r = fwd->tensors[t].role;
  return r == SG_ROLE_PARAMETER || r == SG_ROLE_STATE;
}

sg_status sg__model_heal_reserve(unsigned char **buf, size_t *cap, size_t bytes) {
  if (bytes <= *cap) return SG_OK;
  unsigned char *b = sg__realloc(*buf, bytes ? bytes : 1);
  if (b == NULL) return sg__error(SG_ERR_NO_MEMORY, "healing: out of memory for %zu bytes", bytes);
  *buf = b;
  *cap = bytes;
  return SG_OK;
}

/* This rank's part: every parameter and state of the source graph in it, each with its optimizer state. */
static sg_status pack(sg_dist *d, const sg__model_heal_ops *ops, sg__model_gen *g) {
  const sg_graph *fwd = MODEL(d)->fwd, *pg = d->g;
  uint64_t n = 0;
  size_t data = 0;
  int32_t ids[5];
  for (uint32_t t = 0; t < fwd->n_tensors; t++) {
    if (!sg__model_heal_keeps(fwd, t) || !ops->mine(d, (int32_t)t)) continue;
    int k = sg__pp_state_group(pg, fwd->tensors[t].name, ids);
    if (k == 0)
      return sg__error(SG_ERR_INTERNAL, "healing: '%s' is not in this rank's part", fwd->tensors[t].name);
    n++;
    data += sg__pp_group_bytes(pg, ids, k);
  }
  size_t head = sizeof n + n * sizeof(entry);
  SG_CHECK(sg__model_heal_reserve(&g->own, &g->own_cap, head + data));
  memcpy(g->own, &n, sizeof n);
  unsigned char *e = g->own + sizeof n;
  size_t off = head;
  for (uint32_t t = 0; t < fwd->n_tensors; t++) {
    if (!sg__model_heal_keeps(fwd, t) || !ops->mine(d, (int32_t)t)) continue;
    int k = sg__pp_state_group(pg, fwd->tensors[t].name, ids);
    size_t start = off;
    for (int i = 0; i < k; i++) {
      const sg__tensor *x = &pg->tensors[ids[i]];
      SG_CHECK(sg_session_read(d->s, x->name, g->own + off, x->nbytes));
      off += x->nbytes;
    }
    entry en = {t, off - start};
    memcpy(e, &en, sizeof en);
    e += sizeof en;
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
    if (e.t <= last || e.t >= (int64_t)fwd->n_tensors || !sg__model_heal_keeps(fwd, (uint32_t)e.t) ||
        e.bytes > bytes)
      goto bad;
    last = e.t;
    total += e.bytes;
    if (total > bytes) goto bad;
  }
  if (total == bytes) return SG_OK;
bad:
  return sg__error(SG_ERR_FORMAT, "healing: the copy of group member %d's state (%zu bytes) is malformed",
                   from, bytes);
}

const unsigned char *sg__model_copy_find(const unsigned char *b, int64_t t, uint64_t *bytes) {
  if (b == NULL) return NULL;
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

/* A pipeline of tensor groups: its copies go round each stage's group, whose shares a heal re-splits. */
static bool tensor_stages(const sg_dist *d) {
  return d->strategy == &sg__par_pipeline_strategy && MODEL(d)->tensor > 1;
}

int sg__model_gen_member(const sg_dist *d, const sg__model_gen *g, int k) {
  for (int r = 0; r < d->size; r++)
    if (d->members[r] == g->orig[k]) return r;
  return -1;
}

int sg__model_gen_index(const sg_dist *d, const sg__model_gen *g, int k) {
  int W = d->size / MODEL(d)->data, base = d->rank / W * W, r = sg__model_gen_member(d, g, k);
  return r >= base && r < base + W ? r - base : -1;
}

sg_status sg__model_gen_keeper(const sg_dist *d, const sg__model_gen *g, int k, int *index, bool *from_own) {
  int next = sg__model_ring_next(k, g->ring), own = sg__model_gen_index(d, g, k);
  *from_own = own >= 0;
  *index = own >= 0 ? own : next != k ? sg__model_gen_index(d, g, next) : -1;
  if (*index >= 0) return SG_OK;
  bool pipeline = d->strategy == &sg__par_pipeline_strategy && g->ring == g->K;
  const char *part = pipeline ? "stage" : "share";
  char in[48] = ""; /* a pipeline of tensor groups: the stage whose shares these are */
  if (g->ring < g->K) snprintf(in, sizeof in, " of stage %d", k / g->ring);
  return sg__error(
      SG_ERR_COMM,
      "%s healing: %s %d%s (rank %d) and %s %d (rank %d), which kept its copy, were both lost: %s "
      "%d's state is gone; the job stops",
      pipeline ? "pipeline" : "tensor", part, k % g->ring, in, g->orig[k], part, next % g->ring,
      g->orig[next], part, k % g->ring);
}

sg_status sg__model_replace(sg_dist *d) {
  sg__par_model *m = MODEL(d);
  if (d->size % m->data != 0)
    return sg__error(SG_ERR_INTERNAL, "healing: %d members for %d copies", d->size, m->data);
  int W = d->size / m->data;
  m->replica = d->rank / W;
  m->index = d->rank % W;
  for (int j = 0; j < W; j++) m->group[j] = m->replica * W + j;
  for (int e = 0; e < m->data; e++) m->replicas[e] = e * W + m->index;
  return SG_OK;
}

/* Every copy of the model keeps its layout: a rank stays when, at its place in the group, no copy lost its
 * rank (sg__dist_healing.keep). */
static bool keep_alike(const sg_dist *d, const bool *alive, int orig) {
  const sg__par_model *m = MODEL(d);
  int W = d->size / m->data, pos = -1;
  for (int r = 0; r < d->size; r++)
    if (d->members[r] == orig) pos = r;
  if (pos < 0) return false;
  for (int e = 0; e < m->data; e++)
    if (!alive[d->members[e * W + pos % W]]) return false;
  return true;
}

/* A pipeline of tensor groups keeps one width in every stage and copy: a rank stays when, at its share's
 * place, no stage of any copy lost its rank. */
static bool keep_share(const sg_dist *d, const bool *alive, int orig) {
  int T = MODEL(d)->tensor, pos = -1;
  for (int r = 0; r < d->size; r++)
    if (d->members[r] == orig) pos = r;
  if (pos < 0) return false;
  for (int r = pos % T; r < d->size; r += T)
    if (!alive[d->members[r]]) return false;
  return true;
}

void sg__model_heal_keep(sg_dist *d) {
  if (d->p.heal != 1) return;
  d->heal.keep = tensor_stages(d) ? keep_share : MODEL(d)->data > 1 ? keep_alike : NULL;
}

void sg__model_heal_init(sg_dist *d) {
  MODEL(d)->heal.on = d->p.heal == 1;
  sg__model_heal_keep(d);
}

/* ---- a generation ------------------------------------------------------------------------------- */

sg_status sg__model_replicate(sg_dist *d, const sg__model_heal_ops *ops) {
  sg__par_model *m = MODEL(d);
  sg__model_heal *H = &m->heal;
  int64_t t0 = sg__now_ns();
  /* The other generation is the older one (or none): it is overwritten. */
  sg__model_gen *g = &H->gen[(H->seq + 1) % 2];
  g->seq = 0;
  int width = d->size / m->data; /* the stages or the shares of a copy */
  if (d->strategy == &sg__par_pipeline_strategy) {
    int32_t n_ops = sg_graph_num_ops(m->fwd);
    if (g->cut == NULL && (g->cut = sg__calloc((size_t)n_ops + 1, sizeof *g->cut)) == NULL)
      return sg__error(SG_ERR_NO_MEMORY, "healing: out of memory");
    memcpy(g->cut, PIPELINE(d)->stage_of_op, (size_t)n_ops * sizeof *g->cut);
  }
  g->K = width;
  g->ring = tensor_stages(d) ? m->tensor : width;
  for (int k = 0; k < width; k++) g->orig[k] = d->members[m->group[k]];
  g->step = d->stats.steps;
  SG_CHECK(pack(d, ops, g));
  uint64_t label = (uint64_t)H->seq + 1;
  if (g->ring > 1) SG_CHECK(sg__model_copy_push(d, g, label));
  /* Every rank has written its copy once every rank is past this: the previous member's is complete. */
  int64_t one = 1;
  SG_CHECK(sg__dist_world_allreduce(d, &one, 1, SG_I64, SG_REDUCE_MIN));
  if (g->ring > 1) {
    SG_CHECK(sg__model_copy_take(d, g, label));
    int prev = sg__model_ring_prev(m->index, g->ring);
    SG_CHECK(check_copy(m->fwd, g->prev, g->prev_bytes, prev));
  }
  g->seq = (int64_t)label;
  H->seq = g->seq; /* held complete here: what this rank registers in a recovery */
  d->stats.replica_bytes = g->own_bytes;
  d->stats.replication_ms = (double)(sg__now_ns() - t0) * 1e-6;
  return SG_OK;
}

void sg__model_heal_free(sg__model_heal *H) {
  for (int i = 0; i < 2; i++) {
    sg__free(H->gen[i].cut);
    sg__free(H->gen[i].own);
    sg__free(H->gen[i].prev_heap);
  }
  sg__slots slots = H->slots, stash = H->stash; /* the scheduler's, destroyed when it stops */
  memset(H, 0, sizeof *H);
  H->slots = slots;
  H->stash = stash;
}

/* ---- the recovery ------------------------------------------------------------------------------- */

static bool healable(sg_dist *d, sg_status st) {
  if (st != SG_ERR_COMM || !MODEL(d)->heal.on) return false;
  pthread_mutex_lock(&d->mu);
  bool ok = d->failed == SG_ERR_COMM; /* a peer's failure: a local error fails with its own status */
  pthread_mutex_unlock(&d->mu);
  return ok;
}

/* "<what> healed: ranks [0 1 2x 3] -> [0 1 3] (N ways), state of step S restored": this copy's group in
 * generation g (x: lost or released) and now. */
static void describe(const sg_dist *d, const sg__model_gen *g) {
  const sg__par_model *m = MODEL(d);
  bool pipeline = d->strategy == &sg__par_pipeline_strategy, shares = g->ring < g->K;
  int width = d->size / m->data;
  char was[160] = "", now[160] = "";
  for (int k = 0, o = 0; k < g->K && o < (int)sizeof was; k++)
    o += snprintf(was + o, sizeof was - (size_t)o, "%s%d%s", k ? " " : "", g->orig[k],
                  sg__model_gen_index(d, g, k) < 0 ? "x" : "");
  for (int k = 0, o = 0; k < width && o < (int)sizeof now; k++)
    o += snprintf(now + o, sizeof now - (size_t)o, "%s%d", k ? " " : "", d->members[m->group[k]]);
  fprintf(stderr,
          "sgrt: rank %d: %s healed: %s on ranks [%s] -> [%s] (%s), state of step %llu restored from the "
          "copies\n",
          d->orig_rank, pipeline ? "pipeline" : "tensor group",
          shares     ? "stages x shares"
          : pipeline ? "stages"
                     : "shares",
          was, now,
          shares     ? "every stage's tensor group split again"
          : pipeline ? "lost stages merged into a neighbour"
                     : "split again",
          (unsigned long long)g->step);
}

static sg_status recover(sg_dist *d, const sg__model_heal_ops *ops) {
  sg__model_heal *H = &MODEL(d)->heal;
  int64_t t0 = sg__dist_announce_recovery(d);
  /* Each round that fails by a death loses a member: at most the group's width of rounds. */
  for (int round = 0;; round++) {
    sg__dist_heal h = {.committed = (uint64_t)H->seq};
    sg_status st = sg__dist_run_job(d, sg__dist_job_recover, &h);
    if (st != SG_OK) {
      if (h.excluded) d->stats.excluded = 1;
      return st;
    }
    sg_clear_error();
    const sg__model_gen *g = NULL;
    for (int i = 0; i < 2; i++)
      if (H->gen[i].seq == (int64_t)h.rollback && h.rollback > 0) g = &H->gen[i];
    if (g == NULL)
      return sg__error(SG_ERR_COMM,
                       "rank %d: healing: no copy of the state to restore (generation %llu): a rank was lost "
                       "before the first copy was complete",
                       d->orig_rank, (unsigned long long)h.rollback);
    uint64_t was = d->stats.steps;
    st = ops->rebuild(d, g);
    if (st == SG_OK) {
      describe(d, g);
      /* The new part resumes at the generation's step: dropout masks and SGD's first step read the count;
       * a generation from before the first step holds each copy's own initial state, so the redone first
       * step gives every copy replica 0's again. */
      sg__session_set_steps(d->s, g->step);
      d->stats.steps = g->step;
      if (g->step == 0) MODEL(d)->broadcast_done = false;
      /* The restored generation is the latest this rank holds: the next one (of the new layout) goes into
       * the other slot, and until every rank has it a recovery restores this one again. */
      H->seq = g->seq;
      if (g->step < was) d->stats.redone_steps += was - g->step;
      st = sg__model_replicate(d, ops);
    }
    if (st == SG_OK) {
      d->stats.recoveries++;
      d->stats.epoch = d->epoch;
      d->stats.world_size = d->size;
      d->stats.detection_ms = h.detection_ms;
      if (H->t0_ns == 0) H->t0_ns = t0;
      /* The job resumes (SPEC H4), from the first detection when a recovery took several rounds or a
       * redone step failed again; the step it resumes with is timed on top (rto_step_ms). */
      d->stats.recovery_ms = (double)(sg__now_ns() - H->t0_ns) * 1e-6;
      d->stats.rto_ms = d->stats.detection_ms + d->stats.recovery_ms;
      sg__dist_profile_restart(d, true);
      fprintf(stderr, "sgrt: rank %d: recovered: epoch %d, rank %d of %d, resuming after step %llu\n",
              d->orig_rank, d->epoch, d->rank, d->size, (unsigned long long)d->stats.steps);
      return SG_OK;
    }
    if (!healable(d, st) || round >= SG__DIST_MAX_RANKS) return st;
    fprintf(stderr, "sgrt: rank %d: a rank was lost during the recovery; agreeing again without it\n",
            d->orig_rank);
  }
}

sg_status sg__model_heal_step(sg_dist *d, const sg__model_heal_ops *ops, bool reduce) {
  sg__model_heal *H = &MODEL(d)->heal;
  uint64_t want = d->stats.steps + 1;
  sg_status st = H->seq == 0 ? sg__model_replicate(d, ops) : SG_OK; /* a failure in step 1 needs one */
  for (;;) {
    if (st == SG_OK) st = sg__model_step(d, ops->part, reduce, ops->copies(d));
    if (st == SG_OK && ops->after != NULL) st = ops->after(d);
    if (st == SG_OK) st = sg__model_replicate(d, ops);
    if (st == SG_OK || !healable(d, st)) break;
    st = recover(d, ops);
    if (st != SG_OK || d->stats.steps >= want) break; /* the generation it restored has the step */
  }
  if (st != SG_OK && H->on && !healable(d, st)) st = sg__dist_left_out(d, st);
  if (st == SG_OK && H->t0_ns != 0) { /* the first step completed after a recovery */
    d->stats.rto_step_ms = d->stats.detection_ms + (double)(sg__now_ns() - H->t0_ns) * 1e-6;
    H->t0_ns = 0;
  }
  return st;
}
