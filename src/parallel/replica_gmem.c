/* The buddy replica slots of ZeRO-1 in the global page table (src/gmem,
 * docs/resilience.md "Buddy replicas"). Everything here runs on the
 * scheduler thread, which owns the communicator and so the sg_gmem.
 *
 * Each rank, as buddy of rank (rank - 1) mod size, allocates two slots in its
 * own node's DRAM tier; slot k holds the owner's state of the steps with
 * step mod 2 == k. A slot is two allocations: a one-page header, whose
 * page-table entry carries the step as its version, and the payload (the
 * state tensors). The owners learn the GVAs by one allgather at create: the
 * page table has no directory of names, and the pieces of sg_gmem_shard
 * would all be one size and share one set of flags.
 *
 * Versions. Entry versions only grow, by one per commit, and an allocated
 * entry starts at 1, so a slot's version is the step it holds plus 2
 * (rep_version): the replica of step 0 (the initial state) can be no lower
 * than version 2, one commit after the header was allocated. The header is
 * "closed" (SG_GMEM_WRITE only, not readable) while its payload is written
 * and "open" (READ | WRITE) once complete:
 *   close:  compare-and-swap version v -> v + 1 without READ, up to
 *           rep_version(step) - 1 (one commit in the steady state, v being
 *           the slot's previous step + 2);
 *   write:  the payload, then the step into the header page, by sg_gmem_write
 *           (remote writes through translation);
 *   open:   compare-and-swap rep_version(step) - 1 -> rep_version(step) with READ.
 * So a readable slot at version v holds exactly step v - 2, and a reader asking
 * sg_gmem_read_at(version = rollback + 2) gets SG_ERR_STALE for any other step
 * (or SG_ERR_DENIED while a write is under way). At create the buddy closes
 * each new slot up to the version just below the first step it will get
 * (local commits), so the owner needs no catch-up after a recovery. */
#include <stdio.h>
#include <string.h>

#include "parallel/dist_internal.h"

#define OPEN (SG_GMEM_READ | SG_GMEM_WRITE)
#define CLOSED SG_GMEM_WRITE

uint32_t sg__dist_rep_version(uint64_t step) { return (uint32_t)step + 2u; }

static uint64_t pages_of(size_t bytes) { return (bytes + SG_GMEM_PAGE_SIZE - 1) / SG_GMEM_PAGE_SIZE; }

/* The first step >= next that slot k (step mod 2 == k) will hold. */
static uint64_t first_step(uint64_t next, int k) { return next + (uint64_t)((next % 2) != (uint64_t)k); }

/* Commits the entry of gva (this node's or a remote one) once, from version e->version, with `flags`;
 * *e gets the entry committed. */
static sg_status commit(sg_gmem *gm, sg_gva gva, sg_gmem_pte *e, uint8_t flags) {
  sg_gmem_pte want = *e, now;
  want.flags = flags;
  SG_CHECK(sg_gmem_pte_cas(gm, gva, e->version, &want, &now));
  *e = now;
  return SG_OK;
}

/* This rank's slots as buddy: allocated closed, then closed again up to the version below their
 * first step. On failure what was allocated stays for sg_gmem_destroy to free. */
static sg_status alloc_held(sg_dist *d, uint64_t next) {
  sg__dist_zero *z = &DP(d)->zero;
  for (int k = 0; k < 2; k++) {
    SG_CHECK(sg_gmem_alloc(z->gm, SG_GMEM_DRAM, SG_GMEM_PAGE_SIZE, CLOSED, &z->held_hdr[k]));
    z->held_pay[k] = sg_gva_make(0, 0);
    if (z->held_bytes > 0) SG_CHECK(sg_gmem_alloc(z->gm, SG_GMEM_DRAM, z->held_bytes, OPEN, &z->held_pay[k]));
    uint64_t step = first_step(next, k);
    if (step > UINT32_MAX - 2u)
      return sg__error(SG_ERR_RANGE, "ZeRO-1 replicas: step %llu does not fit a 32-bit page version",
                       (unsigned long long)step);
    sg_gmem_pte e;
    SG_CHECK(sg_gmem_pte_read(z->gm, z->held_hdr[k], &e));
    while (e.version + 1u < sg__dist_rep_version(step)) SG_CHECK(commit(z->gm, z->held_hdr[k], &e, CLOSED));
  }
  return SG_OK;
}

/* Scheduler job, collective: a new sg_gmem over the current communicator (the old one, of an earlier
 * epoch whose communicator was aborted, is freed locally first), this rank's slots, and the
 * buddy's slot GVAs (allgather). arg: the next step to push. */
static sg_status setup_job(sg_dist *d, void *arg) {
  sg__dist_zero *z = &DP(d)->zero;
  uint64_t next = *(const uint64_t *)arg;
  if (z->gm != NULL) {
    sg_status st = sg_gmem_destroy(z->gm);
    z->gm = NULL;
    if (st != SG_OK) sg_clear_error(); /* its communicator is gone: only the local free mattered */
  }
  if (z->size > SG__DIST_MAX_RANKS) /* every rank sees the same size: all fail here */
    return sg__error(SG_ERR_UNSUPPORTED, "ZeRO-1 replicas: %d ranks; at most %d with recovery on", z->size,
                     SG__DIST_MAX_RANKS);
  sg_comm_label(d->comm, "ZeRO-1 buddy replicas: global page table"); /* hang diagnosis (SPEC H7) */
  uint64_t pages = 2 * (1 + pages_of(z->held_bytes)), tlb = 16;
  while (tlb < 2 * pages) tlb *= 2;
  sg_gmem_params gp = SG_GMEM_PARAMS_INIT;
  gp.table_pages = pages + 1; /* entry 0 is never handed out */
  gp.dram_bytes = (size_t)pages * SG_GMEM_PAGE_SIZE;
  gp.tlb_entries = (uint32_t)tlb; /* the owner translates the buddy's slot pages */
  gp.copy_pages = 1;              /* no coherent pages */
  SG_CHECK(sg_gmem_create(d->comm, &gp, &z->gm));
  sg_status local = alloc_held(d, next);
  char why[256] = "";
  if (local != SG_OK) snprintf(why, sizeof why, "%s", sg_last_error());
  /* Per rank: header and payload offsets of both slots; UINT64_MAX from a rank whose slots failed. */
  uint64_t mine[4] = {z->held_hdr[0].lo, z->held_pay[0].lo, z->held_hdr[1].lo, z->held_pay[1].lo};
  if (local != SG_OK) memset(mine, 0xff, sizeof mine);
  uint64_t all[4 * SG__DIST_MAX_RANKS]; /* no allocation that could fail between two collectives */
  sg_status st = sg_comm_allgather(d->comm, mine, all, 4, SG_I64);
  int buddy = (z->rank + 1) % z->size, bad = -1;
  for (int r = 0; r < z->size && st == SG_OK && bad < 0; r++)
    if (all[4 * r] == UINT64_MAX) bad = r;
  if (st == SG_OK) {
    const uint64_t *b = all + 4 * buddy;
    for (int k = 0; k < 2; k++) {
      z->push_hdr[k] = sg_gva_make((uint16_t)buddy, b[2 * k]);
      z->push_pay[k] = sg_gva_make((uint16_t)buddy, b[2 * k + 1]);
    }
  }
  if (st != SG_OK) return st;
  if (local != SG_OK) return sg__error(local, "%s", why);
  if (bad >= 0)
    return sg__error(SG_ERR_COMM, "ZeRO-1 replicas: rank %d could not allocate its replica slots", bad);
  /* The buddy closed its slots before the allgather: their entries as this rank's pushes start from. */
  for (int k = 0; k < 2; k++) SG_CHECK(sg_gmem_pte_read(z->gm, z->push_hdr[k], &z->push_pte[k]));
  return SG_OK;
}

sg_status sg__dist_replica_gmem_setup(sg_dist *d, uint64_t next) {
  return sg__dist_run_job(d, setup_job, &next);
}

void sg__dist_replica_gmem_fini(sg_dist *d) {
  sg_gmem_destroy(DP(d)->zero.gm); /* collective while healthy; a local free on an aborted communicator */
  DP(d)->zero.gm = NULL;
}

sg_status sg__dist_replica_gmem_push(sg_dist *d, uint64_t step, const char *from) {
  sg__dist_zero *z = &DP(d)->zero;
  int k = (int)(step % 2);
  if (step > UINT32_MAX - 2u)
    return sg__error(SG_ERR_RANGE, "step %llu does not fit a 32-bit page version", (unsigned long long)step);
  uint32_t want = sg__dist_rep_version(step);
  sg_gmem_pte *e = &z->push_pte[k];
  /* Close: this rank is the slot's only writer, so its version is the one it committed last. */
  while (e->version + 1u < want || (e->flags & SG_GMEM_READ))
    SG_CHECK(commit(z->gm, z->push_hdr[k], e, CLOSED));
  if (e->version + 1u != want)
    return sg__error(SG_ERR_INTERNAL,
                     "replica slot %d of buddy rank %d is at version %u, past step %llu's %u", k,
                     sg_gva_node(z->push_hdr[k]), e->version, (unsigned long long)step, want);
  for (uint32_t j = 0; j < z->n_rep; j++)
    SG_CHECK(sg_gmem_write(z->gm,
                           sg_gva_make(sg_gva_node(z->push_pay[k]), z->push_pay[k].lo + z->rep_pay_off[j]),
                           from + z->rep_snap_off[j], z->rep_bytes[j], NULL));
  SG_CHECK(sg_gmem_write(z->gm, z->push_hdr[k], &step, sizeof step, NULL));
  return commit(z->gm, z->push_hdr[k], e, OPEN);
}

/* ---- reading, as buddy ----------------------------------------------------------------------- */

typedef struct held_arg {
  uint64_t step; /* in: the step wanted (check_job) */
  int slot;      /* out */
  uint64_t latest;
} held_arg;

/* Scheduler job: the latest step a readable held slot has (UINT64_MAX: none).
 * A slot whose entry cannot be read is not readable: in a recovery that is
 * an entry a failed writer left busy (its push was cut short, so the slot
 * holds no complete step), and waiting on it spins against the aborted
 * communicator. */
static sg_status latest_job(sg_dist *d, void *arg) {
  held_arg *h = arg;
  h->latest = UINT64_MAX;
  for (int k = 0; k < 2; k++) {
    sg_gmem_pte e;
    if (sg_gmem_pte_read(DP(d)->zero.gm, DP(d)->zero.held_hdr[k], &e) != SG_OK) {
      sg_clear_error();
      continue;
    }
    if (!(e.flags & SG_GMEM_READ) || e.version < 2) continue;
    uint64_t s = e.version - 2u;
    if (h->latest == UINT64_MAX || s > h->latest) h->latest = s, h->slot = k;
  }
  return SG_OK;
}

sg_status sg__dist_replica_latest(sg_dist *d, uint64_t *step) {
  held_arg h = {0, -1, UINT64_MAX};
  SG_CHECK(sg__dist_run_job(d, latest_job, &h));
  *step = h.latest;
  return SG_OK;
}

/* Scheduler job: the held slot of h->step, read at that version (the header's step agrees). */
static sg_status check_job(sg_dist *d, void *arg) {
  held_arg *h = arg;
  sg__dist_zero *z = &DP(d)->zero;
  int k = (int)(h->step % 2);
  uint64_t got = UINT64_MAX;
  sg_status st = h->step > UINT32_MAX - 2u ? SG_ERR_RANGE
                                           : sg_gmem_read_at(z->gm, z->held_hdr[k], &got, sizeof got,
                                                             sg__dist_rep_version(h->step));
  if (st == SG_OK && got == h->step) {
    h->slot = k;
    return SG_OK;
  }
  sg_gmem_pte e = {0};
  sg_status rs = sg_gmem_pte_read(z->gm, z->held_hdr[k], &e);
  char holds[96];
  if (rs != SG_OK) snprintf(holds, sizeof holds, "cannot be read (%s)", sg_last_error());
  else if (!(e.flags & SG_GMEM_READ))
    snprintf(holds, sizeof holds, "is being written (version %u)", e.version);
  else snprintf(holds, sizeof holds, "holds step %llu", (unsigned long long)(e.version - 2u));
  return sg__error(st == SG_OK ? SG_ERR_STALE : st, "its slot %d %s, not the rollback step %llu (%s)", k,
                   holds, (unsigned long long)h->step, st == SG_OK ? "header disagrees" : sg_status_str(st));
}

sg_status sg__dist_replica_check(sg_dist *d, uint64_t step, int *slot) {
  held_arg h = {step, -1, 0};
  SG_CHECK(sg__dist_run_job(d, check_job, &h));
  *slot = h.slot;
  return SG_OK;
}

sg_status sg__dist_replica_held_ptr(sg_dist *d, int slot, size_t off, size_t bytes, const void **out) {
  void *p = NULL;
  SG_CHECK(
      sg_gmem_ptr(DP(d)->zero.gm,
                  sg_gva_make(sg_gva_node(DP(d)->zero.held_pay[slot]), DP(d)->zero.held_pay[slot].lo + off),
                  bytes, SG_GMEM_READ, &p));
  *out = p;
  return SG_OK;
}

/* ---- the test's view ---------------------------------------------------------------------------- */

static sg_status probe_job(sg_dist *d, void *arg) {
  sg__dist_replica_probe *p = arg;
  sg__dist_zero *z = &DP(d)->zero;
  if (z->gm == NULL) return sg__error(SG_ERR_STATE, "no ZeRO-1 buddy replicas (zero 1 with a feed callback)");
  for (int k = 0; k < 2; k++) {
    sg_gmem_pte e;
    sg_gmem_loc loc;
    SG_CHECK(sg_gmem_pte_read(z->gm, z->push_hdr[k], &e));
    p->push_node[k] = e.node_id;
    p->push_version[k] = e.version;
    p->push_open[k] = (e.flags & SG_GMEM_READ) != 0;
    SG_CHECK(sg_gva_format(z->push_hdr[k], p->push_gva[k], sizeof p->push_gva[k]));
    p->push_pay_node[k] = -1;
    if (z->replica_bytes > 0) {
      SG_CHECK(sg_gmem_translate(z->gm, z->push_pay[k], SG_GMEM_WRITE, &loc));
      p->push_pay_node[k] = loc.node;
    }
    /* What the buddy holds of this rank's snapshot of the slot's step, read back remotely. */
    p->push_matches[k] = e.version >= 2 && DP(d)->snap.valid[k] && DP(d)->snap.label[k] == e.version - 2u;
    for (uint32_t j = 0; j < z->n_rep && p->push_matches[k]; j++) {
      char *buf = sg__malloc(z->rep_bytes[j] ? z->rep_bytes[j] : 1);
      if (buf == NULL) return sg__error(SG_ERR_NO_MEMORY, "probe: out of memory");
      sg_status st =
          sg_gmem_read(z->gm, sg_gva_make(sg_gva_node(z->push_pay[k]), z->push_pay[k].lo + z->rep_pay_off[j]),
                       buf, z->rep_bytes[j], NULL);
      p->push_matches[k] =
          st == SG_OK && memcmp(buf, DP(d)->snap.slot[k] + z->rep_snap_off[j], z->rep_bytes[j]) == 0;
      sg__free(buf);
      SG_CHECK(st);
    }
    SG_CHECK(sg_gmem_pte_read(z->gm, z->held_hdr[k], &e));
    p->held_node[k] = e.node_id;
    p->held_version[k] = e.version;
    uint64_t step = UINT64_MAX;
    p->held_read[k] = sg_gmem_read_at(z->gm, z->held_hdr[k], &step, sizeof step, e.version);
    p->held_step[k] = step;
    p->held_stale[k] = sg_gmem_read_at(z->gm, z->held_hdr[k], &step, sizeof step, e.version + 2u);
  }
  sg_clear_error();
  return SG_OK;
}

sg_status sg__dist_replica_probe_get(sg_dist *d, sg__dist_replica_probe *out) {
  if (d == NULL || out == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg__dist_replica_probe_get: NULL argument");
  memset(out, 0, sizeof *out);
  return sg__dist_run_job(d, probe_job, out);
}
