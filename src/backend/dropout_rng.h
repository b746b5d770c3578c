/* The dropout keep decision every backend draws (docs/backend.md), a
 * counter-based hash: a mask depends only on (op seed, run seed, step,
 * subsequence; sg__run_ctx) and the element index -- never on threads,
 * blocks or earlier runs -- so the CPU and CUDA backends draw the same
 * masks. The CUDA kernel computes sg__dropout_bits itself
 * (cuda_kernels.c) from the key the host computes here. */
#ifndef SG_BACKEND_DROPOUT_RNG_H
#define SG_BACKEND_DROPOUT_RNG_H

#include <math.h>
#include <stdint.h>

static inline uint64_t sg__dropout_mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static inline uint64_t sg__dropout_key(uint64_t op_seed, uint64_t seed, uint64_t step, uint64_t subsequence) {
  uint64_t key = sg__dropout_mix64(sg__dropout_mix64(sg__dropout_mix64(op_seed) ^ seed) ^ step);
  /* Subsequence 0 keeps the key the masks had before subsequences existed. */
  return subsequence == 0 ? key : sg__dropout_mix64(key ^ sg__dropout_mix64(subsequence));
}

/* 24 random bits for element `i`; the element is kept when they are >=
 * sg__dropout_threshold(p) = ceil(p * 2^24) (so P(keep) = 1 - p). */
static inline uint32_t sg__dropout_bits(uint64_t key, uint64_t i) {
  return (uint32_t)(sg__dropout_mix64(key ^ sg__dropout_mix64(i)) >> 40);
}
static inline uint32_t sg__dropout_threshold(double p) { return (uint32_t)ceil(p * 16777216.0); }

#endif /* SG_BACKEND_DROPOUT_RNG_H */
