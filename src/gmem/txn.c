/* The update protocol of an entry (SPEC A2, A4), the only way any entry or
 * coherent page changes:
 *   1. take it: compare-and-swap of the version word from (v, not busy) to
 *      (v, busy) -- this is where concurrent updates are ordered, and where
 *      one naming a version the entry no longer has fails (stale);
 *   2. invalidate: bump the entry's bucket on every node in the table page's
 *      sharer word, each bump complete before the next step, so no node
 *      keeps using a translation or copy of version v past this point;
 *   3. change the offset and/or the coherent page's data;
 *   4. commit: (v + 1, new node id and flags, not busy).
 * Readers never take the entry: they read it under a sequence lock and
 * validate what they used against their bucket (table.c, tlb.c). */
#include "gmem/gmem_internal.h"

sg_status sg__gm_txn_begin(sg_gmem *gm, sg_gva gva, uint64_t expected, const char *what, sg__gm_txn *t,
                           sg__pte *found) {
  uint16_t owner = sg_gva_node(gva);
  uint64_t idx = sg_gva_offset(gva) >> SG__GM_SHIFT, w, old;
  int64_t deadline = sg__gm_deadline(gm);
  t->before = sg__gm_bucket_load(gm, sg__gm_bucket(owner, idx));
  /* A valid translation is the likely current word: compare-and-swap on it
   * directly, and a failed swap returns the real word anyway. That saves a
   * round trip to a remote owner, and another for the offset below. */
  sg__tlb_entry *e = sg__tlb_find(gm, owner, idx);
  bool guess = e != NULL;
  if (guess) w = e->word;
  else SG_CHECK(sg__gm_word_read(gm, owner, idx, &w));
  for (;;) {
    if (w & SG__GM_BUSY) {
      /* Another writer is between its steps 1 and 4; its commit decides
       * whether our expected version still holds. */
      SG_CHECK(sg__gm_spin(gm, deadline, what, gva));
      SG_CHECK(sg__gm_word_read(gm, owner, idx, &w));
      guess = false;
      continue;
    }
    if (expected != SG__GM_ANY_VERSION && sg__w_version(w) != (uint32_t)expected) {
      if (guess) { /* our translation may be older than the entry: ask the owner */
        SG_CHECK(sg__gm_word_read(gm, owner, idx, &w));
        guess = false;
        continue;
      }
      sg__pte now = {w, 0};
      if (found != NULL) {
        SG_CHECK(sg__gm_entry_read(gm, owner, idx, gva, &now));
        *found = now;
      }
      gm->stats.stale++;
      char gb[SG__GVA_BUF];
      return sg__error(SG_GMEM_ERR_STALE, "%s: stale version: GVA %s is at version %u, not %u", what,
                       sg__gva_str(gva, gb), sg__w_version(now.word), (uint32_t)expected);
    }
    SG_CHECK(sg__gm_word_cas(gm, owner, idx, w, w | SG__GM_BUSY, &old));
    if (old == w) break;
    w = old;
    guess = false;
  }
  t->owner = owner;
  t->idx = idx;
  t->word = w;
  t->own_bumps = 0;
  /* A translation of the very version we hold has its offset: no commit
   * happened since it was filled, and none can happen while we hold it. */
  e = sg__tlb_find(gm, owner, idx);
  if (e != NULL && e->word == w) {
    t->offset = e->offset;
    return SG_OK;
  }
  sg_status st = sg__gm_offset_read(gm, owner, idx, &t->offset);
  if (st != SG_OK) sg__gm_txn_abort(gm, t);
  return st;
}

sg_status sg__gm_txn_invalidate(sg_gmem *gm, sg__gm_txn *t) {
  /* Nobody caches an unmapped entry (translation refuses it), so mapping
   * one needs no invalidation. */
  if (!sg__w_mapped(t->word)) return SG_OK;
  uint64_t mask, bits[SG__GM_BUCKETS / 64] = {0};
  SG_CHECK(sg__gm_sharers_read(gm, t->owner, t->idx / SG__GM_TP, &mask));
  sg__bits_set(bits, sg__gm_bucket(t->owner, t->idx), 1, true);
  bool self;
  SG_CHECK(sg__gm_bump(gm, mask, bits, &self));
  t->own_bumps += self;
  return SG_OK;
}

sg_status sg__gm_txn_commit(sg_gmem *gm, sg__gm_txn *t, uint16_t node, uint8_t flags, uint64_t offset,
                            uint64_t *committed) {
  if (offset != t->offset) {
    sg_status st = sg__gm_offset_write(gm, t->owner, t->idx, offset);
    if (st != SG_OK) {
      sg__gm_txn_abort(gm, t);
      return st;
    }
  }
  uint64_t w = sg__w_make(sg__w_version(t->word) + 1, node, flags), old;
  SG_CHECK(sg__gm_word_cas(gm, t->owner, t->idx, t->word | SG__GM_BUSY, w, &old));
  if (old != (t->word | SG__GM_BUSY))
    return sg__error(SG_ERR_INTERNAL, "gmem: entry %llu of node %u changed while this node held it (0x%llx)",
                     (unsigned long long)t->idx, t->owner, (unsigned long long)old);
  gm->stats.commits++;
  if (committed) *committed = w;
  /* Keep translating the entry without a refetch when nobody else bumped our
   * bucket meanwhile -- and only where writers will tell us about the next
   * change, i.e. when we are in the table page's sharer word. */
  uint32_t b = sg__gm_bucket(t->owner, t->idx);
  uint64_t after = sg__gm_bucket_load(gm, b);
  bool told = t->owner == gm->node || sg__bits_test(gm->registered[t->owner], t->idx / SG__GM_TP);
  if (told && sg__w_mapped(w) && after == t->before + t->own_bumps)
    sg__tlb_install(gm, t->owner, t->idx, w, offset, after);
  return SG_OK;
}

void sg__gm_txn_abort(sg_gmem *gm, sg__gm_txn *t) {
  uint64_t old;
  if (sg__gm_word_cas(gm, t->owner, t->idx, t->word | SG__GM_BUSY, t->word, &old) != SG_OK)
    SG_WARN("gmem: could not release entry %llu of node %u after a failure; it stays busy",
            (unsigned long long)t->idx, t->owner);
}

/* Releases the entries taken so far, unchanged. */
static void release_range(sg_gmem *gm, uint64_t first, const uint64_t *saved, uint64_t n) {
  for (uint64_t i = 0; i < n; i++) __atomic_store_n(&gm->table[first + i].word, saved[i], __ATOMIC_RELEASE);
}

sg_status sg__gm_update_range(sg_gmem *gm, uint64_t first, uint64_t n, sg__gm_prepare_fn before_commit,
                              sg__gm_apply_fn apply, void *ctx) {
  uint64_t *saved = sg__malloc((size_t)n * sizeof *saved);
  if (saved == NULL)
    return sg__error(SG_ERR_NO_MEMORY, "gmem: out of memory updating %llu entries", (unsigned long long)n);
  sg_gva gva = sg_gva_make((uint16_t)gm->node, first << SG__GM_SHIFT);
  int64_t deadline = sg__gm_deadline(gm);
  sg_status st = SG_OK;
  uint64_t taken = 0;
  while (taken < n) {
    uint64_t *word = &gm->table[first + taken].word;
    uint64_t w = __atomic_load_n(word, __ATOMIC_ACQUIRE);
    if (!(w & SG__GM_BUSY) &&
        __atomic_compare_exchange_n(word, &w, w | SG__GM_BUSY, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
      saved[taken++] = w;
      continue;
    }
    st = sg__gm_spin(gm, deadline, "gmem", sg_gva_make(gva.hi, (first + taken) << SG__GM_SHIFT));
    if (st != SG_OK) goto release;
  }
  /* One bump per distinct bucket and sharer, however many entries. */
  uint64_t mask = 0, bits[SG__GM_BUCKETS / 64] = {0};
  for (uint64_t i = 0; i < n; i++) {
    if (!sg__w_mapped(saved[i])) continue;
    sg__bits_set(bits, sg__gm_bucket((uint16_t)gm->node, first + i), 1, true);
    mask |= __atomic_load_n(&gm->sharers[(first + i) / SG__GM_TP], __ATOMIC_ACQUIRE);
  }
  bool self;
  if (mask != 0) SG_CHECK_GOTO(sg__gm_bump(gm, mask, bits, &self), st, release);
  if (before_commit != NULL) SG_CHECK_GOTO(before_commit(ctx), st, release);
  for (uint64_t i = 0; i < n; i++) {
    sg__pte *e = &gm->table[first + i];
    uint16_t node = sg__w_node(saved[i]);
    uint8_t flags = sg__w_flags(saved[i]);
    uint64_t offset = e->offset;
    apply(ctx, i, &node, &flags, &offset);
    __atomic_store_n(&e->offset, offset, __ATOMIC_RELEASE);
    __atomic_store_n(&e->word, sg__w_make(sg__w_version(saved[i]) + 1, node, flags), __ATOMIC_RELEASE);
  }
  gm->stats.commits += n;
  sg__free(saved);
  return SG_OK;
release:
  release_range(gm, first, saved, taken);
  sg__free(saved);
  return st;
}
