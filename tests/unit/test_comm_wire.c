/* The boundary-tensor wire protocol (SPEC M4): byte layout against a
 * hand-written message, exact round trip, every header field corrupted in
 * turn, every truncation, and every expectation mismatch. */
#include <string.h>

#include "comm/comm_internal.h"
#include "comm/wire.h"
#include "test_util.h"

static sg__wire_header sample(void) {
  sg__wire_header h = {0};
  h.count = 3;
  h.dtype = SG_F32;
  h.ndims = 2;
  h.offsets[0] = 4;
  h.offsets[1] = 0x01020304;
  h.partition = 7;
  h.grad_offset = 0x1122334455667788ull;
  return h;
}

static void test_layout(void **state) {
  (void)state;
  sg__wire_header h = sample();
  float payload[3] = {1.0f, 2.0f, -3.0f};
  uint8_t buf[128];
  size_t n;
  assert_status(sg__wire_encode(&h, payload, buf, sizeof buf, &n), SG_OK, NULL);
  const uint8_t want[] = {0x47,
                          0,
                          0,
                          0,
                          0,
                          0,
                          0,
                          0,
                          3,
                          /* count */ 1,
                          /* f32 */ 2, /* dims */
                          0,
                          0,
                          0,
                          4,
                          1,
                          2,
                          3,
                          4,
                          /* offsets */ 0,
                          0,
                          0,
                          7, /* partition */
                          0x11,
                          0x22,
                          0x33,
                          0x44,
                          0x55,
                          0x66,
                          0x77,
                          0x88};
  assert_int_equal(n, sizeof want + sizeof payload);
  assert_int_equal(sg__wire_header_size(2), sizeof want);
  assert_memory_equal(buf, want, sizeof want);
  assert_memory_equal(buf + sizeof want, payload, sizeof payload);
}

static void test_round_trip(void **state) {
  (void)state;
  for (unsigned nd = 0; nd <= SG_WIRE_MAX_DIMS; nd++) {
    sg__wire_header h = sample(), got;
    h.ndims = (uint8_t)nd;
    memset(h.offsets, 0, sizeof h.offsets); /* unused dims decode as 0 */
    for (unsigned i = 0; i < nd; i++) h.offsets[i] = 1000u * i + 1;
    h.dtype = SG_I64;
    int64_t payload[3] = {-1, 0, INT64_MAX};
    uint8_t buf[256];
    size_t n;
    assert_status(sg__wire_encode(&h, payload, buf, sizeof buf, &n), SG_OK, NULL);
    const void *p;
    assert_status(sg__wire_decode(buf, n, &h, 1, &got, &p), SG_OK, NULL);
    assert_true(got.count == h.count && got.dtype == h.dtype && got.ndims == h.ndims &&
                got.partition == h.partition && got.grad_offset == h.grad_offset);
    assert_memory_equal(got.offsets, h.offsets, sizeof h.offsets);
    assert_memory_equal(p, payload, sizeof payload);
    /* every shorter prefix and one extra byte are rejected */
    for (size_t k = 0; k < n; k++) assert_int_not_equal(sg__wire_decode(buf, k, NULL, 1, &got, &p), SG_OK);
    assert_int_not_equal(sg__wire_decode(buf, n + 1, NULL, 1, &got, &p), SG_OK);
  }
}

static void test_corrupt_fields(void **state) {
  (void)state;
  sg__wire_header h = sample(), got;
  float payload[3] = {1, 2, 3};
  uint8_t buf[128], bad[128];
  size_t n;
  const void *p;
  assert_status(sg__wire_encode(&h, payload, buf, sizeof buf, &n), SG_OK, NULL);
  /* offset in the message, what to write, expected status and message */
  struct {
    size_t at;
    uint8_t v;
    sg_status st;
    const char *needle;
  } cases[] = {
      {0, 0x48, SG_ERR_FORMAT, "magic"},
      {1, 0x01, SG_ERR_TRUNCATED, "count"}, /* huge count */
      {8, 4, SG_ERR_SHAPE, "elements"},     /* count 4: payload too short */
      {8, 2, SG_ERR_FORMAT, "count"},       /* count 2: payload too long */
      {9, 0, SG_ERR_DTYPE, "dtype"},
      {9, 99, SG_ERR_DTYPE, "dtype"},
      {9, SG_I32, SG_ERR_DTYPE, "dtype"}, /* same size, other dtype */
      {10, 9, SG_ERR_RANGE, "offset dims"},
      {10, 3, SG_ERR_TRUNCATED, "payload"}, /* header grows: the payload is now short */
      {14, 5, SG_ERR_SHAPE, "offset of dim 0"},
      {18, 5, SG_ERR_SHAPE, "offset of dim 1"},
      {22, 8, SG_ERR_FORMAT, "partition"},
      {30, 0, SG_ERR_FORMAT, "gradient offset"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    memcpy(bad, buf, n);
    bad[cases[i].at] = cases[i].v;
    sg_status st = sg__wire_decode(bad, n, &h, 3, &got, &p);
    if (cases[i].at == 8 && cases[i].v == 4) {
      /* count 4 with 3 elements of payload: a truncated message */
      assert_status(st, SG_ERR_TRUNCATED, "does not match");
      continue;
    }
    assert_status(st, cases[i].st, cases[i].needle);
    assert_non_null(strstr(sg_last_error(), "peer rank 3"));
  }
  /* a header that is fine on its own but not what the receiver expects */
  sg__wire_header other = h;
  other.ndims = 1;
  assert_status(sg__wire_decode(buf, n, &other, 3, &got, &p), SG_ERR_SHAPE, "offset dims");
  other = h;
  other.count = 2;
  assert_status(sg__wire_decode(buf, n, &other, 3, &got, &p), SG_ERR_SHAPE, "elements");
}

static void test_encode_errors(void **state) {
  (void)state;
  sg__wire_header h = sample();
  uint8_t buf[16];
  size_t n;
  float payload[3] = {0};
  assert_status(sg__wire_encode(&h, payload, buf, sizeof buf, &n), SG_ERR_RANGE, "needs");
  h.ndims = 9;
  assert_status(sg__wire_encode(&h, payload, buf, sizeof buf, &n), SG_ERR_RANGE, "offset dims");
  h = sample();
  h.dtype = 0;
  assert_status(sg__wire_encode(&h, payload, buf, sizeof buf, &n), SG_ERR_DTYPE, "dtype");
  h = sample();
  h.count = UINT64_MAX;
  assert_status(sg__wire_encode(&h, payload, buf, sizeof buf, &n), SG_ERR_RANGE, "overflow");
}

static void test_half_conversions(void **state) {
  (void)state;
  assert_int_equal(sg__f32_to_f16(1.0f), 0x3c00);
  assert_int_equal(sg__f32_to_f16(-2.0f), 0xc000);
  assert_int_equal(sg__f32_to_f16(65504.0f), 0x7bff);
  assert_int_equal(sg__f32_to_f16(65520.0f), 0x7c00);
  assert_int_equal(sg__f32_to_f16(1.0f / 3.0f), 0x3555);
  assert_int_equal(sg__f32_to_f16(5.9604645e-08f), 0x0001);
  assert_true(sg__f16_to_f32(0x3555) > 0.3332f && sg__f16_to_f32(0x3555) < 0.3334f);
  assert_true(sg__f16_to_f32(0x0001) == 5.9604645e-08f);
  assert_int_equal(sg__f32_to_bf16(1.0f), 0x3f80);
  assert_int_equal(sg__f32_to_bf16(1.00390625f), 0x3f80); /* tie rounds to even */
  assert_int_equal(sg__f32_to_bf16(1.01171875f), 0x3f82);
  assert_true(sg__bf16_to_f32(0xc040) == -3.0f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layout),           cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_corrupt_fields),   cmocka_unit_test(test_encode_errors),
      cmocka_unit_test(test_half_conversions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
