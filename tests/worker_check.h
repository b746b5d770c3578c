/* Failure reporting for the multi-process test workers (tests/comm,
 * tests/gmem, tests/dist): every check prints where it failed, this rank
 * and sgrt's last error, and exits 1, so the launcher reports the first
 * failing rank. Header-only; include after <sgrt/sgrt.h>. */
#ifndef SG_TEST_WORKER_CHECK_H
#define SG_TEST_WORKER_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sgrt/sgrt.h"

/* This process's rank as the launcher set it (sgrt launch, torchrun, Slurm
 * or Open MPI variables, in src/comm/env.c's order), or -1 when none is set. */
static inline int sg_worker_rank(void) {
  const char *vars[] = {"SG_RANK", "RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    if (getenv(vars[i]) != NULL) return atoi(getenv(vars[i]));
  return -1;
}

/* The exit status of a failed check. A worker that itself exits 1 for an
 * outcome its script expects or tells apart (a step that failed as it
 * should; run_death.sh takes status 1 for "detected") defines it as 2
 * before including this header, so that a failed check is never taken for
 * that outcome. */
#ifndef SG_WORKER_FAIL_STATUS
#define SG_WORKER_FAIL_STATUS 1
#endif

#define FAIL(...)                                                                  \
  do {                                                                             \
    fprintf(stderr, "FAIL rank %d %s:%d: ", sg_worker_rank(), __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__);                                                  \
    fprintf(stderr, " (last error: %s)\n", sg_last_error());                       \
    exit(SG_WORKER_FAIL_STATUS);                                                   \
  } while (0)

#define CHECK(cond, ...)            \
  do {                              \
    if (!(cond)) FAIL(__VA_ARGS__); \
  } while (0)

/* `call` returns SG_OK. */
#define CHECK_OK(call)                                                   \
  do {                                                                   \
    sg_status st_ = (call);                                              \
    if (st_ != SG_OK) FAIL("%s returned %s", #call, sg_status_str(st_)); \
  } while (0)
#define OK(call) CHECK_OK(call)

/* `call` fails with `want` and a message containing `text`. */
#define CHECK_ERR(call, want, text)                                                                         \
  do {                                                                                                      \
    sg_status st_ = (call);                                                                                 \
    if (st_ != (want)) FAIL("%s returned %s, expected %s", #call, sg_status_str(st_), sg_status_str(want)); \
    if (strstr(sg_last_error(), (text)) == NULL) FAIL("%s: message lacks '%s'", #call, (text));             \
  } while (0)

/* Deterministic test values in [-1, 1) from three integers (splitmix64), so
 * every rank and the single-process reference draw the same numbers. */
static inline uint64_t sg_worker_mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static inline float sg_worker_unit(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t z = sg_worker_mix64(sg_worker_mix64(sg_worker_mix64(a) ^ b) ^ c);
  return (float)((double)(z >> 11) / 4503599627370496.0 - 1.0);
}

/* A learnable classification batch for the MLP workers: `batch` rows of
 * `in` features, label of row i = a hash of (i, step) mod `classes`, and
 * feature k gets +1 when k mod classes is the label, over noise in [-1, 1). */
static inline void sg_worker_mlp_batch(int batch, int in, int classes, int step, float *x, int64_t *y) {
  for (int i = 0; i < batch; i++) {
    int label = (int)(sg_worker_mix64((uint64_t)i * 7919u + (uint64_t)step) % (uint64_t)classes);
    y[i] = label;
    for (int k = 0; k < in; k++)
      x[i * in + k] =
          sg_worker_unit(42, (uint64_t)step, (uint64_t)(i * in + k)) + (float)(k % classes == label);
  }
}

#endif /* SG_TEST_WORKER_CHECK_H */
