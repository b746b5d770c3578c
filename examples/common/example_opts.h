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
  double min, max;  /* INT and DOUBLE: the accepted range (INT: within int) */
  int min_open;     /* DOUBLE: min itself is excluded ("lr > 0") */
  const char *arg;  /* the value's name in --help ("FILE", "sgd|adamw"); NULL: N, X or VALUE by kind */
  const char *help; /* what it does, for --help (which adds the range and the default) */
} example_opt;

/* example_parse_opts() printed --help: the program exits 0. */
#define EXAMPLE_OPTS_HELP (-1)

/* Parses argv[1..] against opts[0..n). The targets hold the defaults when it
 * is called. Returns 0; EXAMPLE_OPTS_HELP after printing the help (`about`,
 * then every option with what it does, its range and its default) to stdout
 * for --help or -h; or 2 after naming, on stderr, an unknown option, an
 * option without its value, or a bad value with the option's range. */
int example_parse_opts(const char *prog, const char *about, int argc, char **argv, const example_opt *opts,
                       int n);

#endif /* EXAMPLE_OPTS_H */
