/* NVRTC compilation (cuda_nvrtc.h). The only file that includes nvrtc.h. */
#include <nvrtc.h>
#include <stdio.h>
#include <string.h>

#include "backend/cuda/cuda_nvrtc.h"
#include "core/core.h"

#define OPT_FMA "--fmad=false"
#define OPT_FTZ "--ftz=false"
#define OPT_DIV "--prec-div=true"
#define OPT_SQRT "--prec-sqrt=true"
#define OPT_STD "--std=c++17"
static const char *const options[] = {OPT_FMA, OPT_FTZ, OPT_DIV, OPT_SQRT, OPT_STD};
#define N_OPTIONS (sizeof options / sizeof *options)

const char *sg__cuda_nvrtc_options(void) { return OPT_FMA " " OPT_FTZ " " OPT_DIV " " OPT_SQRT " " OPT_STD; }

sg_status sg__cuda_nvrtc_version(char *buf, size_t cap) {
  int major = 0, minor = 0;
  nvrtcResult r = nvrtcVersion(&major, &minor);
  if (r != NVRTC_SUCCESS)
    return sg__error(SG_ERR_COMPILER, "NVRTC: nvrtcVersion: %s", nvrtcGetErrorString(r));
  snprintf(buf, cap, "%d.%d", major, minor);
  return SG_OK;
}

/* Whether NVRTC can target sm_<cc>. */
static bool supported_arch(int cc) {
  int n = 0;
  if (nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0 || n > 256) return false;
  int archs[256];
  if (nvrtcGetSupportedArchs(archs) != NVRTC_SUCCESS) return false;
  for (int i = 0; i < n; i++)
    if (archs[i] == cc) return true;
  return false;
}

/* The log's first lines, enough to name the error (a program of thousands
 * of lines gives one message per bad line). */
static sg_status compile_error(nvrtcProgram p, const char *name, nvrtcResult r) {
  size_t n = 0;
  char *log = NULL;
  if (nvrtcGetProgramLogSize(p, &n) == NVRTC_SUCCESS && n > 0 && (log = sg__malloc(n)) != NULL &&
      nvrtcGetProgramLog(p, log) != NVRTC_SUCCESS)
    log[0] = '\0';
  sg_status st = sg__error(SG_ERR_COMPILER, "NVRTC could not compile '%s' (%s):\n%.1500s", name,
                           nvrtcGetErrorString(r), log != NULL ? log : "(no log)");
  sg__free(log);
  return st;
}

sg_status sg__cuda_nvrtc_compile(const char *src, const char *name, int cc, void **cubin, size_t *size) {
  *cubin = NULL;
  *size = 0;
  if (!supported_arch(cc))
    return sg__error(SG_ERR_INVALID_ARG,
                     "NVRTC: this NVRTC cannot compile for sm_%d (compute capability %d.%d)", cc, cc / 10,
                     cc % 10);
  char arch[32];
  snprintf(arch, sizeof arch, "--gpu-architecture=sm_%d", cc);
  const char *opts[N_OPTIONS + 1];
  opts[0] = arch;
  for (size_t i = 0; i < N_OPTIONS; i++) opts[i + 1] = options[i];
  nvrtcProgram p;
  nvrtcResult r = nvrtcCreateProgram(&p, src, name, 0, NULL, NULL);
  if (r != NVRTC_SUCCESS)
    return sg__error(r == NVRTC_ERROR_OUT_OF_MEMORY ? SG_ERR_NO_MEMORY : SG_ERR_COMPILER,
                     "NVRTC: nvrtcCreateProgram for '%s': %s", name, nvrtcGetErrorString(r));
  sg_status st = SG_OK;
  r = nvrtcCompileProgram(p, (int)(N_OPTIONS + 1), opts);
  if (r != NVRTC_SUCCESS) {
    st = compile_error(p, name, r);
  } else if ((r = nvrtcGetCUBINSize(p, size)) != NVRTC_SUCCESS || *size == 0) {
    st = sg__error(SG_ERR_COMPILER, "NVRTC: no cubin for '%s': %s", name, nvrtcGetErrorString(r));
  } else if ((*cubin = sg__malloc(*size)) == NULL) {
    st = sg__error(SG_ERR_NO_MEMORY, "NVRTC: %zu bytes for the cubin of '%s'", *size, name);
  } else if ((r = nvrtcGetCUBIN(p, *cubin)) != NVRTC_SUCCESS) {
    st = sg__error(SG_ERR_COMPILER, "NVRTC: nvrtcGetCUBIN for '%s': %s", name, nvrtcGetErrorString(r));
  }
  nvrtcDestroyProgram(&p);
  if (st != SG_OK) {
    sg__free(*cubin);
    *cubin = NULL;
    *size = 0;
  }
  return st;
}
