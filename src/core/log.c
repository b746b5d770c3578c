/* Leveled logging to stderr, configured by SG_LOG_LEVEL. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/core.h"

/* -1: not yet read from the environment. Atomic because any thread may log
 * first; reading the variable twice is harmless. */
static _Atomic int log_level = -1;

static int level_from_env(void) {
  const char *v = getenv("SG_LOG_LEVEL");
  if (v == NULL || *v == '\0') return SG_LOG_WARN;
  static const char *const names[] = {"none", "error", "warn", "info", "debug", "trace"};
  for (int i = 0; i < 6; i++)
    if (strcasecmp(v, names[i]) == 0) return i;
  if (strcasecmp(v, "warning") == 0) return SG_LOG_WARN;
  if (v[0] >= '0' && v[0] <= '5' && v[1] == '\0') return v[0] - '0';
  fprintf(stderr, "sgrt: ignoring SG_LOG_LEVEL=%s (use none|error|warn|info|debug|trace or 0-5)\n", v);
  return SG_LOG_WARN;
}

sg_log_level sg_log_get_level(void) {
  int l = atomic_load(&log_level);
  if (l < 0) {
    l = level_from_env();
    atomic_store(&log_level, l);
  }
  return (sg_log_level)l;
}

void sg_log_set_level(sg_log_level level) {
  if ((int)level < SG_LOG_NONE) level = SG_LOG_NONE;
  if (level > SG_LOG_TRACE) level = SG_LOG_TRACE;
  atomic_store(&log_level, (int)level);
}

bool sg__log_enabled(sg_log_level level) { return level <= sg_log_get_level(); }

void sg__log(sg_log_level level, const char *file, int line, const char *fmt, ...) {
  static const char *const tags[] = {"", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"};
  const char *base = strrchr(file, '/');
  base = base ? base + 1 : file;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* One fprintf per line so lines from different threads do not interleave. */
  fprintf(stderr, "sgrt %s %s:%d %s\n", tags[level], base, line, msg);
}

_Noreturn void sg__assert_fail(const char *expr, const char *file, int line) {
  fprintf(stderr, "sgrt: internal invariant failed: %s at %s:%d\n", expr, file, line);
  abort();
}
