/* Command-line options of the examples, from a table: every option takes a
 * value except flags. Numbers go through the sgrt tool's strict parser
 * (tools/cli_number.h): an integer is decimal digits only, a real a plain
 * decimal or exponent number ("0.01", "1e-3"), and each must lie in the
 * option's range; anything else ("1e3" for an integer, "+3", " 5", "", "abc",
 * an overflow) stops the example with exit status 2 and
 * "PROG: --NAME 'V' is not a whole number in [MIN, MAX]" (or "is not a
 * number in (MIN, MAX]"). Checks between options stay with each example. */
#ifndef EXAMPLE_OPTS_H
#define EXAMPLE_OPTS_H

#include <stdint.h>

typedef enum example_opt_kind {
  EXAMPLE_OPT_FLAG,   /* int, set to 1 */
  EXAMPLE_OPT_INT,    /* int, a whole number in [min, max] */
  EXAMPLE_OPT_DOUBLE, /* double, in [min, max], or (min, max] with min_open */
  EXAMPLE_OPT_U64,    /* uint64_t, any whole number 0..2^64-1 (seeds) */
  EXAMPLE_OPT_STRING, /* const char *, pointing into argv */
} example_opt_kind;

typedef struct example_opt {
  const char *name; /* with its dashes: "--batch" */
  example_opt_kind kind;
  void *target;
  double min, max; /* INT and DOUBLE: the accepted range (INT: within int) */
  int min_open;    /* DOUBLE: min itself is excluded ("lr > 0") */
} example_opt;

/* Parses argv[1..] against opts[0..n). Returns 0, or 2 after printing
 * `usage` (an unknown option or a missing value) or the bad value, the
 * option and its range to stderr. */
int example_parse_opts(const char *prog, const char *usage, int argc, char **argv, const example_opt *opts,
                       int n);

#endif /* EXAMPLE_OPTS_H */
