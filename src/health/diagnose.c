/* Hang diagnosis (SPEC H7). Every heartbeat carries the sender's position in
 * the static collective schedule, (step, collective). In a synchronous job a
 * collective completes only when every rank has entered it, so when the job
 * hangs the ranks furthest ahead wait for the ones behind: those are named.
 * "rank 2 is at collective #17 (step 5), the others at #18 (step 5)". */
#include <stdio.h>
#include <stdlib.h>

#include "core/core.h"
#include "health/health_internal.h"

enum { HAS_POSITION = 0, NO_HEARTBEAT = 1, UNREACHABLE = 2 };

typedef struct entry {
  int category; /* sorts ranks with a position first, then the silent, then the dead */
  int rank;
  uint64_t step;
  uint32_t collective;
} entry;

static int cmp_entry(const void *pa, const void *pb) {
  const entry *a = pa, *b = pb;
  if (a->category != b->category) return a->category - b->category;
  if (a->step != b->step) return a->step < b->step ? -1 : 1;
  if (a->collective != b->collective) return a->collective < b->collective ? -1 : 1;
  return a->rank - b->rank;
}

static bool same_position(const entry *a, const entry *b) {
  return a->category == b->category && a->step == b->step && a->collective == b->collective;
}

/* "rank 4" or "ranks 1-3, 7" for the ascending ranks of e[0..n). */
static void put_ranks(sg__writer *w, const entry *e, size_t n) {
  sg__put(w, n == 1 ? "rank " : "ranks ");
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j + 1 < n && e[j + 1].rank == e[j].rank + 1) j++;
    sg__put(w, "%s%d", i ? ", " : "", e[i].rank);
    if (j > i) sg__put(w, "-%d", e[j].rank);
    i = j + 1;
  }
}

static void put_position(sg__writer *w, const entry *e) {
  sg__put(w, "#%u (step %llu)", e->collective, (unsigned long long)e->step);
}

/* Writes the sentence for the sorted entries e[0..n). Returns how many ranks are behind. */
static int describe(sg__writer *w, const entry *e, size_t n) {
  size_t with_pos = 0;
  while (with_pos < n && e[with_pos].category == HAS_POSITION) with_pos++;
  int behind = 0;
  if (with_pos == 0) {
    sg__put(w, "no heartbeats yet");
  } else {
    size_t lead = with_pos - 1; /* first entry of the leaders' group */
    while (lead > 0 && same_position(&e[lead - 1], &e[with_pos - 1])) lead--;
    size_t n_lead = with_pos - lead;
    if (lead == 0) {
      if (n_lead == 1) sg__put(w, "rank %d is at collective ", e[0].rank);
      else sg__put(w, "all %zu ranks are at collective ", n_lead);
      put_position(w, &e[0]);
    } else {
      /* Groups behind the leaders, most behind first. */
      for (size_t i = 0; i < lead;) {
        size_t j = i;
        while (j < lead && same_position(&e[j], &e[i])) j++;
        if (i > 0) sg__put(w, "; ");
        put_ranks(w, &e[i], j - i);
        sg__put(w, j - i == 1 ? " is at collective " : " are at collective ");
        put_position(w, &e[i]);
        i = j;
      }
      behind = (int)lead;
      if (n_lead == 1) sg__put(w, ", rank %d at ", e[lead].rank);
      else sg__put(w, ", the others at ");
      put_position(w, &e[lead]);
    }
  }
  /* Without any heartbeat, "no heartbeat from everyone" would say nothing new. */
  for (int cat = with_pos ? NO_HEARTBEAT : UNREACHABLE; cat <= UNREACHABLE; cat++) {
    size_t i = with_pos;
    while (i < n && e[i].category != cat) i++;
    size_t j = i;
    while (j < n && e[j].category == cat) j++;
    if (j == i) continue;
    sg__put(w, cat == NO_HEARTBEAT ? "; no heartbeat from " : "; UNREACHABLE: ");
    put_ranks(w, &e[i], j - i);
  }
  return behind;
}

sg_status sg_health_diagnose(const sg_health *h, char *buf, size_t cap, int *n_behind) {
  if (n_behind) *n_behind = 0;
  if (h == NULL || buf == NULL || cap == 0)
    return sg__error(SG_ERR_INVALID_ARG, "sg_health_diagnose: NULL h or buf, or cap 0");
  buf[0] = '\0';
  entry *e = sg__malloc((size_t)h->world_size * sizeof *e);
  if (e == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_health_diagnose: out of memory");
  size_t n = 0;
  for (int r = 0; r < h->world_size; r++) {
    const sg__health_peer *p = &h->peers[r];
    if (!p->member) continue;
    entry x = {HAS_POSITION, r, 0, 0};
    if (p->pub.state == SG_HEALTH_UNREACHABLE) x.category = UNREACHABLE;
    else if (!p->pub.has_heartbeat) x.category = NO_HEARTBEAT;
    else {
      x.step = p->pub.heartbeat.step;
      x.collective = p->pub.heartbeat.collective;
    }
    e[n++] = x;
  }
  qsort(e, n, sizeof *e, cmp_entry);
  sg__writer w = {buf, cap, 0};
  int behind = describe(&w, e, n);
  sg__free(e);
  if (n_behind) *n_behind = behind;
  if (w.len >= cap)
    return sg__error(SG_ERR_RANGE, "sg_health_diagnose: the diagnosis needs %zu bytes, the buffer has %zu",
                     w.len + 1, cap);
  return SG_OK;
}
