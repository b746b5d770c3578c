/* Files named by a user, opened for the loaders and writers of the library:
 * one place that opens a path without blocking, checks it is a regular file
 * and, for the loaders (.sgg, ONNX), maps it read-only. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"

const char *sg__file_kind(unsigned mode) {
  switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    default: return "not a regular file";
  }
}

static sg_status not_regular(const char *path, mode_t mode) {
  return sg__error(SG_ERR_IO, "'%s' is %s, not a regular file", path, sg__file_kind((unsigned)mode));
}

sg_status sg__open_regular(const char *path, bool write, int *fd_out) {
  *fd_out = -1;
  /* O_NONBLOCK: opening a FIFO blocks until its other end is opened, which
   * may be never; without it `sgrt verify fifo` hangs. O_NOCTTY: a terminal
   * never becomes the controlling one. */
  int flags = (write ? O_WRONLY | O_CREAT | O_TRUNC : O_RDONLY) | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
  int fd = open(path, flags, 0666);
  if (fd < 0) {
    int err = errno;
    /* ENXIO (a FIFO with no reader, a socket) and EISDIR say little; name
     * what the path is instead. This stat only words the message. */
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) return not_regular(path, sb.st_mode);
    if (write) return sg__error(SG_ERR_IO, "cannot open '%s' for writing: %s", path, strerror(err));
    return sg__error(SG_ERR_IO, "cannot open '%s': %s", path, strerror(err));
  }
  /* The descriptor, not the path: what was opened is what is checked. */
  struct stat sb;
  sg_status st = SG_OK;
  int fl;
  if (fstat(fd, &sb) != 0) st = sg__error(SG_ERR_IO, "cannot stat '%s': %s", path, strerror(errno));
  else if (!S_ISREG(sb.st_mode)) st = not_regular(path, sb.st_mode);
  else if ((fl = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
    st = sg__error(SG_ERR_IO, "cannot use '%s': %s", path, strerror(errno));
  if (st != SG_OK) {
    close(fd);
    return st;
  }
  *fd_out = fd;
  return SG_OK;
}

sg_status sg__fopen_regular(const char *path, bool write, FILE **out) {
  *out = NULL;
  int fd;
  SG_CHECK(sg__open_regular(path, write, &fd));
  FILE *f = fdopen(fd, write ? "w" : "rb");
  if (f == NULL) {
    int err = errno;
    close(fd);
    return sg__error(SG_ERR_IO, "cannot open '%s': %s", path, strerror(err));
  }
  *out = f;
  return SG_OK;
}

sg_status sg__map_file(const char *path, const void **map, size_t *size) {
  *map = NULL;
  *size = 0;
  int fd;
  SG_CHECK(sg__open_regular(path, false, &fd));
  struct stat sb;
  sg_status st = SG_OK;
  if (fstat(fd, &sb) != 0) st = sg__error(SG_ERR_IO, "cannot stat '%s': %s", path, strerror(errno));
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
