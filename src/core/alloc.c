/* Allocation hooks and the failure injector used by the torture tests. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

static void *libc_malloc(size_t n, void *u) {
  (void)u;
  return malloc(n);
}
static void *libc_realloc(void *p, size_t n, void *u) {
  (void)u;
  return realloc(p, n);
}
static void libc_free(void *p, void *u) {
  (void)u;
  free(p);
}

static sg_allocator allocator = {sizeof(sg_allocator), libc_malloc, libc_realloc, libc_free, NULL};

/* Injector state: fail_after < 0 disables injection. Atomics keep the
 * counters exact if a test ever allocates from several threads. */
static _Atomic long fail_after = -1;
static _Atomic long since_arm;
static _Atomic unsigned long total_allocs;

sg_status sg_set_allocator(const sg_allocator *a) {
  if (a == NULL) {
    allocator = (sg_allocator){sizeof(sg_allocator), libc_malloc, libc_realloc, libc_free, NULL};
    return SG_OK;
  }
  /* Every field of the first version is required: there is nothing to default. */
  sg_allocator q = {0};
  SG_CHECK(
      sg__params_read("sg_set_allocator", SG__VERSIONED(sg_allocator, user, "sizeof(sg_allocator)"), &q, a));
  if (!q.malloc_fn || !q.realloc_fn || !q.free_fn)
    return sg__error(SG_ERR_INVALID_ARG, "sg_set_allocator: all three functions must be set");
  allocator = q;
  return SG_OK;
}

/* True when this allocation should be made to fail. */
static bool inject_failure(void) {
  atomic_fetch_add(&total_allocs, 1);
  long limit = atomic_load(&fail_after);
  long n = atomic_fetch_add(&since_arm, 1);
  return limit >= 0 && n >= limit;
}

long sg__alloc_fail_after(long n) {
  long made = atomic_exchange(&since_arm, 0);
  atomic_store(&fail_after, n);
  return made;
}

unsigned long sg__alloc_count(void) { return atomic_load(&total_allocs); }

void *sg__malloc(size_t bytes) {
  if (inject_failure()) return NULL;
  return allocator.malloc_fn(bytes ? bytes : 1, allocator.user);
}

void *sg__calloc(size_t count, size_t size) {
  size_t bytes;
  if (!sg__mul_size(count, size, &bytes)) return NULL;
  void *p = sg__malloc(bytes);
  if (p) memset(p, 0, bytes ? bytes : 1);
  return p;
}

void *sg__realloc(void *ptr, size_t bytes) {
  if (inject_failure()) return NULL;
  return allocator.realloc_fn(ptr, bytes ? bytes : 1, allocator.user);
}

void sg__free(void *ptr) {
  if (ptr) allocator.free_fn(ptr, allocator.user);
}

char *sg__strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = sg__malloc(n);
  if (p) memcpy(p, s, n);
  return p;
}

sg_status sg__grow(void **items, uint32_t *cap, uint32_t need, size_t elem_size) {
  if (need <= *cap) return SG_OK;
  uint64_t want = *cap ? (uint64_t)*cap * 2 : 16;
  while (want < need) want *= 2;
  if (want > UINT32_MAX) want = UINT32_MAX;
  size_t bytes;
  if (!sg__mul_size((size_t)want, elem_size, &bytes)) return SG_ERR_NO_MEMORY;
  void *p = sg__realloc(*items, bytes);
  if (!p) return SG_ERR_NO_MEMORY;
  *items = p;
  *cap = (uint32_t)want;
  return SG_OK;
}

/* Frees what the library handed out (sgrt/core.h: buffers of sg_graph_save_to_memory,
 * reports as JSON text, ...). */
void sg_free(void *ptr) { sg__free(ptr); }
