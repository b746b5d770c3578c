/* The failure detector (src/comm/detector.c) driven without a transport:
 * raw events by hand, the notices it sends caught by a recording notifier.
 * Each case states what a rank must conclude and checks it: who is told of
 * a failure, which cause is named first, that malformed heartbeats and
 * notices change nothing (SPEC S1), silence measured only over listening
 * time, and a peer that never enters a collective found stuck (SPEC H7). */
#include <string.h>
#include <time.h>

#include "comm/comm_internal.h"
#include "test_util.h"

typedef struct sent {
  int n;
  int to[16];
  uint32_t words[16][4];
} sent;

static void record(void *ctx, int to, const void *notice, size_t bytes) {
  sent *s = ctx;
  assert_int_equal(bytes, 16);
  assert_true(s->n < 16);
  s->to[s->n] = to;
  memcpy(s->words[s->n], notice, 16);
  s->n++;
}

static void sleep_ms(int ms) {
  struct timespec ts = {0, (long)ms * 1000000L};
  nanosleep(&ts, NULL);
}

static sg__detector *make(int rank, int size, sent *s) {
  sg__detector *d;
  assert_int_equal(sg__det_create(rank, size, &d), SG_OK);
  memset(s, 0, sizeof *s);
  sg__det_set_notifier(d, record, s);
  return d;
}

/* An endpoint failure: sticky, the live others told once, and only the
 * operations that involve the peer fail. */
static void test_endpoint_failure(void **state) {
  (void)state;
  sent s;
  sg__detector *d = make(0, 4, &s);
  sg__det_endpoint_failed(d, 2, "Connection reset by remote peer");
  assert_int_equal(sg__det_peer_dead(d, 2), 1);
  assert_int_equal(sg__det_peer_dead(d, 1), 0);
  assert_int_equal(s.n, 2);
  assert_int_equal(s.to[0], 1);
  assert_int_equal(s.to[1], 3);
  assert_int_equal(s.words[0][0], 0); /* from rank 0 */
  assert_int_equal(s.words[0][2], 2); /* rank 2 given up */
  assert_int_equal(s.words[0][3], 0); /* unreachable, not stuck */
  sg__det_endpoint_failed(d, 2, "again");
  assert_int_equal(s.n, 2); /* the first cause is kept; nobody told twice */
  int64_t now = sg__now_ms();
  assert_int_equal(sg__det_check(d, 1, now), SG_OK); /* point to point with a live peer */
  assert_int_equal(sg__det_check(d, -1, now), SG_ERR_COMM);
  assert_non_null(
      strstr(sg_last_error(), "rank 2 is unreachable: UCX reports Connection reset by remote peer"));
  sg__det_scope_all(d, 1); /* in a collective every peer is involved */
  assert_int_equal(sg__det_check(d, 1, now), SG_ERR_COMM);
  sg__det_destroy(d);
}

/* A notice from another rank is a primary cause: named before an endpoint
 * error this rank saw first (a rank that left after noticing shows up as
 * an endpoint error too). Reported deaths are not told on again. */
static void test_root_cause(void **state) {
  (void)state;
  sent s;
  sg__detector *d = make(0, 4, &s);
  sg__det_endpoint_failed(d, 3, "Connection reset by remote peer");
  int told = s.n;
  uint32_t notice[4];
  memcpy(notice, s.words[0], sizeof notice);
  notice[0] = 1; /* rank 1 says: rank 2 is unreachable */
  notice[2] = 2;
  sg__det_on_notice(d, notice, sizeof notice, 0);
  assert_int_equal(sg__det_peer_dead(d, 2), 2);
  assert_int_equal(s.n, told);
  assert_int_equal(sg__det_root_cause(d, -1), SG_ERR_COMM);
  assert_non_null(strstr(sg_last_error(), "rank 2 is unreachable: rank 1 reported it unreachable"));
  assert_int_equal(sg__det_peer_error(d, 3), SG_ERR_COMM);
  assert_non_null(strstr(sg_last_error(), "rank 3 is unreachable"));
  assert_int_equal(sg__det_peer_error(d, 1), SG_OK);
  /* A notice that names this rank: it was given up. */
  notice[2] = 0;
  sg__det_on_notice(d, notice, sizeof notice, 0);
  assert_int_equal(sg__det_check(d, 1, sg__now_ms()), SG_ERR_COMM);
  assert_non_null(
      strstr(sg_last_error(), "rank 0 was given up by its peers: rank 1 declared it unreachable"));
  sg__det_destroy(d);
}

/* Malformed notices are dropped whole. */
static void test_bad_notices(void **state) {
  (void)state;
  sent s, s1;
  sg__detector *d = make(0, 3, &s), *src = make(1, 3, &s1);
  sg__det_endpoint_failed(src, 2, "x");
  uint32_t good[4];
  memcpy(good, s1.words[0], sizeof good); /* rank 1's notice to rank 0 about rank 2 */
  uint32_t bad[6][4];
  for (int i = 0; i < 6; i++) memcpy(bad[i], good, sizeof good);
  bad[0][0] = 0;          /* from ourselves */
  bad[1][0] = 7;          /* from a rank outside the job */
  bad[2][1] ^= 1;         /* magic */
  bad[3][2] = 3;          /* names a rank outside the job */
  bad[4][3] = 2;          /* an unknown reason */
  bad[5][0] = 0xffffffff; /* negative as a rank */
  for (int i = 0; i < 6; i++) sg__det_on_notice(d, bad[i], sizeof bad[i], 0);
  sg__det_on_notice(d, good, 12, 0);          /* short header */
  sg__det_on_notice(d, good, sizeof good, 1); /* with a payload */
  sg__det_on_notice(d, NULL, sizeof good, 0); /* no header */
  for (int p = 0; p < 3; p++) assert_int_equal(sg__det_peer_dead(d, p), 0);
  assert_int_equal(sg__det_check(d, -1, sg__now_ms()), SG_OK);
  sg__det_on_notice(d, good, sizeof good, 0);
  assert_int_equal(sg__det_peer_dead(d, 2), 2);
  sg__det_destroy(src);
  sg__det_destroy(d);
}

/* Heartbeats: a valid one updates the sender's position; a malformed one
 * is counted and changes nothing. */
static void test_heartbeats(void **state) {
  (void)state;
  sent s, s1;
  sg__detector *d = make(0, 2, &s), *peer = make(1, 2, &s1);
  sg__det_set_label(peer, "bucket 3");
  sg__det_coll_enter(peer);
  uint8_t payload[SG__HB_MAX_BYTES];
  size_t n = sg__det_heartbeat_payload(peer, payload);
  uint32_t hdr[2];
  memcpy(hdr, sg__det_heartbeat_header(peer), sizeof hdr);
  sg__det_on_heartbeat(d, hdr, sizeof hdr, payload, n);
  assert_int_equal(sg__det_rejected(d), 0);
  sg_comm_position pos;
  sg__det_position(d, 1, &pos);
  assert_int_equal(pos.known, 1);
  assert_int_equal(pos.inside, 1);
  assert_true(pos.collective == 1);
  assert_string_equal(pos.label, "bucket 3");

  uint32_t self[2] = {0, hdr[1]}, far[2] = {2, hdr[1]}, magic[2] = {1, hdr[1] ^ 1};
  sg__det_on_heartbeat(d, self, sizeof self, payload, n);
  sg__det_on_heartbeat(d, far, sizeof far, payload, n);
  sg__det_on_heartbeat(d, magic, sizeof magic, payload, n);
  sg__det_on_heartbeat(d, hdr, 4, payload, n);
  sg__det_on_heartbeat(d, hdr, sizeof hdr, payload, n - 1); /* label cut short */
  payload[0] = 99;                                          /* a version from the future */
  sg__det_on_heartbeat(d, hdr, sizeof hdr, payload, n);
  sg__det_reject(d); /* the transport's own refusal (rendezvous) */
  assert_int_equal(sg__det_rejected(d), 7);
  sg__det_position(d, 1, &pos);
  assert_true(pos.collective == 1);
  sg__det_destroy(peer);
  sg__det_destroy(d);
}

/* Silence counts only while this rank listens: time away (no tick) is
 * credited; a peer heard from stays alive, a silent one is declared after
 * dead_ms of listening. */
static void test_silence(void **state) {
  (void)state;
  sent s;
  sg__detector *d = make(0, 3, &s);
  sg__det_heard(d, 1); /* as at connect */
  sg__det_heard(d, 2);
  sg__det_set_liveness(d, 5, 40);
  assert_false(sg__det_wants_heartbeat(d, 0)); /* never to ourselves */
  assert_true(sg__det_wants_heartbeat(d, 2));
  sleep_ms(80); /* away: computing, not listening */
  assert_true(sg__det_tick(d, sg__now_ms()));
  assert_int_equal(sg__det_check(d, -1, sg__now_ms()), SG_OK);
  assert_true(sg__det_silence_ms(d, 2) < 40);
  assert_true(sg__det_quiet_ms(d, 2) >= 80); /* the plain clock */
  int64_t start = sg__now_ms();
  sg_status st = SG_OK;
  while (st == SG_OK && sg__now_ms() - start < 2000) { /* listening: rank 1 talks, rank 2 does not */
    sg__det_tick(d, sg__now_ms());
    sg__det_heard(d, 1);
    st = sg__det_check(d, -1, sg__now_ms());
    sleep_ms(1);
  }
  assert_int_equal(st, SG_ERR_COMM);
  assert_true(sg__now_ms() - start >= 40);
  assert_int_equal(sg__det_check(d, 1, sg__now_ms()), SG_OK);
  assert_int_equal(sg__det_check(d, -1, sg__now_ms()), SG_ERR_COMM); /* sticky */
  assert_non_null(strstr(sg_last_error(), "rank 2 is unreachable: nothing heard for"));
  assert_int_equal(sg__det_peer_dead(d, 1), 0);
  assert_int_equal(sg__det_peer_dead(d, 2), 1);
  assert_false(sg__det_wants_heartbeat(d, 2)); /* no more heartbeats to the dead */
  assert_int_equal(s.n, 1);                    /* rank 1 told */
  assert_int_equal(s.to[0], 1);
  sg__det_destroy(d);
}

/* A peer that heartbeats but never enters the collective this rank waits
 * in is stuck after hang_ms; it is told too, so that it gives up. */
static void test_hang(void **state) {
  (void)state;
  sent s, s1;
  sg__detector *d = make(0, 2, &s), *peer = make(1, 2, &s1);
  sg__det_set_liveness(d, 2, 100000);
  sg__det_set_hang(d, 30);
  sg__det_scope_all(d, 1);
  sg__det_set_label(d, "allreduce grads");
  sg__det_coll_enter(d);
  uint8_t payload[SG__HB_MAX_BYTES];
  uint32_t hdr[2];
  memcpy(hdr, sg__det_heartbeat_header(peer), sizeof hdr);
  int64_t start = sg__now_ms();
  sg_status st = SG_OK;
  while (st == SG_OK && sg__now_ms() - start < 2000) {
    size_t n = sg__det_heartbeat_payload(peer, payload); /* alive, at collective #0 */
    sg__det_on_heartbeat(d, hdr, sizeof hdr, payload, n);
    sg__det_tick(d, sg__now_ms());
    st = sg__det_check(d, -1, sg__now_ms());
    sleep_ms(1);
  }
  assert_int_equal(st, SG_ERR_COMM);
  assert_true(sg__now_ms() - start >= 30);
  assert_non_null(strstr(sg_last_error(), "rank 1"));
  assert_non_null(strstr(sg_last_error(), "allreduce grads"));
  assert_int_equal(s.n, 1);
  assert_int_equal(s.to[0], 1);
  assert_int_equal(s.words[0][3], 1); /* stuck */
  /* The stuck rank, told, gives up naming the finder. */
  sg__det_on_notice(peer, s.words[0], sizeof s.words[0], 0);
  assert_int_equal(sg__det_check(peer, 0, sg__now_ms()), SG_ERR_COMM);
  assert_non_null(strstr(sg_last_error(), "rank 1 was given up by its peers: rank 0 found it stuck"));
  sg__det_destroy(peer);
  sg__det_destroy(d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_endpoint_failure), cmocka_unit_test(test_root_cause),
      cmocka_unit_test(test_bad_notices),      cmocka_unit_test(test_heartbeats),
      cmocka_unit_test(test_silence),          cmocka_unit_test(test_hang),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
