/* The on-disk compile cache (cache.h). Files are opened without following
 * links and checked on their descriptors (owner, type, size), so nothing
 * another user planted is ever loaded. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "compile/cache.h"
#include "core/core.h"

#define MANIFEST "manifest"
#define MANIFEST_MAGIC "sgrt-cache-entry 1"
#define MANIFEST_MAX 4096

struct sg__cache {
  char dir[PATH_MAX];
};

sg__cache_key sg__cache_key_of(const void *data, size_t bytes) {
  XXH128_hash_t h = XXH3_128bits(data, bytes);
  return (sg__cache_key){h.high64, h.low64};
}

void sg__cache_key_hex(sg__cache_key k, char out[33]) {
  snprintf(out, 33, "%016" PRIx64 "%016" PRIx64, k.hi, k.lo);
}

/* The directory a user's cache lives in, from the environment. */
sg_status sg__cache_default_dir(char *out, size_t cap) {
  const char *d = getenv("SG_CACHE_DIR");
  int n;
  if (d && *d) n = snprintf(out, cap, "%s", d);
  else if ((d = getenv("XDG_CACHE_HOME")) && *d == '/') n = snprintf(out, cap, "%s/sgrt", d);
  else if ((d = getenv("HOME")) && *d == '/') n = snprintf(out, cap, "%s/.cache/sgrt", d);
  else
    return sg__error(SG_ERR_NOT_FOUND, "compile cache: neither SG_CACHE_DIR, XDG_CACHE_HOME nor HOME is set");
  if (n < 0 || (size_t)n >= cap - 64)
    return sg__error(SG_ERR_RANGE, "compile cache: the path '%.64s...' is too long", out);
  return SG_OK;
}

/* Creates path and missing parents (0700), like mkdir -p. */
static sg_status make_dirs(const char *path) {
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s", path);
  for (char *c = p + 1;; c++) {
    if (*c != '/' && *c != '\0') continue;
    char keep = *c;
    *c = '\0';
    if (mkdir(p, 0700) != 0 && errno != EEXIST)
      return sg__error(SG_ERR_IO, "compile cache: cannot create '%s': %s", p, strerror(errno));
    *c = keep;
    if (keep == '\0') return SG_OK;
  }
}

/* A directory this user owns and nobody else may write to. */
static sg_status check_private(const struct stat *st, const char *path) {
  if (!S_ISDIR(st->st_mode))
    return sg__error(SG_ERR_DENIED, "compile cache: '%s' is %s, not a directory", path,
                     sg__file_kind(st->st_mode));
  if (st->st_uid != geteuid())
    return sg__error(SG_ERR_DENIED,
                     "compile cache: '%s' is owned by user %u, not by this user (%u): refused, since loading "
                     "code from it would run what its owner put there (SG_CACHE_DIR moves the cache)",
                     path, (unsigned)st->st_uid, (unsigned)geteuid());
  if (st->st_mode & 022)
    return sg__error(SG_ERR_DENIED,
                     "compile cache: '%s' may be written by others (mode %03o): refused, since loading code "
                     "from it would run what they put there (chmod 700 it, or SG_CACHE_DIR moves the cache)",
                     path, (unsigned)(st->st_mode & 0777));
  return SG_OK;
}

/* create: make missing directories (a session's open); else a missing
 * directory is SG_OK with *out NULL (management creates nothing). */
static sg_status open_dir(const char *dir, bool create, sg__cache **out) {
  *out = NULL;
  sg__cache *c = sg__calloc(1, sizeof *c);
  if (c == NULL) return sg__error(SG_ERR_NO_MEMORY, "compile cache: out of memory");
  sg_status st = SG_OK;
  if (dir) {
    if (strlen(dir) >= sizeof c->dir - 64)
      st = sg__error(SG_ERR_RANGE, "compile cache: the path is too long");
    else snprintf(c->dir, sizeof c->dir, "%s", dir);
  } else {
    st = sg__cache_default_dir(c->dir, sizeof c->dir);
  }
  if (st == SG_OK && create) st = make_dirs(c->dir);
  struct stat sb;
  if (st == SG_OK && stat(c->dir, &sb) != 0) {
    if (!create && errno == ENOENT) {
      sg__free(c);
      return SG_OK;
    }
    st = sg__error(SG_ERR_IO, "compile cache: cannot stat '%s': %s", c->dir, strerror(errno));
  }
  if (st == SG_OK) st = check_private(&sb, c->dir);
  if (st != SG_OK) {
    sg__free(c);
    return st;
  }
  *out = c;
  return SG_OK;
}

sg_status sg__cache_open(const char *dir, sg__cache **out) {
  *out = NULL;
  const char *off = getenv("SG_CACHE");
  if (dir == NULL && off && strcmp(off, "0") == 0) return SG_OK;
  return open_dir(dir, true, out);
}

sg_status sg__cache_open_existing(const char *dir, sg__cache **out) { return open_dir(dir, false, out); }

void sg__cache_close(sg__cache *c) { sg__free(c); }

const char *sg__cache_dir(const sg__cache *c) { return c->dir; }

static bool plain_name(const char *n) {
  if (n == NULL || n[0] == '\0' || n[0] == '.' || strlen(n) > 64) return false;
  for (const char *p = n; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' ||
          *p == '_' || *p == '-'))
      return false;
  return strcmp(n, MANIFEST) != 0;
}

/* What a check found: good, bad (why says what is wrong), or nothing for
 * want of memory (then the entry is neither used nor removed). */
enum { CHECK_OOM = -1, CHECK_BAD = 0, CHECK_OK = 1 };

/* Reads a regular file of ours inside an entry, without following links,
 * into a new buffer (at most `max` bytes): CHECK_*. */
static int read_own(const char *path, size_t max, void **data, size_t *bytes, char *why, size_t cap) {
  *data = NULL;
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return snprintf(why, cap, "cannot open '%s': %s", path, strerror(errno)), CHECK_BAD;
  struct stat sb;
  bool ok = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_uid == geteuid() && (sb.st_mode & 022) == 0 &&
            (uint64_t)sb.st_size <= max;
  if (!ok) {
    close(fd);
    return snprintf(why, cap, "'%s' is not a regular file of this user's, or too large", path), CHECK_BAD;
  }
  size_t n = (size_t)sb.st_size, got = 0;
  unsigned char *p = sg__malloc(n ? n : 1);
  while (p && got < n) {
    ssize_t r = read(fd, p + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fd);
  if (p == NULL) return snprintf(why, cap, "out of memory reading '%s'", path), CHECK_OOM;
  if (got != n) {
    sg__free(p);
    return snprintf(why, cap, "cannot read '%s'", path), CHECK_BAD;
  }
  *data = p;
  *bytes = n;
  return CHECK_OK;
}

/* Removes a directory and the files in it, following no link: a link in
 * its place is removed itself, never what it points to (a link named like
 * an entry must not empty its target). Returns 0 or the first errno. */
static int remove_entry(const char *path) {
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOTDIR || errno == ELOOP) return unlink(path) == 0 ? 0 : errno;
    return errno;
  }
  DIR *d = fdopendir(fd);
  if (d == NULL) {
    int e = errno;
    close(fd);
    return e;
  }
  int err = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    /* Flags 0: a directory inside is not removed (the cache makes none). */
    if (unlinkat(fd, e->d_name, 0) != 0 && err == 0) err = errno;
  }
  closedir(d);
  if (rmdir(path) != 0 && err == 0) err = errno;
  return err;
}

/* Checks an entry against its manifest: CHECK_*. */
static int entry_valid(const char *entry, char *why, size_t cap) {
  struct stat sb;
  if (lstat(entry, &sb) != 0) return snprintf(why, cap, "absent"), CHECK_BAD;
  if (!S_ISDIR(sb.st_mode) || sb.st_uid != geteuid() || (sb.st_mode & 022))
    return snprintf(why, cap, "%s, not a private directory of this user's", sg__file_kind(sb.st_mode)),
           CHECK_BAD;
  char path[2 * PATH_MAX];
  snprintf(path, sizeof path, "%s/" MANIFEST, entry);
  void *m;
  size_t mlen;
  int r = read_own(path, MANIFEST_MAX, &m, &mlen, why, cap);
  if (r != CHECK_OK) return r;
  char text[MANIFEST_MAX + 1];
  memcpy(text, m, mlen);
  text[mlen] = '\0';
  sg__free(m);
  char *save = NULL, *line = strtok_r(text, "\n", &save);
  if (line == NULL || strcmp(line, MANIFEST_MAGIC) != 0)
    return snprintf(why, cap, "the manifest's header is wrong"), CHECK_BAD;
  int files = 0;
  while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
    char name[65];
    unsigned long long size, sum;
    int used = 0;
    if (sscanf(line, "%64s %llu %16llx%n", name, &size, &sum, &used) != 3 || line[used] != '\0' ||
        !plain_name(name))
      return snprintf(why, cap, "manifest line '%.80s' is malformed", line), CHECK_BAD;
    snprintf(path, sizeof path, "%s/%s", entry, name);
    void *d;
    size_t n;
    if ((r = read_own(path, (size_t)1 << 30, &d, &n, why, cap)) != CHECK_OK) return r;
    uint64_t h = XXH3_64bits(d, n);
    sg__free(d);
    if (n != size)
      return snprintf(why, cap, "'%s' has %zu bytes, the manifest says %llu", name, n, size), CHECK_BAD;
    if (h != sum) return snprintf(why, cap, "'%s' does not match its checksum", name), CHECK_BAD;
    files++;
  }
  if (files == 0) return snprintf(why, cap, "the manifest lists no file"), CHECK_BAD;
  return CHECK_OK;
}

sg_status sg__cache_get(sg__cache *c, sg__cache_key key, char *path, size_t cap) {
  char hex[33];
  sg__cache_key_hex(key, hex);
  char entry[PATH_MAX + 128];
  snprintf(entry, sizeof entry, "%s/%s", c->dir, hex);
  char why[2 * PATH_MAX + 256];
  int r = entry_valid(entry, why, sizeof why);
  if (r == CHECK_OOM) return sg__error(SG_ERR_NO_MEMORY, "compile cache: entry %s: %s", hex, why);
  if (r != CHECK_OK) {
    if (strcmp(why, "absent") != 0) {
      SG_WARN("compile cache: entry %s is invalid (%s): rebuilding it", hex, why);
      /* Move it aside first, so a concurrent reader sees it absent, never half removed. */
      char trash[PATH_MAX + 128];
      snprintf(trash, sizeof trash, "%s/trash-%s-%d", c->dir, hex, (int)getpid());
      if (rename(entry, trash) == 0) remove_entry(trash);
    }
    return SG_ERR_NOT_FOUND;
  }
  if ((size_t)snprintf(path, cap, "%s", entry) >= cap)
    return sg__error(SG_ERR_RANGE, "compile cache: path too long");
  return SG_OK;
}

static sg_status write_synced(const char *path, const void *data, size_t len) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return sg__error(SG_ERR_IO, "compile cache: cannot create '%s': %s", path, strerror(errno));
  const unsigned char *p = data;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = n < 0 ? errno : ENOSPC;
      close(fd);
      return sg__error(SG_ERR_IO, "compile cache: cannot write '%s': %s", path, strerror(e));
    }
    p += n;
    len -= (size_t)n;
  }
  if (fsync(fd) != 0 || close(fd) != 0)
    return sg__error(SG_ERR_IO, "compile cache: cannot write '%s': %s", path, strerror(errno));
  return SG_OK;
}

static void sync_dir(const char *path) {
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
}

sg_status sg__cache_put(sg__cache *c, sg__cache_key key, const sg__cache_file *files, int n) {
  if (n < 1 || n > SG__CACHE_MAX_FILES)
    return sg__error(SG_ERR_INVALID_ARG, "compile cache: an entry of %d files (1..%d)", n,
                     SG__CACHE_MAX_FILES);
  for (int i = 0; i < n; i++)
    if (!plain_name(files[i].name) || (files[i].bytes > 0 && files[i].data == NULL))
      return sg__error(SG_ERR_INVALID_ARG, "compile cache: file %d ('%s') has a bad name or no data", i,
                       files[i].name ? files[i].name : "(null)");
  char hex[33];
  sg__cache_key_hex(key, hex);
  char tmp[PATH_MAX + 128], entry[PATH_MAX + 128], path[2 * PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s/tmp-%s-XXXXXX", c->dir, hex);
  snprintf(entry, sizeof entry, "%s/%s", c->dir, hex);
  if (mkdtemp(tmp) == NULL)
    return sg__error(SG_ERR_IO, "compile cache: cannot create a directory in '%s': %s", c->dir,
                     strerror(errno));
  sg_status st = SG_OK;
  sg__strbuf m = {0};
  sg__strbuf_put(&m, "%s\n", MANIFEST_MAGIC);
  for (int i = 0; i < n && st == SG_OK; i++) {
    snprintf(path, sizeof path, "%s/%s", tmp, files[i].name);
    st = write_synced(path, files[i].data, files[i].bytes);
    sg__strbuf_put(&m, "%s %zu %016" PRIx64 "\n", files[i].name, files[i].bytes,
                   (uint64_t)XXH3_64bits(files[i].data, files[i].bytes));
  }
  if (st == SG_OK && m.failed) st = sg__error(SG_ERR_NO_MEMORY, "compile cache: out of memory");
  if (st == SG_OK) {
    snprintf(path, sizeof path, "%s/" MANIFEST, tmp);
    st = write_synced(path, m.s, m.len);
  }
  sg__free(m.s);
  if (st == SG_OK) {
    sync_dir(tmp);
    if (rename(tmp, entry) == 0) {
      sync_dir(c->dir);
      return SG_OK;
    }
    /* Another process renamed its entry first: that one is used. */
    if (errno != EEXIST && errno != ENOTEMPTY)
      st = sg__error(SG_ERR_IO, "compile cache: cannot rename '%s' to '%s': %s", tmp, entry, strerror(errno));
  }
  remove_entry(tmp);
  return st;
}

/* ---- management ---------------------------------------------------------- */

static bool hex_digits(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
  return true;
}

sg__cache_name sg__cache_name_of(const char *name) {
  size_t n = strlen(name);
  if (n == 32 && hex_digits(name, 32)) return SG__CACHE_NAME_ENTRY;
  /* mkdtemp's six letters and digits, or a process id. */
  const char *rest = NULL;
  bool digits_only = false;
  if (strncmp(name, "tmp-", 4) == 0) rest = name + 4;
  else if (strncmp(name, "trash-", 6) == 0) rest = name + 6, digits_only = true;
  if (rest == NULL || strlen(rest) < 34 || !hex_digits(rest, 32) || rest[32] != '-')
    return SG__CACHE_NAME_OTHER;
  const char *tail = rest + 33;
  size_t len = strlen(tail);
  if (digits_only
          ? (len < 1 || len > 10 || strspn(tail, "0123456789") != len)
          : (len != 6 || strspn(tail, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") != 6))
    return SG__CACHE_NAME_OTHER;
  return SG__CACHE_NAME_TEMP;
}

sg_status sg__cache_check(const sg__cache *c, const char *name, bool *valid, char *why, size_t cap) {
  char entry[PATH_MAX + 128];
  snprintf(entry, sizeof entry, "%s/%s", c->dir, name);
  int r = entry_valid(entry, why, cap);
  *valid = r == CHECK_OK;
  return r == CHECK_OOM ? sg__error(SG_ERR_NO_MEMORY, "compile cache: entry %s: %s", name, why) : SG_OK;
}

sg_status sg__cache_read(const sg__cache *c, const char *name, const char *file, size_t max, void **data,
                         size_t *bytes, char *why, size_t cap) {
  char path[2 * PATH_MAX];
  snprintf(path, sizeof path, "%s/%s/%s", c->dir, name, file);
  int r = read_own(path, max, data, bytes, why, cap);
  if (r == CHECK_OOM) return sg__error(SG_ERR_NO_MEMORY, "compile cache: %s", why);
  return r == CHECK_OK ? SG_OK : SG_ERR_IO;
}

sg_status sg__cache_remove(sg__cache *c, const char *name) {
  sg__cache_name kind = sg__cache_name_of(name);
  if (kind == SG__CACHE_NAME_OTHER)
    return sg__error(SG_ERR_INVALID_ARG, "compile cache: '%.64s' is not a name the cache makes: left alone",
                     name);
  char path[PATH_MAX + 128], trash[PATH_MAX + 128];
  snprintf(path, sizeof path, "%s/%s", c->dir, name);
  struct stat sb;
  if (lstat(path, &sb) != 0) {
    if (errno == ENOENT)
      return sg__error(SG_ERR_NOT_FOUND, "compile cache: no entry %s in '%s'", name, c->dir);
    return sg__error(SG_ERR_IO, "compile cache: cannot stat '%s': %s", path, strerror(errno));
  }
  if (!S_ISDIR(sb.st_mode))
    return sg__error(SG_ERR_DENIED, "compile cache: '%s' is %s, not a directory the cache made: left alone",
                     path, sg__file_kind(sb.st_mode));
  if (sb.st_uid != geteuid())
    return sg__error(SG_ERR_DENIED,
                     "compile cache: '%s' is owned by user %u, not by this user (%u): left alone", path,
                     (unsigned)sb.st_uid, (unsigned)geteuid());
  const char *victim = path;
  if (kind == SG__CACHE_NAME_ENTRY) {
    /* As sg__cache_get: a concurrent reader sees it absent, never half removed. */
    snprintf(trash, sizeof trash, "%s/trash-%s-%d", c->dir, name, (int)getpid());
    if (rename(path, trash) == 0) victim = trash;
    else if (errno == ENOENT)
      return sg__error(SG_ERR_NOT_FOUND, "compile cache: no entry %s in '%s'", name, c->dir);
  }
  int e = remove_entry(victim);
  if (e != 0 && !(e == ENOENT && victim == path))
    return sg__error(SG_ERR_IO, "compile cache: cannot remove '%s': %s", victim, strerror(e));
  sync_dir(c->dir);
  return SG_OK;
}
