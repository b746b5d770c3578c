/* Strict command-line numbers (cli_number.h). */
#include "cli_number.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Digits only, at least one; the value in *out, false on overflow. */
static bool parse_digits(const char *s, uint64_t *out) {
  if (*s == '\0') return false;
  uint64_t v = 0;
  for (const char *p = s; *p; p++) {
    if (*p < '0' || *p > '9') return false;
    unsigned d = (unsigned)(*p - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

bool cli_number_int(const char *s, int64_t lo, int64_t hi, int64_t *out) {
  if (s == NULL) return false;
  bool neg = s[0] == '-';
  if (neg && lo >= 0) return false;
  uint64_t mag;
  if (!parse_digits(s + neg, &mag)) return false;
  int64_t v;
  if (!neg) {
    if (mag > (uint64_t)INT64_MAX) return false;
    v = (int64_t)mag;
  } else {
    if (mag > (uint64_t)INT64_MAX + 1) return false;
    v = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
  }
  if (v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool cli_number_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out) {
  uint64_t v;
  if (s == NULL || !parse_digits(s, &v) || v < lo || v > hi) return false;
  *out = v;
  return true;
}

/* [-]DIGITS[.DIGITS][(e|E)[+|-]DIGITS] with at least one mantissa digit. */
static bool plain_real(const char *p) {
  if (*p == '-') p++;
  int digits = 0;
  for (; *p >= '0' && *p <= '9'; p++) digits++;
  if (*p == '.')
    for (p++; *p >= '0' && *p <= '9'; p++) digits++;
  if (digits == 0) return false;
  if (*p == 'e' || *p == 'E') {
    p++;
    if (*p == '+' || *p == '-') p++;
    if (*p < '0' || *p > '9') return false;
    while (*p >= '0' && *p <= '9') p++;
  }
  return *p == '\0';
}

bool cli_number_real(const char *s, double lo, double hi, bool lo_open, double *out) {
  if (s == NULL || !plain_real(s)) return false;
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  /* ERANGE: too large for a double, or so small it lost its value. */
  if (errno != 0 || end == s || *end != '\0' || !isfinite(v)) return false;
  if (lo_open ? !(v > lo) : !(v >= lo)) return false;
  if (!(v <= hi)) return false;
  *out = v;
  return true;
}

const char *cli_number_int_problem(char *buf, size_t cap, const char *opt, const char *s, int64_t lo,
                                   int64_t hi) {
  snprintf(buf, cap, "%s '%s' is not a whole number in [%lld, %lld]", opt, s ? s : "", (long long)lo,
           (long long)hi);
  return buf;
}

const char *cli_number_u64_problem(char *buf, size_t cap, const char *opt, const char *s, uint64_t lo,
                                   uint64_t hi) {
  snprintf(buf, cap, "%s '%s' is not a whole number in [%llu, %llu]", opt, s ? s : "", (unsigned long long)lo,
           (unsigned long long)hi);
  return buf;
}

const char *cli_number_real_problem(char *buf, size_t cap, const char *opt, const char *s, double lo,
                                    double hi, bool lo_open) {
  snprintf(buf, cap, "%s '%s' is not a number in %c%.15g, %.15g]", opt, s ? s : "", lo_open ? '(' : '[', lo,
           hi);
  return buf;
}
