/* The examples' option parser (example_opts.h). */
#include "example_opts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int set_value(const example_opt *o, const char *v) {
  char *end = NULL;
  switch (o->kind) {
    case EXAMPLE_OPT_INT: {
      long n = strtol(v, &end, 10);
      if (end == v || *end != '\0' || n < 0 || n > 1 << 30) return -1;
      *(int *)o->target = (int)n;
      return 0;
    }
    case EXAMPLE_OPT_DOUBLE: {
      double x = strtod(v, &end);
      if (end == v || *end != '\0' || !isfinite(x)) return -1;
      *(double *)o->target = x;
      return 0;
    }
    case EXAMPLE_OPT_U64: {
      if (*v == '-') return -1;
      unsigned long long n = strtoull(v, &end, 10);
      if (end == v || *end != '\0') return -1;
      *(uint64_t *)o->target = (uint64_t)n;
      return 0;
    }
    case EXAMPLE_OPT_STRING: *(const char **)o->target = v; return 0;
    case EXAMPLE_OPT_FLAG: break;
  }
  return -1;
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
    if (set_value(o, argv[i + 1]) != 0) {
      fprintf(stderr, "%s: bad value '%s' for %s\n", prog, argv[i + 1], o->name);
      return 2;
    }
    i++;
  }
  return 0;
}
