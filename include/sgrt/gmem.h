/**
 * @file gmem.h
 * Global memory mapping: global virtual addresses (GVAs), a
 * page table sharded by owner node, a software TLB, memory tiers (DRAM, PMEM,
 * VRAM), coherent pages, tier migration and ZeRO-style sharding: memory,
 * nothing of what is kept in it (putting a session's optimizer state in a
 * tier is sgrt/offload.h). docs/gmem.md describes the design and the
 * protocols.
 *
 * @code
 *   sg_gmem_params gp = SG_GMEM_PARAMS_INIT;
 *   gp.pmem_bytes = 64 << 20;
 *   gp.pmem_path = "/mnt/pmem";              // a directory, a file or a DAX device
 *   sg_gmem *gm;
 *   if (sg_gmem_create(comm, &gp, &gm) != SG_OK) { fprintf(stderr, "%s\n", sg_last_error()); return 1; }
 *   sg_gva a;
 *   sg_gmem_alloc(gm, SG_GMEM_PMEM, 1 << 20, SG_GMEM_READ | SG_GMEM_WRITE, &a);
 *   char text[SG_GVA_STR_MAX];
 *   sg_gva_format(a, text, sizeof text);     // "0x0001:0x000000001000"
 *   sg_gmem_loc loc;
 *   sg_gmem_translate(gm, a, SG_GMEM_READ, &loc);   // TLB hit after the first call
 *   sg_gmem_free(gm, a);
 *   sg_gmem_destroy(gm);
 * @endcode
 *
 * Node ids are ranks of the communicator (node 0 without one). Every node owns
 * the page-table entries of its own GVA range, node:0 .. node:table_pages*4096,
 * and allocates only there; any node translates, reads and writes any GVA.
 *
 * Threads: an sg_gmem belongs to the thread that owns its communicator.
 * Remote nodes reach this node's table and memory through one-sided UCX
 * operations that may need this node's progress: a node that waits outside
 * sgrt calls should call sg_gmem_progress() now and then.
 */
#ifndef SGRT_GMEM_H
#define SGRT_GMEM_H

#include <stddef.h>
#include <stdint.h>

#include "sgrt/comm.h"
#include "sgrt/export.h"
#include "sgrt/status.h"

SG_EXTERN_C_BEGIN

typedef struct sg_gmem sg_gmem;

/** Status of a read or update that named a version the page no longer has
 * (a stale version). */
#define SG_GMEM_ERR_STALE SG_ERR_STALE

/* ---- global virtual addresses ------------------------------------------- */

/** Bytes of a global page, and of a cache line of the per-line valid bits. */
#define SG_GMEM_PAGE_SIZE 4096u
#define SG_GMEM_LINE_SIZE 64u
/** The node id that no node has: an unmapped entry's node_id. */
#define SG_GMEM_NODE_NONE 0xFFFFu
/** Longest text of a GVA with its NUL: "0xNNNN:0x" and 16 hex digits. */
#define SG_GVA_STR_MAX 32

/**
 * A 128-bit global virtual address: the node id prefix in the low 16 bits of
 * `hi` (the other 48 bits are reserved and must be zero) and a byte offset in
 * that node's global range in `lo`. Text form: "0x0001:0x7f8a2b3c4d5e".
 */
typedef struct sg_gva {
  uint64_t hi;
  uint64_t lo;
} sg_gva;

static inline sg_gva sg_gva_make(uint16_t node, uint64_t offset) {
  sg_gva g = {node, offset};
  return g;
}
static inline uint16_t sg_gva_node(sg_gva g) { return (uint16_t)g.hi; }
static inline uint64_t sg_gva_offset(sg_gva g) { return g.lo; }

/**
 * Parses "0xNNNN:0xOOOO": "0x" (or "0X"), 1-4 hex digits of node id, ':',
 * "0x", 1-16 hex digits of offset, nothing else (no spaces, signs or
 * suffixes). Node 0xffff is reserved.
 * @return SG_OK; SG_ERR_INVALID_ARG for NULL arguments; SG_ERR_FORMAT naming
 *   the character and position that is wrong; SG_ERR_RANGE when a field has
 *   too many digits or the node is 0xffff. *out is untouched on error. Any thread.
 */
SG_API sg_status sg_gva_parse(const char *text, sg_gva *out);

/**
 * Writes the text form ("0x%04x:0x%012llx": the offset has at least 12 digits)
 * with its NUL into buf.
 * @return SG_OK; SG_ERR_INVALID_ARG for a NULL buffer, reserved bits set, node
 *   0xffff, or a buffer too small (SG_GVA_STR_MAX always suffices). Any thread.
 */
SG_API sg_status sg_gva_format(sg_gva gva, char *buf, size_t cap);

/* ---- page-table entries -------------------------------------------------- */

/** Entry flags and access kinds asked of sg_gmem_translate(). */
enum {
  SG_GMEM_READ = 1,
  SG_GMEM_WRITE = 2,
  SG_GMEM_COHERENT = 4, /**< writes go through the version protocol, copies are invalidated */
  /** sg_gmem_alloc() only, never an entry flag: the frames are not zeroed (their contents are whatever
   * the tier held), for memory the caller fills before anyone reads it. Zeroing touches every page on
   * the calling thread; a large buffer then costs its page faults and a pass over it up front. */
  SG_GMEM_UNINIT = 8,
};

/** Memory tiers. Stored in an entry's offset; never renumber. */
typedef enum sg_gmem_tier {
  SG_GMEM_DRAM = 0,
  SG_GMEM_PMEM = 1, /**< libpmem mapping of a DAX device or a file */
  SG_GMEM_VRAM = 2, /**< CUDA device memory through the CUDA backend */
} sg_gmem_tier;

/**
 * An entry's `offset` locates the page's frame on node_id: the tier in bits
 * 62-63, the device in bits 56-61 and the byte offset in that tier's memory in
 * bits 0-55 (page aligned).
 */
#define SG_GMEM_LOC(tier, device, byte) \
  (((uint64_t)(tier) << 62) | ((uint64_t)((device)&0x3f) << 56) | ((uint64_t)(byte) & ((1ull << 56) - 1)))
#define SG_GMEM_LOC_TIER(off) ((sg_gmem_tier)((off) >> 62))
#define SG_GMEM_LOC_DEVICE(off) ((int)(((off) >> 56) & 0x3f))
#define SG_GMEM_LOC_BYTE(off) ((off) & ((1ull << 56) - 1))

/**
 * A page-table entry. Fixed layout (fields are never added): in the table it is 16 bytes:
 * word 0 (the "version word", the target of compare-and-swap) holds version
 * in bits 0-31, node_id in 32-47, flags in 48-55 and a writer's busy bit in
 * bit 63; word 1 holds offset. docs/gmem.md has the protocol.
 */
typedef struct sg_gmem_pte {
  uint16_t node_id; /**< node holding the frame; SG_GMEM_NODE_NONE when unmapped */
  uint8_t flags;    /**< SG_GMEM_READ | SG_GMEM_WRITE | SG_GMEM_COHERENT */
  uint32_t version; /**< +1 on every committed change of the entry or of a coherent page's data */
  uint64_t offset;  /**< SG_GMEM_LOC(tier, device, byte) */
} sg_gmem_pte;

/* ---- lifecycle ------------------------------------------------------------ */

/** Options of sg_gmem_create(). Initialise from SG_GMEM_PARAMS_INIT or
 * sg_gmem_params_init(); an older caller's shorter struct gets the defaults
 * for the fields it lacks. Note that 0 means different things here: "no
 * tier" for pmem_bytes and vram_bytes, "the default (10000)" for timeout_ms. */
typedef struct sg_gmem_params {
  size_t size;          /**< sizeof(sg_gmem_params) */
  uint64_t table_pages; /**< this node's global range in pages (entries of its shard); default 65536 */
  size_t dram_bytes;    /**< DRAM tier; default 64 MiB (reserved lazily by the OS) */
  size_t pmem_bytes;    /**< PMEM tier; 0: none (a DAX device: 0 maps the whole device) */
  /** File, existing directory (an unnamed file inside, gone at destroy) or
   * DAX device for the PMEM tier; NULL: SG_GMEM_PMEM_PATH, else none. */
  const char *pmem_path;
  size_t vram_bytes;    /**< VRAM tier; 0: none. Needs the CUDA backend */
  int vram_device;      /**< CUDA device of the VRAM tier; default 0 (a device number, not "unset") */
  uint32_t tlb_entries; /**< software TLB slots, a power of two; default 4096 */
  uint32_t copy_pages;  /**< cache of coherent remote pages, in pages; default 64 */
  int timeout_ms;       /**< longest wait for a busy entry; 0: 10000 */
} sg_gmem_params;

#define SG_GMEM_PARAMS_INIT \
  { sizeof(sg_gmem_params), 65536, 64u << 20, 0, NULL, 0, 0, 4096, 64, 0 }
SG_API sg_gmem_params sg_gmem_params_init(void);

/**
 * Creates this node's table shard, tiers and TLB, and exchanges RMA windows
 * and sizes with every other node. Collective over `comm` (NULL: a single
 * node, no communication). A node whose setup fails makes every node fail.
 * @return SG_OK; SG_ERR_INVALID_ARG for a bad parameter (named);
 *   SG_ERR_IO when the PMEM path cannot be mapped (libpmem's message);
 *   SG_ERR_UNSUPPORTED for a VRAM tier without the CUDA backend;
 *   SG_ERR_FORMAT when a peer's sizes are malformed; SG_ERR_NO_MEMORY;
 *   SG_ERR_COMM / SG_ERR_TIMEOUT from the communicator.
 */
SG_API sg_status sg_gmem_create(sg_comm *comm, const sg_gmem_params *params, sg_gmem **out);

/** Collective: waits for every node, then frees everything (PMEM files made in a
 * directory are removed). Accepts NULL. */
SG_API sg_status sg_gmem_destroy(sg_gmem *gm);

/** This node's id, and the number of nodes. */
SG_API int sg_gmem_node(const sg_gmem *gm);
SG_API int sg_gmem_nodes(const sg_gmem *gm);

/** Serves remote nodes' one-sided operations once without blocking. */
SG_API sg_status sg_gmem_progress(sg_gmem *gm);

/* ---- allocation (this node's range) ---------------------------------------- */

/**
 * Allocates `bytes` (rounded up to pages) in `tier` on this node, mapped at
 * consecutive GVAs of this node's range with `flags`, backed by consecutive
 * frames (zeroed, unless flags has SG_GMEM_UNINIT), so sg_gmem_ptr() gives one
 * local pointer for the range.
 * @return SG_OK; SG_ERR_INVALID_ARG (bytes 0, unknown flags or tier);
 *   SG_ERR_UNSUPPORTED for a tier this node does not have; SG_ERR_NO_MEMORY
 *   when the tier or the GVA range has no run of free pages that long (both
 *   sizes named).
 */
SG_API sg_status sg_gmem_alloc(sg_gmem *gm, sg_gmem_tier tier, size_t bytes, unsigned flags, sg_gva *out);

/** Unmaps and frees an allocation (gva as returned by sg_gmem_alloc). Other
 * nodes' translations of it are invalidated before it returns.
 * @return SG_OK; SG_ERR_NOT_FOUND when gva does not start an allocation of this node. */
SG_API sg_status sg_gmem_free(sg_gmem *gm, sg_gva gva);

/**
 * A local pointer to [gva, gva+bytes), which must lie in one allocation of
 * this node in the DRAM or PMEM tier. Valid until the allocation is freed or
 * migrated. Permission as sg_gmem_translate().
 */
SG_API sg_status sg_gmem_ptr(sg_gmem *gm, sg_gva gva, size_t bytes, unsigned access, void **out);

/** Makes [gva, gva+bytes) of a local PMEM allocation durable: pmem_persist on
 * real persistent memory, msync on a file mapping. SG_OK and nothing to do for DRAM. */
SG_API sg_status sg_gmem_persist(sg_gmem *gm, sg_gva gva, size_t bytes);

/**
 * Moves a local allocation (gva as returned by sg_gmem_alloc) to another tier
 * of this node, keeping its GVAs: new frames are filled, every entry is
 * repointed with a version bump (other nodes' translations are invalidated),
 * then the old frames are freed. Pointers from sg_gmem_ptr() become invalid.
 */
SG_API sg_status sg_gmem_migrate(sg_gmem *gm, sg_gva gva, sg_gmem_tier tier);

/* ---- translation ------------------------------------------------------------ */

/** Where a GVA lives, as sg_gmem_translate() found it. */
typedef struct sg_gmem_loc {
  uint16_t node; /**< node holding the data */
  uint8_t flags; /**< the entry's flags */
  sg_gmem_tier tier;
  int device;
  uint32_t version;     /**< the entry's version */
  uint64_t tier_offset; /**< byte of the GVA in the tier's memory on `node` */
  void *ptr;            /**< its address when node is this node and the tier is in host memory, else NULL */
} sg_gmem_loc;

/**
 * Translates a GVA: the TLB first; on a miss this node's shard, or the owner's
 * table page fetched by RMA get and validated by the entry's version.
 * `access` (SG_GMEM_READ and/or SG_GMEM_WRITE) must be allowed by the entry.
 * @return SG_OK; SG_ERR_INVALID_ARG (reserved GVA bits, unknown access bits);
 *   SG_ERR_NOT_FOUND for a node that is not in the job or an unmapped page;
 *   SG_ERR_RANGE for an offset beyond the node's range; SG_ERR_DENIED when the
 *   entry lacks a permission asked for; SG_ERR_TIMEOUT when the entry stays
 *   busy; SG_ERR_COMM. Each message names the GVA in its text form.
 */
SG_API sg_status sg_gmem_translate(sg_gmem *gm, sg_gva gva, unsigned access, sg_gmem_loc *out);

/** Drops the TLB entry of the page holding gva, or every entry. */
SG_API sg_status sg_gmem_tlb_invalidate(sg_gmem *gm, sg_gva gva);
SG_API sg_status sg_gmem_tlb_flush(sg_gmem *gm);

/** Reads an entry from its owner, bypassing the TLB (a consistent snapshot). */
SG_API sg_status sg_gmem_pte_read(sg_gmem *gm, sg_gva gva, sg_gmem_pte *out);

/**
 * Compare-and-swap of an entry on its version (UCX atomics on the owner's
 * table): when the entry is at `expected_version`, sets node_id, flags and
 * offset from `desired` (its version is ignored) and commits version + 1,
 * invalidating every node's translation first. `actual` (optional) gets the
 * entry after success, or as found on failure.
 * @return SG_OK when swapped; SG_GMEM_ERR_STALE when the entry was at another
 *   version; SG_ERR_INVALID_ARG / SG_ERR_RANGE / SG_ERR_NOT_FOUND for a
 *   desired entry that points nowhere valid (named); errors of translation.
 */
SG_API sg_status sg_gmem_pte_cas(sg_gmem *gm, sg_gva gva, uint32_t expected_version,
                                 const sg_gmem_pte *desired, sg_gmem_pte *actual);

/**
 * Pushes this node's table to its replica on node (node + 1) % nodes: every
 * table page (256 entries, 4 KiB) that changed since the last push is put
 * with one RMA put (ucp_put_nbi), all completed before this returns. The
 * replica is what sg_gmem_pte_read_replica() reads when this node is gone
 * (self-healing finds state by GVA). *pushed (optional) gets the
 * number of table pages sent. A single node has no replica: SG_OK, 0 pages.
 */
SG_API sg_status sg_gmem_table_push(sg_gmem *gm, uint64_t *pushed);

/**
 * Reads the entry of gva from its owner's replica (held by node (owner + 1) %
 * nodes), as of the owner's last sg_gmem_table_push(); for when the owner
 * cannot answer. Read it once the owner stopped pushing.
 * @return SG_OK; SG_GMEM_ERR_STALE when the entry was being updated at that
 *   push (*out has its version before the update; the offset may be either);
 *   SG_ERR_UNSUPPORTED on a single node; errors of translation for a bad GVA.
 */
SG_API sg_status sg_gmem_pte_read_replica(sg_gmem *gm, sg_gva gva, sg_gmem_pte *out);

/* ---- data and coherence ----------------------------------------------------- */

/**
 * Reads [gva, gva+bytes) into dst. A COHERENT page is read from this node's
 * copy while no write has invalidated it, else fetched again; the data always
 * belongs to one committed version, reported in *version (optional; asking
 * for it, or a COHERENT page, needs the range to lie in one page).
 */
SG_API sg_status sg_gmem_read(sg_gmem *gm, sg_gva gva, void *dst, size_t bytes, uint32_t *version);

/**
 * Reads like sg_gmem_read() but only data of `version`: when a write has
 * committed a newer version, or is committing one, nothing is copied and
 * SG_GMEM_ERR_STALE is returned naming both versions.
 */
SG_API sg_status sg_gmem_read_at(sg_gmem *gm, sg_gva gva, void *dst, size_t bytes, uint32_t version);

/**
 * Writes src to [gva, gva+bytes). On a COHERENT page (the range in one page)
 * the write takes the entry (busy bit by compare-and-swap), invalidates every
 * other node's copies and translations, writes, and commits version + 1,
 * reported in *version (optional). Other pages are written in place.
 */
SG_API sg_status sg_gmem_write(sg_gmem *gm, sg_gva gva, const void *src, size_t bytes, uint32_t *version);

/** sg_gmem_write() of a COHERENT page that commits only when the page is at
 * `expected`; SG_GMEM_ERR_STALE otherwise, *version then being the current one. */
SG_API sg_status sg_gmem_write_if(sg_gmem *gm, sg_gva gva, const void *src, size_t bytes, uint32_t expected,
                                  uint32_t *version);

/** MESI-like state of a COHERENT page on this node (docs/gmem.md). */
typedef enum sg_gmem_mesi {
  SG_GMEM_INVALID = 0,   /**< no valid copy here */
  SG_GMEM_SHARED = 1,    /**< a valid copy; other nodes may hold one */
  SG_GMEM_EXCLUSIVE = 2, /**< this node holds the page and no other node has read it */
  SG_GMEM_MODIFIED = 3,  /**< this node committed the current version (the last writer) and holds it;
                              other nodes may have read it since (reads are one-sided, nobody is told) */
} sg_gmem_mesi;

/** This node's state of the COHERENT page holding gva, and the version of its copy. */
SG_API sg_status sg_gmem_coherence_state(sg_gmem *gm, sg_gva gva, sg_gmem_mesi *state, uint32_t *version);

/** Counters since create. An output: the caller sets `size` (SG_GMEM_STATS_INIT). */
typedef struct sg_gmem_stats {
  size_t size; /**< set by the caller; on return the bytes filled */
  uint64_t tlb_hits, tlb_misses;
  uint64_t remote_table_fetches;  /**< table pages fetched by RMA get */
  uint64_t invalidations_sent;    /**< buckets bumped on other nodes */
  uint64_t commits;               /**< entry versions committed by this node */
  uint64_t stale;                 /**< SG_GMEM_ERR_STALE returned */
  uint64_t copy_hits, copy_fills; /**< coherent copy cache */
  uint64_t table_pages_pushed;    /**< table pages put to the replica (sg_gmem_table_push) */
} sg_gmem_stats;
#define SG_GMEM_STATS_INIT \
  { .size = sizeof(sg_gmem_stats) }
/** Fills the first out->size bytes of `out` (an older caller's shorter struct
 * gets the counters it knows; out->size becomes the bytes written).
 * SG_ERR_INVALID_ARG for NULL or a size below the first version's. */
SG_API sg_status sg_gmem_stats_get(const sg_gmem *gm, sg_gmem_stats *out);

/* ---- ZeRO-style sharding ---------------------------------------------------- */

typedef struct sg_gmem_shard sg_gmem_shard;

/**
 * Collective: a logical buffer of `bytes` split into one contiguous piece per
 * node (piece r = [r*chunk, min((r+1)*chunk, bytes)), chunk = ceil(bytes /
 * nodes) rounded up to `align`), each allocated by its owner in `tier` of its
 * own range; every node learns every piece's GVA. Ownership by rank is the
 * page table's: piece r's entries live in node r's shard.
 */
SG_API sg_status sg_gmem_shard_create(sg_gmem *gm, sg_gmem_tier tier, size_t bytes, size_t align,
                                      unsigned flags, sg_gmem_shard **out);
/** Collective: frees this node's piece once every node is done. Accepts NULL. */
SG_API sg_status sg_gmem_shard_destroy(sg_gmem_shard *sh);
/** Owner node, GVA and contiguous bytes of the piece holding byte `offset`. */
SG_API sg_status sg_gmem_shard_locate(const sg_gmem_shard *sh, size_t offset, int *node, sg_gva *gva,
                                      size_t *contiguous);
/** This node's piece: local pointer (NULL when empty), first byte, length. */
SG_API sg_status sg_gmem_shard_local(const sg_gmem_shard *sh, void **ptr, size_t *begin, size_t *bytes);
/** Reads / writes [offset, offset+bytes) of the logical buffer, piece by piece from the owners. */
SG_API sg_status sg_gmem_shard_read(sg_gmem_shard *sh, size_t offset, void *dst, size_t bytes);
SG_API sg_status sg_gmem_shard_write(sg_gmem_shard *sh, size_t offset, const void *src, size_t bytes);

SG_EXTERN_C_END

#endif /* SGRT_GMEM_H */
