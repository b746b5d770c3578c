/* .sgg writer (docs/format.md). The metadata sections are laid out into one
 * buffer; initializers are streamed after it, so that saving a large model to
 * a file never holds a second copy of its weights. The output is a pure
 * function of the graph: the same graph always gives the same bytes. */
#define XXH_STATIC_LINKING_ONLY /* XXH64_state_t on the stack */
#include <xxhash.h>

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graph/sgg_format.h"
#include "sgrt/sgg.h"

/* Known sections in the order they are written. */
static const uint32_t section_order[] = {SGG_SEC_STRINGS, SGG_SEC_TENSORS,  SGG_SEC_OPS,
                                         SGG_SEC_ATTRS,   SGG_SEC_GRAPH_IO, SGG_SEC_DATA};
enum { N_SECTIONS = sizeof section_order / sizeof section_order[0] };

typedef struct layout {
  /* Interned strings: each distinct name once, ids in order of first use. */
  const char **strings;
  uint32_t n_strings, cap_strings;
  uint32_t *slots; /* open addressing: string id + 1, 0 = empty */
  uint32_t n_slots;
  uint64_t blob_length;
  uint64_t n_io, n_attrs, n_ints;
  uint64_t off[SGG_SEC_KNOWN_MAX + 1], len[SGG_SEC_KNOWN_MAX + 1];
  uint64_t *data_off; /* per tensor, relative to DATA; only for tensors with data */
  uint64_t meta_size; /* bytes before the DATA section */
  uint64_t file_size;
} layout;

static void layout_free(layout *L) {
  sg__free(L->strings);
  sg__free(L->slots);
  sg__free(L->data_off);
}

static uint32_t intern(layout *L, const char *s) {
  size_t n = strlen(s);
  uint32_t mask = L->n_slots - 1;
  for (uint32_t i = (uint32_t)XXH3_64bits(s, n) & mask;; i = (i + 1) & mask) {
    uint32_t v = L->slots[i];
    if (v == 0) {
      /* Capacity was sized for every name in the graph, so this cannot overflow. */
      SG_ASSERT(L->n_strings < L->cap_strings);
      L->strings[L->n_strings] = s;
      L->slots[i] = ++L->n_strings;
      L->blob_length += n + 1;
      return L->n_strings - 1;
    }
    if (strcmp(L->strings[v - 1], s) == 0) return v - 1;
  }
}

static sg_status plan(const sg_graph *g, layout *L) {
  memset(L, 0, sizeof *L);
  uint64_t names = (uint64_t)g->n_tensors + g->n_ops;
  for (uint32_t k = 0; k < g->n_ops; k++) {
    names += (uint64_t)g->ops[k].n_attrs;
    L->n_io += (uint64_t)g->ops[k].n_inputs + (uint64_t)g->ops[k].n_outputs;
    L->n_attrs += (uint64_t)g->ops[k].n_attrs;
    for (int a = 0; a < g->ops[k].n_attrs; a++)
      if (g->ops[k].attrs[a].type == SG_ATTR_INTS) L->n_ints += (uint64_t)g->ops[k].attrs[a].count;
  }
  /* Record counts are u32 in the file. */
  if (names > UINT32_MAX / 4 || L->n_io > UINT32_MAX || L->n_attrs > UINT32_MAX || L->n_ints > UINT32_MAX)
    return sg__error(SG_ERR_RANGE, "sg_graph_save: the graph has too many names, op inputs or attributes "
                                   "for the .sgg format (u32 counts)");
  uint32_t n_slots = 64;
  while (n_slots < names * 2) n_slots *= 2;
  L->cap_strings = (uint32_t)names;
  L->n_slots = n_slots;
  L->strings = sg__calloc(names ? names : 1, sizeof *L->strings);
  L->slots = sg__calloc(n_slots, sizeof *L->slots);
  L->data_off = sg__calloc(g->n_tensors ? g->n_tensors : 1, sizeof *L->data_off);
  if (!L->strings || !L->slots || !L->data_off)
    return sg__error(SG_ERR_NO_MEMORY, "sg_graph_save: out of memory");
  for (uint32_t t = 0; t < g->n_tensors; t++) intern(L, g->tensors[t].name);
  for (uint32_t k = 0; k < g->n_ops; k++) {
    intern(L, g->ops[k].name);
    for (int a = 0; a < g->ops[k].n_attrs; a++) intern(L, g->ops[k].attrs[a].name);
  }
  if (L->blob_length > UINT32_MAX)
    return sg__error(SG_ERR_RANGE, "sg_graph_save: names take more than 4 GiB");

  uint64_t data = 0;
  for (uint32_t t = 0; t < g->n_tensors; t++) {
    if (g->tensors[t].data == NULL) continue;
    data = sgg_align_up(data, SGG_DATA_ALIGN);
    L->data_off[t] = data;
    data += g->tensors[t].nbytes;
  }
  L->len[SGG_SEC_STRINGS] = SGG_SECTION_PREFIX + 4ull * L->n_strings + L->blob_length;
  L->len[SGG_SEC_TENSORS] = SGG_SECTION_PREFIX + (uint64_t)SGG_TENSOR_RECORD * g->n_tensors;
  L->len[SGG_SEC_OPS] = SGG_SECTION_PREFIX + (uint64_t)SGG_OP_RECORD * g->n_ops + 4 * L->n_io;
  L->len[SGG_SEC_ATTRS] = SGG_SECTION_PREFIX + (uint64_t)SGG_ATTR_RECORD * L->n_attrs + 8 * L->n_ints;
  L->len[SGG_SEC_GRAPH_IO] = SGG_SECTION_PREFIX + 4ull * g->n_outputs;
  L->len[SGG_SEC_DATA] = data;
  uint64_t cur = SGG_HEADER_SIZE + (uint64_t)SGG_ENTRY_SIZE * N_SECTIONS;
  for (int s = 0; s < N_SECTIONS; s++) {
    uint32_t type = section_order[s];
    cur = sgg_align_up(cur, type == SGG_SEC_DATA ? SGG_DATA_ALIGN : SGG_SECTION_ALIGN);
    L->off[type] = cur;
    cur += L->len[type];
  }
  L->meta_size = L->off[SGG_SEC_DATA];
  L->file_size = cur;
  if (L->file_size > SIZE_MAX)
    return sg__error(SG_ERR_RANGE, "sg_graph_save: the file would exceed SIZE_MAX");
  return SG_OK;
}

/* Fills every section but DATA into `buf` (meta_size zeroed bytes). */
static void fill_meta(const sg_graph *g, layout *L, uint8_t *buf) {
  uint8_t *p = buf + L->off[SGG_SEC_STRINGS];
  sgg_wr32(p, L->n_strings);
  uint8_t *offs = p + SGG_SECTION_PREFIX;
  uint8_t *blob = offs + 4ull * L->n_strings;
  uint32_t at = 0;
  for (uint32_t i = 0; i < L->n_strings; i++) {
    size_t n = strlen(L->strings[i]) + 1;
    sgg_wr32(offs + 4ull * i, at);
    memcpy(blob + at, L->strings[i], n);
    at += (uint32_t)n;
  }

  p = buf + L->off[SGG_SEC_TENSORS];
  sgg_wr32(p, g->n_tensors);
  for (uint32_t t = 0; t < g->n_tensors; t++) {
    const sg__tensor *T = &g->tensors[t];
    uint8_t *r = p + SGG_SECTION_PREFIX + (uint64_t)SGG_TENSOR_RECORD * t;
    sgg_wr32(r + SGG_T_NAME, intern(L, T->name));
    sgg_wr16(r + SGG_T_DTYPE, (uint16_t)T->dtype);
    sgg_wr16(r + SGG_T_ROLE, (uint16_t)T->role);
    sgg_wr32(r + SGG_T_NDIM, (uint32_t)T->ndim);
    sgg_wr32(r + SGG_T_FLAGS, T->data ? SGG_TENSOR_HAS_DATA : 0);
    for (int d = 0; d < T->ndim; d++) sgg_wri64(r + SGG_T_DIMS + 8 * d, T->dims[d]);
    if (T->data) {
      sgg_wr64(r + SGG_T_DATA_OFFSET, L->data_off[t]);
      sgg_wr64(r + SGG_T_DATA_SIZE, T->nbytes);
    }
  }

  p = buf + L->off[SGG_SEC_OPS];
  sgg_wr32(p, g->n_ops);
  sgg_wr32(p + 4, (uint32_t)L->n_io);
  uint8_t *io = p + SGG_SECTION_PREFIX + (uint64_t)SGG_OP_RECORD * g->n_ops;
  uint8_t *ap = buf + L->off[SGG_SEC_ATTRS];
  sgg_wr32(ap, (uint32_t)L->n_attrs);
  sgg_wr32(ap + 4, (uint32_t)L->n_ints);
  uint8_t *ints = ap + SGG_SECTION_PREFIX + (uint64_t)SGG_ATTR_RECORD * L->n_attrs;
  uint32_t io_at = 0, attr_at = 0, int_at = 0;
  for (uint32_t k = 0; k < g->n_ops; k++) {
    const sg__op *o = &g->ops[k];
    uint8_t *r = p + SGG_SECTION_PREFIX + (uint64_t)SGG_OP_RECORD * k;
    sgg_wr32(r + SGG_O_KIND, (uint32_t)o->kind);
    sgg_wr32(r + SGG_O_NAME, intern(L, o->name));
    sgg_wr32(r + SGG_O_FIRST_INPUT, io_at);
    sgg_wr32(r + SGG_O_N_INPUTS, (uint32_t)o->n_inputs);
    for (int i = 0; i < o->n_inputs; i++)
      sgg_wr32(io + 4ull * io_at++, o->inputs[i] < 0 ? SGG_NO_TENSOR : (uint32_t)o->inputs[i]);
    sgg_wr32(r + SGG_O_FIRST_OUTPUT, io_at);
    sgg_wr32(r + SGG_O_N_OUTPUTS, (uint32_t)o->n_outputs);
    for (int i = 0; i < o->n_outputs; i++) sgg_wr32(io + 4ull * io_at++, (uint32_t)o->outputs[i]);
    sgg_wr32(r + SGG_O_FIRST_ATTR, attr_at);
    sgg_wr32(r + SGG_O_N_ATTRS, (uint32_t)o->n_attrs);
    for (int a = 0; a < o->n_attrs; a++) {
      const sg_attr *A = &o->attrs[a];
      uint8_t *ar = ap + SGG_SECTION_PREFIX + (uint64_t)SGG_ATTR_RECORD * attr_at++;
      sgg_wr32(ar + SGG_A_NAME, intern(L, A->name));
      sgg_wr32(ar + SGG_A_TYPE, (uint32_t)A->type);
      if (A->type == SG_ATTR_INT) {
        sgg_wri64(ar + SGG_A_VALUE, A->i);
      } else if (A->type == SG_ATTR_FLOAT) {
        sgg_wrf64(ar + SGG_A_VALUE, A->f);
      } else {
        sgg_wr32(ar + SGG_A_COUNT, (uint32_t)A->count);
        sgg_wr32(ar + SGG_A_FIRST, int_at);
        for (int i = 0; i < A->count; i++) sgg_wri64(ints + 8ull * int_at++, A->ints[i]);
      }
    }
  }

  p = buf + L->off[SGG_SEC_GRAPH_IO];
  sgg_wr32(p, g->n_outputs);
  for (uint32_t i = 0; i < g->n_outputs; i++)
    sgg_wr32(p + SGG_SECTION_PREFIX + 4ull * i, (uint32_t)g->outputs[i]);
}

static const uint8_t zeros[SGG_DATA_ALIGN];

/* XXH64 of the DATA section, streamed from the graph's initializers. */
static uint64_t hash_data(const sg_graph *g, const layout *L) {
  XXH64_state_t st;
  XXH64_reset(&st, 0);
  uint64_t at = 0;
  for (uint32_t t = 0; t < g->n_tensors; t++) {
    const sg__tensor *T = &g->tensors[t];
    if (T->data == NULL) continue;
    XXH64_update(&st, zeros, (size_t)(L->data_off[t] - at));
    XXH64_update(&st, T->data, T->nbytes);
    at = L->data_off[t] + T->nbytes;
  }
  return XXH64_digest(&st);
}

/* Writes the section table and the header once every section is in place. */
static void finish(const layout *L, uint8_t *buf, uint64_t data_hash) {
  uint8_t *table = buf + SGG_HEADER_SIZE;
  for (int s = 0; s < N_SECTIONS; s++) {
    uint32_t type = section_order[s];
    uint8_t *e = table + (size_t)SGG_ENTRY_SIZE * s;
    sgg_wr32(e, type);
    sgg_wr32(e + 4, SGG_SECTION_REQUIRED);
    sgg_wr64(e + 8, L->off[type]);
    sgg_wr64(e + 16, L->len[type]);
    uint64_t h = type == SGG_SEC_DATA ? data_hash : XXH64(buf + L->off[type], (size_t)L->len[type], 0);
    sgg_wr64(e + 24, h);
  }
  memcpy(buf + SGG_H_MAGIC, SGG_MAGIC, SGG_MAGIC_SIZE);
  sgg_wr16(buf + SGG_H_MAJOR, SG_SGG_VERSION_MAJOR);
  sgg_wr16(buf + SGG_H_MINOR, SG_SGG_VERSION_MINOR);
  sgg_wr32(buf + SGG_H_FLAGS, 0);
  sgg_wr32(buf + SGG_H_SECTION_COUNT, N_SECTIONS);
  sgg_wr64(buf + SGG_H_TABLE_OFFSET, SGG_HEADER_SIZE);
  sgg_wr64(buf + SGG_H_FILE_SIZE, L->file_size);
  sgg_wr64(buf + SGG_H_TABLE_HASH, XXH64(table, (size_t)SGG_ENTRY_SIZE * N_SECTIONS, 0));
  sgg_wr64(buf + SGG_H_HEADER_HASH, XXH64(buf, SGG_H_HEADER_HASH, 0));
}

static sg_status check_graph(const sg_graph *g, const char *fn) {
  if (g == NULL) return sg__error(SG_ERR_INVALID_ARG, "%s: graph is NULL", fn);
  if (!g->finalized)
    return sg__error(SG_ERR_STATE, "%s: the graph is not finalized (call sg_graph_finalize first)", fn);
  return SG_OK;
}

/* Builds the metadata buffer (meta_size bytes, or file_size when `whole`). */
static sg_status build(const sg_graph *g, layout *L, bool whole, uint8_t **out) {
  *out = NULL;
  SG_CHECK(plan(g, L));
  uint8_t *buf = sg__calloc(1, (size_t)(whole ? L->file_size : L->meta_size));
  if (buf == NULL)
    return sg__error(SG_ERR_NO_MEMORY, "sg_graph_save: out of memory for %llu bytes",
                     (unsigned long long)(whole ? L->file_size : L->meta_size));
  fill_meta(g, L, buf);
  finish(L, buf, hash_data(g, L));
  *out = buf;
  return SG_OK;
}

sg_status sg_graph_save_to_memory(const sg_graph *g, void **data, size_t *size) {
  if (data == NULL || size == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg_graph_save_to_memory: NULL argument");
  *data = NULL;
  *size = 0;
  SG_CHECK(check_graph(g, "sg_graph_save_to_memory"));
  layout L;
  uint8_t *buf;
  sg_status st = build(g, &L, true, &buf);
  if (st == SG_OK) {
    for (uint32_t t = 0; t < g->n_tensors; t++)
      if (g->tensors[t].data)
        memcpy(buf + L.off[SGG_SEC_DATA] + L.data_off[t], g->tensors[t].data, g->tensors[t].nbytes);
    *data = buf;
    *size = (size_t)L.file_size;
  }
  layout_free(&L);
  return st;
}

static sg_status write_all(int fd, const void *p, size_t n, const char *path) {
  const uint8_t *b = p;
  while (n > 0) {
    ssize_t w = write(fd, b, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0)
      return sg__error(SG_ERR_IO, "cannot write '%s': %s", path, w < 0 ? strerror(errno) : "no progress");
    b += w;
    n -= (size_t)w;
  }
  return SG_OK;
}

static sg_status write_file(const sg_graph *g, const layout *L, const uint8_t *meta, int fd,
                            const char *tmp) {
  SG_CHECK(write_all(fd, meta, (size_t)L->meta_size, tmp));
  uint64_t at = 0;
  for (uint32_t t = 0; t < g->n_tensors; t++) {
    const sg__tensor *T = &g->tensors[t];
    if (T->data == NULL) continue;
    SG_CHECK(write_all(fd, zeros, (size_t)(L->data_off[t] - at), tmp));
    SG_CHECK(write_all(fd, T->data, T->nbytes, tmp));
    at = L->data_off[t] + T->nbytes;
  }
  /* Durable before the rename makes it visible: a crash leaves either the old
   * file or the complete new one. */
  if (fsync(fd) != 0) return sg__error(SG_ERR_IO, "cannot sync '%s': %s", tmp, strerror(errno));
  return SG_OK;
}

/* Creates a fresh temporary file next to `path` (same file system, so the
 * rename is atomic). O_EXCL rather than mkstemp so that the file gets the
 * umask's permissions instead of 0600. */
static sg_status open_temp(const char *path, char **tmp_out, int *fd_out) {
  static _Atomic unsigned counter;
  size_t n = strlen(path) + 64;
  char *tmp = sg__malloc(n);
  if (tmp == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_graph_save: out of memory");
  for (int attempt = 0; attempt < 100; attempt++) {
    snprintf(tmp, n, "%s.tmp-%ld-%u", path, (long)getpid(), atomic_fetch_add(&counter, 1));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      *tmp_out = tmp;
      *fd_out = fd;
      return SG_OK;
    }
    if (errno != EEXIST) {
      sg_status st = sg__error(SG_ERR_IO, "cannot create '%s': %s", tmp, strerror(errno));
      sg__free(tmp);
      return st;
    }
  }
  sg__free(tmp);
  return sg__error(SG_ERR_IO, "cannot create a temporary file next to '%s'", path);
}

sg_status sg_graph_save(const sg_graph *g, const char *path) {
  if (path == NULL || path[0] == '\0')
    return sg__error(SG_ERR_INVALID_ARG, "sg_graph_save: path is NULL or empty");
  SG_CHECK(check_graph(g, "sg_graph_save"));
  layout L;
  uint8_t *meta = NULL;
  char *tmp = NULL;
  int fd = -1;
  sg_status st;
  /* The rename would replace whatever is at `path`: only a regular file (or
   * nothing) may be, never a device or a FIFO (as root, /dev/null). */
  struct stat sb;
  if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
    return sg__error(SG_ERR_IO, "sg_graph_save: '%s' is %s, not a regular file", path,
                     sg__file_kind((unsigned)sb.st_mode));
  SG_CHECK_GOTO(build(g, &L, false, &meta), st, out);
  SG_CHECK_GOTO(open_temp(path, &tmp, &fd), st, out);
  st = write_file(g, &L, meta, fd, tmp);
  if (close(fd) != 0 && st == SG_OK) st = sg__error(SG_ERR_IO, "cannot close '%s': %s", tmp, strerror(errno));
  if (st == SG_OK && rename(tmp, path) != 0)
    st = sg__error(SG_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
  if (st != SG_OK) unlink(tmp);
out:
  sg__free(tmp);
  sg__free(meta);
  layout_free(&L);
  return st;
}
