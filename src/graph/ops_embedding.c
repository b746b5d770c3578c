/* embedding (table [V,C], ids) -> table[ids] of dims ids.dims + [C], and its
 * backward, the table's gradient. The backward op takes V as an attribute
 * instead of the table: it needs only the table's shape, and not holding
 * the table keeps the op's inputs what it reads (dy and the ids). */
#include "graph/graph_internal.h"

/* The ids operand both kinds share: an integer tensor whose dims, with C
 * appended, still fit SG_MAX_DIMS. */
static sg_status ids_check(const sg__op *op, const sg__tensor *ids) {
  char si[SG__SHAPE_STR];
  sg__tstr(si, ids);
  if (!sg__is_int(ids->dtype)) return sg__op_error(op, SG_ERR_DTYPE, "ids %s must be i32 or i64", si);
  if (ids->ndim >= SG_MAX_DIMS)
    return sg__op_error(op, SG_ERR_SHAPE,
                        "ids %s has rank %d; at most %d, so that [ids..., C] has at most %d", si, ids->ndim,
                        SG_MAX_DIMS - 1, SG_MAX_DIMS);
  return SG_OK;
}

static sg_status infer_embedding(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *table = sg__in(g, op, 0), *ids = sg__in(g, op, 1);
  char st[SG__SHAPE_STR];
  sg__tstr(st, table);
  if (!sg__is_float(table->dtype)) return sg__op_error(op, SG_ERR_DTYPE, "table %s must be a float type", st);
  if (table->ndim != 2) return sg__op_error(op, SG_ERR_SHAPE, "table %s must be 2-D [V,C]", st);
  SG_CHECK(ids_check(op, ids));
  sg__shape_of(ids, &outs[0]);
  outs[0].dtype = table->dtype;
  outs[0].dims[outs[0].ndim++] = table->dims[1];
  *n_outs = 1;
  return SG_OK;
}

const sg__op_def sg__def_embedding = {SG_OP_EMBEDDING, "embedding", 2, 2, 0, 0, SG_ROLE_ACTIVATION, 0, NULL,
                                      infer_embedding};

sg_tensor sg_embedding(sg_graph *g, sg_tensor table, sg_tensor ids) {
  sg_tensor in[] = {table, ids};
  return sg__build1(g, SG_OP_EMBEDDING, 2, in, 0, NULL);
}

/* ---- embedding_backward ---------------------------------------------------- */

/* (dy [ids..., C], ids) -> dtable [V, C]: dtable[v] = the sum of dy's rows
 * whose id is v, 0 for rows no id names. */
static const sg__attr_schema backward_attrs[] = {
    {"num_embeddings", SG_ATTR_INT, true, 0, 0, 0, {0}, 0, 0, true, 1, SG__MAX_NUMEL}};

static sg_status infer_embedding_backward(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs) {
  const sg__tensor *dy = sg__in(g, op, 0), *ids = sg__in(g, op, 1);
  char sdy[SG__SHAPE_STR], si[SG__SHAPE_STR];
  sg__tstr(sdy, dy);
  sg__tstr(si, ids);
  if (!sg__is_float(dy->dtype)) return sg__op_error(op, SG_ERR_DTYPE, "dy %s must be a float type", sdy);
  SG_CHECK(ids_check(op, ids));
  bool same = dy->ndim == ids->ndim + 1;
  for (int i = 0; same && i < ids->ndim; i++) same = dy->dims[i] == ids->dims[i];
  if (!same)
    return sg__op_error(op, SG_ERR_SHAPE, "dy %s must have the dims of ids %s and one more, C", sdy, si);
  int64_t V = sg__attr_i(op, 0), C = dy->dims[dy->ndim - 1], numel;
  outs[0] = (sg__shape){dy->dtype, 2, {V, C}};
  if (!sg__numel_checked(2, outs[0].dims, &numel))
    return sg__op_error(op, SG_ERR_ATTRIBUTE, "num_embeddings %lld times C %lld is over 2^56 elements",
                        (long long)V, (long long)C);
  *n_outs = 1;
  return SG_OK;
}

const sg__op_def sg__def_embedding_backward = {
    SG_OP_EMBEDDING_BACKWARD, "embedding_backward",    2, 2, 0, 0, SG_ROLE_GRADIENT, 1,
    backward_attrs,           infer_embedding_backward};
