/* Float math for kernels: exp, erf, tanh and sigmoid, the order of row
 * sums, and the helpers the generated code calls (NaN-propagating max and
 * min, integer division and float-to-integer casts as the reference ops do
 * them). Shared by the C kernels (cpu_math.c, cpu_reduce.c) and every
 * generated program: the C emitter (cpu_emit.c) and the CUDA emitter
 * (cuda_emit.c) start their text with this file's, so a fused kernel, an
 * op's own C kernel and a CUDA kernel compute the same bits.
 *
 * libm's expf, erff and tanhf are calls the auto-vectorizer cannot see
 * into: a loop over them runs one element at a time. These functions are
 * straight-line code (selects, no branches, no calls) that computes in
 * double precision: the double result is within about 1e-13 relative of the
 * exact value, so the float it rounds to is the correctly rounded one
 * except within that distance of a rounding boundary -- libm's result,
 * practically (tests/unit/test_sgk_math.c counts the differences). NaN
 * passes through; infinities, overflow, underflow to subnormals and signed
 * zeros follow C's functions.
 *
 * No FMA contraction: the library and the generated C are compiled with
 * -ffp-contract=off and CUDA programs with --fmad=false, so every compiler,
 * ISA and GPU computes the same bits.
 *
 * Two dialects: plain C11, and CUDA C++ as NVRTC compiles it without any
 * header (__CUDACC__; the CUDA program's prelude defines the fixed-width
 * integer types and their limits first). SGK_FN, SGK_RESTRICT and the NaN and infinity constants
 * are the words that differ. */
#ifndef SGK_MATH_H
#define SGK_MATH_H

#if defined(__CUDACC__)
#define SGK_FN static __device__ __forceinline__
#define SGK_RESTRICT __restrict__
#define SGK_NANF __int_as_float(0x7fc00000)
#define SGK_INFF __int_as_float(0x7f800000)
#define SGK_NAN __longlong_as_double(0x7ff8000000000000LL)
#define SGK_INF __longlong_as_double(0x7ff0000000000000LL)
SGK_FN uint64_t sgk_bits(double x) { return (uint64_t)__double_as_longlong(x); }
SGK_FN double sgk_from_bits(uint64_t u) { return __longlong_as_double((long long)u); }
#else
#include <stdint.h>
#include <string.h>
#define SGK_FN static inline
#define SGK_RESTRICT restrict
#define SGK_NANF __builtin_nanf("")
#define SGK_INFF __builtin_inff()
#define SGK_NAN __builtin_nan("")
#define SGK_INF __builtin_inf()
SGK_FN uint64_t sgk_bits(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}
SGK_FN double sgk_from_bits(uint64_t u) {
  double x;
  memcpy(&x, &u, sizeof x);
  return x;
}
#endif

/* NaN-propagating max and min (either operand NaN: that NaN), C's integer
 * division made total (x / 0 = 0, MIN / -1 = MIN, as cpu_binary.c), and
 * float-to-integer casts that give 0 for NaN and out-of-range values. */
SGK_FN float sgk_maxf(float a, float b) { return a != a ? a : b != b ? b : a > b ? a : b; }
SGK_FN float sgk_minf(float a, float b) { return a != a ? a : b != b ? b : a < b ? a : b; }
SGK_FN int32_t sgk_div32(int32_t a, int32_t b) {
  return b == 0 ? 0 : (a == INT32_MIN && b == -1) ? a : a / b;
}
SGK_FN int64_t sgk_div64(int64_t a, int64_t b) {
  return b == 0 ? 0 : (a == INT64_MIN && b == -1) ? a : a / b;
}
SGK_FN int32_t sgk_f2i32(float x) {
  return x == x && x >= -2147483648.0f && x < 2147483648.0f ? (int32_t)x : 0;
}
SGK_FN int64_t sgk_f2i64(float x) {
  return x == x && x >= -9223372036854775808.0f && x < 9223372036854775808.0f ? (int64_t)x : 0;
}

/* c[0] x^(n-1) + ... + c[n-1], by Horner's rule (the loop is unrolled by
 * the compiler: n is a constant at every call). */
SGK_FN double sgk_horner(const double *c, int n, double x) {
  double p = c[0];
  for (int i = 1; i < n; i++) p = p * x + c[i];
  return p;
}

/* e^x for |x| <= 700: x = n ln2 + r with |r| <= ln2 / 2, e^r by its Taylor
 * series to r^11 / 11! (truncation under 1e-14), 2^n built from its bits.
 * Adding 1.5 * 2^52 rounds x / ln2 to the integer n and leaves n in the low
 * bits of the sum, so no float-to-integer conversion is needed (one that
 * AVX2 lacks for 64-bit lanes). */
SGK_FN double sgk_exp_d(double x) {
  const double shift = 0x1.8p52;
  double t = x * 0x1.71547652b82fep0 + shift; /* x / ln2 + shift */
  double n = t - shift;
  double r = x - n * 0x1.62e42fefa39efp-1;
  static const double taylor[] = {0x1.ae64567f544e4p-26,
                                  0x1.27e4fb7789f5cp-22,
                                  0x1.71de3a556c734p-19,
                                  0x1.a01a01a01a01ap-16,
                                  0x1.a01a01a01a01ap-13,
                                  0x1.6c16c16c16c17p-10,
                                  0x1.1111111111111p-7,
                                  0x1.5555555555555p-5,
                                  0x1.5555555555555p-3,
                                  0.5,
                                  1.0,
                                  1.0}; /* 1/11! .. 1/0! */
  double p = sgk_horner(taylor, sizeof taylor / sizeof *taylor, r);
  uint64_t scale_bits = (sgk_bits(t) - 0x4338000000000000u + 1023u) << 52; /* 2^n */
  return p * sgk_from_bits(scale_bits);
}

SGK_FN float sgk_expf(float x) {
  /* Clamped where the float result is 0 or infinite already (e^89 is
   * finite as a double and rounds to infinity as a float). Every value is
   * computed and then selected, never branched on: a loop over this stays
   * one basic block, which GCC needs to vectorize it. */
  double d = x;
  d = d < -104.0 ? -104.0 : d;
  d = d > 89.0 ? 89.0 : d;
  d = x != x ? 0.0 : d;
  float y = (float)sgk_exp_d(d);
  return x != x ? x : y;
}

/* erf: for |x| < 1 its Taylor series (to x^27, truncation under 1e-11:
 * alternating, terms 2 / sqrt(pi) x^(2n+1) / (n! (2n+1))); for 1 <= |x| < 4,
 * 1 - e^(-x^2) g(|x|), g(a) = erfc(a) e^(a^2) fitted by a polynomial of
 * degree 14 in (a - 2.5) / 1.5 (relative error 2.4e-10 in g, so under 4e-11
 * absolute in erf); from 4 on, +-1 (erf(x) rounds to 1 in float from 3.92).
 * x^2 is exact in double. */
SGK_FN float sgk_erff(float x) {
  double d = x != x ? 0.0 : (double)x;
  double a = d < 0 ? -d : d, z = d * d;
  double sign = d < 0 ? -1.0 : 1.0;
  /* 2 / sqrt(pi) (-1)^n / (n! (2n + 1)), n = 13 .. 0 */
  static const double taylor[] = {-0x1.d8453cb0c46eap-38, 0x1.9e6ad5e55a730p-34,  -0x1.51d7181c5d36dp-30,
                                  0x1.fcc5720624c1cp-27,  -0x1.5f742ec43e71ap-23, 0x1.b9e6c9dc651a3p-20,
                                  -0x1.f4d25c3e0c2ebp-17, 0x1.f9a326f9b89b7p-14,  -0x1.c02db40040b86p-11,
                                  0x1.565bcd0e6a53fp-8,   -0x1.b82ce31288b51p-6,  0x1.ce2f21a042be2p-4,
                                  -0x1.812746b0379e7p-2,  0x1.20dd750429b6dp+0};
  double s = sgk_horner(taylor, sizeof taylor / sizeof *taylor, z) * d;
  double c = a < 1.0 ? 1.0 : a;
  c = c > 4.0 ? 4.0 : c;
  double u = (c - 2.5) * 0x1.5555555555555p-1; /* (c - 2.5) / 1.5 */
  static const double fit[] = {1.8130110085989185e-06,  -5.0581802294316407e-06, 7.4735500648067752e-06,
                               -2.0489638039971951e-05, 6.3672364834328529e-05,  -0.00016449745452498389,
                               0.00040855915427951252,  -0.0010047884605097499,  0.0024037838258736681,
                               -0.0055709289593257284,  0.012489356649700811,    -0.027005275783523287,
                               0.056110494273150124,    -0.11152102074917533,    0.21080636405462364};
  double g = sgk_horner(fit, sizeof fit / sizeof *fit, u);
  double l = 1.0 - sgk_exp_d(-(c * c)) * g;
  l = a < 4.0 ? l : 1.0;
  double r = a < 1.0 ? s : sign * l;
  float y = (float)r;
  return x != x ? x : y;
}

/* tanh(x) = 1 - 2 / (e^(2|x|) + 1), with x's sign: in double the
 * cancellation for small |x| still leaves 1e-12 relative at 2^-12, below
 * which tanh(x) rounds to x itself (which keeps -0 and subnormals). */
SGK_FN float sgk_tanhf(float x) {
  double d = x != x ? 0.0 : (double)x;
  double a = d < 0 ? -d : d;
  double e = sgk_exp_d(2.0 * (a > 20.0 ? 20.0 : a));
  double t = 1.0 - 2.0 / (e + 1.0);
  t = d < 0 ? -t : t;
  float y = (float)t;
  y = a < 0x1p-12 ? x : y;
  return x != x ? x : y;
}

/* 1 / (1 + e^-x); beyond +-104 the float result is 1 or 0 already. */
SGK_FN float sgk_sigmoidf(float x) {
  double d = x;
  d = d < -104.0 ? -104.0 : d;
  d = d > 104.0 ? 104.0 : d;
  d = x != x ? 0.0 : d;
  float y = (float)(1.0 / (1.0 + sgk_exp_d(-d)));
  return x != x ? x : y;
}

/* Row sums (reduce_sum, reduce_mean and sum_to over a row's elements, in
 * cpu_reduce.c and in the generated kernels that end in such a sum):
 * element i of a row is added in double to lane i % SGK_SUM_LANES, each
 * lane in order, and the lanes combine as ((l0 + l1) + (l2 + l3)) + ((l4 +
 * l5) + (l6 + l7)). Eight independent chains instead of one: the loop
 * vectorizes and no longer waits on the latency of one add per element.
 * The order is fixed, so the sum depends on neither the ISA nor the thread
 * count. A row may be added in pieces whose starts are multiples of
 * SGK_SUM_LANES. */
#define SGK_SUM_LANES 8

SGK_FN void sgk_sum_add(double *SGK_RESTRICT l, const float *SGK_RESTRICT x, int64_t n) {
  int64_t i = 0;
  for (; i + SGK_SUM_LANES <= n; i += SGK_SUM_LANES)
    for (int j = 0; j < SGK_SUM_LANES; j++) l[j] += (double)x[i + j];
  for (int j = 0; i < n; i++, j++) l[j] += (double)x[i];
}

SGK_FN double sgk_sum_lanes(const double *l) {
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

#endif /* SGK_MATH_H */
