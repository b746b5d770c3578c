/* ONNX Einsum (torch.einsum), lowered to sgrt's own ops: no einsum kind,
 * so autodiff, fusion and every backend already know what it becomes.
 *
 * Each operand first loses what makes it special:
 *   a label twice in it (a diagonal, "bii->bi"; a trace, "ii->"): the
 *     operand times a constant identity mask over the two dims, summed over
 *     the second (exact: every other term is a product with 0);
 *   a dim of 1 where another operand has the label's size (broadcasting, as
 *     torch.einsum and NumPy allow): the dim is reshaped away, and the label
 *     left to the operands that have it (the product with a broadcast 1-dim
 *     is the product without it).
 * One operand: reduce_sum over the labels the output lacks, then a
 * transpose into the output's order ("ij->ji", "bij->bj").
 * Two operands: each label is
 *   batch     in both inputs and the output;
 *   contract  in both inputs, not the output (summed by the product);
 *   free      in one input and the output;
 *   summed    in one input only, not the output (reduce_sum first).
 * A is permuted to [batch, freeA, contract] and B to [batch, contract,
 * freeB], reshaped to [PB, MA, K] and [PB, K, NB] (2-D without batch
 * labels), multiplied by one matmul, and the result is reshaped to [batch...,
 * freeA..., freeB...] and permuted into the output's order. Permutations
 * and reshapes that change nothing are left out, so "bhid,bhjd->bhij" is a
 * transpose of B, two reshapes (views) and a matmul.
 * More operands are contracted left to right, two at a time, each product
 * keeping the labels that the output or a later operand has (as
 * torch.einsum does without opt_einsum).
 *
 * The ellipsis "..." stands for the leading dims an operand has beyond its
 * letters, aligned from the right as NumPy broadcasting aligns them; its
 * dims behave as labels of their own, summed when an explicit output leaves
 * the ellipsis out (as torch.einsum sums them). Equations that torch.einsum
 * rejects are SG_ERR_ATTRIBUTE (a label twice in the output, an output
 * label in no input, a bad character); dims of one label that differ and
 * are not 1 are SG_ERR_SHAPE; both name the node and the equation. */
#include <stdio.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* Longest equation read (PyTorch writes a few dozen characters). */
#define EQ_CAP 256
/* Most operands contracted (torch.einsum calls write a handful). */
#define EINSUM_MAX_IN 16
/* Label codes: letters are their ASCII code; ellipsis dim k (of the widest
 * operand's E, from the left) is 1 + k, so ellipsis dims sort first. */
#define LABELS 128

/* The labels of an operand or the output (at most SG_MAX_DIMS), or of a set of labels to keep (any
 * number). */
typedef struct term {
  int n;
  int lab[LABELS];
} term;

typedef struct einsum {
  ox_ctx *c;
  const char *eq;
  int n_in;
  term in[EINSUM_MAX_IN], out;
  int64_t size[LABELS]; /* dim of each label, 0 when unseen */
} einsum;

static sg_status refuse(einsum *e, sg_status st, const char *why) {
  return sg__ox_node_error(e->c, st, "equation '%s': %s", e->eq, why);
}

/* A label for messages: its letter, or "...[k]" for ellipsis dim k. */
static const char *label_text(int lab, char buf[16]) {
  if (lab > SG_MAX_DIMS) snprintf(buf, 16, "%c", (char)lab);
  else snprintf(buf, 16, "...[%d]", (lab - 1) & 7);
  return buf;
}

/* One term of the equation, s[0..len): letters and at most one "...". Its
 * letters go to t (ellipsis dims not yet: *ell receives the position of
 * "..." among the letters, or -1). */
static sg_status parse_term(einsum *e, const char *s, size_t len, term *t, int *ell, const char *what) {
  char msg[128];
  t->n = 0;
  *ell = -1;
  for (size_t i = 0; i < len; i++) {
    if (s[i] == '.') {
      if (*ell >= 0 || i + 2 >= len || s[i + 1] != '.' || s[i + 2] != '.') {
        snprintf(msg, sizeof msg, "%s has a '.' that is not part of one \"...\"", what);
        return refuse(e, SG_ERR_ATTRIBUTE, msg);
      }
      *ell = t->n;
      i += 2;
      continue;
    }
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z'))) {
      snprintf(msg, sizeof msg, "%s has '%c', which is not a letter", what, s[i]);
      return refuse(e, SG_ERR_ATTRIBUTE, msg);
    }
    if (t->n == SG_MAX_DIMS) {
      snprintf(msg, sizeof msg, "%s has more than %d labels", what, SG_MAX_DIMS);
      return refuse(e, SG_ERR_UNSUPPORTED, msg);
    }
    t->lab[t->n++] = s[i];
  }
  return SG_OK;
}

/* Inserts `count` ellipsis labels first..first+count-1 at position at. */
static sg_status insert_ellipsis(einsum *e, term *t, int at, int first, int count, const char *what) {
  if (t->n + count > SG_MAX_DIMS) {
    char msg[128];
    snprintf(msg, sizeof msg, "%s has more than %d dims", what, SG_MAX_DIMS);
    return refuse(e, SG_ERR_UNSUPPORTED, msg);
  }
  memmove(t->lab + at + count, t->lab + at, sizeof(int) * (size_t)(t->n - at));
  for (int k = 0; k < count; k++) t->lab[at + k] = first + k;
  t->n += count;
  return SG_OK;
}

static bool has(const term *t, int lab) {
  for (int i = 0; i < t->n; i++)
    if (t->lab[i] == lab) return true;
  return false;
}

static sg_status parse(einsum *e, const int *ranks) {
  const char *eq = e->eq, *arrow = strstr(eq, "->");
  size_t lhs_len = arrow ? (size_t)(arrow - eq) : strlen(eq);
  int ells[EINSUM_MAX_IN], widest = 0;
  const char *p = eq;
  char what[32], msg[192];
  for (int i = 0; i < e->n_in; i++) {
    const char *comma = memchr(p, ',', lhs_len - (size_t)(p - eq));
    if ((comma != NULL) != (i + 1 < e->n_in)) {
      snprintf(msg, sizeof msg, "its terms do not match the node's %d inputs", e->n_in);
      return refuse(e, SG_ERR_ARITY, msg);
    }
    size_t len = comma ? (size_t)(comma - p) : lhs_len - (size_t)(p - eq);
    snprintf(what, sizeof what, "input %d", i);
    SG_CHECK(parse_term(e, p, len, &e->in[i], &ells[i], what));
    int extra = ranks[i] - e->in[i].n;
    if (extra < 0 || (extra > 0 && ells[i] < 0)) {
      snprintf(msg, sizeof msg, "input %d has rank %d; its term names %d dims%s", i, ranks[i], e->in[i].n,
               ells[i] >= 0 ? " and an ellipsis" : "");
      return refuse(e, SG_ERR_SHAPE, msg);
    }
    if (ells[i] >= 0 && extra > widest) widest = extra;
    p += len + 1;
  }
  /* Ellipsis dims aligned from the right: an operand with fewer takes the
   * last labels of the widest. */
  for (int i = 0; i < e->n_in; i++)
    if (ells[i] >= 0) {
      int extra = ranks[i] - e->in[i].n;
      snprintf(what, sizeof what, "input %d", i);
      SG_CHECK(insert_ellipsis(e, &e->in[i], ells[i], 1 + widest - extra, extra, what));
    }
  if (arrow) {
    int ell;
    const char *o = arrow + 2;
    if (strstr(o, "->")) return refuse(e, SG_ERR_ATTRIBUTE, "it has two \"->\"");
    SG_CHECK(parse_term(e, o, strlen(o), &e->out, &ell, "the output"));
    if (ell >= 0) SG_CHECK(insert_ellipsis(e, &e->out, ell, 1, widest, "the output"));
    /* else the ellipsis dims are summed, as labels the output lacks */
  } else { /* implicit output: the ellipsis, then the letters used once, sorted */
    e->out.n = 0;
    for (int k = 0; k < widest; k++) e->out.lab[e->out.n++] = 1 + k;
    for (int lab = 'A'; lab <= 'z'; lab++) {
      int count = 0;
      for (int i = 0; i < e->n_in; i++)
        for (int d = 0; d < e->in[i].n; d++) count += e->in[i].lab[d] == lab;
      if (count != 1) continue;
      if (e->out.n == SG_MAX_DIMS) return refuse(e, SG_ERR_UNSUPPORTED, "the output has more than 8 dims");
      e->out.lab[e->out.n++] = lab;
    }
  }
  return SG_OK;
}

/* Sizes of every label: a dim of 1 gives way to another operand's size (broadcasting); other sizes
 * that differ are refused, within an operand too (a diagonal's two dims). */
static sg_status check_labels(einsum *e, int64_t dims[][SG_MAX_DIMS]) {
  char msg[192], lb[16];
  int seen_in[LABELS];
  for (int i = 0; i < e->n_in; i++)
    for (int d = 0; d < e->in[i].n; d++) {
      int lab = e->in[i].lab[d];
      int64_t n = dims[i][d];
      if (e->size[lab] != 0 && e->size[lab] != n && e->size[lab] != 1 && n != 1) {
        snprintf(msg, sizeof msg, "label '%s' has dim %lld in input %d and %lld in input %d",
                 label_text(lab, lb), (long long)e->size[lab], seen_in[lab], (long long)n, i);
        return refuse(e, SG_ERR_SHAPE, msg);
      }
      if (e->size[lab] == 0 || e->size[lab] == 1) {
        e->size[lab] = n;
        seen_in[lab] = i;
      }
    }
  for (int d = 0; d < e->out.n; d++) {
    int lab = e->out.lab[d];
    for (int d2 = 0; d2 < d; d2++)
      if (e->out.lab[d2] == lab) {
        snprintf(msg, sizeof msg, "label '%s' appears twice in the output", label_text(lab, lb));
        return refuse(e, SG_ERR_ATTRIBUTE, msg);
      }
    if (e->size[lab] == 0) {
      snprintf(msg, sizeof msg, "output label '%s' is in no input", label_text(lab, lb));
      return refuse(e, SG_ERR_ATTRIBUTE, msg);
    }
  }
  return SG_OK;
}

/* ---- building ---------------------------------------------------------------- */

/* reduce_sum of t (labels *tm) over the labels not in `keep1` nor `keep2`
 * (may be NULL); *tm loses them. */
static sg_tensor sum_away(einsum *e, sg_tensor t, term *tm, const term *keep1, const term *keep2) {
  int64_t axes[SG_MAX_DIMS];
  int na = 0, n = 0;
  for (int d = 0; d < tm->n; d++) {
    int lab = tm->lab[d];
    if (has(keep1, lab) || (keep2 && has(keep2, lab))) tm->lab[n++] = lab;
    else axes[na++] = d;
  }
  if (na == 0) return t;
  tm->n = n;
  return sg_reduce_sum(e->c->g, t, na, axes, 0);
}

/* t (labels *tm) permuted into the order `want` (the same labels). */
static sg_tensor permute(einsum *e, sg_tensor t, term *tm, const term *want) {
  int64_t perm[SG_MAX_DIMS];
  bool identity = true;
  for (int d = 0; d < want->n; d++) {
    for (int s = 0; s < tm->n; s++)
      if (tm->lab[s] == want->lab[d]) perm[d] = s;
    identity &= perm[d] == d;
  }
  *tm = *want;
  return identity ? t : sg_transpose(e->c->g, t, want->n, perm);
}

/* t reshaped to dims, or t itself when it has them. */
static sg_tensor reshape(einsum *e, sg_tensor t, int ndim, const int64_t *dims) {
  sg_tensor_info ti;
  if (t.id < 0 || sg_graph_tensor_info(e->c->g, t, &ti) != SG_OK) return t;
  bool same = ti.ndim == ndim;
  for (int d = 0; same && d < ndim; d++) same = ti.dims[d] == dims[d];
  return same ? t : sg_reshape(e->c->g, t, ndim, dims);
}

static int64_t size_of(const einsum *e, const int *labs, int n) {
  int64_t p = 1;
  for (int i = 0; i < n; i++) p *= e->size[labs[i]];
  return p;
}

/* a (labels *ta) times b (labels tb), keeping the labels of `keep` that either has and summing the
 * others; *ta receives the result's labels: [batch..., freeA..., freeB...] in keep's order. */
static sg_status contract(einsum *e, sg_tensor *y, term *ta, sg_tensor b, term tb, const term *keep) {
  sg_tensor a = *y;
  a = sum_away(e, a, ta, &tb, keep);
  b = sum_away(e, b, &tb, ta, keep);
  term batch = {0}, fa = {0}, fb = {0}, k = {0};
  for (int d = 0; d < keep->n; d++) {
    int lab = keep->lab[d];
    term *to = has(ta, lab) ? (has(&tb, lab) ? &batch : &fa) : has(&tb, lab) ? &fb : NULL;
    if (to != NULL) to->lab[to->n++] = lab;
  }
  for (int d = 0; d < ta->n; d++)
    if (has(&tb, ta->lab[d]) && !has(keep, ta->lab[d])) k.lab[k.n++] = ta->lab[d];
  term wa = batch, wb = batch;
  memcpy(wa.lab + wa.n, fa.lab, sizeof(int) * (size_t)fa.n), wa.n += fa.n;
  memcpy(wa.lab + wa.n, k.lab, sizeof(int) * (size_t)k.n), wa.n += k.n;
  memcpy(wb.lab + wb.n, k.lab, sizeof(int) * (size_t)k.n), wb.n += k.n;
  memcpy(wb.lab + wb.n, fb.lab, sizeof(int) * (size_t)fb.n), wb.n += fb.n;
  a = permute(e, a, ta, &wa);
  b = permute(e, b, &tb, &wb);
  int64_t PB = size_of(e, batch.lab, batch.n), MA = size_of(e, fa.lab, fa.n), K = size_of(e, k.lab, k.n),
          NB = size_of(e, fb.lab, fb.n);
  int r = batch.n > 0 ? 3 : 2;
  int64_t da[3] = {PB, MA, K}, db[3] = {PB, K, NB};
  term ty = batch;
  memcpy(ty.lab + ty.n, fa.lab, sizeof(int) * (size_t)fa.n), ty.n += fa.n;
  memcpy(ty.lab + ty.n, fb.lab, sizeof(int) * (size_t)fb.n), ty.n += fb.n;
  if (ty.n > SG_MAX_DIMS) {
    char msg[128];
    snprintf(msg, sizeof msg, "a product of two operands has %d dims before the next one; at most %d", ty.n,
             SG_MAX_DIMS);
    return refuse(e, SG_ERR_UNSUPPORTED, msg);
  }
  int64_t dy[SG_MAX_DIMS];
  for (int d = 0; d < ty.n; d++) dy[d] = e->size[ty.lab[d]];
  *ta = ty;
  *y = reshape(e, sg_matmul(e->c->g, reshape(e, a, r, da + 3 - r), reshape(e, b, r, db + 3 - r)), ty.n, dy);
  return SG_OK;
}

/* The labels after operand i: the output's, then those of the operands after i. */
static void keep_after(const einsum *e, int i, term *keep) {
  *keep = e->out;
  for (int j = i + 1; j < e->n_in; j++)
    for (int d = 0; d < e->in[j].n; d++)
      if (!has(keep, e->in[j].lab[d])) keep->lab[keep->n++] = e->in[j].lab[d]; /* < LABELS distinct */
}

/* x (labels *t, dims from the graph) with the diagonal taken of every label it has twice, and the
 * dims of 1 that broadcast against another operand reshaped away. */
static sg_status normalize_operand(einsum *e, sg_tensor *x, term *t, const char *out_name) {
  sg_graph *g = e->c->g;
  sg_tensor_info ti;
  for (;;) {
    int p = -1, q = -1;
    for (int d = 0; d < t->n && q < 0; d++)
      for (int d2 = 0; d2 < d && q < 0; d2++)
        if (t->lab[d2] == t->lab[d]) p = d2, q = d;
    if (q < 0) break;
    SG_CHECK(sg_graph_tensor_info(g, *x, &ti));
    int64_t n = ti.dims[p];
    if (ti.dims[q] != n) {
      char msg[160], lb[16];
      snprintf(msg, sizeof msg,
               "label '%s' has dims %lld and %lld in one input (a diagonal needs them equal)",
               label_text(t->lab[p], lb), (long long)n, (long long)ti.dims[q]);
      return refuse(e, SG_ERR_SHAPE, msg);
    }
    /* The mask is n x n: within the import's limit on a constant it makes (OX_FOLD_MAX_NUMEL). */
    if (n > (int64_t)1 << 10) return refuse(e, SG_ERR_UNSUPPORTED, "a diagonal over more than 1024 entries");
    /* The identity mask, [n at p, n at q, 1 elsewhere]: x * mask summed over q is the diagonal. */
    int64_t mdims[SG_MAX_DIMS];
    for (int d = 0; d < t->n; d++) mdims[d] = d == p || d == q ? n : 1;
    float *eye;
    SG_CHECK(sg__ox_fold_alloc(e->c, n * n, sizeof(float), (void **)&eye));
    for (int64_t i = 0; i < n * n; i++) eye[i] = i % (n + 1) == 0 ? 1.0f : 0.0f;
    char name[300];
    snprintf(name, sizeof name, "%.256s.diagonal_mask", out_name);
    const char *tmp = sg__ox_tmp_name(e->c, name);
    if (tmp == NULL) return sg__error(SG_ERR_NO_MEMORY, "ONNX import: out of memory");
    sg_tensor mask = sg_graph_add_tensor(g, tmp, SG_F32, SG_ROLE_CONSTANT, t->n, mdims, eye);
    if (mask.id >= 0) SG_CHECK(sg__ox_want_name(e->c, mask.id, name, 1));
    int64_t axis = q;
    *x = sg_reduce_sum(g, sg_mul(g, *x, mask), 1, &axis, 0);
    if (x->id < 0) return sg__ox_built(e->c, *x); /* the graph's error, with the node */
    memmove(t->lab + q, t->lab + q + 1, sizeof(int) * (size_t)(t->n - q - 1));
    t->n--;
  }
  SG_CHECK(sg_graph_tensor_info(g, *x, &ti));
  int64_t dims[SG_MAX_DIMS];
  int n = 0;
  for (int d = 0; d < t->n; d++)
    if (ti.dims[d] == e->size[t->lab[d]]) t->lab[n] = t->lab[d], dims[n++] = ti.dims[d];
  if (n < t->n) {
    t->n = n;
    *x = sg_reshape(g, *x, n, dims);
  }
  return SG_OK;
}

static sg_status cv_einsum(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known[] = {"equation", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  char eq[EQ_CAP], raw[EQ_CAP];
  const Onnx__AttributeProto *at;
  SG_CHECK(sg__ox_attr_typed(c, "equation", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING, &at));
  if (at == NULL) return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "attribute 'equation' is missing");
  if (at->s.len >= EQ_CAP)
    return sg__ox_node_error(c, SG_ERR_UNSUPPORTED, "equation of %zu characters; at most %d are read",
                             at->s.len, EQ_CAP - 1);
  SG_CHECK(sg__ox_attr_string(c, "equation", "", raw, sizeof raw));
  size_t len = 0;
  for (const char *s = raw; *s; s++)
    if (*s != ' ') eq[len++] = *s;
  eq[len] = '\0';
  einsum e = {.c = c, .eq = eq, .n_in = (int)n->n_input};
  if (e.n_in > EINSUM_MAX_IN) {
    char msg[96];
    snprintf(msg, sizeof msg, "Einsum of %d operands; at most %d are supported", e.n_in, EINSUM_MAX_IN);
    return refuse(&e, SG_ERR_UNSUPPORTED, msg);
  }
  ox_value *v[EINSUM_MAX_IN];
  int ranks[EINSUM_MAX_IN];
  int64_t dims[EINSUM_MAX_IN][SG_MAX_DIMS];
  for (int i = 0; i < e.n_in; i++) {
    v[i] = sg__ox_input(c, n, i);
    if (v[i] == NULL) return sg__ox_node_error(c, SG_ERR_ARITY, "input %d is missing", i);
    SG_CHECK(sg__ox_shape(c, v[i], &ranks[i], dims[i]));
  }
  SG_CHECK(parse(&e, ranks));
  SG_CHECK(check_labels(&e, dims));
  const char *out_name = sg__ox_has_output(c, 0) ? n->output[0] : "einsum";
  sg_tensor x[EINSUM_MAX_IN], first = SG_NO_TENSOR;
  for (int i = 0; i < e.n_in; i++) {
    SG_CHECK(sg__ox_tensor(c, v[i], &x[i]));
    if (i == 0) first = x[0];
    SG_CHECK(normalize_operand(&e, &x[i], &e.in[i], out_name));
  }
  term t = e.in[0];
  sg_tensor y = x[0];
  if (e.n_in == 1) y = sum_away(&e, y, &t, &e.out, NULL);
  for (int i = 1; i < e.n_in; i++) {
    term keep;
    keep_after(&e, i, &keep);
    SG_CHECK(contract(&e, &y, &t, x[i], e.in[i], &keep));
  }
  y = permute(&e, y, &t, &e.out);
  if (y.id == first.id) return sg__ox_set_alias(c, 0, v[0]); /* "bij->bij" */
  SG_CHECK(sg__ox_built(c, y));
  return sg__ox_set_tensor(c, 0, y);
}

const ox_op sg__ox_einsum_ops[] = {
    {"Einsum", cv_einsum, 1, SG__MAX_OP_IO, 1, 1},
};
const int sg__ox_n_einsum_ops = (int)(sizeof sg__ox_einsum_ops / sizeof *sg__ox_einsum_ops);
