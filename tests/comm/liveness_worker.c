/* One rank of the liveness tests (SPEC H1), started N times by `sgrt launch`:
 *   api    argument checks; heartbeats keep silence short and never show up on
 *          the user's AM queues; a rank that computed for longer than dead_ms
 *          between calls blames nobody; abort from another thread ends a
 *          blocked collective with SG_ERR_COMM; destroy after abort is quick
 *   kill   the last rank SIGKILLs itself at a random moment of an allreduce
 *          loop; every other rank must get SG_ERR_COMM naming it within 3 s of
 *          the call's start, then destroy quickly and exit 0
 *   stop   the same with SIGSTOP; afterwards the stopped rank is continued and
 *          must itself fail fast (its peers are gone) and exit cleanly
 * The victim runs in a child of the launched process, which reports how the
 * child ended: the launcher would otherwise stop the job when a rank dies. */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../worker_check.h"
#include "sgrt/sgrt.h"

#define CHECK_ST(call, want)                                                                                \
  do {                                                                                                      \
    sg_status st_ = (call);                                                                                 \
    if (st_ != (want)) FAIL("%s returned %s, expected %s", #call, sg_status_str(st_), sg_status_str(want)); \
  } while (0)

static int g_rank = -1;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static int env_int(const char *name, int dflt) {
  const char *s = getenv(name);
  return s ? atoi(s) : dflt;
}

/* ---- api ------------------------------------------------------------------ */

typedef struct {
  sg_comm *comm;
  int delay_ms;
} abort_arg;

static void *abort_later(void *p) {
  abort_arg *a = p;
  sleep_ms(a->delay_ms);
  sg_comm_abort(a->comm, "test abort from a watchdog thread");
  return NULL;
}

static void run_api(sg_comm *c) {
  int me = sg_comm_rank(c), n = sg_comm_size(c), peer = (me + 1) % n;
  /* Arguments: each refusal names what was wrong. */
  CHECK_ST(sg_comm_set_liveness(NULL, 100, 1000), SG_ERR_INVALID_ARG);
  CHECK_ST(sg_comm_set_liveness(c, -1, 1000), SG_ERR_INVALID_ARG);
  if (strstr(sg_last_error(), "heartbeat_ms -1") == NULL) FAIL("message does not name heartbeat_ms");
  CHECK_ST(sg_comm_set_liveness(c, 100, 100), SG_ERR_INVALID_ARG);
  if (strstr(sg_last_error(), "dead_ms 100 must exceed heartbeat_ms 100") == NULL)
    FAIL("message does not name dead_ms");
  CHECK_ST(sg_comm_set_liveness(c, 100, 50), SG_ERR_INVALID_ARG);
  CHECK_ST(sg_comm_poll(NULL), SG_ERR_INVALID_ARG);
  if (sg_comm_peer_silence_ms(NULL, 0) != -1) FAIL("silence of a NULL communicator");
  if (sg_comm_peer_silence_ms(c, me) != -1) FAIL("silence of self should be -1");
  if (sg_comm_peer_silence_ms(c, n) != -1 || sg_comm_peer_silence_ms(c, -1) != -1)
    FAIL("silence of an invalid rank should be -1");
  sg_comm_abort(NULL, "no-op"); /* accepts NULL */

  CHECK_OK(sg_comm_set_liveness(c, 50, 600));
  CHECK_OK(sg_comm_barrier(c));
  /* Poll for 400 ms: peers' heartbeats (every 50 ms) keep the silence short. */
  double t0 = now_s();
  while (now_s() - t0 < 0.4) {
    CHECK_OK(sg_comm_poll(c));
    sleep_ms(1);
  }
  int64_t s = sg_comm_peer_silence_ms(c, peer);
  if (s < 0 || s > 300)
    FAIL("silence of peer rank %d is %lld ms with heartbeats every 50 ms", peer, (long long)s);
  /* Heartbeats travel on an internal AM id: no user queue ever sees one. */
  for (unsigned q = 0; q < 8; q++) {
    char buf[64];
    size_t len = sizeof buf;
    int from = -1;
    CHECK_ST(sg_comm_am_recv(c, q, buf, &len, &from, 0), SG_ERR_TIMEOUT);
  }
  CHECK_OK(sg_comm_barrier(c));

  /* Every rank computes (no comm call) for twice dead_ms, then meets in a
   * collective: nobody may be blamed for the time nobody could listen. */
  sleep_ms(1200);
  int32_t one = 1;
  CHECK_OK(sg_comm_allreduce(c, &one, &one, 1, SG_I32, SG_REDUCE_SUM));
  if (one != n) FAIL("allreduce gave %d", one);
  CHECK_OK(sg_comm_poll(c));

  /* Abort from another thread while this one is blocked: rank 0 waits in a
   * receive nobody answers; the watchdog aborts it after 200 ms. */
  CHECK_OK(sg_comm_barrier(c));
  if (me == 0) {
    pthread_t th;
    abort_arg a = {c, 200};
    if (pthread_create(&th, NULL, abort_later, &a) != 0) FAIL("pthread_create");
    int32_t x = 0;
    t0 = now_s();
    sg_status st = sg_comm_recv(c, 1, 77, &x, sizeof x);
    double dt = now_s() - t0;
    pthread_join(th, NULL);
    if (st != SG_ERR_COMM || strstr(sg_last_error(), "test abort from a watchdog thread") == NULL)
      FAIL("blocked receive after abort gave %s", sg_status_str(st));
    if (dt > 1.5) FAIL("the aborted receive returned after %.2f s", dt);
    printf("rank 0: aborted receive returned after %.3f s: %s\n", dt, sg_last_error());
  } else {
    /* Stay out of rank 0's way, then abort ourselves too (nobody is left for a barrier). */
    sleep_ms(600);
    sg_comm_abort(c, "rank 0 aborted");
    sg_comm_abort(c, "a second reason is ignored");
  }
  /* Every later call fails quickly with SG_ERR_COMM and the reason. */
  t0 = now_s();
  CHECK_ST(sg_comm_barrier(c), SG_ERR_COMM);
  CHECK_ST(sg_comm_poll(c), SG_ERR_COMM);
  CHECK_ST(sg_comm_send(c, peer, 1, &one, sizeof one), SG_ERR_COMM);
  if (strstr(sg_last_error(), me == 0 ? "watchdog" : "rank 0 aborted") == NULL)
    FAIL("later call's message lacks the abort reason");
  if (now_s() - t0 > 0.1) FAIL("calls after an abort took %.3f s", now_s() - t0);
}

/* ---- kill / stop ---------------------------------------------------------- */

static int g_signal;
static void on_alarm(int sig) {
  (void)sig;
  kill(getpid(), g_signal); /* async-signal-safe */
}

/* The launched process of the victim rank: runs the rank in a child and
 * reports how it ended. For `stop`, continues the stopped child after the
 * survivors have had time to notice and leave; the child must then exit 0. */
static int victim_parent(pid_t child, int sig) {
  int status;
  if (waitpid(child, &status, sig == SIGSTOP ? WUNTRACED : 0) != child) FAIL("waitpid");
  if (sig == SIGKILL) {
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) FAIL("victim ended with status 0x%x", status);
    printf("rank %d: killed itself with SIGKILL as planned\n", g_rank);
    return 0;
  }
  if (!WIFSTOPPED(status)) FAIL("victim ended with status 0x%x instead of stopping", status);
  printf("rank %d: stopped itself with SIGSTOP as planned\n", g_rank);
  sleep_ms(2500); /* the survivors fail within ~1.1 s and exit */
  double t0 = now_s();
  kill(child, SIGCONT);
  /* Its peers are gone: it must notice (dead_ms after resuming) and exit. */
  for (;;) {
    pid_t r = waitpid(child, &status, WNOHANG);
    if (r == child) break;
    if (now_s() - t0 > 6.0) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      FAIL("the continued victim did not exit within 6 s");
    }
    sleep_ms(10);
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    FAIL("the continued victim ended with status 0x%x after %.2f s", status, now_s() - t0);
  printf("rank %d: continued victim failed fast and exited cleanly after %.2f s\n", g_rank, now_s() - t0);
  return 0;
}

static void run_failure(sg_comm *c, int victim, int sig) {
  int me = sg_comm_rank(c), n = sg_comm_size(c);
  CHECK_OK(sg_comm_set_liveness(c, 100, 1000));
  /* 1-4 MiB vectors: ring path, segments in flight (rendezvous via shared
   * memory or CMA) when the victim goes. */
  size_t max_count = (4u << 20) / 4;
  float *buf = malloc(max_count * 4);
  if (buf == NULL) FAIL("out of memory");
  if (me == victim) {
    /* Go at a random moment 20-400 ms into the loop, wherever it is (early: often inside a transfer). */
    srand((unsigned)getpid());
    g_signal = sig;
    signal(SIGALRM, on_alarm);
    struct itimerval it = {{0, 0}, {0, 20000 + (rand() % 380000)}};
    setitimer(ITIMER_REAL, &it, NULL);
  }
  double deadline = now_s() + 20;
  for (unsigned it = 0;; it++) {
    size_t count = ((it % 4) + 1) * (max_count / 4);
    for (size_t i = 0; i < count; i++) buf[i] = (float)((me + i + it) % 7);
    double t0 = now_s();
    sg_status st = sg_comm_allreduce(c, buf, buf, count, SG_F32, SG_REDUCE_SUM);
    double dt = now_s() - t0;
    if (st == SG_OK) {
      /* Independent reference: the sum of (r + i + it) % 7 over ranks r. */
      for (size_t i = 0; i < count; i += 997) {
        float want = 0;
        for (int r = 0; r < n; r++) want += (float)((r + i + it) % 7);
        if (buf[i] != want) FAIL("iteration %u element %zu: %g, want %g", it, i, buf[i], want);
      }
      if (now_s() > deadline) FAIL("the victim never went away");
      continue;
    }
    /* The victim itself only gets here after SIGCONT, when everyone else is
     * gone: any unreachable peer will do. The others must name the victim. */
    char want[64];
    snprintf(want, sizeof want, "rank %d is unreachable", victim);
    if (st != SG_ERR_COMM || (me != victim && strstr(sg_last_error(), want) == NULL))
      FAIL("allreduce %u failed with %s, expected SG_ERR_COMM with '%s'", it, sg_status_str(st), want);
    if (me != victim && dt > 3.0) FAIL("noticing the failure took %.2f s", dt);
    printf("rank %d: allreduce %u failed after %.2f s: %s\n", me, it, dt, sg_last_error());
    break;
  }
  /* Later calls fail at once, naming the same cause. */
  double t0 = now_s();
  CHECK_ST(sg_comm_barrier(c), SG_ERR_COMM);
  if (now_s() - t0 > 0.1) FAIL("a barrier after the failure took %.2f s", now_s() - t0);
  free(buf);
  t0 = now_s();
  CHECK_OK(sg_comm_destroy(c));
  double dt = now_s() - t0;
  if (dt > 3.0) FAIL("destroy after the failure took %.2f s", dt);
  printf("rank %d: destroy after the failure took %.3f s\n", me, dt);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "api";
  g_rank = env_int("SG_RANK", 0);
  int n = env_int("SG_WORLD_SIZE", 1), victim = n - 1;
  int sig = strcmp(mode, "kill") == 0 ? SIGKILL : strcmp(mode, "stop") == 0 ? SIGSTOP : 0;
  if (sig && g_rank == victim) {
    fflush(NULL);
    pid_t child = fork();
    if (child < 0) FAIL("fork");
    if (child > 0) return victim_parent(child, sig);
  }
  sg_comm_params cp = SG_COMM_PARAMS_INIT;
  sg_comm *c = NULL;
  CHECK_OK(sg_comm_create(&cp, &c));
  if (strcmp(mode, "api") == 0) {
    run_api(c);
    double t0 = now_s();
    CHECK_OK(sg_comm_destroy(c)); /* aborted: no barrier, returns at once */
    if (now_s() - t0 > 3.0) FAIL("destroy after abort took %.2f s", now_s() - t0);
    printf("rank %d: liveness API checks passed\n", g_rank);
  } else if (sig) {
    run_failure(c, victim, sig);
  } else {
    FAIL("unknown mode '%s'", mode);
  }
  return 0;
}
