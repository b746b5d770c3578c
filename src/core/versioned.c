/* Size-prefixed public structs (params in, reports and stats out): a caller
 * built against an older header passes a shorter struct, and the library
 * reads or writes only the bytes that caller has (UCX's field_mask, NCCL's
 * ncclConfig_t). One place for the rule, so every create function treats
 * sizes alike. */
#include <string.h>

#include "core/core.h"

static sg_status bad_size(const char *fn, sg__versioned v, size_t size) {
  return sg__error(SG_ERR_INVALID_ARG,
                   "%s: %s.size is %zu; this library reads %s of %zu..%zu bytes (initialise it from %s)", fn,
                   v.type, size, v.type, v.min_size, v.max_size, v.init);
}

sg_status sg__params_read(const char *fn, sg__versioned v, void *dst, const void *src) {
  if (src == NULL) return SG_OK;
  size_t size;
  memcpy(&size, src, sizeof size);
  if (size < v.min_size) return bad_size(fn, v, size);
  if (size > v.max_size) {
    /* A caller built against a newer header: its fields beyond ours are not
     * read. Said once per call, never silently (a newer option would be
     * ignored); the bytes are not looked at, since size may be garbage. */
    SG_WARN("%s: %s.size is %zu, larger than this library's %zu bytes: the fields beyond them are "
            "ignored (a newer sgrt header than the library?)",
            fn, v.type, size, v.max_size);
    size = v.max_size;
  }
  memcpy(dst, src, size);
  memcpy(dst, &v.max_size, sizeof v.max_size);
  return SG_OK;
}

sg_status sg__out_write(const char *fn, sg__versioned v, void *dst, const void *src) {
  size_t size;
  memcpy(&size, dst, sizeof size);
  if (size < v.min_size) return bad_size(fn, v, size);
  if (src == NULL) return SG_OK;
  if (size > v.max_size) size = v.max_size;
  memcpy(dst, src, size);
  memcpy(dst, &size, sizeof size);
  return SG_OK;
}
