/* Element-wise reductions of the collectives, per dtype. Half types are
 * widened to f32, reduced, and rounded back (round to nearest even), so every
 * rank that reduces the same inputs in the same order gets the same bits.
 *
 * Speed: the loops run in blocks of 8 elements through restrict pointers,
 * the shape GCC vectorizes at -O2 (its "very cheap" cost model takes a fixed
 * 8-trip inner loop, not a plain loop over n) and clang at any level. f16 uses
 * the CPU's F16C conversions where present (x86-64, checked at run time);
 * their results equal the portable conversions bit for bit, which
 * tests/comm/reduce_test.c checks over every f16 and a sweep of f32 bit
 * patterns.
 *
 * NaNs: which operand's NaN an addition of two NaNs returns depends on the
 * compiler's operand order (it may swap a commutative add), so a NaN's sign
 * and payload are not reproducible. Narrowing to a half type therefore makes
 * every NaN the one canonical quiet NaN (f16 0x7e00, bf16 0x7fc0, as
 * PyTorch's bf16): every path, compiler and CPU gives the same bits. */
#include <math.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define SG_HAVE_F16C_PATH 1
#endif

#include "comm/comm_internal.h"

size_t sg__comm_dtype_size(sg_dtype dtype) {
  switch (dtype) {
    case SG_F32:
    case SG_I32: return 4;
    case SG_F16:
    case SG_BF16: return 2;
    case SG_I64: return 8;
    default: return 0;
  }
}

static uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline float bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

/* Branch-free so that the block loops vectorize: a NaN becomes the canonical
 * 0x7fc0; anything else rounds to nearest even. */
static inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f2u(f);
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? 0x7fc0u : rounded);
}

float sg__bf16_to_f32(uint16_t h) { return bf16_to_f32(h); }
uint16_t sg__f32_to_bf16(float f) { return f32_to_bf16(f); }

float sg__f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0x1f) return u2f(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    float v = ldexpf((float)man, -24);
    return sign ? -v : v;
  }
  return u2f(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t sg__f32_to_f16(float f) {
  uint32_t u = f2u(f), sign = (u >> 16) & 0x8000;
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7e00;                     /* the canonical NaN (see the top of the file) */
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to infinity */
  if (a < 0x38800000u) {                                  /* subnormal or zero in f16 */
    float v = u2f(a) * 16777216.0f;                       /* exact: scale by 2^24 */
    return (uint16_t)(sign | (uint32_t)nearbyintf(v));
  }
  uint32_t r = a + 0xfffu + ((a >> 13) & 1) - (112u << 23);
  return (uint16_t)(sign | (r >> 13));
}

/* ---- kernels ---------------------------------------------------------------- */

/* Runs STEP(i) for i in [0, n): blocks of 8, then the tail. */
#define BLOCKS_OF_8(STEP)                               \
  do {                                                  \
    size_t i_ = 0;                                      \
    for (; i_ + 8 <= n; i_ += 8)                        \
      for (size_t k_ = i_; k_ < i_ + 8; k_++) STEP(k_); \
    for (; i_ < n; i_++) STEP(i_);                      \
  } while (0)

#define MAX_OF(a, b) ((a) > (b) ? (a) : (b))
#define MIN_OF(a, b) ((a) < (b) ? (a) : (b))

#define STEP_SUM_F(j) d[j] = d[j] + s[j]
#define STEP_MAX(j) d[j] = MAX_OF(d[j], s[j])
#define STEP_MIN(j) d[j] = MIN_OF(d[j], s[j])
#define STEP_SUM_I32(j) d[j] = (int32_t)((uint32_t)d[j] + (uint32_t)s[j])
#define STEP_SUM_I64(j) d[j] = (int64_t)((uint64_t)d[j] + (uint64_t)s[j])

static void f32_sum(float *restrict d, const float *restrict s, size_t n) { BLOCKS_OF_8(STEP_SUM_F); }
static void f32_max(float *restrict d, const float *restrict s, size_t n) { BLOCKS_OF_8(STEP_MAX); }
static void f32_min(float *restrict d, const float *restrict s, size_t n) { BLOCKS_OF_8(STEP_MIN); }
static void i32_sum(int32_t *restrict d, const int32_t *restrict s, size_t n) { BLOCKS_OF_8(STEP_SUM_I32); }
static void i32_max(int32_t *restrict d, const int32_t *restrict s, size_t n) { BLOCKS_OF_8(STEP_MAX); }
static void i32_min(int32_t *restrict d, const int32_t *restrict s, size_t n) { BLOCKS_OF_8(STEP_MIN); }
static void i64_sum(int64_t *restrict d, const int64_t *restrict s, size_t n) { BLOCKS_OF_8(STEP_SUM_I64); }
static void i64_max(int64_t *restrict d, const int64_t *restrict s, size_t n) { BLOCKS_OF_8(STEP_MAX); }
static void i64_min(int64_t *restrict d, const int64_t *restrict s, size_t n) { BLOCKS_OF_8(STEP_MIN); }

/* bf16: widen (a shift), reduce in f32, round back; all of it vectorizes. */
#define STEP_BF16(j, OP) d[j] = f32_to_bf16(OP(bf16_to_f32(d[j]), bf16_to_f32(s[j])))
#define BF_ADD(a, b) ((a) + (b))
#define STEP_BF16_SUM(j) STEP_BF16(j, BF_ADD)
#define STEP_BF16_MAX(j) STEP_BF16(j, MAX_OF)
#define STEP_BF16_MIN(j) STEP_BF16(j, MIN_OF)
static void bf16_sum(uint16_t *restrict d, const uint16_t *restrict s, size_t n) {
  BLOCKS_OF_8(STEP_BF16_SUM);
}
static void bf16_max(uint16_t *restrict d, const uint16_t *restrict s, size_t n) {
  BLOCKS_OF_8(STEP_BF16_MAX);
}
static void bf16_min(uint16_t *restrict d, const uint16_t *restrict s, size_t n) {
  BLOCKS_OF_8(STEP_BF16_MIN);
}

/* f16, portable: the conversions above, one element at a time. */
static void f16_portable(uint16_t *restrict d, const uint16_t *restrict s, size_t n, sg_reduce_op op) {
  for (size_t i = 0; i < n; i++) {
    float a = sg__f16_to_f32(d[i]), b = sg__f16_to_f32(s[i]), r;
    switch (op) {
      case SG_REDUCE_MAX: r = MAX_OF(a, b); break;
      case SG_REDUCE_MIN: r = MIN_OF(a, b); break;
      default: r = a + b; break;
    }
    d[i] = sg__f32_to_f16(r);
  }
}

#ifdef SG_HAVE_F16C_PATH
/* F16C converts exactly like sg__f16_to_f32 / sg__f32_to_f16 (IEEE round to
 * nearest even, subnormals, infinities) except NaNs, whose sign and payload
 * it keeps; making every NaN 0x7e00 after the narrowing, as the portable
 * code does, makes the two paths agree bit for bit, so ranks on different
 * CPUs still compute the same bits. */
__attribute__((target("avx,f16c"))) static __m256 f16c_op(__m256 a, __m256 b, sg_reduce_op op) {
  switch (op) {
    case SG_REDUCE_MAX: return _mm256_max_ps(a, b); /* a > b ? a : b, exactly MAX_OF (NaN: b) */
    case SG_REDUCE_MIN: return _mm256_min_ps(a, b); /* a < b ? a : b, exactly MIN_OF */
    default: return _mm256_add_ps(a, b);
  }
}

__attribute__((target("avx,f16c"))) static void f16_f16c(uint16_t *restrict d, const uint16_t *restrict s,
                                                         size_t n, sg_reduce_op op) {
  size_t i = 0;
  const __m128i exp_mask = _mm_set1_epi16(0x7c00), man_mask = _mm_set1_epi16(0x03ff);
  const __m128i qnan = _mm_set1_epi16(0x7e00), zero = _mm_setzero_si128();
  for (; i + 8 <= n; i += 8) {
    __m256 a = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(d + i)));
    __m256 b = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(s + i)));
    __m128i h = _mm256_cvtps_ph(f16c_op(a, b, op), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    /* NaN (exponent all ones, mantissa nonzero) -> 0x7e00. */
    __m128i is_nan = _mm_andnot_si128(_mm_cmpeq_epi16(_mm_and_si128(h, man_mask), zero),
                                      _mm_cmpeq_epi16(_mm_and_si128(h, exp_mask), exp_mask));
    h = _mm_or_si128(_mm_and_si128(is_nan, qnan), _mm_andnot_si128(is_nan, h));
    _mm_storeu_si128((__m128i *)(void *)(d + i), h);
  }
  if (i < n) f16_portable(d + i, s + i, n - i, op);
}

/* CPUID rather than __builtin_cpu_supports, which clang 14 lacks "f16c" for.
 * Communicators on several threads may race to fill the cache: relaxed
 * atomics, same answer. */
static int f16c_available(void) {
  static int cached = -1;
  int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (v >= 0) return v;
  unsigned a, b, c, d;
  v = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) && (c & bit_AVX) && (c & bit_OSXSAVE)) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    v = (lo & 6u) == 6u; /* the OS saves XMM and YMM state */
  }
  __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
  return v;
}
#endif

/* Tests turn this on to check the portable f16 path on CPUs with F16C. */
int sg__reduce_portable_f16 = 0;

void sg__reduce(void *dst, const void *src, size_t n, sg_dtype dtype, sg_reduce_op op) {
  int mx = op == SG_REDUCE_MAX, mn = op == SG_REDUCE_MIN; /* else SUM or AVG (reduced as a sum) */
  switch (dtype) {
    case SG_F32: mx ? f32_max(dst, src, n) : mn ? f32_min(dst, src, n) : f32_sum(dst, src, n); break;
    case SG_I32: mx ? i32_max(dst, src, n) : mn ? i32_min(dst, src, n) : i32_sum(dst, src, n); break;
    case SG_I64: mx ? i64_max(dst, src, n) : mn ? i64_min(dst, src, n) : i64_sum(dst, src, n); break;
    case SG_BF16: mx ? bf16_max(dst, src, n) : mn ? bf16_min(dst, src, n) : bf16_sum(dst, src, n); break;
    case SG_F16:
#ifdef SG_HAVE_F16C_PATH
      if (!sg__reduce_portable_f16 && f16c_available()) {
        f16_f16c(dst, src, n, op);
        break;
      }
#endif
      f16_portable(dst, src, n, op);
      break;
    default: break;
  }
}

#define STEP_DIV(j) d[j] = d[j] / w
#define STEP_DIV_BF16(j) d[j] = f32_to_bf16(bf16_to_f32(d[j]) / w)
static void f32_div(float *restrict d, size_t n, float w) { BLOCKS_OF_8(STEP_DIV); }
static void bf16_div(uint16_t *restrict d, size_t n, float w) { BLOCKS_OF_8(STEP_DIV_BF16); }

void sg__reduce_finish(void *dst, size_t n, sg_dtype dtype, sg_reduce_op op, int world) {
  if (op != SG_REDUCE_AVG || world <= 1) return;
  switch (dtype) {
    case SG_F32: f32_div(dst, n, (float)world); break;
    case SG_BF16: bf16_div(dst, n, (float)world); break;
    case SG_I32: {
      int32_t *d = dst;
      for (size_t i = 0; i < n; i++) d[i] /= world;
      break;
    }
    case SG_I64: {
      int64_t *d = dst;
      for (size_t i = 0; i < n; i++) d[i] /= world;
      break;
    }
    case SG_F16: {
      uint16_t *d = dst;
      for (size_t i = 0; i < n; i++) d[i] = sg__f32_to_f16(sg__f16_to_f32(d[i]) / (float)world);
      break;
    }
    default: break;
  }
}
