/* On-disk layout of .sgg files, shared by the writer and the reader.
 * docs/format.md is the normative description; the constants here must match
 * it byte for byte. Every multi-byte field is little-endian and is read and
 * written through the helpers below, never by casting a struct onto the
 * buffer: mapped files carry no alignment guarantee for the reader's struct
 * layout, and the host may be big-endian. */
#ifndef SG_SGG_FORMAT_H
#define SG_SGG_FORMAT_H

#include <stdint.h>
#include <string.h>

#include "graph/graph_internal.h"

/* Initializers are used in place from the mapped file, so their bytes must
 * already be in host order: .sgg stores little-endian, and sgrt supports
 * only little-endian hosts. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "sgrt's .sgg reader uses initializers in place and needs a little-endian host"
#endif

/* PNG-style magic: the high byte catches 7-bit transports, CR LF / LF catch
 * text-mode newline translation, ^Z stops a DOS `type`. */
#define SGG_MAGIC "\x89SGG\r\n\x1a\n"
#define SGG_MAGIC_SIZE 8

enum {
  SGG_HEADER_SIZE = 64,
  SGG_ENTRY_SIZE = 32,   /* one section table entry */
  SGG_SECTION_ALIGN = 8, /* every section starts at a multiple of 8 */
  SGG_DATA_ALIGN = 64,   /* DATA section and every initializer in it */
  SGG_MAX_SECTIONS = 1024,
  SGG_SECTION_PREFIX = 8, /* the two u32 counts that open each known section */
  SGG_TENSOR_RECORD = 96,
  SGG_OP_RECORD = 32,
  SGG_ATTR_RECORD = 24,
};

/* Header field offsets. */
enum {
  SGG_H_MAGIC = 0,
  SGG_H_MAJOR = 8,
  SGG_H_MINOR = 10,
  SGG_H_FLAGS = 12,
  SGG_H_SECTION_COUNT = 16,
  SGG_H_RESERVED0 = 20,
  SGG_H_TABLE_OFFSET = 24,
  SGG_H_FILE_SIZE = 32,
  SGG_H_RESERVED1 = 40,
  SGG_H_TABLE_HASH = 48,
  SGG_H_HEADER_HASH = 56, /* XXH64 of bytes 0..55 */
};

/* Section types. Numbers are stored in files: append-only. */
enum {
  SGG_SEC_STRINGS = 1,
  SGG_SEC_TENSORS = 2,
  SGG_SEC_OPS = 3,
  SGG_SEC_ATTRS = 4,
  SGG_SEC_GRAPH_IO = 5,
  SGG_SEC_DATA = 6,
  SGG_SEC_KNOWN_MAX = 6,
};

/* Section table entry flags. */
#define SGG_SECTION_REQUIRED 1u
/* Tensor record flags. */
#define SGG_TENSOR_HAS_DATA 1u
/* "No tensor" in an op's input list (an absent optional input). */
#define SGG_NO_TENSOR 0xFFFFFFFFu

/* Tensor record field offsets (record size SGG_TENSOR_RECORD). */
enum {
  SGG_T_NAME = 0,         /* u32 string id */
  SGG_T_DTYPE = 4,        /* u16 */
  SGG_T_ROLE = 6,         /* u16 */
  SGG_T_NDIM = 8,         /* u32 */
  SGG_T_FLAGS = 12,       /* u32 */
  SGG_T_DIMS = 16,        /* i64[8] */
  SGG_T_DATA_OFFSET = 80, /* u64, relative to the DATA section */
  SGG_T_DATA_SIZE = 88,   /* u64 */
};

/* Op record field offsets (record size SGG_OP_RECORD); every field u32. */
enum {
  SGG_O_KIND = 0,
  SGG_O_NAME = 4,
  SGG_O_FIRST_INPUT = 8,
  SGG_O_N_INPUTS = 12,
  SGG_O_FIRST_OUTPUT = 16,
  SGG_O_N_OUTPUTS = 20,
  SGG_O_FIRST_ATTR = 24,
  SGG_O_N_ATTRS = 28,
};

/* Attribute record field offsets (record size SGG_ATTR_RECORD). */
enum {
  SGG_A_NAME = 0,   /* u32 string id */
  SGG_A_TYPE = 4,   /* u32 sg_attr_type */
  SGG_A_COUNT = 8,  /* u32, INTS only */
  SGG_A_FIRST = 12, /* u32 index into the section's i64 payload, INTS only */
  SGG_A_VALUE = 16, /* INT: i64; FLOAT: IEEE-754 binary64 bits; INTS: 0 */
};

static inline uint16_t sgg_rd16(const uint8_t *p) { return (uint16_t)(p[0] | (unsigned)p[1] << 8); }
static inline uint32_t sgg_rd32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t sgg_rd64(const uint8_t *p) {
  return (uint64_t)sgg_rd32(p) | (uint64_t)sgg_rd32(p + 4) << 32;
}
static inline int64_t sgg_rdi64(const uint8_t *p) {
  uint64_t u = sgg_rd64(p);
  int64_t v;
  memcpy(&v, &u, sizeof v); /* two's complement without implementation-defined conversion */
  return v;
}
static inline double sgg_rdf64(const uint8_t *p) {
  uint64_t u = sgg_rd64(p);
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

static inline void sgg_wr16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
static inline void sgg_wr32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void sgg_wr64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void sgg_wri64(uint8_t *p, int64_t v) {
  uint64_t u;
  memcpy(&u, &v, sizeof u);
  sgg_wr64(p, u);
}
static inline void sgg_wrf64(uint8_t *p, double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  sgg_wr64(p, u);
}

/* Rounds up to a multiple of `align` (a power of two); the caller ensures no
 * overflow (values here are bounded by the file size). */
static inline uint64_t sgg_align_up(uint64_t v, uint64_t align) { return (v + align - 1) & ~(align - 1); }

static inline const char *sgg_section_name(uint32_t type) {
  switch (type) {
    case SGG_SEC_STRINGS: return "strings";
    case SGG_SEC_TENSORS: return "tensors";
    case SGG_SEC_OPS: return "ops";
    case SGG_SEC_ATTRS: return "attrs";
    case SGG_SEC_GRAPH_IO: return "graph_io";
    case SGG_SEC_DATA: return "data";
  }
  return "unknown";
}

/* ---- reader internals shared by sgg_read.c and sgg_sections.c ---------- */

typedef struct sgg_section {
  uint64_t offset, length; /* in the file; validated to lie inside it */
  const uint8_t *p;        /* base + offset */
} sgg_section;

typedef struct sgg_reader {
  const uint8_t *base;
  size_t size;
  sgg_section sec[SGG_SEC_KNOWN_MAX + 1]; /* indexed by type; all present after the container check */
  /* Strings, validated once: string i is blob + str_off[i] (decoded on use). */
  uint32_t n_strings;
  const uint8_t *str_offsets;
  const uint8_t *blob;
  uint64_t blob_length;
  sg_graph *g;
} sgg_reader;

/* Decodes the STRINGS, TENSORS, OPS, ATTRS, GRAPH_IO and DATA sections of a
 * file whose container (header, table, checksums) r has already validated,
 * appending to r->g. Errors carry the section, record and file offset. */
sg_status sg__sgg_read_sections(sgg_reader *r);

#endif /* SG_SGG_FORMAT_H */
