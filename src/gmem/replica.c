/* Table replicas: every node keeps a copy of its left neighbour's shard of
 * the page table, which the neighbour pushes table page by table page with
 * RMA puts (SPEC A2: "table pages pushed with ucp_put_nbi"). When a node is
 * gone, the survivors still find where its pages were -- by GVA, from the
 * replica (SPEC A5, H4). A push sends only the table pages that differ from
 * what was pushed last (a shadow copy says which), each a snapshot of
 * sequence-locked entries, so the replica never holds half an entry. */
#include <string.h>

#include "gmem/gmem_internal.h"

static int buddy_of(const sg_gmem *gm, int node) { return (node + 1) % gm->nodes; }
static int left_of(const sg_gmem *gm) { return (gm->node + gm->nodes - 1) % gm->nodes; }

sg_status sg__gm_replica_init(sg_gmem *gm) {
  if (gm->comm == NULL || gm->nodes < 2) return SG_OK;
  gm->replica_pages = gm->peers[left_of(gm)].table_pages;
  gm->replica = sg__calloc((size_t)gm->replica_pages, sizeof *gm->replica);
  gm->shadow = sg__calloc((size_t)gm->table_pages, sizeof *gm->shadow);
  int64_t failed = gm->replica == NULL || gm->shadow == NULL, any = 0;
  /* Everybody learns whether anybody ran out of memory before the window
   * (a collective) is attempted, so that nobody waits for a node that left. */
  SG_CHECK(sg_comm_allreduce(gm->comm, &failed, &any, 1, SG_I64, SG_REDUCE_MAX));
  if (any)
    return sg__error(SG_ERR_NO_MEMORY, "sg_gmem_create: %s out of memory for the table replica",
                     failed ? "this node ran" : "another node ran");
  /* Both start as an unmapped table: a push sends only what differs. */
  for (uint64_t i = 0; i < gm->replica_pages; i++) gm->replica[i].word = sg__w_make(0, SG_GMEM_NODE_NONE, 0);
  for (uint64_t i = 0; i < gm->table_pages; i++) gm->shadow[i].word = sg__w_make(0, SG_GMEM_NODE_NONE, 0);
  return sg_comm_window_create(gm->comm, gm->replica, (size_t)gm->replica_pages * sizeof *gm->replica,
                               &gm->replica_win);
}

void sg__gm_replica_fini(sg_gmem *gm) {
  sg__free(gm->replica);
  sg__free(gm->shadow);
  gm->replica = NULL;
  gm->shadow = NULL;
}

/* A consistent snapshot of one entry of our shard; a busy one is taken as
 * it is (busy bit set), because waiting here could wait for a remote writer
 * that needs our progress. */
static sg__pte snapshot(const sg_gmem *gm, uint64_t idx) {
  for (;;) {
    uint64_t w1 = __atomic_load_n(&gm->table[idx].word, __ATOMIC_ACQUIRE);
    uint64_t off = __atomic_load_n(&gm->table[idx].offset, __ATOMIC_ACQUIRE);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&gm->table[idx].word, __ATOMIC_ACQUIRE) == w1) return (sg__pte){w1, off};
  }
}

sg_status sg_gmem_table_push(sg_gmem *gm, uint64_t *pushed) {
  if (gm == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_gmem_table_push: NULL gmem");
  if (pushed) *pushed = 0;
  if (gm->replica_win == NULL) return SG_OK;
  int buddy = buddy_of(gm, gm->node);
  uint64_t sent = 0;
  sg__pte page[SG__GM_TP];
  for (uint64_t first = 0; first < gm->table_pages; first += SG__GM_TP) {
    uint64_t n = gm->table_pages - first < SG__GM_TP ? gm->table_pages - first : SG__GM_TP;
    for (uint64_t i = 0; i < n; i++) page[i] = snapshot(gm, first + i);
    if (memcmp(page, gm->shadow + first, (size_t)n * sizeof *page) == 0) continue;
    /* The put reads from the shadow, which stays as it is until the flush. */
    memcpy(gm->shadow + first, page, (size_t)n * sizeof *page);
    SG_CHECK(sg_comm_put(gm->replica_win, buddy, (size_t)first * sizeof *page, gm->shadow + first,
                         (size_t)n * sizeof *page));
    sent++;
  }
  if (sent > 0) SG_CHECK(sg_comm_window_flush(gm->replica_win));
  gm->stats.table_pages_pushed += sent;
  if (pushed) *pushed = sent;
  return SG_OK;
}

sg_status sg_gmem_pte_read_replica(sg_gmem *gm, sg_gva gva, sg_gmem_pte *out) {
  const char *what = "sg_gmem_pte_read_replica";
  char gb[SG__GVA_BUF];
  if (gm == NULL || out == NULL) return sg__error(SG_ERR_INVALID_ARG, "%s: NULL gmem or out", what);
  uint64_t idx;
  SG_CHECK(sg__gm_check_gva(gm, gva, what, &idx));
  if (gm->replica_win == NULL)
    return sg__error(SG_ERR_UNSUPPORTED, "%s: a single node keeps no table replica", what);
  int holder = buddy_of(gm, sg_gva_node(gva));
  sg__pte e;
  if (holder == gm->node) {
    memcpy(&e, &gm->replica[idx], sizeof e);
  } else {
    SG_CHECK(sg_comm_get(gm->replica_win, holder, (size_t)idx * sizeof e, &e, sizeof e));
    SG_CHECK(sg_comm_window_flush(gm->replica_win));
  }
  out->node_id = sg__w_node(e.word);
  out->flags = sg__w_flags(e.word);
  out->version = sg__w_version(e.word);
  out->offset = e.offset;
  if (e.word & SG__GM_BUSY)
    return sg__error(SG_GMEM_ERR_STALE,
                     "%s: the entry of GVA %s was being updated when its owner last pushed", what,
                     sg__gva_str(gva, gb));
  return SG_OK;
}
