/* ZeRO-style sharding at the page-table level (SPEC A5): a logical buffer cut
 * into one contiguous piece per node, each piece allocated by its owner in
 * its own GVA range, so ownership by rank is simply whose table shard holds
 * the entries. These are the primitives a ZeRO training loop (src/parallel) uses:
 * where a byte lives, this node's piece as a pointer for its optimizer step,
 * and reads/writes of any range that go to the owners. */
#include <string.h>

#include "gmem/gmem_internal.h"

struct sg_gmem_shard {
  sg_gmem *gm;
  size_t bytes, chunk;
  sg_gva *piece; /* per node; meaningful when size_of(n) > 0 */
};

static size_t piece_begin(const sg_gmem_shard *sh, int n) {
  uint64_t b = (uint64_t)sh->chunk * (uint64_t)n;
  return b < sh->bytes ? (size_t)b : sh->bytes;
}
static size_t piece_bytes(const sg_gmem_shard *sh, int n) {
  size_t b = piece_begin(sh, n), left = sh->bytes - b;
  return left < sh->chunk ? left : sh->chunk;
}

/* Every node's piece GVA, and whether every node got one. */
static sg_status exchange(sg_gmem_shard *sh, sg_status local, sg_gva mine) {
  sg_gmem *gm = sh->gm;
  enum { W = 5 };
  uint64_t rec[W] = {(uint64_t)(int64_t)local, mine.hi, mine.lo, sh->bytes, sh->chunk};
  uint64_t *all;
  sg_status st = sg__gmem_gather(gm, rec, W, local, "sg_gmem_shard_create", &all);
  if (all == NULL) return st;
  for (int n = 0; n < gm->nodes && st == SG_OK; n++) {
    const uint64_t *r = all + W * (size_t)n;
    sg_gva g = {r[1], r[2]};
    if (r[0] != 0) {
      st = sg__error(SG_ERR_COMM, "sg_gmem_shard_create: node %d could not allocate its piece (%s)", n,
                     sg_status_str((sg_status)(int64_t)r[0]));
    } else if (r[3] != sh->bytes || r[4] != sh->chunk) {
      st = sg__error(
          SG_ERR_INVALID_ARG,
          "sg_gmem_shard_create: node %d asked for %llu bytes in pieces of %llu, this node for %zu in %zu "
          "(every node must pass the same bytes and align)",
          n, (unsigned long long)r[3], (unsigned long long)r[4], sh->bytes, sh->chunk);
    } else if (piece_bytes(sh, n) > 0 && (g.hi != (uint64_t)n || g.lo % SG__GM_PAGE != 0 ||
                                          (g.lo >> SG__GM_SHIFT) >= gm->peers[n].table_pages)) {
      /* A peer's answer is input (SPEC S1): its piece must be in its own range. */
      st = sg__error(SG_ERR_FORMAT,
                     "sg_gmem_shard_create: node %d announced a piece at 0x%llx:0x%llx outside its range", n,
                     (unsigned long long)g.hi, (unsigned long long)g.lo);
    } else {
      sh->piece[n] = g;
    }
  }
  sg__free(all);
  return st;
}

sg_status sg_gmem_shard_create(sg_gmem *gm, sg_gmem_tier tier, size_t bytes, size_t align, unsigned flags,
                               sg_gmem_shard **out) {
  const char *what = "sg_gmem_shard_create";
  if (gm == NULL || out == NULL) return sg__error(SG_ERR_INVALID_ARG, "%s: NULL gmem or out", what);
  *out = NULL;
  if (align == 0) align = 64;
  sg_status local = SG_OK;
  if (bytes == 0) local = sg__error(SG_ERR_INVALID_ARG, "%s: zero bytes", what);
  else if ((align & (align - 1)) != 0 || align > SG__GM_PAGE)
    local = sg__error(SG_ERR_INVALID_ARG, "%s: align %zu is not a power of two up to %u", what, align,
                      SG_GMEM_PAGE_SIZE);
  sg_gmem_shard *sh = sg__calloc(1, sizeof *sh);
  if (sh == NULL) return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", what);
  sh->gm = gm;
  sh->bytes = bytes;
  sh->piece = sg__calloc((size_t)gm->nodes, sizeof *sh->piece);
  if (sh->piece == NULL) {
    sg__free(sh);
    return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", what);
  }
  size_t per = bytes / (size_t)gm->nodes + (bytes % (size_t)gm->nodes != 0);
  sh->chunk = (per + align - 1) / align * align;
  sg_gva mine = {0, 0};
  size_t my_bytes = local == SG_OK ? piece_bytes(sh, gm->node) : 0;
  if (my_bytes > 0) local = sg_gmem_alloc(gm, tier, my_bytes, flags, &mine);
  sg_status st = exchange(sh, local, mine);
  if (st != SG_OK) {
    if (local == SG_OK && my_bytes > 0) sg_gmem_free(gm, mine);
    sg__free(sh->piece);
    sg__free(sh);
    return st;
  }
  *out = sh;
  return SG_OK;
}

sg_status sg_gmem_shard_destroy(sg_gmem_shard *sh) {
  if (sh == NULL) return SG_OK;
  sg_gmem *gm = sh->gm;
  /* Nobody may still read our piece when it is freed. */
  sg_status st = gm->comm ? sg_comm_barrier(gm->comm) : SG_OK;
  if (piece_bytes(sh, gm->node) > 0) {
    sg_status s2 = sg_gmem_free(gm, sh->piece[gm->node]);
    if (st == SG_OK) st = s2;
  }
  sg__free(sh->piece);
  sg__free(sh);
  return st;
}

sg_status sg_gmem_shard_locate(const sg_gmem_shard *sh, size_t offset, int *node, sg_gva *gva,
                               size_t *contiguous) {
  if (sh == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_gmem_shard_locate: NULL shard");
  if (offset >= sh->bytes)
    return sg__error(SG_ERR_RANGE, "sg_gmem_shard_locate: byte %zu is beyond the %zu-byte buffer", offset,
                     sh->bytes);
  int n = (int)(offset / sh->chunk);
  size_t in = offset - piece_begin(sh, n);
  if (node) *node = n;
  if (gva) *gva = sg_gva_make((uint16_t)n, sh->piece[n].lo + in);
  if (contiguous) *contiguous = piece_bytes(sh, n) - in;
  return SG_OK;
}

sg_status sg_gmem_shard_local(const sg_gmem_shard *sh, void **ptr, size_t *begin, size_t *bytes) {
  if (sh == NULL || ptr == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg_gmem_shard_local: NULL shard or ptr");
  int me = sh->gm->node;
  size_t len = piece_bytes(sh, me);
  *ptr = NULL;
  if (begin) *begin = piece_begin(sh, me);
  if (bytes) *bytes = len;
  if (len == 0) return SG_OK;
  return sg_gmem_ptr(sh->gm, sh->piece[me], len, 0, ptr);
}

static sg_status span(sg_gmem_shard *sh, size_t offset, void *buf, size_t bytes, bool write) {
  const char *what = write ? "sg_gmem_shard_write" : "sg_gmem_shard_read";
  if (sh == NULL || (buf == NULL && bytes > 0))
    return sg__error(SG_ERR_INVALID_ARG, "%s: NULL argument", what);
  if (offset > sh->bytes || bytes > sh->bytes - offset)
    return sg__error(SG_ERR_RANGE, "%s: [%zu, +%zu) is outside the %zu-byte buffer", what, offset, bytes,
                     sh->bytes);
  uint8_t *p = buf;
  for (size_t done = 0; done < bytes;) {
    sg_gva g;
    size_t run = 0;
    SG_CHECK(sg_gmem_shard_locate(sh, offset + done, NULL, &g, &run));
    size_t n = run < bytes - done ? run : bytes - done;
    SG_CHECK(write ? sg_gmem_write(sh->gm, g, p + done, n, NULL)
                   : sg_gmem_read(sh->gm, g, p + done, n, NULL));
    done += n;
  }
  return SG_OK;
}

sg_status sg_gmem_shard_read(sg_gmem_shard *sh, size_t offset, void *dst, size_t bytes) {
  return span(sh, offset, dst, bytes, false);
}

sg_status sg_gmem_shard_write(sg_gmem_shard *sh, size_t offset, const void *src, size_t bytes) {
  return span(sh, offset, (void *)(uintptr_t)src, bytes, true);
}
