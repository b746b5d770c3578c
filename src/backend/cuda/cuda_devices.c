/* sg_gpu_devices (sgrt/devices.h): the GPUs "cuda:N" can name. Part of
 * every build: without the CUDA backend it reports none and says why. */
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "sgrt/devices.h"
#if defined(SG_HAVE_CUDA_BACKEND)
#include <cuda_runtime_api.h>
#endif

static void say(char *why, size_t cap, const char *text) {
  if (why != NULL && cap > 0) snprintf(why, cap, "%s", text);
}

sg_status sg_gpu_devices(sg_gpu_device **out, size_t *count, int *driver, int *runtime, char *why,
                         size_t why_cap) {
  if (out == NULL || count == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg_gpu_devices: out or count is NULL");
  *out = NULL;
  *count = 0;
  if (driver) *driver = 0;
  if (runtime) *runtime = 0;
  say(why, why_cap, "");
#if !defined(SG_HAVE_CUDA_BACKEND)
  say(why, why_cap, "this sgrt was built without the CUDA backend (no CUDA toolkit at configure time)");
  return SG_OK;
#else
  int d = 0, r = 0, n = 0;
  cudaDriverGetVersion(&d);
  cudaRuntimeGetVersion(&r);
  if (driver) *driver = d;
  if (runtime) *runtime = r;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n <= 0) {
    char text[256];
    if (d == 0)
      snprintf(text, sizeof text, "no NVIDIA driver is installed (libcuda.so.1 not found): %s",
               cudaGetErrorName(e));
    else if (e != cudaSuccess)
      snprintf(text, sizeof text, "the CUDA runtime cannot use the driver: %s (%s)", cudaGetErrorName(e),
               cudaGetErrorString(e));
    else snprintf(text, sizeof text, "the driver sees no GPU (check nvidia-smi and CUDA_VISIBLE_DEVICES)");
    say(why, why_cap, text);
    return SG_OK;
  }
  sg_gpu_device *devs = sg__calloc((size_t)n, sizeof *devs);
  if (devs == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_gpu_devices: out of memory");
  for (int i = 0; i < n; i++) {
    struct cudaDeviceProp p;
    if ((e = cudaGetDeviceProperties(&p, i)) != cudaSuccess) {
      sg__free(devs);
      return sg__error(SG_ERR_DEVICE, "sg_gpu_devices: cuda:%d: %s (%s)", i, cudaGetErrorName(e),
                       cudaGetErrorString(e));
    }
    snprintf(devs[i].name, sizeof devs[i].name, "%s", p.name);
    snprintf(devs[i].pci_bus_id, sizeof devs[i].pci_bus_id, "%04x:%02x:%02x.0", p.pciDomainID, p.pciBusID,
             p.pciDeviceID);
    devs[i].index = i;
    devs[i].cc_major = p.major, devs[i].cc_minor = p.minor;
    devs[i].multiprocessors = p.multiProcessorCount;
    devs[i].memory_bytes = p.totalGlobalMem;
  }
  *out = devs;
  *count = (size_t)n;
  return SG_OK;
#endif
}

void sg_gpu_devices_free(sg_gpu_device *devices) { sg__free(devices); }
