/* The direct transport (xfer.h): each call is the sg_comm function itself. */
#include "parallel/xfer.h"

static sg_status direct_send(void *ctx, int peer, uint32_t tag, const void *buf, size_t bytes) {
  return sg_comm_send(ctx, peer, tag, buf, bytes);
}

static sg_status direct_recv(void *ctx, int peer, uint32_t tag, void *buf, size_t bytes) {
  return sg_comm_recv(ctx, peer, tag, buf, bytes);
}

static sg_status direct_allreduce(void *ctx, void *buf, size_t count, sg_dtype dtype, sg_reduce_op op) {
  return sg_comm_allreduce(ctx, buf, buf, count, dtype, op);
}

static sg_status direct_allgather(void *ctx, const void *send, void *recv, size_t count, sg_dtype dtype) {
  return sg_comm_allgather(ctx, send, recv, count, dtype);
}

void sg__xfer_direct(sg_comm *comm, sg__xfer *out) {
  *out = (sg__xfer){comm,        sg_comm_rank(comm), sg_comm_size(comm), direct_send,
                    direct_recv, direct_allreduce,   direct_allgather};
}
