/* Allocation in this node's global range: consecutive pages of the range
 * mapped to consecutive frames of one tier, so an allocation is one local
 * pointer (what sg_session_bind_state() and the ZeRO shards need). The
 * allocator remembers which frames it handed out, and frees exactly those,
 * whatever sg_gmem_pte_cas later wrote into the entries. */
#include <string.h>

#include "gmem/gmem_internal.h"

typedef struct map_ctx {
  uint16_t node;
  uint8_t flags;
  sg_gmem_tier tier;
  uint64_t frame;
} map_ctx;

static void apply_map(void *c, uint64_t i, uint16_t *node, uint8_t *flags, uint64_t *offset) {
  const map_ctx *m = c;
  *node = m->node;
  *flags = m->flags;
  *offset = SG_GMEM_LOC(m->tier, 0, (m->frame + i) * SG__GM_PAGE);
}

static void apply_unmap(void *c, uint64_t i, uint16_t *node, uint8_t *flags, uint64_t *offset) {
  (void)c;
  (void)i;
  *node = SG_GMEM_NODE_NONE;
  *flags = 0;
  *offset = 0;
}

static sg_status check_tier(sg_gmem_tier tier, const char *what) {
  if ((unsigned)tier > SG_GMEM_VRAM)
    return sg__error(SG_ERR_INVALID_ARG, "%s: %d is not a tier", what, (int)tier);
  return SG_OK;
}

sg_status sg_gmem_alloc(sg_gmem *gm, sg_gmem_tier tier, size_t bytes, unsigned flags, sg_gva *out) {
  const char *what = "sg_gmem_alloc";
  if (gm == NULL || out == NULL) return sg__error(SG_ERR_INVALID_ARG, "%s: NULL gmem or out", what);
  SG_CHECK(check_tier(tier, what));
  if (bytes == 0) return sg__error(SG_ERR_INVALID_ARG, "%s: zero bytes", what);
  if (flags & ~(unsigned)(SG_GMEM_READ | SG_GMEM_WRITE | SG_GMEM_COHERENT | SG_GMEM_UNINIT))
    return sg__error(SG_ERR_INVALID_ARG, "%s: flags 0x%x have unknown bits", what, flags);
  bool zero = !(flags & SG_GMEM_UNINIT);
  flags &= ~(unsigned)SG_GMEM_UNINIT; /* how to allocate, not an entry flag */
  uint64_t pages = bytes / SG__GM_PAGE + (bytes % SG__GM_PAGE != 0), first, frame;
  if (!sg__bits_find_run(gm->pages_used, gm->table_pages, pages, &first))
    return sg__error(SG_ERR_NO_MEMORY,
                     "%s: node %d's global range has no run of %llu free pages (%llu pages in all)", what,
                     gm->node, (unsigned long long)pages, (unsigned long long)gm->table_pages);
  SG_CHECK(sg__tier_frames_alloc(gm, tier, pages, zero, &frame));
  sg_status st = sg__grow((void **)&gm->allocs, &gm->cap_allocs, gm->n_allocs + 1, sizeof *gm->allocs);
  if (st != SG_OK) {
    sg__tier_frames_free(gm, tier, frame, pages);
    return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", what);
  }
  map_ctx m = {(uint16_t)gm->node, (uint8_t)flags, tier, frame};
  st = sg__gm_update_range(gm, first, pages, NULL, apply_map, &m);
  if (st != SG_OK) {
    sg__tier_frames_free(gm, tier, frame, pages);
    return st;
  }
  sg__bits_set(gm->pages_used, first, pages, true);
  gm->allocs[gm->n_allocs++] = (sg__gm_alloc){first, pages, tier, frame, flags};
  *out = sg_gva_make((uint16_t)gm->node, first << SG__GM_SHIFT);
  return SG_OK;
}

sg_status sg__gm_find_alloc(sg_gmem *gm, sg_gva gva, const char *what, sg__gm_alloc **out) {
  char gb[SG__GVA_BUF];
  uint64_t idx;
  SG_CHECK(sg__gm_check_gva(gm, gva, what, &idx));
  if (sg_gva_node(gva) != gm->node)
    return sg__error(SG_ERR_INVALID_ARG,
                     "%s: GVA %s belongs to node %u; only its owner (not node %d) can do this", what,
                     sg__gva_str(gva, gb), sg_gva_node(gva), gm->node);
  for (uint32_t i = 0; i < gm->n_allocs; i++)
    if (gm->allocs[i].first == idx && gva.lo % SG__GM_PAGE == 0) {
      *out = &gm->allocs[i];
      return SG_OK;
    }
  return sg__error(SG_ERR_NOT_FOUND, "%s: GVA %s does not start an allocation of node %d", what,
                   sg__gva_str(gva, gb), gm->node);
}

sg_status sg_gmem_free(sg_gmem *gm, sg_gva gva) {
  if (gm == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_gmem_free: NULL gmem");
  sg__gm_alloc *a;
  SG_CHECK(sg__gm_find_alloc(gm, gva, "sg_gmem_free", &a));
  SG_CHECK(sg__gm_update_range(gm, a->first, a->pages, NULL, apply_unmap, NULL));
  sg__tier_frames_free(gm, a->tier, a->frame, a->pages);
  sg__bits_set(gm->pages_used, a->first, a->pages, false);
  *a = gm->allocs[--gm->n_allocs];
  return SG_OK;
}

/* The allocation of this node holding [gva, gva+bytes), with the byte in its tier. */
static sg_status local_range(sg_gmem *gm, sg_gva gva, size_t bytes, const char *what, sg__gm_alloc **out,
                             uint64_t *tier_byte) {
  char gb[SG__GVA_BUF];
  uint64_t idx;
  SG_CHECK(sg__gm_check_gva(gm, gva, what, &idx));
  if (sg_gva_node(gva) != gm->node)
    return sg__error(SG_ERR_INVALID_ARG,
                     "%s: GVA %s is on node %u; only node %d's own memory has a local address", what,
                     sg__gva_str(gva, gb), sg_gva_node(gva), gm->node);
  for (uint32_t i = 0; i < gm->n_allocs; i++) {
    sg__gm_alloc *a = &gm->allocs[i];
    uint64_t begin = a->first << SG__GM_SHIFT, end = (a->first + a->pages) << SG__GM_SHIFT;
    if (gva.lo < begin || gva.lo >= end) continue;
    if (bytes > end - gva.lo)
      return sg__error(SG_ERR_RANGE, "%s: [%s, +%zu) runs past the end of its allocation (%llu bytes left)",
                       what, sg__gva_str(gva, gb), bytes, (unsigned long long)(end - gva.lo));
    *out = a;
    *tier_byte = a->frame * SG__GM_PAGE + (gva.lo - begin);
    return SG_OK;
  }
  return sg__error(SG_ERR_NOT_FOUND, "%s: GVA %s is in no allocation of node %d", what, sg__gva_str(gva, gb),
                   gm->node);
}

sg_status sg_gmem_ptr(sg_gmem *gm, sg_gva gva, size_t bytes, unsigned access, void **out) {
  const char *what = "sg_gmem_ptr";
  char gb[SG__GVA_BUF];
  if (gm == NULL || out == NULL) return sg__error(SG_ERR_INVALID_ARG, "%s: NULL gmem or out", what);
  *out = NULL;
  sg__gm_alloc *a = NULL;
  uint64_t byte = 0;
  SG_CHECK(local_range(gm, gva, bytes, what, &a, &byte));
  if (a->tier == SG_GMEM_VRAM)
    return sg__error(SG_ERR_UNSUPPORTED, "%s: GVA %s is in VRAM, which has no host address", what,
                     sg__gva_str(gva, gb));
  sg__tlb_entry *e;
  SG_CHECK(sg__gm_lookup(gm, gva, access, what, &e));
  /* Stores through a pointer bypass the version protocol, so a coherent
   * page is written only through sg_gmem_write. */
  if ((access & SG_GMEM_WRITE) && (sg__w_flags(e->word) & SG_GMEM_COHERENT))
    return sg__error(SG_ERR_DENIED, "%s: GVA %s is COHERENT; write it with sg_gmem_write", what,
                     sg__gva_str(gva, gb));
  uint8_t *p = gm->tier[a->tier].base + byte;
  if (e->page == NULL || e->page + (gva.lo & (SG__GM_PAGE - 1)) != p)
    return sg__error(SG_ERR_STATE,
                     "%s: the entry of GVA %s no longer points at its allocation's frame (changed by "
                     "sg_gmem_pte_cas)",
                     what, sg__gva_str(gva, gb));
  *out = p;
  return SG_OK;
}

sg_status sg_gmem_persist(sg_gmem *gm, sg_gva gva, size_t bytes) {
  if (gm == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_gmem_persist: NULL gmem");
  if (bytes == 0) return SG_OK;
  sg__gm_alloc *a = NULL;
  uint64_t byte = 0;
  SG_CHECK(local_range(gm, gva, bytes, "sg_gmem_persist", &a, &byte));
  return sg__tier_persist(&gm->tier[a->tier], byte, bytes);
}
