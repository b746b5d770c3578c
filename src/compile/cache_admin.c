/* Managing the compile cache (include/sgrt/cache.h, `sgrt cache`): info,
 * list, clear. Everything that touches an entry goes through cache.c, so
 * listing validates exactly as a session does before loading, and clearing
 * removes only what the cache made, following no link. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compile/cache.h"
#include "core/core.h"
#include "sgrt/cache.h"

#define INFO_MAX (64 * 1024)

/* The cache at dir (NULL: the environment's) without creating it: *c NULL
 * when the directory does not exist. resolved[SG_CACHE_DIR_MAX] gets its
 * path either way. */
static sg_status open_cache(const char *dir, sg__cache **c, char *resolved) {
  *c = NULL;
  if (dir == NULL) SG_CHECK(sg__cache_default_dir(resolved, SG_CACHE_DIR_MAX));
  else if ((size_t)snprintf(resolved, SG_CACHE_DIR_MAX, "%s", dir) >= SG_CACHE_DIR_MAX)
    return sg__error(SG_ERR_RANGE, "compile cache: the path '%.64s...' is too long", dir);
  return sg__cache_open_existing(resolved, c);
}

/* A key argument as the entry's name (lowercase); false when it is not 32
 * hex digits. */
static bool key_name(const char *key, char name[33]) {
  if (strlen(key) != 32) return false;
  for (int i = 0; i < 32; i++) {
    char ch = key[i];
    if (ch >= 'A' && ch <= 'F') ch = (char)(ch - 'A' + 'a');
    if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return false;
    name[i] = ch;
  }
  name[32] = '\0';
  return true;
}

static sg_status bad_key(const char *fn, const char *key) {
  return sg__error(SG_ERR_INVALID_ARG,
                   "%s: key '%.80s' is not 32 hex digits (a name that 'sgrt cache list' shows)", fn, key);
}

/* Bytes of the regular files in the directory dir/name and its
 * modification time; a link or anything but a directory has 0 bytes. */
static uint64_t entry_bytes(const char *dir, const char *name, int64_t *mtime) {
  char path[SG_CACHE_DIR_MAX + 64];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  *mtime = 0;
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return 0;
  struct stat sb;
  if (fstat(fd, &sb) == 0) *mtime = (int64_t)sb.st_mtime;
  DIR *d = fdopendir(fd);
  if (d == NULL) {
    close(fd);
    return 0;
  }
  uint64_t bytes = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (fstatat(fd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode))
      bytes += (uint64_t)sb.st_size;
  closedir(d);
  return bytes;
}

/* Copies src into dst[cap], truncating. */
static void copy_str(char *dst, size_t cap, const char *src) {
  size_t n = strnlen(src, cap - 1);
  memcpy(dst, src, n);
  dst[n] = '\0';
}

/* The rest of `line` after "WORD ", or NULL. */
static const char *field(const char *line, const char *word) {
  size_t n = strlen(word);
  return strncmp(line, word, n) == 0 && line[n] == ' ' ? line + n + 1 : NULL;
}

static int64_t number(const char *s) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  return end != s && *end == '\0' && errno == 0 && v >= 0 ? (int64_t)v : -1;
}

/* The lines module.c writes to info.txt; unknown lines are skipped. */
static void parse_info(char *text, sg_cache_entry *e) {
  char *save = NULL;
  for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    const char *v;
    long long ops, tensors;
    int used = 0;
    if (sscanf(line, "graph %lld ops, %lld tensors%n", &ops, &tensors, &used) == 2 && line[used] == '\0') {
      e->graph_ops = ops;
      e->graph_tensors = tensors;
    } else if ((v = field(line, "graph_hash")) != NULL) {
      copy_str(e->graph_hash, sizeof e->graph_hash, v);
    } else if ((v = field(line, "kernels")) != NULL) {
      e->kernels = number(v);
    } else if ((v = field(line, "ops")) != NULL) {
      e->fused_ops = number(v);
    } else if ((v = field(line, "device")) != NULL) {
      copy_str(e->device, sizeof e->device, v);
    } else if ((v = field(line, "compiler")) != NULL) {
      copy_str(e->compiler, sizeof e->compiler, v);
    } else if ((v = field(line, "sgrt")) != NULL) {
      copy_str(e->sgrt_version, sizeof e->sgrt_version, v);
    } else if ((v = field(line, "created")) != NULL) {
      int64_t t = number(v);
      if (t >= 0) e->created = t;
    }
  }
}

/* Everything known about the entry `name` (which exists). */
static sg_status describe(const sg__cache *c, const char *name, sg_cache_entry *e) {
  memset(e, 0, sizeof *e);
  e->size = sizeof *e;
  copy_str(e->key, sizeof e->key, name);
  e->graph_ops = e->graph_tensors = e->kernels = e->fused_ops = -1;
  e->bytes = entry_bytes(sg__cache_dir(c), name, &e->created);
  char why[1024];
  bool valid;
  SG_CHECK(sg__cache_check(c, name, &valid, why, sizeof why));
  e->valid = valid;
  if (!valid) copy_str(e->problem, sizeof e->problem, why);
  /* Not through a link in place of the entry (its files' own links are
   * refused by sg__cache_read). */
  char path[SG_CACHE_DIR_MAX + 64];
  snprintf(path, sizeof path, "%s/%s", sg__cache_dir(c), name);
  struct stat sb;
  if (lstat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) return SG_OK;
  void *info;
  size_t n;
  sg_status st = sg__cache_read(c, name, "info.txt", INFO_MAX, &info, &n, why, sizeof why);
  if (st == SG_ERR_IO) return SG_OK; /* no info.txt: the fields stay unknown */
  SG_CHECK(st);
  char *text = sg__malloc(n + 1);
  sg_status out = text ? SG_OK : sg__error(SG_ERR_NO_MEMORY, "compile cache: out of memory reading info.txt");
  if (text != NULL) {
    memcpy(text, info, n);
    text[n] = '\0';
    parse_info(text, e);
  }
  sg__free(text);
  sg__free(info);
  return out;
}

/* Calls fn(ctx, name, kind) for every name of the cache's own kinds. */
static sg_status scan(const sg__cache *c, sg_status (*fn)(void *ctx, const char *name, sg__cache_name kind),
                      void *ctx) {
  DIR *d = opendir(sg__cache_dir(c));
  if (d == NULL)
    return sg__error(SG_ERR_IO, "compile cache: cannot read '%s': %s", sg__cache_dir(c), strerror(errno));
  sg_status st = SG_OK;
  struct dirent *e;
  errno = 0;
  while (st == SG_OK && (e = readdir(d)) != NULL) {
    sg__cache_name kind = sg__cache_name_of(e->d_name);
    if (kind != SG__CACHE_NAME_OTHER) st = fn(ctx, e->d_name, kind);
    errno = 0;
  }
  if (st == SG_OK && errno != 0)
    st = sg__error(SG_ERR_IO, "compile cache: cannot read '%s': %s", sg__cache_dir(c), strerror(errno));
  closedir(d);
  return st;
}

/* ---- info ------------------------------------------------------------------ */

typedef struct count_ctx {
  const sg__cache *c;
  sg_cache_info *info;
} count_ctx;

static sg_status count_one(void *ctx, const char *name, sg__cache_name kind) {
  count_ctx *k = ctx;
  int64_t mtime;
  if (kind == SG__CACHE_NAME_TEMP) {
    k->info->temporaries++;
  } else {
    k->info->entries++;
    k->info->bytes += entry_bytes(sg__cache_dir(k->c), name, &mtime);
  }
  return SG_OK;
}

sg_status sg_cache_get_info(const char *dir, sg_cache_info *out) {
  if (out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_cache_get_info: NULL out");
  sg__versioned v = SG__VERSIONED(sg_cache_info, dir, "SG_CACHE_INFO_INIT");
  SG_CHECK(sg__out_write("sg_cache_get_info", v, out, NULL));
  sg_cache_info *info = sg__calloc(1, sizeof *info);
  if (info == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_cache_get_info: out of memory");
  info->size = sizeof *info;
  const char *off = getenv("SG_CACHE");
  info->enabled = !(off && strcmp(off, "0") == 0);
  sg__cache *c;
  sg_status st = open_cache(dir, &c, info->dir);
  if (st == SG_OK && c != NULL) {
    info->exists = 1;
    count_ctx k = {c, info};
    st = scan(c, count_one, &k);
  }
  sg__cache_close(c);
  if (st == SG_OK) st = sg__out_write("sg_cache_get_info", v, out, info);
  sg__free(info);
  return st;
}

/* ---- list ------------------------------------------------------------------ */

typedef struct list_ctx {
  const sg__cache *c;
  sg_cache_entry *entries;
  size_t n, cap;
} list_ctx;

static sg_status list_one(void *ctx, const char *name, sg__cache_name kind) {
  list_ctx *l = ctx;
  if (kind != SG__CACHE_NAME_ENTRY) return SG_OK;
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 16;
    sg_cache_entry *p = sg__realloc(l->entries, cap * sizeof *p);
    if (p == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_cache_list: out of memory");
    l->entries = p;
    l->cap = cap;
  }
  return describe(l->c, name, &l->entries[l->n++]);
}

static int newest_first(const void *pa, const void *pb) {
  const sg_cache_entry *a = pa, *b = pb;
  if (a->created != b->created) return a->created > b->created ? -1 : 1;
  return strcmp(a->key, b->key);
}

sg_status sg_cache_list(const char *dir, sg_cache_entry_fn fn, void *ctx) {
  if (fn == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_cache_list: NULL callback");
  char resolved[SG_CACHE_DIR_MAX];
  sg__cache *c;
  SG_CHECK(open_cache(dir, &c, resolved));
  if (c == NULL) return SG_OK;
  /* Everything is read before the first callback: an error means fn never ran. */
  list_ctx l = {c, NULL, 0, 0};
  sg_status st = scan(c, list_one, &l);
  sg__cache_close(c);
  if (st == SG_OK) {
    if (l.n > 1) qsort(l.entries, l.n, sizeof *l.entries, newest_first);
    for (size_t i = 0; i < l.n; i++)
      if (fn(&l.entries[i], ctx) != 0) break;
  }
  sg__free(l.entries);
  return st;
}

sg_status sg_cache_get_entry(const char *dir, const char *key, sg_cache_entry *out) {
  if (key == NULL || out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_cache_get_entry: NULL key or out");
  char name[33];
  if (!key_name(key, name)) return bad_key("sg_cache_get_entry", key);
  sg__versioned v = SG__VERSIONED(sg_cache_entry, key, "SG_CACHE_ENTRY_INIT");
  SG_CHECK(sg__out_write("sg_cache_get_entry", v, out, NULL));
  char resolved[SG_CACHE_DIR_MAX];
  sg__cache *c;
  SG_CHECK(open_cache(dir, &c, resolved));
  char path[SG_CACHE_DIR_MAX + 64];
  snprintf(path, sizeof path, "%s/%s", resolved, name);
  struct stat sb;
  if (c == NULL || lstat(path, &sb) != 0) {
    sg__cache_close(c);
    return sg__error(SG_ERR_NOT_FOUND, "sg_cache_get_entry: no entry %s in '%s'", name, resolved);
  }
  sg_cache_entry *e = sg__malloc(sizeof *e);
  sg_status st = e ? SG_OK : sg__error(SG_ERR_NO_MEMORY, "sg_cache_get_entry: out of memory");
  if (st == SG_OK) st = describe(c, name, e);
  if (st == SG_OK) st = sg__out_write("sg_cache_get_entry", v, out, e);
  sg__free(e);
  sg__cache_close(c);
  return st;
}

/* ---- clear ----------------------------------------------------------------- */

/* The names to remove, collected before any is removed: removing (and
 * renaming aside) while readdir runs could skip names. */
typedef struct name_list {
  char (*names)[64];
  size_t n, cap;
} name_list;

static sg_status collect(void *ctx, const char *name, sg__cache_name kind) {
  name_list *l = ctx;
  (void)kind;
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 16;
    char(*p)[64] = sg__realloc(l->names, cap * sizeof *p);
    if (p == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_cache_clear: out of memory");
    l->names = p;
    l->cap = cap;
  }
  /* The cache's names are at most 56 bytes (sg__cache_walk's). */
  size_t len = strnlen(name, 63);
  memcpy(l->names[l->n], name, len);
  l->names[l->n++][len] = '\0';
  return SG_OK;
}

/* Removes every entry and temporary directory; the first failure is
 * returned after the others were tried. */
static sg_status clear_all(sg__cache *c, size_t *removed) {
  name_list l = {NULL, 0, 0};
  sg_status st = scan(c, collect, &l), first = SG_OK;
  char first_msg[1024] = "";
  for (size_t i = 0; st == SG_OK && i < l.n; i++) {
    sg_status one = sg__cache_remove(c, l.names[i]);
    if (one == SG_OK && sg__cache_name_of(l.names[i]) == SG__CACHE_NAME_ENTRY) (*removed)++;
    /* Gone meanwhile (another clear, a session replacing a bad entry): nothing to do. */
    if (one != SG_OK && one != SG_ERR_NOT_FOUND && first == SG_OK) {
      first = one;
      snprintf(first_msg, sizeof first_msg, "%s", sg_last_error());
    }
  }
  sg__free(l.names);
  if (st == SG_OK && first != SG_OK) st = sg__error(first, "%s", first_msg);
  return st;
}

sg_status sg_cache_clear(const char *dir, const char *key, size_t *removed) {
  if (removed == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_cache_clear: NULL removed");
  *removed = 0;
  char name[33];
  if (key != NULL && !key_name(key, name)) return bad_key("sg_cache_clear", key);
  char resolved[SG_CACHE_DIR_MAX];
  sg__cache *c;
  SG_CHECK(open_cache(dir, &c, resolved));
  if (c == NULL) {
    if (key == NULL) return SG_OK;
    return sg__error(SG_ERR_NOT_FOUND, "sg_cache_clear: no entry %s in '%s' (it does not exist)", name,
                     resolved);
  }
  sg_status st;
  if (key != NULL) {
    st = sg__cache_remove(c, name);
    if (st == SG_OK) *removed = 1;
  } else {
    st = clear_all(c, removed);
  }
  sg__cache_close(c);
  return st;
}
