/* Internal pieces of the communication layer (src/comm). No UCX type appears
 * here: ucx.c is the only file that includes <ucp/api/ucp.h>, and the only
 * one that translates UCX status codes. */
#ifndef SG_COMM_INTERNAL_H
#define SG_COMM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"
#include "core/core.h"

/* ---- rendezvous store (store.c) ------------------------------------------ */

/* Starts the store server on addr:port in a background thread. */
sg_status sg__store_server_start(const char *addr, int port, const char *token, sg__store_server **out);
void sg__store_server_stop(sg__store_server *srv);
/* The bound port (the kernel's choice when started with port 0). */
int sg__store_server_port(const sg__store_server *srv);

/* ---- transport (ucx.c) --------------------------------------------------- */

typedef struct sg__ucx sg__ucx;
typedef struct sg__ucx_req sg__ucx_req; /* an outstanding operation */

typedef struct sg__detector sg__detector;
/* The transport reports to `det` (owned by the caller, outliving u). */
sg_status sg__ucx_create(int rank, int world_size, int timeout_ms, sg__detector *det, sg__ucx **out);
void sg__ucx_destroy(sg__ucx *u);
/* This worker's address (owned by u). */
sg_status sg__ucx_address(sg__ucx *u, const void **addr, size_t *len);
/* Connects to peer's worker address. Besides its silence, a peer's failure
 * is learnt from its process exiting when it runs under this kernel (a
 * pidfd, proc_watch.c), else from UCX's peer-error handling on its endpoint. */
typedef struct sg__proc_ident sg__proc_ident;
sg_status sg__ucx_connect(sg__ucx *u, int peer, const void *addr, size_t len, const sg__proc_ident *id);

/* Tag space: channel (collective or user) and a sequence chosen by the caller.
 * Messages between a pair under the same tag are matched in order. */
#define SG_TAG_USER 0u
#define SG_TAG_COLL 1u
#define SG_TAG_CHECK 2u

sg_status sg__ucx_isend(sg__ucx *u, int peer, unsigned channel, uint32_t tag, const void *buf, size_t bytes,
                        sg__ucx_req **req);
sg_status sg__ucx_irecv(sg__ucx *u, int peer, unsigned channel, uint32_t tag, void *buf, size_t bytes,
                        sg__ucx_req **req);
/* Progresses until `req` completes or the deadline (absolute sg__now_ms) passes.
 * Frees the request in every case; *req becomes NULL. NULL *req is done. */
sg_status sg__ucx_wait(sg__ucx *u, sg__ucx_req **req, int64_t deadline);
/* Nonzero when `req` has completed (or is NULL); never blocks. */
int sg__ucx_test(sg__ucx *u, sg__ucx_req *req);
/* Cancels and releases a request after an error. */
void sg__ucx_abandon(sg__ucx *u, sg__ucx_req **req);
void sg__ucx_progress(sg__ucx *u);

/* Liveness (SPEC H1): the transport carries heartbeats and failure notices
 * on internal AM ids and reports what happens to the failure detector
 * (below); every wait loop sends due heartbeats and fails with SG_ERR_COMM
 * naming the peer when the detector finds the peer it waits on (every peer
 * in a collective) unreachable. */
#define SG_UCX_NOBODY (-2) /* sg__ucx_poll: check no peer, only the abort flag */
/* One non-blocking progress: take arrivals, send due heartbeats; then the
 * liveness check of `peer` (-1: every peer; SG_UCX_NOBODY). */
sg_status sg__ucx_poll(sg__ucx *u, int peer);
/* Makes every wait fail with SG_ERR_COMM at its next check. Any thread. */
void sg__ucx_abort(sg__ucx *u);
/* peer's last sign of life from its process watch: when its process was
 * last seen running, once it has exited; -1 otherwise. Any thread. */
int64_t sg__ucx_last_running(const sg__ucx *u, int peer);
/* RMA and atomics. */
typedef struct sg__ucx_mem sg__ucx_mem;
typedef struct sg__ucx_rkey sg__ucx_rkey;
sg_status sg__ucx_mem_map(sg__ucx *u, void *base, size_t bytes, sg__ucx_mem **out);
/* Memory UCX allocates and registers (on one host: shared memory, which peers' RMA and atomics reach
 * directly; memory registered from an address takes UCX's software emulation there); freed by unmap. */
sg_status sg__ucx_mem_alloc(sg__ucx *u, size_t bytes, sg__ucx_mem **out, void **base);
void sg__ucx_mem_unmap(sg__ucx *u, sg__ucx_mem *m);
sg_status sg__ucx_rkey_pack(sg__ucx *u, sg__ucx_mem *m, void **buf, size_t *len); /* free with sg__free */
sg_status sg__ucx_rkey_unpack(sg__ucx *u, int peer, const void *buf, size_t len, sg__ucx_rkey **out);
void sg__ucx_rkey_destroy(sg__ucx_rkey *rk);
sg_status sg__ucx_put(sg__ucx *u, int peer, const void *src, size_t bytes, uint64_t raddr, sg__ucx_rkey *rk);
sg_status sg__ucx_get(sg__ucx *u, int peer, void *dst, size_t bytes, uint64_t raddr, sg__ucx_rkey *rk);
sg_status sg__ucx_flush(sg__ucx *u, int64_t deadline);
/* op 0: fetch-add, 1: compare-swap. */
sg_status sg__ucx_atomic(sg__ucx *u, int peer, int op, uint64_t value, uint64_t compare, uint64_t *result,
                         uint64_t raddr, sg__ucx_rkey *rk, int64_t deadline);

/* Check-ins (SPEC H3): a channel of their own, best effort. A send never
 * blocks and is skipped (false) while the previous one to that peer is in
 * flight, or when the peer is dead; take returns the oldest arrived
 * (SG_ERR_NOT_FOUND when none) into buf[SG__COMM_CHECKIN_BYTES]. */
bool sg__ucx_checkin_send(sg__ucx *u, int peer, const void *buf, size_t bytes);
sg_status sg__ucx_checkin_take(sg__ucx *u, void *buf, size_t *bytes, int *peer);
uint64_t sg__ucx_checkins_dropped(const sg__ucx *u);

/* Active messages. */
#define SG_AM_QUEUES 8
#define SG_AM_MAX_BYTES (64u * 1024u)
sg_status sg__ucx_am_send(sg__ucx *u, int peer, unsigned id, const void *buf, size_t bytes, int64_t deadline);
/* Looks for a queued message on `id`; SG_ERR_NOT_FOUND when none. */
sg_status sg__ucx_am_take(sg__ucx *u, unsigned id, void *buf, size_t *bytes, int *peer);

/* ---- peer processes (proc_watch.c) ---------------------------------------- */

/* Who a rank's process is; published with its transport address. */
#define SG__BOOT_ID_LEN 36
#define SG__PROC_IDENT_BYTES 60
struct sg__proc_ident {
  uint32_t pid;
  uint64_t pid_ns;                   /* inode of /proc/self/ns/pid; 0 unknown */
  char boot_id[SG__BOOT_ID_LEN + 1]; /* /proc/sys/kernel/random/boot_id; "" unknown */
};
void sg__proc_ident_self(sg__proc_ident *out);
void sg__proc_ident_encode(const sg__proc_ident *id, uint8_t out[SG__PROC_IDENT_BYTES]);
/* Validates rank's published identity (SPEC S1): SG_ERR_TRUNCATED or SG_ERR_FORMAT naming it. */
sg_status sg__proc_ident_decode(const void *buf, size_t len, int rank, sg__proc_ident *out);
/* Both under one kernel and one pid namespace (a's identity known): b's pid means b's process here. */
bool sg__proc_same_kernel(const sg__proc_ident *a, const sg__proc_ident *b);

/* A watch over peers' processes: knows at once when one exits. */
typedef struct sg__proc_watch sg__proc_watch;
typedef void (*sg__proc_exited_fn)(void *ctx, int peer);
sg_status sg__proc_watch_create(int size, sg__proc_watch **out);
void sg__proc_watch_destroy(sg__proc_watch *w);
/* Watches peer's process (under this kernel); false when it cannot (no
 * pidfd here): the peer is left to the heartbeats. */
bool sg__proc_watch_add(sg__proc_watch *w, int peer, uint32_t pid);
/* Calls exited(ctx, peer) once for each watched peer whose process has
 * exited; never blocks; does nothing within 2 ms of its last look. */
void sg__proc_watch_poll(sg__proc_watch *w, int64_t now, sg__proc_exited_fn exited, void *ctx);
/* When peer's process was last seen running, if it has exited since (the
 * look before the one that found it gone; 0 when no look had happened yet);
 * -1 when it has not exited or is not watched. Any thread. */
int64_t sg__proc_watch_last_running(const sg__proc_watch *w, int peer);
/* Peers watched (their exit seen or not). */
int sg__proc_watch_count(const sg__proc_watch *w);

/* ---- the communicator (comm.c) ------------------------------------------- */

struct sg_comm {
  sg__comm_env env;
  int rank, size;
  sg__store_server *server; /* rank 0 only */
  sg__store *store;
  sg__detector *det; /* the failure detector the transport reports to */
  sg__ucx *ucx;
  uint32_t coll_seq; /* one per collective call: keeps tags of consecutive collectives apart */
  int64_t deadline;  /* of the operation in progress */
  void *scratch;     /* collective staging buffer */
  size_t scratch_bytes;
  struct sg__nccl *nccl; /* device collectives (nccl.c); NULL until sg_comm_nccl_init */
  sg_status failed;      /* sticky: a timed-out collective leaves the communicator unusable */
  char fail_msg[512];    /* the error that made it fail */
  /* sg_comm_abort (any thread): 0 no, 1 being set, 2 set with abort_reason.
   * Only atomic accesses to abort_state. */
  int abort_state;
  char abort_reason[256];
  void **keep;   /* sg__comm_free_at_close: freed after the transport closes */
  size_t n_keep; /* owner thread only */
};

/* Grows comm->scratch to at least `bytes`. */
sg_status sg__comm_scratch(sg_comm *comm, size_t bytes, void **out);
/* Checks comm and starts an operation's deadline; the operation involves the
 * peers it names (point to point). */
sg_status sg__comm_begin(sg_comm *comm, const char *what);
/* The same for a collective: every peer is involved, so the silence of any
 * peer fails it. */
sg_status sg__comm_begin_all(sg_comm *comm, const char *what);
/* Nonzero once sg_comm_abort was called. Any thread. */
int sg__comm_aborted(const sg_comm *comm);
/* Rank 0 publishes `len` bytes of buf under `key` in the rendezvous store;
 * every other rank waits for them (until the operation's deadline), checks
 * the length and copies them into buf. NCCL's unique id travels this way. */
sg_status sg__comm_store_bcast(sg_comm *comm, const char *key, void *buf, size_t len);
/* Releases the NCCL communicator, if any (nccl.c; a no-op without NCCL). */
void sg__nccl_destroy(sg_comm *comm);
sg_status sg__comm_fail(sg_comm *comm, sg_status st);
/* The barrier before closing (sg_comm_destroy, collectives_host.c): SG_OK once every peer said it is
 * leaving too; sends to peers that already left may fail without failing it. */
sg_status sg__comm_leave_barrier(sg_comm *comm);

/* ---- reductions (reduce.c) ----------------------------------------------- */

/* Nonzero: f16 reductions take the portable path even where F16C exists (tests). */
extern int sg__reduce_portable_f16;
float sg__f16_to_f32(uint16_t h);
uint16_t sg__f32_to_f16(float f);
float sg__bf16_to_f32(uint16_t h);
uint16_t sg__f32_to_bf16(float f);

/* ---- hang diagnosis (SPEC H7; liveness.c, hang.c, ucx.c) ------------------ */

/* A heartbeat's payload (version 1, little endian; docs/comm.md):
 *   u8 version (1), u8 flags (bit 0: inside the collective; the rest 0),
 *   u16 label length L (0..SG_COMM_LABEL_MAX), u32 reserved (0),
 *   u64 position (collectives entered, below 2^63), L bytes of printable ASCII.
 * The sender's rank travels in the active message's header. */
#define SG__HB_VERSION 2 /* 2: flag bit 1, away */
#define SG__HB_FIXED_BYTES 16
#define SG__HB_MAX_BYTES (SG__HB_FIXED_BYTES + SG_COMM_LABEL_MAX)

/* Writes p's payload into buf (SG__HB_MAX_BYTES); returns its length. */
size_t sg__hb_encode(const sg_comm_position *p, uint8_t *buf);
/* Parses and validates a payload of len bytes (SPEC S1): SG_ERR_TRUNCATED,
 * SG_ERR_VERSION, SG_ERR_FORMAT or SG_ERR_RANGE, with why[cap] (may be NULL)
 * naming the field; *out is zeroed then, and known = 1 on success. Sets no
 * thread error: the receive path runs inside a UCX callback and only
 * counts what it rejects. */
sg_status sg__hb_decode(const void *buf, size_t len, sg_comm_position *out, char *why, size_t cap);
/* Nonzero when text (len bytes) is a valid label: printable ASCII, at most
 * SG_COMM_LABEL_MAX bytes. */
int sg__label_valid(const char *text, size_t len);

/* What one rank sees when it diagnoses a hang (hang.c). */
typedef struct sg__hang_view {
  int self, size;
  uint64_t seq; /* this rank's collective: #seq */
  const char *label;
  int64_t waited_ms, hang_ms;
  const sg_comm_position *pos; /* per rank (self's entry unused) */
  const uint8_t *stuck;        /* per rank: 1 = stuck */
  int reporter;                /* -1: found here; else the rank that found it */
  int self_out;                /* 1: this rank has not entered #seq itself yet (told between collectives) */
} sg__hang_view;

/* The diagnosis sentence (docs/resilience.md "Hang diagnosis") into
 * buf[cap], always NUL-terminated when cap > 0; returns the length it
 * needed (as snprintf). */
size_t sg__hang_text(const sg__hang_view *v, char *buf, size_t cap);

/* ---- the failure detector (detector.c) -------------------------------------- */
/* One rank's view of which peers are alive, stuck or given up, and why (SPEC
 * H1, H7): pure logic fed with the transport's raw events; no thread, no
 * UCX. The scheduler thread owns it, except sg__det_set_away (any thread). */
/* Sends a failure notice (`bytes` at `notice`, stable until the detector is
 * destroyed) to rank `to`, best effort: the transport's one service to the
 * detector. */
typedef void (*sg__det_notify_fn)(void *ctx, int to, const void *notice, size_t bytes);
sg_status sg__det_create(int rank, int world_size, sg__detector **out);
void sg__det_destroy(sg__detector *d);
void sg__det_set_notifier(sg__detector *d, sg__det_notify_fn fn, void *ctx);
/* heartbeat_ms 0: liveness off (silence is never fatal). */
void sg__det_set_liveness(sg__detector *d, int heartbeat_ms, int dead_ms);
/* Called as every operation begins; on: a collective, every peer is involved
 * (its waits check all of them). Whatever collective we were in is over. */
void sg__det_scope_all(sg__detector *d, int on);
/* The peers [lo, hi) an operation with `peer` involves (-1: every peer). */
void sg__det_scope(const sg__detector *d, int peer, int *lo, int *hi);
/* Raw events. A message or a completed receive from `peer`: */
void sg__det_heard(sg__detector *d, int peer);
/* A heartbeat or a failure notice as it arrived (validated here; a malformed
 * heartbeat is counted, sg__det_rejected): */
void sg__det_on_heartbeat(sg__detector *d, const void *header, size_t header_len, const void *data,
                          size_t len);
void sg__det_on_notice(sg__detector *d, const void *header, size_t header_len, size_t len);
void sg__det_reject(sg__detector *d); /* a heartbeat the transport could not deliver whole */
uint64_t sg__det_rejected(const sg__detector *d);
/* The endpoint to `peer` failed; `what` (a static string) says how. Sticky. */
void sg__det_endpoint_failed(sg__detector *d, int peer, const char *what);
/* peer's process exited (proc_watch.c). Sticky. */
void sg__det_process_exited(sg__detector *d, int peer);
/* Declares `peer` unreachable as a cut link (fault injection); the others are told. */
void sg__det_cut(sg__detector *d, int peer);
/* Heartbeats: credits time away and says whether heartbeats are due now;
 * then, per peer, whether it gets one, and the header (2 words, stable) and
 * payload (into buf[SG__HB_MAX_BYTES]; returns its length) to send. */
bool sg__det_tick(sg__detector *d, int64_t now);
bool sg__det_wants_heartbeat(const sg__detector *d, int peer);
const uint32_t *sg__det_heartbeat_header(const sg__detector *d);
size_t sg__det_heartbeat_payload(sg__detector *d, uint8_t *buf);
/* SG_ERR_COMM naming the peer when `peer` (every peer when -1 or in a
 * collective; nobody for SG_UCX_NOBODY) is unreachable, silent for dead_ms
 * or stuck, or when a peer gave this rank up; SG_OK otherwise. */
sg_status sg__det_check(sg__detector *d, int peer, int64_t now);
/* The error of the likely root cause among the peers an operation with
 * `peer` involves (SG_OK when none is unreachable); of `peer` itself. */
sg_status sg__det_root_cause(const sg__detector *d, int peer);
sg_status sg__det_peer_error(const sg__detector *d, int peer);
/* 0 alive; 1 declared by this rank (silence, endpoint error, cut); 2 on another rank's report. */
int sg__det_peer_dead(const sg__detector *d, int peer);
/* Silence of peer in ms (-1 for self or an invalid rank); since anything
 * was heard, time away included. */
int64_t sg__det_silence_ms(const sg__detector *d, int peer);
int64_t sg__det_quiet_ms(const sg__detector *d, int peer);
/* A collective entering its message phase: position + 1, inside, the
 * current label bound to it. The next sg__det_scope_all ends it. */
void sg__det_coll_enter(sg__detector *d);
void sg__det_set_label(sg__detector *d, const char *text); /* validated by the caller */
void sg__det_set_hang(sg__detector *d, int hang_ms);
void sg__det_set_away(sg__detector *d, bool away);
/* peer's last reported position (self: our own). */
void sg__det_position(const sg__detector *d, int peer, sg_comm_position *out);
#endif /* SG_COMM_INTERNAL_H */
