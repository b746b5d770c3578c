/* The CUDA backend's internals (docs/cuda.md): its state, its kernel
 * struct and the families of kernels (cuBLASLt products, cuDNN
 * convolutions, batch norm and pooling, generated kernels of the IR, the
 * hand-written ones of cuda_ops.c). Only files of src/backend/cuda include
 * this header; they are compiled when the build has the CUDA toolkit. */
#ifndef SG_CUDA_INTERNAL_H
#define SG_CUDA_INTERNAL_H

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_emit.h"
#include "backend/cuda/cuda_kernels.h"
#include "core/core.h"
#include "graph/graph.h"

typedef struct sg__cuda_state sg__cuda_state;

/* A condition a kernel records on the device and synchronize reports (a
 * label or an id out of range): two words of host-mapped memory, the first
 * bad index (~0: none) and its value, read without a copy after the stream
 * drains. */
typedef struct sg__cuda_check {
  unsigned long long *flag;  /* host view */
  unsigned long long *dflag; /* the device's view of the same words */
  char what[96];             /* "cross_entropy 'loss'" */
  int64_t limit;             /* valid values are 0..limit */
  /* How the message names the value and its index, as the CPU kernel's
   * does: "label %lld of row %lld" when NULL (cross entropy), "id %lld at
   * position %lld" (embedding). */
  const char *value_name, *index_name;
  struct sg__cuda_check *next;
} sg__cuda_check;

typedef sg_status (*sg__cuda_run_fn)(sg__cuda_state *st, sg__kernel *k, void *const *in, void *const *out,
                                     const sg__run_ctx *ctx);

struct sg__kernel {
  sg__cuda_run_fn run;
  void (*destroy)(sg__cuda_state *st, sg__kernel *k); /* frees what the family added; NULL: nothing */
  sg_op_kind kind;
  char name[64]; /* the op's name (truncated), for run-time messages */
};

/* One device, its streams and library handles. Work is issued on `compute`
 * in op order; copies between host and device go through the pinned
 * staging buffer on `copy`, after compute has drained (session reads and
 * writes happen between steps). The workspace is one device buffer every
 * library kernel shares (cuDNN plans, cuBLASLt's algorithm): sized while
 * kernels are created, never grown inside a step. */
struct sg__cuda_state {
  int device;
  int cc;         /* compute capability, 10 * major + minor */
  int sm_count;   /* multiprocessors: the grid of generated kernels is capped by it */
  char name[256]; /* "NVIDIA H200" */
  size_t memory;  /* total device memory */
  cudaStream_t compute, copy;
  cudaEvent_t staged[2]; /* the copies out of each half of staging are done */
  cublasLtHandle_t lt;
  cudnnHandle_t dnn;
  void *staging; /* pinned host memory, two halves of SG__CUDA_STAGING / 2 */
  void *workspace;
  size_t workspace_bytes;
  bool tf32;              /* TF32 tensor cores allowed (SG_CUDA_TF32=1; NVIDIA_TF32_OVERRIDE=0 forbids) */
  bool deterministic;     /* only deterministic algorithms (SG_CUDA_DETERMINISTIC=1) */
  bool failed;            /* a sticky error was seen: the context is lost, every call fails */
  char failure[256];      /* what it was */
  char nvrtc[16];         /* NVRTC's version, for the compile cache's key */
  sg__cuda_check *checks; /* of the live kernels, reported by synchronize */
  struct sg__cuda_lib *library; /* sgrt's own kernels (cuda_library.c), found on first use */
  cudaLibrary_t module_lib;     /* the library of the last module built (cuda_module.c) */
};

/* Bytes of pinned staging memory (two halves, double-buffered). */
#define SG__CUDA_STAGING ((size_t)32 << 20)

/* The sg_status of a CUDA runtime error, with `what` and the error's name
 * and text in the message: SG_ERR_NO_MEMORY for allocation failures,
 * SG_ERR_DEVICE for everything else; a sticky error (the context is lost:
 * an illegal address, a failed launch, an ECC error) marks the state
 * failed, so that every later call reports it (SPEC H6: the rank then
 * leaves the job). */
sg_status sg__cuda_error(sg__cuda_state *st, cudaError_t e, const char *what);
#define SG_CUDA(st, call, what)                                 \
  do {                                                          \
    cudaError_t e_ = (call);                                    \
    if (e_ != cudaSuccess) return sg__cuda_error(st, e_, what); \
  } while (0)
sg_status sg__cudnn_error(cudnnStatus_t s, const char *what);
sg_status sg__cublas_error(cublasStatus_t s, const char *what);

/* Allocates a kernel of `size` bytes (>= sizeof(sg__kernel)) for op. */
sg_status sg__cuda_kernel_new(const sg__op *op, size_t size, sg__cuda_run_fn run, sg__kernel **out);
sg_status sg__cuda_unsupported(const sg_graph *g, const sg__op *op, const char *why);
/* Registers c (allocating its mapped words) / unregisters and frees it. */
sg_status sg__cuda_check_add(sg__cuda_state *st, sg__cuda_check *c);
void sg__cuda_check_remove(sg__cuda_state *st, sg__cuda_check *c);
/* The grid of a grid-strided kernel over `units` units, `per_block` to a
 * block: enough blocks to fill the device a few times over (32 per
 * multiprocessor), no more, and at least one. Such kernels are correct on
 * any grid. */
unsigned sg__cuda_grid(const sg__cuda_state *st, int64_t units, int64_t per_block);
/* Makes the shared workspace at least `bytes` (compile time only). */
sg_status sg__cuda_workspace_reserve(sg__cuda_state *st, size_t bytes);
/* The tensor of op input i / output i (NULL for an absent optional input). */
const sg__tensor *sg__cuda_in(const sg_graph *g, const sg__op *op, int i);
const sg__tensor *sg__cuda_out(const sg_graph *g, const sg__op *op, int i);

/* ---- families ---------------------------------------------------------------- */

/* gemm and matmul through cuBLASLt (cuda_gemm.c). */
sg_status sg__cuda_create_gemm(sg__cuda_state *st, const sg_graph *g, const sg__op *op, sg__kernel **out);
/* conv2d and its backward ops through cuDNN's graph API (cuda_conv.c). */
sg_status sg__cuda_create_conv(sg__cuda_state *st, const sg_graph *g, const sg__op *op, sg__kernel **out);
/* The cuDNN operation graph of a convolution op (forward, backward data,
 * backward weight), finalized; handle may be NULL (no GPU: the graph still
 * finalizes, as the tests check here). Its descriptors go to `descs`, a
 * buffer of sg__cuda_conv_descs_size() bytes zeroed by the caller, freed
 * with sg__cuda_conv_descs_free. */
sg_status sg__cuda_conv_graph(const sg_graph *g, const sg__op *op, cudnnHandle_t handle, void *descs,
                              cudnnBackendDescriptor_t *graph);
size_t sg__cuda_conv_descs_size(void);
void sg__cuda_conv_descs_free(void *descs);
/* batch_norm and its backward op, pooling and its gradients through cuDNN
 * (cuda_norm_pool.c). */
sg_status sg__cuda_create_batch_norm(sg__cuda_state *st, const sg_graph *g, const sg__op *op,
                                     sg__exec_mode mode, sg__kernel **out);
sg_status sg__cuda_create_pool(sg__cuda_state *st, const sg_graph *g, const sg__op *op, sg__kernel **out);
/* sgrt's own kernels (cuda_kernels.h's program) for this state
 * (cuda_library.c): from the graph's module, whose program ends with
 * theirs, or compiled on their own. sg__cuda_library_release forgets them
 * when `lib` (a module's library going away) is theirs, or always when lib
 * is NULL. */
typedef struct sg__cuda_lib sg__cuda_lib;
sg_status sg__cuda_library(sg__cuda_state *st, sg__cuda_lib **out);
cudaKernel_t sg__cuda_library_kernel(const sg__cuda_lib *l, sg__cuda_lib_kernel k);
void sg__cuda_library_release(sg__cuda_state *st, cudaLibrary_t lib);
/* cross_entropy and its backward op (cuda_loss.c). */
sg_status sg__cuda_create_cross_entropy(sg__cuda_state *st, const sg_graph *g, const sg__op *op,
                                        sg__kernel **out);
/* dropout and its backward op (cuda_dropout.c); compiled for a mode. */
sg_status sg__cuda_create_dropout(sg__cuda_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                                  sg__kernel **out);
/* softmax, log_softmax, layer_norm and their backward ops (cuda_rows.c). */
sg_status sg__cuda_create_rows(sg__cuda_state *st, const sg_graph *g, const sg__op *op, sg__kernel **out);
/* Views (reshape, flatten, ...): a device copy when the planner gave the
 * output its own slot (cuda_ops.c). */
sg_status sg__cuda_create_view(sg__cuda_state *st, const sg_graph *g, const sg__op *op, sg__kernel **out);
/* embedding and its backward op (cuda_embedding.c). */
sg_status sg__cuda_create_embedding(sg__cuda_state *st, const sg_graph *g, const sg__op *op,
                                    sg__kernel **out);
/* reduce_sum, reduce_mean and sum_to over any axes (cuda_sum.c). */
sg_status sg__cuda_create_sum(sg__cuda_state *st, const sg_graph *g, const sg__op *op, sg__kernel **out);
/* concat and slice: strided 2-D copies on the compute stream (cuda_ops.c). */
sg_status sg__cuda_create_runs(sg__cuda_state *st, const sg_graph *g, const sg__op *op, sg__kernel **out);

/* ---- generated kernels (cuda_module.c) ----------------------------------------- */

sg_status sg__cuda_module_identity(void *state, char *buf, size_t cap);
sg_status sg__cuda_module_build(void *state, const sg__kir_kernel *const *kernels, uint32_t n,
                                const char *artifact, sg__module **out);
const char *sg__cuda_module_artifact(void *state, const sg__module *m);
sg_status sg__cuda_module_kernel(void *state, sg__module *m, const sg__kir_kernel *k, const char *op_name,
                                 sg__kernel **out);
void sg__cuda_module_free(void *state, sg__module *m);

#endif /* SG_CUDA_INTERNAL_H */
