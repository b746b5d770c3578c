/* The UCX transport (SPEC M2). One context and one worker per process, both in
 * single-thread mode: the rank's scheduler thread owns them (DESIGN.md, "How a
 * step flows"). This is the only file that includes UCX headers and the only
 * place UCX status codes become sg_status values (ucx_error below).
 *
 * Requests are issued without callbacks and polled. A request given up
 * (a failed collective) is cancelled and then progressed until UCX lets go
 * of it (bounded, settle_request): cancelling does not stop a receive UCX
 * already matched (a rendezvous copy keeps writing into the buffer), and
 * the caller frees the buffer once the call returned.
 *
 * Liveness is the failure detector's (detector.c): this file carries its
 * heartbeats and notices, reports what it sees (messages, endpoint errors)
 * and asks it, in every wait loop, whether the peers waited on are alive. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ucp/api/ucp.h>

#include "comm/comm_internal.h"

typedef struct am_msg {
  struct am_msg *next;
  int peer;
  size_t len;
  unsigned char data[];
} am_msg;

struct sg__ucx_req {
  void *ucx; /* UCX request; NULL when the operation completed at once */
  sg__ucx_req *next_free;
  int peer;
  int is_recv;
  size_t bytes; /* expected length of a receive */
  ucp_tag_recv_info_t info;
};

struct sg__ucx_mem {
  ucp_mem_h memh;
};
struct sg__ucx_rkey {
  ucp_rkey_h rkey;
};

struct sg__ucx {
  int rank, size, timeout_ms;
  sg__detector *det;
  void **hb_req;                       /* per peer: a heartbeat still in flight, or NULL */
  uint8_t (*hb_buf)[SG__HB_MAX_BYTES]; /* per peer: the payload of its heartbeat in flight */
  int64_t settle_until; /* end of the window given-up requests are progressed in (settle_request) */
  int abort_flag;       /* set by sg__ucx_abort from any thread (atomic access only) */
  ucp_context_h ctx;
  ucp_worker_h worker;
  ucp_address_t *addr;
  size_t addr_len;
  ucp_ep_h *eps;
  ucs_status_t *ep_status; /* set by the error handler when a peer fails */
  sg__ucx_req *free_reqs;
  sg__ucx_req **blocks; /* request pool, freed at destroy */
  uint32_t n_blocks, cap_blocks;
  /* The user's queues, then the check-ins' (CHECKIN_QUEUE). */
  am_msg *am_head[SG_AM_QUEUES + 1], *am_tail[SG_AM_QUEUES + 1];
  int am_oom;
  int n_checkins;                            /* queued, at most MAX_QUEUED_CHECKINS */
  uint64_t checkins_dropped;                 /* arrived while the queue was full, or malformed */
  void **ci_req;                             /* per peer: a check-in still in flight, or NULL */
  uint8_t (*ci_buf)[SG__COMM_CHECKIN_BYTES]; /* per peer: its payload */
  sg__proc_ident self;
  sg__proc_watch *procs; /* peers under this kernel: their exits (proc_watch.c) */
  uint8_t *exit_seen;    /* per peer: its exit seen, not yet told to the detector */
};

/* Status codes with which UCX reports that the peer went away. */
static int peer_failure(ucs_status_t us) {
  return us == UCS_ERR_IO_ERROR || us == UCS_ERR_CONNECTION_RESET || us == UCS_ERR_ENDPOINT_TIMEOUT ||
         us == UCS_ERR_NOT_CONNECTED || us == UCS_ERR_REJECTED;
}

/* The one place UCX codes are translated. A code that says the peer went
 * away marks it unreachable and reports the root cause (the first
 * unreachable peer the operation involves). */
static sg_status ucx_error(sg__ucx *u, ucs_status_t us, int peer, const char *what) {
  if (u && peer >= 0 && peer < u->size && peer_failure(us)) {
    sg__det_endpoint_failed(u->det, peer, ucs_status_string(us));
    /* The peer may have left because it saw another rank die first: it told
     * us so before leaving, but its notice may sit behind the message whose
     * failure we see now. Take what has arrived before naming a cause. */
    int64_t until = sg__now_ms() + 20;
    for (int idle = 0; idle < 4 && sg__now_ms() < until;)
      idle = ucp_worker_progress(u->worker) ? 0 : idle + 1;
    sg_status st = sg__det_root_cause(u->det, peer);
    if (st != SG_OK) return st;
  }
  sg_status st;
  switch (us) {
    case UCS_ERR_NO_MEMORY:
    case UCS_ERR_NO_RESOURCE: st = SG_ERR_NO_MEMORY; break;
    case UCS_ERR_MESSAGE_TRUNCATED: st = SG_ERR_TRUNCATED; break;
    case UCS_ERR_TIMED_OUT:
    case UCS_ERR_CANCELED: st = SG_ERR_TIMEOUT; break;
    case UCS_ERR_UNSUPPORTED:
    case UCS_ERR_UNREACHABLE: st = SG_ERR_UNSUPPORTED; break;
    case UCS_ERR_INVALID_PARAM:
    case UCS_ERR_INVALID_ADDR: st = SG_ERR_INVALID_ARG; break;
    default: st = SG_ERR_COMM; break;
  }
  if (peer >= 0)
    return sg__error(st, "UCX %s with peer rank %d failed on rank %d: %s", what, peer, u ? u->rank : -1,
                     ucs_status_string(us));
  return sg__error(st, "UCX %s failed on rank %d: %s", what, u ? u->rank : -1, ucs_status_string(us));
}

static void ep_error_cb(void *arg, ucp_ep_h ep, ucs_status_t status) {
  sg__ucx *u = arg;
  for (int i = 0; i < u->size; i++)
    if (u->eps[i] == ep) u->ep_status[i] = status;
}

static ucs_status_t am_cb(void *arg, const void *header, size_t header_length, void *data, size_t length,
                          const ucp_am_recv_param_t *param);

static ucs_status_t hb_cb(void *arg, const void *header, size_t header_length, void *data, size_t length,
                          const ucp_am_recv_param_t *param);
static ucs_status_t notice_cb(void *arg, const void *header, size_t header_length, void *data, size_t length,
                              const ucp_am_recv_param_t *param);
static void send_notice(void *ctx, int to, const void *notice, size_t bytes);
static ucs_status_t checkin_cb(void *arg, const void *header, size_t header_length, void *data, size_t length,
                               const ucp_am_recv_param_t *param);

/* AM ids AM_ID_BASE + 0..7 carry the user's queues; AM_ID_HB (heartbeats) and
 * AM_ID_NOTICE ("rank P is unreachable") lie outside that range, so no user
 * queue ever sees one. */
#define AM_ID_BASE 16
#define AM_ID_HB (AM_ID_BASE + SG_AM_QUEUES)
#define AM_ID_NOTICE (AM_ID_BASE + SG_AM_QUEUES + 1)
/* Check-ins (SPEC H3) have an id and a queue of their own, which no user
 * queue can reach, and which holds at most MAX_QUEUED_CHECKINS (a reader
 * that stopped taking them must not make us grow without bound). */
#define AM_ID_CHECKIN (AM_ID_BASE + SG_AM_QUEUES + 2)
#define CHECKIN_QUEUE SG_AM_QUEUES
#define CHECKIN_MAGIC 0x4e494b43u /* "CKIN" */
#define MAX_QUEUED_CHECKINS 1024

sg_status sg__ucx_create(int rank, int world_size, int timeout_ms, sg__detector *det, sg__ucx **out) {
  *out = NULL;
  sg__ucx *u = sg__calloc(1, sizeof *u);
  if (u == NULL) return sg__error(SG_ERR_NO_MEMORY, "UCX: out of memory");
  u->rank = rank;
  u->size = world_size;
  u->timeout_ms = timeout_ms;
  u->det = det;
  sg__det_set_notifier(det, send_notice, u);
  u->eps = sg__calloc((size_t)world_size, sizeof *u->eps);
  u->ep_status = sg__calloc((size_t)world_size, sizeof *u->ep_status);
  u->hb_req = sg__calloc((size_t)world_size, sizeof *u->hb_req);
  u->hb_buf = sg__calloc((size_t)world_size, sizeof *u->hb_buf);
  u->exit_seen = sg__calloc((size_t)world_size, 1);
  u->ci_req = sg__calloc((size_t)world_size, sizeof *u->ci_req);
  u->ci_buf = sg__calloc((size_t)world_size, sizeof *u->ci_buf);
  sg_status st = SG_OK;
  if (u->eps == NULL || u->ep_status == NULL || u->hb_req == NULL || u->hb_buf == NULL ||
      u->exit_seen == NULL || u->ci_req == NULL || u->ci_buf == NULL) {
    st = sg__error(SG_ERR_NO_MEMORY, "UCX: out of memory");
    goto fail;
  }
  sg__proc_ident_self(&u->self);
  SG_CHECK_GOTO(sg__proc_watch_create(world_size, &u->procs), st, fail);
  ucp_config_t *config;
  ucs_status_t us = ucp_config_read(NULL, NULL, &config);
  if (us != UCS_OK) {
    st = ucx_error(u, us, -1, "config read");
    goto fail;
  }
  ucp_params_t p = {0};
  p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  p.features = UCP_FEATURE_TAG | UCP_FEATURE_RMA | UCP_FEATURE_AMO64 | UCP_FEATURE_AM;
  p.mt_workers_shared = 0;
  us = ucp_init(&p, config, &u->ctx);
  ucp_config_release(config);
  if (us != UCS_OK) {
    st = ucx_error(u, us, -1, "init");
    goto fail;
  }
  ucp_worker_params_t wp = {0};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE; /* owned by one thread (DESIGN.md) */
  us = ucp_worker_create(u->ctx, &wp, &u->worker);
  if (us != UCS_OK) {
    st = ucx_error(u, us, -1, "worker create");
    goto fail;
  }
  us = ucp_worker_get_address(u->worker, &u->addr, &u->addr_len);
  if (us != UCS_OK) {
    st = ucx_error(u, us, -1, "worker address");
    goto fail;
  }
  for (unsigned id = 0; id < SG_AM_QUEUES + 3; id++) {
    ucp_am_handler_param_t hp = {0};
    hp.field_mask =
        UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    hp.id = AM_ID_BASE + id;
    hp.cb = id < SG_AM_QUEUES                 ? am_cb
            : AM_ID_BASE + id == AM_ID_HB     ? hb_cb
            : AM_ID_BASE + id == AM_ID_NOTICE ? notice_cb
                                              : checkin_cb;
    hp.arg = u;
    us = ucp_worker_set_am_recv_handler(u->worker, &hp);
    if (us != UCS_OK) {
      st = ucx_error(u, us, -1, "active message handler");
      goto fail;
    }
  }
  *out = u;
  return SG_OK;
fail:
  sg__ucx_destroy(u);
  return st;
}

void sg__ucx_destroy(sg__ucx *u) {
  if (u == NULL) return;
  sg__det_set_notifier(u->det, NULL, NULL); /* the detector outlives us */
  if (u->hb_req)
    for (int i = 0; i < u->size; i++)
      if (u->hb_req[i]) ucp_request_free(u->hb_req[i]); /* UCX finishes or cancels it at close */
  if (u->ci_req)
    for (int i = 0; i < u->size; i++)
      if (u->ci_req[i]) ucp_request_free(u->ci_req[i]);
  if (u->worker && u->eps) {
    /* Callers reach here after a barrier (or after a failure): nothing is
     * owed to a peer, so endpoints close at once. One deadline for all of
     * them keeps the destroy of a failed job bounded. */
    int64_t deadline = sg__now_ms() + 2000;
    for (int i = 0; i < u->size; i++) {
      if (u->eps[i] == NULL) continue;
      ucp_request_param_t rp = {0};
      rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      rp.flags = UCP_EP_CLOSE_FLAG_FORCE;
      void *r = ucp_ep_close_nbx(u->eps[i], &rp);
      if (UCS_PTR_IS_PTR(r)) {
        while (ucp_request_check_status(r) == UCS_INPROGRESS && sg__now_ms() < deadline)
          ucp_worker_progress(u->worker);
        ucp_request_free(r);
      }
    }
    /* Work UCX still holds (a shared-memory copy from a peer that died
     * mid-transfer, a discarded endpoint's flush) only finishes, or fails,
     * when progressed; a worker destroyed with such work queued trips a UCX
     * assertion and aborts the process. Progress until nothing moves. */
    for (int idle = 0; idle < 256 && sg__now_ms() < deadline;)
      idle = ucp_worker_progress(u->worker) ? 0 : idle + 1;
  }
  for (unsigned i = 0; i < SG_AM_QUEUES + 1; i++)
    for (am_msg *m = u->am_head[i], *n; m; m = n) {
      n = m->next;
      sg__free(m);
    }
  if (u->addr) ucp_worker_release_address(u->worker, u->addr);
  if (u->worker) ucp_worker_destroy(u->worker);
  if (u->ctx) ucp_cleanup(u->ctx);
  for (uint32_t i = 0; i < u->n_blocks; i++) sg__free(u->blocks[i]);
  sg__free(u->blocks);
  sg__free(u->eps);
  sg__free(u->ep_status);
  sg__free(u->hb_req);
  sg__free(u->hb_buf);
  sg__free(u->exit_seen);
  sg__free(u->ci_req);
  sg__free(u->ci_buf);
  sg__proc_watch_destroy(u->procs);
  sg__free(u);
}

sg_status sg__ucx_address(sg__ucx *u, const void **addr, size_t *len) {
  *addr = u->addr;
  *len = u->addr_len;
  return SG_OK;
}

/* How a peer's failure is learnt besides its silence (SPEC H3). A peer under
 * this kernel is watched through a pidfd: its exit is known at once. UCX's
 * peer-error handling would add nothing there and costs a lot: UCX 1.13
 * leaves out its shared-memory transports on such an endpoint (about 4x
 * less bandwidth here). A peer on another host gets it, where it costs
 * nothing (shared memory does not reach there) and is the only fast sign of
 * a dead process. SG_UCX_PEER_ERRORS=1 gives every endpoint peer-error
 * handling, 0 none; unset: as above. */
static bool wants_peer_errors(bool local) {
  const char *pe = getenv("SG_UCX_PEER_ERRORS");
  if (pe != NULL && strcmp(pe, "1") == 0) return true;
  if (pe != NULL && strcmp(pe, "0") == 0) return false;
  return !local;
}

/* SG_PROC_WATCH=0 turns the pidfd watch off (tests of the other ways). */
static bool proc_watch_on(void) {
  const char *v = getenv("SG_PROC_WATCH");
  return v == NULL || strcmp(v, "0") != 0;
}

sg_status sg__ucx_connect(sg__ucx *u, int peer, const void *addr, size_t len, const sg__proc_ident *id) {
  if (peer < 0 || peer >= u->size || len == 0)
    return sg__error(SG_ERR_INVALID_ARG, "UCX connect: bad peer %d", peer);
  bool local = id != NULL && sg__proc_same_kernel(&u->self, id);
  bool watched =
      local && proc_watch_on() && (id->pid == u->self.pid || sg__proc_watch_add(u->procs, peer, id->pid));
  /* A worker address is opaque to us; UCX unpacks it. Its length was bounded by
   * the store (SG_STORE_MAX_VALUE), and only token holders could publish it. */
  ucp_ep_params_t ep = {0};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                  UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep.address = addr;
  ep.err_mode = wants_peer_errors(local) ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
  ep.err_handler.cb = ep_error_cb;
  ep.err_handler.arg = u;
  sg__det_heard(u->det, peer);
  ucs_status_t us = ucp_ep_create(u->worker, &ep, &u->eps[peer]);
  if (us != UCS_OK) {
    u->eps[peer] = NULL;
    return ucx_error(u, us, peer, "endpoint create");
  }
  SG_DEBUG("comm: rank %d -> %d: %s, %s", u->rank, peer, watched ? "process watched" : "process not watched",
           ep.err_mode == UCP_ERR_HANDLING_MODE_PEER ? "UCX peer errors" : "no UCX peer errors");
  return SG_OK;
}

void sg__ucx_progress(sg__ucx *u) { ucp_worker_progress(u->worker); }

/* ---- liveness (SPEC H1): the detector's messenger ------------------------------ */

void sg__ucx_abort(sg__ucx *u) { __atomic_store_n(&u->abort_flag, 1, __ATOMIC_RELEASE); }

/* The detector's notifier: a failure notice to `to`, eager and released at
 * once (the notice lives in the detector until destroy); best effort. */
static void send_notice(void *ctx, int to, const void *notice, size_t bytes) {
  sg__ucx *u = ctx;
  if (u->eps[to] == NULL) return;
  ucp_request_param_t rp = {0};
  rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  rp.flags = UCP_AM_SEND_FLAG_EAGER;
  void *x = ucp_am_send_nbx(u->eps[to], AM_ID_NOTICE, notice, bytes, NULL, 0, &rp);
  if (UCS_PTR_IS_PTR(x)) ucp_request_free(x);
}

/* Sends due heartbeats. Called often from every wait loop and sg_comm_poll. */
static void tick(sg__ucx *u, int64_t now) {
  if (!sg__det_tick(u->det, now)) return;
  for (int p = 0; p < u->size; p++) {
    if (u->eps[p] == NULL || !sg__det_wants_heartbeat(u->det, p)) continue;
    if (u->hb_req[p]) {
      /* A dead peer's queue fills up and its sends stay pending: never more
       * than one heartbeat per peer in flight, so nothing piles up. */
      if (ucp_request_check_status(u->hb_req[p]) == UCS_INPROGRESS) continue;
      ucp_request_free(u->hb_req[p]);
      u->hb_req[p] = NULL;
    }
    ucp_request_param_t rp = {0};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    rp.flags = UCP_AM_SEND_FLAG_EAGER;
    /* The payload (our position) stays in hb_buf[p] until this send is done:
     * the next one to p is only written after it (above). */
    size_t len = sg__det_heartbeat_payload(u->det, u->hb_buf[p]);
    void *x = ucp_am_send_nbx(u->eps[p], AM_ID_HB, sg__det_heartbeat_header(u->det), 2 * sizeof(uint32_t),
                              u->hb_buf[p], len, &rp);
    /* A failed heartbeat is not an error by itself: the peer's silence (or
     * its endpoint status) decides. */
    if (UCS_PTR_IS_PTR(x)) u->hb_req[p] = x;
  }
}

/* SG_ERR_COMM when the communicator was aborted, or when the detector finds
 * `peer` (every peer when -1 or in a collective) unreachable, after it is
 * told of the endpoint failures UCX reported among them; SG_OK otherwise. */
static void exit_seen(void *ctx, int peer) {
  sg__ucx *u = ctx;
  u->exit_seen[peer] = 1;
}

/* Peers whose processes exited since the last look become unreachable. A
 * peer that saw another rank die first told us so before leaving, and what
 * it sent before it exited is in our queues: take that first, so that the
 * detector names the root cause and a receive it completes is not failed. */
static void look_for_exits(sg__ucx *u, int64_t now) {
  bool any = false;
  sg__proc_watch_poll(u->procs, now, exit_seen, u);
  for (int p = 0; p < u->size; p++) any |= u->exit_seen[p] != 0;
  if (!any) return;
  int64_t until = sg__now_ms() + 20;
  for (int idle = 0; idle < 4 && sg__now_ms() < until;) idle = ucp_worker_progress(u->worker) ? 0 : idle + 1;
  for (int p = 0; p < u->size; p++)
    if (u->exit_seen[p]) {
      u->exit_seen[p] = 0;
      sg__det_process_exited(u->det, p);
    }
}

int64_t sg__ucx_last_running(const sg__ucx *u, int peer) {
  return sg__proc_watch_last_running(u->procs, peer);
}

static sg_status check_alive(sg__ucx *u, int peer, int64_t now) {
  if (__atomic_load_n(&u->abort_flag, __ATOMIC_ACQUIRE))
    return sg__error(SG_ERR_COMM, "rank %d: the communicator was aborted", u->rank);
  look_for_exits(u, now);
  if (peer == SG_UCX_NOBODY) return SG_OK;
  int lo, hi;
  sg__det_scope(u->det, peer, &lo, &hi);
  for (int p = lo; p < hi; p++)
    if (u->ep_status[p] != UCS_OK) sg__det_endpoint_failed(u->det, p, ucs_status_string(u->ep_status[p]));
  return sg__det_check(u->det, peer, now);
}

sg_status sg__ucx_poll(sg__ucx *u, int peer) {
  ucp_worker_progress(u->worker);
  int64_t now = sg__now_ms();
  tick(u, now);
  return check_alive(u, peer, now);
}

/* ---- requests -------------------------------------------------------------- */

static sg__ucx_req *req_get(sg__ucx *u) {
  if (u->free_reqs == NULL) {
    enum { BLOCK = 256 };
    if (sg__grow((void **)&u->blocks, &u->cap_blocks, u->n_blocks + 1, sizeof *u->blocks) != SG_OK)
      return NULL;
    sg__ucx_req *b = sg__calloc(BLOCK, sizeof *b);
    if (b == NULL) return NULL;
    u->blocks[u->n_blocks++] = b;
    for (int i = 0; i < BLOCK; i++) {
      b[i].next_free = u->free_reqs;
      u->free_reqs = &b[i];
    }
  }
  sg__ucx_req *r = u->free_reqs;
  u->free_reqs = r->next_free;
  memset(r, 0, sizeof *r);
  return r;
}

static void req_put(sg__ucx *u, sg__ucx_req *r) {
  if (r->ucx) ucp_request_free(r->ucx);
  r->ucx = NULL;
  r->next_free = u->free_reqs;
  u->free_reqs = r;
}

static ucp_tag_t make_tag(unsigned channel, int src, uint32_t tag) {
  return (ucp_tag_t)(channel & 0xfu) << 60 | (ucp_tag_t)((uint32_t)src & 0x0fffffffu) << 32 | tag;
}

static sg_status check_peer(sg__ucx *u, int peer, const char *what) {
  if (peer < 0 || peer >= u->size || u->eps[peer] == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "UCX %s: rank %d is not a peer of rank %d (world size %d)", what,
                     peer, u->rank, u->size);
  if (u->ep_status[peer] != UCS_OK) return ucx_error(u, u->ep_status[peer], peer, what);
  return sg__det_peer_error(u->det, peer);
}

sg_status sg__ucx_isend(sg__ucx *u, int peer, unsigned channel, uint32_t tag, const void *buf, size_t bytes,
                        sg__ucx_req **req) {
  *req = NULL;
  SG_CHECK(check_peer(u, peer, "send"));
  sg__ucx_req *r = req_get(u);
  if (r == NULL) return sg__error(SG_ERR_NO_MEMORY, "UCX send to peer rank %d: out of memory", peer);
  r->peer = peer;
  ucp_request_param_t rp = {0};
  void *x = ucp_tag_send_nbx(u->eps[peer], buf, bytes, make_tag(channel, u->rank, tag), &rp);
  if (UCS_PTR_IS_ERR(x)) {
    req_put(u, r);
    return ucx_error(u, UCS_PTR_STATUS(x), peer, "tagged send");
  }
  r->ucx = x;
  *req = r;
  return SG_OK;
}

sg_status sg__ucx_irecv(sg__ucx *u, int peer, unsigned channel, uint32_t tag, void *buf, size_t bytes,
                        sg__ucx_req **req) {
  *req = NULL;
  SG_CHECK(check_peer(u, peer, "receive"));
  sg__ucx_req *r = req_get(u);
  if (r == NULL) return sg__error(SG_ERR_NO_MEMORY, "UCX receive from peer rank %d: out of memory", peer);
  r->peer = peer;
  r->is_recv = 1;
  r->bytes = bytes;
  r->info.length = (size_t)-1;
  ucp_request_param_t rp = {0};
  /* UCX 1.13 does not fill recv_info when a receive completes at once, so ask
   * for a request every time and read the length from it. */
  rp.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  void *x = ucp_tag_recv_nbx(u->worker, buf, bytes, make_tag(channel, peer, tag), (ucp_tag_t)-1, &rp);
  if (UCS_PTR_IS_ERR(x)) {
    req_put(u, r);
    return ucx_error(u, UCS_PTR_STATUS(x), peer, "tagged receive");
  }
  r->ucx = x;
  *req = r;
  return SG_OK;
}

/* UCS_INPROGRESS, UCS_OK or an error; fills the length of a finished receive. */
static ucs_status_t req_status(sg__ucx_req *r) {
  if (r->ucx == NULL) return UCS_OK;
  if (r->is_recv) return ucp_tag_recv_request_test(r->ucx, &r->info);
  return ucp_request_check_status(r->ucx);
}

int sg__ucx_test(sg__ucx *u, sg__ucx_req *r) {
  (void)u;
  return r == NULL || req_status(r) != UCS_INPROGRESS;
}

/* How long the requests given up together (one failed collective's) are
 * progressed for, in all: a transfer from a live peer ends in microseconds,
 * one from a dead peer fails at once; only a peer cut off mid-transfer
 * leaves one hanging, and then UCX keeps it after the free. */
#define SETTLE_MS 200

/* Cancels a given-up request and, for a receive, progresses until UCX no
 * longer writes its buffer, within a window shared by the requests given up
 * together: ucp_request_cancel only stops an unmatched receive, and a
 * matched one (a rendezvous copy) keeps writing until it completes. A send
 * only reads our buffer, so it is not waited for: its peer gave up the
 * collective too (or died) and takes nothing more, and waiting the window
 * out there added SETTLE_MS to every recovery. With a peer whose process
 * has ended nothing can arrive later than what is already in our queues:
 * taking that (progress until nothing moves) is enough. */
static void settle_request(sg__ucx *u, void *x, int peer, bool is_recv) {
  if (ucp_request_check_status(x) != UCS_INPROGRESS) return;
  ucp_request_cancel(u->worker, x);
  if (!is_recv) return;
  int64_t now = sg__now_ms();
  if (now > u->settle_until + 1000) u->settle_until = now + SETTLE_MS; /* a new failure */
  if (peer >= 0 && peer < u->size && sg__proc_watch_last_running(u->procs, peer) >= 0) {
    for (int idle = 0;
         idle < 4 && ucp_request_check_status(x) == UCS_INPROGRESS && sg__now_ms() < u->settle_until;)
      idle = ucp_worker_progress(u->worker) ? 0 : idle + 1;
    return;
  }
  while (ucp_request_check_status(x) == UCS_INPROGRESS && sg__now_ms() < u->settle_until)
    if (ucp_worker_progress(u->worker) == 0) sched_yield();
}

void sg__ucx_abandon(sg__ucx *u, sg__ucx_req **req) {
  sg__ucx_req *r = *req;
  if (r == NULL) return;
  if (r->ucx) settle_request(u, r->ucx, r->peer, r->is_recv != 0);
  req_put(u, r);
  *req = NULL;
}

/* The one wait loop: progresses the worker until r completes, sending due
 * heartbeats and, every 16 rounds, checking that r's peer (every peer when
 * -1 or while a collective runs) is alive, that nobody aborted and that the
 * deadline (absolute sg__now_ms) has not passed. SG_OK with *us the
 * request's final status, or the error that ended the wait with r still
 * outstanding (the caller gives it up). `what` names a bare request in the
 * timeout message; NULL for a tagged send or receive. */
static sg_status wait_request(sg__ucx *u, sg__ucx_req *r, const char *what, int64_t deadline,
                              ucs_status_t *us) {
  unsigned idle = 0, spins = 0;
  while ((*us = req_status(r)) == UCS_INPROGRESS) {
    if (ucp_worker_progress(u->worker) == 0) {
      /* Ranks may outnumber cores: give the peer the CPU rather than spin. */
      if (++idle > 64) sched_yield();
    } else {
      idle = 0;
    }
    if ((++spins & 15) != 0) continue;
    int64_t now = sg__now_ms();
    tick(u, now);
    sg_status st = check_alive(u, r->peer, now);
    /* The look may have taken what the peer sent before it exited: a request
     * that completed is complete. */
    if (st != SG_OK) return (*us = req_status(r)) == UCS_INPROGRESS ? st : SG_OK;
    if (now <= deadline) continue;
    if (what == NULL)
      return sg__error(SG_ERR_TIMEOUT, "timed out after %d ms waiting to %s peer rank %d (rank %d)",
                       u->timeout_ms, r->is_recv ? "receive from" : "send to", r->peer, u->rank);
    if (r->peer >= 0)
      return sg__error(SG_ERR_TIMEOUT, "timed out after %d ms: %s with peer rank %d (rank %d)", u->timeout_ms,
                       what, r->peer, u->rank);
    return sg__error(SG_ERR_TIMEOUT, "timed out after %d ms: %s (rank %d)", u->timeout_ms, what, u->rank);
  }
  return SG_OK;
}

sg_status sg__ucx_wait(sg__ucx *u, sg__ucx_req **req, int64_t deadline) {
  sg__ucx_req *r = *req;
  if (r == NULL) return SG_OK;
  ucs_status_t us;
  sg_status st = wait_request(u, r, NULL, deadline, &us);
  if (st != SG_OK) {
    sg__ucx_abandon(u, req);
    return st;
  }
  int peer = r->peer;
  if (r->is_recv && us == UCS_OK) sg__det_heard(u->det, peer);
  if (us != UCS_OK) {
    st = ucx_error(u, us, peer, r->is_recv ? "tagged receive" : "tagged send");
  } else if (r->is_recv && r->info.length != r->bytes) {
    st = sg__error(SG_ERR_TRUNCATED, "message from peer rank %d has %zu bytes, rank %d expected %zu", peer,
                   r->info.length, u->rank, r->bytes);
  }
  req_put(u, r);
  *req = NULL;
  return st;
}

/* Waits for a bare UCX request (flush, atomics, AM) through the same loop,
 * as a send to `peer` (-1: every peer); frees it. `writes_ours`: UCX may
 * still write our memory while it is outstanding (a flush covers every get
 * issued before it, an atomic writes its reply buffer), so a given-up one is
 * settled as a receive is: a get's reply from a live peer arrives in
 * microseconds, and one delivered after we returned would land in a buffer
 * the caller has freed or reused. */
static sg_status wait_raw(sg__ucx *u, void *x, int peer, const char *what, int64_t deadline,
                          bool writes_ours) {
  if (x == NULL) return SG_OK;
  if (UCS_PTR_IS_ERR(x)) return ucx_error(u, UCS_PTR_STATUS(x), peer, what);
  sg__ucx_req r = {.ucx = x, .peer = peer};
  ucs_status_t us;
  sg_status st = wait_request(u, &r, what, deadline, &us);
  if (st != SG_OK) settle_request(u, x, peer, writes_ours);
  ucp_request_free(x);
  if (st != SG_OK) return st;
  return us == UCS_OK ? SG_OK : ucx_error(u, us, peer, what);
}

/* ---- RMA and atomics ------------------------------------------------------- */

sg_status sg__ucx_mem_map(sg__ucx *u, void *base, size_t bytes, sg__ucx_mem **out) {
  *out = NULL;
  sg__ucx_mem *m = sg__calloc(1, sizeof *m);
  if (m == NULL) return sg__error(SG_ERR_NO_MEMORY, "UCX memory registration: out of memory");
  ucp_mem_map_params_t mp = {0};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = base;
  mp.length = bytes;
  ucs_status_t us = ucp_mem_map(u->ctx, &mp, &m->memh);
  if (us != UCS_OK) {
    sg__free(m);
    return ucx_error(u, us, -1, "memory registration");
  }
  *out = m;
  return SG_OK;
}

sg_status sg__ucx_mem_alloc(sg__ucx *u, size_t bytes, sg__ucx_mem **out, void **base) {
  *out = NULL;
  *base = NULL;
  sg__ucx_mem *m = sg__calloc(1, sizeof *m);
  if (m == NULL) return sg__error(SG_ERR_NO_MEMORY, "UCX memory allocation: out of memory");
  ucp_mem_map_params_t mp = {0};
  mp.field_mask =
      UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  mp.address = NULL;
  mp.length = bytes;
  mp.flags = UCP_MEM_MAP_ALLOCATE;
  ucs_status_t us = ucp_mem_map(u->ctx, &mp, &m->memh);
  if (us != UCS_OK) {
    sg__free(m);
    return ucx_error(u, us, -1, "memory allocation");
  }
  ucp_mem_attr_t attr = {.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH};
  us = ucp_mem_query(m->memh, &attr);
  if (us != UCS_OK || attr.address == NULL || attr.length < bytes) {
    ucp_mem_unmap(u->ctx, m->memh);
    sg__free(m);
    return us != UCS_OK ? ucx_error(u, us, -1, "memory query")
                        : sg__error(SG_ERR_NO_MEMORY, "UCX memory allocation: %zu bytes asked, %zu given",
                                    bytes, attr.length);
  }
  *out = m;
  *base = attr.address;
  return SG_OK;
}

void sg__ucx_mem_unmap(sg__ucx *u, sg__ucx_mem *m) {
  if (m == NULL) return;
  ucp_mem_unmap(u->ctx, m->memh);
  sg__free(m);
}

sg_status sg__ucx_rkey_pack(sg__ucx *u, sg__ucx_mem *m, void **buf, size_t *len) {
  void *rb;
  size_t n;
  ucs_status_t us = ucp_rkey_pack(u->ctx, m->memh, &rb, &n);
  if (us != UCS_OK) return ucx_error(u, us, -1, "remote key pack");
  *buf = sg__malloc(n ? n : 1);
  if (*buf == NULL) {
    ucp_rkey_buffer_release(rb);
    return sg__error(SG_ERR_NO_MEMORY, "UCX remote key: out of memory");
  }
  memcpy(*buf, rb, n);
  *len = n;
  ucp_rkey_buffer_release(rb);
  return SG_OK;
}

sg_status sg__ucx_rkey_unpack(sg__ucx *u, int peer, const void *buf, size_t len, sg__ucx_rkey **out) {
  *out = NULL;
  SG_CHECK(check_peer(u, peer, "remote key unpack"));
  if (len == 0) return sg__error(SG_ERR_FORMAT, "empty remote key from peer rank %d", peer);
  sg__ucx_rkey *k = sg__calloc(1, sizeof *k);
  if (k == NULL) return sg__error(SG_ERR_NO_MEMORY, "UCX remote key: out of memory");
  ucs_status_t us = ucp_ep_rkey_unpack(u->eps[peer], buf, &k->rkey);
  if (us != UCS_OK) {
    sg__free(k);
    return ucx_error(u, us, peer, "remote key unpack");
  }
  *out = k;
  return SG_OK;
}

void sg__ucx_rkey_destroy(sg__ucx_rkey *k) {
  if (k == NULL) return;
  ucp_rkey_destroy(k->rkey);
  sg__free(k);
}

sg_status sg__ucx_put(sg__ucx *u, int peer, const void *src, size_t bytes, uint64_t raddr, sg__ucx_rkey *rk) {
  SG_CHECK(check_peer(u, peer, "put"));
  ucs_status_t us = ucp_put_nbi(u->eps[peer], src, bytes, raddr, rk->rkey);
  if (us != UCS_OK && us != UCS_INPROGRESS) return ucx_error(u, us, peer, "put");
  return SG_OK;
}

sg_status sg__ucx_get(sg__ucx *u, int peer, void *dst, size_t bytes, uint64_t raddr, sg__ucx_rkey *rk) {
  SG_CHECK(check_peer(u, peer, "get"));
  ucs_status_t us = ucp_get_nbi(u->eps[peer], dst, bytes, raddr, rk->rkey);
  if (us != UCS_OK && us != UCS_INPROGRESS) return ucx_error(u, us, peer, "get");
  return SG_OK;
}

sg_status sg__ucx_flush(sg__ucx *u, int64_t deadline) {
  ucp_request_param_t rp = {0};
  return wait_raw(u, ucp_worker_flush_nbx(u->worker, &rp), -1, "flush", deadline, true);
}

sg_status sg__ucx_atomic(sg__ucx *u, int peer, int op, uint64_t value, uint64_t compare, uint64_t *result,
                         uint64_t raddr, sg__ucx_rkey *rk, int64_t deadline) {
  SG_CHECK(check_peer(u, peer, "atomic"));
  ucp_request_param_t rp = {0};
  rp.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REPLY_BUFFER;
  rp.datatype = ucp_dt_make_contig(8);
  uint64_t operand, reply;
  void *x;
  if (op == 0) {
    operand = value;
    rp.reply_buffer = &reply;
    x = ucp_atomic_op_nbx(u->eps[peer], UCP_ATOMIC_OP_ADD, &operand, 1, raddr, rk->rkey, &rp);
  } else {
    operand = compare; /* X: compared with the remote value */
    reply = value;     /* Z: the swap value in, the old value out */
    rp.reply_buffer = &reply;
    x = ucp_atomic_op_nbx(u->eps[peer], UCP_ATOMIC_OP_CSWAP, &operand, 1, raddr, rk->rkey, &rp);
  }
  SG_CHECK(wait_raw(u, x, peer, op == 0 ? "atomic fetch-add" : "atomic compare-swap", deadline, true));
  if (result) *result = reply;
  return SG_OK;
}

/* ---- active messages ------------------------------------------------------- */

/* Every queue's handler is this callback; the 8-byte header carries the
 * sender's rank and the queue id (both u32), since UCX passes no handler id. */
static void am_append(sg__ucx *u, unsigned q, am_msg *m) {
  if (u->am_tail[q]) u->am_tail[q]->next = m;
  else u->am_head[q] = m;
  u->am_tail[q] = m;
}

static ucs_status_t am_cb(void *arg, const void *header, size_t header_length, void *data, size_t length,
                          const ucp_am_recv_param_t *param) {
  sg__ucx *u = arg;
  /* Validate before use (SPEC S1): a header naming a real rank and queue, an
   * eager payload within the limit. Anything else is dropped. */
  if (header_length != 8 || length > SG_AM_MAX_BYTES || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV))
    return UCS_OK;
  uint32_t hdr[2];
  memcpy(hdr, header, 8);
  if (hdr[0] >= (uint32_t)u->size || hdr[1] >= SG_AM_QUEUES) return UCS_OK;
  sg__det_heard(u->det, (int)hdr[0]);
  am_msg *m = sg__malloc(sizeof *m + (length ? length : 1));
  if (m == NULL) {
    u->am_oom = 1;
    return UCS_OK;
  }
  m->next = NULL;
  m->peer = (int)hdr[0];
  m->len = length;
  if (length) memcpy(m->data, data, length);
  am_append(u, hdr[1], m);
  return UCS_OK;
}

/* A check-in: header (sender, CHECKIN_MAGIC), an eager payload of at most
 * SG__COMM_CHECKIN_BYTES; the payload itself is the health layer's to
 * validate (sg_checkin_decode). Anything else, or one past a full queue, is
 * dropped and counted. */
static ucs_status_t checkin_cb(void *arg, const void *header, size_t header_length, void *data, size_t length,
                               const ucp_am_recv_param_t *param) {
  sg__ucx *u = arg;
  uint32_t hdr[2] = {0, 0};
  if (header_length == 8) memcpy(hdr, header, 8);
  if (header_length != 8 || hdr[1] != CHECKIN_MAGIC || hdr[0] >= (uint32_t)u->size ||
      length > SG__COMM_CHECKIN_BYTES || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ||
      u->n_checkins >= MAX_QUEUED_CHECKINS) {
    u->checkins_dropped++;
    return UCS_OK;
  }
  sg__det_heard(u->det, (int)hdr[0]);
  am_msg *m = sg__malloc(sizeof *m + (length ? length : 1));
  if (m == NULL) {
    u->checkins_dropped++;
    return UCS_OK;
  }
  m->next = NULL;
  m->peer = (int)hdr[0];
  m->len = length;
  if (length) memcpy(m->data, data, length);
  am_append(u, CHECKIN_QUEUE, m);
  u->n_checkins++;
  return UCS_OK;
}

bool sg__ucx_checkin_send(sg__ucx *u, int peer, const void *buf, size_t bytes) {
  if (peer < 0 || peer >= u->size || peer == u->rank || u->eps[peer] == NULL ||
      bytes > SG__COMM_CHECKIN_BYTES || sg__det_peer_dead(u->det, peer))
    return false;
  if (u->ci_req[peer]) {
    /* A peer that takes nothing (stopped) keeps its send pending: never more
     * than one in flight, as for heartbeats. */
    if (ucp_request_check_status(u->ci_req[peer]) == UCS_INPROGRESS) return false;
    ucp_request_free(u->ci_req[peer]);
    u->ci_req[peer] = NULL;
  }
  memcpy(u->ci_buf[peer], buf, bytes);
  static const uint32_t magic = CHECKIN_MAGIC;
  uint32_t hdr[2] = {(uint32_t)u->rank, magic};
  ucp_request_param_t rp = {0};
  rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  rp.flags = UCP_AM_SEND_FLAG_EAGER;
  void *x = ucp_am_send_nbx(u->eps[peer], AM_ID_CHECKIN, hdr, sizeof hdr, u->ci_buf[peer], bytes, &rp);
  if (UCS_PTR_IS_ERR(x)) return false;
  if (UCS_PTR_IS_PTR(x)) u->ci_req[peer] = x;
  return true;
}

sg_status sg__ucx_checkin_take(sg__ucx *u, void *buf, size_t *bytes, int *peer) {
  am_msg *m = u->am_head[CHECKIN_QUEUE];
  if (m == NULL) return SG_ERR_NOT_FOUND;
  memcpy(buf, m->data, m->len); /* at most SG__COMM_CHECKIN_BYTES: checked on arrival */
  *bytes = m->len;
  *peer = m->peer;
  u->am_head[CHECKIN_QUEUE] = m->next;
  if (u->am_head[CHECKIN_QUEUE] == NULL) u->am_tail[CHECKIN_QUEUE] = NULL;
  u->n_checkins--;
  sg__free(m);
  return SG_OK;
}

uint64_t sg__ucx_checkins_dropped(const sg__ucx *u) { return u->checkins_dropped; }

/* Heartbeats and failure notices go to the detector, which owns their
 * layouts and validates them (SPEC S1). A heartbeat that came by
 * rendezvous (not eager, so not whole in `data`) is refused. */
static ucs_status_t hb_cb(void *arg, const void *header, size_t header_length, void *data, size_t length,
                          const ucp_am_recv_param_t *param) {
  sg__ucx *u = arg;
  if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) sg__det_reject(u->det);
  else sg__det_on_heartbeat(u->det, header, header_length, data, length);
  return UCS_OK;
}

static ucs_status_t notice_cb(void *arg, const void *header, size_t header_length, void *data, size_t length,
                              const ucp_am_recv_param_t *param) {
  (void)data;
  (void)param;
  sg__ucx *u = arg;
  sg__det_on_notice(u->det, header, header_length, length);
  return UCS_OK;
}

sg_status sg__ucx_am_send(sg__ucx *u, int peer, unsigned id, const void *buf, size_t bytes,
                          int64_t deadline) {
  SG_CHECK(check_peer(u, peer, "active message"));
  if (id >= SG_AM_QUEUES || bytes > SG_AM_MAX_BYTES)
    return sg__error(SG_ERR_INVALID_ARG, "active message to peer rank %d: queue %u or size %zu out of range",
                     peer, id, bytes);
  uint32_t hdr[2] = {(uint32_t)u->rank, id};
  ucp_request_param_t rp = {0};
  rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  rp.flags = UCP_AM_SEND_FLAG_EAGER;
  void *x = ucp_am_send_nbx(u->eps[peer], AM_ID_BASE + id, hdr, sizeof hdr, buf, bytes, &rp);
  return wait_raw(u, x, peer, "active message send", deadline, false);
}

sg_status sg__ucx_am_take(sg__ucx *u, unsigned id, void *buf, size_t *bytes, int *peer) {
  if (u->am_oom) {
    u->am_oom = 0;
    return sg__error(SG_ERR_NO_MEMORY, "active messages were dropped on rank %d: out of memory", u->rank);
  }
  am_msg *m = u->am_head[id];
  if (m == NULL) return SG_ERR_NOT_FOUND;
  if (m->len > *bytes) {
    size_t cap = *bytes;
    *bytes = m->len;
    return sg__error(SG_ERR_TRUNCATED, "active message from peer rank %d has %zu bytes, buffer holds %zu",
                     m->peer, m->len, cap);
  }
  memcpy(buf, m->data, m->len);
  *bytes = m->len;
  *peer = m->peer;
  u->am_head[id] = m->next;
  if (u->am_head[id] == NULL) u->am_tail[id] = NULL;
  sg__free(m);
  return SG_OK;
}
