/* The model strategies' copies in the global page table (docs/resilience.md
 * "Copies in the global page table"): each rank holds, in two slots of its own
 * node's DRAM tier (gmem_slots.c; the label is the generation's number, slot k
 * the generations with number mod 2 == k), the copy of the previous member of
 * its ring, which that member writes there by remote writes through the page
 * table; a recovery reads the slot in place (a local pointer).
 *
 * The slots are set up for one layout: the communicator (a recovery replaces
 * it), the ring, and the size of each copy (a re-cut or a re-split changes
 * it). Every rank tells whether its copy still fits its target's slot and its
 * epoch is the slots' one; one allreduce makes that a collective decision, and
 * a new set-up (a collective sg_gmem_create, the sizes by an allgather) follows
 * on every rank. The old slots are kept as they are (a recovery cut short
 * restores the generation still in them) and freed once both generations are
 * in the new ones: neither a copy nor a free is on the way to the first step
 * after a recovery. */
#include <stdio.h>
#include <string.h>

#include "parallel/model.h"

typedef struct setup_arg {
  sg__model_gen *g;
  uint64_t label;
} setup_arg;

/* Scheduler job, collective: every rank's copy size (allgather), then the slots: this rank holds its
 * ring's previous member's copy and writes into the next member's. */
static sg_status setup_job(sg_dist *d, void *arg) {
  const setup_arg *a = arg;
  sg__par_model *m = MODEL(d);
  sg__slots *s = &m->heal.slots;
  uint64_t mine = a->g->own_bytes, all[SG__DIST_MAX_RANKS];
  if (d->size > SG__DIST_MAX_RANKS)
    return sg__error(SG_ERR_UNSUPPORTED, "healing: %d ranks; at most %d", d->size, SG__DIST_MAX_RANKS);
  SG_CHECK(sg_comm_allgather(d->comm, &mine, all, 1, SG_I64));
  int k = m->index, ring = a->g->ring;
  int next = m->group[sg__model_ring_next(k, ring)], prev = m->group[sg__model_ring_prev(k, ring)];
  s->what = "model copies: global page table";
  return sg__slots_setup(s, d->comm, next, (size_t)all[prev], a->label);
}

/* A generation whose previous member's copy is in slots s gets its own heap copy of it. */
static sg_status detach(sg__model_gen *g, const sg__slots *s) {
  if (!sg__slots_holds(s, g->prev)) return SG_OK;
  SG_CHECK(sg__model_heal_reserve(&g->prev_heap, &g->prev_cap, g->prev_bytes));
  memcpy(g->prev_heap, g->prev, g->prev_bytes);
  g->prev = g->prev_heap;
  return SG_OK;
}

static sg_status stash_fini_job(sg_dist *d, void *arg) {
  (void)arg;
  sg__slots_fini(&MODEL(d)->heal.stash);
  return SG_OK;
}

/* The slots of the layout before are freed once no generation is in them: two generations after the
 * set-up, on every rank at the same point (the free is collective on a communicator still healthy, as
 * after a re-cut). */
static sg_status release_stash(sg_dist *d) {
  sg__model_heal *H = &MODEL(d)->heal;
  if (H->stash.gm == NULL) return SG_OK;
  for (int i = 0; i < 2; i++)
    if (sg__slots_holds(&H->stash, H->gen[i].prev)) return SG_OK;
  return sg__dist_run_job(d, stash_fini_job, NULL);
}

static sg_status push_job(sg_dist *d, void *arg) {
  const setup_arg *a = arg;
  sg__slots *s = &MODEL(d)->heal.slots;
  SG_CHECK(sg__slots_close(s, a->label));
  SG_CHECK(sg__slots_write(s, a->label, 0, a->g->own, a->g->own_bytes));
  return sg__slots_open(s, a->label, a->g->own_bytes);
}

sg_status sg__model_copy_push(sg_dist *d, sg__model_gen *g, uint64_t label) {
  sg__model_heal *H = &MODEL(d)->heal;
  int64_t again = H->slots.gm == NULL || H->slots_epoch != d->epoch || H->slots.push_cap != g->own_bytes;
  SG_CHECK(sg__dist_world_allreduce(d, &again, 1, SG_I64, SG_REDUCE_MAX));
  setup_arg a = {g, label};
  if (again) {
    g->prev = NULL; /* being replaced (its number is 0 until it is complete) */
    g->prev_bytes = 0;
    /* Set up again before the stash was released (a recovery cut short, two recoveries in a row): what is
     * still in the stash moves to the heap. The current slots become the stash. */
    if (H->stash.gm != NULL) {
      for (int i = 0; i < 2; i++) SG_CHECK(detach(&H->gen[i], &H->stash));
      SG_CHECK(sg__dist_run_job(d, stash_fini_job, NULL));
    }
    H->stash = H->slots;
    memset(&H->slots, 0, sizeof H->slots);
    SG_CHECK(sg__dist_run_job(d, setup_job, &a));
    H->slots_epoch = d->epoch;
  }
  return sg__dist_run_job(d, push_job, &a);
}

typedef struct take_arg {
  uint64_t label;
  const void *p;
  uint64_t bytes;
} take_arg;

static sg_status take_job(sg_dist *d, void *arg) {
  take_arg *t = arg;
  sg__slots *s = &MODEL(d)->heal.slots;
  int slot;
  SG_CHECK(sg__slots_check(s, t->label, &slot, &t->bytes));
  return sg__slots_held_ptr(s, slot, 0, (size_t)t->bytes, &t->p);
}

sg_status sg__model_copy_take(sg_dist *d, sg__model_gen *g, uint64_t label) {
  take_arg t = {label, NULL, 0};
  sg_status st = sg__dist_run_job(d, take_job, &t);
  if (st != SG_OK)
    return sg__error(st, "healing: the copy of generation %llu: %s", (unsigned long long)label,
                     sg_last_error());
  g->prev = t.p;
  g->prev_bytes = (size_t)t.bytes;
  return release_stash(d);
}

void sg__model_sched_fini(sg_dist *d) {
  sg__slots_fini(&MODEL(d)->heal.stash);
  sg__slots_fini(&MODEL(d)->heal.slots);
}

/* ---- the test's view ---------------------------------------------------------------------------- */

static sg_status probe_job(sg_dist *d, void *arg) {
  sg__model_copy_probe *p = arg;
  const sg__model_heal *H = &MODEL(d)->heal;
  const sg__model_gen *g = &H->gen[H->seq % 2];
  sg__slots *s = &MODEL(d)->heal.slots;
  if (s->gm == NULL || H->seq <= 0 || g->ring < 2)
    return sg__error(SG_ERR_STATE, "no copies in the global page table (heal 1 with a group of 2 or more)");
  p->label = (uint64_t)H->seq;
  int k = (int)(p->label % 2);
  sg_gmem_pte e;
  sg_gmem_loc loc;
  SG_CHECK(sg_gmem_pte_read(s->gm, s->push_hdr[k], &e));
  p->push_node = e.node_id;
  p->push_version = e.version;
  p->push_open = (e.flags & SG_GMEM_READ) != 0;
  SG_CHECK(sg_gva_format(s->push_hdr[k], p->push_gva, sizeof p->push_gva));
  SG_CHECK(sg_gmem_translate(s->gm, s->push_pay[k], SG_GMEM_WRITE, &loc));
  p->push_pay_node = loc.node;
  unsigned char *buf = sg__malloc(g->own_bytes ? g->own_bytes : 1);
  if (buf == NULL) return sg__error(SG_ERR_NO_MEMORY, "probe: out of memory");
  sg_status st = sg_gmem_read(s->gm, s->push_pay[k], buf, g->own_bytes, NULL);
  p->push_matches = st == SG_OK && memcmp(buf, g->own, g->own_bytes) == 0;
  sg__free(buf);
  SG_CHECK(st);
  SG_CHECK(sg_gmem_pte_read(s->gm, s->held_hdr[k], &e));
  p->held_node = e.node_id;
  p->held_version = e.version;
  const void *in_place = NULL;
  SG_CHECK(sg__slots_held_ptr(s, k, 0, g->prev_bytes, &in_place));
  p->prev_in_slot = in_place != NULL && in_place == (const void *)g->prev;
  uint64_t hdr[2];
  p->held_stale = sg_gmem_read_at(s->gm, s->held_hdr[k], hdr, sizeof hdr, e.version + 2u);
  sg_clear_error();
  return SG_OK;
}

sg_status sg__model_copy_probe_get(sg_dist *d, sg__model_copy_probe *out) {
  if (d == NULL || out == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg__model_copy_probe_get: NULL argument");
  memset(out, 0, sizeof *out);
  return sg__dist_run_job(d, probe_job, out);
}
