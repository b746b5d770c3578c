/* Generated kernels on CUDA (backend.h's module entries): the kernels of
 * one graph emitted as one CUDA C++ program (cuda_emit.c), compiled by
 * NVRTC to a cubin for this device's compute capability (cuda_nvrtc.c),
 * written to a private temporary file (the compile cache's artifact) and
 * loaded by the runtime (cudaLibraryLoadData: no driver API). The program
 * ends with sgrt's own kernels (cuda_kernels.c), so that they are cached
 * with the rest. A kernel with
 * a prologue runs it as a one-thread launch that leaves the parameters in
 * device memory of its own, read by the body: nothing of a step goes
 * through the host. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_nvrtc.h"

struct sg__module {
  cudaLibrary_t lib;
  char dir[PATH_MAX];  /* our temporary directory ("" for a module loaded from the cache) */
  char path[PATH_MAX]; /* the cubin */
};

typedef struct gen_kernel {
  sg__kernel base;
  cudaKernel_t body, pro;
  unsigned grid, threads;
  float *prm; /* device: the prologue's parameters */
  int n_in, n_out;
  int8_t out_over[SG__KIR_MAX_OUTPUTS];
} gen_kernel;

/* The prelude's sgk_args (cuda_emit.c), passed by value to every kernel. */
typedef struct sgk_args {
  const void *in[SG__KIR_MAX_INPUTS];
  void *out[SG__KIR_MAX_OUTPUTS];
  const float *prm;
} sgk_args;

sg_status sg__cuda_module_identity(void *state, char *buf, size_t cap) {
  sg__cuda_state *st = state;
  /* The program ends with sgrt's own kernels: a change to them is a new module. */
  const char *lib = sg__cuda_library_program();
  if (lib == NULL) return sg__error(SG_ERR_NO_MEMORY, "cuda: out of memory");
  int n = snprintf(buf, cap, "cuda sm_%d nvrtc %s [%s] prelude %016llx library %016llx", st->cc, st->nvrtc,
                   sg__cuda_nvrtc_options(), (unsigned long long)sg__cuda_emit_prelude_hash(),
                   (unsigned long long)XXH3_64bits(lib, strlen(lib)));
  if (n < 0 || (size_t)n >= cap)
    return sg__error(SG_ERR_INTERNAL, "cuda: module identity longer than %zu", cap);
  return SG_OK;
}

static sg_status read_all(const char *path, void **data, size_t *size) {
  const void *map;
  SG_CHECK(sg__map_file(path, &map, size));
  *data = sg__malloc(*size ? *size : 1);
  if (*data == NULL) {
    sg__unmap_file(map, *size);
    return sg__error(SG_ERR_NO_MEMORY, "cuda: %zu bytes for '%s'", *size, path);
  }
  memcpy(*data, map, *size);
  sg__unmap_file(map, *size);
  return SG_OK;
}

/* The cubin into a file of a new private directory (mkdtemp, 0700). */
static sg_status write_cubin(sg__module *m, const void *cubin, size_t size) {
  const char *tmp = getenv("TMPDIR");
  if (tmp == NULL || tmp[0] == '\0') tmp = "/tmp";
  if (snprintf(m->dir, sizeof m->dir, "%s/sgrt-cubin-XXXXXX", tmp) >= (int)sizeof m->dir)
    return sg__error(SG_ERR_IO, "cuda: TMPDIR '%s' is too long", tmp);
  if (mkdtemp(m->dir) == NULL) {
    m->dir[0] = '\0';
    return sg__error(SG_ERR_IO, "cuda: cannot make a directory under '%s' for the cubin", tmp);
  }
  if (snprintf(m->path, sizeof m->path, "%s/kernels.cubin", m->dir) >= (int)sizeof m->path)
    return sg__error(SG_ERR_IO, "cuda: TMPDIR '%s' is too long", tmp);
  FILE *f = fopen(m->path, "wb");
  bool ok = f != NULL && fwrite(cubin, 1, size, f) == size;
  if (f != NULL && fclose(f) != 0) ok = false;
  if (!ok) return sg__error(SG_ERR_IO, "cuda: cannot write '%s'", m->path);
  return SG_OK;
}

void sg__cuda_module_free(void *state, sg__module *m) {
  sg__cuda_state *st = state;
  if (m == NULL) return;
  if (m->lib) {
    cudaSetDevice(st->device);
    sg__cuda_library_release(st, m->lib);
    if (st->module_lib == m->lib) st->module_lib = NULL;
    cudaLibraryUnload(m->lib);
  }
  if (m->dir[0]) {
    unlink(m->path);
    rmdir(m->dir);
  }
  sg__free(m);
}

/* The generated program with sgrt's own kernels after it: one NVRTC run and
 * one cached cubin for everything a graph compiles. */
static sg_status with_library_program(char **src, size_t *len) {
  const char *lib = sg__cuda_library_program();
  if (lib == NULL) return sg__error(SG_ERR_NO_MEMORY, "cuda: out of memory");
  size_t n = strlen(lib);
  char *both = sg__malloc(*len + n + 2);
  if (both == NULL) return sg__error(SG_ERR_NO_MEMORY, "cuda: out of memory");
  memcpy(both, *src, *len);
  both[*len] = '\n';
  memcpy(both + *len + 1, lib, n + 1);
  sg__free(*src);
  *src = both;
  *len += n + 1;
  return SG_OK;
}

sg_status sg__cuda_module_build(void *state, const sg__kir_kernel *const *kernels, uint32_t n,
                                const char *artifact, sg__module **out) {
  sg__cuda_state *st = state;
  *out = NULL;
  SG_CUDA(st, cudaSetDevice(st->device), "cudaSetDevice");
  sg__module *m = sg__calloc(1, sizeof *m);
  if (m == NULL) return sg__error(SG_ERR_NO_MEMORY, "cuda: out of memory");
  void *cubin = NULL;
  size_t size = 0;
  sg_status s = SG_OK;
  if (artifact != NULL) {
    if (snprintf(m->path, sizeof m->path, "%s", artifact) >= (int)sizeof m->path)
      s = sg__error(SG_ERR_IO, "cuda: path '%s' is too long", artifact);
    else s = read_all(artifact, &cubin, &size);
  } else {
    char *src = NULL;
    size_t len;
    s = sg__cuda_emit(kernels, (int)n, &src, &len);
    if (s == SG_OK) s = with_library_program(&src, &len);
    if (s == SG_OK) {
      int64_t t0 = sg__now_ns();
      s = sg__cuda_nvrtc_compile(src, "sgrt_kernels.cu", st->cc, &cubin, &size);
      if (s == SG_OK)
        SG_INFO("cuda: NVRTC compiled %u kernels (%zu bytes of CUDA C) for sm_%d in %.2f s", n, len, st->cc,
                (double)(sg__now_ns() - t0) * 1e-9);
    }
    sg__free(src);
    if (s == SG_OK) s = write_cubin(m, cubin, size);
  }
  if (s == SG_OK) {
    cudaError_t e = cudaLibraryLoadData(&m->lib, cubin, NULL, NULL, 0, NULL, NULL, 0);
    if (e != cudaSuccess) {
      m->lib = NULL;
      s = sg__cuda_error(st, e, artifact ? "loading the cached cubin" : "loading the cubin");
    }
  }
  sg__free(cubin);
  if (s != SG_OK) {
    sg__cuda_module_free(st, m);
    return s;
  }
  st->module_lib = m->lib;
  *out = m;
  return SG_OK;
}

const char *sg__cuda_module_artifact(void *state, const sg__module *m) {
  (void)state;
  return m->path;
}

static sg_status gen_run(sg__cuda_state *st, sg__kernel *base, void *const *in, void *const *out,
                         const sg__run_ctx *ctx) {
  (void)ctx;
  gen_kernel *k = (gen_kernel *)base;
  sgk_args a;
  memset(&a, 0, sizeof a);
  for (int i = 0; i < k->n_in; i++) a.in[i] = in[i];
  for (int o = 0; o < k->n_out; o++) a.out[o] = k->out_over[o] >= 0 ? NULL : out[o];
  a.prm = k->prm;
  if (k->pro != NULL) {
    void *args[] = {&a, &k->prm};
    dim3 one = {1, 1, 1};
    SG_CUDA(st, cudaLaunchKernel((const void *)k->pro, one, one, args, 0, st->compute), k->base.name);
  }
  void *args[] = {&a};
  dim3 grid = {k->grid, 1, 1}, block = {k->threads, 1, 1};
  SG_CUDA(st, cudaLaunchKernel((const void *)k->body, grid, block, args, 0, st->compute), k->base.name);
  return SG_OK;
}

static void gen_destroy(sg__cuda_state *st, sg__kernel *base) {
  gen_kernel *k = (gen_kernel *)base;
  if (k->prm) {
    cudaSetDevice(st->device);
    cudaFree(k->prm);
  }
}

sg_status sg__cuda_module_kernel(void *state, sg__module *m, const sg__kir_kernel *ir, const char *op_name,
                                 sg__kernel **out) {
  sg__cuda_state *st = state;
  *out = NULL;
  gen_kernel *k = sg__calloc(1, sizeof *k);
  if (k == NULL) return sg__error(SG_ERR_NO_MEMORY, "cuda: out of memory");
  k->base.run = gen_run;
  k->base.destroy = gen_destroy;
  snprintf(k->base.name, sizeof k->base.name, "%s", op_name ? op_name : ir->name);
  k->n_in = ir->n_in;
  k->n_out = ir->n_out;
  memcpy(k->out_over, ir->out_over, sizeof k->out_over);
  sg__cuda_geometry g;
  sg__cuda_geometry_of(ir, &g);
  k->grid = sg__cuda_grid(st, g.units, g.per_block);
  k->threads = (unsigned)g.threads;
  sg_status s = SG_OK;
  cudaError_t e = cudaLibraryGetKernel(&k->body, m->lib, ir->name);
  if (e != cudaSuccess) s = sg__cuda_error(st, e, "finding a generated kernel");
  if (s == SG_OK && ir->n_pro > 0) {
    char name[SG__KIR_NAME_MAX + 8];
    snprintf(name, sizeof name, "%s_pro", ir->name);
    if ((e = cudaLibraryGetKernel(&k->pro, m->lib, name)) != cudaSuccess)
      s = sg__cuda_error(st, e, "finding a generated prologue");
    else if ((e = cudaMalloc((void **)&k->prm, SG__KIR_MAX_PARAMS * sizeof(float))) != cudaSuccess)
      s = sg__cuda_error(st, e, "a prologue's parameters");
  }
  if (s != SG_OK) {
    gen_destroy(st, &k->base);
    sg__free(k);
    return s;
  }
  *out = &k->base;
  return SG_OK;
}
