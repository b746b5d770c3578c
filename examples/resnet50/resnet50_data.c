/* See resnet50_data.h. Moved here from resnet50_train.c unchanged, so both
 * examples draw the same images from the same seed. */
#include "resnet50_data.h"

#include <math.h>
#include <stdlib.h>

static uint64_t next_u64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static double uniform01(uint64_t *s) { return ((double)(next_u64(s) >> 11) + 0.5) / 9007199254740992.0; }

int resnet50_dataset_init(resnet50_dataset *d, int classes, int res, uint64_t seed) {
  *d = (resnet50_dataset){classes, res, NULL, NULL, NULL, NULL, seed, seed ^ 0x5851F42D4C957F2Dull};
  size_t n = (size_t)classes * 3;
  d->colour = malloc(n * sizeof(float));
  d->fx = malloc(n * sizeof(float));
  d->fy = malloc(n * sizeof(float));
  d->phase = malloc(n * sizeof(float));
  if (!d->colour || !d->fx || !d->fy || !d->phase) return -1;
  for (size_t i = 0; i < n; i++) {
    d->colour[i] = (float)(2.0 * uniform01(&d->rng) - 1.0);
    /* 1..4 cycles across the image, in a direction of its own. */
    double cycles = 1.0 + 3.0 * uniform01(&d->rng), angle = 6.283185307179586 * uniform01(&d->rng);
    d->fx[i] = (float)(6.283185307179586 * cycles * cos(angle) / res);
    d->fy[i] = (float)(6.283185307179586 * cycles * sin(angle) / res);
    d->phase[i] = (float)(6.283185307179586 * uniform01(&d->rng));
  }
  return 0;
}

void resnet50_dataset_free(resnet50_dataset *d) {
  free(d->colour);
  free(d->fx);
  free(d->fy);
  free(d->phase);
}

void resnet50_dataset_seek(resnet50_dataset *d, uint64_t stream) {
  uint64_t s = d->seed ^ 0x2545F4914F6CDD1Dull;
  s ^= next_u64(&s) + stream * 0x9E3779B97F4A7C15ull;
  d->rng = next_u64(&s);
}

void resnet50_dataset_batch(resnet50_dataset *d, int n, float *x, int64_t *y) {
  const int r = d->res;
  for (int i = 0; i < n; i++) {
    int c = (int)(next_u64(&d->rng) % (uint64_t)d->classes);
    y[i] = c;
    for (int ch = 0; ch < 3; ch++) {
      const int k = c * 3 + ch;
      float *p = x + ((size_t)i * 3 + ch) * r * r;
      for (int py = 0; py < r; py++)
        for (int px = 0; px < r; px++) {
          double u = uniform01(&d->rng), v = uniform01(&d->rng);
          double noise = sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
          p[py * r + px] = (float)(d->colour[k] + sin(d->fx[k] * px + d->fy[k] * py + d->phase[k]) + noise);
        }
    }
  }
}
