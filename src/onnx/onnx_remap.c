/* Index ops of a tensor computed at run time by indices known at import
 * (GatherElements, ScatterND and ScatterElements without a reduction, a
 * Slice with a negative step): each result element is one element of the
 * source at a position the importer computes, so the op is an embedding
 * lookup of the source's elements by those positions -- one op whatever the
 * indices, whose backward (a scatter-add) gives the gradient to the source.
 * DeBERTa-v2 gathers its relative-position scores this way, Funnel scatters
 * into its attention's position terms.
 *
 * The lookup's rows are as wide as the positions allow: when the leading
 * dims of the source and the result agree and every leading index maps the
 * trailing block alike (the indices of DeBERTa's gather, expanded over
 * batch and heads), the source is seen as [L, R], transposed to [R, L], and
 * R-rows of L elements are looked up; otherwise rows of one element. */
#include <string.h>

#include "onnx/onnx_internal.h"

/* The largest L (a product of leading dims that x and y share) for which
 * pos[l * ry + j] == l * rx + pos[j] for every l < L and j < ry. */
static int64_t shared_lead(int xnd, const int64_t *xd, int ynd, const int64_t *yd, const int64_t *pos) {
  int64_t nx = 1, ny = 1, best = 1;
  for (int k = 0; k < xnd; k++) nx *= xd[k];
  for (int k = 0; k < ynd; k++) ny *= yd[k];
  int64_t lead = 1;
  for (int k = 0; k < xnd && k < ynd && xd[k] == yd[k]; k++) {
    lead *= xd[k];
    int64_t rx = nx / lead, ry = ny / lead;
    bool ok = true;
    for (int64_t p = ry; p < ny && ok; p++) ok = pos[p] == (p / ry) * rx + pos[p % ry];
    if (!ok) break;
    best = lead;
  }
  return best;
}

sg_status sg__ox_remap(ox_ctx *c, sg_tensor x, const int64_t *pos, int ynd, const int64_t *yd,
                       sg_tensor *out) {
  sg_graph *g = c->g;
  sg_tensor_info xi;
  SG_CHECK(sg_graph_tensor_info(g, x, &xi));
  bool was_bool;
  SG_CHECK(sg__ox_bool_in(c, &x, &was_bool));
  SG_CHECK(sg_graph_tensor_info(g, x, &xi));
  if (xi.dtype != SG_F32)
    return sg__ox_node_error(
        c, SG_ERR_UNSUPPORTED,
        "'%s' is %s and computed at run time; sgrt moves its elements by indices known at "
        "import only for float (or bool) tensors",
        xi.name, sg_dtype_name(xi.dtype));
  int64_t ny = sg__ox_fold_numel(ynd, yd), lead = shared_lead(xi.ndim, xi.dims, ynd, yd, pos);
  int64_t rx = xi.numel / lead, ry = ny / lead;
  /* The positions within a block: an int64 constant of the graph, the lookup's ids. */
  const char *name = sg__ox_tmp_name(c, "positions");
  if (name == NULL) return sg__error(SG_ERR_NO_MEMORY, "ONNX import: out of memory");
  int64_t *ids;
  SG_CHECK(sg__ox_fold_alloc(c, ry, sizeof *ids, (void **)&ids));
  memcpy(ids, pos, sizeof *ids * (size_t)ry);
  ox_value idv = {.name = name,
                  .kind = OX_V_CONST,
                  .role = SG_ROLE_CONSTANT,
                  .tensor = -1,
                  .elem = OX_INT64,
                  .ndim = 1,
                  .dims = {ry},
                  .numel = ry,
                  .data = ids};
  sg_tensor idt;
  SG_CHECK(sg__ox_tensor(c, &idv, &idt));
  static const int64_t swap[] = {1, 0};
  int64_t lr[] = {lead, rx}, rows[] = {rx, 1};
  sg_tensor table = lead > 1 ? sg_transpose(g, sg_reshape(g, x, 2, lr), 2, swap) : sg_reshape(g, x, 2, rows);
  sg_tensor y = sg_embedding(g, table, idt); /* [ry, lead] */
  if (lead > 1) y = sg_transpose(g, y, 2, swap);
  y = sg_reshape(g, y, ynd, yd);
  SG_CHECK(sg__ox_built(c, y));
  SG_CHECK(sg__ox_bool_out(c, &y, was_bool));
  *out = y;
  return SG_OK;
}

sg_status sg__ox_elements_positions(ox_ctx *c, const ox_value *idx, int r, const int64_t *id,
                                    const int64_t *dd, int axis, int64_t *flat) {
  int64_t pos[SG_MAX_DIMS] = {0}, d = dd[axis], numel = sg__ox_fold_numel(r, id);
  for (int64_t i = 0; i < numel; i++) {
    int64_t j = sg__ox_i64(idx, i);
    if (j < -d || j >= d)
      return sg__ox_node_error(c, SG_ERR_RANGE,
                               "index %lld of indices '%s' is out of range for a dim of %lld", (long long)j,
                               idx->name, (long long)d);
    int64_t off = 0;
    for (int k = 0; k < r; k++) off = off * dd[k] + (k == axis ? (j < 0 ? j + d : j) : pos[k]);
    flat[i] = off;
    for (int k = r - 1; k >= 0 && ++pos[k] == id[k]; k--) pos[k] = 0;
  }
  return SG_OK;
}
