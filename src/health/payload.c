/* Heartbeat and check-in payloads (SPEC H2, H7): encoders and validating
 * decoders. Integers are in network byte order; docs/resilience.md has the
 * layouts. The decoders never read past `len` and check every field before
 * anything uses it (SPEC S1): they are the target of
 * tests/fuzz/fuzz_health_decode.c. */
#include <string.h>

#include "core/core.h"
#include "health/health_internal.h"

#define HEARTBEAT_MAGIC 0x48u /* 'H' */
#define CHECKIN_MAGIC 0x43u   /* 'C' */
#define PAYLOAD_VERSION 1u

static void put16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)(v >> 8);
  p[1] = (uint8_t)v;
}
static void put32(uint8_t *p, uint32_t v) {
  for (int i = 3; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}
static void put64(uint8_t *p, uint64_t v) {
  for (int i = 7; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t get32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) << 32 | get32(p + 4); }

/* Steps and times stay below 2^63 so that the monitor may subtract them as
 * int64_t; collective positions below 2^31 so they print and compare as int. */
static sg_status check_common(const char *what, int rank, int world_size, uint64_t step, uint32_t collective,
                              uint64_t timestamp_ms) {
  if (rank < 0 || rank >= world_size)
    return sg__error(SG_ERR_RANGE, "%s: rank %d is outside the job of %d ranks", what, rank, world_size);
  if (step > INT64_MAX)
    return sg__error(SG_ERR_RANGE, "%s from rank %d: step %llu is above 2^63-1", what, rank,
                     (unsigned long long)step);
  if (collective > INT32_MAX)
    return sg__error(SG_ERR_RANGE, "%s from rank %d: collective position %u is above 2^31-1", what, rank,
                     collective);
  if (timestamp_ms > INT64_MAX)
    return sg__error(SG_ERR_RANGE, "%s from rank %d: timestamp %llu ms is above 2^63-1", what, rank,
                     (unsigned long long)timestamp_ms);
  return SG_OK;
}

sg_status sg__heartbeat_validate(const sg_heartbeat *hb, int world_size, const char *what) {
  return check_common(what, hb->rank, world_size, hb->step, hb->collective, hb->timestamp_ms);
}

sg_status sg__checkin_validate(const sg_checkin *ci, int world_size, const char *what) {
  SG_CHECK(check_common(what, ci->rank, world_size, ci->step, ci->collective, ci->timestamp_ms));
  if (ci->instance_id == 0)
    return sg__error(SG_ERR_RANGE, "%s from rank %d: instance id 0 is reserved (ids are nonzero)", what,
                     ci->rank);
  if (ci->cpu_permille > 1000)
    return sg__error(SG_ERR_RANGE, "%s from rank %d: CPU use %u per mille is above 1000", what, ci->rank,
                     ci->cpu_permille);
  if (ci->n_deps < 0 || ci->n_deps > SG_CHECKIN_MAX_DEPS)
    return sg__error(SG_ERR_RANGE, "%s from rank %d: %d dependencies, at most %d", what, ci->rank, ci->n_deps,
                     SG_CHECKIN_MAX_DEPS);
  for (int i = 0; i < ci->n_deps; i++) {
    int d = ci->deps[i];
    if (d < 0 || d >= world_size)
      return sg__error(SG_ERR_FORMAT,
                       "%s from rank %d: dependency %d is rank %d, outside the job of %d ranks", what,
                       ci->rank, i, d, world_size);
    if (d == ci->rank)
      return sg__error(SG_ERR_FORMAT, "%s from rank %d: dependency %d is the sender itself", what, ci->rank,
                       i);
    for (int j = 0; j < i; j++)
      if (ci->deps[j] == d)
        return sg__error(SG_ERR_FORMAT, "%s from rank %d: dependency %d repeats rank %d", what, ci->rank, i,
                         d);
  }
  return SG_OK;
}

sg_status sg_heartbeat_encode(const sg_heartbeat *hb, void *buf, size_t cap, size_t *written) {
  if (hb == NULL || buf == NULL || written == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg_heartbeat_encode: NULL argument");
  *written = 0;
  SG_CHECK(sg__heartbeat_validate(hb, SG__HEALTH_MAX_WORLD, "sg_heartbeat_encode"));
  if (cap < SG_HEARTBEAT_BYTES)
    return sg__error(SG_ERR_RANGE, "sg_heartbeat_encode: needs %d bytes, the buffer has %zu",
                     SG_HEARTBEAT_BYTES, cap);
  uint8_t *p = buf;
  p[0] = HEARTBEAT_MAGIC;
  p[1] = PAYLOAD_VERSION;
  put16(p + 2, 0);
  put32(p + 4, (uint32_t)hb->rank);
  put32(p + 8, hb->epoch);
  put64(p + 12, hb->step);
  put32(p + 20, hb->collective);
  put64(p + 24, hb->timestamp_ms);
  *written = SG_HEARTBEAT_BYTES;
  return SG_OK;
}

/* Magic and version, the first two bytes of both payloads. */
static sg_status check_header(const uint8_t *p, size_t len, unsigned magic, const char *what) {
  if (len < 4) return sg__error(SG_ERR_TRUNCATED, "%s: %zu bytes, shorter than the 4-byte header", what, len);
  if (p[0] != magic)
    return sg__error(SG_ERR_FORMAT, "%s: magic byte 0x%02x, expected 0x%02x", what, p[0], magic);
  if (p[1] == 0) return sg__error(SG_ERR_FORMAT, "%s: version 0 does not exist", what);
  if (p[1] > PAYLOAD_VERSION)
    return sg__error(SG_ERR_VERSION, "%s: version %u, this reader knows up to %u", what, p[1],
                     PAYLOAD_VERSION);
  return SG_OK;
}

static sg_status check_length(size_t len, size_t need, const char *what) {
  if (len < need) return sg__error(SG_ERR_TRUNCATED, "%s: %zu bytes, needs %zu", what, len, need);
  if (len > need)
    return sg__error(SG_ERR_FORMAT, "%s: %zu bytes, %zu trailing after the %zu expected", what, len,
                     len - need, need);
  return SG_OK;
}

/* A rank field of the wire is u32; anything above INT32_MAX is out of every
 * job, so it maps to -1 and the range check names it. */
static int wire_rank(uint32_t v) { return v > INT32_MAX ? -1 : (int)v; }

/* The argument checks both decoders (`fn`) start with. *out (out_size
 * bytes) is zeroed first, so that a rejected message leaves it zeroed. */
static sg_status decode_args(const char *fn, const void *buf, size_t len, int world_size, void *out,
                             size_t out_size) {
  if (out == NULL) return sg__error(SG_ERR_INVALID_ARG, "%s: out is NULL", fn);
  memset(out, 0, out_size);
  if (buf == NULL && len > 0) return sg__error(SG_ERR_INVALID_ARG, "%s: buf is NULL", fn);
  if (world_size < 1 || world_size > SG__HEALTH_MAX_WORLD)
    return sg__error(SG_ERR_INVALID_ARG, "%s: world_size %d is outside 1..%d", fn, world_size,
                     SG__HEALTH_MAX_WORLD);
  return SG_OK;
}

sg_status sg_heartbeat_decode(const void *buf, size_t len, int world_size, sg_heartbeat *out) {
  SG_CHECK(decode_args("sg_heartbeat_decode", buf, len, world_size, out, sizeof *out));
  const uint8_t *p = buf;
  SG_CHECK(check_header(p, len, HEARTBEAT_MAGIC, "heartbeat"));
  SG_CHECK(check_length(len, SG_HEARTBEAT_BYTES, "heartbeat"));
  if (get16(p + 2) != 0)
    return sg__error(SG_ERR_FORMAT, "heartbeat: reserved bits 0x%04x are set", get16(p + 2));
  sg_heartbeat hb = {0};
  uint32_t rank = get32(p + 4);
  hb.rank = wire_rank(rank);
  hb.epoch = get32(p + 8);
  hb.step = get64(p + 12);
  hb.collective = get32(p + 20);
  hb.timestamp_ms = get64(p + 24);
  if (hb.rank < 0)
    return sg__error(SG_ERR_RANGE, "heartbeat: rank %u is outside the job of %d ranks", rank, world_size);
  SG_CHECK(sg__heartbeat_validate(&hb, world_size, "heartbeat"));
  *out = hb;
  return SG_OK;
}

sg_status sg_checkin_encode(const sg_checkin *ci, void *buf, size_t cap, size_t *written) {
  if (ci == NULL || buf == NULL || written == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg_checkin_encode: NULL argument");
  *written = 0;
  SG_CHECK(sg__checkin_validate(ci, SG__HEALTH_MAX_WORLD, "sg_checkin_encode"));
  size_t need = SG_CHECKIN_BASE_BYTES + 4 * (size_t)ci->n_deps;
  if (cap < need)
    return sg__error(SG_ERR_RANGE, "sg_checkin_encode: needs %zu bytes, the buffer has %zu", need, cap);
  uint8_t *p = buf;
  p[0] = CHECKIN_MAGIC;
  p[1] = PAYLOAD_VERSION;
  put16(p + 2, (uint16_t)ci->n_deps);
  put32(p + 4, (uint32_t)ci->rank);
  put32(p + 8, ci->epoch);
  put64(p + 12, ci->instance_id);
  put64(p + 20, ci->timestamp_ms);
  put64(p + 28, ci->step);
  put32(p + 36, ci->collective);
  put16(p + 40, ci->cpu_permille);
  put16(p + 42, 0);
  put32(p + 44, ci->step_ms);
  for (int i = 0; i < ci->n_deps; i++) put32(p + SG_CHECKIN_BASE_BYTES + 4 * i, (uint32_t)ci->deps[i]);
  *written = need;
  return SG_OK;
}

sg_status sg_checkin_decode(const void *buf, size_t len, int world_size, sg_checkin *out) {
  SG_CHECK(decode_args("sg_checkin_decode", buf, len, world_size, out, sizeof *out));
  const uint8_t *p = buf;
  SG_CHECK(check_header(p, len, CHECKIN_MAGIC, "check-in"));
  unsigned n_deps = get16(p + 2);
  if (n_deps > SG_CHECKIN_MAX_DEPS)
    return sg__error(SG_ERR_RANGE, "check-in: %u dependencies, at most %d", n_deps, SG_CHECKIN_MAX_DEPS);
  SG_CHECK(check_length(len, SG_CHECKIN_BASE_BYTES + 4 * (size_t)n_deps, "check-in"));
  if (get16(p + 42) != 0)
    return sg__error(SG_ERR_FORMAT, "check-in: reserved bits 0x%04x are set", get16(p + 42));
  /* Decoded into a local first so that a rejected message leaves *out zeroed. */
  sg_checkin ci = {0};
  uint32_t rank = get32(p + 4);
  ci.rank = wire_rank(rank);
  ci.epoch = get32(p + 8);
  ci.instance_id = get64(p + 12);
  ci.timestamp_ms = get64(p + 20);
  ci.step = get64(p + 28);
  ci.collective = get32(p + 36);
  ci.cpu_permille = get16(p + 40);
  ci.step_ms = get32(p + 44);
  ci.n_deps = (int)n_deps;
  if (ci.rank < 0)
    return sg__error(SG_ERR_RANGE, "check-in: rank %u is outside the job of %d ranks", rank, world_size);
  for (unsigned i = 0; i < n_deps; i++) {
    uint32_t d = get32(p + SG_CHECKIN_BASE_BYTES + 4 * i);
    if (d > INT32_MAX)
      return sg__error(SG_ERR_FORMAT,
                       "check-in from rank %d: dependency %u is rank %u, outside the job of %d ranks",
                       ci.rank, i, d, world_size);
    ci.deps[i] = (int)d;
  }
  SG_CHECK(sg__checkin_validate(&ci, world_size, "check-in"));
  *out = ci;
  return SG_OK;
}
