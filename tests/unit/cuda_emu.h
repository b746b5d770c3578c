/* CUDA programs run on the host, for tests without a GPU: the program is
 * compiled as C++ by the host compiler behind a shim that runs a launch as
 * CUDA would -- blocks one after another, the threads of a block as POSIX
 * threads meeting at __syncthreads through a barrier, __shared__ variables
 * one per block (blocks never overlap) -- and loaded with dlopen. Used by
 * test_cuda_emit (generated kernels) and test_cuda_kernels (sgrt's own). */
#ifndef SG_TEST_CUDA_EMU_H
#define SG_TEST_CUDA_EMU_H

/* Compiles shim + src + tail (tail: host code after the program, such as
 * extern "C" wrappers that launch its kernels with cuda_emu_launch, below)
 * into a shared object and loads it; fails the test when it does not
 * compile (the source is kept and named). SG_CXX overrides "c++". */
void *cuda_emu_load(const char *src, const char *tail);
/* The address of `name` in a loaded program; fails the test when missing. */
void *cuda_emu_symbol(void *dl, const char *name);

/* In the program's C++ (the shim defines it):
 *   int cuda_emu_launch(std::function<void()> body, unsigned grid, unsigned block)
 * runs body as `grid` blocks of `block` threads (at most 1024), with
 * blockIdx, threadIdx, blockDim and gridDim set; 0 on success. */

#endif /* SG_TEST_CUDA_EMU_H */
