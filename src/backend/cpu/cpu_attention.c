/* attention and attention_backward (f32), FlashAttention-2's algorithm:
 * the [T_q, T_k] scores exist one 64 x 64 tile at a time in a thread's
 * scratch, never whole.
 *
 * Forward, one unit per (head, block of 64 query rows): for each block of
 * 64 keys (causal: up to the diagonal, the blocks above it skipped) S =
 * q k^T, the online softmax (running row maximum m and sum l; the rows of
 * y accumulated so far are rescaled by exp(m_old - m_new)), y += P v; at
 * the end y /= l and lse = m + log l.
 *
 * Backward: D = rowsum(dy * y) per query row first; then per tile (query
 * block i, key block j) P = exp(scale S - lse) is recomputed, dP = dy v^T,
 * dS = scale P (dP - D), and dv_j += P^T dy_i, dk_j += dS^T q_i, dq_i +=
 * dS k_j. dk_j and dv_j sum over i, dq_i over j: without atomics, a unit
 * owns what it adds into. With at least as many heads as threads a unit is
 * a head (keys outer, queries inner); otherwise the tiles are visited
 * twice, once per (head, key block) for dk and dv and once per (head,
 * query block) for dq, which recomputes S and dP but keeps every thread
 * busy. Both orders add every output element's terms in the same order
 * with the same arithmetic, so the results are the same bits whatever the
 * thread count (tested).
 *
 * Dropout (attribute dropout p > 0, training only): the probabilities of
 * a tile are multiplied by z = mask / (1 - p), the mask being the one a
 * dropout op on the [..., T_q, T_k] weights would draw (backend/
 * dropout_rng.h: a hash of the key and the element's index), after the
 * online softmax has added them to l: y = sum z p v / l. Backward draws the
 * same z again: dv_j += (z P)^T dy_i and dS = scale P (z dP - D), D being
 * rowsum(dy * y) of the dropped output (FlashAttention-2's dropout).
 *
 * Units are taken from a shared counter (heaviest first: causal query
 * blocks near the end see the most keys); what a unit computes does not
 * depend on which thread takes it. Scratch: one slot of tiles per thread
 * in the backend's workspace, plus D (the size of lse) for the backward. */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_attention.h"
#include "backend/cpu/cpu_internal.h"
#include "backend/dropout_rng.h"

/* Query rows per block and keys per block. At d = 64 a tile's operands (a
 * block of q, k^T, the scores, a block of v, the output rows: 16 KB each)
 * stay in L2 while the micro-kernel's strips stay in L1. */
#define BLOCK 64

typedef struct attn_kernel {
  sg__kernel base;
  int64_t heads; /* the product of the leading dims */
  int64_t tq, tk, d, dv;
  float scale;
  bool causal;
  bool dropout;       /* drop attention weights: p > 0, and not an inference pass */
  uint32_t threshold; /* dropout: keep where the element's bits are >= this */
  float keep_scale;   /* dropout: 1 / (1 - p), rounded to f32 as the dropout op's */
  uint64_t seed;      /* dropout: the op's seed */
  int threads;
  size_t dsum_floats; /* backward: D, one per query row (rounded up to a cache line) */
  size_t slot_floats; /* one thread's scratch */
} attn_kernel;

typedef struct attn_job attn_job;
typedef void (*unit_fn)(attn_job *j, int64_t u, float *slot);

struct attn_job {
  const attn_kernel *k;
  const sg__attn_ops *ops;
  int64_t nqb, nkb; /* query and key blocks per head */
  /* Forward: q, k, v -> y, lse. Backward: dy, q, k, v, y, lse -> dq, dk, dv. */
  const float *q, *key, *v, *dy, *y_in, *lse_in;
  float *y, *lse, *dq, *dk, *dv;
  float *dsum, *slots;
  uint64_t mask_key; /* dropout: the masks' key for this run (seed, step, subsequence) */
  unit_fn unit;
  int64_t units, next; /* next: the first unit no thread has taken (atomic) */
};

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static size_t line_floats(size_t n) { return (n + 15) & ~(size_t)15; }

/* ---- products over what a tile does not mask ------------------------------------ */

/* A causal tile on the diagonal is about half masked. Its products run in
 * chunks of CHUNK rows (a multiple of the micro-kernel's 4 x 16), each only
 * over the columns its last row sees: ~5/8 of the whole tile's work at 64 x
 * 64. What is skipped is a score that softmax and grad never read, or a
 * product with a probability (or dS) that is exactly 0, so every element
 * gets the same bits as with the whole tile (but for the sign of a zero). */
#define CHUNK 16

static bool partial(const sg__attn_tile *t) { return t->causal && t->diag + 1 < t->cols; }
/* The first row of t that sees column c (t->rows if none). */
static int64_t first_row(const sg__attn_tile *t, int64_t c) {
  int64_t r = c - t->diag;
  return r < 0 ? 0 : r > t->rows ? t->rows : r;
}

/* out[rows x cols] = a[rows x k] b[k x cols] where out is a tile's scores (or dP): columns a row does
 * not see are left unwritten. */
static void tile_scores(const sg__attn_ops *ops, const sg__attn_tile *t, int64_t k, const float *a,
                        int64_t lda, const float *b, int64_t ldb, float *out, int64_t ldo) {
  if (!partial(t)) {
    ops->gemm(t->rows, t->cols, k, a, lda, 1, b, ldb, out, ldo, false);
    return;
  }
  for (int64_t r0 = 0; r0 < t->rows; r0 += CHUNK) {
    const int64_t r1 = min64(t->rows, r0 + CHUNK);
    ops->gemm(r1 - r0, sg__attn_visible(t, r1 - 1), k, a + r0 * lda, lda, 1, b, ldb, out + r0 * ldo, ldo,
              false);
  }
}

/* c[rows x n] (+)= p[rows x cols] b[cols x n], p a tile of probabilities or dS (0 where masked). */
static void tile_rows_times(const sg__attn_ops *ops, const sg__attn_tile *t, const float *p, int64_t ldp,
                            const float *b, int64_t ldb, int64_t n, float *c, int64_t ldc, bool accumulate) {
  if (!partial(t)) {
    ops->gemm(t->rows, n, t->cols, p, ldp, 1, b, ldb, c, ldc, accumulate);
    return;
  }
  for (int64_t r0 = 0; r0 < t->rows; r0 += CHUNK) {
    const int64_t r1 = min64(t->rows, r0 + CHUNK);
    ops->gemm(r1 - r0, n, sg__attn_visible(t, r1 - 1), p + r0 * ldp, ldp, 1, b, ldb, c + r0 * ldc, ldc,
              accumulate);
  }
}

/* c[cols x n] += p^T b: p[rows x cols] read in place, b [rows x n]. */
static void tile_cols_times(const sg__attn_ops *ops, const sg__attn_tile *t, const float *p, int64_t ldp,
                            const float *b, int64_t ldb, int64_t n, float *c, int64_t ldc) {
  if (!partial(t)) {
    ops->gemm(t->cols, n, t->rows, p, 1, ldp, b, ldb, c, ldc, true);
    return;
  }
  for (int64_t c0 = 0; c0 < t->cols; c0 += CHUNK) {
    const int64_t c1 = min64(t->cols, c0 + CHUNK), r0 = first_row(t, c0);
    ops->gemm(c1 - c0, n, t->rows - r0, p + r0 * ldp + c0, 1, ldp, b + r0 * ldb, ldb, c + c0 * ldc, ldc,
              true);
  }
}

/* A thread's scratch, each part a whole number of cache lines. */
typedef struct attn_slot {
  float *kt, *vt;       /* a key block transposed: [d, BLOCK], [dv, BLOCK] */
  float *s, *dp;        /* tiles [BLOCK, BLOCK]: scores, then P; dP, then dS */
  float *z;             /* dropout: a tile of 0 or 1 / (1 - p) */
  float *m, *l, *alpha; /* forward: per query row of the block */
} attn_slot;

static attn_slot slot_parts(const attn_kernel *k, float *p) {
  attn_slot s;
  const size_t tile = line_floats(BLOCK * BLOCK);
  s.kt = p, p += line_floats((size_t)k->d * BLOCK);
  s.vt = p, p += line_floats((size_t)k->dv * BLOCK);
  s.s = p, p += tile;
  s.dp = p, p += tile;
  s.z = p, p += tile;
  s.m = p, p += BLOCK;
  s.l = p, p += BLOCK;
  s.alpha = p;
  return s;
}

static size_t slot_size(int64_t d, int64_t dv) {
  return line_floats((size_t)d * BLOCK) + line_floats((size_t)dv * BLOCK) + 3 * line_floats(BLOCK * BLOCK) +
         3 * BLOCK;
}

/* Takes units until none are left; `slot` is this thread's (one per
 * thread: sg__cpu_parallel_for over k->threads gives each its own index). */
static void worker(void *ctx, int64_t slot, int64_t end) {
  (void)end;
  attn_job *j = ctx;
  float *scratch = j->slots + (size_t)slot * j->k->slot_floats;
  for (;;) {
    int64_t u = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
    if (u >= j->units) return;
    j->unit(j, u, scratch);
  }
}

static void run_units(attn_job *j, int64_t units, unit_fn fn) {
  j->unit = fn;
  j->units = units;
  j->next = 0;
  sg__cpu_parallel_for(j->k->threads, 2, worker, j);
}

/* ---- dropout ------------------------------------------------------------------ */

/* z for the visible part of tile t of head h at query i0, key j0: 0 or
 * keep_scale per element, from the index the element has in the [heads, T_q,
 * T_k] weights. Masked elements are not drawn (their probability is 0). */
static void draw_z(const attn_job *j, const sg__attn_tile *t, int64_t h, int64_t i0, int64_t j0, float *z) {
  const attn_kernel *k = j->k;
  for (int64_t r = 0; r < t->rows; r++) {
    const uint64_t base = (uint64_t)((h * k->tq + i0 + r) * k->tk + j0);
    float *zr = z + r * BLOCK;
    const int64_t vis = sg__attn_visible(t, r);
    for (int64_t c = 0; c < vis; c++)
      zr[c] = sg__dropout_bits(j->mask_key, base + (uint64_t)c) >= k->threshold ? k->keep_scale : 0.0f;
  }
}

/* a *= z over the visible part of tile t. */
static void times_z(const sg__attn_tile *t, float *a, const float *z) {
  for (int64_t r = 0; r < t->rows; r++) {
    float *ar = a + r * BLOCK;
    const float *zr = z + r * BLOCK;
    const int64_t vis = sg__attn_visible(t, r);
    for (int64_t c = 0; c < vis; c++) ar[c] *= zr[c];
  }
}

/* ---- forward ------------------------------------------------------------------ */

static void forward_unit(attn_job *j, int64_t u, float *scratch) {
  const attn_kernel *k = j->k;
  const int64_t h = u % k->heads, i0 = (j->nqb - 1 - u / k->heads) * BLOCK, br = min64(BLOCK, k->tq - i0);
  const int64_t d = k->d, dv = k->dv;
  attn_slot sl = slot_parts(k, scratch);
  const float *q = j->q + (h * k->tq + i0) * d, *key = j->key + h * k->tk * d, *v = j->v + h * k->tk * dv;
  float *y = j->y + (h * k->tq + i0) * dv, *lse = j->lse + h * k->tq + i0;
  for (int64_t r = 0; r < br; r++) sl.m[r] = -INFINITY, sl.l[r] = 0;
  const int64_t nkb = k->causal ? (i0 + br - 1) / BLOCK + 1 : j->nkb;
  for (int64_t jb = 0; jb < nkb; jb++) {
    const int64_t j0 = jb * BLOCK, bc = min64(BLOCK, k->tk - j0);
    const sg__attn_tile t = {br, bc, k->scale, k->causal, i0 - j0};
    j->ops->transpose(key + j0 * d, bc, d, d, sl.kt, BLOCK);
    tile_scores(j->ops, &t, d, q, d, sl.kt, BLOCK, sl.s, BLOCK);
    j->ops->softmax(&t, sl.s, BLOCK, sl.m, sl.l, sl.alpha);
    if (k->dropout) { /* after softmax added the kept and the dropped to l */
      draw_z(j, &t, h, i0, j0, sl.z);
      times_z(&t, sl.s, sl.z);
    }
    if (jb > 0) j->ops->scale_rows(br, dv, y, dv, sl.alpha, false);
    tile_rows_times(j->ops, &t, sl.s, BLOCK, v + j0 * dv, dv, dv, y, dv, jb > 0);
  }
  j->ops->scale_rows(br, dv, y, dv, sl.l, true);
  for (int64_t r = 0; r < br; r++) lse[r] = sl.m[r] + logf(sl.l[r]);
}

/* ---- backward ------------------------------------------------------------------ */

typedef struct dsum_job {
  const float *dy, *y;
  float *dsum;
  int64_t dv;
} dsum_job;

/* D = rowsum(dy * y), in double: one value per query row. */
static void dsum_rows(void *ctx, int64_t r0, int64_t r1) {
  const dsum_job *j = ctx;
  for (int64_t r = r0; r < r1; r++) {
    const float *dy = j->dy + r * j->dv, *y = j->y + r * j->dv;
    double acc = 0;
    for (int64_t c = 0; c < j->dv; c++) acc += (double)dy[c] * (double)y[c];
    j->dsum[r] = (float)acc;
  }
}

/* Key block jb of head h, transposed into the slot, and its dk, dv rows. */
static void load_keys(const attn_job *j, int64_t h, int64_t jb, attn_slot *sl) {
  const attn_kernel *k = j->k;
  const int64_t j0 = jb * BLOCK, bc = min64(BLOCK, k->tk - j0);
  j->ops->transpose(j->key + (h * k->tk + j0) * k->d, bc, k->d, k->d, sl->kt, BLOCK);
  j->ops->transpose(j->v + (h * k->tk + j0) * k->dv, bc, k->dv, k->dv, sl->vt, BLOCK);
}

static void zero_rows(float *p, int64_t rows, int64_t cols) {
  memset(p, 0, sizeof(float) * (size_t)(rows * cols));
}

/* Tile (query block i, key block jb) of head h, with the key block loaded:
 * adds its terms to dk and dv (`kv`) and to dq (`q`). */
static void grad_tile(const attn_job *j, int64_t h, int64_t i, int64_t jb, attn_slot *sl, bool kv,
                      bool want_q) {
  const attn_kernel *k = j->k;
  const sg__attn_ops *ops = j->ops;
  const int64_t i0 = i * BLOCK, br = min64(BLOCK, k->tq - i0), j0 = jb * BLOCK, bc = min64(BLOCK, k->tk - j0);
  const int64_t d = k->d, dv = k->dv, qrow = h * k->tq + i0, krow = h * k->tk + j0;
  const float *q = j->q + qrow * d, *dy = j->dy + qrow * dv;
  const sg__attn_tile t = {br, bc, k->scale, k->causal, i0 - j0};
  tile_scores(ops, &t, d, q, d, sl->kt, BLOCK, sl->s, BLOCK);
  tile_scores(ops, &t, dv, dy, dv, sl->vt, BLOCK, sl->dp, BLOCK);
  if (k->dropout) { /* dS = scale P (z dP - D); then z P for dv */
    draw_z(j, &t, h, i0, j0, sl->z);
    times_z(&t, sl->dp, sl->z);
  }
  ops->grad(&t, sl->s, sl->dp, BLOCK, j->lse_in + qrow, j->dsum + qrow);
  if (k->dropout && kv) times_z(&t, sl->s, sl->z);
  if (kv) { /* P^T and dS^T read in place */
    tile_cols_times(ops, &t, sl->s, BLOCK, dy, dv, dv, j->dv + krow * dv, dv);
    tile_cols_times(ops, &t, sl->dp, BLOCK, q, d, d, j->dk + krow * d, d);
  }
  if (want_q) tile_rows_times(ops, &t, sl->dp, BLOCK, j->key + krow * d, d, d, j->dq + qrow * d, d, true);
}

/* The query blocks that see key block jb: causal, from the block holding
 * query jb * BLOCK on; else all. */
static int64_t first_query_block(const attn_kernel *k, int64_t jb) { return k->causal ? jb : 0; }
/* The key blocks query block i sees. */
static int64_t key_blocks(const attn_job *j, int64_t i) {
  const int64_t last = min64(j->k->tq, (i + 1) * BLOCK) - 1;
  return j->k->causal ? last / BLOCK + 1 : j->nkb;
}

/* A whole head: key blocks outer, query blocks inner. */
static void head_unit(attn_job *j, int64_t h, float *scratch) {
  const attn_kernel *k = j->k;
  attn_slot sl = slot_parts(k, scratch);
  zero_rows(j->dq + h * k->tq * k->d, k->tq, k->d);
  for (int64_t jb = 0; jb < j->nkb; jb++) {
    const int64_t j0 = jb * BLOCK, bc = min64(BLOCK, k->tk - j0), krow = h * k->tk + j0;
    zero_rows(j->dk + krow * k->d, bc, k->d);
    zero_rows(j->dv + krow * k->dv, bc, k->dv);
    load_keys(j, h, jb, &sl);
    for (int64_t i = first_query_block(k, jb); i < j->nqb; i++) grad_tile(j, h, i, jb, &sl, true, true);
  }
}

/* dk and dv of one (head, key block): its column of tiles. */
static void keys_unit(attn_job *j, int64_t u, float *scratch) {
  const attn_kernel *k = j->k;
  const int64_t h = u % k->heads, jb = u / k->heads, j0 = jb * BLOCK, krow = h * k->tk + j0;
  const int64_t bc = min64(BLOCK, k->tk - j0);
  attn_slot sl = slot_parts(k, scratch);
  zero_rows(j->dk + krow * k->d, bc, k->d);
  zero_rows(j->dv + krow * k->dv, bc, k->dv);
  load_keys(j, h, jb, &sl);
  for (int64_t i = first_query_block(k, jb); i < j->nqb; i++) grad_tile(j, h, i, jb, &sl, true, false);
}

/* dq of one (head, query block): its row of tiles. */
static void queries_unit(attn_job *j, int64_t u, float *scratch) {
  const attn_kernel *k = j->k;
  const int64_t h = u % k->heads, i = j->nqb - 1 - u / k->heads, i0 = i * BLOCK;
  attn_slot sl = slot_parts(k, scratch);
  zero_rows(j->dq + (h * k->tq + i0) * k->d, min64(BLOCK, k->tq - i0), k->d);
  for (int64_t jb = 0; jb < key_blocks(j, i); jb++) {
    load_keys(j, h, jb, &sl);
    grad_tile(j, h, i, jb, &sl, false, true);
  }
}

/* ---- the kernel ------------------------------------------------------------------ */

static sg_status attn_run(sg__cpu_state *st, sg__kernel *base, void *const *in, void *const *out,
                          const sg__run_ctx *ctx) {
  const attn_kernel *k = (const attn_kernel *)base;
  attn_job j = {.k = k, .ops = sg__attn_ops_get()};
  if (k->dropout) j.mask_key = sg__dropout_key(k->seed, ctx->seed, ctx->step, ctx->rng_subsequence);
  j.nqb = (k->tq + BLOCK - 1) / BLOCK;
  j.nkb = (k->tk + BLOCK - 1) / BLOCK;
  j.dsum = (float *)(void *)st->ws;
  j.slots = j.dsum + k->dsum_floats;
  if (k->base.kind == SG_OP_ATTENTION) {
    j.q = in[0], j.key = in[1], j.v = in[2];
    j.y = out[0], j.lse = out[1];
    run_units(&j, k->heads * j.nqb, forward_unit);
    return SG_OK;
  }
  j.dy = in[0], j.q = in[1], j.key = in[2], j.v = in[3], j.y_in = in[4], j.lse_in = in[5];
  j.dq = out[0], j.dk = out[1], j.dv = out[2];
  dsum_job dj = {j.dy, j.y_in, j.dsum, k->dv};
  sg__cpu_parallel_for(k->heads * k->tq, 1 + 16384 / k->dv, dsum_rows, &dj);
  if (k->heads >= k->threads) {
    run_units(&j, k->heads, head_unit);
  } else {
    run_units(&j, k->heads * j.nkb, keys_unit);
    run_units(&j, k->heads * j.nqb, queries_unit);
  }
  return SG_OK;
}

sg_status sg__cpu_create_attention(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                                   sg__kernel **out) {
  for (int i = 0; i < op->n_inputs; i++)
    if (sg__cpu_in(g, op, i)->dtype != SG_F32) return sg__cpu_unsupported(g, op, " (attention takes f32)");
  const bool fwd = op->kind == SG_OP_ATTENTION;
  const sg__tensor *q = sg__cpu_in(g, op, fwd ? 0 : 1), *key = sg__cpu_in(g, op, fwd ? 1 : 2);
  const sg__tensor *v = sg__cpu_in(g, op, fwd ? 2 : 3);
  const int n = q->ndim;
  const int64_t heads = sg__numel(n - 2, q->dims), tq = q->dims[n - 2];
  size_t slot = slot_size(q->dims[n - 1], v->dims[n - 1]), dsum = fwd ? 0 : line_floats((size_t)(heads * tq));
  size_t floats, bytes;
  if (!sg__mul_size(slot, (size_t)st->threads, &floats) || !sg__add_size(floats, dsum, &floats) ||
      !sg__mul_size(floats, sizeof(float), &bytes))
    return sg__op_error(op, SG_ERR_NO_MEMORY, "scratch of %d threads does not fit in memory", st->threads);
  SG_CHECK(sg__cpu_ws_reserve(st, bytes));
  sg__kernel *kb;
  SG_CHECK(sg__cpu_kernel_new(op, sizeof(attn_kernel), attn_run, &kb));
  attn_kernel *k = (attn_kernel *)kb;
  k->heads = heads;
  k->tq = tq;
  k->tk = key->dims[n - 2];
  k->d = q->dims[n - 1];
  k->dv = v->dims[n - 1];
  k->scale = (float)sg__attention_scale(g, op);
  k->causal = sg__attr_i(op, 1) != 0;
  /* An inference pass drops nothing, as the dropout op; a backward op only exists for training. */
  const double p = sg__attr_f(op, 2);
  k->dropout = p > 0 && (!fwd || mode == SG__MODE_TRAIN);
  k->threshold = sg__dropout_threshold(p);
  k->keep_scale = (float)(1.0 / (1.0 - p));
  k->seed = (uint64_t)sg__attr_i(op, 3);
  k->threads = st->threads;
  k->dsum_floats = dsum;
  k->slot_floats = slot;
  *out = kb;
  return SG_OK;
}
