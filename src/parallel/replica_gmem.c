/* ZeRO-1's buddy replicas in the global page table (docs/resilience.md "Buddy replicas"): each rank, as
 * buddy of rank (rank - 1) mod size, holds that rank's state in two slots (gmem_slots.c: the label is the
 * step, slot k the steps with step mod 2 == k) and writes its own state into rank (rank + 1) mod size's.
 * Everything here runs on the scheduler thread, which owns the communicator and so the sg_gmem. */
#include <stdio.h>
#include <string.h>

#include "parallel/dist_internal.h"

/* Scheduler job, collective: the slots over the current communicator. arg: the next step to push. */
static sg_status setup_job(sg_dist *d, void *arg) {
  sg__dist_zero *z = &DP(d)->zero;
  z->slots.what = "ZeRO-1 buddy replicas: global page table";
  return sg__slots_setup(&z->slots, d->comm, (z->rank + 1) % z->size, z->slots.held_bytes,
                         *(const uint64_t *)arg);
}

sg_status sg__dist_replica_gmem_setup(sg_dist *d, uint64_t next) {
  return sg__dist_run_job(d, setup_job, &next);
}

void sg__dist_replica_gmem_fini(sg_dist *d) { sg__slots_fini(&DP(d)->zero.slots); }

sg_status sg__dist_replica_gmem_push(sg_dist *d, uint64_t step, const char *from) {
  sg__dist_zero *z = &DP(d)->zero;
  SG_CHECK(sg__slots_close(&z->slots, step));
  for (uint32_t j = 0; j < z->n_rep; j++)
    SG_CHECK(sg__slots_write(&z->slots, step, z->rep_pay_off[j], from + z->rep_snap_off[j], z->rep_bytes[j]));
  return sg__slots_open(&z->slots, step, z->replica_bytes);
}

/* ---- reading, as buddy ----------------------------------------------------------------------- */

typedef struct held_arg {
  uint64_t step; /* in: the step wanted (check_job) */
  int slot;      /* out */
  uint64_t latest;
} held_arg;

static sg_status latest_job(sg_dist *d, void *arg) {
  held_arg *h = arg;
  return sg__slots_latest(&DP(d)->zero.slots, &h->latest, &h->slot);
}

sg_status sg__dist_replica_latest(sg_dist *d, uint64_t *step) {
  held_arg h = {0, -1, UINT64_MAX};
  SG_CHECK(sg__dist_run_job(d, latest_job, &h));
  *step = h.latest;
  return SG_OK;
}

static sg_status check_job(sg_dist *d, void *arg) {
  held_arg *h = arg;
  return sg__slots_check(&DP(d)->zero.slots, h->step, &h->slot, NULL);
}

sg_status sg__dist_replica_check(sg_dist *d, uint64_t step, int *slot) {
  held_arg h = {step, -1, 0};
  SG_CHECK(sg__dist_run_job(d, check_job, &h));
  *slot = h.slot;
  return SG_OK;
}

sg_status sg__dist_replica_held_ptr(sg_dist *d, int slot, size_t off, size_t bytes, const void **out) {
  return sg__slots_held_ptr(&DP(d)->zero.slots, slot, off, bytes, out);
}

/* ---- the test's view ---------------------------------------------------------------------------- */

static sg_status probe_job(sg_dist *d, void *arg) {
  sg__dist_replica_probe *p = arg;
  sg__dist_zero *z = &DP(d)->zero;
  if (z->slots.gm == NULL)
    return sg__error(SG_ERR_STATE, "no ZeRO-1 buddy replicas (zero 1 with a feed callback)");
  for (int k = 0; k < 2; k++) {
    sg_gmem_pte e;
    sg_gmem_loc loc;
    SG_CHECK(sg_gmem_pte_read(z->slots.gm, z->slots.push_hdr[k], &e));
    p->push_node[k] = e.node_id;
    p->push_version[k] = e.version;
    p->push_open[k] = (e.flags & SG_GMEM_READ) != 0;
    SG_CHECK(sg_gva_format(z->slots.push_hdr[k], p->push_gva[k], sizeof p->push_gva[k]));
    p->push_pay_node[k] = -1;
    if (z->replica_bytes > 0) {
      SG_CHECK(sg_gmem_translate(z->slots.gm, z->slots.push_pay[k], SG_GMEM_WRITE, &loc));
      p->push_pay_node[k] = loc.node;
    }
    /* What the buddy holds of this rank's snapshot of the slot's step, read back remotely. */
    p->push_matches[k] = e.version >= 2 && DP(d)->snap.valid[k] && DP(d)->snap.label[k] == e.version - 2u;
    for (uint32_t j = 0; j < z->n_rep && p->push_matches[k]; j++) {
      char *buf = sg__malloc(z->rep_bytes[j] ? z->rep_bytes[j] : 1);
      if (buf == NULL) return sg__error(SG_ERR_NO_MEMORY, "probe: out of memory");
      sg_status st = sg_gmem_read(
          z->slots.gm,
          sg_gva_make(sg_gva_node(z->slots.push_pay[k]), z->slots.push_pay[k].lo + z->rep_pay_off[j]), buf,
          z->rep_bytes[j], NULL);
      p->push_matches[k] =
          st == SG_OK && memcmp(buf, DP(d)->snap.slot[k] + z->rep_snap_off[j], z->rep_bytes[j]) == 0;
      sg__free(buf);
      SG_CHECK(st);
    }
    SG_CHECK(sg_gmem_pte_read(z->slots.gm, z->slots.held_hdr[k], &e));
    p->held_node[k] = e.node_id;
    p->held_version[k] = e.version;
    uint64_t step = UINT64_MAX;
    p->held_read[k] = sg_gmem_read_at(z->slots.gm, z->slots.held_hdr[k], &step, sizeof step, e.version);
    p->held_step[k] = step;
    p->held_stale[k] = sg_gmem_read_at(z->slots.gm, z->slots.held_hdr[k], &step, sizeof step, e.version + 2u);
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
