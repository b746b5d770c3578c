/* Internal state of the global memory mapping (src/gmem, include/sgrt/gmem.h,
 * docs/gmem.md). One sg_gmem per process; its files:
 *   gva.c        GVA text form (A1)
 *   bitmap.c     runs of free pages / frames
 *   tier.c       DRAM tier, frame index (A3 level 2), tier dispatch
 *   tier_pmem.c  PMEM tier through libpmem
 *   tier_vram.c  VRAM tier through the CUDA backend
 *   gmem.c       create / destroy, the exchanged sizes, progress, stats
 *   table.c      entry words: local and remote reads, CAS, sharers, buckets (A2)
 *   txn.c        the update protocol: busy bit, invalidation, commit (A2, A4)
 *   tlb.c        the software TLB
 *   translate.c  translation and its errors
 *   pte.c        sg_gmem_pte_read / sg_gmem_pte_cas
 *   alloc.c      allocation, free, local pointers, persist
 *   migrate.c    tier migration
 *   access.c     reads and writes of non-coherent pages, dispatch
 *   coherence.c  coherent pages: copies with per-line valid bits (A3 level 3), MESI-like states (A4)
 *   replica.c    table pages pushed to a neighbour's replica (A2 put, A5)
 *   shard.c      ZeRO-style sharding (A5)
 * gmem/gmem.h is what the layers above use besides the public API (the
 * optimizer state offload that binds a session to tier memory lives above,
 * in src/parallel/offload.c). */
#ifndef SG_GMEM_INTERNAL_H
#define SG_GMEM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "gmem/gmem.h"
#include "sgrt/gmem.h"

#define SG__GM_PAGE ((uint64_t)SG_GMEM_PAGE_SIZE)
#define SG__GM_SHIFT 12
#define SG__GM_LINES (SG_GMEM_PAGE_SIZE / SG_GMEM_LINE_SIZE) /* 64: one u64 of valid bits per page */
#define SG__GM_TP 256u                                       /* entries per table page (4 KiB) */
#define SG__GM_BUCKETS 1024u                                 /* invalidation counters per node */
#define SG__GM_BUSY (1ull << 63)
#define SG__GM_MAX_TABLE_PAGES (1ull << 28) /* 1 TiB of GVAs, a 4 GiB table */
#define SG__GM_TIERS 3
#define SG__GM_ANY_VERSION UINT64_MAX

/* One page-table entry as stored (SPEC A2, bit layout in gmem.h). */
typedef struct sg__pte {
  uint64_t word;   /* version | node_id << 32 | flags << 48 | busy << 63 */
  uint64_t offset; /* SG_GMEM_LOC(tier, device, byte) */
} sg__pte;

static inline uint32_t sg__w_version(uint64_t w) { return (uint32_t)w; }
static inline uint16_t sg__w_node(uint64_t w) { return (uint16_t)(w >> 32); }
static inline uint8_t sg__w_flags(uint64_t w) { return (uint8_t)(w >> 48); }
static inline uint64_t sg__w_make(uint32_t version, uint16_t node, uint8_t flags) {
  return (uint64_t)version | (uint64_t)node << 32 | (uint64_t)flags << 48;
}
static inline bool sg__w_mapped(uint64_t w) { return sg__w_node(w) != SG_GMEM_NODE_NONE; }

/* Invalidation bucket of an entry: writers bump it on every sharer before
 * they commit; a translation or copy remembers its value when filled. */
static inline uint32_t sg__gm_bucket(uint16_t owner, uint64_t idx) {
  uint64_t x = ((uint64_t)owner << 48 ^ idx) * 0x9E3779B97F4A7C15ull;
  return (uint32_t)(x >> 54); /* 10 bits: SG__GM_BUCKETS */
}

/* What every node tells the others at create (exchanged as 8 u64). */
typedef struct sg__gm_peer {
  uint64_t table_pages;
  uint64_t tier_bytes[SG__GM_TIERS];
} sg__gm_peer;

/* Byte offsets inside a node's meta window: table, sharer words (one per
 * table page), invalidation buckets. */
static inline uint64_t sg__gm_n_tp(uint64_t table_pages) { return (table_pages + SG__GM_TP - 1) / SG__GM_TP; }
static inline uint64_t sg__gm_sharers_off(uint64_t table_pages) { return table_pages * sizeof(sg__pte); }
static inline uint64_t sg__gm_buckets_off(uint64_t table_pages) {
  return sg__gm_sharers_off(table_pages) + sg__gm_n_tp(table_pages) * 8;
}
static inline uint64_t sg__gm_meta_bytes(uint64_t table_pages) {
  return sg__gm_buckets_off(table_pages) + SG__GM_BUCKETS * 8ull;
}

/* A memory tier of this node (SPEC A3). Level 2 of the index: frame i is
 * bytes [i*4096, (i+1)*4096) of the tier, in use when bit i of `used` is set. */
typedef struct sg__tier {
  sg_gmem_tier kind;
  size_t bytes; /* whole frames; 0: this node has no such tier */
  uint64_t frames;
  uint8_t *base;       /* host address (DRAM, PMEM); NULL for VRAM */
  void *raw;           /* DRAM without a communicator: the allocation base points into (else the window's) */
  uint64_t *used;      /* bitmap of frames */
  sg_comm_window *win; /* remote access; NULL without comm and for VRAM */
  void *win_dummy;     /* window memory where this node lacks a tier others have */
  /* PMEM (tier_pmem.c) */
  int is_pmem;   /* real persistent memory: pmem_persist, else msync */
  size_t mapped; /* length of the mapping */
  /* VRAM (tier_vram.c) */
  const void *backend; /* const sg__backend_i * */
  void *be_state;
  void *dev; /* device buffer */
} sg__tier;

/* A software TLB slot. */
typedef struct sg__tlb_entry {
  uint64_t tag;    /* key + 1; 0: empty */
  uint64_t word;   /* the entry's version word, not busy */
  uint64_t offset; /* the entry's offset */
  uint8_t *page;   /* local address of the page's frame, or NULL */
  uint64_t seen;   /* bucket value when filled */
  uint32_t bucket;
} sg__tlb_entry;

/* A copy of a COHERENT page (coherence.c). For a remote page `data` holds
 * the lines whose bits are set in `valid` (A3 level 3); for a page this node
 * holds, only the state is kept. */
typedef struct sg__copy {
  uint64_t key; /* 0: empty */
  uint32_t version;
  uint32_t bucket;
  uint64_t seen;
  uint64_t valid;
  uint8_t mesi;  /* sg_gmem_mesi */
  uint16_t home; /* node holding the page's frame */
  uint8_t *data;
} sg__copy;

/* An allocation of this node. */
typedef struct sg__gm_alloc {
  uint64_t first; /* entry index of its first page */
  uint64_t pages;
  sg_gmem_tier tier;
  uint64_t frame; /* first frame */
  unsigned flags;
} sg__gm_alloc;

struct sg_gmem {
  sg_comm *comm; /* NULL: one node */
  int node, nodes;
  int timeout_ms;
  sg__gm_peer *peers; /* per node */

  /* Meta region: this node's shard of the table, sharer words, buckets. */
  uint8_t *meta;
  size_t meta_bytes;
  sg_comm_window *meta_win;
  sg__pte *table;
  uint64_t table_pages;
  uint64_t *sharers; /* per table page: bit (n % 64) for each node n that may hold translations */
  uint64_t *buckets; /* SG__GM_BUCKETS */

  uint64_t *pages_used; /* bitmap of this node's entries handed out by sg_gmem_alloc */
  sg__gm_alloc *allocs;
  uint32_t n_allocs, cap_allocs;

  sg__tier tier[SG__GM_TIERS];

  sg__tlb_entry *tlb;
  uint32_t tlb_mask;

  sg__copy *copies;
  uint32_t copy_mask;
  uint8_t *copy_data;

  /* Table replica (replica.c): the left neighbour's table as it last pushed
   * it, and our table as we last pushed it (what changed since). */
  sg__pte *replica;
  uint64_t replica_pages;
  sg_comm_window *replica_win;
  sg__pte *shadow;

  uint64_t **registered; /* per node: bitmap of its table pages whose sharer word has our bit */
  sg__pte *fetch[3];     /* scratch for the three gets of a remote table page */

  sg_gmem_stats stats;
};

/* ---- gva.c ---------------------------------------------------------------- */
/* Text of a GVA for messages, also for invalid ones. */
const char *sg__gva_str(sg_gva gva, char buf[SG_GVA_STR_MAX + 24]);
#define SG__GVA_BUF (SG_GVA_STR_MAX + 24)

/* ---- bitmap.c -------------------------------------------------------------- */
/* First run of `n` clear bits in [0, nbits); false when there is none. */
bool sg__bits_find_run(const uint64_t *bits, uint64_t nbits, uint64_t n, uint64_t *first);
void sg__bits_set(uint64_t *bits, uint64_t first, uint64_t n, bool on);
/* Every node's record of `words` u64 (this node's is rec) into *all (nodes
 * records; free with sg__free), gathered even when this node failed
 * (`local`), so that the others learn it: returns the gather's status, else
 * local. *all is NULL only when it could not be allocated. `what` names the
 * caller in the message. */
sg_status sg__gmem_gather(sg_gmem *gm, const uint64_t *rec, int words, sg_status local, const char *what,
                          uint64_t **all);
bool sg__bits_test(const uint64_t *bits, uint64_t i);

/* ---- tier.c / tier_pmem.c / tier_vram.c (sg__tier_name: gmem/gmem.h) --------- */
/* shared: the memory is allocated later, with the tier's window (sg__tier_dram_window): on one host, shared
 * memory that peers' RMA reaches directly. */
sg_status sg__tier_dram_init(sg__tier *t, size_t bytes, bool shared);
sg_status sg__tier_dram_window(sg__tier *t, sg_comm *comm);
sg_status sg__tier_pmem_init(sg__tier *t, const char *path, size_t bytes);
sg_status sg__tier_vram_init(sg__tier *t, int device, size_t bytes);
void sg__tier_fini(sg__tier *t);
/* The frame index of a tier whose base and bytes are set (all tiers share it). */
sg_status sg__tier_frames_init(sg__tier *t);
void sg__tier_pmem_unmap(sg__tier *t);
void sg__tier_vram_release(sg__tier *t);
/* Frame bookkeeping (level 2). */
sg_status sg__tier_frames_alloc(sg_gmem *gm, sg_gmem_tier tier, uint64_t n, bool zero, uint64_t *first);
void sg__tier_frames_free(sg_gmem *gm, sg_gmem_tier tier, uint64_t first, uint64_t n);
/* Copies between host memory and a local tier at byte `at`. */
sg_status sg__tier_write(sg__tier *t, uint64_t at, const void *src, size_t n);
sg_status sg__tier_read(sg__tier *t, uint64_t at, void *dst, size_t n);
sg_status sg__tier_zero(sg__tier *t, uint64_t at, size_t n);
/* PMEM durability of [at, at+n); nothing for other tiers. */
sg_status sg__tier_persist(sg__tier *t, uint64_t at, size_t n);
sg_status sg__pmem_persist(sg__tier *t, uint64_t at, size_t n);
sg_status sg__vram_copy(sg__tier *t, uint64_t at, void *host, size_t n, bool to_device);

/* ---- gmem.c ----------------------------------------------------------------- */
/* Waits one round for remote progress, or fails when `deadline` (ms) passed. */
sg_status sg__gm_spin(sg_gmem *gm, int64_t deadline, const char *what, sg_gva gva);
int64_t sg__gm_deadline(const sg_gmem *gm);

/* ---- table.c ---------------------------------------------------------------- */
sg_status sg__gm_word_read(sg_gmem *gm, uint16_t owner, uint64_t idx, uint64_t *word);
sg_status sg__gm_word_cas(sg_gmem *gm, uint16_t owner, uint64_t idx, uint64_t cmp, uint64_t swap,
                          uint64_t *old);
sg_status sg__gm_offset_write(sg_gmem *gm, uint16_t owner, uint64_t idx, uint64_t offset);
sg_status sg__gm_offset_read(sg_gmem *gm, uint16_t owner, uint64_t idx, uint64_t *offset);
/* A consistent (word, offset) of one entry, waiting while it is busy. */
sg_status sg__gm_entry_read(sg_gmem *gm, uint16_t owner, uint64_t idx, sg_gva gva, sg__pte *out);
/* Fetches the table page of `idx` from a remote owner by three RMA gets and
 * returns the consistent entries: ok[i] set for entry first+i. */
sg_status sg__gm_table_page_fetch(sg_gmem *gm, uint16_t owner, uint64_t idx, uint64_t *first, uint32_t *count,
                                  const sg__pte **entries, uint8_t *ok);
/* Puts our bit into the owner's sharer word of the table page of idx (once). */
sg_status sg__gm_register(sg_gmem *gm, uint16_t owner, uint64_t idx);
sg_status sg__gm_sharers_read(sg_gmem *gm, uint16_t owner, uint64_t tp, uint64_t *mask);
/* Bumps bucket b on every node whose bit is in mask. */
sg_status sg__gm_bump(sg_gmem *gm, uint64_t mask, const uint64_t *bucket_bits, bool *self);
static inline uint64_t sg__gm_bucket_load(const sg_gmem *gm, uint32_t b) {
  return __atomic_load_n(&gm->buckets[b], __ATOMIC_ACQUIRE);
}

/* ---- txn.c ------------------------------------------------------------------ */
/* One entry being updated: taken (busy) by sg__gm_txn_begin. */
typedef struct sg__gm_txn {
  uint16_t owner;
  uint64_t idx;
  uint64_t word;      /* as found (not busy) */
  uint64_t offset;    /* as found; stable while busy */
  uint64_t before;    /* our bucket of this entry when taken */
  uint64_t own_bumps; /* times we bumped it ourselves since */
} sg__gm_txn;
/* Takes the entry when its version equals `expected` (SG__GM_ANY_VERSION:
 * any); SG_GMEM_ERR_STALE with *found set otherwise. */
sg_status sg__gm_txn_begin(sg_gmem *gm, sg_gva gva, uint64_t expected, const char *what, sg__gm_txn *t,
                           sg__pte *found);
/* Invalidates every sharer's translations and copies of the entry. */
sg_status sg__gm_txn_invalidate(sg_gmem *gm, sg__gm_txn *t);
/* Commits version + 1 with the new fields; *committed gets the word. */
sg_status sg__gm_txn_commit(sg_gmem *gm, sg__gm_txn *t, uint16_t node, uint8_t flags, uint64_t offset,
                            uint64_t *committed);
/* Releases the entry unchanged. */
void sg__gm_txn_abort(sg_gmem *gm, sg__gm_txn *t);

/* Updates this node's entries [first, first+n) as one batch: takes each,
 * invalidates all sharers once per bucket, calls `apply` for each entry
 * (it may change node, flags, offset), commits each at version + 1. A
 * `before_commit` failure releases every entry unchanged. */
typedef void (*sg__gm_apply_fn)(void *ctx, uint64_t i, uint16_t *node, uint8_t *flags, uint64_t *offset);
typedef sg_status (*sg__gm_prepare_fn)(void *ctx);
sg_status sg__gm_update_range(sg_gmem *gm, uint64_t first, uint64_t n, sg__gm_prepare_fn before_commit,
                              sg__gm_apply_fn apply, void *ctx);

/* ---- tlb.c ------------------------------------------------------------------ */
static inline uint64_t sg__gm_key(uint16_t node, uint64_t idx) { return (uint64_t)node << 48 | idx; }
/* Slot of a key in the TLB or the copy cache. The node id sits in bits
 * 48-63 of the key, so it is folded down before mixing: a plain
 * multiplicative hash would let it affect high bits only, and the same page
 * index of every node would share one slot. */
static inline uint32_t sg__gm_slot(uint64_t key, uint32_t mask) {
  uint64_t x = (key ^ (key >> 29)) * 0xBF58476D1CE4E5B9ull;
  return (uint32_t)(x ^ (x >> 32)) & mask;
}
sg_status sg__tlb_init(sg_gmem *gm, uint32_t entries);
void sg__tlb_fini(sg_gmem *gm);
void sg__tlb_install(sg_gmem *gm, uint16_t owner, uint64_t idx, uint64_t word, uint64_t offset,
                     uint64_t seen);
/* The TLB is two-way set associative: slots 2s and 2s+1 form set s, the
 * most recently filled first. A direct-mapped table lost 3% of the hits of
 * 256 hot pages in 4096 slots to collisions (sgrt bench gpt). */
static inline sg__tlb_entry *sg__tlb_set(const sg_gmem *gm, uint64_t key) {
  return &gm->tlb[sg__gm_slot(key, gm->tlb_mask) & ~1u];
}
/* A valid TLB entry of the page, or NULL. */
static inline sg__tlb_entry *sg__tlb_find(sg_gmem *gm, uint16_t owner, uint64_t idx) {
  uint64_t key = sg__gm_key(owner, idx);
  sg__tlb_entry *e = sg__tlb_set(gm, key);
  if (e->tag != key + 1 && (++e)->tag != key + 1) return NULL;
  return sg__gm_bucket_load(gm, e->bucket) == e->seen ? e : NULL;
}
/* The local tier and byte of [in_page, in_page + n) of a page this node
 * holds, checked against the tier: entries can be written by any node, so
 * one pointing outside our memory is refused (SG_ERR_FORMAT), never used. */
sg_status sg__gm_local_span(sg_gmem *gm, sg_gva gva, uint64_t offset, uint64_t in_page, size_t n,
                            sg__tier **tier, uint64_t *byte);
/* Local address of a mapped page when this node holds it in host memory. */
uint8_t *sg__gm_local_page(sg_gmem *gm, uint64_t word, uint64_t offset);

/* ---- translate.c ------------------------------------------------------------ */
/* Checks a GVA's form, node and range; *idx gets its entry index. */
sg_status sg__gm_check_gva(const sg_gmem *gm, sg_gva gva, const char *what, uint64_t *idx);
/* The valid TLB entry for gva, filled if needed, with the permission check. */
sg_status sg__gm_lookup(sg_gmem *gm, sg_gva gva, unsigned access, const char *what, sg__tlb_entry **out);
/* Checks an entry word against an access (mapped, permissions). */
sg_status sg__gm_check_access(sg_gva gva, uint64_t word, unsigned access, const char *what);
void sg__gm_fill_loc(const sg_gmem *gm, const sg__tlb_entry *e, sg_gva gva, sg_gmem_loc *out);

/* ---- alloc.c ----------------------------------------------------------------- */
/* The allocation of this node that starts at gva. */
sg_status sg__gm_find_alloc(sg_gmem *gm, sg_gva gva, const char *what, sg__gm_alloc **out);

/* ---- migrate.c: sg__gm_migrate (gmem/gmem.h) ------------------------------------- */

/* ---- replica.c --------------------------------------------------------------- */
/* Collective (after the exchange of sizes): replica buffer, shadow, window. */
sg_status sg__gm_replica_init(sg_gmem *gm);
void sg__gm_replica_fini(sg_gmem *gm);

/* ---- coherence.c ------------------------------------------------------------- */
sg_status sg__gm_coherent_read(sg_gmem *gm, sg_gva gva, sg__tlb_entry *e, void *dst, size_t bytes,
                               uint64_t want, uint32_t *version, const char *what);
sg_status sg__gm_coherent_write(sg_gmem *gm, sg_gva gva, const void *src, size_t bytes, uint64_t expected,
                                uint32_t *version, const char *what);
sg_status sg__copy_init(sg_gmem *gm, uint32_t pages);
void sg__copy_fini(sg_gmem *gm);

#endif /* SG_GMEM_INTERNAL_H */
