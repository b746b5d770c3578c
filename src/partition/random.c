/* The seeded random partition the reports compare with (SPEC P5), and the
 * small deterministic PRNG the partitioner uses everywhere it chooses. */
#include "partition/partition_internal.h"

uint64_t sg__rng_next(sg__rng *r) {
  /* splitmix64: tiny, fast and good enough for shuffles and baselines. */
  uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint32_t sg__rng_below(sg__rng *r, uint32_t n) {
  if (n <= 1) return 0;
  /* The modulo bias (< n / 2^64) does not matter here. */
  return (uint32_t)(sg__rng_next(r) % n);
}

double sg__rng_unit(sg__rng *r) { return (double)(sg__rng_next(r) >> 11) * 0x1.0p-53; }

void sg__random_partition(const sg__solve *s, uint64_t seed, int32_t *part) {
  sg__rng r = {seed ^ 0x5eed5eed5eed5eedull};
  double total = 0.0;
  for (int p = 0; p < s->k; p++) total += s->comp_target[p];
  for (int32_t v = 0; v < s->pg->n; v++) {
    if (!(total > 0.0)) {
      part[v] = (int32_t)sg__rng_below(&r, (uint32_t)s->k);
      continue;
    }
    /* Part p with probability comp_target[p] / total. */
    double x = sg__rng_unit(&r) * total;
    int p = 0;
    while (p < s->k - 1 && x >= s->comp_target[p]) x -= s->comp_target[p++];
    part[v] = p;
  }
}
