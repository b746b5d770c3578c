/* Collectives on CUDA device memory through NCCL (SPEC M3, DESIGN.md: "UCX
 * ring | NCCL"). Compiled with NCCL when CMake found the CUDA toolkit and NCCL
 * (SG_HAVE_CUDA; src/comm/nccl.cmake defines SG_HAVE_NCCL for this file); in
 * other builds every entry point checks its communicator and returns
 * SG_ERR_UNSUPPORTED saying so. This is the only file that includes NCCL and
 * CUDA headers, and the only place their codes become sg_status values.
 *
 * Bootstrap: rank 0 makes the unique id and publishes it in the rendezvous
 * store under "nccl/uid" (only token holders can read it, SPEC S3); every
 * rank initialises with it. The NCCL communicator is non-blocking, so no call
 * here ever blocks inside NCCL: waits poll NCCL's state, the stream, the
 * communicator's deadline and the peers' liveness (sending our heartbeats),
 * and abort the NCCL communicator when one of those fails, as NCCL's own
 * documentation recommends for fault handling. */
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "comm/comm_internal.h"

#define NCCL_UID_KEY "nccl/uid"

static sg_status check_comm(sg_comm *comm, const char *what) { return sg__comm_begin_all(comm, what); }

/* dtype and reduction checks shared by both builds: arguments are refused the
 * same way whether or not NCCL is there. */
static sg_status check_coll(sg_comm *comm, const void *send, const void *recv, size_t count, sg_dtype dtype,
                            int op, const char *what) {
  SG_CHECK(check_comm(comm, what));
  if (sg__comm_dtype_size(dtype) == 0)
    return sg__error(SG_ERR_DTYPE, "%s: dtype %d is not one of f32, f16, bf16, i32, i64", what, (int)dtype);
  if (op < SG_REDUCE_SUM || op > SG_REDUCE_MIN)
    return sg__error(SG_ERR_INVALID_ARG, "%s: unknown reduction %d", what, op);
  if (count > 0 && (send == NULL || recv == NULL))
    return sg__error(SG_ERR_INVALID_ARG, "%s: NULL buffer", what);
  return SG_OK;
}

#ifndef SG_HAVE_NCCL

static sg_status unsupported(const char *what) {
  return sg__error(
      SG_ERR_UNSUPPORTED,
      "%s: this sgrt was built without NCCL support (it needs the CUDA toolkit and NCCL at configure "
      "time, e.g. under /usr/local/cuda; see docs/comm.md)",
      what);
}

int sg_comm_nccl_built(void) { return 0; }

sg_status sg_comm_nccl_init(sg_comm *comm, int device) {
  SG_CHECK(check_comm(comm, "sg_comm_nccl_init"));
  if (device < -1)
    return sg__error(SG_ERR_INVALID_ARG, "sg_comm_nccl_init: device %d (-1: by local rank)", device);
  return unsupported("sg_comm_nccl_init");
}

sg_status sg_comm_nccl_allreduce(sg_comm *comm, const void *send, void *recv, size_t count, sg_dtype dtype,
                                 sg_reduce_op op, void *stream) {
  (void)stream;
  SG_CHECK(check_coll(comm, send, recv, count, dtype, (int)op, "sg_comm_nccl_allreduce"));
  return unsupported("sg_comm_nccl_allreduce");
}

sg_status sg_comm_nccl_allgather(sg_comm *comm, const void *send, void *recv, size_t count, sg_dtype dtype,
                                 void *stream) {
  (void)stream;
  SG_CHECK(check_coll(comm, send, recv, count, dtype, SG_REDUCE_SUM, "sg_comm_nccl_allgather"));
  return unsupported("sg_comm_nccl_allgather");
}

sg_status sg_comm_nccl_reduce_scatter(sg_comm *comm, const void *send, void *recv, size_t count,
                                      sg_dtype dtype, sg_reduce_op op, void *stream) {
  (void)stream;
  SG_CHECK(check_coll(comm, send, recv, count, dtype, (int)op, "sg_comm_nccl_reduce_scatter"));
  return unsupported("sg_comm_nccl_reduce_scatter");
}

sg_status sg_comm_nccl_broadcast(sg_comm *comm, void *buf, size_t count, sg_dtype dtype, int root,
                                 void *stream) {
  (void)stream;
  SG_CHECK(check_coll(comm, buf, buf, count, dtype, SG_REDUCE_SUM, "sg_comm_nccl_broadcast"));
  if (root < 0 || root >= comm->size)
    return sg__error(SG_ERR_INVALID_ARG, "sg_comm_nccl_broadcast: root %d is not a rank of %d", root,
                     comm->size);
  return unsupported("sg_comm_nccl_broadcast");
}

void sg__nccl_destroy(sg_comm *comm) { (void)comm; }

#else /* SG_HAVE_NCCL */

#include <cuda_runtime.h>
#include <nccl.h>

struct sg__nccl {
  ncclComm_t comm;
  cudaStream_t stream; /* ours, for calls without a stream: they wait for it */
  int device;
  int broken; /* aborted after a failure: destroy must not wait for it */
};

/* The one place NCCL and CUDA codes are translated. */
static sg_status nccl_error(sg_comm *comm, ncclResult_t r, const char *what) {
  const char *last = ncclGetLastError(NULL); /* its argument is unused */
  sg_status st = r == ncclInvalidArgument || r == ncclInvalidUsage ? SG_ERR_INVALID_ARG
                 : r == ncclSystemError || r == ncclRemoteError    ? SG_ERR_COMM
                                                                   : SG_ERR_INTERNAL;
  if (r == ncclUnhandledCudaError) st = SG_ERR_COMM;
  return sg__error(st, "NCCL %s failed on rank %d: %s%s%s", what, comm->rank, ncclGetErrorString(r),
                   last && *last ? ": " : "", last ? last : "");
}

static sg_status cuda_error(sg_comm *comm, cudaError_t e, const char *what) {
  sg_status st = e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorInvalidDevice
                     ? SG_ERR_UNSUPPORTED
                 : e == cudaErrorMemoryAllocation ? SG_ERR_NO_MEMORY
                                                  : SG_ERR_COMM;
  return sg__error(st, "CUDA %s failed on rank %d: %s (%s)", what, comm->rank, cudaGetErrorString(e),
                   cudaGetErrorName(e));
}

int sg_comm_nccl_built(void) { return 1; }

/* Marks the NCCL communicator unusable and tears its kernels down, so that a
 * failed collective cannot hang the process later (NCCL fault handling). */
static void nccl_abort(sg_comm *comm) {
  if (comm->nccl && !comm->nccl->broken) {
    ncclCommAbort(comm->nccl->comm);
    comm->nccl->broken = 1;
  }
}

/* Waits until NCCL is no longer "in progress" (non-blocking communicator) and,
 * when `stream` is given, until the stream has run what was queued. Meanwhile
 * sends heartbeats and checks liveness, the abort flag and the deadline. */
static sg_status nccl_wait(sg_comm *comm, cudaStream_t stream, const char *what) {
  unsigned idle = 0;
  for (;;) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(comm->nccl->comm, &state);
    if (r != ncclSuccess) return nccl_error(comm, r, what);
    if (state != ncclSuccess && state != ncclInProgress) {
      sg_status st = nccl_error(comm, state, what);
      nccl_abort(comm);
      return st;
    }
    if (state == ncclSuccess) {
      if (stream == NULL) return SG_OK;
      cudaError_t e = cudaStreamQuery(stream);
      if (e == cudaSuccess) return SG_OK;
      if (e != cudaErrorNotReady) {
        sg_status st = cuda_error(comm, e, what);
        nccl_abort(comm);
        return st;
      }
    }
    sg_status st = sg__ucx_poll(comm->ucx, -1);
    if (st == SG_OK && sg__now_ms() > comm->deadline)
      st = sg__error(SG_ERR_TIMEOUT, "timed out after %d ms in NCCL %s (rank %d)", comm->env.timeout_ms, what,
                     comm->rank);
    if (st != SG_OK) {
      nccl_abort(comm);
      return st;
    }
    if (++idle > 64) sched_yield();
  }
}

sg_status sg_comm_nccl_init(sg_comm *comm, int device) {
  SG_CHECK(check_comm(comm, "sg_comm_nccl_init"));
  if (device < -1)
    return sg__error(SG_ERR_INVALID_ARG, "sg_comm_nccl_init: device %d (-1: by local rank)", device);
  if (comm->nccl) return sg__error(SG_ERR_STATE, "sg_comm_nccl_init: rank %d already has NCCL", comm->rank);
  int n_dev = 0;
  cudaError_t e = cudaGetDeviceCount(&n_dev);
  if (e != cudaSuccess) return cuda_error(comm, e, "device count (is there a GPU?)");
  if (n_dev == 0)
    return sg__error(SG_ERR_UNSUPPORTED, "sg_comm_nccl_init: rank %d sees no CUDA device", comm->rank);
  if (device >= n_dev)
    return sg__error(SG_ERR_INVALID_ARG, "sg_comm_nccl_init: device %d, but rank %d sees %d", device,
                     comm->rank, n_dev);
  if (device < 0) device = comm->env.local_rank % n_dev;
  e = cudaSetDevice(device);
  if (e != cudaSuccess) return cuda_error(comm, e, "set device");

  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  if (comm->rank == 0) {
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) return sg__comm_fail(comm, nccl_error(comm, r, "unique id"));
  }
  /* Every rank must get here, even when rank 0 failed above: it then fails
   * the exchange by timeout; nobody blocks beyond the deadline. */
  SG_CHECK(sg__comm_fail(comm, sg__comm_store_bcast(comm, NCCL_UID_KEY, &id, sizeof id)));

  struct sg__nccl *nc = sg__calloc(1, sizeof *nc);
  if (nc == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_comm_nccl_init: out of memory");
  nc->device = device;
  e = cudaStreamCreateWithFlags(&nc->stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    sg__free(nc);
    return cuda_error(comm, e, "stream create");
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0; /* never block inside NCCL: nccl_wait watches peers and the deadline */
  ncclResult_t r = ncclCommInitRankConfig(&nc->comm, comm->size, id, comm->rank, &config);
  comm->nccl = nc;
  if (r != ncclSuccess && r != ncclInProgress) {
    sg_status st = nccl_error(comm, r, "communicator init");
    cudaStreamDestroy(nc->stream);
    sg__free(nc);
    comm->nccl = NULL;
    return sg__comm_fail(comm, st);
  }
  sg_status st = nccl_wait(comm, NULL, "communicator init");
  if (st != SG_OK) return sg__comm_fail(comm, st);
  SG_DEBUG("comm: rank %d has NCCL on device %d", comm->rank, device);
  return SG_OK;
}

void sg__nccl_destroy(sg_comm *comm) {
  struct sg__nccl *nc = comm->nccl;
  if (nc == NULL) return;
  /* A healthy communicator is destroyed after the barrier of sg_comm_destroy;
   * a failed or aborted one is aborted, which does not wait for peers. */
  if (nc->broken || comm->failed != SG_OK || sg__comm_aborted(comm)) {
    if (!nc->broken) ncclCommAbort(nc->comm);
  } else {
    ncclCommFinalize(nc->comm);
    comm->deadline = sg__now_ms() + comm->env.timeout_ms;
    if (nccl_wait(comm, NULL, "communicator finalize") != SG_OK) {
      if (!nc->broken) ncclCommAbort(nc->comm);
    } else {
      ncclCommDestroy(nc->comm);
    }
  }
  cudaStreamDestroy(nc->stream);
  sg__free(nc);
  comm->nccl = NULL;
}

static sg_status nccl_types(sg_comm *comm, sg_dtype dtype, sg_reduce_op op, ncclDataType_t *t, ncclRedOp_t *o,
                            const char *what) {
  switch (dtype) {
    case SG_F32: *t = ncclFloat32; break;
    case SG_F16: *t = ncclFloat16; break;
    case SG_BF16: *t = ncclBfloat16; break;
    case SG_I32: *t = ncclInt32; break;
    case SG_I64: *t = ncclInt64; break;
    default:
      return sg__error(SG_ERR_DTYPE, "%s: dtype %d not supported (rank %d)", what, (int)dtype, comm->rank);
  }
  switch (op) {
    case SG_REDUCE_SUM: *o = ncclSum; break;
    case SG_REDUCE_AVG: *o = ncclAvg; break;
    case SG_REDUCE_MAX: *o = ncclMax; break;
    default: *o = ncclMin; break;
  }
  return SG_OK;
}

static sg_status ready(sg_comm *comm, const char *what) {
  if (comm->nccl == NULL)
    return sg__error(SG_ERR_STATE, "%s: call sg_comm_nccl_init first (rank %d)", what, comm->rank);
  if (comm->nccl->broken)
    return sg__error(SG_ERR_STATE, "%s: NCCL was aborted after an earlier failure on rank %d", what,
                     comm->rank);
  /* Errors of asynchronous work are reported by the next call (DESIGN.md). */
  ncclResult_t state = ncclSuccess;
  ncclResult_t r = ncclCommGetAsyncError(comm->nccl->comm, &state);
  if (r != ncclSuccess) return nccl_error(comm, r, what);
  if (state != ncclSuccess && state != ncclInProgress) {
    sg_status st = nccl_error(comm, state, what);
    nccl_abort(comm);
    return sg__comm_fail(comm, st);
  }
  return SG_OK;
}

/* What every collective checks once its arguments are: NCCL is ready, and
 * the NCCL dtype and reduction of `dtype` and `op`. */
static sg_status prepare(sg_comm *comm, sg_dtype dtype, sg_reduce_op op, ncclDataType_t *t, ncclRedOp_t *o,
                         const char *what) {
  *t = ncclFloat32; /* set by nccl_types; initialised for gcc -O3 */
  *o = ncclSum;
  SG_CHECK(ready(comm, what));
  return nccl_types(comm, dtype, op, t, o, what);
}

/* After a call was queued: settle NCCL's non-blocking state; without a
 * caller's stream, also wait for our stream (the call is then synchronous). */
static sg_status finish(sg_comm *comm, ncclResult_t r, void *stream, const char *what) {
  if (r != ncclSuccess && r != ncclInProgress) {
    sg_status st = nccl_error(comm, r, what);
    if (st != SG_ERR_INVALID_ARG) nccl_abort(comm);
    return sg__comm_fail(comm, st);
  }
  return sg__comm_fail(comm, nccl_wait(comm, stream ? NULL : comm->nccl->stream, what));
}

static cudaStream_t stream_of(sg_comm *comm, void *stream) {
  return stream ? (cudaStream_t)stream : comm->nccl->stream;
}

sg_status sg_comm_nccl_allreduce(sg_comm *comm, const void *send, void *recv, size_t count, sg_dtype dtype,
                                 sg_reduce_op op, void *stream) {
  const char *what = "sg_comm_nccl_allreduce";
  SG_CHECK(check_coll(comm, send, recv, count, dtype, (int)op, what));
  ncclDataType_t t;
  ncclRedOp_t o;
  SG_CHECK(prepare(comm, dtype, op, &t, &o, what));
  if (count == 0) return SG_OK;
  return finish(comm, ncclAllReduce(send, recv, count, t, o, comm->nccl->comm, stream_of(comm, stream)),
                stream, what);
}

sg_status sg_comm_nccl_allgather(sg_comm *comm, const void *send, void *recv, size_t count, sg_dtype dtype,
                                 void *stream) {
  const char *what = "sg_comm_nccl_allgather";
  SG_CHECK(check_coll(comm, send, recv, count, dtype, SG_REDUCE_SUM, what));
  ncclDataType_t t;
  ncclRedOp_t o;
  SG_CHECK(prepare(comm, dtype, SG_REDUCE_SUM, &t, &o, what));
  if (count == 0) return SG_OK;
  return finish(comm, ncclAllGather(send, recv, count, t, comm->nccl->comm, stream_of(comm, stream)), stream,
                what);
}

sg_status sg_comm_nccl_reduce_scatter(sg_comm *comm, const void *send, void *recv, size_t count,
                                      sg_dtype dtype, sg_reduce_op op, void *stream) {
  const char *what = "sg_comm_nccl_reduce_scatter";
  SG_CHECK(check_coll(comm, send, recv, count, dtype, (int)op, what));
  ncclDataType_t t;
  ncclRedOp_t o;
  SG_CHECK(prepare(comm, dtype, op, &t, &o, what));
  if (count == 0) return SG_OK;
  return finish(comm, ncclReduceScatter(send, recv, count, t, o, comm->nccl->comm, stream_of(comm, stream)),
                stream, what);
}

sg_status sg_comm_nccl_broadcast(sg_comm *comm, void *buf, size_t count, sg_dtype dtype, int root,
                                 void *stream) {
  const char *what = "sg_comm_nccl_broadcast";
  SG_CHECK(check_coll(comm, buf, buf, count, dtype, SG_REDUCE_SUM, what));
  if (root < 0 || root >= comm->size)
    return sg__error(SG_ERR_INVALID_ARG, "%s: root %d is not a rank of %d", what, root, comm->size);
  ncclDataType_t t;
  ncclRedOp_t o;
  SG_CHECK(prepare(comm, dtype, SG_REDUCE_SUM, &t, &o, what));
  if (count == 0) return SG_OK;
  return finish(comm, ncclBroadcast(buf, buf, count, t, root, comm->nccl->comm, stream_of(comm, stream)),
                stream, what);
}

#endif /* SG_HAVE_NCCL */
