/* Hang diagnosis (SPEC H7): the heartbeat's position payload against a
 * hand-written message, round trips, every field corrupted in turn (each is
 * rejected, never half-trusted: SPEC S1), and the diagnosis sentence of
 * hand-made sets of positions, compared with the text written out by hand. */
#include <stdio.h>
#include <string.h>

#include "comm/comm_internal.h"
#include "test_util.h"

static sg_comm_position position(uint64_t seq, int inside, const char *label) {
  sg_comm_position p;
  memset(&p, 0, sizeof p);
  p.collective = seq;
  p.inside = inside;
  p.known = 1;
  snprintf(p.label, sizeof p.label, "%s", label);
  return p;
}

static void test_layout(void **state) {
  (void)state;
  sg_comm_position p = position(0x0102030405060708ull, 1, "ab");
  p.away = 1;
  uint8_t buf[SG__HB_MAX_BYTES];
  size_t n = sg__hb_encode(&p, buf);
  /* version 2; flags: inside (bit 0) | away (bit 1); label length 2; 4 reserved; position LE; label */
  const uint8_t want[] = {2, 3, 2, 0, 0, 0, 0, 0, 8, 7, 6, 5, 4, 3, 2, 1, 'a', 'b'};
  assert_int_equal(n, sizeof want);
  assert_memory_equal(buf, want, sizeof want);
  sg_comm_position q;
  assert_int_equal(sg__hb_decode(want, sizeof want, &q, NULL, 0), SG_OK);
  assert_true(q.collective == 0x0102030405060708ull);
  assert_int_equal(q.inside, 1);
  assert_int_equal(q.away, 1);
  assert_int_equal(q.known, 1);
  assert_string_equal(q.label, "ab");
}

static void test_round_trip(void **state) {
  (void)state;
  char longest[SG_COMM_LABEL_MAX + 1];
  for (int i = 0; i < SG_COMM_LABEL_MAX; i++) longest[i] = (char)(0x20 + i % 95);
  longest[SG_COMM_LABEL_MAX] = '\0';
  const sg_comm_position cases[] = {
      position(0, 0, ""),
      position(1, 1, "step 1: allreduce of gradient bucket 1 of 4"),
      position((uint64_t)INT64_MAX, 0, longest),
      position(42, 1, "~ !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}"),
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint8_t buf[SG__HB_MAX_BYTES];
    size_t n = sg__hb_encode(&cases[i], buf);
    assert_int_equal(n, SG__HB_FIXED_BYTES + strlen(cases[i].label));
    sg_comm_position q;
    char why[128];
    assert_int_equal(sg__hb_decode(buf, n, &q, why, sizeof why), SG_OK);
    assert_string_equal(why, "");
    assert_true(q.collective == cases[i].collective);
    assert_int_equal(q.inside, cases[i].inside);
    assert_int_equal(q.away, 0);
    assert_string_equal(q.label, cases[i].label);
  }
}

/* Decodes a corrupted message: must fail with `want`, say `needle`, and leave nothing behind. */
static void expect_reject(const uint8_t *buf, size_t len, sg_status want, const char *needle) {
  sg_comm_position q;
  memset(&q, 0x5a, sizeof q);
  char why[160];
  sg_status st = sg__hb_decode(buf, len, &q, why, sizeof why);
  if (st != want || strstr(why, needle) == NULL)
    fail_msg("decode of %zu bytes: status %d (want %d), why '%s' (want '%s')", len, st, want, why, needle);
  sg_comm_position zero;
  memset(&zero, 0, sizeof zero);
  assert_memory_equal(&q, &zero, sizeof q);
}

static void test_corrupt_fields(void **state) {
  (void)state;
  sg_comm_position p = position(41, 0, "step 4: check");
  uint8_t good[SG__HB_MAX_BYTES + 1], b[SG__HB_MAX_BYTES + 1];
  size_t n = sg__hb_encode(&p, good);
  /* Every truncation, and a byte too many. */
  for (size_t len = 0; len < n; len++)
    expect_reject(good, len, SG_ERR_TRUNCATED,
                  len < SG__HB_FIXED_BYTES ? "at least 16" : "label length says");
  memcpy(b, good, n);
  b[n] = 'x';
  expect_reject(b, n + 1, SG_ERR_FORMAT, "label length says");
  expect_reject(NULL, n, SG_ERR_TRUNCATED, "heartbeat");
  /* version */
  memcpy(b, good, n);
  b[0] = SG__HB_VERSION + 1;
  expect_reject(b, n, SG_ERR_VERSION, "version 3");
  b[0] = 0;
  expect_reject(b, n, SG_ERR_FORMAT, "version 0");
  /* flags: only bits 0 (inside) and 1 (away) mean something */
  for (int bit = 2; bit < 8; bit++) {
    memcpy(b, good, n);
    b[1] = (uint8_t)(1u << bit);
    expect_reject(b, n, SG_ERR_FORMAT, "flags");
  }
  /* label length: above the limit, or disagreeing with the message */
  memcpy(b, good, n);
  b[2] = SG_COMM_LABEL_MAX + 1;
  expect_reject(b, n, SG_ERR_RANGE, "label length 97");
  memcpy(b, good, n);
  b[3] = 1;
  expect_reject(b, n, SG_ERR_RANGE, "label length");
  memcpy(b, good, n);
  b[2]--;
  expect_reject(b, n, SG_ERR_FORMAT, "label length says");
  /* reserved bytes */
  for (int i = 4; i < 8; i++) {
    memcpy(b, good, n);
    b[i] = 1;
    expect_reject(b, n, SG_ERR_FORMAT, "reserved");
  }
  /* position beyond 2^63-1 */
  memcpy(b, good, n);
  b[15] = 0x80;
  expect_reject(b, n, SG_ERR_RANGE, "position");
  /* label bytes outside printable ASCII, at each end */
  const uint8_t bad_bytes[] = {0x00, 0x0a, 0x1f, 0x7f, 0x80, 0xff};
  for (size_t i = 0; i < sizeof bad_bytes; i++) {
    memcpy(b, good, n);
    b[SG__HB_FIXED_BYTES] = bad_bytes[i];
    expect_reject(b, n, SG_ERR_FORMAT, "printable");
    memcpy(b, good, n);
    b[n - 1] = bad_bytes[i];
    expect_reject(b, n, SG_ERR_FORMAT, "printable");
  }
}

static void test_text(void **state) {
  (void)state;
  /* 4 ranks; rank 0 waited 2.04 s in #42; rank 2 finished #41 and never came. */
  sg_comm_position pos[4] = {
      position(0, 0, "unused: self"),
      position(42, 1, "step 5: allreduce of gradient bucket 1 of 2"),
      position(41, 0, "step 4: allreduce of gradient bucket 2 of 2"),
      position(42, 1, "step 5: allreduce of gradient bucket 1 of 2"),
  };
  uint8_t stuck[4] = {0, 0, 1, 0};
  sg__hang_view v = {0, 4, 42, "step 5: allreduce of gradient bucket 1 of 2", 2040, 2000, pos, stuck, -1};
  char buf[512];
  size_t n = sg__hang_text(&v, buf, sizeof buf);
  const char *want =
      "rank 2 is stuck before collective #42 (step 5: allreduce of gradient bucket 1 of 2); its last: #41 "
      "(step 4: allreduce of gradient bucket 2 of 2), finished; ranks 0-1, 3 have entered #42, rank 0 waited "
      "2.0 s in it (hang timeout 2000 ms)";
  assert_string_equal(buf, want);
  assert_int_equal(n, strlen(want));
  /* A short buffer: cut, terminated, and the length it needed. */
  char small[20];
  assert_int_equal(sg__hang_text(&v, small, sizeof small), strlen(want));
  assert_int_equal(strlen(small), sizeof small - 1);
  assert_memory_equal(small, want, sizeof small - 1);

  /* Two stuck ranks of 6 (one still inside #40, one never heard), found by
   * rank 4 and told to rank 1, which has no label. */
  sg_comm_position pos6[6] = {
      position(7, 1, ""),  position(0, 0, ""), position(0, 0, ""),
      position(6, 1, "b"), position(7, 1, ""), position(8, 0, ""),
  };
  pos6[2].known = 0;
  uint8_t stuck6[6] = {0, 0, 1, 1, 0, 0};
  sg__hang_view w = {1, 6, 7, "", 300, 250, pos6, stuck6, 4};
  sg__hang_text(&w, buf, sizeof buf);
  assert_string_equal(
      buf, "ranks 2-3 are stuck before collective #7 (no label) (found by rank 4); rank 2's last: no "
           "position heard yet; rank 3's last: #6 (b), still inside it; ranks 0-1, 4-5 have entered "
           "#7, rank 1 waited 0.3 s in it (hang timeout 250 ms)");

  /* 2 ranks: the peer never ran a collective. */
  sg_comm_position pos2[2] = {position(1, 1, "x"), position(0, 0, "")};
  uint8_t stuck2[2] = {0, 1};
  sg__hang_view y = {0, 2, 1, "x", 10000, 10000, pos2, stuck2, -1};
  sg__hang_text(&y, buf, sizeof buf);
  assert_string_equal(buf,
                      "rank 1 is stuck before collective #1 (x); its last: no collective yet; rank 0 has "
                      "entered #1, rank 0 waited 10.0 s in it (hang timeout 10000 ms)");
}

/* Told by a notice between two collectives: this rank has not entered #N itself. */
static void test_text_between_collectives(void **state) {
  (void)state;
  sg_comm_position pos[3] = {position(5, 1, "x"), position(4, 0, "unused: self"), position(4, 0, "y")};
  uint8_t stuck[3] = {0, 0, 1};
  sg__hang_view v = {1, 3, 5, "x", 0, 100, pos, stuck, 0, 1};
  char buf[256];
  sg__hang_text(&v, buf, sizeof buf);
  assert_string_equal(buf,
                      "rank 2 is stuck before collective #5 (x) (found by rank 0); its last: #4 (y), "
                      "finished; rank 0 has entered #5; rank 1 had not entered it yet (hang timeout 100 ms)");
}

static void test_api_arguments(void **state) {
  (void)state;
  assert_status(sg_comm_label(NULL, "x"), SG_ERR_INVALID_ARG, "NULL communicator");
  assert_status(sg_comm_set_hang_timeout(NULL, 100), SG_ERR_INVALID_ARG, "NULL");
  sg_comm_position p;
  assert_status(sg__comm_peer_position(NULL, 0, &p), SG_ERR_INVALID_ARG, "NULL");
  assert_int_equal(sg__comm_heartbeats_rejected(NULL), 0);
  assert_true(sg__label_valid("step 1", 6));
  assert_false(sg__label_valid("a\tb", 3));
  char longest[SG_COMM_LABEL_MAX + 2];
  memset(longest, 'a', sizeof longest);
  assert_true(sg__label_valid(longest, SG_COMM_LABEL_MAX));
  assert_false(sg__label_valid(longest, SG_COMM_LABEL_MAX + 1));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layout),
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_corrupt_fields),
      cmocka_unit_test(test_text),
      cmocka_unit_test(test_text_between_collectives),
      cmocka_unit_test(test_api_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
