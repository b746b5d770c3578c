/* The boundary-tensor wire protocol (SPEC M4). Byte layout, all integers in
 * network byte order (docs/comm.md has the table):
 *   0      u8   magic 0x47 ('G')
 *   1      u64  element count
 *   9      u8   dtype code (sg_dtype)
 *   10     u8   number of offset dims D (0..SG_WIRE_MAX_DIMS)
 *   11     u32  x D: the slice's start in the global tensor, per dim
 *   11+4D  u32  partition id of the sender
 *   15+4D  u64  gradient offset (elements into the flat gradient buffer)
 *   23+4D  payload: count * dtype size bytes
 */
#ifndef SG_COMM_WIRE_H
#define SG_COMM_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "sgrt/status.h"

#define SG_WIRE_MAGIC 0x47u
#define SG_WIRE_MAX_DIMS 8

typedef struct sg__wire_header {
  uint64_t count;
  uint8_t dtype;
  uint8_t ndims;
  uint32_t offsets[SG_WIRE_MAX_DIMS];
  uint32_t partition;
  uint64_t grad_offset;
} sg__wire_header;

/* Bytes of a header with `ndims` offset dims. */
size_t sg__wire_header_size(unsigned ndims);

/* Writes header and payload (count * dtype size bytes) into out[cap]. */
sg_status sg__wire_encode(const sg__wire_header *h, const void *payload, void *out, size_t cap,
                          size_t *written);

/* Parses and validates a whole message of `len` bytes. With `expect`, every
 * field must equal the receiver's expectation; without, only the structure is
 * checked. On success *payload points into buf. `peer` names the sender in
 * error messages (-1: unknown). */
sg_status sg__wire_decode(const void *buf, size_t len, const sg__wire_header *expect, int peer,
                          sg__wire_header *out, const void **payload);

#endif /* SG_COMM_WIRE_H */
