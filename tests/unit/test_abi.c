/* Versioned structs (docs/api.md, "Versions of structs"): a program built
 * against an older, shorter layout of a params struct passes that layout's
 * size, and the library reads only those bytes; the fields it lacks take
 * their defaults. Each older layout below is a prefix of today's struct, as
 * an older header declared it, and sits in front of garbage bytes that the
 * library must not read: were it to, the garbage would either be refused or
 * change an observable default. Output structs are written only up to the
 * caller's size. Sizes below a struct's first version or above this
 * library's are refused with a message naming the struct and both sizes. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "test_util.h"

#define GARBAGE 0xA5

/* ---- older layouts, as a program built against an older header has them ---- */

/* sg_session_params without seed and poison. */
typedef struct old_session_params {
  size_t size;
  const char *device;
  int threads;
} old_session_params;

/* sg_partition_params with parts and mode only. */
typedef struct old_partition_params {
  size_t size;
  int parts;
  sg_partition_mode mode;
} old_partition_params;

/* sg_gmem_params without the PMEM and VRAM tiers and the rest. */
typedef struct old_gmem_params {
  size_t size;
  uint64_t table_pages;
  size_t dram_bytes;
} old_gmem_params;

/* sg_conv2d_params with the stride only. */
typedef struct old_conv2d_params {
  size_t size;
  int64_t stride[2];
} old_conv2d_params;

/* sg_pool2d_params with the kernel only. */
typedef struct old_pool2d_params {
  size_t size;
  int64_t kernel[2];
} old_pool2d_params;

/* sg_dist_params before fault injection's fields. */
typedef struct old_dist_params {
  size_t size;
  const sg_comm_params *comm;
  const char *device;
  int threads;
  uint64_t seed;
  int data, pipeline, tensor, micro_batches;
  size_t bucket_bytes;
  int heartbeat_ms, dead_ms, trace;
  const char *trace_path;
  size_t trace_events;
  sg_dist_feed_fn feed;
  void *feed_ctx;
  int qos;
  const char *offload, *offload_path;
  int zero, hang_ms;
} old_dist_params;

/* sg_dist_optimizer with its kind and learning rate only (SGD's defaults). */
typedef struct old_dist_optimizer {
  size_t size;
  int kind;
  const char *lr_input;
} old_dist_optimizer;

/* sg_dist_stats through the loss. */
typedef struct old_dist_stats {
  size_t size;
  uint64_t steps;
  int world_size, healthy_ranks, has_loss;
  float loss_mean;
} old_dist_stats;

/* Each older layout is a prefix of today's struct. */
_Static_assert(sizeof(old_dist_params) == offsetof(sg_dist_params, inject), "dist prefix");
_Static_assert(sizeof(old_dist_optimizer) == offsetof(sg_dist_optimizer, sgd), "optimizer prefix");
_Static_assert(offsetof(old_dist_stats, loss_mean) == offsetof(sg_dist_stats, loss_mean), "stats prefix");
_Static_assert(sizeof(old_session_params) == offsetof(sg_session_params, seed), "session prefix");
_Static_assert(sizeof(old_partition_params) == offsetof(sg_partition_params, imbalance), "partition prefix");
_Static_assert(sizeof(old_gmem_params) == offsetof(sg_gmem_params, pmem_bytes), "gmem prefix");
_Static_assert(sizeof(old_conv2d_params) == offsetof(sg_conv2d_params, padding), "conv2d prefix");
_Static_assert(sizeof(old_pool2d_params) == offsetof(sg_pool2d_params, stride), "pool2d prefix");

/* An older struct in the caller's memory, followed by bytes it does not own. */
#define CALLER(type)          \
  struct {                    \
    type p;                   \
    unsigned char after[256]; \
  }
#define FILL_GARBAGE(c) memset(&(c), GARBAGE, sizeof(c))

/* ---- a session from an older sg_session_params -------------------------------- */

/* y = dropout(x): a training step draws its mask from the op's seed and the
 * session's seed, so the session seed's default (0) is observable. */
static sg_graph *dropout_graph(void) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  int64_t n = 256;
  sg_tensor y = sg_dropout(g, sg_input(g, "x", SG_F32, 1, &n), 0.5, 7, 1);
  sg_tensor_set_name(g, y, "y");
  sg_graph_mark_output(g, y);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  return g;
}

/* One training step of the dropout graph with params `p` (any layout); the output into y[256]. */
static void dropout_step(const sg_graph *g, const void *p, float *y) {
  sg_session *s;
  assert_status(sg_session_create(g, (const sg_session_params *)p, &s), SG_OK, NULL);
  assert_status(sg_session_compile(s), SG_OK, NULL);
  float x[256];
  for (int i = 0; i < 256; i++) x[i] = 1.0f;
  int64_t n = 256;
  assert_status(sg_session_set_input(s, "x", SG_F32, 1, &n, x), SG_OK, NULL);
  assert_status(sg_session_step(s), SG_OK, NULL);
  assert_status(sg_session_read(s, "y", y, 256 * sizeof(float)), SG_OK, NULL);
  sg_session_destroy(s);
}

static void test_session_older_params(void **state) {
  (void)state;
  sg_graph *g = dropout_graph();
  CALLER(old_session_params) caller;
  FILL_GARBAGE(caller);
  caller.p.size = sizeof caller.p;
  caller.p.device = "cpu";
  caller.p.threads = 1;
  float old[256], seed0[256], other[256];
  dropout_step(g, &caller, old);

  sg_session_params p = SG_SESSION_PARAMS_INIT;
  p.threads = 1;
  dropout_step(g, &p, seed0); /* the default seed, 0 */
  memset(&p.seed, GARBAGE, sizeof p.seed);
  dropout_step(g, &p, other); /* the seed the garbage would have given */
  assert_memory_equal(old, seed0, sizeof old);
  assert_memory_not_equal(old, other, sizeof old);
  sg_graph_destroy(g);
}

/* ---- a parallel job from an older sg_dist_params and sg_dist_optimizer ---------------- */

static sg_graph *mlp_graph(void);

/* A job of one rank, created from the older layouts with garbage behind
 * them (read as a fault plan or optimizer pointers, it would crash or be
 * refused); one step, and the older stats filled up to their size. */
static void test_dist_older_params(void **state) {
  (void)state;
  sg_graph *fwd = mlp_graph();
  sg_tensor loss;
  assert_status(sg_graph_find_tensor(fwd, "loss", &loss), SG_OK, NULL);
  sg_comm_params cp = SG_COMM_PARAMS_INIT;
  cp.rank = 0;
  cp.world_size = 1;
  cp.master_port = sg_test_free_port();
  CALLER(old_dist_params) caller;
  FILL_GARBAGE(caller);
  sg_dist_params today = SG_DIST_PARAMS_INIT;
  memcpy(&caller.p, &today, sizeof caller.p); /* the older header's SG_DIST_PARAMS_INIT */
  caller.p.size = sizeof caller.p;
  caller.p.comm = &cp;
  caller.p.threads = 1;
  CALLER(old_dist_optimizer) opt;
  FILL_GARBAGE(opt);
  opt.p.size = sizeof opt.p;
  opt.p.kind = SG_DIST_OPT_SGD;
  opt.p.lr_input = "lr";
  sg_dist *d = NULL;
  assert_status(
      sg_dist_create_model(fwd, loss, (const sg_dist_optimizer *)&opt, (const sg_dist_params *)&caller, &d),
      SG_OK, NULL);
  float x[8 * 32], lr = 0.1f;
  int64_t y[8], xs[] = {8, 32}, ys[] = {8};
  sg_test_fill(x, 8 * 32, 4);
  for (int i = 0; i < 8; i++) y[i] = i % 10;
  assert_status(sg_dist_set_input(d, "x", SG_F32, 2, xs, x), SG_OK, NULL);
  assert_status(sg_dist_set_input(d, "y", SG_I64, 1, ys, y), SG_OK, NULL);
  assert_status(sg_dist_set_input(d, "lr", SG_F32, 0, NULL, &lr), SG_OK, NULL);
  assert_status(sg_dist_step(d), SG_OK, NULL);
  CALLER(old_dist_stats) st;
  FILL_GARBAGE(st);
  st.p.size = sizeof st.p;
  assert_status(sg_dist_get_stats(d, (sg_dist_stats *)&st), SG_OK, NULL);
  assert_int_equal(st.p.size, sizeof st.p);
  assert_int_equal(st.p.steps, 1);
  assert_int_equal(st.p.world_size, 1);
  assert_true(st.p.has_loss == 1 && isfinite(st.p.loss_mean) && st.p.loss_mean > 0);   /* cross-entropy */
  for (size_t i = 0; i < sizeof st.after; i++) assert_int_equal(st.after[i], GARBAGE); /* not written */
  assert_status(sg_dist_destroy(d), SG_OK, NULL);
  sg_graph_destroy(fwd);
}

/* ---- a partition from an older sg_partition_params ------------------------------ */

static sg_graph *mlp_graph(void) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  int64_t xs[] = {8, 32}, ys[] = {8}, w1s[] = {64, 32}, w2s[] = {64, 64}, w3s[] = {10, 64};
  float w1[64 * 32], w2[64 * 64], w3[10 * 64];
  sg_test_fill(w1, 64 * 32, 1);
  sg_test_fill(w2, 64 * 64, 2);
  sg_test_fill(w3, 10 * 64, 3);
  sg_tensor x = sg_input(g, "x", SG_F32, 2, xs);
  sg_tensor h = sg_relu(g, sg_linear(g, x, sg_parameter(g, "w1", SG_F32, 2, w1s, w1), SG_NO_TENSOR));
  h = sg_relu(g, sg_linear(g, h, sg_parameter(g, "w2", SG_F32, 2, w2s, w2), SG_NO_TENSOR));
  sg_tensor logits = sg_linear(g, h, sg_parameter(g, "w3", SG_F32, 2, w3s, w3), SG_NO_TENSOR);
  sg_tensor loss = sg_cross_entropy(g, logits, sg_input(g, "y", SG_I64, 1, ys), SG_REDUCTION_MEAN);
  sg_tensor_set_name(g, loss, "loss");
  sg_graph_mark_output(g, loss);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  return g;
}

static void test_partition_older_params(void **state) {
  (void)state;
  sg_graph *g = mlp_graph();
  CALLER(old_partition_params) caller;
  FILL_GARBAGE(caller); /* an imbalance of these bytes is negative: refused, were it read */
  caller.p.size = sizeof caller.p;
  caller.p.parts = 2;
  caller.p.mode = SG_PARTITION_PIPELINE;
  sg_partition *old, *now;
  assert_status(sg_partition_create(g, (const sg_partition_params *)&caller, NULL, &old), SG_OK, NULL);
  sg_partition_params p = SG_PARTITION_PARAMS_INIT;
  p.parts = 2;
  p.mode = SG_PARTITION_PIPELINE;
  assert_status(sg_partition_create(g, &p, NULL, &now), SG_OK, NULL);
  /* The defaults (imbalance, alpha, seed, balance_compute) give the same placement. */
  assert_int_equal(sg_partition_num_parts(old), 2);
  for (int32_t op = 0; op < sg_graph_num_ops(g); op++) {
    int a, b;
    assert_int_equal(sg_partition_op_part(old, op, &a), SG_OK);
    assert_int_equal(sg_partition_op_part(now, op, &b), SG_OK);
    assert_int_equal(a, b);
  }
  sg_partition_destroy(old);
  sg_partition_destroy(now);
  sg_graph_destroy(g);
}

/* ---- global memory from an older sg_gmem_params ---------------------------------- */

static void test_gmem_older_params(void **state) {
  (void)state;
  CALLER(old_gmem_params) caller;
  FILL_GARBAGE(caller); /* pmem_bytes and pmem_path of garbage could not be mapped */
  caller.p.size = sizeof caller.p;
  caller.p.table_pages = 1024;
  caller.p.dram_bytes = 1 << 20;
  sg_gmem *gm;
  assert_status(sg_gmem_create(NULL, (const sg_gmem_params *)&caller, &gm), SG_OK, NULL);
  sg_gva a;
  assert_status(sg_gmem_alloc(gm, SG_GMEM_DRAM, 4096, SG_GMEM_READ | SG_GMEM_WRITE, &a), SG_OK, NULL);
  /* pmem_bytes defaults to 0: no PMEM tier. */
  sg_gva b;
  assert_status(sg_gmem_alloc(gm, SG_GMEM_PMEM, 4096, SG_GMEM_READ, &b), SG_ERR_UNSUPPORTED, NULL);
  assert_status(sg_gmem_free(gm, a), SG_OK, NULL);
  /* An output struct of an older, shorter layout: only its fields are written. */
  CALLER(sg_gmem_stats) st;
  FILL_GARBAGE(st);
  st.p.size = offsetof(sg_gmem_stats, remote_table_fetches);
  assert_status(sg_gmem_stats_get(gm, &st.p), SG_OK, NULL);
  assert_int_equal(st.p.size, offsetof(sg_gmem_stats, remote_table_fetches));
  unsigned char untouched[sizeof st.p];
  memset(untouched, GARBAGE, sizeof untouched);
  assert_memory_equal((unsigned char *)&st + st.p.size, untouched, sizeof st.p - st.p.size);
  assert_status(sg_gmem_destroy(gm), SG_OK, NULL);
}

/* ---- ops from older params structs ---------------------------------------------- */

static void test_ops_older_params(void **state) {
  (void)state;
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  int64_t xs[] = {1, 3, 8, 8}, ws[] = {4, 3, 3, 3};
  sg_tensor x = sg_input(g, "x", SG_F32, 4, xs);
  sg_tensor w = sg_parameter(g, "w", SG_F32, 4, ws, NULL);

  CALLER(old_conv2d_params) conv;
  FILL_GARBAGE(conv); /* padding and dilation of garbage: refused, were they read */
  conv.p.size = sizeof conv.p;
  conv.p.stride[0] = conv.p.stride[1] = 2;
  sg_tensor y = sg_conv2d(g, x, w, SG_NO_TENSOR, (const sg_conv2d_params *)&conv);
  assert_int_equal(sg_graph_status(g), SG_OK);
  sg_tensor_info info;
  assert_int_equal(sg_graph_tensor_info(g, y, &info), SG_OK);
  /* Padding 0, dilation 1, groups 1 by default: (8 - 3) / 2 + 1 = 3. */
  assert_int_equal(info.dims[1], 4);
  assert_int_equal(info.dims[2], 3);
  assert_int_equal(info.dims[3], 3);

  CALLER(old_pool2d_params) pool;
  FILL_GARBAGE(pool);
  pool.p.size = sizeof pool.p;
  pool.p.kernel[0] = pool.p.kernel[1] = 2;
  sg_tensor z = sg_max_pool2d(g, x, (const sg_pool2d_params *)&pool);
  assert_int_equal(sg_graph_status(g), SG_OK);
  /* The stride defaults to 0, "as the kernel": 8 / 2 = 4. */
  assert_int_equal(sg_graph_tensor_info(g, z, &info), SG_OK);
  assert_int_equal(info.dims[2], 4);
  assert_int_equal(info.dims[3], 4);
  sg_graph_destroy(g);
}

/* ---- refused sizes ------------------------------------------------------------------ */

/* The message names the struct, the caller's size and this library's range. */
static void assert_size_message(const char *type, size_t given, size_t min, size_t max, const char *init) {
  char want[256];
  snprintf(want, sizeof want,
           "%s.size is %zu; this library reads %s of %zu..%zu bytes (initialise it from %s)", type, given,
           type, min, max, init);
  if (strstr(sg_last_error(), want) == NULL) fail_msg("'%s' does not contain '%s'", sg_last_error(), want);
}

static void test_sizes_refused(void **state) {
  (void)state;
  sg_graph *g = dropout_graph();
  const size_t session_min = offsetof(sg_session_params, device) + sizeof(const char *);
  const size_t bad[] = {0, 1, session_min - 1}; /* larger than ours is a newer caller: read (below) */
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CALLER(sg_session_params) caller;
    FILL_GARBAGE(caller);
    caller.p = (sg_session_params)SG_SESSION_PARAMS_INIT;
    caller.p.size = bad[i];
    sg_session *s = (sg_session *)&caller;
    assert_status(sg_session_create(g, &caller.p, &s), SG_ERR_INVALID_ARG, "SG_SESSION_PARAMS_INIT");
    assert_null(s);
    assert_size_message("sg_session_params", bad[i], session_min, sizeof(sg_session_params),
                        "SG_SESSION_PARAMS_INIT");
  }
  sg_graph_destroy(g);

  /* A builder call: the error is sticky, and finalize reports it. */
  assert_int_equal(sg_graph_create(&g), SG_OK);
  int64_t xs[] = {1, 3, 8, 8}, ws[] = {4, 3, 3, 3};
  sg_conv2d_params conv = SG_CONV2D_PARAMS_INIT;
  conv.size = offsetof(sg_conv2d_params, stride);
  sg_tensor y = sg_conv2d(g, sg_input(g, "x", SG_F32, 4, xs), sg_parameter(g, "w", SG_F32, 4, ws, NULL),
                          SG_NO_TENSOR, &conv);
  assert_true(y.id < 0);
  assert_status(sg_graph_finalize(g), SG_ERR_INVALID_ARG, "sg_conv2d: sg_conv2d_params.size is");
  assert_size_message("sg_conv2d_params", offsetof(sg_conv2d_params, stride),
                      offsetof(sg_conv2d_params, padding), sizeof(sg_conv2d_params), "SG_CONV2D_PARAMS_INIT");
  sg_graph_destroy(g);

  /* A newer caller's larger struct: read up to this library's size (with a
   * warning), as if the caller had this library's header. */
  assert_int_equal(sg_graph_create(&g), SG_OK);
  struct {
    sg_conv2d_params p;
    int64_t newer_field;
  } newer = {SG_CONV2D_PARAMS_INIT, 7};
  newer.p.size = sizeof newer;
  newer.p.padding[0] = newer.p.padding[1] = newer.p.padding[2] = newer.p.padding[3] = 1;
  y = sg_conv2d(g, sg_input(g, "x", SG_F32, 4, xs), sg_parameter(g, "w", SG_F32, 4, ws, NULL), SG_NO_TENSOR,
                &newer.p);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  sg_tensor_info yi;
  assert_status(sg_graph_tensor_info(g, y, &yi), SG_OK, NULL);
  assert_int_equal(yi.dims[2], 8); /* padding 1 with a 3x3 kernel keeps 8x8: the field was read */
  sg_graph_destroy(g);

  /* Refused before anything else happens: no rendezvous, no thread. */
  sg_comm_params cp = SG_COMM_PARAMS_INIT;
  cp.size = 1;
  sg_comm *c = NULL;
  assert_status(sg_comm_create(&cp, &c), SG_ERR_INVALID_ARG, "SG_COMM_PARAMS_INIT");
  assert_size_message("sg_comm_params", 1, offsetof(sg_comm_params, rank) + sizeof(int),
                      sizeof(sg_comm_params), "SG_COMM_PARAMS_INIT");
  sg_health_config hc = SG_HEALTH_CONFIG_INIT;
  hc.size = offsetof(sg_health_config, heartbeat_ms);
  sg_health *h = NULL;
  assert_status(sg_health_create(2, 0, &hc, 0, &h), SG_ERR_INVALID_ARG, "sg_health_config.size is");
  sg_onnx_params op = SG_ONNX_PARAMS_INIT;
  op.size = 0;
  sg_graph *imported = NULL;
  assert_status(sg_onnx_import_from_memory(NULL, 0, &op, &imported), SG_ERR_INVALID_ARG,
                "sg_onnx_params.size is 0");
  sg_allocator al = {1, NULL, NULL, NULL, NULL};
  assert_status(sg_set_allocator(&al), SG_ERR_INVALID_ARG, "sg_allocator.size is 1");
}

/* ---- output structs ------------------------------------------------------------------- */

static void test_report_sizes(void **state) {
  (void)state;
  sg_graph *g = dropout_graph();
  sg_session *s;
  assert_status(sg_session_create(g, NULL, &s), SG_OK, NULL);
  assert_status(sg_session_compile(s), SG_OK, NULL);
  sg_compile_report full = SG_COMPILE_REPORT_INIT;
  assert_status(sg_session_compile_report(s, &full), SG_OK, NULL);
  assert_int_equal(full.size, sizeof full);

  /* An older caller's report that ends before ops_scheduled. */
  CALLER(sg_compile_report) older;
  FILL_GARBAGE(older);
  older.p.size = offsetof(sg_compile_report, ops_scheduled);
  assert_status(sg_session_compile_report(s, &older.p), SG_OK, NULL);
  assert_int_equal(older.p.size, offsetof(sg_compile_report, ops_scheduled));
  assert_int_equal(older.p.planned_peak_bytes, full.planned_peak_bytes);
  assert_int_equal(older.p.sum_tensor_bytes, full.sum_tensor_bytes);
  unsigned char untouched[sizeof older];
  memset(untouched, GARBAGE, sizeof untouched);
  assert_memory_equal((unsigned char *)&older + older.p.size, untouched, sizeof older - older.p.size);

  /* A newer caller's longer report: filled up to this library's size, which it is told. */
  CALLER(sg_compile_report) newer;
  FILL_GARBAGE(newer);
  newer.p.size = sizeof newer;
  assert_status(sg_session_compile_report(s, &newer.p), SG_OK, NULL);
  assert_int_equal(newer.p.size, sizeof(sg_compile_report));
  assert_int_equal(newer.p.ops_inplace, full.ops_inplace);
  assert_memory_equal(newer.after, untouched, sizeof newer.after);

  /* Below the first version: refused, nothing written. */
  sg_compile_report tiny;
  memset(&tiny, GARBAGE, sizeof tiny);
  tiny.size = 1;
  assert_status(sg_session_compile_report(s, &tiny), SG_ERR_INVALID_ARG, "sg_compile_report.size is 1");
  assert_int_equal(tiny.size, 1);
  sg_session_destroy(s);
  sg_graph_destroy(g);
}

/* ---- the helper itself ----------------------------------------------------------------- */

typedef struct three {
  size_t size;
  int a, b;
  double c;
} three;

static void test_params_read(void **state) {
  (void)state;
  const sg__versioned v = SG__VERSIONED(three, a, "THREE_INIT");
  assert_int_equal(v.min_size, offsetof(three, a) + sizeof(int));
  assert_int_equal(v.max_size, sizeof(three));
  three d = {sizeof d, 1, 2, 3.0};
  assert_int_equal(sg__params_read("f", v, &d, NULL), SG_OK); /* NULL: the defaults */
  assert_true(d.a == 1 && d.b == 2 && d.c == 3.0);
  three given = {offsetof(three, b), 10, 20, 30.0}; /* an older caller: only `a` */
  assert_int_equal(sg__params_read("f", v, &d, &given), SG_OK);
  assert_true(d.size == sizeof d && d.a == 10 && d.b == 2 && d.c == 3.0);
  given.size = offsetof(three, a); /* below the first version */
  assert_status(sg__params_read("f", v, &d, &given), SG_ERR_INVALID_ARG, "f: three.size is");
  assert_true(d.a == 10 && d.b == 2); /* untouched */
  /* A newer caller: read up to this library's size (the garbage size is not trusted with the copy). */
  three newer = {(size_t)1 << 40, 11, 21, 31.0};
  assert_int_equal(sg__params_read("f", v, &d, &newer), SG_OK);
  assert_true(d.size == sizeof d && d.a == 11 && d.b == 21 && d.c == 31.0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_session_older_params), cmocka_unit_test(test_partition_older_params),
      cmocka_unit_test(test_gmem_older_params),    cmocka_unit_test(test_ops_older_params),
      cmocka_unit_test(test_sizes_refused),        cmocka_unit_test(test_report_sizes),
      cmocka_unit_test(test_params_read),          cmocka_unit_test(test_dist_older_params),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
