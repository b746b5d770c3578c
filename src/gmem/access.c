/* Reads and writes by GVA, page by page: a page this node holds is copied
 * in place, another node's page moves by RMA get/put on that node's tier
 * window. COHERENT pages take the versioned path (coherence.c). A read of a
 * non-coherent page is still checked against its bucket afterwards, so a
 * page that migrated under it is read again from its new frame instead of
 * from a freed one. */
#include "gmem/gmem_internal.h"

/* Checks gva and that [gva, gva+bytes) stays inside the node's range. */
static sg_status check_span(sg_gmem *gm, sg_gva gva, const void *buf, size_t bytes, bool one_page,
                            const char *what) {
  char gb[SG__GVA_BUF];
  uint64_t idx;
  if (gm == NULL) return sg__error(SG_ERR_INVALID_ARG, "%s: NULL gmem", what);
  if (buf == NULL && bytes > 0) return sg__error(SG_ERR_INVALID_ARG, "%s: NULL buffer", what);
  SG_CHECK(sg__gm_check_gva(gm, gva, what, &idx));
  uint64_t end = gm->peers[sg_gva_node(gva)].table_pages << SG__GM_SHIFT;
  if (bytes > end - gva.lo)
    return sg__error(SG_ERR_RANGE, "%s: [%s, +%zu) runs past the end of node %u's global range", what,
                     sg__gva_str(gva, gb), bytes, sg_gva_node(gva));
  if (one_page && (gva.lo & (SG__GM_PAGE - 1)) + bytes > SG__GM_PAGE)
    return sg__error(SG_ERR_RANGE,
                     "%s: [%s, +%zu) crosses a page boundary; a versioned access covers one page", what,
                     sg__gva_str(gva, gb), bytes);
  return SG_OK;
}

static sg_status remote_tier(sg_gmem *gm, sg_gmem_tier tier, sg_gva gva, const char *what) {
  char gb[SG__GVA_BUF];
  if (tier == SG_GMEM_VRAM || gm->tier[tier].win == NULL)
    return sg__error(SG_ERR_UNSUPPORTED,
                     "%s: GVA %s is in another node's %s, which is not reachable remotely", what,
                     sg__gva_str(gva, gb), sg__tier_name(tier));
  return SG_OK;
}

/* Moves n bytes of one page between buf and where e says the page lives. */
static sg_status page_io(sg_gmem *gm, const sg__tlb_entry *e, sg_gva gva, void *buf, size_t n, bool write,
                         const char *what) {
  uint64_t in_page = gva.lo & (SG__GM_PAGE - 1);
  sg_gmem_tier tier = SG_GMEM_LOC_TIER(e->offset);
  uint64_t byte = SG_GMEM_LOC_BYTE(e->offset) + in_page;
  uint16_t home = sg__w_node(e->word);
  if (home == gm->node) {
    sg__tier *t;
    SG_CHECK(sg__gm_local_span(gm, gva, e->offset, in_page, n, &t, &byte));
    if (!write) return sg__tier_read(t, byte, buf, n);
    SG_CHECK(sg__tier_write(t, byte, buf, n));
    return sg__tier_persist(t, byte, n);
  }
  SG_CHECK(remote_tier(gm, tier, gva, what));
  sg_comm_window *w = gm->tier[tier].win;
  SG_CHECK(write ? sg_comm_put(w, home, byte, buf, n) : sg_comm_get(w, home, byte, buf, n));
  return sg_comm_window_flush(w);
}

/* One page of a non-coherent read, validated against the bucket. */
static sg_status plain_read(sg_gmem *gm, sg_gva gva, void *dst, size_t n, uint64_t want, uint32_t *version,
                            const char *what) {
  int64_t deadline = sg__gm_deadline(gm);
  for (;;) {
    sg__tlb_entry *e;
    SG_CHECK(sg__gm_lookup(gm, gva, SG_GMEM_READ, what, &e));
    if (sg__w_flags(e->word) & SG_GMEM_COHERENT)
      return sg__gm_coherent_read(gm, gva, e, dst, n, want, version, what);
    uint32_t v = sg__w_version(e->word), b = e->bucket;
    uint64_t seen = e->seen;
    if (want != SG__GM_ANY_VERSION && v != (uint32_t)want) {
      char gb[SG__GVA_BUF];
      gm->stats.stale++;
      return sg__error(SG_GMEM_ERR_STALE, "%s: stale version: GVA %s is at version %u, not %u", what,
                       sg__gva_str(gva, gb), v, (uint32_t)want);
    }
    SG_CHECK(page_io(gm, e, gva, dst, n, false, what));
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (sg__gm_bucket_load(gm, b) == seen) {
      if (version) *version = v;
      return SG_OK;
    }
    SG_CHECK(sg__gm_spin(gm, deadline, what, gva));
  }
}

static size_t page_chunk(sg_gva gva, size_t left) {
  size_t room = (size_t)(SG__GM_PAGE - (gva.lo & (SG__GM_PAGE - 1)));
  return left < room ? left : room;
}

sg_status sg_gmem_read(sg_gmem *gm, sg_gva gva, void *dst, size_t bytes, uint32_t *version) {
  const char *what = "sg_gmem_read";
  SG_CHECK(check_span(gm, gva, dst, bytes, version != NULL, what));
  uint8_t *d = dst;
  for (size_t done = 0; done < bytes;) {
    sg_gva at = sg_gva_make(sg_gva_node(gva), gva.lo + done);
    size_t n = page_chunk(at, bytes - done);
    SG_CHECK(plain_read(gm, at, d + done, n, SG__GM_ANY_VERSION, version, what));
    done += n;
  }
  return SG_OK;
}

sg_status sg_gmem_read_at(sg_gmem *gm, sg_gva gva, void *dst, size_t bytes, uint32_t version) {
  const char *what = "sg_gmem_read_at";
  SG_CHECK(check_span(gm, gva, dst, bytes, true, what));
  return plain_read(gm, gva, dst, bytes, version, NULL, what);
}

/* Consecutive pages of a plain write that land back to back in one remote node's tier go as one put, and
 * every put is completed by one flush per window at the end: a page at a time, each flushed, costs a round
 * trip per 4 KiB (a 32 MB copy took twice as long as a message). */
typedef struct put_run {
  sg_comm_window *win; /* NULL: none pending */
  int home;
  uint64_t byte;
  const uint8_t *src;
  size_t n;
} put_run;

static sg_status put_pending(put_run *r) {
  if (r->win == NULL || r->n == 0) return SG_OK;
  SG_CHECK(sg_comm_put(r->win, r->home, r->byte, r->src, r->n));
  r->n = 0;
  return SG_OK;
}

/* One page of a plain write to another node: joins the pending run or starts one. */
static sg_status put_page(sg_gmem *gm, const sg__tlb_entry *e, sg_gva gva, const uint8_t *src, size_t n,
                          put_run *r, bool *flush, const char *what) {
  sg_gmem_tier tier = SG_GMEM_LOC_TIER(e->offset);
  SG_CHECK(remote_tier(gm, tier, gva, what));
  sg_comm_window *w = gm->tier[tier].win;
  uint64_t byte = SG_GMEM_LOC_BYTE(e->offset) + (gva.lo & (SG__GM_PAGE - 1));
  int home = sg__w_node(e->word);
  flush[tier] = true; /* completed at the end of the write */
  if (r->win == w && r->home == home && r->byte + r->n == byte && r->src + r->n == src) {
    r->n += n;
    return SG_OK;
  }
  SG_CHECK(put_pending(r));
  *r = (put_run){w, home, byte, src, n};
  return SG_OK;
}

static sg_status write_pages(sg_gmem *gm, sg_gva gva, const uint8_t *s, size_t bytes, uint32_t *version,
                             put_run *r, bool *flush, const char *what) {
  for (size_t done = 0; done < bytes;) {
    sg_gva at = sg_gva_make(sg_gva_node(gva), gva.lo + done);
    size_t n = page_chunk(at, bytes - done);
    sg__tlb_entry *e;
    SG_CHECK(sg__gm_lookup(gm, at, SG_GMEM_WRITE, what, &e));
    if (sg__w_flags(e->word) & SG_GMEM_COHERENT) {
      SG_CHECK(sg__gm_coherent_write(gm, at, s + done, n, SG__GM_ANY_VERSION, version, what));
    } else if (sg__w_node(e->word) != gm->node) {
      SG_CHECK(put_page(gm, e, at, s + done, n, r, flush, what));
      if (version) *version = sg__w_version(e->word);
    } else {
      SG_CHECK(page_io(gm, e, at, (void *)(uintptr_t)(s + done), n, true, what));
      if (version) *version = sg__w_version(e->word);
    }
    done += n;
  }
  return put_pending(r);
}

sg_status sg_gmem_write(sg_gmem *gm, sg_gva gva, const void *src, size_t bytes, uint32_t *version) {
  const char *what = "sg_gmem_write";
  SG_CHECK(check_span(gm, gva, src, bytes, version != NULL, what));
  put_run r = {0};
  bool flush[SG__GM_TIERS] = {false};
  sg_status st = write_pages(gm, gva, src, bytes, version, &r, flush, what);
  /* Every put issued completes before the write returns, also when a later page failed. */
  for (int t = 0; t < SG__GM_TIERS; t++) {
    if (!flush[t]) continue;
    sg_status fs = sg_comm_window_flush(gm->tier[t].win);
    if (st == SG_OK) st = fs;
  }
  return st;
}

sg_status sg_gmem_write_if(sg_gmem *gm, sg_gva gva, const void *src, size_t bytes, uint32_t expected,
                           uint32_t *version) {
  const char *what = "sg_gmem_write_if";
  SG_CHECK(check_span(gm, gva, src, bytes, true, what));
  sg__tlb_entry *e;
  SG_CHECK(sg__gm_lookup(gm, gva, SG_GMEM_WRITE, what, &e));
  if (!(sg__w_flags(e->word) & SG_GMEM_COHERENT)) {
    char gb[SG__GVA_BUF];
    return sg__error(SG_ERR_INVALID_ARG,
                     "%s: GVA %s is not COHERENT; only coherent pages have versioned writes", what,
                     sg__gva_str(gva, gb));
  }
  return sg__gm_coherent_write(gm, gva, src, bytes, expected, version, what);
}
