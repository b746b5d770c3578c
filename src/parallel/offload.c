/* Optimizer state in a memory tier (SPEC A5), chosen in the parallel
 * configuration (sg_dist_params.offload): after compile, every
 * optimizer-state tensor of this rank's session is allocated in the DRAM or
 * PMEM tier of a global page table (docs/gmem.md) and bound to the session
 * with sg_session_bind_state, so the optimizer updates it in place there.
 *
 * The table is this rank's own (one node, no communicator): with data
 * parallelism every rank holds the whole optimizer state, so nothing in it
 * is addressed by another rank, and a table over the job's communicator
 * would need the scheduler thread to serve its RMA. Sharding the state
 * across ranks (ZeRO-1) is what would use the job-wide table. */
#include <string.h>

#include "core/core.h"
#include "graph/graph.h"
#include "parallel/offload.h"

sg_status sg__dist_offload_parse(const char *name, bool *on, sg_gmem_tier *tier) {
  *on = false;
  *tier = SG_GMEM_DRAM;
  if (name == NULL || strcmp(name, "none") == 0) return SG_OK;
  if (strcmp(name, "dram") == 0) *tier = SG_GMEM_DRAM;
  else if (strcmp(name, "pmem") == 0) *tier = SG_GMEM_PMEM;
  else
    return sg__error(SG_ERR_INVALID_ARG,
                     "sg_dist_create: offload is '%.32s'; use \"none\", \"dram\" or \"pmem\"", name);
  *on = true;
  return SG_OK;
}

/* The tier must hold every optimizer-state tensor, each rounded up to whole
 * pages, plus one page per tensor of slack for the allocator's alignment. */
static size_t state_bytes(const sg_graph *g) {
  size_t total = 0;
  for (uint32_t t = 0; t < g->n_tensors; t++)
    if (g->tensors[t].role == SG_ROLE_OPTIMIZER_STATE)
      total += (g->tensors[t].nbytes + 4095) / 4096 * 4096 + 4096;
  return total;
}

sg_status sg__dist_offload_start(const sg_graph *g, sg_session *s, sg_gmem_tier tier, const char *pmem_path,
                                 sg__dist_offload *out) {
  *out = (sg__dist_offload){0};
  size_t bytes = state_bytes(g);
  if (bytes == 0)
    return sg__error(SG_ERR_INVALID_ARG,
                     "sg_dist_create: offload asked for, but the graph has no optimizer state "
                     "(plain SGD keeps none)");
  sg_gmem_params gp = SG_GMEM_PARAMS_INIT;
  uint64_t pages = bytes / 4096 + 16;
  gp.table_pages = pages > gp.table_pages ? pages : gp.table_pages;
  if (tier == SG_GMEM_DRAM) {
    gp.dram_bytes = bytes;
  } else {
    gp.dram_bytes = 1u << 20; /* unused: the table needs some DRAM tier */
    gp.pmem_bytes = bytes;
    gp.pmem_path = pmem_path;
  }
  SG_CHECK(sg_gmem_create(NULL, &gp, &out->gm));
  sg_status st = sg_gmem_offload_optimizer_state(out->gm, s, g, tier, &out->off);
  if (st != SG_OK) {
    sg_gmem_destroy(out->gm);
    out->gm = NULL;
    return st;
  }
  out->tier = tier;
  for (int i = 0; i < sg_gmem_offload_count(out->off); i++) {
    size_t b = 0;
    if (sg_gmem_offload_info(out->off, i, NULL, NULL, &b) == SG_OK) out->bytes += b;
  }
  return SG_OK;
}

void sg__dist_offload_stop(sg__dist_offload *o) {
  sg_gmem_offload_destroy(o->off);
  sg_gmem_destroy(o->gm);
  *o = (sg__dist_offload){0};
}
