/* Liveness while a recovery runs (dist_internal.h, sg__heal_watch): between
 * the old communicator's abort and the new one's first heartbeat the members
 * of a recovery have no transport to heartbeat over, yet one of them may die
 * then too (issue 15: a second failure during the agreement or while the
 * next communicator is built). They beat through the rendezvous store
 * instead: every heartbeat period each bumps its counter "heal/beat/<orig>",
 * and each watches the counters of the members it waits for. A counter that
 * stands still for dead_ms, or that never moves within dead_ms of the watch's
 * start, marks its member dead: the recovery agrees again without it
 * (membership.c) instead of waiting out the communication timeout. The key
 * has no epoch: a member beats through every agreement of one recovery, and
 * a restarted incarnation starts its counter again, which reads as movement. */
#include <stdio.h>
#include <string.h>

#include "parallel/dist_internal.h"

void sg__heal_watch_init(sg__heal_watch *w, sg__store *st, int me, int heartbeat_ms, int dead_ms) {
  memset(w, 0, sizeof *w);
  w->st = st;
  w->me = me;
  w->hb_ms = heartbeat_ms > 0 ? heartbeat_ms : 100;
  w->dead_ms = dead_ms > w->hb_ms ? dead_ms : 10 * w->hb_ms;
  w->dead = -1;
}

void sg__heal_watch_members(sg__heal_watch *w, const int *orig, int n) {
  int64_t now = sg__now_ms();
  w->n = n < SG__DIST_MAX_RANKS ? n : SG__DIST_MAX_RANKS;
  for (int i = 0; i < w->n; i++) {
    w->orig[i] = orig[i];
    w->seen[i] = -1;
    w->changed[i] = now;
  }
  w->next_look = 0;
  w->dead = -1;
}

sg_status sg__heal_beat(sg__heal_watch *w) {
  int64_t now = sg__now_ms();
  if (now < w->next_beat) return SG_OK;
  w->next_beat = now + w->hb_ms;
  char key[48];
  snprintf(key, sizeof key, "heal/beat/%d", w->me);
  int64_t v = ++w->beats;
  return sg__store_set(w->st, key, &v, sizeof v);
}

sg_status sg__heal_watch_check(sg__heal_watch *w) {
  SG_CHECK(sg__heal_beat(w));
  int64_t now = sg__now_ms();
  if (now < w->next_look) return SG_OK;
  w->next_look = now + w->hb_ms / 2;
  for (int i = 0; i < w->n; i++) {
    if (w->orig[i] == w->me) continue;
    char key[48];
    snprintf(key, sizeof key, "heal/beat/%d", w->orig[i]);
    void *v = NULL;
    size_t len = 0;
    int64_t count = -1;
    sg_status st = sg__store_wait_get(w->st, key, 0, &v, &len);
    if (st == SG_OK) {
      if (len == sizeof count) memcpy(&count, v, sizeof count);
      sg__free(v);
    } else if (st != SG_ERR_TIMEOUT) {
      return st;
    }
    now = sg__now_ms();
    if (count != w->seen[i]) {
      w->seen[i] = count;
      w->changed[i] = now;
    } else if (now - w->changed[i] > w->dead_ms) {
      w->dead = w->orig[i];
      return sg__error(SG_ERR_COMM,
                       "rank %d died during the recovery: no sign of it for %lld ms (heartbeat through the "
                       "rendezvous store every %d ms, dead after %d ms)",
                       w->orig[i], (long long)(now - w->changed[i]), w->hb_ms, w->dead_ms);
    }
  }
  return SG_OK;
}
