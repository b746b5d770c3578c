/* Peer liveness (SPEC H1) at the communicator level: the public switches,
 * checked here and handed to the failure detector (detector.c), which the
 * transport (ucx.c) consults in every wait loop; and the heartbeat payload's
 * codec. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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
  sg__det_set_liveness(comm->det, heartbeat_ms, heartbeat_ms > 0 ? dead_ms : 0);
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
  return sg__det_silence_ms(comm->det, peer);
}

int64_t sg__comm_peer_quiet_ms(const sg_comm *comm, int peer) {
  if (comm == NULL || comm->ucx == NULL) return -1;
  int64_t quiet = sg__det_quiet_ms(comm->det, peer);
  /* A peer whose process exited was alive when it was last seen running,
   * which may be later than its last message (proc_watch.c). */
  int64_t running = sg__ucx_last_running(comm->ucx, peer);
  if (quiet >= 0 && running > 0 && sg__now_ms() - running < quiet) quiet = sg__now_ms() - running;
  return quiet;
}

bool sg__comm_checkin_send(sg_comm *comm, int peer, const void *buf, size_t bytes) {
  if (comm == NULL || comm->ucx == NULL || buf == NULL || sg__comm_aborted(comm)) return false;
  return sg__ucx_checkin_send(comm->ucx, peer, buf, bytes);
}

sg_status sg__comm_checkin_take(sg_comm *comm, void *buf, size_t *bytes, int *peer) {
  if (comm == NULL || comm->ucx == NULL || buf == NULL || bytes == NULL || peer == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg__comm_checkin_take: NULL argument");
  return sg__ucx_checkin_take(comm->ucx, buf, bytes, peer);
}

uint64_t sg__comm_checkins_dropped(const sg_comm *comm) {
  return comm != NULL && comm->ucx != NULL ? sg__ucx_checkins_dropped(comm->ucx) : 0;
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

/* ---- hang diagnosis (SPEC H7) ------------------------------------------------ */

int sg__label_valid(const char *text, size_t len) {
  if (len > SG_COMM_LABEL_MAX) return 0;
  for (size_t i = 0; i < len; i++)
    if ((unsigned char)text[i] < 0x20 || (unsigned char)text[i] > 0x7e) return 0;
  return 1;
}

static void put_u16(uint8_t *b, uint16_t v) {
  b[0] = (uint8_t)v;
  b[1] = (uint8_t)(v >> 8);
}
static void put_u64(uint8_t *b, uint64_t v) {
  for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t get_u64(const uint8_t *b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | b[i];
  return v;
}

size_t sg__hb_encode(const sg_comm_position *p, uint8_t *buf) {
  size_t n = strnlen(p->label, SG_COMM_LABEL_MAX);
  buf[0] = SG__HB_VERSION;
  buf[1] = (uint8_t)((p->inside ? 1 : 0) | (p->away ? 2 : 0));
  put_u16(buf + 2, (uint16_t)n);
  memset(buf + 4, 0, 4);
  put_u64(buf + 8, p->collective);
  memcpy(buf + SG__HB_FIXED_BYTES, p->label, n);
  return SG__HB_FIXED_BYTES + n;
}

__attribute__((format(printf, 4, 5))) static sg_status reject(sg_status st, char *why, size_t cap,
                                                              const char *fmt, ...) {
  if (why != NULL && cap > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
  }
  return st;
}

sg_status sg__hb_decode(const void *buf, size_t len, sg_comm_position *out, char *why, size_t cap) {
  memset(out, 0, sizeof *out);
  if (why != NULL && cap > 0) why[0] = '\0';
  const uint8_t *b = buf;
  if (buf == NULL || len < SG__HB_FIXED_BYTES)
    return reject(SG_ERR_TRUNCATED, why, cap, "heartbeat of %zu bytes, at least %d expected", len,
                  SG__HB_FIXED_BYTES);
  if (b[0] != SG__HB_VERSION)
    return reject(b[0] > SG__HB_VERSION ? SG_ERR_VERSION : SG_ERR_FORMAT, why, cap,
                  "heartbeat version %u, this build reads %d", b[0], SG__HB_VERSION);
  if (b[1] & ~3u) return reject(SG_ERR_FORMAT, why, cap, "heartbeat flags 0x%02x: unknown bits set", b[1]);
  size_t n = (size_t)b[2] | (size_t)b[3] << 8;
  if (n > SG_COMM_LABEL_MAX)
    return reject(SG_ERR_RANGE, why, cap, "heartbeat label length %zu above %d", n, SG_COMM_LABEL_MAX);
  if (b[4] | b[5] | b[6] | b[7]) return reject(SG_ERR_FORMAT, why, cap, "heartbeat reserved bytes not zero");
  uint64_t seq = get_u64(b + 8);
  if (seq > (uint64_t)INT64_MAX)
    return reject(SG_ERR_RANGE, why, cap, "heartbeat position %llu above 2^63-1", (unsigned long long)seq);
  if (len != SG__HB_FIXED_BYTES + n)
    return reject(len < SG__HB_FIXED_BYTES + n ? SG_ERR_TRUNCATED : SG_ERR_FORMAT, why, cap,
                  "heartbeat of %zu bytes, its label length says %zu", len, SG__HB_FIXED_BYTES + n);
  if (!sg__label_valid((const char *)b + SG__HB_FIXED_BYTES, n))
    return reject(SG_ERR_FORMAT, why, cap, "heartbeat label has a byte outside printable ASCII");
  out->collective = seq;
  out->inside = b[1] & 1;
  out->away = (b[1] >> 1) & 1;
  out->known = 1;
  memcpy(out->label, b + SG__HB_FIXED_BYTES, n);
  out->label[n] = '\0';
  return SG_OK;
}

sg_status sg_comm_label(sg_comm *comm, const char *text) {
  if (comm == NULL || comm->ucx == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg_comm_label: NULL communicator");
  if (text == NULL) text = "";
  size_t n = strnlen(text, SG_COMM_LABEL_MAX + 1);
  if (n > SG_COMM_LABEL_MAX)
    return sg__error(SG_ERR_INVALID_ARG, "sg_comm_label: label '%.40s...' is longer than %d bytes", text,
                     SG_COMM_LABEL_MAX);
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)text[i] < 0x20 || (unsigned char)text[i] > 0x7e)
      return sg__error(SG_ERR_INVALID_ARG,
                       "sg_comm_label: byte %zu of the label is 0x%02x, not printable ASCII (0x20..0x7e)", i,
                       (unsigned char)text[i]);
  sg__det_set_label(comm->det, text);
  return SG_OK;
}

sg_status sg__comm_set_away(sg_comm *comm, int away) {
  if (comm == NULL || comm->ucx == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg__comm_set_away: NULL communicator");
  sg__det_set_away(comm->det, away != 0);
  return SG_OK;
}

sg_status sg_comm_set_hang_timeout(sg_comm *comm, int hang_ms) {
  SG_CHECK(sg__comm_begin(comm, "sg_comm_set_hang_timeout"));
  if (hang_ms < 0 || hang_ms > LIVENESS_MAX_MS)
    return sg__error(SG_ERR_INVALID_ARG,
                     "sg_comm_set_hang_timeout: hang_ms %d is not in 0..%d (0 turns it off)", hang_ms,
                     LIVENESS_MAX_MS);
  sg__det_set_hang(comm->det, hang_ms);
  return SG_OK;
}

sg_status sg__comm_peer_position(const sg_comm *comm, int peer, sg_comm_position *out) {
  if (comm == NULL || comm->ucx == NULL || out == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg__comm_peer_position: NULL argument");
  if (peer < 0 || peer >= comm->size)
    return sg__error(SG_ERR_INVALID_ARG, "sg__comm_peer_position: rank %d is not a rank of %d", peer,
                     comm->size);
  sg__det_position(comm->det, peer, out);
  return SG_OK;
}

uint64_t sg__comm_heartbeats_rejected(const sg_comm *comm) {
  return comm && comm->ucx ? sg__det_rejected(comm->det) : 0;
}
