/* Translation of a GVA (SPEC A1, A2): the TLB; on a miss this node's shard
 * under the sequence lock, or the owner's whole table page by RMA get. A
 * remote fill first puts this node into the table page's sharer word, so
 * every later writer of those entries invalidates what is filled here; the
 * bucket values are read before the entries, so a write that lands while we
 * read makes the new slot invalid at once rather than wrong. */
#include "gmem/gmem_internal.h"

sg_status sg__gm_check_gva(const sg_gmem *gm, sg_gva gva, const char *what, uint64_t *idx) {
  char gb[SG__GVA_BUF];
  if (gva.hi > 0xFFFF)
    return sg__error(SG_ERR_INVALID_ARG, "%s: GVA %s has reserved bits set in its high word", what,
                     sg__gva_str(gva, gb));
  uint16_t node = sg_gva_node(gva);
  if (node >= gm->nodes)
    return sg__error(SG_ERR_NOT_FOUND, "%s: GVA %s names node %u, which is not in the job (nodes 0..%d)",
                     what, sg__gva_str(gva, gb), node, gm->nodes - 1);
  uint64_t pages = gm->peers[node].table_pages;
  if ((gva.lo >> SG__GM_SHIFT) >= pages)
    return sg__error(
        SG_ERR_RANGE,
        "%s: GVA %s: offset 0x%llx is beyond node %u's global range of %llu pages (0x%llx bytes)", what,
        sg__gva_str(gva, gb), (unsigned long long)gva.lo, node, (unsigned long long)pages,
        (unsigned long long)(pages << SG__GM_SHIFT));
  *idx = gva.lo >> SG__GM_SHIFT;
  return SG_OK;
}

static const char *access_name(unsigned a) {
  return a == (SG_GMEM_READ | SG_GMEM_WRITE) ? "read-write"
         : a == SG_GMEM_WRITE                ? "write"
         : a == SG_GMEM_READ                 ? "read"
                                             : "no";
}

sg_status sg__gm_check_access(sg_gva gva, uint64_t word, unsigned access, const char *what) {
  char gb[SG__GVA_BUF];
  if (!sg__w_mapped(word))
    return sg__error(SG_ERR_NOT_FOUND, "%s: GVA %s is not mapped (no allocation holds it)", what,
                     sg__gva_str(gva, gb));
  unsigned flags = sg__w_flags(word), missing = access & ~flags & (SG_GMEM_READ | SG_GMEM_WRITE);
  if (missing)
    return sg__error(SG_ERR_DENIED, "%s: GVA %s permits %s access; %s access was asked for", what,
                     sg__gva_str(gva, gb), access_name(flags & (SG_GMEM_READ | SG_GMEM_WRITE)),
                     access_name(missing));
  return SG_OK;
}

/* Fills the TLB slot of (owner, idx) from this node's shard. */
static sg_status fill_local(sg_gmem *gm, sg_gva gva, uint64_t idx) {
  uint64_t seen = sg__gm_bucket_load(gm, sg__gm_bucket((uint16_t)gm->node, idx));
  sg__pte e;
  SG_CHECK(sg__gm_entry_read(gm, (uint16_t)gm->node, idx, gva, &e));
  if (sg__w_mapped(e.word)) sg__tlb_install(gm, (uint16_t)gm->node, idx, e.word, e.offset, seen);
  else return sg__gm_check_access(gva, e.word, 0, "gmem");
  return SG_OK;
}

/* Fills the TLB from the owner's table page holding idx: the entry asked
 * for and the consistent mapped ones of its aligned group of SG__GM_AHEAD
 * (readahead for neighbouring pages), the one asked for last so that it
 * wins a set it shares. Installing all 256 entries of the page cost more
 * than the three gets on loopback (a cache miss per TLB slot). */
#define SG__GM_AHEAD 32u
static sg_status fill_remote(sg_gmem *gm, sg_gva gva, uint16_t owner, uint64_t idx) {
  SG_CHECK(sg__gm_register(gm, owner, idx));
  uint64_t group = idx / SG__GM_AHEAD * SG__GM_AHEAD, seen[SG__GM_AHEAD], first;
  for (uint32_t i = 0; i < SG__GM_AHEAD; i++)
    seen[i] = sg__gm_bucket_load(gm, sg__gm_bucket(owner, group + i));
  int64_t deadline = sg__gm_deadline(gm);
  const sg__pte *ents;
  uint8_t ok[SG__GM_TP];
  uint32_t count;
  for (;;) {
    SG_CHECK(sg__gm_table_page_fetch(gm, owner, idx, &first, &count, &ents, ok));
    if (ok[idx - first]) break;
    SG_CHECK(sg__gm_spin(gm, deadline, "gmem", gva));
  }
  for (uint64_t j = group; j < group + SG__GM_AHEAD && j < first + count; j++)
    if (ok[j - first] && j != idx && sg__w_mapped(ents[j - first].word))
      sg__tlb_install(gm, owner, j, ents[j - first].word, ents[j - first].offset, seen[j - group]);
  const sg__pte *e = &ents[idx - first];
  if (!sg__w_mapped(e->word)) return sg__gm_check_access(gva, e->word, 0, "gmem");
  sg__tlb_install(gm, owner, idx, e->word, e->offset, seen[idx - group]);
  return SG_OK;
}

sg_status sg__gm_lookup(sg_gmem *gm, sg_gva gva, unsigned access, const char *what, sg__tlb_entry **out) {
  uint64_t idx;
  SG_CHECK(sg__gm_check_gva(gm, gva, what, &idx));
  if (access & ~(unsigned)(SG_GMEM_READ | SG_GMEM_WRITE))
    return sg__error(SG_ERR_INVALID_ARG, "%s: access 0x%x has bits other than SG_GMEM_READ and SG_GMEM_WRITE",
                     what, access);
  uint16_t owner = sg_gva_node(gva);
  sg__tlb_entry *e = sg__tlb_find(gm, owner, idx);
  if (e != NULL) {
    gm->stats.tlb_hits++;
  } else {
    int64_t deadline = sg__gm_deadline(gm);
    for (;;) {
      gm->stats.tlb_misses++;
      sg_status st = owner == gm->node ? fill_local(gm, gva, idx) : fill_remote(gm, gva, owner, idx);
      if (st != SG_OK) {
        /* Name the operation the caller asked for, not the internal step. */
        if (st == SG_ERR_NOT_FOUND) {
          char gb[SG__GVA_BUF];
          return sg__error(st, "%s: GVA %s is not mapped (no allocation holds it)", what,
                           sg__gva_str(gva, gb));
        }
        return st;
      }
      /* The bucket moved while we read: a writer got in; read again. */
      if ((e = sg__tlb_find(gm, owner, idx)) != NULL) break;
      SG_CHECK(sg__gm_spin(gm, deadline, what, gva));
    }
  }
  SG_CHECK(sg__gm_check_access(gva, e->word, access, what));
  *out = e;
  return SG_OK;
}

void sg__gm_fill_loc(const sg_gmem *gm, const sg__tlb_entry *e, sg_gva gva, sg_gmem_loc *out) {
  (void)gm;
  uint64_t in_page = gva.lo & (SG__GM_PAGE - 1);
  out->node = sg__w_node(e->word);
  out->flags = sg__w_flags(e->word);
  out->tier = SG_GMEM_LOC_TIER(e->offset);
  out->device = SG_GMEM_LOC_DEVICE(e->offset);
  out->version = sg__w_version(e->word);
  out->tier_offset = SG_GMEM_LOC_BYTE(e->offset) + in_page;
  out->ptr = e->page ? e->page + in_page : NULL;
}

sg_status sg_gmem_translate(sg_gmem *gm, sg_gva gva, unsigned access, sg_gmem_loc *out) {
  /* The hit path: nothing but the TLB slot and its bucket. `lo < 2^40`
   * keeps the entry index inside the key's 48 bits (ranges are smaller). */
  if (gm != NULL && out != NULL && gva.hi < (uint64_t)gm->nodes && (gva.lo >> 40) == 0 &&
      (access & ~(unsigned)(SG_GMEM_READ | SG_GMEM_WRITE)) == 0) {
    sg__tlb_entry *e = sg__tlb_find(gm, (uint16_t)gva.hi, gva.lo >> SG__GM_SHIFT);
    if (e != NULL && (sg__w_flags(e->word) & access) == access) {
      gm->stats.tlb_hits++;
      sg__gm_fill_loc(gm, e, gva, out);
      return SG_OK;
    }
  }
  if (gm == NULL || out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_gmem_translate: NULL gmem or out");
  sg__tlb_entry *e;
  SG_CHECK(sg__gm_lookup(gm, gva, access, "sg_gmem_translate", &e));
  sg__gm_fill_loc(gm, e, gva, out);
  return SG_OK;
}
