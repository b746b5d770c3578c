/* The fusion pass (docs/compiler.md "Fusion"): groups chains and trees of
 * elementwise ops into one generated kernel each, so that the values
 * between them never reach memory.
 *
 * Which ops fuse is the op table's business (sg__fuse_has_rule: the
 * SG__OP_ELEMENTWISE kinds with an expression in fuse_rules.c); this pass
 * only decides which neighbours go together. It walks the schedule once: an
 * elementwise op joins the groups of the elementwise producers of its
 * inputs when
 *   - they compute over the same shape (its output's: inputs of other
 *     shapes are read broadcast, through strides),
 *   - all of them run in evaluation passes too, or none does,
 *   - moving every member to the op's position (a group runs at its last
 *     member, the anchor) changes no value: no op in between reads a
 *     member's output or updates in place a tensor a member reads,
 *   - the group stays within the kernel IR's limits.
 * A sum (SG__OP_SUM: reduce_sum, reduce_mean, sum_to) that fuse_rules.c
 * says may end a chain joins the group of the producer of its input when
 * that group computes over the input's shape; it becomes the anchor, the
 * group then computes over its input's shape, and no op joins it after.
 * An op that reads or writes a tensor of the caller's barrier
 * (sg__plan_options.fuse_barrier: what a runtime's hooks touch between ops)
 * joins no group. A group of one op is no group: that op keeps its own kernel
 * -- but an optimizer update with a rule (fuse_updates.c) gets a generated
 * kernel of its own, and so does every op the IR can express that the
 * backend has no kernel for (supports_op false: the CUDA backend runs
 * elementwise ops and updates only as generated kernels), joining or
 * not (fusion off: sg__fuse_params.join false). After memory
 * planning, sg__fuse_kernels turns each group into a kernel of the IR. */
#include <string.h>

#include "compile/plan_internal.h"

#define MAX_MEMBERS 64

typedef struct fuse_ctx {
  const sg_graph *g;
  const sg__plan *p;
  int32_t *pos;         /* per op: position in p->order, or -1 */
  int32_t *grp;         /* per op: its group (index into members), or -1 */
  bool *eval;           /* per op: in p->eval_order */
  uint32_t *cons_start; /* per tensor: its readers among the scheduled ops (CSR) */
  int32_t *cons;
  uint8_t *kept;          /* per tensor: a graph output or input, always in memory */
  const uint8_t *barrier; /* per tensor, or NULL: no op touching one fuses */
  /* Groups while growing: members per group, in schedule order. */
  int32_t (*members)[MAX_MEMBERS];
  int32_t *n_members;
  bool *closed; /* per group: ends in a sum, no op joins it */
  bool *alone;  /* per op: gets a generated kernel even alone */
  uint32_t n_groups;
} fuse_ctx;

static bool same_dims(const sg__tensor *a, const sg__tensor *b) {
  if (a->ndim != b->ndim) return false;
  for (int i = 0; i < a->ndim; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

/* Whether `t` broadcasts to dims `y` (NumPy rules, right-aligned). */
static bool broadcasts_to(const sg__tensor *t, const sg__tensor *y) {
  if (t->ndim > y->ndim) return false;
  for (int i = 0; i < t->ndim; i++) {
    int64_t d = t->dims[t->ndim - 1 - i], e = y->dims[y->ndim - 1 - i];
    if (d != e && d != 1) return false;
  }
  return true;
}

/* The dtypes of the kernel IR. */
static bool ir_dtype(sg_dtype t) { return t == SG_F32 || t == SG_I32 || t == SG_I64 || t == SG_BOOL; }

static bool sums(const fuse_ctx *c, const sg__op *op) {
  sg__kir_sum kind;
  int axis;
  double scale;
  return sg__fuse_sum_rule(c->g, op, &kind, &axis, &scale);
}

/* Whether op k can be a kernel of the IR (alone or with others). */
static bool expressible(const fuse_ctx *c, int32_t k) {
  const sg__op *op = &c->g->ops[k];
  if (c->pos[k] < 0 || op->n_outputs != 1 || sg__op_mutated_inputs(op)) return false;
  if (sums(c, op)) return true;
  if (!sg__fuse_has_rule(op->kind)) return false;
  const sg__tensor *y = &c->g->tensors[op->outputs[0]];
  if (y->ndim > SG__KIR_MAX_DIMS || !ir_dtype(y->dtype)) return false;
  for (int i = 0; i < op->n_inputs; i++) {
    if (op->inputs[i] < 0) return false;
    const sg__tensor *x = &c->g->tensors[op->inputs[i]];
    /* transpose: x's dims permuted (the op checked them), read through permuted strides. */
    if (!ir_dtype(x->dtype) || (op->kind != SG_OP_TRANSPOSE && !broadcasts_to(x, y))) return false;
  }
  return true;
}

/* Whether op k may join others: expressible and touching no barrier tensor. */
static bool fusible(const fuse_ctx *c, int32_t k) {
  const sg__op *op = &c->g->ops[k];
  /* A transpose permutes what it loads from memory; a value computed in a
   * group has no memory to permute: it is a kernel alone. */
  if (op->kind == SG_OP_TRANSPOSE || !expressible(c, k)) return false;
  if (c->barrier == NULL) return true;
  if (c->barrier[op->outputs[0]]) return false;
  for (int i = 0; i < op->n_inputs; i++)
    if (c->barrier[op->inputs[i]]) return false;
  return true;
}

static bool in_set(const int32_t *set, int n, int32_t k) {
  for (int i = 0; i < n; i++)
    if (set[i] == k) return true;
  return false;
}

/* Whether op y reads tensor t. */
static bool reads(const sg__op *y, int32_t t) {
  for (int i = 0; i < y->n_inputs; i++)
    if (y->inputs[i] == t) return true;
  return false;
}

/* Moving member m to position `at` is safe when no op between, outside the
 * group `set`, reads m's output or updates in place a tensor m reads. */
static bool can_defer(const fuse_ctx *c, int32_t m, int32_t at, const int32_t *set, int n) {
  const sg_graph *g = c->g;
  const sg__op *op = &g->ops[m];
  for (int32_t x = c->pos[m] + 1; x < at; x++) {
    int32_t k = c->p->order[x];
    if (in_set(set, n, k)) continue;
    const sg__op *y = &g->ops[k];
    if (reads(y, op->outputs[0])) return false;
    uint32_t mut = sg__op_mutated_inputs(y);
    for (int i = 0; i < y->n_inputs && i < 32 && mut; i++)
      if ((mut >> i & 1u) && y->inputs[i] >= 0 && reads(op, y->inputs[i])) return false;
  }
  return true;
}

/* The operands of a would-be group `set`: inputs from outside, outputs read
 * outside (or kept). */
static void count_io(const fuse_ctx *c, const int32_t *set, int n, int *n_in, int *n_out) {
  const sg_graph *g = c->g;
  int32_t seen[SG__KIR_MAX_INPUTS + 1];
  int ni = 0, no = 0;
  for (int j = 0; j < n; j++) {
    const sg__op *op = &g->ops[set[j]];
    for (int i = 0; i < op->n_inputs; i++) {
      if (op->inputs[i] < 0) continue; /* an absent optional input */
      int32_t t = op->inputs[i], prod = g->tensors[t].producer;
      if (prod >= 0 && in_set(set, n, prod)) continue;
      bool dup = false;
      for (int s = 0; s < ni && s <= SG__KIR_MAX_INPUTS && !dup; s++) dup = seen[s] == t;
      if (!dup && ni <= SG__KIR_MAX_INPUTS) seen[ni] = t;
      if (!dup) ni++;
    }
    if (op->n_outputs == 0) continue; /* an update: its outputs are its inputs, in place */
    int32_t t = op->outputs[0];
    bool outside = c->kept[t];
    for (uint32_t r = c->cons_start[t]; r < c->cons_start[t + 1] && !outside; r++)
      outside = !in_set(set, n, c->cons[r]);
    no += outside;
  }
  *n_in = ni;
  *n_out = no;
}

/* Tries group `cand` joined with `cur` (members of both, cur's last is the
 * new anchor). On success cur holds the union. */
static bool try_join(const fuse_ctx *c, int32_t *cur, int *n_cur, const int32_t *cand, int n_cand) {
  int32_t u[2 * MAX_MEMBERS];
  int n = 0;
  if (*n_cur + n_cand > MAX_MEMBERS) return false;
  /* Merge by schedule position (both lists are sorted). */
  int i = 0, j = 0;
  while (i < *n_cur || j < n_cand) {
    bool take_cur = j >= n_cand || (i < *n_cur && c->pos[cur[i]] < c->pos[cand[j]]);
    u[n++] = take_cur ? cur[i++] : cand[j++];
  }
  int32_t anchor = u[n - 1], at = c->pos[anchor];
  for (int m = 0; m < n - 1; m++)
    if (!can_defer(c, u[m], at, u, n)) return false;
  int ni, no;
  count_io(c, u, n, &ni, &no);
  if (ni > SG__KIR_MAX_INPUTS || no > SG__KIR_MAX_OUTPUTS || no < 1) return false;
  memcpy(cur, u, (size_t)n * sizeof *u);
  *n_cur = n;
  return true;
}

/* A group that gets a kernel: two or more ops, or one op that gets a
 * generated kernel of its own (an update, an op the backend has no kernel
 * for). */
static bool kept(const fuse_ctx *c, int32_t gi) {
  return c->n_members[gi] >= 2 || (c->n_members[gi] == 1 && c->alone[c->members[gi][0]]);
}

static void grow(fuse_ctx *c, int32_t k) {
  const sg_graph *g = c->g;
  const sg__op *op = &g->ops[k];
  /* A sum joins over its input's shape, and only its input's producer. */
  bool sum = sums(c, op);
  const sg__tensor *y = &g->tensors[sum ? op->inputs[0] : op->outputs[0]];
  int32_t cur[MAX_MEMBERS] = {k};
  int n_cur = 1;
  int32_t joined[8];
  int n_joined = 0;
  for (int i = 0; i < op->n_inputs && n_joined < 8; i++) {
    int32_t prod = g->tensors[op->inputs[i]].producer;
    if (prod < 0 || c->grp[prod] < 0) continue;
    int32_t gi = c->grp[prod];
    if (in_set(joined, n_joined, gi) || c->closed[gi] || (sum && i > 0)) continue;
    const sg__tensor *py = &g->tensors[g->ops[prod].outputs[0]];
    if (!same_dims(py, y) || c->eval[prod] != c->eval[k]) continue;
    if (try_join(c, cur, &n_cur, c->members[gi], c->n_members[gi])) joined[n_joined++] = gi;
  }
  /* The new group takes the first joined group's slot; the others empty. */
  int32_t gi = n_joined > 0 ? joined[0] : (int32_t)c->n_groups++;
  for (int j = 1; j < n_joined; j++) c->n_members[joined[j]] = 0;
  memcpy(c->members[gi], cur, (size_t)n_cur * sizeof *cur);
  c->n_members[gi] = n_cur;
  c->closed[gi] = sum;
  for (int m = 0; m < n_cur; m++) c->grp[cur[m]] = gi;
}

sg_status sg__fuse_plan(const sg_graph *g, const sg__fuse_params *fp, sg__plan *p) {
  uint32_t no = g->n_ops ? g->n_ops : 1, nt = g->n_tensors ? g->n_tensors : 1;
  fuse_ctx c = {.g = g, .p = p, .barrier = fp->barrier};
  size_t n_edges = 0;
  for (uint32_t k = 0; k < g->n_ops; k++) n_edges += (size_t)g->ops[k].n_inputs;
  c.pos = sg__malloc(no * sizeof(int32_t));
  c.grp = sg__malloc(no * sizeof(int32_t));
  c.eval = sg__calloc(no, sizeof(bool));
  c.cons_start = sg__calloc((size_t)nt + 1, sizeof(uint32_t));
  c.cons = sg__malloc((n_edges ? n_edges : 1) * sizeof(int32_t));
  c.kept = sg__calloc(nt, 1);
  c.members = sg__malloc(no * sizeof *c.members);
  c.n_members = sg__calloc(no, sizeof(int32_t));
  c.closed = sg__calloc(no, sizeof(bool));
  c.alone = sg__calloc(no, sizeof(bool));
  sg_status st = SG_OK;
  if (!c.pos || !c.grp || !c.eval || !c.cons_start || !c.cons || !c.kept || !c.members || !c.n_members ||
      !c.closed || !c.alone) {
    st = sg__error(SG_ERR_NO_MEMORY, "compile: out of memory fusing %u ops", g->n_ops);
    goto out;
  }
  for (uint32_t k = 0; k < g->n_ops; k++) c.pos[k] = c.grp[k] = -1;
  for (uint32_t i = 0; i < p->n_order; i++) c.pos[p->order[i]] = (int32_t)i;
  for (uint32_t i = 0; i < p->n_eval; i++) c.eval[p->eval_order[i]] = true;
  for (uint32_t i = 0; i < g->n_outputs; i++) c.kept[g->outputs[i]] = 1;
  for (uint32_t i = 0; i < g->n_inputs; i++) c.kept[g->inputs[i]] = 1;
  for (uint32_t i = 0; i < p->n_order; i++) {
    const sg__op *op = &g->ops[p->order[i]];
    for (int j = 0; j < op->n_inputs; j++)
      if (op->inputs[j] >= 0) c.cons_start[op->inputs[j] + 1]++;
  }
  for (uint32_t t = 0; t < g->n_tensors; t++) c.cons_start[t + 1] += c.cons_start[t];
  for (uint32_t i = 0; i < p->n_order; i++) {
    const sg__op *op = &g->ops[p->order[i]];
    for (int j = 0; j < op->n_inputs; j++)
      if (op->inputs[j] >= 0) c.cons[c.cons_start[op->inputs[j]]++] = p->order[i];
  }
  for (uint32_t t = g->n_tensors; t > 0; t--) c.cons_start[t] = c.cons_start[t - 1];
  c.cons_start[0] = 0;

  /* Ops that get a generated kernel even alone: with joining, each
   * optimizer update with a rule (fuse_updates.c); always, every op the
   * backend has no kernel of its own for (the CUDA backend's elementwise
   * ops) that the IR can express. Alone, such an op runs at its own
   * position, so the barrier does not concern it. */
  for (uint32_t i = 0; i < p->n_order; i++) {
    int32_t k = p->order[i];
    const sg__op *op = &g->ops[k];
    bool update = sg__fuse_update_rule(g, op);
    bool own = fp->be == NULL || fp->be->supports_op(fp->be_state, op->kind);
    c.alone[k] = (update && (fp->join || !own)) || (!own && expressible(&c, k));
  }
  if (fp->join)
    for (uint32_t i = 0; i < p->n_order; i++)
      if (fusible(&c, p->order[i])) grow(&c, p->order[i]);
  for (uint32_t i = 0; i < p->n_order; i++) {
    int32_t k = p->order[i];
    if (c.grp[k] >= 0 || !c.alone[k]) continue;
    int32_t gi = (int32_t)c.n_groups++;
    c.members[gi][0] = k;
    c.n_members[gi] = 1;
    c.closed[gi] = true;
    c.grp[k] = gi;
  }

  /* Keep the groups of two or more ops and the updates, in anchor order. */
  uint32_t n_groups = 0, n_fused = 0, n_io = 0;
  for (uint32_t gi = 0; gi < c.n_groups; gi++)
    if (kept(&c, (int32_t)gi)) {
      int ni, nout;
      count_io(&c, c.members[gi], c.n_members[gi], &ni, &nout);
      n_groups++;
      n_fused += (uint32_t)c.n_members[gi];
      n_io += (uint32_t)(ni + nout);
    }
  p->group_of = sg__malloc(no * sizeof(int32_t));
  p->groups = sg__calloc(n_groups ? n_groups : 1, sizeof(sg__fused_group));
  p->fused_ops = sg__malloc((n_fused ? n_fused : 1) * sizeof(int32_t));
  p->fused_io = sg__malloc((n_io ? n_io : 1) * sizeof(int32_t));
  p->fused_over = sg__malloc(n_io ? n_io : 1);
  if (!p->group_of || !p->groups || !p->fused_ops || !p->fused_io || !p->fused_over) {
    st = sg__error(SG_ERR_NO_MEMORY, "compile: out of memory fusing %u ops", g->n_ops);
    goto out;
  }
  memset(p->fused_over, -1, n_io ? n_io : 1);
  for (uint32_t k = 0; k < g->n_ops; k++) p->group_of[k] = -1;
  /* Groups in the order of their anchors, so that plans are deterministic. */
  for (uint32_t i = 0; i < p->n_order; i++) {
    int32_t k = p->order[i], gi = c.grp[k];
    if (gi < 0 || !kept(&c, gi) || c.members[gi][c.n_members[gi] - 1] != k) continue;
    const int32_t *mem = c.members[gi];
    int n = c.n_members[gi];
    sg__fused_group *gr = &p->groups[p->n_groups];
    *gr = (sg__fused_group){
        .anchor = k, .first_op = p->n_fused_ops, .n_ops = (uint32_t)n, .first_io = 0, .eval = c.eval[k]};
    for (int m = 0; m < n; m++) {
      p->fused_ops[p->n_fused_ops++] = mem[m];
      p->group_of[mem[m]] = (int32_t)p->n_groups;
    }
    p->n_groups++;
  }
  /* Operands: inputs in first-read order, then outputs in member order. */
  uint32_t at = 0;
  for (uint32_t gi = 0; gi < p->n_groups; gi++) {
    sg__fused_group *gr = &p->groups[gi];
    const int32_t *mem = p->fused_ops + gr->first_op;
    int n = (int)gr->n_ops;
    gr->first_io = at;
    for (int j = 0; j < n; j++) {
      const sg__op *op = &g->ops[mem[j]];
      for (int i = 0; i < op->n_inputs; i++) {
        if (op->inputs[i] < 0) continue;
        int32_t t = op->inputs[i], prod = g->tensors[t].producer;
        if ((prod >= 0 && in_set(mem, n, prod)) || in_set(p->fused_io + gr->first_io, (int)gr->n_in, t))
          continue;
        p->fused_io[at++] = t;
        gr->n_in++;
      }
    }
    for (int j = 0; j < n; j++) {
      if (g->ops[mem[j]].n_outputs == 0) continue;
      int32_t t = g->ops[mem[j]].outputs[0];
      bool outside = c.kept[t];
      for (uint32_t r = c.cons_start[t]; r < c.cons_start[t + 1] && !outside; r++)
        outside = !in_set(mem, n, c.cons[r]);
      if (!outside) continue;
      p->fused_io[at++] = t;
      gr->n_out++;
    }
  }
  /* Only anchors stay in the schedules. */
  uint32_t w = 0;
  for (uint32_t i = 0; i < p->n_order; i++) {
    int32_t k = p->order[i], gi = p->group_of[k];
    if (gi < 0 || p->groups[gi].anchor == k) p->order[w++] = k;
  }
  p->n_order = w;
  w = 0;
  for (uint32_t i = 0; i < p->n_eval; i++) {
    int32_t k = p->eval_order[i], gi = p->group_of[k];
    if (gi < 0 || p->groups[gi].anchor == k) p->eval_order[w++] = k;
  }
  p->n_eval = w;
out:
  sg__free(c.pos);
  sg__free(c.grp);
  sg__free(c.eval);
  sg__free(c.cons_start);
  sg__free(c.cons);
  sg__free(c.kept);
  sg__free(c.members);
  sg__free(c.n_members);
  sg__free(c.closed);
  sg__free(c.alone);
  return st;
}

void sg__plan_io(const sg__plan *p, const sg_graph *g, int32_t k, const int32_t **in, int *n_in,
                 const int32_t **out, int *n_out) {
  int32_t gi = p->group_of ? p->group_of[k] : -1;
  if (gi >= 0 && p->groups[gi].anchor == k) {
    const sg__fused_group *gr = &p->groups[gi];
    *in = p->fused_io + gr->first_io;
    *n_in = (int)gr->n_in;
    *out = p->fused_io + gr->first_io + gr->n_in;
    *n_out = (int)gr->n_out;
    return;
  }
  *in = g->ops[k].inputs;
  *n_in = g->ops[k].n_inputs;
  *out = g->ops[k].outputs;
  *n_out = g->ops[k].n_outputs;
}
