/* attention_bench: the fused attention op (sg_attention) against the same
 * attention built from sgrt's ops (matmul, transpose, mul_scalar, the
 * additive causal mask, softmax, matmul), as examples/gpt2 builds it:
 * forward + backward time and memory, for docs/ops.md and issue 21.
 *
 * Each side is a training graph: q, k, v parameters [B, H, T, d], y =
 * attention, loss = sum(y * r), sg_graph_backward (no optimizer: a step is
 * forward + backward). Each side runs in a process of its own (this program
 * again, with --child), so that its peak RSS is its own: compile, --warmup
 * steps, then --steps timed steps, of which the median is kept. With
 * --repeat N the two sides alternate N times and each keeps its fastest
 * median (on a shared machine a run can only be slowed down).
 *
 * usage: attention_bench [--batch 4] [--heads 6] [--seq 256] [--dim 64]
 *                        [--threads 2] [--steps 20] [--warmup 3]
 *                        [--repeat 3] [--no-causal] [--json]
 * Defaults: GPT-2 mini's attention (6 heads of 64, context 256, causal) at
 * batch 4 on 2 threads. Prints per side ms per step (wall, median) and the
 * process's CPU ms per step (which counts OpenMP's spinning too), the
 * compiled plan's peak and transient bytes, the process's peak RSS (about
 * 250 MB of it is the libraries, the same on both sides) and its step RSS:
 * the peak resident set while stepping (reset after compile) minus the
 * resident set before the graph was built. Then the ratios fused /
 * unfused. With --json the last line of stdout is one JSON object. Compare
 * only ratios measured in one run, at a low load average. */
#define _GNU_SOURCE
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sgrt/sgrt.h>

extern char **environ;

typedef struct config {
  long long batch, heads, seq, dim;
  int threads, steps, warmup, repeat, causal, json;
} config;

/* What one side measured. */
typedef struct result {
  double ms, cpu_ms;      /* median wall ms per step; process CPU ms per step */
  double peak, transient; /* compile report: planned peak and transient bytes */
  long rss_kb;            /* peak resident set of the process (compile included) */
  double rss0_kb;         /* its resident set before the graph was built (the libraries: ~250 MB) */
  double step_kb;         /* its peak resident set while stepping */
} result;

/* A line "<key> <n> kB" of /proc/self/status, or 0. */
static double status_kb(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  double kb = 0;
  size_t n = strlen(key);
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, key, n) == 0 && sscanf(line + n, " %lf", &kb) == 1) break;
  if (f) fclose(f);
  return kb;
}

/* Resets the peak resident set (VmHWM) to the current one (Linux >= 4.0). */
static void reset_peak_rss(void) {
  FILE *f = fopen("/proc/self/clear_refs", "w");
  if (f) fputs("5", f), fclose(f);
}

static double now(double *cpu) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  if (cpu) {
    struct timespec c;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c);
    *cpu = (double)c.tv_sec + (double)c.tv_nsec * 1e-9;
  }
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail(const char *what, sg_status st) {
  fprintf(stderr, "attention_bench: %s: %s: %s\n", what, sg_status_str(st), sg_last_error());
  return 1;
}

static void fill(float *p, size_t n, unsigned seed) {
  unsigned long long x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    p[i] = (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  }
}

/* The training graph of one side. */
static sg_status build(const config *c, int fused, sg_graph **out) {
  sg_graph *g;
  sg_status st = sg_graph_create(&g);
  if (st != SG_OK) return st;
  const int64_t dims[] = {c->batch, c->heads, c->seq, c->dim};
  const size_t n = (size_t)(c->batch * c->heads * c->seq * c->dim);
  float *val = malloc(n * sizeof *val);
  if (val == NULL) {
    sg_graph_destroy(g);
    return SG_ERR_NO_MEMORY;
  }
  static const char *const names[3] = {"q", "k", "v"};
  sg_tensor p[3];
  for (int i = 0; i < 3; i++) {
    fill(val, n, 1 + (unsigned)i);
    p[i] = sg_parameter(g, names[i], SG_F32, 4, dims, val);
  }
  sg_tensor y;
  if (fused) {
    y = sg_attention(g, p[0], p[1], p[2], 0, c->causal);
  } else {
    const int64_t perm[] = {0, 1, 3, 2};
    sg_tensor s = sg_matmul(g, p[0], sg_transpose(g, p[1], 4, perm));
    s = sg_mul_scalar(g, s, 1.0 / sqrt((double)c->dim));
    if (c->causal) {
      const int64_t T = c->seq, md[] = {T, T};
      float *m = malloc((size_t)(T * T) * sizeof *m);
      if (m == NULL) {
        free(val);
        sg_graph_destroy(g);
        return SG_ERR_NO_MEMORY;
      }
      for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < T; j++) m[i * T + j] = j <= i ? 0.0f : -1e9f;
      s = sg_add(g, s, sg_constant(g, "causal_mask", SG_F32, 2, md, m));
      free(m);
    }
    y = sg_matmul(g, sg_softmax(g, s, -1), p[2]);
  }
  fill(val, n, 99);
  sg_tensor loss = sg_reduce_sum(g, sg_mul(g, y, sg_constant(g, "r", SG_F32, 4, dims, val)), 0, NULL, 0);
  free(val);
  sg_graph_mark_output(g, loss);
  st = sg_graph_backward(g, loss);
  /* Gradients nobody reads would be dead code: they are outputs, as an optimizer's inputs would be. */
  for (int i = 0; st == SG_OK && i < 3; i++) {
    sg_tensor gt;
    st = sg_graph_grad(g, p[i], &gt);
    if (st == SG_OK) st = sg_graph_mark_output(g, gt);
  }
  if (st == SG_OK) st = sg_graph_finalize(g);
  if (st != SG_OK) {
    sg_graph_destroy(g);
    return st;
  }
  *out = g;
  return SG_OK;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* One side in this process: prints "RESULT ms cpu_ms peak transient rss0_kb". */
static int child(const config *c, int fused) {
  const double rss0 = status_kb("VmRSS:");
  sg_graph *g;
  sg_status st = build(c, fused, &g);
  if (st != SG_OK) return fail("building the graph", st);
  sg_session_params sp = SG_SESSION_PARAMS_INIT;
  sp.threads = c->threads;
  sg_session *s;
  st = sg_session_create(g, &sp, &s);
  if (st == SG_OK) st = sg_session_compile(s);
  if (st != SG_OK) return fail("compiling", st);
  sg_compile_report rep = SG_COMPILE_REPORT_INIT;
  sg_session_compile_report(s, &rep);
  reset_peak_rss(); /* what compiling held for a while is not the step's memory */
  for (int i = 0; i < c->warmup; i++)
    if ((st = sg_session_step(s)) != SG_OK) return fail("step", st);
  double *ms = malloc(sizeof(double) * (size_t)c->steps), cpu0, cpu1;
  if (ms == NULL) return fail("timing", SG_ERR_NO_MEMORY);
  now(&cpu0);
  for (int i = 0; i < c->steps; i++) {
    double t0 = now(NULL);
    if ((st = sg_session_step(s)) != SG_OK) return fail("step", st);
    ms[i] = (now(NULL) - t0) * 1e3;
  }
  now(&cpu1);
  qsort(ms, (size_t)c->steps, sizeof *ms, cmp_double);
  printf("RESULT %.6f %.6f %zu %zu %.0f %.0f\n", ms[c->steps / 2], (cpu1 - cpu0) * 1e3 / c->steps,
         rep.planned_peak_bytes, rep.transient_bytes, rss0, status_kb("VmHWM:"));
  free(ms);
  sg_session_destroy(s);
  sg_graph_destroy(g);
  return 0;
}

/* Runs this program with --child for one side; its result and peak RSS. */
static int spawn_side(const config *c, int fused, result *out) {
  char b[32], h[32], t[32], dd[32], th[32], st[32], wu[32];
  snprintf(b, sizeof b, "%lld", c->batch), snprintf(h, sizeof h, "%lld", c->heads);
  snprintf(t, sizeof t, "%lld", c->seq), snprintf(dd, sizeof dd, "%lld", c->dim);
  snprintf(th, sizeof th, "%d", c->threads), snprintf(st, sizeof st, "%d", c->steps);
  snprintf(wu, sizeof wu, "%d", c->warmup);
  char *argv[] = {"attention_bench",
                  "--child",
                  fused ? "fused" : "unfused",
                  "--batch",
                  b,
                  "--heads",
                  h,
                  "--seq",
                  t,
                  "--dim",
                  dd,
                  "--threads",
                  th,
                  "--steps",
                  st,
                  "--warmup",
                  wu,
                  c->causal ? NULL : "--no-causal",
                  NULL};
  int fds[2];
  if (pipe(fds) != 0) return 1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  pid_t pid;
  int rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    fprintf(stderr, "attention_bench: cannot run itself: %s\n", strerror(rc));
    return 1;
  }
  FILE *f = fdopen(fds[0], "r");
  char line[256];
  int got = 0;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "RESULT %lf %lf %lf %lf %lf %lf", &out->ms, &out->cpu_ms, &out->peak, &out->transient,
               &out->rss0_kb, &out->step_kb) == 6)
      got = 1;
  if (f) fclose(f);
  int status;
  struct rusage ru;
  if (wait4(pid, &status, 0, &ru) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || !got) {
    fprintf(stderr, "attention_bench: the %s side failed\n", fused ? "fused" : "unfused");
    return 1;
  }
  out->rss_kb = ru.ru_maxrss;
  return 0;
}

/* Peak RSS growth of a run's steps: their peak minus what the process held
 * before building the graph. */
static double growth_kb(const result *r) { return r->step_kb - r->rss0_kb; }

static void print_side(const char *name, const result *r) {
  printf("\"%s\":{\"ms\":%.4f,\"cpu_ms\":%.4f,\"planned_peak_bytes\":%.0f,\"transient_bytes\":%.0f,"
         "\"max_rss_kb\":%ld,\"rss_growth_kb\":%.0f},",
         name, r->ms, r->cpu_ms, r->peak, r->transient, r->rss_kb, growth_kb(r));
}

int main(int argc, char **argv) {
  config c = {4, 6, 256, 64, 2, 20, 3, 3, 1, 0};
  int child_side = -1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--json") == 0) c.json = 1;
    else if (strcmp(a, "--no-causal") == 0) c.causal = 0;
    else if (strcmp(a, "--child") == 0 && v) child_side = strcmp(argv[++i], "fused") == 0;
    else if (strcmp(a, "--batch") == 0 && v) c.batch = atoll(argv[++i]);
    else if (strcmp(a, "--heads") == 0 && v) c.heads = atoll(argv[++i]);
    else if (strcmp(a, "--seq") == 0 && v) c.seq = atoll(argv[++i]);
    else if (strcmp(a, "--dim") == 0 && v) c.dim = atoll(argv[++i]);
    else if (strcmp(a, "--threads") == 0 && v) c.threads = atoi(argv[++i]);
    else if (strcmp(a, "--steps") == 0 && v) c.steps = atoi(argv[++i]);
    else if (strcmp(a, "--warmup") == 0 && v) c.warmup = atoi(argv[++i]);
    else if (strcmp(a, "--repeat") == 0 && v) c.repeat = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: attention_bench [--batch N] [--heads N] [--seq N] [--dim N] [--threads N] "
                      "[--steps N] [--warmup N] [--repeat N] [--no-causal] [--json]\n");
      return 2;
    }
  }
  if (c.batch < 1 || c.heads < 1 || c.seq < 1 || c.dim < 1 || c.threads < 1 || c.steps < 1 || c.warmup < 0 ||
      c.repeat < 1) {
    fprintf(stderr, "attention_bench: sizes, --threads, --steps and --repeat must be >= 1\n");
    return 2;
  }
  if (child_side >= 0) return child(&c, child_side);
  /* Per side: the run with the fastest median, and the smallest peak RSS
   * and growth of any run (memory does not depend on the load). */
  result best[2];
  for (int r = 0; r < c.repeat; r++)
    for (int k = 0; k < 2; k++) {
      int fused = (r + k) % 2 == 0; /* alternate which side goes first */
      result one;
      if (spawn_side(&c, fused, &one) != 0) return 1;
      result *b = &best[fused];
      if (r == 0) {
        *b = one;
        continue;
      }
      if (one.ms < b->ms) b->ms = one.ms, b->cpu_ms = one.cpu_ms;
      if (one.rss_kb < b->rss_kb) b->rss_kb = one.rss_kb;
      if (growth_kb(&one) < growth_kb(b)) b->rss0_kb = one.rss0_kb, b->step_kb = one.step_kb;
    }
  const result *f = &best[1], *u = &best[0];
  const double speedup = u->ms / f->ms, peak = f->peak / u->peak, rss = growth_kb(f) / growth_kb(u);
  printf(
      "attention B=%lld H=%lld T=%lld d=%lld %s, %d threads, forward + backward (median of %d steps, best of "
      "%d runs)\n",
      c.batch, c.heads, c.seq, c.dim, c.causal ? "causal" : "not causal", c.threads, c.steps, c.repeat);
  printf("  %-8s %9s %9s %14s %14s %12s %14s\n", "", "ms/step", "cpu ms", "planned peak", "transient",
         "peak RSS", "step RSS");
  for (int k = 1; k >= 0; k--) {
    const result *r = &best[k];
    printf("  %-8s %9.3f %9.3f %11.2f MB %11.2f MB %9.1f MB %11.1f MB\n", k ? "fused" : "unfused", r->ms,
           r->cpu_ms, r->peak / 1e6, r->transient / 1e6, (double)r->rss_kb / 1024.0, growth_kb(r) / 1024.0);
  }
  printf("  fused: %.2fx faster; planned peak %.2fx, peak RSS growth %.2fx of the unfused graph's\n", speedup,
         peak, rss);
  if (c.json) {
    printf("{\"bench\":\"attention\",\"batch\":%lld,\"heads\":%lld,\"seq\":%lld,\"dim\":%lld,\"causal\":%s,"
           "\"threads\":%d,\"steps\":%d,\"repeat\":%d,",
           c.batch, c.heads, c.seq, c.dim, c.causal ? "true" : "false", c.threads, c.steps, c.repeat);
    print_side("fused", f);
    print_side("unfused", u);
    printf("\"speedup\":%.4f,\"planned_peak_ratio\":%.4f,\"rss_growth_ratio\":%.4f}\n", speedup, peak, rss);
  }
  return 0;
}
