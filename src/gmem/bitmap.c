/* Bitmaps of pages and frames. Allocations need runs of consecutive pages
 * and frames, so that one allocation is one contiguous local pointer (what
 * sg_session_bind_state() needs); first fit keeps it simple and the scan
 * skips whole words that are full. */
#include "gmem/gmem_internal.h"

bool sg__bits_test(const uint64_t *bits, uint64_t i) { return (bits[i / 64] >> (i % 64)) & 1; }

void sg__bits_set(uint64_t *bits, uint64_t first, uint64_t n, bool on) {
  for (uint64_t i = first; i < first + n; i++) {
    if (on) bits[i / 64] |= 1ull << (i % 64);
    else bits[i / 64] &= ~(1ull << (i % 64));
  }
}

bool sg__bits_find_run(const uint64_t *bits, uint64_t nbits, uint64_t n, uint64_t *first) {
  if (n == 0 || n > nbits) return false;
  uint64_t run = 0, start = 0;
  for (uint64_t i = 0; i < nbits;) {
    if (i % 64 == 0 && bits[i / 64] == UINT64_MAX) {
      run = 0;
      i += 64;
      continue;
    }
    if (sg__bits_test(bits, i)) {
      run = 0;
    } else {
      if (run == 0) start = i;
      if (++run == n) {
        *first = start;
        return true;
      }
    }
    i++;
  }
  return false;
}
