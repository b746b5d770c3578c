/**
 * @file sgg.h
 * The native graph format, .sgg: little-endian, sectioned, each
 * section checksummed with XXH64, initializer data 64-byte aligned so that a
 * loaded graph reads its weights straight from the mapped file. The layout is
 * documented byte by byte in docs/format.md.
 */
#ifndef SGRT_SGG_H
#define SGRT_SGG_H

#include <stddef.h>

#include "sgrt/core.h"
#include "sgrt/graph.h"

SG_EXTERN_C_BEGIN

/** Current format version written by this library. A reader accepts any file
 * with the same major version; minor versions only add optional sections. */
#define SG_SGG_VERSION_MAJOR 1
#define SG_SGG_VERSION_MINOR 0

/**
 * Writes a finalized graph to `path` (atomically: a temporary file in the same
 * directory is renamed over it). An existing `path` must be a regular file:
 * a FIFO, a device or a directory there is refused (SG_ERR_IO), not replaced.
 * @return SG_OK; SG_ERR_STATE if the graph is not finalized; SG_ERR_IO.
 */
SG_API sg_status sg_graph_save(const sg_graph *g, const char *path);

/**
 * Serialises a finalized graph into a new buffer that the caller frees with
 * sg_free() (core.h).
 */
SG_API sg_status sg_graph_save_to_memory(const sg_graph *g, void **data, size_t *size);

/**
 * Maps and loads a .sgg file. Every byte is validated (structure, checksums,
 * counts, ids, then the full verifier); initializers stay in the mapping.
 * @param out receives a finalized graph, or NULL on error.
 * @return SG_OK, SG_ERR_IO, SG_ERR_FORMAT, SG_ERR_TRUNCATED, SG_ERR_CHECKSUM,
 *         SG_ERR_VERSION, SG_ERR_UNSUPPORTED, SG_ERR_RANGE or a verifier error;
 *         sg_last_error() names what was wrong and where (file offset).
 */
SG_API sg_status sg_graph_load(const char *path, sg_graph **out);

/** As sg_graph_load, from a buffer (copied; the caller keeps ownership). */
SG_API sg_status sg_graph_load_from_memory(const void *data, size_t size, sg_graph **out);

SG_EXTERN_C_END

#endif /* SGRT_SGG_H */
