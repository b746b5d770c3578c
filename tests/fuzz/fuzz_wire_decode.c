/* libFuzzer target for the boundary-tensor wire decoder (SPEC S2, M4): any
 * bytes must give SG_OK or an error status, never a crash or an out-of-bounds
 * read. Decodes once without expectations and once against the header the
 * input itself claims (so the field-by-field checks run too). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "comm/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  sg__wire_header h, again;
  const void *payload;
  if (sg__wire_decode(data, size, NULL, 1, &h, &payload) == SG_OK) {
    size_t bytes = size - sg__wire_header_size(h.ndims);
    /* touch every payload byte: an out-of-bounds pointer would show here */
    volatile uint8_t sum = 0;
    for (size_t i = 0; i < bytes; i++) sum ^= ((const uint8_t *)payload)[i];
    (void)sum;
    if (sg__wire_decode(data, size, &h, 1, &again, &payload) != SG_OK) __builtin_trap();
    h.partition ^= 1;
    if (sg__wire_decode(data, size, &h, 1, &again, &payload) == SG_OK) __builtin_trap();
  }
  return 0;
}
