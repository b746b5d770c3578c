/* Memory tiers (SPEC A3) on one node: the PMEM tier as an unnamed file in a
 * directory and as a named file (checked on disk after persist), migration
 * between tiers that keeps GVAs, data and the version protocol, and VRAM
 * refused cleanly where the build has no CUDA backend. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"

static char dir[64];

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/sgrt-gmem-XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char path[128];
  snprintf(path, sizeof path, "%s/tier.pmem", dir);
  unlink(path);
  return rmdir(dir);
}

static sg_gmem *make(const char *pmem_path, size_t pmem_bytes) {
  sg_gmem_params p = SG_GMEM_PARAMS_INIT;
  p.table_pages = 256;
  p.dram_bytes = 64 * 4096;
  p.pmem_bytes = pmem_bytes;
  p.pmem_path = pmem_path;
  sg_gmem *gm;
  assert_status(sg_gmem_create(NULL, &p, &gm), SG_OK, NULL);
  return gm;
}

static void fill(uint8_t *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(i * 31 + seed);
}

static void test_pmem_directory(void **state) {
  (void)state;
  sg_gmem *gm = make(dir, 32 * 4096);
  /* An unnamed file: nothing appears in the directory. */
  char path[128];
  snprintf(path, sizeof path, "%s/tier.pmem", dir);
  assert_int_equal(access(path, F_OK), -1);
  sg_gva a;
  assert_status(sg_gmem_alloc(gm, SG_GMEM_PMEM, 5 * 4096, SG_GMEM_READ | SG_GMEM_WRITE, &a), SG_OK, NULL);
  sg_gmem_loc loc;
  assert_status(sg_gmem_translate(gm, a, SG_GMEM_READ, &loc), SG_OK, NULL);
  assert_int_equal(loc.tier, SG_GMEM_PMEM);
  uint8_t *p;
  assert_status(sg_gmem_ptr(gm, a, 5 * 4096, SG_GMEM_WRITE, (void **)&p), SG_OK, NULL);
  fill(p, 5 * 4096, 1);
  assert_status(sg_gmem_persist(gm, a, 5 * 4096), SG_OK, NULL);
  uint8_t want[5 * 4096], got[5 * 4096];
  fill(want, sizeof want, 1);
  assert_status(sg_gmem_read(gm, a, got, sizeof got, NULL), SG_OK, NULL);
  assert_memory_equal(got, want, sizeof want);
  assert_status(sg_gmem_alloc(gm, SG_GMEM_PMEM, 40 * 4096, 0, &a), SG_ERR_NO_MEMORY, "PMEM tier of node 0");
  assert_status(sg_gmem_destroy(gm), SG_OK, NULL);
}

static void test_pmem_file(void **state) {
  (void)state;
  char path[128];
  snprintf(path, sizeof path, "%s/tier.pmem", dir);
  sg_gmem *gm = make(path, 16 * 4096);
  struct stat sb;
  assert_int_equal(stat(path, &sb), 0);
  assert_true(sb.st_size == 16 * 4096);
  sg_gva a;
  assert_status(sg_gmem_alloc(gm, SG_GMEM_PMEM, 2 * 4096, SG_GMEM_READ | SG_GMEM_WRITE, &a), SG_OK, NULL);
  sg_gmem_loc loc;
  assert_status(sg_gmem_translate(gm, a, SG_GMEM_WRITE, &loc), SG_OK, NULL);
  uint8_t buf[2 * 4096];
  fill(buf, sizeof buf, 9);
  /* sg_gmem_write persists PMEM itself (msync on a file). */
  assert_status(sg_gmem_write(gm, a, buf, sizeof buf, NULL), SG_OK, NULL);
  /* The bytes are in the file at the frame's offset, as a reader of the file sees them. */
  int fd = open(path, O_RDONLY);
  assert_true(fd >= 0);
  uint8_t disk[2 * 4096];
  assert_int_equal(pread(fd, disk, sizeof disk, (off_t)loc.tier_offset), (ssize_t)sizeof disk);
  close(fd);
  assert_memory_equal(disk, buf, sizeof buf);
  assert_status(sg_gmem_persist(gm, sg_gva_make(0, a.lo + 4096), 4096), SG_OK, NULL);
  assert_status(sg_gmem_persist(gm, sg_gva_make(0, a.lo + 4096), 2 * 4096), SG_ERR_RANGE,
                "runs past the end");
  assert_status(sg_gmem_destroy(gm), SG_OK, NULL);
  /* A named file outlives the mapping. */
  assert_int_equal(stat(path, &sb), 0);
}

/* Moves an allocation DRAM -> PMEM -> DRAM: same GVAs, same bytes, one
 * version per move on every page, translations refreshed. */
static void test_migration(void **state) {
  (void)state;
  sg_gmem *gm = make(dir, 32 * 4096);
  sg_gva a, c;
  assert_status(sg_gmem_alloc(gm, SG_GMEM_DRAM, 3 * 4096, SG_GMEM_READ | SG_GMEM_WRITE, &a), SG_OK, NULL);
  assert_status(sg_gmem_alloc(gm, SG_GMEM_DRAM, 4096, SG_GMEM_READ | SG_GMEM_WRITE | SG_GMEM_COHERENT, &c),
                SG_OK, NULL);
  uint8_t data[3 * 4096], got[3 * 4096];
  fill(data, sizeof data, 5);
  assert_status(sg_gmem_write(gm, a, data, sizeof data, NULL), SG_OK, NULL);
  uint64_t x = 77;
  uint32_t v;
  assert_status(sg_gmem_write(gm, c, &x, 8, &v), SG_OK, NULL);
  assert_int_equal(v, 2);
  sg_gmem_loc before, after;
  assert_status(sg_gmem_translate(gm, sg_gva_make(0, a.lo + 8192), SG_GMEM_READ, &before), SG_OK, NULL);
  assert_int_equal(before.tier, SG_GMEM_DRAM);

  assert_status(sg_gmem_migrate(gm, a, SG_GMEM_PMEM), SG_OK, NULL);
  assert_status(sg_gmem_migrate(gm, c, SG_GMEM_PMEM), SG_OK, NULL);
  assert_status(sg_gmem_translate(gm, sg_gva_make(0, a.lo + 8192), SG_GMEM_READ, &after), SG_OK, NULL);
  assert_int_equal(after.tier, SG_GMEM_PMEM);
  assert_int_equal(after.version, before.version + 1);
  assert_ptr_not_equal(after.ptr, before.ptr);
  assert_status(sg_gmem_read(gm, a, got, sizeof got, NULL), SG_OK, NULL);
  assert_memory_equal(got, data, sizeof data);
  uint64_t y = 0;
  assert_status(sg_gmem_read(gm, c, &y, 8, &v), SG_OK, NULL);
  assert_true(y == 77);
  assert_int_equal(v, 3);
  /* A reader that held version 2 of the coherent page learns it is gone. */
  assert_status(sg_gmem_read_at(gm, c, &y, 8, 2), SG_GMEM_ERR_STALE, "not 2");

  assert_status(sg_gmem_migrate(gm, a, SG_GMEM_DRAM), SG_OK, NULL);
  assert_status(sg_gmem_translate(gm, sg_gva_make(0, a.lo + 8192), SG_GMEM_READ, &after), SG_OK, NULL);
  assert_int_equal(after.tier, SG_GMEM_DRAM);
  assert_int_equal(after.version, before.version + 2);
  memset(got, 0, sizeof got);
  assert_status(sg_gmem_read(gm, a, got, sizeof got, NULL), SG_OK, NULL);
  assert_memory_equal(got, data, sizeof data);
  /* Same tier: nothing to do. Errors name what is wrong. */
  assert_status(sg_gmem_migrate(gm, a, SG_GMEM_DRAM), SG_OK, NULL);
  assert_status(sg_gmem_migrate(gm, sg_gva_make(0, a.lo + 4096), SG_GMEM_PMEM), SG_ERR_NOT_FOUND,
                "does not start an allocation");
  assert_status(sg_gmem_migrate(gm, a, SG_GMEM_VRAM), SG_ERR_UNSUPPORTED, "no VRAM tier");
  assert_status(sg_gmem_migrate(gm, a, (sg_gmem_tier)9), SG_ERR_INVALID_ARG, "9 is not a tier");
  assert_status(sg_gmem_destroy(gm), SG_OK, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pmem_directory),
      cmocka_unit_test(test_pmem_file),
      cmocka_unit_test(test_migration),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
