/**
 * @file offload.h
 * Optimizer state offload: a session's optimizer state (SGD momentum
 * buffers, AdamW moments and step counts) kept in a memory tier of a global
 * page table -- DRAM, or PMEM such as a file mapping -- where each step
 * updates it in place, with no copies.
 *
 * @code
 *   sg_gmem_params gp = SG_GMEM_PARAMS_INIT;
 *   gp.pmem_bytes = 64 << 20;
 *   gp.pmem_path = "/mnt/pmem";
 *   sg_gmem *gm;
 *   sg_gmem_create(NULL, &gp, &gm);               // one node: this process's table
 *   sg_gmem_offload *off;
 *   if (sg_gmem_offload_optimizer_state(gm, session, graph, SG_GMEM_PMEM, &off) != SG_OK) return 1;
 *   for (int step = 0; step < n; step++) {
 *     sg_session_step(session);                    // updates the state in the PMEM tier
 *     sg_gmem_offload_persist(off);                // durable after the step
 *   }
 *   sg_session_destroy(session);                   // before the memory it is bound to
 *   sg_gmem_offload_destroy(off);
 *   sg_gmem_destroy(gm);
 * @endcode
 *
 * Threads: as the session and the sg_gmem: the thread that steps the
 * session, between steps.
 */
#ifndef SGRT_OFFLOAD_H
#define SGRT_OFFLOAD_H

#include <stddef.h>

#include "sgrt/export.h"
#include "sgrt/gmem.h"
#include "sgrt/graph.h"
#include "sgrt/session.h"
#include "sgrt/status.h"

SG_EXTERN_C_BEGIN

typedef struct sg_gmem_offload sg_gmem_offload;

/**
 * Moves every optimizer-state tensor (role SG_ROLE_OPTIMIZER_STATE) of a
 * compiled session into `tier` through the page table: one allocation per
 * tensor, bound with sg_session_bind_state(), so steps update it in place.
 * `g` is the graph the session was created from. The session must be
 * destroyed before the offload.
 * @return SG_OK; SG_ERR_NOT_FOUND when the graph has no optimizer state;
 *   SG_ERR_UNSUPPORTED for the VRAM tier (a CPU session binds host memory);
 *   errors of sg_gmem_alloc() and sg_session_bind_state() (naming the tensor).
 *   On error nothing stays allocated, but tensors bound before the failure
 *   stay in their (freed) tier memory: destroy the session.
 */
SG_API sg_status sg_gmem_offload_optimizer_state(sg_gmem *gm, sg_session *s, const sg_graph *g,
                                                 sg_gmem_tier tier, sg_gmem_offload **out);
/** Number of tensors offloaded, and the name, GVA and size of one. */
SG_API int sg_gmem_offload_count(const sg_gmem_offload *off);
SG_API sg_status sg_gmem_offload_info(const sg_gmem_offload *off, int i, const char **name, sg_gva *gva,
                                      size_t *bytes);
/** Makes the offloaded state durable (PMEM tier; nothing for DRAM): call after a step. */
SG_API sg_status sg_gmem_offload_persist(sg_gmem_offload *off);
/** Moves every offloaded tensor to another tier (same GVAs) and rebinds it. */
SG_API sg_status sg_gmem_offload_migrate(sg_gmem_offload *off, sg_gmem_tier tier);
/** Frees the tensors' memory. Destroy the session first. Accepts NULL. */
SG_API sg_status sg_gmem_offload_destroy(sg_gmem_offload *off);

SG_EXTERN_C_END

#endif /* SGRT_OFFLOAD_H */
