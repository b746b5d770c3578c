/* The CUDA emitter (backend/cuda/cuda_emit.c) without a GPU. Its programs
 * run on the host (cuda_emu.h: compiled as C++ behind a shim that runs a
 * launch as CUDA would), and every
 * output is compared with the C emitter's kernel for the same IR run on the
 * CPU: bitwise for elementwise values (both dialects compute sgk_math.h's
 * functions and IEEE arithmetic, without contraction), within 2 ulp for
 * sums (the C kernels add a row in eight lanes, a CUDA team in its own fixed
 * tree; both in double). Kernels: hand-built ones with broadcasting,
 * integers, casts, selects, NaN, infinities and -0, both sum geometries
 * with strides that do not merge, a prologue that writes its state back and
 * outputs written in place; then every distinct kernel that the fusion pass
 * makes of an MLP trained with SGD, one with LayerNorm and GELU written out
 * and AdamW, and ResNet-50 (small images) trained with SGD and with AdamW;
 * and transposes (a load through permuted strides), also checked against
 * the CPU backend's own transpose.
 * Grids of one to three blocks: the grid-stride loops are walked more than
 * once.
 *
 * Where the build has the CUDA toolkit (SG_HAVE_CUDA_BACKEND), NVRTC also
 * compiles each of those programs, and those of ResNet-50 at batch 32 and
 * 224 x 224, for sm_80 and sm_90: the text is valid CUDA, not only valid
 * host C++. The GPU itself runs them in scripts/gpu-check.sh. */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../examples/resnet50/resnet50_model.h"
#include "backend/cpu/cpu_internal.h"
#include "backend/cuda/cuda_emit.h"
#include "compile/plan.h"
#include "cuda_emu.h"
#include "test_util.h"
#if defined(SG_HAVE_CUDA_BACKEND)
#include "backend/cuda/cuda_nvrtc.h"
#endif

/* ---- the emulation of a launch ---------------------------------------------- */

/* After the program: a launcher for kernels taking the prelude's sgk_args. */
static const char launch_tail[] =
    "\ntypedef void (*sgk_kernel_fn)(const sgk_args);\n"
    "extern \"C\" int sgk_launch(sgk_kernel_fn fn, const sgk_args *a, unsigned grid, unsigned block) {\n"
    "  return cuda_emu_launch([=] { fn(*a); }, grid, block);\n"
    "}\n";

/* The prelude's argument struct, as the generated code lays it out. */
typedef struct emu_args {
  const void *in[SG__KIR_MAX_INPUTS];
  void *out[SG__KIR_MAX_OUTPUTS];
  const float *prm;
} emu_args;
typedef void (*emu_kernel)(emu_args);
typedef void (*emu_prologue)(emu_args, float *);
typedef int (*emu_launch)(emu_kernel, const emu_args *, unsigned, unsigned);

typedef struct emu {
  void *dl;
  emu_launch launch;
  char *src; /* the CUDA program */
} emu;

static void emu_build(emu *e, const sg__kir_kernel *const *ks, int n) {
  size_t len;
  assert_status(sg__cuda_emit(ks, n, &e->src, &len), SG_OK, NULL);
  assert_int_equal(strlen(e->src), len);
  e->dl = cuda_emu_load(e->src, launch_tail);
  *(void **)&e->launch = cuda_emu_symbol(e->dl, "sgk_launch");
}

static void emu_close(emu *e) {
  dlclose(e->dl);
  sg__free(e->src);
}

/* ---- buffers ------------------------------------------------------------------ */

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t next32(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (uint32_t)(rng >> 16);
}

static size_t dtype_size(sg_dtype t) { return t == SG_I64 ? 8 : t == SG_BOOL ? 1 : 4; }

/* Elements input j reaches: its largest offset plus one. */
static int64_t input_extent(const sg__kir_kernel *k, int j) {
  int64_t far = 0;
  for (int d = 0; d < k->ndim; d++) far += (k->dims[d] - 1) * k->in[j].strides[d];
  return k->numel == 0 ? 0 : far + 1;
}

static int64_t output_len(const sg__kir_kernel *k, int o) {
  if (!k->out_sum[o]) return k->numel;
  int64_t per;
  return sg__kir_range(k, &per);
}

/* Random values of dtype t, every 11th f32 a special one; f32 state that a
 * prologue reads (a step count) stays small and positive. */
static void fill(void *p, sg_dtype t, int64_t n, bool scalar) {
  static const float special[] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f, 1e-40f, 1e30f};
  for (int64_t i = 0; i < n; i++) {
    uint32_t r = next32();
    switch (t) {
      case SG_F32: {
        float v = scalar ? 0.5f + (float)(r % 100) / 50.0f : ((float)(r >> 8) / 8388608.0f - 1.0f) * 3.0f;
        if (!scalar && i % 11 == 7) v = special[(i / 11) % 7];
        ((float *)p)[i] = v;
        break;
      }
      case SG_I32: ((int32_t *)p)[i] = i % 17 == 3 ? INT32_MIN : (int32_t)(r % 200) - 100; break;
      case SG_I64: ((int64_t *)p)[i] = (int64_t)(r % 200) - 100; break;
      default: ((uint8_t *)p)[i] = (uint8_t)(r & 1); break;
    }
  }
}

/* One side's buffers: inputs (written by in-place outputs and prologues)
 * and outputs. */
typedef struct side {
  void *in[SG__KIR_MAX_INPUTS];
  void *out[SG__KIR_MAX_OUTPUTS];
} side;

static void side_alloc(side *s, const sg__kir_kernel *k, const side *from) {
  for (int j = 0; j < k->n_in; j++) {
    size_t bytes = (size_t)input_extent(k, j) * dtype_size(k->in[j].dtype) + 8;
    s->in[j] = malloc(bytes);
    if (from != NULL) memcpy(s->in[j], from->in[j], bytes);
    else fill(s->in[j], k->in[j].dtype, input_extent(k, j), sg__kir_input_scalar(k, j));
  }
  for (int o = 0; o < k->n_out; o++) {
    size_t bytes = (size_t)output_len(k, o) * dtype_size(k->out[o]) + 8;
    s->out[o] = malloc(bytes);
    memset(s->out[o], 0xa5, bytes);
  }
}

static void side_free(side *s, const sg__kir_kernel *k) {
  for (int j = 0; j < k->n_in; j++) free(s->in[j]);
  for (int o = 0; o < k->n_out; o++) free(s->out[o]);
}

/* The C kernel over its whole range, after its prologue. */
static void run_cpu(sg__jit_lib *lib, const sg__kir_kernel *k, side *s) {
  sg__jit_kernel_fn fn = sg__jit_symbol(lib, k->name);
  assert_non_null(fn);
  float prm[SG__KIR_MAX_PARAMS] = {0};
  void *in[SG__KIR_MAX_INPUTS + 1], *out[SG__KIR_MAX_OUTPUTS];
  for (int j = 0; j < k->n_in; j++) in[j] = s->in[j];
  in[k->n_in] = prm;
  if (k->n_pro > 0) sg__kir_prologue_run(k, in, prm);
  for (int o = 0; o < k->n_out; o++) out[o] = k->out_over[o] >= 0 ? s->in[k->out_over[o]] : s->out[o];
  int64_t per;
  fn(0, sg__kir_range(k, &per), (const void *const *)in, out);
}

/* The CUDA kernel as its launcher would start it, on a grid of `grid`
 * blocks (0: as many as the units need, at most three). */
static void run_cuda(emu *e, const sg__kir_kernel *k, side *s, unsigned grid) {
  emu_args a;
  memset(&a, 0, sizeof a);
  for (int j = 0; j < k->n_in; j++) a.in[j] = s->in[j];
  for (int o = 0; o < k->n_out; o++) a.out[o] = k->out_over[o] >= 0 ? NULL : s->out[o];
  float prm[SG__KIR_MAX_PARAMS] = {0};
  if (k->n_pro > 0) {
    char name[SG__KIR_NAME_MAX + 8];
    snprintf(name, sizeof name, "%s_pro", k->name);
    emu_prologue pro;
    *(void **)&pro = dlsym(e->dl, name);
    assert_non_null(pro);
    pro(a, prm); /* one thread: the caller's, whose blockIdx and threadIdx are 0 */
  }
  a.prm = prm;
  emu_kernel fn;
  *(void **)&fn = dlsym(e->dl, k->name);
  assert_non_null(fn);
  sg__cuda_geometry g;
  sg__cuda_geometry_of(k, &g);
  assert_true(g.threads >= 1 && g.threads <= SG__CUDA_BLOCK && g.lanes >= 1);
  assert_int_equal(g.threads % g.lanes, 0);
  assert_int_equal(g.threads / g.lanes, g.per_block);
  int64_t need = (g.units + g.per_block - 1) / g.per_block;
  if (grid == 0) grid = need < 1 ? 1 : need > 3 ? 3 : (unsigned)need;
  assert_int_equal(e->launch(fn, &a, grid, (unsigned)g.threads), 0);
}

/* Both sides on the same inputs; every output and every input compared. */
static void check_kernel(emu *e, sg__jit_lib *lib, const sg__kir_kernel *k, unsigned grid) {
  side c, u;
  side_alloc(&c, k, NULL);
  side_alloc(&u, k, &c);
  run_cpu(lib, k, &c);
  run_cuda(e, k, &u, grid);
  for (int o = 0; o < k->n_out; o++) {
    bool over = k->out_over[o] >= 0;
    const void *want = over ? c.in[k->out_over[o]] : c.out[o], *got = over ? u.in[k->out_over[o]] : u.out[o];
    int64_t n = output_len(k, o);
    if (k->out[o] != SG_F32) {
      if (memcmp(want, got, (size_t)n * dtype_size(k->out[o])) != 0)
        fail_msg("kernel %s output %d (dtype %d): CUDA and C differ", k->name, o, (int)k->out[o]);
      continue;
    }
    for (int64_t i = 0; i < n; i++) {
      float w = ((const float *)want)[i], g = ((const float *)got)[i];
      if (k->out_sum[o] ? !sg_test_close_ulp(g, w) : !sg_test_same_bits(g, w))
        fail_msg("kernel %s output %d element %lld of %lld: CUDA %a, C %a", k->name, o, (long long)i,
                 (long long)n, (double)g, (double)w);
    }
  }
  /* Prologue writes and in-place outputs (any NaN is a NaN: the IR pins no
   * payloads, and vectorized code may swap commutative operands). */
  for (int j = 0; j < k->n_in; j++) {
    int64_t n = input_extent(k, j);
    bool f32 = k->in[j].dtype == SG_F32;
    for (int64_t i = 0; i < (f32 ? n : 0); i++)
      if (!sg_test_same_bits(((float *)u.in[j])[i], ((float *)c.in[j])[i]))
        fail_msg("kernel %s input %d element %lld: CUDA leaves %a, C %a", k->name, j, (long long)i,
                 (double)((float *)u.in[j])[i], (double)((float *)c.in[j])[i]);
    if (!f32 && memcmp(c.in[j], u.in[j], (size_t)n * dtype_size(k->in[j].dtype)) != 0)
      fail_msg("kernel %s input %d: CUDA and C leave it different", k->name, j);
  }
  side_free(&c, k), side_free(&u, k);
}

/* Emits both programs for ks[0..n) and compares every kernel; grid 0: the
 * launcher's choice. */
static void check_kernels(const sg__kir_kernel *const *ks, int n, unsigned grid) {
  char *src;
  size_t len;
  assert_status(sg__cpu_emit_c(ks, n, &src, &len), SG_OK, NULL);
  sg__jit_lib *lib;
  assert_status(sg__jit_build(src, len, &lib), SG_OK, NULL);
  sg__free(src);
  emu e;
  emu_build(&e, ks, n);
  for (int i = 0; i < n; i++) check_kernel(&e, lib, ks[i], grid);
  emu_close(&e);
  sg__jit_close(lib);
}

/* ---- hand-built kernels ----------------------------------------------------- */

/* y = (a + bias[col]) * s - r[row] / e, max(a, e), min(a, e); then
 * integers, casts and a select: q = i32 a / b (x / 0 and MIN / -1), wrap
 * of a * 7, f32 -> i64 with NaN, cond ? a : -a. */
static void arith_kernel(sg__kir_kernel *k, const char *name, int64_t rows, int64_t cols) {
  int64_t dims[2] = {rows, cols}, per_col[2] = {0, 1}, per_row[2] = {1, 0}, scalar[2] = {0, 0};
  sg__kir_init(k, name, 2, dims);
  int a = sg__kir_load(k, sg__kir_input_add(k, SG_F32, NULL));
  int b = sg__kir_load(k, sg__kir_input_add(k, SG_F32, per_col));
  int s = sg__kir_load(k, sg__kir_input_add(k, SG_F32, scalar));
  int r = sg__kir_load(k, sg__kir_input_add(k, SG_F32, per_row));
  int e = sg__kir_load(k, sg__kir_input_add(k, SG_F32, NULL));
  int ia = sg__kir_load(k, sg__kir_input_add(k, SG_I32, NULL));
  int ib = sg__kir_load(k, sg__kir_input_add(k, SG_I32, per_row));
  int c = sg__kir_load(k, sg__kir_input_add(k, SG_BOOL, per_col));
  int y =
      sg__kir_binary(k, SG__KIR_SUB, sg__kir_binary(k, SG__KIR_MUL, sg__kir_binary(k, SG__KIR_ADD, a, b), s),
                     sg__kir_binary(k, SG__KIR_DIV, r, e));
  sg__kir_store(k, y);
  sg__kir_store(k, sg__kir_binary(k, SG__KIR_MAX, a, e));
  sg__kir_store(k, sg__kir_binary(k, SG__KIR_MIN, a, e));
  sg__kir_store(k, sg__kir_binary(k, SG__KIR_DIV, ia, ib));
  sg__kir_store(k, sg__kir_binary(k, SG__KIR_MUL, ia, sg__kir_const(k, SG_I32, 7)));
  sg__kir_store(k, sg__kir_cast(k, SG_I64, y));
  int sel = sg__kir_select(k, sg__kir_binary(k, SG__KIR_OR, c, sg__kir_binary(k, SG__KIR_LT, a, e)), a,
                           sg__kir_unary(k, SG__KIR_NEG, a));
  sg__kir_store(k, sg__kir_binary(k, SG__KIR_ADD, sel, sg__kir_const(k, SG_F32, -INFINITY)));
  assert_status(sg__kir_finish(k), SG_OK, NULL);
}

/* exp, erf, tanh, sigmoid, log, sqrt, 1/x, |x|, pow, sin, cos, acos and a
 * NaN constant, in place over x. */
static void unary_kernel(sg__kir_kernel *k, const char *name, int64_t n) {
  sg__kir_init(k, name, 1, &n);
  int ix = sg__kir_input_add(k, SG_F32, NULL);
  int x = sg__kir_load(k, ix);
  int v = sg__kir_binary(k, SG__KIR_ADD, sg__kir_unary(k, SG__KIR_EXP, x), sg__kir_unary(k, SG__KIR_ERF, x));
  v = sg__kir_binary(k, SG__KIR_MUL, v, sg__kir_unary(k, SG__KIR_TANH, x));
  v = sg__kir_binary(k, SG__KIR_SUB, v, sg__kir_unary(k, SG__KIR_SIGMOID, x));
  v = sg__kir_binary(k, SG__KIR_ADD, v, sg__kir_unary(k, SG__KIR_LOG, sg__kir_unary(k, SG__KIR_ABS, x)));
  v = sg__kir_binary(k, SG__KIR_ADD, v, sg__kir_unary(k, SG__KIR_SQRT, x));
  v = sg__kir_binary(k, SG__KIR_MAX, v, sg__kir_unary(k, SG__KIR_RECIP, x));
  v = sg__kir_binary(k, SG__KIR_ADD, v, sg__kir_binary(k, SG__KIR_POW, x, sg__kir_const(k, SG_F32, 2.5)));
  v = sg__kir_binary(k, SG__KIR_ADD, v, sg__kir_unary(k, SG__KIR_SIN, x));
  v = sg__kir_binary(k, SG__KIR_SUB, v, sg__kir_unary(k, SG__KIR_COS, x));
  v = sg__kir_binary(k, SG__KIR_ADD, v, sg__kir_unary(k, SG__KIR_ACOS, sg__kir_unary(k, SG__KIR_TANH, x)));
  v = sg__kir_binary(k, SG__KIR_MIN, v, sg__kir_const(k, SG_F32, NAN));
  sg__kir_set_inplace(k, sg__kir_store(k, v), ix);
  assert_status(sg__kir_finish(k), SG_OK, NULL);
}

/* v = a + b stored, and summed at `axis`; b read through bstrides. */
static void sum_kernel(sg__kir_kernel *k, const char *name, int nd, const int64_t *dims,
                       const int64_t *bstrides, sg__kir_sum sum, int axis, double scale) {
  sg__kir_init(k, name, nd, dims);
  sg__kir_set_sum(k, sum, axis);
  int a = sg__kir_load(k, sg__kir_input_add(k, SG_F32, NULL));
  int b = sg__kir_load(k, sg__kir_input_add(k, SG_F32, bstrides));
  int v = sg__kir_binary(k, SG__KIR_ADD, a, b);
  sg__kir_store(k, v);
  sg__kir_store_sum(k, v, scale);
  sg__kir_store_sum(k, sg__kir_binary(k, SG__KIR_MUL, v, v), 1.0);
  assert_status(sg__kir_finish(k), SG_OK, NULL);
}

/* x = x * (lr * 3) + sqrt(count + 1), count += 1: a prologue over scalar
 * inputs, its state written back, its output in place. */
static void prologue_kernel(sg__kir_kernel *k, const char *name, int64_t n) {
  sg__kir_init(k, name, 1, &n);
  int64_t zero = 0;
  int ix = sg__kir_input_add(k, SG_F32, NULL), ir = sg__kir_input_add(k, SG_F32, &zero);
  int ic = sg__kir_input_add(k, SG_F32, &zero);
  int count =
      sg__kir_pro_op(k, SG__KIR_P_F32,
                     sg__kir_pro_op(k, SG__KIR_P_ADD, sg__kir_pro_load(k, ic), sg__kir_pro_const(k, 1)), 0);
  sg__kir_pro_write(k, count, ic);
  int scale = sg__kir_pro_param(
      k, sg__kir_pro_op(k, SG__KIR_P_MUL, sg__kir_pro_load(k, ir), sg__kir_pro_const(k, 3)));
  int shift =
      sg__kir_pro_param(k, sg__kir_pro_op(k, SG__KIR_P_POW, sg__kir_pro_op(k, SG__KIR_P_SQRT, count, 0),
                                          sg__kir_pro_const(k, 1.5)));
  int y = sg__kir_binary(k, SG__KIR_ADD,
                         sg__kir_binary(k, SG__KIR_MUL, sg__kir_load(k, ix), sg__kir_param(k, scale)),
                         sg__kir_param(k, shift));
  sg__kir_set_inplace(k, sg__kir_store(k, y), ix);
  assert_status(sg__kir_finish(k), SG_OK, NULL);
}

static void test_elementwise(void **state) {
  (void)state;
  const int64_t sizes[][2] = {{1, 1}, {1, 7}, {7, 1}, {3, 1009}, {1009, 7}, {64, 300}};
  enum { N = sizeof sizes / sizeof *sizes };
  sg__kir_kernel ks[2 * N];
  const sg__kir_kernel *p[2 * N];
  for (int t = 0; t < N; t++) {
    char name[32];
    snprintf(name, sizeof name, "arith%d", t);
    arith_kernel(&ks[2 * t], name, sizes[t][0], sizes[t][1]);
    snprintf(name, sizeof name, "unary%d", t);
    unary_kernel(&ks[2 * t + 1], name, sizes[t][0] * sizes[t][1]);
  }
  for (int i = 0; i < 2 * N; i++) p[i] = &ks[i];
  check_kernels(p, 2 * N, 0);
  check_kernels(p, 2 * N, 1); /* one block walks everything */
  for (int i = 0; i < 2 * N; i++) sg__kir_free(&ks[i]);
}

/* Row sums and column sums, b broadcast per column, per row, and along a
 * middle dim whose strides merge with neither neighbour; rows of 1 to 1009
 * columns and columns of 1 to 1009 rows (team sizes 1 to 256). */
static void test_sums(void **state) {
  (void)state;
  const int64_t sizes[][2] = {{1, 1}, {1, 7}, {7, 1}, {3, 1009}, {1009, 7}, {40, 33}, {2, 100000}};
  enum { N = sizeof sizes / sizeof *sizes };
  sg__kir_kernel ks[5 * N];
  const sg__kir_kernel *p[5 * N];
  int n = 0;
  for (int t = 0; t < N; t++) {
    int64_t rows = sizes[t][0], cols = sizes[t][1], dims[2] = {rows, cols};
    int64_t per_col[2] = {0, 1}, per_row[2] = {1, 0};
    char name[32];
    snprintf(name, sizeof name, "rows_c%d", t);
    sum_kernel(&ks[n++], name, 2, dims, per_col, SG__KIR_SUM_INNER, 1, 1.0 / (double)cols);
    snprintf(name, sizeof name, "rows_r%d", t);
    sum_kernel(&ks[n++], name, 2, dims, per_row, SG__KIR_SUM_INNER, 1, 1.0);
    snprintf(name, sizeof name, "cols_c%d", t);
    sum_kernel(&ks[n++], name, 2, dims, per_col, SG__KIR_SUM_OUTER, 1, 0.5);
    snprintf(name, sizeof name, "cols_r%d", t);
    sum_kernel(&ks[n++], name, 2, dims, per_row, SG__KIR_SUM_OUTER, 1, 1.0);
    /* [rows, 3, cols / 3 + 1], b [3] along the middle: its strides over the
     * last two dims (1, 0) merge into no single step. */
    int64_t d3[3] = {rows, 3, cols / 3 + 1}, mid[3] = {0, 1, 0};
    snprintf(name, sizeof name, "mid%d", t);
    sum_kernel(&ks[n++], name, 3, d3, mid, t % 2 ? SG__KIR_SUM_OUTER : SG__KIR_SUM_INNER, 1, 1.0);
  }
  for (int i = 0; i < n; i++) p[i] = &ks[i];
  check_kernels(p, n, 0);
  check_kernels(p, n, 1);
  for (int i = 0; i < n; i++) sg__kir_free(&ks[i]);
}

static void test_prologue(void **state) {
  (void)state;
  sg__kir_kernel ks[2];
  prologue_kernel(&ks[0], "pro_a", 1009);
  prologue_kernel(&ks[1], "pro_b", 1);
  const sg__kir_kernel *p[] = {&ks[0], &ks[1]};
  check_kernels(p, 2, 0);
  sg__kir_free(&ks[0]), sg__kir_free(&ks[1]);
}

/* What the emitter refuses: an unfinished kernel, two of one name, a name
 * that is another's prologue symbol (NAME_pro of a kernel with a prologue). */
static void test_emit_errors(void **state) {
  (void)state;
  sg__kir_kernel a, b;
  int64_t n = 4;
  sg__kir_init(&a, "k", 1, &n);
  const sg__kir_kernel *p[] = {&a, &b};
  char *src;
  size_t len;
  assert_status(sg__cuda_emit(p, 1, &src, &len), SG_ERR_INVALID_ARG, "not finished");
  sg__kir_free(&a);
  prologue_kernel(&a, "k", n);
  sg__kir_init(&b, "k", 1, &n);
  sg__kir_store(&b, sg__kir_load(&b, sg__kir_input_add(&b, SG_F32, NULL)));
  assert_status(sg__kir_finish(&b), SG_OK, NULL);
  assert_status(sg__cuda_emit(p, 2, &src, &len), SG_ERR_DUPLICATE, "'k'");
  strcpy(b.name, "k_pro");
  assert_status(sg__cuda_emit(p, 2, &src, &len), SG_ERR_DUPLICATE, "prologue");
  assert_null(src);
  /* Without a prologue, k_pro is just another name. */
  strcpy(a.name, "j");
  assert_status(sg__cuda_emit(p, 2, &src, &len), SG_OK, NULL);
  sg__free(src);
  sg__kir_free(&a), sg__kir_free(&b);
}

/* ---- the kernels of training graphs ----------------------------------------- */

static sg_graph *resnet_graph(int64_t batch, int64_t image, const char *optimizer) {
  resnet50_config cfg = RESNET50_CONFIG_INIT;
  cfg.batch = batch, cfg.image_size = image, cfg.classes = 10;
  sg_graph *g = NULL;
  assert_status(resnet50_build_training(&cfg, optimizer, 0, &g), SG_OK, NULL);
  return g;
}

/* The fused plan of g (the CPU backend's fusion decisions). */
static void fused_plan(const sg_graph *g, sg__plan *p) {
  void *be = NULL;
  sg__backend_config cfg = {1, 1, 0};
  assert_status(sg__cpu_backend.create(&cfg, &be), SG_OK, NULL);
  sg__plan_options opt = {0};
  opt.fuse = true;
  assert_status(sg__plan_build(g, &sg__cpu_backend, be, &opt, p), SG_OK, NULL);
  sg__cpu_backend.destroy(be);
  assert_true(p->n_unique > 0);
}

static void test_graph_kernels(void **state) {
  (void)state;
  sg_graph *graphs[] = {sg_test_mlp_training(false), sg_test_mlp_training(true), resnet_graph(2, 32, "sgd"),
                        resnet_graph(2, 32, "adamw")};
  for (size_t i = 0; i < sizeof graphs / sizeof *graphs; i++) {
    sg__plan p;
    fused_plan(graphs[i], &p);
    check_kernels(p.unique, (int)p.n_unique, 0);
    sg__plan_free(&p);
    sg_graph_destroy(graphs[i]);
  }
}

/* ---- transposes ------------------------------------------------------------- */

static bool no_transpose(void *state, sg_op_kind kind) {
  return kind != SG_OP_TRANSPOSE && sg__cpu_backend.supports_op(state, kind);
}

/* Transposes, which CUDA runs as generated kernels (a load through permuted
 * strides): the plan of a backend without a transpose kernel makes one
 * alone per transpose, even with fusion on (the relu after one does not
 * join it); run as C and as emulated CUDA, each equals the CPU backend's
 * own transpose, bitwise. */
static void test_transpose_kernels(void **state) {
  (void)state;
  sg_graph *g;
  assert_status(sg_graph_create(&g), SG_OK, NULL);
  int64_t xd[] = {2, 3, 4, 5}, md[] = {7, 9}, p4[] = {2, 0, 3, 1}, p2[] = {1, 0};
  sg_tensor a = sg_transpose(g, sg_input(g, "x", SG_F32, 4, xd), 4, p4);
  sg_tensor b = sg_relu(g, sg_transpose(g, sg_input(g, "m", SG_F32, 2, md), 2, p2));
  assert_status(sg_tensor_set_name(g, a, "a"), SG_OK, NULL);
  assert_status(sg_tensor_set_name(g, b, "b"), SG_OK, NULL);
  assert_status(sg_graph_mark_output(g, a), SG_OK, NULL);
  assert_status(sg_graph_mark_output(g, b), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  float x[120], m[63], want_a[120], want_b[63];
  for (int i = 0; i < 120; i++) x[i] = (float)i * 0.25f - 7.0f;
  for (int i = 0; i < 63; i++) m[i] = (float)(i % 13) - 6.5f;
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sp.threads = 1;
  sg_session *s;
  assert_status(sg_session_create(g, &sp, &s), SG_OK, NULL);
  assert_status(sg_session_compile(s), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "x", SG_F32, 4, xd, x), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "m", SG_F32, 2, md, m), SG_OK, NULL);
  assert_status(sg_session_forward(s), SG_OK, NULL);
  assert_status(sg_session_read(s, "a", want_a, sizeof want_a), SG_OK, NULL);
  assert_status(sg_session_read(s, "b", want_b, sizeof want_b), SG_OK, NULL);
  sg_session_destroy(s);

  sg__plan p;
  sg_test_plan_with(g, no_transpose, true, &p);
  assert_int_equal(p.n_unique, 2); /* the two transposes; the relu keeps the CPU's kernel */
  for (uint32_t i = 0; i < p.n_groups; i++) assert_int_equal(p.groups[i].n_ops, 1);
  char *src;
  size_t len;
  assert_status(sg__cpu_emit_c(p.unique, (int)p.n_unique, &src, &len), SG_OK, NULL);
  sg__jit_lib *lib;
  assert_status(sg__jit_build(src, len, &lib), SG_OK, NULL);
  sg__free(src);
  emu e;
  emu_build(&e, p.unique, (int)p.n_unique);
  int checked = 0;
  for (uint32_t i = 0; i < p.n_unique; i++) {
    const sg__kir_kernel *k = p.unique[i];
    bool four = k->numel == 120;
    side c, u;
    side_alloc(&c, k, NULL);
    side_alloc(&u, k, NULL);
    memcpy(c.in[0], four ? x : m, four ? sizeof x : sizeof m);
    memcpy(u.in[0], four ? x : m, four ? sizeof x : sizeof m);
    run_cpu(lib, k, &c);
    run_cuda(&e, k, &u, 0);
    for (int64_t j = 0; j < k->numel; j++) {
      /* b is relu(m^T): m^T's element j, before the relu. */
      float w = four ? want_a[j] : m[(j % 7) * 9 + j / 7];
      if (!sg_test_same_bits(((float *)c.out[0])[j], w) || !sg_test_same_bits(((float *)u.out[0])[j], w))
        fail_msg("transpose %s element %lld: C %g, CUDA %g, want %g", four ? "4-d" : "2-d", (long long)j,
                 (double)((float *)c.out[0])[j], (double)((float *)u.out[0])[j], (double)w);
    }
    for (int64_t j = 0; !four && j < k->numel; j++)
      assert_true(fmaxf(((float *)c.out[0])[j], 0) == want_b[j]);
    side_free(&c, k), side_free(&u, k);
    checked++;
  }
  assert_int_equal(checked, 2);
  emu_close(&e);
  sg__jit_close(lib);
  sg__plan_free(&p);
  sg_graph_destroy(g);
}

/* ---- NVRTC ------------------------------------------------------------------- */

#if defined(SG_HAVE_CUDA_BACKEND)
static void nvrtc_compiles(const sg__kir_kernel *const *ks, int n, const char *what) {
  char *src;
  size_t len;
  assert_status(sg__cuda_emit(ks, n, &src, &len), SG_OK, NULL);
  const int archs[] = {80, 90};
  for (size_t a = 0; a < sizeof archs / sizeof *archs; a++) {
    void *cubin = NULL;
    size_t size = 0;
    sg_status st = sg__cuda_nvrtc_compile(src, what, archs[a], &cubin, &size);
    if (st != SG_OK) fail_msg("%s for sm_%d: %s", what, archs[a], sg_last_error());
    assert_true(size > 4 && memcmp(cubin, "\177ELF", 4) == 0);
    sg__free(cubin);
  }
  sg__free(src);
}

static void test_nvrtc(void **state) {
  (void)state;
  char v[32];
  assert_status(sg__cuda_nvrtc_version(v, sizeof v), SG_OK, NULL);
  sg__kir_kernel ks[4];
  arith_kernel(&ks[0], "arith", 64, 300);
  unary_kernel(&ks[1], "unary", 1009);
  int64_t dims[2] = {40, 33}, per_col[2] = {0, 1};
  sum_kernel(&ks[2], "rows", 2, dims, per_col, SG__KIR_SUM_INNER, 1, 0.5);
  prologue_kernel(&ks[3], "pro", 1009);
  const sg__kir_kernel *p[] = {&ks[0], &ks[1], &ks[2], &ks[3]};
  nvrtc_compiles(p, 4, "hand-built kernels");
  for (int i = 0; i < 4; i++) sg__kir_free(&ks[i]);
  sg_graph *graphs[] = {sg_test_mlp_training(false), sg_test_mlp_training(true), resnet_graph(32, 224, "sgd"),
                        resnet_graph(32, 224, "adamw")};
  const char *names[] = {"MLP (SGD)", "MLP, LayerNorm and GELU written out (AdamW)", "ResNet-50 32x224 (SGD)",
                         "ResNet-50 32x224 (AdamW)"};
  for (size_t i = 0; i < sizeof graphs / sizeof *graphs; i++) {
    sg__plan p2;
    fused_plan(graphs[i], &p2);
    nvrtc_compiles(p2.unique, (int)p2.n_unique, names[i]);
    sg__plan_free(&p2);
    sg_graph_destroy(graphs[i]);
  }
  /* A program NVRTC refuses: the error carries its log. */
  void *cubin;
  size_t size;
  assert_status(
      sg__cuda_nvrtc_compile("extern \"C\" __global__ void f() { undeclared(); }", "bad", 90, &cubin, &size),
      SG_ERR_COMPILER, "undeclared");
  assert_status(sg__cuda_nvrtc_compile("", "none", 12, &cubin, &size), SG_ERR_INVALID_ARG, "sm_12");
}
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_elementwise),
    cmocka_unit_test(test_sums),
    cmocka_unit_test(test_prologue),
    cmocka_unit_test(test_emit_errors),
    cmocka_unit_test(test_graph_kernels),
    cmocka_unit_test(test_transpose_kernels),
#if defined(SG_HAVE_CUDA_BACKEND)
    cmocka_unit_test(test_nvrtc),
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
