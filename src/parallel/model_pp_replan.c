/* Repartitioning a running pipeline from its profile (SPEC P6, model.h).
 *
 * Every step's loss allreduce also sums which ranks' profile trigger fired
 * (profile.c) and each stage's compute time, averaged over the steps since
 * the last evaluation; so every rank sees the same figures after the same
 * step and takes the same decision without a message of its own. When a
 * trigger fired, sg__pp_recut predicts the best contiguous cut from the
 * stages' measured speeds; a cut predicted to make the slowest stage at
 * least MIN_GAIN times faster is built on every rank (split, optimizer,
 * compile, runner), the parameters and optimizer state whose stage changes
 * go point-to-point from the old stage's rank to the new one's (in each
 * pipeline copy, in the source graph's tensor order, so the blocking sends
 * of all ranks meet in one global order and cannot deadlock), the rest is
 * copied locally, and the new stage replaces the old between two steps.
 * The step count, the dropout streams and the inputs carry over: the run
 * computes what it would have without the switch, to rounding. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "graph/graph.h"
#include "parallel/model.h"
#include "runtime/hooks.h"

/* A re-cut is switched to only when it predicts the slowest stage at least this much faster: the
 * measurement's noise must not make the stages move back and forth. */
#define MIN_GAIN 1.1
/* The migration's messages: below the pipeline runner's tags (bit 30 set) and the groups' (0x7fffff00). */
#define MOVE_TAG 0x3ffffe00u

int sg__pp_tensor_stage(const sg_graph *fwd, const int *cut, int32_t t) {
  if (fwd->tensors[t].producer >= 0) return cut[fwd->tensors[t].producer];
  for (uint32_t o = 0; o < fwd->n_ops; o++)
    for (int i = 0; i < fwd->ops[o].n_inputs; i++)
      if (fwd->ops[o].inputs[i] == t) return cut[o];
  return -1;
}

int sg__pp_state_group(const sg_graph *g, const char *name, int32_t out[5]) {
  static const char *const suffix[] = {".momentum_buffer", ".exp_avg", ".exp_avg_sq", ".step"};
  int n = 0;
  int32_t t = sg__tensor_lookup(g, name);
  if (t < 0) return 0;
  out[n++] = t;
  char buf[SG__MAX_NAME + 24];
  for (size_t i = 0; i < sizeof suffix / sizeof suffix[0]; i++) {
    snprintf(buf, sizeof buf, "%s%s", name, suffix[i]);
    int32_t s = sg__tensor_lookup(g, buf);
    if (s >= 0 && g->tensors[s].role == SG_ROLE_OPTIMIZER_STATE) out[n++] = s;
  }
  return n;
}

size_t sg__pp_group_bytes(const sg_graph *g, const int32_t *ids, int n) {
  size_t b = 0;
  for (int i = 0; i < n; i++) b += g->tensors[ids[i]].nbytes;
  return b;
}

typedef struct move {
  sg_dist *d;
  const sg_graph *fwd;
  const int *from_cut, *to_cut;
  sg_session *from_s, *to_s;
  const sg_graph *from_g, *to_g;
  uint8_t *written; /* per tensor of to_g */
  unsigned char *buf;
  size_t cap;
  uint64_t sent;
} move;

static sg_status reserve(move *mv, size_t bytes) {
  if (bytes <= mv->cap) return SG_OK;
  unsigned char *b = sg__realloc(mv->buf, bytes);
  if (b == NULL) return sg__error(SG_ERR_NO_MEMORY, "pipeline re-cut: out of memory for %zu bytes", bytes);
  mv->buf = b;
  mv->cap = bytes;
  return SG_OK;
}

static sg_status pack(move *mv, const int32_t *ids, int n) {
  size_t off = 0;
  for (int i = 0; i < n; i++) {
    const sg__tensor *x = &mv->from_g->tensors[ids[i]];
    SG_CHECK(sg_session_read(mv->from_s, x->name, mv->buf + off, x->nbytes));
    off += x->nbytes;
  }
  return SG_OK;
}

static sg_status unpack(move *mv, const int32_t *ids, int n) {
  size_t off = 0;
  for (int i = 0; i < n; i++) {
    const sg__tensor *x = &mv->to_g->tensors[ids[i]];
    SG_CHECK(sg_session_write(mv->to_s, x->name, mv->buf + off, x->nbytes));
    mv->written[ids[i]] = 1;
    off += x->nbytes;
  }
  return SG_OK;
}

/* Source tensor t (a parameter or state) and its optimizer state, from its old stage to its new one. A
 * weight tied across stages has a bitwise-equal copy on each stage that reads it: a new holder that held
 * it keeps its own copy; one that did not gets the old owner's (sg__pp_tensor_stage: its first reader's
 * stage), sent to the new holders in stage order (every rank goes through the same order). */
static sg_status move_one(move *mv, int32_t t) {
  sg__par_model *m = MODEL(mv->d);
  int K = m->pipeline, k = sg__pipeline_stage(m);
  int a = sg__pp_tensor_stage(mv->fwd, mv->from_cut, t);
  if (a < 0 || sg__pp_tensor_stage(mv->fwd, mv->to_cut, t) < 0) return SG_OK;
  uint8_t had[SG__PP_MAX_STAGES], has[SG__PP_MAX_STAGES];
  sg__pp_tensor_holders(mv->fwd, mv->from_cut, K, t, had);
  sg__pp_tensor_holders(mv->fwd, mv->to_cut, K, t, has);
  if (!had[k] && !has[k]) return SG_OK;
  const char *name = mv->fwd->tensors[t].name;
  int32_t from[5], to[5];
  int nf = had[k] ? sg__pp_state_group(mv->from_g, name, from) : 0;
  int nt = has[k] ? sg__pp_state_group(mv->to_g, name, to) : 0;
  if ((had[k] && nf == 0) || (has[k] && nt == 0))
    return sg__error(SG_ERR_INTERNAL, "pipeline re-cut: '%s' is not in stage %d's graph", name, k);
  size_t bytes = nf ? sg__pp_group_bytes(mv->from_g, from, nf) : sg__pp_group_bytes(mv->to_g, to, nt);
  SG_CHECK(reserve(mv, bytes));
  if (had[k]) SG_CHECK(pack(mv, from, nf));
  if (had[k] && has[k]) { /* stays: from the old session into the new one */
    if (nf != nt || sg__pp_group_bytes(mv->to_g, to, nt) != bytes)
      return sg__error(SG_ERR_INTERNAL, "pipeline re-cut: '%s' and its state differ between the cuts", name);
    SG_CHECK(unpack(mv, to, nt));
  }
  if (k == a) {
    for (int j = 0; j < K; j++) {
      if (!has[j] || had[j]) continue;
      SG_CHECK(m->xfer.send(m->xfer.ctx, j * m->tensor + sg__pipeline_share(m), MOVE_TAG, mv->buf, bytes));
      mv->sent += bytes;
    }
    return SG_OK;
  }
  if (had[k]) return SG_OK;
  SG_CHECK(m->xfer.recv(m->xfer.ctx, a * m->tensor + sg__pipeline_share(m), MOVE_TAG, mv->buf, bytes));
  return unpack(mv, to, nt);
}

static bool is_recv(const sg__pp_stage *st, int32_t t) {
  for (int j = 0; j < st->n_recv; j++)
    if (st->recv[j] == t) return true;
  return false;
}

sg_status sg__pp_check_written(const sg__pp_stage *to, const uint8_t *written, const char *what) {
  const sg_graph *g = to->g;
  for (uint32_t t = 0; t < g->n_tensors; t++) {
    sg_role r = g->tensors[t].role;
    if ((r != SG_ROLE_PARAMETER && r != SG_ROLE_STATE && r != SG_ROLE_OPTIMIZER_STATE) || written[t])
      continue;
    bool boundary = is_recv(to, (int32_t)t);
    for (int j = 0; j < to->n_recv && !boundary; j++) {
      const char *b = g->tensors[to->recv[j]].name;
      size_t n = strlen(b);
      boundary = strncmp(g->tensors[t].name, b, n) == 0 && g->tensors[t].name[n] == '.';
    }
    if (!boundary)
      return sg__error(SG_ERR_INTERNAL, "%s: nothing moved '%s' to stage %d", what, g->tensors[t].name,
                       to->stage);
  }
  return SG_OK;
}

static sg_status migrate(sg_dist *d, const int *to_cut, const sg__pp_built *to, uint64_t *sent) {
  sg__par_pipeline *P = PIPELINE(d);
  move mv = {.d = d,
             .fwd = P->m.fwd,
             .from_cut = P->stage_of_op,
             .to_cut = to_cut,
             .from_s = d->s,
             .to_s = to->s,
             .from_g = P->st->g,
             .to_g = to->st->g};
  mv.written = sg__calloc(mv.to_g->n_tensors + 1, 1);
  if (mv.written == NULL) return sg__error(SG_ERR_NO_MEMORY, "pipeline re-cut: out of memory");
  sg_status st = SG_OK;
  for (uint32_t t = 0; t < mv.fwd->n_tensors && st == SG_OK; t++) {
    sg_role r = mv.fwd->tensors[t].role;
    if (r == SG_ROLE_PARAMETER || r == SG_ROLE_STATE) st = move_one(&mv, (int32_t)t);
  }
  if (st == SG_OK) st = sg__pp_check_written(to->st, mv.written, "pipeline re-cut");
  *sent = mv.sent;
  sg__free(mv.written);
  sg__free(mv.buf);
  return st;
}

static uint64_t cut_hash(const int *cut, int32_t n, bool go) {
  uint64_t h = sg__fnv1a64(SG__FNV1A64_SEED, cut, (size_t)n * sizeof *cut);
  return sg__fnv1a64(h, &go, sizeof go);
}

static void count_ops(const int *cut, int32_t n, int K, char *out, size_t cap) {
  int per[SG__PP_MAX_STAGES] = {0};
  for (int32_t i = 0; i < n; i++) per[cut[i]]++;
  size_t o = 0;
  for (int k = 0; k < K && o < cap; k++)
    o += (size_t)snprintf(out + o, cap - o, "%s%d", k ? "/" : "", per[k]);
}

static void list_ms(const double *ms, int K, char *out, size_t cap) {
  size_t o = 0;
  out[0] = '\0';
  for (int k = 0; k < K && o < cap; k++)
    o += (size_t)snprintf(out + o, cap - o, "%s%.1f", k ? "/" : "", ms[k]);
}

/* The new stage in place of the old: step counts carried over, inputs given again, the figures. */
static sg_status switch_to(sg_dist *d, const int *cut, sg__pp_built *b, uint64_t sent, int64_t *total) {
  sg__session_set_steps(b->s, sg_session_steps(d->s)); /* dropout masks and SGD's first step read it */
  SG_CHECK(sg__pipeline_install(d, cut, b, PIPELINE(d)->pp->step));
  d->stats.repartitions++;
  d->stats.migrated_bytes += sent;
  *total = (int64_t)sent;
  SG_CHECK(sg__dist_world_allreduce(d, total, 1, SG_I64, SG_REDUCE_SUM));
  d->stats.migrated_bytes_total += (uint64_t)*total;
  d->stats.steps_per_s_before_repartition = d->stats.steps_per_s;
  sg__dist_profile_restart(d, true); /* steps/s and p99 from here on are the new cut's */
  return SG_OK;
}

sg_status sg__pipeline_maybe_replan(sg_dist *d) {
  sg__par_pipeline *P = PIPELINE(d);
  sg__par_model *m = &P->m;
  if (m->step_sums[0] < 0.5f || d->p.repartition_p99_ms < 0) return SG_OK; /* no stage's profile fired */
  if (m->tensor > 1) {
    /* A re-cut would move slices between stages whose own plans split them differently. */
    if (d->rank == 0 && !P->recut_refused)
      SG_INFO("pipeline re-cut not evaluated at step %llu: the stages are tensor groups (tensor %d), which "
              "are not re-cut from the profile",
              (unsigned long long)d->stats.steps, m->tensor);
    P->recut_refused = true;
    sg__dist_profile_restart(d, false);
    return SG_OK;
  }
  int K = m->pipeline;
  int32_t n = sg_graph_num_ops(m->fwd);
  double busy[SG__PP_MAX_STAGES];
  for (int k = 0; k < K; k++) busy[k] = (double)m->step_sums[1 + k] / m->data;
  P->busy_sum = 0;
  P->busy_steps = 0;
  sg__dist_profile_restart(d, false); /* the next evaluation needs a fresh run of samples */
  int *cut = sg__malloc(((size_t)n + 1) * sizeof *cut);
  if (cut == NULL) return sg__error(SG_ERR_NO_MEMORY, "pipeline re-cut: out of memory");
  memcpy(cut, P->stage_of_op, (size_t)n * sizeof *cut); /* what the ranks agree on if the re-cut fails */
  double gain = 1;
  sg_status st = sg__pp_recut(P->cost, n, P->stage_of_op, busy, K, cut, &gain);
  bool go = st == SG_OK && gain >= MIN_GAIN;
  /* Every rank computed from the same sums; a rank that did not (a fault in the reduction) makes all keep
   * the cut rather than build different ones. */
  uint64_t h = cut_hash(cut, n, go);
  int64_t agree[2] = {(int64_t)h, (int64_t)~h};
  sg_status ast = sg__dist_world_allreduce(d, agree, 2, SG_I64, SG_REDUCE_MAX);
  if (ast != SG_OK) {
    sg__free(cut);
    return ast;
  }
  char ms[256];
  list_ms(busy, K, ms, sizeof ms);
  if (st != SG_OK || !go || (uint64_t)agree[0] != ~(uint64_t)agree[1]) {
    if (d->rank == 0)
      SG_INFO("pipeline re-cut evaluated at step %llu: stage compute %s ms per step; %s",
              (unsigned long long)d->stats.steps, ms,
              st != SG_OK ? sg_last_error()
              : go        ? "the ranks disagree on it: kept"
                          : "too little to gain: kept");
    sg_clear_error();
    sg__free(cut);
    return SG_OK;
  }
  sg__pp_built b = {0};
  st = sg__pipeline_split(d, cut, K, &b);
  if (st == SG_OK) st = sg__pipeline_finish_stage(d, &b);
  char why[512] = "";
  if (st != SG_OK) snprintf(why, sizeof why, "%s", sg_last_error());
  int64_t ok = st == SG_OK;
  ast = sg__dist_world_allreduce(d, &ok, 1, SG_I64, SG_REDUCE_MIN);
  if (ast != SG_OK || !ok || st == SG_ERR_NO_MEMORY) {
    sg__pp_built_free(&b);
    sg__free(cut);
    if (ast != SG_OK) return ast;
    if (st == SG_ERR_NO_MEMORY) return sg__error(st, "%s", why);
    if (d->rank == 0 || st != SG_OK)
      fprintf(stderr, "sgrt: rank %d: pipeline re-cut not usable on every rank%s%s: the stages stay\n",
              d->rank, why[0] ? ": " : "", why);
    sg_clear_error();
    return SG_OK;
  }
  /* The old stage is only read: a rank whose migration failed keeps it, and so must every rank. */
  uint64_t sent = 0;
  st = migrate(d, cut, &b, &sent);
  if (st != SG_OK) snprintf(why, sizeof why, "%s", sg_last_error());
  ok = st == SG_OK;
  ast = sg__dist_world_allreduce(d, &ok, 1, SG_I64, SG_REDUCE_MIN);
  if (ast != SG_OK || !ok) {
    sg__pp_built_free(&b);
    sg__free(cut);
    if (ast != SG_OK) return ast;
    if (d->rank == 0 || st != SG_OK)
      fprintf(stderr,
              "sgrt: rank %d: pipeline re-cut abandoned: moving the state failed%s%s: the stages stay\n",
              d->rank, st != SG_OK ? ": " : " on another rank", why);
    sg_clear_error();
    return SG_OK;
  }
  char was[256], now[256];
  count_ops(P->stage_of_op, n, K, was, sizeof was);
  count_ops(cut, n, K, now, sizeof now);
  int64_t moved = 0;
  st = switch_to(d, cut, &b, sent, &moved);
  if (st == SG_OK && d->rank == 0)
    fprintf(
        stderr,
        "sgrt: pipeline re-cut at step %llu from the profile: stage compute %s ms per step, ops per stage "
        "%s -> %s, slowest stage predicted %.2fx faster; %llu bytes of parameters and optimizer state "
        "moved\n",
        (unsigned long long)d->stats.steps, ms, was, now, gain, (unsigned long long)moved);
  sg__pp_built_free(&b);
  sg__free(cut);
  return st;
}
