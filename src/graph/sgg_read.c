/* .sgg reader, part 1: the container (header, section table, checksums,
 * layout) and the two entry points. Section contents are decoded by
 * sgg_sections.c. Nothing in the file is trusted: every offset, length and
 * count is checked with overflow-safe arithmetic before it is used, and all
 * checksums are verified before any section is decoded. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "graph/sgg_format.h"
#include "sgrt/sgg.h"

/* The checks that need only the 64-byte header: magic, version, header
 * checksum, declared size. Also run on a caller's buffer before copying it. */
static sg_status check_header(const uint8_t *b, size_t size) {
  if (size < SGG_HEADER_SIZE) {
    size_t n = size < SGG_MAGIC_SIZE ? size : SGG_MAGIC_SIZE;
    if (memcmp(b, SGG_MAGIC, n) != 0)
      return sg__error(SG_ERR_FORMAT, "not an .sgg file: bad magic at offset 0");
    return sg__error(SG_ERR_TRUNCATED, "file is %zu bytes, shorter than the %d-byte .sgg header", size,
                     SGG_HEADER_SIZE);
  }
  if (memcmp(b, SGG_MAGIC, SGG_MAGIC_SIZE) != 0) {
    if (memcmp(b, SGG_MAGIC, 4) == 0)
      return sg__error(SG_ERR_FORMAT, "bad .sgg magic at offset 0 (bytes 4..7 changed: was the file copied "
                                      "in text mode?)");
    return sg__error(SG_ERR_FORMAT, "not an .sgg file: bad magic at offset 0");
  }
  /* The version is checked before the header checksum so that a file from a
   * future major version (whose header may be laid out differently) is
   * reported as such. */
  unsigned major = sgg_rd16(b + SGG_H_MAJOR), minor = sgg_rd16(b + SGG_H_MINOR);
  if (major != SG_SGG_VERSION_MAJOR)
    return sg__error(SG_ERR_VERSION,
                     "header (file offset 0x8): format version %u.%u is not readable by this "
                     "sgrt, which reads version %d.x%s",
                     major, minor, SG_SGG_VERSION_MAJOR,
                     major > SG_SGG_VERSION_MAJOR ? " (the file was written by a newer sgrt)" : "");
  uint64_t stored = sgg_rd64(b + SGG_H_HEADER_HASH), computed = XXH64(b, SGG_H_HEADER_HASH, 0);
  if (stored != computed)
    return sg__error(SG_ERR_CHECKSUM,
                     "header checksum mismatch (file offset 0x38: stored 0x%016llx, "
                     "computed 0x%016llx)",
                     (unsigned long long)stored, (unsigned long long)computed);
  uint64_t declared = sgg_rd64(b + SGG_H_FILE_SIZE);
  if (declared > size)
    return sg__error(SG_ERR_TRUNCATED, "file is %zu bytes but its header (file offset 0x20) declares %llu",
                     size, (unsigned long long)declared);
  if (declared < size)
    return sg__error(SG_ERR_FORMAT,
                     "file is %zu bytes but its header (file offset 0x20) declares %llu: %llu "
                     "trailing bytes",
                     size, (unsigned long long)declared, (unsigned long long)(size - declared));
  uint32_t flags = sgg_rd32(b + SGG_H_FLAGS);
  if (flags != 0)
    return sg__error(SG_ERR_UNSUPPORTED,
                     "header (file offset 0xc): unknown feature flags 0x%x (written by a "
                     "newer sgrt?)",
                     flags);
  if (sgg_rd32(b + SGG_H_RESERVED0) != 0 || sgg_rd64(b + SGG_H_RESERVED1) != 0)
    return sg__error(SG_ERR_FORMAT, "header: reserved fields (file offsets 0x14, 0x28) must be zero");
  return SG_OK;
}

typedef struct range {
  uint64_t begin, end;
  int entry; /* section table index; -1 header, -2 table */
} range;

static int range_cmp(const void *a, const void *b) {
  const range *x = a, *y = b;
  return x->begin < y->begin ? -1 : x->begin > y->begin;
}

static const char *range_name(const range *r, char *buf, size_t n) {
  if (r->entry == -1) return "the header";
  if (r->entry == -2) return "the section table";
  snprintf(buf, n, "section %d", r->entry);
  return buf;
}

/* Sections may not overlap each other, the header or the table, and every
 * byte that no section covers must be zero: then each byte of a file is
 * either checksummed or checked, and no corruption goes unnoticed. */
static sg_status check_layout(const uint8_t *b, size_t size, range *rs, int n) {
  qsort(rs, (size_t)n, sizeof *rs, range_cmp);
  uint64_t at = 0;
  const range *prev = NULL;
  for (int i = 0; i < n; i++) {
    if (rs[i].begin == rs[i].end) continue;
    if (rs[i].begin < at) {
      char b1[32], b2[32];
      return sg__error(SG_ERR_FORMAT, "section table: %s (file offset 0x%llx) overlaps %s",
                       range_name(&rs[i], b1, sizeof b1), (unsigned long long)rs[i].begin,
                       range_name(prev, b2, sizeof b2));
    }
    for (uint64_t k = at; k < rs[i].begin; k++)
      if (b[k] != 0)
        return sg__error(SG_ERR_FORMAT, "nonzero padding byte at file offset 0x%llx", (unsigned long long)k);
    at = rs[i].end;
    prev = &rs[i];
  }
  for (uint64_t k = at; k < size; k++)
    if (b[k] != 0)
      return sg__error(SG_ERR_FORMAT, "nonzero padding byte at file offset 0x%llx", (unsigned long long)k);
  return SG_OK;
}

static sg_status check_container(sgg_reader *r) {
  const uint8_t *b = r->base;
  size_t size = r->size;
  SG_CHECK(check_header(b, size));
  uint32_t count = sgg_rd32(b + SGG_H_SECTION_COUNT);
  uint64_t table = sgg_rd64(b + SGG_H_TABLE_OFFSET);
  if (count > SGG_MAX_SECTIONS)
    return sg__error(SG_ERR_RANGE, "header (file offset 0x10): section count %u exceeds the limit of %d",
                     count, SGG_MAX_SECTIONS);
  if (table < SGG_HEADER_SIZE || table % SGG_SECTION_ALIGN != 0)
    return sg__error(SG_ERR_FORMAT,
                     "header (file offset 0x18): section table offset 0x%llx must be a multiple of "
                     "%d past the header",
                     (unsigned long long)table, SGG_SECTION_ALIGN);
  uint64_t table_len = (uint64_t)count * SGG_ENTRY_SIZE;
  if (table > size || table_len > size - table)
    return sg__error(SG_ERR_RANGE,
                     "header: section table at 0x%llx with %u entries extends past the end of the "
                     "file (%zu bytes)",
                     (unsigned long long)table, count, size);
  const uint8_t *t = b + table;
  uint64_t stored = sgg_rd64(b + SGG_H_TABLE_HASH), computed = XXH64(t, (size_t)table_len, 0);
  if (stored != computed)
    return sg__error(SG_ERR_CHECKSUM,
                     "section table (file offset 0x%llx) checksum mismatch (stored 0x%016llx, "
                     "computed 0x%016llx)",
                     (unsigned long long)table, (unsigned long long)stored, (unsigned long long)computed);

  range *rs = sg__malloc(sizeof *rs * (count + 2));
  if (rs == NULL) return sg__error(SG_ERR_NO_MEMORY, "out of memory reading the section table");
  rs[0] = (range){0, SGG_HEADER_SIZE, -1};
  rs[1] = (range){table, table + table_len, -2};
  sg_status st = SG_OK;
  for (uint32_t i = 0; i < count && st == SG_OK; i++) {
    const uint8_t *e = t + (size_t)SGG_ENTRY_SIZE * i;
    uint64_t eoff = table + (uint64_t)SGG_ENTRY_SIZE * i;
    uint32_t type = sgg_rd32(e), flags = sgg_rd32(e + 4);
    uint64_t off = sgg_rd64(e + 8), len = sgg_rd64(e + 16);
    const char *name = sgg_section_name(type);
    unsigned align = type == SGG_SEC_DATA ? SGG_DATA_ALIGN : SGG_SECTION_ALIGN;
    if (flags & ~SGG_SECTION_REQUIRED)
      st = sg__error(SG_ERR_FORMAT, "section table entry %u (file offset 0x%llx): unknown flags 0x%x", i,
                     (unsigned long long)eoff, flags);
    else if (off > size || len > size - off)
      st = sg__error(SG_ERR_RANGE,
                     "section table entry %u (%s section, file offset 0x%llx): offset 0x%llx length "
                     "%llu extends past the end of the file (%zu bytes)",
                     i, name, (unsigned long long)eoff, (unsigned long long)off, (unsigned long long)len,
                     size);
    else if (off % align != 0)
      st = sg__error(SG_ERR_FORMAT,
                     "section table entry %u (%s section, file offset 0x%llx): offset 0x%llx is "
                     "not a multiple of %u",
                     i, name, (unsigned long long)eoff, (unsigned long long)off, align);
    rs[i + 2] = (range){off, off + len, (int)i};
  }
  if (st == SG_OK) st = check_layout(b, size, rs, (int)count + 2);
  sg__free(rs);
  SG_CHECK(st);

  for (uint32_t i = 0; i < count; i++) {
    const uint8_t *e = t + (size_t)SGG_ENTRY_SIZE * i;
    uint64_t eoff = table + (uint64_t)SGG_ENTRY_SIZE * i;
    uint32_t type = sgg_rd32(e), flags = sgg_rd32(e + 4);
    uint64_t off = sgg_rd64(e + 8), len = sgg_rd64(e + 16), hash = sgg_rd64(e + 24);
    uint64_t h = XXH64(b + off, (size_t)len, 0);
    if (h != hash)
      return sg__error(SG_ERR_CHECKSUM,
                       "%s section (table entry %u, file offset 0x%llx, %llu bytes): checksum "
                       "mismatch (stored 0x%016llx, computed 0x%016llx)",
                       sgg_section_name(type), i, (unsigned long long)off, (unsigned long long)len,
                       (unsigned long long)hash, (unsigned long long)h);
    if (type == 0 || type > SGG_SEC_KNOWN_MAX) {
      /* Newer minor versions add optional sections that older readers skip. */
      if (flags & SGG_SECTION_REQUIRED)
        return sg__error(SG_ERR_UNSUPPORTED,
                         "section table entry %u (file offset 0x%llx): section type %u is "
                         "unknown and marked required (written by a newer sgrt?)",
                         i, (unsigned long long)eoff, type);
      continue;
    }
    if (r->sec[type].p != NULL)
      return sg__error(SG_ERR_FORMAT, "section table entry %u (file offset 0x%llx): second %s section", i,
                       (unsigned long long)eoff, sgg_section_name(type));
    r->sec[type] = (sgg_section){off, len, b + off};
  }
  for (uint32_t type = 1; type <= SGG_SEC_KNOWN_MAX; type++)
    if (r->sec[type].p == NULL)
      return sg__error(SG_ERR_FORMAT, "section table (file offset 0x%llx): no %s section",
                       (unsigned long long)table, sgg_section_name(type));
  return SG_OK;
}

static sg_status load(const uint8_t *base, size_t size, sg_graph *g) {
  sgg_reader r = {.base = base, .size = size, .g = g};
  SG_CHECK(check_container(&r));
  SG_CHECK(sg__sgg_read_sections(&r));
  SG_CHECK(sg_graph_finalize(g));
  return SG_OK;
}

sg_status sg_graph_load_from_memory(const void *data, size_t size, sg_graph **out) {
  if (out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_graph_load_from_memory: out is NULL");
  *out = NULL;
  if (data == NULL && size > 0)
    return sg__error(SG_ERR_INVALID_ARG, "sg_graph_load_from_memory: data is NULL");
  static const uint8_t empty[1];
  const uint8_t *src = data ? data : empty;
  /* Reject a wrong or truncated buffer before copying it. */
  SG_CHECK(check_header(src, size));
  sg_graph *g;
  SG_CHECK(sg_graph_create(&g));
  /* A private, 64-byte aligned copy: initializers point into it, as they
   * point into the mapping of a file, and the caller keeps its buffer. */
  uint8_t *copy = sg__arena_alloc(&g->arena, size, SGG_DATA_ALIGN);
  sg_status st;
  if (copy == NULL) {
    st = sg__error(SG_ERR_NO_MEMORY, "sg_graph_load_from_memory: out of memory copying %zu bytes", size);
  } else {
    memcpy(copy, src, size);
    st = load(copy, size, g);
  }
  if (st != SG_OK) {
    sg_graph_destroy(g);
    return st;
  }
  *out = g;
  return SG_OK;
}

/* Prefixes the current error message with the file's path. */
static sg_status with_path(sg_status st, const char *path) {
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", sg_last_error());
  return sg__error(st, "%s: %s", path, msg);
}

sg_status sg_graph_load(const char *path, sg_graph **out) {
  if (out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_graph_load: out is NULL");
  *out = NULL;
  if (path == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_graph_load: path is NULL");
  const void *map;
  size_t size;
  SG_CHECK(sg__map_file(path, &map, &size));
  sg_graph *g;
  sg_status st = sg_graph_create(&g);
  if (st != SG_OK) {
    sg__unmap_file(map, size);
    return st;
  }
  static const uint8_t empty[1];
  g->mapping = (void *)map;
  g->mapping_size = size;
  st = load(map ? map : empty, size, g);
  if (st != SG_OK) {
    sg_graph_destroy(g);
    return with_path(st, path);
  }
  *out = g;
  return SG_OK;
}
