/* Rejoin (issue 9, docs/resilience.md "Rejoin"): a rank that died is
 * restarted by the launcher (`sgrt launch --heal --restart-failed K` sets
 * SG_REJOIN=1) and joins the running job at the next epoch, where it
 * receives the step counter, parameters, state and optimizer state. All the
 * agreement goes through the rendezvous store, which the launcher hosts.
 *
 * The joiner (sg_dist_create with SG_REJOIN=1, scheduler thread): counts an
 * incarnation of its original rank r ("rejoin/inc/<r>"), posts it
 * ("rejoin/req/<r>"), bumps the request counter ("rejoin/nreq") and waits,
 * bounded by the comm timeout, for a decision that lists it.
 *
 * The members: at each step boundary sg_dist_step hands a "look" to this
 * file's watcher thread and takes the answer of the previous boundary's look
 * (waiting for it if it still runs), so the store round trip runs during
 * the step, not before it. A look reads the request counter (one round
 * trip); when it moved, it reads the requests of the original ranks that
 * are not members (a request is open when its incarnation is above
 * "rejoin/admitted/<r>"). With open requests, the first member to claim
 * decision A ("rejoin/adm/<A>/claim") publishes it: the admission step S,
 * epoch E+1's ranks (the members and the joiners, dense ranks in
 * original-rank order), and bumps the counter once more.
 *
 * The rule for S: the decider's look was asked at boundary c (c steps
 * complete) and S = c + 3. (1) Nobody has started step index S yet: the
 * decider takes the look's answer before it starts its next step, so no
 * member can have completed step index c + 1 (that needs the decider's
 * gradients of it), let alone started c + 3. (2) Everyone sees the decision
 * in time: a member at boundary c + 2 has completed step index c + 1, which
 * the decider took part in after publishing, so the look it asks there
 * finds the decision, and its answer is taken at boundary c + 3 = S, before
 * step S. Ranks may be one step apart; nobody rolls back or forward. A
 * member that reaches S in another epoch than the decision's (a recovery
 * came in between: the members are not the decision's), or passes it after
 * a rollback, abandons it with a message: all members do the same, since a
 * recovery moves them all to one epoch.
 *
 * At S every member stops between steps and, on its scheduler thread,
 * builds the communicator of E+1 (a group "rejoin<A>" in the store, so that
 * an abandoned admission never collides with a recovery's epoch E+1). The
 * members then agree through the store that every one of them has it (else
 * all abandon it and go on with the old one: a joiner or member that died
 * during the admission leaves the job as it was, and a dead member is then
 * healed as usual). The new epoch is installed, the old communicator
 * aborted; the ranks check the gradient topology together (the joiner's
 * create checks its model) and the lowest-ranked member broadcasts the step
 * counter and then parameters, state and optimizer state
 * (sg__dist_job_broadcast). A failure from there on is an ordinary failure of
 * the new epoch: the job heals (a member's state is not changed by the
 * broadcast: it receives the bytes it has). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "parallel/dist_internal.h"

sg_status sg__dist_rejoin_init(sg_dist *d) {
  DP(d)->rj.nreq_seen = -1;
  const char *v = getenv("SG_REJOIN");
  if (v == NULL || *v == '\0' || strcmp(v, "0") == 0) return SG_OK;
  if (strcmp(v, "1") != 0)
    return sg__error(SG_ERR_INVALID_ARG, "sg_dist_create: SG_REJOIN='%.32s' is not 1 or 0", v);
  if (d->p.feed == NULL)
    return sg__error(SG_ERR_INVALID_ARG,
                     "sg_dist_create: SG_REJOIN=1 (a restarted rank rejoining the job) needs a feed callback "
                     "(sg_dist_params.feed): the job admits it at a step it feeds itself");
  /* ZeRO-1 shards the optimizer state: no member holds the joiner's share. */
  if (d->p.zero)
    return sg__error(SG_ERR_UNSUPPORTED,
                     "sg_dist_create: SG_REJOIN=1 with ZeRO-1 (sg_dist_params.zero): a rejoining rank cannot "
                     "receive its share of the sharded optimizer state; restart the job instead");
  DP(d)->rj.joining = true;
  return SG_OK;
}

static void watch_stop(sg_dist *d);

void sg__dist_rejoin_free(sg_dist *d) {
  /* The cost of watching for joiners (SG_LOG_LEVEL=info), for docs/resilience.md's figures. */
  if (DP(d)->rj.polls > 0 && DP(d)->rj.looks > 0)
    SG_INFO("rejoin: rank %d: %llu polls between steps, %.1f us each on average; %llu looks at the store "
            "during the steps, %.1f us each",
            d->orig_rank, (unsigned long long)DP(d)->rj.polls,
            DP(d)->rj.poll_ms * 1e3 / (double)DP(d)->rj.polls, (unsigned long long)DP(d)->rj.looks,
            DP(d)->rj.look_ms * 1e3 / (double)DP(d)->rj.looks);
  watch_stop(d);
  sg__store_close(DP(d)->rj.store);
  DP(d)->rj.store = NULL;
}

/* ---- store helpers ---------------------------------------------------------- */

static sg_status connect_store(sg_dist *d, int timeout_ms, sg__store **out) {
  sg_status s =
      sg__store_connect(d->heal.env.master_addr, d->heal.env.master_port, d->heal.env.token, timeout_ms, out);
  if (s == SG_OK) return SG_OK;
  char why[512];
  snprintf(why, sizeof why, "%s", sg_last_error()); /* the error buffer is about to be rewritten */
  return sg__error(SG_ERR_COMM, "rank %d: rejoin: the rendezvous store is unreachable: %s", d->orig_rank,
                   why);
}

/* The value under key into out[0..bytes), waiting up to timeout_ms; with
 * timeout_ms 0, SG_ERR_NOT_FOUND (no error set) when absent. *sized: the
 * value had exactly `bytes` bytes (out is left alone otherwise). */
static sg_status get_fixed(sg__store *st, const char *key, int timeout_ms, void *out, size_t bytes,
                           bool *sized) {
  void *v = NULL;
  size_t n = 0;
  sg_status s = sg__store_wait_get(st, key, timeout_ms, &v, &n);
  if (s == SG_ERR_TIMEOUT && timeout_ms == 0) {
    sg_clear_error();
    return SG_ERR_NOT_FOUND;
  }
  SG_CHECK(s);
  *sized = n == bytes;
  if (*sized) memcpy(out, v, bytes);
  sg__free(v);
  return SG_OK;
}

/* An int64 under key: SG_OK and *out, SG_ERR_NOT_FOUND when absent (no wait). */
static sg_status get_i64(sg__store *st, const char *key, int64_t *out) {
  bool ok = false;
  sg_status s = get_fixed(st, key, 0, out, sizeof *out, &ok);
  if (s != SG_OK) return s;
  if (!ok) return sg__error(SG_ERR_FORMAT, "rejoin: '%s' in the rendezvous store is malformed", key);
  return SG_OK;
}

static sg_status set_i64(sg__store *st, const char *key, int64_t v) {
  return sg__store_set(st, key, &v, sizeof v);
}

/* Decision A, waiting up to timeout_ms (0: no wait); validated before use (SPEC S1). */
static sg_status get_adm(sg_dist *d, sg__store *st, int64_t a, int timeout_ms, sg__dist_adm *out) {
  char key[64];
  snprintf(key, sizeof key, "rejoin/adm/%lld", (long long)a);
  bool ok = false;
  sg_status s = get_fixed(st, key, timeout_ms, out, sizeof *out, &ok);
  if (s != SG_OK) return s;
  ok = ok && out->index == a && out->epoch >= 0 && out->step >= 0 && out->n >= 1 && out->n <= d->orig_size &&
       out->n_join >= 1 && out->n_join < out->n;
  for (int i = 0; ok && i < out->n; i++)
    ok = out->orig[i] >= 0 && out->orig[i] < d->orig_size && (i == 0 || out->orig[i] > out->orig[i - 1]) &&
         out->inc[i] >= 0;
  if (!ok)
    return sg__error(SG_ERR_FORMAT, "rank %d: rejoin: decision %lld in the rendezvous store is malformed",
                     d->orig_rank, (long long)a);
  return SG_OK;
}

static int index_of(const sg__dist_adm *a, int orig) {
  for (int i = 0; i < a->n; i++)
    if (a->orig[i] == orig) return i;
  return -1;
}

/* The rank that sends the state: the lowest-ranked member (not a joiner). */
static int root_of(const sg__dist_adm *a) {
  for (int i = 0; i < a->n; i++)
    if (a->inc[i] == 0) return i;
  return 0;
}

/* Epoch E+1's communicator: the group "rejoin<A>" of the decision's ranks. */
static sg_status create_comm(sg_dist *d, const sg__dist_adm *a, int idx, sg_comm **out) {
  sg_comm_params cp;
  sg__dist_epoch_params(d, idx, a->n, (int)a->epoch + 1, &cp);
  char group[32];
  snprintf(group, sizeof group, "rejoin%lld", (long long)a->index);
  sg_comm *c = NULL;
  sg_status s = sg__comm_create_group(&cp, group, &c);
  if (s == SG_OK) s = sg_comm_set_liveness(c, d->p.heartbeat_ms, d->p.dead_ms);
  if (s != SG_OK) {
    char msg[512];
    sg__dist_discard_comm(c, msg, sizeof msg);
    return sg__error(SG_ERR_COMM, "building the communicator of epoch %d (%d ranks) failed: %s", cp.epoch,
                     a->n, msg);
  }
  *out = c;
  return SG_OK;
}

/* The members' agreement that every one of them built the communicator: each
 * adds itself to "done" (and to "okc" when it did); the first to see them all
 * (or to reach the deadline) decides the outcome for everyone. A slower
 * member's late success changes nothing: the outcome is claimed once. */
static sg_status agree_up(sg_dist *d, sg__store *st, const sg__dist_adm *a, bool ok, bool *go) {
  int members = a->n - a->n_join;
  char key[96], okey[96];
  int64_t v = 0;
  snprintf(okey, sizeof okey, "rejoin/adm/%lld/outcome", (long long)a->index);
  if (ok) {
    snprintf(key, sizeof key, "rejoin/adm/%lld/okc", (long long)a->index);
    SG_CHECK(sg__store_add(st, key, 1, &v));
  }
  snprintf(key, sizeof key, "rejoin/adm/%lld/done", (long long)a->index);
  SG_CHECK(sg__store_add(st, key, 1, &v));
  /* Every live member's create ends at about the same moment (they rendezvous),
   * a failed one within a step time of the others: a few heartbeats suffice. */
  int64_t window_ms = 2000 + (int64_t)d->p.dead_ms + 4 * (int64_t)d->p.heartbeat_ms;
  int64_t deadline = sg__now_ms() + window_ms;
  int64_t out = -1;
  while (v < members && sg__now_ms() < deadline) {
    if (get_i64(st, okey, &out) == SG_OK) break;
    usleep(2000);
    SG_CHECK(sg__store_add(st, key, 0, &v));
  }
  if (out < 0) {
    snprintf(key, sizeof key, "rejoin/adm/%lld/outcome/claim", (long long)a->index);
    int64_t claim = 0;
    SG_CHECK(sg__store_add(st, key, 1, &claim));
    if (claim == 1) {
      int64_t okc = 0;
      snprintf(key, sizeof key, "rejoin/adm/%lld/okc", (long long)a->index);
      SG_CHECK(sg__store_add(st, key, 0, &okc));
      out = okc >= members ? 1 : 0;
      SG_CHECK(set_i64(st, okey, out));
    } else {
      void *p = NULL;
      size_t n = 0;
      SG_CHECK(sg__store_wait_get(st, okey, (int)window_ms + 5000, &p, &n));
      bool good = n == sizeof out;
      if (good) memcpy(&out, p, sizeof out);
      sg__free(p);
      if (!good) return sg__error(SG_ERR_FORMAT, "rejoin: '%s' in the rendezvous store is malformed", okey);
    }
  }
  *go = out == 1;
  return SG_OK;
}

static void note_health(sg_dist *d, const sg__dist_adm *a) {
  if (d->heal.health == NULL) return;
  int orig[SG__DIST_MAX_RANKS];
  for (int i = 0; i < a->n; i++) orig[i] = a->orig[i];
  int64_t now = sg__now_ms();
  sg_health_reset_epoch(d->heal.health, now, (uint32_t)a->epoch + 1, orig, a->n);
  if (now > d->heal.ci.fed_ms) d->heal.ci.fed_ms = now; /* the monitor's clock: check-ins go in from here */
}

/* Root: its step count; everyone else receives it. */
static sg_status bcast_steps(sg_dist *d, int root, int64_t *steps) {
  return sg_comm_broadcast(d->comm, steps, 1, SG_I64, root);
}

/* ---- the joiner --------------------------------------------------------------- */

/* Waits for the decision that lists (orig, inc); *a receives it. */
static sg_status wait_decision(sg_dist *d, sg__store *st, int64_t inc, int64_t deadline, sg__dist_adm *a) {
  int64_t i = 0;
  for (;;) {
    sg_status s = get_adm(d, st, i, 0, a);
    if (s == SG_OK) {
      int k = index_of(a, d->orig_rank);
      if (k >= 0 && a->inc[k] == inc) return SG_OK;
      i++; /* someone else's admission */
      continue;
    }
    if (s != SG_ERR_NOT_FOUND) return s;
    if (sg__now_ms() >= deadline)
      return sg__error(SG_ERR_TIMEOUT,
                       "rank %d: rejoin: not admitted within %d ms (SG_COMM_TIMEOUT_MS): is the job still "
                       "running, with its rendezvous store hosted by `sgrt launch`?",
                       d->orig_rank, d->heal.env.timeout_ms);
    usleep(5000);
  }
}

/* Waits until a member reached the admission step in the decision's epoch
 * (then the communicator can be built) or found it stale. */
static sg_status wait_arrival(sg_dist *d, sg__store *st, const sg__dist_adm *a, int64_t deadline) {
  char akey[96], xkey[96];
  snprintf(akey, sizeof akey, "rejoin/adm/%lld/arrived", (long long)a->index);
  snprintf(xkey, sizeof xkey, "rejoin/adm/%lld/abandoned", (long long)a->index);
  for (;;) {
    int64_t v = 0;
    SG_CHECK(sg__store_add(st, akey, 0, &v));
    if (v > 0) return SG_OK;
    sg_status s = get_i64(st, xkey, &v);
    if (s == SG_OK)
      return sg__error(
          SG_ERR_COMM,
          "rank %d: rejoin: the admission at step %lld was abandoned (the members recovered from "
          "another failure first); restart this rank to ask again",
          d->orig_rank, (long long)a->step);
    if (s != SG_ERR_NOT_FOUND) return s;
    if (sg__now_ms() >= deadline)
      return sg__error(SG_ERR_TIMEOUT, "rank %d: rejoin: the members did not reach step %lld within %d ms",
                       d->orig_rank, (long long)a->step, d->heal.env.timeout_ms);
    usleep(2000);
  }
}

sg_status sg__dist_rejoin_join(sg_dist *d) {
  SG_CHECK(sg__comm_env_resolve(&d->comm_params, &d->heal.env));
  d->orig_rank = d->heal.env.rank;
  d->orig_size = d->heal.env.world_size;
  if (d->orig_size > SG__DIST_MAX_RANKS)
    return sg__error(SG_ERR_UNSUPPORTED, "sg_dist_create: rejoin supports at most %d ranks, not %d",
                     SG__DIST_MAX_RANKS, d->orig_size);
  if (d->orig_size < 2)
    return sg__error(SG_ERR_INVALID_ARG, "sg_dist_create: SG_REJOIN=1 in a job of %d rank: nobody to join",
                     d->orig_size);
  sg__store *st = NULL;
  SG_CHECK(connect_store(d, d->heal.env.timeout_ms, &st));
  int64_t deadline = sg__now_ms() + d->heal.env.timeout_ms;
  char key[64];
  int64_t inc = 0, q = 0;
  sg__dist_adm *a = &DP(d)->rj.adm;
  sg_comm *c = NULL;
  bool go = false;
  snprintf(key, sizeof key, "rejoin/inc/%d", d->orig_rank);
  sg_status s = sg__store_add(st, key, 1, &inc);
  snprintf(key, sizeof key, "rejoin/req/%d", d->orig_rank);
  if (s == SG_OK) s = set_i64(st, key, inc);
  if (s == SG_OK) s = sg__store_add(st, "rejoin/nreq", 1, &q);
  int64_t t0 = sg__now_ns();
  if (s == SG_OK) {
    fprintf(stderr, "sgrt: rank %d: asking to rejoin the job (incarnation %lld)\n", d->orig_rank,
            (long long)inc);
    s = wait_decision(d, st, inc, deadline, a);
  }
  if (s == SG_OK) s = wait_arrival(d, st, a, sg__now_ms() + d->heal.env.timeout_ms);
  int idx = index_of(a, d->orig_rank);
  if (s == SG_OK) s = create_comm(d, a, idx, &c);
  if (s == SG_OK) {
    /* The members' verdict on the communicator (the joiner has no vote: its
     * own failure shows to them as theirs). */
    snprintf(key, sizeof key, "rejoin/adm/%lld/outcome", (long long)a->index);
    void *v = NULL;
    size_t n = 0;
    int64_t out = 0;
    s = sg__store_wait_get(st, key, d->heal.env.timeout_ms, &v, &n);
    if (s == SG_OK) {
      if (n == sizeof out) memcpy(&out, v, sizeof out);
      sg__free(v);
      go = out == 1;
      if (!go)
        s = sg__error(SG_ERR_COMM, "rank %d: rejoin: the members abandoned the admission at step %lld",
                      d->orig_rank, (long long)a->step);
    }
  }
  sg__store_close(st);
  if (s != SG_OK) {
    if (c != NULL) {
      sg_comm_abort(c, "rejoin abandoned");
      sg_comm_destroy(c);
    }
    return s;
  }
  int orig[SG__DIST_MAX_RANKS];
  for (int i = 0; i < a->n; i++) orig[i] = a->orig[i];
  SG_CHECK(sg__dist_install_epoch(d, c, idx, a->n, (int)a->epoch + 1, orig));
  DP(d)->rj.wait_ms = (double)(sg__now_ns() - t0) * 1e-6;
  DP(d)->rj.next = a->index + 1;
  DP(d)->rj.nreq_seen = a->nreq;
  DP(d)->rj.seen_epoch = d->epoch;
  return SG_OK;
}

static sg_status receive_job(sg_dist *d, void *arg) {
  const sg__dist_adm *a = arg;
  int root = root_of(a);
  int64_t steps = -1;
  sg_status s = bcast_steps(d, root, &steps);
  if (s == SG_OK && steps != a->step)
    s = sg__error(SG_ERR_INTERNAL, "rank %d: rejoin: the members are at step %lld, the admission said %lld",
                  d->orig_rank, (long long)steps, (long long)a->step);
  if (s == SG_OK) s = sg__dist_job_broadcast(d, &root);
  return s;
}

sg_status sg__dist_rejoin_receive(sg_dist *d) {
  if (!DP(d)->rj.joining) return SG_OK;
  const sg__dist_adm *a = &DP(d)->rj.adm;
  int64_t t0 = sg__now_ns();
  SG_CHECK(sg__dist_run_job(d, receive_job, (void *)a));
  uint64_t s = (uint64_t)a->step;
  DP(d)->broadcast_done = true;
  d->stats.steps = s;
  d->heal.inject_next = s; /* SG_INJECT: faults of the steps before the admission are the old incarnation's */
  sg__session_set_steps(d->s, s);
  d->stats.rejoins = 1;
  d->stats.epoch = d->epoch;
  d->stats.world_size = d->size;
  note_health(d, a);
  fprintf(stderr,
          "sgrt: rank %d: rejoined the job: admitted at step %llu after %.1f ms, epoch %d, rank %d of %d "
          "(state received in %.1f ms)\n",
          d->orig_rank, (unsigned long long)s, DP(d)->rj.wait_ms, d->epoch, d->rank, d->size,
          (double)(sg__now_ns() - t0) * 1e-6);
  return SG_OK;
}

/* ---- the members ------------------------------------------------------------------ */

typedef struct admit_arg {
  const sg__dist_adm *a;
  int64_t steps;
  bool installed; /* out: the new epoch is in place (a later failure is the job's, healed) */
} admit_arg;

static sg_status admit_job(sg_dist *d, void *arg) {
  admit_arg *x = arg;
  const sg__dist_adm *a = x->a;
  int idx = index_of(a, d->orig_rank), epoch = (int)a->epoch + 1;
  sg_comm *c = NULL;
  sg_status cs = create_comm(d, a, idx, &c);
  char why[512] = "";
  if (cs != SG_OK) snprintf(why, sizeof why, "%s", sg_last_error());
  sg__store *st = NULL;
  bool go = false;
  sg_status s = connect_store(d, 2000, &st);
  if (s == SG_OK) s = agree_up(d, st, a, cs == SG_OK, &go);
  sg__store_close(st);
  if (s != SG_OK || !go) {
    if (s != SG_OK) snprintf(why, sizeof why, "%s", sg_last_error());
    if (c != NULL) {
      sg_comm_abort(c, "admission abandoned");
      sg_comm_destroy(c);
    }
    return sg__error(SG_ERR_COMM, "%s", why[0] ? why : "another member could not build the communicator");
  }
  /* The old communicator is replaced, not failed: aborting it lets destroy
   * skip its barrier (a member may be gone by then). */
  sg_comm_abort(d->comm, "replaced by a new epoch (a rank rejoined)");
  int orig[SG__DIST_MAX_RANKS];
  for (int i = 0; i < a->n; i++) orig[i] = a->orig[i];
  SG_CHECK(sg__dist_install_epoch(d, c, idx, a->n, epoch, orig));
  x->installed = true;
  note_health(d, a);
  /* The joiner's create checks the gradient topology with everyone (SPEC M5). */
  s = sg_comm_check_consistency(d->comm, DP(d)->plan.topology_hash, DP(d)->plan.dtype_ids,
                                DP(d)->plan.n_grads);
  int root = root_of(a);
  if (s == SG_OK) s = bcast_steps(d, root, &x->steps);
  if (s == SG_OK && x->steps != a->step)
    s = sg__error(SG_ERR_INTERNAL, "the sending member is at step %lld, the admission said %lld",
                  (long long)x->steps, (long long)a->step);
  if (s != SG_OK) {
    sg__dist_fail(d, SG_ERR_COMM, "rank %d: admitting a rank at step %lld failed: %s", d->rank,
                  (long long)a->step, sg_last_error());
    return sg__dist_failure(d);
  }
  return sg__dist_job_broadcast(d, &root); /* fails the job itself on error */
}

/* At boundary `steps` with decision a due now: arrival, then the admission
 * on the scheduler thread. */
static sg_status admit(sg_dist *d, sg__store *st, const sg__dist_adm *a) {
  char key[96];
  int64_t v = 0;
  snprintf(key, sizeof key, "rejoin/adm/%lld/arrived", (long long)a->index);
  SG_CHECK(sg__store_add(st, key, 1, &v));
  int64_t t0 = sg__now_ns();
  sg__dist_snap_wait(d); /* the scheduler is idle between steps; its copy is done */
  admit_arg x = {a, (int64_t)d->stats.steps, false};
  sg_status s = sg__dist_run_job(d, admit_job, &x);
  if (!x.installed) {
    fprintf(stderr,
            "sgrt: rank %d: rejoin: admission %lld at step %lld abandoned, going on with epoch %d: %s\n",
            d->orig_rank, (long long)a->index, (long long)a->step, d->epoch, sg_last_error());
    sg_clear_error();
    return SG_OK;
  }
  d->stats.epoch = d->epoch;
  d->stats.world_size = d->size;
  if (s != SG_OK) {
    /* The new epoch's failure: sg_dist_step heals it. */
    sg_clear_error();
    return SG_OK;
  }
  d->stats.rejoins++;
  fprintf(stderr, "sgrt: rank %d: admitted %d rank(s) at step %lld: epoch %d, rank %d of %d (%.1f ms)\n",
          d->orig_rank, a->n_join, (long long)a->step, d->epoch, d->rank, d->size,
          (double)(sg__now_ns() - t0) * 1e-6);
  return SG_OK;
}

/* ---- the watcher: the members' looks at the store, during the steps ------------ */

/* What the compute thread hands over at a boundary: a copy, so the watcher
 * never reads the handle's fields that a recovery changes. */
typedef struct look_req {
  int epoch, size;
  int members[SG__DIST_MAX_RANKS]; /* original ranks */
  uint64_t steps;                  /* the boundary it was asked at: steps complete */
  int64_t next, nreq_seen;
} look_req;

/* What it gets back at the next boundary. */
typedef struct look_res {
  sg_status status;
  char msg[512];
  int epoch;  /* the request's */
  bool found; /* adm is decision `next` */
  sg__dist_adm adm;
  int64_t nreq_seen; /* the counter when it found nothing to do */
  double ms;
} look_res;

struct sg__dist_watch {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool asked, busy, done, stop; /* a request waits / a look runs / a result waits / leave */
  look_req req;
  look_res res;
  sg__store *store; /* the watcher's own connection */
  sg_dist *d;       /* only its fields fixed at create are read */
};

/* The original ranks that asked to join and are not members: decision a. */
static sg_status open_requests(sg_dist *d, sg__store *st, const look_req *q, sg__dist_adm *a) {
  memset(a, 0, sizeof *a);
  bool member[SG__DIST_MAX_RANKS] = {false};
  for (int i = 0; i < q->size; i++) member[q->members[i]] = true;
  for (int r = 0; r < d->orig_size; r++) {
    int64_t req = 0, taken = 0;
    if (!member[r]) {
      char key[64];
      snprintf(key, sizeof key, "rejoin/req/%d", r);
      sg_status s = get_i64(st, key, &req);
      if (s == SG_ERR_NOT_FOUND) req = 0;
      else if (s != SG_OK) return s;
      snprintf(key, sizeof key, "rejoin/admitted/%d", r);
      s = get_i64(st, key, &taken);
      if (s == SG_ERR_NOT_FOUND) taken = 0;
      else if (s != SG_OK) return s;
    }
    if (!member[r] && req <= taken) continue; /* gone, and nobody asks for its place */
    a->orig[a->n] = r;
    a->inc[a->n++] = member[r] ? 0 : req;
    if (!member[r]) a->n_join++;
  }
  return SG_OK;
}

/* One look: the request counter (one round trip) and, when it moved, the
 * decision or the requests, and a decision of our own if we claim it. */
static sg_status look(sg_dist *d, sg__store *st, const look_req *q, look_res *r) {
  int64_t nreq = 0;
  r->nreq_seen = q->nreq_seen;
  SG_CHECK(sg__store_add(st, "rejoin/nreq", 0, &nreq));
  if (nreq == q->nreq_seen) return SG_OK;
  sg_status s = get_adm(d, st, q->next, 0, &r->adm);
  if (s == SG_OK) {
    r->found = true;
    return SG_OK;
  }
  if (s != SG_ERR_NOT_FOUND) return s;
  sg__dist_adm *mine = &r->adm;
  SG_CHECK(open_requests(d, st, q, mine));
  if (mine->n_join == 0) {
    r->nreq_seen = nreq; /* e.g. a restarted rank whose old incarnation is not yet found dead */
    return SG_OK;
  }
  char key[64];
  snprintf(key, sizeof key, "rejoin/adm/%lld/claim", (long long)q->next);
  int64_t claim = 0;
  SG_CHECK(sg__store_add(st, key, 1, &claim));
  if (claim != 1) { /* another member decides; it publishes right after claiming */
    SG_CHECK(get_adm(d, st, q->next, d->heal.env.timeout_ms, &r->adm));
    r->found = true;
    return SG_OK;
  }
  mine->index = q->next;
  mine->epoch = q->epoch;
  mine->step = (int64_t)q->steps + 3; /* the rule: see the top */
  mine->nreq = nreq;
  for (int i = 0; i < mine->n; i++) {
    if (mine->inc[i] == 0) continue;
    snprintf(key, sizeof key, "rejoin/admitted/%d", mine->orig[i]);
    SG_CHECK(set_i64(st, key, mine->inc[i]));
  }
  snprintf(key, sizeof key, "rejoin/adm/%lld", (long long)mine->index);
  SG_CHECK(sg__store_set(st, key, mine, sizeof *mine));
  /* Moves the counter past every value read before the decision existed, so
   * no member, whatever it read last, skips its look before the admission step. */
  int64_t bumped = 0;
  SG_CHECK(sg__store_add(st, "rejoin/nreq", 1, &bumped));
  fprintf(stderr, "sgrt: rank %d: %d rank(s) asked to rejoin: admission %lld at step %lld, epoch %lld\n",
          d->orig_rank, mine->n_join, (long long)mine->index, (long long)mine->step,
          (long long)mine->epoch + 1);
  r->found = true;
  return SG_OK;
}

static void *watch_main(void *arg) {
  struct sg__dist_watch *w = arg;
  pthread_mutex_lock(&w->mu);
  for (;;) {
    while (!w->asked && !w->stop) pthread_cond_wait(&w->cv, &w->mu);
    if (w->stop) break;
    look_req *q = sg__malloc(sizeof *q);
    look_res *r = sg__calloc(1, sizeof *r);
    if (q != NULL) *q = w->req;
    w->asked = false;
    w->busy = true;
    pthread_mutex_unlock(&w->mu);
    sg_status s = SG_ERR_NO_MEMORY;
    int64_t t0 = sg__now_ns();
    if (q != NULL && r != NULL) {
      sg_clear_error();
      s = w->store != NULL ? SG_OK : connect_store(w->d, 2000, &w->store);
      if (s == SG_OK) s = look(w->d, w->store, q, r);
    }
    pthread_mutex_lock(&w->mu);
    if (r != NULL) {
      r->status = s;
      r->epoch = q != NULL ? q->epoch : -1;
      r->ms = (double)(sg__now_ns() - t0) * 1e-6;
      if (s != SG_OK) snprintf(r->msg, sizeof r->msg, "%s", sg_last_error());
      w->res = *r;
    } else {
      w->res.status = SG_ERR_NO_MEMORY;
      snprintf(w->res.msg, sizeof w->res.msg, "out of memory");
    }
    sg__free(q);
    sg__free(r);
    w->busy = false;
    w->done = true;
    pthread_cond_broadcast(&w->cv);
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

static sg_status watch_start(sg_dist *d) {
  struct sg__dist_watch *w = sg__calloc(1, sizeof *w);
  if (w == NULL) return sg__error(SG_ERR_NO_MEMORY, "rejoin: out of memory");
  w->d = d;
  if (pthread_mutex_init(&w->mu, NULL) != 0) {
    sg__free(w);
    return sg__error(SG_ERR_NO_MEMORY, "rejoin: cannot create the watcher's lock");
  }
  if (pthread_cond_init(&w->cv, NULL) != 0 || pthread_create(&w->thread, NULL, watch_main, w) != 0) {
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    sg__free(w);
    return sg__error(SG_ERR_NO_MEMORY, "rejoin: cannot start the watcher thread");
  }
  DP(d)->rj.watch = w;
  return SG_OK;
}

static void watch_stop(sg_dist *d) {
  struct sg__dist_watch *w = DP(d)->rj.watch;
  if (w == NULL) return;
  pthread_mutex_lock(&w->mu);
  w->stop = true;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->thread, NULL);
  sg__store_close(w->store);
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
  sg__free(w);
  DP(d)->rj.watch = NULL;
}

/* Compute thread: the result of the look asked at the previous boundary
 * (waiting for it if it still runs: a decision must be known before the
 * next step starts). false when none was asked. */
static bool collect(sg_dist *d, look_res *out) {
  struct sg__dist_watch *w = DP(d)->rj.watch;
  pthread_mutex_lock(&w->mu);
  while (w->asked || w->busy) pthread_cond_wait(&w->cv, &w->mu);
  bool got = w->done;
  if (got) {
    out->status = w->res.status;
    out->epoch = w->res.epoch;
    out->found = w->res.found;
    out->nreq_seen = w->res.nreq_seen;
    out->ms = w->res.ms;
    memcpy(out->msg, w->res.msg, sizeof out->msg);
    if (out->found) out->adm = w->res.adm;
  }
  w->done = false;
  pthread_mutex_unlock(&w->mu);
  return got;
}

static void ask(sg_dist *d) {
  struct sg__dist_watch *w = DP(d)->rj.watch;
  pthread_mutex_lock(&w->mu);
  look_req *q = &w->req;
  q->epoch = d->epoch;
  q->size = d->size;
  memcpy(q->members, d->members, sizeof(int) * (size_t)d->size);
  q->steps = d->stats.steps;
  q->next = DP(d)->rj.next;
  q->nreq_seen = DP(d)->rj.nreq_seen;
  w->asked = true;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

static void turn_off(sg_dist *d, const char *why) {
  fprintf(stderr, "sgrt: rank %d: rejoin is off: %s\n", d->orig_rank, why);
  sg_clear_error();
  DP(d)->rj.off = true;
}

sg_status sg__dist_rejoin_poll(sg_dist *d) {
  sg__dist_rejoin *rj = &DP(d)->rj;
  /* ZeRO-1: refused by the joiner's create (see sg__dist_rejoin_init); nothing to look for. */
  if (d->p.feed == NULL || d->p.zero || rj->off || DP(d)->excluded) return SG_OK;
  int64_t t0 = sg__now_ns();
  if (rj->watch == NULL && watch_start(d) != SG_OK) {
    turn_off(d, sg_last_error());
    return SG_OK;
  }
  if (rj->seen_epoch != d->epoch) { /* members changed: requests refused before may be open now */
    rj->seen_epoch = d->epoch;
    rj->nreq_seen = -1;
  }
  look_res *r = &(look_res){0};
  if (collect(d, r)) {
    rj->looks++;
    rj->look_ms += r->ms;
    if (r->status != SG_OK) {
      turn_off(d, r->msg); /* the store failed under us: rejoin stops here, training goes on */
      return SG_OK;
    }
    if (r->found && !rj->pending && r->adm.index == rj->next) {
      rj->pending = true;
      rj->adm = r->adm;
    } else if (!r->found && r->epoch == d->epoch) {
      rj->nreq_seen = r->nreq_seen;
    }
  }
  sg_status s = SG_OK;
  uint64_t c = d->stats.steps;
  if (rj->pending && (uint64_t)rj->adm.step <= c) {
    sg__dist_adm a = rj->adm;
    rj->pending = false;
    rj->next = a.index + 1;
    rj->nreq_seen = a.nreq;
    if (rj->store == NULL) s = connect_store(d, 2000, &rj->store);
    if (s == SG_OK && (uint64_t)a.step == c && a.epoch == d->epoch && index_of(&a, d->orig_rank) >= 0) {
      rj->polls++;
      rj->poll_ms += (double)(sg__now_ns() - t0) * 1e-6;
      s = admit(d, rj->store, &a);
      if (s == SG_OK && !rj->pending) ask(d);
      if (s == SG_OK) return SG_OK;
    } else if (s == SG_OK) {
      /* A recovery came between the decision and its step: the members are
       * not the decision's. Tell the joiner at once rather than at its timeout. */
      char key[96];
      snprintf(key, sizeof key, "rejoin/adm/%lld/abandoned", (long long)a.index);
      s = set_i64(rj->store, key, 1);
      fprintf(
          stderr,
          "sgrt: rank %d: rejoin: admission %lld (decided at epoch %lld for step %lld) abandoned: this rank "
          "is at step %llu, epoch %d\n",
          d->orig_rank, (long long)a.index, (long long)a.epoch, (long long)a.step, (unsigned long long)c,
          d->epoch);
    }
  }
  if (s != SG_OK) {
    turn_off(d, sg_last_error());
    return SG_OK;
  }
  /* The next look runs during the step; its answer is taken at the next boundary. */
  if (!rj->pending) ask(d);
  rj->polls++;
  rj->poll_ms += (double)(sg__now_ns() - t0) * 1e-6;
  return SG_OK;
}
