/* Optimizer state offload (SPEC A5): an MLP trained 5 steps with its
 * optimizer state (SGD momentum buffers, AdamW moments and step counts) in
 * the PMEM tier -- a file mapping in a temporary directory -- ends with
 * parameters and state bit-identical to the same run without offload; also
 * when the state migrates PMEM -> DRAM -> PMEM between steps. The reference
 * is an independent session that never touches the page table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_util.h"

enum { B = 8, F = 12, H = 16, C = 5, STEPS = 5 };

static char dir[64];

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/sgrt-offload-XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  return rmdir(dir);
}

static sg_tensor param(sg_graph *g, const char *name, int ndim, const int64_t *dims, uint64_t seed) {
  float v[H * F];
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= dims[i];
  sg_test_fill(v, (size_t)n, seed);
  for (int64_t i = 0; i < n; i++) v[i] *= 0.3f;
  return sg_parameter(g, name, SG_F32, ndim, dims, v);
}

/* x[B,F] -> linear -> relu -> linear -> cross entropy, then an optimizer:
 * 0 plain SGD (no state), 1 SGD with momentum, 2 AdamW. */
static sg_graph *mlp(int optimizer) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  int64_t xd[] = {B, F}, yd[] = {B}, w1[] = {H, F}, b1[] = {H}, w2[] = {C, H}, b2[] = {C};
  sg_tensor x = sg_input(g, "x", SG_F32, 2, xd), y = sg_input(g, "y", SG_I64, 1, yd);
  sg_tensor lr = sg_input(g, "lr", SG_F32, 0, NULL);
  sg_tensor h = sg_relu(g, sg_linear(g, x, param(g, "w1", 2, w1, 1), param(g, "b1", 1, b1, 2)));
  sg_tensor loss = sg_cross_entropy(g, sg_linear(g, h, param(g, "w2", 2, w2, 3), param(g, "b2", 1, b2, 4)), y,
                                    SG_REDUCTION_MEAN);
  assert_int_equal(sg_tensor_set_name(g, loss, "loss"), SG_OK);
  assert_int_equal(sg_graph_mark_output(g, loss), SG_OK);
  assert_int_equal(sg_graph_backward(g, loss), SG_OK);
  if (optimizer == 2) {
    assert_int_equal(sg_graph_add_adamw(g, lr, NULL), SG_OK);
  } else {
    sg_sgd_params p = SG_SGD_PARAMS_INIT;
    p.momentum = optimizer == 1 ? 0.9 : 0.0;
    p.weight_decay = 1e-3;
    assert_int_equal(sg_graph_add_sgd(g, lr, &p), SG_OK);
  }
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  return g;
}

static sg_session *session(const sg_graph *g) {
  sg_session_params p = SG_SESSION_PARAMS_INIT;
  p.threads = 1;
  sg_session *s;
  assert_status(sg_session_create(g, &p, &s), SG_OK, NULL);
  assert_status(sg_session_compile(s), SG_OK, NULL);
  return s;
}

static void step(sg_session *s, int k) {
  float x[B * F], lr = 0.05f;
  int64_t y[B], xd[] = {B, F}, yd[] = {B};
  sg_test_fill(x, B * F, 100 + (uint64_t)k);
  for (int i = 0; i < B; i++) y[i] = (i * 3 + k) % C;
  assert_status(sg_session_set_input(s, "x", SG_F32, 2, xd, x), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "y", SG_I64, 1, yd, y), SG_OK, NULL);
  assert_status(sg_session_set_input(s, "lr", SG_F32, 0, NULL, &lr), SG_OK, NULL);
  assert_status(sg_session_step(s), SG_OK, NULL);
}

/* Every parameter and optimizer-state tensor, concatenated. */
static unsigned char *snapshot(const sg_graph *g, const sg_session *s, size_t *bytes) {
  size_t total = 0;
  sg_tensor_info in;
  for (int32_t i = 0; i < sg_graph_num_tensors(g); i++) {
    sg_graph_tensor_info(g, (sg_tensor){i}, &in);
    if (in.role == SG_ROLE_PARAMETER || in.role == SG_ROLE_OPTIMIZER_STATE) total += in.nbytes;
  }
  unsigned char *buf = malloc(total), *at = buf;
  assert_non_null(buf);
  for (int32_t i = 0; i < sg_graph_num_tensors(g); i++) {
    sg_graph_tensor_info(g, (sg_tensor){i}, &in);
    if (in.role != SG_ROLE_PARAMETER && in.role != SG_ROLE_OPTIMIZER_STATE) continue;
    assert_status(sg_session_read(s, in.name, at, in.nbytes), SG_OK, NULL);
    at += in.nbytes;
  }
  *bytes = total;
  return buf;
}

/* Each offloaded tensor lives in `tier`, and the session reads it there. */
static void check_where(sg_gmem *gm, const sg_gmem_offload *off, const sg_session *s, sg_gmem_tier tier) {
  for (int i = 0; i < sg_gmem_offload_count(off); i++) {
    const char *name;
    sg_gva gva;
    size_t bytes;
    assert_status(sg_gmem_offload_info(off, i, &name, &gva, &bytes), SG_OK, NULL);
    sg_gmem_loc loc;
    assert_status(sg_gmem_translate(gm, gva, SG_GMEM_READ | SG_GMEM_WRITE, &loc), SG_OK, NULL);
    assert_int_equal(loc.tier, tier);
    unsigned char *v = malloc(bytes);
    assert_non_null(v);
    assert_status(sg_session_read(s, name, v, bytes), SG_OK, NULL);
    assert_memory_equal(v, loc.ptr, bytes);
    free(v);
  }
}

static void run(int optimizer, int migrate) {
  sg_graph *g = mlp(optimizer);
  sg_session *ref = session(g), *s = session(g);
  sg_gmem_params gp = SG_GMEM_PARAMS_INIT;
  gp.table_pages = 1024;
  gp.dram_bytes = 64 * 4096;
  gp.pmem_bytes = 64 * 4096;
  gp.pmem_path = dir;
  sg_gmem *gm;
  assert_status(sg_gmem_create(NULL, &gp, &gm), SG_OK, NULL);
  sg_gmem_offload *off;
  assert_status(sg_gmem_offload_optimizer_state(gm, s, g, SG_GMEM_PMEM, &off), SG_OK, NULL);
  /* SGD momentum: 4 buffers; AdamW: exp_avg, exp_avg_sq and step for 4 parameters. */
  assert_int_equal(sg_gmem_offload_count(off), optimizer == 2 ? 12 : 4);
  check_where(gm, off, s, SG_GMEM_PMEM);
  for (int k = 0; k < STEPS; k++) {
    step(ref, k);
    step(s, k);
    assert_status(sg_gmem_offload_persist(off), SG_OK, NULL);
    if (migrate && k == 1) {
      assert_status(sg_gmem_offload_migrate(off, SG_GMEM_DRAM), SG_OK, NULL);
      check_where(gm, off, s, SG_GMEM_DRAM);
    }
    if (migrate && k == 3) {
      assert_status(sg_gmem_offload_migrate(off, SG_GMEM_PMEM), SG_OK, NULL);
      check_where(gm, off, s, SG_GMEM_PMEM);
    }
  }
  check_where(gm, off, s, SG_GMEM_PMEM);
  size_t na, nb;
  unsigned char *a = snapshot(g, ref, &na), *b = snapshot(g, s, &nb);
  assert_int_equal(na, nb);
  assert_memory_equal(a, b, na);
  /* The optimizer did something: its state is not all zero. */
  float m[H * F];
  int nonzero = 0;
  assert_status(sg_session_read(s, optimizer == 2 ? "w1.exp_avg" : "w1.momentum_buffer", m, sizeof m), SG_OK,
                NULL);
  for (int i = 0; i < H * F; i++) nonzero += m[i] != 0.0f;
  assert_true(nonzero > H * F / 2);
  free(a);
  free(b);
  sg_session_destroy(s);
  sg_session_destroy(ref);
  assert_status(sg_gmem_offload_destroy(off), SG_OK, NULL);
  assert_status(sg_gmem_destroy(gm), SG_OK, NULL);
  sg_graph_destroy(g);
}

static void test_sgd_momentum(void **state) {
  (void)state;
  run(1, 0);
}
static void test_adamw(void **state) {
  (void)state;
  run(2, 0);
}
static void test_adamw_migrating(void **state) {
  (void)state;
  run(2, 1);
}

static void test_errors(void **state) {
  (void)state;
  sg_graph *plain = mlp(0), *mom = mlp(1);
  sg_session *s = session(plain), *t = session(mom);
  sg_gmem_params gp = SG_GMEM_PARAMS_INIT;
  gp.table_pages = 64;
  gp.dram_bytes = 8 * 4096;
  sg_gmem *gm;
  assert_status(sg_gmem_create(NULL, &gp, &gm), SG_OK, NULL);
  sg_gmem_offload *off = (sg_gmem_offload *)1;
  assert_status(sg_gmem_offload_optimizer_state(gm, s, plain, SG_GMEM_DRAM, &off), SG_ERR_NOT_FOUND,
                "no optimizer state");
  assert_null(off);
  assert_status(sg_gmem_offload_optimizer_state(gm, t, mom, SG_GMEM_VRAM, &off), SG_ERR_UNSUPPORTED, "VRAM");
  assert_status(sg_gmem_offload_optimizer_state(gm, t, mom, SG_GMEM_PMEM, &off), SG_ERR_UNSUPPORTED,
                "no PMEM tier");
  assert_status(sg_gmem_offload_optimizer_state(NULL, t, mom, SG_GMEM_DRAM, &off), SG_ERR_INVALID_ARG,
                "NULL");
  /* Out of tier memory: nothing is bound, nothing stays allocated. */
  gp.dram_bytes = 2 * 4096;
  sg_gmem *small;
  assert_status(sg_gmem_create(NULL, &gp, &small), SG_OK, NULL);
  assert_status(sg_gmem_offload_optimizer_state(small, t, mom, SG_GMEM_DRAM, &off), SG_ERR_NO_MEMORY,
                "DRAM tier");
  sg_gva a;
  assert_status(sg_gmem_alloc(small, SG_GMEM_DRAM, 2 * 4096, 0, &a), SG_OK, NULL);
  step(t, 0); /* the session still uses its own memory */
  assert_status(sg_gmem_offload_destroy(NULL), SG_OK, NULL);
  sg_session_destroy(s);
  sg_session_destroy(t);
  assert_status(sg_gmem_destroy(small), SG_OK, NULL);
  assert_status(sg_gmem_destroy(gm), SG_OK, NULL);
  sg_graph_destroy(plain);
  sg_graph_destroy(mom);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sgd_momentum),
      cmocka_unit_test(test_adamw),
      cmocka_unit_test(test_adamw_migrating),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
