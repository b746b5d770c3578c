/* Converters of Equal, Not, Range, Trilu and Expand: the ops exporters write
 * to build attention masks (`bias[:, :, :T, :T] == 0`, torch.arange(T),
 * torch.tril(torch.ones(T, T)), mask.expand(...)). sgrt has no comparison
 * or logic ops, so Equal, Not, Range and Trilu are folded at import and need
 * import-time constants: a mask buffer is one (onnx_load.c imports a float
 * initializer that only such ops read as a constant). Expand has a run-time
 * form too, the broadcast_to op. docs/onnx.md has the mapping table. */
#include <math.h>
#include <string.h>

#include "onnx/onnx_internal.h"

static const char *const no_attrs[] = {NULL};

static size_t esize(int elem) { return elem == OX_FLOAT ? 4 : 8; }

/* ---- Equal, Not ---------------------------------------------------------------- */

static sg_status cv_equal(ox_ctx *c, const Onnx__NodeProto *n) {
  SG_CHECK(sg__ox_check_attrs(c, no_attrs));
  ox_value *a = sg__ox_input(c, n, 0), *b = sg__ox_input(c, n, 1);
  SG_CHECK(sg__ox_need_foldable(c, a, "input A"));
  SG_CHECK(sg__ox_need_foldable(c, b, "input B"));
  if ((a->elem == OX_FLOAT) != (b->elem == OX_FLOAT))
    return sg__ox_node_error(c, SG_ERR_DTYPE, "compares '%s' (%s) with '%s' (%s); Equal takes one type",
                             a->name, a->elem == OX_FLOAT ? "float" : "integer", b->name,
                             b->elem == OX_FLOAT ? "float" : "integer");
  bool folded;
  SG_CHECK(sg__ox_fold_binary(c, '=', a, b, &folded));
  return folded ? SG_OK : sg__ox_node_error(c, SG_ERR_INTERNAL, "Equal was not folded");
}

static sg_status cv_not(ox_ctx *c, const Onnx__NodeProto *n) {
  SG_CHECK(sg__ox_check_attrs(c, no_attrs));
  ox_value *x = sg__ox_input(c, n, 0);
  SG_CHECK(sg__ox_need_foldable(c, x, "input"));
  if (x->elem != OX_BOOL)
    return sg__ox_node_error(c, SG_ERR_DTYPE, "input '%s' has data type %d; Not takes BOOL (9)", x->name,
                             x->elem);
  int64_t *out;
  SG_CHECK(sg__ox_fold_alloc(c, x->numel, 8, (void **)&out));
  for (int64_t i = 0; i < x->numel; i++) out[i] = sg__ox_i64(x, i) == 0;
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
  size_t es = esize(x->elem);
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
  size_t es = esize(x->elem);
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
  if (sg_graph_add_op(c->g, SG_OP_BROADCAST_TO, 1, &t, 1, &shape, 1, &y, NULL) != SG_OK)
    return sg__ox_built(c, SG_NO_TENSOR);
  return sg__ox_set_tensor(c, 0, y);
}

const ox_op sg__ox_mask_ops[] = {
    {"Equal", cv_equal, 2, 2, 1, 1}, {"Not", cv_not, 1, 1, 1, 1},       {"Range", cv_range, 3, 3, 1, 1},
    {"Trilu", cv_trilu, 1, 2, 1, 1}, {"Expand", cv_expand, 2, 2, 1, 1},
};
const int sg__ox_n_mask_ops = (int)(sizeof sg__ox_mask_ops / sizeof *sg__ox_mask_ops);
