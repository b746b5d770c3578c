/* Peer processes (src/comm/proc_watch.c): the identity a rank publishes is
 * validated like any network input (SPEC S1), and the watch reports a
 * watched process's exit exactly once, with the last look that saw it
 * running, and never a live one. The processes are real (fork); no
 * timing is asserted beyond "within 5 s". */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "comm/comm_internal.h"
#include "test_util.h"

static void sleep_ms(int ms) {
  struct timespec ts = {0, (long)ms * 1000000L};
  nanosleep(&ts, NULL);
}

static void test_ident_round_trip(void **state) {
  (void)state;
  sg__proc_ident me, back;
  sg__proc_ident_self(&me);
  assert_int_equal(me.pid, (uint32_t)getpid());
  assert_true(me.pid_ns != 0);
  assert_int_equal(strlen(me.boot_id), SG__BOOT_ID_LEN);
  uint8_t buf[SG__PROC_IDENT_BYTES];
  sg__proc_ident_encode(&me, buf);
  assert_int_equal(sg__proc_ident_decode(buf, sizeof buf, 3, &back), SG_OK);
  assert_int_equal(back.pid, me.pid);
  assert_true(back.pid_ns == me.pid_ns);
  assert_string_equal(back.boot_id, me.boot_id);
  assert_true(sg__proc_same_kernel(&me, &back));
  /* Another boot or another pid namespace: not the same kernel's pids. */
  sg__proc_ident other = back;
  other.boot_id[0] = other.boot_id[0] == 'a' ? 'b' : 'a';
  assert_false(sg__proc_same_kernel(&me, &other));
  other = back;
  other.pid_ns++;
  assert_false(sg__proc_same_kernel(&me, &other));
  /* Unknown identity never matches. */
  sg__proc_ident unknown = {0};
  assert_false(sg__proc_same_kernel(&unknown, &unknown));
}

static void test_ident_rejects(void **state) {
  (void)state;
  sg__proc_ident me, out;
  sg__proc_ident_self(&me);
  uint8_t good[SG__PROC_IDENT_BYTES], bad[SG__PROC_IDENT_BYTES];
  sg__proc_ident_encode(&me, good);
  assert_int_equal(sg__proc_ident_decode(good, SG__PROC_IDENT_BYTES - 1, 2, &out), SG_ERR_TRUNCATED);
  assert_non_null(strstr(sg_last_error(), "rank 2"));
  memcpy(bad, good, sizeof bad);
  bad[0] ^= 1; /* magic */
  assert_int_equal(sg__proc_ident_decode(bad, sizeof bad, 2, &out), SG_ERR_FORMAT);
  assert_non_null(strstr(sg_last_error(), "magic"));
  memcpy(bad, good, sizeof bad);
  bad[4] = 9; /* version */
  assert_int_equal(sg__proc_ident_decode(bad, sizeof bad, 2, &out), SG_ERR_FORMAT);
  memcpy(bad, good, sizeof bad);
  memset(bad + 8, 0, 4); /* pid 0 */
  assert_int_equal(sg__proc_ident_decode(bad, sizeof bad, 2, &out), SG_ERR_FORMAT);
  assert_non_null(strstr(sg_last_error(), "malformed"));
  memcpy(bad, good, sizeof bad);
  bad[20] = 'Z'; /* boot id not hex */
  assert_int_equal(sg__proc_ident_decode(bad, sizeof bad, 2, &out), SG_ERR_FORMAT);
  memcpy(bad, good, sizeof bad);
  bad[28] = 'a'; /* a dash position */
  assert_int_equal(sg__proc_ident_decode(bad, sizeof bad, 2, &out), SG_ERR_FORMAT);
  memcpy(bad, good, sizeof bad);
  bad[SG__PROC_IDENT_BYTES - 1] = 1; /* reserved */
  assert_int_equal(sg__proc_ident_decode(bad, sizeof bad, 2, &out), SG_ERR_FORMAT);
  /* An unknown boot id (zeros) is valid: that peer is just never watched. */
  memcpy(bad, good, sizeof bad);
  memset(bad + 20, 0, SG__BOOT_ID_LEN);
  assert_int_equal(sg__proc_ident_decode(bad, sizeof bad, 2, &out), SG_OK);
  assert_false(sg__proc_same_kernel(&me, &out));
}

typedef struct seen {
  int n, peer[8];
} seen;

static void on_exit_cb(void *ctx, int peer) {
  seen *s = ctx;
  if (s->n < 8) s->peer[s->n] = peer;
  s->n++;
}

static pid_t spawn_sleeper(void) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    /* Should the test fail before killing it: it holds no pipe of the test
     * runner's open, and ends by itself. */
    close(0), close(1), close(2);
    alarm(60);
    for (;;) pause();
  }
  return pid;
}

static void test_watch_exit(void **state) {
  (void)state;
  sg__proc_watch *w;
  assert_int_equal(sg__proc_watch_create(4, &w), SG_OK);
  pid_t a = spawn_sleeper(), b = spawn_sleeper();
  assert_true(sg__proc_watch_add(w, 1, (uint32_t)a));
  assert_true(sg__proc_watch_add(w, 3, (uint32_t)b));
  assert_false(sg__proc_watch_add(w, 2, (uint32_t)getpid())); /* ourselves: nothing to watch */
  assert_false(sg__proc_watch_add(w, 4, (uint32_t)a));        /* out of range */
  assert_int_equal(sg__proc_watch_count(w), 2);
  seen s = {0};
  /* Both alive: looks report nothing, and nobody has exited. */
  for (int i = 0; i < 5; i++) {
    sg__proc_watch_poll(w, sg__now_ms() + 10 * i, on_exit_cb, &s);
    sleep_ms(3);
  }
  assert_int_equal(s.n, 0);
  assert_int_equal(sg__proc_watch_last_running(w, 1), -1);
  assert_int_equal(sg__proc_watch_last_running(w, 3), -1);
  int64_t before_kill = sg__now_ms();
  sg__proc_watch_poll(w, before_kill + 100, on_exit_cb, &s); /* the last look that sees b running */
  kill(b, SIGKILL);
  /* Before the owner looks, another thread may already ask: b has exited. */
  int64_t t0 = sg__now_ms();
  while (sg__proc_watch_last_running(w, 3) < 0 && sg__now_ms() - t0 < 5000) sleep_ms(1);
  assert_int_equal(sg__proc_watch_last_running(w, 3), before_kill + 100);
  int64_t now = before_kill + 200;
  while (s.n == 0 && sg__now_ms() - t0 < 5000) {
    now += 10;
    sg__proc_watch_poll(w, now, on_exit_cb, &s);
    sleep_ms(1);
  }
  assert_int_equal(s.n, 1);
  assert_int_equal(s.peer[0], 3);
  assert_int_equal(sg__proc_watch_last_running(w, 3), before_kill + 100);
  assert_int_equal(sg__proc_watch_last_running(w, 1), -1); /* a is still running */
  /* Reported once, even though the pidfd stays readable (and the zombie is reaped later). */
  for (int i = 0; i < 5; i++) sg__proc_watch_poll(w, now += 10, on_exit_cb, &s);
  waitpid(b, NULL, 0);
  for (int i = 0; i < 5; i++) sg__proc_watch_poll(w, now += 10, on_exit_cb, &s);
  assert_int_equal(s.n, 1);
  /* Looks within 2 ms of the last do nothing. */
  kill(a, SIGKILL);
  waitpid(a, NULL, 0);
  sg__proc_watch_poll(w, now + 1, on_exit_cb, &s);
  assert_int_equal(s.n, 1);
  sg__proc_watch_poll(w, now + 10, on_exit_cb, &s);
  assert_int_equal(s.n, 2);
  assert_int_equal(s.peer[1], 1);
  sg__proc_watch_destroy(w);
}

static void test_watch_gone_before(void **state) {
  (void)state;
  /* A peer that exited (and was reaped) before the watch was set up: its
   * pid no longer exists, so it is reported at the first look. */
  pid_t c = fork();
  assert_true(c >= 0);
  if (c == 0) _exit(0);
  waitpid(c, NULL, 0);
  sg__proc_watch *w;
  assert_int_equal(sg__proc_watch_create(2, &w), SG_OK);
  assert_true(sg__proc_watch_add(w, 1, (uint32_t)c));
  assert_int_equal(sg__proc_watch_last_running(w, 1), 0); /* never seen running */
  seen s = {0};
  sg__proc_watch_poll(w, sg__now_ms(), on_exit_cb, &s);
  assert_int_equal(s.n, 1);
  assert_int_equal(s.peer[0], 1);
  sg__proc_watch_destroy(w);
  sg__proc_watch_destroy(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ident_round_trip),
      cmocka_unit_test(test_ident_rejects),
      cmocka_unit_test(test_watch_exit),
      cmocka_unit_test(test_watch_gone_before),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
