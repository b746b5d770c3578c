/* COHERENT pages (SPEC A4). Write-invalidate, write-through to the page's
 * frame, versioned:
 *   - a write takes the entry (busy), bumps the entry's bucket on every node
 *     that may hold a translation or copy, writes the frame, and commits
 *     version + 1 (txn.c); so a copy is invalidated before the write commits;
 *   - a read uses this node's copy of a remote page (the lines already
 *     fetched, A3 level 3: one valid bit per 64-byte line) or fetches the
 *     missing lines, and accepts the bytes only if its bucket did not move
 *     while it read: then no write started in between and the bytes are
 *     exactly version v's. A moved bucket means translate and read again; a
 *     caller that insisted on version v (sg_gmem_read_at) is told it is stale.
 * Per-node states (MESI-like): Modified - this node committed the current
 * version and holds it (reads are one-sided RMA, so a reader never demotes
 * the writer: Modified means "last writer, still current"); Exclusive - this
 * node holds the frame and no other node translates anything in its table
 * page; Shared - a valid copy, or the frame while others may copy it;
 * Invalid - no valid copy here. */
#include <string.h>

#include "gmem/gmem_internal.h"

sg_status sg__copy_init(sg_gmem *gm, uint32_t pages) {
  gm->copies = sg__calloc(pages, sizeof *gm->copies);
  gm->copy_data = sg__calloc(pages, SG__GM_PAGE);
  if (gm->copies == NULL || gm->copy_data == NULL)
    return sg__error(SG_ERR_NO_MEMORY, "sg_gmem_create: out of memory for %u coherent page copies", pages);
  for (uint32_t i = 0; i < pages; i++) gm->copies[i].data = gm->copy_data + (size_t)i * SG__GM_PAGE;
  gm->copy_mask = pages - 1;
  return SG_OK;
}

void sg__copy_fini(sg_gmem *gm) {
  sg__free(gm->copies);
  sg__free(gm->copy_data);
  gm->copies = NULL;
  gm->copy_data = NULL;
}

static sg__copy *copy_slot(sg_gmem *gm, uint64_t key) { return &gm->copies[sg__gm_slot(key, gm->copy_mask)]; }

/* Valid bits of the lines [in_page, in_page + n) touches. */
static uint64_t lines_touched(uint64_t in_page, size_t n) {
  uint64_t a = in_page / SG_GMEM_LINE_SIZE, b = (in_page + n + SG_GMEM_LINE_SIZE - 1) / SG_GMEM_LINE_SIZE;
  return (b - a == 64 ? UINT64_MAX : ((1ull << (b - a)) - 1)) << a;
}
/* Lines wholly inside [in_page, in_page + n). */
static uint64_t lines_covered(uint64_t in_page, size_t n) {
  uint64_t a = (in_page + SG_GMEM_LINE_SIZE - 1) / SG_GMEM_LINE_SIZE, b = (in_page + n) / SG_GMEM_LINE_SIZE;
  if (b <= a) return 0;
  return (b - a == 64 ? UINT64_MAX : ((1ull << (b - a)) - 1)) << a;
}

/* Gets the lines of `missing` from the home frame into the copy, one RMA get
 * per run of consecutive lines. */
static sg_status fetch_lines(sg_gmem *gm, const sg__tlb_entry *e, sg__copy *c, uint64_t missing, sg_gva gva,
                             const char *what) {
  sg_gmem_tier tier = SG_GMEM_LOC_TIER(e->offset);
  if (tier == SG_GMEM_VRAM || gm->tier[tier].win == NULL) {
    char gb[SG__GVA_BUF];
    return sg__error(SG_ERR_UNSUPPORTED,
                     "%s: GVA %s is in another node's %s, which is not reachable remotely", what,
                     sg__gva_str(gva, gb), sg__tier_name(tier));
  }
  uint64_t frame = SG_GMEM_LOC_BYTE(e->offset);
  for (unsigned l = 0; l < SG__GM_LINES;) {
    if (!(missing >> l & 1)) {
      l++;
      continue;
    }
    unsigned r = l;
    while (r < SG__GM_LINES && (missing >> r & 1)) r++;
    SG_CHECK(sg_comm_get(gm->tier[tier].win, sg__w_node(e->word), frame + l * SG_GMEM_LINE_SIZE,
                         c->data + l * SG_GMEM_LINE_SIZE, (size_t)(r - l) * SG_GMEM_LINE_SIZE));
    l = r;
  }
  return sg_comm_window_flush(gm->tier[tier].win);
}

sg_status sg__gm_coherent_read(sg_gmem *gm, sg_gva gva, sg__tlb_entry *e, void *dst, size_t n, uint64_t want,
                               uint32_t *version, const char *what) {
  char gb[SG__GVA_BUF];
  int64_t deadline = sg__gm_deadline(gm);
  uint16_t owner = sg_gva_node(gva);
  uint64_t idx = gva.lo >> SG__GM_SHIFT, in_page = gva.lo & (SG__GM_PAGE - 1), key = sg__gm_key(owner, idx);
  for (;;) {
    if (e == NULL) SG_CHECK(sg__gm_lookup(gm, gva, SG_GMEM_READ, what, &e));
    uint32_t v = sg__w_version(e->word), b = e->bucket;
    uint64_t seen = e->seen;
    if (want != SG__GM_ANY_VERSION && v != (uint32_t)want) {
      gm->stats.stale++;
      return sg__error(SG_GMEM_ERR_STALE, "%s: stale version: GVA %s is at version %u, not %u", what,
                       sg__gva_str(gva, gb), v, (uint32_t)want);
    }
    sg__copy *c = NULL;
    uint64_t missing = 0;
    if (sg__w_node(e->word) == gm->node) {
      sg__tier *t;
      uint64_t byte;
      SG_CHECK(sg__gm_local_span(gm, gva, e->offset, in_page, n, &t, &byte));
      SG_CHECK(sg__tier_read(t, byte, dst, n));
    } else {
      c = copy_slot(gm, key);
      if (c->key != key || c->seen != seen || c->version != v) {
        *c = (sg__copy){key, v, b, seen, 0, SG_GMEM_SHARED, sg__w_node(e->word), c->data};
      }
      missing = lines_touched(in_page, n) & ~c->valid;
      if (missing) {
        SG_CHECK(fetch_lines(gm, e, c, missing, gva, what));
        gm->stats.copy_fills++;
      } else {
        gm->stats.copy_hits++;
      }
      memcpy(dst, c->data + in_page, n);
    }
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (sg__gm_bucket_load(gm, b) == seen) {
      if (c != NULL) c->valid |= missing;
      if (version) *version = v;
      return SG_OK;
    }
    /* A write began while we read: our bytes may mix two versions. */
    if (c != NULL) c->key = 0;
    e = NULL;
    if (want != SG__GM_ANY_VERSION) {
      /* The caller wants v and v is going away (or gone): stale, unless
       * the entry turns out unchanged (a neighbour in the same bucket). */
      SG_CHECK(sg__gm_lookup(gm, gva, SG_GMEM_READ, what, &e));
      if (sg__w_version(e->word) != (uint32_t)want) continue; /* reported stale at the top */
    }
    SG_CHECK(sg__gm_spin(gm, deadline, what, gva));
  }
}

/* After our own commit: our copy and translation stay good for the new
 * version when the only bump of our bucket since was our own. */
static void refresh_after_write(sg_gmem *gm, const sg__gm_txn *t, uint64_t committed, const void *src,
                                uint64_t in_page, size_t n) {
  uint32_t b = sg__gm_bucket(t->owner, t->idx);
  uint64_t before = t->before, after = sg__gm_bucket_load(gm, b), key = sg__gm_key(t->owner, t->idx);
  sg__copy *c = copy_slot(gm, key);
  if (after != before + t->own_bumps) {
    if (c->key == key) c->key = 0;
    return;
  }
  bool kept = c->key == key && c->seen == before && c->version == sg__w_version(t->word);
  uint64_t valid = kept ? c->valid : 0;
  *c = (sg__copy){key, sg__w_version(committed), b, after, 0, SG_GMEM_MODIFIED, sg__w_node(t->word), c->data};
  if (sg__w_node(t->word) != gm->node) {
    memcpy(c->data + in_page, src, n);
    c->valid = valid | lines_covered(in_page, n);
  }
}

sg_status sg__gm_coherent_write(sg_gmem *gm, sg_gva gva, const void *src, size_t n, uint64_t expected,
                                uint32_t *version, const char *what) {
  sg__gm_txn t;
  sg__pte found = {0, 0};
  sg_status st = sg__gm_txn_begin(gm, gva, expected, what, &t, &found);
  if (st != SG_OK) {
    if (st == SG_GMEM_ERR_STALE && version) *version = sg__w_version(found.word);
    return st;
  }
  uint64_t in_page = gva.lo & (SG__GM_PAGE - 1);
  /* The entry as taken is authoritative (the TLB's copy may be older). */
  st = sg__gm_check_access(gva, t.word, SG_GMEM_WRITE, what);
  if (st == SG_OK) st = sg__gm_txn_invalidate(gm, &t);
  if (st == SG_OK) {
    sg_gmem_tier tier = SG_GMEM_LOC_TIER(t.offset);
    uint64_t byte = SG_GMEM_LOC_BYTE(t.offset) + in_page;
    uint16_t home = sg__w_node(t.word);
    if (home == gm->node) {
      sg__tier *lt;
      st = sg__gm_local_span(gm, gva, t.offset, in_page, n, &lt, &byte);
      if (st == SG_OK) st = sg__tier_write(lt, byte, src, n);
      if (st == SG_OK) st = sg__tier_persist(lt, byte, n);
    } else if (tier == SG_GMEM_VRAM || gm->tier[tier].win == NULL) {
      char gb[SG__GVA_BUF];
      st =
          sg__error(SG_ERR_UNSUPPORTED, "%s: GVA %s is in another node's %s, which is not reachable remotely",
                    what, sg__gva_str(gva, gb), sg__tier_name(tier));
    } else {
      st = sg_comm_put(gm->tier[tier].win, home, byte, src, n);
      /* The data must be in place before the commit publishes it. */
      if (st == SG_OK) st = sg_comm_window_flush(gm->tier[tier].win);
    }
  }
  if (st != SG_OK) {
    sg__gm_txn_abort(gm, &t);
    return st;
  }
  uint64_t w;
  SG_CHECK(sg__gm_txn_commit(gm, &t, sg__w_node(t.word), sg__w_flags(t.word), t.offset, &w));
  refresh_after_write(gm, &t, w, src, in_page, n);
  if (version) *version = sg__w_version(w);
  return SG_OK;
}

sg_status sg_gmem_coherence_state(sg_gmem *gm, sg_gva gva, sg_gmem_mesi *state, uint32_t *version) {
  const char *what = "sg_gmem_coherence_state";
  char gb[SG__GVA_BUF];
  if (gm == NULL || state == NULL) return sg__error(SG_ERR_INVALID_ARG, "%s: NULL gmem or state", what);
  uint64_t idx;
  SG_CHECK(sg__gm_check_gva(gm, gva, what, &idx));
  uint16_t owner = sg_gva_node(gva);
  uint64_t key = sg__gm_key(owner, idx), word;
  /* A live record of this node's own copy or write decides first. */
  const sg__copy *c = copy_slot(gm, key);
  bool copy_ok = c->key == key && sg__gm_bucket_load(gm, c->bucket) == c->seen;
  if (copy_ok && (c->mesi == SG_GMEM_MODIFIED || (c->home != gm->node && c->valid != 0))) {
    *state = (sg_gmem_mesi)c->mesi;
    if (version) *version = c->version;
    return SG_OK;
  }
  sg__tlb_entry *e = sg__tlb_find(gm, owner, idx);
  if (e != NULL) {
    word = e->word;
  } else if (owner == gm->node) {
    sg__pte p;
    SG_CHECK(sg__gm_entry_read(gm, owner, idx, gva, &p));
    word = p.word;
  } else {
    /* Nothing valid here, and looking would fetch: Invalid. */
    *state = SG_GMEM_INVALID;
    if (version) *version = 0;
    return SG_OK;
  }
  SG_CHECK(sg__gm_check_access(gva, word, 0, what));
  if (!(sg__w_flags(word) & SG_GMEM_COHERENT))
    return sg__error(SG_ERR_INVALID_ARG, "%s: GVA %s is not COHERENT", what, sg__gva_str(gva, gb));
  if (version) *version = sg__w_version(word);
  if (sg__w_node(word) == gm->node) {
    /* The frame is here: never Invalid; Exclusive while no other node
     * translates anything in its table page. */
    uint64_t mask;
    SG_CHECK(sg__gm_sharers_read(gm, owner, idx / SG__GM_TP, &mask));
    *state = (mask & ~(1ull << (gm->node % 64))) == 0 ? SG_GMEM_EXCLUSIVE : SG_GMEM_SHARED;
  } else {
    *state = SG_GMEM_INVALID;
  }
  return SG_OK;
}
