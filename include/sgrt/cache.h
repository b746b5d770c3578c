/**
 * @file cache.h
 * Managing the on-disk compile cache (docs/compiler.md "The compile cache"):
 * where it is, what its entries hold, whether each still validates, and
 * removing entries. `sgrt cache list|info|clear` is a front end to these
 * calls. Sessions use the cache on their own; nothing here is needed to
 * use it.
 *
 * @code
 *   sg_cache_info info = SG_CACHE_INFO_INIT;
 *   if (sg_cache_get_info(NULL, &info) == SG_OK)
 *     printf("%s: %llu entries, %llu bytes\n", info.dir, (unsigned long long)info.entries,
 *            (unsigned long long)info.bytes);
 *   size_t removed;
 *   if (sg_cache_clear(NULL, NULL, &removed) != SG_OK) fprintf(stderr, "%s\n", sg_last_error());
 * @endcode
 *
 * `dir` NULL is the directory sessions use: $SG_CACHE_DIR, else
 * $XDG_CACHE_HOME/sgrt, else ~/.cache/sgrt (also when SG_CACHE=0 turns the
 * cache off for sessions). These calls create no directory; a directory
 * that does not exist is an empty cache. A directory another user owns, or
 * that others may write to, is refused with SG_ERR_DENIED naming it, as
 * sessions refuse it.
 *
 * Only the names the cache makes are ever removed: entry directories (32
 * hex digits) and its temporary directories (`tmp-KEY-XXXXXX` of a store,
 * `trash-KEY-PID` of a removal). No link is followed; any other file or
 * directory in the cache directory is left alone.
 *
 * Threads: any thread, also while sessions of this or other processes use
 * the cache (an entry is renamed aside before it is removed, so a reader
 * sees it whole or not at all).
 */
#ifndef SGRT_CACHE_H
#define SGRT_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "sgrt/status.h"

SG_EXTERN_C_BEGIN

/** Bytes of sg_cache_info.dir, the terminating NUL included. */
#define SG_CACHE_DIR_MAX 4096

/** The cache as a whole. An output: the caller sets `size` (SG_CACHE_INFO_INIT). */
typedef struct sg_cache_info {
  size_t size;                /**< set by the caller; on return the bytes filled */
  char dir[SG_CACHE_DIR_MAX]; /**< the cache directory */
  int enabled;          /**< 0 when SG_CACHE=0 turns the cache off for sessions (it can still be cleared) */
  int exists;           /**< the directory exists (0: an empty cache) */
  uint64_t entries;     /**< names of entries (32 hex digits), valid or not, as sg_cache_list lists them */
  uint64_t bytes;       /**< bytes of the regular files in them (manifests included) */
  uint64_t temporaries; /**< temporary directories (stores in progress or abandoned, removals) */
} sg_cache_info;
#define SG_CACHE_INFO_INIT \
  { .size = sizeof(sg_cache_info) }

/** One entry. What is not known (an entry without info.txt, a line
 * missing from it) is -1 for numbers and "" for strings. */
typedef struct sg_cache_entry {
  size_t size;           /**< sg_cache_get_entry: set by the caller; on return the bytes filled */
  char key[33];          /**< 32 lowercase hex digits: the directory's name */
  int valid;             /**< 1: every file matches the manifest, as a session checks before loading */
  char problem[256];     /**< valid 0: what is wrong ("'kernels.so' does not match its checksum") */
  uint64_t bytes;        /**< bytes of the regular files in the entry, the manifest included */
  int64_t created;       /**< Unix time from info.txt; without it the directory's modification time */
  int64_t graph_ops;     /**< info.txt "graph N ops, M tensors": N */
  int64_t graph_tensors; /**< ... M */
  char graph_hash[17];   /**< info.txt "graph_hash": sg_graph_hash of the graph (16 hex digits) */
  int64_t kernels;       /**< info.txt "kernels": generated kernels in the shared object */
  int64_t fused_ops;     /**< info.txt "ops": ops that run inside them */
  char device[64];       /**< info.txt "device": the backend ("cpu") */
  char compiler[256];    /**< info.txt "compiler": the C compiler that built it */
  char sgrt_version[32]; /**< info.txt "sgrt": the version of the library that stored it */
} sg_cache_entry;
#define SG_CACHE_ENTRY_INIT \
  { .size = sizeof(sg_cache_entry) }

/**
 * The cache directory, whether sessions use it, and the count and bytes of
 * its entries (no entry is validated; sg_cache_list does that).
 * @param dir  NULL: the directory sessions use (above).
 * @return SG_OK; SG_ERR_INVALID_ARG for a NULL out or an out->size below
 *         the first version's (nothing written); SG_ERR_DENIED for a
 *         directory of another user's or writable by others;
 *         SG_ERR_NOT_FOUND when dir is NULL and neither SG_CACHE_DIR,
 *         XDG_CACHE_HOME nor HOME is set; SG_ERR_IO when it cannot be read.
 */
SG_API sg_status sg_cache_get_info(const char *dir, sg_cache_info *out);

/** Called by sg_cache_list once per entry. `entry` is the library's own
 * struct (entry->size is its size: read only the fields below it) and
 * lives until the callback returns. Return 0 to go on, anything else to
 * stop the listing (sg_cache_list still returns SG_OK). */
typedef int (*sg_cache_entry_fn)(const sg_cache_entry *entry, void *ctx);

/**
 * Lists the entries, newest first (then by key), each validated against its
 * manifest as a session validates it before loading: an invalid entry is
 * listed with valid 0 and its problem, and left in place (the next session
 * that wants it rebuilds it). Reads every file of every entry.
 * @param dir  NULL: the directory sessions use.
 * @return SG_OK (also for a missing directory: no callback); SG_ERR_INVALID_ARG
 *         for a NULL fn; the errors of sg_cache_get_info; SG_ERR_NO_MEMORY. If
 *         it returns an error, fn never ran.
 */
SG_API sg_status sg_cache_list(const char *dir, sg_cache_entry_fn fn, void *ctx);

/**
 * One entry, validated as sg_cache_list validates it.
 * @param key  32 hex digits (either case).
 * @param out  the caller sets out->size (SG_CACHE_ENTRY_INIT).
 * @return SG_OK (also for an invalid entry: out->valid says); SG_ERR_INVALID_ARG
 *         for a NULL key or out, a key that is not 32 hex digits (the message
 *         quotes it) or an out->size below the first version's;
 *         SG_ERR_NOT_FOUND when the cache has no such entry; the errors of
 *         sg_cache_get_info.
 */
SG_API sg_status sg_cache_get_entry(const char *dir, const char *key, sg_cache_entry *out);

/**
 * Removes one entry (key) or every entry and temporary directory (key NULL).
 * Sessions running meanwhile lose nothing but speed: one that wanted a
 * removed entry compiles again, one whose store was under way stores
 * nothing (a warning).
 * @param key      32 hex digits (either case), or NULL for all.
 * @param removed  out: the entries removed (temporary directories not
 *                 counted); set also when an error stopped a removal.
 * @return SG_OK; SG_ERR_INVALID_ARG for a NULL removed or a key that is not
 *         32 hex digits; SG_ERR_NOT_FOUND for a key the cache has no entry
 *         of; SG_ERR_DENIED for a key whose name is not a directory of this
 *         user's (a link: left alone, not followed); SG_ERR_IO when a file
 *         cannot be removed (key NULL: the others are still removed, and
 *         the first error is returned); the errors of sg_cache_get_info.
 */
SG_API sg_status sg_cache_clear(const char *dir, const char *key, size_t *removed);

SG_EXTERN_C_END

#endif /* SGRT_CACHE_H */
