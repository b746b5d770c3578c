/* Four-lane float vectors for the C kernels that stream large tensors
 * (optimizer updates, binary ops), through the vector extensions of GCC and
 * clang: SSE on x86-64, NEON on arm64, no target flags needed. At -O2 GCC 12
 * only vectorizes loops whose trip count it knows, so the streaming loops
 * are written with these explicitly. Each lane does exactly the scalar
 * arithmetic of the tail loop next to it (no FMA contraction, same order),
 * so results are bit-identical to scalar code and do not depend on where a
 * thread's range starts. */
#ifndef SG_BACKEND_CPU_SIMD_H
#define SG_BACKEND_CPU_SIMD_H

#include <string.h>

typedef float sg__v4f __attribute__((vector_size(16)));

/* Unaligned loads and stores (memcpy compiles to one movups). */
static inline sg__v4f sg__v4f_load(const float *p) {
  sg__v4f v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline void sg__v4f_store(float *p, sg__v4f v) { memcpy(p, &v, sizeof v); }
static inline sg__v4f sg__v4f_set1(float x) { return (sg__v4f){x, x, x, x}; }

#endif /* SG_BACKEND_CPU_SIMD_H */
