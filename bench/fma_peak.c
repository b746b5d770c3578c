/* fma_peak: the f32 fused multiply-add peak of this CPU, the ceiling that
 * every matrix product (oneDNN's, PyTorch's, sgrt's attention tiles) runs
 * under: docs/performance.md compares the GPT-2 step's products with it.
 *
 * usage: fma_peak [--threads 2] [--seconds 1] [--json]
 *
 * Each thread runs 12 independent chains of FMAs on the widest vectors the
 * CPU has (AVX-512, else AVX2 + FMA; CPUID through __builtin_cpu_supports,
 * the functions built for their ISA with target attributes as
 * src/backend/cpu/cpu_attention_tile.c does), enough chains to cover the
 * FMA latency on every x86 core of these machines, for about --seconds.
 * All threads run at once (the peak of N busy cores, clocks included).
 * Prints GFLOP/s per thread and in all (2 flops per lane per FMA); with
 * --json the last line of stdout is one JSON object. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_X86 1
#endif

enum { CHAINS = 12, INNER = 4096 };

typedef struct worker {
  pthread_t tid;
  double seconds; /* to run */
  double flops, elapsed;
  float sink; /* the chains' sum, stored where other threads could read it: keeps them alive */
  pthread_barrier_t *start;
} worker;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef double (*chain_fn)(long iters, float *sink); /* returns flops */

#ifdef HAVE_X86
__attribute__((target("avx512f"))) static double chains512(long iters, float *sink) {
  __m512 acc[CHAINS];
  const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
  for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_ps(1.0f + (float)i * 1e-3f);
  for (long it = 0; it < iters; it++)
#pragma GCC unroll 12
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_fmadd_ps(acc[i], m, a);
  __m512 s = acc[0];
  for (int i = 1; i < CHAINS; i++) s = _mm512_add_ps(s, acc[i]);
  *sink += _mm512_reduce_add_ps(s);
  return (double)iters * CHAINS * 16 * 2;
}

__attribute__((target("avx2,fma"))) static double chains256(long iters, float *sink) {
  __m256 acc[CHAINS];
  const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
  for (int i = 0; i < CHAINS; i++) acc[i] = _mm256_set1_ps(1.0f + (float)i * 1e-3f);
  for (long it = 0; it < iters; it++)
#pragma GCC unroll 12
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm256_fmadd_ps(acc[i], m, a);
  __m256 s = acc[0];
  for (int i = 1; i < CHAINS; i++) s = _mm256_add_ps(s, acc[i]);
  float out[8];
  _mm256_storeu_ps(out, s);
  for (int i = 0; i < 8; i++) *sink += out[i];
  return (double)iters * CHAINS * 8 * 2;
}
#endif

static chain_fn pick(const char **isa) {
#ifdef HAVE_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return *isa = "avx512f", chains512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return *isa = "avx2+fma", chains256;
#endif
  *isa = "none";
  return NULL;
}

static chain_fn run_chains;

static void *work(void *arg) {
  worker *w = arg;
  pthread_barrier_wait(w->start);
  double t0 = now(), t;
  w->flops = 0;
  do {
    w->flops += run_chains(INNER, &w->sink);
  } while ((t = now()) - t0 < w->seconds);
  w->elapsed = t - t0;
  return NULL;
}

static int usage(const char *why) {
  if (why) fprintf(stderr, "fma_peak: %s\n", why);
  fprintf(stderr, "usage: fma_peak [--threads N] [--seconds X] [--json]\n");
  return 2;
}

int main(int argc, char **argv) {
  int threads = 2, json = 0;
  double seconds = 1.0;
  for (int i = 1; i < argc; i++) {
    char *end = NULL;
    if (strcmp(argv[i], "--json") == 0) {
      json = 1;
    } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      long v = strtol(argv[++i], &end, 10);
      if (*end != '\0' || v < 1 || v > 1024) return usage("--threads takes 1..1024");
      threads = (int)v;
    } else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
      seconds = strtod(argv[++i], &end);
      if (*end != '\0' || !(seconds > 0 && seconds <= 60)) return usage("--seconds takes a value in (0, 60]");
    } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      usage(NULL);
      return 0;
    } else {
      char why[160];
      snprintf(why, sizeof why, "unknown option '%s'", argv[i]);
      return usage(why);
    }
  }
  const char *isa;
  run_chains = pick(&isa);
  if (run_chains == NULL) {
    fprintf(stderr, "fma_peak: this CPU has neither AVX-512 nor AVX2 + FMA\n");
    return 1;
  }
  worker *w = calloc((size_t)threads, sizeof *w);
  pthread_barrier_t start;
  if (w == NULL || pthread_barrier_init(&start, NULL, (unsigned)threads) != 0) {
    fprintf(stderr, "fma_peak: out of memory\n");
    return 1;
  }
  for (int i = 0; i < threads; i++) {
    w[i].seconds = seconds, w[i].start = &start;
    if (pthread_create(&w[i].tid, NULL, work, &w[i]) != 0) {
      fprintf(stderr, "fma_peak: cannot start thread %d\n", i);
      return 1;
    }
  }
  double total = 0, slowest = 0;
  for (int i = 0; i < threads; i++) {
    pthread_join(w[i].tid, NULL);
    double g = w[i].flops / w[i].elapsed / 1e9;
    total += g;
    slowest = i == 0 || g < slowest ? g : slowest;
    if (!json) printf("thread %d: %.1f GFLOP/s\n", i, g);
  }
  pthread_barrier_destroy(&start);
  free(w);
  printf("f32 FMA peak (%s, %d thread%s at once): %.1f GFLOP/s in all, %.1f per thread at the slowest\n", isa,
         threads, threads == 1 ? "" : "s", total, slowest);
  if (json)
    printf("{\"bench\": \"fma_peak\", \"isa\": \"%s\", \"threads\": %d, \"gflops\": %.2f, "
           "\"gflops_per_thread_min\": %.2f}\n",
           isa, threads, total, slowest);
  return 0;
}
