/* Direct access to page-table entries: a consistent read from the owner and
 * the compare-and-swap update on the version (SPEC A2). An entry pointing
 * somewhere is input like any other: it is checked against the sizes every
 * node announced before it can be published, so no node ever translates to
 * memory outside a tier. */
#include "gmem/gmem_internal.h"

static void to_public(const sg__pte *e, sg_gmem_pte *out) {
  out->node_id = sg__w_node(e->word);
  out->flags = sg__w_flags(e->word);
  out->version = sg__w_version(e->word);
  out->offset = e->offset;
}

sg_status sg_gmem_pte_read(sg_gmem *gm, sg_gva gva, sg_gmem_pte *out) {
  if (gm == NULL || out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_gmem_pte_read: NULL gmem or out");
  uint64_t idx;
  SG_CHECK(sg__gm_check_gva(gm, gva, "sg_gmem_pte_read", &idx));
  sg__pte e;
  SG_CHECK(sg__gm_entry_read(gm, sg_gva_node(gva), idx, gva, &e));
  to_public(&e, out);
  return SG_OK;
}

static sg_status check_desired(const sg_gmem *gm, const sg_gmem_pte *d) {
  const char *what = "sg_gmem_pte_cas";
  if (d->node_id == SG_GMEM_NODE_NONE) {
    if (d->flags != 0 || d->offset != 0)
      return sg__error(SG_ERR_INVALID_ARG, "%s: an unmapped entry (node_id 0xffff) has no flags or offset",
                       what);
    return SG_OK;
  }
  if (d->node_id >= gm->nodes)
    return sg__error(SG_ERR_NOT_FOUND, "%s: desired node_id %u is not a node of the job (0..%d)", what,
                     d->node_id, gm->nodes - 1);
  if (d->flags & ~(SG_GMEM_READ | SG_GMEM_WRITE | SG_GMEM_COHERENT))
    return sg__error(SG_ERR_INVALID_ARG, "%s: desired flags 0x%x have unknown bits", what, d->flags);
  unsigned tier = (unsigned)(d->offset >> 62);
  if (tier > SG_GMEM_VRAM)
    return sg__error(SG_ERR_INVALID_ARG, "%s: desired offset names tier %u, which does not exist", what,
                     tier);
  if (tier != SG_GMEM_VRAM && SG_GMEM_LOC_DEVICE(d->offset) != 0)
    return sg__error(SG_ERR_INVALID_ARG, "%s: the %s tier has no device %d", what,
                     sg__tier_name((sg_gmem_tier)tier), SG_GMEM_LOC_DEVICE(d->offset));
  uint64_t bytes = gm->peers[d->node_id].tier_bytes[tier], byte = SG_GMEM_LOC_BYTE(d->offset);
  if (bytes == 0)
    return sg__error(SG_ERR_NOT_FOUND, "%s: node %u has no %s tier", what, d->node_id,
                     sg__tier_name((sg_gmem_tier)tier));
  if (byte % SG__GM_PAGE != 0)
    return sg__error(SG_ERR_INVALID_ARG, "%s: desired frame byte 0x%llx is not page aligned", what,
                     (unsigned long long)byte);
  if (byte >= bytes)
    return sg__error(SG_ERR_RANGE, "%s: desired frame byte 0x%llx is beyond node %u's %s tier of %llu bytes",
                     what, (unsigned long long)byte, d->node_id, sg__tier_name((sg_gmem_tier)tier),
                     (unsigned long long)bytes);
  return SG_OK;
}

sg_status sg_gmem_pte_cas(sg_gmem *gm, sg_gva gva, uint32_t expected_version, const sg_gmem_pte *desired,
                          sg_gmem_pte *actual) {
  if (gm == NULL || desired == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg_gmem_pte_cas: NULL gmem or desired");
  uint64_t idx;
  SG_CHECK(sg__gm_check_gva(gm, gva, "sg_gmem_pte_cas", &idx));
  SG_CHECK(check_desired(gm, desired));
  sg__gm_txn t;
  sg__pte found = {0, 0};
  sg_status st = sg__gm_txn_begin(gm, gva, expected_version, "sg_gmem_pte_cas", &t, actual ? &found : NULL);
  if (st == SG_GMEM_ERR_STALE && actual != NULL) to_public(&found, actual);
  if (st != SG_OK) return st;
  st = sg__gm_txn_invalidate(gm, &t);
  if (st != SG_OK) {
    sg__gm_txn_abort(gm, &t);
    return st;
  }
  uint64_t w;
  SG_CHECK(sg__gm_txn_commit(gm, &t, desired->node_id, desired->flags, desired->offset, &w));
  if (actual != NULL) {
    sg__pte now = {w, desired->offset};
    to_public(&now, actual);
  }
  return SG_OK;
}
