/* Two versioned copy slots per rank in the global page table (src/gmem), for a
 * copy of another rank's state that must survive that rank: ZeRO-1's buddy
 * replicas (replica_gmem.c) and the model strategies' copies (model_copy.c);
 * docs/resilience.md "Copies in the global page table". Everything here runs
 * on the scheduler thread, which owns the communicator and so the sg_gmem.
 *
 * Each rank, as holder of rank `source`'s copy, allocates two slots in its own
 * node's DRAM tier; slot k holds the copies labelled with label mod 2 == k (a
 * step, a generation). A slot is two allocations: a one-page header, whose
 * page-table entry carries the label as its version, and the payload. The
 * writers learn the GVAs by one allgather at setup: the page table has no
 * directory of names.
 *
 * Versions. Entry versions only grow, by one per commit, and an allocated
 * entry starts at 1, so a slot's version is its label plus 2
 * (sg__slots_version): label 0 can be no lower than version 2, one commit
 * after the header was allocated. The header is "closed" (SG_GMEM_WRITE only,
 * not readable) while its payload is written and "open" (READ | WRITE) once
 * complete:
 *   close:  compare-and-swap version v -> v + 1 without READ, up to
 *           version(label) - 1 (one commit in the steady state, v being the
 *           slot's previous label + 2);
 *   write:  the payload, then {label, bytes} into the header page, by
 *           sg_gmem_write (remote writes through translation, flushed);
 *   open:   compare-and-swap version(label) - 1 -> version(label) with READ.
 * So a readable slot at version v holds exactly label v - 2, and a reader asking
 * sg_gmem_read_at(version = label + 2) gets SG_ERR_STALE for any other label
 * (or SG_ERR_DENIED while a write is under way). At setup the holder closes
 * each new slot up to the version just below the first label it will get
 * (local commits), so the writer needs no catch-up after a recovery. This is
 * the same publish protocol as a seqlock, with the page table's entry as the
 * sequence word and its READ flag as the "stable" bit. */
#include <stdio.h>
#include <string.h>

#include "parallel/dist_internal.h"

#define OPEN (SG_GMEM_READ | SG_GMEM_WRITE)
#define CLOSED SG_GMEM_WRITE

uint32_t sg__slots_version(uint64_t label) { return (uint32_t)label + 2u; }

static uint64_t pages_of(size_t bytes) { return (bytes + SG_GMEM_PAGE_SIZE - 1) / SG_GMEM_PAGE_SIZE; }

/* The first label >= next that slot k (label mod 2 == k) will hold. */
static uint64_t first_label(uint64_t next, int k) { return next + (uint64_t)((next % 2) != (uint64_t)k); }

static sg_status check_label(const sg__slots *s, uint64_t label) {
  if (label > UINT32_MAX - 2u)
    return sg__error(SG_ERR_RANGE, "%s: label %llu does not fit a 32-bit page version", s->what,
                     (unsigned long long)label);
  return SG_OK;
}

/* Commits the entry of gva (this node's or a remote one) once, from version e->version, with `flags`;
 * *e gets the entry committed. */
static sg_status commit(sg_gmem *gm, sg_gva gva, sg_gmem_pte *e, uint8_t flags) {
  sg_gmem_pte want = *e, now;
  want.flags = flags;
  SG_CHECK(sg_gmem_pte_cas(gm, gva, e->version, &want, &now));
  *e = now;
  return SG_OK;
}

/* This rank's slots as holder: allocated closed, then closed again up to the version below their first
 * label. On failure what was allocated stays for sg_gmem_destroy to free. */
static sg_status alloc_held(sg__slots *s, uint64_t next) {
  for (int k = 0; k < 2; k++) {
    SG_CHECK(sg_gmem_alloc(s->gm, SG_GMEM_DRAM, SG_GMEM_PAGE_SIZE, CLOSED, &s->held_hdr[k]));
    s->held_pay[k] = sg_gva_make(0, 0);
    /* Not zeroed: the writer fills it before it opens, and zeroing hundreds of MB on the scheduler thread
     * would hold its heartbeats up. */
    if (s->held_bytes > 0)
      SG_CHECK(sg_gmem_alloc(s->gm, SG_GMEM_DRAM, s->held_bytes, OPEN | SG_GMEM_UNINIT, &s->held_pay[k]));
    void *at = NULL;
    if (s->held_bytes > 0) SG_CHECK(sg_gmem_ptr(s->gm, s->held_pay[k], s->held_bytes, SG_GMEM_READ, &at));
    s->held_at[k] = at;
    uint64_t label = first_label(next, k);
    SG_CHECK(check_label(s, label));
    sg_gmem_pte e;
    SG_CHECK(sg_gmem_pte_read(s->gm, s->held_hdr[k], &e));
    while (e.version + 1u < sg__slots_version(label)) SG_CHECK(commit(s->gm, s->held_hdr[k], &e, CLOSED));
  }
  return SG_OK;
}

void sg__slots_fini(sg__slots *s) {
  if (s->gm != NULL) {
    sg_status st = sg_gmem_destroy(s->gm); /* collective while healthy; a local free on an aborted one */
    if (st != SG_OK) sg_clear_error();     /* its communicator is gone: only the local free mattered */
  }
  s->gm = NULL;
  s->comm = NULL;
  s->push_cap = s->held_bytes = 0;
  s->held_at[0] = s->held_at[1] = NULL;
}

bool sg__slots_holds(const sg__slots *s, const void *p) {
  const unsigned char *q = p;
  for (int k = 0; k < 2 && s->gm != NULL && q != NULL; k++)
    if (s->held_at[k] != NULL && q >= s->held_at[k] && q < s->held_at[k] + s->held_bytes) return true;
  return false;
}

sg_status sg__slots_setup(sg__slots *s, sg_comm *comm, int target, size_t held_bytes, uint64_t next) {
  sg__slots_fini(s);
  int size = sg_comm_size(comm);
  if (size > SG__DIST_MAX_RANKS) /* every rank sees the same size: all fail here */
    return sg__error(SG_ERR_UNSUPPORTED, "%s: %d ranks; at most %d with copies in the global page table",
                     s->what, size, SG__DIST_MAX_RANKS);
  sg_comm_label(comm, s->what); /* hang diagnosis (SPEC H7) */
  s->comm = comm;
  s->held_bytes = held_bytes;
  uint64_t pages = 2 * (1 + pages_of(held_bytes)), tlb = 16;
  while (tlb < 2 * pages) tlb *= 2;
  sg_gmem_params gp = SG_GMEM_PARAMS_INIT;
  gp.table_pages = pages + 1; /* entry 0 is never handed out */
  gp.dram_bytes = (size_t)pages * SG_GMEM_PAGE_SIZE;
  gp.tlb_entries = (uint32_t)tlb; /* the writer translates the holder's slot pages */
  gp.copy_pages = 1;              /* no coherent pages */
  SG_CHECK(sg_gmem_create(comm, &gp, &s->gm));
  sg_status local = alloc_held(s, next);
  char why[256] = "";
  if (local != SG_OK) snprintf(why, sizeof why, "%s", sg_last_error());
  /* Per rank: header and payload offsets of both slots and the payload's size; UINT64_MAX from a rank
   * whose slots failed. */
  uint64_t mine[5] = {s->held_hdr[0].lo, s->held_pay[0].lo, s->held_hdr[1].lo, s->held_pay[1].lo, held_bytes};
  if (local != SG_OK) memset(mine, 0xff, sizeof mine);
  uint64_t all[5 * SG__DIST_MAX_RANKS]; /* no allocation that could fail between two collectives */
  sg_status st = sg_comm_allgather(comm, mine, all, 5, SG_I64);
  int bad = -1;
  for (int r = 0; r < size && st == SG_OK && bad < 0; r++)
    if (all[5 * r] == UINT64_MAX) bad = r;
  if (st != SG_OK) return st;
  if (local != SG_OK) return sg__error(local, "%s", why);
  if (bad >= 0) return sg__error(SG_ERR_COMM, "%s: rank %d could not allocate its copy slots", s->what, bad);
  s->target = target;
  if (target < 0) return SG_OK;
  if (target >= size) return sg__error(SG_ERR_INTERNAL, "%s: no rank %d of %d", s->what, target, size);
  const uint64_t *b = all + 5 * target;
  for (int k = 0; k < 2; k++) {
    s->push_hdr[k] = sg_gva_make((uint16_t)target, b[2 * k]);
    s->push_pay[k] = sg_gva_make((uint16_t)target, b[2 * k + 1]);
  }
  s->push_cap = (size_t)b[4];
  /* The holder closed its slots before the allgather: their entries as this rank's pushes start from. */
  for (int k = 0; k < 2; k++) SG_CHECK(sg_gmem_pte_read(s->gm, s->push_hdr[k], &s->push_pte[k]));
  return SG_OK;
}

sg_status sg__slots_close(sg__slots *s, uint64_t label) {
  SG_CHECK(check_label(s, label));
  int k = (int)(label % 2);
  uint32_t want = sg__slots_version(label);
  sg_gmem_pte *e = &s->push_pte[k];
  /* This rank is the slot's only writer, so its version is the one it committed last. */
  while (e->version + 1u < want || (e->flags & SG_GMEM_READ))
    SG_CHECK(commit(s->gm, s->push_hdr[k], e, CLOSED));
  if (e->version + 1u != want)
    return sg__error(SG_ERR_INTERNAL, "%s: slot %d of rank %d is at version %u, past label %llu's %u",
                     s->what, k, sg_gva_node(s->push_hdr[k]), e->version, (unsigned long long)label, want);
  return SG_OK;
}

/* A copy goes in pieces of this size, the communicator polled between them: a heartbeat is due every
 * 100 ms by default, and one put of a few hundred MB (a memory copy into the holder's shared memory,
 * faulting its pages in the first time) takes longer than that here, far longer under a sanitizer. */
#define PIECE ((size_t)16 << 20)

sg_status sg__slots_write(sg__slots *s, uint64_t label, size_t off, const void *src, size_t bytes) {
  if (off > s->push_cap || bytes > s->push_cap - off)
    return sg__error(SG_ERR_INTERNAL, "%s: %zu bytes at %zu overflow rank %d's slot of %zu", s->what, bytes,
                     off, s->target, s->push_cap);
  sg_gva pay = s->push_pay[label % 2];
  const unsigned char *from = src;
  for (size_t done = 0; done < bytes;) {
    size_t n = bytes - done < PIECE ? bytes - done : PIECE;
    SG_CHECK(sg_gmem_write(s->gm, sg_gva_make(sg_gva_node(pay), pay.lo + off + done), from + done, n, NULL));
    done += n;
    if (done < bytes) SG_CHECK(sg_comm_poll(s->comm));
  }
  return SG_OK;
}

sg_status sg__slots_open(sg__slots *s, uint64_t label, uint64_t bytes) {
  int k = (int)(label % 2);
  uint64_t hdr[2] = {label, bytes};
  SG_CHECK(sg_gmem_write(s->gm, s->push_hdr[k], hdr, sizeof hdr, NULL));
  return commit(s->gm, s->push_hdr[k], &s->push_pte[k], OPEN);
}

sg_status sg__slots_latest(sg__slots *s, uint64_t *label, int *slot) {
  *label = UINT64_MAX;
  *slot = -1;
  for (int k = 0; k < 2 && s->gm != NULL; k++) {
    sg_gmem_pte e;
    /* An entry that cannot be read is not readable: in a recovery that is an entry a failed writer left
     * busy (its push was cut short, so the slot holds nothing complete), and waiting on it spins against
     * the aborted communicator. */
    if (sg_gmem_pte_read(s->gm, s->held_hdr[k], &e) != SG_OK) {
      sg_clear_error();
      continue;
    }
    if (!(e.flags & SG_GMEM_READ) || e.version < 2) continue;
    uint64_t l = e.version - 2u;
    if (*label == UINT64_MAX || l > *label) *label = l, *slot = k;
  }
  return SG_OK;
}

sg_status sg__slots_check(sg__slots *s, uint64_t label, int *slot, uint64_t *bytes) {
  int k = (int)(label % 2);
  uint64_t hdr[2] = {UINT64_MAX, 0};
  sg_status st = label > UINT32_MAX - 2u
                     ? SG_ERR_RANGE
                     : sg_gmem_read_at(s->gm, s->held_hdr[k], hdr, sizeof hdr, sg__slots_version(label));
  if (st == SG_OK && hdr[0] == label && hdr[1] <= s->held_bytes) {
    *slot = k;
    if (bytes != NULL) *bytes = hdr[1];
    return SG_OK;
  }
  sg_gmem_pte e = {0};
  sg_status rs = sg_gmem_pte_read(s->gm, s->held_hdr[k], &e);
  char holds[96];
  if (rs != SG_OK) snprintf(holds, sizeof holds, "cannot be read (%s)", sg_last_error());
  else if (!(e.flags & SG_GMEM_READ))
    snprintf(holds, sizeof holds, "is being written (version %u)", e.version);
  else snprintf(holds, sizeof holds, "holds label %llu", (unsigned long long)(e.version - 2u));
  return sg__error(st == SG_OK ? SG_ERR_STALE : st, "%s: slot %d %s, not %llu (%s)", s->what, k, holds,
                   (unsigned long long)label,
                   st != SG_OK       ? sg_status_str(st)
                   : hdr[0] != label ? "header disagrees"
                                     : "header names more bytes than the slot has");
}

sg_status sg__slots_held_ptr(sg__slots *s, int slot, size_t off, size_t bytes, const void **out) {
  void *p = NULL;
  if (bytes == 0) {
    *out = NULL;
    return SG_OK;
  }
  sg_gva pay = s->held_pay[slot];
  SG_CHECK(sg_gmem_ptr(s->gm, sg_gva_make(sg_gva_node(pay), pay.lo + off), bytes, SG_GMEM_READ, &p));
  *out = p;
  return SG_OK;
}
