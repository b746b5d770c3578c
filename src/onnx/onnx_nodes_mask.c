/* Converters of Equal, the other comparisons, Not, Range, Trilu, Expand and
 * Tile: the ops exporters write to build attention masks (`bias[:, :, :T,
 * :T] == 0`, torch.arange(T), torch.tril(torch.ones(T, T)),
 * mask.expand(...)). sgrt has no comparison or logic ops, so these are
 * folded at import for import-time constants: a mask buffer is one
 * (onnx_load.c imports a float initializer that only such ops read as a
 * constant). Equal of integers and bools (`ids == pad_id`), the order
 * comparisons and Not of bools are also built at run time from sub, sign,
 * relu and cast; Expand and Tile have a
 * run-time form with the broadcast_to op. docs/onnx.md has the mapping
 * table. */
#include <math.h>
#include <string.h>

#include "onnx/onnx_internal.h"

static const char *const no_attrs[] = {NULL};

/* ---- Equal, Not ---------------------------------------------------------------- */

/* Not of a bool tensor at run time: 1 - x in f32 (0 and 1, exact), cast to bool. */
static sg_status not_tensor(ox_ctx *c, sg_tensor x, sg_tensor *y) {
  sg_tensor f = sg_cast(c->g, x, SG_F32);
  SG_CHECK(sg__ox_built(c, f));
  f = sg_add_scalar(c->g, sg_neg(c->g, f), 1.0);
  SG_CHECK(sg__ox_built(c, f));
  *y = sg_cast(c->g, f, SG_BOOL);
  return sg__ox_built(c, *y);
}

/* Equal of integers or bools of which one at least is computed at run time
 * (`ids == pad_id`): a - b is 0 exactly when a == b (int64 arithmetic;
 * bools as int64 0 and 1), cast to bool that is a != b, and Not of it. sgrt
 * has no comparison op, and a float difference is no exact test (inf - inf),
 * so floats are compared only when folded. */
static sg_status equal_tensor(ox_ctx *c, ox_value *a, ox_value *b) {
  ox_value *v[2] = {a, b};
  sg_tensor t[2];
  for (int k = 0; k < 2; k++) {
    SG_CHECK(sg__ox_tensor(c, v[k], &t[k]));
    if (c->g->tensors[t[k].id].dtype == SG_BOOL) {
      t[k] = sg_cast(c->g, t[k], SG_I64);
      SG_CHECK(sg__ox_built(c, t[k]));
    }
  }
  sg_tensor ne = sg_cast(c->g, sg_sub(c->g, t[0], t[1]), SG_BOOL), y;
  SG_CHECK(sg__ox_built(c, ne));
  SG_CHECK(not_tensor(c, ne, &y));
  return sg__ox_set_tensor(c, 0, y);
}

static sg_status cv_equal(ox_ctx *c, const Onnx__NodeProto *n) {
  SG_CHECK(sg__ox_check_attrs(c, no_attrs));
  ox_value *a = sg__ox_input(c, n, 0), *b = sg__ox_input(c, n, 1);
  if (!sg__ox_foldable(a) || !sg__ox_foldable(b)) {
    int ea = a->kind == OX_V_UNAVAILABLE ? 0 : sg__ox_elem_of(c, a),
        eb = b->kind == OX_V_UNAVAILABLE ? 0 : sg__ox_elem_of(c, b);
    bool ints = ea != 0 && eb != 0 && ea != OX_FLOAT && eb != OX_FLOAT;
    if (!ints) {
      SG_CHECK(sg__ox_need_foldable(c, a, "input A"));
      SG_CHECK(sg__ox_need_foldable(c, b, "input B"));
    }
    if ((ea == OX_BOOL) != (eb == OX_BOOL) || (ea == OX_INT32) != (eb == OX_INT32))
      return sg__ox_node_error(c, SG_ERR_DTYPE,
                               "compares '%s' (data type %d) with '%s' (data type %d); Equal takes one type",
                               a->name, ea, b->name, eb);
    return equal_tensor(c, a, b);
  }
  if ((a->elem == OX_FLOAT) != (b->elem == OX_FLOAT))
    return sg__ox_node_error(c, SG_ERR_DTYPE, "compares '%s' (%s) with '%s' (%s); Equal takes one type",
                             a->name, a->elem == OX_FLOAT ? "float" : "integer", b->name,
                             b->elem == OX_FLOAT ? "float" : "integer");
  bool folded;
  SG_CHECK(sg__ox_fold_binary(c, '=', a, b, &folded));
  return folded ? SG_OK : sg__ox_node_error(c, SG_ERR_INTERNAL, "Equal was not folded");
}

/* Builds t = expr and checks it (the builder's error with the node as
 * context). */
#define BUILD(t, expr)              \
  do {                              \
    (t) = (expr);                   \
    SG_CHECK(sg__ox_built(c, (t))); \
  } while (0)

/* a > b at run time, a bool tensor (sgrt has no comparison op). Floats:
 * sign(a - b), relu, cast to int64 (NaN gives 0: a NaN operand, or inf -
 * inf of equal infinities, is false, as it should be), cast to bool; a - b
 * keeps the sign of the difference exactly (IEEE subtraction; overflow
 * gives an infinity of the right sign, and the CPU backend does not flush
 * subnormals). Integers: a - b may overflow when the signs differ, so the
 * sign difference s = sign a - sign b (in -2..2) decides then, and sign(a -
 * b) (no overflow for equal signs) when s is 0: sign(2s + sign(a - b) (1 -
 * |s|)), in f32 (small integers, exact). */
static sg_status greater_tensor(ox_ctx *c, sg_tensor a, sg_tensor b, bool fl, sg_tensor *out) {
  sg_graph *g = c->g;
  sg_tensor t, d;
  BUILD(d, sg_sign(g, sg_sub(g, a, b)));
  if (fl) {
    t = d;
  } else {
    sg_tensor s, w;
    BUILD(s, sg_cast(g, sg_sub(g, sg_sign(g, a), sg_sign(g, b)), SG_F32));
    BUILD(d, sg_cast(g, d, SG_F32));
    BUILD(w, sg_add_scalar(g, sg_neg(g, sg_abs(g, s)), 1.0));
    BUILD(t, sg_sign(g, sg_add(g, sg_mul_scalar(g, s, 2.0), sg_mul(g, d, w))));
  }
  BUILD(*out, sg_cast(g, sg_cast(g, sg_relu(g, t), SG_I64), SG_BOOL));
  return SG_OK;
}

/* x is not NaN: |sign x| + 1 is 1 or 2, or NaN, which the cast to int64
 * makes 0. */
static sg_status not_nan(ox_ctx *c, sg_tensor x, sg_tensor *out) {
  sg_graph *g = c->g;
  BUILD(*out, sg_cast(g, sg_cast(g, sg_add_scalar(g, sg_abs(g, sg_sign(g, x)), 1.0), SG_I64), SG_BOOL));
  return SG_OK;
}

/* p and q, bools (broadcast): the product of 0/1 in f32. */
static sg_status and_tensor(ox_ctx *c, sg_tensor p, sg_tensor q, sg_tensor *out) {
  sg_graph *g = c->g;
  BUILD(*out, sg_cast(g, sg_mul(g, sg_cast(g, p, SG_F32), sg_cast(g, q, SG_F32)), SG_BOOL));
  return SG_OK;
}

/* A comparison ('<', '>', 'l' <=, 'g' >=) of tensors computed at run time:
 * a < b is b > a; a >= b is not (b > a) and neither is NaN; a <= b is b >= a. */
static sg_status compare_tensor(ox_ctx *c, ox_value *va, ox_value *vb, char op, bool fl) {
  sg_tensor a, b, y;
  SG_CHECK(sg__ox_tensor(c, va, &a));
  SG_CHECK(sg__ox_tensor(c, vb, &b));
  if (op == '<' || op == 'l') {
    sg_tensor t = a;
    a = b;
    b = t;
  }
  if (op == '>' || op == '<') {
    SG_CHECK(greater_tensor(c, a, b, fl, &y));
    return sg__ox_set_tensor(c, 0, y);
  }
  sg_tensor lt;
  SG_CHECK(greater_tensor(c, b, a, fl, &lt));
  SG_CHECK(not_tensor(c, lt, &y));
  if (fl) {
    sg_tensor na, nb, both;
    SG_CHECK(not_nan(c, a, &na));
    SG_CHECK(not_nan(c, b, &nb));
    SG_CHECK(and_tensor(c, na, nb, &both));
    SG_CHECK(and_tensor(c, y, both, &y));
  }
  return sg__ox_set_tensor(c, 0, y);
}

/* Less, Greater, LessOrEqual, GreaterOrEqual: folded for constants (`cond <
 * (cond + 1).view(T, 1)` of Hugging Face's causal masks, T5's relative
 * position buckets), else built from sub, sign, relu and cast
 * (compare_tensor; `key_padding_mask = pad > 0.5`). */
static sg_status compare(ox_ctx *c, const Onnx__NodeProto *n, char op) {
  SG_CHECK(sg__ox_check_attrs(c, no_attrs));
  ox_value *a = sg__ox_input(c, n, 0), *b = sg__ox_input(c, n, 1);
  if (a->kind == OX_V_UNAVAILABLE || b->kind == OX_V_UNAVAILABLE) {
    SG_CHECK(sg__ox_need_foldable(c, a, "input A"));
    SG_CHECK(sg__ox_need_foldable(c, b, "input B"));
  }
  int ea = sg__ox_elem_of(c, a), eb = sg__ox_elem_of(c, b);
  if (ea == OX_BOOL || eb == OX_BOOL || ea == 0 || eb == 0 || (ea == OX_FLOAT) != (eb == OX_FLOAT) ||
      (ea == OX_INT32) != (eb == OX_INT32))
    return sg__ox_node_error(c, SG_ERR_DTYPE,
                             "compares '%s' (data type %d) with '%s' (data type %d); %s takes two numbers of "
                             "one type",
                             a->name, ea, b->name, eb, sg__ox_str(n->op_type));
  if (!sg__ox_foldable(a) || !sg__ox_foldable(b)) return compare_tensor(c, a, b, op, ea == OX_FLOAT);
  bool folded;
  SG_CHECK(sg__ox_fold_binary(c, op, a, b, &folded));
  return folded ? SG_OK : sg__ox_node_error(c, SG_ERR_INTERNAL, "the comparison was not folded");
}

static sg_status cv_less(ox_ctx *c, const Onnx__NodeProto *n) { return compare(c, n, '<'); }
static sg_status cv_greater(ox_ctx *c, const Onnx__NodeProto *n) { return compare(c, n, '>'); }
static sg_status cv_less_equal(ox_ctx *c, const Onnx__NodeProto *n) { return compare(c, n, 'l'); }
static sg_status cv_greater_equal(ox_ctx *c, const Onnx__NodeProto *n) { return compare(c, n, 'g'); }

static sg_status cv_not(ox_ctx *c, const Onnx__NodeProto *n) {
  SG_CHECK(sg__ox_check_attrs(c, no_attrs));
  ox_value *x = sg__ox_input(c, n, 0);
  if (x->kind == OX_V_TENSOR && sg__ox_elem_of(c, x) == OX_BOOL) {
    sg_tensor y;
    SG_CHECK(not_tensor(c, (sg_tensor){x->tensor}, &y));
    return sg__ox_set_tensor(c, 0, y);
  }
  SG_CHECK(sg__ox_need_foldable(c, x, "input"));
  if (x->elem != OX_BOOL)
    return sg__ox_node_error(c, SG_ERR_DTYPE, "input '%s' has data type %d; Not takes BOOL (9)", x->name,
                             x->elem);
  int64_t *out;
  SG_CHECK(sg__ox_fold_alloc(c, x->numel, 8, (void **)&out));
  for (int64_t i = 0; i < x->numel; i++) out[i] = sg__ox_i64(x, i) == 0;
  return sg__ox_set_const(c, 0, OX_BOOL, x->ndim, x->dims, out);
}

/* And, Or, Xor of bools (Hugging Face's masks: a causal mask And a padding
 * mask): folded for constants; at run time in f32, where the bools are 0
 * and 1 exactly: a * b, max(a, b), |a - b|, cast back to bool. NumPy
 * broadcasting, as the ops it becomes. */
static sg_status logical(ox_ctx *c, const Onnx__NodeProto *n, char op) {
  SG_CHECK(sg__ox_check_attrs(c, no_attrs));
  ox_value *v[2] = {sg__ox_input(c, n, 0), sg__ox_input(c, n, 1)};
  for (int k = 0; k < 2; k++) {
    if (v[k]->kind == OX_V_UNAVAILABLE) return sg__ox_unavailable(c, v[k]);
    if (sg__ox_elem_of(c, v[k]) != OX_BOOL)
      return sg__ox_node_error(c, SG_ERR_DTYPE, "input '%s' has data type %d; %s takes BOOL (9)", v[k]->name,
                               sg__ox_elem_of(c, v[k]), sg__ox_str(n->op_type));
  }
  bool folded;
  SG_CHECK(sg__ox_fold_binary(c, op, v[0], v[1], &folded));
  if (folded) return SG_OK;
  sg_tensor f[2];
  for (int k = 0; k < 2; k++) {
    SG_CHECK(sg__ox_tensor(c, v[k], &f[k]));
    f[k] = sg_cast(c->g, f[k], SG_F32);
    SG_CHECK(sg__ox_built(c, f[k]));
  }
  sg_tensor y = op == '&'   ? sg_mul(c->g, f[0], f[1])
                : op == '|' ? sg_max(c->g, f[0], f[1])
                            : sg_abs(c->g, sg_sub(c->g, f[0], f[1]));
  SG_CHECK(sg__ox_built(c, y));
  y = sg_cast(c->g, y, SG_BOOL);
  SG_CHECK(sg__ox_built(c, y));
  return sg__ox_set_tensor(c, 0, y);
}
static sg_status cv_and(ox_ctx *c, const Onnx__NodeProto *n) { return logical(c, n, '&'); }
static sg_status cv_or(ox_ctx *c, const Onnx__NodeProto *n) { return logical(c, n, '|'); }
static sg_status cv_xor(ox_ctx *c, const Onnx__NodeProto *n) { return logical(c, n, '^'); }

/* IsNaN: folded for a constant; at run time, which PyTorch's attention
 * writes to zero the rows of a softmax that a bool mask masks wholly
 * (Where(IsNaN(p), 0, p)), sign(x) keeps a NaN and is -1, 0 or 1 otherwise,
 * so |sign(x)| + 1 cast to int64 is 0 for NaN alone (the cast gives NaN 0)
 * and 1 or 2 else: cast to bool, that is "not NaN", and Not of it. Integers
 * are never NaN. */
static sg_status cv_is_nan(ox_ctx *c, const Onnx__NodeProto *n) {
  SG_CHECK(sg__ox_check_attrs(c, no_attrs));
  ox_value *x = sg__ox_input(c, n, 0);
  if (x->kind == OX_V_UNAVAILABLE) return sg__ox_unavailable(c, x);
  int elem = sg__ox_elem_of(c, x);
  if (elem != OX_FLOAT)
    return sg__ox_node_error(c, SG_ERR_DTYPE, "input '%s' has data type %d; sgrt's IsNaN takes FLOAT (1)",
                             x->name, elem);
  if (!sg__ox_foldable(x)) {
    sg_tensor t, y;
    SG_CHECK(sg__ox_tensor(c, x, &t));
    sg_tensor ok = sg_add_scalar(c->g, sg_abs(c->g, sg_sign(c->g, t)), 1.0);
    ok = sg_cast(c->g, sg_cast(c->g, ok, SG_I64), SG_BOOL);
    SG_CHECK(sg__ox_built(c, ok));
    SG_CHECK(not_tensor(c, ok, &y));
    return sg__ox_set_tensor(c, 0, y);
  }
  int64_t *out;
  SG_CHECK(sg__ox_fold_alloc(c, x->numel, 8, (void **)&out));
  for (int64_t i = 0; i < x->numel; i++) out[i] = isnan(sg__ox_f32(x, i));
  return sg__ox_set_const(c, 0, OX_BOOL, x->ndim, x->dims, out);
}

/* ---- Range ----------------------------------------------------------------------- */

/* start, start + delta, ... up to limit (exclusive), in start's integer type. */
static sg_status range_int(ox_ctx *c, int elem, int64_t start, int64_t limit, int64_t delta) {
  if (delta == 0) return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "delta is 0");
  /* In 128 bits: limit - start overflows int64 for extreme values. */
  __int128 span = (__int128)limit - start, count = 0;
  if (delta > 0 && span > 0) count = (span - 1) / delta + 1;
  if (delta < 0 && span < 0) count = (-span - 1) / -(__int128)delta + 1;
  int64_t len = count > OX_FOLD_MAX_NUMEL ? OX_FOLD_MAX_NUMEL + 1 : (int64_t)count;
  int64_t *out;
  SG_CHECK(sg__ox_fold_alloc(c, len, 8, (void **)&out));
  for (int64_t i = 0; i < len; i++) out[i] = start + i * delta; /* between start and limit */
  return sg__ox_set_const(c, 0, elem, 1, &len, out);
}

/* ONNX's ceil((limit - start) / delta) elements start + i * delta, computed
 * in double and rounded to float32. */
static sg_status range_float(ox_ctx *c, double start, double limit, double delta) {
  double count = ceil((limit - start) / delta);
  if (!isfinite(count))
    return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "start %g, limit %g and delta %g give no finite range",
                             start, limit, delta);
  int64_t len = count <= 0 ? 0 : count > (double)OX_FOLD_MAX_NUMEL ? OX_FOLD_MAX_NUMEL + 1 : (int64_t)count;
  float *out;
  SG_CHECK(sg__ox_fold_alloc(c, len, 4, (void **)&out));
  for (int64_t i = 0; i < len; i++) out[i] = (float)(start + (double)i * delta);
  return sg__ox_set_const(c, 0, OX_FLOAT, 1, &len, out);
}

static sg_status cv_range(ox_ctx *c, const Onnx__NodeProto *n) {
  SG_CHECK(sg__ox_check_attrs(c, no_attrs));
  static const char *const what[] = {"start", "limit", "delta"};
  ox_value *v[3];
  double num[3];
  for (int i = 0; i < 3; i++) {
    v[i] = sg__ox_input(c, n, i);
    SG_CHECK(sg__ox_need_foldable(c, v[i], what[i]));
    SG_CHECK(sg__ox_const_scalar(c, v[i], what[i], &num[i]));
  }
  bool fl = v[0]->elem == OX_FLOAT;
  if ((v[1]->elem == OX_FLOAT) != fl || (v[2]->elem == OX_FLOAT) != fl)
    return sg__ox_node_error(c, SG_ERR_DTYPE, "start, limit and delta mix float and integer types");
  if (fl) return range_float(c, num[0], num[1], num[2]);
  return range_int(c, v[0]->elem, sg__ox_i64(v[0], 0), sg__ox_i64(v[1], 0), sg__ox_i64(v[2], 0));
}

/* ---- Trilu ------------------------------------------------------------------------ */

/* The lower (upper = 0) or upper triangle of the last two dims, from
 * diagonal k (k > 0 above the main one); the rest zero. */
static sg_status cv_trilu(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known[] = {"upper", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  ox_value *x = sg__ox_input(c, n, 0), *vk = sg__ox_input(c, n, 1);
  SG_CHECK(sg__ox_need_foldable(c, x, "input"));
  int64_t upper = 1, k = 0;
  SG_CHECK(sg__ox_attr_int(c, "upper", 1, &upper));
  if (upper != 0 && upper != 1)
    return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "upper is %lld; must be 0 or 1", (long long)upper);
  if (vk) {
    int nk = 0;
    SG_CHECK(sg__ox_const_ints(c, vk, "k", 1, &k, &nk));
    if (nk != 1) return sg__ox_node_error(c, SG_ERR_SHAPE, "k '%s' has no value", vk->name);
  }
  if (x->ndim < 2)
    return sg__ox_node_error(c, SG_ERR_SHAPE, "input '%s' has rank %d; Trilu needs 2 or more", x->name,
                             x->ndim);
  int64_t rows = x->dims[x->ndim - 2], cols = x->dims[x->ndim - 1];
  size_t es = sg__ox_elem_size(x->elem);
  char *out;
  SG_CHECK(sg__ox_fold_alloc(c, x->numel, es, (void **)&out));
  for (int64_t e = 0; e < x->numel; e++) {
    int64_t i = e / cols % rows, j = e % cols; /* j - i and k compare without overflow: dims <= 2^56 */
    bool keep = upper ? j - i >= k : j - i <= k;
    if (keep) memcpy(out + (size_t)e * es, (const char *)x->data + (size_t)e * es, es);
    else memset(out + (size_t)e * es, 0, es);
  }
  return sg__ox_set_const(c, 0, x->elem, x->ndim, x->dims, out);
}

/* ---- Expand ----------------------------------------------------------------------- */

/* Expand's result shape: x's dims and `shape` broadcast both ways (NumPy
 * rules, so a 1 in `shape` keeps x's dim). */
static sg_status expand_dims(ox_ctx *c, const ox_value *x, int nx, const int64_t *xd, int ns,
                             const int64_t *sd, int *r, int64_t *out) {
  char b1[256], b2[256];
  *r = nx > ns ? nx : ns;
  for (int i = 0; i < *r; i++) {
    int ix = i - (*r - nx), is = i - (*r - ns);
    int64_t a = ix >= 0 ? xd[ix] : 1, b = is >= 0 ? sd[is] : 1;
    if (b < 1 || (a != b && a != 1 && b != 1))
      return sg__ox_node_error(
          c, b == 0 ? SG_ERR_UNSUPPORTED : SG_ERR_SHAPE, "cannot expand '%s' %s to shape %s%s", x->name,
          sg__onnx_dims_text(b1, sizeof b1, nx, xd), sg__onnx_dims_text(b2, sizeof b2, ns, sd),
          b == 0 ? " (sgrt has no empty tensors)" : "");
    out[i] = a == 1 ? b : a;
  }
  return SG_OK;
}

/* x repeated to dims[r], at import time. */
static sg_status fold_expand(ox_ctx *c, const ox_value *x, int r, const int64_t *dims) {
  int64_t xs[SG_MAX_DIMS], st[SG_MAX_DIMS], idx[SG_MAX_DIMS] = {0}, s = 1;
  for (int i = x->ndim - 1; i >= 0; i--) {
    xs[i] = s;
    s *= x->dims[i];
  }
  for (int i = 0; i < r; i++) {
    int ix = i - (r - x->ndim);
    st[i] = ix >= 0 && x->dims[ix] != 1 ? xs[ix] : 0; /* a broadcast dim repeats one element */
  }
  int64_t numel = sg__ox_fold_numel(r, dims);
  size_t es = sg__ox_elem_size(x->elem);
  char *out;
  SG_CHECK(sg__ox_fold_alloc(c, numel, es, (void **)&out));
  for (int64_t i = 0; i < numel; i++) {
    int64_t off = 0;
    for (int a = 0; a < r; a++) off += idx[a] * st[a];
    memcpy(out + (size_t)i * es, (const char *)x->data + (size_t)off * es, es);
    for (int a = r - 1; a >= 0 && ++idx[a] == dims[a]; a--) idx[a] = 0;
  }
  return sg__ox_set_const(c, 0, x->elem, r, dims, out);
}

/* Expand: folded for a constant; for a run-time tensor (or a weight) the
 * broadcast_to op, whose gradient sums the repeats back (sum_to); nothing
 * when the shape stays. */
static sg_status cv_expand(ox_ctx *c, const Onnx__NodeProto *n) {
  SG_CHECK(sg__ox_check_attrs(c, no_attrs));
  ox_value *x = sg__ox_input(c, n, 0);
  int nx = 0, ns = 0, r = 0;
  int64_t xd[SG_MAX_DIMS], sd[SG_MAX_DIMS], dims[SG_MAX_DIMS];
  SG_CHECK(sg__ox_shape(c, x, &nx, xd));
  SG_CHECK(sg__ox_const_ints(c, sg__ox_input(c, n, 1), "shape", SG_MAX_DIMS, sd, &ns));
  SG_CHECK(expand_dims(c, x, nx, xd, ns, sd, &r, dims));
  if (sg__ox_foldable(x)) return fold_expand(c, x, r, dims);
  sg_tensor t;
  SG_CHECK(sg__ox_tensor(c, x, &t));
  if (r == nx && memcmp(dims, xd, sizeof(int64_t) * (size_t)r) == 0) return sg__ox_set_tensor(c, 0, t);
  sg_attr shape = SG__AS("shape", r, dims);
  sg_tensor y;
  bool was_bool;
  SG_CHECK(sg__ox_bool_in(c, &t, &was_bool));
  if (sg_graph_add_op(c->g, SG_OP_BROADCAST_TO, 1, &t, 1, &shape, 1, &y, NULL) != SG_OK)
    return sg__ox_built(c, SG_NO_TENSOR);
  SG_CHECK(sg__ox_bool_out(c, &y, was_bool));
  return sg__ox_set_tensor(c, 0, y);
}

/* ---- Tile ------------------------------------------------------------------------- */

/* Tile (`x.repeat(...)`, e.g. a class token repeated over the batch): the
 * repeats must be an import-time constant, each >= 1. Of a constant:
 * folded. Of a run-time tensor or a weight: a reshape that puts a dim of 1
 * before each repeated axis, broadcast_to the repeats there, and a reshape
 * that merges each pair (gradient: sum_to); nothing when every repeat is 1. */
static sg_status cv_tile(ox_ctx *c, const Onnx__NodeProto *n) {
  SG_CHECK(sg__ox_check_attrs(c, no_attrs));
  ox_value *x = sg__ox_input(c, n, 0);
  int nx = 0, nr = 0;
  int64_t xd[SG_MAX_DIMS], reps[SG_MAX_DIMS], out[SG_MAX_DIMS];
  SG_CHECK(sg__ox_shape(c, x, &nx, xd));
  SG_CHECK(sg__ox_const_ints(c, sg__ox_input(c, n, 1), "repeats", SG_MAX_DIMS, reps, &nr));
  if (nr != nx)
    return sg__ox_node_error(c, SG_ERR_SHAPE, "repeats has %d values; input '%s' has rank %d", nr, x->name,
                             nx);
  int wide = nx; /* rank of the broadcast form */
  for (int a = 0; a < nx; a++) {
    if (reps[a] < 1)
      return sg__ox_node_error(c, reps[a] == 0 ? SG_ERR_UNSUPPORTED : SG_ERR_ATTRIBUTE,
                               "repeats[%d] is %lld; must be >= 1%s", a, (long long)reps[a],
                               reps[a] == 0 ? " (sgrt has no empty tensors)" : "");
    if (xd[a] > SG__MAX_NUMEL / reps[a])
      return sg__ox_node_error(c, SG_ERR_RANGE, "repeats[%d] %lld makes a dim of more than 2^56", a,
                               (long long)reps[a]);
    out[a] = xd[a] * reps[a];
    wide += reps[a] > 1;
  }
  if (sg__ox_foldable(x)) {
    int64_t numel = sg__ox_fold_numel(nx, out), idx[SG_MAX_DIMS] = {0}, st[SG_MAX_DIMS], s1 = 1;
    for (int a = nx - 1; a >= 0; a--) {
      st[a] = s1;
      s1 *= xd[a];
    }
    size_t es = sg__ox_elem_size(x->elem);
    char *data;
    SG_CHECK(sg__ox_fold_alloc(c, numel, es, (void **)&data));
    for (int64_t i = 0; i < numel; i++) {
      int64_t off = 0;
      for (int a = 0; a < nx; a++) off += idx[a] % xd[a] * st[a];
      memcpy(data + (size_t)i * es, (const char *)x->data + (size_t)off * es, es);
      for (int a = nx - 1; a >= 0 && ++idx[a] == out[a]; a--) idx[a] = 0;
    }
    return sg__ox_set_const(c, 0, x->elem, nx, out, data);
  }
  sg_tensor t;
  SG_CHECK(sg__ox_tensor(c, x, &t));
  if (wide == nx) return sg__ox_set_tensor(c, 0, t);
  if (wide > SG_MAX_DIMS)
    return sg__ox_node_error(
        c, SG_ERR_UNSUPPORTED,
        "tiling %d axes of '%s' (rank %d) takes rank %d; sgrt tensors have at most %d dims", wide - nx,
        x->name, nx, wide, SG_MAX_DIMS);
  int64_t ones[SG_MAX_DIMS], big[SG_MAX_DIMS];
  int k = 0;
  for (int a = 0; a < nx; a++) {
    if (reps[a] > 1) {
      ones[k] = 1;
      big[k++] = reps[a];
    }
    ones[k] = xd[a];
    big[k++] = xd[a];
  }
  bool was_bool;
  SG_CHECK(sg__ox_bool_in(c, &t, &was_bool));
  t = sg_reshape(c->g, t, wide, ones);
  SG_CHECK(sg__ox_built(c, t));
  sg_attr shape = SG__AS("shape", wide, big);
  sg_tensor y;
  if (sg_graph_add_op(c->g, SG_OP_BROADCAST_TO, 1, &t, 1, &shape, 1, &y, NULL) != SG_OK)
    return sg__ox_built(c, SG_NO_TENSOR);
  y = sg_reshape(c->g, y, nx, out);
  SG_CHECK(sg__ox_bool_out(c, &y, was_bool));
  return sg__ox_set_tensor(c, 0, y);
}

/* EyeLike: ones on the k-th diagonal of a 2-D shape, zeros elsewhere (XLNet's attention mask). Only
 * the input's shape is read, which is known at import: always folded. `dtype` (default: the
 * input's type) must be FLOAT, INT32, INT64 or BOOL. */
static sg_status cv_eye_like(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known[] = {"dtype", "k", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  ox_value *x = sg__ox_input(c, n, 0);
  int r;
  int64_t dims[SG_MAX_DIMS], k, dtype;
  SG_CHECK(sg__ox_shape(c, x, &r, dims));
  if (r != 2)
    return sg__ox_node_error(c, SG_ERR_SHAPE, "input '%s' has rank %d; EyeLike takes 2", x->name, r);
  SG_CHECK(sg__ox_attr_int(c, "k", 0, &k));
  SG_CHECK(sg__ox_attr_int(c, "dtype", sg__ox_elem_of(c, x), &dtype));
  if (dtype != OX_FLOAT && dtype != OX_INT32 && dtype != OX_INT64 && dtype != OX_BOOL)
    return sg__ox_node_error(c, SG_ERR_DTYPE,
                             "dtype %lld; sgrt makes FLOAT (1), INT32 (6), INT64 (7), BOOL (9)",
                             (long long)dtype);
  int64_t numel = sg__ox_fold_numel(2, dims);
  void *out;
  SG_CHECK(sg__ox_fold_alloc(c, numel, sg__ox_elem_size((int)dtype), &out));
  for (int64_t i = 0; i < numel; i++) {
    bool one = i % dims[1] - i / dims[1] == k; /* column - row */
    if (dtype == OX_FLOAT) ((float *)out)[i] = one ? 1.0f : 0.0f;
    else ((int64_t *)out)[i] = one;
  }
  return sg__ox_set_const(c, 0, (int)dtype, 2, dims, out);
}

/* OneHot(indices, depth, values [off, on]): a new axis of `depth` along
 * which an element is `on` where it equals the index (a negative index
 * counts from depth; one out of range leaves its row all `off`). Folded
 * for constant indices (Mixtral's batched experts in a TorchScript export);
 * run-time integer indices become a comparison with a constant 0..depth-1
 * along the new axis (sub, cast to bool and not, as Equal), twice with
 * negative indices, scaled to off + (on - off) * match in float (and cast
 * to the values' type: F.one_hot's int64). Depth and values must be known
 * at import. */
static sg_status cv_one_hot(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known[] = {"axis", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  ox_value *idx = sg__ox_input(c, n, 0), *dv = sg__ox_input(c, n, 1), *vals = sg__ox_input(c, n, 2);
  if (idx->kind == OX_V_UNAVAILABLE) return sg__ox_unavailable(c, idx);
  double depth_d;
  SG_CHECK(sg__ox_const_scalar(c, dv, "depth", &depth_d));
  SG_CHECK(sg__ox_need_foldable(c, vals, "values"));
  if (vals->numel != 2)
    return sg__ox_node_error(c, SG_ERR_SHAPE, "values '%s' holds %lld elements; expected [off, on]",
                             vals->name, (long long)vals->numel);
  if (!(depth_d >= 1 && depth_d <= 65536))
    return sg__ox_node_error(c, SG_ERR_RANGE, "depth %g is outside 1..65536", depth_d);
  int64_t depth = (int64_t)depth_d, axis_attr = -1;
  int r, axis;
  int64_t idims[SG_MAX_DIMS], odims[SG_MAX_DIMS];
  SG_CHECK(sg__ox_shape(c, idx, &r, idims));
  if (r + 1 > SG_MAX_DIMS)
    return sg__ox_node_error(c, SG_ERR_RANGE, "the result would have rank %d; at most %d", r + 1,
                             SG_MAX_DIMS);
  SG_CHECK(sg__ox_attr_int(c, "axis", -1, &axis_attr));
  SG_CHECK(sg__ox_axis(c, axis_attr, r + 1, "axis", &axis));
  for (int k = 0, j = 0; k <= r; k++) odims[k] = k == axis ? depth : idims[j++];
  if (sg__ox_elem_of(c, idx) == OX_FLOAT || sg__ox_elem_of(c, idx) == OX_BOOL)
    return sg__ox_node_error(c, SG_ERR_DTYPE, "indices '%s' must hold integers", idx->name);
  double off = sg__ox_num(vals, 0), on = sg__ox_num(vals, 1);
  if (sg__ox_foldable(idx)) {
    int64_t numel = sg__ox_fold_numel(r + 1, odims), inner = sg__ox_fold_numel(r - axis, idims + axis);
    size_t es = sg__ox_elem_size(vals->elem);
    char *out;
    SG_CHECK(sg__ox_fold_alloc(c, numel, es, (void **)&out));
    for (int64_t o = 0; o < numel; o++) {
      int64_t in_pos = o % inner + o / (inner * depth) * inner, j = o / inner % depth;
      int64_t i = sg__ox_i64(idx, in_pos);
      if (i < 0) i += depth;
      memcpy(out + (size_t)o * es, (const char *)vals->data + (size_t)(i == j) * es, es);
    }
    return sg__ox_set_const(c, 0, vals->elem, r + 1, odims, out);
  }
  if (vals->elem != OX_FLOAT && (fabs(off) > 16777216.0 || fabs(on) > 16777216.0))
    return sg__ox_node_error(
        c, SG_ERR_UNSUPPORTED,
        "values '%s' (%g, %g) are integers past 2^24, which sgrt's run-time OneHot (computed "
        "in float) does not hold exactly",
        vals->name, off, on);
  /* idx with a dim of 1 at axis, against 0..depth-1 along it */
  int64_t udims[SG_MAX_DIMS], rdims[SG_MAX_DIMS];
  for (int k = 0; k <= r; k++) udims[k] = k == axis ? 1 : odims[k], rdims[k] = k == axis ? depth : 1;
  float *range;
  SG_CHECK(sg__ox_fold_alloc(c, depth, sizeof *range, (void **)&range));
  for (int64_t j = 0; j < depth; j++) range[j] = (float)j;
  sg_tensor t, u, match = SG_NO_TENSOR;
  SG_CHECK(sg__ox_tensor(c, idx, &t));
  u = sg_reshape(c->g, sg_cast(c->g, t, SG_F32), r + 1, udims);
  sg_tensor rt = sg_constant(c->g, sg__ox_tmp_name(c, "one_hot_range"), SG_F32, r + 1, rdims, range);
  for (int pass = 0; pass < 2; pass++) { /* the index, then the index + depth (a negative one) */
    sg_tensor diff = sg_sub(c->g, pass ? sg_add_scalar(c->g, u, (double)depth) : u, rt);
    sg_tensor ne = sg_cast(c->g, sg_cast(c->g, diff, SG_BOOL), SG_F32);
    sg_tensor eq = sg_add_scalar(c->g, sg_mul_scalar(c->g, ne, -1.0), 1.0);
    match = pass ? sg_add(c->g, match, eq) : eq;
  }
  sg_tensor y = sg_add_scalar(c->g, sg_mul_scalar(c->g, match, on - off), off);
  if (vals->elem != OX_FLOAT) /* integer values (F.one_hot's int64 0 and 1), computed exactly in float */
    y = sg_cast(c->g, y, vals->elem == OX_INT32 ? SG_I32 : vals->elem == OX_BOOL ? SG_BOOL : SG_I64);
  SG_CHECK(sg__ox_built(c, y));
  return sg__ox_set_tensor(c, 0, y);
}

const ox_op sg__ox_mask_ops[] = {
    {"EyeLike", cv_eye_like, 1, 1, 1, 1},
    {"Equal", cv_equal, 2, 2, 1, 1},
    {"Not", cv_not, 1, 1, 1, 1},
    {"IsNaN", cv_is_nan, 1, 1, 1, 1},
    {"And", cv_and, 2, 2, 1, 1},
    {"Or", cv_or, 2, 2, 1, 1},
    {"Xor", cv_xor, 2, 2, 1, 1},
    {"Range", cv_range, 3, 3, 1, 1},
    {"Trilu", cv_trilu, 1, 2, 1, 1},
    {"Expand", cv_expand, 2, 2, 1, 1},
    {"Less", cv_less, 2, 2, 1, 1},
    {"Greater", cv_greater, 2, 2, 1, 1},
    {"LessOrEqual", cv_less_equal, 2, 2, 1, 1},
    {"GreaterOrEqual", cv_greater_equal, 2, 2, 1, 1},
    {"Tile", cv_tile, 2, 2, 1, 1},
    {"OneHot", cv_one_hot, 3, 3, 1, 1},
};
const int sg__ox_n_mask_ops = (int)(sizeof sg__ox_mask_ops / sizeof *sg__ox_mask_ops);
