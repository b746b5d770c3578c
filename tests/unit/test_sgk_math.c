/* sgk_math.h (exp, erf, tanh, sigmoid of the C kernels and the generated
 * code) against libm in double precision rounded to float, the correctly
 * rounded result but for double rounding: on every 4099th float of the whole
 * range and on 2^20 points of [-10, 10], at most 1 ulp apart, and apart at
 * all on few points (an exhaustive run over all 2^32 floats found 1 for exp,
 * 1078 for erf, 108 for tanh, none for sigmoid); special values exactly: NaN,
 * +-inf, +-0, subnormals, the overflow and underflow thresholds of exp. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "backend/sgk_math.h"
#include "test_util.h"

typedef float (*fn32)(float);
typedef double (*fn64)(double);

static double sigmoid_d(double x) { return 1.0 / (1.0 + exp(-x)); }

/* Distance in ulps between two finite floats or infinities of one sign. */
static int64_t ulps(float a, float b) {
  int32_t i, j;
  memcpy(&i, &a, sizeof i);
  memcpy(&j, &b, sizeof j);
  int64_t x = i < 0 ? (int64_t)INT32_MIN - i : i, y = j < 0 ? (int64_t)INT32_MIN - j : j;
  return x > y ? x - y : y - x;
}

typedef struct tally {
  int64_t n, differ, worst;
  float worst_x;
} tally;

static void check_one(const char *name, fn32 f, fn64 ref, float x, tally *t) {
  float got = f(x), want = (float)ref((double)x);
  t->n++;
  if (isnan(want) || isnan(got)) {
    if (!(isnan(want) && isnan(got))) fail_msg("%s(%a) = %a, want %a", name, (double)x, got, want);
    return;
  }
  if (memcmp(&got, &want, sizeof got) == 0) return;
  t->differ++;
  int64_t u = ulps(got, want);
  if (u > t->worst) t->worst = u, t->worst_x = x;
}

static void sweep(const char *name, fn32 f, fn64 ref) {
  tally t = {0};
  for (uint64_t b = 0; b <= UINT32_MAX; b += 4099) {
    uint32_t u = (uint32_t)b;
    float x;
    memcpy(&x, &u, sizeof x);
    check_one(name, f, ref, x, &t);
  }
  for (int i = 0; i < (1 << 20); i++)
    check_one(name, f, ref, -10.0f + 20.0f * (float)i / (float)(1 << 20), &t);
  printf("%s: %lld points, %lld differ from libm's double rounded to float, worst %lld ulp (at %a)\n", name,
         (long long)t.n, (long long)t.differ, (long long)t.worst, (double)t.worst_x);
  if (t.worst > 1)
    fail_msg("%s: %lld ulp from the reference at %a", name, (long long)t.worst, (double)t.worst_x);
  if (t.differ * 10000 > t.n)
    fail_msg("%s: %lld of %lld points differ", name, (long long)t.differ, (long long)t.n);
}

static void test_exp(void **state) {
  (void)state;
  sweep("exp", sgk_expf, exp);
}
static void test_erf(void **state) {
  (void)state;
  sweep("erf", sgk_erff, erf);
}
static void test_tanh(void **state) {
  (void)state;
  sweep("tanh", sgk_tanhf, tanh);
}
static void test_sigmoid(void **state) {
  (void)state;
  sweep("sigmoid", sgk_sigmoidf, sigmoid_d);
}

static void same_bits(float got, float want, const char *what) {
  if (memcmp(&got, &want, sizeof got) != 0 && !(isnan(got) && isnan(want)))
    fail_msg("%s = %a, want %a", what, (double)got, (double)want);
}

static void test_specials(void **state) {
  (void)state;
  const float inf = INFINITY, tiny = 0x1p-149f, max_finite_exp = 0x1.62e42ep6f;
  same_bits(sgk_expf(NAN), NAN, "exp(nan)");
  same_bits(sgk_expf(inf), inf, "exp(inf)");
  same_bits(sgk_expf(-inf), 0.0f, "exp(-inf)");
  same_bits(sgk_expf(0.0f), 1.0f, "exp(0)");
  same_bits(sgk_expf(-0.0f), 1.0f, "exp(-0)");
  same_bits(sgk_expf(max_finite_exp), expf(max_finite_exp), "exp(largest x with a finite result)");
  same_bits(sgk_expf(nextafterf(max_finite_exp, inf)), inf, "exp(just above it)");
  same_bits(sgk_expf(-103.0f), expf(-103.0f), "exp(-103) (subnormal)");
  same_bits(sgk_expf(-104.0f), 0.0f, "exp(-104)");
  same_bits(sgk_erff(NAN), NAN, "erf(nan)");
  same_bits(sgk_erff(inf), 1.0f, "erf(inf)");
  same_bits(sgk_erff(-inf), -1.0f, "erf(-inf)");
  same_bits(sgk_erff(-0.0f), -0.0f, "erf(-0)");
  same_bits(sgk_erff(tiny), erff(tiny), "erf(smallest subnormal)");
  same_bits(sgk_erff(-5.0f), -1.0f, "erf(-5)");
  same_bits(sgk_tanhf(NAN), NAN, "tanh(nan)");
  same_bits(sgk_tanhf(inf), 1.0f, "tanh(inf)");
  same_bits(sgk_tanhf(-inf), -1.0f, "tanh(-inf)");
  same_bits(sgk_tanhf(-0.0f), -0.0f, "tanh(-0)");
  same_bits(sgk_tanhf(-tiny), -tiny, "tanh(-smallest subnormal)");
  same_bits(sgk_sigmoidf(NAN), NAN, "sigmoid(nan)");
  same_bits(sgk_sigmoidf(inf), 1.0f, "sigmoid(inf)");
  same_bits(sgk_sigmoidf(-inf), 0.0f, "sigmoid(-inf)");
  same_bits(sgk_sigmoidf(0.0f), 0.5f, "sigmoid(0)");
  same_bits(sgk_sigmoidf(-100.0f), (float)sigmoid_d(-100.0), "sigmoid(-100) (subnormal)");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_exp),     cmocka_unit_test(test_erf),      cmocka_unit_test(test_tanh),
      cmocka_unit_test(test_sigmoid), cmocka_unit_test(test_specials),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
