/* Creating and destroying the global memory mapping: this node's table
 * shard, tiers, TLB and copy cache, and the exchange with every other node
 * (sizes, then one RMA window per kind of memory). Setup is local first and
 * collective after: a node whose local setup failed still joins the exchange
 * and says so, so that every node fails together instead of waiting for it. */
#include <sched.h>
#include <string.h>
#include <time.h>

#include "comm/comm.h"
#include "gmem/gmem_internal.h"

enum { REC_WORDS = 8, REC_MAGIC = 0x53474d31 /* 'SGM1' */ };

sg_gmem_params sg_gmem_params_init(void) {
  sg_gmem_params p = SG_GMEM_PARAMS_INIT;
  return p;
}

int64_t sg__gm_deadline(const sg_gmem *gm) { return sg__now_ms() + gm->timeout_ms; }

sg_status sg__gm_spin(sg_gmem *gm, int64_t deadline, const char *what, sg_gva gva) {
  char gb[SG__GVA_BUF];
  if (sg__now_ms() > deadline)
    return sg__error(
        SG_ERR_TIMEOUT,
        "%s: the page-table entry of GVA %s stayed busy for %d ms (did its writer fail mid-update?)", what,
        sg__gva_str(gva, gb), gm->timeout_ms);
  /* The writer holding the entry may be waiting for an operation only our
   * progress completes (UCX emulates atomics with active messages). */
  if (gm->comm != NULL) SG_CHECK(sg_comm_poll(gm->comm));
  sched_yield();
  return SG_OK;
}

static bool pow2(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

static sg_status check_params(const sg_gmem_params *p) {
  if (p->table_pages < 2 || p->table_pages > SG__GM_MAX_TABLE_PAGES)
    return sg__error(SG_ERR_INVALID_ARG, "sg_gmem_create: table_pages %llu is not in 2..%llu",
                     (unsigned long long)p->table_pages, (unsigned long long)SG__GM_MAX_TABLE_PAGES);
  if (!pow2(p->tlb_entries) || p->tlb_entries < 16 || p->tlb_entries > (1u << 24))
    return sg__error(SG_ERR_INVALID_ARG, "sg_gmem_create: tlb_entries %u is not a power of two in 16..%u",
                     p->tlb_entries, 1u << 24);
  if (!pow2(p->copy_pages) || p->copy_pages > 65536)
    return sg__error(SG_ERR_INVALID_ARG, "sg_gmem_create: copy_pages %u is not a power of two in 1..65536",
                     p->copy_pages);
  if (p->timeout_ms < 0)
    return sg__error(SG_ERR_INVALID_ARG, "sg_gmem_create: negative timeout_ms %d", p->timeout_ms);
  if (p->vram_device < 0)
    return sg__error(SG_ERR_INVALID_ARG, "sg_gmem_create: negative vram_device %d", p->vram_device);
  return SG_OK;
}

/* Everything that involves no other node. */
static sg_status setup_local(sg_gmem *gm, const sg_gmem_params *p) {
  gm->table_pages = p->table_pages;
  gm->meta_bytes = (size_t)sg__gm_meta_bytes(p->table_pages);
  gm->meta = sg__calloc(1, gm->meta_bytes);
  gm->pages_used = sg__calloc((size_t)((p->table_pages + 63) / 64), sizeof(uint64_t));
  for (int i = 0; i < 3; i++) gm->fetch[i] = sg__calloc(SG__GM_TP, sizeof(sg__pte));
  if (gm->meta == NULL || gm->pages_used == NULL || !gm->fetch[0] || !gm->fetch[1] || !gm->fetch[2])
    return sg__error(SG_ERR_NO_MEMORY, "sg_gmem_create: out of memory for a table of %llu pages",
                     (unsigned long long)p->table_pages);
  gm->table = (sg__pte *)(void *)gm->meta;
  gm->sharers = (uint64_t *)(void *)(gm->meta + sg__gm_sharers_off(p->table_pages));
  gm->buckets = (uint64_t *)(void *)(gm->meta + sg__gm_buckets_off(p->table_pages));
  for (uint64_t i = 0; i < p->table_pages; i++) gm->table[i].word = sg__w_make(0, SG_GMEM_NODE_NONE, 0);
  /* The owner may cache its own entries, so writers always tell it. */
  for (uint64_t tp = 0; tp < sg__gm_n_tp(p->table_pages); tp++) gm->sharers[tp] = 1ull << (gm->node % 64);
  /* Entry 0 is never handed out: a zeroed sg_gva is never a valid address. */
  sg__bits_set(gm->pages_used, 0, 1, true);
  SG_CHECK(sg__tier_dram_init(&gm->tier[SG_GMEM_DRAM], p->dram_bytes, gm->comm != NULL));
  SG_CHECK(sg__tier_pmem_init(&gm->tier[SG_GMEM_PMEM], p->pmem_path, p->pmem_bytes));
  SG_CHECK(sg__tier_vram_init(&gm->tier[SG_GMEM_VRAM], p->vram_device, p->vram_bytes));
  SG_CHECK(sg__tlb_init(gm, p->tlb_entries));
  return sg__copy_init(gm, p->copy_pages);
}

sg_status sg__gmem_gather(sg_gmem *gm, const uint64_t *rec, int words, sg_status local, const char *what,
                          uint64_t **all) {
  size_t bytes = sizeof *rec * (size_t)words;
  *all = sg__malloc(bytes * (size_t)gm->nodes);
  if (*all == NULL) return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", what);
  sg_status st = SG_OK;
  if (gm->comm != NULL) st = sg_comm_allgather(gm->comm, rec, *all, (size_t)words, SG_I64);
  else memcpy(*all, rec, bytes);
  return st != SG_OK ? st : local;
}

/* Every node's sizes; a node that failed locally reports its status. */
static sg_status exchange(sg_gmem *gm, sg_status local) {
  uint64_t rec[REC_WORDS] = {REC_MAGIC, (uint64_t)(int64_t)local, gm->table_pages};
  for (int t = 0; t < SG__GM_TIERS; t++) rec[3 + t] = gm->tier[t].bytes;
  rec[6] = SG_GMEM_PAGE_SIZE | (uint64_t)SG__GM_BUCKETS << 32;
  uint64_t *all;
  sg_status st = sg__gmem_gather(gm, rec, REC_WORDS, local, "sg_gmem_create", &all);
  if (all == NULL) return st;
  for (int n = 0; n < gm->nodes && st == SG_OK; n++) {
    const uint64_t *r = all + (size_t)n * REC_WORDS;
    /* A peer's record is input like any other (SPEC S1). */
    if (r[0] != REC_MAGIC || r[6] != rec[6]) {
      st = sg__error(SG_ERR_FORMAT,
                     "sg_gmem_create: node %d sent a malformed record (magic 0x%llx, page/buckets 0x%llx)", n,
                     (unsigned long long)r[0], (unsigned long long)r[6]);
    } else if (r[1] != 0) {
      sg_status peer = (sg_status)(int64_t)r[1];
      st = sg__error(peer < SG__STATUS_LAST || peer > 0 ? SG_ERR_COMM : peer,
                     "sg_gmem_create: node %d could not set up its global memory (%s); its log says why", n,
                     sg_status_str(peer));
    } else if (r[2] < 2 || r[2] > SG__GM_MAX_TABLE_PAGES) {
      st = sg__error(SG_ERR_FORMAT, "sg_gmem_create: node %d announced a table of %llu pages", n,
                     (unsigned long long)r[2]);
    } else {
      gm->peers[n].table_pages = r[2];
      for (int t = 0; t < SG__GM_TIERS; t++)
        gm->peers[n].tier_bytes[t] = r[3 + t] / SG__GM_PAGE * SG__GM_PAGE;
    }
  }
  sg__free(all);
  return st;
}

static sg_status make_windows(sg_gmem *gm) {
  if (gm->comm == NULL) return SG_OK;
  SG_CHECK(sg_comm_window_create(gm->comm, gm->meta, gm->meta_bytes, &gm->meta_win));
  /* VRAM is not reachable remotely (tier_vram.c). A tier that some node has
   * gets a window on every node, since windows are collective. */
  for (int t = SG_GMEM_DRAM; t <= SG_GMEM_PMEM; t++) {
    bool anywhere = false;
    for (int n = 0; n < gm->nodes; n++) anywhere |= gm->peers[n].tier_bytes[t] > 0;
    if (!anywhere) continue;
    sg__tier *tier = &gm->tier[t];
    if (t == SG_GMEM_DRAM && tier->bytes > 0) {
      SG_CHECK(sg__tier_dram_window(tier, gm->comm));
      continue;
    }
    void *base = tier->base;
    size_t bytes = tier->bytes;
    if (bytes == 0) {
      tier->win_dummy = sg__calloc(1, 64);
      if (tier->win_dummy == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_gmem_create: out of memory");
      base = tier->win_dummy;
      bytes = 64;
    }
    SG_CHECK(sg_comm_window_create(gm->comm, base, bytes, &tier->win));
  }
  return SG_OK;
}

static sg_status make_registered(sg_gmem *gm) {
  gm->registered = sg__calloc((size_t)gm->nodes, sizeof *gm->registered);
  if (gm->registered == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_gmem_create: out of memory");
  for (int n = 0; n < gm->nodes; n++) {
    uint64_t words = (sg__gm_n_tp(gm->peers[n].table_pages) + 63) / 64;
    gm->registered[n] = sg__calloc((size_t)words, sizeof(uint64_t));
    if (gm->registered[n] == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_gmem_create: out of memory");
  }
  return SG_OK;
}

static void free_all(sg_gmem *gm) {
  for (int t = 0; t < SG__GM_TIERS; t++) sg__tier_fini(&gm->tier[t]);
  if (gm->registered)
    for (int n = 0; n < gm->nodes; n++) sg__free(gm->registered[n]);
  sg__free(gm->registered);
  sg__tlb_fini(gm);
  sg__copy_fini(gm);
  for (int i = 0; i < 3; i++) sg__free(gm->fetch[i]);
  sg__free(gm->meta);
  sg__free(gm->pages_used);
  sg__free(gm->allocs);
  sg__free(gm->peers);
  sg__free(gm);
}

sg_status sg_gmem_create(sg_comm *comm, const sg_gmem_params *params, sg_gmem **out) {
  if (out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_gmem_create: NULL out");
  *out = NULL;
  /* A caller's older, shorter params get the defaults of the fields it lacks. A bad size fails this node's
   * local setup, which still joins the exchange below so that every node fails together. */
  sg_gmem_params q = SG_GMEM_PARAMS_INIT;
  sg_status read = sg__params_read(
      "sg_gmem_create", SG__VERSIONED(sg_gmem_params, table_pages, "SG_GMEM_PARAMS_INIT"), &q, params);
  const sg_gmem_params *p = &q;
  int nodes = comm ? sg_comm_size(comm) : 1;
  if (nodes < 1 || nodes >= (int)SG_GMEM_NODE_NONE)
    return sg__error(SG_ERR_UNSUPPORTED, "sg_gmem_create: %d nodes; node ids are 16-bit (at most %u nodes)",
                     nodes, SG_GMEM_NODE_NONE - 1);
  sg_gmem *gm = sg__calloc(1, sizeof *gm);
  if (gm == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_gmem_create: out of memory");
  gm->comm = comm;
  gm->node = comm ? sg_comm_rank(comm) : 0;
  gm->nodes = nodes;
  gm->stats.size = sizeof gm->stats;
  for (int t = 0; t < SG__GM_TIERS; t++) gm->tier[t].kind = (sg_gmem_tier)t;
  gm->peers = sg__calloc((size_t)nodes, sizeof *gm->peers);
  if (gm->peers == NULL) {
    sg__free(gm);
    return sg__error(SG_ERR_NO_MEMORY, "sg_gmem_create: out of memory");
  }
  sg_status local = read != SG_OK ? read : check_params(p);
  if (local == SG_OK) {
    gm->timeout_ms = p->timeout_ms ? p->timeout_ms : 10000;
    local = setup_local(gm, p);
  }
  sg_status st = exchange(gm, local);
  if (st == SG_OK) st = make_windows(gm);
  if (st == SG_OK) st = make_registered(gm);
  if (st == SG_OK) st = sg__gm_replica_init(gm);
  if (st != SG_OK) {
    /* Windows are collective: a failure after some were made leaves peers
     * holding theirs; destroying ours in the same order keeps us in step. */
    sg_comm_window_destroy(gm->meta_win);
    for (int t = 0; t < SG__GM_TIERS; t++) sg_comm_window_destroy(gm->tier[t].win);
    sg__gm_replica_fini(gm);
    free_all(gm);
    return st;
  }
  *out = gm;
  return SG_OK;
}

/* A communicator that failed or was aborted may still deliver a peer's
 * earlier put or atomic into the table, the frames or the table replica,
 * or the reply of our own earlier get into a fetch buffer, while it closes:
 * that memory goes to the communicator, freed after its transport (a free
 * here would be written after). */
static void hand_exposed_memory(sg_gmem *gm) {
  if (gm->comm == NULL || !sg__comm_unusable(gm->comm)) return;
  if (sg__comm_free_at_close(gm->comm, gm->meta) == SG_OK) gm->meta = NULL;
  for (int t = 0; t < SG__GM_TIERS; t++)
    if (gm->tier[t].kind == SG_GMEM_DRAM && sg__comm_free_at_close(gm->comm, gm->tier[t].raw) == SG_OK)
      gm->tier[t].raw = NULL;
  if (sg__comm_free_at_close(gm->comm, gm->replica) == SG_OK) gm->replica = NULL;
  for (int i = 0; i < 3; i++)
    if (sg__comm_free_at_close(gm->comm, gm->fetch[i]) == SG_OK) gm->fetch[i] = NULL;
}

sg_status sg_gmem_destroy(sg_gmem *gm) {
  if (gm == NULL) return SG_OK;
  /* Window destruction flushes and waits for every node, so nobody still
   * reads our table or frames when they are freed. */
  sg_status st = sg_comm_window_destroy(gm->meta_win);
  for (int t = 0; t < SG__GM_TIERS; t++) {
    sg_status s2 = sg_comm_window_destroy(gm->tier[t].win);
    if (st == SG_OK) st = s2;
  }
  sg_status s3 = sg_comm_window_destroy(gm->replica_win);
  if (st == SG_OK) st = s3;
  gm->replica_win = NULL;
  hand_exposed_memory(gm);
  sg__gm_replica_fini(gm);
  free_all(gm);
  return st;
}

int sg_gmem_node(const sg_gmem *gm) { return gm ? gm->node : -1; }
int sg_gmem_nodes(const sg_gmem *gm) { return gm ? gm->nodes : 0; }

sg_status sg_gmem_progress(sg_gmem *gm) {
  if (gm == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_gmem_progress: NULL gmem");
  return gm->comm ? sg_comm_poll(gm->comm) : SG_OK;
}

sg_status sg_gmem_stats_get(const sg_gmem *gm, sg_gmem_stats *out) {
  if (gm == NULL || out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_gmem_stats_get: NULL argument");
  return sg__out_write("sg_gmem_stats_get", SG__VERSIONED(sg_gmem_stats, tlb_hits, "SG_GMEM_STATS_INIT"), out,
                       &gm->stats);
}
