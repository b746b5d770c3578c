/* NVRTC: CUDA C++ text to a cubin for one compute capability, in process,
 * without a GPU (cuda_nvrtc.c). The generated programs (cuda_emit.c) are
 * compiled with it at compile time; the cubin goes to the compile cache. */
#ifndef SG_CUDA_NVRTC_H
#define SG_CUDA_NVRTC_H

#include <stddef.h>

#include "sgrt/status.h"

/* The options every program is compiled with (besides the architecture):
 * IEEE division and square root, no flush to zero, no FMA contraction
 * (kernel_ir.h's semantics), C++17. NUL-terminated, for cache keys. */
const char *sg__cuda_nvrtc_options(void);
/* NVRTC's version, "13.0" (for cache keys and `sgrt devices`). Errors:
 * SG_ERR_COMPILER when NVRTC cannot be asked. */
sg_status sg__cuda_nvrtc_version(char *buf, size_t cap);
/* Compiles src (named `name` in messages) to a cubin for sm_<cc> (cc =
 * 10 * major + minor, e.g. 90); *cubin is allocated with sg__malloc.
 * Errors: SG_ERR_COMPILER with NVRTC's log (the first lines), SG_ERR_INVALID_ARG
 * for an architecture NVRTC does not know, SG_ERR_NO_MEMORY. */
sg_status sg__cuda_nvrtc_compile(const char *src, const char *name, int cc, void **cubin, size_t *size);

#endif /* SG_CUDA_NVRTC_H */
