/* embedding and embedding_backward (f32 table, i32/i64 ids), as
 * torch.nn.Embedding:
 *   forward   y[i] = table[ids[i]], a row of C per id (rows split over
 *             threads);
 *   backward  dtable[v] = sum of dy[i] over the positions i with ids[i] = v,
 *             0 for rows no id names; added in f32 in position order, the
 *             columns split over threads in blocks of a cache line, so each
 *             element has one writer and its sum one order: results do not
 *             depend on the thread count.
 * An id outside 0..V-1 fails the run with SG_ERR_RANGE naming the op, the
 * id, its position in ids and V, before anything is read or written
 * through it (PyTorch raises too; cross_entropy treats a bad label alike). */
#include <string.h>

#include "backend/cpu/cpu_internal.h"

/* Columns per unit of the backward's split: one 64-byte line of f32. */
#define COLS_PER_UNIT 16

typedef struct emb_kernel {
  sg__kernel base;
  int64_t n, V, C; /* n ids, a [V, C] table */
  bool ids64;
} emb_kernel;

typedef struct emb_job {
  const emb_kernel *k;
  const void *ids;
  const float *src; /* forward: the table; backward: dy */
  float *dst;       /* forward: y; backward: dtable */
} emb_job;

static int64_t id_at(const emb_kernel *k, const void *ids, int64_t i) {
  return k->ids64 ? ((const int64_t *)ids)[i] : ((const int32_t *)ids)[i];
}

/* Every id in 0..V-1, checked before the rows are touched; the first bad
 * one (lowest position) is reported. */
static sg_status check_ids(const emb_kernel *k, const void *ids) {
  for (int64_t i = 0; i < k->n; i++) {
    int64_t v = id_at(k, ids, i);
    if (v < 0 || v >= k->V)
      return sg__error(SG_ERR_RANGE,
                       "%s '%s': id %lld at position %lld is outside 0..%lld (the table has %lld rows)",
                       sg_op_kind_name(k->base.kind), k->base.name, (long long)v, (long long)i,
                       (long long)(k->V - 1), (long long)k->V);
  }
  return SG_OK;
}

static void gather_rows(void *ctx, int64_t r0, int64_t r1) {
  const emb_job *j = ctx;
  const int64_t C = j->k->C;
  for (int64_t r = r0; r < r1; r++)
    memcpy(j->dst + r * C, j->src + id_at(j->k, j->ids, r) * C, sizeof(float) * (size_t)C);
}

/* Columns [u0 * 16, u1 * 16) of dtable: zeroed, then every position's dy
 * added into its id's row, positions in order. */
static void scatter_cols(void *ctx, int64_t u0, int64_t u1) {
  const emb_job *j = ctx;
  const int64_t C = j->k->C, V = j->k->V, n = j->k->n;
  const int64_t c0 = u0 * COLS_PER_UNIT, c1 = u1 * COLS_PER_UNIT < C ? u1 * COLS_PER_UNIT : C;
  for (int64_t v = 0; v < V; v++) memset(j->dst + v * C + c0, 0, sizeof(float) * (size_t)(c1 - c0));
  for (int64_t i = 0; i < n; i++) {
    float *row = j->dst + id_at(j->k, j->ids, i) * C;
    const float *d = j->src + i * C;
    for (int64_t c = c0; c < c1; c++) row[c] += d[c];
  }
}

static sg_status emb_run(sg__cpu_state *st, sg__kernel *base, void *const *in, void *const *out,
                         const sg__run_ctx *ctx) {
  (void)st;
  (void)ctx;
  const emb_kernel *k = (const emb_kernel *)base;
  emb_job j = {.k = k, .ids = in[1], .src = in[0], .dst = out[0]};
  SG_CHECK(check_ids(k, j.ids));
  if (k->base.kind == SG_OP_EMBEDDING) {
    sg__cpu_parallel_for(k->n, 1 + 16384 / k->C, gather_rows, &j);
    return SG_OK;
  }
  int64_t units = (k->C + COLS_PER_UNIT - 1) / COLS_PER_UNIT;
  int64_t per_unit = (k->n + k->V) * COLS_PER_UNIT; /* elements one unit touches */
  sg__cpu_parallel_for(units, 1 + 32768 / per_unit, scatter_cols, &j);
  return SG_OK;
}

sg_status sg__cpu_create_embedding(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                                   sg__kernel **out) {
  (void)st;
  (void)mode;
  const sg__tensor *src = sg__cpu_in(g, op, 0), *ids = sg__cpu_in(g, op, 1), *y = sg__cpu_out(g, op, 0);
  if (src->dtype != SG_F32 || (ids->dtype != SG_I32 && ids->dtype != SG_I64))
    return sg__cpu_unsupported(g, op, " (takes an f32 table and i32/i64 ids)");
  sg__kernel *kb;
  SG_CHECK(sg__cpu_kernel_new(op, sizeof(emb_kernel), emb_run, &kb));
  emb_kernel *k = (emb_kernel *)kb;
  bool fwd = op->kind == SG_OP_EMBEDDING;
  const sg__tensor *table = fwd ? src : y;
  k->n = sg__cpu_numel(ids);
  k->V = table->dims[0];
  k->C = table->dims[1];
  k->ids64 = ids->dtype == SG_I64;
  *out = kb;
  return SG_OK;
}
