/* Passes of runtime/hooks.h (sg__session_run_pass): the per-pass knobs that
 * pipeline recomputation relies on -- dropout streams and frozen batch-norm
 * running statistics -- and what a pass is: a range of the schedule (a bad
 * one refused), hooks called at their positions of the range only, a step
 * counted only when asked; host views (separate ones with SG_HOST_MIRROR=1,
 * as on a GPU: pulled and pushed, never in step on their own); and the
 * device failure of fault injection (every later run or copy fails with
 * SG_ERR_DEVICE). Masks are checked against the key formula of
 * ref_ops.c (stream 0) and its documented extension (other streams);
 * running statistics against PyTorch's update, computed by hand. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "runtime/hooks.h"
#include "test_util.h"
/* After test_util.h (cmocka's includes first). */
#include "ref_ops.h"

enum { N = 256 };
#define P_DROP 0.5
#define OP_SEED 7
#define SESSION_SEED 123

static sg_session *open_session(const sg_graph *g) {
  sg_session_params p = SG_SESSION_PARAMS_INIT;
  p.threads = 1;
  p.seed = SESSION_SEED;
  sg_session *s;
  assert_status(sg_session_create(g, &p, &s), SG_OK, NULL);
  assert_status(sg_session_compile(s), SG_OK, NULL);
  return s;
}

/* Training graph: y = dropout(x * w) with x and w all ones, so y[i] is the
 * scale (kept) or 0; loss = sum(y); SGD with lr 0 (nothing moves). */
static sg_graph *dropout_graph(void) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  int64_t d[] = {N};
  float ones[N];
  for (int i = 0; i < N; i++) ones[i] = 1.0f;
  sg_tensor x = sg_input(g, "x", SG_F32, 1, d);
  sg_tensor lr = sg_input(g, "lr", SG_F32, 0, NULL);
  sg_tensor w = sg_parameter(g, "w", SG_F32, 1, d, ones);
  sg_tensor y = sg_dropout(g, sg_mul(g, x, w), P_DROP, OP_SEED, 1);
  assert_int_equal(sg_tensor_set_name(g, y, "y"), SG_OK);
  assert_int_equal(sg_graph_mark_output(g, y), SG_OK);
  sg_tensor loss = sg_reduce_sum(g, y, 0, NULL, 0);
  assert_int_equal(sg_graph_backward(g, loss), SG_OK);
  sg_sgd_params sp = SG_SGD_PARAMS_INIT;
  assert_int_equal(sg_graph_add_sgd(g, lr, &sp), SG_OK);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  return g;
}

/* The inputs of dropout_graph: x all ones, lr 0. */
static void set_ones(sg_session *s) {
  float x[N], lr = 0;
  int64_t d[] = {N};
  for (int i = 0; i < N; i++) x[i] = 1.0f;
  assert_status(sg_session_set_input(s, "x", SG_F32, 1, d, x), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "lr", SG_F32, 0, NULL, &lr), SG_OK, NULL);
}

/* The mask of one training step at step count `step` on `stream`. */
static void mask_of(sg_session *s, uint64_t step, uint64_t stream, uint8_t *mask) {
  float y[N];
  set_ones(s);
  uint32_t n;
  sg__session_order(s, &n);
  sg__session_set_steps(s, step);
  sg__session_pass pass = {.begin = 0, .end = n, .stream = stream, .count_step = true};
  assert_status(sg__session_run_pass(s, &pass), SG_OK, NULL);
  assert_status(sg_session_read(s, "y", y, sizeof y), SG_OK, NULL);
  for (int i = 0; i < N; i++) {
    assert_true(y[i] == 0.0f || y[i] == 2.0f); /* 1 / (1 - 0.5) */
    mask[i] = y[i] != 0.0f;
  }
}

/* The documented key (cpu_internal.h), written out independently. */
static uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static int keep_on_stream(uint64_t step, uint64_t stream, uint64_t i) {
  uint64_t key = mix64(mix64(mix64(OP_SEED) ^ SESSION_SEED) ^ step);
  key = mix64(key ^ mix64(stream));
  return (double)(mix64(key ^ mix64(i)) >> 40) >= ceil(P_DROP * 16777216.0);
}

static void test_dropout_streams(void **state) {
  (void)state;
  sg_graph *g = dropout_graph();
  sg_session *s = open_session(g);
  uint8_t m0[N], m1[N], m2[N], again[N], later[N];
  mask_of(s, 3, 0, m0);
  mask_of(s, 3, 1, m1);
  mask_of(s, 3, 2, m2);
  mask_of(s, 3, 1, again);
  mask_of(s, 4, 1, later);
  int d12 = 0, d01 = 0, dstep = 0, kept1 = 0;
  for (int i = 0; i < N; i++) {
    /* Stream 0 is a plain step: the reference's key formula. */
    assert_int_equal(m0[i], ref_dropout_keep(OP_SEED, SESSION_SEED, 3, (uint64_t)i, P_DROP));
    assert_int_equal(m1[i], keep_on_stream(3, 1, (uint64_t)i));
    assert_int_equal(m2[i], keep_on_stream(3, 2, (uint64_t)i));
    assert_int_equal(later[i], keep_on_stream(4, 1, (uint64_t)i));
    d12 += m1[i] != m2[i];
    d01 += m0[i] != m1[i];
    dstep += m1[i] != later[i];
    kept1 += m1[i];
  }
  /* The same stream again (a recomputation) draws the same mask. */
  assert_memory_equal(m1, again, N);
  /* Independent masks at p = 0.5 differ in about half the places. */
  printf("streams 1/2 differ at %d of %d, 0/1 at %d, steps 3/4 at %d; stream 1 keeps %d\n", d12, N, d01,
         dstep, kept1);
  assert_true(d12 > N / 4 && d01 > N / 4 && dstep > N / 4);
  assert_true(kept1 > N / 4 && kept1 < 3 * N / 4);
  sg_session_destroy(s);
  sg_graph_destroy(g);
}

/* x [2, 2, 1, 2]: channel 0 holds 1, 3, 5, 7 and channel 1 holds -2, 0, 4,
 * 6; gamma 1, beta 0, running_mean (0.5, -1), running_var (2, 3). */
static const float BN_X[8] = {1, 3, -2, 0, 5, 7, 4, 6};
static const float RM0[2] = {0.5f, -1.0f}, RV0[2] = {2.0f, 3.0f};

static sg_graph *bn_graph(void) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  int64_t xd[] = {2, 2, 1, 2}, cd[] = {2};
  float ones[2] = {1, 1}, zeros[2] = {0, 0};
  sg_tensor x = sg_input(g, "x", SG_F32, 4, xd);
  sg_tensor lr = sg_input(g, "lr", SG_F32, 0, NULL);
  sg_tensor gm = sg_parameter(g, "gamma", SG_F32, 1, cd, ones);
  sg_tensor bt = sg_parameter(g, "beta", SG_F32, 1, cd, zeros);
  sg_tensor rm = sg_graph_add_tensor(g, "running_mean", SG_F32, SG_ROLE_STATE, 1, cd, RM0);
  sg_tensor rv = sg_graph_add_tensor(g, "running_var", SG_F32, SG_ROLE_STATE, 1, cd, RV0);
  sg_tensor y = sg_batch_norm(g, x, gm, bt, rm, rv, NULL); /* eps 1e-5, momentum 0.1, training */
  assert_int_equal(sg_tensor_set_name(g, y, "y"), SG_OK);
  assert_int_equal(sg_graph_mark_output(g, y), SG_OK);
  sg_tensor loss = sg_reduce_sum(g, sg_mul(g, y, y), 0, NULL, 0);
  assert_int_equal(sg_graph_backward(g, loss), SG_OK);
  sg_sgd_params sp = SG_SGD_PARAMS_INIT;
  assert_int_equal(sg_graph_add_sgd(g, lr, &sp), SG_OK);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  return g;
}

/* A whole step as one pass, with the statistics frozen or not. */
static void bn_step(sg_session *s, bool freeze, float *y, float *rm, float *rv) {
  int64_t xd[] = {2, 2, 1, 2};
  float lr = 0;
  assert_status(sg_session_set_input(s, "x", SG_F32, 4, xd, BN_X), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "lr", SG_F32, 0, NULL, &lr), SG_OK, NULL);
  uint32_t n;
  sg__session_order(s, &n);
  sg__session_pass pass = {.begin = 0, .end = n, .freeze_stats = freeze, .count_step = true};
  assert_status(sg__session_run_pass(s, &pass), SG_OK, NULL);
  assert_status(sg_session_read(s, "y", y, 8 * sizeof(float)), SG_OK, NULL);
  assert_status(sg_session_read(s, "running_mean", rm, 2 * sizeof(float)), SG_OK, NULL);
  assert_status(sg_session_read(s, "running_var", rv, 2 * sizeof(float)), SG_OK, NULL);
}

static void test_frozen_batch_norm(void **state) {
  (void)state;
  sg_graph *g = bn_graph();
  sg_session *s = open_session(g);
  float y_frozen[8], y[8], rm[2], rv[2];
  bn_step(s, true, y_frozen, rm, rv);
  /* Frozen: the statistics are exactly what they were. */
  assert_memory_equal(rm, RM0, sizeof rm);
  assert_memory_equal(rv, RV0, sizeof rv);
  bn_step(s, false, y, rm, rv);
  /* The output normalises with the batch statistics either way. */
  assert_memory_equal(y, y_frozen, sizeof y);
  /* By hand: channel 0 has mean 4, biased variance 5, unbiased 20/3;
   * channel 1 mean 2, variance 10, unbiased 40/3. PyTorch:
   * running = (1 - 0.1) running + 0.1 batch (the variance unbiased). */
  const double mean[2] = {4, 2}, var[2] = {5, 10};
  const double want_rm[2] = {0.9 * 0.5 + 0.1 * 4, 0.9 * -1 + 0.1 * 2};
  const double want_rv[2] = {0.9 * 2 + 0.1 * 20.0 / 3.0, 0.9 * 3 + 0.1 * 40.0 / 3.0};
  for (int c = 0; c < 2; c++) {
    printf("channel %d: running_mean %.7f (%.7f), running_var %.7f (%.7f)\n", c, rm[c], want_rm[c], rv[c],
           want_rv[c]);
    assert_true(fabs(rm[c] - want_rm[c]) <= 1e-6);
    assert_true(fabs(rv[c] - want_rv[c]) <= 1e-6 * want_rv[c]);
  }
  for (int n = 0; n < 2; n++)
    for (int c = 0; c < 2; c++)
      for (int w = 0; w < 2; w++) {
        int i = (n * 2 + c) * 2 + w;
        double want = (BN_X[i] - mean[c]) / sqrt(var[c] + 1e-5);
        assert_true(fabs(y[i] - want) <= 1e-5);
      }
  /* A second unfrozen pass moves them again (not latched off). */
  float rm2[2], rv2[2];
  bn_step(s, false, y, rm2, rv2);
  assert_true(fabs(rm2[0] - (0.9 * rm[0] + 0.1 * 4)) <= 1e-6);
  sg_session_destroy(s);
  sg_graph_destroy(g);
}

/* The positions the hooks of a pass were called at. */
typedef struct pass_log {
  uint32_t before[64], after[64];
  int n_before, n_after;
  uint32_t fail_at; /* `before` fails here (UINT32_MAX: never) */
} pass_log;

static sg_status rec_before(void *ctx, uint32_t pos) {
  pass_log *l = ctx;
  if (l->n_before < 64) l->before[l->n_before] = pos;
  l->n_before++;
  return pos == l->fail_at ? sg__error(SG_ERR_COMM, "before %u failed", pos) : SG_OK;
}

static sg_status rec_after(void *ctx, uint32_t pos) {
  pass_log *l = ctx;
  if (l->n_after < 64) l->after[l->n_after] = pos;
  l->n_after++;
  return SG_OK;
}

static void test_pass_range_hooks_count(void **state) {
  (void)state;
  sg_graph *g = dropout_graph();
  sg__session_pass empty = {0};
  {
    sg_session_params p = SG_SESSION_PARAMS_INIT;
    p.threads = 1;
    sg_session *raw;
    assert_status(sg_session_create(g, &p, &raw), SG_OK, NULL);
    assert_status(sg__session_run_pass(raw, &empty), SG_ERR_STATE, "compiled");
    sg_session_destroy(raw);
  }
  sg_session *s = open_session(g);
  set_ones(s);
  uint32_t n;
  sg__session_order(s, &n);
  assert_true(n >= 4 && n < 64);

  /* Refused: no pass, a range backwards or past the schedule; nothing counted. */
  assert_status(sg__session_run_pass(s, NULL), SG_ERR_INVALID_ARG, "NULL");
  sg__session_pass bad = {.begin = 2, .end = 1, .count_step = true};
  assert_status(sg__session_run_pass(s, &bad), SG_ERR_RANGE, "outside");
  bad = (sg__session_pass){.begin = 0, .end = n + 1, .count_step = true};
  assert_status(sg__session_run_pass(s, &bad), SG_ERR_RANGE, "outside");
  assert_int_equal(sg_session_steps(s), 0);

  /* Hooks run at their marked positions inside the range only, in order. */
  uint8_t before_at[64] = {0}, after_at[64] = {0};
  before_at[0] = before_at[1] = before_at[n - 1] = 1; /* 0 and n-1 are outside [1, n-1) */
  after_at[1] = after_at[n - 2] = 1;
  pass_log log = {.fail_at = UINT32_MAX};
  sg__step_hooks h = {&log, rec_before, rec_after, before_at, after_at};
  sg__session_pass mid = {.begin = 1, .end = n - 1, .hooks = &h};
  assert_status(sg__session_run_pass(s, &mid), SG_OK, NULL);
  assert_int_equal(log.n_before, 1);
  assert_int_equal(log.before[0], 1);
  assert_int_equal(log.n_after, 2);
  assert_int_equal(log.after[0], 1);
  assert_int_equal(log.after[1], n - 2);
  assert_int_equal(sg_session_steps(s), 0); /* not asked to count */

  /* Without position arrays: every position of the range. */
  h.before_at = h.after_at = NULL;
  log = (pass_log){.fail_at = UINT32_MAX};
  assert_status(sg__session_run_pass(s, &mid), SG_OK, NULL);
  assert_int_equal(log.n_before, n - 2);
  assert_int_equal(log.n_after, n - 2);
  for (uint32_t i = 0; i < n - 2; i++) {
    assert_int_equal(log.before[i], 1 + i);
    assert_int_equal(log.after[i], 1 + i);
  }

  /* An empty pass runs nothing, and counts a step when asked to. */
  log = (pass_log){.fail_at = UINT32_MAX};
  sg__session_pass count = {.begin = n, .end = n, .hooks = &h, .count_step = true};
  assert_status(sg__session_run_pass(s, &empty), SG_OK, NULL);
  assert_int_equal(sg_session_steps(s), 0);
  assert_status(sg__session_run_pass(s, &count), SG_OK, NULL);
  assert_int_equal(sg_session_steps(s), 1);
  assert_int_equal(log.n_before + log.n_after, 0);

  /* A failing hook ends the pass at its position, uncounted. */
  log = (pass_log){.fail_at = 2};
  sg__session_pass whole = {.begin = 0, .end = n, .hooks = &h, .count_step = true};
  assert_status(sg__session_run_pass(s, &whole), SG_ERR_COMM, "before 2 failed");
  assert_int_equal(log.n_before, 3);
  assert_int_equal(log.n_after, 2);
  assert_int_equal(sg_session_steps(s), 1);
  log = (pass_log){.fail_at = UINT32_MAX};
  assert_status(sg__session_run_pass(s, &whole), SG_OK, NULL);
  assert_int_equal(log.n_before, n);
  assert_int_equal(sg_session_steps(s), 2);
  sg_session_destroy(s);
  sg_graph_destroy(g);
}

/* The parameter w's slot through sg_session_read (the public path). */
static float read_w0(sg_session *s) {
  float w[N];
  assert_status(sg_session_read(s, "w", w, sizeof w), SG_OK, NULL);
  return w[0];
}

static void test_host_views(void **state) {
  (void)state;
  sg_graph *g = dropout_graph();
  int32_t w = -1;
  for (int32_t t = 0; t < sg_graph_num_tensors(g); t++) {
    sg_tensor_info info;
    assert_status(sg_graph_tensor_info(g, (sg_tensor){t}, &info), SG_OK, NULL);
    if (strcmp(info.name, "w") == 0) w = t;
  }
  assert_true(w >= 0);
  /* On the CPU a view is the slot: pull and push do nothing. */
  unsetenv("SG_HOST_MIRROR");
  sg_session *s = open_session(g);
  assert_false(sg__session_views_separate(s));
  size_t bytes = 0;
  assert_ptr_equal(sg__session_tensor_host(s, w, &bytes), sg__session_tensor_addr(s, w, NULL));
  assert_true(bytes >= N * sizeof(float));
  sg_session_destroy(s);

  /* SG_HOST_MIRROR=1: a copy of its own, which only pull and push move. */
  setenv("SG_HOST_MIRROR", "1", 1);
  s = open_session(g);
  unsetenv("SG_HOST_MIRROR");
  assert_true(sg__session_views_separate(s));
  float *view = sg__session_tensor_host(s, w, &bytes);
  assert_non_null(view);
  assert_ptr_not_equal(view, sg__session_tensor_addr(s, w, NULL));
  assert_ptr_equal(sg__session_tensor_host(s, w, NULL), view); /* stable */
  assert_true(view[0] == 0.0f);                                /* not pulled yet */
  assert_status(sg__session_pull(s, w), SG_OK, NULL);
  for (int i = 0; i < N; i++) assert_true(view[i] == 1.0f);
  for (int i = 0; i < N; i++) view[i] = 3.0f;
  assert_true(read_w0(s) == 1.0f); /* the slot is the truth until pushed */
  assert_status(sg__session_push(s, w), SG_OK, NULL);
  assert_true(read_w0(s) == 3.0f);
  /* A tensor without a slot has no view; pull and push of it do nothing. */
  assert_null(sg__session_tensor_host(s, -1, &bytes));
  assert_int_equal(bytes, 0);
  assert_status(sg__session_pull(s, 1 << 30), SG_OK, NULL);
  sg_session_destroy(s);
  sg_graph_destroy(g);
}

static void test_device_failure(void **state) {
  (void)state;
  sg_graph *g = dropout_graph();
  sg_session *s = open_session(g);
  set_ones(s);
  assert_status(sg_session_step(s), SG_OK, NULL);
  sg__session_fail_device(s, "the cause given");
  /* Sticky: the step, a read, a write, and the next step all report it. */
  assert_status(sg_session_step(s), SG_ERR_DEVICE, "the cause given");
  float w[N];
  assert_status(sg_session_read(s, "w", w, sizeof w), SG_ERR_DEVICE, "the device failed earlier");
  float x[N] = {0};
  int64_t d[] = {N};
  assert_status(sg_session_set_input(s, "x", SG_F32, 1, d, x), SG_ERR_DEVICE, "the cause given");
  assert_status(sg_session_step(s), SG_ERR_DEVICE, "the cause given");
  assert_int_equal(sg_session_steps(s), 1);
  sg_session_destroy(s);
  sg_graph_destroy(g);
}

static size_t count_of(const char *text, const char *what) {
  size_t n = 0;
  for (const char *p = strstr(text, what); p != NULL; p = strstr(p + 1, what)) n++;
  return n;
}

/* sg_session_params.trace: every op of every step and evaluation pass, the steps themselves, in
 * Chrome trace JSON; a small ring keeps the latest events only; off, it is refused. */
static void test_trace(void **state) {
  (void)state;
  sg_graph *g = dropout_graph();
  char path[] = "/tmp/sg-session-trace-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  sg_session_params p = SG_SESSION_PARAMS_INIT;
  p.threads = 1;
  p.trace = 2;
  sg_session *s;
  assert_status(sg_session_create(g, &p, &s), SG_ERR_INVALID_ARG, "trace is 2");
  s = open_session(g); /* tracing off */
  assert_status(sg_session_write_trace(s, path), SG_ERR_STATE, "tracing is off");
  assert_status(sg_session_write_trace(NULL, path), SG_ERR_INVALID_ARG, "NULL");
  sg_session_destroy(s);
  p.trace = 1;
  assert_status(sg_session_create(g, &p, &s), SG_OK, NULL);
  assert_status(sg_session_compile(s), SG_OK, NULL);
  set_ones(s);
  uint32_t n;
  sg__session_order(s, &n);
  assert_status(sg_session_step(s), SG_OK, NULL);
  assert_status(sg_session_step(s), SG_OK, NULL);
  assert_status(sg_session_forward(s), SG_OK, NULL);
  assert_status(sg_session_write_trace(s, "/tmp"), SG_ERR_IO, "/tmp");
  assert_status(sg_session_write_trace(s, path), SG_OK, NULL);
  size_t len;
  char *text = (char *)sg_test_read_file(path, &len);
  assert_non_null(text);
  /* 2 steps of n ops and their 2 step events, the evaluation pass's ops (at least 1) and its event. */
  size_t events = count_of(text, "\"ph\":\"X\"");
  assert_true(events >= 2 * (size_t)n + 2 + 2);
  assert_int_equal(count_of(text, "\"name\":\"step 1\""), 1);
  assert_int_equal(count_of(text, "\"name\":\"step 2\""), 1);
  assert_int_equal(count_of(text, "\"name\":\"evaluation pass\""), 1);
  assert_true(count_of(text, "\"cat\":\"forward\"") >= 2);
  assert_true(count_of(text, "\"cat\":\"backward\"") >= 2);
  assert_true(count_of(text, "\"cat\":\"update\"") >= 2);
  assert_non_null(strstr(text, "\"process_name\""));
  assert_non_null(strstr(text, "\"name\":\"session\""));
  free(text);
  sg_session_destroy(s);
  /* A ring of 3 events: the last 3 of a step (its last two ops and the step itself). */
  p.trace_events = 3;
  assert_status(sg_session_create(g, &p, &s), SG_OK, NULL);
  assert_status(sg_session_compile(s), SG_OK, NULL);
  set_ones(s);
  assert_status(sg_session_step(s), SG_OK, NULL);
  assert_status(sg_session_write_trace(s, path), SG_OK, NULL);
  text = (char *)sg_test_read_file(path, &len);
  assert_int_equal(count_of(text, "\"ph\":\"X\""), 3);
  assert_int_equal(count_of(text, "\"name\":\"step 1\""), 1);
  free(text);
  sg_session_destroy(s);
  unlink(path);
  sg_graph_destroy(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_trace),
      cmocka_unit_test(test_dropout_streams),
      cmocka_unit_test(test_frozen_batch_norm),
      cmocka_unit_test(test_pass_range_hooks_count),
      cmocka_unit_test(test_host_views),
      cmocka_unit_test(test_device_failure),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
