/* The examples' option parser (example_opts.h). */
#include "example_opts.h"

#include <stdio.h>
#include <string.h>

#include "cli_number.h"

/* 0, or 2 after naming the option, the value and the range on stderr. */
static int set_value(const char *prog, const example_opt *o, const char *v) {
  char problem[512];
  switch (o->kind) {
    case EXAMPLE_OPT_INT: {
      int64_t n, lo = (int64_t)o->min, hi = (int64_t)o->max;
      if (!cli_number_int(v, lo, hi, &n)) {
        fprintf(stderr, "%s: %s\n", prog,
                cli_number_int_problem(problem, sizeof problem, o->name, v, lo, hi));
        return 2;
      }
      *(int *)o->target = (int)n;
      return 0;
    }
    case EXAMPLE_OPT_DOUBLE: {
      double x;
      if (!cli_number_real(v, o->min, o->max, o->min_open != 0, &x)) {
        fprintf(
            stderr, "%s: %s\n", prog,
            cli_number_real_problem(problem, sizeof problem, o->name, v, o->min, o->max, o->min_open != 0));
        return 2;
      }
      *(double *)o->target = x;
      return 0;
    }
    case EXAMPLE_OPT_U64: {
      uint64_t n;
      if (!cli_number_u64(v, 0, UINT64_MAX, &n)) {
        fprintf(stderr, "%s: %s\n", prog,
                cli_number_u64_problem(problem, sizeof problem, o->name, v, 0, UINT64_MAX));
        return 2;
      }
      *(uint64_t *)o->target = n;
      return 0;
    }
    case EXAMPLE_OPT_STRING: *(const char **)o->target = v; return 0;
    case EXAMPLE_OPT_FLAG: break;
  }
  return 2;
}

int example_parse_opts(const char *prog, const char *usage, int argc, char **argv, const example_opt *opts,
                       int n) {
  for (int i = 1; i < argc; i++) {
    const example_opt *o = NULL;
    for (int k = 0; k < n && o == NULL; k++)
      if (strcmp(argv[i], opts[k].name) == 0) o = &opts[k];
    if (o == NULL || (o->kind != EXAMPLE_OPT_FLAG && i + 1 >= argc)) {
      fputs(usage, stderr);
      return 2;
    }
    if (o->kind == EXAMPLE_OPT_FLAG) {
      *(int *)o->target = 1;
      continue;
    }
    int rc = set_value(prog, o, argv[i + 1]);
    if (rc != 0) return rc;
    i++;
  }
  return 0;
}
