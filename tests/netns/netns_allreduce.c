/* One rank of the link-cut demonstration (tests/netns/netns.sh runs one in
 * each of two network namespaces joined by a veth pair, then takes the link
 * down). Each rank joins through the real communication layer (UCX over TCP
 * on the veth), turns peer liveness on (heartbeats every 100 ms, dead after
 * 1000 ms) and loops: send a health heartbeat payload to the peer, allreduce,
 * feed the peer's heartbeats to a health monitor. Once the link is cut, the
 * next call must fail with an error -- not hang -- within DETECT_BOUND_MS of
 * the cut; the monitor must then report the peer UNREACHABLE.
 *
 * Environment: SG_RANK, SG_WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
 * SG_COMM_TIMEOUT_MS, UCX_TLS, UCX_NET_DEVICES (set by netns.sh), and
 * SG_NETNS_CUT_FILE: netns.sh writes the wall-clock time of the cut (ms
 * since the epoch) there; both namespaces share the kernel's clock.
 * Exit status 0 when this rank saw what it should. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sgrt/sgrt.h"

#define DETECT_BOUND_MS 2000 /* liveness declares a peer dead after 1000 ms of silence */
#define RUN_LIMIT_MS 30000   /* no failure by then: the cut never came, or a call hangs */

static int g_rank = -1;

#define FAIL(...)                                            \
  do {                                                       \
    fprintf(stderr, "FAIL rank %d: ", g_rank);               \
    fprintf(stderr, __VA_ARGS__);                            \
    fprintf(stderr, " (last error: %s)\n", sg_last_error()); \
    exit(1);                                                 \
  } while (0)

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The cut's wall time from the harness; waits a little, as the harness may
 * still be writing it when a fast rank gets here. */
static int64_t cut_time(void) {
  const char *path = getenv("SG_NETNS_CUT_FILE");
  if (path == NULL) FAIL("SG_NETNS_CUT_FILE is not set (run me through tests/netns/netns.sh)");
  for (int i = 0; i < 500; i++) {
    FILE *f = fopen(path, "r");
    long long t = 0;
    if (f) {
      int ok = fscanf(f, "%lld", &t) == 1;
      fclose(f);
      if (ok && t > 0) return t;
    }
    struct timespec ts = {0, 10 * 1000000L};
    nanosleep(&ts, NULL);
  }
  FAIL("no cut time in %s after 5 s: the harness did not cut the link", path);
}

int main(void) {
  sg_comm_params cp = SG_COMM_PARAMS_INIT;
  sg_comm *c;
  if (sg_comm_create(&cp, &c) != SG_OK) FAIL("sg_comm_create failed");
  g_rank = sg_comm_rank(c);
  int n = sg_comm_size(c), peer = (g_rank + 1) % n;
  if (n != 2) FAIL("this demonstration runs on 2 ranks, not %d", n);
  if (sg_comm_set_liveness(c, 100, 1000) != SG_OK) FAIL("sg_comm_set_liveness failed");

  sg_health *h;
  if (sg_health_create(n, g_rank, NULL, mono_ms(), &h) != SG_OK) FAIL("sg_health_create failed");
  sg_health_add_ring(h, NULL, n);

  float buf[1024];
  int64_t start = mono_ms(), last_ok_wall = 0;
  long ops = 0;
  sg_status st = SG_OK;
  const char *what = "";
  for (uint64_t step = 0; mono_ms() - start < RUN_LIMIT_MS; step++) {
    uint8_t msg[SG_HEARTBEAT_BYTES];
    size_t len;
    sg_heartbeat hb = {g_rank, 0, step, 0, (uint64_t)wall_ms()};
    if (sg_heartbeat_encode(&hb, msg, sizeof msg, &len) != SG_OK) FAIL("sg_heartbeat_encode failed");
    /* The monitor hears this rank's own heartbeats too: diagnosis compares everyone. */
    if (sg_health_heartbeat(h, g_rank, mono_ms(), &hb) != SG_OK) FAIL("sg_health_heartbeat (self) failed");
    if ((st = sg_comm_am_send(c, peer, 0, msg, len)) != SG_OK) {
      what = "heartbeat send";
      break;
    }
    for (int i = 0; i < 1024; i++) buf[i] = (float)(g_rank + 1);
    if ((st = sg_comm_allreduce(c, buf, buf, 1024, SG_F32, SG_REDUCE_SUM)) != SG_OK) {
      what = "allreduce";
      break;
    }
    if (buf[0] != 3.0f || buf[1023] != 3.0f) FAIL("allreduce gave %g, expected 3", buf[0]);
    /* Take the peer's heartbeats that arrived meanwhile. */
    for (;;) {
      uint8_t in[64];
      size_t got = sizeof in;
      int from = -1;
      if (sg_comm_am_recv(c, 0, in, &got, &from, 0) != SG_OK) break;
      sg_heartbeat rx;
      if (sg_heartbeat_decode(in, got, n, &rx) != SG_OK) FAIL("heartbeat from rank %d does not decode", from);
      if (sg_health_heartbeat(h, from, mono_ms(), &rx) != SG_OK) FAIL("sg_health_heartbeat refused it");
    }
    sg_health_tick(h, mono_ms());
    last_ok_wall = wall_ms();
    ops++;
  }
  int64_t failed_wall = wall_ms();
  if (st == SG_OK)
    FAIL("%ld operations in %d ms and none failed: the link was never cut, or a call hung", ops,
         RUN_LIMIT_MS);
  char err[512];
  snprintf(err, sizeof err, "%s", sg_last_error());
  if (st != SG_ERR_COMM && st != SG_ERR_TIMEOUT)
    FAIL("%s failed with %s, expected SG_ERR_COMM", what, sg_status_str(st));
  if (ops < 10) FAIL("only %ld operations before the failure: the job never ran properly", ops);
  int64_t cut = cut_time(), detect = failed_wall - cut;
  printf("rank %d: %ld operations; %s failed %lld ms after the link was cut (last success %lld ms after it): "
         "%s: %s\n",
         g_rank, ops, what, (long long)detect, (long long)(last_ok_wall - cut), sg_status_str(st), err);
  if (detect < 0) FAIL("the failure came %lld ms before the cut", (long long)-detect);
  if (detect > DETECT_BOUND_MS)
    FAIL("detection took %lld ms, bound %d ms", (long long)detect, DETECT_BOUND_MS);

  /* What the scheduler would do with it: mark the peer, ask who is stuck. */
  if (sg_health_peer_failed(h, peer, mono_ms(), err) != SG_OK) FAIL("sg_health_peer_failed failed");
  sg_health_state s;
  if (sg_health_state_of(h, peer, &s) != SG_OK || s != SG_HEALTH_UNREACHABLE) FAIL("peer is not UNREACHABLE");
  size_t nd = 0;
  int deps[2];
  sg_health_unhealthy_deps(h, g_rank, deps, 2, &nd);
  if (nd != 1 || deps[0] != peer) FAIL("the ring dependency on rank %d is not reported unhealthy", peer);
  char why[256];
  sg_health_diagnose(h, why, sizeof why, NULL);
  printf("rank %d: health: rank %d UNREACHABLE; diagnosis: %s\n", g_rank, peer, why);
  sg_health_destroy(h);

  int64_t t0 = mono_ms();
  sg_comm_destroy(c); /* after a failure: no barrier, closes without waiting for the peer */
  int64_t dt = mono_ms() - t0;
  if (dt > 5000) FAIL("sg_comm_destroy took %lld ms after the failure", (long long)dt);
  printf("rank %d: PASS (destroy took %lld ms)\n", g_rank, (long long)dt);
  return 0;
}
