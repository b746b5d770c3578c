/* Graphviz output (sg_graph_write_dot): structure, escaping of names, and
 * error paths. Where graphviz is installed, every file written
 * here must also parse with `dot`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_util.h"

/* A temporary path that the test removes again. */
static void temp_path(char *buf, size_t cap) {
  snprintf(buf, cap, "%s/sgrt-dot-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  int fd = mkstemp(buf);
  assert_true(fd >= 0);
  close(fd);
}

static char *read_text(const char *path) {
  size_t n;
  unsigned char *p = sg_test_read_file(path, &n);
  char *s = realloc(p, n + 1);
  assert_non_null(s);
  s[n] = '\0';
  return s;
}

static size_t count(const char *hay, const char *needle) {
  size_t n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* 1 when `dot` parses the file without a word on stderr, 0 when it rejects
 * it, -1 when graphviz is not installed. */
static int graphviz_accepts(const char *path) {
  if (system("command -v dot >/dev/null 2>&1") != 0) return -1;
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "dot -Tsvg '%s' -o /dev/null 2>&1 | grep -q . && exit 1; exit 0", path);
  return system(cmd) == 0;
}

static void test_structure(void **state) {
  (void)state;
  sg_graph *g;
  assert_status(sg_graph_create(&g), SG_OK, NULL);
  int64_t xs[] = {4, 3}, ws[] = {2, 3}, bs[] = {2};
  float w[6] = {0}, b[2] = {0};
  sg_tensor x = sg_input(g, "x", SG_F32, 2, xs);
  sg_tensor y = sg_relu(
      g, sg_linear(g, x, sg_parameter(g, "w", SG_F32, 2, ws, w), sg_constant(g, "b", SG_F32, 1, bs, b)));
  assert_status(sg_tensor_set_name(g, y, "y"), SG_OK, NULL);
  assert_status(sg_graph_mark_output(g, y), SG_OK, NULL);
  assert_status(sg_graph_mark_output(g, x), SG_OK, NULL); /* a source that is also an output */

  /* Only verified graphs are drawn. */
  char path[256];
  temp_path(path, sizeof path);
  assert_status(sg_graph_write_dot(g, path), SG_ERR_STATE, "finalize");
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  assert_status(sg_graph_write_dot(g, path), SG_OK, NULL);
  char *s = read_text(path);
  assert_true(strncmp(s, "digraph sgrt {\n", 15) == 0);
  assert_non_null(strstr(s, "}\n"));
  /* Three sources, each an ellipse with shape, dtype and role. */
  assert_non_null(strstr(s, "label=\"x\\n[4,3] f32\\ninput\""));
  assert_non_null(strstr(s, "label=\"w\\n[2,3] f32\\nparameter\""));
  assert_non_null(strstr(s, "label=\"b\\n[2] f32\\nconstant\""));
  /* Two ops as boxes with kind and name; the output y gets its own node. */
  assert_int_equal(count(s, "shape=box"), 2);
  assert_int_equal(count(s, "peripheries=2"), 2);
  assert_non_null(strstr(s, "label=\"gemm\\ngemm_"));
  assert_non_null(strstr(s, "label=\"relu\\nrelu_"));
  assert_non_null(strstr(s, "label=\"y\\n[4,2] f32\""));
  /* Edges: three into gemm, one gemm -> relu with the shape, one to the output node. */
  assert_int_equal(count(s, " -> op0 "), 3);
  assert_non_null(strstr(s, "op0 -> op1 [label=\"[4,2] f32\"]"));
  assert_non_null(strstr(s, "op1 -> out0 [label=\"[4,2] f32\"]"));
  assert_int_not_equal(graphviz_accepts(path), 0);
  free(s);
  remove(path);
  sg_graph_destroy(g);
}

static void test_escaping(void **state) {
  (void)state;
  sg_graph *g;
  assert_status(sg_graph_create(&g), SG_OK, NULL);
  int64_t xs[] = {2};
  /* Quotes, backslashes and a two-byte character. (Control characters and
   * invalid UTF-8 never reach the writer: names are checked at every
   * boundary, see test_shape and test_verify.) */
  sg_tensor x = sg_input(g, "in\"put\\x", SG_F32, 1, xs);
  sg_tensor y = sg_relu(g, x);
  assert_status(sg_tensor_set_name(g, y, "caf\xc3\xa9 end"), SG_OK, NULL);
  assert_status(sg_graph_mark_output(g, y), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  char path[256];
  temp_path(path, sizeof path);
  assert_status(sg_graph_write_dot(g, path), SG_OK, NULL);
  char *s = read_text(path);
  assert_non_null(strstr(s, "label=\"in\\\"put\\\\x\\n[2] f32\\ninput\""));
  assert_non_null(strstr(s, "label=\"caf\xc3\xa9 end\\n[2] f32\""));
  /* Every statement is on its own line: 4 header lines, 1 source, 1 op, 1
   * edge, output node and its edge, closing brace. */
  assert_int_equal(count(s, "\n"), 10);
  assert_int_not_equal(graphviz_accepts(path), 0);
  free(s);
  remove(path);
  sg_graph_destroy(g);
}

static void test_errors(void **state) {
  (void)state;
  sg_graph *g;
  assert_status(sg_graph_create(&g), SG_OK, NULL);
  assert_status(sg_graph_write_dot(NULL, "x.dot"), SG_ERR_INVALID_ARG, "NULL");
  assert_status(sg_graph_write_dot(g, NULL), SG_ERR_INVALID_ARG, "NULL");
  assert_status(sg_graph_write_dot(g, ""), SG_ERR_INVALID_ARG, "empty");
  /* An empty graph is a valid, empty digraph. */
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  assert_status(sg_graph_write_dot(g, "/nonexistent-dir/sub/x.dot"), SG_ERR_IO, "/nonexistent-dir/sub/x.dot");
  char path[256];
  temp_path(path, sizeof path);
  assert_status(sg_graph_write_dot(g, path), SG_OK, NULL);
  char *s = read_text(path);
  assert_int_equal(count(s, "->"), 0);
  assert_int_not_equal(graphviz_accepts(path), 0);
  free(s);
  remove(path);
  /* A full device is a write error, not silent truncation. */
  sg_graph_destroy(g);
  if (access("/dev/full", W_OK) == 0) {
    assert_status(sg_graph_create(&g), SG_OK, NULL);
    int64_t xs[] = {2};
    sg_relu(g, sg_input(g, "x", SG_F32, 1, xs));
    assert_status(sg_graph_finalize(g), SG_OK, NULL);
    assert_status(sg_graph_write_dot(g, "/dev/full"), SG_ERR_IO, "/dev/full");
    sg_graph_destroy(g);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_structure),
      cmocka_unit_test(test_escaping),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
