/* Tier migration (SPEC A3) that keeps every GVA: the allocation's entries
 * are taken (busy) and every sharer invalidated, the data is copied into new
 * frames while nobody can commit a coherent write, then the entries are
 * repointed and committed at version + 1 and the old frames freed. Readers
 * that raced the copy see their bucket moved and translate again. */
#include "gmem/gmem_internal.h"

typedef struct move_ctx {
  sg_gmem *gm;
  sg__gm_alloc *a;
  sg_gmem_tier to;
  uint64_t frame; /* first new frame */
  sg__gm_moved_fn moved;
  void *moved_ctx;
} move_ctx;

static sg_status copy_frames(void *c) {
  move_ctx *m = c;
  sg__tier *from = &m->gm->tier[m->a->tier], *to = &m->gm->tier[m->to];
  uint64_t src = m->a->frame * SG__GM_PAGE, dst = m->frame * SG__GM_PAGE;
  size_t bytes = (size_t)(m->a->pages * SG__GM_PAGE);
  if (from->base != NULL && to->base != NULL) {
    SG_CHECK(sg__tier_write(to, dst, from->base + src, bytes));
  } else {
    /* VRAM on one side: through a page-sized bounce buffer. */
    uint8_t page[SG_GMEM_PAGE_SIZE];
    for (size_t done = 0; done < bytes; done += SG__GM_PAGE) {
      SG_CHECK(sg__tier_read(from, src + done, page, SG__GM_PAGE));
      SG_CHECK(sg__tier_write(to, dst + done, page, SG__GM_PAGE));
    }
  }
  SG_CHECK(sg__tier_persist(to, dst, bytes));
  return m->moved ? m->moved(m->moved_ctx, to->base ? to->base + dst : NULL) : SG_OK;
}

static void apply_move(void *c, uint64_t i, uint16_t *node, uint8_t *flags, uint64_t *offset) {
  const move_ctx *m = c;
  (void)node;
  (void)flags;
  *offset = SG_GMEM_LOC(m->to, 0, (m->frame + i) * SG__GM_PAGE);
}

sg_status sg__gm_migrate(sg_gmem *gm, sg_gva gva, sg_gmem_tier tier, sg__gm_moved_fn moved, void *ctx) {
  const char *what = "sg_gmem_migrate";
  if (gm == NULL) return sg__error(SG_ERR_INVALID_ARG, "%s: NULL gmem", what);
  if ((unsigned)tier > SG_GMEM_VRAM)
    return sg__error(SG_ERR_INVALID_ARG, "%s: %d is not a tier", what, (int)tier);
  sg__gm_alloc *a;
  SG_CHECK(sg__gm_find_alloc(gm, gva, what, &a));
  if (a->tier == tier) return SG_OK;
  move_ctx m = {gm, a, tier, 0, moved, ctx};
  SG_CHECK(sg__tier_frames_alloc(gm, tier, a->pages, true, &m.frame));
  sg_status st = sg__gm_update_range(gm, a->first, a->pages, copy_frames, apply_move, &m);
  if (st != SG_OK) {
    sg__tier_frames_free(gm, tier, m.frame, a->pages);
    return st;
  }
  sg__tier_frames_free(gm, a->tier, a->frame, a->pages);
  a->tier = tier;
  a->frame = m.frame;
  return SG_OK;
}

sg_status sg_gmem_migrate(sg_gmem *gm, sg_gva gva, sg_gmem_tier tier) {
  return sg__gm_migrate(gm, gva, tier, NULL, NULL);
}
