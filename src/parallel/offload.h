/* Optimizer state offloaded to a memory tier (offload.c). */
#ifndef SG_DIST_OFFLOAD_H
#define SG_DIST_OFFLOAD_H

#include <stdbool.h>

#include "sgrt/gmem.h"
#include "sgrt/offload.h"
#include "sgrt/session.h"

typedef struct sg__dist_offload {
  sg_gmem *gm;          /* this rank's one-node page table, or NULL when off */
  sg_gmem_offload *off; /* the bound tensors */
  sg_gmem_tier tier;
  size_t bytes; /* of the tensors bound */
} sg__dist_offload;

/* "none" (or NULL), "dram" or "pmem" -> on/off and the tier; else SG_ERR_INVALID_ARG. */
sg_status sg__dist_offload_parse(const char *name, bool *on, sg_gmem_tier *tier);

/* Moves every optimizer-state tensor of the compiled session `s` of `g` into
 * `tier` (PMEM: a file or directory at pmem_path, NULL: SG_GMEM_PMEM_PATH).
 * Before anything reads the state's addresses (broadcast, snapshots). */
sg_status sg__dist_offload_start(const sg_graph *g, sg_session *s, sg_gmem_tier tier, const char *pmem_path,
                                 sg__dist_offload *out);

/* Frees the tier memory: after the session is destroyed. Accepts a zeroed one. */
void sg__dist_offload_stop(sg__dist_offload *o);

#endif /* SG_DIST_OFFLOAD_H */
