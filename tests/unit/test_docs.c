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

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_ops_md_covers_op_table)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
