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

/* One option's line of --help: name and value, what it does, the range, the default (the target's
 * value before parsing). */
static void print_option(const example_opt *o) {
  static const char *const value_name[] = {"", "N", "X", "N", "VALUE"};
  char left[96], range[96] = "", def[160] = "";
  const char *arg = o->kind == EXAMPLE_OPT_FLAG ? "" : o->arg ? o->arg : value_name[o->kind];
  snprintf(left, sizeof left, "%s%s%s", o->name, *arg ? " " : "", arg);
  switch (o->kind) {
    case EXAMPLE_OPT_INT:
      snprintf(range, sizeof range, "%.0f..%.0f", o->min, o->max);
      snprintf(def, sizeof def, "%d", *(const int *)o->target);
      break;
    case EXAMPLE_OPT_DOUBLE:
      snprintf(range, sizeof range, "%s%.10g, %.10g]", o->min_open ? "(" : "[", o->min, o->max);
      snprintf(def, sizeof def, "%g", *(const double *)o->target);
      break;
    case EXAMPLE_OPT_U64:
      snprintf(range, sizeof range, "0..2^64-1");
      snprintf(def, sizeof def, "%llu", (unsigned long long)*(const uint64_t *)o->target);
      break;
    case EXAMPLE_OPT_STRING: {
      const char *v = *(const char *const *)o->target;
      snprintf(def, sizeof def, "%s", v ? v : "none");
      break;
    }
    case EXAMPLE_OPT_FLAG: break;
  }
  printf("  %-26s %s", left, o->help ? o->help : "");
  if (*range || *def) printf(" (%s%s%s%s)", range, *range && *def ? "; " : "", *def ? "default " : "", def);
  printf("\n");
}

static void print_help(const char *prog, const char *about, const example_opt *opts, int n) {
  printf("usage: %s [OPTIONS]\n\n%s\noptions:\n", prog, about);
  for (int k = 0; k < n; k++) print_option(&opts[k]);
  printf("  %-26s %s\n", "-h, --help", "print this help and exit");
}

int example_parse_opts(const char *prog, const char *about, int argc, char **argv, const example_opt *opts,
                       int n) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      print_help(prog, about, opts, n);
      return EXAMPLE_OPTS_HELP;
    }
    const example_opt *o = NULL;
    for (int k = 0; k < n && o == NULL; k++)
      if (strcmp(argv[i], opts[k].name) == 0) o = &opts[k];
    if (o == NULL) {
      fprintf(stderr, "%s: unknown option '%s' (%s --help lists the options)\n", prog, argv[i], prog);
      return 2;
    }
    if (o->kind != EXAMPLE_OPT_FLAG && i + 1 >= argc) {
      fprintf(stderr, "%s: option '%s' needs a value (%s --help)\n", prog, o->name, prog);
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
