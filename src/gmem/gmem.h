/* The memory service's layer header: what the layers above use of src/gmem
 * beyond the public API (include/sgrt/gmem.h). gmem knows memory -- tiers,
 * addresses, tables -- and nothing of what is kept in it: a layer that keeps
 * pointers into an allocation (a session bound to it) moves them itself,
 * from the hook of a migration. */
#ifndef SG_GMEM_GMEM_H
#define SG_GMEM_GMEM_H

#include "sgrt/gmem.h"

/* "dram", "pmem" or "vram", for messages. */
const char *sg__tier_name(sg_gmem_tier t);

/* Called by sg__gm_migrate once the new frames hold the allocation's data
 * and before its entries switch to them, so both copies exist: new_ptr is
 * the allocation's new local address (NULL in VRAM). An error abandons the
 * migration (the allocation stays where it was) and is returned. */
typedef sg_status (*sg__gm_moved_fn)(void *ctx, void *new_ptr);

/* sg_gmem_migrate with the hook `moved` (may be NULL). */
sg_status sg__gm_migrate(sg_gmem *gm, sg_gva gva, sg_gmem_tier tier, sg__gm_moved_fn moved, void *ctx);

#endif /* SG_GMEM_GMEM_H */
