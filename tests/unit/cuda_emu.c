/* The host emulation of CUDA launches (cuda_emu.h). */
#include "cuda_emu.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_util.h"

static const char shim_head[] =
    "#include <math.h>\n"
    "#include <string.h>\n"
    "#include <pthread.h>\n"
    "#include <functional>\n"
    /* The program defines int64_t as NVRTC knows it (long long); the host's
     * headers, already in, as long: the program's get other names. */
    "#define int8_t sgk_int8_t\n"
    "#define uint8_t sgk_uint8_t\n"
    "#define int32_t sgk_int32_t\n"
    "#define uint32_t sgk_uint32_t\n"
    "#define int64_t sgk_int64_t\n"
    "#define uint64_t sgk_uint64_t\n"
    "struct sgk_dim3 { unsigned x, y, z; };\n"
    "static thread_local sgk_dim3 threadIdx, blockIdx;\n"
    "static sgk_dim3 blockDim, gridDim;\n"
    "static pthread_barrier_t sgk_barrier;\n"
    "#define __global__\n"
    "#define __device__\n"
    "#define __forceinline__ inline\n"
    "#define __restrict__ __restrict\n"
    "#define __launch_bounds__(n)\n"
    "#define __shared__ static\n"
    "static inline void __syncthreads(void) { pthread_barrier_wait(&sgk_barrier); }\n"
    "static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }\n"
    "static inline long long __double_as_longlong(double d) { long long i; memcpy(&i, &d, 8); return i; }\n"
    "static inline double __longlong_as_double(long long i) { double d; memcpy(&d, &i, 8); return d; }\n"
    "static inline unsigned long long atomicCAS(unsigned long long *p, unsigned long long cmp,\n"
    "                                           unsigned long long val) {\n"
    "  __atomic_compare_exchange_n(p, &cmp, val, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);\n"
    "  return cmp;\n"
    "}\n"
    "struct sgk_thread { const std::function<void()> *body; unsigned t, b; pthread_t id; };\n"
    "static void *sgk_run(void *p) {\n"
    "  sgk_thread *x = (sgk_thread *)p;\n"
    "  threadIdx = {x->t, 0, 0};\n"
    "  blockIdx = {x->b, 0, 0};\n"
    "  (*x->body)();\n"
    "  return 0;\n"
    "}\n"
    "static int cuda_emu_launch(std::function<void()> body, unsigned grid, unsigned block) {\n"
    "  static sgk_thread th[1024];\n"
    "  if (block < 1 || block > 1024) return -1;\n"
    "  blockDim = {block, 1, 1};\n"
    "  gridDim = {grid, 1, 1};\n"
    "  pthread_attr_t at;\n"
    "  pthread_attr_init(&at);\n"
    "  pthread_attr_setstacksize(&at, 1 << 18);\n"
    "  for (unsigned b = 0; b < grid; b++) {\n"
    "    pthread_barrier_init(&sgk_barrier, 0, block);\n"
    "    for (unsigned t = 0; t < block; t++) {\n"
    "      th[t] = {&body, t, b, 0};\n"
    "      if (pthread_create(&th[t].id, &at, sgk_run, &th[t]) != 0) return -2;\n"
    "    }\n"
    "    for (unsigned t = 0; t < block; t++) pthread_join(th[t].id, 0);\n"
    "    pthread_barrier_destroy(&sgk_barrier);\n"
    "  }\n"
    "  pthread_attr_destroy(&at);\n"
    "  return 0;\n"
    "}\n"
    "#define __CUDACC__ 1\n";

void *cuda_emu_load(const char *src, const char *tail) {
  char dir[] = "/tmp/sg_cuda_emu_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char cpp[96], so[96], cmd[512];
  snprintf(cpp, sizeof cpp, "%s/k.cpp", dir);
  snprintf(so, sizeof so, "%s/k.so", dir);
  FILE *f = fopen(cpp, "w");
  assert_non_null(f);
  fputs(shim_head, f), fputs(src, f);
  if (tail != NULL) fputs(tail, f);
  fclose(f);
  const char *cxx = getenv("SG_CXX") != NULL ? getenv("SG_CXX") : "c++";
  snprintf(cmd, sizeof cmd, "%s -std=c++17 -O1 -ffp-contract=off -fPIC -shared -pthread -w -o %s %s", cxx, so,
           cpp);
  if (system(cmd) != 0) fail_msg("the emulated CUDA program did not compile: %s (kept in %s)", cmd, cpp);
  void *dl = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  if (dl == NULL) fail_msg("dlopen %s: %s", so, dlerror());
  unlink(cpp), unlink(so), rmdir(dir);
  return dl;
}

void *cuda_emu_symbol(void *dl, const char *name) {
  void *p = dlsym(dl, name);
  if (p == NULL) fail_msg("no symbol %s in the emulated program", name);
  return p;
}
