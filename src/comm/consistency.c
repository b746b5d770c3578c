/* The consistency check of SPEC M5: after the first forward every partition
 * publishes its boundary shape hash and boundary dtype ids; all ranks compare
 * all records, so a mismatch fails every rank with the same message. */
#include <stdio.h>
#include <string.h>

#include "comm/comm_internal.h"

enum { REC_BYTES = 256, REC_IDS = REC_BYTES - 24 };

typedef struct rec {
  uint64_t shape_hash, n_ids, ids_hash;
  uint8_t ids[REC_IDS];
} rec;

static void describe_ids(const rec *r, char *buf, size_t cap) {
  size_t shown = r->n_ids < 16 ? (size_t)r->n_ids : 16, used = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < shown && used + 8 < cap; i++)
    used +=
        (size_t)snprintf(buf + used, cap - used, "%s%s", i ? "," : "", sg_dtype_name((sg_dtype)r->ids[i]));
  if (r->n_ids > shown && used + 8 < cap) snprintf(buf + used, cap - used, ",...");
}

sg_status sg_comm_check_consistency(sg_comm *comm, uint64_t boundary_shape_hash, const uint8_t *dtype_ids,
                                    size_t n_dtype_ids) {
  SG_CHECK(sg__comm_begin(comm, "sg_comm_check_consistency"));
  if (dtype_ids == NULL && n_dtype_ids > 0)
    return sg__error(SG_ERR_INVALID_ARG, "sg_comm_check_consistency: NULL dtype ids");
  _Static_assert(sizeof(rec) == REC_BYTES, "record layout");
  rec mine = {boundary_shape_hash, n_dtype_ids, sg__fnv1a64(SG__FNV1A64_SEED, dtype_ids, n_dtype_ids), {0}};
  memcpy(mine.ids, dtype_ids, n_dtype_ids < REC_IDS ? n_dtype_ids : REC_IDS);
  int n = comm->size;
  rec *all = sg__malloc(sizeof(rec) * (size_t)n);
  if (all == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_comm_check_consistency: out of memory");
  sg_status st = sg_comm_allgather(comm, &mine, all, REC_BYTES / 8, SG_I64);
  if (st != SG_OK) {
    sg__free(all);
    return st;
  }
  for (int r = 1; r < n && st == SG_OK; r++) {
    const rec *a = &all[0], *b = &all[r];
    if (a->shape_hash == b->shape_hash && a->n_ids == b->n_ids && a->ids_hash == b->ids_hash) continue;
    char da[160], db[160];
    describe_ids(a, da, sizeof da);
    describe_ids(b, db, sizeof db);
    st = sg__error(
        SG_ERR_SHAPE,
        "Gradient topology mismatch (seen on rank %d): rank 0 has boundary shape hash %016llx and %llu "
        "boundary dtypes [%s]; rank %d has %016llx and %llu [%s]",
        comm->rank, (unsigned long long)a->shape_hash, (unsigned long long)a->n_ids, da, r,
        (unsigned long long)b->shape_hash, (unsigned long long)b->n_ids, db);
  }
  sg__free(all);
  return st;
}
