/* Read-only file mappings for the loaders (.sgg, ONNX): one place that
 * checks the path is a regular file that fits in memory and maps it. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"

sg_status sg__map_file(const char *path, const void **map, size_t *size) {
  *map = NULL;
  *size = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return sg__error(SG_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
  struct stat sb;
  sg_status st = SG_OK;
  if (fstat(fd, &sb) != 0) st = sg__error(SG_ERR_IO, "cannot stat '%s': %s", path, strerror(errno));
  else if (!S_ISREG(sb.st_mode)) st = sg__error(SG_ERR_IO, "'%s' is not a regular file", path);
  else if ((uint64_t)sb.st_size > SIZE_MAX) st = sg__error(SG_ERR_RANGE, "'%s' is too large to map", path);
  else if (sb.st_size > 0) {
    /* Read-only and private: loaders use the bytes in place (initializers),
     * and a bug that wrote through them faults instead of changing the file. */
    void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) st = sg__error(SG_ERR_IO, "cannot map '%s': %s", path, strerror(errno));
    else *map = m, *size = (size_t)sb.st_size;
  }
  close(fd);
  return st;
}

void sg__unmap_file(const void *map, size_t size) {
  if (map) munmap((void *)map, size);
}
