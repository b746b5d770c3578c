/* How the pipeline and tensor-parallel runners (pp_run.c, tp_run.c) move
 * bytes: through a transport their owner gives them. Inside sg_dist every
 * transfer runs on the scheduler thread, which owns the communicator
 * (DESIGN.md "How a step flows", SPEC H1), so the compute thread never calls
 * UCX; tests may drive a runner straight over an sg_comm with
 * sg__xfer_direct(). The calls block the caller until they are done, as the
 * sg_comm functions they stand for do. Internal. */
#ifndef SG_DIST_XFER_H
#define SG_DIST_XFER_H

#include <stddef.h>
#include <stdint.h>

#include "sgrt/comm.h"

typedef struct sg__xfer {
  void *ctx;
  int rank, size; /* this rank and the ranks of the communicator behind it */
  /* As sg_comm_send / sg_comm_recv. */
  sg_status (*send)(void *ctx, int peer, uint32_t tag, const void *buf, size_t bytes);
  sg_status (*recv)(void *ctx, int peer, uint32_t tag, void *buf, size_t bytes);
  /* In-place allreduce over every rank (as sg_comm_allreduce with send == recv). */
  sg_status (*allreduce)(void *ctx, void *buf, size_t count, sg_dtype dtype, sg_reduce_op op);
  /* As sg_comm_allgather. */
  sg_status (*allgather)(void *ctx, const void *send, void *recv, size_t count, sg_dtype dtype);
} sg__xfer;

/* A transport that calls `comm` directly on the caller's thread. */
void sg__xfer_direct(sg_comm *comm, sg__xfer *out);

#endif /* SG_DIST_XFER_H */
