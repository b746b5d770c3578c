/* The page table on one node (no communicator): parameters, allocation,
 * translation and its errors (unknown node, offset out of range, missing
 * permission, unmapped page), the TLB and its invalidation, the entry bit
 * layout, compare-and-swap on the version, coherent reads and writes with
 * stale-version detection, sharding on one node, and allocation failures. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "gmem/gmem_internal.h"
#include "test_util.h"

static sg_gmem *make(uint64_t table_pages, size_t dram) {
  sg_gmem_params p = SG_GMEM_PARAMS_INIT;
  p.table_pages = table_pages;
  p.dram_bytes = dram;
  p.tlb_entries = 64;
  p.copy_pages = 4;
  sg_gmem *gm;
  assert_status(sg_gmem_create(NULL, &p, &gm), SG_OK, NULL);
  assert_int_equal(sg_gmem_node(gm), 0);
  assert_int_equal(sg_gmem_nodes(gm), 1);
  return gm;
}

static void test_params(void **state) {
  (void)state;
  sg_gmem *gm = (sg_gmem *)1;
  sg_gmem_params p = SG_GMEM_PARAMS_INIT;
  p.table_pages = 1;
  assert_status(sg_gmem_create(NULL, &p, &gm), SG_ERR_INVALID_ARG, "table_pages 1");
  assert_null(gm);
  p = sg_gmem_params_init();
  p.tlb_entries = 100;
  assert_status(sg_gmem_create(NULL, &p, &gm), SG_ERR_INVALID_ARG, "tlb_entries 100");
  p = sg_gmem_params_init();
  p.copy_pages = 0;
  assert_status(sg_gmem_create(NULL, &p, &gm), SG_ERR_INVALID_ARG, "copy_pages 0");
  p = sg_gmem_params_init();
  p.size = 8;
  assert_status(sg_gmem_create(NULL, &p, &gm), SG_ERR_INVALID_ARG, "SG_GMEM_PARAMS_INIT");
  p = sg_gmem_params_init();
  p.dram_bytes = 100;
  assert_status(sg_gmem_create(NULL, &p, &gm), SG_ERR_INVALID_ARG, "dram_bytes 100");
  p = sg_gmem_params_init();
  p.pmem_bytes = 1 << 20;
  p.pmem_path = "";
  assert_status(sg_gmem_create(NULL, &p, &gm), SG_ERR_INVALID_ARG, "no pmem_path");
  p.pmem_path = "/nonexistent-dir/x/y.pmem";
  assert_status(sg_gmem_create(NULL, &p, &gm), SG_ERR_IO, "/nonexistent-dir/x/y.pmem");
  /* VRAM: refused without the CUDA backend, SG_ERR_DEVICE without a GPU. */
  p = sg_gmem_params_init();
  p.vram_bytes = 1 << 20;
  sg_gpu_device *gpus;
  size_t n_gpus;
  int runtime;
  assert_status(sg_gpu_devices(&gpus, &n_gpus, NULL, &runtime, NULL, 0), SG_OK, NULL);
  sg_gpu_devices_free(gpus);
  if (runtime == 0) {
    assert_status(sg_gmem_create(NULL, &p, &gm), SG_ERR_UNSUPPORTED, "CUDA backend");
  } else if (n_gpus == 0) {
    assert_status(sg_gmem_create(NULL, &p, &gm), SG_ERR_DEVICE, "no usable GPU");
  } else {
    assert_status(sg_gmem_create(NULL, &p, &gm), SG_OK, NULL);
    assert_status(sg_gmem_destroy(gm), SG_OK, NULL);
  }
  assert_status(sg_gmem_create(NULL, NULL, NULL), SG_ERR_INVALID_ARG, "NULL out");
  assert_status(sg_gmem_destroy(NULL), SG_OK, NULL);
}

/* The bit layout of SPEC A2 as documented in gmem.h. */
static void test_entry_layout(void **state) {
  (void)state;
  assert_int_equal(sizeof(sg__pte), 16);
  uint64_t w = sg__w_make(0x89abcdef, 0x1234, 0x5);
  assert_true(w == 0x0005123489abcdefull);
  assert_int_equal(sg__w_version(w), 0x89abcdef);
  assert_int_equal(sg__w_node(w), 0x1234);
  assert_int_equal(sg__w_flags(w), 5);
  assert_false(w & SG__GM_BUSY);
  uint64_t off = SG_GMEM_LOC(SG_GMEM_PMEM, 3, 0x123000);
  assert_true(off == (1ull << 62 | 3ull << 56 | 0x123000));
  assert_int_equal(SG_GMEM_LOC_TIER(off), SG_GMEM_PMEM);
  assert_int_equal(SG_GMEM_LOC_DEVICE(off), 3);
  assert_true(SG_GMEM_LOC_BYTE(off) == 0x123000);
}

static void test_alloc_translate(void **state) {
  (void)state;
  sg_gmem *gm = make(64, 16 * 4096);
  sg_gva a, b, ro;
  assert_status(sg_gmem_alloc(gm, SG_GMEM_DRAM, 3 * 4096 + 1, SG_GMEM_READ | SG_GMEM_WRITE, &a), SG_OK, NULL);
  /* Page 0 is never handed out. */
  assert_true(a.hi == 0 && a.lo == 4096);
  assert_status(sg_gmem_alloc(gm, SG_GMEM_DRAM, 100, SG_GMEM_READ, &ro), SG_OK, NULL);
  assert_true(ro.lo == 5 * 4096);
  sg_gmem_loc loc;
  assert_status(sg_gmem_translate(gm, sg_gva_make(0, a.lo + 4096 + 17), SG_GMEM_READ | SG_GMEM_WRITE, &loc),
                SG_OK, NULL);
  assert_int_equal(loc.node, 0);
  assert_int_equal(loc.tier, SG_GMEM_DRAM);
  assert_int_equal(loc.version, 1);
  assert_int_equal(loc.flags, SG_GMEM_READ | SG_GMEM_WRITE);
  assert_true(loc.tier_offset == 4096 + 17); /* frames 0..3 of the tier */
  void *p;
  assert_status(sg_gmem_ptr(gm, a, 4 * 4096, SG_GMEM_WRITE, &p), SG_OK, NULL);
  assert_ptr_equal((uint8_t *)p + 4096 + 17, loc.ptr);
  assert_true(((uintptr_t)p % 64) == 0);
  /* Data written by address is read by GVA and the other way round. */
  memset(p, 0xab, 4 * 4096);
  uint8_t buf[8192];
  uint32_t v;
  assert_status(sg_gmem_read(gm, sg_gva_make(0, a.lo + 4000), buf, 200, NULL), SG_OK, NULL);
  for (int i = 0; i < 200; i++) assert_int_equal(buf[i], 0xab);
  assert_status(sg_gmem_write(gm, sg_gva_make(0, a.lo + 100), "hello", 6, &v), SG_OK, NULL);
  assert_int_equal(v, 1); /* a non-coherent write commits no version */
  assert_string_equal((char *)p + 100, "hello");

  /* Errors name the GVA and what is wrong. */
  assert_status(sg_gmem_translate(gm, sg_gva_make(3, 4096), SG_GMEM_READ, &loc), SG_ERR_NOT_FOUND,
                "0x0003:0x000000001000 names node 3, which is not in the job");
  assert_status(sg_gmem_translate(gm, sg_gva_make(0, 64 * 4096), SG_GMEM_READ, &loc), SG_ERR_RANGE,
                "beyond node 0's global range of 64 pages");
  assert_status(sg_gmem_translate(gm, sg_gva_make(0, 1ull << 62), SG_GMEM_READ, &loc), SG_ERR_RANGE,
                "beyond");
  assert_status(sg_gmem_translate(gm, ro, SG_GMEM_WRITE, &loc), SG_ERR_DENIED, "permits read access; write");
  assert_status(sg_gmem_write(gm, ro, "x", 1, NULL), SG_ERR_DENIED, "0x0000:0x000000005000");
  assert_status(sg_gmem_ptr(gm, ro, 1, SG_GMEM_WRITE, &p), SG_ERR_DENIED, "write access");
  assert_status(sg_gmem_translate(gm, sg_gva_make(0, 40 * 4096), SG_GMEM_READ, &loc), SG_ERR_NOT_FOUND,
                "is not mapped");
  assert_status(sg_gmem_translate(gm, sg_gva_make(0, 0), SG_GMEM_READ, &loc), SG_ERR_NOT_FOUND, "not mapped");
  sg_gva reserved = {1ull << 16, 0};
  assert_status(sg_gmem_translate(gm, reserved, SG_GMEM_READ, &loc), SG_ERR_INVALID_ARG, "reserved bits");
  assert_status(sg_gmem_translate(gm, a, 8, &loc), SG_ERR_INVALID_ARG, "access 0x8");
  assert_status(sg_gmem_translate(gm, a, SG_GMEM_READ, NULL), SG_ERR_INVALID_ARG, "NULL");
  assert_status(sg_gmem_read(gm, sg_gva_make(0, 63 * 4096), buf, 8192, NULL), SG_ERR_RANGE,
                "runs past the end");
  assert_status(sg_gmem_read(gm, a, buf, 4097, &v), SG_ERR_RANGE, "crosses a page boundary");
  assert_status(sg_gmem_read(gm, a, NULL, 1, NULL), SG_ERR_INVALID_ARG, "NULL buffer");
  assert_status(sg_gmem_ptr(gm, a, 5 * 4096, 0, &p), SG_ERR_RANGE, "runs past the end of its allocation");
  assert_status(sg_gmem_alloc(gm, SG_GMEM_DRAM, 0, 0, &b), SG_ERR_INVALID_ARG, "zero bytes");
  assert_status(sg_gmem_alloc(gm, SG_GMEM_DRAM, 1, 16, &b), SG_ERR_INVALID_ARG, "flags 0x10");
  assert_status(sg_gmem_alloc(gm, (sg_gmem_tier)7, 1, 0, &b), SG_ERR_INVALID_ARG, "7 is not a tier");
  assert_status(sg_gmem_alloc(gm, SG_GMEM_PMEM, 1, 0, &b), SG_ERR_UNSUPPORTED, "no PMEM tier");
  assert_status(sg_gmem_alloc(gm, SG_GMEM_DRAM, 12 * 4096, 0, &b), SG_ERR_NO_MEMORY,
                "no run of 12 free frames");
  assert_status(sg_gmem_alloc(gm, SG_GMEM_DRAM, 64 * 4096, 0, &b), SG_ERR_NO_MEMORY,
                "global range has no run");
  assert_status(sg_gmem_free(gm, sg_gva_make(0, a.lo + 4096)), SG_ERR_NOT_FOUND,
                "does not start an allocation");
  assert_status(sg_gmem_free(gm, sg_gva_make(2, a.lo)), SG_ERR_NOT_FOUND, "not in the job");

  /* Free unmaps: the TLB entry dies with it, and the frames are reused zeroed. */
  assert_status(sg_gmem_free(gm, a), SG_OK, NULL);
  assert_status(sg_gmem_translate(gm, a, SG_GMEM_READ, &loc), SG_ERR_NOT_FOUND, "not mapped");
  assert_status(sg_gmem_alloc(gm, SG_GMEM_DRAM, 4 * 4096, SG_GMEM_READ, &b), SG_OK, NULL);
  assert_status(sg_gmem_read(gm, b, buf, 4096, NULL), SG_OK, NULL);
  for (int i = 0; i < 4096; i++) assert_int_equal(buf[i], 0);
  sg_gmem_pte e;
  assert_status(sg_gmem_pte_read(gm, a, &e), SG_OK, NULL);
  assert_int_equal(e.version, 3); /* mapped, unmapped, mapped again */

  /* SG_GMEM_UNINIT: the frames keep what they held (here: the same frames, freed and taken again), and
   * it is not an entry flag. */
  sg_gva c, u;
  void *pc = NULL, *pu = NULL;
  memset(buf, 0xab, 4096);
  assert_status(sg_gmem_alloc(gm, SG_GMEM_DRAM, 4096, SG_GMEM_READ | SG_GMEM_WRITE, &c), SG_OK, NULL);
  assert_status(sg_gmem_write(gm, c, buf, 4096, NULL), SG_OK, NULL);
  assert_status(sg_gmem_ptr(gm, c, 4096, SG_GMEM_READ, &pc), SG_OK, NULL);
  assert_status(sg_gmem_free(gm, c), SG_OK, NULL);
  assert_status(sg_gmem_alloc(gm, SG_GMEM_DRAM, 4096, SG_GMEM_READ | SG_GMEM_WRITE | SG_GMEM_UNINIT, &u),
                SG_OK, NULL);
  assert_status(sg_gmem_ptr(gm, u, 4096, SG_GMEM_READ, &pu), SG_OK, NULL);
  assert_ptr_equal(pc, pu);
  assert_int_equal(((unsigned char *)pu)[0], 0xab);
  assert_int_equal(((unsigned char *)pu)[4095], 0xab);
  assert_status(sg_gmem_pte_read(gm, u, &e), SG_OK, NULL);
  assert_int_equal(e.flags, SG_GMEM_READ | SG_GMEM_WRITE);
  assert_status(sg_gmem_free(gm, u), SG_OK, NULL);
  assert_status(sg_gmem_alloc(gm, SG_GMEM_DRAM, 4096, SG_GMEM_READ | SG_GMEM_WRITE, &c), SG_OK, NULL);
  assert_status(sg_gmem_ptr(gm, c, 4096, SG_GMEM_READ, &pc), SG_OK, NULL);
  assert_ptr_equal(pc, pu);
  assert_int_equal(((unsigned char *)pc)[0], 0); /* without the flag: zeroed */
  assert_status(sg_gmem_destroy(gm), SG_OK, NULL);
}

static void test_tlb(void **state) {
  (void)state;
  sg_gmem *gm = make(1024, 512 * 4096);
  sg_gva a;
  assert_status(sg_gmem_alloc(gm, SG_GMEM_DRAM, 300 * 4096, SG_GMEM_READ, &a), SG_OK, NULL);
  sg_gmem_stats st0 = SG_GMEM_STATS_INIT, st1 = SG_GMEM_STATS_INIT;
  sg_gmem_loc loc;
  assert_status(sg_gmem_tlb_flush(gm), SG_OK, NULL);
  assert_status(sg_gmem_stats_get(gm, &st0), SG_OK, NULL);
  assert_status(sg_gmem_translate(gm, a, SG_GMEM_READ, &loc), SG_OK, NULL);
  assert_status(sg_gmem_translate(gm, a, SG_GMEM_READ, &loc), SG_OK, NULL);
  assert_status(sg_gmem_stats_get(gm, &st1), SG_OK, NULL);
  assert_true(st1.tlb_misses == st0.tlb_misses + 1);
  assert_true(st1.tlb_hits == st0.tlb_hits + 1);
  assert_status(sg_gmem_tlb_invalidate(gm, a), SG_OK, NULL);
  assert_status(sg_gmem_translate(gm, a, SG_GMEM_READ, &loc), SG_OK, NULL);
  assert_status(sg_gmem_stats_get(gm, &st0), SG_OK, NULL);
  assert_true(st0.tlb_misses == st1.tlb_misses + 1);
  /* A CAS on the entry invalidates the cached translation: the next
   * translation sees the new mapping, never the old one. */
  sg_gmem_pte want = {0, SG_GMEM_READ | SG_GMEM_WRITE, 0, SG_GMEM_LOC(SG_GMEM_DRAM, 0, 400 * 4096)}, got;
  assert_status(sg_gmem_pte_cas(gm, a, loc.version, &want, &got), SG_OK, NULL);
  assert_int_equal(got.version, loc.version + 1);
  assert_status(sg_gmem_translate(gm, a, SG_GMEM_WRITE, &loc), SG_OK, NULL);
  assert_true(loc.tier_offset == 400 * 4096);
  assert_int_equal(loc.version, got.version);
  /* More pages than slots: misses evict, every translation stays right. */
  for (int round = 0; round < 2; round++)
    for (uint64_t i = 1; i < 300; i++) {
      assert_status(sg_gmem_translate(gm, sg_gva_make(0, a.lo + i * 4096), SG_GMEM_READ, &loc), SG_OK, NULL);
      assert_true(loc.tier_offset == i * 4096);
    }
  assert_status(sg_gmem_tlb_invalidate(gm, sg_gva_make(5, 0)), SG_ERR_NOT_FOUND, "node 5");
  /* One node keeps no replica of its table. */
  uint64_t pushed = 7;
  sg_gmem_pte rep;
  assert_status(sg_gmem_table_push(gm, &pushed), SG_OK, NULL);
  assert_true(pushed == 0);
  assert_status(sg_gmem_pte_read_replica(gm, a, &rep), SG_ERR_UNSUPPORTED, "single node");
  assert_status(sg_gmem_destroy(gm), SG_OK, NULL);
}

static void test_pte_cas(void **state) {
  (void)state;
  sg_gmem *gm = make(64, 64 * 4096);
  sg_gva g = sg_gva_make(0, 10 * 4096); /* an entry no allocation holds */
  sg_gmem_pte e, got;
  assert_status(sg_gmem_pte_read(gm, g, &e), SG_OK, NULL);
  assert_int_equal(e.node_id, SG_GMEM_NODE_NONE);
  assert_int_equal(e.version, 0);
  sg_gmem_pte want = {0, SG_GMEM_READ, 0, SG_GMEM_LOC(SG_GMEM_DRAM, 0, 8 * 4096)};
  assert_status(sg_gmem_pte_cas(gm, g, 0, &want, &got), SG_OK, NULL);
  assert_int_equal(got.version, 1);
  /* A stale expectation fails and reports the entry as it is. */
  want.offset = SG_GMEM_LOC(SG_GMEM_DRAM, 0, 9 * 4096);
  assert_status(sg_gmem_pte_cas(gm, g, 0, &want, &got), SG_GMEM_ERR_STALE, "is at version 1, not 0");
  assert_int_equal(got.version, 1);
  assert_true(got.offset == SG_GMEM_LOC(SG_GMEM_DRAM, 0, 8 * 4096));
  assert_status(sg_gmem_pte_cas(gm, g, 1, &want, &got), SG_OK, NULL);
  assert_int_equal(got.version, 2);
  /* Desired entries that point nowhere valid are refused before anything changes. */
  sg_gmem_pte bad = want;
  bad.node_id = 4;
  assert_status(sg_gmem_pte_cas(gm, g, 2, &bad, NULL), SG_ERR_NOT_FOUND, "node_id 4");
  bad = want;
  bad.offset = SG_GMEM_LOC(SG_GMEM_DRAM, 0, 64 * 4096);
  assert_status(sg_gmem_pte_cas(gm, g, 2, &bad, NULL), SG_ERR_RANGE, "beyond node 0's DRAM tier");
  bad.offset = SG_GMEM_LOC(SG_GMEM_DRAM, 0, 100);
  assert_status(sg_gmem_pte_cas(gm, g, 2, &bad, NULL), SG_ERR_INVALID_ARG, "not page aligned");
  bad.offset = SG_GMEM_LOC(SG_GMEM_PMEM, 0, 0);
  assert_status(sg_gmem_pte_cas(gm, g, 2, &bad, NULL), SG_ERR_NOT_FOUND, "no PMEM tier");
  bad.offset = 3ull << 62;
  assert_status(sg_gmem_pte_cas(gm, g, 2, &bad, NULL), SG_ERR_INVALID_ARG, "tier 3");
  bad.offset = SG_GMEM_LOC(SG_GMEM_DRAM, 2, 0);
  assert_status(sg_gmem_pte_cas(gm, g, 2, &bad, NULL), SG_ERR_INVALID_ARG, "no device 2");
  bad = want;
  bad.flags = 0x10;
  assert_status(sg_gmem_pte_cas(gm, g, 2, &bad, NULL), SG_ERR_INVALID_ARG, "unknown bits");
  bad = (sg_gmem_pte){SG_GMEM_NODE_NONE, SG_GMEM_READ, 0, 0};
  assert_status(sg_gmem_pte_cas(gm, g, 2, &bad, NULL), SG_ERR_INVALID_ARG, "unmapped entry");
  assert_status(sg_gmem_pte_read(gm, g, &e), SG_OK, NULL);
  assert_int_equal(e.version, 2);
  /* An entry written around the API (as a faulty peer could) is refused,
   * never followed outside the tier. */
  gm->table[20].offset = SG_GMEM_LOC(SG_GMEM_DRAM, 0, 1ull << 40);
  gm->table[20].word = sg__w_make(1, 0, SG_GMEM_READ);
  uint64_t word;
  assert_status(sg_gmem_read(gm, sg_gva_make(0, 20 * 4096), &word, 8, NULL), SG_ERR_FORMAT,
                "points outside node 0");
  /* Unmapping by CAS. */
  bad.flags = 0;
  assert_status(sg_gmem_pte_cas(gm, g, 2, &bad, &got), SG_OK, NULL);
  sg_gmem_loc loc;
  assert_status(sg_gmem_translate(gm, g, 0, &loc), SG_ERR_NOT_FOUND, "not mapped");
  assert_status(sg_gmem_destroy(gm), SG_OK, NULL);
}

static void test_coherent_local(void **state) {
  (void)state;
  sg_gmem *gm = make(64, 64 * 4096);
  sg_gva c;
  assert_status(sg_gmem_alloc(gm, SG_GMEM_DRAM, 4096, SG_GMEM_READ | SG_GMEM_WRITE | SG_GMEM_COHERENT, &c),
                SG_OK, NULL);
  sg_gmem_mesi m;
  uint32_t v, v2;
  assert_status(sg_gmem_coherence_state(gm, c, &m, &v), SG_OK, NULL);
  assert_int_equal(m, SG_GMEM_EXCLUSIVE);
  assert_int_equal(v, 1);
  uint64_t x = 41;
  assert_status(sg_gmem_write(gm, c, &x, 8, &v), SG_OK, NULL);
  assert_int_equal(v, 2);
  assert_status(sg_gmem_coherence_state(gm, c, &m, &v2), SG_OK, NULL);
  assert_int_equal(m, SG_GMEM_MODIFIED);
  assert_int_equal(v2, 2);
  uint64_t y = 0;
  assert_status(sg_gmem_read(gm, c, &y, 8, &v2), SG_OK, NULL);
  assert_true(y == 41 && v2 == 2);
  /* Conditional writes: only on the version named. */
  x = 42;
  assert_status(sg_gmem_write_if(gm, c, &x, 8, 1, &v2), SG_GMEM_ERR_STALE, "is at version 2, not 1");
  assert_int_equal(v2, 2);
  assert_status(sg_gmem_write_if(gm, c, &x, 8, 2, &v2), SG_OK, NULL);
  assert_int_equal(v2, 3);
  /* Reads of a version that is gone are detected, not served. */
  y = 0;
  assert_status(sg_gmem_read_at(gm, c, &y, 8, 2), SG_GMEM_ERR_STALE, "stale version");
  assert_true(y == 0);
  assert_status(sg_gmem_read_at(gm, c, &y, 8, 3), SG_OK, NULL);
  assert_true(y == 42);
  /* Coherent pages are not written through pointers. */
  void *p;
  assert_status(sg_gmem_ptr(gm, c, 8, SG_GMEM_WRITE, &p), SG_ERR_DENIED, "COHERENT");
  assert_status(sg_gmem_ptr(gm, c, 8, SG_GMEM_READ, &p), SG_OK, NULL);
  assert_true(*(uint64_t *)p == 42);
  sg_gva plain;
  assert_status(sg_gmem_alloc(gm, SG_GMEM_DRAM, 4096, SG_GMEM_READ | SG_GMEM_WRITE, &plain), SG_OK, NULL);
  assert_status(sg_gmem_write_if(gm, plain, &x, 8, 1, NULL), SG_ERR_INVALID_ARG, "not COHERENT");
  assert_status(sg_gmem_coherence_state(gm, plain, &m, NULL), SG_ERR_INVALID_ARG, "not COHERENT");
  sg_gmem_stats s = SG_GMEM_STATS_INIT;
  assert_status(sg_gmem_stats_get(gm, &s), SG_OK, NULL);
  assert_true(s.stale >= 2);
  assert_true(s.commits >= 4);
  assert_status(sg_gmem_destroy(gm), SG_OK, NULL);
}

static void test_shard_one_node(void **state) {
  (void)state;
  sg_gmem *gm = make(64, 64 * 4096);
  sg_gmem_shard *sh;
  assert_status(sg_gmem_shard_create(gm, SG_GMEM_DRAM, 10000, 0, SG_GMEM_READ | SG_GMEM_WRITE, &sh), SG_OK,
                NULL);
  void *p;
  size_t begin, len;
  assert_status(sg_gmem_shard_local(sh, &p, &begin, &len), SG_OK, NULL);
  assert_int_equal(begin, 0);
  assert_int_equal(len, 10000);
  uint8_t in[10000], out[10000];
  for (int i = 0; i < 10000; i++) in[i] = (uint8_t)(i * 7);
  assert_status(sg_gmem_shard_write(sh, 0, in, sizeof in), SG_OK, NULL);
  assert_memory_equal(p, in, sizeof in);
  assert_status(sg_gmem_shard_read(sh, 5000, out, 5000), SG_OK, NULL);
  assert_memory_equal(out, in + 5000, 5000);
  int node;
  sg_gva g;
  size_t run;
  assert_status(sg_gmem_shard_locate(sh, 9999, &node, &g, &run), SG_OK, NULL);
  assert_int_equal(node, 0);
  assert_int_equal(run, 1);
  assert_status(sg_gmem_shard_locate(sh, 10000, &node, &g, &run), SG_ERR_RANGE,
                "beyond the 10000-byte buffer");
  assert_status(sg_gmem_shard_read(sh, 9000, out, 2000), SG_ERR_RANGE, "outside");
  assert_status(sg_gmem_shard_destroy(sh), SG_OK, NULL);
  sg_gmem_shard *bad = (sg_gmem_shard *)1;
  assert_status(sg_gmem_shard_create(gm, SG_GMEM_DRAM, 100, 3, 0, &bad), SG_ERR_INVALID_ARG, "align 3");
  assert_null(bad);
  assert_status(sg_gmem_destroy(gm), SG_OK, NULL);
}

/* Every allocation the setup and the operations make can fail cleanly:
 * an error, nothing leaked (LeakSanitizer), and the next try succeeds. */
static void test_allocation_failures(void **state) {
  (void)state;
  for (long n = 0;; n++) {
    sg_gmem_params p = SG_GMEM_PARAMS_INIT;
    p.table_pages = 64;
    p.dram_bytes = 16 * 4096;
    p.tlb_entries = 16;
    p.copy_pages = 1;
    sg_gmem *gm = NULL;
    sg__alloc_fail_after(n);
    sg_status st = sg_gmem_create(NULL, &p, &gm);
    sg_gva a = {0, 0};
    if (st == SG_OK) st = sg_gmem_alloc(gm, SG_GMEM_DRAM, 4096, SG_GMEM_READ, &a);
    if (st == SG_OK) st = sg_gmem_free(gm, a);
    sg__alloc_fail_after(-1);
    if (st != SG_OK) assert_int_equal(st, SG_ERR_NO_MEMORY);
    assert_status(sg_gmem_destroy(gm), SG_OK, NULL);
    if (st == SG_OK) break;
    assert_true(n < 100);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_params),          cmocka_unit_test(test_entry_layout),
      cmocka_unit_test(test_alloc_translate), cmocka_unit_test(test_tlb),
      cmocka_unit_test(test_pte_cas),         cmocka_unit_test(test_coherent_local),
      cmocka_unit_test(test_shard_one_node),  cmocka_unit_test(test_allocation_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
