/* GVA text form (SPEC A1): "0xNNNN:0xOOOO". The parser is strict because a
 * GVA typed by a person or read from a file must never be half-understood:
 * every character is checked and a field with too many digits is refused
 * instead of wrapping. */
#include <stdio.h>

#include "gmem/gmem_internal.h"

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* A printable description of the character at s[i] for messages: the text
 * may hold anything, including control bytes. */
static const char *char_desc(char c, char buf[8]) {
  if (c == '\0') return "end of text";
  if (c >= 0x20 && c < 0x7f) snprintf(buf, 8, "'%c'", c);
  else snprintf(buf, 8, "0x%02x", (unsigned char)c);
  return buf;
}

/* Reads "0x" and 1..max_digits hex digits at text + *pos. */
static sg_status hex_field(const char *text, size_t *pos, int max_digits, const char *field, uint64_t *out) {
  char cb[8];
  size_t i = *pos;
  if (text[i] != '0' || (text[i + 1] != 'x' && text[i + 1] != 'X')) {
    char c = text[i] != '0' ? text[i] : text[i + 1];
    size_t at = text[i] != '0' ? i : i + 1;
    return sg__error(SG_ERR_FORMAT, "sg_gva_parse: the %s must start with \"0x\"; found %s at position %zu",
                     field, char_desc(c, cb), at);
  }
  i += 2;
  uint64_t v = 0;
  int n = 0;
  for (int d; (d = hex_digit(text[i])) >= 0; i++, n++) {
    if (n == max_digits)
      return sg__error(SG_ERR_RANGE, "sg_gva_parse: the %s has more than %d hex digits (position %zu)", field,
                       max_digits, i);
    v = v << 4 | (uint64_t)d;
  }
  if (n == 0)
    return sg__error(SG_ERR_FORMAT, "sg_gva_parse: the %s has no hex digits; found %s at position %zu", field,
                     char_desc(text[i], cb), i);
  *pos = i;
  *out = v;
  return SG_OK;
}

sg_status sg_gva_parse(const char *text, sg_gva *out) {
  if (text == NULL || out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_gva_parse: NULL text or out");
  char cb[8];
  size_t pos = 0;
  uint64_t node = 0, offset = 0;
  SG_CHECK(hex_field(text, &pos, 4, "node id", &node));
  if (text[pos] != ':')
    return sg__error(SG_ERR_FORMAT, "sg_gva_parse: expected ':' after the node id; found %s at position %zu",
                     char_desc(text[pos], cb), pos);
  pos++;
  SG_CHECK(hex_field(text, &pos, 16, "offset", &offset));
  if (text[pos] != '\0')
    return sg__error(SG_ERR_FORMAT, "sg_gva_parse: unexpected %s at position %zu after the offset",
                     char_desc(text[pos], cb), pos);
  if (node == SG_GMEM_NODE_NONE)
    return sg__error(SG_ERR_RANGE, "sg_gva_parse: node id 0xffff is reserved (no node)");
  *out = sg_gva_make((uint16_t)node, offset);
  return SG_OK;
}

sg_status sg_gva_format(sg_gva gva, char *buf, size_t cap) {
  if (buf == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_gva_format: NULL buffer");
  if (gva.hi > 0xFFFF || gva.hi == SG_GMEM_NODE_NONE) {
    if (cap > 0) buf[0] = '\0';
    return sg__error(SG_ERR_INVALID_ARG,
                     "sg_gva_format: high word 0x%llx is not a node id (reserved bits or 0xffff)",
                     (unsigned long long)gva.hi);
  }
  int n = snprintf(buf, cap, "0x%04x:0x%012llx", (unsigned)gva.hi, (unsigned long long)gva.lo);
  if (n < 0 || (size_t)n >= cap) {
    if (cap > 0) buf[0] = '\0';
    return sg__error(SG_ERR_INVALID_ARG, "sg_gva_format: buffer of %zu bytes is too small; %d needed", cap,
                     n + 1);
  }
  return SG_OK;
}

const char *sg__gva_str(sg_gva gva, char buf[SG__GVA_BUF]) {
  if (gva.hi <= 0xFFFF)
    snprintf(buf, SG__GVA_BUF, "0x%04x:0x%012llx", (unsigned)gva.hi, (unsigned long long)gva.lo);
  else snprintf(buf, SG__GVA_BUF, "0x%llx:0x%012llx", (unsigned long long)gva.hi, (unsigned long long)gva.lo);
  return buf;
}
