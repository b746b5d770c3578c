/* The tile arithmetic of fused attention (cpu_attention.h): small matrix
 * products, the online softmax and the backward's dS, each in an AVX2 + FMA
 * form and a portable one.
 *
 * Why not oneDNN: a tile product is 64 x 64 x 64, a few microseconds of
 * work, which a oneDNN primitive's per-call cost (argument maps, ~5
 * mallocs) would rival; and the kernel runs its tiles on all threads at
 * once, which one shared oneDNN stream does not allow. A register-blocked
 * 4 x 16 micro-kernel (8 accumulators, FMA) runs at the speed of the
 * oneDNN matmul on these shapes, and its scratch is a tile.
 *
 * The two forms give results within rounding of each other, not the same
 * bits: FMA rounds once where the portable form rounds the product and the
 * sum (sgrt's other C kernels avoid FMA to stay ISA-independent; here it
 * is worth ~1.45x on the products). Each is deterministic: every element's
 * products are added in k order, whatever the blocking or the thread. The
 * exponential and the dS arithmetic are the same operations in both forms
 * (no FMA), so only the products differ. */
#include <math.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define SG_HAVE_AVX2_PATH 1
#endif

#include "backend/cpu/cpu_attention.h"

int sg__attention_portable = 0;

/* ---- the exponential -------------------------------------------------------- */

/* e^x as Cephes' expf: x = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts,
 * so r is exact), e^r by its polynomial (relative error ~1e-7), 2^n from
 * its bits. x is clamped to [-88.38, 88]: the arguments here are scores
 * minus their row's maximum (<= 0), and n = -127 gives the bits of 0, so
 * e^x underflows to exactly 0 below -88.38 (no subnormals). NaN passes
 * through. The vector form below does the same operations in the same
 * order. */
#define EXP_HI 88.0f
#define EXP_LO -88.3762626647949f
#define EXP_LOG2E 1.44269504088896341f
#define EXP_LN2_HI 0.693359375f
#define EXP_LN2_LO -2.12194440e-4f
static const float exp_poly[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                  4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

static inline float exp_scalar(float x) {
  if (x != x) return x;
  x = x > EXP_HI ? EXP_HI : x;
  x = x < EXP_LO ? EXP_LO : x;
  float fx = floorf(x * EXP_LOG2E + 0.5f);
  float r = x - fx * EXP_LN2_HI;
  r = r - fx * EXP_LN2_LO;
  float z = r * r, y = exp_poly[0];
  for (int i = 1; i < 6; i++) y = y * r + exp_poly[i];
  y = y * z + r + 1.0f;
  uint32_t bits = (uint32_t)((int32_t)fx + 127) << 23;
  float two_n;
  memcpy(&two_n, &bits, sizeof two_n);
  return y * two_n;
}

/* ---- portable forms ------------------------------------------------------------ */

static void gemm_portable(int64_t m, int64_t n, int64_t k, const float *a, int64_t a_row, int64_t a_col,
                          const float *b, int64_t ldb, float *c, int64_t ldc, bool accumulate) {
  for (int64_t i = 0; i < m; i++) {
    float *ci = c + i * ldc;
    if (!accumulate) memset(ci, 0, sizeof(float) * (size_t)n);
    for (int64_t kk = 0; kk < k; kk++) {
      const float av = a[i * a_row + kk * a_col], *bk = b + kk * ldb;
      for (int64_t j = 0; j < n; j++) ci[j] = ci[j] + av * bk[j];
    }
  }
}

static void transpose_portable(const float *src, int64_t rows, int64_t cols, int64_t lds, float *dst,
                               int64_t ldd) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) dst[c * ldd + r] = src[r * lds + c];
}

static void scale_rows_portable(int64_t m, int64_t n, float *c, int64_t ldc, const float *f, bool divide) {
  for (int64_t r = 0; r < m; r++) {
    float *row = c + r * ldc;
    if (divide)
      for (int64_t j = 0; j < n; j++) row[j] /= f[r];
    else if (f[r] != 1.0f) /* x * 1 is x: skipping changes nothing */
      for (int64_t j = 0; j < n; j++) row[j] *= f[r];
  }
}

/* The largest of mx and row[from..vis). */
static float row_max(const float *row, int64_t from, int64_t vis, float mx) {
  for (int64_t c = from; c < vis; c++) mx = row[c] > mx ? row[c] : mx;
  return mx;
}

static void softmax_portable(const sg__attn_tile *t, float *s, int64_t lds, float *m, float *l,
                             float *alpha) {
  for (int64_t r = 0; r < t->rows; r++) {
    float *row = s + r * lds;
    int64_t vis = sg__attn_visible(t, r);
    float mnew = row_max(row, 0, vis, -INFINITY) * t->scale;
    mnew = m[r] > mnew ? m[r] : mnew;
    float a = vis > 0 ? exp_scalar(m[r] - mnew) : 1.0f, sum = 0;
    for (int64_t c = 0; c < vis; c++) {
      row[c] = exp_scalar(row[c] * t->scale - mnew);
      sum += row[c];
    }
    if (vis < t->cols) memset(row + vis, 0, sizeof(float) * (size_t)(t->cols - vis));
    if (vis > 0) m[r] = mnew, l[r] = l[r] * a + sum;
    alpha[r] = a;
  }
}

static void grad_portable(const sg__attn_tile *t, float *s, float *dp, int64_t ld, const float *lse,
                          const float *dsum) {
  for (int64_t r = 0; r < t->rows; r++) {
    float *srow = s + r * ld, *drow = dp + r * ld;
    int64_t vis = sg__attn_visible(t, r);
    for (int64_t c = 0; c < vis; c++) {
      float p = exp_scalar(srow[c] * t->scale - lse[r]);
      srow[c] = p;
      drow[c] = p * (drow[c] - dsum[r]) * t->scale;
    }
    for (int64_t c = vis; c < t->cols; c++) srow[c] = drow[c] = 0;
  }
}

static const sg__attn_ops portable_ops = {"portable",          gemm_portable,    transpose_portable,
                                          scale_rows_portable, softmax_portable, grad_portable};

/* ---- AVX2 + FMA ------------------------------------------------------------------- */

#ifdef SG_HAVE_AVX2_PATH
#define AVX2 __attribute__((target("avx2,fma")))
#define AVX2_INLINE static inline __attribute__((always_inline, target("avx2,fma")))

/* exp_scalar on eight lanes. _mm256_min_ps(a, b) and _mm256_max_ps(a, b)
 * return b when either is NaN, so a NaN x survives the clamps. */
AVX2_INLINE __m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_set1_ps(EXP_HI), x);
  x = _mm256_max_ps(_mm256_set1_ps(EXP_LO), x);
  __m256 fx =
      _mm256_floor_ps(_mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(EXP_LOG2E)), _mm256_set1_ps(0.5f)));
  __m256 r = _mm256_sub_ps(x, _mm256_mul_ps(fx, _mm256_set1_ps(EXP_LN2_HI)));
  r = _mm256_sub_ps(r, _mm256_mul_ps(fx, _mm256_set1_ps(EXP_LN2_LO)));
  __m256 z = _mm256_mul_ps(r, r), y = _mm256_set1_ps(exp_poly[0]);
  for (int i = 1; i < 6; i++) y = _mm256_add_ps(_mm256_mul_ps(y, r), _mm256_set1_ps(exp_poly[i]));
  y = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(y, z), r), _mm256_set1_ps(1.0f));
  __m256i n = _mm256_add_epi32(_mm256_cvttps_epi32(fx), _mm256_set1_epi32(127));
  return _mm256_mul_ps(y, _mm256_castsi256_ps(_mm256_slli_epi32(n, 23)));
}

AVX2_INLINE float hmax8(__m256 v) {
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
  return _mm_cvtss_f32(h);
}

AVX2_INLINE float hsum8(__m256 v) {
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
  return _mm_cvtss_f32(h);
}

/* The first n (1..7) lanes. */
AVX2_INLINE __m256i lanes(int64_t n) {
  static const int32_t ones_then_zeros[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  return _mm256_loadu_si256((const __m256i *)(const void *)(ones_then_zeros + 8 - n));
}

/* The micro-kernel: R (1 or 4) rows by W (1 or 2) vectors of 8 columns of
 * c, or with `tail` (W = 1) the columns `mask` selects; a's R rows are
 * broadcast one element at a time against b's row kk. R, W and tail are
 * constants at every call, so the accumulators live in registers. */
AVX2_INLINE void block(const int R, const int W, const bool tail, __m256i mask, int64_t k, const float *a,
                       int64_t a_row, int64_t a_col, const float *b, int64_t ldb, float *c, int64_t ldc,
                       bool accumulate) {
  __m256 acc[4][2];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 2
    for (int w = 0; w < W; w++)
      acc[r][w] = !accumulate ? _mm256_setzero_ps()
                  : tail      ? _mm256_maskload_ps(c + r * ldc, mask)
                              : _mm256_loadu_ps(c + r * ldc + 8 * w);
  for (int64_t kk = 0; kk < k; kk++) {
    __m256 bv[2];
#pragma GCC unroll 2
    for (int w = 0; w < W; w++)
      bv[w] = tail ? _mm256_maskload_ps(b + kk * ldb, mask) : _mm256_loadu_ps(b + kk * ldb + 8 * w);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
      __m256 x = _mm256_broadcast_ss(a + r * a_row + kk * a_col);
#pragma GCC unroll 2
      for (int w = 0; w < W; w++) acc[r][w] = _mm256_fmadd_ps(x, bv[w], acc[r][w]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 2
    for (int w = 0; w < W; w++) {
      if (tail) _mm256_maskstore_ps(c + r * ldc, mask, acc[r][w]);
      else _mm256_storeu_ps(c + r * ldc + 8 * w, acc[r][w]);
    }
}

/* All m rows of one column strip: blocks of 4 rows, then single rows. */
AVX2_INLINE void strip(const int W, const bool tail, __m256i mask, int64_t m, int64_t k, const float *a,
                       int64_t a_row, int64_t a_col, const float *b, int64_t ldb, float *c, int64_t ldc,
                       bool accumulate) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4)
    block(4, W, tail, mask, k, a + i * a_row, a_row, a_col, b, ldb, c + i * ldc, ldc, accumulate);
  for (; i < m; i++)
    block(1, W, tail, mask, k, a + i * a_row, a_row, a_col, b, ldb, c + i * ldc, ldc, accumulate);
}

AVX2 static void gemm_avx2(int64_t m, int64_t n, int64_t k, const float *a, int64_t a_row, int64_t a_col,
                           const float *b, int64_t ldb, float *c, int64_t ldc, bool accumulate) {
  const __m256i all = _mm256_set1_epi32(-1);
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    strip(2, false, all, m, k, a, a_row, a_col, b + j, ldb, c + j, ldc, accumulate);
  for (; j + 8 <= n; j += 8) strip(1, false, all, m, k, a, a_row, a_col, b + j, ldb, c + j, ldc, accumulate);
  if (j < n) strip(1, true, lanes(n - j), m, k, a, a_row, a_col, b + j, ldb, c + j, ldc, accumulate);
}

/* The 8 x 8 block at src into dst, transposed: unpack pairs of rows,
 * shuffle quadruples, swap the 128-bit halves. */
AVX2_INLINE void transpose8(const float *src, int64_t lds, float *dst, int64_t ldd) {
  __m256 r[8], t[8], u[8];
  for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + i * lds);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4)
    for (int h = 0; h < 2; h++) {
      u[i + 2 * h] = _mm256_shuffle_ps(t[i + h], t[i + h + 2], _MM_SHUFFLE(1, 0, 1, 0));
      u[i + 2 * h + 1] = _mm256_shuffle_ps(t[i + h], t[i + h + 2], _MM_SHUFFLE(3, 2, 3, 2));
    }
  for (int i = 0; i < 4; i++) {
    _mm256_storeu_ps(dst + i * ldd, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
    _mm256_storeu_ps(dst + (i + 4) * ldd, _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
  }
}

AVX2 static void transpose_avx2(const float *src, int64_t rows, int64_t cols, int64_t lds, float *dst,
                                int64_t ldd) {
  const int64_t r8 = rows & ~(int64_t)7, c8 = cols & ~(int64_t)7;
  for (int64_t r = 0; r < r8; r += 8)
    for (int64_t c = 0; c < c8; c += 8) transpose8(src + r * lds + c, lds, dst + c * ldd + r, ldd);
  /* The edges: columns past c8 of every row, rows past r8 of the rest. */
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = r < r8 ? c8 : 0; c < cols; c++) dst[c * ldd + r] = src[r * lds + c];
}

AVX2 static void scale_rows_avx2(int64_t m, int64_t n, float *c, int64_t ldc, const float *f, bool divide) {
  for (int64_t r = 0; r < m; r++) {
    float *row = c + r * ldc;
    if (!divide && f[r] == 1.0f) continue;
    const __m256 fv = _mm256_set1_ps(f[r]);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
      __m256 x = _mm256_loadu_ps(row + j);
      _mm256_storeu_ps(row + j, divide ? _mm256_div_ps(x, fv) : _mm256_mul_ps(x, fv));
    }
    for (; j < n; j++) row[j] = divide ? row[j] / f[r] : row[j] * f[r];
  }
}

AVX2 static void softmax_avx2(const sg__attn_tile *t, float *s, int64_t lds, float *m, float *l,
                              float *alpha) {
  const __m256 sc = _mm256_set1_ps(t->scale);
  for (int64_t r = 0; r < t->rows; r++) {
    float *row = s + r * lds;
    int64_t vis = sg__attn_visible(t, r), c = 0;
    __m256 mx = _mm256_set1_ps(-INFINITY);
    for (; c + 8 <= vis; c += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(row + c));
    float mnew = row_max(row, c, vis, hmax8(mx)) * t->scale;
    mnew = m[r] > mnew ? m[r] : mnew;
    float a = vis > 0 ? exp_scalar(m[r] - mnew) : 1.0f;
    const __m256 mv = _mm256_set1_ps(mnew);
    __m256 sum = _mm256_setzero_ps();
    for (c = 0; c + 8 <= vis; c += 8) {
      __m256 p = exp8(_mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(row + c), sc), mv));
      _mm256_storeu_ps(row + c, p);
      sum = _mm256_add_ps(sum, p);
    }
    float rest = 0;
    for (; c < vis; c++) {
      row[c] = exp_scalar(row[c] * t->scale - mnew);
      rest += row[c];
    }
    if (vis < t->cols) memset(row + vis, 0, sizeof(float) * (size_t)(t->cols - vis));
    if (vis > 0) m[r] = mnew, l[r] = l[r] * a + (hsum8(sum) + rest);
    alpha[r] = a;
  }
}

AVX2 static void grad_avx2(const sg__attn_tile *t, float *s, float *dp, int64_t ld, const float *lse,
                           const float *dsum) {
  const __m256 sc = _mm256_set1_ps(t->scale);
  for (int64_t r = 0; r < t->rows; r++) {
    float *srow = s + r * ld, *drow = dp + r * ld;
    int64_t vis = sg__attn_visible(t, r), c = 0;
    const __m256 lv = _mm256_set1_ps(lse[r]), dv = _mm256_set1_ps(dsum[r]);
    for (; c + 8 <= vis; c += 8) {
      __m256 p = exp8(_mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(srow + c), sc), lv));
      _mm256_storeu_ps(srow + c, p);
      __m256 d = _mm256_mul_ps(_mm256_mul_ps(p, _mm256_sub_ps(_mm256_loadu_ps(drow + c), dv)), sc);
      _mm256_storeu_ps(drow + c, d);
    }
    for (; c < vis; c++) {
      float p = exp_scalar(srow[c] * t->scale - lse[r]);
      srow[c] = p;
      drow[c] = p * (drow[c] - dsum[r]) * t->scale;
    }
    for (c = vis; c < t->cols; c++) srow[c] = drow[c] = 0;
  }
}

static const sg__attn_ops avx2_ops = {"avx2",          gemm_avx2,    transpose_avx2,
                                      scale_rows_avx2, softmax_avx2, grad_avx2};

/* CPUID (as comm/reduce.c does for F16C): AVX, FMA, AVX2 and an OS that
 * saves the YMM registers. Several sessions may race to fill the cache:
 * relaxed atomics, same answer. */
static int avx2_available(void) {
  static int cached = -1;
  int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (v >= 0) return v;
  unsigned a, b, c, d;
  v = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) && (c & bit_AVX) && (c & bit_FMA) && (c & bit_OSXSAVE) &&
      __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_AVX2)) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    v = (lo & 6u) == 6u;
  }
  __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
  return v;
}
#endif /* SG_HAVE_AVX2_PATH */

const sg__attn_ops *sg__attn_ops_get(void) {
#ifdef SG_HAVE_AVX2_PATH
  if (!sg__attention_portable && avx2_available()) return &avx2_ops;
#endif
  return &portable_ops;
}
