/* The importer's value table: every ONNX tensor name maps to a graph tensor,
 * an import-time constant or an unavailable output. Also initializer
 * decoding, node attributes, error context and the final naming pass. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "onnx/onnx_internal.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the ONNX importer reads raw_data as little-endian host data"
#endif

/* ---- messages ------------------------------------------------------------ */

const char *sg__ox_str(const char *s) { return s ? s : ""; }

sg_status sg__ox_node_error(ox_ctx *c, sg_status st, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const Onnx__NodeProto *n = c->node;
  if (n == NULL) return sg__error(st, "%s", msg);
  if (n->name && n->name[0]) return sg__error(st, "node '%s' (%s): %s", n->name, sg__ox_str(n->op_type), msg);
  return sg__error(st, "node #%d (%s): %s", (int)c->node_index, sg__ox_str(n->op_type), msg);
}

double sg__ox_snap_float(double v) {
  if (!isfinite(v)) return v;
  for (int p = 1; p <= 9; p++) {
    char buf[64];
    snprintf(buf, sizeof buf, "%.*g", p, v);
    double d = strtod(buf, NULL);
    if ((float)d == (float)v) return d;
  }
  return v;
}

/* ---- the name -> value map ----------------------------------------------- */

static uint32_t hash_name(const char *s) { return (uint32_t)XXH3_64bits(s, strlen(s)); }

ox_value *sg__ox_find(ox_ctx *c, const char *name) {
  if (name == NULL || name[0] == '\0' || c->cap_slots == 0) return NULL;
  uint32_t mask = c->cap_slots - 1;
  for (uint32_t i = hash_name(name) & mask;; i = (i + 1) & mask) {
    int32_t id = c->slots[i];
    if (id < 0) return NULL;
    if (strcmp(c->values[id].name, name) == 0) return &c->values[id];
  }
}

static sg_status rehash(ox_ctx *c, uint32_t cap) {
  int32_t *slots = sg__malloc((size_t)cap * sizeof *slots);
  if (slots == NULL) return sg__error(SG_ERR_NO_MEMORY, "ONNX import: out of memory indexing tensor names");
  memset(slots, 0xff, (size_t)cap * sizeof *slots);
  for (uint32_t v = 0; v < c->n_values; v++) {
    uint32_t i = hash_name(c->values[v].name) & (cap - 1);
    while (slots[i] >= 0) i = (i + 1) & (cap - 1);
    slots[i] = (int32_t)v;
  }
  sg__free(c->slots);
  c->slots = slots;
  c->cap_slots = cap;
  return SG_OK;
}

sg_status sg__ox_add(ox_ctx *c, const char *name, ox_value **out) {
  *out = NULL;
  if (c->n_values >= SG__MAX_TENSORS)
    return sg__error(SG_ERR_RANGE, "ONNX import: more than %u tensor names", SG__MAX_TENSORS);
  if (sg__grow((void **)&c->values, &c->cap_values, c->n_values + 1, sizeof *c->values) != SG_OK)
    return sg__error(SG_ERR_NO_MEMORY, "ONNX import: out of memory adding tensor '%s'", name);
  ox_value *v = &c->values[c->n_values++];
  *v = (ox_value){.name = name, .tensor = -1, .producer = -1};
  if ((uint64_t)c->n_values * 2 > c->cap_slots) {
    sg_status st = rehash(c, c->cap_slots ? c->cap_slots * 2 : 64);
    if (st != SG_OK) {
      c->n_values--;
      return st;
    }
  } else {
    uint32_t mask = c->cap_slots - 1, i = hash_name(name) & mask;
    while (c->slots[i] >= 0) i = (i + 1) & mask;
    c->slots[i] = (int32_t)(c->n_values - 1);
  }
  *out = v;
  return SG_OK;
}

ox_value *sg__ox_input(ox_ctx *c, const Onnx__NodeProto *n, int i) {
  if (i < 0 || (size_t)i >= n->n_input) return NULL;
  return sg__ox_find(c, n->input[i]);
}

/* ---- constant data ------------------------------------------------------- */

float sg__ox_f32(const ox_value *v, int64_t i) {
  float f;
  memcpy(&f, (const char *)v->data + 4 * i, 4);
  return f;
}

int64_t sg__ox_i64(const ox_value *v, int64_t i) {
  int64_t x;
  memcpy(&x, (const char *)v->data + 8 * i, 8);
  return x;
}

double sg__ox_num(const ox_value *v, int64_t i) {
  return v->elem == OX_FLOAT ? (double)sg__ox_f32(v, i) : (double)sg__ox_i64(v, i);
}

int64_t sg__ox_fold_numel(int ndim, const int64_t *dims) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (dims[i] < 0 || (n > 0 && dims[i] > OX_FOLD_MAX_NUMEL / n)) return OX_FOLD_MAX_NUMEL + 1;
    n *= dims[i];
  }
  return n;
}

sg_status sg__ox_fold_alloc(ox_ctx *c, int64_t numel, size_t elem_size, void **data) {
  *data = NULL;
  if (numel < 0 || numel > OX_FOLD_MAX_NUMEL)
    return sg__ox_node_error(c, SG_ERR_RANGE,
                             "folding would create a constant of %lld elements; the import limit is %lld",
                             (long long)numel, (long long)OX_FOLD_MAX_NUMEL);
  size_t bytes = (size_t)numel * elem_size;
  if (bytes > OX_FOLD_MAX_BYTES - c->folded_bytes)
    return sg__ox_node_error(c, SG_ERR_RANGE, "constants folded at import exceed %zu bytes",
                             (size_t)OX_FOLD_MAX_BYTES);
  void *p = sg__arena_alloc(&c->tmp, bytes ? bytes : 1, 8);
  if (p == NULL) return sg__ox_node_error(c, SG_ERR_NO_MEMORY, "out of memory folding a constant");
  c->folded_bytes += bytes;
  *data = p;
  return SG_OK;
}

static const char *elem_name(int elem) {
  static const char *const names[] = {"UNDEFINED", "FLOAT",  "UINT8",     "INT8",       "UINT16",  "INT16",
                                      "INT32",     "INT64",  "STRING",    "BOOL",       "FLOAT16", "DOUBLE",
                                      "UINT32",    "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};
  if (elem >= 0 && elem < (int)(sizeof names / sizeof *names)) return names[elem];
  return "unknown";
}

static size_t elem_size(int elem) {
  switch (elem) {
    case OX_FLOAT:
    case OX_INT32: return 4;
    case OX_INT64: return 8;
    case OX_BOOL: return 1;
  }
  return 0;
}

/* Widens int32 or bool data (count values at p, unaligned) to int64. */
static sg_status widen(ox_ctx *c, int elem, const void *p, const int32_t *typed, int64_t count,
                       const void **out) {
  int64_t *w = sg__arena_alloc(&c->tmp, (size_t)(count ? count : 1) * 8, 8);
  if (w == NULL) return sg__error(SG_ERR_NO_MEMORY, "ONNX import: out of memory decoding a tensor");
  for (int64_t i = 0; i < count; i++) {
    if (typed) w[i] = elem == OX_BOOL ? typed[i] != 0 : typed[i];
    else if (elem == OX_BOOL) w[i] = ((const uint8_t *)p)[i] != 0;
    else {
      int32_t x;
      memcpy(&x, (const char *)p + 4 * i, 4);
      w[i] = x;
    }
  }
  *out = w;
  return SG_OK;
}

sg_status sg__ox_decode_tensor(ox_ctx *c, const Onnx__TensorProto *t, const char *what, ox_value *v) {
  const char *name = sg__ox_str(t->name);
  if (t->n_dims > SG_MAX_DIMS)
    return sg__error(SG_ERR_RANGE, "%s '%s' has rank %zu; sgrt tensors have at most %d dims", what, name,
                     t->n_dims, SG_MAX_DIMS);
  int64_t numel = 1;
  for (size_t i = 0; i < t->n_dims; i++) {
    int64_t d = t->dims[i];
    if (d < 0) return sg__error(SG_ERR_FORMAT, "%s '%s': dim %zu is %lld", what, name, i, (long long)d);
    if (d > 0 && numel > SG__MAX_NUMEL / d)
      return sg__error(SG_ERR_RANGE, "%s '%s': dim %zu (%lld) makes more than 2^56 elements", what, name, i,
                       (long long)d);
    numel *= d;
  }
  if (t->segment) return sg__error(SG_ERR_UNSUPPORTED, "%s '%s' is a segment of a tensor", what, name);
  bool external = t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  if (!external && t->n_external_data > 0)
    return sg__error(SG_ERR_FORMAT, "%s '%s' has external_data entries but its data_location is not EXTERNAL",
                     what, name);
  int elem = t->has_data_type ? t->data_type : 0;
  size_t es = elem_size(elem);
  if (es == 0)
    return sg__error(SG_ERR_UNSUPPORTED,
                     "%s '%s' has data type %s (%d); sgrt imports float32 models (int64, int32 and bool only "
                     "for shape constants)",
                     what, name, elem_name(elem), elem);
  size_t typed_fields = (t->n_float_data > 0) + (t->n_int32_data > 0) + (t->n_int64_data > 0) +
                        (t->n_double_data > 0) + (t->n_uint64_data > 0) + (t->n_string_data > 0);
  v->kind = OX_V_CONST;
  v->elem = elem;
  v->ndim = (int)t->n_dims;
  for (size_t i = 0; i < t->n_dims; i++) v->dims[i] = t->dims[i];
  v->numel = numel;
  if (external) {
    if (typed_fields || t->has_raw_data)
      return sg__error(SG_ERR_FORMAT, "%s '%s' keeps its data in an external file and in the model too", what,
                       name);
    SG_CHECK(sg__ox_external(c, t, what, (uint64_t)numel * es, &v->data));
    if (elem == OX_INT32 || elem == OX_BOOL) SG_CHECK(widen(c, elem, v->data, NULL, numel, &v->data));
    return SG_OK;
  }
  if (t->has_raw_data) {
    if (typed_fields) return sg__error(SG_ERR_FORMAT, "%s '%s' has both raw_data and typed data", what, name);
    uint64_t expect = (uint64_t)numel * es;
    if (t->raw_data.len != expect)
      return sg__error(SG_ERR_FORMAT, "%s '%s' (%s, %lld elements): raw_data has %zu bytes, expected %llu",
                       what, name, elem_name(elem), (long long)numel, t->raw_data.len,
                       (unsigned long long)expect);
    v->data = t->raw_data.data;
    if (elem == OX_INT32 || elem == OX_BOOL)
      SG_CHECK(widen(c, elem, t->raw_data.data, NULL, numel, &v->data));
    return SG_OK;
  }
  size_t have = elem == OX_FLOAT ? t->n_float_data : elem == OX_INT64 ? t->n_int64_data : t->n_int32_data;
  const char *field = elem == OX_FLOAT ? "float_data" : elem == OX_INT64 ? "int64_data" : "int32_data";
  if (typed_fields > (have > 0))
    return sg__error(SG_ERR_FORMAT, "%s '%s' (%s) has data in a field other than %s", what, name,
                     elem_name(elem), field);
  if (have != (uint64_t)numel)
    return sg__error(SG_ERR_FORMAT, "%s '%s' (%s): %s has %zu values, expected %lld", what, name,
                     elem_name(elem), field, have, (long long)numel);
  if (elem == OX_FLOAT) v->data = t->float_data;
  else if (elem == OX_INT64) v->data = t->int64_data;
  else SG_CHECK(widen(c, elem, NULL, t->int32_data, numel, &v->data));
  return SG_OK;
}

/* ---- graph tensors ------------------------------------------------------- */

static sg_status ensure_want(ox_ctx *c, uint32_t n) {
  if (n <= c->cap_want) return SG_OK;
  uint32_t cap = c->cap_want ? c->cap_want : 64;
  while (cap < n) cap *= 2;
  const char **w = sg__realloc(c->want, (size_t)cap * sizeof *w);
  if (w == NULL) return sg__error(SG_ERR_NO_MEMORY, "ONNX import: out of memory");
  c->want = w;
  uint8_t *p = sg__realloc(c->want_prio, cap);
  if (p == NULL) return sg__error(SG_ERR_NO_MEMORY, "ONNX import: out of memory");
  c->want_prio = p;
  for (uint32_t i = c->cap_want; i < cap; i++) {
    c->want[i] = NULL;
    c->want_prio[i] = 0;
  }
  c->cap_want = cap;
  return SG_OK;
}

sg_status sg__ox_want_name(ox_ctx *c, int32_t tensor, const char *name, int prio) {
  SG_CHECK(ensure_want(c, (uint32_t)tensor + 1));
  if (prio <= c->want_prio[tensor]) return SG_OK;
  /* Copied: callers pass names built in stack buffers. */
  const char *clean = sg__ox_sanitize(c, name);
  c->want[tensor] = clean ? sg__arena_strdup(&c->tmp, clean) : NULL;
  if (c->want[tensor] == NULL) return sg__error(SG_ERR_NO_MEMORY, "ONNX import: out of memory");
  c->want_prio[tensor] = (uint8_t)prio;
  return SG_OK;
}

const char *sg__ox_tmp_name(ox_ctx *c, const char *onnx_name) {
  /* Usually the final name is free already, and messages read best with it. */
  const char *clean = sg__ox_sanitize(c, onnx_name);
  if (clean == NULL) return NULL;
  if (sg__tensor_lookup(c->g, clean) < 0) return clean;
  char buf[48];
  do snprintf(buf, sizeof buf, "onnx.import.%u", c->tmp_names++);
  while (sg__tensor_lookup(c->g, buf) >= 0);
  return sg__arena_strdup(&c->tmp, buf);
}

const char *sg__ox_message(ox_ctx *c, const char *msg, char *buf, size_t cap) {
  size_t o = 0;
  const char *p = msg;
  while (*p && o + 1 < cap) {
    const char *q = *p == '\'' ? strchr(p + 1, '\'') : NULL;
    if (q && q - p - 1 < SG__MAX_NAME) {
      char name[SG__MAX_NAME];
      memcpy(name, p + 1, (size_t)(q - p - 1));
      name[q - p - 1] = '\0';
      int32_t id = sg__tensor_lookup(c->g, name);
      const char *use = id >= 0 && (uint32_t)id < c->cap_want && c->want[id] ? c->want[id] : name;
      o += (size_t)snprintf(buf + o, cap - o, "'%s'", use);
      if (o >= cap) o = cap - 1;
      p = q + 1;
    } else {
      buf[o++] = *p++;
    }
  }
  buf[o] = '\0';
  return buf;
}

static sg_dtype to_dtype(int elem) {
  switch (elem) {
    case OX_FLOAT: return SG_F32;
    case OX_INT64: return SG_I64;
    case OX_INT32: return SG_I32;
    case OX_BOOL: return SG_BOOL;
  }
  return (sg_dtype)0;
}

int sg__ox_elem_of(const ox_ctx *c, const ox_value *v) {
  if (v->kind != OX_V_TENSOR) return v->elem;
  sg_dtype dt = c->g->tensors[v->tensor].dtype;
  return dt == SG_F32    ? OX_FLOAT
         : dt == SG_I64  ? OX_INT64
         : dt == SG_I32  ? OX_INT32
         : dt == SG_BOOL ? OX_BOOL
                         : 0;
}

sg_status sg__ox_tensor(ox_ctx *c, ox_value *v, sg_tensor *out) {
  *out = SG_NO_TENSOR;
  if (v->kind == OX_V_UNAVAILABLE)
    return sg__ox_node_error(c, SG_ERR_UNSUPPORTED, "uses '%s', which sgrt cannot provide: %s", v->name,
                             v->why);
  if (v->kind == OX_V_SEQUENCE)
    return sg__ox_node_error(
        c, SG_ERR_UNSUPPORTED,
        "uses the sequence '%s' as a tensor; sgrt takes sequences apart only by SequenceAt "
        "at constant positions",
        v->name);
  if (v->kind != OX_V_TENSOR && v->kind != OX_V_CONST)
    return sg__ox_node_error(c, SG_ERR_INTERNAL, "tensor '%s' has not been computed", v->name);
  if (v->tensor >= 0) {
    *out = (sg_tensor){v->tensor};
    return SG_OK;
  }
  if (v->tied) { /* a tie written out twice: the one tensor */
    sg_tensor p;
    SG_CHECK(sg__ox_tensor(c, &c->values[v->tie_of], &p));
    if (v->tie_transposed) {
      static const int64_t swap[2] = {1, 0};
      p = sg_transpose(c->g, p, 2, swap);
      if (p.id < 0)
        return sg__ox_node_error(c, sg_graph_status(c->g), "tensor '%s': %s", v->name, sg_last_error());
      SG_CHECK(sg__ox_want_name(c, p.id, v->name, 2));
    }
    v->tensor = p.id;
    *out = p;
    return SG_OK;
  }
  sg_dtype dt = to_dtype(v->elem);
  if (dt == 0)
    return sg__ox_node_error(c, SG_ERR_UNSUPPORTED,
                             "constant '%s' of type %s would become a graph tensor; sgrt imports float32, "
                             "int32, int64 and bool tensors",
                             v->name, elem_name(v->elem));
  if (v->numel == 0)
    return sg__ox_node_error(c, SG_ERR_UNSUPPORTED, "tensor '%s' has a zero-sized dim; sgrt needs dims >= 1",
                             v->name);
  /* int32 and bool constants are held widened to int64: narrow them back. */
  const void *data = v->data;
  if (dt == SG_I32 || dt == SG_BOOL) {
    void *narrow;
    SG_CHECK(sg__ox_fold_alloc(c, v->numel, sg_dtype_size(dt), &narrow));
    for (int64_t i = 0; i < v->numel; i++) {
      int64_t x = sg__ox_i64(v, i);
      if (dt == SG_I32) ((int32_t *)narrow)[i] = (int32_t)x;
      else ((uint8_t *)narrow)[i] = x != 0;
    }
    data = narrow;
  }
  const char *tmp = sg__ox_tmp_name(c, v->name);
  if (tmp == NULL) return sg__error(SG_ERR_NO_MEMORY, "ONNX import: out of memory");
  sg_tensor t = sg_graph_add_tensor(c->g, tmp, dt, v->role, v->ndim, v->dims, data);
  if (t.id < 0)
    return sg__ox_node_error(c, sg_graph_status(c->g), "tensor '%s': %s", v->name, sg_last_error());
  v->tensor = t.id;
  SG_CHECK(sg__ox_want_name(c, t.id, v->name, 2));
  *out = t;
  return SG_OK;
}

/* ---- outputs of the current node ----------------------------------------- */

bool sg__ox_has_output(const ox_ctx *c, int k) {
  const Onnx__NodeProto *n = c->node;
  return k >= 0 && (size_t)k < n->n_output && n->output[k] && n->output[k][0];
}

static ox_value *out_value(ox_ctx *c, int k) {
  return sg__ox_has_output(c, k) ? sg__ox_find(c, c->node->output[k]) : NULL;
}

sg_status sg__ox_set_tensor(ox_ctx *c, int k, sg_tensor t) {
  ox_value *v = out_value(c, k);
  if (v == NULL) {
    /* An unnamed (unused) output: name the tensor after its node. */
    char buf[SG__MAX_NAME];
    const char *node = c->node->name && c->node->name[0] ? c->node->name : sg__ox_str(c->node->op_type);
    snprintf(buf, sizeof buf, "%.4000s:%d", node, k);
    const char *name = sg__arena_strdup(&c->tmp, buf);
    if (name == NULL) return sg__error(SG_ERR_NO_MEMORY, "ONNX import: out of memory");
    return sg__ox_want_name(c, t.id, name, 1);
  }
  v->kind = OX_V_TENSOR;
  v->tensor = t.id;
  return sg__ox_want_name(c, t.id, v->name, 2);
}

sg_status sg__ox_set_alias(ox_ctx *c, int k, const ox_value *src) {
  ox_value *v = out_value(c, k);
  if (v == NULL) return SG_OK;
  ox_value keep = *v;
  *v = *src;
  v->name = keep.name;
  v->producer = keep.producer;
  v->initializer = false;
  v->input = false;
  /* A constant is copied, not shared: exporters put Identity nodes between
   * equal initializers they deduplicated (distinct parameters in the model),
   * so each alias becomes a tensor of its own when it is used. */
  if (v->kind == OX_V_CONST) v->tensor = -1;
  return SG_OK;
}

sg_status sg__ox_set_const(ox_ctx *c, int k, int elem, int ndim, const int64_t *dims, const void *data) {
  ox_value *v = out_value(c, k);
  if (v == NULL) return SG_OK;
  v->kind = OX_V_CONST;
  v->tensor = -1;
  v->role = SG_ROLE_CONSTANT;
  v->elem = elem;
  v->ndim = ndim;
  v->numel = 1;
  for (int i = 0; i < ndim; i++) {
    v->dims[i] = dims[i];
    v->numel *= dims[i];
  }
  v->data = data;
  return SG_OK;
}

sg_status sg__ox_set_unavailable(ox_ctx *c, int k, const char *why) {
  ox_value *v = out_value(c, k);
  if (v == NULL) return SG_OK;
  v->kind = OX_V_UNAVAILABLE;
  v->tensor = -1;
  v->why = why;
  v->empty = false;
  return SG_OK;
}

sg_status sg__ox_set_empty(ox_ctx *c, int k, int ndim, const int64_t *dims, const char *why) {
  SG_CHECK(sg__ox_set_unavailable(c, k, why));
  ox_value *v = out_value(c, k);
  if (v == NULL) return SG_OK;
  v->empty = true;
  v->ndim = ndim;
  memcpy(v->dims, dims, sizeof(int64_t) * (size_t)ndim);
  v->numel = 0;
  return SG_OK;
}

sg_status sg__ox_note_ops(ox_ctx *c, uint32_t first) {
  uint32_t n = c->g->n_ops, cap = c->cap_op_node;
  if (n == 0) return SG_OK;
  if (sg__grow((void **)&c->op_node, &cap, n, sizeof *c->op_node) != SG_OK)
    return sg__error(SG_ERR_NO_MEMORY, "ONNX import: out of memory");
  for (uint32_t i = c->cap_op_node; i < cap; i++) c->op_node[i] = -1;
  c->cap_op_node = cap;
  for (uint32_t i = first; i < n; i++) c->op_node[i] = c->node_index;
  return SG_OK;
}

/* ---- names --------------------------------------------------------------- */

/* Room left for a "_12345" suffix below the 4095-byte name limit. */
#define OX_NAME_MAX 4000

/* Length of the valid UTF-8 sequence at p (as sg__name_problem accepts it),
 * or 0. */
static size_t utf8_seq(const unsigned char *p) {
  unsigned c0 = p[0];
  if (c0 < 0x80) return c0 >= 0x20 && c0 != 0x7f;
  int len = c0 >= 0xf0 ? 4 : c0 >= 0xe0 ? 3 : c0 >= 0xc2 ? 2 : 0;
  if (len == 0 || c0 > 0xf4) return 0;
  uint32_t cp = c0 & (0x7fu >> len);
  for (int i = 1; i < len; i++) {
    if ((p[i] & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (p[i] & 0x3fu);
  }
  if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
      (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
    return 0;
  return (size_t)len;
}

const char *sg__ox_sanitize(ox_ctx *c, const char *name) {
  if (name && name[0] && strlen(name) <= OX_NAME_MAX && sg__name_problem(name) == NULL) return name;
  if (name == NULL || name[0] == '\0') return "unnamed";
  size_t n = strlen(name);
  char *out = sg__arena_alloc(&c->tmp, (n < OX_NAME_MAX ? n : OX_NAME_MAX) + 1, 1);
  if (out == NULL) return NULL;
  size_t o = 0;
  for (const unsigned char *p = (const unsigned char *)name; *p;) {
    size_t len = utf8_seq(p);
    if (len == 0) {
      if (o + 1 > OX_NAME_MAX) break;
      out[o++] = '_';
      p++;
    } else {
      if (o + len > OX_NAME_MAX) break;
      memcpy(out + o, p, len);
      o += len;
      p += len;
    }
  }
  out[o] = '\0';
  return out;
}

/* `base`, or base_1, base_2, ... whichever is not in the (rebuilt) map. */
static char *unique_name(ox_ctx *c, bool ops, const char *base) {
  int32_t (*lookup)(const sg_graph *, const char *) = ops ? sg__op_lookup : sg__tensor_lookup;
  if (lookup(c->g, base) < 0) return sg__arena_strdup(&c->g->arena, base);
  char buf[SG__MAX_NAME + 16];
  for (uint32_t k = 1;; k++) {
    snprintf(buf, sizeof buf, "%.*s_%u", OX_NAME_MAX, base, k);
    if (lookup(c->g, buf) < 0) return sg__arena_strdup(&c->g->arena, buf);
  }
}

static int32_t node_of(const ox_ctx *c, uint32_t op) { return op < c->cap_op_node ? c->op_node[op] : -1; }

sg_status sg__ox_apply_names(ox_ctx *c) {
  sg_graph *g = c->g;
  SG_CHECK(ensure_want(c, g->n_tensors));
  /* Tensors: ONNX graph output names first, then the other ONNX names, then
   * derived ones, then whatever sgrt named; later ones yield on a clash. */
  sg__names_clear(&g->tensor_names);
  for (int prio = 3; prio >= 0; prio--) {
    for (uint32_t i = 0; i < g->n_tensors; i++) {
      if (c->want_prio[i] != prio) continue;
      char *name = unique_name(c, false, prio ? c->want[i] : g->tensors[i].name);
      if (name == NULL) return sg__error(SG_ERR_NO_MEMORY, "ONNX import: out of memory naming tensors");
      g->tensors[i].name = name;
      if (sg__names_insert(g, false, (int32_t)i) != SG_OK)
        return sg__error(SG_ERR_NO_MEMORY, "ONNX import: out of memory naming tensors");
    }
  }
  /* Ops: the name of the ONNX node they come from; "node/kind" when one node
   * became several ops. */
  sg__names_clear(&g->op_names);
  for (uint32_t i = 0; i < g->n_ops; i++) {
    int32_t node = node_of(c, i);
    const char *nn = node >= 0 ? c->graph->node[node]->name : NULL;
    const char *base = g->ops[i].name;
    char buf[SG__MAX_NAME];
    if (nn && nn[0]) {
      uint32_t first = i, last = i;
      while (first > 0 && node_of(c, first - 1) == node) first--;
      while (last + 1 < g->n_ops && node_of(c, last + 1) == node) last++;
      const char *clean = sg__ox_sanitize(c, nn);
      if (clean == NULL) return sg__error(SG_ERR_NO_MEMORY, "ONNX import: out of memory naming ops");
      if (first == last) base = clean;
      else {
        snprintf(buf, sizeof buf, "%.*s/%s", OX_NAME_MAX - 40, clean, sg_op_kind_name(g->ops[i].kind));
        base = buf;
      }
    }
    char *name = unique_name(c, true, base);
    if (name == NULL) return sg__error(SG_ERR_NO_MEMORY, "ONNX import: out of memory naming ops");
    g->ops[i].name = name;
    if (sg__names_insert(g, true, (int32_t)i) != SG_OK)
      return sg__error(SG_ERR_NO_MEMORY, "ONNX import: out of memory naming ops");
  }
  return SG_OK;
}

/* ---- attributes ---------------------------------------------------------- */

static const char *attr_type_name(int t) {
  static const char *const names[] = {
      "UNDEFINED", "FLOAT",   "INT",    "STRING",        "TENSOR",         "GRAPH",      "FLOATS",     "INTS",
      "STRINGS",   "TENSORS", "GRAPHS", "SPARSE_TENSOR", "SPARSE_TENSORS", "TYPE_PROTO", "TYPE_PROTOS"};
  return t >= 0 && t < (int)(sizeof names / sizeof *names) ? names[t] : "unknown";
}

#define OX_AT(x) ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__##x

/* The fields of AttributeProto that hold a value, and the type each
 * belongs to. */
typedef struct attr_field {
  const char *name;
  int type;
  bool set;
} attr_field;

enum { N_ATTR_FIELDS = 14 };

static void attr_fields(const Onnx__AttributeProto *a, attr_field f[N_ATTR_FIELDS]) {
  const attr_field all[N_ATTR_FIELDS] = {
      {"f", OX_AT(FLOAT), a->has_f},
      {"i", OX_AT(INT), a->has_i},
      {"s", OX_AT(STRING), a->has_s},
      {"t", OX_AT(TENSOR), a->t != NULL},
      {"g", OX_AT(GRAPH), a->g != NULL},
      {"sparse_tensor", OX_AT(SPARSE_TENSOR), a->sparse_tensor != NULL},
      {"tp", OX_AT(TYPE_PROTO), a->tp != NULL},
      {"floats", OX_AT(FLOATS), a->n_floats > 0},
      {"ints", OX_AT(INTS), a->n_ints > 0},
      {"strings", OX_AT(STRINGS), a->n_strings > 0},
      {"tensors", OX_AT(TENSORS), a->n_tensors > 0},
      {"graphs", OX_AT(GRAPHS), a->n_graphs > 0},
      {"sparse_tensors", OX_AT(SPARSE_TENSORS), a->n_sparse_tensors > 0},
      {"type_protos", OX_AT(TYPE_PROTOS), a->n_type_protos > 0},
  };
  memcpy(f, all, sizeof all);
}

/* The field that holds the value (NULL: none), after
 * sg__ox_check_attr_fields made sure there is at most one. */
static const attr_field *value_field(const Onnx__AttributeProto *a, attr_field f[N_ATTR_FIELDS]) {
  attr_fields(a, f);
  for (int k = 0; k < N_ATTR_FIELDS; k++)
    if (f[k].set) return &f[k];
  return NULL;
}

/* The attribute's type; files that leave `type` unset get it from the one
 * field that holds a value. */
static int attr_type(const Onnx__AttributeProto *a) {
  if (a->has_type) return (int)a->type;
  attr_field f[N_ATTR_FIELDS];
  const attr_field *v = value_field(a, f);
  return v ? v->type : 0;
}

sg_status sg__ox_check_attr_fields(ox_ctx *c) {
  const Onnx__NodeProto *n = c->node;
  for (size_t i = 0; i < n->n_attribute; i++) {
    const Onnx__AttributeProto *a = n->attribute[i];
    if (a->name == NULL || a->name[0] == '\0')
      return sg__ox_node_error(c, SG_ERR_FORMAT, "attribute %zu has no name", i);
    attr_field f[N_ATTR_FIELDS];
    attr_fields(a, f);
    const attr_field *first = NULL;
    for (int k = 0; k < N_ATTR_FIELDS; k++) {
      if (!f[k].set) continue;
      if (first)
        return sg__ox_node_error(c, SG_ERR_FORMAT, "attribute '%s'%s%s carries values in both '%s' and '%s'",
                                 a->name, a->has_type ? " declared " : "",
                                 a->has_type ? attr_type_name((int)a->type) : "", first->name, f[k].name);
      first = &f[k];
    }
    /* Without a value the attribute is its type's default (0, empty), as
     * proto3 writers leave zeros out; onnx.checker accepts that too. */
    if (a->has_type && first && first->type != (int)a->type)
      return sg__ox_node_error(
          c, SG_ERR_FORMAT,
          "attribute '%s' is declared %s (%d) but its value is in field '%s', which holds %s", a->name,
          attr_type_name((int)a->type), (int)a->type, first->name, attr_type_name(first->type));
  }
  return SG_OK;
}

const Onnx__AttributeProto *sg__ox_attr(const ox_ctx *c, const char *name) {
  for (size_t i = 0; i < c->node->n_attribute; i++) {
    const Onnx__AttributeProto *a = c->node->attribute[i];
    if (a->name && strcmp(a->name, name) == 0) return a;
  }
  return NULL;
}

static sg_status want_type(ox_ctx *c, const Onnx__AttributeProto *a, int type) {
  int have = attr_type(a);
  if (have == type) return SG_OK;
  attr_field f[N_ATTR_FIELDS];
  const attr_field *v = value_field(a, f);
  char carries[64];
  if (v) snprintf(carries, sizeof carries, "value in '%s'", v->name);
  else snprintf(carries, sizeof carries, "no value");
  return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "attribute '%s' is %s %s (%s); %s expects %s", a->name,
                           a->has_type ? "declared" : "inferred as", attr_type_name(have), carries,
                           sg__ox_str(c->node->op_type), attr_type_name(type));
}

sg_status sg__ox_attr_typed(ox_ctx *c, const char *name, int type, const Onnx__AttributeProto **out) {
  *out = sg__ox_attr(c, name);
  if (*out == NULL) return SG_OK;
  sg_status st = want_type(c, *out, type);
  if (st != SG_OK) *out = NULL;
  return st;
}

sg_status sg__ox_attr_int(ox_ctx *c, const char *name, int64_t def, int64_t *out) {
  *out = def;
  const Onnx__AttributeProto *a = sg__ox_attr(c, name);
  if (a == NULL) return SG_OK;
  SG_CHECK(want_type(c, a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT));
  *out = a->i;
  return SG_OK;
}

sg_status sg__ox_attr_float(ox_ctx *c, const char *name, double def, double *out) {
  *out = def;
  const Onnx__AttributeProto *a = sg__ox_attr(c, name);
  if (a == NULL) return SG_OK;
  SG_CHECK(want_type(c, a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT));
  *out = a->f;
  return SG_OK;
}

sg_status sg__ox_attr_ints(ox_ctx *c, const char *name, int cap, int64_t *vals, int *n) {
  *n = 0;
  const Onnx__AttributeProto *a = sg__ox_attr(c, name);
  if (a == NULL) return SG_OK;
  SG_CHECK(want_type(c, a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS));
  if (a->n_ints > (size_t)cap)
    return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "attribute '%s' has %zu values; at most %d are supported",
                             name, a->n_ints, cap);
  for (size_t i = 0; i < a->n_ints; i++) vals[i] = a->ints[i];
  *n = (int)a->n_ints;
  return SG_OK;
}

sg_status sg__ox_attr_string(ox_ctx *c, const char *name, const char *def, char *buf, size_t cap) {
  snprintf(buf, cap, "%s", def);
  const Onnx__AttributeProto *a = sg__ox_attr(c, name);
  if (a == NULL) return SG_OK;
  SG_CHECK(want_type(c, a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING));
  size_t n = a->s.len < cap - 1 ? a->s.len : cap - 1;
  if (n) memcpy(buf, a->s.data, n);
  buf[n] = '\0';
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)buf[i] < 0x20 || (unsigned char)buf[i] >= 0x7f) buf[i] = '?';
  return SG_OK;
}

sg_status sg__ox_check_attrs(ox_ctx *c, const char *const *known) {
  const Onnx__NodeProto *n = c->node;
  for (size_t i = 0; i < n->n_attribute; i++) {
    const char *name = n->attribute[i]->name;
    if (name == NULL || name[0] == '\0')
      return sg__ox_node_error(c, SG_ERR_FORMAT, "attribute %zu has no name", i);
    if (n->attribute[i]->ref_attr_name && n->attribute[i]->ref_attr_name[0])
      return sg__ox_node_error(c, SG_ERR_UNSUPPORTED, "attribute '%s' refers to a function attribute", name);
    for (size_t j = 0; j < i; j++)
      if (n->attribute[j]->name && strcmp(n->attribute[j]->name, name) == 0)
        return sg__ox_node_error(c, SG_ERR_FORMAT, "attribute '%s' is given twice", name);
    bool ok = false;
    for (const char *const *k = known; *k && !ok; k++) ok = strcmp(*k, name) == 0;
    if (!ok) return sg__ox_node_error(c, SG_ERR_UNSUPPORTED, "attribute '%s' is not supported", name);
  }
  return SG_OK;
}

const char *sg__onnx_dims_text(char *buf, size_t cap, int ndim, const int64_t *dims) {
  size_t o = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < ndim && o < cap; i++)
    o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? "," : "", (long long)dims[i]);
  if (o < cap) snprintf(buf + o, cap - o, "]");
  return buf;
}
