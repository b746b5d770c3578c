/* One rank of the multi-process tests of the global memory mapping (SPEC
 * A1-A5), started N times by `sgrt launch`. Each mode exits 0 when its rank
 * saw what it should:
 *   cas       every rank updates the same entries by compare-and-swap (entry
 *             offsets through sg_gmem_pte_cas, coherent page data through
 *             sg_gmem_write_if); the gathered history of successful
 *             old -> new transitions must be one linear chain per entry
 *   coherent  after a coherent write commits, no rank reads the old data
 *             without being told the version is stale; concurrent readers
 *             only ever see whole versions, in order
 *   errors    unknown node, offset out of range, missing permission,
 *             unmapped page and bad entries, across nodes
 *   remote    remote translation, reads and writes, a migration seen from
 *             another node, and ZeRO-style shards across all ranks */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../worker_check.h"
#include "sgrt/sgrt.h"

static int me, world;

#define EXPECT(call, status, needle)                                                                \
  do {                                                                                              \
    sg_status st_ = (call);                                                                         \
    if (st_ != (status)) FAIL("%s returned %s, not %s", #call, sg_status_str(st_), #status);        \
    if (strstr(sg_last_error(), (needle)) == NULL) FAIL("%s: message lacks '%s'", #call, (needle)); \
  } while (0)

static sg_gmem *make(sg_comm *c, const char *pmem_dir) {
  sg_gmem_params p = SG_GMEM_PARAMS_INIT;
  p.table_pages = 4096;
  p.dram_bytes = 1024 * 4096;
  p.tlb_entries = 256;
  if (pmem_dir) {
    p.pmem_path = pmem_dir;
    p.pmem_bytes = 64 * 4096;
  }
  sg_gmem *gm;
  CHECK_OK(sg_gmem_create(c, &p, &gm));
  return gm;
}

/* Every rank's GVA of one allocation each (allgather). */
static void share(sg_comm *c, sg_gva mine, sg_gva *all) {
  uint64_t rec[2] = {mine.hi, mine.lo};
  uint64_t *got = malloc(sizeof rec * (size_t)world);
  CHECK_OK(sg_comm_allgather(c, rec, got, 2, SG_I64));
  for (int r = 0; r < world; r++) all[r] = (sg_gva){got[2 * r], got[2 * r + 1]};
  free(got);
}

/* ---- cas ------------------------------------------------------------------ */

enum { U = 100, ENTRIES = 4 };

typedef struct hist {
  uint64_t entry, old_version, new_version, old_value, new_value;
} hist;

static uint64_t pte_value(const sg_gmem_pte *e) {
  return e->node_id == SG_GMEM_NODE_NONE ? 0 : SG_GMEM_LOC_BYTE(e->offset) / SG_GMEM_PAGE_SIZE;
}

/* Checks one entry's gathered transitions: the old versions are v0 .. v0+N-1,
 * each exactly once; each new version is its old + 1; values go up by one
 * along the chain; and the entry ends at v0 + N with value0 + N. */
static void check_chain(const hist *h, size_t n_all, uint64_t entry, uint64_t final_version,
                        uint64_t final_value) {
  size_t n = 0;
  uint64_t v0 = UINT64_MAX;
  for (size_t i = 0; i < n_all; i++)
    if (h[i].entry == entry) {
      n++;
      if (h[i].old_version < v0) v0 = h[i].old_version;
    }
  if (n != (size_t)world * U)
    FAIL("entry %llu: %zu successful updates, expected %d", (unsigned long long)entry, n, world * U);
  const hist **by = calloc(n, sizeof *by);
  for (size_t i = 0; i < n_all; i++) {
    if (h[i].entry != entry) continue;
    uint64_t k = h[i].old_version - v0;
    if (k >= n)
      FAIL("entry %llu: version %llu is outside the chain", (unsigned long long)entry,
           (unsigned long long)h[i].old_version);
    if (by[k] != NULL)
      FAIL("entry %llu: two updates from version %llu (a lost update)", (unsigned long long)entry,
           (unsigned long long)h[i].old_version);
    if (h[i].new_version != h[i].old_version + 1)
      FAIL("entry %llu: %llu -> %llu is not one step", (unsigned long long)entry,
           (unsigned long long)h[i].old_version, (unsigned long long)h[i].new_version);
    if (h[i].new_value != h[i].old_value + 1)
      FAIL("entry %llu: value %llu -> %llu", (unsigned long long)entry, (unsigned long long)h[i].old_value,
           (unsigned long long)h[i].new_value);
    by[k] = &h[i];
  }
  for (size_t k = 0; k + 1 < n; k++)
    if (by[k]->new_value != by[k + 1]->old_value)
      FAIL("entry %llu: version %llu wrote %llu but version %llu read %llu", (unsigned long long)entry,
           (unsigned long long)by[k]->new_version, (unsigned long long)by[k]->new_value,
           (unsigned long long)by[k + 1]->old_version, (unsigned long long)by[k + 1]->old_value);
  if (by[n - 1]->new_version != final_version || final_version != v0 + n)
    FAIL("entry %llu: chain ends at %llu, entry is at %llu", (unsigned long long)entry,
         (unsigned long long)by[n - 1]->new_version, (unsigned long long)final_version);
  if (final_value != by[0]->old_value + n || by[n - 1]->new_value != final_value)
    FAIL("entry %llu: final value %llu after %zu updates from %llu", (unsigned long long)entry,
         (unsigned long long)final_value, n, (unsigned long long)by[0]->old_value);
  free(by);
}

static void run_cas(sg_comm *c) {
  sg_gmem *gm = make(c, NULL);
  /* Entries 0,1: raw entries of ranks 0 and 1 (values in their offsets);
   * entries 2,3: coherent pages homed on ranks 0 and 1 (values in their data). */
  sg_gva page = {0, 0}, pages[64];
  if (me <= 1)
    CHECK_OK(sg_gmem_alloc(gm, SG_GMEM_DRAM, 8, SG_GMEM_READ | SG_GMEM_WRITE | SG_GMEM_COHERENT, &page));
  share(c, page, pages);
  sg_gva target[ENTRIES] = {sg_gva_make(0, 3000 * 4096), sg_gva_make(1, 3000 * 4096), pages[0], pages[1]};
  hist *log = calloc((size_t)ENTRIES * U, sizeof *log);
  size_t n = 0;
  int done[ENTRIES] = {0}, conflicts = 0;
  CHECK_OK(sg_comm_barrier(c));
  /* Round robin over the entries until each saw U successes of ours. */
  for (int turn = 0; n < (size_t)ENTRIES * U; turn++) {
    int e = (turn + me) % ENTRIES;
    if (done[e] == U) continue;
    hist h = {(uint64_t)e, 0, 0, 0, 0};
    sg_status st;
    if (e < 2) {
      sg_gmem_pte cur, want, got;
      CHECK_OK(sg_gmem_pte_read(gm, target[e], &cur));
      h.old_version = cur.version;
      h.old_value = pte_value(&cur);
      want = (sg_gmem_pte){(uint16_t)e, 0, 0,
                           SG_GMEM_LOC(SG_GMEM_DRAM, 0, (h.old_value + 1) * SG_GMEM_PAGE_SIZE)};
      st = sg_gmem_pte_cas(gm, target[e], cur.version, &want, &got);
      h.new_version = got.version;
      h.new_value = st == SG_OK ? pte_value(&got) : 0;
    } else {
      uint64_t x;
      uint32_t v, nv;
      CHECK_OK(sg_gmem_read(gm, target[e], &x, 8, &v));
      uint64_t y = x + 1;
      st = sg_gmem_write_if(gm, target[e], &y, 8, v, &nv);
      h.old_version = v;
      h.new_version = nv;
      h.old_value = x;
      h.new_value = y;
    }
    if (st == SG_OK) {
      log[n++] = h;
      done[e]++;
    } else if (st == SG_GMEM_ERR_STALE) {
      conflicts++;
    } else {
      FAIL("update of entry %d: %s", e, sg_status_str(st));
    }
  }
  /* Gather every rank's history and check it on every rank. */
  size_t words = sizeof(hist) / 8 * (size_t)ENTRIES * U;
  hist *all = calloc((size_t)world * ENTRIES * U, sizeof *all);
  CHECK_OK(sg_comm_allgather(c, log, all, words, SG_I64));
  for (int e = 0; e < ENTRIES; e++) {
    uint64_t fv, fx;
    if (e < 2) {
      sg_gmem_pte cur;
      CHECK_OK(sg_gmem_pte_read(gm, target[e], &cur));
      fv = cur.version;
      fx = pte_value(&cur);
    } else {
      uint32_t v;
      CHECK_OK(sg_gmem_read(gm, target[e], &fx, 8, &v));
      fv = v;
    }
    check_chain(all, (size_t)world * ENTRIES * U, (uint64_t)e, fv, fx);
  }
  printf("cas: %d updates per entry by rank %d, %d lost races (stale), history linear\n", U, me, conflicts);
  free(all);
  free(log);
  CHECK_OK(sg_comm_barrier(c));
  if (me <= 1) CHECK_OK(sg_gmem_free(gm, page));
  CHECK_OK(sg_gmem_destroy(gm));
}

/* ---- coherent ---------------------------------------------------------------- */

enum { TAG2 = 2048 / 8, SPAN = 2048 + 8 }; /* the version is written at byte 0 and byte 2048 */

/* Writes a page whose data names the version it commits. */
static uint32_t tagged_write(sg_gmem *gm, sg_gva p) {
  uint64_t buf[SPAN / 8] = {0};
  for (;;) {
    uint32_t v, nv;
    CHECK_OK(sg_gmem_read(gm, p, buf, SPAN, &v));
    buf[0] = buf[TAG2] = (uint64_t)v + 1;
    sg_status st = sg_gmem_write_if(gm, p, buf, SPAN, v, &nv);
    if (st == SG_OK) return nv;
    if (st != SG_GMEM_ERR_STALE) FAIL("tagged write: %s", sg_status_str(st));
  }
}

static uint32_t checked_read(sg_gmem *gm, sg_gva p) {
  uint64_t buf[SPAN / 8];
  uint32_t v;
  CHECK_OK(sg_gmem_read(gm, p, buf, SPAN, &v));
  if (buf[0] != v || buf[TAG2] != v)
    FAIL("read version %u but the data says %llu / %llu (a torn or stale read)", v,
         (unsigned long long)buf[0], (unsigned long long)buf[TAG2]);
  return v;
}

static void check_state(sg_gmem *gm, sg_gva p, sg_gmem_mesi want, const char *when) {
  sg_gmem_mesi m;
  uint32_t v;
  CHECK_OK(sg_gmem_coherence_state(gm, p, &m, &v));
  if (m != want) {
    sg_gmem_stats s = SG_GMEM_STATS_INIT;
    sg_gmem_stats_get(gm, &s);
    FAIL("%s: state %d, expected %d (v %u, fills %llu hits %llu)", when, (int)m, (int)want, v,
         (unsigned long long)s.copy_fills, (unsigned long long)s.copy_hits);
  }
}

static void run_coherent(sg_comm *c) {
  sg_gmem *gm = make(c, NULL);
  /* P homed on rank 0, Q on rank 1. */
  sg_gva mine = {0, 0}, all[64];
  if (me <= 1)
    CHECK_OK(sg_gmem_alloc(gm, SG_GMEM_DRAM, 4096, SG_GMEM_READ | SG_GMEM_WRITE | SG_GMEM_COHERENT, &mine));
  share(c, mine, all);
  sg_gva P = all[0], Q = all[1];
  if (me == 0) tagged_write(gm, P);
  if (me == 1) tagged_write(gm, Q);
  CHECK_OK(sg_comm_barrier(c));
  /* Everybody reads both: copies (or the home frame) at the same versions. */
  uint32_t p1 = checked_read(gm, P), q1 = checked_read(gm, Q);
  if (me != 0) check_state(gm, P, SG_GMEM_SHARED, "after reading P");
  CHECK_OK(sg_comm_barrier(c));
  /* Reads are one-sided: the last writer stays Modified. */
  if (me == 0) check_state(gm, P, SG_GMEM_MODIFIED, "home and last writer of P after others read it");

  /* Rank 1 writes P (homed elsewhere), rank 0 writes Q. */
  uint32_t p2 = 0, q2 = 0;
  if (me == 1) p2 = tagged_write(gm, P);
  if (me == 0) q2 = tagged_write(gm, Q);
  CHECK_OK(sg_comm_barrier(c));
  /* No rank gets the old data: asking for the old version is stale, and the
   * destination is left alone; the state of a copy that was dropped is I. */
  uint64_t junk[SPAN / 8];
  memset(junk, 0x5a, sizeof junk);
  EXPECT(sg_gmem_read_at(gm, P, junk, SPAN, p1), SG_GMEM_ERR_STALE, "stale version");
  EXPECT(sg_gmem_read_at(gm, Q, junk, SPAN, q1), SG_GMEM_ERR_STALE, "stale version");
  if (junk[0] != 0x5a5a5a5a5a5a5a5aull) FAIL("a stale read copied data");
  if (me == 2 || me == 3) check_state(gm, P, SG_GMEM_INVALID, "copy of P after rank 1 wrote it");
  if (me == 1) check_state(gm, P, SG_GMEM_MODIFIED, "writer of P");
  if (me == 0) check_state(gm, P, SG_GMEM_SHARED, "home of P after rank 1 wrote it");
  uint32_t p3 = checked_read(gm, P), q3 = checked_read(gm, Q);
  if (p3 != p1 + 1 || q3 != q1 + 1) FAIL("after one write each: P %u -> %u, Q %u -> %u", p1, p3, q1, q3);
  if ((me == 1 && p2 != p3) || (me == 0 && q2 != q3)) FAIL("writer's version differs from the readers'");
  CHECK_OK(sg_comm_barrier(c));

  /* Concurrent phase: rank 2 writes P K times while everyone else reads it;
   * every read is one whole version, and versions never go back. */
  enum { K = 150 };
  uint32_t final = p3 + K;
  if (me == 2) {
    for (int k = 0; k < K; k++) tagged_write(gm, P);
  } else {
    uint32_t last = 0;
    long reads = 0;
    while (last != final) {
      uint32_t v = checked_read(gm, P);
      if (v < last) FAIL("version went back from %u to %u", last, v);
      last = v;
      reads++;
      /* The home and the writer's targets serve remote atomics only while
       * they progress (UCX emulates them with active messages). */
      CHECK_OK(sg_gmem_progress(gm));
    }
    if (me == 0) printf("coherent: %ld reads of P while rank 2 committed %d versions\n", reads, K);
  }
  CHECK_OK(sg_comm_barrier(c));
  if (checked_read(gm, P) != final) FAIL("P is not at version %u after the writes", final);
  sg_gmem_stats s = SG_GMEM_STATS_INIT;
  CHECK_OK(sg_gmem_stats_get(gm, &s));
  if (me == 2 && s.invalidations_sent == 0) FAIL("the writer invalidated nobody");
  CHECK_OK(sg_comm_barrier(c));
  if (me <= 1) CHECK_OK(sg_gmem_free(gm, mine));
  CHECK_OK(sg_gmem_destroy(gm));
}

/* ---- errors -------------------------------------------------------------------- */

static void run_errors(sg_comm *c) {
  /* A node whose setup fails makes every node fail, at once and saying who. */
  sg_gmem_params badp = SG_GMEM_PARAMS_INIT;
  if (me == 1) badp.tlb_entries = 100;
  sg_gmem *none = NULL;
  if (me == 1) EXPECT(sg_gmem_create(c, &badp, &none), SG_ERR_INVALID_ARG, "tlb_entries 100");
  else EXPECT(sg_gmem_create(c, &badp, &none), SG_ERR_INVALID_ARG, "node 1 could not set up");
  if (none != NULL) FAIL("a failed create returned a handle");
  sg_gmem *gm = make(c, NULL);
  sg_gva mine, all[64];
  CHECK_OK(sg_gmem_alloc(gm, SG_GMEM_DRAM, 4096, SG_GMEM_READ, &mine)); /* read-only */
  share(c, mine, all);
  int peer = (me + 1) % world;
  sg_gmem_loc loc;
  uint64_t x = 1;
  char text[SG_GVA_STR_MAX], needle[64];
  CHECK_OK(sg_gva_format(all[peer], text, sizeof text));
  /* A peer's read-only page: readable, not writable, from here. */
  CHECK_OK(sg_gmem_translate(gm, all[peer], SG_GMEM_READ, &loc));
  if (loc.node != peer || loc.ptr != NULL) FAIL("remote translation: node %u ptr %p", loc.node, loc.ptr);
  EXPECT(sg_gmem_translate(gm, all[peer], SG_GMEM_WRITE, &loc), SG_ERR_DENIED, text);
  EXPECT(sg_gmem_write(gm, all[peer], &x, 8, NULL), SG_ERR_DENIED, "permits read access");
  /* Unknown node, out of range, unmapped. */
  snprintf(needle, sizeof needle, "names node %d, which is not in the job", world);
  EXPECT(sg_gmem_translate(gm, sg_gva_make((uint16_t)world, 4096), SG_GMEM_READ, &loc), SG_ERR_NOT_FOUND,
         needle);
  EXPECT(sg_gmem_read(gm, sg_gva_make((uint16_t)peer, 4096ull * 4096), &x, 8, NULL), SG_ERR_RANGE,
         "beyond node");
  EXPECT(sg_gmem_translate(gm, sg_gva_make((uint16_t)peer, 2000 * 4096), SG_GMEM_READ, &loc),
         SG_ERR_NOT_FOUND, "is not mapped");
  /* Entries that would point outside a node's memory are refused. */
  sg_gmem_pte bad = {(uint16_t)peer, SG_GMEM_READ, 0, SG_GMEM_LOC(SG_GMEM_DRAM, 0, 1024ull * 4096)};
  EXPECT(sg_gmem_pte_cas(gm, sg_gva_make((uint16_t)peer, 2000 * 4096), 0, &bad, NULL), SG_ERR_RANGE,
         "DRAM tier of 4194304 bytes");
  bad.offset = SG_GMEM_LOC(SG_GMEM_PMEM, 0, 0);
  EXPECT(sg_gmem_pte_cas(gm, sg_gva_make((uint16_t)peer, 2000 * 4096), 0, &bad, NULL), SG_ERR_NOT_FOUND,
         "has no PMEM tier");
  /* Only the owner frees or points into its allocations. */
  EXPECT(sg_gmem_free(gm, all[peer]), SG_ERR_INVALID_ARG, "only its owner");
  void *p;
  EXPECT(sg_gmem_ptr(gm, all[peer], 8, SG_GMEM_READ, &p), SG_ERR_INVALID_ARG, "local address");
  CHECK_OK(sg_comm_barrier(c));
  CHECK_OK(sg_gmem_free(gm, mine));
  CHECK_OK(sg_gmem_destroy(gm));
}

/* ---- remote ----------------------------------------------------------------------- */

static void run_remote(sg_comm *c) {
  char dir[64];
  snprintf(dir, sizeof dir, "/tmp/sgrt-gmem-w%d-XXXXXX", me);
  if (mkdtemp(dir) == NULL) FAIL("mkdtemp");
  sg_gmem *gm = make(c, dir);
  sg_gva mine, all[64];
  CHECK_OK(sg_gmem_alloc(gm, SG_GMEM_DRAM, 3 * 4096, SG_GMEM_READ | SG_GMEM_WRITE, &mine));
  uint8_t *p;
  CHECK_OK(sg_gmem_ptr(gm, mine, 3 * 4096, SG_GMEM_WRITE, (void **)&p));
  for (int i = 0; i < 3 * 4096; i++) p[i] = (uint8_t)(i + me);
  share(c, mine, all);
  int peer = (me + 1) % world;
  uint8_t buf[3 * 4096];
  /* Remote reads, across pages, and a remote write seen by the owner. */
  CHECK_OK(sg_gmem_read(gm, sg_gva_make((uint16_t)peer, all[peer].lo + 100), buf, 2 * 4096 + 50, NULL));
  for (int i = 0; i < 2 * 4096 + 50; i++)
    if (buf[i] != (uint8_t)(i + 100 + peer)) FAIL("remote read byte %d", i);
  sg_gmem_loc loc;
  CHECK_OK(sg_gmem_translate(gm, all[peer], SG_GMEM_READ, &loc));
  if (loc.node != peer || loc.tier != SG_GMEM_DRAM) FAIL("translation of the peer's page");
  uint64_t tag = 0xc0ffee00ull + (uint64_t)me;
  CHECK_OK(sg_gmem_write(gm, sg_gva_make((uint16_t)peer, all[peer].lo + 4096), &tag, 8, NULL));
  CHECK_OK(sg_comm_barrier(c));
  int left = (me + world - 1) % world;
  if (*(uint64_t *)(p + 4096) != 0xc0ffee00ull + (uint64_t)left)
    FAIL("the left neighbour's write is missing");
  /* The owner migrates to PMEM: the neighbour's cached translation is
   * invalidated, and it reads the same bytes from the new tier. */
  CHECK_OK(sg_gmem_migrate(gm, mine, SG_GMEM_PMEM));
  CHECK_OK(sg_comm_barrier(c));
  sg_gmem_loc moved;
  CHECK_OK(sg_gmem_translate(gm, all[peer], SG_GMEM_READ, &moved));
  if (moved.tier != SG_GMEM_PMEM || moved.version != loc.version + 1)
    FAIL("after migration: tier %d version %u (was %u)", (int)moved.tier, moved.version, loc.version);
  uint64_t back;
  CHECK_OK(sg_gmem_read(gm, sg_gva_make((uint16_t)peer, all[peer].lo + 4096), &back, 8, NULL));
  if (back != tag) FAIL("data lost in migration");
  sg_gmem_stats s = SG_GMEM_STATS_INIT;
  CHECK_OK(sg_gmem_stats_get(gm, &s));
  if (s.remote_table_fetches == 0) FAIL("no table page was fetched remotely");

  /* Table replicas: each rank pushes its table to its right neighbour;
   * then anyone can read a rank's entries from there, as recovery would. */
  uint64_t pushed = 0, again = 0;
  CHECK_OK(sg_gmem_table_push(gm, &pushed));
  CHECK_OK(sg_gmem_table_push(gm, &again));
  if (pushed == 0 || again != 0)
    FAIL("pushed %llu table pages, then %llu unchanged", (unsigned long long)pushed,
         (unsigned long long)again);
  CHECK_OK(sg_comm_barrier(c));
  for (int r = 0; r < world; r++)
    for (uint64_t pg = 0; pg < 4; pg++) {
      sg_gva g = sg_gva_make((uint16_t)r, all[r].lo + pg * 4096);
      sg_gmem_pte live, rep;
      CHECK_OK(sg_gmem_pte_read(gm, g, &live));
      CHECK_OK(sg_gmem_pte_read_replica(gm, g, &rep));
      if (live.version != rep.version || live.node_id != rep.node_id || live.flags != rep.flags ||
          live.offset != rep.offset)
        FAIL("replica of rank %d page %llu: version %u node %u, live %u node %u", r, (unsigned long long)pg,
             rep.version, rep.node_id, live.version, live.node_id);
    }
  CHECK_OK(sg_comm_barrier(c));

  /* Shards: 4 pieces of a 100000-byte buffer, one per rank. */
  sg_gmem_shard *sh;
  CHECK_OK(sg_gmem_shard_create(gm, SG_GMEM_DRAM, 100000, 64, SG_GMEM_READ | SG_GMEM_WRITE, &sh));
  void *piece;
  size_t begin, len;
  CHECK_OK(sg_gmem_shard_local(sh, &piece, &begin, &len));
  for (size_t i = 0; i < len; i++) ((uint8_t *)piece)[i] = (uint8_t)((begin + i) * 13);
  int owner;
  sg_gva g;
  CHECK_OK(sg_gmem_shard_locate(sh, 99999, &owner, &g, NULL));
  if (owner != world - 1 || sg_gva_node(g) != world - 1) FAIL("the last byte belongs to node %d", owner);
  CHECK_OK(sg_comm_barrier(c));
  uint8_t *whole = malloc(100000);
  CHECK_OK(sg_gmem_shard_read(sh, 0, whole, 100000));
  for (int i = 0; i < 100000; i++)
    if (whole[i] != (uint8_t)(i * 13)) FAIL("shard byte %d", i);
  free(whole);
  CHECK_OK(sg_gmem_shard_destroy(sh));
  CHECK_OK(sg_comm_barrier(c));
  CHECK_OK(sg_gmem_free(gm, mine));
  CHECK_OK(sg_gmem_destroy(gm));
  rmdir(dir);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: gmem_worker cas|coherent|errors|remote\n");
    return 2;
  }
  sg_comm_params cp = SG_COMM_PARAMS_INIT;
  sg_comm *c;
  CHECK_OK(sg_comm_create(&cp, &c));
  me = sg_comm_rank(c);
  world = sg_comm_size(c);
  if (world > 64) FAIL("at most 64 ranks");
  if (strcmp(argv[1], "cas") == 0) run_cas(c);
  else if (strcmp(argv[1], "coherent") == 0) run_coherent(c);
  else if (strcmp(argv[1], "errors") == 0) run_errors(c);
  else if (strcmp(argv[1], "remote") == 0) run_remote(c);
  else FAIL("unknown mode %s", argv[1]);
  CHECK_OK(sg_comm_destroy(c));
  return 0;
}
