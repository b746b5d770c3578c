/* A tiny .sgg editor for tests and the corpus generator: finds sections,
 * patches fields and recomputes the checksums, so that a test can build a
 * file that is well-formed everywhere except the one field it is about.
 * Written from docs/format.md, independently of the library's reader. */
#ifndef SG_SGG_EDIT_H
#define SG_SGG_EDIT_H

#include <stddef.h>
#include <stdint.h>

enum {
  SGG_EDIT_STRINGS = 1,
  SGG_EDIT_TENSORS = 2,
  SGG_EDIT_OPS = 3,
  SGG_EDIT_ATTRS = 4,
  SGG_EDIT_GRAPH_IO = 5,
  SGG_EDIT_DATA = 6,
};

uint16_t sgg_get16(const uint8_t *p);
uint32_t sgg_get32(const uint8_t *p);
uint64_t sgg_get64(const uint8_t *p);
void sgg_put16(uint8_t *p, uint16_t v);
void sgg_put32(uint8_t *p, uint32_t v);
void sgg_put64(uint8_t *p, uint64_t v);

/* File offset of the first section of `type`, or 0 when there is none;
 * *length (may be NULL) receives its length. */
size_t sgg_edit_find(const uint8_t *f, uint32_t type, size_t *length);

/* File offset of record `i` of the fixed-size records of TENSORS (96 bytes),
 * OPS (32) or ATTRS (24), past the section's 8-byte prefix. */
size_t sgg_edit_record(const uint8_t *f, uint32_t type, uint32_t i);

/* File offset of entry `i` of the OPS section's input/output list. */
size_t sgg_edit_io(const uint8_t *f, uint32_t i);

/* Recomputes every section checksum, then the table and header checksums,
 * as far as the table and sections lie inside the `size` bytes of f. */
void sgg_edit_fix(uint8_t *f, size_t size);

/* Recomputes only the header checksum. */
void sgg_edit_fix_header(uint8_t *f);

/* Returns a malloc'd copy of the file with one more section (type, flags,
 * payload) appended after a relocated section table; checksums fixed. */
uint8_t *sgg_edit_add_section(const uint8_t *f, size_t size, uint32_t type, uint32_t flags,
                              const void *payload, size_t n, size_t *new_size);

#endif
