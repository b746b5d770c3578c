/* Element-wise reductions of the collectives, per dtype. Half types are
 * widened to f32, reduced, and rounded back (round to nearest even), so every
 * rank that reduces the same inputs in the same order gets the same bits. */
#include <math.h>
#include <string.h>

#include "comm/comm_internal.h"

size_t sg__comm_dtype_size(sg_dtype dtype) {
  switch (dtype) {
    case SG_F32:
    case SG_I32: return 4;
    case SG_F16:
    case SG_BF16: return 2;
    case SG_I64: return 8;
    default: return 0;
  }
}

static uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

float sg__bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

uint16_t sg__f32_to_bf16(float f) {
  uint32_t u = f2u(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}

float sg__f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0x1f) return u2f(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    float v = ldexpf((float)man, -24);
    return sign ? -v : v;
  }
  return u2f(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t sg__f32_to_f16(float f) {
  uint32_t u = f2u(f), sign = (u >> 16) & 0x8000;
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00);
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to infinity */
  if (a < 0x38800000u) {                                  /* subnormal or zero in f16 */
    float v = u2f(a) * 16777216.0f;                       /* exact: scale by 2^24 */
    return (uint16_t)(sign | (uint32_t)nearbyintf(v));
  }
  uint32_t r = a + 0xfffu + ((a >> 13) & 1) - (112u << 23);
  return (uint16_t)(sign | (r >> 13));
}

#define REDUCE_LOOP(T, EXPR)         \
  do {                               \
    T *d = dst;                      \
    const T *s = src;                \
    for (size_t i = 0; i < n; i++) { \
      T a = d[i], b = s[i];          \
      d[i] = (EXPR);                 \
    }                                \
  } while (0)

#define REDUCE_NUM(T)                                         \
  switch (op) {                                               \
    case SG_REDUCE_SUM:                                       \
    case SG_REDUCE_AVG: REDUCE_LOOP(T, (T)(a + b)); break;    \
    case SG_REDUCE_MAX: REDUCE_LOOP(T, a > b ? a : b); break; \
    case SG_REDUCE_MIN: REDUCE_LOOP(T, a < b ? a : b); break; \
  }

#define REDUCE_HALF(TO, FROM)                         \
  do {                                                \
    uint16_t *d = dst;                                \
    const uint16_t *s = src;                          \
    for (size_t i = 0; i < n; i++) {                  \
      float a = TO(d[i]), b = TO(s[i]), r;            \
      switch (op) {                                   \
        case SG_REDUCE_MAX: r = a > b ? a : b; break; \
        case SG_REDUCE_MIN: r = a < b ? a : b; break; \
        default: r = a + b; break;                    \
      }                                               \
      d[i] = FROM(r);                                 \
    }                                                 \
  } while (0)

/* Integer sums wrap (two's complement) rather than overflow: computed unsigned. */
void sg__reduce(void *dst, const void *src, size_t n, sg_dtype dtype, sg_reduce_op op) {
  switch (dtype) {
    case SG_F32: REDUCE_NUM(float); break;
    case SG_I32:
      if (op == SG_REDUCE_SUM || op == SG_REDUCE_AVG)
        REDUCE_LOOP(int32_t, (int32_t)((uint32_t)a + (uint32_t)b));
      else REDUCE_NUM(int32_t);
      break;
    case SG_I64:
      if (op == SG_REDUCE_SUM || op == SG_REDUCE_AVG)
        REDUCE_LOOP(int64_t, (int64_t)((uint64_t)a + (uint64_t)b));
      else REDUCE_NUM(int64_t);
      break;
    case SG_F16: REDUCE_HALF(sg__f16_to_f32, sg__f32_to_f16); break;
    case SG_BF16: REDUCE_HALF(sg__bf16_to_f32, sg__f32_to_bf16); break;
    default: break;
  }
}

void sg__reduce_finish(void *dst, size_t n, sg_dtype dtype, sg_reduce_op op, int world) {
  if (op != SG_REDUCE_AVG || world <= 1) return;
  switch (dtype) {
    case SG_F32: {
      float *d = dst;
      for (size_t i = 0; i < n; i++) d[i] /= (float)world;
      break;
    }
    case SG_I32: {
      int32_t *d = dst;
      for (size_t i = 0; i < n; i++) d[i] /= world;
      break;
    }
    case SG_I64: {
      int64_t *d = dst;
      for (size_t i = 0; i < n; i++) d[i] /= world;
      break;
    }
    case SG_F16: {
      uint16_t *d = dst;
      for (size_t i = 0; i < n; i++) d[i] = sg__f32_to_f16(sg__f16_to_f32(d[i]) / (float)world);
      break;
    }
    case SG_BF16: {
      uint16_t *d = dst;
      for (size_t i = 0; i < n; i++) d[i] = sg__f32_to_bf16(sg__bf16_to_f32(d[i]) / (float)world);
      break;
    }
    default: break;
  }
}
