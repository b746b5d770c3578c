/* The text, the schedule and the windows of the GPT-2 examples (gpt2_data.h). */
#include "gpt2_data.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { MAX_DATA = 64 << 20 };

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Appends the bytes of a regular file to buf (at most MAX_DATA in all). */
static void append_file(const char *path, unsigned char *buf, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return;
  *len += fread(buf + *len, 1, MAX_DATA - *len, f);
  fclose(f);
}

/* The sorted names in folder `path` but hidden ones; NULL on failure. */
static char **names_in(const char *path, size_t *n) {
  DIR *d = opendir(path);
  if (d == NULL) return NULL;
  char **names = NULL;
  size_t cap = 0;
  *n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    if (*n == cap) {
      cap = cap ? 2 * cap : 64;
      char **p = realloc(names, cap * sizeof *p);
      if (p == NULL) break;
      names = p;
    }
    if ((names[*n] = strdup(e->d_name)) != NULL) (*n)++;
  }
  closedir(d);
  if (*n) qsort(names, *n, sizeof *names, cmp_str);
  return names ? names : calloc(1, sizeof *names);
}

unsigned char *gpt2_load_text(const char *prog, const char *path, size_t *len) {
  unsigned char *buf = malloc(MAX_DATA);
  struct stat sb;
  *len = 0;
  if (buf == NULL || stat(path, &sb) != 0) {
    fprintf(stderr, "%s: --data '%s': cannot read it\n", prog, path);
    free(buf);
    return NULL;
  }
  if (S_ISREG(sb.st_mode)) {
    append_file(path, buf, len);
    return buf;
  }
  size_t n = 0;
  char **names = S_ISDIR(sb.st_mode) ? names_in(path, &n) : NULL;
  if (names == NULL) {
    fprintf(stderr, "%s: --data '%s' is neither a readable file nor a folder\n", prog, path);
    free(buf);
    return NULL;
  }
  for (size_t i = 0; i < n; i++) {
    char full[4096];
    snprintf(full, sizeof full, "%s/%s", path, names[i]);
    if (stat(full, &sb) == 0 && S_ISREG(sb.st_mode) && *len < MAX_DATA) append_file(full, buf, len);
    free(names[i]);
  }
  free(names);
  return buf;
}

double gpt2_lr_at(double lr, double min_lr, int warmup, int steps, int step) {
  if (step < warmup) return lr * (step + 1) / warmup;
  if (steps <= warmup) return lr;
  double t = (double)(step - warmup) / (double)(steps - warmup);
  return min_lr + 0.5 * (1.0 + cos(3.141592653589793 * t)) * (lr - min_lr);
}

void gpt2_window(const unsigned char *text, size_t n, int64_t seq, uint64_t seed, uint64_t step,
                 uint64_t sample, int64_t *tokens, int64_t *targets) {
  uint64_t z = seed * 0x100000001B3ull + step * 0x9E3779B97F4A7C15ull + (sample + 1) * 0xD1B54A32D192ED03ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  size_t at = (size_t)(z % (uint64_t)(n - (size_t)seq - 1));
  for (int64_t t = 0; t < seq; t++) {
    tokens[t] = text[at + (size_t)t];
    targets[t] = text[at + (size_t)t + 1];
  }
}
