/* Memory tiers (SPEC A3): the DRAM tier, the frame index that is level 2 of
 * the three-level index (tier offset -> frame), and the copies that every
 * tier supports. PMEM and VRAM set themselves up in their own files; after
 * that a tier is a base address (or a device buffer) cut into 4 KiB frames. */
#include <string.h>

#include "gmem/gmem_internal.h"

const char *sg__tier_name(sg_gmem_tier t) {
  switch (t) {
    case SG_GMEM_DRAM: return "DRAM";
    case SG_GMEM_PMEM: return "PMEM";
    case SG_GMEM_VRAM: return "VRAM";
  }
  return "unknown tier";
}

sg_status sg__tier_frames_init(sg__tier *t) {
  t->frames = t->bytes / SG__GM_PAGE;
  t->used = sg__calloc((size_t)((t->frames + 63) / 64), sizeof *t->used);
  if (t->used == NULL)
    return sg__error(SG_ERR_NO_MEMORY, "gmem: out of memory for the %s frame index", sg__tier_name(t->kind));
  return SG_OK;
}

sg_status sg__tier_dram_init(sg__tier *t, size_t bytes, bool shared) {
  t->kind = SG_GMEM_DRAM;
  if (bytes == 0) return SG_OK;
  size_t want = bytes / SG__GM_PAGE * SG__GM_PAGE, total;
  if (want == 0 || !sg__add_size(want, SG__GM_PAGE, &total))
    return sg__error(SG_ERR_INVALID_ARG, "sg_gmem_create: dram_bytes %zu is not at least one 4096-byte page",
                     bytes);
  if (shared) { /* the memory comes with the window (sg__tier_dram_window) */
    t->bytes = want;
    return sg__tier_frames_init(t);
  }
  /* calloc of a large block maps fresh zero pages lazily, so an unused tier
   * costs address space only. Page-aligned frames keep every allocation
   * 64-byte aligned, as sg_session_bind_state() wants. */
  t->raw = sg__calloc(1, total);
  if (t->raw == NULL)
    return sg__error(SG_ERR_NO_MEMORY, "sg_gmem_create: out of memory for %zu bytes of DRAM tier", want);
  t->base = (uint8_t *)(((uintptr_t)t->raw + SG__GM_PAGE - 1) & ~(uintptr_t)(SG__GM_PAGE - 1));
  t->bytes = want;
  return sg__tier_frames_init(t);
}

sg_status sg__tier_dram_window(sg__tier *t, sg_comm *comm) {
  void *base = NULL;
  SG_CHECK(sg_comm_window_alloc(comm, t->bytes, &base, &t->win));
  /* The transport's allocations are page-aligned (shared memory, mmap); frames must be 64-byte aligned,
   * as sg_session_bind_state() wants. */
  if ((uintptr_t)base % 64 != 0)
    return sg__error(SG_ERR_INTERNAL,
                     "sg_gmem_create: the transport allocated the DRAM tier at %p, not 64-byte "
                     "aligned",
                     base);
  t->base = base;
  return SG_OK;
}

void sg__tier_fini(sg__tier *t) {
  if (t->kind == SG_GMEM_PMEM) sg__tier_pmem_unmap(t);
  else if (t->kind == SG_GMEM_VRAM) sg__tier_vram_release(t);
  sg__free(t->raw);
  sg__free(t->used);
  sg__free(t->win_dummy);
  sg_gmem_tier kind = t->kind;
  memset(t, 0, sizeof *t);
  t->kind = kind;
}

sg_status sg__tier_frames_alloc(sg_gmem *gm, sg_gmem_tier tier, uint64_t n, bool zero, uint64_t *first) {
  sg__tier *t = &gm->tier[tier];
  if (t->bytes == 0)
    return sg__error(SG_ERR_UNSUPPORTED, "gmem: node %d has no %s tier (create it with a non-zero %s_bytes)",
                     gm->node, sg__tier_name(tier),
                     tier == SG_GMEM_PMEM   ? "pmem"
                     : tier == SG_GMEM_VRAM ? "vram"
                                            : "dram");
  if (!sg__bits_find_run(t->used, t->frames, n, first))
    return sg__error(SG_ERR_NO_MEMORY,
                     "gmem: the %s tier of node %d has no run of %llu free frames (%llu frames of %u bytes)",
                     sg__tier_name(tier), gm->node, (unsigned long long)n, (unsigned long long)t->frames,
                     SG_GMEM_PAGE_SIZE);
  /* Frames are handed out zeroed: a freed frame may hold another tensor's bytes. */
  if (zero) SG_CHECK(sg__tier_zero(t, *first * SG__GM_PAGE, (size_t)(n * SG__GM_PAGE)));
  sg__bits_set(t->used, *first, n, true);
  return SG_OK;
}

void sg__tier_frames_free(sg_gmem *gm, sg_gmem_tier tier, uint64_t first, uint64_t n) {
  sg__bits_set(gm->tier[tier].used, first, n, false);
}

sg_status sg__tier_write(sg__tier *t, uint64_t at, const void *src, size_t n) {
  if (t->kind == SG_GMEM_VRAM) return sg__vram_copy(t, at, (void *)(uintptr_t)src, n, true);
  memcpy(t->base + at, src, n);
  return SG_OK;
}

sg_status sg__tier_read(sg__tier *t, uint64_t at, void *dst, size_t n) {
  if (t->kind == SG_GMEM_VRAM) return sg__vram_copy(t, at, dst, n, false);
  memcpy(dst, t->base + at, n);
  return SG_OK;
}

sg_status sg__tier_zero(sg__tier *t, uint64_t at, size_t n) {
  if (t->kind == SG_GMEM_VRAM) {
    static const uint8_t zeros[SG_GMEM_PAGE_SIZE];
    for (size_t done = 0; done < n; done += SG__GM_PAGE)
      SG_CHECK(sg__vram_copy(t, at + done, (void *)(uintptr_t)zeros, SG__GM_PAGE, true));
    return SG_OK;
  }
  memset(t->base + at, 0, n);
  return sg__tier_persist(t, at, n);
}

sg_status sg__tier_persist(sg__tier *t, uint64_t at, size_t n) {
  if (t->kind != SG_GMEM_PMEM || n == 0) return SG_OK;
  return sg__pmem_persist(t, at, n);
}

sg_status sg__gm_local_span(sg_gmem *gm, sg_gva gva, uint64_t offset, uint64_t in_page, size_t n,
                            sg__tier **tier, uint64_t *byte) {
  sg_gmem_tier kind = SG_GMEM_LOC_TIER(offset);
  uint64_t b = SG_GMEM_LOC_BYTE(offset) + in_page;
  sg__tier *t = kind <= SG_GMEM_VRAM ? &gm->tier[kind] : NULL;
  if (t == NULL || t->bytes == 0 || b > t->bytes || n > t->bytes - b) {
    char gb[SG__GVA_BUF];
    return sg__error(SG_ERR_FORMAT,
                     "gmem: the entry of GVA %s points outside node %d's memory (offset 0x%llx)",
                     sg__gva_str(gva, gb), gm->node, (unsigned long long)offset);
  }
  *tier = t;
  *byte = b;
  return SG_OK;
}
