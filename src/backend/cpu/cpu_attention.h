/* The tile arithmetic of the fused attention kernel (cpu_attention.c), in
 * two forms picked at run time (cpu_attention_tile.c): AVX2 with FMA where
 * the CPU has them, portable C elsewhere. sgrt is compiled for generic
 * x86-64, so the AVX2 functions carry their own target attribute and are
 * only called after a CPUID check.
 *
 * Every matrix is f32, row-major, with an explicit leading dimension. A
 * tile is `rows` query positions by `cols` key positions. */
#ifndef SG_BACKEND_CPU_ATTENTION_H
#define SG_BACKEND_CPU_ATTENTION_H

#include <stdbool.h>
#include <stdint.h>

/* Which scores of a tile exist: with `causal`, query row r (position
 * i0 + r) sees key column c (position j0 + c) iff c <= diag + r, where
 * diag = i0 - j0; the others are masked out (probability 0). */
typedef struct sg__attn_tile {
  int64_t rows, cols;
  float scale; /* applied to q k^T */
  bool causal;
  int64_t diag;
} sg__attn_tile;

/* Columns of row r that are not masked out: 0..cols. */
static inline int64_t sg__attn_visible(const sg__attn_tile *t, int64_t r) {
  if (!t->causal) return t->cols;
  int64_t n = t->diag + r + 1;
  return n < 0 ? 0 : n > t->cols ? t->cols : n;
}

typedef struct sg__attn_ops {
  const char *name; /* "avx2" or "portable" */
  /* c[m x n] = (accumulate ? c : 0) + a[m x k] b[k x n], where element
   * (r, kk) of a is a[r * a_row + kk * a_col]: a_row = lda, a_col = 1 for a
   * row-major a, a_row = 1, a_col = lda for the transpose of a row-major
   * [k x m] (dv += P^T dy without moving P). Each element's products are
   * added in k order, so the result does not depend on how the rows and
   * columns are blocked. */
  void (*gemm)(int64_t m, int64_t n, int64_t k, const float *a, int64_t a_row, int64_t a_col, const float *b,
               int64_t ldb, float *c, int64_t ldc, bool accumulate);
  /* dst[c * ldd + r] = src[r * lds + c]: rows x cols into cols x rows (a
   * key block as k^T for q k^T). */
  void (*transpose)(const float *src, int64_t rows, int64_t cols, int64_t lds, float *dst, int64_t ldd);
  /* Row r of c[m x n] multiplied by f[r], or with `divide` divided by it
   * (the output rows' rescaling and final normalisation). */
  void (*scale_rows)(int64_t m, int64_t n, float *c, int64_t ldc, const float *f, bool divide);
  /* One step of the online softmax: s holds a tile of raw scores q k^T;
   * m[r] and l[r] are row r's running maximum of scaled scores and its sum
   * of exp(score - m) so far (-inf and 0 before the first tile). Writes
   * p = exp(scale s - m_new) into s (0 where masked), updates m and l, and
   * sets alpha[r] = exp(m_old - m_new), the factor the output rows
   * accumulated so far must be multiplied with. */
  void (*softmax)(const sg__attn_tile *t, float *s, int64_t lds, float *m, float *l, float *alpha);
  /* The backward's tile: s holds raw scores, dp = dy v^T. Writes the
   * probabilities p = exp(scale s - lse[r]) into s and dS = scale p (dp -
   * dsum[r]) into dp (0 where masked); dsum[r] is sum(dy * y) of row r. */
  void (*grad)(const sg__attn_tile *t, float *s, float *dp, int64_t ld, const float *lse, const float *dsum);
} sg__attn_ops;

/* The form this CPU runs: AVX2 + FMA when CPUID and the OS say so, unless
 * sg__attention_portable is set (tests compare the two). */
const sg__attn_ops *sg__attn_ops_get(void);
extern int sg__attention_portable;

#endif /* SG_BACKEND_CPU_ATTENTION_H */
