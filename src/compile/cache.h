/* The on-disk compile cache (SPEC C4): entries of a few files (a shared
 * object, a plan) under a 128-bit key, in a directory of this user's.
 *
 * Where: $SG_CACHE_DIR, else $XDG_CACHE_HOME/sgrt, else ~/.cache/sgrt;
 * SG_CACHE=0 turns it off. The directory is created 0700 and refused
 * (SG_ERR_DENIED, naming it) when another user owns it or others may write
 * to it: a writable cache is code execution. An entry is the directory
 * KEY/ (32 hex digits) holding its files and a manifest naming each with
 * its size and XXH3-64 checksum. Writes are atomic: the files go into a
 * unique temporary directory, are fsync'ed, and the directory is renamed
 * into place; when another process won the race, its entry is used. Every
 * read is validated against the manifest; a missing, foreign, truncated or
 * altered entry is a miss with a warning, and the caller rebuilds it. */
#ifndef SG_COMPILE_CACHE_H
#define SG_COMPILE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sgrt/status.h"

typedef struct sg__cache sg__cache;
typedef struct sg__cache_key {
  uint64_t hi, lo;
} sg__cache_key;

/* One file of an entry: a plain name (letters, digits, '.', '_', '-'). */
typedef struct sg__cache_file {
  const char *name;
  const void *data;
  size_t bytes;
} sg__cache_file;

#define SG__CACHE_MAX_FILES 8

/* The key of `bytes` of a canonical encoding (the caller's: graph, options,
 * device, compiler, versions). */
sg__cache_key sg__cache_key_of(const void *data, size_t bytes);
/* Opens the cache at `dir` (NULL: from the environment, above). SG_OK with
 * *out NULL when the cache is off (SG_CACHE=0). */
sg_status sg__cache_open(const char *dir, sg__cache **out);
void sg__cache_close(sg__cache *c); /* accepts NULL */
const char *sg__cache_dir(const sg__cache *c);
/* A valid entry: SG_OK and its directory in path[cap] (its files are
 * path/NAME). SG_ERR_NOT_FOUND for a miss (a warning said why when the
 * entry was there but invalid; an invalid entry is removed);
 * SG_ERR_NO_MEMORY when it could not be checked (the entry is kept). */
sg_status sg__cache_get(sg__cache *c, sg__cache_key key, char *path, size_t cap);
/* Stores an entry (atomically; a concurrent writer's entry wins if it
 * renamed first). An entry that cannot be written (no space, ...) is an
 * error the caller may downgrade to a warning and run uncached. */
sg_status sg__cache_put(sg__cache *c, sg__cache_key key, const sg__cache_file *files, int n);

/* ---- management (cache_admin.c: sg_cache_*, `sgrt cache`) ---------------- */

/* What a name in the cache directory is. Only the names the cache makes
 * itself are ever removed; everything else there is left alone. */
typedef enum sg__cache_name {
  SG__CACHE_NAME_OTHER = 0, /* not the cache's */
  SG__CACHE_NAME_ENTRY,     /* KEY: 32 lowercase hex digits */
  SG__CACHE_NAME_TEMP,      /* tmp-KEY-XXXXXX (a store), trash-KEY-PID (a removal) */
} sg__cache_name;
sg__cache_name sg__cache_name_of(const char *name);
/* A key as the cache names its entry: 32 lowercase hex digits. */
void sg__cache_key_hex(sg__cache_key k, char out[33]);
/* The cache directory from the environment (sg__cache_open(NULL)'s, even
 * when SG_CACHE=0). */
sg_status sg__cache_default_dir(char *out, size_t cap);
/* Opens the cache at `dir` (NULL: from the environment, SG_CACHE ignored)
 * without creating anything: SG_OK with *out NULL when the directory does
 * not exist; refused as sg__cache_open refuses. */
sg_status sg__cache_open_existing(const char *dir, sg__cache **out);
/* Whether the entry NAME (an SG__CACHE_NAME_ENTRY) matches its manifest, as
 * sg__cache_get checks it: SG_OK and *valid (false: why[cap] says what is
 * wrong), or SG_ERR_NO_MEMORY. Removes nothing. */
sg_status sg__cache_check(const sg__cache *c, const char *name, bool *valid, char *why, size_t cap);
/* Reads FILE of entry NAME (a regular file of this user's, links not
 * followed, at most `max` bytes) into a new buffer (sg__free): SG_OK;
 * SG_ERR_IO (why[cap] says why; no last error); SG_ERR_NO_MEMORY. */
sg_status sg__cache_read(const sg__cache *c, const char *name, const char *file, size_t max, void **data,
                         size_t *bytes, char *why, size_t cap);
/* Removes the entry or temporary directory NAME and the files in it,
 * following no link: SG_ERR_INVALID_ARG for a name the cache does not make,
 * SG_ERR_NOT_FOUND when it is absent, SG_ERR_DENIED (left alone) when it is
 * not a directory or not this user's, SG_ERR_IO when a file stays. An entry
 * is first renamed aside, so a concurrent reader never sees it half
 * removed. */
sg_status sg__cache_remove(sg__cache *c, const char *name);

#endif /* SG_COMPILE_CACHE_H */
