/* Peer liveness (SPEC H1) at the communicator level: the public switches.
 * The mechanism (heartbeat active messages, silence accounting, the checks in
 * every wait loop) lives in ucx.c next to the waits it guards. */
#include <stdio.h>

#include "comm/comm_internal.h"

/* Upper bound for both periods: far above any sensible value, and small
 * enough that no sum of them can overflow. */
#define LIVENESS_MAX_MS (24 * 3600 * 1000)

sg_status sg_comm_set_liveness(sg_comm *comm, int heartbeat_ms, int dead_ms) {
  SG_CHECK(sg__comm_begin(comm, "sg_comm_set_liveness"));
  if (heartbeat_ms < 0 || heartbeat_ms > LIVENESS_MAX_MS)
    return sg__error(SG_ERR_INVALID_ARG,
                     "sg_comm_set_liveness: heartbeat_ms %d is not in 0..%d (0 turns it off)", heartbeat_ms,
                     LIVENESS_MAX_MS);
  if (heartbeat_ms > 0 && (dead_ms <= heartbeat_ms || dead_ms > LIVENESS_MAX_MS))
    return sg__error(SG_ERR_INVALID_ARG,
                     "sg_comm_set_liveness: dead_ms %d must exceed heartbeat_ms %d (and be at most %d)",
                     dead_ms, heartbeat_ms, LIVENESS_MAX_MS);
  if (heartbeat_ms == 0 && dead_ms < 0)
    return sg__error(SG_ERR_INVALID_ARG, "sg_comm_set_liveness: negative dead_ms %d", dead_ms);
  sg__ucx_set_liveness(comm->ucx, heartbeat_ms, heartbeat_ms > 0 ? dead_ms : 0);
  return SG_OK;
}

sg_status sg_comm_poll(sg_comm *comm) {
  SG_CHECK(sg__comm_begin(comm, "sg_comm_poll"));
  /* An unreachable peer is reported but does not fail the communicator:
   * point-to-point traffic with the others may go on. It stays unreachable
   * (sticky), so every collective fails from now on. */
  return sg__ucx_poll(comm->ucx, -1);
}

int64_t sg_comm_peer_silence_ms(const sg_comm *comm, int peer) {
  if (comm == NULL || comm->ucx == NULL) return -1;
  return sg__ucx_silence_ms(comm->ucx, peer);
}

void sg_comm_abort(sg_comm *comm, const char *reason) {
  if (comm == NULL) return;
  int expect = 0;
  /* The first abort's reason wins; it is written before the state says so,
   * and read only after (acquire), so another thread may call this while the
   * owner is blocked in a collective. */
  if (__atomic_compare_exchange_n(&comm->abort_state, &expect, 1, false, __ATOMIC_ACQ_REL,
                                  __ATOMIC_ACQUIRE)) {
    snprintf(comm->abort_reason, sizeof comm->abort_reason, "%s",
             reason && *reason ? reason : "no reason given");
    __atomic_store_n(&comm->abort_state, 2, __ATOMIC_RELEASE);
  }
  if (comm->ucx) sg__ucx_abort(comm->ucx);
}
