/* Strict numbers on a command line, shared by the sgrt tool (tools/) and the
 * examples (examples/common/example_opts.c): one parser, so that "1e3",
 * "3.5", "1k", "+3", " 5", "0x10", "" and a value that overflows are refused
 * alike everywhere instead of being cut short by strtol ("1e3" -> 1).
 *
 * A whole number is decimal digits, with one leading '-' only where the
 * range admits negatives. A real number is [-]DIGITS[.DIGITS][(e|E)[+|-]DIGITS]
 * (or [-].DIGITS...), read whole by strtod and finite: no leading space or
 * '+', no hex, no "inf" or "nan". Every value is checked against a stated
 * range, and the message for a refused value names the option, the value
 * and that range. */
#ifndef SGRT_TOOLS_CLI_NUMBER_H
#define SGRT_TOOLS_CLI_NUMBER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A whole number in [lo, hi]: true and *out set, or false (*out untouched). */
bool cli_number_int(const char *s, int64_t lo, int64_t hi, int64_t *out);
/* The same for unsigned 64-bit values (seeds): digits only, in [lo, hi]. */
bool cli_number_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);
/* A real number in [lo, hi], or in (lo, hi] when lo_open. */
bool cli_number_real(const char *s, double lo, double hi, bool lo_open, double *out);

/* "OPT 'S' is not a whole number in [LO, HI]" into buf (cap bytes); returns
 * buf. The value is quoted as given, so "" and " 5" show what was wrong. */
const char *cli_number_int_problem(char *buf, size_t cap, const char *opt, const char *s, int64_t lo,
                                   int64_t hi);
const char *cli_number_u64_problem(char *buf, size_t cap, const char *opt, const char *s, uint64_t lo,
                                   uint64_t hi);
/* "OPT 'S' is not a number in [LO, HI]" (or "(LO, HI]" when lo_open). */
const char *cli_number_real_problem(char *buf, size_t cap, const char *opt, const char *s, double lo,
                                    double hi, bool lo_open);

#endif /* SGRT_TOOLS_CLI_NUMBER_H */
