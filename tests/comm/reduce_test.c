/* The collectives' element-wise reductions (src/comm/reduce.c) against
 * references written here from the IEEE definitions, in double precision:
 *  - f16 <-> f32 conversions: every f16 value; f32 -> f16 over a sweep of
 *    2^32 / 4099 bit patterns (round to nearest even, subnormals, overflow)
 *  - f16 reductions on the F16C path and on the portable path: every op over
 *    all pairs of a 1024-value set that covers each exponent, subnormals,
 *    infinities and NaNs, plus 2^20 random pairs; the two paths must agree bit for
 *    bit (ranks on different CPUs must compute the same bits)
 *  - bf16, f32, i32, i64 for every op and length 0..70 (the 8-wide blocks and
 *    their tails), NaNs included; AVG's final division
 * Exits 0 when everything matches. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_internal.h"

static int failures;
#define EXPECT(cond, ...)                                    \
  do {                                                       \
    if (!(cond)) {                                           \
      if (failures++ < 20) {                                 \
        fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__);                        \
        fputc('\n', stderr);                                 \
      }                                                      \
    }                                                        \
  } while (0)

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

/* ---- references ------------------------------------------------------------ */

static double ref_f16_value(uint16_t h) {
  int sign = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v;
  if (e == 0) v = ldexp(m, -24);
  else if (e == 31) v = m ? NAN : INFINITY;
  else v = ldexp(1024 + m, e - 25);
  return sign ? -v : v;
}

/* Round to nearest even from the value itself (double holds every f32 exactly). */
static uint16_t ref_to_f16(float f) {
  uint16_t sign = (f2u(f) >> 16) & 0x8000;
  if (isnan(f)) return 0x7e00; /* one canonical NaN: which NaN an add returns is not reproducible */
  double x = fabs((double)f);
  if (x >= 65520.0) return (uint16_t)(sign | 0x7c00);
  if (x < ldexp(1, -14))
    return (uint16_t)(sign | (uint16_t)nearbyint(ldexp(x, 24))); /* 1024 = smallest normal */
  int e;
  frexp(x, &e);                           /* x = f * 2^e, f in [0.5, 1): f16 exponent e - 1 */
  double q = nearbyint(ldexp(x, 11 - e)); /* 1024 .. 2048 */
  return (uint16_t)(sign | (((e - 1 + 15) << 10) + (int)q - 1024)); /* a carry lands in the exponent */
}

static uint16_t ref_to_bf16(float f) {
  uint32_t u = f2u(f);
  if (isnan(f)) return 0x7fc0;
  uint32_t lo = u & 0xffff0000u, hi = lo + 0x10000u;
  double x = (double)f, vlo = (double)u2f(lo);
  /* Past the largest finite bf16 the upper candidate is infinity: weigh it as 2^128. */
  double vhi = (hi & 0x7fffffffu) == 0x7f800000u ? copysign(ldexp(1, 128), x) : (double)u2f(hi);
  double dlo = fabs(x - vlo), dhi = fabs(vhi - x);
  if (dlo < dhi || (dlo == dhi && ((lo >> 16) & 1) == 0)) return (uint16_t)(lo >> 16);
  return (uint16_t)(hi >> 16);
}

static float ref_op(float a, float b, sg_reduce_op op) {
  if (op == SG_REDUCE_MAX) return a > b ? a : b;
  if (op == SG_REDUCE_MIN) return a < b ? a : b;
  return a + b;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* ---- checks ---------------------------------------------------------------- */

static void check_conversions(void) {
  for (uint32_t h = 0; h < 65536; h++) {
    double want = ref_f16_value((uint16_t)h);
    float got = sg__f16_to_f32((uint16_t)h);
    EXPECT(isnan(want) ? isnan(got) : (double)got == want && !signbit(got) == !signbit(want),
           "f16 0x%04x widened to %g, want %g", h, got, want);
  }
  for (uint64_t u = 0; u < (1ull << 32); u += 4099) {
    float f = u2f((uint32_t)u);
    uint16_t got = sg__f32_to_f16(f), want = ref_to_f16(f);
    EXPECT(got == want, "f32 0x%08x narrowed to f16 0x%04x, want 0x%04x", (uint32_t)u, got, want);
    got = sg__f32_to_bf16(f), want = ref_to_bf16(f);
    EXPECT(got == want, "f32 0x%08x narrowed to bf16 0x%04x, want 0x%04x", (uint32_t)u, got, want);
  }
}

/* Every op over pairs (a[i], b[i]) on both f16 paths and against the reference. */
static void check_f16_pairs(const uint16_t *a, const uint16_t *b, size_t n) {
  static const sg_reduce_op ops[] = {SG_REDUCE_SUM, SG_REDUCE_MAX, SG_REDUCE_MIN};
  uint16_t *fast = malloc(n * 2), *slow = malloc(n * 2);
  if (!fast || !slow) abort();
  for (size_t o = 0; o < 3; o++) {
    memcpy(fast, a, n * 2);
    memcpy(slow, a, n * 2);
    sg__reduce_portable_f16 = 0;
    sg__reduce(fast, b, n, SG_F16, ops[o]);
    sg__reduce_portable_f16 = 1;
    sg__reduce(slow, b, n, SG_F16, ops[o]);
    sg__reduce_portable_f16 = 0;
    for (size_t i = 0; i < n; i++) {
      uint16_t want = ref_to_f16(ref_op((float)ref_f16_value(a[i]), (float)ref_f16_value(b[i]), ops[o]));
      EXPECT(fast[i] == want && slow[i] == want,
             "f16 op %d of 0x%04x, 0x%04x: fast 0x%04x portable 0x%04x want 0x%04x", (int)ops[o], a[i], b[i],
             fast[i], slow[i], want);
    }
  }
  free(fast);
  free(slow);
}

static void check_f16_reduce(void) {
  /* 1024 values: every sign x exponent with 16 mantissas (both ends of the
   * binade, odd and even), so that sums hit halfway cases in every binade. */
  enum { SET = 1024 };
  uint16_t set[SET];
  size_t k = 0;
  for (int s = 0; s < 2; s++)
    for (int e = 0; e < 32; e++)
      for (int m = 0; m < 16; m++) {
        int mant = m < 8 ? m : 1023 - (m - 8) * 5;
        set[k++] = (uint16_t)(s << 15 | e << 10 | mant);
      }
  size_t n = (size_t)SET * SET;
  uint16_t *a = malloc(n * 2), *b = malloc(n * 2);
  if (!a || !b) abort();
  for (size_t i = 0; i < SET; i++)
    for (size_t j = 0; j < SET; j++) a[i * SET + j] = set[i], b[i * SET + j] = set[j];
  check_f16_pairs(a, b, n);
  for (size_t i = 0; i < n; i++) a[i] = (uint16_t)next_rand(), b[i] = (uint16_t)next_rand();
  check_f16_pairs(a, b, n);
  free(a);
  free(b);
}

static float rand_float(void) {
  uint64_t r = next_rand();
  if (r % 97 == 0) return NAN;
  if (r % 89 == 0) return -0.0f;
  return (float)((int)(r % 2001) - 1000) / 8.0f;
}

/* bf16, f32, i32, i64: every op, every length 0..70, NaNs for the float types. */
static void check_numeric(void) {
  static const sg_reduce_op ops[] = {SG_REDUCE_SUM, SG_REDUCE_AVG, SG_REDUCE_MAX, SG_REDUCE_MIN};
  enum { MAXN = 70 };
  for (size_t n = 0; n <= MAXN; n++)
    for (size_t o = 0; o < 4; o++) {
      sg_reduce_op op = ops[o];
      float fa[MAXN] = {0}, fb[MAXN] = {0}, fd[MAXN];
      uint16_t ba[MAXN] = {0}, bb[MAXN] = {0}, bd[MAXN];
      int32_t ia[MAXN] = {0}, ib[MAXN] = {0}, id[MAXN];
      int64_t la[MAXN] = {0}, lb[MAXN] = {0}, ld[MAXN];
      for (size_t i = 0; i < n; i++) {
        fa[i] = rand_float(), fb[i] = rand_float();
        ba[i] = (uint16_t)(f2u(rand_float()) >> 16), bb[i] = (uint16_t)(f2u(rand_float()) >> 16);
        ia[i] = (int32_t)next_rand(), ib[i] = (int32_t)next_rand();
        la[i] = (int64_t)next_rand(), lb[i] = (int64_t)next_rand();
      }
      memcpy(fd, fa, sizeof fd);
      memcpy(bd, ba, sizeof bd);
      memcpy(id, ia, sizeof id);
      memcpy(ld, la, sizeof ld);
      sg__reduce(fd, fb, n, SG_F32, op);
      sg__reduce(bd, bb, n, SG_BF16, op);
      sg__reduce(id, ib, n, SG_I32, op);
      sg__reduce(ld, lb, n, SG_I64, op);
      sg__reduce_finish(fd, n, SG_F32, op, 3);
      sg__reduce_finish(bd, n, SG_BF16, op, 3);
      sg__reduce_finish(id, n, SG_I32, op, 3);
      sg__reduce_finish(ld, n, SG_I64, op, 3);
      for (size_t i = 0; i < n; i++) {
        float wf = ref_op(fa[i], fb[i], op);
        if (op == SG_REDUCE_AVG) wf /= 3.0f;
        EXPECT(f2u(fd[i]) == f2u(wf) || (isnan(fd[i]) && isnan(wf)), "f32 op %d n %zu [%zu]: %g, want %g",
               (int)op, n, i, fd[i], wf);
        float wb = ref_op(u2f((uint32_t)ba[i] << 16), u2f((uint32_t)bb[i] << 16), op);
        uint16_t wbb = ref_to_bf16(wb);
        if (op == SG_REDUCE_AVG) wbb = ref_to_bf16(u2f((uint32_t)wbb << 16) / 3.0f);
        EXPECT(bd[i] == wbb, "bf16 op %d n %zu [%zu]: 0x%04x, want 0x%04x", (int)op, n, i, bd[i], wbb);
        int64_t wi = op == SG_REDUCE_MAX   ? (ia[i] > ib[i] ? ia[i] : ib[i])
                     : op == SG_REDUCE_MIN ? (ia[i] < ib[i] ? ia[i] : ib[i])
                                           : (int32_t)((uint32_t)ia[i] + (uint32_t)ib[i]);
        if (op == SG_REDUCE_AVG) wi = (int32_t)wi / 3;
        EXPECT(id[i] == wi, "i32 op %d n %zu [%zu]: %d, want %lld", (int)op, n, i, id[i], (long long)wi);
        int64_t wl = op == SG_REDUCE_MAX   ? (la[i] > lb[i] ? la[i] : lb[i])
                     : op == SG_REDUCE_MIN ? (la[i] < lb[i] ? la[i] : lb[i])
                                           : (int64_t)((uint64_t)la[i] + (uint64_t)lb[i]);
        if (op == SG_REDUCE_AVG) wl /= 3;
        EXPECT(ld[i] == wl, "i64 op %d n %zu [%zu]: %lld, want %lld", (int)op, n, i, (long long)ld[i],
               (long long)wl);
      }
    }
}

int main(void) {
  check_conversions();
  check_f16_reduce();
  check_numeric();
  if (failures) {
    fprintf(stderr, "%d mismatches\n", failures);
    return 1;
  }
  printf("reductions match the references\n");
  return 0;
}
