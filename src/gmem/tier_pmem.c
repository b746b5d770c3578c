/* The PMEM tier (SPEC A3) through libpmem: a DAX device mapped whole, an
 * unnamed file in a directory (gone when unmapped, so a crashed job leaves
 * nothing behind), or a named file. Where the mapping is not real persistent
 * memory (a file on an ordinary file system, as on these machines) libpmem
 * says so and durability is msync's; on persistent memory it is
 * pmem_persist's cache flushes. */
#include <errno.h>
#include <libpmem.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gmem/gmem_internal.h"

sg_status sg__tier_pmem_init(sg__tier *t, const char *path, size_t bytes) {
  t->kind = SG_GMEM_PMEM;
  if (path == NULL) path = getenv("SG_GMEM_PMEM_PATH");
  if (path == NULL || path[0] == '\0') {
    if (bytes > 0)
      return sg__error(
          SG_ERR_INVALID_ARG,
          "sg_gmem_create: pmem_bytes is %zu but no pmem_path (nor SG_GMEM_PMEM_PATH) names a file, "
          "directory or DAX device",
          bytes);
    return SG_OK;
  }
  struct stat sb;
  int exists = stat(path, &sb) == 0;
  int device = exists && S_ISCHR(sb.st_mode);
  if (bytes == 0 && !device) return SG_OK; /* a path alone asks for nothing */
  if (!device && bytes < SG__GM_PAGE)
    return sg__error(SG_ERR_INVALID_ARG, "sg_gmem_create: pmem_bytes %zu is less than one %u-byte page",
                     bytes, SG_GMEM_PAGE_SIZE);
  size_t mapped = 0;
  int is_pmem = 0;
  void *base;
  if (device) /* Device DAX: libpmem wants length 0 and no flags, and maps it all. */
    base = pmem_map_file(path, 0, 0, 0, &mapped, &is_pmem);
  else if (exists && S_ISDIR(sb.st_mode))
    base = pmem_map_file(path, bytes, PMEM_FILE_CREATE | PMEM_FILE_TMPFILE, 0600, &mapped, &is_pmem);
  else base = pmem_map_file(path, bytes, PMEM_FILE_CREATE, 0600, &mapped, &is_pmem);
  if (base == NULL)
    return sg__error(SG_ERR_IO, "sg_gmem_create: cannot map the PMEM tier at '%s' (%zu bytes): %s", path,
                     bytes, pmem_errormsg());
  t->base = base;
  t->mapped = mapped;
  t->is_pmem = is_pmem;
  size_t usable = bytes > 0 && bytes < mapped ? bytes : mapped;
  if (device && bytes > mapped) {
    sg__tier_pmem_unmap(t);
    return sg__error(SG_ERR_INVALID_ARG,
                     "sg_gmem_create: pmem_bytes %zu exceeds the DAX device '%s' (%zu bytes)", bytes, path,
                     mapped);
  }
  t->bytes = usable / SG__GM_PAGE * SG__GM_PAGE;
  SG_INFO("gmem: PMEM tier at '%s': %zu bytes, %s", path, t->bytes,
          is_pmem ? "persistent memory (pmem_persist)" : "not persistent memory (msync)");
  return sg__tier_frames_init(t);
}

void sg__tier_pmem_unmap(sg__tier *t) {
  if (t->base != NULL && pmem_unmap(t->base, t->mapped) != 0)
    SG_WARN("gmem: unmapping the PMEM tier failed: %s", strerror(errno));
  t->base = NULL;
}

sg_status sg__pmem_persist(sg__tier *t, uint64_t at, size_t n) {
  if (t->is_pmem) {
    pmem_persist(t->base + at, n);
    return SG_OK;
  }
  if (pmem_msync(t->base + at, n) != 0)
    return sg__error(SG_ERR_IO, "gmem: msync of %zu bytes of the PMEM tier failed: %s", n, strerror(errno));
  return SG_OK;
}
