/* Generated kernels on the CPU (backend.h's module entries): the kernels of
 * one graph emitted as one C translation unit (cpu_emit.c), compiled and
 * loaded (cpu_jit.c), and run over sgrt's thread split -- the generated
 * functions take an index range and start no threads of their own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/cpu/cpu_internal.h"
#include "core/core.h"

struct sg__module {
  sg__jit_lib *lib;
};

typedef struct fused_kernel {
  sg__kernel base;
  sg__jit_kernel_fn fn;
  int64_t range, grain; /* the function's [begin, end) space (sg__kir_range) and the units worth a thread */
  sg__kir_kernel ir;    /* the kernel's operands and prologue (its body, ins, is not kept) */
} fused_kernel;

typedef struct fused_job {
  sg__jit_kernel_fn fn;
  void *const *in;
  void *const *out;
} fused_job;

static void fused_range(void *ctx, int64_t begin, int64_t end) {
  const fused_job *j = ctx;
  j->fn(begin, end, (const void *const *)j->in, j->out);
}

/* Elementwise work is memory-bound: split only ranges worth a thread
 * (counted in iteration elements). */
enum { MIN_PARALLEL = 1 << 15 };

static sg_status fused_run(sg__cpu_state *st, sg__kernel *base, void *const *in, void *const *out,
                           const sg__run_ctx *ctx) {
  (void)ctx;
  fused_kernel *k = (fused_kernel *)base;
  /* The inputs, then the run's parameters (the prologue's, computed here
   * once); an output written in place is its input's buffer (an optimizer
   * update's parameter and state, which the graph lists only as inputs). */
  void *ins[SG__KIR_MAX_INPUTS + 1], *outs[SG__KIR_MAX_OUTPUTS];
  float params[SG__KIR_MAX_PARAMS];
  for (int i = 0; i < k->ir.n_in; i++) ins[i] = in[i];
  if (k->ir.n_pro > 0) sg__kir_prologue_run(&k->ir, ins, params);
  ins[k->ir.n_in] = params;
  for (int o = 0; o < k->ir.n_out; o++) outs[o] = k->ir.out_over[o] >= 0 ? in[k->ir.out_over[o]] : out[o];
  fused_job j = {k->fn, ins, outs};
  sg__cpu_set_threads(st->threads);
  sg__cpu_parallel_for(k->range, k->grain, fused_range, &j);
  return SG_OK;
}

/* The first line of /proc/cpuinfo that starts with `key`, hashed: -march=native
 * code depends on the exact CPU. */
static uint64_t cpuinfo_hash(const char *key) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  char line[8192];
  uint64_t h = 0;
  if (f == NULL) return 0;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, key, strlen(key)) == 0) {
      h = sg__fnv1a64(SG__FNV1A64_SEED, line, strlen(line));
      break;
    }
  fclose(f);
  return h;
}

/* `name` looked up on PATH, as posix_spawnp will. */
static void find_on_path(const char *name, char *out, size_t cap) {
  const char *path = getenv("PATH");
  out[0] = 0;
  while (path && *path) {
    const char *end = strchr(path, ':');
    size_t len = end ? (size_t)(end - path) : strlen(path);
    snprintf(out, cap, "%.*s/%s", (int)len, path, name);
    if (access(out, X_OK) == 0) return;
    out[0] = 0;
    path = end ? end + 1 : NULL;
  }
}

sg_status sg__cpu_module_identity(void *state, char *buf, size_t cap) {
  sg__cpu_state *st = state;
  if (st == NULL || buf == NULL || cap == 0)
    return sg__error(SG_ERR_INVALID_ARG, "cpu module_identity: NULL");
  const char *cc = sg__jit_compiler();
  /* The compiler binary itself (an upgrade changes its size or time). */
  char path[4096] = "";
  struct stat sb = {0};
  if (strchr(cc, '/')) snprintf(path, sizeof path, "%s", cc);
  else find_on_path(cc, path, sizeof path);
  if (path[0]) stat(path, &sb);
  int n = snprintf(
      buf, cap, "cpu cc=%s size=%lld mtime=%lld flags=%s model=%016llx isa=%016llx block=%d prelude=%016llx",
      cc, (long long)sb.st_size, (long long)sb.st_mtime, sg__jit_flags(),
      (unsigned long long)cpuinfo_hash("model name"), (unsigned long long)cpuinfo_hash("flags"), st->block,
      (unsigned long long)sg__cpu_emit_prelude_hash());
  if (n < 0 || (size_t)n >= cap) return sg__error(SG_ERR_RANGE, "cpu module_identity: buffer too small");
  return SG_OK;
}

sg_status sg__cpu_module_build(void *state, const sg__kir_kernel *const *kernels, uint32_t n,
                               const char *artifact, sg__module **out) {
  if (state == NULL || out == NULL || (kernels == NULL && n > 0))
    return sg__error(SG_ERR_INVALID_ARG, "cpu module_build: NULL argument");
  *out = NULL;
  sg__module *m = sg__calloc(1, sizeof *m);
  if (m == NULL) return sg__error(SG_ERR_NO_MEMORY, "cpu module_build: out of memory");
  sg_status st;
  if (artifact != NULL) {
    st = sg__jit_open(artifact, &m->lib);
  } else {
    char *src = NULL;
    size_t len = 0;
    st = sg__cpu_emit_c(kernels, (int)n, &src, &len);
    if (st == SG_OK) st = sg__jit_build(src, len, &m->lib);
    sg__free(src);
  }
  if (st != SG_OK) {
    sg__free(m);
    return st;
  }
  *out = m;
  return SG_OK;
}

const char *sg__cpu_module_artifact(void *state, const sg__module *m) {
  (void)state;
  return m ? sg__jit_path(m->lib) : NULL;
}

sg_status sg__cpu_module_kernel(void *state, sg__module *m, const sg__kir_kernel *k, const char *op_name,
                                sg__kernel **out) {
  if (state == NULL || m == NULL || k == NULL || out == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "cpu module_kernel: NULL argument");
  *out = NULL;
  sg__jit_kernel_fn fn = sg__jit_symbol(m->lib, k->name);
  if (fn == NULL) return SG_ERR_NOT_FOUND; /* sg__jit_symbol said which */
  fused_kernel *fk = sg__calloc(1, sizeof *fk);
  if (fk == NULL) return sg__error(SG_ERR_NO_MEMORY, "cpu module_kernel: out of memory");
  fk->base.run = fused_run;
  snprintf(fk->base.name, sizeof fk->base.name, "%s", op_name ? op_name : k->name);
  fk->fn = fn;
  fk->ir = *k;
  fk->ir.ins = NULL;
  fk->ir.n_ins = fk->ir.cap_ins = 0;
  int64_t per;
  fk->range = sg__kir_range(k, &per);
  fk->grain = per > 0 ? (MIN_PARALLEL + per - 1) / per : MIN_PARALLEL;
  *out = &fk->base;
  return SG_OK;
}

void sg__cpu_module_free(void *state, sg__module *m) {
  (void)state;
  if (m == NULL) return;
  sg__jit_close(m->lib);
  sg__free(m);
}
