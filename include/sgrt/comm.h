/**
 * @file comm.h
 * Communication: bootstrap from the environment, a rendezvous store, a UCX
 * transport (tagged messages, RMA windows, atomics), the collectives on host
 * memory (and on CUDA device memory through NCCL), heartbeat liveness and
 * hang diagnosis. docs/comm.md describes the protocols and the environment.
 *
 * @code
 *   sg_comm_params cp = SG_COMM_PARAMS_INIT;   // rank, size, master from the environment
 *   sg_comm *c;
 *   if (sg_comm_create(&cp, &c) != SG_OK) { fprintf(stderr, "%s\n", sg_last_error()); return 1; }
 *   float grad[1024];
 *   sg_comm_allreduce(c, grad, grad, 1024, SG_F32, SG_REDUCE_AVG);   // in place
 *   sg_comm_destroy(c);
 * @endcode
 *
 * Threads: a communicator belongs to one thread (sg_dist gives it to its
 * scheduler thread); every call on it must come from that thread unless a
 * function says otherwise. Different communicators may be used from
 * different threads.
 */
#ifndef SGRT_COMM_H
#define SGRT_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "sgrt/export.h"
#include "sgrt/graph.h"
#include "sgrt/status.h"

SG_EXTERN_C_BEGIN

typedef struct sg_comm sg_comm;
typedef struct sg_comm_window sg_comm_window;

/** Reductions of allreduce and reduce-scatter. */
typedef enum sg_reduce_op {
  SG_REDUCE_SUM = 0,
  SG_REDUCE_AVG = 1, /**< sum divided by the world size (integer division for integer dtypes) */
  SG_REDUCE_MAX = 2,
  SG_REDUCE_MIN = 3,
} sg_reduce_op;

/**
 * Parameters of sg_comm_create(). Initialise from SG_COMM_PARAMS_INIT (or
 * sg_comm_params_init()); a program built against an older, shorter version
 * of the struct gets the defaults for the fields it lacks.
 *
 * "Unset" differs by field, because 0 is a valid rank: rank and world_size
 * use -1 for "from the environment", master_port and timeout_ms use 0, and
 * the strings use NULL. Every unset field is looked up in the environment
 * first, then takes the default shown.
 */
typedef struct sg_comm_params {
  size_t size;    /**< sizeof(sg_comm_params) */
  int rank;       /**< -1: from the environment (SG_RANK, RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK) */
  int world_size; /**< -1: from the environment */
  const char *master_addr; /**< NULL: MASTER_ADDR, else 127.0.0.1 (loopback only) */
  int master_port;         /**< 0: MASTER_PORT, else 29500 */
  const char *token;       /**< NULL: SG_JOB_TOKEN, else the empty token */
  int timeout_ms;          /**< every wait's limit; 0: SG_COMM_TIMEOUT_MS, else 60000 */
  /** Generation of this communicator within the job, 0..1e9; 0 (the default) for the first. A program that
   *  creates a communicator again in the same job (after sg_comm_destroy(), or after an sg_dist left) gives
   *  every new one a higher number on every rank: under `sgrt launch` the rendezvous store outlives the
   *  communicators, and the number keeps the new one's keys apart from the earlier ones'. Only generation 0
   *  makes rank 0 host the store. sg_dist's self-healing uses the following numbers for the communicators
   *  it rebuilds after a failure (sg_dist_stats.epoch). */
  int epoch;
} sg_comm_params;

#define SG_COMM_PARAMS_INIT \
  { sizeof(sg_comm_params), -1, -1, NULL, 0, NULL, 0, 0 }
/** SG_COMM_PARAMS_INIT as a function (for bindings). Any thread. */
SG_API sg_comm_params sg_comm_params_init(void);

/**
 * Joins the job: rank 0 serves the rendezvous store on master_addr:port
 * (unless SG_STORE_EXTERNAL=1: then a launcher serves it, see
 * sg_comm_store_serve()), every rank publishes its UCX worker address there,
 * waits for all the others and connects to them. Collective over the job.
 * @param params  NULL is refused; SG_COMM_PARAMS_INIT takes everything from
 *                the environment.
 * @return SG_OK; SG_ERR_INVALID_ARG for a bad parameter or environment, or a
 *         params->size this library does not know (the message names both
 *         sizes);
 *         SG_ERR_TIMEOUT when a rank does not arrive in time; SG_ERR_DENIED when
 *         the store refuses our token, or when the master address is not
 *         loopback and there is no token (sg_comm_check_job_token);
 *         SG_ERR_COMM for transport failures.
 */
SG_API sg_status sg_comm_create(const sg_comm_params *params, sg_comm **out);
/**
 * Leaves the job and frees everything. Accepts NULL. Runs a barrier first (so
 * no peer still needs our endpoints or rank 0's store) unless the
 * communicator failed or was aborted: every rank waits for every other's
 * word that it is leaving; a peer that left right after its word (before
 * ours to it completed) does not fail it. Then it closes without waiting
 * for peers, within about 2 s. Buffers of a call that failed must stay valid until
 * here: UCX may still hold a send of theirs.
 * @return SG_OK, or the barrier's error (resources are freed either way).
 */
SG_API sg_status sg_comm_destroy(sg_comm *comm);

SG_API int sg_comm_rank(const sg_comm *comm);
SG_API int sg_comm_size(const sg_comm *comm);
/** Rank on this node (SG_LOCAL_RANK / LOCAL_RANK / SLURM_LOCALID / OMPI_COMM_WORLD_LOCAL_RANK, else rank). */
SG_API int sg_comm_local_rank(const sg_comm *comm);

/* ---- point to point ------------------------------------------------------ */

/** Sends `bytes` bytes to `peer` under `tag` (0 .. 2^31-1); returns when the buffer may be reused. */
SG_API sg_status sg_comm_send(sg_comm *comm, int peer, uint32_t tag, const void *buf, size_t bytes);
/** Receives exactly `bytes` bytes from `peer` under `tag`; a message of another length is SG_ERR_TRUNCATED.
 */
SG_API sg_status sg_comm_recv(sg_comm *comm, int peer, uint32_t tag, void *buf, size_t bytes);

/* ---- collectives (host memory) ------------------------------------------- */

/** recv[i] = op over ranks of send[i], count elements. send == recv is in place. */
SG_API sg_status sg_comm_allreduce(sg_comm *comm, const void *send, void *recv, size_t count, sg_dtype dtype,
                                   sg_reduce_op op);
/** recv (count * size elements) = every rank's send (count elements) in rank order.
 *  In place when send == recv + rank * count * elem_size. */
SG_API sg_status sg_comm_allgather(sg_comm *comm, const void *send, void *recv, size_t count, sg_dtype dtype);
/** recv (count elements) = op over ranks of send[rank*count .. (rank+1)*count).
 *  In place when recv == send + rank * count * elem_size. */
SG_API sg_status sg_comm_reduce_scatter(sg_comm *comm, const void *send, void *recv, size_t count,
                                        sg_dtype dtype, sg_reduce_op op);
/** Copies root's buf to every rank's buf. */
SG_API sg_status sg_comm_broadcast(sg_comm *comm, void *buf, size_t count, sg_dtype dtype, int root);
/** Returns when every rank has entered it. */
SG_API sg_status sg_comm_barrier(sg_comm *comm);

/* ---- collectives on CUDA device memory (NCCL) ---------------------------- */

/** Nonzero when this library was built with CUDA and NCCL (the sg_comm_nccl_* calls work there). Any thread.
 */
SG_API int sg_comm_nccl_built(void);
/**
 * Sets up NCCL for this job on CUDA device `device` (-1: local rank modulo the
 * number of visible devices) and makes it current for the calling thread.
 * Collective. Rank 0 makes NCCL's unique id and publishes it in the
 * rendezvous store under "nccl/uid"; every rank waits for it (the
 * communicator's timeout) and joins. Waits never block inside NCCL: they
 * keep heartbeats going and fail on a dead peer, an abort or the timeout,
 * aborting the NCCL communicator.
 * @return SG_OK; SG_ERR_UNSUPPORTED in builds without CUDA and NCCL or when
 *         this rank sees no CUDA device (the message says which);
 *         SG_ERR_INVALID_ARG for device < -1 or past the last device;
 *         SG_ERR_STATE when NCCL is already set up; SG_ERR_TIMEOUT,
 *         SG_ERR_COMM, SG_ERR_FORMAT (a malformed id in the store).
 *         Owner thread only.
 */
SG_API sg_status sg_comm_nccl_init(sg_comm *comm, int device);
/**
 * Device-memory collectives with the host collectives' conventions (above):
 * send/recv/buf are device pointers on this rank's device. `stream` is a
 * cudaStream_t: the call is queued on it and returns at once (errors of that
 * work surface on a later call); NULL: queued on the communicator's own stream
 * and waited for, so the call returns when the result is in place. AVG on
 * integer types is NCCL's. sg_comm_destroy() releases NCCL.
 * @return SG_OK; SG_ERR_UNSUPPORTED without CUDA and NCCL; SG_ERR_STATE
 *         before sg_comm_nccl_init() or after NCCL was aborted; argument
 *         errors as the host collectives; SG_ERR_COMM, SG_ERR_TIMEOUT.
 *         Owner thread only.
 */
SG_API sg_status sg_comm_nccl_allreduce(sg_comm *comm, const void *send, void *recv, size_t count,
                                        sg_dtype dtype, sg_reduce_op op, void *stream);
SG_API sg_status sg_comm_nccl_allgather(sg_comm *comm, const void *send, void *recv, size_t count,
                                        sg_dtype dtype, void *stream);
SG_API sg_status sg_comm_nccl_reduce_scatter(sg_comm *comm, const void *send, void *recv, size_t count,
                                             sg_dtype dtype, sg_reduce_op op, void *stream);
SG_API sg_status sg_comm_nccl_broadcast(sg_comm *comm, void *buf, size_t count, sg_dtype dtype, int root,
                                        void *stream);

/* ---- RMA windows and atomics -------------------------------------------- */

/**
 * Registers [base, base+bytes) on every rank and exchanges the remote keys.
 * Collective. base must stay valid until sg_comm_window_destroy().
 */
SG_API sg_status sg_comm_window_create(sg_comm *comm, void *base, size_t bytes, sg_comm_window **out);
/**
 * A window over `bytes` of memory that the transport allocates (*base gets it, page-aligned; its contents
 * are unspecified), freed by sg_comm_window_destroy(). Collective. Prefer it for memory peers write: on
 * one host UCX allocates shared memory, which peers' puts, gets and atomics reach directly (a put is the
 * initiator's copy), whereas a window over the caller's memory is reached there through UCX's software
 * emulation (the target's progress engine copies: about half the bandwidth).
 */
SG_API sg_status sg_comm_window_alloc(sg_comm *comm, size_t bytes, void **base, sg_comm_window **out);
/** Collective: waits for every rank's outstanding operations, then unregisters. Accepts NULL. */
SG_API sg_status sg_comm_window_destroy(sg_comm_window *win);
/** Non-blocking put of `bytes` bytes into peer's window at `offset`; complete after sg_comm_window_flush().
 */
SG_API sg_status sg_comm_put(sg_comm_window *win, int peer, size_t offset, const void *src, size_t bytes);
/** Non-blocking get; `dst` is valid after sg_comm_window_flush(). */
SG_API sg_status sg_comm_get(sg_comm_window *win, int peer, size_t offset, void *dst, size_t bytes);
/** Completes every put and get issued on the window by this rank. */
SG_API sg_status sg_comm_window_flush(sg_comm_window *win);
/** Atomically adds `value` to the u64 at peer's window + offset (8-aligned); *old gets the previous value. */
SG_API sg_status sg_comm_fetch_add(sg_comm_window *win, int peer, size_t offset, uint64_t value,
                                   uint64_t *old);
/** Atomic compare-and-swap of a u64; *old gets the previous value (swapped when it equals `compare`). */
SG_API sg_status sg_comm_compare_swap(sg_comm_window *win, int peer, size_t offset, uint64_t compare,
                                      uint64_t swap, uint64_t *old);

/* ---- active messages (control traffic) ------------------------------------ */

/** Sends a small control message (at most 64 KiB) to peer's queue `id` (0..7). */
SG_API sg_status sg_comm_am_send(sg_comm *comm, int peer, unsigned id, const void *buf, size_t bytes);
/**
 * Takes the oldest control message that arrived on queue `id`, waiting at most
 * timeout_ms (0: just look). *bytes in: capacity of buf; out: length. *peer: sender.
 * @return SG_OK, SG_ERR_TIMEOUT when none arrived, SG_ERR_TRUNCATED when buf is too small
 *         (the message stays queued).
 */
SG_API sg_status sg_comm_am_recv(sg_comm *comm, unsigned id, void *buf, size_t *bytes, int *peer,
                                 int timeout_ms);

/* ---- liveness --------------------------------------------------------------- */

/**
 * Heartbeats: every heartbeat_ms this rank sends a tiny active
 * message to every peer while it is inside any comm call or sg_comm_poll(); a
 * peer not heard from (heartbeat or any other traffic) for dead_ms makes every
 * blocking call that involves it -- and every collective -- fail with
 * SG_ERR_COMM "rank R is unreachable: nothing heard for N ms" naming the peer,
 * instead of waiting for the operation timeout. heartbeat_ms 0 turns it off
 * (the default, because a single-threaded program that computes between comm
 * calls would look dead). dead_ms must exceed heartbeat_ms. Also a UCX
 * endpoint error (peer closed/reset, where UCX reports it) fails fast naming
 * the peer.
 *
 * Silence counts only time this rank spends inside comm calls: a rank that
 * computed for a while does not blame peers whose heartbeats it could not
 * read meanwhile. A peer declared unreachable stays so for this communicator
 * (every later collective fails at once). Local: no communication; every rank
 * should set the same values. sg_comm_am_recv() sends heartbeats but is not
 * failed by a silent peer (it has no particular peer); use sg_comm_poll().
 * Heartbeats use an internal active-message id, never seen on queues 0..7.
 * @return SG_OK; SG_ERR_INVALID_ARG for heartbeat_ms < 0 or dead_ms <=
 *         heartbeat_ms (values above 24 h are refused too); the communicator's
 *         failure when it failed earlier. Owner thread only.
 */
SG_API sg_status sg_comm_set_liveness(sg_comm *comm, int heartbeat_ms, int dead_ms);
/**
 * Progresses communication once without blocking: sends due heartbeats, takes
 * arrived messages. For a scheduler thread's idle loop.
 * @return SG_OK; SG_ERR_COMM naming the peer if a peer is now unreachable (the
 *         communicator stays usable for point-to-point traffic with the
 *         others; collectives fail); SG_ERR_COMM/SG_ERR_STATE when the
 *         communicator failed or was aborted. Owner thread only.
 */
SG_API sg_status sg_comm_poll(sg_comm *comm);
/**
 * Milliseconds since anything was heard from peer (-1 for self or an invalid
 * rank), not counting time this rank spent outside comm calls while liveness
 * is on. Owner thread only.
 */
SG_API int64_t sg_comm_peer_silence_ms(const sg_comm *comm, int peer);
/**
 * Marks the communicator failed: every later call returns SG_ERR_COMM ("the
 * communicator was aborted: <reason>") quickly, and sg_comm_destroy() skips
 * its barrier. Used to abort. Any thread may call it, also while the owner
 * thread is blocked in a call on comm: that call returns SG_ERR_COMM within
 * milliseconds. The first reason is kept. Accepts NULL; not concurrently with
 * sg_comm_destroy().
 */
SG_API void sg_comm_abort(sg_comm *comm, const char *reason);

/**
 * Whether this rank considers `peer` unreachable: 0 no; 1 yes, found by this
 * rank itself (silence, an endpoint failure, a hang, a cut link); 2 yes,
 * because another rank reported it. A program that goes on with point-to-point
 * traffic after a failure uses it to skip the lost peers; the difference
 * between 1 and 2 matters when deciding who is really gone (a rank that is
 * only reported may be alive and cut off from the reporter). -1 for NULL,
 * self or an invalid rank. Sticky, as the failure itself. Owner thread only.
 */
SG_API int sg_comm_peer_unreachable(const sg_comm *comm, int peer);

/* ---- a rendezvous store that outlives the ranks ---------------------------- */

typedef struct sg_comm_store_server sg_comm_store_server;
/**
 * Serves the rendezvous store on addr:port (a background thread), for a
 * launcher: ranks started with SG_STORE_EXTERNAL=1 use it instead of rank 0
 * hosting one, so the store survives the death of any rank (self-healing
 * needs it, docs/resilience.md). token: the job token the ranks must present
 * (NULL or "" = none). port 0 lets the kernel pick a free port (read it
 * with sg_comm_store_server_port()): a launcher that picks a port first and
 * binds it later races every other process on the host for it.
 * @return SG_OK; SG_ERR_INVALID_ARG for NULL addr/out or a port outside
 * 0..65535; SG_ERR_DENIED for an address other than loopback without a token
 * (sg_comm_check_job_token); SG_ERR_COMM when the address cannot be bound.
 */
SG_API sg_status sg_comm_store_serve(const char *addr, int port, const char *token,
                                     sg_comm_store_server **out);
/**
 * SPEC S3: whether a job whose rendezvous store is at `addr` may run with
 * `token`. A store other hosts can reach (an address other than 127.0.0.0/8,
 * ::1 or "localhost") needs a non-empty token, or any process that reaches
 * it could join the job; sg_comm_create and sg_comm_store_serve apply this,
 * and a launcher can ask first.
 * @return SG_OK; SG_ERR_DENIED with a message that says how to set
 *   SG_JOB_TOKEN; SG_ERR_INVALID_ARG for a NULL addr.
 */
SG_API sg_status sg_comm_check_job_token(const char *addr, const char *token);
/** The port the server listens on (the chosen one after port 0); -1 for NULL. */
SG_API int sg_comm_store_server_port(const sg_comm_store_server *server);
/** Stops the server and frees it. Accepts NULL. */
SG_API void sg_comm_store_stop(sg_comm_store_server *server);

/* ---- consistency ----------------------------------------------------------- */

/**
 * Every rank publishes the hash of its boundary shapes and its boundary dtype
 * ids; if any two ranks differ, every rank returns SG_ERR_SHAPE with
 * "Gradient topology mismatch" and the details. Collective.
 */
SG_API sg_status sg_comm_check_consistency(sg_comm *comm, uint64_t boundary_shape_hash,
                                           const uint8_t *dtype_ids, size_t n_dtype_ids);

/* ---- RDMA devices ---------------------------------------------------------- */

/** One RDMA port. Fixed layout: sg_rdma_devices() returns an array of them,
 *  so fields are never added (a later version adds a new function). */
typedef struct sg_rdma_device {
  char name[64];
  char link_layer[16]; /**< "InfiniBand", "Ethernet" or "unknown" */
  int port;
  double speed_gbps; /**< active width x lane speed; 0 when the port is down */
  int active;        /**< port state is ACTIVE */
} sg_rdma_device;

/**
 * Lists the RDMA ports of this machine (one entry per device port). *count = 0
 * and SG_OK when there are none; the caller frees *out with sg_rdma_devices_free().
 */
SG_API sg_status sg_rdma_devices(sg_rdma_device **out, size_t *count);
SG_API void sg_rdma_devices_free(sg_rdma_device *devices);

/* ---- hang diagnosis ------------------------------------------------------- */

/** Most bytes of a position label (sg_comm_label), not counting the NUL. */
#define SG_COMM_LABEL_MAX 96

/**
 * Names what the following collectives are, for hang diagnosis:
 * "step 5: allreduce of gradient bucket 2 of 4". Every collective call on
 * comm (allreduce, allgather, reduce-scatter, broadcast, barrier, window
 * create) advances this rank's position in the collective schedule by one;
 * the collective takes the label current at its start, and heartbeats carry
 * (position, whether the rank is inside that collective, its label) to every
 * peer. The label stays until replaced; NULL or "" clears it. Copied; at most
 * SG_COMM_LABEL_MAX bytes of printable ASCII (0x20..0x7e). Local: no
 * communication.
 * @return SG_OK; SG_ERR_INVALID_ARG for a NULL comm, a label too long or a
 *         byte outside printable ASCII (the message says which, and the
 *         label is left as it was). Owner thread only.
 */
SG_API sg_status sg_comm_label(sg_comm *comm, const char *text);

/**
 * Hang detection (docs/resilience.md "Hang diagnosis"), on top of
 * heartbeats (sg_comm_set_liveness must be on): a rank waiting inside its
 * collective #N looks at the peers that have not entered #N (their
 * heartbeats say so) but still heartbeat. Once it has waited hang_ms in #N
 * with no peer entering any collective meanwhile, those peers are stuck: the
 * collective fails with SG_ERR_COMM and a message naming each stuck rank and
 * its position, and the waiting ranks' ("rank 2 is stuck before collective
 * #42 (step 5: ...): its last position is #41 (step 4: ...), finished; ranks
 * 0-1, 3 are in #42; rank 0 waited 2.0 s there (hang timeout 2000 ms)"). The
 * stuck ranks are then unreachable for this communicator
 * (sg_comm_peer_unreachable() returns 1, found first-hand), the other peers
 * are told (their collectives fail with the same diagnosis), and so is the
 * stuck rank (its next call fails: "rank 2 was given up by its peers: rank 0
 * found it stuck ...").
 *
 * A rank that computes hang_ms longer than every other rank before entering a
 * collective is indistinguishable from a stuck one and is reported as stuck:
 * choose hang_ms well above the spread of the ranks' arrival times (sg_dist's
 * default is max(10 x dead_ms, 10 s); sg_dist also never calls a rank stuck
 * while its program is between sg_dist_step() calls). 0 turns detection off
 * (the default).
 * Local; every rank should set the same value.
 * @return SG_OK; SG_ERR_INVALID_ARG for NULL, hang_ms < 0 or above 24 h;
 *         the communicator's failure when it failed earlier. Owner thread only.
 */
SG_API sg_status sg_comm_set_hang_timeout(sg_comm *comm, int hang_ms);

SG_EXTERN_C_END

#endif /* SGRT_COMM_H */
