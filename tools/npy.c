/* .npy reader and writer (see npy.h). Format reference: numpy's
 * numpy/lib/format.py: "\x93NUMPY", major and minor version bytes, a
 * little-endian header length (u16 in 1.0, u32 in 2.0 and 3.0), the header (a
 * Python dict literal padded with spaces and ended by '\n'), then the data. */
#include "npy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
/* np.save never writes a header anywhere near this long; a larger one is not a
 * file we want to parse. */
#define NPY_MAX_HEADER (1u << 20)

static int fail(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t cap, const char *fmt, ...) {
  if (cap > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
  }
  return -1;
}

static const struct {
  const char *descr;
  sg_dtype dtype;
  size_t size;
} npy_types[] = {
    {"<f4", SG_F32, 4}, {"<i8", SG_I64, 8}, {"<i4", SG_I32, 4},
    {"<f2", SG_F16, 2}, {"|u1", SG_U8, 1},  {"|b1", SG_BOOL, 1},
};
#define N_NPY_TYPES (sizeof npy_types / sizeof npy_types[0])

const char *npy_descr(sg_dtype dtype) {
  for (size_t i = 0; i < N_NPY_TYPES; i++)
    if (npy_types[i].dtype == dtype) return npy_types[i].descr;
  return NULL;
}

/* ---- reading ------------------------------------------------------------- */

/* Magic, version and header length. Needs the first 12 bytes (or fewer when
 * the file is shorter, which is then an error). */
static int parse_preamble(const unsigned char *b, size_t len, size_t *hstart, size_t *hlen, char *err,
                          size_t cap) {
  if (len < NPY_MAGIC_LEN || memcmp(b, NPY_MAGIC, NPY_MAGIC_LEN) != 0)
    return fail(err, cap, "not a .npy file (no \\x93NUMPY magic)");
  if (len < 8) return fail(err, cap, "truncated .npy file: it ends inside the version bytes");
  unsigned major = b[6], minor = b[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    return fail(err, cap, "unsupported .npy format version %u.%u (1.0, 2.0 and 3.0 are known)", major, minor);
  if (major == 1) {
    if (len < 10) return fail(err, cap, "truncated .npy file: it ends inside the header length");
    *hlen = (size_t)b[8] | (size_t)b[9] << 8;
    *hstart = 10;
  } else {
    if (len < 12) return fail(err, cap, "truncated .npy file: it ends inside the header length");
    uint32_t n = (uint32_t)b[8] | (uint32_t)b[9] << 8 | (uint32_t)b[10] << 16 | (uint32_t)b[11] << 24;
    *hlen = n;
    *hstart = 12;
  }
  if (*hlen > NPY_MAX_HEADER)
    return fail(err, cap, "header length %zu is too large (the limit is %u bytes)", *hlen, NPY_MAX_HEADER);
  return 0;
}

typedef struct cursor {
  const char *p, *end;
} cursor;

static void skip_ws(cursor *c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static bool take(cursor *c, char ch) {
  skip_ws(c);
  if (c->p < c->end && *c->p == ch) {
    c->p++;
    return true;
  }
  return false;
}

/* A quoted string without escapes; sets s/n to its contents. */
static int parse_string(cursor *c, const char **s, size_t *n, char *err, size_t cap) {
  skip_ws(c);
  if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
    return fail(err, cap, "header: expected a quoted string");
  char q = *c->p++;
  const char *start = c->p;
  while (c->p < c->end && *c->p != q) {
    if (*c->p == '\\' || *c->p == '\n') return fail(err, cap, "header: unsupported character in a string");
    c->p++;
  }
  if (c->p >= c->end) return fail(err, cap, "header: unterminated string");
  *s = start;
  *n = (size_t)(c->p - start);
  c->p++;
  return 0;
}

static bool take_word(cursor *c, const char *w) {
  skip_ws(c);
  size_t n = strlen(w);
  if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n) != 0) return false;
  const char *after = c->p + n;
  if (after < c->end && ((*after >= 'a' && *after <= 'z') || (*after >= 'A' && *after <= 'Z') ||
                         (*after >= '0' && *after <= '9') || *after == '_'))
    return false;
  c->p = after;
  return true;
}

/* A Python tuple of non-negative ints: (), (5,), (2, 3) or (2, 3,). */
static int parse_shape(cursor *c, npy_array *a, char *err, size_t cap) {
  if (!take(c, '(')) return fail(err, cap, "header: 'shape' must be a tuple");
  a->ndim = 0;
  if (take(c, ')')) return 0;
  for (;;) {
    skip_ws(c);
    const char *start = c->p;
    int64_t v = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
      int d = *c->p - '0';
      if (v > (INT64_MAX - d) / 10) return fail(err, cap, "header: a dimension of 'shape' is too large");
      v = v * 10 + d;
      c->p++;
    }
    size_t digits = (size_t)(c->p - start);
    if (digits == 0) return fail(err, cap, "header: 'shape' must hold non-negative integers");
    if (digits > 1 && *start == '0')
      return fail(err, cap, "header: a dimension of 'shape' has a leading zero");
    if (a->ndim == SG_MAX_DIMS)
      return fail(err, cap, "header: 'shape' has more than %d dimensions", SG_MAX_DIMS);
    a->dims[a->ndim++] = v;
    bool comma = take(c, ',');
    if (take(c, ')')) {
      /* (5) is the number 5, not a tuple. */
      if (a->ndim == 1 && !comma)
        return fail(err, cap, "header: 'shape' (%lld) is not a tuple", (long long)v);
      return 0;
    }
    if (!comma) return fail(err, cap, "header: expected ',' or ')' in 'shape'");
  }
}

/* The header dict: 'descr', 'fortran_order' and 'shape', each exactly once.
 * Fills dtype, ndim, dims and nbytes of `a`. */
static int parse_header(const char *h, size_t n, npy_array *a, char *err, size_t cap) {
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)h[i];
    if (ch >= 0x7f || (ch < 0x20 && ch != '\n' && ch != '\r' && ch != '\t'))
      return fail(err, cap, "header: byte 0x%02x at offset %zu is not printable ASCII", ch, i);
  }
  cursor c = {h, h + n};
  bool have_descr = false, have_order = false, have_shape = false;
  size_t elem = 0;
  if (!take(&c, '{')) return fail(err, cap, "header: not a dict (it must start with '{')");
  if (!take(&c, '}')) {
    for (;;) {
      const char *key;
      size_t klen;
      if (parse_string(&c, &key, &klen, err, cap) != 0) return -1;
      if (!take(&c, ':')) return fail(err, cap, "header: expected ':' after a key");
      if (klen == 5 && memcmp(key, "descr", 5) == 0) {
        if (have_descr) return fail(err, cap, "header: 'descr' appears twice");
        have_descr = true;
        const char *d;
        size_t dlen;
        if (parse_string(&c, &d, &dlen, err, cap) != 0)
          return fail(err, cap, "header: 'descr' must be a string");
        size_t t = 0;
        while (t < N_NPY_TYPES &&
               !(strlen(npy_types[t].descr) == dlen && memcmp(npy_types[t].descr, d, dlen) == 0))
          t++;
        if (t == N_NPY_TYPES) {
          char shown[32];
          snprintf(shown, sizeof shown, "%.*s", dlen > 24 ? 24 : (int)dlen, d);
          if (dlen > 0 && d[0] == '>')
            return fail(err, cap, "dtype '%s' is big-endian; save little-endian data (e.g. x.astype('<f4'))",
                        shown);
          return fail(err, cap,
                      "dtype '%s' is not supported (float32 '<f4', int64 '<i8', int32 '<i4', float16 '<f2', "
                      "uint8 '|u1', bool '|b1')",
                      shown);
        }
        a->dtype = npy_types[t].dtype;
        elem = npy_types[t].size;
      } else if (klen == 13 && memcmp(key, "fortran_order", 13) == 0) {
        if (have_order) return fail(err, cap, "header: 'fortran_order' appears twice");
        have_order = true;
        if (take_word(&c, "True"))
          return fail(err, cap, "Fortran-order arrays are not supported (save np.ascontiguousarray(x))");
        if (!take_word(&c, "False")) return fail(err, cap, "header: 'fortran_order' must be True or False");
      } else if (klen == 5 && memcmp(key, "shape", 5) == 0) {
        if (have_shape) return fail(err, cap, "header: 'shape' appears twice");
        have_shape = true;
        if (parse_shape(&c, a, err, cap) != 0) return -1;
      } else {
        return fail(err, cap, "header: unknown key '%.*s'", klen > 32 ? 32 : (int)klen, key);
      }
      bool comma = take(&c, ',');
      if (take(&c, '}')) break;
      if (!comma) return fail(err, cap, "header: expected ',' or '}' after a value");
    }
  }
  skip_ws(&c);
  if (c.p != c.end) return fail(err, cap, "header: unexpected text after the dict");
  if (!have_descr || !have_order || !have_shape)
    return fail(err, cap, "header: missing key '%s'",
                !have_descr   ? "descr"
                : !have_order ? "fortran_order"
                              : "shape");
  /* Byte size, without overflow. */
  uint64_t total = elem;
  for (int i = 0; i < a->ndim; i++) {
    uint64_t d = (uint64_t)a->dims[i];
    if (d != 0 && total > (uint64_t)INT64_MAX / d)
      return fail(err, cap, "header: the shape's byte size overflows");
    total *= d;
  }
  if (total > SIZE_MAX) return fail(err, cap, "header: the array is too large for this machine");
  a->nbytes = (size_t)total;
  return 0;
}

static int check_data_size(size_t have, size_t want, char *err, size_t cap) {
  if (have < want)
    return fail(err, cap, "truncated: the header's shape needs %zu bytes of data, the file has %zu", want,
                have);
  if (have > want)
    return fail(err, cap, "%zu bytes after the data the header's shape calls for (%zu bytes)", have - want,
                want);
  return 0;
}

void npy_free(npy_array *a) {
  if (a == NULL) return;
  free(a->data);
  a->data = NULL;
}

int npy_parse(const void *buf, size_t len, npy_array *out, char *err, size_t cap) {
  const unsigned char *b = buf;
  npy_array a;
  memset(&a, 0, sizeof a);
  memset(out, 0, sizeof *out);
  size_t hstart, hlen;
  if (parse_preamble(b, len, &hstart, &hlen, err, cap) != 0) return -1;
  if (len - hstart < hlen) return fail(err, cap, "truncated .npy file: it ends inside the header");
  if (parse_header((const char *)b + hstart, hlen, &a, err, cap) != 0) return -1;
  size_t off = hstart + hlen;
  if (check_data_size(len - off, a.nbytes, err, cap) != 0) return -1;
  a.data = malloc(a.nbytes ? a.nbytes : 1);
  if (a.data == NULL) return fail(err, cap, "out of memory (%zu bytes)", a.nbytes);
  if (a.nbytes) memcpy(a.data, b + off, a.nbytes);
  *out = a;
  return 0;
}

int npy_read(const char *path, npy_array *out, char *err, size_t cap) {
  memset(out, 0, sizeof *out);
  /* Never blocks: a FIFO, a device or a directory is refused, not read. */
  FILE *f = cli_fopen_regular(path, false, err, cap);
  if (f == NULL) return -1;
  npy_array a;
  memset(&a, 0, sizeof a);
  char *header = NULL;
  int rc = -1;
  struct stat st;
  if (fstat(fileno(f), &st) != 0) {
    fail(err, cap, "%s", strerror(errno));
    goto out;
  }
  size_t size = (size_t)st.st_size;
  unsigned char pre[12];
  size_t got = fread(pre, 1, sizeof pre, f);
  if (ferror(f)) {
    fail(err, cap, "read error: %s", strerror(errno));
    goto out;
  }
  size_t hstart, hlen;
  if (parse_preamble(pre, got, &hstart, &hlen, err, cap) != 0) goto out;
  if (size < hstart || size - hstart < hlen) {
    fail(err, cap, "truncated .npy file: it ends inside the header");
    goto out;
  }
  header = malloc(hlen ? hlen : 1);
  if (header == NULL) {
    fail(err, cap, "out of memory");
    goto out;
  }
  if (fseek(f, (long)hstart, SEEK_SET) != 0 || fread(header, 1, hlen, f) != hlen) {
    fail(err, cap, "truncated .npy file: it ends inside the header");
    goto out;
  }
  if (parse_header(header, hlen, &a, err, cap) != 0) goto out;
  if (check_data_size(size - hstart - hlen, a.nbytes, err, cap) != 0) goto out;
  a.data = malloc(a.nbytes ? a.nbytes : 1);
  if (a.data == NULL) {
    fail(err, cap, "out of memory (%zu bytes of data)", a.nbytes);
    goto out;
  }
  if (fread(a.data, 1, a.nbytes, f) != a.nbytes) {
    fail(err, cap, "the file shrank while it was read");
    goto out;
  }
  if (fgetc(f) != EOF) {
    fail(err, cap, "the file grew while it was read");
    goto out;
  }
  *out = a;
  a.data = NULL;
  rc = 0;
out:
  free(a.data);
  free(header);
  fclose(f);
  return rc;
}

/* ---- writing ------------------------------------------------------------- */

int npy_format(sg_dtype dtype, int ndim, const int64_t *dims, const void *data, size_t nbytes, void **out,
               size_t *out_len, char *err, size_t cap) {
  *out = NULL;
  *out_len = 0;
  const char *descr = npy_descr(dtype);
  if (descr == NULL) return fail(err, cap, "dtype %s has no .npy type", sg_dtype_name(dtype));
  if (ndim < 0 || ndim > SG_MAX_DIMS) return fail(err, cap, "bad rank %d", ndim);
  char shape[SG_MAX_DIMS * 24 + 8];
  size_t at = 0;
  shape[at++] = '(';
  for (int i = 0; i < ndim; i++)
    at += (size_t)snprintf(shape + at, sizeof shape - at, "%s%lld", i ? ", " : "", (long long)dims[i]);
  if (ndim == 1) shape[at++] = ',';
  shape[at++] = ')';
  shape[at] = '\0';
  char dict[sizeof shape + 96];
  int dlen =
      snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
  /* Pad with spaces so that the data starts on a 64-byte boundary; '\n' ends it. */
  size_t header = 10 + (size_t)dlen + 1;
  size_t padded = (header + 63) / 64 * 64;
  size_t hlen = padded - 10;
  size_t total = padded + nbytes;
  if (nbytes > SIZE_MAX - padded) return fail(err, cap, "array too large");
  unsigned char *b = malloc(total);
  if (b == NULL) return fail(err, cap, "out of memory (%zu bytes)", total);
  memcpy(b, NPY_MAGIC, NPY_MAGIC_LEN);
  b[6] = 1;
  b[7] = 0;
  b[8] = (unsigned char)(hlen & 0xff);
  b[9] = (unsigned char)(hlen >> 8);
  memcpy(b + 10, dict, (size_t)dlen);
  memset(b + 10 + dlen, ' ', hlen - (size_t)dlen - 1);
  b[padded - 1] = '\n';
  if (nbytes) memcpy(b + padded, data, nbytes);
  *out = b;
  *out_len = total;
  return 0;
}

int npy_write(const char *path, sg_dtype dtype, int ndim, const int64_t *dims, const void *data,
              size_t nbytes, char *err, size_t cap) {
  void *buf;
  size_t len;
  if (npy_format(dtype, ndim, dims, data, nbytes, &buf, &len, err, cap) != 0) return -1;
  /* An existing FIFO, device or directory is refused, not written to (or
   * waited on); only a regular file is replaced. */
  FILE *f = cli_fopen_regular(path, true, err, cap);
  if (f == NULL) {
    free(buf);
    return -1;
  }
  size_t put = fwrite(buf, 1, len, f);
  int werr = put != len ? errno : 0;
  free(buf);
  if (fclose(f) != 0 && werr == 0) werr = errno ? errno : EIO;
  if (put != len || werr != 0) {
    remove(path);
    return fail(err, cap, "write error: %s", strerror(werr ? werr : EIO));
  }
  return 0;
}
