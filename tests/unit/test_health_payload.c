/* Heartbeat and check-in payloads (SPEC H2, H7, S1): byte layouts against
 * hand-written messages, round trips, every field corrupted in turn, every
 * truncation, trailing bytes, and every single-bit flip (decoded or
 * refused, and when decoded, re-encoded to the same bytes). */
#include <string.h>

#include "core/core.h"
#include "test_util.h"

static const uint8_t hb_bytes[SG_HEARTBEAT_BYTES] = {
    0x48, 0x01, 0x00, 0x00,                         /* magic 'H', version 1, reserved */
    0x00, 0x00, 0x00, 0x02,                         /* rank 2 */
    0x01, 0x02, 0x03, 0x04,                         /* epoch */
    0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x08, /* step */
    0x00, 0x00, 0x00, 0x11,                         /* collective 17 */
    0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, /* timestamp */
};

static sg_heartbeat hb_sample(void) {
  sg_heartbeat hb = {2, 0x01020304u, 0x1122334455667708ull, 17, 0x0a0b0c0d0e0f1011ull};
  return hb;
}

static const uint8_t ci_bytes[SG_CHECKIN_BASE_BYTES + 8] = {
    0x43, 0x01, 0x00, 0x02,                         /* magic 'C', version 1, 2 dependencies */
    0x00, 0x00, 0x00, 0x03,                         /* rank 3 */
    0x00, 0x00, 0x00, 0x05,                         /* epoch 5 */
    0xca, 0xfe, 0xba, 0xbe, 0x00, 0x00, 0x00, 0x01, /* instance id */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xe8, /* timestamp 1000 */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2a, /* step 42 */
    0x00, 0x00, 0x00, 0x07,                         /* collective 7 */
    0x00, 0xfa, 0x00, 0x00,                         /* CPU 250 per mille, reserved */
    0x00, 0x00, 0x00, 0x78,                         /* step_ms 120 */
    0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x04, /* dependencies 2, 4 */
};

static sg_checkin ci_sample(void) {
  sg_checkin ci;
  memset(&ci, 0, sizeof ci);
  ci.rank = 3;
  ci.epoch = 5;
  ci.instance_id = 0xcafebabe00000001ull;
  ci.timestamp_ms = 1000;
  ci.step = 42;
  ci.collective = 7;
  ci.cpu_permille = 250;
  ci.step_ms = 120;
  ci.n_deps = 2;
  ci.deps[0] = 2;
  ci.deps[1] = 4;
  return ci;
}

/* Field by field: the structs have padding that copies need not preserve. */
static void hb_equal(const sg_heartbeat *a, const sg_heartbeat *b) {
  assert_int_equal(a->rank, b->rank);
  assert_int_equal(a->epoch, b->epoch);
  assert_true(a->step == b->step);
  assert_int_equal(a->collective, b->collective);
  assert_true(a->timestamp_ms == b->timestamp_ms);
}

static void ci_equal(const sg_checkin *a, const sg_checkin *b) {
  assert_int_equal(a->rank, b->rank);
  assert_int_equal(a->epoch, b->epoch);
  assert_true(a->instance_id == b->instance_id);
  assert_true(a->timestamp_ms == b->timestamp_ms);
  assert_true(a->step == b->step);
  assert_int_equal(a->collective, b->collective);
  assert_int_equal(a->cpu_permille, b->cpu_permille);
  assert_int_equal(a->step_ms, b->step_ms);
  assert_int_equal(a->n_deps, b->n_deps);
  for (int i = 0; i < SG_CHECKIN_MAX_DEPS; i++) assert_int_equal(a->deps[i], b->deps[i]);
}

static void hb_zero(const sg_heartbeat *a) {
  sg_heartbeat z = {0};
  hb_equal(a, &z);
}

static void ci_zero(const sg_checkin *a) {
  sg_checkin z;
  memset(&z, 0, sizeof z);
  ci_equal(a, &z);
}

static void put32(uint8_t *p, uint32_t v) {
  for (int i = 3; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}
static void put64(uint8_t *p, uint64_t v) {
  for (int i = 7; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}

static void test_heartbeat_layout_and_round_trip(void **state) {
  (void)state;
  sg_heartbeat hb = hb_sample(), got;
  uint8_t buf[64];
  size_t n = 0;
  assert_status(sg_heartbeat_encode(&hb, buf, sizeof buf, &n), SG_OK, NULL);
  assert_int_equal(n, SG_HEARTBEAT_BYTES);
  assert_memory_equal(buf, hb_bytes, sizeof hb_bytes);
  assert_status(sg_heartbeat_decode(hb_bytes, sizeof hb_bytes, 3, &got), SG_OK, NULL);
  hb_equal(&got, &hb);
  /* The extremes of every field. */
  sg_heartbeat ext[2] = {{0, 0, 0, 0, 0}, {65535, UINT32_MAX, INT64_MAX, INT32_MAX, INT64_MAX}};
  for (int i = 0; i < 2; i++) {
    assert_status(sg_heartbeat_encode(&ext[i], buf, SG_HEARTBEAT_BYTES, &n), SG_OK, NULL);
    assert_status(sg_heartbeat_decode(buf, n, 65536, &got), SG_OK, NULL);
    hb_equal(&got, &ext[i]);
  }
}

static void test_checkin_layout_and_round_trip(void **state) {
  (void)state;
  sg_checkin ci = ci_sample(), got;
  uint8_t buf[SG_CHECKIN_MAX_BYTES];
  size_t n = 0;
  assert_status(sg_checkin_encode(&ci, buf, sizeof buf, &n), SG_OK, NULL);
  assert_int_equal(n, sizeof ci_bytes);
  assert_memory_equal(buf, ci_bytes, sizeof ci_bytes);
  assert_status(sg_checkin_decode(ci_bytes, sizeof ci_bytes, 5, &got), SG_OK, NULL);
  ci_equal(&got, &ci);
  /* No dependencies, and the most. */
  ci.n_deps = 0;
  memset(ci.deps, 0, sizeof ci.deps);
  assert_status(sg_checkin_encode(&ci, buf, SG_CHECKIN_BASE_BYTES, &n), SG_OK, NULL);
  assert_int_equal(n, SG_CHECKIN_BASE_BYTES);
  assert_status(sg_checkin_decode(buf, n, 4, &got), SG_OK, NULL);
  ci_equal(&got, &ci);
  ci.n_deps = SG_CHECKIN_MAX_DEPS;
  for (int i = 0; i < SG_CHECKIN_MAX_DEPS; i++) ci.deps[i] = i < 3 ? i : i + 1;
  ci.cpu_permille = 1000;
  ci.step_ms = UINT32_MAX;
  assert_status(sg_checkin_encode(&ci, buf, sizeof buf, &n), SG_OK, NULL);
  assert_int_equal(n, SG_CHECKIN_MAX_BYTES);
  assert_status(sg_checkin_decode(buf, n, 100, &got), SG_OK, NULL);
  ci_equal(&got, &ci);
}

typedef struct corruption {
  size_t offset;
  int width; /* 1, 2 (both bytes set to value), 4 or 8 */
  uint64_t value;
  sg_status want;
  const char *needle;
} corruption;

static void apply(uint8_t *msg, const corruption *c) {
  switch (c->width) {
    case 1: msg[c->offset] = (uint8_t)c->value; break;
    case 2:
      msg[c->offset] = (uint8_t)(c->value >> 8);
      msg[c->offset + 1] = (uint8_t)c->value;
      break;
    case 4: put32(msg + c->offset, (uint32_t)c->value); break;
    case 8: put64(msg + c->offset, c->value); break;
  }
}

static void test_heartbeat_corrupt_fields(void **state) {
  (void)state;
  static const corruption cases[] = {
      {0, 1, 0x43, SG_ERR_FORMAT, "magic byte 0x43, expected 0x48"},
      {1, 1, 0, SG_ERR_FORMAT, "version 0"},
      {1, 1, 2, SG_ERR_VERSION, "version 2, this reader knows up to 1"},
      {2, 2, 0x0100, SG_ERR_FORMAT, "reserved bits 0x0100"},
      {4, 4, 3, SG_ERR_RANGE, "rank 3 is outside the job of 3 ranks"},
      {4, 4, 0xffffffffu, SG_ERR_RANGE, "rank 4294967295 is outside"},
      {12, 8, 0x8000000000000000ull, SG_ERR_RANGE, "step 9223372036854775808"},
      {20, 4, 0x80000000u, SG_ERR_RANGE, "collective position 2147483648"},
      {24, 8, UINT64_MAX, SG_ERR_RANGE, "timestamp 18446744073709551615"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint8_t msg[SG_HEARTBEAT_BYTES];
    memcpy(msg, hb_bytes, sizeof msg);
    apply(msg, &cases[i]);
    sg_heartbeat got;
    memset(&got, 0x5a, sizeof got);
    assert_status(sg_heartbeat_decode(msg, sizeof msg, 3, &got), cases[i].want, cases[i].needle);
    hb_zero(&got);
  }
  /* Every truncation, and a trailing byte. */
  sg_heartbeat got;
  for (size_t len = 0; len < SG_HEARTBEAT_BYTES; len++)
    assert_status(sg_heartbeat_decode(hb_bytes, len, 3, &got), SG_ERR_TRUNCATED, "bytes");
  uint8_t longer[SG_HEARTBEAT_BYTES + 1] = {0};
  memcpy(longer, hb_bytes, SG_HEARTBEAT_BYTES);
  assert_status(sg_heartbeat_decode(longer, sizeof longer, 3, &got), SG_ERR_FORMAT, "1 trailing");
  /* The epoch is any u32: the monitor, not the decoder, compares it. */
  uint8_t msg[SG_HEARTBEAT_BYTES];
  memcpy(msg, hb_bytes, sizeof msg);
  put32(msg + 8, UINT32_MAX);
  assert_status(sg_heartbeat_decode(msg, sizeof msg, 3, &got), SG_OK, NULL);
  /* Arguments. */
  assert_status(sg_heartbeat_decode(NULL, 4, 3, &got), SG_ERR_INVALID_ARG, "buf is NULL");
  assert_status(sg_heartbeat_decode(hb_bytes, 32, 3, NULL), SG_ERR_INVALID_ARG, "out is NULL");
  assert_status(sg_heartbeat_decode(hb_bytes, 32, 0, &got), SG_ERR_INVALID_ARG, "world_size 0");
  assert_status(sg_heartbeat_decode(NULL, 0, 3, &got), SG_ERR_TRUNCATED, "0 bytes");
}

static void test_checkin_corrupt_fields(void **state) {
  (void)state;
  static const corruption cases[] = {
      {0, 1, 0x48, SG_ERR_FORMAT, "magic byte 0x48, expected 0x43"},
      {1, 1, 0, SG_ERR_FORMAT, "version 0"},
      {1, 1, 9, SG_ERR_VERSION, "version 9"},
      {2, 2, 65, SG_ERR_RANGE, "65 dependencies, at most 64"},
      {2, 2, 1, SG_ERR_FORMAT, "4 trailing"},  /* 1 dependency declared, 2 present */
      {2, 2, 3, SG_ERR_TRUNCATED, "needs 60"}, /* 3 declared, 2 present */
      {4, 4, 5, SG_ERR_RANGE, "rank 5 is outside the job of 5 ranks"},
      {4, 4, 0x80000000u, SG_ERR_RANGE, "rank 2147483648"},
      {12, 8, 0, SG_ERR_RANGE, "instance id 0 is reserved"},
      {20, 8, 0x8000000000000000ull, SG_ERR_RANGE, "timestamp"},
      {28, 8, UINT64_MAX, SG_ERR_RANGE, "step 18446744073709551615"},
      {36, 4, 0xffffffffu, SG_ERR_RANGE, "collective position 4294967295"},
      {40, 2, 1001, SG_ERR_RANGE, "CPU use 1001 per mille"},
      {42, 2, 1, SG_ERR_FORMAT, "reserved bits 0x0001"},
      {48, 4, 5, SG_ERR_FORMAT, "dependency 0 is rank 5, outside the job of 5 ranks"},
      {48, 4, 3, SG_ERR_FORMAT, "dependency 0 is the sender itself"},
      {52, 4, 2, SG_ERR_FORMAT, "dependency 1 repeats rank 2"},
      {52, 4, 0xffffffffu, SG_ERR_FORMAT, "dependency 1 is rank 4294967295"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint8_t msg[sizeof ci_bytes];
    memcpy(msg, ci_bytes, sizeof msg);
    apply(msg, &cases[i]);
    sg_checkin got;
    memset(&got, 0x5a, sizeof got);
    assert_status(sg_checkin_decode(msg, sizeof msg, 5, &got), cases[i].want, cases[i].needle);
    ci_zero(&got);
  }
  sg_checkin got;
  for (size_t len = 0; len < sizeof ci_bytes; len++)
    assert_status(sg_checkin_decode(ci_bytes, len, 5, &got), SG_ERR_TRUNCATED, "bytes");
  assert_status(sg_checkin_decode(ci_bytes, sizeof ci_bytes, 65537, &got), SG_ERR_INVALID_ARG, "world_size");
}

static void test_encode_refuses_bad_fields(void **state) {
  (void)state;
  uint8_t buf[SG_CHECKIN_MAX_BYTES];
  size_t n = 7;
  sg_heartbeat hb = hb_sample();
  assert_status(sg_heartbeat_encode(&hb, buf, SG_HEARTBEAT_BYTES - 1, &n), SG_ERR_RANGE, "needs 32 bytes");
  assert_int_equal(n, 0);
  hb.rank = -1;
  assert_status(sg_heartbeat_encode(&hb, buf, sizeof buf, &n), SG_ERR_RANGE, "rank -1");
  hb = hb_sample();
  hb.collective = 0x80000000u;
  assert_status(sg_heartbeat_encode(&hb, buf, sizeof buf, &n), SG_ERR_RANGE, "collective");
  assert_status(sg_heartbeat_encode(NULL, buf, sizeof buf, &n), SG_ERR_INVALID_ARG, "NULL");
  sg_checkin ci = ci_sample();
  assert_status(sg_checkin_encode(&ci, buf, SG_CHECKIN_BASE_BYTES + 7, &n), SG_ERR_RANGE, "needs 56 bytes");
  ci.n_deps = -1;
  assert_status(sg_checkin_encode(&ci, buf, sizeof buf, &n), SG_ERR_RANGE, "-1 dependencies");
  ci = ci_sample();
  ci.deps[1] = 2;
  assert_status(sg_checkin_encode(&ci, buf, sizeof buf, &n), SG_ERR_FORMAT, "repeats rank 2");
  ci = ci_sample();
  ci.instance_id = 0;
  assert_status(sg_checkin_encode(&ci, buf, sizeof buf, &n), SG_ERR_RANGE, "instance id 0");
  assert_status(sg_checkin_encode(&ci, NULL, sizeof buf, &n), SG_ERR_INVALID_ARG, "NULL");
}

/* Every single-bit flip of both messages: decoded or refused with a message;
 * what decodes re-encodes to exactly the flipped bytes (one encoding per value). */
static void test_every_bit_flip(void **state) {
  (void)state;
  int decoded = 0, refused = 0;
  for (size_t i = 0; i < sizeof hb_bytes * 8; i++) {
    uint8_t msg[SG_HEARTBEAT_BYTES], again[SG_HEARTBEAT_BYTES];
    memcpy(msg, hb_bytes, sizeof msg);
    msg[i / 8] ^= (uint8_t)(1u << (i % 8));
    sg_heartbeat got;
    sg_clear_error();
    if (sg_heartbeat_decode(msg, sizeof msg, 3, &got) == SG_OK) {
      size_t n;
      assert_status(sg_heartbeat_encode(&got, again, sizeof again, &n), SG_OK, NULL);
      assert_memory_equal(again, msg, sizeof msg);
      decoded++;
    } else {
      assert_true(sg_last_error()[0] != '\0');
      refused++;
    }
  }
  for (size_t i = 0; i < sizeof ci_bytes * 8; i++) {
    uint8_t msg[sizeof ci_bytes], again[SG_CHECKIN_MAX_BYTES];
    memcpy(msg, ci_bytes, sizeof msg);
    msg[i / 8] ^= (uint8_t)(1u << (i % 8));
    sg_checkin got;
    sg_clear_error();
    if (sg_checkin_decode(msg, sizeof msg, 5, &got) == SG_OK) {
      size_t n;
      assert_status(sg_checkin_encode(&got, again, sizeof again, &n), SG_OK, NULL);
      assert_int_equal(n, sizeof msg);
      assert_memory_equal(again, msg, sizeof msg);
      decoded++;
    } else {
      assert_true(sg_last_error()[0] != '\0');
      refused++;
    }
  }
  assert_true(decoded > 100 && refused > 50);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_heartbeat_layout_and_round_trip),
      cmocka_unit_test(test_checkin_layout_and_round_trip),
      cmocka_unit_test(test_heartbeat_corrupt_fields),
      cmocka_unit_test(test_checkin_corrupt_fields),
      cmocka_unit_test(test_encode_refuses_bad_fields),
      cmocka_unit_test(test_every_bit_flip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
