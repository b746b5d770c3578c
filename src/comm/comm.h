/* The communication layer's interface to the layers above it (parallel,
 * health): the bootstrap environment, communicators over a group of ranks
 * and watched creation, point-to-point that watches every rank, the
 * rendezvous store's client, and the reduction kernels. The public API is
 * sgrt/comm.h; the transport and the communicator's insides stay in
 * comm/comm_internal.h. No UCX type appears here. */
#ifndef SG_COMM_COMM_H
#define SG_COMM_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sgrt/comm.h"

/* ---- bootstrap environment (env.c) ---------------------------------------- */

typedef struct sg__comm_env {
  int rank, world_size, local_rank;
  char master_addr[256];
  int master_port;
  char token[256];
  int timeout_ms;
  const char *source; /* which variables gave rank and size: "SG", "torchrun", "slurm", "openmpi", "params" */
} sg__comm_env;

/* Resolves rank, size, master and token from params, then the environment
 * (SPEC M1). Validates every value read. */
sg_status sg__comm_env_resolve(const sg_comm_params *params, sg__comm_env *env);

/* ---- communicators --------------------------------------------------------- */

/* The versions of sg_comm_params (core/core.h's sg__params_read): the first
 * one ended with `rank`. */
#define SG__COMM_PARAMS_VERSIONS SG__VERSIONED(sg_comm_params, rank, "SG_COMM_PARAMS_INIT")

/* Membership epochs (sg_comm_params.epoch). A communicator rebuilt by the
 * survivors of a failure (src/parallel's recovery and rejoin) is created at
 * a fresh epoch, so that its keys in the rendezvous store ("e<N>/...") never
 * meet those of an earlier membership. Epoch 0 uses the plain keys, and only
 * at epoch 0 does rank 0 host the store (unless SG_STORE_EXTERNAL=1: `sgrt
 * launch` hosts it, so it outlives any rank). */

/* A communicator over some of the job's ranks (the replicas of one pipeline
 * stage, say). params->rank and params->world_size are this rank's place in
 * the group and the group's size (both explicit); master, token, timeout and
 * epoch as for sg_comm_create. `group` names it: the same string on every
 * member, unique within the job and epoch, [A-Za-z0-9._-], at most
 * SG__COMM_GROUP_NAME_MAX bytes; its store keys live under "e<epoch>/g/<group>/".
 * It joins through the job's store (served by the launcher, or by world rank
 * 0's communicator, which must exist first) and never serves one. Destroy
 * with sg_comm_destroy. */
#define SG__COMM_GROUP_NAME_MAX 64
sg_status sg__comm_create_group(const sg_comm_params *params, const char *group, sg_comm **out);

/* Asked between the looks of a communicator's creation for peers (peer: the
 * rank waited for, -1 for any); a status other than SG_OK ends the creation
 * with it (a recovery's member found dead meanwhile, src/parallel). */
typedef sg_status (*sg__comm_watch_fn)(void *ctx, int peer);
/* sg_comm_create, with `watch` asked while it waits for the peers. */
sg_status sg__comm_create_watched(const sg_comm_params *params, sg__comm_watch_fn watch, void *ctx,
                                  sg_comm **out);

/* ---- liveness and hang diagnosis for the parallel runtime (liveness.c, comm.c) ----
 * What src/parallel's scheduler, recovery and fault injection need beyond the
 * public liveness API; tests reach them through this header. */

/* Says whether this rank's program is away from the work that leads to the
 * next collective (1) or on it (0, the default). Heartbeats carry it, and the
 * hang check never calls an away peer stuck: sg_dist marks a rank away
 * between sg_dist_step() calls, so a program that evaluates or writes a
 * checkpoint on one rank between steps is waited for (up to the
 * communicator's timeout), not excluded. A rank that comes back restarts its
 * peers' hang clocks. Any thread (an atomic flag); local.
 * SG_ERR_INVALID_ARG for NULL. */
sg_status sg__comm_set_away(sg_comm *comm, int away);

/* Whether comm failed or was aborted: a peer's put or atomic sent before the
 * failure may still be delivered into its windows until it is destroyed,
 * and window destruction no longer waits for the peers. Owner thread. */
bool sg__comm_unusable(const sg_comm *comm);
/* Hands `p` (from sg__malloc or sg__calloc; NULL is ignored) to comm, which
 * frees it in sg_comm_destroy after closing its transport: memory exposed
 * through a window of an unusable communicator must outlive the deliveries
 * that closing it still runs (UCX emulates RMA with active messages, whose
 * handlers write to the target address). SG_ERR_NO_MEMORY: p was not taken
 * (the caller frees it). Owner thread only. */
sg_status sg__comm_free_at_close(sg_comm *comm, void *p);

/* Cuts the link to `peer` on this side (fault injection, `partition:` faults):
 * the peer is declared unreachable at once, as if its endpoint had failed
 * ("rank P is unreachable: ... (link cut)"), heartbeats to it stop and every
 * later operation involving it fails; the other peers are told, as for any
 * failure. Local. SG_ERR_INVALID_ARG for NULL, self or a rank outside the
 * job. Owner thread only. */
sg_status sg__comm_cut_peer(sg_comm *comm, int peer);

/* Milliseconds since the last message or heartbeat from peer arrived, time
 * this rank spent outside comm calls included, or, for a peer whose process
 * has exited, since the last look that saw it running when that is later:
 * how long ago peer was last seen alive (a recovery's detection time starts
 * there). -1 for self or an invalid rank. Owner thread only. */
int64_t sg__comm_peer_quiet_ms(const sg_comm *comm, int peer);

/* A rank's position in the collective schedule, as its heartbeats last said. */
typedef struct sg_comm_position {
  uint64_t collective;               /* collectives entered: #collective is the latest (0: none yet) */
  int inside;                        /* 1 while the rank was waiting inside #collective */
  int away;                          /* 1 while its program was away from the steps (sg__comm_set_away) */
  int known;                         /* 0: no heartbeat with a position from this peer yet */
  char label[SG_COMM_LABEL_MAX + 1]; /* #collective's label ("" when none) */
} sg_comm_position;

/* The position of `peer` as its latest valid heartbeat reported it; for
 * peer == this rank, this rank's own position now. Local.
 * SG_ERR_INVALID_ARG for NULL or a rank outside the job. Owner thread only. */
sg_status sg__comm_peer_position(const sg_comm *comm, int peer, sg_comm_position *out);

/* Heartbeats this rank received and ignored because they were malformed (a
 * bad length, version, flag, label or rank; never trusted, not even as a sign
 * of life). 0 for NULL. Owner thread only. */
uint64_t sg__comm_heartbeats_rejected(const sg_comm *comm);

/* Check-ins (SPEC H3): a channel of their own beside the heartbeats, for a
 * payload in the health layer's wire layout (sg_checkin_encode), best
 * effort. A send never blocks: false when it was skipped (the peer is dead,
 * or its previous check-in is still in flight, as to a stopped peer). Take
 * returns the oldest that arrived into buf[SG__COMM_CHECKIN_BYTES]
 * (SG_ERR_NOT_FOUND when none); the payload is not validated here. Dropped:
 * check-ins that arrived malformed or while 1024 were queued. Owner thread
 * only; SG_ERR_INVALID_ARG / false / 0 for NULL. */
#define SG__COMM_CHECKIN_BYTES 512
bool sg__comm_checkin_send(sg_comm *comm, int peer, const void *buf, size_t bytes);
sg_status sg__comm_checkin_take(sg_comm *comm, void *buf, size_t *bytes, int *peer);
uint64_t sg__comm_checkins_dropped(const sg_comm *comm);

/* sg_comm_send / sg_comm_recv (send: buf is read), but the wait watches
 * every rank of the communicator, as a collective's does, not only the peer:
 * a pipeline rank waiting on a healthy neighbour fails at once when a rank
 * further down dies and its death is reported. */
sg_status sg__comm_p2p_all(sg_comm *comm, bool send, int peer, uint32_t tag, void *buf, size_t bytes);

/* ---- rendezvous store client (store.c) ------------------------------------- */

typedef struct sg__store_server sg__store_server;
typedef struct sg__store sg__store;

#define SG_STORE_MAX_KEY 256
#define SG_STORE_MAX_VALUE (1u << 20)

/* Connects and authenticates with `token`, retrying the connection until
 * timeout_ms. SG_ERR_DENIED when the server refuses the token. */
sg_status sg__store_connect(const char *addr, int port, const char *token, int timeout_ms, sg__store **out);
void sg__store_close(sg__store *st);
/* Every later key of this client gets `prefix` in front (a membership
 * epoch's namespace, "e3/"); "" or NULL: none. */
void sg__store_set_prefix(sg__store *st, const char *prefix);
sg_status sg__store_set(sg__store *st, const char *key, const void *value, size_t len);
/* Waits until `key` exists (at most timeout_ms) and returns a copy (free with sg__free). */
sg_status sg__store_wait_get(sg__store *st, const char *key, int timeout_ms, void **value, size_t *len);
/* Atomically adds `delta` to the integer counter `key` (created at 0); *result = new value. */
sg_status sg__store_add(sg__store *st, const char *key, int64_t delta, int64_t *result);

/* ---- reductions (reduce.c) --------------------------------------------------- */

size_t sg__comm_dtype_size(sg_dtype dtype); /* 0 for dtypes collectives do not support */
/* dst[i] = op(dst[i], src[i]) for n elements (AVG reduces as SUM). */
void sg__reduce(void *dst, const void *src, size_t n, sg_dtype dtype, sg_reduce_op op);
/* dst[i] /= world for AVG; no-op otherwise. */
void sg__reduce_finish(void *dst, size_t n, sg_dtype dtype, sg_reduce_op op, int world);

#endif /* SG_COMM_COMM_H */
