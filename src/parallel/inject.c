/* Fault injection inside the library (SPEC H6, docs/resilience.md): the
 * plan comes from sg_dist_params.inject, or from SG_INJECT in a library
 * built with SG_FAULT_INJECTION (parsed by sg_fault_plan_parse, steps drawn
 * from inject_seed or SG_INJECT_SEED), and this rank's faults fire at the start of their step,
 * where a real failure would hit a running job: kill (SIGKILL), stop
 * (SIGSTOP: a hang), drop-heartbeats (the scheduler thread, which sends
 * heartbeats and runs the collectives, stops doing anything for a while: a
 * hung communication thread), partition (the two ranks cut their link to
 * each other; with ms=T it comes back after T ms), device (the rank's device fails as after a sticky error,
 * so that its step fails with SG_ERR_DEVICE and the rank leaves), hang (the compute thread stops making
 * progress while the scheduler thread goes on heartbeating: only hang diagnosis, SPEC H7, can find it),
 * slow (every later step's compute is stretched F times, as on a slower or shared CPU: the others' health
 * monitors find the rank DEGRADED, too slow). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "parallel/dist_internal.h"

const char *sg__dist_inject_env(void) {
  const char *spec = getenv("SG_INJECT");
  return spec != NULL && *spec != '\0' ? spec : NULL;
}

#ifdef SG_FAULT_INJECTION
/* SG_INJECT_SEED: an unsigned integer, 0 when unset. */
static sg_status env_seed(uint64_t *seed) {
  *seed = 0;
  const char *s = getenv("SG_INJECT_SEED");
  if (s == NULL || *s == '\0') return SG_OK;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || *end != '\0' || s[0] == '-')
    return sg__error(SG_ERR_INVALID_ARG, "sg_dist_create: SG_INJECT_SEED='%s' is not an unsigned integer", s);
  *seed = v;
  return SG_OK;
}
#endif

sg_status sg__dist_inject_init(sg_dist *d) { return sg__dist_inject_parse(d, &d->heal.inject); }

sg_status sg__dist_inject_parse(sg_dist *d, sg_fault_plan **out) {
  *out = NULL;
  const char *spec = d->p.inject, *from = "sg_dist_params.inject";
  uint64_t seed = d->p.inject_seed;
  if (spec == NULL && (spec = sg__dist_inject_env()) != NULL) {
#ifndef SG_FAULT_INJECTION
    /* Fault injection is a debug facility: a variable alone must not arm it
     * in a production library, and a fault asked for is never ignored. */
    return sg__error(SG_ERR_UNSUPPORTED,
                     "sg_dist_create: SG_INJECT='%.64s' is set, but this libsgrt was built without fault "
                     "injection from the environment: configure it with -DSG_FAULT_INJECTION=ON (as "
                     "scripts/test.sh does), or give the plan in sg_dist_params.inject",
                     spec);
#else
    from = "SG_INJECT";
    SG_CHECK(env_seed(&seed));
#endif
  }
  if (spec == NULL || *spec == '\0') return SG_OK;
  sg_status st = sg_fault_plan_parse(spec, d->orig_size, seed, out);
  if (st != SG_OK) {
    char why[512];
    snprintf(why, sizeof why, "%s", sg_last_error()); /* the error buffer is about to be rewritten */
    return sg__error(st, "sg_dist_create: %s: %s", from, why);
  }
  return SG_OK;
}

/* How long a rank whose heartbeats are dropped stays hung: long enough for
 * the others to detect it and recover without it, after which it notices
 * that it was excluded and leaves (no wait without a bound). */
static int64_t hang_ns(const sg_dist *d) {
  int64_t ms = 4 * (int64_t)d->p.dead_ms + 3000;
  return ms * 1000000;
}

/* hang: this (compute) thread stops making progress at the start of the
 * step, as if a kernel looped forever; the scheduler thread is untouched, so
 * heartbeats go on and the peers see a live rank that never enters the
 * step's first collective. They diagnose it stuck (SPEC H7), give it up and
 * tell it; its scheduler thread then records the job's failure. A really
 * stuck thread could not be woken to act on that either, so the process
 * ends itself here with SG_DIST_EXIT_EXCLUDED, the status of a rank left
 * out of the job (`sgrt launch --heal` does not count it as a failure), and
 * does not keep the job from ending. It ends so on any failure of the job
 * (also when the peers gave up otherwise); with heartbeats off nothing
 * tells it, and it hangs until the launcher tears the job down. */
__attribute__((noreturn)) static void hang(sg_dist *d, uint64_t step) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  fprintf(stderr,
          "sgrt: rank %d: the compute thread hangs at the start of step %llu (wall clock %lld.%03ld s)\n",
          d->orig_rank, (unsigned long long)step, (long long)ts.tv_sec, ts.tv_nsec / 1000000);
  fflush(stderr);
  char why[sizeof d->fail_msg];
  pthread_mutex_lock(&d->mu);
  while (d->failed == SG_OK) pthread_cond_wait(&d->wake_compute, &d->mu);
  memcpy(why, d->fail_msg, sizeof why);
  /* Without healing (no feed) the job ends here: the others report the
   * stuck rank and exit, and the launcher ends this process then. Leaving
   * first would make the launcher stop them before they said why. */
  while (d->p.feed == NULL) pthread_cond_wait(&d->wake_compute, &d->mu);
  pthread_mutex_unlock(&d->mu);
  fprintf(
      stderr,
      "sgrt: rank %d: stuck since step %llu, and the job gave up on it: %s; ending the process (exit %d)\n",
      d->orig_rank, (unsigned long long)step, why, SG_DIST_EXIT_EXCLUDED);
  fflush(stderr);
  _exit(SG_DIST_EXIT_EXCLUDED);
}

typedef struct cut_arg {
  int peer, orig;  /* the other end: its rank in the communicator, its original rank */
  int64_t link_ms; /* how long the link stays down; 0: for good */
} cut_arg;

/* The link goes down at once (an endpoint failure on this communicator);
 * the recovery job reads how long it stays down (best-effort QoS probes it). */
static sg_status cut_job(sg_dist *d, void *arg) {
  const cut_arg *c = arg;
  d->heal.link_down_until_ms[c->orig] = c->link_ms > 0 ? sg__now_ms() + c->link_ms : INT64_MAX;
  return sg__comm_cut_peer(d->comm, c->peer);
}

sg_status sg__dist_inject_step(sg_dist *d, uint64_t step) {
  if (d->heal.inject == NULL || step < d->heal.inject_next) return SG_OK;
  d->heal.inject_next = step + 1;
  sg_fault f[8];
  size_t n = sg_fault_plan_due(d->heal.inject, d->orig_rank, (int64_t)step, f, 8);
  for (size_t i = 0; i < n && i < 8; i++) {
    fprintf(stderr, "sgrt: rank %d: injected fault '%s' at the start of step %llu\n", d->orig_rank,
            sg_fault_kind_name(f[i].kind), (unsigned long long)step);
    fflush(stderr);
    switch (f[i].kind) {
      case SG_FAULT_KILL: raise(SIGKILL); break;
      case SG_FAULT_STOP: raise(SIGSTOP); break;
      case SG_FAULT_DROP_HEARTBEATS: sg__dist_sched_pause(d, hang_ns(d)); break;
      case SG_FAULT_PARTITION: {
        int other = f[i].rank == d->orig_rank ? f[i].peer : f[i].rank;
        int cur = -1;
        for (int r = 0; r < d->size; r++)
          if (d->members[r] == other) cur = r;
        if (cur < 0) break; /* no longer a member: nothing to cut */
        cut_arg c = {cur, other, sg_fault_plan_link_ms(d->heal.inject, f[i].rank, f[i].peer, (int64_t)step)};
        if (c.link_ms > 0)
          fprintf(stderr, "sgrt: rank %d: the link to rank %d is down for %lld ms\n", d->orig_rank, other,
                  (long long)c.link_ms);
        SG_CHECK(sg__dist_run_job(d, cut_job, &c));
        break;
      }
      case SG_FAULT_DROP_CHECKINS: /* heartbeats go on: the others see a DEGRADED rank, not a failure */
        pthread_mutex_lock(&d->mu);
        d->heal.ci.muted = true;
        pthread_mutex_unlock(&d->mu);
        break;
      case SG_FAULT_SLOW: /* step.c stretches every step's compute from now on */
        d->heal.slow_factor = sg_fault_plan_slow_factor(d->heal.inject, d->orig_rank, (int64_t)step);
        fprintf(stderr, "sgrt: rank %d: computing %.3gx slower from now on\n", d->orig_rank,
                d->heal.slow_factor);
        break;
      case SG_FAULT_BEHIND: /* fires in step.c, once the step's gradients are averaged */
        d->heal.inject_behind = step + 1;
        break;
      case SG_FAULT_HANG: hang(d, step);
      case SG_FAULT_DEVICE: {
        /* The device fails as after a sticky error (an illegal address, an
         * ECC error: the backend's fail entry); the step's first kernel then
         * reports it, and the rank leaves the job (step.c). */
        char why[96];
        snprintf(why, sizeof why, "rank %d, step %llu: injected device failure (fault injection)",
                 d->orig_rank, (unsigned long long)step);
        sg__session_fail_device(d->s, why);
        break;
      }
    }
  }
  return SG_OK;
}

sg_status sg__dist_inject_recovery(sg_dist *d, sg_recovery_phase phase) {
  if (d->heal.inject == NULL || (d->heal.inject_phases_fired >> phase) & 1u) return SG_OK;
  sg_fault f;
  if (sg_fault_plan_due_in_recovery(d->heal.inject, d->orig_rank, phase, &f, 1) == 0) return SG_OK;
  d->heal.inject_phases_fired |= 1u << phase; /* once per process, in its first recovery to reach the phase */
  if (phase == SG_RECOVERY_CREATE)
    fprintf(stderr, "sgrt: rank %d: injected fault 'kill' in sg_dist_create, before the first collective\n",
            d->orig_rank);
  else
    fprintf(stderr, "sgrt: rank %d: injected fault 'kill' in the '%s' phase of a recovery\n", d->orig_rank,
            sg_recovery_phase_name(phase));
  fflush(stderr);
  raise(SIGKILL);
  return SG_OK;
}
