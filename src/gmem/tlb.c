/* The software TLB: a two-way set-associative cache of translations keyed by
 * (owner node, entry index). A slot is trusted only while the invalidation bucket it
 * remembers is unchanged, so a hit costs a tag compare and one load of a
 * counter this node owns -- no communication. Writers bump the bucket on
 * every sharer before they commit (txn.c), which is what makes a remote
 * write invalidate this node's translation before it takes effect. */
#include <string.h>

#include "gmem/gmem_internal.h"

sg_status sg__tlb_init(sg_gmem *gm, uint32_t entries) {
  gm->tlb = sg__calloc(entries, sizeof *gm->tlb);
  if (gm->tlb == NULL)
    return sg__error(SG_ERR_NO_MEMORY, "sg_gmem_create: out of memory for a TLB of %u entries", entries);
  gm->tlb_mask = entries - 1;
  return SG_OK;
}

void sg__tlb_fini(sg_gmem *gm) {
  sg__free(gm->tlb);
  gm->tlb = NULL;
}

uint8_t *sg__gm_local_page(sg_gmem *gm, uint64_t word, uint64_t offset) {
  if (sg__w_node(word) != gm->node) return NULL;
  sg_gmem_tier tier = SG_GMEM_LOC_TIER(offset);
  if (tier != SG_GMEM_DRAM && tier != SG_GMEM_PMEM) return NULL;
  const sg__tier *t = &gm->tier[tier];
  uint64_t byte = SG_GMEM_LOC_BYTE(offset);
  if (t->base == NULL || byte >= t->bytes) return NULL;
  return t->base + byte;
}

void sg__tlb_install(sg_gmem *gm, uint16_t owner, uint64_t idx, uint64_t word, uint64_t offset,
                     uint64_t seen) {
  uint64_t key = sg__gm_key(owner, idx);
  sg__tlb_entry *set = sg__tlb_set(gm, key), *e = set;
  /* Refill in place; else the new entry goes first and the older one of
   * the set is evicted (the other moves to the second way). */
  if (set[1].tag == key + 1) {
    e = &set[1];
  } else if (set[0].tag != key + 1) {
    set[1] = set[0];
  }
  e->tag = key + 1;
  e->word = word;
  e->offset = offset;
  e->page = sg__gm_local_page(gm, word, offset);
  e->bucket = sg__gm_bucket(owner, idx);
  e->seen = seen;
}

sg_status sg_gmem_tlb_invalidate(sg_gmem *gm, sg_gva gva) {
  uint64_t idx;
  if (gm == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_gmem_tlb_invalidate: NULL gmem");
  SG_CHECK(sg__gm_check_gva(gm, gva, "sg_gmem_tlb_invalidate", &idx));
  uint64_t key = sg__gm_key(sg_gva_node(gva), idx);
  sg__tlb_entry *set = sg__tlb_set(gm, key);
  for (int w = 0; w < 2; w++)
    if (set[w].tag == key + 1) set[w].tag = 0;
  return SG_OK;
}

sg_status sg_gmem_tlb_flush(sg_gmem *gm) {
  if (gm == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_gmem_tlb_flush: NULL gmem");
  memset(gm->tlb, 0, ((size_t)gm->tlb_mask + 1) * sizeof *gm->tlb);
  return SG_OK;
}
