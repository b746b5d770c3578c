/* Collectives on host memory over UCX tagged messages (SPEC M3).
 *
 * Large messages use one pipelined ring schedule: allreduce is a
 * reduce-scatter followed by an allgather (2(n-1) steps), reduce-scatter and
 * allgather are its halves. Each chunk moves in segments, and a segment is
 * forwarded to the right neighbour as soon as it has arrived from the left
 * (and been reduced), so the steps overlap. Small allreduces take a latency
 * path: every rank sends its whole vector to every other and reduces locally in
 * rank order (one message round instead of 2(n-1)). Results are bitwise equal
 * on every rank: each chunk is reduced once, in one place, then copied.
 *
 * Memory traffic is what limits a host allreduce, so reduce-scatter segments
 * land in a few staging slots that stay in the CPU's cache (STAGE_SLOTS x
 * SEG_BYTES) instead of a chunk-sized area: the transport's copy writes into
 * cache and the reduction reads from there (docs/performance.md, "Allreduce").
 *
 * Matching: a collective's messages carry tags derived from its sequence
 * number (coll_tag), one tag for its reduce-scatter phase and one for its
 * allgather phase; UCX matches messages from one peer under one tag in the
 * order they were sent, so each phase's receives are posted in send order. */
#include <string.h>

#include "comm/comm_internal.h"

#define SEG_BYTES ((size_t)256 * 1024)
#define STAGE_SLOTS 4
#define LATENCY_BYTES ((size_t)32 * 1024)

static size_t chunk_off(size_t count, int n, int i) {
  size_t q = count / (size_t)n, r = count % (size_t)n;
  return q * (size_t)i + ((size_t)i < r ? (size_t)i : r);
}
static size_t chunk_len(size_t count, int n, int i) {
  return chunk_off(count, n, i + 1) - chunk_off(count, n, i);
}
static int mod(int a, int n) { return ((a % n) + n) % n; }

static size_t n_segs(size_t elems, size_t esize) {
  size_t seg = SEG_BYTES / esize;
  return (elems + seg - 1) / seg;
}

/* Two tags per collective (phases 0 and 1), from its sequence number. Every
 * collective takes its tags here, so no two collectives in flight share one
 * (a broadcast root may run several collectives ahead of the others). */
static uint32_t coll_tag(sg_comm *c) {
  sg__det_coll_enter(c->det); /* our position in the schedule, for hang diagnosis (SPEC H7) */
  return (c->coll_seq++ & 0x7fffffffu) << 1;
}

/* Bytes of staging a ring run needs (see ring.tmp). */
static size_t stage_bytes(void) { return SEG_BYTES * STAGE_SLOTS; }

typedef struct ring {
  sg_comm *comm;
  uint8_t *base; /* the vector: n chunks of `block` elements, or of count/n */
  size_t count;  /* elements in base */
  size_t esize;
  int n_steps, rs_steps, shift;
  sg_dtype dtype;
  sg_reduce_op op;
  uint8_t *tmp; /* STAGE_SLOTS staging slots of SEG_BYTES for reduce-scatter segments */
} ring;

static int recv_chunk(const ring *g, int t) { return mod(g->comm->rank + g->shift - t - 1, g->comm->size); }

/* A reduce-scatter segment, in receive order: element offset into base and
 * length. */
typedef struct seg_ref {
  size_t off, len;
} seg_ref;

/* Runs the schedule. Step t receives chunk recv_chunk(t) from the left (into
 * a staging slot and reduces, for reduce-scatter steps; straight into base
 * otherwise) and forwards it as step t+1's send. */
static sg_status ring_run(ring *g) {
  sg_comm *c = g->comm;
  int n = c->size, left = mod(c->rank - 1, n), right = mod(c->rank + 1, n);
  uint32_t tag = coll_tag(c);
  size_t seg = SEG_BYTES / g->esize;
  size_t n_rs = 0, n_ag = 0;
  for (int t = 0; t < g->n_steps; t++)
    *(t < g->rs_steps ? &n_rs : &n_ag) += n_segs(chunk_len(g->count, n, recv_chunk(g, t)), g->esize);
  size_t total = n_rs + n_ag;
  sg_status st = SG_OK;
  /* Receives (reduce-scatter ones by segment index, then allgather ones),
   * sends, and the reduce-scatter segment table. */
  sg__ucx_req **reqs = sg__calloc(2 * total + 1, sizeof *reqs);
  seg_ref *rs = sg__calloc(n_rs + 1, sizeof *rs);
  if (reqs == NULL || rs == NULL) {
    sg__free(reqs);
    sg__free(rs);
    return sg__error(SG_ERR_NO_MEMORY, "rank %d: collective out of memory", c->rank);
  }
  sg__ucx_req **rreq = reqs, **sreq = reqs + total;
  size_t ns = 0, sdone = 0, posted_rs = 0;

  /* Allgather receives go straight to their place: post them all now (tag
   * phase 1). Reduce-scatter segments go through the staging slots: post as
   * many as there are slots; each reduced segment frees its slot for the
   * segment STAGE_SLOTS later (tag phase 0, in the order the left sends). */
  size_t k = 0, kr = 0;
  for (int t = 0; t < g->n_steps; t++) {
    int ch = recv_chunk(g, t);
    size_t off = chunk_off(g->count, n, ch), len = chunk_len(g->count, n, ch);
    for (size_t s = 0; s < len; s += seg) {
      size_t m = len - s < seg ? len - s : seg;
      if (t < g->rs_steps) {
        rs[kr++] = (seg_ref){off + s, m};
      } else {
        SG_CHECK_GOTO(sg__ucx_irecv(c->ucx, left, SG_TAG_COLL, tag | 1u, g->base + (off + s) * g->esize,
                                    m * g->esize, &rreq[n_rs + k]),
                      st, out);
        k++;
      }
    }
  }
  for (; posted_rs < n_rs && posted_rs < STAGE_SLOTS; posted_rs++)
    SG_CHECK_GOTO(sg__ucx_irecv(c->ucx, left, SG_TAG_COLL, tag,
                                g->tmp + (posted_rs % STAGE_SLOTS) * SEG_BYTES, rs[posted_rs].len * g->esize,
                                &rreq[posted_rs]),
                  st, out);
  /* Step 0 sends our own chunk: phase 0 when it feeds a reduce-scatter. */
  {
    int ch = mod(c->rank + g->shift, n);
    size_t off = chunk_off(g->count, n, ch), len = chunk_len(g->count, n, ch);
    uint32_t t0 = g->rs_steps > 0 ? tag : tag | 1u;
    for (size_t s = 0; s < len; s += seg) {
      size_t m = len - s < seg ? len - s : seg;
      SG_CHECK_GOTO(sg__ucx_isend(c->ucx, right, SG_TAG_COLL, t0, g->base + (off + s) * g->esize,
                                  m * g->esize, &sreq[ns]),
                    st, out);
      ns++;
    }
  }
  size_t krs = 0, kag = 0;
  for (int t = 0; t < g->n_steps; t++) {
    int ch = recv_chunk(g, t);
    size_t off = chunk_off(g->count, n, ch), len = chunk_len(g->count, n, ch);
    /* What this step completes is sent on in the next step's phase. */
    uint32_t next_tag = t + 1 < g->rs_steps ? tag : tag | 1u;
    for (size_t s = 0; s < len; s += seg) {
      size_t m = len - s < seg ? len - s : seg;
      uint8_t *mine = g->base + (off + s) * g->esize;
      if (t < g->rs_steps) {
        SG_CHECK_GOTO(sg__ucx_wait(c->ucx, &rreq[krs], c->deadline), st, out);
        sg__reduce(mine, g->tmp + (krs % STAGE_SLOTS) * SEG_BYTES, m, g->dtype, g->op);
        /* The slot is free again: receive the segment STAGE_SLOTS later. */
        if (posted_rs < n_rs) {
          SG_CHECK_GOTO(sg__ucx_irecv(c->ucx, left, SG_TAG_COLL, tag,
                                      g->tmp + (posted_rs % STAGE_SLOTS) * SEG_BYTES,
                                      rs[posted_rs].len * g->esize, &rreq[posted_rs]),
                        st, out);
          posted_rs++;
        }
        krs++;
      } else {
        SG_CHECK_GOTO(sg__ucx_wait(c->ucx, &rreq[n_rs + kag], c->deadline), st, out);
        kag++;
      }
      if (t + 1 < g->n_steps) {
        SG_CHECK_GOTO(sg__ucx_isend(c->ucx, right, SG_TAG_COLL, next_tag, mine, m * g->esize, &sreq[ns]), st,
                      out);
        ns++;
      }
      /* Retire completed sends (in order; the rest keep moving as we wait). */
      while (sdone < ns && sg__ucx_test(c->ucx, sreq[sdone]))
        SG_CHECK_GOTO(sg__ucx_wait(c->ucx, &sreq[sdone++], c->deadline), st, out);
    }
  }
  for (; sdone < ns; sdone++) SG_CHECK_GOTO(sg__ucx_wait(c->ucx, &sreq[sdone], c->deadline), st, out);
out:
  if (st != SG_OK)
    for (size_t i = 0; i < 2 * total; i++) sg__ucx_abandon(c->ucx, &reqs[i]);
  sg__free(reqs);
  sg__free(rs);
  return st;
}

static sg_status check_args(sg_comm *comm, const void *send, const void *recv, size_t count, sg_dtype dtype,
                            int op, const char *what, size_t *esize) {
  SG_CHECK(sg__comm_begin_all(comm, what));
  *esize = sg__comm_dtype_size(dtype);
  if (*esize == 0)
    return sg__error(SG_ERR_DTYPE, "%s: dtype %d is not one of f32, f16, bf16, i32, i64", what, (int)dtype);
  if (op < SG_REDUCE_SUM || op > SG_REDUCE_MIN)
    return sg__error(SG_ERR_INVALID_ARG, "%s: unknown reduction %d", what, op);
  if (count > 0 && (send == NULL || recv == NULL))
    return sg__error(SG_ERR_INVALID_ARG, "%s: NULL buffer", what);
  size_t bytes;
  if (!sg__mul_size(count, *esize, &bytes) || !sg__mul_size(bytes, (size_t)comm->size, &bytes))
    return sg__error(SG_ERR_RANGE, "%s: %zu elements overflow", what, count);
  return SG_OK;
}

/* Every rank sends its vector to every other and reduces all in rank order. */
static sg_status allreduce_latency(sg_comm *c, void *buf, size_t count, size_t esize, sg_dtype dtype,
                                   sg_reduce_op op) {
  int n = c->size;
  size_t bytes = count * esize;
  uint8_t *all;
  SG_CHECK(sg__comm_scratch(c, bytes * (size_t)n, (void **)&all));
  memcpy(all + bytes * (size_t)c->rank, buf, bytes);
  uint32_t tag = coll_tag(c);
  sg__ucx_req **rq = sg__calloc(2 * (size_t)n, sizeof *rq);
  if (rq == NULL) return sg__error(SG_ERR_NO_MEMORY, "rank %d: collective out of memory", c->rank);
  int k = 0;
  sg_status st = SG_OK;
  for (int i = 1; i < n; i++) {
    int p = mod(c->rank + i, n);
    SG_CHECK_GOTO(sg__ucx_irecv(c->ucx, p, SG_TAG_COLL, tag, all + bytes * (size_t)p, bytes, &rq[k++]), st,
                  out);
  }
  for (int i = 1; i < n; i++) {
    int p = mod(c->rank + i, n);
    SG_CHECK_GOTO(sg__ucx_isend(c->ucx, p, SG_TAG_COLL, tag, all + bytes * (size_t)c->rank, bytes, &rq[k++]),
                  st, out);
  }
  for (int i = 0; i < k; i++) SG_CHECK_GOTO(sg__ucx_wait(c->ucx, &rq[i], c->deadline), st, out);
  memcpy(buf, all, bytes);
  for (int p = 1; p < n; p++) sg__reduce(buf, all + bytes * (size_t)p, count, dtype, op);
  sg__reduce_finish(buf, count, dtype, op, n);
out:
  if (st != SG_OK)
    for (int i = 0; i < k; i++) sg__ucx_abandon(c->ucx, &rq[i]);
  sg__free(rq);
  return st;
}

sg_status sg_comm_allreduce(sg_comm *comm, const void *send, void *recv, size_t count, sg_dtype dtype,
                            sg_reduce_op op) {
  size_t esize;
  SG_CHECK(check_args(comm, send, recv, count, dtype, (int)op, "sg_comm_allreduce", &esize));
  if (count == 0) return SG_OK;
  if (send != recv) memmove(recv, send, count * esize);
  if (comm->size == 1) {
    sg__reduce_finish(recv, count, dtype, op, 1);
    return SG_OK;
  }
  if (count * esize <= LATENCY_BYTES || count < (size_t)comm->size)
    return sg__comm_fail(comm, allreduce_latency(comm, recv, count, esize, dtype, op));
  int n = comm->size;
  ring g = {comm, recv, count, esize, 2 * n - 2, n - 1, 0, dtype, op, NULL};
  SG_CHECK(sg__comm_scratch(comm, stage_bytes(), (void **)&g.tmp));
  SG_CHECK(sg__comm_fail(comm, ring_run(&g)));
  sg__reduce_finish(recv, count, dtype, op, n);
  return SG_OK;
}

sg_status sg_comm_reduce_scatter(sg_comm *comm, const void *send, void *recv, size_t count, sg_dtype dtype,
                                 sg_reduce_op op) {
  size_t esize;
  SG_CHECK(check_args(comm, send, recv, count, dtype, (int)op, "sg_comm_reduce_scatter", &esize));
  if (count == 0) return SG_OK;
  int n = comm->size;
  size_t block = count * esize, total = block * (size_t)n;
  const uint8_t *mine = (const uint8_t *)send + block * (size_t)comm->rank;
  if (n == 1) {
    memmove(recv, mine, block);
    sg__reduce_finish(recv, count, dtype, op, 1);
    return SG_OK;
  }
  /* Work on a copy: send is const and recv holds one block. Chunks are the
   * blocks, shifted so that rank r ends with block r. */
  uint8_t *work;
  SG_CHECK(sg__comm_scratch(comm, total + stage_bytes(), (void **)&work));
  memcpy(work, send, total);
  ring g = {comm, work, count * (size_t)n, esize, n - 1, n - 1, -1, dtype, op, work + total};
  SG_CHECK(sg__comm_fail(comm, ring_run(&g)));
  memcpy(recv, work + block * (size_t)comm->rank, block);
  sg__reduce_finish(recv, count, dtype, op, n);
  return SG_OK;
}

sg_status sg_comm_allgather(sg_comm *comm, const void *send, void *recv, size_t count, sg_dtype dtype) {
  size_t esize;
  SG_CHECK(check_args(comm, send, recv, count, dtype, 0, "sg_comm_allgather", &esize));
  if (count == 0) return SG_OK;
  int n = comm->size;
  size_t block = count * esize;
  uint8_t *mine = (uint8_t *)recv + block * (size_t)comm->rank;
  if (send != mine) memmove(mine, send, block);
  if (n == 1) return SG_OK;
  ring g = {comm, recv, count * (size_t)n, esize, n - 1, 0, 0, dtype, SG_REDUCE_SUM, NULL};
  return sg__comm_fail(comm, ring_run(&g));
}

sg_status sg_comm_broadcast(sg_comm *comm, void *buf, size_t count, sg_dtype dtype, int root) {
  size_t esize;
  SG_CHECK(check_args(comm, buf, buf, count, dtype, 0, "sg_comm_broadcast", &esize));
  if (root < 0 || root >= comm->size)
    return sg__error(SG_ERR_INVALID_ARG, "sg_comm_broadcast: root %d is not a rank of %d", root, comm->size);
  if (count == 0 || comm->size == 1) return SG_OK;
  /* A pipelined chain root -> root+1 -> ...: each segment is forwarded as soon
   * as it arrives, so the time is about one transfer, not n-1. */
  int n = comm->size, me = mod(comm->rank - root, n);
  int prev = mod(comm->rank - 1, n), next = mod(comm->rank + 1, n);
  uint32_t tag = coll_tag(comm);
  size_t seg = SEG_BYTES / esize, nseg = n_segs(count, esize);
  sg__ucx_req **reqs = sg__calloc(2 * nseg, sizeof *reqs);
  if (reqs == NULL) return sg__error(SG_ERR_NO_MEMORY, "rank %d: broadcast out of memory", comm->rank);
  sg_status st = SG_OK;
  uint8_t *b = buf;
  if (me != 0)
    for (size_t i = 0; i < nseg; i++) {
      size_t s = i * seg, m = count - s < seg ? count - s : seg;
      SG_CHECK_GOTO(sg__ucx_irecv(comm->ucx, prev, SG_TAG_COLL, tag, b + s * esize, m * esize, &reqs[i]), st,
                    out);
    }
  for (size_t i = 0; i < nseg; i++) {
    size_t s = i * seg, m = count - s < seg ? count - s : seg;
    if (me != 0) SG_CHECK_GOTO(sg__ucx_wait(comm->ucx, &reqs[i], comm->deadline), st, out);
    if (me != n - 1)
      SG_CHECK_GOTO(
          sg__ucx_isend(comm->ucx, next, SG_TAG_COLL, tag, b + s * esize, m * esize, &reqs[nseg + i]), st,
          out);
  }
  for (size_t i = 0; i < nseg; i++)
    SG_CHECK_GOTO(sg__ucx_wait(comm->ucx, &reqs[nseg + i], comm->deadline), st, out);
out:
  if (st != SG_OK)
    for (size_t i = 0; i < 2 * nseg; i++) sg__ucx_abandon(comm->ucx, &reqs[i]);
  sg__free(reqs);
  return sg__comm_fail(comm, st);
}

/* sg_comm_destroy's barrier: every rank tells every other that it is done and waits to hear the same
 * from each (comm_internal.h). A peer whose word arrived has finished all its work with us and may close
 * its endpoints at once, even before UCX has completed our own word to it; so each wait looks at its own
 * peer only (a collective fails on the loss of any peer), and once every peer's word is in, the failure
 * of a send to a peer that has left is not a failure of the job. */
sg_status sg__comm_leave_barrier(sg_comm *comm) {
  SG_CHECK(sg__comm_begin(comm, "leaving the job"));
  const int n = comm->size;
  if (n == 1) return SG_OK;
  uint8_t *words;
  SG_CHECK(sg__comm_scratch(comm, (size_t)n, (void **)&words));
  words[comm->rank] = 1;
  const uint32_t tag = coll_tag(comm);
  /* recv[k] from and send[k] to peer rank + 1 + k. */
  sg__ucx_req **recv = sg__calloc(2 * (size_t)(n - 1), sizeof *recv), **send = recv + (n - 1);
  if (recv == NULL) return sg__error(SG_ERR_NO_MEMORY, "rank %d: leaving the job: out of memory", comm->rank);
  sg_status st = SG_OK;
  for (int k = 0; k < n - 1 && st == SG_OK; k++) {
    int p = mod(comm->rank + 1 + k, n);
    st = sg__ucx_irecv(comm->ucx, p, SG_TAG_COLL, tag, words + p, 1, &recv[k]);
  }
  for (int k = 0; k < n - 1 && st == SG_OK; k++) {
    int p = mod(comm->rank + 1 + k, n);
    st = sg__ucx_isend(comm->ucx, p, SG_TAG_COLL, tag, words + comm->rank, 1, &send[k]);
  }
  for (int k = 0; k < n - 1 && st == SG_OK; k++) st = sg__ucx_wait(comm->ucx, &recv[k], comm->deadline);
  /* Every peer's word is in: a send that fails now went to a peer that left after its own word. */
  for (int k = 0; k < n - 1 && st == SG_OK; k++)
    if (sg__ucx_wait(comm->ucx, &send[k], comm->deadline) != SG_OK) sg_clear_error();
  for (int k = 0; k < 2 * (n - 1); k++)
    sg__ucx_abandon(comm->ucx, &recv[k]); /* what is left, after a failure */
  sg__free(recv);
  return sg__comm_fail(comm, st);
}

sg_status sg_comm_barrier(sg_comm *comm) {
  SG_CHECK(sg__comm_begin_all(comm, "sg_comm_barrier"));
  if (comm->size == 1) return SG_OK;
  int32_t one = 1;
  return sg__comm_fail(comm, allreduce_latency(comm, &one, 1, 4, SG_I32, SG_REDUCE_SUM));
}
