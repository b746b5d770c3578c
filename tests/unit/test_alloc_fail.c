/* Allocation-failure torture (SPEC S2, SQLite/curl style): make the Nth
 * allocation fail for N = 0, 1, 2, ... while building, finalizing, saving
 * and loading the sample graphs, until the whole sequence succeeds. Every
 * failure must be SG_ERR_NO_MEMORY with a message, and must leave nothing
 * behind (LeakSanitizer checks in CI). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "sample_graphs.h"
#include "test_util.h"

static char path[256];

/* One pass of the sequence; returns the first failure's status. */
static sg_status sequence(sg_status (*build)(sg_graph **), const char *committed) {
  sg_graph *g = NULL, *m = NULL, *f = NULL, *c = NULL;
  void *buf = NULL;
  size_t size = 0;
  sg_status st;
  SG_CHECK_GOTO(build(&g), st, out);
  SG_CHECK_GOTO(sg_graph_save_to_memory(g, &buf, &size), st, out);
  SG_CHECK_GOTO(sg_graph_load_from_memory(buf, size, &m), st, out);
  SG_CHECK_GOTO(sg_graph_save(m, path), st, out);
  SG_CHECK_GOTO(sg_graph_load(path, &f), st, out);
  SG_CHECK_GOTO(sg_graph_load(sg_test_data(committed), &c), st, out);
  uint64_t h;
  SG_CHECK_GOTO(sg_graph_hash(c, SG_HASH_WEIGHTS, &h), st, out);
out:
  sg_free(buf);
  sg_graph_destroy(c);
  sg_graph_destroy(f);
  sg_graph_destroy(m);
  sg_graph_destroy(g);
  return st;
}

static void torture(sg_status (*build)(sg_graph **), const char *committed) {
  snprintf(path, sizeof path, "/tmp/sgg_alloc_%ld.sgg", (long)getpid());
  long n;
  for (n = 0; n < 1000000; n++) {
    sg_clear_error();
    sg__alloc_fail_after(n);
    sg_status st = sequence(build, committed);
    sg__alloc_fail_after(-1);
    if (st == SG_OK) break;
    if (st != SG_ERR_NO_MEMORY)
      fail_msg("failing allocation %ld gave %s instead of SG_ERR_NO_MEMORY: %s", n, sg_status_str(st),
               sg_last_error());
    if (sg_last_error()[0] == '\0') fail_msg("failing allocation %ld left no message", n);
  }
  printf("%s: the sequence makes %ld allocations; each failure was reported and cleaned up\n", committed, n);
  assert_true(n > 10);
  unlink(path);
}

static void test_alloc_fail_mlp(void **state) {
  (void)state;
  torture(sample_build_mlp, "mlp.sgg");
}

static void test_alloc_fail_cnn(void **state) {
  (void)state;
  torture(sample_build_cnn, "cnn.sgg");
}

static int files_in(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
  closedir(d);
  return n;
}

/* A save that fails part-way must not leave a temporary next to the target. */
static void test_no_stray_temporaries(void **state) {
  (void)state;
  char dir[] = "/tmp/sgg_alloc_dir_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char target[256];
  snprintf(target, sizeof target, "%s/g.sgg", dir);
  sg_graph *g;
  assert_int_equal(sample_build_mlp(&g), SG_OK);
  for (long n = 0;; n++) {
    sg__alloc_fail_after(n);
    sg_status st = sg_graph_save(g, target);
    sg__alloc_fail_after(-1);
    if (st == SG_OK) break;
    assert_int_equal(st, SG_ERR_NO_MEMORY);
    assert_int_equal(files_in(dir), 0);
  }
  assert_int_equal(unlink(target), 0);
  assert_int_equal(rmdir(dir), 0);
  sg_graph_destroy(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_alloc_fail_mlp),
      cmocka_unit_test(test_alloc_fail_cnn),
      cmocka_unit_test(test_no_stray_temporaries),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
