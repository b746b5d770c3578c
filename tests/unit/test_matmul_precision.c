/* sg_session_params.matmul_precision (docs/precision.md):
 *  - SG_MATMUL_BF16: every form of gemm (both transposes, a bias, alpha and
 *    beta with a C epilogue) and of batched matmul (broadcast batch dims)
 *    gives the product of the operands rounded to bfloat16 (to nearest
 *    even, done here by hand) summed in double, within f32 summation error,
 *    and is far from the exact f32 product: a kernel that ignored the
 *    option would fail;
 *  - SG_MATMUL_F32 (and the default) gives the exact product, far from the
 *    rounded one;
 *  - SG_MATMUL_PRECISION in the environment sets the default, a parameter
 *    wins over it, and bad values of either are refused naming the value;
 *  - on a CPU without bf16 dot-product instructions (or one limited by
 *    ONEDNN_MAX_CPU_ISA=AVX2, as the numerics run does) bf16 is refused at
 *    session create with a message that says why, and so it is on device
 *    "cuda" (before any GPU is looked for, so on this machine too). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#define M 37
#define K 300
#define N 45
#define BATCH_A 2
#define BATCH_B 3

/* bf16 rounding to nearest even, as a CPU's vcvtneps2bf16 does (no NaNs here). */
static float bf16(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  u &= 0xFFFF0000u;
  memcpy(&x, &u, sizeof x);
  return x;
}

typedef enum form { GEMM_NN, GEMM_TN, GEMM_NT, GEMM_TT, GEMM_BIAS, GEMM_EPILOGUE, MATMUL_BATCHED } form;
static const char *const form_names[] = {
    "gemm",        "gemm trans_a",          "gemm trans_b",  "gemm both transposed",
    "gemm + bias", "gemm alpha 0.5 beta 2", "batched matmul"};

/* Operands of one form: a, b (and c), filled with values in [-1, 1). */
typedef struct operands {
  float a[BATCH_A * BATCH_B * M * K], b[BATCH_B * K * N], c[M * N];
  int64_t ad[4], bd[3], cd[2];
  int an, bn, cn;
} operands;

static void make_operands(form f, operands *o) {
  memset(o, 0, sizeof *o);
  bool ta = f == GEMM_TN || f == GEMM_TT, tb = f == GEMM_NT || f == GEMM_TT;
  if (f == MATMUL_BATCHED) {
    o->an = 4, o->ad[0] = BATCH_A, o->ad[1] = BATCH_B, o->ad[2] = M, o->ad[3] = K;
    o->bn = 3, o->bd[0] = BATCH_B, o->bd[1] = K, o->bd[2] = N;
  } else {
    o->an = 2, o->ad[0] = ta ? K : M, o->ad[1] = ta ? M : K;
    o->bn = 2, o->bd[0] = tb ? N : K, o->bd[1] = tb ? K : N;
  }
  if (f == GEMM_BIAS) o->cn = 1, o->cd[0] = N;
  if (f == GEMM_EPILOGUE) o->cn = 2, o->cd[0] = M, o->cd[1] = N;
  sg_test_fill(o->a, sizeof o->a / sizeof o->a[0], 11 + (uint64_t)f);
  sg_test_fill(o->b, sizeof o->b / sizeof o->b[0], 23 + (uint64_t)f);
  sg_test_fill(o->c, sizeof o->c / sizeof o->c[0], 37 + (uint64_t)f);
}

static int64_t out_numel(form f) { return f == MATMUL_BATCHED ? BATCH_A * BATCH_B * M * N : M * N; }

/* The product in double, of the operands as given or rounded to bf16 (c is
 * never rounded: it is not an operand of the products). */
static void reference(form f, const operands *o, bool round, double *y) {
  bool ta = f == GEMM_TN || f == GEMM_TT, tb = f == GEMM_NT || f == GEMM_TT;
  int batches = f == MATMUL_BATCHED ? BATCH_A * BATCH_B : 1;
  double alpha = f == GEMM_EPILOGUE ? 0.5 : 1.0, beta = f == GEMM_EPILOGUE ? 2.0 : 1.0;
  for (int bt = 0; bt < batches; bt++) {
    const float *a = o->a + (int64_t)bt * M * K, *b = o->b + (int64_t)(bt % BATCH_B) * K * N;
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) {
        double s = 0;
        for (int k = 0; k < K; k++) {
          float x = ta ? a[k * M + i] : a[i * K + k], w = tb ? b[j * K + k] : b[k * N + j];
          s += round ? (double)bf16(x) * bf16(w) : (double)x * w;
        }
        s *= alpha;
        if (f == GEMM_BIAS) s += o->c[j];
        if (f == GEMM_EPILOGUE) s += beta * o->c[i * N + j];
        y[(int64_t)bt * M * N + i * N + j] = s;
      }
  }
}

/* Runs form f in a session on `device` with `precision`; returns the session's status. */
static sg_status run_on(const char *device, form f, const operands *o, int precision, float *y) {
  sg_graph *g = NULL;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  sg_tensor a = sg_graph_add_tensor(g, "a", SG_F32, SG_ROLE_INPUT, o->an, o->ad, NULL);
  sg_tensor b = sg_graph_add_tensor(g, "b", SG_F32, SG_ROLE_INPUT, o->bn, o->bd, NULL);
  sg_tensor c = o->cn ? sg_graph_add_tensor(g, "c", SG_F32, SG_ROLE_INPUT, o->cn, o->cd, NULL) : SG_NO_TENSOR;
  sg_tensor out;
  if (f == MATMUL_BATCHED) {
    out = sg_matmul(g, a, b);
  } else {
    sg_gemm_params gp = SG_GEMM_PARAMS_INIT;
    gp.trans_a = f == GEMM_TN || f == GEMM_TT;
    gp.trans_b = f == GEMM_NT || f == GEMM_TT;
    if (f == GEMM_EPILOGUE) gp.alpha = 0.5, gp.beta = 2.0;
    out = sg_gemm(g, a, b, c, &gp);
  }
  assert_true(out.id >= 0);
  assert_status(sg_tensor_set_name(g, out, "y"), SG_OK, NULL);
  assert_status(sg_graph_mark_output(g, out), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sp.threads = 2;
  sp.device = device;
  sp.matmul_precision = precision;
  sg_session *s = NULL;
  sg_status st = sg_session_create(g, &sp, &s);
  if (st == SG_OK) {
    assert_status(sg_session_compile(s), SG_OK, NULL);
    assert_status(sg_session_set_input(s, "a", SG_F32, o->an, o->ad, o->a), SG_OK, NULL);
    assert_status(sg_session_set_input(s, "b", SG_F32, o->bn, o->bd, o->b), SG_OK, NULL);
    if (o->cn) assert_status(sg_session_set_input(s, "c", SG_F32, o->cn, o->cd, o->c), SG_OK, NULL);
    assert_status(sg_session_forward(s), SG_OK, NULL);
    assert_status(sg_session_read(s, "y", y, (size_t)out_numel(f) * sizeof *y), SG_OK, NULL);
  }
  sg_session_destroy(s);
  sg_graph_destroy(g);
  return st;
}

static sg_status run(form f, const operands *o, int precision, float *y) {
  return run_on("cpu", f, o, precision, y);
}

/* ||y - want|| / ||want||. */
static double rel_err(const float *y, const double *want, int64_t n) {
  double d = 0, w = 0;
  for (int64_t i = 0; i < n; i++) {
    d += (y[i] - want[i]) * (y[i] - want[i]);
    w += want[i] * want[i];
  }
  return sqrt(d / w);
}

/* Runs every form; `close` is the reference it must match (rounded or
 * exact), the other one it must stay away from. */
static void check_forms(int precision, bool rounded) {
  static operands o;
  static float y[BATCH_A * BATCH_B * M * N];
  static double exact[BATCH_A * BATCH_B * M * N], round[BATCH_A * BATCH_B * M * N];
  for (form f = GEMM_NN; f <= MATMUL_BATCHED; f++) {
    make_operands(f, &o);
    assert_status(run(f, &o, precision, y), SG_OK, NULL);
    reference(f, &o, false, exact);
    reference(f, &o, true, round);
    int64_t n = out_numel(f);
    double e_near = rel_err(y, rounded ? round : exact, n), e_far = rel_err(y, rounded ? exact : round, n);
    printf("%-24s %s: %.2e from the %s product, %.2e from the %s one\n", form_names[f],
           rounded ? "bf16" : "f32", e_near, rounded ? "bf16-rounded" : "exact", e_far,
           rounded ? "exact" : "bf16-rounded");
    /* f32 sums of K = 300 terms: a few 1e-7 normwise; bf16 rounding moves
     * each operand by up to 2^-9 relative, so the two references are ~1e-3
     * apart. */
    assert_true(e_near <= 1e-5);
    assert_true(e_far >= 1e-4);
  }
}

/* Whether this CPU (as oneDNN sees it) runs bf16 products; if not, the
 * refusal must say why. */
static bool bf16_available(void) {
  static operands o;
  static float y[M * N];
  make_operands(GEMM_NN, &o);
  sg_status st = run(GEMM_NN, &o, SG_MATMUL_BF16, y);
  if (st == SG_OK) return true;
  assert_int_equal(st, SG_ERR_UNSUPPORTED);
  assert_non_null(strstr(sg_last_error(), "AVX512_BF16"));
  printf("bf16 refused here, as it should be: %s\n", sg_last_error());
  return false;
}

static void test_f32_is_exact(void **state) {
  (void)state;
  unsetenv("SG_MATMUL_PRECISION");
  check_forms(SG_MATMUL_F32, false);
  check_forms(SG_MATMUL_DEFAULT, false);
}

static void test_bf16_rounds_operands(void **state) {
  (void)state;
  unsetenv("SG_MATMUL_PRECISION");
  if (!bf16_available()) skip();
  check_forms(SG_MATMUL_BF16, true);
}

static void test_environment(void **state) {
  (void)state;
  static operands o;
  static float y[M * N];
  static double exact[M * N];
  make_operands(GEMM_NN, &o);
  reference(GEMM_NN, &o, false, exact);
  setenv("SG_MATMUL_PRECISION", "fp8", 1);
  assert_status(run(GEMM_NN, &o, SG_MATMUL_DEFAULT, y), SG_ERR_INVALID_ARG, "SG_MATMUL_PRECISION is 'fp8'");
  /* A parameter wins over the environment, even a bad one. */
  assert_status(run(GEMM_NN, &o, SG_MATMUL_F32, y), SG_OK, NULL);
  assert_true(rel_err(y, exact, M * N) <= 1e-5);
  setenv("SG_MATMUL_PRECISION", "bf16", 1);
  assert_status(run(GEMM_NN, &o, SG_MATMUL_F32, y), SG_OK, NULL);
  assert_true(rel_err(y, exact, M * N) <= 1e-5);
  sg_status st = run(GEMM_NN, &o, SG_MATMUL_DEFAULT, y);
  if (st == SG_OK) assert_true(rel_err(y, exact, M * N) >= 1e-4); /* the environment's bf16 */
  else assert_int_equal(st, SG_ERR_UNSUPPORTED);
  unsetenv("SG_MATMUL_PRECISION");
  assert_status(run(GEMM_NN, &o, 3, y), SG_ERR_INVALID_ARG, "matmul_precision is 3");
  assert_status(run(GEMM_NN, &o, -1, y), SG_ERR_INVALID_ARG, "matmul_precision is -1");
}

static void test_cuda_refuses_bf16(void **state) {
  (void)state;
  static operands o;
  static float y[M * N];
  make_operands(GEMM_NN, &o);
  sg_status st = run_on("cuda", GEMM_NN, &o, SG_MATMUL_BF16, y);
  if (st == SG_ERR_NOT_FOUND) skip(); /* a build without the CUDA backend */
  assert_int_equal(st, SG_ERR_UNSUPPORTED);
  assert_non_null(strstr(sg_last_error(), "SG_CUDA_TF32"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_f32_is_exact),
      cmocka_unit_test(test_bf16_rounds_operands),
      cmocka_unit_test(test_environment),
      cmocka_unit_test(test_cuda_refuses_bf16),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
