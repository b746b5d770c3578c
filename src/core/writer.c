/* sg__writer (core.h): formatted appends into a fixed buffer that keep
 * counting past its end, for messages assembled from many parts (hang and
 * health diagnoses). */
#include <stdarg.h>
#include <stdio.h>

#include "core/core.h"

void sg__put(sg__writer *w, const char *fmt, ...) {
  size_t room = w->len < w->cap ? w->cap - w->len : 0;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(room ? w->buf + w->len : NULL, room, fmt, ap);
  va_end(ap);
  if (n > 0) w->len += (size_t)n;
}
