/* FNV-1a (core.h), a byte at a time as the algorithm defines it: the value
 * depends on the bytes alone, never on the host's word size or endianness,
 * so digests compare across ranks, runs and the documentation. */
#include "core/core.h"

uint64_t sg__fnv1a64(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}
