/* See sgg_edit.h. Field offsets are those of docs/format.md. */
#include "sgg_edit.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

uint16_t sgg_get16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
uint32_t sgg_get32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
uint64_t sgg_get64(const uint8_t *p) { return sgg_get32(p) | (uint64_t)sgg_get32(p + 4) << 32; }
void sgg_put16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
void sgg_put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> 8 * i);
}
void sgg_put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> 8 * i);
}

/* Header: u32 section_count at 16, u64 table offset at 24, u64 file size at
 * 32, u64 table hash at 48, u64 header hash at 56. Entry: u32 type, u32
 * flags, u64 offset, u64 length, u64 hash. */
size_t sgg_edit_find(const uint8_t *f, uint32_t type, size_t *length) {
  uint32_t n = sgg_get32(f + 16);
  const uint8_t *t = f + sgg_get64(f + 24);
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t *e = t + 32 * i;
    if (sgg_get32(e) == type) {
      if (length) *length = (size_t)sgg_get64(e + 16);
      return (size_t)sgg_get64(e + 8);
    }
  }
  return 0;
}

size_t sgg_edit_record(const uint8_t *f, uint32_t type, uint32_t i) {
  size_t size = type == SGG_EDIT_TENSORS ? 96 : type == SGG_EDIT_OPS ? 32 : 24;
  return sgg_edit_find(f, type, NULL) + 8 + size * i;
}

size_t sgg_edit_io(const uint8_t *f, uint32_t i) {
  size_t ops = sgg_edit_find(f, SGG_EDIT_OPS, NULL);
  return ops + 8 + 32 * (size_t)sgg_get32(f + ops) + 4 * (size_t)i;
}

void sgg_edit_fix(uint8_t *f, size_t size) {
  /* Tests corrupt the table on purpose: fix what lies inside the file and
   * leave the rest for the reader to report. */
  uint32_t n = sgg_get32(f + 16);
  uint64_t table = sgg_get64(f + 24);
  if (table <= size && n <= (size - table) / 32) {
    uint8_t *t = f + table;
    for (uint32_t i = 0; i < n; i++) {
      uint8_t *e = t + 32 * i;
      uint64_t off = sgg_get64(e + 8), len = sgg_get64(e + 16);
      if (off <= size && len <= size - off) sgg_put64(e + 24, XXH64(f + off, (size_t)len, 0));
    }
    sgg_put64(f + 48, XXH64(t, 32 * (size_t)n, 0));
  }
  sgg_edit_fix_header(f);
}

void sgg_edit_fix_header(uint8_t *f) { sgg_put64(f + 56, XXH64(f, 56, 0)); }

uint8_t *sgg_edit_add_section(const uint8_t *f, size_t size, uint32_t type, uint32_t flags,
                              const void *payload, size_t n, size_t *new_size) {
  uint32_t count = sgg_get32(f + 16);
  size_t table = (size_t)sgg_get64(f + 24);
  size_t new_table = (size_t)((size + 7) & ~(size_t)7);
  size_t sec = new_table + 32 * ((size_t)count + 1);
  size_t total = sec + n;
  uint8_t *g = calloc(1, total);
  if (g == NULL) return NULL;
  memcpy(g, f, size);
  memset(g + table, 0, 32 * (size_t)count); /* the old table becomes zero padding */
  memcpy(g + new_table, f + table, 32 * (size_t)count);
  uint8_t *e = g + new_table + 32 * (size_t)count;
  sgg_put32(e, type);
  sgg_put32(e + 4, flags);
  sgg_put64(e + 8, sec);
  sgg_put64(e + 16, n);
  if (n) memcpy(g + sec, payload, n);
  sgg_put32(g + 16, count + 1);
  sgg_put64(g + 24, new_table);
  sgg_put64(g + 32, total);
  sgg_edit_fix(g, total);
  *new_size = total;
  return g;
}
