/* Which initializers of a PyTorch 2 (dynamo) export are weights.
 *
 * The importer's rule for other files is that float initializers are the
 * model's weights (TorchScript exports write constants as Constant nodes).
 * The dynamo exporter breaks it: its graph optimizer (torch.onnx.export's
 * optimize=True, the default) lifts scalars and folded masks into
 * initializers (the attention scale, the -inf fill, a causal mask), folds
 * constant work on weights into new initializers named val_N (a Linear's
 * weight stored transposed; the tied lm_head's transposed copy of the token
 * embedding), and merges initializers of equal value. Trained as weights,
 * the scalars and masks would change, and the tie would be two tensors.
 *
 * But such files say what each value is. torch.export's graph signature
 * marks every weight's value_info with metadata_props
 * "pkg.torch.export.graph_signature.InputSpec.kind" = PARAMETER (buffers:
 * BUFFER), the optimizer marks each folded value with
 * "pkg.onnxscript.optimizer.folded_from" = the Python list of the names it
 * was computed from, and the graph's metadata lists every parameter target.
 * When a file has the signature, this pass gives each float initializer the
 * role that metadata says:
 *  - PARAMETER: a parameter; BUFFER or CONSTANT_TENSOR: a constant;
 *  - folded from a parameter: a parameter (the optimizer's transposed copy
 *    of a weight trains as the weight does: every optimizer here is
 *    elementwise); but a copy of a weight that is itself in the file (a
 *    tie) becomes that weight, transposed, when the data says it is one, so
 *    the two stay one tensor as in PyTorch; any other function of such a
 *    weight is warned about, as it trains apart;
 *  - folded from constants only, or neither marked nor folded (a lifted
 *    scalar) where the optimizer recorded what it folded: a constant.
 * Where the optimizer ran, parameters of the signature that the file lacks
 * were tied, or merged into others of equal value (the file cannot tell
 * which): a warning says so and how to export them apart (optimize=False).
 *
 * Debian's onnx.proto (IR 8) predates metadata_props on ValueInfoProto
 * (field 4) and GraphProto (field 16), so protobuf-c keeps them as unknown
 * fields, each holding its StringStringEntryProto with its length prefix:
 * they are read here from those bytes. */
#include <stdio.h>
#include <string.h>

#include "onnx/onnx_internal.h"

#define KIND_KEY "pkg.torch.export.graph_signature.InputSpec.kind"
#define FOLDED_KEY "pkg.onnxscript.optimizer.folded_from"
#define SIGNATURE_KEY "pkg.torch.export.ExportedProgram.graph_signature"
#define VALUE_INFO_METADATA 4
#define GRAPH_METADATA 16

typedef struct span {
  const uint8_t *p;
  size_t n;
} span;

static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64 && *p < end; shift += 7) {
    uint8_t b = *(*p)++;
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return true;
    }
  }
  return false;
}

/* The key and value of a StringStringEntryProto (fields 1 and 2). */
static bool entry(const uint8_t *p, const uint8_t *end, span *key, span *value) {
  *key = *value = (span){NULL, 0};
  while (p < end) {
    uint64_t tag, len;
    if (!varint(&p, end, &tag)) return false;
    switch (tag & 7) {
      case 0:
        if (!varint(&p, end, &len)) return false;
        break;
      case 1:
      case 5: {
        size_t skip = (tag & 7) == 1 ? 8 : 4;
        if ((size_t)(end - p) < skip) return false;
        p += skip;
        break;
      }
      case 2:
        if (!varint(&p, end, &len) || len > (uint64_t)(end - p)) return false;
        if (tag >> 3 == 1) *key = (span){p, (size_t)len};
        if (tag >> 3 == 2) *value = (span){p, (size_t)len};
        p += len;
        break;
      default: return false;
    }
  }
  return key->p != NULL;
}

/* The value of metadata entry `key` of message m (unknown field `field`), as
 * a NUL-terminated copy in c->tmp, or NULL when absent. */
static const char *metadata(ox_ctx *c, const ProtobufCMessage *m, uint32_t field, const char *key) {
  size_t klen = strlen(key);
  for (unsigned i = 0; i < m->n_unknown_fields; i++) {
    const ProtobufCMessageUnknownField *u = &m->unknown_fields[i];
    if (u->tag != field || u->wire_type != PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED) continue;
    const uint8_t *p = u->data, *end = u->data + u->len;
    uint64_t len;
    if (!varint(&p, end, &len) || len != (uint64_t)(end - p)) continue;
    span k, v;
    if (!entry(p, end, &k, &v) || k.n != klen || memcmp(k.p, key, klen) != 0) continue;
    char *s = sg__arena_alloc(&c->tmp, v.n + 1, 1);
    if (s == NULL) return NULL;
    if (v.n) memcpy(s, v.p, v.n);
    s[v.n] = '\0';
    return s;
  }
  return NULL;
}

/* Calls fn for each name of a Python list literal ("['a', 'b']") or of each
 * "PARAMETER target='x'" of a graph signature (prefix "target="), as long as
 * it returns true. Names are quoted by ' or ". */
typedef bool (*name_fn)(ox_ctx *c, const char *name, size_t n, void *arg);

static void each_quoted(ox_ctx *c, const char *s, const char *prefix, name_fn fn, void *arg) {
  size_t plen = prefix ? strlen(prefix) : 0;
  for (const char *p = s; p && *p;) {
    if (prefix) {
      p = strstr(p, prefix);
      if (p == NULL) return;
      p += plen;
    } else {
      p += strcspn(p, "'\"");
    }
    char q = *p;
    if (q != '\'' && q != '"') return;
    const char *e = strchr(p + 1, q);
    if (e == NULL) return;
    if (!fn(c, p + 1, (size_t)(e - p - 1), arg)) return;
    p = e + 1;
  }
}

/* ---- what each initializer is ---------------------------------------------- */

typedef struct meta {
  const char *kind;   /* InputSpec.kind, or NULL */
  const char *folded; /* folded_from, or NULL */
} meta;

static ox_value *find_n(ox_ctx *c, const char *name, size_t n) {
  char buf[SG__MAX_NAME];
  if (n >= sizeof buf) return NULL;
  memcpy(buf, name, n);
  buf[n] = '\0';
  return sg__ox_find(c, buf);
}

typedef struct source_scan {
  const meta *metas;
  const char *const *targets; /* the signature's parameter targets */
  uint32_t n_targets;
  ox_value *param; /* a folded-from name that is an initializer marked PARAMETER */
  int n_params;    /* folded-from names that are parameters */
} source_scan;

static bool is_target(const source_scan *s, const char *name, size_t n) {
  for (uint32_t i = 0; i < s->n_targets; i++)
    if (strlen(s->targets[i]) == n && memcmp(s->targets[i], name, n) == 0) return true;
  return false;
}

static bool scan_source(ox_ctx *c, const char *name, size_t n, void *arg) {
  source_scan *s = arg;
  ox_value *v = find_n(c, name, n);
  const char *kind = v ? s->metas[v - c->values].kind : NULL;
  bool param = (kind && strcmp(kind, "PARAMETER") == 0) || is_target(s, name, n);
  if (param) {
    s->n_params++;
    if (v && v->initializer && v->elem == OX_FLOAT) s->param = v;
  }
  return true;
}

typedef struct targets {
  const char **names;
  uint32_t n, cap;
} targets;

static bool add_target(ox_ctx *c, const char *name, size_t n, void *arg) {
  targets *t = arg;
  if (t->n == t->cap) {
    uint32_t cap = t->cap ? 2 * t->cap : 64;
    const char **names = sg__arena_alloc(&c->tmp, cap * sizeof *names, sizeof(void *));
    if (names == NULL) return false;
    if (t->n) memcpy(names, t->names, t->n * sizeof *names);
    t->names = names;
    t->cap = cap;
  }
  char *s = sg__arena_alloc(&c->tmp, n + 1, 1);
  if (s == NULL) return false;
  memcpy(s, name, n);
  s[n] = '\0';
  t->names[t->n++] = s;
  return true;
}

typedef struct seen {
  const char *name;
  bool found;
} seen;

static bool find_name(ox_ctx *c, const char *name, size_t n, void *arg) {
  (void)c;
  seen *s = arg;
  if (strlen(s->name) == n && memcmp(s->name, name, n) == 0) s->found = true;
  return !s->found;
}

/* v holds exactly p's data (as_transpose: p's transpose; both 2-D). */
static bool same_data(const ox_value *v, const ox_value *p, bool as_transpose) {
  if (v->numel != p->numel || v->ndim != p->ndim) return false;
  if (as_transpose && (v->ndim != 2 || v->dims[0] != p->dims[1] || v->dims[1] != p->dims[0])) return false;
  if (!as_transpose)
    for (int d = 0; d < v->ndim; d++)
      if (v->dims[d] != p->dims[d]) return false;
  for (int64_t i = 0; i < v->numel; i++) {
    int64_t j = as_transpose ? (i % v->dims[1]) * p->dims[1] + i / v->dims[1] : i;
    float a = sg__ox_f32(v, i), b = sg__ox_f32(p, j);
    if (memcmp(&a, &b, sizeof a) != 0) return false;
  }
  return true;
}

/* v, a parameter folded from parameter p, which the file holds too (a
 * tie): when v is p's data, or its transpose, it becomes that (on
 * materialisation), so that the two stay one tensor as in PyTorch. Any other
 * function of p trains apart from it: a warning says so. */
static void tie(ox_ctx *c, ox_value *v, ox_value *p) {
  bool same = same_data(v, p, false);
  if (same || same_data(v, p, true)) {
    v->tied = true;
    v->tie_of = (int32_t)(p - c->values);
    v->tie_transposed = !same;
    return;
  }
  SG_WARN("ONNX import: '%s' was computed from parameter '%s' by the exporter's optimizer and trains apart "
          "from it (export with optimize=False to train them as PyTorch does)",
          v->name, p->name);
}

sg_status sg__ox_torch_roles(ox_ctx *c) {
  const Onnx__GraphProto *gp = c->graph;
  meta *metas = sg__arena_alloc(&c->tmp, (c->n_values ? c->n_values : 1) * sizeof *metas, sizeof(void *));
  if (metas == NULL) return sg__error(SG_ERR_NO_MEMORY, "ONNX import: out of memory");
  memset(metas, 0, (c->n_values ? c->n_values : 1) * sizeof *metas);
  bool signed_export = false;
  const size_t counts[3] = {gp->n_value_info, gp->n_input, gp->n_output};
  Onnx__ValueInfoProto **lists[3] = {gp->value_info, gp->input, gp->output};
  for (int l = 0; l < 3; l++)
    for (size_t i = 0; i < counts[l]; i++) {
      const Onnx__ValueInfoProto *vi = lists[l][i];
      ox_value *v = vi->name ? sg__ox_find(c, vi->name) : NULL;
      if (v == NULL || vi->base.n_unknown_fields == 0) continue;
      meta *m = &metas[v - c->values];
      if (m->kind == NULL) m->kind = metadata(c, &vi->base, VALUE_INFO_METADATA, KIND_KEY);
      if (m->folded == NULL) m->folded = metadata(c, &vi->base, VALUE_INFO_METADATA, FOLDED_KEY);
      if (m->kind) signed_export = true;
    }
  if (!signed_export) return SG_OK; /* not torch.export's: float initializers stay weights */

  targets t = {0};
  const char *signature = metadata(c, &gp->base, GRAPH_METADATA, SIGNATURE_KEY);
  if (signature) each_quoted(c, signature, "PARAMETER target=", add_target, &t);
  /* Whether the optimizer ran and recorded what it folded: only then is an
   * initializer that is neither marked nor folded known to be a lifted
   * constant. (An optimizer that recorded nothing may have folded weights
   * into unmarked initializers: those stay weights, as in other files.) */
  bool provenance = false;
  for (uint32_t i = 0; i < c->n_values; i++) provenance |= metas[i].folded != NULL;

  for (uint32_t i = 0; i < c->n_values; i++) {
    ox_value *v = &c->values[i];
    if (!v->initializer || v->elem != OX_FLOAT || v->role == SG_ROLE_STATE) continue;
    const meta *m = &metas[i];
    if (m->kind) {
      v->role = strcmp(m->kind, "PARAMETER") == 0 ? SG_ROLE_PARAMETER : SG_ROLE_CONSTANT;
      continue;
    }
    if (m->folded == NULL && !provenance) continue;
    source_scan s = {.metas = metas, .targets = t.names, .n_targets = t.n};
    if (m->folded) each_quoted(c, m->folded, NULL, scan_source, &s);
    v->role = s.n_params > 0 ? SG_ROLE_PARAMETER : SG_ROLE_CONSTANT;
    if (s.n_params == 1 && s.param != NULL && s.param != v) tie(c, v, s.param);
  }

  /* Parameters of PyTorch's that no initializer is, nor was folded from:
   * tied ones (written once, under one of their names), and, where the
   * optimizer ran, maybe also ones it merged into another of equal value,
   * which the file cannot tell from ties. */
  uint32_t missing = 0;
  const char *first = NULL;
  for (uint32_t k = 0; k < t.n && provenance; k++) {
    if (sg__ox_find(c, t.names[k])) continue;
    seen s = {t.names[k], false};
    for (uint32_t i = 0; i < c->n_values && !s.found; i++)
      if (metas[i].folded) each_quoted(c, metas[i].folded, NULL, find_name, &s);
    if (!s.found && missing++ == 0) first = t.names[k];
  }
  if (missing)
    SG_WARN(
        "ONNX import: %u of the %u parameters PyTorch exported have no initializer of their own (the first: "
        "'%s'). Tied parameters are written once, but the exporter's optimizer (optimize=True, the default) "
        "also merges parameters of equal value, such as LayerNorm weights at their initial 1, which then "
        "train as one tensor here. To train an export as PyTorch does, export it with "
        "torch.onnx.export(..., optimize=False)",
        missing, t.n, first);
  return SG_OK;
}
