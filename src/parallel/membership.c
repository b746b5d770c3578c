/* Agreement on the next membership epoch after a failure (SPEC H4,
 * docs/resilience.md "Recovery"), on the scheduler thread, through the
 * rendezvous store, which outlives any rank when `sgrt launch` hosts it:
 *
 *  1. Each survivor registers under "heal/<E>/r/<rank>" (original ranks):
 *     the steps it completed and the peers its old communicator found
 *     unreachable itself (its suspects: silence, endpoint error, cut link;
 *     not what other ranks reported, which would make a live rank on the
 *     far side of a cut look dead to everyone).
 *  2. It waits until every old member has registered or is suspected by a
 *     registered rank (bounded by a window of a few heartbeats past dead_ms):
 *     whoever failed, some survivor found it first-hand.
 *  3. The first rank to get there claims the decision (an atomic counter in
 *     the store; equivalent to a leader, without electing one) and publishes
 *     the members: everyone registered, minus, for each pair of registered
 *     ranks that suspect each other (a cut link between two live ranks), the
 *     higher one; and the rollback step, the least committed step among them.
 *     Suspicion must be mutual: a rank in recovery stops heartbeating, so a
 *     peer slower to notice the failure may find it silent, one-sidedly.
 *  4. Everyone reads the decision. Members build the communicator of epoch E
 *     (store keys "e<E>/..."), dense ranks in original-rank order; a rank not
 *     listed, or one that cannot reach the store, stops with a clear error;
 *     members that are not a strict majority of the old epoch stop too, so
 *     two halves of a partition never both go on (no split brain).
 * Best-effort QoS (SPEC H5) first probes the links this rank found cut, at
 * the tier's retry times (budget / retries apart from the failure: 100 and
 * 200 ms); a pair whose link both ends found up again stays in (the
 * collective is retried over the same members, recovery.c), any other is
 * split as above. The probe knows an injected cut's duration
 * (partition:...,ms=T); a link that failed otherwise has no probe yet, so
 * its pair is split as under strict.
 * The old communicator was aborted at detection; it is not destroyed here
 * (closing it may wait for dead peers) but at sg_dist_destroy(). */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "parallel/dist_internal.h"

typedef struct reg_rec {
  int64_t orig, committed;
  int64_t probes;                           /* best-effort: link probes this rank made before registering */
  uint8_t suspects[SG__DIST_MAX_RANKS / 8]; /* original ranks this rank found unreachable itself */
  uint8_t up[SG__DIST_MAX_RANKS / 8];       /* ... of which those whose cut link it probed up again */
} reg_rec;

typedef struct members_rec {
  int32_t n, majority;
  int64_t rollback;
  int64_t forward; /* the most steps a member completed */
  int32_t donor;   /* an original rank that completed `forward` steps */
  int32_t probes;  /* best-effort: the most link probes a member made (the retries of this recovery) */
  int32_t retry;   /* best-effort: a cut pair stays in, its link up again: the collective is retried */
  int32_t pad;
  int32_t orig[SG__DIST_MAX_RANKS];
  int32_t cut_from[SG__DIST_MAX_RANKS]; /* per original rank left out over a cut link: the other end; -2
                                           released (sg__dist_healing.keep); else -1 */
} members_rec;

static bool has_bit(const uint8_t *b, int i) { return (b[i / 8] >> (i % 8)) & 1; }

/* The registration of original rank r, if there. */
static bool read_reg(sg__store *st, int epoch, int r, reg_rec *out, sg_status *err) {
  char key[64];
  snprintf(key, sizeof key, "heal/%d/r/%d", epoch, r);
  void *v = NULL;
  size_t n = 0;
  sg_status s = sg__store_wait_get(st, key, 0, &v, &n);
  if (s == SG_ERR_TIMEOUT) return false;
  if (s != SG_OK) {
    *err = s;
    return false;
  }
  bool ok = n == sizeof *out;
  if (ok) memcpy(out, v, sizeof *out);
  sg__free(v);
  /* Validate before use (SPEC S1). */
  if (!ok || out->orig != r || out->committed < 0) {
    *err = sg__error(SG_ERR_FORMAT, "recovery: malformed registration of rank %d in the rendezvous store", r);
    return false;
  }
  return true;
}

static sg_status decide(sg_dist *d, sg__store *st, int epoch, const int *old, int n_old, members_rec *m) {
  reg_rec regs[SG__DIST_MAX_RANKS];
  bool in[SG__DIST_MAX_RANKS] = {false};
  sg_status err = SG_OK;
  for (int i = 0; i < n_old; i++) {
    in[i] = read_reg(st, epoch, old[i], &regs[i], &err);
    if (err != SG_OK) return err;
  }
  memset(m, 0, sizeof *m);
  for (int i = 0; i < SG__DIST_MAX_RANKS; i++) m->cut_from[i] = -1;
  for (int i = 0; i < n_old; i++)
    if (in[i] && regs[i].probes > m->probes) m->probes = (int32_t)regs[i].probes;
  for (int i = 0; i < n_old; i++)
    for (int j = i + 1; j < n_old && in[i]; j++)
      if (in[j] && has_bit(regs[i].suspects, old[j]) && has_bit(regs[j].suspects, old[i])) {
        if (has_bit(regs[i].up, old[j]) && has_bit(regs[j].up, old[i])) {
          m->retry = 1; /* best-effort: both ends found the link up again */
          continue;
        }
        in[j] = false; /* a cut link between two live ranks: the higher one goes */
        m->cut_from[old[j]] = old[i];
      }
  int survivors = 0;
  for (int i = 0; i < n_old; i++) survivors += in[i];
  if (d->heal.keep != NULL) { /* a regular layout: live ranks released with the lost ones (cut_from -2) */
    bool alive[SG__DIST_MAX_RANKS] = {false};
    for (int i = 0; i < n_old; i++) alive[old[i]] = in[i];
    for (int i = 0; i < n_old; i++)
      if (in[i] && !d->heal.keep(d, alive, old[i])) in[i] = false, m->cut_from[old[i]] = -2;
  }
  int64_t rollback = -1, forward = -1;
  m->donor = -1;
  for (int i = 0; i < n_old; i++) {
    if (!in[i]) continue;
    m->orig[m->n++] = old[i];
    if (rollback < 0 || regs[i].committed < rollback) rollback = regs[i].committed;
    if (regs[i].committed > forward) forward = regs[i].committed, m->donor = old[i];
  }
  m->rollback = rollback < 0 ? 0 : rollback;
  m->forward = forward < 0 ? 0 : forward;
  m->majority = 2 * survivors > n_old; /* released ranks are alive and agree: they count */
  return SG_OK;
}

/* The agreement on epoch `epoch` among the old membership old[0..n_old)
 * (the installed one, or the last decided one when a member died before its
 * communicator was built), up to the decision. `dead` marks original ranks
 * this rank found dead first-hand during the recovery itself. */
static sg_status agree(sg_dist *d, sg__store *st, sg__heal_watch *w, int epoch, const int *old, int n_old,
                       const uint8_t *dead, const reg_rec *probed, sg__dist_heal *h, members_rec *m) {
  int me = d->orig_rank;
  reg_rec mine = *probed;
  mine.orig = me;
  mine.committed = (int64_t)h->committed;
  for (int i = 0; i < n_old; i++) {
    bool suspect = has_bit(dead, old[i]);
    for (int r = 0; r < d->size && !suspect; r++) /* first-hand only, see the top */
      suspect = d->members[r] == old[i] && sg_comm_peer_unreachable(d->comm, r) == 1;
    if (suspect) mine.suspects[old[i] / 8] |= (uint8_t)(1u << (old[i] % 8));
  }
  char key[64];
  snprintf(key, sizeof key, "heal/%d/r/%d", epoch, me);
  SG_CHECK(sg__store_set(st, key, &mine, sizeof mine));
  SG_CHECK(sg__dist_inject_recovery(d, SG_RECOVERY_AGREE));

  /* 2: wait for the others (bounded); someone else's decision ends it too. */
  char mkey[64];
  snprintf(mkey, sizeof mkey, "heal/%d/members", epoch);
  int64_t window_ms = (int64_t)d->p.dead_ms + 4 * (int64_t)d->p.heartbeat_ms + 500;
  int64_t deadline = sg__now_ms() + window_ms;
  for (;;) {
    bool all = true;
    uint8_t suspected[SG__DIST_MAX_RANKS / 8] = {0};
    bool reg[SG__DIST_MAX_RANKS] = {false};
    uint8_t awaited[SG__DIST_MAX_RANKS / 8] = {0};
    for (int i = 0; i < n_old; i++) {
      reg_rec r;
      sg_status err = SG_OK;
      reg[i] = read_reg(st, epoch, old[i], &r, &err);
      if (err != SG_OK) return err;
      if (reg[i])
        for (int k = 0; k < (int)sizeof suspected; k++) suspected[k] |= r.suspects[k], awaited[k] |= r.up[k];
    }
    /* A suspect is enough, unless the suspecting rank found the link up
     * again (best-effort): then the other end is alive and registers too. */
    for (int i = 0; i < n_old; i++)
      if (!reg[i] && (!has_bit(suspected, old[i]) || has_bit(awaited, old[i]))) all = false;
    if (all || sg__now_ms() >= deadline) break;
    void *v = NULL;
    size_t n = 0;
    if (sg__store_wait_get(st, mkey, 0, &v, &n) == SG_OK) {
      sg__free(v);
      break;
    }
    SG_CHECK(sg__heal_beat(w)); /* the others may be watching this rank already */
    usleep(2000);
  }

  /* 3: the first to get here decides. */
  int64_t claim = 0;
  snprintf(key, sizeof key, "heal/%d/decide", epoch);
  SG_CHECK(sg__store_add(st, key, 1, &claim));
  if (claim == 1) {
    SG_CHECK(decide(d, st, epoch, old, n_old, m));
    SG_CHECK(sg__store_set(st, mkey, m, sizeof *m));
    return SG_OK;
  }
  /* 4: read the decision; the decider publishes right after claiming. */
  void *v = NULL;
  size_t n = 0;
  int64_t until = sg__now_ms() + window_ms + 5000;
  sg_status got;
  while ((got = sg__store_wait_get(st, mkey, 0, &v, &n)) == SG_ERR_TIMEOUT && sg__now_ms() < until) {
    SG_CHECK(sg__heal_beat(w));
    usleep(2000);
  }
  SG_CHECK(got);
  bool ok = n == sizeof *m;
  if (ok) memcpy(m, v, sizeof *m);
  sg__free(v);
  if (!ok || m->n < 0 || m->n > n_old || m->rollback < 0 || m->forward < m->rollback ||
      m->forward - m->rollback > 1 || m->probes < 0 || (m->retry != 0 && m->retry != 1))
    return sg__error(SG_ERR_FORMAT, "rank %d: malformed membership decision for epoch %d in the store", me,
                     epoch);
  bool donor_in = m->n == 0;
  for (int i = 0; i < m->n; i++) {
    if (m->orig[i] < 0 || m->orig[i] >= d->orig_size || (i > 0 && m->orig[i] <= m->orig[i - 1]))
      return sg__error(SG_ERR_FORMAT, "rank %d: malformed membership decision for epoch %d in the store", me,
                       epoch);
    donor_in = donor_in || m->orig[i] == m->donor;
  }
  if (!donor_in)
    return sg__error(SG_ERR_FORMAT,
                     "rank %d: malformed membership decision for epoch %d: donor %d is not a member", me,
                     epoch, m->donor);
  return SG_OK;
}

/* Detection time: from the last sign of life of a rank this recovery leaves
 * out (the last message or heartbeat this rank received from it, on the
 * plain clock) to the failure's detection here; the earliest such sign when
 * several are lost. For a killed rank that is at most one heartbeat period
 * before its death, so the figure errs long, never short. 0 when nobody is
 * lost (a member a step behind). */
static double detection_ms(sg_dist *d, const members_rec *m) {
  pthread_mutex_lock(&d->mu);
  int64_t mono = d->fail_ns;
  pthread_mutex_unlock(&d->mu);
  int64_t since_detection = mono ? (sg__now_ns() - mono) / 1000000 : 0;
  double worst = 0;
  for (int r = 0; r < d->size; r++) {
    bool kept = false;
    for (int i = 0; i < m->n; i++) kept = kept || m->orig[i] == d->members[r];
    if (kept || d->members[r] == d->orig_rank) continue;
    int64_t quiet = sg__comm_peer_quiet_ms(d->comm, r);
    double ms = (double)(quiet - since_detection);
    if (quiet >= 0 && ms > worst) worst = ms;
  }
  return worst;
}

/* The health monitor's view (sg_dist_health): every old member left out is
 * UNREACHABLE (logged with the reason), then the new epoch starts with the
 * members HEALTHY. Best effort: the monitor is a report, not the decider. */
static void note_health(sg_dist *d, int epoch, const members_rec *m) {
  if (d->heal.health == NULL) return;
  int64_t now = sg__now_ms();
  for (int r = 0; r < d->size; r++) {
    int orig = d->members[r];
    bool kept = false;
    for (int i = 0; i < m->n; i++) kept = kept || m->orig[i] == orig;
    if (kept || orig == d->orig_rank) continue;
    char why[128];
    if (m->cut_from[orig] >= 0)
      snprintf(why, sizeof why, "left out at epoch %d: its link to rank %d was cut", epoch,
               m->cut_from[orig]);
    else snprintf(why, sizeof why, "left out at epoch %d: unreachable", epoch);
    sg_health_peer_failed(d->heal.health, orig, now, why);
  }
  bool me_in = false;
  for (int i = 0; i < m->n; i++) me_in = me_in || m->orig[i] == d->orig_rank;
  if (me_in) sg_health_reset_epoch(d->heal.health, now, (uint32_t)epoch, m->orig, m->n);
  if (now > d->heal.ci.fed_ms) d->heal.ci.fed_ms = now; /* the monitor's clock: check-ins go in from here */
}

static sg_status watch_peers(void *ctx, int peer) {
  (void)peer;
  return sg__heal_watch_check(ctx);
}

/* The communicator of the decided epoch, watched: a member that dies before
 * every member joined ends it (w->dead names it) instead of the wait running
 * out the communication timeout. */
static sg_status build(sg_dist *d, sg__heal_watch *w, int epoch, const members_rec *m, int idx,
                       sg_comm **out) {
  sg__heal_watch_members(w, m->orig, m->n);
  sg_comm_params cp;
  sg__dist_epoch_params(d, idx, m->n, epoch, &cp);
  sg_comm *c = NULL;
  sg_status s = sg__comm_create_watched(&cp, watch_peers, w, &c);
  if (s == SG_OK) s = sg_comm_set_liveness(c, d->p.heartbeat_ms, d->p.dead_ms);
  if (s == SG_OK) s = sg_comm_set_hang_timeout(c, d->p.hang_ms); /* SPEC H7 */
  if (s != SG_OK) {
    char msg[512];
    sg__dist_discard_comm(c, msg, sizeof msg);
    return sg__error(SG_ERR_COMM, "rank %d: building the communicator of epoch %d (%d ranks) failed: %s",
                     d->orig_rank, epoch, m->n, msg);
  }
  *out = c;
  return SG_OK;
}

/* Whether this rank's link to original rank `orig` is down now (an injected
 * cut that has not come back). */
static bool link_down(const sg_dist *d, int orig, int64_t now) {
  int64_t until = d->heal.link_down_until_ms[orig];
  return until != 0 && now < until;
}

/* Best-effort: the links this rank found cut (first-hand, by an injected
 * cut) are probed at the tier's retry times, budget/retries apart from the
 * start of the failure streak, until all are up again or the retries are
 * spent; out->up marks those up, out->probes counts the probes. A rank with
 * no such link (or another tier) probes nothing. Round 0 of a recovery:
 * d->members are the old members. */
static sg_status probe_links(sg_dist *d, sg__heal_watch *w, reg_rec *out) {
  memset(out, 0, sizeof *out);
  if (d->heal.qos != SG_QOS_BEST_EFFORT) return SG_OK;
  sg_qos_budget b;
  SG_CHECK(sg_qos_budget_of(SG_QOS_BEST_EFFORT, &b));
  bool cut[SG__DIST_MAX_RANKS] = {false}, any = false;
  for (int r = 0; r < d->size; r++) {
    int orig = d->members[r];
    cut[r] = orig != d->orig_rank && d->heal.link_down_until_ms[orig] != 0 &&
             sg_comm_peer_unreachable(d->comm, r) == 1;
    any = any || cut[r];
  }
  if (!any) return SG_OK;
  pthread_mutex_lock(&d->mu);
  int64_t failed_ms = d->fail_ns ? d->fail_ns / 1000000 : sg__now_ms();
  pthread_mutex_unlock(&d->mu);
  if (d->heal.be_t0_ms == 0) d->heal.be_t0_ms = failed_ms;
  bool down = true;
  for (int k = d->heal.be_retries + 1; k <= b.retries && down; k++) {
    int64_t at = d->heal.be_t0_ms + (int64_t)k * b.collective_budget_ms / b.retries;
    while (sg__now_ms() < at) {
      SG_CHECK(sg__heal_beat(w));
      usleep(2000);
    }
    out->probes++;
    down = false;
    for (int r = 0; r < d->size; r++) down = down || (cut[r] && link_down(d, d->members[r], sg__now_ms()));
  }
  d->heal.be_retries += (int)out->probes;
  for (int r = 0; r < d->size; r++)
    if (cut[r] && !link_down(d, d->members[r], sg__now_ms()))
      out->up[d->members[r] / 8] |= (uint8_t)(1u << (d->members[r] % 8));
  fprintf(stderr, "sgrt: rank %d: best-effort: the cut link is %s after %lld probe(s) (%d ms budget)\n",
          d->orig_rank, down ? "still down" : "up again", (long long)out->probes, b.collective_budget_ms);
  return SG_OK;
}

sg_status sg__dist_job_recover(sg_dist *d, void *arg) {
  sg__dist_heal *h = arg;
  int me = d->orig_rank, epoch = d->epoch + 1;
  SG_CHECK(sg__dist_inject_recovery(d, SG_RECOVERY_DETECT));
  sg__store *st = NULL;
  sg_status s =
      sg__store_connect(d->heal.env.master_addr, d->heal.env.master_port, d->heal.env.token, 2000, &st);
  char why[512];
  if (s != SG_OK) {
    snprintf(why, sizeof why, "%s", sg_last_error()); /* the error buffer is about to be rewritten */
    return sg__error(SG_ERR_COMM, "rank %d: cannot recover: the rendezvous store is unreachable: %s", me,
                     why);
  }
  sg__heal_watch w;
  sg__heal_watch_init(&w, st, me, d->p.heartbeat_ms, d->p.dead_ms);
  int old[SG__DIST_MAX_RANKS], n_old = d->size;
  memcpy(old, d->members, sizeof(int) * (size_t)n_old);
  uint8_t dead[SG__DIST_MAX_RANKS / 8] = {0};
  members_rec m;
  sg_comm *c = NULL;
  int idx = -1;
  reg_rec probed;
  s = probe_links(d, &w, &probed);
  if (s != SG_OK) {
    sg__store_close(st);
    return s;
  }
  /* A member that dies before the decided epoch's communicator is built
   * sends everyone back to agree on the next epoch, from the decided
   * membership: each round loses a member, so there are at most n_old. */
  for (int round = 0;; round++, epoch++) {
    s = agree(d, st, &w, epoch, old, n_old, dead, &probed, h, &m);
    memset(probed.up, 0, sizeof probed.up); /* a later round is not a retry: somebody died */
    if (s != SG_OK) {
      snprintf(why, sizeof why, "%s", sg_last_error());
      sg__store_close(st);
      return sg__error(SG_ERR_COMM, "rank %d: recovery to epoch %d failed: %s", me, epoch, why);
    }
    idx = -1;
    for (int i = 0; i < m.n; i++)
      if (m.orig[i] == me) idx = i;
    if (!m.majority || idx < 0) break;
    SG_CHECK(sg__dist_inject_recovery(d, SG_RECOVERY_BUILD));
    s = build(d, &w, epoch, &m, idx, &c);
    if (s == SG_OK) break;
    if (w.dead < 0 || round >= n_old) {
      sg__store_close(st);
      return s;
    }
    fprintf(stderr,
            "sgrt: rank %d: rank %d died during the recovery to epoch %d; agreeing again without it\n", me,
            w.dead, epoch);
    dead[w.dead / 8] |= (uint8_t)(1u << (w.dead % 8));
    memcpy(old, m.orig, sizeof(int) * (size_t)m.n);
    n_old = m.n;
  }
  h->detection_ms = detection_ms(d, &m);
  sg__store_close(st);
  note_health(d, epoch, &m);
  if (!m.majority)
    return sg__error(
        SG_ERR_COMM,
        "rank %d: only %d of %d ranks remain at epoch %d, not a strict majority: stopping (no split "
        "brain)",
        me, m.n, n_old, epoch);
  if (idx < 0) {
    h->excluded = true;
    if (m.cut_from[me] >= 0)
      return sg__error(SG_ERR_COMM, "rank %d: excluded from the job at epoch %d (link to rank %d cut)", me,
                       epoch, m.cut_from[me]);
    if (m.cut_from[me] == -2)
      return sg__error(
          SG_ERR_COMM,
          "rank %d: released from the job at epoch %d: its place was dropped to keep the model's layout "
          "regular (every copy of the model, or every stage's tensor group, loses the lost rank's place)",
          me, epoch);
    return sg__error(SG_ERR_COMM,
                     "rank %d: excluded from the job at epoch %d (the others went on without it: it was "
                     "unreachable)",
                     me, epoch);
  }
  SG_CHECK(sg__dist_install_epoch(d, c, idx, m.n, epoch, m.orig));
  h->retries = m.retry ? m.probes : 0;
  h->probes = m.probes;
  if (m.retry) /* the links are up again: a later failure is a new one */
    for (int i = 0; i < m.n; i++) d->heal.link_down_until_ms[m.orig[i]] = 0;
  h->rollback = (uint64_t)m.rollback;
  h->forward = (uint64_t)m.forward;
  h->donor = 0;
  for (int i = 0; i < m.n; i++)
    if (m.orig[i] == m.donor) h->donor = i;
  return SG_OK;
}

int64_t sg__dist_announce_recovery(sg_dist *d) {
  pthread_mutex_lock(&d->mu);
  int64_t t0 = d->fail_ns ? d->fail_ns : sg__now_ns();
  char cause[sizeof d->fail_msg];
  snprintf(cause, sizeof cause, "%s", d->fail_msg);
  pthread_mutex_unlock(&d->mu);
  /* How long after the detection the recovery starts (the compute thread notices at its next op): an
   * observer of this line subtracts it to time the detection itself (tests/dist/run_detect.sh). */
  fprintf(stderr, "sgrt: rank %d: recovering from: %s (detected %.0f ms ago)\n", d->orig_rank, cause,
          (double)(sg__now_ns() - t0) * 1e-6);
  return t0;
}

sg_status sg__dist_left_out(sg_dist *d, sg_status failed) {
  if (failed == SG_OK || d->heal.env.master_addr[0] == '\0') return failed;
  char why[512];
  snprintf(why, sizeof why, "%s", sg_last_error()); /* the store's calls below rewrite it */
  int me = d->orig_rank, epoch = d->epoch + 1;
  sg__store *st = NULL;
  if (sg__store_connect(d->heal.env.master_addr, d->heal.env.master_port, d->heal.env.token, 2000, &st) !=
      SG_OK)
    return sg__error(failed, "%s", why);
  char key[64];
  snprintf(key, sizeof key, "heal/%d/members", epoch);
  void *v = NULL;
  size_t n = 0;
  members_rec m;
  bool decided = sg__store_wait_get(st, key, 0, &v, &n) == SG_OK && n == sizeof m;
  if (decided) memcpy(&m, v, sizeof m);
  sg__free(v);
  sg__store_close(st);
  bool listed = false, valid = decided && m.n >= 0 && m.n <= d->size; /* validated before use (SPEC S1) */
  for (int i = 0; valid && i < m.n; i++) listed = listed || m.orig[i] == me;
  if (!valid || listed) return sg__error(failed, "%s", why);
  d->stats.excluded = 1;
  return sg__error(SG_ERR_COMM,
                   "rank %d: excluded from the job at epoch %d (the others went on without it: it was "
                   "unreachable); what it received since was stale: %s",
                   me, epoch, why);
}

void sg__dist_epoch_params(const sg_dist *d, int idx, int n, int epoch, sg_comm_params *out) {
  *out = d->comm_params;
  out->size = sizeof *out;
  out->rank = idx;
  out->world_size = n;
  out->master_addr = d->heal.env.master_addr;
  out->master_port = d->heal.env.master_port;
  out->token = d->heal.env.token;
  out->timeout_ms = d->heal.env.timeout_ms;
  out->epoch = epoch;
}

void sg__dist_discard_comm(sg_comm *c, char *msg, size_t cap) {
  /* Copied first: abort and destroy may set errors of their own. */
  snprintf(msg, cap, "%s", sg_last_error());
  if (c != NULL) {
    sg_comm_abort(c, msg);
    sg_comm_destroy(c);
  }
}

/* Shared with rejoin.c: the old communicator (aborted by then, or NULL for
 * a joiner's first) is destroyed at sg_dist_destroy; the new epoch starts
 * healthy. On failure c is aborted and destroyed. */
sg_status sg__dist_install_epoch(sg_dist *d, sg_comm *c, int idx, int n, int epoch, const int *orig) {
  sg_comm **olds = d->old_comms;
  if (d->comm != NULL) {
    olds = sg__realloc(d->old_comms, (size_t)(d->n_old + 1) * sizeof *olds);
    if (olds == NULL) {
      sg_comm_abort(c, "out of memory");
      sg_comm_destroy(c);
      return sg__error(SG_ERR_NO_MEMORY, "rank %d: epoch %d: out of memory", d->orig_rank, epoch);
    }
  }
  pthread_mutex_lock(&d->mu);
  d->old_comms = olds;
  if (d->comm != NULL) d->old_comms[d->n_old++] = d->comm;
  d->comm = c;
  d->rank = idx;
  d->size = n;
  d->epoch = epoch;
  for (int i = 0; i < n; i++) d->members[i] = orig[i];
  d->failed = SG_OK;
  d->fail_msg[0] = '\0';
  __atomic_store_n(&d->failed_flag, 0, __ATOMIC_RELEASE);
  d->fail_ns = 0;
  if (d->strategy->epoch_installed_locked != NULL) d->strategy->epoch_installed_locked(d);
  d->last_healthy = n;
  __atomic_store_n(&d->healthy, n, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&d->mu);
  return SG_OK;
}
