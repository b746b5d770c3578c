#include "test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "compile/plan.h"

void sg_test_assert_status(sg_status got, sg_status expected, const char *needle, const char *file,
                           int line) {
  if (got != expected) {
    fprintf(stderr, "%s:%d: expected %s, got %s (last error: %s)\n", file, line, sg_status_str(expected),
            sg_status_str(got), sg_last_error());
    _fail(file, line);
  }
  /* printf prints a NULL string as "(null)": a message built from a missing
   * name. No error path may do that (every test's errors pass here). */
  if (strstr(sg_last_error(), "(null)")) {
    fprintf(stderr, "%s:%d: %s: message '%s' contains '(null)'\n", file, line, sg_status_str(got),
            sg_last_error());
    _fail(file, line);
  }
  if (expected != SG_OK) {
    const char *msg = sg_last_error();
    if (msg[0] == '\0' || (needle && strstr(msg, needle) == NULL)) {
      fprintf(stderr, "%s:%d: %s: message '%s' lacks '%s'\n", file, line, sg_status_str(got), msg,
              needle ? needle : "(anything)");
      _fail(file, line);
    }
  }
}

unsigned char *sg_test_read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", path);
    fail();
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *p = malloc((size_t)n + 1);
  assert_non_null(p);
  assert_int_equal(fread(p, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  p[n] = 0; /* text files can be searched as strings */
  *size = (size_t)n;
  return p;
}

const char *sg_test_data(const char *name) {
  static char buf[4096];
  snprintf(buf, sizeof buf, "%s/%s", SG_TEST_DATA_DIR, name);
  return buf;
}

void sg_test_fill(float *p, size_t n, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    p[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  }
}

int sg_test_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  assert_true(fd >= 0);
  assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
  close(fd);
  return ntohs(a.sin_port);
}

bool sg_test_same_bits(float got, float want) {
  return memcmp(&got, &want, sizeof got) == 0 || (isnan(got) && isnan(want));
}

bool sg_test_close_ulp(float got, float want) {
  if (isnan(got) || isnan(want)) return isnan(got) && isnan(want);
  if (isinf(got) || isinf(want)) return got == want;
  float ulp = nextafterf(fabsf(want), INFINITY) - fabsf(want);
  return fabsf(got - want) <= 2 * ulp;
}

sg_graph *sg_test_mlp_training(bool decomposed) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  enum { B = 16, F = 24, H = 40, C = 5 };
  int64_t xs[] = {B, F}, ys[] = {B}, w1s[] = {H, F}, b1s[] = {H}, w2s[] = {C, H}, last = -1;
  sg_tensor x = sg_input(g, "x", SG_F32, 2, xs), y = sg_input(g, "y", SG_I64, 1, ys);
  sg_tensor lr = sg_input(g, "lr", SG_F32, 0, NULL);
  sg_tensor W1 = sg_parameter(g, "w1", SG_F32, 2, w1s, NULL),
            B1 = sg_parameter(g, "b1", SG_F32, 1, b1s, NULL);
  sg_tensor W2 = sg_parameter(g, "w2", SG_F32, 2, w2s, NULL);
  sg_tensor h = sg_add(g, sg_linear(g, x, W1, SG_NO_TENSOR), B1), r;
  if (decomposed) {
    sg_tensor mean = sg_reduce_mean(g, h, 1, &last, 1), d = sg_sub(g, h, mean);
    sg_tensor var = sg_reduce_mean(g, sg_mul(g, d, d), 1, &last, 1);
    sg_tensor n = sg_div(g, d, sg_sqrt(g, sg_add_scalar(g, var, 1e-5)));
    r = sg_mul(g, sg_mul_scalar(g, n, 0.5),
               sg_add_scalar(g, sg_erf(g, sg_mul_scalar(g, n, 0.7071067811865476)), 1.0));
  } else {
    sg_tensor a = sg_relu(g, sg_mul_scalar(g, h, 0.7));
    r = sg_add(g, sg_sigmoid(g, a), a);
  }
  sg_tensor loss = sg_cross_entropy(g, sg_linear(g, r, W2, SG_NO_TENSOR), y, SG_REDUCTION_MEAN);
  assert_int_equal(sg_tensor_set_name(g, loss, "loss"), SG_OK);
  assert_int_equal(sg_graph_mark_output(g, loss), SG_OK);
  assert_int_equal(sg_graph_backward(g, loss), SG_OK);
  if (decomposed) {
    sg_adamw_params adamw = SG_ADAMW_PARAMS_INIT;
    assert_int_equal(sg_graph_add_adamw(g, lr, &adamw), SG_OK);
  } else {
    sg_sgd_params sgd = SG_SGD_PARAMS_INIT;
    sgd.momentum = 0.9;
    sgd.weight_decay = 1e-3;
    assert_int_equal(sg_graph_add_sgd(g, lr, &sgd), SG_OK);
  }
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  return g;
}

void sg_test_plan_with(const sg_graph *g, bool (*supports)(void *state, sg_op_kind kind), bool fuse,
                       struct sg__plan *p) {
  sg__backend_i be = sg__cpu_backend;
  be.supports_op = supports;
  void *st = NULL;
  sg__backend_config cfg = {1, 1, 0};
  assert_status(be.create(&cfg, &st), SG_OK, NULL);
  sg__plan_options opt = {0};
  opt.fuse = fuse;
  sg_status s = sg__plan_build(g, &be, st, &opt, p);
  be.destroy(st);
  assert_status(s, SG_OK, NULL);
}

sg_graph *sg_test_sgg_round_trip(const sg_graph *g) {
  void *buf = NULL;
  size_t size = 0;
  assert_status(sg_graph_save_to_memory(g, &buf, &size), SG_OK, NULL);
  sg_graph *h = NULL;
  assert_status(sg_graph_load_from_memory(buf, size, &h), SG_OK, NULL);
  sg_free(buf);
  uint64_t hg, hh;
  assert_status(sg_graph_hash(g, SG_HASH_WEIGHTS, &hg), SG_OK, NULL);
  assert_status(sg_graph_hash(h, SG_HASH_WEIGHTS, &hh), SG_OK, NULL);
  assert_true(hg == hh);
  assert_status(sg_graph_verify(h), SG_OK, NULL);
  return h;
}
