/* Page-table words (SPEC A2), wherever they live: this node's shard is read
 * and swapped with the CPU's atomics; another node's through its meta window
 * with UCX atomics (a read is a fetch-add of 0, which is atomic where a get
 * of 8 bytes need not be), puts and gets. The same operations on the same
 * words from both sides are coherent because UCX's shared-memory and TCP
 * transports perform remote atomics on the target's CPU (src/comm/comm.c). */
#include "gmem/gmem_internal.h"

static uint64_t entry_off(uint64_t idx) { return idx * sizeof(sg__pte); }

sg_status sg__gm_word_read(sg_gmem *gm, uint16_t owner, uint64_t idx, uint64_t *word) {
  if (owner == gm->node) {
    *word = __atomic_load_n(&gm->table[idx].word, __ATOMIC_ACQUIRE);
    return SG_OK;
  }
  return sg_comm_fetch_add(gm->meta_win, owner, entry_off(idx), 0, word);
}

sg_status sg__gm_word_cas(sg_gmem *gm, uint16_t owner, uint64_t idx, uint64_t cmp, uint64_t swap,
                          uint64_t *old) {
  if (owner == gm->node) {
    uint64_t prev = cmp;
    __atomic_compare_exchange_n(&gm->table[idx].word, &prev, swap, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    *old = prev;
    return SG_OK;
  }
  return sg_comm_compare_swap(gm->meta_win, owner, entry_off(idx), cmp, swap, old);
}

sg_status sg__gm_offset_write(sg_gmem *gm, uint16_t owner, uint64_t idx, uint64_t offset) {
  if (owner == gm->node) {
    __atomic_store_n(&gm->table[idx].offset, offset, __ATOMIC_RELEASE);
    return SG_OK;
  }
  SG_CHECK(sg_comm_put(gm->meta_win, owner, entry_off(idx) + 8, &offset, 8));
  /* Complete before the commit that publishes it, and before `offset` dies. */
  return sg_comm_window_flush(gm->meta_win);
}

sg_status sg__gm_offset_read(sg_gmem *gm, uint16_t owner, uint64_t idx, uint64_t *offset) {
  if (owner == gm->node) {
    *offset = __atomic_load_n(&gm->table[idx].offset, __ATOMIC_ACQUIRE);
    return SG_OK;
  }
  SG_CHECK(sg_comm_get(gm->meta_win, owner, entry_off(idx) + 8, offset, 8));
  return sg_comm_window_flush(gm->meta_win);
}

/* A sequence-lock read: the word, then the offset, then the word again; equal
 * and not busy means no writer touched the entry in between, because every
 * writer sets the busy bit before it changes the offset and commits a new
 * version after. Each step completes before the next starts. */
sg_status sg__gm_entry_read(sg_gmem *gm, uint16_t owner, uint64_t idx, sg_gva gva, sg__pte *out) {
  int64_t deadline = sg__gm_deadline(gm);
  for (;;) {
    uint64_t w1, w2, off;
    SG_CHECK(sg__gm_word_read(gm, owner, idx, &w1));
    if (!(w1 & SG__GM_BUSY)) {
      SG_CHECK(sg__gm_offset_read(gm, owner, idx, &off));
      __atomic_thread_fence(__ATOMIC_ACQUIRE);
      SG_CHECK(sg__gm_word_read(gm, owner, idx, &w2));
      if (w1 == w2) {
        out->word = w1;
        out->offset = off;
        return SG_OK;
      }
    }
    SG_CHECK(sg__gm_spin(gm, deadline, "gmem", gva));
  }
}

sg_status sg__gm_table_page_fetch(sg_gmem *gm, uint16_t owner, uint64_t idx, uint64_t *first, uint32_t *count,
                                  const sg__pte **entries, uint8_t *ok) {
  uint64_t f = idx / SG__GM_TP * SG__GM_TP, pages = gm->peers[owner].table_pages;
  uint32_t n = (uint32_t)(pages - f < SG__GM_TP ? pages - f : SG__GM_TP);
  size_t bytes = (size_t)n * sizeof(sg__pte);
  /* Three whole-page gets, each complete before the next: words from the
   * first and third, offsets from the second (the sequence lock of
   * sg__gm_entry_read for 256 entries at once). */
  for (int i = 0; i < 3; i++) {
    SG_CHECK(sg_comm_get(gm->meta_win, owner, entry_off(f), gm->fetch[i], bytes));
    SG_CHECK(sg_comm_window_flush(gm->meta_win));
  }
  sg__pte *merged = gm->fetch[1];
  for (uint32_t i = 0; i < n; i++) {
    uint64_t w = gm->fetch[0][i].word;
    ok[i] = w == gm->fetch[2][i].word && !(w & SG__GM_BUSY);
    merged[i].word = w;
  }
  gm->stats.remote_table_fetches++;
  *first = f;
  *count = n;
  *entries = merged;
  return SG_OK;
}

static uint64_t sharer_bit(int node) { return 1ull << (node % 64); }

sg_status sg__gm_sharers_read(sg_gmem *gm, uint16_t owner, uint64_t tp, uint64_t *mask) {
  if (owner == gm->node) {
    *mask = __atomic_load_n(&gm->sharers[tp], __ATOMIC_ACQUIRE);
    return SG_OK;
  }
  return sg_comm_fetch_add(gm->meta_win, owner, sg__gm_sharers_off(gm->peers[owner].table_pages) + tp * 8, 0,
                           mask);
}

sg_status sg__gm_register(sg_gmem *gm, uint16_t owner, uint64_t idx) {
  uint64_t tp = idx / SG__GM_TP;
  uint64_t *mine = gm->registered[owner];
  if (sg__bits_test(mine, tp)) return SG_OK;
  uint64_t bit = sharer_bit(gm->node);
  if (owner == gm->node) {
    __atomic_fetch_or(&gm->sharers[tp], bit, __ATOMIC_SEQ_CST);
  } else {
    /* Bits are only ever added, so the loop ends once ours is in. */
    uint64_t off = sg__gm_sharers_off(gm->peers[owner].table_pages) + tp * 8, cur, old;
    SG_CHECK(sg_comm_fetch_add(gm->meta_win, owner, off, 0, &cur));
    while (!(cur & bit)) {
      SG_CHECK(sg_comm_compare_swap(gm->meta_win, owner, off, cur, cur | bit, &old));
      if (old == cur) break;
      cur = old;
    }
  }
  sg__bits_set(mine, tp, 1, true);
  return SG_OK;
}

sg_status sg__gm_bump(sg_gmem *gm, uint64_t mask, const uint64_t *bucket_bits, bool *self) {
  *self = false;
  uint32_t list[SG__GM_BUCKETS], nb = 0;
  for (uint32_t w = 0; w < SG__GM_BUCKETS / 64; w++)
    for (uint64_t bits = bucket_bits[w]; bits != 0; bits &= bits - 1)
      list[nb++] = w * 64 + (uint32_t)__builtin_ctzll(bits);
  for (int n = 0; n < gm->nodes; n++) {
    if (!(mask & sharer_bit(n))) continue;
    uint64_t base = sg__gm_buckets_off(gm->peers[n].table_pages);
    for (uint32_t i = 0; i < nb; i++) {
      if (n == gm->node) {
        __atomic_fetch_add(&gm->buckets[list[i]], 1, __ATOMIC_SEQ_CST);
        *self = true;
      } else {
        /* Blocking: the bump is done at the sharer when this returns, which
         * is what lets the writer go on to change the data. */
        SG_CHECK(sg_comm_fetch_add(gm->meta_win, n, base + list[i] * 8ull, 1, NULL));
        gm->stats.invalidations_sent++;
      }
    }
  }
  return SG_OK;
}
