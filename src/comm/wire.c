/* Encoder and validating decoder of the boundary-tensor wire protocol (wire.h).
 * The decoder never reads past `len` and checks every field before it is used
 * (SPEC S1): it is the target of tests/fuzz/fuzz_wire_decode.c. */
#include <string.h>

#include "comm/wire.h"
#include "core/core.h"
#include "sgrt/graph.h"

static void put32(uint8_t *p, uint32_t v) {
  for (int i = 3; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}
static void put64(uint8_t *p, uint64_t v) {
  for (int i = 7; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}
static uint32_t get32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) << 32 | get32(p + 4); }

size_t sg__wire_header_size(unsigned ndims) { return 11 + 4 * (size_t)ndims + 12; }

static size_t wire_dtype_size(unsigned code) {
  if (code < SG_F32 || code > SG_BOOL) return 0;
  return sg_dtype_size((sg_dtype)code);
}

sg_status sg__wire_encode(const sg__wire_header *h, const void *payload, void *out, size_t cap,
                          size_t *written) {
  if (h == NULL || out == NULL || written == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "wire encode: NULL argument");
  size_t es = wire_dtype_size(h->dtype), bytes, total;
  if (es == 0) return sg__error(SG_ERR_DTYPE, "wire encode: unknown dtype code %u", h->dtype);
  if (h->ndims > SG_WIRE_MAX_DIMS)
    return sg__error(SG_ERR_RANGE, "wire encode: %u offset dims, at most %d", h->ndims, SG_WIRE_MAX_DIMS);
  if (!sg__mul_size((size_t)h->count, es, &bytes) || h->count > SIZE_MAX ||
      !sg__add_size(bytes, sg__wire_header_size(h->ndims), &total))
    return sg__error(SG_ERR_RANGE, "wire encode: %llu elements overflow", (unsigned long long)h->count);
  if (total > cap) return sg__error(SG_ERR_RANGE, "wire encode: needs %zu bytes, buffer has %zu", total, cap);
  if (bytes > 0 && payload == NULL) return sg__error(SG_ERR_INVALID_ARG, "wire encode: NULL payload");
  uint8_t *p = out;
  p[0] = SG_WIRE_MAGIC;
  put64(p + 1, h->count);
  p[9] = h->dtype;
  p[10] = h->ndims;
  p += 11;
  for (unsigned i = 0; i < h->ndims; i++, p += 4) put32(p, h->offsets[i]);
  put32(p, h->partition);
  put64(p + 4, h->grad_offset);
  p += 12;
  if (bytes) memcpy(p, payload, bytes);
  *written = total;
  return SG_OK;
}

sg_status sg__wire_decode(const void *buf, size_t len, const sg__wire_header *expect, int peer,
                          sg__wire_header *out, const void **payload) {
  if ((buf == NULL && len > 0) || out == NULL || payload == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "wire decode: NULL argument");
  const uint8_t *p = buf;
  memset(out, 0, sizeof *out);
  *payload = NULL;
  if (len < sg__wire_header_size(0))
    return sg__error(SG_ERR_TRUNCATED, "boundary message from peer rank %d: %zu bytes, shorter than a header",
                     peer, len);
  if (p[0] != SG_WIRE_MAGIC)
    return sg__error(SG_ERR_FORMAT, "boundary message from peer rank %d: magic 0x%02x, expected 0x%02x", peer,
                     p[0], SG_WIRE_MAGIC);
  out->count = get64(p + 1);
  out->dtype = p[9];
  out->ndims = p[10];
  size_t es = wire_dtype_size(out->dtype);
  if (es == 0)
    return sg__error(SG_ERR_DTYPE, "boundary message from peer rank %d: unknown dtype code %u", peer,
                     out->dtype);
  if (out->ndims > SG_WIRE_MAX_DIMS)
    return sg__error(SG_ERR_RANGE, "boundary message from peer rank %d: %u offset dims, at most %d", peer,
                     out->ndims, SG_WIRE_MAX_DIMS);
  size_t hs = sg__wire_header_size(out->ndims);
  if (len < hs)
    return sg__error(SG_ERR_TRUNCATED, "boundary message from peer rank %d: %zu bytes, header needs %zu",
                     peer, len, hs);
  for (unsigned i = 0; i < out->ndims; i++) out->offsets[i] = get32(p + 11 + 4 * i);
  out->partition = get32(p + hs - 12);
  out->grad_offset = get64(p + hs - 8);
  size_t bytes = 0;
  bool overflow = out->count > SIZE_MAX;
  if (!overflow) overflow = !sg__mul_size((size_t)out->count, es, &bytes);
  if (overflow || bytes != len - hs)
    return sg__error(
        overflow || bytes > len - hs ? SG_ERR_TRUNCATED : SG_ERR_FORMAT,
        "boundary message from peer rank %d: count %llu x %zu bytes does not match the %zu payload bytes",
        peer, (unsigned long long)out->count, es, len - hs);
  if (expect != NULL) {
    if (out->dtype != expect->dtype)
      return sg__error(SG_ERR_DTYPE, "boundary message from peer rank %d: dtype code %u, expected %u", peer,
                       out->dtype, expect->dtype);
    if (out->count != expect->count)
      return sg__error(SG_ERR_SHAPE, "boundary message from peer rank %d: %llu elements, expected %llu", peer,
                       (unsigned long long)out->count, (unsigned long long)expect->count);
    if (out->ndims != expect->ndims)
      return sg__error(SG_ERR_SHAPE, "boundary message from peer rank %d: %u offset dims, expected %u", peer,
                       out->ndims, expect->ndims);
    for (unsigned i = 0; i < out->ndims; i++)
      if (out->offsets[i] != expect->offsets[i])
        return sg__error(SG_ERR_SHAPE,
                         "boundary message from peer rank %d: offset of dim %u is %u, expected %u", peer, i,
                         out->offsets[i], expect->offsets[i]);
    if (out->partition != expect->partition)
      return sg__error(SG_ERR_FORMAT, "boundary message from peer rank %d: partition %u, expected %u", peer,
                       out->partition, expect->partition);
    if (out->grad_offset != expect->grad_offset)
      return sg__error(SG_ERR_FORMAT,
                       "boundary message from peer rank %d: gradient offset %llu, expected %llu", peer,
                       (unsigned long long)out->grad_offset, (unsigned long long)expect->grad_offset);
  }
  *payload = p + hs;
  return SG_OK;
}
