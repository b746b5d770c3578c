/* libFuzzer target for the heartbeat and check-in decoders (SPEC S1, S2, H2):
 * any bytes must decode or be refused with a message, never crash or read
 * out of bounds. What decodes must re-encode to exactly the input (one
 * encoding per value) and be accepted by a monitor of the same job. The
 * first input byte picks the world size, so rank checks see many sizes. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sgrt/health.h"
#include "sgrt/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  int world = 1 + data[0] % 70; /* above 64 so that full dependency lists fit */
  data++, size--;
  uint8_t again[SG_CHECKIN_MAX_BYTES];
  size_t n;
  sg_heartbeat hb;
  if (sg_heartbeat_decode(data, size, world, &hb) == SG_OK) {
    if (sg_heartbeat_encode(&hb, again, sizeof again, &n) != SG_OK || n != size ||
        memcmp(again, data, n) != 0)
      __builtin_trap();
    sg_health *h;
    if (sg_health_create(world, 0, NULL, 0, &h) != SG_OK) __builtin_trap();
    sg_status st = sg_health_heartbeat(h, hb.rank, 1, &hb);
    if (st != SG_OK && st != SG_ERR_STATE) __builtin_trap(); /* only the epoch may disagree */
    sg_health_destroy(h);
  } else if (sg_last_error()[0] == '\0') {
    __builtin_trap();
  }
  sg_clear_error();
  sg_checkin ci;
  if (sg_checkin_decode(data, size, world, &ci) == SG_OK) {
    if (sg_checkin_encode(&ci, again, sizeof again, &n) != SG_OK || n != size || memcmp(again, data, n) != 0)
      __builtin_trap();
    sg_health *h;
    if (sg_health_create(world, 0, NULL, 0, &h) != SG_OK) __builtin_trap();
    sg_status st = sg_health_checkin(h, ci.rank, 1, &ci);
    if (st != SG_OK && st != SG_ERR_STATE) __builtin_trap();
    sg_health_destroy(h);
  } else if (sg_last_error()[0] == '\0') {
    __builtin_trap();
  }
  sg_clear_error();
  return 0;
}
