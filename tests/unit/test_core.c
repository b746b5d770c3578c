/* Core: status names, per-thread last error, logging level, allocation hooks
 * and failure injection, the arena. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "test_util.h"

static void test_status_names(void **state) {
  (void)state;
  /* Every code from SG_OK down to the last has its own constant name. */
  const char *seen[64] = {0};
  int n = 0;
  for (int s = 0; s >= SG__STATUS_LAST; s--) {
    const char *name = sg_status_str((sg_status)s);
    assert_true(strncmp(name, "SG_", 3) == 0);
    assert_string_not_equal(name, "SG_ERR_UNKNOWN");
    for (int i = 0; i < n; i++) assert_string_not_equal(seen[i], name);
    seen[n++] = name;
  }
  assert_string_equal(sg_status_str(SG_OK), "SG_OK");
  assert_string_equal(sg_status_str(SG_ERR_CHECKSUM), "SG_ERR_CHECKSUM");
  assert_string_equal(sg_status_str((sg_status)-1000), "SG_ERR_UNKNOWN");
  assert_string_equal(sg_status_str((sg_status)(SG__STATUS_LAST - 1)), "SG_ERR_UNKNOWN");
  assert_string_equal(sg_status_str((sg_status)5), "SG_ERR_UNKNOWN");
  assert_string_equal(sg_version(), "0.1.0");
}

static void *other_thread(void *arg) {
  (void)arg;
  /* A fresh thread starts with no error and its errors stay its own. */
  if (sg_last_error()[0] != '\0') return (void *)1;
  sg__error(SG_ERR_IO, "thread message");
  return strcmp(sg_last_error(), "thread message") == 0 ? NULL : (void *)2;
}

static void test_last_error_per_thread(void **state) {
  (void)state;
  assert_int_equal(sg__error(SG_ERR_SHAPE, "main %d", 7), SG_ERR_SHAPE);
  assert_string_equal(sg_last_error(), "main 7");
  assert_int_equal(sg__last_status(), SG_ERR_SHAPE);
  pthread_t t;
  void *ret = (void *)99;
  assert_int_equal(pthread_create(&t, NULL, other_thread, NULL), 0);
  assert_int_equal(pthread_join(t, &ret), 0);
  assert_null(ret);
  assert_string_equal(sg_last_error(), "main 7");
  sg_clear_error();
  assert_string_equal(sg_last_error(), "");
  assert_int_equal(sg__last_status(), SG_OK);
  /* Long messages are cut, not overflowed. */
  char big[4096];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  sg__error(SG_ERR_FORMAT, "%s", big);
  assert_true(strlen(sg_last_error()) < 1024);
  /* API misuse reports through the same channel. */
  assert_status(sg_graph_create(NULL), SG_ERR_INVALID_ARG, "out is NULL");
}

static void test_log_level(void **state) {
  (void)state;
  sg_log_level old = sg_log_get_level();
  sg_log_set_level(SG_LOG_DEBUG);
  assert_int_equal(sg_log_get_level(), SG_LOG_DEBUG);
  assert_true(sg__log_enabled(SG_LOG_INFO));
  assert_false(sg__log_enabled(SG_LOG_TRACE));
  sg_log_set_level((sg_log_level)99);
  assert_int_equal(sg_log_get_level(), SG_LOG_TRACE);
  sg_log_set_level((sg_log_level)-4);
  assert_int_equal(sg_log_get_level(), SG_LOG_NONE);
  assert_false(sg__log_enabled(SG_LOG_ERROR));
  sg_log_set_level(old);
}

/* A counting allocator proves every byte sgrt takes goes back. */
static long live_blocks;
static void *count_malloc(size_t n, void *u) {
  (*(long *)u)++;
  return malloc(n);
}
static void *count_realloc(void *p, size_t n, void *u) {
  if (p == NULL) (*(long *)u)++;
  return realloc(p, n);
}
static void count_free(void *p, void *u) {
  if (p) (*(long *)u)--;
  free(p);
}

static void build_small(void) {
  sg_graph *g;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  int64_t d[] = {4, 8};
  sg_tensor x = sg_input(g, "x", SG_F32, 2, d);
  for (int i = 0; i < 50; i++) x = sg_relu(g, x);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  sg_graph_destroy(g);
}

static void test_allocator_hooks(void **state) {
  (void)state;
  sg_allocator a = {sizeof a, count_malloc, count_realloc, count_free, &live_blocks};
  assert_int_equal(sg_set_allocator(&a), SG_OK);
  build_small();
  assert_int_equal(live_blocks, 0);
  assert_int_equal(sg_set_allocator(NULL), SG_OK);
  sg_allocator bad = {sizeof bad, count_malloc, NULL, count_free, NULL};
  assert_status(sg_set_allocator(&bad), SG_ERR_INVALID_ARG, "all three functions");
  bad.realloc_fn = count_realloc;
  bad.size = 8;
  assert_status(sg_set_allocator(&bad), SG_ERR_INVALID_ARG, "size");
}

static void test_alloc_injector(void **state) {
  (void)state;
  sg__alloc_fail_after(0);
  assert_null(sg__malloc(16));
  assert_null(sg__realloc(NULL, 16));
  assert_null(sg__calloc(2, 8));
  sg__alloc_fail_after(2);
  void *p = sg__malloc(8), *q = sg__malloc(8);
  assert_non_null(p);
  assert_non_null(q);
  assert_null(sg__malloc(8));
  sg__free(p);
  sg__free(q);
  assert_int_equal(sg__alloc_fail_after(-1), 3);
  /* Overflowing sizes fail instead of wrapping. */
  assert_null(sg__calloc(SIZE_MAX / 2, 4));
  unsigned long before = sg__alloc_count();
  sg__free(sg__malloc(1));
  assert_int_equal(sg__alloc_count() - before, 1);
  /* Building a graph with every allocation failing in turn: no crash, the
   * failure is SG_ERR_NO_MEMORY or recorded on the graph, nothing leaks. */
  for (long n = 0;; n++) {
    sg__alloc_fail_after(n);
    sg_graph *g = NULL;
    sg_status st = sg_graph_create(&g);
    if (st == SG_OK) {
      int64_t d[] = {4, 8};
      sg_tensor x = sg_input(g, "x", SG_F32, 2, d);
      for (int i = 0; i < 40; i++) x = sg_relu(g, x);
      st = sg_graph_finalize(g);
    }
    sg__alloc_fail_after(-1);
    sg_graph_destroy(g);
    if (st == SG_OK) break;
    assert_int_equal(st, SG_ERR_NO_MEMORY);
    assert_true(n < 10000);
  }
}

static void test_arena(void **state) {
  (void)state;
  sg__arena a;
  sg__arena_init(&a);
  for (int i = 0; i < 1000; i++) {
    size_t align = (size_t)1 << (i % 7);
    unsigned char *p = sg__arena_alloc(&a, (size_t)(i * 37 % 500) + 1, align);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % align, 0);
    assert_int_equal(p[0], 0);
    memset(p, 0xab, (size_t)(i * 37 % 500) + 1);
  }
  /* Larger than a chunk. */
  unsigned char *big = sg__arena_alloc(&a, 100000, 64);
  assert_non_null(big);
  assert_int_equal((uintptr_t)big % 64, 0);
  big[99999] = 1;
  assert_null(sg__arena_alloc(&a, 8, 3));
  assert_null(sg__arena_alloc(&a, SIZE_MAX, 8));
  char *s = sg__arena_strdup(&a, "hello");
  assert_string_equal(s, "hello");
  sg__arena_destroy(&a);
  sg__arena_destroy(&a);
}

static void test_fnv1a64(void **state) {
  (void)state;
  /* The published FNV-1a 64 test vectors (from FNV's offset basis). */
  const uint64_t basis = 0xcbf29ce484222325ull;
  assert_true(sg__fnv1a64(basis, "", 0) == basis);
  assert_true(sg__fnv1a64(basis, "a", 1) == 0xaf63dc4c8601ec8cull);
  assert_true(sg__fnv1a64(basis, "foobar", 6) == 0x85944171f73967e8ull);
  /* sgrt's seed, and chaining over pieces. */
  assert_true(SG__FNV1A64_SEED == 1469598103934665603ull);
  assert_true(sg__fnv1a64(sg__fnv1a64(SG__FNV1A64_SEED, "foo", 3), "bar", 3) ==
              sg__fnv1a64(SG__FNV1A64_SEED, "foobar", 6));
  assert_true(sg__fnv1a64(SG__FNV1A64_SEED, "foobar", 6) == 0x88fad7c0a8ff07f2ull);
  assert_true(sg__fnv1a64(SG__FNV1A64_SEED, NULL, 0) == SG__FNV1A64_SEED);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_status_names),   cmocka_unit_test(test_last_error_per_thread),
      cmocka_unit_test(test_log_level),      cmocka_unit_test(test_allocator_hooks),
      cmocka_unit_test(test_alloc_injector), cmocka_unit_test(test_arena),
      cmocka_unit_test(test_fnv1a64),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
