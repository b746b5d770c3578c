/**
 * @file devices.h
 * The devices a session can run on: "cpu", and the GPUs "cuda:N" names
 * when sgrt was built with its CUDA backend (docs/cuda.md). `sgrt devices`
 * prints this list.
 */
#ifndef SGRT_DEVICES_H
#define SGRT_DEVICES_H

#include <stddef.h>
#include <stdint.h>

#include "sgrt/export.h"
#include "sgrt/status.h"

SG_EXTERN_C_BEGIN

/** One GPU that sessions can use as "cuda:N". Fixed layout: sg_gpu_devices()
 *  returns an array of them, so fields are never added. */
typedef struct sg_gpu_device {
  char name[256];         /**< "NVIDIA H200" */
  char pci_bus_id[32];    /**< "0000:19:00.0" */
  int index;              /**< the N of "cuda:N" */
  int cc_major, cc_minor; /**< compute capability */
  int multiprocessors;
  uint64_t memory_bytes;
} sg_gpu_device;

/**
 * Lists the GPUs of this machine (as CUDA_VISIBLE_DEVICES shows them).
 * *count = 0 and SG_OK when there are none; then `why` (when not NULL, of
 * why_cap bytes) says why: this sgrt was built without the CUDA backend, no
 * driver is installed, the driver sees no GPU. *driver gets the driver's
 * CUDA version (13000 for 13.0; 0 without a driver), *runtime the runtime's
 * (0 without the CUDA backend); either may be NULL. The caller frees *out
 * with sg_gpu_devices_free().
 */
SG_API sg_status sg_gpu_devices(sg_gpu_device **out, size_t *count, int *driver, int *runtime, char *why,
                                size_t why_cap);
SG_API void sg_gpu_devices_free(sg_gpu_device *devices);

SG_EXTERN_C_END

#endif /* SGRT_DEVICES_H */
