/* ONNX external data: initializers whose bytes live in a file next to the
 * model (TensorProto.data_location EXTERNAL). PyTorch 2's default exporter
 * (dynamo) writes every large weight so, into "<model>.onnx.data", and
 * onnx.save(..., save_as_external_data=True) does the same for models over
 * protobuf's 2 GiB limit.
 *
 * Each tensor names its file ("location", relative to the model's folder)
 * and its bytes there ("offset", "length"); the bytes are raw little-endian
 * data, as raw_data holds. A file is mapped once per import, however many
 * tensors it holds, and unmapped when the import ends (the graph copies what
 * it keeps).
 *
 * The location comes from the file, so it is treated as hostile, as ONNX's
 * own checker does: it must be relative, must not climb out with "..", and
 * must still lie inside the model's folder once symbolic links are resolved.
 * Keys other than location, offset and length are refused rather than
 * ignored: "checksum" (a SHA-1 whose extent the spec leaves open) cannot be
 * verified here. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* A location as the file gives it must stay inside the model's folder. */
static sg_status check_location(const char *what, const char *name, const char *loc) {
  if (loc[0] == '\0')
    return sg__error(SG_ERR_FORMAT, "%s '%s': external data has an empty location", what, name);
  if (loc[0] == '/' || strchr(loc, '\\') != NULL || strchr(loc, ':') != NULL)
    return sg__error(
        SG_ERR_FORMAT,
        "%s '%s': external data location '%s' is not a relative POSIX path inside the model's folder", what,
        name, loc);
  for (const char *p = loc; *p;) {
    size_t n = strcspn(p, "/");
    if (n == 2 && p[0] == '.' && p[1] == '.')
      return sg__error(SG_ERR_FORMAT, "%s '%s': external data location '%s' leaves the model's folder ('..')",
                       what, name, loc);
    p += n;
    if (*p == '/') p++;
  }
  return SG_OK;
}

/* A non-negative decimal integer, as ONNX writes offset and length. */
static sg_status parse_size(const char *what, const char *name, const char *key, const char *s,
                            uint64_t *out) {
  if (s == NULL || s[0] < '0' || s[0] > '9')
    return sg__error(SG_ERR_FORMAT, "%s '%s': external data %s '%s' is not a non-negative integer", what,
                     name, key, sg__ox_str(s));
  errno = 0;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (*end != '\0' || errno == ERANGE)
    return sg__error(SG_ERR_FORMAT, "%s '%s': external data %s '%s' is not a non-negative integer", what,
                     name, key, s);
  *out = v;
  return SG_OK;
}

/* The folder of the model file, as its path names it ("." for a bare name). */
static char *model_dir(ox_ctx *c) {
  const char *slash = strrchr(c->path, '/');
  if (slash == NULL) return sg__arena_strdup(&c->tmp, ".");
  size_t n = slash == c->path ? 1 : (size_t)(slash - c->path);
  char *d = sg__arena_alloc(&c->tmp, n + 1, 1);
  if (d == NULL) return NULL;
  memcpy(d, c->path, n);
  d[n] = '\0';
  return d;
}

/* Maps the file at `loc` (checked), or finds it mapped already. */
static sg_status map_location(ox_ctx *c, const char *what, const char *name, const char *loc,
                              ox_extfile **out) {
  for (uint32_t i = 0; i < c->n_ext; i++)
    if (strcmp(c->ext[i].location, loc) == 0) {
      *out = &c->ext[i];
      return SG_OK;
    }
  if (c->n_ext == c->cap_ext) {
    uint32_t cap = c->cap_ext ? 2 * c->cap_ext : 4;
    ox_extfile *e = sg__realloc(c->ext, (size_t)cap * sizeof *e);
    if (e == NULL) return sg__error(SG_ERR_NO_MEMORY, "ONNX import: out of memory");
    c->ext = e;
    c->cap_ext = cap;
  }
  const char *dir = model_dir(c);
  size_t len = dir ? strlen(dir) + 1 + strlen(loc) + 1 : 0;
  char *path = dir ? sg__arena_alloc(&c->tmp, len, 1) : NULL;
  if (path == NULL) return sg__error(SG_ERR_NO_MEMORY, "ONNX import: out of memory");
  snprintf(path, len, "%s/%s", dir, loc);
  /* Symbolic links inside the folder may point anywhere: compare where both
   * really are. */
  char real_dir[PATH_MAX], real_file[PATH_MAX];
  if (realpath(dir, real_dir) == NULL)
    return sg__error(SG_ERR_IO, "%s '%s': cannot resolve the model's folder '%s': %s", what, name, dir,
                     strerror(errno));
  if (realpath(path, real_file) == NULL)
    return sg__error(SG_ERR_IO, "%s '%s' keeps its data in '%s', which cannot be opened: %s", what, name,
                     path, strerror(errno));
  size_t nd = strlen(real_dir);
  bool inside = strncmp(real_file, real_dir, nd) == 0 && (real_file[nd] == '/' || strcmp(real_dir, "/") == 0);
  if (!inside)
    return sg__error(SG_ERR_FORMAT,
                     "%s '%s': external data '%s' resolves to '%s', outside the model's folder '%s'", what,
                     name, loc, real_file, real_dir);
  ox_extfile *e = &c->ext[c->n_ext];
  e->location = loc;
  SG_CHECK(sg__map_file(real_file, &e->map, &e->size));
  c->n_ext++;
  *out = e;
  return SG_OK;
}

sg_status sg__ox_external(ox_ctx *c, const Onnx__TensorProto *t, const char *what, uint64_t bytes,
                          const void **data) {
  const char *name = sg__ox_str(t->name);
  const char *loc = NULL;
  uint64_t offset = 0, length = bytes;
  bool has_length = false;
  for (size_t i = 0; i < t->n_external_data; i++) {
    const char *key = sg__ox_str(t->external_data[i]->key), *value = t->external_data[i]->value;
    if (strcmp(key, "location") == 0) loc = sg__ox_str(value);
    else if (strcmp(key, "offset") == 0) SG_CHECK(parse_size(what, name, key, value, &offset));
    else if (strcmp(key, "length") == 0) {
      SG_CHECK(parse_size(what, name, key, value, &length));
      has_length = true;
    } else
      return sg__error(
          SG_ERR_UNSUPPORTED,
          "%s '%s': external data key '%s' is not supported (sgrt reads location, offset and length%s)", what,
          name, key,
          strcmp(key, "checksum") == 0 ? "; it cannot verify a checksum, so it does not ignore one" : "");
  }
  if (loc == NULL) return sg__error(SG_ERR_FORMAT, "%s '%s': external data without a location", what, name);
  if (c->path == NULL)
    return sg__error(
        SG_ERR_UNSUPPORTED,
        "%s '%s' keeps its data in the external file '%s', which a model imported from memory cannot "
        "find: import it from its path (sg_onnx_import), with the file next to it",
        what, name, loc);
  SG_CHECK(check_location(what, name, loc));
  if (has_length && length != bytes)
    return sg__error(SG_ERR_FORMAT, "%s '%s': external data length is %llu bytes, the tensor needs %llu",
                     what, name, (unsigned long long)length, (unsigned long long)bytes);
  ox_extfile *e;
  SG_CHECK(map_location(c, what, name, loc, &e));
  if (offset > e->size || bytes > e->size - offset)
    return sg__error(
        SG_ERR_FORMAT,
        "%s '%s': external data at offset %llu, %llu bytes, runs past the end of '%s' (%zu bytes)", what,
        name, (unsigned long long)offset, (unsigned long long)bytes, loc, e->size);
  /* An empty file maps to NULL: give an empty tensor a pointer all the same. */
  *data = e->map ? (const char *)e->map + offset : (const void *)"";
  return SG_OK;
}

void sg__ox_external_close(ox_ctx *c) {
  for (uint32_t i = 0; i < c->n_ext; i++) sg__unmap_file(c->ext[i].map, c->ext[i].size);
  sg__free(c->ext);
  c->ext = NULL;
  c->n_ext = c->cap_ext = 0;
}
