/* Chunked bump allocator for per-graph metadata. */
#include <string.h>

#include "core/core.h"

struct sg__arena_chunk {
  sg__arena_chunk *next;
  size_t size; /* usable bytes after the header */
  size_t used;
  unsigned char data[]; /* aligned per allocation, see sg__arena_alloc */
};

enum { ARENA_MIN_CHUNK = 16 * 1024 };

void sg__arena_init(sg__arena *a) {
  a->head = NULL;
  a->bytes_used = 0;
}

void sg__arena_destroy(sg__arena *a) {
  sg__arena_chunk *c = a->head;
  while (c) {
    sg__arena_chunk *next = c->next;
    sg__free(c);
    c = next;
  }
  a->head = NULL;
  a->bytes_used = 0;
}

void *sg__arena_alloc(sg__arena *a, size_t bytes, size_t align) {
  if (align == 0 || (align & (align - 1)) != 0 || align > 4096) return NULL;
  sg__arena_chunk *c = a->head;
  if (c) {
    uintptr_t base = (uintptr_t)c->data;
    size_t off = ((base + c->used + align - 1) & ~(uintptr_t)(align - 1)) - base;
    if (off <= c->size && bytes <= c->size - off) {
      c->used = off + bytes;
      a->bytes_used += bytes;
      memset(c->data + off, 0, bytes);
      return c->data + off;
    }
  }
  size_t size, total;
  if (!sg__add_size(bytes, align, &size)) return NULL;
  if (size < ARENA_MIN_CHUNK) size = ARENA_MIN_CHUNK;
  if (!sg__add_size(size, sizeof(sg__arena_chunk), &total)) return NULL;
  c = sg__malloc(total);
  if (!c) return NULL;
  c->size = size;
  c->next = a->head;
  a->head = c;
  uintptr_t base = (uintptr_t)c->data;
  size_t off = ((base + align - 1) & ~(uintptr_t)(align - 1)) - base;
  c->used = off + bytes;
  a->bytes_used += bytes;
  memset(c->data + off, 0, bytes);
  return c->data + off;
}

void *sg__arena_memdup(sg__arena *a, const void *p, size_t bytes, size_t align) {
  void *q = sg__arena_alloc(a, bytes, align);
  if (q && bytes) memcpy(q, p, bytes);
  return q;
}

char *sg__arena_strndup(sg__arena *a, const char *s, size_t n) {
  size_t bytes;
  if (!sg__add_size(n, 1, &bytes)) return NULL;
  char *q = sg__arena_alloc(a, bytes, 1);
  if (q) memcpy(q, s, n);
  return q;
}

char *sg__arena_strdup(sg__arena *a, const char *s) { return sg__arena_strndup(a, s, strlen(s)); }
