/* The health graph (SPEC H2) and hang diagnosis (SPEC H7): ring and pipeline
 * edges, neighbour and unhealthy-dependency queries, refused edges that add
 * nothing; diagnosis sentences for one laggard, several, groups, ties, ranks
 * without heartbeats, dead ranks, no data and a short buffer. */
#include <string.h>

#include "test_util.h"

static void test_ring_and_pipeline_edges(void **state) {
  (void)state;
  sg_health *h;
  assert_status(sg_health_create(6, 0, NULL, 0, &h), SG_OK, NULL);
  assert_status(sg_health_add_ring(h, NULL, 4), SG_OK, NULL); /* 0-1-2-3-0 */
  int nb[8];
  size_t n;
  assert_status(sg_health_neighbors(h, 0, nb, 8, &n), SG_OK, NULL);
  assert_int_equal(n, 2);
  assert_int_equal(nb[0], 1);
  assert_int_equal(nb[1], 3);
  /* A pipeline edge to a ring neighbour adds a kind; to a new rank a neighbour. */
  assert_status(sg_health_add_edge(h, 1, 0, SG_EDGE_PIPELINE), SG_OK, NULL);
  assert_status(sg_health_add_edge(h, 0, 5, SG_EDGE_PIPELINE), SG_OK, NULL);
  unsigned k;
  assert_status(sg_health_edge(h, 0, 1, &k), SG_OK, NULL);
  assert_int_equal(k, SG_EDGE_RING | SG_EDGE_PIPELINE);
  assert_status(sg_health_edge(h, 5, 0, &k), SG_OK, NULL);
  assert_int_equal(k, SG_EDGE_PIPELINE);
  assert_status(sg_health_edge(h, 0, 2, &k), SG_OK, NULL);
  assert_int_equal(k, 0);
  assert_status(sg_health_neighbors(h, 0, nb, 8, &n), SG_OK, NULL);
  assert_int_equal(n, 3);
  assert_int_equal(nb[0], 1);
  assert_int_equal(nb[1], 3);
  assert_int_equal(nb[2], 5);
  /* A short buffer gets the first ones, n the total. */
  nb[1] = -7;
  assert_status(sg_health_neighbors(h, 0, nb, 1, &n), SG_OK, NULL);
  assert_int_equal(n, 3);
  assert_int_equal(nb[0], 1);
  assert_int_equal(nb[1], -7);
  /* A ring in a given order over a subset; two ranks make one edge. */
  const int sub[] = {5, 2, 4};
  assert_status(sg_health_add_ring(h, sub, 3), SG_OK, NULL);
  assert_status(sg_health_neighbors(h, 2, nb, 8, &n), SG_OK, NULL);
  assert_int_equal(n, 4); /* 1, 3 from the first ring; 4, 5 from this one */
  assert_int_equal(nb[0], 1);
  assert_int_equal(nb[3], 5);
  const int pair[] = {4, 1};
  assert_status(sg_health_add_ring(h, pair, 2), SG_OK, NULL);
  assert_status(sg_health_edge(h, 1, 4, &k), SG_OK, NULL);
  assert_int_equal(k, SG_EDGE_RING);
  assert_status(sg_health_add_ring(h, pair, 1), SG_OK, NULL); /* nothing to add */

  /* Unhealthy dependencies: rank 0 depends on 1, 3, 5. */
  assert_status(sg_health_unhealthy_deps(h, 0, nb, 8, &n), SG_OK, NULL);
  assert_int_equal(n, 0);
  assert_status(sg_health_peer_failed(h, 5, 10, "killed"), SG_OK, NULL);
  assert_status(sg_health_peer_failed(h, 2, 10, "killed"), SG_OK, NULL); /* not a dependency of 0 */
  assert_status(sg_health_unhealthy_deps(h, 0, nb, 8, &n), SG_OK, NULL);
  assert_int_equal(n, 1);
  assert_int_equal(nb[0], 5);
  assert_status(sg_health_unhealthy_deps(h, 4, nb, 8, &n), SG_OK, NULL);
  assert_int_equal(n, 2); /* 2 and 5 */
  assert_int_equal(nb[0], 2);
  assert_int_equal(nb[1], 5);
  sg_health_destroy(h);
}

static void test_refused_edges(void **state) {
  (void)state;
  sg_health *h;
  assert_status(sg_health_create(4, 0, NULL, 0, &h), SG_OK, NULL);
  assert_status(sg_health_add_edge(h, 1, 1, SG_EDGE_RING), SG_ERR_INVALID_ARG, "itself");
  assert_status(sg_health_add_edge(h, 1, 2, 0), SG_ERR_INVALID_ARG, "kinds 0x0");
  assert_status(sg_health_add_edge(h, 1, 2, 4), SG_ERR_INVALID_ARG, "kinds 0x4");
  assert_status(sg_health_add_edge(h, 1, 4, SG_EDGE_RING), SG_ERR_INVALID_ARG, "rank 4 is outside");
  assert_status(sg_health_add_edge(NULL, 1, 2, SG_EDGE_RING), SG_ERR_INVALID_ARG, "NULL");
  const int dup[] = {0, 1, 2, 1}, out[] = {0, 9};
  assert_status(sg_health_add_ring(h, dup, 4), SG_ERR_INVALID_ARG, "rank 1 appears twice");
  assert_status(sg_health_add_ring(h, out, 2), SG_ERR_INVALID_ARG, "rank 9 is outside");
  assert_status(sg_health_add_ring(h, NULL, 5), SG_ERR_INVALID_ARG, "5 ranks");
  assert_status(sg_health_add_ring(h, NULL, 0), SG_ERR_INVALID_ARG, "0 ranks");
  /* Nothing was added by the refused calls. */
  for (int r = 0; r < 4; r++) {
    size_t n = 9;
    assert_status(sg_health_neighbors(h, r, NULL, 0, &n), SG_OK, NULL);
    assert_int_equal(n, 0);
  }
  size_t n;
  int nb[2];
  assert_status(sg_health_neighbors(h, 0, NULL, 2, &n), SG_ERR_INVALID_ARG, "NULL");
  assert_status(sg_health_neighbors(h, 0, nb, 2, NULL), SG_ERR_INVALID_ARG, "NULL");
  assert_status(sg_health_unhealthy_deps(h, -1, nb, 2, &n), SG_ERR_INVALID_ARG, "rank -1");
  unsigned k;
  assert_status(sg_health_edge(h, 0, 1, NULL), SG_ERR_INVALID_ARG, "NULL");
  assert_status(sg_health_edge(h, 0, 7, &k), SG_ERR_INVALID_ARG, "rank 7");
  sg_health_destroy(h);
}

/* Feeds heartbeats: positions[r] = {step, collective}, step -1 = none. */
static sg_health *with_positions(int world, const int64_t (*pos)[2]) {
  sg_health *h;
  assert_status(sg_health_create(world, 0, NULL, 0, &h), SG_OK, NULL);
  for (int r = 0; r < world; r++) {
    if (pos[r][0] < 0) continue;
    sg_heartbeat hb = {r, 0, (uint64_t)pos[r][0], (uint32_t)pos[r][1], 0};
    assert_status(sg_health_heartbeat(h, r, 10, &hb), SG_OK, NULL);
  }
  return h;
}

static void expect(const int64_t (*pos)[2], int world, const char *want, int want_behind) {
  sg_health *h = with_positions(world, pos);
  char buf[512];
  int behind = -1;
  assert_status(sg_health_diagnose(h, buf, sizeof buf, &behind), SG_OK, NULL);
  assert_string_equal(buf, want);
  assert_int_equal(behind, want_behind);
  sg_health_destroy(h);
}

static void test_diagnosis_sentences(void **state) {
  (void)state;
  const int64_t one[4][2] = {{5, 18}, {5, 18}, {5, 17}, {5, 18}};
  expect(one, 4, "rank 2 is at collective #17 (step 5), the others at #18 (step 5)", 1);
  const int64_t two[5][2] = {{5, 18}, {5, 17}, {5, 17}, {5, 18}, {5, 17}};
  expect(two, 5, "ranks 1-2, 4 are at collective #17 (step 5), the others at #18 (step 5)", 3);
  /* Positions compare by step first: step 4's #30 is behind step 5's #2. */
  const int64_t groups[4][2] = {{5, 18}, {5, 2}, {5, 18}, {4, 30}};
  expect(
      groups, 4,
      "rank 3 is at collective #30 (step 4); rank 1 is at collective #2 (step 5), the others at #18 (step 5)",
      2);
  const int64_t tie[4][2] = {{5, 18}, {5, 18}, {5, 18}, {5, 18}};
  expect(tie, 4, "all 4 ranks are at collective #18 (step 5)", 0);
  const int64_t pair[2][2] = {{5, 18}, {5, 17}};
  expect(pair, 2, "rank 1 is at collective #17 (step 5), rank 0 at #18 (step 5)", 1);
  const int64_t lone[3][2] = {{-1, 0}, {7, 3}, {-1, 0}};
  expect(lone, 3, "rank 1 is at collective #3 (step 7); no heartbeat from ranks 0, 2", 0);
  const int64_t none[3][2] = {{-1, 0}, {-1, 0}, {-1, 0}};
  expect(none, 3, "no heartbeats yet", 0);
  const int64_t solo[1][2] = {{0, 0}};
  expect(solo, 1, "rank 0 is at collective #0 (step 0)", 0);
}

static void test_diagnosis_with_dead_and_members(void **state) {
  (void)state;
  const int64_t pos[6][2] = {{9, 4}, {9, 4}, {9, 3}, {-1, 0}, {9, 4}, {9, 4}};
  sg_health *h = with_positions(6, pos);
  assert_status(sg_health_peer_failed(h, 4, 20, "killed"), SG_OK, NULL);
  char buf[512];
  int behind;
  assert_status(sg_health_diagnose(h, buf, sizeof buf, &behind), SG_OK, NULL);
  assert_string_equal(
      buf, "rank 2 is at collective #3 (step 9), the others at #4 (step 9); no heartbeat from rank 3; "
           "UNREACHABLE: rank 4");
  assert_int_equal(behind, 1);
  /* Only members count after an epoch change, and only this epoch's heartbeats. */
  const int members[] = {0, 1, 2};
  assert_status(sg_health_reset_epoch(h, 30, 1, members, 3), SG_OK, NULL);
  assert_status(sg_health_diagnose(h, buf, sizeof buf, NULL), SG_OK, NULL);
  assert_string_equal(buf, "no heartbeats yet");
  sg_heartbeat hb = {1, 1, 10, 0, 0};
  assert_status(sg_health_heartbeat(h, 1, 40, &hb), SG_OK, NULL);
  assert_status(sg_health_diagnose(h, buf, sizeof buf, NULL), SG_OK, NULL);
  assert_string_equal(buf, "rank 1 is at collective #0 (step 10); no heartbeat from ranks 0, 2");
  /* A short buffer: a terminated prefix and SG_ERR_RANGE naming the size. */
  char small[10];
  assert_status(sg_health_diagnose(h, small, sizeof small, &behind), SG_ERR_RANGE, "needs 67 bytes");
  assert_string_equal(small, "rank 1 is");
  assert_status(sg_health_diagnose(h, small, 0, NULL), SG_ERR_INVALID_ARG, "cap 0");
  assert_status(sg_health_diagnose(NULL, small, sizeof small, NULL), SG_ERR_INVALID_ARG, "NULL");
  sg_health_destroy(h);
}

static void test_diagnosis_large_job(void **state) {
  (void)state;
  /* 4096 ranks, every third one behind: a long sentence, still exact. */
  enum { W = 4096 };
  sg_health *h;
  assert_status(sg_health_create(W, 0, NULL, 0, &h), SG_OK, NULL);
  for (int r = 0; r < W; r++) {
    sg_heartbeat hb = {r, 0, 100, r % 3 == 1 ? 6u : 7u, 0};
    assert_status(sg_health_heartbeat(h, r, 5, &hb), SG_OK, NULL);
  }
  static char buf[65536];
  int behind;
  assert_status(sg_health_diagnose(h, buf, sizeof buf, &behind), SG_OK, NULL);
  assert_int_equal(behind, (W + 1) / 3);
  assert_true(strncmp(buf, "ranks 1, 4, 7, ", 15) == 0);
  assert_non_null(strstr(buf, ", 4093 are at collective #6 (step 100), the others at #7 (step 100)"));
  sg_health_destroy(h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ring_and_pipeline_edges), cmocka_unit_test(test_refused_edges),
      cmocka_unit_test(test_diagnosis_sentences),     cmocka_unit_test(test_diagnosis_with_dead_and_members),
      cmocka_unit_test(test_diagnosis_large_job),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
