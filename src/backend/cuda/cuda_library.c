/* sgrt's own CUDA kernels (cuda_kernels.c's program: cross entropy,
 * softmax, layer norm) loaded for a backend state. The program rides at the
 * end of every graph's generated program (cuda_module.c), so that the same
 * NVRTC run compiles it and the compile cache keeps it (a warm start
 * compiles nothing); its kernels are then found in the module's library. A
 * graph without generated kernels compiles it on its own, once per backend
 * state. */
#include <stdio.h>

#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_nvrtc.h"

struct sg__cuda_lib {
  cudaLibrary_t lib;
  bool owned; /* compiled here (else the module's library) */
  cudaKernel_t k[SG__CUDA_LIB_N];
};

static sg_status find_kernels(sg__cuda_state *st, sg__cuda_lib *l) {
  for (int i = 0; i < SG__CUDA_LIB_N; i++) {
    const char *name = sg__cuda_library_name((sg__cuda_lib_kernel)i);
    cudaError_t e = cudaLibraryGetKernel(&l->k[i], l->lib, name);
    if (e != cudaSuccess) return sg__cuda_error(st, e, name);
  }
  return SG_OK;
}

sg_status sg__cuda_library(sg__cuda_state *st, sg__cuda_lib **out) {
  if (st->library != NULL) {
    *out = st->library;
    return SG_OK;
  }
  const char *src = sg__cuda_library_program();
  if (src == NULL) return sg__error(SG_ERR_NO_MEMORY, "cuda: out of memory");
  sg__cuda_lib *l = sg__calloc(1, sizeof *l);
  if (l == NULL) return sg__error(SG_ERR_NO_MEMORY, "cuda: out of memory");
  sg_status s = SG_OK;
  if (st->module_lib != NULL) {
    l->lib = st->module_lib;
    s = find_kernels(st, l);
  } else {
    void *cubin = NULL;
    size_t size = 0;
    s = sg__cuda_nvrtc_compile(src, "sgrt_library.cu", st->cc, &cubin, &size);
    cudaError_t e;
    if (s == SG_OK && (e = cudaLibraryLoadData(&l->lib, cubin, NULL, NULL, 0, NULL, NULL, 0)) != cudaSuccess)
      s = sg__cuda_error(st, e, "loading sgrt's kernels");
    else if (s == SG_OK) l->owned = true, s = find_kernels(st, l);
    sg__free(cubin);
  }
  if (s != SG_OK) {
    if (l->owned) cudaLibraryUnload(l->lib);
    sg__free(l);
    return s;
  }
  st->library = l;
  *out = l;
  return SG_OK;
}

cudaKernel_t sg__cuda_library_kernel(const sg__cuda_lib *l, sg__cuda_lib_kernel k) { return l->k[k]; }

void sg__cuda_library_release(sg__cuda_state *st, cudaLibrary_t lib) {
  sg__cuda_lib *l = st->library;
  if (l == NULL || (lib != NULL && l->lib != lib)) return;
  if (l->owned) cudaLibraryUnload(l->lib);
  sg__free(l);
  st->library = NULL;
}
