/* docs/ops.md must describe every op kind and attribute the library has, so
 * the reference cannot silently fall behind the op table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "test_util.h"

static void test_ops_md_covers_op_table(void **state) {
  (void)state;
  size_t n;
  char path[4096];
  snprintf(path, sizeof path, "%s/../../docs/ops.md", SG_TEST_DATA_DIR);
  char *doc = (char *)sg_test_read_file(path, &n);
  doc[n] = '\0';
  int kinds = 0;
  for (int k = 1; k < 1000; k++) {
    const sg__op_def *def = sg__op_def_get((sg_op_kind)k);
    if (def == NULL) continue;
    kinds++;
    char row[128];
    snprintf(row, sizeof row, "| %d | `%s` |", k, def->name);
    if (strstr(doc, row) == NULL) fail_msg("docs/ops.md lacks the table row '%s'", row);
    snprintf(row, sizeof row, "`%s`", def->name);
    const char *section = strstr(doc, "\n### ");
    bool documented = false;
    for (; section && !documented; section = strstr(section + 1, "\n### ")) {
      const char *eol = strchr(section + 1, '\n');
      char *hit = strstr(section, row);
      documented = hit && eol && hit < eol;
    }
    if (!documented) fail_msg("docs/ops.md has no ### section for op '%s'", def->name);
    for (int a = 0; a < def->n_attrs; a++) {
      snprintf(row, sizeof row, "`%s`", def->attrs[a].name);
      if (strstr(doc, row) == NULL)
        fail_msg("docs/ops.md does not mention attribute '%s' of '%s'", def->attrs[a].name, def->name);
    }
  }
  assert_int_equal(kinds, SG__OP_KIND_LAST);
  free(doc);
}

/* The op table's flags (graph/graph.h) hold the kinds docs/ops.md lists for
 * them, which are the lists the layers above kept before the flags existed. */
static void test_op_flags(void **state) {
  (void)state;
  static const sg_op_kind elementwise[] = {SG_OP_RELU,
                                           SG_OP_CLIP,
                                           SG_OP_GELU,
                                           SG_OP_SIGMOID,
                                           SG_OP_TANH,
                                           SG_OP_ADD,
                                           SG_OP_SUB,
                                           SG_OP_MUL,
                                           SG_OP_DIV,
                                           SG_OP_ADD_SCALAR,
                                           SG_OP_MUL_SCALAR,
                                           SG_OP_POW_SCALAR,
                                           SG_OP_DROPOUT,
                                           SG_OP_RELU_BACKWARD,
                                           SG_OP_CLIP_BACKWARD,
                                           SG_OP_GELU_BACKWARD,
                                           SG_OP_SIGMOID_BACKWARD,
                                           SG_OP_TANH_BACKWARD,
                                           SG_OP_DROPOUT_BACKWARD,
                                           SG_OP_EXP,
                                           SG_OP_LOG,
                                           SG_OP_SQRT,
                                           SG_OP_RECIPROCAL,
                                           SG_OP_NEG,
                                           SG_OP_ABS,
                                           SG_OP_SIGN,
                                           SG_OP_ERF,
                                           SG_OP_SIN,
                                           SG_OP_COS,
                                           SG_OP_ACOS,
                                           SG_OP_MAX,
                                           SG_OP_MIN,
                                           SG_OP_WHERE,
                                           SG_OP_CAST};
  static const sg_op_kind views[] = {SG_OP_FLATTEN, SG_OP_RESHAPE};
  static const sg_op_kind layout_agnostic[] = {SG_OP_RELU, SG_OP_RELU_BACKWARD, SG_OP_MUL_SCALAR,
                                               SG_OP_ADD,  SG_OP_SUB,           SG_OP_MUL};
  for (int k = 0; k <= SG__OP_KIND_LAST + 1; k++) {
    uint32_t f = sg__op_flags((sg_op_kind)k);
    bool ew = false, view = false, agnostic = false;
    for (size_t i = 0; i < sizeof elementwise / sizeof *elementwise; i++) ew |= (int)elementwise[i] == k;
    for (size_t i = 0; i < sizeof views / sizeof *views; i++) view |= (int)views[i] == k;
    for (size_t i = 0; i < sizeof layout_agnostic / sizeof *layout_agnostic; i++)
      agnostic |= (int)layout_agnostic[i] == k;
    const sg__op_def *def = sg__op_def_get((sg_op_kind)k);
    bool unary = def != NULL && def->min_inputs == 1 && def->max_inputs == 1;
    assert_int_equal(!!(f & SG__OP_ELEMENTWISE), ew);
    assert_int_equal(!!(f & SG__OP_UNARY), unary);
    assert_int_equal(!!(f & SG__OP_VIEW), view);
    assert_int_equal(!!(f & SG__OP_INPLACE_INPUT0), (ew && k != (int)SG_OP_DROPOUT) || view);
    assert_int_equal(!!(f & SG__OP_LAYOUT_AGNOSTIC), agnostic);
    assert_int_equal(def ? def->flags & SG__OP_UNARY : 0, 0); /* derived, never in the table */
  }
  size_t n;
  char path[4096];
  snprintf(path, sizeof path, "%s/../../docs/ops.md", SG_TEST_DATA_DIR);
  char *doc = (char *)sg_test_read_file(path, &n);
  doc[n] = '\0';
  const char *names[] = {"SG__OP_ELEMENTWISE", "SG__OP_UNARY", "SG__OP_INPLACE_INPUT0", "SG__OP_VIEW",
                         "SG__OP_LAYOUT_AGNOSTIC"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (strstr(doc, names[i]) == NULL) fail_msg("docs/ops.md does not list the flag %s", names[i]);
  free(doc);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_ops_md_covers_op_table),
                                     cmocka_unit_test(test_op_flags)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
