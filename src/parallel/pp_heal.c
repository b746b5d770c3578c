/* Healing a pipeline (sg_dist_params.heal, docs/resilience.md "Healing a
 * pipeline"): the pipeline's part of model_heal.c. A stage's copy holds the
 * parameters and state the cut puts on it; after a loss each lost stage is
 * merged into its next surviving neighbour (the previous one for the last
 * stage), so only its ops change rank; the new stages are built, and every
 * parameter with its optimizer state goes from the generation's copy (its
 * old stage's own copy, or, for a lost stage, the copy its successor kept) to
 * its new stage (a weight tied across stages to each new stage that reads it),
 * in the source graph's tensor order so that the blocking transfers cannot
 * deadlock. Two neighbouring stages lost at once leave the
 * first without a copy, which stops the job with an error naming both. */
#include <stdio.h>
#include <string.h>

#include "graph/graph.h"
#include "parallel/model.h"
#include "runtime/hooks.h"

/* The recovery's moves: below the re-cut's tags (0x3ffffe00). */
#define HEAL_TAG 0x3ffffc00u

/* The stage the current cut puts source tensor t on is this rank's. */
static bool mine(const sg_dist *d, int32_t t) {
  const sg__par_pipeline *P = PIPELINE(d);
  return sg__pp_tensor_stage(P->m.fwd, P->stage_of_op, t) == sg__pipeline_stage(&P->m);
}

/* ---- the recovery ------------------------------------------------------------------------------- */

/* The new layout from generation g over the members: which old stages survive (their new index), where
 * each lost one's ops go, and who holds each old stage's copy. */
typedef struct layout {
  const sg__model_gen *g;
  int K;                            /* new stages: the members of each copy */
  int idx[SG__PP_MAX_STAGES];       /* per old stage: its new index, -1 lost */
  int into[SG__PP_MAX_STAGES];      /* per old stage: the new stage its ops go to */
  int keeper[SG__PP_MAX_STAGES];    /* per old stage: the new stage (in this copy) holding its copy */
  bool from_own[SG__PP_MAX_STAGES]; /* ... as its own (else as the next stage's prev) */
  int *cut;                         /* per op of fwd: the new stage */
} layout;

static sg_status plan(sg_dist *d, const sg__model_gen *g, layout *L) {
  int K0 = g->K;
  L->g = g;
  L->K = 0;
  for (int k = 0; k < K0; k++)
    if ((L->idx[k] = sg__model_gen_index(d, g, k)) >= 0) L->K++;
  /* Every copy lost (or released) the same places: each has the same number of stages left. */
  if (L->K * MODEL(d)->data != d->size)
    return sg__error(SG_ERR_INTERNAL,
                     "pipeline healing: %d members, %d surviving stages in each of %d copies", d->size, L->K,
                     MODEL(d)->data);
  for (int k = 0; k < K0; k++) {
    SG_CHECK(sg__model_gen_keeper(d, g, k, &L->keeper[k], &L->from_own[k]));
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
  uint8_t has[SG__PP_MAX_STAGES];
  for (uint32_t t = 0; t < fwd->n_tensors && st == SG_OK; t++) {
    if (!sg__model_heal_keeps(fwd, t)) continue;
    int a = sg__pp_tensor_stage(fwd, L->g->cut, (int32_t)t);
    if (a < 0 || sg__pp_tensor_stage(fwd, L->cut, (int32_t)t) < 0) continue;
    /* A weight tied across stages goes to every new stage that reads it (a merged stage that reads it
     * twice holds one copy), from the copy of its old owner (its first reader's stage), which holds the
     * same bits as every other holder's. */
    sg__pp_tensor_holders(fwd, L->cut, L->K, (int32_t)t, has);
    int src = L->keeper[a], me = MODEL(d)->index;
    if (me != src && !has[me]) continue;
    const char *name = fwd->tensors[t].name;
    const unsigned char *from = NULL;
    uint64_t bytes = 0;
    if (me == src) {
      const unsigned char *copy = L->from_own[a] ? L->g->own : L->g->prev;
      if ((from = sg__model_copy_find(copy, t, &bytes)) == NULL) {
        st = sg__error(SG_ERR_INTERNAL, "pipeline healing: the copy of stage %d lacks '%s'", a, name);
        break;
      }
    }
    if (has[me]) {
      int32_t ids[5];
      int n = sg__pp_state_group(to_g, name, ids);
      if (n == 0) {
        st = sg__error(SG_ERR_INTERNAL, "pipeline healing: '%s' is not in new stage %d's graph", name, me);
        break;
      }
      size_t want = sg__pp_group_bytes(to_g, ids, n);
      if (me == src && want != bytes) {
        st = sg__error(SG_ERR_INTERNAL, "pipeline healing: '%s' and its state differ between the layouts",
                       name);
        break;
      }
      const unsigned char *in = from;
      if (me != src) {
        if ((st = sg__model_heal_reserve(&buf, &cap, want)) != SG_OK) break;
        if ((st = x->recv(x->ctx, src, HEAL_TAG, buf, want)) != SG_OK) break;
        in = buf;
      }
      size_t off = 0;
      for (int i = 0; i < n && st == SG_OK; i++) {
        const sg__tensor *y = &to_g->tensors[ids[i]];
        st = sg_session_write(b->s, y->name, in + off, y->nbytes);
        written[ids[i]] = 1;
        off += y->nbytes;
      }
    }
    for (int nb = 0; nb < L->K && me == src && st == SG_OK; nb++) {
      if (!has[nb] || nb == me) continue;
      st = x->send(x->ctx, nb, HEAL_TAG, from, (size_t)bytes);
      *sent += bytes;
    }
  }
  if (st == SG_OK) st = sg__pp_check_written(b->st, written, "pipeline healing");
  sg__free(written);
  sg__free(buf);
  return st;
}

/* The pipeline's place and transports over the members: K stages in each copy. */
static sg_status place(sg_dist *d, int K) {
  sg__par_model *m = MODEL(d);
  m->pipeline = K;
  SG_CHECK(sg__model_replace(d));
  SG_CHECK(sg__pipeline_transports(d));
  m->n_step_sums = 1 + K;
  return SG_OK;
}

/* The new stages over the agreed members from generation g (model.h's sg__model_heal_ops.rebuild). */
static sg_status rebuild(sg_dist *d, const sg__model_gen *g) {
  sg__par_pipeline *P = PIPELINE(d);
  sg__par_model *m = &P->m;
  int32_t n_ops = sg_graph_num_ops(m->fwd);
  layout L = {0};
  L.cut = sg__malloc(((size_t)n_ops + 1) * sizeof *L.cut);
  if (L.cut == NULL) return sg__error(SG_ERR_NO_MEMORY, "pipeline healing: out of memory");
  sg_status st = plan(d, g, &L);
  for (int32_t o = 0; o < n_ops && st == SG_OK; o++) L.cut[o] = L.into[g->cut[o]];
  if (st == SG_OK) st = place(d, L.K);
  if (st == SG_OK) st = sg__dist_inject_recovery(d, SG_RECOVERY_TRANSFER);
  sg__pp_built b = {0};
  if (st == SG_OK) st = sg__pipeline_split(d, L.cut, L.K, &b);
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
  /* The new stage in place of the old one; the runner's message tags continue at the generation's step. */
  st = sg__pipeline_install(d, L.cut, &b, g->step);
  sg__free(L.cut);
  if (sent > 0)
    fprintf(stderr, "sgrt: rank %d: %llu bytes of state sent to new stages\n", d->orig_rank,
            (unsigned long long)sent);
  return st;
}

/* Only the last stage of each copy has the loss: the world's sum counts each copy once. */
static int copies(const sg_dist *d) { return MODEL(d)->data; }

const sg__model_heal_ops sg__pp_heal_ops = {.copies = copies,
                                            .part = sg__pipeline_part_step,
                                            .after = sg__pipeline_maybe_replan,
                                            .mine = mine,
                                            .rebuild = rebuild};
