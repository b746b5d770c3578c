/* The CUDA emitter: kernel IR (backend/kernel_ir.h) to one CUDA C++
 * program per graph, compiled by NVRTC (cuda_nvrtc.c) without any header.
 * Pure text: it needs no CUDA library, so it is built and tested (through a
 * host emulation of the launch, tests/unit/test_cuda_emit.c) everywhere. */
#ifndef SG_CUDA_EMIT_H
#define SG_CUDA_EMIT_H

#include "backend/kernel_ir.h"

/* Threads per block of every generated kernel (its __launch_bounds__). */
#define SG__CUDA_BLOCK 256

/* How a kernel is launched: blocks of `threads` threads, each block taking
 * `per_block` units of the kernel's range (sg__kir_range: elements, rows or
 * columns) at a time, grid-strided: any grid of at least one block is
 * correct, and the launcher picks min(ceil(units / per_block), its cap).
 * A kernel that ends in a sum gives each unit (a row for SG__KIR_SUM_INNER,
 * a column for SG__KIR_SUM_OUTER) `lanes` threads, which add every
 * lanes-th element of the unit in double, in order, and then combine in a
 * fixed tree: the result depends on the kernel alone, never on the grid. */
typedef struct sg__cuda_geometry {
  int threads;
  int lanes;         /* 1 for kernels without a sum */
  int64_t units;     /* sg__kir_range(k) */
  int64_t per_block; /* threads / lanes */
} sg__cuda_geometry;

void sg__cuda_geometry_of(const sg__kir_kernel *k, sg__cuda_geometry *g);

/* The program of kernels[0..n): for each kernel K, one
 *
 *   extern "C" __global__ void K(const sgk_args args);
 *
 * reading its inputs at args.in[0..n_in) and writing its outputs at args.out[o]
 * (an output written in place is stored through its input's pointer), and
 * for a kernel with a prologue also
 *
 *   extern "C" __global__ void K_pro(const sgk_args args, float *prm);
 *
 * launched as one thread before K: it runs the prologue on the device (in
 * double, as sg__kir_prologue_run does on the host), writes the run's
 * parameters to prm and K reads them from args.prm -- so a step's scalars
 * (the learning rate, AdamW's step count) never leave the device and a
 * captured CUDA graph replays correctly. sgk_args is the prelude's struct
 * of SG__KIR_MAX_INPUTS input pointers, SG__KIR_MAX_OUTPUTS output pointers
 * and prm. *src is allocated with sg__malloc. Errors: SG_ERR_INVALID_ARG
 * (a kernel not finished), SG_ERR_DUPLICATE (two kernels of one name),
 * SG_ERR_NO_MEMORY. */
sg_status sg__cuda_emit(const sg__kir_kernel *const *kernels, int n, char **src, size_t *len);

/* A hash of the text every program starts with (the prelude and
 * sgk_math.h): part of the compile cache's key. */
uint64_t sg__cuda_emit_prelude_hash(void);

#endif /* SG_CUDA_EMIT_H */
