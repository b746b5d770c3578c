/* Command-line options of the examples, from a table: every option takes a
 * value except flags; integers must be whole numbers in [0, 2^30] and
 * doubles finite, or the example stops with "PROG: bad value 'V' for
 * --NAME" (range checks beyond that stay with each example). */
#ifndef EXAMPLE_OPTS_H
#define EXAMPLE_OPTS_H

#include <stdint.h>

typedef enum example_opt_kind {
  EXAMPLE_OPT_FLAG,   /* int, set to 1 */
  EXAMPLE_OPT_INT,    /* int */
  EXAMPLE_OPT_DOUBLE, /* double */
  EXAMPLE_OPT_U64,    /* uint64_t */
  EXAMPLE_OPT_STRING, /* const char *, pointing into argv */
} example_opt_kind;

typedef struct example_opt {
  const char *name; /* with its dashes: "--batch" */
  example_opt_kind kind;
  void *target;
} example_opt;

/* Parses argv[1..] against opts[0..n). Returns 0, or 2 after printing
 * `usage` (an unknown option or a missing value) or the bad value to
 * stderr. */
int example_parse_opts(const char *prog, const char *usage, int argc, char **argv, const example_opt *opts,
                       int n);

#endif /* EXAMPLE_OPTS_H */
