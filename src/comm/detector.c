/* The failure detector (SPEC H1, H7): one rank's view of which peers are
 * alive, stuck or given up, and why. Pure logic over the raw events the
 * transport reports (a message from rank R, a heartbeat or failure notice,
 * an endpoint error, "entered a collective"): it owns no socket and no
 * thread, and includes no UCX header. The transport (ucx.c) consults it in
 * every wait loop (sg__det_check) and lends it one way out, the notifier,
 * to tell the other ranks whom it gave up.
 *
 * Clocks: heard[p] is when we last heard from p on a clock that stops while
 * this rank is away from communication (sg__det_tick credits the gap), so
 * silence only counts time we were listening; seen[p] is the plain clock,
 * the last sign of life a recovery's detection time starts from. */
#include <stdio.h>
#include <string.h>

#include "comm/comm_internal.h"

#define HB_MAGIC 0x48425447u     /* a heartbeat's second header word */
#define NOTICE_MAGIC 0x44454144u /* a failure notice's second header word */
#define NOTICE_UNREACHABLE 0u    /* a notice's fourth word: why */
#define NOTICE_STUCK 1u

/* Why a peer is unreachable; the first cause is kept (sticky). */
enum { DEATH_NONE = 0, DEATH_SILENT, DEATH_ENDPOINT, DEATH_REPORTED, DEATH_HUNG, DEATH_EXITED };
typedef struct peer_death {
  int how;
  uint32_t seq;         /* order of declaration: the first is the root cause */
  int64_t silence;      /* DEATH_SILENT: ms heard nothing */
  const char *endpoint; /* DEATH_ENDPOINT: the transport's words (a static string) */
  int reporter;         /* DEATH_REPORTED: the rank that told us */
  uint32_t notice[4];   /* our notice to the others; must outlive its sends */
  char *why;            /* DEATH_HUNG, or reported as stuck: the hang diagnosis (hang.c) */
} peer_death;

struct sg__detector {
  int rank, size;
  int hb_ms, dead_ms; /* 0: liveness off */
  int64_t *heard, *seen;
  peer_death *death; /* per peer */
  uint32_t n_dead;
  int expelled_by;   /* a peer that declared us unreachable, or -1 */
  int expelled_hung; /* expelled_by found us stuck */
  int64_t next_hb, last_tick;
  int scope_all; /* a collective is running: every peer is involved */
  uint32_t hb_hdr[2];
  /* Hang diagnosis (SPEC H7). `me` is our position (collectives entered,
   * inside, the label bound at entry); pos[p] what p's latest valid
   * heartbeat said. The hang clock of our collective starts when we entered
   * it and restarts whenever a peer is seen entering a collective
   * (settle_ms): a peer is stuck only once hang_ms passed with nobody
   * moving. */
  sg_comm_position me;
  char cur_label[SG_COMM_LABEL_MAX + 1]; /* sg_comm_label's; bound by the next collective */
  sg_comm_position *pos;
  uint8_t *stuck; /* per peer: scratch of the hang check */
  int hang_ms;
  int away_flag; /* atomic: sg__comm_set_away, any thread; copied into me.away for each heartbeat */
  int64_t enter_ms, settle_ms;
  uint64_t hb_rejected;
  sg__det_notify_fn notify;
  void *notify_ctx;
};

sg_status sg__det_create(int rank, int world_size, sg__detector **out) {
  *out = NULL;
  sg__detector *d = sg__calloc(1, sizeof *d);
  if (d == NULL) return sg__error(SG_ERR_NO_MEMORY, "failure detector: out of memory");
  d->rank = rank;
  d->size = world_size;
  d->expelled_by = -1;
  d->hb_hdr[0] = (uint32_t)rank;
  d->hb_hdr[1] = HB_MAGIC;
  size_t n = (size_t)world_size;
  d->heard = sg__calloc(n, sizeof *d->heard);
  d->seen = sg__calloc(n, sizeof *d->seen);
  d->death = sg__calloc(n, sizeof *d->death);
  d->pos = sg__calloc(n, sizeof *d->pos);
  d->stuck = sg__calloc(n, 1);
  if (d->heard == NULL || d->seen == NULL || d->death == NULL || d->pos == NULL || d->stuck == NULL) {
    sg__det_destroy(d);
    return sg__error(SG_ERR_NO_MEMORY, "failure detector: out of memory");
  }
  *out = d;
  return SG_OK;
}

void sg__det_destroy(sg__detector *d) {
  if (d == NULL) return;
  if (d->death)
    for (int i = 0; i < d->size; i++) sg__free(d->death[i].why);
  sg__free(d->death);
  sg__free(d->heard);
  sg__free(d->seen);
  sg__free(d->pos);
  sg__free(d->stuck);
  sg__free(d);
}

void sg__det_set_notifier(sg__detector *d, sg__det_notify_fn fn, void *ctx) {
  d->notify = fn;
  d->notify_ctx = ctx;
}

void sg__det_set_liveness(sg__detector *d, int heartbeat_ms, int dead_ms) {
  int64_t now = sg__now_ms();
  d->hb_ms = heartbeat_ms;
  d->dead_ms = dead_ms;
  /* Nobody is blamed for the time before liveness was on. */
  for (int p = 0; p < d->size; p++) d->heard[p] = now;
  d->last_tick = now;
  d->next_hb = now;
}

void sg__det_scope_all(sg__detector *d, int on) {
  d->scope_all = on;
  d->me.inside = 0;
}

void sg__det_heard(sg__detector *d, int peer) {
  if (peer >= 0 && peer < d->size) d->heard[peer] = d->seen[peer] = sg__now_ms();
}

/* ---- declaring and reporting ----------------------------------------------- */

/* Records that `peer` is unreachable (first cause wins) and tells every other
 * live peer, so that survivors agree on the cause even when one of them sees
 * a secondary symptom first (e.g. a peer that already left after noticing). */
static void declare_dead(sg__detector *d, int peer, int how, int64_t silence, const char *endpoint,
                         int reporter, const char *why) {
  peer_death *x = &d->death[peer];
  if (x->how != DEATH_NONE) return;
  x->how = how;
  x->silence = silence;
  x->endpoint = endpoint;
  x->reporter = reporter;
  x->seq = ++d->n_dead;
  if (why != NULL) x->why = sg__strdup(why);              /* NULL when out of memory: death_error says less */
  if (how == DEATH_REPORTED || d->notify == NULL) return; /* the reporter told everyone already */
  x->notice[0] = (uint32_t)d->rank;
  x->notice[1] = NOTICE_MAGIC;
  x->notice[2] = (uint32_t)peer;
  x->notice[3] = how == DEATH_HUNG ? NOTICE_STUCK : NOTICE_UNREACHABLE;
  for (int q = 0; q < d->size; q++) {
    /* A stuck rank still listens (its communication thread is fine): it is
     * told too, so that it gives up instead of waiting forever. */
    if (q == d->rank || (q == peer && how != DEATH_HUNG)) continue;
    if (q != peer && d->death[q].how != DEATH_NONE) continue;
    /* The notice lives in d->death until destroy; best effort. */
    d->notify(d->notify_ctx, q, x->notice, sizeof x->notice);
  }
}

static sg_status death_error(const sg__detector *d, int peer) {
  const peer_death *x = &d->death[peer];
  switch (x->how) {
    case DEATH_SILENT:
      return sg__error(
          SG_ERR_COMM,
          "rank %d is unreachable: nothing heard for %lld ms (rank %d; heartbeat every %d ms, dead "
          "after %d ms)",
          peer, (long long)x->silence, d->rank, d->hb_ms, d->dead_ms);
    case DEATH_ENDPOINT:
      return sg__error(SG_ERR_COMM, "rank %d is unreachable: UCX reports %s (rank %d)", peer, x->endpoint,
                       d->rank);
    case DEATH_EXITED:
      return sg__error(SG_ERR_COMM, "rank %d is unreachable: its process exited (rank %d)", peer, d->rank);
    case DEATH_HUNG:
      if (x->why) return sg__error(SG_ERR_COMM, "%s (diagnosed on rank %d)", x->why, d->rank);
      return sg__error(SG_ERR_COMM, "rank %d is stuck: it did not enter collective #%llu for %d ms (rank %d)",
                       peer, (unsigned long long)d->me.collective, d->hang_ms, d->rank);
    default:
      if (x->why) return sg__error(SG_ERR_COMM, "%s (rank %d)", x->why, d->rank);
      return sg__error(SG_ERR_COMM, "rank %d is unreachable: rank %d reported it unreachable (rank %d)", peer,
                       x->reporter, d->rank);
  }
}

/* The unreachable peer to report among [lo, hi), the likely root cause: the
 * first declared by silence or by another rank's notice; failing that, the
 * first whose endpoint failed or whose process exited (a rank that noticed a
 * failure and left shows up so too, but it will have told us whom it gave
 * up).
 * -1 when none. */
static int first_dead(const sg__detector *d, int lo, int hi) {
  int best = -1;
  for (int p = lo; p < hi; p++) {
    const peer_death *x = &d->death[p];
    if (x->how == DEATH_NONE) continue;
    if (best < 0) {
      best = p;
      continue;
    }
    const peer_death *b = &d->death[best];
    int x_primary = x->how != DEATH_ENDPOINT && x->how != DEATH_EXITED;
    int b_primary = b->how != DEATH_ENDPOINT && b->how != DEATH_EXITED;
    if (x_primary > b_primary || (x_primary == b_primary && x->seq < b->seq)) best = p;
  }
  return best;
}

void sg__det_scope(const sg__detector *d, int peer, int *lo, int *hi) {
  *lo = peer, *hi = peer + 1;
  if (peer < 0 || d->scope_all) *lo = 0, *hi = d->size;
}

void sg__det_endpoint_failed(sg__detector *d, int peer, const char *what) {
  if (peer >= 0 && peer < d->size && peer != d->rank)
    declare_dead(d, peer, DEATH_ENDPOINT, 0, what, -1, NULL);
}

void sg__det_process_exited(sg__detector *d, int peer) {
  if (peer >= 0 && peer < d->size && peer != d->rank) declare_dead(d, peer, DEATH_EXITED, 0, NULL, -1, NULL);
}

sg_status sg__det_root_cause(const sg__detector *d, int peer) {
  int lo, hi;
  sg__det_scope(d, peer, &lo, &hi);
  int x = first_dead(d, lo, hi);
  if (x < 0) x = peer;
  return x >= 0 && x < d->size && d->death[x].how != DEATH_NONE ? death_error(d, x) : SG_OK;
}

sg_status sg__det_peer_error(const sg__detector *d, int peer) {
  return d->death[peer].how == DEATH_NONE ? SG_OK : death_error(d, peer);
}

void sg__det_cut(sg__detector *d, int peer) {
  /* As an endpoint failure: immediate, sticky, and the others are told. */
  sg__det_endpoint_failed(d, peer, "Destination is unreachable");
}

int sg__det_peer_dead(const sg__detector *d, int peer) {
  if (peer < 0 || peer >= d->size || peer == d->rank || d->death[peer].how == DEATH_NONE) return 0;
  return d->death[peer].how == DEATH_REPORTED ? 2 : 1;
}

/* ---- heartbeats ---------------------------------------------------------------- */

bool sg__det_tick(sg__detector *d, int64_t now) {
  if (d->hb_ms <= 0) return false;
  /* While this rank was away from communication (computing between calls)
   * it could not hear anybody: that time does not count as a peer's
   * silence. Without this, the first wait after a long computation would
   * blame every peer whose heartbeats are still sitting unread in our
   * queues. */
  int64_t gap = now - d->last_tick;
  if (gap > d->hb_ms)
    for (int p = 0; p < d->size; p++) d->heard[p] += gap;
  d->last_tick = now;
  if (now < d->next_hb) return false;
  d->next_hb = now + d->hb_ms;
  return true;
}

bool sg__det_wants_heartbeat(const sg__detector *d, int peer) {
  return peer != d->rank && d->death[peer].how == DEATH_NONE;
}

const uint32_t *sg__det_heartbeat_header(const sg__detector *d) { return d->hb_hdr; }

size_t sg__det_heartbeat_payload(sg__detector *d, uint8_t *buf) {
  d->me.away = __atomic_load_n(&d->away_flag, __ATOMIC_RELAXED);
  return sg__hb_encode(&d->me, buf);
}

/* A heartbeat: 8-byte header (sender's rank, HB_MAGIC) and the sender's
 * position (liveness.c, sg__hb_decode). A malformed one is counted and
 * ignored altogether (SPEC S1): not even taken as a sign of life. */
void sg__det_on_heartbeat(sg__detector *d, const void *header, size_t header_len, const void *data,
                          size_t len) {
  uint32_t hdr[2];
  sg_comm_position p;
  if (header == NULL || header_len != sizeof hdr) goto bad;
  memcpy(hdr, header, sizeof hdr);
  if (hdr[0] >= (uint32_t)d->size || hdr[0] == (uint32_t)d->rank || hdr[1] != HB_MAGIC) goto bad;
  if (sg__hb_decode(data, len, &p, NULL, 0) != SG_OK) goto bad;
  int peer = (int)hdr[0];
  sg__det_heard(d, peer);
  /* A peer entering a collective restarts our hang clock: the job is moving
   * (also behind us: a broadcast root may run collectives ahead of ranks
   * still busy receiving). */
  if (d->me.inside && (!d->pos[peer].known || p.collective > d->pos[peer].collective))
    d->settle_ms = sg__now_ms();
  /* So does a peer coming back from its program (sg__comm_set_away): it gets
   * a whole hang timeout to reach the collective. */
  if (d->pos[peer].away && !p.away) d->settle_ms = sg__now_ms();
  d->pos[peer] = p;
  return;
bad:
  d->hb_rejected++;
}

void sg__det_reject(sg__detector *d) { d->hb_rejected++; }

uint64_t sg__det_rejected(const sg__detector *d) { return d->hb_rejected; }

/* A failure notice: 16-byte header (sender, NOTICE_MAGIC, the rank given up,
 * why: NOTICE_UNREACHABLE or NOTICE_STUCK), no payload. */
void sg__det_on_notice(sg__detector *d, const void *header, size_t header_len, size_t len) {
  uint32_t hdr[4];
  if (header == NULL || header_len != sizeof hdr || len != 0) return;
  memcpy(hdr, header, sizeof hdr);
  if (hdr[0] >= (uint32_t)d->size || hdr[0] == (uint32_t)d->rank || hdr[1] != NOTICE_MAGIC ||
      hdr[2] >= (uint32_t)d->size || hdr[3] > NOTICE_STUCK)
    return;
  int from = (int)hdr[0], peer = (int)hdr[2];
  sg__det_heard(d, from);
  if (peer == d->rank) {
    /* We were given up (e.g. we were stopped for longer than dead_ms, or
     * found stuck): the others have moved on, so nothing we wait for will
     * come. */
    if (d->expelled_by < 0) {
      d->expelled_by = from;
      d->expelled_hung = hdr[3] == NOTICE_STUCK;
    }
  } else if (hdr[3] == NOTICE_STUCK && d->death[peer].how == DEATH_NONE) {
    /* Our own diagnosis of the stuck rank, from our view, naming the finder. */
    char text[1024];
    memset(d->stuck, 0, (size_t)d->size);
    d->stuck[peer] = 1;
    int64_t now = sg__now_ms();
    sg__hang_view v = {d->rank,
                       d->size,
                       d->me.inside ? d->me.collective : d->me.collective + 1,
                       d->me.inside ? d->me.label : d->cur_label,
                       d->me.inside ? now - d->enter_ms : 0,
                       d->hang_ms,
                       d->pos,
                       d->stuck,
                       from,
                       !d->me.inside};
    sg__hang_text(&v, text, sizeof text);
    declare_dead(d, peer, DEATH_REPORTED, 0, NULL, from, text);
  } else {
    declare_dead(d, peer, DEATH_REPORTED, 0, NULL, from, NULL);
  }
}

/* ---- the checks ------------------------------------------------------------ */

/* The hang check (SPEC H7; the rule is in sg_comm_set_hang_timeout's
 * documentation): inside our collective #N for hang_ms since a peer last
 * entered a collective, every live peer whose heartbeats say it has not
 * entered #N is stuck. They become unreachable (DEATH_HUNG, first-hand) with
 * the diagnosis, and everybody, the stuck ones included, is told. */
static void check_hang(sg__detector *d, int64_t now) {
  if (d->hang_ms <= 0 || d->hb_ms <= 0 || !d->scope_all || !d->me.inside) return;
  int64_t since = d->settle_ms > d->enter_ms ? d->settle_ms : d->enter_ms;
  if (now - since <= d->hang_ms) return;
  int n = 0;
  for (int p = 0; p < d->size; p++) {
    const sg_comm_position *q = &d->pos[p];
    d->stuck[p] = p != d->rank && d->death[p].how == DEATH_NONE && !q->away &&
                  (!q->known || q->collective < d->me.collective);
    n += d->stuck[p];
  }
  if (n == 0) return;
  char text[1024];
  sg__hang_view v = {d->rank,    d->size, d->me.collective, d->me.label, now - d->enter_ms,
                     d->hang_ms, d->pos,  d->stuck,         -1};
  sg__hang_text(&v, text, sizeof text);
  for (int p = 0; p < d->size; p++)
    if (d->stuck[p]) declare_dead(d, p, DEATH_HUNG, 0, NULL, -1, text);
}

sg_status sg__det_check(sg__detector *d, int peer, int64_t now) {
  if (peer == SG_UCX_NOBODY) return SG_OK;
  if (d->expelled_by >= 0 && d->expelled_hung)
    return sg__error(SG_ERR_COMM,
                     "rank %d was given up by its peers: rank %d found it stuck (it had not entered the "
                     "collective the others waited in for longer than their hang timeout; this rank's last: "
                     "#%llu (%s))",
                     d->rank, d->expelled_by, (unsigned long long)d->me.collective,
                     d->me.label[0] ? d->me.label : "no label");
  if (d->expelled_by >= 0)
    return sg__error(SG_ERR_COMM, "rank %d was given up by its peers: rank %d declared it unreachable",
                     d->rank, d->expelled_by);
  int lo, hi;
  sg__det_scope(d, peer, &lo, &hi);
  if (d->hb_ms > 0)
    for (int p = lo; p < hi; p++)
      if (p != d->rank && d->death[p].how == DEATH_NONE && now - d->heard[p] > d->dead_ms)
        declare_dead(d, p, DEATH_SILENT, now - d->heard[p], NULL, -1, NULL);
  check_hang(d, now);
  int x = first_dead(d, lo, hi);
  return x < 0 ? SG_OK : death_error(d, x);
}

int64_t sg__det_quiet_ms(const sg__detector *d, int peer) {
  if (peer < 0 || peer >= d->size || peer == d->rank) return -1;
  return sg__now_ms() - d->seen[peer];
}

int64_t sg__det_silence_ms(const sg__detector *d, int peer) {
  if (peer < 0 || peer >= d->size || peer == d->rank) return -1;
  int64_t now = sg__now_ms(), since = d->heard[peer];
  /* With liveness off, time away is not credited (sg__det_tick does nothing). */
  if (d->hb_ms <= 0) return now - since;
  /* Credit the time we have been away since the last tick, as the tick will. */
  if (now - d->last_tick > d->hb_ms) since += now - d->last_tick;
  return now - since;
}

/* ---- positions in the collective schedule (SPEC H7) ------------------------- */

void sg__det_coll_enter(sg__detector *d) {
  d->me.collective++;
  d->me.inside = 1;
  d->me.known = 1;
  memcpy(d->me.label, d->cur_label, sizeof d->me.label);
  d->enter_ms = d->settle_ms = sg__now_ms();
}

void sg__det_set_label(sg__detector *d, const char *text) {
  snprintf(d->cur_label, sizeof d->cur_label, "%s", text ? text : "");
}

void sg__det_set_hang(sg__detector *d, int hang_ms) { d->hang_ms = hang_ms; }

void sg__det_set_away(sg__detector *d, bool away) {
  __atomic_store_n(&d->away_flag, away ? 1 : 0, __ATOMIC_RELAXED);
}

void sg__det_position(const sg__detector *d, int peer, sg_comm_position *out) {
  *out = peer == d->rank ? d->me : d->pos[peer];
  if (peer == d->rank) {
    out->known = 1;
    out->away = __atomic_load_n(&d->away_flag, __ATOMIC_RELAXED);
  }
}
