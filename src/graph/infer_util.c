/* Helpers shared by the shape-inference functions: dtype facts, shape
 * formatting for messages, broadcasting, axis normalisation. */
#include <stdio.h>
#include <string.h>

#include "graph/graph_internal.h"

size_t sg_dtype_size(sg_dtype dt) {
  switch (dt) {
    case SG_F32:
    case SG_I32: return 4;
    case SG_F16:
    case SG_BF16: return 2;
    case SG_I64: return 8;
    case SG_U8:
    case SG_BOOL: return 1;
  }
  return 0;
}

const char *sg_dtype_name(sg_dtype dt) {
  switch (dt) {
    case SG_F32: return "f32";
    case SG_F16: return "f16";
    case SG_BF16: return "bf16";
    case SG_I32: return "i32";
    case SG_I64: return "i64";
    case SG_U8: return "u8";
    case SG_BOOL: return "bool";
  }
  return "?";
}

const char *sg_role_name(sg_role r) {
  switch (r) {
    case SG_ROLE_INPUT: return "input";
    case SG_ROLE_PARAMETER: return "parameter";
    case SG_ROLE_CONSTANT: return "constant";
    case SG_ROLE_ACTIVATION: return "activation";
    case SG_ROLE_GRADIENT: return "gradient";
    case SG_ROLE_OPTIMIZER_STATE: return "optimizer_state";
    case SG_ROLE_STATE: return "state";
  }
  return "?";
}

const char *sg__name_problem(const char *s) {
  if (s == NULL || s[0] == '\0') return "is empty";
  size_t n = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p; n++) {
    if (n >= SG__MAX_NAME - 1) return "is longer than 4095 bytes";
    unsigned c = *p;
    if (c < 0x20 || c == 0x7f) return "contains a control character";
    if (c < 0x80) {
      p++;
      continue;
    }
    /* UTF-8: reject overlong forms, surrogates and code points past U+10FFFF. */
    int len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
    if (len == 0 || c > 0xf4) return "is not valid UTF-8";
    uint32_t cp = c & (0x7fu >> len);
    for (int i = 1; i < len; i++) {
      if ((p[i] & 0xc0) != 0x80) return "is not valid UTF-8";
      cp = cp << 6 | (p[i] & 0x3fu);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
      return "is not valid UTF-8";
    p += len;
    n += (size_t)len - 1;
  }
  return NULL;
}

bool sg__dtype_valid(sg_dtype dt) { return sg_dtype_size(dt) != 0; }
bool sg__role_valid(sg_role r) { return r >= SG_ROLE_INPUT && r <= SG_ROLE_STATE; }
bool sg__is_float(sg_dtype dt) { return dt == SG_F32 || dt == SG_F16 || dt == SG_BF16; }
bool sg__is_int(sg_dtype dt) { return dt == SG_I32 || dt == SG_I64; }

int64_t sg__numel(int ndim, const int64_t *dims) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= dims[i];
  return n;
}

bool sg__numel_checked(int ndim, const int64_t *dims, int64_t *out) {
  int64_t n = 1;
  if (ndim < 0 || ndim > SG_MAX_DIMS) return false;
  for (int i = 0; i < ndim; i++)
    if (dims[i] < 1 || __builtin_mul_overflow(n, dims[i], &n) || n > SG__MAX_NUMEL) return false;
  *out = n;
  return true;
}

const char *sg__shape_str(char *buf, sg_dtype dt, int ndim, const int64_t *dims) {
  size_t n = 0, cap = SG__SHAPE_STR;
  n += (size_t)snprintf(buf + n, cap - n, "[");
  for (int i = 0; i < ndim && n < cap; i++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? "," : "", (long long)dims[i]);
  if (n < cap) snprintf(buf + n, cap - n, "] %s", sg_dtype_name(dt));
  return buf;
}

const char *sg__tstr(char *buf, const sg__tensor *t) {
  char shape[SG__SHAPE_STR];
  sg__shape_str(shape, t->dtype, t->ndim, t->dims);
  /* Long names are cut so that the shape always fits. Every tensor of a
   * graph has a name; a temporary of an inference function may not, and
   * printf's "(null)" must never reach a message. */
  if (t->name == NULL) snprintf(buf, SG__SHAPE_STR, "(unnamed) %.160s", shape);
  else snprintf(buf, SG__SHAPE_STR, "'%.60s' %.160s", t->name, shape);
  return buf;
}

const char *sg__tensor_str(char *buf, const sg_graph *g, int32_t id) {
  if (g->tensors[id].name) return sg__tstr(buf, &g->tensors[id]);
  char shape[SG__SHAPE_STR];
  const sg__tensor *t = &g->tensors[id];
  snprintf(buf, SG__SHAPE_STR, "#%d %.160s", (int)id, sg__shape_str(shape, t->dtype, t->ndim, t->dims));
  return buf;
}

const sg__tensor *sg__in(const sg_graph *g, const sg__op *op, int i) {
  if (i >= op->n_inputs || op->inputs[i] < 0) return NULL;
  return &g->tensors[op->inputs[i]];
}

void sg__shape_of(const sg__tensor *t, sg__shape *s) {
  s->dtype = t->dtype;
  s->ndim = t->ndim;
  memcpy(s->dims, t->dims, sizeof s->dims);
}

sg_status sg__op_error(const sg__op *op, sg_status st, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const sg__op_def *def = sg__op_def_get(op->kind);
  return sg__error(st, "%s '%s': %s", def ? def->name : "op", op->name ? op->name : "?", msg);
}

sg_status sg__broadcast(const sg__op *op, const sg__tensor *a, const sg__tensor *b, sg__shape *out) {
  int n = a->ndim > b->ndim ? a->ndim : b->ndim;
  out->dtype = a->dtype;
  out->ndim = n;
  for (int i = 0; i < n; i++) {
    int ia = a->ndim - n + i, ib = b->ndim - n + i;
    int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
    if (da != db && da != 1 && db != 1) {
      char sa[SG__SHAPE_STR], sb[SG__SHAPE_STR];
      return sg__op_error(op, SG_ERR_SHAPE, "shapes %s and %s do not broadcast (dim %d: %lld vs %lld)",
                          sg__tstr(sa, a), sg__tstr(sb, b), i, (long long)da, (long long)db);
    }
    out->dims[i] = da == 1 ? db : da;
  }
  return SG_OK;
}

bool sg__norm_axis(int64_t axis, int ndim, int *out) {
  if (axis < -ndim || axis >= ndim) return false;
  *out = (int)(axis < 0 ? axis + ndim : axis);
  return true;
}
