/* The UCX transport (SPEC M2). One context and one worker per process, both in
 * single-thread mode: the rank's scheduler thread owns them (DESIGN.md, "How a
 * step flows"). This is the only file that includes UCX headers and the only
 * place UCX status codes become sg_status values (ucx_error below).
 *
 * Requests are issued without callbacks and polled. A request given up
 * (a failed collective) is cancelled and then progressed until UCX lets go
 * of it (bounded, settle_request): cancelling does not stop a receive UCX
 * already matched (a rendezvous copy keeps writing into the buffer), and
 * the caller frees the buffer once the call returned. */
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

/* Why a peer is unreachable; the first cause is kept (sticky). */
enum { DEATH_NONE = 0, DEATH_SILENT, DEATH_UCX, DEATH_REPORTED, DEATH_HUNG };
typedef struct peer_death {
  int how;
  uint32_t seq;       /* order of declaration: the first is the root cause */
  int64_t silence;    /* DEATH_SILENT: ms heard nothing */
  ucs_status_t us;    /* DEATH_UCX */
  int reporter;       /* DEATH_REPORTED: the rank that told us */
  uint32_t notice[4]; /* our notice to the others; must outlive its sends */
  char *why;          /* DEATH_HUNG, or reported as stuck: the hang diagnosis (hang.c) */
} peer_death;

struct sg__ucx {
  int rank, size, timeout_ms;
  /* Liveness (SPEC H1). heard[p] is when we last heard from p, on a clock
   * that stops while this rank is away from UCX (see tick): silence only
   * counts time we were listening. dead[p] is sticky. */
  int hb_ms, dead_ms;
  int64_t *heard;
  /* When we last heard from p on the plain clock (no credit for time away):
   * the last sign of life that a recovery's detection time starts from. */
  int64_t *seen;
  void **hb_req; /* per peer: a heartbeat still in flight, or NULL */
  uint32_t hb_hdr[2];
  peer_death *death; /* per peer */
  uint32_t n_dead;
  int expelled_by; /* a peer that declared us unreachable, or -1 */
  int64_t next_hb, last_tick;
  int scope_all; /* a collective is running: every peer is involved */
  /* Hang diagnosis (SPEC H7). `me` is our position (collectives entered,
   * inside, the label bound at entry); pos[p] what p's latest valid
   * heartbeat said. The hang clock of our collective starts when we entered
   * it and restarts whenever a peer is seen entering a collective
   * (settle_ms): a peer is stuck only once hang_ms passed with nobody
   * moving. */
  sg_comm_position me;
  char cur_label[SG_COMM_LABEL_MAX + 1]; /* sg_comm_label's; bound by the next collective */
  sg_comm_position *pos;
  uint8_t (*hb_buf)[SG__HB_MAX_BYTES]; /* per peer: the payload of its heartbeat in flight */
  uint8_t *stuck;                      /* per peer: scratch of the hang check */
  int hang_ms;
  int64_t settle_until; /* end of the window given-up requests are progressed in (settle_request) */
  int away_flag;        /* atomic: sg__comm_set_away, any thread; copied into me.away for each heartbeat */
  int64_t enter_ms, settle_ms;
  uint64_t hb_rejected;
  int expelled_hung; /* expelled_by found us stuck */
  int abort_flag;    /* set by sg__ucx_abort from any thread (atomic access only) */
  ucp_context_h ctx;
  ucp_worker_h worker;
  ucp_address_t *addr;
  size_t addr_len;
  ucp_ep_h *eps;
  ucs_status_t *ep_status; /* set by the error handler when a peer fails */
  sg__ucx_req *free_reqs;
  sg__ucx_req **blocks; /* request pool, freed at destroy */
  uint32_t n_blocks, cap_blocks;
  am_msg *am_head[SG_AM_QUEUES], *am_tail[SG_AM_QUEUES];
  int am_oom;
};

static void declare_dead(sg__ucx *u, int peer, int how, int64_t silence, ucs_status_t us, int reporter,
                         const char *why);
static sg_status death_error(const sg__ucx *u, int peer);
static int peer_failure(ucs_status_t us);
static int first_dead(const sg__ucx *u, int lo, int hi);
static void scope_of(const sg__ucx *u, int peer, int *lo, int *hi);

/* The one place UCX codes are translated. A code that says the peer went
 * away marks it unreachable and reports the root cause (the first
 * unreachable peer the operation involves). */
static sg_status ucx_error(sg__ucx *u, ucs_status_t us, int peer, const char *what) {
  if (u && peer >= 0 && peer < u->size && peer_failure(us)) {
    declare_dead(u, peer, DEATH_UCX, 0, us, -1, NULL);
    /* The peer may have left because it saw another rank die first: it told
     * us so before leaving, but its notice may sit behind the message whose
     * failure we see now. Take what has arrived before naming a cause. */
    int64_t until = sg__now_ms() + 20;
    for (int idle = 0; idle < 4 && sg__now_ms() < until;)
      idle = ucp_worker_progress(u->worker) ? 0 : idle + 1;
    int lo, hi;
    scope_of(u, peer, &lo, &hi);
    int d = first_dead(u, lo, hi);
    return death_error(u, d >= 0 ? d : peer);
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

static void note_heard(sg__ucx *u, int peer) {
  if (peer >= 0 && peer < u->size) u->heard[peer] = u->seen[peer] = sg__now_ms();
}

static ucs_status_t am_cb(void *arg, const void *header, size_t header_length, void *data, size_t length,
                          const ucp_am_recv_param_t *param);

static ucs_status_t hb_cb(void *arg, const void *header, size_t header_length, void *data, size_t length,
                          const ucp_am_recv_param_t *param);
static ucs_status_t notice_cb(void *arg, const void *header, size_t header_length, void *data, size_t length,
                              const ucp_am_recv_param_t *param);

/* AM ids AM_ID_BASE + 0..7 carry the user's queues; AM_ID_HB (heartbeats) and
 * AM_ID_NOTICE ("rank P is unreachable") lie outside that range, so no user
 * queue ever sees one. */
#define AM_ID_BASE 16
#define AM_ID_HB (AM_ID_BASE + SG_AM_QUEUES)
#define AM_ID_NOTICE (AM_ID_BASE + SG_AM_QUEUES + 1)
#define HB_MAGIC 0x48425447u     /* a heartbeat's second header word */
#define NOTICE_MAGIC 0x44454144u /* a failure notice's second header word */
#define NOTICE_UNREACHABLE 0u    /* a notice's fourth word: why */
#define NOTICE_STUCK 1u

sg_status sg__ucx_create(int rank, int world_size, int timeout_ms, sg__ucx **out) {
  *out = NULL;
  sg__ucx *u = sg__calloc(1, sizeof *u);
  if (u == NULL) return sg__error(SG_ERR_NO_MEMORY, "UCX: out of memory");
  u->rank = rank;
  u->size = world_size;
  u->timeout_ms = timeout_ms;
  u->eps = sg__calloc((size_t)world_size, sizeof *u->eps);
  u->ep_status = sg__calloc((size_t)world_size, sizeof *u->ep_status);
  u->heard = sg__calloc((size_t)world_size, sizeof *u->heard);
  u->seen = sg__calloc((size_t)world_size, sizeof *u->seen);
  u->hb_req = sg__calloc((size_t)world_size, sizeof *u->hb_req);
  u->death = sg__calloc((size_t)world_size, sizeof *u->death);
  u->pos = sg__calloc((size_t)world_size, sizeof *u->pos);
  u->hb_buf = sg__calloc((size_t)world_size, sizeof *u->hb_buf);
  u->stuck = sg__calloc((size_t)world_size, 1);
  u->expelled_by = -1;
  u->hb_hdr[0] = (uint32_t)rank;
  u->hb_hdr[1] = HB_MAGIC;
  sg_status st = SG_OK;
  if (u->eps == NULL || u->ep_status == NULL || u->heard == NULL || u->seen == NULL || u->hb_req == NULL ||
      u->death == NULL || u->pos == NULL || u->hb_buf == NULL || u->stuck == NULL) {
    st = sg__error(SG_ERR_NO_MEMORY, "UCX: out of memory");
    goto fail;
  }
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
  for (unsigned id = 0; id < SG_AM_QUEUES + 2; id++) {
    ucp_am_handler_param_t hp = {0};
    hp.field_mask =
        UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    hp.id = AM_ID_BASE + id;
    hp.cb = id < SG_AM_QUEUES ? am_cb : AM_ID_BASE + id == AM_ID_HB ? hb_cb : notice_cb;
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
  if (u->hb_req)
    for (int i = 0; i < u->size; i++)
      if (u->hb_req[i]) ucp_request_free(u->hb_req[i]); /* UCX finishes or cancels it at close */
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
  for (unsigned i = 0; i < SG_AM_QUEUES; i++)
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
  sg__free(u->heard);
  sg__free(u->seen);
  sg__free(u->hb_req);
  if (u->death)
    for (int i = 0; i < u->size; i++) sg__free(u->death[i].why);
  sg__free(u->death);
  sg__free(u->pos);
  sg__free(u->hb_buf);
  sg__free(u->stuck);
  sg__free(u);
}

sg_status sg__ucx_address(sg__ucx *u, const void **addr, size_t *len) {
  *addr = u->addr;
  *len = u->addr_len;
  return SG_OK;
}

sg_status sg__ucx_connect(sg__ucx *u, int peer, const void *addr, size_t len) {
  if (peer < 0 || peer >= u->size || len == 0)
    return sg__error(SG_ERR_INVALID_ARG, "UCX connect: bad peer %d", peer);
  /* A worker address is opaque to us; UCX unpacks it. Its length was bounded by
   * the store (SG_STORE_MAX_VALUE), and only token holders could publish it. */
  ucp_ep_params_t ep = {0};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                  UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep.address = addr;
  /* Peer failure detection costs the shared-memory transports in UCX 1.13
   * (they are left out), so it is opt-in: SG_UCX_PEER_ERRORS=1. Timeouts
   * bound every wait either way. */
  const char *pe = getenv("SG_UCX_PEER_ERRORS");
  ep.err_mode = pe && strcmp(pe, "1") == 0 ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
  ep.err_handler.cb = ep_error_cb;
  ep.err_handler.arg = u;
  u->heard[peer] = u->seen[peer] = sg__now_ms();
  ucs_status_t us = ucp_ep_create(u->worker, &ep, &u->eps[peer]);
  if (us != UCS_OK) {
    u->eps[peer] = NULL;
    return ucx_error(u, us, peer, "endpoint create");
  }
  return SG_OK;
}

void sg__ucx_progress(sg__ucx *u) { ucp_worker_progress(u->worker); }

/* ---- liveness (SPEC H1) ---------------------------------------------------- */

void sg__ucx_set_liveness(sg__ucx *u, int heartbeat_ms, int dead_ms) {
  int64_t now = sg__now_ms();
  u->hb_ms = heartbeat_ms;
  u->dead_ms = dead_ms;
  /* Nobody is blamed for the time before liveness was on. */
  for (int p = 0; p < u->size; p++) u->heard[p] = now;
  u->last_tick = now;
  u->next_hb = now;
}

void sg__ucx_abort(sg__ucx *u) { __atomic_store_n(&u->abort_flag, 1, __ATOMIC_RELEASE); }

/* Called as every operation begins: whatever collective we were in is over. */
void sg__ucx_scope_all(sg__ucx *u, int on) {
  u->scope_all = on;
  u->me.inside = 0;
}

/* Records that `peer` is unreachable (first cause wins) and tells every other
 * live peer, so that survivors agree on the cause even when one of them sees
 * a secondary symptom first (e.g. a peer that already left after noticing). */
static void declare_dead(sg__ucx *u, int peer, int how, int64_t silence, ucs_status_t us, int reporter,
                         const char *why) {
  peer_death *d = &u->death[peer];
  if (d->how != DEATH_NONE) return;
  d->how = how;
  d->silence = silence;
  d->us = us;
  d->reporter = reporter;
  d->seq = ++u->n_dead;
  if (why != NULL) d->why = sg__strdup(why); /* NULL when out of memory: death_error says less */
  if (how == DEATH_REPORTED) return;         /* the reporter told everyone already */
  d->notice[0] = (uint32_t)u->rank;
  d->notice[1] = NOTICE_MAGIC;
  d->notice[2] = (uint32_t)peer;
  d->notice[3] = how == DEATH_HUNG ? NOTICE_STUCK : NOTICE_UNREACHABLE;
  for (int q = 0; q < u->size; q++) {
    /* A stuck rank still listens (its communication thread is fine): it is
     * told too, so that it gives up instead of waiting forever. */
    if (q == u->rank || (q == peer && how != DEATH_HUNG) || u->eps[q] == NULL) continue;
    if (q != peer && u->death[q].how != DEATH_NONE) continue;
    ucp_request_param_t rp = {0};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    rp.flags = UCP_AM_SEND_FLAG_EAGER;
    /* The header lives in u->death until destroy, so the request can be
     * released at once; best effort. */
    void *x = ucp_am_send_nbx(u->eps[q], AM_ID_NOTICE, d->notice, sizeof d->notice, NULL, 0, &rp);
    if (UCS_PTR_IS_PTR(x)) ucp_request_free(x);
  }
}

static sg_status death_error(const sg__ucx *u, int peer) {
  const peer_death *d = &u->death[peer];
  switch (d->how) {
    case DEATH_SILENT:
      return sg__error(
          SG_ERR_COMM,
          "rank %d is unreachable: nothing heard for %lld ms (rank %d; heartbeat every %d ms, dead "
          "after %d ms)",
          peer, (long long)d->silence, u->rank, u->hb_ms, u->dead_ms);
    case DEATH_UCX:
      return sg__error(SG_ERR_COMM, "rank %d is unreachable: UCX reports %s (rank %d)", peer,
                       ucs_status_string(d->us), u->rank);
    case DEATH_HUNG:
      if (d->why) return sg__error(SG_ERR_COMM, "%s (diagnosed on rank %d)", d->why, u->rank);
      return sg__error(SG_ERR_COMM, "rank %d is stuck: it did not enter collective #%llu for %d ms (rank %d)",
                       peer, (unsigned long long)u->me.collective, u->hang_ms, u->rank);
    default:
      if (d->why) return sg__error(SG_ERR_COMM, "%s (rank %d)", d->why, u->rank);
      return sg__error(SG_ERR_COMM, "rank %d is unreachable: rank %d reported it unreachable (rank %d)", peer,
                       d->reporter, u->rank);
  }
}

/* Status codes with which UCX reports that the peer went away. */
static int peer_failure(ucs_status_t us) {
  return us == UCS_ERR_IO_ERROR || us == UCS_ERR_CONNECTION_RESET || us == UCS_ERR_ENDPOINT_TIMEOUT ||
         us == UCS_ERR_NOT_CONNECTED || us == UCS_ERR_REJECTED;
}

/* The unreachable peer to report among [lo, hi), the likely root cause: the
 * first declared by silence or by another rank's notice; failing that, the
 * first that UCX reported gone (a rank that noticed a failure and left shows
 * up as a UCX error too, but it will have told us whom it gave up). -1 when
 * none. */
static int first_dead(const sg__ucx *u, int lo, int hi) {
  int best = -1;
  for (int p = lo; p < hi; p++) {
    const peer_death *d = &u->death[p];
    if (d->how == DEATH_NONE) continue;
    if (best < 0) {
      best = p;
      continue;
    }
    const peer_death *b = &u->death[best];
    int d_primary = d->how != DEATH_UCX, b_primary = b->how != DEATH_UCX;
    if (d_primary > b_primary || (d_primary == b_primary && d->seq < b->seq)) best = p;
  }
  return best;
}

static void scope_of(const sg__ucx *u, int peer, int *lo, int *hi) {
  *lo = peer, *hi = peer + 1;
  if (peer < 0 || u->scope_all) *lo = 0, *hi = u->size;
}

/* Sends due heartbeats. Called often from every wait loop and sg_comm_poll. */
static void tick(sg__ucx *u, int64_t now) {
  if (u->hb_ms <= 0) return;
  /* While this rank was away from UCX (computing between calls) it could not
   * hear anybody: that time does not count as a peer's silence. Without
   * this, the first wait after a long computation would blame every peer
   * whose heartbeats are still sitting unread in our queues. */
  int64_t gap = now - u->last_tick;
  if (gap > u->hb_ms)
    for (int p = 0; p < u->size; p++) u->heard[p] += gap;
  u->last_tick = now;
  if (now < u->next_hb) return;
  u->next_hb = now + u->hb_ms;
  for (int p = 0; p < u->size; p++) {
    if (p == u->rank || u->eps[p] == NULL || u->death[p].how != DEATH_NONE) continue;
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
    u->me.away = __atomic_load_n(&u->away_flag, __ATOMIC_RELAXED);
    size_t len = sg__hb_encode(&u->me, u->hb_buf[p]);
    void *x = ucp_am_send_nbx(u->eps[p], AM_ID_HB, u->hb_hdr, sizeof u->hb_hdr, u->hb_buf[p], len, &rp);
    /* A failed heartbeat is not an error by itself: the peer's silence (or
     * its endpoint status) decides. */
    if (UCS_PTR_IS_PTR(x)) u->hb_req[p] = x;
  }
}

/* The hang check (SPEC H7; the rule is in sg_comm_set_hang_timeout's
 * documentation): inside our collective #N for hang_ms since a peer last
 * entered a collective, every live peer whose heartbeats say it has not
 * entered #N is stuck. They become unreachable (DEATH_HUNG, first-hand) with the
 * diagnosis, and everybody, the stuck ones included, is told. */
static void check_hang(sg__ucx *u, int64_t now) {
  if (u->hang_ms <= 0 || u->hb_ms <= 0 || !u->scope_all || !u->me.inside) return;
  int64_t since = u->settle_ms > u->enter_ms ? u->settle_ms : u->enter_ms;
  if (now - since <= u->hang_ms) return;
  int n = 0;
  for (int p = 0; p < u->size; p++) {
    const sg_comm_position *q = &u->pos[p];
    u->stuck[p] = p != u->rank && u->death[p].how == DEATH_NONE && !q->away &&
                  (!q->known || q->collective < u->me.collective);
    n += u->stuck[p];
  }
  if (n == 0) return;
  char text[1024];
  sg__hang_view v = {u->rank,    u->size, u->me.collective, u->me.label, now - u->enter_ms,
                     u->hang_ms, u->pos,  u->stuck,         -1};
  sg__hang_text(&v, text, sizeof text);
  for (int p = 0; p < u->size; p++)
    if (u->stuck[p]) declare_dead(u, p, DEATH_HUNG, 0, UCS_OK, -1, text);
}

/* SG_ERR_COMM naming the peer when `peer` (every peer when -1 or while a
 * collective runs; nobody for SG_UCX_NOBODY) is unreachable, when a peer
 * declared this rank unreachable, or when the communicator was aborted;
 * SG_OK otherwise. */
static sg_status check_alive(sg__ucx *u, int peer, int64_t now) {
  if (__atomic_load_n(&u->abort_flag, __ATOMIC_ACQUIRE))
    return sg__error(SG_ERR_COMM, "rank %d: the communicator was aborted", u->rank);
  if (peer == SG_UCX_NOBODY) return SG_OK;
  if (u->expelled_by >= 0 && u->expelled_hung)
    return sg__error(SG_ERR_COMM,
                     "rank %d was given up by its peers: rank %d found it stuck (it had not entered the "
                     "collective the others waited in for longer than their hang timeout; this rank's last: "
                     "#%llu (%s))",
                     u->rank, u->expelled_by, (unsigned long long)u->me.collective,
                     u->me.label[0] ? u->me.label : "no label");
  if (u->expelled_by >= 0)
    return sg__error(SG_ERR_COMM, "rank %d was given up by its peers: rank %d declared it unreachable",
                     u->rank, u->expelled_by);
  int lo, hi;
  scope_of(u, peer, &lo, &hi);
  for (int p = lo; p < hi; p++) {
    if (p == u->rank || u->death[p].how != DEATH_NONE) continue;
    if (u->ep_status[p] != UCS_OK) {
      declare_dead(u, p, DEATH_UCX, 0, u->ep_status[p], -1, NULL);
    } else if (u->hb_ms > 0 && now - u->heard[p] > u->dead_ms) {
      declare_dead(u, p, DEATH_SILENT, now - u->heard[p], UCS_OK, -1, NULL);
    }
  }
  check_hang(u, now);
  int d = first_dead(u, lo, hi);
  return d < 0 ? SG_OK : death_error(u, d);
}

sg_status sg__ucx_poll(sg__ucx *u, int peer) {
  ucp_worker_progress(u->worker);
  int64_t now = sg__now_ms();
  tick(u, now);
  return check_alive(u, peer, now);
}

int64_t sg__ucx_quiet_ms(const sg__ucx *u, int peer) {
  if (peer < 0 || peer >= u->size || peer == u->rank) return -1;
  return sg__now_ms() - u->seen[peer];
}

int64_t sg__ucx_silence_ms(const sg__ucx *u, int peer) {
  if (peer < 0 || peer >= u->size || peer == u->rank) return -1;
  int64_t now = sg__now_ms(), since = u->heard[peer];
  /* With liveness off, time away is not credited (tick() does not run). */
  if (u->hb_ms <= 0) return now - since;
  /* Credit the time we have been away since the last tick, as tick() will. */
  if (now - u->last_tick > u->hb_ms) since += now - u->last_tick;
  return now - since;
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
  if (u->death[peer].how != DEATH_NONE) return death_error(u, peer);
  return SG_OK;
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

/* Cancels x and progresses until UCX no longer uses its buffer, within a
 * window shared by the requests given up together: ucp_request_cancel only
 * stops an unmatched receive. */
static void settle_request(sg__ucx *u, void *x) {
  if (ucp_request_check_status(x) != UCS_INPROGRESS) return;
  ucp_request_cancel(u->worker, x);
  int64_t now = sg__now_ms();
  if (now > u->settle_until + 1000) u->settle_until = now + SETTLE_MS; /* a new failure */
  while (ucp_request_check_status(x) == UCS_INPROGRESS && sg__now_ms() < u->settle_until)
    if (ucp_worker_progress(u->worker) == 0) sched_yield();
}

void sg__ucx_abandon(sg__ucx *u, sg__ucx_req **req) {
  sg__ucx_req *r = *req;
  if (r == NULL) return;
  if (r->ucx) settle_request(u, r->ucx);
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
    if (st != SG_OK) return st;
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
  if (r->is_recv && us == UCS_OK) note_heard(u, peer);
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
 * as a send to `peer` (-1: every peer); frees it. */
static sg_status wait_raw(sg__ucx *u, void *x, int peer, const char *what, int64_t deadline) {
  if (x == NULL) return SG_OK;
  if (UCS_PTR_IS_ERR(x)) return ucx_error(u, UCS_PTR_STATUS(x), peer, what);
  sg__ucx_req r = {.ucx = x, .peer = peer};
  ucs_status_t us;
  sg_status st = wait_request(u, &r, what, deadline, &us);
  if (st != SG_OK) settle_request(u, x);
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
  return wait_raw(u, ucp_worker_flush_nbx(u->worker, &rp), -1, "flush", deadline);
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
  SG_CHECK(wait_raw(u, x, peer, op == 0 ? "atomic fetch-add" : "atomic compare-swap", deadline));
  if (result) *result = reply;
  return SG_OK;
}

/* ---- active messages ------------------------------------------------------- */

/* Every queue's handler is this callback; the 8-byte header carries the
 * sender's rank and the queue id (both u32), since UCX passes no handler id. */
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
  note_heard(u, (int)hdr[0]);
  am_msg *m = sg__malloc(sizeof *m + (length ? length : 1));
  if (m == NULL) {
    u->am_oom = 1;
    return UCS_OK;
  }
  m->next = NULL;
  m->peer = (int)hdr[0];
  m->len = length;
  if (length) memcpy(m->data, data, length);
  unsigned q = hdr[1];
  if (u->am_tail[q]) u->am_tail[q]->next = m;
  else u->am_head[q] = m;
  u->am_tail[q] = m;
  return UCS_OK;
}

/* A heartbeat: 8-byte header (sender's rank, HB_MAGIC) and the sender's
 * position (liveness.c, sg__hb_decode). A malformed one is counted and
 * ignored altogether (SPEC S1): not even taken as a sign of life. */
static ucs_status_t hb_cb(void *arg, const void *header, size_t header_length, void *data, size_t length,
                          const ucp_am_recv_param_t *param) {
  sg__ucx *u = arg;
  uint32_t hdr[2];
  sg_comm_position p;
  if (header_length != 8 || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) goto bad;
  memcpy(hdr, header, 8);
  if (hdr[0] >= (uint32_t)u->size || hdr[0] == (uint32_t)u->rank || hdr[1] != HB_MAGIC) goto bad;
  if (sg__hb_decode(data, length, &p, NULL, 0) != SG_OK) goto bad;
  int peer = (int)hdr[0];
  note_heard(u, peer);
  /* A peer entering a collective restarts our hang clock: the job is moving
   * (also behind us: a broadcast root may run collectives ahead of ranks
   * still busy receiving). */
  if (u->me.inside && (!u->pos[peer].known || p.collective > u->pos[peer].collective))
    u->settle_ms = sg__now_ms();
  /* So does a peer coming back from its program (sg__comm_set_away): it gets
   * a whole hang timeout to reach the collective. */
  if (u->pos[peer].away && !p.away) u->settle_ms = sg__now_ms();
  u->pos[peer] = p;
  return UCS_OK;
bad:
  u->hb_rejected++;
  return UCS_OK;
}

/* A failure notice: 16-byte header (sender, NOTICE_MAGIC, the rank given up,
 * why: NOTICE_UNREACHABLE or NOTICE_STUCK). */
static ucs_status_t notice_cb(void *arg, const void *header, size_t header_length, void *data, size_t length,
                              const ucp_am_recv_param_t *param) {
  (void)data;
  (void)param;
  sg__ucx *u = arg;
  if (header_length != 16 || length != 0) return UCS_OK;
  uint32_t hdr[4];
  memcpy(hdr, header, 16);
  if (hdr[0] >= (uint32_t)u->size || hdr[0] == (uint32_t)u->rank || hdr[1] != NOTICE_MAGIC ||
      hdr[2] >= (uint32_t)u->size || hdr[3] > NOTICE_STUCK)
    return UCS_OK;
  note_heard(u, (int)hdr[0]);
  if (hdr[2] == (uint32_t)u->rank) {
    /* We were given up (e.g. we were stopped for longer than dead_ms, or
     * found stuck): the others have moved on, so nothing we wait for will
     * come. */
    if (u->expelled_by < 0) {
      u->expelled_by = (int)hdr[0];
      u->expelled_hung = hdr[3] == NOTICE_STUCK;
    }
  } else if (hdr[3] == NOTICE_STUCK && u->death[hdr[2]].how == DEATH_NONE) {
    /* Our own diagnosis of the stuck rank, from our view, naming the finder. */
    int peer = (int)hdr[2];
    char text[1024];
    memset(u->stuck, 0, (size_t)u->size);
    u->stuck[peer] = 1;
    int64_t now = sg__now_ms();
    sg__hang_view v = {u->rank,
                       u->size,
                       u->me.inside ? u->me.collective : u->me.collective + 1,
                       u->me.inside ? u->me.label : u->cur_label,
                       u->me.inside ? now - u->enter_ms : 0,
                       u->hang_ms,
                       u->pos,
                       u->stuck,
                       (int)hdr[0],
                       !u->me.inside};
    sg__hang_text(&v, text, sizeof text);
    declare_dead(u, peer, DEATH_REPORTED, 0, UCS_OK, (int)hdr[0], text);
  } else {
    declare_dead(u, (int)hdr[2], DEATH_REPORTED, 0, UCS_OK, (int)hdr[0], NULL);
  }
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
  return wait_raw(u, x, peer, "active message send", deadline);
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

/* ---- fault injection and membership queries (src/parallel recovery) ------------ */

void sg__ucx_cut(sg__ucx *u, int peer) {
  if (peer < 0 || peer >= u->size || peer == u->rank) return;
  /* As an endpoint failure: immediate, sticky, and the others are told. */
  declare_dead(u, peer, DEATH_UCX, 0, UCS_ERR_UNREACHABLE, -1, NULL);
}

int sg__ucx_peer_dead(const sg__ucx *u, int peer) {
  if (peer < 0 || peer >= u->size || peer == u->rank || u->death[peer].how == DEATH_NONE) return 0;
  return u->death[peer].how == DEATH_REPORTED ? 2 : 1;
}

/* ---- positions in the collective schedule (SPEC H7) ------------------------- */

void sg__ucx_coll_enter(sg__ucx *u) {
  u->me.collective++;
  u->me.inside = 1;
  u->me.known = 1;
  memcpy(u->me.label, u->cur_label, sizeof u->me.label);
  u->enter_ms = u->settle_ms = sg__now_ms();
}

void sg__ucx_set_label(sg__ucx *u, const char *text) {
  snprintf(u->cur_label, sizeof u->cur_label, "%s", text ? text : "");
}

void sg__ucx_set_hang(sg__ucx *u, int hang_ms) { u->hang_ms = hang_ms; }

void sg__ucx_set_away(sg__ucx *u, bool away) {
  __atomic_store_n(&u->away_flag, away ? 1 : 0, __ATOMIC_RELAXED);
}

void sg__ucx_position(const sg__ucx *u, int peer, sg_comm_position *out) {
  *out = peer == u->rank ? u->me : u->pos[peer];
  if (peer == u->rank) {
    out->known = 1;
    out->away = __atomic_load_n(&u->away_flag, __ATOMIC_RELAXED);
  }
}

uint64_t sg__ucx_hb_rejected(const sg__ucx *u) { return u->hb_rejected; }
