/* sg__writer (core.h): formatted appends into a fixed buffer that keep
 * counting past its end, for messages assembled from many parts (hang and
 * health diagnoses); sg__strbuf: the same into a buffer that grows
 * (partition reports, generated source). */
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

void sg__strbuf_put(sg__strbuf *b, const char *fmt, ...) {
  if (b->failed) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
      b->failed = true;
      return;
    }
    if (b->s && b->len + (size_t)n < b->cap) {
      b->len += (size_t)n;
      return;
    }
    size_t cap = (b->cap ? b->cap * 2 : 1024) + (size_t)n;
    char *s = sg__realloc(b->s, cap);
    if (s == NULL) {
      b->failed = true;
      return;
    }
    b->s = s;
    b->cap = cap;
  }
}
