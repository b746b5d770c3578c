/* GVA text form (SPEC A1): round trips against hand-written strings, every
 * malformed string refused with the right status and a message naming the
 * problem, and a fuzz-ish pass: random mutations of valid strings are either
 * refused or parse to a value whose text reads back the same. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static void test_round_trip(void **state) {
  (void)state;
  sg_gva g;
  char buf[SG_GVA_STR_MAX];
  assert_status(sg_gva_parse("0x0001:0x7f8a2b3c4d5e", &g), SG_OK, NULL);
  assert_int_equal(sg_gva_node(g), 1);
  assert_true(sg_gva_offset(g) == 0x7f8a2b3c4d5eull);
  assert_status(sg_gva_format(g, buf, sizeof buf), SG_OK, NULL);
  assert_string_equal(buf, "0x0001:0x7f8a2b3c4d5e");
  /* Short fields, capital X and hex letters; the text is canonicalised. */
  assert_status(sg_gva_parse("0X2:0xAbC", &g), SG_OK, NULL);
  assert_int_equal(sg_gva_node(g), 2);
  assert_true(sg_gva_offset(g) == 0xabc);
  assert_status(sg_gva_format(g, buf, sizeof buf), SG_OK, NULL);
  assert_string_equal(buf, "0x0002:0x000000000abc");
  /* Full width. */
  assert_status(sg_gva_parse("0xfffe:0xffffffffffffffff", &g), SG_OK, NULL);
  assert_int_equal(sg_gva_node(g), 0xfffe);
  assert_true(sg_gva_offset(g) == UINT64_MAX);
  assert_status(sg_gva_format(g, buf, sizeof buf), SG_OK, NULL);
  assert_string_equal(buf, "0xfffe:0xffffffffffffffff");
  assert_status(sg_gva_parse("0x0:0x0", &g), SG_OK, NULL);
  assert_true(g.hi == 0 && g.lo == 0);
}

static void test_bad_strings(void **state) {
  (void)state;
  sg_gva g = sg_gva_make(7, 7);
  struct {
    const char *text;
    sg_status st;
    const char *needle;
  } bad[] = {
      {"", SG_ERR_FORMAT, "node id must start with \"0x\""},
      {"1:0x10", SG_ERR_FORMAT, "'1' at position 0"},
      {"0x:0x10", SG_ERR_FORMAT, "node id has no hex digits"},
      {"0x0001", SG_ERR_FORMAT, "expected ':'"},
      {"0x0001:", SG_ERR_FORMAT, "offset must start with \"0x\""},
      {"0x0001:0x", SG_ERR_FORMAT, "offset has no hex digits"},
      {"0x0001;0x10", SG_ERR_FORMAT, "';' at position 6"},
      {"0x0001:0x10 ", SG_ERR_FORMAT, "' ' at position 11"},
      {" 0x0001:0x10", SG_ERR_FORMAT, "' ' at position 0"},
      {"0x0001:0x10g", SG_ERR_FORMAT, "'g' at position 11"},
      {"0x0001:0x-10", SG_ERR_FORMAT, "offset has no hex digits"},
      {"-0x0001:0x10", SG_ERR_FORMAT, "'-' at position 0"},
      {"0x0001:10", SG_ERR_FORMAT, "offset must start"},
      {"0x00001:0x10", SG_ERR_RANGE, "more than 4 hex digits"},
      {"0x0001:0x10000000000000000", SG_ERR_RANGE, "more than 16 hex digits"},
      {"0xffff:0x10", SG_ERR_RANGE, "reserved"},
      {"0x0001:0x10:0x1", SG_ERR_FORMAT, "':' at position 11"},
      {"0x0001:0x1\n", SG_ERR_FORMAT, "0x0a at position 10"},
      {"0x0001\x01:0x1", SG_ERR_FORMAT, "0x01 at position 6"},
      {"0x0001:0x1\xff", SG_ERR_FORMAT, "0xff at position 10"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    sg_status st = sg_gva_parse(bad[i].text, &g);
    if (st != bad[i].st || strstr(sg_last_error(), bad[i].needle) == NULL)
      fprintf(stderr, "case %zu \"%s\": %s '%s'\n", i, bad[i].text, sg_status_str(st), sg_last_error());
    assert_status(st, bad[i].st, bad[i].needle);
    /* A refused string leaves the output alone. */
    assert_true(g.hi == 7 && g.lo == 7);
  }
  assert_status(sg_gva_parse(NULL, &g), SG_ERR_INVALID_ARG, "NULL");
  assert_status(sg_gva_parse("0x1:0x1", NULL), SG_ERR_INVALID_ARG, "NULL");
}

static void test_format_errors(void **state) {
  (void)state;
  char buf[SG_GVA_STR_MAX];
  sg_gva bad = {1ull << 20, 0};
  assert_status(sg_gva_format(bad, buf, sizeof buf), SG_ERR_INVALID_ARG, "reserved bits");
  assert_string_equal(buf, "");
  assert_status(sg_gva_format(sg_gva_make(0xffff, 1), buf, sizeof buf), SG_ERR_INVALID_ARG, "0xffff");
  char small[10];
  assert_status(sg_gva_format(sg_gva_make(1, 1), small, sizeof small), SG_ERR_INVALID_ARG, "too small");
  assert_string_equal(small, "");
  assert_status(sg_gva_format(sg_gva_make(1, 1), NULL, 8), SG_ERR_INVALID_ARG, "NULL");
}

/* Mutations of valid texts: never a crash or an out-of-bounds read (run it
 * under ASan), and whatever parses formats back to the same value. */
static void test_fuzz(void **state) {
  (void)state;
  const char alphabet[] = "0123456789abcdefABCDEFxX:;- \t\n\x01\xff";
  uint64_t s = 0x5eed;
  char text[48], out[SG_GVA_STR_MAX];
  int accepted = 0;
  for (int iter = 0; iter < 200000; iter++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    snprintf(text, sizeof text, "0x%x:0x%llx", (unsigned)(s % 0xffff), (unsigned long long)(s >> 7));
    size_t len = strlen(text);
    int edits = 1 + (int)(s >> 60) % 3;
    for (int e = 0; e < edits; e++) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      size_t at = (size_t)(s % (len + 1));
      char c = alphabet[(s >> 32) % (sizeof alphabet - 1)];
      switch ((s >> 50) % 3) {
        case 0: /* replace */
          if (at < len) text[at] = c;
          break;
        case 1: /* insert */
          if (len + 1 < sizeof text) {
            memmove(text + at + 1, text + at, len - at + 1);
            text[at] = c;
            len++;
          }
          break;
        default: /* delete */
          if (at < len) {
            memmove(text + at, text + at + 1, len - at);
            len--;
          }
      }
    }
    sg_gva g;
    sg_status st = sg_gva_parse(text, &g);
    if (st == SG_OK) {
      accepted++;
      sg_gva back;
      assert_status(sg_gva_format(g, out, sizeof out), SG_OK, NULL);
      assert_status(sg_gva_parse(out, &back), SG_OK, NULL);
      assert_true(back.hi == g.hi && back.lo == g.lo);
    } else {
      assert_true(st == SG_ERR_FORMAT || st == SG_ERR_RANGE);
      assert_true(sg_last_error()[0] != '\0');
    }
  }
  /* Both outcomes happen, or the mutation is not exercising the parser. */
  assert_true(accepted > 1000 && accepted < 190000);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_bad_strings),
      cmocka_unit_test(test_format_errors),
      cmocka_unit_test(test_fuzz),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
